/* GPU tests of the sort primitives (skip without a GPU): CUB radix sorts of u32 and u64 pairs and
 * CUB segmented sorts against the CPU backend, and every compiled instance of the bitonic
 * small-segment sort (plus the tuner's choice and the dm_segsort_pairs_cuda switch) against the
 * CPU on rows with the length profile of TF-IDF vectors, repeated keys and sizes that are not
 * multiples of 32 or of any block size. Integer outputs must be identical. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "sorting/sorting.h"
#include "test_gpu_shim.h"
#include "testutil.h"
#include "common/rng.h"

static uint64_t rnd(uint64_t *s)
{
    return dm_splitmix64(s);
}

static void *dev(size_t n)
{
    void *p = NULL;
    CU_ASSERT_EQUAL_FATAL(dm_device_alloc(&p, n ? n : 1), DM_OK);
    return p;
}
static void up(void *d, const void *h, size_t n) { CU_ASSERT_EQUAL_FATAL(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice), cudaSuccess); }
static void down(void *h, const void *d, size_t n) { CU_ASSERT_EQUAL_FATAL(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost), cudaSuccess); }

static void radix_u32_case(size_t n, int b, int e, uint32_t mask)
{
    uint64_t s = n * 31 + (uint64_t)b;
    uint32_t *k = dm_malloc(4 * (n + 1)), *v = dm_malloc(4 * (n + 1)), *ck = dm_malloc(4 * (n + 1)),
             *cv = dm_malloc(4 * (n + 1)), *gk = dm_malloc(4 * (n + 1)), *gv = dm_malloc(4 * (n + 1));
    for (size_t i = 0; i < n; i++) {
        k[i] = (uint32_t)rnd(&s) & mask;
        v[i] = (uint32_t)i;
    }
    CU_ASSERT_EQUAL_FATAL(dm_sort_pairs_u32_cpu(NULL, NULL, ck, cv, k, v, n, b, e, NULL), DM_OK);
    uint32_t *dk = dev(4 * n), *dv = dev(4 * n), *dko = dev(4 * n), *dvo = dev(4 * n);
    up(dk, k, 4 * n);
    up(dv, v, 4 * n);
    size_t tb = 0;
    void *temp = NULL;
    CU_ASSERT_EQUAL_FATAL(dm_sort_pairs_u32_cuda(NULL, &tb, dko, dvo, dk, dv, n, b, e, NULL), DM_OK);
    temp = dev(tb);
    CU_ASSERT_EQUAL_FATAL(dm_sort_pairs_u32_cuda(temp, &tb, dko, dvo, dk, dv, n, b, e, NULL), DM_OK);
    down(gk, dko, 4 * n);
    down(gv, dvo, 4 * n);
    CU_ASSERT_EQUAL(memcmp(gk, ck, 4 * n), 0);
    CU_ASSERT_EQUAL(memcmp(gv, cv, 4 * n), 0);
    dm_device_free(temp);
    dm_device_free(dk);
    dm_device_free(dv);
    dm_device_free(dko);
    dm_device_free(dvo);
    dm_free(k);
    dm_free(v);
    dm_free(ck);
    dm_free(cv);
    dm_free(gk);
    dm_free(gv);
}

static void test_radix_u32(void)
{
    radix_u32_case(1000003, 0, 32, 0xffffffffu);
    radix_u32_case(1000003, 0, 32, 0xfffu); /* repeats: stability */
    radix_u32_case(333, 4, 21, 0xffffffffu);
    radix_u32_case(1, 0, 32, 0xffffffffu);
}

