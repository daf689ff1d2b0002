/* `docmine preprocess`: reads a corpus (split across ranks by bytes), normalises, tokenises,
 * removes stop words, stems and hashes, and writes the token stream (binary format of
 * preprocess/preprocess.h) or, with --dump-tokens, readable text. Reference: dm_preprocess. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/cmd_vectorize.h"
#include "apps/commands.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/report.h"
#include "common/status.h"
#include "common/timer.h"
#include "preprocess/preprocess.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: docmine preprocess --corpus PATH (-o FILE | --dump-tokens) [options]\n\n"
            "Turns a corpus into the token stream (per document: id, labels, 64-bit term hashes,\n"
            "plus the vocabulary of distinct stems). With several ranks, rank r writes FILE.rank<r>;\n"
            "FILE.rank<r> files that this run did not write (an earlier run's with more ranks) are\n"
            "removed, and with several ranks a token stream FILE of an earlier one-rank run. Every\n"
            "file carries the run's id: vectorize --tokens refuses a set of files of different runs.\n"
            "Skipped input is counted per reason and its first messages printed.\n\n"
            "  --corpus PATH       file or directory tree (.jsonl, .tsv, .sgm, text; compressed .gz, .bz2,\n"
            "                      .xz, .zst; archives .tar[.gz|.bz2|.xz|.zst], .tgz, .zip)\n"
            "  -o, --output FILE   binary token stream\n"
            "  --dump-tokens       readable text instead: id<TAB>labels<TAB>stems (to FILE or stdout;\n"
            "                      tabs and line breaks in ids and labels become spaces)\n\n"
            "%s\n"
            "examples:\n"
            "  docmine preprocess --corpus ../shared/datasets/reuters21578 --format reuters -o reuters.dmtok\n"
            "  mpiexec -n 2 docmine preprocess --corpus corpus/ --labels dir -o corpus.dmtok\n",
            dm_vectorize_pp_help);
}

/* The dump on stdout in corpus order: rank 0 prints its documents, then every other rank's, which
 * it receives in rank order (taking turns to print is not enough: mpiexec forwards each process's
 * output as it comes, in pieces). Each rank holds its dump in memory until rank 0 takes it. A
 * rank that fails sends nothing; the caller agrees on the status. */
#define DUMP_CHUNK ((size_t)1 << 20)
static int dump_stdout(const dm_token_stream *s, const dm_ctx *ctx)
{
    int rc = DM_OK;
    if (ctx->rank != 0) {
        char *p = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&p, &len);
        rc = m ? dm_token_stream_dump(s, m) : DM_ERR(DM_ERR_NOMEM, "preprocess: out of memory for the dump");
        if (m && fclose(m) != 0 && rc >= 0) rc = DM_ERR(DM_ERR_NOMEM, "preprocess: out of memory for the dump");
        uint64_t n = rc >= 0 ? (uint64_t)len : 0;
        MPI_Send(&n, 1, MPI_UINT64_T, 0, 701, ctx->world);
        for (uint64_t at = 0; at < n; at += DUMP_CHUNK) {
            size_t c = n - at < DUMP_CHUNK ? (size_t)(n - at) : DUMP_CHUNK;
            MPI_Send(p + at, (int)c, MPI_CHAR, 0, 702, ctx->world);
        }
        free(p);
        return rc;
    }
    rc = dm_token_stream_dump(s, stdout);
    static char tmp[DUMP_CHUNK];
    for (int q = 1; q < ctx->size; q++) {
        uint64_t n = 0;
        MPI_Recv(&n, 1, MPI_UINT64_T, q, 701, ctx->world, MPI_STATUS_IGNORE);
        for (uint64_t at = 0; at < n; at += DUMP_CHUNK) {
            size_t c = n - at < DUMP_CHUNK ? (size_t)(n - at) : DUMP_CHUNK;
            MPI_Recv(tmp, (int)c, MPI_CHAR, q, 702, ctx->world, MPI_STATUS_IGNORE);
            if (rc >= 0 && fwrite(tmp, 1, c, stdout) != c) rc = DM_ERR(DM_ERR_IO, "preprocess: write error on stdout");
        }
    }
    if (fflush(stdout) != 0 && rc >= 0) rc = DM_ERR(DM_ERR_IO, "preprocess: write error on stdout");
    return rc;
}

/* The dump to FILE (FILE.rank<r> for rank r), written under a temporary name and renamed. */
static int dump_file(const dm_token_stream *s, const char *path)
{
    dm_atomic_file f;
    DM_TRY(dm_atomic_open(&f, path));
    int rc = dm_token_stream_dump(s, f.fp);
    if (rc < 0) {
        dm_atomic_abort(&f);
        return DM_ERR(rc, "%s: cannot write the dump", path);
    }
    return dm_atomic_commit(&f);
}

