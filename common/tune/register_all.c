/* dm_tune_register_all: registers every tunable kernel of docmine. Modules add one line each
 * (declaration + call, inside DM_HAVE_CUDA when the registrar lives in a .cu file). Built as
 * the library dm_register_all (apps/CMakeLists.txt), which links every module library.
 * Reference: none. */
#include "common/status.h"
#include "common/tune/copy.h"
#include "common/tune/tune.h"

/* Registrars of other modules (CUDA builds only). */
#if DM_HAVE_CUDA
int dm_sc_tune_register(void);
int dm_sorting_tune_register(void);
int dm_tfidf_tune_register(void);
int dm_preprocess_tune_register(void);
int dm_flock_tune_register(void);
#endif

int dm_tune_register_all(void)
{
    DM_TRY(dm_copy_tune_register());
#if DM_HAVE_CUDA
    DM_TRY(dm_sc_tune_register());
    DM_TRY(dm_sorting_tune_register());
    DM_TRY(dm_tfidf_tune_register());
    DM_TRY(dm_preprocess_tune_register());
    DM_TRY(dm_flock_tune_register());
#endif
    return DM_OK;
}
