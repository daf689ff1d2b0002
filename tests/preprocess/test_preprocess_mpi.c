/* MPI tests of preprocess (1, 2, 4 ranks, CPU backend): the token streams of all ranks,
 * concatenated in rank order, are identical (ids, labels, hashes, order) to the one-process stream,
 * on all of Reuters and on a generated multibyte corpus; an error on one rank (a bad file seen only
 * by it in strict mode) reaches every rank without a hang, and so does every host allocation of a
 * run failing in turn, on every rank at once and on one rank alone; the skip messages of every rank
 * reach every rank in corpus order (those of one process), also in the error of a corpus without
 * documents; the run id of a stream set is rank 0's on every rank. Reference: dm_preprocess_files
 * on one process. With DOCMINE_SANITIZER set (test_preprocess_mpi_gpu run under compute-sanitizer
 * by scripts/gpu-check.sh) the small variant runs: the same tests on the first records of three
 * Reuters files and on a smaller generated corpus, with the tuner off. */
#include <CUnit/CUnit.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/context.h"
#include "common/status.h"
#include "common/tune/tune.h"
#include "pp_testlib.h"
#include "preprocess/preprocess.h"
#include "testutil.h"

#ifdef PP_TEST_GPU
#define PP_MPI_BACKEND DM_BACKEND_CUDA /* test_preprocess_mpi_gpu: CUDA ranks vs one CPU process */
#else
#define PP_MPI_BACKEND DM_BACKEND_CPU
#endif

static dm_ctx g_ctx;
static char g_tmp[1024];
static int g_small; /* DOCMINE_SANITIZER set: the small variant (see the top) */

static int setup(void)
{
    dm_ctx_options o = DM_CTX_OPTIONS_INIT;
    o.backend = PP_MPI_BACKEND;
    o.quiet = 1;
    if (dm_ctx_init(&g_ctx, &o) != DM_OK) return 1;
    if (g_ctx.rank == 0 && !dm_test_tmpdir(g_tmp, sizeof(g_tmp))) return 1;
    MPI_Bcast(g_tmp, sizeof(g_tmp), MPI_CHAR, 0, g_ctx.world);
    return 0;
}

static int teardown(void)
{
    MPI_Barrier(g_ctx.world);
    if (g_ctx.rank == 0) {
        char cmd[1200];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_tmp);
        if (system(cmd) != 0) return 1;
    }
    dm_ctx_free(&g_ctx);
    return 0;
}

/* Serialises a stream's ids, labels and hashes (per document) into one buffer. */
static char *flatten(const dm_token_stream *s, size_t *len)
{
    size_t n = 0;
    for (size_t d = 0; d < s->n_docs; d++)
        n += strlen(dm_token_stream_id(s, d)) + strlen(dm_token_stream_labels(s, d)) + 2 + 8 +
             8 * (s->tok_off[d + 1] - s->tok_off[d]);
    char *b = malloc(n + 1), *p = b;
    for (size_t d = 0; d < s->n_docs; d++) {
        size_t k = strlen(dm_token_stream_id(s, d)) + 1;
        memcpy(p, dm_token_stream_id(s, d), k);
        p += k;
        k = strlen(dm_token_stream_labels(s, d)) + 1;
        memcpy(p, dm_token_stream_labels(s, d), k);
        p += k;
        uint64_t nt = s->tok_off[d + 1] - s->tok_off[d];
        memcpy(p, &nt, 8);
        p += 8;
        memcpy(p, s->hashes + s->tok_off[d], 8 * nt);
        p += 8 * nt;
    }
    *len = n;
    return b;
}

/* Runs the corpus on all ranks, gathers the flattened streams on rank 0 and compares them with a
 * one-process run over every file. */
