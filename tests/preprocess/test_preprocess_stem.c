/* Stemmer tests: our DM_HD Porter stemmer (porter.h, the code the CUDA kernel runs) against
 * libstemmer's Snowball porter (the CPU backend) on every distinct token of Reuters-21578 and on
 * seeded generated words (random ASCII, suffix-heavy, words with 'Y' and digits); non-ASCII words
 * pass through unchanged on both. Reference: dm_stem_words_cpu. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_testlib.h"
#include "preprocess/porter.h"
#include "preprocess/preprocess.h"
#include "testutil.h"

/* Stems words with both and counts differences (printing the first few). */
static size_t compare_stemmers(const pp_words *w, const char *what)
{
    char *a = malloc(w->len + 1), *b = malloc(w->len + 1);
    uint32_t *ao = malloc(w->n * 4 + 4), *al = malloc(w->n * 4 + 4);
    uint32_t *bo = malloc(w->n * 4 + 4), *bl = malloc(w->n * 4 + 4);
    CU_ASSERT_EQUAL_FATAL(dm_stem_words_cpu(a, ao, al, w->bytes, w->off, w->wlen, w->n), 0);
    CU_ASSERT_EQUAL_FATAL(dm_stem_words_hd(b, bo, bl, w->bytes, w->off, w->wlen, w->n), 0);
    size_t bad = 0, changed = 0;
    for (size_t i = 0; i < w->n; i++) {
        CU_ASSERT(al[i] <= w->wlen[i]);
        if (al[i] != w->wlen[i] || memcmp(a + ao[i], w->bytes + w->off[i], al[i]) != 0) changed++;
        if (al[i] != bl[i] || memcmp(a + ao[i], b + bo[i], al[i]) != 0) {
            if (bad < 10)
                printf("\n  %s: '%.*s': libstemmer '%.*s', ours '%.*s'", what, (int)w->wlen[i],
                       w->bytes + w->off[i], (int)al[i], a + ao[i], (int)bl[i], b + bo[i]);
            bad++;
        }
    }
    printf("\n  %s: %zu words, %zu changed by stemming, %zu differences", what, w->n, changed, bad);
    /* a stemmer that does nothing would agree trivially: require real work */
    CU_ASSERT(changed > w->n / 10);
    free(a);
    free(b);
    free(ao);
    free(al);
    free(bo);
    free(bl);
    return bad;
}

static void test_reuters_tokens(void)
{
    const char *dir = pp_reuters_dir();
    if (!dir) {
        printf("(Reuters not found: skipped) ");
        return;
    }
    pp_words w = {0};
    size_t docs = pp_distinct_tokens(&w, dir, DM_PP_FORMAT_REUTERS);
    CU_ASSERT(docs > 20000);
    CU_ASSERT(w.n > 20000);
    CU_ASSERT_EQUAL(compare_stemmers(&w, "reuters"), 0);
    pp_words_free(&w);
}

static void test_generated_words(void)
{
    pp_words w = {0};
    pp_gen_random_words(&w, 200000, 1);
    CU_ASSERT_EQUAL(compare_stemmers(&w, "random"), 0);
    pp_words_free(&w);
    pp_gen_suffix_words(&w, 300000, 2);
    CU_ASSERT_EQUAL(compare_stemmers(&w, "suffixes"), 0);
    pp_words_free(&w);
}

/* Every word of up to 4 letters over an alphabet that exercises y/Y, vowels, doubles and the
 * suffix letters: exhaustive, so nothing short is left to chance. */
static void test_exhaustive_short(void)
{
    static const char al[] = "aeiyYslbdtgnmcz1";
    const size_t k = sizeof(al) - 1;
    pp_words w = {0};
    char buf[5];
    for (size_t len = 1; len <= 4; len++) {
        size_t total = 1;
        for (size_t i = 0; i < len; i++) total *= k;
        for (size_t x = 0; x < total; x++) {
            size_t v = x;
            for (size_t i = 0; i < len; i++) {
                buf[i] = al[v % k];
                v /= k;
            }
            pp_words_add(&w, buf, len);
        }
    }
    /* exhaustive words are mostly not changed by stemming: compare without the work check */
    char *a = malloc(w.len + 1), *b = malloc(w.len + 1);
    uint32_t *o1 = malloc(w.n * 4), *l1 = malloc(w.n * 4), *o2 = malloc(w.n * 4), *l2 = malloc(w.n * 4);
    CU_ASSERT_EQUAL(dm_stem_words_cpu(a, o1, l1, w.bytes, w.off, w.wlen, w.n), 0);
    CU_ASSERT_EQUAL(dm_stem_words_hd(b, o2, l2, w.bytes, w.off, w.wlen, w.n), 0);
    size_t bad = 0;
    for (size_t i = 0; i < w.n; i++)
        if (l1[i] != l2[i] || memcmp(a + o1[i], b + o2[i], l1[i])) bad++;
    CU_ASSERT_EQUAL(bad, 0);
    free(a);
    free(b);
    free(o1);
    free(l1);
    free(o2);
    free(l2);
    pp_words_free(&w);
}

static void test_known_and_passthrough(void)
{
    /* Porter's own examples (the paper's), then non-ASCII words that must stay as they are */
    static const char *in[] = {"caresses", "ponies", "caress", "cats", "feed", "agreed", "plastered",
                               "motoring", "sing", "conflated", "troubled", "sized", "hopping",
                               "falling", "filing", "happy", "relational", "generalization",
                               "café", "straße", "日本語"};
    static const char *want[] = {"caress", "poni", "caress", "cat", "feed", "agre", "plaster",
                                 "motor", "sing", "conflat", "troubl", "size", "hop", "fall",
                                 "file", "happi", "relat", "gener", "café", "straße", "日本語"};
    pp_words w = {0};
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) pp_words_add(&w, in[i], strlen(in[i]));
    char *a = malloc(w.len + 1), *b = malloc(w.len + 1);
    uint32_t o1[32], l1[32], o2[32], l2[32];
    CU_ASSERT_EQUAL(dm_stem_words_cpu(a, o1, l1, w.bytes, w.off, w.wlen, w.n), 0);
    CU_ASSERT_EQUAL(dm_stem_words_hd(b, o2, l2, w.bytes, w.off, w.wlen, w.n), 0);
    for (size_t i = 0; i < w.n; i++) {
        CU_ASSERT(l1[i] == strlen(want[i]) && memcmp(a + o1[i], want[i], l1[i]) == 0);
        CU_ASSERT(l2[i] == strlen(want[i]) && memcmp(b + o2[i], want[i], l2[i]) == 0);
    }
    free(a);
    free(b);
    pp_words_free(&w);
}

int main(void)
{
    CU_TestInfo t[] = {
        {"Porter examples and non-ASCII pass-through", test_known_and_passthrough},
        {"all words of <= 4 letters", test_exhaustive_short},
        {"generated words: ours == libstemmer", test_generated_words},
        {"every distinct Reuters token: ours == libstemmer", test_reuters_tokens},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"preprocess-stem", NULL, NULL, NULL, NULL, t}, CU_SUITE_INFO_NULL};
    return dm_test_run(suites);
}
