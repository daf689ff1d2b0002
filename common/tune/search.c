/* The search driver of DESIGN.md section 6 over measurement callbacks: modes off, model (best
 * predicted by the occupancy model, confirmed against the default), msp (Magni et al.: throughput
 * curve of the default on sizes halving from the target down to the first unsaturated one, search
 * the model-pruned space at the Minimum Saturation Point, confirm at the target) and exhaustive
 * (every valid instance at the target). An instance can win only when its output equals the
 * default's: the candidates are timed first and checked fastest first, so only a would-be winner
 * is checked; one that differs is rejected and reported, and the next is tried. An instance that
 * cannot run the tuning input (DM_ERR_UNSUPPORTED from its measurement or check) or gets no usable
 * time (zero, negative, NaN, inf) is left out with a warning; the default without a usable time at
 * the target, and every other failure, end the search with an error (nothing is stored).
 * Reference: the default instance, which is kept unless a checked candidate is faster. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/status.h"
#include "common/tune/tune_internal.h"
#include "common/tune/tune_model.h"

enum { DM_TUNE_MAX_CURVE = 24 };

typedef struct search_ws {
    const dm_tune_kernel *k;
    const dm_tune_ops *ops;
    dm_tune_cand *cand;
    int *order;
    int *rejected; /* per instance: 1 once its output was found wrong */
    int *failed;   /* per instance: 1 once it could not run or gave no usable time */
    size_t *passed; /* per instance: the check size it last passed at (0: none) */
    size_t check_max;
    double check_s;       /* wall time spent in output checks */
    double check_setup_s; /* the part of check_s that setup_seconds also counts (a check creates
                             fresh tuning inputs) */
    int n_checks;         /* output checks run */
} search_ws;

static double setup_s(const search_ws *w)
{
    return w->ops->setup_seconds ? w->ops->setup_seconds(w->ops->ctx) : 0.0;
}

/* Search clock: wall time minus the time spent creating tuning inputs and checking outputs
 * (verification, not search; the same work whichever search finds a candidate first). An input
 * created inside a check is counted by both check_s and setup_seconds: it is subtracted once
 * (subtracting it twice made search times negative). */
static double clock_s(const search_ws *w)
{
    return dm_wtime() - w->check_s - (setup_s(w) - w->check_setup_s);
}

static int usable_ms(double ms) { return ms > 0.0 && isfinite(ms); }

/* Leaves instance inst out of the search (a warning naming why). */
static void fail_inst(search_ws *w, int inst, size_t n, const char *why)
{
    char buf[128];
    w->failed[inst] = 1;
    dm_tune_warn("%s: instance %d (%s) left out on %zu %s: %s", w->k->name, inst,
                 dm_tune_policy_str(&w->k->instances[inst].policy, buf, sizeof buf), n,
                 w->k->work_unit ? w->k->work_unit : "units", why);
}

/* Times instance inst on n units: *ok = 1 with a usable time in *ms. *ok = 0 when the instance
 * is left out: it cannot run this input (DM_ERR_UNSUPPORTED, not for the default, whose status is
 * returned) or the timer gave no usable time (zero: below its resolution, negative, NaN, inf; for
 * the default too: the caller decides). Any other failure is returned. */
static int measure(search_ws *w, int inst, size_t n, double *ms, int *ok)
{
    *ok = 0;
    *ms = 0.0;
    if (w->failed[inst]) return DM_OK;
    int rc = w->ops->measure(w->ops->ctx, inst, n, ms);
    if (rc == DM_ERR_UNSUPPORTED && inst != w->k->default_instance) {
        fail_inst(w, inst, n, dm_error_message());
        return DM_OK;
    }
    DM_TRY(rc);
    if (!usable_ms(*ms)) {
        char why[96];
        snprintf(why, sizeof why, "the timer gave %g ms (no usable time)", *ms);
        if (inst != w->k->default_instance) fail_inst(w, inst, n, why);
        return DM_OK;
    }
    *ok = 1;
    return DM_OK;
}

