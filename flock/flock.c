/* The flock driver (backend-neutral): validates options, sizes the plane and the grid, cuts the
 * slices, places every document from the counter-based RNG keyed by (seed, document index) or
 * from a checkpoint, distributes the boids to their slice owners, runs the iterations through the
 * backend step, writes checkpoints, and gathers the final state. Reference: DESIGN.md section 7
 * ("Multi-species flocking"); the CPU backend (flock_cpu.c) is the oracle for the CUDA one. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cma.h"
#include "common/log.h"
#include "common/peerx.h"
#include "common/rng.h"
#include "common/status.h"
#include "common/timer.h"
#include "flock/flock_impl.h"
#include "flock/flock_synth.h"

/* Cells are a hair larger than r so that rounding in x / cw can never put two boids closer
 * than r in cells two apart. */
#define CELL_SLACK 1e-9
/* The grid cells a document may cost (see dm_flock_params_at): a plane of N pi / neighbours
 * cells, so --neighbours must be at least pi / 16. */
#define CELLS_PER_DOC 16
/* The halo margin: boids within this distance of a slice edge are sent to the neighbour. A
 * superset of "within r" is harmless (the receiver decides with the exact model arithmetic). */
#define MARGIN_SLACK 1e-3

void dm_flock_plane_at(const dm_flock_sim *s, int t, double *W, double *H)
{
    double f = 1.0 - s->opt.shrink * ((double)t / (double)s->opt.iterations);
    *W = s->W0 * f;
    *H = s->H0 * f;
}

void dm_flock_slice_bounds(const dm_flock_sim *s, int k, double H, double *lo, double *hi)
{
    *lo = k == 0 ? 0.0 : s->cut[k] * H;
    *hi = k == s->size - 1 ? H : s->cut[k + 1] * H;
}

int dm_flock_slice_of(const dm_flock_sim *s, double y, double H) { return dm_flock_slice_hd(s->cut, s->size, y, H); }

int dm_flock_halo_dirs(const dm_flock_sim *s, double y, double H)
{
    double lo, hi;
    dm_flock_slice_bounds(s, s->rank, H, &lo, &hi);
    return dm_flock_halo_dirs_hd(y, lo, hi, s->margin, H);
}

int dm_flock_migrates(const dm_flock_sim *s)
{
    int next = s->iteration + 1;
    return next % s->migrate_every == 0 || next >= s->opt.iterations;
}

int dm_flock_sim_migrate_every(const dm_flock_sim *s) { return s->migrate_every; }
int dm_flock_sim_weighted(const dm_flock_sim *s) { return s->weighted; }

/* The halo margin and reach of migration interval K (see dm_flock_sim). */
static void set_migrate_every(dm_flock_sim *s, int K)
{
    double drift = (double)(K - 1) * s->opt.v_max * (1.0 + MARGIN_SLACK);
    s->migrate_every = K;
    s->margin = s->opt.radius * (1.0 + MARGIN_SLACK) + drift;
    s->reach = s->margin + drift;
}

/* The lowest slice on a plane of height H. */
static double lowest_slice(const dm_flock_sim *s, double H)
{
    double m = H;
    for (int k = 0; k < s->size; k++) {
        double lo, hi;
        dm_flock_slice_bounds(s, k, H, &lo, &hi);
        if (hi - lo < m) m = hi - lo;
    }
    return m;
}

int dm_flock_params_at(dm_flock_params *p, const dm_flock_sim *s, int t)
{
    const dm_flock_options *o = &s->opt;
    memset(p, 0, sizeof *p);
    p->r = o->radius;
    p->r2 = o->radius * o->radius;
    p->dmin2 = (o->min_dist * o->radius) * (o->min_dist * o->radius);
    p->threshold = o->threshold;
    p->w_sep = o->w_separation;
    p->w_dis = o->w_dissimilar;
    p->w_ali = o->w_alignment;
    p->w_coh = o->w_cohesion;
    p->vmax = o->v_max;
    p->vmax2 = o->v_max * o->v_max;
    dm_flock_plane_at(s, t, &p->W, &p->H);
    int tn = t < o->iterations ? t + 1 : t;
    dm_flock_plane_at(s, tn, &p->W1, &p->H1);
    p->half_W = 0.5 * p->W;
    p->half_H = 0.5 * p->H;
    p->ratio_x = p->W1 / p->W;
    p->ratio_y = p->H1 / p->H;
    double cmin = o->radius * (1.0 + CELL_SLACK);
    double c = floor(p->W / cmin), r = floor(p->H / cmin);
    /* the plane's side is sqrt(N pi / neighbours) radii (less the shrink), whatever the radius:
     * the number of cells depends on the documents, --neighbours and --shrink only */
    if (c < 3 || r < 3)
        return DM_ERR(DM_ERR_INVALID_ARG,
                      "flock: the plane (%.4g x %.4g at iteration %d) is smaller than 3 x 3 cells of "
                      "radius %.4g: use more documents, a smaller --neighbours or less --shrink",
                      p->W, p->H, t, o->radius);
    /* both backends' grids hold a counter per cell of the plane, rebuilt every step: bounded by
     * the documents (about 0.2 cells a document at the default --neighbours), and by the 32-bit
     * cell keys */
    double most = fmin(CELLS_PER_DOC * (double)s->n_global + 4096.0, 4.0e9);
    if (c * r > most)
        return DM_ERR(DM_ERR_INVALID_ARG,
                      "flock: --neighbours %g makes a plane of %.3g grid cells for %llu documents (at most "
                      "%d a document): use --neighbours %.3g or more",
                      o->neighbours, c * r, (unsigned long long)s->n_global, CELLS_PER_DOC,
                      o->neighbours * (c * r) / most * 1.01);
    p->C = (int)c;
    p->R = (int)r;
    p->cw = p->W / c;
    p->ch = p->H / r;
    for (int k = 0; k < s->size && s->size > 1; k++) {
        double lo, hi;
        dm_flock_slice_bounds(s, k, p->H, &lo, &hi);
        if (hi - lo <= s->reach)
            return DM_ERR(DM_ERR_INVALID_ARG,
                          "flock: slice %d is %.4g high at iteration %d, not above the halo's reach %.4g "
                          "(--migrate-every %d): too many ranks (%d) for %llu documents, or use less "
                          "--shrink%s",
                          k, hi - lo, t, s->reach, s->migrate_every, s->size, (unsigned long long)s->n_global,
                          s->migrate_every > 1 ? " or a smaller --migrate-every" : "");
    }
    return DM_OK;
}

void dm_flock_window_of(dm_flock_window *w, const dm_flock_sim *s, const dm_flock_params *p)
{
    if (s->size == 1) {
        w->first_row = 0;
        w->nb = p->R;
        return;
    }
    double lo, hi;
    dm_flock_slice_bounds(s, s->rank, p->H, &lo, &hi);
    long lo_row = (long)floor((lo - s->margin) / p->ch), hi_row = (long)floor((hi + s->margin) / p->ch);
    long nb = hi_row - lo_row + 3; /* one spare row each side against rounding */
    if (nb >= p->R) {
        w->first_row = 0;
        w->nb = p->R;
        return;
    }
    long first = (lo_row - 1) % p->R;
    if (first < 0) first += p->R;
    w->first_row = (int)first;
    w->nb = (int)nb;
}

/* ---- options and set-up ------------------------------------------------------------------- */

static int validate(const dm_flock_options *o, int size)
{
    if (o->iterations < 1) return DM_ERR(DM_ERR_INVALID_ARG, "flock: --iterations must be >= 1");
    if (!(o->radius > 0) || !isfinite(o->radius)) return DM_ERR(DM_ERR_INVALID_ARG, "flock: --radius must be > 0");
    if (!(o->neighbours > 0)) return DM_ERR(DM_ERR_INVALID_ARG, "flock: --neighbours must be > 0");
    if (!(o->threshold >= -1.0 && o->threshold <= 1.0))
        return DM_ERR(DM_ERR_INVALID_ARG, "flock: --threshold must be in [-1, 1]");
    if (!(o->v_max > 0 && o->v_max < o->radius))
        return DM_ERR(DM_ERR_INVALID_ARG, "flock: --vmax must be in (0, radius)");
    if (!(o->shrink >= 0 && o->shrink < 1)) return DM_ERR(DM_ERR_INVALID_ARG, "flock: --shrink must be in [0, 1)");
    if (o->migrate_every < 0 || o->migrate_every > 1000)
        return DM_ERR(DM_ERR_INVALID_ARG, "flock: --migrate-every must be in [0, 1000] (0: automatic)");
    if (!(o->min_dist > 0 && o->min_dist <= 1)) return DM_ERR(DM_ERR_INVALID_ARG, "flock: min_dist must be in (0, 1]");
    const double w[4] = {o->w_separation, o->w_dissimilar, o->w_alignment, o->w_cohesion};
    for (int i = 0; i < 4; i++)
        if (!(w[i] >= 0 && w[i] <= DM_FLOCK_WEIGHT_MAX))
            return DM_ERR(DM_ERR_INVALID_ARG, "flock: --weights must be in [0, %g]", DM_FLOCK_WEIGHT_MAX);
    if ((o->checkpoint_every > 0 || o->resume) && (!o->checkpoint || !*o->checkpoint))
        return DM_ERR(DM_ERR_INVALID_ARG, "flock: checkpoints need a checkpoint file");
    if (o->checkpoint_every < 0) return DM_ERR(DM_ERR_INVALID_ARG, "flock: --checkpoint-every must be >= 0");
    if (o->slice_weights)
        for (int k = 0; k < size; k++)
            if (!(o->slice_weights[k] > 0) || !isfinite(o->slice_weights[k]))
                return DM_ERR(DM_ERR_INVALID_ARG, "flock: slice weights must be > 0");
    return DM_OK;
}

