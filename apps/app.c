/* Error printing shared by the subcommands (apps/app.h). Reference: none. */
#include "apps/app.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"

#include "common/report.h"
#include "common/status.h"
#include "tfidf/tfidf.h"

int dm_app_usage_error(const dm_app *app, const char *cmd, const char *fmt, ...)
{
    if (app->ctx->rank == 0) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        fprintf(stderr, "docmine %s: %s (see 'docmine %s --help')\n", cmd, msg, cmd);
    }
    return DM_EXIT_USAGE;
}

int dm_app_fail(const dm_app *app, const char *cmd, int status)
{
    /* Every rank reaches here with the same (agreed) status: print the first rank's own message
     * once, rather than one line per rank or "another rank failed". */
    int own = dm_error_code() != DM_OK && !dm_error_is_remote();
    int first = own ? app->ctx->rank : app->ctx->size;
    int lowest = first;
    MPI_Allreduce(&first, &lowest, 1, MPI_INT, MPI_MIN, app->ctx->world);
    if ((lowest == app->ctx->rank) || (lowest == app->ctx->size && app->ctx->rank == 0))
        fprintf(stderr, "docmine %s: %s\n", cmd,
                dm_error_message()[0] ? dm_error_message() : dm_status_name(status));
    return status == DM_ERR_INVALID_ARG ? DM_EXIT_USAGE : DM_EXIT_RUNTIME;
}

const char *dm_app_opt_name(char buf[64], const struct option *opts, int longindex, int c)
{
    if (longindex >= 0) snprintf(buf, 64, "--%s", opts[longindex].name);
    else snprintf(buf, 64, "-%c", c > 0 && c < 128 ? (char)c : '?');
    return buf;
}

int dm_app_parse_num(const char *s, double lo, double hi, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return (*s && !*end && !errno && *v >= lo && *v <= hi) ? 0 : -1;
}

int dm_app_report_write(const dm_app *app, struct dm_report *rep, const char *dir)
{
    int rc = dm_report_collect(rep, app->ctx);
    if (rc == DM_OK && dir) {
        char p[4300];
        snprintf(p, sizeof p, "%s/report.json", dir);
        rc = dm_report_write(rep, app->ctx, p);
    }
    if (rc == DM_OK && app->report_path) rc = dm_report_write(rep, app->ctx, app->report_path);
    return dm_ctx_agree(app->ctx, rc);
}

int dm_app_same_args(MPI_Comm comm, int argc, char **argv, uint64_t seed, int backend)
{
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    /* the line as one buffer: the arguments, each with its NUL */
    uint64_t len = 0;
    for (int i = 0; i < argc; i++) len += strlen(argv[i]) + 1;
    uint64_t head[4] = {(uint64_t)argc, len, seed, (uint64_t)backend}, head0[4];
    DM_TRY(dm_comm_rank0(comm, head, head0, 4));
    if (head0[1] > (uint64_t)INT_MAX) /* the same on every rank */
        return DM_ERR(DM_ERR_INVALID_ARG, "the command line is too long (%" PRIu64 " bytes)", head0[1]);
    char *mine = dm_malloc(len ? len : 1), *r0 = dm_malloc(head0[1] ? head0[1] : 1);
    int ok = mine && r0, all = ok;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
    int rc = DM_OK;
    if (!all) rc = DM_ERR(DM_ERR_NOMEM, "out of memory for the command line");
    if (rc == DM_OK) {
        size_t o = 0;
        for (int i = 0; i < argc; i++) {
            size_t l = strlen(argv[i]) + 1;
            memcpy(mine + o, argv[i], l);
            o += l;
        }
        if (rank == 0) memcpy(r0, mine, len);
        if (MPI_Bcast(r0, (int)head0[1], MPI_CHAR, 0, comm) != MPI_SUCCESS)
            rc = DM_ERR(DM_ERR_MPI, "MPI_Bcast of the command line failed");
    }
    if (rc == DM_OK && head[2] != head0[2])
        rc = DM_ERR(DM_ERR_INVALID_ARG,
                    "rank %d was given --seed %" PRIu64 ", rank 0 --seed %" PRIu64 ": every rank must be given the "
                    "same command line", rank, head[2], head0[2]);
    if (rc == DM_OK && head[3] != head0[3])
        rc = DM_ERR(DM_ERR_INVALID_ARG,
                    "rank %d was given --backend %s, rank 0 --backend %s: every rank must be given the same command line",
                    rank, dm_backend_name((int)head[3]), dm_backend_name((int)head0[3]));
    if (rc == DM_OK && (head[0] != head0[0] || head[1] != head0[1] || memcmp(mine, r0, len) != 0)) {
        /* the first argument that differs, as each rank has it */
        const char *a = mine, *b = r0, *ea = mine + len, *eb = r0 + head0[1];
        int i = 0;
        while (a < ea && b < eb && strcmp(a, b) == 0) {
            a += strlen(a) + 1;
            b += strlen(b) + 1;
            i++;
        }
        rc = DM_ERR(DM_ERR_INVALID_ARG,
                    "rank %d was given other arguments than rank 0: argument %d is %s%.200s%s on rank %d, %s%.200s%s "
                    "on rank 0: every rank must be given the same command line",
                    rank, i + 1, a < ea ? "'" : "", a < ea ? a : "missing", a < ea ? "'" : "", rank,
                    b < eb ? "'" : "", b < eb ? b : "missing", b < eb ? "'" : "");
    }
    dm_free(mine);
    dm_free(r0);
    return rc;
}

