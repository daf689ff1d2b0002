/* Term lists, the host term table (open addressing on the 64-bit hash with an identity field,
 * grown and rebuilt when half full), term order and ownership, the vocabulary TSV, and option
 * names. Reference: this file is the CPU reference of the vocabulary table (tfidf/tfidf.h);
 * the CUDA table in tfidf_kernels.cuh follows the same contract. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/status.h"
#include "tfidf/tfidf.h"
#include "tfidf/tfidf_internal.h"
#include "common/rng.h"

void dm_termlist_free(dm_termlist *l)
{
    if (!l) return;
    dm_free(l->hash);
    dm_free(l->off);
    dm_free(l->bytes);
    dm_free(l->val);
    memset(l, 0, sizeof *l);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap && *p) return DM_OK;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *q = dm_realloc(*p, nc * elem);
    if (!q) return DM_ERR_NOMEM;
    *p = q;
    *cap = nc;
    return DM_OK;
}

int dm_termlist_push(dm_termlist *l, size_t *cap, size_t *bytes_cap, uint64_t hash, const char *w,
                     size_t len, uint64_t val)
{
    size_t c = *cap;
    if (l->n + 2 > c || !l->hash || !l->off || !l->val) {
        size_t c1 = c, c2 = c, c3 = c;
        DM_TRY(grow((void **)&l->hash, &c1, l->n + 2, sizeof(uint64_t)));
        DM_TRY(grow((void **)&l->off, &c2, l->n + 2, sizeof(uint64_t)));
        DM_TRY(grow((void **)&l->val, &c3, l->n + 2, sizeof(uint64_t)));
        *cap = c1 < c2 ? (c1 < c3 ? c1 : c3) : (c2 < c3 ? c2 : c3);
        if (l->n == 0) l->off[0] = 0;
    }
    DM_TRY(grow((void **)&l->bytes, bytes_cap, l->off[l->n] + len + 1, 1));
    l->hash[l->n] = hash;
    l->val[l->n] = val;
    if (len) memcpy(l->bytes + l->off[l->n], w, len);
    l->off[l->n + 1] = l->off[l->n] + len;
    l->n++;
    return DM_OK;
}

int dm_termlist_alloc(dm_termlist *l, size_t n, uint64_t bytes, int with_val)
{
    memset(l, 0, sizeof *l);
    l->hash = dm_malloc(sizeof(uint64_t) * (n ? n : 1));
    l->off = dm_malloc(sizeof(uint64_t) * (n + 1));
    l->bytes = dm_malloc(bytes ? bytes : 1);
    l->val = with_val ? dm_calloc(n ? n : 1, sizeof(uint64_t)) : NULL;
    if (!l->hash || !l->off || !l->bytes || (with_val && !l->val)) {
        dm_termlist_free(l);
        return DM_ERR_NOMEM;
    }
    l->n = n;
    l->off[0] = 0;
    return DM_OK;
}

int dm_term_cmp(const char *a, size_t la, uint64_t ha, const char *b, size_t lb, uint64_t hb)
{
    size_t m = la < lb ? la : lb;
    int c = m ? memcmp(a, b, m) : 0;
    if (c) return c < 0 ? -1 : 1;
    if (la != lb) return la < lb ? -1 : 1;
    if (ha != hb) return ha < hb ? -1 : 1;
    return 0;
}

int dm_tfidf_ambiguous_hash(const dm_termlist *vocab, uint64_t h)
{
    size_t a = SIZE_MAX, b = SIZE_MAX;
    for (size_t i = 0; i < vocab->n && b == SIZE_MAX; i++)
        if (vocab->hash[i] == h) {
            if (a == SIZE_MAX) a = i;
            else b = i;
        }
    if (b == SIZE_MAX) return DM_ERR(DM_ERR_FORMAT, "hash %016" PRIx64 " is ambiguous in its vocabulary", h);
    return DM_ERR(DM_ERR_FORMAT,
                  "hash %016" PRIx64 " stands for both '%.*s' and '%.*s': their tokens cannot be "
                  "told apart by hash (vectorise from the corpus, which resolves collisions by bytes)",
                  h, (int)dm_termlist_len(vocab, a), dm_termlist_bytes(vocab, a), (int)dm_termlist_len(vocab, b),
                  dm_termlist_bytes(vocab, b));
}

int dm_tfidf_missing_hash(uint64_t token, uint64_t h)
{
    return DM_ERR(DM_ERR_FORMAT, "token stream: token %" PRIu64 " has hash %016" PRIx64 ", which is not in its vocabulary",
                  token, h);
}

int dm_term_owner(uint64_t hash, int ranks)
{
    if (ranks <= 1) return 0;
    return (int)(dm_mix64(hash ^ 0x5bd1e9955bd1e995ull) % (uint64_t)ranks);
}

/* ------------------------------------------------------------------ term table */

