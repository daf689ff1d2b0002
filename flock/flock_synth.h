/* Synthetic labelled document vectors for flock (tests, benchmark, `docmine flock --synth`):
 * a Zipf-topic model drawn straight to term ids. Reference: none (a generator, flock_synth.c).
 * Plain C11. */
#ifndef DM_FLOCK_SYNTH_H
#define DM_FLOCK_SYNTH_H

#include <stdint.h>

#include "tfidf/vectors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dm_flock_synth_options {
    int topics;        /* K >= 1: labels "topic0".."topic<K-1>" */
    int tokens;        /* words drawn per document (distinct terms are fewer) */
    int topic_vocab;   /* words per topic vocabulary */
    int shared_vocab;  /* words of the shared background vocabulary */
    double overlap;    /* fraction of words from the background */
    double zipf;       /* Zipf exponent */
    uint64_t seed;
} dm_flock_synth_options;
/* 600 tokens give about 400 distinct terms per document */
#define DM_FLOCK_SYNTH_OPTIONS_INIT {10, 600, 4000, 8000, 0.35, 0.8, 42}

/* Documents [first, first + count) of the corpus as vectors (row_base = first; ids "synth-<i>",
 * labels "topic<k>"). Release with dm_flock_vectors_release. */
int dm_flock_synth_vectors(dm_vectors *out, const dm_flock_synth_options *o, uint64_t first, uint64_t count);
/* The topic of document i. */
int dm_flock_synth_topic(const dm_flock_synth_options *o, uint64_t i);
/* Frees vectors whose arrays were allocated with dm_malloc (the generator's), zeroing the struct. */
void dm_flock_vectors_release(dm_vectors *v);
/* An even split of n documents over size ranks: [first, first + count) for rank. */
void dm_flock_share(uint64_t n, int rank, int size, uint64_t *first, uint64_t *count);

#ifdef __cplusplus
}
#endif
#endif
