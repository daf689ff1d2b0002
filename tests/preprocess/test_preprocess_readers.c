/* Reader tests: all of Reuters-21578 (record and labelled-record counts checked against an
 * independent scan of the raw files), directory trees with folder labels and symlink loops,
 * .gz, .tar.gz, JSONL, TSV, and the bad-input list of issue 3, each giving a counted skip with a
 * message naming the file (and line/record) or a clear error. Reference: DESIGN.md section 8. */
#include <CUnit/CUnit.h>
#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "common/status.h"
#include "pp_testlib.h"
#include "preprocess/preprocess.h"
#include "preprocess/token_rules.h"
#include "testutil.h"

static char g_tmp[1024];

static int setup(void) { return dm_test_tmpdir(g_tmp, sizeof(g_tmp)) ? 0 : 1; }
static int teardown(void)
{
    char cmd[2200];
    snprintf(cmd, sizeof(cmd), "chmod -R u+rwx '%s' && rm -rf '%s'", g_tmp, g_tmp);
    return system(cmd) == 0 ? 0 : 1;
}

static const char *tpath(char *buf, const char *rel)
{
    snprintf(buf, 4096, "%s/%.2000s", g_tmp, rel);
    return buf;
}

static void mkdirs(const char *rel)
{
    char p[4096], cmd[4200];
    snprintf(cmd, sizeof(cmd), "mkdir -p '%.4000s'", tpath(p, rel));
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
}

static void put(const char *rel, const void *data, size_t len)
{
    char p[4096];
    CU_ASSERT_EQUAL_FATAL(pp_write_file(tpath(p, rel), data, len), 0);
}

static void put_gz(const char *rel, const char *text, size_t len)
{
    char p[4096];
    gzFile g = gzopen(tpath(p, rel), "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL(gzwrite(g, text, (unsigned)len), (int)len);
    gzclose(g);
}

/* Messages of the stream mention needle? */
static int has_message(const dm_pp_stats *st, const char *needle)
{
    for (uint64_t i = 0; i < st->n_messages && i < DM_PP_MAX_MESSAGES; i++)
        if (strstr(st->messages[i], needle)) return 1;
    return 0;
}

static int run_pp(dm_token_stream *s, const char *rel, int format, int labels)
{
    char p[4096];
    dm_preprocess_options o = DM_PREPROCESS_OPTIONS_INIT;
    o.reader.format = format;
    o.reader.labels = labels;
    o.backend = 1; /* DM_BACKEND_CPU */
    return dm_preprocess(s, NULL, NULL, tpath(p, rel), &o);
}

static int count_docs(void *user, const dm_raw_doc *d)
{
    (void)d;
    (*(int *)user)++;
    return 0;
}

/* A file listed as regular and replaced by a FIFO before it is read is skipped (not_regular),
 * never waited on (the read would block this rank, and every other one with it). */
static void test_fifo_after_listing(void)
{
    char p[4096], q[4096];
    mkdirs("swap");
    put("swap/a.txt", "alpha beta", 10);
    put("swap/b.txt", "gamma delta", 11);
    dm_reader_options ro = DM_READER_OPTIONS_INIT;
    dm_pp_stats st;
    memset(&st, 0, sizeof st);
    dm_pp_file_list fl;
    CU_ASSERT_EQUAL_FATAL(dm_pp_list_files(&fl, tpath(p, "swap"), &ro, &st), DM_OK);
    CU_ASSERT_EQUAL_FATAL(fl.n, 2);
    CU_ASSERT_EQUAL(unlink(tpath(q, "swap/b.txt")), 0);
    CU_ASSERT_EQUAL(mkfifo(q, 0600), 0);
    int docs = 0;
    for (size_t i = 0; i < fl.n; i++) CU_ASSERT(dm_pp_read_file(&fl.files[i], &ro, &st, count_docs, &docs) >= 0);
    CU_ASSERT_EQUAL(docs, 1);
    CU_ASSERT_EQUAL(st.skipped[DM_PP_SKIP_NOT_REGULAR], 1);
    CU_ASSERT_TRUE(has_message(&st, "b.txt: not a regular file any more"));
    dm_pp_file_list_free(&fl);
}

static size_t find_doc(const dm_token_stream *s, const char *id)
{
    for (size_t d = 0; d < s->n_docs; d++)
        if (strcmp(dm_token_stream_id(s, d), id) == 0) return d;
    return (size_t)-1;
}

/* The stems of document d joined by ' ' (from the vocabulary). */
static void doc_stems(char *out, size_t cap, const dm_token_stream *s, size_t d)
{
    size_t n = 0;
    out[0] = 0;
    for (uint64_t i = s->tok_off[d]; i < s->tok_off[d + 1]; i++) {
        long t = dm_token_stream_term_find(s, s->hashes[i]);
        if (t < 0) continue;
        size_t l = s->term_off[t + 1] - s->term_off[t];
        if (n + l + 2 >= cap) break;
        if (n) out[n++] = ' ';
        memcpy(out + n, s->term_bytes + s->term_off[t], l);
        n += l;
        out[n] = 0;
    }
}

/* ---------------------------------------------------------------- Reuters */

static void test_reuters_all(void)
{
    const char *dir = pp_reuters_dir();
    if (!dir) {
        printf("(Reuters not found: skipped) ");
        return;
    }
    /* independent oracle: count "<REUTERS " start tags and records whose TOPICS hold a <D> */
    size_t want_records = 0, want_labelled = 0;
    char path[4096];
    for (int i = 0; i < 22; i++) {
        snprintf(path, sizeof(path), "%s/reut2-%03d.sgm.gz", dir, i);
        gzFile g = gzopen(path, "rb");
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        size_t cap = 1 << 24, n = 0;
        char *buf = malloc(cap);
        int k;
        while ((k = gzread(g, buf + n, (unsigned)(cap - n - 1))) > 0) n += (size_t)k;
        gzclose(g);
        buf[n] = 0;
        for (char *p = strstr(buf, "<REUTERS "); p; p = strstr(p + 1, "<REUTERS ")) {
            want_records++;
            char *end = strstr(p, "</REUTERS>");
            char *t = strstr(p, "<TOPICS><D>");
            if (t && end && t < end) want_labelled++;
        }
        free(buf);
    }
    CU_ASSERT_EQUAL(want_records, 21578); /* the dataset's documented size */

    dm_preprocess_options o = DM_PREPROCESS_OPTIONS_INIT;
    o.reader.format = DM_PP_FORMAT_REUTERS;
    o.backend = 1;
    o.batch_bytes = 1 << 16; /* hundreds of batches through the pipeline's workers */
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(dm_preprocess(&s, NULL, NULL, dir, &o), 0);
    printf("\n  reuters: %zu docs, %llu labelled (oracle %zu), %zu tokens, %zu terms, "
           "%llu invalid UTF-8, %llu collisions", s.n_docs, (unsigned long long)s.stats.docs_labelled,
           want_labelled, s.n_tokens, s.n_terms, (unsigned long long)s.stats.invalid_utf8,
           (unsigned long long)s.stats.hash_collisions);
    CU_ASSERT_EQUAL(s.n_docs, want_records);
    CU_ASSERT_EQUAL(s.stats.docs_labelled, want_labelled);
    CU_ASSERT_EQUAL(dm_pp_stats_skipped_total(&s.stats), 0);
    CU_ASSERT_EQUAL(s.stats.files_read, 22);
    CU_ASSERT_EQUAL(s.stats.files_ignored, 2); /* lewis.dtd, cat-descriptions */
    /* ids are the NEWIDs 1..21578, each once */
    char *seen = calloc(21579, 1);
    for (size_t d = 0; d < s.n_docs; d++) {
        long id = atol(dm_token_stream_id(&s, d));
        CU_ASSERT(id >= 1 && id <= 21578);
        if (id >= 1 && id <= 21578) seen[id]++;
    }
    size_t once = 0;
    for (int i = 1; i <= 21578; i++) once += seen[i] == 1;
    CU_ASSERT_EQUAL(once, 21578);
    free(seen);
    /* corpus order: NEWIDs increase through the files, so the stream must list them in order */
    size_t ordered = 0;
    for (size_t d = 1; d < s.n_docs; d++)
        ordered += atol(dm_token_stream_id(&s, d - 1)) < atol(dm_token_stream_id(&s, d));
    CU_ASSERT_EQUAL(ordered, s.n_docs - 1);
    /* NEWID 1 is "BAHIA COCOA REVIEW", topic cocoa (entity decoding: see test_bad_inputs) */
    size_t d1 = find_doc(&s, "1");
    CU_ASSERT_STRING_EQUAL(dm_token_stream_labels(&s, d1), "cocoa");
    char stems[256];
    doc_stems(stems, sizeof(stems), &s, d1);
    CU_ASSERT_EQUAL(strncmp(stems, "bahia cocoa review shower continu", 33), 0);
    /* every hash of the stream is in the vocabulary, whose entries are distinct */
    size_t missing = 0;
    for (size_t i = 0; i < s.n_tokens; i++) missing += dm_token_stream_term_find(&s, s.hashes[i]) < 0;
    CU_ASSERT_EQUAL(missing, 0);
    for (size_t t = 1; t < s.n_terms; t++) CU_ASSERT(s.term_hash[t - 1] <= s.term_hash[t]);
    /* a multi-topic record keeps all its labels, comma-separated, in source order */
    size_t multi = 0;
    for (size_t d = 0; d < s.n_docs; d++) multi += strchr(dm_token_stream_labels(&s, d), ',') != NULL;
    CU_ASSERT(multi > 0);
    dm_token_stream_free(&s);
}

/* ---------------------------------------------------------------- formats */

static void test_dir_tree_labels_and_loops(void)
{
    mkdirs("tree/sports");
    mkdirs("tree/politics/sub");
    put("tree/sports/a.txt", "Football games tonight", 22);
    put_gz("tree/sports/b.txt.gz", "Tennis players", 14);
    put("tree/politics/c.txt", "Elections happening", 19);
    put("tree/politics/sub/d.txt", "Parliament debated", 18);
    put("tree/.hidden", "secret words", 12);
    char p[4096], q[4096];
    CU_ASSERT_EQUAL_FATAL(symlink(tpath(q, "tree/politics"), tpath(p, "tree/politics/sub/loop")), 0);
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "tree", DM_PP_FORMAT_AUTO, DM_PP_LABELS_DIR), 0);
    CU_ASSERT_EQUAL(s.n_docs, 4);
    static const char *ids[] = {"politics/c.txt", "politics/sub/d.txt", "sports/a.txt", "sports/b.txt"};
    static const char *labels[] = {"politics", "politics", "sports", "sports"};
    for (size_t d = 0; d < 4 && d < s.n_docs; d++) {
        CU_ASSERT_STRING_EQUAL(dm_token_stream_id(&s, d), ids[d]);
        CU_ASSERT_STRING_EQUAL(dm_token_stream_labels(&s, d), labels[d]);
    }
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_SYMLINK_LOOP], 1);
    CU_ASSERT(has_message(&s.stats, "loop"));
    char st[256];
    doc_stems(st, sizeof(st), &s, 3);
    CU_ASSERT_STRING_EQUAL(st, "tenni player");
    dm_token_stream_free(&s);
}

