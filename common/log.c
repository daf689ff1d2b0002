/* Logging and the progress line (common/log.h). Reference: none. */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static int g_level = DM_LOG_INFO;
static int g_rank = 0, g_size = 1;
static int g_force_progress;

void dm_log_set_level(int level) { g_level = level; }
int dm_log_get_level(void) { return g_level; }
void dm_log_set_rank(int rank, int size)
{
    g_rank = rank;
    g_size = size;
}

void dm_log(int level, const char *fmt, ...)
{
    if (level > g_level) return;
    if (level >= DM_LOG_INFO && g_rank != 0) return;
    static const char *tag[] = {"error: ", "warning: ", "", "debug: "};
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g_size > 1 && level <= DM_LOG_WARN)
        fprintf(stderr, "docmine: rank %d: %s%s\n", g_rank, tag[level], msg);
    else
        fprintf(stderr, "docmine: %s%s\n", tag[level], msg);
}

double dm_wtime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void dm_progress_force(int on) { g_force_progress = on; }

void dm_progress_begin(dm_progress *p, const char *label, const char *unit, uint64_t total)
{
    p->label = label;
    p->unit = unit;
    p->total = total;
    p->t_start = p->t_last = dm_wtime();
    p->shown = UINT64_MAX;
    p->in_place = isatty(STDERR_FILENO);
    p->interval = p->in_place ? 0.2 : DM_PROGRESS_LOG_S;
    p->enabled = g_rank == 0 && g_level >= DM_LOG_INFO && (g_force_progress || p->in_place);
}

void dm_progress_format(char *buf, int len, const char *label, const char *unit, uint64_t done,
                        uint64_t total, double elapsed, int final)
{
    double rate = elapsed > 0 ? (double)done / elapsed : 0.0;
    if (final && total > 0) {
        snprintf(buf, (size_t)len, "%s %llu/%llu (%.1f%%) %.3g %s/s in %.0fs", label, (unsigned long long)done,
                 (unsigned long long)total, 100.0 * (double)done / (double)total, rate, unit, elapsed);
    } else if (final) {
        snprintf(buf, (size_t)len, "%s %llu %.3g %s/s in %.0fs", label, (unsigned long long)done, rate, unit,
                 elapsed);
    } else if (total > 0 && done <= total && rate > 0) {
        double eta = (double)(total - done) / rate;
        snprintf(buf, (size_t)len, "%s %llu/%llu (%.1f%%) %.3g %s/s ETA %.0fs", label,
                 (unsigned long long)done, (unsigned long long)total, 100.0 * (double)done / (double)total,
                 rate, unit, eta);
    } else {
        snprintf(buf, (size_t)len, "%s %llu %.3g %s/s", label, (unsigned long long)done, rate, unit);
    }
}

static void progress_print(dm_progress *p, uint64_t done, double now, int last)
{
    char line[256];
    dm_progress_format(line, sizeof line, p->label, p->unit, done, p->total, now - p->t_start, last);
    p->shown = done;
    if (p->in_place) fprintf(stderr, "\r%-78s%s", line, last ? "\n" : "");
    else fprintf(stderr, "docmine: %s\n", line);
    fflush(stderr);
}

void dm_progress_update(dm_progress *p, uint64_t done)
{
    if (!p->enabled) return;
    double now = dm_wtime();
    if (now - p->t_last < p->interval) return;
    p->t_last = now;
    progress_print(p, done, now, 0);
}

void dm_progress_end(dm_progress *p, uint64_t done)
{
    if (!p->enabled) return;
    /* a log file already holding this count gets no second line; a terminal's line ends here */
    if (p->in_place || p->shown != done) progress_print(p, done, dm_wtime(), 1);
    p->enabled = 0;
}
