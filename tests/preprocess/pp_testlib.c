/* Helpers shared by the preprocess tests. Reference: none (test support). */
#include "pp_testlib.h"

#include <archive.h>
#include <archive_entry.h>
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

static int pp_put(const char *dir, const char *rel, const void *data, size_t len)
{
    char p[4300];
    snprintf(p, sizeof(p), "%.4000s/%s", dir, rel);
    return pp_write_file(p, data, len);
}

int pp_write_mixed_corpus(const char *dir)
{
    char cmd[4300], p[4300];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%.1000s/text' '%.1000s/json' '%.1000s/sgml' '%.1000s/more'", dir, dir, dir,
             dir);
    if (system(cmd) != 0) return -1;
    int rc = 0;
    /* plain text: accented words (runs around non-ASCII bytes), a NUL byte and 120 CJK characters
     * without a space (360 bytes: one run past the normaliser's stack buffer) */
    char big[2048];
    size_t n = (size_t)snprintf(big, sizeof(big), "Caf\xc3\xa9 prices rose in the na\xc3\xafve market; ");
    for (int i = 0; i < 120; i++, n += 3) memcpy(big + n, "\xe6\x97\xa5", 3);
    big[n++] = 0;
    n += (size_t)snprintf(big + n, sizeof(big) - n, " Stra\xc3\x9f" "e \xef\xac\x81nance running runners 1987 oil\n");
    rc |= pp_put(dir, "text/plain.txt", big, n);
    snprintf(p, sizeof(p), "%.4000s/text/zipped.txt.gz", dir);
    gzFile g = gzopen(p, "wb");
    const char *gz = "Compressed crude oil shipments increased during March; analysts expected more. ";
    if (!g || gzwrite(g, gz, (unsigned)strlen(gz)) != (int)strlen(gz)) rc = -1;
    if (g) gzclose(g);
    /* inflates about 200:1: the reader's buffer grows while it inflates */
    snprintf(p, sizeof(p), "%.4000s/text/repeat.txt.gz", dir);
    g = gzopen(p, "wb");
    for (int i = 0; g && i < 1500; i++)
        if (gzwrite(g, "wheat corn ", 11) != 11) rc = -1;
    if (!g) rc = -1;
    else gzclose(g);
    const char *jl = "{\"id\":\"j1\",\"text\":\"Grain exports fell sharply\",\"label\":[\"grain\",\"trade\"]}\n"
                     "{\"id\":7,\"text\":\"Numeric ids are kept as text\",\"label\":\"earn\"}\n"
                     "{\"text\":\"no id: the line names it\",\"labels\":[1,2.5,{\"x\":1},\"acq\"]}\n"
                     "{broken json\n"
                     "\n"
                     "{\"id\":\"j5\",\"text\":\"Gold and silver \\u00e9t\\u00e9 prices\"}\n";
    rc |= pp_put(dir, "json/docs.jsonl", jl, strlen(jl));
    const char *tsv = "t1\tearn\tProfits rose to record levels\n"
                      "bad line without tabs\n"
                      "t2\t\tUnlabelled text\twith a further tab\r\n";
    rc |= pp_put(dir, "json/docs.tsv", tsv, strlen(tsv));
    const char *sgm =
        "<!DOCTYPE lewis SYSTEM \"lewis.dtd\">\n"
        "<REUTERS TOPICS=\"YES\" NEWID=\"1\"><DATE>26-FEB-1987</DATE><TOPICS><D>cocoa</D><D>grain</D></TOPICS>"
        "<TEXT><TITLE>COCOA &amp; GRAIN PRICES</TITLE><BODY>Showers continued throughout the week "
        "&#233;t&#xE9; &lt;tags&gt; <b>bold</b> cocoa</BODY></TEXT></REUTERS>\n"
        "<REUTERS NEWID=\"2\"><TOPICS></TOPICS><TEXT TYPE=\"UNPROC\">Unprocessed text only</TEXT></REUTERS>\n"
        "<REUTERS NEWID=\"3\"><TEXT><BODY>a record without its end tag\n";
    rc |= pp_put(dir, "sgml/reut2-000.sgm", sgm, strlen(sgm));
    /* a .tar.gz with a text and a JSONL member */
    static const char *names[] = {"inner/a.txt", "inner/b.jsonl"};
    static const char *texts[] = {"Archived member text about wheat and corn harvests",
                                  "{\"id\":\"m1\",\"text\":\"Archived JSON member\",\"label\":\"wheat\"}\n"};
    snprintf(p, sizeof(p), "%.4000s/more/pack.tar.gz", dir);
    struct archive *a = archive_write_new();
    if (!a) return -1;
    archive_write_set_format_pax_restricted(a);
    archive_write_add_filter_gzip(a);
    if (archive_write_open_filename(a, p) != ARCHIVE_OK) rc = -1;
    for (int i = 0; rc == 0 && i < 2; i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, names[i]);
        archive_entry_set_size(e, (la_int64_t)strlen(texts[i]));
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        if (archive_write_header(a, e) != ARCHIVE_OK ||
            archive_write_data(a, texts[i], strlen(texts[i])) != (la_ssize_t)strlen(texts[i]))
            rc = -1;
        archive_entry_free(e);
    }
    archive_write_close(a);
    archive_write_free(a);
    rc |= pp_put(dir, "more/empty.txt", "", 0);
    /* plain files of a few hundred bytes */
    static const char *words[] = {"market", "Prices", "rose", "the", "1987", "oil", "running", "shipments",
                                  "exports", "grain", "caf\xc3\xa9", "of", "x", "analysts"};
    uint64_t seed = 17;
    for (int f = 0; f < 8; f++) {
        char t[1024], rel[64];
        size_t l = 0, want = 200 + pp_rand(&seed) % 600;
        while (l < want) {
            const char *w = words[pp_rand(&seed) % (sizeof(words) / sizeof(words[0]))];
            l += (size_t)snprintf(t + l, sizeof(t) - l, "%s%s", w, pp_rand(&seed) % 9 ? " " : ".\n");
        }
        snprintf(rel, sizeof(rel), "more/f%02d.txt", f);
        rc |= pp_put(dir, rel, t, l);
    }
    return rc ? -1 : 0;
}

