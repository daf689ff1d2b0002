/* Unit tests of the CPU sort primitives (the oracle of the CUDA backend): radix sort of u32 and
 * u64 pairs against a stable comparison sort, bit ranges, segmented sorts with empty and single
 * segments and repeated keys (stability), the scratch-size query, and invalid arguments. */
#include <CUnit/CUnit.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "sorting/sorting.h"
#include "testutil.h"
#include "common/rng.h"

static uint64_t rnd(uint64_t *s)
{
    return dm_splitmix64(s);
}

typedef struct kv {
    uint64_t key; /* the compared bits only */
    uint64_t full;
    uint32_t val;
} kv;

static int cmp_kv(const void *a, const void *b)
{
    const kv *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->val > y->val) - (x->val < y->val); /* values are input positions: stable */
}

static uint64_t bits(uint64_t k, int b, int e) { return e - b >= 64 ? k : (k >> b) & ((1ull << (e - b)) - 1); }

static void check_u32(size_t n, int b, int e, uint32_t key_mask, uint64_t seed)
{
    uint64_t s = seed;
    uint32_t *k = dm_malloc(4 * (n + 1)), *v = dm_malloc(4 * (n + 1)), *ko = dm_malloc(4 * (n + 1)),
             *vo = dm_malloc(4 * (n + 1));
    kv *ref = dm_malloc(sizeof(kv) * (n + 1));
    for (size_t i = 0; i < n; i++) {
        k[i] = (uint32_t)rnd(&s) & key_mask;
        v[i] = (uint32_t)i;
        ref[i] = (kv){bits(k[i], b, e), k[i], (uint32_t)i};
    }
    qsort(ref, n, sizeof *ref, cmp_kv);
    size_t tb = 123;
    CU_ASSERT_EQUAL(dm_sort_pairs_u32_cpu(NULL, &tb, ko, vo, k, v, n, b, e, NULL), DM_OK);
    CU_ASSERT_EQUAL(tb, 0);
    char scratch[1];
    CU_ASSERT_EQUAL_FATAL(dm_sort_pairs_u32_cpu(scratch, &tb, ko, vo, k, v, n, b, e, NULL), DM_OK);
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) ok = ko[i] == (uint32_t)ref[i].full && vo[i] == ref[i].val;
    CU_ASSERT_TRUE(ok);
    /* inputs are not modified */
    s = seed;
    for (size_t i = 0; i < n && ok; i++) ok = k[i] == ((uint32_t)rnd(&s) & key_mask) && v[i] == i;
    CU_ASSERT_TRUE(ok);
    dm_free(k);
    dm_free(v);
    dm_free(ko);
    dm_free(vo);
    dm_free(ref);
}

static void test_radix_u32(void)
{
    check_u32(100003, 0, 32, 0xffffffffu, 1);
    check_u32(100003, 0, 32, 0x3ffu, 2);   /* many repeats: stability */
    check_u32(4099, 8, 20, 0xffffffffu, 3); /* a bit range: other bits ignored, order kept */
    check_u32(77, 0, 5, 0xffffffffu, 4);
    check_u32(0, 0, 32, 0xffffffffu, 5);
    check_u32(1, 0, 32, 0xffffffffu, 6);
    check_u32(1000, 3, 3, 0xffffffffu, 7); /* empty range: unchanged */
}

static void test_radix_u64(void)
{
    for (int t = 0; t < 3; t++) {
        size_t n = t == 0 ? 65537 : t == 1 ? 999 : 31;
        int b = t == 2 ? 13 : 0, e = t == 1 ? 40 : 64;
        uint64_t s = 9 + (uint64_t)t;
        uint64_t *k = dm_malloc(8 * n), *ko = dm_malloc(8 * n);
        uint32_t *v = dm_malloc(4 * n), *vo = dm_malloc(4 * n);
        kv *ref = dm_malloc(sizeof(kv) * n);
        for (size_t i = 0; i < n; i++) {
            k[i] = rnd(&s) & (t == 1 ? 0xff000000ffull : ~0ull);
            v[i] = (uint32_t)i;
            ref[i] = (kv){bits(k[i], b, e), k[i], (uint32_t)i};
        }
        qsort(ref, n, sizeof *ref, cmp_kv);
        CU_ASSERT_EQUAL_FATAL(dm_sort_pairs_u64_cpu(NULL, NULL, ko, vo, k, v, n, b, e, NULL), DM_OK);
        int ok = 1;
        for (size_t i = 0; i < n && ok; i++) ok = ko[i] == ref[i].full && vo[i] == ref[i].val;
        CU_ASSERT_TRUE(ok);
        dm_free(k);
        dm_free(ko);
        dm_free(v);
        dm_free(vo);
        dm_free(ref);
    }
}

