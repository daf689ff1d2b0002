/* Device-to-device copy (Rupp et al.: the archetype of memory-bound kernels), tuned over block
 * size x rake x consecutive/strided items. Its best policy is the tuner's memory-bound prior.
 * Reference: dm_copy_cpu (memcpy). Plain C. */
#ifndef DM_COPY_H
#define DM_COPY_H

#include <stddef.h>

#include "common/tune/tune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Copies bytes from src to dst (non-overlapping). dm_copy_cpu: host memory, stream ignored.
 * dm_copy_cuda: device memory, asynchronous on stream (cudaStream_t, NULL = default stream);
 * the 16-byte-aligned body goes through the tuned "common.copy", a misaligned copy or the tail
 * through "common.copy_bytes". Returns DM_OK, DM_ERR_INVALID_ARG (NULL with bytes > 0),
 * DM_ERR_CUDA, or DM_ERR_UNSUPPORTED for dm_copy_cuda in a CPU-only build. */
typedef int dm_copy_fn(void *dst, const void *src, size_t bytes, void *stream);
dm_copy_fn dm_copy_cpu, dm_copy_cuda;

/* Launch arguments of the copy instances (n of the launch = bytes; for "common.copy" n must be a
 * multiple of 16 and both pointers 16-byte aligned). */
typedef struct dm_copy_args {
    void *dst;
    const void *src;
} dm_copy_args;

/* Registers "common.copy" and "common.copy_bytes" (CUDA builds; DM_OK and nothing in CPU-only
 * builds). */
int dm_copy_tune_register(void);
/* The kernel descriptors (NULL in CPU-only builds). */
const dm_tune_kernel *dm_copy_tune_kernel(void);
const dm_tune_kernel *dm_copy_bytes_tune_kernel(void);

#ifdef __cplusplus
}
#endif
#endif
