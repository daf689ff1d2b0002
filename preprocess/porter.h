/* Porter's stemming algorithm as one DM_HD definition: plain C on the host, device code under
 * nvcc (the CUDA backend's stemmer). Reference: Snowball's "porter" (libstemmer, porter.sbl),
 * which this transcribes step by step, including Snowball's semantics: `among` takes the longest
 * matching suffix and does not fall back to a shorter one when the condition fails; 'y' at the
 * start or after a vowel is marked 'Y' (a consonant) and turned back at the end; R1/R2 are computed
 * once on the marked word. Tested for exact agreement with libstemmer (tests/preprocess).
 * Works on ASCII bytes; the caller passes only ASCII words (others are not stemmed). */
#ifndef DM_PORTER_H
#define DM_PORTER_H

#include <stdint.h>

#include "common/hd.h"

DM_HD int dm_porter_v(unsigned char c)
{
    return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u' || c == 'y';
}

DM_HD int dm_porter_v_wxy(unsigned char c)
{
    return dm_porter_v(c) || c == 'w' || c == 'x' || c == 'Y';
}

/* The last (up to) 8 bytes of z[0..n) as one word, z[n-1] in the low byte, missing bytes 0: the
 * suffix tests below compare it with a constant instead of looping over bytes (on the GPU each
 * byte is a local-memory load, and lanes testing different suffixes diverge in the loops). */
DM_HD uint64_t dm_porter_tail(const char *z, int n)
{
    uint64_t t = 0;
    int k = n < 8 ? n : 8;
    for (int j = 0; j < k; j++) t |= (uint64_t)(unsigned char)z[n - 1 - j] << (8 * j);
    return t;
}

/* The word whose tail is t ends with s[0..sl), 1 <= sl <= 7, s a literal (folded to constants):
 * a masked compare. Suffix bytes are letters, never 0, so a suffix longer than the word meets a
 * missing (0) byte and fails. */
DM_HD int dm_porter_tail_ends(uint64_t t, const char *s, int sl)
{
    uint64_t v = 0;
    for (int i = 0; i < sl; i++) v |= (uint64_t)(unsigned char)s[sl - 1 - i] << (8 * i);
    return (t & (((uint64_t)1 << (8 * sl)) - 1)) == v;
}

/* shortv at cursor c (backward): non-v_WXY v non-v ending at c */
DM_HD int dm_porter_shortv(const char *z, int c)
{
    return c >= 3 && !dm_porter_v_wxy((unsigned char)z[c - 1]) && dm_porter_v((unsigned char)z[c - 2]) &&
           !dm_porter_v((unsigned char)z[c - 3]);
}

DM_HD int dm_porter_has_vowel(const char *z, int end)
{
    for (int i = 0; i < end; i++)
        if (dm_porter_v((unsigned char)z[i])) return 1;
    return 0;
}

/* Replaces the last sl bytes of z[0..n) by r[0..rl); returns the new length. */
DM_HD int dm_porter_set(char *z, int n, int sl, const char *r, int rl)
{
    int b = n - sl;
    for (int i = 0; i < rl; i++) z[b + i] = r[i];
    return b + rl;
}

/* Suffix rules of steps 2, 3 and 4 as code, not as tables: a table of rules in a function is
 * built in the thread's local memory on every call under nvcc (about 1.1 KB of stores per
 * token), which made the stem the slowest part of the CUDA tokeniser. Each finder switches on the
 * word's last letter (every suffix that can match ends with it) and tries that letter's suffixes
 * longest first, so the first match is the longest matching suffix of the whole list, exactly
 * as Snowball's `among` picks it (two suffixes of equal length cannot both match).
 * On a match: *sl = suffix length, *r / *rl = replacement; returns 1. No match: returns 0. */
