/* The CPU backend of tfidf, the reference of the CUDA backend: per-document term counting, the
 * vocabulary merge and lookups (through the host term table of terms.c), and the weights.
 * Simple and readable; OpenMP over documents where it is free. Reference: this file is the
 * oracle of tests/tfidf and of the tuner's checks (tfidf/tfidf.h gives the contracts). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "tfidf/tfidf.h"
#include "tfidf/tfidf_internal.h"

void dm_tf_counts_free(dm_tf_counts *c)
{
    if (!c) return;
    dm_free(c->row_off);
    dm_free(c->term);
    dm_free(c->count);
    memset(c, 0, sizeof *c);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* ------------------------------------------------------------------ per-document counts */

int dm_tf_count_cpu(dm_tf_counts *out, const uint64_t *tok_off, const uint32_t *tok, size_t n_docs,
                    uint32_t n_terms, dm_tf_count_options *opt)
{
    if (!out || !tok_off || (!tok && tok_off[n_docs] > 0))
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_tf_count_cpu: NULL argument");
    memset(out, 0, sizeof *out);
    uint64_t n_tok = tok_off[n_docs];
    for (uint64_t i = 0; i < n_tok; i++)
        if (tok[i] >= n_terms)
            return DM_ERR(DM_ERR_INVALID_ARG, "dm_tf_count_cpu: token %" PRIu64 " has term %u of %u", i, tok[i], n_terms);
    out->n_rows = n_docs;
    out->row_off = dm_malloc(sizeof(uint64_t) * (n_docs + 1));
    if (!out->row_off) return DM_ERR_NOMEM;
    int rc = DM_OK;
    /* pass 1: distinct terms per document, with a per-thread "last seen in document" array */
    /* (in both passes every thread meets the worksharing loop, also one whose scratch could not
     * be allocated: a thread that skips it leaves the others waiting at its end forever) */
#pragma omp parallel
    {
        uint64_t *seen = dm_malloc(sizeof(uint64_t) * (n_terms ? n_terms : 1));
        if (!seen) {
#pragma omp atomic write
            rc = DM_ERR_NOMEM;
        } else {
            for (uint32_t t = 0; t < n_terms; t++) seen[t] = UINT64_MAX;
        }
#pragma omp for schedule(dynamic, 256)
        for (size_t d = 0; d < n_docs; d++) {
            if (!seen) continue;
            uint64_t k = 0;
            for (uint64_t i = tok_off[d]; i < tok_off[d + 1]; i++)
                if (seen[tok[i]] != d) {
                    seen[tok[i]] = d;
                    k++;
                }
            out->row_off[d + 1] = k;
        }
        dm_free(seen);
    }
    if (rc < 0) {
        dm_tf_counts_free(out);
        return rc;
    }
    out->row_off[0] = 0;
    for (size_t d = 0; d < n_docs; d++) out->row_off[d + 1] += out->row_off[d];
    uint64_t nnz = out->row_off[n_docs];
    out->term = dm_malloc(sizeof(uint32_t) * (nnz ? nnz : 1));
    out->count = dm_malloc(sizeof(uint32_t) * (nnz ? nnz : 1));
    if (!out->term || !out->count) {
        dm_tf_counts_free(out);
        return DM_ERR_NOMEM;
    }
    /* pass 2: the distinct terms of each row, sorted, then their counts */
#pragma omp parallel
    {
        uint32_t *cnt = dm_calloc(n_terms ? n_terms : 1, sizeof(uint32_t));
        if (!cnt) {
#pragma omp atomic write
            rc = DM_ERR_NOMEM;
        }
#pragma omp for schedule(dynamic, 256)
        for (size_t d = 0; d < n_docs; d++) {
            if (!cnt) continue;
            uint32_t *row = out->term + out->row_off[d];
            uint64_t k = 0;
            for (uint64_t i = tok_off[d]; i < tok_off[d + 1]; i++)
                if (cnt[tok[i]]++ == 0) row[k++] = tok[i];
            qsort(row, (size_t)k, sizeof *row, cmp_u32);
            for (uint64_t j = 0; j < k; j++) {
                out->count[out->row_off[d] + j] = cnt[row[j]];
                cnt[row[j]] = 0;
            }
        }
        dm_free(cnt);
    }
    if (rc < 0) dm_tf_counts_free(out);
    return rc;
}

