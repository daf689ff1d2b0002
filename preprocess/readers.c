/* Corpus readers: directory trees (sorted, each folder read once, symlink loops told from other
 * second ways to a folder; ids unique over the corpus), .gz (zlib), .bz2/.xz/.zst and
 * archives (libarchive: tar in any of its compressions, zip), JSON Lines (jansson), TSV, plain text
 * and Reuters-21578 SGML; the split of files across ranks by bytes. Reference: none (I/O); each
 * format follows DESIGN.md section 8 and issue 3.
 * Bad input never crashes: it is skipped and counted in dm_pp_stats with a message naming the file
 * by the path as given (and member, line or record: dm_rd.where), or, with strict = 1, returned as
 * DM_ERR_FORMAT / DM_ERR_IO. Among the skips: a file of any format that is not text
 * (dm_binary_kind: compressed data, UTF-16/32 with or without a byte-order mark, binary; not_text),
 * archive members that are symbolic links, FIFOs or devices (not_regular) or that libarchive
 * cannot read (corrupt_archive, that member alone), a Reuters record without its </REUTERS> or
 * with a <TOPICS>, <D>, <TITLE>, <BODY> or <TEXT> left open (bad_sgml), a label holding a comma
 * of its own (bad_json, bad_sgml), trailing garbage after gzip data (corrupt_gzip; the data is
 * read). A UTF-8 byte-order mark at the start of a file is dropped. Every reader is linear in its
 * input. */
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

/* s[0..n) ends with suf? */
static int dm_ends_with_n(const char *s, size_t n, const char *suf)
{
    size_t b = strlen(suf);
    return n >= b && memcmp(s + n - b, suf, b) == 0;
}

static int dm_ends_with(const char *s, const char *suf) { return dm_ends_with_n(s, strlen(s), suf); }

/* A skip, or in strict mode an error with the same message. */
static int dm_rd_skip(const dm_reader_options *opt, dm_pp_stats *st, int reason, int code,
                      const char *msg)
{
    if (opt->strict) {
        /* nothing is skipped under --strict: the message's "what was skipped" goes */
        static const char *const tails[] = {" (file skipped)", " (rest skipped)", ": file skipped",
                                            " (trailing garbage ignored)", " (member skipped)"};
        size_t n = strlen(msg);
        for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
            size_t t = strlen(tails[i]);
            if (n >= t && strcmp(msg + n - t, tails[i]) == 0) {
                n -= t;
                break;
            }
        }
        return DM_ERR(code, "%.*s (--strict)", (int)n, msg);
    }
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

/* Room for element n of the array p of *cap elements of `size` bytes (doubled, from `first`):
 * the array (moved or not), or NULL when out of memory (p left as it is, *cap too). */
static void *dm_grow(void *p, size_t *cap, size_t n, size_t size, size_t first)
{
    if (n < *cap) return p;
    size_t nc = *cap ? 2 * *cap : first;
    void *q = dm_realloc(p, nc * size);
    if (q) *cap = nc;
    return q;
}

/* Open addressing on cap (a power of 2) slots holding a value + 1 (0: empty): v into the first
 * empty slot from hash h. */
static void dm_slots_put(size_t *slot, size_t cap, uint64_t h, size_t v)
{
    size_t j = (size_t)h & (cap - 1);
    while (slot[j]) j = (j + 1) & (cap - 1);
    slot[j] = v;
}

/* Keeps the slots at most half full for one more of n entries: doubled (from `first`) and
 * rehashed, hash(ctx, v) the hash of the entry a slot's v stands for. -1 when out of memory. */
static int dm_slots_grow(size_t **slot, size_t *cap, size_t n, size_t first, uint64_t (*hash)(const void *, size_t),
                         const void *ctx)
{
    if (2 * (n + 1) <= *cap) return 0;
    size_t nc = *cap ? 2 * *cap : first;
    size_t *q = dm_calloc(nc, sizeof(*q));
    if (!q) return -1;
    for (size_t i = 0; i < *cap; i++)
        if ((*slot)[i]) dm_slots_put(q, nc, hash(ctx, (*slot)[i]), (*slot)[i]);
    dm_free(*slot);
    *slot = q;
    *cap = nc;
    return 0;
}

/* Label of a document under --labels dir: first component of rel when it has a folder, whole (an
 * archive member's first folder may be longer than a name on disk: never cut, so that two labels
 * cannot become one). */
static int dm_dir_label(dm_sbuf *out, const char *rel)
{
    const char *slash = strchr(rel, '/');
    out->n = 0;
    return dm_sbuf_put(out, rel, slash ? (size_t)(slash - rel) : 0);
}

/* One read. Ids are formed from the name relative to the corpus root (dm_pp_file.rel, then
 * archive/member, without a compression suffix) or, when set, from id_name: the id another file
 * or member left free for this one (dm_pp_file.id, dm_member_id_unique; the name keeps choosing
 * the format). Messages name the file as the user finds it instead: `where` is the path as
 * opened (dm_pp_file.path, --corpus as given), followed by ": member M" (M the member's path as
 * the archive lists it) for each archive it lies in. The decompressed data of a .gz keeps its
 * file's where (a line number counts its decompressed lines). */
