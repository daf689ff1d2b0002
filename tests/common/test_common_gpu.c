/* GPU tests of common/ (skipped without a GPU): binding, pinned/device allocation counting,
 * the pinned multi-buffer moving many batches through reused slots without corruption, and the
 * bandwidth measurement. */
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/bandwidth.h"
#include "common/context.h"
#include "common/dbuf.h"
#include "common/rng.h"
#include "common/status.h"
#include "testutil.h"

static dm_ctx g_ctx;

static int setup(void)
{
    dm_ctx_options o = DM_CTX_OPTIONS_INIT;
    o.backend = DM_BACKEND_CUDA;
    o.quiet = 1;
    return dm_ctx_init(&g_ctx, &o) == DM_OK ? 0 : 1;
}
static int teardown(void)
{
    dm_ctx_free(&g_ctx);
    return 0;
}

static void test_bind(void)
{
    CU_ASSERT_TRUE(g_ctx.device >= 0 && g_ctx.device < g_ctx.device_count);
    CU_ASSERT_EQUAL(g_ctx.device, g_ctx.local_rank % g_ctx.device_count);
    CU_ASSERT_TRUE(g_ctx.dev.sms > 0);
    CU_ASSERT_TRUE(g_ctx.dev.mem_total > ((size_t)1 << 30));
    CU_ASSERT_TRUE(strlen(g_ctx.dev.name) > 0);
}

static void test_device_alloc_counting(void)
{
    size_t d0 = dm_mem_current(DM_MEM_DEVICE), p0 = dm_mem_current(DM_MEM_PINNED);
    void *d = NULL, *p = NULL;
    CU_ASSERT_EQUAL_FATAL(dm_device_alloc(&d, 12345), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_host_alloc_pinned(&p, 777), DM_OK);
    CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_DEVICE), d0 + 12345);
    CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_PINNED), p0 + 777);
    dm_device_free(d);
    dm_host_free_pinned(p);
    CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_DEVICE), d0);
    CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_PINNED), p0);
    /* an impossible request is a clear NOMEM, not a crash */
    CU_ASSERT_EQUAL(dm_device_alloc(&d, (size_t)1 << 50), DM_ERR_NOMEM);
    CU_ASSERT_PTR_NULL(d);
}

static void test_dbuf_round_trip(void)
{
    /* 3 slots, 40 batches of odd sizes: each batch goes host -> device -> a separate pinned
     * result buffer; if acquire did not wait for the slot's previous work, a batch would be
     * overwritten while in flight and the check would fail. */
    enum { SLOTS = 3, BATCHES = 40 };
    const size_t cap = (1u << 20) + 3;
    dm_dbuf b;
    CU_ASSERT_EQUAL_FATAL(dm_dbuf_init(&b, SLOTS, cap, cap), DM_OK);
    uint8_t *res[SLOTS];
    size_t len[SLOTS];
    int batch_of[SLOTS];
    for (int i = 0; i < SLOTS; i++) CU_ASSERT_EQUAL_FATAL(dm_host_alloc_pinned((void **)&res[i], cap), DM_OK);
    int bad = 0;
    for (int k = 0; k < BATCHES + SLOTS; k++) {
        dm_dbuf_slot *s;
        CU_ASSERT_EQUAL_FATAL(dm_dbuf_acquire(&b, &s), DM_OK);
        int i = s->index;
        if (k >= SLOTS) { /* the slot's previous batch is complete: check it */
            for (size_t j = 0; j < len[i]; j++)
                if (res[i][j] != (uint8_t)dm_rng_u64(7, (uint64_t)batch_of[i], j)) {
                    bad++;
                    break;
                }
        }
        if (k >= BATCHES) continue;
        len[i] = cap - (size_t)k * 977;
        batch_of[i] = k;
        uint8_t *h = s->host;
        for (size_t j = 0; j < len[i]; j++) h[j] = (uint8_t)dm_rng_u64(7, (uint64_t)k, j);
        CU_ASSERT_EQUAL(dm_dbuf_h2d(s, len[i]), DM_OK);
        CU_ASSERT_EQUAL(dm_dbuf_d2h(s, res[i], s->dev, len[i]), DM_OK);
        CU_ASSERT_EQUAL(dm_dbuf_release(s), DM_OK);
    }
    CU_ASSERT_EQUAL(dm_dbuf_drain(&b), DM_OK);
    CU_ASSERT_EQUAL(bad, 0);
    for (int i = 0; i < SLOTS; i++) dm_host_free_pinned(res[i]);
    dm_dbuf_free(&b);
    CU_ASSERT_EQUAL(dm_dbuf_init(&b, 1, 16, 16), DM_ERR_INVALID_ARG);
}