static void test_jsonl_tsv(void)
{
    mkdirs("js");
    const char *j = "{\"id\":\"x1\",\"text\":\"Cats running\",\"label\":\"pets\"}\n"
                    "\n"
                    "{\"id\":7,\"text\":\"Dogs barking\",\"label\":[\"pets\",\"noise\"]}\n"
                    "{\"id\":\"bad\",\"text\": \"unterminated}\n"
                    "{\"id\":\"nt\",\"body\":\"no text field\"}\n"
                    "{\"text\":\"Birds \\u03bb\\u03cc\\u03b3\\u03bf\\u03c2 singing\"}\n";
    put("js/a.jsonl", j, strlen(j));
    const char *t = "t1\tlab\tSome text\there\n"
                    "broken line without tabs\n"
                    "t2\t\tUnlabelled document\r\n";
    put("js/b.tsv", t, strlen(t));
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "js", DM_PP_FORMAT_AUTO, DM_PP_LABELS_FORMAT), 0);
    CU_ASSERT_EQUAL(s.n_docs, 5);
    if (s.n_docs == 5) {
        CU_ASSERT_STRING_EQUAL(dm_token_stream_id(&s, 0), "x1");
        CU_ASSERT_STRING_EQUAL(dm_token_stream_labels(&s, 0), "pets");
        CU_ASSERT_STRING_EQUAL(dm_token_stream_id(&s, 1), "7");
        CU_ASSERT_STRING_EQUAL(dm_token_stream_labels(&s, 1), "pets,noise");
        CU_ASSERT_STRING_EQUAL(dm_token_stream_id(&s, 2), "a.jsonl:6");
        CU_ASSERT_STRING_EQUAL(dm_token_stream_id(&s, 3), "t1");
        CU_ASSERT_STRING_EQUAL(dm_token_stream_labels(&s, 3), "lab");
        CU_ASSERT_STRING_EQUAL(dm_token_stream_id(&s, 4), "t2");
        CU_ASSERT_STRING_EQUAL(dm_token_stream_labels(&s, 4), "");
        char st[256];
        doc_stems(st, sizeof(st), &s, 2);
        /* marks stripped, final sigma case-folded; the non-ASCII token is not stemmed */
        CU_ASSERT_STRING_EQUAL(st, "bird \xce\xbb\xce\xbf\xce\xb3\xce\xbf\xcf\x83 sing");
        doc_stems(st, sizeof(st), &s, 3);
        CU_ASSERT_STRING_EQUAL(st, "text");          /* "some", "here": stop? no: see below */
    }
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_BAD_JSON], 2);
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_BAD_TSV], 1);
    CU_ASSERT(has_message(&s.stats, "a.jsonl:4"));
    CU_ASSERT(has_message(&s.stats, "a.jsonl:5"));
    CU_ASSERT(has_message(&s.stats, "b.tsv:2"));
    CU_ASSERT_EQUAL(s.stats.docs_labelled, 3);
    dm_token_stream_free(&s);
    /* strict mode turns the first bad line into an error naming file and line */
    char p[4096];
    dm_preprocess_options o = DM_PREPROCESS_OPTIONS_INIT;
    o.reader.strict = 1;
    o.backend = 1;
    CU_ASSERT_EQUAL(dm_preprocess(&s, NULL, NULL, tpath(p, "js/a.jsonl"), &o), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "a.jsonl:4"));
    /* nothing is skipped under --strict, and the error does not say so (a truncated .gz) */
    mkdirs("strictgz");
    put("strictgz/t.txt.gz", "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x4b\x4c", 12);
    CU_ASSERT_NOT_EQUAL(dm_preprocess(&s, NULL, NULL, tpath(p, "strictgz"), &o), DM_OK);
    printf("\n    strict: %s", dm_error_message());
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "t.txt.gz"));
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "(--strict)"));
    CU_ASSERT_PTR_NULL(strstr(dm_error_message(), "skipped"));
}

static void write_tar(const char *rel, int gz, const char **names, const char **texts, int n)
{
    char p[4096];
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    if (gz) archive_write_add_filter_gzip(a);
    CU_ASSERT_EQUAL_FATAL(archive_write_open_filename(a, tpath(p, rel)), ARCHIVE_OK);
    for (int i = 0; i < n; i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, names[i]);
        archive_entry_set_size(e, (la_int64_t)strlen(texts[i]));
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_write_header(a, e);
        archive_write_data(a, texts[i], strlen(texts[i]));
        archive_entry_free(e);
    }
    archive_write_close(a);
    archive_write_free(a);
}

/* gzip: concatenated members (what `cat a.gz b.gz` or gzopen(..., "ab") make) are one text (its
 * id without .gz), zero padding after the last member is ignored, a stream that inflates 1000:1 is
 * read whole, and a member of no bytes is a counted empty file. */
static void test_gzip_members(void)
{
    char p[4096];
    mkdirs("gzm");
    put_gz("gzm/two.txt.gz", "alpha beta ", 11);
    gzFile g = gzopen(tpath(p, "gzm/two.txt.gz"), "ab"); /* a second member */
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL(gzwrite(g, "gamma delta", 11), 11);
    gzclose(g);
    FILE *f = fopen(p, "ab");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    static const char zeros[512];
    CU_ASSERT_EQUAL(fwrite(zeros, 1, sizeof zeros, f), sizeof zeros);
    fclose(f);
    const char unit[] = "omega "; /* 6 bytes, one token */
    const size_t reps = (size_t)1 << 20;
    char *big = malloc(reps * 6);
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    for (size_t i = 0; i < reps; i++) memcpy(big + 6 * i, unit, 6);
    put_gz("gzm/ratio.txt.gz", big, reps * 6);
    free(big);
    put_gz("gzm/empty.txt.gz", "", 0);
    struct stat sb;
    CU_ASSERT_EQUAL(stat(tpath(p, "gzm/ratio.txt.gz"), &sb), 0);
    CU_ASSERT(sb.st_size < 64 * 1024); /* inflates more than 96:1: the buffer grows several times */

    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "gzm", DM_PP_FORMAT_AUTO, DM_PP_LABELS_NONE), 0);
    CU_ASSERT_EQUAL(s.n_docs, 2);
    char st[256];
    size_t d = find_doc(&s, "two.txt");
    CU_ASSERT_FATAL(d != (size_t)-1);
    doc_stems(st, sizeof(st), &s, d);
    CU_ASSERT_STRING_EQUAL(st, "alpha beta gamma delta");
    d = find_doc(&s, "ratio.txt");
    CU_ASSERT_FATAL(d != (size_t)-1);
    CU_ASSERT_EQUAL(s.tok_off[d + 1] - s.tok_off[d], reps);
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_EMPTY_FILE], 1);
    CU_ASSERT(has_message(&s.stats, "empty.txt.gz"));
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_CORRUPT_GZIP], 0);
    dm_token_stream_free(&s);
}

static void test_archives(void)
{
    mkdirs("ar");
    const char *names[] = {"docs/one.txt", "docs/more.jsonl", "docs/two.txt"};
    const char *texts[] = {"Archived documents", "{\"id\":\"j1\",\"text\":\"Inside jsonl\"}\n",
                           "Second archived text"};
    write_tar("ar/x.tar.gz", 1, names, texts, 3);
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "ar", DM_PP_FORMAT_AUTO, DM_PP_LABELS_FORMAT), 0);
    CU_ASSERT_EQUAL(s.n_docs, 3);
    if (s.n_docs == 3) {
        CU_ASSERT_STRING_EQUAL(dm_token_stream_id(&s, 0), "x.tar.gz/docs/one.txt");
        CU_ASSERT_STRING_EQUAL(dm_token_stream_id(&s, 1), "j1");
        CU_ASSERT_STRING_EQUAL(dm_token_stream_id(&s, 2), "x.tar.gz/docs/two.txt");
    }
    dm_token_stream_free(&s);
}

/* ---------------------------------------------------------------- archives of every kind */

/* One member of a test archive: a regular file (data, len 0: strlen), a directory, a hard link to
 * an earlier member, a symbolic link or a FIFO. */
typedef struct ar_member {
    const char *name;
    const char *data;
    size_t len;
    unsigned type;        /* 0: regular (or hard link when hardlink is set), else AE_IF* */
    const char *hardlink; /* target of a hard link */
    const char *symlink;  /* target of a symbolic link */
} ar_member;

/* Writes rel with libarchive in format (by name: "paxr", "zip", "raw") through filter (NULL or a
 * name: "gzip", "bzip2", "xz", "zstd"). Returns 0, or -1 when this libarchive cannot write it. */
static int write_archive(const char *rel, const char *format, const char *filter, const ar_member *m, int n)
{
    char p[4096];
    struct archive *a = archive_write_new();
    if (archive_write_set_format_by_name(a, format) != ARCHIVE_OK ||
        (filter && archive_write_add_filter_by_name(a, filter) != ARCHIVE_OK)) {
        archive_write_free(a);
        return -1;
    }
    CU_ASSERT_EQUAL_FATAL(archive_write_open_filename(a, tpath(p, rel)), ARCHIVE_OK);
    for (int i = 0; i < n; i++) {
        struct archive_entry *e = archive_entry_new();
        size_t len = m[i].data ? (m[i].len ? m[i].len : strlen(m[i].data)) : 0;
        archive_entry_set_pathname(e, m[i].name);
        archive_entry_set_filetype(e, m[i].type ? m[i].type : AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, (la_int64_t)len);
        if (m[i].hardlink) archive_entry_set_hardlink(e, m[i].hardlink);
        if (m[i].symlink) archive_entry_set_symlink(e, m[i].symlink);
        CU_ASSERT(archive_write_header(a, e) >= ARCHIVE_WARN);
        if (len) CU_ASSERT_EQUAL(archive_write_data(a, m[i].data, len), (la_ssize_t)len);
        archive_entry_free(e);
    }
    CU_ASSERT_EQUAL(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
    return 0;
}

/* The bytes of a file (malloc'ed). */
static char *read_back(const char *rel, size_t *len)
{
    char p[4096];
    FILE *f = fopen(tpath(p, rel), "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

/* Hard links give the same documents as the directory walk gives for the same tree (tar stores
 * the data once; the link names its target, before it or after the first link); symbolic links
 * and FIFOs are skipped and counted naming archive and member; a link to a member the archive does
 * not hold is counted too. */
static void test_archive_links(void)
{
    mkdirs("links/dir/d");
    put("links/dir/d/a.txt", "oil crude barrel opec", 21);
    put("links/dir/d/b.txt", "wheat grain corn crop", 21);
    char p[4096], q[4096];
    CU_ASSERT_EQUAL_FATAL(link(tpath(p, "links/dir/d/a.txt"), tpath(q, "links/dir/d/hard.txt")), 0);
    CU_ASSERT_EQUAL_FATAL(link(tpath(p, "links/dir/d/b.txt"), tpath(q, "links/dir/d/hard2.txt")), 0);
    dm_token_stream dir;
    CU_ASSERT_EQUAL_FATAL(run_pp(&dir, "links/dir", DM_PP_FORMAT_AUTO, DM_PP_LABELS_NONE), 0);
    CU_ASSERT_EQUAL(dir.n_docs, 4);
    const ar_member m[] = {
        {"d", NULL, 0, AE_IFDIR, NULL, NULL},
        {"d/a.txt", "oil crude barrel opec", 0, 0, NULL, NULL},
        {"d/hard.txt", NULL, 0, 0, "d/a.txt", NULL}, /* the first link: its target is behind it */
        {"d/sym.txt", NULL, 0, AE_IFLNK, NULL, "b.txt"},
        {"d/b.txt", "wheat grain corn crop", 0, 0, NULL, NULL},
        {"d/fifo", NULL, 0, AE_IFIFO, NULL, NULL},
        {"d/hard2.txt", NULL, 0, 0, "d/b.txt", NULL}, /* a target after the first link */
        {"d/orphan.txt", NULL, 0, 0, "d/none.txt", NULL},
    };
    static const char *names[] = {"links/x.tar", "links/x.tar.gz"};
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL_FATAL(write_archive(names[k], "paxr", k ? "gzip" : NULL, m, 8), 0);
        dm_token_stream s;
        CU_ASSERT_EQUAL_FATAL(run_pp(&s, names[k], DM_PP_FORMAT_AUTO, DM_PP_LABELS_NONE), 0);
        for (uint64_t i = 0; i < s.stats.n_messages && i < DM_PP_MAX_MESSAGES; i++)
            printf("\n    %s", s.stats.messages[i]);
        CU_ASSERT_EQUAL(s.n_docs, 4);
        static const char *files[] = {"a.txt", "hard.txt", "b.txt", "hard2.txt"};
        for (int f = 0; f < 4; f++) {
            char id[64], want[256], got[256];
            snprintf(id, sizeof(id), "%s/d/%s", names[k] + 6, files[f]);
            size_t d = find_doc(&s, id), dd = find_doc(&dir, id + strlen(names[k]) - 5);
            CU_ASSERT_FATAL(d != (size_t)-1 && dd != (size_t)-1);
            doc_stems(got, sizeof(got), &s, d);
            doc_stems(want, sizeof(want), &dir, dd);
            CU_ASSERT_STRING_EQUAL(got, want);
        }
        CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_NOT_REGULAR], 2);
        snprintf(q, sizeof(q), "%s: member d/sym.txt: symbolic link to b.txt", names[k] + 6);
        CU_ASSERT(has_message(&s.stats, q));
        snprintf(q, sizeof(q), "%s: member d/fifo: FIFO", names[k] + 6);
        CU_ASSERT(has_message(&s.stats, q));
        CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_CORRUPT_ARCHIVE], 1);
        CU_ASSERT(has_message(&s.stats, "member d/orphan.txt: hard link to d/none.txt"));
        dm_token_stream_free(&s);
    }
    dm_token_stream_free(&dir);
}

/* Compressed tar (.tar.bz2, .tbz2, .tar.xz, .txz, .tar.zst), zip and single compressed files
 * (.bz2, .xz, .zst) are read through libarchive (a kind this libarchive cannot write is left out);
 * files that are not text (compressed data under a text name, UTF-16, binary bytes) are skipped
 * and counted, and so is a .bz2 that holds no bzip2 data. */
