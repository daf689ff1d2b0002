/* The CUDA backend of the sort primitives (sorting/sorting.h): CUB's DeviceRadixSort and
 * DeviceSegmentedSort behind the two-call scratch protocol, and the tunable bitonic sort of small
 * segments (sorting_kernels.cuh, kernel "sorting.bitonic_segsort") with CUB for the segments it
 * cannot hold. Reference: the CPU backend (sorting_cpu.c). */
#include <cub/cub.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "common/tune/tune.h"
#include "sorting/sorting.h"
#include "sorting/sorting_kernels.cuh"
#include "common/rng.h"

static int check_bits(int begin_bit, int end_bit, int key_bits)
{
    if (begin_bit < 0 || end_bit > key_bits || begin_bit > end_bit)
        return DM_ERR(DM_ERR_INVALID_ARG, "sort: bit range [%d, %d) outside a %d-bit key", begin_bit, end_bit, key_bits);
    return DM_OK;
}

/* The pointers of a sort's second call (temp != NULL): CUB and the bitonic kernel read and write
 * all of them, so a NULL would be an illegal address on the device, a sticky error that ends the
 * CUDA context of the whole process. A status code instead, before anything is launched. The size
 * query (temp == NULL) touches no data and checks none. */
static int check_ptrs(const char *fn, const void *keys_out, const void *vals_out, const void *keys_in,
                      const void *vals_in, size_t n, const uint64_t *seg_off, size_t n_segments, int segmented)
{
    if (n > 0 && (!keys_out || !keys_in))
        return DM_ERR(DM_ERR_INVALID_ARG, "%s: NULL keys for %zu items", fn, n);
    if (n > 0 && (!vals_out || !vals_in))
        return DM_ERR(DM_ERR_INVALID_ARG, "%s: NULL values for %zu items (the CUDA backend sorts pairs)", fn, n);
    if (segmented && n_segments > 0 && !seg_off)
        return DM_ERR(DM_ERR_INVALID_ARG, "%s: NULL segment offsets for %zu segments", fn, n_segments);
    return DM_OK;
}

extern "C" int dm_sort_pairs_u32_cuda(void *temp, size_t *temp_bytes, uint32_t *keys_out, uint32_t *vals_out,
                                      const uint32_t *keys_in, const uint32_t *vals_in, size_t n, int begin_bit,
                                      int end_bit, void *stream)
{
    if (!temp_bytes) return DM_ERR(DM_ERR_INVALID_ARG, "dm_sort_pairs_u32_cuda: temp_bytes is NULL");
    DM_TRY(check_bits(begin_bit, end_bit, 32));
    if (temp)
        DM_TRY(check_ptrs("dm_sort_pairs_u32_cuda", keys_out, vals_out, keys_in, vals_in, n, NULL, 0, 0));
    size_t bytes = *temp_bytes;
    DM_CUDA_TRY(cub::DeviceRadixSort::SortPairs(temp, bytes, keys_in, keys_out, vals_in, vals_out, n, begin_bit,
                                                end_bit, (cudaStream_t)stream));
    *temp_bytes = bytes;
    return DM_OK;
}

extern "C" int dm_sort_pairs_u64_cuda(void *temp, size_t *temp_bytes, uint64_t *keys_out, uint32_t *vals_out,
                                      const uint64_t *keys_in, const uint32_t *vals_in, size_t n, int begin_bit,
                                      int end_bit, void *stream)
{
    if (!temp_bytes) return DM_ERR(DM_ERR_INVALID_ARG, "dm_sort_pairs_u64_cuda: temp_bytes is NULL");
    DM_TRY(check_bits(begin_bit, end_bit, 64));
    if (temp)
        DM_TRY(check_ptrs("dm_sort_pairs_u64_cuda", keys_out, vals_out, keys_in, vals_in, n, NULL, 0, 0));
    size_t bytes = *temp_bytes;
    DM_CUDA_TRY(cub::DeviceRadixSort::SortPairs(temp, bytes, keys_in, keys_out, vals_in, vals_out, n, begin_bit,
                                                end_bit, (cudaStream_t)stream));
    *temp_bytes = bytes;
    return DM_OK;
}

