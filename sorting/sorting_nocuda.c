/* The CUDA entry points of sorting in a CPU-only build (DOCMINE_CUDA=OFF): they report
 * DM_ERR_UNSUPPORTED. Reference: sorting_cuda.cu. */
#include <stdio.h>

#include "common/status.h"
#include "sorting/sorting.h"

#define DM_NO_CUDA() DM_ERR(DM_ERR_UNSUPPORTED, "sorting: this docmine was built without CUDA")

int dm_sort_pairs_u32_cuda(void *temp, size_t *temp_bytes, uint32_t *keys_out, uint32_t *vals_out,
                           const uint32_t *keys_in, const uint32_t *vals_in, size_t n, int begin_bit,
                           int end_bit, void *stream)
{
    return DM_NO_CUDA();
}

int dm_sort_pairs_u64_cuda(void *temp, size_t *temp_bytes, uint64_t *keys_out, uint32_t *vals_out,
                           const uint64_t *keys_in, const uint32_t *vals_in, size_t n, int begin_bit,
                           int end_bit, void *stream)
{
    return DM_NO_CUDA();
}

int dm_segsort_pairs_cuda(void *temp, size_t *temp_bytes, uint32_t *keys_out, float *vals_out,
                          const uint32_t *keys_in, const float *vals_in, size_t n, const uint64_t *seg_off,
                          size_t n_segments, void *stream)
{
    return DM_NO_CUDA();
}

int dm_segsort_pairs_u32_cuda(void *temp, size_t *temp_bytes, uint32_t *keys_out, uint32_t *vals_out,
                              const uint32_t *keys_in, const uint32_t *vals_in, size_t n,
                              const uint64_t *seg_off, size_t n_segments, void *stream)
{
    return DM_NO_CUDA();
}

int dm_segsort_bitonic_cuda(void *temp, size_t *temp_bytes, uint32_t *keys_out, float *vals_out,
                            const uint32_t *keys_in, const float *vals_in, size_t n, const uint64_t *seg_off,
                            size_t n_segments, void *stream)
{
    return DM_NO_CUDA();
}

int dm_segsort_cub_cuda(void *temp, size_t *temp_bytes, uint32_t *keys_out, float *vals_out,
                        const uint32_t *keys_in, const float *vals_in, size_t n, const uint64_t *seg_off,
                        size_t n_segments, void *stream)
{
    return DM_NO_CUDA();
}

void dm_segsort_use_bitonic(int on) { (void)on; }
int dm_segsort_uses_bitonic(void) { return 0; }
int dm_segsort_bitonic_instances(void) { return 0; }
const char *dm_segsort_bitonic_instance_name(int i, char *buf, size_t len)
{
    snprintf(buf, len, "none");
    return buf;
}
int dm_segsort_bitonic_force_instance(int i) { return DM_NO_CUDA(); }
int dm_sorting_tune_register(void) { return DM_OK; }
