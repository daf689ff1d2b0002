/* The CUDA backend of tfidf: extern "C" launchers of the per-document term-count tables (atomic
 * and no-atomic variants), the vocabulary / DF table (merge, lookup, hash-only lookup) and the
 * weights; the tuner's instances and tuning workloads of the kernels in tfidf_kernels.cuh.
 * Host arrays in and out (the contracts of tfidf/tfidf.h); device memory lives for one call,
 * except the count rows that dm_tf_count_hashes_cuda keeps for dm_tfidf_weigh_dev_cuda (dm_tf_dev).
 * Reference: the CPU backend (tfidf_cpu.c); Zhang & Mueller's GPU TF-IDF hash tables. */
#include <cub/cub.cuh>
#include <thrust/iterator/transform_iterator.h>

#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cuda_check.h"
#include "common/log.h"
#include "common/status.h"
#include "common/timer.h"
#include "common/tune/tune.h"
#include "common/tune/wl_cache.h"
#include "sorting/sorting.h"
#include "tfidf/tfidf.h"
#include "tfidf/tfidf_internal.h"
#include "tfidf/tfidf_kernels.cuh"
#include "tfidf/tfidf_tune.h"
#include "common/rng.h"

/* ------------------------------------------------------------------ small helpers */

/* Device buffers of one call, freed together. */
#define DM_MAX_BUFS 32
typedef struct dbufs {
    void *p[DM_MAX_BUFS];
    int n;
} dbufs;

static int dalloc(dbufs *b, void **out, size_t bytes)
{
    *out = NULL;
    if (b->n == DM_MAX_BUFS) return DM_ERR(DM_ERR_NOMEM, "tfidf cuda: too many buffers");
    int rc = dm_device_alloc(out, bytes ? bytes : 1);
    if (rc < 0) return DM_CUDA_STAGE_ERR(rc, "tfidf");
    b->p[b->n++] = *out;
    return DM_OK;
}

static void dfree_all(dbufs *b)
{
    for (int i = 0; i < b->n; i++) dm_device_free(b->p[i]);
    b->n = 0;
}

/* Large copies go through two page-locked staging buffers of the process (kept for its
 * lifetime, 2 x DM_STAGE_BYTES): a copy between the device and pageable memory is staged by the
 * driver at a fraction of the bus bandwidth (about 1.4 GB/s measured for D2H into freshly
 * allocated arrays, whose pages also fault one by one), while the pinned chunks move at full
 * bandwidth and the OpenMP threads copy (and first-touch) the pageable side in parallel, chunk k
 * on the host while chunk k + 1 is on the bus. A buffer is reused only after the event of its
 * last copy, so copies of several streams or calls may share the pair. */
#define DM_STAGE_BYTES ((size_t)16 << 20)
#define DM_STAGE_MIN ((size_t)1 << 20) /* smaller copies go directly */
static pthread_mutex_t g_stage_mu = PTHREAD_MUTEX_INITIALIZER;
static void *g_stage_buf[2];
static cudaEvent_t g_stage_ev[2];

/* The staging buffers are copied into and out of by dm_mem_copy_staged (common/alloc.h: with all
 * threads of every rank of a host copying, the copies starve the DMA into the other buffer). */
static int stage_init(void)
{
    for (int i = 0; i < 2; i++) {
        if (g_stage_buf[i]) continue;
        DM_CUDA_TRY(cudaEventCreateWithFlags(&g_stage_ev[i], cudaEventDisableTiming));
        int rc = dm_host_alloc_pinned(&g_stage_buf[i], DM_STAGE_BYTES);
        if (rc != DM_OK) {
            cudaEventDestroy(g_stage_ev[i]);
            g_stage_buf[i] = NULL;
            return DM_CUDA_STAGE_ERR(rc, "tfidf");
        }
    }
    return DM_OK;
}

static int up(void *d, const void *h, size_t bytes, cudaStream_t s)
{
    if (!bytes) return DM_OK;
    if (bytes < DM_STAGE_MIN) {
        DM_CUDA_TRY(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s));
        return DM_OK;
    }
    pthread_mutex_lock(&g_stage_mu);
    int rc = stage_init();
    for (size_t o = 0, i = 0; rc == DM_OK && o < bytes; o += DM_STAGE_BYTES, i++) {
        size_t k = bytes - o < DM_STAGE_BYTES ? bytes - o : DM_STAGE_BYTES;
        int b = (int)(i & 1);
        cudaError_t e = cudaEventSynchronize(g_stage_ev[b]); /* the buffer's previous copy has left it */
        if (e == cudaSuccess) {
            dm_mem_copy_staged(g_stage_buf[b], (const char *)h + o, k);
            e = cudaMemcpyAsync((char *)d + o, g_stage_buf[b], k, cudaMemcpyHostToDevice, s);
        }
        if (e == cudaSuccess) e = cudaEventRecord(g_stage_ev[b], s);
        if (e != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "tfidf cuda: staged upload: %s", cudaGetErrorString(e));
    }
    pthread_mutex_unlock(&g_stage_mu);
    return rc;
}

static int down(void *h, const void *d, size_t bytes, cudaStream_t s)
{
    if (!bytes) return DM_OK;
    if (bytes < DM_STAGE_MIN) {
        DM_CUDA_TRY(cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, s));
        DM_CUDA_TRY(cudaStreamSynchronize(s));
        return DM_OK;
    }
    pthread_mutex_lock(&g_stage_mu);
    int rc = stage_init();
    size_t n = (bytes + DM_STAGE_BYTES - 1) / DM_STAGE_BYTES;
    /* iteration i enqueues chunk i and then copies chunk i - 1 out of its buffer */
    for (size_t i = 0; rc == DM_OK && i <= n; i++) {
        cudaError_t e = cudaSuccess;
        if (i < n) {
            size_t o = i * DM_STAGE_BYTES, k = bytes - o < DM_STAGE_BYTES ? bytes - o : DM_STAGE_BYTES;
            int b = (int)(i & 1);
            e = cudaEventSynchronize(g_stage_ev[b]);
            if (e == cudaSuccess) e = cudaMemcpyAsync(g_stage_buf[b], (const char *)d + o, k, cudaMemcpyDeviceToHost, s);
            if (e == cudaSuccess) e = cudaEventRecord(g_stage_ev[b], s);
        }
        if (e == cudaSuccess && i > 0) {
            size_t o = (i - 1) * DM_STAGE_BYTES, k = bytes - o < DM_STAGE_BYTES ? bytes - o : DM_STAGE_BYTES;
            int b = (int)((i - 1) & 1);
            e = cudaEventSynchronize(g_stage_ev[b]);
            if (e == cudaSuccess) dm_mem_copy_staged((char *)h + o, g_stage_buf[b], k);
        }
        if (e != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "tfidf cuda: staged download: %s", cudaGetErrorString(e));
    }
    pthread_mutex_unlock(&g_stage_mu);
    return rc;
}

/* A device buffer kept across the chunks of one call, reallocated only when a chunk needs more
 * (with `extra` percent of headroom: the per-document tables grow on rebuilds). */
struct dgrow {
    void *p;
    size_t cap;
};

static int dgrow_need(dgrow *g, size_t bytes, int extra)
{
    if (bytes == 0) bytes = 1;
    if (g->p && g->cap >= bytes) return DM_OK;
    dm_device_free(g->p);
    g->p = NULL;
    g->cap = 0;
    size_t c = bytes + bytes / 100 * (size_t)extra;
    int rc = dm_device_alloc(&g->p, c);
    if (rc < 0) return DM_CUDA_STAGE_ERR(rc, "tfidf");
    g->cap = c;
    return DM_OK;
}

static void dgrow_free(dgrow *g, int n)
{
    for (int i = 0; i < n; i++) {
        dm_device_free(g[i].p);
        g[i].p = NULL;
        g[i].cap = 0;
    }
}

/* Stage timers (the breakdown of bench/tfidf and the run report): the stream is synchronised at
 * each boundary, so a stage's time is its own work, not the queue before it. The calls wait for
 * their downloads anyway; the extra synchronisations cost microseconds per chunk. */
static int stage(int rc, cudaStream_t s, const char *stop, const char *start)
{
    if (rc == DM_OK) {
        cudaError_t e = cudaStreamSynchronize(s);
        if (e != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "tfidf cuda: %s", cudaGetErrorString(e));
    }
    if (stop) dm_timer_stop(stop);
    if (start) dm_timer_start(start);
    return rc;
}

static unsigned grid_for(size_t threads, int block)
{
    size_t g = (threads + (size_t)block - 1) / (size_t)block;
    if (g < 1) g = 1;
    if (g > (1u << 20)) g = 1u << 20;
    return (unsigned)g;
}

/* Distinct terms sharing a hash with another one (the CPU tables' collision count). */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int hash_dups(uint64_t *out, const uint64_t *h, size_t n)
{
    *out = 0;
    if (n < 2) return DM_OK;
    uint64_t *c = (uint64_t *)dm_malloc(8 * n);
    if (!c) return DM_ERR_NOMEM;
    memcpy(c, h, 8 * n);
    qsort(c, n, 8, cmp_u64);
    for (size_t i = 1; i < n; i++) *out += c[i] == c[i - 1];
    dm_free(c);
    return DM_OK;
}

/* ------------------------------------------------------------------ instances */

/* Warp-per-item kernels: n = documents (or rows); threads = 32 n. */
template <int B, int R, int S>
static int launch_count_atomic(const void *args, size_t n, void *stream)
{
    if (n == 0) return DM_OK;
    dm_tf_count_atomic_kernel<B, R, S><<<grid_for(32 * n, B), B, 0, (cudaStream_t)stream>>>(*(const dm_tf_args *)args);
    DM_CUDA_LAUNCH_CHECK();
    return DM_OK;
}
template <int B, int R>
static int launch_count_noatomic(const void *args, size_t n, void *stream)
{
    if (n == 0) return DM_OK;
    dm_tf_count_noatomic_kernel<B, R><<<grid_for(32 * n, B), B, 0, (cudaStream_t)stream>>>(*(const dm_tf_args *)args);
    DM_CUDA_LAUNCH_CHECK();
    return DM_OK;
}
template <int B>
static int launch_header(const void *args, size_t n, void *stream)
{
    if (n == 0) return DM_OK;
    dm_tf_header_kernel<B><<<grid_for(32 * n, B), B, 0, (cudaStream_t)stream>>>(*(const dm_tf_compact_args *)args);
    DM_CUDA_LAUNCH_CHECK();
    return DM_OK;
}
template <int B>
static int launch_compact(const void *args, size_t n, void *stream)
{
    if (n == 0) return DM_OK;
    dm_tf_compact_kernel<B><<<grid_for(32 * n, B), B, 0, (cudaStream_t)stream>>>(*(const dm_tf_compact_args *)args);
    DM_CUDA_LAUNCH_CHECK();
    return DM_OK;
}
/* Thread-per-item kernels of the vocabulary table. */
#define DM_VT_LAUNCHER(name, kernel)                                                               \
    template <int B>                                                                               \
    static int name(const void *args, size_t n, void *stream)                                     \
    {                                                                                              \
        if (n == 0) return DM_OK;                                                                  \
        kernel<B><<<grid_for(n, B), B, 0, (cudaStream_t)stream>>>(*(const dm_vt_args *)args);      \
        DM_CUDA_LAUNCH_CHECK();                                                                    \
        return DM_OK;                                                                              \
    }
