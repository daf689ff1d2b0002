/* The tuner's pure logic, as plain C functions of numbers (testable without a GPU):
 * an occupancy estimate, the pruning and ordering of a kernel's space by the occupancy model with
 * Fang et al.'s transition rake b = work / (SMs x active warps x 32), the Minimum Saturation Point
 * of a throughput curve (Magni et al.) and the search driver over measurement callbacks.
 * Reference: the declared default instance (mode off); search.c's driver is the reference for the
 * CUDA measurement layer in tune_cuda.cu. Internal to common/tune, tests and bench. */
#ifndef DM_TUNE_MODEL_H
#define DM_TUNE_MODEL_H

#include <stddef.h>

#include "common/tune/tune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the occupancy model needs to know about a GPU (filled from cudaDeviceProp). */
typedef struct dm_tune_limits {
    int sms;
    int max_threads_per_sm;
    int max_blocks_per_sm;
    int max_threads_per_block;
    int regs_per_sm;
    size_t smem_per_sm;
    size_t smem_per_block; /* opt-in maximum per block */
} dm_tune_limits;

/* Per-instance attributes (from cudaFuncGetAttributes, and the active blocks per SM from
 * cudaOccupancyMaxActiveBlocksPerMultiprocessor; -1 there means "estimate it"). */
typedef struct dm_tune_attr {
    int regs_per_thread;
    size_t smem_static;
    size_t smem_dynamic;
    int max_threads_per_block; /* of this function (registers can lower it below the device's) */
    int active_blocks_per_sm;  /* -1: use dm_tune_occupancy_estimate */
} dm_tune_attr;

/* Active blocks per SM estimated from limits and attributes (register allocation per warp in
 * units of 256, no shared-memory carve-out details). 0 when the block cannot run at all. */
int dm_tune_occupancy_estimate(const dm_tune_limits *lim, int block, const dm_tune_attr *a);

/* One instance as the model sees it. */
typedef struct dm_tune_cand {
    int index;               /* instance index in the kernel */
    dm_tune_policy policy;
    int valid;               /* 0: violates the validity rule (see why) */
    int pruned;              /* 1: removed by the model (see why); invalid ones are pruned too */
    int demoted;             /* 1: rake above Fang's b: kept, but searched after the others
                                (removed too with dm_tune_options.prune == 2) */
    const char *why;         /* static string, "" when kept */
    int active_warps;        /* per SM */
    double occupancy;        /* active warps / max warps per SM */
    double transition_rake;  /* Fang's b at the given work size */
    double score;            /* predicted goodness, higher is better */
} dm_tune_cand;

/* Evaluates and prunes the space at `work_items` items (work units / work_per_item):
 *  - invalid: block not a multiple of 32, > 1024, > the function's or device's maximum, shared
 *    memory above the per-block limit, no block fits on an SM;
 *  - low occupancy: active warps below half of the best valid instance's;
 * and demotes (kept, searched last) a rake above the transition rake b (fewer threads than the
 * GPU holds: idle SMs), unless no instance has a rake <= b, in which case those with the smallest
 * rake are not demoted. Demoting rather than removing: a kernel whose output or reduction
 * shrinks with the rake (streamcluster's pgain work buffer) can be fastest above b.
 * cand[i] describes instance i (n entries). Returns the number kept (demoted ones included), or a
 * negative status. */
int dm_tune_model_prune(dm_tune_cand *cand, const dm_tune_instance *inst, const dm_tune_attr *attr,
                        int n, const dm_tune_limits *lim, double work_items);

/* Candidate order: kept ones first (not demoted before demoted), each by descending score
 * (occupancy, then rake closest to b from below, then grid-strided items, then block 256
 * closest), ties by index; pruned ones after.
 * With prior != NULL the kept ones are ordered by distance to the prior policy first
 * (|log2 block ratio| + |log2 rake ratio| + strided mismatch + layout mismatch), then as above.
 * order receives n instance indices. */
void dm_tune_model_order(int *order, const dm_tune_cand *cand, int n, const dm_tune_policy *prior);

/* Distance of policy p to q as used by the prior ordering. */
double dm_tune_policy_distance(const dm_tune_policy *p, const dm_tune_policy *q);

/* Minimum Saturation Point of a throughput curve over sizes growing by 2x (index 0 smallest):
 * the smallest index i from which the curve stays saturated, i.e. every later point j >= i is
 * within tol of the best throughput at or after i. For a saturating curve this is the smallest
 * size within tol of the best (Magni et al.); an early peak that later falls (a cache effect) is
 * skipped, since it does not represent the target size; a curve still rising at its end gives the
 * last index (no plateau: search at the target). Returns the index, or -1 for count < 1 or a
 * non-positive / non-finite value. */
int dm_tune_msp_index(const double *throughput, int count, double tol);

/* Compares two outputs of nbytes: tol == 0: byte-identical; tol > 0: float arrays (nbytes a
 * multiple of 4) with normalised error max|a-b| / max(max|a|, 1e-30) <= tol, NaN only where the
 * other has NaN. Returns 1 when equal, 0 otherwise. */
int dm_tune_outputs_equal(const void *a, const void *b, size_t nbytes, double tol);

/* Median of n values (the array is sorted in place). */
double dm_tune_median(double *v, int n);

/* Measurement callbacks of the search driver. The CUDA layer implements them with the kernel's
 * bench hooks and CUDA events; tests implement them with synthetic performance models. */
typedef struct dm_tune_ops {
    void *ctx;
    /* median time in ms of instance `inst` on n work units. DM_ERR_UNSUPPORTED: the instance
     * cannot run this input (it is left out; for the default the search fails). A time that is not
     * positive and finite (below the timer's resolution, a timer fault) is no usable time: the
     * instance is left out, and the search fails for the default at the target (below it, the
     * throughput curve ends there). Any other error ends the search with it. */
    int (*measure)(void *ctx, int inst, size_t n, double *ms);
    /* *same = 1 when instance inst's output on n units equals the default instance's
     * (DM_ERR_UNSUPPORTED and other errors as for measure) */
    int (*check)(void *ctx, int inst, size_t n, int *same);
    /* attributes of instance inst */
    int (*attributes)(void *ctx, int inst, dm_tune_attr *out);
    dm_tune_limits limits;
    /* optional: seconds spent so far creating tuning inputs (excluded from search times) */
    double (*setup_seconds)(void *ctx);
} dm_tune_ops;

/* The size at which a search of n units checks outputs: min(n, opt->check_max_n or 2^24). */
size_t dm_tune_check_size(const dm_tune_options *opt, size_t n);

/* The search of DESIGN.md section 6 over ops, for every mode (see dm_tune_run). */
int dm_tune_search(dm_tune_result *res, const dm_tune_kernel *k, size_t n,
                   const dm_tune_options *opt, const dm_tune_ops *ops);

/* Sizes of the throughput curve: target, target/2, ... down to the smallest allowed, returned in
 * ascending order (at most max entries). Returns the count. */
int dm_tune_curve_sizes(size_t *sizes, int max, size_t target, size_t min_n);

#ifdef __cplusplus
}
#endif
#endif
