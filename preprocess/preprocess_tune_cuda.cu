/* Tuning workloads of the preprocess kernels place, compact and docs (preprocess_tune.h):
 * seeded, device-resident inputs of n work units as the batch pipeline (dm_pp_kernels) hands
 * them to the kernel, one launch of the instance under test, and its output copied back, so that
 * the tuner can time every instance and reject one whose output differs from the default's.
 *  - place: n bytes of normalised text (words of 1..14 bytes, ASCII and UTF-8, separated by
 *    spaces, punctuation and newlines); its token start/end flags and the exclusive scan of the
 *    starts, computed on the host with the kernels' own per-byte rule (dm_tok_mark_one). Output:
 *    every token's [start, end).
 *  - compact: n processed tokens (starts ~7.5 bytes apart, 55% kept: English text loses about
 *    45% of its tokens to the stop set, numbers and the length limits), the exclusive scan of the
 *    kept flags, 64-bit hashes and stem lengths. Output: the kept tokens' hashes, starts, lengths.
 *  - docs: n - 1 documents of 200..3900 bytes (the kernel's n is documents + 1) and the sorted
 *    starts of their kept tokens. Output: every document's first kept token.
 * Output buffers start from a fixed pattern; outputs are compared exactly. Prefixes of a state
 * serve the tuner's smaller sizes (resize).
 * Reference: the kernels' contracts in preprocess_kernels.cuh; the hooks' contract in
 * common/tune/tune.h. */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "preprocess/preprocess_kernels.cuh"
#include "preprocess/preprocess_tune.h"
#include "common/rng.h"
#include "common/tune/workload_cuda.cuh"