DM_VT_LAUNCHER(launch_vt_merge, dm_vt_merge_kernel)
DM_VT_LAUNCHER(launch_vt_build, dm_vt_build_kernel)
DM_VT_LAUNCHER(launch_vt_query, dm_vt_query_kernel)
DM_VT_LAUNCHER(launch_ht_build, dm_ht_build_kernel)
DM_VT_LAUNCHER(launch_ht_query, dm_ht_query_kernel)
#define DM_W_LAUNCHER(name, kernel)                                                                \
    template <int B>                                                                               \
    static int name(const void *args, size_t n, void *stream)                                     \
    {                                                                                              \
        if (n == 0) return DM_OK;                                                                  \
        kernel<B><<<grid_for(32 * n, B), B, 0, (cudaStream_t)stream>>>(*(const dm_w_args *)args);  \
        DM_CUDA_LAUNCH_CHECK();                                                                    \
        return DM_OK;                                                                              \
    }
DM_W_LAUNCHER(launch_w_len, dm_w_len_kernel)
DM_W_LAUNCHER(launch_w_fill, dm_w_fill_kernel)
DM_W_LAUNCHER(launch_w_norm, dm_w_norm_kernel)

#define DM_CA(B, R, S) {{B, R, S, DM_LAYOUT_NONE, 0}, launch_count_atomic<B, R, S>, (const void *)&dm_tf_count_atomic_kernel<B, R, S>, 0}
#define DM_CN(B, R) {{B, R, 0, DM_LAYOUT_NONE, 0}, launch_count_noatomic<B, R>, (const void *)&dm_tf_count_noatomic_kernel<B, R>, 0}
#define DM_I1(L, K, B) {{B, 1, 1, DM_LAYOUT_NONE, 0}, L<B>, (const void *)&K<B>, 0}

/* one warp per document; block x tokens per lane per step */
/* block x tokens per lane per step x consecutive/strided (warp-coalesced) */
static const dm_tune_instance g_count_atomic[] = {
    DM_CA(64, 1, 0),  DM_CA(64, 2, 0),  DM_CA(64, 4, 0),  DM_CA(128, 1, 0), DM_CA(128, 2, 0), DM_CA(128, 4, 0),
    DM_CA(256, 1, 0), DM_CA(256, 2, 0), DM_CA(256, 4, 0), DM_CA(64, 2, 1),  DM_CA(64, 4, 1),  DM_CA(128, 2, 1),
    DM_CA(128, 4, 1), DM_CA(256, 2, 1), DM_CA(256, 4, 1)};
static const dm_tune_instance g_count_noatomic[] = {DM_CN(64, 2),  DM_CN(64, 4),  DM_CN(64, 8),
                                                    DM_CN(128, 2), DM_CN(128, 4), DM_CN(128, 8),
                                                    DM_CN(256, 2), DM_CN(256, 4), DM_CN(256, 8)};
#define DM_N_CA ((int)(sizeof g_count_atomic / sizeof g_count_atomic[0]))
#define DM_N_CN ((int)(sizeof g_count_noatomic / sizeof g_count_noatomic[0]))
static const dm_tune_instance g_header[] = {DM_I1(launch_header, dm_tf_header_kernel, 128),
                                            DM_I1(launch_header, dm_tf_header_kernel, 256)};
static const dm_tune_instance g_compact[] = {DM_I1(launch_compact, dm_tf_compact_kernel, 128),
                                             DM_I1(launch_compact, dm_tf_compact_kernel, 256)};
static const dm_tune_instance g_vt_merge[] = {DM_I1(launch_vt_merge, dm_vt_merge_kernel, 128),
                                              DM_I1(launch_vt_merge, dm_vt_merge_kernel, 256),
                                              DM_I1(launch_vt_merge, dm_vt_merge_kernel, 512)};
static const dm_tune_instance g_vt_build[] = {DM_I1(launch_vt_build, dm_vt_build_kernel, 256)};
static const dm_tune_instance g_vt_query[] = {DM_I1(launch_vt_query, dm_vt_query_kernel, 128),
                                              DM_I1(launch_vt_query, dm_vt_query_kernel, 256),
                                              DM_I1(launch_vt_query, dm_vt_query_kernel, 512)};
static const dm_tune_instance g_ht_build[] = {DM_I1(launch_ht_build, dm_ht_build_kernel, 256)};
static const dm_tune_instance g_ht_query[] = {DM_I1(launch_ht_query, dm_ht_query_kernel, 128),
                                              DM_I1(launch_ht_query, dm_ht_query_kernel, 256),
                                              DM_I1(launch_ht_query, dm_ht_query_kernel, 512)};
static const dm_tune_instance g_w_len[] = {DM_I1(launch_w_len, dm_w_len_kernel, 128),
                                           DM_I1(launch_w_len, dm_w_len_kernel, 256)};
static const dm_tune_instance g_w_fill[] = {DM_I1(launch_w_fill, dm_w_fill_kernel, 128),
                                            DM_I1(launch_w_fill, dm_w_fill_kernel, 256)};
static const dm_tune_instance g_w_norm[] = {DM_I1(launch_w_norm, dm_w_norm_kernel, 128),
                                            DM_I1(launch_w_norm, dm_w_norm_kernel, 256)};

static int g_force_count = -1; /* tests: instance index of the chosen variant, -1 = tuner */

struct dm_widen_u32 {
    __host__ __device__ uint64_t operator()(uint32_t x) const { return (uint64_t)x; }
};

/* ------------------------------------------------------------------ per-document tables */

/* Document tables: dm_tf_bcap slots per bucket (tfidf_tables.h). */
static int table_offsets(uint64_t *tab_off, const uint64_t *tok_off, size_t n_docs, int slack, const uint8_t *grow)
{
    tab_off[0] = 0;
    for (size_t d = 0; d < n_docs; d++) {
        uint64_t bcap = dm_tf_bcap(tok_off[d + 1] - tok_off[d], slack, grow[d]);
        if (bcap > UINT32_MAX / 2) return DM_ERR(DM_ERR_UNSUPPORTED, "tf table: document %zu is too long", d);
        tab_off[d + 1] = tab_off[d] + DM_TF_BUCKETS * bcap;
    }
    return DM_OK;
}

struct tf_run {
    cudaStream_t s;
    size_t n_docs;
    uint32_t n_terms;
    uint64_t *d_tok_off, *d_tab_off;
    uint32_t *d_tok, *d_key, *d_cnt, *d_over, *d_bad;
    uint64_t slots;
};

/* Fills the document tables with the given instance (tables cleared first). */
static int tf_fill(tf_run *r, const dm_tune_instance *inst)
{
    DM_CUDA_TRY(cudaMemsetAsync(r->d_key, 0xff, 4 * r->slots, r->s));
    DM_CUDA_TRY(cudaMemsetAsync(r->d_cnt, 0, 4 * r->slots, r->s));
    DM_CUDA_TRY(cudaMemsetAsync(r->d_over, 0, 4 * (r->n_docs ? r->n_docs : 1), r->s));
    DM_CUDA_TRY(cudaMemsetAsync(r->d_bad, 0, 4, r->s));
    dm_tf_args a = {r->d_tok_off, r->d_tok, r->n_docs, r->n_terms, r->d_tab_off, r->d_key, r->d_cnt, r->d_over, r->d_bad};
    return inst->launch(&a, r->n_docs, r->s);
}

static const dm_tune_kernel *count_kernel(int variant);

static const dm_tune_instance *count_instance(int variant, size_t n_tok)
{
    const dm_tune_kernel *k = count_kernel(variant);
    if (g_force_count >= 0) return g_force_count < k->n_instances ? &k->instances[g_force_count] : NULL;
    return dm_tune_select(k, n_tok);
}

/* Device buffers of dm_tf_count_cuda, kept across its chunks. */
enum { TW_TOK_OFF, TW_TOK, TW_TAB_OFF, TW_OVER, TW_BAD, TW_KEY, TW_CNT, TW_HEADER, TW_SCAN, TW_TERM, TW_COUNT,
       TW_STERM, TW_SCOUNT, TW_ROW_OFF, TW_TEMP, TW_TEMP2, TW_HASH, TW_N };

/* Where the tokens of a count call come from: local term indices on the host (tok), or token
 * hashes on the host (hash), mapped on the device through the hash-only table of the terms
 * (ht: built, its query arguments still to be set). */
struct tf_src {
    const uint32_t *tok;
    const uint64_t *hash;
    int hash_dev; /* hash is a device address (dm_tf_count_options.hashes_on_device) */
    dm_vt_args ht;
    const dm_termlist *terms;
};

/* Count rows kept on the device (dm_tf_dev of tfidf.h): one piece per count chunk, each with
 * its own row offsets from 0. */
struct dm_tf_piece {
    size_t n_rows;
    uint64_t nnz;
    uint64_t *row_off; /* n_rows + 1 */
    uint32_t *term, *count;
};
struct dm_tf_dev {
    size_t n_pieces, cap;
    dm_tf_piece *p;
    size_t n_rows, n_terms;
};

extern "C" void dm_tf_dev_free(dm_tf_dev *d)
{
    if (!d) return;
    for (size_t i = 0; i < d->n_pieces; i++) {
        dm_device_free(d->p[i].row_off);
        dm_device_free(d->p[i].term);
        dm_device_free(d->p[i].count);
    }
    dm_free(d->p);
    dm_free(d);
}

/* Moves a chunk's sorted rows into a new piece of d (exact-size copies on the device). */
static int tf_dev_keep(dm_tf_dev *d, size_t n_rows, uint64_t nnz, const uint64_t *d_row_off, const uint32_t *d_term,
                       const uint32_t *d_count, cudaStream_t s)
{
    if (d->n_pieces == d->cap) {
        size_t c = d->cap ? 2 * d->cap : 8;
        dm_tf_piece *p = (dm_tf_piece *)dm_realloc(d->p, c * sizeof *p);
        if (!p) return DM_ERR_NOMEM;
        d->p = p;
        d->cap = c;
    }
    dm_tf_piece *q = &d->p[d->n_pieces];
    memset(q, 0, sizeof *q);
    d->n_pieces++; /* freed with d whatever happens next */
    q->n_rows = n_rows;
    q->nnz = nnz;
    int rc = dm_device_alloc((void **)&q->row_off, 8 * (n_rows + 1));
    if (rc >= 0) rc = dm_device_alloc((void **)&q->term, 4 * (nnz ? nnz : 1));
    if (rc >= 0) rc = dm_device_alloc((void **)&q->count, 4 * (nnz ? nnz : 1));
    if (rc < 0) return DM_CUDA_STAGE_ERR(rc, "tfidf");
    DM_CUDA_TRY(cudaMemcpyAsync(q->row_off, d_row_off, 8 * (n_rows + 1), cudaMemcpyDeviceToDevice, s));
    DM_CUDA_TRY(cudaMemcpyAsync(q->term, d_term, 4 * nnz, cudaMemcpyDeviceToDevice, s));
    DM_CUDA_TRY(cudaMemcpyAsync(q->count, d_count, 4 * nnz, cudaMemcpyDeviceToDevice, s));
    d->n_rows += n_rows;
    return DM_OK;
}

/* Hash i of a chunk's input (host or device memory) for an error message. */
static uint64_t tf_hash_at(const tf_src *src, const uint64_t *hash_in, uint64_t i, cudaStream_t s)
{
    uint64_t h = 0;
    if (!src->hash_dev) return hash_in[i];
    if (down(&h, hash_in + i, 8, s) != DM_OK) return 0;
    return h;
}