/* The neighbours' sums of the model are exact below 2^31 plane units (flock_model.h): those of
 * cohesion and alignment add an offset (< r) or a velocity (<= v_max < r) per neighbour, of which
 * a boid has at most n - 1, so n r must stay below DM_FLOCK_DOCS_RADIUS_MAX. */
static int check_scale(const dm_flock_options *o, uint64_t n)
{
    /* before the run, not at its first checkpoint: rank 0 gathers a checkpoint in int counts */
    if ((o->checkpoint_every > 0 || o->resume) && n > (uint64_t)INT32_MAX)
        return DM_ERR(DM_ERR_UNSUPPORTED, "flock: checkpoints of %llu documents are not supported (at most 2^31 - 1)",
                      (unsigned long long)n);
    if ((double)n * o->radius <= DM_FLOCK_DOCS_RADIUS_MAX) return DM_OK;
    return DM_ERR(DM_ERR_INVALID_ARG,
                  "flock: --radius %g is too large for %llu documents: documents x radius must be at most "
                  "2^30 (the force sums' fixed point); use --radius %.4g or less",
                  o->radius, (unsigned long long)n, DM_FLOCK_DOCS_RADIUS_MAX / (double)n);
}

/* Checks that the ranks' shares tile 0..N-1 in rank order; sets n_global. */
static int check_shares(dm_flock_sim *s, const dm_vectors *v)
{
    uint64_t mine[2] = {v->row_base, v->n_rows};
    uint64_t *all = dm_malloc(sizeof *all * 2 * (size_t)s->size);
    if (!all) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    if (MPI_Allgather(mine, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, s->comm) != MPI_SUCCESS) {
        dm_free(all);
        return DM_ERR(DM_ERR_MPI, "flock: MPI_Allgather failed");
    }
    uint64_t next = 0;
    int rc = DM_OK;
    for (int k = 0; k < s->size; k++) {
        if (all[2 * k] != next && rc == DM_OK)
            rc = DM_ERR(DM_ERR_INVALID_ARG, "flock: rank %d's documents start at %llu, expected %llu", k,
                        (unsigned long long)all[2 * k], (unsigned long long)next);
        next = all[2 * k] + all[2 * k + 1];
    }
    s->n_global = next;
    dm_free(all);
    if (rc == DM_OK && next == 0) rc = DM_ERR(DM_ERR_INVALID_ARG, "flock: no documents");
    if (rc == DM_OK && next > UINT32_MAX)
        rc = DM_ERR(DM_ERR_INVALID_ARG, "flock: more than 2^32 documents are not supported");
    return rc;
}

/* Unit-length copy of row r of v (float weights divided by the double norm); checks the row is
 * term-sorted and finite (col NULL: only checks). */
static int unit_row(const dm_vectors *v, uint64_t r, uint32_t *col, float *val, uint32_t *len)
{
    uint64_t a = v->row_off[r], b = v->row_off[r + 1];
    if (b < a || b - a > UINT32_MAX) return DM_ERR(DM_ERR_FORMAT, "flock: corrupt vector row %llu", (unsigned long long)r);
    double ss = 0;
    for (uint64_t k = a; k < b; k++) {
        if (k > a && v->col[k] <= v->col[k - 1])
            return DM_ERR(DM_ERR_FORMAT, "flock: vector row %llu is not term-sorted", (unsigned long long)(v->row_base + r));
        if (!isfinite(v->val[k])) return DM_ERR(DM_ERR_FORMAT, "flock: non-finite weight in row %llu", (unsigned long long)(v->row_base + r));
        ss += (double)v->val[k] * (double)v->val[k];
    }
    *len = (uint32_t)(b - a);
    if (!col) return DM_OK; /* checked only */
    double norm = sqrt(ss);
    for (uint64_t k = a; k < b; k++) {
        col[k - a] = v->col[k];
        val[k - a] = norm > 0 ? (float)((double)v->val[k] / norm) : 0.0f;
    }
    return DM_OK;
}

/* Initial state of document id: position uniform on the plane, velocity of uniform direction
 * and speed uniform in [0, v_max / 2). Streams (seed, id), counters 0..3. */
static void initial_state(const dm_flock_sim *s, uint64_t id, double W, double H, double *x, double *y,
                          double *vx, double *vy)
{
    uint64_t seed = s->opt.seed;
    *x = W * dm_rng_uniform(seed, id, 0);
    *y = H * dm_rng_uniform(seed, id, 1);
    double a = 6.283185307179586 * dm_rng_uniform(seed, id, 2);
    double sp = 0.5 * s->opt.v_max * dm_rng_uniform(seed, id, 3);
    *vx = sp * cos(a);
    *vy = sp * sin(a);
}

/* One message's sections, or where they are in the own store: the boids' ids, states and vector
 * lengths, then their vectors' entries. */
typedef struct dist_sec {
    uint64_t *id;
    double *x, *y, *vx, *vy;
    uint32_t *vlen, *col;
    float *val;
} dist_sec;

static size_t dist_pad8(size_t b) { return (b + 7) & ~(size_t)7; }

#define DIST_SECTIONS 8
/* Bytes per MPI message (counts are ints): 1 GiB, or DOCMINE_FLOCK_DIST_CHUNK (tests: small
 * chunks exercise the split, and the pieces of the reads out of node peers, on small problems). */
static size_t dist_chunk(void)
{
    const char *e = getenv("DOCMINE_FLOCK_DIST_CHUNK");
    unsigned long long c = e ? strtoull(e, NULL, 10) : 0;
    return c >= 8 && c <= ((size_t)1 << 30) ? (size_t)c : (size_t)1 << 30;
}

/* The sections of a message of n boids and nnz entries as (address, bytes). */
static void dist_sec_bytes(uint64_t n, uint64_t nnz, size_t b[DIST_SECTIONS])
{
    size_t bs[DIST_SECTIONS] = {8 * n, 8 * n, 8 * n, 8 * n, 8 * n, 4 * n, 4 * nnz, 4 * nnz};
    memcpy(b, bs, sizeof bs);
}

/* Where each section starts in a send buffer (8-byte aligned); returns the buffer's size. */
static size_t dist_sec_offsets(uint64_t n, uint64_t nnz, size_t off[DIST_SECTIONS])
{
    size_t b[DIST_SECTIONS], at = 0;
    dist_sec_bytes(n, nnz, b);
    for (int k = 0; k < DIST_SECTIONS; k++) {
        off[k] = at;
        at += dist_pad8(b[k]);
    }
    return at;
}

/* A send buffer with the sections of n boids and nnz entries. */
static int dist_sec_alloc(dist_sec *d, char **buf, uint64_t n, uint64_t nnz)
{
    size_t off[DIST_SECTIONS], sz = dist_sec_offsets(n, nnz, off);
    char *p = *buf = dm_malloc(sz ? sz : 8);
    if (!p) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory for a %zu-byte distribution message", sz);
    *d = (dist_sec){(uint64_t *)(p + off[0]), (double *)(p + off[1]), (double *)(p + off[2]), (double *)(p + off[3]),
                    (double *)(p + off[4]), (uint32_t *)(p + off[5]), (uint32_t *)(p + off[6]), (float *)(p + off[7])};
    return DM_OK;
}

static void dist_sec_list(const dist_sec *d, uint64_t n, uint64_t nnz, void *p[DIST_SECTIONS], size_t b[DIST_SECTIONS])
{
    void *ps[DIST_SECTIONS] = {d->id, d->x, d->y, d->vx, d->vy, d->vlen, d->col, d->val};
    memcpy(p, ps, sizeof ps);
    dist_sec_bytes(n, nnz, b);
}

static size_t dist_chunks(size_t bytes, size_t chunk) { return (bytes + chunk - 1) / chunk; }

/* The requests of the distribution's messages: per peer and section one or more pieces of at
 * most dist_chunk() bytes, posted in the same order on both sides (MPI keeps the order of
 * messages between two ranks with one tag). */
typedef struct dist_reqs {
    MPI_Request *req;
    MPI_Status *st; /* (MPI_STATUSES_IGNORE trips GCC's -Wstringop-overflow with MPICH) */
    int n;
    int err; /* the first failed MPI call's code, or MPI_SUCCESS */
} dist_reqs;

/* Room for the requests of the messages to and from every other rank (meta: the boids and
 * entries this rank sends to each, rmeta: those it receives from each). */