static void test_compressed_and_binary(void)
{
    mkdirs("cz/bin");
    static const struct {
        const char *rel, *format, *filter;
    } kinds[] = {{"cz/t1.tar.bz2", "paxr", "bzip2"}, {"cz/t2.tbz2", "paxr", "bzip2"},
                 {"cz/t3.tar.xz", "paxr", "xz"},     {"cz/t4.txz", "paxr", "xz"},
                 {"cz/t5.tar.zst", "paxr", "zstd"},  {"cz/z6.zip", "zip", NULL},
                 {"cz/s7.jsonl.bz2", "raw", "bzip2"}, {"cz/s8.jsonl.xz", "raw", "xz"},
                 {"cz/s9.jsonl.zst", "raw", "zstd"}};
    int written[9], n_written = 0;
    for (int k = 0; k < 9; k++) {
        char j[256];
        snprintf(j, sizeof(j),
                 "{\"id\":\"k%d-1\",\"text\":\"oil crude\"}\n"
                 "{\"id\":\"k%d-2\",\"text\":\"wheat grain\"}\n", k, k);
        ar_member m = {"m.jsonl", j, 0, 0, NULL, NULL};
        written[k] = write_archive(kinds[k].rel, kinds[k].format, kinds[k].filter, &m, 1) == 0;
        if (!written[k]) printf("(%s: not written by this libarchive) ", kinds[k].rel);
        n_written += written[k];
    }
    CU_ASSERT(n_written >= 3); /* bzip2, xz: Debian's libarchive writes them */
    /* not text */
    put_gz("cz/bin/gz.txt", "compressed words", 16);
    put("cz/bin/u16.txt", "\xff\xfeo\0i\0l\0 \0w\0h\0e\0a\0t\0", 20);
    char blob[8192];
    uint64_t seed = 3;
    for (size_t i = 0; i < sizeof(blob); i++) blob[i] = (char)pp_rand(&seed);
    put("cz/bin/blob.dat", blob, sizeof(blob));
    put("cz/bin/notbz.txt.bz2", "plain text, not bzip2", 21);
    put("cz/bin/ok.txt", "a stray\0NUL is still text", 26);
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "cz", DM_PP_FORMAT_AUTO, DM_PP_LABELS_FORMAT), 0);
    for (uint64_t i = 0; i < s.stats.n_messages && i < DM_PP_MAX_MESSAGES; i++)
        printf("\n    %s", s.stats.messages[i]);
    CU_ASSERT_EQUAL(s.n_docs, 2 * (size_t)n_written + 1);
    for (int k = 0; k < 9; k++) {
        if (!written[k]) continue;
        char id[16];
        snprintf(id, sizeof(id), "k%d-1", k);
        size_t d = find_doc(&s, id);
        CU_ASSERT_FATAL(d != (size_t)-1);
        char st[256];
        doc_stems(st, sizeof(st), &s, d);
        CU_ASSERT_STRING_EQUAL(st, "oil crude");
        snprintf(id, sizeof(id), "k%d-2", k);
        CU_ASSERT(find_doc(&s, id) != (size_t)-1);
    }
    CU_ASSERT(find_doc(&s, "bin/ok.txt") != (size_t)-1);
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_NOT_TEXT], 3);
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_UNREADABLE], 0);
    CU_ASSERT(has_message(&s.stats, "skip (not_text): "));
    CU_ASSERT(has_message(&s.stats, "bin/gz.txt: gzip data, not text"));
    CU_ASSERT(has_message(&s.stats, "bin/u16.txt: UTF-16"));
    CU_ASSERT(has_message(&s.stats, "bin/blob.dat: binary data"));
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_CORRUPT_ARCHIVE], 1);
    CU_ASSERT(has_message(&s.stats, "bin/notbz.txt.bz2: not compressed data"));
    CU_ASSERT_EQUAL(s.stats.invalid_utf8, 0);
    dm_token_stream_free(&s);
}

/* Member paths longer than 4096 bytes keep their whole name: the format comes from its end and the
 * id is the full path. */
static void test_long_member_name(void)
{
    mkdirs("long");
    const char *j = "{\"id\":\"j0\",\"text\":\"oil wheat\"}\n{\"id\":\"j1\",\"text\":\"grain corn\"}\n";
    put_gz("long/tmp.gz", j, strlen(j));
    size_t gzlen;
    char *gz = read_back("long/tmp.gz", &gzlen);
    char p[4096];
    remove(tpath(p, "long/tmp.gz"));
    char dirs[4500] = "";
    for (int i = 0; i < 22; i++) {
        size_t l = strlen(dirs);
        memset(dirs + l, 'd', 200);
        dirs[l + 200] = '/';
        dirs[l + 201] = 0;
    }
    char jname[4600], tname[4600];
    snprintf(jname, sizeof(jname), "%sdocs.jsonl.gz", dirs);
    snprintf(tname, sizeof(tname), "%sdoc.txt", dirs);
    CU_ASSERT(strlen(jname) > 4096);
    const ar_member m[] = {{jname, gz, gzlen, 0, NULL, NULL}, {tname, "price market", 0, 0, NULL, NULL}};
    CU_ASSERT_EQUAL_FATAL(write_archive("long/l.tar", "paxr", NULL, m, 2), 0);
    free(gz);
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "long/l.tar", DM_PP_FORMAT_AUTO, DM_PP_LABELS_FORMAT), 0);
    CU_ASSERT_EQUAL(s.n_docs, 3);
    CU_ASSERT(find_doc(&s, "j0") != (size_t)-1);
    CU_ASSERT(find_doc(&s, "j1") != (size_t)-1);
    char id[4700];
    snprintf(id, sizeof(id), "l.tar/%s", tname);
    CU_ASSERT(find_doc(&s, id) != (size_t)-1);
    CU_ASSERT_EQUAL(dm_pp_stats_skipped_total(&s.stats), 0);
    dm_token_stream_free(&s);
}

/* --format reuters reads archives in a corpus folder (their *.sgm members) and counts the files
 * and members it does not read as ignored. */
static void test_reuters_archive_in_dir(void)
{
    mkdirs("ra/sub");
    put("ra/lewis.dtd", "<!ELEMENT REUTERS>", 18);
    const char *sg = "<REUTERS NEWID=\"7\"><TOPICS><D>grain</D></TOPICS><TEXT><BODY>Wheat crop</BODY></TEXT>"
                     "</REUTERS>\n<REUTERS NEWID=\"8\"><TEXT><TITLE>Oil prices</TITLE></TEXT></REUTERS>\n";
    const ar_member m[] = {{"reut/a.sgm", sg, 0, 0, NULL, NULL},
                           {"reut/README.txt", "about", 0, 0, NULL, NULL}};
    CU_ASSERT_EQUAL_FATAL(write_archive("ra/sub/r.tar.gz", "paxr", "gzip", m, 2), 0);
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "ra", DM_PP_FORMAT_REUTERS, DM_PP_LABELS_FORMAT), 0);
    CU_ASSERT_EQUAL(s.n_docs, 2);
    size_t d7 = find_doc(&s, "7");
    CU_ASSERT_FATAL(d7 != (size_t)-1);
    CU_ASSERT_STRING_EQUAL(dm_token_stream_labels(&s, d7), "grain");
    CU_ASSERT_EQUAL(s.stats.files_ignored, 2); /* lewis.dtd, README.txt */
    CU_ASSERT_EQUAL(dm_pp_stats_skipped_total(&s.stats), 0);
    dm_token_stream_free(&s);
}

/* A UTF-8 byte-order mark is not part of a JSONL, TSV or text file; a Reuters record whose <BODY>,
 * <TITLE> or <D> is not closed is a counted skip naming it; --labels dir labels the members of an
 * archive at the top of the corpus by their first folder, and those of an archive in a folder by
 * that folder, as the directory walk does. */
static void test_bom_sgml_dir_labels(void)
{
    mkdirs("bom");
    const char *j = "\xef\xbb\xbf{\"id\":\"a\",\"text\":\"oil crude\"}\n{\"id\":\"b\",\"text\":\"wheat\"}\n";
    put("bom/a.jsonl", j, strlen(j));
    const char *t = "\xef\xbb\xbft1\tL\tgrain corn\n", *x = "\xef\xbb\xbfplain words";
    put("bom/b.tsv", t, strlen(t));
    put("bom/c.txt", x, strlen(x));
    const char *sg = "<REUTERS NEWID=\"1\"><TEXT><TITLE>kept</TITLE><BODY>lost body</TEXT></REUTERS>\n"
                     "<REUTERS NEWID=\"2\"><TEXT><TITLE>lost title<BODY>kept</BODY></TEXT></REUTERS>\n"
                     "<REUTERS NEWID=\"3\"><TOPICS><D>grain</TOPICS><TEXT><BODY>x</BODY></TEXT></REUTERS>\n"
                     "<REUTERS NEWID=\"4\"><TEXT><BODY>fine record</BODY></TEXT></REUTERS>\n";
    put("bom/d.sgm", sg, strlen(sg));
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "bom", DM_PP_FORMAT_AUTO, DM_PP_LABELS_FORMAT), 0);
    for (uint64_t i = 0; i < s.stats.n_messages && i < DM_PP_MAX_MESSAGES; i++)
        printf("\n    %s", s.stats.messages[i]);
    CU_ASSERT_EQUAL(s.n_docs, 5);
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_BAD_JSON], 0);
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_BAD_TSV], 0);
    char st[256];
    size_t da = find_doc(&s, "a"), dt = find_doc(&s, "t1"), dc = find_doc(&s, "c.txt");
    CU_ASSERT_FATAL(da != (size_t)-1 && dt != (size_t)-1 && dc != (size_t)-1); /* first lines read */
    doc_stems(st, sizeof(st), &s, da);
    CU_ASSERT_STRING_EQUAL(st, "oil crude");
    CU_ASSERT_STRING_EQUAL(dm_token_stream_labels(&s, dt), "L");
    doc_stems(st, sizeof(st), &s, dc);
    CU_ASSERT_STRING_EQUAL(st, "plain word");
    CU_ASSERT(find_doc(&s, "4") != (size_t)-1);
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_BAD_SGML], 3);
    CU_ASSERT(has_message(&s.stats, "d.sgm: record 1 (NEWID 1): <BODY> without its end tag"));
    CU_ASSERT(has_message(&s.stats, "d.sgm: record 2 (NEWID 2): <TITLE> without its end tag"));
    CU_ASSERT(has_message(&s.stats, "d.sgm: record 3 (NEWID 3): <D> without its end tag"));
    dm_token_stream_free(&s);

    mkdirs("ld/sports");
    const ar_member top[] = {{"./topicA/a.txt", "oil crude", 0, 0, NULL, NULL},
                             {"/topicB/b.txt", "wheat grain", 0, 0, NULL, NULL},
                             {"loose.txt", "no folder", 0, 0, NULL, NULL}};
    CU_ASSERT_EQUAL_FATAL(write_archive("ld/all.tar.gz", "paxr", "gzip", top, 3), 0);
    const ar_member in[] = {{"topicC/c.txt", "corn crop", 0, 0, NULL, NULL}};
    CU_ASSERT_EQUAL_FATAL(write_archive("ld/sports/s.tar", "paxr", NULL, in, 1), 0);
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "ld", DM_PP_FORMAT_AUTO, DM_PP_LABELS_DIR), 0);
    CU_ASSERT_EQUAL(s.n_docs, 4);
    static const char *ids[] = {"all.tar.gz/topicA/a.txt", "all.tar.gz/topicB/b.txt",
                                "all.tar.gz/loose.txt", "sports/s.tar/topicC/c.txt"};
    static const char *labels[] = {"topicA", "topicB", "", "sports"};
    for (int d = 0; d < 4; d++) {
        size_t k = find_doc(&s, ids[d]);
        CU_ASSERT_FATAL(k != (size_t)-1);
        CU_ASSERT_STRING_EQUAL(dm_token_stream_labels(&s, k), labels[d]);
    }
    dm_token_stream_free(&s);
    /* the archive given as the corpus */
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "ld/all.tar.gz", DM_PP_FORMAT_AUTO, DM_PP_LABELS_DIR), 0);
    size_t da2 = find_doc(&s, "all.tar.gz/topicA/a.txt");
    CU_ASSERT_FATAL(da2 != (size_t)-1);
    CU_ASSERT_STRING_EQUAL(dm_token_stream_labels(&s, da2), "topicA");
    dm_token_stream_free(&s);
}

/* Reuters files that once took quadratic time read in linear time: 40000 records whose end tag is
 * written </reuters> (each skipped and counted, the reader searching for </REUTERS> up to the next
 * record only), then records with end tags; and a body of a million '<' with no '>' after them. A
 * quadratic reader takes about 14 s on each (0.1 s linear, on the 2-core build host); the counts are
 * checked here, not the time. */
