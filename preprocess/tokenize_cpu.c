/* The CPU backend of tokenising, stop-word filtering, stemming and hashing of a batch of
 * normalised documents (dm_tokenize_cpu). Reference: this is the reference; stems come from
 * libstemmer's Snowball "porter", the token rules from token_rules.h (shared with the kernels). */
#include <libstemmer.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "preprocess/preprocess.h"
#include "preprocess/token_rules.h"

void dm_tok_result_free(dm_tok_result *r)
{
    if (!r) return;
    if (r->pinned) {
        dm_pp_cuda_result_release(r);
        memset(r, 0, sizeof(*r));
        return;
    }
    dm_free(r->hash);
    dm_free(r->start);
    dm_free(r->stem_len);
    dm_free(r->doc_tok);
    dm_free(r->stems);
    dm_free(r->first);
    memset(r, 0, sizeof(*r));
}

/* Grows the token arrays to hold at least need tokens. */
int dm_tok_result_reserve(dm_tok_result *r, size_t need);
int dm_tok_result_reserve(dm_tok_result *r, size_t need)
{
    if (need <= r->cap) return DM_OK;
    size_t nc = r->cap ? r->cap : 1024;
    while (nc < need) nc *= 2;
    uint64_t *h = dm_realloc(r->hash, nc * sizeof(*h));
    if (h) r->hash = h;
    uint64_t *s = dm_realloc(r->start, nc * sizeof(*s));
    if (s) r->start = s;
    uint8_t *l = dm_realloc(r->stem_len, nc);
    if (l) r->stem_len = l;
    if (!h || !s || !l) return DM_ERR(DM_ERR_NOMEM, "tokenise: cannot hold %zu tokens", nc);
    r->cap = nc;
    return DM_OK;
}

int dm_tokenize_cpu(dm_tok_result *out, const dm_tok_batch *in, const dm_stopset *stop,
                    const dm_tok_options *opt)
{
    if (!out || !in || !opt || (!in->text && in->text_len) || !in->doc_off)
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_tokenize_cpu: NULL argument");
    if (opt->min_len < 1 || opt->max_len < opt->min_len || opt->max_len > DM_TOKEN_MAX_LEN)
        return DM_ERR(DM_ERR_INVALID_ARG, "tokenise: token length bounds %d..%d outside 1..%d",
                      opt->min_len, opt->max_len, DM_TOKEN_MAX_LEN);
    memset(out, 0, sizeof(*out));
    out->n_docs = in->n_docs;
    out->doc_tok = dm_malloc((in->n_docs + 1) * sizeof(uint64_t));
    out->stems = dm_malloc(in->text_len ? in->text_len : 1);
    if (!out->doc_tok || !out->stems) {
        dm_tok_result_free(out);
        return DM_ERR(DM_ERR_NOMEM, "tokenise: out of memory");
    }
    if (in->text_len) memcpy(out->stems, in->text, in->text_len);
    /* token arrays sized up front for about one kept token per 8 normalised bytes (Reuters
     * keeps one per ~10): grown one token at a time from a small start they were realloc'ed
     * ~12 times per batch, each time copied into fresh pages */
    if (dm_tok_result_reserve(out, in->text_len / 8 + 1024) < 0) {
        dm_tok_result_free(out);
        return DM_ERR(DM_ERR_NOMEM, "tokenise: out of memory");
    }
    struct sb_stemmer *sb = NULL;
    if (opt->stem) {
        sb = sb_stemmer_new("porter", NULL);
        if (!sb) {
            dm_tok_result_free(out);
            return DM_ERR(DM_ERR_NOMEM, "libstemmer: cannot create the porter stemmer");
        }
    }
    static const uint64_t no_keys[1] = {0};
    const uint64_t *keys = stop && stop->cap ? stop->keys : no_keys;
    uint32_t cap = stop ? stop->cap : 0;
    int rc = DM_OK;
    for (size_t d = 0; d < in->n_docs; d++) {
        out->doc_tok[d] = out->n_tokens;
        size_t e = in->doc_off[d + 1];
        for (size_t p = in->doc_off[d]; p < e;) {
            while (p < e && dm_pp_is_sep((unsigned char)in->text[p])) p++;
            size_t b = p;
            while (p < e && !dm_pp_is_sep((unsigned char)in->text[p])) p++;
            if (p == b) break;
            const char *w = in->text + b;
            size_t n = p - b;
            int v = dm_pp_token_verdict(w, n, opt->min_len, opt->max_len, opt->keep_numbers, keys,
                                        stop ? stop->word_off : NULL, stop ? stop->word_len : NULL,
                                        stop ? stop->bytes : NULL, cap);
            if (v == DM_PP_DROP_SHORT) { out->n_short++; continue; }
            if (v == DM_PP_DROP_LONG) { out->n_long++; continue; }
            if (v == DM_PP_DROP_NUMBER) { out->n_number++; continue; }
            if (v == DM_PP_DROP_STOP) { out->n_stop++; continue; }
            const char *stem = w;
            size_t sl = n;
            if (sb && dm_pp_is_ascii(w, n)) {
                const sb_symbol *s = sb_stemmer_stem(sb, (const sb_symbol *)w, (int)n);
                if (!s) {
                    rc = DM_ERR(DM_ERR_NOMEM, "libstemmer: out of memory");
                    goto done;
                }
                int l = sb_stemmer_length(sb);
                if (l >= 0 && (size_t)l <= n) {
                    stem = (const char *)s;
                    sl = (size_t)l;
                }
            }
            rc = dm_tok_result_reserve(out, out->n_tokens + 1);
            if (rc < 0) goto done;
            memcpy(out->stems + b, stem, sl);
            out->hash[out->n_tokens] = dm_term_hash(stem, sl);
            out->start[out->n_tokens] = b;
            out->stem_len[out->n_tokens] = (uint8_t)sl;
            out->n_tokens++;
        }
    }
    out->doc_tok[in->n_docs] = out->n_tokens;
done:
    if (sb) sb_stemmer_delete(sb);
    if (rc < 0) dm_tok_result_free(out);
    return rc;
}
