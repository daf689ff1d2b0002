/* Multi-species flocking (MSF) document clustering: every document is a boid on a toroidal plane
 * that flies with similar documents and away from dissimilar ones; clusters are the connected
 * components of "within r and similarity >= T" at the end. The plane is cut into P horizontal
 * slices, one per rank, with halo and migrating boids exchanged between neighbour slices.
 * Reference: DESIGN.md section 7 ("Multi-species flocking"); the model's arithmetic is
 * flock/flock_model.h, the CPU backend (flock_cpu.c) is the oracle of the CUDA backend.
 * Plain C11, no CUDA types.
 *
 * Determinism: trajectories depend only on the vectors, the options and the seed - not on the
 * number of ranks, the slice widths, the order of boids on a rank or an interruption and
 * resume - and are bit-identical across those on one backend (see flock_model.h for how). */
#ifndef DM_FLOCK_H
#define DM_FLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "common/context.h"
#include "common/metrics.h"
#include "tfidf/vectors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dm_flock_sim dm_flock_sim;

typedef struct dm_flock_options {
    int iterations;          /* total iterations of the run */
    double radius;           /* interaction radius r (plane units); documents x radius at most
                                DM_FLOCK_DOCS_RADIUS_MAX = 2^30 (flock_model.h) */
    double neighbours;       /* expected neighbours within r at the initial uniform density: the
                                plane is square with area N * pi r^2 / neighbours (N pi /
                                neighbours grid cells: at most 16 a document plus 4096, so
                                >= about pi / 16 for large N; small N allow less) */
    double threshold;        /* T: neighbours with cosine >= T are similar */
    double w_separation;     /* separation from similar neighbours */
    double w_dissimilar;     /* separation from dissimilar neighbours (stronger) */
    double w_alignment;      /* alignment with similar neighbours */
    double w_cohesion;       /* cohesion with similar neighbours */
    double v_max;            /* speed cap (plane units), 0 < v_max < radius */
    double shrink;           /* the side of the plane shrinks linearly by this fraction over the
                                run: side(t) = side(0) (1 - shrink t / iterations), 0 <= shrink < 1 */
    double min_dist;         /* separation softening, as a fraction of r: a neighbour at distance
                                d pushes with d / max(d, min_dist r)^2, 1 / d down to min_dist r,
                                then less, fading to 0 at d = 0 (coincident boids do not push) */
    uint64_t seed;           /* initial positions and velocities: RNG keyed by (seed, document) */
    const double *slice_weights; /* NULL: equal slices; else one relative speed per rank (the
                                    slice heights are proportional), identical on every rank */
    int checkpoint_every;    /* write a checkpoint every K iterations (0: never) */
    const char *checkpoint;  /* checkpoint file (required when checkpoint_every > 0 or resume) */
    int resume;              /* continue from the checkpoint file */
    int stop_after;          /* > 0: return after this iteration as if interrupted (tests) */
    /* called on every rank after every iteration (collective use allowed); non-zero stops */
    int (*on_iteration)(dm_flock_sim *sim, void *user);
    void *user;
    int migrate_every;       /* boids that left their slice move to its owner after every K-th
                                iteration and after the last (0: the largest K up to
                                DM_FLOCK_MIGRATE_AUTO_MAX that the slices allow, 1 with one rank).
                                Until then the owner keeps computing them, with a halo margin of
                                r + (K - 1) v_max; results do not depend on K */
    int slice_weights_measured; /* slice_weights are measured speeds (--slice-weights auto): when
                                   they leave a slice too low for the halo at the last iteration,
                                   the slices are equal instead (given weights fail the run) */
} dm_flock_options;
#define DM_FLOCK_OPTIONS_INIT                                                                      \
    {500, 1.0, 15.0, 0.10, 0.02, 0.05, 0.30, 0.05, 0.5, 0.5, 0.05, 42, NULL, 0, NULL, 0, 0, NULL, NULL, 0, 0}
/* The largest weight (w_separation .. w_cohesion): far beyond any useful value (the defaults are
 * 0.02 to 0.3; much larger ones leave every boid at the speed cap every step), and it keeps every
 * force finite (dm_flock_update). */
#define DM_FLOCK_WEIGHT_MAX 1.0e6
/* The largest migration interval the automatic choice takes (migrate_every = 0). */
#define DM_FLOCK_MIGRATE_AUTO_MAX 4

