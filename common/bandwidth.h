/* Memory bandwidth of the bound GPU: pinned host-to-device, device-to-host and device-to-device
 * copies timed with CUDA events (median of repeats). Used by `docmine info --bandwidth`.
 * Reference: the ceilings in the device notes. CUDA backend only (DM_ERR_UNSUPPORTED otherwise). */
#ifndef DM_BANDWIDTH_H
#define DM_BANDWIDTH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dm_bandwidth {
    size_t bytes;       /* bytes per copy */
    int repeats;
    double h2d_gbs;     /* GB/s = 1e9 bytes/s */
    double d2h_gbs;
    double d2d_gbs;     /* cudaMemcpy D2D, bytes read + written */
    double d2d_kernel_gbs; /* the tuned copy kernel common.copy (dm_copy_cuda), read + written */
} dm_bandwidth;

int dm_bandwidth_measure(dm_bandwidth *out, size_t bytes, int repeats);

#ifdef __cplusplus
}
#endif
#endif
