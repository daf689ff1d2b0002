/* Unit tests of flock on the CPU backend (one rank): the exact similarity, forces and updates on
 * hand-checked configurations (also across the torus seam), the CUDA similarity kernel's tile
 * merge emulated lane by lane, the grid neighbour search against
 * brute force on random data, determinism, the speed cap and the shrinking plane, clusters of a
 * hand-made configuration (noise and attach), resume, metrics against hand-computed values, top
 * terms, the vocabulary reader and the PNG output. */
#include <CUnit/CUnit.h>
#include <math.h>
#include <omp.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <signal.h>
#include <fcntl.h>

#include "common/alloc.h"
#include "common/context.h"
#include "common/fileio.h"
#include "common/rng.h"
#include "common/status.h"
#include "flock/flock.h"
#include "flock/flock_impl.h"
#include "flock/flock_synth.h"
#include "flock_testlib.h"
#include "testutil.h"

static dm_ctx g_ctx;
static char g_tmp[4096];

static int setup(void)
{
    dm_ctx_options o = DM_CTX_OPTIONS_INIT;
    o.backend = DM_BACKEND_CPU;
    o.quiet = 1;
    if (!dm_test_tmpdir(g_tmp, sizeof g_tmp)) return 1;
    return dm_ctx_init(&g_ctx, &o) == DM_OK ? 0 : 1;
}
static int teardown(void)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    dm_ctx_free(&g_ctx);
    return 0;
}

/* ---- similarity ----------------------------------------------------------------------------- */

static void test_dot_exact(void)
{
    /* a = (0.6 e1 + 0.8 e3), b = (0.6 e3 + 0.8 e5): cosine 0.8 * 0.6 = 0.48 */
    uint32_t ca[] = {1, 3}, cb[] = {3, 5};
    float va[] = {0.6f, 0.8f}, vb[] = {0.6f, 0.8f};
    double c = dm_flock_cos_from_fix(dm_flock_dot_fix(ca, va, 2, cb, vb, 2));
    CU_ASSERT_DOUBLE_EQUAL(c, (double)0.8f * (double)0.6f, 1e-15);
    CU_ASSERT_EQUAL(dm_flock_dot_fix(ca, va, 2, cb, vb, 2), dm_flock_dot_fix(cb, vb, 2, ca, va, 2));
    /* disjoint and empty rows */
    uint32_t cc[] = {0, 2, 4};
    float vc[] = {0.5f, 0.5f, 0.5f};
    CU_ASSERT_EQUAL(dm_flock_dot_fix(ca, va, 2, cc, vc, 3), 0);
    CU_ASSERT_EQUAL(dm_flock_dot_fix(ca, va, 0, cc, vc, 3), 0);
    /* the fixed-point sum is the same whatever the split of the terms (order independence) */
    uint32_t cx[64], cy[64];
    float vx[64], vy[64];
    double ss = 0;
    for (int i = 0; i < 64; i++) {
        cx[i] = cy[i] = (uint32_t)(3 * i + 1);
        vx[i] = (float)(0.01 + 0.001 * i); /* sum of products below 1, as for unit vectors */
        vy[i] = (float)(0.09 - 0.001 * i);
        ss += (double)vx[i] * (double)vy[i];
    }
    int64_t whole = dm_flock_dot_fix(cx, vx, 64, cy, vy, 64);
    int64_t parts = dm_flock_dot_fix(cx + 40, vx + 40, 24, cy + 40, vy + 40, 24) + dm_flock_dot_fix(cx, vx, 40, cy, vy, 40);
    CU_ASSERT_EQUAL(whole, parts);
    CU_ASSERT_DOUBLE_EQUAL(dm_flock_cos_from_fix(whole), ss, 1e-15);
    CU_ASSERT_TRUE(dm_flock_is_similar(dm_flock_dot_fix(ca, va, 2, cb, vb, 2), 0.48 - 1e-9));
    CU_ASSERT_FALSE(dm_flock_is_similar(dm_flock_dot_fix(ca, va, 2, cb, vb, 2), 0.4801));
}

/* --threshold 1 joins documents with identical vectors: single-precision unit vectors (normalised
 * in double and rounded, as the store does) have self-cosines on both sides of 1. */
static void test_threshold_one(void)
{
    uint32_t col[400];
    float val[400];
    int below = 0;
    uint64_t st = 12345;
    for (int t = 0; t < 200; t++) {
        uint32_t n = 1 + (uint32_t)(t * 2 % 400);
        double w[400], ss = 0;
        for (uint32_t i = 0; i < n; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            w[i] = 0.01 + (double)(st >> 11) * 0x1p-53;
            ss += w[i] * w[i];
            col[i] = 5 * i;
        }
        for (uint32_t i = 0; i < n; i++) val[i] = (float)(w[i] / sqrt(ss));
        int64_t self = dm_flock_dot_fix(col, val, n, col, val, n);
        below += dm_flock_cos_from_fix(self) < 1.0;
        CU_ASSERT_TRUE(dm_flock_is_similar(self, 1.0));
        CU_ASSERT_TRUE(fabs(dm_flock_cos_from_fix(self) - 1.0) < 0x1p-22); /* the slack (2^-20) covers it */
    }
    CU_ASSERT_TRUE(below > 0); /* without the slack these would not be similar at T = 1 */
    /* the slack is small: a cosine of 1 - 2^-19 is not similar at T = 1, nor 0.5 - 2^-19 at 0.5 */
    CU_ASSERT_FALSE(dm_flock_is_similar((int64_t)(DM_FLOCK_DOT_SCALE * (1.0 - 0x1p-19)), 1.0));
    CU_ASSERT_FALSE(dm_flock_is_similar((int64_t)(DM_FLOCK_DOT_SCALE * (0.5 - 0x1p-19)), 0.5));
    CU_ASSERT_TRUE(dm_flock_is_similar((int64_t)(DM_FLOCK_DOT_SCALE * (0.5 - 0x1p-21)), 0.5));
}

/* The CUDA similarity kernel's tile merge (fk_dot_warp in flock_kernels.cuh), emulated lane by
 * lane: 32 columns of each row per step, each lane's A column looked up among the B lanes by the
 * same five-step search over shuffled values, the tile with the smaller last column advancing. */
static int64_t tile_merge_emulated(const uint32_t *ca, const float *va, uint32_t na, const uint32_t *cb,
                                   const float *vb, uint32_t nb)
{
    int64_t s[32] = {0};
    uint32_t i = 0, j = 0;
    while (i < na && j < nb) {
        uint32_t x[32], y[32];
        for (uint32_t l = 0; l < 32; l++) {
            x[l] = i + l < na ? ca[i + l] : 0xffffffffu;
            y[l] = j + l < nb ? cb[j + l] : 0xffffffffu;
        }
        uint32_t amax = x[na - i < 32 ? na - i - 1 : 31], bmax = y[nb - j < 32 ? nb - j - 1 : 31];
        for (uint32_t l = 0; l < 32; l++) {
            int q = 0;
            for (int step = 16; step > 0; step >>= 1)
                if (y[q + step - 1] < x[l]) q += step;
            if (i + l < na && y[q] == x[l]) s[l] += dm_flock_rint64((double)va[i + l] * (double)vb[j + (uint32_t)q] * DM_FLOCK_DOT_SCALE);
        }
        if (amax <= bmax) i += 32;
        if (bmax <= amax) j += 32;
    }
    int64_t t = 0;
    for (int l = 0; l < 32; l++) t += s[l];
    return t;
}

/* A random strictly increasing row of n columns drawn from [lo, lo + span). */
static uint32_t random_row(uint32_t *c, float *v, uint32_t n, uint32_t lo, uint32_t span, uint64_t *state)
{
    uint32_t k = 0;
    for (uint32_t t = 0; t < span && k < n; t++) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t left = span - t, need = n - k;
        if ((uint32_t)(*state >> 33) % left < need) {
            c[k] = lo + t;
            v[k] = (float)(0.03 / (1.0 + (double)((*state >> 20) % 1000))); /* sums of products below 1 */
            k++;
        }
    }
    return k;
}

static void test_dot_tile_merge(void)
{
    enum { MAXN = 700 };
    static uint32_t ca[MAXN], cb[MAXN];
    static float va[MAXN], vb[MAXN];
    uint64_t st = 12345;
    /* lengths around the tile size, empty, one long against one short, disjoint ranges,
     * identical rows, interleaved columns, and columns at the top of the range */
    static const uint32_t lens[] = {0, 1, 2, 31, 32, 33, 63, 64, 65, 96, 100, 470, 700};
    int cases = 0, bad = 0;
    for (size_t p = 0; p < sizeof lens / sizeof lens[0]; p++)
        for (size_t q = 0; q < sizeof lens / sizeof lens[0]; q++)
            for (int kind = 0; kind < 5; kind++) {
                uint32_t na = lens[p], nb = lens[q];
                if (kind == 0) { /* random, overlapping */
                    na = random_row(ca, va, na, 0, 2000, &st);
                    nb = random_row(cb, vb, nb, 0, 2000, &st);
                } else if (kind == 1) { /* dense overlap */
                    na = random_row(ca, va, na, 0, na + na / 3 + 1, &st);
                    nb = random_row(cb, vb, nb, 0, nb + nb / 3 + 1, &st);
                } else if (kind == 2) { /* A entirely below B */
                    na = random_row(ca, va, na, 0, 1000, &st);
                    nb = random_row(cb, vb, nb, 1000, 1000, &st);
                } else if (kind == 3) { /* identical columns */
                    uint32_t n = na < nb ? na : nb;
                    na = nb = random_row(ca, va, n, 0, 1500, &st);
                    memcpy(cb, ca, 4 * n);
                    for (uint32_t k = 0; k < n; k++) vb[k] = va[n - 1 - k];
                } else { /* near the top of the column range */
                    na = random_row(ca, va, na, 0xfffffffeu - 1800, 1800, &st);
                    nb = random_row(cb, vb, nb, 0xfffffffeu - 1800, 1800, &st);
                }
                int64_t want = dm_flock_dot_fix(ca, va, na, cb, vb, nb);
                bad += tile_merge_emulated(ca, va, na, cb, vb, nb) != want;
                bad += tile_merge_emulated(cb, vb, nb, ca, va, na) != want;
                cases++;
            }
    printf("\n  tile merge vs merge: %d row pairs (both orders), %d differ\n", cases, bad);
    CU_ASSERT_EQUAL(bad, 0);
    /* the interleaved worst case: every other column, no match at all and matches everywhere */
    for (uint32_t k = 0; k < 200; k++) {
        ca[k] = 2 * k, cb[k] = 2 * k + 1, va[k] = vb[k] = 0.05f;
    }
    CU_ASSERT_EQUAL(tile_merge_emulated(ca, va, 200, cb, vb, 200), 0);
    CU_ASSERT_EQUAL(tile_merge_emulated(ca, va, 200, ca, va, 200), dm_flock_dot_fix(ca, va, 200, ca, va, 200));
}

/* ---- the boid store ----------------------------------------------------------------------- */

static void test_store_remove(void)
{
    /* 40 boids, each with a vector of (i % 5) + 1 terms; remove a pattern, check the survivors,
     * the reported moves and that vectors follow their boids, through several rounds until the
     * pool compacts */
    dm_flock_store st;
    dm_flock_store_init(&st);
    uint32_t col[8];
    float val[8];
    for (uint32_t i = 0; i < 4000; i++) {
        uint32_t len = i % 5 + 1;
        for (uint32_t k = 0; k < len; k++) {
            col[k] = i * 10 + k;
            val[k] = (float)i;
        }
        CU_ASSERT_EQUAL_FATAL(dm_flock_store_push(&st, i, i, -1.0 * i, 0, 0, col, val, len), DM_OK);
    }
    uint8_t *keep = malloc(st.n), *alive = calloc(4000, 1);
    uint32_t *dst = malloc(4 * st.n), *src = malloc(4 * st.n);
    for (int i = 0; i < 4000; i++) alive[i] = 1;
    uint64_t comp0 = st.compactions;
    for (int round = 0; round < 6; round++) {
        size_t n0 = st.n;
        uint64_t *before = malloc(8 * n0);
        memcpy(before, st.id, 8 * n0);
        size_t expect = 0;
        for (size_t i = 0; i < n0; i++) {
            keep[i] = (uint8_t)(((st.id[i] * 7 + (uint64_t)round) % 3) != 0);
            expect += keep[i];
            if (!keep[i]) alive[st.id[i]] = 0;
        }
        size_t moves = 0;
        CU_ASSERT_EQUAL_FATAL(dm_flock_store_remove(&st, keep, dst, src, &moves), DM_OK);
        CU_ASSERT_EQUAL(st.n, expect);
        for (size_t k = 0; k < moves; k++) {
            CU_ASSERT_TRUE(src[k] >= st.n && dst[k] < st.n);
            CU_ASSERT_EQUAL(st.id[dst[k]], before[src[k]]);
            CU_ASSERT_FALSE(keep[dst[k]]); /* a hole */
        }
        /* unmoved survivors stay in place */
        size_t live = 0;
        for (size_t i = 0; i < st.n; i++) {
            uint64_t id = st.id[i];
            CU_ASSERT_TRUE(alive[id]);
            CU_ASSERT_EQUAL(st.x[i], (double)id);
            CU_ASSERT_EQUAL(st.vlen[i], id % 5 + 1);
            CU_ASSERT_EQUAL(st.col[st.voff[i]], (uint32_t)id * 10);
            CU_ASSERT_EQUAL(st.val[st.voff[i] + st.vlen[i] - 1], (float)id);
            live += st.vlen[i];
        }
        CU_ASSERT_EQUAL(live, st.live);
        free(before);
    }
    CU_ASSERT_TRUE(st.compactions > comp0);
    CU_ASSERT_TRUE(st.pool <= 2 * st.live + 4096);
    free(keep), free(alive), free(dst), free(src);
    dm_flock_store_free(&st);
}

/* The halo vector cache: a sender leaves out the vectors of the documents it sent last time (two
 * messages, as to two neighbours), the receiver takes them from its previous halo. Over rounds of
 * a moving selection (documents leave and come back, some have empty vectors) every halo boid
 * has its own vector, the boids are in message order, the pool compacts, and a left-out vector
 * the receiver does not hold is an error, never a wrong vector. The rounds copy with all threads
 * and with caps of 1-3 threads (the CUDA backend's cap, dm_stage_threads). N = 40000: the
 * receiver's id map is built in parallel (more than DM_FLOCK_IDMAP_PAR_MIN boids). */
