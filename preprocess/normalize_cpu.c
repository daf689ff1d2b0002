/* Unicode normalisation of document text on the CPU: invalid UTF-8 -> U+FFFD (counted), NUL and
 * U+200B -> separator (NUL counted), NFKC + case fold + strip marks + strip the other default
 * ignorables (soft hyphen, ZWJ/ZWNJ, ...) with utf8proc, then every code point that is
 * not a letter (L*) or number (N*) -> ' ' (runs collapsed). ASCII runs (cut like chunks, below)
 * take a fast path with identical output (16 bytes per step with SSSE3 on x86-64, else a scalar
 * loop); only the runs around non-ASCII bytes go to utf8proc.
 * Reference: dm_normalize with force_unicode = 1 (utf8proc on everything).
 * Long documents are normalised in chunks cut just before an ASCII space that is followed by an
 * ASCII byte: no normalisation form interacts across such a point, so chunking changes nothing
 * (text without such points is cut before a code point that composes with nothing before it). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "common/alloc.h"
#include "common/status.h"
#include "preprocess/preprocess.h"

#define DM_NORM_CHUNK (1u << 20)
#define DM_NORM_SMALL_RUN 256 /* bytes of a run sanitised in a stack buffer */

static int dm_norm_reserve(char **out, size_t *cap, size_t need)
{
    if (need <= *cap) return DM_OK;
    size_t nc = *cap ? *cap : 4096;
    while (nc < need) nc *= 2;
    char *p = dm_realloc(*out, nc);
    if (!p) return DM_ERR(DM_ERR_NOMEM, "normalise: cannot grow output to %zu bytes", nc);
    *out = p;
    *cap = nc;
    return DM_OK;
}

/* Appends a separator unless the output already ends with one (or this document is empty). */
static void dm_norm_sep(char *out, size_t *len, size_t doc_start)
{
    if (*len > doc_start && out[*len - 1] != ' ') out[(*len)++] = ' ';
}

static int dm_norm_is_token_cp(utf8proc_int32_t cp)
{
    utf8proc_category_t c = utf8proc_category(cp);
    return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
           (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO);
}

/* ASCII byte -> normalised byte: letters lower-cased, digits kept, 0 for a separator. */
static unsigned char g_norm_map[128];
static void dm_norm_map_init(void)
{
    for (int c = 0; c < 128; c++)
        g_norm_map[c] = (unsigned char)(c >= 'A' && c <= 'Z'   ? c + 32
                                        : (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ? c
                                                                                           : 0);
}
static pthread_once_t g_norm_once = PTHREAD_ONCE_INIT;

/* The scalar loop of the fast path over s[0..n): o[l..] gets the output; *sep as below. */
static size_t dm_norm_ascii_scalar(char *o, size_t l, const char *s, size_t n, int *sep_io, uint64_t *nul)
{
    int sep = *sep_io;
    /* branch-free: word boundaries come every few bytes, and a branch on them mispredicts */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i], m = g_norm_map[c & 0x7f];
        int tok = m != 0;
        o[l] = tok ? (char)m : ' ';
        l += (size_t)(tok | !sep);
        *nul += c == 0;
        sep = !tok;
    }
    *sep_io = sep;
    return l;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DM_NORM_SIMD 1
/* Shuffle that moves the bytes of an 8-byte lane whose bit is set in the index to the front. */
static uint64_t g_norm_pack[256];
static void dm_norm_pack_init(void)
{
    for (int m = 0; m < 256; m++) {
        uint64_t v = 0;
        int k = 0;
        for (int b = 0; b < 8; b++)
            if (m >> b & 1) v |= (uint64_t)b << (8 * k++);
        for (; k < 8; k++) v |= (uint64_t)0x80 << (8 * k); /* pshufb writes 0 there: never kept */
        g_norm_pack[m] = v;
    }
}

/* 16 bytes at a time (SSSE3): classify, lower-case, map separators to ' ', then keep a byte when
 * it or the byte before it is a token byte (a run of separators keeps its first) and pack the
 * kept bytes with pshufb, 8 at a time. Same output as the scalar loop; o needs 16 bytes of slack
 * past the output. Returns the new length; the scalar loop finishes the last n % 16 bytes. */
