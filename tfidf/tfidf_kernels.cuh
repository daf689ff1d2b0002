/* Kernels of the tfidf CUDA backend (templates over compile-time launch parameters only).
 *
 * Per-document term-count tables after Zhang & Mueller: document d owns 32 buckets of bcap_d
 * slots (slot = term index + count); bucket = low 5 bits of a mix of the term index, linear
 * probing inside the bucket. A full bucket raises the document's overflow flag and the host
 * rebuilds with larger buckets: nothing is dropped.
 *  - atomic variant: one warp per document, lanes insert their tokens with atomicCAS on the key
 *    and atomicAdd on the count (the "intermediate buckets", in shared memory when the document's
 *    table fits there); compaction then writes a header (occupied slots per bucket) and the entry
 *    array.
 *  - no-atomic variant: one warp per document, in rounds of 32 x RAKE tokens; each lane first
 *    counts its RAKE tokens in a private sub-table (shared memory), then lane b merges bucket b
 *    of all sub-tables into bucket b of the document's table, which no other lane touches.
 *
 * Vocabulary / DF table: open addressing over 64-bit hashes, a slot = key + identity (index + 1
 * of a term whose bytes are compared; 0 = empty) + payload. A thread claims an empty slot by
 * atomicCAS on the identity, so the identity names a term whose bytes are already in memory
 * when others compare; the key is written after and read only after the kernel. Probing past
 * the capacity or a load above 1/2 raises the full flag: the host doubles and rebuilds.
 *
 * Reference: tfidf_cpu.c (dm_tf_count_cpu, dm_vocab_merge_cpu, dm_vocab_lookup_cpu,
 * dm_hash_lookup_cpu, dm_tfidf_weigh_cpu). */
#ifndef DM_TFIDF_KERNELS_CUH
#define DM_TFIDF_KERNELS_CUH

#include <stdint.h>

#include "tfidf/tfidf_internal.h"
#include "tfidf/tfidf_tables.h"


/* ------------------------------------------------------------------ per-document tables */

struct dm_tf_args {
    const uint64_t *tok_off;  /* n_docs + 1 */
    const uint32_t *tok;
    size_t n_docs;
    uint32_t n_terms;
    const uint64_t *tab_off;  /* n_docs + 1: first slot of each document's table */
    uint32_t *tab_key;        /* DM_TF_EMPTY = free */
    uint32_t *tab_cnt;
    uint32_t *overflow;       /* per document: a bucket was full */
    uint32_t *bad_token;      /* global: some token >= n_terms */
};

/* Shared-memory staging: a document whose table has at most DM_TF_SMEM_SLOTS slots is built in
 * the warp's shared memory (shared-memory atomics) and then copied slot for slot to its global
 * table, so compaction sees the same layout; longer documents use the global table directly.
 * STRIDED: a lane's RAKE tokens are lane, lane + 32, ... of a chunk of 32 x RAKE (coalesced);
 * otherwise RAKE consecutive tokens. */
#define DM_TF_SMEM_SLOTS 512

template <int BLOCK, int RAKE, int STRIDED>
__global__ void __launch_bounds__(BLOCK) dm_tf_count_atomic_kernel(dm_tf_args a)
{
    constexpr int WARPS = BLOCK / 32;
    __shared__ uint32_t s_key[WARPS][DM_TF_SMEM_SLOTS];
    __shared__ uint32_t s_cnt[WARPS][DM_TF_SMEM_SLOTS];
    const size_t warp = ((size_t)blockIdx.x * BLOCK + threadIdx.x) >> 5;
    const size_t n_warps = ((size_t)gridDim.x * BLOCK) >> 5;
    const uint32_t lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (size_t d = warp; d < a.n_docs; d += n_warps) {
        uint64_t b = a.tok_off[d], e = a.tok_off[d + 1];
        uint64_t t0 = a.tab_off[d];
        uint64_t slots = a.tab_off[d + 1] - t0;
        uint32_t bcap = (uint32_t)(slots / DM_TF_BUCKETS);
        const bool local = slots <= (uint64_t)DM_TF_SMEM_SLOTS; /* uniform over the warp */
        uint32_t *key = local ? s_key[w] : a.tab_key + t0, *cnt = local ? s_cnt[w] : a.tab_cnt + t0;
        if (local) {
            for (uint32_t s = lane; s < slots; s += 32) {
                key[s] = DM_TF_EMPTY;
                cnt[s] = 0;
            }
            __syncwarp();
        }
        bool ok = true;
        for (uint64_t c = b; c < e; c += 32 * RAKE) {
#pragma unroll
            for (int r = 0; r < RAKE; r++) {
                uint64_t i = STRIDED ? c + lane + 32 * r : c + (uint64_t)lane * RAKE + r;
                if (i >= e) continue;
                uint32_t t = a.tok[i];
                if (t >= a.n_terms) {
                    *a.bad_token = 1;
                    continue;
                }
                if (ok) ok = dm_tf_insert(key, cnt, bcap, t, 1, 1);
            }
        }
        if (local) {
            __syncwarp();
            for (uint32_t s = lane; s < slots; s += 32) {
                a.tab_key[t0 + s] = key[s];
                a.tab_cnt[t0 + s] = cnt[s];
            }
            __syncwarp();
        }
        if (!ok) a.overflow[d] = 1;
    }
}

