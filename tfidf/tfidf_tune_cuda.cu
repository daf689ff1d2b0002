/* Tuning workloads of tfidf's table-compaction, vocabulary-table, hash-table and weight kernels
 * (tfidf_tune.h): seeded, device-resident inputs of n work units built the way the driver builds
 * them, one launch of the instance under test, and its output copied back (in a canonical form
 * where the kernel's output legitimately depends on the order of atomic operations), so that the
 * tuner can time every instance and reject one whose output differs from the default's.
 *  - tf_header / tf_compact: n documents of dm_tf_bench_docs (the count kernels' workload) in
 *    per-document tables of the size the driver ends with (a document whose bucket overflows is
 *    rebuilt with larger buckets), filled on the host with the kernels' own insert
 *    (dm_tf_insert), so that the slot layout, and with it the compaction's output order, is the
 *    same in every fresh input. Outputs: the header; the entries and the row offsets.
 *  - vocab_build: n distinct terms (3..12 letters) into a table of the driver's capacity.
 *    Which slot a term takes depends on the order of the atomic claims: the output is, per term,
 *    its key and the number of slots that name it (1), then the used / full / repeat counters.
 *  - vocab_query: n queries (9 in 10 of them terms of the vocabulary, frequent terms more
 *    often; the others unknown) against a vocabulary of n/4 terms built by the default
 *    vocab_build instance. Output: the ids.
 *  - hash_build: n term hashes, one in 1024 repeating an earlier one (an ambiguous slot). Output:
 *    the occupied slots' (key, ambiguous) pairs in key order, then the used / full counters.
 *  - hash_query: n token hashes (19 in 20 of a vocabulary of n/16 terms, skewed) against the
 *    table of the default hash_build instance. Output: the ids and the ambiguity marker.
 *  - weigh_len / weigh_fill / weigh_norm: n count rows (what dm_tf_count_cpu gives for
 *    dm_tf_bench_docs documents) over 60000 local terms mapped onto 57000 columns (5% unmapped), idf weights
 *    with 1% zeros; each kernel's inputs from the previous passes computed on the host as the
 *    kernels define them (row lengths, kept entries and their scan, the unnormalised entries in
 *    input order, each row's (column, position) pairs sorted). Outputs: lengths, kept counts
 *    and counters; the unsorted entries; the final columns and values.
 * Every output is compared exactly (see tfidf_tune.h). Output buffers start from a fixed pattern.
 * The builds never select an instance (dm_tune_select could start another tuning run): inputs
 * that need another kernel use its default instance.
 * Reference: the kernels' contracts in tfidf_kernels.cuh; the hooks' contract in
 * common/tune/tune.h. */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "tfidf/tfidf.h"
#include "tfidf/tfidf_kernels.cuh"
#include "tfidf/tfidf_tune.h"
#include "common/rng.h"
#include "common/tune/wl_cache.h"
#include "common/tune/workload_cuda.cuh"

