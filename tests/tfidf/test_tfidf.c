/* Unit tests of tfidf on the CPU backend (one process): the term table under a weak hash and a
 * tiny capacity, per-document counts against a brute-force oracle, the vocabulary merge and
 * lookups, TF-IDF weights against hand-computed values (default idf and scikit-learn parity),
 * min_df/max_df, empty documents and an all-stop-word corpus, the .dmv file (round trip, partial
 * reads, corruption, headers that wrap, rows the writer must refuse), the SVMlight and MatrixMarket
 * exports, TF-ICF tables (fields, memory before the header checks), and the corpus driver
 * against the token-stream path. */
#include <CUnit/CUnit.h>
#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/context.h"
#include "common/fileio.h"
#include "common/rng.h"
#include "common/status.h"
#include "preprocess/preprocess.h"
#include "testutil.h"
#include "tfidf/tfidf.h"
#include "tfidf/tfidf_internal.h"
#include "tfidf/tfidf_tables.h"
#include "tfidf/tfidf_tune.h"
#include "tfidf_testlib.h"

static char g_tmp[512];

static int setup(void) { return dm_test_tmpdir(g_tmp, sizeof g_tmp) ? 0 : 1; }
static int teardown(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : 1;
}

static const char *tmp_path(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", g_tmp, name);
    return buf;
}

/* Finds a term's id in a vocabulary by bytes (linear: tests only). */
static long vocab_id(const dm_vocab *v, const char *w)
{
    for (size_t i = 0; i < v->terms.n; i++)
        if (dm_termlist_len(&v->terms, i) == strlen(w) && memcmp(dm_termlist_bytes(&v->terms, i), w, strlen(w)) == 0)
            return (long)i;
    return -1;
}

/* The stored weight of column c in row r, or 0. */
static double weight(const dm_vectors *v, uint64_t r, long c)
{
    for (uint64_t k = v->row_off[r]; k < v->row_off[r + 1]; k++)
        if ((long)v->col[k] == c) return v->val[k];
    return 0.0;
}

/* ------------------------------------------------------------------ term table */

static void test_termtab_weak_hash_tiny_capacity(void)
{
    /* 500 distinct words, 3 hash values, starting with 2 slots: every insert probes through
     * colliding entries, and the table must grow many times without losing a term */
    dm_termtab t;
    CU_ASSERT_EQUAL_FATAL(dm_termtab_init(&t, 2), DM_OK);
    char w[32];
    uint32_t idx[500];
    for (int i = 0; i < 500; i++) {
        int n = snprintf(w, sizeof w, "w%dx", i * 7919);
        int added = -1;
        CU_ASSERT_EQUAL_FATAL(dm_termtab_insert(&t, &idx[i], &added, tl_weak_hash(w, (size_t)n), w, (size_t)n), DM_OK);
        CU_ASSERT_EQUAL(added, 1);
        CU_ASSERT_EQUAL(idx[i], (uint32_t)i);
    }
    CU_ASSERT_EQUAL(t.terms.n, 500);
    CU_ASSERT_TRUE(t.rebuilds >= 8); /* 2 -> 1024 slots at least */
    CU_ASSERT_TRUE(t.cap >= 1000);
    CU_ASSERT_EQUAL(t.collisions, 500 - 3); /* all but the first of each hash value */
    for (int i = 0; i < 500; i++) {
        int n = snprintf(w, sizeof w, "w%dx", i * 7919);
        CU_ASSERT_EQUAL(dm_termtab_find(&t, tl_weak_hash(w, (size_t)n), w, (size_t)n), (uint32_t)i);
        uint32_t again;
        int added = -1;
        CU_ASSERT_EQUAL(dm_termtab_insert(&t, &again, &added, tl_weak_hash(w, (size_t)n), w, (size_t)n), DM_OK);
        CU_ASSERT_EQUAL(added, 0);
        CU_ASSERT_EQUAL(again, (uint32_t)i);
    }
    /* same hash, different bytes: absent */
    CU_ASSERT_EQUAL(dm_termtab_find(&t, tl_weak_hash("zz", 2), "zz", 2), DM_TERM_NONE);
    /* same bytes, different hash: a different term (hash is part of the identity) */
    CU_ASSERT_EQUAL(dm_termtab_find(&t, 12345, "w0x", 3), DM_TERM_NONE);
    dm_termtab_free(&t);
}

/* ------------------------------------------------------------------ counts */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void test_tf_count_vs_bruteforce(void)
{
    uint64_t s = 77;
    size_t n_docs = 1237;
    uint32_t n_terms = 3001;
    uint64_t *off = dm_malloc(sizeof(uint64_t) * (n_docs + 1));
    off[0] = 0;
    for (size_t d = 0; d < n_docs; d++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        size_t len = (d % 17 == 0) ? 0 : (size_t)((s >> 33) % 700);
        off[d + 1] = off[d] + len;
    }
    uint32_t *tok = dm_malloc(sizeof(uint32_t) * (off[n_docs] + 1));
    for (uint64_t i = 0; i < off[n_docs]; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t a = (uint32_t)((s >> 33) % n_terms), b = (uint32_t)((s >> 13) % n_terms);
        tok[i] = (uint32_t)((uint64_t)a * b / n_terms); /* skewed: repeats within documents */
    }
    dm_tf_counts c;
    dm_tf_count_options o = DM_TF_COUNT_OPTIONS_INIT;
    CU_ASSERT_EQUAL_FATAL(dm_tf_count_cpu(&c, off, tok, n_docs, n_terms, &o), DM_OK);
    CU_ASSERT_EQUAL(c.n_rows, n_docs);
    int ok = 1;
    uint32_t *sorted = dm_malloc(sizeof(uint32_t) * 700);
    for (size_t d = 0; d < n_docs && ok; d++) {
        size_t len = (size_t)(off[d + 1] - off[d]);
        memcpy(sorted, tok + off[d], sizeof(uint32_t) * len);
        qsort(sorted, len, sizeof *sorted, cmp_u32);
        uint64_t k = c.row_off[d];
        for (size_t i = 0; i < len && ok;) {
            size_t j = i;
            while (j < len && sorted[j] == sorted[i]) j++;
            ok = k < c.row_off[d + 1] && c.term[k] == sorted[i] && c.count[k] == (uint32_t)(j - i);
            k++;
            i = j;
        }
        ok = ok && k == c.row_off[d + 1];
        if (len == 0) ok = ok && c.row_off[d + 1] == c.row_off[d];
    }
    CU_ASSERT_TRUE(ok);
    dm_tf_counts_free(&c);
    /* a token outside the term range is refused */
    tok[5] = n_terms;
    CU_ASSERT_EQUAL(dm_tf_count_cpu(&c, off, tok, n_docs, n_terms, &o), DM_ERR_INVALID_ARG);
    dm_free(sorted);
    dm_free(tok);
    dm_free(off);
}

static int counts_equal(const dm_tf_counts *a, const dm_tf_counts *b)
{
    if (a->n_rows != b->n_rows || memcmp(a->row_off, b->row_off, 8 * (a->n_rows + 1)) != 0) return 0;
    uint64_t n = a->row_off[a->n_rows];
    return memcmp(a->term, b->term, 4 * n) == 0 && memcmp(a->count, b->count, 4 * n) == 0;
}

static void test_tf_count_gpu_algorithm_on_host(void)
{
    /* the CUDA tables' algorithm (dm_tf_count_hd) against the CPU counts, both variants */
    size_t n_tok = 300007;
    uint64_t *off = dm_malloc(8 * (n_tok + 3));
    uint32_t *tok = dm_malloc(4 * n_tok);
    size_t n_docs = 0;
    dm_tf_bench_docs(off, tok, n_tok, 20000, 5, &n_docs);
    off[n_docs + 1] = off[n_docs]; /* an empty document at the end */
    n_docs++;
    dm_tf_counts ref, got;
    dm_tf_count_options o = DM_TF_COUNT_OPTIONS_INIT;
    CU_ASSERT_EQUAL_FATAL(dm_tf_count_cpu(&ref, off, tok, n_docs, 20000, &o), DM_OK);
    for (int v = DM_TF_ATOMIC; v <= DM_TF_NOATOMIC; v++) {
        dm_tf_count_options h = DM_TF_COUNT_OPTIONS_INIT;
        h.variant = v;
        CU_ASSERT_EQUAL_FATAL(dm_tf_count_hd(&got, off, tok, n_docs, 20000, &h), DM_OK);
        CU_ASSERT_TRUE(counts_equal(&ref, &got));
        dm_tf_counts_free(&got);
    }
    dm_tf_counts_free(&ref);
    /* adversarial: 700 distinct terms of one bucket, twice each, with slack 1: the bucket of 44
     * slots overflows and the document is rebuilt with doubled buckets until they fit */
    size_t k = 0;
    for (uint32_t t = 0; k < 1400; t++)
        if (dm_tf_bucket_of(t) == 0) {
            tok[k++] = t;
            tok[k++] = t;
        }
    uint32_t n_terms = tok[k - 1] + 1;
    tok[k++] = 3;
    uint64_t off2[3] = {0, 1400, k};
    CU_ASSERT_EQUAL_FATAL(dm_tf_count_cpu(&ref, off2, tok, 2, n_terms, &o), DM_OK);
    for (int v = DM_TF_ATOMIC; v <= DM_TF_NOATOMIC; v++) {
        dm_tf_count_options h = DM_TF_COUNT_OPTIONS_INIT;
        h.variant = v;
        h.bucket_slack = 1;
        CU_ASSERT_EQUAL_FATAL(dm_tf_count_hd(&got, off2, tok, 2, n_terms, &h), DM_OK);
        CU_ASSERT_EQUAL(h.rebuilds, 4); /* 44 -> 88 -> 176 -> 352 -> 704 slots */
        CU_ASSERT_TRUE(counts_equal(&ref, &got));
        CU_ASSERT_EQUAL(got.row_off[1], 700);
        dm_tf_counts_free(&got);
    }
    dm_tf_counts_free(&ref);
    tok[0] = n_terms + 5;
    dm_tf_count_options h = DM_TF_COUNT_OPTIONS_INIT;
    CU_ASSERT_EQUAL(dm_tf_count_hd(&got, off2, tok, 2, n_terms, &h), DM_ERR_INVALID_ARG);
    dm_free(off);
    dm_free(tok);
}

/* Fills per-document tables the way the CUDA instances do, in one of three token orders: 0 in
 * order, 1 reversed, 2 as 32 lanes of a warp with 2 strided tokens each take them (lane-major).
 * A token whose bucket is full is dropped and the document flagged, as a lane of the kernel. */
static void fill_tables(uint32_t *key, uint32_t *cnt, uint32_t *over, const uint64_t *tab_off, const uint64_t *off,
                        const uint32_t *tok, size_t n_docs, int order)
{
    memset(key, 0xff, 4 * tab_off[n_docs]);
    memset(cnt, 0, 4 * tab_off[n_docs]);
    for (size_t d = 0; d < n_docs; d++) {
        uint64_t b = off[d], e = off[d + 1], len = e - b;
        uint32_t bcap = (uint32_t)((tab_off[d + 1] - tab_off[d]) / DM_TF_BUCKETS);
        over[d] = 0;
        for (uint64_t j = 0; j < len; j++) {
            uint64_t i = b + j;
            if (order == 1) i = e - 1 - j;
            if (order == 2 && j / 64 * 64 + 64 <= len) { /* a last, partial chunk stays in order */
                uint64_t q = j % 64;
                i = b + j / 64 * 64 + q / 2 + 32 * (q % 2);
            }
            if (!dm_tf_insert(key + tab_off[d], cnt + tab_off[d], bcap, tok[i], 1, 1)) over[d] = 1;
        }
    }
}

static void table_offsets_of(uint64_t *tab_off, const uint64_t *off, size_t n_docs, const uint8_t *grow)
{
    tab_off[0] = 0;
    for (size_t d = 0; d < n_docs; d++)
        tab_off[d + 1] = tab_off[d] + DM_TF_BUCKETS * dm_tf_bcap(off[d + 1] - off[d], 2, grow ? grow[d] : 0);
}

