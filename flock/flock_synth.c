/* Synthetic labelled document vectors for flock's tests, benchmark and `docmine flock --synth`:
 * document i draws a topic and `tokens` words from Zipf distributions over its topic's
 * vocabulary (probability 1 - overlap) or a shared background vocabulary (overlap), the same
 * generative model as datasets/synth.c but straight to term ids, so a million documents need no
 * text, tokeniser or TF-IDF pass. Weights: (1 + ln tf) (1 + ln(1 + Zipf rank)), a stand-in for
 * TF-IDF that damps the most frequent words. Document i depends only on (seed, i).
 * Reference: none (a generator); vectors are term-sorted, unnormalised (flock normalises). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/rng.h"
#include "common/status.h"
#include "flock/flock_synth.h"

static double *zipf_cdf(int n, double s)
{
    double *c = dm_malloc(sizeof *c * (size_t)n);
    if (!c) return NULL;
    double acc = 0;
    for (int r = 0; r < n; r++) c[r] = acc += 1.0 / pow((double)(r + 1), s);
    for (int r = 0; r < n; r++) c[r] /= acc;
    return c;
}

/* The Zipf rank of u = (v + 0.5) / 2^32 for a 32-bit v: the first rank whose cdf reaches u (the
 * last rank if none), searched only among the ranks v's 16-bit bucket can draw: lo[b] is the
 * first rank whose cdf reaches b / 2^16 (n - 1 if none), so every u of bucket b draws a rank in
 * [lo[b], lo[b + 1]] and the search there gives the rank a search of all ranks gives (a
 * binary search of the whole CDF, before: 13 unpredictable steps a word). lo has 2^16 + 1
 * entries. */
enum { ZIPF_BUCKETS = 1 << 16 };

static uint32_t *zipf_buckets(const double *cdf, int n)
{
    uint32_t *lo = dm_malloc(sizeof *lo * (ZIPF_BUCKETS + 1));
    if (!lo) return NULL;
    int r = 0;
    for (int b = 0; b <= ZIPF_BUCKETS; b++) {
        double t = (double)b / ZIPF_BUCKETS;
        while (r < n - 1 && cdf[r] < t) r++;
        lo[b] = (uint32_t)r;
    }
    return lo;
}

static int zipf_draw32(const double *cdf, const uint32_t *lo, uint32_t v)
{
    const double u = (v + 0.5) * (1.0 / 4294967296.0);
    int a = (int)lo[v >> 16], b = (int)lo[(v >> 16) + 1];
    while (a < b) {
        int mid = (a + b) / 2;
        if (cdf[mid] < u) a = mid + 1;
        else b = mid;
    }
    return a;
}

/* Sorts a[0 .. n) ascending by `passes` byte-wide LSD radix passes (the values are below
 * 2^(8 passes)) through tmp (n entries): a document's words, a few hundred of them. */
static void sort_words(uint32_t *a, uint32_t *tmp, size_t n, int passes)
{
    uint32_t *src = a, *dst = tmp;
    for (int p = 0; p < passes; p++) {
        const unsigned shift = 8u * (unsigned)p;
        size_t cnt[257] = {0};
        for (size_t i = 0; i < n; i++) cnt[((src[i] >> shift) & 255u) + 1]++;
        for (int k = 0; k < 256; k++) cnt[k + 1] += cnt[k];
        for (size_t i = 0; i < n; i++) dst[cnt[(src[i] >> shift) & 255u]++] = src[i];
        uint32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) memcpy(a, src, sizeof *a * n);
}

/* The generator's working arrays: the CDFs, their bucket tables, the rows' lengths. */
static void free_work(double *tc, double *sc, uint32_t *tb, uint32_t *sb, uint32_t *len)
{
    dm_free(tc);
    dm_free(sc);
    dm_free(tb);
    dm_free(sb);
    dm_free(len);
}

int dm_flock_synth_topic(const dm_flock_synth_options *o, uint64_t i)
{
    return (int)(dm_rng_uniform(o->seed, i, 0) * o->topics) % o->topics;
}