static void test_reuters_linear(void)
{
    mkdirs("lin");
    const size_t n_bad = 40000, n_lt = 1000000;
    char *b = malloc(n_bad * 64 + 3 * n_lt + 1024);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    size_t l = 0;
    for (size_t i = 0; i < n_bad; i++)
        l += (size_t)sprintf(b + l, "<REUTERS NEWID=\"%zu\"><BODY>oil wheat</BODY></reuters>\n", i + 100);
    l += (size_t)sprintf(b + l, "<REUTERS NEWID=\"1\"><TEXT><BODY>grain corn</BODY></TEXT></REUTERS>\n");
    l += (size_t)sprintf(b + l, "<REUTERS NEWID=\"2\"><TEXT><BODY>");
    for (size_t i = 0; i < n_lt; i++) memcpy(b + l + 3 * i, "ab<", 3);
    l += 3 * n_lt;
    l += (size_t)sprintf(b + l, "</BODY></TEXT></REUTERS>\n");
    put("lin/q.sgm", b, l);
    free(b);
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "lin", DM_PP_FORMAT_AUTO, DM_PP_LABELS_FORMAT), 0);
    CU_ASSERT_EQUAL(s.n_docs, 2);
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_BAD_SGML], n_bad);
    CU_ASSERT(has_message(&s.stats, "q.sgm: record 1 (byte 0): no </REUTERS> end tag"));
    size_t d = find_doc(&s, "2");
    CU_ASSERT_FATAL(d != (size_t)-1);
    CU_ASSERT_EQUAL(s.tok_off[d + 1] - s.tok_off[d], n_lt); /* "ab" n_lt times: '<' is a plain byte */
    dm_token_stream_free(&s);
}

/* ---------------------------------------------------------------- bad input */

static void test_bad_inputs(void)
{
    mkdirs("bad");
    /* a good document so that the corpus is not empty */
    put("bad/good.txt", "Ordinary words", 14);
    /* empty file */
    put("bad/empty.txt", "", 0);
    /* truncated .gz: the first half of a gzip stream */
    {
        char p[4096];
        put_gz("bad/full.txt.gz", "Some compressible text that goes on and on and on and on", 56);
        FILE *f = fopen(tpath(p, "bad/full.txt.gz"), "rb");
        char buf[256];
        size_t n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        remove(p);
        put("bad/trunc.txt.gz", buf, n / 2);
    }
    /* corrupt tar: random bytes, and a valid tar cut inside its second member */
    {
        uint64_t seed = 5;
        char junk[4096];
        for (size_t i = 0; i < sizeof(junk); i++) junk[i] = (char)pp_rand(&seed);
        put("bad/junk.tar", junk, sizeof(junk));
        const char *names[] = {"m1.txt", "m2.txt"};
        char big[3000];
        memset(big, 'q', sizeof(big) - 1);
        big[sizeof(big) - 1] = 0;
        const char *texts[] = {"First member text", big};
        write_tar("bad/cut.tar", 0, names, texts, 2);
        char p[4096];
        FILE *f = fopen(tpath(p, "bad/cut.tar"), "rb");
        static char tb[1 << 16];
        size_t n = fread(tb, 1, sizeof(tb), f);
        fclose(f);
        CU_ASSERT(n > 2500);
        put("bad/cut.tar", tb, 2500);
    }
    /* invalid UTF-8 / Latin-1 bytes and NUL bytes */
    put("bad/latin1.txt", "caf\xe9 na\xefve r\xe9sum\xe9", 17);
    put("bad/nul.txt", "alpha\0beta\0\0gamma", 17);
    /* a 200-byte token */
    {
        char t[260];
        memset(t, 'k', 200);
        memcpy(t + 200, " short words", 12);
        put("bad/longtok.txt", t, 212);
    }
    /* malformed SGML records: no end tag, no NEWID */
    const char *sg = "<REUTERS NEWID=\"1\"><TEXT><TITLE>Fine record</TITLE></TEXT></REUTERS>\n"
                     "<REUTERS OLDID=\"5\"><TEXT><BODY>no newid here</BODY></TEXT></REUTERS>\n"
                     "<REUTERS NEWID=\"3\"><TEXT><BODY>never closed</BODY></TEXT>\n"
                     "<REUTERS NEWID=\"4\"><TOPICS><D>grain</D></TOPICS><TEXT><BODY>Wheat &amp; "
                     "corn &lt;prices&gt;</BODY></TEXT></REUTERS>\n";
    put("bad/r.sgm", sg, strlen(sg));
    /* an unreadable file (only meaningful when not running as root) */
    put("bad/secret.txt", "hidden", 6);
    char p[4096];
    chmod(tpath(p, "bad/secret.txt"), 0);
    int root = geteuid() == 0;

    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "bad", DM_PP_FORMAT_AUTO, DM_PP_LABELS_FORMAT), 0);
    for (uint64_t i = 0; i < s.stats.n_messages && i < DM_PP_MAX_MESSAGES; i++)
        printf("\n    %s", s.stats.messages[i]);
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_EMPTY_FILE], 1);
    CU_ASSERT(has_message(&s.stats, "empty.txt"));
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_CORRUPT_GZIP], 1);
    CU_ASSERT(has_message(&s.stats, "trunc.txt.gz"));
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_CORRUPT_ARCHIVE], 2);
    CU_ASSERT(has_message(&s.stats, "junk.tar"));
    CU_ASSERT(has_message(&s.stats, "cut.tar"));
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_BAD_SGML], 2);
    CU_ASSERT(has_message(&s.stats, "r.sgm: record 2"));
    CU_ASSERT(has_message(&s.stats, "r.sgm: record 3"));
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_UNREADABLE], root ? 0 : 1);
    CU_ASSERT_EQUAL(s.stats.invalid_utf8, 4);

    CU_ASSERT_EQUAL(s.stats.nul_bytes, 3);
    CU_ASSERT_EQUAL(s.stats.tokens_long, 1);
    /* documents: good, latin1, nul, longtok, r.sgm #1 and #4, cut.tar/m1.txt, secret if root */
    size_t want = 7 + (root ? 1 : 0);
    CU_ASSERT_EQUAL(s.n_docs, want);
    char st[256];
    size_t d = find_doc(&s, "latin1.txt");
    doc_stems(st, sizeof(st), &s, d);
    CU_ASSERT_STRING_EQUAL(st, "caf na ve sum"); /* U+FFFD separates; "r" is too short */
    d = find_doc(&s, "nul.txt");
    doc_stems(st, sizeof(st), &s, d);
    CU_ASSERT_STRING_EQUAL(st, "alpha beta gamma");
    d = find_doc(&s, "longtok.txt");
    doc_stems(st, sizeof(st), &s, d);
    CU_ASSERT_STRING_EQUAL(st, "short word");
    d = find_doc(&s, "4");
    CU_ASSERT_STRING_EQUAL(dm_token_stream_labels(&s, d), "grain");
    doc_stems(st, sizeof(st), &s, d);
    CU_ASSERT_STRING_EQUAL(st, "wheat corn price");
    CU_ASSERT(find_doc(&s, "cut.tar/m1.txt") != (size_t)-1);
    dm_token_stream_free(&s);
}

static void test_empty_corpus(void)
{
    mkdirs("nothing");
    put("nothing/empty.txt", "", 0);
    dm_token_stream s;
    char p[4096];
    /* a corpus without documents is bad data (exit 1), not a usage error, and says why */
    CU_ASSERT_EQUAL(run_pp(&s, "nothing", DM_PP_FORMAT_AUTO, DM_PP_LABELS_FORMAT), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), tpath(p, "nothing")));
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "no documents"));
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "empty_file"));
    mkdirs("void");
    CU_ASSERT_EQUAL(run_pp(&s, "void", DM_PP_FORMAT_AUTO, DM_PP_LABELS_FORMAT), DM_ERR_FORMAT);
    CU_ASSERT_EQUAL(run_pp(&s, "does-not-exist", DM_PP_FORMAT_AUTO, DM_PP_LABELS_FORMAT), DM_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "does-not-exist"));
}

/* A 100 MB single document is processed whole, never truncated. */
static void test_huge_document(void)
{
    const char unit[] = "alpha beta gamma "; /* 17 bytes, 3 tokens */
    size_t reps = (100u << 20) / (sizeof(unit) - 1) + 1;
    size_t len = reps * (sizeof(unit) - 1);
    char *big = malloc(len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    for (size_t i = 0; i < reps; i++) memcpy(big + i * (sizeof(unit) - 1), unit, sizeof(unit) - 1);
    mkdirs("huge");
    put("huge/big.txt", big, len);
    free(big);
    dm_token_stream s;
    char p[4096];
    dm_preprocess_options o = DM_PREPROCESS_OPTIONS_INIT;
    o.backend = 1;
    o.batch_bytes = 1 << 20; /* much smaller than the document */
    CU_ASSERT_EQUAL_FATAL(dm_preprocess(&s, NULL, NULL, tpath(p, "huge"), &o), 0);
    CU_ASSERT_EQUAL(s.n_docs, 1);
    CU_ASSERT_EQUAL(s.n_tokens, 3 * reps);
    CU_ASSERT_EQUAL(s.n_terms, 3);
    CU_ASSERT_EQUAL(s.stats.bytes_read, len);
    dm_token_stream_free(&s);
}

static void test_split_by_bytes(void)
{
    dm_pp_file f[7];
    uint64_t sizes[7] = {100, 0, 5000, 10, 10, 3000, 200};
    for (int i = 0; i < 7; i++) f[i].size = sizes[i];
    dm_pp_file_list l = {f, 7, 7};
    for (int size = 1; size <= 9; size++) {
        size_t next = 0;
        for (int r = 0; r < size; r++) {
            size_t b, e;
            dm_pp_split_by_bytes(&b, &e, &l, r, size);
            CU_ASSERT(b <= e);
            if (e > b) {
                CU_ASSERT_EQUAL(b, next); /* contiguous, in rank order */
                next = e;
            }
        }
        CU_ASSERT_EQUAL(next, 7); /* every file exactly once */
    }
}

/* ---------------------------------------------------------------- reader threads */

static int same_stream(const dm_token_stream *a, const dm_token_stream *b)
{
    if (a->n_docs != b->n_docs || a->n_tokens != b->n_tokens || a->n_terms != b->n_terms) return 0;
    if (memcmp(a->tok_off, b->tok_off, 8 * (a->n_docs + 1)) || memcmp(a->hashes, b->hashes, 8 * a->n_tokens) ||
        memcmp(a->id_off, b->id_off, 8 * (a->n_docs + 1)) || memcmp(a->ids, b->ids, a->id_off[a->n_docs]) ||
        memcmp(a->labels, b->labels, a->label_off[a->n_docs]) ||
        memcmp(a->term_hash, b->term_hash, 8 * a->n_terms) ||
        memcmp(a->term_bytes, b->term_bytes, a->term_off[a->n_terms]))
        return 0;
    const dm_pp_stats *x = &a->stats, *y = &b->stats;
    if (x->files_read != y->files_read || x->bytes_read != y->bytes_read || x->invalid_utf8 != y->invalid_utf8 ||
        x->nul_bytes != y->nul_bytes || x->tokens_stop != y->tokens_stop || x->n_messages != y->n_messages ||
        memcmp(x->skipped, y->skipped, sizeof(x->skipped)))
        return 0;
    for (uint64_t i = 0; i < x->n_messages && i < DM_PP_MAX_MESSAGES; i++)
        if (strcmp(x->messages[i], y->messages[i])) return 0;
    return 1;
}

/* The stream, its counters and its messages (in order) do not depend on the number of reader
 * threads, on the batch size, on the readers' window or on the stream builder's prefault threads
 * (the fifth run is without them): files of several pieces (a 9 MB JSONL file, pieces of 2 MB, at
 * most 4 held per file) between small files, bad files and, in strict mode, the same first error
 * in file order whatever the timing. */
static void test_reader_threads(void)
{
    mkdirs("thr/b");
    char *big = malloc(10u << 20);
    size_t l = 0;
    uint64_t seed = 11;
    size_t lines = 0, bad_lines = 0;
    static const char *w[] = {"market", "prices", "rose", "naïve", "données", "the", "oil", "1987", "Straße"};
    for (int line = 0; l < (9u << 20); line++, lines++) {
        l += (size_t)sprintf(big + l, "{\"id\":\"j%d\",\"text\":\"", line);
        for (int k = 0; k < 300; k++) l += (size_t)sprintf(big + l, "%s ", w[pp_rand(&seed) % 9]);
        l += (size_t)sprintf(big + l, "\",\"label\":\"L%d\"}\n", line % 7);
        if (line % 1000 == 999) l += (size_t)sprintf(big + l, "{not json}\n"), bad_lines++; /* counted */
    }
    put("thr/b/big.jsonl", big, l);
    free(big);
    for (int f = 0; f < 40; f++) {
        char rel[64], t[256];
        snprintf(rel, sizeof(rel), "thr/%c%02d.txt", f < 20 ? 'a' : 'c', f);
        int n = snprintf(t, sizeof(t), "document %d about oil prices and the market", f);
        put(rel, t, f % 9 == 4 ? 0 : (size_t)n); /* some empty files: counted skips */
    }
    put("thr/c99.jsonl", "{\"id\":\"x\"}\n{\"id\":\"y\",\"text\":\"fine\"}\n", 36);
    char p[4096];
    dm_token_stream ref;
    int rc_ref = 0;
    char strict_msg[512] = "";
    for (int strict = 0; strict <= 1; strict++) {
        for (int k = 0; k < 7; k++) {
            static const int threads[7] = {1, 2, 3, 8, 1, 4, 2};
            static const size_t batch[7] = {0, 0, 3000, 100000, 1 << 20, 3000, 50000};
            static const int workers[7] = {0, 1, 2, 8, 0, 3, 9}; /* 0: default (4); 9: at most 8 */
            static const int window[7] = {0, 1, 16, 1, 3, 0, 100}; /* 0: default (2); 100: at most 64 */
            dm_preprocess_options o = DM_PREPROCESS_OPTIONS_INIT;
            o.reader.strict = strict;
            o.backend = 1; /* DM_BACKEND_CPU */
            o.threads = threads[k];
            o.batch_bytes = batch[k];
            o.workers = workers[k];
            o.window = window[k];
            o.no_prefault = k == 4;
            dm_token_stream s;
            int rc = dm_preprocess(&s, NULL, NULL, tpath(p, "thr"), &o);
            if (strict) {
                CU_ASSERT(rc < 0);
                if (k == 0) {
                    rc_ref = rc;
                    snprintf(strict_msg, sizeof(strict_msg), "%s", dm_error_message());
                    printf("\n    strict: %s", strict_msg);
                    CU_ASSERT(strstr(strict_msg, "a04.txt") != NULL); /* the first bad file in order */
                } else {
                    CU_ASSERT_EQUAL(rc, rc_ref);
                    CU_ASSERT_STRING_EQUAL(dm_error_message(), strict_msg);
                }
                continue;
            }
            CU_ASSERT_EQUAL_FATAL(rc, 0);
            if (k == 0) {
                ref = s;
                printf("\n    %zu docs, %zu tokens, %llu skipped, %llu messages", s.n_docs, s.n_tokens,
                       (unsigned long long)dm_pp_stats_skipped_total(&s.stats),
                       (unsigned long long)s.stats.n_messages);
                CU_ASSERT_EQUAL(s.n_docs, lines + 36 + 1); /* big.jsonl, 40 - 4 empty files, c99 */
                CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_BAD_JSON], bad_lines + 1);
                CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_EMPTY_FILE], 4);
                continue;
            }
            CU_ASSERT(same_stream(&ref, &s));
            dm_token_stream_free(&s);
        }
    }
    dm_token_stream_free(&ref);
}

