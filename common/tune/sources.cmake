# The auto-tuner's sources (paths relative to the repository root), for dm_common.
#  DM_TUNE_C_SOURCES     -> dm_common (always; tune_nocuda.c is empty in CUDA builds)
#  DM_TUNE_CUDA_SOURCES  -> dm_common when DOCMINE_CUDA is ON
# register_all.c defines dm_tune_register_all, which calls every module's registrar: a program
# that calls it must link every module library after dm_common (docmine and bench_tune do; the
# linker resolves dm_common's references to later archives).
# dm_common needs Threads::Threads (pthread) and libm.
set(DM_TUNE_C_SOURCES
    common/tune/registry.c
    common/tune/model.c
    common/tune/search.c
    common/tune/db.c
    common/tune/copy.c
    common/tune/print.c
    common/tune/register_all.c
    common/tune/tune_nocuda.c)
set(DM_TUNE_CUDA_SOURCES
    common/tune/tune_cuda.cu
    common/tune/copy_cuda.cu)
