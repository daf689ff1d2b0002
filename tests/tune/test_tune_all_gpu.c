/* GPU test over every registered kernel (dm_tune_register_all, so every module's kernels as they
 * register): each compiled instance's output equals the default instance's on seeded inputs of
 * sizes that are not multiples of 32 or of any block size (exactly, or within the kernel's
 * float tolerance), the default gives the same output twice (so a kernel with one instance is
 * run and checked too), and an MSP tuning run picks a valid instance that passed that check.
 * Inputs whose host data comes from the tuning cache (common/tune/wl_cache.h) give the default the
 * same output as inputs built without it.
 * DOCMINE_TEST_KERNELS=PREFIX limits the tests to the kernels whose name starts with PREFIX
 * (a quick check of one module's kernels on the GPU machine; ctest runs them all).
 * Exits 77 (skip) without a device. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "common/tune/tune.h"
#include "common/tune/tune_gpu.h"
#include "common/tune/wl_cache.h"

static int has_bench(const dm_tune_kernel *k)
{
    return k->bench_create && k->bench_run && k->bench_output && k->bench_destroy;
}

static int selected(const dm_tune_kernel *k)
{
    const char *only = getenv("DOCMINE_TEST_KERNELS");
    return !only || strncmp(k->name, only, strlen(only)) == 0;
}

static void test_every_instance_matches_default(void)
{
    CU_ASSERT_EQUAL_FATAL(dm_tune_register_all(), DM_OK);
    CU_ASSERT(dm_tune_kernel_count() >= 1);
    for (int i = 0; i < dm_tune_kernel_count(); i++) {
        const dm_tune_kernel *k = dm_tune_kernel_at(i);
        if (!selected(k)) continue;
        if (!has_bench(k)) {
            printf("\n  %s: no tuning workload, default only", k->name);
            continue;
        }
        size_t big = k->bench_default_n < ((size_t)1 << 20) ? k->bench_default_n : (size_t)1 << 20;
        const size_t sizes[] = {1003, big + 37};
        for (int s = 0; s < 2; s++) {
            int bad[16], n_bad = -1;
            int rc = dm_tune_check_instances(&n_bad, bad, 16, k, sizes[s], 1234 + (uint64_t)s);
            if (rc != DM_OK) fprintf(stderr, "%s: %s\n", k->name, dm_error_message());
            CU_ASSERT_EQUAL(rc, DM_OK);
            CU_ASSERT_EQUAL(n_bad, 0);
            for (int b = 0; b < n_bad && b < 16; b++) {
                char buf[128];
                fprintf(stderr, "%s: instance %d (%s) differs from the default at n=%zu\n", k->name,
                        bad[b], dm_tune_policy_str(&k->instances[bad[b]].policy, buf, sizeof buf),
                        sizes[s]);
            }
        }
        if (k->n_instances == 1) printf("\n  %s: one instance, two runs agree", k->name);
        else printf("\n  %s: %d instances agree with the default", k->name, k->n_instances);
    }
}

/* The default instance's output on a fresh input of n units (malloc'ed), or NULL. */
static unsigned char *default_output(const dm_tune_kernel *k, size_t n, uint64_t seed, size_t *bytes)
{
    void *st = NULL;
    unsigned char *out = NULL;
    int rc = k->bench_create(&st, n, seed);
    if (rc == DM_OK) rc = k->bench_run(st, &k->instances[k->default_instance], NULL);
    if (rc == DM_OK) rc = k->bench_output(st, NULL, bytes);
    if (rc == DM_OK && !(out = malloc(*bytes ? *bytes : 1))) rc = DM_ERR_NOMEM;
    if (rc == DM_OK) rc = k->bench_output(st, out, bytes);
    if (rc != DM_OK) {
        fprintf(stderr, "%s at %zu: %s\n", k->name, n, dm_error_message());
        free(out);
        out = NULL;
    }
    if (st) k->bench_destroy(st);
    return out;
}

