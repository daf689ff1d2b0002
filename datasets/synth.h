/* The synthetic labelled corpus: news-like documents from K topics, each topic a Zipf
 * distribution over its own vocabulary, mixed with a shared background vocabulary (the topic
 * overlap). Document i depends only on (seed, i), so any split over ranks generates the same
 * corpus, and millions of documents need no disk. Reference: itself (CPU only; it feeds the
 * pipeline and the weak-scaling runs). */
#ifndef DM_SYNTH_H
#define DM_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dm_synth_options {
    uint64_t docs;        /* number of documents */
    int topics;           /* K >= 1 */
    uint64_t seed;
    int min_words;        /* document length, uniform in [min_words, max_words] tokens */
    int max_words;
    int topic_vocab;      /* words per topic vocabulary */
    int shared_vocab;     /* words of the shared background vocabulary */
    double overlap;       /* fraction of tokens drawn from the background, in [0, 1] */
    double zipf_s;        /* Zipf exponent of every vocabulary */
} dm_synth_options;
#define DM_SYNTH_OPTIONS_INIT {20000, 10, 42, 50, 1000, 4000, 8000, 0.35, 0.8}

/* A Zipf CDF over n ranks with a guide table: guide[k] = the first rank whose CDF reaches
 * k / 2^bits, so that a draw searches only between two guide entries. */
typedef struct dm_synth_cdf {
    double *cdf;
    uint32_t *guide; /* 2^bits + 1 entries */
    int n, bits;
    /* The generator's draws use 32-bit uniforms v (u = v / 2^32). bucket[v >> 16] holds the rank
     * r that the bucket's smallest v draws, and where CDF boundaries fall inside the bucket,
     * DM_SYNTH_NEXT (one boundary: the draw is r + 1 when cdf[r] < u) or DM_SYNTH_SCAN (several:
     * the draw scans on from r). DM_SYNTH_BUCKETS entries; the same ranks as dm_synth_draw. */
    uint32_t *bucket;
} dm_synth_cdf;
#define DM_SYNTH_BUCKETS 65536u
#define DM_SYNTH_NEXT 0x80000000u
#define DM_SYNTH_SCAN 0x40000000u
#define DM_SYNTH_RANK 0x3fffffffu

typedef struct dm_synth {
    dm_synth_options opt;
    dm_synth_cdf topic;  /* over topic_vocab ranks */
    dm_synth_cdf shared; /* over shared_vocab ranks */
    /* every word of every vocabulary, spelt once when there are at most 2^22 of them (else NULL:
     * spelt per draw), in 16-byte slots: slot v = rank * (topics + 1) + topic + 1 holds the word,
     * a space and zeros, and the word's length in its last byte */
    unsigned char *slots;
    uint64_t n_words;
} dm_synth;

/* Validates the options (DM_ERR_INVALID_ARG naming the bad one) and precomputes the CDFs and
 * the words. */
int dm_synth_init(dm_synth *s, const dm_synth_options *opt);
void dm_synth_free(dm_synth *s);

/* The first rank whose CDF reaches u, for u in [0, 1) (the inverse CDF; what a binary search over
 * c->cdf gives). */
uint32_t dm_synth_draw(const dm_synth_cdf *c, double u);

/* The same rank for u = v / 2^32, from the bucket table (the generator's draw). */
static inline uint32_t dm_synth_draw32(const dm_synth_cdf *c, uint32_t v)
{
    uint32_t e = c->bucket[v >> 16], r = e & DM_SYNTH_RANK;
    double u = (double)v * (1.0 / 4294967296.0);
    if (e & DM_SYNTH_SCAN) {
        while (c->cdf[r] < u) r++; /* ends at the bucket's last rank at the latest */
        return r;
    }
    /* without a branch: in the tail of a Zipf CDF every other bucket holds a boundary */
    return r + ((e >> 31) & (uint32_t)(c->cdf[r] < u));
}

/* Tests: 0 makes dm_synth_doc draw its random words with the scalar code even where the CPU has
 * AVX2 (the same words either way); 1 (the default) uses AVX2 where there is. Not thread-safe. */
void dm_synth_set_simd(int on);

/* Document i: its topic label (0..K-1) and text (space-separated lower-case words, no trailing
 * space) written into *buf (grown with dm_realloc as needed; *cap its capacity). */
int dm_synth_doc(const dm_synth *s, uint64_t i, int *label, char **buf, size_t *cap, size_t *len);

/* The word of a vocabulary of a corpus with `topics` topics: topic t (0..K-1) rank r, or the
 * shared vocabulary (t = -1).
 * Words are pronounceable consonant-vowel strings ending in 'a' or 'o' (Porter leaves them
 * whole), unique across all vocabularies, and never an English stop word. */
void dm_synth_word(char out[32], int topics, int topic, uint32_t rank);

/* The documents [first, last) of this rank's share: an even split of docs over size ranks. */
void dm_synth_share(uint64_t docs, int rank, int size, uint64_t *first, uint64_t *last);

struct dm_atomic_file;
/* Writes documents [first, last) as TSV lines "id<TAB>label<TAB>text" into f, an output opened
 * with dm_atomic_open (common/fileio.h) that the caller finishes and puts in place, or aborts.
 * ids are "synth-<i>", labels "topic<k>". DM_ERR_IO naming f's path and why on a failed write. */
int dm_synth_write_tsv(const dm_synth *s, struct dm_atomic_file *f, uint64_t first, uint64_t last);

#ifdef __cplusplus
}
#endif
#endif