/* ------------------------------------------------------------------ vocabulary table */

static size_t table_cap_for(size_t n, size_t initial)
{
    return initial ? initial : 2 * n + 2;
}

int dm_vocab_merge_cpu(dm_termlist *out, const dm_termlist *in, dm_vocab_table_options *opt)
{
    if (!out || !in || !opt) return DM_ERR(DM_ERR_INVALID_ARG, "dm_vocab_merge_cpu: NULL argument");
    memset(out, 0, sizeof *out);
    dm_termtab t;
    DM_TRY(dm_termtab_init(&t, table_cap_for(in->n, opt->initial_cap)));
    int rc = DM_OK;
    for (size_t i = 0; i < in->n && rc == DM_OK; i++) {
        uint32_t idx;
        rc = dm_termtab_insert(&t, &idx, NULL, in->hash[i], dm_termlist_bytes(in, i), dm_termlist_len(in, i));
        if (rc == DM_OK) t.terms.val[idx] += in->val ? in->val[i] : 1;
    }
    if (rc < 0) {
        dm_termtab_free(&t);
        return rc;
    }
    opt->rebuilds += t.rebuilds;
    opt->collisions += t.collisions;
    *out = t.terms;
    memset(&t.terms, 0, sizeof t.terms);
    if (!out->hash) { /* no terms: give the caller valid empty arrays */
        dm_termtab_free(&t);
        return dm_termlist_alloc(out, 0, 0, 1);
    }
    dm_termtab_free(&t);
    return DM_OK;
}

int dm_vocab_lookup_cpu(uint32_t *ids_out, const dm_termlist *vocab, const dm_termlist *queries,
                        dm_vocab_table_options *opt)
{
    if (!vocab || !queries || !opt || (!ids_out && queries->n))
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_vocab_lookup_cpu: NULL argument");
    dm_termtab t;
    DM_TRY(dm_termtab_init(&t, table_cap_for(vocab->n, opt->initial_cap)));
    int rc = DM_OK;
    for (size_t i = 0; i < vocab->n && rc == DM_OK; i++) {
        uint32_t idx;
        int added;
        rc = dm_termtab_insert(&t, &idx, &added, vocab->hash[i], dm_termlist_bytes(vocab, i),
                               dm_termlist_len(vocab, i));
        if (rc == DM_OK && !added)
            rc = DM_ERR(DM_ERR_INVALID_ARG, "vocabulary lookup: term %zu repeats term %u", i, idx);
    }
    if (rc == DM_OK) {
        opt->rebuilds += t.rebuilds;
        opt->collisions += t.collisions;
#pragma omp parallel for schedule(static)
        for (size_t q = 0; q < queries->n; q++)
            ids_out[q] = dm_termtab_find(&t, queries->hash[q], dm_termlist_bytes(queries, q),
                                         dm_termlist_len(queries, q));
    }
    dm_termtab_free(&t);
    return rc;
}

