/* Normaliser, tokeniser and token-stream tests: the ASCII fast path equals utf8proc on every ASCII
 * byte and on random text; NFKC / case fold / mark stripping; chunked normalisation of long
 * documents equals unchunked (also where the fallback cut meets jamo that NFKC joins to the code
 * point before); U+0345 case-folded to iota, not stripped; token rules (lengths, numbers, stop words, --stopwords FILE);
 * hashes = dm_term_hash(stem); the binary file round trip, corruption detection and collision
 * detection in the vocabulary; the header's writer rank and run id, versions 1 and 2 refused, counts
 * beyond the file and a vocabulary out of order refused; a stop-word line of several words refused;
 * the dump's lines with
 * tabs and line breaks in ids and labels; a FIFO or directory named as an input refused.
 * Reference: dm_normalize(force_unicode = 1), dm_tokenize_cpu. */
#include <CUnit/CUnit.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/status.h"
#include "pp_testlib.h"
#include "preprocess/preprocess.h"
#include "preprocess/stream_build.h"
#include "preprocess/token_rules.h"
#include "testutil.h"

static char *norm(const char *s, size_t n, int force, dm_pp_stats *st, size_t *out_len)
{
    char *o = NULL;
    size_t l = 0, c = 0;
    CU_ASSERT_EQUAL(dm_normalize(&o, &l, &c, s, n, force, st), 0);
    *out_len = l;
    if (!o) o = dm_calloc(1, 1);
    return o;
}

static void test_ascii_fast_path_identical(void)
{
    char all[256];
    for (int i = 0; i < 128; i++) all[i] = (char)i;
    size_t a, b;
    char *x = norm(all, 128, 0, NULL, &a), *y = norm(all, 128, 1, NULL, &b);
    CU_ASSERT(a == b && memcmp(x, y, a) == 0);
    CU_ASSERT(a > 0 && memcmp(x, "0123456789 abcdefghijklmnopqrstuvwxyz abcdefghijklmnopqrstuvwxyz ", a) == 0);
    dm_free(x);
    dm_free(y);
    uint64_t seed = 11;
    size_t n = 3 << 20; /* several chunks */
    char *t = malloc(n);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = pp_rand(&seed) % 100;
        t[i] = r < 15 ? ' ' : r < 17 ? '\n' : r < 20 ? (char)('0' + r % 10) : (char)(pp_rand(&seed) % 128);
    }
    x = norm(t, n, 0, NULL, &a);
    y = norm(t, n, 1, NULL, &b);
    CU_ASSERT(a == b && memcmp(x, y, a) == 0);
    dm_free(x);
    dm_free(y);
    /* prose: words of letters (some capitals) and digits between single spaces, so that most
     * 16-byte blocks keep every byte, with a run of separators (". ", ",\n", "  ") now and then */
    size_t all_kept = 0;
    for (size_t i = 0; i < n;) {
        size_t w = 1 + pp_rand(&seed) % 11;
        for (size_t k = 0; k < w && i < n; k++, i++) {
            uint64_t r = pp_rand(&seed) % 40;
            t[i] = r == 0 ? (char)('A' + pp_rand(&seed) % 26) : r == 1 ? (char)('0' + pp_rand(&seed) % 10) : (char)('a' + pp_rand(&seed) % 26);
        }
        uint64_t r = pp_rand(&seed) % 30;
        const char *sep = r == 0 ? ". " : r == 1 ? ",\n" : r == 2 ? "  " : " ";
        for (size_t k = 0; sep[k] && i < n; k++) t[i++] = sep[k];
    }
    for (size_t i = 0; i + 16 <= n; i += 16) { /* blocks without two separators in a row */
        int run = 0;
        for (size_t k = i; k < i + 16; k++) run |= k > 0 && !isalnum((unsigned char)t[k]) && !isalnum((unsigned char)t[k - 1]);
        all_kept += !run;
    }
    CU_ASSERT(all_kept > n / 16 / 2);
    x = norm(t, n, 0, NULL, &a);
    y = norm(t, n, 1, NULL, &b);
    CU_ASSERT(a == b && memcmp(x, y, a) == 0);
    dm_free(x);
    dm_free(y);
    free(t);
    /* mostly ASCII with non-ASCII bytes here and there (Latin-1 bytes, combining marks after a
     * space or a letter, ligatures, NUL, long runs without spaces): the ASCII runs take the fast
     * path, the runs around non-ASCII bytes utf8proc; identical to utf8proc on everything */
    static const char *odd[] = {"\xe9", "\xcc\x81", " \xcc\x81", "\xef\xac\x81", "\xc3\x9f", "\xe6\x97\xa5",
                                "\xc2\xb4", "\xff\xfe", "\xe2\x82", "\0", "\xef\xbc\xa6"};
    static const char *asc[] = {"market ", "Prices\n", "x", "  ", "\t", "ROSE ", "1987 ", "a-b ", "\r\n", "zzzzzzzzzzzzzzzz"};
    n = 5 << 20;
    t = malloc(n + 64);
    size_t l = 0;
    while (l < n) {
        const char *w = pp_rand(&seed) % 40 ? asc[pp_rand(&seed) % 10] : odd[pp_rand(&seed) % 11];
        size_t k = w[0] ? strlen(w) : 1;
        memcpy(t + l, w, k);
        l += k;
    }
    dm_pp_stats s1, s2;
    memset(&s1, 0, sizeof(s1));
    memset(&s2, 0, sizeof(s2));
    x = norm(t, l, 0, &s1, &a);
    y = norm(t, l, 1, &s2, &b);
    CU_ASSERT(a == b && memcmp(x, y, a) == 0);
    CU_ASSERT(s1.invalid_utf8 == s2.invalid_utf8 && s1.nul_bytes == s2.nul_bytes && s1.invalid_utf8 > 0 &&
              s1.nul_bytes > 0);
    if (a != b || memcmp(x, y, a) != 0) {
        size_t i = 0;
        while (i < a && i < b && x[i] == y[i]) i++;
        printf("\n  mixed text differs at %zu: [%.40s] vs [%.40s]", i, x + i, y + i);
    }
    dm_free(x);
    dm_free(y);
    free(t);
}