typedef struct dm_rd {
    const dm_reader_options *opt;
    dm_pp_stats *st;
    dm_doc_sink *sink;
    void *user;
    const char *where;
    const char *id_name;   /* NULL: ids from the name */
    const char *dir_label; /* --labels dir: the label of the documents read now */
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

/* Single-file compression, looked through by name: .gz by zlib, the others by libarchive. */
static const char *const dm_zsuffix[] = {".gz", ".bz2", ".xz", ".zst"};

/* Length of name's compression suffix (".gz", ".bz2", ...), 0 if it has none. */
static size_t dm_zsuffix_len(const char *name)
{
    for (size_t i = 0; i < sizeof(dm_zsuffix) / sizeof(dm_zsuffix[0]); i++)
        if (dm_ends_with(name, dm_zsuffix[i])) return strlen(dm_zsuffix[i]);
    return 0;
}

/* The format of a file by its name without a compression suffix (names of any length: archive
 * members may have paths of several KB). */
static int dm_format_of(const char *name, int forced)
{
    if (forced != DM_PP_FORMAT_AUTO) return forced;
    size_t n = strlen(name) - dm_zsuffix_len(name);
    if (dm_ends_with_n(name, n, ".sgm")) return DM_PP_FORMAT_REUTERS;
    if (dm_ends_with_n(name, n, ".jsonl") || dm_ends_with_n(name, n, ".ndjson")) return DM_PP_FORMAT_JSONL;
    if (dm_ends_with_n(name, n, ".tsv")) return DM_PP_FORMAT_TSV;
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

/* Archives libarchive reads (tar with any of its compressions, zip). */
static int dm_is_archive_name(const char *name)
{
    static const char *const suf[] = {".tar",  ".tar.gz", ".tgz",     ".tar.bz2", ".tbz2", ".tbz",
                                      ".tar.xz", ".txz",  ".tar.zst", ".tzst",    ".zip"};
    for (size_t i = 0; i < sizeof(suf) / sizeof(suf[0]); i++)
        if (dm_ends_with(name, suf[i])) return 1;
    return 0;
}

/* Files that the directory walk and an archive take under the format (the others are counted as
 * ignored): Reuters reads *.sgm, compressed or not, and archives. */
static int dm_accept(const dm_reader_options *opt, const char *name)
{
    if (opt->format != DM_PP_FORMAT_REUTERS) return 1;
    return dm_ends_with_n(name, strlen(name) - dm_zsuffix_len(name), ".sgm") || dm_is_archive_name(name);
}

/* Does s[0..n) hold a malformed UTF-8 sequence? (one cut by the end of s is not counted) */
static int dm_utf8_bad(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 0 : c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2
                                 : c >= 0xF0 && c <= 0xF4                   ? 3
                                                                            : 9;
        if (k == 9) return 1;
        for (size_t j = 1; j <= k && i + j < n; j++)
            if ((s[i + j] & 0xC0) != 0x80) return 1;
        i += k + 1;
    }
    return 0;
}

/* UTF-16 or UTF-32 text without a byte-order mark, told by where the NUL bytes of its first 4 KB
 * fall: text of Latin script in UTF-16LE has a NUL at (nearly) every odd offset and at (nearly)
 * no even one, UTF-32LE at offsets 1, 2 and 3 mod 4 and not 0 (BE the mirror images). At least
 * 3/4 of the places of a position that should be NUL must be, at most 1/4 of those that should
 * not, over 4 code units or more of UTF-16 (a stray NUL in UTF-8 text is far from that). Text of
 * other scripts (no NUL bytes) cannot be told this way; it reads as malformed UTF-8. NULL when
 * neither. */
static const char *dm_wide_kind(const unsigned char *s, size_t len)
{
    size_t n = (len < 4096 ? len : 4096) & ~(size_t)3, q = n / 4, z[4] = {0, 0, 0, 0};
    if (q < 2) return NULL;
    for (size_t i = 0; i < n; i++) z[i & 3] += s[i] == 0;
#define DM_HI(c) ((c) * 4 >= 3 * q)
#define DM_LO(c) ((c) * 4 <= q)
    const char *kind = NULL;
    if (DM_LO(z[0]) && DM_HI(z[1]) && DM_HI(z[2]) && DM_HI(z[3]))
        kind = "UTF-32LE text without a byte-order mark (only UTF-8 is read)";
    else if (DM_HI(z[0]) && DM_HI(z[1]) && DM_HI(z[2]) && DM_LO(z[3]))
        kind = "UTF-32BE text without a byte-order mark (only UTF-8 is read)";
    else if (DM_LO(z[0]) && DM_HI(z[1]) && DM_LO(z[2]) && DM_HI(z[3]))
        kind = "UTF-16LE text without a byte-order mark (only UTF-8 is read)";
    else if (DM_HI(z[0]) && DM_HI(z[2]) && DM_LO(z[1]) && DM_LO(z[3]))
        kind = "UTF-16BE text without a byte-order mark (only UTF-8 is read)";
#undef DM_HI
#undef DM_LO
    return kind;
}

/* What the start of a file says it is when it is not text, or NULL: compressed or archive data by
 * its magic number, UTF-16/32 by its byte-order mark or, without one, by its NUL bytes
 * (dm_wide_kind), else NUL bytes together with malformed UTF-8 in the first 4 KB. Either alone is
 * still text: a stray NUL, or Latin-1 text, is read and the normaliser counts and replaces the
 * bytes. */
static const char *dm_binary_kind(const char *data, size_t len)
{
    static const struct {
        const char *magic;
        size_t len, off;
        const char *kind;
    } m[] = {{"\x1f\x8b", 2, 0, "gzip data"},
             {"BZh", 3, 0, "bzip2 data"},
             {"\xfd" "7zXZ\0", 6, 0, "xz data"},
             {"\x28\xb5\x2f\xfd", 4, 0, "zstd data"},
             {"PK\x03\x04", 4, 0, "zip data"},
             {"PK\x05\x06", 4, 0, "zip data"},
             {"7z\xbc\xaf\x27\x1c", 6, 0, "7-zip data"},
             {"ustar", 5, 257, "tar data"},
             {"\xff\xfe", 2, 0, "UTF-16 or UTF-32 text (only UTF-8 is read)"},
             {"\xfe\xff", 2, 0, "UTF-16 text (only UTF-8 is read)"},
             {"\0\0\xfe\xff", 4, 0, "UTF-32 text (only UTF-8 is read)"}};
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
        if (len >= m[i].off + m[i].len && memcmp(data + m[i].off, m[i].magic, m[i].len) == 0 &&
            (i != 1 || (len > 3 && data[3] >= '1' && data[3] <= '9'))) /* BZh1..BZh9 */
            return m[i].kind;
    const char *wide = dm_wide_kind((const unsigned char *)data, len);
    if (wide) return wide;
    size_t n = len < 4096 ? len : 4096;
    if (memchr(data, 0, n) && dm_utf8_bad((const unsigned char *)data, n))
        return "binary data (NUL bytes and malformed UTF-8 in its first 4 KB)";
    return NULL;
}

/* One document per file (dm_read_format has skipped files that are not text). */
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

/* The labels of a JSONL record (its "label", else its "labels") joined by ',' into lab. A string
 * is taken as written: labels joined by commas, as in a TSV line's label field; a number as its
 * JSON text; null or "" as no label; an array as its elements, each one label (null and "" ones
 * are no label). Returns 1 with *why set when the record is to be skipped: an array element that
 * holds a comma (it would read as two labels downstream: every consumer splits at ','), a label
 * or element that is not a string, a number or null, a label holding a NUL (\u0000: ids and labels
 * are C strings); 0, or negative on NOMEM. */
static int dm_json_labels(dm_sbuf *lab, json_t *jl, char *why, size_t wn)
{
    int rc = DM_OK;
    if (!jl || json_is_null(jl)) return DM_OK;
    if (!json_is_array(jl)) {
        size_t n0 = lab->n;
        rc = dm_json_scalar(lab, jl);
        if (rc > 0) snprintf(why, wn, "label is not a string, a number or an array of them");
        else if (rc >= 0 && memchr(lab->p + n0, 0, lab->n - n0)) {
            snprintf(why, wn, "label holds a NUL character");
            rc = 1;
        }
        return rc;
    }
    size_t i;
    json_t *v;
    json_array_foreach(jl, i, v)
    {
        if (json_is_null(v)) continue;
        size_t n0 = lab->n;
        if (n0) rc = dm_sbuf_put(lab, ",", 1);
        size_t s0 = lab->n;
        if (rc >= 0) rc = dm_json_scalar(lab, v);
        if (rc < 0) return rc;
        if (rc > 0) {
            snprintf(why, wn, "label %zu of the array is not a string or a number", i + 1);
            return 1;
        }
        const char *e = lab->p + s0;
        size_t el = lab->n - s0;
        if (memchr(e, 0, el)) {
            snprintf(why, wn, "label %zu of the array holds a NUL character", i + 1);
            return 1;
        }
        if (memchr(e, ',', el)) {
            snprintf(why, wn, "label %zu of the array, \"%.*s\"%s, holds a comma (labels are kept joined "
                     "by commas)", i + 1, el > 60 ? 60 : (int)el, e, el > 60 ? "..." : "");
            return 1;
        }
        if (el == 0) lab->n = n0; /* "": no label, nor its comma */
    }
    return DM_OK;
}

static int dm_read_jsonl(dm_rd *r, const char *name, const char *data, size_t len)
{
    dm_sbuf id = {0}, lab = {0};
    int rc = DM_OK;
    size_t line = 0;
    char msg[1024], why[160];
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
            snprintf(msg, sizeof(msg), "%s:%zu: %s", r->where, line,
                     !o ? err.text : !json_is_object(o) ? "not a JSON object"
                                                       : "no string field \"text\"");
            json_decref(o);
            rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_BAD_JSON, DM_ERR_FORMAT, msg);
            continue;
        }
        id.n = lab.n = 0;
        why[0] = 0;
        json_t *jid = json_object_get(o, "id");
        /* dm_json_scalar: 0 stored, 1 not a scalar (the default id), negative out of memory (an
         * error, never a fallback id or a dropped label) */
        int k = jid ? dm_json_scalar(&id, jid) : 1;
        if (k < 0) rc = k;
        else if (k > 0) {
            id.n = 0;
            snprintf(msg, sizeof(msg), "%s:%zu", name, line);
            rc = dm_sbuf_put(&id, msg, strlen(msg));
        } else if (memchr(id.p, 0, id.n)) {
            snprintf(why, sizeof(why), "id holds a NUL character");
        }
        json_t *jl = json_object_get(o, "label");
        if (!jl) jl = json_object_get(o, "labels");
        if (rc >= 0 && !why[0]) {
            k = dm_json_labels(&lab, jl, why, sizeof(why));
            if (k < 0) rc = k;
        }
        if (rc >= 0 && why[0]) {
            snprintf(msg, sizeof(msg), "%s:%zu: %s", r->where, line, why);
            json_decref(o);
            rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_BAD_JSON, DM_ERR_FORMAT, msg);
            continue;
        }
        if (rc >= 0) rc = dm_sbuf_put(&id, "", 0);
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
    char msg[1024];
    size_t p = 0, b, t;
    while (rc >= 0 && next_line(data, len, &p, &b, &t)) {
        line++;
        if (t > b && data[t - 1] == '\r') t--;
        if (b == t) continue;
        const char *s = data + b;
        const char *t1 = memchr(s, '\t', t - b);
        const char *t2 = t1 ? memchr(t1 + 1, '\t', (size_t)(data + t - t1 - 1)) : NULL;
        if (!t1 || !t2 || t1 == s || memchr(s, 0, (size_t)(t2 - s))) {
            snprintf(msg, sizeof(msg), "%s:%zu: %s", r->where, line,
                     !t1 || !t2 ? "expected id<TAB>label<TAB>text"
                     : t1 == s  ? "empty id (expected id<TAB>label<TAB>text)"
                                : "NUL byte in the id or the label");
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

/* Element <tag...>..</tag> inside [s, s+n): 1 with *out, *out_len its content, 0 when absent, -1
 * when its start tag has no end (a malformed record: said, not dropped in silence). */
static int dm_sgml_elem(const char *s, size_t n, const char *tag, const char **out, size_t *out_len)
{
    char open[64], close[64];
    size_t tl = strlen(tag);
    if (tl + 4 > sizeof(open)) return 0;
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
        if (!p) return 0;
        char c = p + tl + 1 < s + n ? p[tl + 1] : 0;
        if (c == '>' || c == ' ') break; /* <TITLE> not <TITLEX> */
        p++;
    }
    const char *gt = memchr(p, '>', (size_t)(s + n - p));
    if (!gt) return -1;
    const char *c = dm_memfind(gt + 1, (size_t)(s + n - gt - 1), close);
    if (!c) return -1;
    *out = gt + 1;
    *out_len = (size_t)(c - gt - 1);
    return 1;
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
    int no_gt = 0; /* no '>' after here: every later '<' is a plain byte (found once, not per '<') */
    for (size_t i = 0; i < n && rc >= 0;) {
        size_t j = dm_sgml_special(s, i, n);
        if (j > i) {
            rc = dm_sbuf_put(b, s + i, j - i);
            i = j;
            continue;
        }
        if (s[i] == '<') { /* a tag inside text: drop it, keep a separator */
            const char *gt = no_gt ? NULL : memchr(s + i, '>', n - i);
            no_gt = !gt;
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

/* Labels (<D>x</D> inside <TOPICS>; an empty one is no label) and text (TITLE + BODY; records
 * without either, such as TYPE="UNPROC", use all of <TEXT>) of one record's content [s, s+n).
 * Returns 1 with *bad saying why the record is skipped (an element that is not closed, a topic
 * holding a comma: labels are kept joined by commas), 0, or negative on NOMEM. */
static int dm_reuters_record(dm_sbuf *labels, dm_sbuf *text, const char *s, size_t n, const char **bad)
{
    labels->n = text->n = 0;
    int rc = dm_sbuf_put(labels, "", 0);
    if (rc >= 0) rc = dm_sbuf_put(text, "", 0);
    const char *topics = NULL, *title = NULL, *bd = NULL, *tx = NULL, *dv;
    size_t tl = 0, ttl = 0, bl = 0, xl = 0, dl;
    int k = dm_sgml_elem(s, n, "TOPICS", &topics, &tl), kt = 0, kb = 0, kx = 0, comma = 0;
    for (const char *q = topics; k > 0 && rc >= 0;) {
        k = dm_sgml_elem(q, (size_t)(topics + tl - q), "D", &dv, &dl);
        if (k <= 0) break;
        size_t n0 = labels->n;
        if (labels->n) rc = dm_sbuf_put(labels, ",", 1);
        size_t s0 = labels->n;
        if (rc >= 0) rc = dm_sgml_text(labels, dv, dl);
        if (rc >= 0 && memchr(labels->p + s0, ',', labels->n - s0)) comma = 1;
        if (rc >= 0 && labels->n == s0) labels->n = n0; /* <D></D>: no label, nor its comma */
        if (labels->p) labels->p[labels->n] = 0;
        q = dv + dl + 4;
    }
    if (k >= 0) kt = dm_sgml_elem(s, n, "TITLE", &title, &ttl);
    if (k >= 0 && kt >= 0) kb = dm_sgml_elem(s, n, "BODY", &bd, &bl);
    if (k >= 0 && kt >= 0 && kb >= 0 && !title && !bd) kx = dm_sgml_elem(s, n, "TEXT", &tx, &xl);
    *bad = k < 0    ? (topics ? "<D> without its end tag" : "<TOPICS> without its end tag")
           : kt < 0 ? "<TITLE> without its end tag"
           : kb < 0 ? "<BODY> without its end tag"
           : kx < 0 ? "<TEXT> without its end tag"
           : comma  ? "a <D> topic holds a comma (labels are kept joined by commas)"
                    : NULL;
    if (rc < 0 || *bad) return rc < 0 ? rc : 1;
    if (title) rc = dm_sgml_text(text, title, ttl);
    if (rc >= 0 && title && bd) rc = dm_sbuf_put(text, "\n", 1);
    if (rc >= 0 && bd) rc = dm_sgml_text(text, bd, bl);
    if (rc >= 0 && tx) rc = dm_sgml_text(text, tx, xl);
    return rc < 0 ? rc : 0;
}

static int dm_read_reuters(dm_rd *r, const char *name, const char *data, size_t len)
{
    (void)name; /* ids are the NEWIDs */
    dm_sbuf text = {0}, labels = {0};
    int rc = DM_OK;
    size_t rec = 0;
    char msg[1024];
    const char *p = data, *end = data + len;
    while (rc >= 0) {
        const char *o = dm_memfind(p, (size_t)(end - p), "<REUTERS");
        if (!o) break;
        rec++;
        /* a record ends before the next one starts: searching the rest of the file for an end tag
         * that is missing (or written </reuters>) made a file of such records quadratic */
        const char *next = dm_memfind(o + 8, (size_t)(end - o - 8), "<REUTERS");
        const char *lim = next ? next : end;
        const char *gt = memchr(o, '>', (size_t)(lim - o));
        const char *c = gt ? dm_memfind(gt + 1, (size_t)(lim - gt - 1), "</REUTERS>") : NULL;
        if (!c) {
            snprintf(msg, sizeof(msg), "%s: record %zu (byte %zu): no </REUTERS> end tag", r->where, rec,
                     (size_t)(o - data));
            rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_BAD_SGML, DM_ERR_FORMAT, msg);
            if (!next) break;
            p = next;
            continue;
        }
        p = c + 10;
        /* NEWID="n" in the start tag */
        const char *nid = dm_memfind(o, (size_t)(gt - o), "NEWID=\"");
        char id[64] = {0};
        int long_id = 0;
        if (nid) {
            nid += 7;
            const char *q = memchr(nid, '"', (size_t)(gt - nid));
            if (q && q > nid && (size_t)(q - nid) < sizeof(id)) memcpy(id, nid, (size_t)(q - nid));
            long_id = q && (size_t)(q - nid) >= sizeof(id);
        }
        if (!id[0]) {
            snprintf(msg, sizeof(msg), "%s: record %zu (byte %zu): %s", r->where, rec, (size_t)(o - data),
                     long_id ? "NEWID longer than 63 bytes" : "no NEWID attribute");
            rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_BAD_SGML, DM_ERR_FORMAT, msg);
            continue;
        }
        const char *bad = NULL;
        rc = dm_reuters_record(&labels, &text, gt + 1, (size_t)(c - gt - 1), &bad);
        if (rc > 0) {
            snprintf(msg, sizeof(msg), "%s: record %zu (NEWID %s): %s", r->where, rec, id, bad);
            rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_BAD_SGML, DM_ERR_FORMAT, msg);
            continue;
        }
        if (rc >= 0) rc = dm_rd_emit(r, id, labels.p, text.p, text.n);
    }
    if (rc >= 0 && rec == 0) { /* its text would go unread, unsaid */
        snprintf(msg, sizeof(msg), "%s: no <REUTERS> record in it: file skipped", r->where);
        rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_BAD_SGML, DM_ERR_FORMAT, msg);
    }
    dm_free(text.p);
    dm_free(labels.p);
    return rc;
}

