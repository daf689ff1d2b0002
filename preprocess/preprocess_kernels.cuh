/* CUDA kernels of the preprocess module: token bounds (starts counted per tile, tiles scanned,
 * tokens placed), process tokens (filter, stop set, Porter stem, hash), compact kept tokens,
 * per-document token bounds, first occurrences of the terms (set insert, flag).
 * Templates only for compile-time launch parameters (block size, rake, strided). The per-element
 * code is tokenize_hd.h, shared with the host emulation. Reference: dm_tokenize_cpu. */
#ifndef DM_PREPROCESS_KERNELS_CUH
#define DM_PREPROCESS_KERNELS_CUH

#include <stdint.h>

#include <cub/cub.cuh>

#include "preprocess/tokenize_hd.h"

/* Token bounds: the text in tiles of BLOCK x ITEMS bytes, ITEMS consecutive bytes per thread.
 * Tiles are at least DM_PP_TOKENS_MIN_TILE bytes (every instance), so scan storage for
 * dm_pp_tokens_max_tiles(n) tiles serves them all. */
#define DM_PP_TOKENS_MIN_TILE 2048
static inline size_t dm_pp_tokens_max_tiles(size_t n) { return n / DM_PP_TOKENS_MIN_TILE + 1; }

typedef struct dm_pp_tokens_args {
    const char *text;
    size_t n;
    uint32_t *tile_cnt, *tile_off; /* per tile: its token starts; their exclusive scan */
    void *cub_tmp;                 /* CUB scan storage for the tiles of the smallest instance */
    size_t cub_bytes;
    uint32_t *tok_start, *tok_end; /* room for n / 2 + 1 tokens */
    uint32_t *total;               /* tokens found (one word, device) */
} dm_pp_tokens_args;

/* Process and compact: tiles of BLOCK x RAKE tokens. The process kernel stages each tile's kept
 * tokens, in token order, at the tile's first token index (st_*) and counts them (tile_cnt);
 * after a scan of the counts, the compact kernel moves each tile's run to its place in out_*. */
typedef struct dm_pp_process_args {
    const char *text;
    char *stems;
    const uint32_t *tok_start, *tok_end;
    size_t t;
    dm_stop_view stop;
    dm_tok_params p;
    uint32_t *tile_cnt, *tile_off; /* per tile: kept tokens; their exclusive scan */
    void *cub_tmp;                 /* CUB scan storage for the tiles of the smallest instance */
    size_t cub_bytes;
    uint64_t *st_hash;             /* staged, t entries */
    uint32_t *st_start;
    uint8_t *st_len;
    uint64_t *out_hash, *out_start; /* kept tokens in order */
    uint8_t *out_len;
    uint32_t *kept;                 /* kept tokens (one word, device) */
    unsigned long long *drops;      /* [4]: short, long, number, stop */
} dm_pp_process_args;
#define DM_PP_PROCESS_MIN_TILE 64
static inline size_t dm_pp_process_max_tiles(size_t t) { return t / DM_PP_PROCESS_MIN_TILE + 1; }

typedef struct dm_pp_docs_args {
    const uint64_t *doc_off; /* n_docs + 1 */
    size_t n_docs;
    const uint64_t *kept_start;
    uint64_t kept;
    uint64_t *doc_tok;
} dm_pp_docs_args;

/* First occurrences (tokenize_hd.h, step 6) of the n kept tokens: the set is cleared, every
 * token inserted, every token flagged, and CUB lists the flagged indices in order. */
typedef struct dm_pp_first_args {
    const uint64_t *hash, *start; /* the kept tokens (out_hash, out_start: relative to stems) */
    const uint8_t *len;
    const char *stems;
    size_t n;
    uint64_t *keys;               /* dm_tok_first_slots(n) slots */
    uint32_t *idx;
    uint8_t *flag;                /* n */
    uint64_t *list;               /* n: the flagged indices, ascending */
    uint32_t *n_list;             /* their number (one word, device) */
    void *cub_tmp;                /* CUB select storage for n */
    size_t cub_bytes;
} dm_pp_first_args;

/* Item i of thread gtid under a rake policy. */
template <int RAKE, bool STRIDED>
__device__ __forceinline__ size_t dm_pp_item(size_t gtid, size_t nthreads, int r)
{
    return STRIDED ? gtid + (size_t)r * nthreads : gtid * RAKE + (size_t)r;
}

