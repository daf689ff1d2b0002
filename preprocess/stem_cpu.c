/* Word stemming on the host: dm_stem_words_cpu (libstemmer's Snowball "porter", the reference)
 * and dm_stem_words_hd (our DM_HD Porter stemmer of porter.h, the code the CUDA kernels run).
 * Reference: dm_stem_words_cpu. Words with a non-ASCII byte are returned unchanged by both. */
#include <libstemmer.h>
#include <string.h>

#include "common/status.h"
#include "preprocess/porter.h"
#include "preprocess/preprocess.h"
#include "preprocess/token_rules.h"

int dm_stem_words_cpu(char *out, uint32_t *out_off, uint32_t *out_len, const char *words,
                      const uint32_t *off, const uint32_t *len, size_t n)
{
    if ((n > 0) && (!out || !out_off || !out_len || !words || !off || !len))
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_stem_words_cpu: NULL argument");
    struct sb_stemmer *st = sb_stemmer_new("porter", NULL);
    if (!st) return DM_ERR(DM_ERR_NOMEM, "libstemmer: cannot create the porter stemmer");
    for (size_t i = 0; i < n; i++) {
        const char *w = words + off[i];
        out_off[i] = off[i];
        if (len[i] > DM_TOKEN_MAX_LEN || !dm_pp_is_ascii(w, len[i])) {
            memmove(out + off[i], w, len[i]);
            out_len[i] = len[i];
            continue;
        }
        const sb_symbol *s = sb_stemmer_stem(st, (const sb_symbol *)w, (int)len[i]);
        if (!s) {
            sb_stemmer_delete(st);
            return DM_ERR(DM_ERR_NOMEM, "libstemmer: out of memory");
        }
        int sl = sb_stemmer_length(st);
        if (sl < 0 || (uint32_t)sl > len[i]) { /* never happens with porter; keep the word */
            memmove(out + off[i], w, len[i]);
            out_len[i] = len[i];
            continue;
        }
        memmove(out + off[i], s, (size_t)sl);
        out_len[i] = (uint32_t)sl;
    }
    sb_stemmer_delete(st);
    return DM_OK;
}

int dm_stem_words_hd(char *out, uint32_t *out_off, uint32_t *out_len, const char *words,
                     const uint32_t *off, const uint32_t *len, size_t n)
{
    if ((n > 0) && (!out || !out_off || !out_len || !words || !off || !len))
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_stem_words_hd: NULL argument");
    for (size_t i = 0; i < n; i++) {
        const char *w = words + off[i];
        out_off[i] = off[i];
        if (len[i] > DM_TOKEN_MAX_LEN || !dm_pp_is_ascii(w, len[i])) {
            memmove(out + off[i], w, len[i]);
            out_len[i] = len[i];
            continue;
        }
        char buf[DM_TOKEN_MAX_LEN + 1];
        memcpy(buf, w, len[i]);
        int sl = dm_porter_stem(buf, (int)len[i]);
        memcpy(out + off[i], buf, (size_t)sl);
        out_len[i] = (uint32_t)sl;
    }
    return DM_OK;
}