/* ------------------------------------------------------------------ gzip, archives */

/* Inflates a gzip buffer (concatenated members allowed, zero bytes after the last one ignored).
 * Returns 1 on corrupt/truncated data (after *out_len good bytes), 2 when bytes that do not start
 * a gzip member follow the last member (trailing garbage: *out_len bytes, all of the data, were
 * decoded; gzip(1) keeps them too and warns), 0 on success, negative on NOMEM; why says what. */
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
            if (left < 2 || z.next_in[0] != 0x1f || z.next_in[1] != 0x8b) {
                snprintf(why, wn, "%zu byte%s of trailing garbage after the gzip data (at byte %zu)", left,
                         left == 1 ? "" : "s", n - left);
                bad = 2;
                break;
            }
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

/* A single .bz2/.xz/.zst file through libarchive's raw format. Returns 1 with why set when the data
 * is not such a stream or is corrupt, 0 on success, negative on NOMEM; *out (dm_malloc'ed or NULL)
 * is the caller's in every case. */
static int dm_unpack_raw(char **out, size_t *out_len, const char *in, size_t n, char *why, size_t wn);

static const char *dm_la_err(struct archive *a)
{
    const char *s = archive_error_string(a);
    return s ? s : "unknown error";
}

/* A reader for an archive: tar in any compression libarchive has, or zip. */
static struct archive *dm_archive_new(void)
{
    struct archive *a = archive_read_new();
    if (!a) return NULL;
    archive_read_support_filter_all(a);
    archive_read_support_format_tar(a);
    archive_read_support_format_zip(a);
    return a;
}

