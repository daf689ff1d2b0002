/* The CUDA backend of preprocess: extern "C" dm_tokenize_cuda (token bounds: count per tile ->
 * scan of the tiles -> place; process per tile -> scan of the tiles -> compact; per-document
 * bounds) and dm_stem_words_cuda, the kernels' tuner registration (compiled block/rake
 * instances, bench_* hooks), forced instances for the tests and
 * per-stage CUDA-event times. Reference: dm_tokenize_cpu / dm_stem_words_cpu (identical output). */
#include <cub/cub.cuh>
#include <cuda_runtime.h>
#include <pthread.h>
#include <thrust/gather.h>
#include <thrust/system_error.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/system/cuda/execution_policy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "common/tune/tune.h"
#include "common/tune/wl_cache.h"
#include "preprocess/preprocess.h"
#include "preprocess/preprocess_kernels.cuh"
#include "preprocess/preprocess_tune.h" /* workloads of place, compact, docs */

/* ------------------------------------------------------------------ launchers and instances */

/* An allocation of the tokeniser's workspace or results: its failure names the stage
 * (common/cuda_check.h). */
#define DM_PP_ALLOC_TRY(call)                                                                      \
    do {                                                                                           \
        int pp_rc_ = (call);                                                                       \
        if (pp_rc_ < 0) return DM_CUDA_STAGE_ERR(pp_rc_, "preprocess");                            \
    } while (0)

#define DM_PP_LAUNCHER(NAME, KERNEL, ARGS)                                                         \
    template <int B, int R, bool S>                                                                \
    static int NAME(const void *args, size_t n, void *stream)                                      \
    {                                                                                              \
        if (n == 0) return DM_OK;                                                                  \
        size_t per = (size_t)B * R, grid = (n + per - 1) / per;                                    \
        if (grid > 0x7fffffffu)                                                                    \
            return DM_ERR(DM_ERR_INVALID_ARG, #KERNEL ": %zu work units exceed one grid", n);      \
        KERNEL<B, R, S><<<(unsigned)grid, B, 0, (cudaStream_t)stream>>>(*(const ARGS *)args);      \
        DM_CUDA_LAUNCH_CHECK();                                                                    \
        return DM_OK;                                                                              \
    }

/* The tiled pattern of the token bounds and of process + compact: a per-tile kernel writes each
 * tile's count, CUB scans the counts (a.cub_tmp holds the scan of the smallest instance's
 * tiles), and a second kernel uses the offsets. n = 0 sets *total to 0 and launches nothing.
 * The tile is block x rake units, so the instance fixes both kernels' tiles. */
template <int B, typename A>
static int dm_pp_tiled_launch(void (*first)(A), void (*second)(A), const A &a, size_t n, size_t tile,
                              uint32_t *total, const char *units, cudaStream_t st)
{
    if (n == 0) {
        DM_CUDA_TRY(cudaMemsetAsync(total, 0, 4, st));
        return DM_OK;
    }
    if (n >= 0x7fffffffu) return DM_ERR(DM_ERR_INVALID_ARG, "tokenise: %zu %s exceed one launch", n, units);
    size_t tiles = (n + tile - 1) / tile, cb = a.cub_bytes;
    first<<<(unsigned)tiles, B, 0, st>>>(a);
    DM_CUDA_LAUNCH_CHECK();
    DM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(a.cub_tmp, cb, a.tile_cnt, a.tile_off, (int)tiles, st));
    second<<<(unsigned)tiles, B, 0, st>>>(a);
    DM_CUDA_LAUNCH_CHECK();
    return DM_OK;
}

/* Token bounds: count per tile, scan, place (tiles of block x rake bytes). */
template <int B, int R, bool S>
static int dm_pp_tokens_launch(const void *args, size_t n, void *stream)
{
    static_assert(B * R >= DM_PP_TOKENS_MIN_TILE, "tile below DM_PP_TOKENS_MIN_TILE");
    dm_pp_tokens_args a = *(const dm_pp_tokens_args *)args;
    a.n = n;
    return dm_pp_tiled_launch<B>(dm_pp_tokens_kernel<B, R, false>, dm_pp_tokens_kernel<B, R, true>, a, n,
                                 (size_t)B * R, a.total, "bytes", (cudaStream_t)stream);
}

/* Process and compact: process per tile, scan of the kept counts, compact (tiles of block x
 * rake tokens). */
template <int B, int R, bool S>
static int dm_pp_process_launch(const void *args, size_t n, void *stream)
{
    static_assert(B * R >= DM_PP_PROCESS_MIN_TILE && B * R <= 65536, "tile outside [DM_PP_PROCESS_MIN_TILE, 65536]");
    dm_pp_process_args a = *(const dm_pp_process_args *)args;
    a.t = n;
    return dm_pp_tiled_launch<B>(dm_pp_process_kernel<B, R>, dm_pp_compact_kernel<B, R>, a, n, (size_t)B * R, a.kept,
                                 "tokens", (cudaStream_t)stream);
}
DM_PP_LAUNCHER(dm_pp_docs_launch, dm_pp_docs_kernel, dm_pp_docs_args)

/* First occurrences of n kept tokens: clear the set, insert, flag (block x rake tokens per
 * block for both kernels), list the flagged indices (CUB select; a.cub_tmp holds its storage
 * for at least n). n = 0 sets *n_list to 0 and launches nothing. */
template <int B, int R, bool S>
static int dm_pp_first_launch(const void *args, size_t n, void *stream)
{
    dm_pp_first_args a = *(const dm_pp_first_args *)args;
    cudaStream_t st = (cudaStream_t)stream;
    a.n = n;
    if (n == 0) {
        DM_CUDA_TRY(cudaMemsetAsync(a.n_list, 0, 4, st));
        return DM_OK;
    }
    if (n >= 0x7fffffffu) return DM_ERR(DM_ERR_INVALID_ARG, "tokenise: %zu tokens exceed one launch", n);
    uint64_t slots = dm_tok_first_slots(n);
    DM_CUDA_TRY(cudaMemsetAsync(a.keys, 0, slots * 8, st));
    DM_CUDA_TRY(cudaMemsetAsync(a.idx, 0xff, slots * 4, st));
    size_t per = (size_t)B * R, grid = (n + per - 1) / per;
    dm_pp_first_insert_kernel<B, R, S><<<(unsigned)grid, B, 0, st>>>(a, slots - 1);
    DM_CUDA_LAUNCH_CHECK();
    dm_pp_first_flag_kernel<B, R, S><<<(unsigned)grid, B, 0, st>>>(a, slots - 1);
    DM_CUDA_LAUNCH_CHECK();
    size_t cb = a.cub_bytes;
    DM_CUDA_TRY(cub::DeviceSelect::Flagged(a.cub_tmp, cb, thrust::counting_iterator<uint64_t>(0), a.flag, a.list,
                                           a.n_list, (int)n, st));
    return DM_OK;
}

/* CUB select storage for n tokens (the workspace and the tuning workload size it with this). */
static int dm_pp_first_cub_bytes(size_t n, size_t *bytes)
{
    *bytes = 0;
    DM_CUDA_TRY(cub::DeviceSelect::Flagged(NULL, *bytes, thrust::counting_iterator<uint64_t>(0), (const uint8_t *)NULL,
                                           (uint64_t *)NULL, (uint32_t *)NULL, (int)(n ? n : 1)));
    return DM_OK;
}

#define DM_PP_INST(LAUNCH, KERNEL, B, R, S)                                                        \
    {{B, R, S, DM_LAYOUT_NONE, 0}, LAUNCH<B, R, S>, (const void *)KERNEL<B, R, S>, 0}

/* the tiled launchers' instances (the kernel recorded is the second pass) */
#define DM_PP_TILED_INST(LAUNCH, KERNEL, B, R)                                                     \
    {{B, R, 0, DM_LAYOUT_NONE, 0}, LAUNCH<B, R, false>, (const void *)KERNEL, 0}
#define DM_PP_TOK_INST(B, R) DM_PP_TILED_INST(dm_pp_tokens_launch, (dm_pp_tokens_kernel<B, R, true>), B, R)
static const dm_tune_instance g_tokens_inst[] = {
    DM_PP_TOK_INST(256, 16), DM_PP_TOK_INST(128, 16), DM_PP_TOK_INST(512, 16),
    DM_PP_TOK_INST(128, 32), DM_PP_TOK_INST(256, 32), DM_PP_TOK_INST(512, 32),
};
#define DM_PP_PROC_INST(B, R) DM_PP_TILED_INST(dm_pp_process_launch, (dm_pp_process_kernel<B, R>), B, R)
/* default 128 x 4: on Reuters (0.6 GB, H200) 8.9 ms against 10.4 for 128 x 1; a longer queue per
 * block balances the stemming (bench_preprocess --kernels-only --instances) */
static const dm_tune_instance g_process_inst[] = {
    DM_PP_PROC_INST(128, 4), DM_PP_PROC_INST(128, 1), DM_PP_PROC_INST(64, 1), DM_PP_PROC_INST(256, 1),
    DM_PP_PROC_INST(128, 2), DM_PP_PROC_INST(256, 2), DM_PP_PROC_INST(128, 8), DM_PP_PROC_INST(256, 4),
};
static const dm_tune_instance g_first_inst[] = {
    DM_PP_INST(dm_pp_first_launch, dm_pp_first_flag_kernel, 256, 1, false),
    DM_PP_INST(dm_pp_first_launch, dm_pp_first_flag_kernel, 128, 1, false),
    DM_PP_INST(dm_pp_first_launch, dm_pp_first_flag_kernel, 512, 1, false),
    DM_PP_INST(dm_pp_first_launch, dm_pp_first_flag_kernel, 256, 4, true),
};
static const dm_tune_instance g_docs_inst[] = {
    DM_PP_INST(dm_pp_docs_launch, dm_pp_docs_kernel, 128, 1, false),
    DM_PP_INST(dm_pp_docs_launch, dm_pp_docs_kernel, 256, 1, false),
};