namespace {

enum kind { W_HEADER, W_COMPACT, W_VT_BUILD, W_VT_QUERY, W_HT_BUILD, W_HT_QUERY, W_LEN, W_FILL, W_NORM };

const uint32_t kLocalTerms = 60000;  /* count rows and documents: local term indices */
const uint32_t kColumns = 57000;     /* weights: mapped columns (the rest of the terms unmapped) */

struct workload {
    int kind;
    size_t n, n0; /* current work units; the units the state was created for */
    dm_wl_bufs bufs; /* every device buffer (common/tune/workload_cuda.cuh) */
    /* documents (tf_header, tf_compact) */
    dm_tf_compact_args ca;
    const uint64_t *h_row_off; /* host: entries of the documents before d, n0 + 1 (in lent) */
    /* tables (vocab_*, hash_*) */
    dm_vt_args va;
    size_t n_vocab;
    /* weights */
    dm_w_args wa;
    const uint64_t *h_out_off; /* host: stored entries of the rows before r, n0 + 1 (in lent) */
    void *lent; /* host data of the documents or weights (dm_wl_cache_get), returned at destroy */
};

uint64_t rnd(uint64_t *s)
{
    return dm_splitmix64(s);
}

/* A device buffer of the workload: a copy of host (bytes), or the fixed pattern (host NULL). */
template <typename T>
int dev(workload *w, T **out, size_t bytes, const void *host)
{
    return dm_wl_dev(&w->bufs, out, bytes, host, "tfidf bench");
}

int down(void *h, const void *d, size_t bytes)
{
    return dm_wl_down(h, d, bytes, "tfidf bench");
}

void destroy(workload *w)
{
    if (!w) return;
    dm_wl_free(&w->bufs);
    dm_wl_cache_put(w->lent);
    dm_free(w);
}

/* The first n documents of dm_tf_bench_docs (seeded). *tok_off / *tok: dm_malloc'ed. */
int bench_docs(uint64_t **tok_off, uint32_t **tok, size_t n, uint64_t seed)
{
    size_t est = 256 * n + 8192; /* documents average ~220 tokens */
    for (;;) {
        *tok_off = (uint64_t *)dm_malloc(8 * (est + 2));
        *tok = (uint32_t *)dm_malloc(4 * est);
        if (!*tok_off || !*tok) {
            dm_free(*tok_off);
            dm_free(*tok);
            *tok_off = NULL;
            *tok = NULL;
            return DM_ERR(DM_ERR_NOMEM, "tfidf bench: %zu tokens", est);
        }
        size_t nd = 0;
        DM_TRY(dm_tf_bench_docs(*tok_off, *tok, est, kLocalTerms, seed, &nd));
        if (nd > n) return DM_OK;
        dm_free(*tok_off);
        dm_free(*tok);
        est *= 2;
    }
}

/* ------------------------------------------------------------------ per-document tables */

/* The host side of n documents' tables, the same for every input of (n, seed): kept between
 * inputs (common/tune/wl_cache.h). */
struct docs_host {
    uint64_t *tab_off; /* n + 1 */
    uint32_t *key, *cnt; /* tab_off[n] slots */
    uint64_t *scan;    /* the header's exclusive scan, DM_TF_BUCKETS * n */
    uint64_t *row_off; /* entries of the documents before d, n + 1 */
};

void docs_host_drop(void *p)
{
    docs_host *h = (docs_host *)p;
    if (!h) return;
    dm_free(h->tab_off);
    dm_free(h->key);
    dm_free(h->cnt);
    dm_free(h->scan);
    dm_free(h->row_off);
    dm_free(h);
}

int docs_host_build(dm_wl_host *out, size_t n, uint64_t seed, const void *arg)
{
    (void)arg;
    uint64_t *tok_off = NULL, *tab_off = NULL, *scan = NULL, *row_off = NULL;
    uint32_t *tok = NULL, *key = NULL, *cnt = NULL, *header = NULL, *sk = NULL, *sc = NULL;
    int rc = bench_docs(&tok_off, &tok, n, seed);
    size_t cap = 0, scap = 0;
    tab_off = (uint64_t *)dm_malloc(8 * (n + 1));
    header = (uint32_t *)dm_malloc(4 * DM_TF_BUCKETS * n + 4);
    scan = (uint64_t *)dm_malloc(8 * DM_TF_BUCKETS * n + 8);
    row_off = (uint64_t *)dm_malloc(8 * (n + 1));
    docs_host *h = (docs_host *)dm_calloc(1, sizeof *h);
    if (rc == DM_OK && (!tab_off || !header || !scan || !row_off || !h)) rc = DM_ERR_NOMEM;
    if (rc == DM_OK) tab_off[0] = 0;
    /* document d's table: the smallest doubling of its buckets that holds it (the driver's
     * rebuilds), filled in token order */
    for (size_t d = 0; rc == DM_OK && d < n; d++) {
        uint64_t len = tok_off[d + 1] - tok_off[d];
        for (int grow = 0; rc == DM_OK; grow++) {
            uint32_t bcap = (uint32_t)dm_tf_bcap(len, 2, grow);
            size_t slots = (size_t)DM_TF_BUCKETS * bcap;
            if (slots > scap) {
                dm_free(sk);
                dm_free(sc);
                scap = 2 * slots;
                sk = (uint32_t *)dm_malloc(4 * scap);
                sc = (uint32_t *)dm_malloc(4 * scap);
                if (!sk || !sc) {
                    rc = DM_ERR_NOMEM;
                    break;
                }
            }
            memset(sk, 0xff, 4 * slots);
            memset(sc, 0, 4 * slots);
            int ok = 1;
            for (uint64_t i = tok_off[d]; ok && i < tok_off[d + 1]; i++)
                ok = dm_tf_insert(sk, sc, bcap, tok[i], 1, 0);
            if (!ok) continue;
            tab_off[d + 1] = tab_off[d] + slots;
            if (tab_off[d + 1] > cap) {
                cap = 2 * tab_off[d + 1];
                uint32_t *k2 = (uint32_t *)dm_realloc(key, 4 * cap), *c2 = k2 ? (uint32_t *)dm_realloc(cnt, 4 * cap) : NULL;
                if (k2) key = k2;
                if (c2) cnt = c2;
                if (!k2 || !c2) {
                    rc = DM_ERR_NOMEM;
                    break;
                }
            }
            memcpy(key + tab_off[d], sk, 4 * slots);
            memcpy(cnt + tab_off[d], sc, 4 * slots);
            for (uint32_t b = 0; b < DM_TF_BUCKETS; b++)
                header[d * DM_TF_BUCKETS + b] = dm_tf_bucket_used(sk, bcap, b);
            break;
        }
    }
    /* the exclusive scan of the header (the compaction's input) and the row offsets */
    uint64_t p = 0;
    for (size_t i = 0; rc == DM_OK && i < DM_TF_BUCKETS * n; i++) {
        if (i % DM_TF_BUCKETS == 0) row_off[i / DM_TF_BUCKETS] = p;
        scan[i] = p;
        p += header[i];
    }
    if (rc == DM_OK) row_off[n] = p;
    dm_free(tok_off);
    dm_free(tok);
    dm_free(header);
    dm_free(sk);
    dm_free(sc);
    if (h) *h = {tab_off, key, cnt, scan, row_off};
    if (rc != DM_OK) {
        if (h) docs_host_drop(h);
        else {
            dm_free(tab_off);
            dm_free(key);
            dm_free(cnt);
            dm_free(scan);
            dm_free(row_off);
        }
        return rc;
    }
    out->data = h;
    out->bytes = 8 * (n + 1) * 2 + 8 * (size_t)tab_off[n] + 8 * DM_TF_BUCKETS * n;
    out->drop = docs_host_drop;
    return DM_OK;
}

int create_docs(workload *w, size_t n, uint64_t seed)
{
    DM_TRY(dm_wl_cache_get("tfidf.docs", n, seed, docs_host_build, NULL, &w->lent));
    const docs_host *h = (const docs_host *)w->lent;
    w->h_row_off = h->row_off;
    const uint64_t p = h->row_off[n], slots = h->tab_off[n];
    dm_tf_compact_args *a = &w->ca;
    a->n_docs = n;
    int rc = dev(w, (uint64_t **)&a->tab_off, 8 * (n + 1), h->tab_off);
    if (rc == DM_OK) rc = dev(w, (uint32_t **)&a->tab_key, 4 * slots, h->key);
    if (rc == DM_OK) rc = dev(w, (uint32_t **)&a->tab_cnt, 4 * slots, h->cnt);
    if (rc == DM_OK) rc = dev(w, &a->header, 4 * DM_TF_BUCKETS * n, NULL);
    if (rc == DM_OK && w->kind == W_COMPACT) {
        rc = dev(w, (uint64_t **)&a->header_scan, 8 * DM_TF_BUCKETS * n, h->scan);
        if (rc == DM_OK) rc = dev(w, &a->out_term, 4 * p, NULL);
        if (rc == DM_OK) rc = dev(w, &a->out_count, 4 * p, NULL);
        if (rc == DM_OK) rc = dev(w, &a->row_off, 8 * (n + 1), NULL);
    }
    return rc;
}

/* ------------------------------------------------------------------ vocabulary and hash tables */

size_t pow2_at_least(size_t n)
{
    size_t c = 2;
    while (c < n) c *= 2;
    return c;
}

/* Term `id` of a seeded term space: its hash (dm_tfidf_bench_term_hash) and 3..12 letters. */
uint64_t term_hash(uint64_t id, uint64_t seed) { return dm_tfidf_bench_term_hash(id, seed); }

int term_letters(char *p, uint64_t id, uint64_t seed)
{
    uint64_t x = dm_mix64(id ^ seed) | 1;
    int len = 3 + (int)(x % 10);
    for (int j = 0; j < len; j++, x = x * 6364136223846793005ull + 1442695040888963407ull)
        p[j] = (char)('a' + (x >> 59) % 26);
    return len;
}

/* The terms ids[i] with hashes hash[i] on the device: hashes, and offsets and bytes unless d_off
 * is NULL (hash-only tables). */
int terms_up(workload *w, const uint64_t **d_hash, const uint64_t **d_off, const char **d_bytes, const uint64_t *ids,
             const uint64_t *hash, size_t n, uint64_t seed)
{
    int rc = dev(w, (uint64_t **)d_hash, 8 * n, hash);
    if (rc != DM_OK || !d_off) return rc; /* hash-only tables */
    uint64_t *off = (uint64_t *)dm_malloc(8 * (n + 1));
    char *bytes = (char *)dm_malloc(12 * n + 1);
    if (!off || !bytes) {
        dm_free(off);
        dm_free(bytes);
        return DM_ERR_NOMEM;
    }
    off[0] = 0;
    for (size_t i = 0; i < n; i++) off[i + 1] = off[i] + (uint64_t)term_letters(bytes + off[i], ids[i], seed);
    rc = dev(w, (uint64_t **)d_off, 8 * (n + 1), off);
    if (rc == DM_OK) rc = dev(w, (char **)d_bytes, off[n], bytes);
    dm_free(off);
    dm_free(bytes);
    return rc;
}

/* A cleared table of capacity pow2(2 n + 2) (the driver's) in w->va. */
int table(workload *w, size_t n, int hash_only)
{
    dm_vt_args *a = &w->va;
    a->cap = pow2_at_least(2 * n + 2);
    int rc = dev(w, &a->key, 8 * a->cap, NULL);
    if (rc == DM_OK) rc = dev(w, &a->ident, 4 * a->cap, NULL);
    if (rc == DM_OK) rc = dev(w, &a->used, 8, NULL);
    if (rc == DM_OK) rc = dev(w, &a->full, 4, NULL);
    if (rc == DM_OK) rc = dev(w, &a->dup, 4, NULL);
    if (rc == DM_OK) rc = dev(w, &a->ambiguous_q, 8, NULL);
    if (rc == DM_OK && hash_only) rc = dev(w, &a->amb, 4 * a->cap, NULL);
    return rc;
}

/* Clears the table of w->va (before each build). */
int table_clear(const workload *w, cudaStream_t s)
{
    const dm_vt_args *a = &w->va;
    DM_CUDA_TRY(cudaMemsetAsync(a->ident, 0, 4 * a->cap, s));
    DM_CUDA_TRY(cudaMemsetAsync(a->used, 0, 8, s));
    DM_CUDA_TRY(cudaMemsetAsync(a->full, 0, 4, s));
    DM_CUDA_TRY(cudaMemsetAsync(a->dup, 0, 4, s));
    if (a->amb) DM_CUDA_TRY(cudaMemsetAsync(a->amb, 0, 4 * a->cap, s));
    return DM_OK;
}

/* Builds the table of w->va with the default instance of `name` (vocab_build, hash_build). */
int build_default(workload *w, const char *name)
{
    const dm_tune_kernel *k = dm_tune_kernel_find(name);
    if (!k) return DM_ERR(DM_ERR_UNSUPPORTED, "tfidf bench: kernel %s is not registered", name);
    DM_TRY(table_clear(w, 0));
    DM_TRY(k->instances[k->default_instance].launch(&w->va, w->va.n, NULL));
    uint32_t full = 1, dup = 1;
    DM_TRY(down(&full, w->va.full, 4));
    DM_TRY(down(&dup, w->va.dup, 4));
    if (full || dup) return DM_ERR(DM_ERR_CUDA, "tfidf bench: %s: the vocabulary table was not built", name);
    return DM_OK;
}

int create_table(workload *w, size_t n, uint64_t seed)
{
    dm_vt_args *a = &w->va;
    const int query = w->kind == W_VT_QUERY || w->kind == W_HT_QUERY;
    const int hash_only = w->kind == W_HT_BUILD || w->kind == W_HT_QUERY;
    size_t nv = w->kind == W_VT_QUERY ? n / 4 + 1 : w->kind == W_HT_QUERY ? n / 16 + 1 : n;
    size_t nq = query ? n : 0;
    w->n_vocab = nv;
    uint64_t *ids = (uint64_t *)dm_malloc(8 * (nv > nq ? nv : nq) + 8);
    uint64_t *hash = (uint64_t *)dm_malloc(8 * (nv > nq ? nv : nq) + 8);
    if (!ids || !hash) {
        dm_free(ids);
        dm_free(hash);
        return DM_ERR_NOMEM;
    }
    /* the vocabulary: ids 0 .. nv-1; hash_build: one in 1024 takes the hash of an earlier term */
    for (size_t i = 0; i < nv; i++) {
        ids[i] = i;
        hash[i] = term_hash(i, seed);
        if (w->kind == W_HT_BUILD && i % 1024 == 1023) hash[i] = hash[i - 512];
    }
    a->n = nv;
    int rc = terms_up(w, &a->t_hash, hash_only ? NULL : &a->t_off, hash_only ? NULL : &a->t_bytes, ids, hash, nv,
                      seed);
    if (rc == DM_OK) rc = table(w, nv, hash_only);
    if (rc == DM_OK && query) rc = build_default(w, hash_only ? "tfidf.hash_build" : "tfidf.vocab_build");
    if (rc == DM_OK && query) {
        /* queries: terms of the vocabulary, frequent (small) ids more often; the rest unknown
         * (ids beyond the vocabulary) */
        dm_tfidf_bench_queries(ids, hash, nq, nv, seed, w->kind == W_VT_QUERY ? 10 : 20);
        a->n_q = nq;
        rc = terms_up(w, &a->q_hash, hash_only ? NULL : &a->q_off, hash_only ? NULL : &a->q_bytes, ids, hash, nq,
                      seed);
        if (rc == DM_OK) rc = dev(w, &a->ids_out, 4 * nq, NULL);
    }
    dm_free(ids);
    dm_free(hash);
    return rc;
}

int cmp_pair(const void *x, const void *y)
{
    const uint64_t *a = (const uint64_t *)x, *b = (const uint64_t *)y;
    if (a[0] != b[0]) return a[0] < b[0] ? -1 : 1;
    return (a[1] > b[1]) - (a[1] < b[1]);
}

/* Canonical content of a built table: vocab_build: per term (key, slots naming it); hash_build:
 * the occupied slots' (key, ambiguous) in order; then the counters. */
int table_output(const workload *w, uint64_t *o)
{
    const dm_vt_args *a = &w->va;
    const size_t n = a->n;
    uint64_t *key = (uint64_t *)dm_malloc(8 * a->cap);
    uint32_t *ident = (uint32_t *)dm_malloc(4 * a->cap), *amb = (uint32_t *)dm_malloc(4 * a->cap);
    int rc = key && ident && amb ? DM_OK : DM_ERR_NOMEM;
    if (rc == DM_OK) rc = down(key, a->key, 8 * a->cap);
    if (rc == DM_OK) rc = down(ident, a->ident, 4 * a->cap);
    if (rc == DM_OK && a->amb) rc = down(amb, a->amb, 4 * a->cap);
    memset(o, 0, 16 * n + 16);
    size_t m = 0;
    for (uint64_t sl = 0; rc == DM_OK && sl < a->cap; sl++) {
        if (!ident[sl]) continue;
        if (a->amb) { /* hash-only: which of two terms of one hash claims the slot is a race */
            if (m < n) {
                o[2 * m] = key[sl];
                o[2 * m + 1] = amb[sl];
            }
            m++;
        } else if (ident[sl] <= n) {
            o[2 * (ident[sl] - 1)] = key[sl];
            o[2 * (ident[sl] - 1) + 1]++;
        } else {
            o[2 * n + 1] = ~0ull; /* an identity out of range */
        }
    }
    if (rc == DM_OK && a->amb) qsort(o, m < n ? m : n, 16, cmp_pair);
    if (rc == DM_OK) rc = down(&o[2 * n], a->used, 8);
    uint32_t fd[2] = {0, 0};
    if (rc == DM_OK) rc = down(&fd[0], a->full, 4);
    if (rc == DM_OK && !a->amb) rc = down(&fd[1], a->dup, 4);
    if (rc == DM_OK) o[2 * n + 1] ^= (uint64_t)fd[0] << 32 | fd[1];
    dm_free(key);
    dm_free(ident);
    dm_free(amb);
    return rc;
}

/* ------------------------------------------------------------------ weights */

/* The host side of n count rows and their weights' passes, the same for every input of (n, seed):
 * kept between inputs (common/tune/wl_cache.h). */
struct weigh_host {
    dm_tf_counts c;
    uint32_t *map;             /* kLocalTerms */
    double *col_w;             /* kColumns */
    uint64_t *row_len;         /* n */
    uint64_t *out_off;         /* n + 1 */
    double *ow;                /* out_off[n]: the unnormalised entries in input order */
    uint32_t *scol, *spos;     /* out_off[n]: each row's (column, position) sorted */
};

void weigh_host_drop(void *p)
{
    weigh_host *h = (weigh_host *)p;
    if (!h) return;
    dm_tf_counts_free(&h->c);
    dm_free(h->map);
    dm_free(h->col_w);
    dm_free(h->row_len);
    dm_free(h->out_off);
    dm_free(h->ow);
    dm_free(h->scol);
    dm_free(h->spos);
    dm_free(h);
}

int weigh_host_build(dm_wl_host *out, size_t n, uint64_t seed, const void *arg)
{
    (void)arg;
    weigh_host *h = (weigh_host *)dm_calloc(1, sizeof *h);
    if (!h) return DM_ERR_NOMEM;
    uint64_t *tok_off = NULL;
    uint32_t *tok = NULL;
    int rc = bench_docs(&tok_off, &tok, n, seed);
    if (rc == DM_OK) rc = dm_tfidf_bench_count_rows(&h->c, tok_off, tok, n);
    dm_free(tok_off);
    dm_free(tok);
    const uint64_t nnz = rc == DM_OK ? h->c.row_off[n] : 0;
    /* local terms onto columns: a seeded permutation, the last 5% unmapped; idf of each column,
     * 1% of them 0 (a term in every document) */
    h->map = (uint32_t *)dm_malloc(4 * kLocalTerms);
    h->col_w = (double *)dm_malloc(8 * kColumns);
    h->row_len = (uint64_t *)dm_malloc(8 * n + 8);
    h->out_off = (uint64_t *)dm_malloc(8 * (n + 1));
    h->ow = (double *)dm_malloc(8 * nnz + 8);
    h->scol = (uint32_t *)dm_malloc(4 * nnz + 4);
    h->spos = (uint32_t *)dm_malloc(4 * nnz + 4);
    uint64_t *kept = (uint64_t *)dm_malloc(8 * (n + 1)), *pair = (uint64_t *)dm_malloc(8 * nnz + 8);
    uint32_t *ocol = (uint32_t *)dm_malloc(4 * nnz + 4), *opos = (uint32_t *)dm_malloc(4 * nnz + 4);
    if (rc == DM_OK && (!h->map || !h->col_w || !h->row_len || !h->out_off || !h->ow || !h->scol || !h->spos ||
                        !kept || !pair || !ocol || !opos))
        rc = DM_ERR_NOMEM;
    uint64_t s = seed ^ 0xda3e39cb94b95bdbull;
    if (rc == DM_OK) {
        uint32_t *map = h->map;
        for (uint32_t t = 0; t < kLocalTerms; t++) map[t] = t;
        for (uint32_t t = kLocalTerms - 1; t > 0; t--) {
            uint32_t j = (uint32_t)(rnd(&s) % (t + 1)), x = map[t];
            map[t] = map[j];
            map[j] = x;
        }
        for (uint32_t t = 0; t < kLocalTerms; t++)
            if (map[t] >= kColumns) map[t] = DM_TERM_NONE;
        for (uint32_t k = 0; k < kColumns; k++)
            h->col_w[k] = k % 100 == 7 ? 0.0 : 0.05 + (double)(rnd(&s) >> 11) * (12.0 / 9007199254740992.0);
    }
    /* pass 1 (weigh_len), its scan, pass 2 (weigh_fill) and the segmented sort, as defined */
    if (rc == DM_OK) {
        dm_tfidf_bench_weigh_passes(&h->c, h->map, h->col_w, 0, h->row_len, kept, h->out_off, ocol, h->ow, opos, pair);
        for (uint64_t e = 0; e < h->out_off[n]; e++) {
            h->scol[e] = (uint32_t)(pair[e] >> 32);
            h->spos[e] = (uint32_t)pair[e];
        }
    }
    dm_free(kept);
    dm_free(pair);
    dm_free(ocol);
    dm_free(opos);
    if (rc != DM_OK) {
        weigh_host_drop(h);
        return rc;
    }
    out->data = h;
    out->bytes = 8 * (size_t)(n + 1) * 3 + 8 * (size_t)nnz + 16 * (size_t)h->out_off[n] + 4 * kLocalTerms + 8 * kColumns;
    out->drop = weigh_host_drop;
    return DM_OK;
}

int create_weigh(workload *w, size_t n, uint64_t seed)
{
    DM_TRY(dm_wl_cache_get("tfidf.weigh", n, seed, weigh_host_build, NULL, &w->lent));
    const weigh_host *h = (const weigh_host *)w->lent;
    const dm_tf_counts *c = &h->c;
    const uint64_t nnz = c->row_off[n], m = h->out_off[n];
    w->h_out_off = h->out_off;
    dm_w_args *a = &w->wa;
    a->n_rows = n;
    a->sublinear = 0;
    a->l2 = 1;
    int rc = DM_OK;
    if (w->kind != W_NORM) {
        rc = dev(w, (uint64_t **)&a->row_off, 8 * (n + 1), c->row_off);
        if (rc == DM_OK) rc = dev(w, (uint32_t **)&a->term, 4 * nnz, c->term);
        if (rc == DM_OK) rc = dev(w, (uint32_t **)&a->count, 4 * nnz, c->count);
        if (rc == DM_OK) rc = dev(w, (uint32_t **)&a->map, 4 * kLocalTerms, h->map);
        if (rc == DM_OK) rc = dev(w, (double **)&a->col_w, 8 * kColumns, h->col_w);
    }
    if (rc == DM_OK && w->kind == W_LEN) {
        rc = dev(w, &a->row_len, 8 * n, NULL);
        if (rc == DM_OK) rc = dev(w, &a->kept, 8 * (n + 1), NULL);
        if (rc == DM_OK) rc = dev(w, &a->zero, 16, NULL);
        a->unmapped = a->zero + 1;
    }
    if (rc == DM_OK && w->kind == W_FILL) {
        rc = dev(w, &a->row_len, 8 * n, h->row_len);
        if (rc == DM_OK) rc = dev(w, (uint64_t **)&a->out_off, 8 * (n + 1), h->out_off);
        if (rc == DM_OK) rc = dev(w, &a->out_col, 4 * m, NULL);
        if (rc == DM_OK) rc = dev(w, &a->out_w, 8 * m, NULL);
        if (rc == DM_OK) rc = dev(w, &a->out_pos, 4 * m, NULL);
    }
    if (rc == DM_OK && w->kind == W_NORM) {
        rc = dev(w, (uint64_t **)&a->out_off, 8 * (n + 1), h->out_off);
        if (rc == DM_OK) rc = dev(w, &a->out_w, 8 * m, h->ow);
        if (rc == DM_OK) rc = dev(w, (uint32_t **)&a->sorted_col, 4 * m, h->scol);
        if (rc == DM_OK) rc = dev(w, (uint32_t **)&a->sorted_pos, 4 * m, h->spos);
        if (rc == DM_OK) rc = dev(w, &a->final_col, 4 * m, NULL);
        if (rc == DM_OK) rc = dev(w, &a->final_val, 4 * m, NULL);
    }
    return rc;
}

int create(void **state, size_t n, uint64_t seed, int kind)
{
    *state = NULL;
    if (n == 0) n = 1;
    workload *w = (workload *)dm_calloc(1, sizeof *w);
    if (!w) return DM_ERR_NOMEM;
    w->kind = kind;
    w->n = w->n0 = n;
    int rc;
    switch (kind) {
    case W_HEADER:
    case W_COMPACT: rc = create_docs(w, n, seed); break;
    case W_VT_BUILD:
    case W_VT_QUERY:
    case W_HT_BUILD:
    case W_HT_QUERY: rc = create_table(w, n, seed); break;
    default: rc = create_weigh(w, n, seed); break;
    }
    if (rc == DM_OK && cudaDeviceSynchronize() != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "tfidf bench: upload failed");
    if (rc != DM_OK) {
        destroy(w);
        return rc;
    }
    *state = w;
    return DM_OK;
}

} // namespace

