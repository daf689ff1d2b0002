/* Sparse document vectors: the output of tfidf and the input of flock and streamclust.
 * CSR rows, one per document in corpus order, term-sorted (strictly increasing term ids), float
 * weights (L2-normalised by default). Reference: none (a data structure; tfidf fills it).
 * Plain C11. The binary file format (`.dmv`) is documented at dm_vectors_write in tfidf.h. */
#ifndef DM_VECTORS_H
#define DM_VECTORS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dm_vectors {
    uint64_t n_rows;     /* documents held here (this rank's share, or all) */
    uint64_t row_base;   /* global index of row 0 (documents of lower ranks before it) */
    uint64_t n_cols;     /* vocabulary size: term ids are 0..n_cols-1, the same on every rank */
    uint64_t *row_off;   /* n_rows + 1; row r is [row_off[r], row_off[r+1]) */
    uint32_t *col;       /* term ids, strictly increasing within a row */
    float *val;          /* weights */
    /* document ids and labels as in the token stream: NUL-terminated strings at offsets */
    uint64_t *id_off;    /* n_rows + 1 */
    char *ids;
    uint64_t *label_off; /* n_rows + 1; labels joined by ',' ("" = unlabelled) */
    char *labels;
    uint32_t flags;      /* DM_VECTORS_* */
} dm_vectors;

enum { DM_VECTORS_L2 = 1u << 0, DM_VECTORS_SUBLINEAR = 1u << 1, DM_VECTORS_ICF = 1u << 2,
       DM_VECTORS_IDF_SKLEARN = 1u << 3 };

static inline uint64_t dm_vectors_nnz(const dm_vectors *v) { return v->row_off[v->n_rows]; }
static inline const char *dm_vectors_id(const dm_vectors *v, uint64_t r) { return v->ids + v->id_off[r]; }
static inline const char *dm_vectors_labels(const dm_vectors *v, uint64_t r)
{
    return v->labels + v->label_off[r];
}

/* Releases every array (dm_free) and zeroes the struct. */
void dm_vectors_free(dm_vectors *v);

#ifdef __cplusplus
}
#endif
#endif
