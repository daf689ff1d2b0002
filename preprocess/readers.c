/* Corpus readers: directory trees (sorted, symlink loops detected), .gz (zlib), .tar/.tar.gz
 * (libarchive), JSON Lines (jansson), TSV and Reuters-21578 SGML; the split of files across ranks
 * by bytes. Reference: none (I/O); each format follows DESIGN.md section 8 and issue 3.
 * Bad input never crashes: it is skipped and counted in dm_pp_stats with a message naming the file
 * and line/record, or, with strict = 1, returned as DM_ERR_FORMAT / DM_ERR_IO. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/status.h"
#include "preprocess/preprocess.h"

/* ------------------------------------------------------------------ helpers */

static int dm_ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* A skip, or in strict mode an error with the same message. */
static int dm_rd_skip(const dm_reader_options *opt, dm_pp_stats *st, int reason, int code,
                      const char *msg)
{
    if (opt->strict) return DM_ERR(code, "%s", msg);
    dm_pp_stats_skip(st, reason, "%s", msg);
    return DM_OK;
}

typedef struct dm_sbuf {
    char *p;
    size_t n, cap;
} dm_sbuf;

/* Makes room for need bytes in all (contents kept). */
static int dm_sbuf_reserve(dm_sbuf *b, size_t need)
{
    if (need <= b->cap) return DM_OK;
    size_t nc = b->cap ? b->cap : 256;
    while (nc < need) nc *= 2;
    char *q = dm_realloc(b->p, nc);
    if (!q) return DM_ERR(DM_ERR_NOMEM, "reader: out of memory (%zu bytes)", nc);
    b->p = q;
    b->cap = nc;
    return DM_OK;
}

static int dm_sbuf_put(dm_sbuf *b, const char *s, size_t n)
{
    DM_TRY(dm_sbuf_reserve(b, b->n + n + 1));
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return DM_OK;
}

/* Label of a document under --labels dir: first component of rel when it has a folder. */
static void dm_dir_label(char *out, size_t cap, const char *rel)
{
    const char *slash = strchr(rel, '/');
    size_t n = slash ? (size_t)(slash - rel) : 0;
    if (n >= cap) n = cap - 1;
    memcpy(out, rel, n);
    out[n] = 0;
}

typedef struct dm_rd {
    const dm_reader_options *opt;
    dm_pp_stats *st;
    dm_doc_sink *sink;
    void *user;
    char dir_label[256];
} dm_rd;

static int dm_rd_emit(dm_rd *r, const char *id, const char *labels, const char *text, size_t len)
{
    dm_raw_doc d;
    d.id = id;
    d.labels = r->opt->labels == DM_PP_LABELS_DIR ? r->dir_label
               : r->opt->labels == DM_PP_LABELS_NONE ? ""
                                                     : (labels ? labels : "");
    d.text = text;
    d.len = len;
    return r->sink(r->user, &d);
}

/* ------------------------------------------------------------------ formats */

static int dm_format_of(const char *name, int forced)
{
    if (forced != DM_PP_FORMAT_AUTO) return forced;
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", name);
    if (dm_ends_with(buf, ".gz")) buf[strlen(buf) - 3] = 0;
    if (dm_ends_with(buf, ".sgm")) return DM_PP_FORMAT_REUTERS;
    if (dm_ends_with(buf, ".jsonl") || dm_ends_with(buf, ".ndjson")) return DM_PP_FORMAT_JSONL;
    if (dm_ends_with(buf, ".tsv")) return DM_PP_FORMAT_TSV;
    return DM_PP_FORMAT_TEXT;
}

int dm_pp_format_parse(const char *s, int *format)
{
    static const char *names[] = {"auto", "text", "jsonl", "tsv", "reuters"};
    for (int i = 0; i < 5; i++)
        if (s && strcmp(s, names[i]) == 0) {
            *format = i;
            return DM_OK;
        }
    return DM_ERR(DM_ERR_INVALID_ARG, "unknown format '%s' (auto, text, jsonl, tsv, reuters)",
                  s ? s : "(null)");
}

static int dm_is_archive_name(const char *name)
{
    return dm_ends_with(name, ".tar") || dm_ends_with(name, ".tar.gz") || dm_ends_with(name, ".tgz");
}

/* One document per file. */
static int dm_read_text(dm_rd *r, const char *name, const char *data, size_t len)
{
    return dm_rd_emit(r, name, "", data, len);
}

