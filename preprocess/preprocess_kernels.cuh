/* CUDA kernels of the preprocess module: mark token starts/ends, place tokens, process tokens
 * (filter, stop set, Porter stem, hash), compact kept tokens, per-document token bounds.
 * Templates only for compile-time launch parameters (block size, rake, strided). The per-element
 * code is tokenize_hd.h, shared with the host emulation. Reference: dm_tokenize_cpu. */
#ifndef DM_PREPROCESS_KERNELS_CUH
#define DM_PREPROCESS_KERNELS_CUH

#include <stdint.h>

#include "preprocess/tokenize_hd.h"

typedef struct dm_pp_mark_args {
    const char *text;
    size_t n;
    uint32_t *start; /* 1 where a token starts */
    uint8_t *endf;   /* 1 where a token ends */
} dm_pp_mark_args;

typedef struct dm_pp_place_args {
    const uint32_t *start;
    const uint8_t *endf;
    const uint32_t *scan; /* exclusive scan of start */
    size_t n;
    uint32_t *tok_start, *tok_end;
} dm_pp_place_args;

typedef struct dm_pp_process_args {
    const char *text;
    char *stems;
    const uint32_t *tok_start, *tok_end;
    size_t t;
    dm_stop_view stop;
    dm_tok_params p;
    uint32_t *keep;
    uint64_t *hash;
    uint8_t *stem_len;
    unsigned long long *drops; /* [4]: short, long, number, stop */
} dm_pp_process_args;

typedef struct dm_pp_compact_args {
    const uint32_t *keep, *pos, *tok_start;
    const uint64_t *hash;
    const uint8_t *stem_len;
    size_t t;
    uint64_t *out_hash, *out_start;
    uint8_t *out_len;
} dm_pp_compact_args;

typedef struct dm_pp_docs_args {
    const uint64_t *doc_off; /* n_docs + 1 */
    size_t n_docs;
    const uint64_t *kept_start;
    uint64_t kept;
    uint64_t *doc_tok;
} dm_pp_docs_args;

/* Item i of thread gtid under a rake policy. */
template <int RAKE, bool STRIDED>
__device__ __forceinline__ size_t dm_pp_item(size_t gtid, size_t nthreads, int r)
{
    return STRIDED ? gtid + (size_t)r * nthreads : gtid * RAKE + (size_t)r;
}

template <int BLOCK, int RAKE, bool STRIDED>
__global__ void __launch_bounds__(BLOCK) dm_pp_mark_kernel(dm_pp_mark_args a)
{
    size_t gtid = (size_t)blockIdx.x * BLOCK + threadIdx.x, nth = (size_t)gridDim.x * BLOCK;
#pragma unroll
    for (int r = 0; r < RAKE; r++) {
        size_t i = dm_pp_item<RAKE, STRIDED>(gtid, nth, r);
        if (i < a.n) {
            uint32_t f = dm_tok_mark_one(a.text, a.n, i);
            a.start[i] = f & 1u;
            a.endf[i] = (uint8_t)(f >> 1);
        }
    }
}

template <int BLOCK, int RAKE, bool STRIDED>
__global__ void __launch_bounds__(BLOCK) dm_pp_place_kernel(dm_pp_place_args a)
{
    size_t gtid = (size_t)blockIdx.x * BLOCK + threadIdx.x, nth = (size_t)gridDim.x * BLOCK;
#pragma unroll
    for (int r = 0; r < RAKE; r++) {
        size_t i = dm_pp_item<RAKE, STRIDED>(gtid, nth, r);
        if (i < a.n) {
            uint32_t s = a.start[i], e = a.endf[i], k = a.scan[i];
            if (s) a.tok_start[k] = (uint32_t)i;
            if (e) a.tok_end[k + s - 1] = (uint32_t)(i + 1);
        }
    }
}

