/* Internal: the incremental builder of a dm_token_stream (documents, token batches, vocabulary
 * with collision detection). Used by the preprocess driver and the tests. Reference: stream.c.
 *
 * Two ways in, giving the same stream:
 *  - serial: dm_sb_add_doc per document, then dm_sb_add_tokens per batch (every token goes
 *    through the vocabulary); the tests' reference.
 *  - per batch, in three steps (what the pipeline's workers do, so that most of the work runs
 *    in parallel and only a small part in batch order):
 *      dm_sb_batch_prepare  any thread, any time: the batch's distinct terms (one probe per
 *                           token into a small table of the batch; only per listed token when
 *                           the result lists its possible first occurrences, dm_tok_result.first)
 *                           and its ids and labels laid out as in the stream; touches no builder
 *                           state;
 *      dm_sb_batch_commit   in batch order, one thread at a time: reserves the batch's ranges of
 *                           documents, tokens, id and label bytes (growing the arrays), inserts
 *                           only the distinct terms into the vocabulary, adds the counters;
 *      dm_sb_batch_fill     after its commit, concurrently with other commits and fills: copies
 *                           hashes, token offsets, ids and labels into the reserved ranges (the
 *                           builder's lock keeps a growing commit from moving the arrays under a
 *                           fill). Every fill must be done before dm_sb_finish.
 *    A term that is not its batch's first occurrence never changes the vocabulary, and the
 *    vocabulary is sorted by (hash, bytes) at the end, so both ways give identical streams.
 *
 * Prefaulting (optional, dm_sb_prefault_start; the pipeline uses it): the stream's arrays are
 * fresh memory (the hashes alone are 8 bytes per token, ~0.5 GB for 1 GB of Reuters), and
 * writing them first is mostly page faults (kernel page clearing; on the GPU VMs the host also
 * backs each new page), about 1 GB/s on one thread, which made the fills the bulk of the build.
 * With prefaulting, each commit reserves DM_SB_PF_AHEAD batches more than it needs and
 * DM_SB_PF_THREADS helper threads populate the pages of the next batches' ranges
 * (madvise(MADV_POPULATE_WRITE): no data is written, so the fills may run alongside) while the
 * current batches are filled; the fills then mostly copy into mapped pages. A commit that grows
 * an array first waits for the populates in flight (at most one chunk each), so no populate runs
 * on a moved block. Where the kernel lacks MADV_POPULATE_WRITE (before Linux 5.14) the helpers
 * stop at the first attempt and the fills fault as before. The stream is the same either way. */
#ifndef DM_STREAM_BUILD_H
#define DM_STREAM_BUILD_H

#include <pthread.h>

#include "preprocess/preprocess.h"

typedef struct dm_stream_builder {
    dm_token_stream s;
    size_t tok_off_cap, id_off_cap, label_off_cap, ids_cap, labels_cap, hashes_cap;
    uint64_t ids_len, labels_len; /* bytes reserved (committed) in ids and labels */
    pthread_rwlock_t grow_lock;   /* fills read-lock, a commit that grows write-locks */
    /* vocabulary under construction: open addressing map hash -> term index + 1 */
    uint32_t *map;
    size_t map_cap;
    size_t n_terms, t_cap, t_cap_off;
    uint64_t *t_hash, *t_off;
    uint8_t *t_len;
    char *t_bytes;
    size_t t_bytes_len, t_bytes_cap;
    struct dm_sb_prefault *pf; /* NULL unless dm_sb_prefault_start */
    /* device mode (dm_sb_device_start): the hashes go to s.dev_hashes (hashes_cap counts them),
     * each batch's fill copying its result's dev_hash there; when the device array cannot grow
     * (dm_pp_cuda_dev_grow), the hashes move to the host and the builder goes on there
     * (dev_moved = 1; the fills then download each result's dev_hash) */
    int dev, dev_moved;
    size_t dev_limit; /* tests: at most this many hashes on the device (0: no limit) */
} dm_stream_builder;

