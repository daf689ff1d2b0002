/* Host data of tuning workloads, kept between their inputs. The tuner creates several inputs of
 * one kernel (the timing input, the checks' fresh ones) and the kernels of one stage share their
 * workloads' shape, all from the same seed: a workload's create hook builds the same host data
 * (seeded documents, tokens, the reference passes that give a kernel its input) again for every
 * input. Through this cache it builds them once per (kind, n, seed) and only uploads them for
 * each input, which keeps every input identical to a fresh build (the builder is a function of
 * (n, seed, arg) alone: callers must not pass an arg that changes what is built for a key).
 *
 * Entries are kept while their bytes fit the budget (least recently used dropped first, never
 * one in use); an entry larger than the budget is built, lent and dropped when returned. The
 * modules clear the cache when their GPU stage ends (the tuning of a stage is over by then).
 * Thread-safe (one mutex; a build runs under it, so two threads never build one key twice, and
 * a builder must not call dm_wl_cache_get or dm_wl_cache_put itself).
 * Host code only. Reference: the builders' uncached definitions (each caller's tests). */
#ifndef DM_TUNE_WL_CACHE_H
#define DM_TUNE_WL_CACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a builder makes: data (owned by the cache until dropped), the bytes it holds (for the
 * budget) and how to drop it (NULL: dm_free). */
typedef struct dm_wl_host {
    void *data;
    size_t bytes;
    void (*drop)(void *data);
} dm_wl_host;

typedef int dm_wl_build_fn(dm_wl_host *out, size_t n, uint64_t seed, const void *arg);

/* The host data of (kind, n, seed) in *data, built by build(out, n, seed, arg) when missing.
 * kind: a string naming the builder (compared by contents). The data is lent until
 * dm_wl_cache_put; a failed build returns its status and stores nothing. */
int dm_wl_cache_get(const char *kind, size_t n, uint64_t seed, dm_wl_build_fn *build, const void *arg, void **data);
/* Returns data lent by dm_wl_cache_get (NULL is fine). */
void dm_wl_cache_put(void *data);
/* Drops every entry not lent (all of them when none is). */
void dm_wl_cache_clear(void);

/* The budget in bytes (default 1 GiB, or DOCMINE_TUNE_CACHE_MB megabytes when set; 0 keeps
 * nothing). Returns the previous one. */
size_t dm_wl_cache_set_budget(size_t bytes);
/* Counters since the process began: builds, hits, and the bytes and entries kept now. */
typedef struct dm_wl_cache_stats {
    uint64_t builds, hits;
    size_t bytes;
    int entries;
} dm_wl_cache_stats;
void dm_wl_cache_get_stats(dm_wl_cache_stats *s);

#ifdef __cplusplus
}
#endif

#endif