static void test_radix_u64(void)
{
    size_t n = 777777;
    uint64_t s = 3;
    uint64_t *k = dm_malloc(8 * n), *ck = dm_malloc(8 * n), *gk = dm_malloc(8 * n);
    uint32_t *v = dm_malloc(4 * n), *cv = dm_malloc(4 * n), *gv = dm_malloc(4 * n);
    for (size_t i = 0; i < n; i++) {
        k[i] = rnd(&s) & 0xffff0000ffffull;
        v[i] = (uint32_t)i;
    }
    CU_ASSERT_EQUAL_FATAL(dm_sort_pairs_u64_cpu(NULL, NULL, ck, cv, k, v, n, 0, 48, NULL), DM_OK);
    uint64_t *dk = dev(8 * n), *dko = dev(8 * n);
    uint32_t *dv = dev(4 * n), *dvo = dev(4 * n);
    up(dk, k, 8 * n);
    up(dv, v, 4 * n);
    size_t tb = 0;
    CU_ASSERT_EQUAL_FATAL(dm_sort_pairs_u64_cuda(NULL, &tb, dko, dvo, dk, dv, n, 0, 48, NULL), DM_OK);
    void *temp = dev(tb);
    CU_ASSERT_EQUAL_FATAL(dm_sort_pairs_u64_cuda(temp, &tb, dko, dvo, dk, dv, n, 0, 48, NULL), DM_OK);
    down(gk, dko, 8 * n);
    down(gv, dvo, 4 * n);
    CU_ASSERT_EQUAL(memcmp(gk, ck, 8 * n), 0);
    CU_ASSERT_EQUAL(memcmp(gv, cv, 4 * n), 0);
    dm_device_free(temp);
    dm_device_free(dk);
    dm_device_free(dko);
    dm_device_free(dv);
    dm_device_free(dvo);
    dm_free(k);
    dm_free(ck);
    dm_free(gk);
    dm_free(v);
    dm_free(cv);
    dm_free(gv);
}

/* Segmented input: TF-IDF-like row lengths, keys with repeats, values = positions. */
typedef struct seg_case {
    size_t n, n_seg;
    uint64_t *off;
    uint32_t *k, *ck;
    float *v, *cv;
    uint64_t *d_off;
    uint32_t *dk, *dko;
    float *dv, *dvo;
} seg_case;

static void seg_case_init(seg_case *c, size_t n, uint32_t key_range, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    c->n = n;
    c->off = dm_malloc(8 * (n + 1));
    dm_segsort_bench_lengths(c->off, n, seed, &c->n_seg);
    c->k = dm_malloc(4 * n);
    c->ck = dm_malloc(4 * n);
    c->v = dm_malloc(4 * n);
    c->cv = dm_malloc(4 * n);
    uint64_t s = seed * 7 + 1;
    for (size_t i = 0; i < n; i++) {
        c->k[i] = (uint32_t)(rnd(&s) % key_range);
        c->v[i] = (float)i;
    }
    CU_ASSERT_EQUAL_FATAL(dm_segsort_pairs_cpu(NULL, NULL, c->ck, c->cv, c->k, c->v, n, c->off, c->n_seg, NULL), DM_OK);
    c->d_off = dev(8 * (c->n_seg + 1));
    c->dk = dev(4 * n);
    c->dko = dev(4 * n);
    c->dv = dev(4 * n);
    c->dvo = dev(4 * n);
    up(c->d_off, c->off, 8 * (c->n_seg + 1));
    up(c->dk, c->k, 4 * n);
    up(c->dv, c->v, 4 * n);
}

static void seg_case_free(seg_case *c)
{
    dm_free(c->off);
    dm_free(c->k);
    dm_free(c->ck);
    dm_free(c->v);
    dm_free(c->cv);
    dm_device_free(c->d_off);
    dm_device_free(c->dk);
    dm_device_free(c->dko);
    dm_device_free(c->dv);
    dm_device_free(c->dvo);
}

