/* Unit tests of the tuner's pure logic (no GPU): MSP detection on synthetic throughput curves,
 * occupancy estimate, model pruning and ordering, output comparison, and the whole search driver
 * (every mode) over synthetic performance models with a known optimum. */
#include <CUnit/Basic.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/status.h"
#include "common/tune/tune.h"
#include "common/tune/tune_model.h"
#include "common/tune/tune_print.h"

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}
static double unif(uint64_t *s) { return (double)lcg(s) / 9007199254740992.0; }

/* The MSP definition checked directly: every point from msp on is within tol of the suffix best,
 * and msp - 1 (if any) breaks that. */
static void assert_msp_property(const double *t, int n, int msp, double tol)
{
    CU_ASSERT_FATAL(msp >= 0 && msp < n);
    double mx = 0, mn = INFINITY;
    for (int j = msp; j < n; j++) {
        if (t[j] > mx) mx = t[j];
        if (t[j] < mn) mn = t[j];
    }
    CU_ASSERT(mn >= (1 - tol) * mx);
    if (msp > 0) {
        double mx2 = mx > t[msp - 1] ? mx : t[msp - 1];
        double mn2 = mn < t[msp - 1] ? mn : t[msp - 1];
        CU_ASSERT(mn2 < (1 - tol) * mx2);
    }
}

static void test_msp_saturating(void)
{
    /* throughput of a kernel with a fixed launch overhead: n / (n / peak + overhead) */
    double t[20];
    for (int i = 0; i < 20; i++) {
        double n = 1024.0 * (double)(1u << i);
        t[i] = n / (n / 1000.0 + 50.0);
    }
    int msp = dm_tune_msp_index(t, 20, 0.10);
    assert_msp_property(t, 20, msp, 0.10);
    /* for a monotone curve this is the smallest size within 10% of the best */
    CU_ASSERT(t[msp] >= 0.9 * t[19]);
    CU_ASSERT(msp == 0 || t[msp - 1] < 0.9 * t[19]);
    CU_ASSERT(msp > 0 && msp < 19);
}

static void test_msp_noisy_plateau(void)
{
    for (uint64_t seed = 1; seed <= 50; seed++) {
        uint64_t s = seed;
        double t[16];
        int start = 3 + (int)(seed % 8); /* the plateau begins here */
        for (int i = 0; i < 16; i++) {
            double noise = 1.0 + 0.08 * (unif(&s) - 0.5); /* +-4% */
            double level = i < start ? 0.75 * pow(0.5, start - 1 - i) : 1.0;
            t[i] = 100.0 * level * noise;
        }
        int msp = dm_tune_msp_index(t, 16, 0.10);
        assert_msp_property(t, 16, msp, 0.10);
        CU_ASSERT_EQUAL(msp, start);
    }
}

static void test_msp_no_plateau(void)
{
    double t[12];
    for (int i = 0; i < 12; i++) t[i] = 3.0 * (double)(1u << i); /* doubles at every size */
    CU_ASSERT_EQUAL(dm_tune_msp_index(t, 12, 0.10), 11);
    /* still rising 15% per step at the end: no plateau within 10% either */
    for (int i = 0; i < 12; i++) t[i] = pow(1.15, i);
    CU_ASSERT_EQUAL(dm_tune_msp_index(t, 12, 0.10), 11);
}

static void test_msp_early_peak(void)
{
    /* in-cache sizes look 60% faster than the sustained plateau from index 6 on */
    double t[14];
    for (int i = 0; i < 14; i++) t[i] = i < 3 ? 20.0 * (i + 1) : (i < 6 ? 160.0 : 100.0);
    t[4] = 165.0;
    int msp = dm_tune_msp_index(t, 14, 0.10);
    assert_msp_property(t, 14, msp, 0.10);
    CU_ASSERT_EQUAL(msp, 6);
}

static void test_msp_bad_input(void)
{
    double t[3] = {1.0, 2.0, 3.0};
    CU_ASSERT_EQUAL(dm_tune_msp_index(t, 0, 0.1), -1);
    CU_ASSERT_EQUAL(dm_tune_msp_index(NULL, 3, 0.1), -1);
    CU_ASSERT_EQUAL(dm_tune_msp_index(t, 1, 0.1), 0);
    t[1] = -1.0;
    CU_ASSERT_EQUAL(dm_tune_msp_index(t, 3, 0.1), -1);
    t[1] = NAN;
    CU_ASSERT_EQUAL(dm_tune_msp_index(t, 3, 0.1), -1);
}

static dm_tune_limits h100_like(void)
{
    dm_tune_limits l = {132, 2048, 32, 1024, 65536, 233472, 232448};
    return l;
}

static void test_occupancy_estimate(void)
{
    dm_tune_limits l = h100_like();
    dm_tune_attr a = {32, 0, 0, 1024, -1};
    /* threads limit: 2048 / 256 */
    CU_ASSERT_EQUAL(dm_tune_occupancy_estimate(&l, 256, &a), 2048 / 256);
    /* registers: 128 regs x 32 threads = 4096 per warp -> 16 warps -> 2 blocks of 8 warps */
    a.regs_per_thread = 128;
    CU_ASSERT_EQUAL(dm_tune_occupancy_estimate(&l, 256, &a), 65536 / (128 * 32) / 8);
    /* shared memory: 100 KB per block -> 2 blocks */
    a.regs_per_thread = 32;
    a.smem_static = 100 * 1024;
    CU_ASSERT_EQUAL(dm_tune_occupancy_estimate(&l, 128, &a), (int)(l.smem_per_sm / (100 * 1024)));
    /* over the per-block limit: cannot run */
    a.smem_static = l.smem_per_block + 1;
    CU_ASSERT_EQUAL(dm_tune_occupancy_estimate(&l, 128, &a), 0);
    /* above the function's maximum threads per block */
    a.smem_static = 0;
    a.max_threads_per_block = 512;
    CU_ASSERT_EQUAL(dm_tune_occupancy_estimate(&l, 1024, &a), 0);
    /* block-count limit: 32 blocks of 32 threads */
    a.max_threads_per_block = 1024;
    CU_ASSERT_EQUAL(dm_tune_occupancy_estimate(&l, 32, &a), 32);
}

static int dummy_launch(const void *args, size_t n, void *stream)
{
    (void)args;
    (void)n;
    (void)stream;
    return DM_OK;
}

/* A synthetic space: blocks x rakes x strided. */
static int make_space(dm_tune_instance *inst, const int *blocks, int nb, const int *rakes, int nr)
{
    int n = 0;
    for (int b = 0; b < nb; b++)
        for (int r = 0; r < nr; r++)
            for (int s = 0; s < 2; s++) {
                memset(&inst[n], 0, sizeof inst[n]);
                inst[n].policy = (dm_tune_policy){blocks[b], rakes[r], s, DM_LAYOUT_NONE, 0};
                inst[n].launch = dummy_launch;
                n++;
            }
    return n;
}