int dm_app_path(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, size, fmt, ap);
    va_end(ap);
    const size_t most = size - 1 < DM_APP_PATH_MAX ? size - 1 : DM_APP_PATH_MAX;
    if (n >= 0 && (size_t)n <= most) return DM_OK;
    /* the start and the end of the path as it would have been */
    char *full = NULL;
    if (n > 0 && (full = dm_malloc((size_t)n + 1)) != NULL) {
        va_start(ap, fmt);
        vsnprintf(full, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    const char *p = full ? full : buf;
    size_t l = strlen(p);
    int rc = l > 80 ? DM_ERR(DM_ERR_INVALID_ARG, "%.40s...%s: path too long (%d bytes, at most %zu)", p, p + l - 30,
                             n, most)
                    : DM_ERR(DM_ERR_INVALID_ARG, "%s: path too long (%d bytes, at most %zu)", p, n, most);
    dm_free(full);
    buf[0] = '\0';
    return rc;
}

int dm_app_vectors_rows(uint64_t *rows, const char *path, const dm_ctx *ctx)
{
    *rows = 0;
    DM_TRY(dm_ctx_agree(ctx, dm_vectors_rows(rows, path)));
    uint64_t rows0 = 0;
    int rc = dm_comm_rank0(ctx->world, rows, &rows0, 1);
    if (rc == DM_OK && *rows != rows0)
        rc = DM_ERR(DM_ERR_FORMAT, "%s: %llu documents on rank %d, %llu on rank 0: not the same file on every rank",
                    path, (unsigned long long)*rows, ctx->rank, (unsigned long long)rows0);
    return dm_ctx_agree(ctx, rc);
}

int dm_app_vectors_read(dm_vectors *v, const char *path, uint64_t first, uint64_t count, const dm_ctx *ctx)
{
    memset(v, 0, sizeof *v);
    int rc = dm_vectors_read_rows(v, path, first, count, ctx->rank == 0);
    if (rc == DM_OK && v->n_rows != count) /* read_rows clips at the end of the file */
        rc = DM_ERR(DM_ERR_FORMAT, "%s: %llu of documents %llu..%llu read on rank %d: the file changed while it was read",
                    path, (unsigned long long)v->n_rows, (unsigned long long)first,
                    (unsigned long long)(first + count) - 1, ctx->rank);
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) {
        uint64_t mine[2] = {v->n_cols, v->flags}, r0[2];
        rc = dm_comm_rank0(ctx->world, mine, r0, 2);
        if (rc == DM_OK && (mine[0] != r0[0] || mine[1] != r0[1]))
            rc = DM_ERR(DM_ERR_FORMAT,
                        "%s: %llu terms (flags %#llx) on rank %d, %llu terms (flags %#llx) on rank 0: not "
                        "the same file on every rank",
                        path, (unsigned long long)mine[0], (unsigned long long)mine[1], ctx->rank,
                        (unsigned long long)r0[0], (unsigned long long)r0[1]);
        rc = dm_ctx_agree(ctx, rc);
    }
    if (rc != DM_OK) dm_vectors_free(v);
    return rc;
}
