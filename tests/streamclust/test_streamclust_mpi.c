/* MPI tests of streamclust (run on 1, 2 and 4 ranks, CPU backend): the distributed run gives a
 * valid clustering (kmin <= k <= kmax unless the documented give-up, labels in range, weights of
 * the final centres adding up to the number of points) whose cost is within a stated bound of the
 * single-rank cost on the same points; the in-memory stream equals the generator's run; every host
 * allocation of a run failed in turn ends it with the same status on every rank, without a hang,
 * and so does an input file that one rank cannot open.
 * Reference: the 1-rank run (MPI_COMM_SELF) of the same options, computed on every rank. */
#include <CUnit/CUnit.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/status.h"
#include "streamclust/streamclust.h"
#include "sc_testlib.h"
#include "testutil.h"

/* Bound on cost(P ranks) / cost(1 rank). STREAM is a constant-factor approximation whose
 * intermediate centres depend on how the stream is split; on these uniform points the measured
 * ratios for P = 2 and 4 are within a few percent, so 1.25 leaves room without hiding a broken
 * merge (a merge that dropped a rank's centres costs several times more). */
#define DM_SC_MPI_COST_BOUND 1.25

static void check_valid(const dm_sc_result *r, const dm_sc_options *o, long n_total)
{
    CU_ASSERT(r->gave_up || (r->k >= o->kmin && r->k <= o->kmax));
    CU_ASSERT(r->k >= 1);
    long bad = 0;
    for (long i = 0; i < r->n_local; i++) bad += r->labels[i] < 0 || r->labels[i] >= r->k;
    CU_ASSERT_EQUAL(bad, 0);
    double w = 0;
    for (long c = 0; c < r->k; c++) w += r->weights[c];
    CU_ASSERT(fabs(w - (double)n_total) < 1e-6 * (double)n_total);
    for (long c = 0; c < r->k; c++) CU_ASSERT(r->centre_ids[c] >= 0 && r->centre_ids[c] < n_total);
    CU_ASSERT(r->total_cost > 0 && isfinite(r->total_cost));
}