/* Appends the data of the current entry to b: 0, 1 on an archive error that ends the archive
 * (ARCHIVE_FATAL: damaged or cut data), 2 on one that ends this entry only (ARCHIVE_FAILED or
 * WARN: an encrypted zip member, a compression method libarchive lacks; the next header can be
 * read), negative on NOMEM. */
static int dm_archive_data(struct archive *a, dm_sbuf *b)
{
    char blk[65536];
    la_ssize_t k;
    while ((k = archive_read_data(a, blk, sizeof(blk))) > 0) DM_TRY(dm_sbuf_put(b, blk, (size_t)k));
    return k == ARCHIVE_FATAL ? 1 : k < 0 ? 2 : DM_OK;
}

static int dm_unpack_raw(char **out, size_t *out_len, const char *in, size_t n, char *why, size_t wn)
{
    dm_sbuf b = {0};
    int rc = 1;
    struct archive_entry *e;
    struct archive *a = archive_read_new();
    if (!a) return DM_ERR(DM_ERR_NOMEM, "libarchive: archive_read_new failed");
    archive_read_support_filter_all(a);
    archive_read_support_format_raw(a);
    if (archive_read_open_memory(a, in, n) != ARCHIVE_OK || archive_read_next_header(a, &e) < ARCHIVE_WARN)
        snprintf(why, wn, "not readable: %s", dm_la_err(a));
    else if (archive_filter_code(a, 0) == ARCHIVE_FILTER_NONE) /* raw takes any bytes as they are */
        snprintf(why, wn, "not compressed data (bzip2, xz or zstd)");
    else if ((rc = dm_archive_data(a, &b)) > 0) {
        snprintf(why, wn, "corrupt %s data after %zu bytes: %s", archive_filter_name(a, 0), b.n,
                 dm_la_err(a));
        rc = 1;
    }
    archive_read_free(a);
    *out = b.p;
    *out_len = b.n;
    return rc;
}

/* Hard links in an archive. tar stores a file's data once, under its first name, and each other
 * name as a link to it without data; the directory walk reads every name, so the archive reader
 * keeps the data of link targets (theirs only) for the links after them. The table is built when
 * the first link without data is met, by two more passes over the archive: the targets of all its
 * links, then their data up to that link; the main pass keeps the data of later targets. */
typedef struct dm_link {
    char *name; /* target path as the links give it, cleaned as dm_member_id does */
    char *data; /* its data, once seen (have) */
    size_t len;
    int have;
} dm_link;

typedef struct dm_links {
    dm_link *v; /* sorted by name */
    size_t n, cap;
    int built;
} dm_links;

static int dm_link_cmp(const void *a, const void *b)
{
    return strcmp(((const dm_link *)a)->name, ((const dm_link *)b)->name);
}

static int dm_member_id(dm_sbuf *b, const char *pn);

/* The entry of the member path name (compared as dm_member_id cleans paths: "./a.txt" and "a.txt"
 * name one file, as tar extracts them), or NULL (also when out of memory: the link then reads as
 * one whose target the archive does not hold, a counted skip). */
static dm_link *dm_links_find(const dm_links *l, const char *name)
{
    if (!l->n) return NULL;
    dm_sbuf c = {0};
    dm_link *t = NULL;
    if (dm_member_id(&c, name) >= 0) {
        dm_link key = {c.p, NULL, 0, 0};
        t = bsearch(&key, l->v, l->n, sizeof(*l->v), dm_link_cmp);
    }
    dm_free(c.p);
    return t;
}

static void dm_links_free(dm_links *l)
{
    for (size_t i = 0; i < l->n; i++) {
        dm_free(l->v[i].name);
        dm_free(l->v[i].data);
    }
    dm_free(l->v);
    memset(l, 0, sizeof(*l));
}

/* t's data becomes a copy of data[0..len) (the latest entry of a name wins, as in tar). */
static int dm_link_keep(dm_link *t, const char *data, size_t len)
{
    char *q = dm_malloc(len + 1);
    if (!q) return DM_ERR(DM_ERR_NOMEM, "archive: out of memory (%zu bytes)", len + 1);
    if (len) memcpy(q, data, len);
    dm_free(t->data);
    t->data = q;
    t->len = len;
    t->have = 1;
    return DM_OK;
}

static int dm_links_add(dm_links *l, const char *name)
{
    dm_link *q = dm_grow(l->v, &l->cap, l->n, sizeof(*q), 16);
    if (!q) return DM_ERR(DM_ERR_NOMEM, "archive: out of memory");
    l->v = q;
    dm_link *t = &l->v[l->n];
    memset(t, 0, sizeof(*t));
    dm_sbuf c = {0};
    int rc = dm_member_id(&c, name); /* the cleaned path (dm_links_find) */
    if (rc < 0) {
        dm_free(c.p);
        return rc;
    }
    t->name = c.p;
    l->n++;
    return DM_OK;
}

/* The targets of every link of the archive data[0..len), sorted, each once. */
static int dm_links_targets(dm_links *l, const char *data, size_t len)
{
    struct archive *a = dm_archive_new();
    if (!a) return DM_ERR(DM_ERR_NOMEM, "libarchive: archive_read_new failed");
    int rc = DM_OK;
    struct archive_entry *e;
    if (archive_read_open_memory(a, data, len) == ARCHIVE_OK)
        while (rc >= 0 && archive_read_next_header(a, &e) >= ARCHIVE_WARN) /* damage: the main pass says */
            if (archive_entry_hardlink(e)) rc = dm_links_add(l, archive_entry_hardlink(e));
    archive_read_free(a);
    if (rc < 0) return rc;
    if (l->n > 1) qsort(l->v, l->n, sizeof(*l->v), dm_link_cmp);
    size_t w = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (w && strcmp(l->v[w - 1].name, l->v[i].name) == 0) dm_free(l->v[i].name);
        else l->v[w++] = l->v[i];
    }
    l->n = w;
    return DM_OK;
}

/* Builds l (see dm_links) when the main pass is at entry `upto`. */
static int dm_links_build(dm_links *l, const char *data, size_t len, size_t upto)
{
    l->built = 1;
    DM_TRY(dm_links_targets(l, data, len));
    struct archive *a = dm_archive_new();
    if (!a) return DM_ERR(DM_ERR_NOMEM, "libarchive: archive_read_new failed");
    int rc = DM_OK;
    dm_sbuf b = {0};
    struct archive_entry *e;
    if (archive_read_open_memory(a, data, len) == ARCHIVE_OK)
        for (size_t i = 0; rc >= 0 && i < upto && archive_read_next_header(a, &e) >= ARCHIVE_WARN; i++) {
            dm_link *t = dm_links_find(l, archive_entry_pathname(e) ? archive_entry_pathname(e) : "");
            const char *hl = archive_entry_hardlink(e);
            if (!t || (!hl && archive_entry_filetype(e) != AE_IFREG)) continue;
            b.n = 0;
            rc = dm_archive_data(a, &b);
            if (rc == 2) { /* an unreadable member: its links say so in the main pass */
                rc = DM_OK;
                continue;
            }
            if (rc > 0) break;
            dm_link *s = hl && b.n == 0 ? dm_links_find(l, hl) : NULL; /* a link to a link */
            if (rc >= 0 && s && s->have) rc = dm_link_keep(t, s->data, s->len);
            else if (rc >= 0 && !s) rc = dm_link_keep(t, b.p ? b.p : "", b.n);
        }
    dm_free(b.p);
    archive_read_free(a);
    return rc < 0 ? rc : DM_OK;
}

