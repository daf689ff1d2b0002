/* GPU tests of tfidf (skip without a GPU): every compiled instance of both per-document table
 * variants against the CPU counts (exactly), table overflow grown and rebuilt, the vocabulary/DF
 * table (merge, lookup, hash-only lookup) under a weak hash with a tiny forced capacity, the
 * weights (row structure exact, values within 1e-6 relative), and whole corpora (generated and
 * Reuters-21578 when present) vectorised on both backends: identical vocabulary, df, ids and rows;
 * token hashes left on the device by preprocess: the same stream and bit-identical vectors.
 *
 * Under compute-sanitizer (DOCMINE_SANITIZER set, as scripts/gpu-check.sh does) racecheck makes
 * every launch slow, so the sanitizer variant is small but still runs every kernel and every
 * count instance: the instance loop on 20k tokens instead of 1M, the vocabulary table on 5k
 * occurrences of 900 words (still grown from capacity 4), the weights on 30k tokens (chunked
 * into rows of 2999 entries), the generated corpus with 603 documents (both corpus readers,
 * TF-ICF), and Reuters left out (the generated corpus runs the same kernels). The tuner is off
 * there: every instance is forced explicitly, and its search would only add launches. */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/context.h"
#include "common/fileio.h"
#include "common/status.h"
#include "common/tune/tune.h"
#include "testutil.h"
#include "tfidf/tfidf.h"
#include "tfidf/tfidf_internal.h"
#include "tfidf_testlib.h"

#define REL_TOL 1e-6 /* float weights: computed in double on both sides, libm vs CUDA log/sqrt */

static dm_ctx g_ctx;
static int g_sanitizer; /* DOCMINE_SANITIZER set: the small variant (see the top) */
static char g_tmp[512];

static int setup(void)
{
    dm_ctx_options o = DM_CTX_OPTIONS_INIT;
    o.backend = DM_BACKEND_CUDA;
    o.quiet = 1;
    if (dm_ctx_init(&g_ctx, &o) != DM_OK) return 1;
    return dm_test_tmpdir(g_tmp, sizeof g_tmp) ? 0 : 1;
}

static int teardown(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    int rc = system(cmd);
    dm_ctx_free(&g_ctx);
    return rc == 0 ? 0 : 1;
}

static int counts_equal(const dm_tf_counts *a, const dm_tf_counts *b)
{
    if (a->n_rows != b->n_rows) return 0;
    if (memcmp(a->row_off, b->row_off, 8 * (a->n_rows + 1)) != 0) return 0;
    uint64_t n = a->row_off[a->n_rows];
    return memcmp(a->term, b->term, 4 * n) == 0 && memcmp(a->count, b->count, 4 * n) == 0;
}

/* Documents from the benchmark generator plus a few empty ones at the start, middle and end. */
static size_t make_docs(uint64_t **off_out, uint32_t **tok_out, size_t n_tok, uint32_t n_terms, uint64_t seed)
{
    uint64_t *off = dm_malloc(8 * (n_tok + 8));
    uint32_t *tok = dm_malloc(4 * (n_tok + 1));
    size_t n_docs = 0;
    dm_tf_bench_docs(off + 1, tok, n_tok, n_terms, seed, &n_docs);
    /* shift by one: document 0 is empty; then two empty documents at the end */
    off[0] = 0;
    n_docs += 1;
    off[n_docs + 1] = off[n_docs];
    off[n_docs + 2] = off[n_docs];
    n_docs += 2;
    *off_out = off;
    *tok_out = tok;
    return n_docs;
}