static void test_unicode_rules(void)
{
    struct { const char *in, *want; } c[] = {
        {"\xef\xac\x81nance", "finance "},                          /* ligature fi (NFKC) */
        {"\xef\xbc\xa6\xef\xbd\x95\xef\xbd\x8c\xef\xbd\x8c", "full "}, /* full-width */
        {"Caf\xc3\xa9 Stra\xc3\x9f" "e", "cafe strasse "},             /* marks, case fold */
        {"e\xcc\x81t\xc3\xa9", "ete "},                               /* combining acute */
        {"x\xc2\xb2 \xe2\x91\xa0", "x2 1 "},                          /* superscript, circled */
        {"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e, text!", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e text "},
        {"a\xe2\x80\x94" "b\xe2\x80\x83" "c", "a b c "},              /* dash, em space */
        /* default ignorables do not cut words: soft hyphen, ZWNJ (Persian), word joiner, ZWJ, BOM,
         * bidi mark, variation selector; the zero-width space separates */
        {"infor\xc2\xadmation", "information "},
        {"\xd9\x85\xdb\x8c\xe2\x80\x8c\xd8\xae\xd9\x88\xd8\xa7\xd9\x87\xd9\x85",
         "\xd9\x85\xdb\x8c\xd8\xae\xd9\x88\xd8\xa7\xd9\x87\xd9\x85 "},
        {"wo\xe2\x81\xa0rd j\xe2\x80\x8d" "oin \xef\xbb\xbf" "bom ma\xe2\x80\x8f" "rk v\xef\xb8\x8f" "s", "word join bom mark vs "},
        {"foo\xe2\x80\x8b" "bar", "foo bar "},
        /* the combining ypogegrammeni U+0345 case-folds to iota: folded, not stripped as a mark,
         * so the canonically equivalent U+1FB3 and U+03B1 U+0345 give the same token; U+037A
         * (NFKC: ' ' U+0345) gives a space, then iota */
        {"a\xe1\xbe\xb3" "b a\xce\xb1\xcd\x85" "b \xce\x91\xcd\x85 x\xcd\xba" "y",
         "a\xce\xb1\xce\xb9" "b a\xce\xb1\xce\xb9" "b \xce\xb1\xce\xb9 x \xce\xb9" "y "},
        {"", ""},
        {"  ...  ", ""},
    };
    for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
        for (int force = 0; force < 2; force++) {
            size_t l;
            char *o = norm(c[i].in, strlen(c[i].in), force, NULL, &l);
            CU_ASSERT(l == strlen(c[i].want) && memcmp(o, c[i].want, l) == 0);
            if (l != strlen(c[i].want) || memcmp(o, c[i].want, l) != 0) printf("\n  [%s] -> [%.*s]", c[i].in, (int)l, o);
            dm_free(o);
        }
    /* invalid UTF-8 never fails: bytes replaced and counted; overlong and surrogates too */
    dm_pp_stats st;
    memset(&st, 0, sizeof(st));
    const char bad[] = "ok\xff\xfe" "a\xc0\xaf" "b\xed\xa0\x80" "c\xe2\x82";
    size_t l;
    char *o = norm(bad, sizeof(bad) - 1, 0, &st, &l);
    CU_ASSERT(st.invalid_utf8 >= 7);
    CU_ASSERT(l == 9 && memcmp(o, "ok a b c ", 9) == 0);
    dm_free(o);
}

/* The reference of the chunking tests: t[0..n) normalised word by word (words end at any byte of
 * seps), concatenated; *len its length. */
static char *norm_by_words(const char *t, size_t n, const char *seps, size_t *len)
{
    char *ref = NULL;
    size_t rc = 0;
    *len = 0;
    for (size_t p = 0; p < n;) {
        size_t e = p;
        while (e < n && !(t[e] && strchr(seps, t[e]))) e++; /* (strchr finds the NUL of seps) */
        CU_ASSERT_EQUAL_FATAL(dm_normalize(&ref, len, &rc, t + p, e - p, 1, NULL), 0);
        p = e + 1;
    }
    return ref;
}

/* A long multibyte document normalised in chunks equals the concatenation of its pieces cut at
 * spaces (each normalised alone). */
static void test_chunking_invariant(void)
{
    static const char *pieces[] = {"na\xc3\xafve", "\xce\xbb\xcf\x8c\xce\xb3\xce\xbf\xcf\x82",
                                   "e\xcc\x81", "word", "\xef\xac\x81", "123", "\xe6\x97\xa5"};
    uint64_t seed = 3;
    size_t cap = 6 << 20, n = 0;
    char *t = malloc(cap + 64);
    while (n < cap) {
        const char *p = pieces[pp_rand(&seed) % 7];
        size_t k = strlen(p);
        memcpy(t + n, p, k);
        n += k;
        t[n++] = pp_rand(&seed) % 5 ? ' ' : '\n';
    }
    size_t a;
    char *x = norm(t, n, 0, NULL, &a);
    size_t rl;
    char *ref = norm_by_words(t, n, " \n", &rl); /* reference: piece by piece */
    CU_ASSERT(a == rl && memcmp(x, ref, a) == 0);
    dm_free(x);
    dm_free(ref);
    free(t);
}

/* Korean written with conjoining jamo (L V T, composed by NFKC into one syllable) between spaces
 * followed by non-ASCII bytes: no cut point of the usual kind, so a document of more than 4 MiB is
 * cut where the fallback says. Shifted by 0..9 bytes, the 4 MiB point falls on every byte of the
 * 10-byte unit, before a V and before a T jamo among them: the output must still equal the words
 * normalised one by one (a cut between L and V gave the two jamo instead of the syllable). */
static void test_chunking_hangul(void)
{
    static const char unit[] = "\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8 "; /* U+1100 U+1161 U+11A8 ' ' */
    const size_t ul = sizeof(unit) - 1, n0 = (4u << 20) + 4096;
    char *t = malloc(n0 + 64);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    size_t bad = 0;
    for (size_t pad = 0; pad < ul; pad++) {
        size_t n = 0;
        for (; n < pad; n++) t[n] = 'a';
        while (n < n0) {
            memcpy(t + n, unit, ul);
            n += ul;
        }
        size_t a;
        char *x = norm(t, n, 0, NULL, &a);
        size_t rl;
        char *ref = norm_by_words(t, n, " ", &rl);
        /* every syllable composed: U+AC01 (3 bytes) and a space per unit */
        CU_ASSERT(rl == pad + (n - pad) / ul * 4);
        if (a != rl || memcmp(x, ref, a) != 0) {
            size_t i = 0;
            while (i < a && i < rl && x[i] == ref[i]) i++;
            printf("\n  pad %zu: %zu bytes vs %zu, first difference at %zu", pad, a, rl, i);
            bad++;
        }
        dm_free(x);
        dm_free(ref);
    }
    CU_ASSERT_EQUAL(bad, 0);
    free(t);
}

/* As test_chunking_hangul, with the other code points that NFKC joins to the one before them
 * when the fallback cut falls before them: compatibility and half-width jamo that NFKC maps to V
 * or T jamo (U+3131 U+314F and U+FFA1 U+FFC2 compose to U+AC00; U+AC00 U+3133 to U+AC03), and a
 * mark or default ignorable between L and V (stripped, so L and V still compose). A cut before
 * any of them gave the jamo instead of the syllable. */
static void test_chunking_jamo_compat(void)
{
    static const struct { const char *unit, *syl; } u[] = {
        {"\xe3\x84\xb1\xe3\x85\x8f ", "\xea\xb0\x80"},             /* U+3131 U+314F */
        {"\xef\xbe\xa1\xef\xbf\x82 ", "\xea\xb0\x80"},             /* U+FFA1 U+FFC2 */
        {"\xea\xb0\x80\xe3\x84\xb3 ", "\xea\xb0\x83"},             /* U+AC00 U+3133 */
        {"\xe1\x84\x80\xe2\x80\x8d\xe1\x85\xa1 ", "\xea\xb0\x80"}, /* L U+200D V */
        {"\xe1\x84\x80\xcc\x80\xe1\x85\xa1 ", "\xea\xb0\x80"},     /* L U+0300 V */
    };
    const size_t n0 = (4u << 20) + 4096;
    char *t = malloc(n0 + 64);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    size_t bad = 0;
    for (size_t k = 0; k < sizeof(u) / sizeof(u[0]); k++) {
        const size_t ul = strlen(u[k].unit);
        for (size_t pad = 0; pad < ul; pad++) {
            size_t n = 0;
            for (; n < pad; n++) t[n] = 'a';
            while (n < n0) {
                memcpy(t + n, u[k].unit, ul);
                n += ul;
            }
            size_t a, rl;
            char *x = norm(t, n, 0, NULL, &a);
            char *ref = norm_by_words(t, n, " ", &rl);
            /* the reference composed every unit: pad letters joined to the first, then a
             * syllable and a space per unit */
            CU_ASSERT(rl == pad + (n - pad) / ul * 4 && memcmp(ref + pad, u[k].syl, 3) == 0);
            if (a != rl || memcmp(x, ref, a) != 0) {
                size_t i = 0;
                while (i < a && i < rl && x[i] == ref[i]) i++;
                printf("\n  unit %zu pad %zu: %zu bytes vs %zu, first difference at %zu", k, pad, a, rl, i);
                bad++;
            }
            dm_free(x);
            dm_free(ref);
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    free(t);
}

/* Tokenises one text with the CPU backend. */
static void tok1(dm_tok_result *r, const char *text, const dm_stopset *stop, const dm_tok_options *o,
                 char **normed)
{
    size_t l = 0, c = 0;
    *normed = NULL;
    CU_ASSERT_EQUAL_FATAL(dm_normalize(normed, &l, &c, text, strlen(text), 0, NULL), 0);
    uint64_t off[2] = {0, l};
    dm_tok_batch b = {*normed ? *normed : "", l, off, 1};
    CU_ASSERT_EQUAL_FATAL(dm_tokenize_cpu(r, &b, stop, o), 0);
}

static void stems_of(char *out, const dm_tok_result *r)
{
    out[0] = 0;
    for (size_t i = 0; i < r->n_tokens; i++) {
        if (i) strcat(out, " ");
        strncat(out, r->stems + r->start[i], r->stem_len[i]);
        CU_ASSERT_EQUAL(r->hash[i], dm_term_hash(r->stems + r->start[i], r->stem_len[i]));
    }
}

static void test_token_rules(void)
{
    dm_stopset stop;
    CU_ASSERT_EQUAL_FATAL(dm_stopset_load(&stop, NULL), 0);
    CU_ASSERT(stop.n > 100);
    CU_ASSERT(dm_stopset_contains(&stop, "the", 3));
    CU_ASSERT(!dm_stopset_contains(&stop, "thé", 4));
    dm_tok_options o = DM_TOK_OPTIONS_INIT;
    dm_tok_result r;
    char *n, s[4096];
    char text[600], k65[66], m64[65];
    memset(k65, 'k', 65); /* 65 bytes: too long */
    k65[65] = 0;
    memset(m64, 'm', 64); /* exactly 64: kept */
    m64[64] = 0;
    snprintf(text, sizeof(text), "The 1987 prices of x crude-oil rose 12.5%% in Q3 %s and 64 %s end", k65, m64);
    tok1(&r, text, &stop, &o, &n);
    stems_of(s, &r);
    char want[512];
    snprintf(want, sizeof(want), "price crude oil rose q3 %.64s end",
             "mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm");
    CU_ASSERT_STRING_EQUAL(s, want);
    CU_ASSERT_EQUAL(r.n_long, 1);
    CU_ASSERT_EQUAL(r.n_short, 2);  /* x 5 (length is checked first) */
    CU_ASSERT_EQUAL(r.n_number, 3); /* 1987 12 64 */
    CU_ASSERT_EQUAL(r.n_stop, 4);   /* the of in and */
    dm_tok_result_free(&r);
    dm_free(n);
    /* numbers kept, no stemming, other bounds */
    o.keep_numbers = 1;
    o.stem = 0;
    o.min_len = 1;
    tok1(&r, "The 1987 prices of x", &stop, &o, &n);
    stems_of(s, &r);
    CU_ASSERT_STRING_EQUAL(s, "1987 prices x");
    dm_tok_result_free(&r);
    dm_free(n);
    dm_stopset_free(&stop);
    /* --stopwords FILE replaces the list (normalised, comments allowed) */
    char dir[1024], path[1100];
    CU_ASSERT_PTR_NOT_NULL_FATAL(dm_test_tmpdir(dir, sizeof(dir)));
    snprintf(path, sizeof(path), "%s/stop.txt", dir);
    const char *list = "# my list\nPRICES\n  Rose # flower\n\n";
    CU_ASSERT_EQUAL(pp_write_file(path, list, strlen(list)), 0);
    CU_ASSERT_EQUAL_FATAL(dm_stopset_load(&stop, path), 0);
    CU_ASSERT_EQUAL(stop.n, 2);
    dm_tok_options o2 = DM_TOK_OPTIONS_INIT;
    tok1(&r, "The prices rose", &stop, &o2, &n);
    stems_of(s, &r);
    CU_ASSERT_STRING_EQUAL(s, "the");
    dm_tok_result_free(&r);
    dm_free(n);
    dm_stopset_free(&stop);
    remove(path);
    CU_ASSERT_EQUAL(dm_stopset_load(&stop, path), DM_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "stop.txt"));
    rmdir(dir);
    /* a large list (most filter bits set) and a small one: the membership filter never rejects a
     * member, and lookups agree with a plain search of the list, members or not */
    for (int big = 0; big < 2; big++) {
        size_t nw = big ? 3001 : 7;
        char *words = malloc(nw * 16 + 1), *w = words;
        uint64_t seed = 77 + (uint64_t)big;
        for (size_t i = 0; i < nw; i++) {
            size_t l = 1 + pp_rand(&seed) % 12;
            for (size_t j = 0; j < l; j++) *w++ = (char)('a' + pp_rand(&seed) % 6);
            *w++ = '\n';
        }
        *w = 0;
        CU_ASSERT_EQUAL_FATAL(dm_stopset_from_text(&stop, words, (size_t)(w - words)), 0);
        size_t bad = 0;
        for (int q = 0; q < 20000; q++) {
            char t[16];
            size_t l = 1 + pp_rand(&seed) % 12;
            for (size_t j = 0; j < l; j++) t[j] = (char)('a' + pp_rand(&seed) % 6);
            int in_list = 0;
            for (const char *a = words; *a;) {
                const char *e = strchr(a, '\n');
                if ((size_t)(e - a) == l && memcmp(a, t, l) == 0) in_list = 1;
                a = e + 1;
            }
            if (dm_stopset_contains(&stop, t, l) != in_list) bad++;
        }
        for (const char *a = words; *a;) { /* every member is found */
            const char *e = strchr(a, '\n');
            if (!dm_stopset_contains(&stop, a, (size_t)(e - a))) bad++;
            a = e + 1;
        }
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT(!dm_stopset_contains(&stop, "", 0));
        dm_stopset_free(&stop);
        free(words);
    }
}

/* Commits 4 prepared batches in order into b and fills them late and out of order (batch k+1's
 * fill before batch k's, and a fill after the next batch's commit grew the arrays). */
static void commit_fill_out_of_order(dm_stream_builder *b, dm_sb_batch *sp, dm_tok_result *res)
{
    dm_sb_batch fresh;
    memset(&fresh, 0, sizeof(fresh));
    CU_ASSERT_EQUAL(dm_sb_batch_commit(b, &fresh, &res[0]), DM_ERR_INVALID_ARG); /* not prepared */
    CU_ASSERT_EQUAL_FATAL(dm_sb_batch_commit(b, &sp[0], &res[0]), 0);
    CU_ASSERT_EQUAL(dm_sb_batch_commit(b, &sp[0], &res[0]), DM_ERR_INVALID_ARG); /* twice */
    CU_ASSERT_EQUAL_FATAL(dm_sb_batch_commit(b, &sp[1], &res[1]), 0);
    CU_ASSERT_EQUAL(dm_sb_batch_fill(b, &sp[1], &res[1]), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_sb_batch_commit(b, &sp[2], &res[2]), 0);
    CU_ASSERT_EQUAL(dm_sb_batch_fill(b, &sp[0], &res[0]), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_sb_batch_commit(b, &sp[3], &res[3]), 0);
    CU_ASSERT_EQUAL(dm_sb_batch_fill(b, &sp[3], &res[3]), DM_OK);
    CU_ASSERT_EQUAL(dm_sb_batch_fill(b, &sp[2], &res[2]), DM_OK);
}

static void check_streams_equal(const dm_token_stream *u, const dm_token_stream *s)
{
    CU_ASSERT_EQUAL(u->stats.hash_collisions, s->stats.hash_collisions);
    CU_ASSERT_EQUAL(memcmp(&u->stats, &s->stats, sizeof(s->stats)), 0);
    CU_ASSERT_EQUAL_FATAL(u->n_docs, s->n_docs);
    CU_ASSERT_EQUAL_FATAL(u->n_terms, s->n_terms);
    CU_ASSERT_EQUAL_FATAL(u->n_tokens, s->n_tokens);
    CU_ASSERT_EQUAL(memcmp(u->hashes, s->hashes, s->n_tokens * 8), 0);
    CU_ASSERT_EQUAL(memcmp(u->tok_off, s->tok_off, (s->n_docs + 1) * 8), 0);
    CU_ASSERT_EQUAL(memcmp(u->id_off, s->id_off, (s->n_docs + 1) * 8), 0);
    CU_ASSERT_EQUAL(memcmp(u->label_off, s->label_off, (s->n_docs + 1) * 8), 0);
    CU_ASSERT_EQUAL(memcmp(u->ids, s->ids, s->id_off[s->n_docs]), 0);
    CU_ASSERT_EQUAL(memcmp(u->labels, s->labels, s->label_off[s->n_docs]), 0);
    CU_ASSERT_EQUAL(memcmp(u->term_hash, s->term_hash, s->n_terms * 8), 0);
    CU_ASSERT_EQUAL(memcmp(u->term_off, s->term_off, (s->n_terms + 1) * 8), 0);
    CU_ASSERT_EQUAL(memcmp(u->term_bytes, s->term_bytes, s->term_off[s->n_terms]), 0);
}

/* Builds the same batches into three streams, one serially through every token (dm_sb_add_doc,
 * dm_sb_add_tokens) and two the pipeline's way (dm_sb_batch_prepare on each batch's own
 * builder-independent state, commits in batch order, fills afterwards and out of order), the
 * second of them with the prefault threads populating ahead (commits reserve more, grows pause
 * the threads, the lookahead is trimmed): the streams must be identical, ids, labels, vocabulary
 * order and collision count included. Seeded words with many repeats, 30000+ distinct ones per
 * batch (the distinct table rehashes several times), stems longer than 8 bytes, an empty batch,
 * and forced collisions: one in a batch (two stems, one hash), one across batches and two stems
 * with hash 0. A fourth stream is built from the lists of possible first occurrences that the
 * CUDA backend gives (dm_tok_first_hd: its step 6 on the host), probing only the listed tokens. */
static void test_stream_batches_identical(void)
{
    enum { NB = 4 };
    dm_stream_builder a, b, c, e;
    CU_ASSERT_EQUAL_FATAL(dm_sb_init(&a), 0);
    CU_ASSERT_EQUAL_FATAL(dm_sb_init(&b), 0);
    CU_ASSERT_EQUAL_FATAL(dm_sb_init(&c), 0);
    CU_ASSERT_EQUAL_FATAL(dm_sb_init(&e), 0);
    CU_ASSERT_EQUAL_FATAL(dm_sb_prefault_start(&c), 0);
    dm_sb_batch sp[NB], sf[NB];
    memset(sp, 0, sizeof(sp));
    memset(sf, 0, sizeof(sf));
    dm_tok_result res[NB], rf[NB];
    uint64_t seed = 12345;
    size_t docs = 0;
    for (int batch = 0; batch < NB; batch++) {
        size_t nt = batch == 2 ? 0 : 100003 + 977 * (size_t)batch, nd = batch == 2 ? 3 : 37 + (size_t)batch;
        char *stems = malloc(nt * 24 + 1);
        uint64_t *start = malloc(nt * 8 + 8), *hash = malloc(nt * 8 + 8), *doc_tok = malloc((nd + 1) * 8);
        uint8_t *len = malloc(nt + 1);
        char *meta = malloc(nd * 64);
        CU_ASSERT_FATAL(stems && start && hash && doc_tok && len && meta);
        size_t off = 0;
        for (size_t i = 0; i < nt; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            unsigned w = (unsigned)(seed >> 33) % (i % 3 ? 200u : 40000u); /* skewed: many repeats */
            int l = i % 7 == 0 ? snprintf(stems + off, 24, "longerword%u", w) : snprintf(stems + off, 24, "w%u", w);
            start[i] = off;
            len[i] = (uint8_t)l;
            hash[i] = dm_term_hash(stems + off, (size_t)l);
            off += (size_t)l + 1;
        }
        /* in this batch "w7" takes the hash of "w5"; across batches: "w9" of batch 3 that of "w11";
         * "w3" and "w4" both hash to 0 in batch 1 (the set of step 6 leaves hash 0 out) */
        for (size_t i = 0; i < nt; i++) {
            if (len[i] == 2 && memcmp(stems + start[i], "w7", 2) == 0) hash[i] = dm_term_hash("w5", 2);
            if (batch == 1 && len[i] == 2 && (memcmp(stems + start[i], "w3", 2) == 0 || memcmp(stems + start[i], "w4", 2) == 0))
                hash[i] = 0;
            if (batch == 3 && len[i] == 2 && memcmp(stems + start[i], "w9", 2) == 0) hash[i] = dm_term_hash("w11", 3);
        }
        for (size_t d = 0; d <= nd; d++) doc_tok[d] = d * nt / nd;
        size_t m = 0;
        for (size_t d = 0; d < nd; d++) {
            char id[32];
            const char *lab = d % 3 == 0 ? "" : d % 3 == 1 ? "earn" : "acq,grain";
            snprintf(id, sizeof(id), "d%zu", docs + d);
            CU_ASSERT_EQUAL(dm_sb_add_doc(&a, id, lab), 0);
            m += (size_t)sprintf(meta + m, "%s", id) + 1;
            m += (size_t)sprintf(meta + m, "%s", lab) + 1;
        }
        dm_tok_result r = {nt, nt, hash, start, len, doc_tok, stems, nd, (uint64_t)batch, 1, 2, 3, NULL, NULL, 0, NULL};
        res[batch] = r;
        CU_ASSERT_EQUAL_FATAL(dm_sb_add_tokens(&a, docs, &r), 0);
        CU_ASSERT_EQUAL_FATAL(dm_sb_batch_prepare(&sp[batch], &r, meta), 0);
        /* the GPU's way: the batch's list of possible first occurrences (step 6 on the host),
         * then only the listed tokens probed: the same distinct terms in the same order */
        rf[batch] = r;
        CU_ASSERT_EQUAL_FATAL(dm_tok_first_hd(&rf[batch]), 0);
        CU_ASSERT(rf[batch].n_first >= sp[batch].n_terms && rf[batch].n_first <= nt);
        /* beyond the distinct terms, only the repeats of a colliding stem and of hash 0 */
        CU_ASSERT(rf[batch].n_first <= sp[batch].n_terms + nt / 50);
        for (size_t q = 1; q < rf[batch].n_first; q++) CU_ASSERT(rf[batch].first[q] > rf[batch].first[q - 1]);
        CU_ASSERT_EQUAL_FATAL(dm_sb_batch_prepare(&sf[batch], &rf[batch], meta), 0);
        CU_ASSERT_EQUAL_FATAL(sf[batch].n_terms, sp[batch].n_terms);
        if (sp[batch].n_terms) { /* (an empty batch has no arrays: memcmp wants pointers) */
            CU_ASSERT_EQUAL(memcmp(sf[batch].term_hash, sp[batch].term_hash, sp[batch].n_terms * 8), 0);
            CU_ASSERT_EQUAL(memcmp(sf[batch].term_len, sp[batch].term_len, sp[batch].n_terms), 0);
            CU_ASSERT_EQUAL(memcmp(sf[batch].term_bytes, sp[batch].term_bytes, sp[batch].term_bytes_len), 0);
        }
        CU_ASSERT_EQUAL(sp[batch].n_docs, nd);
        if (nt) CU_ASSERT(sp[batch].n_terms > 200 && sp[batch].n_terms < nt);
        /* first occurrences, in token order, each (hash, bytes) once */
        for (size_t k = 0, i = 0; k < sp[batch].n_terms; k++) {
            while (i < nt && !(hash[i] == sp[batch].term_hash[k] && len[i] == sp[batch].term_len[k] &&
                               memcmp(stems + start[i], sp[batch].term_bytes + sp[batch].term_off[k], len[i]) == 0))
                i++;
            CU_ASSERT_FATAL(i < nt);
            i++;
        }
        free(meta);
        docs += nd;
    }
    /* commits in order; fills late and out of order (a filled batch may be committed again) */
    commit_fill_out_of_order(&b, sp, res);
    commit_fill_out_of_order(&c, sp, res);
    commit_fill_out_of_order(&e, sf, rf);
    double pf_s = -1;
    uint64_t pf_bytes = 1;
    dm_sb_prefault_stop(&c, &pf_s, &pf_bytes);
    CU_ASSERT(pf_s >= 0);
    CU_ASSERT_EQUAL(c.hashes_cap, c.s.n_tokens); /* lookahead trimmed */
    dm_sb_prefault_stop(&c, &pf_s, &pf_bytes); /* again: nothing left to stop */
    CU_ASSERT(pf_s == 0 && pf_bytes == 0);
    for (int k = 0; k < NB; k++) {
        dm_sb_batch_free(&sp[k]);
        dm_sb_batch_free(&sf[k]);
        dm_free(rf[k].first);
        free(res[k].stems);
        free(res[k].start);
        free(res[k].hash);
        free(res[k].doc_tok);
        free(res[k].stem_len);
    }
    dm_token_stream s, u, v, x;
    CU_ASSERT_EQUAL_FATAL(dm_sb_finish(&s, &a), 0);
    CU_ASSERT_EQUAL_FATAL(dm_sb_finish(&u, &b), 0);
    CU_ASSERT_EQUAL_FATAL(dm_sb_finish(&v, &c), 0);
    CU_ASSERT_EQUAL_FATAL(dm_sb_finish(&x, &e), 0);
    CU_ASSERT_EQUAL(s.stats.hash_collisions, 3);
    CU_ASSERT_EQUAL(s.stats.docs_labelled, 24 + 25 + 2 + 26); /* d % 3 != 0 of 37, 38, 3, 40 */
    check_streams_equal(&u, &s);
    check_streams_equal(&v, &s);
    check_streams_equal(&x, &s);
    dm_token_stream_free(&s);
    dm_token_stream_free(&u);
    dm_token_stream_free(&v);
    dm_token_stream_free(&x);
}

/* Builds a small stream with a forced collision: two different stems given the same hash. */
/* The checksum of a token stream file (crc32 of all but its last 8 bytes, little-endian there). */
static void fix_crc(unsigned char *buf, size_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    c = crc32(c, buf, (uInt)(n - 8));
    for (int k = 0; k < 4; k++) buf[n - 8 + k] = (unsigned char)(c >> (8 * k));
}

/* The invariants a read stream promises: offsets from 0, non-decreasing, ending at the sizes;
 * ids and labels NUL-terminated; hashes and terms within their arrays. */
static int stream_consistent(const dm_token_stream *s)
{
    if (s->tok_off[0] != 0 || s->tok_off[s->n_docs] != s->n_tokens) return 0;
    for (size_t d = 0; d < s->n_docs; d++) {
        if (s->tok_off[d + 1] < s->tok_off[d] || s->id_off[d + 1] <= s->id_off[d] ||
            s->label_off[d + 1] <= s->label_off[d])
            return 0;
        if (s->ids[s->id_off[d + 1] - 1] != 0 || s->labels[s->label_off[d + 1] - 1] != 0) return 0;
        if (strlen(dm_token_stream_id(s, d)) >= s->id_off[d + 1] - s->id_off[d]) return 0;
    }
    for (size_t t = 0; t < s->n_terms; t++)
        if (s->term_off[t + 1] < s->term_off[t]) return 0;
    FILE *f = fopen("/dev/null", "w");
    int ok = f && dm_token_stream_dump(s, f) == 0; /* reads every term it names */
    if (f) fclose(f);
    return ok;
}

static void test_stream_file_and_collisions(void)
{
    dm_stream_builder b;
    CU_ASSERT_EQUAL_FATAL(dm_sb_init(&b), 0);
    dm_sb_add_doc(&b, "d0", "a,b");
    dm_sb_add_doc(&b, "d1", "");
    char stems[] = "alpha beta gamma alpha zeta";
    uint64_t start[] = {0, 6, 11, 17, 23};
    uint8_t len[] = {5, 4, 5, 5, 4};
    uint64_t hash[5];
    for (int i = 0; i < 5; i++) hash[i] = dm_term_hash(stems + start[i], len[i]);
    hash[4] = hash[1]; /* "zeta" collides with "beta" */
    uint64_t doc_tok[] = {0, 3, 5};
    dm_tok_result r = {5, 5, hash, start, len, doc_tok, stems, 2, 0, 0, 0, 0, NULL, NULL, 0, NULL};
    CU_ASSERT_EQUAL_FATAL(dm_sb_add_tokens(&b, 0, &r), 0);
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(dm_sb_finish(&s, &b), 0);
    CU_ASSERT_EQUAL(s.n_terms, 4);
    CU_ASSERT_EQUAL(s.stats.hash_collisions, 1);
    long t = dm_token_stream_term_find(&s, hash[1]);
    CU_ASSERT(t >= 0 && (size_t)t + 1 < s.n_terms && s.term_hash[t + 1] == hash[1]);
    /* file round trip */
    char dir[1024], path[1100];
    CU_ASSERT_PTR_NOT_NULL_FATAL(dm_test_tmpdir(dir, sizeof(dir)));
    snprintf(path, sizeof(path), "%s/t.dmtok", dir);
    CU_ASSERT_EQUAL_FATAL(dm_token_stream_write(&s, path), 0);
    dm_token_stream u;
    CU_ASSERT_EQUAL_FATAL(dm_token_stream_read(&u, path), 0);
    CU_ASSERT_EQUAL(u.n_docs, 2);
    CU_ASSERT_EQUAL(u.n_tokens, 5);
    CU_ASSERT_EQUAL(u.n_terms, 4);
    CU_ASSERT_EQUAL(u.stats.hash_collisions, 1);
    CU_ASSERT_STRING_EQUAL(dm_token_stream_id(&u, 1), "d1");
    CU_ASSERT_STRING_EQUAL(dm_token_stream_labels(&u, 0), "a,b");
    CU_ASSERT_EQUAL(memcmp(u.hashes, s.hashes, 5 * 8), 0);
    CU_ASSERT_EQUAL(memcmp(u.term_bytes, s.term_bytes, s.term_off[4]), 0);
    /* dump names the colliding stems */
    FILE *f = tmpfile();
    CU_ASSERT_EQUAL(dm_token_stream_dump(&u, f), 0);
    rewind(f);
    char line[256];
    CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof(line), f));
    CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof(line), f));
    CU_ASSERT(strstr(line, "beta|zeta") || strstr(line, "zeta|beta"));
    fclose(f);
    dm_token_stream_free(&u);
    /* every single flipped byte and every truncation is detected */
    FILE *in = fopen(path, "rb");
    static unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf), in);
    fclose(in);
    size_t undetected = 0;
    for (size_t i = 0; i < n; i++) {
        buf[i] ^= 0x5a;
        pp_write_file(path, buf, n);
        if (dm_token_stream_read(&u, path) == 0) {
            undetected++;
            dm_token_stream_free(&u);
        }
        buf[i] ^= 0x5a;
    }
    for (size_t k = 0; k < n; k += 7) {
        pp_write_file(path, buf, k);
        if (dm_token_stream_read(&u, path) == 0) {
            undetected++;
            dm_token_stream_free(&u);
        }
    }
    CU_ASSERT_EQUAL(undetected, 0);
    CU_ASSERT_EQUAL(dm_token_stream_read(&u, path), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "t.dmtok"));
    /* behind the checksum: every flipped byte of the body with the checksum made right again (a
     * writer's bug, a crafted file) is read as a consistent stream or refused as a format error
     * naming the file, never read out of bounds (ASan); the counts and offsets are refused */
    size_t refused = 0, accepted = 0;
    for (size_t i = 16; i + 8 < n; i++) {
        buf[i] ^= 0x5a;
        fix_crc(buf, n);
        pp_write_file(path, buf, n);
        int rc = dm_token_stream_read(&u, path);
        if (rc == 0) {
            accepted++;
            CU_ASSERT(stream_consistent(&u));
            dm_token_stream_free(&u);
        } else {
            refused++;
            CU_ASSERT_EQUAL(rc, DM_ERR_FORMAT);
            CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "t.dmtok"));
        }
        buf[i] ^= 0x5a;
    }
    printf("\n    body bytes flipped behind a right checksum: %zu refused, %zu read consistently", refused, accepted);
    CU_ASSERT(refused >= 7 * 8); /* at least every byte of the seven counts */
    fix_crc(buf, n);
    remove(path);
    rmdir(dir);
    dm_token_stream_free(&s);
}

