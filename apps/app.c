/* Error printing shared by the subcommands (apps/app.h). Reference: none. */
#include "apps/app.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/report.h"
#include "common/status.h"

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
