/* GPU discovery and description. Reference: none. Implemented in device_cuda.cu when the CUDA
 * backend is built, and by device.c (no GPUs) otherwise. Safe to call with no GPU present. */
#ifndef DM_DEVICE_H
#define DM_DEVICE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dm_device_info {
    char name[256];
    int cc_major, cc_minor;
    int sms;
    size_t mem_total, mem_free;
    int max_threads_per_sm;
    size_t smem_per_block, smem_per_sm;
    int regs_per_sm;
    int pci_bus;
} dm_device_info;

/* Number of usable GPUs (0 without CUDA build, without driver or without device). Never fails. */
int dm_device_count(void);
/* Binds the calling thread to GPU dev and fills *out. DM_ERR_CUDA on failure. */
int dm_device_bind(int dev, dm_device_info *out);
/* Fills *out for GPU dev without changing the binding. */
int dm_device_query(int dev, dm_device_info *out);
/* CUDA runtime and driver versions as "13.0" strings ("none" when not built with CUDA). */
const char *dm_device_runtime_version(void);
const char *dm_device_driver_version(void);
/* Waits for all work on the current device (no-op without CUDA). */
int dm_device_sync(void);

#ifdef __cplusplus
}
#endif
#endif