/* A small stream of two documents, the first with this id and labels (the vocabulary built
 * serially). */
static void small_stream(dm_token_stream *s, const char *id0, const char *labels0)
{
    dm_stream_builder b;
    CU_ASSERT_EQUAL_FATAL(dm_sb_init(&b), 0);
    dm_sb_add_doc(&b, id0, labels0);
    dm_sb_add_doc(&b, "d1", "");
    char stems[] = "alpha beta";
    uint64_t start[] = {0, 6}, hash[2], doc_tok[] = {0, 1, 2};
    uint8_t len[] = {5, 4};
    for (int i = 0; i < 2; i++) hash[i] = dm_term_hash(stems + start[i], len[i]);
    dm_tok_result r = {2, 2, hash, start, len, doc_tok, stems, 2, 0, 0, 0, 0, NULL, NULL, 0, NULL};
    CU_ASSERT_EQUAL_FATAL(dm_sb_add_tokens(&b, 0, &r), 0);
    CU_ASSERT_EQUAL_FATAL(dm_sb_finish(s, &b), 0);
}

/* The header names the writer's rank, its run's ranks and its run id (a reader refuses a set of
 * files of different runs by them); a stream of one process is rank 0 of 1; a stream without a run
 * id gets a new one per file (never 0); a file of format version 1 (without rank and ranks) or 2
 * (without the run id) is refused naming the file and the version. */