/* ------------------------------------------------------------------ stem kernel (docmine stem) */

typedef struct dm_pp_stem_args {
    const char *words;
    const uint32_t *off, *len;
    size_t n;
    char *out;
    uint32_t *out_len;
} dm_pp_stem_args;

template <int BLOCK, int RAKE, bool STRIDED>
__global__ void __launch_bounds__(BLOCK) dm_pp_stem_kernel(dm_pp_stem_args a)
{
    size_t gtid = (size_t)blockIdx.x * BLOCK + threadIdx.x, nth = (size_t)gridDim.x * BLOCK;
    for (int r = 0; r < RAKE; r++) {
        size_t i = dm_pp_item<RAKE, STRIDED>(gtid, nth, r);
        if (i >= a.n) continue;
        const char *w = a.words + a.off[i];
        uint32_t n = a.len[i];
        char *o = a.out + a.off[i];
        if (n > DM_TOKEN_MAX_LEN || !dm_pp_is_ascii(w, n)) {
            for (uint32_t k = 0; k < n; k++) o[k] = w[k];
            a.out_len[i] = n;
            continue;
        }
        char buf[DM_TOKEN_MAX_LEN + 1];
        for (uint32_t k = 0; k < n; k++) buf[k] = w[k];
        int sl = dm_porter_stem(buf, (int)n);
        for (int k = 0; k < sl; k++) o[k] = buf[k];
        a.out_len[i] = (uint32_t)sl;
    }
}
DM_PP_LAUNCHER(dm_pp_stem_launch, dm_pp_stem_kernel, dm_pp_stem_args)
static const dm_tune_instance g_stem_inst[] = {
    DM_PP_INST(dm_pp_stem_launch, dm_pp_stem_kernel, 128, 1, false),
    DM_PP_INST(dm_pp_stem_launch, dm_pp_stem_kernel, 64, 1, false),
    DM_PP_INST(dm_pp_stem_launch, dm_pp_stem_kernel, 256, 2, true),
};

/* ------------------------------------------------------------------ bench hooks */

/* Tuning input: n bytes of seeded normalised text (ASCII and multibyte words, stop words, numbers,
 * separated by single spaces), device-resident, with the token arrays already placed so that the
 * process kernel can be timed alone. */
typedef struct dm_pp_bench {
    size_t n, t;
    char *text, *stems;
    uint32_t *tok_start, *tok_end, *keep, *tile_cnt, *tile_off, *kept;
    uint8_t *stem_len, *out_len;
    uint64_t *hash, *out_hash, *out_start;
    void *cub_tmp;
    size_t cub_bytes;
    unsigned long long *drops;
    dm_stopset stop;
    uint64_t *d_keys;
    uint32_t *d_woff;
    uint8_t *d_wlen;
    char *d_wbytes;
    int which; /* 1 process, 2 stem */
    char *words_out;
    uint32_t *w_off, *w_len, *w_out_len;
} dm_pp_bench;

static uint64_t dm_pp_splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void dm_pp_bench_destroy(void *state)
{
    dm_pp_bench *b = (dm_pp_bench *)state;
    if (!b) return;
    dm_device_free(b->text);
    dm_device_free(b->stems);
    dm_device_free(b->tok_start);
    dm_device_free(b->tok_end);
    dm_device_free(b->keep);
    dm_device_free(b->tile_cnt);
    dm_device_free(b->tile_off);
    dm_device_free(b->kept);
    dm_device_free(b->out_len);
    dm_device_free(b->out_hash);
    dm_device_free(b->out_start);
    dm_device_free(b->cub_tmp);
    dm_device_free(b->stem_len);
    dm_device_free(b->hash);
    dm_device_free(b->drops);
    dm_device_free(b->d_keys);
    dm_device_free(b->d_woff);
    dm_device_free(b->d_wlen);
    dm_device_free(b->d_wbytes);
    dm_device_free(b->words_out);
    dm_device_free(b->w_off);
    dm_device_free(b->w_len);
    dm_device_free(b->w_out_len);
    dm_stopset_free(&b->stop);
    dm_free(b);
}

/* The host side of the process and stem workloads, the same for every input of (n, seed): kept
 * between inputs (common/tune/wl_cache.h). */
typedef struct dm_pp_bench_host {
    char *text;            /* n bytes: words of the list, one space after each */
    uint32_t *woff, *wlen; /* nw words */
    size_t nw;
    uint32_t *ts, *te;     /* process: the t tokens' bounds by the reference rule */
    uint32_t t;
} dm_pp_bench_host;

static void dm_pp_bench_host_drop(void *p)
{
    dm_pp_bench_host *h = (dm_pp_bench_host *)p;
    if (!h) return;
    dm_free(h->text);
    dm_free(h->woff);
    dm_free(h->wlen);
    dm_free(h->ts);
    dm_free(h->te);
    dm_free(h);
}

/* arg: the workload (const int *: 1 process, 2 stem); n >= 64 */
static int dm_pp_bench_host_build(dm_wl_host *out, size_t n, uint64_t seed, const void *arg)
{
    static const char *words[] = {"the", "market", "prices", "rose", "1987", "generalization",
                                  "naïve", "données", "ελλάδα", "日本語", "running", "of", "ab",
                                  "connections", "happily", "oil", "x"};
    const int which = *(const int *)arg;
    dm_pp_bench_host *b = (dm_pp_bench_host *)dm_calloc(1, sizeof *b);
    if (!b) return DM_ERR(DM_ERR_NOMEM, "bench: out of memory");
    char *h = b->text = (char *)dm_malloc(n);
    uint32_t *hoff = b->woff = (uint32_t *)dm_malloc(n * sizeof(uint32_t));
    uint32_t *hlen = b->wlen = (uint32_t *)dm_malloc(n * sizeof(uint32_t));
    if (which == 1) {
        b->ts = (uint32_t *)dm_malloc(n * 4);
        b->te = (uint32_t *)dm_malloc(n * 4);
    }
    if (!h || !hoff || !hlen || (which == 1 && (!b->ts || !b->te))) {
        dm_pp_bench_host_drop(b);
        return DM_ERR(DM_ERR_NOMEM, "bench: out of memory");
    }
    size_t l = 0, nw = 0;
    while (l < n) {
        const char *w = words[dm_pp_splitmix(&seed) % (sizeof(words) / sizeof(words[0]))];
        size_t k = strlen(w);
        if (l + k + 1 > n) break;
        hoff[nw] = (uint32_t)l;
        hlen[nw] = (uint32_t)k;
        nw++;
        memcpy(h + l, w, k);
        l += k;
        h[l++] = ' ';
    }
    while (l < n) h[l++] = ' ';
    b->nw = nw;
    if (which == 1) { /* the tokens' bounds, placed on the host by the reference rule */
        uint32_t t = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t f = dm_tok_mark_one(h, n, i);
            if (f & 1u) b->ts[t++] = (uint32_t)i;
            if (f & 2u) b->te[t - 1] = (uint32_t)(i + 1);
        }
        b->t = t;
    }
    out->data = b;
    out->bytes = n * (which == 1 ? 17 : 9);
    out->drop = dm_pp_bench_host_drop;
    return DM_OK;
}

