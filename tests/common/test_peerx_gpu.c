/* GPU tests of common/peerx (skipped without a GPU; mpiexec -n 2 and 4 on the GPU machine, where
 * every rank shares the node, so the exchange must be available):
 *  - every rank sends every other rank a message of its own size (empty ones, odd sizes, one of
 *    more than two pinned slots), staged in three pieces from a buffer overwritten at once and
 *    downloaded in two other pieces; every byte arrives as sent;
 *  - pieces outside a message are refused; without DOCMINE_GPU_EXCHANGE=1 (the tests set it), and
 *    on the CPU backend, there is no exchange (the callers then use MPI). */
#include <CUnit/CUnit.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/context.h"
#include "common/peerx.h"
#include "common/status.h"
#include "testutil.h"

static dm_ctx g_ctx;

static int setup(void)
{
    dm_ctx_options o = DM_CTX_OPTIONS_INIT;
    o.backend = DM_BACKEND_CUDA;
    o.quiet = 1;
    setenv("DOCMINE_GPU_EXCHANGE", "1", 1); /* opt-in (common/peerx.h) */
    return dm_ctx_init(&g_ctx, &o) == DM_OK ? 0 : 1;
}
static int teardown(void)
{
    dm_ctx_free(&g_ctx);
    return 0;
}

/* the message from rank a to rank b: 70 MiB + 13 bytes from 0 to 1 (three 32 MiB slots), nothing
 * when (a + b) % 3 == 0 (other than 0 -> 1) or a == b, else a few kilobytes of odd sizes */
static uint64_t msg_size(int a, int b)
{
    if (a == b) return 0;
    if (a == 0 && b == 1) return ((uint64_t)70 << 20) + 13;
    if ((a + b) % 3 == 0) return 0;
    return 1000 + 7919 * (uint64_t)a + 104729 * (uint64_t)b;
}

static unsigned char msg_byte(int a, int b, uint64_t i)
{
    return (unsigned char)(((i * 2654435761u) >> 7) ^ (uint64_t)(a * 31 + b * 17));
}

static int all_ok(int ok)
{
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, g_ctx.world);
    return ok;
}

static void test_exchange(void)
{
    const int P = g_ctx.size, me = g_ctx.rank;
    uint64_t *sb = calloc((size_t)P, sizeof *sb), *rb = calloc((size_t)P, sizeof *rb);
    for (int q = 0; q < P; q++) {
        sb[q] = msg_size(me, q);
        rb[q] = msg_size(q, me);
    }
    dm_peerx *px = NULL;
    CU_ASSERT_EQUAL_FATAL(dm_peerx_open(&px, &g_ctx, sb, rb), DM_OK);
    /* the same answer on every rank: here every rank shares the node */
    CU_ASSERT_PTR_NOT_NULL_FATAL(px);
    int ok = 1;
    for (int q = 0; q < P; q++) ok &= dm_peerx_local(px, q) == (q != me);
    CU_ASSERT_TRUE(all_ok(ok));
    /* staged in three pieces from one buffer, overwritten after each put */
    unsigned char *buf = malloc(((size_t)70 << 20) + 64);
    for (int q = 0; q < P; q++) {
        if (q == me) continue;
        uint64_t n = sb[q], cut[4] = {0, n / 3, n / 2 + (n > 10 ? 5 : 0), n};
        for (int k = 0; k < 3; k++) {
            size_t len = (size_t)(cut[k + 1] - cut[k]);
            for (size_t i = 0; i < len; i++) buf[i] = msg_byte(me, q, cut[k] + i);
            if (dm_peerx_put(px, q, (size_t)cut[k], buf, len) != DM_OK) ok = 0;
            memset(buf, 0xEE, len);
        }
        /* outside the message: refused */
        if (dm_peerx_put(px, q, (size_t)n, buf, 1) != DM_ERR_INVALID_ARG) ok = 0;
    }
    CU_ASSERT_EQUAL(dm_peerx_put(px, me, 0, buf, 0), DM_ERR_INVALID_ARG); /* not a peer */
    CU_ASSERT_EQUAL(dm_peerx_exchange(px), DM_OK);
    /* downloaded in two other pieces; every byte checked */
    uint64_t bad = 0, got = 0;
    for (int q = 0; q < P; q++) {
        if (q == me) continue;
        uint64_t n = rb[q], cut[3] = {0, n - n / 4, n};
        memset(buf, 0, (size_t)n);
        for (int k = 0; k < 2; k++)
            if (dm_peerx_get(px, q, (size_t)cut[k], buf + cut[k], (size_t)(cut[k + 1] - cut[k])) != DM_OK) ok = 0;
        for (uint64_t i = 0; i < n; i++) bad += buf[i] != msg_byte(q, me, i);
        got += n;
        if (dm_peerx_get(px, q, 1, buf, (size_t)n) != DM_ERR_INVALID_ARG) ok = 0;
    }
    dm_peerx_close(px);
    if (bad) printf("\n  rank %d: %llu of %llu bytes differ\n", me, (unsigned long long)bad, (unsigned long long)got);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_TRUE(all_ok(ok));
    if (me == 1) CU_ASSERT_TRUE(got > ((uint64_t)70 << 20)); /* the large message came */
    free(buf);
    free(sb);
    free(rb);
}

static void test_not_available(void)
{
    uint64_t *z = calloc((size_t)g_ctx.size, sizeof *z);
    dm_peerx *px = (dm_peerx *)&g_ctx; /* must be overwritten */
    unsetenv("DOCMINE_GPU_EXCHANGE"); /* the default: MPI */
    CU_ASSERT_EQUAL(dm_peerx_open(&px, &g_ctx, z, z), DM_OK);
    CU_ASSERT_PTR_NULL(px);
    setenv("DOCMINE_GPU_EXCHANGE", "0", 1);
    px = (dm_peerx *)&g_ctx;
    CU_ASSERT_EQUAL(dm_peerx_open(&px, &g_ctx, z, z), DM_OK);
    CU_ASSERT_PTR_NULL(px);
    setenv("DOCMINE_GPU_EXCHANGE", "1", 1);
    dm_ctx cpu = g_ctx;
    cpu.backend = DM_BACKEND_CPU;
    px = (dm_peerx *)&g_ctx;
    CU_ASSERT_EQUAL(dm_peerx_open(&px, &cpu, z, z), DM_OK);
    CU_ASSERT_PTR_NULL(px);
    CU_ASSERT_FALSE(dm_peerx_local(NULL, 0));
    free(z);
}

int main(int argc, char **argv)
{
    CU_TestInfo t[] = {
        {"messages through the GPUs arrive byte for byte", test_exchange},
        {"no exchange by default, when turned off or on the CPU backend", test_not_available},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"peerx-gpu", setup, teardown, NULL, NULL, t}, CU_SUITE_INFO_NULL};
    return dm_test_run_gpu(argc, argv, suites);
}
