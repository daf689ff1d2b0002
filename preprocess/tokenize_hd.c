/* dm_tokenize_hd: the GPU tokeniser's algorithm (tokenize_hd.h: mark, scan, place, process, scan,
 * compact, per-document bounds, first occurrences) run step by step on the host, so that the
 * kernels' logic is tested against dm_tokenize_cpu on machines without a GPU. The kernels do the same steps per tile
 * (starts counted per tile and scanned, kept tokens staged per tile and moved); the per-byte and
 * per-token rules are these. Reference: dm_tokenize_cpu. */
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "preprocess/preprocess.h"
#include "preprocess/tokenize_hd.h"

int dm_tok_first_hd(dm_tok_result *r)
{
    if (r->pinned) /* its arrays belong to the CUDA backend's pool, which gives its own list */
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_tok_first_hd: a page-locked CUDA result");
    dm_free(r->first);
    r->first = NULL;
    r->n_first = 0;
    size_t n = r->n_tokens;
    if (n >= 0xffffffffu) return DM_ERR(DM_ERR_INVALID_ARG, "tokenise: %zu tokens in one batch", n);
    uint64_t slots = dm_tok_first_slots(n);
    uint64_t *keys = dm_calloc(slots, sizeof(*keys));
    uint32_t *idx = dm_malloc(slots * sizeof(*idx));
    r->first = dm_malloc((n ? n : 1) * sizeof(*r->first));
    if (!keys || !idx || !r->first) {
        dm_free(keys);
        dm_free(idx);
        dm_free(r->first);
        r->first = NULL;
        return DM_ERR(DM_ERR_NOMEM, "tokenise: out of memory");
    }
    memset(idx, 0xff, slots * sizeof(*idx));
    for (size_t i = 0; i < n; i++) dm_tok_first_insert(keys, idx, slots - 1, r->hash[i], (uint32_t)i);
    for (size_t i = 0; i < n; i++)
        if (dm_tok_first_flag(keys, idx, slots - 1, r->hash, r->start, r->stem_len, r->stems, (uint32_t)i))
            r->first[r->n_first++] = i;
    dm_free(keys);
    dm_free(idx);
    return DM_OK;
}

int dm_tokenize_hd(dm_tok_result *out, const dm_tok_batch *in, const dm_stopset *stop,
                   const dm_tok_options *opt)
{
    if (!out || !in || !opt || (!in->text && in->text_len) || !in->doc_off)
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_tokenize_hd: NULL argument");
    if (opt->min_len < 1 || opt->max_len < opt->min_len || opt->max_len > DM_TOKEN_MAX_LEN)
        return DM_ERR(DM_ERR_INVALID_ARG, "tokenise: token length bounds %d..%d outside 1..%d",
                      opt->min_len, opt->max_len, DM_TOKEN_MAX_LEN);
    memset(out, 0, sizeof(*out));
    size_t n = in->text_len;
    uint32_t *flag = dm_malloc((n + 1) * sizeof(*flag));
    uint64_t *scan = dm_malloc((n + 1) * sizeof(*scan));
    int rc = DM_OK;
    if (!flag || !scan) {
        rc = DM_ERR(DM_ERR_NOMEM, "tokenise: out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++) flag[i] = dm_tok_mark_one(in->text, n, i);
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++) {
        scan[i] = t;
        t += flag[i] & 1u;
    }
    uint64_t *ts = dm_malloc((t + 1) * 8), *te = dm_malloc((t + 1) * 8), *h = dm_malloc((t + 1) * 8);
    uint8_t *sl = dm_malloc(t + 1);
    int *verdict = dm_malloc((t + 1) * sizeof(int));
    out->stems = dm_malloc(n ? n : 1);
    out->doc_tok = dm_malloc((in->n_docs + 1) * 8);
    out->n_docs = in->n_docs;
    if (!ts || !te || !h || !sl || !verdict || !out->stems || !out->doc_tok) {
        rc = DM_ERR(DM_ERR_NOMEM, "tokenise: out of memory");
        goto done2;
    }
    if (n) memcpy(out->stems, in->text, n);
    for (size_t i = 0; i < n; i++) dm_tok_place_one(ts, te, flag[i], scan[i], i);
    dm_stop_view sv = {stop ? stop->keys : NULL, stop ? stop->word_off : NULL,
                       stop ? stop->word_len : NULL, stop ? stop->bytes : NULL, stop ? stop->cap : 0};
    dm_tok_params p = {opt->min_len, opt->max_len, opt->keep_numbers, opt->stem};
    uint64_t kept = 0;
    for (uint64_t k = 0; k < t; k++) {
        verdict[k] = dm_tok_process_one(out->stems, in->text, ts[k], te[k], &sv, &p, &h[k], &sl[k]);
        kept += verdict[k] == DM_PP_KEEP;
    }
    out->hash = dm_malloc((kept + 1) * 8);
    out->start = dm_malloc((kept + 1) * 8);
    out->stem_len = dm_malloc(kept + 1);
    if (!out->hash || !out->start || !out->stem_len) {
        rc = DM_ERR(DM_ERR_NOMEM, "tokenise: out of memory");
        goto done2;
    }
    uint64_t o = 0;
    for (uint64_t k = 0; k < t; k++) {
        switch (verdict[k]) {
        case DM_PP_KEEP:
            out->hash[o] = h[k];
            out->start[o] = ts[k];
            out->stem_len[o] = sl[k];
            o++;
            break;
        case DM_PP_DROP_SHORT: out->n_short++; break;
        case DM_PP_DROP_LONG: out->n_long++; break;
        case DM_PP_DROP_NUMBER: out->n_number++; break;
        default: out->n_stop++; break;
        }
    }
    out->n_tokens = out->cap = kept;
    for (size_t d = 0; d <= in->n_docs; d++)
        out->doc_tok[d] = dm_tok_lower_bound(out->start, kept, in->doc_off[d]);
    rc = dm_tok_first_hd(out);
done2:
    dm_free(ts);
    dm_free(te);
    dm_free(h);
    dm_free(sl);
    dm_free(verdict);
done:
    dm_free(flag);
    dm_free(scan);
    if (rc < 0) dm_tok_result_free(out);
    return rc;
}
