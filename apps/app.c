/* Error printing shared by the subcommands (apps/app.h). Reference: none. */
#include "apps/app.h"

#include <stdarg.h>
#include <stdio.h>

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
