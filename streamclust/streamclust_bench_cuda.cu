/* Tuning workloads of streamclust's kernels other than the gain kernel (the gain kernel's hooks
 * are in streamclust_cuda.cu): seeded, device-resident inputs of n work units, one launch of the
 * instance under test, and its output copied back, so that the tuner can time every instance and
 * reject one whose output differs from the default's. Output buffers start from a fixed pattern.
 * All outputs are exact (indices, copied floats, and distances computed with __f*_rn), so the
 * comparison is byte-exact.
 * Reference: the kernels' contracts in streamclust_kernels.cuh; the hooks' contract in
 * common/tune/tune.h. */
#include <cuda_runtime.h>
#include <limits.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "streamclust/streamclust.h"
#include "streamclust/streamclust_bench.h"
#include "streamclust/streamclust_kernels.cuh"

using namespace dm_sc;

namespace {

enum kind { W_REDUCE, W_APPLY, W_SCATTER, W_OPEN_AOS, W_OPEN_SOA, W_PERMUTE_AOS, W_PERMUTE_SOA, W_ASSIGN };

const int kDim = 64;         /* open, permute, assign */
const long kCentres = 16;    /* apply, assign */
const long kColumns = 16384; /* reduce: int64 columns per row */
const unsigned char kPattern = 0xA5; /* initial bytes of every output buffer */

struct workload {
    int kind;
    long n, n0;  /* current work units; the units the state was created for */
    long pts;    /* points (open, permute, apply, assign), rows (reduce) or centres (scatter) */
    long table;  /* scatter: entries of the centre table */
    float *coord, *centres, *w, *cost, *xcost, *dist, *dst;
    int *assign, *ct, *slot, *centers, *label;
    unsigned char *sw, *close;
    int64_t *work, *sums;
};

/* Points (or rows) the workload holds for n units. */
long points_for(int kind, size_t n)
{
    long p = (long)n;
    if (kind == W_PERMUTE_AOS || kind == W_PERMUTE_SOA) p = (long)(n / kDim);
    return p < 1 ? 1 : p;
}

/* Work units of the current size (what the launcher is given). */
size_t units(const workload *b)
{
    return b->kind == W_PERMUTE_AOS || b->kind == W_PERMUTE_SOA ? (size_t)b->pts * kDim
                                                                : (size_t)b->pts;
}

/* Tuning inputs live outside the run's memory counts, as common/tune/workload_cuda.cuh's do: plain
 * cudaMalloc, freed by dm_sc_bench_destroy. Host staging goes through dm_malloc. */
int dev_upload(void **d, const void *h, size_t bytes, const char *what)
{
    if (cudaMalloc(d, bytes ? bytes : 1) != cudaSuccess) {
        *d = NULL;
        cudaGetLastError();
        return DM_ERR(DM_ERR_CUDA, "streamclust bench: cudaMalloc %zu bytes (%s)", bytes, what);
    }
    if (h && bytes && cudaMemcpy(*d, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
        return DM_ERR(DM_ERR_CUDA, "streamclust bench: upload of %s", what);
    if (!h && bytes && cudaMemset(*d, kPattern, bytes) != cudaSuccess)
        return DM_ERR(DM_ERR_CUDA, "streamclust bench: cudaMemset of %s", what);
    return DM_OK;
}

/* Uniform [0, 1) floats as Rodinia's generator draws them. */
float unit_float(dm_sc_rng *r) { return (float)dm_sc_rng_next(r) / (float)INT_MAX; }

/* A seeded permutation of [0, m) (Fisher-Yates); its first k entries are distinct points. */
void permutation(int *p, long m, dm_sc_rng *r)
{
    for (long i = 0; i < m; i++) p[i] = (int)i;
    for (long i = m - 1; i > 0; i--) {
        long j = dm_sc_rng_next(r) % (i + 1);
        int t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
}

/* Coordinates of m points in AoS (soa = 0) or SoA (column stride m). */
float *points(long m, int soa, dm_sc_rng *r)
{
    float *h = (float *)dm_malloc((size_t)m * kDim * sizeof(float));
    if (!h) return NULL;
    for (long i = 0; i < m; i++)
        for (int d = 0; d < kDim; d++) {
            float v = unit_float(r);
            h[soa ? (size_t)d * m + i : (size_t)i * kDim + d] = v;
        }
    return h;
}

int create(void **state, size_t n, uint64_t seed, int kind)
{
    *state = NULL;
    workload *b = (workload *)dm_calloc(1, sizeof *b);
    if (!b) return DM_ERR(DM_ERR_NOMEM, "streamclust bench");
    b->kind = kind;
    b->pts = points_for(kind, n);
    b->n = b->n0 = (long)units(b);
    const long m = b->pts;
    dm_sc_rng r;
    dm_sc_rng_seed(&r, (long)(seed & 0x7fffffff));
    int rc = DM_OK;
    /* host buffers, freed at the end */
    float *hf = NULL, *hf2 = NULL, *hf3 = NULL;
    int *hi = NULL, *hi2 = NULL;
    unsigned char *hb = NULL, *hb2 = NULL;
    int64_t *hw = NULL;
#define NEED(p) \
    if (rc == DM_OK && !(p)) rc = DM_ERR(DM_ERR_NOMEM, "streamclust bench: host memory")
    switch (kind) {
    case W_REDUCE: /* m rows of kColumns values in [-2^40, 2^40): every row sum is exact */
        hw = (int64_t *)dm_malloc((size_t)m * kColumns * sizeof(int64_t));
        NEED(hw);
        for (size_t i = 0; rc == DM_OK && i < (size_t)m * kColumns; i++)
            hw[i] = ((int64_t)dm_sc_rng_next(&r) << 10) - ((int64_t)1 << 40);
        if (rc == DM_OK) rc = dev_upload((void **)&b->work, hw, (size_t)m * kColumns * sizeof(int64_t), "work");
        if (rc == DM_OK) rc = dev_upload((void **)&b->sums, NULL, (size_t)m * sizeof(int64_t), "sums");
        break;
    case W_APPLY: /* an accepted gain: a quarter of the points switch, a quarter of the centres close */
        hb = (unsigned char *)dm_malloc((size_t)m);
        hb2 = (unsigned char *)dm_malloc((size_t)kCentres);
        hf = (float *)dm_malloc((size_t)m * sizeof(float));
        hf2 = (float *)dm_malloc((size_t)m * sizeof(float));
        hi = (int *)dm_malloc((size_t)m * sizeof(int));
        hi2 = (int *)dm_malloc((size_t)m * sizeof(int));
        NEED(hb && hb2 && hf && hf2 && hi && hi2);
        for (long i = 0; rc == DM_OK && i < m; i++) {
            hb[i] = dm_sc_rng_next(&r) % 4 == 0;
            hf[i] = unit_float(&r);                  /* xcost */
            hf2[i] = unit_float(&r);                 /* cost */
            hi[i] = (int)(dm_sc_rng_next(&r) % m);   /* assign: a point */
            hi2[i] = (int)(dm_sc_rng_next(&r) % kCentres); /* centre index of a point */
        }
        for (long c = 0; rc == DM_OK && c < kCentres; c++) hb2[c] = dm_sc_rng_next(&r) % 4 == 0;
        if (rc == DM_OK) rc = dev_upload((void **)&b->sw, hb, (size_t)m, "sw");
        if (rc == DM_OK) rc = dev_upload((void **)&b->close, hb2, (size_t)kCentres, "close");
        if (rc == DM_OK) rc = dev_upload((void **)&b->xcost, hf, (size_t)m * sizeof(float), "xcost");
        if (rc == DM_OK) rc = dev_upload((void **)&b->cost, hf2, (size_t)m * sizeof(float), "cost");
        if (rc == DM_OK) rc = dev_upload((void **)&b->assign, hi, (size_t)m * sizeof(int), "assign");
        if (rc == DM_OK) rc = dev_upload((void **)&b->ct, hi2, (size_t)m * sizeof(int), "center_table");
        break;
    case W_SCATTER: /* m distinct centres among 4 m points */
        b->table = 4 * m;
        hi = (int *)dm_malloc((size_t)b->table * sizeof(int));
        NEED(hi);
        if (rc == DM_OK) permutation(hi, b->table, &r);
        if (rc == DM_OK) rc = dev_upload((void **)&b->centers, hi, (size_t)m * sizeof(int), "centers");
        if (rc == DM_OK) rc = dev_upload((void **)&b->ct, NULL, (size_t)b->table * sizeof(int), "center_table");
        break;
    case W_OPEN_AOS:
    case W_OPEN_SOA: /* speedy's update for centre m/3: about half of the costs drop */
        hf = points(m, kind == W_OPEN_SOA, &r);
        hf2 = (float *)dm_malloc((size_t)m * sizeof(float));
        hf3 = (float *)dm_malloc((size_t)m * sizeof(float));
        hi = (int *)dm_malloc((size_t)m * sizeof(int));
        NEED(hf && hf2 && hf3 && hi);
        for (long i = 0; rc == DM_OK && i < m; i++) {
            hf2[i] = 1.0f + (float)(i % 3);
            hf3[i] = 40.0f * unit_float(&r);
            hi[i] = (int)(dm_sc_rng_next(&r) % m);
        }
        if (rc == DM_OK) rc = dev_upload((void **)&b->coord, hf, (size_t)m * kDim * sizeof(float), "coord");
        if (rc == DM_OK) rc = dev_upload((void **)&b->w, hf2, (size_t)m * sizeof(float), "weight");
        if (rc == DM_OK) rc = dev_upload((void **)&b->cost, hf3, (size_t)m * sizeof(float), "cost");
        if (rc == DM_OK) rc = dev_upload((void **)&b->assign, hi, (size_t)m * sizeof(int), "assign");
        break;
    case W_PERMUTE_AOS:
    case W_PERMUTE_SOA: /* a shuffle of m loaded AoS rows into the gain layout */
        hf = points(m, 0, &r);
        hi = (int *)dm_malloc((size_t)m * sizeof(int));
        NEED(hf && hi);
        if (rc == DM_OK) permutation(hi, m, &r);
        if (rc == DM_OK) rc = dev_upload((void **)&b->coord, hf, (size_t)m * kDim * sizeof(float), "src");
        if (rc == DM_OK) rc = dev_upload((void **)&b->slot, hi, (size_t)m * sizeof(int), "slot");
        if (rc == DM_OK) rc = dev_upload((void **)&b->dst, NULL, (size_t)m * kDim * sizeof(float), "dst");
        break;
    case W_ASSIGN: /* the final assignment: m points to kCentres centres */
        hf = points(m, 0, &r);
        hf2 = points(kCentres, 0, &r);
        NEED(hf && hf2);
        if (rc == DM_OK) rc = dev_upload((void **)&b->coord, hf, (size_t)m * kDim * sizeof(float), "points");
        if (rc == DM_OK) rc = dev_upload((void **)&b->centres, hf2, (size_t)kCentres * kDim * sizeof(float), "centres");
        if (rc == DM_OK) rc = dev_upload((void **)&b->label, NULL, (size_t)m * sizeof(int), "label");
        if (rc == DM_OK) rc = dev_upload((void **)&b->dist, NULL, (size_t)m * sizeof(float), "dist");
        break;
    default:
        rc = DM_ERR(DM_ERR_INVALID_ARG, "streamclust bench: workload %d", kind);
    }
#undef NEED
    dm_free(hf);
    dm_free(hf2);
    dm_free(hf3);
    dm_free(hi);
    dm_free(hi2);
    dm_free(hb);
    dm_free(hb2);
    dm_free(hw);
    if (rc != DM_OK) {
        dm_sc_bench_destroy(b);
        return rc;
    }
    *state = b;
    return DM_OK;
}

} // namespace

#define SC_BENCH_CREATE(name, kind)                                                                \
    extern "C" int dm_sc_bench_##name##_create(void **state, size_t n, uint64_t seed)              \
    {                                                                                              \
        return create(state, n, seed, kind);                                                       \
    }
SC_BENCH_CREATE(reduce, W_REDUCE)
SC_BENCH_CREATE(apply, W_APPLY)
SC_BENCH_CREATE(scatter, W_SCATTER)
SC_BENCH_CREATE(open_aos, W_OPEN_AOS)
SC_BENCH_CREATE(open_soa, W_OPEN_SOA)
SC_BENCH_CREATE(permute_aos, W_PERMUTE_AOS)
SC_BENCH_CREATE(permute_soa, W_PERMUTE_SOA)
SC_BENCH_CREATE(assign, W_ASSIGN)
#undef SC_BENCH_CREATE

extern "C" int dm_sc_bench_run(void *state, const dm_tune_instance *inst, void *stream)
{
    workload *b = (workload *)state;
    const long m = b->pts;
    switch (b->kind) {
    case W_REDUCE: {
        reduce_args a = {b->work, b->sums, kColumns, m - 1};
        return inst->launch(&a, (size_t)m, stream);
    }
    case W_APPLY: {
        apply_args a = {b->sw, b->xcost, b->close, b->ct, b->assign, b->cost, m, m / 2};
        return inst->launch(&a, (size_t)m, stream);
    }
    case W_SCATTER: {
        scatter_args a = {b->centers, b->ct, m};
        return inst->launch(&a, (size_t)m, stream);
    }
    case W_OPEN_AOS:
    case W_OPEN_SOA: {
        open_args a = {b->coord, b->w, b->cost, b->assign, m, m / 3, kDim, 0};
        return inst->launch(&a, (size_t)m, stream);
    }
    case W_PERMUTE_AOS:
    case W_PERMUTE_SOA: {
        permute_args a = {b->coord, b->slot, b->dst, m, kDim};
        return inst->launch(&a, units(b), stream);
    }
    case W_ASSIGN: {
        assign_args a = {b->coord, b->centres, b->label, b->dist, m, kCentres, kDim};
        return inst->launch(&a, (size_t)m, stream);
    }
    default:
        return DM_ERR(DM_ERR_INVALID_ARG, "streamclust bench: workload %d", b->kind);
    }
}

/* The outputs, in order: (device pointer, bytes). */
static int outputs(const workload *b, const void *p[2], size_t bytes[2])
{
    const size_t m = (size_t)b->pts;
    p[0] = p[1] = NULL;
    bytes[0] = bytes[1] = 0;
    switch (b->kind) {
    case W_REDUCE: p[0] = b->sums; bytes[0] = m * sizeof(int64_t); break;
    case W_APPLY:
    case W_OPEN_AOS:
    case W_OPEN_SOA:
        p[0] = b->assign; bytes[0] = m * sizeof(int);
        p[1] = b->cost; bytes[1] = m * sizeof(float);
        break;
    case W_SCATTER: p[0] = b->ct; bytes[0] = (size_t)b->table * sizeof(int); break;
    case W_PERMUTE_AOS:
    case W_PERMUTE_SOA: p[0] = b->dst; bytes[0] = m * kDim * sizeof(float); break;
    case W_ASSIGN:
        p[0] = b->label; bytes[0] = m * sizeof(int);
        p[1] = b->dist; bytes[1] = m * sizeof(float);
        break;
    default: return DM_ERR(DM_ERR_INVALID_ARG, "streamclust bench: workload %d", b->kind);
    }
    return DM_OK;
}

extern "C" int dm_sc_bench_output(void *state, void *host, size_t *nbytes)
{
    const workload *b = (const workload *)state;
    const void *p[2];
    size_t bytes[2];
    DM_TRY(outputs(b, p, bytes));
    *nbytes = bytes[0] + bytes[1];
    if (!host) return DM_OK;
    for (int i = 0; i < 2; i++) {
        if (!bytes[i]) continue;
        size_t at = i ? bytes[0] : 0;
        cudaError_t e = cudaMemcpy((unsigned char *)host + at, p[i], bytes[i], cudaMemcpyDeviceToHost);
        if (e != cudaSuccess)
            return DM_ERR(DM_ERR_CUDA, "streamclust bench: output copy: %s", cudaGetErrorString(e));
    }
    return DM_OK;
}

extern "C" void dm_sc_bench_destroy(void *state)
{
    workload *b = (workload *)state;
    if (!b) return;
    cudaFree(b->coord);
    cudaFree(b->centres);
    cudaFree(b->w);
    cudaFree(b->cost);
    cudaFree(b->xcost);
    cudaFree(b->dist);
    cudaFree(b->dst);
    cudaFree(b->assign);
    cudaFree(b->ct);
    cudaFree(b->slot);
    cudaFree(b->centers);
    cudaFree(b->label);
    cudaFree(b->sw);
    cudaFree(b->close);
    cudaFree(b->work);
    cudaFree(b->sums);
    dm_free(b);
}

extern "C" int dm_sc_bench_resize(void *state, size_t n)
{
    workload *b = (workload *)state;
    if (b->kind == W_OPEN_SOA || b->kind == W_PERMUTE_SOA)
        return DM_ERR(DM_ERR_UNSUPPORTED, "streamclust bench: an SoA workload cannot be resized");
    long m = points_for(b->kind, n);
    long m0 = points_for(b->kind, (size_t)b->n0);
    if (m > m0) return DM_ERR(DM_ERR_INVALID_ARG, "streamclust bench: resize %zu > %ld", n, b->n0);
    b->pts = m;
    b->n = (long)units(b);
    return DM_OK;
}
