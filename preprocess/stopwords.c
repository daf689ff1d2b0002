/* The stop-word set: an exact set of normalised words in flat arrays (open addressing on
 * dm_term_hash, bytes compared) so that the same table serves the CPU backend and, copied as is,
 * the device. Reference: none (data structure); the probe is dm_stopset_probe in token_rules.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/status.h"
#include "preprocess/preprocess.h"
#include "preprocess/token_rules.h"

void dm_stopset_free(dm_stopset *s)
{
    if (!s) return;
    dm_free(s->keys);
    dm_free(s->word_off);
    dm_free(s->word_len);
    dm_free(s->bytes);
    memset(s, 0, sizeof(*s));
}

int dm_stopset_contains(const dm_stopset *s, const char *w, size_t len)
{
    return dm_stopset_probe(s->keys, s->word_off, s->word_len, s->bytes, s->cap, w, len);
}

static int dm_stopset_insert(dm_stopset *s, const char *w, size_t n)
{
    if (n == 0 || n > 255 || dm_stopset_contains(s, w, n)) return DM_OK;
    uint64_t k = dm_stopset_key(dm_term_hash(w, n));
    uint32_t mask = s->cap - 1, i = (uint32_t)(k & mask);
    while (s->keys[i] != 0) i = (i + 1) & mask;
    s->keys[i] = k;
    s->word_off[i] = (uint32_t)s->bytes_len;
    s->word_len[i] = (uint8_t)n;
    uint32_t fb = dm_stopset_filter_bit(w, n);
    s->keys[s->cap + (fb >> 6)] |= (uint64_t)1 << (fb & 63);
    memcpy(s->bytes + s->bytes_len, w, n);
    s->bytes_len += n;
    s->n++;
    return DM_OK;
}

int dm_stopset_from_text(dm_stopset *s, const char *text, size_t len)
{
    if (!s || (!text && len)) return DM_ERR(DM_ERR_INVALID_ARG, "dm_stopset_from_text: NULL argument");
    memset(s, 0, sizeof(*s));
    /* words: the first token of each normalised line (comments removed), '\n'-separated */
    char *words = dm_malloc(len + 1), *line = NULL;
    size_t wl = 0, wcap = len + 1, lines = 0, ll = 0, lcap = 0;
    int rc = DM_OK;
    if (!words) return DM_ERR(DM_ERR_NOMEM, "stop words: out of memory");
    for (size_t p = 0; p < len;) {
        size_t e = p, c = p;
        while (e < len && text[e] != '\n') e++;
        while (c < e && text[c] != '#') c++;
        ll = 0;
        rc = dm_normalize(&line, &ll, &lcap, text + p, c - p, 0, NULL);
        if (rc < 0) goto fail;
        size_t t = 0;
        while (t < ll && line[t] != ' ') t++;
        if (t > 0 && t <= 255) {
            if (wl + t + 1 > wcap) { /* NFKC may expand a line */
                char *q = dm_realloc(words, 2 * (wl + t + 1));
                if (!q) {
                    rc = DM_ERR(DM_ERR_NOMEM, "stop words: out of memory");
                    goto fail;
                }
                words = q;
                wcap = 2 * (wl + t + 1);
            }
            memcpy(words + wl, line, t);
            wl += t;
            words[wl++] = '\n';
            lines++;
        }
        p = e + 1;
    }
    s->cap = 16;
    while (s->cap < 2 * lines + 2) s->cap *= 2;
    s->keys = dm_calloc(s->cap + DM_STOPSET_FILTER_WORDS, sizeof(*s->keys)); /* slots, then the filter */
    s->word_off = dm_calloc(s->cap, sizeof(*s->word_off));
    s->word_len = dm_calloc(s->cap, sizeof(*s->word_len));
    s->bytes = dm_malloc(wl + 1);
    if (!s->keys || !s->word_off || !s->word_len || !s->bytes) {
        rc = DM_ERR(DM_ERR_NOMEM, "stop words: out of memory");
        goto fail;
    }
    for (size_t p = 0; p < wl;) {
        size_t e = p;
        while (e < wl && words[e] != '\n') e++;
        dm_stopset_insert(s, words + p, e - p);
        p = e + 1;
    }
    dm_free(words);
    dm_free(line);
    return DM_OK;
fail:
    dm_free(words);
    dm_free(line);
    dm_stopset_free(s);
    return rc;
}

int dm_stopset_load(dm_stopset *s, const char *path)
{
    if (!s) return DM_ERR(DM_ERR_INVALID_ARG, "dm_stopset_load: NULL set");
    if (!path) return dm_stopset_from_text(s, dm_stopwords_en, strlen(dm_stopwords_en));
    FILE *f;
    DM_TRY(dm_open_input(&f, path, "stop words"));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 > cap) {
            cap = cap ? 2 * cap : 65536;
            char *q = dm_realloc(buf, cap);
            if (!q) {
                dm_free(buf);
                fclose(f);
                return DM_ERR(DM_ERR_NOMEM, "stop words %s: out of memory", path);
            }
            buf = q;
        }
        size_t k = fread(buf + len, 1, cap - len, f);
        len += k;
        if (k == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        dm_free(buf);
        return DM_ERR(DM_ERR_IO, "stop words %s: read error", path);
    }
    int rc = dm_stopset_from_text(s, buf, len);
    dm_free(buf);
    return rc;
}