static int dm_pp_bench_create_common(dm_pp_bench **out, size_t n, uint64_t seed, int which)
{
    dm_pp_bench *b = (dm_pp_bench *)dm_calloc(1, sizeof(*b));
    if (!b) return DM_ERR(DM_ERR_NOMEM, "bench: out of memory");
    *out = b;
    b->which = which;
    if (n < 64) n = 64;
    void *lent = NULL;
    int rc = dm_wl_cache_get(which == 1 ? "preprocess.process" : "preprocess.stem", n, seed, dm_pp_bench_host_build,
                             &which, &lent);
    if (rc < 0) return rc;
    const dm_pp_bench_host *hh = (const dm_pp_bench_host *)lent;
    const char *h = hh->text;
    const size_t nw = hh->nw;
    b->n = n;
    rc = dm_stopset_load(&b->stop, NULL);
    cudaError_t e = cudaSuccess;
#define DM_BM(p, sz) if (rc >= 0 && e == cudaSuccess) rc = dm_device_alloc((void **)&(p), (size_t)(sz))
    DM_BM(b->text, n);
    DM_BM(b->stems, n);
    DM_BM(b->tok_start, n * 4);
    DM_BM(b->tok_end, n * 4);
    DM_BM(b->keep, n * 4);
    DM_BM(b->hash, n * 8);
    DM_BM(b->stem_len, n);
    DM_BM(b->drops, 32);
    if (which == 1) {
        size_t tiles = dm_pp_process_max_tiles(n);
        DM_BM(b->tile_cnt, tiles * 4);
        DM_BM(b->tile_off, tiles * 4);
        DM_BM(b->kept, 4);
        DM_BM(b->out_len, n);
        DM_BM(b->out_hash, n * 8);
        DM_BM(b->out_start, n * 8);
        if (rc >= 0 && e == cudaSuccess)
            e = cub::DeviceScan::ExclusiveSum(NULL, b->cub_bytes, b->tile_cnt, b->tile_off, (int)tiles);
        DM_BM(b->cub_tmp, b->cub_bytes);
        /* the kept tokens fill a prefix of the outputs: the rest stays 0 for every instance */
        if (rc >= 0 && e == cudaSuccess) e = cudaMemset(b->out_len, 0, n);
        if (rc >= 0 && e == cudaSuccess) e = cudaMemset(b->out_hash, 0, n * 8);
        if (rc >= 0 && e == cudaSuccess) e = cudaMemset(b->out_start, 0, n * 8);
    }
    DM_BM(b->d_keys, (b->stop.cap + DM_STOPSET_FILTER_WORDS) * 8);
    DM_BM(b->d_woff, b->stop.cap * 4);
    DM_BM(b->d_wlen, b->stop.cap);
    DM_BM(b->d_wbytes, b->stop.bytes_len);
    DM_BM(b->words_out, n);
    DM_BM(b->w_off, nw * 4);
    DM_BM(b->w_len, nw * 4);
    DM_BM(b->w_out_len, nw * 4);
#undef DM_BM
    if (rc >= 0 && e == cudaSuccess) e = cudaMemcpy(b->text, h, n, cudaMemcpyHostToDevice);
    if (rc >= 0 && e == cudaSuccess && which == 1) {
        e = cudaMemcpy(b->tok_start, hh->ts, (size_t)hh->t * 4, cudaMemcpyHostToDevice);
        if (e == cudaSuccess) e = cudaMemcpy(b->tok_end, hh->te, (size_t)hh->t * 4, cudaMemcpyHostToDevice);
    }
    if (rc >= 0 && e == cudaSuccess) e = cudaMemcpy(b->w_off, hh->woff, nw * 4, cudaMemcpyHostToDevice);
    if (rc >= 0 && e == cudaSuccess) e = cudaMemcpy(b->w_len, hh->wlen, nw * 4, cudaMemcpyHostToDevice);
    if (e == cudaSuccess && rc >= 0) {
        e = cudaMemcpy(b->d_keys, b->stop.keys, (b->stop.cap + DM_STOPSET_FILTER_WORDS) * 8, cudaMemcpyHostToDevice);
        if (e == cudaSuccess) e = cudaMemcpy(b->d_woff, b->stop.word_off, b->stop.cap * 4, cudaMemcpyHostToDevice);
        if (e == cudaSuccess) e = cudaMemcpy(b->d_wlen, b->stop.word_len, b->stop.cap, cudaMemcpyHostToDevice);
        if (e == cudaSuccess) e = cudaMemcpy(b->d_wbytes, b->stop.bytes, b->stop.bytes_len, cudaMemcpyHostToDevice);
    }
    dm_wl_cache_put(lent);
    b->t = nw; /* stem bench: words; process bench: tokens (one per word) */
    if (rc < 0) return rc;
    if (e != cudaSuccess) return DM_ERR(DM_ERR_CUDA, "bench: %s", cudaGetErrorString(e));
    return DM_OK;
}

static int dm_pp_bench_create_process(void **state, size_t n, uint64_t seed)
{
    dm_pp_bench *b = NULL;
    int rc = dm_pp_bench_create_common(&b, n, seed, 1);
    if (rc < 0) dm_pp_bench_destroy(b), b = NULL;
    *state = b;
    return rc;
}
static int dm_pp_bench_create_stem(void **state, size_t n, uint64_t seed)
{
    dm_pp_bench *b = NULL;
    int rc = dm_pp_bench_create_common(&b, n, seed, 2);
    if (rc < 0) dm_pp_bench_destroy(b), b = NULL;
    *state = b;
    return rc;
}

static dm_stop_view dm_pp_bench_stop(const dm_pp_bench *b)
{
    dm_stop_view v = {b->d_keys, b->d_woff, b->d_wlen, b->d_wbytes, b->stop.cap};
    return v;
}

static int dm_pp_bench_run(void *state, const dm_tune_instance *inst, void *stream)
{
    dm_pp_bench *b = (dm_pp_bench *)state;
    if (b->which == 1) {
        DM_CUDA_TRY(cudaMemcpyAsync(b->stems, b->text, b->n, cudaMemcpyDeviceToDevice, (cudaStream_t)stream));
        DM_CUDA_TRY(cudaMemsetAsync(b->drops, 0, 32, (cudaStream_t)stream));
        dm_tok_params p = {2, 64, 0, 1};
        dm_pp_process_args a = {b->text, b->stems, b->tok_start, b->tok_end, b->t, dm_pp_bench_stop(b), p,
                                b->tile_cnt, b->tile_off, b->cub_tmp, b->cub_bytes, b->hash, b->keep, b->stem_len,
                                b->out_hash, b->out_start, b->out_len, b->kept, b->drops};
        return inst->launch(&a, b->t, stream);
    }
    dm_pp_stem_args a = {b->text, b->w_off, b->w_len, b->t, b->words_out, b->w_out_len};
    return inst->launch(&a, b->t, stream);
}

static int dm_pp_bench_output(void *state, void *host, size_t *nbytes)
{
    dm_pp_bench *b = (dm_pp_bench *)state;
    size_t sz = b->which == 1 ? 4 + b->t * 17 + b->n : b->n + b->t * 4;
    *nbytes = sz;
    if (!host) return DM_OK;
    char *h = (char *)host;
    if (b->which == 1) {
        DM_CUDA_TRY(cudaMemcpy(h, b->kept, 4, cudaMemcpyDeviceToHost));
        DM_CUDA_TRY(cudaMemcpy(h + 4, b->out_hash, b->t * 8, cudaMemcpyDeviceToHost));
        DM_CUDA_TRY(cudaMemcpy(h + 4 + b->t * 8, b->out_start, b->t * 8, cudaMemcpyDeviceToHost));
        DM_CUDA_TRY(cudaMemcpy(h + 4 + b->t * 16, b->out_len, b->t, cudaMemcpyDeviceToHost));
        DM_CUDA_TRY(cudaMemcpy(h + 4 + b->t * 17, b->stems, b->n, cudaMemcpyDeviceToHost));
    } else {
        DM_CUDA_TRY(cudaMemcpy(h, b->words_out, b->n, cudaMemcpyDeviceToHost));
        DM_CUDA_TRY(cudaMemcpy(h + b->n, b->w_out_len, b->t * 4, cudaMemcpyDeviceToHost));
    }
    return DM_OK;
}

#define DM_PP_NINST(a) ((int)(sizeof(a) / sizeof((a)[0])))
static const dm_tune_kernel g_kernels[] = {
    {"preprocess.tokens", "token [start, end) of normalised text (count per tile, scan, place)", "bytes",
     g_tokens_inst, DM_PP_NINST(g_tokens_inst), 0, dm_pp_bench_tokens_create, dm_pp_tune_bench_run,
     dm_pp_tune_bench_output, dm_pp_tune_bench_destroy, 0.0, DM_PP_BENCH_N_tokens, 1.0, dm_pp_tune_bench_resize},
    {"preprocess.process", "filter, stop set, Porter stem, hash per token; kept tokens compacted", "tokens",
     g_process_inst, DM_PP_NINST(g_process_inst), 0, dm_pp_bench_create_process, dm_pp_bench_run,
     dm_pp_bench_output, dm_pp_bench_destroy, 0.0, (size_t)256 << 20, 1.0, NULL},
    {"preprocess.docs", "per-document token bounds", "documents", g_docs_inst, DM_PP_NINST(g_docs_inst), 0,
     dm_pp_bench_docs_create, dm_pp_tune_bench_run, dm_pp_tune_bench_output, dm_pp_tune_bench_destroy, 0.0,
     DM_PP_BENCH_N_docs, 1.0, dm_pp_tune_bench_resize},
    {"preprocess.first", "first occurrences of the terms in a batch (hash set, flags, CUB select)", "tokens",
     g_first_inst, DM_PP_NINST(g_first_inst), 0, dm_pp_bench_first_create, dm_pp_tune_bench_run,
     dm_pp_tune_bench_output, dm_pp_tune_bench_destroy, 0.0, DM_PP_BENCH_N_first, 1.0, dm_pp_tune_bench_resize},
    {"preprocess.stem_words", "Porter stem of a word list (docmine stem)", "words", g_stem_inst,
     DM_PP_NINST(g_stem_inst), 0, dm_pp_bench_create_stem, dm_pp_bench_run, dm_pp_bench_output,
     dm_pp_bench_destroy, 0.0, (size_t)64 << 20, 1.0, NULL},
};
enum { K_TOKENS = 0, K_PROCESS, K_DOCS, K_FIRST, K_STEM, K_COUNT };
static int g_force[K_COUNT] = {-1, -1, -1, -1, -1};

static const dm_tune_instance *dm_pp_pick(int k, size_t n)
{
    if (g_force[k] >= 0) return &g_kernels[k].instances[g_force[k]];
    return dm_tune_select(&g_kernels[k], n);
}

extern "C" int dm_preprocess_tune_register(void)
{
    for (int k = 0; k < K_COUNT; k++) DM_TRY(dm_tune_register(&g_kernels[k]));
    return DM_OK;
}
extern "C" int dm_pp_cuda_kernel_count(void) { return K_COUNT; }
extern "C" int dm_pp_cuda_instance_count(int k) { return k >= 0 && k < K_COUNT ? g_kernels[k].n_instances : 0; }
extern "C" const char *dm_pp_cuda_kernel_name(int k) { return k >= 0 && k < K_COUNT ? g_kernels[k].name : "?"; }
extern "C" int dm_pp_cuda_force_instance(int k, int instance)
{
    if (k < 0 || k >= K_COUNT || instance < -1 || instance >= g_kernels[k].n_instances)
        return DM_ERR(DM_ERR_INVALID_ARG, "preprocess: no instance %d of kernel %d", instance, k);
    g_force[k] = instance;
    return DM_OK;
}

/* ------------------------------------------------------------------ device of worker threads */

extern "C" int dm_pp_cuda_get_device(int *dev)
{
    DM_CUDA_TRY(cudaGetDevice(dev));
    return DM_OK;
}
extern "C" int dm_pp_cuda_set_device(int dev)
{
    DM_CUDA_TRY(cudaSetDevice(dev));
    return DM_OK;
}

