/* MPI tests of common/ (mpiexec -n 1, 2, 4; CPU backend): the run context, agreement on
 * errors, timers and counters reduced over ranks, the collected run report, and reads of another
 * rank's memory (common/cma.h). */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cma.h"
#include "common/context.h"
#include "common/report.h"
#include "common/status.h"
#include "common/timer.h"
#include "testutil.h"

static dm_ctx g_ctx;

static int setup(void)
{
    dm_ctx_options o = DM_CTX_OPTIONS_INIT;
    o.backend = DM_BACKEND_CPU;
    o.quiet = 1;
    return dm_ctx_init(&g_ctx, &o) == DM_OK ? 0 : 1;
}
static int teardown(void)
{
    dm_ctx_free(&g_ctx);
    return 0;
}

static void test_context(void)
{
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CU_ASSERT_EQUAL(g_ctx.size, size);
    CU_ASSERT_EQUAL(g_ctx.backend, DM_BACKEND_CPU);
    CU_ASSERT_EQUAL(g_ctx.device, -1);
    /* all ranks of a test run share one node: local ranks are 0..size-1 */
    CU_ASSERT_EQUAL(g_ctx.local_size, size);
    int sum = 0;
    MPI_Allreduce(&g_ctx.local_rank, &sum, 1, MPI_INT, MPI_SUM, g_ctx.world);
    CU_ASSERT_EQUAL(sum, size * (size - 1) / 2);
}

/* The default threads per rank: the rule on hand-made masks, and the context's choice. */
static void set_cpus(unsigned char *m, int lo, int hi)
{
    for (int c = lo; c <= hi; c++) m[c / 8] |= (unsigned char)(1u << (c % 8));
}

static void test_threads_default(void)
{
    enum { B = 4 }; /* 32 CPUs */
    unsigned char m[4][B];
    /* unbound: 4 ranks with the same 16 CPUs split them */
    memset(m, 0, sizeof m);
    for (int r = 0; r < 4; r++) set_cpus(m[r], 0, 15);
    for (int r = 0; r < 4; r++) CU_ASSERT_EQUAL(dm_threads_for_masks(&m[0][0], B, 4, r), 4);
    /* bound to their own 8 cores: each keeps them */
    memset(m, 0, sizeof m);
    for (int r = 0; r < 4; r++) set_cpus(m[r], 8 * r, 8 * r + 7);
    for (int r = 0; r < 4; r++) CU_ASSERT_EQUAL(dm_threads_for_masks(&m[0][0], B, 4, r), 8);
    /* overlapping: 0-7 and 4-11 share; 12-15 and 16-31 are alone */
    memset(m, 0, sizeof m);
    set_cpus(m[0], 0, 7);
    set_cpus(m[1], 4, 11);
    set_cpus(m[2], 12, 15);
    set_cpus(m[3], 16, 31);
    CU_ASSERT_EQUAL(dm_threads_for_masks(&m[0][0], B, 4, 0), 4);
    CU_ASSERT_EQUAL(dm_threads_for_masks(&m[0][0], B, 4, 1), 4);
    CU_ASSERT_EQUAL(dm_threads_for_masks(&m[0][0], B, 4, 2), 4);
    CU_ASSERT_EQUAL(dm_threads_for_masks(&m[0][0], B, 4, 3), 16);
    /* more ranks than CPUs: one thread each */
    memset(m, 0, sizeof m);
    for (int r = 0; r < 4; r++) set_cpus(m[r], 0, 1);
    CU_ASSERT_EQUAL(dm_threads_for_masks(&m[0][0], B, 4, 2), 1);

    /* the context: --threads, else OMP_NUM_THREADS, else the rule (these ranks run unbound or bound
     * by the launcher; either way no more threads than their share) */
    CU_ASSERT_TRUE(g_ctx.threads >= 1);
    CU_ASSERT_EQUAL(g_ctx.threads, omp_get_max_threads());
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && *env) {
        CU_ASSERT_EQUAL(g_ctx.threads, atoi(env));
    } else {
        int t = dm_threads_default(g_ctx.node);
        CU_ASSERT_EQUAL(g_ctx.threads, t < omp_get_num_procs() ? t : omp_get_num_procs());
        CU_ASSERT_TRUE(g_ctx.threads == 1 || g_ctx.threads * g_ctx.local_size <= omp_get_num_procs());
    }
}

