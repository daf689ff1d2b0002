/* libFuzzer target: every corpus reader (text; .gz, .bz2, .xz, .zst; .tar[.gz|.bz2|.xz], .zip;
 * JSONL, TSV, Reuters SGML) on arbitrary bytes, followed by normalisation and CPU tokenising of
 * what it yields. The first input byte picks the file name (and so the format). Reference: none; the property is "no crash, no
 * leak, no hang; counters consistent". */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "preprocess/preprocess.h"

typedef struct fz {
    char *norm;
    size_t len, cap;
    size_t docs;
    dm_pp_stats *st;
} fz;

static int sink(void *user, const dm_raw_doc *d)
{
    fz *f = user;
    if (!d->id || !d->labels) abort();
    f->docs++;
    size_t before = f->len;
    if (dm_normalize(&f->norm, &f->len, &f->cap, d->text, d->len, 0, f->st) < 0) return 0;
    uint64_t off[2] = {0, f->len - before};
    dm_tok_batch b = {f->norm + before, f->len - before, off, 1};
    dm_tok_options o = DM_TOK_OPTIONS_INIT;
    dm_tok_result r;
    if (dm_tokenize_cpu(&r, &b, NULL, &o) == 0) {
        if (r.doc_tok[1] != r.n_tokens) abort();
        dm_tok_result_free(&r);
    }
    f->len = 0;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *names[] = {"doc.txt",   "doc.txt.gz", "a.jsonl",   "a.jsonl.gz", "a.tsv",     "r.sgm",
                                  "r.sgm.gz",  "x.tar",      "x.tar.gz",  "x.tgz",      "x.tar.bz2", "x.tar.xz",
                                  "x.zip",     "a.jsonl.bz2", "r.sgm.xz", "doc.txt.zst"};
    if (size < 1) return 0;
    const char *name = names[data[0] % 16];
    dm_reader_options o = DM_READER_OPTIONS_INIT;
    o.strict = data[0] >= 128;
    dm_pp_stats st;
    memset(&st, 0, sizeof(st));
    fz f = {NULL, 0, 0, 0, &st};
    dm_pp_read_buffer(name, data + 1, size - 1, &o, &st, sink, &f);
    dm_free(f.norm);
    return 0;
}
