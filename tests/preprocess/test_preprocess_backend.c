/* Backend agreement: the token stream (ids, labels, hashes, order, vocabulary bytes) of the tested
 * backend equals the CPU backend's on all of Reuters and on generated multibyte text, with default
 * and other token options and with batches much smaller than the corpus.
 * Built twice: as test_preprocess_hd (unit: the CUDA algorithm emulated on the host,
 * dm_tokenize_hd) and as test_preprocess_gpu (gpu: dm_tokenize_cuda, over every compiled instance
 * of every preprocess kernel; exits 77 without a GPU). Reference: dm_tokenize_cpu.
 *
 * With DOCMINE_SANITIZER set (scripts/gpu-check.sh runs the GPU tests under compute-sanitizer,
 * where racecheck makes every launch slow) the small variant runs: the same tests, every kernel
 * and every compiled instance, the same option sets, batch splits and big-document path, but on
 * small inputs - the first records of two Reuters files (about 300 documents, more than a block
 * of the per-document kernel) instead of all of Reuters, generated files of at most a few
 * thousand words, a few thousand words for the stemmer - and with the tuner off (instances are
 * forced one by one; a tuning search would launch kernels on hundreds of MB). */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/context.h"
#include "common/status.h"
#include "common/tune/tune.h"
#include "pp_testlib.h"
#include "preprocess/preprocess.h"
#include "testutil.h"

#ifdef PP_TEST_GPU
#define PP_BACKEND DM_BACKEND_CUDA
#else
#define PP_BACKEND DM_PP_BACKEND_HD
#endif

static char g_tmp[1024];
static int g_small; /* DOCMINE_SANITIZER set: the small variant (see the top) */

static int setup(void) { return dm_test_tmpdir(g_tmp, sizeof(g_tmp)) ? 0 : 1; }
static int teardown(void)
{
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : 1;
}

static int streams_equal(const dm_token_stream *a, const dm_token_stream *b)
{
    if (a->n_docs != b->n_docs || a->n_tokens != b->n_tokens || a->n_terms != b->n_terms) {
        printf("\n  sizes differ: docs %zu/%zu tokens %zu/%zu terms %zu/%zu", a->n_docs, b->n_docs,
               a->n_tokens, b->n_tokens, a->n_terms, b->n_terms);
        return 0;
    }
    int ok = memcmp(a->tok_off, b->tok_off, 8 * (a->n_docs + 1)) == 0 &&
             memcmp(a->hashes, b->hashes, 8 * a->n_tokens) == 0 &&
             memcmp(a->id_off, b->id_off, 8 * (a->n_docs + 1)) == 0 &&
             memcmp(a->ids, b->ids, a->id_off[a->n_docs]) == 0 &&
             memcmp(a->labels, b->labels, a->label_off[a->n_docs]) == 0 &&
             memcmp(a->term_hash, b->term_hash, 8 * a->n_terms) == 0 &&
             memcmp(a->term_off, b->term_off, 8 * (a->n_terms + 1)) == 0 &&
             memcmp(a->term_bytes, b->term_bytes, a->term_off[a->n_terms]) == 0 &&
             a->stats.tokens_short == b->stats.tokens_short && a->stats.tokens_long == b->stats.tokens_long &&
             a->stats.tokens_number == b->stats.tokens_number && a->stats.tokens_stop == b->stats.tokens_stop;
    if (!ok) printf("\n  streams differ");
    return ok;
}