template <typename V>
static int segsort_cub(void *temp, size_t *temp_bytes, uint32_t *keys_out, V *vals_out, const uint32_t *keys_in,
                       const V *vals_in, size_t n, const uint64_t *seg_off, size_t n_segments, void *stream)
{
    if (!temp_bytes) return DM_ERR(DM_ERR_INVALID_ARG, "segmented sort: temp_bytes is NULL");
    if (temp)
        DM_TRY(check_ptrs("segmented sort", keys_out, vals_out, keys_in, vals_in, n, seg_off, n_segments, 1));
    size_t bytes = *temp_bytes;
    DM_CUDA_TRY(cub::DeviceSegmentedSort::StableSortPairs(temp, bytes, keys_in, keys_out, vals_in, vals_out,
                                                          (int64_t)n, (int64_t)n_segments, seg_off, seg_off + 1,
                                                          (cudaStream_t)stream));
    *temp_bytes = bytes;
    return DM_OK;
}

extern "C" int dm_segsort_cub_cuda(void *temp, size_t *temp_bytes, uint32_t *keys_out, float *vals_out,
                                   const uint32_t *keys_in, const float *vals_in, size_t n, const uint64_t *seg_off,
                                   size_t n_segments, void *stream)
{
    return segsort_cub(temp, temp_bytes, keys_out, vals_out, keys_in, vals_in, n, seg_off, n_segments, stream);
}


/* ------------------------------------------------------------------ bitonic instances */

template <int BLOCK, int ITEMS, int LAYOUT, int TILE>
static int bitonic_launch(const void *args, size_t n, void *stream)
{
    const dm_bitonic_args *a = static_cast<const dm_bitonic_args *>(args);
    if (a->n_segments == 0) return DM_OK;
    unsigned grid = (unsigned)(a->n_segments < (1u << 20) ? a->n_segments : (1u << 20));
    dm_bitonic_segsort_kernel<BLOCK, ITEMS, LAYOUT, TILE><<<grid, BLOCK, 0, (cudaStream_t)stream>>>(*a);
    DM_CUDA_LAUNCH_CHECK();
    return DM_OK;
}

#define DM_BITONIC_TILE 32
#define DM_BI(B, I, L)                                                                             \
    {{B, I, 1, L, (L) == DM_LAYOUT_TILED ? DM_BITONIC_TILE : 0},                                  \
     bitonic_launch<B, I, L, DM_BITONIC_TILE>,                                                     \
     (const void *)&dm_bitonic_segsort_kernel<B, I, L, DM_BITONIC_TILE>, 0}
#define DM_BI_L(B, I) DM_BI(B, I, DM_LAYOUT_AOS), DM_BI(B, I, DM_LAYOUT_SOA), DM_BI(B, I, DM_LAYOUT_TILED)
#define DM_BI_I(B) DM_BI_L(B, 2), DM_BI_L(B, 4), DM_BI_L(B, 8)

/* block 64/128/256 x items per thread 2/4/8 (segment capacity 128 .. 2048) x layout */
static const dm_tune_instance g_bitonic_inst[] = {DM_BI_I(64), DM_BI_I(128), DM_BI_I(256)};
#define DM_N_BITONIC ((int)(sizeof g_bitonic_inst / sizeof g_bitonic_inst[0]))
#define DM_BITONIC_DEFAULT 13 /* block 128, 4 items (capacity 512), SoA */

static int instance_cap(const dm_tune_instance *inst) { return inst->policy.block * inst->policy.rake; }

/* The segments longer than cap, as CUB sees them: the others are empty. */
struct dm_long_begin {
    const uint64_t *off;
    uint64_t cap;
    __host__ __device__ uint64_t operator()(int64_t i) const { return off[i]; }
};
struct dm_long_end {
    const uint64_t *off;
    uint64_t cap;
    __host__ __device__ uint64_t operator()(int64_t i) const
    {
        return off[i + 1] - off[i] > cap ? off[i + 1] : off[i];
    }
};