/* clustersize: of the P-rank run (0: 400); the 1-rank reference always gets 400 */
static long run_case_cs(long n, long chunk, int dim, long kmin, long kmax, long clustersize)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.kmin = kmin;
    o.kmax = kmax;
    o.dim = dim;
    o.n = n;
    o.chunksize = chunk;
    o.clustersize = 400;
    o.backend = DM_SC_CPU;

    dm_sc_result one, all;
    MPI_Comm self = MPI_COMM_SELF;
    int rc1 = dm_sc_run(&one, &o, &self);
    if (rc1 != DM_OK) {
        CU_FAIL("1-rank run failed");
        return -1;
    }
    if (clustersize > 0) o.clustersize = clustersize;
    MPI_Comm world = MPI_COMM_WORLD;
    int rc = dm_sc_run(&all, &o, &world);
    if (rc != DM_OK) {
        fprintf(stderr, "dm_sc_run: %s\n", dm_error_message());
        CU_FAIL("P-rank run failed");
        dm_sc_result_free(&one);
        return -1;
    }
    check_valid(&one, &o, n);
    check_valid(&all, &o, n);
    /* the counts of the report are every rank's, not this rank's */
    long g = all.stats.gain_calls, gsum = 0, f = all.stats.fl_rounds, fsum = 0;
    MPI_Allreduce(&g, &gsum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&f, &fsum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    CU_ASSERT_EQUAL(all.stats_all.gain_calls, gsum);
    CU_ASSERT_EQUAL(all.stats_all.fl_rounds, fsum);
    CU_ASSERT_EQUAL(one.stats_all.gain_calls, one.stats.gain_calls);
    /* every rank got the same final centres */
    double c0 = all.k > 0 ? all.centres[0] : 0, c0max, c0min;
    MPI_Allreduce(&c0, &c0max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&c0, &c0min, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    CU_ASSERT_EQUAL(c0max, c0min);
    /* ranks' shares cover the stream */
    long nl = all.n_local, nsum = 0;
    MPI_Allreduce(&nl, &nsum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    CU_ASSERT_EQUAL(nsum, n);
    double ratio = all.total_cost / one.total_cost;
    if (rank == 0)
        printf("\n  n=%ld chunk=%ld P=%d: k=%ld cost=%.6g (1 rank: k=%ld cost=%.6g) ratio %.4f\n", n,
               chunk, size, all.k, all.total_cost, one.k, one.total_cost, ratio);
    CU_ASSERT(ratio <= DM_SC_MPI_COST_BOUND);
    if (size == 1 && o.clustersize == 400) CU_ASSERT_EQUAL(all.total_cost, one.total_cost); /* same run */
    long kept = all.gave_up ? -1 : all.kept;
    dm_sc_result_free(&one);
    dm_sc_result_free(&all);
    return kept;
}

static void run_case(long n, long chunk, int dim, long kmin, long kmax)
{
    (void)run_case_cs(n, chunk, dim, kmin, kmax, 0);
}

static void test_mpi_small(void) { run_case(6000, 1000, 8, 5, 10); }
static void test_mpi_one_chunk_per_rank(void) { run_case(4099, 4099, 5, 4, 8); }

/* CLUSTERSIZE just large enough for one rank's centres (chunks per rank x KMAX): from 4 ranks on,
 * the union of two ranks (>= 2 x chunks x KMIN > CLUSTERSIZE) is re-clustered inside the tree. */
static void test_mpi_tree_recluster(void)
{
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const long n = 6000, chunk = 750, kmin = 6, kmax = 10;
    long per_rank = (n + size - 1) / size, chunks = (per_rank + chunk - 1) / chunk;
    long kept = run_case_cs(n, chunk, 8, kmin, kmax, chunks * kmax);
    /* without re-clustering rank 0 would hold >= 4 ranks x 2 chunks x KMIN = 48 centres; with it the
     * two halves hold at most KMAX each (-1: a local search gave up, nothing to conclude) */
    if (size >= 4 && kept >= 0) CU_ASSERT(kept <= 2 * kmax);
}

/* KMIN = KMAX = 1 gives one centre (ITER k ln k is 0 at k = 1: Rodinia's local search then makes
 * no gain call and keeps all of speedy's centres); fewer points in all than KMIN: every point is a
 * centre, which is fewer than asked for, so the run says it gave up, on every rank. */
static void test_mpi_k_edges(void)
{
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.kmin = 1;
    o.kmax = 1;
    o.dim = 8;
    o.n = 3000;
    o.chunksize = 500;
    o.backend = DM_SC_CPU;
    dm_sc_result r;
    CU_ASSERT_EQUAL_FATAL(dm_sc_run(&r, &o, NULL), DM_OK);
    CU_ASSERT_EQUAL(r.k, 1);
    CU_ASSERT_EQUAL(r.gave_up, 0);
    check_valid(&r, &o, o.n);
    dm_sc_result_free(&r);
    o.kmin = 10;
    o.kmax = 20;
    o.n = 6;
    CU_ASSERT_EQUAL_FATAL(dm_sc_run(&r, &o, NULL), DM_OK);
    CU_ASSERT_EQUAL(r.k, 6);
    CU_ASSERT_EQUAL(r.gave_up, 1);
    CU_ASSERT_EQUAL(r.total_cost, 0.0);
    dm_sc_result_free(&r);
    o.n = 15; /* within [KMIN, KMAX]: every point a centre, as asked */
    CU_ASSERT_EQUAL_FATAL(dm_sc_run(&r, &o, NULL), DM_OK);
    CU_ASSERT_EQUAL(r.k, 15);
    CU_ASSERT_EQUAL(r.gave_up, 0);
    dm_sc_result_free(&r);
}

/* CLUSTERSIZE too small for the centres kept: every rank fails cleanly (no hang) with the same
 * status, the ranks that overflowed say so and the others that another rank failed. */
static void test_mpi_clustersize_too_small(void)
{
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.kmin = 5;
    o.kmax = 10;
    o.dim = 4;
    o.n = 6000;
    o.chunksize = 300; /* >= 5 chunks per rank on up to 4 ranks, >= 5 centres each */
    o.clustersize = 10;
    o.backend = DM_SC_CPU;
    dm_sc_result r;
    int rc = dm_sc_run(&r, &o, NULL);
    CU_ASSERT_EQUAL(rc, DM_ERR_INVALID_ARG);
    int mine = !dm_error_is_remote(), any = 0;
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), mine ? "CLUSTERSIZE" : "another rank failed"));
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    CU_ASSERT_EQUAL(any, 1);
    dm_sc_result_free(&r);
}

