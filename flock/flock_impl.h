/* Internals of the flock module shared by the driver (flock.c), the backends (flock_cpu.c,
 * flock_cuda.cu), the exchange (flock_exchange.c) and the clusters (flock_clusters.c): the boid
 * store, the simulation state, slices, the grid window and the exchange message format.
 * Reference: DESIGN.md section 7. Plain C11 (the .cu file includes it inside extern "C"). */
#ifndef DM_FLOCK_IMPL_H
#define DM_FLOCK_IMPL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "flock/flock.h"
#include "flock/flock_model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Test hook: documents per work item of the clusters' centroid sums (0: the default, 16384), so
 * that tests with small clusters also cut them into several items. Not thread-safe. */
void dm_flock_set_centroid_item(size_t docs);
/* Tests: 1 makes the refinement's first step sum its centroids afresh instead of taking the sums
 * the attachment and the merge computed (the same bits either way); 0 restores the default. */
void dm_flock_set_refine_fresh(int fresh);
/* Tests and benchmarks: 0 makes the CUDA backend sum the clusters' centroids and attach documents
 * to them on the host (as the CPU backend) instead of on the device; 1, the default, restores the
 * device. */
void dm_flock_set_attach_device(int device);

/* Document id -> index, open addressing (linear probing), rebuilt in O(n) without sorting; the
 * memory is kept across rebuilds. A build of DM_FLOCK_IDMAP_PAR_MIN ids or more inserts them in
 * parallel (a slot is claimed with a compare-and-swap): the slots may then differ from one build
 * to the next, the map does not. */
typedef struct dm_flock_idmap {
    uint64_t *key; /* UINT64_MAX: empty */
    uint32_t *val;
    size_t cap, n; /* cap: a power of two >= 2 n, or 0 */
    int threads;   /* of a parallel build: at most this many, 0 = all of OpenMP's (dm_threads_upto) */
} dm_flock_idmap;
#define DM_FLOCK_IDMAP_PAR_MIN 8192
/* Maps ids[i] -> i (i < n; ids distinct). */
int dm_flock_idmap_build(dm_flock_idmap *m, const uint64_t *ids, size_t n);
/* The index of id, or UINT32_MAX when absent. */
uint32_t dm_flock_idmap_get(const dm_flock_idmap *m, uint64_t id);
/* Adds ids[0..n) (absent from the map and distinct) with the indices m->n, m->n + 1, ... (the
 * map's indices must be 0 .. m->n - 1, as build and add give them); the table is rebuilt larger,
 * every index kept, when it would be more than half full. */
int dm_flock_idmap_add(dm_flock_idmap *m, const uint64_t *ids, size_t n);
/* Empties the map without allocating (a map that never held ids has no table yet): it cannot fail,
 * so the unwinding after an error cannot record another one over it. */
void dm_flock_idmap_clear(dm_flock_idmap *m);
void dm_flock_idmap_free(dm_flock_idmap *m);

/* A growable scratch buffer kept across iterations: the exchange messages and per-boid scratch
 * arrays are reused instead of allocated every step (fresh memory costs a page fault per 4 KiB on
 * first touch, which dominated the exchange). Contents are not kept when it grows. */
typedef struct dm_flock_buf {
    char *p;
    size_t cap;
} dm_flock_buf;
/* Room for at least n bytes (grown by a quarter more than asked); NULL when out of memory. */
void *dm_flock_buf_reserve(dm_flock_buf *b, size_t n);
void dm_flock_buf_free(dm_flock_buf *b);

/* Boids on the host, structure of arrays, with their unit vectors in a pool: boid i's vector is
 * col/val[voff[i] .. voff[i] + vlen[i]). Removing boids leaves holes in the pool, which is
 * compacted when more than half of it is garbage. */
