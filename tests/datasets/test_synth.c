/* Tests of the synthetic corpus (datasets/synth.h): determinism, independence of the rank
 * split, the vocabulary code (unique, letters only, untouched by libstemmer's Porter stemmer,
 * clear of the stop list), document shape, and option validation. */
#include <CUnit/CUnit.h>
#include <libstemmer.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/rng.h"
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

/* The guided inverse CDF equals a binary search over the whole CDF (random draws, the CDF's own
 * values, the guide's bucket edges and their neighbours), and the spelt words are
 * dm_synth_word's. */
static void test_draws_and_words(void)
{
    dm_synth_options o = DM_SYNTH_OPTIONS_INIT;
    o.topic_vocab = 3001;
    o.shared_vocab = 77;
    o.zipf_s = 1.3;
    dm_synth s;
    CU_ASSERT_EQUAL_FATAL(dm_synth_init(&s, &o), 0);
    const dm_synth_cdf *cs[2] = {&s.topic, &s.shared};
    uint64_t seed = 5, bad = 0, draws = 0;
    for (int c = 0; c < 2; c++) {
        const dm_synth_cdf *d = cs[c];
        double m = (double)((size_t)1 << d->bits);
        for (int k = 0; k < 400000; k++) {
            double u;
            int kind = k % 4;
            if (kind == 0) u = dm_rng_uniform(seed, (uint64_t)c, (uint64_t)k);
            else if (kind == 1) u = d->cdf[(size_t)k / 4 % (size_t)d->n];
            else if (kind == 2) u = (double)((size_t)k / 4 % ((size_t)1 << d->bits)) / m;
            else u = nextafter((double)((size_t)k / 4 % ((size_t)1 << d->bits) + 1) / m, 0.0);
            if (u >= 1.0) u = nextafter(1.0, 0.0);
            int lo = 0, hi = d->n - 1;
            while (lo < hi) {
                int mid = (lo + hi) / 2;
                if (d->cdf[mid] < u) lo = mid + 1;
                else hi = mid;
            }
            bad += dm_synth_draw(d, u) != (uint32_t)lo;
            draws++;
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(draws == 800000);
    CU_ASSERT_FATAL(s.slots != NULL);
    uint64_t wrong = 0;
    for (uint64_t v = 0; v < s.n_words; v++) {
        char w[32];
        int topic = (int)(v % (uint64_t)(o.topics + 1)) - 1;
        dm_synth_word(w, o.topics, topic, (uint32_t)(v / (uint64_t)(o.topics + 1)));
        const unsigned char *sl = s.slots + 16 * v;
        size_t l = sl[15];
        int rest = 0; /* the word, a space, zeros up to the length byte */
        for (size_t k = l + 1; k < 15; k++) rest |= sl[k];
        wrong += l != strlen(w) || memcmp(sl, w, l) != 0 || sl[l] != ' ' || rest != 0;
    }
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT(s.n_words >= (uint64_t)o.topic_vocab * (uint64_t)(o.topics + 1));
    dm_synth_free(&s);
    /* too many words to spell up front: spelt per draw */
    dm_synth_options big = o;
    big.topics = 2000;
    big.topic_vocab = 4000;
    dm_synth a, b;
    CU_ASSERT_EQUAL_FATAL(dm_synth_init(&a, &big), 0);
    CU_ASSERT(a.slots == NULL);
    dm_synth_free(&a);
    /* a corpus with its words spelt up front and the same corpus spelling them per draw */
    CU_ASSERT_EQUAL_FATAL(dm_synth_init(&b, &o), 0);
    dm_synth c = b;
    c.slots = NULL; /* spelt per draw */
    char *x = NULL, *y = NULL;
    size_t xc = 0, yc = 0, xl = 0, yl = 0;
    for (uint64_t i = 0; i < 50; i++) {
        int lx, ly;
        CU_ASSERT_EQUAL(dm_synth_doc(&b, i, &lx, &x, &xc, &xl), 0);
        CU_ASSERT_EQUAL(dm_synth_doc(&c, i, &ly, &y, &yc, &yl), 0);
        CU_ASSERT(lx == ly && xl == yl && memcmp(x, y, xl) == 0);
    }
    dm_free(x);
    dm_free(y);
    dm_synth_free(&b);
}

/* The generator's draws from the bucket table (dm_synth_draw32) are dm_synth_draw's for u = v /
 * 2^32: every bucket's first and last v, the v next to every CDF boundary, and random v, on a
 * vocabulary whose table has all three kinds of entry (no boundary, one, several). */
static void test_bucket_draws(void)
{
    dm_synth_options o = DM_SYNTH_OPTIONS_INIT;
    o.topic_vocab = 1 << 20; /* its tail: several ranks to a bucket */
    o.shared_vocab = 5000;
    o.zipf_s = 0.6;
    dm_synth s;
    CU_ASSERT_EQUAL_FATAL(dm_synth_init(&s, &o), DM_OK);
    const dm_synth_cdf *cs[2] = {&s.topic, &s.shared};
    uint64_t kinds[3] = {0, 0, 0}, bad = 0, checked = 0;
    for (int c = 0; c < 2; c++) {
        const dm_synth_cdf *d = cs[c];
        const double scale = 1.0 / 4294967296.0;
        for (uint32_t k = 0; k < DM_SYNTH_BUCKETS; k++) {
            uint32_t e = d->bucket[k];
            kinds[(e & DM_SYNTH_SCAN) ? 2 : (e & DM_SYNTH_NEXT) ? 1 : 0]++;
            uint32_t v0 = k << 16, v1 = v0 | 0xffffu;
            bad += dm_synth_draw32(d, v0) != dm_synth_draw(d, (double)v0 * scale);
            bad += dm_synth_draw32(d, v1) != dm_synth_draw(d, (double)v1 * scale);
            checked += 2;
        }
        for (int r = 0; r + 1 < d->n; r++) {
            double b = floor(d->cdf[r] * 4294967296.0);
            for (int dv = -1; dv <= 1; dv++) {
                double v = b + dv;
                if (v < 0 || v > 4294967295.0) continue;
                bad += dm_synth_draw32(d, (uint32_t)v) != dm_synth_draw(d, v * scale);
                checked++;
            }
        }
        for (uint64_t k = 0; k < 200000; k++) {
            uint32_t v = (uint32_t)dm_rng_u64(9, (uint64_t)c, k);
            bad += dm_synth_draw32(d, v) != dm_synth_draw(d, (double)v * scale);
            checked++;
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(checked > 3000000);
    CU_ASSERT(kinds[0] > 0 && kinds[1] > 0 && kinds[2] > 0);
    dm_synth_free(&s);
}

/* FNV-1a of documents [first, first + n): label, length and text. */
static uint64_t corpus_print(const dm_synth_options *o, uint64_t first, uint64_t n)
{
    dm_synth s;
    if (dm_synth_init(&s, o) != DM_OK) return 0;
    char *buf = NULL;
    size_t cap = 0, len = 0;
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t i = first; i < first + n; i++) {
        int label;
        if (dm_synth_doc(&s, i, &label, &buf, &cap, &len) != DM_OK) {
            h = 0;
            break;
        }
        const unsigned char *parts[3] = {(const unsigned char *)&label, (const unsigned char *)&len,
                                         (const unsigned char *)buf};
        size_t sizes[3] = {sizeof label, sizeof len, len};
        for (int k = 0; k < 3; k++)
            for (size_t b = 0; b < sizes[k]; b++) h = (h ^ parts[k][b]) * 0x100000001b3ull;
    }
    dm_free(buf);
    dm_synth_free(&s);
    return h;
}

/* Known answers: the corpus is the one every earlier weak-scaling run and test used (the prints
 * of the generator of git c62b2c7, which drew through the guide table and one Philox call at a
 * time), with the AVX2 Philox rounds and with the scalar ones; the defaults, far into a
 * million-document corpus, a small topic vocabulary with a large background one and mostly
 * background words, words spelt per draw, and all or no background words. */
static void test_known_corpus(void)
{
    dm_synth_options d = DM_SYNTH_OPTIONS_INIT;
    dm_synth_options v = d, w = d, z1 = d, z0 = d;
    v.topics = 3;
    v.overlap = 0.9;
    v.zipf_s = 1.3;
    v.topic_vocab = 50;
    v.shared_vocab = 70000;
    v.min_words = 1;
    v.max_words = 200;
    v.seed = 7;
    w.topics = 2000;
    w.topic_vocab = 4000;
    w.seed = 3;
    w.max_words = 300;
    z1.overlap = 1.0;
    z1.seed = 11;
    z1.max_words = 100;
    z0 = z1;
    z0.overlap = 0.0;
    struct {
        const dm_synth_options *o;
        uint64_t first, n, print;
    } k[] = {
        {&d, 0, 2000, 0x1b79b672440bba22ull},  {&d, 999000, 2000, 0x5b89b358337be81eull},
        {&v, 0, 2000, 0x395205e8ac207036ull},  {&w, 0, 500, 0x4c2d4f96691c3345ull},
        {&z1, 0, 1000, 0xbe08b223f4965336ull}, {&z0, 0, 1000, 0xde4b437ebef664c3ull},
    };
    for (int simd = 1; simd >= 0; simd--) {
        dm_synth_set_simd(simd);
        for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
            uint64_t h = corpus_print(k[i].o, k[i].first, k[i].n);
            if (h != k[i].print) printf("\n  corpus %zu (simd %d): %016llx\n", i, simd, (unsigned long long)h);
            CU_ASSERT_EQUAL(h, k[i].print);
        }
    }
    dm_synth_set_simd(1);
}

/* The words' draws follow the model: a fraction `overlap` of the tokens comes from the background
 * vocabulary, and each vocabulary's ranks follow its Zipf CDF whichever vocabulary was picked (a
 * chi-square test per vocabulary; the bits that pick the vocabulary and the rank are independent).
 * Small vocabularies so that every rank is drawn often; the words map back to (topic, rank). */
static void test_word_distribution(void)
{
    enum { K = 3, TV = 40, SV = 30, DOCS = 400 };
    dm_synth_options o = DM_SYNTH_OPTIONS_INIT;
    o.topics = K;
    o.topic_vocab = TV;
    o.shared_vocab = SV;
    o.docs = DOCS;
    o.overlap = 0.35;
    o.zipf_s = 0.9;
    dm_synth s;
    CU_ASSERT_EQUAL_FATAL(dm_synth_init(&s, &o), DM_OK);
    /* (topic + 1, rank) of every word, by its spelling */
    enum { NW = (K + 1) * TV };
    char(*w)[32] = malloc(sizeof *w * NW);
    int *wt = malloc(sizeof *wt * NW), *wr = malloc(sizeof *wr * NW);
    CU_ASSERT_FATAL(w && wt && wr);
    int nw = 0;
    for (int t = -1; t < K; t++)
        for (int r = 0; r < (t < 0 ? SV : TV); r++, nw++) {
            dm_synth_word(w[nw], K, t, (uint32_t)r);
            wt[nw] = t + 1;
            wr[nw] = r;
        }
    double cnt[K + 1][TV];
    memset(cnt, 0, sizeof cnt);
    double total = 0, background = 0;
    uint64_t unknown = 0;
    char *buf = NULL;
    size_t cap = 0, len = 0;
    for (uint64_t i = 0; i < DOCS; i++) {
        int label;
        CU_ASSERT_EQUAL_FATAL(dm_synth_doc(&s, i, &label, &buf, &cap, &len), DM_OK);
        for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
            int k = 0;
            while (k < nw && strcmp(w[k], tok) != 0) k++;
            if (k == nw || (wt[k] != 0 && wt[k] != label + 1)) {
                unknown++; /* not a word of the document's topic or the background */
                continue;
            }
            cnt[wt[k]][wr[k]]++;
            background += wt[k] == 0;
            total++;
        }
    }
    CU_ASSERT_EQUAL(unknown, 0);
    /* binomial: within 5 standard deviations of overlap */
    double sd = sqrt(total * o.overlap * (1 - o.overlap));
    CU_ASSERT(fabs(background - total * o.overlap) < 5 * sd);
    /* chi-square per vocabulary against the CDF's probabilities: TV - 1 or SV - 1 degrees of
     * freedom (mean d, standard deviation sqrt(2d)); the bound is mean + 6 sd */
    for (int t = 0; t <= K; t++) {
        const dm_synth_cdf *c = t == 0 ? &s.shared : &s.topic;
        double n = 0, chi = 0;
        for (int r = 0; r < c->n; r++) n += cnt[t][r];
        CU_ASSERT_FATAL(n > 1000);
        for (int r = 0; r < c->n; r++) {
            double p = c->cdf[r] - (r ? c->cdf[r - 1] : 0.0);
            chi += (cnt[t][r] - n * p) * (cnt[t][r] - n * p) / (n * p);
        }
        double d = c->n - 1;
        CU_ASSERT(chi < d + 6 * sqrt(2 * d));
    }
    dm_free(buf);
    free(w);
    free(wt);
    free(wr);
    dm_synth_free(&s);
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
        {"guided draws and spelt words", test_draws_and_words},
        {"bucket draws equal guided draws", test_bucket_draws},
        {"known corpus, AVX2 and scalar", test_known_corpus},
        {"word distribution (overlap, Zipf ranks)", test_word_distribution},
        {"invalid options", test_invalid_options},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"synth", NULL, NULL, NULL, NULL, t}, CU_SUITE_INFO_NULL};
    return dm_test_run(suites);
}
