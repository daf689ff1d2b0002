/* Internal helpers of tfidf shared by the driver, the CPU reference and the CUDA backend: hash
 * mixing for table slots and owners (DM_HD, so host and device agree), the weight formulas, and
 * term-list allocation. Reference: this file is the definition. Plain C11 / CUDA-compatible. */
#ifndef DM_TFIDF_INTERNAL_H
#define DM_TFIDF_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hd.h"
#include "tfidf/tfidf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* splitmix64's finaliser: spreads any key (including weak test hashes) over all 64 bits. */
DM_HD uint64_t dm_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* Slot of a 64-bit term hash in an open-addressing table (masked by the caller). */
DM_HD uint64_t dm_slot_hash(uint64_t h) { return dm_mix64(h); }

/* Bucket hash of a 32-bit term index in a per-document table. */
DM_HD uint32_t dm_term_bucket_hash(uint32_t t)
{
    uint32_t x = t * 0x9e3779b1u;
    return x ^ (x >> 15);
}

/* The weight of `count` occurrences in a row of `len` vocabulary tokens, before L2. */
DM_HD double dm_tf_weight(uint32_t count, uint64_t len, int sublinear)
{
    return sublinear ? 1.0 + log((double)count) : (double)count / (double)len;
}

/* The backend to use: AUTO = the context's (CPU without a context). */
int dm_tfidf_backend(const struct dm_ctx *ctx, int backend);
/* Copies n + 1 offsets and the strings they index (off NULL: n + 1 zeros, no bytes). */
int dm_strings_copy(uint64_t **dst_off, char **dst, const uint64_t *off, const char *s, size_t n);

/* OpenMP host loops (tfidf_host.c; callable from the CUDA backend, which nvcc compiles without
 * OpenMP). Results do not depend on the number of threads. */
/* The first i < n with ids[i] == DM_TERM_NONE, or SIZE_MAX. */
size_t dm_tfidf_first_none(const uint32_t *ids, size_t n);
/* The first entry k < nnz whose term is >= n_local_terms or maps (not DM_TERM_NONE) to a column
 * >= n_cols, or UINT64_MAX. */
uint64_t dm_tfidf_first_bad_entry(const uint32_t *term, uint64_t nnz, const uint32_t *map, size_t n_local_terms,
                                  uint64_t n_cols);
/* dst[i] = src[i] - base for i < n (dst may equal src); a[i] += base for i < n. */
void dm_tfidf_rebase(uint64_t *dst, const uint64_t *src, size_t n, uint64_t base);
void dm_tfidf_shift(uint64_t *a, size_t n, uint64_t base);
/* df[t] = entries of term[0..nnz) equal to t (t < n_terms); returns the first entry >= n_terms,
 * or UINT64_MAX. */
uint64_t dm_tfidf_df_count(uint64_t *df, size_t n_terms, const uint32_t *term, uint64_t nnz);

/* The backends' errors of a hash lookup (DM_ERR_FORMAT): hash h stands for several terms of
 * vocab (naming two of them); token `token` has a hash that no term has. */
int dm_tfidf_ambiguous_hash(const dm_termlist *vocab, uint64_t h);
int dm_tfidf_missing_hash(uint64_t token, uint64_t h);

/* idf / icf of a term with document frequency df among n documents. */
double dm_idf_value(int kind, uint64_t df, uint64_t n);

#ifdef __cplusplus
}
#endif
#endif
