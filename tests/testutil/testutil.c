/* Test helpers (tests/testutil/testutil.h). Reference: none. */
#include "testutil.h"

#include <CUnit/Basic.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/context.h"
#include "common/device.h"
#include "common/status.h"

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

int dm_test_sweep_count(const dm_test_sweep *s, uint64_t *n)
{
    dm_alloc_fail_at(UINT64_MAX); /* count them */
    const int rc = s->run(s->arg);
    uint64_t mine = dm_alloc_count();
    dm_alloc_fail_at(0);
    int rank = 0;
    if (s->comm) MPI_Comm_rank(*(const MPI_Comm *)s->comm, &rank);
    if (rc != DM_OK && s->comm) fprintf(stderr, "rank %d: %s\n", rank, dm_error_message());
    else if (rc != DM_OK) fprintf(stderr, "%s\n", dm_error_message());
    *n = mine;
    if (s->comm) MPI_Allreduce(&mine, n, 1, MPI_UINT64_T, MPI_MAX, *(const MPI_Comm *)s->comm);
    return rc;
}

/* "rank R, LABEL, allocation K" (rank with a communicator, LABEL where given; "rank Q's
 * allocation K" where each rank fails alone in turn) */
static void sweep_where(char *b, size_t len, const dm_test_sweep *s, int rank, int q, uint64_t k)
{
    int at = 0;
    if (s->comm) at += snprintf(b + at, len - (size_t)at, "rank %d, ", rank);
    if (s->label) at += snprintf(b + at, len - (size_t)at, "%s, ", s->label);
    if (s->who == DM_TEST_SWEEP_EACH) at += snprintf(b + at, len - (size_t)at, "rank %d's ", q);
    snprintf(b + at, len - (size_t)at, "allocation %llu", (unsigned long long)k);
}

void dm_test_sweep_run(const dm_test_sweep *s, uint64_t last, uint64_t first, uint64_t step,
                       dm_test_sweep_stats *st)
{
    int rank = 0, size = 1;
    if (s->comm) {
        MPI_Comm_rank(*(const MPI_Comm *)s->comm, &rank);
        MPI_Comm_size(*(const MPI_Comm *)s->comm, &size);
    }
    const int kinds = s->kinds > 1 ? s->kinds : 1, who = s->comm ? s->who : DM_TEST_SWEEP_ALL;
    if (step == 0) step = 1;
    size_t held[DM_MEM_KINDS];
    for (int m = 0; m < kinds; m++) held[m] = dm_mem_current(m);
    dm_test_sweep_stats d = {0, 0, 0, 0, 0, 0};
    char where[200];
    for (int q = 0; q < (who == DM_TEST_SWEEP_EACH ? size : 1); q++)
        for (uint64_t k = 1, i = 0; k <= last; k += k < first ? 1 : step, i++) {
            const uint64_t r = (uint64_t)rank, p = (uint64_t)size;
            const int fails = who == DM_TEST_SWEEP_ALL || (who == DM_TEST_SWEEP_K_MOD && r == k % p) ||
                              (who == DM_TEST_SWEEP_TURN && r == i % p) || (who == DM_TEST_SWEEP_EACH && rank == q);
            dm_alloc_fail_at(fails ? k : 0);
            const int rc = s->run(s->arg);
            dm_alloc_fail_at(0);
            if (s->comm) d.disagreed += dm_test_ranks_differ(rc, s->comm);
            if (rc != DM_OK && rc != DM_ERR_NOMEM) {
                d.other++;
                sweep_where(where, sizeof where, s, rank, q, k);
                fprintf(stderr, "%s: %d %s\n", where, rc, dm_error_message());
            }
            if (rc == DM_OK && s->differs && s->differs(s->arg)) {
                d.differ++;
                sweep_where(where, sizeof where, s, rank, q, k);
                fprintf(stderr, "%s failed, the run succeeded with another result\n", where);
            }
            if (s->release) s->release(s->arg, rc);
            int left = 0;
            for (int m = 0; m < kinds; m++) {
                const size_t now = dm_mem_current(m);
                if (now == held[m]) continue;
                left = 1;
                sweep_where(where, sizeof where, s, rank, q, k);
                fprintf(stderr, "%s: %lld bytes left%s%s\n", where, (long long)now - (long long)held[m],
                        kinds > 1 ? " in " : "", kinds > 1 ? dm_mem_kind_name(m) : "");
            }
            d.leaked += left;
            d.tried++;
            d.failed += rc != DM_OK;
        }
    CU_ASSERT_EQUAL(d.disagreed, 0);
    CU_ASSERT_EQUAL(d.other, 0);
    CU_ASSERT_EQUAL(d.differ, 0);
    CU_ASSERT_EQUAL(d.leaked, 0);
    if (!st) return;
    st->tried += d.tried;
    st->failed += d.failed;
    st->other += d.other;
    st->differ += d.differ;
    st->leaked += d.leaked;
    st->disagreed += d.disagreed;
}

/* ---- out of device memory */

int dm_test_device_hog(void)
{
    if (dm_device_count() <= 0) return 0;
    dm_device_alloc_fail_from((size_t)2 << 20);
    return 1;
}

void dm_test_device_unhog(void) { dm_device_alloc_fail_from(0); }
