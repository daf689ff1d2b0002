/* bench_tune: for every registered kernel with a tuning workload, on the current GPU, the MSP
 * search (Magni et al.) vs the exhaustive search at the target size: search times, their ratio,
 * the part of the MSP search that does not shrink with the space (the default's throughput curve
 * and the confirmation at the target: it bounds the ratio a kernel can reach), the MSP winner's
 * speed as a fraction of the exhaustive best, and how many evaluations a sequential search needs
 * to reach the exhaustive best in the model's order vs starting from common.copy's best policy
 * (the memory-bound prior, Rupp et al.), per kernel. Where a kernel misses a target the table
 * says why. Prints a table and writes JSON (--json FILE).
 * Targets (issue 5): >= 10x less search time, >= 95% of the exhaustive best.
 * Reference: the exhaustive search. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/common/bench_util.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/status.h"
#include "common/tune/tune.h"
#include "common/tune/tune_gpu.h"
#include "common/tune/tune_print.h"

static int selected(const char *list, const char *name)
{
    if (!list) return 1;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len && ((p[len - 1] == '.' && !strncmp(name, p, len)) || (len == n && !strncmp(name, p, len))))
            return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static int has_workload(const dm_tune_kernel *k)
{
    return k->bench_create && k->bench_run && k->bench_output && k->bench_destroy;
}

/* One kernel's measurements. */
typedef struct row {
    dm_tune_result r;
    int rank_prior;   /* best_rank_in_order from the prior; -1: no prior */
    double wall_s;    /* everything for this kernel: inputs, checks, both searches, the prior */
} row;

/* The position of the exhaustive best in the candidate order that starts from the prior. The
 * order does not depend on measurements, so this is a mode-off run (it times only the default)
 * with rank_of = the exhaustive best. */
static int rank_from_prior(row *w, const dm_tune_kernel *k, size_t n, const dm_tune_policy *prior)
{
    double t0 = dm_wtime();
    w->rank_prior = -1;
    if (prior && w->r.exhaustive_best >= 0) {
        dm_tune_options p = DM_TUNE_OPTIONS_INIT;
        p.mode = DM_TUNE_OFF;
        p.repeats = 1;
        p.prior = prior;
        p.rank_of = w->r.exhaustive_best;
        dm_tune_result rp;
        DM_TRY(dm_tune_run(&rp, k, n, &p));
        w->rank_prior = rp.best_rank_in_order;
    }
    w->wall_s += dm_wtime() - t0;
    return DM_OK;
}

/* The MSP search with the exhaustive comparison, then the rank from the prior (NULL: none). */
static int bench_kernel(row *out, const dm_tune_kernel *k, size_t n, int repeats,
                        const dm_tune_policy *prior)
{
    double t0 = dm_wtime();
    dm_tune_options o = DM_TUNE_OPTIONS_INIT;
    o.repeats = repeats;
    o.compare_exhaustive = 1;
    DM_TRY(dm_tune_run(&out->r, k, n, &o));
    out->wall_s = dm_wtime() - t0;
    out->rank_prior = -1;
    return prior ? rank_from_prior(out, k, n, prior) : DM_OK;
}

/* Whether starting from the prior reaches the exhaustive best sooner (fewer evaluations). */
static const char *prior_verdict(const row *w)
{
    int a = w->r.best_rank_in_order, b = w->rank_prior;
    if (b < 0) return "-";
    if (a == 0) return "pruned"; /* the best is not a candidate in either order */
    return b < a ? "sooner" : b == a ? "same" : "later";
}

static void print_header(void)
{
    printf("%-24s %4s %4s %5s %8s %8s %8s %7s %6s %6s %6s %8s %4s %6s %-6s %7s %s\n", "kernel",
           "inst", "cand", "curve", "msp_s", "fixed_s", "exhaus_s", "s_ratio", "fix_ev", "bound",
           "ceil", "msp/best", "rank", "rank_p", "prior", "wall_s", "verdict");
}