static void test_count_every_instance(void)
{
    uint64_t *off;
    uint32_t *tok;
    const uint32_t n_terms = 40000;
    size_t n_docs = make_docs(&off, &tok, g_sanitizer ? 20011 : 1000003, n_terms, 17);
    dm_tf_counts ref, got;
    dm_tf_count_options o = DM_TF_COUNT_OPTIONS_INIT;
    CU_ASSERT_EQUAL_FATAL(dm_tf_count_cpu(&ref, off, tok, n_docs, n_terms, &o), DM_OK);
    for (int v = DM_TF_ATOMIC; v <= DM_TF_NOATOMIC; v++) {
        int n = dm_tf_count_cuda_instances(v);
        CU_ASSERT_TRUE(n >= 9);
        for (int i = -1; i < n; i++) {
            char name[128];
            CU_ASSERT_EQUAL_FATAL(dm_tf_count_cuda_force_instance(i), DM_OK);
            dm_tf_count_options g = DM_TF_COUNT_OPTIONS_INIT;
            g.variant = v;
            int rc = dm_tf_count_cuda(&got, off, tok, n_docs, n_terms, &g);
            int ok = rc == DM_OK && counts_equal(&ref, &got);
            if (!ok)
                printf("\n  %s instance %d (%s): rc %d, differs from the CPU\n", dm_tf_variant_name(v), i,
                       dm_tf_count_cuda_instance_name(v, i, name, sizeof name), rc);
            CU_ASSERT_TRUE(ok);
            if (rc == DM_OK) dm_tf_counts_free(&got);
        }
    }
    dm_tf_count_cuda_force_instance(-1);
    /* in chunks of whole documents (a document longer than a chunk makes its own) */
    dm_tfidf_cuda_set_chunks(3001, 0);
    for (int v = DM_TF_ATOMIC; v <= DM_TF_NOATOMIC; v++) {
        dm_tf_count_options g = DM_TF_COUNT_OPTIONS_INIT;
        g.variant = v;
        CU_ASSERT_EQUAL_FATAL(dm_tf_count_cuda(&got, off, tok, n_docs, n_terms, &g), DM_OK);
        CU_ASSERT_TRUE(counts_equal(&ref, &got));
        dm_tf_counts_free(&got);
    }
    dm_tfidf_cuda_set_chunks(0, 0);
    /* a token out of range is refused, as on the CPU */
    tok[10] = n_terms;
    dm_tf_count_options g = DM_TF_COUNT_OPTIONS_INIT;
    CU_ASSERT_EQUAL(dm_tf_count_cuda(&got, off, tok, n_docs, n_terms, &g), DM_ERR_INVALID_ARG);
    dm_tf_counts_free(&ref);
    dm_free(off);
    dm_free(tok);
}

/* Out of device memory (dm_test_device_hog: no allocation of 2 MiB or more succeeds): the count
 * returns DM_ERR_NOMEM whose message names the stage (the allocator's own says only what did not
 * fit), keeps no device memory, and with the memory back counts as the CPU does. */
static void test_count_oom(void)
{
    uint64_t *off;
    uint32_t *tok;
    const uint32_t n_terms = 40000;
    size_t n_docs = make_docs(&off, &tok, 1000003, n_terms, 23); /* 4 MB of tokens on the device */
    dm_tf_counts ref, got;
    dm_tf_count_options o = DM_TF_COUNT_OPTIONS_INIT;
    CU_ASSERT_EQUAL_FATAL(dm_tf_count_cpu(&ref, off, tok, n_docs, n_terms, &o), DM_OK);
    size_t d0 = dm_mem_current(DM_MEM_DEVICE);
    int held = dm_test_device_hog();
    dm_tf_count_options g = DM_TF_COUNT_OPTIONS_INIT;
    int rc = dm_tf_count_cuda(&got, off, tok, n_docs, n_terms, &g);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", dm_error_message());
    dm_test_device_unhog();
    printf("\n  injected %d; count: %d (%s)", held, rc, msg);
    CU_ASSERT_EQUAL(rc, DM_ERR_NOMEM);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "tfidf"));
    CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_DEVICE), d0);
    if (rc == DM_OK) dm_tf_counts_free(&got);
    dm_error_clear();
    g = (dm_tf_count_options)DM_TF_COUNT_OPTIONS_INIT;
    CU_ASSERT_EQUAL_FATAL(dm_tf_count_cuda(&got, off, tok, n_docs, n_terms, &g), DM_OK);
    CU_ASSERT_TRUE(counts_equal(&ref, &got));
    CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_DEVICE), d0);
    dm_tf_counts_free(&got);
    dm_tf_counts_free(&ref);
    dm_free(off);
    dm_free(tok);
}

static void test_count_overflow_rebuilds(void)
{
    /* one document of 700 distinct terms that all hash to bucket 0, plus a short document:
     * with slack 1 the bucket (22 slots) overflows and must be grown until it holds them all */
    uint32_t *tok = dm_malloc(4 * 2000);
    size_t k = 0;
    for (uint32_t t = 0; k < 1400; t++)
        if ((dm_term_bucket_hash(t) & 31) == 0) {
            tok[k++] = t;
            tok[k++] = t; /* twice: counts of 2 */
        }
    uint32_t n_terms = 0;
    for (size_t i = 0; i < k; i++)
        if (tok[i] + 1 > n_terms) n_terms = tok[i] + 1;
    tok[k++] = 5;
    tok[k++] = 7;
    uint64_t off[3] = {0, 1400, k};
    dm_tf_counts ref, got;
    dm_tf_count_options o = DM_TF_COUNT_OPTIONS_INIT;
    CU_ASSERT_EQUAL_FATAL(dm_tf_count_cpu(&ref, off, tok, 2, n_terms, &o), DM_OK);
    for (int v = DM_TF_ATOMIC; v <= DM_TF_NOATOMIC; v++) {
        dm_tf_count_options g = DM_TF_COUNT_OPTIONS_INIT;
        g.variant = v;
        g.bucket_slack = 1;
        CU_ASSERT_EQUAL_FATAL(dm_tf_count_cuda(&got, off, tok, 2, n_terms, &g), DM_OK);
        CU_ASSERT_TRUE(g.rebuilds >= 4);
        CU_ASSERT_TRUE(counts_equal(&ref, &got));
        CU_ASSERT_EQUAL(got.row_off[1], 700);
        dm_tf_counts_free(&got);
    }
    dm_tf_counts_free(&ref);
    dm_free(tok);
}