static void halo_cache(const uint32_t N)
{
    dm_flock_store src, halo;
    dm_flock_store_init(&src);
    dm_flock_store_init(&halo);
    uint32_t col[8];
    float val[8];
    for (uint32_t i = 0; i < N; i++) {
        uint32_t len = i % 6; /* len 0: an empty document */
        for (uint32_t k = 0; k < len; k++) {
            col[k] = i * 10 + k;
            val[k] = (float)i + 0.25f * (float)k;
        }
        CU_ASSERT_EQUAL_FATAL(dm_flock_store_push(&src, i, i, -1.0 * i, 0.5 * i, 0, col, val, len), DM_OK);
    }
    uint8_t *prev = calloc(N, 1), *cur = calloc(N, 1), *with = malloc(N);
    uint32_t *idx = malloc(4 * N);
    uint64_t comp0 = halo.compactions, sent_vec = 0, sent = 0;
    for (int round = 0; round < 40; round++) {
        src.copy_threads = halo.copy_threads = round % 4;
        /* a window sliding by 37 documents a round plus every 7th document on odd rounds */
        memset(cur, 0, N);
        for (uint32_t i = 0; i < N; i++)
            cur[i] = (uint8_t)(((i + N - (uint32_t)(37 * round) % N) % N) < 3 * N / 10 || (round % 2 && i % 7 == 0));
        char *msg[2] = {NULL, NULL};
        uint64_t size[2] = {0, 0};
        for (int m = 0; m < 2; m++) {
            size_t cnt = 0, nnz = 0;
            for (uint32_t i = (uint32_t)m; i < N; i += 2)
                if (cur[i]) {
                    with[cnt] = (uint8_t)!prev[i];
                    if (with[cnt]) nnz += src.vlen[i], sent_vec++;
                    idx[cnt++] = i;
                }
            sent += cnt;
            dm_flock_msg_layout l;
            dm_flock_msg_layout_of(&l, cnt, nnz);
            msg[m] = malloc(l.total);
            dm_flock_msg_pack(msg[m], &src, idx, cnt, with, NULL);
            size[m] = l.total;
        }
        CU_ASSERT_EQUAL_FATAL(dm_flock_halo_unpack(&halo, msg, size, 2), DM_OK);
        size_t at = 0, live = 0;
        for (int m = 0; m < 2; m++)
            for (uint32_t i = (uint32_t)m; i < N; i += 2) {
                if (!cur[i]) continue;
                CU_ASSERT_FATAL(at < halo.n);
                CU_ASSERT_EQUAL(halo.id[at], i);
                CU_ASSERT_EQUAL(halo.x[at], (double)i);
                CU_ASSERT_EQUAL(halo.vx[at], 0.5 * i);
                CU_ASSERT_EQUAL_FATAL(halo.vlen[at], i % 6);
                for (uint32_t k = 0; k < halo.vlen[at]; k++) {
                    CU_ASSERT_EQUAL(halo.col[halo.voff[at] + k], i * 10 + k);
                    CU_ASSERT_EQUAL(halo.val[halo.voff[at] + k], (float)i + 0.25f * (float)k);
                }
                live += halo.vlen[at];
                at++;
            }
        CU_ASSERT_EQUAL(at, halo.n);
        CU_ASSERT_EQUAL(live, halo.live);
        CU_ASSERT_TRUE(halo.pool <= 2 * halo.live + 4096);
        /* a message with left-out vectors is not a migration message */
        if (round == 1) CU_ASSERT_EQUAL(dm_flock_msg_unpack(&src, msg[0], size[0]), DM_ERR_FORMAT);
        free(msg[0]), free(msg[1]);
        memcpy(prev, cur, N);
    }
    CU_ASSERT_TRUE(halo.compactions > comp0);
    CU_ASSERT_TRUE(2 * sent_vec < sent); /* the cache saved most vectors */
    CU_ASSERT_EQUAL(src.n, (size_t)N);
    /* a left-out vector of a document the receiver does not hold */
    uint32_t i = 0;
    while (i < N && prev[i]) i++;
    CU_ASSERT_FATAL(i < N);
    idx[0] = i;
    with[0] = 0;
    dm_flock_msg_layout l;
    dm_flock_msg_layout_of(&l, 1, 0);
    char *bad = malloc(l.total);
    dm_flock_msg_pack(bad, &src, idx, 1, with, NULL);
    uint64_t bsize = l.total;
    CU_ASSERT_EQUAL(dm_flock_halo_unpack(&halo, &bad, &bsize, 1), DM_ERR_FORMAT);
    CU_ASSERT_EQUAL(halo.n, 0);
    free(bad);
    free(prev), free(cur), free(with), free(idx);
    dm_flock_store_free(&src);
    dm_flock_store_free(&halo);
}

static void test_halo_cache(void) { halo_cache(3000); }
static void test_halo_cache_large(void)
{
    CU_ASSERT_FATAL(40000 * 3 / 10 > DM_FLOCK_IDMAP_PAR_MIN);
    halo_cache(40000);
}

/* The id map at the sizes of a halo (built in parallel) and below: every id maps to its index
 * with every thread count, absent ids (also those of an earlier, larger build) do not, and a
 * build after a larger one forgets it. */
static void test_idmap_parallel(void)
{
    const size_t n = 3 * DM_FLOCK_IDMAP_PAR_MIN + 77;
    uint64_t *id = malloc(sizeof *id * n);
    CU_ASSERT_FATAL(id != NULL);
    /* scattered, distinct, with runs of neighbours (the ids of a slice are dense) */
    for (size_t k = 0; k < n; k++) id[k] = k % 3 ? 1000000 + (k * 2654435761u) % 1000003 * 8 + k % 3 : 7 * k;
    dm_flock_idmap mp = {0};
    for (int t = 0; t < 4; t++) {
        mp.threads = t;
        size_t sizes[2] = {n, DM_FLOCK_IDMAP_PAR_MIN - 1};
        for (int b = 0; b < 2; b++) {
            size_t m = sizes[b];
            CU_ASSERT_EQUAL_FATAL(dm_flock_idmap_build(&mp, id, m), DM_OK);
            CU_ASSERT_EQUAL(mp.n, m);
            CU_ASSERT_TRUE(mp.cap >= 2 * m);
            size_t bad = 0, used = 0;
            for (size_t k = 0; k < n; k++) bad += dm_flock_idmap_get(&mp, id[k]) != (k < m ? (uint32_t)k : UINT32_MAX);
            for (size_t h = 0; h < mp.cap; h++) used += mp.key[h] != UINT64_MAX;
            CU_ASSERT_EQUAL(bad, 0);
            CU_ASSERT_EQUAL(used, m); /* each id in one slot */
            CU_ASSERT_EQUAL(dm_flock_idmap_get(&mp, 999999), UINT32_MAX);
        }
    }
    dm_flock_idmap_free(&mp);
    free(id);
}

/* A message packed with the selection's states (the CUDA backend's selection: the store's states
 * are stale) is byte for byte the message packed from a store holding those states, with and
 * without vectors, on any threads. */
/* The synthetic vectors by their definition (flock_synth.c's header): document gid's words
 * drawn by a binary search of the whole Zipf CDF, sorted, counted, weighted. The generator
 * draws through bucket tables and sorts by radix: the same bits. */
static int cmp_word(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int synth_row_matches(const dm_vectors *v, const dm_flock_synth_options *o, uint64_t d)
{
    double *cdf[2];
    int nv[2] = {o->topic_vocab, o->shared_vocab};
    for (int k = 0; k < 2; k++) {
        cdf[k] = malloc(sizeof(double) * (size_t)nv[k]);
        double acc = 0;
        for (int r = 0; r < nv[k]; r++) cdf[k][r] = acc += 1.0 / pow((double)(r + 1), o->zipf);
        for (int r = 0; r < nv[k]; r++) cdf[k][r] /= acc;
    }
    const uint64_t gid = v->row_base + d;
    const int topic = dm_flock_synth_topic(o, gid);
    const uint32_t base = (uint32_t)o->topics * (uint32_t)o->topic_vocab;
    uint32_t *w = malloc(sizeof *w * (size_t)o->tokens);
    for (int t = 0; t < o->tokens; t++) {
        dm_philox4 r = dm_rng4(o->seed ^ 0x5eed5eedULL, gid, (uint64_t)t);
        double u0 = r.v[0] * (1.0 / 4294967296.0), u1 = (r.v[1] + 0.5) * (1.0 / 4294967296.0);
        int k = u0 < o->overlap, lo = 0, hi = nv[k] - 1;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (cdf[k][mid] < u1) lo = mid + 1;
            else hi = mid;
        }
        w[t] = k ? base + (uint32_t)lo : (uint32_t)topic * (uint32_t)o->topic_vocab + (uint32_t)lo;
    }
    qsort(w, (size_t)o->tokens, sizeof *w, cmp_word);
    int ok = 1;
    uint64_t q = v->row_off[d];
    for (int t = 0; t < o->tokens && ok;) {
        int e = t;
        while (e < o->tokens && w[e] == w[t]) e++;
        uint32_t rank = w[t] >= base ? w[t] - base : w[t] % (uint32_t)o->topic_vocab;
        float val = (float)((1.0 + log((double)(e - t))) * (1.0 + log(1.0 + rank)));
        ok = q < v->row_off[d + 1] && v->col[q] == w[t] && v->val[q] == val;
        q++;
        t = e;
    }
    ok = ok && q == v->row_off[d + 1];
    free(w);
    free(cdf[0]);
    free(cdf[1]);
    return ok;
}

static void test_synth_definition(void)
{
    dm_flock_synth_options so[4];
    for (int c = 0; c < 4; c++) so[c] = (dm_flock_synth_options)DM_FLOCK_SYNTH_OPTIONS_INIT;
    so[1].tokens = 80, so[1].seed = 7;
    so[2].topics = 3, so[2].topic_vocab = 300, so[2].shared_vocab = 70000, so[2].overlap = 0.9, so[2].zipf = 1.3;
    so[3].topics = 1, so[3].topic_vocab = 1, so[3].shared_vocab = 1, so[3].tokens = 5;
    for (int c = 0; c < 4; c++) {
        dm_vectors v;
        CU_ASSERT_EQUAL_FATAL(dm_flock_synth_vectors(&v, &so[c], 1000 * (uint64_t)c, 400), DM_OK);
        int bad = 0;
        for (uint64_t d = 0; d < 400; d++) bad += !synth_row_matches(&v, &so[c], d);
        CU_ASSERT_EQUAL(bad, 0);
        dm_flock_vectors_release(&v);
    }
}

/* The tuning workloads' documents: rows appended on threads, unit length, equal bit for bit to
 * pushing them one by one with val / sqrt(sum of squares); appended after boids already there. */
static void test_store_unit_rows(void)
{
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.tokens = 80;
    dm_vectors v;
    const size_t n = 5000;
    CU_ASSERT_EQUAL_FATAL(dm_flock_synth_vectors(&v, &so, 0, n), DM_OK);
    double *st = malloc(sizeof *st * 4 * n);
    CU_ASSERT_FATAL(st != NULL);
    for (size_t i = 0; i < 4 * n; i++) st[i] = 0.001 * (double)i - 3.0;
    const uint32_t col0[2] = {5, 9};
    const float val0[2] = {1.0f, 2.0f};
    dm_flock_store ref;
    dm_flock_store_init(&ref);
    CU_ASSERT_EQUAL_FATAL(dm_flock_store_push(&ref, 77, 1, 2, 3, 4, col0, val0, 2), DM_OK);
    float *u = malloc(sizeof *u * (v.row_off[n] + 1));
    CU_ASSERT_FATAL(u != NULL);
    for (size_t i = 0; i < n; i++) {
        uint64_t a = v.row_off[i], e = v.row_off[i + 1];
        double ss = 0;
        for (uint64_t q = a; q < e; q++) ss += (double)v.val[q] * v.val[q];
        for (uint64_t q = a; q < e; q++) u[q] = (float)(v.val[q] / sqrt(ss));
        CU_ASSERT_EQUAL_FATAL(dm_flock_store_push(&ref, 1000 + i, st[i], st[n + i], st[2 * n + i], st[3 * n + i],
                                                  v.col + a, u + a, (uint32_t)(e - a)), DM_OK);
    }
    for (int t = 1; t <= 3; t += 2) {
        dm_flock_store got;
        dm_flock_store_init(&got);
        got.copy_threads = t;
        CU_ASSERT_EQUAL_FATAL(dm_flock_store_push(&got, 77, 1, 2, 3, 4, col0, val0, 2), DM_OK);
        CU_ASSERT_EQUAL_FATAL(dm_flock_store_append_unit_rows(&got, &v, 1000, st, st + n, st + 2 * n, st + 3 * n),
                              DM_OK);
        CU_ASSERT_EQUAL_FATAL(got.n, n + 1);
        CU_ASSERT_EQUAL_FATAL(got.pool, ref.pool);
        CU_ASSERT_EQUAL(got.live, ref.live);
        CU_ASSERT(memcmp(got.id, ref.id, 8 * (n + 1)) == 0);
        CU_ASSERT(memcmp(got.x, ref.x, 8 * (n + 1)) == 0 && memcmp(got.y, ref.y, 8 * (n + 1)) == 0);
        CU_ASSERT(memcmp(got.vx, ref.vx, 8 * (n + 1)) == 0 && memcmp(got.vy, ref.vy, 8 * (n + 1)) == 0);
        CU_ASSERT(memcmp(got.voff, ref.voff, 8 * (n + 1)) == 0 && memcmp(got.vlen, ref.vlen, 4 * (n + 1)) == 0);
        CU_ASSERT(memcmp(got.col, ref.col, 4 * ref.pool) == 0 && memcmp(got.val, ref.val, 4 * ref.pool) == 0);
        /* unit length */
        double ss = 0;
        for (uint64_t q = got.voff[n]; q < got.voff[n] + got.vlen[n]; q++) ss += (double)got.val[q] * got.val[q];
        CU_ASSERT(fabs(ss - 1.0) < 1e-5);
        dm_flock_store_free(&got);
    }
    free(u);
    free(st);
    dm_flock_store_free(&ref);
    dm_flock_vectors_release(&v);
}

static void test_msg_pack_state(void)
{
    enum { N = 20000 };
    dm_flock_store st;
    dm_flock_store_init(&st);
    for (uint32_t i = 0; i < N; i++) {
        uint32_t col[3] = {i, i + 1, i + 7}, len = i % 4;
        float val[3] = {1.0f, -0.5f, 0.25f};
        CU_ASSERT_EQUAL_FATAL(dm_flock_store_push(&st, 100 + i, 0.5 * i, -1.0 * i, 0.25 * i, 3.0 - i, col, val, len),
                              DM_OK);
    }
    uint32_t *idx = malloc(sizeof *idx * N);
    uint8_t *with = malloc(N);
    double *state = malloc(sizeof *state * 4 * N);
    CU_ASSERT_FATAL(idx != NULL && with != NULL && state != NULL);
    size_t m = 0, nnz = 0;
    for (uint32_t i = 0; i < N; i++)
        if (i < 300 || i >= N - 300 || (i * 2654435761u) % 5 == 0) {
            with[m] = (uint8_t)(i % 3 != 0);
            if (with[m]) nnz += st.vlen[i];
            state[4 * m] = st.x[i], state[4 * m + 1] = st.y[i], state[4 * m + 2] = st.vx[i], state[4 * m + 3] = st.vy[i];
            idx[m++] = i;
        }
    dm_flock_msg_layout l;
    dm_flock_msg_layout_of(&l, m, nnz);
    char *ref = calloc(1, l.total), *got = calloc(1, l.total);
    CU_ASSERT_FATAL(ref != NULL && got != NULL);
    dm_flock_msg_pack(ref, &st, idx, m, with, NULL);
    /* the store's states stale: only the given ones may reach the message */
    for (uint32_t i = 0; i < N; i++) st.x[i] = st.y[i] = st.vx[i] = st.vy[i] = -7.0;
    for (int t = 0; t < 4; t++) {
        st.copy_threads = t;
        memset(got, 0xAB, l.total);
        dm_flock_msg_pack(got, &st, idx, m, with, state);
        CU_ASSERT_EQUAL(memcmp(ref, got, l.total), 0);
    }
    /* and the message decodes to the given states */
    dm_flock_store back;
    dm_flock_store_init(&back);
    CU_ASSERT_EQUAL(dm_flock_msg_unpack_cached(&back, got, l.total, &st), DM_OK);
    CU_ASSERT_EQUAL_FATAL(back.n, m);
    size_t bad = 0;
    for (size_t k = 0; k < m; k++)
        bad += back.id[k] != 100 + idx[k] || back.x[k] != state[4 * k] || back.y[k] != state[4 * k + 1] ||
               back.vx[k] != state[4 * k + 2] || back.vy[k] != state[4 * k + 3] || back.vlen[k] != idx[k] % 4;
    CU_ASSERT_EQUAL(bad, 0);
    dm_flock_store_free(&back);
    free(ref);
    free(got);
    free(idx);
    free(with);
    free(state);
    dm_flock_store_free(&st);
}

