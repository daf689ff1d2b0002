/* Printing the tuner's registry (`docmine tune --list`) and tuning results as a table and JSON.
 * Reference: none. */
#include <stdio.h>
#include <string.h>

#include "common/status.h"
#include "common/tune/tune_print.h"

/* Appends the distinct values of one policy field as "{a,b,c}". */
static int distinct(int *vals, int n, int v)
{
    for (int i = 0; i < n; i++)
        if (vals[i] == v) return n;
    int j = n;
    while (j > 0 && vals[j - 1] > v) {
        vals[j] = vals[j - 1];
        j--;
    }
    vals[j] = v;
    return n + 1;
}

static size_t put_set(char *buf, size_t len, size_t w, const char *label, const int *v, int n,
                      const char *(*name)(int))
{
    if (w >= len) return w;
    int r = snprintf(buf + w, len - w, "%s%s{", w ? " x " : "", label);
    w += r > 0 ? (size_t)r : 0;
    for (int i = 0; i < n && w < len; i++) {
        char num[16];
        snprintf(num, sizeof num, "%d", v[i]);
        r = snprintf(buf + w, len - w, "%s%s", i ? "," : "", name ? name(v[i]) : num);
        w += r > 0 ? (size_t)r : 0;
    }
    if (w < len) {
        r = snprintf(buf + w, len - w, "}");
        w += r > 0 ? (size_t)r : 0;
    }
    return w;
}

static const char *strided_name(int s) { return s ? "strided" : "consecutive"; }

const char *dm_tune_space_str(const dm_tune_kernel *k, char *buf, size_t len)
{
    int blocks[64] = {0}, rakes[64] = {0}, strided[2] = {0}, layouts[8] = {0}, tiles[64] = {0};
    int nb = 0, nr = 0, ns = 0, nl = 0, nt = 0;
    if (!buf || len == 0) return "";
    buf[0] = '\0';
    for (int i = 0; i < k->n_instances; i++) {
        const dm_tune_policy *p = &k->instances[i].policy;
        if (nb < 64) nb = distinct(blocks, nb, p->block);
        if (nr < 64) nr = distinct(rakes, nr, p->rake);
        if (ns < 2) ns = distinct(strided, ns, p->strided ? 1 : 0);
        if (nl < 8) nl = distinct(layouts, nl, p->layout);
        if (p->layout == DM_LAYOUT_TILED && nt < 64) nt = distinct(tiles, nt, p->tile);
    }
    size_t w = 0;
    w = put_set(buf, len, w, "block ", blocks, nb, NULL);
    w = put_set(buf, len, w, "rake ", rakes, nr, NULL);
    w = put_set(buf, len, w, "", strided, ns, strided_name);
    if (nl > 1 || (nl == 1 && layouts[0] != DM_LAYOUT_NONE))
        w = put_set(buf, len, w, "layout ", layouts, nl, dm_layout_name);
    if (nt > 0) w = put_set(buf, len, w, "tile ", tiles, nt, NULL);
    if (w < len) snprintf(buf + w, len - w, " (%d instance%s)", k->n_instances, k->n_instances == 1 ? "" : "s");
    return buf;
}

int dm_tune_list_print(FILE *out)
{
    int n = dm_tune_kernel_count();
    fprintf(out, "%d tunable kernel%s (mode %s)\n", n, n == 1 ? "" : "s",
            dm_tune_mode_name(dm_tune_get_mode()));
    for (int i = 0; i < n; i++) {
        const dm_tune_kernel *k = dm_tune_kernel_at(i);
        char space[512], pol[128];
        fprintf(out, "%s\n", k->name);
        if (k->description) fprintf(out, "  %s\n", k->description);
        fprintf(out, "  space:   %s\n", dm_tune_space_str(k, space, sizeof space));
        fprintf(out, "  default: %s\n",
                dm_tune_policy_str(&k->instances[k->default_instance].policy, pol, sizeof pol));
        int bench = k->bench_create && k->bench_run && k->bench_output && k->bench_destroy;
        fprintf(out, "  tuning:  %s", bench ? "yes" : "no (runs its default)");
        if (bench)
            fprintf(out, ", target %zu %s, output %s", k->bench_default_n,
                    k->work_unit ? k->work_unit : "units", k->tolerance > 0 ? "float" : "exact");
        if (bench && k->tolerance > 0) fprintf(out, " (tolerance %g)", k->tolerance);
        fprintf(out, "\n");
    }
    /* the kernels that would never be tuned, tested over their instances or benchmarked */
    int missing = 0;
    for (int i = 0; i < n; i++) {
        const dm_tune_kernel *k = dm_tune_kernel_at(i);
        if (k->bench_create && k->bench_run && k->bench_output && k->bench_destroy) continue;
        fprintf(out, "%s%s", missing ? ", " : "kernels without a tuning workload: ", k->name);
        missing++;
    }
    if (missing) fprintf(out, " (%d)\n", missing);
    else if (n) fprintf(out, "every kernel has a tuning workload\n");
    return ferror(out) ? DM_ERR(DM_ERR_IO, "tune --list: write error") : DM_OK;
}

