/* Internals shared by the streamclust driver and both backends: the engine struct, the exact
 * fixed-point conversion and the distance function that host and device share, and the
 * backend-neutral gain decision. Reference: Rodinia streamcluster_cuda.cu pgain (CPU part).
 * Plain C11 (also compiled by nvcc inside extern "C"). Not a public header. */
#ifndef DM_STREAMCLUST_IMPL_H
#define DM_STREAMCLUST_IMPL_H

#include <math.h>
#include <stdint.h>

#include "common/hd.h"
#include "streamclust/streamclust.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Squared Euclidean distance in float, summed in dimension order, with no fused multiply-add on
 * either side (host: -ffp-contract=off for this module; device: __f*_rn intrinsics), so that the
 * CPU and the GPU compute the same bits. Rodinia's dist(). */
DM_HD float dm_sc_dist(const float *a, const float *b, int dim)
{
    float r = 0.0f;
    for (int i = 0; i < dim; i++) {
#if defined(__CUDA_ARCH__)
        float t = __fsub_rn(a[i], b[i]);
        r = __fadd_rn(r, __fmul_rn(t, t));
#else
        float t = a[i] - b[i];
        r += t * t;
#endif
    }
    return r;
}

DM_HD float dm_sc_mul(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

/* A float term as a 64-bit fixed-point number with 2^S = scale (a power of two, so the
 * multiplication is exact), rounded to nearest even: the same integer on host and device. */
DM_HD int64_t dm_sc_fix(float v, double scale)
{
#if defined(__CUDA_ARCH__)
    return __double2ll_rn((double)v * scale);
#else
    return (int64_t)llrint((double)v * scale);
#endif
}

/* The scale for a chunk of total weight W whose bounding box has squared diagonal diam2: every
 * partial sum of gain terms is at most W * diam2 (each term is bounded by w_i times the distance of
 * two points of the box), and z <= hiz <= W * diam2; the factor 2 covers float rounding of the
 * distances. S = floor(61 - log2(2 W diam2 + 1)), so every sum stays below 2^61. */
static inline double dm_sc_fix_scale(double w, double diam2, int *s_out)
{
    double b = 2.0 * w * diam2 + 1.0;
    int s = (int)floor(61.0 - log2(b));
    if (s > 1000) s = 1000;
    if (s < -1000) s = -1000;
    if (s_out) *s_out = s;
    return ldexp(1.0, s);
}

struct dm_sc_cuda_state; /* streamclust_cuda.cu */

struct dm_sc_engine {
    int backend;
    dm_sc_points pts;
    long cap;
    int dim;
    double scale;            /* 2^S of the loaded points */
    int scale_s;
    unsigned char *is_center;/* host, n */
    int *center_table;       /* host, n (CPU backend) */
    unsigned char *sw;       /* host switch_membership, n (CPU backend) */
    float *xcost;            /* host, n (CPU backend) */
    int64_t *sums;           /* K+1 fixed sums of the last gain */
    unsigned char *close;    /* K close flags of the last gain */
    long *centers;           /* K points that are centres, in point order */
    long sums_cap;
    int64_t *lower;          /* CPU gain: each thread's K+1 partial sums, lower_threads rows of */
    long lower_stride;       /* lower_stride entries (kept, so that a gain call allocates nothing) */
    int lower_threads;
    int host_valid;          /* 1: host cost/assign are current (CUDA keeps them on the device) */
    dm_sc_stats stats;
    struct dm_sc_cuda_state *cu;
};

/* Backend hooks used by the driver (besides gain and speedy). */
/* CPU: nothing; CUDA: uploads the loaded points (coordinates in the gain instance's layout). */
int dm_sc_cuda_create(dm_sc_engine *e);
void dm_sc_cuda_destroy(dm_sc_engine *e);
int dm_sc_cuda_load(dm_sc_engine *e);
/* After a shuffle of the host arrays (slot, weight): mirror the permutation on the device. */
int dm_sc_cuda_permuted(dm_sc_engine *e);
/* cost[k] = w_k d(k, c), assign[k] = c for all k; host arrays valid afterwards. */
int dm_sc_cuda_dist_to(dm_sc_engine *e, long c);
/* is_center changed on the host: upload the centre table. */
int dm_sc_cuda_set_centers(dm_sc_engine *e);
/* Copies cost and assign to the host arrays. */
int dm_sc_cuda_fetch(dm_sc_engine *e);

/* The final labelling on the CUDA backend (the CPU backend: dm_sc_assign_cpu chunk by chunk).
 * read(out, arg, first, count) writes points first .. first+count-1 of the n to label (row-major,
 * dim floats each) to out; it is called with count <= cap, in order, each call while the device
 * labels the previous chunk. For every point, label[i] and dist[i] as dm_sc_assign_cpu gives them
 * (the same float operations). Chunks hold at most cap points and at most 16 MiB of them; the
 * device buffers are made once, the host staging is two chunks of page-locked memory when pin
 * (pageable memory, not overlapped, if page-locking fails or pin is 0). Everything it allocates is
 * freed before it returns; a failure of read is returned as it is. */
typedef int dm_sc_read_fn(float *out, void *arg, long first, long count);
int dm_sc_label_cuda(int *label, float *dist, long n, long cap, const float *centres, long k,
                     int dim, int pin, dm_sc_read_fn *read, void *arg);

/* Grows e->sums/close/centers to hold k+1 entries. */
int dm_sc_engine_reserve(dm_sc_engine *e, long k);
/* Lists the centres (is_center) in point order into e->centers; returns their number. */
long dm_sc_list_centers(dm_sc_engine *e);

/* The decision of pgain from the exact sums: sums[c] (c < K) is the fixed sum of "lower" of
 * centre c, sums[K] the fixed sum of the savings of switching to x. A centre closes when
 * z + lower > 0; x opens when z + savings - sum of the closing (z + lower) < 0.
 * Writes close[c], *nclose and *gain (Rodinia's return: -cost_of_opening_x, or 0 when x does not
 * open); returns 1 when x opens. Shared by both backends, so decisions are identical. */
int dm_sc_decide(float *gain, long *nclose, unsigned char *close, const int64_t *sums, long K,
                 float z, double scale);

#ifdef __cplusplus
}
#endif
#endif
