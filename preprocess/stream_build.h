/* Internal: the incremental builder of a dm_token_stream (documents, token batches, vocabulary
 * with collision detection). Used by the preprocess driver and the tests. Reference: stream.c. */
#ifndef DM_STREAM_BUILD_H
#define DM_STREAM_BUILD_H

#include "preprocess/preprocess.h"

typedef struct dm_stream_builder {
    dm_token_stream s;
    size_t tok_off_cap, id_off_cap, label_off_cap, ids_cap, labels_cap, hashes_cap;
    /* vocabulary under construction: open addressing map hash -> term index + 1 */
    uint32_t *map;
    size_t map_cap;
    size_t n_terms, t_cap, t_cap_off;
    uint64_t *t_hash, *t_off;
    uint8_t *t_len;
    char *t_bytes;
    size_t t_bytes_len, t_bytes_cap;
} dm_stream_builder;

int dm_sb_init(dm_stream_builder *b);
void dm_sb_free(dm_stream_builder *b);
/* Appends an empty document; its tokens come with the batch that holds it. */
int dm_sb_add_doc(dm_stream_builder *b, const char *id, const char *labels);
/* Adds the tokens of a batch whose documents are first_doc .. first_doc + r->n_docs - 1 (the last
 * documents added). */
int dm_sb_add_tokens(dm_stream_builder *b, size_t first_doc, const dm_tok_result *r);
/* The first occurrence of each distinct (hash, stem bytes) of a batch, in token order: the
 * vocabulary work that does not need the stream, so that a pipeline worker does it in parallel
 * before its batch's turn and the in-order (serial) part only inserts distinct terms. The table
 * is kept between batches (dm_sb_distinct_free releases it). */
typedef struct dm_sb_distinct {
    uint32_t *first;   /* n token indices */
    size_t n, first_cap;
    uint64_t *tab;     /* open addressing: (hash, token index + 1) pairs */
    size_t tab_cap;
} dm_sb_distinct;
int dm_sb_distinct_compute(dm_sb_distinct *d, const dm_tok_result *r);
void dm_sb_distinct_free(dm_sb_distinct *d);
/* dm_sb_add_tokens with d computed on r: the same stream, vocabulary order and collision count,
 * since a token that is not its batch's first occurrence of a term never changes the vocabulary.
 * d == NULL: every token goes through the vocabulary (dm_sb_add_tokens). */
int dm_sb_add_tokens_distinct(dm_stream_builder *b, size_t first_doc, const dm_tok_result *r,
                              const dm_sb_distinct *d);
/* Moves the result into *out (vocabulary sorted) and frees the builder. */
int dm_sb_finish(dm_token_stream *out, dm_stream_builder *b);

#endif