/* A batch whose worker fails (a tokeniser error, injected) while other batches are in flight ends
 * the run with that error on any number of workers: the batches behind it still take their turn
 * in the commit order, so nothing waits forever; a failure set past the last batch changes nothing. */
static void test_worker_failure(void)
{
    mkdirs("wf");
    uint64_t seed = 5;
    static const char *w[] = {"market", "prices", "rose", "oil", "wheat", "corn", "shares", "bank"};
    char *t = malloc(64 << 10);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    /* 32 files of 64 KB (a batch each: a file's text is one reader's piece), documents of about
     * 100 bytes */
    for (int f = 0, d = 0; f < 32; f++) {
        size_t l = 0;
        while (l < (64u << 10) - 256) {
            l += (size_t)sprintf(t + l, "d%d\tL%d\t", d, d % 3);
            for (int k = 0; k < 14; k++) l += (size_t)sprintf(t + l, "%s ", w[pp_rand(&seed) % 8]);
            t[l - 1] = '\n';
            d++;
        }
        char rel[32];
        snprintf(rel, sizeof rel, "wf/f%02d.tsv", f);
        put(rel, t, l);
    }
    free(t);
    char p[4096];
    dm_preprocess_options o = DM_PREPROCESS_OPTIONS_INIT;
    o.backend = 1; /* DM_BACKEND_CPU */
    o.batch_bytes = 100000; /* 32 batches */
    dm_token_stream ref, s;
    CU_ASSERT_EQUAL_FATAL(dm_preprocess(&ref, NULL, NULL, tpath(p, "wf"), &o), 0);
    static const int fail[] = {1, 2, 7, 25, 1, 13};
    static const int workers[] = {4, 8, 1, 4, 2, 8};
    for (int k = 0; k < 6; k++) {
        o.fail_batch = fail[k];
        o.workers = workers[k];
        int rc = dm_preprocess(&s, NULL, NULL, tpath(p, "wf"), &o);
        CU_ASSERT_EQUAL(rc, DM_ERR_IO);
        char want[64];
        snprintf(want, sizeof want, "failure injected into batch %d", fail[k]);
        CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), want));
        if (rc == 0) dm_token_stream_free(&s);
    }
    o.fail_batch = 100000;
    o.workers = 4;
    CU_ASSERT_EQUAL_FATAL(dm_preprocess(&s, NULL, NULL, tpath(p, "wf"), &o), 0);
    CU_ASSERT(same_stream(&ref, &s));
    dm_token_stream_free(&s);
    dm_token_stream_free(&ref);
}

/* ---------------------------------------------------------------- ids, encodings, labels, messages */

/* The stems of the document with this id, or "(absent)". */
static const char *stems_of(char *out, size_t cap, const dm_token_stream *s, const char *id)
{
    size_t d = find_doc(s, id);
    if (d == (size_t)-1) snprintf(out, cap, "(absent)");
    else doc_stems(out, cap, s, d);
    return out;
}

static void append(const char *rel, const void *data, size_t len)
{
    char p[4096];
    FILE *f = fopen(tpath(p, rel), "ab");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* A member's id is its path without "." and empty components: `tar czf x.tgz -C dir .` gives the
 * ids (and --labels dir labels) of the tree's own names, not "x.tgz/./a.txt"; a member whose id an
 * earlier member of the archive has (the same path twice, "./a.txt" after "a.txt") gets "#2",
 * "#3", ... so ids stay unique. */
static void test_member_ids(void)
{
    mkdirs("mid/src/sub");
    mkdirs("mid/c");
    put("mid/src/a.txt", "oil crude", 9);
    put("mid/src/sub/b.txt", "wheat grain", 11);
    char p[4096], q[4096], cmd[9000], st[256];
    snprintf(cmd, sizeof(cmd), "tar czf '%s' -C '%s' .", tpath(p, "mid/c/x.tgz"), tpath(q, "mid/src"));
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "mid/c", DM_PP_FORMAT_AUTO, DM_PP_LABELS_DIR), 0);
    CU_ASSERT_EQUAL(s.n_docs, 2);
    CU_ASSERT_STRING_EQUAL(stems_of(st, sizeof(st), &s, "x.tgz/a.txt"), "oil crude");
    CU_ASSERT_STRING_EQUAL(stems_of(st, sizeof(st), &s, "x.tgz/sub/b.txt"), "wheat grain");
    size_t d = find_doc(&s, "x.tgz/sub/b.txt");
    if (d != (size_t)-1) CU_ASSERT_STRING_EQUAL(dm_token_stream_labels(&s, d), "sub");
    dm_token_stream_free(&s);

    const ar_member m[] = {{"a.txt", "oil", 0, 0, NULL, NULL},
                           {"./a.txt", "wheat", 0, 0, NULL, NULL},
                           {"a.txt#2", "corn", 0, 0, NULL, NULL},
                           {"b//c/./d.txt", "bank", 0, 0, NULL, NULL},
                           {"a.txt", "loan", 0, 0, NULL, NULL},
                           {"/e.txt", "rate", 0, 0, NULL, NULL}};
    CU_ASSERT_EQUAL_FATAL(write_archive("mid/d.tar", "paxr", NULL, m, 6), 0);
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "mid/d.tar", DM_PP_FORMAT_AUTO, DM_PP_LABELS_NONE), 0);
    CU_ASSERT_EQUAL(s.n_docs, 6);
    CU_ASSERT_STRING_EQUAL(stems_of(st, sizeof(st), &s, "d.tar/a.txt"), "oil");
    CU_ASSERT_STRING_EQUAL(stems_of(st, sizeof(st), &s, "d.tar/a.txt#2"), "wheat");
    CU_ASSERT_STRING_EQUAL(stems_of(st, sizeof(st), &s, "d.tar/a.txt#2#2"), "corn");
    CU_ASSERT_STRING_EQUAL(stems_of(st, sizeof(st), &s, "d.tar/b/c/d.txt"), "bank");
    CU_ASSERT_STRING_EQUAL(stems_of(st, sizeof(st), &s, "d.tar/a.txt#3"), "loan");
    CU_ASSERT_STRING_EQUAL(stems_of(st, sizeof(st), &s, "d.tar/e.txt"), "rate");
    dm_token_stream_free(&s);
}

/* The ids of many members of one name: "a.txt", "a.txt#2", ... "a.txt#N", each found in
 * constant time. The search for a free "#i" started at #2 for every member (O(n^2)): 30,000
 * members took far more than 10 s (fuzz_readers: a 62 KB .tar.gz of 28,000 empty "a.txt"
 * members ran past its 20 s timeout); now well under a second. */
typedef struct dup_ids {
    size_t n;
    char first[64], second[64], last[64];
} dup_ids;

static int collect_dup_ids(void *user, const dm_raw_doc *d)
{
    dup_ids *u = user;
    char *to = u->n == 0 ? u->first : u->n == 1 ? u->second : u->last;
    snprintf(to, 64, "%s", d->id);
    u->n++;
    return 0;
}

static void test_member_ids_many_duplicates(void)
{
    enum { N = 30000 };
    size_t len = (size_t)N * 1024 + 1024;
    unsigned char *tar = calloc(len, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tar);
    for (size_t i = 0; i < N; i++) { /* a ustar header of "a.txt" of 1 byte, then its block "w" */
        unsigned char *h = tar + i * 1024;
        strcpy((char *)h, "a.txt");
        memcpy(h + 100, "0000644", 8);
        memcpy(h + 108, "0000000", 8);
        memcpy(h + 116, "0000000", 8);
        memcpy(h + 124, "00000000001", 12);
        memcpy(h + 136, "00000000000", 12);
        h[156] = '0';
        memcpy(h + 257, "ustar", 6);
        memcpy(h + 263, "00", 2);
        memset(h + 148, ' ', 8);
        unsigned sum = 0;
        for (int k = 0; k < 512; k++) sum += h[k];
        snprintf((char *)h + 148, 8, "%06o", sum);
        h[155] = ' ';
        h[512] = 'w';
    }
    dm_reader_options o = DM_READER_OPTIONS_INIT;
    dm_pp_stats st;
    memset(&st, 0, sizeof st);
    dup_ids u;
    memset(&u, 0, sizeof u);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CU_ASSERT_EQUAL(dm_pp_read_buffer("x.tar", tar, len, &o, &st, collect_dup_ids, &u), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    free(tar);
    CU_ASSERT_EQUAL(u.n, N);
    CU_ASSERT_STRING_EQUAL(u.first, "x.tar/a.txt");
    CU_ASSERT_STRING_EQUAL(u.second, "x.tar/a.txt#2");
    CU_ASSERT_STRING_EQUAL(u.last, "x.tar/a.txt#30000");
    CU_ASSERT(s < 10.0);
    if (s >= 10.0) printf("\n    %d members of one name: %.1f s", (int)N, s);
}

/* Trailing garbage after the last gzip member loses nothing of the data before it (gzip(1): the
 * data, and "trailing garbage ignored"): the documents are read and the garbage is counted
 * (corrupt_gzip) with a message; --strict makes it an error. Zero padding stays silent, and a
 * second member that is corrupt still skips the file. */
static void test_gzip_trailing_garbage(void)
{
    mkdirs("tg");
    put_gz("tg/a.txt.gz", "oil crude", 9);
    append("tg/a.txt.gz", "garbage\n", 8);
    const char *j = "{\"id\":\"j1\",\"text\":\"wheat\"}\n{\"id\":\"j2\",\"text\":\"corn\"}\n";
    put_gz("tg/n.jsonl.gz", j, strlen(j));
    append("tg/n.jsonl.gz", "\n", 1);
    static const char zeros[100];
    put_gz("tg/z.txt.gz", "bank loan", 9);
    append("tg/z.txt.gz", zeros, sizeof zeros);
    append("tg/z.txt.gz", "x", 1);
    put_gz("tg/pad.txt.gz", "rate", 4);
    append("tg/pad.txt.gz", zeros, sizeof zeros);
    put_gz("tg/bad2.txt.gz", "price", 5);
    append("tg/bad2.txt.gz", "\x1f\x8b\x08\x00junkjunkjunk", 16);
    dm_token_stream s;
    char st[256];
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "tg", DM_PP_FORMAT_AUTO, DM_PP_LABELS_NONE), 0);
    for (uint64_t i = 0; i < s.stats.n_messages && i < DM_PP_MAX_MESSAGES; i++)
        printf("\n    %s", s.stats.messages[i]);
    CU_ASSERT_EQUAL(s.n_docs, 5);
    CU_ASSERT_STRING_EQUAL(stems_of(st, sizeof(st), &s, "a.txt"), "oil crude");
    CU_ASSERT_STRING_EQUAL(stems_of(st, sizeof(st), &s, "j1"), "wheat");
    CU_ASSERT_STRING_EQUAL(stems_of(st, sizeof(st), &s, "j2"), "corn");
    CU_ASSERT_STRING_EQUAL(stems_of(st, sizeof(st), &s, "z.txt"), "bank loan");
    CU_ASSERT_STRING_EQUAL(stems_of(st, sizeof(st), &s, "pad.txt"), "rate");
    CU_ASSERT_EQUAL(find_doc(&s, "bad2.txt"), (size_t)-1);
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_CORRUPT_GZIP], 4);
    CU_ASSERT(has_message(&s.stats, "a.txt.gz: 8 bytes of trailing garbage after the gzip data (at byte"));
    CU_ASSERT(has_message(&s.stats, "n.jsonl.gz: 1 byte of trailing garbage after the gzip data"));
    CU_ASSERT(has_message(&s.stats, "z.txt.gz: 101 bytes of trailing garbage"));
    CU_ASSERT(has_message(&s.stats, "(trailing garbage ignored)"));
    CU_ASSERT(has_message(&s.stats, "bad2.txt.gz: corrupt gzip data"));
    CU_ASSERT_EQUAL(s.stats.bytes_read, 9 + strlen(j) + 9 + 4);
    dm_token_stream_free(&s);
    char p[4096];
    dm_preprocess_options o = DM_PREPROCESS_OPTIONS_INIT;
    o.reader.strict = 1;
    o.backend = 1;
    CU_ASSERT_EQUAL(dm_preprocess(&s, NULL, NULL, tpath(p, "tg/a.txt.gz"), &o), DM_ERR_FORMAT);
    printf("\n    strict: %s", dm_error_message());
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "a.txt.gz: 8 bytes of trailing garbage"));
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "(--strict)"));
    CU_ASSERT_PTR_NULL(strstr(dm_error_message(), "ignored"));
}

