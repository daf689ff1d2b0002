/* Porter's stemming algorithm as one DM_HD definition: plain C on the host, device code under
 * nvcc (the CUDA backend's stemmer). Reference: Snowball's "porter" (libstemmer, porter.sbl),
 * which this transcribes step by step, including Snowball's semantics: `among` takes the longest
 * matching suffix and does not fall back to a shorter one when the condition fails; 'y' at the
 * start or after a vowel is marked 'Y' (a consonant) and turned back at the end; R1/R2 are computed
 * once on the marked word. Tested for exact agreement with libstemmer (tests/preprocess).
 * Works on ASCII bytes; the caller passes only ASCII words (others are not stemmed). */
#ifndef DM_PORTER_H
#define DM_PORTER_H

#include "common/hd.h"

DM_HD int dm_porter_v(unsigned char c)
{
    return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u' || c == 'y';
}

DM_HD int dm_porter_v_wxy(unsigned char c)
{
    return dm_porter_v(c) || c == 'w' || c == 'x' || c == 'Y';
}

/* z[0..n) ends with s[0..sl) */
DM_HD int dm_porter_ends(const char *z, int n, const char *s, int sl)
{
    if (sl > n) return 0;
    for (int i = 0; i < sl; i++)
        if (z[n - sl + i] != s[i]) return 0;
    return 1;
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

/* A rule table: suffix, replacement, listed by decreasing suffix length, so the first match is
 * the longest (two suffixes of equal length cannot both match). */
#define DM_PORTER_RULE(s, r) {s, sizeof(s) - 1, r, sizeof(r) - 1}
typedef struct dm_porter_rule {
    const char *s;
    int sl;
    const char *r;
    int rl;
} dm_porter_rule;

/* Finds the longest rule matching the end of z; -1 if none. */
DM_HD int dm_porter_find(const char *z, int n, const dm_porter_rule *rules, int nr)
{
    for (int i = 0; i < nr; i++)
        if (dm_porter_ends(z, n, rules[i].s, rules[i].sl)) return i;
    return -1;
}

/* Stems z[0..n) in place (n <= buffer size; the stem is never longer). Returns the new length. */
DM_HD int dm_porter_stem(char *z, int n)
{
    /* Step 2, 3, 4 tables (longest first) */
    const dm_porter_rule step2[] = {
        DM_PORTER_RULE("ational", "ate"), DM_PORTER_RULE("ization", "ize"),
        DM_PORTER_RULE("fulness", "ful"), DM_PORTER_RULE("ousness", "ous"),
        DM_PORTER_RULE("iveness", "ive"), DM_PORTER_RULE("tional", "tion"),
        DM_PORTER_RULE("biliti", "ble"),  DM_PORTER_RULE("entli", "ent"),
        DM_PORTER_RULE("ation", "ate"),   DM_PORTER_RULE("alism", "al"),
        DM_PORTER_RULE("aliti", "al"),    DM_PORTER_RULE("ousli", "ous"),
        DM_PORTER_RULE("iviti", "ive"),   DM_PORTER_RULE("enci", "ence"),
        DM_PORTER_RULE("anci", "ance"),   DM_PORTER_RULE("abli", "able"),
        DM_PORTER_RULE("izer", "ize"),    DM_PORTER_RULE("ator", "ate"),
        DM_PORTER_RULE("alli", "al"),     DM_PORTER_RULE("eli", "e"),
    };
    const dm_porter_rule step3[] = {
        DM_PORTER_RULE("alize", "al"), DM_PORTER_RULE("icate", "ic"), DM_PORTER_RULE("iciti", "ic"),
        DM_PORTER_RULE("ative", ""),   DM_PORTER_RULE("ical", "ic"),  DM_PORTER_RULE("ness", ""),
        DM_PORTER_RULE("ful", ""),
    };
    const dm_porter_rule step4[] = {
        DM_PORTER_RULE("ement", ""), DM_PORTER_RULE("ance", ""), DM_PORTER_RULE("ence", ""),
        DM_PORTER_RULE("able", ""),  DM_PORTER_RULE("ible", ""), DM_PORTER_RULE("ment", ""),
        DM_PORTER_RULE("ant", ""),   DM_PORTER_RULE("ent", ""),  DM_PORTER_RULE("ism", ""),
        DM_PORTER_RULE("ate", ""),   DM_PORTER_RULE("iti", ""),  DM_PORTER_RULE("ous", ""),
        DM_PORTER_RULE("ive", ""),   DM_PORTER_RULE("ize", ""),  DM_PORTER_RULE("ion", "*"),
        DM_PORTER_RULE("al", ""),    DM_PORTER_RULE("er", ""),   DM_PORTER_RULE("ic", ""),
        DM_PORTER_RULE("ou", ""),
    };
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
    if (dm_porter_ends(z, n, "sses", 4)) n -= 2;
    else if (dm_porter_ends(z, n, "ies", 3)) n -= 2;
    else if (dm_porter_ends(z, n, "ss", 2)) { /* keep */ }
    else if (dm_porter_ends(z, n, "s", 1)) n -= 1;
    /* Step 1b */
    if (dm_porter_ends(z, n, "eed", 3)) {
        if (p1 <= n - 3) n -= 1;
    } else {
        int sl = dm_porter_ends(z, n, "ing", 3) ? 3 : dm_porter_ends(z, n, "ed", 2) ? 2 : 0;
        if (sl > 0 && dm_porter_has_vowel(z, n - sl)) {
            n -= sl;
            if (dm_porter_ends(z, n, "at", 2) || dm_porter_ends(z, n, "bl", 2) ||
                dm_porter_ends(z, n, "iz", 2)) {
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
        int r = dm_porter_find(z, n, step2, (int)(sizeof(step2) / sizeof(step2[0])));
        if (r >= 0 && p1 <= n - step2[r].sl) n = dm_porter_set(z, n, step2[r].sl, step2[r].r, step2[r].rl);
    }
    /* Step 3 */
    {
        int r = dm_porter_find(z, n, step3, (int)(sizeof(step3) / sizeof(step3[0])));
        if (r >= 0 && p1 <= n - step3[r].sl) n = dm_porter_set(z, n, step3[r].sl, step3[r].r, step3[r].rl);
    }
    /* Step 4 */
    {
        int r = dm_porter_find(z, n, step4, (int)(sizeof(step4) / sizeof(step4[0])));
        if (r >= 0) {
            int b = n - step4[r].sl;
            if (p2 <= b) {
                if (step4[r].rl == 0) n = b;
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