static int pp_stats_equal(const dm_pp_stats *a, const dm_pp_stats *b)
{
    int eq = a->files_read == b->files_read && a->files_ignored == b->files_ignored &&
             a->bytes_read == b->bytes_read && a->docs == b->docs && a->docs_labelled == b->docs_labelled &&
             a->invalid_utf8 == b->invalid_utf8 && a->nul_bytes == b->nul_bytes && a->tokens == b->tokens &&
             a->tokens_short == b->tokens_short && a->tokens_long == b->tokens_long &&
             a->tokens_number == b->tokens_number && a->tokens_stop == b->tokens_stop &&
             a->hash_collisions == b->hash_collisions && a->n_messages == b->n_messages;
    for (int i = 0; eq && i < DM_PP_SKIP_COUNT; i++) eq = a->skipped[i] == b->skipped[i];
    for (uint64_t m = 0; eq && m < a->n_messages && m < DM_PP_MAX_MESSAGES; m++)
        eq = strcmp(a->messages[m], b->messages[m]) == 0;
    return eq;
}

int pp_streams_equal(const dm_token_stream *a, const dm_token_stream *b)
{
    if (a->n_docs != b->n_docs || a->n_tokens != b->n_tokens || a->n_terms != b->n_terms || a->flags != b->flags ||
        !pp_stats_equal(&a->stats, &b->stats) || !a->tok_off || !b->tok_off || !a->id_off || !b->id_off ||
        !a->label_off || !b->label_off || !a->term_off || !b->term_off)
        return 0;
    size_t d = (a->n_docs + 1) * sizeof(uint64_t);
    return memcmp(a->tok_off, b->tok_off, d) == 0 && memcmp(a->id_off, b->id_off, d) == 0 &&
           memcmp(a->label_off, b->label_off, d) == 0 &&
           memcmp(a->ids, b->ids, a->id_off[a->n_docs]) == 0 &&
           memcmp(a->labels, b->labels, a->label_off[a->n_docs]) == 0 &&
           (a->n_tokens == 0 || memcmp(a->hashes, b->hashes, a->n_tokens * sizeof(uint64_t)) == 0) &&
           (a->n_terms == 0 || memcmp(a->term_hash, b->term_hash, a->n_terms * sizeof(uint64_t)) == 0) &&
           memcmp(a->term_off, b->term_off, (a->n_terms + 1) * sizeof(uint64_t)) == 0 &&
           memcmp(a->term_bytes, b->term_bytes, a->term_off[a->n_terms]) == 0;
}

int pp_sweep_differs(void *sweep)
{
    const pp_sweep *w = sweep;
    return !pp_streams_equal(&w->s, &w->ref);
}

void pp_sweep_release(void *sweep, int rc)
{
    if (rc == DM_OK) dm_token_stream_free(&((pp_sweep *)sweep)->s);
    dm_preprocess_release_buffers();
}
