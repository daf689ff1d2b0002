/* TF-ICF tables (tfidf/tfidf.h): the binary table file (write, read with checksum and structural
 * checks), the preprocessing signature that a table records, and the check that a corpus can be
 * weighed with a table. Reference: the format described in tfidf/tfidf.h; Reed et al., "TF-ICF:
 * a new term weighting scheme for clustering dynamic data streams" (ICMLA 2006). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/status.h"
#include "preprocess/token_rules.h"
#include "tfidf/tfidf.h"
#include "tfidf/tfidf_internal.h"

#define DM_ICF_MAGIC "DMICF\0\0\1"
#define DM_ICF_VERSION 1u
#define DM_ICF_HEADER 56u

void dm_icf_table_free(dm_icf_table *t)
{
    if (!t) return;
    dm_vocab_free(&t->vocab);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------------ signature */

uint64_t dm_stopset_fingerprint(const dm_stopset *s)
{
    if (!s || s->n == 0) return 0;
    uint64_t fp = s->n;
    for (uint32_t i = 0; i < s->cap; i++)
        if (s->keys[i]) fp += dm_mix64(s->keys[i]);
    return fp ? fp : 1;
}

int dm_pp_signature_of(dm_pp_signature *sig, const dm_preprocess_options *pp)
{
    dm_preprocess_options def = DM_PREPROCESS_OPTIONS_INIT;
    if (!pp) pp = &def;
    memset(sig, 0, sizeof *sig);
    sig->flags = (pp->tok.stem ? 1u : 0u) | (pp->tok.keep_numbers ? 2u : 0u);
    sig->min_len = (uint32_t)pp->tok.min_len;
    sig->max_len = (uint32_t)pp->tok.max_len;
    if (pp->stopwords && pp->stopwords[0] == '\0') return DM_OK; /* no stop words */
    dm_stopset s;
    DM_TRY(dm_stopset_load(&s, pp->stopwords));
    sig->stop_fingerprint = dm_stopset_fingerprint(&s);
    dm_stopset_free(&s);
    return DM_OK;
}

int dm_icf_table_check(const dm_icf_table *t, const dm_pp_signature *sig, const char *path)
{
    const char *name = path ? path : "ICF table";
    const dm_pp_signature *a = &t->sig;
    if ((a->flags & 1u) != (sig->flags & 1u))
        return DM_ERR(DM_ERR_INVALID_ARG, "%s does not match this corpus: the table was built %s stemming, this run %s it",
                      name, (a->flags & 1u) ? "with" : "without", (sig->flags & 1u) ? "uses" : "turns off");
    if ((a->flags & 2u) != (sig->flags & 2u))
        return DM_ERR(DM_ERR_INVALID_ARG, "%s does not match this corpus: the table %s numbers, this run %s them", name,
                      (a->flags & 2u) ? "keeps" : "drops", (sig->flags & 2u) ? "keeps" : "drops");
    if (a->min_len != sig->min_len || a->max_len != sig->max_len)
        return DM_ERR(DM_ERR_INVALID_ARG, "%s does not match this corpus: token lengths %u..%u in the table, %u..%u here",
                      name, a->min_len, a->max_len, sig->min_len, sig->max_len);
    if (a->stop_fingerprint != sig->stop_fingerprint)
        return DM_ERR(DM_ERR_INVALID_ARG, "%s does not match this corpus: it was built with another stop-word list", name);
    const dm_termlist *l = &t->vocab.terms;
    for (size_t i = 0; i < l->n; i++)
        if (dm_term_hash(dm_termlist_bytes(l, i), dm_termlist_len(l, i)) != l->hash[i])
            return DM_ERR(DM_ERR_FORMAT, "%s does not match this docmine: term '%.*s' has a hash from another hash function",
                          name, (int)dm_termlist_len(l, i), dm_termlist_bytes(l, i));
    return DM_OK;
}

/* ------------------------------------------------------------------ file */

typedef struct wr {
    FILE *f;
    uLong crc;
    int bad;
} wr;

static void put(wr *w, const void *p, uint64_t n)
{
    if (w->bad || !n) return;
    if (fwrite(p, 1, (size_t)n, w->f) != (size_t)n) w->bad = 1;
    w->crc = crc32_z(w->crc, p, (size_t)n);
}

