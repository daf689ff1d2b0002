/* The tuner's thin GPU layer (implemented in tune_cuda.cu; by tune_nocuda.c, which reports
 * DM_ERR_UNSUPPORTED / DM_ERR_NO_DEVICE, in a CPU-only build). Plain C, no CUDA types.
 * Reference: none (measurement only; the logic is in model.c and search.c). */
#ifndef DM_TUNE_GPU_H
#define DM_TUNE_GPU_H

#include "common/tune/tune.h"
#include "common/tune/tune_model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dm_tune_gpu {
    char name[128];
    int cc; /* major x 10 + minor */
    dm_tune_limits limits;
} dm_tune_gpu;

/* The current device's identity and limits. DM_ERR_NO_DEVICE when there is none. */
int dm_tune_gpu_current(dm_tune_gpu *out);
/* Attributes of an instance on the current device (cudaFuncGetAttributes and
 * cudaOccupancyMaxActiveBlocksPerMultiprocessor with the instance's dynamic shared memory). */
int dm_tune_gpu_attributes(dm_tune_attr *out, const dm_tune_instance *inst);

/* Makes dm_tune_select treat the current GPU as *gpu (NULL: detect it again). For tests of the
 * database and waiting paths without a device, and for debugging heterogeneous nodes. Clears the
 * selection cache. Implemented in registry.c. */
void dm_tune_override_gpu(const dm_tune_gpu *gpu);

#ifdef __cplusplus
}
#endif
#endif