namespace {

enum kind { W_PLACE, W_COMPACT, W_DOCS };

struct workload {
    int kind;
    size_t n, n0, t; /* current units, units created, tokens (place) or kept tokens (compact) */
    dm_wl_bufs bufs; /* every device buffer (common/tune/workload_cuda.cuh) */
    dm_pp_place_args pa;
    dm_pp_compact_args ca;
    dm_pp_docs_args da;
    uint64_t *cum; /* docs: kept tokens before document d (host, n0 entries) */
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
    free(w->cum);
    free(w);
}

/* Tokens whose flags lie in [0, n) of the place input: scan[n-1] + start[n-1]. */
int tokens_before(const workload *w, size_t n, size_t *t)
{
    uint32_t s = 0, c = 0;
    DM_TRY(down(&s, w->pa.start + n - 1, 4));
    DM_TRY(down(&c, w->pa.scan + n - 1, 4));
    *t = (size_t)s + c;
    return DM_OK;
}

int create_place(workload *w, size_t n, uint64_t seed)
{
    static const char *words[] = {"the", "market", "prices", "rose", "1987", "generalization", "naïve",
                                  "données", "ελλάδα", "日本語", "running", "of", "a", "connections",
                                  "happily", "oil", "x", "u.s.", "don't", "e-mail", "3.5%", "reuters"};
    static const char *seps[] = {" ", " ", " ", " ", " ", " ", ", ", ". ", "\n", " - ", " (", ") "};
    char *text = (char *)malloc(n);
    uint32_t *start = (uint32_t *)malloc(4 * n), *scan = (uint32_t *)malloc(4 * n);
    uint8_t *endf = (uint8_t *)malloc(n);
    int rc = text && start && scan && endf ? DM_OK : DM_ERR(DM_ERR_NOMEM, "preprocess bench: %zu bytes", n);
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
    if (rc == DM_OK) memset(text + l, ' ', n - l);
    uint32_t t = 0;
    for (size_t i = 0; rc == DM_OK && i < n; i++) {
        uint32_t f = dm_tok_mark_one(text, n, i);
        start[i] = f & 1u;
        endf[i] = (uint8_t)(f >> 1);
        scan[i] = t;
        t += f & 1u;
    }
    w->t = t;
    dm_pp_place_args *a = &w->pa;
    a->n = n;
    if (rc == DM_OK) rc = dev(w, (uint32_t **)&a->start, 4 * n, start);
    if (rc == DM_OK) rc = dev(w, (uint8_t **)&a->endf, n, endf);
    if (rc == DM_OK) rc = dev(w, (uint32_t **)&a->scan, 4 * n, scan);
    if (rc == DM_OK) rc = dev(w, &a->tok_start, 4 * (size_t)t, NULL);
    if (rc == DM_OK) rc = dev(w, &a->tok_end, 4 * (size_t)t, NULL);
    free(text);
    free(start);
    free(scan);
    free(endf);
    return rc;
}

int create_compact(workload *w, size_t n, uint64_t seed)
{
    uint32_t *keep = (uint32_t *)malloc(4 * n), *pos = (uint32_t *)malloc(4 * n), *ts = (uint32_t *)malloc(4 * n);
    uint64_t *hash = (uint64_t *)malloc(8 * n);
    uint8_t *len = (uint8_t *)malloc(n);
    int rc = keep && pos && ts && hash && len ? DM_OK : DM_ERR(DM_ERR_NOMEM, "preprocess bench: %zu tokens", n);
    uint32_t at = 0, kept = 0;
    for (size_t k = 0; rc == DM_OK && k < n; k++) {
        uint64_t r = rnd(&seed);
        ts[k] = at;
        at += 2 + (uint32_t)(r % 12);
        keep[k] = (r >> 8) % 100 < 55;
        pos[k] = kept;
        kept += keep[k];
        len[k] = (uint8_t)(2 + (r >> 16) % 11);
        hash[k] = rnd(&seed);
    }
    w->t = kept;
    dm_pp_compact_args *a = &w->ca;
    a->t = n;
    if (rc == DM_OK) rc = dev(w, (uint32_t **)&a->keep, 4 * n, keep);
    if (rc == DM_OK) rc = dev(w, (uint32_t **)&a->pos, 4 * n, pos);
    if (rc == DM_OK) rc = dev(w, (uint32_t **)&a->tok_start, 4 * n, ts);
    if (rc == DM_OK) rc = dev(w, (uint64_t **)&a->hash, 8 * n, hash);
    if (rc == DM_OK) rc = dev(w, (uint8_t **)&a->stem_len, n, len);
    if (rc == DM_OK) rc = dev(w, &a->out_hash, 8 * (size_t)kept, NULL);
    if (rc == DM_OK) rc = dev(w, &a->out_start, 8 * (size_t)kept, NULL);
    if (rc == DM_OK) rc = dev(w, &a->out_len, kept, NULL);
    free(keep);
    free(pos);
    free(ts);
    free(hash);
    free(len);
    return rc;
}

int create_docs(workload *w, size_t n, uint64_t seed)
{
    const size_t nd = n - 1;
    uint64_t *doc_off = (uint64_t *)malloc(8 * (nd + 1));
    w->cum = (uint64_t *)malloc(8 * (nd + 1));
    size_t cap = 160 * nd + 1024, kept = 0;
    uint64_t *starts = (uint64_t *)malloc(8 * cap);
    int rc = doc_off && w->cum && starts ? DM_OK : DM_ERR(DM_ERR_NOMEM, "preprocess bench: %zu documents", nd);
    uint64_t at = 0;
    for (size_t d = 0; rc == DM_OK && d < nd; d++) {
        uint64_t r = rnd(&seed), end = at + 200 + r % 3700;
        doc_off[d] = at;
        w->cum[d] = kept;
        for (uint64_t p = at + (r >> 32) % 3; p < end; p += 2 + rnd(&seed) % 12) {
            if (rnd(&seed) % 100 >= 55) continue;
            if (kept == cap) {
                uint64_t *s2 = (uint64_t *)realloc(starts, 16 * cap);
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
    free(doc_off);
    free(starts);
    return rc;
}

int create(void **state, size_t n, uint64_t seed, int kind)
{
    *state = NULL;
    if (n < 2) n = 2;
    workload *w = (workload *)calloc(1, sizeof *w);
    if (!w) return DM_ERR(DM_ERR_NOMEM, "preprocess bench: out of memory");
    w->kind = kind;
    w->n = w->n0 = n;
    int rc = kind == W_PLACE ? create_place(w, n, seed) : kind == W_COMPACT ? create_compact(w, n, seed)
                                                                             : create_docs(w, n, seed);
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

int dm_pp_bench_place_create(void **state, size_t n, uint64_t seed) { return create(state, n, seed, W_PLACE); }
int dm_pp_bench_compact_create(void **state, size_t n, uint64_t seed) { return create(state, n, seed, W_COMPACT); }
int dm_pp_bench_docs_create(void **state, size_t n, uint64_t seed) { return create(state, n, seed, W_DOCS); }

int dm_pp_tune_bench_run(void *state, const dm_tune_instance *inst, void *stream)
{
    workload *w = (workload *)state;
    if (w->kind == W_PLACE) return inst->launch(&w->pa, w->n, stream);
    if (w->kind == W_COMPACT) return inst->launch(&w->ca, w->n, stream);
    return inst->launch(&w->da, w->n, stream);
}

int dm_pp_tune_bench_output(void *state, void *host, size_t *nbytes)
{
    workload *w = (workload *)state;
    char *h = (char *)host;
    if (w->kind == W_PLACE) {
        *nbytes = 8 * w->t;
        if (!h) return DM_OK;
        DM_TRY(down(h, w->pa.tok_start, 4 * w->t));
        return down(h + 4 * w->t, w->pa.tok_end, 4 * w->t);
    }
    if (w->kind == W_COMPACT) {
        *nbytes = 17 * w->t;
        if (!h) return DM_OK;
        DM_TRY(down(h, w->ca.out_hash, 8 * w->t));
        DM_TRY(down(h + 8 * w->t, w->ca.out_start, 8 * w->t));
        return down(h + 16 * w->t, w->ca.out_len, w->t);
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
    if (w->kind == W_PLACE) {
        /* a token cut at n keeps its start only: its end is not part of this input */
        DM_TRY(tokens_before(w, n, &w->t));
        w->pa.n = n;
    } else if (w->kind == W_COMPACT) {
        uint32_t k = 0, p = 0;
        DM_TRY(down(&k, w->ca.keep + n - 1, 4));
        DM_TRY(down(&p, w->ca.pos + n - 1, 4));
        w->t = (size_t)k + p;
        w->ca.t = n;
    } else {
        w->da.n_docs = n - 1;
        w->da.kept = w->cum[n - 1];
    }
    w->n = n;
    return DM_OK;
}

} // extern "C"