int dm_icf_table_write(const dm_icf_table *t, const char *path)
{
    if (!t || !path) return DM_ERR(DM_ERR_INVALID_ARG, "dm_icf_table_write: NULL argument");
    const dm_termlist *l = &t->vocab.terms;
    dm_atomic_file af;
    DM_TRY(dm_atomic_open(&af, path));
    wr w = {af.fp, crc32(0L, Z_NULL, 0), 0};
    unsigned char h[DM_ICF_HEADER];
    memset(h, 0, sizeof h);
    memcpy(h, DM_ICF_MAGIC, 8);
    uint32_t u[4] = {DM_ICF_VERSION, t->sig.flags, t->sig.min_len, t->sig.max_len};
    memcpy(h + 8, u, 16);
    uint64_t q[4] = {t->sig.stop_fingerprint, t->vocab.n_docs, l->n, l->n ? l->off[l->n] : 0};
    memcpy(h + 24, q, 32);
    put(&w, h, sizeof h);
    if (l->n) {
        put(&w, l->hash, 8 * l->n);
        put(&w, l->val, 8 * l->n);
        put(&w, l->off, 8 * (l->n + 1));
        put(&w, l->bytes, l->off[l->n]);
    } else {
        uint64_t zero = 0;
        put(&w, &zero, 8);
    }
    uint32_t c = (uint32_t)w.crc;
    unsigned char tr[8];
    memcpy(tr, &c, 4);
    memcpy(tr + 4, "END\n", 4);
    if (!w.bad && fwrite(tr, 1, 8, af.fp) != 8) w.bad = 1;
    if (w.bad) {
        int e = errno;
        dm_atomic_abort(&af);
        return DM_ERR(DM_ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
    return dm_atomic_commit(&af);
}

static int bad(const char *path, const char *why)
{
    return DM_ERR(DM_ERR_FORMAT, "%s: not a valid docmine ICF table: %s", path, why);
}

/* Reads n bytes into p and adds them to the checksum. */
static int rd(FILE *f, uLong *crc, void *p, uint64_t n)
{
    if (fread(p, 1, (size_t)n, f) != (size_t)n) return -1;
    *crc = crc32_z(*crc, p, (size_t)n);
    return 0;
}

/* The header is read and checked against the file size before anything is allocated: a file that
 * is not a table, or whose header claims more than the file holds, costs no memory. */
int dm_icf_table_read(dm_icf_table *t, const char *path)
{
    if (!t || !path) return DM_ERR(DM_ERR_INVALID_ARG, "dm_icf_table_read: NULL argument");
    memset(t, 0, sizeof *t);
    FILE *f;
    DM_TRY(dm_open_input(&f, path, NULL));
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        int e = errno;
        fclose(f);
        return DM_ERR(DM_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    uint64_t size = (uint64_t)st.st_size;
    unsigned char h[DM_ICF_HEADER];
    if (size < DM_ICF_HEADER + 16 || fread(h, 1, sizeof h, f) != sizeof h || memcmp(h, DM_ICF_MAGIC, 8) != 0) {
        fclose(f);
        return bad(path, "bad magic or too short");
    }
    uint32_t u[4];
    uint64_t q[4];
    memcpy(u, h + 8, 16);
    memcpy(q, h + 24, 32);
    if (u[0] != DM_ICF_VERSION) {
        fclose(f);
        return DM_ERR(DM_ERR_FORMAT, "%s: ICF table version %u, this docmine reads version %u", path, u[0], DM_ICF_VERSION);
    }
    const uint64_t n = q[2], nb = q[3];
    const char *why = NULL;
    /* n <= size / 8 and nb <= size keep the sum below 4 x size: no overflow */
    if (n > size / 8 || nb > size || DM_ICF_HEADER + (n ? 16 * n + 8 * (n + 1) + nb : 8) + 8 != size)
        why = "size does not match its header (truncated?)";
    else if (u[1] & ~3u)
        why = "unknown preprocessing flags";
    else if (u[2] < 1 || u[3] < u[2] || u[3] > DM_TOKEN_MAX_LEN)
        why = "token lengths out of range";
    else if (n >= DM_TERM_NONE)
        why = "more terms than term ids";
    if (why) {
        fclose(f);
        return bad(path, why);
    }
    dm_termlist *l = &t->vocab.terms;
    int rc = dm_termlist_alloc(l, (size_t)n, nb, 1);
    if (rc < 0) {
        fclose(f);
        return DM_ERR(rc, "%s: out of memory for an ICF table of %llu terms (%s)", path, (unsigned long long)n,
                      dm_error_message());
    }
    uLong crc = crc32(crc32(0L, Z_NULL, 0), h, sizeof h);
    unsigned char tr[8];
    uint64_t zero = 0;
    int e = n ? rd(f, &crc, l->hash, 8 * n) || rd(f, &crc, l->val, 8 * n) || rd(f, &crc, l->off, 8 * (n + 1)) ||
                    rd(f, &crc, l->bytes, nb)
              : rd(f, &crc, &zero, 8);
    if (!e && fread(tr, 1, sizeof tr, f) != sizeof tr) e = 1;
    fclose(f);
    if (e) {
        dm_icf_table_free(t);
        return DM_ERR(DM_ERR_IO, "%s: read failed", path);
    }
    uint32_t want;
    memcpy(&want, tr, 4);
    if (memcmp(tr + 4, "END\n", 4) != 0) why = "bad trailer";
    else if ((uint32_t)crc != want) why = "checksum mismatch (corrupt file)";
    t->sig.flags = u[1];
    t->sig.min_len = u[2];
    t->sig.max_len = u[3];
    t->sig.stop_fingerprint = q[0];
    t->vocab.n_docs = q[1];
    if (!why && (n == 0 || t->vocab.n_docs == 0)) why = "no terms or no reference documents";
    if (!why && (l->off[0] != 0 || l->off[n] != nb)) why = "term offsets are broken";
    for (uint64_t i = 0; !why && i < n; i++)
        if (l->off[i + 1] < l->off[i]) why = "term offsets are not monotone";
    /* every term is a token's stem: 0 .. max_len bytes (Porter stems "s" to "", a term of the
     * token stream too; with --min-len 1 a table holds it); ids follow the byte order, so the bytes (not
     * only bytes and hash, the vocabulary's order) rise strictly: equal bytes are a duplicate */
    for (uint64_t i = 0; !why && i < n; i++) {
        size_t len = dm_termlist_len(l, i);
        if (l->val[i] == 0 || l->val[i] > t->vocab.n_docs) why = "a term's cf is 0 or above the document count";
        else if (len > t->sig.max_len) why = "a term is longer than the table's max token length";
        else if (i > 0) {
            int c = dm_term_cmp(dm_termlist_bytes(l, i - 1), dm_termlist_len(l, i - 1), 0, dm_termlist_bytes(l, i), len, 0);
            if (c == 0) why = "a term appears twice";
            else if (c > 0) why = "terms are not in byte order";
        }
    }
    if (why) {
        dm_icf_table_free(t);
        return bad(path, why);
    }
    return DM_OK;
}