/* s (ASCII) in UTF-16 or UTF-32 (unit 2 or 4 bytes), little- or big-endian, without a BOM. */
static size_t wide(char *out, const char *s, int unit, int big)
{
    size_t n = 0;
    for (; *s; s++)
        for (int k = 0; k < unit; k++) out[n++] = (char)(k == (big ? unit - 1 : 0) ? *s : 0);
    return n;
}

/* UTF-16 and UTF-32 without a byte-order mark (text of Latin script: NUL bytes at every other or
 * three of four places) are skipped as not_text like the byte-order-mark case, and so are such
 * files (and compressed data) named .tsv, .jsonl or .sgm, which their readers took for documents
 * of garbage, bad lines or nothing; text with a few NUL bytes is still read. */
static void test_utf16_without_bom(void)
{
    mkdirs("wide");
    const char *t = "Oil prices rose as crude stocks fell\n";
    char b[1024];
    static const struct {
        const char *rel;
        int unit, big;
    } f[] = {{"wide/u16le.txt", 2, 0}, {"wide/u16be.txt", 2, 1}, {"wide/u32le.txt", 4, 0}, {"wide/u32be.txt", 4, 1}};
    for (int i = 0; i < 4; i++) put(f[i].rel, b, wide(b, t, f[i].unit, f[i].big));
    put("wide/u16.tsv", b, wide(b, "t1\tL\toil crude\nt2\tM\twheat\n", 2, 0));
    put("wide/u16.jsonl", b, wide(b, "{\"id\":\"j\",\"text\":\"oil crude\"}\n", 2, 1));
    put("wide/u16.sgm", b,
        wide(b, "<REUTERS NEWID=\"9\"><TEXT><BODY>oil crude</BODY></TEXT></REUTERS>\n", 2, 0));
    memcpy(b, "\0\0\xfe\xff", 4);
    put("wide/bom32.txt", b, 4 + wide(b + 4, t, 4, 1));
    put_gz("wide/gz.tsv", "t1\tL\toil crude\n", 15);
    put("wide/nul.txt", "oil\0crude\0wheat corn bank loan rate price\0", 42);
    put("wide/short.txt", "ab\0", 3);
    dm_token_stream s;
    char st[256];
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "wide", DM_PP_FORMAT_AUTO, DM_PP_LABELS_FORMAT), 0);
    for (uint64_t i = 0; i < s.stats.n_messages && i < DM_PP_MAX_MESSAGES; i++)
        printf("\n    %s", s.stats.messages[i]);
    CU_ASSERT_EQUAL(s.n_docs, 2);
    CU_ASSERT_STRING_EQUAL(stems_of(st, sizeof(st), &s, "nul.txt"), "oil crude wheat corn bank loan rate price");
    CU_ASSERT(find_doc(&s, "short.txt") != (size_t)-1);
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_NOT_TEXT], 9);
    CU_ASSERT_EQUAL(dm_pp_stats_skipped_total(&s.stats), 9);
    CU_ASSERT(has_message(&s.stats, "u16le.txt: UTF-16LE text without a byte-order mark (only UTF-8 is read), not text"));
    CU_ASSERT(has_message(&s.stats, "u16be.txt: UTF-16BE text without a byte-order mark"));
    CU_ASSERT(has_message(&s.stats, "u32le.txt: UTF-32LE text without a byte-order mark"));
    CU_ASSERT(has_message(&s.stats, "u32be.txt: UTF-32BE text without a byte-order mark"));
    CU_ASSERT(has_message(&s.stats, "u16.tsv: UTF-16LE text"));
    CU_ASSERT(has_message(&s.stats, "u16.jsonl: UTF-16BE text"));
    CU_ASSERT(has_message(&s.stats, "u16.sgm: UTF-16LE text"));
    CU_ASSERT(has_message(&s.stats, "bom32.txt: UTF-32 text (only UTF-8 is read)"));
    CU_ASSERT(has_message(&s.stats, "gz.tsv: gzip data, not text"));
    dm_token_stream_free(&s);
}

/* Labels are kept joined by commas and split at every comma downstream (classes, exports), so a
 * JSONL array element or a Reuters topic holding a comma would become two labels: its record is
 * skipped (bad_json / bad_sgml) naming file, line or record and the label. A JSONL string label is
 * labels joined by commas as written (as in TSV); null and "" are no label; a label that is not a
 * string or a number, and an id or label holding a NUL, are skipped likewise, never dropped or
 * cut in silence. */
static void test_label_commas(void)
{
    mkdirs("lab");
    const char *j = "{\"id\":\"a\",\"text\":\"oil\",\"labels\":[\"x,y\",\"z\"]}\n"
                    "{\"id\":\"b\",\"text\":\"oil\",\"label\":\"p,q\"}\n"
                    "{\"id\":\"c\",\"text\":\"oil\",\"labels\":[\"\",null,\"r\",5]}\n"
                    "{\"id\":\"d\",\"text\":\"oil\",\"label\":true}\n"
                    "{\"id\":\"e\",\"text\":\"oil\",\"labels\":[\"s\",{\"k\":1}]}\n"
                    "{\"id\":\"f\\u0000g\",\"text\":\"oil\"}\n"
                    "{\"id\":\"h\",\"text\":\"oil\",\"label\":\"u\\u0000v\"}\n"
                    "{\"id\":\"i\",\"text\":\"oil\",\"label\":null}\n"
                    "{\"id\":\"k\",\"text\":\"oil\",\"labels\":[\"t\",\"\"]}\n";
    put("lab/l.jsonl", j, strlen(j));
    const char *sg = "<REUTERS NEWID=\"1\"><TOPICS><D>a,b</D></TOPICS><TEXT><BODY>oil</BODY></TEXT></REUTERS>\n"
                     "<REUTERS NEWID=\"2\"><TOPICS><D></D><D>grain</D></TOPICS><TEXT><BODY>oil</BODY></TEXT></REUTERS>\n"
                     "<REUTERS NEWID=\"3\"><TOPICS><D>x&#44;y</D></TOPICS><TEXT><BODY>oil</BODY></TEXT></REUTERS>\n";
    put("lab/r.sgm", sg, strlen(sg));
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "lab", DM_PP_FORMAT_AUTO, DM_PP_LABELS_FORMAT), 0);
    for (uint64_t i = 0; i < s.stats.n_messages && i < DM_PP_MAX_MESSAGES; i++)
        printf("\n    %s", s.stats.messages[i]);
    static const char *ids[] = {"b", "c", "i", "k", "2"}, *labels[] = {"p,q", "r,5", "", "t", "grain"};
    CU_ASSERT_EQUAL(s.n_docs, 5);
    for (int d = 0; d < 5; d++) {
        size_t k = find_doc(&s, ids[d]);
        CU_ASSERT_FATAL(k != (size_t)-1);
        CU_ASSERT_STRING_EQUAL(dm_token_stream_labels(&s, k), labels[d]);
    }
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_BAD_JSON], 5);
    CU_ASSERT(has_message(&s.stats, "l.jsonl:1: label 1 of the array, \"x,y\", holds a comma"));
    CU_ASSERT(has_message(&s.stats, "l.jsonl:4: label is not a string, a number or an array of them"));
    CU_ASSERT(has_message(&s.stats, "l.jsonl:5: label 2 of the array is not a string or a number"));
    CU_ASSERT(has_message(&s.stats, "l.jsonl:6: id holds a NUL character"));
    CU_ASSERT(has_message(&s.stats, "l.jsonl:7: label holds a NUL character"));
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_BAD_SGML], 2);
    CU_ASSERT(has_message(&s.stats, "r.sgm: record 1 (NEWID 1): a <D> topic holds a comma"));
    CU_ASSERT(has_message(&s.stats, "r.sgm: record 3 (NEWID 3): a <D> topic holds a comma"));
    dm_token_stream_free(&s);
}

/* Messages name the file by the path as given (--corpus, then the folders down to it), the member
 * of an archive as the archive lists it, and the line: what a user opens to find it, the same
 * for a skip at the listing, in a .gz, in an archive or in a JSONL line. Ids stay relative to the
 * corpus (a JSONL record without "id" is "FILE:LINE" with FILE as the corpus names it, without .gz). */
static void test_message_paths(void)
{
    mkdirs("mp/sub");
    const char *j = "{\"text\":\"oil\"}\n{bad\n";
    put_gz("mp/sub/x.jsonl.gz", j, strlen(j));
    const ar_member m[] = {{"./docs/b.jsonl", "{bad\n{\"text\":\"wheat\"}\n", 0, 0, NULL, NULL},
                           {"docs/c.tsv", "no tabs\n", 0, 0, NULL, NULL},
                           {"docs/e.txt", NULL, 0, 0, NULL, NULL}};
    CU_ASSERT_EQUAL_FATAL(write_archive("mp/a.tar.gz", "paxr", "gzip", m, 3), 0);
    put("mp/sub/y.tsv", "\tL\ttext\n", 8);
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "mp", DM_PP_FORMAT_AUTO, DM_PP_LABELS_FORMAT), 0);
    for (uint64_t i = 0; i < s.stats.n_messages && i < DM_PP_MAX_MESSAGES; i++)
        printf("\n    %s", s.stats.messages[i]);
    char want[8192], p[4096];
    snprintf(want, sizeof(want), "): %s:2: ", tpath(p, "mp/sub/x.jsonl.gz"));
    CU_ASSERT(has_message(&s.stats, want));
    snprintf(want, sizeof(want), "): %s: member ./docs/b.jsonl:1: ", tpath(p, "mp/a.tar.gz"));
    CU_ASSERT(has_message(&s.stats, want));
    snprintf(want, sizeof(want), "): %s: member docs/c.tsv:1: expected id<TAB>label<TAB>text", tpath(p, "mp/a.tar.gz"));
    CU_ASSERT(has_message(&s.stats, want));
    snprintf(want, sizeof(want), "): %s: member docs/e.txt: empty file", tpath(p, "mp/a.tar.gz"));
    CU_ASSERT(has_message(&s.stats, want));
    snprintf(want, sizeof(want), "): %s:1: empty id", tpath(p, "mp/sub/y.tsv"));
    CU_ASSERT(has_message(&s.stats, want));
    CU_ASSERT_EQUAL(s.n_docs, 2);
    CU_ASSERT(find_doc(&s, "sub/x.jsonl:1") != (size_t)-1);
    CU_ASSERT(find_doc(&s, "a.tar.gz/docs/b.jsonl:2") != (size_t)-1);
    dm_token_stream_free(&s);
}