static void compare_with_single(const char *corpus, int format)
{
    dm_preprocess_options o = DM_PREPROCESS_OPTIONS_INIT;
    o.reader.format = format;
    o.backend = PP_MPI_BACKEND;
    dm_token_stream s;
    int rc = dm_preprocess(&s, NULL, &g_ctx, corpus, &o);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    size_t len;
    char *mine = flatten(&s, &len);
    int n = (int)len, *counts = NULL, *displs = NULL;
    if (g_ctx.rank == 0) {
        counts = malloc(sizeof(int) * (size_t)g_ctx.size);
        displs = malloc(sizeof(int) * (size_t)g_ctx.size);
    }
    MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, g_ctx.world);
    char *all = NULL;
    size_t total = 0;
    if (g_ctx.rank == 0) {
        for (int r = 0; r < g_ctx.size; r++) {
            displs[r] = (int)total;
            total += (size_t)counts[r];
        }
        all = malloc(total + 1);
    }
    MPI_Gatherv(mine, n, MPI_CHAR, all, counts, displs, MPI_CHAR, 0, g_ctx.world);
    if (g_ctx.rank == 0) {
        dm_pp_stats st;
        memset(&st, 0, sizeof(st));
        dm_pp_file_list fl;
        CU_ASSERT_EQUAL_FATAL(dm_pp_list_files(&fl, corpus, &o.reader, &st), 0);
        dm_token_stream one;
        o.backend = DM_BACKEND_CPU;
        CU_ASSERT_EQUAL_FATAL(dm_preprocess_files(&one, NULL, fl.files, fl.n, &o, DM_BACKEND_CPU), 0);
        size_t l1;
        char *ref = flatten(&one, &l1);
        CU_ASSERT_EQUAL(l1, total);
        CU_ASSERT(l1 == total && memcmp(ref, all, total) == 0);
        CU_ASSERT_EQUAL(s.stats.docs, one.n_docs); /* stats are summed over ranks */
        printf("\n  %d rank(s): %zu documents, %zu bytes of stream compared", g_ctx.size, one.n_docs, l1);
        free(ref);
        dm_token_stream_free(&one);
        dm_pp_file_list_free(&fl);
    }
    free(all);
    free(counts);
    free(displs);
    free(mine);
    dm_token_stream_free(&s);
}

static void test_reuters(void)
{
    char small[1100];
    const char *dir = pp_reuters_dir();
    if (dir && g_small) { /* rank 0 writes the small corpus into the shared temporary folder */
        int ok = g_ctx.rank != 0 || pp_reuters_small(small, sizeof(small), g_tmp, 3, 150000) != NULL;
        snprintf(small, sizeof(small), "%s/reuters-small", g_tmp);
        MPI_Bcast(&ok, 1, MPI_INT, 0, g_ctx.world);
        CU_ASSERT_FATAL(ok);
        dir = small;
        printf("(small variant: the first records of 3 files) ");
    }
    if (!dir) {
        printf("(Reuters not found: skipped) ");
        return;
    }
    compare_with_single(dir, DM_PP_FORMAT_REUTERS);
}

static void test_multibyte_corpus(void)
{
    static const char *words[] = {"naïve", "Ελλάδα", "日本語", "données", "straße", "ﬁnance",
                                  "running", "the", "1987", "über", "ЖУРНАЛ", "x²", "cafés"};
    char dir[1100];
    snprintf(dir, sizeof(dir), "%s/mb", g_tmp);
    if (g_ctx.rank == 0) {
        char cmd[2400];
        snprintf(cmd, sizeof(cmd), "mkdir -p '%s/a' '%s/b'", dir, dir);
        CU_ASSERT_EQUAL(system(cmd), 0);
        uint64_t seed = 99;
        for (int f = 0; f < 13; f++) {
            size_t n = 100 + pp_rand(&seed) % (g_small ? 2000 : 20000); /* uneven sizes */
            char *t = malloc(n * 12 + 16);
            size_t l = 0;
            for (size_t i = 0; i < n; i++) {
                const char *w = words[pp_rand(&seed) % 13];
                memcpy(t + l, w, strlen(w));
                l += strlen(w);
                t[l++] = pp_rand(&seed) % 7 ? ' ' : '\n';
            }
            char p[1200];
            snprintf(p, sizeof(p), "%s/%s/f%02d.txt", dir, f % 2 ? "a" : "b", f);
            CU_ASSERT_EQUAL(pp_write_file(p, t, l), 0);
            free(t);
        }
    }
    MPI_Barrier(g_ctx.world);
    compare_with_single(dir, DM_PP_FORMAT_AUTO);
}