static int termlists_equal(const dm_termlist *a, const dm_termlist *b)
{
    if (a->n != b->n) return 0;
    if (memcmp(a->hash, b->hash, 8 * a->n) || memcmp(a->off, b->off, 8 * (a->n + 1)) ||
        memcmp(a->bytes, b->bytes, a->off[a->n]))
        return 0;
    return !a->val || !b->val || memcmp(a->val, b->val, 8 * a->n) == 0;
}

static void test_vocab_table(void)
{
    for (int weak = 0; weak <= 1; weak++) {
        dm_termlist in = {0};
        size_t cap = 0, bcap = 0;
        uint64_t s = 99;
        char w[32];
        const int occ = g_sanitizer ? 5003 : 50000, words = g_sanitizer ? 900 : 9000;
        for (int i = 0; i < occ; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            int n = snprintf(w, sizeof w, "w%llu", (unsigned long long)((s >> 33) % (uint64_t)words));
            uint64_t h = weak ? tl_weak_hash(w, (size_t)n) : tl_real_hash(w, (size_t)n);
            CU_ASSERT_EQUAL_FATAL(dm_termlist_push(&in, &cap, &bcap, h, w, (size_t)n, 1 + (s >> 60)), DM_OK);
        }
        dm_termlist rc_, rg;
        dm_vocab_table_options oc = DM_VOCAB_TABLE_OPTIONS_INIT, og = DM_VOCAB_TABLE_OPTIONS_INIT;
        og.initial_cap = 4; /* grown and rebuilt many times */
        CU_ASSERT_EQUAL_FATAL(dm_vocab_merge_cpu(&rc_, &in, &oc), DM_OK);
        CU_ASSERT_EQUAL_FATAL(dm_vocab_merge_cuda(&rg, &in, &og), DM_OK);
        CU_ASSERT_TRUE(termlists_equal(&rc_, &rg));
        CU_ASSERT_EQUAL(oc.collisions, og.collisions);
        CU_ASSERT_TRUE(og.rebuilds > 3);
        if (weak) CU_ASSERT_EQUAL(og.collisions, rg.n - 3);
        /* lookups of every occurrence */
        uint32_t *ic = dm_malloc(4 * in.n), *ig = dm_malloc(4 * in.n);
        oc.initial_cap = og.initial_cap = 8;
        CU_ASSERT_EQUAL_FATAL(dm_vocab_lookup_cpu(ic, &rc_, &in, &oc), DM_OK);
        CU_ASSERT_EQUAL_FATAL(dm_vocab_lookup_cuda(ig, &rg, &in, &og), DM_OK);
        CU_ASSERT_EQUAL(memcmp(ic, ig, 4 * in.n), 0);
        /* a repeated vocabulary term is refused */
        CU_ASSERT_EQUAL(dm_vocab_lookup_cuda(ig, &in, &rg, &og), DM_ERR_INVALID_ARG);
        /* hash-only lookups: fine under the real hash, ambiguous under the weak one */
        int rh = dm_hash_lookup_cuda(ig, &rg, in.hash, in.n, &og);
        if (weak) {
            CU_ASSERT_EQUAL(rh, DM_ERR_FORMAT);
            CU_ASSERT_EQUAL(dm_hash_lookup_cpu(ic, &rc_, in.hash, in.n, &oc), DM_ERR_FORMAT);
        } else {
            CU_ASSERT_EQUAL_FATAL(rh, DM_OK);
            CU_ASSERT_EQUAL_FATAL(dm_hash_lookup_cpu(ic, &rc_, in.hash, in.n, &oc), DM_OK);
            CU_ASSERT_EQUAL(memcmp(ic, ig, 4 * in.n), 0);
        }
        dm_free(ic);
        dm_free(ig);
        dm_termlist_free(&rc_);
        dm_termlist_free(&rg);
        dm_termlist_free(&in);
    }
}

static int vectors_close(const dm_vectors *a, const dm_vectors *b)
{
    if (a->n_rows != b->n_rows || memcmp(a->row_off, b->row_off, 8 * (a->n_rows + 1)) != 0) return 0;
    uint64_t n = a->row_off[a->n_rows];
    if (memcmp(a->col, b->col, 4 * n) != 0) return 0;
    for (uint64_t k = 0; k < n; k++)
        if (fabs((double)a->val[k] - b->val[k]) > REL_TOL * fmax(fabs(a->val[k]), fabs(b->val[k]))) return 0;
    return 1;
}