static void test_tf_tuning_output_canonical(void)
{
    /* the CUDA count kernels' tuning workload: tables sized by dm_tf_table_grow_fit never
     * overflow, and dm_tf_tables_canonical gives the same bytes whatever the insert order, equal
     * to the CPU counts, and different bytes for a wrong count */
    const size_t n_tok = 100003;
    const uint32_t n_terms = 60000;
    uint64_t *off = dm_malloc(8 * (n_tok + 2));
    uint32_t *tok = dm_malloc(4 * n_tok);
    size_t n_docs = 0;
    dm_tf_bench_docs(off, tok, n_tok, n_terms, 1234, &n_docs);
    dm_tf_counts ref;
    dm_tf_count_options o = DM_TF_COUNT_OPTIONS_INIT;
    CU_ASSERT_EQUAL_FATAL(dm_tf_count_cpu(&ref, off, tok, n_docs, n_terms, &o), DM_OK);
    uint8_t *grow = dm_calloc(n_docs, 1);
    uint64_t *tab_off = dm_malloc(8 * (n_docs + 1));
    size_t grown = 0;
    for (size_t d = 0; d < n_docs; d++) {
        grow[d] = (uint8_t)dm_tf_table_grow_fit(ref.term + ref.row_off[d], ref.row_off[d + 1] - ref.row_off[d],
                                                off[d + 1] - off[d], 2);
        grown += grow[d] > 0;
    }
    CU_ASSERT(grown > 0); /* the first-pass sizes overflow some documents of this workload */
    table_offsets_of(tab_off, off, n_docs, grow);
    uint64_t slots = tab_off[n_docs];
    uint32_t *key = dm_malloc(4 * slots), *cnt = dm_malloc(4 * slots), *over = dm_malloc(4 * n_docs);
    uint32_t *key0 = dm_malloc(4 * slots);
    uint64_t *canon[3];
    for (int order = 0; order < 3; order++) {
        fill_tables(key, cnt, over, tab_off, off, tok, n_docs, order);
        size_t n_over = 0;
        for (size_t d = 0; d < n_docs; d++) n_over += over[d];
        CU_ASSERT_EQUAL(n_over, 0);
        canon[order] = dm_malloc(8 * slots);
        dm_tf_tables_canonical(canon[order], key, cnt, tab_off, over, n_docs);
        if (order == 0) memcpy(key0, key, 4 * slots);
        else CU_ASSERT(memcmp(key0, key, 4 * slots) != 0); /* raw slots depend on the order */
    }
    CU_ASSERT(memcmp(canon[0], canon[1], 8 * slots) == 0);
    CU_ASSERT(memcmp(canon[0], canon[2], 8 * slots) == 0);
    /* the canonical rows are the CPU counts */
    int same = 1;
    for (size_t d = 0; d < n_docs && same; d++) {
        uint64_t m = ref.row_off[d + 1] - ref.row_off[d];
        for (uint64_t j = 0; j < m; j++) {
            uint64_t k = ref.row_off[d] + j;
            same = same && canon[0][tab_off[d] + j] == ((uint64_t)ref.term[k] << 32 | ref.count[k]);
        }
        same = same && (tab_off[d] + m == tab_off[d + 1] || canon[0][tab_off[d] + m] == 0);
    }
    CU_ASSERT_TRUE(same);
    dm_tf_counts_free(&ref);
    /* a wrong count (one slot off by one) changes the output */
    uint64_t s = 0;
    while (key[s] == DM_TF_EMPTY) s++;
    cnt[s]++;
    uint64_t *bad = dm_malloc(8 * slots);
    dm_tf_tables_canonical(bad, key, cnt, tab_off, over, n_docs);
    CU_ASSERT(memcmp(canon[2], bad, 8 * slots) != 0);
    /* the fit is the smallest: one doubling less overflows every grown document */
    size_t too_small = 0;
    for (size_t d = 0; d < n_docs; d++) {
        if (!grow[d]) continue;
        uint64_t len = off[d + 1] - off[d];
        uint32_t bcap = (uint32_t)dm_tf_bcap(len, 2, grow[d] - 1);
        uint32_t *k1 = dm_malloc(4 * DM_TF_BUCKETS * bcap), *c1 = dm_calloc(DM_TF_BUCKETS * bcap, 4);
        memset(k1, 0xff, 4 * DM_TF_BUCKETS * bcap);
        int ok = 1;
        for (uint64_t i = off[d]; i < off[d + 1]; i++) ok &= dm_tf_insert(k1, c1, bcap, tok[i], 1, 1);
        too_small += !ok;
        dm_free(k1);
        dm_free(c1);
    }
    CU_ASSERT_EQUAL(too_small, grown);
    dm_free(key);
    dm_free(cnt);
    dm_free(over);
    dm_free(key0);
    /* first-pass sizes (no growth): overflowed tables hold order-dependent partial contents, the
     * flags do not depend on the order, and the canonical form keeps only the flags */
    table_offsets_of(tab_off, off, n_docs, NULL);
    slots = tab_off[n_docs];
    uint32_t *ka = dm_malloc(4 * slots), *ca = dm_malloc(4 * slots), *oa = dm_malloc(4 * n_docs);
    uint32_t *kb = dm_malloc(4 * slots), *cb = dm_malloc(4 * slots), *ob = dm_malloc(4 * n_docs);
    fill_tables(ka, ca, oa, tab_off, off, tok, n_docs, 0);
    fill_tables(kb, cb, ob, tab_off, off, tok, n_docs, 1);
    size_t n_over = 0, partial_differs = 0;
    for (size_t d = 0; d < n_docs; d++) {
        n_over += oa[d];
        CU_ASSERT_EQUAL(oa[d], grow[d] > 0);
        if (oa[d]) partial_differs += memcmp(ka + tab_off[d], kb + tab_off[d], 4 * (tab_off[d + 1] - tab_off[d])) != 0;
    }
    CU_ASSERT(memcmp(oa, ob, 4 * n_docs) == 0);
    CU_ASSERT(n_over == grown && partial_differs > 0);
    uint64_t *xa = dm_malloc(8 * slots), *xb = dm_malloc(8 * slots);
    dm_tf_tables_canonical(xa, ka, ca, tab_off, oa, n_docs);
    dm_tf_tables_canonical(xb, kb, cb, tab_off, ob, n_docs);
    CU_ASSERT(memcmp(xa, xb, 8 * slots) == 0);
    printf("\n  %zu documents, %zu overflow at first-pass sizes (%zu with order-dependent contents)", n_docs, n_over,
           partial_differs);
    for (int order = 0; order < 3; order++) dm_free(canon[order]);
    dm_free(bad);
    dm_free(ka);
    dm_free(ca);
    dm_free(oa);
    dm_free(kb);
    dm_free(cb);
    dm_free(ob);
    dm_free(xa);
    dm_free(xb);
    dm_free(grow);
    dm_free(tab_off);
    dm_free(off);
    dm_free(tok);
}

/* ------------------------------------------------------------------ vocabulary table */

static void test_vocab_merge_and_lookup_collisions(void)
{
    /* 2000 occurrences of 300 words under the weak hash; the merge must keep them apart */
    dm_termlist in = {0};
    size_t cap = 0, bcap = 0;
    char w[32];
    uint64_t expect_sum[300] = {0};
    uint64_t s = 5;
    for (int i = 0; i < 2000; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int k = (int)((s >> 33) % 300);
        int n = snprintf(w, sizeof w, "t%d", k);
        uint64_t val = 1 + (s >> 50) % 5;
        expect_sum[k] += val;
        CU_ASSERT_EQUAL_FATAL(dm_termlist_push(&in, &cap, &bcap, tl_weak_hash(w, (size_t)n), w, (size_t)n, val), DM_OK);
    }
    dm_termlist out;
    dm_vocab_table_options o = DM_VOCAB_TABLE_OPTIONS_INIT;
    o.initial_cap = 2;
    CU_ASSERT_EQUAL_FATAL(dm_vocab_merge_cpu(&out, &in, &o), DM_OK);
    CU_ASSERT_TRUE(o.rebuilds > 0);
    size_t distinct = 0;
    for (int k = 0; k < 300; k++) distinct += expect_sum[k] > 0;
    CU_ASSERT_EQUAL(out.n, distinct);
    CU_ASSERT_EQUAL(o.collisions, distinct - 3);
    /* first-occurrence order, summed values */
    size_t next = 0;
    int ok = 1;
    for (size_t i = 0; i < in.n && ok; i++) {
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            if (dm_termlist_len(&in, j) == dm_termlist_len(&in, i) &&
                memcmp(dm_termlist_bytes(&in, j), dm_termlist_bytes(&in, i), dm_termlist_len(&in, i)) == 0)
                seen = 1;
        if (seen) continue;
        int k = atoi(dm_termlist_bytes(&in, i) + 1);
        ok = dm_termlist_len(&out, next) == dm_termlist_len(&in, i) &&
             memcmp(dm_termlist_bytes(&out, next), dm_termlist_bytes(&in, i), dm_termlist_len(&in, i)) == 0 &&
             out.val[next] == expect_sum[k] && out.hash[next] == in.hash[i];
        next++;
    }
    CU_ASSERT_TRUE(ok);
    /* lookups of every input term find its merged entry; unknown words are absent */
    uint32_t *ids = dm_malloc(sizeof(uint32_t) * in.n);
    o.initial_cap = 2;
    CU_ASSERT_EQUAL_FATAL(dm_vocab_lookup_cpu(ids, &out, &in, &o), DM_OK);
    ok = 1;
    for (size_t i = 0; i < in.n && ok; i++)
        ok = ids[i] < out.n && dm_termlist_len(&out, ids[i]) == dm_termlist_len(&in, i) &&
             memcmp(dm_termlist_bytes(&out, ids[i]), dm_termlist_bytes(&in, i), dm_termlist_len(&in, i)) == 0;
    CU_ASSERT_TRUE(ok);
    dm_termlist q = {0};
    cap = bcap = 0;
    dm_termlist_push(&q, &cap, &bcap, tl_weak_hash("t9999", 5), "t9999", 5, 0);
    dm_termlist_push(&q, &cap, &bcap, tl_weak_hash("t1", 2) + 1, "t1", 2, 0); /* right bytes, wrong hash */
    uint32_t qi[2];
    CU_ASSERT_EQUAL(dm_vocab_lookup_cpu(qi, &out, &q, &o), DM_OK);
    CU_ASSERT_EQUAL(qi[0], DM_TERM_NONE);
    CU_ASSERT_EQUAL(qi[1], DM_TERM_NONE);
    /* a vocabulary with a repeated term is refused */
    CU_ASSERT_EQUAL(dm_vocab_lookup_cpu(ids, &in, &q, &o), DM_ERR_INVALID_ARG);
    /* hash-only lookup: unambiguous under the real hash, ambiguous under the weak one */
    uint64_t h[2] = {in.hash[0], 77};
    CU_ASSERT_EQUAL(dm_hash_lookup_cpu(qi, &out, h, 2, &o), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "stands for both"));
    dm_termlist_free(&q);
    dm_free(ids);
    dm_termlist_free(&out);
    dm_termlist_free(&in);
}

static void test_hash_lookup_real_hash(void)
{
    dm_termlist v = {0};
    size_t cap = 0, bcap = 0;
    char w[32];
    for (int i = 0; i < 1000; i++) {
        int n = snprintf(w, sizeof w, "term%d", i);
        dm_termlist_push(&v, &cap, &bcap, tl_real_hash(w, (size_t)n), w, (size_t)n, 0);
    }
    uint64_t h[1001];
    for (int i = 0; i < 1000; i++) h[i] = v.hash[999 - i];
    h[1000] = tl_real_hash("absent", 6);
    uint32_t ids[1001];
    dm_vocab_table_options o = DM_VOCAB_TABLE_OPTIONS_INIT;
    o.initial_cap = 4;
    CU_ASSERT_EQUAL_FATAL(dm_hash_lookup_cpu(ids, &v, h, 1001, &o), DM_OK);
    int ok = 1;
    for (int i = 0; i < 1000; i++) ok = ok && ids[i] == (uint32_t)(999 - i);
    CU_ASSERT_TRUE(ok);
    CU_ASSERT_EQUAL(ids[1000], DM_TERM_NONE);
    CU_ASSERT_TRUE(o.rebuilds > 0);
    dm_termlist_free(&v);
}