/* The token start and end flags of bytes [i0, i0 + ITEMS) with the rule of dm_tok_mark_one
 * (bytes outside [0, n) are separators): bit p (1..ITEMS) of *sm / *em is set when byte
 * i0 + p - 1 starts / ends a token. Aligned full chunks are read 16 bytes at a time. */
template <int ITEMS>
__device__ __forceinline__ void dm_pp_chunk_flags(const char *text, size_t n, size_t i0, uint64_t *sm, uint64_t *em)
{
    static_assert(ITEMS % 16 == 0 && ITEMS <= 32, "ITEMS: 16 or 32 bytes per thread");
    uint64_t ns = 0; /* bit p: byte i0 + p - 1 is not a separator, p = 0 .. ITEMS + 1 */
    if (i0 > 0 && !dm_pp_is_sep((unsigned char)text[i0 - 1])) ns |= 1u;
    if (i0 + ITEMS <= n && ((uintptr_t)(text + i0) & 15u) == 0) {
#pragma unroll
        for (int j = 0; j < ITEMS / 16; j++) {
            uint4 v = reinterpret_cast<const uint4 *>(text + i0)[j];
            uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int q = 0; q < 4; q++)
#pragma unroll
                for (int b = 0; b < 4; b++)
                    if (!dm_pp_is_sep((unsigned char)(w[q] >> (8 * b)))) ns |= 1ull << (1 + 16 * j + 4 * q + b);
        }
    } else {
        for (int p = 0; p < ITEMS && i0 + p < n; p++)
            if (!dm_pp_is_sep((unsigned char)text[i0 + p])) ns |= 1ull << (1 + p);
    }
    if (i0 + ITEMS < n && !dm_pp_is_sep((unsigned char)text[i0 + ITEMS])) ns |= 1ull << (ITEMS + 1);
    const uint64_t inner = ((1ull << ITEMS) - 1) << 1;
    *sm = ns & ~(ns << 1) & inner;
    *em = ns & ~(ns >> 1) & inner;
}

/* One kernel, two passes over the same tiles. PLACE = false: the token starts of each tile
 * (tile_cnt). PLACE = true, after the scan of the tile counts: each thread's first token number
 * (block scan of the threads' starts plus the tile's offset), then its tokens' starts and ends;
 * the token ending at a byte is the last one started at or before it (tokens never contain a
 * separator), and the last thread writes the total. */
template <int BLOCK, int ITEMS, bool PLACE>
__global__ void __launch_bounds__(BLOCK) dm_pp_tokens_kernel(dm_pp_tokens_args a)
{
    typedef cub::BlockReduce<uint32_t, BLOCK> reduce_t;
    typedef cub::BlockScan<uint32_t, BLOCK> scan_t;
    __shared__ union {
        typename reduce_t::TempStorage reduce;
        typename scan_t::TempStorage scan;
    } tmp;
    size_t i0 = ((size_t)blockIdx.x * BLOCK + threadIdx.x) * ITEMS;
    uint64_t sm = 0, em = 0;
    if (i0 < a.n) dm_pp_chunk_flags<ITEMS>(a.text, a.n, i0, &sm, &em);
    if (!PLACE) {
        uint32_t c = reduce_t(tmp.reduce).Sum((uint32_t)__popcll(sm));
        if (threadIdx.x == 0) a.tile_cnt[blockIdx.x] = c;
        return;
    }
    uint32_t k;
    scan_t(tmp.scan).ExclusiveSum((uint32_t)__popcll(sm), k);
    k += a.tile_off[blockIdx.x];
    for (uint64_t m = sm | em; m; m &= m - 1) {
        int p = __ffsll((long long)m) - 1;
        uint64_t bit = 1ull << p;
        if (sm & bit) a.tok_start[k++] = (uint32_t)(i0 + (size_t)p - 1);
        if (em & bit) a.tok_end[k - 1] = (uint32_t)(i0 + (size_t)p);
    }
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == BLOCK - 1) *a.total = k;
}

/* Two phases per tile: (a) the verdict of each of the tile's tokens (length, number, stop set:
 * cheap), read BLOCK at a time (coalesced), the kept ones queued in token order in shared memory
 * (a block scan of the keep flags per round); (b) the queued tokens stemmed and hashed by
 * consecutive threads, their results staged in queue order. A thread per token through both
 * would leave the lanes of dropped tokens (stop words are about a third of all tokens) idle while
 * the other lanes of their warp stem; the queue gives the stemming full warps. */