/* Hash mode: the chunk's hashes (on the device) to local term indices (d_tok). A hash that
 * several terms share is ambiguous (the lookup's error). */
static int tf_map_chunk(const tf_src *src, const uint64_t *hash_in, const uint64_t *d_hash, uint32_t *d_tok,
                        uint64_t n_tok, cudaStream_t s)
{
    dm_vt_args a = src->ht;
    a.q_hash = d_hash;
    a.n_q = n_tok;
    a.ids_out = d_tok;
    DM_TRY(dm_tune_select(dm_tune_kernel_find("tfidf.hash_query"), n_tok)->launch(&a, n_tok, s));
    unsigned long long amb = ~0ull;
    DM_TRY(down(&amb, a.ambiguous_q, 8, s));
    if (amb != ~0ull) return dm_tfidf_ambiguous_hash(src->terms, tf_hash_at(src, hash_in, amb - 1, s));
    return DM_OK;
}

/* Hash mode, after the count kernel flagged a token: the first token whose hash is not a term. */
static int tf_missing_error(const tf_src *src, const uint64_t *hash_in, uint64_t tok0, const uint32_t *d_tok,
                            uint64_t n_tok, cudaStream_t s)
{
    uint32_t *ids = (uint32_t *)dm_malloc(4 * (n_tok ? n_tok : 1));
    if (!ids) return DM_ERR_NOMEM;
    int rc = down(ids, d_tok, 4 * n_tok, s);
    size_t miss = rc == DM_OK ? dm_tfidf_first_none(ids, n_tok) : SIZE_MAX;
    dm_free(ids);
    if (rc != DM_OK) return rc;
    if (miss == SIZE_MAX) return DM_ERR(DM_ERR_CUDA, "dm_tf_count_hashes_cuda: a token was flagged but none is missing");
    return dm_tfidf_missing_hash(tok0 + miss, tf_hash_at(src, hash_in, miss, s));
}

/* Host arrays of one call, sized for its whole document range (a chunk uses a prefix). */
struct tf_host {
    uint64_t *tok_off, *tab_off;
    uint32_t *over;
    uint8_t *grow;
};

/* One chunk of documents (tok_off_in[0] may be non-zero: its tokens start there in src).
 * Appends its rows to out: row_off[0 .. n_docs] (row_off[0] = the entries before the chunk,
 * already set) and the entries at term/count + row_off[0], or, with keep, to a new piece of keep
 * (out->term / count unused). */
static int tf_count_chunk(dm_tf_counts *out, dm_tf_dev *keep, const uint64_t *tok_off_in, const tf_src *src,
                          size_t n_docs, uint32_t n_terms, dm_tf_count_options *opt, dgrow *w, tf_host *hb)
{
    /* rebase the offsets of the chunk to 0 */
    uint64_t *tok_off = hb->tok_off, *tab_off = hb->tab_off, *row_off = out->row_off;
    uint32_t *over = hb->over;
    uint8_t *grow = hb->grow;
    dm_tfidf_rebase(tok_off, tok_off_in, n_docs + 1, tok_off_in[0]);
    memset(grow, 0, n_docs ? n_docs : 1);
    const uint64_t n_tok = tok_off[n_docs], entry_base = row_off[0], tok0 = tok_off_in[0];
    int slack = opt->bucket_slack > 0 ? opt->bucket_slack : 2;
    tf_run r;
    memset(&r, 0, sizeof r);
    r.s = (cudaStream_t)opt->stream;
    r.n_docs = n_docs;
    r.n_terms = n_terms;
    int rc = dgrow_need(&w[TW_TOK_OFF], 8 * (n_docs + 1), 0);
    if (rc == DM_OK) rc = dgrow_need(&w[TW_TOK], 4 * n_tok, 0);
    if (rc == DM_OK) rc = dgrow_need(&w[TW_TAB_OFF], 8 * (n_docs + 1), 0);
    if (rc == DM_OK) rc = dgrow_need(&w[TW_OVER], 4 * (n_docs ? n_docs : 1), 0);
    if (rc == DM_OK) rc = dgrow_need(&w[TW_BAD], 4, 0);
    if (rc == DM_OK && src->hash && !src->hash_dev) rc = dgrow_need(&w[TW_HASH], 8 * n_tok, 0);
    r.d_tok_off = (uint64_t *)w[TW_TOK_OFF].p;
    r.d_tok = (uint32_t *)w[TW_TOK].p;
    r.d_tab_off = (uint64_t *)w[TW_TAB_OFF].p;
    r.d_over = (uint32_t *)w[TW_OVER].p;
    r.d_bad = (uint32_t *)w[TW_BAD].p;
    dm_timer_start("tfidf.count.h2d");
    if (rc == DM_OK) rc = up(r.d_tok_off, tok_off, 8 * (n_docs + 1), r.s);
    if (rc == DM_OK && src->tok) rc = up(r.d_tok, src->tok + tok0, 4 * n_tok, r.s);
    if (rc == DM_OK && src->hash && !src->hash_dev) rc = up(w[TW_HASH].p, src->hash + tok0, 8 * n_tok, r.s);
    if (src->hash) {
        /* hashes already on the device are read in place */
        const uint64_t *d_hash = src->hash_dev ? src->hash + tok0 : (const uint64_t *)w[TW_HASH].p;
        rc = stage(rc, r.s, "tfidf.count.h2d", "tfidf.count.map");
        if (rc == DM_OK) rc = tf_map_chunk(src, src->hash + tok0, d_hash, r.d_tok, n_tok, r.s);
        rc = stage(rc, r.s, "tfidf.count.map", "tfidf.count.tables");
    } else {
        rc = stage(rc, r.s, "tfidf.count.h2d", "tfidf.count.tables");
    }
    const dm_tune_instance *inst = rc == DM_OK ? count_instance(opt->variant, (size_t)n_tok) : NULL;
    if (rc == DM_OK && !inst) rc = DM_ERR(DM_ERR_INVALID_ARG, "dm_tf_count_cuda: the forced instance does not exist for %s", dm_tf_variant_name(opt->variant));
    /* count; documents whose table overflowed get larger buckets and everything is rebuilt (the
     * table buffers keep half their size of headroom, so a rebuild seldom reallocates) */
    for (int attempt = 0; rc == DM_OK; attempt++) {
        rc = table_offsets(tab_off, tok_off, n_docs, slack, grow);
        r.slots = tab_off[n_docs];
        if (rc == DM_OK) rc = dgrow_need(&w[TW_KEY], 4 * r.slots, 50);
        if (rc == DM_OK) rc = dgrow_need(&w[TW_CNT], 4 * r.slots, 50);
        r.d_key = (uint32_t *)w[TW_KEY].p;
        r.d_cnt = (uint32_t *)w[TW_CNT].p;
        if (rc == DM_OK) rc = up(r.d_tab_off, tab_off, 8 * (n_docs + 1), r.s);
        if (rc == DM_OK) rc = tf_fill(&r, inst);
        uint32_t bad = 0;
        if (rc == DM_OK) rc = down(over, r.d_over, 4 * n_docs, r.s);
        if (rc == DM_OK) rc = down(&bad, r.d_bad, 4, r.s);
        if (rc == DM_OK && bad && src->hash) rc = tf_missing_error(src, src->hash + tok0, tok0, r.d_tok, n_tok, r.s);
        if (rc == DM_OK && bad) rc = DM_ERR(DM_ERR_INVALID_ARG, "dm_tf_count_cuda: a token names a term >= %u", n_terms);
        if (rc != DM_OK) break;
        int any = 0;
        for (size_t d = 0; d < n_docs; d++)
            if (over[d]) {
                any = 1;
                grow[d]++;
            }
        if (!any) break;
        opt->rebuilds++;
        if (attempt > 40) rc = DM_ERR(DM_ERR_NOMEM, "dm_tf_count_cuda: tables keep overflowing");
    }
    rc = stage(rc, r.s, "tfidf.count.tables", "tfidf.count.compact");
    /* compaction: header, scan, entries; then each row term-sorted */
    if (rc == DM_OK) rc = dgrow_need(&w[TW_HEADER], 4 * DM_TF_BUCKETS * n_docs, 0);
    if (rc == DM_OK) rc = dgrow_need(&w[TW_SCAN], 8 * DM_TF_BUCKETS * n_docs, 0);
    if (rc == DM_OK) rc = dgrow_need(&w[TW_TERM], 4 * n_tok, 0);
    if (rc == DM_OK) rc = dgrow_need(&w[TW_COUNT], 4 * n_tok, 0);
    if (rc == DM_OK) rc = dgrow_need(&w[TW_STERM], 4 * n_tok, 0);
    if (rc == DM_OK) rc = dgrow_need(&w[TW_SCOUNT], 4 * n_tok, 0);
    if (rc == DM_OK) rc = dgrow_need(&w[TW_ROW_OFF], 8 * (n_docs + 1), 0);
    uint32_t *d_header = (uint32_t *)w[TW_HEADER].p, *d_term = (uint32_t *)w[TW_TERM].p;
    uint32_t *d_count = (uint32_t *)w[TW_COUNT].p, *d_sterm = (uint32_t *)w[TW_STERM].p;
    uint32_t *d_scount = (uint32_t *)w[TW_SCOUNT].p;
    uint64_t *d_scan = (uint64_t *)w[TW_SCAN].p, *d_row_off = (uint64_t *)w[TW_ROW_OFF].p;
    dm_tf_compact_args ca = {n_docs, r.d_tab_off, r.d_key, r.d_cnt, d_header, d_scan, d_term, d_count, d_row_off};
    if (rc == DM_OK && n_docs > 0) {
        const dm_tune_kernel *kh = dm_tune_kernel_find("tfidf.tf_header");
        const dm_tune_kernel *kc = dm_tune_kernel_find("tfidf.tf_compact");
        rc = dm_tune_select(kh, n_docs)->launch(&ca, n_docs, r.s);
        auto wide = thrust::make_transform_iterator(d_header, dm_widen_u32());
        size_t tb = 0;
        if (rc == DM_OK && cub::DeviceScan::ExclusiveSum(NULL, tb, wide, d_scan, DM_TF_BUCKETS * n_docs, r.s) != cudaSuccess)
            rc = DM_ERR(DM_ERR_CUDA, "tf compaction: scan size query failed");
        if (rc == DM_OK) rc = dgrow_need(&w[TW_TEMP], tb, 0);
        if (rc == DM_OK && cub::DeviceScan::ExclusiveSum(w[TW_TEMP].p, tb, wide, d_scan, DM_TF_BUCKETS * n_docs, r.s) != cudaSuccess)
            rc = DM_ERR(DM_ERR_CUDA, "tf compaction: scan failed");
        if (rc == DM_OK) rc = dm_tune_select(kc, n_docs)->launch(&ca, n_docs, r.s);
        if (rc == DM_OK) rc = down(row_off, d_row_off, 8 * (n_docs + 1), r.s);
    } else if (rc == DM_OK) {
        row_off[0] = 0;
    }
    rc = stage(rc, r.s, "tfidf.count.compact", "tfidf.count.sort");
    uint64_t nnz = rc == DM_OK ? row_off[n_docs] : 0;
    if (rc == DM_OK && nnz > n_tok) rc = DM_ERR(DM_ERR_CUDA, "tf compaction: %" PRIu64 " entries from %" PRIu64 " tokens", nnz, n_tok);
    if (rc == DM_OK && n_docs > 0) {
        size_t tb = 0;
        rc = dm_segsort_pairs_u32_cuda(NULL, &tb, d_sterm, d_scount, d_term, d_count, nnz, d_row_off, n_docs, r.s);
        if (rc == DM_OK) rc = dgrow_need(&w[TW_TEMP2], tb, 0);
        if (rc == DM_OK)
            rc = dm_segsort_pairs_u32_cuda(w[TW_TEMP2].p, &tb, d_sterm, d_scount, d_term, d_count, nnz, d_row_off,
                                           n_docs, r.s);
    }
    if (keep) {
        if (rc == DM_OK) rc = tf_dev_keep(keep, n_docs, nnz, d_row_off, d_sterm, d_scount, r.s);
        rc = stage(rc, r.s, "tfidf.count.sort", "tfidf.count.d2h");
    } else {
        rc = stage(rc, r.s, "tfidf.count.sort", "tfidf.count.d2h");
        if (rc == DM_OK) rc = down(out->term + entry_base, d_sterm, 4 * nnz, r.s);
        if (rc == DM_OK) rc = down(out->count + entry_base, d_scount, 4 * nnz, r.s);
    }
    if (rc == DM_OK && entry_base) dm_tfidf_shift(row_off, n_docs + 1, entry_base);
    rc = stage(rc, r.s, "tfidf.count.d2h", NULL);
    return rc;
}