/* Does the stream hold a document of this id? */
static int find_id(const dm_token_stream *s, const char *id)
{
    for (size_t d = 0; d < s->n_docs; d++)
        if (strcmp(dm_token_stream_id(s, d), id) == 0) return 1;
    return 0;
}

/* Ids stay unique whichever rank reads which file: f<i>.txt and f<i>.txt.gz both drop to
 * "f<i>.txt" without their suffix; every rank lists the whole tree and gives the .gz its own name
 * ("f<i>.txt.gz"), though f0.txt (large) and f0.txt.gz fall to different ranks. Each rank checks its
 * own documents (a .gz holds two tokens, a plain file an odd number), rank 0 that the ids of all
 * are distinct; the ranks' streams concatenated are the one-process stream. */
static void test_ids_across_ranks(void)
{
    char dir[1100], p[1200];
    snprintf(dir, sizeof(dir), "%s/zid", g_tmp);
    if (g_ctx.rank == 0) {
        char cmd[1300];
        snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
        CU_ASSERT_EQUAL(system(cmd), 0);
        for (int i = 0; i < 8; i++) {
            char t[2000];
            size_t l = 0;
            for (int k = 0; k < (i == 0 ? 301 : 1); k++) l += (size_t)snprintf(t + l, sizeof(t) - l, "plain ");
            snprintf(p, sizeof(p), "%s/f%d.txt", dir, i);
            CU_ASSERT_EQUAL(pp_write_file(p, t, l), 0);
            snprintf(p, sizeof(p), "%s/f%d.txt.gz", dir, i);
            gzFile g = gzopen(p, "wb");
            CU_ASSERT_PTR_NOT_NULL_FATAL(g);
            CU_ASSERT_EQUAL(gzwrite(g, "packed words", 12), 12);
            gzclose(g);
        }
    }
    MPI_Barrier(g_ctx.world);
    dm_preprocess_options o = DM_PREPROCESS_OPTIONS_INIT;
    o.backend = PP_MPI_BACKEND;
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(dm_preprocess(&s, NULL, &g_ctx, dir, &o), 0);
    int bad = 0;
    for (size_t d = 0; d < s.n_docs; d++) {
        const char *id = dm_token_stream_id(&s, d);
        size_t n = strlen(id);
        int gz = n > 3 && strcmp(id + n - 3, ".gz") == 0;
        bad += gz != ((s.tok_off[d + 1] - s.tok_off[d]) == 2);
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(s.stats.docs, 16);
    dm_token_stream_free(&s);
    if (g_ctx.rank == 0) {
        dm_token_stream one;
        CU_ASSERT_EQUAL_FATAL(dm_preprocess(&one, NULL, NULL, dir, &o), 0);
        CU_ASSERT_EQUAL(one.n_docs, 16);
        for (size_t a = 0; a < one.n_docs; a++)
            for (size_t b = a + 1; b < one.n_docs; b++)
                CU_ASSERT(strcmp(dm_token_stream_id(&one, a), dm_token_stream_id(&one, b)) != 0);
        CU_ASSERT(find_id(&one, "f0.txt") && find_id(&one, "f0.txt.gz") && find_id(&one, "f7.txt.gz"));
        dm_token_stream_free(&one);
    }
    compare_with_single(dir, DM_PP_FORMAT_AUTO);
}

/* A bad file in strict mode fails on the rank that reads it; every rank returns the error. */
static void test_error_agreement(void)
{
    char dir[1100];
    snprintf(dir, sizeof(dir), "%s/err", g_tmp);
    if (g_ctx.rank == 0) {
        char cmd[1200], p[1200];
        snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
        CU_ASSERT_EQUAL(system(cmd), 0);
        for (int f = 0; f < 8; f++) {
            snprintf(p, sizeof(p), "%s/f%d.jsonl", dir, f);
            const char *good = "{\"id\":\"a\",\"text\":\"fine words here\"}\n";
            const char *bad = "{\"id\":\"a\",\"text\":\"fine words here\"}\n{broken\n";
            const char *t = f == 7 ? bad : good; /* the last file: read by the last rank */
            CU_ASSERT_EQUAL(pp_write_file(p, t, strlen(t)), 0);
        }
    }
    MPI_Barrier(g_ctx.world);
    dm_preprocess_options o = DM_PREPROCESS_OPTIONS_INIT;
    o.reader.strict = 1;
    o.backend = PP_MPI_BACKEND;
    dm_token_stream s;
    int rc = dm_preprocess(&s, NULL, &g_ctx, dir, &o);
    CU_ASSERT_EQUAL(rc, DM_ERR_FORMAT);
}

/* Writes dir/f<i>.jsonl, i < n: what(i) gives each file's text. Rank 0; the others wait. */
static void write_jsonl_files(const char *dir, int n, const char *(*what)(int i, char *buf, size_t cap))
{
    if (g_ctx.rank == 0) {
        char cmd[1200], p[1200], buf[4096];
        snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", dir);
        CU_ASSERT_EQUAL(system(cmd), 0);
        for (int f = 0; f < n; f++) {
            snprintf(p, sizeof(p), "%s/f%d.jsonl", dir, f);
            const char *t = what(f, buf, sizeof(buf));
            CU_ASSERT_EQUAL(pp_write_file(p, t, strlen(t)), 0);
        }
    }
    MPI_Barrier(g_ctx.world);
}

/* even files: 20 good records; odd files: 6 malformed lines each */
static const char *good_and_bad(int i, char *buf, size_t cap)
{
    size_t l = 0;
    for (int k = 0; k < (i % 2 ? 6 : 20); k++)
        l += (size_t)snprintf(buf + l, cap - l, i % 2 ? "{bad %d %d\n" : "{\"id\":\"d%d-%d\",\"text\":\"oil wheat grain\"}\n",
                              i, k);
    return buf;
}

/* Skip messages of every rank reach every rank: the first DM_PP_MAX_MESSAGES in corpus order and
 * the total, the counts per reason summed: what one process keeps of the same corpus, whatever
 * the ranks (the malformed lines lie in files of every rank's share; 24 messages, 16 kept). */
static void test_skip_messages_all_ranks(void)
{
    char dir[1100];
    snprintf(dir, sizeof(dir), "%s/skips", g_tmp);
    write_jsonl_files(dir, 8, good_and_bad);
    dm_preprocess_options o = DM_PREPROCESS_OPTIONS_INIT;
    o.backend = PP_MPI_BACKEND;
    dm_token_stream s, one;
    CU_ASSERT_EQUAL_FATAL(dm_preprocess(&s, NULL, &g_ctx, dir, &o), 0);
    CU_ASSERT_EQUAL_FATAL(dm_preprocess(&one, NULL, NULL, dir, &o), 0); /* one process, every file */
    const dm_pp_stats *a = &s.stats, *b = &one.stats;
    CU_ASSERT_EQUAL(b->n_messages, 24);
    CU_ASSERT_EQUAL(a->n_messages, b->n_messages);
    CU_ASSERT_EQUAL(a->skipped[DM_PP_SKIP_BAD_JSON], 24);
    CU_ASSERT_EQUAL(a->docs, 80);
    for (int m = 0; m < DM_PP_MAX_MESSAGES; m++) CU_ASSERT_STRING_EQUAL(a->messages[m], b->messages[m]);
    CU_ASSERT_PTR_NOT_NULL(strstr(a->messages[DM_PP_MAX_MESSAGES - 1], "f5.jsonl:4:"));
    dm_token_stream_free(&s);
    dm_token_stream_free(&one);
}

/* blank files (no document, nothing skipped), the last one malformed: read by the last rank */
static const char *blank_then_bad(int i, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", i == 7 ? "{broken\n" : "\n\n\n");
    return buf;
}

/* A corpus without documents is a runtime error (not a usage error) on every rank, whose message
 * gives the skips per reason and the first message, though another rank met it. */
static void test_no_documents_reason(void)
{
    char dir[1100];
    snprintf(dir, sizeof(dir), "%s/nodocs", g_tmp);
    write_jsonl_files(dir, 8, blank_then_bad);
    dm_preprocess_options o = DM_PREPROCESS_OPTIONS_INIT;
    o.backend = PP_MPI_BACKEND;
    dm_token_stream s;
    CU_ASSERT_EQUAL(dm_preprocess(&s, NULL, &g_ctx, dir, &o), DM_ERR_FORMAT);
    char want[1200];
    snprintf(want, sizeof want, "no documents, 1 skipped (1 bad_json); the first: %s/f7.jsonl:1:", dir);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), want));
}