static void test_weigh(void)
{
    uint64_t *off;
    uint32_t *tok;
    const uint32_t n_terms = 30000;
    size_t n_docs = make_docs(&off, &tok, g_sanitizer ? 30011 : 2000003, n_terms, 23);
    dm_tf_counts c;
    dm_tf_count_options co = DM_TF_COUNT_OPTIONS_INIT;
    CU_ASSERT_EQUAL_FATAL(dm_tf_count_cpu(&c, off, tok, n_docs, n_terms, &co), DM_OK);
    /* a map that drops every 7th term, and columns of which some have weight 0 */
    uint32_t *map = dm_malloc(4 * n_terms);
    uint32_t n_cols = 0;
    for (uint32_t t = 0; t < n_terms; t++) map[t] = t % 7 == 3 ? DM_TERM_NONE : n_cols++;
    double *w = dm_malloc(8 * n_cols);
    for (uint32_t k = 0; k < n_cols; k++) w[k] = k % 11 == 0 ? 0.0 : log(1.0 + (double)(k % 1000) / 7.0);
    for (int mode = 0; mode < 4; mode++) {
        dm_weigh_options a = DM_WEIGH_OPTIONS_INIT, b = DM_WEIGH_OPTIONS_INIT;
        a.sublinear = b.sublinear = mode & 1;
        a.l2 = b.l2 = (mode >> 1) & 1;
        dm_vectors vc, vg;
        memset(&vc, 0, sizeof vc);
        memset(&vg, 0, sizeof vg);
        CU_ASSERT_EQUAL_FATAL(dm_tfidf_weigh_cpu(&vc, &c, map, n_terms, w, n_cols, &a), DM_OK);
        CU_ASSERT_EQUAL_FATAL(dm_tfidf_weigh_cuda(&vg, &c, map, n_terms, w, n_cols, &b), DM_OK);
        CU_ASSERT_TRUE(vectors_close(&vc, &vg));
        CU_ASSERT_EQUAL(a.zero_weight, b.zero_weight);
        CU_ASSERT_EQUAL(a.unmapped, b.unmapped);
        CU_ASSERT_TRUE(a.zero_weight > 0 && a.unmapped > 0);
        /* in chunks of rows */
        dm_tfidf_cuda_set_chunks(0, g_sanitizer ? 2999 : 9999);
        dm_weigh_options c2 = b;
        c2.zero_weight = c2.unmapped = 0;
        dm_vectors vk;
        memset(&vk, 0, sizeof vk);
        CU_ASSERT_EQUAL_FATAL(dm_tfidf_weigh_cuda(&vk, &c, map, n_terms, w, n_cols, &c2), DM_OK);
        dm_tfidf_cuda_set_chunks(0, 0);
        CU_ASSERT_TRUE(vectors_close(&vc, &vk));
        CU_ASSERT_EQUAL(c2.zero_weight, a.zero_weight);
        CU_ASSERT_EQUAL(c2.unmapped, a.unmapped);
        dm_vectors_free(&vk);
        dm_vectors_free(&vc);
        dm_vectors_free(&vg);
    }
    dm_free(map);
    dm_free(w);
    dm_tf_counts_free(&c);
    dm_free(off);
    dm_free(tok);
}

/* dir = the test's temporary directory / name, created (fatal otherwise). */
static void test_dir(char *dir, size_t size, const char *name)
{
    snprintf(dir, size, "%s/%s", g_tmp, name);
    CU_ASSERT_EQUAL_FATAL(dm_mkdirs(dir), DM_OK);
}

