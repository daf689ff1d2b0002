/* Status codes and the thread-local error message (common/status.h). Reference: none. */
#include "common/status.h"

#include <mpi.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* a message holds two whole paths (PATH_MAX each: "rename A to B") and its problem: a 768-byte
 * body cut a long path before the problem was said */
#define DM_MSG_BODY (2 * 4096 + 512)
static _Thread_local char tl_msg[DM_MSG_BODY + 128];
static _Thread_local int tl_code;
static _Thread_local int tl_remote;
/* the code of the last error marked remote (DM_OK: none), until an own error of that code */
static _Thread_local int tl_learnt;
static int g_rank = -1;

void dm_status_set_rank(int rank) { g_rank = rank; }
int dm_status_rank(void) { return g_rank; }

int dm_error_set(int code, const char *file, int line, const char *fmt, ...)
{
    char body[DM_MSG_BODY];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof body, fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    if (g_rank >= 0)
        snprintf(tl_msg, sizeof tl_msg, "%s [%s, rank %d, %s:%d]", body, dm_status_name(code), g_rank,
                 base, line);
    else
        snprintf(tl_msg, sizeof tl_msg, "%s [%s, %s:%d]", body, dm_status_name(code), base, line);
    tl_code = code;
    tl_remote = 0;
    if (code == tl_learnt) tl_learnt = DM_OK;
    return code;
}

void dm_error_mark_remote(void)
{
    tl_remote = 1;
    tl_learnt = tl_code;
}
int dm_error_is_remote(void) { return tl_remote; }
int dm_error_learnt(int status) { return status < 0 && status == tl_learnt; }

const char *dm_error_message(void) { return tl_msg; }
int dm_error_code(void) { return tl_code; }
void dm_error_clear(void)
{
    tl_msg[0] = '\0';
    tl_code = DM_OK;
    tl_remote = 0;
    tl_learnt = DM_OK;
}

const char *dm_status_name(int code)
{
    switch (code) {
    case DM_OK: return "DM_OK";
    case DM_ERR_INVALID_ARG: return "DM_ERR_INVALID_ARG";
    case DM_ERR_NOMEM: return "DM_ERR_NOMEM";
    case DM_ERR_IO: return "DM_ERR_IO";
    case DM_ERR_FORMAT: return "DM_ERR_FORMAT";
    case DM_ERR_CUDA: return "DM_ERR_CUDA";
    case DM_ERR_MPI: return "DM_ERR_MPI";
    case DM_ERR_UNSUPPORTED: return "DM_ERR_UNSUPPORTED";
    case DM_ERR_NO_DEVICE: return "DM_ERR_NO_DEVICE";
    default: return "DM_ERR_UNKNOWN";
    }
}

void dm_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "docmine: rank %d: assertion failed: %s (%s:%d)\n", g_rank, expr, file, line);
    fflush(stderr);
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (init && !fin) MPI_Abort(MPI_COMM_WORLD, 134);
    raise(SIGABRT); /* MPI not running: end this process the same way */
}
