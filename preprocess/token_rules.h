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

/* A stop set's membership filter: DM_STOPSET_FILTER_WORDS 64-bit words stored after its cap slot
 * keys (keys[cap ..]); the bit dm_stopset_filter_bit(w, n) is set for every word of the set. A
 * clear bit proves that w is not in the set, so most tokens that are not stop words skip the hash
 * and the probe (with the default list about 12% of the bits are set); a set bit only means
 * "probe". The bit depends on the first and last byte and the length: one multiply. */
#define DM_STOPSET_FILTER_WORDS 16
DM_HD uint32_t dm_stopset_filter_bit(const char *w, size_t n)
{
    uint32_t x = (uint32_t)(unsigned char)w[0] | (uint32_t)(unsigned char)w[n - 1] << 8 | (uint32_t)(n & 0xff) << 16;
    return (x * 0x9e3779b1u) >> 22; /* 10 bits: DM_STOPSET_FILTER_WORDS x 64 */
}

/* Probes a flat stop set (see dm_stopset in preprocess.h). */
DM_HD int dm_stopset_probe(const uint64_t *keys, const uint32_t *word_off, const uint8_t *word_len,
                           const char *bytes, uint32_t cap, const char *w, size_t n)
{
    if (cap == 0 || n == 0) return 0; /* the empty word is never in a set */
    uint32_t fb = dm_stopset_filter_bit(w, n);
    if (!((keys[cap + (fb >> 6)] >> (fb & 63)) & 1u)) return 0;
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