/* Migrants' vectors kept by their sender: the departures' vectors, appended to the halo store from
 * the own pool (where, removed, they are garbage), serve the next halo message, which leaves them
 * out; the removal's compaction is predicted exactly; the receiver's "sent" map takes the
 * arrivals after the last message's documents (indices from its size on), through the rebuild of a
 * full table too. */
/* Document d of test_departed_cache: d % 7 terms (0: an empty document), known values. */
static int push_departed_doc(dm_flock_store *s, uint32_t d)
{
    uint32_t col[8], len = d % 7;
    float val[8];
    for (uint32_t k = 0; k < len; k++) {
        col[k] = d * 10 + k;
        val[k] = (float)d - 0.5f * (float)k;
    }
    return dm_flock_store_push(s, d, d, 2.0 * d, 0, 0, col, val, len);
}

static void test_departed_cache(void)
{
    enum { N = 2000 };
    dm_flock_store own, halo;
    dm_flock_store_init(&own);
    dm_flock_store_init(&halo);
    for (uint32_t i = 0; i < N; i++) CU_ASSERT_EQUAL_FATAL(push_departed_doc(&own, i), DM_OK);
    uint32_t *rm = malloc(4 * N), *idx = malloc(4 * N);
    uint64_t *id = malloc(8 * N), *voff = malloc(8 * N);
    uint32_t *vlen = malloc(4 * N);
    uint8_t *with = malloc(N);
    int compacted_rounds = 0;
    for (int round = 0; round < 8; round++) {
        own.copy_threads = halo.copy_threads = round % 3; /* all threads, 1 and 2 */
        /* departures: every 3rd boid from a rotating start, ascending */
        size_t m = 0, nnz = 0;
        for (size_t i = (size_t)round % 3; i < own.n; i += 3) rm[m++] = (uint32_t)i;
        for (size_t k = 0; k < m; k++) {
            id[k] = own.id[rm[k]];
            voff[k] = own.voff[rm[k]];
            vlen[k] = own.vlen[rm[k]];
            nnz += vlen[k];
        }
        halo.n = 0; /* a fresh halo: only the departures */
        halo.pool = halo.live = 0;
        halo.compactions++;
        int compacts = dm_flock_store_removal_compacts(&own, nnz);
        if (compacts) CU_ASSERT_EQUAL_FATAL(dm_flock_store_append_vectors(&halo, &own, id, voff, vlen, m), DM_OK);
        uint64_t c0 = own.compactions;
        CU_ASSERT_EQUAL_FATAL(dm_flock_store_remove_list(&own, rm, m, NULL, NULL, NULL), DM_OK);
        CU_ASSERT_EQUAL(own.compactions != c0, compacts); /* the prediction was right */
        compacted_rounds += compacts;
        /* not compacted: the removed vectors are still in place, copied from there */
        if (!compacts) CU_ASSERT_EQUAL_FATAL(dm_flock_store_append_vectors(&halo, &own, id, voff, vlen, m), DM_OK);
        CU_ASSERT_EQUAL(halo.n, m);
        /* the next halo message carries the departures without their vectors (and positions) */
        for (size_t k = 0; k < m; k++) idx[k] = (uint32_t)k, with[k] = 0;
        dm_flock_msg_layout l;
        dm_flock_msg_layout_of(&l, m, 0);
        char *msg = malloc(l.total);
        dm_flock_msg_pack(msg, &halo, idx, m, with, NULL);
        uint64_t size = l.total;
        CU_ASSERT_EQUAL_FATAL(dm_flock_halo_unpack(&halo, &msg, &size, 1), DM_OK);
        CU_ASSERT_EQUAL_FATAL(halo.n, m);
        for (size_t k = 0; k < m; k++) {
            uint32_t d = (uint32_t)halo.id[k];
            CU_ASSERT_EQUAL(d, id[k]);
            CU_ASSERT_EQUAL_FATAL(halo.vlen[k], d % 7);
            for (uint32_t j = 0; j < halo.vlen[k]; j++) {
                CU_ASSERT_EQUAL(halo.col[halo.voff[k] + j], d * 10 + j);
                CU_ASSERT_EQUAL(halo.val[halo.voff[k] + j], (float)d - 0.5f * (float)j);
            }
        }
        free(msg);
        /* the departures come back (as arrivals elsewhere would): own keeps N boids */
        for (size_t k = 0; k < m; k++) CU_ASSERT_EQUAL_FATAL(push_departed_doc(&own, (uint32_t)id[k]), DM_OK);
    }
    CU_ASSERT_TRUE(compacted_rounds > 0 && compacted_rounds < 8); /* both ways were taken */
    /* the "sent" map: 100 documents of a message, then arrivals in batches (the last ones past half
     * the table: rebuilt larger) */
    dm_flock_idmap mp = {0};
    for (size_t k = 0; k < 100; k++) id[k] = 1000 + 3 * k;
    CU_ASSERT_EQUAL_FATAL(dm_flock_idmap_build(&mp, id, 100), DM_OK);
    size_t cap0 = mp.cap, at = 100;
    for (int batch = 0; batch < 6; batch++) {
        size_t m = 20 + 40 * (size_t)batch;
        for (size_t k = 0; k < m; k++) id[at + k] = 5000000 + 7 * (at + k);
        CU_ASSERT_EQUAL_FATAL(dm_flock_idmap_add(&mp, id + at, m), DM_OK);
        at += m;
    }
    CU_ASSERT_TRUE(mp.cap > cap0);
    CU_ASSERT_EQUAL(mp.n, at);
    CU_ASSERT_TRUE(mp.cap >= 2 * mp.n);
    for (size_t k = 0; k < at; k++) {
        uint32_t e = dm_flock_idmap_get(&mp, id[k]);
        CU_ASSERT_TRUE(e != UINT32_MAX);
        CU_ASSERT_EQUAL(e < 100, k < 100); /* the message's documents below its size, arrivals above */
    }
    CU_ASSERT_EQUAL(dm_flock_idmap_get(&mp, 1001), UINT32_MAX);
    CU_ASSERT_EQUAL(dm_flock_idmap_get(&mp, 5000001), UINT32_MAX);
    /* a build that cannot grow the table leaves an empty map (no stale key for a later add), and
     * clearing allocates nothing (it runs while unwinding an error: it must not record another) */
    dm_alloc_fail_at(1);
    CU_ASSERT_EQUAL(dm_flock_idmap_build(&mp, id, 4 * mp.cap), DM_ERR_NOMEM);
    dm_alloc_fail_at(0);
    CU_ASSERT_EQUAL(mp.n, 0);
    CU_ASSERT_EQUAL(dm_flock_idmap_get(&mp, id[0]), UINT32_MAX);
    CU_ASSERT_EQUAL_FATAL(dm_flock_idmap_add(&mp, id + 7, 3), DM_OK);
    CU_ASSERT_EQUAL(mp.n, 3);
    for (size_t k = 0; k < at; k++)
        CU_ASSERT_EQUAL(dm_flock_idmap_get(&mp, id[k]), k >= 7 && k < 10 ? (uint32_t)(k - 7) : UINT32_MAX);
    dm_flock_idmap_free(&mp);
    dm_flock_idmap fresh = {0};
    dm_error_clear();
    dm_alloc_fail_at(1);
    dm_flock_idmap_clear(&fresh);
    dm_flock_idmap_clear(&mp);
    CU_ASSERT_EQUAL(dm_alloc_count(), 0);
    dm_alloc_fail_at(0);
    CU_ASSERT_EQUAL(dm_error_code(), DM_OK);
    CU_ASSERT_EQUAL(dm_flock_idmap_get(&fresh, 5), UINT32_MAX);
    free(rm), free(idx), free(id), free(voff), free(vlen), free(with);
    dm_flock_store_free(&own);
    dm_flock_store_free(&halo);
}

/* ---- hand-checked forces and updates -------------------------------------------------------- */

#define W_SEP 0.1
#define W_DIS 0.2
#define W_ALI 0.5
#define W_COH 0.2
#define VMAX 0.5

static dm_flock_options hand_options(int iterations)
{
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = iterations;
    o.radius = 1.0;
    o.neighbours = 0.1; /* 4 documents: area 4 pi / 0.1, side 11.21 */
    o.threshold = 0.5;
    o.w_separation = W_SEP;
    o.w_dissimilar = W_DIS;
    o.w_alignment = W_ALI;
    o.w_cohesion = W_COH;
    o.v_max = VMAX;
    o.shrink = 0.0;
    o.min_dist = 0.05;
    return o;
}

/* The expected update of one boid (the model written out by hand for the test). */
static void expect_update(double *x, double *y, double *vx, double *vy, double sx, double sy, double dx_, double dy_,
                          int n_sim, double mvx, double mvy, double cx, double cy, double W, double H)
{
    double fx = W_SEP * sx + W_DIS * dx_, fy = W_SEP * sy + W_DIS * dy_;
    if (n_sim) {
        fx += W_ALI * (mvx - *vx) + W_COH * cx;
        fy += W_ALI * (mvy - *vy) + W_COH * cy;
    }
    double nvx = *vx + fx, nvy = *vy + fy, sp = sqrt(nvx * nvx + nvy * nvy);
    if (sp > VMAX) {
        nvx *= VMAX / sp;
        nvy *= VMAX / sp;
    }
    *vx = nvx;
    *vy = nvy;
    *x = fmod(*x + nvx + W, W);
    *y = fmod(*y + nvy + H, H);
}

/* Four boids: 0 at (5, 5) v (0.1, 0); 1 at (5.5, 5) v (0, 0.2), similar to 0 (cosine 0.8);
 * 2 at (5, 4.6) at rest, dissimilar to both; 3 alone at (1, 1) v (0.05, 0.05). All three of
 * 0, 1, 2 are within r = 1 of each other. Shifted by (sx, sy) on the torus. */
static void run_hand(double shift_x, double shift_y)
{
    dm_flock_options o = hand_options(10);
    const uint64_t off[] = {0, 1, 3, 4, 5};
    const uint32_t col[] = {0, 0, 1, 2, 3};
    const float val[] = {1.0f, 0.8f, 0.6f, 1.0f, 1.0f};
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_vectors(&v, 4, off, col, val, 0), DM_OK);
    double W = sqrt(4 * 3.141592653589793 / 0.1), H = W;
    double x[4] = {5, 5.5, 5, 1}, y[4] = {5, 5, 4.6, 1}, vx[4] = {0.1, 0, 0, 0.05}, vy[4] = {0, 0.2, 0, 0.05};
    for (int i = 0; i < 4; i++) {
        x[i] = fmod(x[i] + shift_x, W);
        y[i] = fmod(y[i] + shift_y, H);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/hand.ck", g_tmp);
    CU_ASSERT_EQUAL_FATAL(ft_write_checkpoint(path, &o, &v, 0, x, y, vx, vy), DM_OK);
    o.resume = 1;
    o.checkpoint = path;
    dm_flock_sim *s;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_OK);
    double pw, ph;
    dm_flock_sim_plane(s, &pw, &ph);
    CU_ASSERT_DOUBLE_EQUAL(pw, W, 1e-12);
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_step(s), DM_OK);
    ft_state st;
    CU_ASSERT_EQUAL_FATAL(ft_gather(&st, s, &g_ctx), DM_OK);

    /* boid 0: sep_S from 1 = (-0.5, 0)/0.25; sep_D from 2 = (0, 0.4)/0.16; align (0, 0.2);
     * cohesion (0.5, 0) -> v' = (-0.05, 0.6), clamped to 0.5 */
    double ex = x[0], ey = y[0], evx = vx[0], evy = vy[0];
    expect_update(&ex, &ey, &evx, &evy, -0.5 / 0.25, 0, 0, 0.4 / 0.16, 1, 0, 0.2, 0.5, 0, W, H);
    CU_ASSERT_DOUBLE_EQUAL(sqrt(evx * evx + evy * evy), VMAX, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(st.vx[0], evx, 1e-8);
    CU_ASSERT_DOUBLE_EQUAL(st.vy[0], evy, 1e-8);
    CU_ASSERT_DOUBLE_EQUAL(st.x[0], ex, 1e-8);
    CU_ASSERT_DOUBLE_EQUAL(st.y[0], ey, 1e-8);
    /* boid 1: sep_S from 0 = (0.5, 0)/0.25; sep_D from 2 = (0.5, 0.4)/0.41; align (0.1, 0) - v;
     * cohesion (-0.5, 0) -> v' = (0.3939, 0.2951), under the cap */
    ex = x[1], ey = y[1], evx = vx[1], evy = vy[1];
    expect_update(&ex, &ey, &evx, &evy, 0.5 / 0.25, 0, 0.5 / 0.41, 0.4 / 0.41, 1, 0.1, 0, -0.5, 0, W, H);
    CU_ASSERT_TRUE(sqrt(evx * evx + evy * evy) < VMAX);
    CU_ASSERT_DOUBLE_EQUAL(st.vx[1], evx, 1e-8);
    CU_ASSERT_DOUBLE_EQUAL(st.vy[1], evy, 1e-8);
    CU_ASSERT_DOUBLE_EQUAL(st.x[1], ex, 1e-8);
    CU_ASSERT_DOUBLE_EQUAL(st.y[1], ey, 1e-8);
    /* boid 2: only dissimilar neighbours: sep_D = (0, -0.4)/0.16 + (-0.5, -0.4)/0.41, clamped */
    ex = x[2], ey = y[2], evx = vx[2], evy = vy[2];
    expect_update(&ex, &ey, &evx, &evy, 0, 0, -0.5 / 0.41, -0.4 / 0.16 - 0.4 / 0.41, 0, 0, 0, 0, 0, W, H);
    CU_ASSERT_DOUBLE_EQUAL(st.vx[2], evx, 1e-8);
    CU_ASSERT_DOUBLE_EQUAL(st.vy[2], evy, 1e-8);
    CU_ASSERT_DOUBLE_EQUAL(st.x[2], ex, 1e-8);
    CU_ASSERT_DOUBLE_EQUAL(st.y[2], ey, 1e-8);
    /* boid 3: no neighbours: keeps its velocity */
    CU_ASSERT_EQUAL(st.vx[3], vx[3]);
    CU_ASSERT_EQUAL(st.vy[3], vy[3]);
    CU_ASSERT_DOUBLE_EQUAL(st.x[3], fmod(x[3] + 0.05, W), 1e-12);
    /* ordered pairs within r: 0-1, 0-2, 1-2 both ways; similar: 0-1 both ways */
    CU_ASSERT_EQUAL(st.stats.pairs, 6);
    CU_ASSERT_EQUAL(st.stats.similar, 2);
    ft_state_free(&st);
    dm_flock_sim_free(s);
    dm_flock_vectors_release(&v);
}

