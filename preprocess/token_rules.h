/* The token rules shared by both backends as DM_HD code: the 64-bit term hash, the separator and
 * number tests, and the stop-set probe. Reference: this file is the definition; dm_tokenize_cpu
 * and the CUDA kernels both call it, so the rules cannot drift apart. */
#ifndef DM_TOKEN_RULES_H
#define DM_TOKEN_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "common/hd.h"

/* FNV-1a 64 over the bytes, then the murmur3 fmix64 finaliser (FNV alone mixes the last bytes
 * poorly into the high bits, which open-addressing tables index by). */
DM_HD uint64_t dm_term_hash(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

/* Normalised text holds token bytes and ' ' only. */
DM_HD int dm_pp_is_sep(unsigned char c) { return c == ' '; }

DM_HD int dm_pp_is_number(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < '0' || (unsigned char)s[i] > '9') return 0;
    return n > 0;
}

DM_HD int dm_pp_is_ascii(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) return 0;
    return 1;
}

/* Stop-set slot key: 0 marks an empty slot. */
DM_HD uint64_t dm_stopset_key(uint64_t h) { return h ? h : 1; }

/* Probes a flat stop set (see dm_stopset in preprocess.h). */
DM_HD int dm_stopset_probe(const uint64_t *keys, const uint32_t *word_off, const uint8_t *word_len,
                           const char *bytes, uint32_t cap, const char *w, size_t n)
{
    if (cap == 0) return 0;
    uint64_t k = dm_stopset_key(dm_term_hash(w, n));
    uint32_t mask = cap - 1;
    for (uint32_t i = (uint32_t)(k & mask), probes = 0; probes < cap; i = (i + 1) & mask, probes++) {
        if (keys[i] == 0) return 0;
        if (keys[i] == k && word_len[i] == n) {
            const char *b = bytes + word_off[i];
            size_t j = 0;
            while (j < n && b[j] == w[j]) j++;
            if (j == n) return 1;
        }
    }
    return 0;
}

/* Token filter verdicts (why a token is dropped). */
enum { DM_PP_KEEP = 0, DM_PP_DROP_SHORT = 1, DM_PP_DROP_LONG = 2, DM_PP_DROP_NUMBER = 3,
       DM_PP_DROP_STOP = 4 };

DM_HD int dm_pp_token_verdict(const char *w, size_t n, int min_len, int max_len, int keep_numbers,
                              const uint64_t *keys, const uint32_t *word_off,
                              const uint8_t *word_len, const char *bytes, uint32_t cap)
{
    if (n < (size_t)min_len) return DM_PP_DROP_SHORT;
    if (n > (size_t)max_len) return DM_PP_DROP_LONG;
    if (!keep_numbers && dm_pp_is_number(w, n)) return DM_PP_DROP_NUMBER;
    if (dm_stopset_probe(keys, word_off, word_len, bytes, cap, w, n)) return DM_PP_DROP_STOP;
    return DM_PP_KEEP;
}

#endif