/* Every kernel's input built twice through the cache (the second from kept host data) gives the
 * default the output of an input built with nothing kept (budget 0, the uncached builds). A
 * workload that changed kept host data, or a builder that depended on anything but its key,
 * fails here. */
static void test_cached_inputs_equal_fresh(void)
{
    dm_wl_cache_stats s0, s1;
    dm_wl_cache_get_stats(&s0);
    for (int i = 0; i < dm_tune_kernel_count(); i++) {
        const dm_tune_kernel *k = dm_tune_kernel_at(i);
        if (!selected(k) || !has_bench(k)) continue;
        size_t n = (k->bench_default_n < ((size_t)1 << 16) ? k->bench_default_n : (size_t)1 << 16) + 37;
        size_t fresh_bytes = 0, b1 = 0, b2 = 0;
        size_t old = dm_wl_cache_set_budget(0);
        unsigned char *fresh = default_output(k, n, 77, &fresh_bytes);
        dm_wl_cache_set_budget(old);
        unsigned char *first = default_output(k, n, 77, &b1), *second = default_output(k, n, 77, &b2);
        CU_ASSERT_PTR_NOT_NULL(fresh);
        CU_ASSERT_PTR_NOT_NULL(first);
        CU_ASSERT_PTR_NOT_NULL(second);
        if (fresh && first && second) {
            int same = fresh_bytes == b1 && fresh_bytes == b2 && memcmp(fresh, first, b1) == 0 &&
                       memcmp(fresh, second, b2) == 0;
            if (!same) fprintf(stderr, "%s at %zu: a cached input differs from a fresh one\n", k->name, n);
            CU_ASSERT(same);
        }
        free(fresh);
        free(first);
        free(second);
        dm_wl_cache_clear();
    }
    dm_wl_cache_get_stats(&s1);
    printf("\n  tuning cache: %llu builds, %llu hits", (unsigned long long)(s1.builds - s0.builds),
           (unsigned long long)(s1.hits - s0.hits));
    if (!getenv("DOCMINE_TEST_KERNELS")) CU_ASSERT(s1.hits - s0.hits >= 5); /* flock, tfidf (3), preprocess (3) */
}

static void test_tuning_every_kernel(void)
{
    for (int i = 0; i < dm_tune_kernel_count(); i++) {
        const dm_tune_kernel *k = dm_tune_kernel_at(i);
        if (!selected(k) || !has_bench(k)) continue;
        dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
        opt.repeats = 3;
        size_t n = k->bench_default_n < ((size_t)1 << 22) ? k->bench_default_n : (size_t)1 << 22;
        dm_tune_result r;
        int rc = dm_tune_run(&r, k, n, &opt);
        if (rc != DM_OK) fprintf(stderr, "%s: %s\n", k->name, dm_error_message());
        CU_ASSERT_EQUAL_FATAL(rc, DM_OK);
        CU_ASSERT(r.chosen >= 0 && r.chosen < k->n_instances);
        CU_ASSERT_EQUAL(r.n_rejected, 0);
        CU_ASSERT(r.tuned_ms <= r.default_ms);
        CU_ASSERT(r.msp_n >= 1 && r.msp_n <= n);
        char buf[128];
        printf("\n  %s at %zu: %s, %.2fx, MSP %zu, %d evaluated", k->name, n,
               dm_tune_policy_str(&k->instances[r.chosen].policy, buf, sizeof buf),
               r.tuned_ms > 0 ? r.default_ms / r.tuned_ms : 0.0, r.msp_n, r.n_evaluated);
    }
}

int main(void)
{
    dm_tune_gpu gpu;
    if (dm_tune_gpu_current(&gpu) != DM_OK) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("tune_all_gpu", NULL, NULL);
    CU_add_test(s, "every_instance_matches_default", test_every_instance_matches_default);
    CU_add_test(s, "cached_inputs_equal_fresh", test_cached_inputs_equal_fresh);
    CU_add_test(s, "tuning_every_kernel", test_tuning_every_kernel);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures();
    CU_cleanup_registry();
    return fails ? 1 : 0;
}
