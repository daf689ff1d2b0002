/* Printing the tuner's registry and results: `docmine tune --list`, the per-kernel result table
 * of `docmine tune` and bench/tune, and their JSON form. Reference: none. Plain C. */
#ifndef DM_TUNE_PRINT_H
#define DM_TUNE_PRINT_H

#include <stdio.h>

#include "common/tune/tune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Summary of a kernel's space, e.g. "block {128,256} x rake {1,2,4,8} x {consecutive,strided}
 * (16 instances)". */
const char *dm_tune_space_str(const dm_tune_kernel *k, char *buf, size_t len);
/* Every registered kernel with its space and default policy (no GPU needed), then the kernels
 * without a tuning workload ("kernels without a tuning workload: a, b (2)"; test tune_list_cli
 * fails on that line) or "every kernel has a tuning workload". Returns DM_OK or DM_ERR_IO. */
int dm_tune_list_print(FILE *out);
/* Table header and one row per result (with_exhaustive: the exhaustive columns too). */
void dm_tune_result_header(FILE *out, int with_exhaustive);
void dm_tune_result_row(FILE *out, const dm_tune_kernel *k, const dm_tune_result *r,
                        int with_exhaustive);
/* Writes s as a JSON string literal (quotes and escapes included). */
void dm_tune_json_string(FILE *out, const char *s);
/* What bounds the search-time ratio of an msp result with the exhaustive comparison. The MSP
 * search always times the default at the target (the curve's top point, also the confirmation's
 * baseline) and, when another instance wins at the MSP, that winner at the target: these do not
 * shrink with the space, so s_ratio <= exhaus_s / (curve_s + confirm_s) = valid / fixed_evals. */
typedef struct dm_tune_bound {
    int valid;              /* instances the exhaustive search timed (else n_valid) */
    double eval_s;          /* mean evaluation at the target: exhaustive_s / valid */
    double fixed_evals;     /* (curve_s + confirm_s) / eval_s */
    double candidate_evals; /* candidates_s / eval_s */
    double bound;           /* exhaustive_s / (curve_s + confirm_s): the most s_ratio can be */
    double ceiling;         /* valid / 2: the bound with a one-point curve and one confirmation */
    int need;               /* valid instances 10x needs at this kernel's fixed cost: 10 x fixed_evals
                               (>= 20 when a winner is confirmed) */
} dm_tune_bound;
void dm_tune_ratio_bound(dm_tune_bound *b, const dm_tune_result *r);
/* The targets for an msp result with the exhaustive comparison (compare_exhaustive):
 * >= 10x less search time than the exhaustive search and >= 95% of the exhaustive best's speed.
 * Returns "meets both", "misses 10x", "misses 95%" or "misses both"; why (len > 0) receives the
 * reasons for a miss, "" when both are met: nothing to search; the curve and the confirmation
 * alone above 1/10 of the exhaustive time (too few instances: the evaluations they cost, the bound
 * and the instances 10x would need, dm_tune_bound); the candidates at the MSP; the
 * exhaustive best pruned by the model; the MSP winner not faster than the default at the target;
 * the MSP ranking the instances differently from the target; timing noise (same instance). */
const char *dm_tune_verdict(const dm_tune_kernel *k, const dm_tune_result *r, char *why, size_t len);
/* One JSON object (no trailing newline or comma) describing r. */
void dm_tune_result_json(FILE *out, const dm_tune_kernel *k, const dm_tune_result *r);

#ifdef __cplusplus
}
#endif
#endif