/* Whether path is a regular file that starts as a docmine token stream (any version). */
static int is_token_stream(const char *path)
{
    struct stat sb;
    char magic[8];
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0; /* not fopen on a FIFO: it would block */
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    int yes = fread(magic, 1, 8, f) == 8 && memcmp(magic, DM_TOKEN_STREAM_MAGIC, 8) == 0;
    fclose(f);
    return yes;
}

/* Removes the OUTPUT.rank<r> files that this run did not write (r >= size; every one when one rank
 * wrote OUTPUT itself), each named in a warning: they are an earlier run's with more ranks, and a
 * reader of the set would mix them in (vectorize --tokens also refuses a set of different runs by
 * the files' headers: ranks and run id). With several ranks, a plain OUTPUT that is a token stream
 * (an earlier one-rank run's) is removed too, with a warning: one rank reading OUTPUT would
 * otherwise take that older corpus for this run's (several ranks never read it; a plain OUTPUT
 * that is not a token stream, a dump say, is left). Rank 0, after the files are written. */
static int remove_stale_rank_files(const char *output, int size, int stream)
{
    char dir[4096], path[8192];
    const char *slash = strrchr(output, '/'), *base = slash ? slash + 1 : output;
    if (size > 1 && stream && is_token_stream(output)) {
        if (unlink(output) != 0)
            return DM_ERR(DM_ERR_IO, "%s: cannot remove this one-rank token stream of an earlier run: %s", output,
                          strerror(errno));
        dm_log_warn("removed %s: an earlier one-rank run's token stream (this run's are %s.rank<r>)", output, output);
    }
    /* dir: OUTPUT's folder with its '/', or "" for the current one */
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - output) + 1 : 0, output);
    size_t bl = strlen(base);
    DIR *d = opendir(dir[0] ? dir : ".");
    if (!d) return DM_ERR(DM_ERR_IO, "%s: cannot list the folder of %s: %s", dir[0] ? dir : ".", output, strerror(errno));
    int rc = DM_OK;
    struct dirent *e;
    while (rc == DM_OK && (e = readdir(d)) != NULL) {
        const char *r = e->d_name + bl;
        if (strncmp(e->d_name, base, bl) != 0 || strncmp(r, ".rank", 5) != 0) continue;
        r += 5; /* the rank as preprocess writes it: digits, no leading zero */
        size_t rl = strlen(r);
        if (rl == 0 || rl > 9 || strspn(r, "0123456789") != rl || (r[0] == '0' && rl > 1)) continue;
        if (size > 1 && atoi(r) < size) continue;
        snprintf(path, sizeof path, "%s%s", dir, e->d_name);
        rc = dm_remove_leftover(path);
    }
    closedir(d);
    return rc;
}