/* Counters of one rank since the start of the run (the driver also adds them to the report). */
typedef struct dm_flock_stats {
    uint64_t pairs;          /* neighbour pairs examined within r (ordered: x sees i) */
    uint64_t similar;        /* of which similar */
    uint64_t halo_sent;      /* halo boids sent */
    uint64_t halo_vectors;   /* of which with their vector (the others were cached by the receiver) */
    uint64_t migrated_out;   /* boids that left this rank's slice */
    uint64_t migrated_in;
    uint64_t migrated_vectors; /* migrants sent with their vector (the others' vectors were in the
                                  receiver's halo) */
    uint64_t seam_crossings; /* boids of this rank that crossed the torus seam in y */
    uint64_t sim_cache_hits; /* similarity decisions taken from the pair cache */
    uint64_t device_grows;   /* CUDA device arrays replaced by larger ones during the steps */
    uint64_t migrations;     /* migration exchanges (one every migrate_every iterations) */
    uint64_t halo_returned;  /* halo boids sent without their vector because they had just migrated
                                from the receiver, which kept their vectors */
} dm_flock_stats;

/* A read-only view of this rank's own boids (host memory, valid until the next step). */
typedef struct dm_flock_view {
    size_t n;
    const uint64_t *id;      /* global document index (vectors' row_base + row) */
    const double *x, *y, *vx, *vy;
} dm_flock_view;

/* Creates the simulation over ctx->world from this rank's share of the vectors (v->row_base
 * gives the global document index of its rows; shares must tile 0..N-1 in rank order).
 * Places every document (RNG or checkpoint), distributes boids to their slice owners, with
 * their vectors normalised to unit length. Uses ctx->backend. Collective.
 * Errors: DM_ERR_INVALID_ARG (options, a plane too small for the ranks, shares), DM_ERR_NOMEM,
 * DM_ERR_IO / DM_ERR_FORMAT (checkpoint; the file to write is checked first, see
 * dm_flock_checkpoint_target), DM_ERR_CUDA, DM_ERR_MPI; agreed on every rank. */
int dm_flock_sim_init(dm_flock_sim **out, const dm_ctx *ctx, const dm_vectors *v, const dm_flock_options *opt);
void dm_flock_sim_free(dm_flock_sim *s);

/* Runs iterations until opt->iterations (or stop_after, or a hook's stop), writing checkpoints.
 * Collective. Status agreed on every rank. */
int dm_flock_sim_run(dm_flock_sim *s);
/* One iteration (halo exchange, forces, update; the migration after every migrate_every-th and
 * the last). Between migrations own boids may lie up to (K - 1) v_max outside their slice.
 * Collective. */
int dm_flock_sim_step(dm_flock_sim *s);

int dm_flock_sim_iteration(const dm_flock_sim *s);
uint64_t dm_flock_sim_docs(const dm_flock_sim *s);
const dm_flock_stats *dm_flock_sim_stats(const dm_flock_sim *s);
/* The migration interval K in use (dm_flock_options.migrate_every, or the automatic choice). */
int dm_flock_sim_migrate_every(const dm_flock_sim *s);
/* Whether the slices are cut by dm_flock_options.slice_weights (0: equal slices, also when
 * measured weights could not be kept). */
int dm_flock_sim_weighted(const dm_flock_sim *s);
/* The plane at the current iteration. */
void dm_flock_sim_plane(const dm_flock_sim *s, double *W, double *H);
/* Adds this rank's counters to the run's counters (dm_counter_add "flock.*") for the report. */
void dm_flock_stats_publish(const dm_flock_sim *s);
/* This rank's own boids, copied to the host first on the CUDA backend. */
int dm_flock_sim_view(dm_flock_sim *s, dm_flock_view *out);

/* This rank's speed in boid-iterations per second on its backend, measured alone (over
 * MPI_COMM_SELF) on a small synthetic problem; used to size slices when GPUs differ. Not
 * collective. */
int dm_flock_calibrate(double *speed, const dm_ctx *ctx);

/* Writes the checkpoint now (collective; atomic; rank 0 writes). The simulation must have been
 * created with checkpoint_every > 0 or resume (its input's fingerprint is computed then), else
 * DM_ERR_INVALID_ARG. */