/* Runs a float segmented sort through the two-call protocol and compares with the CPU. */
static int seg_check(seg_case *c, dm_segsort_pairs_fn *fn)
{
    cudaMemset(c->dko, 0xee, 4 * c->n);
    cudaMemset(c->dvo, 0xee, 4 * c->n);
    size_t tb = 0;
    if (fn(NULL, &tb, c->dko, c->dvo, c->dk, c->dv, c->n, c->d_off, c->n_seg, NULL) != DM_OK) return 0;
    void *temp = dev(tb);
    int rc = fn(temp, &tb, c->dko, c->dvo, c->dk, c->dv, c->n, c->d_off, c->n_seg, NULL);
    cudaDeviceSynchronize();
    dm_device_free(temp);
    if (rc != DM_OK) return 0;
    uint32_t *gk = dm_malloc(4 * c->n);
    float *gv = dm_malloc(4 * c->n);
    down(gk, c->dko, 4 * c->n);
    down(gv, c->dvo, 4 * c->n);
    int same = memcmp(gk, c->ck, 4 * c->n) == 0 && memcmp(gv, c->cv, 4 * c->n) == 0;
    dm_free(gk);
    dm_free(gv);
    return same;
}

static void test_segsort_cub(void)
{
    seg_case c;
    seg_case_init(&c, 1000001, 1u << 20, 5);
    CU_ASSERT_TRUE(seg_check(&c, dm_segsort_cub_cuda));
    dm_segsort_use_bitonic(0);
    CU_ASSERT_TRUE(seg_check(&c, dm_segsort_pairs_cuda));
    seg_case_free(&c);
    /* u32 values */
    seg_case_init(&c, 100003, 50, 6);
    uint32_t *vu = dm_malloc(4 * c.n), *cvu = dm_malloc(4 * c.n), *ck = dm_malloc(4 * c.n), *gk = dm_malloc(4 * c.n),
             *gv = dm_malloc(4 * c.n);
    for (size_t i = 0; i < c.n; i++) vu[i] = (uint32_t)i;
    CU_ASSERT_EQUAL_FATAL(dm_segsort_pairs_u32_cpu(NULL, NULL, ck, cvu, c.k, vu, c.n, c.off, c.n_seg, NULL), DM_OK);
    uint32_t *dvu = dev(4 * c.n), *dvuo = dev(4 * c.n);
    up(dvu, vu, 4 * c.n);
    /* CUB alone, then the bitonic hybrid (tfidf's row sort; segments up to 3000 also reach CUB) */
    for (int bitonic = 0; bitonic <= 1; bitonic++) {
        dm_segsort_use_bitonic(bitonic);
        CU_ASSERT_EQUAL(dm_segsort_uses_bitonic(), bitonic);
        cudaMemset(c.dko, 0xee, 4 * c.n);
        cudaMemset(dvuo, 0xee, 4 * c.n);
        size_t tb = 0;
        CU_ASSERT_EQUAL_FATAL(dm_segsort_pairs_u32_cuda(NULL, &tb, c.dko, dvuo, c.dk, dvu, c.n, c.d_off, c.n_seg, NULL), DM_OK);
        void *temp = dev(tb);
        CU_ASSERT_EQUAL_FATAL(dm_segsort_pairs_u32_cuda(temp, &tb, c.dko, dvuo, c.dk, dvu, c.n, c.d_off, c.n_seg, NULL), DM_OK);
        down(gk, c.dko, 4 * c.n);
        down(gv, dvuo, 4 * c.n);
        CU_ASSERT_EQUAL(memcmp(gk, ck, 4 * c.n), 0);
        CU_ASSERT_EQUAL(memcmp(gv, cvu, 4 * c.n), 0);
        dm_device_free(temp);
    }
    dm_segsort_use_bitonic(0);
    dm_device_free(dvu);
    dm_device_free(dvuo);
    dm_free(vu);
    dm_free(cvu);
    dm_free(ck);
    dm_free(gk);
    dm_free(gv);
    seg_case_free(&c);
}