void dm_tune_result_header(FILE *out, int ex)
{
    fprintf(out, "%-22s %10s %10s %7s %-36s %12s %5s %9s", "kernel", "default_ms", "tuned_ms",
            "speedup", "policy", "msp_n", "evals", "search_s");
    if (ex) fprintf(out, " %9s %-36s %9s %8s %9s", "exhaus_s", "exhaustive best", "best_ms",
                    "msp/best", "s_ratio");
    fprintf(out, "\n");
}

void dm_tune_result_row(FILE *out, const dm_tune_kernel *k, const dm_tune_result *r, int ex)
{
    char pol[128];
    double speedup = r->tuned_ms > 0 ? r->default_ms / r->tuned_ms : 0.0;
    fprintf(out, "%-22s %10.4f %10.4f %6.2fx %-36s %12zu %5d %9.3f", k->name, r->default_ms,
            r->tuned_ms, speedup,
            dm_tune_policy_str(&k->instances[r->chosen].policy, pol, sizeof pol), r->msp_n,
            r->n_evaluated, r->search_s);
    if (ex) {
        if (r->exhaustive_best >= 0) {
            double frac = r->tuned_ms > 0 ? r->exhaustive_best_ms / r->tuned_ms : 0.0;
            double ratio = r->search_s > 0 ? r->exhaustive_s / r->search_s : 0.0;
            fprintf(out, " %9.3f %-36s %9.4f %7.1f%% %8.1fx", r->exhaustive_s,
                    dm_tune_policy_str(&k->instances[r->exhaustive_best].policy, pol, sizeof pol),
                    r->exhaustive_best_ms, 100.0 * frac, ratio);
        } else {
            fprintf(out, " %9s %-36s %9s %8s %9s", "-", "-", "-", "-", "-");
        }
    }
    fprintf(out, "\n");
}

void dm_tune_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(out, "\\%c", *p);
        else if (*p < 0x20) fprintf(out, "\\u%04x", *p);
        else fputc(*p, out);
    }
    fputc('"', out);
}

static void json_policy(FILE *out, const char *key, const dm_tune_policy *p)
{
    fprintf(out, "\"%s\": {\"block\": %d, \"rake\": %d, \"strided\": %s, \"layout\": \"%s\", \"tile\": %d}",
            key, p->block, p->rake, p->strided ? "true" : "false", dm_layout_name(p->layout), p->tile);
}

void dm_tune_result_json(FILE *out, const dm_tune_kernel *k, const dm_tune_result *r)
{
    fprintf(out, "{\"kernel\": ");
    dm_tune_json_string(out, k->name);
    fprintf(out, ", \"mode\": \"%s\", \"target_n\": %zu, \"msp_n\": %zu, ",
            dm_tune_mode_name(r->mode), r->target_n, r->msp_n);
    fprintf(out, "\"default_ms\": %.6g, \"tuned_ms\": %.6g, \"speedup\": %.4f, ", r->default_ms,
            r->tuned_ms, r->tuned_ms > 0 ? r->default_ms / r->tuned_ms : 0.0);
    json_policy(out, "default", &k->instances[r->default_instance].policy);
    fprintf(out, ", ");
    json_policy(out, "chosen", &k->instances[r->chosen].policy);
    fprintf(out, ", \"instances\": %d, \"valid\": %d, \"candidates\": %d, \"evaluated\": %d, "
                 "\"rejected\": %d, \"failed\": %d, \"search_s\": %.6g, \"check_s\": %.6g",
            k->n_instances, r->n_valid, r->n_candidates, r->n_evaluated, r->n_rejected,
            r->n_failed, r->search_s, r->check_s);
    if (r->mode == DM_TUNE_MSP)
        fprintf(out, ", \"curve_points\": %d, \"curve_s\": %.6g, \"candidates_s\": %.6g, "
                     "\"confirm_s\": %.6g",
                r->curve_points, r->curve_s, r->candidates_s, r->confirm_s);
    if (r->exhaustive_best >= 0) {
        fprintf(out, ", ");
        json_policy(out, "exhaustive_best", &k->instances[r->exhaustive_best].policy);
        fprintf(out, ", \"exhaustive_best_ms\": %.6g, \"exhaustive_s\": %.6g, "
                     "\"exhaustive_evaluated\": %d, \"msp_fraction_of_best\": %.4f, "
                     "\"search_time_ratio\": %.3f, \"best_rank_in_order\": %d",
                r->exhaustive_best_ms, r->exhaustive_s, r->exhaustive_evaluated,
                r->tuned_ms > 0 ? r->exhaustive_best_ms / r->tuned_ms : 0.0,
                r->search_s > 0 ? r->exhaustive_s / r->search_s : 0.0, r->best_rank_in_order);
    }
    fprintf(out, "}");
}