typedef struct dm_flock_store {
    size_t n, cap;
    uint64_t *id;
    double *x, *y, *vx, *vy;
    uint64_t *voff;
    uint32_t *vlen;
    uint32_t *col;
    float *val;
    size_t pool, pool_cap; /* pool entries used (holes included) / allocated */
    size_t live;           /* entries referenced by boids */
    uint64_t compactions;  /* times the pool was compacted (boids' offsets changed) */
    uint32_t garbage_ratio; /* compact when pool > ratio * live (+ 4096); 0 = 2 */
    int copy_threads;       /* threads of the parallel copies into and out of the store (messages,
                             * vector caches): at most this many, 0 = all of OpenMP's */
    dm_flock_idmap index;   /* id -> boid, kept by dm_flock_halo_unpack for the halo store only */
    int indexed;            /* index matches the boids */
    dm_flock_buf scratch;   /* dm_flock_halo_unpack's per-boid scratch, kept across iterations */
} dm_flock_store;

void dm_flock_store_init(dm_flock_store *s);
void dm_flock_store_free(dm_flock_store *s);
void dm_flock_store_clear(dm_flock_store *s);
int dm_flock_store_reserve(dm_flock_store *s, size_t n, size_t pool);
/* Appends one boid (vector copied). */
int dm_flock_store_push(dm_flock_store *s, uint64_t id, double x, double y, double vx, double vy,
                        const uint32_t *col, const float *val, uint32_t len);
/* Appends n boids id[k] (positions and velocities 0) with copies of the vectors src->col/val[voff[k]
 * .. voff[k] + vlen[k]) (copied in parallel): entries of a vector cache. */
int dm_flock_store_append_vectors(dm_flock_store *s, const dm_flock_store *src, const uint64_t *id,
                                  const uint64_t *voff, const uint32_t *vlen, size_t n);
/* Appends rows [0, n_rows) of v as boids id0 + i with state (x, y, vx, vy)[i], each vector made
 * unit length as dm_flock_store_push(..., val[q] / sqrt(sum of its squares)) would store it
 * (copied in parallel): the tuning workloads' documents. */
int dm_flock_store_append_unit_rows(dm_flock_store *s, const dm_vectors *v, uint64_t id0, const double *x,
                                    const double *y, const double *vx, const double *vy);
/* Whether removing boids with nnz vector entries in all would compact the pool (see
 * dm_flock_store_remove). */
int dm_flock_store_removal_compacts(const dm_flock_store *s, size_t nnz);
/* Removes the boids with keep[i] == 0 by moving the last kept boids into their places, so that
 * the work is proportional to the boids removed (the order of the others changes, which no result
 * depends on). moved_dst/moved_src (optional, capacity n each) receive the moves: the boid that
 * was at moved_src[k] is now at moved_dst[k] (every moved_src >= the new n > moved_dst);
 * *n_moved their count. Compacts the vector pool when more than half of it is garbage
 * (compactions++: boids' offsets change). */
int dm_flock_store_remove(dm_flock_store *s, const uint8_t *keep, uint32_t *moved_dst, uint32_t *moved_src,
                          size_t *n_moved);
/* The same with the removed boids listed (rm[0..m), ascending): the same moves, in time
 * proportional to m (plus the pool's compaction when due). */
int dm_flock_store_remove_list(dm_flock_store *s, const uint32_t *rm, size_t m, uint32_t *moved_dst,
                               uint32_t *moved_src, size_t *n_moved);

/* The exchange message (one per destination rank and kind), 8-byte aligned sections:
 *   u64 n, u64 nnz, u64 flags | u64 id[n] | f64 x[n], y[n], vx[n], vy[n] | u64 off[n+1] |
 *   u8 has[n] (padded to 8 bytes) | u32 col[nnz] (padded to 8 bytes) | f32 val[nnz] (padded)
 * off[] are offsets of each boid's vector within col/val (off[0] = 0, off[n] = nnz). has[k] = 0:
 * the vector of boid k is not in the message (empty range in off[]) because the receiver holds
 * it from the previous halo exchange (halo messages only; see dm_flock_halo_unpack). */
#define DM_FLOCK_MSG_HEADER 24
typedef struct dm_flock_msg_layout {
    size_t id, x, y, vx, vy, off, has, col, val, total;
} dm_flock_msg_layout;
void dm_flock_msg_layout_of(dm_flock_msg_layout *l, uint64_t n, uint64_t nnz);
/* Packs the listed boids of a store (host) into buf (size from the layout, whose nnz counts the
 * vectors sent). with_vec (optional, per listed boid): 0 = leave the vector out (has[k] = 0).
 * state (optional): the listed boids' x, y, vx, vy at state[4k .. 4k + 3] (NULL: the store's). */
