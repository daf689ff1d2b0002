/* Tuning workloads (the tuner's bench hooks, common/tune/tune.h) of the preprocess kernels
 * tokens, docs and first (the hooks of process and stem_words are in preprocess_cuda.cu).
 * Implemented in preprocess_tune_cuda.cu; preprocess_cuda.cu puts them into the kernels'
 * registrations. One create hook per kernel; run, output, destroy and resize are shared. Every
 * workload is seeded and device-resident, its output buffers start from a fixed pattern, and
 * its outputs (token bounds, token indices) are compared
 * exactly. Reference: the kernels' contracts in preprocess_kernels.cuh. Plain C, internal. */
#ifndef DM_PREPROCESS_TUNE_H
#define DM_PREPROCESS_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "common/tune/tune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Target sizes (bench_default_n): 256 MiB of text. */
#define DM_PP_BENCH_N_tokens ((size_t)1 << 28)  /* bytes of text */
#define DM_PP_BENCH_N_docs ((size_t)1 << 17)    /* documents (+1) of ~2 KiB */
#define DM_PP_BENCH_N_first ((size_t)1 << 22)   /* kept tokens (a 32 MB batch holds about 3.4M) */

int dm_pp_bench_tokens_create(void **state, size_t n, uint64_t seed);
int dm_pp_bench_docs_create(void **state, size_t n, uint64_t seed);
int dm_pp_bench_first_create(void **state, size_t n, uint64_t seed);
int dm_pp_tune_bench_run(void *state, const dm_tune_instance *inst, void *stream);
int dm_pp_tune_bench_output(void *state, void *host, size_t *nbytes);
void dm_pp_tune_bench_destroy(void *state);
/* Prefix reuse (n <= the size the state was created for): a prefix of the text (a token cut at
 * n ends there), of the documents, of the tokens. */
int dm_pp_tune_bench_resize(void *state, size_t n);

#ifdef __cplusplus
}
#endif
#endif