static void test_hand_forces(void) { run_hand(0, 0); }
/* the same configuration across the torus corner: boid 0 at (W - 0.2, H - 0.1), boid 1 across the
 * x seam, boid 2 next to it: the interactions must be identical */
static void test_hand_forces_seam(void)
{
    double W = sqrt(4 * 3.141592653589793 / 0.1);
    run_hand(W - 5.2, W - 5.1);
}

/* Halo directions on a torus of height 10 with margin 1.5, also of boids that left their slice
 * since the last migration: they count from the nearer edge, across the seam too. */
static void test_halo_dirs(void)
{
    /* slice [2, 6): inside, near either edge, and outside by 0.2 / 0.3 */
    CU_ASSERT_EQUAL(dm_flock_halo_dirs_hd(4.0, 2, 6, 1.5, 10), 0);
    CU_ASSERT_EQUAL(dm_flock_halo_dirs_hd(2.5, 2, 6, 1.5, 10), 1);
    CU_ASSERT_EQUAL(dm_flock_halo_dirs_hd(5.0, 2, 6, 1.5, 10), 2);
    CU_ASSERT_EQUAL(dm_flock_halo_dirs_hd(1.8, 2, 6, 1.5, 10), 1);
    CU_ASSERT_EQUAL(dm_flock_halo_dirs_hd(6.3, 2, 6, 1.5, 10), 2);
    /* the first slice [0, 4): a boid that crossed the seam downwards lies at 9.8, below it */
    CU_ASSERT_EQUAL(dm_flock_halo_dirs_hd(9.8, 0, 4, 1.5, 10), 1);
    CU_ASSERT_EQUAL(dm_flock_halo_dirs_hd(4.4, 0, 4, 1.5, 10), 2);
    /* the last slice [6, 10): one that crossed upwards lies at 0.3, above it */
    CU_ASSERT_EQUAL(dm_flock_halo_dirs_hd(0.3, 6, 10, 1.5, 10), 2);
    CU_ASSERT_EQUAL(dm_flock_halo_dirs_hd(5.7, 6, 10, 1.5, 10), 1);
    /* a slice thinner than two margins: both edges */
    CU_ASSERT_EQUAL(dm_flock_halo_dirs_hd(5.2, 4, 6.5, 1.5, 10), 3);
}

static void test_pair_contribution(void)
{
    /* one neighbour closer than the softening distance: pushes as if at min_dist */
    dm_flock_params p;
    memset(&p, 0, sizeof p);
    p.r2 = 1;
    p.dmin2 = 0.01; /* min distance 0.1 */
    dm_flock_acc a;
    dm_flock_acc_zero(&a);
    dm_flock_acc_add(&a, &p, 0.01, 0, 0.0001, 0, 0, 0);
    CU_ASSERT_DOUBLE_EQUAL(dm_flock_unfix(a.sep_d[0]), -0.01 / 0.01, 1e-9);
    CU_ASSERT_EQUAL(a.n_dis, 1);
    CU_ASSERT_EQUAL(a.n_sim, 0);
    /* coincident boids exert no force (no direction) */
    dm_flock_acc_zero(&a);
    dm_flock_acc_add(&a, &p, 0, 0, 0, 0.3, 0.1, 1);
    CU_ASSERT_EQUAL(a.sep_s[0], 0);
    CU_ASSERT_EQUAL(a.sep_s[1], 0);
    CU_ASSERT_DOUBLE_EQUAL(dm_flock_unfix(a.vel[0]), 0.3, 1e-9);
    /* fixed point: sums in any order are identical */
    dm_flock_acc a1, a2;
    dm_flock_acc_zero(&a1);
    dm_flock_acc_zero(&a2);
    double d[5][2] = {{0.1, 0.3}, {-0.4, 0.2}, {0.7, -0.1}, {0.05, 0.6}, {-0.3, -0.3}};
    for (int i = 0; i < 5; i++) dm_flock_acc_add(&a1, &p, d[i][0], d[i][1], d[i][0] * d[i][0] + d[i][1] * d[i][1], d[i][1], d[i][0], i & 1);
    for (int i = 4; i >= 0; i--) dm_flock_acc_add(&a2, &p, d[i][0], d[i][1], d[i][0] * d[i][0] + d[i][1] * d[i][1], d[i][1], d[i][0], i & 1);
    CU_ASSERT_EQUAL(memcmp(&a1, &a2, sizeof a1), 0);
    /* wrap */
    CU_ASSERT_EQUAL(dm_flock_wrap(10.25, 10.0), 10.25 - 10.0);
    CU_ASSERT_EQUAL(dm_flock_wrap(-0.5, 10.0), 9.5);
    CU_ASSERT_EQUAL(dm_flock_wrap(-1e-300, 10.0), 0.0);
    CU_ASSERT_EQUAL(dm_flock_min_image(9.0, 10.0, 5.0), -1.0);
    CU_ASSERT_EQUAL(dm_flock_min_image(-9.5, 10.0, 5.0), 0.5);
}

/* ---- grid vs brute force ---------------------------------------------------------------------- */

/* Steps the simulation `iters` times and checks each step against an O(N^2) evaluation of the
 * model from the same state: positions and velocities must be bit-identical. */
static void grid_vs_brute_vocab(uint64_t n, double neighbours, int iters, double shrink, int topic_vocab)
{
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.topics = 3;
    so.tokens = 40;
    so.topic_vocab = topic_vocab;
    so.shared_vocab = 300;
    so.seed = 11;
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_synth_share(&v, &so, n, 0, 1), DM_OK);
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = 20;
    o.neighbours = neighbours;
    o.shrink = shrink;
    o.threshold = 0.15;
    o.seed = 5;
    dm_flock_sim *s;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_OK);
    dm_flock_store *own = &s->own;
    size_t m = own->n;
    CU_ASSERT_EQUAL_FATAL(m, n);
    double *x = malloc(8 * m), *y = malloc(8 * m), *vx = malloc(8 * m), *vy = malloc(8 * m);
    uint64_t *id = malloc(8 * m);
    dm_flock_acc *acc = malloc(sizeof *acc * m);
    uint64_t total_pairs = 0, brute_pairs = 0;
    for (int it = 0; it < iters; it++) {
        dm_flock_params p;
        CU_ASSERT_EQUAL_FATAL(dm_flock_params_at(&p, s, s->iteration), DM_OK);
        memcpy(x, own->x, 8 * m);
        memcpy(y, own->y, 8 * m);
        memcpy(vx, own->vx, 8 * m);
        memcpy(vy, own->vy, 8 * m);
        memcpy(id, own->id, 8 * m);
        for (size_t i = 0; i < m; i++) {
            dm_flock_acc_zero(&acc[i]);
            for (size_t j = 0; j < m; j++) {
                if (i == j) continue;
                double dx, dy, d2 = dm_flock_offset(&p, x[i], y[i], x[j], y[j], &dx, &dy);
                if (!(d2 < p.r2)) continue;
                int64_t dot = dm_flock_dot_fix(own->col + own->voff[i], own->val + own->voff[i], own->vlen[i],
                                               own->col + own->voff[j], own->val + own->voff[j], own->vlen[j]);
                dm_flock_acc_add(&acc[i], &p, dx, dy, d2, vx[j], vy[j], dm_flock_is_similar(dot, p.threshold));
                brute_pairs++;
            }
        }
        for (size_t i = 0; i < m; i++) dm_flock_update(&p, &acc[i], &x[i], &y[i], &vx[i], &vy[i]);
        uint64_t before = s->stats.pairs;
        CU_ASSERT_EQUAL_FATAL(dm_flock_sim_step(s), DM_OK);
        total_pairs += s->stats.pairs - before;
        /* one rank: no migration, the order of own boids is unchanged */
        CU_ASSERT_EQUAL_FATAL(own->n, m);
        int same = 1;
        for (size_t i = 0; i < m; i++) {
            CU_ASSERT_EQUAL_FATAL(own->id[i], id[i]);
            if (own->x[i] != x[i] || own->y[i] != y[i] || own->vx[i] != vx[i] || own->vy[i] != vy[i]) same = 0;
        }
        CU_ASSERT_TRUE(same);
    }
    CU_ASSERT_EQUAL(total_pairs, brute_pairs);
    CU_ASSERT_TRUE(brute_pairs > 0);
    CU_ASSERT_TRUE(s->stats.similar > 0 && s->stats.similar < s->stats.pairs); /* both decisions occur */
    free(x);
    free(y);
    free(vx);
    free(vy);
    free(id);
    free(acc);
    dm_flock_sim_free(s);
    dm_flock_vectors_release(&v);
}

static void grid_vs_brute(uint64_t n, double neighbours, int iters, double shrink)
{
    grid_vs_brute_vocab(n, neighbours, iters, shrink, 200);
}

static void test_grid_vs_brute_large(void) { grid_vs_brute(1500, 15, 3, 0.5); }
/* term ids up to about 6300: the CPU backend's dense rows (4096 terms at first) grow */
static void test_grid_vs_brute_terms(void) { grid_vs_brute_vocab(600, 30, 3, 0.3, 2000); }
/* a 3 x 3 grid: every cell's neighbourhood wraps around the torus */
static void test_grid_vs_brute_3x3(void) { grid_vs_brute(50, 15, 5, 0.0); }
/* dense: many neighbours per boid and coincident-ish boids */
static void test_grid_vs_brute_dense(void) { grid_vs_brute(400, 60, 4, 0.3); }

static void test_edges_vs_brute(void)
{
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.topics = 2;
    so.tokens = 30;
    so.topic_vocab = 100;
    so.shared_vocab = 100;
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_synth_share(&v, &so, 700, 0, 1), DM_OK);
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = 10;
    o.threshold = 0.2;
    dm_flock_sim *s;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_OK);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL_FATAL(dm_flock_sim_step(s), DM_OK);
    dm_flock_params p;
    CU_ASSERT_EQUAL_FATAL(dm_flock_params_at(&p, s, s->iteration), DM_OK);
    size_t m = s->own.n;
    unsigned char *adj = malloc(m * m);
    /* the model's threshold, and a higher cluster threshold */
    const double thr[2] = {o.threshold, 0.35};
    size_t count[2] = {0, 0};
    for (int t = 0; t < 2; t++) {
        dm_flock_edges e;
        CU_ASSERT_EQUAL_FATAL(dm_flock_edges_cpu(&e, s, thr[t]), DM_OK);
        memset(adj, 0, m * m);
        for (size_t k = 0; k < e.n; k++) {
            CU_ASSERT_FALSE(e.halo[k]);
            CU_ASSERT_EQUAL(adj[(size_t)e.own[k] * m + e.nbr[k]], 0); /* no duplicates */
            adj[(size_t)e.own[k] * m + e.nbr[k]] = 1;
        }
        const dm_flock_store *w = &s->own;
        size_t expect = 0, bad = 0;
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < m; j++) {
                if (i == j) continue;
                double dx, dy, d2 = dm_flock_offset(&p, w->x[i], w->y[i], w->x[j], w->y[j], &dx, &dy);
                int64_t dot = dm_flock_dot_fix(w->col + w->voff[i], w->val + w->voff[i], w->vlen[i],
                                               w->col + w->voff[j], w->val + w->voff[j], w->vlen[j]);
                int want = d2 < p.r2 && dm_flock_is_similar(dot, thr[t]);
                expect += (size_t)want;
                bad += (size_t)(want != adj[i * m + j]);
            }
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT_EQUAL(e.n, expect);
        CU_ASSERT_TRUE(expect > 0);
        count[t] = e.n;
        dm_flock_edges_free(&e);
    }
    CU_ASSERT_TRUE(count[1] < count[0]);
    free(adj);
    dm_flock_sim_free(s);
    dm_flock_vectors_release(&v);
}

/* ---- determinism, cap, plane ---------------------------------------------------------------- */

static int same_state(const ft_state *a, const ft_state *b)
{
    return a->n == b->n && memcmp(a->x, b->x, 8 * a->n) == 0 && memcmp(a->y, b->y, 8 * a->n) == 0 &&
           memcmp(a->vx, b->vx, 8 * a->n) == 0 && memcmp(a->vy, b->vy, 8 * a->n) == 0;
}

static void test_determinism(void)
{
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.topics = 4;
    so.tokens = 50;
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = 15;
    ft_state a, b, c;
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    CU_ASSERT_EQUAL_FATAL(ft_run(&a, &g_ctx, &so, 600, &o, NULL), DM_OK);
    omp_set_num_threads(threads > 1 ? threads : 2);
    CU_ASSERT_EQUAL_FATAL(ft_run(&b, &g_ctx, &so, 600, &o, NULL), DM_OK);
    omp_set_num_threads(threads);
    CU_ASSERT_TRUE(same_state(&a, &b));
    o.seed = 43;
    CU_ASSERT_EQUAL_FATAL(ft_run(&c, &g_ctx, &so, 600, &o, NULL), DM_OK);
    CU_ASSERT_FALSE(same_state(&a, &c));
    ft_state_free(&a);
    ft_state_free(&b);
    ft_state_free(&c);
}

/* The CPU backend's pair cache: over 40 iterations the same trajectory, pairs and similar pairs
 * with it and without it (DOCMINE_FLOCK_CPU_CACHE=0), a wrong remembered decision would change
 * them; hits with it (the same with 1 and 2 threads), none without. */
static void test_cpu_pair_cache(void)
{
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.topics = 4;
    so.tokens = 60;
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = 40;
    o.threshold = 0.02;
    ft_state on, on1, off;
    int threads = omp_get_max_threads();
    omp_set_num_threads(threads > 1 ? threads : 2);
    CU_ASSERT_EQUAL_FATAL(ft_run(&on, &g_ctx, &so, 1500, &o, NULL), DM_OK);
    omp_set_num_threads(1);
    CU_ASSERT_EQUAL_FATAL(ft_run(&on1, &g_ctx, &so, 1500, &o, NULL), DM_OK);
    omp_set_num_threads(threads);
    setenv("DOCMINE_FLOCK_CPU_CACHE", "0", 1);
    int rc = ft_run(&off, &g_ctx, &so, 1500, &o, NULL);
    unsetenv("DOCMINE_FLOCK_CPU_CACHE");
    CU_ASSERT_EQUAL_FATAL(rc, DM_OK);
    printf("\n  CPU pair cache over %d iterations: %llu hits of %llu pairs (%llu similar)\n", o.iterations,
           (unsigned long long)on.stats.sim_cache_hits, (unsigned long long)on.stats.pairs,
           (unsigned long long)on.stats.similar);
    CU_ASSERT_TRUE(same_state(&on, &off));
    CU_ASSERT_TRUE(same_state(&on, &on1));
    CU_ASSERT_EQUAL(on.stats.pairs, off.stats.pairs);
    CU_ASSERT_EQUAL(on.stats.similar, off.stats.similar);
    CU_ASSERT_TRUE(on.stats.similar > 0 && on.stats.similar < on.stats.pairs);
    CU_ASSERT_TRUE(on.stats.sim_cache_hits > on.stats.pairs / 4);
    CU_ASSERT_EQUAL(on.stats.sim_cache_hits, on1.stats.sim_cache_hits);
    CU_ASSERT_EQUAL(off.stats.sim_cache_hits, 0);
    ft_state_free(&on);
    ft_state_free(&on1);
    ft_state_free(&off);
}