int dm_flock_checkpoint_write(dm_flock_sim *s, const char *path);
/* Whether a run with these options writes a checkpoint after `iteration`: after every
 * checkpoint_every-th and after the last (0: never). */
int dm_flock_checkpoint_due(const dm_flock_options *o, int iteration);

/* The backend step: one iteration on this rank, including its halo and migration exchanges. */
typedef int dm_flock_step_fn(dm_flock_sim *s);
dm_flock_step_fn dm_flock_step_cpu, dm_flock_step_cuda;

/* Registers the CUDA kernels of flock with the tuner (flock.cell_keys, .cell_bounds, .gather,
 * .count, .detect, .similarity, .forces, .update, .cache_move). Idempotent; CUDA builds only (for
 * dm_tune_register_all); the CUDA backend also calls it when a simulation starts. */
int dm_flock_tune_register(void);

/* Selects every kernel a simulation of n boids a rank on `ranks` ranks launches, at the sizes it
 * launches them: the boids' kernels and the clusters' at n, the similarity at the pair cache's
 * misses and mirrors (n/64 .. 64 n pairs), the halo's (flags,
 * pick) with several ranks. With no database entry a selection searches, and a search builds a
 * flock state of its own (up to 2^20 boids): the CUDA backend calls this when a simulation starts,
 * before it allocates, so that no search runs beside it (a first run's device peak) or inside its
 * steps. Not collective; CUDA builds only. */
int dm_flock_cuda_select_ahead(size_t n, int ranks);

/* ---- clusters -------------------------------------------------------------------------------- */

/* What happens to the documents of small components (dm_flock_cluster_options.attach). */
enum dm_flock_small {
    DM_FLOCK_SMALL_NOISE = 0,     /* labelled noise (-1) */
    DM_FLOCK_SMALL_NEIGHBOUR = 1, /* each document joins the cluster of its nearest (plane distance,
                                     ties by document index) neighbour within r that is in a
                                     cluster, else noise */
    DM_FLOCK_SMALL_CENTROID = 2   /* each document joins the cluster whose centroid (sum of its
                                     members' unit vectors, exact fixed-point sums, all-reduced
                                     over ranks) has the highest cosine with it (ties: the lower
                                     cluster number, exact for parallel centroids); noise when no
                                     centroid shares a term of positive weight with it.
                                     Not flocking: a nearest-centroid assignment after it */
};

typedef struct dm_flock_cluster_options {
    int min_size;   /* components with fewer documents are small */
    int attach;     /* enum dm_flock_small: what becomes of the small components' documents
                       (default: DM_FLOCK_SMALL_CENTROID) */
    double threshold; /* edges need cosine >= this; below -1 (default): the model's T. A higher
                         value than T cuts the chains that single linkage builds across topics */
    double merge;     /* 0: off; in (0, 1] (default 0.5): then the clusters are merged while the
                         two most cosine-similar centroids (sums of their members' unit vectors,
                         exact sums) have cosine >= merge, centroid linkage, and renumbered by
                         their smallest document index. Not flocking: a post-processing step (see
                         bench/RESULTS.md, "merging clusters by centroid"); skipped above
                         DM_FLOCK_CENTROID_MAX clusters, as the centroid attachment is */
    int refine;       /* 0: off; N > 0 (default 30): then up to N refinement steps, Lloyd steps
                         of spherical k-means started from these clusters: every clustered
                         document moves at once to the cluster whose centroid is the most
                         cosine-similar (exact sums, as the attachment), until a step moves none;
                         emptied clusters are dropped, noise stays noise. Not flocking:
                         flocking chooses the number of clusters and the start (bench/RESULTS.md,
                         sessions 22 and 25); skipped with the other centroid steps */
} dm_flock_cluster_options;
/* The centroid steps (small components by centroid, the merge) cost about (small documents x
 * clusters sharing their terms) and k^2 (the merge's matrix of centroid dot products): with more
 * clusters than this both are skipped (a warning, and the report says so): small components are
 * noise, the clusters are left as they are. */