/* test_alloc_failures' run: its stream in w.s, the reference in w.ref */
typedef struct sweep_arg {
    pp_sweep w; /* first */
    const char *dir;
    const dm_preprocess_options *o;
} sweep_arg;
static int sweep_run(void *a_)
{
    sweep_arg *a = a_;
    return dm_preprocess(&a->w.s, NULL, &g_ctx, a->dir, a->o);
}

/* Every host allocation of a run on the mixed corpus (pp_write_mixed_corpus) failed in turn, first
 * on every rank at once (each rank's k-th dm_malloc / dm_calloc / dm_realloc, so the ranks fail at
 * different points of their work: listing, reading, the pipeline's threads, the stream), then on
 * one rank alone while the others succeed at the same point (the case that leaves the others
 * waiting in a collective): every rank returns the same status, DM_OK or DM_ERR_NOMEM, none crashes
 * or waits forever, a run that succeeds gives each rank's reference stream, a failed run leaves no
 * counted host memory (but the batch buffers preprocess keeps for the next run: released before
 * each measure), and a run afterwards is unchanged. CPU backend only (the device allocations are
 * not these). */
static void test_alloc_failures(void)
{
    if (PP_MPI_BACKEND != DM_BACKEND_CPU) return; /* test_preprocess_mpi_gpu */
    char dir[1100];
    snprintf(dir, sizeof(dir), "%s/mixed", g_tmp);
    int ok = g_ctx.rank != 0 || pp_write_mixed_corpus(dir) == 0;
    MPI_Bcast(&ok, 1, MPI_INT, 0, g_ctx.world);
    CU_ASSERT_FATAL(ok);
    dm_preprocess_options o = DM_PREPROCESS_OPTIONS_INIT;
    o.backend = DM_BACKEND_CPU;
    o.threads = 2;
    o.workers = 2;
    o.batch_bytes = 1024; /* several batches in flight on every rank */
    sweep_arg a = {.dir = dir, .o = &o};
    CU_ASSERT_EQUAL_FATAL(dm_preprocess(&a.w.ref, NULL, &g_ctx, dir, &o), DM_OK);
    /* the allocation's error on every rank (the ranks that learnt of it too) */
    dm_test_sweep s = {.run = sweep_run, .differs = pp_sweep_differs, .release = pp_sweep_release, .arg = &a,
                       .comm = &g_ctx.world};
    uint64_t n_max;
    int rc = dm_test_sweep_count(&s, &n_max);
    CU_ASSERT_EQUAL_FATAL(rc, DM_OK);
    pp_sweep_release(&a, rc);
    CU_ASSERT_FATAL(n_max > 50);
    /* all ranks at once: one rank, every allocation; more, the first ones one by one, then points
     * spread over the rest (fewer on 4 ranks, which share CI's two cores: 50 points took 3 s under
     * ASan). One rank alone (not on one rank, where it is the first pass): the same points, the
     * failing rank going round point by point (k mod P would stay on one rank once the step is a
     * multiple of P) */
    const uint64_t last = n_max + n_max / 8 + 8, first = g_ctx.size == 1 ? last : g_ctx.size > 2 ? 20 : 40;
    const uint64_t step = (last - first) / (g_ctx.size > 2 ? 30 : 120) + 1;
    const double t0 = MPI_Wtime();
    dm_test_sweep_stats all = {0}, alone = {0};
    s.label = "pass 0";
    dm_test_sweep_run(&s, last, first, step, &all);
    CU_ASSERT(all.failed > all.tried / 2);
    if (g_ctx.size > 1) {
        s.who = DM_TEST_SWEEP_TURN;
        s.label = "pass 1";
        dm_test_sweep_run(&s, last, first, step, &alone);
        CU_ASSERT(alone.failed > alone.tried / 4);
    }
    CU_ASSERT_EQUAL_FATAL(sweep_run(&a), DM_OK); /* and nothing is left broken */
    CU_ASSERT(pp_streams_equal(&a.w.s, &a.w.ref));
    dm_token_stream_free(&a.w.s);
    dm_token_stream_free(&a.w.ref);
    if (g_ctx.rank == 0) {
        printf("\n  %d rank(s): %llu allocations on the busiest rank, %d failure points tried, %d failed the run",
               g_ctx.size, (unsigned long long)n_max, all.tried, all.failed);
        if (g_ctx.size > 1) printf("; one rank alone: %d tried, %d failed", alone.tried, alone.failed);
        printf(" (%.2f s)", MPI_Wtime() - t0);
    }
}

