/* The per-element code of the per-document term-count tables (Zhang & Mueller), written once as
 * DM_HD functions: the CUDA kernels (tfidf_kernels.cuh) and their host emulation
 * (dm_tf_count_hd in tfidf_hd.c, which tests the algorithm without a GPU) both call it.
 * Reference: dm_tf_count_cpu (the counts these tables must reproduce).
 *
 * Document d owns DM_TF_BUCKETS buckets of bcap_d slots; a slot is (term index, count), key
 * DM_TF_EMPTY when free. bucket = low 5 bits of a mix of the term index; linear probing inside
 * the bucket from a start slot taken from the mix's higher bits. */
#ifndef DM_TFIDF_TABLES_H
#define DM_TFIDF_TABLES_H

#include <stdint.h>

#include "common/hd.h"
#include "tfidf/tfidf_internal.h"

#define DM_TF_BUCKETS 32
#define DM_TF_EMPTY 0xffffffffu

/* Slots per bucket of a document of len tokens: max(1, ceil(slack x len x 2^grow / 32)). */
DM_HD uint64_t dm_tf_bcap(uint64_t len, int slack, int grow)
{
    uint64_t b = (((uint64_t)slack * len << grow) + DM_TF_BUCKETS - 1) / DM_TF_BUCKETS;
    return b < 1 ? 1 : b;
}

DM_HD uint32_t dm_tf_bucket_of(uint32_t t) { return dm_term_bucket_hash(t) & (DM_TF_BUCKETS - 1); }

/* Adds c occurrences of term t to a document table of 32 x bcap slots. shared = 1 when other
 * threads insert into the same buckets (device: atomicCAS on the key, atomicAdd on the count);
 * shared = 0 when the calling thread owns the bucket (and always on the host). Returns 0 when
 * the bucket is full (the document must be rebuilt with larger buckets). */
DM_HD int dm_tf_insert(uint32_t *key, uint32_t *cnt, uint32_t bcap, uint32_t t, uint32_t c, int shared)
{
    uint32_t h = dm_term_bucket_hash(t);
    uint32_t b = h & (DM_TF_BUCKETS - 1), s = (h >> 5) % bcap;
    uint32_t *bk = key + (uint64_t)b * bcap, *bc = cnt + (uint64_t)b * bcap;
    for (uint32_t p = 0; p < bcap; p++) {
        uint32_t old = bk[s];
#if defined(__CUDA_ARCH__)
        if (shared) {
            if (old == DM_TF_EMPTY) old = atomicCAS(&bk[s], DM_TF_EMPTY, t);
            if (old == DM_TF_EMPTY || old == t) {
                atomicAdd(&bc[s], c);
                return 1;
            }
            if (++s == bcap) s = 0;
            continue;
        }
#else
        (void)shared;
#endif
        if (old == DM_TF_EMPTY) {
            bk[s] = t;
            bc[s] = c;
            return 1;
        }
        if (old == t) {
            bc[s] += c;
            return 1;
        }
        if (++s == bcap) s = 0;
    }
    return 0;
}

/* The private sub-table of one thread of the no-atomic variant: its tokens tok[i] for
 * i = first, first + step, ... (at most rake of them, below end) counted into kt/kc (at most
 * rake distinct entries, in order of first appearance). Tokens >= n_terms are skipped and
 * reported in *bad. Returns the number of entries. */
DM_HD int dm_tf_subtable(uint32_t *kt, uint32_t *kc, const uint32_t *tok, uint64_t first, uint64_t step,
                         uint64_t end, int rake, uint32_t n_terms, int *bad)
{
    int m = 0;
    for (int r = 0; r < rake; r++) {
        uint64_t i = first + (uint64_t)r * step;
        if (i >= end) break;
        uint32_t t = tok[i];
        if (t >= n_terms) {
            *bad = 1;
            continue;
        }
        int j = 0;
        while (j < m && kt[j] != t) j++;
        if (j < m) kc[j]++;
        else {
            kt[m] = t;
            kc[m] = 1;
            m++;
        }
    }
    return m;
}

/* Occupied slots of bucket b (the header entry of the compaction). */
DM_HD uint32_t dm_tf_bucket_used(const uint32_t *key, uint32_t bcap, uint32_t b)
{
    const uint32_t *k = key + (uint64_t)b * bcap;
    uint32_t n = 0;
    for (uint32_t s = 0; s < bcap; s++) n += k[s] != DM_TF_EMPTY;
    return n;
}

/* Writes bucket b's entries at out[p ...] in slot order; returns the position after them. */
DM_HD uint64_t dm_tf_bucket_emit(const uint32_t *key, const uint32_t *cnt, uint32_t bcap, uint32_t b,
                                 uint32_t *out_term, uint32_t *out_count, uint64_t p)
{
    const uint32_t *k = key + (uint64_t)b * bcap, *c = cnt + (uint64_t)b * bcap;
    for (uint32_t s = 0; s < bcap; s++)
        if (k[s] != DM_TF_EMPTY) {
            out_term[p] = k[s];
            out_count[p] = c[s];
            p++;
        }
    return p;
}

#endif
