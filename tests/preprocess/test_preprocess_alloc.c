/* Allocation failures in preprocess: every host allocation of a whole run (listing, a stop list
 * from a file, every reader on a small mixed corpus, normalisation, the batch pipeline with its
 * reader, worker and prefault threads, tokenising, the token stream, its file written and read
 * back) failed in turn (dm_alloc_fail_at), with one reader and one worker, with four of each on
 * the CPU backend, and with the CUDA algorithm on the host: every run returns DM_OK or
 * DM_ERR_NOMEM and none crashes, waits forever or leaks (ASan's leak check at exit), a run that
 * succeeds gives the reference stream, and a run after the sweep is unchanged. Reference: the same
 * run without a failure. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/context.h"
#include "common/status.h"
#include "pp_testlib.h"
#include "preprocess/preprocess.h"
#include "testutil.h"

static char g_tmp[1024], g_dir[1100], g_stop[1100], g_out[1100];

static int setup(void)
{
    if (!dm_test_tmpdir(g_tmp, sizeof(g_tmp))) return 1;
    snprintf(g_dir, sizeof(g_dir), "%s/mixed", g_tmp);
    snprintf(g_stop, sizeof(g_stop), "%s/stop.txt", g_tmp);
    snprintf(g_out, sizeof(g_out), "%s/stream.dmt", g_tmp);
    const char *stop = "# a list of our own\nthe\nof\nAND\n  in # inline comment\nr\xc3\xa9sum\xc3\xa9\n";
    if (pp_write_file(g_stop, stop, strlen(stop)) != 0) return 1;
    return pp_write_mixed_corpus(g_dir);
}

static int teardown(void)
{
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : 1;
}

/* The arrays of two streams (a stream read back from its file keeps only some counters). */
static int same_arrays(const dm_token_stream *a, const dm_token_stream *b)
{
    dm_token_stream c = *b;
    c.stats = a->stats;
    return pp_streams_equal(a, &c);
}

/* One run as `docmine preprocess -o FILE` makes it: dm_preprocess (listing included) on the CPU
 * backend, or the listing and dm_preprocess_files with the CUDA algorithm on the host; then the
 * stream written to its file and read back (it must come back the same). */
static int run(dm_token_stream *s, const dm_preprocess_options *o, int backend)
{
    int rc;
    if (backend != DM_PP_BACKEND_HD) {
        rc = dm_preprocess(s, NULL, NULL, g_dir, o);
    } else {
        dm_pp_stats st;
        memset(&st, 0, sizeof(st));
        dm_pp_file_list fl;
        memset(s, 0, sizeof(*s));
        rc = dm_pp_list_files(&fl, g_dir, &o->reader, &st);
        if (rc < 0) return rc;
        rc = dm_preprocess_files(s, NULL, fl.files, fl.n, o, backend);
        dm_pp_file_list_free(&fl);
    }
    if (rc < 0) return rc;
    dm_token_stream back;
    rc = dm_token_stream_write(s, g_out);
    if (rc >= 0) rc = dm_token_stream_read(&back, g_out);
    if (rc >= 0) {
        CU_ASSERT(same_arrays(s, &back));
        dm_token_stream_free(&back);
    }
    if (rc < 0) dm_token_stream_free(s);
    return rc;
}

/* sweep's run: its stream in w.s, the reference in w.ref */
typedef struct sweep_arg {
    pp_sweep w; /* first */
    const dm_preprocess_options *o;
    int backend;
} sweep_arg;
static int sweep_run(void *a_)
{
    sweep_arg *a = a_;
    return run(&a->w.s, a->o, a->backend);
}

/* Fails allocation k = 1, 2, ... of the run in turn: every one (a run takes a few milliseconds),
 * or the first 40 one by one and then 400 points spread over the rest should the runs grow. */
static void sweep(int threads, int workers, int backend)
{
    dm_preprocess_options o = DM_PREPROCESS_OPTIONS_INIT;
    o.backend = DM_BACKEND_CPU;
    o.threads = threads;
    o.workers = workers;
    o.window = 1;
    o.batch_bytes = 1024; /* about a batch per file: several batches in flight, commits in turn */
    if (threads == 1) o.stopwords = g_stop; /* a list read from a file (else the built-in one) */
    sweep_arg a = {.o = &o, .backend = backend};
    CU_ASSERT_EQUAL_FATAL(run(&a.w.ref, &o, backend), DM_OK);
    const dm_token_stream *ref = &a.w.ref;
    CU_ASSERT_FATAL(ref->n_docs >= 20 && ref->stats.files_read >= 14 && ref->stats.invalid_utf8 == 0 &&
                    ref->stats.nul_bytes == 1 && dm_pp_stats_skipped_total(&ref->stats) >= 4);
    /* counted host memory: a failed run leaves none (the batch buffers kept for the next run
     * released before each measure), in any build (ASan's leak check only runs in its own) */
    dm_test_sweep s = {.run = sweep_run, .differs = pp_sweep_differs, .release = pp_sweep_release, .arg = &a};
    uint64_t n;
    int rc = dm_test_sweep_count(&s, &n);
    CU_ASSERT_EQUAL_FATAL(rc, DM_OK);
    CU_ASSERT(!pp_sweep_differs(&a));
    pp_sweep_release(&a, rc);
    CU_ASSERT_FATAL(n > 50);
    /* with several threads the order of the allocations, and so their number, may vary a little */
    const uint64_t last = n + n / 8 + 8, step = n <= 1000 ? 1 : (last - 40) / 400 + 1;
    dm_test_sweep_stats st = {0};
    dm_test_sweep_run(&s, last, 40, step, &st);
    CU_ASSERT(st.failed > st.tried / 2);
    CU_ASSERT_EQUAL_FATAL(sweep_run(&a), DM_OK); /* and nothing is left broken */
    CU_ASSERT(!pp_sweep_differs(&a));
    dm_token_stream_free(&a.w.s);
    dm_token_stream_free(&a.w.ref);
    printf("\n  %d reader(s), %d worker(s), %s: %llu allocations, %d failure points tried, %d failed the run",
           threads, workers, backend == DM_PP_BACKEND_HD ? "CUDA algorithm on the host" : "CPU",
           (unsigned long long)n, st.tried, st.failed);
}

static void test_one_thread(void) { sweep(1, 1, DM_BACKEND_CPU); }
static void test_four_threads(void) { sweep(4, 4, DM_BACKEND_CPU); }
static void test_host_cuda_algorithm(void) { sweep(4, 2, DM_PP_BACKEND_HD); }

int main(void)
{
    CU_TestInfo t[] = {
        {"every allocation failing in turn: 1 reader, 1 worker", test_one_thread},
        {"every allocation failing in turn: 4 readers, 4 workers", test_four_threads},
        {"every allocation failing in turn: the CUDA algorithm on the host", test_host_cuda_algorithm},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"preprocess-alloc", setup, teardown, NULL, NULL, t}, CU_SUITE_INFO_NULL};
    return dm_test_run(suites);
}