static void test_prune(void)
{
    const int blocks[] = {64, 100, 256, 1024};
    const int rakes[] = {1, 2, 4, 8, 16};
    dm_tune_instance inst[64];
    dm_tune_attr attr[64];
    dm_tune_cand cand[64];
    int n = make_space(inst, blocks, 4, rakes, 5);
    dm_tune_limits l = h100_like();
    for (int i = 0; i < n; i++) {
        attr[i] = (dm_tune_attr){32, 0, 0, 1024, -1};
        if (inst[i].policy.block == 1024) attr[i].regs_per_thread = 64 + 8; /* 1024 x 72 regs: none fit */
        if (inst[i].policy.block == 64 && inst[i].policy.rake == 16) attr[i].smem_static = 300000;
    }
    /* plenty of work: b is large, so nothing is pruned for its rake */
    double big = 132.0 * 64 * 32 * 64;
    int kept = dm_tune_model_prune(cand, inst, attr, n, &l, big);
    int expect_kept = 0;
    for (int i = 0; i < n; i++) {
        const dm_tune_policy *p = &inst[i].policy;
        int invalid = p->block == 100 || p->block == 1024 || (p->block == 64 && p->rake == 16);
        CU_ASSERT_EQUAL(cand[i].valid, !invalid);
        if (invalid) {
            CU_ASSERT(cand[i].pruned);
            CU_ASSERT(strncmp(cand[i].why, "invalid", 7) == 0);
        } else {
            CU_ASSERT(cand[i].active_warps > 0);
            CU_ASSERT(fabs(cand[i].transition_rake - big / (132.0 * cand[i].active_warps * 32)) < 1e-9);
            if (!cand[i].pruned) expect_kept++;
        }
    }
    CU_ASSERT_EQUAL(kept, expect_kept);
    CU_ASSERT(kept > 0);

    /* low occupancy: one instance uses 255 registers -> far fewer warps than the others */
    attr[0].regs_per_thread = 255; /* block 64 rake 1 consecutive */
    kept = dm_tune_model_prune(cand, inst, attr, n, &l, big);
    CU_ASSERT(cand[0].valid && cand[0].pruned);
    CU_ASSERT(strstr(cand[0].why, "occupancy") != NULL);
    attr[0].regs_per_thread = 32;

    /* little work: b around 2 for full occupancy -> rakes 4, 8, 16 demoted, none pruned */
    double small = 132.0 * 64 * 32 * 2;
    int kept_small = dm_tune_model_prune(cand, inst, attr, n, &l, small);
    CU_ASSERT_EQUAL(kept_small, expect_kept);
    for (int i = 0; i < n; i++) {
        if (!cand[i].valid) continue;
        double b = cand[i].transition_rake > 1 ? cand[i].transition_rake : 1;
        CU_ASSERT_EQUAL(cand[i].demoted, inst[i].policy.rake > b);
        CU_ASSERT(!cand[i].pruned);
    }
    /* tiny work: every rake above b -> all but the smallest rake demoted */
    kept = dm_tune_model_prune(cand, inst, attr, n, &l, 10.0);
    CU_ASSERT_EQUAL(kept, expect_kept);
    for (int i = 0; i < n; i++)
        if (cand[i].valid) CU_ASSERT_EQUAL(cand[i].demoted, inst[i].policy.rake != 1);
}

static void test_order(void)
{
    const int blocks[] = {128, 256, 512};
    const int rakes[] = {1, 2, 4, 8};
    dm_tune_instance inst[32];
    dm_tune_attr attr[32];
    dm_tune_cand cand[32];
    int order[32];
    int n = make_space(inst, blocks, 3, rakes, 4);
    dm_tune_limits l = h100_like();
    for (int i = 0; i < n; i++) attr[i] = (dm_tune_attr){32, 0, 0, 1024, -1};
    attr[5].regs_per_thread = 255; /* pruned for occupancy */
    int kept = dm_tune_model_prune(cand, inst, attr, n, &l, 132.0 * 64 * 32 * 4);
    dm_tune_model_order(order, cand, n, NULL);
    /* a permutation: kept first, not demoted before demoted, each with non-increasing score */
    int seen[32] = {0};
    for (int j = 0; j < n; j++) seen[order[j]]++;
    for (int i = 0; i < n; i++) CU_ASSERT_EQUAL(seen[i], 1);
    for (int j = 0; j < n; j++) CU_ASSERT_EQUAL(cand[order[j]].pruned, j >= kept);
    for (int j = 1; j < kept; j++) {
        const dm_tune_cand *a = &cand[order[j - 1]], *b = &cand[order[j]];
        CU_ASSERT(a->demoted <= b->demoted);
        if (a->demoted == b->demoted) CU_ASSERT(a->score >= b->score);
    }
    int n_demoted = 0;
    for (int i = 0; i < n; i++) n_demoted += cand[i].demoted;
    CU_ASSERT(n_demoted > 0); /* rake 8 > b = 4 */
    /* at full occupancy and b = 4: the best predicted is rake 4 strided block 256 */
    CU_ASSERT_EQUAL(inst[order[0]].policy.rake, 4);
    CU_ASSERT_EQUAL(inst[order[0]].policy.strided, 1);
    CU_ASSERT_EQUAL(inst[order[0]].policy.block, 256);
    /* prior ordering: the prior policy first, distances non-decreasing among kept */
    dm_tune_policy prior = {512, 2, 0, DM_LAYOUT_NONE, 0};
    dm_tune_model_order(order, cand, n, &prior);
    CU_ASSERT(memcmp(&inst[order[0]].policy, &prior, sizeof prior) == 0);
    for (int j = 1; j < kept; j++)
        CU_ASSERT(dm_tune_policy_distance(&cand[order[j - 1]].policy, &prior) <=
                  dm_tune_policy_distance(&cand[order[j]].policy, &prior) + 1e-12);
    for (int j = 0; j < n; j++) CU_ASSERT_EQUAL(cand[order[j]].pruned, j >= kept);
}

static void test_outputs_equal(void)
{
    float a[100], b[100];
    for (int i = 0; i < 100; i++) a[i] = b[i] = (float)(i * 0.5 - 20);
    CU_ASSERT(dm_tune_outputs_equal(a, b, sizeof a, 0.0));
    b[50] += 1e-4f;
    CU_ASSERT(!dm_tune_outputs_equal(a, b, sizeof a, 0.0));    /* exact: any bit differs */
    CU_ASSERT(dm_tune_outputs_equal(a, b, sizeof a, 1e-5));    /* 1e-4 / 29.5 < 1e-5 */
    b[50] += 1.0f;
    CU_ASSERT(!dm_tune_outputs_equal(a, b, sizeof a, 1e-5));
    b[50] = a[50];
    a[7] = b[7] = NAN;
    CU_ASSERT(dm_tune_outputs_equal(a, b, sizeof a, 1e-6));
    b[7] = 0.0f;
    CU_ASSERT(!dm_tune_outputs_equal(a, b, sizeof a, 1e-6));
    CU_ASSERT(!dm_tune_outputs_equal(a, b, 7, 1e-6)); /* not a float array */
    CU_ASSERT(dm_tune_outputs_equal(NULL, NULL, 0, 0.0));
}

