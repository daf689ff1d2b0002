/* CUDA kernels of streamclust: the rake-based gain kernel (template instances over block size,
 * rake R and point layout), the per-centre reduction of the work buffer (CUB BlockReduce), the
 * apply step of an accepted gain, the centre-table scatter, speedy's open/update, the layout
 * gather after a shuffle, and the nearest-centre assignment.
 * Reference: streamclust_cpu.c (dm_sc_gain_cpu, dm_sc_speedy_cpu, dm_sc_assign_cpu); Rodinia's
 * kernel_compute_cost (one thread per point, work buffer (K+1) x n) for the gain; the rake scheme
 * of Fang et al. (each thread handles R points, buffer (K+1) x n/R).
 * Every distance uses dm_sc_dist / __f*_rn (no FMA) and every sum is exact fixed point, so all
 * kernels produce the same bits as the CPU reference. */
#ifndef DM_STREAMCLUST_KERNELS_CUH
#define DM_STREAMCLUST_KERNELS_CUH

#include <cub/block/block_reduce.cuh>
#include <stdint.h>

#include "common/tune/tune.h"
#include "streamclust/streamclust_impl.h"

namespace dm_sc {

/* Coordinate d of point i: AoS rows (i * dim + d) or SoA columns (d * n + i). */
template <int LAYOUT>
__device__ __forceinline__ float coord(const float *c, long i, int d, long n, int dim)
{
    if (LAYOUT == DM_LAYOUT_SOA) return c[(size_t)d * (size_t)n + (size_t)i];
    return c[(size_t)i * (size_t)dim + (size_t)d];
}

/* dm_sc_dist between point i (in layout) and a point held in shared memory, same order and
 * rounding as the host. */
template <int LAYOUT>
__device__ __forceinline__ float dist_to_shared(const float *c, long i, long n, int dim,
                                                const float *xs)
{
    float r = 0.0f;
    for (int d = 0; d < dim; d++) {
        float t = __fsub_rn(coord<LAYOUT>(c, i, d, n, dim), xs[d]);
        r = __fadd_rn(r, __fmul_rn(t, t));
    }
    return r;
}

struct gain_args {
    const float *coord; /* n points in the instance's layout */
    const float *weight;
    const float *cost;
    const int *assign;
    const int *center_table;
    unsigned char *sw;  /* out: switch_membership */
    float *xcost;       /* out: weight * d(i, x) */
    int64_t *work;      /* out: (K+1) x T, entry (c, t) at c * T + t */
    long n, T, K, x;
    long ld;            /* SoA column stride (>= n; n except in the tuner's resized workload) */
    int dim;
    double scale;
};

/* Thread t owns column t of the work buffer and R points: consecutive (t R .. t R + R - 1) for
 * AoS (a thread walks rows), strided by T for SoA (neighbouring threads read neighbouring
 * columns, coalesced). Entries K of the column collects the savings of switching to x. */
template <int BLOCK, int RAKE, int LAYOUT>
__global__ void __launch_bounds__(BLOCK) gain_kernel(gain_args a)
{
    extern __shared__ float xs[];
    for (int d = threadIdx.x; d < a.dim; d += BLOCK) xs[d] = coord<LAYOUT>(a.coord, a.x, d, a.ld, a.dim);
    __syncthreads();
    const long t = (long)blockIdx.x * BLOCK + threadIdx.x;
    if (t >= a.T) return;
    int64_t *col = a.work + t;
    for (long c = 0; c < a.K; c++) col[(size_t)c * a.T] = 0;
    int64_t xsum = 0;
#pragma unroll
    for (int j = 0; j < RAKE; j++) {
        const long i = LAYOUT == DM_LAYOUT_SOA ? t + (long)j * a.T : t * RAKE + j;
        if (i >= a.n) continue;
        const float xc = __fmul_rn(dist_to_shared<LAYOUT>(a.coord, i, a.ld, a.dim, xs), a.weight[i]);
        const float cur = a.cost[i];
        a.xcost[i] = xc;
        if (xc < cur) {
            a.sw[i] = 1;
            xsum += dm_sc_fix(__fsub_rn(xc, cur), a.scale);
        } else {
            a.sw[i] = 0;
            col[(size_t)a.center_table[a.assign[i]] * a.T] += dm_sc_fix(__fsub_rn(cur, xc), a.scale);
        }
    }
    col[(size_t)a.K * a.T] = xsum;
}

struct reduce_args {
    const int64_t *work;
    int64_t *sums; /* K+1 */
    long T, K;
};

/* One block per work-buffer row: sums[c] = sum over t of work[c T + t] (exact integers). */
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) reduce_kernel(reduce_args a)
{
    typedef cub::BlockReduce<long long, BLOCK> reduce_t;
    __shared__ typename reduce_t::TempStorage tmp;
    const long c = blockIdx.x;
    const int64_t *row = a.work + (size_t)c * a.T;
    long long s = 0;
    for (long t = threadIdx.x; t < a.T; t += BLOCK) s += row[t];
    long long total = reduce_t(tmp).Sum(s);
    if (threadIdx.x == 0) a.sums[c] = total;
}

