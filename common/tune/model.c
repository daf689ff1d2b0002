/* The occupancy model, pruning and ordering of a kernel's space (Fang et al.: transition rake
 * b = work / (SMs x active warps x 32)) and the Minimum Saturation Point of a throughput curve
 * (Magni et al.). Pure functions of numbers. Reference: the declared default instance. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "common/tune/tune_model.h"

static int imin(int a, int b) { return a < b ? a : b; }

int dm_tune_occupancy_estimate(const dm_tune_limits *lim, int block, const dm_tune_attr *a)
{
    if (!lim || !a || block <= 0) return 0;
    int max_block = lim->max_threads_per_block > 0 ? lim->max_threads_per_block : 1024;
    if (a->max_threads_per_block > 0 && a->max_threads_per_block < max_block)
        max_block = a->max_threads_per_block;
    if (block > max_block) return 0;
    int warps = (block + 31) / 32;
    int blocks = lim->max_blocks_per_sm > 0 ? lim->max_blocks_per_sm : 32;
    if (lim->max_threads_per_sm > 0) blocks = imin(blocks, lim->max_threads_per_sm / (warps * 32));
    if (a->regs_per_thread > 0 && lim->regs_per_sm > 0) {
        int regs_per_warp = ((a->regs_per_thread * 32 + 255) / 256) * 256;
        int warps_by_regs = lim->regs_per_sm / regs_per_warp;
        blocks = imin(blocks, warps_by_regs / warps);
    }
    size_t smem = a->smem_static + a->smem_dynamic;
    if (smem > 0) {
        if (lim->smem_per_block > 0 && smem > lim->smem_per_block) return 0;
        if (lim->smem_per_sm > 0) blocks = imin(blocks, (int)(lim->smem_per_sm / smem));
    }
    return blocks > 0 ? blocks : 0;
}

static int is_pow2_multiple_ok(int block) { return block > 0 && block % 32 == 0 && block <= 1024; }

int dm_tune_model_prune(dm_tune_cand *cand, const dm_tune_instance *inst, const dm_tune_attr *attr,
                        int n, const dm_tune_limits *lim, double work_items)
{
    if (!cand || !inst || !attr || !lim || n < 0 || lim->sms <= 0)
        return DM_ERR(DM_ERR_INVALID_ARG, "tune model: bad arguments");
    int max_warps_sm = lim->max_threads_per_sm > 0 ? lim->max_threads_per_sm / 32 : 64;
    int best_warps = 0;
    for (int i = 0; i < n; i++) {
        dm_tune_cand *c = &cand[i];
        memset(c, 0, sizeof *c);
        c->index = i;
        c->policy = inst[i].policy;
        c->why = "";
        const dm_tune_policy *p = &inst[i].policy;
        dm_tune_attr a = attr[i];
        size_t smem = a.smem_static + a.smem_dynamic;
        int blocks = a.active_blocks_per_sm >= 0 ? a.active_blocks_per_sm
                                                 : dm_tune_occupancy_estimate(lim, p->block, &a);
        if (!is_pow2_multiple_ok(p->block)) c->why = "invalid: block not a multiple of 32 in 32..1024";
        else if (p->rake < 1) c->why = "invalid: rake < 1";
        else if ((a.max_threads_per_block > 0 && p->block > a.max_threads_per_block) ||
                 (lim->max_threads_per_block > 0 && p->block > lim->max_threads_per_block))
            c->why = "invalid: block above the function's maximum threads per block";
        else if (lim->smem_per_block > 0 && smem > lim->smem_per_block)
            c->why = "invalid: shared memory above the per-block limit";
        else if (blocks < 1) c->why = "invalid: no block fits on an SM";
        else if (!inst[i].launch) c->why = "invalid: no launcher";
        if (c->why[0]) {
            c->valid = 0;
            c->pruned = 1;
            continue;
        }
        c->valid = 1;
        c->active_warps = blocks * ((p->block + 31) / 32);
        if (c->active_warps > max_warps_sm) c->active_warps = max_warps_sm;
        c->occupancy = (double)c->active_warps / max_warps_sm;
        c->transition_rake = work_items / ((double)lim->sms * c->active_warps * 32.0);
        if (c->active_warps > best_warps) best_warps = c->active_warps;
    }
    /* low occupancy relative to the best of the space */
    for (int i = 0; i < n; i++) {
        dm_tune_cand *c = &cand[i];
        if (c->pruned) continue;
        if (2 * c->active_warps < best_warps) {
            c->pruned = 1;
            c->why = "low occupancy (below half of the best instance)";
        }
    }
    /* rake above the transition rake: fewer threads than the GPU can hold */
    int any_below = 0, min_rake = 0;
    for (int i = 0; i < n; i++) {
        const dm_tune_cand *c = &cand[i];
        if (c->pruned) continue;
        if (c->policy.rake <= (c->transition_rake > 1.0 ? c->transition_rake : 1.0)) any_below = 1;
        if (!min_rake || c->policy.rake < min_rake) min_rake = c->policy.rake;
    }
    for (int i = 0; i < n; i++) {
        dm_tune_cand *c = &cand[i];
        if (c->pruned) continue;
        double b = c->transition_rake > 1.0 ? c->transition_rake : 1.0;
        int above = c->policy.rake > b;
        if ((any_below && above) || (!any_below && c->policy.rake > min_rake)) {
            c->demoted = 1;
            c->why = "rake above the transition rake b (idle SMs): searched last";
        }
    }
    int kept = 0;
    for (int i = 0; i < n; i++) {
        dm_tune_cand *c = &cand[i];
        if (!c->valid) continue;
        /* score: occupancy in steps of 1/8 dominates; then rake close to min(b, 8) from below
         * (items per thread amortise index arithmetic and give memory-level parallelism);
         * then grid-strided items (coalesced); then block size near 256 */
        double b = c->transition_rake > 1.0 ? c->transition_rake : 1.0;
        double target_rake = b < 8.0 ? b : 8.0;
        double occ = floor(c->occupancy * 8.0 + 1e-9) / 8.0;
        double rake_term = -fabs(log2((double)c->policy.rake) - log2(target_rake));
        double block_term = -fabs(log2((double)c->policy.block) - 8.0);
        c->score = occ * 1000.0 + rake_term * 10.0 + (c->policy.strided ? 1.0 : 0.0) +
                   block_term * 0.1;
        if (!c->pruned) kept++;
    }
    return kept;
}

