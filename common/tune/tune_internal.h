/* Helpers shared by the tuner's files: warnings (the clock is dm_wtime, common/log.h). Reference: none.
 * Internal to common/tune (plain C). */
#ifndef DM_TUNE_INTERNAL_H
#define DM_TUNE_INTERNAL_H

#include "common/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "docmine: warning: tune: ..." on stderr (rank-prefixed when the rank is known). Never fails. */
void dm_tune_warn(const char *fmt, ...) DM_PRINTF(1, 2);

#ifdef __cplusplus
}
#endif
#endif