void dm_tune_ratio_bound(dm_tune_bound *b, const dm_tune_result *r)
{
    memset(b, 0, sizeof *b);
    b->valid = r->exhaustive_evaluated > 0 ? r->exhaustive_evaluated : r->n_valid;
    b->eval_s = b->valid > 0 && r->exhaustive_s > 0 ? r->exhaustive_s / b->valid : 0.0;
    double fixed = r->curve_s + r->confirm_s;
    if (b->eval_s > 0) {
        b->fixed_evals = fixed / b->eval_s;
        b->candidate_evals = r->candidates_s / b->eval_s;
    }
    b->bound = fixed > 0 ? r->exhaustive_s / fixed : 0.0;
    b->ceiling = b->valid >= 2 ? b->valid / 2.0 : 1.0;
    /* 10x with this kernel's curve and confirmation, however cheap its candidates */
    double need = 10.0 * b->fixed_evals;
    b->need = (int)need + (need > (int)need);
}

const char *dm_tune_verdict(const dm_tune_kernel *k, const dm_tune_result *r, char *why, size_t len)
{
    char a[128], b[128];
    double ratio = r->search_s > 0 ? r->exhaustive_s / r->search_s : 0.0;
    double frac = r->tuned_ms > 0 ? r->exhaustive_best_ms / r->tuned_ms : 0.0;
    dm_tune_bound bd;
    dm_tune_ratio_bound(&bd, r);
    int miss_t = !(ratio >= 10.0), miss_b = !(frac >= 0.95);
    size_t used = 0;
    why[0] = '\0';
    if (miss_t) {
        int m;
        if (r->n_candidates <= 1)
            m = snprintf(why, len, "10x: nothing to search (%d valid instance%s): both searches time "
                         "the default at the target", r->n_valid, r->n_valid == 1 ? "" : "s");
        else if (bd.bound > 0 && bd.bound < 10.0)
            m = snprintf(why, len, "10x: unreachable with %d valid instances: the curve (%d sizes) and "
                         "the confirmation cost %.1f evaluations at the target (%.3f s), so "
                         "s_ratio <= %d/%.1f = %.1fx even if the candidates cost nothing; 10x needs "
                         ">= %d valid instances at this cost (>= 20 whenever a winner is confirmed: "
                         "the default and the winner at the target, ceiling %d/2 = %.1fx); %d valid "
                         "instances are too few for 10x",
                         bd.valid, r->curve_points, bd.fixed_evals, r->curve_s + r->confirm_s,
                         bd.valid, bd.fixed_evals, bd.bound, bd.need, bd.valid, bd.ceiling,
                         bd.valid);
        else
            m = snprintf(why, len, "10x: reachable (bound %.1fx: the curve and the confirmation cost "
                         "%.1f evaluations at the target of %d) but %d candidates at the MSP take "
                         "%.3f s = %.1f evaluations at the target (MSP 2^%d of target 2^%d units%s)",
                         bd.bound, bd.fixed_evals, bd.valid, r->n_evaluated, r->candidates_s,
                         bd.candidate_evals, dm_tune_workload_class(r->msp_n),
                         dm_tune_workload_class(r->target_n),
                         r->msp_n >= r->target_n ? ": the MSP is the target, the candidates cost "
                                                   "what the exhaustive search does"
                                                 : "");
        used = m > 0 ? (size_t)m : 0;
        if (used >= len) used = len - 1;
    }
    if (miss_b && used < len) {
        const char *sep = used ? "; " : "";
        const dm_tune_policy *best = r->exhaustive_best >= 0 ? &k->instances[r->exhaustive_best].policy : NULL;
        if (r->exhaustive_best < 0)
            snprintf(why + used, len - used, "%s95%%: no exhaustive result", sep);
        else if (r->best_rank_in_order == 0)
            snprintf(why + used, len - used, "%s95%%: the exhaustive best (%s) was pruned by the model",
                     sep, dm_tune_policy_str(best, a, sizeof a));
        else if (r->chosen == r->exhaustive_best)
            snprintf(why + used, len - used, "%s95%%: the same instance as the exhaustive best; "
                     "timing noise between its two measurements", sep);
        else if (r->winner_at_msp != r->chosen)
            snprintf(why + used, len - used, "%s95%%: the MSP winner (%s) was not faster than the "
                     "default at the target, the default was kept", sep,
                     dm_tune_policy_str(&k->instances[r->winner_at_msp].policy, a, sizeof a));
        else
            snprintf(why + used, len - used, "%s95%%: the MSP (2^%d) ranks differently from the "
                     "target: MSP winner %s, exhaustive best %s", sep, dm_tune_workload_class(r->msp_n),
                     dm_tune_policy_str(&k->instances[r->chosen].policy, a, sizeof a),
                     dm_tune_policy_str(best, b, sizeof b));
    }
    return !miss_t && !miss_b ? "meets both" : miss_t && miss_b ? "misses both"
                                           : miss_t           ? "misses 10x"
                                                              : "misses 95%";
}
