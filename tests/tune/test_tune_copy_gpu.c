/* GPU tests of the tuner: every compiled instance of "common.copy" and "common.copy_bytes" against
 * the CPU reference (memcpy) on seeded inputs of sizes that are not multiples of 32 or of the
 * block, with guard bytes; dm_copy_cuda on misaligned pointers; a real MSP tuning run (picks a
 * valid instance whose output matches the default's) and the database written by
 * dm_tune_and_store and read back by dm_tune_select; a broken instance rejected by the checks,
 * with the count of tuning inputs a search creates. Exits 77 (skip) without a device. */
#include <CUnit/Basic.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/status.h"
#include "common/tune/copy.h"
#include "common/tune/tune.h"
#include "common/tune/tune_db.h"
#include "common/tune/tune_gpu.h"

enum { GUARD = 4096 };

static void fill(unsigned char *p, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (unsigned char)(s >> 56);
    }
}

/* Runs inst (or dm_copy_cuda when inst == NULL) on bytes at the given offsets and compares with
 * memcpy, including untouched guard bytes around the destination. */
static int copy_matches(const dm_tune_instance *inst, size_t bytes, size_t src_off, size_t dst_off)
{
    size_t total = bytes + 2 * GUARD;
    unsigned char *hs = malloc(total), *hd = malloc(total), *ref = malloc(total);
    void *ds = NULL, *dd = NULL;
    int ok = hs && hd && ref && cudaMalloc(&ds, total) == cudaSuccess &&
             cudaMalloc(&dd, total) == cudaSuccess;
    if (ok) {
        fill(hs, total, bytes * 31 + 7);
        fill(ref, total, bytes * 17 + 3); /* destination's old content */
        ok = cudaMemcpy(ds, hs, total, cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaMemcpy(dd, ref, total, cudaMemcpyHostToDevice) == cudaSuccess;
    }
    if (ok) {
        unsigned char *dst = (unsigned char *)dd + GUARD + dst_off;
        const unsigned char *src = (const unsigned char *)ds + GUARD + src_off;
        int rc;
        if (inst) {
            dm_copy_args a = {dst, src};
            rc = inst->launch(&a, bytes, NULL);
        } else {
            rc = dm_copy_cuda(dst, src, bytes, NULL);
        }
        ok = rc == DM_OK && cudaDeviceSynchronize() == cudaSuccess &&
             cudaMemcpy(hd, dd, total, cudaMemcpyDeviceToHost) == cudaSuccess;
        if (rc != DM_OK) fprintf(stderr, "%s\n", dm_error_message());
    }
    if (ok) {
        size_t copied = bytes;
        if (inst && inst->policy.block && dm_copy_tune_kernel() &&
            inst >= dm_copy_tune_kernel()->instances &&
            inst < dm_copy_tune_kernel()->instances + dm_copy_tune_kernel()->n_instances)
            copied = bytes / 16 * 16; /* "common.copy" moves whole 16-byte items */
        memcpy(ref + GUARD + dst_off, hs + GUARD + src_off, copied);
        ok = memcmp(ref, hd, total) == 0;
    }
    cudaFree(ds);
    cudaFree(dd);
    free(hs);
    free(hd);
    free(ref);
    return ok;
}

static void test_every_copy_instance(void)
{
    const dm_tune_kernel *k = dm_copy_tune_kernel();
    CU_ASSERT_FATAL(k != NULL);
    CU_ASSERT(k->n_instances >= 16);
    const size_t sizes[] = {16, 16 * 33, 16 * (1237 * 1024 + 17), 16 * 100003 + 5};
    for (int i = 0; i < k->n_instances; i++)
        for (int s = 0; s < 4; s++) {
            int ok = copy_matches(&k->instances[i], sizes[s], 0, 0);
            if (!ok) {
                char buf[128];
                fprintf(stderr, "common.copy %s fails at %zu bytes\n",
                        dm_tune_policy_str(&k->instances[i].policy, buf, sizeof buf), sizes[s]);
            }
            CU_ASSERT(ok);
        }
    const dm_tune_kernel *kb = dm_copy_bytes_tune_kernel();
    CU_ASSERT_FATAL(kb != NULL);
    for (int i = 0; i < kb->n_instances; i++)
        for (size_t b = 1; b < 5000000; b = b * 7 + 3) CU_ASSERT(copy_matches(&kb->instances[i], b, 3, 1));
}

static void test_copy_cuda_alignment(void)
{
    dm_tune_set_mode(DM_TUNE_OFF);
    const size_t sizes[] = {1, 15, 16, 17, 1000, 1000003, 16 * 65537};
    for (int s = 0; s < 7; s++)
        for (size_t so = 0; so < 20; so += 5)
            for (size_t dof = 0; dof < 20; dof += 16)
                CU_ASSERT(copy_matches(NULL, sizes[s], so, dof));
    CU_ASSERT_EQUAL(dm_copy_cuda(NULL, NULL, 0, NULL), DM_OK);
    CU_ASSERT_EQUAL(dm_copy_cuda(NULL, NULL, 10, NULL), DM_ERR_INVALID_ARG);
}

static void test_tune_copy_msp(void)
{
    const dm_tune_kernel *k = dm_copy_tune_kernel();
    dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
    opt.repeats = 5;
    dm_tune_result r;
    size_t n = (size_t)64 << 20;
    CU_ASSERT_EQUAL_FATAL(dm_tune_run(&r, k, n, &opt), DM_OK);
    CU_ASSERT(r.chosen >= 0 && r.chosen < k->n_instances);
    CU_ASSERT_EQUAL(r.n_rejected, 0);
    CU_ASSERT(r.msp_n <= n && r.msp_n > 0);
    CU_ASSERT(r.tuned_ms > 0 && r.tuned_ms <= r.default_ms);
    CU_ASSERT(r.n_evaluated >= 1 && r.n_evaluated <= r.n_candidates);
    /* the chosen instance's output equals the default's (and memcpy's) at an odd size */
    CU_ASSERT(copy_matches(&k->instances[r.chosen], 16 * 777773 + 9, 0, 0));
    char buf[128];
    printf("\n  copy tuned: %s  default %.4f ms  tuned %.4f ms  msp %zu  evals %d  %.3f s\n",
           dm_tune_policy_str(&k->instances[r.chosen].policy, buf, sizeof buf), r.default_ms,
           r.tuned_ms, r.msp_n, r.n_evaluated, r.search_s);
    /* exhaustive comparison: the exhaustive best is at least as fast as anything it timed */
    opt.compare_exhaustive = 1;
    opt.mode = DM_TUNE_MODEL;
    CU_ASSERT_EQUAL_FATAL(dm_tune_run(&r, k, n, &opt), DM_OK);
    CU_ASSERT(r.exhaustive_best >= 0);
    CU_ASSERT(r.exhaustive_evaluated == r.n_valid);
    /* search times are the timing work of each search (inputs and checks excluded once): positive,
     * and an MSP search's parts add up to it */
    opt.mode = DM_TUNE_MSP;
    CU_ASSERT_EQUAL_FATAL(dm_tune_run(&r, k, n, &opt), DM_OK);
    printf("  msp %.4f s (curve %.4f, candidates %.4f, confirm %.4f), exhaustive %.4f s, checks %.4f s\n",
           r.search_s, r.curve_s, r.candidates_s, r.confirm_s, r.exhaustive_s, r.check_s);
    CU_ASSERT(r.search_s > 0.0);
    CU_ASSERT(r.exhaustive_s > 0.0);
    CU_ASSERT(r.curve_s > 0.0 && r.candidates_s >= 0.0 && r.confirm_s >= 0.0);
    CU_ASSERT(fabs(r.curve_s + r.candidates_s + r.confirm_s - r.search_s) < 1e-6);
}

static void test_store_and_select(void)
{
    char path[256];
    snprintf(path, sizeof path, "/tmp/dm_tune_gpu_%ld/tuning.tsv", (long)getpid());
    CU_ASSERT_EQUAL_FATAL(dm_tune_configure(DM_TUNE_MSP, path, 0), DM_OK);
    const dm_tune_kernel *k = dm_copy_tune_kernel();
    dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
    dm_tune_result r;
    size_t n = (size_t)16 << 20;
    CU_ASSERT_EQUAL_FATAL(dm_tune_and_store(&r, k, n, &opt), DM_OK);
    dm_tune_gpu gpu;
    CU_ASSERT_EQUAL_FATAL(dm_tune_gpu_current(&gpu), DM_OK);
    dm_tune_db db;
    dm_tune_db_init(&db);
    CU_ASSERT_EQUAL(dm_tune_db_load(&db, path), DM_OK);
    const dm_tune_db_row *row = dm_tune_db_find(&db, k->name, gpu.name, gpu.cc, dm_tune_workload_class(n));
    CU_ASSERT_FATAL(row != NULL);
    CU_ASSERT(memcmp(&row->policy, &k->instances[r.chosen].policy, sizeof row->policy) == 0);
    /* select reads the database: same class -> the stored choice, no new tuning */
    const dm_tune_instance *sel = dm_tune_select(k, n + 12345);
    CU_ASSERT_PTR_EQUAL(sel, &k->instances[r.chosen]);
    /* an unknown class in msp mode tunes on the fly and stores it */
    sel = dm_tune_select(k, (size_t)1 << 22);
    CU_ASSERT_PTR_NOT_NULL(sel);
    CU_ASSERT_EQUAL(dm_tune_db_load(&db, path), DM_OK);
    CU_ASSERT_PTR_NOT_NULL(dm_tune_db_find(&db, k->name, gpu.name, gpu.cc, 22));
    dm_tune_db_free(&db);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf /tmp/dm_tune_gpu_%ld", (long)getpid());
    CU_ASSERT_EQUAL(system(cmd), 0);
    dm_tune_configure(DM_TUNE_MSP, NULL, 0);
}

/* ---- a kernel with a broken instance: the checks' reference and the inputs they create ---- */

/* Its default is a real copy instance; the other "instance" launches nothing (the fastest of
 * all, and wrong: its destination keeps the fresh input's zeros). */
typedef struct fake_state {
    void *src, *dst;
    size_t n, cap;
} fake_state;
static int g_fake_created;

static int launch_nothing(const void *args, size_t n, void *stream)
{
    (void)args, (void)n, (void)stream;
    return DM_OK;
}

static int fake_create(void **state, size_t n, uint64_t seed)
{
    fake_state *f = calloc(1, sizeof *f);
    unsigned char *h = malloc(n);
    int ok = f && h && cudaMalloc(&f->src, n) == cudaSuccess && cudaMalloc(&f->dst, n) == cudaSuccess;
    if (ok) {
        fill(h, n, seed);
        ok = cudaMemcpy(f->src, h, n, cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaMemset(f->dst, 0, n) == cudaSuccess;
    }
    free(h);
    if (!ok) {
        if (f) cudaFree(f->src), cudaFree(f->dst);
        free(f);
        return DM_ERR(DM_ERR_CUDA, "fake kernel: create");
    }
    f->n = f->cap = n;
    g_fake_created++;
    *state = f;
    return DM_OK;
}

static int fake_run(void *state, const dm_tune_instance *inst, void *stream)
{
    fake_state *f = state;
    dm_copy_args a = {f->dst, f->src};
    return inst->launch(&a, f->n, stream);
}

static int fake_output(void *state, void *host, size_t *nbytes)
{
    fake_state *f = state;
    *nbytes = f->n;
    if (!host) return DM_OK;
    return cudaMemcpy(host, f->dst, f->n, cudaMemcpyDeviceToHost) == cudaSuccess ? DM_OK : DM_ERR_CUDA;
}

static int fake_resize(void *state, size_t n)
{
    fake_state *f = state;
    if (n > f->cap) return DM_ERR_INVALID_ARG;
    f->n = n;
    return DM_OK;
}

static void fake_destroy(void *state)
{
    fake_state *f = state;
    cudaFree(f->src);
    cudaFree(f->dst);
    free(f);
}

/* Exhaustive mode times both instances; the broken one is the fastest, so it is checked against
 * the default on a fresh input and rejected, although the timing input's destination already
 * holds the default's output. The reference comes from the timing input's first run (fresh),
 * so the search creates two inputs in all: the timing one and the candidate's. With
 * check_max_n below the size the reference needs an input of its own (three). */
static void test_check_reference_and_inputs(void)
{
    const dm_tune_kernel *copy = dm_copy_tune_kernel();
    dm_tune_instance inst[2] = {copy->instances[copy->default_instance], copy->instances[copy->default_instance]};
    inst[1].launch = launch_nothing;
    inst[1].func = NULL;
    inst[1].policy.block = inst[0].policy.block == 1024 ? 512 : inst[0].policy.block * 2;
    dm_tune_kernel k = {0};
    k.name = "test.fake_copy";
    k.work_unit = "bytes";
    k.instances = inst;
    k.n_instances = 2;
    k.default_instance = 0;
    k.bench_create = fake_create;
    k.bench_run = fake_run;
    k.bench_output = fake_output;
    k.bench_destroy = fake_destroy;
    k.bench_resize = fake_resize;
    k.work_per_item = 16;
    dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
    opt.mode = DM_TUNE_EXHAUSTIVE;
    opt.repeats = 3;
    const size_t n = (size_t)16 << 20;
    for (int cap = 0; cap < 2; cap++) {
        opt.check_max_n = cap ? n / 2 : 0;
        g_fake_created = 0;
        dm_tune_result r;
        CU_ASSERT_EQUAL_FATAL(dm_tune_run(&r, &k, n, &opt), DM_OK);
        CU_ASSERT_EQUAL(r.chosen, 0);
        CU_ASSERT_EQUAL(r.n_rejected, 1);
        CU_ASSERT_EQUAL(r.n_checks, 1);
        CU_ASSERT_EQUAL(r.n_inputs, g_fake_created);
        CU_ASSERT_EQUAL(r.n_inputs, cap ? 3 : 2);
        CU_ASSERT(r.inputs_s > 0.0);
    }
}

int main(void)
{
    dm_tune_gpu gpu;
    if (dm_tune_gpu_current(&gpu) != DM_OK) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    printf("device: %s (cc %d.%d, %d SMs)\n", gpu.name, gpu.cc / 10, gpu.cc % 10, gpu.limits.sms);
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("tune_copy_gpu", NULL, NULL);
    CU_add_test(s, "every_copy_instance", test_every_copy_instance);
    CU_add_test(s, "copy_cuda_alignment", test_copy_cuda_alignment);
    CU_add_test(s, "tune_copy_msp", test_tune_copy_msp);
    CU_add_test(s, "store_and_select", test_store_and_select);
    CU_add_test(s, "check_reference_and_inputs", test_check_reference_and_inputs);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures();
    CU_cleanup_registry();
    return fails ? 1 : 0;
}
