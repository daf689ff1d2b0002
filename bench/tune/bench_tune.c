/* bench_tune: for every registered kernel on the current GPU, the MSP search (Magni et al.) vs
 * the exhaustive search at the target size: search times, their ratio, the MSP winner's speed as
 * a fraction of the exhaustive best, and how many evaluations a sequential search needs to reach
 * the exhaustive best with the model's order vs starting from common.copy's best policy (the
 * memory-bound prior, Rupp et al.). Prints a table and writes JSON (--json FILE).
 * Targets (issue 5): >= 10x less search time, >= 95% of the exhaustive best.
 * Reference: the exhaustive search. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

int main(int argc, char **argv)
{
    const char *json = "bench_tune.json", *kernels = NULL;
    size_t size = 0;
    int repeats = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json") && i + 1 < argc) json = argv[++i];
        else if (!strcmp(argv[i], "--kernels") && i + 1 < argc) kernels = argv[++i];
        else if (!strcmp(argv[i], "--size") && i + 1 < argc) size = (size_t)strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_tune [--kernels LIST] [--size N] [--repeats N] [--json FILE]\n");
            return 2;
        }
    }
    dm_tune_gpu gpu;
    if (dm_tune_gpu_current(&gpu) != DM_OK) {
        fprintf(stderr, "bench_tune: no CUDA device\n");
        return 77;
    }
    if (dm_tune_register_all() != DM_OK) {
        fprintf(stderr, "bench_tune: %s\n", dm_error_message());
        return 1;
    }
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    printf("bench_tune on %s (cc %d.%d, %d SMs), %s, repeats %d\n", gpu.name, gpu.cc / 10,
           gpu.cc % 10, gpu.limits.sms, date, repeats);

    /* the memory-bound prior: common.copy's MSP choice */
    dm_tune_policy prior;
    int have_prior = 0;
    const dm_tune_kernel *ck = dm_tune_kernel_find("common.copy");
    if (ck) {
        dm_tune_options o = DM_TUNE_OPTIONS_INIT;
        o.repeats = repeats;
        dm_tune_result r;
        if (dm_tune_run(&r, ck, ck->bench_default_n, &o) == DM_OK) {
            prior = ck->instances[r.chosen].policy;
            have_prior = 1;
        }
    }
    char buf[128];
    printf("memory-bound prior: %s\n\n", have_prior ? dm_tune_policy_str(&prior, buf, sizeof buf) : "none");

    FILE *jf = fopen(json, "w");
    if (!jf) {
        fprintf(stderr, "bench_tune: cannot write %s\n", json);
        return 1;
    }
    fprintf(jf, "{\"bench\": \"tune\", \"gpu\": ");
    dm_tune_json_string(jf, gpu.name);
    fprintf(jf, ", \"cc\": \"%d.%d\", \"date\": \"%s\", \"repeats\": %d, \"prior\": \"%s\", "
                "\"kernels\": [",
            gpu.cc / 10, gpu.cc % 10, date, repeats,
            have_prior ? dm_tune_policy_str(&prior, buf, sizeof buf) : "");
    printf("%-22s %6s %9s %9s %8s %10s %7s %6s %6s %s\n", "kernel", "inst", "msp_s", "exhaus_s",
           "s_ratio", "msp/best", "evals", "rank", "rank_p", "verdict");
    int first = 1, status = 0;
    for (int i = 0; i < dm_tune_kernel_count(); i++) {
        const dm_tune_kernel *k = dm_tune_kernel_at(i);
        if (!selected(kernels, k->name)) continue;
        if (!k->bench_create || !k->bench_run || !k->bench_output || !k->bench_destroy) {
            printf("%-22s (no tuning workload)\n", k->name);
            continue;
        }
        size_t n = size ? size : k->bench_default_n;
        dm_tune_options o = DM_TUNE_OPTIONS_INIT;
        o.repeats = repeats;
        o.compare_exhaustive = 1;
        dm_tune_result r, rp;
        if (dm_tune_run(&r, k, n, &o) != DM_OK) {
            fprintf(stderr, "bench_tune: %s: %s\n", k->name, dm_error_message());
            status = 1;
            continue;
        }
        int rank_prior = 0;
        if (have_prior) {
            o.prior = &prior;
            if (dm_tune_run(&rp, k, n, &o) == DM_OK) rank_prior = rp.best_rank_in_order;
        }
        double ratio = r.search_s > 0 ? r.exhaustive_s / r.search_s : 0;
        double frac = r.tuned_ms > 0 ? r.exhaustive_best_ms / r.tuned_ms : 0;
        const char *verdict = ratio >= 10 && frac >= 0.95 ? "meets targets"
                              : ratio < 10 && frac < 0.95 ? "misses both"
                              : ratio < 10              ? "misses 10x search time"
                                                        : "misses 95% of best";
        printf("%-22s %6d %9.3f %9.3f %7.1fx %9.1f%% %7d %6d %6d %s\n", k->name, k->n_instances,
               r.search_s, r.exhaustive_s, ratio, 100 * frac, r.n_evaluated, r.best_rank_in_order,
               rank_prior, verdict);
        fprintf(jf, "%s\n  {\"result\": ", first ? "" : ",");
        dm_tune_result_json(jf, k, &r);
        fprintf(jf, ", \"best_rank_with_prior\": %d, \"verdict\": \"%s\"}", rank_prior, verdict);
        first = 0;
    }
    fprintf(jf, "\n]}\n");
    fclose(jf);
    printf("\nrank: evaluations a sequential search in the model's order needs to reach the exhaustive\n"
           "best (0: pruned by the model); rank_p: the same starting from the memory-bound prior.\n"
           "JSON: %s\n", json);
    return status;
}
