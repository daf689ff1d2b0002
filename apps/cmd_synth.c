/* `docmine synth`: writes the synthetic labelled corpus (datasets/synth.h) as TSV, generated in
 * parallel by rank. Reference: none. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/commands.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/report.h"
#include "common/status.h"
#include "common/timer.h"
#include "datasets/synth.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: docmine synth -n DOCS -k TOPICS -o PATH [options]\n\n"
               "Generates labelled news-like documents from K topics (Zipf vocabularies, a shared\n"
               "background vocabulary for topic overlap). Document i depends only on (--seed, i):\n"
               "any number of ranks writes the same corpus. One rank and PATH ending in .tsv: one\n"
               "file; otherwise PATH is a directory with one part-<rank>.tsv per rank (part-00000.tsv, ...).\n"
               "Missing folders of PATH are made. Lines are: id<TAB>label<TAB>text, ids synth-<i>,\n"
               "labels topic<k>; each document's topic is drawn uniformly (topic counts vary; with\n"
               "K > N some topics have no document). part-<r>.tsv files of PATH that this run did not\n"
               "write (an earlier run's with more ranks) are removed.\n\n"
               "  -n, --docs N          documents, 1..1e12 (default 20000)\n"
               "  -k, --topics K        topics, 1..100000 (default 10)\n"
               "  -o, --output PATH     output file or directory\n"
               "  --min-words N         shortest document in tokens, 1..1e7 (default 50)\n"
               "  --max-words N         longest document in tokens, up to 1e7 (default 1000)\n"
               "  --overlap X           fraction of tokens from the shared vocabulary, 0..1 (default 0.35)\n"
               "  --topic-vocab N       words per topic, 1..1e7 (default 4000)\n"
               "  --shared-vocab N      shared words, 1..1e7 (default 8000)\n"
               "  --zipf S              Zipf exponent, 0.01..9.99 (default 0.8: with the other defaults\n"
               "                        about 400 distinct words per document)\n"
               "  (the global --seed N picks the corpus; default 42)\n\n"
               "examples:\n  docmine synth -n 20000 -k 10 --seed 7 -o corpus.tsv\n"
               "  mpiexec -n 4 docmine synth -n 1000000 -k 20 -o corpus/\n");
}

/* Removes the DIR/part-<r>.tsv files (r as "%05d" writes it) with r >= size, each named in a
 * warning: they are an earlier run's with more ranks, and a reader of DIR (`docmine preprocess
 * --corpus DIR`, or cat DIR/part-*.tsv) would mix their documents, ids repeated, into this run's
 * corpus; and the parts' temporary files (part-<r>.tsv.tmp.<pid>.<n>) that a killed run left,
 * which a reader of DIR read as documents. Rank 0, after the parts are in place. */