/* JSON Lines: {"id":..,"text":..,"label":..}; label may be a string, number or array. */
static int dm_json_scalar(dm_sbuf *b, json_t *v)
{
    char tmp[64];
    if (json_is_string(v)) return dm_sbuf_put(b, json_string_value(v), json_string_length(v));
    if (json_is_integer(v)) {
        snprintf(tmp, sizeof(tmp), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return dm_sbuf_put(b, tmp, strlen(tmp));
    }
    if (json_is_real(v)) {
        snprintf(tmp, sizeof(tmp), "%.17g", json_real_value(v));
        return dm_sbuf_put(b, tmp, strlen(tmp));
    }
    return 1; /* not a scalar */
}

/* The next line of data[*p, len): sets [*b, *t) to it without its '\n' and moves *p past it.
 * Returns 0 when no line is left. */
static int next_line(const char *data, size_t len, size_t *p, size_t *b, size_t *t)
{
    if (*p >= len) return 0;
    size_t e = *p;
    while (e < len && data[e] != '\n') e++;
    *b = *p;
    *t = e;
    *p = e + 1;
    return 1;
}

static int dm_read_jsonl(dm_rd *r, const char *name, const char *data, size_t len)
{
    dm_sbuf id = {0}, lab = {0};
    int rc = DM_OK;
    size_t line = 0;
    char msg[512];
    size_t p = 0, b, t;
    while (rc >= 0 && next_line(data, len, &p, &b, &t)) {
        line++;
        while (b < t && (data[b] == ' ' || data[b] == '\t' || data[b] == '\r')) b++;
        while (t > b && (data[t - 1] == ' ' || data[t - 1] == '\t' || data[t - 1] == '\r')) t--;
        if (b == t) continue; /* blank line */
        json_error_t err;
        json_t *o = json_loadb(data + b, t - b, JSON_ALLOW_NUL, &err);
        json_t *text = o ? json_object_get(o, "text") : NULL;
        if (!o || !json_is_object(o) || !json_is_string(text)) {
            snprintf(msg, sizeof(msg), "%s:%zu: %s", name, line,
                     !o ? err.text : !json_is_object(o) ? "not a JSON object"
                                                       : "no string field \"text\"");
            json_decref(o);
            rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_BAD_JSON, DM_ERR_FORMAT, msg);
            continue;
        }
        id.n = lab.n = 0;
        json_t *jid = json_object_get(o, "id");
        /* dm_json_scalar: 0 stored, 1 not a scalar, negative out of memory (an error, never a
         * fallback id or a dropped label) */
        int k = jid ? dm_json_scalar(&id, jid) : 1;
        if (k < 0) rc = k;
        else if (k > 0) {
            id.n = 0;
            snprintf(msg, sizeof(msg), "%s:%zu", name, line);
            rc = dm_sbuf_put(&id, msg, strlen(msg));
        }
        json_t *jl = json_object_get(o, "label");
        if (rc >= 0 && !jl) jl = json_object_get(o, "labels");
        if (rc >= 0 && json_is_array(jl)) {
            size_t i;
            json_t *v;
            json_array_foreach(jl, i, v)
            {
                if (lab.n) rc = dm_sbuf_put(&lab, ",", 1);
                if (rc >= 0) rc = dm_json_scalar(&lab, v);
                if (rc > 0) { /* not a scalar: dropped with its comma */
                    rc = DM_OK;
                    if (lab.n && lab.p[lab.n - 1] == ',') lab.n--;
                }
                if (rc < 0) break;
            }
        } else if (rc >= 0 && jl) {
            k = dm_json_scalar(&lab, jl);
            if (k < 0) rc = k;
            else if (k > 0) lab.n = 0;
        }
        if (rc >= 0) rc = dm_sbuf_put(&lab, "", 0);
        if (rc >= 0)
            rc = dm_rd_emit(r, id.p, lab.p, json_string_value(text), json_string_length(text));
        json_decref(o);
    }
    dm_free(id.p);
    dm_free(lab.p);
    return rc;
}

/* TSV: id TAB label TAB text (the text keeps any further tabs). */
static int dm_read_tsv(dm_rd *r, const char *name, const char *data, size_t len)
{
    dm_sbuf id = {0}, lab = {0};
    int rc = DM_OK;
    size_t line = 0;
    char msg[512];
    size_t p = 0, b, t;
    while (rc >= 0 && next_line(data, len, &p, &b, &t)) {
        line++;
        if (t > b && data[t - 1] == '\r') t--;
        if (b == t) continue;
        const char *s = data + b;
        const char *t1 = memchr(s, '\t', t - b);
        const char *t2 = t1 ? memchr(t1 + 1, '\t', (size_t)(data + t - t1 - 1)) : NULL;
        if (!t1 || !t2 || t1 == s) {
            snprintf(msg, sizeof(msg), "%s:%zu: expected id<TAB>label<TAB>text", name, line);
            rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_BAD_TSV, DM_ERR_FORMAT, msg);
            continue;
        }
        id.n = lab.n = 0;
        rc = dm_sbuf_put(&id, s, (size_t)(t1 - s));
        if (rc >= 0) rc = dm_sbuf_put(&lab, t1 + 1, (size_t)(t2 - t1 - 1));
        if (rc >= 0) rc = dm_rd_emit(r, id.p, lab.p, t2 + 1, (size_t)(data + t - t2 - 1));
    }
    dm_free(id.p);
    dm_free(lab.p);
    return rc;
}

