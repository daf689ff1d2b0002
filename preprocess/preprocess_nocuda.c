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