static int g_force_bitonic = -1;

/* The hybrid: the bitonic instance for segments of at most its capacity, CUB for the others.
 * V = float or uint32_t (the kernel moves the values as 32-bit words). */
template <typename V>
static int bitonic_hybrid(const dm_tune_instance *inst, void *temp, size_t *temp_bytes, uint32_t *keys_out,
                          V *vals_out, const uint32_t *keys_in, const V *vals_in, size_t n,
                          const uint64_t *seg_off, size_t n_segments, void *stream)
{
    static_assert(sizeof(V) == 4, "the bitonic kernel moves 32-bit values");
    if (!temp_bytes) return DM_ERR(DM_ERR_INVALID_ARG, "dm_segsort_bitonic_cuda: temp_bytes is NULL");
    uint64_t cap = (uint64_t)instance_cap(inst);
    thrust::counting_iterator<int64_t> count(0);
    auto begin = thrust::make_transform_iterator(count, dm_long_begin{seg_off, cap});
    auto end = thrust::make_transform_iterator(count, dm_long_end{seg_off, cap});
    size_t bytes = *temp_bytes;
    if (temp == NULL) {
        DM_CUDA_TRY(cub::DeviceSegmentedSort::StableSortPairs(temp, bytes, keys_in, keys_out, vals_in, vals_out,
                                                              (int64_t)n, (int64_t)n_segments, begin, end,
                                                              (cudaStream_t)stream));
        *temp_bytes = bytes;
        return DM_OK;
    }
    DM_TRY(check_ptrs("dm_segsort_bitonic_cuda", keys_out, vals_out, keys_in, vals_in, n, seg_off, n_segments, 1));
    if (n_segments == 0) return DM_OK;
    dm_bitonic_args a = {keys_in, reinterpret_cast<const uint32_t *>(vals_in), keys_out,
                         reinterpret_cast<uint32_t *>(vals_out), seg_off, n_segments};
    DM_TRY(inst->launch(&a, n, stream));
    DM_CUDA_TRY(cub::DeviceSegmentedSort::StableSortPairs(temp, bytes, keys_in, keys_out, vals_in, vals_out,
                                                          (int64_t)n, (int64_t)n_segments, begin, end,
                                                          (cudaStream_t)stream));
    return DM_OK;
}

/* ------------------------------------------------------------------ tuning workload */
/* n items in segments whose lengths follow the rows of TF-IDF vectors (dm_segsort_bench_lengths:
 * mostly 1..140 terms, one in 64 up to 3000), keys term ids below 2^20; output: the sorted keys
 * and values. */
struct bitonic_bench {
    size_t n, n_seg;
    uint32_t *d_kin, *d_kout;
    float *d_vin, *d_vout;
    uint64_t *d_off;
    void *d_temp;
    size_t temp_bytes;
};

static void bitonic_bench_destroy(void *state)
{
    bitonic_bench *b = (bitonic_bench *)state;
    if (!b) return;
    dm_device_free(b->d_kin);
    dm_device_free(b->d_kout);
    dm_device_free(b->d_vin);
    dm_device_free(b->d_vout);
    dm_device_free(b->d_off);
    dm_device_free(b->d_temp);
    dm_free(b);
}

static uint64_t bench_rand(uint64_t *s)
{
    return dm_splitmix64(s);
}

