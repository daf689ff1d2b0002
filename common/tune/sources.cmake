# The auto-tuner's sources (paths relative to the repository root), for dm_common.
#  DM_TUNE_C_SOURCES     -> dm_common (always; tune_nocuda.c is empty in CUDA builds)
#  DM_TUNE_CUDA_SOURCES  -> dm_common when DOCMINE_CUDA is ON
#  DM_TUNE_APP_SOURCES   -> every program that calls dm_tune_register_all (docmine, bench/tune):
#                           it references the registrars of all modules, so it cannot live in
#                           dm_common (a static library below the modules).
# dm_common needs Threads::Threads (pthread) and libm.
set(DM_TUNE_C_SOURCES
    common/tune/registry.c
    common/tune/model.c
    common/tune/search.c
    common/tune/db.c
    common/tune/copy.c
    common/tune/print.c
    common/tune/tune_nocuda.c)
set(DM_TUNE_CUDA_SOURCES
    common/tune/tune_cuda.cu
    common/tune/copy_cuda.cu)
set(DM_TUNE_APP_SOURCES
    common/tune/register_all.c)