/* The hostile review's findings: a TSV id or label with a NUL byte (cut at the NUL, two ids became
 * one) and a TSV line with an empty id are counted bad_tsv saying so; an .sgm file without any
 * record (its text went unread and unsaid) and a NEWID too long to keep are counted bad_sgml
 * saying so. */
static void test_hostile_review(void)
{
    mkdirs("hr");
    put("hr/t.tsv", "a\0b\tL\toil\nc\tL\0M\toil\nd\tL\twheat\n", 29);
    const char *h = "<!DOCTYPE lewis SYSTEM \"lewis.dtd\">\nno records, only text\n";
    put("hr/h.sgm", h, strlen(h));
    char sg[512];
    int n = snprintf(sg, sizeof(sg), "<REUTERS NEWID=\"%070d\"><TEXT><BODY>oil</BODY></TEXT></REUTERS>\n"
                                     "<REUTERS NEWID=\"5\"><TEXT><BODY>corn</BODY></TEXT></REUTERS>\n", 7);
    put("hr/r.sgm", sg, (size_t)n);
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "hr", DM_PP_FORMAT_AUTO, DM_PP_LABELS_FORMAT), 0);
    for (uint64_t i = 0; i < s.stats.n_messages && i < DM_PP_MAX_MESSAGES; i++)
        printf("\n    %s", s.stats.messages[i]);
    CU_ASSERT_EQUAL(s.n_docs, 2);
    CU_ASSERT(find_doc(&s, "d") != (size_t)-1);
    CU_ASSERT(find_doc(&s, "5") != (size_t)-1);
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_BAD_TSV], 2);
    CU_ASSERT(has_message(&s.stats, "t.tsv:1: NUL byte in the id or the label"));
    CU_ASSERT(has_message(&s.stats, "t.tsv:2: NUL byte in the id or the label"));
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_BAD_SGML], 2);
    CU_ASSERT(has_message(&s.stats, "h.sgm: no <REUTERS> record in it: file skipped"));
    CU_ASSERT(has_message(&s.stats, "r.sgm: record 1 (byte 0): NEWID longer than 63 bytes"));
    dm_token_stream_free(&s);
}

/* A member whose data libarchive cannot give while the archive goes on (an encrypted zip member:
 * ARCHIVE_FAILED, not FATAL) is skipped alone, counted and named; the members after it are read
 * (it skipped the rest of the archive). */
static void test_unreadable_member(void)
{
    mkdirs("enc");
    /* a zip whose first member says it is encrypted (flag bit 0 in its local and central headers:
     * libarchive asks for a passphrase once the 12-byte encryption header is there) */
    const ar_member m[] = {{"one.txt", "oil crude barrel opec price market rate", 0, 0, NULL, NULL},
                           {"two.txt", "wheat grain", 0, 0, NULL, NULL}};
    CU_ASSERT_EQUAL_FATAL(write_archive("enc/e.zip", "zip", NULL, m, 2), 0);
    size_t len;
    char *z = read_back("enc/e.zip", &len);
    int flipped = 0;
    static const struct {
        const char *sig;
        size_t flags;
    } hdr[] = {{"PK\x03\x04", 6}, {"PK\x01\x02", 8}};
    for (int h = 0; h < 2; h++)
        for (size_t i = 0; i + 12 < len; i++)
            if (memcmp(z + i, hdr[h].sig, 4) == 0) { /* the first one: one.txt's */
                z[i + hdr[h].flags] |= 1;
                flipped++;
                break;
            }
    CU_ASSERT_EQUAL_FATAL(flipped, 2);
    put("enc/e.zip", z, len);
    free(z);
    dm_token_stream s;
    char st[256];
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "enc", DM_PP_FORMAT_AUTO, DM_PP_LABELS_NONE), 0);
    for (uint64_t i = 0; i < s.stats.n_messages && i < DM_PP_MAX_MESSAGES; i++)
        printf("\n    %s", s.stats.messages[i]);
    CU_ASSERT_EQUAL(s.n_docs, 1);
    CU_ASSERT_STRING_EQUAL(stems_of(st, sizeof(st), &s, "e.zip/two.txt"), "wheat grain");
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_CORRUPT_ARCHIVE], 1);
    CU_ASSERT(has_message(&s.stats, "e.zip: member one.txt: cannot read its data: "));
    CU_ASSERT(has_message(&s.stats, "(member skipped)"));
    dm_token_stream_free(&s);
}

/* A kept skip message holds a deep path, its line and the reason (400 bytes were cut at 256
 * before), and one longer than its buffer is cut before a UTF-8 character, never inside one (the
 * report's JSON would refuse the message). */
static void test_message_length(void)
{
    dm_pp_stats st;
    memset(&st, 0, sizeof st);
    char path[401];
    memset(path, 'd', 400);
    path[400] = 0;
    dm_pp_stats_skip(&st, DM_PP_SKIP_BAD_JSON, "%s.jsonl:12: not a JSON object", path);
    CU_ASSERT_PTR_NOT_NULL(strstr(st.messages[0], ".jsonl:12: not a JSON object"));
    char word[1200] = "";
    for (int k = 0; k < 1000; k += 2) strcat(word, "\xc3\xa9"); /* e acute, 2 bytes each */
    for (int off = 0; off < 3; off++) { /* the cut falls on each byte of a character */
        memset(&st, 0, sizeof st);
        dm_pp_stats_skip(&st, DM_PP_SKIP_BAD_JSON, "%.*s%s", off, "xxx", word);
        const char *m = st.messages[0];
        size_t n = strlen(m);
        CU_ASSERT_TRUE(n < DM_PP_MESSAGE_LEN && n >= DM_PP_MESSAGE_LEN - 3);
        /* ends with a whole character: the last lead byte 0xc3 is followed by its 0xa9 */
        const char *lead = strrchr(m, '\xc3');
        CU_ASSERT_TRUE(lead && lead + 2 == m + n && (unsigned char)lead[1] == 0xa9);
    }
}

/* A folder is read once, whichever ways lead to it. A link to a folder that holds it is a loop
 * (symlink_loop: not followed); any other second way to a folder read before (a link beside its own
 * path, sorting before it; two links to one folder outside the corpus) is not read again and is
 * counted as duplicate_dir, naming the path it was read at: no document twice, and a folder
 * reached both ways keeps its own path (ids and --labels dir labels). Before, every second way was
 * called a loop, and the first way met, a link's, gave the ids and labels. */
static void test_dir_reached_twice(void)
{
    mkdirs("tw/news/sub");
    mkdirs("tw_ext");
    put("tw/news/a.txt", "oil crude", 9);
    put("tw/news/sub/b.txt", "wheat grain", 11);
    put("tw_ext/c.txt", "bank loan", 9);
    char p[4096], q[4096], want[8300];
    CU_ASSERT_EQUAL_FATAL(symlink(tpath(q, "tw/news"), tpath(p, "tw/all")), 0);     /* before news */
    CU_ASSERT_EQUAL_FATAL(symlink(tpath(q, "tw_ext"), tpath(p, "tw/l1")), 0);       /* two links to */
    CU_ASSERT_EQUAL_FATAL(symlink(tpath(q, "tw_ext"), tpath(p, "tw/l2")), 0);       /* one folder */
    CU_ASSERT_EQUAL_FATAL(symlink(tpath(q, "tw/news"), tpath(p, "tw/news/sub/up")), 0); /* loops */
    CU_ASSERT_EQUAL_FATAL(symlink(".", tpath(p, "tw_ext/self")), 0);
    dm_token_stream s;
    char st[256];
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "tw", DM_PP_FORMAT_AUTO, DM_PP_LABELS_DIR), 0);
    for (uint64_t i = 0; i < s.stats.n_messages && i < DM_PP_MAX_MESSAGES; i++) printf("\n    %s", s.stats.messages[i]);
    CU_ASSERT_EQUAL(s.n_docs, 3);
    static const char *ids[] = {"l1/c.txt", "news/a.txt", "news/sub/b.txt"};
    static const char *labels[] = {"l1", "news", "news"};
    for (size_t d = 0; d < 3 && d < s.n_docs; d++) {
        CU_ASSERT_STRING_EQUAL(dm_token_stream_id(&s, d), ids[d]);
        CU_ASSERT_STRING_EQUAL(dm_token_stream_labels(&s, d), labels[d]);
    }
    CU_ASSERT_STRING_EQUAL(stems_of(st, sizeof(st), &s, "news/a.txt"), "oil crude");
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_DUPLICATE_DIR], 2);
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_SYMLINK_LOOP], 2);
    CU_ASSERT_EQUAL(dm_pp_stats_skipped_total(&s.stats), 4);
    snprintf(want, sizeof(want), "tw/all: the folder %s, already read there (not read twice)", tpath(p, "tw/news"));
    CU_ASSERT(has_message(&s.stats, want));
    snprintf(want, sizeof(want), "tw/l2: the folder %s, already read there (not read twice)", tpath(p, "tw/l1"));
    CU_ASSERT(has_message(&s.stats, want));
    snprintf(want, sizeof(want), "tw/news/sub/up: symbolic link loop: leads back to %s, which holds it", tpath(p, "tw/news"));
    CU_ASSERT(has_message(&s.stats, want));
    CU_ASSERT(has_message(&s.stats, "tw/l1/self: symbolic link loop: leads back to "));
    CU_ASSERT_STRING_EQUAL(dm_pp_skip_name(DM_PP_SKIP_DUPLICATE_DIR), "duplicate_dir");
    dm_token_stream_free(&s);
    /* --strict: a second way to a folder is an error like every skip, naming it */
    dm_preprocess_options o = DM_PREPROCESS_OPTIONS_INIT;
    o.reader.strict = 1;
    o.backend = 1;
    CU_ASSERT_EQUAL(unlink(tpath(p, "tw/news/sub/up")), 0);
    CU_ASSERT_EQUAL(unlink(tpath(p, "tw_ext/self")), 0);
    CU_ASSERT_EQUAL(unlink(tpath(p, "tw/l2")), 0);
    CU_ASSERT_EQUAL(dm_preprocess(&s, NULL, NULL, tpath(p, "tw"), &o), DM_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "tw/all: the folder "));
    CU_ASSERT_EQUAL(unlink(tpath(p, "tw/all")), 0);
    CU_ASSERT_EQUAL_FATAL(dm_preprocess(&s, NULL, NULL, tpath(p, "tw"), &o), 0);
    CU_ASSERT_EQUAL(s.n_docs, 3);
    dm_token_stream_free(&s);
}

/* The walk's check for folders read before is a hash of (st_dev, st_ino): 150,000 folders list in
 * linear time (0.15 s of CPU on the 2-core build host; the list scanned for each folder took 3.3 s,
 * growing with the square). On tmpfs (/dev/shm), where folders cost no disk blocks; skipped
 * without it. */