#define DM_FLOCK_CENTROID_MAX 4096
/* The defaults (small components by centroid, merge at 0.5) come from the study in
 * bench/RESULTS.md, "Session 12": better than pure flocking (noise, no merge) on Reuters-21578
 * and on the synthetic corpora at every setting studied. Up to 30 refinement steps (session 25):
 * they bring flock's NMI on Reuters-21578 to k-means' level (0.58-0.59 against 0.583 over 10 seeds,
 * where flocking alone gives 0.39-0.46); on well-separated corpora the first step moves nothing. */
#define DM_FLOCK_CLUSTER_OPTIONS_INIT {5, DM_FLOCK_SMALL_CENTROID, -2.0, 0.5, 30}

/* "noise", "neighbour" or "centroid" (NULL for another value); dm_flock_small_parse the reverse
 * ("attach" is accepted for "neighbour", its former name). */
const char *dm_flock_small_name(int attach);
int dm_flock_small_parse(const char *name, int *attach);
/* A one-line description of the cluster extraction with these options for the report, e.g.
 * "connected components of (within r, cosine >= 0.1); components below 5 documents: noise". */
void dm_flock_cluster_describe(char *buf, size_t size, const dm_flock_cluster_options *opt, double model_threshold);

/* The edges of the final graph: pairs (own boid, neighbour) within r with cosine >= threshold
 * (the model's T unless the cluster options say otherwise). Both backends implement it; halo[k]
 * tells whether the neighbour index is into the halo store. */
typedef struct dm_flock_edges {
    size_t n, cap;
    uint32_t *own;   /* index of the own boid */
    uint32_t *nbr;   /* index of the neighbour (own or halo store) */
    uint8_t *halo;   /* 1: nbr indexes the halo store */
} dm_flock_edges;
typedef int dm_flock_edges_fn(dm_flock_edges *out, dm_flock_sim *s, double threshold);
dm_flock_edges_fn dm_flock_edges_cpu, dm_flock_edges_cuda;
void dm_flock_edges_free(dm_flock_edges *e);

/* Labels every own boid with its cluster: connected components of the graph merged across
 * slices, components below min_size small (noise or attached), clusters numbered 0..K-1 by their
 * smallest document index (a refinement then keeps their order) - so labels do not depend on the
 * number of ranks. Collective.
 * *n_clusters gets K on every rank. The labels stay in the simulation (dm_flock_sim_labels). */
int dm_flock_sim_cluster(dm_flock_sim *s, const dm_flock_cluster_options *opt, int32_t *n_clusters);
/* Cluster label per own boid, in the order of dm_flock_sim_view (NULL before clustering). */
const int32_t *dm_flock_sim_labels(const dm_flock_sim *s);
/* The centroid steps of the last dm_flock_sim_cluster were skipped: the number of clusters (more
 * than DM_FLOCK_CENTROID_MAX), else 0 (done, or not asked for). Every rank. */
int32_t dm_flock_sim_centroid_skipped(const dm_flock_sim *s);
/* The refinement steps the last dm_flock_sim_cluster took (0: not asked for, or skipped) and the
 * documents they moved, summed over the steps. Every rank. */
int dm_flock_sim_refined(const dm_flock_sim *s, uint64_t *moved);

/* The final state gathered by global document index. */
typedef struct dm_flock_result {
    uint64_t n;          /* documents (every rank) */
    int32_t n_clusters;  /* every rank */
    /* rank 0 only (NULL elsewhere): */
    double *x, *y;
    int32_t *cluster;    /* -1: noise; all -1 before clustering */
    /* every rank: the clusters of its input rows v->row_base .. + n_rows (for top terms) */
    int32_t *row_cluster;
    uint64_t row_base, n_rows;
} dm_flock_result;

/* Collective: gathers positions and clusters to rank 0 and scatters clusters back to the input
 * rows of each rank (v must be the vectors the simulation was created from). */
int dm_flock_gather(dm_flock_result *out, dm_flock_sim *s, const dm_vectors *v);
void dm_flock_result_free(dm_flock_result *r);

/* ---- outputs (flock_output.c; rank 0 writes unless noted) --------------------------------- */

/* Top terms of every cluster by summed weight, from the input rows' vectors and row_cluster
 * (dm_flock_top_terms_rows). Collective: the result is on rank 0. *out (rank 0) has n_clusters * k term ids (UINT32_MAX
 * where a cluster has fewer terms) and weights. */
int dm_flock_top_terms(uint32_t **terms, double **weights, const dm_flock_result *r, const dm_vectors *v,
                       int k, const dm_ctx *ctx);