static int check_cap(dm_flock_sim *s, void *user)
{
    int *bad = user;
    dm_flock_view v;
    if (dm_flock_sim_view(s, &v) != DM_OK) return 1;
    double W, H;
    dm_flock_sim_plane(s, &W, &H);
    for (size_t i = 0; i < v.n; i++) {
        double sp = sqrt(v.vx[i] * v.vx[i] + v.vy[i] * v.vy[i]);
        if (sp > 0.5 * (1 + 1e-12)) bad[0]++;
        if (!(v.x[i] >= 0 && v.x[i] < W && v.y[i] >= 0 && v.y[i] < H)) bad[1]++;
    }
    return 0;
}

static void test_speed_cap_and_shrink(void)
{
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.topics = 3;
    so.tokens = 40;
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = 30;
    o.v_max = 0.5;
    o.shrink = 0.5;
    o.w_dissimilar = 2.0; /* strong pushes: the cap must bite */
    int bad[2] = {0, 0};
    o.on_iteration = check_cap;
    o.user = bad;
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_synth_share(&v, &so, 500, 0, 1), DM_OK);
    dm_flock_sim *s;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_OK);
    double W0, H0, W, H;
    dm_flock_sim_plane(s, &W0, &H0);
    CU_ASSERT_DOUBLE_EQUAL(W0 * H0, 500 * 3.141592653589793 / 15.0, 1e-9);
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_run(s), DM_OK);
    dm_flock_sim_plane(s, &W, &H);
    CU_ASSERT_DOUBLE_EQUAL(W, 0.5 * W0, 1e-12);
    CU_ASSERT_EQUAL(bad[0], 0);
    CU_ASSERT_EQUAL(bad[1], 0);
    /* someone hit the cap */
    dm_flock_view vw;
    CU_ASSERT_EQUAL(dm_flock_sim_view(s, &vw), DM_OK);
    int capped = 0;
    for (size_t i = 0; i < vw.n; i++) capped += fabs(sqrt(vw.vx[i] * vw.vx[i] + vw.vy[i] * vw.vy[i]) - 0.5) < 1e-12;
    CU_ASSERT_TRUE(capped > 0);
    dm_flock_sim_free(s);
    dm_flock_vectors_release(&v);
}

static void test_options_rejected(void)
{
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.tokens = 10;
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_synth_share(&v, &so, 300, 0, 1), DM_OK);
    dm_flock_sim *s = NULL;
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.v_max = 1.0; /* must be below r */
    CU_ASSERT_EQUAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NULL(s);
    o = (dm_flock_options)DM_FLOCK_OPTIONS_INIT;
    o.neighbours = 100; /* area 300 pi / 100, halved in side by the end: less than 3 x 3 cells */
    CU_ASSERT_EQUAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_ERR_INVALID_ARG);
    o = (dm_flock_options)DM_FLOCK_OPTIONS_INIT;
    o.checkpoint_every = 5; /* no file */
    CU_ASSERT_EQUAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_ERR_INVALID_ARG);
    o = (dm_flock_options)DM_FLOCK_OPTIONS_INIT;
    o.migrate_every = -1;
    CU_ASSERT_EQUAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_ERR_INVALID_ARG);
    /* one rank never migrates: any interval is accepted and K = 1 reported */
    o.migrate_every = 50;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_OK);
    CU_ASSERT_EQUAL(dm_flock_sim_migrate_every(s), 1);
    dm_flock_sim_free(s);
    s = NULL;
    /* unsorted rows are a format error */
    CU_ASSERT_TRUE_FATAL(v.row_off[1] >= 2);
    v.col[1] = v.col[0];
    o = (dm_flock_options)DM_FLOCK_OPTIONS_INIT;
    int rc = dm_flock_sim_init(&s, &g_ctx, &v, &o);
    CU_ASSERT_EQUAL(rc, DM_ERR_FORMAT);
    if (rc != DM_ERR_FORMAT) fprintf(stderr, "got %s: %s\n", dm_status_name(rc), dm_error_message());
    dm_flock_vectors_release(&v);
}

/* Whether the last error's message contains `what` (printed when not). */
static int message_has(const char *what)
{
    int ok = strstr(dm_error_message(), what) != NULL;
    if (!ok) fprintf(stderr, "expected '%s' in: %s\n", what, dm_error_message());
    return ok;
}

/* Options whose arithmetic would break, refused before anything runs, with a message naming the
 * option: weights that make the force infinite (the speed clamp then made every position NaN),
 * documents x radius beyond the fixed-point sums' range, and a --neighbours so small that the grid
 * would hold gigabytes of cells for a few documents; the plane too small for 3 x 3 cells advises
 * what changes the cell count (not --radius). */
static void test_options_bounds(void)
{
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.tokens = 10;
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_synth_share(&v, &so, 400, 0, 1), DM_OK);
    dm_flock_sim *s = NULL;
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = 3;
    o.w_dissimilar = 1e308;
    CU_ASSERT_EQUAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_ERR_INVALID_ARG);
    CU_ASSERT_TRUE(message_has("--weights"));
    /* at the bound: runs, every state finite */
    o.w_separation = o.w_dissimilar = o.w_alignment = o.w_cohesion = DM_FLOCK_WEIGHT_MAX;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_OK);
    CU_ASSERT_EQUAL(dm_flock_sim_run(s), DM_OK);
    int finite = 1;
    for (size_t i = 0; i < s->own.n; i++)
        finite &= isfinite(s->own.x[i]) && isfinite(s->own.y[i]) && isfinite(s->own.vx[i]) && isfinite(s->own.vy[i]);
    CU_ASSERT_TRUE(finite);
    dm_flock_sim_free(s);
    s = NULL;
    /* 400 documents x 6e8 > 2^30; 400 x 2^30 / 400 is the largest radius */
    o = (dm_flock_options)DM_FLOCK_OPTIONS_INIT;
    o.iterations = 3;
    o.radius = 6e8;
    CU_ASSERT_EQUAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_ERR_INVALID_ARG);
    CU_ASSERT_TRUE(message_has("--radius 6e+08 is too large for 400 documents"));
    o.radius = DM_FLOCK_DOCS_RADIUS_MAX / 400;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_OK);
    CU_ASSERT_EQUAL(dm_flock_sim_run(s), DM_OK);
    dm_flock_sim_free(s);
    s = NULL;
    /* 400 pi / 1e-6 cells (1.3e9) for 400 documents */
    o = (dm_flock_options)DM_FLOCK_OPTIONS_INIT;
    o.neighbours = 1e-6;
    CU_ASSERT_EQUAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_ERR_INVALID_ARG);
    CU_ASSERT_TRUE(message_has("--neighbours 1e-06 makes a plane of"));
    /* too small a plane: its cells do not depend on the radius */
    o.neighbours = 200;
    CU_ASSERT_EQUAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_ERR_INVALID_ARG);
    CU_ASSERT_TRUE(message_has("smaller than 3 x 3 cells"));
    CU_ASSERT_TRUE(message_has("--neighbours"));
    CU_ASSERT_PTR_NULL(strstr(dm_error_message(), "--radius"));
    CU_ASSERT_PTR_NULL(s);
    dm_flock_vectors_release(&v);
}

/* The update at the weights' bound and the most extreme sums an int64 holds stays finite, under
 * the speed cap; sums whose partial sums leave the int64 range (contributions of 2^30 each) wrap
 * instead of overflowing, and give the exact total in any order. */
static void test_update_extremes(void)
{
    dm_flock_params p;
    memset(&p, 0, sizeof p);
    p.r = 1, p.r2 = 1, p.dmin2 = 0.0025;
    p.w_sep = p.w_dis = p.w_ali = p.w_coh = DM_FLOCK_WEIGHT_MAX;
    p.vmax = 0.5, p.vmax2 = 0.25;
    p.W = p.H = p.W1 = p.H1 = 10, p.half_W = p.half_H = 5, p.ratio_x = p.ratio_y = 1;
    dm_flock_acc a;
    a.sep_s[0] = a.sep_d[0] = a.vel[0] = a.off[0] = INT64_MAX;
    a.sep_s[1] = a.sep_d[1] = a.vel[1] = a.off[1] = INT64_MIN;
    a.n_sim = 1, a.n_dis = 1;
    double x = 3, y = 4, vx = 0.5, vy = 0;
    dm_flock_update(&p, &a, &x, &y, &vx, &vy);
    CU_ASSERT_TRUE(isfinite(x) && isfinite(y) && isfinite(vx) && isfinite(vy));
    CU_ASSERT_TRUE(x >= 0 && x < 10 && y >= 0 && y < 10);
    CU_ASSERT_TRUE(vx * vx + vy * vy <= 0.25 * (1 + 1e-12));
    /* three offsets of +2^30 and three of -2^30, the positive ones first (partial sums up to
     * 3 x 2^62 in fixed point) or alternating (at most 2^62) */
    dm_flock_acc first, alternating;
    dm_flock_acc_zero(&first);
    dm_flock_acc_zero(&alternating);
    p.r2 = 1e30, p.dmin2 = 1e-30;
    const double g = 1073741824.0;
    for (int i = 0; i < 6; i++) {
        double a1 = i < 3 ? g : -g, a2 = i % 2 ? -g : g;
        dm_flock_acc_add(&first, &p, a1, 0, g * g, 0, 0, 1);
        dm_flock_acc_add(&alternating, &p, a2, 0, g * g, 0, 0, 1);
    }
    CU_ASSERT_EQUAL(first.off[0], 0);
    CU_ASSERT_EQUAL(memcmp(&first, &alternating, sizeof first), 0);
}

/* ---- clusters ----------------------------------------------------------------------------------- */

/* 10 documents placed by hand (no iteration): a chain A = {0, 2, 4, 6} of similar documents each
 * within r of the next only (0 and 6 are 2.4 apart); B = {1, 3, 5} close and similar to each other,
 * dissimilar to A; 7 next to A but dissimilar to all; 8 and 9 similar to each other but a pair
 * only (below min size 3), 9 within r of B's 5. */
static void clusters_hand(int attach, int32_t *cl_out, int32_t *k_out)
{
    dm_flock_options o = hand_options(5);
    o.neighbours = 0.2; /* 10 documents: side 12.5 */
    const uint64_t off[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    const uint32_t col[] = {0, 1, 0, 1, 0, 1, 0, 2, 3, 3};
    const float val[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_vectors(&v, 10, off, col, val, 0), DM_OK);
    double x[10] = {2.0, 8.0, 2.8, 8.5, 3.6, 8.2, 4.4, 2.4, 9.5, 8.9};
    double y[10] = {2.0, 8.0, 2.0, 8.0, 2.0, 8.6, 2.0, 2.5, 9.9, 9.2};
    double z[10] = {0};
    char path[4200];
    snprintf(path, sizeof path, "%s/clusters.ck", g_tmp);
    CU_ASSERT_EQUAL_FATAL(ft_write_checkpoint(path, &o, &v, 5, x, y, z, z), DM_OK);
    o.resume = 1;
    o.checkpoint = path;
    dm_flock_sim *s;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_OK);
    CU_ASSERT_EQUAL(dm_flock_sim_iteration(s), 5);
    CU_ASSERT_EQUAL(dm_flock_sim_run(s), DM_OK); /* nothing left to run */
    dm_flock_cluster_options co = {3, attach, -2.0, 0.0, 0};
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_cluster(s, &co, k_out), DM_OK);
    dm_flock_result r;
    CU_ASSERT_EQUAL_FATAL(dm_flock_gather(&r, s, &v), DM_OK);
    memcpy(cl_out, r.cluster, sizeof *cl_out * 10);
    CU_ASSERT_EQUAL(memcmp(r.row_cluster, r.cluster, sizeof *cl_out * 10), 0);
    CU_ASSERT_EQUAL(r.n_clusters, *k_out);
    CU_ASSERT_EQUAL(r.x[4], 3.6);
    dm_flock_result_free(&r);
    dm_flock_sim_free(s);
    dm_flock_vectors_release(&v);
}

static void test_clusters_hand(void)
{
    int32_t cl[10], k;
    clusters_hand(0, cl, &k);
    CU_ASSERT_EQUAL(k, 2);
    /* A has the smallest document (0): cluster 0; B (smallest 1): cluster 1 */
    int32_t want[10] = {0, 1, 0, 1, 0, 1, 0, -1, -1, -1};
    for (int i = 0; i < 10; i++) CU_ASSERT_EQUAL(cl[i], want[i]);
    clusters_hand(1, cl, &k);
    CU_ASSERT_EQUAL(k, 2);
    /* attach: 7 joins A (nearest clustered neighbour 0 at distance 0.64... vs 2 at 0.64: ties by
     * document index); 9 joins B through 5; 8 has no clustered neighbour within r: noise */
    int32_t want2[10] = {0, 1, 0, 1, 0, 1, 0, 0, -1, 1};
    for (int i = 0; i < 10; i++) CU_ASSERT_EQUAL(cl[i], want2[i]);
}

/* A simulation of the n documents v placed by hand at (x, y), at rest: a checkpoint at the run's
 * last iteration, resumed and run (nothing left to do). The checkpoint is g_tmp/<name>. */
static dm_flock_sim *hand_sim(dm_flock_options o, const dm_vectors *v, uint64_t n, const double *x, const double *y,
                              const char *name)
{
    double *z = calloc(n, sizeof *z);
    CU_ASSERT_PTR_NOT_NULL_FATAL(z);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", g_tmp, name);
    CU_ASSERT_EQUAL_FATAL(ft_write_checkpoint(path, &o, v, o.iterations, x, y, z, z), DM_OK);
    free(z);
    o.resume = 1;
    o.checkpoint = path;
    dm_flock_sim *s = NULL;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_init(&s, &g_ctx, v, &o), DM_OK);
    CU_ASSERT_EQUAL(dm_flock_sim_run(s), DM_OK);
    return s;
}

/* Clusters s with co and compares the number of clusters with k_want and the gathered labels with
 * want[0 .. n) (a mismatch names `what` and `value`). */
static void expect_clusters(dm_flock_sim *s, const dm_vectors *v, const dm_flock_cluster_options *co, int32_t k_want,
                            const int32_t *want, int n, const char *what, double value)
{
    int32_t k = -1;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_cluster(s, co, &k), DM_OK);
    CU_ASSERT_EQUAL(k, k_want);
    dm_flock_result r;
    CU_ASSERT_EQUAL_FATAL(dm_flock_gather(&r, s, v), DM_OK);
    CU_ASSERT_EQUAL(r.n_clusters, k_want);
    for (int i = 0; i < n; i++) {
        CU_ASSERT_EQUAL(r.cluster[i], want[i]);
        if (r.cluster[i] != want[i])
            fprintf(stderr, "%s %g document %d: cluster %d, want %d\n", what, value, i, r.cluster[i], want[i]);
    }
    dm_flock_result_free(&r);
}

/* Parallel centroids (oracle review): clusters of 23 and 3 copies of one document w of 40 terms
 * (w_t = fmod(0.37 t, 1) + 0.05; each cluster at one spot, T = 0.5, min size 3), and a document
 * d = (0.4 e0 + 0.9 e3) alone. The centroids 23w and 3w have cosine exactly 1 and the same cosine
 * with d. "--merge 1" merges them (their cosine came out 1 - 2^-52 from rounded dot products and
 * they stayed apart), and d joins cluster 0 by centroid, the tie going to the lower number (the
 * rounded norms of 23w and 3w made 3w's cosine larger). */