static void test_curve_sizes(void)
{
    size_t s[24];
    int n = dm_tune_curve_sizes(s, 24, (size_t)1 << 28, 4096);
    CU_ASSERT_EQUAL(n, 28 - 12 + 1);
    CU_ASSERT_EQUAL(s[n - 1], (size_t)1 << 28);
    CU_ASSERT(s[0] >= 4096);
    for (int i = 1; i < n; i++) CU_ASSERT_EQUAL(s[i], 2 * s[i - 1]);
    /* odd target: halves rounded down, still ascending and ending at the target */
    n = dm_tune_curve_sizes(s, 24, 1000003, 1000);
    CU_ASSERT_EQUAL(s[n - 1], 1000003u);
    for (int i = 1; i < n; i++) CU_ASSERT(s[i] > s[i - 1]);
    CU_ASSERT(s[0] >= 1000);
    /* max entries respected */
    CU_ASSERT_EQUAL(dm_tune_curve_sizes(s, 3, (size_t)1 << 20, 1), 3);
}

/* ---- the search driver over a synthetic performance model -------------------------------- */

typedef struct synth {
    const dm_tune_instance *inst;
    int n;
    double speed[64];   /* sustained throughput of each instance (units / ms) */
    int wrong[64];      /* 1: output differs from the default */
    double overhead_ms; /* launch overhead: gives the throughput curve its saturation */
    size_t cache_n;     /* > 0: sizes up to cache_n run cache_speedup times faster (an early peak) */
    double cache_speedup;
    int measured, checked;
} synth;

static int synth_measure(void *ctx, int i, size_t n, double *ms)
{
    synth *s = ctx;
    s->measured++;
    *ms = s->overhead_ms + (double)n / s->speed[i];
    if (s->cache_n && n <= s->cache_n) *ms /= s->cache_speedup;
    return DM_OK;
}

static int synth_check(void *ctx, int i, size_t n, int *same)
{
    synth *s = ctx;
    (void)n;
    s->checked++;
    *same = !s->wrong[i];
    return DM_OK;
}

static int synth_attr(void *ctx, int i, dm_tune_attr *out)
{
    (void)ctx;
    (void)i;
    *out = (dm_tune_attr){32, 0, 0, 1024, -1};
    return DM_OK;
}

static dm_tune_instance g_inst[64];
static int g_ninst;

static void synth_setup(synth *s, dm_tune_kernel *k, dm_tune_ops *ops)
{
    const int blocks[] = {128, 256, 512};
    const int rakes[] = {1, 2, 4, 8};
    g_ninst = make_space(g_inst, blocks, 3, rakes, 4);
    memset(s, 0, sizeof *s);
    s->inst = g_inst;
    s->n = g_ninst;
    s->overhead_ms = 0.005;
    /* speed grows with the rake up to 4, strided is faster, block 256 is best */
    for (int i = 0; i < g_ninst; i++) {
        const dm_tune_policy *p = &g_inst[i].policy;
        double r = p->rake <= 4 ? p->rake : 8.0 / p->rake * 2.0;
        s->speed[i] = 1e6 * (1.0 + 0.05 * r) * (p->strided ? 1.1 : 1.0) * (p->block == 256 ? 1.05 : 1.0);
    }
    memset(k, 0, sizeof *k);
    k->name = "test.synth";
    k->work_unit = "items";
    k->instances = g_inst;
    k->n_instances = g_ninst;
    k->default_instance = 0; /* block 128 rake 1 consecutive: slowest */
    memset(ops, 0, sizeof *ops);
    ops->ctx = s;
    ops->measure = synth_measure;
    ops->check = synth_check;
    ops->attributes = synth_attr;
    ops->limits = h100_like();
}

static int fastest(const synth *s, int skip_wrong)
{
    int best = -1;
    for (int i = 0; i < s->n; i++) {
        if (skip_wrong && s->wrong[i]) continue;
        if (best < 0 || s->speed[i] > s->speed[best]) best = i;
    }
    return best;
}

static void test_search_msp(void)
{
    synth s;
    dm_tune_kernel k;
    dm_tune_ops ops;
    synth_setup(&s, &k, &ops);
    dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
    opt.compare_exhaustive = 1;
    size_t target = (size_t)1 << 30;
    dm_tune_result r;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, target, &opt, &ops), DM_OK);
    int best = fastest(&s, 0);
    CU_ASSERT_EQUAL(r.exhaustive_best, best);
    CU_ASSERT_EQUAL(r.chosen, best);
    CU_ASSERT(r.tuned_ms < r.default_ms);
    CU_ASSERT(r.msp_n < target);
    /* the MSP satisfies its definition on the default's curve */
    CU_ASSERT((double)r.msp_n / (s.overhead_ms + r.msp_n / s.speed[0]) >=
              0.9 * (double)target / (s.overhead_ms + target / s.speed[0]));
    CU_ASSERT(r.n_evaluated <= r.n_candidates);
    CU_ASSERT(r.n_candidates <= r.n_valid);
    CU_ASSERT_EQUAL(r.n_valid, g_ninst);
    CU_ASSERT_EQUAL(r.n_rejected, 0);
    CU_ASSERT(r.best_rank_in_order >= 1);
}

static void test_search_rejects_wrong(void)
{
    synth s;
    dm_tune_kernel k;
    dm_tune_ops ops;
    synth_setup(&s, &k, &ops);
    int best = fastest(&s, 0);
    s.wrong[best] = 1; /* the fastest instance is buggy */
    dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
    opt.compare_exhaustive = 1;
    dm_tune_result r;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
    CU_ASSERT_NOT_EQUAL(r.chosen, best);
    CU_ASSERT_NOT_EQUAL(r.exhaustive_best, best);
    CU_ASSERT_EQUAL(r.exhaustive_best, fastest(&s, 1));
    CU_ASSERT(r.n_rejected >= 1);
    /* exhaustive mode too */
    opt.mode = DM_TUNE_EXHAUSTIVE;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
    CU_ASSERT_EQUAL(r.chosen, fastest(&s, 1));
}

/* Only an instance that would win is checked (a check costs a fresh tuning input): slow wrong
 * instances are never checked, and wrong fast ones are checked and passed over in time order. */