/* A vocabulary: term names by id, from "id<TAB>term<TAB>df" lines (dm_flock_vocab_read: ids
 * below n_terms, the vectors' terms; another is a DM_ERR_FORMAT naming the file and line). */
typedef struct dm_flock_vocab {
    uint64_t n;
    char **term;   /* n entries, NULL where an id is not listed */
    char *blob;
} dm_flock_vocab;
int dm_flock_vocab_read(dm_flock_vocab *out, const char *path, uint64_t n_terms);
/* The same from n terms in memory: term i is bytes[off[i] .. off[i+1]) (a vocabulary's terms). */
int dm_flock_vocab_from_terms(dm_flock_vocab *out, const char *bytes, const uint64_t *off, uint64_t n);
void dm_flock_vocab_free(dm_flock_vocab *v);

/* Renders points coloured by an integer label (< 0: grey) into an RGB PNG of at most
 * max_side pixels on the longer side, written atomically. */
int dm_flock_png_write(const char *path, const double *x, const double *y, const int32_t *color, size_t n,
                       double W, double H, int max_side);

/* ---- outputs from each rank's rows (flock_rows.c) ----------------------------------------- */
/* The collective writers below work on the rows v of every rank (shares tile 0..N-1 in rank
 * order), so that each rank's work is proportional to its share: rank 0 only writes the bytes the
 * others formatted, in rank order. Their files do not depend on the number of ranks (the PNG is
 * dm_flock_png_write's on all documents). Errors agree on every rank. */

/* The final state at this rank's input rows: x, y and cluster of documents row_base .. + n_rows,
 * fetched from the slices' owners (one all-to-all). with_clusters = 0: cluster -1 (snapshots). */
typedef struct dm_flock_rows {
    uint64_t row_base, n_rows;
    double *x, *y;
    int32_t *cluster;
    int32_t n_clusters; /* every rank */
} dm_flock_rows;
int dm_flock_rows_fetch(dm_flock_rows *out, dm_flock_sim *s, const dm_vectors *v, int with_clusters);
void dm_flock_rows_free(dm_flock_rows *r);

/* Top terms as dm_flock_top_terms from this rank's rows and their clusters (0..nc-1, < 0 noise):
 * weights are summed exactly (fixed point, 2^-40 units), so terms and weights do not depend on
 * the number of ranks; sums travel to the rank owning the cluster (cluster % P), which keeps the
 * top k. Result on rank 0. */
int dm_flock_top_terms_rows(uint32_t **terms, double **weights, const int32_t *row_cluster, int32_t nc,
                            const dm_vectors *v, int k, const dm_ctx *ctx);
/* True classes of this rank's rows (cls: n_rows), numbered over all ranks as dm_metrics_classes
 * numbers all documents; *n_classes on every rank. */
int dm_flock_classes_rows(int32_t *cls, int32_t *n_classes, const dm_vectors *v, const dm_ctx *ctx);
/* Quality metrics (rank 0) from the ranks' contingency tables: the doubles of dm_metrics_compute
 * over all documents. */
int dm_flock_quality_rows(dm_metrics *out, const int32_t *truth, const int32_t *pred, size_t n, const dm_ctx *ctx);
/* Writes buf of every rank into one file in rank order, atomically (a temporary next to path,
 * renamed once every rank succeeded; never a half-written file under path). Every rank writes its
 * own bytes at its offset (the lengths of the ranks before it) with MPI-IO collective writes;
 * when MPI_File_open fails on some rank (e.g. a directory not shared by the nodes: logged once
 * per file as a warning) or DOCMINE_ORDERED_WRITE=gather is set (on rank 0), rank 0 receives the
 * bytes and writes them alone. One rank: a plain atomic write. buf NULL: this rank failed before;
 * the call then fails on every rank and leaves no file. Errors name the file and are agreed over
 * the ranks. Collective over ctx->world. */
int dm_flock_write_ordered(const char *path, const char *buf, size_t len, const dm_ctx *ctx);
int dm_flock_write_assignments_rows(const char *path, const dm_vectors *v, const int32_t *cluster, const dm_ctx *ctx);
int dm_flock_write_positions_rows(const char *path, const dm_vectors *v, const double *x, const double *y,
                                  const int32_t *cluster, const dm_ctx *ctx);
