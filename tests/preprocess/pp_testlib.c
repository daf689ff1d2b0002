/* Helpers shared by the preprocess tests. Reference: none (test support). */
#include "pp_testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "testutil.h"
#include "common/alloc.h"
#include "common/rng.h"

const char *pp_reuters_dir(void)
{
    static char buf[4096], dir[4096];
    if (!dm_test_dataset("reuters21578/reut2-000.sgm.gz", buf, sizeof(buf))) return NULL;
    snprintf(dir, sizeof(dir), "%s", buf);
    *strrchr(dir, '/') = 0;
    return dir;
}

void pp_words_add(pp_words *w, const char *s, size_t n)
{
    if (w->len + n + 1 > w->cap) {
        w->cap = (w->len + n + 1) * 2;
        w->bytes = realloc(w->bytes, w->cap);
    }
    if (w->n == w->ncap) {
        w->ncap = w->ncap ? 2 * w->ncap : 1024;
        w->off = realloc(w->off, w->ncap * sizeof(uint32_t));
        w->wlen = realloc(w->wlen, w->ncap * sizeof(uint32_t));
    }
    memcpy(w->bytes + w->len, s, n);
    w->off[w->n] = (uint32_t)w->len;
    w->wlen[w->n] = (uint32_t)n;
    w->len += n;
    w->bytes[w->len] = 0;
    w->n++;
}

void pp_words_free(pp_words *w)
{
    free(w->bytes);
    free(w->off);
    free(w->wlen);
    memset(w, 0, sizeof(*w));
}

typedef struct pp_set {
    uint64_t *keys;
    size_t cap, n;
    pp_words *w;
    char *norm;
    size_t norm_len, norm_cap, docs;
} pp_set;

static int pp_collect(void *user, const dm_raw_doc *d)
{
    pp_set *s = user;
    s->norm_len = 0;
    dm_normalize(&s->norm, &s->norm_len, &s->norm_cap, d->text, d->len, 0, NULL);
    s->docs++;
    for (size_t p = 0; p < s->norm_len;) {
        while (p < s->norm_len && s->norm[p] == ' ') p++;
        size_t b = p;
        while (p < s->norm_len && s->norm[p] != ' ') p++;
        if (p == b || p - b > DM_TOKEN_MAX_LEN) continue;
        uint64_t h = 1469598103934665603ull;
        for (size_t i = b; i < p; i++) h = (h ^ (unsigned char)s->norm[i]) * 1099511628211ull;
        h |= 1;
        if (2 * (s->n + 1) > s->cap) { /* rehash into a bigger set */
            size_t nc = s->cap ? 2 * s->cap : 1 << 16;
            uint64_t *k = calloc(nc, sizeof(*k));
            for (size_t i = 0; i < s->cap; i++)
                if (s->keys[i]) {
                    size_t j = s->keys[i] & (nc - 1);
                    while (k[j]) j = (j + 1) & (nc - 1);
                    k[j] = s->keys[i];
                }
            free(s->keys);
            s->keys = k;
            s->cap = nc;
        }
        size_t j = h & (s->cap - 1);
        int found = 0;
        while (s->keys[j]) {
            if (s->keys[j] == h) { found = 1; break; }
            j = (j + 1) & (s->cap - 1);
        }
        if (found) continue; /* (a 64-bit FNV collision would only drop one test word) */
        s->keys[j] = h;
        s->n++;
        pp_words_add(s->w, s->norm + b, p - b);
    }
    return 0;
}

size_t pp_distinct_tokens(pp_words *out, const char *corpus, int format)
{
    dm_reader_options ro = DM_READER_OPTIONS_INIT;
    ro.format = format;
    dm_pp_stats st;
    memset(&st, 0, sizeof(st));
    dm_pp_file_list fl;
    if (dm_pp_list_files(&fl, corpus, &ro, &st) != 0) return 0;
    pp_set s;
    memset(&s, 0, sizeof(s));
    s.w = out;
    for (size_t i = 0; i < fl.n; i++) dm_pp_read_file(&fl.files[i], &ro, &st, pp_collect, &s);
    dm_pp_file_list_free(&fl);
    free(s.keys);
    dm_free(s.norm);
    return s.docs;
}