int dm_flock_synth_vectors(dm_vectors *out, const dm_flock_synth_options *o, uint64_t first, uint64_t count)
{
    memset(out, 0, sizeof *out);
    if (o->topics < 1 || o->tokens < 1 || o->topic_vocab < 1 || o->shared_vocab < 1 || !(o->overlap >= 0 && o->overlap <= 1))
        return DM_ERR(DM_ERR_INVALID_ARG, "synthetic vectors: bad options");
    double *tc = zipf_cdf(o->topic_vocab, o->zipf), *sc = zipf_cdf(o->shared_vocab, o->zipf);
    uint32_t *tb = tc ? zipf_buckets(tc, o->topic_vocab) : NULL, *sb = sc ? zipf_buckets(sc, o->shared_vocab) : NULL;
    size_t n = (size_t)count, per = (size_t)o->tokens;
    out->n_rows = count;
    out->row_base = first;
    out->n_cols = (uint64_t)o->topics * (uint64_t)o->topic_vocab + (uint64_t)o->shared_vocab;
    out->row_off = dm_malloc(sizeof *out->row_off * (n + 1));
    out->col = dm_malloc(sizeof *out->col * (n * per > 0 ? n * per : 1));
    out->val = dm_malloc(sizeof *out->val * (n * per > 0 ? n * per : 1));
    uint32_t *len = dm_malloc(sizeof *len * (n ? n : 1));
    out->id_off = dm_malloc(sizeof *out->id_off * (n + 1));
    out->ids = dm_malloc(32 * (n ? n : 1));
    out->label_off = dm_malloc(sizeof *out->label_off * (n + 1));
    out->labels = dm_malloc(16 * (n ? n : 1));
    if (!tc || !sc || !tb || !sb || !out->row_off || !out->col || !out->val || !len || !out->id_off || !out->ids ||
        !out->label_off || !out->labels) {
        free_work(tc, sc, tb, sb, len);
        dm_flock_vectors_release(out);
        return DM_ERR(DM_ERR_NOMEM, "synthetic vectors: out of memory for %llu documents", (unsigned long long)count);
    }
    const long nl = (long)n;
    int passes = 1; /* of sort_words: the term ids are below n_cols */
    while (passes < 4 && ((out->n_cols - 1) >> (8 * passes)) != 0) passes++;
    int no_room = 0;
    /* each document fills its own fixed-size slot, then rows are packed */
#pragma omp parallel
    {
        uint32_t *tmp = dm_malloc(sizeof *tmp * (per ? per : 1));
        if (!tmp) {
#pragma omp atomic write
            no_room = 1;
        }
#pragma omp for schedule(dynamic, 64)
        for (long d = 0; d < nl; d++) {
            if (!tmp) continue;
            uint64_t gid = first + (uint64_t)d;
            int topic = dm_flock_synth_topic(o, gid);
            uint32_t *c = out->col + (size_t)d * per;
            float *v = out->val + (size_t)d * per;
            uint32_t rank_of_base = (uint32_t)o->topics * (uint32_t)o->topic_vocab;
            for (size_t t = 0; t < per; t++) {
                dm_philox4 r = dm_rng4(o->seed ^ 0x5eed5eedULL, gid, (uint64_t)t);
                double u0 = r.v[0] * (1.0 / 4294967296.0); /* the rank's uniform: (r.v[1] + 0.5) / 2^32 */
                if (u0 < o->overlap) c[t] = rank_of_base + (uint32_t)zipf_draw32(sc, sb, r.v[1]);
                else c[t] = (uint32_t)topic * (uint32_t)o->topic_vocab + (uint32_t)zipf_draw32(tc, tb, r.v[1]);
            }
            sort_words(c, tmp, per, passes);
            size_t m = 0;
            for (size_t t = 0; t < per;) {
                size_t e = t;
                while (e < per && c[e] == c[t]) e++;
                uint32_t term = c[t];
                uint32_t rank = term >= rank_of_base ? term - rank_of_base : term % (uint32_t)o->topic_vocab;
                c[m] = term;
                v[m] = (float)((1.0 + log((double)(e - t))) * (1.0 + log(1.0 + rank)));
                m++;
                t = e;
            }
            len[d] = (uint32_t)m;
        }
        dm_free(tmp);
    }
    if (no_room) {
        free_work(tc, sc, tb, sb, len);
        dm_flock_vectors_release(out);
        return DM_ERR(DM_ERR_NOMEM, "synthetic vectors: out of memory for a document's words");
    }
    uint64_t at = 0;
    out->row_off[0] = 0;
    for (size_t d = 0; d < n; d++) {
        if (at != (uint64_t)d * per) {
            memmove(out->col + at, out->col + d * per, sizeof *out->col * len[d]);
            memmove(out->val + at, out->val + d * per, sizeof *out->val * len[d]);
        }
        at += len[d];
        out->row_off[d + 1] = at;
    }
    /* give back the slots' unused tail (the distinct terms are about 3/4 of the words): host
     * memory of the benchmark's largest runs */
    if (at < (uint64_t)n * per) {
        uint32_t *c2 = dm_realloc(out->col, sizeof *out->col * (at ? at : 1));
        if (c2) out->col = c2;
        float *v2 = dm_realloc(out->val, sizeof *out->val * (at ? at : 1));
        if (v2) out->val = v2;
    }
    uint64_t io = 0, lo = 0;
    for (size_t d = 0; d < n; d++) {
        out->id_off[d] = io;
        out->label_off[d] = lo;
        io += (uint64_t)snprintf(out->ids + io, 32, "synth-%llu", (unsigned long long)(first + d)) + 1;
        lo += (uint64_t)snprintf(out->labels + lo, 16, "topic%d", dm_flock_synth_topic(o, first + d)) + 1;
    }
    out->id_off[n] = io;
    out->label_off[n] = lo;
    free_work(tc, sc, tb, sb, len);
    return DM_OK;
}

void dm_flock_vectors_release(dm_vectors *v)
{
    dm_free(v->row_off);
    dm_free(v->col);
    dm_free(v->val);
    dm_free(v->id_off);
    dm_free(v->ids);
    dm_free(v->label_off);
    dm_free(v->labels);
    memset(v, 0, sizeof *v);
}

void dm_flock_share(uint64_t n, int rank, int size, uint64_t *first, uint64_t *count)
{
    uint64_t base = n / (uint64_t)size, extra = n % (uint64_t)size, r = (uint64_t)rank;
    *first = r * base + (r < extra ? r : extra);
    *count = base + (r < extra ? 1 : 0);
}