/* The default's time on n units, which the search cannot do without. */
static int measure_default(search_ws *w, size_t n, double *ms)
{
    int ok;
    DM_TRY(measure(w, w->k->default_instance, n, ms, &ok));
    if (!ok)
        return DM_ERR(DM_ERR_CUDA, "tune: %s: the default instance's time on %zu %s is %g ms, not "
                      "a usable time (a timer failure); nothing tuned", w->k->name, n,
                      w->k->work_unit ? w->k->work_unit : "units", *ms);
    return DM_OK;
}

/* Checks inst against the default on min(n, check_max) units; *ok = 0 (and a warning) when the
 * outputs differ, or when the instance cannot run the check's input (DM_ERR_UNSUPPORTED). */
static int checked(search_ws *w, int inst, size_t n, int *ok)
{
    *ok = 1;
    if (inst == w->k->default_instance) return DM_OK;
    if (w->rejected[inst] || w->failed[inst]) {
        *ok = 0;
        return DM_OK;
    }
    if (n > w->check_max) n = w->check_max;
    if (w->passed[inst] == n) return DM_OK;
    int same = 0;
    double s0 = setup_s(w), t0 = dm_wtime();
    w->n_checks++;
    int rc = w->ops->check(w->ops->ctx, inst, n, &same);
    w->check_s += dm_wtime() - t0;
    w->check_setup_s += setup_s(w) - s0;
    if (rc == DM_ERR_UNSUPPORTED) {
        fail_inst(w, inst, n, dm_error_message());
        *ok = 0;
        return DM_OK;
    }
    DM_TRY(rc);
    if (same) w->passed[inst] = n;
    if (!same) {
        char buf[128];
        w->rejected[inst] = 1;
        *ok = 0;
        dm_tune_warn("%s: instance %d (%s) gives a different output than the default on %zu %s; "
                     "rejected (this is a bug in the instance)",
                     w->k->name, inst,
                     dm_tune_policy_str(&w->k->instances[inst].policy, buf, sizeof buf), n,
                     w->k->work_unit ? w->k->work_unit : "units");
    }
    return DM_OK;
}

/* A timed instance: its time and its place in the order it was timed in (ties keep that order). */
typedef struct timed_inst {
    double ms;
    int inst, pos;
} timed_inst;

size_t dm_tune_check_size(const dm_tune_options *opt, size_t n)
{
    size_t max = opt->check_max_n ? opt->check_max_n : (size_t)1 << 24;
    return n < max ? n : max;
}

