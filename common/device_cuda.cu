/* GPU discovery, binding and description for the CUDA backend (common/device.h).
 * Reference: device.c (the no-GPU answers of a CPU-only build). */
#include <stdio.h>
#include <string.h>

#include "common/cuda_check.h"
#include "common/device.h"

extern "C" int dm_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* no driver / no device: clear the sticky-free error and report none */
        return 0;
    }
    return n;
}

extern "C" int dm_device_query(int dev, dm_device_info *out)
{
    cudaDeviceProp p;
    memset(out, 0, sizeof *out);
    DM_CUDA_TRY(cudaGetDeviceProperties(&p, dev));
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->sms = p.multiProcessorCount;
    out->mem_total = p.totalGlobalMem;
    out->max_threads_per_sm = p.maxThreadsPerMultiProcessor;
    out->smem_per_block = p.sharedMemPerBlockOptin ? p.sharedMemPerBlockOptin : p.sharedMemPerBlock;
    out->smem_per_sm = p.sharedMemPerMultiprocessor;
    out->regs_per_sm = p.regsPerMultiprocessor;
    out->pci_bus = p.pciBusID;
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur == dev) {
        size_t fr = 0, tot = 0;
        if (cudaMemGetInfo(&fr, &tot) == cudaSuccess) out->mem_free = fr;
    }
    return DM_OK;
}

extern "C" int dm_device_bind(int dev, dm_device_info *out)
{
    DM_CUDA_TRY(cudaSetDevice(dev));
    DM_CUDA_TRY(cudaFree(0)); /* create the context now, so later timings do not include it */
    return dm_device_query(dev, out);
}

static const char *fmt_version(int v, char *buf)
{
    snprintf(buf, 16, "%d.%d", v / 1000, (v % 1000) / 10);
    return buf;
}

extern "C" const char *dm_device_runtime_version(void)
{
    static char buf[16];
    int v = 0;
    cudaRuntimeGetVersion(&v);
    return fmt_version(v, buf);
}

extern "C" const char *dm_device_driver_version(void)
{
    static char buf[16];
    int v = 0;
    if (cudaDriverGetVersion(&v) != cudaSuccess || v == 0) return "none";
    return fmt_version(v, buf);
}

extern "C" int dm_device_sync(void)
{
    DM_CUDA_TRY(cudaDeviceSynchronize());
    return DM_OK;
}