uint64_t pp_rand(uint64_t *s)
{
    return dm_splitmix64(s);
}

void pp_gen_random_words(pp_words *out, size_t n, uint64_t seed)
{
    static const char alpha[] = "abcdefghijklmnopqrstuvwxyzaeiouyyy";
    char buf[64];
    for (size_t i = 0; i < n; i++) {
        size_t len = 1 + pp_rand(&seed) % 20;
        for (size_t k = 0; k < len; k++) buf[k] = alpha[pp_rand(&seed) % (sizeof(alpha) - 1)];
        pp_words_add(out, buf, len);
    }
}

void pp_gen_suffix_words(pp_words *out, size_t n, uint64_t seed)
{
    static const char *suf[] = {
        "ational", "tional", "enci", "anci", "izer", "abli", "alli", "entli", "eli", "ousli", "ization",
        "ation", "ator", "alism", "iveness", "fulness", "ousness", "aliti", "iviti", "biliti", "icate",
        "ative", "alize", "iciti", "ical", "ful", "ness", "al", "ance", "ence", "er", "ic", "able",
        "ible", "ant", "ement", "ment", "ent", "sion", "tion", "ou", "ism", "ate", "iti", "ous", "ive",
        "ize", "e", "l", "ll", "s", "ss", "sses", "ies", "ed", "eed", "ing", "y", "at", "bl", "iz",
        "yy", "ye", "ly", "bb", "dd", "ff", "gg", "mm", "nn", "pp", "rr", "tt", "zz", "Y"};
    static const char stem_chars[] = "bcdfghjklmnpqrstvwxzaeiouy";
    char buf[128];
    for (size_t i = 0; i < n; i++) {
        size_t len = 1 + pp_rand(&seed) % 6;
        for (size_t k = 0; k < len; k++) buf[k] = stem_chars[pp_rand(&seed) % (sizeof(stem_chars) - 1)];
        int ns = (int)(pp_rand(&seed) % 4);
        for (int k = 0; k < ns; k++) {
            const char *s = suf[pp_rand(&seed) % (sizeof(suf) / sizeof(suf[0]))];
            size_t sl = strlen(s);
            if (len + sl >= sizeof(buf)) break;
            memcpy(buf + len, s, sl);
            len += sl;
        }
        pp_words_add(out, buf, len);
    }
}

int pp_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t k = fwrite(data, 1, len, f);
    return fclose(f) == 0 && k == len ? 0 : -1;
}

int pp_sanitizer(void)
{
    return getenv("DOCMINE_SANITIZER") != NULL;
}

const char *pp_reuters_small(char *out, size_t cap, const char *tmp, int n_files, size_t bytes)
{
    const char *dir = pp_reuters_dir();
    if (!dir) return NULL;
    snprintf(out, cap, "%s/reuters-small", tmp);
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%.4000s'", out);
    if (system(cmd) != 0) return NULL;
    char *buf = malloc(bytes + 1);
    if (!buf) return NULL;
    const char *ok = out;
    for (int f = 0; ok && f < n_files; f++) {
        char src[4200], dst[4200];
        snprintf(src, sizeof(src), "%.4000s/reut2-%03d.sgm.gz", dir, f);
        snprintf(dst, sizeof(dst), "%.4000s/reut2-%03d.sgm", out, f);
        gzFile g = gzopen(src, "rb");
        int n = g ? gzread(g, buf, (unsigned)bytes) : -1;
        if (g) gzclose(g);
        if (n <= 0) {
            ok = NULL;
            break;
        }
        buf[n] = 0;
        /* whole records only: cut after the last end tag */
        char *end = NULL;
        for (char *p = buf; (p = strstr(p, "</REUTERS>")) != NULL; p += 10) end = p + 10;
        if (!end || pp_write_file(dst, buf, (size_t)(end - buf)) != 0) ok = NULL;
    }
    free(buf);
    return ok;
}