/* Hash-only table: ident = vocabulary index + 1, or UINT32_MAX when several terms share it. */
int dm_hash_lookup_cpu(uint32_t *ids_out, const dm_termlist *vocab, const uint64_t *hashes, size_t n,
                       dm_vocab_table_options *opt)
{
    if (!vocab || !opt || (n && (!ids_out || !hashes)))
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_hash_lookup_cpu: NULL argument");
    size_t cap = 2;
    size_t want = table_cap_for(vocab->n, opt->initial_cap);
    while (cap < want) cap *= 2;
    uint64_t *key = NULL;
    uint32_t *ident = NULL;
    size_t used = 0;
    int rc = DM_OK;
    for (int pass = 0; pass < 64; pass++) { /* grow and rebuild until the load is at most 1/2 */
        dm_free(key);
        dm_free(ident);
        key = dm_malloc(sizeof(uint64_t) * cap);
        ident = dm_calloc(cap, sizeof(uint32_t));
        if (!key || !ident) {
            rc = DM_ERR_NOMEM;
            break;
        }
        used = 0;
        size_t mask = cap - 1;
        int full = 0;
        for (size_t i = 0; i < vocab->n && !full; i++) {
            uint64_t h = vocab->hash[i];
            size_t s = (size_t)dm_slot_hash(h) & mask;
            while (ident[s] && key[s] != h) s = (s + 1) & mask;
            if (ident[s]) {
                ident[s] = UINT32_MAX; /* several terms share this hash */
                continue;
            }
            if (2 * (used + 1) > cap) {
                full = 1;
                break;
            }
            key[s] = h;
            ident[s] = (uint32_t)(i + 1);
            used++;
        }
        if (!full) break;
        cap *= 2;
        opt->rebuilds++;
    }
    if (rc == DM_OK) {
        size_t mask = cap - 1;
        for (size_t q = 0; q < n && rc == DM_OK; q++) {
            uint64_t h = hashes[q];
            size_t s = (size_t)dm_slot_hash(h) & mask;
            while (ident[s] && key[s] != h) s = (s + 1) & mask;
            if (!ident[s]) ids_out[q] = DM_TERM_NONE;
            else if (ident[s] != UINT32_MAX) ids_out[q] = ident[s] - 1;
            else rc = dm_tfidf_ambiguous_hash(vocab, h);
        }
    }
    dm_free(key);
    dm_free(ident);
    return rc;
}

int dm_tf_count_hashes_cpu(dm_tf_counts *out, dm_tf_dev **dev, const uint64_t *tok_off, const uint64_t *hashes,
                           size_t n_docs, const dm_termlist *terms, dm_tf_count_options *opt,
                           dm_vocab_table_options *vo)
{
    if (dev) *dev = NULL; /* the rows are on the host */
    if (!out || !tok_off || !terms || !opt || !vo || (!hashes && tok_off[n_docs] > tok_off[0]))
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_tf_count_hashes_cpu: NULL argument");
    memset(out, 0, sizeof *out);
    if (opt->hashes_on_device)
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_tf_count_hashes_cpu: the token hashes are in device memory (CUDA backend only)");
    if (terms->n >= DM_TERM_NONE) return DM_ERR(DM_ERR_UNSUPPORTED, "dm_tf_count_hashes_cpu: too many terms");
    uint64_t t0 = tok_off[0], n_tok = tok_off[n_docs] - t0;
    uint32_t *tok = dm_malloc(sizeof(uint32_t) * (tok_off[n_docs] ? tok_off[n_docs] : 1));
    if (!tok) return DM_ERR_NOMEM;
    int rc = dm_hash_lookup_cpu(tok + t0, terms, hashes ? hashes + t0 : NULL, n_tok, vo);
    size_t miss = rc == DM_OK ? dm_tfidf_first_none(tok + t0, n_tok) : SIZE_MAX;
    if (miss != SIZE_MAX) rc = dm_tfidf_missing_hash(t0 + miss, hashes[t0 + miss]);
    if (rc == DM_OK) rc = dm_tf_count_cpu(out, tok_off, tok, n_docs, (uint32_t)terms->n, opt);
    dm_free(tok);
    return rc;
}

/* ------------------------------------------------------------------ weights */

double dm_idf_value(int kind, uint64_t df, uint64_t n)
{
    if (kind == DM_IDF_SKLEARN) return log((1.0 + (double)n) / (1.0 + (double)df)) + 1.0;
    return log((double)n / (double)df);
}

typedef struct colw {
    uint32_t col;
    double w;
} colw;

static int cmp_colw(const void *a, const void *b)
{
    uint32_t x = ((const colw *)a)->col, y = ((const colw *)b)->col;
    return (x > y) - (x < y);
}

