/* The CUDA entry points of preprocess in a CPU-only build (DOCMINE_CUDA=OFF): they report
 * DM_ERR_UNSUPPORTED. Reference: preprocess_cuda.cu. */
#include "common/status.h"
#include "preprocess/preprocess.h"

int dm_tokenize_cuda(dm_tok_result *out, const dm_tok_batch *in, const dm_stopset *stop,
                     const dm_tok_options *opt)
{
    return DM_ERR(DM_ERR_UNSUPPORTED, "preprocess: this docmine was built without CUDA");
}

int dm_stem_words_cuda(char *out, uint32_t *out_off, uint32_t *out_len, const char *words,
                       const uint32_t *off, const uint32_t *len, size_t n)
{
    return DM_ERR(DM_ERR_UNSUPPORTED, "preprocess: this docmine was built without CUDA");
}

int dm_preprocess_tune_register(void) { return DM_OK; }
int dm_pp_cuda_kernel_count(void) { return 0; }
int dm_pp_cuda_instance_count(int kernel) { return 0; }
const char *dm_pp_cuda_kernel_name(int kernel) { return "none"; }
int dm_pp_cuda_force_instance(int kernel, int instance)
{
    return DM_ERR(DM_ERR_UNSUPPORTED, "preprocess: this docmine was built without CUDA");
}
void dm_pp_cuda_take_times(double *h2d, double *kernels, double *d2h) { *h2d = *kernels = *d2h = 0; }
void dm_pp_cuda_result_release(dm_tok_result *r) { (void)r; } /* never pinned without CUDA */
int dm_pp_cuda_get_device(int *dev)
{
    *dev = -1;
    return DM_ERR(DM_ERR_UNSUPPORTED, "preprocess: this docmine was built without CUDA");
}
int dm_pp_cuda_set_device(int dev)
{
    return DM_ERR(DM_ERR_UNSUPPORTED, "preprocess: this docmine was built without CUDA");
}
int dm_pp_cuda_kernel_bench(double *seconds, double phase[4], size_t *tokens, const dm_tok_batch *in,
                            const dm_stopset *stop, const dm_tok_options *opt, int repeats)
{
    return DM_ERR(DM_ERR_UNSUPPORTED, "preprocess: this docmine was built without CUDA");
}
int dm_pp_cuda_dev_grow(uint64_t **p, size_t *cap, size_t need, size_t keep, size_t limit)
{
    return DM_ERR(DM_ERR_UNSUPPORTED, "preprocess: this docmine was built without CUDA");
}
int dm_pp_cuda_copy(void *dst, const void *src, size_t n)
{
    return DM_ERR(DM_ERR_UNSUPPORTED, "preprocess: this docmine was built without CUDA");
}