static void test_agree(void)
{
    /* the last rank fails; every rank must learn it, the others marked as remote */
    int mine = g_ctx.rank == g_ctx.size - 1 ? DM_ERR(DM_ERR_FORMAT, "bad record") : DM_OK;
    int rc = dm_ctx_agree(&g_ctx, mine);
    CU_ASSERT_EQUAL(rc, DM_ERR_FORMAT);
    if (g_ctx.rank == g_ctx.size - 1) {
        CU_ASSERT_FALSE(dm_error_is_remote());
    } else {
        CU_ASSERT_TRUE(dm_error_is_remote());
    }
    CU_ASSERT_EQUAL(dm_ctx_agree(&g_ctx, DM_OK), DM_OK);
    /* the sweeps' check itself */
    CU_ASSERT_EQUAL(dm_test_ranks_differ(-g_ctx.rank, &g_ctx.world), g_ctx.size > 1);
    CU_ASSERT_EQUAL(dm_test_ranks_differ(DM_ERR_IO, &g_ctx.world), 0);
    /* a root cause's class wins over what the other ranks derived from it: the last rank runs out
     * of memory, rank 0 reports (as a neighbour would) that the last rank failed, with a lower
     * code; everybody returns DM_ERR_NOMEM, and rank 0 keeps its own message */
    if (g_ctx.size > 1) {
        if (g_ctx.rank == g_ctx.size - 1) mine = DM_ERR(DM_ERR_NOMEM, "out of memory");
        else if (g_ctx.rank == 0) {
            mine = DM_ERR(DM_ERR_MPI, "neighbour rank %d failed", g_ctx.size - 1);
            dm_error_mark_remote();
        } else mine = DM_OK;
        CU_ASSERT_EQUAL(dm_ctx_agree(&g_ctx, mine), DM_ERR_NOMEM);
        if (g_ctx.rank == 0) CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "neighbour rank"));
        /* two own failures: the lower code, as before */
        mine = g_ctx.rank == 0 ? DM_ERR(DM_ERR_MPI, "own") : g_ctx.rank == 1 ? DM_ERR(DM_ERR_IO, "own") : DM_OK;
        CU_ASSERT_EQUAL(dm_ctx_agree(&g_ctx, mine), DM_ERR_MPI);
    }
    int pair[2];
    dm_agree_pack(DM_OK, pair);
    CU_ASSERT_EQUAL(dm_agree_unpack(pair), DM_OK);
    DM_ERR(DM_ERR_IO, "x");
    dm_error_mark_remote();
    dm_agree_pack(DM_ERR_IO, pair); /* learnt */
    CU_ASSERT_EQUAL(pair[0], DM_OK);
    CU_ASSERT_EQUAL(dm_agree_unpack(pair), DM_ERR_IO);
    dm_agree_pack(DM_ERR_NOMEM, pair); /* not the remote error's code: own */
    CU_ASSERT_EQUAL(pair[0], DM_ERR_NOMEM);
    /* learnt, then an own error of another code (a failed allocation after the neighbour's
     * failure, its status kept): the status is still the learnt one */
    DM_ERR(DM_ERR_MPI, "neighbour rank 3 failed");
    dm_error_mark_remote();
    DM_ERR(DM_ERR_NOMEM, "out of memory, later");
    dm_agree_pack(DM_ERR_MPI, pair);
    CU_ASSERT_EQUAL(pair[0], DM_OK);
    dm_agree_pack(DM_ERR_NOMEM, pair);
    CU_ASSERT_EQUAL(pair[0], DM_ERR_NOMEM);
    /* an own error of the learnt code: that code is own again */
    DM_ERR(DM_ERR_MPI, "own MPI failure");
    dm_agree_pack(DM_ERR_MPI, pair);
    CU_ASSERT_EQUAL(pair[0], DM_ERR_MPI);
    dm_error_clear();
}

/* Runs run(arg) with one rank's allocations failing alone, each in turn (rank q's k-th for every
 * q and k up to the most any rank makes): every rank must return the same status, DM_OK or
 * DM_ERR_NOMEM, and leave no counted host memory (run releases what it made). Returns the runs
 * that failed. */
static int sweep_one_rank_alone(int (*run)(void *), void *arg)
{
    dm_test_sweep s = {.run = run, .arg = arg, .comm = &g_ctx.world, .who = DM_TEST_SWEEP_EACH};
    uint64_t na_max;
    CU_ASSERT_EQUAL(dm_test_sweep_count(&s, &na_max), DM_OK);
    CU_ASSERT(na_max >= 5);
    dm_test_sweep_stats st = {0};
    dm_test_sweep_run(&s, na_max + 1, 0, 1, &st);
    return st.failed;
}