/* Tokens per chunk of documents: bounds the device memory of one call (about 40 bytes a token).
 * Tests make it small (dm_tfidf_cuda_set_chunks). */
static uint64_t g_chunk_tokens = (uint64_t)1 << 26;
#define DM_TF_CHUNK_TOKENS g_chunk_tokens

/* The chunk loop of both count entry points: chunks of whole documents, rows appended in place
 * (out->term / count: at most one entry per token, trimmed at the end; untouched pages cost
 * nothing), or kept on the device (keep: out gets row_off only). */
static int count_run(dm_tf_counts *out, dm_tf_dev *keep, const uint64_t *tok_off, const tf_src *src, size_t n_docs,
                     uint32_t n_terms, dm_tf_count_options *opt)
{
    uint64_t nnz_cap = keep ? 0 : tok_off[n_docs] - tok_off[0];
    dgrow w[TW_N];
    memset(w, 0, sizeof w);
    tf_host hb;
    hb.tok_off = (uint64_t *)dm_malloc(8 * (n_docs + 1));
    hb.tab_off = (uint64_t *)dm_malloc(8 * (n_docs + 1));
    hb.over = (uint32_t *)dm_malloc(4 * (n_docs ? n_docs : 1));
    hb.grow = (uint8_t *)dm_malloc(n_docs ? n_docs : 1);
    out->row_off = (uint64_t *)dm_malloc(8 * (n_docs + 1));
    if (!keep) {
        out->term = (uint32_t *)dm_malloc(4 * (nnz_cap ? nnz_cap : 1));
        out->count = (uint32_t *)dm_malloc(4 * (nnz_cap ? nnz_cap : 1));
    }
    int rc = out->row_off && (keep || (out->term && out->count)) && hb.tok_off && hb.tab_off && hb.over && hb.grow
                 ? DM_OK
                 : DM_ERR_NOMEM;
    if (rc == DM_OK) out->row_off[0] = 0;
    if (rc == DM_OK && n_docs == 0 && !keep) rc = tf_count_chunk(out, NULL, tok_off, src, 0, n_terms, opt, w, &hb);
    for (size_t d0 = 0; rc == DM_OK && d0 < n_docs;) {
        size_t d1 = d0 + 1;
        while (d1 < n_docs && tok_off[d1 + 1] - tok_off[d0] <= DM_TF_CHUNK_TOKENS) d1++;
        dm_tf_counts c = {d1 - d0, out->row_off + d0, out->term, out->count};
        rc = tf_count_chunk(&c, keep, tok_off + d0, src, d1 - d0, n_terms, opt, w, &hb);
        d0 = d1;
    }
    dgrow_free(w, TW_N);
    dm_free(hb.tok_off);
    dm_free(hb.tab_off);
    dm_free(hb.over);
    dm_free(hb.grow);
    out->n_rows = n_docs;
    if (rc == DM_OK && !keep) {
        uint64_t nnz = out->row_off[n_docs];
        uint32_t *t = (uint32_t *)dm_realloc(out->term, 4 * (nnz ? nnz : 1));
        if (t) out->term = t;
        uint32_t *c = (uint32_t *)dm_realloc(out->count, 4 * (nnz ? nnz : 1));
        if (c) out->count = c;
    }
    if (rc != DM_OK) dm_tf_counts_free(out);
    return rc;
}

extern "C" int dm_tf_count_cuda(dm_tf_counts *out, const uint64_t *tok_off, const uint32_t *tok, size_t n_docs,
                                uint32_t n_terms, dm_tf_count_options *opt)
{
    if (!out || !tok_off || !opt || (!tok && tok_off[n_docs] > 0))
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_tf_count_cuda: NULL argument");
    if (opt->variant != DM_TF_ATOMIC && opt->variant != DM_TF_NOATOMIC)
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_tf_count_cuda: unknown variant %d", opt->variant);
    memset(out, 0, sizeof *out);
    DM_TRY(dm_tfidf_tune_register());
    static const uint32_t none = 0;
    tf_src src;
    memset(&src, 0, sizeof src);
    src.tok = tok ? tok : &none;
    return count_run(out, NULL, tok_off, &src, n_docs, n_terms, opt);
}

/* ------------------------------------------------------------------ vocabulary table */

static size_t pow2_at_least(size_t n)
{
    size_t c = 2;
    while (c < n) c *= 2;
    return c;
}

struct vt_dev {
    uint64_t *hash, *off, *val;
    char *bytes;
};

static int termlist_up(dbufs *b, vt_dev *d, const dm_termlist *l, int with_val, cudaStream_t s)
{
    memset(d, 0, sizeof *d);
    uint64_t nb = l->n ? l->off[l->n] : 0;
    DM_TRY(dalloc(b, (void **)&d->hash, 8 * l->n));
    DM_TRY(dalloc(b, (void **)&d->off, 8 * (l->n + 1)));
    DM_TRY(dalloc(b, (void **)&d->bytes, nb));
    DM_TRY(up(d->hash, l->hash, 8 * l->n, s));
    if (l->n) DM_TRY(up(d->off, l->off, 8 * (l->n + 1), s));
    else DM_CUDA_TRY(cudaMemsetAsync(d->off, 0, 8, s));
    DM_TRY(up(d->bytes, l->bytes, nb, s));
    if (with_val && l->val) {
        DM_TRY(dalloc(b, (void **)&d->val, 8 * l->n));
        DM_TRY(up(d->val, l->val, 8 * l->n, s));
    }
    return DM_OK;
}

/* A table of cap slots: key, ident, optional sum/first/amb, counters. */
struct vt_table {
    uint64_t cap;
    uint64_t *key, *sum;
    uint32_t *ident, *first, *amb, *full, *dup;
    unsigned long long *used, *ambq;
};

static int vt_alloc(dbufs *b, vt_table *t, uint64_t cap, int merge, int hash_only, cudaStream_t s)
{
    memset(t, 0, sizeof *t);
    t->cap = cap;
    DM_TRY(dalloc(b, (void **)&t->key, 8 * cap));
    DM_TRY(dalloc(b, (void **)&t->ident, 4 * cap));
    DM_TRY(dalloc(b, (void **)&t->full, 4));
    DM_TRY(dalloc(b, (void **)&t->dup, 4));
    DM_TRY(dalloc(b, (void **)&t->used, 8));
    DM_TRY(dalloc(b, (void **)&t->ambq, 8));
    DM_CUDA_TRY(cudaMemsetAsync(t->ident, 0, 4 * cap, s));
    DM_CUDA_TRY(cudaMemsetAsync(t->full, 0, 4, s));
    DM_CUDA_TRY(cudaMemsetAsync(t->dup, 0, 4, s));
    DM_CUDA_TRY(cudaMemsetAsync(t->used, 0, 8, s));
    DM_CUDA_TRY(cudaMemsetAsync(t->ambq, 0xff, 8, s));
    if (merge) {
        DM_TRY(dalloc(b, (void **)&t->sum, 8 * cap));
        DM_TRY(dalloc(b, (void **)&t->first, 4 * cap));
        DM_CUDA_TRY(cudaMemsetAsync(t->sum, 0, 8 * cap, s));
        DM_CUDA_TRY(cudaMemsetAsync(t->first, 0xff, 4 * cap, s));
    }
    if (hash_only) {
        DM_TRY(dalloc(b, (void **)&t->amb, 4 * cap));
        DM_CUDA_TRY(cudaMemsetAsync(t->amb, 0, 4 * cap, s));
    }
    return DM_OK;
}

static dm_vt_args vt_args(const vt_table *t)
{
    dm_vt_args a;
    memset(&a, 0, sizeof a);
    a.cap = t->cap;
    a.key = t->key;
    a.ident = t->ident;
    a.sum = t->sum;
    a.first = t->first;
    a.amb = t->amb;
    a.used = t->used;
    a.full = t->full;
    a.dup = t->dup;
    a.ambiguous_q = t->ambq;
    return a;
}

extern "C" int dm_vocab_merge_cuda(dm_termlist *out, const dm_termlist *in, dm_vocab_table_options *opt)
{
    if (!out || !in || !opt) return DM_ERR(DM_ERR_INVALID_ARG, "dm_vocab_merge_cuda: NULL argument");
    memset(out, 0, sizeof *out);
    DM_TRY(dm_tfidf_tune_register());
    if (in->n >= UINT32_MAX) return DM_ERR(DM_ERR_UNSUPPORTED, "vocabulary merge: too many terms");
    if (in->n == 0) return dm_termlist_alloc(out, 0, 0, 1);
    cudaStream_t s = (cudaStream_t)opt->stream;
    dbufs inb = {{0}, 0}, tb = {{0}, 0};
    vt_dev d;
    int rc = termlist_up(&inb, &d, in, 1, s);
    uint64_t cap = pow2_at_least(opt->initial_cap ? opt->initial_cap : 2 * in->n + 2);
    vt_table t;
    const dm_tune_kernel *k = dm_tune_kernel_find("tfidf.vocab_merge");
    while (rc == DM_OK) {
        dfree_all(&tb);
        rc = vt_alloc(&tb, &t, cap, 1, 0, s);
        dm_vt_args a = vt_args(&t);
        a.hash = d.hash;
        a.off = d.off;
        a.bytes = d.bytes;
        a.val = d.val;
        a.n = in->n;
        if (rc == DM_OK) rc = dm_tune_select(k, in->n)->launch(&a, in->n, s);
        uint32_t full = 0;
        if (rc == DM_OK) rc = down(&full, t.full, 4, s);
        if (rc != DM_OK || !full) break;
        cap *= 2;
        opt->rebuilds++;
    }
    /* distinct terms in order of first occurrence: slot of each first index */
    uint32_t *ident = NULL, *first = NULL, *slot_of = NULL;
    uint64_t *sum = NULL;
    if (rc == DM_OK) {
        ident = (uint32_t *)dm_malloc(4 * cap);
        first = (uint32_t *)dm_malloc(4 * cap);
        sum = (uint64_t *)dm_malloc(8 * cap);
        slot_of = (uint32_t *)dm_malloc(4 * in->n);
        if (!ident || !first || !sum || !slot_of) rc = DM_ERR_NOMEM;
    }
    if (rc == DM_OK) rc = down(ident, t.ident, 4 * cap, s);
    if (rc == DM_OK) rc = down(first, t.first, 4 * cap, s);
    if (rc == DM_OK) rc = down(sum, t.sum, 8 * cap, s);
    dfree_all(&tb);
    dfree_all(&inb);
    if (rc == DM_OK) {
        size_t nd = 0;
        uint64_t bytes = 0;
        for (size_t i = 0; i < in->n; i++) slot_of[i] = UINT32_MAX;
        for (uint64_t sl = 0; sl < cap; sl++)
            if (ident[sl]) {
                slot_of[first[sl]] = (uint32_t)sl;
                nd++;
                bytes += dm_termlist_len(in, first[sl]);
            }
        rc = dm_termlist_alloc(out, nd, bytes, 1);
        size_t k2 = 0;
        for (size_t i = 0; rc == DM_OK && i < in->n; i++) {
            if (slot_of[i] == UINT32_MAX) continue;
            size_t len = dm_termlist_len(in, i);
            out->hash[k2] = in->hash[i];
            out->val[k2] = sum[slot_of[i]];
            memcpy(out->bytes + out->off[k2], dm_termlist_bytes(in, i), len);
            out->off[k2 + 1] = out->off[k2] + len;
            k2++;
        }
        uint64_t dups = 0;
        if (rc == DM_OK) rc = hash_dups(&dups, out->hash, out->n);
        opt->collisions += dups;
    }
    dm_free(ident);
    dm_free(first);
    dm_free(sum);
    dm_free(slot_of);
    if (rc != DM_OK) dm_termlist_free(out);
    return rc;
}