/* ------------------------------------------------------------------ per-stage times */

/* per thread: each pipeline worker has its own workspace, stream and times */
static thread_local double g_t_h2d, g_t_kern, g_t_d2h;
extern "C" void dm_pp_cuda_take_times(double *h2d, double *kernels, double *d2h)
{
    *h2d = g_t_h2d;
    *kernels = g_t_kern;
    *d2h = g_t_d2h;
    g_t_h2d = g_t_kern = g_t_d2h = 0;
}

/* ------------------------------------------------------------------ device workspace */

/* Grown on demand (25% headroom), kept between batches and between calls: no per-batch
 * allocation, stream or event creation, and no instance selection (which may tune) inside the
 * timed windows once warm. A call of dm_tokenize_cuda takes a workspace of the current device
 * from a process-wide pool and gives it back at the end: two pipeline workers hold two
 * workspaces and two streams, so that one batch's copies overlap the other's kernels, and later
 * calls (new worker threads) reuse them. (Released at process exit.) */
typedef struct dm_pp_ws {
    int device;
    struct dm_pp_ws *next_free;
    uint32_t *h_small; /* page-locked: [0..3] counts read back between launches, [4..11] drops */
    const dm_tune_instance *inst[K_STEM]; /* chosen for the current capacities (K_TOKENS..K_FIRST) */
    size_t n_cap, t_cap, d_cap, cub_cap, stop_cap, stop_bytes;
    char *text, *stems;
    uint32_t *tile_cnt, *tile_off, *tok_start, *tok_end, *st_start;
    uint8_t *stem_len, *out_len;
    uint64_t *hash, *out_hash, *out_start, *doc_off, *doc_tok;
    unsigned long long *drops; /* [4] drops by reason, then the words that total, kept, n_first point to */
    uint32_t *total, *kept;    /* tokens found, tokens kept (device) */
    uint32_t *n_first;         /* first occurrences listed (device) */
    /* first occurrences (K_FIRST): the set, the flags and the list, grown with the kept tokens */
    uint64_t *f_keys, *f_list;
    uint32_t *f_idx;
    uint8_t *f_flag;
    size_t f_cap;              /* tokens they were sized for (the set: dm_tok_first_slots(f_cap)) */
    void *cub;
    uint64_t *keys;
    uint32_t *woff;
    uint8_t *wlen;
    char *wbytes;
    uint64_t stop_sum; /* checksum of the set last uploaded (0 = none) */
    cudaStream_t stream;
    cudaEvent_t ev[4];  /* H2D start, kernels start, kernels end, D2H end */
    cudaEvent_t kev[5]; /* phase bounds inside the kernels (kernel-only benchmark) */
} dm_pp_ws;
static pthread_mutex_t g_ws_mu = PTHREAD_MUTEX_INITIALIZER;
static dm_pp_ws *g_ws_free;           /* workspaces not held by a call */
static thread_local dm_pp_ws *g_wsp;  /* the calling thread's workspace during a call */

/* Takes a workspace of the current device from the pool (a new one if none is free). */
static int dm_pp_ws_acquire(void)
{
    int dev = 0;
    DM_CUDA_TRY(cudaGetDevice(&dev));
    pthread_mutex_lock(&g_ws_mu);
    dm_pp_ws **pp = &g_ws_free;
    while (*pp && (*pp)->device != dev) pp = &(*pp)->next_free;
    dm_pp_ws *w = *pp;
    if (w) *pp = w->next_free;
    pthread_mutex_unlock(&g_ws_mu);
    if (!w) {
        w = (dm_pp_ws *)dm_calloc(1, sizeof(*w));
        if (!w) return DM_ERR(DM_ERR_NOMEM, "tokenise: out of memory");
        w->device = dev;
    }
    w->next_free = NULL;
    g_wsp = w;
    return DM_OK;
}

static void dm_pp_ws_release(void)
{
    dm_pp_ws *w = g_wsp;
    g_wsp = NULL;
    if (!w) return;
    pthread_mutex_lock(&g_ws_mu);
    w->next_free = g_ws_free;
    g_ws_free = w;
    pthread_mutex_unlock(&g_ws_mu);
}

/* The instance of kernel k (K_TOKENS..K_FIRST) for the current workspace: a forced one, else the
 * tuner's choice for the workspace's capacity class, made in dm_pp_ws_reserve before any timed
 * window. */
static const dm_tune_instance *dm_pp_ws_inst(const dm_pp_ws *w, int k)
{
    if (g_force[k] >= 0) return &g_kernels[k].instances[g_force[k]];
    return w->inst[k];
}

static int dm_pp_ws_grow(void **p, size_t *cap, size_t need)
{
    if (need <= *cap && *p) return DM_OK;
    dm_device_free(*p);
    *p = NULL;
    size_t nc = need + need / 4 + 4096;
    DM_PP_ALLOC_TRY(dm_device_alloc(p, nc));
    *cap = nc;
    return DM_OK;
}

static int dm_pp_ws_reserve(size_t n, size_t n_docs)
{
    dm_pp_ws *w = g_wsp;
    /* each piece on its own: a failure part way (out of memory) leaves the workspace in the pool,
     * and the next call must make what is missing, not find a stream and take the rest as made
     * (the kernels would write the counts through NULL: an illegal address poisons the context) */
    if (!w->stream) DM_CUDA_TRY(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking));
    for (int i = 0; i < 4; i++)
        if (!w->ev[i]) DM_CUDA_TRY(cudaEventCreate(&w->ev[i]));
    for (int i = 0; i < 5; i++)
        if (!w->kev[i]) DM_CUDA_TRY(cudaEventCreate(&w->kev[i]));
    if (!w->drops) {
        DM_PP_ALLOC_TRY(dm_device_alloc((void **)&w->drops, 6 * sizeof(unsigned long long)));
        w->total = (uint32_t *)(w->drops + 4);
        w->kept = w->total + 1;
        w->n_first = w->total + 2;
    }
    if (!w->h_small) DM_PP_ALLOC_TRY(dm_host_alloc_pinned((void **)&w->h_small, 16 * sizeof(uint32_t)));
    int chosen = 0;
    /* the capacities are set only once every array of their block is made (n_cap, t_cap after the
     * CUB storage too: a NULL one would turn the scans into size queries, the tiles' offsets left
     * unset), so that a call after one that failed here makes them again */
    if (n > w->n_cap || !w->text || !w->cub) {
        dm_device_free(w->text); dm_device_free(w->stems); dm_device_free(w->tile_cnt); dm_device_free(w->tile_off);
        dm_device_free(w->tok_start); dm_device_free(w->tok_end); dm_device_free(w->st_start);
        dm_device_free(w->stem_len); dm_device_free(w->out_len); dm_device_free(w->hash); dm_device_free(w->out_hash);
        dm_device_free(w->out_start);
        /* all of them NULL: a failed allocation below must not leave a freed pointer to free again */
        w->text = w->stems = NULL;
        w->tile_cnt = w->tile_off = w->tok_start = w->tok_end = w->st_start = NULL;
        w->stem_len = w->out_len = NULL;
        w->hash = w->out_hash = w->out_start = NULL;
        size_t nc = n + n / 4 + 4096, tc = nc / 2 + 1;
        w->n_cap = w->t_cap = 0;
        DM_PP_ALLOC_TRY(dm_device_alloc((void **)&w->text, nc));
        DM_PP_ALLOC_TRY(dm_device_alloc((void **)&w->stems, nc));
        size_t tiles = dm_pp_tokens_max_tiles(nc), pt = dm_pp_process_max_tiles(tc);
        if (pt > tiles) tiles = pt;
        DM_PP_ALLOC_TRY(dm_device_alloc((void **)&w->tile_cnt, tiles * 4));
        DM_PP_ALLOC_TRY(dm_device_alloc((void **)&w->tile_off, tiles * 4));
        DM_PP_ALLOC_TRY(dm_device_alloc((void **)&w->tok_start, tc * 4));
        DM_PP_ALLOC_TRY(dm_device_alloc((void **)&w->tok_end, tc * 4));
        DM_PP_ALLOC_TRY(dm_device_alloc((void **)&w->st_start, tc * 4));
        DM_PP_ALLOC_TRY(dm_device_alloc((void **)&w->stem_len, tc));
        DM_PP_ALLOC_TRY(dm_device_alloc((void **)&w->out_len, tc));
        DM_PP_ALLOC_TRY(dm_device_alloc((void **)&w->hash, tc * 8));
        DM_PP_ALLOC_TRY(dm_device_alloc((void **)&w->out_hash, tc * 8));
        DM_PP_ALLOC_TRY(dm_device_alloc((void **)&w->out_start, tc * 8));
        /* CUB temporary storage for the scans of the tiles (text bytes or tokens) and the
         * select of the first occurrences (at most tc tokens) */
        size_t b1 = 0, b2 = 0;
        DM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(NULL, b1, w->tile_cnt, w->tile_off, (int)tiles));
        DM_TRY(dm_pp_first_cub_bytes(tc, &b2));
        DM_TRY(dm_pp_ws_grow(&w->cub, &w->cub_cap, b1 > b2 ? b1 : b2));
        w->n_cap = nc;
        w->t_cap = tc;
        chosen = 1;
    }
    if (n_docs + 1 > w->d_cap || !w->doc_off || !w->doc_tok) {
        dm_device_free(w->doc_off);
        dm_device_free(w->doc_tok);
        w->doc_off = w->doc_tok = NULL;
        w->d_cap = 0; /* set once both are made (doc_tok NULL with the old capacity: the kernel wrote through NULL) */
        size_t dc = n_docs + 1 + (n_docs + 1) / 4 + 64;
        DM_PP_ALLOC_TRY(dm_device_alloc((void **)&w->doc_off, dc * 8));
        DM_PP_ALLOC_TRY(dm_device_alloc((void **)&w->doc_tok, dc * 8));
        w->d_cap = dc;
        chosen = 1;
    }
    /* Instances by the class of the capacities, not of each batch: batches of varying size then
     * share one choice per kernel, and a new class (which may mean tuning it) is met here, when
     * the workspace grows, never inside the H2D/kernel/D2H event windows. */
    if (chosen || !w->inst[K_TOKENS]) {
        w->inst[K_TOKENS] = dm_pp_pick(K_TOKENS, w->n_cap);
        w->inst[K_PROCESS] = dm_pp_pick(K_PROCESS, w->t_cap);
        w->inst[K_DOCS] = dm_pp_pick(K_DOCS, w->d_cap);
        w->inst[K_FIRST] = dm_pp_pick(K_FIRST, w->t_cap);
    }
    return DM_OK;
}