static void print_row(const dm_tune_kernel *k, const row *w, const char *v)
{
    const dm_tune_result *r = &w->r;
    double fixed = r->curve_s + r->confirm_s;
    dm_tune_bound b;
    dm_tune_ratio_bound(&b, r);
    printf("%-24s %4d %4d %5d %8.3f %8.3f %8.3f %6.1fx %6.2f %5.1fx %5.1fx %7.1f%% %4d %6d %-6s "
           "%7.1f %s\n",
           k->name, k->n_instances, r->n_candidates, r->curve_points, r->search_s, fixed,
           r->exhaustive_s, r->search_s > 0 ? r->exhaustive_s / r->search_s : 0.0, b.fixed_evals,
           b.bound, b.ceiling, r->tuned_ms > 0 ? 100.0 * r->exhaustive_best_ms / r->tuned_ms : 0.0,
           r->best_rank_in_order, w->rank_prior, prior_verdict(w), w->wall_s, v);
    fflush(stdout);
}

static void usage(void)
{
    printf("usage: bench_tune [--kernels LIST] [--size N] [--repeats N] [--json FILE]\n"
           "  LIST: comma-separated names, or prefixes ending in '.' (flock.,tfidf.); default: every\n"
           "        registered kernel (an item that names none is a usage error)\n"
           "  --size N     the target size of every kernel (default: each kernel's bench_default_n)\n"
           "  --repeats N  timed runs per measurement, the median counts (default 7)\n"
           "  --json FILE  the results (default bench_tune.json in the current folder; written under a\n"
           "               temporary name and renamed at the end, so a run cut short leaves no half file)\n"
           "MSP search vs exhaustive search per kernel on the current GPU (bench/tune/README.md). The\n"
           "output starts with the command line, the GPU and the date (what bench/RESULTS.md records).\n"
           "Exit codes: 0 ok, 1 a kernel or the JSON failed, 2 usage error, 77 no CUDA device.\n");
}