/* Two phases per block: (a) the verdict of each of the block's tokens (length, number, stop set:
 * cheap), the kept ones queued in shared memory; (b) the queued tokens stemmed and hashed by
 * consecutive threads. A thread per token through both would leave the lanes of dropped tokens
 * (stop words are about a third of all tokens) idle while the other lanes of their warp stem;
 * the queue gives the stemming full warps. Outputs per token are independent of the order. */
template <int BLOCK, int RAKE, bool STRIDED>
__global__ void __launch_bounds__(BLOCK) dm_pp_process_kernel(dm_pp_process_args a)
{
    __shared__ unsigned long long drops[4];
    __shared__ uint32_t queue[BLOCK * RAKE];
    __shared__ uint32_t queued;
    if (threadIdx.x < 4) drops[threadIdx.x] = 0;
    if (threadIdx.x == 0) queued = 0;
    __syncthreads();
    size_t gtid = (size_t)blockIdx.x * BLOCK + threadIdx.x, nth = (size_t)gridDim.x * BLOCK;
    const unsigned lane = threadIdx.x & 31u;
    for (int r = 0; r < RAKE; r++) {
        size_t k = dm_pp_item<RAKE, STRIDED>(gtid, nth, r);
        int v = -1;
        if (k < a.t) {
            v = dm_tok_verdict_one(a.text, a.tok_start[k], a.tok_end[k], &a.stop, &a.p);
            a.keep[k] = v == DM_PP_KEEP;
            if (v != DM_PP_KEEP) {
                a.hash[k] = 0;
                a.stem_len[k] = 0;
                atomicAdd(&drops[v - 1], 1ull);
            }
        }
        /* warp-aggregated append to the queue (every lane takes part; BLOCK is a multiple of 32) */
        unsigned m = __ballot_sync(0xffffffffu, v == DM_PP_KEEP);
        uint32_t base = 0;
        if (lane == 0 && m) base = atomicAdd(&queued, (uint32_t)__popc(m));
        base = __shfl_sync(0xffffffffu, base, 0);
        if (v == DM_PP_KEEP) queue[base + (uint32_t)__popc(m & ((1u << lane) - 1u))] = (uint32_t)k;
    }
    __syncthreads();
    const uint32_t nq = queued;
    for (uint32_t q = threadIdx.x; q < nq; q += BLOCK) {
        uint32_t k = queue[q];
        uint64_t h = 0;
        uint8_t sl = 0;
        dm_tok_stem_one(a.stems, a.text, a.tok_start[k], a.tok_end[k], &a.p, &h, &sl);
        a.hash[k] = h;
        a.stem_len[k] = sl;
    }
    __syncthreads();
    if (threadIdx.x < 4 && drops[threadIdx.x]) atomicAdd(&a.drops[threadIdx.x], drops[threadIdx.x]);
}

template <int BLOCK, int RAKE, bool STRIDED>
__global__ void __launch_bounds__(BLOCK) dm_pp_compact_kernel(dm_pp_compact_args a)
{
    size_t gtid = (size_t)blockIdx.x * BLOCK + threadIdx.x, nth = (size_t)gridDim.x * BLOCK;
#pragma unroll
    for (int r = 0; r < RAKE; r++) {
        size_t k = dm_pp_item<RAKE, STRIDED>(gtid, nth, r);
        if (k < a.t && a.keep[k]) {
            uint32_t o = a.pos[k];
            a.out_hash[o] = a.hash[k];
            a.out_start[o] = a.tok_start[k];
            a.out_len[o] = a.stem_len[k];
        }
    }
}

template <int BLOCK, int RAKE, bool STRIDED>
__global__ void __launch_bounds__(BLOCK) dm_pp_docs_kernel(dm_pp_docs_args a)
{
    size_t gtid = (size_t)blockIdx.x * BLOCK + threadIdx.x, nth = (size_t)gridDim.x * BLOCK;
#pragma unroll
    for (int r = 0; r < RAKE; r++) {
        size_t d = dm_pp_item<RAKE, STRIDED>(gtid, nth, r);
        if (d <= a.n_docs) a.doc_tok[d] = dm_tok_lower_bound(a.kept_start, a.kept, a.doc_off[d]);
    }
}

#endif