int dm_cmd_preprocess(dm_app *app, int argc, char **argv)
{
    enum { O_CORPUS = DM_VO_SHARED_END + 1, O_DUMP };
    static const struct option opts[] = {{"corpus", required_argument, 0, O_CORPUS},
                                         {"output", required_argument, 0, 'o'},
                                         {"dump-tokens", no_argument, 0, O_DUMP},
                                         {"help", no_argument, 0, 'h'},
                                         DM_VECTORIZE_PP_LONGOPTS,
                                         {0, 0, 0, 0}};
    static const char cmd[] = "preprocess";
    dm_ctx *ctx = app->ctx;
    dm_preprocess_options o = DM_PREPROCESS_OPTIONS_INIT;
    const char *corpus = NULL, *output = NULL;
    int dump = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        if (c >= DM_VO_FORMAT && c < DM_VO_SHARED_END) {
            int rc = dm_vectorize_pp_option(app, cmd, c, optarg, &o);
            if (rc) return rc;
            continue;
        }
        switch (c) {
        case O_CORPUS: corpus = optarg; break;
        case 'o': output = optarg; break;
        case O_DUMP: dump = 1; break;
        case 'h':
            if (ctx->rank == 0) usage(stdout);
            return DM_EXIT_OK;
        default: return dm_app_usage_error(app, cmd, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return dm_app_usage_error(app, cmd, "unexpected argument '%s'", argv[optind]);
    if (!corpus) return dm_app_usage_error(app, cmd, "--corpus PATH is required");
    if (!output && !dump) return dm_app_usage_error(app, cmd, "-o FILE or --dump-tokens is required");
    if (output && !*output) return dm_app_usage_error(app, cmd, "-o: an empty path");
    if (o.tok.min_len > o.tok.max_len) return dm_app_usage_error(app, cmd, "--min-len is above --max-len");

    dm_token_stream s;
    dm_pp_times t;
    /* output: one file per rank when several ranks; its path fits, said before the work */
    char path[4200] = "";
    int rc = DM_OK;
    if (output && ctx->size > 1) rc = dm_app_path(path, sizeof path, "%s.rank%d", output, ctx->rank);
    else if (output) rc = dm_app_path(path, sizeof path, "%s", output);
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) rc = dm_vectorize_pp_agree(ctx, &o); /* the same stop words on every rank */
    if (rc == DM_OK) rc = dm_preprocess(&s, &t, ctx, corpus, &o);
    if (rc < 0) return dm_app_fail(app, "preprocess", rc);
    /* one id for every rank's file of this run: vectorize --tokens refuses a set of mixed runs */
    s.run_id = dm_token_stream_new_run_id(&ctx->world);
    dm_pp_times_to_timers(&t, "preprocess", 1);

    if (dump && output) rc = dump_file(&s, path);
    else if (dump) rc = dump_stdout(&s, ctx);
    else rc = dm_token_stream_write(&s, path);
    rc = dm_ctx_agree(ctx, rc);
    if (rc >= 0 && output && ctx->rank == 0) rc = remove_stale_rank_files(output, ctx->size, !dump);
    rc = dm_ctx_agree(ctx, rc);
    if (rc >= 0 && ctx->rank == 0) {
        const dm_pp_stats *st = &s.stats;
        char empty[64] = "";
        if (st->docs_empty) snprintf(empty, sizeof empty, ", %llu without tokens", (unsigned long long)st->docs_empty);
        fprintf(stderr,
                "docmine preprocess: %llu documents (%llu labelled%s), %llu tokens, %llu skipped, "
                "%llu invalid UTF-8 bytes, %llu hash collisions\n",
                (unsigned long long)st->docs, (unsigned long long)st->docs_labelled, empty,
                (unsigned long long)st->tokens, (unsigned long long)dm_pp_stats_skipped_total(st),
                (unsigned long long)st->invalid_utf8, (unsigned long long)st->hash_collisions);
        double sum = dm_pp_times_sum(&t);
        fprintf(stderr,
                "docmine preprocess: rank 0 stages (s): read %.3f normalise %.3f take %.3f h2d %.3f kernels %.3f "
                "d2h %.3f build %.3f prefault %.3f wall %.3f overlap %.2f\n",
                t.read, t.normalize, t.take, t.h2d, t.kernels, t.d2h, t.build, t.prefault, t.wall,
                t.wall > 0 ? sum / t.wall : 0);
    }
    if (rc >= 0) dm_vectorize_print_skips(ctx, cmd, &s.stats);
    if (rc >= 0 && app->report_path) {
        dm_report rep;
        /* agreed: a rank whose report could not be made must not leave the others in the collection */
        rc = dm_ctx_agree(ctx, dm_report_init(&rep, "preprocess", app->argc_all, app->argv_all));
        if (rc >= 0) {
            const dm_pp_stats *st = &s.stats;
            json_t *r = rep.results;
            json_object_set_new(r, "documents", json_integer((json_int_t)st->docs));
            json_object_set_new(r, "documents_labelled", json_integer((json_int_t)st->docs_labelled));
            json_object_set_new(r, "documents_empty", json_integer((json_int_t)st->docs_empty));
            json_object_set_new(r, "tokens", json_integer((json_int_t)st->tokens));
            json_object_set_new(r, "bytes_read", json_integer((json_int_t)st->bytes_read));
            json_object_set_new(r, "invalid_utf8", json_integer((json_int_t)st->invalid_utf8));
            json_object_set_new(r, "nul_bytes", json_integer((json_int_t)st->nul_bytes));
            json_object_set_new(r, "hash_collisions", json_integer((json_int_t)st->hash_collisions));
            dm_vectorize_report_skips(r, st);
            json_t *dropped = json_object();
            json_object_set_new(dropped, "short", json_integer((json_int_t)st->tokens_short));
            json_object_set_new(dropped, "long", json_integer((json_int_t)st->tokens_long));
            json_object_set_new(dropped, "number", json_integer((json_int_t)st->tokens_number));
            json_object_set_new(dropped, "stop", json_integer((json_int_t)st->tokens_stop));
            json_object_set_new(r, "tokens_dropped", dropped);
            double sum = dm_pp_times_sum(&t);
            json_object_set_new(r, "overlap", json_real(t.wall > 0 ? sum / t.wall : 0));
            rc = dm_report_collect(&rep, ctx);
            if (rc >= 0) rc = dm_report_write(&rep, ctx, app->report_path);
            rc = dm_ctx_agree(ctx, rc); /* rank 0 writes: the others learn whether it could */
        }
        dm_report_free(&rep);
    }
    dm_token_stream_free(&s);
    return rc < 0 ? dm_app_fail(app, "preprocess", rc) : DM_EXIT_OK;
}