/* The first-occurrence arrays for kept tokens (grown with 25% headroom, kept between batches). */
static int dm_pp_ws_first_reserve(size_t kept)
{
    dm_pp_ws *w = g_wsp;
    if (kept <= w->f_cap && w->f_keys && w->f_idx && w->f_flag && w->f_list) return DM_OK;
    dm_device_free(w->f_keys); dm_device_free(w->f_list); dm_device_free(w->f_idx); dm_device_free(w->f_flag);
    w->f_keys = w->f_list = NULL;
    w->f_idx = NULL;
    w->f_flag = NULL;
    w->f_cap = 0;
    size_t fc = kept + kept / 4 + 1024, slots = dm_tok_first_slots(fc);
    DM_PP_ALLOC_TRY(dm_device_alloc((void **)&w->f_keys, slots * 8));
    DM_PP_ALLOC_TRY(dm_device_alloc((void **)&w->f_idx, slots * 4));
    DM_PP_ALLOC_TRY(dm_device_alloc((void **)&w->f_flag, fc));
    DM_PP_ALLOC_TRY(dm_device_alloc((void **)&w->f_list, fc * 8));
    w->f_cap = fc;
    return DM_OK;
}

static int dm_pp_ws_stop(const dm_stopset *s)
{
    dm_pp_ws *w = g_wsp;
    static const uint64_t empty_key = 0;
    uint32_t cap = s && s->cap ? s->cap : 1;
    w->stop_sum = 0; /* none uploaded until the end: a failure below leaves arrays freed or unfilled */
    DM_TRY(dm_pp_ws_grow((void **)&w->keys, &w->stop_cap, ((size_t)cap + DM_STOPSET_FILTER_WORDS) * 8));
    size_t c2 = 0, c3 = 0, c4 = 0;
    dm_device_free(w->woff);
    dm_device_free(w->wlen);
    dm_device_free(w->wbytes);
    w->woff = NULL;
    w->wlen = NULL;
    w->wbytes = NULL;
    DM_TRY(dm_pp_ws_grow((void **)&w->woff, &c2, (size_t)cap * 4));
    DM_TRY(dm_pp_ws_grow((void **)&w->wlen, &c3, cap));
    DM_TRY(dm_pp_ws_grow((void **)&w->wbytes, &c4, s && s->bytes_len ? s->bytes_len : 1));
    if (s && s->cap) {
        DM_CUDA_TRY(cudaMemcpy(w->keys, s->keys, ((size_t)s->cap + DM_STOPSET_FILTER_WORDS) * 8, cudaMemcpyHostToDevice));
        DM_CUDA_TRY(cudaMemcpy(w->woff, s->word_off, (size_t)s->cap * 4, cudaMemcpyHostToDevice));
        DM_CUDA_TRY(cudaMemcpy(w->wlen, s->word_len, s->cap, cudaMemcpyHostToDevice));
        if (s->bytes_len) DM_CUDA_TRY(cudaMemcpy(w->wbytes, s->bytes, s->bytes_len, cudaMemcpyHostToDevice));
    } else {
        DM_CUDA_TRY(cudaMemcpy(w->keys, &empty_key, 8, cudaMemcpyHostToDevice));
    }
    return DM_OK;
}

/* ------------------------------------------------------------------ one sub-batch */

/* ------------------------------------------------------------------ pinned result sets */

/* The arrays of a result live in one set of page-locked buffers, so that the D2H copies run
 * asynchronously at full bandwidth into memory that is already mapped (a pageable destination
 * is staged by the driver, about 1.4 GB/s, and freshly malloc'ed arrays fault on every page).
 * dm_tok_result_free returns the set to a small pool, and the next call takes it again: once
 * warm, no batch allocates or pins host memory. Capacities grow by 25% over the need. */
typedef struct dm_pp_pinset {
    struct dm_pp_pinset *next;
    uint64_t *hash, *start, *doc_tok, *first;
    uint8_t *stem_len;
    char *stems;
    size_t tok_cap, doc_cap, stem_cap, first_cap;
    uint64_t *dhash; /* device copy of the hashes (dm_tok_options.device_hashes), dhash_cap of them */
    size_t dhash_cap;
} dm_pp_pinset;
enum { DM_PP_PINSETS_KEPT = 8 }; /* sets kept in the pool; more are freed */
static pthread_mutex_t g_pin_mu = PTHREAD_MUTEX_INITIALIZER;
static dm_pp_pinset *g_pin_free;
static int g_pin_n;

static void dm_pp_pinset_free(dm_pp_pinset *p)
{
    if (!p) return;
    dm_host_free_pinned(p->hash);
    dm_host_free_pinned(p->start);
    dm_host_free_pinned(p->doc_tok);
    dm_host_free_pinned(p->stem_len);
    dm_host_free_pinned(p->stems);
    dm_host_free_pinned(p->first);
    dm_device_free(p->dhash);
    dm_free(p);
}

extern "C" int dm_pp_cuda_copy(void *dst, const void *src, size_t n)
{
    if (n == 0) return DM_OK;
    if (!dst || !src) return DM_ERR(DM_ERR_INVALID_ARG, "dm_pp_cuda_copy: NULL argument");
    /* the calling thread's stream: no wait for the other workers' streams */
    cudaError_t e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, cudaStreamPerThread);
    if (e == cudaSuccess) e = cudaStreamSynchronize(cudaStreamPerThread);
    if (e != cudaSuccess) return DM_ERR(DM_ERR_CUDA, "token hashes: copy of %zu bytes: %s", n, cudaGetErrorString(e));
    return DM_OK;
}

extern "C" int dm_pp_cuda_dev_grow(uint64_t **p, size_t *cap, size_t need, size_t keep, size_t limit)
{
    if (!p || !cap || keep > need) return DM_ERR(DM_ERR_INVALID_ARG, "dm_pp_cuda_dev_grow: bad arguments");
    if (need <= *cap && *p) return DM_OK;
    size_t nc = need + need / 2 + 1024;
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return DM_ERR(DM_ERR_CUDA, "token hashes: no device memory information");
    if (limit > 0 && nc > limit) return DM_ERR(DM_ERR_NOMEM, "token hashes: %zu on the device exceed the limit of %zu", nc, limit);
    if (nc * 8 > free_b / 2)
        return DM_ERR(DM_ERR_NOMEM, "token hashes: %zu on the device would take more than half of its free %.1f GB", nc,
                      (double)free_b / 1e9);
    uint64_t *q = NULL;
    DM_PP_ALLOC_TRY(dm_device_alloc((void **)&q, nc * 8));
    int rc = keep && *p ? dm_pp_cuda_copy(q, *p, keep * 8) : DM_OK;
    if (rc < 0) {
        dm_device_free(q);
        return rc;
    }
    dm_device_free(*p);
    *p = q;
    *cap = nc;
    return DM_OK;
}

/* Grows a result's device copy of the hashes to hold need, keeping the first keep (the copies
 * of earlier sub-batches into it have completed: each sub-batch ends with a synchronisation). */
static int dm_pp_dhash_grow(dm_tok_result *out, size_t need, size_t keep)
{
    dm_pp_pinset *p = (dm_pp_pinset *)out->pinned;
    if (!p) return DM_ERR(DM_ERR_INVALID_ARG, "tokenise: result without its page-locked set");
    DM_TRY(dm_pp_cuda_dev_grow(&p->dhash, &p->dhash_cap, need, keep, 0));
    out->dev_hash = p->dhash;
    return DM_OK;
}

/* Grows one page-locked array to hold need elements of elem bytes, keeping the first keep. */
static int dm_pp_pin_grow(void **a, size_t *cap, size_t need, size_t keep, size_t elem)
{
    if (need <= *cap && *a) return DM_OK;
    size_t nc = need + need / 4 + 1024;
    void *q = NULL;
    DM_PP_ALLOC_TRY(dm_host_alloc_pinned(&q, nc * elem));
    if (keep && *a) memcpy(q, *a, keep * elem);
    dm_host_free_pinned(*a);
    *a = q;
    *cap = nc;
    return DM_OK;
}

extern "C" void dm_pp_cuda_result_release(dm_tok_result *r)
{
    dm_pp_pinset *p = (dm_pp_pinset *)(r ? r->pinned : NULL);
    if (!p) return;
    r->pinned = NULL;
    pthread_mutex_lock(&g_pin_mu);
    if (g_pin_n < DM_PP_PINSETS_KEPT) {
        p->next = g_pin_free;
        g_pin_free = p;
        g_pin_n++;
        p = NULL;
    }
    pthread_mutex_unlock(&g_pin_mu);
    dm_pp_pinset_free(p);
}

/* Gives out a pinned set (from the pool when one is free) holding n_docs + 1 bounds, text_len
 * stem bytes and, to begin with, tokens_hint tokens. */