template <int BLOCK, int RAKE>
__global__ void __launch_bounds__(BLOCK) dm_tf_count_noatomic_kernel(dm_tf_args a)
{
    constexpr int WARPS = BLOCK / 32;
    constexpr int POOL = 32 * RAKE;
    __shared__ uint32_t pool_key[WARPS][POOL];
    __shared__ uint32_t pool_cnt[WARPS][POOL];
    const uint32_t w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t warp = (size_t)blockIdx.x * WARPS + w;
    const size_t n_warps = (size_t)gridDim.x * WARPS;
    uint32_t *pk = pool_key[w], *pc = pool_cnt[w];
    for (size_t d = warp; d < a.n_docs; d += n_warps) {
        uint64_t b = a.tok_off[d], e = a.tok_off[d + 1];
        uint64_t t0 = a.tab_off[d];
        uint32_t bcap = (uint32_t)((a.tab_off[d + 1] - t0) / DM_TF_BUCKETS);
        bool ok = true;
        for (uint64_t base = b; base < e; base += POOL) {
            /* the lane's private sub-table: its RAKE consecutive tokens, counted */
            uint32_t kt[RAKE], kc[RAKE];
            int bad = 0;
            int m = dm_tf_subtable(kt, kc, a.tok, base + (uint64_t)lane * RAKE, 1, e, RAKE, a.n_terms, &bad);
            if (bad) *a.bad_token = 1;
#pragma unroll
            for (int j = 0; j < RAKE; j++) {
                pk[lane * RAKE + j] = j < m ? kt[j] : DM_TF_EMPTY;
                pc[lane * RAKE + j] = j < m ? kc[j] : 0;
            }
            __syncwarp();
            /* merge by bucket: lane `lane` owns bucket `lane` of the document's table */
            for (int q = 0; q < POOL; q++) {
                uint32_t t = pk[q];
                if (t == DM_TF_EMPTY || dm_tf_bucket_of(t) != lane) continue;
                if (ok) ok = dm_tf_insert(a.tab_key + t0, a.tab_cnt + t0, bcap, t, pc[q], 0);
            }
            __syncwarp();
        }
        /* a full bucket is seen by its lane only */
        if (__any_sync(0xffffffffu, !ok) && lane == 0) a.overflow[d] = 1;
    }
}

/* Compaction, step 1: the header, occupied slots per (document, bucket). Lane = bucket. */
struct dm_tf_compact_args {
    size_t n_docs;
    const uint64_t *tab_off;
    const uint32_t *tab_key;
    const uint32_t *tab_cnt;
    uint32_t *header;          /* n_docs x 32 */
    const uint64_t *header_scan; /* exclusive scan of header (step 2) */
    uint32_t *out_term;
    uint32_t *out_count;
    uint64_t *row_off;         /* n_docs + 1 */
};

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) dm_tf_header_kernel(dm_tf_compact_args a)
{
    const size_t warp = ((size_t)blockIdx.x * BLOCK + threadIdx.x) >> 5;
    const size_t n_warps = ((size_t)gridDim.x * BLOCK) >> 5;
    const uint32_t lane = threadIdx.x & 31;
    for (size_t d = warp; d < a.n_docs; d += n_warps) {
        uint64_t t0 = a.tab_off[d];
        uint32_t bcap = (uint32_t)((a.tab_off[d + 1] - t0) / DM_TF_BUCKETS);
        a.header[d * DM_TF_BUCKETS + lane] = dm_tf_bucket_used(a.tab_key + t0, bcap, lane);
    }
}