/* The data that a hard link without data of its own reads: its target's, from l (built at the
 * archive's first such link, entry `index`). Returns 1 when the archive does not hold the target
 * before the link. */
static int dm_link_data(dm_links *l, const char *data, size_t len, size_t index, const char *hl,
                        const char **src, size_t *n)
{
    if (!l->built) DM_TRY(dm_links_build(l, data, len, index));
    const dm_link *t = dm_links_find(l, hl);
    if (!t || !t->have) return 1;
    *src = t->data;
    *n = t->len;
    return DM_OK;
}

/* A member's path as its id takes it: the components of pn without empty and "." ones, joined by
 * '/' ("./a.txt", "/a.txt", "a//b/./c" -> "a.txt", "a.txt", "a/b/c"; ".." is kept as written), so
 * that `tar czf x.tgz -C dir .` gives the ids of `tar czf x.tgz -C dir a.txt ...`. A path of no
 * other component (".") stays as it is. */
static int dm_member_id(dm_sbuf *b, const char *pn)
{
    b->n = 0;
    int rc = dm_sbuf_put(b, "", 0);
    for (const char *p = pn; rc >= 0 && *p;) {
        size_t k = strcspn(p, "/");
        if (k && !(k == 1 && p[0] == '.')) {
            if (b->n) rc = dm_sbuf_put(b, "/", 1);
            if (rc >= 0) rc = dm_sbuf_put(b, p, k);
        }
        p += k;
        if (*p == '/') p++;
    }
    if (rc >= 0 && b->n == 0) rc = dm_sbuf_put(b, pn, strlen(pn));
    return rc;
}

/* The member ids an archive has given (open addressing on FNV-1a; names kept NUL-separated in
 * bytes, each after a size_t: the first "#i" suffix dm_member_id_unique may still find free for
 * it; slots hold the name's offset + 1). */
typedef struct dm_nameset {
    size_t *slot;
    size_t cap, n;
    dm_sbuf bytes;
} dm_nameset;

static uint64_t dm_name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Adds name: 0 when added, 1 when it was there, negative on NOMEM; *at (unless at is NULL): the
 * name's offset in bytes. */
/* The hash of the name a slot's v (offset + 1) stands for. */
static uint64_t dm_nameset_slot_hash(const void *ns, size_t v)
{
    return dm_name_hash(((const dm_nameset *)ns)->bytes.p + v - 1);
}

static int dm_nameset_add(dm_nameset *ns, const char *name, size_t *at)
{
    if (dm_slots_grow(&ns->slot, &ns->cap, ns->n, 64, dm_nameset_slot_hash, ns) < 0)
        return DM_ERR(DM_ERR_NOMEM, "archive: out of memory");
    size_t j = dm_name_hash(name) & (ns->cap - 1);
    for (; ns->slot[j]; j = (j + 1) & (ns->cap - 1))
        if (strcmp(ns->bytes.p + ns->slot[j] - 1, name) == 0) {
            if (at) *at = ns->slot[j] - 1;
            return 1;
        }
    size_t next = 2;
    DM_TRY(dm_sbuf_put(&ns->bytes, (const char *)&next, sizeof next));
    size_t off = ns->bytes.n + 1;
    DM_TRY(dm_sbuf_put(&ns->bytes, name, strlen(name) + 1)); /* with its NUL */
    ns->slot[j] = off;
    ns->n++;
    if (at) *at = off - 1;
    return DM_OK;
}

static void dm_nameset_free(dm_nameset *ns)
{
    dm_free(ns->slot);
    dm_free(ns->bytes.p);
    memset(ns, 0, sizeof(*ns));
}

/* The id of a member (mid: dm_member_id) within its archive, unique among those the archive gave
 * before, into out: the id a file of its path gives (a compression suffix dropped: "a.txt.gz" ->
 * "a.txt") when that is free; else its path with the suffix ("a.txt.gz" after "a.txt"); else that
 * path with "#2", "#3", ... appended, the first of these free (the same path twice, "./a" after
 * "a"), searched from the taken name's counter (linear in the members however many repeat). The
 * member's own name keeps choosing its format. */
static int dm_member_id_unique(dm_nameset *ns, const dm_sbuf *mid, dm_sbuf *out)
{
    size_t z = dm_is_archive_name(mid->p) ? 0 : dm_zsuffix_len(mid->p), at = 0;
    out->n = 0;
    DM_TRY(dm_sbuf_put(out, mid->p, mid->n - z));
    int k = dm_nameset_add(ns, out->p, &at);
    if (k > 0 && z) {
        out->n = 0;
        DM_TRY(dm_sbuf_put(out, mid->p, mid->n));
        k = dm_nameset_add(ns, out->p, &at);
    }
    if (k <= 0) return k;
    size_t base = out->n, i;
    memcpy(&i, ns->bytes.p + at - sizeof i, sizeof i); /* the first suffix that may be free */
    for (; k > 0; i++) {
        char sfx[32];
        snprintf(sfx, sizeof(sfx), "#%zu", i);
        out->n = base;
        DM_TRY(dm_sbuf_put(out, sfx, strlen(sfx)));
        k = dm_nameset_add(ns, out->p, NULL);
    }
    if (k == 0) memcpy(ns->bytes.p + at - sizeof i, &i, sizeof i); /* bytes may have moved: at has not */
    return k;
}

static const char *dm_entry_kind(unsigned type)
{
    switch (type) {
    case AE_IFLNK: return "symbolic link";
    case AE_IFIFO: return "FIFO";
    case AE_IFCHR: return "character device";
    case AE_IFBLK: return "block device";
    case AE_IFSOCK: return "socket";
    default: return "special file";
    }
}

static int dm_read_any(dm_rd *r, const char *name, const char *data, size_t len, int depth);

/* The members of an archive, each read as a file named archive/member (member: dm_member_id,
 * made unique by dm_member_id_unique); messages name it "where: member PATH" with PATH as the
 * archive lists it. Directories are passed over; hard links read their target's data (dm_links);
 * symbolic links, FIFOs and devices are skipped (not_regular). With --labels dir, an archive
 * outside any folder of the corpus takes each member's first folder as its label, as if the
 * archive were the corpus root. */
