/* DM_CUDA_TRY: checks a CUDA runtime call (or a kernel launch via cudaGetLastError) and returns
 * DM_ERR_CUDA with the call, the CUDA error name and string recorded. For .cu files only. */
#ifndef DM_CUDA_CHECK_H
#define DM_CUDA_CHECK_H

#include <cuda_runtime.h>

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

#endif