#define DM_PORTER_M(suf, rep)                                                                      \
    do {                                                                                           \
        if (dm_porter_tail_ends(t, suf, (int)sizeof(suf) - 1)) {                                   \
            *sl = (int)sizeof(suf) - 1;                                                            \
            *r = rep;                                                                              \
            *rl = (int)sizeof(rep) - 1;                                                            \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

DM_HD int dm_porter_step2_find(const char *z, int n, int *sl, const char **r, int *rl)
{
    if (n < 3) return 0;
    uint64_t t = dm_porter_tail(z, n);
    switch ((char)(t & 0xff)) {
    case 'l': DM_PORTER_M("ational", "ate"); DM_PORTER_M("tional", "tion"); break;
    case 'n': DM_PORTER_M("ization", "ize"); DM_PORTER_M("ation", "ate"); break;
    case 's':
        DM_PORTER_M("fulness", "ful"); DM_PORTER_M("ousness", "ous"); DM_PORTER_M("iveness", "ive");
        break;
    case 'i':
        DM_PORTER_M("biliti", "ble"); DM_PORTER_M("entli", "ent"); DM_PORTER_M("aliti", "al");
        DM_PORTER_M("ousli", "ous"); DM_PORTER_M("iviti", "ive"); DM_PORTER_M("enci", "ence");
        DM_PORTER_M("anci", "ance"); DM_PORTER_M("abli", "able"); DM_PORTER_M("alli", "al");
        DM_PORTER_M("eli", "e");
        break;
    case 'm': DM_PORTER_M("alism", "al"); break;
    case 'r': DM_PORTER_M("izer", "ize"); DM_PORTER_M("ator", "ate"); break;
    default: break;
    }
    return 0;
}

DM_HD int dm_porter_step3_find(const char *z, int n, int *sl, const char **r, int *rl)
{
    if (n < 3) return 0;
    uint64_t t = dm_porter_tail(z, n);
    switch ((char)(t & 0xff)) {
    case 'e': DM_PORTER_M("alize", "al"); DM_PORTER_M("icate", "ic"); DM_PORTER_M("ative", ""); break;
    case 'i': DM_PORTER_M("iciti", "ic"); break;
    case 'l': DM_PORTER_M("ical", "ic"); DM_PORTER_M("ful", ""); break;
    case 's': DM_PORTER_M("ness", ""); break;
    default: break;
    }
    return 0;
}

/* Step 4 deletes; "ion" (replacement "*") is deleted only after 's' or 't'. */
DM_HD int dm_porter_step4_find(const char *z, int n, int *sl, const char **r, int *rl)
{
    if (n < 2) return 0;
    uint64_t t = dm_porter_tail(z, n);
    switch ((char)(t & 0xff)) {
    case 't':
        DM_PORTER_M("ement", ""); DM_PORTER_M("ment", ""); DM_PORTER_M("ant", ""); DM_PORTER_M("ent", "");
        break;
    case 'e':
        DM_PORTER_M("ance", ""); DM_PORTER_M("ence", ""); DM_PORTER_M("able", ""); DM_PORTER_M("ible", "");
        DM_PORTER_M("ate", ""); DM_PORTER_M("ive", ""); DM_PORTER_M("ize", "");
        break;
    case 'm': DM_PORTER_M("ism", ""); break;
    case 'i': DM_PORTER_M("iti", ""); break;
    case 's': DM_PORTER_M("ous", ""); break;
    case 'n': DM_PORTER_M("ion", "*"); break;
    case 'l': DM_PORTER_M("al", ""); break;
    case 'r': DM_PORTER_M("er", ""); break;
    case 'c': DM_PORTER_M("ic", ""); break;
    case 'u': DM_PORTER_M("ou", ""); break;
    default: break;
    }
    return 0;
}
#undef DM_PORTER_M

/* Stems z[0..n) in place (n <= buffer size; the stem is never longer). Returns the new length. */
DM_HD int dm_porter_stem(char *z, int n)
{
    int y_found = 0;
    /* prelude: mark consonant y */
    if (n > 0 && z[0] == 'y') {
        z[0] = 'Y';
        y_found = 1;
    }
    for (int i = 0; i + 1 < n; i++) {
        if (dm_porter_v((unsigned char)z[i]) && z[i + 1] == 'y') {
            z[i + 1] = 'Y';
            y_found = 1;
        }
    }
    /* regions */
    int p1 = n, p2 = n;
    {
        int i = 0;
        while (i < n && !dm_porter_v((unsigned char)z[i])) i++;
        if (i < n) {
            i++;
            while (i < n && dm_porter_v((unsigned char)z[i])) i++;
            if (i < n) {
                p1 = ++i;
                while (i < n && !dm_porter_v((unsigned char)z[i])) i++;
                if (i < n) {
                    i++;
                    while (i < n && dm_porter_v((unsigned char)z[i])) i++;
                    if (i < n) p2 = i + 1;
                }
            }
        }
    }
    /* Step 1a */
    uint64_t t = dm_porter_tail(z, n);
    if (dm_porter_tail_ends(t, "sses", 4)) n -= 2;
    else if (dm_porter_tail_ends(t, "ies", 3)) n -= 2;
    else if (dm_porter_tail_ends(t, "ss", 2)) { /* keep */ }
    else if (dm_porter_tail_ends(t, "s", 1)) n -= 1;
    /* Step 1b */
    t = dm_porter_tail(z, n);
    if (dm_porter_tail_ends(t, "eed", 3)) {
        if (p1 <= n - 3) n -= 1;
    } else {
        int sl = dm_porter_tail_ends(t, "ing", 3) ? 3 : dm_porter_tail_ends(t, "ed", 2) ? 2 : 0;
        if (sl > 0 && dm_porter_has_vowel(z, n - sl)) {
            n -= sl;
            t >>= 8 * sl; /* the tail of z[0..n): its low bytes are all the tests below read */
            if (dm_porter_tail_ends(t, "at", 2) || dm_porter_tail_ends(t, "bl", 2) ||
                dm_porter_tail_ends(t, "iz", 2)) {
                z[n++] = 'e';
            } else if (n >= 2 && z[n - 1] == z[n - 2] &&
                       (z[n - 1] == 'b' || z[n - 1] == 'd' || z[n - 1] == 'f' || z[n - 1] == 'g' ||
                        z[n - 1] == 'm' || z[n - 1] == 'n' || z[n - 1] == 'p' || z[n - 1] == 'r' ||
                        z[n - 1] == 't')) {
                n -= 1;
            } else if (n == p1 && dm_porter_shortv(z, n)) {
                z[n++] = 'e';
            }
        }
    }
    /* Step 1c */
    if (n > 0 && (z[n - 1] == 'y' || z[n - 1] == 'Y') && dm_porter_has_vowel(z, n - 1)) z[n - 1] = 'i';
    /* Step 2 */
    {
        int sl, rl;
        const char *r;
        if (dm_porter_step2_find(z, n, &sl, &r, &rl) && p1 <= n - sl) n = dm_porter_set(z, n, sl, r, rl);
    }
    /* Step 3 */
    {
        int sl, rl;
        const char *r;
        if (dm_porter_step3_find(z, n, &sl, &r, &rl) && p1 <= n - sl) n = dm_porter_set(z, n, sl, r, rl);
    }
    /* Step 4 */
    {
        int sl, rl;
        const char *r;
        if (dm_porter_step4_find(z, n, &sl, &r, &rl)) {
            int b = n - sl;
            if (p2 <= b) {
                if (rl == 0) n = b;
                else if (b > 0 && (z[b - 1] == 's' || z[b - 1] == 't')) n = b; /* 'ion' */
            }
        }
    }
    /* Step 5a */
    if (n > 0 && z[n - 1] == 'e') {
        int c = n - 1;
        if (p2 <= c || (p1 <= c && !dm_porter_shortv(z, c))) n = c;
    }
    /* Step 5b */
    if (n > 0 && z[n - 1] == 'l') {
        int c = n - 1;
        if (p2 <= c && c > 0 && z[c - 1] == 'l') n = c;
    }
    /* postlude */
    if (y_found)
        for (int i = 0; i < n; i++)
            if (z[i] == 'Y') z[i] = 'y';
    return n;
}

#endif