void dm_flock_msg_pack(char *buf, const dm_flock_store *s, const uint32_t *idx, size_t count,
                       const uint8_t *with_vec, const double *state);
/* Appends the boids of a message to a store. DM_ERR_FORMAT when the message is malformed or
 * leaves a vector out. */
int dm_flock_msg_unpack(dm_flock_store *s, const char *buf, size_t size);
/* The same where vectors may be left out (has[k] = 0, migration messages): they are copied from
 * the boid of the same document in cache (the halo store, which holds every boid the sender put
 * into this iteration's halo message). The pool gets the same entries in the same order as from
 * full messages. DM_ERR_FORMAT when a left-out vector is not in the cache. */
int dm_flock_msg_unpack_cached(dm_flock_store *s, const char *buf, size_t size, dm_flock_store *cache);
/* Rebuilds the halo store from this iteration's halo messages (n_msgs <= 2, in neighbour order;
 * NULL or empty ones skipped): boids in message order; a boid whose vector was left out takes the
 * vector of the same document from the previous halo (the store's own contents), which stays in
 * place in the pool; new vectors are appended. The pool is compacted when more than half of it is
 * garbage (compactions++). DM_ERR_FORMAT when a left-out vector is not in the previous halo (the
 * store is then cleared). Document vectors never change, so the result equals unpacking full
 * messages, up to the pool offsets. */
int dm_flock_halo_unpack(dm_flock_store *s, char *const *bufs, const uint64_t *sizes, int n_msgs);

/* Neighbour slices of this rank: the distinct ranks among rank-1 and rank+1 (mod P), without
 * this rank. dir_mask[k]: bit 0 = the neighbour is below (rank - 1), bit 1 = above (rank + 1). */
typedef struct dm_flock_nbrs {
    int n;
    int rank[2];
    int dir_mask[2];
} dm_flock_nbrs;

/* A non-blocking exchange with the neighbour slices: begin() sends this rank's sizes and
 * messages (one per neighbour, any size) and posts the size receives without waiting; a
 * neighbour's data receive is posted as soon as its size is known (progress() or end()), so that
 * begin() never waits for a neighbour and work can run while the messages fly; progress() (any
 * number of times, e.g. while the device works) lets MPI move the messages; end() waits and hands
 * back the received messages, which live in the caller's buffers (recv_bufs given to begin(), one per
neighbour, grown as needed and reused across exchanges). A rank that failed before the exchange sends an error flag instead
 * of data, so that no neighbour waits forever. */
typedef struct dm_flock_xchg {
    MPI_Comm comm;
    int tag;
    dm_flock_nbrs nb;
    uint64_t send_size[2], recv_size[2];
    const char *send_buf[2];
    dm_flock_buf *recv_buf; /* the caller's, one per neighbour */
    MPI_Request hs_recv[2], hs_send[2]; /* the sizes */
    MPI_Request data_send[2], data_recv[2];
    int size_known[2], posted[2];
    int recv_err[2]; /* a data receive that could not be posted: its status (end() reports it) */
    int active;
} dm_flock_xchg;

int dm_flock_xchg_begin(dm_flock_xchg *x, MPI_Comm comm, const dm_flock_nbrs *nb, int tag,
                        const char *const *send, const uint64_t *send_size, dm_flock_buf *recv_bufs,
                        int local_status);
/* Lets the exchange advance (tests its requests, posts data receives whose size arrived).
 * Never blocks; a no-op on NULL or an ended exchange. */
void dm_flock_xchg_progress(dm_flock_xchg *x);
/* Waits for the exchange; recv[k] (in recv_bufs[k], NULL when empty) and recv_size[k] per neighbour.
 * A neighbour's error flag gives DM_ERR_MPI ("a neighbour failed"). */
int dm_flock_xchg_end(dm_flock_xchg *x, char **recv, uint64_t *recv_size);

/* The uniform grid window of a rank: rows first_row .. first_row + nb - 1 (mod R) of the global
 * grid, covering its slice and the halo margin above and below (all rows when P == 1). */
typedef struct dm_flock_window {
    int first_row, nb;
} dm_flock_window;