static void test_clusters_parallel_centroids(void)
{
    dm_flock_options o = hand_options(5);
    o.neighbours = 0.2;
    enum { T = 40, N = 23 + 3 + 1 };
    uint64_t off[N + 1];
    uint32_t col[T * N];
    float val[T * N];
    double x[N], y[N];
    size_t e = 0;
    off[0] = 0;
    for (int i = 0; i < N - 1; i++) {
        for (uint32_t t = 0; t < T; t++) {
            col[e] = t;
            val[e++] = (float)(fmod(0.37 * t, 1.0) + 0.05);
        }
        off[i + 1] = e;
        x[i] = i < 23 ? 2.0 : 8.0;
        y[i] = 2.0;
    }
    col[e] = 0;
    val[e++] = 0.4f;
    col[e] = 3;
    val[e++] = 0.9f;
    off[N] = e;
    x[N - 1] = 5.0;
    y[N - 1] = 8.0;
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_vectors(&v, N, off, col, val, 0), DM_OK);
    dm_flock_sim *s = hand_sim(o, &v, N, x, y, "parallel.ck");
    int32_t want[N];
    /* by centroid, no merge: d joins cluster 0 */
    for (int j = 0; j < N - 1; j++) want[j] = j < 23 ? 0 : 1;
    want[N - 1] = 0;
    dm_flock_cluster_options co = {3, DM_FLOCK_SMALL_CENTROID, -2.0, 0.0, 0};
    expect_clusters(s, &v, &co, 2, want, N, "parallel centroids, attach", 0.0);
    /* small components as noise, --merge 1: one cluster */
    for (int j = 0; j < N - 1; j++) want[j] = 0;
    want[N - 1] = -1;
    dm_flock_cluster_options cm = {3, DM_FLOCK_SMALL_NOISE, -2.0, 1.0, 0};
    expect_clusters(s, &v, &cm, 1, want, N, "parallel centroids, merge", 1.0);
    dm_flock_sim_free(s);
}

/* Centroid attachment on 11 hand-placed documents (the positions of clusters_hand, plus 10 alone
 * at (6, 5)); T = 0.5, min size 3. A = {0, 2, 4, 6} (term 0) and B = {1, 3, 5} (term 1) are the
 * clusters: centroid A = 4 e0, centroid B = 3 e1.
 *   7 = (1, 3) / sqrt 10, within r of A's 0 and 2 but dissimilar to them (cosine 0.32 < T):
 *     cosine with centroid A 0.316, with B 0.949 -> B (1), where "neighbour" gives A (0);
 *   8 = e3, 9 = (e0 + e3) / sqrt 2: a similar pair (cosine 0.71), small; 9 lies within r of B's 5
 *     but its centroid cosines are A 0.707, B 0 -> A (0); 8 shares no term with a centroid: noise;
 *   10 = (e0 + e1) / sqrt 2 alone: cosine 0.707 with both centroids, exactly (4x/4 and 3x/3):
 *     the tie goes to the lower cluster number -> A (0). */
static void test_clusters_centroid(void)
{
    dm_flock_options o = hand_options(5);
    o.neighbours = 0.2;
    const uint64_t off[] = {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 12, 14};
    const uint32_t col[] = {0, 1, 0, 1, 0, 1, 0, 0, 1, 3, 0, 3, 0, 1};
    const float val[] = {1, 1, 1, 1, 1, 1, 1, 1, 3, 1, 1, 1, 1, 1};
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_vectors(&v, 11, off, col, val, 0), DM_OK);
    const double x[11] = {2.0, 8.0, 2.8, 8.5, 3.6, 8.2, 4.4, 2.4, 9.5, 8.9, 6.0};
    const double y[11] = {2.0, 8.0, 2.0, 8.0, 2.0, 8.6, 2.0, 2.5, 9.9, 9.2, 5.0};
    dm_flock_sim *s = hand_sim(o, &v, 11, x, y, "centroid.ck");
    static const int32_t want[3][11] = {
        {0, 1, 0, 1, 0, 1, 0, -1, -1, -1, -1}, /* noise */
        {0, 1, 0, 1, 0, 1, 0, 0, -1, 1, -1},   /* neighbour: 7 by 0 (tie with 2 by index), 9 by 5 */
        {0, 1, 0, 1, 0, 1, 0, 1, -1, 0, 0}};   /* centroid */
    for (int mode = 0; mode < 3; mode++) {
        dm_flock_cluster_options co = {3, mode, -2.0, 0.0, 0};
        expect_clusters(s, &v, &co, 2, want[mode], 11, "small-components mode", mode);
    }
    /* merging by centroid (exact sums): with small components by centroid the clusters are
     * A = {0, 2, 4, 6, 9, 10}, centroid (4 + 2/sqrt 2) e0 + (e1 + e3)/sqrt 2, and B = {1, 3, 5, 7},
     * centroid (1/sqrt 10) e0 + (3 + 3/sqrt 10) e1: cosine 4.50428 / (5.50579 x 3.96133) = 0.2065
     * (by hand), so they merge at 0.20 (one cluster, numbered 0) and not at 0.21. With small
     * components as noise the centroids 4 e0 and 3 e1 are orthogonal: no merge at any level.
     * Twice: the centroid sums in one work item per cluster, then in one per document. */
    static const struct {
        int mode;
        double merge;
        int32_t k;
        int32_t want[11];
    } mc[] = {{DM_FLOCK_SMALL_CENTROID, 0.20, 1, {0, 0, 0, 0, 0, 0, 0, 0, -1, 0, 0}},
              {DM_FLOCK_SMALL_CENTROID, 0.21, 2, {0, 1, 0, 1, 0, 1, 0, 1, -1, 0, 0}},
              {DM_FLOCK_SMALL_NOISE, 1e-9, 2, {0, 1, 0, 1, 0, 1, 0, -1, -1, -1, -1}}};
    for (size_t t = 0; t < 2 * (sizeof mc / sizeof mc[0]); t++) {
        if (t % (sizeof mc / sizeof mc[0]) == 0) dm_flock_set_centroid_item(t ? 1 : 0);
        const size_t u = t % (sizeof mc / sizeof mc[0]);
        dm_flock_cluster_options co = {3, mc[u].mode, -2.0, mc[u].merge, 0};
        expect_clusters(s, &v, &co, mc[u].k, mc[u].want, 11, "merge", mc[u].merge);
    }
    dm_flock_set_centroid_item(0);
    /* bad options are refused */
    dm_flock_cluster_options bad = {3, 7, -2.0, 0.0, 0};
    int32_t k;
    CU_ASSERT_EQUAL(dm_flock_sim_cluster(s, &bad, &k), DM_ERR_INVALID_ARG);
    bad.attach = DM_FLOCK_SMALL_CENTROID;
    bad.min_size = 0;
    CU_ASSERT_EQUAL(dm_flock_sim_cluster(s, &bad, &k), DM_ERR_INVALID_ARG);
    bad.min_size = 3;
    bad.merge = 1.5;
    CU_ASSERT_EQUAL(dm_flock_sim_cluster(s, &bad, &k), DM_ERR_INVALID_ARG);
    bad.merge = -0.1;
    CU_ASSERT_EQUAL(dm_flock_sim_cluster(s, &bad, &k), DM_ERR_INVALID_ARG);
    /* names */
    int a = -1;
    CU_ASSERT_EQUAL(dm_flock_small_parse("centroid", &a), DM_OK);
    CU_ASSERT_EQUAL(a, DM_FLOCK_SMALL_CENTROID);
    CU_ASSERT_EQUAL(dm_flock_small_parse("attach", &a), DM_OK);
    CU_ASSERT_EQUAL(a, DM_FLOCK_SMALL_NEIGHBOUR);
    CU_ASSERT_EQUAL(dm_flock_small_parse("nearest", &a), DM_ERR_INVALID_ARG);
    char d[512];
    dm_flock_cluster_options co = {3, DM_FLOCK_SMALL_CENTROID, -2.0, 0.0, 0};
    dm_flock_cluster_describe(d, sizeof d, &co, 0.5);
    CU_ASSERT_PTR_NOT_NULL(strstr(d, "cosine >= 0.5"));
    CU_ASSERT_PTR_NOT_NULL(strstr(d, "centroid"));
    CU_ASSERT_PTR_NULL(strstr(d, "merged while"));
    co.merge = 0.25;
    dm_flock_cluster_describe(d, sizeof d, &co, 0.5);
    CU_ASSERT_PTR_NOT_NULL(strstr(d, "merged while two centroids have cosine >= 0.25"));
    dm_flock_sim_free(s);
    dm_flock_vectors_release(&v);
}

/* Refinement (--refine) on 13 hand-placed documents; T = 0.3, min size 3, small components by
 * centroid, no merge. Components: A = {0, 1, 2} (e0) with 3 = (e0 + 2 e1) / sqrt 5 (cosine 0.447
 * with its neighbour 2), B = {4, 5, 6} (e1), the chain C = {7, 8, 9} = 0.8 (e0, e1, e2) + 0.6 e4
 * (cosine 0.36 between neighbours) and D = {10, 11, 12} (e2): clusters 0, 1, 2, 3.
 * Step 1 (centroid cosines by hand): 3 goes to B (0.894 against A's 0.657: A = 3.447 e0 + 0.894
 * e1); 7 to A (0.774 against C's own 0.757: C = 0.8 (e0 + e1 + e2) + 1.8 e4), 8 to B (0.8) and 9 to
 * D (0.8): C is emptied and dropped, D becomes cluster 2. Step 2 moves nothing (7 has 0.884 with
 * A = 3.8 e0 + 0.6 e4; 3 has 0.925 with B, 8 0.866): the refinement stops there. */
static void test_clusters_refine(void)
{
    dm_flock_options o = hand_options(5);
    o.threshold = 0.3;
    const uint64_t off[] = {0, 1, 2, 3, 5, 6, 7, 8, 10, 12, 14, 15, 16, 17};
    const uint32_t col[] = {0, 0, 0, 0, 1, 1, 1, 1, 0, 4, 1, 4, 2, 4, 2, 2, 2};
    const float a = 0.4472135955f, b = 0.8944271910f;
    const float val[] = {1, 1, 1, a, b, 1, 1, 1, 0.8f, 0.6f, 0.8f, 0.6f, 0.8f, 0.6f, 1, 1, 1};
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_vectors(&v, 13, off, col, val, 0), DM_OK);
    const double x[13] = {2.0, 2.6, 3.2, 3.8, 10.0, 10.6, 11.2, 16.0, 16.6, 17.2, 5.0, 5.6, 6.2};
    const double y[13] = {2.0, 2.0, 2.0, 2.0, 10.0, 10.0, 10.0, 4.0, 4.0, 4.0, 15.0, 15.0, 15.0};
    dm_flock_sim *s = hand_sim(o, &v, 13, x, y, "refine.ck");
    static const struct {
        int refine, steps;
        uint64_t moved;
        int32_t k;
        int32_t want[13];
    } rc_[] = {{0, 0, 0, 4, {0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3}},
               {1, 1, 4, 3, {0, 0, 0, 1, 1, 1, 1, 0, 1, 2, 2, 2, 2}},
               {5, 2, 4, 3, {0, 0, 0, 1, 1, 1, 1, 0, 1, 2, 2, 2, 2}}};
    for (size_t t = 0; t < sizeof rc_ / sizeof rc_[0]; t++) {
        dm_flock_cluster_options co = {3, DM_FLOCK_SMALL_CENTROID, -2.0, 0.0, rc_[t].refine};
        expect_clusters(s, &v, &co, rc_[t].k, rc_[t].want, 13, "refine", rc_[t].refine);
        uint64_t moved = 99;
        CU_ASSERT_EQUAL(dm_flock_sim_refined(s, &moved), rc_[t].steps);
        CU_ASSERT_EQUAL(moved, rc_[t].moved);
    }
    /* a negative step count is refused; the description names the step */
    dm_flock_cluster_options bad = {3, DM_FLOCK_SMALL_CENTROID, -2.0, 0.0, -1};
    int32_t k;
    CU_ASSERT_EQUAL(dm_flock_sim_cluster(s, &bad, &k), DM_ERR_INVALID_ARG);
    char d[1024]; /* report.json's buffer: every step described takes about 500 bytes */
    bad.refine = 7;
    bad.merge = 0.5;
    dm_flock_cluster_describe(d, sizeof d, &bad, 0.3);
    CU_ASSERT_PTR_NOT_NULL(strstr(d, "merged while two centroids"));
    CU_ASSERT_PTR_NOT_NULL(strstr(d, "up to 7 refinement steps"));
    CU_ASSERT_TRUE(strlen(d) > 20 && strcmp(d + strlen(d) - 13, "not flocking)") == 0);
    dm_flock_sim_free(s);
    dm_flock_vectors_release(&v);
}

/* More clusters than DM_FLOCK_CENTROID_MAX: the centroid steps are skipped on every rank (the
 * clusters as they are, the count reported), not an error after the run nor minutes of attachment. DM_FLOCK_CENTROID_MAX + 1 documents, each
 * with a term of its own: no edges, so with min size 1 each document is a cluster. */
static void test_centroid_skipped(void)
{
    const uint64_t n = DM_FLOCK_CENTROID_MAX + 1;
    uint64_t *off = malloc(sizeof *off * (n + 1));
    uint32_t *col = malloc(sizeof *col * n);
    float *val = malloc(sizeof *val * n);
    CU_ASSERT_FATAL(off && col && val);
    for (uint64_t i = 0; i <= n; i++) off[i] = i;
    for (uint64_t i = 0; i < n; i++) col[i] = (uint32_t)i, val[i] = 1.0f;
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_vectors(&v, n, off, col, val, 0), DM_OK);
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = 1;
    dm_flock_sim *s;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_run(s), DM_OK);
    dm_flock_cluster_options co = {1, DM_FLOCK_SMALL_CENTROID, -2.0, 0.5, 0};
    int32_t k = -1;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_cluster(s, &co, &k), DM_OK);
    CU_ASSERT_EQUAL(k, (int32_t)n);
    CU_ASSERT_EQUAL(dm_flock_sim_centroid_skipped(s), (int32_t)n);
    dm_flock_result r;
    CU_ASSERT_EQUAL_FATAL(dm_flock_gather(&r, s, &v), DM_OK);
    int bad = 0;
    for (uint64_t i = 0; i < n; i++) bad += r.cluster[i] != (int32_t)i; /* numbered by document index */
    CU_ASSERT_EQUAL(bad, 0);
    dm_flock_result_free(&r);
    /* either centroid step alone is skipped too; neither: nothing is; min size 2 leaves no cluster */
    co.merge = 0.0;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_cluster(s, &co, &k), DM_OK);
    CU_ASSERT_EQUAL(dm_flock_sim_centroid_skipped(s), (int32_t)n);
    co.attach = DM_FLOCK_SMALL_NOISE;
    co.merge = 0.5;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_cluster(s, &co, &k), DM_OK);
    CU_ASSERT_EQUAL(dm_flock_sim_centroid_skipped(s), (int32_t)n);
    co.merge = 0.0;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_cluster(s, &co, &k), DM_OK);
    CU_ASSERT_EQUAL(dm_flock_sim_centroid_skipped(s), 0);
    co.attach = DM_FLOCK_SMALL_CENTROID;
    co.merge = 0.5;
    co.min_size = 2;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_cluster(s, &co, &k), DM_OK);
    CU_ASSERT_EQUAL(k, 0);
    CU_ASSERT_EQUAL(dm_flock_sim_centroid_skipped(s), 0);
    dm_flock_sim_free(s);
    dm_flock_vectors_release(&v);
    free(off);
    free(col);
    free(val);
}

/* ---- resume ------------------------------------------------------------------------------------- */