/* ------------------------------------------------------------------ weights */

static const char *g_small[] = {"apple banana apple", "banana cherry", "apple cherry cherry date"};

static void test_sklearn_parity_hand_computed(void)
{
    /* scikit-learn TfidfVectorizer(smooth_idf=True, norm='l2'): idf = ln((1+N)/(1+df)) + 1,
     * tf = raw count, then L2. N = 3; df(apple) = df(banana) = df(cherry) = 2, df(date) = 1.
     * Worked by hand:
     *   idf2 = ln(4/3) + 1 = 1.2876820724517809, idf1 = ln(2) + 1 = 1.6931471805599454
     *   d0 = (apple 2 x idf2, banana 1 x idf2)  -> (2, 1) / sqrt(5)
     *   d1 = (banana idf2, cherry idf2)         -> (1, 1) / sqrt(2)
     *   d2 = (apple idf2, cherry 2 idf2, date idf1), |d2| = sqrt(5 idf2^2 + idf1^2)
     *      = sqrt(5 x 1.6581250 + 2.8667474) = 3.3402654
     *      -> apple 0.38550292, cherry 0.77100584, date 0.50689001 */
    dm_tfidf_local l;
    CU_ASSERT_EQUAL_FATAL(tl_local_build(&l, g_small, 3, tl_real_hash, 0, "d", 0, NULL), DM_OK);
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
    o.idf = DM_IDF_SKLEARN;
    dm_vectors v;
    dm_vocab voc;
    dm_tfidf_stats st;
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_vectors(&v, &voc, &st, NULL, &l, &o), DM_OK);
    CU_ASSERT_EQUAL(voc.terms.n, 4);
    CU_ASSERT_EQUAL(v.n_cols, 4);
    /* ids in byte order of the terms */
    CU_ASSERT_EQUAL(vocab_id(&voc, "apple"), 0);
    CU_ASSERT_EQUAL(vocab_id(&voc, "banana"), 1);
    CU_ASSERT_EQUAL(vocab_id(&voc, "cherry"), 2);
    CU_ASSERT_EQUAL(vocab_id(&voc, "date"), 3);
    CU_ASSERT_EQUAL(voc.terms.val[0], 2);
    CU_ASSERT_EQUAL(voc.terms.val[3], 1);
    CU_ASSERT_EQUAL(voc.n_docs, 3);
    CU_ASSERT_EQUAL(v.flags, DM_VECTORS_L2 | DM_VECTORS_IDF_SKLEARN);
    const double tol = 1e-6;
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 0, 0), 0.894427191, tol);
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 0, 1), 0.447213595, tol);
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 1, 1), 0.707106781, tol);
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 1, 2), 0.707106781, tol);
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 2, 0), 0.38550292, tol);
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 2, 2), 0.77100584, tol);
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 2, 3), 0.50689001, tol);
    CU_ASSERT_EQUAL(dm_vectors_nnz(&v), 7);
    CU_ASSERT_STRING_EQUAL(dm_vectors_id(&v, 2), "d2");
    CU_ASSERT_EQUAL(st.docs, 3);
    CU_ASSERT_EQUAL(st.tokens, 9);
    CU_ASSERT_EQUAL(st.nnz, 7);
    CU_ASSERT_TRUE(tl_vectors_ok(&v, 1, 1e-6));
    dm_vectors_free(&v);
    /* TfidfVectorizer(sublinear_tf=True): tf = 1 + ln(count). d2 = (idf2, (1 + ln 2) idf2, idf1)
     * = (1.2876821, 2.1802353, 1.6931472), norm 3.0460299 -> (0.4227411, 0.7157629, 0.5558538);
     * d0 = ((1 + ln 2) idf2, idf2) -> (1.6931472, 1) / sqrt(1.6931472^2 + 1) = (0.8610, 0.5085) */
    o.sublinear = 1;
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_vectors(&v, NULL, NULL, NULL, &l, &o), DM_OK);
    CU_ASSERT_EQUAL(v.flags, DM_VECTORS_L2 | DM_VECTORS_IDF_SKLEARN | DM_VECTORS_SUBLINEAR);
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 2, 0), 0.42274111, tol);
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 2, 2), 0.71576292, tol);
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 2, 3), 0.55585376, tol);
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 0, 0), 1.6931472 / sqrt(1.6931472 * 1.6931472 + 1.0), tol);
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 0, 1), 1.0 / sqrt(1.6931472 * 1.6931472 + 1.0), tol);
    dm_vectors_free(&v);
    dm_vocab_free(&voc);
    dm_tfidf_local_free(&l);
}

static void test_default_idf_sublinear_nol2(void)
{
    /* idf = ln(N/df). Without L2: d0 apple tf = 2/3 -> 2/3 ln(3/2) = 0.270310; banana 1/3 ln(3/2)
     * = 0.135155. Sublinear, no L2: d2 cherry (1 + ln 2) ln(3/2) = 0.686512, date 1 x ln 3. */
    dm_tfidf_local l;
    CU_ASSERT_EQUAL_FATAL(tl_local_build(&l, g_small, 3, tl_real_hash, 0, "d", 0, NULL), DM_OK);
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
    o.l2 = 0;
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_vectors(&v, NULL, NULL, NULL, &l, &o), DM_OK);
    CU_ASSERT_EQUAL(v.flags, 0u);
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 0, 0), 0.27031007, 1e-7);
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 0, 1), 0.13515504, 1e-7);
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 2, 3), 1.0986123 / 4.0, 1e-7);
    dm_vectors_free(&v);
    o.sublinear = 1;
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_vectors(&v, NULL, NULL, NULL, &l, &o), DM_OK);
    CU_ASSERT_EQUAL(v.flags, DM_VECTORS_SUBLINEAR);
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 2, 2), 0.68651210, 1e-7);
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 2, 3), 1.0986123, 1e-7);
    dm_vectors_free(&v);
    dm_tfidf_local_free(&l);
}

static void test_zero_idf_and_empty_rows(void)
{
    /* "the" is in every document: idf 0, not stored; d1 holds only "the": an empty row;
     * d3 is an empty document: an empty row too */
    const char *docs[] = {"the cat", "the", "the dog cat", ""};
    dm_tfidf_local l;
    CU_ASSERT_EQUAL_FATAL(tl_local_build(&l, docs, 4, tl_real_hash, 0, "d", 0, NULL), DM_OK);
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
    dm_vectors v;
    dm_tfidf_stats st;
    dm_vocab voc;
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_vectors(&v, &voc, &st, NULL, &l, &o), DM_OK);
    /* "the" is not in every document (d3 is empty): df 3 of N 4, so it is stored */
    CU_ASSERT_EQUAL(voc.n_docs, 4);
    CU_ASSERT_EQUAL(st.empty_docs, 1);
    CU_ASSERT_EQUAL(v.row_off[4] - v.row_off[3], 0);
    CU_ASSERT_EQUAL(v.row_off[2] - v.row_off[1], 1);
    dm_vectors_free(&v);
    dm_vocab_free(&voc);
    dm_tfidf_local_free(&l);
    const char *docs2[] = {"the cat", "the", "the dog cat"};
    CU_ASSERT_EQUAL_FATAL(tl_local_build(&l, docs2, 3, tl_real_hash, 0, "d", 0, NULL), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_vectors(&v, &voc, &st, NULL, &l, &o), DM_OK);
    CU_ASSERT_EQUAL(vocab_id(&voc, "the"), 2); /* still a term: its column exists */
    CU_ASSERT_EQUAL(st.zero_weight, 3);
    CU_ASSERT_EQUAL(st.empty_docs, 1);
    CU_ASSERT_EQUAL(v.row_off[2], v.row_off[1]);
    CU_ASSERT_EQUAL(weight(&v, 0, 2), 0.0);
    CU_ASSERT_TRUE(tl_vectors_ok(&v, 1, 1e-6));
    dm_vectors_free(&v);
    dm_vocab_free(&voc);
    dm_tfidf_local_free(&l);
}

static void test_no_terms_is_an_error(void)
{
    const char *docs[] = {"", "", ""};
    dm_tfidf_local l;
    CU_ASSERT_EQUAL_FATAL(tl_local_build(&l, docs, 3, tl_real_hash, 0, "d", 0, NULL), DM_OK);
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
    dm_vectors v;
    CU_ASSERT_EQUAL(dm_tfidf_vectors(&v, NULL, NULL, NULL, &l, &o), DM_ERR_FORMAT); /* bad data, not a usage error */
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "no terms"));
    dm_tfidf_local_free(&l);
}

static void test_min_max_df(void)
{
    const char *docs[] = {"a1 b1 c1 z9", "a1 b1 z9", "a1 c1 z9", "a1 d1 z9", "a1 z9"};
    dm_tfidf_local l;
    CU_ASSERT_EQUAL_FATAL(tl_local_build(&l, docs, 5, tl_real_hash, 0, "d", 0, NULL), DM_OK);
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
    o.min_df_count = 2;    /* drops d1 (df 1) */
    o.max_df_frac = 0.9;   /* drops a1 and z9 (df 5 > 4.5) */
    dm_vectors v;
    dm_vocab voc;
    dm_tfidf_stats st;
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_vectors(&v, &voc, &st, NULL, &l, &o), DM_OK);
    CU_ASSERT_EQUAL(voc.terms.n, 2);
    CU_ASSERT_EQUAL(vocab_id(&voc, "b1"), 0);
    CU_ASSERT_EQUAL(vocab_id(&voc, "c1"), 1);
    CU_ASSERT_EQUAL(st.terms_seen, 5);
    CU_ASSERT_EQUAL(st.pruned_min_df, 1);
    CU_ASSERT_EQUAL(st.pruned_max_df, 2);
    /* rows of d3, d4 are empty now; tf counts only vocabulary tokens */
    CU_ASSERT_EQUAL(st.empty_docs, 2);
    CU_ASSERT_TRUE(tl_vectors_ok(&v, 1, 1e-6));
    dm_vectors_free(&v);
    dm_vocab_free(&voc);
    /* everything pruned: a clear error */
    o.min_df_count = 6;
    CU_ASSERT_EQUAL(dm_tfidf_vectors(&v, NULL, NULL, NULL, &l, &o), DM_ERR_INVALID_ARG);
    /* contradictory thresholds */
    o.min_df_count = 4;
    o.max_df_count = 2;
    CU_ASSERT_EQUAL(dm_tfidf_vectors(&v, NULL, NULL, NULL, &l, &o), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "max_df"));
    dm_tfidf_local_free(&l);
}

/* Fractions are of N exactly: among 100 documents, --max-df 0.29 keeps a term in 29 of them
 * (0.29 x 100 is 28.999999999999996 in doubles) and --min-df 0.07 one in 7 (7.000000000000001). */
