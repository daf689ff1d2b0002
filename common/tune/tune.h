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
} dm_tune_kernel;

/* Registry. Modules register their kernels from dm_tune_register_all() (common/tune/registry.c). */
int dm_tune_register(const dm_tune_kernel *k);
int dm_tune_register_all(void);
int dm_tune_kernel_count(void);
const dm_tune_kernel *dm_tune_kernel_at(int i);
const dm_tune_kernel *dm_tune_kernel_find(const char *name);

/* The instance to launch for n work units of kernel k, under the current mode: the tuned choice
 * for this GPU and workload class when known, else the default. Never NULL for a registered
 * kernel with instances. Cheap after the first call for a (kernel, class). */
const dm_tune_instance *dm_tune_select(const dm_tune_kernel *k, size_t n);

/* Human-readable policy, e.g. "block=256 rake=4 consecutive layout=soa". */
const char *dm_tune_policy_str(const dm_tune_policy *p, char *buf, size_t len);
const char *dm_layout_name(int layout);

/* Where the tuning database lives: --tuning-db / dm_tune_set_db_path, else $DOCMINE_TUNING_DB,
 * else $XDG_CACHE_HOME/docmine/tuning.tsv, else $HOME/.cache/docmine/tuning.tsv. */
const char *dm_tune_db_path(void);
void dm_tune_set_db_path(const char *path);

int dm_tune_set_mode(int mode);
int dm_tune_get_mode(void);
int dm_tune_mode_parse(const char *s, int *mode);
const char *dm_tune_mode_name(int mode);

#ifdef __cplusplus
}
#endif
#endif
