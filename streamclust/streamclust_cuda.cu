/* CUDA backend of streamclust: extern "C" launchers and engine hooks around the kernels of
 * streamclust_kernels.cuh, and their registration with the tuner. The points of a chunk stay on the
 * device from load to the end of the local search; a gain call launches the rake gain kernel, the
 * CUB row reduction and copies K+1 exact sums (8 bytes each) back, decides on the host with the
 * same dm_sc_decide as the CPU reference, and when x opens launches the apply and centre-table
 * kernels. No allocation and no point copy per gain call (the work buffer only grows, rarely).
 * Reference: streamclust_cpu.c; Rodinia streamcluster_cuda.cu (pgain). */
#include <cuda_runtime.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cuda_check.h"
#include "common/log.h"
#include "common/status.h"
#include "common/tune/tune.h"
#include "streamclust/streamclust.h"
#include "streamclust/streamclust_bench.h"
#include "streamclust/streamclust_impl.h"
#include "streamclust/streamclust_kernels.cuh"

using namespace dm_sc;

#define SC_CUDA_TRY(call)                                                                          \
    do {                                                                                           \
        cudaError_t sc_err_ = (call);                                                              \
        if (sc_err_ != cudaSuccess)                                                                \
            return DM_ERR(DM_ERR_CUDA, "%s: %s (%s)", #call, cudaGetErrorString(sc_err_),          \
                          cudaGetErrorName(sc_err_));                                              \
    } while (0)

/* An allocation of this backend: its failure names the stage (common/cuda_check.h). */
#define SC_ALLOC_TRY(call)                                                                         \
    do {                                                                                           \
        int sc_rc_ = (call);                                                                       \
        if (sc_rc_ < 0) return DM_CUDA_STAGE_ERR(sc_rc_, "streamclust");                           \
    } while (0)

static inline unsigned grid_for(long n, int block) { return (unsigned)((n + block - 1) / block); }

/* ------------------------------------------------------------------ launchers (tuner instances) */
/* n = points; the gain kernel's dynamic shared memory holds the candidate (dim floats). */
template <int BLOCK, int RAKE, int LAYOUT>
static int launch_gain(const void *args, size_t n, void *stream)
{
    gain_args a = *(const gain_args *)args;
    a.T = ((long)n + RAKE - 1) / RAKE;
    if (a.T < 1) return DM_OK;
    gain_kernel<BLOCK, RAKE, LAYOUT><<<grid_for(a.T, BLOCK), BLOCK, (size_t)a.dim * sizeof(float),
                                       (cudaStream_t)stream>>>(a);
    SC_CUDA_TRY(cudaGetLastError());
    return DM_OK;
}

/* n = rows (K+1) */
template <int BLOCK>
static int launch_reduce(const void *args, size_t n, void *stream)
{
    if (n == 0) return DM_OK;
    reduce_kernel<BLOCK><<<(unsigned)n, BLOCK, 0, (cudaStream_t)stream>>>(*(const reduce_args *)args);
    SC_CUDA_TRY(cudaGetLastError());
    return DM_OK;
}

template <int BLOCK>
static int launch_apply(const void *args, size_t n, void *stream)
{
    if (n == 0) return DM_OK;
    apply_kernel<BLOCK><<<grid_for((long)n, BLOCK), BLOCK, 0, (cudaStream_t)stream>>>(
        *(const apply_args *)args);
    SC_CUDA_TRY(cudaGetLastError());
    return DM_OK;
}

template <int BLOCK>
static int launch_scatter(const void *args, size_t n, void *stream)
{
    if (n == 0) return DM_OK;
    scatter_kernel<BLOCK><<<grid_for((long)n, BLOCK), BLOCK, 0, (cudaStream_t)stream>>>(
        *(const scatter_args *)args);
    SC_CUDA_TRY(cudaGetLastError());
    return DM_OK;
}

template <int BLOCK, int LAYOUT>
static int launch_open(const void *args, size_t n, void *stream)
{
    const open_args *a = (const open_args *)args;
    if (n == 0) return DM_OK;
    open_kernel<BLOCK, LAYOUT><<<grid_for((long)n, BLOCK), BLOCK, (size_t)a->dim * sizeof(float),
                                 (cudaStream_t)stream>>>(*a);
    SC_CUDA_TRY(cudaGetLastError());
    return DM_OK;
}

/* n = elements (points x dim) */
template <int BLOCK, int LAYOUT>
static int launch_permute(const void *args, size_t n, void *stream)
{
    if (n == 0) return DM_OK;
    permute_kernel<BLOCK, LAYOUT><<<grid_for((long)n, BLOCK), BLOCK, 0, (cudaStream_t)stream>>>(
        *(const permute_args *)args);
    SC_CUDA_TRY(cudaGetLastError());
    return DM_OK;
}

template <int BLOCK>
static int launch_assign(const void *args, size_t n, void *stream)
{
    if (n == 0) return DM_OK;
    assign_kernel<BLOCK><<<grid_for((long)n, BLOCK), BLOCK, 0, (cudaStream_t)stream>>>(
        *(const assign_args *)args);
    SC_CUDA_TRY(cudaGetLastError());
    return DM_OK;
}

#define SC_GAIN(B, R, L)                                                                           \
    {{B, R, (L) == DM_LAYOUT_SOA, L, 0}, launch_gain<B, R, L>,                                     \
     (const void *)&gain_kernel<B, R, L>, 0}
#define SC_GAIN_R(B, L)                                                                            \
    SC_GAIN(B, 1, L), SC_GAIN(B, 2, L), SC_GAIN(B, 4, L), SC_GAIN(B, 8, L), SC_GAIN(B, 16, L),     \
        SC_GAIN(B, 32, L)

