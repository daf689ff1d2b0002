/* CUDA error checking for the tuner's .cu files: every CUDA call and launch is checked and turned
 * into DM_ERR_CUDA with the call and the CUDA error string. Reference: none. C++ (nvcc) only. */
#ifndef DM_TUNE_CUDA_CUH
#define DM_TUNE_CUDA_CUH

#include <cuda_runtime.h>

#include "common/status.h"

#define DM_TUNE_CUDA(call)                                                                         \
    do {                                                                                           \
        cudaError_t dm_tune_e_ = (call);                                                           \
        if (dm_tune_e_ != cudaSuccess)                                                             \
            return DM_ERR(DM_ERR_CUDA, "%s: %s", #call, cudaGetErrorString(dm_tune_e_));          \
    } while (0)

#endif