static void test_search_checks_would_be_winners(void)
{
    synth s;
    dm_tune_kernel k;
    dm_tune_ops ops;
    synth_setup(&s, &k, &ops);
    int best = fastest(&s, 0);
    for (int i = 0; i < s.n; i++) s.wrong[i] = i != best && i != k.default_instance; /* all others */
    dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
    dm_tune_result r;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
    CU_ASSERT_EQUAL(r.chosen, best);
    CU_ASSERT_EQUAL(s.checked, 1);
    CU_ASSERT_EQUAL(r.n_rejected, 0);
    CU_ASSERT(r.n_evaluated > 1); /* the wrong ones were timed, not checked */
    /* the two fastest wrong: the third fastest wins after two rejections */
    memset(s.wrong, 0, sizeof s.wrong);
    int first = fastest(&s, 1);
    s.wrong[first] = 1;
    int second = fastest(&s, 1);
    s.wrong[second] = 1;
    int third = fastest(&s, 1);
    s.checked = 0;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
    CU_ASSERT_EQUAL(r.chosen, third);
    CU_ASSERT_EQUAL(r.n_rejected, 2);
    CU_ASSERT_EQUAL(s.checked, 3);
    /* exhaustive mode alike */
    opt.mode = DM_TUNE_EXHAUSTIVE;
    s.checked = 0;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
    CU_ASSERT_EQUAL(r.chosen, third);
    CU_ASSERT_EQUAL(s.checked, 3);
    CU_ASSERT_EQUAL(s.measured > 0, 1);
}

static void test_search_keeps_default(void)
{
    synth s;
    dm_tune_kernel k;
    dm_tune_ops ops;
    synth_setup(&s, &k, &ops);
    for (int i = 0; i < s.n; i++) s.speed[i] = i == k.default_instance ? 2e6 : 1e6;
    for (int mode = DM_TUNE_OFF; mode <= DM_TUNE_EXHAUSTIVE; mode++) {
        dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
        opt.mode = mode;
        dm_tune_result r;
        CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 26, &opt, &ops), DM_OK);
        CU_ASSERT_EQUAL(r.chosen, k.default_instance);
        CU_ASSERT(r.tuned_ms == r.default_ms);
    }
}

static void test_search_modes(void)
{
    synth s;
    dm_tune_kernel k;
    dm_tune_ops ops;
    synth_setup(&s, &k, &ops);
    dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
    dm_tune_result r;
    opt.mode = DM_TUNE_OFF;
    s.measured = 0;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 26, &opt, &ops), DM_OK);
    CU_ASSERT_EQUAL(r.chosen, k.default_instance);
    CU_ASSERT_EQUAL(s.measured, 1);
    /* model: the best predicted (first in model order), kept because it is faster here */
    opt.mode = DM_TUNE_MODEL;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 26, &opt, &ops), DM_OK);
    CU_ASSERT_EQUAL(r.chosen, r.winner_at_msp);
    CU_ASSERT(g_inst[r.chosen].policy.strided);
    /* exhaustive: measures every valid instance once at the target + the checks */
    opt.mode = DM_TUNE_EXHAUSTIVE;
    s.measured = 0;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 26, &opt, &ops), DM_OK);
    CU_ASSERT_EQUAL(s.measured, g_ninst);
    CU_ASSERT_EQUAL(r.chosen, fastest(&s, 0));
    /* an unknown mode */
    opt.mode = 17;
    CU_ASSERT_EQUAL(dm_tune_search(&r, &k, 1024, &opt, &ops), DM_ERR_INVALID_ARG);
}

static void test_search_prior(void)
{
    synth s;
    dm_tune_kernel k;
    dm_tune_ops ops;
    synth_setup(&s, &k, &ops);
    int best = fastest(&s, 0);
    dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
    opt.compare_exhaustive = 1;
    opt.prior = &g_inst[best].policy;
    opt.max_evals = 1; /* a budget of one candidate: the prior must get it right */
    dm_tune_result r;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
    CU_ASSERT_EQUAL(r.best_rank_in_order, 1);
    CU_ASSERT_EQUAL(r.n_evaluated, 1);
    CU_ASSERT_EQUAL(r.chosen, best);
}

static void test_search_prune_levels(void)
{
    synth s;
    dm_tune_kernel k;
    dm_tune_ops ops;
    synth_setup(&s, &k, &ops);
    /* a kernel whose work shrinks with the rake: rake 8 is fastest although b = 1 here */
    for (int i = 0; i < s.n; i++) s.speed[i] = 1e6 * (1.0 + 0.2 * g_inst[i].policy.rake);
    size_t n = (size_t)132 * 64 * 32; /* b = 1 at full occupancy */
    int best = fastest(&s, 0);
    CU_ASSERT_EQUAL(g_inst[best].policy.rake, 8);
    dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
    opt.compare_exhaustive = 1;
    dm_tune_result r;
    opt.prune = 1; /* default: rakes above b searched last, still found */
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, n, &opt, &ops), DM_OK);
    CU_ASSERT_EQUAL(g_inst[r.chosen].policy.rake, 8);
    CU_ASSERT_EQUAL(r.n_candidates, g_ninst);
    CU_ASSERT(r.best_rank_in_order > 1); /* the model's order puts it late */
    opt.prune = 2; /* Fang strictly: only rake 1 is searched */
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, n, &opt, &ops), DM_OK);
    CU_ASSERT_EQUAL(g_inst[r.chosen].policy.rake, 1);
    CU_ASSERT(r.n_candidates < g_ninst);
    CU_ASSERT_EQUAL(r.best_rank_in_order, 0); /* the exhaustive best was not a candidate */
    opt.prune = 0;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, n, &opt, &ops), DM_OK);
    CU_ASSERT_EQUAL(g_inst[r.chosen].policy.rake, 8); /* six rake-8 instances tie */
    CU_ASSERT_EQUAL(r.n_candidates, r.n_valid);
}


/* ---- search-time accounting: what search_s and exhaustive_s contain -------------------------- */

/* The synthetic model with real wall time: a measurement sleeps MEAS_S (the timing work of the
 * search); a measurement at a new size first "creates a tuning input" (SETUP_S, reported by
 * setup_seconds, as the CUDA layer's ensure_state does); a check creates a fresh input (SETUP_S,
 * reported by setup_seconds, as fresh_output does) and then compares (COMPARE_S). Search times
 * must contain the measurements and nothing else; the creation of an input inside a check used to
 * be subtracted twice (once in check_s, once in setup_seconds), which gave negative times. */
enum { TIMED_MEAS_US = 1000, TIMED_SETUP_US = 8000, TIMED_COMPARE_US = 2000 };

typedef struct timed_synth {
    synth s;
    double setup_s;   /* reported by setup_seconds */
    double measure_s; /* wall time spent in measurement sleeps */
    size_t last_n;
} timed_synth;

static double sleep_us(int us)
{
    double t0 = dm_wtime();
    struct timespec ts = {0, (long)us * 1000L};
    while (nanosleep(&ts, &ts) != 0) {}
    return dm_wtime() - t0;
}

static int timed_measure(void *ctx, int i, size_t n, double *ms)
{
    timed_synth *t = ctx;
    if (n != t->last_n) {
        t->setup_s += sleep_us(TIMED_SETUP_US);
        t->last_n = n;
    }
    t->measure_s += sleep_us(TIMED_MEAS_US);
    return synth_measure(&t->s, i, n, ms);
}

static int timed_check(void *ctx, int i, size_t n, int *same)
{
    timed_synth *t = ctx;
    t->setup_s += sleep_us(TIMED_SETUP_US);
    sleep_us(TIMED_COMPARE_US);
    return synth_check(&t->s, i, n, same);
}