static void compare(const char *corpus, int format, const dm_tok_options *tok, size_t batch)
{
    dm_reader_options ro = DM_READER_OPTIONS_INIT;
    ro.format = format;
    dm_pp_stats st;
    memset(&st, 0, sizeof(st));
    dm_pp_file_list fl;
    CU_ASSERT_EQUAL_FATAL(dm_pp_list_files(&fl, corpus, &ro, &st), 0);
    dm_preprocess_options o = DM_PREPROCESS_OPTIONS_INIT;
    o.reader = ro;
    o.tok = *tok;
    o.batch_bytes = batch;
    dm_token_stream a, b;
    CU_ASSERT_EQUAL_FATAL(dm_preprocess_files(&a, NULL, fl.files, fl.n, &o, DM_BACKEND_CPU), 0);
    int nk = dm_pp_cuda_kernel_count();
    int rounds = 1;
#ifdef PP_TEST_GPU
    /* every instance of every kernel (others at their default) */
    for (int k = 0; k < nk; k++) rounds += dm_pp_cuda_instance_count(k);
#endif
    for (int r = 0; r < rounds; r++) {
#ifdef PP_TEST_GPU
        int k = 0, idx = r - 1;
        while (idx >= 0 && k < nk && idx >= dm_pp_cuda_instance_count(k)) idx -= dm_pp_cuda_instance_count(k++);
        for (int j = 0; j < nk; j++) dm_pp_cuda_force_instance(j, -1);
        if (r > 0) {
            CU_ASSERT_EQUAL(dm_pp_cuda_force_instance(k, idx), 0);
            printf("\n  %s instance %d", dm_pp_cuda_kernel_name(k), idx);
        }
#endif
        int rc = dm_preprocess_files(&b, NULL, fl.files, fl.n, &o, PP_BACKEND);
        CU_ASSERT_EQUAL(rc, 0);
        if (rc != 0) {
            printf("\n  %s", dm_error_message());
            continue;
        }
        CU_ASSERT(streams_equal(&a, &b));
        dm_token_stream_free(&b);
    }
    (void)nk;
    printf("\n  %zu docs, %zu tokens compared", a.n_docs, a.n_tokens);
    dm_token_stream_free(&a);
    dm_pp_file_list_free(&fl);
}

static void test_reuters(void)
{
    char small[1100];
    const char *dir = g_small ? pp_reuters_small(small, sizeof(small), g_tmp, 2, 200000) : pp_reuters_dir();
    if (!dir) {
        printf("(Reuters not found: skipped) ");
        return;
    }
    if (g_small) printf("(small variant: the first records of 2 files) ");
    dm_tok_options t = DM_TOK_OPTIONS_INIT;
    compare(dir, DM_PP_FORMAT_REUTERS, &t, 0);
    t.keep_numbers = 1;
    t.min_len = 1;
    t.max_len = 12;
    compare(dir, DM_PP_FORMAT_REUTERS, &t, g_small ? 1 << 16 : 1 << 20); /* several batches */
}

static void test_multibyte(void)
{
    static const char *w[] = {"naïve", "Ελλάδα", "日本語テキスト", "données", "Straße", "ﬁnance",
                              "running", "the", "1987", "über", "ЖУРНАЛ", "x²", "cafés", "a",
                              "generalizations", "\xff\xfe", "e\xcc\x81t\xc3\xa9", "q\x01z", "it's"};
    const size_t nw = sizeof(w) / sizeof(w[0]);
    uint64_t seed = 7;
    char dir[1100];
    snprintf(dir, sizeof(dir), "%s/mb", g_tmp);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    for (int f = 0; f < (g_small ? 6 : 9); f++) {
        /* sizes not multiples of 32 or of any block size, one much larger than a block */
        size_t n = f == 0 ? 1 : f == 1 ? 33 : 1000 + pp_rand(&seed) % (g_small ? 2001 : 70001);
        char *t = malloc(n * 24 + 1);
        size_t l = 0;
        for (size_t i = 0; i < n; i++) {
            const char *x = w[pp_rand(&seed) % nw];
            memcpy(t + l, x, strlen(x));
            l += strlen(x);
            int r = (int)(pp_rand(&seed) % 10);
            t[l++] = r < 7 ? ' ' : r < 8 ? '\n' : r < 9 ? ',' : '-';
        }
        /* a long run without separators: a token of more than 255 bytes */
        if (f == 3) {
            memset(t + l, 'k', 300);
            l += 300;
        }
        char p[1200];
        snprintf(p, sizeof(p), "%s/f%d.txt", dir, f);
        CU_ASSERT_EQUAL(pp_write_file(p, t, l), 0);
        free(t);
    }
    dm_tok_options t = DM_TOK_OPTIONS_INIT;
    compare(dir, DM_PP_FORMAT_AUTO, &t, 0);
    compare(dir, DM_PP_FORMAT_AUTO, &t, 4096); /* many small batches */
#ifdef PP_TEST_GPU
    /* device sub-batches of 4 KB: documents above that take the dedicated big-document path */
    setenv("DOCMINE_PP_CUDA_LIMIT", "4096", 1);
    compare(dir, DM_PP_FORMAT_AUTO, &t, 0);
    unsetenv("DOCMINE_PP_CUDA_LIMIT");
#endif
    t.stem = 0;
    t.keep_numbers = 1;
    compare(dir, DM_PP_FORMAT_AUTO, &t, 0);
}

