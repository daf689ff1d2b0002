/* Copy bandwidth of the bound GPU (common/bandwidth.h). Reference: nvbandwidth-style copies,
 * pinned host memory, CUDA events, median of repeats after one warm-up. */
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/bandwidth.h"
#include "common/cuda_check.h"
#include "common/tune/copy.h"

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Median milliseconds of `repeats` copies of `bytes` from src to dst: cudaMemcpyAsync of the given
 * kind, or the tuned copy kernel (dm_copy_cuda) when kernel is set. */
static int time_copy(float *ms_out, void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                     int kernel, int repeats)
{
    cudaEvent_t a, b;
    DM_CUDA_TRY(cudaEventCreate(&a));
    cudaError_t eb = cudaEventCreate(&b);
    if (eb != cudaSuccess) {
        cudaEventDestroy(a);
        return DM_ERR(DM_ERR_CUDA, "timed copy: cudaEventCreate: %s", cudaGetErrorString(eb));
    }
    float *ms = (float *)dm_malloc(sizeof(float) * (size_t)repeats);
    if (!ms) {
        cudaEventDestroy(a);
        cudaEventDestroy(b);
        return DM_ERR(DM_ERR_NOMEM, "timed copy: out of memory");
    }
    int rc = DM_OK;
    for (int r = -1; r < repeats && rc == DM_OK; r++) {
        cudaError_t e = cudaEventRecord(a);
        if (e == cudaSuccess && kernel) {
            rc = dm_copy_cuda(dst, src, bytes, NULL);
            if (rc != DM_OK) break;
        } else if (e == cudaSuccess) {
            e = cudaMemcpyAsync(dst, src, bytes, kind);
        }
        if (e == cudaSuccess) e = cudaEventRecord(b);
        if (e == cudaSuccess) e = cudaEventSynchronize(b);
        if (e == cudaSuccess && r >= 0) e = cudaEventElapsedTime(&ms[r], a, b);
        if (e != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "timed copy: %s", cudaGetErrorString(e));
    }
    if (rc == DM_OK) {
        qsort(ms, (size_t)repeats, sizeof *ms, cmp_float);
        *ms_out = ms[repeats / 2];
    }
    dm_free(ms);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return rc;
}

extern "C" int dm_bandwidth_measure(dm_bandwidth *out, size_t bytes, int repeats)
{
    memset(out, 0, sizeof *out);
    if (repeats < 1 || bytes == 0) return DM_ERR(DM_ERR_INVALID_ARG, "bandwidth: bytes and repeats must be > 0");
    out->bytes = bytes;
    out->repeats = repeats;
    void *h = NULL, *d0 = NULL, *d1 = NULL;
    int rc = dm_host_alloc_pinned(&h, bytes);
    if (rc == DM_OK) rc = dm_device_alloc(&d0, bytes);
    if (rc == DM_OK) rc = dm_device_alloc(&d1, bytes);
    if (rc == DM_OK) {
        memset(h, 1, bytes);
        float ms = 0;
        rc = time_copy(&ms, d0, h, bytes, cudaMemcpyHostToDevice, 0, repeats);
        if (rc == DM_OK) out->h2d_gbs = (double)bytes / (ms * 1e6);
        if (rc == DM_OK) rc = time_copy(&ms, h, d0, bytes, cudaMemcpyDeviceToHost, 0, repeats);
        if (rc == DM_OK) out->d2h_gbs = (double)bytes / (ms * 1e6);
        if (rc == DM_OK) rc = time_copy(&ms, d1, d0, bytes, cudaMemcpyDeviceToDevice, 0, repeats);
        if (rc == DM_OK) out->d2d_gbs = 2.0 * (double)bytes / (ms * 1e6);
        if (rc == DM_OK) rc = time_copy(&ms, d1, d0, bytes, cudaMemcpyDeviceToDevice, 1, repeats);
        if (rc == DM_OK) out->d2d_kernel_gbs = 2.0 * (double)bytes / (ms * 1e6);
    }
    dm_host_free_pinned(h);
    dm_device_free(d0);
    dm_device_free(d1);
    return rc;
}
