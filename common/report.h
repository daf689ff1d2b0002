/* The JSON run report (jansson): command line, versions, devices of every rank, ranks, per-stage
 * timers and counters reduced over ranks (min/avg/max), peak memory, and the command's own
 * results. Reference: none. Collective where noted; rank 0 writes. */
#ifndef DM_REPORT_H
#define DM_REPORT_H

#include <jansson.h>

#include "common/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dm_report {
    json_t *root;    /* owned */
    json_t *results; /* borrowed from root: the command's own section ("results") */
} dm_report;

/* A JSON string of the C string s (NULL: NULL) that is never refused: jansson refuses a string that
 * is not UTF-8 (json_string gives NULL, and the value would go missing from the report), so each
 * byte that does not belong to a well-formed UTF-8 sequence is written as the four characters
 * \xNN (a file name of Latin-1 bytes, a message cut in a sequence). NULL only when out of memory.
 * Use it for every string that comes from the user or the file system. */
json_t *dm_json_text(const char *s);
/* A JSON value of v that keeps it exactly: an integer up to 2^63 - 1 (jansson's integers are
 * signed: a seed of 2^64 - 1 was written as -1), above that a string of its decimal digits. NULL
 * only when out of memory. */
json_t *dm_json_u64(uint64_t v);

/* Starts a report for `command` with the command line. Not collective. */
int dm_report_init(dm_report *r, const char *command, int argc, char **argv);
void dm_report_free(dm_report *r);

/* Collective over ctx->world: adds versions, ranks, devices (gathered, unless every rank already
 * put a "devices" array into root), timers, counters and peak memory (reduced). Call once, at the
 * end of the command, on every rank. */
int dm_report_collect(dm_report *r, const dm_ctx *ctx);
/* Rank 0 writes the report atomically to path; other ranks return DM_OK. */
int dm_report_write(const dm_report *r, const dm_ctx *ctx, const char *path);

/* Collective: an array with one object per rank (rank, host, local_rank, device, gpu,
 * compute_capability, sms, memory_gb), identical on every rank. NULL on failure (the error
 * recorded; a failed allocation is agreed over the ranks first, so all return NULL). */
json_t *dm_report_devices(const dm_ctx *ctx);
/* Collective: bytes of each memory kind (host, pinned, device: bytes[DM_MEM_KINDS] of
 * common/alloc.h), the largest over the ranks, as an object of kind -> bytes (the form of
 * "peak_memory_bytes_max_over_ranks"). NULL when the reduction fails. */
json_t *dm_report_memory_max(const dm_ctx *ctx, const size_t *bytes);
/* The versions object (docmine, git, CUDA runtime/driver, MPI library, libraries). */
json_t *dm_report_versions(void);
/* The settings a run's speed or results depend on that come from the environment, as an object
 * of name -> value: every DOCMINE_* and OMP_* variable, CUDA_VISIBLE_DEVICES and GLIBC_TUNABLES
 * present in env (a NULL-terminated "NAME=VALUE" array such as environ). dm_report_collect records
 * rank 0's as "environment", so that two reports say which settings differed between them. */
json_t *dm_report_environment(char *const *env);

#ifdef __cplusplus
}
#endif
#endif