static void test_stream_header_ranks(void)
{
    char dir[1024], path[1100];
    CU_ASSERT_PTR_NOT_NULL_FATAL(dm_test_tmpdir(dir, sizeof(dir)));
    snprintf(path, sizeof(path), "%s/r.dmtok", dir);
    dm_token_stream s, u;
    small_stream(&s, "d0", "x");
    CU_ASSERT_EQUAL(s.run_id, 0);
    CU_ASSERT_EQUAL(dm_token_stream_write(&s, path), 0);
    CU_ASSERT_EQUAL_FATAL(dm_token_stream_read(&u, path), 0);
    CU_ASSERT(u.rank == 0 && u.n_ranks == 1);
    uint64_t first = u.run_id;
    CU_ASSERT(first != 0);
    dm_token_stream_free(&u);
    CU_ASSERT_EQUAL(dm_token_stream_write(&s, path), 0); /* another write, another run */
    CU_ASSERT_EQUAL_FATAL(dm_token_stream_read(&u, path), 0);
    CU_ASSERT(u.run_id != 0 && u.run_id != first);
    dm_token_stream_free(&u);
    s.rank = 2;
    s.n_ranks = 3;
    s.run_id = 0x0123456789abcdefull;
    CU_ASSERT_EQUAL(dm_token_stream_write(&s, path), 0);
    CU_ASSERT_EQUAL_FATAL(dm_token_stream_read(&u, path), 0);
    CU_ASSERT(u.rank == 2 && u.n_ranks == 3 && u.n_docs == 2 && u.run_id == 0x0123456789abcdefull);
    dm_token_stream_free(&u);
    /* run ids drawn in one process differ (a counter is mixed in) and are never 0 */
    uint64_t ids[64];
    int distinct = 1;
    for (int i = 0; i < 64; i++) {
        ids[i] = dm_token_stream_new_run_id(NULL);
        distinct &= ids[i] != 0;
        for (int k = 0; k < i; k++) distinct &= ids[k] != ids[i];
    }
    CU_ASSERT(distinct);
    static unsigned char v3[1 << 12], buf[1 << 12];
    FILE *in = fopen(path, "rb");
    size_t n3 = fread(v3, 1, sizeof(v3), in);
    fclose(in);
    CU_ASSERT_EQUAL(v3[8], 3);
    CU_ASSERT_EQUAL(v3[24], 0xef); /* the run id, little-endian, after rank and ranks */
    /* the same file as version 2 wrote it: no run id after rank and ranks */
    memcpy(buf, v3, n3);
    memmove(buf + 24, buf + 32, n3 - 32);
    size_t n = n3 - 8;
    buf[8] = 2;
    fix_crc(buf, n);
    pp_write_file(path, buf, n);
    CU_ASSERT_EQUAL(dm_token_stream_read(&u, path), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "r.dmtok: token stream of format version 2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "run docmine preprocess again"));
    /* as version 1 wrote it: neither rank and ranks nor the run id after the flags */
    memcpy(buf, v3, n3);
    memmove(buf + 16, buf + 32, n3 - 32);
    n = n3 - 16;
    buf[8] = 1;
    fix_crc(buf, n);
    pp_write_file(path, buf, n);
    CU_ASSERT_EQUAL(dm_token_stream_read(&u, path), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "r.dmtok: token stream of format version 1"));
    /* a version after this one, and a run id of 0 (never written) */
    memcpy(buf, v3, n3);
    buf[8] = 4;
    fix_crc(buf, n3);
    pp_write_file(path, buf, n3);
    CU_ASSERT_EQUAL(dm_token_stream_read(&u, path), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "r.dmtok: unsupported version"));
    memcpy(buf, v3, n3);
    memset(buf + 24, 0, 8);
    fix_crc(buf, n3);
    pp_write_file(path, buf, n3);
    CU_ASSERT_EQUAL(dm_token_stream_read(&u, path), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "r.dmtok: inconsistent"));
    remove(path);
    rmdir(dir);
    dm_token_stream_free(&s);
}