static void test_df_fractions_exact(void)
{
    const char *docs[100];
    for (int i = 0; i < 100; i++) docs[i] = i < 7 ? "fill seven twentynin" : i < 29 ? "fill twentynin" : "fill";
    dm_tfidf_local l;
    CU_ASSERT_EQUAL_FATAL(tl_local_build(&l, docs, 100, tl_real_hash, 0, "d", 0, NULL), DM_OK);
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
    dm_vectors v;
    dm_vocab voc;
    dm_tfidf_stats st;
    o.max_df_frac = 0.29; /* keeps seven (7) and twentynin (29), drops fill (100) */
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_vectors(&v, &voc, &st, NULL, &l, &o), DM_OK);
    CU_ASSERT_EQUAL(voc.terms.n, 2);
    CU_ASSERT_NOT_EQUAL(vocab_id(&voc, "twentynin"), -1);
    CU_ASSERT_EQUAL(st.pruned_max_df, 1);
    dm_vectors_free(&v);
    dm_vocab_free(&voc);
    o.max_df_frac = 1.0;
    o.min_df_frac = 0.07; /* keeps all three */
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_vectors(&v, &voc, &st, NULL, &l, &o), DM_OK);
    CU_ASSERT_EQUAL(voc.terms.n, 3);
    CU_ASSERT_EQUAL(st.pruned_min_df, 0);
    dm_vectors_free(&v);
    dm_vocab_free(&voc);
    o.min_df_frac = 0.071; /* 7.1 documents: drops seven */
    o.max_df_frac = 0.29;  /* and fill: only twentynin is left */
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_vectors(&v, &voc, &st, NULL, &l, &o), DM_OK);
    CU_ASSERT_EQUAL(voc.terms.n, 1);
    CU_ASSERT_EQUAL(vocab_id(&voc, "twentynin"), 0);
    dm_vectors_free(&v);
    dm_vocab_free(&voc);
    /* the same bound for min and max: the terms in exactly that many documents */
    o.min_df_frac = o.max_df_frac = 0.29;
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_vectors(&v, &voc, &st, NULL, &l, &o), DM_OK);
    CU_ASSERT_EQUAL(voc.terms.n, 1);
    dm_vectors_free(&v);
    dm_vocab_free(&voc);
    dm_tfidf_local_free(&l);
}

static void test_collisions_get_distinct_ids(void)
{
    /* the same corpus under the real and the weak hash: identical vocabularies and weights
     * (ids come from the bytes), although under the weak hash almost every term collides */
    char **docs = tl_random_docs(300, 400, 60, 9);
    dm_tfidf_local a, b;
    CU_ASSERT_EQUAL_FATAL(tl_local_build(&a, (const char *const *)docs, 300, tl_real_hash, 0, "d", 0, NULL), DM_OK);
    CU_ASSERT_EQUAL_FATAL(tl_local_build(&b, (const char *const *)docs, 300, tl_weak_hash, 2, "d", 0, NULL), DM_OK);
    CU_ASSERT_TRUE(b.hash_collisions > 100);
    CU_ASSERT_TRUE(b.table_rebuilds > 0);
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
    dm_vectors va, vb;
    dm_vocab ka, kb;
    dm_tfidf_stats sa, sb;
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_vectors(&va, &ka, &sa, NULL, &a, &o), DM_OK);
    o.table_initial_cap = 2;
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_vectors(&vb, &kb, &sb, NULL, &b, &o), DM_OK);
    CU_ASSERT_EQUAL(sa.hash_collisions, 0);
    CU_ASSERT_EQUAL(sb.hash_collisions, kb.terms.n - 3);
    CU_ASSERT_TRUE(sb.table_rebuilds > 0);
    CU_ASSERT_EQUAL_FATAL(ka.terms.n, kb.terms.n);
    CU_ASSERT_EQUAL(memcmp(ka.terms.off, kb.terms.off, 8 * (ka.terms.n + 1)), 0);
    CU_ASSERT_EQUAL(memcmp(ka.terms.bytes, kb.terms.bytes, ka.terms.off[ka.terms.n]), 0);
    CU_ASSERT_EQUAL(memcmp(ka.terms.val, kb.terms.val, 8 * ka.terms.n), 0);
    CU_ASSERT_TRUE(tl_vectors_equal(&va, &vb, 0));
    CU_ASSERT_TRUE(tl_vectors_ok(&va, 1, 1e-5));
    /* ids follow byte order */
    int sorted = 1;
    for (size_t i = 1; i < ka.terms.n; i++)
        sorted = sorted && dm_term_cmp(dm_termlist_bytes(&ka.terms, i - 1), dm_termlist_len(&ka.terms, i - 1), 0,
                                       dm_termlist_bytes(&ka.terms, i), dm_termlist_len(&ka.terms, i), 0) < 0;
    CU_ASSERT_TRUE(sorted);
    dm_vectors_free(&va);
    dm_vectors_free(&vb);
    dm_vocab_free(&ka);
    dm_vocab_free(&kb);
    dm_tfidf_local_free(&a);
    dm_tfidf_local_free(&b);
    tl_docs_free(docs, 300);
}

/* ------------------------------------------------------------------ files */

static void make_vectors(dm_vectors *v, dm_vocab *voc, size_t n_docs, uint64_t seed)
{
    char **docs = tl_random_docs(n_docs, 500, 80, seed);
    const char **labels = malloc(sizeof(char *) * n_docs);
    static const char *names[] = {"", "earn", "acq,earn", "grain", "money-fx,trade,grain"};
    for (size_t d = 0; d < n_docs; d++) labels[d] = names[d % 5];
    dm_tfidf_local l;
    CU_ASSERT_EQUAL_FATAL(tl_local_build(&l, (const char *const *)docs, n_docs, tl_real_hash, 0, "doc-", 0, labels), DM_OK);
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_vectors(v, voc, NULL, NULL, &l, &o), DM_OK);
    dm_tfidf_local_free(&l);
    tl_docs_free(docs, n_docs);
    free(labels);
}

static void test_dmv_round_trip_and_rows(void)
{
    dm_vectors v, r, part;
    make_vectors(&v, NULL, 403, 3);
    char p[600], q[600];
    tmp_path(p, sizeof p, "a.dmv");
    tmp_path(q, sizeof q, "b.dmv");
    CU_ASSERT_EQUAL_FATAL(dm_vectors_write(&v, p, NULL), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_vectors_read(&r, p), DM_OK);
    CU_ASSERT_TRUE(tl_vectors_equal(&v, &r, 0));
    CU_ASSERT_EQUAL(r.row_base, 0);
    CU_ASSERT_EQUAL_FATAL(dm_vectors_write(&r, q, NULL), DM_OK);
    CU_ASSERT_TRUE(tl_files_equal(p, q));
    /* a slice of rows equals the same rows of the whole */
    CU_ASSERT_EQUAL_FATAL(dm_vectors_read_rows(&part, p, 101, 57, 1), DM_OK);
    CU_ASSERT_EQUAL(part.n_rows, 57);
    CU_ASSERT_EQUAL(part.row_base, 101);
    int ok = 1;
    for (uint64_t i = 0; i < 57 && ok; i++) {
        uint64_t len = v.row_off[101 + i + 1] - v.row_off[101 + i];
        ok = part.row_off[i + 1] - part.row_off[i] == len &&
             memcmp(part.col + part.row_off[i], v.col + v.row_off[101 + i], 4 * len) == 0 &&
             memcmp(part.val + part.row_off[i], v.val + v.row_off[101 + i], 4 * len) == 0 &&
             strcmp(dm_vectors_id(&part, i), dm_vectors_id(&v, 101 + i)) == 0 &&
             strcmp(dm_vectors_labels(&part, i), dm_vectors_labels(&v, 101 + i)) == 0;
    }
    CU_ASSERT_TRUE(ok);
    dm_vectors_free(&part);
    /* clipped at the end */
    CU_ASSERT_EQUAL_FATAL(dm_vectors_read_rows(&part, p, 400, 100, 0), DM_OK);
    CU_ASSERT_EQUAL(part.n_rows, 3);
    dm_vectors_free(&part);
    dm_vectors_free(&r);
    dm_vectors_free(&v);
}

/* Synthetic vectors of `rows` rows (lengths 0..2 x per - 1), ids and labels, valid for n_cols. */
static void synth_vectors(dm_vectors *v, uint64_t rows, uint64_t per, uint64_t seed)
{
    memset(v, 0, sizeof *v);
    v->n_rows = rows;
    v->n_cols = 4 * per + 7;
    v->row_off = dm_malloc(8 * (rows + 1));
    v->id_off = dm_malloc(8 * (rows + 1));
    v->label_off = dm_malloc(8 * (rows + 1));
    v->ids = dm_malloc(24 * rows + 1);
    v->labels = dm_malloc(8 * rows + 1);
    uint64_t s = seed, nnz = 0, ib = 0, lb = 0;
    v->row_off[0] = v->id_off[0] = v->label_off[0] = 0;
    for (uint64_t r = 0; r < rows; r++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        nnz += (s >> 33) % (2 * per);
        v->row_off[r + 1] = nnz;
        ib += (uint64_t)snprintf(v->ids + ib, 24, "d%" PRIu64, r) + 1;
        v->id_off[r + 1] = ib;
        lb += (uint64_t)snprintf(v->labels + lb, 8, "%s", r % 3 ? "earn" : "") + 1;
        v->label_off[r + 1] = lb;
    }
    v->col = dm_malloc(4 * (nnz ? nnz : 1));
    v->val = dm_malloc(4 * (nnz ? nnz : 1));
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t k = v->row_off[r]; k < v->row_off[r + 1]; k++) {
            v->col[k] = (uint32_t)(2 * (k - v->row_off[r]) + r % 3);
            v->val[k] = (float)(k % 1000) * 0.001f + (float)r;
        }
}

/* The direct-I/O writer (one block; a first block and a padded tail; blocks written by several
 * threads: about 60 MB) and the buffered one write the same bytes, which read back with a
 * matching checksum; so does the MPI-IO path in test_tfidf_mpi. */
static void test_dmv_direct_and_buffered(void)
{
    const uint64_t shapes[][2] = {{1, 0}, {3, 1}, {120001, 9}, {90000, 13}, {400000, 15}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        dm_vectors v, r;
        synth_vectors(&v, shapes[i][0], shapes[i][1] ? shapes[i][1] : 1, 7 + i);
        char p[600], q[600];
        tmp_path(p, sizeof p, "direct.dmv");
        tmp_path(q, sizeof q, "buffered.dmv");
        unsetenv("DOCMINE_DIRECT_IO");
        CU_ASSERT_EQUAL_FATAL(dm_vectors_write(&v, p, NULL), DM_OK);
        setenv("DOCMINE_DIRECT_IO", "0", 1);
        CU_ASSERT_EQUAL_FATAL(dm_vectors_write(&v, q, NULL), DM_OK);
        unsetenv("DOCMINE_DIRECT_IO");
        CU_ASSERT_TRUE(tl_files_equal(p, q));
        CU_ASSERT_EQUAL_FATAL(dm_vectors_read(&r, p), DM_OK);
        CU_ASSERT_TRUE(tl_vectors_equal(&v, &r, 0));
        dm_vectors_free(&r);
        dm_vectors_free(&v);
    }
}