/* ---- Reuters-21578 SGML */

static const char *dm_memfind(const char *h, size_t hn, const char *needle)
{
    size_t nn = strlen(needle);
    if (nn == 0 || hn < nn) return NULL;
    const char *end = h + hn - nn;
    for (const char *p = h; p <= end; p++) {
        p = memchr(p, needle[0], (size_t)(end - p) + 1);
        if (!p) return NULL;
        if ((nn == 1 || p[1] == needle[1]) && memcmp(p, needle, nn) == 0) return p;
    }
    return NULL;
}

/* Content between <tag...> and </tag> inside [s, s+n); NULL if absent. */
static const char *dm_sgml_elem(const char *s, size_t n, const char *tag, size_t *out_len)
{
    char open[64], close[64];
    size_t tl = strlen(tag);
    if (tl + 4 > sizeof(open)) return NULL;
    open[0] = close[0] = '<';
    close[1] = '/';
    memcpy(open + 1, tag, tl);
    memcpy(close + 2, tag, tl);
    open[tl + 1] = 0;
    close[tl + 2] = '>';
    close[tl + 3] = 0;
    const char *p = s;
    for (;;) {
        p = dm_memfind(p, (size_t)(s + n - p), open);
        if (!p) return NULL;
        char c = p + tl + 1 < s + n ? p[tl + 1] : 0;
        if (c == '>' || c == ' ') break; /* <TITLE> not <TITLEX> */
        p++;
    }
    const char *gt = memchr(p, '>', (size_t)(s + n - p));
    if (!gt) return NULL;
    const char *c = dm_memfind(gt + 1, (size_t)(s + n - gt - 1), close);
    if (!c) return NULL;
    *out_len = (size_t)(c - gt - 1);
    return gt + 1;
}

static void dm_utf8_put(dm_sbuf *b, unsigned long cp, int *rc)
{
    char u[4];
    size_t k;
    if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
    if (cp < 0x80) {
        u[0] = (char)cp;
        k = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        k = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        k = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        k = 4;
    }
    if (*rc >= 0) *rc = dm_sbuf_put(b, u, k);
}

/* Index of the first '<' or '&' in s[i..n), or n. */
static size_t dm_sgml_special(const char *s, size_t i, size_t n)
{
    /* eight bytes at a time: a zero byte in w ^ c (c = the byte repeated) marks a match */
    const uint64_t lo = 0x0101010101010101ull, hi = 0x8080808080808080ull;
    for (; i + 8 <= n; i += 8) {
        uint64_t w, a, b;
        memcpy(&w, s + i, 8);
        a = w ^ (lo * '<');
        b = w ^ (lo * '&');
        if (((a - lo) & ~a & hi) | ((b - lo) & ~b & hi)) break;
    }
    for (; i < n; i++)
        if (s[i] == '<' || s[i] == '&') break;
    return i;
}

/* Appends s[0..n) to b with SGML entities decoded and tags removed. Runs of plain bytes are
 * copied whole (a byte at a time was most of the reader's time on Reuters). */
