/* The auto-tuner's interface: kernel spaces, compiled instances, and the selection of an instance
 * for a launch. Every __global__ kernel of docmine is launched through dm_tune_select().
 * Reference: the declared default instance of each kernel (mode "off"). Plain C11, no CUDA types:
 * streams travel as void * (a cudaStream_t). See DESIGN.md section 6 and docs/ARCHITECTURE.md. */
#ifndef DM_TUNE_H
#define DM_TUNE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum dm_layout { DM_LAYOUT_NONE = 0, DM_LAYOUT_AOS = 1, DM_LAYOUT_SOA = 2, DM_LAYOUT_TILED = 3 };

enum dm_tune_mode {
    DM_TUNE_OFF = 0,        /* the declared default instance */
    DM_TUNE_MODEL = 1,      /* occupancy-model pruning, best predicted */
    DM_TUNE_MSP = 2,        /* search at the Minimum Saturation Point (default) */
    DM_TUNE_EXHAUSTIVE = 3  /* every valid instance at the target size */
};

/* One point of a kernel's space. Only compiled template instances exist. */
typedef struct dm_tune_policy {
    int block;   /* threads per block, multiple of 32, <= 1024 */
    int rake;    /* items per thread (>= 1) */
    int strided; /* 0: a thread's items are consecutive; 1: strided by the grid */
    int layout;  /* enum dm_layout (DM_LAYOUT_NONE when the kernel reads no structs) */
    int tile;    /* tile size for DM_LAYOUT_TILED, else 0 */
} dm_tune_policy;

/* Launches one compiled instance on `n` units of work with kernel-specific arguments `args`
 * (a struct the kernel's module defines) on `stream` (cudaStream_t, NULL = default stream).
 * Returns DM_OK or DM_ERR_CUDA (launch errors are checked). */
typedef int dm_tune_launch_fn(const void *args, size_t n, void *stream);

typedef struct dm_tune_instance {
    dm_tune_policy policy;
    dm_tune_launch_fn *launch;
    const void *func;        /* the __global__ function (for cudaFuncGetAttributes) */
    size_t smem_per_block;   /* dynamic shared memory the instance asks for, bytes */
} dm_tune_instance;

/* A kernel as the tuner sees it. The bench_* hooks build a seeded, device-resident tuning input
 * of n work units, run one instance on it and return its output, so that the tuner can time
 * instances and reject any whose output differs from the default's. */
typedef struct dm_tune_kernel {
    const char *name;        /* "module.kernel", e.g. "common.copy" */
    const char *description;
    const char *work_unit;   /* what n counts: "bytes", "points", "tokens", ... */
    const dm_tune_instance *instances;
    int n_instances;
    int default_instance;    /* index into instances */
    /* tuning workload; all four are required for tuning, a kernel without them runs its default */
    int (*bench_create)(void **state, size_t n, uint64_t seed);
    int (*bench_run)(void *state, const dm_tune_instance *inst, void *stream);
    /* copies the output to host: with host == NULL only stores the byte size in *nbytes */
    int (*bench_output)(void *state, void *host, size_t *nbytes);
    void (*bench_destroy)(void *state);
    /* 0: outputs must be byte-identical. > 0: the output is a float array compared by normalised
     * error max|a-b| / max(max|a|, tiny) which must not exceed this tolerance. */
    double tolerance;
    size_t bench_default_n;  /* target size for `docmine tune` */
    /* appended fields (keep designated initialisers elsewhere valid) */
    double work_per_item;    /* work units one item (one rake step of a thread) covers, e.g. 16 for
                                a copy of uint4 items counted in bytes; 0 means 1. Used by the
                                occupancy model (Fang's transition rake). */
    /* optional: makes a state created for n0 work units run on n <= n0 units from now on
     * (without reallocating), so the tuner builds one input at the target size and reuses its
     * prefix for the throughput curve and the MSP. NULL: the tuner creates a state per size. */
    int (*bench_resize)(void *state, size_t n);
} dm_tune_kernel;

/* Registry. Modules register their kernels from dm_tune_register_all() (common/tune/registry.c). */
int dm_tune_register(const dm_tune_kernel *k);
int dm_tune_register_all(void);
int dm_tune_kernel_count(void);
const dm_tune_kernel *dm_tune_kernel_at(int i);
const dm_tune_kernel *dm_tune_kernel_find(const char *name);

