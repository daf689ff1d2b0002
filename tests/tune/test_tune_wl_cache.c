/* The tuning workloads' host cache (common/tune/wl_cache.h): one build per (kind, n, seed) while it
 * fits, least recently used dropped first, never an entry in use, an entry larger than the budget
 * lent once and dropped, a failed build keeps nothing, clear, and two threads asking for one key
 * build it once. Every build is counted memory (dm_malloc): the counted host memory returns to its
 * start once the cache is cleared. */
#include <CUnit/Basic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "common/tune/wl_cache.h"

static int g_built, g_dropped;

/* n bytes, every one (seed + i) mod 251; arg non-NULL: fails */
static void drop_counted(void *p)
{
    g_dropped++;
    dm_free(p);
}

static int build_bytes(dm_wl_host *out, size_t n, uint64_t seed, const void *arg)
{
    if (arg) return DM_ERR(DM_ERR_IO, "a build that fails");
    unsigned char *p = dm_malloc(n ? n : 1);
    if (!p) return DM_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)((seed + i) % 251);
    out->data = p;
    out->bytes = n;
    out->drop = drop_counted;
    g_built++;
    return DM_OK;
}

static int holds(const void *d, size_t n, uint64_t seed)
{
    const unsigned char *p = d;
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)((seed + i) % 251)) return 0;
    return 1;
}

static void *get(const char *kind, size_t n, uint64_t seed)
{
    void *d = NULL;
    CU_ASSERT_EQUAL(dm_wl_cache_get(kind, n, seed, build_bytes, NULL, &d), DM_OK);
    CU_ASSERT_PTR_NOT_NULL(d);
    if (d) CU_ASSERT(holds(d, n, seed));
    return d;
}

static void reset(size_t budget)
{
    dm_wl_cache_clear();
    dm_wl_cache_set_budget(budget);
    g_built = g_dropped = 0;
}

static void test_one_build_per_key(void)
{
    size_t mem0 = dm_mem_current(DM_MEM_HOST);
    reset(1 << 20);
    void *a = get("a", 1000, 1);
    dm_wl_cache_put(a);
    void *b = get("a", 1000, 1); /* a hit: the same data */
    CU_ASSERT_PTR_EQUAL(a, b);
    dm_wl_cache_put(b);
    CU_ASSERT_EQUAL(g_built, 1);
    /* another kind, n or seed is another entry */
    dm_wl_cache_put(get("b", 1000, 1));
    dm_wl_cache_put(get("a", 999, 1));
    dm_wl_cache_put(get("a", 1000, 2));
    CU_ASSERT_EQUAL(g_built, 4);
    dm_wl_cache_stats s;
    dm_wl_cache_get_stats(&s);
    CU_ASSERT_EQUAL(s.entries, 4);
    CU_ASSERT_EQUAL(s.bytes, 3999u);
    dm_wl_cache_clear();
    dm_wl_cache_get_stats(&s);
    CU_ASSERT_EQUAL(s.entries, 0);
    CU_ASSERT_EQUAL(s.bytes, 0u);
    CU_ASSERT_EQUAL(g_dropped, 4);
    CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_HOST), mem0);
}

static void test_lru_within_budget(void)
{
    reset(3000);
    dm_wl_cache_put(get("k", 1000, 1));
    dm_wl_cache_put(get("k", 1000, 2));
    dm_wl_cache_put(get("k", 1000, 3));
    dm_wl_cache_put(get("k", 1000, 1)); /* seed 1 used last: seed 2 is now the oldest */
    CU_ASSERT_EQUAL(g_built, 3);
    dm_wl_cache_put(get("k", 1000, 4)); /* 4000 bytes: the oldest (seed 2) goes */
    CU_ASSERT_EQUAL(g_built, 4);
    CU_ASSERT_EQUAL(g_dropped, 1);
    dm_wl_cache_put(get("k", 1000, 1));
    dm_wl_cache_put(get("k", 1000, 3));
    CU_ASSERT_EQUAL(g_built, 4);
    dm_wl_cache_put(get("k", 1000, 2)); /* rebuilt */
    CU_ASSERT_EQUAL(g_built, 5);
    dm_wl_cache_stats s;
    dm_wl_cache_get_stats(&s);
    CU_ASSERT(s.bytes <= 3000);
    dm_wl_cache_clear();
}