/* A whole corpus through both backends: same vocabulary (bytes, df, ids) and vectors. */
static void compare_corpus(const char *path, int format)
{
    dm_preprocess_options pp = DM_PREPROCESS_OPTIONS_INIT;
    pp.reader.format = format;
    pp.batch_bytes = 1 << 20; /* several batches */
    dm_tfidf_options oc = DM_TFIDF_OPTIONS_INIT;
    oc.backend = DM_BACKEND_CPU;
    oc.sublinear = 1;
    dm_vectors vc;
    dm_vocab kc;
    dm_tfidf_stats sc;
    CU_ASSERT_EQUAL_FATAL(dm_vectorize_corpus(&vc, &kc, &sc, NULL, NULL, path, &pp, &oc, NULL, NULL), DM_OK);
    for (int v = DM_TF_ATOMIC; v <= DM_TF_NOATOMIC; v++) {
        dm_tfidf_options og = oc;
        og.backend = DM_BACKEND_CUDA;
        og.tf_variant = v;
        og.by_bytes = v == DM_TF_NOATOMIC; /* both corpus readers on the GPU backend */
        dm_vectors vg;
        dm_vocab kg;
        dm_tfidf_stats sg;
        CU_ASSERT_EQUAL_FATAL(dm_vectorize_corpus(&vg, &kg, &sg, NULL, NULL, path, &pp, &og, NULL, NULL), DM_OK);
        CU_ASSERT_TRUE(termlists_equal(&kc.terms, &kg.terms));
        CU_ASSERT_EQUAL(kc.n_docs, kg.n_docs);
        CU_ASSERT_TRUE(vectors_close(&vc, &vg));
        CU_ASSERT_EQUAL(memcmp(vc.ids, vg.ids, vc.id_off[vc.n_rows]), 0);
        CU_ASSERT_EQUAL(sc.nnz, sg.nnz);
        CU_ASSERT_EQUAL(sc.empty_docs, sg.empty_docs);
        CU_ASSERT_EQUAL(sc.zero_weight, sg.zero_weight);
        dm_vectors_free(&vg);
        dm_vocab_free(&kg);
    }
    /* TF-ICF with the corpus as its own reference, on both backends */
    dm_tfidf_local ref;
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_local_from_corpus(&ref, NULL, NULL, path, &pp, &oc), DM_OK);
    dm_pp_signature sig;
    dm_pp_signature_of(&sig, &pp);
    dm_icf_table t;
    dm_tfidf_options og = oc;
    og.backend = DM_BACKEND_CUDA;
    CU_ASSERT_EQUAL_FATAL(dm_icf_build(&t, NULL, NULL, &ref, &sig, &og), DM_OK);
    CU_ASSERT_TRUE(termlists_equal(&t.vocab.terms, &kc.terms));
    dm_vectors ic, ig;
    CU_ASSERT_EQUAL_FATAL(dm_vectorize_corpus(&ic, NULL, NULL, NULL, NULL, path, &pp, &oc, &t, "t"), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_vectorize_corpus(&ig, NULL, NULL, NULL, NULL, path, &pp, &og, &t, "t"), DM_OK);
    CU_ASSERT_TRUE(vectors_close(&ic, &ig));
    dm_vectors_free(&ic);
    dm_vectors_free(&ig);
    dm_icf_table_free(&t);
    dm_tfidf_local_free(&ref);
    dm_vectors_free(&vc);
    dm_vocab_free(&kc);
}

static void test_corpus_generated(void)
{
    char dir[600], p[700];
    test_dir(dir, sizeof dir, "gen");
    const size_t n_docs = g_sanitizer ? 603 : 5003;
    char **docs = tl_random_docs(n_docs, g_sanitizer ? 4000 : 20000, 300, 41);
    for (int f = 0; f < 3; f++) {
        snprintf(p, sizeof p, "%s/part-%d.tsv", dir, f);
        FILE *fp = fopen(p, "w");
        CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
        for (size_t d = (size_t)f * n_docs / 3; d < (size_t)(f + 1) * n_docs / 3; d++)
            fprintf(fp, "g%zu\tl%zu\t%s the of\n", d, d % 4, docs[d]);
        fclose(fp);
    }
    tl_docs_free(docs, n_docs);
    compare_corpus(dir, DM_PP_FORMAT_AUTO);
}

static void test_corpus_reuters(void)
{
    char buf[1024];
    if (g_sanitizer) {
        printf("(sanitizer variant: Reuters skipped) ");
        return;
    }
    if (!dm_test_dataset("reuters21578/reut2-000.sgm", buf, sizeof buf)) {
        printf("(Reuters not present: skipped) ");
        return;
    }
    *strrchr(buf, '/') = '\0';
    compare_corpus(buf, DM_PP_FORMAT_REUTERS);
}

/* vectors a and b bit for bit (the same kernels on the same rows, wherever the rows were) */
static int vectors_identical(const dm_vectors *a, const dm_vectors *b)
{
    if (a->n_rows != b->n_rows || a->n_cols != b->n_cols) return 0;
    if (memcmp(a->row_off, b->row_off, 8 * (a->n_rows + 1)) != 0) return 0;
    uint64_t n = a->row_off[a->n_rows];
    return memcmp(a->col, b->col, 4 * n) == 0 && memcmp(a->val, b->val, 4 * n) == 0;
}

/* A stream's local counts on a backend (host: the CUDA rows on the host) are refused with
 * DM_ERR_FORMAT naming `want`; CPU too when with_cpu. */
static void stream_refused(const dm_token_stream *s, const dm_tfidf_options *base, int with_cpu, const char *want)
{
    for (int b = with_cpu ? 0 : 1; b < 3; b++) {
        dm_tfidf_options o = *base;
        o.backend = b == 0 ? DM_BACKEND_CPU : DM_BACKEND_CUDA;
        o.host_rows = b == 2;
        dm_tfidf_local l;
        CU_ASSERT_EQUAL(dm_tfidf_local_from_stream(&l, s, o.backend, &o), DM_ERR_FORMAT);
        CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), want));
    }
}

/* The stream path's rows kept on the device (dm_tfidf_local.dev) against the CPU and against
 * host rows: the same row offsets and df, the same vocabulary, and bit-identical vectors for
 * host and device rows, with the default chunk and with chunks of 3000 tokens (many pieces);
 * then a token whose hash is not in the vocabulary and a hash shared by two stems are refused
 * with the CPU's errors, the first naming the token. */