template <int BLOCK, int RAKE>
__global__ void __launch_bounds__(BLOCK) dm_pp_process_kernel(dm_pp_process_args a)
{
    typedef cub::BlockScan<uint32_t, BLOCK> scan_t;
    __shared__ typename scan_t::TempStorage tmp;
    __shared__ unsigned long long drops[4];
    __shared__ uint16_t queue[BLOCK * RAKE];
    if (threadIdx.x < 4) drops[threadIdx.x] = 0;
    __syncthreads();
    const size_t first = (size_t)blockIdx.x * BLOCK * RAKE;
    uint32_t queued = 0;
    for (int r = 0; r < RAKE; r++) {
        size_t k = first + (size_t)r * BLOCK + threadIdx.x;
        int v = -1;
        if (k < a.t) {
            v = dm_tok_verdict_one(a.text, a.tok_start[k], a.tok_end[k], &a.stop, &a.p);
            if (v != DM_PP_KEEP) atomicAdd(&drops[v - 1], 1ull);
        }
        uint32_t keep = v == DM_PP_KEEP, pos, round;
        scan_t(tmp).ExclusiveSum(keep, pos, round);
        if (keep) queue[queued + pos] = (uint16_t)(r * BLOCK + threadIdx.x);
        queued += round;
        __syncthreads(); /* tmp is reused by the next round; the queue is read below */
    }
    for (uint32_t q = threadIdx.x; q < queued; q += BLOCK) {
        size_t k = first + queue[q];
        uint64_t h = 0;
        uint8_t sl = 0;
        uint32_t s0 = a.tok_start[k];
        dm_tok_stem_one(a.stems, a.text, s0, a.tok_end[k], &a.p, &h, &sl);
        a.st_hash[first + q] = h;
        a.st_start[first + q] = s0;
        a.st_len[first + q] = sl;
    }
    if (threadIdx.x == 0) a.tile_cnt[blockIdx.x] = queued;
    __syncthreads();
    if (threadIdx.x < 4 && drops[threadIdx.x]) atomicAdd(&a.drops[threadIdx.x], drops[threadIdx.x]);
}

/* After the scan of the tiles' kept counts: each tile's staged run to its place (coalesced). */
template <int BLOCK, int RAKE>
__global__ void __launch_bounds__(BLOCK) dm_pp_compact_kernel(dm_pp_process_args a)
{
    const size_t first = (size_t)blockIdx.x * BLOCK * RAKE;
    const uint32_t cnt = a.tile_cnt[blockIdx.x], off = a.tile_off[blockIdx.x];
    for (uint32_t j = threadIdx.x; j < cnt; j += BLOCK) {
        a.out_hash[off + j] = a.st_hash[first + j];
        a.out_start[off + j] = a.st_start[first + j];
        a.out_len[off + j] = a.st_len[first + j];
    }
    if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) *a.kept = off + cnt;
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

template <int BLOCK, int RAKE, bool STRIDED>
__global__ void __launch_bounds__(BLOCK) dm_pp_first_insert_kernel(dm_pp_first_args a, uint64_t mask)
{
    size_t gtid = (size_t)blockIdx.x * BLOCK + threadIdx.x, nth = (size_t)gridDim.x * BLOCK;
#pragma unroll
    for (int r = 0; r < RAKE; r++) {
        size_t i = dm_pp_item<RAKE, STRIDED>(gtid, nth, r);
        if (i < a.n) dm_tok_first_insert(a.keys, a.idx, mask, a.hash[i], (uint32_t)i);
    }
}

template <int BLOCK, int RAKE, bool STRIDED>
__global__ void __launch_bounds__(BLOCK) dm_pp_first_flag_kernel(dm_pp_first_args a, uint64_t mask)
{
    size_t gtid = (size_t)blockIdx.x * BLOCK + threadIdx.x, nth = (size_t)gridDim.x * BLOCK;
#pragma unroll
    for (int r = 0; r < RAKE; r++) {
        size_t i = dm_pp_item<RAKE, STRIDED>(gtid, nth, r);
        if (i < a.n)
            a.flag[i] = (uint8_t)dm_tok_first_flag(a.keys, a.idx, mask, a.hash, a.start, a.len, a.stems, (uint32_t)i);
    }
}

#endif