static double timed_setup_seconds(void *ctx) { return ((timed_synth *)ctx)->setup_s; }

static void test_search_time_accounting(void)
{
    timed_synth t;
    dm_tune_kernel k;
    dm_tune_ops ops;
    synth_setup(&t.s, &k, &ops);
    t.setup_s = t.measure_s = 0.0;
    t.last_n = 0;
    ops.ctx = &t;
    ops.measure = timed_measure;
    ops.check = timed_check;
    ops.setup_seconds = timed_setup_seconds;
    /* the three fastest instances are wrong: the would-be winners are checked (and rejected)
     * until the fourth passes, 40 ms of checks that neither search time may hold */
    for (int q = 0; q < 3; q++) t.s.wrong[fastest(&t.s, 1)] = 1;
    dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
    opt.compare_exhaustive = 1;
    dm_tune_result r;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
    CU_ASSERT_EQUAL(r.n_rejected, 3);
    CU_ASSERT(t.s.checked >= 4 && t.s.checked <= 5); /* the exhaustive best may differ once */
    double checks = t.s.checked * (TIMED_SETUP_US + TIMED_COMPARE_US) * 1e-6;
    printf("\n  search %.4f s + exhaustive %.4f s, measurements %.4f s, checks %.4f s (%d), "
           "setup %.4f s", r.search_s, r.exhaustive_s, t.measure_s, r.check_s, t.s.checked,
           t.setup_s);
    CU_ASSERT(r.search_s > 0.0);
    CU_ASSERT(r.exhaustive_s > 0.0);
    CU_ASSERT(r.check_s >= checks);
    /* both searches together are the measurements, up to the driver's own bookkeeping: no check
     * time left in (it is several times the measurements here), none subtracted twice */
    double both = r.search_s + r.exhaustive_s;
    CU_ASSERT(both >= 0.95 * t.measure_s);
    CU_ASSERT(both <= t.measure_s + 0.25 * checks);
    /* each search at least its own measurements: MSP = curve + candidates + confirmation */
    int msp_measures = r.curve_points + r.n_evaluated + (r.winner_at_msp != k.default_instance);
    CU_ASSERT(r.search_s >= 0.95 * msp_measures * TIMED_MEAS_US * 1e-6);
    CU_ASSERT(r.exhaustive_s >= 0.95 * r.exhaustive_evaluated * TIMED_MEAS_US * 1e-6);
    /* the parts add up to the whole */
    CU_ASSERT(r.curve_s > 0.0 && r.candidates_s > 0.0 && r.confirm_s >= 0.0);
    CU_ASSERT(fabs(r.curve_s + r.candidates_s + r.confirm_s - r.search_s) < 1e-6);
    CU_ASSERT(r.curve_s >= 0.95 * r.curve_points * TIMED_MEAS_US * 1e-6);

    /* the exhaustive mode alone: its time is its measurements */
    t.measure_s = 0.0;
    opt.mode = DM_TUNE_EXHAUSTIVE;
    opt.compare_exhaustive = 0;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
    CU_ASSERT(r.search_s > 0.0);
    CU_ASSERT(r.search_s >= 0.95 * t.measure_s);
    CU_ASSERT(r.search_s <= t.measure_s + 0.25 * t.s.checked * (TIMED_SETUP_US + TIMED_COMPARE_US) * 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(r.exhaustive_s, r.search_s, 1e-12);
}

/* rank_of: the position of a given instance in the candidate order without an exhaustive search,
 * the same position that the exhaustive search reports for its best. */
static void test_search_rank_of(void)
{
    synth s;
    dm_tune_kernel k;
    dm_tune_ops ops;
    synth_setup(&s, &k, &ops);
    dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
    opt.compare_exhaustive = 1;
    dm_tune_result r, q;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
    CU_ASSERT_FATAL(r.exhaustive_best >= 0);
    opt.compare_exhaustive = 0;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&q, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
    CU_ASSERT_EQUAL(q.exhaustive_best, -1);
    CU_ASSERT_EQUAL(q.best_rank_in_order, 0); /* rank_of -1: nothing ranked */
    opt.rank_of = r.exhaustive_best;
    s.measured = 0;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&q, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
    CU_ASSERT_EQUAL(q.best_rank_in_order, r.best_rank_in_order);
    CU_ASSERT(s.measured < g_ninst + q.curve_points + 1); /* no exhaustive search ran */
    /* from a prior equal to the best, the best comes first */
    opt.prior = &g_inst[r.exhaustive_best].policy;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&q, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
    CU_ASSERT_EQUAL(q.best_rank_in_order, 1);
}


/* The curve is measured from the target down and stops at the first unsaturated size: the MSP is
 * the one dm_tune_msp_index finds on the whole curve, with fewer measurements. */
static void expect_curve(synth *s, const dm_tune_kernel *k, dm_tune_ops *ops, size_t target)
{
    dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
    opt.min_n = 1024;
    size_t sizes[32];
    double thr[32];
    int nc = dm_tune_curve_sizes(sizes, 24, target, opt.min_n);
    for (int c = 0; c < nc; c++) {
        double ms;
        synth_measure(s, k->default_instance, sizes[c], &ms);
        thr[c] = (double)sizes[c] / ms;
    }
    int m = dm_tune_msp_index(thr, nc, opt.msp_tolerance);
    CU_ASSERT_FATAL(m >= 0);
    dm_tune_result r;
    s->measured = 0;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, k, target, &opt, ops), DM_OK);
    CU_ASSERT_EQUAL(r.msp_n, sizes[m]);
    /* the sizes from m up, and the one below m that ended the saturated tail */
    CU_ASSERT_EQUAL(r.curve_points, m > 0 ? nc - m + 1 : nc);
    /* curve + candidates at the MSP + confirmation of a winner other than the default, unless
     * the MSP is the target (the winner's time there is its candidate measurement) */
    CU_ASSERT_EQUAL(s->measured, r.curve_points + r.n_evaluated +
                                     (r.winner_at_msp != k->default_instance && r.msp_n < target));
}