static int dm_pp_result_init(dm_tok_result *out, size_t n_docs, size_t text_len, size_t tokens_hint)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&g_pin_mu);
    dm_pp_pinset *p = g_pin_free;
    if (p) {
        g_pin_free = p->next;
        g_pin_n--;
    }
    pthread_mutex_unlock(&g_pin_mu);
    if (!p && !(p = (dm_pp_pinset *)dm_calloc(1, sizeof(*p)))) return DM_ERR(DM_ERR_NOMEM, "tokenise: out of memory");
    p->next = NULL;
    out->pinned = p;
    out->n_docs = n_docs;
    DM_TRY(dm_pp_pin_grow((void **)&p->doc_tok, &p->doc_cap, n_docs + 1, 0, 8));
    DM_TRY(dm_pp_pin_grow((void **)&p->stems, &p->stem_cap, text_len ? text_len : 1, 0, 1));
    if (p->tok_cap < tokens_hint || !p->hash || !p->start || !p->stem_len) {
        /* tok_cap changes only when all three hold the new capacity */
        size_t c0 = p->tok_cap, c1 = p->tok_cap, c2 = p->tok_cap;
        DM_TRY(dm_pp_pin_grow((void **)&p->hash, &c0, tokens_hint, 0, 8));
        DM_TRY(dm_pp_pin_grow((void **)&p->start, &c1, tokens_hint, 0, 8));
        DM_TRY(dm_pp_pin_grow((void **)&p->stem_len, &c2, tokens_hint, 0, 1));
        p->tok_cap = c0;
    }
    DM_TRY(dm_pp_pin_grow((void **)&p->first, &p->first_cap, tokens_hint / 16 + 1024, 0, 8));
    out->first = p->first;
    out->n_first = 0;
    out->doc_tok = p->doc_tok;
    out->stems = p->stems;
    out->hash = p->hash;
    out->start = p->start;
    out->stem_len = p->stem_len;
    out->cap = p->tok_cap;
    return DM_OK;
}

/* Room for need entries in out->first (keeping the n_first listed). */
static int dm_pp_first_append(dm_tok_result *out, size_t need)
{
    dm_pp_pinset *p = (dm_pp_pinset *)out->pinned;
    if (!p) return DM_ERR(DM_ERR_INVALID_ARG, "tokenise: result without its page-locked set");
    DM_TRY(dm_pp_pin_grow((void **)&p->first, &p->first_cap, need, out->n_first, 8));
    out->first = p->first;
    return DM_OK;
}

static int dm_pp_append(dm_tok_result *out, size_t need)
{
    if (need <= out->cap) return DM_OK;
    dm_pp_pinset *p = (dm_pp_pinset *)out->pinned;
    if (p) { /* page-locked arrays: grown with their content (n_tokens so far) */
        size_t c0 = p->tok_cap, c1 = p->tok_cap, c2 = p->tok_cap;
        DM_TRY(dm_pp_pin_grow((void **)&p->hash, &c0, need, out->n_tokens, 8));
        DM_TRY(dm_pp_pin_grow((void **)&p->start, &c1, need, out->n_tokens, 8));
        DM_TRY(dm_pp_pin_grow((void **)&p->stem_len, &c2, need, out->n_tokens, 1));
        p->tok_cap = c0;
        out->hash = p->hash;
        out->start = p->start;
        out->stem_len = p->stem_len;
        out->cap = p->tok_cap;
        return DM_OK;
    }
    size_t nc = out->cap ? out->cap : 1024;
    while (nc < need) nc *= 2;
    uint64_t *h = (uint64_t *)dm_realloc(out->hash, nc * 8);
    if (h) out->hash = h;
    uint64_t *s = (uint64_t *)dm_realloc(out->start, nc * 8);
    if (s) out->start = s;
    uint8_t *l = (uint8_t *)dm_realloc(out->stem_len, nc);
    if (l) out->stem_len = l;
    if (!h || !s || !l) return DM_ERR(DM_ERR_NOMEM, "tokenise: cannot hold %zu tokens", nc);
    out->cap = nc;
    return DM_OK;
}

/* The kernels of one sub-batch on device-resident data: w->text[0..n) holds the normalised text,
 * w->doc_off[0..nd] the document offsets relative to it. Leaves the kept tokens in w->out_*,
 * the stems in w->stems, the per-document bounds in w->doc_tok and the list of the tokens that
 * may be their term's first occurrence in w->f_list (w->n_first of them, device); *t = tokens
 * found, *kept = tokens kept, drops[4] the dropped tokens by reason. Two host round trips read
 * the counts that size the next launches. phases: record w->kev[0..4] at the bounds of
 * tokenise (count per tile, scan, place), process (filter, stop, stem, hash, compact), document
 * bounds and first occurrences. */
static int dm_pp_kernels(size_t n, size_t nd, const dm_stopset *stop, const dm_tok_options *opt,
                         uint32_t *t_out, uint32_t *kept_out, unsigned long long drops[4], int phases)
{
    dm_pp_ws *w = g_wsp;
    cudaStream_t st = w->stream;
    uint32_t t = 0, kept = 0;
    /* counts read back between launches land in page-locked memory: a copy to pageable memory
     * would be staged by the driver and wait behind the other worker's large copies */
    uint32_t *hs = w->h_small;
    unsigned long long *hdrops = (unsigned long long *)(hs + 4);
    const dm_tune_instance *inst;
    drops[0] = drops[1] = drops[2] = drops[3] = 0;
    if (phases) DM_CUDA_TRY(cudaEventRecord(w->kev[0], st));
    if (n > 0) {
        DM_CUDA_TRY(cudaMemcpyAsync(w->stems, w->text, n, cudaMemcpyDeviceToDevice, st));
        DM_CUDA_TRY(cudaMemsetAsync(w->drops, 0, 4 * sizeof(unsigned long long), st));
        dm_pp_tokens_args ta = {w->text, n, w->tile_cnt, w->tile_off, w->cub, w->cub_cap,
                                w->tok_start, w->tok_end, w->total};
        inst = dm_pp_ws_inst(w, K_TOKENS);
        DM_TRY(inst->launch(&ta, n, st));
        DM_CUDA_TRY(cudaMemcpyAsync(hs + 0, w->total, 4, cudaMemcpyDeviceToHost, st));
        DM_CUDA_TRY(cudaStreamSynchronize(st));
        t = hs[0];
    }
    if (phases) DM_CUDA_TRY(cudaEventRecord(w->kev[1], st));
    if (t > 0) {
        dm_stop_view sv = {w->keys, w->woff, w->wlen, w->wbytes, stop ? stop->cap : 0};
        dm_tok_params p = {opt->min_len, opt->max_len, opt->keep_numbers, opt->stem};
        dm_pp_process_args pr = {w->text, w->stems, w->tok_start, w->tok_end, t, sv, p,
                                 w->tile_cnt, w->tile_off, w->cub, w->cub_cap, w->hash, w->st_start, w->stem_len,
                                 w->out_hash, w->out_start, w->out_len, w->kept, w->drops};
        inst = dm_pp_ws_inst(w, K_PROCESS);
        DM_TRY(inst->launch(&pr, t, st));
    }
    if (phases) DM_CUDA_TRY(cudaEventRecord(w->kev[2], st));
    if (t > 0) {
        DM_CUDA_TRY(cudaMemcpyAsync(hs + 2, w->kept, 4, cudaMemcpyDeviceToHost, st));
        DM_CUDA_TRY(cudaMemcpyAsync(hdrops, w->drops, 4 * sizeof(unsigned long long), cudaMemcpyDeviceToHost, st));
        DM_CUDA_TRY(cudaStreamSynchronize(st));
        kept = hs[2];
        for (int i = 0; i < 4; i++) drops[i] = hdrops[i];
    }
    {
        dm_pp_docs_args da = {w->doc_off, nd, w->out_start, kept, w->doc_tok};
        inst = dm_pp_ws_inst(w, K_DOCS);
        DM_TRY(inst->launch(&da, nd + 1, st));
    }
    if (phases) DM_CUDA_TRY(cudaEventRecord(w->kev[3], st));
    {
        DM_TRY(dm_pp_ws_first_reserve(kept));
        dm_pp_first_args fa = {w->out_hash, w->out_start, w->out_len, w->stems, kept, w->f_keys, w->f_idx,
                               w->f_flag, w->f_list, w->n_first, w->cub, w->cub_cap};
        inst = dm_pp_ws_inst(w, K_FIRST);
        DM_TRY(inst->launch(&fa, kept, st));
    }
    if (phases) DM_CUDA_TRY(cudaEventRecord(w->kev[4], st));
    *t_out = t;
    *kept_out = kept;
    return DM_OK;
}

