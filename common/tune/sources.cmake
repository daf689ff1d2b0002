# The auto-tuner's sources (paths relative to the repository root), for dm_common.
#  DM_TUNE_C_SOURCES     -> dm_common (always; tune_nocuda.c is empty in CUDA builds)
#  DM_TUNE_CUDA_SOURCES  -> dm_common when DOCMINE_CUDA is ON
# register_all.c (dm_tune_register_all, which calls every module's registrar) is not part of
# dm_common: it is the library dm_register_all (apps/CMakeLists.txt), which links every module.
# dm_common needs Threads::Threads (pthread) and libm.
set(DM_TUNE_C_SOURCES
    common/tune/registry.c
    common/tune/model.c
    common/tune/search.c
    common/tune/db.c
    common/tune/copy.c
    common/tune/print.c
    common/tune/wl_cache.c
    common/tune/tune_nocuda.c)
set(DM_TUNE_CUDA_SOURCES
    common/tune/tune_cuda.cu
    common/tune/copy_cuda.cu)
