/* libFuzzer target: the normaliser (fast path and utf8proc path must agree on ASCII input) and
 * both tokeniser algorithms (dm_tokenize_cpu and the CUDA algorithm on the host, dm_tokenize_hd)
 * on arbitrary bytes, split into documents at 0xFF bytes; any difference aborts. The CUDA
 * algorithm's list of possible first occurrences must hold every token that is the first of its
 * (hash, stem), in ascending order (then every other token repeats a listed one). The first byte
 * selects token options. Reference: dm_tokenize_cpu. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "preprocess/preprocess.h"

static dm_stopset g_stop;
static int g_init;

static const dm_tok_result *g_r; /* qsort context */
static int cmp_term(const void *x, const void *y)
{
    size_t i = *(const size_t *)x, j = *(const size_t *)y;
    const dm_tok_result *r = g_r;
    if (r->hash[i] != r->hash[j]) return r->hash[i] < r->hash[j] ? -1 : 1;
    if (r->stem_len[i] != r->stem_len[j]) return r->stem_len[i] < r->stem_len[j] ? -1 : 1;
    int c = memcmp(r->stems + r->start[i], r->stems + r->start[j], r->stem_len[i]);
    if (c) return c;
    return i < j ? -1 : i > j;
}

/* The contract of dm_tok_result.first on r (aborts when broken). */
static void check_first(const dm_tok_result *r)
{
    size_t n = r->n_tokens;
    if (!r->first && n) abort();
    unsigned char *listed = calloc(n + 1, 1);
    size_t *idx = malloc((n + 1) * sizeof(size_t));
    if (!listed || !idx) abort();
    for (size_t q = 0; q < r->n_first; q++) {
        if (r->first[q] >= n || (q && r->first[q] <= r->first[q - 1])) abort();
        listed[r->first[q]] = 1;
    }
    for (size_t i = 0; i < n; i++) idx[i] = i;
    g_r = r;
    qsort(idx, n, sizeof(size_t), cmp_term);
    for (size_t k = 0; k < n; k++) { /* sorted by term, then index: each group's first is listed */
        size_t i = idx[k], j = k ? idx[k - 1] : 0;
        int same = k && r->hash[i] == r->hash[j] && r->stem_len[i] == r->stem_len[j] &&
                   memcmp(r->stems + r->start[i], r->stems + r->start[j], r->stem_len[i]) == 0;
        if (!same && !listed[i]) abort();
    }
    free(listed);
    free(idx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_init) {
        if (dm_stopset_load(&g_stop, NULL) != 0) abort();
        g_init = 1;
    }
    if (size < 1) return 0;
    dm_tok_options o = DM_TOK_OPTIONS_INIT;
    o.keep_numbers = data[0] & 1;
    o.stem = !(data[0] & 2);
    o.min_len = 1 + (data[0] >> 2 & 3);
    o.max_len = data[0] & 16 ? 64 : 255;
    const char *t = (const char *)data + 1;
    size_t n = size - 1;
    char *norm = NULL;
    size_t len = 0, cap = 0, nd = 0;
    uint64_t *off = malloc((n + 2) * sizeof(uint64_t));
    off[0] = 0;
    for (size_t p = 0; p <= n;) {
        size_t e = p;
        while (e < n && (unsigned char)t[e] != 0xFF) e++;
        if (dm_normalize(&norm, &len, &cap, t + p, e - p, 0, NULL) != 0) abort();
        off[++nd] = len;
        p = e + 1;
    }
    { /* the fast path (ASCII runs) must equal utf8proc on everything, ASCII or not */
        char *u = NULL;
        size_t ul = 0, uc = 0;
        for (size_t p = 0; p <= n;) {
            size_t e = p;
            while (e < n && (unsigned char)t[e] != 0xFF) e++;
            dm_normalize(&u, &ul, &uc, t + p, e - p, 1, NULL);
            p = e + 1;
        }
        if (ul != len || (len && memcmp(u, norm, len) != 0)) abort();
        dm_free(u);
    }
    dm_tok_batch b = {norm ? norm : "", len, off, nd};
    dm_tok_result a, h;
    if (dm_tokenize_cpu(&a, &b, &g_stop, &o) != 0) abort();
    if (dm_tokenize_hd(&h, &b, &g_stop, &o) != 0) abort();
    if (a.n_tokens != h.n_tokens || a.n_short != h.n_short || a.n_long != h.n_long ||
        a.n_number != h.n_number || a.n_stop != h.n_stop)
        abort();
    if (memcmp(a.doc_tok, h.doc_tok, (nd + 1) * 8) != 0) abort();
    for (size_t i = 0; i < a.n_tokens; i++)
        if (a.hash[i] != h.hash[i] || a.start[i] != h.start[i] || a.stem_len[i] != h.stem_len[i] ||
            memcmp(a.stems + a.start[i], h.stems + h.start[i], a.stem_len[i]) != 0)
            abort();
    check_first(&h);
    dm_tok_result_free(&a);
    dm_tok_result_free(&h);
    dm_free(norm);
    free(off);
    return 0;
}