static void test_search_curve_top_down(void)
{
    synth s;
    dm_tune_kernel k;
    dm_tune_ops ops;
    synth_setup(&s, &k, &ops);
    /* saturating: MSP well below the target, the small sizes are never measured */
    expect_curve(&s, &k, &ops, (size_t)1 << 28);
    /* an early peak (a cache effect at small sizes) is skipped as on the whole curve */
    s.cache_n = (size_t)1 << 16;
    s.cache_speedup = 1.5;
    expect_curve(&s, &k, &ops, (size_t)1 << 28);
    /* no plateau: the curve still rises at the target; target and one size below; the MSP is
     * the target, where the candidates were timed: no second measurement of the winner */
    s.cache_n = 0;
    s.overhead_ms = 1e3;
    expect_curve(&s, &k, &ops, (size_t)1 << 24);
    {
        dm_tune_options o = DM_TUNE_OPTIONS_INIT;
        o.min_n = 1024;
        dm_tune_result r;
        CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 24, &o, &ops), DM_OK);
        CU_ASSERT_EQUAL(r.msp_n, (size_t)1 << 24);
        CU_ASSERT(r.tuned_ms <= r.default_ms);
        if (r.winner_at_msp != k.default_instance) CU_ASSERT_EQUAL(r.chosen, r.winner_at_msp);
    }
    /* a flat curve: every size is saturated, the whole curve down to min_n */
    s.overhead_ms = 0.0;
    expect_curve(&s, &k, &ops, (size_t)1 << 24);

    /* a single instance: nothing to search, the default at the target is the whole search */
    dm_tune_kernel one = k;
    one.n_instances = 1;
    dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
    opt.compare_exhaustive = 1;
    dm_tune_result r;
    s.overhead_ms = 0.005;
    s.measured = 0;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &one, (size_t)1 << 28, &opt, &ops), DM_OK);
    CU_ASSERT_EQUAL(r.curve_points, 1);
    CU_ASSERT_EQUAL(r.msp_n, (size_t)1 << 28);
    CU_ASSERT_EQUAL(r.n_evaluated, 0);
    CU_ASSERT_EQUAL(r.chosen, 0);
    CU_ASSERT_EQUAL(r.exhaustive_best, 0);
    CU_ASSERT_EQUAL(s.measured, 2); /* MSP: the default at the target; exhaustive: the same */
}

/* Equal times: the default is kept (a winner must be faster); among equally fast candidates the
 * choice is the same at every search (model order at the MSP, index order in the exhaustive one). */
static void test_search_ties(void)
{
    synth s;
    dm_tune_kernel k;
    dm_tune_ops ops;
    synth_setup(&s, &k, &ops);
    for (int i = 0; i < s.n; i++) s.speed[i] = 1e6;
    for (int mode = DM_TUNE_OFF; mode <= DM_TUNE_EXHAUSTIVE; mode++) {
        dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
        opt.mode = mode;
        dm_tune_result r;
        CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
        CU_ASSERT_EQUAL(r.chosen, k.default_instance);
        CU_ASSERT(r.tuned_ms == r.default_ms);
    }
    /* two equally fast instances above the rest */
    s.speed[7] = s.speed[13] = 2e6;
    for (int mode = DM_TUNE_MSP; mode <= DM_TUNE_EXHAUSTIVE; mode++) {
        dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
        opt.mode = mode;
        dm_tune_result r1, r2;
        CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r1, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
        CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r2, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
        CU_ASSERT(r1.chosen == 7 || r1.chosen == 13);
        CU_ASSERT_EQUAL(r1.chosen, r2.chosen);
        if (mode == DM_TUNE_EXHAUSTIVE) CU_ASSERT_EQUAL(r1.chosen, 7);
    }
}

/* ---- measurements that fail or give no usable time ------------------------------------------- */

/* The synthetic model with per-instance faults: a time to return instead of the model's (0: below
 * the timer's resolution, NaN, inf, negative) or a status (DM_ERR_UNSUPPORTED: the instance cannot
 * run this input; DM_ERR_NOMEM: out of memory), from a size on. */
typedef struct faulty {
    synth s;
    int mode[64];       /* 0 none, 1 bad time, 2 status */
    double bad_ms[64];
    int status[64];
    size_t from_n[64];  /* the fault applies to sizes >= from_n (0: all) */
    size_t to_n[64];    /* ... and <= to_n (0: no bound) */
    int check_status[64];
} faulty;

static int faulty_applies(const faulty *f, int i, size_t n)
{
    return f->mode[i] && n >= f->from_n[i] && (!f->to_n[i] || n <= f->to_n[i]);
}

static int faulty_measure(void *ctx, int i, size_t n, double *ms)
{
    faulty *f = ctx;
    int rc = synth_measure(&f->s, i, n, ms);
    if (!faulty_applies(f, i, n)) return rc;
    if (f->mode[i] == 1) *ms = f->bad_ms[i];
    else return DM_ERR(f->status[i], "faulty instance %d", i);
    return DM_OK;
}

static int faulty_check(void *ctx, int i, size_t n, int *same)
{
    faulty *f = ctx;
    if (f->check_status[i]) return DM_ERR(f->check_status[i], "faulty check of instance %d", i);
    return synth_check(&f->s, i, n, same);
}

static void faulty_setup(faulty *f, dm_tune_kernel *k, dm_tune_ops *ops)
{
    memset(f, 0, sizeof *f);
    synth_setup(&f->s, k, ops);
    ops->ctx = f;
    ops->measure = faulty_measure;
    ops->check = faulty_check;
}

/* A candidate whose time is not a usable time never wins (a zero reads as infinitely fast), and
 * the fastest of the others is found in every mode; the default without a usable time at the
 * target is an error (nothing to compare with: a result would be stored as if measured). */
static void test_search_bad_times(void)
{
    const double bad[] = {0.0, -1.0, NAN, INFINITY};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        faulty f;
        dm_tune_kernel k;
        dm_tune_ops ops;
        faulty_setup(&f, &k, &ops);
        /* the slowest non-default instance gives the bad time; so does the true best in a second
         * pass below */
        int best = fastest(&f.s, 0);
        for (int mode = DM_TUNE_MODEL; mode <= DM_TUNE_EXHAUSTIVE; mode++) {
            for (int victim = 0; victim < 2; victim++) {
                memset(f.mode, 0, sizeof f.mode);
                int v = victim ? best : 1;
                f.mode[v] = 1;
                f.bad_ms[v] = bad[b];
                f.s.wrong[v] = 0;
                dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
                opt.mode = mode;
                opt.compare_exhaustive = mode != DM_TUNE_EXHAUSTIVE;
                dm_tune_result r;
                CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
                CU_ASSERT_NOT_EQUAL(r.chosen, v);
                CU_ASSERT_NOT_EQUAL(r.exhaustive_best, v);
                CU_ASSERT(r.tuned_ms > 0.0 && isfinite(r.tuned_ms));
                CU_ASSERT(r.default_ms > 0.0 && isfinite(r.default_ms));
                CU_ASSERT(r.tuned_ms <= r.default_ms);
                /* the fastest instance with a usable time is the exhaustive best */
                f.s.wrong[v] = 1;
                CU_ASSERT_EQUAL(r.exhaustive_best, fastest(&f.s, 1));
                if (mode == DM_TUNE_EXHAUSTIVE) CU_ASSERT_EQUAL(r.chosen, fastest(&f.s, 1));
                f.s.wrong[v] = 0;
                CU_ASSERT(r.n_failed >= 1);
            }
        }
        /* the default without a usable time at the target: an error in every mode */
        memset(f.mode, 0, sizeof f.mode);
        f.mode[k.default_instance] = 1;
        f.bad_ms[k.default_instance] = bad[b];
        f.from_n[k.default_instance] = (size_t)1 << 28;
        for (int mode = DM_TUNE_OFF; mode <= DM_TUNE_EXHAUSTIVE; mode++) {
            dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
            opt.mode = mode;
            dm_tune_result r;
            CU_ASSERT_NOT_EQUAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
        }
        /* ... but below the target it ends the throughput curve there, as an unsaturated size
         * does: the MSP is the smallest size above it (here the curve is flat: saturated
         * everywhere, so that size) */
        f.s.overhead_ms = 0.0;
        f.from_n[k.default_instance] = 0;
        f.to_n[k.default_instance] = (size_t)1 << 22;
        dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
        opt.min_n = 1024;
        dm_tune_result r;
        CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
        CU_ASSERT_EQUAL(r.msp_n, (size_t)1 << 23);
        CU_ASSERT_EQUAL(r.curve_points, 28 - 22 + 1);
        CU_ASSERT_EQUAL(r.chosen, best);
    }
}

