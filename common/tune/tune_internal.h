/* Helpers shared by the tuner's files: warnings and a monotonic clock. Reference: none.
 * Internal to common/tune (plain C). */
#ifndef DM_TUNE_INTERNAL_H
#define DM_TUNE_INTERNAL_H

#ifdef __cplusplus
extern "C" {
#endif

/* "docmine: warning: tune: ..." on stderr (rank-prefixed when the rank is known). Never fails. */
void dm_tune_warn(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* Seconds from a monotonic clock. */
double dm_tune_now(void);

#ifdef __cplusplus
}
#endif
#endif