/* The in-memory stream (the --vectors path): each rank holding exactly its share of the generator's
 * points in memory gives the generator run bit for bit (same split, same draws); ids that do not
 * continue the lower ranks' points fail on every rank, without a hang. */
static void test_mpi_points_equal_generator(void)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.kmin = 4;
    o.kmax = 9;
    o.dim = 6;
    o.n = 3001;
    o.chunksize = 500;
    o.clustersize = 400;
    o.backend = DM_SC_CPU;
    const long first = o.n * rank / size, last = o.n * (rank + 1) / size;
    dm_sc_points p;
    CU_ASSERT_EQUAL_FATAL(dm_sc_points_init(&p, last - first > 0 ? last - first : 1, o.dim), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_sc_stream_read(p.coord, &o, first, last - first), DM_OK);
    dm_sc_points_reset(&p, last - first);
    for (long i = 0; i < p.num; i++) p.id[i] = first + i;

    dm_sc_result gen, mem;
    CU_ASSERT_EQUAL_FATAL(dm_sc_run(&gen, &o, NULL), DM_OK);
    dm_sc_options om = o;
    om.n = 0;
    om.points = &p;
    CU_ASSERT_EQUAL_FATAL(dm_sc_run(&mem, &om, NULL), DM_OK);
    check_valid(&mem, &om, o.n);
    CU_ASSERT_EQUAL(mem.k, gen.k);
    CU_ASSERT_EQUAL(mem.first_local, gen.first_local);
    CU_ASSERT_EQUAL_FATAL(mem.n_local, gen.n_local);
    CU_ASSERT_EQUAL(mem.total_cost, gen.total_cost);
    if (mem.k == gen.k) {
        CU_ASSERT_EQUAL(memcmp(mem.centres, gen.centres, (size_t)gen.k * o.dim * sizeof(float)), 0);
        CU_ASSERT_EQUAL(memcmp(mem.centre_ids, gen.centre_ids, (size_t)gen.k * sizeof(long)), 0);
    }
    CU_ASSERT_EQUAL(memcmp(mem.labels, gen.labels, (size_t)gen.n_local * sizeof(int)), 0);
    CU_ASSERT_EQUAL(memcmp(mem.dist, gen.dist, (size_t)gen.n_local * sizeof(float)), 0);
    dm_sc_result_free(&gen);
    dm_sc_result_free(&mem);

    /* the last rank's ids start one too late (one rank: not at 0) */
    if (rank == size - 1)
        for (long i = 0; i < p.num; i++) p.id[i] = first + 1 + i;
    int rc = dm_sc_run(&mem, &om, NULL);
    CU_ASSERT_EQUAL(rc, DM_ERR_INVALID_ARG);
    if (rank == size - 1) CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "ids start at"));
    dm_sc_result_free(&mem);
    dm_sc_points_free(&p);
}

/* An input file that one rank cannot open (a node without the file system, a file replaced in
 * between): every rank fails with its status, that rank naming the file and the others that
 * another rank failed. The check's failure was returned on that rank alone, while the others went
 * on to the run's collectives (an MPI error or a hang). */
static void test_mpi_input_fails_on_one_rank(void)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char dir[256], path[300];
    CU_ASSERT_PTR_NOT_NULL_FATAL(dm_test_tmpdir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/pts.bin", dir);
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (int i = 0; i < 400 * 4; i++) {
        float v = (float)((i * 7919) % 1000) / 1000.0f;
        fwrite(&v, sizeof v, 1, f);
    }
    fclose(f);
    const char *missing = "/nonexistent/streamclust_one_rank.bin";
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.kmin = 2;
    o.kmax = 4;
    o.dim = 4;
    o.n = 0;
    o.chunksize = 100;
    o.clustersize = 100;
    o.input = rank == size - 1 ? missing : path;
    dm_sc_result r;
    int rc = dm_sc_run(&r, &o, NULL);
    CU_ASSERT_EQUAL(rc, DM_ERR_IO);
    if (rank == size - 1) CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), missing));
    if (rank != size - 1) CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "another rank failed"));
    int rcs[2] = {rc, -rc}, agree[2];
    MPI_Allreduce(rcs, agree, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    CU_ASSERT_EQUAL(agree[0], -agree[1]); /* the same status everywhere */
    /* and every rank can run again with the file */
    o.input = path;
    CU_ASSERT_EQUAL(dm_sc_run(&r, &o, NULL), DM_OK);
    CU_ASSERT(r.gave_up || (r.k >= 2 && r.k <= 4));
    dm_sc_result_free(&r);
    unlink(path);
    rmdir(dir);
}