static int dist_reqs_alloc(dist_reqs *x, int rank, int P, const uint64_t *meta, const uint64_t *rmeta)
{
    size_t nreq = 0, chunk = dist_chunk();
    for (int q = 0; q < P; q++) {
        if (q == rank) continue;
        const uint64_t *m[2] = {meta, rmeta};
        for (int w = 0; w < 2; w++) {
            size_t bytes[DIST_SECTIONS];
            dist_sec_bytes(m[w][2 * q], m[w][2 * q + 1], bytes);
            for (int k = 0; k < DIST_SECTIONS; k++) nreq += dist_chunks(bytes[k], chunk);
        }
    }
    x->n = 0;
    x->err = MPI_SUCCESS;
    x->req = dm_malloc(sizeof *x->req * (nreq ? nreq : 1));
    x->st = dm_malloc(sizeof *x->st * (nreq ? nreq : 1));
    return x->req && x->st ? DM_OK : DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
}

/* Posts the pieces of one message (to or from rank q). */
static void dist_post(dist_reqs *x, MPI_Comm comm, int q, const dist_sec *d, uint64_t n, uint64_t nnz, int send)
{
    void *p[DIST_SECTIONS];
    size_t bytes[DIST_SECTIONS], chunk = dist_chunk();
    dist_sec_list(d, n, nnz, p, bytes);
    for (int k = 0; k < DIST_SECTIONS && x->err == MPI_SUCCESS; k++)
        for (size_t o = 0; o < bytes[k] && x->err == MPI_SUCCESS; o += chunk) {
            size_t c = bytes[k] - o < chunk ? bytes[k] - o : chunk;
            x->err = send ? MPI_Isend((char *)p[k] + o, (int)c, MPI_BYTE, q, 300, comm, &x->req[x->n++])
                          : MPI_Irecv((char *)p[k] + o, (int)c, MPI_BYTE, q, 300, comm, &x->req[x->n++]);
        }
}

/* Rows packed per work item of the distribution: 4096 (a few megabytes of entries), or
 * DOCMINE_FLOCK_DIST_ROWS (tests: a few rows, so that a destination takes several items). */
static size_t dist_rows(void)
{
    const char *e = getenv("DOCMINE_FLOCK_DIST_ROWS");
    unsigned long long r = e ? strtoull(e, NULL, 10) : 0;
    return r >= 1 && r <= ((size_t)1 << 20) ? (size_t)r : 4096;
}

/* The messages between ranks of one node go through their GPUs (DOCMINE_GPU_EXCHANGE=1, opt-in),
 * or are read by the receiver out of the sender's memory (common/cma.h, where available); the
 * others go through MPI. */
static int dist_node_path(const dm_peerx *px, const dm_cma *cm, int q)
{
    return dm_peerx_local(px, q) || dm_cma_local(cm, q);
}

/* Bytes per read out of a node peer's message: 4 MiB (the threads take them one at a time), or
 * dist_chunk() when smaller (tests). */
static size_t dist_cma_piece(void)
{
    size_t c = dist_chunk();
    return c < ((size_t)4 << 20) ? c : (size_t)4 << 20;
}

/* The boids for the ranks of this node are written straight into their stores (see
 * dist_push); DOCMINE_FLOCK_DIST_DIRECT=0 packs them into send buffers that the receivers read
 * (dist_cma_read), for comparisons. */
static int dist_direct_wanted(void)
{
    const char *e = getenv("DOCMINE_FLOCK_DIST_DIRECT");
    return !(e && strcmp(e, "0") == 0);
}

/* Vector entries per write of dist_push: 64 Ki (1 MiB of columns and values with their boids,
 * which stay in the writing core's cache), or dist_chunk() / 8 when smaller (tests). */
static size_t dist_push_entries(void)
{
    size_t c = dist_chunk() / 8;
    return c < ((size_t)1 << 16) ? (c ? c : 1) : (size_t)1 << 16;
}

/* A thread's buffer for dist_push, and the boids and bytes it wrote. */
typedef struct dist_stage {
    char *p;
    size_t cap;
    uint64_t rows, bytes;
} dist_stage;

/* Rows idx[lo .. hi) of v for node peer q, written straight into q's store: rows at..at + (hi -
 * lo) of q's section for this rank, their entries from z on (dst: the section's DIST_SECTIONS
 * addresses in q's memory). The rows are made unit-length into a cache-sized buffer (batches of
 * dist_push_entries() entries, at least one row), and each batch's eight pieces go out in one
 * system call: every row crosses the host's memory twice (read here, written into q's store),
 * where packing and reading it crossed it four times. A row at fault lowers *bad; a failed write
 * returns its error. */
static int dist_push(const dm_cma *cm, int q, const uint64_t *dst, const dm_vectors *v,
                     const uint32_t *idx, size_t lo, size_t hi, size_t at, uint64_t z, const double *x,
                     const double *y, const double *vx, const double *vy, dist_stage *st, long *bad)
{
    const size_t most = dist_push_entries();
    while (lo < hi) {
        size_t e = 0, t = lo; /* the batch: rows lo .. t, e entries */
        do {
            e += v->row_off[idx[t] + 1] - v->row_off[idx[t]];
            t++;
        } while (t < hi && e + (v->row_off[idx[t] + 1] - v->row_off[idx[t]]) <= most);
        const size_t n = t - lo;
        size_t bytes[DIST_SECTIONS], off[DIST_SECTIONS], need = dist_sec_offsets(n, e, off);
        dist_sec_bytes(n, e, bytes);
        if (need > st->cap) {
            char *g = realloc(st->p, need);
            if (!g) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory for a %zu-byte distribution buffer", need);
            st->p = g;
            st->cap = need;
        }
        char *b = st->p;
        dist_sec d = {(uint64_t *)(b + off[0]), (double *)(b + off[1]), (double *)(b + off[2]), (double *)(b + off[3]),
                      (double *)(b + off[4]), (uint32_t *)(b + off[5]), (uint32_t *)(b + off[6]), (float *)(b + off[7])};
        uint64_t k = 0;
        for (size_t j = 0; j < n; j++) {
            size_t r = idx[lo + j];
            uint32_t len = 0;
            if (unit_row(v, (uint64_t)r, d.col + k, d.val + k, &len) != DM_OK) {
#pragma omp critical(dm_flock_dist_bad)
                if ((long)r < *bad) *bad = (long)r;
                len = (uint32_t)(v->row_off[r + 1] - v->row_off[r]); /* (the run fails) */
            }
            d.id[j] = v->row_base + (uint64_t)r;
            d.x[j] = x[r];
            d.y[j] = y[r];
            d.vx[j] = vx[r];
            d.vy[j] = vy[r];
            d.vlen[j] = len;
            k += len;
        }
        const void *src[DIST_SECTIONS] = {d.id, d.x, d.y, d.vx, d.vy, d.vlen, d.col, d.val};
        const size_t elem[DIST_SECTIONS] = {8, 8, 8, 8, 8, 4, 4, 4};
        uint64_t to[DIST_SECTIONS];
        for (int m = 0; m < DIST_SECTIONS; m++) /* sections 0-5: one element a boid; 6, 7: an entry */
            to[m] = dst[m] + elem[m] * (m < 6 ? (uint64_t)at : z);
        int rc = dm_cma_writev(cm, q, src, to, bytes, DIST_SECTIONS);
        if (rc != DM_OK) return rc;
        st->rows += n;
        st->bytes += need;
        at += n;
        z += e;
        lo = t;
    }
    return DM_OK;
}

/* The messages packed for this node's other ranks (not written by dist_push), read by the threads
 * out of the senders' buffers straight into the own store. Collective: the senders' addresses go
 * through MPI once every rank has packed (a rank that failed sends 0s, and its receivers fail
 * too), with a flag for the messages already written into the own store; the senders keep their
 * buffers until dm_cma_close, after which every read is done. to, from: 2 x P (scratch). */