/* Compaction, step 3: every bucket's entries at its scanned position; row offsets. */
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) dm_tf_compact_kernel(dm_tf_compact_args a)
{
    const size_t warp = ((size_t)blockIdx.x * BLOCK + threadIdx.x) >> 5;
    const size_t n_warps = ((size_t)gridDim.x * BLOCK) >> 5;
    const uint32_t lane = threadIdx.x & 31;
    for (size_t d = warp; d < a.n_docs; d += n_warps) {
        uint64_t t0 = a.tab_off[d];
        uint32_t bcap = (uint32_t)((a.tab_off[d + 1] - t0) / DM_TF_BUCKETS);
        uint64_t p = dm_tf_bucket_emit(a.tab_key + t0, a.tab_cnt + t0, bcap, lane, a.out_term, a.out_count,
                                       a.header_scan[d * DM_TF_BUCKETS + lane]);
        if (lane == 0) a.row_off[d] = a.header_scan[d * DM_TF_BUCKETS];
        if (lane == 31 && d + 1 == a.n_docs) a.row_off[d + 1] = p;
    }
}

/* ------------------------------------------------------------------ vocabulary / DF table */

struct dm_vt_args {
    /* the terms inserted (or looked up) */
    const uint64_t *hash;
    const uint64_t *off;
    const char *bytes;
    const uint64_t *val;     /* merge: summed per term (NULL: 1 each) */
    size_t n;
    /* the table */
    uint64_t cap;            /* power of two */
    uint64_t *key;
    uint32_t *ident;         /* 0 = empty, else index + 1 of a term of the table's term list */
    uint64_t *sum;           /* merge: summed values */
    uint32_t *first;         /* merge: smallest index of the term */
    uint32_t *amb;           /* hash-only tables: 1 when several terms share the slot's hash */
    unsigned long long *used;
    uint32_t *full;
    /* the table's term list (lookup: the vocabulary; merge: the inserted terms themselves) */
    const uint64_t *t_hash;
    const uint64_t *t_off;
    const char *t_bytes;
    /* queries */
    const uint64_t *q_hash;
    const uint64_t *q_off;
    const char *q_bytes;
    size_t n_q;
    uint32_t *ids_out;
    uint32_t *dup;           /* lookup build: a term repeats (index + 1 of the repeat) */
    unsigned long long *ambiguous_q; /* hash lookup: smallest ambiguous query + 1 */
};

__device__ __forceinline__ bool dm_bytes_equal(const char *a, uint64_t la, const char *b, uint64_t lb)
{
    if (la != lb) return false;
    for (uint64_t i = 0; i < la; i++)
        if (a[i] != b[i]) return false;
    return true;
}

/* Merge insert: thread per input term; equal terms (hash and bytes) share one slot. */
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) dm_vt_merge_kernel(dm_vt_args a)
{
    const uint64_t mask = a.cap - 1;
    for (size_t i = (size_t)blockIdx.x * BLOCK + threadIdx.x; i < a.n; i += (size_t)gridDim.x * BLOCK) {
        uint64_t h = a.hash[i];
        const char *w = a.bytes + a.off[i];
        uint64_t len = a.off[i + 1] - a.off[i];
        uint64_t s = dm_slot_hash(h) & mask;
        bool done = false;
        for (uint64_t p = 0; p < a.cap && !done; p++, s = (s + 1) & mask) {
            uint32_t id = a.ident[s];
            if (id == 0) {
                id = atomicCAS(&a.ident[s], 0u, (uint32_t)(i + 1));
                if (id == 0) {
                    a.key[s] = h;
                    atomicAdd((unsigned long long *)&a.sum[s], (unsigned long long)(a.val ? a.val[i] : 1));
                    atomicMin(&a.first[s], (uint32_t)i);
                    if (2 * (atomicAdd(a.used, 1ull) + 1) > a.cap) *a.full = 1;
                    done = true;
                    break;
                }
            }
            uint32_t j = id - 1;
            if (a.hash[j] == h && dm_bytes_equal(a.bytes + a.off[j], a.off[j + 1] - a.off[j], w, len)) {
                atomicAdd((unsigned long long *)&a.sum[s], (unsigned long long)(a.val ? a.val[i] : 1));
                atomicMin(&a.first[s], (uint32_t)i);
                done = true;
            }
        }
        if (!done) *a.full = 1;
    }
}

