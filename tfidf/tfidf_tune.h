/* Tuning workloads (the tuner's bench hooks, common/tune/tune.h) of tfidf's kernels other than
 * the count kernels and the vocabulary merge (whose hooks are in tfidf_cuda.cu): the compaction
 * of the per-document tables (tf_header, tf_compact), the vocabulary lookup table (vocab_build,
 * vocab_query), the hash-only table (hash_build, hash_query) and the weights (weigh_len,
 * weigh_fill, weigh_norm). Implemented in tfidf_tune_cuda.cu; tfidf_cuda.cu puts them into the
 * kernels' registrations. One create hook per kernel (it fixes the workload); run, output,
 * destroy and resize are shared. Every workload is seeded and device-resident, and its output
 * buffers start from a fixed pattern, so an instance that skips part of the output differs from
 * the default. Every output is compared exactly (tolerance 0), the weights' floats too: the
 * instances differ in block size only and a row's arithmetic is one warp's in a fixed lane
 * order, so every instance computes the same bits.
 * Reference: the kernels' contracts in tfidf_kernels.cuh. Plain C, internal. */
#ifndef DM_TFIDF_TUNE_H
#define DM_TFIDF_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "common/rng.h"
#include "common/tune/tune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Target sizes (bench_default_n), in each kernel's work unit. */
#define DM_TFIDF_BENCH_N_header ((size_t)1 << 18)     /* documents (~58M tokens: a count chunk) */
#define DM_TFIDF_BENCH_N_compact ((size_t)1 << 18)    /* documents */
#define DM_TFIDF_BENCH_N_vocab_build ((size_t)1 << 22) /* distinct terms */
#define DM_TFIDF_BENCH_N_vocab_query ((size_t)1 << 22) /* queries, vocabulary of 1/4 as many */
#define DM_TFIDF_BENCH_N_hash_build ((size_t)1 << 22)  /* terms */
#define DM_TFIDF_BENCH_N_hash_query ((size_t)1 << 26)  /* tokens, vocabulary of 1/16 as many */
#define DM_TFIDF_BENCH_N_weigh ((size_t)1 << 18)       /* rows (weigh_len, weigh_fill, weigh_norm) */

struct dm_tf_counts;
/* The hash of term `id` of a seeded term space: distinct ids have distinct hashes (dm_mix64 is
 * a bijection). */
static inline uint64_t dm_tfidf_bench_term_hash(uint64_t id, uint64_t seed)
{
    return dm_mix64(id + 0x632be59bd9b4e019ull * (seed | 1));
}
/* The queries of vocab_query / hash_query against a vocabulary of ids 0 .. nv - 1: one in `miss`
 * beyond it (unknown), the others small ids more often; ids and their hashes. */
void dm_tfidf_bench_queries(uint64_t *ids, uint64_t *hash, size_t nq, size_t nv, uint64_t seed, unsigned miss);
/* Host parts of the workloads on OpenMP threads (tfidf_tune_host.c), the same bits as one thread:
 * dm_tf_count_cpu's rows of documents [0, n) of a token stream (each document's tokens sorted in
 * place), and the weights' passes over count rows c as the kernels define them: row_len[r] and
 * kept[r] (weigh_len; kept[n] = 0), out_off (n + 1: their scan), the stored entries' columns,
 * unnormalised weights and positions (weigh_fill, in input order) and each row's (column << 32 |
 * position) pairs sorted (weigh_norm's input); the last four have out_off[n] entries. */
int dm_tfidf_bench_count_rows(struct dm_tf_counts *c, const uint64_t *tok_off, uint32_t *tok, size_t n);
void dm_tfidf_bench_weigh_passes(const struct dm_tf_counts *c, const uint32_t *map, const double *col_w,
                                 int sublinear, uint64_t *row_len, uint64_t *kept, uint64_t *out_off,
                                 uint32_t *ocol, double *ow, uint32_t *opos, uint64_t *pair);

int dm_tfidf_bench_header_create(void **state, size_t n, uint64_t seed);
int dm_tfidf_bench_compact_create(void **state, size_t n, uint64_t seed);
int dm_tfidf_bench_vocab_build_create(void **state, size_t n, uint64_t seed);
int dm_tfidf_bench_vocab_query_create(void **state, size_t n, uint64_t seed);
int dm_tfidf_bench_hash_build_create(void **state, size_t n, uint64_t seed);
int dm_tfidf_bench_hash_query_create(void **state, size_t n, uint64_t seed);
int dm_tfidf_bench_weigh_len_create(void **state, size_t n, uint64_t seed);
int dm_tfidf_bench_weigh_fill_create(void **state, size_t n, uint64_t seed);
int dm_tfidf_bench_weigh_norm_create(void **state, size_t n, uint64_t seed);

int dm_tfidf_bench_run(void *state, const dm_tune_instance *inst, void *stream);
int dm_tfidf_bench_output(void *state, void *host, size_t *nbytes);
void dm_tfidf_bench_destroy(void *state);
/* Prefix reuse (n <= the size the state was created for): the documents and rows workloads
 * (tf_header, tf_compact, weigh_*), whose prefix is a valid input of its own. DM_ERR_UNSUPPORTED
 * for the table workloads (a table is sized for its term count), which is why tfidf_cuda.cu
 * registers it only for the others. */
int dm_tfidf_bench_resize(void *state, size_t n);

#ifdef __cplusplus
}
#endif
#endif
