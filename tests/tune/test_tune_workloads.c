/* Every registered kernel has a tuning workload (no GPU needed): the four bench hooks, a target
 * size and a valid tolerance, so that bench_tune measures it and test_tune_all_gpu runs every one
 * of its instances against the default. A kernel registered without a workload runs its default
 * only and would never be tuned, tested over its instances or benchmarked: this test fails for it
 * and names it. (In a CPU-only build no module registers kernels and the test has nothing to
 * check.) */
#include <CUnit/Basic.h>
#include <stdio.h>

#include "common/status.h"
#include "common/tune/tune.h"

static void test_every_kernel_has_a_workload(void)
{
    CU_ASSERT_EQUAL_FATAL(dm_tune_register_all(), DM_OK);
    int n = dm_tune_kernel_count(), missing = 0;
    for (int i = 0; i < n; i++) {
        const dm_tune_kernel *k = dm_tune_kernel_at(i);
        int hooks = k->bench_create && k->bench_run && k->bench_output && k->bench_destroy;
        int ok = hooks && k->bench_default_n > 0 && k->tolerance >= 0.0 && k->n_instances >= 1 &&
                 k->default_instance >= 0 && k->default_instance < k->n_instances;
        if (!ok) {
            fprintf(stderr, "\n  %s: %s", k->name,
                    !hooks ? "no tuning workload (bench_create/run/output/destroy)"
                           : "workload without a target size or with a bad tolerance/default");
            missing++;
        }
    }
    printf("\n  %d registered kernels, %d without a complete tuning workload", n, missing);
    CU_ASSERT_EQUAL(missing, 0);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("tune_workloads", NULL, NULL);
    CU_add_test(s, "every_kernel_has_a_workload", test_every_kernel_has_a_workload);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures();
    CU_cleanup_registry();
    return fails ? 1 : 0;
}
