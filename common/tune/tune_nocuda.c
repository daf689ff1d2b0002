/* The tuner's GPU layer in a CPU-only build (DOCMINE_CUDA=OFF): no device, nothing to tune, and
 * dm_copy_cuda reports DM_ERR_UNSUPPORTED. Compiled always; empty in CUDA builds.
 * Reference: tune_cuda.cu. */
#include "common/status.h"
#include "common/tune/copy.h"
#include "common/tune/tune_gpu.h"

#if !DM_HAVE_CUDA
int dm_tune_gpu_current(dm_tune_gpu *out)
{
    (void)out;
    return DM_ERR(DM_ERR_NO_DEVICE, "tune: built without CUDA");
}

int dm_tune_gpu_attributes(dm_tune_attr *out, const dm_tune_instance *inst)
{
    (void)out;
    (void)inst;
    return DM_ERR(DM_ERR_UNSUPPORTED, "tune: built without CUDA");
}

int dm_tune_run(dm_tune_result *res, const dm_tune_kernel *k, size_t n, const dm_tune_options *opt)
{
    (void)res;
    (void)k;
    (void)n;
    (void)opt;
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