static void test_dmv_corruption(void)
{
    dm_vectors v, r;
    make_vectors(&v, NULL, 200, 4);
    char p[600];
    tmp_path(p, sizeof p, "c.dmv");
    CU_ASSERT_EQUAL_FATAL(dm_vectors_write(&v, p, NULL), DM_OK);
    size_t len;
    char *orig = tl_read_file(p, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(orig);
    /* a flipped byte in the values: checksum error */
    CU_ASSERT_EQUAL(tl_flip_byte(p, (long)(64 + 8 * 201 + 4 * v.row_off[200] + 4 * 3)), 0);
    CU_ASSERT_EQUAL(dm_vectors_read(&r, p), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "checksum"));
    /* a partial read of other rows finds it when asked to verify, and reads without */
    CU_ASSERT_EQUAL(dm_vectors_read_rows(&r, p, 150, 20, 1), DM_ERR_FORMAT);
    CU_ASSERT_EQUAL_FATAL(dm_vectors_read_rows(&r, p, 150, 20, 0), DM_OK);
    CU_ASSERT_EQUAL(r.n_rows, 20);
    dm_vectors_free(&r);
    /* a column out of range (structure check, even with a matching checksum) */
    {
        dm_vectors w;
        CU_ASSERT_EQUAL_FATAL(dm_vectors_read_rows(&w, p, 0, 200, 0), DM_OK);
        w.n_cols = 1;
        char q[600];
        tmp_path(q, sizeof q, "cols.dmv");
        CU_ASSERT_EQUAL(dm_vectors_write(&w, q, NULL), DM_ERR_INVALID_ARG);
        dm_vectors_free(&w);
    }
    /* in the header: header checksum error, even for partial reads */
    tl_write_file(p, orig, len);
    CU_ASSERT_EQUAL(tl_flip_byte(p, 20), 0);
    CU_ASSERT_EQUAL(dm_vectors_read_rows(&r, p, 0, 10, 0), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "checksum"));
    /* truncated */
    tl_write_file(p, orig, len - 9);
    CU_ASSERT_EQUAL(dm_vectors_read(&r, p), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "truncated"));
    /* not a vector file at all */
    tl_write_file(p, "hello world, this is not a vector file at all, no, not at all....", 66);
    CU_ASSERT_EQUAL(dm_vectors_read(&r, p), DM_ERR_FORMAT);
    /* a weight that is not a number: the writer refuses it, and a file that holds one with right
     * checksums (written by another tool) is refused naming the file, the row and the document */
    {
        uint64_t row = 0;
        while (row < 199 && v.row_off[row + 1] - v.row_off[row] < 2) row++;
        CU_ASSERT_FATAL(v.row_off[row + 1] - v.row_off[row] >= 2);
        const float keep = v.val[v.row_off[row] + 1];
        v.val[v.row_off[row] + 1] = NAN;
        char q[600];
        tmp_path(q, sizeof q, "nan.dmv");
        CU_ASSERT_EQUAL(dm_vectors_write(&v, q, NULL), DM_ERR_INVALID_ARG);
        v.val[v.row_off[row] + 1] = keep;
        const float bad[] = {NAN, INFINITY, -INFINITY};
        for (int b = 0; b < 3; b++) {
            char *mod = dm_malloc(len);
            CU_ASSERT_PTR_NOT_NULL_FATAL(mod);
            memcpy(mod, orig, len);
            memcpy(mod + 64 + 8 * 201 + 4 * v.row_off[200] + 4 * (v.row_off[row] + 1), &bad[b], 4);
            uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), (const Bytef *)mod, (uInt)(len - 8));
            memcpy(mod + len - 8, &crc, 4);
            tl_write_file(p, mod, len);
            dm_free(mod);
            CU_ASSERT_EQUAL(dm_vectors_read(&r, p), DM_ERR_FORMAT);
            CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), p));
            CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "not a finite number"));
            char want[64];
            snprintf(want, sizeof want, "row %" PRIu64 " (document '%s')", row, v.ids + v.id_off[row]);
            CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), want));
            /* a partial read of the rows around it too, without the checksum */
            CU_ASSERT_EQUAL(dm_vectors_read_rows(&r, p, row, 1, 0), DM_ERR_FORMAT);
            CU_ASSERT_EQUAL_FATAL(dm_vectors_read_rows(&r, p, row + 1, 5, 0), DM_OK);
            dm_vectors_free(&r);
        }
        tl_write_file(p, orig, len);
        CU_ASSERT_EQUAL_FATAL(dm_vectors_read(&r, p), DM_OK);
        dm_vectors_free(&r);
    }
    /* missing */
    tmp_path(p, sizeof p, "missing.dmv");
    CU_ASSERT_EQUAL(dm_vectors_read(&r, p), DM_ERR_IO);
    dm_free(orig);
    dm_vectors_free(&v);
}

/* A header whose seven section sizes wrap around 2^64 to the size of the file (7.7e17 rows in 80
 * bytes, with right checksums) is refused as not matching the file: the row count was reported
 * as valid and the readers asked for exabytes (NOMEM) or read past the end (IO). */
static void test_dmv_header_sizes_wrap(void)
{
    unsigned char b[80];
    memset(b, 0, sizeof b);
    memcpy(b, DM_VECTORS_MAGIC, 8);
    const uint32_t version = DM_VECTORS_VERSION, flags = DM_VECTORS_L2;
    memcpy(b + 8, &version, 4);
    memcpy(b + 12, &flags, 4);
    /* 3 x 8 x (n_rows + 1) = 2^64 + 8: the sections add up to 8 bytes */
    const uint64_t f[5] = {768614336404564650ull, 10, 0, 0, 0};
    memcpy(b + 16, f, 40);
    uint32_t crc = (uint32_t)crc32(0L, b, 56);
    memcpy(b + 56, &crc, 4);
    crc = (uint32_t)crc32(0L, b, 72);
    memcpy(b + 72, &crc, 4);
    memcpy(b + 76, "END\n", 4);
    char p[600];
    tmp_path(p, sizeof p, "wrap.dmv");
    CU_ASSERT_EQUAL_FATAL(tl_write_file(p, (const char *)b, sizeof b), 0);
    uint64_t rows = 1;
    CU_ASSERT_EQUAL(dm_vectors_rows(&rows, p), DM_ERR_FORMAT);
    CU_ASSERT_EQUAL(rows, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), p));
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "does not match its header"));
    dm_vectors r;
    CU_ASSERT_EQUAL(dm_vectors_read(&r, p), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), p));
    CU_ASSERT_EQUAL(dm_vectors_read_rows(&r, p, 5, 3, 0), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), p));
}

/* The writer refuses what the reader would refuse, instead of writing a file nobody can read:
 * row offsets that fall back (each row then looked empty to its check), ids or labels that are
 * not NUL-terminated strings. */
static void test_dmv_writer_refuses_unreadable(void)
{
    char p[600];
    tmp_path(p, sizeof p, "unreadable.dmv");
    /* two rows: row 0 = [0, 3), row 1 = [3, 2): each row's columns are fine on their own */
    {
        uint64_t row_off[] = {0, 3, 2}, id_off[] = {0, 2, 4}, label_off[] = {0, 1, 2};
        uint32_t col[] = {1, 2, 3};
        float val[] = {0.5f, 0.5f, 0.5f};
        char ids[] = "a\0b", labels[] = "\0";
        dm_vectors v = {2, 0, 10, row_off, col, val, id_off, ids, label_off, labels, 0};
        CU_ASSERT_EQUAL(dm_vectors_write(&v, p, NULL), DM_ERR_INVALID_ARG);
        CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "row offsets"));
        CU_ASSERT_EQUAL(access(p, F_OK), -1);
    }
    dm_vectors v;
    make_vectors(&v, NULL, 40, 9);
    char *nul = v.ids + v.id_off[7] - 1; /* the NUL of document 6's id */
    *nul = 'x';
    CU_ASSERT_EQUAL(dm_vectors_write(&v, p, NULL), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "document ids"));
    *nul = '\0';
    nul = v.labels + v.label_off[40] - 1;
    *nul = 'x';
    CU_ASSERT_EQUAL(dm_vectors_write(&v, p, NULL), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "labels"));
    CU_ASSERT_EQUAL(access(p, F_OK), -1);
    *nul = '\0';
    CU_ASSERT_EQUAL(dm_vectors_write(&v, p, NULL), DM_OK);
    dm_vectors r;
    CU_ASSERT_EQUAL(dm_vectors_read(&r, p), DM_OK);
    dm_vectors_free(&r);
    dm_vectors_free(&v);
}

static void test_exports_parse_back(void)
{
    dm_vectors v;
    make_vectors(&v, NULL, 97, 5);
    char p[600];
    /* MatrixMarket: header, size line, then (row, col, value) 1-based in row order */
    tmp_path(p, sizeof p, "v.mtx");
    CU_ASSERT_EQUAL_FATAL(dm_vectors_export(&v, p, DM_EXPORT_MTX), DM_OK);
    FILE *f = fopen(p, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char line[65536];
    CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, f));
    CU_ASSERT_EQUAL(strncmp(line, "%%MatrixMarket matrix coordinate real general", 45), 0);
    while (fgets(line, sizeof line, f) && line[0] == '%') {
    }
    unsigned long long R, C, Z;
    CU_ASSERT_EQUAL(sscanf(line, "%llu %llu %llu", &R, &C, &Z), 3);
    CU_ASSERT_EQUAL(R, v.n_rows);
    CU_ASSERT_EQUAL(C, v.n_cols);
    CU_ASSERT_EQUAL(Z, dm_vectors_nnz(&v));
    int ok = 1;
    for (uint64_t r = 0; r < v.n_rows && ok; r++)
        for (uint64_t k = v.row_off[r]; k < v.row_off[r + 1] && ok; k++) {
            unsigned long long i, j;
            float x;
            ok = fscanf(f, "%llu %llu %f", &i, &j, &x) == 3 && i == r + 1 && j == v.col[k] + 1ull && x == v.val[k];
        }
    CU_ASSERT_TRUE(ok);
    fclose(f);
    /* SVMlight: comments, then one line per row: labels, col+1:val ..., # id */
    tmp_path(p, sizeof p, "v.svm");
    CU_ASSERT_EQUAL_FATAL(dm_vectors_export(&v, p, DM_EXPORT_SVMLIGHT), DM_OK);
    f = fopen(p, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char names[16][32];
    int n_names = 0;
    uint64_t r = 0;
    ok = 1;
    while (ok && fgets(line, sizeof line, f)) {
        if (line[0] == '#') {
            int id;
            char nm[32];
            if (sscanf(line, "# label %d %31s", &id, nm) == 2) {
                ok = id == n_names + 1;
                strcpy(names[n_names++], nm);
            }
            continue;
        }
        /* labels back to names */
        char *sp = strchr(line, ' ');
        ok = sp != NULL;
        if (!ok) break;
        *sp = '\0';
        char labs[256] = "";
        if (strcmp(line, "0") != 0) {
            for (char *t = strtok(line, ","); t; t = strtok(NULL, ",")) {
                if (labs[0]) strcat(labs, ",");
                strcat(labs, names[atoi(t) - 1]);
            }
        }
        /* labels are exported as a set in name order: compare as sorted sets */
        ok = ok && strlen(labs) == strlen(dm_vectors_labels(&v, r));
        char *p2 = sp + 1;
        uint64_t k = v.row_off[r];
        while (ok && *p2 && *p2 != '#') {
            unsigned c;
            float x;
            int used = 0;
            if (sscanf(p2, "%u:%f %n", &c, &x, &used) != 2) break;
            ok = k < v.row_off[r + 1] && c == v.col[k] + 1 && x == v.val[k];
            k++;
            p2 += used;
        }
        ok = ok && k == v.row_off[r + 1] && strncmp(p2, "# ", 2) == 0 &&
             strncmp(p2 + 2, dm_vectors_id(&v, r), strlen(dm_vectors_id(&v, r))) == 0;
        r++;
    }
    CU_ASSERT_TRUE(ok);
    CU_ASSERT_EQUAL(r, v.n_rows);
    CU_ASSERT_EQUAL(n_names, 5); /* acq earn grain money-fx trade */
    CU_ASSERT_STRING_EQUAL(names[0], "acq");
    CU_ASSERT_STRING_EQUAL(names[4], "trade");
    fclose(f);
    int fmt;
    CU_ASSERT_EQUAL(dm_export_format_parse("csv", &fmt), DM_ERR_INVALID_ARG);
    dm_vectors_free(&v);
}

static void test_vocab_tsv(void)
{
    dm_vocab voc;
    dm_vectors v;
    make_vectors(&v, &voc, 50, 6);
    char p[600];
    tmp_path(p, sizeof p, "vocab.tsv");
    CU_ASSERT_EQUAL_FATAL(dm_vocab_write_tsv(&voc, p, "df"), DM_OK);
    FILE *f = fopen(p, "r");
    char line[256];
    CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, f));
    CU_ASSERT_STRING_EQUAL(line, "id\tterm\tdf\n");
    size_t i = 0;
    int ok = 1;
    while (fgets(line, sizeof line, f)) {
        size_t id;
        char term[64];
        unsigned long long df;
        ok = ok && sscanf(line, "%zu\t%63[^\t]\t%llu", &id, term, &df) == 3 && id == i &&
             strlen(term) == dm_termlist_len(&voc.terms, i) &&
             memcmp(term, dm_termlist_bytes(&voc.terms, i), strlen(term)) == 0 && df == voc.terms.val[i];
        i++;
    }
    CU_ASSERT_TRUE(ok);
    CU_ASSERT_EQUAL(i, voc.terms.n);
    fclose(f);
    dm_vectors_free(&v);
    dm_vocab_free(&voc);
}

/* ------------------------------------------------------------------ TF-ICF */

