/* Pinned host and device allocation for the CUDA backend (common/alloc.h), counted per kind.
 * Reference: alloc.c's CPU-only fallbacks. */
#include "common/alloc.h"
#include "common/cuda_check.h"

extern "C" int dm_host_alloc_pinned(void **out, size_t n)
{
    *out = NULL;
    cudaError_t e = cudaHostAlloc(out, n ? n : 1, cudaHostAllocDefault);
    if (e != cudaSuccess) {
        *out = NULL;
        cudaGetLastError(); /* reported here: do not let a later launch check see it again */
        return DM_ERR(DM_ERR_NOMEM, "cudaHostAlloc of %zu pinned bytes: %s", n, cudaGetErrorString(e));
    }
    int rc = dm_mem_track(DM_MEM_PINNED, *out, n);
    if (rc) {
        cudaFreeHost(*out);
        *out = NULL;
    }
    return rc;
}

extern "C" void dm_host_free_pinned(void *p)
{
    if (!p) return;
    dm_mem_untrack(DM_MEM_PINNED, p);
    cudaFreeHost(p);
}

extern "C" int dm_device_alloc(void **out, size_t n)
{
    *out = NULL;
    size_t fail_from = dm_device_alloc_failing_from();
    if (fail_from && n >= fail_from)
        return DM_ERR(DM_ERR_NOMEM, "cudaMalloc of %zu bytes: out of memory (injected, test)", n);
    cudaError_t e = cudaMalloc(out, n ? n : 1);
    if (e != cudaSuccess) {
        *out = NULL;
        cudaGetLastError(); /* reported here: do not let a later launch check see it again */
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        return DM_ERR(e == cudaErrorMemoryAllocation ? DM_ERR_NOMEM : DM_ERR_CUDA,
                      "cudaMalloc of %zu bytes (%zu of %zu free): %s", n, fr, tot, cudaGetErrorString(e));
    }
    int rc = dm_mem_track(DM_MEM_DEVICE, *out, n);
    if (rc) {
        cudaFree(*out);
        *out = NULL;
    }
    return rc;
}

extern "C" void dm_device_free(void *p)
{
    if (!p) return;
    dm_mem_untrack(DM_MEM_DEVICE, p);
    cudaFree(p);
}