/* clusters.tsv; *noise (rank 0): the noise documents over all ranks. terms/tw: rank 0's. */
int dm_flock_write_clusters_rows(const char *path, uint64_t *noise, const int32_t *cluster, uint64_t n_rows,
                                 int32_t n_clusters, const uint32_t *terms, const double *tw, int top_k,
                                 const dm_flock_vocab *voc, const dm_ctx *ctx);
/* The PNG of the points of every rank (point i of this rank is document id0 + i): each rank
 * draws its points into bands of pixel keys that a max-reduction merges on rank 0. */
int dm_flock_png_write_rows(const char *path, const double *x, const double *y, const int32_t *color, uint64_t id0,
                            size_t n, double W, double H, int max_side, const dm_ctx *ctx);

/* ---- a whole run with its outputs (flock_job.c): `docmine flock` and `docmine pipeline` ---- */

struct json_t;

/* clusters.tsv (atomic), written by rank 0 in dm_flock_write_clusters_rows: "cluster size
 * top_terms weights", one line per cluster 0..n_clusters-1 with its size and top_k terms (names
 * from voc when it has them, else term ids; voc may be NULL; tabs and newlines become spaces),
 * then the line "-1 <noise documents>". size[n_clusters] is the number of noise documents. */
int dm_flock_clusters_tsv(const char *path, const uint64_t *size, int32_t n_clusters, const uint32_t *terms,
                          const double *weights, int top_k, const dm_flock_vocab *voc);
/* The report's "quality" object: dm_metrics_json (nmi, ari, purity, labelled_documents, classes, clusters). */
struct json_t *dm_flock_quality_json(const dm_metrics *m);

typedef struct dm_flock_job_options {
    const char *out_dir;        /* existing directory for the outputs */
    int top_k;                  /* terms per cluster in clusters.tsv */
    int png_size;               /* longer side of the PNGs */
    int snapshot_every;         /* > 0: also out_dir/snapshots/flock-<iteration>.png (the folder
                                   must exist) every K iterations */
    int calibrate;              /* measure every rank's speed and size the slices by it */
    const dm_flock_vocab *vocab;/* term names for clusters.tsv (rank 0; NULL: term ids) */
} dm_flock_job_options;
#define DM_FLOCK_JOB_OPTIONS_INIT {NULL, 10, 1024, 0, 0, NULL}

typedef struct dm_flock_job_result {
    uint64_t docs;              /* every rank */
    int32_t clusters;           /* every rank */
    int32_t centroid_skipped;   /* every rank: the centroid steps were skipped (this many
                                   clusters), or 0 */
    int refine_steps;           /* every rank: refinement steps taken */
    uint64_t refine_moved;      /* every rank: documents they moved (summed over the steps) */
    int have_labels;            /* every rank */
    int migrate_every;          /* every rank: the migration interval used */
    int start_iteration;        /* every rank: the iteration the simulation started from (the
                                   checkpoint's with --resume, else 0) */
    uint64_t noise;             /* rank 0 */
    dm_metrics quality;   /* rank 0, when have_labels */
    double seconds;             /* wall time of the job on this rank */
} dm_flock_job_result;

/* Collective: runs the simulation on this rank's rows v (with fo's checkpoints and resume),
 * clusters, and writes assignments.tsv, clusters.tsv, positions.csv, flock.png and, with labels,
 * flock-labels.png into jo->out_dir (rank 0). An earlier run's files of these names that this run
 * does not write are removed before the run: flock-labels.png without labels, and
 * snapshots/flock-<iteration>.png beyond the iteration the run starts from (no other file). results (may be NULL): a JSON object that receives
 * the run's report section (documents, iterations, model, plane, similarity, clusters, noise,
 * quality, tuning, run_seconds, iterations_run, boid_iterations_per_second over the iterations
 * run, and resumed_from_iteration with --resume). Timers flock.setup, flock.run,
 * flock.output. Errors agree on every rank. */
int dm_flock_job_run(dm_flock_job_result *res, struct json_t *results, const dm_ctx *ctx, const dm_vectors *v,
                     const dm_flock_options *fo, const dm_flock_cluster_options *co, const dm_flock_job_options *jo);

#ifdef __cplusplus
}
#endif
#endif