extern "C" int dm_vocab_lookup_cuda(uint32_t *ids_out, const dm_termlist *vocab, const dm_termlist *queries,
                                    dm_vocab_table_options *opt)
{
    if (!vocab || !queries || !opt || (!ids_out && queries->n))
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_vocab_lookup_cuda: NULL argument");
    DM_TRY(dm_tfidf_tune_register());
    if (vocab->n >= UINT32_MAX) return DM_ERR(DM_ERR_UNSUPPORTED, "vocabulary lookup: too many terms");
    cudaStream_t s = (cudaStream_t)opt->stream;
    dbufs inb = {{0}, 0}, tb = {{0}, 0};
    vt_dev v, q;
    int rc = termlist_up(&inb, &v, vocab, 0, s);
    if (rc == DM_OK) rc = termlist_up(&inb, &q, queries, 0, s);
    uint32_t *d_ids = NULL;
    if (rc == DM_OK) rc = dalloc(&inb, (void **)&d_ids, 4 * queries->n);
    uint64_t cap = pow2_at_least(opt->initial_cap ? opt->initial_cap : 2 * vocab->n + 2);
    vt_table t;
    const dm_tune_kernel *kb = dm_tune_kernel_find("tfidf.vocab_build"), *kq = dm_tune_kernel_find("tfidf.vocab_query");
    dm_vt_args a;
    while (rc == DM_OK) {
        dfree_all(&tb);
        rc = vt_alloc(&tb, &t, cap, 0, 0, s);
        a = vt_args(&t);
        a.t_hash = v.hash;
        a.t_off = v.off;
        a.t_bytes = v.bytes;
        a.n = vocab->n;
        if (rc == DM_OK) rc = dm_tune_select(kb, vocab->n)->launch(&a, vocab->n, s);
        uint32_t full = 0, dup = 0;
        if (rc == DM_OK) rc = down(&full, t.full, 4, s);
        if (rc == DM_OK) rc = down(&dup, t.dup, 4, s);
        if (rc == DM_OK && dup) rc = DM_ERR(DM_ERR_INVALID_ARG, "vocabulary lookup: term %u repeats an earlier term", dup - 1);
        if (rc != DM_OK || !full) break;
        cap *= 2;
        opt->rebuilds++;
    }
    if (rc == DM_OK) {
        a.q_hash = q.hash;
        a.q_off = q.off;
        a.q_bytes = q.bytes;
        a.n_q = queries->n;
        a.ids_out = d_ids;
        rc = dm_tune_select(kq, queries->n)->launch(&a, queries->n, s);
    }
    if (rc == DM_OK) rc = down(ids_out, d_ids, 4 * queries->n, s);
    uint64_t dups = 0;
    if (rc == DM_OK) rc = hash_dups(&dups, vocab->hash, vocab->n);
    opt->collisions += dups;
    dfree_all(&tb);
    dfree_all(&inb);
    return rc;
}

/* The hash-only table of n vocabulary hashes (d_vh on the device), grown until it fits; *a gets
 * its arguments (t_hash, table fields). */
static int ht_build(dbufs *tb, vt_table *t, dm_vt_args *a, const uint64_t *d_vh, size_t n, dm_vocab_table_options *opt,
                    cudaStream_t s)
{
    uint64_t cap = pow2_at_least(opt->initial_cap ? opt->initial_cap : 2 * n + 2);
    const dm_tune_kernel *kb = dm_tune_kernel_find("tfidf.hash_build");
    int rc = DM_OK;
    while (rc == DM_OK) {
        dfree_all(tb);
        rc = vt_alloc(tb, t, cap, 0, 1, s);
        *a = vt_args(t);
        a->t_hash = d_vh;
        a->n = n;
        if (rc == DM_OK) rc = dm_tune_select(kb, n)->launch(a, n, s);
        uint32_t full = 0;
        if (rc == DM_OK) rc = down(&full, t->full, 4, s);
        if (rc != DM_OK || !full) break;
        cap *= 2;
        opt->rebuilds++;
    }
    return rc;
}

extern "C" int dm_hash_lookup_cuda(uint32_t *ids_out, const dm_termlist *vocab, const uint64_t *hashes, size_t n,
                                   dm_vocab_table_options *opt)
{
    if (!vocab || !opt || (n && (!ids_out || !hashes)))
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_hash_lookup_cuda: NULL argument");
    DM_TRY(dm_tfidf_tune_register());
    if (vocab->n >= UINT32_MAX) return DM_ERR(DM_ERR_UNSUPPORTED, "hash lookup: too many terms");
    cudaStream_t s = (cudaStream_t)opt->stream;
    dbufs inb = {{0}, 0}, tb = {{0}, 0};
    uint64_t *d_vh = NULL, *d_q = NULL;
    uint32_t *d_ids = NULL;
    int rc = dalloc(&inb, (void **)&d_vh, 8 * vocab->n);
    if (rc == DM_OK) rc = dalloc(&inb, (void **)&d_q, 8 * n);
    if (rc == DM_OK) rc = dalloc(&inb, (void **)&d_ids, 4 * n);
    if (rc == DM_OK) rc = up(d_vh, vocab->hash, 8 * vocab->n, s);
    if (rc == DM_OK) rc = up(d_q, hashes, 8 * n, s);
    vt_table t;
    dm_vt_args a;
    if (rc == DM_OK) rc = ht_build(&tb, &t, &a, d_vh, vocab->n, opt, s);
    unsigned long long amb = ~0ull;
    if (rc == DM_OK) {
        a.q_hash = d_q;
        a.n_q = n;
        a.ids_out = d_ids;
        rc = dm_tune_select(dm_tune_kernel_find("tfidf.hash_query"), n)->launch(&a, n, s);
    }
    if (rc == DM_OK) rc = down(&amb, t.ambq, 8, s);
    if (rc == DM_OK && amb != ~0ull) rc = dm_tfidf_ambiguous_hash(vocab, hashes[amb - 1]);
    if (rc == DM_OK) rc = down(ids_out, d_ids, 4 * n, s);
    dfree_all(&tb);
    dfree_all(&inb);
    return rc;
}

/* Device rows need their entries (at most one per token, 8 bytes each) and row offsets besides
 * the count call's own buffers (about 40 bytes a token of a chunk); they are kept only when the
 * device has that much free memory with a margin, else the rows go to the host. */
static int dev_rows_fit(uint64_t n_tok, size_t n_docs)
{
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    uint64_t chunk = n_tok < DM_TF_CHUNK_TOKENS ? n_tok : DM_TF_CHUNK_TOKENS;
    uint64_t need = 8 * n_tok + 16 * (uint64_t)n_docs + 48 * chunk + ((uint64_t)1 << 30);
    if (need < free_b) return 1;
    dm_log_info("tfidf: the count rows go to the host between counting and weighing (the device has %.1f GB "
                "free, keeping them needs up to %.1f GB)", (double)free_b / 1e9, (double)need / 1e9);
    return 0;
}

extern "C" int dm_tf_count_hashes_cuda(dm_tf_counts *out, dm_tf_dev **dev, const uint64_t *tok_off,
                                       const uint64_t *hashes, size_t n_docs, const dm_termlist *terms,
                                       dm_tf_count_options *opt, dm_vocab_table_options *vo)
{
    if (dev) *dev = NULL;
    if (!out || !tok_off || !terms || !opt || !vo || (!hashes && tok_off[n_docs] > 0))
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_tf_count_hashes_cuda: NULL argument");
    if (opt->variant != DM_TF_ATOMIC && opt->variant != DM_TF_NOATOMIC)
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_tf_count_hashes_cuda: unknown variant %d", opt->variant);
    memset(out, 0, sizeof *out);
    if (terms->n >= UINT32_MAX) return DM_ERR(DM_ERR_UNSUPPORTED, "dm_tf_count_hashes_cuda: too many terms");
    DM_TRY(dm_tfidf_tune_register());
    cudaStream_t s = (cudaStream_t)opt->stream;
    dbufs inb = {{0}, 0}, tb = {{0}, 0};
    uint64_t *d_vh = NULL;
    static const uint64_t none = 0;
    tf_src src;
    memset(&src, 0, sizeof src);
    src.hash = hashes ? hashes : &none;
    src.hash_dev = hashes && opt->hashes_on_device;
    src.terms = terms;
    vt_table t;
    dm_tf_dev *keep = NULL;
    int rc = dalloc(&inb, (void **)&d_vh, 8 * terms->n);
    if (rc == DM_OK) rc = up(d_vh, terms->hash, 8 * terms->n, s);
    if (rc == DM_OK) rc = ht_build(&tb, &t, &src.ht, d_vh, terms->n, vo, s);
    if (rc == DM_OK && dev && dev_rows_fit(tok_off[n_docs] - tok_off[0], n_docs)) {
        keep = (dm_tf_dev *)dm_calloc(1, sizeof *keep);
        if (!keep) rc = DM_ERR_NOMEM;
        else keep->n_terms = terms->n;
    }
    if (rc == DM_OK) rc = count_run(out, keep, tok_off, &src, n_docs, (uint32_t)terms->n, opt);
    dfree_all(&tb);
    dfree_all(&inb);
    if (rc != DM_OK) {
        dm_tf_dev_free(keep);
        return rc;
    }
    if (dev) *dev = keep;
    return DM_OK;
}