static int dm_sgml_text(dm_sbuf *b, const char *s, size_t n)
{
    int rc = DM_OK;
    for (size_t i = 0; i < n && rc >= 0;) {
        size_t j = dm_sgml_special(s, i, n);
        if (j > i) {
            rc = dm_sbuf_put(b, s + i, j - i);
            i = j;
            continue;
        }
        if (s[i] == '<') { /* a tag inside text: drop it, keep a separator */
            const char *gt = memchr(s + i, '>', n - i);
            if (gt) {
                rc = dm_sbuf_put(b, " ", 1);
                i = (size_t)(gt - s) + 1;
                continue;
            }
        } else { /* '&' */
            const char *semi = memchr(s + i, ';', n - i < 12 ? n - i : 12);
            if (semi) {
                size_t el = (size_t)(semi - s - i - 1);
                const char *e = s + i + 1;
                static const struct { const char *n; char c; } named[] = {
                    {"lt", '<'}, {"gt", '>'}, {"amp", '&'}, {"quot", '"'}, {"apos", '\''}};
                int done = 0;
                for (size_t k = 0; k < 5 && !done; k++)
                    if (el == strlen(named[k].n) && memcmp(e, named[k].n, el) == 0) {
                        rc = dm_sbuf_put(b, &named[k].c, 1);
                        done = 1;
                    }
                if (!done && el >= 2 && e[0] == '#') {
                    char num[16];
                    memcpy(num, e + 1, el - 1);
                    num[el - 1] = 0;
                    char *end;
                    int hex = num[0] == 'x' || num[0] == 'X';
                    unsigned long cp = strtoul(num + hex, &end, hex ? 16 : 10);
                    if (*end == 0 && end != num + hex) {
                        dm_utf8_put(b, cp, &rc);
                        done = 1;
                    }
                }
                if (done) {
                    i = (size_t)(semi - s) + 1;
                    continue;
                }
            }
        }
        /* a '<' without '>' or an '&' that starts no entity: the byte itself */
        rc = dm_sbuf_put(b, s + i, 1);
        i++;
    }
    return rc;
}

static int dm_read_reuters(dm_rd *r, const char *name, const char *data, size_t len)
{
    dm_sbuf text = {0}, labels = {0};
    int rc = DM_OK;
    size_t rec = 0;
    char msg[512];
    const char *p = data, *end = data + len;
    while (rc >= 0) {
        const char *o = dm_memfind(p, (size_t)(end - p), "<REUTERS");
        if (!o) break;
        rec++;
        const char *gt = memchr(o, '>', (size_t)(end - o));
        const char *c = dm_memfind(o, (size_t)(end - o), "</REUTERS>");
        const char *next = dm_memfind(o + 8, (size_t)(end - o - 8), "<REUTERS");
        if (!gt || !c || (next && next < c)) {
            snprintf(msg, sizeof(msg), "%s: record %zu (byte %zu): no </REUTERS> end tag", name, rec,
                     (size_t)(o - data));
            rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_BAD_SGML, DM_ERR_FORMAT, msg);
            if (!next) break;
            p = next;
            continue;
        }
        /* NEWID="n" in the start tag */
        const char *nid = dm_memfind(o, (size_t)(gt - o), "NEWID=\"");
        char id[64] = {0};
        if (nid) {
            nid += 7;
            const char *q = memchr(nid, '"', (size_t)(gt - nid));
            if (q && q > nid && (size_t)(q - nid) < sizeof(id)) memcpy(id, nid, (size_t)(q - nid));
        }
        p = c + 10;
        if (!id[0]) {
            snprintf(msg, sizeof(msg), "%s: record %zu (byte %zu): no NEWID attribute", name, rec,
                     (size_t)(o - data));
            rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_BAD_SGML, DM_ERR_FORMAT, msg);
            continue;
        }
        const char *body = gt + 1;
        size_t blen = (size_t)(c - body);
        /* labels: <D>x</D> inside <TOPICS> */
        labels.n = 0;
        rc = dm_sbuf_put(&labels, "", 0);
        size_t tl;
        const char *topics = dm_sgml_elem(body, blen, "TOPICS", &tl);
        for (const char *q = topics; q && rc >= 0;) {
            size_t dl;
            const char *dv = dm_sgml_elem(q, (size_t)(topics + tl - q), "D", &dl);
            if (!dv) break;
            if (labels.n) rc = dm_sbuf_put(&labels, ",", 1);
            if (rc >= 0) rc = dm_sgml_text(&labels, dv, dl);
            q = dv + dl + 4;
        }
        /* text: TITLE + BODY; records without either (TYPE="UNPROC") use all of <TEXT> */
        text.n = 0;
        if (rc >= 0) rc = dm_sbuf_put(&text, "", 0);
        size_t ttl = 0, bl = 0, xl = 0;
        const char *title = dm_sgml_elem(body, blen, "TITLE", &ttl);
        const char *bd = dm_sgml_elem(body, blen, "BODY", &bl);
        if (rc >= 0 && title) rc = dm_sgml_text(&text, title, ttl);
        if (rc >= 0 && title && bd) rc = dm_sbuf_put(&text, "\n", 1);
        if (rc >= 0 && bd) rc = dm_sgml_text(&text, bd, bl);
        if (rc >= 0 && !title && !bd) {
            const char *tx = dm_sgml_elem(body, blen, "TEXT", &xl);
            if (tx) rc = dm_sgml_text(&text, tx, xl);
        }
        if (rc >= 0) rc = dm_rd_emit(r, id, labels.p, text.p, text.n);
    }
    dm_free(text.p);
    dm_free(labels.p);
    return rc;
}

