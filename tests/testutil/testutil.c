/* Test helpers (tests/testutil/testutil.h). Reference: none. */
#include "testutil.h"

#include <CUnit/Basic.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/context.h"
#include "common/device.h"

int dm_test_run(CU_SuiteInfo *suites)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    if (CU_register_suites(suites) != CUE_SUCCESS) {
        fprintf(stderr, "CUnit: %s\n", CU_get_error_msg());
        CU_cleanup_registry();
        return 1;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    unsigned run = CU_get_number_of_tests_run();
    CU_cleanup_registry();
    return (failed || run == 0) ? 1 : 0;
}

int dm_test_run_mpi(int argc, char **argv, CU_SuiteInfo *suites)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    /* the threads docmine's context would give each rank (programs that test without a context,
     * such as streamclust's, would otherwise start a thread per core on every rank) */
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    dm_threads_set_default(node);
    MPI_Comm_free(&node);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int rc = dm_test_run(suites), any = 0;
    MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && any) fprintf(stderr, "a rank failed\n");
    MPI_Finalize();
    return any;
}

int dm_test_run_gpu(int argc, char **argv, CU_SuiteInfo *suites)
{
    if (dm_device_count() == 0) {
        printf("no usable GPU (or built without CUDA): skipping\n");
        return DM_TEST_SKIP;
    }
    return dm_test_run_mpi(argc, argv, suites);
}

const char *dm_test_source_dir(void)
{
    const char *s = getenv("DOCMINE_SOURCE_DIR");
    return s ? s : ".";
}

const char *dm_test_dataset(const char *rel, char *buf, size_t len)
{
    const char *env = getenv("DOCMINE_DATASETS");
    if (env) snprintf(buf, len, "%s/%s", env, rel);
    else snprintf(buf, len, "%s/../shared/datasets/%s", dm_test_source_dir(), rel);
    FILE *f = fopen(buf, "rb");
    if (!f) return NULL;
    fclose(f);
    return buf;
}

const char *dm_test_tmpdir(char *buf, size_t len)
{
    const char *t = getenv("TMPDIR");
    snprintf(buf, len, "%s/docmine-test-XXXXXX", t ? t : "/tmp");
    return mkdtemp(buf);
}

int dm_test_ranks_differ(int status, const void *comm)
{
    int mm[2] = {status, -status}, all[2] = {0, 0}; /* the lowest status and the highest, at once */
    MPI_Allreduce(mm, all, 2, MPI_INT, MPI_MIN, *(const MPI_Comm *)comm);
    return all[0] != -all[1];
}