static int dist_cma_read(const dm_flock_sim *s, const dm_cma *cm, uint64_t *to, uint64_t *from, const uint64_t *rmeta,
                         const dist_sec *rsec, int rc)
{
    const int P = s->size;
    if (rc != DM_OK) memset(to, 0, sizeof *to * 2 * (size_t)P);
    if (MPI_Alltoall(to, 2, MPI_UINT64_T, from, 2, MPI_UINT64_T, s->comm) != MPI_SUCCESS && rc == DM_OK)
        rc = DM_ERR(DM_ERR_MPI, "flock: MPI_Alltoall failed (the distribution's addresses)");
    /* the pieces to read: where to, from where in which sender, how many bytes */
    typedef struct { char *dst; uint64_t src; size_t n; int q; } piece;
    piece *it = NULL;
    size_t items = 0;
    const size_t chunk = dist_cma_piece();
    for (int pass = 0; pass < 2 && rc == DM_OK; pass++) {
        size_t m = 0;
        for (int q = 0; q < P && rc == DM_OK; q++) {
            if (!dm_cma_local(cm, q) || rmeta[2 * q] == 0 || from[2 * q + 1]) continue; /* (written) */
            if (from[2 * q] == 0) {
                rc = DM_ERR(DM_ERR_MPI, "flock: rank %d failed before the distribution", q);
                dm_error_mark_remote();
                break;
            }
            void *dst[DIST_SECTIONS];
            size_t bytes[DIST_SECTIONS], off[DIST_SECTIONS];
            dist_sec_list(&rsec[q], rmeta[2 * q], rmeta[2 * q + 1], dst, bytes);
            dist_sec_offsets(rmeta[2 * q], rmeta[2 * q + 1], off);
            for (int k = 0; k < DIST_SECTIONS; k++)
                for (size_t o = 0; o < bytes[k]; o += chunk, m++)
                    if (it)
                        it[m] = (piece){(char *)dst[k] + o, from[2 * q] + off[k] + o,
                                        bytes[k] - o < chunk ? bytes[k] - o : chunk, q};
        }
        if (pass == 0 && rc == DM_OK) {
            items = m;
            it = dm_malloc(sizeof *it * (m ? m : 1));
            if (!it) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
        }
    }
    int err = DM_OK;
    char msg[512] = "";
    uint64_t moved = 0;
    if (rc == DM_OK) {
        const long nl = (long)items;
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : moved)
        for (long i = 0; i < nl; i++) {
            int e;
#pragma omp atomic read
            e = err;
            if (e != DM_OK) continue; /* the first failure stops the reads */
            e = dm_cma_read(cm, it[i].q, it[i].dst, it[i].src, it[i].n);
            if (e == DM_OK) {
                moved += it[i].n;
                continue;
            }
#pragma omp critical(dm_flock_dist_cma)
            if (err == DM_OK) {
                snprintf(msg, sizeof msg, "%s", dm_error_message()); /* recorded on that thread */
#pragma omp atomic write
                err = e;
            }
        }
    }
    if (rc == DM_OK && err != DM_OK) rc = DM_ERR(err, "flock: initial distribution: %s", msg);
    dm_counter_add("flock.distribute.cma_bytes", (int64_t)moved);
    dm_free(it);
    return rc;
}