struct dm_flock_sim {
    const dm_ctx *ctx;
    MPI_Comm comm;
    int rank, size;
    int backend;
    dm_flock_options opt;
    uint64_t n_global;
    double W0, H0;
    double *cut;        /* P + 1 fractions of the height: slice k = [cut[k] H, cut[k+1] H) */
    double margin;      /* halo margin: r + (K - 1) v_max, K = migrate_every, with slack */
    double reach;       /* how far beyond a slice edge the halo must be complete: the margin plus
                         * the (K - 1) v_max that the neighbour's own boids may lie outside its
                         * slice; every slice must be higher */
    int migrate_every;  /* K: the migration runs after every K-th iteration and the last */
    int iteration;
    dm_flock_store own;  /* this rank's boids (host copy; see host_valid) */
    dm_flock_store halo; /* the neighbours' boids near this slice, refreshed every iteration; its
                          * vectors stay cached (by document id) for the next exchange */
    /* per neighbour: the documents of the last halo message sent to it; the neighbour holds their
     * vectors, so the next message leaves them out (dm_flock_halo_unpack) */
    dm_flock_idmap halo_sent[2];
    /* ... of which the first halo_sent_base[k] indices are that message's; the documents added
     * after it (dm_flock_idmap_add) came from that neighbour in the migration since, and it kept
     * their vectors */
    size_t halo_sent_base[2];
    /* the vectors of the last migration's departures, which their receivers will leave out of
     * the next halo they send here: garbage in the own pool (no compaction since, own.compactions
     * == dep_compactions) until the next halo exchange copies them into the halo store
     * (dm_flock_halo_exchange_begin_sel), the cache its unpack looks in */
    dm_flock_buf dep_id, dep_voff, dep_vlen;
    size_t dep_n;
    uint64_t dep_compactions;
    dm_flock_nbrs nb;
    /* reused across iterations: messages [0 halo, 1 migration][neighbour] and scratch */
    dm_flock_buf xsend[2][2], xrecv[2][2];
    dm_flock_buf sel_idx, sel_dirs, pack_idx, pack_with, pack_state;
    int host_valid;     /* CUDA: 0 when the device holds newer state than own */
    int halo_valid;     /* halo matches the current own positions (clusters) */
    void *dev;          /* CUDA backend state */
    /* CPU backend: the pair cache (flock_cpu.c), a row per own boid (cpu_rows_cap of them
     * allocated, NULL until the first step); cpu_cache 0: off (DOCMINE_FLOCK_CPU_CACHE=0, every
     * pair computed) */
    uint64_t *cpu_rows;
    size_t cpu_rows_cap;
    int cpu_cache;
    dm_flock_stats stats;
    int32_t *labels;    /* clusters per own boid (after dm_flock_sim_cluster) */
    int32_t centroid_skipped; /* the last dm_flock_sim_cluster: its centroid steps were skipped with this
                                 many clusters (more than DM_FLOCK_CENTROID_MAX), or 0 */
    int refine_steps;         /* the last dm_flock_sim_cluster: refinement steps taken (every rank) */
    uint64_t refine_moved;    /* and the documents they moved, summed over the steps and ranks */
    /* dm_flock_sim_run agrees on each step's status without a barrier: the agreement is posted
     * when the step ends and completed during the next step, before its first exchange
     * (dm_flock_agree_finish); the CUDA step completes it after it has queued the own-own pass, so
     * that the wait for the slowest rank overlaps the device's work */
    int agree_lag, agree_pending, agree_failed;
    int agree_send[2], agree_recv[2]; /* dm_agree_pack's pairs */
    MPI_Request agree_req;
    /* DOCMINE_FLOCK_TRACE=PREFIX: this rank's step events (iteration, event, time, a value: see
     * trace_write), written to PREFIX.RANK.tsv by dm_flock_sim_free (a diagnostic of the waits
     * between ranks and of slow steps) */
    double *trace;
    size_t trace_n, trace_cap;
    char *trace_path;
    /* DOCMINE_FLOCK_HALO_FIRST=1 (CUDA, several ranks): the halo is fetched, packed and posted
     * before the own-own detection is queued (dm_flock_step_cuda), for comparisons */
    int halo_first;
    int weighted;   /* the slices are cut by the options' slice weights (else equal) */
    uint64_t input_fingerprint; /* of the input (dm_flock_input_fingerprint), when checkpoints are
                                 * written or read; else 0 */
    /* tests: the step of iteration fail_at (1-based; 0: never) fails on this rank, at its start
     * (it still enters its exchanges, as after a failed device call) or, with fail_late, after
     * its exchanges (the neighbours learn nothing from them) */
    int fail_at, fail_late;
};