/* A crafted file (right magic, version and checksum) whose counts claim more than the file holds
 * is refused before anything of that size is allocated: each count of the header set to values
 * whose arrays would overflow (n + 1) * 8 or exceed the file, the host memory in use while reading
 * stays within twice the file's size (the file's bytes, then the arrays copied out of them). A
 * good file is read within the same bound (the whole file in one block of its size). */
static void test_stream_crafted_counts(void)
{
    char dir[1024], path[1100];
    CU_ASSERT_PTR_NOT_NULL_FATAL(dm_test_tmpdir(dir, sizeof(dir)));
    snprintf(path, sizeof(path), "%s/c.dmtok", dir);
    dm_token_stream s, u;
    small_stream(&s, "d0", "x");
    CU_ASSERT_EQUAL_FATAL(dm_token_stream_write(&s, path), 0);
    dm_token_stream_free(&s);
    static unsigned char good[1 << 12], buf[1 << 12];
    FILE *in = fopen(path, "rb");
    size_t n = fread(good, 1, sizeof(good), in);
    fclose(in);
    size_t before = dm_mem_current(DM_MEM_HOST);
    dm_mem_reset_peak(DM_MEM_HOST);
    CU_ASSERT_EQUAL_FATAL(dm_token_stream_read(&u, path), 0);
    CU_ASSERT(dm_mem_peak(DM_MEM_HOST) - before <= 2 * n + 64);
    dm_token_stream_free(&u);
    const uint64_t huge[] = {UINT64_MAX, UINT64_MAX / 8, UINT64_MAX / 8 + 1, (uint64_t)1 << 61, (uint64_t)1 << 32,
                             (uint64_t)n, (uint64_t)n / 8};
    size_t refused = 0, tried = 0;
    for (int field = 0; field < 6; field++) { /* n_docs, n_tokens, n_terms, id, label, term bytes */
        for (size_t h = 0; h < sizeof(huge) / sizeof(huge[0]); h++) {
            memcpy(buf, good, n);
            for (int k = 0; k < 8; k++) buf[32 + 8 * field + k] = (unsigned char)(huge[h] >> (8 * k));
            fix_crc(buf, n);
            pp_write_file(path, buf, n);
            before = dm_mem_current(DM_MEM_HOST);
            dm_mem_reset_peak(DM_MEM_HOST);
            int rc = dm_token_stream_read(&u, path);
            tried++;
            refused += rc == DM_ERR_FORMAT;
            CU_ASSERT(dm_mem_peak(DM_MEM_HOST) - before <= 2 * n + 64);
            CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_HOST), before);
            if (rc == 0) dm_token_stream_free(&u);
        }
    }
    CU_ASSERT_EQUAL(refused, tried);
    /* shorter than the header (the checksum and end marker right) */
    for (size_t k = 16; k < 96; k += 8) {
        memcpy(buf, good, k);
        memcpy(buf + k, good + n - 8, 8);
        fix_crc(buf, k + 8);
        pp_write_file(path, buf, k + 8);
        CU_ASSERT_EQUAL(dm_token_stream_read(&u, path), DM_ERR_FORMAT);
        CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "c.dmtok: "));
    }
    remove(path);
    rmdir(dir);
}