/* df[t] = rows holding term t: a histogram of each piece's terms (rows hold distinct terms). */
extern "C" int dm_tf_dev_df(uint64_t *df, size_t n_terms, const dm_tf_dev *dev, void *stream)
{
    if (!df || !dev) return DM_ERR(DM_ERR_INVALID_ARG, "dm_tf_dev_df: NULL argument");
    if (n_terms != dev->n_terms) return DM_ERR(DM_ERR_INVALID_ARG, "dm_tf_dev_df: %zu terms, the rows have %zu", n_terms, dev->n_terms);
    if (n_terms >= (size_t)INT_MAX) return DM_ERR(DM_ERR_UNSUPPORTED, "dm_tf_dev_df: too many terms");
    memset(df, 0, 8 * n_terms);
    if (n_terms == 0) return DM_OK;
    cudaStream_t s = (cudaStream_t)stream;
    dbufs b = {{0}, 0};
    uint32_t *d_h = NULL, *h = (uint32_t *)dm_malloc(4 * n_terms);
    void *temp = NULL;
    size_t temp_b = 0, max_nnz = 0;
    for (size_t i = 0; i < dev->n_pieces; i++)
        if (dev->p[i].nnz > max_nnz) max_nnz = dev->p[i].nnz;
    int rc = h ? dalloc(&b, (void **)&d_h, 4 * n_terms) : DM_ERR_NOMEM;
    /* bins [t, t + 1) for t < n_terms; entries per piece < 2^32 (a piece has at most a chunk's tokens) */
    if (rc == DM_OK && cub::DeviceHistogram::HistogramEven(NULL, temp_b, (const uint32_t *)NULL, d_h, (int)n_terms + 1,
                                                           0u, (uint32_t)n_terms, (int64_t)max_nnz, s) != cudaSuccess)
        rc = DM_ERR(DM_ERR_CUDA, "dm_tf_dev_df: histogram size query failed");
    if (rc == DM_OK) rc = dalloc(&b, &temp, temp_b);
    for (size_t i = 0; rc == DM_OK && i < dev->n_pieces; i++) {
        const dm_tf_piece *q = &dev->p[i];
        if (q->nnz == 0) continue;
        size_t tb = temp_b;
        if (cub::DeviceHistogram::HistogramEven(temp, tb, (const uint32_t *)q->term, d_h, (int)n_terms + 1, 0u,
                                                (uint32_t)n_terms, (int64_t)q->nnz, s) != cudaSuccess)
            rc = DM_ERR(DM_ERR_CUDA, "dm_tf_dev_df: histogram failed");
        if (rc == DM_OK) rc = down(h, d_h, 4 * n_terms, s);
        for (size_t k = 0; rc == DM_OK && k < n_terms; k++) df[k] += h[k];
    }
    dfree_all(&b);
    dm_free(h);
    return rc;
}

/* ------------------------------------------------------------------ weights */

/* Device buffers of dm_tfidf_weigh_cuda, kept across its chunks. */
enum { WW_ROW_OFF, WW_TERM, WW_COUNT, WW_MAP, WW_W, WW_LEN, WW_KEPT, WW_OUT_OFF, WW_CTR, WW_TEMP, WW_COL, WW_POS,
       WW_SCOL, WW_SPOS, WW_FCOL, WW_OW, WW_FVAL, WW_TEMP2, WW_N };

/* One chunk of rows (counts->row_off[0] == 0); a.map and a.col_w are on the device already.
 * The rows are on the host (counts, uploaded here) or on the device (piece; counts NULL).
 * Appends the rows: row_off[0 .. n] (row_off[0] = the entries before the chunk, already set),
 * entries at col/val + row_off[0]. */
static int weigh_chunk(uint64_t *row_off, uint32_t *col, float *val, const dm_tf_counts *counts,
                       const dm_tf_piece *piece, dm_w_args a, dgrow *w, dm_weigh_options *opt)
{
    size_t n = piece ? piece->n_rows : counts->n_rows;
    uint64_t nnz = piece ? piece->nnz : counts->row_off[n], base = row_off[0];
    if (nnz >= UINT32_MAX) return DM_ERR(DM_ERR_UNSUPPORTED, "dm_tfidf_weigh_cuda: more than 2^32 entries in one call");
    cudaStream_t s = (cudaStream_t)opt->stream;
    a.n_rows = n;
    dm_timer_start("tfidf.weigh.h2d");
    int rc = DM_OK;
    if (!piece) {
        rc = dgrow_need(&w[WW_ROW_OFF], 8 * (n + 1), 0);
        if (rc == DM_OK) rc = dgrow_need(&w[WW_TERM], 4 * nnz, 0);
        if (rc == DM_OK) rc = dgrow_need(&w[WW_COUNT], 4 * nnz, 0);
    }
    if (rc == DM_OK) rc = dgrow_need(&w[WW_LEN], 8 * n, 0);
    if (rc == DM_OK) rc = dgrow_need(&w[WW_KEPT], 8 * (n + 1), 0);
    if (rc == DM_OK) rc = dgrow_need(&w[WW_OUT_OFF], 8 * (n + 1), 0);
    if (rc == DM_OK) rc = dgrow_need(&w[WW_CTR], 16, 0);
    uint64_t *d_out_off = (uint64_t *)w[WW_OUT_OFF].p, *d_kept = (uint64_t *)w[WW_KEPT].p;
    unsigned long long *d_ctr = (unsigned long long *)w[WW_CTR].p;
    if (!piece) {
        if (rc == DM_OK) rc = up(w[WW_ROW_OFF].p, counts->row_off, 8 * (n + 1), s);
        if (rc == DM_OK) rc = up(w[WW_TERM].p, counts->term, 4 * nnz, s);
        if (rc == DM_OK) rc = up(w[WW_COUNT].p, counts->count, 4 * nnz, s);
    }
    if (rc == DM_OK && cudaMemsetAsync(d_kept, 0, 8 * (n + 1), s) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "memset failed");
    if (rc == DM_OK && cudaMemsetAsync(d_ctr, 0, 16, s) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "memset failed");
    rc = stage(rc, s, "tfidf.weigh.h2d", "tfidf.weigh.kernels");
    a.row_off = piece ? piece->row_off : (const uint64_t *)w[WW_ROW_OFF].p;
    a.term = piece ? piece->term : (const uint32_t *)w[WW_TERM].p;
    a.count = piece ? piece->count : (const uint32_t *)w[WW_COUNT].p;
    a.row_len = (uint64_t *)w[WW_LEN].p;
    a.kept = d_kept;
    a.out_off = d_out_off;
    a.zero = d_ctr;
    a.unmapped = d_ctr + 1;
    if (rc == DM_OK) rc = dm_tune_select(dm_tune_kernel_find("tfidf.weigh_len"), n)->launch(&a, n, s);
    size_t tb = 0;
    if (rc == DM_OK && cub::DeviceScan::ExclusiveSum(NULL, tb, d_kept, d_out_off, n + 1, s) != cudaSuccess)
        rc = DM_ERR(DM_ERR_CUDA, "weights: scan size query failed");
    if (rc == DM_OK) rc = dgrow_need(&w[WW_TEMP], tb, 0);
    if (rc == DM_OK && cub::DeviceScan::ExclusiveSum(w[WW_TEMP].p, tb, d_kept, d_out_off, n + 1, s) != cudaSuccess)
        rc = DM_ERR(DM_ERR_CUDA, "weights: scan failed");
    if (rc == DM_OK) rc = down(row_off, d_out_off, 8 * (n + 1), s);
    uint64_t m = rc == DM_OK ? row_off[n] : 0;
    if (rc == DM_OK && m > nnz) rc = DM_ERR(DM_ERR_CUDA, "weights: %" PRIu64 " entries kept of %" PRIu64, m, nnz);
    if (rc == DM_OK) rc = dgrow_need(&w[WW_COL], 4 * m, 0);
    if (rc == DM_OK) rc = dgrow_need(&w[WW_POS], 4 * m, 0);
    if (rc == DM_OK) rc = dgrow_need(&w[WW_SCOL], 4 * m, 0);
    if (rc == DM_OK) rc = dgrow_need(&w[WW_SPOS], 4 * m, 0);
    if (rc == DM_OK) rc = dgrow_need(&w[WW_FCOL], 4 * m, 0);
    if (rc == DM_OK) rc = dgrow_need(&w[WW_OW], 8 * m, 0);
    if (rc == DM_OK) rc = dgrow_need(&w[WW_FVAL], 4 * m, 0);
    uint32_t *d_col = (uint32_t *)w[WW_COL].p, *d_pos = (uint32_t *)w[WW_POS].p;
    uint32_t *d_scol = (uint32_t *)w[WW_SCOL].p, *d_spos = (uint32_t *)w[WW_SPOS].p;
    a.out_col = d_col;
    a.out_w = (double *)w[WW_OW].p;
    a.out_pos = d_pos;
    a.sorted_col = d_scol;
    a.sorted_pos = d_spos;
    a.final_col = (uint32_t *)w[WW_FCOL].p;
    a.final_val = (float *)w[WW_FVAL].p;
    if (rc == DM_OK) rc = dm_tune_select(dm_tune_kernel_find("tfidf.weigh_fill"), n)->launch(&a, n, s);
    rc = stage(rc, s, "tfidf.weigh.kernels", "tfidf.weigh.sort");
    if (rc == DM_OK && n > 0) {
        size_t sb = 0;
        rc = dm_segsort_pairs_u32_cuda(NULL, &sb, d_scol, d_spos, d_col, d_pos, m, d_out_off, n, s);
        if (rc == DM_OK) rc = dgrow_need(&w[WW_TEMP2], sb, 0);
        if (rc == DM_OK) rc = dm_segsort_pairs_u32_cuda(w[WW_TEMP2].p, &sb, d_scol, d_spos, d_col, d_pos, m, d_out_off, n, s);
    }
    rc = stage(rc, s, "tfidf.weigh.sort", "tfidf.weigh.kernels");
    if (rc == DM_OK) rc = dm_tune_select(dm_tune_kernel_find("tfidf.weigh_norm"), n)->launch(&a, n, s);
    rc = stage(rc, s, "tfidf.weigh.kernels", "tfidf.weigh.d2h");
    unsigned long long ctr[2] = {0, 0};
    if (rc == DM_OK) rc = down(col + base, a.final_col, 4 * m, s);
    if (rc == DM_OK) rc = down(val + base, a.final_val, 4 * m, s);
    if (rc == DM_OK) rc = down(ctr, d_ctr, 16, s);
    if (rc == DM_OK && base) dm_tfidf_shift(row_off, n + 1, base);
    rc = stage(rc, s, "tfidf.weigh.d2h", NULL);
    if (rc != DM_OK) return rc;
    opt->zero_weight += ctr[0];
    opt->unmapped += ctr[1];
    return DM_OK;
}

/* Entries per chunk of rows: bounds device memory and keeps entry indices within 32 bits. */
static uint64_t g_chunk_entries = (uint64_t)1 << 27;
#define DM_W_CHUNK_ENTRIES g_chunk_entries

extern "C" void dm_tfidf_cuda_set_chunks(uint64_t tokens, uint64_t entries)
{
    g_chunk_tokens = tokens ? tokens : (uint64_t)1 << 26;
    g_chunk_entries = entries ? entries : (uint64_t)1 << 27;
}

/* Both weigh entry points: rows from the host (counts) in chunks of whole rows (a row longer
 * than a chunk makes a chunk of its own), or from the device (dev) piece by piece; rows appended
 * in place; the map and the column weights go up once. */
