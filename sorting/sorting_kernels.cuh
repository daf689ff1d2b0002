/* Kernels of the sorting module: a stable bitonic sort of small segments in shared memory, one
 * block per segment, with the record layout in shared memory as a compile-time choice (AoS: key
 * and position side by side; SoA: two arrays; tiled AoS: tiles of TILE keys then TILE positions).
 * Records are (key, position in the segment): comparing both makes the network stable, and the
 * values are gathered by position at the end. Segments longer than BLOCK x ITEMS are left to CUB.
 * Reference: dm_segsort_pairs_cpu (sorting_cpu.c); Batcher's bitonic merge network. */
#ifndef DM_SORTING_KERNELS_CUH
#define DM_SORTING_KERNELS_CUH

#include <stdint.h>

#include "common/tune/tune.h"
#include "sorting/sorting_bitonic.h"

/* Values are 32-bit payloads (float weights or u32 indices), moved as bits and never compared, so
 * one set of instances serves both value types. */
struct dm_bitonic_args {
    const uint32_t *keys_in;
    const uint32_t *vals_in;
    uint32_t *keys_out;
    uint32_t *vals_out;
    const uint64_t *seg_off;
    size_t n_segments;
};

/* Shared-memory record stores: key(i), pos(i), set(i, key, pos). */
template <int LAYOUT, int CAP, int TILE>
struct dm_rec_store;

template <int CAP, int TILE>
struct dm_rec_store<DM_LAYOUT_AOS, CAP, TILE> {
    uint2 r[CAP];
    __device__ __forceinline__ uint2 get(int i) const { return r[i]; }
    __device__ __forceinline__ void set(int i, uint2 v) { r[i] = v; }
};

template <int CAP, int TILE>
struct dm_rec_store<DM_LAYOUT_SOA, CAP, TILE> {
    uint32_t k[CAP];
    uint32_t p[CAP];
    __device__ __forceinline__ uint2 get(int i) const { return make_uint2(k[i], p[i]); }
    __device__ __forceinline__ void set(int i, uint2 v)
    {
        k[i] = v.x;
        p[i] = v.y;
    }
};

template <int CAP, int TILE>
struct dm_rec_store<DM_LAYOUT_TILED, CAP, TILE> {
    static_assert(CAP % TILE == 0, "tile must divide the capacity");
    uint32_t m[2 * CAP];
    __device__ __forceinline__ static int kidx(int i) { return dm_bitonic_tiled_key(i, TILE); }
    __device__ __forceinline__ uint2 get(int i) const { return make_uint2(m[kidx(i)], m[kidx(i) + TILE]); }
    __device__ __forceinline__ void set(int i, uint2 v)
    {
        m[kidx(i)] = v.x;
        m[kidx(i) + TILE] = v.y;
    }
};

__device__ __forceinline__ bool dm_rec_less(uint2 a, uint2 b) { return dm_bitonic_less(a.x, a.y, b.x, b.y); }

template <int BLOCK, int ITEMS, int LAYOUT, int TILE>
__global__ void __launch_bounds__(BLOCK) dm_bitonic_segsort_kernel(dm_bitonic_args a)
{
    constexpr int CAP = BLOCK * ITEMS;
    __shared__ dm_rec_store<LAYOUT, CAP, TILE> st;
    for (size_t s = blockIdx.x; s < a.n_segments; s += gridDim.x) {
        uint64_t b = a.seg_off[s];
        uint64_t len64 = a.seg_off[s + 1] - b;
        if (len64 == 0 || len64 > (uint64_t)CAP) continue; /* uniform over the block */
        int len = (int)len64;
        if (len == 1) {
            if (threadIdx.x == 0) {
                a.keys_out[b] = a.keys_in[b];
                a.vals_out[b] = a.vals_in[b];
            }
            continue;
        }
        int p2 = dm_bitonic_p2(len);
        for (int i = threadIdx.x; i < p2; i += BLOCK)
            st.set(i, i < len ? make_uint2(a.keys_in[b + i], (uint32_t)i) : make_uint2(0xffffffffu, 0xffffffffu));
        __syncthreads();
        for (int k = 2; k <= p2; k <<= 1) {
            for (int j = k >> 1; j > 0; j >>= 1) {
                for (int t = threadIdx.x; t < p2 / 2; t += BLOCK) {
                    int i, l;
                    bool up = dm_bitonic_pair(t, j, k, &i, &l);
                    uint2 x = st.get(i), y = st.get(l);
                    if (dm_rec_less(y, x) == up) {
                        st.set(i, y);
                        st.set(l, x);
                    }
                }
                __syncthreads();
            }
        }
        for (int i = threadIdx.x; i < len; i += BLOCK) {
            uint2 r = st.get(i);
            a.keys_out[b + i] = r.x;
            a.vals_out[b + i] = a.vals_in[b + r.y];
        }
        __syncthreads();
    }
}

#endif