int dm_tfidf_weigh_cpu(dm_vectors *out, const dm_tf_counts *counts, const uint32_t *term_map,
                       size_t n_local_terms, const double *col_w, uint64_t n_cols, dm_weigh_options *opt)
{
    if (!out || !counts || !opt || (!term_map && n_local_terms))
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_tfidf_weigh_cpu: NULL argument");
    size_t n = counts->n_rows;
    const uint64_t *ro = counts->row_off;
    for (uint64_t k = 0; k < ro[n]; k++)
        if (counts->term[k] >= n_local_terms ||
            (term_map[counts->term[k]] != DM_TERM_NONE && term_map[counts->term[k]] >= n_cols))
            return DM_ERR(DM_ERR_INVALID_ARG, "dm_tfidf_weigh_cpu: entry %" PRIu64 " maps outside the columns", k);
    uint64_t *row_off = dm_malloc(sizeof(uint64_t) * (n + 1));
    if (!row_off) return DM_ERR_NOMEM;
    uint64_t zero = 0, unmapped = 0;
    /* pass 1: stored entries per row */
#pragma omp parallel for schedule(static) reduction(+ : zero, unmapped)
    for (size_t r = 0; r < n; r++) {
        uint64_t k = 0;
        for (uint64_t e = ro[r]; e < ro[r + 1]; e++) {
            uint32_t c = term_map[counts->term[e]];
            if (c == DM_TERM_NONE) unmapped += counts->count[e];
            else if (col_w[c] == 0.0) zero++;
            else k++;
        }
        row_off[r + 1] = k;
    }
    row_off[0] = 0;
    for (size_t r = 0; r < n; r++) row_off[r + 1] += row_off[r];
    uint64_t nnz = row_off[n];
    uint32_t *col = dm_malloc(sizeof(uint32_t) * (nnz ? nnz : 1));
    float *val = dm_malloc(sizeof(float) * (nnz ? nnz : 1));
    uint64_t max_row = 0;
    for (size_t r = 0; r < n; r++)
        if (ro[r + 1] - ro[r] > max_row) max_row = ro[r + 1] - ro[r];
    int rc = (col && val) ? DM_OK : DM_ERR_NOMEM;
    if (rc == DM_OK) {
#pragma omp parallel
        {
            colw *tmp = dm_malloc(sizeof(colw) * (max_row ? max_row : 1));
            if (!tmp) {
#pragma omp atomic write
                rc = DM_ERR_NOMEM;
            }
            { /* every thread meets the loop (see dm_tf_count_cpu) */
#pragma omp for schedule(dynamic, 256)
                for (size_t r = 0; r < n; r++) {
                    if (!tmp) continue;
                    uint64_t len = 0;
                    for (uint64_t e = ro[r]; e < ro[r + 1]; e++)
                        if (term_map[counts->term[e]] != DM_TERM_NONE) len += counts->count[e];
                    size_t k = 0;
                    for (uint64_t e = ro[r]; e < ro[r + 1]; e++) {
                        uint32_t c = term_map[counts->term[e]];
                        if (c == DM_TERM_NONE || col_w[c] == 0.0) continue;
                        tmp[k].col = c;
                        tmp[k].w = dm_tf_weight(counts->count[e], len, opt->sublinear) * col_w[c];
                        k++;
                    }
                    qsort(tmp, k, sizeof *tmp, cmp_colw);
                    double norm = 1.0;
                    if (opt->l2 && k) {
                        double ss = 0;
                        for (size_t j = 0; j < k; j++) ss += tmp[j].w * tmp[j].w;
                        norm = sqrt(ss);
                    }
                    for (size_t j = 0; j < k; j++) {
                        col[row_off[r] + j] = tmp[j].col;
                        val[row_off[r] + j] = (float)(tmp[j].w / norm);
                    }
                }
                dm_free(tmp);
            }
        }
    }
    if (rc < 0) {
        dm_free(row_off);
        dm_free(col);
        dm_free(val);
        return rc;
    }
    out->n_rows = n;
    out->n_cols = n_cols;
    out->row_off = row_off;
    out->col = col;
    out->val = val;
    opt->zero_weight += zero;
    opt->unmapped += unmapped;
    return DM_OK;
}