struct apply_args {
    const unsigned char *sw;
    const float *xcost;
    const unsigned char *close; /* K, by centre index */
    const int *center_table;
    int *assign;
    float *cost;
    long n, x;
};

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) apply_kernel(apply_args a)
{
    const long i = (long)blockIdx.x * BLOCK + threadIdx.x;
    if (i >= a.n) return;
    if (a.sw[i] || a.close[a.center_table[a.assign[i]]]) {
        a.cost[i] = a.xcost[i];
        a.assign[i] = (int)a.x;
    }
}

struct scatter_args {
    const int *centers; /* K point indices */
    int *center_table;
    long K;
};

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) scatter_kernel(scatter_args a)
{
    const long c = (long)blockIdx.x * BLOCK + threadIdx.x;
    if (c < a.K) a.center_table[a.centers[c]] = (int)c;
}

struct open_args {
    const float *coord;
    const float *weight;
    float *cost;
    int *assign;
    long n, c;
    int dim;
    int init; /* 1: cost = w d(k, c) for all k; 0: only where smaller (speedy's update) */
};

template <int BLOCK, int LAYOUT>
__global__ void __launch_bounds__(BLOCK) open_kernel(open_args a)
{
    extern __shared__ float cs[];
    for (int d = threadIdx.x; d < a.dim; d += BLOCK) cs[d] = coord<LAYOUT>(a.coord, a.c, d, a.n, a.dim);
    __syncthreads();
    const long k = (long)blockIdx.x * BLOCK + threadIdx.x;
    if (k >= a.n) return;
    const float v = __fmul_rn(dist_to_shared<LAYOUT>(a.coord, k, a.n, a.dim, cs), a.weight[k]);
    if (a.init || v < a.cost[k]) {
        a.cost[k] = v;
        a.assign[k] = (int)a.c;
    }
}

struct permute_args {
    const float *src; /* AoS rows as loaded */
    const int *slot;  /* point i lives in row slot[i] */
    float *dst;       /* layout of the gain instance */
    long n;
    int dim;
};

template <int BLOCK, int LAYOUT>
__global__ void __launch_bounds__(BLOCK) permute_kernel(permute_args a)
{
    const long e = (long)blockIdx.x * BLOCK + threadIdx.x;
    if (e >= a.n * a.dim) return;
    long i, d;
    if (LAYOUT == DM_LAYOUT_SOA) { /* consecutive threads write consecutive points of one dim */
        d = e / a.n;
        i = e % a.n;
        a.dst[(size_t)d * a.n + i] = a.src[(size_t)a.slot[i] * a.dim + d];
    } else {
        i = e / a.dim;
        d = e % a.dim;
        a.dst[(size_t)i * a.dim + d] = a.src[(size_t)a.slot[i] * a.dim + d];
    }
}

struct assign_args {
    const float *pts; /* AoS */
    const float *centres;
    int *label;
    float *dist;
    long n, k;
    int dim;
};

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) assign_kernel(assign_args a)
{
    const long i = (long)blockIdx.x * BLOCK + threadIdx.x;
    if (i >= a.n) return;
    const float *p = a.pts + (size_t)i * a.dim;
    int best = 0;
    float bd = dm_sc_dist(p, a.centres, a.dim);
    for (long c = 1; c < a.k; c++) {
        float d = dm_sc_dist(p, a.centres + (size_t)c * a.dim, a.dim);
        if (d < bd) {
            bd = d;
            best = (int)c;
        }
    }
    a.label[i] = best;
    a.dist[i] = bd;
}

} // namespace dm_sc

#endif