/* The status a step starts from: DM_OK, or the failure injected by fail_at without fail_late. */
int dm_flock_step_injected(const dm_flock_sim *s);

/* Completes the pending status agreement of the last step (a no-op when none is pending): the
 * worst status of all ranks, DM_OK when every rank succeeded. Every rank reaches it at the same
 * point of a step, before the step's first exchange. */
int dm_flock_agree_finish(dm_flock_sim *s);

/* Step events of the trace (dm_flock_trace; no-op unless DOCMINE_FLOCK_TRACE is set). */
enum {
    DM_FT_BEGIN,     /* step entered */
    DM_FT_OWN_QUEUED, /* own-own pass queued on the device (CUDA) */
    DM_FT_AGREED,    /* the last step's status agreement completed */
    DM_FT_HALO_SEL,  /* halo boids selected and fetched */
    DM_FT_HALO_RECV, /* halo exchange completed and unpacked */
    DM_FT_HALO_UP,   /* halo queued for the device */
    DM_FT_DEV_DONE,  /* the device finished the step's passes and the update */
    DM_FT_MIG_SEL,   /* departures selected */
    DM_FT_MIG_DONE,  /* migration exchange completed */
    DM_FT_END,       /* step left */
    DM_FT_HALO_SENT, /* halo packed and its exchange posted (CUDA) */
    DM_FT_N
};
void dm_flock_trace(dm_flock_sim *s, int event);

/* Plane side at iteration t (host, the only place it is computed). */
void dm_flock_plane_at(const dm_flock_sim *s, int t, double *W, double *H);
/* The parameters of iteration t (grid over the plane of iteration t). DM_ERR_INVALID_ARG when
 * the plane is too small for the grid or the slices. */
int dm_flock_params_at(dm_flock_params *p, const dm_flock_sim *s, int t);
/* Bounds of slice k on a plane of height H. */
void dm_flock_slice_bounds(const dm_flock_sim *s, int k, double H, double *lo, double *hi);
/* The slice owning coordinate y in [0, H). */
int dm_flock_slice_of(const dm_flock_sim *s, double y, double H);
/* The grid window of this rank for the parameters p. */
void dm_flock_window_of(dm_flock_window *w, const dm_flock_sim *s, const dm_flock_params *p);
/* The row of y within the window, or -1 when outside. */
static inline int dm_flock_window_row(const dm_flock_window *w, int R, int row)
{
    int lr = row - w->first_row;
    if (lr < 0) lr += R;
    if (lr >= R) lr -= R;
    return lr < w->nb ? lr : -1;
}
/* Direction bits (1: within the margin of the lower edge, 2: of the upper edge) of a boid at y
 * in this rank's slice on a plane of height H. */
int dm_flock_halo_dirs(const dm_flock_sim *s, double y, double H);
/* Whether the step now running (iteration -> iteration + 1) ends with the migration: after every
 * migrate_every-th iteration and after the last. The same on every rank. */
int dm_flock_migrates(const dm_flock_sim *s);

/* A selection of own boids: idx[j] (ascending) with direction bits dirs[j] (1: the lower
 * neighbour, 2: the upper one, 3: the only neighbour) and, when the store's are not current (the
 * CUDA backend's selection), their x, y, vx, vy at state[4j .. 4j + 3]. */
typedef struct dm_flock_sel {
    const uint32_t *idx;
    const uint8_t *dirs;
    size_t n;
    const double *state; /* NULL: the own store's */
} dm_flock_sel;

/* Host exchange helpers used by both backends' steps (flock_exchange.c): builds the halo
 * messages of own boids at the current plane; the migration messages of boids now outside
 * the slice on plane H1 (they are removed from own). */
int dm_flock_halo_exchange_begin(dm_flock_sim *s, dm_flock_xchg *x, int local_status);
/* The same with the halo boids given (NULL: found on the host; the positions of the selected
 * boids must be current in sel->state or else in the own store). */