/* ------------------------------------------------------------------ gzip, archives */

/* Inflates a gzip buffer (concatenated members allowed). Returns 1 on corrupt/truncated data
 * (after *out_len good bytes), 0 on success, negative on NOMEM. */
static int dm_gunzip(char **out, size_t *out_len, const char *in, size_t n, char *why, size_t wn)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, 15 + 16) != Z_OK) return DM_ERR(DM_ERR_NOMEM, "zlib: inflateInit2 failed");
    size_t cap = n * 4 + 4096, len = 0;
    char *buf = dm_malloc(cap);
    if (!buf) {
        inflateEnd(&z);
        return DM_ERR(DM_ERR_NOMEM, "gunzip: out of memory");
    }
    z.next_in = (Bytef *)in;
    size_t left = n;
    int bad = 0;
    for (;;) {
        if (len == cap) {
            char *q = dm_realloc(buf, cap * 2);
            if (!q) {
                dm_free(buf);
                inflateEnd(&z);
                return DM_ERR(DM_ERR_NOMEM, "gunzip: out of memory");
            }
            buf = q;
            cap *= 2;
        }
        uInt in_chunk = left > (1u << 30) ? (1u << 30) : (uInt)left;
        z.avail_in = in_chunk;
        size_t out_room = cap - len > (1u << 30) ? (1u << 30) : cap - len;
        z.next_out = (Bytef *)buf + len;
        z.avail_out = (uInt)out_room;
        int zr = inflate(&z, Z_NO_FLUSH);
        len += out_room - z.avail_out;
        left -= in_chunk - z.avail_in;
        if (zr == Z_STREAM_END) {
            if (left == 0) break;
            /* another gzip member follows (ignore trailing zero padding) */
            size_t k = 0;
            while (k < left && z.next_in[k] == 0) k++;
            if (k == left) break;
            inflateReset(&z);
            continue;
        }
        if (zr == Z_OK) continue;
        if (zr == Z_BUF_ERROR && z.avail_out != 0 && left == 0) {
            snprintf(why, wn, "truncated gzip data after %zu bytes", len);
            bad = 1;
            break;
        }
        if (zr == Z_BUF_ERROR && z.avail_out == 0) continue;
        snprintf(why, wn, "corrupt gzip data after %zu bytes: %s", len, z.msg ? z.msg : "error");
        bad = 1;
        break;
    }
    inflateEnd(&z);
    *out = buf;
    *out_len = len;
    return bad;
}

static int dm_read_any(dm_rd *r, const char *name, const char *data, size_t len, int depth);

static int dm_read_archive(dm_rd *r, const char *name, const char *data, size_t len, int depth)
{
    struct archive *a = archive_read_new();
    if (!a) return DM_ERR(DM_ERR_NOMEM, "libarchive: archive_read_new failed");
    archive_read_support_filter_all(a);
    archive_read_support_format_tar(a);
    archive_read_support_format_gnutar(a);
    int rc = DM_OK;
    char msg[1024];
    if (archive_read_open_memory(a, data, len) != ARCHIVE_OK) {
        snprintf(msg, sizeof(msg), "%s: not a readable archive: %s", name, archive_error_string(a));
        archive_read_free(a);
        return dm_rd_skip(r->opt, r->st, DM_PP_SKIP_CORRUPT_ARCHIVE, DM_ERR_FORMAT, msg);
    }
    dm_sbuf member = {0}, mname = {0};
    struct archive_entry *e;
    for (;;) {
        int ar = archive_read_next_header(a, &e);
        if (ar == ARCHIVE_EOF) break;
        if (ar < ARCHIVE_WARN) {
            snprintf(msg, sizeof(msg), "%s: corrupt archive: %s (rest of the archive skipped)", name,
                     archive_error_string(a));
            rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_CORRUPT_ARCHIVE, DM_ERR_FORMAT, msg);
            break;
        }
        if (archive_entry_filetype(e) != AE_IFREG) continue;
        const char *pn = archive_entry_pathname(e);
        if (!pn) pn = "?";
        member.n = 0;
        char blk[65536];
        la_ssize_t k;
        while ((k = archive_read_data(a, blk, sizeof(blk))) > 0) {
            rc = dm_sbuf_put(&member, blk, (size_t)k);
            if (rc < 0) break;
        }
        if (rc < 0) break;
        if (k < 0) {
            snprintf(msg, sizeof(msg), "%s: member %s: corrupt archive data: %s (rest skipped)", name, pn,
                     archive_error_string(a));
            rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_CORRUPT_ARCHIVE, DM_ERR_FORMAT, msg);
            break;
        }
        mname.n = 0;
        rc = dm_sbuf_put(&mname, name, strlen(name));
        if (rc >= 0) rc = dm_sbuf_put(&mname, "/", 1);
        if (rc >= 0) rc = dm_sbuf_put(&mname, pn, strlen(pn));
        if (rc >= 0) rc = dm_read_any(r, mname.p, member.p ? member.p : "", member.n, depth + 1);
        if (rc < 0) break;
    }
    dm_free(member.p);
    dm_free(mname.p);
    archive_read_free(a);
    return rc;
}

