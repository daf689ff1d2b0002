/* Tuning workloads of the preprocess kernels tokens, docs and first (preprocess_tune.h):
 * seeded, device-resident inputs of n work units as the batch pipeline (dm_pp_kernels) hands
 * them to the kernel, one launch of the instance under test, and its output copied back, so that
 * the tuner can time every instance and reject one whose output differs from the default's.
 *  - tokens: n bytes of normalised text (words of 1..14 bytes, ASCII and UTF-8, separated by
 *    spaces, punctuation and newlines; the text of the normaliser has only spaces as separators,
 *    the others exercise the rule). Output: every token's [start, end); the number of tokens
 *    is counted on the host with the reference rule (dm_tok_mark_one).
 *  - docs: n - 1 documents of 200..3900 bytes (the kernel's n is documents + 1) and the sorted
 *    starts of their kept tokens. Output: every document's first kept token.
 *  - first: n kept tokens drawn from n / 32 terms (skewed: the minimum of two uniform draws),
 *    each with its stem bytes in a stems buffer; a few terms share another term's hash (collisions)
 *    and some tokens have hash 0. Output: the flags, the number listed and the list.
 * Output buffers start from a fixed pattern; outputs are compared exactly. Prefixes of a state
 * serve the tuner's smaller sizes (resize).
 * Reference: the kernels' contracts in preprocess_kernels.cuh; the hooks' contract in
 * common/tune/tune.h. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <thrust/iterator/counting_iterator.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "preprocess/preprocess_kernels.cuh"
#include "preprocess/preprocess_tune.h"
#include "common/rng.h"
#include "common/tune/wl_cache.h"
#include "common/tune/workload_cuda.cuh"

namespace {

enum kind { W_TOKENS, W_DOCS, W_FIRST };

struct workload {
    int kind;
    size_t n, n0, t; /* current units, units created, tokens (tokens) */
    dm_wl_bufs bufs; /* every device buffer (common/tune/workload_cuda.cuh) */
    dm_pp_tokens_args pa;
    char *text;      /* tokens: the host copy of the text (token counts of prefixes) */
    dm_pp_docs_args da;
    uint64_t *cum; /* docs: kept tokens before document d (host, n0 entries) */
    dm_pp_first_args fa;
    void *lent; /* first: the host data (dm_wl_cache_get), returned at destroy */
};

uint64_t rnd(uint64_t *s)
{
    return dm_splitmix64(s);
}

template <typename T>
int dev(workload *w, T **out, size_t bytes, const void *host)
{
    return dm_wl_dev(&w->bufs, out, bytes, host, "preprocess bench");
}

int down(void *h, const void *d, size_t bytes)
{
    return dm_wl_down(h, d, bytes, "preprocess bench");
}

void destroy(workload *w)
{
    if (!w) return;
    dm_wl_free(&w->bufs);
    dm_wl_cache_put(w->lent);
    dm_free(w->cum);
    dm_free(w->text);
    dm_free(w);
}

/* Tokens of the prefix [0, n) of the text, by the reference rule. */
size_t tokens_in(const char *text, size_t n)
{
    size_t t = 0;
    for (size_t i = 0; i < n; i++) t += dm_tok_mark_one(text, n, i) & 1u;
    return t;
}