/* The vocabulary as the builder leaves it: strictly increasing in (hash, bytes), terms of at most
 * DM_TOKEN_MAX_LEN bytes (a stem may be empty: Porter makes "" of "s"). A crafted file with the
 * terms out of order, a term twice or a term of 256 bytes is refused (the binary search of
 * dm_token_stream_term_find and tfidf's vocabulary rely on the order); colliding hashes with
 * different bytes stay a valid vocabulary. */
static void test_stream_vocabulary_checked(void)
{
    char dir[1024], path[1100];
    CU_ASSERT_PTR_NOT_NULL_FATAL(dm_test_tmpdir(dir, sizeof(dir)));
    snprintf(path, sizeof(path), "%s/v.dmtok", dir);
    static char bytes[512];
    memset(bytes, 'a', sizeof bytes);
    uint64_t tok_off[] = {0, 2}, id_off[] = {0, 3}, label_off[] = {0, 1};
    char ids[] = "d0", labels[] = "";
    struct {
        uint64_t hash[2], off[3];
        int ok;
    } cases[] = {
        {{5, 9}, {0, 1, 3}, 1},     /* sorted by hash */
        {{5, 5}, {0, 1, 3}, 1},     /* a collision: "a" < "aa" */
        {{5, 5}, {0, 0, 1}, 1},     /* an empty stem first */
        {{9, 5}, {0, 1, 3}, 0},     /* hashes out of order */
        {{5, 5}, {0, 2, 3}, 0},     /* "aa" before "a" */
        {{5, 5}, {0, 2, 4}, 0},     /* "aa" twice */
        {{5, 9}, {0, 1, 257}, 0},   /* a term of 256 bytes */
        {{5, 9}, {0, 255, 256}, 1}, /* 255 bytes: the longest token */
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        dm_token_stream s;
        memset(&s, 0, sizeof s);
        s.n_docs = 1;
        s.tok_off = tok_off;
        s.hashes = cases[c].hash;
        s.n_tokens = 2;
        s.id_off = id_off;
        s.ids = ids;
        s.label_off = label_off;
        s.labels = labels;
        s.n_terms = 2;
        s.term_hash = cases[c].hash;
        s.term_off = cases[c].off;
        s.term_bytes = bytes;
        CU_ASSERT_EQUAL_FATAL(dm_token_stream_write(&s, path), 0);
        dm_token_stream u;
        int rc = dm_token_stream_read(&u, path);
        if (cases[c].ok) {
            CU_ASSERT_EQUAL(rc, 0);
            if (rc == 0) {
                CU_ASSERT_EQUAL(dm_token_stream_term_find(&u, cases[c].hash[0]), 0);
                dm_token_stream_free(&u);
            }
        } else {
            CU_ASSERT_EQUAL(rc, DM_ERR_FORMAT);
            CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "v.dmtok: vocabulary"));
        }
        if ((rc == 0) != cases[c].ok) printf("\n    vocabulary case %zu: read %d", c, rc);
    }
    remove(path);
    rmdir(dir);
}