/* Builds this rank's input boids and sends each to the owner of its slice (all-to-all). */
static int distribute(dm_flock_sim *s, const dm_vectors *v)
{
    int rc = DM_OK;
    int P = s->size;
    size_t n = (size_t)v->n_rows;
    double W, H;
    double *x = NULL, *y = NULL, *vx = NULL, *vy = NULL;
    x = dm_malloc(sizeof *x * (n ? n : 1));
    y = dm_malloc(sizeof *y * (n ? n : 1));
    vx = dm_malloc(sizeof *vx * (n ? n : 1));
    vy = dm_malloc(sizeof *vy * (n ? n : 1));
    if (!x || !y || !vx || !vy) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    int it = 0;
    if (rc == DM_OK && s->opt.resume) {
        rc = dm_flock_checkpoint_read_rows(s, s->opt.checkpoint, v->row_base, n, x, y, vx, vy, &it);
    }
    /* every rank must agree on the iteration (the checkpoint is one file) */
    rc = dm_ctx_agree(s->ctx, rc);
    if (rc != DM_OK) goto done;
    if (s->opt.resume) {
        int itmin = it, itmax = it;
        if (n == 0) itmin = INT32_MAX, itmax = -1;
        MPI_Allreduce(MPI_IN_PLACE, &itmin, 1, MPI_INT, MPI_MIN, s->comm);
        MPI_Allreduce(MPI_IN_PLACE, &itmax, 1, MPI_INT, MPI_MAX, s->comm);
        if (itmin != itmax) /* one path naming other checkpoints on other ranks (node-local copies) */
            rc = DM_ERR(DM_ERR_FORMAT, "%s: the checkpoint is at iteration %d on rank %d, at %d to %d over the "
                        "ranks: every rank must read the same checkpoint file", s->opt.checkpoint,
                        n ? it : itmin, s->ctx->rank, itmin, itmax);
        else if (itmin > s->opt.iterations)
            rc = DM_ERR(DM_ERR_INVALID_ARG, "flock: the checkpoint is at iteration %d, beyond --iterations %d", itmin,
                        s->opt.iterations);
        s->iteration = itmin;
        rc = dm_ctx_agree(s->ctx, rc);
        if (rc != DM_OK) goto done;
    }
    dm_flock_plane_at(s, s->iteration, &W, &H);
    if (!s->opt.resume) {
        const long nl = (long)n;
#pragma omp parallel for schedule(static)
        for (long r = 0; r < nl; r++) initial_state(s, v->row_base + (uint64_t)r, W, H, &x[r], &y[r], &vx[r], &vy[r]);
    }
    /* a checkpoint's state as the model keeps it: on the plane, and no faster than v_max (a
     * velocity of 1e200 squared to inf in the speed cap, whose factor 0 stopped the boid); the
     * margin covers the rounding of a capped velocity */
    for (size_t r = 0; r < n && rc == DM_OK; r++) {
        if (!(x[r] >= 0 && x[r] < W && y[r] >= 0 && y[r] < H))
            rc = DM_ERR(DM_ERR_FORMAT, "flock: checkpoint position of document %llu is off the plane",
                        (unsigned long long)(v->row_base + r));
        else if (!(isfinite(vx[r]) && isfinite(vy[r]) &&
                   vx[r] * vx[r] + vy[r] * vy[r] <= s->opt.v_max * s->opt.v_max * (1.0 + 1e-6)))
            rc = DM_ERR(DM_ERR_FORMAT, "flock: checkpoint velocity of document %llu (%g, %g) is above the "
                        "speed cap v_max %g", (unsigned long long)(v->row_base + r), vx[r], vy[r], s->opt.v_max);
    }
    /* all-to-all by owner slice: a row's unit-length copy is written straight into the own store
     * (own rows), into its owner's store (an owner on this node, through a cache-sized buffer:
     * dist_push) or into the send buffer of its owner, and the messages are received straight
     * into the own store's arrays (one message per section, the own rows first, then each
     * sender's in rank order); on one rank it is one copy */
    for (size_t r = 0; r < n && rc == DM_OK; r++)
        if (v->row_off[r + 1] < v->row_off[r] || v->row_off[r + 1] - v->row_off[r] > UINT32_MAX)
            rc = DM_ERR(DM_ERR_FORMAT, "flock: corrupt vector row %llu", (unsigned long long)r);
    rc = dm_ctx_agree(s->ctx, rc);
    if (rc != DM_OK) goto done;
    {
        uint32_t *idx = dm_malloc(sizeof *idx * (n ? n : 1));
        int *owner = dm_malloc(sizeof *owner * (n ? n : 1));
        uint64_t *zoff = dm_malloc(sizeof *zoff * (n ? n : 1)); /* row idx[t]'s entries in its section */
        size_t *first = dm_calloc((size_t)P + 1, sizeof *first);
        uint64_t *meta = dm_calloc(2 * (size_t)P, sizeof *meta), *rmeta = dm_calloc(2 * (size_t)P, sizeof *rmeta);
        dist_sec *sec = dm_calloc((size_t)P, sizeof *sec);
        char **sbuf = dm_calloc((size_t)P, sizeof *sbuf);
        if (!idx || !owner || !zoff || !first || !meta || !rmeta || !sec || !sbuf)
            rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
        /* boids by owner (counting sort: the rows of each owner in row order) */
        dm_timer_start("flock.setup.distribute.layout");
        if (rc == DM_OK) {
            for (size_t r = 0; r < n; r++) {
                owner[r] = dm_flock_slice_of(s, y[r], H);
                first[owner[r] + 1]++;
            }
            for (int q = 0; q < P; q++) {
                first[q + 1] += first[q];
                meta[2 * q] = first[q + 1] - first[q];
            }
            /* meta[2q + 1] counts owner q's entries so far: each row's place in its section */
            size_t *at = dm_malloc(sizeof *at * (size_t)P);
            if (!at) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
            for (int q = 0; at && q < P; q++) at[q] = first[q];
            for (size_t r = 0; at && r < n; r++) {
                size_t t = at[owner[r]]++;
                idx[t] = (uint32_t)r;
                zoff[t] = meta[2 * owner[r] + 1];
                meta[2 * owner[r] + 1] += v->row_off[r + 1] - v->row_off[r];
            }
            dm_free(at);
        }
        dm_timer_stop("flock.setup.distribute.layout");
        rc = dm_ctx_agree(s->ctx, rc);
        /* the messages between ranks of one node may go through their GPUs (common/peerx.h, opt-in:
         * DOCMINE_GPU_EXCHANGE=1; the master thread opens the exchange while the others pack) or be
         * read by their receivers (common/cma.h, dist_cma_read), the others go through MPI; by
         * default the rows for a node peer are not packed at all but written straight into its
         * store (direct[q], dist_push) */
        dm_peerx *px = NULL;
        dm_cma *cm = NULL;
        if (rc == DM_OK && P > 1 && !dm_peerx_asked()) rc = dm_cma_open(&cm, s->ctx);
        char *direct = dm_calloc((size_t)P, 1);
        if (rc == DM_OK && !direct) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
        for (int q = 0; q < P && rc == DM_OK; q++) direct[q] = dm_cma_local(cm, q) && dist_direct_wanted();
        rc = dm_ctx_agree(s->ctx, rc);
        /* boids and non-zeros of every message: the own store is reserved once, the senders'
         * boids following this rank's own in rank order */
        if (rc == DM_OK && MPI_Alltoall(meta, 2, MPI_UINT64_T, rmeta, 2, MPI_UINT64_T, s->comm) != MPI_SUCCESS)
            rc = DM_ERR(DM_ERR_MPI, "flock: MPI_Alltoall failed");
        size_t own_n = 0, own_nnz = 0;
        for (int q = 0; q < P && rc == DM_OK; q++) {
            own_n += (size_t)rmeta[2 * q];
            own_nnz += (size_t)rmeta[2 * q + 1];
        }
        dm_timer_start("flock.setup.distribute.reserve");
        if (rc == DM_OK) rc = dm_flock_store_reserve(&s->own, own_n, own_nnz); /* empty: a new simulation */
        if (rc == DM_OK) {
            sec[s->rank] = (dist_sec){s->own.id, s->own.x, s->own.y, s->own.vx, s->own.vy, s->own.vlen,
                                      s->own.col, s->own.val};
            for (int q = 0; q < P && rc == DM_OK; q++)
                if (q != s->rank && !direct[q]) rc = dist_sec_alloc(&sec[q], &sbuf[q], meta[2 * q], meta[2 * q + 1]);
        }
        dist_reqs xr = {NULL, NULL, 0, MPI_SUCCESS};
        if (rc == DM_OK && P > 1) rc = dist_reqs_alloc(&xr, s->rank, P, meta, rmeta);
        /* per destination (in the order of the packing: the next ranks, then this one): items
         * packed, items before it, its sends posted */
        long *done = dm_calloc((size_t)P, sizeof *done), *need = dm_calloc((size_t)P + 1, sizeof *need);
        char *posted = dm_calloc((size_t)P, 1);
        if (rc == DM_OK && (!done || !need || !posted)) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
        dm_timer_stop("flock.setup.distribute.reserve");
        /* every rank exchanges or none does: from here on each rank posts all its messages */
        rc = dm_ctx_agree(s->ctx, rc);
        int orc = DM_OK;
        dist_sec *rsec = dm_calloc((size_t)P, sizeof *rsec);
        /* send and receive buffers' sizes; the addresses for the node's readers, sent and received;
         * the own store's sections for each node peer's boids, and each peer's for this rank's */
        uint64_t *sb = dm_calloc((6 + 2 * DIST_SECTIONS) * (size_t)P, sizeof *sb), *rb = sb ? sb + P : NULL;
        uint64_t *caddr = sb ? sb + 2 * P : NULL, *cfrom = sb ? sb + 4 * P : NULL;
        uint64_t *mine = sb ? sb + 6 * P : NULL, *theirs = sb ? mine + DIST_SECTIONS * P : NULL;
        if (rc == DM_OK && (!rsec || !sb)) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
        rc = dm_ctx_agree(s->ctx, rc);
        const int ready = rc == DM_OK; /* the same on every rank */
        /* where each sender's boids and entries go: after this rank's own, in rank order */
        if (rc == DM_OK) {
            size_t b = (size_t)rmeta[2 * s->rank], z = (size_t)rmeta[2 * s->rank + 1], off[DIST_SECTIONS];
            for (int q = 0; q < P; q++) {
                sb[q] = direct[q] ? 0 : dist_sec_offsets(meta[2 * q], meta[2 * q + 1], off);
                rb[q] = dist_sec_offsets(rmeta[2 * q], rmeta[2 * q + 1], off);
                if (q == s->rank) continue;
                rsec[q] = (dist_sec){s->own.id + b, s->own.x + b, s->own.y + b, s->own.vx + b, s->own.vy + b,
                                     s->own.vlen + b, s->own.col + z, s->own.val + z};
                b += (size_t)rmeta[2 * q];
                z += (size_t)rmeta[2 * q + 1];
            }
        }
        /* where the node peers write their boids into the own store (every rank or none: cm) */
        if (cm && ready) {
            for (int q = 0; q < P; q++) {
                void *p[DIST_SECTIONS];
                size_t bytes[DIST_SECTIONS];
                dist_sec_list(&rsec[q], 0, 0, p, bytes);
                for (int k = 0; k < DIST_SECTIONS; k++) mine[DIST_SECTIONS * q + k] = (uint64_t)(uintptr_t)p[k];
            }
            if (MPI_Alltoall(mine, DIST_SECTIONS, MPI_UINT64_T, theirs, DIST_SECTIONS, MPI_UINT64_T, s->comm) !=
                MPI_SUCCESS)
                rc = DM_ERR(DM_ERR_MPI, "flock: MPI_Alltoall failed (the stores' addresses)");
        }
        /* the unit-length copies, in items of dist_rows() rows taken in destination order (the next
         * ranks first, this rank's own rows last) by the threads; the master thread posts a
         * destination's sends as soon as its rows are packed and drives MPI's progress meanwhile,
         * so that the messages travel while the other threads pack */
        dm_timer_start("flock.setup.distribute.pack");
        long bad = (long)n;
        int perr = DM_OK; /* the first failed write into a node peer's store, its message */
        uint64_t pushed_rows = 0, pushed_bytes = 0;
        char pmsg[512] = "";
        const size_t item_rows = dist_rows();
        if (rc == DM_OK) {
            for (int k = 0; k < P; k++) {
                int q = (s->rank + 1 + k) % P;
                size_t rows = first[q + 1] - first[q];
                need[k + 1] = need[k] + (long)((rows + item_rows - 1) / item_rows);
            }
            long items = need[P], next = 0;
            int unposted = P - 1;
#pragma omp parallel
            {
                const int master = omp_get_thread_num() == 0;
                int packer = !master || omp_get_num_threads() == 1;
                if (master) {
                    /* the exchange through the GPUs (collective; 0.11 s to open with 2 ranks on a
                     * 4-H200 host, 0.38-0.46 s with 4: bench/RESULTS.md, session 17), then the MPI
                     * receives of the other peers, straight into the own store */
                    if (P > 1) {
                        dm_timer_start("flock.setup.distribute.gpu.open");
                        orc = dm_peerx_open(&px, s->ctx, sb, rb);
                        dm_timer_stop("flock.setup.distribute.gpu.open");
                    }
                    int mpi_peers = 0;
                    for (int q = 0; q < P; q++) {
                        if (q == s->rank || dist_node_path(px, cm, q)) continue;
                        mpi_peers++;
                        if (orc == DM_OK) dist_post(&xr, s->comm, q, &rsec[q], rmeta[2 * q], rmeta[2 * q + 1], 0);
                    }
                    if (orc != DM_OK) { /* agreed: no rank sends anything */
                        for (int j = 0; j < P; j++) posted[j] = 1;
                        unposted = 0;
                    }
                    /* with other threads to pack, the master only drives MPI: progress calls
                     * between items of its own overlapped nothing (4 H200s: the wait after the
                     * packing stayed 0.53 s; bench/RESULTS.md, session 13) */
                    if (mpi_peers == 0) packer = 1;
                }
                int k = 0; /* destination of this thread's last item (items are taken in order) */
                dist_stage stage = {NULL, 0, 0, 0};
                for (;;) {
                    long c = items;
                    if (packer) {
#pragma omp atomic capture
                        c = next++;
                    }
                    if (c < items) {
                        while (c >= need[k + 1]) k++;
                        int q = (s->rank + 1 + k) % P;
                        const dist_sec *d = &sec[q];
                        size_t lo = first[q] + (size_t)(c - need[k]) * item_rows, hi = lo + item_rows;
                        if (hi > first[q + 1]) hi = first[q + 1];
                        int pe;
#pragma omp atomic read
                        pe = perr;
                        if (direct[q] && pe == DM_OK) {
                            pe = dist_push(cm, q, theirs + DIST_SECTIONS * q, v, idx, lo, hi, lo - first[q], zoff[lo],
                                           x, y, vx, vy, &stage, &bad);
                            if (pe != DM_OK) {
#pragma omp critical(dm_flock_dist_bad)
                                if (perr == DM_OK) {
                                    snprintf(pmsg, sizeof pmsg, "%s", dm_error_message()); /* this thread's */
#pragma omp atomic write
                                    perr = pe;
                                }
                            }
                        }
                        for (size_t t = lo; t < hi && !direct[q]; t++) {
                            size_t r = idx[t], at = t - first[q];
                            uint32_t len = 0;
                            if (unit_row(v, (uint64_t)r, d->col + zoff[t], d->val + zoff[t], &len) != DM_OK) {
#pragma omp critical(dm_flock_dist_bad)
                                if ((long)r < bad) bad = (long)r;
                            }
                            d->id[at] = v->row_base + (uint64_t)r;
                            d->x[at] = x[r];
                            d->y[at] = y[r];
                            d->vx[at] = vx[r];
                            d->vy[at] = vy[r];
                            d->vlen[at] = len;
                        }
#pragma omp atomic update seq_cst
                        done[k]++;
                    }
                    if (!master) {
                        if (c >= items) break;
                        continue;
                    }
                    /* the master: the sends of every destination whose rows are all packed (the
                     * seq_cst counters make the other threads' rows visible), then progress */
                    for (int j = 0; j < P - 1; j++) {
                        long dj;
#pragma omp atomic read seq_cst
                        dj = done[j];
                        if (posted[j] || dj != need[j + 1] - need[j]) continue;
                        int q = (s->rank + 1 + j) % P;
                        if (!dist_node_path(px, cm, q))
                            dist_post(&xr, s->comm, q, &sec[q], meta[2 * q], meta[2 * q + 1], 1);
                        posted[j] = 1;
                        unposted--;
                    }
                    if (xr.n && xr.err == MPI_SUCCESS) {
                        int flag = 0;
                        xr.err = MPI_Testall(xr.n, xr.req, &flag, xr.st);
                    }
                    long own_done;
#pragma omp atomic read seq_cst
                    own_done = done[P - 1];
                    /* a packing master stops when it finds no item left (the others finish theirs);
                     * a driving one when the own rows are packed too (the messages' progress
                     * then continues in MPI_Waitall) */
                    if (c >= items && unposted == 0 && (packer || own_done == need[P] - need[P - 1])) break;
                }
                free(stage.p);
#pragma omp atomic update
                pushed_rows += stage.rows;
#pragma omp atomic update
                pushed_bytes += stage.bytes;
            }
        }
        if (pushed_rows) {
            dm_counter_add("flock.distribute.direct_rows", (int64_t)pushed_rows);
            dm_counter_add("flock.distribute.direct_bytes", (int64_t)pushed_bytes);
        }
        if (rc == DM_OK && perr != DM_OK) rc = DM_ERR(perr, "flock: initial distribution: %s", pmsg);
        dm_free(done);
        dm_free(need);
        dm_free(posted);
        dm_timer_stop("flock.setup.distribute.pack");
        if (rc == DM_OK) rc = orc;
        dm_timer_start("flock.setup.distribute.exchange");
        if (xr.n && xr.err == MPI_SUCCESS) xr.err = MPI_Waitall(xr.n, xr.req, xr.st);
        if (rc == DM_OK && xr.err != MPI_SUCCESS) rc = DM_ERR(DM_ERR_MPI, "flock: initial distribution failed");
        dm_free(xr.req);
        dm_free(xr.st);
        dm_timer_stop("flock.setup.distribute.exchange");
        if (cm && ready) { /* the node's messages: read out of the senders' buffers */
            dm_timer_start("flock.setup.distribute.cma");
            for (int q = 0; q < P; q++) { /* a packed message, or a flag: written into q's store */
                caddr[2 * q] = dm_cma_local(cm, q) && !direct[q] ? (uint64_t)(uintptr_t)sbuf[q] : 0;
                caddr[2 * q + 1] = dm_cma_local(cm, q) && direct[q];
            }
            rc = dist_cma_read(s, cm, caddr, cfrom, rmeta, rsec, rc);
            dm_cma_close(cm); /* collective: every reader is done */
            dm_timer_stop("flock.setup.distribute.cma");
        } else {
            dm_cma_close(cm); /* (NULL: nothing) */
        }
        if (px) { /* the node's messages: staged whole, copied over, unstaged by section */
            dm_timer_start("flock.setup.distribute.gpu");
            int grc = DM_OK;
            dm_timer_start("flock.setup.distribute.gpu.put");
            for (int q = 0; q < P && grc == DM_OK; q++)
                if (dm_peerx_local(px, q)) grc = dm_peerx_put(px, q, 0, sbuf[q], sb[q]);
            dm_timer_stop("flock.setup.distribute.gpu.put");
            dm_timer_start("flock.setup.distribute.gpu.copy");
            int erc = dm_peerx_exchange(px); /* collective */
            dm_timer_stop("flock.setup.distribute.gpu.copy");
            if (grc == DM_OK) grc = erc;
            uint64_t moved = 0;
            dm_timer_start("flock.setup.distribute.gpu.get");
            for (int q = 0; q < P && grc == DM_OK; q++) {
                if (!dm_peerx_local(px, q)) continue;
                void *dst[DIST_SECTIONS];
                size_t bytes[DIST_SECTIONS], off[DIST_SECTIONS];
                dist_sec_offsets(rmeta[2 * q], rmeta[2 * q + 1], off);
                moved += rb[q];
                dist_sec_list(&rsec[q], rmeta[2 * q], rmeta[2 * q + 1], dst, bytes);
                for (int k = 0; k < DIST_SECTIONS && grc == DM_OK; k++)
                    grc = dm_peerx_get(px, q, off[k], dst[k], bytes[k]);
            }
            dm_timer_stop("flock.setup.distribute.gpu.get");
            dm_peerx_close(px); /* collective */
            dm_counter_add("flock.distribute.gpu_bytes", (int64_t)moved);
            if (rc == DM_OK) rc = grc;
            dm_timer_stop("flock.setup.distribute.gpu");
        }
        if (rc == DM_OK && bad < (long)n) {
            uint32_t len = 0;
            rc = unit_row(v, (uint64_t)bad, NULL, NULL, &len); /* records the message */
            if (rc == DM_OK) rc = DM_ERR(DM_ERR_FORMAT, "flock: vector row %ld", bad);
        }
        rc = dm_ctx_agree(s->ctx, rc);
        /* offsets in store order, each sender's lengths checked against its count of entries */
        if (rc == DM_OK) {
            uint64_t at = 0;
            size_t i = 0;
            for (int k = 0; k < P && rc == DM_OK; k++) {
                int q = k == 0 ? s->rank : (k <= s->rank ? k - 1 : k); /* own rows, then senders */
                uint64_t start = at;
                for (uint64_t j = 0; j < rmeta[2 * q]; j++, i++) {
                    s->own.voff[i] = at;
                    at += s->own.vlen[i];
                }
                if (at - start != rmeta[2 * q + 1])
                    rc = DM_ERR(DM_ERR_FORMAT, "flock: rank %d sent %llu vector entries, announced %llu", q,
                                (unsigned long long)(at - start), (unsigned long long)rmeta[2 * q + 1]);
            }
            if (rc == DM_OK) {
                s->own.n = own_n;
                s->own.pool = s->own.live = own_nnz;
                s->own.indexed = 0;
            }
        }
        dm_timer_start("flock.setup.distribute.free");
        for (int q = 0; q < P && sbuf; q++) dm_free(sbuf[q]);
        dm_free(sbuf);
        dm_free(direct);
        dm_free(sec);
        dm_free(rsec);
        dm_free(sb);
        dm_free(first);
        dm_free(meta);
        dm_free(rmeta);
        dm_free(idx);
        dm_free(owner);
        dm_free(zoff);
        dm_timer_stop("flock.setup.distribute.free");
    }
    rc = dm_ctx_agree(s->ctx, rc);
done:
    dm_free(x);
    dm_free(y);
    dm_free(vx);
    dm_free(vy);
    return rc;
}