static void test_icf_table_and_vectors(void)
{
    /* reference corpus: N_ref = 4; cf(apple) = 3, cf(banana) = 1, cf(cherry) = 4 */
    const char *ref[] = {"apple banana cherry", "apple cherry", "apple cherry cherry", "cherry"};
    dm_tfidf_local l;
    CU_ASSERT_EQUAL_FATAL(tl_local_build(&l, ref, 4, tl_real_hash, 0, "r", 0, NULL), DM_OK);
    dm_pp_signature sig;
    CU_ASSERT_EQUAL_FATAL(dm_pp_signature_of(&sig, NULL), DM_OK);
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
    dm_icf_table t, t2;
    CU_ASSERT_EQUAL_FATAL(dm_icf_build(&t, NULL, NULL, &l, &sig, &o), DM_OK);
    CU_ASSERT_EQUAL(t.vocab.n_docs, 4);
    CU_ASSERT_EQUAL(t.vocab.terms.n, 3);
    CU_ASSERT_EQUAL(t.vocab.terms.val[0], 3);
    CU_ASSERT_EQUAL(t.vocab.terms.val[1], 1);
    CU_ASSERT_EQUAL(t.vocab.terms.val[2], 4);
    char p[600];
    tmp_path(p, sizeof p, "t.icf");
    CU_ASSERT_EQUAL_FATAL(dm_icf_table_write(&t, p), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_icf_table_read(&t2, p), DM_OK);
    CU_ASSERT_EQUAL(t2.vocab.terms.n, 3);
    CU_ASSERT_EQUAL(memcmp(&t2.sig, &t.sig, sizeof sig), 0);
    CU_ASSERT_EQUAL(dm_icf_table_check(&t2, &sig, p), DM_OK);
    /* vectorise new documents: durian is unknown (dropped, counted); tf over known tokens only.
     * icf(apple) = ln(4/3) = 0.2876821, icf(banana) = ln 4 = 1.3862944, icf(cherry) = 0.
     * doc0 "apple banana durian": tf 1/2 each -> (0.1438410, 0.6931472), L2 -> (0.2031, 0.9792) */
    const char *docs[] = {"apple banana durian", "cherry durian durian", "banana"};
    dm_tfidf_local d;
    CU_ASSERT_EQUAL_FATAL(tl_local_build(&d, docs, 3, tl_real_hash, 0, "n", 0, NULL), DM_OK);
    dm_vectors v;
    dm_tfidf_stats st;
    memset(&st, 0, sizeof st);
    CU_ASSERT_EQUAL_FATAL(dm_icf_vectors(&v, &st, &t2, &d, &o, DM_BACKEND_CPU), DM_OK);
    CU_ASSERT_EQUAL(v.n_cols, 3);
    CU_ASSERT_EQUAL(v.flags, DM_VECTORS_ICF | DM_VECTORS_L2);
    double a = log(4.0 / 3.0) / 2, b = log(4.0) / 2, n = sqrt(a * a + b * b);
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 0, 0), a / n, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 0, 1), b / n, 1e-6);
    CU_ASSERT_EQUAL(v.row_off[2] - v.row_off[1], 0); /* cherry has icf 0, durian is unknown */
    CU_ASSERT_DOUBLE_EQUAL(weight(&v, 2, 1), 1.0, 1e-6);
    CU_ASSERT_EQUAL(st.icf_unknown_tokens, 3);
    CU_ASSERT_EQUAL(st.empty_docs, 1);
    CU_ASSERT_EQUAL(st.zero_weight, 1);
    dm_vectors_free(&v);
    /* a table built with other preprocessing is refused with a clear message */
    dm_pp_signature other = sig;
    other.flags &= ~1u;
    CU_ASSERT_EQUAL(dm_icf_table_check(&t2, &other, p), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "stemming"));
    other = sig;
    other.stop_fingerprint ^= 1;
    CU_ASSERT_EQUAL(dm_icf_table_check(&t2, &other, p), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "stop-word"));
    other = sig;
    other.max_len = 10;
    CU_ASSERT_EQUAL(dm_icf_table_check(&t2, &other, p), DM_ERR_INVALID_ARG);
    /* a table whose hashes are not dm_term_hash (another hash function) is refused */
    dm_icf_table w;
    dm_tfidf_local lw;
    CU_ASSERT_EQUAL_FATAL(tl_local_build(&lw, ref, 4, tl_weak_hash, 0, "r", 0, NULL), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_icf_build(&w, NULL, NULL, &lw, &sig, &o), DM_OK);
    CU_ASSERT_EQUAL(dm_icf_table_check(&w, &sig, "weak.icf"), DM_ERR_FORMAT);
    dm_icf_table_free(&w);
    dm_tfidf_local_free(&lw);
    /* corrupt and truncated tables */
    size_t len;
    char *orig = tl_read_file(p, &len);
    tl_flip_byte(p, (long)len - 12);
    dm_icf_table bad;
    CU_ASSERT_EQUAL(dm_icf_table_read(&bad, p), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "checksum"));
    tl_write_file(p, orig, len - 3);
    CU_ASSERT_EQUAL(dm_icf_table_read(&bad, p), DM_ERR_FORMAT);
    /* a vector file is not an ICF table */
    dm_vectors vv;
    make_vectors(&vv, NULL, 10, 8);
    dm_vectors_write(&vv, p, NULL);
    CU_ASSERT_EQUAL(dm_icf_table_read(&bad, p), DM_ERR_FORMAT);
    dm_vectors_free(&vv);
    dm_free(orig);
    dm_tfidf_local_free(&d);
    dm_icf_table_free(&t);
    dm_icf_table_free(&t2);
    dm_tfidf_local_free(&l);
}

/* Writes a table of the given terms (hash: the real one, or hash[i] where given), cf 1 each, of
 * n_docs documents and signature sig, through dm_icf_table_write (which writes what it is given). */
static int write_table(const char *path, const char *const *terms, const uint64_t *hash, size_t n, uint64_t n_docs,
                       const dm_pp_signature *sig)
{
    dm_icf_table t;
    memset(&t, 0, sizeof t);
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) bytes += strlen(terms[i]);
    if (dm_termlist_alloc(&t.vocab.terms, n, bytes, 1) != DM_OK) return -1;
    dm_termlist *l = &t.vocab.terms;
    for (size_t i = 0; i < n; i++) {
        size_t k = strlen(terms[i]);
        memcpy(l->bytes + l->off[i], terms[i], k);
        l->off[i + 1] = l->off[i] + k;
        l->hash[i] = hash ? hash[i] : tl_real_hash(terms[i], k);
        l->val[i] = 1;
    }
    t.vocab.n_docs = n_docs;
    t.sig = *sig;
    int rc = dm_icf_table_write(&t, path);
    dm_icf_table_free(&t);
    return rc;
}

/* Tables with right checksums whose fields do not hold together are refused naming the file and
 * the problem: the same term twice (under two hashes: the order check compared bytes and hash
 * and let it pass), a term longer than the table's max token length, unknown flags, token
 * lengths out of range. An empty term is a stem (Porter stems "s" to ""): it is read. */
static void test_icf_table_fields(void)
{
    dm_pp_signature sig;
    CU_ASSERT_EQUAL_FATAL(dm_pp_signature_of(&sig, NULL), DM_OK);
    char p[600];
    tmp_path(p, sizeof p, "fields.icf");
    dm_icf_table t;
    const char *good[] = {"apple", "banana", "cherri"};
    CU_ASSERT_EQUAL_FATAL(write_table(p, good, NULL, 3, 5, &sig), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_icf_table_read(&t, p), DM_OK);
    CU_ASSERT_EQUAL(dm_icf_table_check(&t, &sig, p), DM_OK);
    dm_icf_table_free(&t);
    char longw[80];
    memset(longw, 'a', 65);
    longw[65] = '\0';
    const char *dup[] = {"apple", "apple"}, *lng[] = {"apple", longw}, *uns[] = {"b", "a"};
    const uint64_t dup_hash[] = {1, 2};
    struct {
        const char *const *terms;
        const uint64_t *hash;
        size_t n;
        uint32_t flags, min_len, max_len;
        const char *why;
    } cases[] = {
        {dup, dup_hash, 2, sig.flags, sig.min_len, sig.max_len, "twice"},
        {dup, NULL, 2, sig.flags, sig.min_len, sig.max_len, "twice"},
        {lng, NULL, 2, sig.flags, sig.min_len, sig.max_len, "longer than"},
        {uns, NULL, 2, sig.flags, sig.min_len, sig.max_len, "byte order"},
        {good, NULL, 3, sig.flags | 8u, sig.min_len, sig.max_len, "flags"},
        {good, NULL, 3, sig.flags, 0, sig.max_len, "token lengths"},
        {good, NULL, 3, sig.flags, 5, 4, "token lengths"},
        {good, NULL, 3, sig.flags, 1, DM_TOKEN_MAX_LEN + 1, "token lengths"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dm_pp_signature s2 = sig;
        s2.flags = cases[i].flags;
        s2.min_len = cases[i].min_len;
        s2.max_len = cases[i].max_len;
        CU_ASSERT_EQUAL_FATAL(write_table(p, cases[i].terms, cases[i].hash, cases[i].n, 5, &s2), DM_OK);
        int rc = dm_icf_table_read(&t, p);
        CU_ASSERT_EQUAL(rc, DM_ERR_FORMAT);
        if (rc != DM_ERR_FORMAT) {
            fprintf(stderr, "\ncase %zu (%s) read as a valid table\n", i, cases[i].why);
            dm_icf_table_free(&t);
            continue;
        }
        CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), p));
        CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), cases[i].why));
        CU_ASSERT_EQUAL(t.vocab.terms.n, 0); /* nothing left to free */
    }
    /* an empty term (the stem of "s", first in byte order): a table icf-build writes with
     * --min-len 1; it was refused by the reader of the same docmine */
    const char *with_empty[] = {"", "apple"};
    CU_ASSERT_EQUAL_FATAL(write_table(p, with_empty, NULL, 2, 5, &sig), DM_OK);
    CU_ASSERT_EQUAL(dm_icf_table_read(&t, p), DM_OK);
    CU_ASSERT_EQUAL(t.vocab.terms.n, 2);
    if (t.vocab.terms.n == 2) CU_ASSERT_EQUAL(dm_termlist_len(&t.vocab.terms, 0), 0);
    dm_icf_table_free(&t);
}

/* Out of memory while reading a table (every allocation in turn): DM_ERR_NOMEM naming the file
 * (was the allocator's bare "out of host memory allocating N bytes"), nothing left to free. */
static void test_icf_table_read_nomem(void)
{
    dm_pp_signature sig;
    CU_ASSERT_EQUAL_FATAL(dm_pp_signature_of(&sig, NULL), DM_OK);
    char p[600];
    tmp_path(p, sizeof p, "nomem.icf");
    const char *good[] = {"apple", "banana", "cherri"};
    CU_ASSERT_EQUAL_FATAL(write_table(p, good, NULL, 3, 5, &sig), DM_OK);
    dm_icf_table t;
    int rc = DM_ERR_NOMEM, k = 1;
    for (; rc == DM_ERR_NOMEM && k < 50; k++) {
        dm_alloc_fail_at((uint64_t)k);
        rc = dm_icf_table_read(&t, p);
        dm_alloc_fail_at(0);
        if (rc == DM_ERR_NOMEM) {
            CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "nomem.icf: out of memory"));
            CU_ASSERT_EQUAL(t.vocab.terms.n, 0);
        }
    }
    CU_ASSERT(k > 2); /* some allocation failed */
    CU_ASSERT_EQUAL(rc, DM_OK);
    if (rc == DM_OK) dm_icf_table_free(&t);
}

/* The header is checked against the file size before anything is allocated: a large file that is
 * not a table (a .dmv given as --icf, read on every rank) or whose header does not match the
 * file costs no memory. The whole file used to be read into memory first. */