static void test_bitonic_every_instance(void)
{
    seg_case a, b;
    seg_case_init(&a, 300007, 1u << 20, 7); /* distinct-ish keys */
    seg_case_init(&b, 100019, 13, 8);       /* heavy repeats: the network must be stable */
    int n = dm_segsort_bitonic_instances();
    CU_ASSERT_TRUE(n >= 27);
    for (int i = 0; i < n; i++) {
        char name[128];
        CU_ASSERT_EQUAL_FATAL(dm_segsort_bitonic_force_instance(i), DM_OK);
        int ok = seg_check(&a, dm_segsort_bitonic_cuda) && seg_check(&b, dm_segsort_bitonic_cuda);
        if (!ok) printf("\n  bitonic instance %d (%s) differs from the CPU\n", i, dm_segsort_bitonic_instance_name(i, name, sizeof name));
        CU_ASSERT_TRUE(ok);
    }
    CU_ASSERT_EQUAL(dm_segsort_bitonic_force_instance(n), DM_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL_FATAL(dm_segsort_bitonic_force_instance(-1), DM_OK);
    CU_ASSERT_TRUE(seg_check(&a, dm_segsort_bitonic_cuda));
    dm_segsort_use_bitonic(1);
    CU_ASSERT_TRUE(seg_check(&b, dm_segsort_pairs_cuda));
    dm_segsort_use_bitonic(0);
    seg_case_free(&a);
    seg_case_free(&b);
}

/* Segments at every bitonic capacity's edges (0, 1, 2, 3, cap - 1, cap, cap + 1 items, then
 * lengths only CUB takes), keys with repeats and the largest key 0xffffffff (the value of the
 * network's padding records), through every instance, the tuner's choice, CUB alone and the
 * dm_segsort_pairs_cuda switch; then no segments and no items. Coverage of the edges the
 * TF-IDF-like profile reaches only by chance. */
static void test_segment_edges(void)
{
    static const uint64_t base[] = {0, 1, 2, 3, 5000, 2049, 17, 0};
    uint64_t len[64];
    size_t n_seg = 0;
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++) len[n_seg++] = base[i];
    for (uint64_t cap = 128; cap <= 2048; cap *= 2) {
        len[n_seg++] = cap - 1;
        len[n_seg++] = cap;
        len[n_seg++] = 0;
        len[n_seg++] = cap + 1;
    }
    seg_case c;
    memset(&c, 0, sizeof c);
    c.n_seg = n_seg;
    c.off = dm_malloc(8 * (n_seg + 1));
    c.off[0] = 0;
    for (size_t i = 0; i < n_seg; i++) c.off[i + 1] = c.off[i] + len[i];
    c.n = (size_t)c.off[n_seg];
    c.k = dm_malloc(4 * c.n);
    c.ck = dm_malloc(4 * c.n);
    c.v = dm_malloc(4 * c.n);
    c.cv = dm_malloc(4 * c.n);
    uint64_t s = 99;
    for (size_t i = 0; i < c.n; i++) {
        uint64_t r = rnd(&s);
        c.k[i] = (r & 3) == 0 ? 0xffffffffu : (uint32_t)(r >> 32) % 50;
        c.v[i] = (float)i;
    }
    CU_ASSERT_EQUAL_FATAL(dm_segsort_pairs_cpu(NULL, NULL, c.ck, c.cv, c.k, c.v, c.n, c.off, c.n_seg, NULL), DM_OK);
    c.d_off = dev(8 * (n_seg + 1));
    c.dk = dev(4 * c.n);
    c.dko = dev(4 * c.n);
    c.dv = dev(4 * c.n);
    c.dvo = dev(4 * c.n);
    up(c.d_off, c.off, 8 * (n_seg + 1));
    up(c.dk, c.k, 4 * c.n);
    up(c.dv, c.v, 4 * c.n);
    int n_inst = dm_segsort_bitonic_instances();
    for (int i = -1; i < n_inst; i++) {
        char name[128];
        CU_ASSERT_EQUAL_FATAL(dm_segsort_bitonic_force_instance(i), DM_OK);
        int ok = seg_check(&c, dm_segsort_bitonic_cuda);
        if (!ok) printf("\n  bitonic instance %d (%s): edge lengths differ from the CPU\n", i, dm_segsort_bitonic_instance_name(i, name, sizeof name));
        CU_ASSERT_TRUE(ok);
    }
    CU_ASSERT_EQUAL_FATAL(dm_segsort_bitonic_force_instance(-1), DM_OK);
    CU_ASSERT_TRUE(seg_check(&c, dm_segsort_cub_cuda));
    for (int bitonic = 0; bitonic <= 1; bitonic++) {
        dm_segsort_use_bitonic(bitonic);
        CU_ASSERT_TRUE(seg_check(&c, dm_segsort_pairs_cuda));
    }
    dm_segsort_use_bitonic(0);
    /* no segments: DM_OK and nothing written; no items (every segment empty): DM_OK */
    dm_segsort_pairs_fn *fns[] = {dm_segsort_bitonic_cuda, dm_segsort_cub_cuda};
    uint32_t *gk = dm_malloc(4 * c.n);
    for (int f = 0; f < 2; f++) {
        cudaMemset(c.dko, 0xee, 4 * c.n);
        size_t tb = 0;
        CU_ASSERT_EQUAL_FATAL(fns[f](NULL, &tb, c.dko, c.dvo, c.dk, c.dv, c.n, c.d_off, 0, NULL), DM_OK);
        void *temp = dev(tb);
        CU_ASSERT_EQUAL(fns[f](temp, &tb, c.dko, c.dvo, c.dk, c.dv, c.n, c.d_off, 0, NULL), DM_OK);
        CU_ASSERT_EQUAL(cudaDeviceSynchronize(), cudaSuccess);
        dm_device_free(temp);
        down(gk, c.dko, 4 * c.n);
        int untouched = 1;
        for (size_t i = 0; i < c.n && untouched; i++) untouched = gk[i] == 0xeeeeeeeeu;
        CU_ASSERT_TRUE(untouched);
        tb = 0;
        CU_ASSERT_EQUAL_FATAL(fns[f](NULL, &tb, c.dko, c.dvo, c.dk, c.dv, 0, c.d_off, 1, NULL), DM_OK);
        temp = dev(tb);
        CU_ASSERT_EQUAL(fns[f](temp, &tb, c.dko, c.dvo, c.dk, c.dv, 0, c.d_off, 1, NULL), DM_OK); /* off[0..1] = 0, 0 */
        CU_ASSERT_EQUAL(cudaDeviceSynchronize(), cudaSuccess);
        dm_device_free(temp);
    }
    dm_free(gk);
    seg_case_free(&c);
}