/* The slices' cuts: heights proportional to w (NULL: equal); the migration interval 1 until
 * plan_slices chooses. */
static void cut_slices(dm_flock_sim *s, const double *w)
{
    double tot = 0, acc = 0;
    for (int k = 0; k < s->size; k++) tot += w ? w[k] : 1.0;
    s->cut[0] = 0.0;
    for (int k = 0; k < s->size; k++) {
        acc += w ? w[k] : 1.0;
        s->cut[k + 1] = k == s->size - 1 ? 1.0 : acc / tot;
    }
    s->weighted = w != NULL;
    set_migrate_every(s, 1);
}

/* The migration interval (as asked, or the largest that the lowest slice of the smallest plane,
 * the last iteration's, allows, up to DM_FLOCK_MIGRATE_AUTO_MAX), then the check that every
 * iteration's grid and slices fit (the plane is largest at the first iteration and smallest at
 * the last). */
static int plan_slices(dm_flock_sim *s)
{
    const dm_flock_options *opt = &s->opt;
    if (s->size > 1 && opt->migrate_every > 0) {
        set_migrate_every(s, opt->migrate_every);
    } else if (s->size > 1) {
        double W, H;
        dm_flock_plane_at(s, opt->iterations, &W, &H);
        double low = lowest_slice(s, H);
        for (int K = DM_FLOCK_MIGRATE_AUTO_MAX; K >= 1; K--) {
            set_migrate_every(s, K);
            if (low > s->reach) break;
        }
    }
    /* the largest plane (the most grid cells) first, then the smallest (the fewest, the lowest
     * slices) */
    dm_flock_params p;
    DM_TRY(dm_flock_params_at(&p, s, 0));
    return dm_flock_params_at(&p, s, opt->iterations);
}