static int weigh_run(dm_vectors *out, const dm_tf_counts *counts, const dm_tf_dev *dev, const uint32_t *term_map,
                     size_t n_local_terms, const double *col_w, uint64_t n_cols, dm_weigh_options *opt)
{
    size_t n = dev ? dev->n_rows : counts->n_rows;
    const uint64_t *ro = dev ? NULL : counts->row_off;
    uint64_t cap = 0;
    if (dev)
        for (size_t i = 0; i < dev->n_pieces; i++) cap += dev->p[i].nnz;
    else
        cap = ro[n] - ro[0];
    cudaStream_t s = (cudaStream_t)opt->stream;
    dgrow w[WW_N];
    memset(w, 0, sizeof w);
    dm_w_args a;
    memset(&a, 0, sizeof a);
    a.sublinear = opt->sublinear;
    a.l2 = opt->l2;
    uint64_t *row_off = (uint64_t *)dm_malloc(8 * (n + 1)), *sub_off = (uint64_t *)dm_malloc(8 * (n + 1));
    uint32_t *col = (uint32_t *)dm_malloc(4 * (cap ? cap : 1));
    float *val = (float *)dm_malloc(4 * (cap ? cap : 1));
    int rc = row_off && sub_off && col && val ? DM_OK : DM_ERR_NOMEM;
    /* fresh pages: populated by the threads, or the pageable copies below take every fault on
     * one thread (the device-to-host stage ran at half speed with four ranks on one host) */
    dm_timer_start("tfidf.weigh.prefault");
    if (rc == DM_OK) {
        dm_mem_prefault(col, 4 * cap);
        dm_mem_prefault(val, 4 * cap);
    }
    dm_timer_stop("tfidf.weigh.prefault");
    dm_timer_start("tfidf.weigh.h2d");
    if (rc == DM_OK) rc = dgrow_need(&w[WW_MAP], 4 * n_local_terms, 0);
    if (rc == DM_OK) rc = dgrow_need(&w[WW_W], 8 * n_cols, 0);
    if (rc == DM_OK) rc = up(w[WW_MAP].p, term_map, 4 * n_local_terms, s);
    if (rc == DM_OK) rc = up(w[WW_W].p, col_w, 8 * n_cols, s);
    dm_timer_stop("tfidf.weigh.h2d");
    a.map = (const uint32_t *)w[WW_MAP].p;
    a.col_w = (const double *)w[WW_W].p;
    if (rc == DM_OK) row_off[0] = 0;
    if (dev) {
        size_t r0 = 0;
        for (size_t i = 0; rc == DM_OK && i < dev->n_pieces; i++) {
            rc = weigh_chunk(row_off + r0, col, val, NULL, &dev->p[i], a, w, opt);
            r0 += dev->p[i].n_rows;
        }
    } else if (rc == DM_OK && n == 0) {
        dm_tf_counts sub = {0, sub_off, counts->term, counts->count};
        sub_off[0] = 0;
        rc = weigh_chunk(row_off, col, val, &sub, NULL, a, w, opt);
    }
    for (size_t r0 = 0; !dev && rc == DM_OK && r0 < n;) {
        size_t r1 = r0 + 1;
        while (r1 < n && ro[r1 + 1] - ro[r0] <= DM_W_CHUNK_ENTRIES) r1++;
        dm_tfidf_rebase(sub_off, ro + r0, r1 - r0 + 1, ro[r0]);
        dm_tf_counts sub = {r1 - r0, sub_off, counts->term + ro[r0], counts->count + ro[r0]};
        rc = weigh_chunk(row_off + r0, col, val, &sub, NULL, a, w, opt);
        r0 = r1;
    }
    dgrow_free(w, WW_N);
    dm_free(sub_off);
    if (rc != DM_OK) {
        dm_free(row_off);
        dm_free(col);
        dm_free(val);
        return rc;
    }
    uint64_t m = row_off[n];
    uint32_t *c2 = (uint32_t *)dm_realloc(col, 4 * (m ? m : 1));
    if (c2) col = c2;
    float *v2 = (float *)dm_realloc(val, 4 * (m ? m : 1));
    if (v2) val = v2;
    out->n_rows = n;
    out->n_cols = n_cols;
    out->row_off = row_off;
    out->col = col;
    out->val = val;
    return DM_OK;
}

extern "C" int dm_tfidf_weigh_cuda(dm_vectors *out, const dm_tf_counts *counts, const uint32_t *term_map,
                                   size_t n_local_terms, const double *col_w, uint64_t n_cols, dm_weigh_options *opt)
{
    if (!out || !counts || !opt || (!term_map && n_local_terms))
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_tfidf_weigh_cuda: NULL argument");
    DM_TRY(dm_tfidf_tune_register());
    const uint64_t *ro = counts->row_off;
    dm_timer_start("tfidf.weigh.check");
    uint64_t bad = dm_tfidf_first_bad_entry(counts->term + ro[0], ro[counts->n_rows] - ro[0], term_map, n_local_terms,
                                            n_cols);
    dm_timer_stop("tfidf.weigh.check");
    if (bad != UINT64_MAX)
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_tfidf_weigh_cuda: entry %" PRIu64 " maps outside the columns", bad);
    return weigh_run(out, counts, NULL, term_map, n_local_terms, col_w, n_cols, opt);
}

extern "C" int dm_tfidf_weigh_dev_cuda(dm_vectors *out, const dm_tf_dev *dev, const uint32_t *term_map,
                                       size_t n_local_terms, const double *col_w, uint64_t n_cols,
                                       dm_weigh_options *opt)
{
    if (!out || !dev || !opt || (!term_map && n_local_terms))
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_tfidf_weigh_dev_cuda: NULL argument");
    if (n_local_terms != dev->n_terms)
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_tfidf_weigh_dev_cuda: a map of %zu terms for rows of %zu", n_local_terms,
                      dev->n_terms);
    DM_TRY(dm_tfidf_tune_register());
    /* the rows' terms are < n_local_terms (their count call checked every token); the map's
     * columns are checked here */
    for (size_t i = 0; i < n_local_terms; i++)
        if (term_map[i] != DM_TERM_NONE && term_map[i] >= n_cols)
            return DM_ERR(DM_ERR_INVALID_ARG, "dm_tfidf_weigh_dev_cuda: term %zu maps outside the columns", i);
    return weigh_run(out, NULL, dev, term_map, n_local_terms, col_w, n_cols, opt);
}

/* ------------------------------------------------------------------ tuning workloads */

/* Per-document counting: n tokens in documents of 1..400 tokens (a tail to 5000), term ids
 * skewed over 60000 terms, in tables of the size the driver ends with after its rebuilds
 * (dm_tf_table_grow_fit), so no document overflows and every count is compared. Output
 * (dm_tf_tables_canonical): every document's (term, count) pairs in term order, taken from the
 * tables on the host (which slot a term takes depends on the order of the atomic inserts), then
 * the overflow flags (all 0 unless an instance is wrong). */
struct count_bench {
    tf_run r;
    size_t n_tok;
    dbufs b;
    const uint64_t *tab_off; /* in lent */
    void *lent;              /* the host data (count_host), returned at destroy */
};

/* The host side of the counting workload, the same for every input of (n, seed): kept between
 * inputs (common/tune/wl_cache.h). The reference count (dm_tf_count_cpu) only sizes the tables. */
struct count_host {
    uint64_t *tok_off; /* n_docs + 1 (room for n + 2) */
    uint32_t *tok;     /* n */
    uint64_t *tab_off; /* n_docs + 1 */
    size_t n_docs;
};

static void count_host_drop(void *p)
{
    count_host *h = (count_host *)p;
    if (!h) return;
    dm_free(h->tok_off);
    dm_free(h->tok);
    dm_free(h->tab_off);
    dm_free(h);
}

static void count_bench_destroy(void *state)
{
    count_bench *c = (count_bench *)state;
    if (!c) return;
    dfree_all(&c->b);
    dm_wl_cache_put(c->lent);
    dm_free(c);
}

static uint64_t brand(uint64_t *s)
{
    return dm_splitmix64(s);
}

static const uint32_t kCountTerms = 60000;

static int count_host_build(dm_wl_host *out, size_t n, uint64_t seed, const void *arg)
{
    (void)arg;
    count_host *h = (count_host *)dm_calloc(1, sizeof *h);
    if (!h) return DM_ERR_NOMEM;
    h->tok_off = (uint64_t *)dm_malloc(8 * (n + 2));
    h->tok = (uint32_t *)dm_malloc(4 * (n ? n : 1));
    int rc = h->tok_off && h->tok ? DM_OK : DM_ERR_NOMEM;
    size_t n_docs = 0;
    if (rc == DM_OK) rc = dm_tf_bench_docs(h->tok_off, h->tok, n, kCountTerms, seed, &n_docs);
    h->n_docs = n_docs;
    h->tab_off = (uint64_t *)dm_malloc(8 * (n_docs + 1));
    uint8_t *grow = (uint8_t *)dm_calloc(n_docs ? n_docs : 1, 1);
    if (rc == DM_OK && (!h->tab_off || !grow)) rc = DM_ERR_NOMEM;
    dm_tf_counts ref;
    memset(&ref, 0, sizeof ref);
    dm_tf_count_options ro = DM_TF_COUNT_OPTIONS_INIT;
    if (rc == DM_OK) rc = dm_tf_count_cpu(&ref, h->tok_off, h->tok, n_docs, kCountTerms, &ro);
    for (size_t d = 0; rc == DM_OK && d < n_docs; d++)
        grow[d] = (uint8_t)dm_tf_table_grow_fit(ref.term + ref.row_off[d], ref.row_off[d + 1] - ref.row_off[d],
                                                h->tok_off[d + 1] - h->tok_off[d], 2);
    dm_tf_counts_free(&ref);
    if (rc == DM_OK) rc = table_offsets(h->tab_off, h->tok_off, n_docs, 2, grow);
    dm_free(grow);
    if (rc != DM_OK) {
        count_host_drop(h);
        return rc;
    }
    out->data = h;
    out->bytes = 8 * (n + 2) + 4 * n + 8 * (n_docs + 1);
    out->drop = count_host_drop;
    return DM_OK;
}

static int count_bench_create(void **state, size_t n, uint64_t seed)
{
    *state = NULL;
    count_bench *c = (count_bench *)dm_calloc(1, sizeof *c);
    if (!c) return DM_ERR_NOMEM;
    c->n_tok = n;
    int rc = dm_wl_cache_get("tfidf.count", n, seed, count_host_build, NULL, &c->lent);
    const count_host *h = (const count_host *)c->lent;
    const size_t n_docs = h ? h->n_docs : 0;
    if (h) c->tab_off = h->tab_off;
    tf_run *r = &c->r;
    r->n_docs = n_docs;
    r->n_terms = kCountTerms;
    r->slots = rc == DM_OK ? h->tab_off[n_docs] : 0;
    if (rc == DM_OK) rc = dalloc(&c->b, (void **)&r->d_tok_off, 8 * (n_docs + 1));
    if (rc == DM_OK) rc = dalloc(&c->b, (void **)&r->d_tok, 4 * n);
    if (rc == DM_OK) rc = dalloc(&c->b, (void **)&r->d_tab_off, 8 * (n_docs + 1));
    if (rc == DM_OK) rc = dalloc(&c->b, (void **)&r->d_key, 4 * r->slots);
    if (rc == DM_OK) rc = dalloc(&c->b, (void **)&r->d_cnt, 4 * r->slots);
    if (rc == DM_OK) rc = dalloc(&c->b, (void **)&r->d_over, 4 * n_docs);
    if (rc == DM_OK) rc = dalloc(&c->b, (void **)&r->d_bad, 4);
    if (rc == DM_OK) rc = up(r->d_tok_off, h->tok_off, 8 * (n_docs + 1), 0);
    if (rc == DM_OK) rc = up(r->d_tok, h->tok, 4 * n, 0);
    if (rc == DM_OK) rc = up(r->d_tab_off, h->tab_off, 8 * (n_docs + 1), 0);
    /* a fixed pattern in the output before any run */
    if (rc == DM_OK && cudaMemset(r->d_key, 0x5a, 4 * r->slots) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "memset failed");
    if (rc == DM_OK && cudaDeviceSynchronize() != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "bench upload failed");
    if (rc != DM_OK) {
        count_bench_destroy(c);
        return rc;
    }
    *state = c;
    return DM_OK;
}