/* The instance to launch for n work units of kernel k, under the current mode: the tuned choice
 * for this GPU and workload class when known, else the default. Never NULL for a registered
 * kernel with instances. Cheap after the first call for a (kernel, class).
 * off: the default. model: the occupancy model's best predicted instance at the class's lower
 * bound 2^class (no timing, no output check, no database; a choice per class like a tuned row).
 * msp / exhaustive: the database's row for (kernel, GPU model, compute capability, class) found
 * by a search at least as strong (model < msp < exhaustive); when there is none and the kernel
 * has bench hooks, the first process to need it takes a key lock (flock) next to the database and
 * tunes it (at min(2^class, bench_default_n or 2^20) units, on its own stream and inputs),
 * stores it and returns it; processes that find the key locked wait for the row
 * (DOCMINE_TUNE_WAIT seconds, default 600, then the default). Node-local ranks > 0 give rank 0
 * a head start. Without a GPU, or on any tuning error (a warning), the default; the default too
 * for a row whose instance the model finds cannot run on this GPU in this build (a warning).
 * The GPU is the current device at the first call of the process. Thread-safe. */
const dm_tune_instance *dm_tune_select(const dm_tune_kernel *k, size_t n);

/* Human-readable policy, e.g. "block=256 rake=4 consecutive layout=soa". */
const char *dm_tune_policy_str(const dm_tune_policy *p, char *buf, size_t len);
const char *dm_layout_name(int layout);

/* Where the tuning database lives: --tuning-db / dm_tune_set_db_path, else $DOCMINE_TUNING_DB,
 * else $XDG_CACHE_HOME/docmine/tuning.tsv, else $HOME/.cache/docmine/tuning.tsv. The string is
 * owned by the tuner and valid until the next call of either function. */
const char *dm_tune_db_path(void);
void dm_tune_set_db_path(const char *path);

int dm_tune_set_mode(int mode);
/* The mode in force: set by dm_tune_set_mode / dm_tune_configure, else the environment variable
 * DOCMINE_TUNE (off|model|msp|exhaustive; an invalid value warns and is ignored), else msp. */
int dm_tune_get_mode(void);
int dm_tune_mode_parse(const char *s, int *mode);
const char *dm_tune_mode_name(int mode);

/* ---- additions (common/tune owns them) ------------------------------------------------------ */

/* Workload class of n work units: floor(log2(n)) (0 for n <= 1). The database keeps one choice
 * per kernel x GPU model x compute capability x class. */
int dm_tune_workload_class(size_t n);

/* Search options (DM_TUNE_OPTIONS_INIT). */
typedef struct dm_tune_options {
    int mode;                    /* enum dm_tune_mode */
    double msp_tolerance;        /* MSP: throughput within this fraction of the best (0.10) */
    int warmup;                  /* untimed launches before each measurement */
    int repeats;                 /* timed launches; the median is kept */
    size_t min_n;                /* smallest size of the throughput curve (0: automatic) */
    int max_evals;               /* candidates timed at the MSP at most (0: all after pruning) */
    const dm_tune_policy *prior; /* order candidates by closeness to this policy (e.g. the copy
                                    kernel's best: the memory-bound prior); NULL: model order */
    int compare_exhaustive;      /* also run the exhaustive search at the target size */
    int prune;                   /* MSP candidates: 0 every valid instance; 1 (default) without
                                    low-occupancy ones, rakes above Fang's b searched last;
                                    2 also without rakes above b (Fang's model strictly) */
    uint64_t seed;               /* seed of the tuning input */
    size_t check_max_n;          /* outputs are compared on at most this many units (0: 2^24) */
    int rank_of;                 /* an instance whose position in the candidate order goes to
                                    best_rank_in_order when no exhaustive search runs (e.g. the
                                    exhaustive best of an earlier run, to rate a prior); -1: none */
} dm_tune_options;
#define DM_TUNE_OPTIONS_INIT {DM_TUNE_MSP, 0.10, 2, 7, 0, 0, NULL, 0, 1, 42, 0, -1}