int dm_flock_sim_init(dm_flock_sim **out, const dm_ctx *ctx, const dm_vectors *v, const dm_flock_options *opt)
{
    *out = NULL;
    int rc = validate(opt, ctx->size);
    rc = dm_ctx_agree(ctx, rc);
    if (rc != DM_OK) return rc;
    dm_flock_sim *s = dm_calloc(1, sizeof *s);
    if (!s) return dm_ctx_agree(ctx, DM_ERR(DM_ERR_NOMEM, "flock: out of memory"));
    s->ctx = ctx;
    s->comm = ctx->world;
    s->rank = ctx->rank;
    s->size = ctx->size;
    s->backend = ctx->backend;
    s->opt = *opt;
    s->opt.slice_weights = NULL; /* not owned; the cut below keeps what is needed */
    s->opt.checkpoint = NULL;
    s->host_valid = 1;
    dm_flock_store_init(&s->own);
    dm_flock_store_init(&s->halo);
    /* the halo turns over every iteration: more garbage before each compaction (which moves every
     * live vector and makes a device mirror copy the pool again) */
    s->halo.garbage_ratio = 4;
    /* on the CUDA backend the per-step host copies of the halo and the migration run while the
     * GPUs' copies run: as few threads as the other staged copies (common/alloc.h; on a 4-GPU host
     * flock.run at 4 GPUs took 0.5 s less with 8 of 16 threads a rank, bench/RESULTS.md session 27) */
    if (s->backend == DM_BACKEND_CUDA) s->own.copy_threads = s->halo.copy_threads = dm_stage_threads();
    s->agree_req = MPI_REQUEST_NULL;
    const char *cc = getenv("DOCMINE_FLOCK_CPU_CACHE");
    s->cpu_cache = !(cc && strcmp(cc, "0") == 0);
    const char *hf = getenv("DOCMINE_FLOCK_HALO_FIRST");
    s->halo_first = hf && strcmp(hf, "1") == 0;
    const char *tp = getenv("DOCMINE_FLOCK_TRACE");
    if (tp && *tp) {
        size_t len = strlen(tp) + 32;
        s->trace_path = dm_malloc(len);
        if (!s->trace_path) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
        else snprintf(s->trace_path, len, "%s.%d.tsv", tp, s->rank);
    }
    if (opt->checkpoint && !(s->opt.checkpoint = dm_strdup(opt->checkpoint))) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    s->cut = dm_malloc(sizeof *s->cut * (size_t)(s->size + 1));
    if (!s->cut) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    if (rc == DM_OK) {
        cut_slices(s, opt->slice_weights);
        /* neighbour slices */
        if (s->size == 2) {
            s->nb.n = 1;
            s->nb.rank[0] = 1 - s->rank;
            s->nb.dir_mask[0] = 3;
        } else if (s->size > 2) {
            s->nb.n = 2;
            s->nb.rank[0] = (s->rank - 1 + s->size) % s->size;
            s->nb.dir_mask[0] = 1;
            s->nb.rank[1] = (s->rank + 1) % s->size;
            s->nb.dir_mask[1] = 2;
        }
    }
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) rc = check_shares(s, v);
    if (rc == DM_OK) rc = check_scale(opt, s->n_global);
    if (rc == DM_OK && opt->checkpoint_every > 0 && s->rank == 0) rc = dm_flock_checkpoint_target(opt->checkpoint);
    rc = dm_ctx_agree(ctx, rc);
    /* a checkpoint records the input it was written for, which a resume must match */
    if (rc == DM_OK && (opt->checkpoint_every > 0 || opt->resume)) {
        dm_timer_start("flock.setup.fingerprint");
        rc = dm_flock_input_fingerprint(&s->input_fingerprint, v, s->comm);
        dm_timer_stop("flock.setup.fingerprint");
    }
    if (rc == DM_OK) {
        double area = (double)s->n_global * 3.141592653589793 * opt->radius * opt->radius / opt->neighbours;
        s->W0 = s->H0 = sqrt(area);
        rc = plan_slices(s);
        /* measured speeds are advice: slices too low for the halo fall back to equal ones */
        if (rc == DM_ERR_INVALID_ARG && s->weighted && opt->slice_weights_measured) {
            if (s->rank == 0)
                dm_log_info("%s; equal slices instead of the measured speeds", dm_error_message());
            dm_error_clear();
            cut_slices(s, NULL);
            rc = plan_slices(s);
        }
    }
    rc = dm_ctx_agree(ctx, rc);
    dm_timer_start("flock.setup.distribute");
    if (rc == DM_OK) rc = distribute(s, v);
    dm_timer_stop("flock.setup.distribute");
#if DM_FLOCK_CUDA
    dm_timer_start("flock.setup.device");
    if (rc == DM_OK && s->backend == DM_BACKEND_CUDA) rc = dm_ctx_agree(ctx, dm_flock_cuda_init(s));
    dm_timer_stop("flock.setup.device");
#else
    if (rc == DM_OK && s->backend == DM_BACKEND_CUDA)
        rc = dm_ctx_agree(ctx, DM_ERR(DM_ERR_UNSUPPORTED, "flock: built without the CUDA backend"));
#endif
    if (rc != DM_OK) {
        dm_flock_sim_free(s);
        return rc;
    }
    *out = s;
    return DM_OK;
}

static const char *const g_trace_names[DM_FT_N] = {"begin",    "own_queued", "agreed",   "halo_selected",
                                                   "halo_received", "halo_queued", "device_done", "departures_selected",
                                                   "migrated", "end", "halo_sent"};

void dm_flock_trace(dm_flock_sim *s, int event)
{
    if (!s->trace_path) return;
    if (s->trace_n + 4 > s->trace_cap) {
        size_t c = s->trace_cap ? 2 * s->trace_cap : 4 * 4096;
        double *t = dm_realloc(s->trace, sizeof *t * c);
        if (!t) return; /* a diagnostic: the trace stops growing, the run goes on */
        s->trace = t;
        s->trace_cap = c;
    }
    s->trace[s->trace_n++] = s->iteration;
    s->trace[s->trace_n++] = event;
    s->trace[s->trace_n++] = dm_wtime();
    /* what a step's slow moments may come from: memory growth, pool compactions */
    double v = 0;
    if (event == DM_FT_BEGIN) v = (double)dm_mem_current(DM_MEM_DEVICE);
    else if (event == DM_FT_END) v = (double)dm_mem_current(DM_MEM_HOST);
    else if (event == DM_FT_HALO_RECV) v = (double)s->halo.compactions;
    else if (event == DM_FT_MIG_DONE) v = (double)s->own.compactions;
    s->trace[s->trace_n++] = v;
}

static void trace_write(const dm_flock_sim *s)
{
    if (!s->trace_path) return;
    FILE *f = fopen(s->trace_path, "w");
    if (!f) {
        dm_log_warn("flock: cannot write the trace %s", s->trace_path);
        return;
    }
    /* value: device bytes at begin, host bytes at end, the halo and own pools' compactions so far
     * at halo_received and migrated */
    fprintf(f, "rank\titeration\tevent\tseconds\tvalue\n");
    for (size_t i = 0; i + 4 <= s->trace_n; i += 4)
        fprintf(f, "%d\t%d\t%s\t%.6f\t%.0f\n", s->rank, (int)s->trace[i], g_trace_names[(int)s->trace[i + 1]],
                s->trace[i + 2], s->trace[i + 3]);
    if (fclose(f) != 0) dm_log_warn("flock: writing the trace %s failed", s->trace_path);
}

void dm_flock_sim_free(dm_flock_sim *s)
{
    if (!s) return;
    if (s->agree_pending) (void)dm_flock_agree_finish(s); /* every rank posted it */
    trace_write(s);
    dm_free(s->trace);
    dm_free(s->trace_path);
#if DM_FLOCK_CUDA
    if (s->dev) dm_flock_cuda_free(s);
#endif
    dm_free(s->cpu_rows);
    dm_flock_store_free(&s->own);
    dm_flock_store_free(&s->halo);
    dm_flock_idmap_free(&s->halo_sent[0]);
    dm_flock_idmap_free(&s->halo_sent[1]);
    for (int kind = 0; kind < 2; kind++)
        for (int k = 0; k < 2; k++) {
            dm_flock_buf_free(&s->xsend[kind][k]);
            dm_flock_buf_free(&s->xrecv[kind][k]);
        }
    dm_flock_buf_free(&s->sel_idx);
    dm_flock_buf_free(&s->sel_dirs);
    dm_flock_buf_free(&s->pack_idx);
    dm_flock_buf_free(&s->pack_with);
    dm_flock_buf_free(&s->pack_state);
    dm_flock_buf_free(&s->dep_id);
    dm_flock_buf_free(&s->dep_voff);
    dm_flock_buf_free(&s->dep_vlen);
    dm_free(s->cut);
    dm_free((void *)s->opt.checkpoint);
    dm_free(s->labels);
    dm_free(s);
}

int dm_flock_sim_iteration(const dm_flock_sim *s) { return s->iteration; }
uint64_t dm_flock_sim_docs(const dm_flock_sim *s) { return s->n_global; }
const dm_flock_stats *dm_flock_sim_stats(const dm_flock_sim *s) { return &s->stats; }
void dm_flock_sim_plane(const dm_flock_sim *s, double *W, double *H) { dm_flock_plane_at(s, s->iteration, W, H); }
const int32_t *dm_flock_sim_labels(const dm_flock_sim *s) { return s->labels; }
int32_t dm_flock_sim_centroid_skipped(const dm_flock_sim *s) { return s->centroid_skipped; }
int dm_flock_sim_refined(const dm_flock_sim *s, uint64_t *moved)
{
    if (moved) *moved = s->refine_moved;
    return s->refine_steps;
}

