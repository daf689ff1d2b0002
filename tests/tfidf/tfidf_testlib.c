/* Helpers of the tfidf tests (tfidf_testlib.h). Reference: none (test support). */
#include "tfidf_testlib.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "preprocess/token_rules.h"
#include "common/rng.h"

uint64_t tl_real_hash(const char *s, size_t n) { return dm_term_hash(s, n); }
uint64_t tl_weak_hash(const char *s, size_t n)
{
    (void)s;
    return 0x1000 + n % 3;
}

int tl_local_build(dm_tfidf_local *out, const char *const *docs, size_t n_docs, tl_hash_fn *hash,
                   size_t table_cap, const char *prefix, size_t first_id, const char *const *labels)
{
    memset(out, 0, sizeof *out);
    dm_termtab tab;
    DM_TRY(dm_termtab_init(&tab, table_cap));
    size_t cap = 1024, n_tok = 0;
    uint32_t *tok = dm_malloc(sizeof(uint32_t) * cap);
    uint64_t *tok_off = dm_malloc(sizeof(uint64_t) * (n_docs + 1));
    out->id_off = dm_malloc(sizeof(uint64_t) * (n_docs + 1));
    out->label_off = dm_malloc(sizeof(uint64_t) * (n_docs + 1));
    size_t ids_cap = 32 * (n_docs + 1), lab_cap = 16;
    for (size_t d = 0; d < n_docs; d++) lab_cap += labels && labels[d] ? strlen(labels[d]) + 1 : 1;
    out->ids = dm_malloc(ids_cap);
    out->labels = dm_malloc(lab_cap);
    int rc = tok && tok_off && out->id_off && out->label_off && out->ids && out->labels ? DM_OK : DM_ERR_NOMEM;
    if (rc == DM_OK) tok_off[0] = out->id_off[0] = out->label_off[0] = 0;
    for (size_t d = 0; rc == DM_OK && d < n_docs; d++) {
        const char *p = docs[d];
        while (rc == DM_OK && *p) {
            while (*p == ' ') p++;
            const char *e = p;
            while (*e && *e != ' ') e++;
            if (e > p) {
                if (n_tok == cap) {
                    cap *= 2;
                    uint32_t *q = dm_realloc(tok, sizeof(uint32_t) * cap);
                    if (!q) {
                        rc = DM_ERR_NOMEM;
                        break;
                    }
                    tok = q;
                }
                rc = dm_termtab_insert(&tab, &tok[n_tok++], NULL, hash(p, (size_t)(e - p)), p, (size_t)(e - p));
            }
            p = e;
        }
        tok_off[d + 1] = n_tok;
        int k = snprintf(out->ids + out->id_off[d], 32, "%s%zu", prefix, d + first_id);
        out->id_off[d + 1] = out->id_off[d] + (uint64_t)k + 1;
        const char *lab = labels && labels[d] ? labels[d] : "";
        memcpy(out->labels + out->label_off[d], lab, strlen(lab) + 1);
        out->label_off[d + 1] = out->label_off[d] + strlen(lab) + 1;
    }
    dm_tf_count_options co = DM_TF_COUNT_OPTIONS_INIT;
    if (rc == DM_OK) rc = dm_tf_count_cpu(&out->counts, tok_off, tok, n_docs, (uint32_t)tab.terms.n, &co);
    if (rc == DM_OK) {
        out->terms = tab.terms;
        memset(&tab.terms, 0, sizeof tab.terms);
        if (!out->terms.off) rc = dm_termlist_alloc(&out->terms, 0, 0, 1);
        out->tokens = n_tok;
        out->hash_collisions = tab.collisions;
        out->table_rebuilds = tab.rebuilds;
    }
    dm_termtab_free(&tab);
    dm_free(tok);
    dm_free(tok_off);
    if (rc < 0) dm_tfidf_local_free(out);
    return rc;
}

static uint64_t tl_rand(uint64_t *s)
{
    return dm_splitmix64(s);
}