static void test_walk_linear(void)
{
    char root[] = "/dev/shm/docmine-walk-XXXXXX", p[4200];
    if (!mkdtemp(root)) {
        printf("(no /dev/shm: skipped) ");
        return;
    }
    const int n_top = 150, n_sub = 1000;
    int ok = 1;
    for (int i = 0; ok && i < n_top; i++) {
        snprintf(p, sizeof(p), "%s/d%03d", root, i);
        ok = mkdir(p, 0700) == 0;
        for (int j = 0; ok && j < n_sub; j++) {
            snprintf(p, sizeof(p), "%s/d%03d/e%04d", root, i, j);
            ok = mkdir(p, 0700) == 0;
        }
    }
    snprintf(p, sizeof(p), "%s/d149/e0999/z.txt", root);
    ok = ok && pp_write_file(p, "oil", 3) == 0;
    if (ok) {
        dm_reader_options ro = DM_READER_OPTIONS_INIT;
        dm_pp_stats st;
        memset(&st, 0, sizeof st);
        dm_pp_file_list fl;
        struct rusage u0, u1;
        getrusage(RUSAGE_SELF, &u0);
        CU_ASSERT_EQUAL(dm_pp_list_files(&fl, root, &ro, &st), DM_OK);
        getrusage(RUSAGE_SELF, &u1);
        double cpu = (double)(u1.ru_utime.tv_sec - u0.ru_utime.tv_sec) + 1e-6 * (double)(u1.ru_utime.tv_usec - u0.ru_utime.tv_usec);
        printf("(%d folders listed in %.3f s of CPU) ", n_top * (n_sub + 1) + 1, cpu);
        CU_ASSERT(cpu < 1.5);
        CU_ASSERT_EQUAL(fl.n, 1);
        CU_ASSERT_EQUAL(dm_pp_stats_skipped_total(&st), 0);
        if (fl.n == 1) CU_ASSERT_STRING_EQUAL(fl.files[0].rel, "d149/e0999/z.txt");
        dm_pp_file_list_free(&fl);
    }
    CU_ASSERT(ok);
    char cmd[4300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

/* The gzip bytes of text (malloc'ed), through a file outside every corpus. */
static char *gz_bytes(const char *text, size_t *len)
{
    mkdirs("gzsrc");
    put_gz("gzsrc/t.gz", text, strlen(text));
    return read_back("gzsrc/t.gz", len);
}

/* Ids are unique in a corpus though compression suffixes are dropped from them: in byte order of
 * the paths, a file whose id a file before it has keeps its suffix ("a.txt.gz" beside "a.txt",
 * which sorts first; JSONL ids "FILE:LINE" too); a compressed file alone keeps the id it had
 * ("c.txt"). In an archive the same in member order, then "#2", "#3", ... (the same path twice);
 * such a member keeps the format of its name (a second "z.jsonl" is JSON Lines, a second
 * "y.txt.gz" gzip: before, "z.jsonl#2" was read as one text and "y.txt.gz#2" skipped as not text). */
static void test_ids_unique(void)
{
    mkdirs("uid");
    put("uid/a.txt", "oil crude", 9);
    put_gz("uid/a.txt.gz", "wheat grain", 11);
    put_gz("uid/c.txt.gz", "bank loan", 9);
    put("uid/j.jsonl", "{\"text\":\"corn\"}\n", 16);
    put_gz("uid/j.jsonl.gz", "{\"text\":\"rate\"}\n", 16);
    size_t l1, l2, l3;
    char *g1 = gz_bytes("sugar", &l1), *g2 = gz_bytes("copper", &l2), *g3 = gz_bytes("nickel", &l3);
    const ar_member m[] = {{"x.txt", "cocoa", 0, 0, NULL, NULL},
                           {"x.txt.gz", g1, l1, 0, NULL, NULL},
                           {"y.txt.gz", g2, l2, 0, NULL, NULL},
                           {"./y.txt.gz", g3, l3, 0, NULL, NULL},
                           {"z.jsonl", "{\"text\":\"zinc\"}\n{\"text\":\"lead\"}\n", 0, 0, NULL, NULL},
                           {"z.jsonl", "{\"text\":\"silver\"}\n", 0, 0, NULL, NULL},
                           {"z.jsonl", "{\"text\":\"gold\"}\n", 0, 0, NULL, NULL}};
    CU_ASSERT_EQUAL_FATAL(write_archive("uid/d.tar", "paxr", NULL, m, 7), 0);
    free(g1);
    free(g2);
    free(g3);
    dm_token_stream s;
    char st[256];
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "uid", DM_PP_FORMAT_AUTO, DM_PP_LABELS_NONE), 0);
    static const char *const want[][2] = {
        {"a.txt", "oil crude"},       {"a.txt.gz", "wheat grain"},  {"c.txt", "bank loan"},
        {"d.tar/x.txt", "cocoa"},     {"d.tar/x.txt.gz", "sugar"},  {"d.tar/y.txt", "copper"},
        {"d.tar/y.txt.gz", "nickel"}, {"d.tar/z.jsonl:1", "zinc"},  {"d.tar/z.jsonl:2", "lead"},
        {"d.tar/z.jsonl#2:1", "silver"}, {"d.tar/z.jsonl#3:1", "gold"}, {"j.jsonl:1", "corn"},
        {"j.jsonl.gz:1", "rate"}};
    size_t nw = sizeof(want) / sizeof(want[0]);
    CU_ASSERT_EQUAL(s.n_docs, nw);
    for (size_t i = 0; i < nw; i++) {
        CU_ASSERT_STRING_EQUAL(stems_of(st, sizeof(st), &s, want[i][0]), want[i][1]);
        if (strcmp(st, want[i][1]) != 0) printf("\n    %s: %s", want[i][0], st);
    }
    for (size_t a = 0; a < s.n_docs; a++)
        for (size_t b = a + 1; b < s.n_docs; b++)
            CU_ASSERT(strcmp(dm_token_stream_id(&s, a), dm_token_stream_id(&s, b)) != 0);
    CU_ASSERT_EQUAL(dm_pp_stats_skipped_total(&s.stats), 0);
    dm_token_stream_free(&s);
    /* the list says which files take another id: the ones a file before them has */
    char p[4096];
    dm_reader_options ro = DM_READER_OPTIONS_INIT;
    dm_pp_stats pst;
    memset(&pst, 0, sizeof pst);
    dm_pp_file_list fl;
    CU_ASSERT_EQUAL_FATAL(dm_pp_list_files(&fl, tpath(p, "uid"), &ro, &pst), DM_OK);
    CU_ASSERT_EQUAL_FATAL(fl.n, 6);
    static const char *const rel[] = {"a.txt", "a.txt.gz", "c.txt.gz", "d.tar", "j.jsonl", "j.jsonl.gz"};
    static const char *const id[] = {NULL, "a.txt.gz", NULL, NULL, NULL, "j.jsonl.gz"};
    for (size_t i = 0; i < 6; i++) {
        CU_ASSERT_STRING_EQUAL(fl.files[i].rel, rel[i]);
        if (id[i]) {
            CU_ASSERT_STRING_EQUAL(fl.files[i].id ? fl.files[i].id : "(null)", id[i]);
        } else {
            CU_ASSERT_PTR_NULL(fl.files[i].id);
        }
    }
    dm_pp_file_list_free(&fl);
}

/* --labels dir: an archive member's first folder is its label whole, however long (a tar path
 * component may pass 255 bytes, a name on disk cannot): two of 300 bytes that differ at byte 280
 * stay two labels (both were cut to the same 255 bytes). */
static void test_long_dir_label(void)
{
    mkdirs("ll");
    char d1[301], d2[301], n1[320], n2[320];
    memset(d1, 'L', 300);
    d1[300] = 0;
    memcpy(d2, d1, sizeof d2);
    d2[280] = 'M';
    snprintf(n1, sizeof n1, "%s/a.txt", d1);
    snprintf(n2, sizeof n2, "%s/b.txt", d2);
    const ar_member m[] = {{n1, "oil crude", 0, 0, NULL, NULL}, {n2, "wheat grain", 0, 0, NULL, NULL}};
    CU_ASSERT_EQUAL_FATAL(write_archive("ll/x.tar", "paxr", NULL, m, 2), 0);
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "ll", DM_PP_FORMAT_AUTO, DM_PP_LABELS_DIR), 0);
    CU_ASSERT_EQUAL_FATAL(s.n_docs, 2);
    CU_ASSERT_STRING_EQUAL(dm_token_stream_labels(&s, 0), d1);
    CU_ASSERT_STRING_EQUAL(dm_token_stream_labels(&s, 1), d2);
    dm_token_stream_free(&s);
}

/* --labels dir: a folder whose name holds a comma would read as two labels downstream (every
 * consumer splits at ','): its files, and the archive members under such a folder, are counted
 * skips (bad_label) naming the file; the other folders are read. */
static void test_dir_label_comma(void)
{
    mkdirs("lc/a,b");
    mkdirs("lc/c");
    put("lc/a,b/x.txt", "oil crude", 9);
    put("lc/c/y.txt", "wheat grain", 11);
    const ar_member m[] = {{"d,e/z.txt", "bank rate", 0, 0, NULL, NULL}, {"f/w.txt", "corn harvest", 0, 0, NULL, NULL}};
    CU_ASSERT_EQUAL_FATAL(write_archive("lc/m.tar", "paxr", NULL, m, 2), 0);
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "lc", DM_PP_FORMAT_AUTO, DM_PP_LABELS_DIR), 0);
    CU_ASSERT_EQUAL(s.n_docs, 2);
    for (size_t d = 0; d < s.n_docs; d++) CU_ASSERT_PTR_NULL(strchr(dm_token_stream_labels(&s, d), ','));
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_BAD_LABEL], 2);
    CU_ASSERT(has_message(&s.stats, "a,b/x.txt: --labels dir: its folder \"a,b\" holds a comma"));
    CU_ASSERT(has_message(&s.stats, "m.tar: member d,e/z.txt: --labels dir: its folder \"d,e\" holds a comma"));
    dm_token_stream_free(&s);
    /* without --labels dir the folder's name is no label: read */
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "lc", DM_PP_FORMAT_AUTO, DM_PP_LABELS_NONE), 0);
    CU_ASSERT_EQUAL(s.n_docs, 4);
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_BAD_LABEL], 0);
    dm_token_stream_free(&s);
}

/* A hard link's target and the members are compared as paths, as tar extracts them: a link to
 * "./a.txt" reads the member "a.txt" (it used to be skipped as a link whose target the archive
 * does not hold), and a link to "a.txt" reads the data of the latest of "a.txt" and "./a.txt". */
static void test_link_paths_cleaned(void)
{
    mkdirs("hp");
    const ar_member m[] = {{"a.txt", "oil crude", 9, 0, NULL, NULL},
                           {"l1.txt", NULL, 0, 0, "./a.txt", NULL},
                           {"./a.txt", "wheat grain", 11, 0, NULL, NULL},
                           {"l2.txt", NULL, 0, 0, "a.txt", NULL}};
    CU_ASSERT_EQUAL_FATAL(write_archive("hp/h.tar", "paxr", NULL, m, 4), 0);
    dm_token_stream s;
    CU_ASSERT_EQUAL_FATAL(run_pp(&s, "hp", DM_PP_FORMAT_AUTO, DM_PP_LABELS_NONE), 0);
    CU_ASSERT_EQUAL(s.stats.skipped[DM_PP_SKIP_CORRUPT_ARCHIVE], 0);
    CU_ASSERT_EQUAL_FATAL(s.n_docs, 4);
    /* documents in archive order: a.txt, l1.txt (a.txt's first data), a.txt#2, l2.txt (the latest) */
    const char *want[] = {"oil crude", "oil crude", "wheat grain", "wheat grain"};
    for (size_t d = 0; d < 4; d++) {
        long t0 = dm_token_stream_term_find(&s, s.hashes[s.tok_off[d]]);
        const char *first = t0 >= 0 ? (const char *)s.term_bytes + s.term_off[t0] : "";
        char stem[8];
        snprintf(stem, sizeof stem, "%.*s", 3, want[d]);
        CU_ASSERT_EQUAL(strncmp(first, stem, 3), 0);
    }
    dm_token_stream_free(&s);
}

int main(void)
{
    CU_TestInfo t[] = {
        {"split by bytes: contiguous, complete", test_split_by_bytes},
        {"directory tree: order, dir labels, symlink loop", test_dir_tree_labels_and_loops},
        {"JSONL and TSV, bad lines counted, strict", test_jsonl_tsv},
        {"gzip: concatenated members, padding, 1000:1, empty", test_gzip_members},
        {"tar.gz members", test_archives},
        {"archive hard links as the directory walk, symlinks and FIFOs counted", test_archive_links},
        {"tar.bz2/xz/zst, zip, .bz2/.xz/.zst; binary files counted", test_compressed_and_binary},
        {"archive member names over 4096 bytes", test_long_member_name},
        {"--format reuters: archives in a folder, ignored files counted", test_reuters_archive_in_dir},
        {"BOM, unclosed SGML elements, dir labels inside archives", test_bom_sgml_dir_labels},
        {"Reuters: records without end tag, '<' without '>': linear", test_reuters_linear},
        {"bad inputs: counted skips naming the file", test_bad_inputs},
        {"empty corpus and missing path", test_empty_corpus},
        {"100 MB single document", test_huge_document},
        {"reader threads: output independent of thread count", test_reader_threads},
        {"a failing batch ends the run with its error, any workers", test_worker_failure},
        {"all of Reuters-21578", test_reuters_all},
        {"a file replaced by a FIFO after the listing is skipped", test_fifo_after_listing},
        {"archive member ids without ./ components, unique", test_member_ids},
        {"archive member ids: 30,000 of one name in linear time", test_member_ids_many_duplicates},
        {"gzip: trailing garbage counted, the data read", test_gzip_trailing_garbage},
        {"UTF-16/32 without a byte-order mark: not text, in every format", test_utf16_without_bom},
        {"labels holding a comma, non-scalar labels, NUL in ids: counted", test_label_commas},
        {"messages name the path as given, member and line", test_message_paths},
        {"hostile review: TSV NULs and empty ids, SGML without records", test_hostile_review},
        {"an unreadable archive member skips itself, not the rest", test_unreadable_member},
        {"skip messages: a deep path kept, a long one cut before a character", test_message_length},
        {"directory walk: a folder reached twice read once, loops told apart", test_dir_reached_twice},
        {"directory walk: 150,000 folders in linear time", test_walk_linear},
        {"ids unique: a.txt beside a.txt.gz, archive members", test_ids_unique},
        {"--labels dir: an archive folder's label over 255 bytes whole", test_long_dir_label},
        {"--labels dir: a folder name holding a comma is a counted skip", test_dir_label_comma},
        {"hard links: target and members compared as cleaned paths", test_link_paths_cleaned},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"preprocess-readers", setup, teardown, NULL, NULL, t}, CU_SUITE_INFO_NULL};
    return dm_test_run(suites);
}