static int dm_read_archive(dm_rd *r, const char *name, const char *data, size_t len, int depth)
{
    struct archive *a = dm_archive_new();
    if (!a) return DM_ERR(DM_ERR_NOMEM, "libarchive: archive_read_new failed");
    int rc = DM_OK;
    char msg[1024];
    const char *where = r->where;
    if (archive_read_open_memory(a, data, len) != ARCHIVE_OK) {
        snprintf(msg, sizeof(msg), "%s: not a readable archive: %s", where, dm_la_err(a));
        archive_read_free(a);
        return dm_rd_skip(r->opt, r->st, DM_PP_SKIP_CORRUPT_ARCHIVE, DM_ERR_FORMAT, msg);
    }
    dm_sbuf member = {0}, mname = {0}, mid = {0}, mwhere = {0}, muid = {0}, midn = {0}, mlabel = {0};
    dm_nameset ids = {0};
    dm_links links = {0};
    const char *label = r->dir_label, *id_name = r->id_name;
    const char *prefix = id_name ? id_name : name; /* of the members' ids */
    int member_labels = r->opt->labels == DM_PP_LABELS_DIR && label[0] == 0;
    struct archive_entry *e;
    for (size_t index = 0; rc >= 0; index++) {
        int ar = archive_read_next_header(a, &e);
        if (ar == ARCHIVE_EOF) break;
        if (ar < ARCHIVE_WARN) {
            snprintf(msg, sizeof(msg), "%s: corrupt archive: %s (rest of the archive skipped)", where,
                     dm_la_err(a));
            rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_CORRUPT_ARCHIVE, DM_ERR_FORMAT, msg);
            break;
        }
        const char *pn = archive_entry_pathname(e);
        if (!pn) pn = "?";
        const char *hl = archive_entry_hardlink(e); /* filetype 0 */
        unsigned type = archive_entry_filetype(e);
        if (type == AE_IFDIR) continue;
        if (!hl && type != AE_IFREG) {
            const char *to = type == AE_IFLNK ? archive_entry_symlink(e) : NULL;
            snprintf(msg, sizeof(msg), "%s: member %s: %s%s%s, not read", where, pn, dm_entry_kind(type),
                     to ? " to " : "", to ? to : "");
            rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_NOT_REGULAR, DM_ERR_FORMAT, msg);
            continue;
        }
        int want = dm_accept(r->opt, pn);
        dm_link *keep = dm_links_find(&links, pn);
        if (!want && !keep) {
            r->st->files_ignored++;
            continue;
        }
        member.n = 0;
        rc = dm_archive_data(a, &member);
        if (rc == 2) { /* this member only: the others are read */
            snprintf(msg, sizeof(msg), "%s: member %s: cannot read its data: %s (member skipped)", where, pn,
                     dm_la_err(a));
            rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_CORRUPT_ARCHIVE, DM_ERR_FORMAT, msg);
            continue;
        }
        if (rc > 0) {
            snprintf(msg, sizeof(msg), "%s: member %s: corrupt archive data: %s (rest skipped)", where, pn,
                     dm_la_err(a));
            rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_CORRUPT_ARCHIVE, DM_ERR_FORMAT, msg);
            break;
        }
        if (rc < 0) break;
        const char *src = member.p ? member.p : "";
        size_t n = member.n;
        if (hl && n == 0) {
            rc = dm_link_data(&links, data, len, index, hl, &src, &n);
            if (rc > 0) {
                snprintf(msg, sizeof(msg), "%s: member %s: hard link to %s, which the archive does not hold "
                         "before it: not read", where, pn, hl);
                rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_CORRUPT_ARCHIVE, DM_ERR_FORMAT, msg);
                continue;
            }
            keep = dm_links_find(&links, pn); /* the table may be new */
        }
        if (rc >= 0 && keep) rc = dm_link_keep(keep, src, n);
        if (rc >= 0 && keep) src = keep->data; /* the old copy may have been src */
        if (rc < 0) break;
        if (!want) {
            r->st->files_ignored++;
            continue;
        }
        rc = dm_member_id(&mid, pn);
        if (rc >= 0 && member_labels) {
            rc = dm_dir_label(&mlabel, mid.p);
            r->dir_label = mlabel.p;
        }
        if (rc >= 0) rc = dm_member_id_unique(&ids, &mid, &muid);
        mname.n = mwhere.n = midn.n = 0;
        if (rc >= 0) rc = dm_sbuf_put(&mname, name, strlen(name));
        if (rc >= 0) rc = dm_sbuf_put(&mname, "/", 1);
        if (rc >= 0) rc = dm_sbuf_put(&mname, mid.p, mid.n);
        if (rc >= 0) rc = dm_sbuf_put(&midn, prefix, strlen(prefix));
        if (rc >= 0) rc = dm_sbuf_put(&midn, "/", 1);
        if (rc >= 0) rc = dm_sbuf_put(&midn, muid.p, muid.n);
        if (rc >= 0) rc = dm_sbuf_put(&mwhere, where, strlen(where));
        if (rc >= 0) rc = dm_sbuf_put(&mwhere, ": member ", 9);
        if (rc >= 0) rc = dm_sbuf_put(&mwhere, pn, strlen(pn));
        r->where = mwhere.p;
        r->id_name = midn.p;
        if (rc >= 0) rc = dm_read_any(r, mname.p, src, n, depth + 1);
        r->where = where;
        r->id_name = id_name;
    }
    r->dir_label = label;
    dm_links_free(&links);
    dm_nameset_free(&ids);
    dm_free(member.p);
    dm_free(mname.p);
    dm_free(mid.p);
    dm_free(mwhere.p);
    dm_free(muid.p);
    dm_free(midn.p);
    dm_free(mlabel.p);
    archive_read_free(a);
    return rc;
}

/* One file's bytes in the format of its name (ids from r->id_name when set, else from the name);
 * a UTF-8 byte-order mark at the start is not text.
 * A file that is not text (dm_binary_kind: compressed or archive data, UTF-16/32, binary) is
 * skipped as not_text whatever its format: read as JSONL, TSV or SGML it would give a bad line
 * each, documents of garbage, or nothing at all. */
static int dm_read_format(dm_rd *r, const char *name, const char *data, size_t len)
{
    char msg[1024];
    if (len >= 3 && memcmp(data, "\xef\xbb\xbf", 3) == 0) {
        data += 3;
        len -= 3;
        if (len == 0) {
            snprintf(msg, sizeof(msg), "%s: empty file (a byte-order mark only)", r->where);
            return dm_rd_skip(r->opt, r->st, DM_PP_SKIP_EMPTY_FILE, DM_ERR_FORMAT, msg);
        }
    }
    const char *kind = dm_binary_kind(data, len);
    if (kind) {
        snprintf(msg, sizeof(msg), "%s: %s, not text: file skipped", r->where, kind);
        return dm_rd_skip(r->opt, r->st, DM_PP_SKIP_NOT_TEXT, DM_ERR_FORMAT, msg);
    }
    const char *id = r->id_name ? r->id_name : name; /* what the readers form ids from */
    switch (dm_format_of(name, r->opt->format)) {
    case DM_PP_FORMAT_REUTERS: return dm_read_reuters(r, id, data, len);
    case DM_PP_FORMAT_JSONL: return dm_read_jsonl(r, id, data, len);
    case DM_PP_FORMAT_TSV: return dm_read_tsv(r, id, data, len);
    default: return dm_read_text(r, id, data, len);
    }
}

/* A .gz (zlib) or .bz2/.xz/.zst (libarchive) file: its data read as the file named without the
 * suffix. Corrupt data skips the file; trailing garbage after the last gzip member is counted as
 * corrupt_gzip and the data before it is read (as gzip(1) does). */
static int dm_read_unpacked(dm_rd *r, const char *name, const char *data, size_t len)
{
    char msg[1024], why[256] = "";
    char *raw = NULL;
    size_t rl = 0;
    int gz = dm_ends_with(name, ".gz");
    int g = gz ? dm_gunzip(&raw, &rl, data, len, why, sizeof(why))
               : dm_unpack_raw(&raw, &rl, data, len, why, sizeof(why));
    if (g == 2) { /* said first, so that --strict reads none of it */
        snprintf(msg, sizeof(msg), "%s: %s (trailing garbage ignored)", r->where, why);
        int rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_CORRUPT_GZIP, DM_ERR_FORMAT, msg);
        if (rc < 0) {
            dm_free(raw);
            return rc;
        }
    } else if (g != 0) {
        dm_free(raw);
        if (g < 0) return g;
        snprintf(msg, sizeof(msg), "%s: %s (file skipped)", r->where, why);
        return dm_rd_skip(r->opt, r->st, gz ? DM_PP_SKIP_CORRUPT_GZIP : DM_PP_SKIP_CORRUPT_ARCHIVE,
                          DM_ERR_FORMAT, msg);
    }
    char *inner = dm_strdup(name);
    if (!inner) {
        dm_free(raw);
        return DM_ERR(DM_ERR_NOMEM, "reader: out of memory");
    }
    inner[strlen(inner) - dm_zsuffix_len(inner)] = 0;
    r->st->bytes_read += rl;
    int rc;
    if (rl == 0) {
        snprintf(msg, sizeof(msg), "%s: empty file", r->where);
        rc = dm_rd_skip(r->opt, r->st, DM_PP_SKIP_EMPTY_FILE, DM_ERR_FORMAT, msg);
    } else {
        rc = dm_read_format(r, inner, raw, rl);
    }
    dm_free(inner);
    dm_free(raw);
    return rc;
}