double dm_tune_policy_distance(const dm_tune_policy *p, const dm_tune_policy *q)
{
    double d = fabs(log2((double)(p->block > 0 ? p->block : 1)) - log2((double)(q->block > 0 ? q->block : 1)));
    d += fabs(log2((double)(p->rake > 0 ? p->rake : 1)) - log2((double)(q->rake > 0 ? q->rake : 1)));
    d += p->strided != q->strided;
    d += p->layout != q->layout;
    return d;
}

static int cmp_order(const dm_tune_cand *cand, const dm_tune_policy *prior, int ia, int ib)
{
    const dm_tune_cand *a = &cand[ia];
    const dm_tune_cand *b = &cand[ib];
    if (a->pruned != b->pruned) return a->pruned - b->pruned;
    if (a->valid != b->valid) return b->valid - a->valid;
    /* a prior (a measured best policy) outranks the model's demotion */
    if (prior && !a->pruned) {
        double da = dm_tune_policy_distance(&a->policy, prior);
        double db = dm_tune_policy_distance(&b->policy, prior);
        if (da < db - 1e-12) return -1;
        if (da > db + 1e-12) return 1;
    }
    if (!a->pruned && a->demoted != b->demoted) return a->demoted - b->demoted;
    if (a->score > b->score) return -1;
    if (a->score < b->score) return 1;
    return a->index - b->index;
}

void dm_tune_model_order(int *order, const dm_tune_cand *cand, int n, const dm_tune_policy *prior)
{
    /* insertion sort: spaces are small, and no global comparator context (thread-safe) */
    for (int i = 0; i < n; i++) {
        int v = i, j = i;
        while (j > 0 && cmp_order(cand, prior, order[j - 1], v) > 0) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = v;
    }
}

int dm_tune_msp_index(const double *t, int count, double tol)
{
    if (!t || count < 1 || !(tol >= 0.0)) return -1;
    for (int i = 0; i < count; i++)
        if (!(t[i] > 0.0) || !isfinite(t[i])) return -1;
    /* suffix maxima and minima */
    double smax = t[count - 1], smin = t[count - 1];
    int msp = count - 1;
    for (int i = count - 1; i >= 0; i--) {
        if (t[i] > smax) smax = t[i];
        if (t[i] < smin) smin = t[i];
        if (smin >= (1.0 - tol) * smax) msp = i;
        else break; /* a dip (or the rising part) ends the saturated tail */
    }
    return msp;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double dm_tune_median(double *v, int n)
{
    if (n <= 0) return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int dm_tune_curve_sizes(size_t *sizes, int max, size_t target, size_t min_n)
{
    if (!sizes || max < 1 || target == 0) return 0;
    if (min_n == 0) min_n = 1;
    int count = 0;
    size_t s = target;
    while (count < max) {
        sizes[count++] = s;
        if (s / 2 < min_n || s / 2 == 0) break;
        s /= 2;
    }
    for (int i = 0; i < count / 2; i++) {
        size_t tmp = sizes[i];
        sizes[i] = sizes[count - 1 - i];
        sizes[count - 1 - i] = tmp;
    }
    return count;
}

int dm_tune_outputs_equal(const void *a, const void *b, size_t nbytes, double tol)
{
    if (nbytes == 0) return 1;
    if (!a || !b) return 0;
    if (!(tol > 0.0)) return memcmp(a, b, nbytes) == 0;
    if (nbytes % sizeof(float)) return 0;
    size_t n = nbytes / sizeof(float);
    const float *x = a, *y = b;
    double maxabs = 0.0, maxdiff = 0.0;
    for (size_t i = 0; i < n; i++) {
        int nx = isnan(x[i]), ny = isnan(y[i]);
        if (nx || ny) {
            if (nx != ny) return 0;
            continue;
        }
        if (isinf(x[i]) || isinf(y[i])) {
            if (x[i] != y[i]) return 0;
            continue;
        }
        double ax = fabs((double)x[i]);
        if (ax > maxabs) maxabs = ax;
        double d = fabs((double)x[i] - (double)y[i]);
        if (d > maxdiff) maxdiff = d;
    }
    return maxdiff / (maxabs > 1e-30 ? maxabs : 1e-30) <= tol;
}