/* Lookup build: thread per vocabulary term (distinct: a repeat is reported). */
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) dm_vt_build_kernel(dm_vt_args a)
{
    const uint64_t mask = a.cap - 1;
    for (size_t i = (size_t)blockIdx.x * BLOCK + threadIdx.x; i < a.n; i += (size_t)gridDim.x * BLOCK) {
        uint64_t h = a.t_hash[i];
        const char *w = a.t_bytes + a.t_off[i];
        uint64_t len = a.t_off[i + 1] - a.t_off[i];
        uint64_t s = dm_slot_hash(h) & mask;
        bool done = false;
        for (uint64_t p = 0; p < a.cap && !done; p++, s = (s + 1) & mask) {
            uint32_t id = a.ident[s];
            if (id == 0) {
                id = atomicCAS(&a.ident[s], 0u, (uint32_t)(i + 1));
                if (id == 0) {
                    a.key[s] = h;
                    if (2 * (atomicAdd(a.used, 1ull) + 1) > a.cap) *a.full = 1;
                    done = true;
                    break;
                }
            }
            uint32_t j = id - 1;
            if (a.t_hash[j] == h && dm_bytes_equal(a.t_bytes + a.t_off[j], a.t_off[j + 1] - a.t_off[j], w, len)) {
                atomicMax(a.dup, (uint32_t)(i > j ? i : j) + 1);
                done = true;
            }
        }
        if (!done) *a.full = 1;
    }
}

/* Lookup queries: thread per query; the table was built by dm_vt_build_kernel. */
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) dm_vt_query_kernel(dm_vt_args a)
{
    const uint64_t mask = a.cap - 1;
    for (size_t q = (size_t)blockIdx.x * BLOCK + threadIdx.x; q < a.n_q; q += (size_t)gridDim.x * BLOCK) {
        uint64_t h = a.q_hash[q];
        const char *w = a.q_bytes + a.q_off[q];
        uint64_t len = a.q_off[q + 1] - a.q_off[q];
        uint32_t res = DM_TERM_NONE;
        uint64_t s = dm_slot_hash(h) & mask;
        for (uint64_t p = 0; p < a.cap; p++, s = (s + 1) & mask) {
            uint32_t id = a.ident[s];
            if (id == 0) break;
            if (a.key[s] != h) continue;
            uint32_t j = id - 1;
            if (dm_bytes_equal(a.t_bytes + a.t_off[j], a.t_off[j + 1] - a.t_off[j], w, len)) {
                res = j;
                break;
            }
        }
        a.ids_out[q] = res;
    }
}

/* Hash-only build: thread per vocabulary term; a second term with the same hash marks the slot
 * ambiguous instead of taking a slot. */
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) dm_ht_build_kernel(dm_vt_args a)
{
    const uint64_t mask = a.cap - 1;
    for (size_t i = (size_t)blockIdx.x * BLOCK + threadIdx.x; i < a.n; i += (size_t)gridDim.x * BLOCK) {
        uint64_t h = a.t_hash[i];
        uint64_t s = dm_slot_hash(h) & mask;
        bool done = false;
        for (uint64_t p = 0; p < a.cap && !done; p++, s = (s + 1) & mask) {
            uint32_t id = a.ident[s];
            if (id == 0) {
                id = atomicCAS(&a.ident[s], 0u, (uint32_t)(i + 1));
                if (id == 0) {
                    a.key[s] = h;
                    if (2 * (atomicAdd(a.used, 1ull) + 1) > a.cap) *a.full = 1;
                    done = true;
                    break;
                }
            }
            if (a.t_hash[id - 1] == h) {
                a.amb[s] = 1;
                done = true;
            }
        }
        if (!done) *a.full = 1;
    }
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) dm_ht_query_kernel(dm_vt_args a)
{
    const uint64_t mask = a.cap - 1;
    for (size_t q = (size_t)blockIdx.x * BLOCK + threadIdx.x; q < a.n_q; q += (size_t)gridDim.x * BLOCK) {
        uint64_t h = a.q_hash[q];
        uint32_t res = DM_TERM_NONE;
        uint64_t s = dm_slot_hash(h) & mask;
        for (uint64_t p = 0; p < a.cap; p++, s = (s + 1) & mask) {
            uint32_t id = a.ident[s];
            if (id == 0) break;
            if (a.key[s] != h) continue;
            if (a.amb[s]) atomicMin(a.ambiguous_q, (unsigned long long)q + 1);
            else res = id - 1;
            break;
        }
        a.ids_out[q] = res;
    }
}

/* ------------------------------------------------------------------ weights */