/* The second call with a NULL key, value or offset pointer is DM_ERR_INVALID_ARG before anything
 * is launched. Before the fix it launched CUB or the bitonic kernel on NULL: DM_OK from the call,
 * then an illegal address that ends the process's CUDA context (the sort at the end fails too). */
static void test_null_pointers(void)
{
    size_t n = 1000;
    uint64_t off_h[3] = {0, 300, 1000};
    uint32_t *dk = dev(4 * n), *dko = dev(4 * n), *dv = dev(4 * n), *dvo = dev(4 * n);
    uint64_t *dk64 = dev(8 * n), *dko64 = dev(8 * n), *doff = dev(8 * 3);
    up(doff, off_h, sizeof off_h);
    CU_ASSERT_EQUAL_FATAL(cudaMemset(dk, 0, 4 * n), cudaSuccess);
    CU_ASSERT_EQUAL_FATAL(cudaMemset(dv, 0, 4 * n), cudaSuccess);
    CU_ASSERT_EQUAL_FATAL(cudaMemset(dk64, 0, 8 * n), cudaSuccess);
    size_t tb = 0, t;
    CU_ASSERT_EQUAL_FATAL(dm_sort_pairs_u64_cuda(NULL, &tb, dko64, dvo, dk64, dv, n, 0, 64, NULL), DM_OK);
    t = 0;
    CU_ASSERT_EQUAL_FATAL(dm_sort_pairs_u32_cuda(NULL, &t, dko, dvo, dk, dv, n, 0, 32, NULL), DM_OK);
    if (t > tb) tb = t;
    t = 0;
    CU_ASSERT_EQUAL_FATAL(dm_segsort_cub_cuda(NULL, &t, dko, (float *)dvo, dk, (const float *)dv, n, doff, 2, NULL), DM_OK);
    if (t > tb) tb = t;
    t = 0;
    CU_ASSERT_EQUAL_FATAL(dm_segsort_bitonic_cuda(NULL, &t, dko, (float *)dvo, dk, (const float *)dv, n, doff, 2, NULL), DM_OK);
    if (t > tb) tb = t;
    void *temp = dev(tb);
    t = tb;
    CU_ASSERT_EQUAL(dm_sort_pairs_u32_cuda(temp, &t, dko, dvo, NULL, dv, n, 0, 32, NULL), DM_ERR_INVALID_ARG);
    t = tb;
    CU_ASSERT_EQUAL(dm_sort_pairs_u32_cuda(temp, &t, NULL, dvo, dk, dv, n, 0, 32, NULL), DM_ERR_INVALID_ARG);
    t = tb;
    CU_ASSERT_EQUAL(dm_sort_pairs_u32_cuda(temp, &t, dko, NULL, dk, dv, n, 0, 32, NULL), DM_ERR_INVALID_ARG);
    t = tb;
    CU_ASSERT_EQUAL(dm_sort_pairs_u64_cuda(temp, &t, dko64, dvo, dk64, NULL, n, 0, 64, NULL), DM_ERR_INVALID_ARG);
    for (int bitonic = 0; bitonic <= 1; bitonic++) {
        dm_segsort_use_bitonic(bitonic);
        t = tb;
        CU_ASSERT_EQUAL(dm_segsort_pairs_cuda(temp, &t, dko, (float *)dvo, NULL, (const float *)dv, n, doff, 2, NULL),
                        DM_ERR_INVALID_ARG);
        t = tb;
        CU_ASSERT_EQUAL(dm_segsort_pairs_cuda(temp, &t, dko, (float *)dvo, dk, NULL, n, doff, 2, NULL), DM_ERR_INVALID_ARG);
        t = tb;
        CU_ASSERT_EQUAL(dm_segsort_pairs_cuda(temp, &t, dko, (float *)dvo, dk, (const float *)dv, n, NULL, 2, NULL),
                        DM_ERR_INVALID_ARG);
        t = tb;
        CU_ASSERT_EQUAL(dm_segsort_pairs_u32_cuda(temp, &t, dko, NULL, dk, dv, n, doff, 2, NULL), DM_ERR_INVALID_ARG);
        t = tb;
        CU_ASSERT_EQUAL(dm_segsort_pairs_u32_cuda(temp, &t, dko, dvo, dk, dv, n, NULL, 2, NULL), DM_ERR_INVALID_ARG);
    }
    dm_segsort_use_bitonic(0);
    t = tb;
    CU_ASSERT_EQUAL(dm_segsort_bitonic_cuda(temp, &t, NULL, (float *)dvo, dk, (const float *)dv, n, doff, 2, NULL),
                    DM_ERR_INVALID_ARG);
    /* nothing was launched: no error pending, and the device still sorts */
    CU_ASSERT_EQUAL(cudaDeviceSynchronize(), cudaSuccess);
    dm_device_free(temp);
    dm_device_free(dk);
    dm_device_free(dko);
    dm_device_free(dv);
    dm_device_free(dvo);
    dm_device_free(dk64);
    dm_device_free(dko64);
    dm_device_free(doff);
    radix_u32_case(4099, 0, 32, 0xffffffffu);
}

int main(int argc, char **argv)
{
    CU_TestInfo tests[] = {{"radix_u32", test_radix_u32},
                           {"radix_u64", test_radix_u64},
                           {"segsort_cub", test_segsort_cub},
                           {"bitonic_every_instance", test_bitonic_every_instance},
                           {"segment_edges", test_segment_edges},
                           {"null_pointers", test_null_pointers}, /* last: without its fix it ends the context */
                           CU_TEST_INFO_NULL};
    CU_SuiteInfo suites[] = {{"sorting_gpu", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};
    return dm_test_run_gpu(argc, argv, suites);
}