/* A stop-word file line of several words is refused naming file and line, never cut to its first
 * word (it was: "new york" made "new" a stop word and dropped "york" silently); a word that the
 * tokeniser splits makes each of its tokens a stop word; blanks around a word, CRLF line ends and
 * comments stay allowed. */
static void test_stopwords_one_word_a_line(void)
{
    char dir[1024], path[1100];
    CU_ASSERT_PTR_NOT_NULL_FATAL(dm_test_tmpdir(dir, sizeof(dir)));
    snprintf(path, sizeof(path), "%s/stop.txt", dir);
    dm_stopset stop;
    static const char *bad[] = {"# cities\nparis\nnew york\n", "a\tb\n", "x\n\n  rose  bud # two\n"};
    static const char *where[] = {"stop.txt:3: \"new york\" is several words", "stop.txt:1: \"a\tb\" is several words",
                                  "stop.txt:3: \"rose  bud\" is several words"};
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(pp_write_file(path, bad[i], strlen(bad[i])), 0);
        CU_ASSERT_EQUAL(dm_stopset_load(&stop, path), DM_ERR_FORMAT);
        CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "stop words "));
        CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), where[i]));
        CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "one word a line"));
        CU_ASSERT_EQUAL(stop.n, 0); /* nothing left to free */
    }
    CU_ASSERT_EQUAL(dm_stopset_from_text(&stop, "new york", 8), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "stop words (list):1: \"new york\""));
    const char *good = "  Don't  \r\nE-mail # with a comment\n\tparis\t\n";
    CU_ASSERT_EQUAL(pp_write_file(path, good, strlen(good)), 0);
    CU_ASSERT_EQUAL_FATAL(dm_stopset_load(&stop, path), 0);
    CU_ASSERT_EQUAL(stop.n, 5);
    static const char *in[] = {"don", "t", "e", "mail", "paris"};
    for (int i = 0; i < 5; i++) CU_ASSERT(dm_stopset_contains(&stop, in[i], strlen(in[i])));
    CU_ASSERT(!dm_stopset_contains(&stop, "don't", 5));
    dm_tok_result r;
    char *n, s[256];
    dm_tok_options o = DM_TOK_OPTIONS_INIT;
    o.min_len = 1;
    tok1(&r, "I don't e-mail Paris daily", &stop, &o, &n);
    stems_of(s, &r);
    CU_ASSERT_STRING_EQUAL(s, "i daili");
    dm_tok_result_free(&r);
    dm_free(n);
    dm_stopset_free(&stop);
    /* the built-in list is one word a line */
    CU_ASSERT_EQUAL(dm_stopset_load(&stop, NULL), 0);
    dm_stopset_free(&stop);
    remove(path);
    rmdir(dir);
}