int dm_termtab_init(dm_termtab *t, size_t initial_cap)
{
    memset(t, 0, sizeof *t);
    size_t cap = 2;
    if (initial_cap == 0) initial_cap = 1024;
    while (cap < initial_cap) cap *= 2;
    t->cap = cap;
    t->key = dm_malloc(sizeof(uint64_t) * cap);
    t->ident = dm_calloc(cap, sizeof(uint32_t));
    if (!t->key || !t->ident) {
        dm_termtab_free(t);
        return DM_ERR_NOMEM;
    }
    return DM_OK;
}

void dm_termtab_free(dm_termtab *t)
{
    if (!t) return;
    dm_free(t->key);
    dm_free(t->ident);
    dm_termlist_free(&t->terms);
    memset(t, 0, sizeof *t);
}

static int termtab_rebuild(dm_termtab *t, size_t ncap)
{
    uint64_t *nk = dm_malloc(sizeof(uint64_t) * ncap);
    uint32_t *ni = dm_calloc(ncap, sizeof(uint32_t));
    if (!nk || !ni) {
        dm_free(nk);
        dm_free(ni);
        return DM_ERR_NOMEM;
    }
    size_t mask = ncap - 1;
    for (size_t i = 0; i < t->terms.n; i++) {
        uint64_t h = t->terms.hash[i];
        size_t s = (size_t)dm_slot_hash(h) & mask;
        while (ni[s]) s = (s + 1) & mask;
        nk[s] = h;
        ni[s] = (uint32_t)(i + 1);
    }
    dm_free(t->key);
    dm_free(t->ident);
    t->key = nk;
    t->ident = ni;
    t->cap = ncap;
    t->rebuilds++;
    return DM_OK;
}

uint32_t dm_termtab_find(const dm_termtab *t, uint64_t hash, const char *w, size_t len)
{
    size_t mask = t->cap - 1;
    for (size_t s = (size_t)dm_slot_hash(hash) & mask;; s = (s + 1) & mask) {
        uint32_t id = t->ident[s];
        if (!id) return DM_TERM_NONE;
        if (t->key[s] != hash) continue;
        size_t i = id - 1;
        if (dm_termlist_len(&t->terms, i) == len && memcmp(dm_termlist_bytes(&t->terms, i), w, len) == 0)
            return (uint32_t)i;
    }
}

int dm_termtab_insert(dm_termtab *t, uint32_t *idx, int *added, uint64_t hash, const char *w, size_t len)
{
    size_t mask = t->cap - 1;
    int same_hash = 0;
    size_t s = (size_t)dm_slot_hash(hash) & mask;
    for (;; s = (s + 1) & mask) {
        uint32_t id = t->ident[s];
        if (!id) break;
        if (t->key[s] != hash) continue;
        size_t i = id - 1;
        if (dm_termlist_len(&t->terms, i) == len && memcmp(dm_termlist_bytes(&t->terms, i), w, len) == 0) {
            *idx = (uint32_t)i;
            if (added) *added = 0;
            return DM_OK;
        }
        same_hash = 1;
    }
    if (t->terms.n >= (size_t)UINT32_MAX - 1)
        return DM_ERR(DM_ERR_INVALID_ARG, "term table: more than 2^32 - 2 distinct terms");
    size_t i = t->terms.n;
    DM_TRY(dm_termlist_push(&t->terms, &t->terms_cap, &t->bytes_cap, hash, w, len, 0));
    if (same_hash) t->collisions++;
    if (2 * (i + 1) > t->cap) {
        DM_TRY(termtab_rebuild(t, 2 * t->cap));
    } else {
        t->key[s] = hash;
        t->ident[s] = (uint32_t)(i + 1);
    }
    *idx = (uint32_t)i;
    if (added) *added = 1;
    return DM_OK;
}