/* dm_dbuf_upload: 9 MiB + 12345 bytes of pageable memory through 2 slots of 1 MiB + 3 (so the
 * pieces are neither aligned nor equal, and every slot is reused while earlier pieces may still be
 * in flight), and a piece of a few bytes; read back, every byte is the source's. The source is
 * overwritten as soon as the call returns (the pieces were copied). No slot buffers: an error. */
static void test_dbuf_upload(void)
{
    const size_t n = ((size_t)9 << 20) + 12345, cap = (1u << 20) + 3;
    uint8_t *src = malloc(n), *back = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    CU_ASSERT_EQUAL_FATAL(dm_host_alloc_pinned((void **)&back, n), DM_OK);
    for (size_t j = 0; j < n; j++) src[j] = (uint8_t)dm_rng_u64(11, 0, j);
    void *dev = NULL;
    CU_ASSERT_EQUAL_FATAL(dm_device_alloc(&dev, n), DM_OK);
    dm_dbuf b;
    CU_ASSERT_EQUAL_FATAL(dm_dbuf_init(&b, 2, cap, 0), DM_OK);
    CU_ASSERT_EQUAL(dm_dbuf_upload(&b, dev, src, n), DM_OK);
    memset(src, 0, n);
    CU_ASSERT_EQUAL(dm_dbuf_upload(&b, (char *)dev + 5, "abc", 3), DM_OK);
    CU_ASSERT_EQUAL(dm_dbuf_upload(&b, dev, src, 0), DM_OK);
    CU_ASSERT_EQUAL(dm_dbuf_drain(&b), DM_OK);
    dm_dbuf_slot *sl;
    CU_ASSERT_EQUAL_FATAL(dm_dbuf_acquire(&b, &sl), DM_OK);
    CU_ASSERT_EQUAL(dm_dbuf_d2h(sl, back, dev, n), DM_OK);
    CU_ASSERT_EQUAL(dm_dbuf_release(sl), DM_OK);
    CU_ASSERT_EQUAL(dm_dbuf_drain(&b), DM_OK);
    size_t bad = 0;
    for (size_t j = 0; j < n; j++) {
        uint8_t want = j >= 5 && j < 8 ? (uint8_t)"abc"[j - 5] : (uint8_t)dm_rng_u64(11, 0, j);
        bad += back[j] != want;
    }
    CU_ASSERT_EQUAL(bad, 0);
    dm_dbuf_free(&b);
    dm_dbuf empty;
    memset(&empty, 0, sizeof empty);
    CU_ASSERT_EQUAL(dm_dbuf_upload(&empty, dev, "x", 1), DM_ERR_INVALID_ARG);
    dm_device_free(dev);
    free(src);
    dm_host_free_pinned(back);
}

static void test_bandwidth(void)
{
    dm_bandwidth bw;
    int rc = dm_bandwidth_measure(&bw, (size_t)64 << 20, 3);
    if (rc != DM_OK) fprintf(stderr, "%s\n", dm_error_message());
    CU_ASSERT_EQUAL_FATAL(rc, DM_OK);
    /* sanity bounds only (performance is measured by `docmine info --bandwidth`, not tests) */
    CU_ASSERT_TRUE(bw.h2d_gbs > 0.1 && bw.h2d_gbs < 1000);
    CU_ASSERT_TRUE(bw.d2h_gbs > 0.1 && bw.d2h_gbs < 1000);
    CU_ASSERT_TRUE(bw.d2d_gbs > 1 && bw.d2d_gbs < 100000);
    CU_ASSERT_EQUAL(dm_bandwidth_measure(&bw, 0, 3), DM_ERR_INVALID_ARG);
}

int main(int argc, char **argv)
{
    CU_TestInfo t[] = {
        {"GPU binding", test_bind},
        {"device and pinned allocation counting", test_device_alloc_counting},
        {"pinned multi-buffer round trip", test_dbuf_round_trip},
        {"upload through the pinned multi-buffer", test_dbuf_upload},
        {"bandwidth measurement", test_bandwidth},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"common-gpu", setup, teardown, NULL, NULL, t}, CU_SUITE_INFO_NULL};
    return dm_test_run_gpu(argc, argv, suites);
}