#ifdef PP_TEST_GPU
/* The CUDA stemmer (every instance) == libstemmer on Reuters tokens and generated words. */
static void test_stem_words_cuda(void)
{
    pp_words w = {0};
    const char *dir = pp_reuters_dir();
    if (dir) pp_distinct_tokens(&w, dir, DM_PP_FORMAT_REUTERS);
    if (g_small && w.n > 3001) w.n = 3001, w.len = w.off[3001]; /* the first Reuters tokens */
    pp_gen_random_words(&w, g_small ? 2003 : 100001, 21);
    pp_gen_suffix_words(&w, g_small ? 4001 : 200003, 22);
    pp_words_add(&w, "caf\xc3\xa9", 5);
    char *a = malloc(w.len + 1), *b = malloc(w.len + 1);
    uint32_t *o1 = malloc(w.n * 4), *l1 = malloc(w.n * 4), *o2 = malloc(w.n * 4), *l2 = malloc(w.n * 4);
    CU_ASSERT_EQUAL_FATAL(dm_stem_words_cpu(a, o1, l1, w.bytes, w.off, w.wlen, w.n), 0);
    int k = 0; /* preprocess.stem_words */
    while (k < dm_pp_cuda_kernel_count() && strcmp(dm_pp_cuda_kernel_name(k), "preprocess.stem_words") != 0) k++;
    CU_ASSERT_FATAL(k < dm_pp_cuda_kernel_count());
    for (int i = 0; i < dm_pp_cuda_instance_count(k); i++) {
        CU_ASSERT_EQUAL(dm_pp_cuda_force_instance(k, i), 0);
        CU_ASSERT_EQUAL_FATAL(dm_stem_words_cuda(b, o2, l2, w.bytes, w.off, w.wlen, w.n), 0);
        size_t bad = 0;
        for (size_t j = 0; j < w.n; j++)
            if (l1[j] != l2[j] || memcmp(a + o1[j], b + o2[j], l1[j]) != 0) bad++;
        printf("\n  stem_words instance %d: %zu words, %zu differences", i, w.n, bad);
        CU_ASSERT_EQUAL(bad, 0);
    }
    dm_pp_cuda_force_instance(k, -1);
    free(a);
    free(b);
    free(o1);
    free(l1);
    free(o2);
    free(l2);
    pp_words_free(&w);
}

/* A word list that does not fit on the device: DM_ERR_NOMEM naming the stage (not the "invalid
 * argument" of copies to the NULL buffers the failed allocations left, as before), no device
 * memory kept, and the next call, with memory back, stems as the CPU does. */
static void test_stem_words_cuda_oom(void)
{
    const size_t bytes = (size_t)16 << 20; /* above the 2 MiB from which dm_test_device_hog fails allocations */
    char *words = calloc(bytes, 1), *out = calloc(bytes, 1), *ref = calloc(bytes, 1);
    CU_ASSERT_FATAL(words && out && ref);
    uint32_t off[2] = {0, (uint32_t)(bytes - 8)}, len[2] = {7, 7}, oo[2], ol[2], ro[2], rl[2];
    memcpy(words, "connect", 7);
    memcpy(words + off[1], "running", 7);
    size_t d0 = dm_mem_current(DM_MEM_DEVICE);
    int held = dm_test_device_hog();
    int rc = dm_stem_words_cuda(out, oo, ol, words, off, len, 2);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", dm_error_message());
    dm_test_device_unhog();
    printf("\n  injected %d; stem: %d (%s)", held, rc, msg);
    CU_ASSERT_EQUAL(rc, DM_ERR_NOMEM);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "stem"));
    CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_DEVICE), d0);
    dm_error_clear();
    CU_ASSERT_EQUAL_FATAL(dm_stem_words_cuda(out, oo, ol, words, off, len, 2), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_stem_words_cpu(ref, ro, rl, words, off, len, 2), DM_OK);
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(ol[i], rl[i]);
        CU_ASSERT_EQUAL(memcmp(out + oo[i], ref + ro[i], rl[i]), 0);
    }
    CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_DEVICE), d0);
    free(words);
    free(out);
    free(ref);
}