char **tl_random_docs(size_t n_docs, size_t vocab_size, size_t max_len, uint64_t seed)
{
    uint64_t s = seed;
    char (*words)[16] = malloc(16 * vocab_size);
    char **docs = calloc(n_docs, sizeof(char *));
    if (!words || !docs) {
        free(words);
        free(docs);
        return NULL;
    }
    for (size_t w = 0; w < vocab_size; w++) {
        int len = 2 + (int)(tl_rand(&s) % 11);
        for (int i = 0; i < len; i++) words[w][i] = (char)('a' + tl_rand(&s) % 26);
        words[w][len] = '\0';
    }
    for (size_t d = 0; d < n_docs; d++) {
        size_t len = tl_rand(&s) % 16 == 0 ? 0 : (size_t)(tl_rand(&s) % (max_len + 1));
        docs[d] = malloc(len * 14 + 1);
        if (!docs[d]) {
            tl_docs_free(docs, n_docs);
            free(words);
            return NULL;
        }
        char *p = docs[d];
        for (size_t i = 0; i < len; i++) {
            /* skewed: the product of two uniforms favours small indices */
            uint64_t a = tl_rand(&s) % vocab_size, b = tl_rand(&s) % vocab_size;
            size_t w = (size_t)(a * b / vocab_size);
            size_t wl = strlen(words[w]);
            if (i) *p++ = ' ';
            memcpy(p, words[w], wl);
            p += wl;
        }
        *p = '\0';
    }
    free(words);
    return docs;
}

void tl_docs_free(char **docs, size_t n_docs)
{
    if (!docs) return;
    for (size_t d = 0; d < n_docs; d++) free(docs[d]);
    free(docs);
}

char *tl_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = dm_malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        dm_free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[n] = '\0';
        if (len) *len = (size_t)n;
    }
    return b;
}

int tl_files_equal(const char *a, const char *b)
{
    size_t la, lb;
    char *x = tl_read_file(a, &la), *y = tl_read_file(b, &lb);
    int eq = x && y && la == lb && memcmp(x, y, la) == 0;
    dm_free(x);
    dm_free(y);
    return eq;
}

int tl_write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(data, 1, len, f) == len;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

int tl_flip_byte(const char *path, long offset)
{
    FILE *f = fopen(path, "r+b");
    if (!f) return -1;
    int ok = fseek(f, offset, SEEK_SET) == 0;
    int c = ok ? fgetc(f) : EOF;
    ok = ok && c != EOF && fseek(f, offset, SEEK_SET) == 0 && fputc(c ^ 0x5a, f) != EOF;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

int tl_vectors_ok(const dm_vectors *v, int l2, double tol)
{
    if (v->row_off[0] != 0) return 0;
    for (uint64_t r = 0; r < v->n_rows; r++) {
        if (v->row_off[r + 1] < v->row_off[r]) return 0;
        double ss = 0;
        for (uint64_t k = v->row_off[r]; k < v->row_off[r + 1]; k++) {
            if (v->col[k] >= v->n_cols) return 0;
            if (k > v->row_off[r] && v->col[k] <= v->col[k - 1]) return 0;
            if (!(v->val[k] != 0.0f) || !isfinite(v->val[k])) return 0;
            ss += (double)v->val[k] * v->val[k];
        }
        if (l2 && v->row_off[r + 1] > v->row_off[r] && fabs(sqrt(ss) - 1.0) > tol) return 0;
    }
    return 1;
}

int tl_vectors_equal(const dm_vectors *a, const dm_vectors *b, double rel_tol)
{
    if (a->n_rows != b->n_rows || a->n_cols != b->n_cols || a->flags != b->flags) return 0;
    for (uint64_t r = 0; r <= a->n_rows; r++)
        if (a->row_off[r] != b->row_off[r] || a->id_off[r] != b->id_off[r] || a->label_off[r] != b->label_off[r])
            return 0;
    if (memcmp(a->ids, b->ids, a->id_off[a->n_rows]) != 0) return 0;
    if (memcmp(a->labels, b->labels, a->label_off[a->n_rows]) != 0) return 0;
    for (uint64_t k = 0; k < a->row_off[a->n_rows]; k++) {
        if (a->col[k] != b->col[k]) return 0;
        double x = a->val[k], y = b->val[k];
        if (rel_tol == 0 ? memcmp(&a->val[k], &b->val[k], 4) != 0 : fabs(x - y) > rel_tol * fmax(fabs(x), fabs(y)))
            return 0;
    }
    return 1;
}