static void test_device_rows(void)
{
    char dir[600], p[700];
    test_dir(dir, sizeof dir, "devrows");
    const size_t n_docs = g_sanitizer ? 300 : 3001;
    char **docs = tl_random_docs(n_docs, 5000, 300, 43);
    snprintf(p, sizeof p, "%s/part.tsv", dir);
    FILE *fp = fopen(p, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
    for (size_t d = 0; d < n_docs; d++) fprintf(fp, "r%zu\tl%zu\t%s\n", d, d % 3, d % 97 == 5 ? "the of" : docs[d]);
    fclose(fp);
    tl_docs_free(docs, n_docs);
    dm_preprocess_options pp = DM_PREPROCESS_OPTIONS_INIT;
    pp.backend = DM_BACKEND_CPU;
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(dm_preprocess(&s, NULL, NULL, dir, &pp), DM_OK);
    CU_ASSERT_FATAL(s.n_tokens > 10000 || g_sanitizer);

    dm_tfidf_options oc = DM_TFIDF_OPTIONS_INIT;
    oc.backend = DM_BACKEND_CPU;
    dm_tfidf_local lc;
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_local_from_stream(&lc, &s, DM_BACKEND_CPU, &oc), DM_OK);
    CU_ASSERT_PTR_NULL(lc.dev);
    uint64_t *df_ref = dm_calloc(lc.terms.n + 1, 8), *df = dm_calloc(lc.terms.n + 1, 8);
    CU_ASSERT_FATAL(df_ref && df);
    CU_ASSERT_EQUAL(dm_tfidf_df_count(df_ref, lc.terms.n, lc.counts.term, lc.counts.row_off[lc.counts.n_rows]), UINT64_MAX);
    dm_vectors vc, v0;
    dm_vocab kc;
    dm_tfidf_stats sc;
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_vectors(&vc, &kc, &sc, NULL, &lc, &oc), DM_OK);
    CU_ASSERT_TRUE(sc.empty_docs > 0);
    int have_v0 = 0;
    for (int chunked = 0; chunked <= 1; chunked++) {
        dm_tfidf_cuda_set_chunks(chunked ? 3000 : 0, 0);
        for (int host = 0; host <= 1; host++) {
            dm_tfidf_options og = oc;
            og.backend = DM_BACKEND_CUDA;
            og.host_rows = host;
            dm_tfidf_local lg;
            CU_ASSERT_EQUAL_FATAL(dm_tfidf_local_from_stream(&lg, &s, DM_BACKEND_CUDA, &og), DM_OK);
            CU_ASSERT_EQUAL(lg.counts.n_rows, lc.counts.n_rows);
            CU_ASSERT_EQUAL(memcmp(lg.counts.row_off, lc.counts.row_off, 8 * (lc.counts.n_rows + 1)), 0);
            if (host) {
                CU_ASSERT_PTR_NULL(lg.dev);
                CU_ASSERT_TRUE(counts_equal(&lg.counts, &lc.counts));
            } else {
                CU_ASSERT_PTR_NOT_NULL_FATAL(lg.dev);
                CU_ASSERT_PTR_NULL(lg.counts.term);
                CU_ASSERT_EQUAL(dm_tf_dev_df(df, lg.terms.n, lg.dev, NULL), DM_OK);
                CU_ASSERT_EQUAL(memcmp(df, df_ref, 8 * lc.terms.n), 0);
                CU_ASSERT_EQUAL(dm_tf_dev_df(df, lg.terms.n + 1, lg.dev, NULL), DM_ERR_INVALID_ARG);
            }
            dm_vectors vg;
            dm_vocab kg;
            dm_tfidf_stats sg;
            CU_ASSERT_EQUAL_FATAL(dm_tfidf_vectors(&vg, &kg, &sg, NULL, &lg, &og), DM_OK);
            CU_ASSERT_TRUE(termlists_equal(&kc.terms, &kg.terms));
            CU_ASSERT_TRUE(vectors_close(&vc, &vg));
            CU_ASSERT_EQUAL(sc.nnz, sg.nnz);
            CU_ASSERT_EQUAL(sc.empty_docs, sg.empty_docs);
            CU_ASSERT_EQUAL(sc.zero_weight, sg.zero_weight);
            if (!have_v0) {
                v0 = vg;
                have_v0 = 1;
            } else {
                CU_ASSERT_TRUE(vectors_identical(&v0, &vg));
                dm_vectors_free(&vg);
            }
            dm_vocab_free(&kg);
            dm_tfidf_local_free(&lg);
        }
    }

    /* a token whose hash no term has (in a late chunk), on both backends and both row places */
    size_t k = s.n_tokens - s.n_tokens / 5;
    uint64_t saved = s.hashes[k], h = saved;
    while (dm_token_stream_term_find(&s, h) >= 0) h = h * 0x9e3779b97f4a7c15ull + 1;
    s.hashes[k] = h;
    char want[64];
    snprintf(want, sizeof want, "token %zu has hash", k);
    stream_refused(&s, &oc, 1, want);
    s.hashes[k] = saved;
    /* two stems under one hash */
    CU_ASSERT_FATAL(s.n_terms >= 2);
    for (size_t i = 0; i < s.n_tokens; i++) /* the second stem's tokens too */
        if (s.hashes[i] == s.term_hash[1]) s.hashes[i] = s.term_hash[0];
    s.term_hash[1] = s.term_hash[0];
    stream_refused(&s, &oc, 0, "stands for both");
    dm_tfidf_cuda_set_chunks(0, 0);
    if (have_v0) dm_vectors_free(&v0);
    dm_free(df);
    dm_free(df_ref);
    dm_vectors_free(&vc);
    dm_vocab_free(&kc);
    dm_tfidf_local_free(&lc);
    dm_token_stream_free(&s);
}

