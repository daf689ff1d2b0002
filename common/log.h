/* Logging with levels and the rank-0 progress line. Reference: none.
 * Errors and warnings print on every rank (prefixed with the rank when there are several);
 * info and debug print on rank 0 only. All output goes to stderr; stdout is for results. */
#ifndef DM_LOG_H
#define DM_LOG_H

#include <stdint.h>

#include "common/status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum dm_log_level { DM_LOG_ERROR = 0, DM_LOG_WARN = 1, DM_LOG_INFO = 2, DM_LOG_DEBUG = 3 };


void dm_log_set_level(int level);
int dm_log_get_level(void);
/* Sets the rank and the number of ranks used for prefixes (done by dm_ctx_init). */
void dm_log_set_rank(int rank, int size);
void dm_log(int level, const char *fmt, ...) DM_PRINTF(2, 3);
#define dm_log_error(...) dm_log(DM_LOG_ERROR, __VA_ARGS__)
#define dm_log_warn(...) dm_log(DM_LOG_WARN, __VA_ARGS__)
#define dm_log_info(...) dm_log(DM_LOG_INFO, __VA_ARGS__)
#define dm_log_debug(...) dm_log(DM_LOG_DEBUG, __VA_ARGS__)

/* Progress line on rank 0: "label  done/total  rate unit/s  ETA". Shown when stderr is a terminal,
 * or always when forced with dm_progress_force(1) (--progress); never when the level is below INFO.
 * On a terminal one line is redrawn in place (carriage returns, every 0.2 s); elsewhere (a batch
 * job's log file) whole lines are appended, one every DM_PROGRESS_LOG_S seconds and one at the end
 * (not repeated when the last periodic line already showed the same count). The end's line gives
 * the elapsed time ("in 12s") instead of an ETA. */
#define DM_PROGRESS_LOG_S 10.0
typedef struct dm_progress {
    const char *label;
    const char *unit;
    uint64_t total;
    double t_start, t_last;
    double interval; /* seconds between prints (set by dm_progress_begin) */
    int enabled;
    int in_place;    /* redraw one line (a terminal) rather than append lines */
    uint64_t shown;  /* the count of the last line printed (UINT64_MAX: none yet) */
} dm_progress;

void dm_progress_force(int on);
void dm_progress_begin(dm_progress *p, const char *label, const char *unit, uint64_t total);
/* Prints at most once per p->interval; cheap to call often. */
void dm_progress_update(dm_progress *p, uint64_t done);
void dm_progress_end(dm_progress *p, uint64_t done);
/* Formats the progress line into buf (used by the progress line and by tests); final: the end's
 * line (elapsed time, no ETA). */
void dm_progress_format(char *buf, int len, const char *label, const char *unit, uint64_t done,
                        uint64_t total, double elapsed, int final);

/* Monotonic wall clock in seconds. */
double dm_wtime(void);

#ifdef __cplusplus
}
#endif
#endif