static void test_resume_identical(void)
{
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.topics = 3;
    so.tokens = 40;
    char path[4200];
    snprintf(path, sizeof path, "%s/resume.ck", g_tmp);
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = 30;
    ft_state full, part, resumed;
    dm_flock_cluster_options co = DM_FLOCK_CLUSTER_OPTIONS_INIT;
    CU_ASSERT_EQUAL_FATAL(ft_run(&full, &g_ctx, &so, 400, &o, &co), DM_OK);
    o.checkpoint_every = 7;
    o.checkpoint = path;
    o.stop_after = 17; /* "killed" after iteration 17: the last checkpoint is at 14 */
    CU_ASSERT_EQUAL_FATAL(ft_run(&part, &g_ctx, &so, 400, &o, NULL), DM_OK);
    CU_ASSERT_EQUAL(part.iteration, 17);
    o.stop_after = 0;
    o.resume = 1;
    CU_ASSERT_EQUAL_FATAL(ft_run(&resumed, &g_ctx, &so, 400, &o, &co), DM_OK);
    CU_ASSERT_EQUAL(resumed.iteration, 30);
    CU_ASSERT_TRUE(same_state(&full, &resumed));
    CU_ASSERT_EQUAL(memcmp(full.cluster, resumed.cluster, 4 * full.n), 0);
    /* other model options: refused */
    double t0 = o.threshold;
    o.threshold = 0.3;
    ft_state bad;
    CU_ASSERT_EQUAL(ft_run(&bad, &g_ctx, &so, 400, &o, NULL), DM_ERR_INVALID_ARG);
    /* a corrupted checkpoint: refused */
    o.threshold = t0;
    FILE *f = fopen(path, "r+b");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fseek(f, 200, SEEK_SET);
    fputc(0x55, f);
    fclose(f);
    CU_ASSERT_EQUAL(ft_run(&bad, &g_ctx, &so, 400, &o, NULL), DM_ERR_FORMAT);
    ft_state_free(&full);
    ft_state_free(&part);
    ft_state_free(&resumed);
}

/* The iteration a checkpoint file holds (header bytes 32..39). */
static long long checkpoint_iteration(const char *path)
{
    long long it = -1;
    FILE *f = fopen(path, "rb");
    if (f && (fseek(f, 32, SEEK_SET) != 0 || fread(&it, 8, 1, f) != 1)) it = -1;
    if (f) fclose(f);
    return it;
}

/* Rewrites path's 4 bytes at `at` with `value` and, when fix_crc, its CRC to match. */
static void checkpoint_patch(const char *path, long at, uint32_t value, int fix_crc)
{
    FILE *f = fopen(path, "r+b");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    unsigned char *b = malloc((size_t)size);
    fseek(f, 0, SEEK_SET);
    CU_ASSERT_EQUAL_FATAL(fread(b, 1, (size_t)size, f), (size_t)size);
    memcpy(b + at, &value, 4);
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), b, (uInt)(size - 8));
    if (fix_crc) memcpy(b + size - 8, &crc, 4);
    fseek(f, 0, SEEK_SET);
    CU_ASSERT_EQUAL(fwrite(b, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    free(b);
}

/* Resumes path with o on v: the status, and the message checked to contain `what`. */
static void resume_refused(const char *path, dm_flock_options o, const dm_vectors *v, int want, const char *what)
{
    o.resume = 1;
    o.checkpoint = path;
    dm_flock_sim *s = NULL;
    CU_ASSERT_EQUAL(dm_flock_sim_init(&s, &g_ctx, v, &o), want);
    CU_ASSERT_TRUE(message_has(what));
    CU_ASSERT_PTR_NULL(s);
}

/* The last iteration's checkpoint is written also when K does not divide the iterations (or
 * exceeds them). A checkpoint is refused, saying why: written for another input of as many
 * documents (other vectors, one weight or one id changed), a corrupt header (the checksum, not
 * "other options"), the old format that does not record its input. */
static void test_checkpoint_last_and_refused(void)
{
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.topics = 3;
    so.tokens = 40;
    char path[4200];
    snprintf(path, sizeof path, "%s/refused.ck", g_tmp);
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_synth_share(&v, &so, 300, 0, 1), DM_OK);
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = 20;
    o.checkpoint = path;
    const int every[2] = {7, 100};
    for (int k = 0; k < 2; k++) {
        remove(path);
        o.checkpoint_every = every[k];
        dm_flock_sim *s = NULL;
        CU_ASSERT_EQUAL_FATAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_OK);
        CU_ASSERT_EQUAL(dm_flock_sim_run(s), DM_OK);
        dm_flock_sim_free(s);
        CU_ASSERT_EQUAL(checkpoint_iteration(path), 20);
    }
    /* it resumes (the clustering only) on its own input */
    o.resume = 1;
    dm_flock_sim *s = NULL;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_OK);
    CU_ASSERT_EQUAL(dm_flock_sim_iteration(s), 20);
    dm_flock_sim_free(s);
    o.resume = 0;
    /* other documents, as many */
    dm_flock_synth_options so2 = so;
    so2.seed = so.seed + 1;
    dm_vectors w;
    CU_ASSERT_EQUAL_FATAL(ft_synth_share(&w, &so2, 300, 0, 1), DM_OK);
    resume_refused(path, o, &w, DM_ERR_INVALID_ARG, "refused.ck: the checkpoint was written for another input");
    dm_flock_vectors_release(&w);
    /* one weight of one document */
    float keep = v.val[v.row_off[123]];
    v.val[v.row_off[123]] = keep * 1.5f;
    resume_refused(path, o, &v, DM_ERR_INVALID_ARG, "written for another input");
    v.val[v.row_off[123]] = keep;
    /* one document's id */
    char *id = v.ids + v.id_off[7];
    id[0] ^= 1;
    resume_refused(path, o, &v, DM_ERR_INVALID_ARG, "written for another input");
    id[0] ^= 1;
    /* the other backend's checkpoint (header bytes 12..15, a valid checksum): refused, naming
     * both; a file that does not record it (0, docmine before the field) resumes; no backend 7 */
    checkpoint_patch(path, 12, DM_BACKEND_CUDA, 1);
    resume_refused(path, o, &v, DM_ERR_INVALID_ARG,
                   "refused.ck: the checkpoint was written by the cuda backend, this run uses the cpu backend");
    checkpoint_patch(path, 12, 7, 1);
    resume_refused(path, o, &v, DM_ERR_FORMAT, "refused.ck: checkpoint of an unknown backend (7)");
    checkpoint_patch(path, 12, 0, 1);
    o.resume = 1;
    s = NULL;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_OK);
    CU_ASSERT_EQUAL(dm_flock_sim_iteration(s), 20);
    dm_flock_sim_free(s);
    o.resume = 0;
    /* a corrupt option in the header (radius): the checksum says so */
    checkpoint_patch(path, 50, 0x12345678u, 0);
    resume_refused(path, o, &v, DM_ERR_FORMAT, "refused.ck: checkpoint checksum mismatch");
    /* version 1 (no fingerprint), with a valid checksum */
    checkpoint_patch(path, 8, 1, 1);
    resume_refused(path, o, &v, DM_ERR_FORMAT, "version 1 does not record its input");
    dm_flock_vectors_release(&v);
}

/* The whole file at path (NULL when it cannot be read); *n its size. */
static unsigned char *slurp(const char *path, size_t *n)
{
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)(size > 0 ? size : 1));
    if (b && fread(b, 1, (size_t)size, f) != (size_t)size) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) *n = (size_t)size;
    return b;
}

/* A resume refused by an option, a short or a missing file names the file and what differs:
 * the option with both values (was: "other options (seed, iterations or model parameters)"),
 * an empty file, a header cut short, no checkpoint for --resume. */
static void test_checkpoint_refusal_messages(void)
{
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.topics = 3;
    so.tokens = 40;
    char path[4200], cut[4200];
    snprintf(path, sizeof path, "%s/named.ck", g_tmp);
    snprintf(cut, sizeof cut, "%s/cut.ck", g_tmp);
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_synth_share(&v, &so, 200, 0, 1), DM_OK);
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = 20;
    o.checkpoint = path;
    o.checkpoint_every = 10;
    dm_flock_sim *s = NULL;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_OK);
    CU_ASSERT_EQUAL(dm_flock_sim_run(s), DM_OK);
    dm_flock_sim_free(s);
    o.checkpoint_every = 0;
    dm_flock_options d = o;
    d.iterations = 21;
    resume_refused(path, d, &v, DM_ERR_INVALID_ARG,
                   "named.ck: the checkpoint was written with --iterations 20, this run has --iterations 21");
    d = o;
    d.seed = 7;
    resume_refused(path, d, &v, DM_ERR_INVALID_ARG, "written with --seed 42, this run has --seed 7");
    d = o;
    d.threshold = 0.3;
    resume_refused(path, d, &v, DM_ERR_INVALID_ARG, "written with --threshold 0.1, this run has --threshold 0.3");
    d = o;
    d.w_cohesion = 0.05 + 1e-12;
    resume_refused(path, d, &v, DM_ERR_INVALID_ARG,
                   "written with --weights (cohesion) 0.05, this run has --weights (cohesion) 0.050000000001");
    d = o;
    d.shrink = 0.25;
    resume_refused(path, d, &v, DM_ERR_INVALID_ARG, "written with --shrink 0.5, this run has --shrink 0.25");
    /* its own options: accepted */
    d = o;
    d.resume = 1;
    CU_ASSERT_EQUAL(dm_flock_sim_init(&s, &g_ctx, &v, &d), DM_OK);
    dm_flock_sim_free(s);
    /* an empty file; the first 100 bytes (the magic, then the header cut short) */
    size_t n = 0;
    unsigned char *b = slurp(path, &n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    FILE *f = fopen(cut, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fclose(f);
    resume_refused(cut, o, &v, DM_ERR_FORMAT, "cut.ck: an empty file, not a docmine flock checkpoint");
    f = fopen(cut, "wb");
    CU_ASSERT_EQUAL(fwrite(b, 1, 100, f), 100);
    fclose(f);
    resume_refused(cut, o, &v, DM_ERR_FORMAT, "cut.ck: truncated checkpoint (100 bytes, shorter than its 136-byte header)");
    f = fopen(cut, "wb");
    CU_ASSERT_EQUAL(fwrite("hello\n", 1, 6, f), 6);
    fclose(f);
    resume_refused(cut, o, &v, DM_ERR_FORMAT, "cut.ck: not a docmine flock checkpoint");
    remove(cut);
    resume_refused(cut, o, &v, DM_ERR_IO, "--resume: checkpoint ");
    CU_ASSERT_TRUE(message_has("cut.ck: No such file"));
    free(b);
    dm_flock_vectors_release(&v);
}

/* Where a checkpoint is to be written is checked when the simulation is created, before any
 * iteration, naming the file: a missing folder or a file where the folder should be (was: the
 * first checkpoint failed K iterations later, naming its temporary file), a device, and an
 * existing file that is not a checkpoint, which is left as it is (was: replaced by the
 * checkpoint, so `--checkpoint` naming the input vectors overwrote them). An existing
 * checkpoint or an empty file is replaced. */
static void test_checkpoint_target_checked(void)
{
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.topics = 3;
    so.tokens = 40;
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_synth_share(&v, &so, 300, 0, 1), DM_OK);
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = 4;
    o.checkpoint_every = 2;
    char path[4200], other[4200];
    dm_flock_sim *s = NULL;
    /* a folder that does not exist; a regular file as the folder */
    snprintf(path, sizeof path, "%s/no_such_dir/x.ck", g_tmp);
    o.checkpoint = path;
    CU_ASSERT_EQUAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_ERR_IO);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_TRUE(message_has("no_such_dir/x.ck: cannot write the checkpoint: its folder "));
    snprintf(other, sizeof other, "%s/plain", g_tmp);
    FILE *f = fopen(other, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("not a folder\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/plain/x.ck", g_tmp);
    CU_ASSERT_EQUAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_ERR_IO);
    CU_ASSERT_TRUE(message_has("plain/x.ck: cannot write the checkpoint: "));
    CU_ASSERT_TRUE(message_has("plain is not a folder"));
    /* a device */
    o.checkpoint = "/dev/null";
    CU_ASSERT_EQUAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_ERR_INVALID_ARG);
    CU_ASSERT_TRUE(message_has("/dev/null: the checkpoint file is not a regular file (a device)"));
    /* an existing file that is not a checkpoint: refused and left unchanged */
    o.checkpoint = other;
    CU_ASSERT_EQUAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_TRUE(message_has("plain: exists and is not a docmine flock checkpoint; not overwriting it"));
    size_t n = 0;
    unsigned char *b = slurp(other, &n);
    CU_ASSERT_TRUE(b && n == 13 && memcmp(b, "not a folder\n", 13) == 0);
    free(b);
    /* an empty file, then the checkpoint it became: replaced */
    f = fopen(other, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fclose(f);
    for (int k = 0; k < 2; k++) {
        int rc = dm_flock_sim_init(&s, &g_ctx, &v, &o);
        if (rc != DM_OK) fprintf(stderr, "%s\n", dm_error_message());
        CU_ASSERT_EQUAL_FATAL(rc, DM_OK);
        CU_ASSERT_EQUAL(dm_flock_sim_run(s), DM_OK);
        dm_flock_sim_free(s);
        s = NULL;
        CU_ASSERT_EQUAL(checkpoint_iteration(other), 4);
    }
    dm_flock_vectors_release(&v);
}

/* A job with a PNG series resumed from a checkpoint at an iteration of the series draws that
 * iteration's picture (the interrupted run wrote the checkpoint before the picture, so a stop in
 * between left the series without it for ever), with the uninterrupted run's bytes; the later
 * pictures are the uninterrupted run's too. */
static void test_resume_snapshot_at_checkpoint(void)
{
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.topics = 3;
    so.tokens = 40;
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_synth_share(&v, &so, 200, 0, 1), DM_OK);
    char full[4200], res[4200], ck[4200], p[4400], q[4400];
    snprintf(full, sizeof full, "%s/snapfull", g_tmp);
    snprintf(res, sizeof res, "%s/snapres", g_tmp);
    snprintf(ck, sizeof ck, "%s/snapres/flock.ckpt", g_tmp);
    snprintf(p, sizeof p, "%s/snapshots", full);
    CU_ASSERT_EQUAL_FATAL(dm_mkdirs(p), DM_OK);
    snprintf(p, sizeof p, "%s/snapshots", res);
    CU_ASSERT_EQUAL_FATAL(dm_mkdirs(p), DM_OK);
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = 30;
    dm_flock_cluster_options co = DM_FLOCK_CLUSTER_OPTIONS_INIT;
    dm_flock_job_options jo = DM_FLOCK_JOB_OPTIONS_INIT;
    jo.snapshot_every = 10;
    jo.png_size = 64;
    jo.out_dir = full;
    dm_flock_job_result r;
    CU_ASSERT_EQUAL_FATAL(dm_flock_job_run(&r, NULL, &g_ctx, &v, &o, &co, &jo), DM_OK);
    /* stopped right after the checkpoint of iteration 20, before its picture */
    dm_flock_options oc = o;
    oc.checkpoint = ck;
    oc.checkpoint_every = 10;
    oc.stop_after = 20;
    dm_flock_sim *s = NULL;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_init(&s, &g_ctx, &v, &oc), DM_OK);
    CU_ASSERT_EQUAL(dm_flock_sim_run(s), DM_OK);
    dm_flock_sim_free(s);
    CU_ASSERT_EQUAL(checkpoint_iteration(ck), 20);
    oc.stop_after = 0;
    oc.resume = 1;
    jo.out_dir = res;
    CU_ASSERT_EQUAL_FATAL(dm_flock_job_run(&r, NULL, &g_ctx, &v, &oc, &co, &jo), DM_OK);
    CU_ASSERT_EQUAL(r.start_iteration, 20);
    const int its[2] = {20, 30};
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s/snapshots/flock-%06d.png", full, its[k]);
        snprintf(q, sizeof q, "%s/snapshots/flock-%06d.png", res, its[k]);
        size_t na = 0, nb = 0;
        unsigned char *a = slurp(p, &na), *b = slurp(q, &nb);
        CU_ASSERT_PTR_NOT_NULL(a);
        CU_ASSERT_PTR_NOT_NULL(b);
        if (!b) fprintf(stderr, "missing %s\n", q);
        CU_ASSERT_TRUE(a && b && na == nb && memcmp(a, b, na) == 0);
        free(a);
        free(b);
    }
    dm_flock_vectors_release(&v);
}