/* Tokenising out of device memory (the workspace cannot be made or grown): DM_ERR_NOMEM naming the
 * stage, and once memory is back the same batch gives the CPU's tokens. Registered before the
 * other tokenising tests, so that the process's workspace is made here: a first setup that failed
 * part way (a stream made, then no room for the counters) used to be taken as complete by the next
 * call, whose kernels then wrote the counts through NULL (an illegal address: every later CUDA
 * call of the process fails). Allocations under 2 MiB still succeed (the stream, events and
 * counters are made), so the failure may come at the text buffers; either way the test checks the
 * rest. */
static void test_tokenize_cuda_oom(void)
{
    static const char *w[] = {"the", "markets", "rose", "running", "connections", "oil", "1987", "x", "of"};
    const size_t n_words = (size_t)1 << 20, per_doc = 997;
    char *text = malloc(n_words * 12 + 1);
    uint64_t *off = malloc(8 * (n_words / per_doc + 2));
    CU_ASSERT_FATAL(text && off);
    size_t len = 0, nd = 0;
    for (size_t i = 0; i < n_words; i++) {
        if (i % per_doc == 0) off[nd++] = len;
        const char *x = w[(i * 7 + i / 13) % (sizeof w / sizeof w[0])];
        size_t k = strlen(x);
        memcpy(text + len, x, k);
        len += k;
        text[len++] = ' ';
    }
    off[nd] = len;
    dm_tok_batch b = {text, len, off, nd};
    dm_stopset stop;
    CU_ASSERT_EQUAL_FATAL(dm_stopset_load(&stop, NULL), DM_OK);
    dm_tok_options opt = DM_TOK_OPTIONS_INIT;
    dm_tok_result r, ref;
    int held = dm_test_device_hog();
    int rc = dm_tokenize_cuda(&r, &b, &stop, &opt);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", dm_error_message());
    dm_test_device_unhog();
    printf("\n  injected %d; tokenise: %d (%s)", held, rc, rc == DM_OK ? "" : msg);
    if (rc == DM_OK) {
        dm_tok_result_free(&r); /* a workspace already large enough (not this test's case) */
    } else {
        CU_ASSERT_EQUAL(rc, DM_ERR_NOMEM);
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, "preprocess"));
    }
    dm_error_clear();
    CU_ASSERT_EQUAL_FATAL(dm_tokenize_cpu(&ref, &b, &stop, &opt), DM_OK);
    rc = dm_tokenize_cuda(&r, &b, &stop, &opt);
    CU_ASSERT_EQUAL(rc, DM_OK);
    if (rc == DM_OK) {
        CU_ASSERT_EQUAL(r.n_tokens, ref.n_tokens);
        if (r.n_tokens == ref.n_tokens) {
            CU_ASSERT_EQUAL(memcmp(r.hash, ref.hash, 8 * ref.n_tokens), 0);
            CU_ASSERT_EQUAL(memcmp(r.stem_len, ref.stem_len, ref.n_tokens), 0);
            CU_ASSERT_EQUAL(memcmp(r.doc_tok, ref.doc_tok, 8 * (nd + 1)), 0);
        }
        dm_tok_result_free(&r);
    } else {
        printf("\n  %s", dm_error_message());
    }
    dm_tok_result_free(&ref);
    dm_stopset_free(&stop);
    free(text);
    free(off);
}
#endif

int main(int argc, char **argv)
{
    g_small = pp_sanitizer();
    if (g_small) {
        printf("DOCMINE_SANITIZER set: the small variant (every kernel and instance, small inputs, tuner off)\n");
        dm_tune_set_mode(DM_TUNE_OFF);
    }
    CU_TestInfo t[] = {
#ifdef PP_TEST_GPU
        {"CUDA stemmer == libstemmer, every instance", test_stem_words_cuda},
        {"CUDA stemmer out of device memory: NOMEM, nothing kept, then works", test_stem_words_cuda_oom},
        {"CUDA tokeniser out of device memory: NOMEM, then the CPU's tokens", test_tokenize_cuda_oom},
#endif
        {"generated multibyte text: backend == CPU", test_multibyte},
        {"all of Reuters: backend == CPU", test_reuters},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"preprocess-backend", setup, teardown, NULL, NULL, t}, CU_SUITE_INFO_NULL};
#ifdef PP_TEST_GPU
    return dm_test_run_gpu(argc, argv, suites);
#else
    (void)argc;
    (void)argv;
    return dm_test_run(suites);
#endif
}