static int dm_read_any(dm_rd *r, const char *name, const char *data, size_t len, int depth)
{
    char msg[1024];
    if (r->opt->labels == DM_PP_LABELS_DIR && r->dir_label && strchr(r->dir_label, ',')) {
        /* every consumer splits labels at ',': the folder would read as two labels */
        snprintf(msg, sizeof(msg), "%s: --labels dir: its folder \"%.120s\" holds a comma (labels are kept joined "
                 "by commas): file skipped", r->where, r->dir_label);
        return dm_rd_skip(r->opt, r->st, DM_PP_SKIP_BAD_LABEL, DM_ERR_FORMAT, msg);
    }
    if (len == 0) {
        snprintf(msg, sizeof(msg), "%s: empty file", r->where);
        return dm_rd_skip(r->opt, r->st, DM_PP_SKIP_EMPTY_FILE, DM_ERR_FORMAT, msg);
    }
    if (dm_is_archive_name(name)) {
        if (depth < 4) return dm_read_archive(r, name, data, len, depth);
        snprintf(msg, sizeof(msg), "%s: archive inside 4 others: not read", r->where);
        return dm_rd_skip(r->opt, r->st, DM_PP_SKIP_CORRUPT_ARCHIVE, DM_ERR_FORMAT, msg);
    }
    if (dm_zsuffix_len(name)) return dm_read_unpacked(r, name, data, len);
    r->st->bytes_read += len;
    return dm_read_format(r, name, data, len);
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
    r.where = name;
    r.id_name = NULL;
    dm_sbuf label = {0};
    int rc = opt->labels == DM_PP_LABELS_DIR ? dm_dir_label(&label, name) : DM_OK;
    r.dir_label = label.p ? label.p : "";
    if (rc >= 0) rc = dm_read_any(&r, name, data ? data : "", len, 0);
    dm_free(label.p);
    return rc;
}

int dm_pp_read_file(const dm_pp_file *f, const dm_reader_options *opt, dm_pp_stats *st,
                    dm_doc_sink *sink, void *user)
{
    if (!f || !opt || !st || !sink) return DM_ERR(DM_ERR_INVALID_ARG, "dm_pp_read_file: NULL argument");
    char msg[1024];
    /* a file the listing saw regular but replaced since by a FIFO is skipped, not waited on
     * (this rank would block, and every other one with it) */
    struct stat now;
    if (stat(f->path, &now) == 0 && !S_ISREG(now.st_mode)) {
        snprintf(msg, sizeof(msg), "%s: not a regular file any more", f->path);
        return dm_rd_skip(opt, st, DM_PP_SKIP_NOT_REGULAR, DM_ERR_IO, msg);
    }
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
    r.where = f->path;
    r.id_name = f->id;
    dm_sbuf label = {0};
    if (opt->labels == DM_PP_LABELS_DIR) rc = dm_dir_label(&label, f->rel);
    r.dir_label = label.p ? label.p : "";
    if (rc >= 0) rc = dm_read_any(&r, f->rel, b.p ? b.p : "", b.n, 0);
    dm_free(label.p);
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
        dm_free(l->files[i].id);
    }
    dm_free(l->files);
    memset(l, 0, sizeof(*l));
}

static int dm_list_add(dm_pp_file_list *l, const char *path, const char *rel, uint64_t size)
{
    dm_pp_file *q = dm_grow(l->files, &l->cap, l->n, sizeof(*q), 64);
    if (!q) return DM_ERR(DM_ERR_NOMEM, "file list: out of memory");
    l->files = q;
    dm_pp_file *f = &l->files[l->n];
    f->path = dm_strdup(path);
    f->rel = dm_strdup(rel);
    f->size = size;
    f->id = NULL;
    if (!f->path || !f->rel) {
        dm_free(f->path);
        dm_free(f->rel);
        return DM_ERR(DM_ERR_NOMEM, "file list: out of memory");
    }
    l->n++;
    return DM_OK;
}

/* A folder the walk has read: (st_dev, st_ino), the folder it was reached from (its index, or
 * DM_WALK_NONE for the root) and its path as opened (offset in dm_walk.paths, for messages). */
#define DM_WALK_NONE ((size_t)-1)
typedef struct dm_wdir {
    dev_t dev;
    ino_t ino;
    size_t from, path;
} dm_wdir;

/* A symbolic link to a folder, followed after the folders reached without one. */
typedef struct dm_wlink {
    char *path, *rel;
    size_t from; /* the folder holding it */
} dm_wlink;

/* The walk's state: the folders read (hashed by (st_dev, st_ino), open addressing, slots hold
 * index + 1) and the links to folders left for later (a queue). */
typedef struct dm_walk {
    dm_pp_file_list *l;
    const dm_reader_options *opt;
    dm_pp_stats *st;
    dm_wdir *dirs;
    size_t n_dirs, cap_dirs;
    size_t *slot;
    size_t cap_slot;
    dm_sbuf paths;
    dm_wlink *links;
    size_t n_links, cap_links;
} dm_walk;

static size_t dm_devino_hash(dev_t dev, ino_t ino)
{
    uint64_t h = (uint64_t)ino * 0x9E3779B97F4A7C15ull ^ ((uint64_t)dev + 0x632BE59BD9B4E019ull);
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    return (size_t)h;
}

/* The index of the folder (dev, ino) read before, or DM_WALK_NONE. */
static size_t dm_walk_find(const dm_walk *w, dev_t dev, ino_t ino)
{
    if (!w->cap_slot) return DM_WALK_NONE;
    for (size_t j = dm_devino_hash(dev, ino) & (w->cap_slot - 1); w->slot[j]; j = (j + 1) & (w->cap_slot - 1)) {
        const dm_wdir *d = &w->dirs[w->slot[j] - 1];
        if (d->dev == dev && d->ino == ino) return w->slot[j] - 1;
    }
    return DM_WALK_NONE;
}

/* The hash of the folder a slot's v (index + 1) stands for. */
static uint64_t dm_walk_slot_hash(const void *w, size_t v)
{
    const dm_wdir *d = &((const dm_walk *)w)->dirs[v - 1];
    return dm_devino_hash(d->dev, d->ino);
}

/* Records the folder (dev, ino) at path, reached from folder `from`. */
static int dm_walk_add(dm_walk *w, dev_t dev, ino_t ino, size_t from, const char *path)
{
    dm_wdir *q = dm_grow(w->dirs, &w->cap_dirs, w->n_dirs, sizeof(*q), 64);
    if (!q) return DM_ERR(DM_ERR_NOMEM, "walk: out of memory");
    w->dirs = q;
    if (dm_slots_grow(&w->slot, &w->cap_slot, w->n_dirs, 128, dm_walk_slot_hash, w) < 0)
        return DM_ERR(DM_ERR_NOMEM, "walk: out of memory");
    size_t off = w->paths.n;
    DM_TRY(dm_sbuf_put(&w->paths, path, strlen(path) + 1)); /* with its NUL */
    dm_wdir *d = &w->dirs[w->n_dirs];
    d->dev = dev;
    d->ino = ino;
    d->from = from;
    d->path = off;
    dm_slots_put(w->slot, w->cap_slot, dm_devino_hash(dev, ino), ++w->n_dirs);
    return DM_OK;
}

static int dm_walk_defer(dm_walk *w, const char *path, const char *rel, size_t from)
{
    dm_wlink *q = dm_grow(w->links, &w->cap_links, w->n_links, sizeof(*q), 16);
    if (!q) return DM_ERR(DM_ERR_NOMEM, "walk: out of memory");
    w->links = q;
    dm_wlink *k = &w->links[w->n_links];
    k->path = dm_strdup(path);
    k->rel = dm_strdup(rel);
    k->from = from;
    if (!k->path || !k->rel) {
        dm_free(k->path);
        dm_free(k->rel);
        return DM_ERR(DM_ERR_NOMEM, "walk: out of memory");
    }
    w->n_links++;
    return DM_OK;
}

static void dm_walk_free(dm_walk *w)
{
    for (size_t i = 0; i < w->n_links; i++) {
        dm_free(w->links[i].path);
        dm_free(w->links[i].rel);
    }
    dm_free(w->links);
    dm_free(w->dirs);
    dm_free(w->slot);
    dm_free(w->paths.p);
}