__attribute__((target("ssse3,popcnt"))) static size_t dm_norm_ascii_ssse3(char *o, size_t l, const char *s,
                                                                           size_t n, int *sep_io, uint64_t *nul,
                                                                           size_t *done)
{
    const __m128i a1 = _mm_set1_epi8('a' - 1), z1 = _mm_set1_epi8('z' + 1);
    const __m128i d1 = _mm_set1_epi8('0' - 1), d9 = _mm_set1_epi8('9' + 1);
    const __m128i x20 = _mm_set1_epi8(0x20), zero = _mm_setzero_si128();
    unsigned prev = *sep_io ? 0u : 1u; /* the byte before is a token byte */
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i lo = _mm_or_si128(v, x20);
        __m128i alpha = _mm_and_si128(_mm_cmpgt_epi8(lo, a1), _mm_cmplt_epi8(lo, z1));
        __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(v, d1), _mm_cmplt_epi8(v, d9));
        __m128i tok = _mm_or_si128(alpha, digit);
        /* letters lower-cased, digits kept, everything else ' ' */
        __m128i w = _mm_or_si128(_mm_and_si128(alpha, lo), _mm_and_si128(digit, v));
        w = _mm_or_si128(w, _mm_andnot_si128(tok, x20));
        unsigned t = (unsigned)_mm_movemask_epi8(tok);
        unsigned keep = (t | (t << 1) | prev) & 0xffffu;
        *nul += (uint64_t)__builtin_popcount((unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, zero)));
        prev = t >> 15;
        if (keep == 0xffffu) { /* no run of separators: every byte stays (most blocks of prose) */
            _mm_storeu_si128((__m128i *)(o + l), w);
            l += 16;
            continue;
        }
        __m128i sh = _mm_set_epi64x(0, (long long)g_norm_pack[keep & 0xff]);
        _mm_storeu_si128((__m128i *)(o + l), _mm_shuffle_epi8(w, sh));
        l += (size_t)__builtin_popcount(keep & 0xff);
        sh = _mm_set_epi64x(0, (long long)g_norm_pack[keep >> 8]);
        _mm_storeu_si128((__m128i *)(o + l), _mm_shuffle_epi8(_mm_srli_si128(w, 8), sh));
        l += (size_t)__builtin_popcount(keep >> 8);
    }
    *sep_io = !prev;
    *done = i;
    return l;
}
#endif

static void dm_norm_maps_init(void)
{
    dm_norm_map_init();
#ifdef DM_NORM_SIMD
    dm_norm_pack_init();
#endif
}

/* ASCII text (every byte < 0x80) -> normalised, appended at *len. */
static int dm_norm_ascii(char **out, size_t *len, size_t *cap, size_t doc_start, const char *s,
                         size_t n, dm_pp_stats *st)
{
    DM_TRY(dm_norm_reserve(out, cap, *len + n + 17));
    pthread_once(&g_norm_once, dm_norm_maps_init);
    char *o = *out;
    size_t l = *len, i = 0;
    /* sep: the output ends with a separator or is at the document start (no leading ' ') */
    int sep = l == doc_start || o[l - 1] == ' ';
    uint64_t nul = 0;
#ifdef DM_NORM_SIMD
    if (n >= 16 && __builtin_cpu_supports("ssse3") && __builtin_cpu_supports("popcnt"))
        l = dm_norm_ascii_ssse3(o, l, s, n, &sep, &nul, &i);
#endif
    l = dm_norm_ascii_scalar(o, l, s + i, n - i, &sep, &nul);
    if (st) st->nul_bytes += nul;
    *len = l;
    return DM_OK;
}