/* Documents [d0, d1) of in: text bytes in->doc_off[d0] .. in->doc_off[d1]. */
static int dm_pp_run_range(dm_tok_result *out, const dm_tok_batch *in, size_t d0, size_t d1,
                           const dm_stopset *stop, const dm_tok_options *opt)
{
    dm_pp_ws *w = g_wsp;
    size_t base = in->doc_off[d0], n = in->doc_off[d1] - base, nd = d1 - d0;
    if (n >= 0x7fffffffu) return DM_ERR(DM_ERR_INVALID_ARG, "tokenise: a sub-batch of %zu bytes exceeds 2 GB", n);
    DM_TRY(dm_pp_ws_reserve(n, nd));
    cudaStream_t st = w->stream;
    /* relative document offsets */
    uint64_t *doff = (uint64_t *)dm_malloc((nd + 1) * 8);
    if (!doff) return DM_ERR(DM_ERR_NOMEM, "tokenise: out of memory");
    for (size_t d = 0; d <= nd; d++) doff[d] = in->doc_off[d0 + d] - base;
    int rc = DM_OK;
    uint32_t t = 0, kept = 0;
    unsigned long long drops[4] = {0, 0, 0, 0};
    float ms;
#define DM_PP_CHECK(call)                                                                          \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            rc = DM_ERR(DM_ERR_CUDA, "%s: %s", #call, cudaGetErrorString(e_));                     \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)
#define DM_PP_RUN(call)                                                                            \
    do {                                                                                           \
        rc = (call);                                                                               \
        if (rc < 0) goto done;                                                                     \
    } while (0)
    DM_PP_CHECK(cudaEventRecord(w->ev[0], st));
    DM_PP_CHECK(cudaMemcpyAsync(w->text, in->text + base, n, cudaMemcpyHostToDevice, st));
    DM_PP_CHECK(cudaMemcpyAsync(w->doc_off, doff, (nd + 1) * 8, cudaMemcpyHostToDevice, st));
    DM_PP_CHECK(cudaEventRecord(w->ev[1], st));
    DM_PP_RUN(dm_pp_kernels(n, nd, stop, opt, &t, &kept, drops, 0));
    DM_PP_CHECK(cudaEventRecord(w->ev[2], st));
    /* results back */
    DM_PP_RUN(dm_pp_append(out, out->n_tokens + kept));
    if (opt->device_hashes) DM_PP_RUN(dm_pp_dhash_grow(out, out->n_tokens + kept, out->n_tokens));
    {
        size_t o = out->n_tokens;
        if (kept && opt->device_hashes)
            DM_PP_CHECK(cudaMemcpyAsync(out->dev_hash + o, w->out_hash, (size_t)kept * 8, cudaMemcpyDeviceToDevice, st));
        /* device hashes: the host gets hash and start of the listed first occurrences only (below) */
        if (kept && !opt->device_hashes) {
            DM_PP_CHECK(cudaMemcpyAsync(out->hash + o, w->out_hash, (size_t)kept * 8, cudaMemcpyDeviceToHost, st));
            DM_PP_CHECK(cudaMemcpyAsync(out->start + o, w->out_start, (size_t)kept * 8, cudaMemcpyDeviceToHost, st));
        }
        if (kept) DM_PP_CHECK(cudaMemcpyAsync(out->stem_len + o, w->out_len, kept, cudaMemcpyDeviceToHost, st));
        if (n) DM_PP_CHECK(cudaMemcpyAsync(out->stems + base, w->stems, n, cudaMemcpyDeviceToHost, st));
        DM_PP_CHECK(cudaMemcpyAsync(out->doc_tok + d0, w->doc_tok, (nd + 1) * 8, cudaMemcpyDeviceToHost, st));
        DM_PP_CHECK(cudaMemcpyAsync(w->h_small + 3, w->n_first, 4, cudaMemcpyDeviceToHost, st));
        DM_PP_CHECK(cudaStreamSynchronize(st));
        /* the list of first occurrences: its length is known now (a few % of the tokens) */
        uint32_t nf = w->h_small[3];
        DM_PP_RUN(dm_pp_first_append(out, out->n_first + nf));
        if (nf) DM_PP_CHECK(cudaMemcpyAsync(out->first + out->n_first, w->f_list, (size_t)nf * 8, cudaMemcpyDeviceToHost, st));
        uint64_t *last_start = (uint64_t *)(w->h_small + 12);
        if (kept && opt->device_hashes) {
            /* hash and start of the listed tokens, gathered on the device into the first-occurrence
             * set's keys (free after its kernels; at least 2 kept entries), down at the front of
             * this sub-batch's host range, spread to their places below; and the last token's start
             * (the stream builder's bound for word reads) */
            uint64_t *gh = w->f_keys, *gs = w->f_keys + nf;
            if (nf) {
                /* thrust reports a failed launch by throwing: caught here, an exception must not
                 * leave this extern "C" function (the process would abort instead of failing) */
                cudaError_t ge = cudaSuccess;
                try {
                    thrust::gather(thrust::cuda::par_nosync.on(st), w->f_list, w->f_list + nf, w->out_hash, gh);
                    thrust::gather(thrust::cuda::par_nosync.on(st), w->f_list, w->f_list + nf, w->out_start, gs);
                } catch (const thrust::system_error &ex) {
                    ge = (cudaError_t)ex.code().value();
                    if (ge == cudaSuccess) ge = cudaErrorUnknown;
                } catch (...) {
                    ge = cudaErrorUnknown;
                }
                if (ge != cudaSuccess) {
                    rc = DM_ERR(DM_ERR_CUDA, "tokenise: gathering the first occurrences: %s", cudaGetErrorString(ge));
                    goto done;
                }
                DM_PP_CHECK(cudaGetLastError());
                DM_PP_CHECK(cudaMemcpyAsync(out->hash + o, gh, (size_t)nf * 8, cudaMemcpyDeviceToHost, st));
                DM_PP_CHECK(cudaMemcpyAsync(out->start + o, gs, (size_t)nf * 8, cudaMemcpyDeviceToHost, st));
            }
            DM_PP_CHECK(cudaMemcpyAsync(last_start, w->out_start + kept - 1, 8, cudaMemcpyDeviceToHost, st));
        }
        DM_PP_CHECK(cudaEventRecord(w->ev[3], st));
        DM_PP_CHECK(cudaStreamSynchronize(st));
        if (kept && opt->device_hashes) {
            /* entry j goes to token first[j] >= j: from the last, so that no entry is overwritten
             * before it moves; the other tokens' host hash and start stay unset (their hashes are
             * on the device, their terms repeat a listed token's) */
            const uint64_t *f = out->first + out->n_first;
            for (size_t j = nf; j-- > 0;) {
                out->hash[o + f[j]] = out->hash[o + j];
                out->start[o + f[j]] = out->start[o + j] + base;
            }
            out->start[o + kept - 1] = *last_start + base;
        }
        if (o)
            for (size_t i = out->n_first; i < out->n_first + nf; i++) out->first[i] += o;
        out->n_first += nf;
        if (base && !opt->device_hashes)
            for (size_t i = o; i < o + kept; i++) out->start[i] += base;
        if (o)
            for (size_t d = d0; d <= d1; d++) out->doc_tok[d] += o;
        out->n_tokens += kept;
        out->n_short += drops[0];
        out->n_long += drops[1];
        out->n_number += drops[2];
        out->n_stop += drops[3];
    }
    if (cudaEventElapsedTime(&ms, w->ev[0], w->ev[1]) == cudaSuccess) g_t_h2d += ms * 1e-3;
    if (cudaEventElapsedTime(&ms, w->ev[1], w->ev[2]) == cudaSuccess) g_t_kern += ms * 1e-3;
    if (cudaEventElapsedTime(&ms, w->ev[2], w->ev[3]) == cudaSuccess) g_t_d2h += ms * 1e-3;
done:
    if (rc < 0) cudaStreamSynchronize(st); /* no copy may still read doff */
    dm_free(doff);
    return rc;
#undef DM_PP_CHECK
#undef DM_PP_RUN
}

/* The dedicated path for one document larger than the device workspace can hold: the CPU
 * reference tokenises it (identical output by contract), never truncated. */
static int dm_pp_run_big_doc(dm_tok_result *out, const dm_tok_batch *in, size_t d, const dm_stopset *stop,
                             const dm_tok_options *opt)
{
    size_t base = in->doc_off[d];
    uint64_t off[2] = {0, in->doc_off[d + 1] - base};
    dm_tok_batch one = {in->text + base, (size_t)off[1], off, 1};
    dm_tok_result r;
    DM_TRY(dm_tokenize_cpu(&r, &one, stop, opt));
    int rc = dm_pp_append(out, out->n_tokens + r.n_tokens);
    if (rc >= 0) {
        size_t o = out->n_tokens;
        memcpy(out->hash + o, r.hash, r.n_tokens * 8);
        memcpy(out->stem_len + o, r.stem_len, r.n_tokens);
        if (opt->device_hashes) {
            rc = dm_pp_dhash_grow(out, o + r.n_tokens, o);
            if (rc >= 0 && r.n_tokens) rc = dm_pp_cuda_copy(out->dev_hash + o, r.hash, r.n_tokens * 8);
        }
        for (size_t i = 0; i < r.n_tokens; i++) out->start[o + i] = r.start[i] + base;
        memcpy(out->stems + base, r.stems, (size_t)off[1]);
        /* its first occurrences by the same step on the host */
        if (rc >= 0) rc = dm_tok_first_hd(&r);
        if (rc >= 0) rc = dm_pp_first_append(out, out->n_first + r.n_first);
    }
    if (rc >= 0) {
        size_t o = out->n_tokens;
        for (size_t i = 0; i < r.n_first; i++) out->first[out->n_first + i] = o + r.first[i];
        out->n_first += r.n_first;
        out->doc_tok[d] = o;
        out->doc_tok[d + 1] = o + r.n_tokens;
        out->n_tokens += r.n_tokens;
        out->n_short += r.n_short;
        out->n_long += r.n_long;
        out->n_number += r.n_number;
        out->n_stop += r.n_stop;
    }
    dm_tok_result_free(&r);
    return rc;
}

/* Uploads the stop set when its content changed (checksum over its tables). */
static int dm_pp_ws_stop_sync(const dm_stopset *stop)
{
    uint64_t sum = 0x9e3779b97f4a7c15ull;
    if (stop && stop->cap) {
        sum ^= dm_term_hash((const char *)stop->keys, ((size_t)stop->cap + DM_STOPSET_FILTER_WORDS) * 8);
        sum = sum * 31 + dm_term_hash(stop->bytes, stop->bytes_len);
        sum = sum * 31 + dm_term_hash((const char *)stop->word_off, (size_t)stop->cap * 4);
    }
    if (sum == 0) sum = 1;
    if (g_wsp->stop_sum != sum || !g_wsp->keys) {
        DM_TRY(dm_pp_ws_stop(stop));
        g_wsp->stop_sum = sum;
    }
    return DM_OK;
}