static int dm_read_any(dm_rd *r, const char *name, const char *data, size_t len, int depth)
{
    char msg[1024];
    if (len == 0) {
        snprintf(msg, sizeof(msg), "%s: empty file", name);
        return dm_rd_skip(r->opt, r->st, DM_PP_SKIP_EMPTY_FILE, DM_ERR_FORMAT, msg);
    }
    if (dm_is_archive_name(name) && depth < 4) return dm_read_archive(r, name, data, len, depth);
    if (dm_ends_with(name, ".gz")) {
        char *raw = NULL;
        size_t rl = 0;
        char why[256] = "";
        int g = dm_gunzip(&raw, &rl, data, len, why, sizeof(why));
        if (g < 0) return g;
        if (g > 0) {
            dm_free(raw);
            snprintf(msg, sizeof(msg), "%s: %s (file skipped)", name, why);
            return dm_rd_skip(r->opt, r->st, DM_PP_SKIP_CORRUPT_GZIP, DM_ERR_FORMAT, msg);
        }
        char inner[4096];
        snprintf(inner, sizeof(inner), "%s", name);
        inner[strlen(inner) - 3] = 0;
        r->st->bytes_read += rl;
        int rc;
        if (rl == 0) {
            snprintf(msg, sizeof(msg), "%s: empty file", name);
            rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_EMPTY_FILE, DM_ERR_FORMAT, msg);
        } else {
            int fmt = dm_format_of(inner, r->opt->format);
            rc = fmt == DM_PP_FORMAT_REUTERS ? dm_read_reuters(r, inner, raw, rl)
                 : fmt == DM_PP_FORMAT_JSONL ? dm_read_jsonl(r, inner, raw, rl)
                 : fmt == DM_PP_FORMAT_TSV   ? dm_read_tsv(r, inner, raw, rl)
                                             : dm_read_text(r, inner, raw, rl);
        }
        dm_free(raw);
        return rc;
    }
    r->st->bytes_read += len;
    int fmt = dm_format_of(name, r->opt->format);
    switch (fmt) {
    case DM_PP_FORMAT_REUTERS: return dm_read_reuters(r, name, data, len);
    case DM_PP_FORMAT_JSONL: return dm_read_jsonl(r, name, data, len);
    case DM_PP_FORMAT_TSV: return dm_read_tsv(r, name, data, len);
    default: return dm_read_text(r, name, data, len);
    }
}

int dm_pp_read_buffer(const char *name, const void *data, size_t len, const dm_reader_options *opt,
                      dm_pp_stats *st, dm_doc_sink *sink, void *user)
{
    if (!name || (!data && len) || !opt || !st || !sink)
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_pp_read_buffer: NULL argument");
    dm_rd r;
    r.opt = opt;
    r.st = st;
    r.sink = sink;
    r.user = user;
    dm_dir_label(r.dir_label, sizeof(r.dir_label), name);
    return dm_read_any(&r, name, data ? data : "", len, 0);
}