/* Two streams of one corpus hold the same documents, tokens, vocabulary and statistics; a's
 * hashes are on the host, b's wherever b keeps them (downloaded for the comparison). */
static int streams_equal(const dm_token_stream *a, const dm_token_stream *b)
{
    if (a->n_docs != b->n_docs || a->n_tokens != b->n_tokens || a->n_terms != b->n_terms || a->flags != b->flags)
        return 0;
    if (memcmp(&a->stats, &b->stats, offsetof(dm_pp_stats, messages)) != 0) return 0; /* the counters */
    size_t nd = a->n_docs, nt = a->n_terms;
    if (memcmp(a->tok_off, b->tok_off, 8 * (nd + 1)) || memcmp(a->id_off, b->id_off, 8 * (nd + 1)) ||
        memcmp(a->label_off, b->label_off, 8 * (nd + 1)) || memcmp(a->ids, b->ids, a->id_off[nd]) ||
        memcmp(a->labels, b->labels, a->label_off[nd]) || memcmp(a->term_hash, b->term_hash, 8 * nt) ||
        memcmp(a->term_off, b->term_off, 8 * (nt + 1)) || memcmp(a->term_bytes, b->term_bytes, a->term_off[nt]))
        return 0;
    uint64_t *h = dm_malloc(8 * (a->n_tokens + 1));
    if (!h) return 0;
    int ok = b->dev_hashes ? dm_pp_cuda_copy(h, b->dev_hashes, 8 * a->n_tokens) == DM_OK
                           : (memcpy(h, b->hashes, 8 * a->n_tokens), 1);
    ok = ok && memcmp(h, a->hashes, 8 * a->n_tokens) == 0;
    dm_free(h);
    return ok;
}

/* Token hashes left on the device by preprocess (dm_preprocess_options.device_tokens): the
 * stream equals the host one (12 batches, four workers), also when the device array is
 * refused on the way and the hashes move to the host (DOCMINE_PP_DEVICE_TOKENS_LIMIT); TF-IDF
 * reads them in place, with the default chunks and with chunks of 3000 tokens, into vectors
 * bit-identical to those from the host hashes; the CPU backend, the file writer and the dump
 * refuse such a stream; a hash no term has is refused naming its token, as from the host. */