extern "C" int dm_tokenize_cuda(dm_tok_result *out, const dm_tok_batch *in, const dm_stopset *stop,
                                const dm_tok_options *opt)
{
    if (!out || !in || !opt || (!in->text && in->text_len) || !in->doc_off)
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_tokenize_cuda: NULL argument");
    if (opt->min_len < 1 || opt->max_len < opt->min_len || opt->max_len > DM_TOKEN_MAX_LEN)
        return DM_ERR(DM_ERR_INVALID_ARG, "tokenise: token length bounds %d..%d outside 1..%d",
                      opt->min_len, opt->max_len, DM_TOKEN_MAX_LEN);
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
        return DM_ERR(DM_ERR_NO_DEVICE, "tokenise: no CUDA device");
    /* a first guess of the tokens (about one per 8 bytes of text); grown on demand, and a
     * reused set already holds what earlier batches needed */
    int rc = dm_pp_result_init(out, in->n_docs, in->text_len, in->text_len / 8 + 1024);
    if (rc < 0) {
        dm_tok_result_free(out);
        return rc;
    }
    rc = dm_pp_ws_acquire();
    if (rc < 0) {
        dm_tok_result_free(out);
        return rc;
    }
    rc = dm_pp_ws_stop_sync(stop);
    /* sub-batches sized to free device memory (about 34 bytes of workspace per text byte; the
     * first-occurrence arrays add about 6 more, sized by the kept tokens on use); a
     * document larger than that still goes whole, as its own sub-batch */
    size_t free_b = 0, total_b = 0;
    if (rc >= 0 && cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) free_b = (size_t)1 << 30;
    /* two pipeline workers hold a workspace each: plan for half of the free memory */
    size_t limit = (free_b + g_wsp->n_cap * 34) / 80;
    if (limit > ((size_t)1 << 30)) limit = (size_t)1 << 30;
    if (limit < ((size_t)1 << 20)) limit = (size_t)1 << 20;
    const char *env = getenv("DOCMINE_PP_CUDA_LIMIT"); /* tests: force sub-batches and the big path */
    if (env && strtoull(env, NULL, 10) > 0) limit = (size_t)strtoull(env, NULL, 10);
    for (size_t d0 = 0; rc >= 0 && d0 < in->n_docs;) {
        size_t d1 = d0 + 1;
        while (d1 < in->n_docs && in->doc_off[d1 + 1] - in->doc_off[d0] <= limit) d1++;
        if (d1 == d0 + 1 && in->doc_off[d1] - in->doc_off[d0] > limit)
            rc = dm_pp_run_big_doc(out, in, d0, stop, opt); /* larger than the device can hold */
        else
            rc = dm_pp_run_range(out, in, d0, d1, stop, opt);
        d0 = d1;
    }
    if (rc >= 0 && in->n_docs == 0) out->doc_tok[0] = 0;
    dm_pp_ws_release();
    if (rc < 0) dm_tok_result_free(out);
    return rc;
}

/* ------------------------------------------------------------------ kernel-only benchmark */

static int dm_pp_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int dm_pp_kernel_bench_run(double *seconds, double phase[4], size_t *tokens, const dm_tok_batch *in,
                                  const dm_stopset *stop, const dm_tok_options *opt, int repeats, dm_pp_ws *w);

extern "C" int dm_pp_cuda_kernel_bench(double *seconds, double phase[4], size_t *tokens,
                                       const dm_tok_batch *in, const dm_stopset *stop,
                                       const dm_tok_options *opt, int repeats)
{
    if (!seconds || !phase || !tokens || !in || !opt || (!in->text && in->text_len) || !in->doc_off ||
        repeats < 1)
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_pp_cuda_kernel_bench: bad argument");
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
        return DM_ERR(DM_ERR_NO_DEVICE, "kernel bench: no CUDA device");
    size_t n = in->text_len, nd = in->n_docs;
    if (n >= 0x7fffffffu || in->doc_off[nd] != n)
        return DM_ERR(DM_ERR_INVALID_ARG, "kernel bench: %zu bytes (at most 2 GB in one batch, offsets ending at the text length)", n);
    DM_TRY(dm_pp_ws_acquire());
    int rc = dm_pp_ws_stop_sync(stop);
    if (rc >= 0) rc = dm_pp_ws_reserve(n, nd);
    if (rc < 0) {
        dm_pp_ws_release();
        return rc;
    }
    dm_pp_ws *w = g_wsp;
    rc = dm_pp_kernel_bench_run(seconds, phase, tokens, in, stop, opt, repeats, w);
    dm_pp_ws_release();
    return rc;
}

static int dm_pp_kernel_bench_run(double *seconds, double phase[4], size_t *tokens, const dm_tok_batch *in,
                                  const dm_stopset *stop, const dm_tok_options *opt, int repeats, dm_pp_ws *w)
{
    size_t n = in->text_len, nd = in->n_docs;
    DM_CUDA_TRY(cudaMemcpy(w->text, in->text, n, cudaMemcpyHostToDevice));
    DM_CUDA_TRY(cudaMemcpy(w->doc_off, in->doc_off, (nd + 1) * 8, cudaMemcpyHostToDevice));
    double *all = (double *)dm_malloc((size_t)repeats * 5 * sizeof(double));
    if (!all) return DM_ERR(DM_ERR_NOMEM, "kernel bench: out of memory");
    int rc = DM_OK;
    uint32_t t = 0, kept = 0;
    unsigned long long drops[4];
    /* untimed first run (instances were selected, or tuned, when the workspace was reserved) */
    rc = dm_pp_kernels(n, nd, stop, opt, &t, &kept, drops, 0);
    if (rc >= 0 && cudaStreamSynchronize(w->stream) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "kernel bench: warm-up failed");
    for (int r = 0; rc >= 0 && r < repeats; r++) {
        rc = dm_pp_kernels(n, nd, stop, opt, &t, &kept, drops, 1);
        if (rc < 0) break;
        if (cudaEventSynchronize(w->kev[4]) != cudaSuccess) {
            rc = DM_ERR(DM_ERR_CUDA, "kernel bench: run failed");
            break;
        }
        float ms[4] = {0, 0, 0, 0};
        for (int p = 0; p < 4; p++) cudaEventElapsedTime(&ms[p], w->kev[p], w->kev[p + 1]);
        all[r] = 1e-3 * ((double)ms[0] + ms[1] + ms[2]);
        for (int p = 0; p < 4; p++) all[(size_t)repeats * (p + 1) + r] = 1e-3 * ms[p];
    }
    if (rc >= 0) {
        for (int p = 0; p < 5; p++) qsort(all + (size_t)repeats * p, (size_t)repeats, sizeof(double), dm_pp_cmp_double);
        *seconds = all[repeats / 2];
        for (int p = 0; p < 4; p++) phase[p] = all[(size_t)repeats * (p + 1) + repeats / 2];
        *tokens = kept;
    }
    dm_free(all);
    return rc;
}

/* ------------------------------------------------------------------ word stemming */

extern "C" int dm_stem_words_cuda(char *out, uint32_t *out_off, uint32_t *out_len, const char *words,
                                  const uint32_t *off, const uint32_t *len, size_t n)
{
    if ((n > 0) && (!out || !out_off || !out_len || !words || !off || !len))
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_stem_words_cuda: NULL argument");
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
        return DM_ERR(DM_ERR_NO_DEVICE, "stem: no CUDA device");
    if (n == 0) return DM_OK;
    size_t bytes = (size_t)off[n - 1] + len[n - 1];
    for (size_t i = 0; i < n; i++)
        if ((size_t)off[i] + len[i] > bytes) bytes = (size_t)off[i] + len[i];
    char *dw = NULL, *dout = NULL;
    uint32_t *doff = NULL, *dlen = NULL, *dol = NULL;
    int rc = dm_device_alloc((void **)&dw, bytes);
    if (rc >= 0) rc = dm_device_alloc((void **)&dout, bytes);
    if (rc >= 0) rc = dm_device_alloc((void **)&doff, n * 4);
    if (rc >= 0) rc = dm_device_alloc((void **)&dlen, n * 4);
    if (rc >= 0) rc = dm_device_alloc((void **)&dol, n * 4);
    if (rc < 0) rc = DM_CUDA_STAGE_ERR(rc, "stem"); /* the allocator's message names no stage */
    /* no copy after a failed allocation: it would go to a NULL device pointer and replace the
     * out-of-memory error with an "invalid argument" one */
    cudaError_t e = cudaSuccess;
    if (rc >= 0) e = cudaMemcpy(dw, words, bytes, cudaMemcpyHostToDevice);
    if (rc >= 0 && e == cudaSuccess) e = cudaMemcpy(doff, off, n * 4, cudaMemcpyHostToDevice);
    if (rc >= 0 && e == cudaSuccess) e = cudaMemcpy(dlen, len, n * 4, cudaMemcpyHostToDevice);
    if (rc >= 0 && e == cudaSuccess) e = cudaMemcpy(dout, words, bytes, cudaMemcpyHostToDevice);
    if (rc >= 0 && e != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "stem: %s", cudaGetErrorString(e));
    if (rc >= 0) {
        dm_pp_stem_args a = {dw, doff, dlen, n, dout, dol};
        rc = dm_pp_pick(K_STEM, n)->launch(&a, n, NULL);
    }
    if (rc >= 0) {
        e = cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost);
        if (e == cudaSuccess) e = cudaMemcpy(out_len, dol, n * 4, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "stem: %s", cudaGetErrorString(e));
    }
    for (size_t i = 0; i < n; i++) out_off[i] = off[i];
    dm_device_free(dw);
    dm_device_free(dout);
    dm_device_free(doff);
    dm_device_free(dlen);
    dm_device_free(dol);
    return rc;
}