/* The dump is one line of three tab-separated fields a document: tabs and line breaks in ids and
 * labels print as spaces (as in assignments.tsv). */
static void test_dump_fields(void)
{
    dm_token_stream s;
    small_stream(&s, "a\tb\rc", "x\ny,z");
    char *p = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&p, &len);
    CU_ASSERT_EQUAL(dm_token_stream_dump(&s, f), 0);
    fclose(f);
    CU_ASSERT_STRING_EQUAL(p, "a b c\tx y,z\talpha\nd1\t\tbeta\n");
    free(p);
    dm_token_stream_free(&s);
}

/* --stopwords FILE and a token stream name a file: a FIFO (which would block for ever without a
 * writer) and a directory are refused at once, naming the file. The alarm fails the test rather
 * than hanging it. */
static void test_named_inputs_regular(void)
{
    char dir[1024], fifo[1100], sub[1100];
    CU_ASSERT_PTR_NOT_NULL_FATAL(dm_test_tmpdir(dir, sizeof(dir)));
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    snprintf(sub, sizeof(sub), "%s/sub", dir);
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0700), 0);
    alarm(30);
    const char *paths[] = {fifo, sub};
    for (int i = 0; i < 2; i++) {
        dm_stopset set;
        dm_token_stream u;
        CU_ASSERT_EQUAL(dm_stopset_load(&set, paths[i]), DM_ERR_IO);
        CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "stop words "));
        CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), paths[i]));
        CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "not a regular file"));
        CU_ASSERT_EQUAL(dm_token_stream_read(&u, paths[i]), DM_ERR_IO);
        CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), paths[i]));
        CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), i == 0 ? "(a FIFO)" : "(a directory)"));
    }
    alarm(0);
    remove(fifo);
    rmdir(sub);
    rmdir(dir);
}

int main(void)
{
    CU_TestInfo t[] = {
        {"ASCII fast path == utf8proc", test_ascii_fast_path_identical},
        {"NFKC, case fold, marks, invalid UTF-8", test_unicode_rules},
        {"chunked normalisation == unchunked", test_chunking_invariant},
        {"chunked normalisation: no ASCII between words (Hangul jamo)", test_chunking_hangul},
        {"chunked normalisation: compatibility jamo, marks and ignorables at the cut", test_chunking_jamo_compat},
        {"token rules and stop words", test_token_rules},
        {"stream file, corruption, collisions", test_stream_file_and_collisions},
        {"stream: per-batch prepare/commit/fill == serial build", test_stream_batches_identical},
        {"stream file: the writer's rank, ranks and run id; versions 1 and 2 refused", test_stream_header_ranks},
        {"stream file: counts beyond the file refused before allocating", test_stream_crafted_counts},
        {"stream file: the vocabulary's order and term lengths checked", test_stream_vocabulary_checked},
        {"stop words: a line of several words refused, split words all kept", test_stopwords_one_word_a_line},
        {"dump: tabs and line breaks in ids and labels", test_dump_fields},
        {"named inputs: a FIFO or a directory refused, not waited on", test_named_inputs_regular},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"preprocess-tokens", NULL, NULL, NULL, NULL, t}, CU_SUITE_INFO_NULL};
    return dm_test_run(suites);
}