static int dm_norm_unicode(char **out, size_t *len, size_t *cap, size_t doc_start, const char *s,
                           size_t n, dm_pp_stats *st)
{
    /* 1. sanitise: valid UTF-8 without NUL (a run around a non-ASCII byte is mostly one word:
     * those are sanitised on the stack, without an allocation per accented word) */
    char small[DM_NORM_SMALL_RUN * 3 + 1];
    small[0] = 0; /* (n == 0 writes nothing: defined for utf8proc_map's read of none) */
    char *clean = n <= DM_NORM_SMALL_RUN ? small : dm_malloc(3 * n + 1);
    if (!clean) return DM_ERR(DM_ERR_NOMEM, "normalise: out of memory (%zu bytes)", 3 * n + 1);
    size_t cl = 0;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k =
            utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) {
            if (st) st->invalid_utf8++;
            memcpy(clean + cl, "\xEF\xBF\xBD", 3);
            cl += 3;
            i++;
        } else if (cp == 0) {
            if (st) st->nul_bytes++;
            clean[cl++] = ' ';
            i++;
        } else if (cp == 0x200B) {
            /* the zero-width space marks word breaks (Thai, Khmer): a separator, though utf8proc
             * counts it among the ignorables it strips */
            clean[cl++] = ' ';
            i += (size_t)k;
        } else if (cp == 0x0345 || cp == 0x037A) {
            /* utf8proc strips a mark before it case-folds it, but the combining ypogegrammeni
             * U+0345 (Mn) case-folds to the letter iota U+03B9: folded first, as NFKC + case fold
             * + strip marks says, so that the canonically equivalent U+1FB3 and U+03B1 U+0345
             * both give U+03B1 U+03B9; U+037A (NFKC: ' ' U+0345) gives ' ' U+03B9. The only two
             * code points where the order matters (utf8proc 2.8, Unicode 15: every code point
             * checked) */
            if (cp == 0x037A) clean[cl++] = ' ';
            memcpy(clean + cl, "\xCE\xB9", 2);
            cl += 2;
            i += (size_t)k;
        } else {
            memcpy(clean + cl, s + i, (size_t)k);
            cl += (size_t)k;
            i += (size_t)k;
        }
    }
    /* 2. NFKC + case fold + strip marks + strip default ignorables (soft hyphen, zero-width
     * joiners, bidi marks, variation selectors: invisible inside words, which they must not cut,
     * as Unicode's word boundaries (UAX #29) do not) (utf8proc allocates `mapped` with malloc) */
    utf8proc_uint8_t *mapped = NULL;
    utf8proc_ssize_t ml = utf8proc_map((const utf8proc_uint8_t *)clean, (utf8proc_ssize_t)cl, &mapped,
                                       UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT |
                                           UTF8PROC_CASEFOLD | UTF8PROC_STRIPMARK | UTF8PROC_IGNORE);
    if (clean != small) dm_free(clean);
    if (ml < 0) {
        /* only UTF8PROC_ERROR_NOMEM/OVERFLOW remain possible on sanitised input */
        return DM_ERR(DM_ERR_NOMEM, "normalise: utf8proc: %s", utf8proc_errmsg(ml));
    }
    /* 3. keep L and N code points, others -> ' ' */
    int rc = dm_norm_reserve(out, cap, *len + (size_t)ml + 1);
    if (rc < 0) {
        free(mapped);
        return rc;
    }
    char *o = *out;
    size_t l = *len;
    for (utf8proc_ssize_t i = 0; i < ml;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(mapped + i, ml - i, &cp);
        if (k <= 0) { /* cannot happen: utf8proc's own output */
            i++;
            continue;
        }
        if (dm_norm_is_token_cp(cp)) {
            memcpy(o + l, mapped + i, (size_t)k);
            l += (size_t)k;
        } else {
            dm_norm_sep(o, &l, doc_start);
        }
        i += k;
    }
    *len = l;
    free(mapped);
    return DM_OK;
}

/* Index of the first byte >= 0x80 in s[0..n), or n (eight bytes at a time). */
static size_t dm_norm_first_high(const char *s, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        if (w & 0x8080808080808080ull) break;
    }
    while (i < n && (unsigned char)s[i] < 0x80) i++;
    return i;
}