static void test_icf_table_read_allocates_after_checks(void)
{
    char p[600];
    tmp_path(p, sizeof p, "big.icf");
    const size_t big = (size_t)32 << 20;
    char *buf = dm_calloc(big, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    memcpy(buf, "DMVECS\0\1", 8); /* not a table */
    CU_ASSERT_EQUAL_FATAL(tl_write_file(p, buf, big), 0);
    size_t before = dm_mem_current(DM_MEM_HOST);
    dm_mem_reset_peak(DM_MEM_HOST);
    dm_icf_table t;
    CU_ASSERT_EQUAL(dm_icf_table_read(&t, p), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "bad magic"));
    CU_ASSERT(dm_mem_peak(DM_MEM_HOST) - before < ((size_t)1 << 20));
    /* a table's magic and version, a header of 2 terms: the size does not match */
    memcpy(buf, "DMICF\0\0\1", 8);
    const uint32_t u[4] = {1, 1, 2, 64};
    const uint64_t q[4] = {0, 10, 2, 8};
    memcpy(buf + 8, u, 16);
    memcpy(buf + 24, q, 32);
    CU_ASSERT_EQUAL_FATAL(tl_write_file(p, buf, big), 0);
    dm_free(buf);
    before = dm_mem_current(DM_MEM_HOST);
    dm_mem_reset_peak(DM_MEM_HOST);
    CU_ASSERT_EQUAL(dm_icf_table_read(&t, p), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "does not match its header"));
    CU_ASSERT(dm_mem_peak(DM_MEM_HOST) - before < ((size_t)1 << 20));
}

/* ------------------------------------------------------------------ corpus driver */

static void write_tsv_corpus(const char *dir)
{
    char p[700];
    snprintf(p, sizeof p, "%s/part-a.tsv", dir);
    const char *a = "d1\tsport\tThe runners were running; the runner runs fast.\n"
                    "d2\tsport\tOf the and a an\n" /* stop words only: an empty row */
                    "d3\tpolitics\tElections: the voters voted, the elected govern.\n";
    tl_write_file(p, a, strlen(a));
    snprintf(p, sizeof p, "%s/part-b.tsv", dir);
    const char *b = "d4\tpolitics,sport\tGovernments run elections; runners vote.\n"
                    "d5\t\tCaf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9 running 2024 42\n";
    tl_write_file(p, b, strlen(b));
}

static void test_corpus_driver(void)
{
    char dir[600];
    tmp_path(dir, sizeof dir, "corpus");
    CU_ASSERT_EQUAL_FATAL(dm_mkdirs(dir), DM_OK);
    write_tsv_corpus(dir);
    dm_preprocess_options pp = DM_PREPROCESS_OPTIONS_INIT;
    pp.batch_bytes = 64; /* several batches */
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
    dm_vectors v;
    dm_vocab voc;
    dm_tfidf_stats st;
    dm_pp_stats ps;
    o.by_bytes = 1; /* the batched reader, every token resolved by its bytes */
    CU_ASSERT_EQUAL_FATAL(dm_vectorize_corpus(&v, &voc, &st, &ps, NULL, dir, &pp, &o, NULL, NULL), DM_OK);
    o.by_bytes = 0;
    CU_ASSERT_EQUAL(v.n_rows, 5);
    CU_ASSERT_EQUAL(st.docs, 5);
    CU_ASSERT_EQUAL(st.empty_docs, 1);
    CU_ASSERT_EQUAL(v.row_off[2], v.row_off[1]);
    CU_ASSERT_STRING_EQUAL(dm_vectors_id(&v, 3), "d4");
    CU_ASSERT_STRING_EQUAL(dm_vectors_labels(&v, 3), "politics,sport");
    CU_ASSERT_TRUE(ps.tokens_stop > 0);
    CU_ASSERT_TRUE(vocab_id(&voc, "run") >= 0);   /* Porter: runners/running/runs -> run(ner) */
    CU_ASSERT_TRUE(vocab_id(&voc, "the") < 0);    /* a stop word */
    CU_ASSERT_TRUE(vocab_id(&voc, "2024") < 0);   /* numbers dropped */
    CU_ASSERT_TRUE(tl_vectors_ok(&v, 1, 1e-6));

    /* the same through dm_preprocess + the token stream: identical vectors */
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(dm_preprocess(&s, NULL, NULL, dir, &pp), DM_OK);
    dm_tfidf_local l;
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_local_from_stream(&l, &s, DM_BACKEND_CPU, &o), DM_OK);
    dm_vectors v2;
    dm_vocab voc2;
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_vectors(&v2, &voc2, NULL, NULL, &l, &o), DM_OK);
    CU_ASSERT_TRUE(tl_vectors_equal(&v, &v2, 0));
    CU_ASSERT_EQUAL(voc.terms.n, voc2.terms.n);
    dm_vectors_free(&v2);
    dm_vocab_free(&voc2);
    dm_tfidf_local_free(&l);
    /* the pipeline's entry point */
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_from_stream(&v2, NULL, NULL, NULL, &s, &o), DM_OK);
    CU_ASSERT_TRUE(tl_vectors_equal(&v, &v2, 0));
    dm_vectors_free(&v2);
    /* and dm_vectorize_corpus's default path (preprocess's reader + the stream) */
    CU_ASSERT_EQUAL_FATAL(dm_vectorize_corpus(&v2, NULL, NULL, NULL, NULL, dir, &pp, &o, NULL, NULL), DM_OK);
    CU_ASSERT_TRUE(tl_vectors_equal(&v, &v2, 0));
    dm_vectors_free(&v2);

    /* a token whose hash is not in the stream's vocabulary is refused, naming the token */
    if (s.n_tokens >= 2) {
        uint64_t saved = s.hashes[1], h = saved;
        while (dm_token_stream_term_find(&s, h) >= 0) h = h * 0x9e3779b97f4a7c15ull + 1;
        s.hashes[1] = h;
        CU_ASSERT_EQUAL(dm_tfidf_local_from_stream(&l, &s, DM_BACKEND_CPU, &o), DM_ERR_FORMAT);
        CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "token 1 has hash"));
        s.hashes[1] = saved;
    }
    /* a stream whose vocabulary has two stems under one hash is refused, naming both */
    if (s.n_terms >= 2) {
        for (size_t i = 0; i < s.n_tokens; i++) /* the second stem's tokens too */
            if (s.hashes[i] == s.term_hash[1]) s.hashes[i] = s.term_hash[0];
        s.term_hash[1] = s.term_hash[0];
        CU_ASSERT_EQUAL(dm_tfidf_local_from_stream(&l, &s, DM_BACKEND_CPU, &o), DM_ERR_FORMAT);
        CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "stands for both"));
    }
    dm_token_stream_free(&s);

    /* TF-ICF from the corpus itself as reference */
    dm_tfidf_local ref;
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_local_from_corpus(&ref, NULL, NULL, dir, &pp, &o), DM_OK);
    dm_pp_signature sig;
    dm_pp_signature_of(&sig, &pp);
    dm_icf_table t;
    CU_ASSERT_EQUAL_FATAL(dm_icf_build(&t, NULL, NULL, &ref, &sig, &o), DM_OK);
    dm_vectors vi;
    CU_ASSERT_EQUAL_FATAL(dm_vectorize_corpus(&vi, NULL, &st, NULL, NULL, dir, &pp, &o, &t, "t.icf"), DM_OK);
    /* with the corpus as its own reference, icf = idf: the same vectors but the ICF flag */
    CU_ASSERT_EQUAL(vi.flags, v.flags | DM_VECTORS_ICF);
    vi.flags = v.flags;
    CU_ASSERT_TRUE(tl_vectors_equal(&v, &vi, 1e-6));
    CU_ASSERT_EQUAL(st.icf_unknown_tokens, 0);
    dm_vectors_free(&vi);
    /* preprocessing that differs from the table's: a clear error */
    dm_preprocess_options pp2 = pp;
    pp2.tok.stem = 0;
    CU_ASSERT_EQUAL(dm_vectorize_corpus(&vi, NULL, NULL, NULL, NULL, dir, &pp2, &o, &t, "t.icf"), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "t.icf does not match"));
    dm_icf_table_free(&t);
    dm_tfidf_local_free(&ref);
    dm_vectors_free(&v);
    dm_vocab_free(&voc);
}

static void test_all_stop_words_corpus(void)
{
    char dir[600];
    tmp_path(dir, sizeof dir, "stops");
    CU_ASSERT_EQUAL_FATAL(dm_mkdirs(dir), DM_OK);
    char p[700];
    snprintf(p, sizeof p, "%s/a.tsv", dir);
    const char *a = "s1\tx\tthe and of a\ns2\tx\tit is what it is, is it not?\n";
    tl_write_file(p, a, strlen(a));
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
    dm_vectors v;
    dm_pp_stats ps;
    CU_ASSERT_EQUAL(dm_vectorize_corpus(&v, NULL, NULL, &ps, NULL, dir, NULL, &o, NULL, NULL), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "no terms"));
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "stop words"));
}

static void test_reuters_properties(void)
{
    char buf[1024];
    const char *path = dm_test_dataset("reuters21578", buf, sizeof buf);
    if (!path) {
        /* the directory itself cannot be fopen'ed as a file on every system: try a member */
        char m[1024];
        if (!dm_test_dataset("reuters21578/reut2-000.sgm", m, sizeof m)) {
            printf("(Reuters not present: skipped) ");
            return;
        }
        snprintf(buf, sizeof buf, "%s", m);
        *strrchr(buf, '/') = '\0';
        path = buf;
    }
    dm_preprocess_options pp = DM_PREPROCESS_OPTIONS_INIT;
    pp.reader.format = DM_PP_FORMAT_REUTERS;
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
    dm_vectors v;
    dm_vocab voc;
    dm_tfidf_stats st;
    CU_ASSERT_EQUAL_FATAL(dm_vectorize_corpus(&v, &voc, &st, NULL, NULL, path, &pp, &o, NULL, NULL), DM_OK);
    CU_ASSERT_TRUE(v.n_rows > 20000);
    CU_ASSERT_TRUE(voc.terms.n > 10000);
    CU_ASSERT_TRUE(tl_vectors_ok(&v, 1, 1e-5));
    CU_ASSERT_EQUAL(st.hash_collisions, 0);
    uint64_t df_sum = 0;
    for (size_t i = 0; i < voc.terms.n; i++) df_sum += voc.terms.val[i];
    CU_ASSERT_EQUAL(df_sum, st.nnz + st.zero_weight);
    char p[600];
    tmp_path(p, sizeof p, "reuters.dmv");
    CU_ASSERT_EQUAL(dm_vectors_write(&v, p, NULL), DM_OK);
    dm_vectors r;
    CU_ASSERT_EQUAL_FATAL(dm_vectors_read(&r, p), DM_OK);
    CU_ASSERT_TRUE(tl_vectors_equal(&v, &r, 0));
    dm_vectors_free(&r);
    dm_vectors_free(&v);
    dm_vocab_free(&voc);
}

/* dm_tf_bench_docs as it was written first: one splitmix64 stream, each document's length and
 * then its tokens. */
static size_t bench_docs_serial(uint64_t *tok_off, uint32_t *tok, size_t n_tok, uint32_t n_terms, uint64_t seed)
{
    uint64_t s = seed, pos = 0;
    size_t d = 0;
    tok_off[0] = 0;
    while (pos < n_tok) {
        uint64_t r = dm_splitmix64(&s);
        uint64_t len = (r & 127) == 0 ? 400 + (r >> 8) % 4600 : 1 + (r >> 8) % 400;
        if (len > n_tok - pos) len = n_tok - pos;
        for (uint64_t i = 0; i < len; i++) {
            uint64_t x = dm_splitmix64(&s);
            uint64_t a = (x & 0xffffffffull) % n_terms, b = (x >> 32) % n_terms;
            tok[pos + i] = (uint32_t)(a * b / n_terms);
        }
        pos += len;
        tok_off[++d] = pos;
    }
    return d;
}