static int cmp_timed(const void *a, const void *b)
{
    const timed_inst *x = a, *y = b;
    if (x->ms != y->ms) return x->ms < y->ms ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* Sorts the nt timed instances by time and returns the fastest whose output passes the check at
 * check_n (the default needs none) and that is faster than below_ms (< 0: no bound), or -1. Only
 * the instances that would win are checked: a check builds a fresh tuning input and runs the
 * default and the candidate on it, several times the cost of timing one. */
static int fastest_checked(search_ws *w, timed_inst *t, int nt, size_t check_n, double below_ms, int *at)
{
    *at = -1;
    qsort(t, (size_t)nt, sizeof *t, cmp_timed);
    for (int j = 0; j < nt; j++) {
        if (below_ms >= 0.0 && !(t[j].ms < below_ms)) break;
        int ok;
        DM_TRY(checked(w, t[j].inst, check_n, &ok));
        if (ok) {
            *at = j;
            break;
        }
    }
    return DM_OK;
}

/* Times every valid instance at n (those already found wrong excepted); best index and time:
 * the fastest that passes the output check. */
static int exhaustive(search_ws *w, size_t n, int *best, double *best_ms, int *evaluated,
                      double *default_ms)
{
    *best = -1;
    *best_ms = 0.0;
    *evaluated = 0;
    timed_inst *t = malloc(sizeof *t * (size_t)w->k->n_instances);
    if (!t) return DM_ERR(DM_ERR_NOMEM, "tune: out of memory");
    int nt = 0, rc = DM_OK;
    for (int i = 0; i < w->k->n_instances && rc == DM_OK; i++) {
        if (!w->cand[i].valid || w->rejected[i] || w->failed[i]) continue;
        double ms;
        int ok = 1;
        rc = i == w->k->default_instance ? measure_default(w, n, &ms) : measure(w, i, n, &ms, &ok);
        if (rc != DM_OK) break;
        if (i != w->k->default_instance && !ok) continue;
        (*evaluated)++;
        if (i == w->k->default_instance && default_ms) *default_ms = ms;
        t[nt] = (timed_inst){ms, i, nt};
        nt++;
    }
    int at = -1;
    if (rc == DM_OK) rc = fastest_checked(w, t, nt, n, -1.0, &at);
    if (rc == DM_OK && at >= 0) {
        *best = t[at].inst;
        *best_ms = t[at].ms;
    }
    free(t);
    return rc;
}

/* Confirms winner against the default at the target size (default_ms < 0: measure it;
 * winner_ms < 0: measure the winner, else its time at the target is already known). */
static int confirm(search_ws *w, dm_tune_result *res, int winner, size_t n, double default_ms,
                   double winner_ms)
{
    int def = w->k->default_instance;
    if (default_ms >= 0) res->default_ms = default_ms;
    else DM_TRY(measure_default(w, n, &res->default_ms));
    res->chosen = def;
    res->tuned_ms = res->default_ms;
    if (winner < 0 || winner == def) return DM_OK;
    int ok;
    DM_TRY(checked(w, winner, n, &ok));
    if (!ok) return DM_OK;
    double ms = winner_ms;
    if (ms < 0) {
        DM_TRY(measure(w, winner, n, &ms, &ok));
        if (!ok) return DM_OK; /* left out at the target: the default */
    }
    if (ms < res->default_ms) {
        res->chosen = winner;
        res->tuned_ms = ms;
    }
    return DM_OK;
}

static int run_search(search_ws *w, dm_tune_result *res, size_t n, const dm_tune_options *opt)
{
    const dm_tune_kernel *k = w->k;
    const dm_tune_ops *ops = w->ops;
    int ni = k->n_instances, def = k->default_instance;
    double t0 = clock_s(w);
    double t_end = -1.0; /* MSP mode: the end of the confirmation, so the parts add up exactly */

    if (opt->mode == DM_TUNE_OFF) {
        DM_TRY(measure_default(w, n, &res->default_ms));
        res->tuned_ms = res->default_ms;
        res->n_evaluated = 1;
    } else if (opt->mode == DM_TUNE_MODEL) {
        int winner = -1;
        for (int j = 0; j < ni && winner < 0; j++) {
            int i = w->order[j];
            if (w->cand[i].pruned) break;
            int ok;
            DM_TRY(checked(w, i, n, &ok));
            if (ok) winner = i;
        }
        /* none passed (the default pruned itself): the default, which needs no check */
        if (winner < 0) winner = def;
        res->winner_at_msp = winner;
        DM_TRY(confirm(w, res, winner, n, -1.0, -1.0));
        res->n_evaluated = winner >= 0 && winner != def ? 2 : 1;
    } else if (opt->mode == DM_TUNE_MSP) {
        size_t sizes[DM_TUNE_MAX_CURVE];
        double thr[DM_TUNE_MAX_CURVE], def_ms[DM_TUNE_MAX_CURVE];
        double wpi = k->work_per_item > 0 ? k->work_per_item : 1.0;
        size_t min_n = opt->min_n;
        if (min_n == 0) {
            /* one item per thread of one block per SM, at least 1/2^16 of the target */
            min_n = (size_t)(wpi * 32.0 * (ops->limits.sms > 0 ? ops->limits.sms : 1));
            if (min_n < n >> 16) min_n = n >> 16;
        }
        int nc = dm_tune_curve_sizes(sizes, DM_TUNE_MAX_CURVE, n, min_n);
        int others = 0; /* candidates besides the default */
        for (int i = 0; i < ni; i++) others += i != def && w->cand[i].valid && !w->cand[i].pruned;
        /* The curve is measured from the target down and stops at the first size that is not
         * saturated (the suffix from it has its MSP above it). dm_tune_msp_index scans from the
         * largest size and stops at that point too, so the sizes below it cannot change the MSP:
         * the same MSP as the whole curve, in fewer measurements. Without other candidates the
         * default at the target is the whole search. */
        int lo = nc - 1, unusable = 0;
        DM_TRY(measure_default(w, sizes[lo], &def_ms[lo]));
        for (;; lo--) {
            if (lo < nc - 1) {
                /* a size below the target without a usable time (too short for the timer) ends
                 * the curve as an unsaturated one does: the MSP is among the sizes above it,
                 * whose tail is saturated */
                int ok;
                DM_TRY(measure(w, def, sizes[lo], &def_ms[lo], &ok));
                if (!ok) {
                    lo++;
                    unusable = 1;
                    break;
                }
            }
            thr[lo] = (double)sizes[lo] / def_ms[lo];
            if (others == 0 || lo == 0 || dm_tune_msp_index(thr + lo, nc - lo, opt->msp_tolerance) != 0)
                break;
        }
        res->curve_points = nc - lo + unusable;
        int m = dm_tune_msp_index(thr + lo, nc - lo, opt->msp_tolerance);
        m = m < 0 ? nc - 1 : m + lo;
        size_t msp = sizes[m];
        res->msp_n = msp;
        double t_curve = clock_s(w);
        res->curve_s = t_curve - t0;
        /* every candidate timed at the MSP (in the model's order, within the budget); then the
         * fastest that beats the default there and passes the output check at the target wins
         * the MSP (the next one if it fails): only a would-be winner is checked */
        int winner = def;
        double winner_ms = def_ms[m];
        int budget = opt->max_evals > 0 ? opt->max_evals : ni;
        timed_inst *t = malloc(sizeof *t * (size_t)ni);
        if (!t) return DM_ERR(DM_ERR_NOMEM, "tune: out of memory");
        int nt = 0, rc = DM_OK;
        for (int j = 0; j < ni && res->n_evaluated < budget && rc == DM_OK; j++) {
            int i = w->order[j];
            if (w->cand[i].pruned) break;
            if (i == def || w->rejected[i] || w->failed[i]) continue;
            double ms;
            int ok;
            rc = measure(w, i, msp, &ms, &ok);
            if (rc != DM_OK) break;
            if (!ok) continue;
            res->n_evaluated++;
            t[nt] = (timed_inst){ms, i, j};
            nt++;
        }
        double t_cand = clock_s(w);
        int at = -1;
        if (rc == DM_OK) rc = fastest_checked(w, t, nt, n, winner_ms, &at);
        if (at >= 0) {
            winner = t[at].inst;
            winner_ms = t[at].ms;
        }
        free(t);
        DM_TRY(rc);
        res->winner_at_msp = winner;
        res->candidates_s = t_cand - t_curve;
        /* the default's time at the target is the curve's last point; when the MSP is the
         * target, the winner was timed there too (same measurement, same size): confirming it
         * again would only repeat that measurement */
        DM_TRY(confirm(w, res, winner, n, def_ms[nc - 1], msp == n ? winner_ms : -1.0));
        t_end = clock_s(w);
        res->confirm_s = t_end - t_cand;
    } else if (opt->mode == DM_TUNE_EXHAUSTIVE) {
        int best, evaluated;
        double best_ms, dms = -1.0;
        DM_TRY(exhaustive(w, n, &best, &best_ms, &evaluated, &dms));
        res->n_evaluated = evaluated;
        res->winner_at_msp = best;
        res->default_ms = dms;
        res->chosen = def;
        res->tuned_ms = dms;
        if (best >= 0 && best != def && best_ms < dms) {
            res->chosen = best;
            res->tuned_ms = best_ms;
        }
        res->exhaustive_best = best;
        res->exhaustive_best_ms = best_ms;
        res->exhaustive_evaluated = evaluated;
    } else {
        return DM_ERR(DM_ERR_INVALID_ARG, "tune: unknown mode %d", opt->mode);
    }
    res->search_s = (t_end >= 0.0 ? t_end : clock_s(w)) - t0;
    if (opt->mode == DM_TUNE_EXHAUSTIVE) res->exhaustive_s = res->search_s;

    if (opt->compare_exhaustive && opt->mode != DM_TUNE_EXHAUSTIVE) {
        double t1 = clock_s(w);
        DM_TRY(exhaustive(w, n, &res->exhaustive_best, &res->exhaustive_best_ms,
                          &res->exhaustive_evaluated, NULL));
        res->exhaustive_s = clock_s(w) - t1;
    }
    /* the position of the exhaustive best (or of opt->rank_of) in the candidate order */
    int ranked = res->exhaustive_best >= 0 ? res->exhaustive_best
                 : opt->rank_of >= 0 && opt->rank_of < ni ? opt->rank_of
                                                           : -1;
    if (ranked >= 0) {
        int pos = 0;
        for (int j = 0; j < ni; j++) {
            int i = w->order[j];
            if (w->cand[i].pruned && i != def) continue;
            pos++;
            if (i == ranked) {
                res->best_rank_in_order = pos;
                break;
            }
        }
    }
    for (int i = 0; i < ni; i++) {
        res->n_rejected += w->rejected[i];
        res->n_failed += w->failed[i];
    }
    res->check_s = w->check_s;
    res->n_checks = w->n_checks;
    return DM_OK;
}

int dm_tune_search(dm_tune_result *res, const dm_tune_kernel *k, size_t n,
                   const dm_tune_options *opt, const dm_tune_ops *ops)
{
    if (!res || !k || !opt || !ops || !ops->measure || !ops->check || !ops->attributes || n == 0)
        return DM_ERR(DM_ERR_INVALID_ARG, "tune: bad arguments");
    if (k->n_instances < 1 || k->default_instance < 0 || k->default_instance >= k->n_instances)
        return DM_ERR(DM_ERR_INVALID_ARG, "tune: kernel %s has no valid default instance",
                      k->name ? k->name : "?");
    memset(res, 0, sizeof *res);
    res->mode = opt->mode;
    res->target_n = n;
    res->msp_n = n;
    res->default_instance = k->default_instance;
    res->chosen = k->default_instance;
    res->winner_at_msp = k->default_instance;
    res->exhaustive_best = -1;

    int ni = k->n_instances;
    search_ws w = {k, ops, NULL, NULL, NULL, NULL, NULL, dm_tune_check_size(opt, (size_t)-1), 0.0, 0.0, 0};
    dm_tune_attr *attr = calloc((size_t)ni, sizeof *attr);
    w.cand = calloc((size_t)ni, sizeof *w.cand);
    w.order = calloc((size_t)ni, sizeof *w.order);
    w.rejected = calloc((size_t)ni, sizeof *w.rejected);
    w.failed = calloc((size_t)ni, sizeof *w.failed);
    w.passed = calloc((size_t)ni, sizeof *w.passed);
    int rc = DM_OK;
    if (!attr || !w.cand || !w.order || !w.rejected || !w.failed || !w.passed) {
        rc = DM_ERR(DM_ERR_NOMEM, "tune: out of memory");
        goto done;
    }
    for (int i = 0; i < ni && rc == DM_OK; i++) rc = ops->attributes(ops->ctx, i, &attr[i]);
    if (rc != DM_OK) goto done;
    double wpi = k->work_per_item > 0 ? k->work_per_item : 1.0;
    int kept = dm_tune_model_prune(w.cand, k->instances, attr, ni, &ops->limits, (double)n / wpi);
    if (kept < 0) {
        rc = kept;
        goto done;
    }
    if (!w.cand[k->default_instance].valid) {
        rc = DM_ERR(DM_ERR_UNSUPPORTED, "tune: the default instance of %s is invalid here: %s",
                    k->name, w.cand[k->default_instance].why);
        goto done;
    }
    for (int i = 0; i < ni; i++) res->n_valid += w.cand[i].valid;
    res->n_candidates = kept;
    if (opt->prune <= 0) {
        /* every valid instance is a candidate */
        for (int i = 0; i < ni; i++)
            if (w.cand[i].valid) w.cand[i].pruned = w.cand[i].demoted = 0;
        res->n_candidates = res->n_valid;
    } else if (opt->prune >= 2) {
        /* Fang's model strictly: rakes above b are removed */
        for (int i = 0; i < ni; i++)
            if (w.cand[i].demoted && !w.cand[i].pruned) {
                w.cand[i].pruned = 1;
                res->n_candidates--;
            }
    }
    dm_tune_model_order(w.order, w.cand, ni, opt->prior);
    rc = run_search(&w, res, n, opt);
done:
    free(attr);
    free(w.cand);
    free(w.order);
    free(w.rejected);
    free(w.failed);
    free(w.passed);
    return rc;
}
