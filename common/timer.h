/* Named timers and counters, reduced over ranks for the run report (min/avg/max, CoMD style).
 * Reference: none. Timers accumulate wall seconds between start and stop; a name may be started
 * and stopped many times. Start and stop: thread-safe for distinct names, one thread per name at
 * a time; dm_timer_add and the counters: any thread. */
#ifndef DM_TIMER_H
#define DM_TIMER_H

#include <mpi.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void dm_timer_start(const char *name);
void dm_timer_stop(const char *name);
/* Adds seconds measured elsewhere (e.g. by CUDA events) to a timer. */
void dm_timer_add(const char *name, double seconds);
/* Accumulated seconds of a timer on this rank (0 if unknown). */
double dm_timer_get(const char *name);
void dm_counter_add(const char *name, int64_t n);
int64_t dm_counter_get(const char *name);
/* Forgets all timers and counters (tests, and commands run twice in one process). */
void dm_timers_reset(void);

/* One reduced value: over ranks that have it (missing = 0 on ranks that never touched it). */
typedef struct dm_stat {
    char name[64];
    double min, avg, max, sum;
    int64_t calls; /* summed over ranks */
} dm_stat;

/* Collective over comm: reduces every timer (is_counter = 0) or counter (1) known on any rank.
 * On return *out (dm_malloc'ed, caller dm_free's) holds *n entries sorted by name, on every rank. */
int dm_stats_reduce(dm_stat **out, int *n, MPI_Comm comm, int is_counter);

#ifdef __cplusplus
}
#endif
#endif
