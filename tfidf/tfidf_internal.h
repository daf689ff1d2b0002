/* Internal helpers of tfidf shared by the driver, the CPU reference and the CUDA backend: hash
 * mixing for table slots and owners (DM_HD, so host and device agree), the weight formulas, and
 * term-list allocation. Reference: this file is the definition. Plain C11 / CUDA-compatible. */
#ifndef DM_TFIDF_INTERNAL_H
#define DM_TFIDF_INTERNAL_H

#include <math.h>
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

/* idf / icf of a term with document frequency df among n documents. */
double dm_idf_value(int kind, uint64_t df, uint64_t n);

#ifdef __cplusplus
}
#endif
#endif