/* The run id of a token stream set: dm_token_stream_new_run_id gives every rank rank 0's id (never
 * 0), another one at each call; each rank's file carries it, so that the files of one run agree
 * and a file of the next run (same ranks, same rank) does not. */
static void test_run_id_shared(void)
{
    uint64_t a = dm_token_stream_new_run_id(&g_ctx.world), b = dm_token_stream_new_run_id(&g_ctx.world);
    uint64_t mine[2] = {a, b}, *all = malloc(sizeof mine * (size_t)g_ctx.size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(all);
    MPI_Allgather(mine, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, g_ctx.world);
    int same = 1;
    for (int r = 0; r < g_ctx.size; r++) same &= all[2 * r] == a && all[2 * r + 1] == b;
    CU_ASSERT(same);
    CU_ASSERT(a != 0 && b != 0 && a != b);
    free(all);
    /* written and read back per rank */
    char dir[1100], path[1200];
    snprintf(dir, sizeof(dir), "%s/runid", g_tmp);
    int ok = g_ctx.rank != 0 || pp_write_mixed_corpus(dir) == 0;
    MPI_Bcast(&ok, 1, MPI_INT, 0, g_ctx.world);
    CU_ASSERT_FATAL(ok);
    dm_preprocess_options o = DM_PREPROCESS_OPTIONS_INIT;
    o.backend = PP_MPI_BACKEND;
    dm_token_stream s, u;
    CU_ASSERT_EQUAL_FATAL(dm_preprocess(&s, NULL, &g_ctx, dir, &o), DM_OK);
    CU_ASSERT_EQUAL(s.run_id, 0); /* dm_preprocess leaves it to the caller */
    s.run_id = a;
    snprintf(path, sizeof(path), "%s/runid.tok.rank%d", g_tmp, g_ctx.rank);
    CU_ASSERT_EQUAL_FATAL(dm_token_stream_write(&s, path), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_token_stream_read(&u, path), DM_OK);
    CU_ASSERT(u.run_id == a && u.rank == (uint32_t)g_ctx.rank && u.n_ranks == (uint32_t)g_ctx.size);
    dm_token_stream_free(&u);
    dm_token_stream_free(&s);
    remove(path);
}

int main(int argc, char **argv)
{
    g_small = pp_sanitizer();
    if (g_small) {
        printf("DOCMINE_SANITIZER set: the small variant (small inputs, tuner off)\n");
        dm_tune_set_mode(DM_TUNE_OFF);
    }
    CU_TestInfo t[] = {
        {"Reuters: ranks concatenated == one process", test_reuters},
        {"multibyte corpus: ranks concatenated == one process", test_multibyte_corpus},
        {"ids unique (a.txt beside a.txt.gz) whichever rank reads which", test_ids_across_ranks},
        {"an error on one rank reaches all", test_error_agreement},
        {"skip messages of every rank, in corpus order, on every rank", test_skip_messages_all_ranks},
        {"no documents: the reason, though another rank met it", test_no_documents_reason},
        {"every host allocation failing in turn: all ranks agree, none hangs", test_alloc_failures},
        {"the run id of a token stream: rank 0's on every rank, another per run", test_run_id_shared},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"preprocess-mpi", setup, teardown, NULL, NULL, t}, CU_SUITE_INFO_NULL};
#ifdef PP_TEST_GPU
    return dm_test_run_gpu(argc, argv, suites);
#else
    return dm_test_run_mpi(argc, argv, suites);
#endif
}
