/* Helpers of the tfidf tests: local documents built from word lists with a chosen hash (the real
 * dm_term_hash or a weak test-only hash that makes collisions), seeded random corpora, brute-force
 * oracles, file comparison and small corpora on disk. Reference: none (test support). */
#ifndef DM_TFIDF_TESTLIB_H
#define DM_TFIDF_TESTLIB_H

#include <stddef.h>
#include <stdint.h>

#include "tfidf/tfidf.h"

typedef uint64_t tl_hash_fn(const char *s, size_t n);
/* The real term hash, and a weak one: only 3 distinct values, so most terms collide. */
uint64_t tl_real_hash(const char *s, size_t n);
uint64_t tl_weak_hash(const char *s, size_t n);

/* Builds local documents from space-separated word lists (docs[d], "" = empty document) with the
 * given hash: terms resolved by bytes in a term table of initial capacity table_cap (0 = default),
 * counts by dm_tf_count_cpu. ids are "<prefix><d + first_id>", labels labels[d] (NULL: ""). */
int tl_local_build(dm_tfidf_local *out, const char *const *docs, size_t n_docs, tl_hash_fn *hash,
                   size_t table_cap, const char *prefix, size_t first_id, const char *const *labels);

/* A seeded random corpus of n_docs documents as space-separated words: words from a vocabulary of
 * vocab_size random lower-case words (2..12 letters) picked with a skewed distribution; document
 * lengths 0..max_len (about one in 16 empty). Returns an array of n_docs strings (free with
 * tl_docs_free). */
char **tl_random_docs(size_t n_docs, size_t vocab_size, size_t max_len, uint64_t seed);
void tl_docs_free(char **docs, size_t n_docs);

/* 1 when both files exist and have identical bytes. */
int tl_files_equal(const char *a, const char *b);
/* Reads a whole file (dm_malloc'ed), NULL on failure. */
char *tl_read_file(const char *path, size_t *len);
/* Writes a file (not atomically). 0 on success. */
int tl_write_file(const char *path, const char *data, size_t len);
/* Flips one byte of a file at offset. 0 on success. */
int tl_flip_byte(const char *path, long offset);

/* Structural invariants of vectors: offsets monotone, columns strictly increasing and < n_cols;
 * with l2, every non-empty row has norm 1 within tol. Returns 1 when they hold. */
int tl_vectors_ok(const dm_vectors *v, int l2, double tol);
/* Compares two vectors: same rows, ids, labels, columns; values within rel_tol relative
 * (0 = bit-identical). Returns 1 when equal. */
int tl_vectors_equal(const dm_vectors *a, const dm_vectors *b, double rel_tol);

#endif