struct dm_w_args {
    size_t n_rows;
    const uint64_t *row_off;      /* counts */
    const uint32_t *term;
    const uint32_t *count;
    const uint32_t *map;          /* local term -> column or DM_TERM_NONE */
    const double *col_w;
    int sublinear;
    int l2;
    uint64_t *row_len;            /* per row: vocabulary tokens of the row */
    uint64_t *kept;               /* per row: stored entries (then scanned into out_off) */
    const uint64_t *out_off;      /* n_rows + 1 */
    uint32_t *out_col;            /* unsorted, then sorted */
    double *out_w;                /* unsorted weights, by entry */
    uint32_t *out_pos;            /* entry index (values of the segmented sort) */
    const uint32_t *sorted_col;
    const uint32_t *sorted_pos;
    uint32_t *final_col;
    float *final_val;
    unsigned long long *zero;     /* entries of weight 0 */
    unsigned long long *unmapped; /* tokens of unmapped terms */
};

__device__ __forceinline__ unsigned long long dm_warp_sum_u64(unsigned long long v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

/* Pass 1, warp per row: vocabulary length, stored entries, zero and unmapped counts. */
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) dm_w_len_kernel(dm_w_args a)
{
    const size_t warp = ((size_t)blockIdx.x * BLOCK + threadIdx.x) >> 5;
    const size_t n_warps = ((size_t)gridDim.x * BLOCK) >> 5;
    const uint32_t lane = threadIdx.x & 31;
    for (size_t r = warp; r < a.n_rows; r += n_warps) {
        unsigned long long len = 0, kept = 0, zero = 0, unm = 0;
        for (uint64_t e = a.row_off[r] + lane; e < a.row_off[r + 1]; e += 32) {
            uint32_t c = a.map[a.term[e]];
            if (c == DM_TERM_NONE) unm += a.count[e];
            else {
                len += a.count[e];
                if (a.col_w[c] == 0.0) zero++;
                else kept++;
            }
        }
        len = dm_warp_sum_u64(len);
        kept = dm_warp_sum_u64(kept);
        zero = dm_warp_sum_u64(zero);
        unm = dm_warp_sum_u64(unm);
        if (lane == 0) {
            a.row_len[r] = len;
            a.kept[r] = kept;
            if (zero) atomicAdd(a.zero, zero);
            if (unm) atomicAdd(a.unmapped, unm);
        }
    }
}

/* Pass 2, warp per row: the stored entries in input order (ballot compaction), unnormalised. */
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) dm_w_fill_kernel(dm_w_args a)
{
    const size_t warp = ((size_t)blockIdx.x * BLOCK + threadIdx.x) >> 5;
    const size_t n_warps = ((size_t)gridDim.x * BLOCK) >> 5;
    const uint32_t lane = threadIdx.x & 31;
    for (size_t r = warp; r < a.n_rows; r += n_warps) {
        uint64_t p = a.out_off[r];
        uint64_t len = a.row_len[r];
        for (uint64_t e0 = a.row_off[r]; e0 < a.row_off[r + 1]; e0 += 32) {
            uint64_t e = e0 + lane;
            bool keep = false;
            uint32_t c = DM_TERM_NONE;
            if (e < a.row_off[r + 1]) {
                c = a.map[a.term[e]];
                keep = c != DM_TERM_NONE && a.col_w[c] != 0.0;
            }
            unsigned m = __ballot_sync(0xffffffffu, keep);
            if (keep) {
                uint64_t q = p + __popc(m & ((1u << lane) - 1));
                a.out_col[q] = c;
                a.out_w[q] = dm_tf_weight(a.count[e], len, a.sublinear) * a.col_w[c];
                a.out_pos[q] = (uint32_t)q;
            }
            p += __popc(m);
        }
    }
}

/* Pass 3, warp per row: the sorted entries, divided by the row's norm (sum in column order). */
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) dm_w_norm_kernel(dm_w_args a)
{
    const size_t warp = ((size_t)blockIdx.x * BLOCK + threadIdx.x) >> 5;
    const size_t n_warps = ((size_t)gridDim.x * BLOCK) >> 5;
    const uint32_t lane = threadIdx.x & 31;
    for (size_t r = warp; r < a.n_rows; r += n_warps) {
        uint64_t b = a.out_off[r], e = a.out_off[r + 1];
        double norm = 1.0;
        if (a.l2 && e > b) {
            double ss = 0;
            for (uint64_t k = b + lane; k < e; k += 32) {
                double w = a.out_w[a.sorted_pos[k]];
                ss += w * w;
            }
            for (int o = 16; o > 0; o >>= 1) ss += __shfl_down_sync(0xffffffffu, ss, o);
            norm = sqrt(__shfl_sync(0xffffffffu, ss, 0));
        }
        for (uint64_t k = b + lane; k < e; k += 32) {
            a.final_col[k] = a.sorted_col[k];
            a.final_val[k] = (float)(a.out_w[a.sorted_pos[k]] / norm);
        }
    }
}

#endif