int create_tokens(workload *w, size_t n, uint64_t seed)
{
    static const char *words[] = {"the", "market", "prices", "rose", "1987", "generalization", "naïve",
                                  "données", "ελλάδα", "日本語", "running", "of", "a", "connections",
                                  "happily", "oil", "x", "u.s.", "don't", "e-mail", "3.5%", "reuters"};
    static const char *seps[] = {" ", " ", " ", " ", " ", " ", ", ", ". ", "\n", " - ", " (", ") "};
    char *text = (char *)dm_malloc(n);
    int rc = text ? DM_OK : DM_ERR(DM_ERR_NOMEM, "preprocess bench: %zu bytes", n);
    size_t l = 0;
    while (rc == DM_OK && l < n) {
        uint64_t r = rnd(&seed);
        const char *wd = words[r % (sizeof words / sizeof words[0])];
        const char *sp = seps[(r >> 32) % (sizeof seps / sizeof seps[0])];
        size_t a = strlen(wd), b = strlen(sp);
        if (l + a + b > n) break;
        memcpy(text + l, wd, a);
        memcpy(text + l + a, sp, b);
        l += a + b;
    }
    if (rc != DM_OK) return rc;
    memset(text + l, ' ', n - l);
    w->text = text;
    w->t = tokens_in(text, n);
    dm_pp_tokens_args *a = &w->pa;
    a->n = n;
    size_t tiles = dm_pp_tokens_max_tiles(n), tc = n / 2 + 1;
    rc = dev(w, (char **)&a->text, n, text);
    if (rc == DM_OK) rc = dev(w, &a->tile_cnt, 4 * tiles, NULL);
    if (rc == DM_OK) rc = dev(w, &a->tile_off, 4 * tiles, NULL);
    if (rc == DM_OK) rc = dev(w, &a->tok_start, 4 * tc, NULL);
    if (rc == DM_OK) rc = dev(w, &a->tok_end, 4 * tc, NULL);
    if (rc == DM_OK) rc = dev(w, &a->total, 4, NULL);
    if (rc == DM_OK && cub::DeviceScan::ExclusiveSum(NULL, a->cub_bytes, a->tile_cnt, a->tile_off, (int)tiles) != cudaSuccess)
        rc = DM_ERR(DM_ERR_CUDA, "preprocess bench: scan storage");
    if (rc == DM_OK) rc = dev(w, (char **)&a->cub_tmp, a->cub_bytes, NULL);
    return rc;
}

int create_docs(workload *w, size_t n, uint64_t seed)
{
    const size_t nd = n - 1;
    uint64_t *doc_off = (uint64_t *)dm_malloc(8 * (nd + 1));
    w->cum = (uint64_t *)dm_malloc(8 * (nd + 1));
    size_t cap = 160 * nd + 1024, kept = 0;
    uint64_t *starts = (uint64_t *)dm_malloc(8 * cap);
    int rc = doc_off && w->cum && starts ? DM_OK : DM_ERR(DM_ERR_NOMEM, "preprocess bench: %zu documents", nd);
    uint64_t at = 0;
    for (size_t d = 0; rc == DM_OK && d < nd; d++) {
        uint64_t r = rnd(&seed), end = at + 200 + r % 3700;
        doc_off[d] = at;
        w->cum[d] = kept;
        for (uint64_t p = at + (r >> 32) % 3; p < end; p += 2 + rnd(&seed) % 12) {
            if (rnd(&seed) % 100 >= 55) continue;
            if (kept == cap) {
                uint64_t *s2 = (uint64_t *)dm_realloc(starts, 16 * cap);
                if (!s2) {
                    rc = DM_ERR(DM_ERR_NOMEM, "preprocess bench: %zu tokens", 2 * cap);
                    break;
                }
                starts = s2;
                cap *= 2;
            }
            starts[kept++] = p;
        }
        at = end;
    }
    if (rc == DM_OK) {
        doc_off[nd] = at;
        w->cum[nd] = kept;
    }
    w->t = kept;
    dm_pp_docs_args *a = &w->da;
    a->n_docs = nd;
    a->kept = kept;
    if (rc == DM_OK) rc = dev(w, (uint64_t **)&a->doc_off, 8 * (nd + 1), doc_off);
    if (rc == DM_OK) rc = dev(w, (uint64_t **)&a->kept_start, 8 * kept, starts);
    if (rc == DM_OK) rc = dev(w, &a->doc_tok, 8 * (nd + 1), NULL);
    dm_free(doc_off);
    dm_free(starts);
    return rc;
}

/* The host side of the first workload, the same for every input of (n, seed): kept between
 * inputs (common/tune/wl_cache.h). */
