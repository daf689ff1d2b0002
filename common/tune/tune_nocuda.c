/* The tuner's GPU layer in a CPU-only build (DOCMINE_CUDA=OFF): no device, nothing to tune, and
 * dm_copy_cuda reports DM_ERR_UNSUPPORTED. Compiled always; empty in CUDA builds.
 * Reference: tune_cuda.cu. */
#include "common/status.h"
#include "common/tune/copy.h"
#include "common/tune/tune_gpu.h"
#include "common/tune/tune_model.h"

#if !DM_HAVE_CUDA
int dm_tune_gpu_current(dm_tune_gpu *out)
{
    (void)out;
    return DM_ERR(DM_ERR_NO_DEVICE, "tune: built without CUDA");
}

int dm_tune_gpu_attributes(dm_tune_attr *out, const dm_tune_instance *inst)
{
    if (inst->func) return DM_ERR(DM_ERR_UNSUPPORTED, "tune: built without CUDA");
    /* as tune_cuda.cu: no function to ask, the model estimates */
    out->regs_per_thread = 0;
    out->smem_static = 0;
    out->smem_dynamic = inst->smem_per_block;
    out->max_threads_per_block = 1024;
    out->active_blocks_per_sm = -1;
    return DM_OK;
}

int dm_tune_run(dm_tune_result *res, const dm_tune_kernel *k, size_t n, const dm_tune_options *opt)
{
    (void)res;
    (void)k;
    (void)n;
    (void)opt;
    return DM_ERR(DM_ERR_UNSUPPORTED, "tune: built without CUDA");
}

int dm_tune_check_instances(int *n_bad, int *bad, int max_bad, const dm_tune_kernel *k, size_t n,
                            uint64_t seed)
{
    (void)bad;
    (void)max_bad;
    (void)k;
    (void)n;
    (void)seed;
    if (n_bad) *n_bad = 0;
    return DM_ERR(DM_ERR_UNSUPPORTED, "tune: built without CUDA");
}

int dm_copy_cuda(void *dst, const void *src, size_t bytes, void *stream)
{
    (void)dst;
    (void)src;
    (void)bytes;
    (void)stream;
    return DM_ERR(DM_ERR_UNSUPPORTED, "copy: built without CUDA");
}

int dm_copy_tune_register(void) { return DM_OK; }
const dm_tune_kernel *dm_copy_tune_kernel(void) { return NULL; }
const dm_tune_kernel *dm_copy_bytes_tune_kernel(void) { return NULL; }
#else
/* ISO C forbids an empty translation unit */
typedef int dm_tune_nocuda_unused;
#endif
