/* Helpers shared by the preprocess tests: the Reuters directory, collecting documents through the
 * readers, distinct normalised tokens, seeded word generators. Reference: none (test support). */
#ifndef DM_PP_TESTLIB_H
#define DM_PP_TESTLIB_H

#include <stddef.h>
#include <stdint.h>

#include "preprocess/preprocess.h"

/* Directory of Reuters-21578 (*.sgm.gz) or NULL when absent. */
const char *pp_reuters_dir(void);

/* A list of words in one buffer. */
typedef struct pp_words {
    char *bytes;
    size_t len, cap;
    uint32_t *off, *wlen;
    size_t n, ncap;
} pp_words;
void pp_words_add(pp_words *w, const char *s, size_t n);
void pp_words_free(pp_words *w);
/* Distinct tokens (every maximal run of the normalised text, no filtering) of the documents of
 * corpus, in first-seen order. Returns the number of documents read. */
size_t pp_distinct_tokens(pp_words *out, const char *corpus, int format);
/* Seeded generators: random lower-case ASCII words, and words built from Porter suffixes. */
void pp_gen_random_words(pp_words *out, size_t n, uint64_t seed);
void pp_gen_suffix_words(pp_words *out, size_t n, uint64_t seed);
uint64_t pp_rand(uint64_t *s);
/* DOCMINE_SANITIZER set (scripts/gpu-check.sh sets it to the compute-sanitizer tool's name when
 * it runs the GPU tests under the sanitizer): the GPU tests run their small variant. */
int pp_sanitizer(void);
/* A small Reuters corpus: the first records (at most `bytes` raw bytes, cut after a record's end
 * tag) of each of the first n_files files of Reuters, written as tmp/reuters-small/reut2-NNN.sgm.
 * Returns the directory (in out) or NULL when Reuters is absent or a file cannot be written. */
const char *pp_reuters_small(char *out, size_t cap, const char *tmp, int n_files, size_t bytes);
/* Writes a file (creating it), returns 0 on success. */
int pp_write_file(const char *path, const void *data, size_t len);
/* The small corpus of the allocation-failure tests, written under dir (created): every reader
 * once (plain text with accented words and a non-ASCII run longer than the normaliser's stack
 * buffer, .txt.gz, one inflating 200:1, JSONL with label arrays and a bad line, TSV with a bad line, Reuters SGML with
 * entities and topics, a .tar.gz holding a text and a JSONL member, an empty file) and a few
 * plain files, so that several readers, batches and workers run at once. Returns 0 on success. */
int pp_write_mixed_corpus(const char *dir);
/* 1 when two host streams hold the same documents, tokens, vocabulary and counters. */
int pp_streams_equal(const dm_token_stream *a, const dm_token_stream *b);

/* The allocation sweeps' streams (testutil.h's dm_test_sweep): a run's in s, the reference in ref.
 * pp_sweep_differs: s is not ref (pp_streams_equal); pp_sweep_release: s freed after a run that
 * succeeded, and the batch buffers preprocess keeps for the next run released. A test's own
 * sweep argument starts with a pp_sweep. */
typedef struct pp_sweep {
    dm_token_stream ref, s;
} pp_sweep;
int pp_sweep_differs(void *sweep);
void pp_sweep_release(void *sweep, int rc);

#endif