int dm_flock_halo_exchange_begin_sel(dm_flock_sim *s, dm_flock_xchg *x, int local_status, const dm_flock_sel *sel);
int dm_flock_halo_exchange_end(dm_flock_sim *s, dm_flock_xchg *x);
/* What a migration did to the own store (for the CUDA backend's mirror): boids [0, n_kept) stayed
 * (n_moved of them moved into holes, see dm_flock_store_remove), [n_kept, n) arrived. */
typedef struct dm_flock_migration {
    size_t n_kept, n_moved;
    uint32_t *moved_dst, *moved_src; /* dm_malloc'ed (may be NULL when n_moved == 0) */
} dm_flock_migration;
void dm_flock_migration_free(dm_flock_migration *m);
/* info may be NULL. */
int dm_flock_migrate_host(dm_flock_sim *s, double H1, int local_status, dm_flock_migration *info);
/* The same with the departures given (dirs: the direction bits of the new slice; NULL: found on
 * the host); the positions of departing boids must be current (in sel->state or else in the own
 * store). */
int dm_flock_migrate_host_sel(dm_flock_sim *s, double H1, int local_status, dm_flock_migration *info,
                              const dm_flock_sel *sel);

/* Host grid (CPU backend and clusters): source boids sorted by cell of the window. */
typedef struct dm_flock_grid {
    dm_flock_window w;
    int C;
    uint32_t *start; /* C * w.nb + 1 cell starts into order */
    uint32_t *order; /* source indices sorted by cell */
    size_t n;
} dm_flock_grid;
int dm_flock_grid_build(dm_flock_grid *g, const dm_flock_sim *s, const dm_flock_params *p,
                        const dm_flock_window *w, const double *x, const double *y, size_t n);
void dm_flock_grid_free(dm_flock_grid *g);

/* Sort pairs by key (stable): sorting.h when linked, else a local radix sort (flock_sort.c). */
int dm_flock_sort_pairs_u32_cpu(uint32_t *keys_out, uint32_t *vals_out, const uint32_t *keys_in,
                                const uint32_t *vals_in, size_t n, int end_bit);


/* PNG internals (flock_output.c): the colour of a label (< 0: grey) and an RGB image (w x h,
 * rows top down) written atomically as a PNG. */
void dm_flock_label_rgb(int32_t label, unsigned char rgb[3]);
int dm_flock_png_emit_file(const char *path, const unsigned char *img, int w, int h);

/* Checkpoint internals (flock_checkpoint.c): reads the records of global documents
 * [first, first + n) into x, y, vx, vy and the iteration into *iteration, after checking the
 * file's CRC (the reader of document 0) and that it was written for the same input (count and
 * fingerprint), seed and model options. */
int dm_flock_checkpoint_read_rows(const dm_flock_sim *s, const char *path, uint64_t first, uint64_t n, double *x,
                                  double *y, double *vx, double *vy, int *iteration);
/* The fingerprint of an input that a checkpoint records: the sum modulo 2^64 of a 64-bit hash of
 * every document (its global index, id and vector's terms and weight bits), so the same for any
 * cut of the documents into ranks. rows: this rank's share of the sum (threads; one pass over the
 * vectors: 0.24 s on one core for 10^6 synthetic documents of 200 words, where one CPU iteration of
 * them took 27 s); input: all ranks' (collective over comm). */
uint64_t dm_flock_rows_fingerprint(const dm_vectors *v);
/* DM_ERR_INVALID_ARG when the checkpoint file to write is a directory, a device/FIFO/socket, or an
 * existing non-empty file that is not a flock checkpoint (never overwritten); DM_ERR_IO when its
 * folder is missing, not a folder or not writable. Said when the run starts (rank 0), not at the
 * first checkpoint. */
int dm_flock_checkpoint_target(const char *path);
/* Gathers every rank's n records of width doubles into rank 0's all (room for n_global records),
 * in rank order, counted in records (counts of doubles overflow MPI's int past 2^31 / width
 * documents; n_global <= 2^31 - 1 is the caller's check). Checks conservation (the records of all
 * ranks are n_global). Collective; the status is agreed. */
int dm_flock_gather_records(const dm_flock_sim *s, const double *rec, size_t n, int width, double *all);
int dm_flock_input_fingerprint(uint64_t *out, const dm_vectors *v, MPI_Comm comm);