struct first_host {
    uint64_t *h, *st; /* n: hashes, stem starts */
    uint8_t *len;     /* n */
    char *stems;      /* at + 1 bytes */
    size_t at;
};

void first_host_drop(void *p)
{
    first_host *f = (first_host *)p;
    if (!f) return;
    dm_free(f->h);
    dm_free(f->st);
    dm_free(f->len);
    dm_free(f->stems);
    dm_free(f);
}

int first_host_build(dm_wl_host *out, size_t n, uint64_t seed, const void *arg)
{
    (void)arg;
    size_t nv = n / 32 + 16;
    first_host *f = (first_host *)dm_calloc(1, sizeof *f);
    uint64_t *th = (uint64_t *)dm_malloc(8 * nv);
    uint32_t *toff = (uint32_t *)dm_malloc(4 * nv);
    uint8_t *tl = (uint8_t *)dm_malloc(nv);
    char *tb = (char *)dm_malloc(16 * nv);
    if (f) {
        f->h = (uint64_t *)dm_malloc(8 * n);
        f->st = (uint64_t *)dm_malloc(8 * n);
        f->len = (uint8_t *)dm_malloc(n);
        f->stems = (char *)dm_malloc(16 * n + 1);
    }
    int rc = f && th && toff && tl && tb && f->h && f->st && f->len && f->stems
                 ? DM_OK
                 : DM_ERR(DM_ERR_NOMEM, "preprocess bench: %zu tokens", n);
    for (size_t v = 0; rc == DM_OK && v < nv; v++) { /* term v: "t", v in hex, 0..4 filler letters */
        int l = snprintf(tb + 16 * v, 16, "t%zx%.*s", v, (int)(v % 5), "qxzvk");
        toff[v] = (uint32_t)(16 * v);
        tl[v] = (uint8_t)l;
        th[v] = dm_term_hash(tb + 16 * v, (size_t)l);
        if (v % 97 == 5) th[v] = th[v - 1]; /* a collision: same hash, other bytes */
        if (v % 211 == 7) th[v] = 0;
    }
    size_t at = 0;
    for (size_t i = 0; rc == DM_OK && i < n; i++) {
        uint64_t a = rnd(&seed) % nv, b = rnd(&seed) % nv, v = a < b ? a : b;
        memcpy(f->stems + at, tb + toff[v], tl[v]);
        f->h[i] = th[v];
        f->st[i] = at;
        f->len[i] = tl[v];
        at += tl[v];
        f->stems[at++] = ' ';
    }
    dm_free(th);
    dm_free(toff);
    dm_free(tl);
    dm_free(tb);
    if (rc != DM_OK) {
        first_host_drop(f);
        return rc;
    }
    f->at = at;
    out->data = f;
    out->bytes = 33 * n + 1;
    out->drop = first_host_drop;
    return DM_OK;
}

int create_first(workload *w, size_t n, uint64_t seed)
{
    DM_TRY(dm_wl_cache_get("preprocess.first", n, seed, first_host_build, NULL, &w->lent));
    const first_host *f = (const first_host *)w->lent;
    dm_pp_first_args *a = &w->fa;
    a->n = n;
    uint64_t slots = dm_tok_first_slots(n);
    int rc = dev(w, (uint64_t **)&a->hash, 8 * n, f->h);
    if (rc == DM_OK) rc = dev(w, (uint64_t **)&a->start, 8 * n, f->st);
    if (rc == DM_OK) rc = dev(w, (uint8_t **)&a->len, n, f->len);
    if (rc == DM_OK) rc = dev(w, (char **)&a->stems, f->at + 1, f->stems);
    if (rc == DM_OK) rc = dev(w, &a->keys, 8 * slots, NULL);
    if (rc == DM_OK) rc = dev(w, &a->idx, 4 * slots, NULL);
    if (rc == DM_OK) rc = dev(w, &a->flag, n, NULL);
    if (rc == DM_OK) rc = dev(w, &a->list, 8 * n, NULL);
    if (rc == DM_OK) rc = dev(w, &a->n_list, 4, NULL);
    if (rc == DM_OK &&
        cub::DeviceSelect::Flagged(NULL, a->cub_bytes, thrust::counting_iterator<uint64_t>(0), (const uint8_t *)NULL,
                                   (uint64_t *)NULL, (uint32_t *)NULL, (int)n) != cudaSuccess)
        rc = DM_ERR(DM_ERR_CUDA, "preprocess bench: select storage");
    if (rc == DM_OK) rc = dev(w, (char **)&a->cub_tmp, a->cub_bytes, NULL);
    return rc;
}

