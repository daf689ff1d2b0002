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

#endif