int dm_flock_sim_view(dm_flock_sim *s, dm_flock_view *out)
{
#if DM_FLOCK_CUDA
    if (s->backend == DM_BACKEND_CUDA && !s->host_valid) DM_TRY(dm_flock_cuda_sync_host(s));
#endif
    out->n = s->own.n;
    out->id = s->own.id;
    out->x = s->own.x;
    out->y = s->own.y;
    out->vx = s->own.vx;
    out->vy = s->own.vy;
    return DM_OK;
}

int dm_flock_agree_finish(dm_flock_sim *s)
{
    if (!s->agree_pending) return DM_OK;
    s->agree_pending = 0;
    dm_timer_start("flock.agree");
    int ok = MPI_Wait(&s->agree_req, MPI_STATUS_IGNORE) == MPI_SUCCESS;
    dm_timer_stop("flock.agree");
    dm_flock_trace(s, DM_FT_AGREED);
    int agreed = ok ? dm_agree_unpack(s->agree_recv)
                    : DM_ERR(DM_ERR_MPI, "flock: the agreement on a step's status failed");
    if (agreed < 0) s->agree_failed = 1; /* every rank knows: no further agreement */
    if (agreed < 0 && s->agree_send[1] == DM_OK && ok) {
        DM_ERR(agreed, "another rank failed (%s)", dm_status_name(agreed));
        dm_error_mark_remote();
    }
    return agreed;
}

int dm_flock_step_injected(const dm_flock_sim *s)
{
    if (s->fail_at <= 0 || s->iteration + 1 != s->fail_at || s->fail_late) return DM_OK;
    return DM_ERR(DM_ERR_IO, "flock: failure injected into iteration %d on rank %d (test)", s->fail_at, s->rank);
}

/* Ends a step: the ranks agree on its status, at once or (agree_lag) during the next step. */
static int step_agree(dm_flock_sim *s, int rc)
{
    if (!s->agree_lag) return dm_ctx_agree(s->ctx, rc);
    int ra = dm_flock_agree_finish(s); /* when the backend did not complete it */
    if (rc == DM_OK) rc = ra;
    /* the step stopped at a failed agreement: every rank stops there, none posts another */
    if (s->agree_failed) return rc;
    dm_agree_pack(rc, s->agree_send);
    if (MPI_Iallreduce(s->agree_send, s->agree_recv, 2, MPI_INT, MPI_MIN, s->comm, &s->agree_req) != MPI_SUCCESS)
        return DM_ERR(DM_ERR_MPI, "flock: posting the agreement on a step's status failed");
    s->agree_pending = 1;
    /* a failed rank learns the others' status now; the others at their next step */
    return rc == DM_OK ? DM_OK : dm_flock_agree_finish(s);
}

int dm_flock_sim_step(dm_flock_sim *s)
{
    if (s->iteration >= s->opt.iterations) return DM_OK;
    dm_free(s->labels);
    s->labels = NULL;
    s->halo_valid = 0;
    dm_timer_start("flock.step");
    dm_flock_trace(s, DM_FT_BEGIN);
    int it = s->iteration;
    int rc = s->backend == DM_BACKEND_CUDA ? dm_flock_step_cuda(s) : dm_flock_step_cpu(s);
    if (rc == DM_OK && s->fail_late && s->fail_at == it + 1) {
        rc = DM_ERR(DM_ERR_IO, "flock: failure injected after the exchanges of iteration %d on rank %d (test)",
                    s->fail_at, s->rank);
        s->iteration = it; /* the step failed */
    }
    /* the halo of this step belongs to the positions before the update and migration */
    s->halo_valid = 0;
    dm_flock_trace(s, DM_FT_END);
    dm_timer_stop("flock.step");
    return step_agree(s, rc);
}

void dm_flock_stats_publish(const dm_flock_sim *s)
{
    dm_counter_add("flock.pairs", (int64_t)s->stats.pairs);
    dm_counter_add("flock.similar_pairs", (int64_t)s->stats.similar);
    dm_counter_add("flock.halo_sent", (int64_t)s->stats.halo_sent);
    dm_counter_add("flock.halo_vectors", (int64_t)s->stats.halo_vectors);
    dm_counter_add("flock.halo_returned", (int64_t)s->stats.halo_returned);
    dm_counter_add("flock.migrated", (int64_t)s->stats.migrated_out);
    dm_counter_add("flock.migrated_vectors", (int64_t)s->stats.migrated_vectors);
    dm_counter_add("flock.seam_crossings", (int64_t)s->stats.seam_crossings);
    dm_counter_add("flock.sim_cache_hits", (int64_t)s->stats.sim_cache_hits);
    dm_counter_add("flock.device_grows", (int64_t)s->stats.device_grows);
    dm_counter_add("flock.migrations", (int64_t)s->stats.migrations);
}

int dm_flock_sim_run(dm_flock_sim *s)
{
    dm_progress pr;
    dm_progress_begin(&pr, "flock", "it", (uint64_t)s->opt.iterations);
    int rc = DM_OK;
    /* the steps agree on their status without a barrier each (see agree_lag); whatever reads
     * or writes the state of all ranks first completes the agreement */
    s->agree_lag = 1;
    while (rc == DM_OK && s->iteration < s->opt.iterations) {
        rc = dm_flock_sim_step(s);
        if (rc != DM_OK) break;
        int ckpt = dm_flock_checkpoint_due(&s->opt, s->iteration);
        if (ckpt || s->opt.on_iteration || s->iteration >= s->opt.iterations ||
            (s->opt.stop_after > 0 && s->iteration >= s->opt.stop_after)) {
            rc = dm_flock_agree_finish(s);
            if (rc != DM_OK) break;
        }
        if (ckpt) {
            dm_timer_start("flock.checkpoint");
            rc = dm_flock_checkpoint_write(s, s->opt.checkpoint);
            dm_timer_stop("flock.checkpoint");
            if (rc != DM_OK) break;
        }
        if (s->opt.on_iteration) {
            int stop = s->opt.on_iteration(s, s->opt.user);
            MPI_Allreduce(MPI_IN_PLACE, &stop, 1, MPI_INT, MPI_MAX, s->comm);
            if (stop) break;
        }
        dm_progress_update(&pr, (uint64_t)s->iteration);
        if (s->opt.stop_after > 0 && s->iteration >= s->opt.stop_after) break;
    }
    int ra = dm_flock_agree_finish(s); /* a step failed on this rank: already completed */
    if (rc == DM_OK) rc = ra;
    s->agree_lag = 0;
    dm_progress_end(&pr, (uint64_t)s->iteration);
    return rc;
}

int dm_flock_calibrate(double *speed, const dm_ctx *ctx)
{
    *speed = 0;
    dm_ctx self = *ctx;
    self.world = MPI_COMM_SELF;
    self.rank = 0;
    self.size = 1;
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.tokens = ctx->backend == DM_BACKEND_CUDA ? 300 : 100;
    const uint64_t n = ctx->backend == DM_BACKEND_CUDA ? 200000 : 3000;
    dm_vectors v;
    DM_TRY(dm_flock_synth_vectors(&v, &so, 0, n));
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = 6;
    dm_flock_sim *s = NULL;
    int rc = dm_flock_sim_init(&s, &self, &v, &o);
    double t0 = 0;
    for (int i = 0; i < o.iterations && rc == DM_OK; i++) {
        if (i == 2) t0 = dm_wtime(); /* the first steps warm caches (and the CUDA pair cache) */
        rc = dm_flock_sim_step(s);
    }
    if (rc == DM_OK) *speed = (double)n * (o.iterations - 2) / (dm_wtime() - t0);
    dm_flock_sim_free(s);
    dm_flock_vectors_release(&v);
    return rc;
}

#if !DM_FLOCK_CUDA
int dm_flock_step_cuda(dm_flock_sim *s)
{
    (void)s;
    return DM_ERR(DM_ERR_UNSUPPORTED, "flock: built without the CUDA backend");
}
int dm_flock_edges_cuda(dm_flock_edges *out, dm_flock_sim *s, double threshold)
{
    (void)out;
    (void)s;
    (void)threshold;
    return DM_ERR(DM_ERR_UNSUPPORTED, "flock: built without the CUDA backend");
}
int dm_flock_attach_cuda_fits(const dm_flock_centroids *c)
{
    (void)c;
    return 0;
}
int dm_flock_centroid_sums_cuda_fits(int32_t k, uint64_t nterms)
{
    (void)k;
    (void)nterms;
    return 0;
}
int dm_flock_centroid_sums_cuda(dm_flock_sim *s, const int32_t *cl, int32_t k, uint64_t nterms,
                                dm_flock_centroid_entry **loc, size_t *m)
{
    (void)s;
    (void)cl;
    (void)k;
    (void)nterms;
    *loc = NULL;
    *m = 0;
    return DM_ERR(DM_ERR_UNSUPPORTED, "flock: built without the CUDA backend");
}
int dm_flock_attach_cuda(dm_flock_sim *s, int32_t *res, const int32_t *cl, const dm_flock_centroids *c)
{
    (void)s;
    (void)res;
    (void)cl;
    (void)c;
    return DM_ERR(DM_ERR_UNSUPPORTED, "flock: built without the CUDA backend");
}
#endif