static void test_segsort(void)
{
    size_t n = 200003;
    uint64_t *off = dm_malloc(8 * (n + 1));
    size_t n_seg;
    dm_segsort_bench_lengths(off, n, 11, &n_seg);
    CU_ASSERT_EQUAL(off[n_seg], n);
    /* add empty segments at a few places by repeating offsets */
    uint64_t *off2 = dm_malloc(8 * (n_seg + 10));
    size_t m = 0;
    for (size_t i = 0; i <= n_seg; i++) {
        off2[m++] = off[i];
        if (i % 1000 == 7 && i < n_seg) off2[m++] = off[i];
    }
    size_t segs = m - 1;
    uint64_t s = 12;
    uint32_t *k = dm_malloc(4 * n), *ko = dm_malloc(4 * n), *vu = dm_malloc(4 * n), *vuo = dm_malloc(4 * n);
    float *v = dm_malloc(4 * n), *vo = dm_malloc(4 * n);
    for (size_t i = 0; i < n; i++) {
        k[i] = (uint32_t)(rnd(&s) % 97); /* repeats within segments */
        v[i] = (float)i;
        vu[i] = (uint32_t)i;
    }
    size_t tb = 5;
    CU_ASSERT_EQUAL(dm_segsort_pairs_cpu(NULL, &tb, ko, vo, k, v, n, off2, segs, NULL), DM_OK);
    CU_ASSERT_EQUAL(tb, 0);
    CU_ASSERT_EQUAL_FATAL(dm_segsort_pairs_cpu(NULL, NULL, ko, vo, k, v, n, off2, segs, NULL), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_segsort_pairs_u32_cpu(NULL, NULL, ko, vuo, k, vu, n, off2, segs, NULL), DM_OK);
    int ok = 1;
    for (size_t g = 0; g < segs && ok; g++)
        for (uint64_t i = off2[g]; i < off2[g + 1] && ok; i++) {
            /* within the segment, non-decreasing keys; equal keys keep input order */
            uint32_t pos = (uint32_t)vo[i];
            ok = pos >= off2[g] && pos < off2[g + 1] && k[pos] == ko[i] && vuo[i] == pos;
            if (ok && i > off2[g]) {
                uint32_t prev = (uint32_t)vo[i - 1];
                ok = ko[i - 1] < ko[i] || (ko[i - 1] == ko[i] && prev < pos);
            }
        }
    CU_ASSERT_TRUE(ok);
    /* a thread's scratch that cannot be allocated: the error on 4 threads, no thread left
     * waiting in the loop the others share (the test would hang) */
    for (uint64_t at = 1; at <= 4; at++) {
        omp_set_num_threads(4);
        dm_alloc_fail_at(at);
        int rc = dm_segsort_pairs_cpu(NULL, NULL, ko, vo, k, v, n, off2, segs, NULL);
        dm_alloc_fail_at(0);
        CU_ASSERT_EQUAL(rc, DM_ERR_NOMEM);
    }
    /* segments beyond the items, or going backwards, are refused */
    off2[3] = off2[2] - 1;
    CU_ASSERT_EQUAL(dm_segsort_pairs_cpu(NULL, NULL, ko, vo, k, v, n, off2, segs, NULL), DM_ERR_INVALID_ARG);
    off2[3] = n + 5;
    CU_ASSERT_EQUAL(dm_segsort_pairs_cpu(NULL, NULL, ko, vo, k, v, n, off2, segs, NULL), DM_ERR_INVALID_ARG);
    dm_free(off);
    dm_free(off2);
    dm_free(k);
    dm_free(ko);
    dm_free(v);
    dm_free(vo);
    dm_free(vu);
    dm_free(vuo);
}

static void test_bitonic_network_on_host(void)
{
    /* the kernel's network (every capacity and the tiled layout's indexing) against the CPU */
    size_t n = 60013;
    uint64_t *off = dm_malloc(8 * (n + 1));
    size_t n_seg;
    dm_segsort_bench_lengths(off, n, 21, &n_seg);
    uint32_t *k = dm_malloc(4 * n), *ck = dm_malloc(4 * n), *hk = dm_malloc(4 * n);
    float *v = dm_malloc(4 * n), *cv = dm_malloc(4 * n), *hv = dm_malloc(4 * n);
    for (int range = 0; range < 2; range++) {
        uint64_t s = 31 + (uint64_t)range;
        for (size_t i = 0; i < n; i++) {
            k[i] = (uint32_t)(rnd(&s) % (range ? 7 : 1u << 20)); /* with heavy repeats: stability */
            v[i] = (float)i;
        }
        CU_ASSERT_EQUAL_FATAL(dm_segsort_pairs_cpu(NULL, NULL, ck, cv, k, v, n, off, n_seg, NULL), DM_OK);
        for (int cap = 128; cap <= 2048; cap *= 2)
            for (int tile = 0; tile <= 32; tile += 32) {
                CU_ASSERT_EQUAL_FATAL(dm_segsort_bitonic_hd(hk, hv, k, v, n, off, n_seg, cap, tile), DM_OK);
                CU_ASSERT_EQUAL(memcmp(hk, ck, 4 * n), 0);
                CU_ASSERT_EQUAL(memcmp(hv, cv, 4 * n), 0);
            }
    }
    CU_ASSERT_EQUAL(dm_segsort_bitonic_hd(hk, hv, k, v, n, off, n_seg, 100, 0), DM_ERR_INVALID_ARG);
    dm_free(off);
    dm_free(k);
    dm_free(ck);
    dm_free(hk);
    dm_free(v);
    dm_free(cv);
    dm_free(hv);
}

