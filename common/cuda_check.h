/* DM_CUDA_TRY: checks a CUDA runtime call (or a kernel launch via cudaGetLastError) and returns
 * DM_ERR_CUDA with the call, the CUDA error name and string recorded. DM_CUDA_STAGE_ERR: a failed
 * allocation's message with the stage named. For .cu files only. */
#ifndef DM_CUDA_CHECK_H
#define DM_CUDA_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "common/status.h"

#define DM_CUDA_TRY(call)                                                                          \
    do {                                                                                           \
        cudaError_t dm_cuda_err_ = (call);                                                         \
        if (dm_cuda_err_ != cudaSuccess)                                                           \
            return DM_ERR(DM_ERR_CUDA, "%s: %s (%s)", #call, cudaGetErrorString(dm_cuda_err_),    \
                          cudaGetErrorName(dm_cuda_err_));                                         \
    } while (0)

/* After a <<<...>>> launch: launch-configuration errors. */
#define DM_CUDA_LAUNCH_CHECK() DM_CUDA_TRY(cudaGetLastError())

/* A failed allocation (rc < 0) of a stage's CUDA backend: the recorded message gets the stage's
 * name in front, "STAGE (CUDA): <the allocator's message>", so that an out-of-memory says which
 * stage ran out (dm_device_alloc's own message says only what did not fit, and the pipeline runs
 * every stage in one process). A message that already starts with the stage's name is kept (the
 * helpers of one stage nest). Returns rc (the code is kept: DM_ERR_NOMEM stays DM_ERR_NOMEM). */
#define DM_CUDA_STAGE_ERR(rc, stage) dm_cuda_stage_err_at((rc), (stage), __FILE__, __LINE__)
static inline int dm_cuda_stage_err_at(int rc, const char *stage, const char *file, int line)
{
    if (rc >= 0) return rc;
    const char *m = dm_error_message();
    size_t k = strlen(stage);
    if (m[0] && strncmp(m, stage, k) == 0) return rc;
    char why[768];
    snprintf(why, sizeof why, "%s", m[0] ? m : dm_status_name(rc));
    /* the allocator's " [CODE, file:line]" tag: the new message gets its own */
    size_t n = strlen(why);
    char *tag = strstr(why, " [");
    if (n && why[n - 1] == ']' && tag)
        for (char *t = strstr(tag + 2, " ["); t; t = strstr(t + 2, " [")) tag = t;
    if (n && why[n - 1] == ']' && tag) *tag = '\0';
    return dm_error_set(rc, file, line, "%s (CUDA): %s", stage, why);
}

#endif