static void test_tf_bench_docs_stream(void)
{
    /* the benchmark documents drawn on threads are the serial stream's, bit for bit, for sizes
     * that cut the last document short or not, on 1 and 3 threads; so are the table lookups'
     * queries */
    const size_t sizes[] = {1, 399, 100003, 654321};
    const int saved = omp_get_max_threads();
    for (int si = 0; si < 4; si++) {
        const size_t n = sizes[si];
        uint64_t *o1 = dm_malloc(8 * (n + 2)), *o2 = dm_malloc(8 * (n + 2));
        uint32_t *t1 = dm_malloc(4 * n), *t2 = dm_malloc(4 * n);
        CU_ASSERT_FATAL(o1 && o2 && t1 && t2);
        const size_t d1 = bench_docs_serial(o1, t1, n, 60000, 99 + si);
        for (int th = 1; th <= 3; th += 2) {
            omp_set_num_threads(th);
            size_t d2 = 0;
            memset(t2, 0, 4 * n);
            CU_ASSERT_EQUAL(dm_tf_bench_docs(o2, t2, n, 60000, 99 + si, &d2), DM_OK);
            CU_ASSERT_EQUAL_FATAL(d2, d1);
            CU_ASSERT(memcmp(o1, o2, 8 * (d1 + 1)) == 0);
            CU_ASSERT(memcmp(t1, t2, 4 * n) == 0);
        }
        dm_free(o1), dm_free(o2), dm_free(t1), dm_free(t2);
    }
    /* the lookups' queries: the serial stream's too */
    const size_t nq = 300007, nv = 5000;
    uint64_t *ids = dm_malloc(8 * nq), *hash = dm_malloc(8 * nq), *ids2 = dm_malloc(8 * nq), *hash2 = dm_malloc(8 * nq);
    CU_ASSERT_FATAL(ids && hash && ids2 && hash2);
    uint64_t st = 5 ^ 0x5851f42d4c957f2dull;
    size_t unknown = 0;
    for (size_t q = 0; q < nq; q++) {
        uint64_t x = dm_splitmix64(&st);
        if (x % 20 == 0) ids[q] = nv + (x >> 8) % (4 * (uint64_t)nv + 1);
        else ids[q] = ((x >> 8) % nv) * ((x >> 36) % nv) / nv;
        hash[q] = dm_tfidf_bench_term_hash(ids[q], 5);
        unknown += ids[q] >= nv;
    }
    CU_ASSERT(unknown > nq / 25 && unknown < nq / 15);
    for (int th = 1; th <= 3; th += 2) {
        omp_set_num_threads(th);
        dm_tfidf_bench_queries(ids2, hash2, nq, nv, 5, 20);
        CU_ASSERT(memcmp(ids, ids2, 8 * nq) == 0);
        CU_ASSERT(memcmp(hash, hash2, 8 * nq) == 0);
    }
    dm_free(ids), dm_free(hash), dm_free(ids2), dm_free(hash2);
    omp_set_num_threads(saved);
}

/* The weights' passes as the tuning workloads define them, one row after the other (the
 * workloads' code before it ran on threads). */
static void weigh_passes_serial(const dm_tf_counts *c, const uint32_t *map, const double *col_w, uint64_t *row_len,
                                uint64_t *kept, uint64_t *out_off, uint32_t *ocol, double *ow, uint32_t *opos,
                                uint64_t *pair)
{
    uint64_t m = 0;
    for (size_t r = 0; r < c->n_rows; r++) {
        row_len[r] = kept[r] = 0;
        for (uint64_t e = c->row_off[r]; e < c->row_off[r + 1]; e++) {
            uint32_t k = map[c->term[e]];
            if (k == DM_TERM_NONE) continue;
            row_len[r] += c->count[e];
            kept[r] += col_w[k] != 0.0;
        }
        out_off[r] = m;
        for (uint64_t e = c->row_off[r]; e < c->row_off[r + 1]; e++) {
            uint32_t k = map[c->term[e]];
            if (k == DM_TERM_NONE || col_w[k] == 0.0) continue;
            ocol[m] = k;
            ow[m] = dm_tf_weight(c->count[e], row_len[r], 0) * col_w[k];
            opos[m] = (uint32_t)m;
            pair[m] = (uint64_t)k << 32 | m;
            m++;
        }
        for (uint64_t i = out_off[r] + 1; i < m; i++) /* insertion sort of the row's pairs */
            for (uint64_t j = i; j > out_off[r] && pair[j - 1] > pair[j]; j--) {
                uint64_t t = pair[j];
                pair[j] = pair[j - 1];
                pair[j - 1] = t;
            }
    }
    out_off[c->n_rows] = m;
    kept[c->n_rows] = 0;
}

static void test_tf_tuning_host_passes(void)
{
    /* the tuning workloads' host parts on threads: the count rows equal dm_tf_count_cpu's, and
     * the weights' passes equal the serial definition, bit for bit, on 1 and 3 threads */
    const size_t n_tok = 200003;
    const uint32_t n_terms = 3000; /* small: terms repeat within documents */
    uint64_t *off = dm_malloc(8 * (n_tok + 2));
    uint32_t *tok = dm_malloc(4 * n_tok), *tok2 = dm_malloc(4 * n_tok);
    size_t n_docs = 0;
    dm_tf_bench_docs(off, tok, n_tok, n_terms, 77, &n_docs);
    dm_tf_counts ref;
    dm_tf_count_options o = DM_TF_COUNT_OPTIONS_INIT;
    CU_ASSERT_EQUAL_FATAL(dm_tf_count_cpu(&ref, off, tok, n_docs, n_terms, &o), DM_OK);
    const uint64_t nnz = ref.row_off[n_docs];
    /* columns: every third term unmapped, every seventh column's idf 0 */
    uint32_t *map = dm_malloc(4 * n_terms);
    double *col_w = dm_malloc(8 * n_terms);
    for (uint32_t t = 0; t < n_terms; t++) {
        map[t] = t % 3 == 2 ? DM_TERM_NONE : (t * 7919u) % n_terms;
        col_w[t] = t % 7 == 3 ? 0.0 : 0.5 + t / 1000.0;
    }
    uint64_t *r_len = dm_malloc(8 * (n_docs + 1)), *r_kept = dm_malloc(8 * (n_docs + 1)),
             *r_off = dm_malloc(8 * (n_docs + 1)), *r_pair = dm_malloc(8 * nnz + 8);
    uint32_t *r_col = dm_malloc(4 * nnz + 4), *r_pos = dm_malloc(4 * nnz + 4);
    double *r_w = dm_malloc(8 * nnz + 8);
    weigh_passes_serial(&ref, map, col_w, r_len, r_kept, r_off, r_col, r_w, r_pos, r_pair);
    const uint64_t m = r_off[n_docs];
    CU_ASSERT(m > 0 && m < nnz); /* some entries dropped, some kept */
    const int saved = omp_get_max_threads();
    const int threads[] = {1, 3};
    for (int ti = 0; ti < 2; ti++) {
        omp_set_num_threads(threads[ti]);
        memcpy(tok2, tok, 4 * n_tok);
        dm_tf_counts c;
        CU_ASSERT_EQUAL_FATAL(dm_tfidf_bench_count_rows(&c, off, tok2, n_docs), DM_OK);
        CU_ASSERT_EQUAL(c.n_rows, n_docs);
        CU_ASSERT(memcmp(c.row_off, ref.row_off, 8 * (n_docs + 1)) == 0);
        CU_ASSERT(memcmp(c.term, ref.term, 4 * nnz) == 0);
        CU_ASSERT(memcmp(c.count, ref.count, 4 * nnz) == 0);
        uint64_t *len = dm_malloc(8 * (n_docs + 1)), *kept = dm_malloc(8 * (n_docs + 1)),
                 *oo = dm_malloc(8 * (n_docs + 1)), *pair = dm_malloc(8 * nnz + 8);
        uint32_t *col = dm_malloc(4 * nnz + 4), *pos = dm_malloc(4 * nnz + 4);
        double *w = dm_malloc(8 * nnz + 8);
        dm_tfidf_bench_weigh_passes(&c, map, col_w, 0, len, kept, oo, col, w, pos, pair);
        CU_ASSERT(memcmp(len, r_len, 8 * n_docs) == 0);
        CU_ASSERT(memcmp(kept, r_kept, 8 * (n_docs + 1)) == 0);
        CU_ASSERT(memcmp(oo, r_off, 8 * (n_docs + 1)) == 0);
        CU_ASSERT(memcmp(col, r_col, 4 * m) == 0);
        CU_ASSERT(memcmp(w, r_w, 8 * m) == 0);
        CU_ASSERT(memcmp(pos, r_pos, 4 * m) == 0);
        CU_ASSERT(memcmp(pair, r_pair, 8 * m) == 0);
        dm_free(len), dm_free(kept), dm_free(oo), dm_free(pair), dm_free(col), dm_free(pos), dm_free(w);
        dm_tf_counts_free(&c);
    }
    omp_set_num_threads(saved);
    dm_free(r_len), dm_free(r_kept), dm_free(r_off), dm_free(r_pair), dm_free(r_col), dm_free(r_pos), dm_free(r_w);
    dm_free(map), dm_free(col_w), dm_free(off), dm_free(tok), dm_free(tok2);
    dm_tf_counts_free(&ref);
}

int main(void)
{
    CU_TestInfo terms[] = {{"termtab_weak_hash_tiny_capacity", test_termtab_weak_hash_tiny_capacity},
                           {"tf_count_vs_bruteforce", test_tf_count_vs_bruteforce},
                           {"tf_count_gpu_algorithm_on_host", test_tf_count_gpu_algorithm_on_host},
                           {"tf_tuning_output_canonical", test_tf_tuning_output_canonical},
                           {"tf_tuning_host_passes", test_tf_tuning_host_passes},
                           {"tf_bench_streams", test_tf_bench_docs_stream},
                           {"vocab_merge_and_lookup_collisions", test_vocab_merge_and_lookup_collisions},
                           {"hash_lookup_real_hash", test_hash_lookup_real_hash},
                           CU_TEST_INFO_NULL};
    CU_TestInfo weights[] = {{"sklearn_parity_hand_computed", test_sklearn_parity_hand_computed},
                             {"default_idf_sublinear_nol2", test_default_idf_sublinear_nol2},
                             {"zero_idf_and_empty_rows", test_zero_idf_and_empty_rows},
                             {"no_terms_is_an_error", test_no_terms_is_an_error},
                             {"min_max_df", test_min_max_df},
                             {"df_fractions_exact", test_df_fractions_exact},
                             {"collisions_get_distinct_ids", test_collisions_get_distinct_ids},
                             CU_TEST_INFO_NULL};
    CU_TestInfo files[] = {{"dmv_round_trip_and_rows", test_dmv_round_trip_and_rows},
                           {"dmv_corruption", test_dmv_corruption},
                           {"dmv_header_sizes_wrap", test_dmv_header_sizes_wrap},
                           {"dmv_writer_refuses_unreadable", test_dmv_writer_refuses_unreadable},
                           {"dmv_direct_and_buffered", test_dmv_direct_and_buffered},
                           {"exports_parse_back", test_exports_parse_back},
                           {"vocab_tsv", test_vocab_tsv},
                           CU_TEST_INFO_NULL};
    CU_TestInfo icf[] = {{"icf_table_and_vectors", test_icf_table_and_vectors},
                         {"icf_table_fields", test_icf_table_fields},
                         {"icf_table_read_allocates_after_checks", test_icf_table_read_allocates_after_checks},
                         {"icf_table_read_nomem", test_icf_table_read_nomem},
                         CU_TEST_INFO_NULL};
    CU_TestInfo corpus[] = {{"corpus_driver", test_corpus_driver},
                            {"all_stop_words_corpus", test_all_stop_words_corpus},
                            {"reuters_properties", test_reuters_properties},
                            CU_TEST_INFO_NULL};
    CU_SuiteInfo suites[] = {{"tfidf_terms", setup, teardown, NULL, NULL, terms},
                             {"tfidf_weights", setup, teardown, NULL, NULL, weights},
                             {"tfidf_files", setup, teardown, NULL, NULL, files},
                             {"tfidf_icf", setup, teardown, NULL, NULL, icf},
                             {"tfidf_corpus", setup, teardown, NULL, NULL, corpus},
                             CU_SUITE_INFO_NULL};
    return dm_test_run(suites);
}