/* An instance that cannot run the tuning input (its launcher or hooks say DM_ERR_UNSUPPORTED) is
 * left out and the search goes on; any other failure (out of memory, a CUDA error) ends the
 * search with that error, so that nothing is stored as if it had been measured. */
static void test_search_failing_instances(void)
{
    faulty f;
    dm_tune_kernel k;
    dm_tune_ops ops;
    faulty_setup(&f, &k, &ops);
    int best = fastest(&f.s, 0);
    for (int mode = DM_TUNE_MODEL; mode <= DM_TUNE_EXHAUSTIVE; mode++) {
        dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
        opt.mode = mode;
        opt.compare_exhaustive = mode != DM_TUNE_EXHAUSTIVE;
        dm_tune_result r;
        /* the best cannot run: the second best wins */
        memset(f.mode, 0, sizeof f.mode);
        memset(f.check_status, 0, sizeof f.check_status);
        f.mode[best] = 2;
        f.status[best] = DM_ERR_UNSUPPORTED;
        CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
        f.s.wrong[best] = 1;
        int second = fastest(&f.s, 1);
        f.s.wrong[best] = 0;
        CU_ASSERT_NOT_EQUAL(r.chosen, best);
        CU_ASSERT_EQUAL(r.exhaustive_best, second);
        if (mode != DM_TUNE_MODEL) CU_ASSERT_EQUAL(r.chosen, second);
        CU_ASSERT_EQUAL(r.n_failed, 1);
        CU_ASSERT_EQUAL(r.n_rejected, 0); /* not a wrong output */
        /* its check says so: the same */
        memset(f.mode, 0, sizeof f.mode);
        f.check_status[best] = DM_ERR_UNSUPPORTED;
        CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
        CU_ASSERT_NOT_EQUAL(r.chosen, best);
        CU_ASSERT_EQUAL(r.exhaustive_best, second);
        f.check_status[best] = 0;
        /* every instance but the default cannot run: the default, measured */
        for (int i = 0; i < f.s.n; i++) {
            f.mode[i] = i != k.default_instance ? 2 : 0;
            f.status[i] = DM_ERR_UNSUPPORTED;
        }
        CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
        CU_ASSERT_EQUAL(r.chosen, k.default_instance);
        CU_ASSERT(r.default_ms > 0.0 && r.tuned_ms == r.default_ms);
        /* out of memory in a candidate: the search fails */
        memset(f.mode, 0, sizeof f.mode);
        f.mode[best] = 2;
        f.status[best] = DM_ERR_NOMEM;
        CU_ASSERT_EQUAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_ERR_NOMEM);
        f.status[best] = DM_ERR_CUDA;
        CU_ASSERT_EQUAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_ERR_CUDA);
        memset(f.mode, 0, sizeof f.mode);
        f.check_status[best] = DM_ERR_NOMEM;
        CU_ASSERT_EQUAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_ERR_NOMEM);
        f.check_status[best] = 0;
        /* the default cannot run: nothing to tune against, an error */
        f.mode[k.default_instance] = 2;
        f.status[k.default_instance] = DM_ERR_UNSUPPORTED;
        CU_ASSERT_EQUAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_ERR_UNSUPPORTED);
    }
}

static int low_default_attr(void *ctx, int i, dm_tune_attr *out)
{
    (void)ctx;
    *out = (dm_tune_attr){i == 0 ? 255 : 32, 0, 0, 1024, -1};
    return DM_OK;
}

/* Model mode when no candidate of the model passes the check and the default itself was pruned
 * (low occupancy): the default is kept and the winner reported is an instance, not -1 (which the
 * verdict would index the instances with). */
static void test_search_model_no_winner(void)
{
    synth s;
    dm_tune_kernel k;
    dm_tune_ops ops;
    synth_setup(&s, &k, &ops);
    ops.attributes = low_default_attr;
    for (int i = 0; i < s.n; i++) s.wrong[i] = i != k.default_instance;
    dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
    opt.mode = DM_TUNE_MODEL;
    opt.compare_exhaustive = 1;
    opt.prune = 1;
    dm_tune_result r;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
    CU_ASSERT_EQUAL(r.chosen, k.default_instance);
    CU_ASSERT(r.winner_at_msp >= 0 && r.winner_at_msp < k.n_instances);
    char why[1024];
    r.search_s = 1.0;
    r.exhaustive_s = 2.0;
    r.exhaustive_best_ms = 0.5 * r.tuned_ms;
    r.best_rank_in_order = 2;
    dm_tune_verdict(&k, &r, why, sizeof why);
}