/* The timers reduced (test_stats_reduce's two timers), checked and released. */
static int stats_run(void *arg)
{
    (void)arg;
    dm_stat *st;
    int n;
    int rc = dm_stats_reduce(&st, &n, g_ctx.world, 0);
    if (rc == DM_OK && (n != 2 || st[0].calls != g_ctx.size)) rc = DM_ERR_FORMAT; /* a wrong result */
    dm_free(st); /* NULL after a failure */
    return rc;
}

static void test_stats_reduce(void)
{
    dm_timers_reset();
    int r = g_ctx.rank, p = g_ctx.size;
    dm_timer_add("stage.all", 1.0 + r);               /* every rank */
    if (r == p - 1) dm_timer_add("stage.last", 4.0);  /* only the last rank */
    dm_counter_add("docs", 10 * (r + 1));
    dm_stat *st;
    int n;
    CU_ASSERT_EQUAL_FATAL(dm_stats_reduce(&st, &n, g_ctx.world, 0), DM_OK);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT_STRING_EQUAL(st[0].name, "stage.all"); /* sorted by name */
    CU_ASSERT_DOUBLE_EQUAL(st[0].min, 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(st[0].max, (double)p, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(st[0].avg, (1.0 + p) / 2.0, 1e-12);
    CU_ASSERT_EQUAL(st[0].calls, p);
    CU_ASSERT_STRING_EQUAL(st[1].name, "stage.last");
    CU_ASSERT_DOUBLE_EQUAL(st[1].max, 4.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(st[1].min, p > 1 ? 0.0 : 4.0, 1e-12);
    dm_free(st);
    CU_ASSERT_EQUAL_FATAL(dm_stats_reduce(&st, &n, g_ctx.world, 1), DM_OK);
    CU_ASSERT_EQUAL_FATAL(n, 1);
    CU_ASSERT_DOUBLE_EQUAL(st[0].sum, 10.0 * p * (p + 1) / 2, 1e-9);
    dm_free(st);
    /* one rank's allocations failing alone, each in turn: every rank returns the same status, none
     * waits in a collective that the failed one left, nothing stays allocated (a rank returned
     * alone at its first failure: the others hung in the next MPI_Allgather(v)/Allreduce) */
    CU_ASSERT(sweep_one_rank_alone(stats_run, NULL) >= p * 5);
}

/* A whole report collection (devices, timers, counters) and its release. */
static int report_run(void *argv)
{
    dm_report sw;
    CU_ASSERT_EQUAL_FATAL(dm_report_init(&sw, "info", 2, argv), DM_OK);
    int rc = dm_report_collect(&sw, &g_ctx);
    dm_report_free(&sw);
    return rc;
}

static void test_report(void)
{
    dm_timers_reset();
    dm_timer_add("read", 0.5 * (g_ctx.rank + 1));
    dm_counter_add("skipped.empty", 1);
    char *argv[] = {"docmine", "info"};
    setenv("DOCMINE_REPORT_TEST", "a=b c", 1);
    dm_report rep;
    CU_ASSERT_EQUAL_FATAL(dm_report_init(&rep, "info", 2, argv), DM_OK);
    json_object_set_new(rep.results, "answer", json_integer(42));
    char *buf = dm_malloc(1000);
    CU_ASSERT_EQUAL(dm_report_collect(&rep, &g_ctx), DM_OK);
    dm_free(buf);
    char dir[256] = "", path[300] = "";
    if (g_ctx.rank == 0) CU_ASSERT_PTR_NOT_NULL_FATAL(dm_test_tmpdir(dir, sizeof dir));
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, g_ctx.world);
    snprintf(path, sizeof path, "%s/report.json", dir);
    CU_ASSERT_EQUAL(dm_report_write(&rep, &g_ctx, path), DM_OK);
    dm_report_free(&rep);
    /* the collection with one rank's allocations failing alone, each in turn (devices, timers,
     * counters): the same status on every rank, none left in a collective (a rank without room
     * for the device records returned before their gather: the others hung), nothing left */
    CU_ASSERT(sweep_one_rank_alone(report_run, argv) >= g_ctx.size * 6);
    MPI_Barrier(g_ctx.world);
    if (g_ctx.rank == 0) {
        json_error_t err;
        json_t *j = json_load_file(path, 0, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(j);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_object_get(j, "results"), "answer")), 42);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "ranks")), g_ctx.size);
        CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "devices")), (size_t)g_ctx.size);
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(json_array_get(json_object_get(j, "devices"), 0), "threads")),
                        g_ctx.threads);
        json_t *rd = json_object_get(json_object_get(j, "timers_s"), "read");
        CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(rd, "max")), 0.5 * g_ctx.size, 1e-9);
        CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(rd, "min")), 0.5, 1e-9);
        json_t *c = json_object_get(json_object_get(j, "counters"), "skipped.empty");
        CU_ASSERT_EQUAL(json_integer_value(json_object_get(c, "sum")), g_ctx.size);
        json_t *mem = json_object_get(j, "peak_memory_bytes_max_over_ranks");
        CU_ASSERT_TRUE(json_integer_value(json_object_get(mem, "host")) >= 1000);
        CU_ASSERT_PTR_NOT_NULL(json_string_value(json_object_get(json_object_get(j, "versions"), "mpi")));
        /* the environment's settings: set on every rank before the report (main) */
        json_t *env = json_object_get(j, "environment");
        CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(env, "DOCMINE_REPORT_TEST")), "a=b c");
        CU_ASSERT_PTR_NULL(json_object_get(env, "PATH"));
        json_decref(j);
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        CU_ASSERT_EQUAL(system(cmd), 0);
    }
}