int dm_pp_read_file(const dm_pp_file *f, const dm_reader_options *opt, dm_pp_stats *st,
                    dm_doc_sink *sink, void *user)
{
    if (!f || !opt || !st || !sink) return DM_ERR(DM_ERR_INVALID_ARG, "dm_pp_read_file: NULL argument");
    char msg[1024];
    FILE *fp = fopen(f->path, "rb");
    if (!fp) {
        int e = errno;
        snprintf(msg, sizeof(msg), "%s: cannot open: %s", f->path, strerror(e));
        return dm_rd_skip(opt, st, DM_PP_SKIP_UNREADABLE, DM_ERR_IO, msg);
    }
    /* read straight into one buffer of the listed size (grown only if the file grew since) */
    dm_sbuf b = {0};
    int rc = dm_sbuf_reserve(&b, (size_t)f->size + 1);
    while (rc >= 0) {
        size_t k;
        if (b.n + 1 < b.cap) {
            k = fread(b.p + b.n, 1, b.cap - 1 - b.n, fp);
            b.n += k;
            b.p[b.n] = 0;
        } else { /* full: the end of the file, or it grew */
            char blk[4096];
            k = fread(blk, 1, sizeof(blk), fp);
            if (k) rc = dm_sbuf_put(&b, blk, k);
        }
        if (k == 0) break;
    }
    int err = ferror(fp);
    fclose(fp);
    if (rc >= 0 && err) {
        dm_free(b.p);
        snprintf(msg, sizeof(msg), "%s: read error", f->path);
        return dm_rd_skip(opt, st, DM_PP_SKIP_UNREADABLE, DM_ERR_IO, msg);
    }
    if (rc < 0) {
        dm_free(b.p);
        return rc;
    }
    st->files_read++;
    dm_rd r;
    r.opt = opt;
    r.st = st;
    r.sink = sink;
    r.user = user;
    dm_dir_label(r.dir_label, sizeof(r.dir_label), f->rel);
    rc = dm_read_any(&r, f->rel, b.p ? b.p : "", b.n, 0);
    dm_free(b.p);
    return rc;
}

/* ------------------------------------------------------------------ listing, split */

void dm_pp_file_list_free(dm_pp_file_list *l)
{
    if (!l) return;
    for (size_t i = 0; i < l->n; i++) {
        dm_free(l->files[i].path);
        dm_free(l->files[i].rel);
    }
    dm_free(l->files);
    memset(l, 0, sizeof(*l));
}

static int dm_list_add(dm_pp_file_list *l, const char *path, const char *rel, uint64_t size)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 64;
        dm_pp_file *q = dm_realloc(l->files, nc * sizeof(*q));
        if (!q) return DM_ERR(DM_ERR_NOMEM, "file list: out of memory");
        l->files = q;
        l->cap = nc;
    }
    dm_pp_file *f = &l->files[l->n];
    f->path = dm_strdup(path);
    f->rel = dm_strdup(rel);
    f->size = size;
    if (!f->path || !f->rel) {
        dm_free(f->path);
        dm_free(f->rel);
        return DM_ERR(DM_ERR_NOMEM, "file list: out of memory");
    }
    l->n++;
    return DM_OK;
}

typedef struct dm_devino {
    dev_t dev;
    ino_t ino;
} dm_devino;

typedef struct dm_walk {
    dm_pp_file_list *l;
    const dm_reader_options *opt;
    dm_pp_stats *st;
    dm_devino *seen;
    size_t n_seen, cap_seen;
} dm_walk;

static int dm_accept(const dm_reader_options *opt, const char *name)
{
    if (opt->format == DM_PP_FORMAT_REUTERS)
        return dm_ends_with(name, ".sgm") || dm_ends_with(name, ".sgm.gz");
    return 1;
}