/* Block size x rake x layout (AoS: consecutive points per thread; SoA: strided by the grid).
 * smem_per_block is 0 here: the dynamic shared memory is dim floats, known only at launch. */
static const dm_tune_instance g_gain_instances[] = {
    SC_GAIN_R(128, DM_LAYOUT_SOA), SC_GAIN_R(256, DM_LAYOUT_SOA), SC_GAIN_R(512, DM_LAYOUT_SOA),
    SC_GAIN_R(128, DM_LAYOUT_AOS), SC_GAIN_R(256, DM_LAYOUT_AOS), SC_GAIN_R(512, DM_LAYOUT_AOS),
};
#define SC_N_GAIN ((int)(sizeof g_gain_instances / sizeof g_gain_instances[0]))
/* The default (untuned runs, DOCMINE_TUNE=off): block 256, rake 1, SoA, the fastest at dim 256 in
 * the sweeps (bench/RESULTS.md: 0.103 s of gain on Rodinia's default run against 0.349 s at rake
 * 4, the default before session 15); the work buffer is then (K+1) x n, 6.8 MB there. */
#define SC_GAIN_DEFAULT 6

static const dm_tune_instance g_reduce_instances[] = {
    {{256, 1, 1, DM_LAYOUT_NONE, 0}, launch_reduce<256>, (const void *)&reduce_kernel<256>, 0}};
static const dm_tune_instance g_apply_instances[] = {
    {{256, 1, 0, DM_LAYOUT_NONE, 0}, launch_apply<256>, (const void *)&apply_kernel<256>, 0}};
static const dm_tune_instance g_scatter_instances[] = {
    {{128, 1, 0, DM_LAYOUT_NONE, 0}, launch_scatter<128>, (const void *)&scatter_kernel<128>, 0}};
static const dm_tune_instance g_open_aos_instances[] = {
    {{256, 1, 0, DM_LAYOUT_AOS, 0}, launch_open<256, DM_LAYOUT_AOS>,
     (const void *)&open_kernel<256, DM_LAYOUT_AOS>, 0}};
static const dm_tune_instance g_open_soa_instances[] = {
    {{256, 1, 0, DM_LAYOUT_SOA, 0}, launch_open<256, DM_LAYOUT_SOA>,
     (const void *)&open_kernel<256, DM_LAYOUT_SOA>, 0}};
static const dm_tune_instance g_permute_aos_instances[] = {
    {{256, 1, 0, DM_LAYOUT_AOS, 0}, launch_permute<256, DM_LAYOUT_AOS>,
     (const void *)&permute_kernel<256, DM_LAYOUT_AOS>, 0}};
static const dm_tune_instance g_permute_soa_instances[] = {
    {{256, 1, 0, DM_LAYOUT_SOA, 0}, launch_permute<256, DM_LAYOUT_SOA>,
     (const void *)&permute_kernel<256, DM_LAYOUT_SOA>, 0}};
static const dm_tune_instance g_assign_instances[] = {
    {{128, 1, 0, DM_LAYOUT_NONE, 0}, launch_assign<128>, (const void *)&assign_kernel<128>, 0}};

/* ------------------------------------------------------------------ tuning workload of gain */
/* n points of DIM dims from the generator, 16 centres (points 0..15), every point at its nearest
 * centre, candidate n/2. Output: the K+1 exact sums, identical for every correct instance.
 *
 * The best gain instance depends on DIM, not only on the number of points (the tuner's key): the
 * distance work per point grows with DIM while the work buffer and its reduction ((K+1) x n/R
 * sums, one reduction block per row) do not. At small DIM the buffer and the reduction weigh
 * most and a larger rake (half the buffer) wins; at large DIM the kernel is bound by the latency
 * of its serial distance loops on few threads (65536 points fill ~15 of 64 warps per SM of an
 * H200) and rake 1 (the most threads) wins. A single workload of DIM 64 picked rake 2 for
 * Rodinia's DIM-256 run, 1.46x slower than the sweep's best rake-1 instance (bench/RESULTS.md).
 * So the gain kernel is registered once per DIM class, each tuned on a workload of that class:
 *   streamclust.gain        DIM <  SC_GAIN_WIDE_DIM   workload DIM 64
 *   streamclust.gain_d256   DIM >= SC_GAIN_WIDE_DIM   workload DIM 256 (Rodinia's default run) */
#define SC_GAIN_WIDE_DIM 128
struct sc_bench {
    long n, n0, K, Tmax; /* n: current size (<= n0, the size the state was built for) */
    int dim;
    double scale;
    float *d_aos, *d_soa, *d_w, *d_cost, *d_xcost;
    int *d_assign, *d_ct;
    unsigned char *d_sw;
    int64_t *d_work, *d_sums;
};

static void sc_bench_destroy(void *state)
{
    sc_bench *b = (sc_bench *)state;
    if (!b) return;
    cudaFree(b->d_aos);
    cudaFree(b->d_soa);
    cudaFree(b->d_w);
    cudaFree(b->d_cost);
    cudaFree(b->d_xcost);
    cudaFree(b->d_assign);
    cudaFree(b->d_ct);
    cudaFree(b->d_sw);
    cudaFree(b->d_work);
    cudaFree(b->d_sums);
    dm_free(b);
}