/* byte i of rank r's buffer */
static unsigned char cma_byte(int r, size_t i) { return (unsigned char)(i * 131u + (size_t)r * 29u + (i >> 12)); }

static void test_cma(void)
{
    /* off: nobody opens it */
    setenv("DOCMINE_CMA", "0", 1);
    dm_cma *cm = (dm_cma *)1;
    CU_ASSERT_EQUAL_FATAL(dm_cma_open(&cm, &g_ctx), DM_OK);
    CU_ASSERT_PTR_NULL(cm);
    unsetenv("DOCMINE_CMA");
    CU_ASSERT_EQUAL_FATAL(dm_cma_open(&cm, &g_ctx), DM_OK);
    if (g_ctx.size == 1) { /* no peer */
        CU_ASSERT_PTR_NULL(cm);
        return;
    }
    /* the ranks of a test run share this node, whose processes may read each other */
    CU_ASSERT_PTR_NOT_NULL_FATAL(cm);
    const size_t n = ((size_t)3 << 20) + 5;
    unsigned char *mine = dm_malloc(n), *got = dm_malloc(n);
    CU_ASSERT_FATAL(mine && got);
    for (size_t i = 0; i < n; i++) mine[i] = cma_byte(g_ctx.rank, i);
    uint64_t me = (uint64_t)(uintptr_t)mine, *addr = dm_malloc(sizeof *addr * (size_t)g_ctx.size);
    CU_ASSERT_FATAL(addr != NULL);
    MPI_Allgather(&me, 1, MPI_UINT64_T, addr, 1, MPI_UINT64_T, g_ctx.world);
    CU_ASSERT_FALSE(dm_cma_local(cm, g_ctx.rank));
    CU_ASSERT_FALSE(dm_cma_local(cm, g_ctx.size));
    CU_ASSERT_EQUAL(dm_cma_read(cm, g_ctx.rank, got, me, 8), DM_ERR_INVALID_ARG);
    for (int q = 0; q < g_ctx.size; q++) {
        if (q == g_ctx.rank) continue;
        CU_ASSERT_TRUE(dm_cma_local(cm, q));
        /* pieces of odd sizes at odd offsets, read by several threads; then nothing */
        memset(got, 0, n);
        const size_t piece = 65536 + 3;
        const long pieces = (long)((n - 7 + piece - 1) / piece);
        int bad = 0;
#pragma omp parallel for num_threads(3) schedule(dynamic, 1) reduction(+ : bad)
        for (long k = 0; k < pieces; k++) {
            size_t o = 7 + (size_t)k * piece, c = n - o < piece ? n - o : piece;
            bad += dm_cma_read(cm, q, got + o, addr[q] + o, c) != DM_OK;
        }
        CU_ASSERT_EQUAL(bad, 0);
        size_t wrong = 0;
        for (size_t i = 0; i < n; i++) wrong += got[i] != (i < 7 ? 0 : cma_byte(q, i));
        CU_ASSERT_EQUAL(wrong, 0);
        CU_ASSERT_EQUAL(dm_cma_read(cm, q, got, addr[q], 0), DM_OK);
        /* an address the peer has not mapped: an error naming the rank, no crash */
        CU_ASSERT_EQUAL(dm_cma_read(cm, q, got, 8, 16), DM_ERR_IO);
        char want[32];
        snprintf(want, sizeof want, "of rank %d", q);
        CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), want));
    }
    /* written: each rank puts 2500 ranges of 0-1999 bytes from anywhere in its buffer (some
     * empty, out of order; three system calls' worth) one after another into its part of every
     * peer's inbox, then one range to an address the peer has not mapped after 1500 good ones */
    enum { NR = 2500 };
    const void **src = dm_malloc(sizeof *src * NR);
    uint64_t *dst = dm_malloc(sizeof *dst * NR);
    size_t *len = dm_malloc(sizeof *len * NR), total = 0;
    CU_ASSERT_FATAL(src && dst && len);
    for (size_t k = 0; k < NR; k++) {
        len[k] = k % 7 == 3 ? 0 : (k * 2654435761u) % 2000;
        src[k] = mine + (k * 40503u * 977u) % (n - len[k]);
        total += len[k];
    }
    unsigned char *inbox = dm_calloc((size_t)g_ctx.size, total);
    CU_ASSERT_FATAL(inbox != NULL);
    uint64_t in = (uint64_t)(uintptr_t)inbox;
    MPI_Allgather(&in, 1, MPI_UINT64_T, addr, 1, MPI_UINT64_T, g_ctx.world);
    CU_ASSERT_EQUAL(dm_cma_writev(cm, g_ctx.rank, src, dst, len, 1), DM_ERR_INVALID_ARG);
    for (int q = 0; q < g_ctx.size; q++) {
        if (q == g_ctx.rank) continue;
        uint64_t at = addr[q] + total * (size_t)g_ctx.rank;
        for (size_t k = 0; k < NR; at += len[k], k++) dst[k] = at;
        CU_ASSERT_EQUAL(dm_cma_writev(cm, q, src, dst, len, NR), DM_OK);
        CU_ASSERT_EQUAL(dm_cma_writev(cm, q, src, dst, len, 0), DM_OK);
        uint64_t keep = dst[1500];
        dst[1500] = 8;
        CU_ASSERT_EQUAL(dm_cma_writev(cm, q, src, dst, len, NR), DM_ERR_IO);
        char want[32];
        snprintf(want, sizeof want, "of rank %d", q);
        CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), want));
        dst[1500] = keep;
    }
    MPI_Barrier(g_ctx.world); /* every peer has written */
    size_t wrong = 0;
    for (int q = 0; q < g_ctx.size; q++) {
        const unsigned char *part = inbox + total * (size_t)q;
        for (size_t k = 0, at = 0; k < NR; at += len[k], k++)
            for (size_t i = 0; i < len[k]; i++) {
                size_t o = (size_t)((const unsigned char *)src[k] - mine) + i;
                wrong += part[at + i] != (q == g_ctx.rank ? 0 : cma_byte(q, o));
            }
    }
    CU_ASSERT_EQUAL(wrong, 0);
    dm_free(inbox);
    dm_free(src);
    dm_free(dst);
    dm_free(len);
    dm_cma_close(cm); /* a barrier: the peers have read this rank's buffer */
    dm_free(addr);
    dm_free(mine);
    dm_free(got);
}

