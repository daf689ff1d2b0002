/* Sort primitives: radix sort of (key, value) pairs and segmented sort (term-sorting vector rows,
 * boids by grid cell). CUDA backend: CUB (DeviceRadixSort, DeviceSegmentedSort), plus a tunable
 * bitonic sort for small segments only where the benchmark shows it wins. Reference: the CPU
 * backend (stable, readable). Plain C11: streams are void * (cudaStream_t).
 *
 * Two-call scratch protocol (as CUB's): call with temp == NULL to get *temp_bytes, allocate,
 * call again with temp. The CPU backend needs no scratch (*temp_bytes = 0) and ignores stream.
 * Pointers are device pointers for the CUDA backend and host pointers for the CPU backend.
 * A call with temp == NULL only sizes (even where the size is 0): the second call must pass a
 * buffer (any non-NULL pointer when the size is 0).
 * All sorts are stable; inputs are not modified. Outputs must not overlap the inputs (no sort in
 * place), and the segmented sorts' output values need input values. On the second call, n > 0
 * with a NULL key pointer (CUDA: any NULL key or value pointer; CPU: output values without input
 * values in a segmented sort), or segments with NULL offsets, is DM_ERR_INVALID_ARG, nothing
 * launched; the bit range is checked by both calls. Items outside every segment: copied unchanged by
 * the CPU backend, left untouched by the CUDA backend (compare outputs within the segments). */
#ifndef DM_SORTING_H
#define DM_SORTING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Sorts n pairs by the key bits [begin_bit, end_bit). */
typedef int dm_sort_pairs_u32_fn(void *temp, size_t *temp_bytes, uint32_t *keys_out, uint32_t *vals_out,
                                 const uint32_t *keys_in, const uint32_t *vals_in, size_t n,
                                 int begin_bit, int end_bit, void *stream);
dm_sort_pairs_u32_fn dm_sort_pairs_u32_cpu, dm_sort_pairs_u32_cuda;

typedef int dm_sort_pairs_u64_fn(void *temp, size_t *temp_bytes, uint64_t *keys_out, uint32_t *vals_out,
                                 const uint64_t *keys_in, const uint32_t *vals_in, size_t n,
                                 int begin_bit, int end_bit, void *stream);
dm_sort_pairs_u64_fn dm_sort_pairs_u64_cpu, dm_sort_pairs_u64_cuda;

/* Sorts each segment s = [seg_off[s], seg_off[s+1]) of n (u32 key, float value) pairs by key:
 * term-sorting the rows of a CSR matrix. */
typedef int dm_segsort_pairs_fn(void *temp, size_t *temp_bytes, uint32_t *keys_out, float *vals_out,
                                const uint32_t *keys_in, const float *vals_in, size_t n,
                                const uint64_t *seg_off, size_t n_segments, void *stream);
dm_segsort_pairs_fn dm_segsort_pairs_cpu, dm_segsort_pairs_cuda;

/* The same with u32 values (term-count rows, and the entry positions by which tfidf's weights
 * term-sort the rows of the vectors). The CUDA backend uses the same choice of sort as
 * dm_segsort_pairs_cuda (dm_segsort_use_bitonic). */
typedef int dm_segsort_pairs_u32_fn(void *temp, size_t *temp_bytes, uint32_t *keys_out, uint32_t *vals_out,
                                    const uint32_t *keys_in, const uint32_t *vals_in, size_t n,
                                    const uint64_t *seg_off, size_t n_segments, void *stream);
dm_segsort_pairs_u32_fn dm_segsort_pairs_u32_cpu, dm_segsort_pairs_u32_cuda;

/* CUDA: a bitonic sort of small segments in shared memory, one block per segment, stable (ties
 * broken by input position). Record layout in shared memory (AoS, SoA, tiled AoS), block size
 * and segment capacity are tuning choices (kernel "sorting.bitonic_segsort"). Segments longer
 * than the chosen instance's capacity (block x items: 128 .. DM_BITONIC_MAX_SEGMENT) go to CUB's
 * segmented sort. Same contract as dm_segsort_pairs_fn.
 * dm_segsort_pairs_cuda and dm_segsort_pairs_u32_cuda use it by default (see bench/tfidf). */
#define DM_BITONIC_MAX_SEGMENT 2048
dm_segsort_pairs_fn dm_segsort_bitonic_cuda;
/* The bitonic kernel's network run on the host (host pointers; segments of at most cap items
 * through the network, with records stored tiled by `tile` when tile > 0, longer ones by the CPU
 * sort as CUB would): tests the network without a GPU. cap a power of two. */
int dm_segsort_bitonic_hd(uint32_t *keys_out, float *vals_out, const uint32_t *keys_in, const float *vals_in,
                          size_t n, const uint64_t *seg_off, size_t n_segments, int cap, int tile);
/* CUB only (DeviceSegmentedSort::StableSortPairs), for comparisons. */
dm_segsort_pairs_fn dm_segsort_cub_cuda;

/* Chooses the segmented sort of dm_segsort_pairs_cuda and dm_segsort_pairs_u32_cuda: 1 = the
 * bitonic hybrid (default: bench_tfidf on one H200 sorts 2^26 pairs in TF-IDF rows 3.2x faster
 * with it than with CUB's DeviceSegmentedSort), 0 = CUB alone. dm_segsort_uses_bitonic tells the
 * current choice (0 in a CPU-only build). */
void dm_segsort_use_bitonic(int on);
int dm_segsort_uses_bitonic(void);

/* Tests and benchmarks: the compiled bitonic instances, their names, and forcing instance i for
 * the following calls (-1: the tuner's choice). */
int dm_segsort_bitonic_instances(void);
const char *dm_segsort_bitonic_instance_name(int i, char *buf, size_t len);
int dm_segsort_bitonic_force_instance(int i);
/* Segment offsets with the length profile of TF-IDF rows (mostly 1..140, one in 64 up to 3000)
 * covering n items: off must hold n + 1 entries; *n_seg gets the number of segments. */
int dm_segsort_bench_lengths(uint64_t *off, size_t n, uint64_t seed, size_t *n_seg);

/* Registers the sorting kernels with the tuner (CUDA builds; common/tune/register_all.c). */
int dm_sorting_tune_register(void);

#ifdef __cplusplus
}
#endif
#endif