/* ---- outputs ------------------------------------------------------------------------------------- */

static void test_top_terms(void)
{
    /* cluster 0: rows 0, 2 (term 7: 0.5 + 0.25, term 3: 0.6, term 9: 0.1); cluster 1: row 1
     * (term 3: 0.2, term 4: 0.9); row 3 noise (term 8: 5.0 must not count) */
    const uint64_t off[] = {0, 2, 4, 6, 7};
    const uint32_t col[] = {3, 7, 3, 4, 7, 9, 8};
    const float val[] = {0.6f, 0.5f, 0.2f, 0.9f, 0.25f, 0.1f, 5.0f};
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_vectors(&v, 4, off, col, val, 0), DM_OK);
    int32_t rc[4] = {0, 1, 0, -1};
    dm_flock_result r;
    memset(&r, 0, sizeof r);
    r.n = 4;
    r.n_clusters = 2;
    r.row_cluster = rc;
    r.n_rows = 4;
    uint32_t *t;
    double *w;
    CU_ASSERT_EQUAL_FATAL(dm_flock_top_terms(&t, &w, &r, &v, 3, &g_ctx), DM_OK);
    CU_ASSERT_EQUAL(t[0], 7);
    CU_ASSERT_DOUBLE_EQUAL(w[0], 0.75, 1e-7);
    CU_ASSERT_EQUAL(t[1], 3);
    CU_ASSERT_EQUAL(t[2], 9);
    CU_ASSERT_EQUAL(t[3], 4);
    CU_ASSERT_EQUAL(t[4], 3);
    CU_ASSERT_EQUAL(t[5], UINT32_MAX); /* cluster 1 has two terms only */
    dm_free(t);
    dm_free(w);
    dm_flock_vectors_release(&v);
}

/* Top terms over many rows, cut into parts of any size and summed on any number of threads:
 * the same lists as a plain per-cluster sum. Weights are multiples of 2^-10 (exact in the fixed
 * point and in double sums), so ties between terms are common and the smaller id must win. */
static void test_top_terms_parts(void)
{
    enum { N = 4000, V = 300, NC = 9, K = 6 };
    uint64_t *off = malloc(sizeof *off * (N + 1));
    uint32_t *col = malloc(sizeof *col * N * 40);
    float *val = malloc(sizeof *val * N * 40);
    int32_t *cl = malloc(sizeof *cl * N);
    double *ref = calloc((size_t)NC * V, sizeof *ref);
    CU_ASSERT_FATAL(off && col && val && cl && ref);
    uint64_t s = 12345, at = 0;
    off[0] = 0;
    for (int r = 0; r < N; r++) {
        uint64_t x = dm_splitmix64(&s);
        /* cluster 4 is empty, cluster 8 has few rows, about 1 row in 8 is noise */
        int c = (int)(x % 10) - 1;
        if (c == 4 || (c == 8 && (x >> 8) % 16)) c = -1;
        cl[r] = c;
        int len = (int)((x >> 16) % 40); /* 0..39 distinct terms, in order */
        uint32_t t = (uint32_t)((x >> 24) % 7);
        for (int j = 0; j < len && t < V; j++) {
            uint64_t y = dm_splitmix64(&s);
            col[at] = t;
            val[at] = (float)((int)(y % 64) - 8) / 1024.0f; /* a few negative and zero weights */
            if (c >= 0) ref[(size_t)c * V + t] += val[at];
            at++;
            t += 1 + (uint32_t)((y >> 8) % (c >= 0 ? 3 + c : 20)); /* clusters differ in density */
        }
        off[r + 1] = at;
    }
    /* the expected lists: heaviest first, ties to the smaller term, at most the cluster's terms */
    uint32_t want_t[NC * K];
    double want_w[NC * K];
    for (int c = 0; c < NC; c++) {
        uint8_t seen[V] = {0};
        for (int r = 0; r < N; r++)
            if (cl[r] == c)
                for (uint64_t e = off[r]; e < off[r + 1]; e++) seen[col[e]] = 1;
        uint8_t used[V] = {0};
        for (int j = 0; j < K; j++) {
            int best = -1;
            for (int t = 0; t < V; t++)
                if (seen[t] && !used[t] && (best < 0 || ref[(size_t)c * V + t] > ref[(size_t)c * V + best])) best = t;
            want_t[c * K + j] = best < 0 ? UINT32_MAX : (uint32_t)best;
            want_w[c * K + j] = best < 0 ? 0 : ref[(size_t)c * V + best];
            if (best >= 0) used[best] = 1;
        }
    }
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_vectors(&v, N, off, col, val, 0), DM_OK);
    static const char *const parts[] = {"1", "7", "500", "100000", NULL};
    static const int threads[] = {1, 3, 8};
    const int saved = omp_get_max_threads();
    for (int pi = 0; pi < 5; pi++)
        for (int ti = 0; ti < 3; ti++) {
            if (parts[pi]) setenv("DOCMINE_TT_PART_ENTRIES", parts[pi], 1);
            else unsetenv("DOCMINE_TT_PART_ENTRIES");
            omp_set_num_threads(threads[ti]);
            uint32_t *t = NULL;
            double *w = NULL;
            CU_ASSERT_EQUAL_FATAL(dm_flock_top_terms_rows(&t, &w, cl, NC, &v, K, &g_ctx), DM_OK);
            int same = 1;
            for (int i = 0; i < NC * K; i++)
                if (t[i] != want_t[i] || (t[i] != UINT32_MAX && w[i] != want_w[i])) same = 0;
            if (!same) fprintf(stderr, "top terms differ: parts %s, %d threads\n", parts[pi] ? parts[pi] : "default", threads[ti]);
            CU_ASSERT(same);
            dm_free(t);
            dm_free(w);
        }
    unsetenv("DOCMINE_TT_PART_ENTRIES");
    omp_set_num_threads(saved);
    /* an out-of-range weight in the middle of a part: an error naming that row */
    int rb = 1234;
    while (rb < N && (cl[rb] < 0 || off[rb + 1] == off[rb])) rb++;
    CU_ASSERT_FATAL(rb < N);
    val[off[rb]] = 1e30f;
    dm_vectors bad;
    CU_ASSERT_EQUAL_FATAL(ft_vectors(&bad, N, off, col, val, 0), DM_OK);
    setenv("DOCMINE_TT_PART_ENTRIES", "7", 1);
    uint32_t *t = NULL;
    double *w = NULL;
    int rc = dm_flock_top_terms_rows(&t, &w, cl, NC, &bad, K, &g_ctx);
    unsetenv("DOCMINE_TT_PART_ENTRIES");
    char want[32];
    snprintf(want, sizeof want, "row %d ", rb);
    CU_ASSERT_EQUAL(rc, DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), want));
    dm_free(t);
    dm_free(w);
    dm_flock_vectors_release(&bad);
    dm_flock_vectors_release(&v);
    free(off);
    free(col);
    free(val);
    free(cl);
    free(ref);
}

static void test_vocab(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/vocab.tsv", g_tmp);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "id\tterm\tdf\n0\tmarket\t12\n3\tbank\t4\r\n2\toil\t7\n");
    fclose(f);
    dm_flock_vocab voc;
    CU_ASSERT_EQUAL_FATAL(dm_flock_vocab_read(&voc, path, 10), DM_OK);
    CU_ASSERT_EQUAL(voc.n, 4);
    CU_ASSERT_STRING_EQUAL(voc.term[0], "market");
    CU_ASSERT_PTR_NULL(voc.term[1]);
    CU_ASSERT_STRING_EQUAL(voc.term[2], "oil");
    CU_ASSERT_STRING_EQUAL(voc.term[3], "bank");
    dm_flock_vocab_free(&voc);
    f = fopen(path, "w");
    fprintf(f, "0\tmarket\t1\nxyz\n");
    fclose(f);
    CU_ASSERT_EQUAL(dm_flock_vocab_read(&voc, path, 10), DM_ERR_FORMAT);
    /* an id beyond the vectors' terms names the file and line (was a 32 GiB table for 2^32 - 1) */
    f = fopen(path, "w");
    fprintf(f, "0\tmarket\t1\n4294967295\tbank\t1\n");
    fclose(f);
    CU_ASSERT_EQUAL(dm_flock_vocab_read(&voc, path, 10), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "vocab.tsv:2: term id 4294967295"));
}

/* A picture that cannot be written: one error naming it, and nothing printed by libpng itself
 * (its default handler wrote "libpng error: Write Error" beside our message). The write fails on
 * a file size limit (EFBIG, SIGXFSZ ignored). */
static void test_png_write_error(void)
{
    char path[4200], errpath[4200];
    snprintf(path, sizeof path, "%s/big.png", g_tmp);
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", g_tmp);
    double x[3] = {0.5, 5, 9.9}, y[3] = {0.5, 2.5, 4.9};
    int32_t c[3] = {0, 1, -1};
    struct rlimit old, lim;
    CU_ASSERT_EQUAL_FATAL(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 4096;
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    fflush(stderr);
    int saved = dup(2), fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CU_ASSERT_FATAL(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    CU_ASSERT_EQUAL(setrlimit(RLIMIT_FSIZE, &lim), 0);
    int rc = dm_flock_png_write(path, x, y, c, 3, 10, 10, 4096);
    setrlimit(RLIMIT_FSIZE, &old);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    signal(SIGXFSZ, was);
    CU_ASSERT_EQUAL(rc, DM_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "big.png: libpng: write failed"));
    struct stat st;
    CU_ASSERT_TRUE(stat(errpath, &st) == 0 && st.st_size == 0); /* libpng printed nothing */
    CU_ASSERT_NOT_EQUAL(stat(path, &st), 0);                     /* no picture left behind */
    dm_error_clear();
}

static void test_png(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/f.png", g_tmp);
    double x[3] = {0.5, 5, 9.9}, y[3] = {0.5, 2.5, 4.9};
    int32_t c[3] = {0, 1, -1};
    CU_ASSERT_EQUAL_FATAL(dm_flock_png_write(path, x, y, c, 3, 10, 5, 200), DM_OK);
    FILE *f = fopen(path, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png))) {
        CU_FAIL("libpng could not read the image back");
    } else {
        png_init_io(png, f);
        png_read_info(png, info);
        CU_ASSERT_EQUAL(png_get_image_width(png, info), 200);
        CU_ASSERT_EQUAL(png_get_image_height(png, info), 100);
        CU_ASSERT_EQUAL(png_get_color_type(png, info), PNG_COLOR_TYPE_RGB);
        /* the pixel of point 1 (centre) is coloured, not background */
        png_bytep rows = malloc(200 * 3);
        int coloured = 0;
        for (int yy = 0; yy < 100; yy++) {
            png_read_row(png, rows, NULL);
            if (yy == 50)
                for (int k = 0; k < 3; k++) coloured |= rows[100 * 3 + k] != 255;
        }
        CU_ASSERT_TRUE(coloured);
        free(rows);
    }
    png_destroy_read_struct(&png, &info, NULL);
    fclose(f);
}

int main(int argc, char **argv)
{
    CU_TestInfo unit[] = {
        {"dot product exact and order independent", test_dot_exact},
        {"a picture that cannot be written: one error, libpng silent", test_png_write_error},
        {"threshold 1 joins identical vectors (single-precision slack)", test_threshold_one},
        {"tile merge of the CUDA similarity kernel (emulated) equals the merge", test_dot_tile_merge},
        {"pair contribution and torus helpers", test_pair_contribution},
        {"halo directions, also outside the slice and across the seam", test_halo_dirs},
        {"boid store: removal by moving the last boids into holes", test_store_remove},
        {"halo vector cache: left-out vectors taken from the previous halo", test_halo_cache},
        {"halo vector cache: a halo above the parallel id map's size", test_halo_cache_large},
        {"id map: parallel and serial builds, any threads", test_idmap_parallel},
        {"message pack: the selection's states, any threads", test_msg_pack_state},
        {"store: the tuning workloads' unit rows, any threads", test_store_unit_rows},
        {"synthetic vectors: bucket draws and radix sort give the definition's rows", test_synth_definition},
        {"halo vector cache: migrants' vectors kept by their sender", test_departed_cache},
        {"forces and update: hand-checked configuration", test_hand_forces},
        {"forces and update: the same across the torus corner", test_hand_forces_seam},
        {"grid search equals brute force (1500 docs)", test_grid_vs_brute_large},
        {"grid search equals brute force (3x3 grid)", test_grid_vs_brute_3x3},
        {"grid search equals brute force (dense)", test_grid_vs_brute_dense},
        {"grid search equals brute force (large term ids)", test_grid_vs_brute_terms},
        {"final-graph edges equal brute force", test_edges_vs_brute},
        {"determinism (threads, seed)", test_determinism},
        {"pair cache: the same run without it, hits with it", test_cpu_pair_cache},
        {"speed cap and shrinking plane", test_speed_cap_and_shrink},
        {"invalid options rejected", test_options_rejected},
        {"options beyond the arithmetic's range rejected, naming the option", test_options_bounds},
        {"update finite at the weights' bound; sums wrap, in any order", test_update_extremes},
        {"clusters of a hand-made configuration", test_clusters_hand},
        {"small components attached by centroid similarity", test_clusters_centroid},
        {"parallel centroids: exact ties and --merge 1", test_clusters_parallel_centroids},
        {"clusters refined by centroid steps (hand-checked)", test_clusters_refine},
        {"the centroid steps of too many clusters are skipped", test_centroid_skipped},
        {"resume gives the uninterrupted result", test_resume_identical},
        {"checkpoint: the last one written; another input, a corrupt or old file refused",
         test_checkpoint_last_and_refused},
        {"checkpoint: a refused resume names the option, an empty, cut or missing file",
         test_checkpoint_refusal_messages},
        {"checkpoint: its folder, a device or another file refused before the run",
         test_checkpoint_target_checked},
        {"resume: the PNG series' picture of the checkpoint's iteration drawn",
         test_resume_snapshot_at_checkpoint},
        {"top terms by summed weight", test_top_terms},
        {"top terms: any cut into parts, any threads", test_top_terms_parts},
        {"vocabulary reader", test_vocab},
        {"PNG round trip", test_png},
        CU_TEST_INFO_NULL};
    CU_SuiteInfo suites[] = {{"flock", setup, teardown, NULL, NULL, unit}, CU_SUITE_INFO_NULL};
    return dm_test_run_mpi(argc, argv, suites);
}
