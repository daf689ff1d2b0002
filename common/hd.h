/* DM_HD marks small functions that compile both as host C code and as CUDA device code, so a
 * kernel and its CPU reference can share one definition (e.g. the RNG, the Porter stemmer core).
 * Plain C11 when not compiled by nvcc. */
#ifndef DM_HD_H
#define DM_HD_H
#if defined(__CUDACC__)
#define DM_HD __host__ __device__ __forceinline__
#else
#define DM_HD static inline
#endif
#endif