static int bench_cuda(cudaError_t e)
{
    if (e == cudaSuccess) return DM_OK;
    return DM_ERR(DM_ERR_CUDA, "sorting bench: CUDA copy failed: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
}

static int bitonic_bench_create(void **state, size_t n, uint64_t seed)
{
    *state = NULL;
    bitonic_bench *b = (bitonic_bench *)dm_calloc(1, sizeof *b);
    uint32_t *k = (uint32_t *)dm_malloc(4 * (n ? n : 1));
    float *v = (float *)dm_malloc(4 * (n ? n : 1));
    uint64_t *off = (uint64_t *)dm_malloc(8 * (n + 1));
    int rc = b && k && v && off ? DM_OK : DM_ERR_NOMEM;
    if (rc == DM_OK) {
        b->n = n;
        uint64_t s = seed ^ 0x51ed;
        for (size_t i = 0; i < n; i++) {
            k[i] = (uint32_t)(bench_rand(&s) & ((1u << 20) - 1));
            v[i] = (float)i;
        }
        dm_segsort_bench_lengths(off, n, seed, &b->n_seg);
    }
    if (rc == DM_OK) rc = dm_device_alloc((void **)&b->d_kin, 4 * (n ? n : 1));
    if (rc == DM_OK) rc = dm_device_alloc((void **)&b->d_kout, 4 * (n ? n : 1));
    if (rc == DM_OK) rc = dm_device_alloc((void **)&b->d_vin, 4 * (n ? n : 1));
    if (rc == DM_OK) rc = dm_device_alloc((void **)&b->d_vout, 4 * (n ? n : 1));
    if (rc == DM_OK) rc = dm_device_alloc((void **)&b->d_off, 8 * (b->n_seg + 1));
    if (rc == DM_OK) rc = bench_cuda(cudaMemcpy(b->d_kin, k, 4 * n, cudaMemcpyHostToDevice));
    if (rc == DM_OK) rc = bench_cuda(cudaMemcpy(b->d_vin, v, 4 * n, cudaMemcpyHostToDevice));
    if (rc == DM_OK) rc = bench_cuda(cudaMemcpy(b->d_off, off, 8 * (b->n_seg + 1), cudaMemcpyHostToDevice));
    if (rc == DM_OK) rc = bench_cuda(cudaMemset(b->d_kout, 0xab, 4 * n));
    if (rc == DM_OK) rc = bench_cuda(cudaMemset(b->d_vout, 0xab, 4 * n));
    if (rc == DM_OK) {
        b->temp_bytes = 0;
        rc = bitonic_hybrid(&g_bitonic_inst[0], NULL, &b->temp_bytes, b->d_kout, b->d_vout, b->d_kin, b->d_vin, n,
                            b->d_off, b->n_seg, NULL);
    }
    if (rc == DM_OK) rc = dm_device_alloc(&b->d_temp, b->temp_bytes ? b->temp_bytes : 1);
    dm_free(k);
    dm_free(v);
    dm_free(off);
    if (rc != DM_OK) {
        bitonic_bench_destroy(b); /* rc keeps the message of what failed (a copy, CUB's sizing) */
        return rc;
    }
    *state = b;
    return DM_OK;
}

static int bitonic_bench_run(void *state, const dm_tune_instance *inst, void *stream)
{
    bitonic_bench *b = (bitonic_bench *)state;
    size_t bytes = b->temp_bytes;
    return bitonic_hybrid(inst, b->d_temp, &bytes, b->d_kout, b->d_vout, b->d_kin, b->d_vin, b->n, b->d_off,
                          b->n_seg, stream);
}

static int bitonic_bench_output(void *state, void *host, size_t *nbytes)
{
    bitonic_bench *b = (bitonic_bench *)state;
    *nbytes = 8 * b->n;
    if (!host) return DM_OK;
    DM_CUDA_TRY(cudaMemcpy(host, b->d_kout, 4 * b->n, cudaMemcpyDeviceToHost));
    DM_CUDA_TRY(cudaMemcpy((char *)host + 4 * b->n, b->d_vout, 4 * b->n, cudaMemcpyDeviceToHost));
    return DM_OK;
}

static const dm_tune_kernel k_bitonic = {
    "sorting.bitonic_segsort",
    "stable bitonic sort of small segments in shared memory (rows of the vectors); CUB for long ones",
    "items",
    g_bitonic_inst,
    DM_N_BITONIC,
    DM_BITONIC_DEFAULT,
    bitonic_bench_create,
    bitonic_bench_run,
    bitonic_bench_output,
    bitonic_bench_destroy,
    0.0,
    (size_t)1 << 24,
    1.0,
    NULL};

extern "C" int dm_sorting_tune_register(void) { return dm_tune_register(&k_bitonic); }

extern "C" int dm_segsort_bitonic_cuda(void *temp, size_t *temp_bytes, uint32_t *keys_out, float *vals_out,
                                       const uint32_t *keys_in, const float *vals_in, size_t n,
                                       const uint64_t *seg_off, size_t n_segments, void *stream)
{
    DM_TRY(dm_tune_register(&k_bitonic));
    const dm_tune_instance *inst =
        g_force_bitonic >= 0 ? &g_bitonic_inst[g_force_bitonic] : dm_tune_select(&k_bitonic, n);
    return bitonic_hybrid(inst, temp, temp_bytes, keys_out, vals_out, keys_in, vals_in, n, seg_off, n_segments,
                          stream);
}

/* ------------------------------------------------------------------ the segmented sort */

/* The bitonic hybrid by default: bench_tfidf on one H200 (2026-11-21), 2^26 pairs in 709148 rows
 * of the TF-IDF row-length profile: hybrid 4.5 ms, CUB DeviceSegmentedSort 14.3 ms (3.2x slower).
 * dm_segsort_use_bitonic(0) returns to CUB alone. */
static int g_segsort_bitonic = 1;

static const dm_tune_instance *bitonic_instance(size_t n)
{
    return g_force_bitonic >= 0 ? &g_bitonic_inst[g_force_bitonic] : dm_tune_select(&k_bitonic, n);
}

extern "C" int dm_segsort_pairs_u32_cuda(void *temp, size_t *temp_bytes, uint32_t *keys_out, uint32_t *vals_out,
                                         const uint32_t *keys_in, const uint32_t *vals_in, size_t n,
                                         const uint64_t *seg_off, size_t n_segments, void *stream)
{
    if (g_segsort_bitonic) {
        DM_TRY(dm_tune_register(&k_bitonic));
        return bitonic_hybrid(bitonic_instance(n), temp, temp_bytes, keys_out, vals_out, keys_in, vals_in, n, seg_off,
                              n_segments, stream);
    }
    return segsort_cub(temp, temp_bytes, keys_out, vals_out, keys_in, vals_in, n, seg_off, n_segments, stream);
}

extern "C" int dm_segsort_pairs_cuda(void *temp, size_t *temp_bytes, uint32_t *keys_out, float *vals_out,
                                     const uint32_t *keys_in, const float *vals_in, size_t n, const uint64_t *seg_off,
                                     size_t n_segments, void *stream)
{
    if (g_segsort_bitonic)
        return dm_segsort_bitonic_cuda(temp, temp_bytes, keys_out, vals_out, keys_in, vals_in, n, seg_off, n_segments,
                                       stream);
    return segsort_cub(temp, temp_bytes, keys_out, vals_out, keys_in, vals_in, n, seg_off, n_segments, stream);
}

extern "C" void dm_segsort_use_bitonic(int on) { g_segsort_bitonic = on ? 1 : 0; }

extern "C" int dm_segsort_uses_bitonic(void) { return g_segsort_bitonic; }

extern "C" int dm_segsort_bitonic_instances(void) { return DM_N_BITONIC; }

extern "C" const char *dm_segsort_bitonic_instance_name(int i, char *buf, size_t len)
{
    if (i < 0 || i >= DM_N_BITONIC) {
        snprintf(buf, len, "tuner");
        return buf;
    }
    return dm_tune_policy_str(&g_bitonic_inst[i].policy, buf, len);
}

extern "C" int dm_segsort_bitonic_force_instance(int i)
{
    if (i < -1 || i >= DM_N_BITONIC) return DM_ERR(DM_ERR_INVALID_ARG, "bitonic sort: no instance %d", i);
    g_force_bitonic = i;
    return DM_OK;
}