extern "C" {

int dm_tfidf_bench_header_create(void **state, size_t n, uint64_t seed) { return create(state, n, seed, W_HEADER); }
int dm_tfidf_bench_compact_create(void **state, size_t n, uint64_t seed) { return create(state, n, seed, W_COMPACT); }
int dm_tfidf_bench_vocab_build_create(void **state, size_t n, uint64_t seed)
{
    return create(state, n, seed, W_VT_BUILD);
}
int dm_tfidf_bench_vocab_query_create(void **state, size_t n, uint64_t seed)
{
    return create(state, n, seed, W_VT_QUERY);
}
int dm_tfidf_bench_hash_build_create(void **state, size_t n, uint64_t seed)
{
    return create(state, n, seed, W_HT_BUILD);
}
int dm_tfidf_bench_hash_query_create(void **state, size_t n, uint64_t seed)
{
    return create(state, n, seed, W_HT_QUERY);
}
int dm_tfidf_bench_weigh_len_create(void **state, size_t n, uint64_t seed) { return create(state, n, seed, W_LEN); }
int dm_tfidf_bench_weigh_fill_create(void **state, size_t n, uint64_t seed) { return create(state, n, seed, W_FILL); }
int dm_tfidf_bench_weigh_norm_create(void **state, size_t n, uint64_t seed) { return create(state, n, seed, W_NORM); }

int dm_tfidf_bench_run(void *state, const dm_tune_instance *inst, void *stream)
{
    workload *w = (workload *)state;
    cudaStream_t s = (cudaStream_t)stream;
    switch (w->kind) {
    case W_HEADER:
    case W_COMPACT: return inst->launch(&w->ca, w->n, stream);
    case W_VT_BUILD:
    case W_HT_BUILD: DM_TRY(table_clear(w, s)); return inst->launch(&w->va, w->n, stream);
    case W_VT_QUERY: return inst->launch(&w->va, w->n, stream);
    case W_HT_QUERY:
        DM_CUDA_TRY(cudaMemsetAsync(w->va.ambiguous_q, 0xff, 8, s));
        return inst->launch(&w->va, w->n, stream);
    case W_LEN: DM_CUDA_TRY(cudaMemsetAsync(w->wa.zero, 0, 16, s)); return inst->launch(&w->wa, w->n, stream);
    default: return inst->launch(&w->wa, w->n, stream);
    }
}

int dm_tfidf_bench_output(void *state, void *host, size_t *nbytes)
{
    workload *w = (workload *)state;
    const size_t n = w->n;
    char *h = (char *)host;
    switch (w->kind) {
    case W_HEADER:
        *nbytes = 4 * DM_TF_BUCKETS * n;
        return h ? down(h, w->ca.header, *nbytes) : DM_OK;
    case W_COMPACT: {
        uint64_t e = w->h_row_off[n];
        *nbytes = 8 * (n + 1) + 8 * e;
        if (!h) return DM_OK;
        DM_TRY(down(h, w->ca.row_off, 8 * (n + 1)));
        DM_TRY(down(h + 8 * (n + 1), w->ca.out_term, 4 * e));
        return down(h + 8 * (n + 1) + 4 * e, w->ca.out_count, 4 * e);
    }
    case W_VT_BUILD:
    case W_HT_BUILD:
        *nbytes = 16 * n + 16;
        return h ? table_output(w, (uint64_t *)h) : DM_OK;
    case W_VT_QUERY:
    case W_HT_QUERY:
        *nbytes = 4 * n + (w->kind == W_HT_QUERY ? 8 : 0);
        if (!h) return DM_OK;
        DM_TRY(down(h, w->va.ids_out, 4 * n));
        return w->kind == W_HT_QUERY ? down(h + 4 * n, w->va.ambiguous_q, 8) : DM_OK;
    case W_LEN:
        *nbytes = 16 * n + 16;
        if (!h) return DM_OK;
        DM_TRY(down(h, w->wa.row_len, 8 * n));
        DM_TRY(down(h + 8 * n, w->wa.kept, 8 * n));
        return down(h + 16 * n, w->wa.zero, 16);
    case W_FILL: {
        uint64_t m = w->h_out_off[n];
        *nbytes = 16 * m;
        if (!h) return DM_OK;
        DM_TRY(down(h, w->wa.out_col, 4 * m));
        DM_TRY(down(h + 4 * m, w->wa.out_pos, 4 * m));
        return down(h + 8 * m, w->wa.out_w, 8 * m);
    }
    default: {
        uint64_t m = w->h_out_off[n];
        *nbytes = 8 * m;
        if (!h) return DM_OK;
        DM_TRY(down(h, w->wa.final_col, 4 * m));
        return down(h + 4 * m, w->wa.final_val, 4 * m);
    }
    }
}

void dm_tfidf_bench_destroy(void *state) { destroy((workload *)state); }

int dm_tfidf_bench_resize(void *state, size_t n)
{
    workload *w = (workload *)state;
    if (n == 0 || n > w->n0) return DM_ERR(DM_ERR_INVALID_ARG, "tfidf bench: resize to %zu of %zu", n, w->n0);
    switch (w->kind) {
    case W_HEADER:
    case W_COMPACT: w->ca.n_docs = n; break;
    case W_LEN:
    case W_FILL:
    case W_NORM: w->wa.n_rows = n; break;
    default: return DM_ERR(DM_ERR_UNSUPPORTED, "tfidf bench: a table workload cannot be resized");
    }
    w->n = n;
    return DM_OK;
}

} // extern "C"