int create(void **state, size_t n, uint64_t seed, int kind)
{
    *state = NULL;
    if (n < 2) n = 2;
    workload *w = (workload *)dm_calloc(1, sizeof *w);
    if (!w) return DM_ERR(DM_ERR_NOMEM, "preprocess bench: out of memory");
    w->kind = kind;
    w->n = w->n0 = n;
    int rc = kind == W_TOKENS ? create_tokens(w, n, seed) : kind == W_DOCS ? create_docs(w, n, seed) : create_first(w, n, seed);
    if (rc == DM_OK && cudaDeviceSynchronize() != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "preprocess bench: upload failed");
    if (rc != DM_OK) {
        destroy(w);
        return rc;
    }
    *state = w;
    return DM_OK;
}

} // namespace

extern "C" {

int dm_pp_bench_tokens_create(void **state, size_t n, uint64_t seed) { return create(state, n, seed, W_TOKENS); }
int dm_pp_bench_docs_create(void **state, size_t n, uint64_t seed) { return create(state, n, seed, W_DOCS); }
int dm_pp_bench_first_create(void **state, size_t n, uint64_t seed) { return create(state, n, seed, W_FIRST); }

int dm_pp_tune_bench_run(void *state, const dm_tune_instance *inst, void *stream)
{
    workload *w = (workload *)state;
    if (w->kind == W_TOKENS) return inst->launch(&w->pa, w->n, stream);
    if (w->kind == W_FIRST) return inst->launch(&w->fa, w->n, stream);
    return inst->launch(&w->da, w->n, stream);
}

int dm_pp_tune_bench_output(void *state, void *host, size_t *nbytes)
{
    workload *w = (workload *)state;
    char *h = (char *)host;
    if (w->kind == W_TOKENS) {
        *nbytes = 8 * w->t;
        if (!h) return DM_OK;
        DM_TRY(down(h, w->pa.tok_start, 4 * w->t));
        return down(h + 4 * w->t, w->pa.tok_end, 4 * w->t);
    }
    if (w->kind == W_FIRST) { /* flags, the number listed, the list (entries past it: untouched) */
        *nbytes = 9 * w->n + 4;
        if (!h) return DM_OK;
        DM_TRY(down(h, w->fa.flag, w->n));
        DM_TRY(down(h + w->n, w->fa.n_list, 4));
        return down(h + w->n + 4, w->fa.list, 8 * w->n);
    }
    *nbytes = 8 * w->n;
    return h ? down(h, w->da.doc_tok, 8 * w->n) : DM_OK;
}

void dm_pp_tune_bench_destroy(void *state) { destroy((workload *)state); }

int dm_pp_tune_bench_resize(void *state, size_t n)
{
    workload *w = (workload *)state;
    if (n < 2) n = 2;
    if (n > w->n0) return DM_ERR(DM_ERR_INVALID_ARG, "preprocess bench: resize to %zu of %zu", n, w->n0);
    if (w->kind == W_TOKENS) {
        w->t = tokens_in(w->text, n);
        w->pa.n = n;
    } else if (w->kind == W_FIRST) {
        w->fa.n = n;
    } else {
        w->da.n_docs = n - 1;
        w->da.kept = w->cum[n - 1];
    }
    w->n = n;
    return DM_OK;
}

} // extern "C"