static int dm_walk_dir(dm_walk *w, const char *path, const char *rel, int depth)
{
    char msg[1024];
    struct stat sb;
    if (stat(path, &sb) != 0) {
        snprintf(msg, sizeof(msg), "%s: %s", path, strerror(errno));
        return dm_rd_skip(w->opt, w->st, DM_PP_SKIP_UNREADABLE, DM_ERR_IO, msg);
    }
    for (size_t i = 0; i < w->n_seen; i++)
        if (w->seen[i].dev == sb.st_dev && w->seen[i].ino == sb.st_ino) {
            snprintf(msg, sizeof(msg), "%s: directory already visited (symbolic link loop)", path);
            return dm_rd_skip(w->opt, w->st, DM_PP_SKIP_SYMLINK_LOOP, DM_ERR_IO, msg);
        }
    if (w->n_seen == w->cap_seen) {
        size_t nc = w->cap_seen ? 2 * w->cap_seen : 64;
        dm_devino *q = dm_realloc(w->seen, nc * sizeof(*q));
        if (!q) return DM_ERR(DM_ERR_NOMEM, "walk: out of memory");
        w->seen = q;
        w->cap_seen = nc;
    }
    w->seen[w->n_seen].dev = sb.st_dev;
    w->seen[w->n_seen].ino = sb.st_ino;
    w->n_seen++;
    DIR *d = opendir(path);
    if (!d) {
        snprintf(msg, sizeof(msg), "%s: cannot open directory: %s", path, strerror(errno));
        if (depth == 0) return DM_ERR(DM_ERR_IO, "%s", msg);
        return dm_rd_skip(w->opt, w->st, DM_PP_SKIP_UNREADABLE, DM_ERR_IO, msg);
    }
    int rc = DM_OK;
    struct dirent *de;
    while (rc >= 0 && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        size_t pl = strlen(path) + strlen(de->d_name) + 2;
        size_t rl = strlen(rel) + strlen(de->d_name) + 2;
        char *cp = dm_malloc(pl), *cr = dm_malloc(rl);
        if (!cp || !cr) {
            dm_free(cp);
            dm_free(cr);
            rc = DM_ERR(DM_ERR_NOMEM, "walk: out of memory");
            break;
        }
        snprintf(cp, pl, "%s/%s", path, de->d_name);
        if (rel[0]) snprintf(cr, rl, "%s/%s", rel, de->d_name);
        else snprintf(cr, rl, "%s", de->d_name);
        struct stat eb;
        if (stat(cp, &eb) != 0) {
            snprintf(msg, sizeof(msg), "%s: %s", cp, strerror(errno));
            rc = dm_rd_skip(w->opt, w->st, DM_PP_SKIP_UNREADABLE, DM_ERR_IO, msg);
        } else if (S_ISDIR(eb.st_mode)) {
            rc = dm_walk_dir(w, cp, cr, depth + 1);
        } else if (S_ISREG(eb.st_mode)) {
            if (dm_accept(w->opt, de->d_name)) rc = dm_list_add(w->l, cp, cr, (uint64_t)eb.st_size);
            else w->st->files_ignored++;
        } else {
            snprintf(msg, sizeof(msg), "%s: not a regular file", cp);
            rc = dm_rd_skip(w->opt, w->st, DM_PP_SKIP_NOT_REGULAR, DM_ERR_IO, msg);
        }
        dm_free(cp);
        dm_free(cr);
    }
    closedir(d);
    return rc;
}

static int dm_file_cmp(const void *a, const void *b)
{
    return strcmp(((const dm_pp_file *)a)->rel, ((const dm_pp_file *)b)->rel);
}

int dm_pp_list_files(dm_pp_file_list *out, const char *root, const dm_reader_options *opt,
                     dm_pp_stats *st)
{
    if (!out || !root || !opt || !st) return DM_ERR(DM_ERR_INVALID_ARG, "dm_pp_list_files: NULL argument");
    memset(out, 0, sizeof(*out));
    struct stat sb;
    if (stat(root, &sb) != 0) return DM_ERR(DM_ERR_IO, "corpus %s: %s", root, strerror(errno));
    int rc;
    if (S_ISDIR(sb.st_mode)) {
        char *r = dm_strdup(root);
        if (!r) return DM_ERR(DM_ERR_NOMEM, "walk: out of memory");
        size_t n = strlen(r);
        while (n > 1 && r[n - 1] == '/') r[--n] = 0;
        dm_walk w = {out, opt, st, NULL, 0, 0};
        rc = dm_walk_dir(&w, r, "", 0);
        dm_free(w.seen);
        dm_free(r);
    } else if (S_ISREG(sb.st_mode)) {
        const char *base = strrchr(root, '/');
        base = base ? base + 1 : root;
        rc = dm_list_add(out, root, base, (uint64_t)sb.st_size);
    } else {
        return DM_ERR(DM_ERR_IO, "corpus %s: not a file or directory", root);
    }
    if (rc < 0) {
        dm_pp_file_list_free(out);
        return rc;
    }
    if (out->n > 1) qsort(out->files, out->n, sizeof(*out->files), dm_file_cmp); /* files is NULL when empty */
    return DM_OK;
}

void dm_pp_split_by_bytes(size_t *begin, size_t *end, const dm_pp_file_list *l, int rank, int size)
{
    uint64_t total = 0;
    for (size_t i = 0; i < l->n; i++) total += l->files[i].size + 1; /* +1: empty files count */
    /* rank r takes the files whose byte midpoint falls in [r, r+1) x total / size */
    size_t b = l->n, e = l->n;
    uint64_t acc = 0;
    int found_b = 0;
    for (size_t i = 0; i < l->n; i++) {
        uint64_t w = l->files[i].size + 1;
        /* owner = floor((acc + w/2) * size / total) */
        long double mid = (long double)acc + (long double)w / 2;
        int owner = (int)(mid * size / (long double)total);
        if (owner >= size) owner = size - 1;
        if (owner == rank && !found_b) {
            b = i;
            found_b = 1;
        }
        if (owner > rank) {
            e = i;
            break;
        }
        acc += w;
    }
    if (!found_b) b = e;
    *begin = b;
    *end = e;
}