#define DM_SB_PF_THREADS 2 /* populate threads: one thread faults ~1-1.5 GB/s, a pipeline fills
                              the hashes at about that rate */
#define DM_SB_PF_AHEAD 2   /* batches (of the last commit's size) populated ahead of the stream */

int dm_sb_init(dm_stream_builder *b);
void dm_sb_free(dm_stream_builder *b);
/* Appends an empty document; its tokens come with the batch that holds it. */
int dm_sb_add_doc(dm_stream_builder *b, const char *id, const char *labels);
/* Adds the tokens of a batch whose documents are first_doc .. first_doc + r->n_docs - 1 (the last
 * documents added). */
int dm_sb_add_tokens(dm_stream_builder *b, size_t first_doc, const dm_tok_result *r);

/* One batch's share of the stream (owned by the caller; reuse it for the next batch, free with
 * dm_sb_batch_free). */
typedef struct dm_sb_batch {
    /* distinct (hash, stem bytes) pairs of the batch, first occurrences in token order; the
     * bytes are copied into term_bytes so that probes stay in a small, cache-resident area */
    size_t n_terms, terms_cap;
    uint64_t *term_hash;
    uint64_t *term_off;   /* into term_bytes */
    uint8_t *term_len;
    char *term_bytes;
    size_t term_bytes_len, term_bytes_cap;
    uint64_t *tab;        /* open addressing: 2 words per slot (hash, off << 9 | len << 1 | 1) */
    size_t tab_cap;       /* slots, power of two, at least twice n_terms */
    /* documents: ids and labels NUL-terminated and concatenated, offsets relative to the batch */
    size_t n_docs, docs_cap, n_labelled;
    uint64_t *id_off, *label_off; /* n_docs + 1 */
    char *ids, *labels;
    size_t ids_cap, labels_cap;
    /* where dm_sb_batch_commit put the batch */
    size_t doc0, tok0;
    uint64_t id0, label0;
    int committed;
} dm_sb_batch;

/* meta: per document "id NUL labels NUL", r->n_docs of them (the pipeline's batch metadata).
 * Errors: DM_ERR_NOMEM. */
int dm_sb_batch_prepare(dm_sb_batch *p, const dm_tok_result *r, const char *meta);
/* Errors: DM_ERR_INVALID_ARG (not prepared on r), DM_ERR_NOMEM. */
int dm_sb_batch_commit(dm_stream_builder *b, dm_sb_batch *p, const dm_tok_result *r);
/* Errors (device mode only): DM_ERR_CUDA, DM_ERR_INVALID_ARG (a result without its dev_hash). */
int dm_sb_batch_fill(dm_stream_builder *b, dm_sb_batch *p, const dm_tok_result *r);
void dm_sb_batch_free(dm_sb_batch *p);

/* Starts the prefault threads (see above); call before the first commit. Errors: DM_ERR_NOMEM
 * (no memory or thread). */
int dm_sb_prefault_start(dm_stream_builder *b);
/* Stops and joins them (after the last fill; dm_sb_finish and dm_sb_free do it too) and gives
 * their populate time in thread-seconds and the bytes populated (0 without prefaulting). */
void dm_sb_prefault_stop(dm_stream_builder *b, double *seconds, uint64_t *bytes);

/* Device mode (CUDA backend, before the first commit): the stream's hashes are kept on the device
 * (dm_token_stream.dev_hashes); every batch must then be tokenised with
 * dm_tok_options.device_hashes. limit: as dev_limit. */
void dm_sb_device_start(dm_stream_builder *b, size_t limit);

/* Moves the result into *out (vocabulary sorted) and frees the builder; on an error
 * (DM_ERR_NOMEM) the builder is freed too and *out is empty. */
int dm_sb_finish(dm_token_stream *out, dm_stream_builder *b);

#endif