/* What one tuning run found. Times are medians in milliseconds at the target size. */
typedef struct dm_tune_result {
    int mode;
    size_t target_n, msp_n;
    int default_instance, chosen;   /* instance indices */
    double default_ms, tuned_ms;
    int n_valid, n_candidates;      /* valid instances; candidates after pruning */
    int n_evaluated, n_rejected;    /* timed at the MSP; rejected for wrong output (bugs) */
    double search_s;                /* wall time of the search (curve + MSP + confirm) without
                                       creating tuning inputs (bench_create) and without the
                                       output checks (check_s): the timing work of the search */
    int winner_at_msp;              /* fastest at the MSP before confirmation */
    /* with compare_exhaustive (or mode exhaustive) */
    int exhaustive_best;            /* -1 when not run */
    double exhaustive_best_ms, exhaustive_s; /* exhaustive_s: as search_s */
    int exhaustive_evaluated;
    /* position (1-based) of the exhaustive best (or of options.rank_of) in the MSP candidate
     * order, the default counted; 0 if it is not a candidate */
    int best_rank_in_order;
    double check_s;                 /* wall time of all output checks (each instance once per
                                       check size, at most check_max_n units) */
    /* msp mode: search_s in its three parts (same clock): the default's throughput curve
     * (curve_points sizes measured from the target down to the first unsaturated one; only the
     * target when the default is the only candidate), the candidates at the MSP, the confirmation of
     * the winner at the target. The curve and the confirmation do not shrink with the space, so
     * exhaustive_s / (curve_s + confirm_s) bounds the search-time ratio a kernel can reach. */
    double curve_s, candidates_s, confirm_s;
    int curve_points;
    /* the search's overheads: tuning inputs created (timed ones and the checks' fresh ones) and
     * the seconds that took (also inside check_s for the checks' inputs); output checks run */
    int n_inputs, n_checks;
    double inputs_s;
    /* instances left out because they could not be timed: their measurement or check said
     * DM_ERR_UNSUPPORTED (the instance cannot run this input), or the timer gave no usable time
     * (zero, negative, NaN or infinite). Any other failure ends the search with its error. */
    int n_failed;
} dm_tune_result;

/* Tunes kernel k for n work units on the current GPU under opt (mode off: the default only).
 * Needs the kernel's bench hooks (DM_ERR_UNSUPPORTED without them) and a GPU (DM_ERR_NO_DEVICE).
 * Does not touch the database. */
int dm_tune_run(dm_tune_result *res, const dm_tune_kernel *k, size_t n, const dm_tune_options *opt);

/* Runs every instance of k on a fresh seeded tuning input of n units and compares its output
 * with the default instance's (byte-identical, or within k->tolerance for float outputs). The
 * default itself runs twice and is reported when its two outputs differ (nondeterministic).
 * bad receives the indices of up to max_bad instances that differ, *n_bad their count (0: all
 * agree). Needs a GPU (DM_ERR_NO_DEVICE) and the bench hooks (DM_ERR_UNSUPPORTED). */
int dm_tune_check_instances(int *n_bad, int *bad, int max_bad, const dm_tune_kernel *k, size_t n,
                            uint64_t seed);

/* Process-wide configuration, usually from the command line:
 *  mode        as dm_tune_set_mode
 *  db_path     as dm_tune_set_db_path; NULL keeps the current setting
 *  local_rank  node-local MPI rank: rank 0 tunes missing entries first, the others wait for
 *              them and read (see dm_tune_select). */
int dm_tune_configure(int mode, const char *db_path, int local_rank);
/* The node-local MPI rank used by dm_tune_select (dm_ctx_init should set it). Not set (or < 0):
 * SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, PMI_LOCAL_RANK or
 * MV2_COMM_WORLD_LOCAL_RANK from the launcher, else 0. */
void dm_tune_set_local_rank(int local_rank);
int dm_tune_get_local_rank(void);
/* Tunes k at n and stores the result in the database (atomic write); the result goes to *res
 * when res != NULL. */
int dm_tune_and_store(dm_tune_result *res, const dm_tune_kernel *k, size_t n,
                      const dm_tune_options *opt);
/* Forgets the cached selections (after the database changed). */
void dm_tune_cache_clear(void);
/* The most memory one search of this process used beyond what was allocated when it began, per
 * kind (own[DM_MEM_KINDS] of common/alloc.h: host, pinned, device); 0 before any search. */
void dm_tune_search_memory(size_t own[3]);

/* The selections this process has made (in modes other than off, where every launch runs the
 * kernel's default instance): up to max entries, oldest first; returns how many there are in
 * all (may exceed max). For the run reports' "tuning choices". */
typedef struct dm_tune_selection {
    const dm_tune_kernel *kernel;
    int workload_class;                 /* floor(log2(n)) of the launches it answered */
    int mode;                           /* the mode that chose it */
    const dm_tune_instance *instance;
} dm_tune_selection;
int dm_tune_selections(dm_tune_selection *out, int max);

#ifdef __cplusplus
}
#endif
#endif