static int sc_bench_create_dim(void **state, size_t n, uint64_t seed, int dim_)
{
    *state = NULL;
    if (n < 32) n = 32;
    sc_bench *b = (sc_bench *)dm_calloc(1, sizeof *b);
    if (!b) return DM_ERR(DM_ERR_NOMEM, "streamclust.gain bench");
    b->n = (long)n;
    b->n0 = (long)n;
    b->dim = dim_;
    b->K = 16;
    b->Tmax = b->n; /* rake 1 */
    const int dim = b->dim;
    float *h = (float *)dm_malloc((size_t)n * dim * sizeof(float));
    float *hs = (float *)dm_malloc((size_t)n * dim * sizeof(float));
    float *w = (float *)dm_malloc((size_t)n * sizeof(float));
    float *cost = (float *)dm_malloc((size_t)n * sizeof(float));
    int *as = (int *)dm_malloc((size_t)n * sizeof(int));
    int *ct = (int *)dm_malloc((size_t)n * sizeof(int));
    int rc = (h && hs && w && cost && as && ct) ? DM_OK : DM_ERR(DM_ERR_NOMEM, "gain bench host");
    if (rc == DM_OK) {
        dm_sc_rng r;
        dm_sc_rng_seed(&r, (long)(seed & 0x7fffffff));
        for (size_t i = 0; i < n * (size_t)dim; i++) h[i] = (float)dm_sc_rng_next(&r) / (float)INT_MAX;
        for (size_t i = 0; i < n; i++)
            for (int d = 0; d < dim; d++) hs[(size_t)d * n + i] = h[i * dim + d];
        double wsum = 0;
        for (size_t i = 0; i < n; i++) {
            w[i] = 1.0f + (float)(i % 3);
            wsum += w[i];
            int best = 0;
            float bd = dm_sc_dist(h + i * dim, h, dim);
            for (int c = 1; c < b->K; c++) {
                float d = dm_sc_dist(h + i * dim, h + (size_t)c * dim, dim);
                if (d < bd) { bd = d; best = c; }
            }
            as[i] = best;
            cost[i] = bd * w[i];
            ct[i] = i < (size_t)b->K ? (int)i : 0;
        }
        b->scale = dm_sc_fix_scale(wsum, (double)dim, NULL);
    }
    const size_t fb = (size_t)n * dim * sizeof(float);
    /* device buffers of a tuning input: uncounted, as common/tune/workload_cuda.cuh's */
#define SC_BALLOC(p, bytes) \
    if (rc == DM_OK && cudaMalloc((void **)&(p), (bytes)) != cudaSuccess) \
        rc = DM_ERR(DM_ERR_CUDA, "gain bench: cudaMalloc %zu bytes", (size_t)(bytes));
    SC_BALLOC(b->d_aos, fb);
    SC_BALLOC(b->d_soa, fb);
    SC_BALLOC(b->d_w, n * sizeof(float));
    SC_BALLOC(b->d_cost, n * sizeof(float));
    SC_BALLOC(b->d_xcost, n * sizeof(float));
    SC_BALLOC(b->d_assign, n * sizeof(int));
    SC_BALLOC(b->d_ct, n * sizeof(int));
    SC_BALLOC(b->d_sw, n);
    SC_BALLOC(b->d_work, (size_t)(b->K + 1) * b->Tmax * sizeof(int64_t));
    SC_BALLOC(b->d_sums, (size_t)(b->K + 1) * sizeof(int64_t));
#undef SC_BALLOC
    if (rc == DM_OK &&
        (cudaMemcpy(b->d_aos, h, fb, cudaMemcpyHostToDevice) != cudaSuccess ||
         cudaMemcpy(b->d_soa, hs, fb, cudaMemcpyHostToDevice) != cudaSuccess ||
         cudaMemcpy(b->d_w, w, n * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess ||
         cudaMemcpy(b->d_cost, cost, n * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess ||
         cudaMemcpy(b->d_assign, as, n * sizeof(int), cudaMemcpyHostToDevice) != cudaSuccess ||
         cudaMemcpy(b->d_ct, ct, n * sizeof(int), cudaMemcpyHostToDevice) != cudaSuccess))
        rc = DM_ERR(DM_ERR_CUDA, "gain bench: upload");
    dm_free(h);
    dm_free(hs);
    dm_free(w);
    dm_free(cost);
    dm_free(as);
    dm_free(ct);
    if (rc < 0) {
        sc_bench_destroy(b);
        return rc;
    }
    *state = b;
    return DM_OK;
}

static int sc_bench_create(void **state, size_t n, uint64_t seed)
{
    return sc_bench_create_dim(state, n, seed, 64);
}
static int sc_bench_create_d256(void **state, size_t n, uint64_t seed)
{
    return sc_bench_create_dim(state, n, seed, 256);
}

static int sc_bench_run(void *state, const dm_tune_instance *inst, void *stream)
{
    sc_bench *b = (sc_bench *)state;
    gain_args a;
    a.coord = inst->policy.layout == DM_LAYOUT_SOA ? b->d_soa : b->d_aos;
    a.weight = b->d_w;
    a.cost = b->d_cost;
    a.assign = b->d_assign;
    a.center_table = b->d_ct;
    a.sw = b->d_sw;
    a.xcost = b->d_xcost;
    a.work = b->d_work;
    a.n = b->n;
    a.T = (b->n + inst->policy.rake - 1) / inst->policy.rake;
    a.K = b->K;
    a.x = b->n / 2;
    a.ld = b->n0;
    a.dim = b->dim;
    a.scale = b->scale;
    DM_TRY(inst->launch(&a, (size_t)b->n, stream));
    reduce_args r = {b->d_work, b->d_sums, a.T, b->K};
    return g_reduce_instances[0].launch(&r, (size_t)(b->K + 1), stream);
}

/* The tuner's prefix reuse: the first n points with the same centres, costs and layout stride. */
static int sc_bench_resize(void *state, size_t n)
{
    sc_bench *b = (sc_bench *)state;
    if (n < 32) n = 32;
    if ((long)n > b->n0) return DM_ERR(DM_ERR_INVALID_ARG, "gain bench: resize %zu > %ld", n, b->n0);
    b->n = (long)n;
    return DM_OK;
}

static int sc_bench_output(void *state, void *host, size_t *nbytes)
{
    sc_bench *b = (sc_bench *)state;
    *nbytes = (size_t)(b->K + 1) * sizeof(int64_t);
    if (!host) return DM_OK;
    SC_CUDA_TRY(cudaMemcpy(host, b->d_sums, *nbytes, cudaMemcpyDeviceToHost));
    return DM_OK;
}

/* The other kernels' tuning workloads are in streamclust_bench_cuda.cu (streamclust_bench.h): a
 * create hook per kernel, shared run / output / destroy; RESIZE is dm_sc_bench_resize or NULL (the
 * SoA workloads, whose column stride is the point count). */
#define SC_KERNEL(var, name, desc, unit, inst, W, RESIZE)                                          \
    static const dm_tune_kernel var = {name, desc, unit, inst,                                     \
                                       (int)(sizeof inst / sizeof inst[0]), 0,                     \
                                       dm_sc_bench_##W##_create, dm_sc_bench_run,                  \
                                       dm_sc_bench_output, dm_sc_bench_destroy, 0.0,               \
                                       DM_SC_BENCH_N_##W, 1.0, RESIZE}

/* tolerance 0: the sums are exact integers, every instance must give the same bytes */
static const dm_tune_kernel k_gain = {
    "streamclust.gain", "pgain: rake-based savings and per-centre charges (fixed point), DIM < 128",
    "points", g_gain_instances, SC_N_GAIN, SC_GAIN_DEFAULT, sc_bench_create, sc_bench_run,
    sc_bench_output, sc_bench_destroy, 0.0, (size_t)1 << 16, 1.0, sc_bench_resize};
static const dm_tune_kernel k_gain_d256 = {
    "streamclust.gain_d256", "pgain as streamclust.gain, DIM >= 128 (tuned at DIM 256)", "points",
    g_gain_instances, SC_N_GAIN, SC_GAIN_DEFAULT, sc_bench_create_d256, sc_bench_run,
    sc_bench_output, sc_bench_destroy, 0.0, (size_t)1 << 16, 1.0, sc_bench_resize};

/* The gain kernel registration (DIM class) whose tuned choice serves points of dim dims. */
static const dm_tune_kernel *sc_gain_kernel(int dim) { return dim >= SC_GAIN_WIDE_DIM ? &k_gain_d256 : &k_gain; }
SC_KERNEL(k_reduce, "streamclust.reduce", "per-centre rows of the gain work buffer (CUB)", "rows",
          g_reduce_instances, reduce, dm_sc_bench_resize);
SC_KERNEL(k_apply, "streamclust.apply", "moves points of an accepted gain", "points",
          g_apply_instances, apply, dm_sc_bench_resize);
SC_KERNEL(k_scatter, "streamclust.scatter", "centre index table", "centres", g_scatter_instances,
          scatter, dm_sc_bench_resize);
SC_KERNEL(k_open_aos, "streamclust.open_aos", "speedy open/update, AoS points", "points",
          g_open_aos_instances, open_aos, dm_sc_bench_resize);
SC_KERNEL(k_open_soa, "streamclust.open_soa", "speedy open/update, SoA points", "points",
          g_open_soa_instances, open_soa, NULL);
SC_KERNEL(k_permute_aos, "streamclust.permute_aos", "shuffle gather into AoS", "floats",
          g_permute_aos_instances, permute_aos, dm_sc_bench_resize);
SC_KERNEL(k_permute_soa, "streamclust.permute_soa", "shuffle gather into SoA", "floats",
          g_permute_soa_instances, permute_soa, NULL);
SC_KERNEL(k_assign, "streamclust.assign", "nearest final centre of every point", "points",
          g_assign_instances, assign, dm_sc_bench_resize);

extern "C" int dm_sc_tune_register(void)
{
    const dm_tune_kernel *all[] = {&k_gain,       &k_gain_d256,   &k_reduce,      &k_apply,
                                   &k_scatter,    &k_open_aos,    &k_open_soa,
                                   &k_permute_aos, &k_permute_soa, &k_assign};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) DM_TRY(dm_tune_register(all[i]));
    return DM_OK;
}

static int g_force_gain = -1;

extern "C" int dm_sc_cuda_gain_instances(void) { return SC_N_GAIN; }

extern "C" const char *dm_sc_cuda_gain_instance_name(int i, char *buf, size_t len)
{
    if (i < 0 || i >= SC_N_GAIN) {
        snprintf(buf, len, "tuner");
        return buf;
    }
    return dm_tune_policy_str(&g_gain_instances[i].policy, buf, len);
}

extern "C" int dm_sc_cuda_force_gain_instance(int i)
{
    if (i >= SC_N_GAIN) return DM_ERR(DM_ERR_INVALID_ARG, "gain instance %d of %d", i, SC_N_GAIN);
    g_force_gain = i < 0 ? -1 : i;
    return DM_OK;
}

/* ------------------------------------------------------------------ engine state */
struct dm_sc_cuda_state {
    long cap;
    int dim;
    cudaStream_t stream;
    float *d_orig, *d_coord, *d_w, *d_cost, *d_xcost;
    int *d_assign, *d_ct, *d_slot, *d_centers;
    unsigned char *d_sw, *d_close;
    int64_t *d_work, *d_sums;
    size_t work_elems;
    long sums_cap;
    int64_t *h_sums; /* pinned */
    int *h_int;      /* host staging of int arrays, cap */
    const dm_tune_instance *gain;
    int layout;
};

extern "C" void dm_sc_cuda_destroy(dm_sc_engine *e)
{
    dm_sc_cuda_state *s = e->cu;
    if (!s) return;
    dm_device_free(s->d_orig);
    dm_device_free(s->d_coord);
    dm_device_free(s->d_w);
    dm_device_free(s->d_cost);
    dm_device_free(s->d_xcost);
    dm_device_free(s->d_assign);
    dm_device_free(s->d_ct);
    dm_device_free(s->d_slot);
    dm_device_free(s->d_centers);
    dm_device_free(s->d_sw);
    dm_device_free(s->d_close);
    dm_device_free(s->d_work);
    dm_device_free(s->d_sums);
    dm_host_free_pinned(s->h_sums);
    dm_free(s->h_int);
    if (s->stream) cudaStreamDestroy(s->stream);
    dm_free(s);
    e->cu = NULL;
}

extern "C" int dm_sc_cuda_create(dm_sc_engine *e)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
        return DM_ERR(DM_ERR_NO_DEVICE, "streamclust: no CUDA device");
    if ((size_t)e->dim * sizeof(float) > 48 * 1024)
        return DM_ERR(DM_ERR_UNSUPPORTED, "streamclust CUDA: DIM %d above 12288", e->dim);
    dm_sc_cuda_state *s = (dm_sc_cuda_state *)dm_calloc(1, sizeof *s);
    if (!s) return DM_ERR(DM_ERR_NOMEM, "streamclust CUDA state");
    e->cu = s; /* what is allocated below is freed by dm_sc_cuda_destroy, also after a failure */
    s->cap = e->cap;
    s->dim = e->dim;
    const size_t cap = (size_t)e->cap, fb = cap * (size_t)e->dim * sizeof(float);
    SC_CUDA_TRY(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    SC_ALLOC_TRY(dm_device_alloc((void **)&s->d_orig, fb));
    SC_ALLOC_TRY(dm_device_alloc((void **)&s->d_coord, fb));
    SC_ALLOC_TRY(dm_device_alloc((void **)&s->d_w, cap * sizeof(float)));
    SC_ALLOC_TRY(dm_device_alloc((void **)&s->d_cost, cap * sizeof(float)));
    SC_ALLOC_TRY(dm_device_alloc((void **)&s->d_xcost, cap * sizeof(float)));
    SC_ALLOC_TRY(dm_device_alloc((void **)&s->d_assign, cap * sizeof(int)));
    SC_ALLOC_TRY(dm_device_alloc((void **)&s->d_ct, cap * sizeof(int)));
    SC_ALLOC_TRY(dm_device_alloc((void **)&s->d_slot, cap * sizeof(int)));
    SC_ALLOC_TRY(dm_device_alloc((void **)&s->d_centers, cap * sizeof(int)));
    SC_ALLOC_TRY(dm_device_alloc((void **)&s->d_sw, cap));
    SC_ALLOC_TRY(dm_device_alloc((void **)&s->d_close, cap + 1));
    SC_ALLOC_TRY(dm_device_alloc((void **)&s->d_sums, (cap + 1) * sizeof(int64_t)));
    SC_ALLOC_TRY(dm_host_alloc_pinned((void **)&s->h_sums, (cap + 1) * sizeof(int64_t)));
    s->sums_cap = (long)cap + 1;
    s->h_int = (int *)dm_malloc(cap * sizeof(int));
    if (!s->h_int) return DM_ERR(DM_ERR_NOMEM, "streamclust CUDA staging");
    SC_CUDA_TRY(cudaMemset(s->d_ct, 0, cap * sizeof(int)));
    return DM_OK;
}

/* Gathers the loaded rows into the gain instance's layout in the current point order. */
static int sc_gather(dm_sc_engine *e)
{
    dm_sc_cuda_state *s = e->cu;
    const long n = e->pts.num;
    for (long i = 0; i < n; i++) s->h_int[i] = (int)e->pts.slot[i];
    SC_CUDA_TRY(cudaMemcpyAsync(s->d_slot, s->h_int, (size_t)n * sizeof(int), cudaMemcpyHostToDevice,
                                s->stream));
    SC_CUDA_TRY(cudaMemcpyAsync(s->d_w, e->pts.weight, (size_t)n * sizeof(float),
                                cudaMemcpyHostToDevice, s->stream));
    permute_args a = {s->d_orig, s->d_slot, s->d_coord, n, e->dim};
    const dm_tune_kernel *k = s->layout == DM_LAYOUT_SOA ? &k_permute_soa : &k_permute_aos;
    size_t elems = (size_t)n * (size_t)e->dim;
    DM_TRY(dm_tune_select(k, elems)->launch(&a, elems, s->stream));
    /* h_int is reused by the next call: wait for the upload */
    SC_CUDA_TRY(cudaStreamSynchronize(s->stream));
    return DM_OK;
}

extern "C" int dm_sc_cuda_load(dm_sc_engine *e)
{
    dm_sc_cuda_state *s = e->cu;
    const long n = e->pts.num;
    s->gain = g_force_gain >= 0 ? &g_gain_instances[g_force_gain]
                                : dm_tune_select(sc_gain_kernel(e->dim), (size_t)n);
    s->layout = s->gain->policy.layout;
    char buf[96];
    snprintf(e->stats.gain_policy, sizeof e->stats.gain_policy, "%s",
             dm_tune_policy_str(&s->gain->policy, buf, sizeof buf));
    /* rows are loaded in slot order 0..n-1 by the caller */
    SC_CUDA_TRY(cudaMemcpyAsync(s->d_orig, e->pts.coord, (size_t)n * e->dim * sizeof(float),
                                cudaMemcpyHostToDevice, s->stream));
    return sc_gather(e);
}

extern "C" int dm_sc_cuda_permuted(dm_sc_engine *e) { return sc_gather(e); }

static int sc_open(dm_sc_engine *e, long c, int init)
{
    dm_sc_cuda_state *s = e->cu;
    open_args a = {s->d_coord, s->d_w, s->d_cost, s->d_assign, e->pts.num, c, e->dim, init};
    const dm_tune_kernel *k = s->layout == DM_LAYOUT_SOA ? &k_open_soa : &k_open_aos;
    return dm_tune_select(k, (size_t)e->pts.num)->launch(&a, (size_t)e->pts.num, s->stream);
}

extern "C" int dm_sc_cuda_fetch(dm_sc_engine *e)
{
    dm_sc_cuda_state *s = e->cu;
    const long n = e->pts.num;
    SC_CUDA_TRY(cudaMemcpyAsync(e->pts.cost, s->d_cost, (size_t)n * sizeof(float),
                                cudaMemcpyDeviceToHost, s->stream));
    SC_CUDA_TRY(cudaMemcpyAsync(s->h_int, s->d_assign, (size_t)n * sizeof(int),
                                cudaMemcpyDeviceToHost, s->stream));
    SC_CUDA_TRY(cudaStreamSynchronize(s->stream));
    for (long i = 0; i < n; i++) e->pts.assign[i] = s->h_int[i];
    e->host_valid = 1;
    return DM_OK;
}

extern "C" int dm_sc_cuda_dist_to(dm_sc_engine *e, long c)
{
    DM_TRY(sc_open(e, c, 1));
    return dm_sc_cuda_fetch(e);
}

extern "C" int dm_sc_cuda_set_centers(dm_sc_engine *e)
{
    dm_sc_cuda_state *s = e->cu;
    DM_TRY(dm_sc_engine_reserve(e, e->pts.num));
    long K = dm_sc_list_centers(e);
    for (long c = 0; c < K; c++) s->h_int[c] = (int)e->centers[c];
    SC_CUDA_TRY(cudaMemcpyAsync(s->d_centers, s->h_int, (size_t)K * sizeof(int),
                                cudaMemcpyHostToDevice, s->stream));
    scatter_args a = {s->d_centers, s->d_ct, K};
    DM_TRY(dm_tune_select(&k_scatter, (size_t)K)->launch(&a, (size_t)K, s->stream));
    SC_CUDA_TRY(cudaStreamSynchronize(s->stream)); /* h_int reuse */
    return DM_OK;
}

/* Rodinia's pspeedy with the draws on the host: after each open the device updates the costs and
 * the host reads back the costs of the points still to be drawn for. */
extern "C" int dm_sc_speedy_cuda(float *cost, dm_sc_engine *e, float z, long *kcenter, dm_sc_rng *rng)
{
    dm_sc_cuda_state *s = e->cu;
    dm_sc_points *p = &e->pts;
    const long n = p->num;
    DM_TRY(sc_open(e, 0, 1));
    SC_CUDA_TRY(cudaMemcpyAsync(p->cost, s->d_cost, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost,
                                s->stream));
    SC_CUDA_TRY(cudaStreamSynchronize(s->stream));
    *kcenter = 1;
    for (long i = 1; i < n; i++) {
        int to_open = ((float)dm_sc_rng_next(rng) / (float)INT_MAX) < (p->cost[i] / z);
        if (!to_open) continue;
        (*kcenter)++;
        DM_TRY(sc_open(e, i, 0));
        if (i + 1 < n) {
            SC_CUDA_TRY(cudaMemcpyAsync(p->cost + i + 1, s->d_cost + i + 1,
                                        (size_t)(n - i - 1) * sizeof(float), cudaMemcpyDeviceToHost,
                                        s->stream));
            SC_CUDA_TRY(cudaStreamSynchronize(s->stream));
        }
    }
    DM_TRY(dm_sc_cuda_fetch(e));
    float total = 0.0f;
    for (long k = 0; k < n; k++) total += p->cost[k];
    *cost = z * (float)(*kcenter) + total;
    e->stats.speedy_calls++;
    return DM_OK;
}

static int sc_reserve_work(dm_sc_cuda_state *s, long K, long T)
{
    size_t need = (size_t)(K + 1) * (size_t)T;
    if (need > s->work_elems) {
        size_t cap = s->work_elems ? s->work_elems : need;
        while (cap < need) cap *= 2;
        dm_device_free(s->d_work);
        s->d_work = NULL;
        s->work_elems = 0;
        SC_ALLOC_TRY(dm_device_alloc((void **)&s->d_work, cap * sizeof(int64_t)));
        s->work_elems = cap;
    }
    return DM_OK;
}

extern "C" int dm_sc_gain_cuda(float *gain, dm_sc_engine *e, long x, float z, long *numcenters)
{
    dm_sc_cuda_state *s = e->cu;
    dm_sc_points *p = &e->pts;
    const long n = p->num;
    if (x < 0 || x >= n) return DM_ERR(DM_ERR_INVALID_ARG, "gain: candidate %ld outside [0, %ld)", x, n);
    const long K = *numcenters;
    DM_TRY(dm_sc_engine_reserve(e, K));
    const int rake = s->gain->policy.rake;
    const long T = (n + rake - 1) / rake;
    DM_TRY(sc_reserve_work(s, K, T));
    size_t wb = (size_t)(K + 1) * (size_t)T * sizeof(int64_t);
    if (wb > e->stats.work_bytes) e->stats.work_bytes = wb; /* peak */
    gain_args a = {s->d_coord, s->d_w, s->d_cost, s->d_assign, s->d_ct, s->d_sw, s->d_xcost,
                   s->d_work, n, T, K, x, n, e->dim, e->scale};
    DM_TRY(s->gain->launch(&a, (size_t)n, s->stream));
    reduce_args r = {s->d_work, s->d_sums, T, K};
    DM_TRY(dm_tune_select(&k_reduce, (size_t)(K + 1))->launch(&r, (size_t)(K + 1), s->stream));
    SC_CUDA_TRY(cudaMemcpyAsync(s->h_sums, s->d_sums, (size_t)(K + 1) * sizeof(int64_t),
                                cudaMemcpyDeviceToHost, s->stream));
    SC_CUDA_TRY(cudaStreamSynchronize(s->stream));
    memcpy(e->sums, s->h_sums, (size_t)(K + 1) * sizeof(int64_t));
    e->stats.gain_calls++;
    long nclose = 0;
    if (!dm_sc_decide(gain, &nclose, e->close, e->sums, K, z, e->scale)) return DM_OK;
    /* x opens: the device moves the points, the host keeps the centre set */
    SC_CUDA_TRY(cudaMemcpyAsync(s->d_close, e->close, (size_t)K, cudaMemcpyHostToDevice, s->stream));
    apply_args ap = {s->d_sw, s->d_xcost, s->d_close, s->d_ct, s->d_assign, s->d_cost, n, x};
    DM_TRY(dm_tune_select(&k_apply, (size_t)n)->launch(&ap, (size_t)n, s->stream));
    /* e->centers lists the centres by index, as uploaded by the last set_centers */
    for (long c = 0; c < K; c++)
        if (e->close[c]) e->is_center[e->centers[c]] = 0;
    e->is_center[x] = 1;
    *numcenters = *numcenters + 1 - nclose;
    e->host_valid = 0;
    e->stats.gain_opens++;
    DM_TRY(dm_sc_cuda_set_centers(e)); /* also waits for the close flags upload */
    DM_ASSERT(dm_sc_list_centers(e) == *numcenters);
    return DM_OK;
}

/* ------------------------------------------------------------------ final labelling */
/* The labelling of a rank's points by the nearest final centre (dm_sc_label_cuda), pipelined over
 * chunks: the device buffers are made once and the centres uploaded once; the host fills one of two
 * staging buffers (page-locked) with chunk c + 1 while the stream uploads chunk c from the other,
 * labels it (k_assign) and downloads its labels and distances into page-locked memory. Per chunk it
 * used to allocate and free four device buffers and copy from and to pageable memory with blocking
 * cudaMemcpy, the host reading the next chunk only after the device had finished (0.26-0.39 s at
 * 1M documents of DIM 256 on an H200, bench/RESULTS.md session 15). */
/* A chunk's staging buffer holds at most this many bytes of points (as tfidf's staging buffers):
 * page-locking is slow (a chunk of CHUNKSIZE 65536 at DIM 256 would be 64 MiB a buffer), and small
 * chunks leave less of the first read and of the last chunk's device work outside the overlap. */
#define SC_LABEL_CHUNK_BYTES ((size_t)16 << 20)

struct sc_labeller {
    long cap, k, m; /* m: points of the chunk in flight (valid while pending) */
    int dim, pinned, pending;
    cudaStream_t stream;
    const dm_tune_instance *inst;
    float *d_pts, *d_c, *d_dist;
    int *d_label;
    void *h_block;     /* the host staging below, one block: page-locked (pinned) or pageable */
    float *h_pts[2];   /* cap x dim each: the chunk being uploaded and the one being read */
    int *h_label;      /* cap: the labels of the chunk in flight */
    float *h_dist;     /* cap */
};

static int sc_label_cuda_err(cudaError_t err, const char *what, long m)
{
    return DM_ERR(DM_ERR_CUDA, "streamclust labelling: %s (%ld points): %s (%s)", what, m,
                  cudaGetErrorString(err), cudaGetErrorName(err));
}

static void sc_labeller_free(sc_labeller *a)
{
    if (!a) return;
    /* a failed submit may have left copies from the staging in flight */
    if (a->stream) cudaStreamSynchronize(a->stream);
    dm_device_free(a->d_pts);
    dm_device_free(a->d_c);
    dm_device_free(a->d_dist);
    dm_device_free(a->d_label);
    if (a->pinned) dm_host_free_pinned(a->h_block);
    else dm_free(a->h_block);
    if (a->stream) cudaStreamDestroy(a->stream);
    dm_free(a);
}

/* Device buffers for chunks of up to cap points, the centres on the device, and the host staging:
 * pinned when pin (pageable memory if page-locking fails: slower, not overlapped, same result). */
static int sc_labeller_create(sc_labeller **out, long cap, const float *centres, long k, int dim,
                              int pin)
{
    *out = NULL;
    sc_labeller *a = (sc_labeller *)dm_calloc(1, sizeof *a);
    if (!a) return DM_ERR(DM_ERR_NOMEM, "streamclust labelling: state");
    a->cap = cap;
    a->k = k;
    a->dim = dim;
    const size_t pb = (size_t)cap * (size_t)dim * sizeof(float);
    const size_t hb = 2 * pb + (size_t)cap * (sizeof(int) + sizeof(float));
    int rc = DM_OK;
    cudaError_t err = cudaStreamCreateWithFlags(&a->stream, cudaStreamNonBlocking);
    if (err != cudaSuccess) {
        a->stream = NULL;
        rc = sc_label_cuda_err(err, "stream", cap);
    }
    if (rc == DM_OK) rc = dm_device_alloc((void **)&a->d_pts, pb);
    if (rc == DM_OK) rc = dm_device_alloc((void **)&a->d_c, (size_t)k * (size_t)dim * sizeof(float));
    if (rc == DM_OK) rc = dm_device_alloc((void **)&a->d_label, (size_t)cap * sizeof(int));
    if (rc == DM_OK) rc = dm_device_alloc((void **)&a->d_dist, (size_t)cap * sizeof(float));
    if (rc == DM_OK && pin) {
        if (dm_host_alloc_pinned(&a->h_block, hb) == DM_OK) {
            a->pinned = 1;
        } else {
            dm_log_warn("streamclust: %s; labelling from pageable memory (not overlapped)",
                        dm_error_message());
            dm_error_clear();
        }
    }
    if (rc == DM_OK && !a->pinned) {
        a->h_block = dm_malloc(hb);
        if (!a->h_block) rc = DM_ERR(DM_ERR_NOMEM, "streamclust labelling: %zu bytes of staging", hb);
    }
    if (rc == DM_OK) {
        a->h_pts[0] = (float *)a->h_block;
        a->h_pts[1] = a->h_pts[0] + (size_t)cap * (size_t)dim;
        a->h_label = (int *)(a->h_pts[1] + (size_t)cap * (size_t)dim);
        a->h_dist = (float *)(a->h_label + cap);
        /* from pageable memory: the copy has left centres when the call returns */
        err = cudaMemcpyAsync(a->d_c, centres, (size_t)k * (size_t)dim * sizeof(float),
                              cudaMemcpyHostToDevice, a->stream);
        if (err != cudaSuccess) rc = sc_label_cuda_err(err, "centres upload", k);
    }
    if (rc == DM_OK) a->inst = dm_tune_select(&k_assign, (size_t)cap);
    if (rc < 0) {
        sc_labeller_free(a);
        return DM_CUDA_STAGE_ERR(rc, "streamclust");
    }
    *out = a;
    return DM_OK;
}

/* Queues chunk h_pts[slot] of m points: upload, k_assign, download of labels and distances into
 * the staging. Returns at once with pinned staging. */
static int sc_labeller_submit(sc_labeller *a, int slot, long m)
{
    DM_ASSERT(!a->pending && m >= 1 && m <= a->cap && (slot == 0 || slot == 1));
    cudaError_t err = cudaMemcpyAsync(a->d_pts, a->h_pts[slot], (size_t)m * (size_t)a->dim * sizeof(float),
                                      cudaMemcpyHostToDevice, a->stream);
    if (err != cudaSuccess) return sc_label_cuda_err(err, "points upload", m);
    assign_args args = {a->d_pts, a->d_c, a->d_label, a->d_dist, m, a->k, a->dim};
    DM_TRY(a->inst->launch(&args, (size_t)m, a->stream));
    err = cudaMemcpyAsync(a->h_label, a->d_label, (size_t)m * sizeof(int), cudaMemcpyDeviceToHost,
                          a->stream);
    if (err == cudaSuccess)
        err = cudaMemcpyAsync(a->h_dist, a->d_dist, (size_t)m * sizeof(float), cudaMemcpyDeviceToHost,
                              a->stream);
    if (err != cudaSuccess) return sc_label_cuda_err(err, "labels download", m);
    a->m = m;
    a->pending = 1;
    return DM_OK;
}

/* Waits for the chunk in flight and copies its labels and distances to label[0, m), dist[0, m). */
static int sc_labeller_wait(sc_labeller *a, int *label, float *dist)
{
    DM_ASSERT(a->pending);
    a->pending = 0;
    cudaError_t err = cudaStreamSynchronize(a->stream);
    if (err != cudaSuccess) return sc_label_cuda_err(err, "labelling", a->m);
    memcpy(label, a->h_label, (size_t)a->m * sizeof(int));
    memcpy(dist, a->h_dist, (size_t)a->m * sizeof(float));
    return DM_OK;
}

extern "C" int dm_sc_label_cuda(int *label, float *dist, long n, long cap, const float *centres,
                                long k, int dim, int pin, dm_sc_read_fn *read, void *arg)
{
    if (k < 1) return DM_ERR(DM_ERR_INVALID_ARG, "assign: no centres");
    if (dim < 1 || cap < 1)
        return DM_ERR(DM_ERR_INVALID_ARG, "streamclust labelling: DIM %d, chunk %ld", dim, cap);
    if (n <= 0) return DM_OK;
    long lim = (long)(SC_LABEL_CHUNK_BYTES / ((size_t)dim * sizeof(float)));
    if (cap > lim) cap = lim > 0 ? lim : 1;
    if (cap > n) cap = n;
    sc_labeller *a = NULL;
    DM_TRY(sc_labeller_create(&a, cap, centres, k, dim, pin));
    long m = cap;
    int slot = 0, rc = read(a->h_pts[0], arg, 0, m);
    for (long off = 0; off < n && rc == DM_OK; off += m, slot ^= 1) {
        m = n - off < cap ? n - off : cap;
        rc = sc_labeller_submit(a, slot, m);
        if (rc < 0) break;
        /* the host reads the next chunk into the other buffer while the device labels this one */
        const long next = off + m, mn = n - next < cap ? n - next : cap;
        int rrc = mn > 0 ? read(a->h_pts[slot ^ 1], arg, next, mn) : DM_OK;
        int wrc = sc_labeller_wait(a, label + off, dist + off);
        rc = wrc < 0 ? wrc : rrc;
    }
    sc_labeller_free(a);
    return rc;
}

struct sc_label_array {
    const float *pts;
    int dim;
};

static int sc_read_array(float *out, void *arg, long first, long count)
{
    const sc_label_array *s = (const sc_label_array *)arg;
    dm_mem_copy_staged(out, s->pts + (size_t)first * (size_t)s->dim,
                       (size_t)count * (size_t)s->dim * sizeof(float));
    return DM_OK;
}

extern "C" int dm_sc_assign_cuda(int *label, float *dist, const float *pts, long n,
                                 const float *centres, long k, int dim)
{
    sc_label_array s = {pts, dim};
    return dm_sc_label_cuda(label, dist, n, n > 0 ? n : 1, centres, k, dim, 1, sc_read_array, &s);
}