static void test_invalid(void)
{
    uint32_t k[4] = {3, 2, 1, 0}, v[4] = {0, 1, 2, 3}, ko[4], vo[4];
    CU_ASSERT_EQUAL(dm_sort_pairs_u32_cpu(NULL, NULL, ko, vo, k, v, 4, 0, 33, NULL), DM_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(dm_sort_pairs_u32_cpu(NULL, NULL, ko, vo, k, v, 4, 9, 8, NULL), DM_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(dm_sort_pairs_u32_cpu(NULL, NULL, ko, vo, k, v, 4, -1, 8, NULL), DM_ERR_INVALID_ARG);
    /* the size query checks the bit range too, as the CUDA backend's does (it said DM_OK and left
     * the error to the second call) */
    size_t qb = 99;
    CU_ASSERT_EQUAL(dm_sort_pairs_u32_cpu(NULL, &qb, ko, vo, k, v, 4, 0, 33, NULL), DM_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(dm_sort_pairs_u32_cpu(NULL, &qb, ko, vo, k, v, 4, 9, 8, NULL), DM_ERR_INVALID_ARG);
    uint64_t k64[4] = {3, 2, 1, 0}, ko64[4];
    CU_ASSERT_EQUAL(dm_sort_pairs_u64_cpu(NULL, &qb, ko64, vo, k64, v, 4, 0, 65, NULL), DM_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(dm_sort_pairs_u64_cpu(NULL, &qb, ko64, vo, k64, v, 4, 0, 64, NULL), DM_OK);
    CU_ASSERT_EQUAL(qb, 0);
    /* segmented sorts: NULL keys of n > 0 items, or output values without input values, are an
     * error code (they were a NULL dereference); keys alone (no values at all) still sort */
    uint64_t off[3] = {0, 3, 4};
    float fv[4] = {0, 1, 2, 3}, fvo[4];
    CU_ASSERT_EQUAL(dm_segsort_pairs_cpu(NULL, NULL, NULL, fvo, k, fv, 4, off, 2, NULL), DM_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(dm_segsort_pairs_cpu(NULL, NULL, ko, fvo, NULL, fv, 4, off, 2, NULL), DM_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(dm_segsort_pairs_cpu(NULL, NULL, ko, fvo, k, NULL, 4, off, 2, NULL), DM_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(dm_segsort_pairs_u32_cpu(NULL, NULL, NULL, vo, k, v, 4, off, 2, NULL), DM_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(dm_segsort_pairs_u32_cpu(NULL, NULL, ko, vo, k, NULL, 4, off, 2, NULL), DM_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(dm_segsort_pairs_cpu(NULL, NULL, NULL, NULL, NULL, NULL, 0, off, 0, NULL), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_segsort_pairs_cpu(NULL, NULL, ko, NULL, k, NULL, 4, off, 2, NULL), DM_OK);
    CU_ASSERT_TRUE(ko[0] == 1 && ko[1] == 2 && ko[2] == 3 && ko[3] == 0);
    CU_ASSERT_EQUAL(dm_segsort_bitonic_hd(ko, NULL, k, fv, 4, off, 2, 128, 0), DM_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(dm_segsort_bitonic_hd(ko, fvo, k, NULL, 4, off, 2, 128, 0), DM_ERR_INVALID_ARG);
    /* the CUDA entry points exist in every build: without a GPU they fail cleanly */
    size_t tb = 0;
    int rc = dm_sort_pairs_u32_cuda(NULL, &tb, ko, vo, k, v, 4, 0, 32, NULL);
    CU_ASSERT_TRUE(rc == DM_OK || rc == DM_ERR_UNSUPPORTED || rc == DM_ERR_CUDA);
}

int main(void)
{
    CU_TestInfo tests[] = {{"radix_u32", test_radix_u32},
                           {"radix_u64", test_radix_u64},
                           {"segsort", test_segsort},
                           {"bitonic_network_on_host", test_bitonic_network_on_host},
                           {"invalid", test_invalid},
                           CU_TEST_INFO_NULL};
    CU_SuiteInfo suites[] = {{"sorting_cpu", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};
    return dm_test_run(suites);
}
