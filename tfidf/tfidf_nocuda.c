/* The CUDA entry points of tfidf in a CPU-only build (DOCMINE_CUDA=OFF): they report
 * DM_ERR_UNSUPPORTED. Reference: tfidf_cuda.cu. */
#include <stdio.h>

#include "common/status.h"
#include "tfidf/tfidf.h"

#define DM_NO_CUDA() DM_ERR(DM_ERR_UNSUPPORTED, "tfidf: this docmine was built without CUDA")

int dm_tf_count_cuda(dm_tf_counts *out, const uint64_t *tok_off, const uint32_t *tok, size_t n_docs,
                     uint32_t n_terms, dm_tf_count_options *opt)
{
    return DM_NO_CUDA();
}

int dm_vocab_merge_cuda(dm_termlist *out, const dm_termlist *in, dm_vocab_table_options *opt)
{
    return DM_NO_CUDA();
}

int dm_vocab_lookup_cuda(uint32_t *ids_out, const dm_termlist *vocab, const dm_termlist *queries,
                         dm_vocab_table_options *opt)
{
    return DM_NO_CUDA();
}

int dm_hash_lookup_cuda(uint32_t *ids_out, const dm_termlist *vocab, const uint64_t *hashes, size_t n,
                        dm_vocab_table_options *opt)
{
    return DM_NO_CUDA();
}

int dm_tfidf_weigh_cuda(dm_vectors *out, const dm_tf_counts *counts, const uint32_t *term_map,
                        size_t n_local_terms, const double *col_w, uint64_t n_cols, dm_weigh_options *opt)
{
    return DM_NO_CUDA();
}

int dm_tf_count_hashes_cuda(dm_tf_counts *out, dm_tf_dev **dev, const uint64_t *tok_off, const uint64_t *hashes,
                            size_t n_docs, const dm_termlist *terms, dm_tf_count_options *opt,
                            dm_vocab_table_options *vo)
{
    if (dev) *dev = NULL;
    return DM_NO_CUDA();
}

void dm_tf_dev_free(dm_tf_dev *dev) { (void)dev; }

int dm_tf_dev_df(uint64_t *df, size_t n_terms, const dm_tf_dev *dev, void *stream) { return DM_NO_CUDA(); }

int dm_tfidf_weigh_dev_cuda(dm_vectors *out, const dm_tf_dev *dev, const uint32_t *term_map, size_t n_local_terms,
                            const double *col_w, uint64_t n_cols, dm_weigh_options *opt)
{
    return DM_NO_CUDA();
}

int dm_tf_count_cuda_instances(int variant) { return 0; }
const char *dm_tf_count_cuda_instance_name(int variant, int i, char *buf, size_t len)
{
    snprintf(buf, len, "none");
    return buf;
}
int dm_tf_count_cuda_force_instance(int i) { return DM_NO_CUDA(); }
int dm_tfidf_tune_register(void) { return DM_OK; }
void dm_tfidf_cuda_set_chunks(uint64_t tokens, uint64_t entries) { (void)tokens, (void)entries; }