static int remove_stale_parts(const char *dir, int size)
{
    DIR *d = opendir(dir);
    if (!d) return DM_ERR(DM_ERR_IO, "%s: cannot list the folder: %s", dir, strerror(errno));
    int rc = DM_OK;
    struct dirent *e;
    char path[8192];
    while (rc == DM_OK && (e = readdir(d)) != NULL) {
        const char *r = e->d_name;
        if (strncmp(r, "part-", 5) != 0) continue;
        r += 5;
        size_t rl = strspn(r, "0123456789");
        if (rl < 5 || rl > 9 || (rl > 5 && r[0] == '0')) continue;
        /* a part's temporary file, part-<r>.tsv.tmp.<pid>.<n>, left by a run that was killed:
         * read as a document of the folder */
        int tmp = strncmp(r + rl, ".tsv.tmp.", 9) == 0;
        if (!tmp && (strcmp(r + rl, ".tsv") != 0 || atoi(r) < size)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (!tmp) {
            rc = dm_remove_leftover(path);
        } else if (unlink(path) != 0) {
            rc = DM_ERR(DM_ERR_IO, "%s: cannot remove this temporary file of an earlier run: %s", path, strerror(errno));
        } else {
            dm_log_warn("removed %s: the temporary file of an earlier run that did not finish", path);
        }
    }
    closedir(d);
    return rc;
}

int dm_cmd_synth(dm_app *app, int argc, char **argv)
{
    enum { O_MIN = 256, O_MAX, O_OVERLAP, O_TV, O_SV, O_ZIPF };
    static const struct option opts[] = {
        {"docs", required_argument, 0, 'n'},      {"topics", required_argument, 0, 'k'},
        {"output", required_argument, 0, 'o'},    {"min-words", required_argument, 0, O_MIN},
        {"max-words", required_argument, 0, O_MAX}, {"overlap", required_argument, 0, O_OVERLAP},
        {"topic-vocab", required_argument, 0, O_TV}, {"shared-vocab", required_argument, 0, O_SV},
        {"zipf", required_argument, 0, O_ZIPF},   {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    dm_ctx *ctx = app->ctx;
    dm_synth_options so = DM_SYNTH_OPTIONS_INIT;
    so.seed = ctx->opt.seed;
    const char *out = NULL;
    optind = 1;
    opterr = 0;
    int c, li = -1;
    while ((c = getopt_long(argc, argv, "n:k:o:h", opts, &li)) != -1) {
        double v = 0;
        char nb[64];
        const char *name = dm_app_opt_name(nb, opts, li, c);
        li = -1;
        switch (c) {
        case 'n':
            if (dm_app_parse_num(optarg, 1, 1e12, &v) || v != floor(v)) return dm_app_usage_error(app, "synth", "invalid --docs '%s'", optarg);
            so.docs = (uint64_t)v;
            break;
        case 'k':
            if (dm_app_parse_num(optarg, 1, 100000, &v) || v != floor(v)) return dm_app_usage_error(app, "synth", "invalid --topics '%s'", optarg);
            so.topics = (int)v;
            break;
        case 'o': out = optarg; break;
        case O_MIN:
        case O_MAX:
        case O_TV:
        case O_SV:
            if (dm_app_parse_num(optarg, 1, 1e7, &v) || v != floor(v))
                return dm_app_usage_error(app, "synth", "invalid value '%s' for %s", optarg, name);
            if (c == O_MIN) so.min_words = (int)v;
            else if (c == O_MAX) so.max_words = (int)v;
            else if (c == O_TV) so.topic_vocab = (int)v;
            else so.shared_vocab = (int)v;
            break;
        case O_OVERLAP:
            if (dm_app_parse_num(optarg, 0, 1, &v)) return dm_app_usage_error(app, "synth", "invalid --overlap '%s' (0..1)", optarg);
            so.overlap = v;
            break;
        case O_ZIPF:
            if (dm_app_parse_num(optarg, 0.01, 9.99, &v)) return dm_app_usage_error(app, "synth", "invalid --zipf '%s'", optarg);
            so.zipf_s = v;
            break;
        case 'h':
            if (ctx->rank == 0) usage(stdout);
            return DM_EXIT_OK;
        default: return dm_app_usage_error(app, "synth", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return dm_app_usage_error(app, "synth", "unexpected argument '%s'", argv[optind]);
    if (!out) return dm_app_usage_error(app, "synth", "missing -o PATH");
    if (!*out) return dm_app_usage_error(app, "synth", "-o: an empty path");

    dm_synth s;
    int rc = dm_synth_init(&s, &so);
    if (rc == DM_ERR_INVALID_ARG) {
        if (ctx->rank == 0) fprintf(stderr, "docmine synth: %s (see 'docmine synth --help')\n", dm_error_message());
        return DM_EXIT_USAGE;
    }
    rc = dm_ctx_agree(ctx, rc); /* another failure (memory) of one rank: every rank stops here */
    size_t ol = strlen(out);
    int single = ctx->size == 1 && ol > 4 && strcmp(out + ol - 4, ".tsv") == 0;
    /* the path fits, said before anything is made (a part's name shortened by the buffer was
     * refused only when written, in a message of the path's first 700 bytes) */
    char path[4200];
    if (rc == DM_OK) {
        if (single) rc = dm_app_path(path, sizeof path, "%s", out);
        else rc = dm_app_path(path, sizeof path, "%s/part-%05d.tsv", out, ctx->rank);
        rc = dm_ctx_agree(ctx, rc);
    }
    if (rc == DM_OK && !single) {
        if (ctx->rank == 0) rc = dm_mkdirs(out);
        rc = dm_ctx_agree(ctx, rc);
    }
    /* the one file's folder, made as the folder of parts is (mkdir -p): a missing one failed with
     * a message that named the temporary file, not PATH */
    if (rc == DM_OK && single) rc = dm_mkdirs_parent(path);
    uint64_t first, last;
    dm_synth_share(so.docs, ctx->rank, ctx->size, &first, &last);
    dm_timer_start("synth");
    /* every part written under its temporary name, then all put in place once every rank's is
     * whole: a rank that failed left the others' new parts beside an earlier run's (a folder
     * that read as one corpus of two runs) */
    dm_atomic_file f;
    int opened = 0;
    if (rc == DM_OK) opened = (rc = dm_atomic_open(&f, path)) == DM_OK;
    if (rc == DM_OK) rc = dm_synth_write_tsv(&s, &f, first, last);
    if (rc == DM_OK) rc = dm_atomic_finish(&f);
    struct stat st;
    if (rc == DM_OK && stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        rc = DM_ERR(DM_ERR_IO, "%s: exists and is not a regular file: not replacing it", path);
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) rc = dm_atomic_place(&f);
    else if (opened) dm_atomic_abort(&f);
    if (!single) { /* after every part is in place: a failed run removes nothing */
        rc = dm_ctx_agree(ctx, rc);
        if (rc == DM_OK && ctx->rank == 0) rc = remove_stale_parts(out, ctx->size);
    }
    dm_timer_stop("synth");
    dm_counter_add("synth.docs", (int64_t)(last - first));
    rc = dm_ctx_agree(ctx, rc);
    dm_synth_free(&s);
    if (rc == DM_OK) {
        dm_log_info("wrote %llu documents from %d topics (seed %llu) to %s%s", (unsigned long long)so.docs,
                    so.topics, (unsigned long long)so.seed, out, single ? "" : "/part-*.tsv");
        dm_report rep;
        DM_ASSERT(dm_report_init(&rep, "synth", app->argc_all, app->argv_all) == DM_OK);
        json_object_set_new(rep.results, "docs", json_integer((json_int_t)so.docs));
        json_object_set_new(rep.results, "topics", json_integer(so.topics));
        rc = dm_report_collect(&rep, ctx);
        if (rc == DM_OK) rc = dm_report_write(&rep, ctx, app->report_path);
        rc = dm_ctx_agree(ctx, rc);
        dm_report_free(&rep);
    }
    return rc == DM_OK ? DM_EXIT_OK : dm_app_fail(app, "synth", rc);
}
