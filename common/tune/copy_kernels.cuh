/* Copy kernels (Rupp et al.'s memory-bound archetype): each thread moves RAKE items of type T,
 * consecutive (items t*RAKE .. t*RAKE+RAKE-1) or strided by the grid (t, t+T, ..., T = threads
 * of the grid). All loads of a thread are issued before its stores (memory-level parallelism).
 * Reference: dm_copy_cpu. Included only by copy_cuda.cu. */
#ifndef DM_COPY_KERNELS_CUH
#define DM_COPY_KERNELS_CUH

#include <stddef.h>

template <typename T, int BLOCK, int RAKE, bool STRIDED>
__global__ void __launch_bounds__(BLOCK)
dm_copy_kernel(T *__restrict__ dst, const T *__restrict__ src, size_t n)
{
    const size_t t = (size_t)blockIdx.x * BLOCK + threadIdx.x;
    const size_t threads = (size_t)gridDim.x * BLOCK;
    T v[RAKE];
#pragma unroll
    for (int r = 0; r < RAKE; r++) {
        const size_t i = STRIDED ? t + (size_t)r * threads : t * RAKE + r;
        if (i < n) v[r] = src[i];
    }
#pragma unroll
    for (int r = 0; r < RAKE; r++) {
        const size_t i = STRIDED ? t + (size_t)r * threads : t * RAKE + r;
        if (i < n) dst[i] = v[r];
    }
}

#endif