static void test_lent_entries_stay(void)
{
    reset(2000);
    void *a = get("k", 1500, 1), *b = get("k", 1500, 2); /* both lent: over budget, both stay */
    CU_ASSERT_EQUAL(g_dropped, 0);
    CU_ASSERT(holds(a, 1500, 1));
    dm_wl_cache_clear(); /* lent: marked, dropped when returned */
    CU_ASSERT_EQUAL(g_dropped, 0);
    CU_ASSERT(holds(b, 1500, 2));
    dm_wl_cache_put(a);
    CU_ASSERT_EQUAL(g_dropped, 1);
    void *b2 = get("k", 1500, 2); /* b is marked: a fresh build, not b */
    CU_ASSERT_EQUAL(g_built, 3);
    CU_ASSERT_PTR_NOT_EQUAL(b, b2);
    dm_wl_cache_put(b);
    dm_wl_cache_put(b2);
    dm_wl_cache_stats s;
    dm_wl_cache_get_stats(&s);
    CU_ASSERT_EQUAL(s.entries, 1); /* b2, within the budget */
    dm_wl_cache_clear();
}

static void test_too_large_and_zero_budget(void)
{
    reset(100);
    void *a = get("k", 1000, 1);
    dm_wl_cache_put(a);
    CU_ASSERT_EQUAL(g_dropped, 1); /* larger than the budget: dropped when returned */
    dm_wl_cache_put(get("k", 1000, 1));
    CU_ASSERT_EQUAL(g_built, 2);
    reset(0); /* keeps nothing: every lending builds (the uncached behaviour) */
    dm_wl_cache_put(get("k", 1, 1));
    dm_wl_cache_put(get("k", 1, 1));
    CU_ASSERT_EQUAL(g_built, 2);
    CU_ASSERT_EQUAL(g_dropped, 2);
    dm_wl_cache_stats s;
    dm_wl_cache_get_stats(&s);
    CU_ASSERT_EQUAL(s.entries, 0);
}

static void test_failed_build(void)
{
    reset(1 << 20);
    void *d = (void *)&d;
    int rc = dm_wl_cache_get("k", 10, 1, build_bytes, "fail", &d);
    CU_ASSERT_EQUAL(rc, DM_ERR_IO);
    CU_ASSERT_PTR_NULL(d);
    dm_wl_cache_stats s;
    dm_wl_cache_get_stats(&s);
    CU_ASSERT_EQUAL(s.entries, 0);
    dm_wl_cache_put(get("k", 10, 1)); /* the key builds once the builder succeeds */
    CU_ASSERT_EQUAL(g_built, 1);
    char long_kind[80];
    memset(long_kind, 'x', sizeof long_kind - 1);
    long_kind[sizeof long_kind - 1] = '\0';
    CU_ASSERT_EQUAL(dm_wl_cache_get(long_kind, 10, 1, build_bytes, NULL, &d), DM_ERR_INVALID_ARG);
    dm_wl_cache_put(NULL);
    dm_wl_cache_clear();
}

static void *ask(void *out)
{
    void *d = NULL;
    if (dm_wl_cache_get("t", 4096, 9, build_bytes, NULL, &d) != DM_OK) d = NULL;
    *(void **)out = d;
    return NULL;
}

static void test_threads_build_once(void)
{
    reset(1 << 20);
    pthread_t t[4];
    void *d[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, ask, &d[i]);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    CU_ASSERT_EQUAL(g_built, 1);
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_PTR_EQUAL(d[i], d[0]);
        dm_wl_cache_put(d[i]);
    }
    dm_wl_cache_stats s;
    dm_wl_cache_get_stats(&s);
    CU_ASSERT_EQUAL(s.entries, 1);
    dm_wl_cache_clear();
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("tune_wl_cache", NULL, NULL);
    CU_add_test(s, "one build per key", test_one_build_per_key);
    CU_add_test(s, "least recently used first, within the budget", test_lru_within_budget);
    CU_add_test(s, "entries in use stay", test_lent_entries_stay);
    CU_add_test(s, "larger than the budget, and a budget of 0", test_too_large_and_zero_budget);
    CU_add_test(s, "a failed build keeps nothing", test_failed_build);
    CU_add_test(s, "threads build a key once", test_threads_build_once);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures();
    CU_cleanup_registry();
    return fails ? 1 : 0;
}
