/* The per-element steps of the GPU tokeniser as DM_HD functions, so the CUDA kernels
 * (preprocess_kernels.cuh) and their host emulation (dm_tokenize_hd, tokenize_hd.c) run the same
 * code: (1) mark token starts and ends in the normalised text, (2) after an exclusive scan of the
 * start flags, place each token's [start, end), (3) per token: filter, stem (porter.h), hash and
 * write the stem over the token's first bytes, (4) after a scan of the keep flags, compact, and
 * (5) per document, count its kept tokens by binary search over the kept starts, (6) mark the
 * tokens that may be their term's first occurrence in the batch (a hash set of the hashes).
 * Reference: dm_tokenize_cpu (identical output is tested). */
#ifndef DM_TOKENIZE_HD_H
#define DM_TOKENIZE_HD_H

#include <stddef.h>
#include <stdint.h>

#include "common/hd.h"
#include "preprocess/porter.h"
#include "preprocess/token_rules.h"

/* Device-side view of a stop set (pointers valid where the kernel runs). */
typedef struct dm_stop_view {
    const uint64_t *keys;
    const uint32_t *word_off;
    const uint8_t *word_len;
    const char *bytes;
    uint32_t cap;
} dm_stop_view;

typedef struct dm_tok_params {
    int min_len, max_len, keep_numbers, stem;
} dm_tok_params;

/* (1) flags[i] = 1 when a token starts at i; ends: bit 1 when a token ends at i (text[i+1] is a
 * separator). Documents end with a separator, so tokens never cross documents. */
DM_HD uint32_t dm_tok_mark_one(const char *text, size_t n, size_t i)
{
    unsigned char c = (unsigned char)text[i];
    if (dm_pp_is_sep(c)) return 0;
    uint32_t f = 0;
    if (i == 0 || dm_pp_is_sep((unsigned char)text[i - 1])) f |= 1u;
    if (i + 1 == n || dm_pp_is_sep((unsigned char)text[i + 1])) f |= 2u;
    return f;
}

/* (2) with scan[i] = number of starts before i: token k = scan[i] starts at i; the token ending
 * at i is number scan[i] + (starts at i) - 1. */
DM_HD void dm_tok_place_one(uint64_t *tok_start, uint64_t *tok_end, uint32_t flag, uint64_t scan,
                            size_t i)
{
    if (flag & 1u) tok_start[scan] = i;
    if (flag & 2u) tok_end[scan + (flag & 1u) - 1] = i + 1;
}

/* (3a) the verdict of one token: DM_PP_KEEP or the reason it is dropped. */
DM_HD int dm_tok_verdict_one(const char *text, uint64_t start, uint64_t end, const dm_stop_view *stop,
                             const dm_tok_params *p)
{
    return dm_pp_token_verdict(text + start, (size_t)(end - start), p->min_len, p->max_len, p->keep_numbers,
                               stop->keys, stop->word_off, stop->word_len, stop->bytes, stop->cap);
}

/* (3b) a kept token: writes its stem over stems[start ..] and sets *hash, *stem_len. */
DM_HD void dm_tok_stem_one(char *stems, const char *text, uint64_t start, uint64_t end, const dm_tok_params *p,
                           uint64_t *hash, uint8_t *stem_len)
{
    const char *w = text + start;
    size_t n = (size_t)(end - start);
    /* one pass over the token: the copy the stemmer works on and the ASCII test (dm_pp_is_ascii) */
    char buf[256];
    unsigned char any = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)w[i];
        buf[i] = (char)c;
        any |= c;
    }
    int sl = (int)n;
    if (p->stem && any < 0x80) sl = dm_porter_stem(buf, (int)n);
    for (int i = 0; i < sl; i++) stems[start + (uint64_t)i] = buf[i];
    *hash = dm_term_hash(buf, (size_t)sl);
    *stem_len = (uint8_t)sl;
}

/* (3) one token: (3a), then (3b) when kept. Returns the verdict. */
DM_HD int dm_tok_process_one(char *stems, const char *text, uint64_t start, uint64_t end,
                             const dm_stop_view *stop, const dm_tok_params *p, uint64_t *hash,
                             uint8_t *stem_len)
{
    int v = dm_tok_verdict_one(text, start, end, stop, p);
    if (v == DM_PP_KEEP) dm_tok_stem_one(stems, text, start, end, p, hash, stem_len);
    return v;
}

/* (5) number of kept tokens whose start is below pos (kept starts are ascending). */
DM_HD uint64_t dm_tok_lower_bound(const uint64_t *starts, uint64_t n, uint64_t pos)
{
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (starts[mid] < pos) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* (6) first occurrences in a batch (the stream builder then probes only these tokens,
 * stream_build.h): a hash set over the kept tokens' hashes, keys[k] = a hash (0: empty slot) and
 * idx[k] = the smallest index of a token with that hash, probed linearly from hash & mask
 * (mask + 1 slots, a power of two, at least twice the tokens). Tokens whose hash is 0 are not
 * inserted. (6a) inserts token i; the GPU claims slots with atomicCAS and lowers idx with
 * atomicMin, the host emulation runs one token at a time. */
DM_HD void dm_tok_first_insert(uint64_t *keys, uint32_t *idx, uint64_t mask, uint64_t h, uint32_t i)
{
    if (h == 0) return;
    for (uint64_t k = h & mask;; k = (k + 1) & mask) {
#ifdef __CUDA_ARCH__
        /* plain reads first: a key is written once (0 -> h) and an index only falls, so a stale
         * read costs at most an atomic that was not needed; frequent terms then skip both */
        uint64_t cur = keys[k];
        if (cur == 0) cur = atomicCAS((unsigned long long *)&keys[k], 0ull, (unsigned long long)h);
        if (cur == 0 || cur == h) {
            if (i < idx[k]) atomicMin(&idx[k], i);
            return;
        }
#else
        if (keys[k] == 0) keys[k] = h;
        if (keys[k] == h) {
            if (i < idx[k]) idx[k] = i;
            return;
        }
#endif
    }
}

/* (6b) after every insert: 1 when token i may be the first occurrence of its (hash, stem) in the
 * batch (it is the first with its hash, or its hash is 0, or its stem differs from that of the
 * first token with its hash: a collision), 0 when an earlier token has the same hash and stem.
 * stems and start as in dm_tok_result (start relative to stems). */
DM_HD int dm_tok_first_flag(const uint64_t *keys, const uint32_t *idx, uint64_t mask, const uint64_t *hash,
                            const uint64_t *start, const uint8_t *len, const char *stems, uint32_t i)
{
    uint64_t h = hash[i];
    if (h == 0) return 1;
    uint64_t k = h & mask;
    while (keys[k] != h) k = (k + 1) & mask;
    uint32_t m = idx[k];
    if (m == i || len[m] != len[i]) return 1;
    const char *a = stems + start[m], *b = stems + start[i];
    for (uint32_t j = 0; j < len[i]; j++)
        if (a[j] != b[j]) return 1;
    return 0;
}

/* Slots of the (6) set for t tokens: the smallest power of two >= 2t (at least 1024). */
DM_HD uint64_t dm_tok_first_slots(uint64_t t)
{
    uint64_t c = 1024;
    while (c < 2 * t) c *= 2;
    return c;
}

#endif