int main(int argc, char **argv)
{
    const char *json = "bench_tune.json", *kernels = NULL;
    size_t size = 0;
    int repeats = 7;
    bench_init("bench_tune", argc, argv, 1);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            return 0;
        }
        if (strcmp(a, "--json") && strcmp(a, "--kernels") && strcmp(a, "--size") && strcmp(a, "--repeats"))
            return bench_usage_error("unknown argument '%s'", a);
        if (i + 1 >= argc) return bench_usage_error("%s needs a value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--json")) json = v;
        else if (!strcmp(a, "--kernels")) kernels = v;
        else if (!strcmp(a, "--size")) {
            if (bench_parse_size(a, v, 1, SIZE_MAX, &size) != 0) return BENCH_EXIT_USAGE;
        } else if (bench_parse_int(a, v, 1, 100000, &repeats) != 0)
            return BENCH_EXIT_USAGE;
    }
    if (kernels && !*kernels) return bench_usage_error("--kernels: an empty list");
    dm_tune_gpu gpu;
    if (dm_tune_gpu_current(&gpu) != DM_OK) {
        fprintf(stderr, "bench_tune: no CUDA device (skipped)\n");
        return BENCH_EXIT_SKIP;
    }
    if (dm_tune_register_all() != DM_OK) {
        fprintf(stderr, "bench_tune: %s\n", dm_error_message());
        return 1;
    }
    /* every item of LIST names a registered kernel (or a prefix of one): a typo is not an empty table */
    for (const char *p = kernels; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char item[128];
        snprintf(item, sizeof item, "%.*s", (int)(len < sizeof item ? len : sizeof item - 1), p);
        int hit = 0;
        for (int i = 0; i < dm_tune_kernel_count() && !hit; i++) hit = selected(item, dm_tune_kernel_at(i)->name);
        if (!*item || !hit)
            return bench_usage_error("--kernels: '%s' names no registered kernel (docmine tune --list lists them)", item);
        if (!e) break;
        p = e + 1;
    }
    double t_start = dm_wtime();
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    printf("command: %s\n", bench_command());
    printf("bench_tune on %s (cc %d.%d, %d SMs), %s, repeats %d\n", gpu.name, gpu.cc / 10,
           gpu.cc % 10, gpu.limits.sms, date, repeats);

    int nk = dm_tune_kernel_count(), status = 0;
    row *rows = calloc((size_t)(nk > 0 ? nk : 1), sizeof *rows);
    int *done = calloc((size_t)(nk > 0 ? nk : 1), sizeof *done); /* 1 measured, -1 failed */
    if (!rows || !done) {
        fprintf(stderr, "bench_tune: out of memory\n");
        return 1;
    }

    /* the memory-bound prior: common.copy's MSP choice (what the tuning database would hold);
     * when common.copy is selected its own row provides it */
    dm_tune_policy prior;
    int have_prior = 0;
    const dm_tune_kernel *ck = dm_tune_kernel_find("common.copy");
    int ci = -1;
    for (int i = 0; i < nk; i++)
        if (dm_tune_kernel_at(i) == ck) ci = i;
    if (ck && selected(kernels, ck->name)) {
        if (bench_kernel(&rows[ci], ck, size ? size : ck->bench_default_n, repeats, NULL) == DM_OK) {
            done[ci] = 1;
            prior = ck->instances[rows[ci].r.chosen].policy;
            have_prior = 1;
        } else {
            fprintf(stderr, "bench_tune: %s: %s\n", ck->name, dm_error_message());
            done[ci] = -1;
            status = 1;
        }
    } else if (ck) {
        dm_tune_options o = DM_TUNE_OPTIONS_INIT;
        o.repeats = repeats;
        dm_tune_result r;
        if (dm_tune_run(&r, ck, ck->bench_default_n, &o) == DM_OK) {
            prior = ck->instances[r.chosen].policy;
            have_prior = 1;
        }
    }
    char buf[128], why[1024];
    printf("memory-bound prior: %s\n\n", have_prior ? dm_tune_policy_str(&prior, buf, sizeof buf) : "none");
    /* the copy kernel's own rank from the prior: its MSP choice as the starting point */
    if (ci >= 0 && done[ci] == 1 &&
        rank_from_prior(&rows[ci], ck, size ? size : ck->bench_default_n, &prior) != DM_OK)
        fprintf(stderr, "bench_tune: %s: %s\n", ck->name, dm_error_message());

    dm_atomic_file af;
    if (dm_atomic_open(&af, json) != DM_OK) {
        fprintf(stderr, "bench_tune: --json: %s\n", dm_error_message());
        free(rows);
        free(done);
        return 1;
    }
    FILE *jf = af.fp;
    fprintf(jf, "{\"bench\": \"tune\", \"command\": ");
    dm_tune_json_string(jf, bench_command());
    fprintf(jf, ", \"gpu\": ");
    dm_tune_json_string(jf, gpu.name);
    fprintf(jf, ", \"cc\": \"%d.%d\", \"date\": \"%s\", \"repeats\": %d, \"prior\": \"%s\", "
                "\"kernels\": [",
            gpu.cc / 10, gpu.cc % 10, date, repeats,
            have_prior ? dm_tune_policy_str(&prior, buf, sizeof buf) : "");
    print_header();
    int first = 1, n_rows = 0, n_meet = 0, n_t = 0, n_b = 0;
    for (int i = 0; i < nk; i++) {
        const dm_tune_kernel *k = dm_tune_kernel_at(i);
        if (!selected(kernels, k->name)) continue;
        if (!has_workload(k)) {
            printf("%-24s %4d (no tuning workload: runs its default)\n", k->name, k->n_instances);
            fprintf(jf, "%s\n  {\"kernel\": ", first ? "" : ",");
            dm_tune_json_string(jf, k->name);
            fprintf(jf, ", \"instances\": %d, \"verdict\": \"no tuning workload\"}", k->n_instances);
            first = 0;
            continue;
        }
        if (!done[i]) {
            size_t n = size ? size : k->bench_default_n;
            done[i] = bench_kernel(&rows[i], k, n, repeats, have_prior ? &prior : NULL) == DM_OK ? 1 : -1;
        }
        if (done[i] < 0) {
            fprintf(stderr, "bench_tune: %s: %s\n", k->name, dm_error_message());
            printf("%-24s %4d (failed: %s)\n", k->name, k->n_instances, dm_error_message());
            status = 1;
            continue;
        }
        const char *v = dm_tune_verdict(k, &rows[i].r, why, sizeof why);
        print_row(k, &rows[i], v);
        if (why[0]) printf("%-24s   why: %s\n", "", why);
        n_rows++;
        n_meet += !strcmp(v, "meets both");
        n_t += !strcmp(v, "misses 10x") || !strcmp(v, "misses both");
        n_b += !strcmp(v, "misses 95%") || !strcmp(v, "misses both");
        const dm_tune_result *r = &rows[i].r;
        double fixed = r->curve_s + r->confirm_s;
        dm_tune_bound b;
        dm_tune_ratio_bound(&b, r);
        fprintf(jf, "%s\n  {\"result\": ", first ? "" : ",");
        dm_tune_result_json(jf, k, r);
        fprintf(jf, ", \"fixed_s\": %.6g, \"fixed_evals\": %.3f, \"candidate_evals\": %.3f, "
                    "\"ratio_bound\": %.3f, \"ratio_ceiling\": %.1f, \"valid_for_10x\": %d, "
                    "\"best_rank_with_prior\": %d, \"prior\": \"%s\", \"wall_s\": %.3f, "
                    "\"verdict\": \"%s\", \"why\": ",
                fixed, b.fixed_evals, b.candidate_evals, b.bound, b.ceiling, b.need,
                rows[i].rank_prior, prior_verdict(&rows[i]), rows[i].wall_s, v);
        dm_tune_json_string(jf, why);
        fprintf(jf, "}");
        first = 0;
    }
    double total = dm_wtime() - t_start;
    fprintf(jf, "\n], \"wall_s\": %.3f}\n", total);
    if (dm_atomic_commit(&af) != DM_OK) {
        fprintf(stderr, "bench_tune: --json: %s\n", dm_error_message());
        status = 1;
    }
    printf("\n%d kernels measured: %d meet both targets, %d miss 10x search time, %d miss 95%% of "
           "the best; %.1f s in all\n", n_rows, n_meet, n_t, n_b, total);
    printf("inst: compiled instances; cand: candidates after the model's pruning (the default\n"
           "included); curve: sizes of the default's throughput curve measured (from the target\n"
           "down); msp_s: MSP search time = curve + candidates at the MSP + confirmation at the\n"
           "target; fixed_s: curve + confirmation, the part that does not shrink with the space;\n"
           "exhaus_s: every valid instance at the target; s_ratio = exhaus_s / msp_s (target >= 10x);\n"
           "fix_ev: fixed_s in evaluations at the target (exhaus_s / valid instances each);\n"
           "bound = exhaus_s / fixed_s = valid / fix_ev, the most s_ratio can be with this curve and\n"
           "confirmation even if the candidates cost nothing (10x needs >= 10 x fix_ev valid\n"
           "instances); ceil = valid / 2, the bound of any MSP search that confirms a winner (the\n"
           "default and the winner timed at the target), so 10x needs >= 20 valid instances;\n"
           "msp/best: exhaustive best time / MSP choice time at the target (target >= 95%%); rank:\n"
           "evaluations a\n"
           "sequential search in the model's order needs to reach the exhaustive best (0: pruned by\n"
           "the model); rank_p: the same starting from the memory-bound prior; prior: whether that\n"
           "is sooner; wall_s: everything for the kernel (inputs, output checks, both searches).\n"
           "Search times exclude creating tuning inputs and the output checks (JSON: check_s).\n"
           "JSON: %s\n", json);
    free(rows);
    free(done);
    return status;
}
