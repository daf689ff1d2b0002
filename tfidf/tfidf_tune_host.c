/* Host parts of tfidf's tuning workloads (tfidf_tune.h) that are worth OpenMP threads: the count
 * rows of a token stream and the weights' passes as the kernels define them. Each document or
 * row is independent; offsets come from a scan between two parallel passes, so the results are
 * the same bits as one thread's. Reference: dm_tf_count_cpu (the rows), tfidf_kernels.cuh (the
 * passes). */
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "tfidf/tfidf.h"
#include "tfidf/tfidf_internal.h"
#include "tfidf/tfidf_tune.h"

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

void dm_tfidf_bench_queries(uint64_t *ids, uint64_t *hash, size_t nq, size_t nv, uint64_t seed, unsigned miss)
{
    const uint64_t s0 = seed ^ 0x5851f42d4c957f2dull; /* query q: draw q of this stream */
    const long nl = (long)nq;
#pragma omp parallel for schedule(static)
    for (long q = 0; q < nl; q++) {
        uint64_t x = dm_splitmix64_at(s0, (uint64_t)q);
        if (x % miss == 0) ids[q] = nv + (x >> 8) % (4 * (uint64_t)nv + 1);
        else ids[q] = ((x >> 8) % nv) * ((x >> 36) % nv) / nv;
        hash[q] = dm_tfidf_bench_term_hash(ids[q], seed);
    }
}

int dm_tfidf_bench_count_rows(dm_tf_counts *c, const uint64_t *tok_off, uint32_t *tok, size_t n)
{
    memset(c, 0, sizeof *c);
    c->n_rows = n;
    c->row_off = dm_malloc(8 * (n + 1));
    if (!c->row_off) return DM_ERR(DM_ERR_NOMEM, "tfidf bench: count rows of %zu documents", n);
    const long nl = (long)n;
    /* each document's tokens sorted in place; its distinct terms counted into row_off[d + 1] */
#pragma omp parallel for schedule(dynamic, 256)
    for (long d = 0; d < nl; d++) {
        uint32_t *t = tok + tok_off[d];
        size_t len = (size_t)(tok_off[d + 1] - tok_off[d]), m = 0;
        qsort(t, len, sizeof *t, cmp_u32);
        for (size_t i = 0; i < len; i++) m += i == 0 || t[i] != t[i - 1];
        c->row_off[d + 1] = m;
    }
    c->row_off[0] = 0;
    for (size_t d = 0; d < n; d++) c->row_off[d + 1] += c->row_off[d];
    c->term = dm_malloc(4 * c->row_off[n] + 4);
    c->count = dm_malloc(4 * c->row_off[n] + 4);
    if (!c->term || !c->count) {
        dm_tf_counts_free(c);
        return DM_ERR(DM_ERR_NOMEM, "tfidf bench: count rows of %zu documents", n);
    }
#pragma omp parallel for schedule(dynamic, 256)
    for (long d = 0; d < nl; d++) {
        const uint32_t *t = tok + tok_off[d];
        size_t len = (size_t)(tok_off[d + 1] - tok_off[d]);
        uint64_t m = c->row_off[d];
        for (size_t i = 0; i < len; i++) {
            if (i > 0 && t[i] == t[i - 1]) {
                c->count[m - 1]++;
                continue;
            }
            c->term[m] = t[i];
            c->count[m++] = 1;
        }
    }
    return DM_OK;
}

void dm_tfidf_bench_weigh_passes(const dm_tf_counts *c, const uint32_t *map, const double *col_w, int sublinear,
                                 uint64_t *row_len, uint64_t *kept, uint64_t *out_off, uint32_t *ocol,
                                 double *ow, uint32_t *opos, uint64_t *pair)
{
    const size_t n = c->n_rows;
    const long nl = (long)n;
    /* pass 1 (weigh_len): a row's mapped tokens and its kept entries (mapped, idf not 0) */
#pragma omp parallel for schedule(dynamic, 256)
    for (long r = 0; r < nl; r++) {
        uint64_t len = 0, k_r = 0;
        for (uint64_t e = c->row_off[r]; e < c->row_off[r + 1]; e++) {
            uint32_t k = map[c->term[e]];
            if (k == DM_TERM_NONE) continue;
            len += c->count[e];
            k_r += col_w[k] != 0.0;
        }
        row_len[r] = len;
        kept[r] = k_r;
    }
    /* its scan: where each row's stored entries begin */
    uint64_t m = 0;
    for (size_t r = 0; r < n; r++) {
        out_off[r] = m;
        m += kept[r];
    }
    out_off[n] = m;
    kept[n] = 0;
    /* pass 2 (weigh_fill) and each row's (column, position) pairs sorted (weigh_norm's input) */
#pragma omp parallel for schedule(dynamic, 256)
    for (long r = 0; r < nl; r++) {
        uint64_t at = out_off[r];
        for (uint64_t e = c->row_off[r]; e < c->row_off[r + 1]; e++) {
            uint32_t k = map[c->term[e]];
            if (k == DM_TERM_NONE || col_w[k] == 0.0) continue;
            ocol[at] = k;
            ow[at] = dm_tf_weight(c->count[e], row_len[r], sublinear) * col_w[k];
            opos[at] = (uint32_t)at;
            pair[at] = (uint64_t)k << 32 | at;
            at++;
        }
        qsort(pair + out_off[r], (size_t)(at - out_off[r]), sizeof *pair, cmp_u64);
    }
}
