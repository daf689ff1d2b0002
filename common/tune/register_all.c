/* dm_tune_register_all: registers every tunable kernel of docmine. Modules add one line each
 * (declaration + call). Compiled into the programs (docmine, bench, tests that need every kernel),
 * not into dm_common, so that common does not depend on the modules above it (see sources.cmake).
 * Reference: none. */
#include "common/status.h"
#include "common/tune/copy.h"
#include "common/tune/tune.h"

/* Registrars of other modules (CUDA builds only), e.g.
 * int dm_streamclust_tune_register(void); */

int dm_tune_register_all(void)
{
    DM_TRY(dm_copy_tune_register());
#if DM_HAVE_CUDA
    /* DM_TRY(dm_streamclust_tune_register()); */
#endif
    return DM_OK;
}