static int dm_norm_is_ws(unsigned char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* Normalises s[0..n) (a chunk that ends at a safe cut) in runs: ASCII runs take the fast path,
 * each run around non-ASCII bytes goes to utf8proc. Runs are cut only where chunks are (before an
 * ASCII whitespace byte followed by an ASCII byte), so the output is the same as utf8proc on the
 * whole chunk: no normalisation form interacts across such a point. */
static int dm_norm_runs(char **out, size_t *len, size_t *cap, size_t doc_start, const char *s,
                        size_t n, dm_pp_stats *st)
{
    size_t p = 0;
    while (p < n) {
        size_t q = p + dm_norm_first_high(s + p, n - p);
        if (q == n) return dm_norm_ascii(out, len, cap, doc_start, s + p, n - p, st);
        /* the last cut before q: whitespace at c with s[c + 1] ASCII (c + 1 < q) */
        size_t c = q;
        for (size_t i = q; i >= p + 2; i--)
            if (dm_norm_is_ws((unsigned char)s[i - 2])) {
                c = i - 2;
                break;
            }
        if (c < q && c > p) {
            DM_TRY(dm_norm_ascii(out, len, cap, doc_start, s + p, c - p, st));
            p = c;
        }
        /* the first cut after q, or the chunk end */
        size_t e = n;
        for (size_t i = q + 1; i + 1 < n; i++)
            if (dm_norm_is_ws((unsigned char)s[i]) && (unsigned char)s[i + 1] < 0x80) {
                e = i;
                break;
            }
        DM_TRY(dm_norm_unicode(out, len, cap, doc_start, s + p, e - p, st));
        p = e;
    }
    return DM_OK;
}

/* 1 when a cut before the code point starting s[0..n) could change the output: a code point
 * whose compatibility decomposition starts with a Hangul vowel or final-consonant jamo, which
 * NFKC composes with the code point before it (L + V -> LV, LV + T -> LVT): U+1161..U+1175 and
 * U+11A8..U+11C2 themselves, and the compatibility and half-width jamo that NFKC maps to them
 * (U+314F -> U+1161, U+3133 -> U+11AA, U+FFC2 -> U+1161, ...); or a mark or default
 * ignorable, which is stripped, so that what follows it meets what precedes it (L, U+200D, V
 * composes). All other code points that compose with the one before are marks. */
static int dm_norm_joins_before(const char *s, size_t n)
{
    utf8proc_int32_t cp, d[4];
    if (utf8proc_iterate((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &cp) <= 0) return 0;
    const utf8proc_property_t *p = utf8proc_get_property(cp);
    if (p->ignorable || p->category == UTF8PROC_CATEGORY_MN || p->category == UTF8PROC_CATEGORY_MC ||
        p->category == UTF8PROC_CATEGORY_ME)
        return 1;
    int last = 0;
    utf8proc_ssize_t k = utf8proc_decompose_char(cp, d, 4, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, &last);
    if (k < 1) return 0;
    return (d[0] >= 0x1161 && d[0] <= 0x1175) || (d[0] >= 0x11A8 && d[0] <= 0x11C2);
}

/* End of the chunk starting at s[0]: just before an ASCII space followed by an ASCII byte, at or
 * after DM_NORM_CHUNK bytes; the whole rest if none within 4 x DM_NORM_CHUNK (text without ASCII
 * between its words: CJK, Korean, Thai). Then the fallback cut: before a code point that composes
 * with nothing before it (not inside a UTF-8 sequence, not before a Hangul V or T jamo, a jamo
 * that NFKC maps to one, a mark or a default ignorable: dm_norm_joins_before). */
static size_t dm_norm_chunk_end(const char *s, size_t n)
{
    if (n <= DM_NORM_CHUNK) return n;
    size_t limit = n < 4 * (size_t)DM_NORM_CHUNK ? n : 4 * (size_t)DM_NORM_CHUNK;
    for (size_t i = DM_NORM_CHUNK; i + 1 < limit; i++) {
        unsigned char c = (unsigned char)s[i], d = (unsigned char)s[i + 1];
        if ((c == ' ' || c == '\n' || c == '\t' || c == '\r') && d < 0x80) return i;
    }
    if (limit == n) return n;
    size_t i = limit;
    while (i > DM_NORM_CHUNK && (((unsigned char)s[i] & 0xC0) == 0x80 || dm_norm_joins_before(s + i, n - i))) i--;
    return i;
}

int dm_normalize(char **out, size_t *out_len, size_t *out_cap, const char *text, size_t len,
                 int force_unicode, dm_pp_stats *st)
{
    if (!out || !out_len || !out_cap || (!text && len))
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_normalize: NULL argument");
    size_t doc_start = *out_len;
    size_t pos = 0;
    while (pos < len) {
        size_t e = pos + dm_norm_chunk_end(text + pos, len - pos);
        if (!force_unicode)
            DM_TRY(dm_norm_runs(out, out_len, out_cap, doc_start, text + pos, e - pos, st));
        else
            DM_TRY(dm_norm_unicode(out, out_len, out_cap, doc_start, text + pos, e - pos, st));
        pos = e;
    }
    DM_TRY(dm_norm_reserve(out, out_cap, *out_len + 1));
    dm_norm_sep(*out, out_len, doc_start);
    return DM_OK;
}
