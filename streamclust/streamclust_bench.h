/* Tuning workloads (the tuner's bench hooks, common/tune/tune.h) of streamclust's kernels other
 * than the gain kernel: reduce, apply, scatter, open (AoS, SoA), permute (AoS, SoA) and assign.
 * Implemented in streamclust_bench_cuda.cu; streamclust_cuda.cu puts them into the kernels'
 * registrations. One create hook per kernel (it fixes the workload); run, output, destroy and
 * resize are shared. Every workload is seeded, device-resident, and its output buffers start
 * from a fixed pattern, so an instance that skips part of the output differs from the default.
 * Reference: the kernels' contracts in streamclust_kernels.cuh. Plain C, internal. */
#ifndef DM_STREAMCLUST_BENCH_H
#define DM_STREAMCLUST_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "common/tune/tune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Target sizes (bench_default_n), in each kernel's work unit. */
#define DM_SC_BENCH_N_reduce ((size_t)1 << 10)      /* rows of 16384 int64 columns (128 MiB) */
#define DM_SC_BENCH_N_apply ((size_t)1 << 22)       /* points */
#define DM_SC_BENCH_N_scatter ((size_t)1 << 16)     /* centres, into a table of 4x as many points */
#define DM_SC_BENCH_N_open_aos ((size_t)1 << 20)    /* points of dim 64 */
#define DM_SC_BENCH_N_open_soa ((size_t)1 << 20)    /* points of dim 64 */
#define DM_SC_BENCH_N_permute_aos ((size_t)1 << 24) /* floats (points x dim 64) */
#define DM_SC_BENCH_N_permute_soa ((size_t)1 << 24) /* floats (points x dim 64) */
#define DM_SC_BENCH_N_assign ((size_t)1 << 19)      /* points of dim 64, 16 centres */

int dm_sc_bench_reduce_create(void **state, size_t n, uint64_t seed);
int dm_sc_bench_apply_create(void **state, size_t n, uint64_t seed);
int dm_sc_bench_scatter_create(void **state, size_t n, uint64_t seed);
int dm_sc_bench_open_aos_create(void **state, size_t n, uint64_t seed);
int dm_sc_bench_open_soa_create(void **state, size_t n, uint64_t seed);
int dm_sc_bench_permute_aos_create(void **state, size_t n, uint64_t seed);
int dm_sc_bench_permute_soa_create(void **state, size_t n, uint64_t seed);
int dm_sc_bench_assign_create(void **state, size_t n, uint64_t seed);

int dm_sc_bench_run(void *state, const dm_tune_instance *inst, void *stream);
int dm_sc_bench_output(void *state, void *host, size_t *nbytes);
void dm_sc_bench_destroy(void *state);
/* Prefix reuse (n <= the size the state was created for). Only for the workloads whose layout a
 * prefix keeps (not the SoA ones, whose column stride is the point count): DM_ERR_UNSUPPORTED
 * otherwise, which is why streamclust_cuda.cu registers it only for the others. */
int dm_sc_bench_resize(void *state, size_t n);

#ifdef __cplusplus
}
#endif
#endif