static int count_bench_run(void *state, const dm_tune_instance *inst, void *stream)
{
    count_bench *c = (count_bench *)state;
    c->r.s = (cudaStream_t)stream;
    return tf_fill(&c->r, inst);
}

/* Output: per document, its (term << 32 | count) entries sorted (dm_tf_tables_canonical), then
 * the overflow flags. */
static int count_bench_output(void *state, void *host, size_t *nbytes)
{
    count_bench *c = (count_bench *)state;
    const tf_run *r = &c->r;
    *nbytes = 8 * (size_t)r->slots + 4 * r->n_docs;
    if (!host) return DM_OK;
    uint32_t *k = (uint32_t *)dm_malloc(4 * (r->slots ? r->slots : 1)), *n = (uint32_t *)dm_malloc(4 * (r->slots ? r->slots : 1));
    if (!k || !n) {
        dm_free(k);
        dm_free(n);
        return DM_ERR_NOMEM;
    }
    uint32_t *over = (uint32_t *)((char *)host + 8 * r->slots);
    int rc = down(k, r->d_key, 4 * r->slots, 0);
    if (rc == DM_OK) rc = down(n, r->d_cnt, 4 * r->slots, 0);
    if (rc == DM_OK) rc = down(over, r->d_over, 4 * r->n_docs, 0);
    if (rc == DM_OK) dm_tf_tables_canonical((uint64_t *)host, k, n, c->tab_off, over, r->n_docs);
    dm_free(k);
    dm_free(n);
    return rc;
}

/* Vocabulary merge: n occurrences of n/4 distinct terms (words of 3..12 letters). Output: the
 * sums in order of first occurrence. */
struct merge_bench {
    size_t n;
    dbufs b;
    vt_dev d;
    vt_table t;
    uint64_t cap;
};

static void merge_bench_destroy(void *state)
{
    merge_bench *m = (merge_bench *)state;
    if (!m) return;
    dfree_all(&m->b);
    dm_free(m);
}

static int merge_bench_create(void **state, size_t n, uint64_t seed)
{
    *state = NULL;
    merge_bench *m = (merge_bench *)dm_calloc(1, sizeof *m);
    if (!m) return DM_ERR_NOMEM;
    m->n = n;
    dm_termlist l;
    int rc = dm_termlist_alloc(&l, n, 12 * (uint64_t)n, 1);
    uint64_t s = seed, distinct = n / 4 + 1;
    for (size_t i = 0; rc == DM_OK && i < n; i++) {
        uint64_t w = brand(&s) % distinct, x = w * 0x9e3779b97f4a7c15ull;
        int len = 3 + (int)(w % 10);
        char *p = l.bytes + l.off[i];
        for (int j = 0; j < len; j++, x = x * 6364136223846793005ull + 1) p[j] = (char)('a' + (x >> 59) % 26);
        l.off[i + 1] = l.off[i] + (uint64_t)len;
        l.hash[i] = dm_mix64(w + 1);
        l.val[i] = 1 + w % 3;
    }
    if (rc == DM_OK) rc = termlist_up(&m->b, &m->d, &l, 1, 0);
    m->cap = pow2_at_least(2 * distinct + 2);
    if (rc == DM_OK) rc = vt_alloc(&m->b, &m->t, m->cap, 1, 0, 0);
    if (rc == DM_OK && cudaDeviceSynchronize() != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "bench upload failed");
    dm_termlist_free(&l);
    if (rc != DM_OK) {
        merge_bench_destroy(m);
        return rc;
    }
    *state = m;
    return DM_OK;
}

static int merge_bench_run(void *state, const dm_tune_instance *inst, void *stream)
{
    merge_bench *m = (merge_bench *)state;
    cudaStream_t s = (cudaStream_t)stream;
    DM_CUDA_TRY(cudaMemsetAsync(m->t.ident, 0, 4 * m->cap, s));
    DM_CUDA_TRY(cudaMemsetAsync(m->t.sum, 0, 8 * m->cap, s));
    DM_CUDA_TRY(cudaMemsetAsync(m->t.first, 0xff, 4 * m->cap, s));
    DM_CUDA_TRY(cudaMemsetAsync(m->t.used, 0, 8, s));
    DM_CUDA_TRY(cudaMemsetAsync(m->t.full, 0, 4, s));
    dm_vt_args a = vt_args(&m->t);
    a.hash = m->d.hash;
    a.off = m->d.off;
    a.bytes = m->d.bytes;
    a.val = m->d.val;
    a.n = m->n;
    return inst->launch(&a, m->n, stream);
}

static int merge_bench_output(void *state, void *host, size_t *nbytes)
{
    merge_bench *m = (merge_bench *)state;
    *nbytes = 8 * m->n;
    if (!host) return DM_OK;
    uint32_t *ident = (uint32_t *)dm_malloc(4 * m->cap), *first = (uint32_t *)dm_malloc(4 * m->cap);
    uint64_t *sum = (uint64_t *)dm_malloc(8 * m->cap);
    int rc = ident && first && sum ? DM_OK : DM_ERR_NOMEM;
    if (rc == DM_OK) rc = down(ident, m->t.ident, 4 * m->cap, 0);
    if (rc == DM_OK) rc = down(first, m->t.first, 4 * m->cap, 0);
    if (rc == DM_OK) rc = down(sum, m->t.sum, 8 * m->cap, 0);
    uint64_t *o = (uint64_t *)host;
    memset(host, 0, *nbytes);
    for (uint64_t sl = 0; rc == DM_OK && sl < m->cap; sl++)
        if (ident[sl] && first[sl] < m->n) o[first[sl]] = sum[sl];
    dm_free(ident);
    dm_free(first);
    dm_free(sum);
    return rc;
}

/* ------------------------------------------------------------------ registration */

static const dm_tune_kernel k_count_atomic = {
    "tfidf.tf_count_atomic", "per-document term counts, warp per document, atomic bucket inserts", "tokens",
    g_count_atomic, DM_N_CA, 11 /* block 128, rake 2, strided */, count_bench_create, count_bench_run, count_bench_output,
    count_bench_destroy, 0.0, (size_t)1 << 26, 1.0, NULL};
static const dm_tune_kernel k_count_noatomic = {
    "tfidf.tf_count_noatomic", "per-document term counts, per-lane sub-tables merged by bucket (no atomics)",
    "tokens", g_count_noatomic, DM_N_CN, 4 /* block 128, rake 4 */, count_bench_create, count_bench_run,
    count_bench_output, count_bench_destroy, 0.0, (size_t)1 << 26, 1.0, NULL};
static const dm_tune_kernel k_vt_merge = {
    "tfidf.vocab_merge", "vocabulary/DF table: insert with byte identity, sum df", "terms", g_vt_merge, 3, 1,
    merge_bench_create, merge_bench_run, merge_bench_output, merge_bench_destroy, 0.0, (size_t)1 << 22, 1.0, NULL};

/* The other kernels' tuning workloads are in tfidf_tune_cuda.cu (tfidf_tune.h); outputs exact.
 * Prefix reuse (bench_resize) for the documents and rows workloads only. */
#define DM_TK(var, name, desc, unit, inst, wl, target, resize)                                     \
    static const dm_tune_kernel var = {name, desc, unit, inst, (int)(sizeof inst / sizeof inst[0]), 0,         \
                                       dm_tfidf_bench_##wl##_create, dm_tfidf_bench_run, dm_tfidf_bench_output, \
                                       dm_tfidf_bench_destroy, 0.0, target, 1.0, resize}
DM_TK(k_header, "tfidf.tf_header", "per-document tables: occupied slots per bucket", "documents", g_header, header,
      DM_TFIDF_BENCH_N_header, dm_tfidf_bench_resize);
DM_TK(k_compact, "tfidf.tf_compact", "per-document tables: entries to the rows", "documents", g_compact, compact,
      DM_TFIDF_BENCH_N_compact, dm_tfidf_bench_resize);
DM_TK(k_vt_build, "tfidf.vocab_build", "vocabulary lookup table: insert distinct terms", "terms", g_vt_build,
      vocab_build, DM_TFIDF_BENCH_N_vocab_build, NULL);
DM_TK(k_vt_query, "tfidf.vocab_query", "vocabulary lookup: hash + bytes", "queries", g_vt_query, vocab_query,
      DM_TFIDF_BENCH_N_vocab_query, NULL);
DM_TK(k_ht_build, "tfidf.hash_build", "hash-only table of a token stream's vocabulary", "terms", g_ht_build,
      hash_build, DM_TFIDF_BENCH_N_hash_build, NULL);
DM_TK(k_ht_query, "tfidf.hash_query", "token hashes to stream vocabulary indices", "tokens", g_ht_query, hash_query,
      DM_TFIDF_BENCH_N_hash_query, NULL);
DM_TK(k_w_len, "tfidf.weigh_len", "weights: row lengths and stored entries", "rows", g_w_len, weigh_len,
      DM_TFIDF_BENCH_N_weigh, dm_tfidf_bench_resize);
DM_TK(k_w_fill, "tfidf.weigh_fill", "weights: tf x idf per entry", "rows", g_w_fill, weigh_fill,
      DM_TFIDF_BENCH_N_weigh, dm_tfidf_bench_resize);
DM_TK(k_w_norm, "tfidf.weigh_norm", "weights: L2 normalisation of sorted rows", "rows", g_w_norm, weigh_norm,
      DM_TFIDF_BENCH_N_weigh, dm_tfidf_bench_resize);

static const dm_tune_kernel *count_kernel(int variant)
{
    return variant == DM_TF_NOATOMIC ? &k_count_noatomic : &k_count_atomic;
}

extern "C" int dm_tfidf_tune_register(void)
{
    const dm_tune_kernel *all[] = {&k_count_atomic, &k_count_noatomic, &k_header, &k_compact, &k_vt_merge,
                                   &k_vt_build,     &k_vt_query,       &k_ht_build, &k_ht_query, &k_w_len,
                                   &k_w_fill,       &k_w_norm};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) DM_TRY(dm_tune_register(all[i]));
    return DM_OK;
}

extern "C" int dm_tf_count_cuda_instances(int variant) { return count_kernel(variant)->n_instances; }

extern "C" const char *dm_tf_count_cuda_instance_name(int variant, int i, char *buf, size_t len)
{
    const dm_tune_kernel *k = count_kernel(variant);
    if (i < 0 || i >= k->n_instances) {
        snprintf(buf, len, "tuner");
        return buf;
    }
    return dm_tune_policy_str(&k->instances[i].policy, buf, len);
}

extern "C" int dm_tf_count_cuda_force_instance(int i)
{
    if (i < -1 || (i >= DM_N_CA && i >= DM_N_CN)) return DM_ERR(DM_ERR_INVALID_ARG, "tf count: no instance %d", i);
    g_force_count = i;
    return DM_OK;
}
