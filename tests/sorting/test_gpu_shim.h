/* The few CUDA runtime calls the GPU tests of sorting and tfidf make from C. In a CPU-only build
 * (DM_HAVE_CUDA 0) the tests exit 77 before using them; the stand-ins only let them compile.
 * Reference: none (test support). */
#ifndef DM_TEST_GPU_SHIM_H
#define DM_TEST_GPU_SHIM_H

#include <stddef.h>
#include <string.h>

#if DM_HAVE_CUDA
#include <cuda_runtime.h>
#else
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorNotSupported = 801 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2 };
static inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k)
{
    (void)d, (void)s, (void)n, (void)k;
    return cudaErrorNotSupported;
}
static inline cudaError_t cudaMemset(void *d, int v, size_t n)
{
    (void)d, (void)v, (void)n;
    return cudaErrorNotSupported;
}
static inline cudaError_t cudaDeviceSynchronize(void) { return cudaErrorNotSupported; }
#endif

#endif
