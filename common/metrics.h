/* Clustering quality against known classes: NMI, ARI and purity from the contingency table of
 * (class, cluster). Shared by every clustering command (flock, streamclust, pipeline).
 * Reference: scikit-learn's normalized_mutual_info_score (arithmetic-mean normalisation) and
 * adjusted_rand_score, with their conventions for degenerate labelings. */
#ifndef DM_METRICS_H
#define DM_METRICS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dm_metrics {
    double nmi;      /* normalised mutual information, arithmetic-mean normalisation */
    double ari;      /* adjusted Rand index */
    double purity;   /* sum over clusters of the largest class count, over n */
    uint64_t n;      /* labelled documents compared */
    int32_t classes, clusters;
} dm_metrics;

/* Compares predicted clusters with true classes over the n items whose truth >= 0 (unlabelled
 * items have truth < 0 and are skipped). Noise (pred = -1) counts as one cluster of its own.
 * Labels are arbitrary integers. DM_ERR_INVALID_ARG when no item is labelled, DM_ERR_NOMEM. */
int dm_metrics_compute(dm_metrics *out, const int32_t *truth, const int32_t *pred, size_t n);

/* The same from the contingency table: cells (cls[i], pred[i]) with count[i] > 0 items, sorted by
 * class then cluster, distinct, classes >= 0 (so tables counted in parts, e.g. per rank, and merged
 * give the same doubles as dm_metrics_compute over all items). DM_ERR_INVALID_ARG when unsorted or
 * empty, DM_ERR_NOMEM. */
int dm_metrics_from_table(dm_metrics *out, const int32_t *cls, const int32_t *pred, const uint64_t *count,
                          size_t cells);
/* The contingency table of the labelled items (truth >= 0): *cells distinct keys (dm_malloc'ed,
 * sorted) with their counts; a key orders like the pair (class, cluster) of signed values, so
 * merged tables stay sorted by sorting keys. dm_metrics_table_split gives the pairs back.
 * DM_ERR_NOMEM. */
int dm_metrics_table(uint64_t **key, uint64_t **count, size_t *cells, const int32_t *truth, const int32_t *pred,
                     size_t n);
void dm_metrics_table_split(int32_t *cls, int32_t *pred, const uint64_t *key, size_t cells);
/* dm_metrics_from_table on a table of keys (dm_metrics_table): cell i is key[i * stride] with
 * count[i * stride] items (stride 1: two arrays; 2: interleaved (key, count) records). */
int dm_metrics_from_keys(dm_metrics *out, const uint64_t *key, const uint64_t *count, size_t stride, size_t cells);
/* The run report's "quality" object: nmi, ari, purity, labelled_documents, classes, clusters.
 * New reference; NULL when out of memory. */
json_t *dm_metrics_json(const dm_metrics *m);

/* True classes from label strings: labels[i] is item i's labels joined by ',' ("" or NULL =
 * unlabelled). The class of an item is its first label (multi-label documents count once, under
 * their first label), numbered 0.. in byte order of the names (a prefix first); unlabelled items
 * and items whose first label is empty get cls[i] = -1. *n_classes receives the number of distinct classes. DM_ERR_NOMEM. */
int dm_metrics_classes(int32_t *cls, int32_t *n_classes, const char *const *labels, size_t n);

#ifdef __cplusplus
}
#endif
#endif