static int dm_name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The names in folder d but hidden ones (".name"), sorted, into *names[*n] (dm_malloc'ed); errno
 * of a failed readdir into *err (0 when none: the names read before it are kept). */
static int dm_walk_names(DIR *d, char ***names, size_t *n, int *err)
{
    size_t cap = 0;
    *names = NULL;
    *n = 0;
    struct dirent *de;
    int rc = DM_OK;
    while (rc >= 0 && (errno = 0, de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char **q = dm_grow(*names, &cap, *n, sizeof(*q), 16);
        if (!q) {
            rc = DM_ERR(DM_ERR_NOMEM, "walk: out of memory");
            break;
        }
        *names = q;
        if (!((*names)[*n] = dm_strdup(de->d_name))) rc = DM_ERR(DM_ERR_NOMEM, "walk: out of memory");
        else (*n)++;
    }
    *err = rc >= 0 && !de ? errno : 0;
    if (rc >= 0 && *n > 1) qsort(*names, *n, sizeof(**names), dm_name_cmp);
    return rc;
}

/* Reads folder path (rel: its path relative to the root), reached from folder `from`: files are
 * listed and folders walked at once, links to folders left for later (dm_walk_defer), so that a
 * folder reached both ways keeps its own path. A folder read before is not read again: a loop when
 * it holds the way to it (it is `from` or a folder `from` was reached from), else a second way to
 * it. Linear in the folders and their entries (a loop check walks up the folders above the link,
 * fewer than the components of its path). */
static int dm_walk_dir(dm_walk *w, const char *path, const char *rel, size_t from, int depth)
{
    char msg[1024];
    struct stat sb;
    if (stat(path, &sb) != 0) {
        snprintf(msg, sizeof(msg), "%s: %s", path, strerror(errno));
        return dm_rd_skip(w->opt, w->st, DM_PP_SKIP_UNREADABLE, DM_ERR_IO, msg);
    }
    size_t seen = dm_walk_find(w, sb.st_dev, sb.st_ino);
    if (seen != DM_WALK_NONE) {
        size_t a = from;
        while (a != DM_WALK_NONE && a != seen) a = w->dirs[a].from;
        const char *first = w->paths.p + w->dirs[seen].path;
        if (a == seen) {
            snprintf(msg, sizeof(msg), "%s: symbolic link loop: leads back to %s, which holds it (not followed)",
                     path, first);
            return dm_rd_skip(w->opt, w->st, DM_PP_SKIP_SYMLINK_LOOP, DM_ERR_IO, msg);
        }
        snprintf(msg, sizeof(msg), "%s: the folder %s, already read there (not read twice)", path, first);
        return dm_rd_skip(w->opt, w->st, DM_PP_SKIP_DUPLICATE_DIR, DM_ERR_IO, msg);
    }
    DM_TRY(dm_walk_add(w, sb.st_dev, sb.st_ino, from, path));
    size_t self = w->n_dirs - 1;
    DIR *d = opendir(path);
    if (!d) {
        snprintf(msg, sizeof(msg), "%s: cannot open directory: %s", path, strerror(errno));
        if (depth == 0) return DM_ERR(DM_ERR_IO, "%s", msg);
        return dm_rd_skip(w->opt, w->st, DM_PP_SKIP_UNREADABLE, DM_ERR_IO, msg);
    }
    /* all the names first (sorted: the walk, and so which way to a folder counts first, does not
     * depend on the order of readdir), the folder closed before going down */
    char **names;
    size_t n_names;
    int err;
    int rc = dm_walk_names(d, &names, &n_names, &err);
    closedir(d);
    if (rc >= 0 && err) {
        snprintf(msg, sizeof(msg), "%s: cannot read directory: %s (rest of it skipped)", path, strerror(err));
        rc = depth == 0 ? DM_ERR(DM_ERR_IO, "%s", msg) : dm_rd_skip(w->opt, w->st, DM_PP_SKIP_UNREADABLE, DM_ERR_IO, msg);
    }
    for (size_t i = 0; rc >= 0 && i < n_names; i++) {
        const char *name = names[i];
        size_t pl = strlen(path) + strlen(name) + 2;
        size_t rl = strlen(rel) + strlen(name) + 2;
        char *cp = dm_malloc(pl), *cr = dm_malloc(rl);
        if (!cp || !cr) {
            dm_free(cp);
            dm_free(cr);
            rc = DM_ERR(DM_ERR_NOMEM, "walk: out of memory");
            break;
        }
        snprintf(cp, pl, "%s/%s", path, name);
        if (rel[0]) snprintf(cr, rl, "%s/%s", rel, name);
        else snprintf(cr, rl, "%s", name);
        struct stat eb, lb;
        if (stat(cp, &eb) != 0) {
            snprintf(msg, sizeof(msg), "%s: %s", cp, strerror(errno));
            rc = dm_rd_skip(w->opt, w->st, DM_PP_SKIP_UNREADABLE, DM_ERR_IO, msg);
        } else if (S_ISDIR(eb.st_mode)) {
            if (lstat(cp, &lb) == 0 && S_ISLNK(lb.st_mode)) rc = dm_walk_defer(w, cp, cr, self);
            else rc = dm_walk_dir(w, cp, cr, self, depth + 1);
        } else if (S_ISREG(eb.st_mode)) {
            if (dm_accept(w->opt, name)) rc = dm_list_add(w->l, cp, cr, (uint64_t)eb.st_size);
            else w->st->files_ignored++;
        } else {
            snprintf(msg, sizeof(msg), "%s: not a regular file", cp);
            rc = dm_rd_skip(w->opt, w->st, DM_PP_SKIP_NOT_REGULAR, DM_ERR_IO, msg);
        }
        dm_free(cp);
        dm_free(cr);
    }
    for (size_t i = 0; i < n_names; i++) dm_free(names[i]);
    dm_free(names);
    return rc;
}

/* The tree under root: the folders reached without links, then the links to folders in the order
 * met (a link found under a link joins the queue). */
static int dm_walk_tree(dm_walk *w, const char *root)
{
    int rc = dm_walk_dir(w, root, "", DM_WALK_NONE, 0);
    for (size_t i = 0; rc >= 0 && i < w->n_links; i++) {
        dm_wlink k = w->links[i]; /* links may grow */
        rc = dm_walk_dir(w, k.path, k.rel, k.from, 1);
    }
    return rc;
}

static int dm_file_cmp(const void *a, const void *b)
{
    return strcmp(((const dm_pp_file *)a)->rel, ((const dm_pp_file *)b)->rel);
}

/* Ids unique over the sorted list l (dm_pp_list_files): a file whose id (rel less a compression
 * suffix) a file before it has takes rel, else rel#2, #3, ... (the first free): dm_pp_file.id. */
static int dm_list_ids(dm_pp_file_list *l)
{
    dm_nameset ids = {0};
    dm_sbuf b = {0};
    int rc = DM_OK;
    for (size_t i = 0; rc >= 0 && i < l->n; i++) {
        dm_pp_file *f = &l->files[i];
        size_t n = strlen(f->rel), z = dm_is_archive_name(f->rel) ? 0 : dm_zsuffix_len(f->rel);
        b.n = 0;
        rc = dm_sbuf_put(&b, f->rel, n - z);
        if (rc >= 0) rc = dm_nameset_add(&ids, b.p, NULL);
        if (rc > 0 && z) {
            b.n = 0;
            rc = dm_sbuf_put(&b, f->rel, n);
            if (rc >= 0) rc = dm_nameset_add(&ids, b.p, NULL);
        }
        for (unsigned long k = 2; rc > 0; k++) {
            char sfx[32];
            snprintf(sfx, sizeof(sfx), "#%lu", k);
            b.n = n;
            rc = dm_sbuf_put(&b, sfx, strlen(sfx));
            if (rc >= 0) rc = dm_nameset_add(&ids, b.p, NULL);
        }
        if (rc >= 0 && b.n != n - z && !(f->id = dm_strdup(b.p))) rc = DM_ERR(DM_ERR_NOMEM, "file list: out of memory");
    }
    dm_free(b.p);
    dm_nameset_free(&ids);
    return rc;
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
        dm_walk w;
        memset(&w, 0, sizeof(w));
        w.l = out;
        w.opt = opt;
        w.st = st;
        rc = dm_walk_tree(&w, r);
        dm_walk_free(&w);
        dm_free(r);
    } else if (S_ISREG(sb.st_mode)) {
        const char *base = strrchr(root, '/');
        base = base ? base + 1 : root;
        rc = dm_list_add(out, root, base, (uint64_t)sb.st_size);
    } else {
        return DM_ERR(DM_ERR_IO, "corpus %s: not a file or directory", root);
    }
    if (rc >= 0 && out->n > 1) qsort(out->files, out->n, sizeof(*out->files), dm_file_cmp); /* files is NULL when empty */
    if (rc >= 0) rc = dm_list_ids(out);
    if (rc < 0) {
        dm_pp_file_list_free(out);
        return rc;
    }
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