/* ------------------------------------------------------------------ vocabulary */

void dm_vocab_free(dm_vocab *v)
{
    if (!v) return;
    dm_termlist_free(&v->terms);
    memset(v, 0, sizeof *v);
}

int dm_vocab_write_tsv(const dm_vocab *v, const char *path, const char *val_name)
{
    dm_atomic_file f;
    DM_TRY(dm_atomic_open(&f, path));
    fprintf(f.fp, "id\tterm\t%s\n", val_name ? val_name : "df");
    for (size_t i = 0; i < v->terms.n; i++) {
        fprintf(f.fp, "%zu\t", i);
        const char *b = dm_termlist_bytes(&v->terms, i);
        for (size_t k = 0, n = dm_termlist_len(&v->terms, i); k < n; k++) {
            char c = b[k];
            if (c == '\t') fputs("\\t", f.fp);
            else if (c == '\n') fputs("\\n", f.fp);
            else if (c == '\\') fputs("\\\\", f.fp);
            else fputc(c, f.fp);
        }
        fprintf(f.fp, "\t%" PRIu64 "\n", v->terms.val ? v->terms.val[i] : 0);
    }
    return dm_atomic_commit(&f);
}

/* ------------------------------------------------------------------ names */

int dm_tf_variant_parse(const char *s, int *variant)
{
    if (strcmp(s, "atomic") == 0) *variant = DM_TF_ATOMIC;
    else if (strcmp(s, "noatomic") == 0) *variant = DM_TF_NOATOMIC;
    else return DM_ERR(DM_ERR_INVALID_ARG, "unknown TF table variant '%s' (expected atomic or noatomic)", s);
    return DM_OK;
}

const char *dm_tf_variant_name(int variant)
{
    return variant == DM_TF_NOATOMIC ? "noatomic" : variant == DM_TF_ATOMIC ? "atomic" : "?";
}

int dm_idf_parse(const char *s, int *kind)
{
    if (strcmp(s, "log") == 0) *kind = DM_IDF_LOG;
    else if (strcmp(s, "sklearn") == 0) *kind = DM_IDF_SKLEARN;
    else return DM_ERR(DM_ERR_INVALID_ARG, "unknown idf '%s' (expected log or sklearn)", s);
    return DM_OK;
}

/* ------------------------------------------------------------------ benchmark inputs */

int dm_tf_bench_docs(uint64_t *tok_off, uint32_t *tok, size_t n_tok, uint32_t n_terms, uint64_t seed, size_t *n_docs)
{
    /* documents of 1..400 tokens, one in 128 of 400..4999; term ids skewed (product of two
     * uniforms), so frequent terms repeat within documents as in text. One stream: a document's
     * length, then its tokens, then the next document's length. The lengths first (document d's
     * length is draw d + tok_off[d]), then the tokens of every document at once. */
    uint64_t pos = 0;
    size_t d = 0;
    tok_off[0] = 0;
    while (pos < n_tok) {
        uint64_t r = dm_splitmix64_at(seed, d + pos);
        uint64_t len = (r & 127) == 0 ? 400 + (r >> 8) % 4600 : 1 + (r >> 8) % 400;
        if (len > n_tok - pos) len = n_tok - pos;
        pos += len;
        tok_off[++d] = pos;
    }
    const long nd = (long)d;
#pragma omp parallel for schedule(dynamic, 64)
    for (long j = 0; j < nd; j++) {
        const uint64_t first = (uint64_t)j + tok_off[j] + 1; /* the draw of its first token */
        for (uint64_t p = tok_off[j]; p < tok_off[j + 1]; p++) {
            uint64_t x = dm_splitmix64_at(seed, first + (p - tok_off[j]));
            uint64_t a = (x & 0xffffffffull) % n_terms, b = (x >> 32) % n_terms;
            tok[p] = (uint32_t)(a * b / n_terms);
        }
    }
    *n_docs = d;
    return DM_OK;
}