/* A centroid sum (flock_clusters.c): the sum over a cluster's documents of their unit vectors'
 * components at a term, each rounded to a multiple of 2^-32 (llrint(value * ONE)). */
#define DM_FLOCK_CENTROID_ONE 4294967296.0 /* 2^32 */
typedef struct dm_flock_centroid_entry {
    uint64_t key; /* term << 32 | cluster */
    int64_t sum;  /* fixed point, 2^-32 */
} dm_flock_centroid_entry;
/* CUDA backend: this rank's centroid sums of the own boids with cl[i] >= 0 (clusters < k, terms
 * < nterms), one entry per (term, cluster) that a document has, sorted by key, in *loc (dm_free;
 * *m entries): the entries of the CPU's (flock_clusters.c, centroid_local), from a dense table
 * summed on the device (flock.centroid_sums) when it fits (k x nterms x 9 bytes <= 256 MiB:
 * dm_flock_centroid_sums_cuda_fits; else the caller sums on the host). Local. */
int dm_flock_centroid_sums_cuda_fits(int32_t k, uint64_t nterms);
int dm_flock_centroid_sums_cuda(dm_flock_sim *s, const int32_t *cl, int32_t k, uint64_t nterms,
                                dm_flock_centroid_entry **loc, size_t *m);

/* The clusters' centroids for the attachment of documents to them (flock_clusters.c): the sums
 * of the clustered documents' unit vectors, reduced over the ranks (the same on every rank), by
 * term: term t's entries are [tstart[t], tstart[t + 1]), their clusters ascending. */
typedef struct dm_flock_centroids {
    int32_t k;              /* clusters 0 .. k - 1 */
    uint64_t nterms;        /* terms 0 .. nterms - 1 (no cluster has a larger one) */
    const size_t *tstart;   /* nterms + 1 */
    const int32_t *cluster; /* per entry */
    const double *value;    /* per entry: the sum at (term, cluster) */
    const double *norm;     /* per cluster: the centroid's L2 norm (0: empty) */
} dm_flock_centroids;
/* Own boids with cl[i] < 0 get in res[i] the cluster whose centroid is the most cosine-similar
 * (the dot product summed over the document's terms in its order, divided by the centroid's
 * norm; ties to the lower cluster) when that cosine is positive, else cl[i]; the others get
 * cl[i]. Local. Both backends give the same bits; the CUDA backend takes up to 256 clusters and
 * a dense table of at most 256 MiB (dm_flock_attach_cuda_fits; else the caller takes the CPU's). */
typedef int dm_flock_attach_fn(dm_flock_sim *s, int32_t *res, const int32_t *cl, const dm_flock_centroids *c);
dm_flock_attach_fn dm_flock_attach_cpu, dm_flock_attach_cuda;
int dm_flock_attach_cuda_fits(const dm_flock_centroids *c);

#if DM_FLOCK_CUDA
/* CUDA backend state (flock_cuda.cu). */
int dm_flock_cuda_init(dm_flock_sim *s);
void dm_flock_cuda_free(dm_flock_sim *s);
/* Copies the device state to the host store (own), when stale. */
int dm_flock_cuda_sync_host(dm_flock_sim *s);
/* Tests: launch instance `index` of kernel `kernel` ("flock.forces", ...) instead of the tuner's
 * choice (-1: back to the tuner). */
int dm_flock_cuda_force_instance(const char *kernel, int index);
/* Tests: the pair-cache rows the next step reads (one per own boid), decoded into *out (malloc'd,
 * *n entries): row doc's decision on its pair with other, and the iterations since the pair was
 * last a neighbour pair (0: the last step's). fill_mismatch counts the rows whose fill differs
 * from their entries (meaningful on one rank: a migration moves rows, not fills); limit: the most
 * entries a row takes. */
typedef struct dm_flock_cache_entry {
    uint64_t doc, other;
    int similar, age;
} dm_flock_cache_entry;
int dm_flock_cuda_cache_entries(dm_flock_sim *s, dm_flock_cache_entry **out, size_t *n, size_t *fill_mismatch,
                                int *limit);
#endif

#ifdef __cplusplus
}
#endif
#endif
