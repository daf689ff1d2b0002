/* Tests of the synthetic corpus (datasets/synth.h): determinism, independence of the rank
 * split, the vocabulary code (unique, letters only, untouched by libstemmer's Porter stemmer,
 * clear of the stop list), document shape, and option validation. */
#include <CUnit/CUnit.h>
#include <libstemmer.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "datasets/synth.h"
#include "testutil.h"

static int cmp_str(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

static void test_vocabulary_code(void)
{
    /* every word of a 10-topic corpus's vocabularies (ranks 0..2999 per topic + shared) */
    enum { K = 10, R = 3000, N = (K + 1) * R };
    char(*w)[32] = malloc(sizeof *w * N);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    struct sb_stemmer *st = sb_stemmer_new("porter", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(st);
    int n = 0, bad_chars = 0, stemmed = 0;
    for (int t = -1; t < K; t++)
        for (uint32_t r = 0; r < R; r++) {
            dm_synth_word(w[n], K, t, r);
            size_t l = strlen(w[n]);
            for (size_t i = 0; i < l; i++)
                if (w[n][i] < 'a' || w[n][i] > 'z') bad_chars++;
            const sb_symbol *s = sb_stemmer_stem(st, (const sb_symbol *)w[n], (int)l);
            if ((size_t)sb_stemmer_length(st) != l || memcmp(s, w[n], l) != 0) stemmed++;
            CU_ASSERT_TRUE(l >= 4 && l < 32 && w[n][0] == 'z');
            n++;
        }
    sb_stemmer_delete(st);
    CU_ASSERT_EQUAL(bad_chars, 0);
    CU_ASSERT_EQUAL(stemmed, 0);
    qsort(w, (size_t)n, sizeof *w, cmp_str);
    int dup = 0;
    for (int i = 1; i < n; i++) dup += strcmp(w[i - 1], w[i]) == 0;
    CU_ASSERT_EQUAL(dup, 0);
    free(w);
}

static void test_documents(void)
{
    dm_synth_options o = DM_SYNTH_OPTIONS_INIT;
    o.docs = 400;
    o.topics = 7;
    dm_synth s;
    CU_ASSERT_EQUAL_FATAL(dm_synth_init(&s, &o), DM_OK);
    char *a = NULL, *b = NULL;
    size_t ca = 0, cb = 0, la, lb;
    int seen[7] = {0};
    double distinct = 0;
    for (uint64_t i = 0; i < o.docs; i++) {
        int ka, kb;
        CU_ASSERT_EQUAL_FATAL(dm_synth_doc(&s, i, &ka, &a, &ca, &la), DM_OK);
        CU_ASSERT_EQUAL_FATAL(dm_synth_doc(&s, i, &kb, &b, &cb, &lb), DM_OK);
        CU_ASSERT_EQUAL(ka, kb); /* deterministic */
        CU_ASSERT_TRUE(la == lb && memcmp(a, b, la) == 0);
        CU_ASSERT_TRUE(ka >= 0 && ka < 7);
        seen[ka]++;
        int words = 1;
        for (size_t j = 0; j < la; j++) words += a[j] == ' ';
        CU_ASSERT_TRUE(words >= o.min_words && words <= o.max_words);
        CU_ASSERT_TRUE(a[0] != ' ' && a[la - 1] != ' ');
        /* distinct words of the document */
        char(*w)[32] = malloc(sizeof *w * (size_t)words);
        int n = 0;
        for (char *tok = strtok(a, " "); tok; tok = strtok(NULL, " ")) snprintf(w[n++], 32, "%s", tok);
        qsort(w, (size_t)n, sizeof *w, cmp_str);
        int d = n > 0;
        for (int j = 1; j < n; j++) d += strcmp(w[j - 1], w[j]) != 0;
        distinct += d;
        free(w);
    }
    for (int k = 0; k < 7; k++) CU_ASSERT_TRUE(seen[k] > 25); /* ~57 expected per topic */
    distinct /= (double)o.docs;
    CU_ASSERT_TRUE(distinct > 300 && distinct < 500); /* "about 400 distinct words" */
    /* another seed is another corpus */
    dm_synth s2;
    o.seed = 43;
    CU_ASSERT_EQUAL_FATAL(dm_synth_init(&s2, &o), DM_OK);
    int k1, k2;
    CU_ASSERT_EQUAL(dm_synth_doc(&s, 5, &k1, &a, &ca, &la), DM_OK);
    CU_ASSERT_EQUAL(dm_synth_doc(&s2, 5, &k2, &b, &cb, &lb), DM_OK);
    CU_ASSERT_FALSE(la == lb && memcmp(a, b, la) == 0);
    dm_free(a);
    dm_free(b);
    dm_synth_free(&s);
    dm_synth_free(&s2);
}

static void test_topics_separate(void)
{
    /* with no overlap, two documents of different topics share no word */
    dm_synth_options o = DM_SYNTH_OPTIONS_INIT;
    o.overlap = 0.0;
    o.topics = 3;
    o.docs = 50;
    dm_synth s;
    CU_ASSERT_EQUAL_FATAL(dm_synth_init(&s, &o), DM_OK);
    char *a = NULL, *b = NULL;
    size_t ca = 0, cb = 0, la, lb;
    int ka = -1, kb = -1;
    uint64_t j = 1;
    CU_ASSERT_EQUAL(dm_synth_doc(&s, 0, &ka, &a, &ca, &la), DM_OK);
    do {
        CU_ASSERT_EQUAL(dm_synth_doc(&s, j++, &kb, &b, &cb, &lb), DM_OK);
    } while (kb == ka && j < 50);
    CU_ASSERT_NOT_EQUAL_FATAL(ka, kb);
    char *sa = malloc(la + 3);
    sprintf(sa, " %s ", a);
    int shared = 0;
    for (char *tok = strtok(b, " "); tok; tok = strtok(NULL, " ")) {
        char pat[40];
        snprintf(pat, sizeof pat, " %s ", tok);
        shared += strstr(sa, pat) != NULL;
    }
    CU_ASSERT_EQUAL(shared, 0);
    free(sa);
    dm_free(a);
    dm_free(b);
    dm_synth_free(&s);
}

static void test_shares(void)
{
    /* any split over ranks covers [0, docs) exactly once, in order */
    uint64_t docs[] = {1, 7, 1000, 1001};
    for (int d = 0; d < 4; d++)
        for (int size = 1; size <= 6; size++) {
            uint64_t next = 0;
            for (int r = 0; r < size; r++) {
                uint64_t f, l;
                dm_synth_share(docs[d], r, size, &f, &l);
                CU_ASSERT_EQUAL(f, next);
                CU_ASSERT_TRUE(l >= f && l - f <= docs[d] / (uint64_t)size + 1);
                next = l;
            }
            CU_ASSERT_EQUAL(next, docs[d]);
        }
}

static void test_invalid_options(void)
{
    dm_synth s;
    dm_synth_options o = DM_SYNTH_OPTIONS_INIT;
    o.docs = 0;
    CU_ASSERT_EQUAL(dm_synth_init(&s, &o), DM_ERR_INVALID_ARG);
    o = (dm_synth_options)DM_SYNTH_OPTIONS_INIT;
    o.min_words = 100;
    o.max_words = 10;
    CU_ASSERT_EQUAL(dm_synth_init(&s, &o), DM_ERR_INVALID_ARG);
    o = (dm_synth_options)DM_SYNTH_OPTIONS_INIT;
    o.overlap = 1.5;
    CU_ASSERT_EQUAL(dm_synth_init(&s, &o), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "overlap"));
}

int main(void)
{
    CU_TestInfo t[] = {
        {"vocabulary code", test_vocabulary_code},
        {"documents", test_documents},
        {"topics without overlap share no word", test_topics_separate},
        {"rank shares", test_shares},
        {"invalid options", test_invalid_options},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"synth", NULL, NULL, NULL, NULL, t}, CU_SUITE_INFO_NULL};
    return dm_test_run(suites);
}
