/* Test helpers: CUnit runner with an exit code ctest understands, MPI-aware variant, the skip
 * code for tests that need a GPU, and small utilities. Reference: none. */
#ifndef DM_TESTUTIL_H
#define DM_TESTUTIL_H

#include <CUnit/CUnit.h>
#include <stddef.h>
#include <stdint.h>

#define DM_TEST_SKIP 77 /* ctest SKIP_RETURN_CODE */

/* Runs the suites (verbose basic mode). Returns 0 when every test passed, 1 otherwise. */
int dm_test_run(CU_SuiteInfo *suites);
/* MPI tests: MPI_Init, run the suites on every rank, MPI_Finalize; fails when any rank failed. */
int dm_test_run_mpi(int argc, char **argv, CU_SuiteInfo *suites);
/* GPU tests: returns DM_TEST_SKIP (after printing why) when no GPU is usable, else runs. */
int dm_test_run_gpu(int argc, char **argv, CU_SuiteInfo *suites);

/* Root of the source tree (DOCMINE_SOURCE_DIR, set by ctest) and ../shared beside it. */
const char *dm_test_source_dir(void);
/* Path of a file under ../shared/datasets, or NULL when the datasets are not present. */
const char *dm_test_dataset(const char *rel, char *buf, size_t len);
/* 1 when the ranks of comm (an MPI_Comm) returned different statuses: one status on every rank is
 * what the allocation sweeps check after each run. Collective. */
int dm_test_ranks_differ(int status, const void *comm);
/* A fresh temporary directory (mkdtemp under $TMPDIR); the caller removes it. */
const char *dm_test_tmpdir(char *buf, size_t len);

/* ---- allocation-failure sweeps ------------------------------------------------------------
 * A sweep fails the host allocations of one piece of work in turn (dm_alloc_fail_at(k),
 * common/alloc.h): allocation k = 1, then 2, ... of a run fails (one by one while k < first, then
 * every step-th up to last). Every run must return DM_OK or DM_ERR_NOMEM (the allocation's error,
 * on every rank, also where a rank only learnt of it), the same status on every rank of comm,
 * leave the counted memory of every kind checked as it was before the sweep, and a run that
 * succeeds must give the reference result. Use: dm_test_sweep_count for the points, then
 * dm_test_sweep_run, once a pass. */
enum dm_test_sweep_who {
    DM_TEST_SWEEP_ALL = 0, /* every rank fails its k-th allocation (its own work's k-th) */
    DM_TEST_SWEEP_K_MOD,   /* rank k mod P alone, the others succeed */
    DM_TEST_SWEEP_TURN,    /* at the sweep's i-th point (0, 1, ...) rank i mod P alone: it goes
                            * round whatever the step (k mod P stays on one rank once the step is
                            * a multiple of P) */
    DM_TEST_SWEEP_EACH,    /* every point once for each rank alone in turn (rank 0's k, then rank 1's) */
};

typedef struct dm_test_sweep {
    /* one run of the work (the failure point already set); returns its status and keeps what it
     * made in arg */
    int (*run)(void *arg);
    /* after a run that succeeded: nonzero when its result is not the reference's (NULL: none) */
    int (*differs)(void *arg);
    /* after every run (rc: its status): frees what the run made and whatever the library keeps for
     * a next run, so that the counted memory can be compared (NULL: nothing to free) */
    void (*release)(void *arg, int rc);
    void *arg;
    const void *comm;         /* MPI_Comm * of the ranks that run together; NULL: this process */
    int who;                  /* enum dm_test_sweep_who (with comm) */
    int kinds;                /* memory kinds checked: DM_MEM_HOST's alone (0 or 1), or all (DM_MEM_KINDS) */
    const char *label;        /* named in the messages (NULL: none) */
} dm_test_sweep;

/* What sweeps did, added up: points tried, runs that failed, other statuses than DM_OK and
 * DM_ERR_NOMEM, successful runs whose result differed, runs that left memory, points at which
 * the ranks' statuses differed. */
typedef struct dm_test_sweep_stats {
    int tried, failed, other, differ, leaked, disagreed;
} dm_test_sweep_stats;

/* One run of s->run with every allocation counted (nothing fails); returns its status (printing
 * its error when not DM_OK) and sets *n to the allocations it made, with comm the most any rank
 * made (collective). */
int dm_test_sweep_count(const dm_test_sweep *s, uint64_t *n);
/* The sweep over the points k = 1 .. last, one by one while k < first, then every step-th (0
 * counts as 1). The counted memory is measured at its start (the caller frees first what a run's
 * release would free). other, differ, leaked and disagreed must be 0 for this sweep (CUnit
 * assertions; each point where one is not is printed to stderr); adds this sweep's counts to *st
 * (may be NULL). Collective with comm. */
void dm_test_sweep_run(const dm_test_sweep *s, uint64_t last, uint64_t first, uint64_t step,
                       dm_test_sweep_stats *st);

/* ---- out of device memory -----------------------------------------------------------------
 * The sweeps fail host allocations only. For the device's: after dm_test_device_hog every
 * dm_device_alloc of 2 MiB or more fails as a full device would (dm_device_alloc_fail_from,
 * common/alloc.h; smaller ones still succeed), in this process only, so that the GPU tests running
 * beside it keep their memory; returns 1, or 0 without a device. dm_test_device_unhog ends it. */
int dm_test_device_hog(void);
void dm_test_device_unhog(void);

#endif
