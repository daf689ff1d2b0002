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

static int dm_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/* The set from a word list; name starts the messages ("stop words FILE"). */
static int dm_stopset_build(dm_stopset *s, const char *text, size_t len, const char *name)
{
    memset(s, 0, sizeof(*s));
    /* words: every token of each normalised line (comments removed), '\n'-separated */
    char *words = dm_malloc(len + 1), *line = NULL;
    size_t wl = 0, wcap = len + 1, n_words = 0, ll = 0, lcap = 0, lineno = 0;
    int rc = DM_OK;
    if (!words) return DM_ERR(DM_ERR_NOMEM, "%s: out of memory", name);
    for (size_t p = 0; p < len;) {
        size_t e = p, c = p;
        lineno++;
        while (e < len && text[e] != '\n') e++;
        while (c < e && text[c] != '#') c++;
        /* one word a line: blanks inside the line (not around it) separate several, a phrase
         * ("new york") that token-level matching could not honour: refused rather than cut */
        size_t b0 = p, b1 = c;
        while (b0 < b1 && dm_blank(text[b0])) b0++;
        while (b1 > b0 && dm_blank(text[b1 - 1])) b1--;
        for (size_t k = b0; k < b1; k++)
            if (dm_blank(text[k])) {
                size_t shown = b1 - b0 > 60 ? 60 : b1 - b0;
                rc = DM_ERR(DM_ERR_FORMAT, "%s:%zu: \"%.*s%s\" is several words: a stop-word list has one word a "
                            "line (stop words are matched token by token, never as a phrase: put each word on a "
                            "line of its own)", name, lineno, (int)shown, text + b0, shown < b1 - b0 ? "..." : "");
                goto fail;
            }
        ll = 0;
        rc = dm_normalize(&line, &ll, &lcap, text + b0, b1 - b0, 0, NULL);
        if (rc < 0) goto fail;
        /* the word normalised like text: one token, or several where the text splits it as it
         * splits a document ("don't" -> "don" "t", "e-mail" -> "e" "mail"): each is a stop word,
         * so that the word in a document leaves no token behind */
        for (size_t t0 = 0; t0 < ll;) {
            size_t t1 = t0;
            while (t1 < ll && line[t1] != ' ') t1++;
            size_t t = t1 - t0;
            if (t > 0 && t <= 255) {
                if (wl + t + 1 > wcap) { /* NFKC may expand a line */
                    char *q = dm_realloc(words, 2 * (wl + t + 1));
                    if (!q) {
                        rc = DM_ERR(DM_ERR_NOMEM, "%s: out of memory", name);
                        goto fail;
                    }
                    words = q;
                    wcap = 2 * (wl + t + 1);
                }
                memcpy(words + wl, line + t0, t);
                wl += t;
                words[wl++] = '\n';
                n_words++;
            }
            t0 = t1 + 1;
        }
        p = e + 1;
    }
    s->cap = 16;
    while (s->cap < 2 * n_words + 2) s->cap *= 2;
    s->keys = dm_calloc(s->cap + DM_STOPSET_FILTER_WORDS, sizeof(*s->keys)); /* slots, then the filter */
    s->word_off = dm_calloc(s->cap, sizeof(*s->word_off));
    s->word_len = dm_calloc(s->cap, sizeof(*s->word_len));
    s->bytes = dm_malloc(wl + 1);
    if (!s->keys || !s->word_off || !s->word_len || !s->bytes) {
        rc = DM_ERR(DM_ERR_NOMEM, "%s: out of memory", name);
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

int dm_stopset_from_text(dm_stopset *s, const char *text, size_t len)
{
    if (!s || (!text && len)) return DM_ERR(DM_ERR_INVALID_ARG, "dm_stopset_from_text: NULL argument");
    return dm_stopset_build(s, text, len, "stop words (list)");
}

int dm_stopset_load(dm_stopset *s, const char *path)
{
    if (!s) return DM_ERR(DM_ERR_INVALID_ARG, "dm_stopset_load: NULL set");
    if (!path) return dm_stopset_build(s, dm_stopwords_en, strlen(dm_stopwords_en), "stop words (built-in list)");
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
    size_t nl = strlen(path) + 16;
    char *name = dm_malloc(nl);
    if (!name) {
        dm_free(buf);
        return DM_ERR(DM_ERR_NOMEM, "stop words %s: out of memory", path);
    }
    snprintf(name, nl, "stop words %s", path);
    int rc = dm_stopset_build(s, buf, len, name);
    dm_free(name);
    dm_free(buf);
    return rc;
}