/* test_mpi_alloc_failures' comparison: the run's k, cost, centres and labels against the
 * reference's */
static int sweep_differs(void *sweep)
{
    const sc_sweep *w = sweep;
    const dm_sc_result *r = &w->r, *r0 = &w->r0;
    return r->k != r0->k || r->total_cost != r0->total_cost || r->n_local != r0->n_local ||
           memcmp(r->centres, r0->centres, (size_t)r0->k * w->o.dim * sizeof(float)) != 0 ||
           memcmp(r->labels, r0->labels, (size_t)r0->n_local * sizeof(int)) != 0;
}

/* Every host allocation of a run failed in turn (each rank's k-th dm_malloc / dm_calloc /
 * dm_realloc: chunks, the tree's merges and re-clustering, rank 0's final clustering, the
 * labelling), first on every rank at once, then on one rank only (rank k mod P), whose partners
 * must learn of it: the run ends with the same status on every rank, DM_OK or the allocation's
 * DM_ERR_NOMEM, no rank crashes or waits forever, no rank keeps host memory, and the runs that
 * succeed, and a run afterwards, give the first run's result. CLUSTERSIZE as in mpi_tree_recluster,
 * so that 4 ranks re-cluster in the tree. */
static void test_mpi_alloc_failures(void)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    sc_sweep a;
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.kmin = 3;
    o.kmax = 6;
    o.dim = 6;
    o.n = 2400;
    o.chunksize = 300;
    long per_rank = (o.n + size - 1) / size, chunks = (per_rank + o.chunksize - 1) / o.chunksize;
    o.clustersize = chunks * o.kmax;
    o.backend = DM_SC_CPU;
    a.o = o;
    const MPI_Comm world = MPI_COMM_WORLD;
    dm_test_sweep s = {.run = sc_sweep_run, .differs = sweep_differs, .release = sc_sweep_release, .arg = &a,
                       .comm = &world};
    uint64_t n_max;
    int rc = dm_test_sweep_count(&s, &n_max);
    a.r0 = a.r;
    CU_ASSERT_EQUAL_FATAL(rc, DM_OK);
    CU_ASSERT_FATAL(n_max > 30);
    /* the first 40 one by one, then spread over the rest (every one while there are few); one rank
     * failing alone: every third on 4 ranks, which share this machine's cores (3 and 4 coprime:
     * the failing rank goes round) */
    const uint64_t first = 40, step = n_max <= 120 ? 1 : n_max / 40 + 1;
    const double t0 = MPI_Wtime();
    dm_test_sweep_stats st = {0};
    s.label = "pass 0";
    dm_test_sweep_run(&s, n_max + 1, first, step, &st);
    const int few = size > 2;
    s.who = DM_TEST_SWEEP_K_MOD;
    s.label = "pass 1";
    dm_test_sweep_run(&s, n_max + 1, few ? 0 : first, few ? 3 * step : step, &st);
    CU_ASSERT(st.failed > st.tried / 2);
    sc_sweep_check_after(&a); /* and nothing is left broken */
    if (rank == 0)
        printf("\n  %d ranks: %llu allocations on the busiest rank, %d failure points tried, %d failed the "
               "run (%.2f s)", size, (unsigned long long)n_max, st.tried, st.failed, MPI_Wtime() - t0);
}

static CU_TestInfo tests[] = {
    {"mpi_small", test_mpi_small},
    {"mpi_clustersize_too_small", test_mpi_clustersize_too_small},
    {"mpi_one_chunk_per_rank", test_mpi_one_chunk_per_rank},
    {"mpi_tree_recluster", test_mpi_tree_recluster},
    {"mpi_points_equal_generator", test_mpi_points_equal_generator},
    {"mpi_alloc_failures", test_mpi_alloc_failures},
    {"mpi_k_edges", test_mpi_k_edges},
    {"mpi_input_fails_on_one_rank", test_mpi_input_fails_on_one_rank},
    CU_TEST_INFO_NULL,
};
static CU_SuiteInfo suites[] = {{"streamclust_mpi", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

int main(int argc, char **argv) { return dm_test_run_mpi(argc, argv, suites); }
