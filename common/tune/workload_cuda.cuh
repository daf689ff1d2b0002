/* Device buffers of a tuning workload (the bench hooks of common/tune/tune.h), for the workloads
 * written in CUDA C++: every buffer a workload allocates is listed, so that its destroy hook frees
 * them all, and buffers without host contents start from a fixed byte pattern, so that an instance
 * that skips part of its output differs from the default instance. Internal; used by
 * preprocess/preprocess_tune_cuda.cu and tfidf/tfidf_tune_cuda.cu. Reference: none. */
#ifndef DM_TUNE_WORKLOAD_CUDA_CUH
#define DM_TUNE_WORKLOAD_CUDA_CUH

#include <cuda_runtime.h>
#include <stddef.h>

#include "common/status.h"

#define DM_WL_MAX_BUFS 24
#define DM_WL_PATTERN 0xA5 /* initial bytes of every buffer without host contents */

typedef struct dm_wl_bufs {
    void *p[DM_WL_MAX_BUFS];
    int n;
} dm_wl_bufs;

/* A device buffer of bytes, listed in *b: a copy of host, or the pattern (host NULL). who names
 * the workload in errors. */
template <typename T>
static inline int dm_wl_dev(dm_wl_bufs *b, T **out, size_t bytes, const void *host, const char *who)
{
    *out = NULL;
    if (b->n == DM_WL_MAX_BUFS) return DM_ERR(DM_ERR_NOMEM, "%s: too many buffers", who);
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError();
        return DM_ERR(DM_ERR_CUDA, "%s: cudaMalloc of %zu bytes failed", who, bytes);
    }
    b->p[b->n++] = p;
    cudaError_t e = cudaSuccess;
    if (bytes && host) e = cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice);
    else if (bytes) e = cudaMemset(p, DM_WL_PATTERN, bytes);
    if (e != cudaSuccess) return DM_ERR(DM_ERR_CUDA, "%s: upload: %s", who, cudaGetErrorString(e));
    *out = static_cast<T *>(p);
    return DM_OK;
}

static inline int dm_wl_down(void *host, const void *dev, size_t bytes, const char *who)
{
    if (bytes && cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
        return DM_ERR(DM_ERR_CUDA, "%s: download failed", who);
    return DM_OK;
}

static inline void dm_wl_free(dm_wl_bufs *b)
{
    for (int i = 0; i < b->n; i++) cudaFree(b->p[i]);
    b->n = 0;
}

#endif