static void test_device_tokens(void)
{
    char dir[600], p[700];
    test_dir(dir, sizeof dir, "devtok");
    const size_t n_docs = g_sanitizer ? 300 : 4001;
    char **docs = tl_random_docs(n_docs, 5000, 300, 47);
    for (int f = 0; f < 12; f++) { /* a batch is made of whole pieces of the readers: a file gives one */
        snprintf(p, sizeof p, "%s/part-%02d.tsv", dir, f);
        FILE *fp = fopen(p, "w");
        CU_ASSERT_PTR_NOT_NULL_FATAL(fp);
        for (size_t d = (size_t)f * n_docs / 12; d < (size_t)(f + 1) * n_docs / 12; d++)
            fprintf(fp, "t%zu\tl%zu\t%s\n", d, d % 5, d % 89 == 3 ? "the of" : docs[d]);
        fclose(fp);
    }
    tl_docs_free(docs, n_docs);
    dm_preprocess_options pp = DM_PREPROCESS_OPTIONS_INIT;
    pp.backend = DM_BACKEND_CUDA;
    pp.batch_bytes = 1 << 12; /* a batch per file */
    dm_token_stream h, d, m;
    dm_pp_times t;
    CU_ASSERT_EQUAL_FATAL(dm_preprocess(&h, &t, NULL, dir, &pp), DM_OK);
    CU_ASSERT_EQUAL(t.device_tokens, 0);
    CU_ASSERT_PTR_NULL(h.dev_hashes);
    printf("(%zu tokens, %llu batches) ", h.n_tokens, (unsigned long long)t.batches);
    CU_ASSERT_FATAL(t.batches >= 8);
    pp.device_tokens = 1;
    CU_ASSERT_EQUAL_FATAL(dm_preprocess(&d, &t, NULL, dir, &pp), DM_OK);
    CU_ASSERT_EQUAL(t.device_tokens, 1);
    CU_ASSERT_PTR_NULL(d.hashes);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d.dev_hashes);
    CU_ASSERT_TRUE(streams_equal(&h, &d));
    /* the device array refused past a third of the tokens: the rest on the host */
    char lim[32];
    snprintf(lim, sizeof lim, "%zu", h.n_tokens / 3);
    setenv("DOCMINE_PP_DEVICE_TOKENS_LIMIT", lim, 1);
    CU_ASSERT_EQUAL_FATAL(dm_preprocess(&m, &t, NULL, dir, &pp), DM_OK);
    unsetenv("DOCMINE_PP_DEVICE_TOKENS_LIMIT");
    CU_ASSERT_EQUAL(t.device_tokens, 2);
    CU_ASSERT_PTR_NULL(m.dev_hashes);
    CU_ASSERT_PTR_NOT_NULL(m.hashes);
    CU_ASSERT_TRUE(streams_equal(&h, &m));
    dm_token_stream_free(&m);

    dm_tfidf_options og = DM_TFIDF_OPTIONS_INIT;
    og.backend = DM_BACKEND_CUDA;
    for (int chunked = 0; chunked <= 1; chunked++) {
        dm_tfidf_cuda_set_chunks(chunked ? 3000 : 0, 0);
        dm_vectors v[2];
        for (int k = 0; k < 2; k++) {
            dm_tfidf_local l;
            CU_ASSERT_EQUAL_FATAL(dm_tfidf_local_from_stream(&l, k ? &d : &h, DM_BACKEND_CUDA, &og), DM_OK);
            CU_ASSERT_EQUAL_FATAL(dm_tfidf_vectors(&v[k], NULL, NULL, NULL, &l, &og), DM_OK);
            dm_tfidf_local_free(&l);
        }
        CU_ASSERT_TRUE(v[0].row_off[v[0].n_rows] > n_docs);
        CU_ASSERT_TRUE(vectors_identical(&v[0], &v[1]));
        dm_vectors_free(&v[0]);
        dm_vectors_free(&v[1]);
    }
    dm_tfidf_options oc = og;
    oc.backend = DM_BACKEND_CPU;
    dm_tfidf_local l;
    CU_ASSERT_EQUAL(dm_tfidf_local_from_stream(&l, &d, DM_BACKEND_CPU, &oc), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "device memory"));
    snprintf(p, sizeof p, "%s/stream.dmt", g_tmp);
    CU_ASSERT_EQUAL(dm_token_stream_write(&d, p), DM_ERR_INVALID_ARG);
    FILE *null = fopen("/dev/null", "w");
    CU_ASSERT_EQUAL(dm_token_stream_dump(&d, null), DM_ERR_INVALID_ARG);
    fclose(null);
    /* a token whose hash no term has (in a late chunk), read on the device */
    size_t k = h.n_tokens - h.n_tokens / 5;
    uint64_t saved = h.hashes[k], bad = saved;
    while (dm_token_stream_term_find(&h, bad) >= 0) bad = bad * 0x9e3779b97f4a7c15ull + 1;
    CU_ASSERT_EQUAL_FATAL(dm_pp_cuda_copy(d.dev_hashes + k, &bad, 8), DM_OK);
    char want[64];
    snprintf(want, sizeof want, "token %zu has hash %016llx", k, (unsigned long long)bad);
    dm_tfidf_cuda_set_chunks(3000, 0);
    stream_refused(&d, &og, 0, want);
    dm_tfidf_cuda_set_chunks(0, 0);
    dm_token_stream_free(&d);
    dm_token_stream_free(&h);
}

int main(int argc, char **argv)
{
    CU_TestInfo tests[] = {{"count_every_instance", test_count_every_instance},
                           {"count_overflow_rebuilds", test_count_overflow_rebuilds},
                           {"count_out_of_device_memory", test_count_oom},
                           {"vocab_table", test_vocab_table},
                           {"weigh", test_weigh},
                           {"corpus_generated", test_corpus_generated},
                           {"corpus_reuters", test_corpus_reuters},
                           {"device_rows", test_device_rows},
                           {"device_tokens", test_device_tokens},
                           CU_TEST_INFO_NULL};
    CU_SuiteInfo suites[] = {{"tfidf_gpu", setup, teardown, NULL, NULL, tests}, CU_SUITE_INFO_NULL};
    g_sanitizer = getenv("DOCMINE_SANITIZER") != NULL;
    if (g_sanitizer) {
        /* every instance is forced explicitly; the tuner's search would only add launches */
        dm_tune_set_mode(DM_TUNE_OFF);
        printf("DOCMINE_SANITIZER set: the small variant (every kernel and count instance, small inputs)\n");
    }
    return dm_test_run_gpu(argc, argv, suites);
}