/* The verdict against the targets and the reasons it gives for a miss. */
static void test_verdict(void)
{
    synth s;
    dm_tune_kernel k;
    dm_tune_ops ops;
    synth_setup(&s, &k, &ops);
    dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
    opt.compare_exhaustive = 1;
    dm_tune_result r;
    char why[1024];
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
    /* the synthetic model takes no time: set the times of a kernel that meets both targets */
    r.search_s = 0.5;
    r.curve_s = 0.2;
    r.candidates_s = 0.2;
    r.confirm_s = 0.1;
    r.exhaustive_s = 6.0;
    r.tuned_ms = 1.0;
    r.exhaustive_best_ms = 0.97;
    CU_ASSERT_STRING_EQUAL(dm_tune_verdict(&k, &r, why, sizeof why), "meets both");
    CU_ASSERT_STRING_EQUAL(why, "");
    /* 9.9x: the candidates at the MSP dominate (the curve and confirmation are 1/20) */
    r.exhaustive_s = 4.95;
    r.curve_s = 0.15;
    r.candidates_s = 0.3;
    r.confirm_s = 0.05;
    CU_ASSERT_STRING_EQUAL(dm_tune_verdict(&k, &r, why, sizeof why), "misses 10x");
    CU_ASSERT(strstr(why, "candidates at the MSP") != NULL);
    CU_ASSERT(strncmp(why, "10x: reachable (bound ", 22) == 0); /* 4.95 / 0.2 = 24.75 */
    /* the curve and the confirmation alone above 1/10 of the exhaustive time */
    r.curve_s = 0.4;
    r.candidates_s = 0.05;
    r.confirm_s = 0.1;
    r.search_s = 0.55;
    CU_ASSERT_STRING_EQUAL(dm_tune_verdict(&k, &r, why, sizeof why), "misses 10x");
    CU_ASSERT(strstr(why, "too few for 10x") != NULL);
    /* the bound in evaluations at the target: 0.5 s of curve + confirmation against 4.95 s for
     * the exhaustive search's evaluations */
    dm_tune_bound bd;
    dm_tune_ratio_bound(&bd, &r);
    CU_ASSERT(bd.valid >= 2 && bd.valid == r.exhaustive_evaluated);
    CU_ASSERT_DOUBLE_EQUAL(bd.eval_s, 4.95 / bd.valid, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(bd.fixed_evals, 0.5 / bd.eval_s, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(bd.bound, 9.9, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(bd.ceiling, bd.valid / 2.0, 1e-12);
    CU_ASSERT(bd.need >= 10.0 * bd.fixed_evals && bd.need < 10.0 * bd.fixed_evals + 1.0);
    CU_ASSERT(bd.need > bd.valid); /* hence unreachable */
    CU_ASSERT(strstr(why, "unreachable with") != NULL);
    CU_ASSERT(strstr(why, "= 9.9x even if the candidates cost nothing") != NULL);
    /* and below 95%: the exhaustive best was pruned by the model */
    r.exhaustive_best_ms = 0.9;
    r.best_rank_in_order = 0;
    CU_ASSERT_STRING_EQUAL(dm_tune_verdict(&k, &r, why, sizeof why), "misses both");
    CU_ASSERT(strstr(why, "pruned by the model") != NULL);
    CU_ASSERT(strstr(why, "too few for 10x") != NULL);
    /* 95% only: the MSP ranked differently from the target */
    r.search_s = 0.1;
    r.best_rank_in_order = 3;
    r.chosen = r.winner_at_msp = (r.exhaustive_best + 1) % g_ninst;
    CU_ASSERT_STRING_EQUAL(dm_tune_verdict(&k, &r, why, sizeof why), "misses 95%");
    CU_ASSERT(strstr(why, "ranks differently") != NULL);
    CU_ASSERT(strncmp(why, "95%", 3) == 0);
    /* the same instance: timing noise */
    r.chosen = r.winner_at_msp = r.exhaustive_best;
    dm_tune_verdict(&k, &r, why, sizeof why);
    CU_ASSERT(strstr(why, "timing noise") != NULL);
    /* the MSP winner lost to the default at the target */
    r.winner_at_msp = (r.exhaustive_best + 1) % g_ninst;
    r.chosen = k.default_instance;
    dm_tune_verdict(&k, &r, why, sizeof why);
    CU_ASSERT(strstr(why, "not faster than the default") != NULL);

    /* one instance: nothing to search, whatever the times */
    dm_tune_kernel one = k;
    one.n_instances = 1;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &one, (size_t)1 << 28, &opt, &ops), DM_OK);
    r.search_s = r.exhaustive_s = 0.01;
    CU_ASSERT_STRING_EQUAL(dm_tune_verdict(&one, &r, why, sizeof why), "misses 10x");
    CU_ASSERT(strstr(why, "nothing to search") != NULL);
}

static void test_result_json_and_row(void)
{
    synth s;
    dm_tune_kernel k;
    dm_tune_ops ops;
    synth_setup(&s, &k, &ops);
    dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
    opt.compare_exhaustive = 1;
    dm_tune_result r;
    CU_ASSERT_EQUAL_FATAL(dm_tune_search(&r, &k, (size_t)1 << 28, &opt, &ops), DM_OK);
    FILE *f = tmpfile();
    CU_ASSERT_FATAL(f != NULL);
    dm_tune_result_json(f, &k, &r);
    fputc('\n', f);
    dm_tune_result_header(f, 1);
    dm_tune_result_row(f, &k, &r, 1);
    rewind(f);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    char *nl = strchr(text, '\n');
    CU_ASSERT_FATAL(nl != NULL);
    *nl = '\0';
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    CU_ASSERT_FATAL(j != NULL);
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "kernel")), "test.synth");
    CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(j, "mode")), "msp");
    json_t *ch = json_object_get(j, "chosen");
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(ch, "block")), g_inst[r.chosen].policy.block);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(ch, "rake")), g_inst[r.chosen].policy.rake);
    CU_ASSERT(fabs(json_number_value(json_object_get(j, "speedup")) - r.default_ms / r.tuned_ms) < 1e-3);
    CU_ASSERT(fabs(json_number_value(json_object_get(j, "msp_fraction_of_best")) -
                   r.exhaustive_best_ms / r.tuned_ms) < 1e-3);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "msp_n")), (json_int_t)r.msp_n);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "instances")), g_ninst);
    CU_ASSERT_PTR_NOT_NULL(json_object_get(j, "failed"));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "failed")), r.n_failed);
    json_decref(j);
    /* the table row names the kernel and the chosen policy */
    char pol[128];
    CU_ASSERT(strstr(nl + 1, "test.synth") != NULL);
    CU_ASSERT(strstr(nl + 1, dm_tune_policy_str(&g_inst[r.chosen].policy, pol, sizeof pol)) != NULL);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("tune_model", NULL, NULL);
    CU_add_test(s, "msp_saturating", test_msp_saturating);
    CU_add_test(s, "msp_noisy_plateau", test_msp_noisy_plateau);
    CU_add_test(s, "msp_no_plateau", test_msp_no_plateau);
    CU_add_test(s, "msp_early_peak", test_msp_early_peak);
    CU_add_test(s, "msp_bad_input", test_msp_bad_input);
    CU_add_test(s, "occupancy_estimate", test_occupancy_estimate);
    CU_add_test(s, "prune", test_prune);
    CU_add_test(s, "order", test_order);
    CU_add_test(s, "outputs_equal", test_outputs_equal);
    CU_add_test(s, "curve_sizes", test_curve_sizes);
    CU_add_test(s, "search_msp", test_search_msp);
    CU_add_test(s, "search_rejects_wrong", test_search_rejects_wrong);
    CU_add_test(s, "search_checks_would_be_winners", test_search_checks_would_be_winners);
    CU_add_test(s, "search_keeps_default", test_search_keeps_default);
    CU_add_test(s, "search_modes", test_search_modes);
    CU_add_test(s, "search_prior", test_search_prior);
    CU_add_test(s, "search_prune_levels", test_search_prune_levels);
    CU_add_test(s, "result_json_and_row", test_result_json_and_row);
    CU_add_test(s, "search_time_accounting", test_search_time_accounting);
    CU_add_test(s, "search_rank_of", test_search_rank_of);
    CU_add_test(s, "search_curve_top_down", test_search_curve_top_down);
    CU_add_test(s, "verdict", test_verdict);
    CU_add_test(s, "search_bad_times", test_search_bad_times);
    CU_add_test(s, "search_failing_instances", test_search_failing_instances);
    CU_add_test(s, "search_model_no_winner", test_search_model_no_winner);
    CU_add_test(s, "search_ties", test_search_ties);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures();
    CU_cleanup_registry();
    return fails ? 1 : 0;
}