/* The environment's settings in the report: DOCMINE_* and OMP_* by prefix, two names exactly,
 * the value after the first '=', nothing else. */
static void test_report_environment(void)
{
    char *env[] = {"DOCMINE_STAGE_THREADS=0", "OMP_NUM_THREADS=16", "PATH=/bin", "DOCMINE_=x", "OMP_=y",
                   "CUDA_VISIBLE_DEVICES=1,2", "CUDA_VISIBLE_DEVICESX=3", "GLIBC_TUNABLES=glibc.malloc.hugetlb=1",
                   "NOEQUALS", "=empty", "DOCMINE_EMPTY=", "XDOCMINE_A=1", NULL};
    json_t *o = dm_report_environment(env);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    CU_ASSERT_EQUAL(json_object_size(o), 5);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o, "DOCMINE_STAGE_THREADS")), "0");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o, "OMP_NUM_THREADS")), "16");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o, "CUDA_VISIBLE_DEVICES")), "1,2");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o, "GLIBC_TUNABLES")), "glibc.malloc.hugetlb=1");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o, "DOCMINE_EMPTY")), "");
    json_decref(o);
    o = dm_report_environment(NULL);
    CU_ASSERT_EQUAL(json_object_size(o), 0);
    json_decref(o);
}

int main(int argc, char **argv)
{
    CU_TestInfo t[] = {
        {"context and node-local ranks", test_context},
        {"threads per rank", test_threads_default},
        {"errors agreed over ranks", test_agree},
        {"timers reduced over ranks", test_stats_reduce},
        {"run report", test_report},
        {"the environment in the report", test_report_environment},
        {"reads of another rank's memory (cma), written ranges", test_cma},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"common-mpi", setup, teardown, NULL, NULL, t}, CU_SUITE_INFO_NULL};
    return dm_test_run_mpi(argc, argv, suites);
}
