/* MPI tests of streamclust (run on 1, 2 and 4 ranks, CPU backend): the distributed run gives a
 * valid clustering (kmin <= k <= kmax unless the documented give-up, labels in range, weights of
 * the final centres adding up to the number of points) whose cost is within a stated bound of the
 * single-rank cost on the same points. Reference: the 1-rank run (MPI_COMM_SELF) of the same
 * options, computed on every rank. */
#include <CUnit/CUnit.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "common/status.h"
#include "streamclust/streamclust.h"
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

static void run_case(long n, long chunk, int dim, long kmin, long kmax)
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
    CU_ASSERT_EQUAL_FATAL(rc1, DM_OK);
    MPI_Comm world = MPI_COMM_WORLD;
    int rc = dm_sc_run(&all, &o, &world);
    if (rc != DM_OK) fprintf(stderr, "dm_sc_run: %s\n", dm_error_message());
    CU_ASSERT_EQUAL_FATAL(rc, DM_OK);
    check_valid(&one, &o, n);
    check_valid(&all, &o, n);
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
    if (size == 1) CU_ASSERT_EQUAL(all.total_cost, one.total_cost); /* same run */
    dm_sc_result_free(&one);
    dm_sc_result_free(&all);
}

static void test_mpi_small(void) { run_case(6000, 1000, 8, 5, 10); }
static void test_mpi_one_chunk_per_rank(void) { run_case(4099, 4099, 5, 4, 8); }

static CU_TestInfo tests[] = {
    {"mpi_small", test_mpi_small},
    {"mpi_one_chunk_per_rank", test_mpi_one_chunk_per_rank},
    CU_TEST_INFO_NULL,
};
static CU_SuiteInfo suites[] = {{"streamclust_mpi", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

int main(int argc, char **argv) { return dm_test_run_mpi(argc, argv, suites); }
