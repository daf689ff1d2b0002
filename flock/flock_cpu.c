/* The CPU backend of flock, the reference: the uniform grid (cell >= r, boids sorted by cell
 * with the sorting module, each boid scans its 3 x 3 cells), the exact cosine similarity of the
 * neighbours' sparse vectors, the force sums and the update of flock_model.h, and the final
 * graph's edges for the clusters. OpenMP over target boids (each thread writes only its own
 * boids' sums, so the result does not depend on the thread count). Reference: DESIGN.md section
 * 7 and flock_model.h; tests/flock/test_flock.c checks it by hand and against brute force.
 * A small per-boid cache of exact decisions (below) spares most of the similarities, as on the
 * GPU; DOCMINE_FLOCK_CPU_CACHE=0 computes every pair. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "common/timer.h"
#include "flock/flock_impl.h"

static int bits_for(uint64_t v)
{
    int b = 1;
    while (b < 32 && (v >> b) != 0) b++;
    return b;
}

int dm_flock_grid_build(dm_flock_grid *g, const dm_flock_sim *s, const dm_flock_params *p,
                        const dm_flock_window *w, const double *x, const double *y, size_t n)
{
    (void)s;
    memset(g, 0, sizeof *g);
    g->w = *w;
    g->C = p->C;
    g->n = n;
    size_t cells = (size_t)p->C * (size_t)w->nb;
    uint32_t *keys = dm_malloc(sizeof *keys * (n ? n : 1));
    uint32_t *idx = dm_malloc(sizeof *idx * (n ? n : 1));
    uint32_t *skeys = dm_malloc(sizeof *skeys * (n ? n : 1));
    g->order = dm_malloc(sizeof *g->order * (n ? n : 1));
    g->start = dm_calloc(cells + 1, sizeof *g->start);
    int rc = DM_OK;
    if (!keys || !idx || !skeys || !g->order || !g->start) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for the grid");
    for (size_t i = 0; i < n && rc == DM_OK; i++) {
        int row = dm_flock_cell(y[i], p->ch, p->R), col = dm_flock_cell(x[i], p->cw, p->C);
        int lr = dm_flock_window_row(w, p->R, row);
        /* own boids are in the slice and halo boids within the margin: always inside */
        DM_ASSERT(lr >= 0);
        keys[i] = (uint32_t)((size_t)lr * (size_t)p->C + (size_t)col);
        idx[i] = (uint32_t)i;
    }
    if (rc == DM_OK) rc = dm_flock_sort_pairs_u32_cpu(skeys, g->order, keys, idx, n, bits_for(cells));
    if (rc == DM_OK) {
        for (size_t i = 0; i < n; i++) g->start[skeys[i] + 1]++;
        for (size_t c = 0; c < cells; c++) g->start[c + 1] += g->start[c];
    }
    dm_free(keys);
    dm_free(idx);
    dm_free(skeys);
    if (rc != DM_OK) dm_flock_grid_free(g);
    return rc;
}

void dm_flock_grid_free(dm_flock_grid *g)
{
    dm_free(g->start);
    dm_free(g->order);
    memset(g, 0, sizeof *g);
}

/* The similar/dissimilar decision for a pair: exact cosine of the unit vectors. */
static int pair_similar(const dm_flock_store *a, size_t i, const dm_flock_store *b, size_t j, double threshold)
{
    int64_t dot = dm_flock_dot_fix(a->col + a->voff[i], a->val + a->voff[i], a->vlen[i], b->col + b->voff[j],
                                   b->val + b->voff[j], b->vlen[j]);
    return dm_flock_is_similar(dot, threshold);
}

/* A target boid's vector scattered into a dense row (one per thread), so that the dot product
 * with each of its neighbours reads the neighbour's entries only, instead of merging two sorted
 * lists with a branch per entry (about 3x less time: bench/RESULTS.md, session 14). The sum is
 * dm_flock_dot_fix's: the same fixed-point products of the common terms, added in another order,
 * and fixed-point sums do not depend on the order, so every decision is identical. Without the
 * row (out of memory) the pairs fall back to dm_flock_dot_fix. */
typedef struct dense_row {
    float *v;       /* v[t]: the scattered boid's weight of term t, 0 elsewhere */
    size_t cap;     /* terms v holds */
    const uint32_t *col; /* the scattered boid's entries (to clear them), NULL when none */
    uint32_t len;
} dense_row;

/* Scatters boid i of a (its entries are term-sorted: the last is the largest term). Returns 0
 * when the row cannot grow to hold them (the caller then uses pair_similar). */
static int dense_scatter(dense_row *d, const dm_flock_store *a, size_t i)
{
    const uint32_t *c = a->col + a->voff[i];
    const float *v = a->val + a->voff[i];
    uint32_t n = a->vlen[i];
    size_t need = n ? (size_t)c[n - 1] + 1 : 0;
    if (need > d->cap) {
        size_t cap = d->cap ? d->cap : 4096;
        while (cap < need) cap *= 2;
        float *q = dm_realloc(d->v, sizeof *q * cap);
        if (!q) return 0;
        memset(q + d->cap, 0, sizeof *q * (cap - d->cap));
        d->v = q;
        d->cap = cap;
    }
    for (uint32_t k = 0; k < n; k++) d->v[c[k]] = v[k];
    d->col = c;
    d->len = n;
    return 1;
}

static void dense_clear(dense_row *d)
{
    for (uint32_t k = 0; k < d->len; k++) d->v[d->col[k]] = 0.0f;
    d->col = NULL;
    d->len = 0;
}

/* pair_similar of the scattered boid and boid j of b. */
static int dense_similar(const dense_row *d, const dm_flock_store *b, size_t j, double threshold)
{
    const uint32_t *c = b->col + b->voff[j];
    const float *v = b->val + b->voff[j];
    uint32_t n = b->vlen[j];
    int64_t s = 0;
    for (uint32_t k = 0; k < n && c[k] < d->cap; k++) {
        float a = d->v[c[k]];
        if (a != 0.0f) s += dm_flock_rint64((double)a * (double)v[k] * DM_FLOCK_DOT_SCALE);
    }
    return dm_flock_is_similar(s, threshold);
}

/* ---- the pair cache ---------------------------------------------------------------------------
 * A boid's row remembers the decisions of its recent neighbours: 2^DM_FLOCK_CPU_SET_BITS sets of
 * DM_FLOCK_CPU_WAYS entries (256, 2 KB), the neighbour's document choosing the set. In the
 * README's demo (20000 documents, 100 iterations, 2 threads) 80% of the pairs hit and the run
 * takes 24 s instead of 86 (64 entries: 38% of the pairs hit, 128: 65%, 512: 85%, for 1 s less
 * than 256). An entry is the document (low 32 bits; flock numbers documents below 2^32), the
 * decision (bit 32) and the iteration + 1 the pair was last a neighbour pair (bits 33-63; 0:
 * empty). A miss takes the set's empty or least recently seen entry. Decisions never change, so a
 * hit is exact; only the thread of the row's boid touches the row, in the grid's order, so the
 * hits are the same in every run. */
#define DM_FLOCK_CPU_SET_BITS 5
#define DM_FLOCK_CPU_WAYS 8
#define DM_FLOCK_CPU_ROW (DM_FLOCK_CPU_WAYS << DM_FLOCK_CPU_SET_BITS)

/* The set of document doc in row. */
static uint64_t *cache_set(uint64_t *row, uint64_t doc)
{
    return row + DM_FLOCK_CPU_WAYS * ((doc * 0x9E3779B97F4A7C15ull) >> (64 - DM_FLOCK_CPU_SET_BITS));
}

/* The decision in row for document doc (-1: not held); a hit is marked seen at iteration it. */
static int cache_get(uint64_t *row, uint64_t doc, int it)
{
    uint64_t *set = cache_set(row, doc);
    for (int w = 0; w < DM_FLOCK_CPU_WAYS; w++)
        if (set[w] >> 33 && (uint32_t)set[w] == (uint32_t)doc) {
            set[w] = (uint64_t)(it + 1) << 33 | (set[w] & ((1ull << 33) - 1));
            return (int)(set[w] >> 32 & 1);
        }
    return -1;
}

/* Remembers (doc, sim) seen at iteration it in place of the set's oldest entry. */
static void cache_put(uint64_t *row, uint64_t doc, int sim, int it)
{
    uint64_t *set = cache_set(row, doc);
    int oldest = 0;
    for (int w = 1; w < DM_FLOCK_CPU_WAYS; w++)
        if (set[w] >> 33 < set[oldest] >> 33) oldest = w;
    set[oldest] = (uint64_t)(it + 1) << 33 | (uint64_t)(sim != 0) << 32 | (uint32_t)doc;
}

/* Room for the rows of n own boids (new rows empty); off: nothing. */
static int cache_reserve(dm_flock_sim *s, size_t n)
{
    if (!s->cpu_cache || n <= s->cpu_rows_cap) return DM_OK;
    size_t cap = n + n / 4;
    uint64_t *r = dm_realloc(s->cpu_rows, sizeof *r * DM_FLOCK_CPU_ROW * cap);
    if (!r) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory (pair cache, %zu boids)", cap);
    memset(r + DM_FLOCK_CPU_ROW * s->cpu_rows_cap, 0, sizeof *r * DM_FLOCK_CPU_ROW * (cap - s->cpu_rows_cap));
    s->cpu_rows = r;
    s->cpu_rows_cap = cap;
    return DM_OK;
}

/* After a migration the rows follow their boids (moved into the holes) and the arrivals start
 * empty. */
static void cache_migrate(dm_flock_sim *s, const dm_flock_migration *m)
{
    if (!s->cpu_rows) return;
    for (size_t k = 0; k < m->n_moved; k++)
        memcpy(s->cpu_rows + DM_FLOCK_CPU_ROW * (size_t)m->moved_dst[k],
               s->cpu_rows + DM_FLOCK_CPU_ROW * (size_t)m->moved_src[k], sizeof *s->cpu_rows * DM_FLOCK_CPU_ROW);
    size_t end = s->own.n < s->cpu_rows_cap ? s->own.n : s->cpu_rows_cap;
    if (end > m->n_kept)
        memset(s->cpu_rows + DM_FLOCK_CPU_ROW * m->n_kept, 0, sizeof *s->cpu_rows * DM_FLOCK_CPU_ROW * (end - m->n_kept));
}

/* The grid cells around a position that lie in this rank's window: the 3x3 block of its cell on
 * the torus, in row then column order (a cell appears twice when the grid has fewer than 3 rows or
 * columns, as the interaction rules count it). Returns how many of cells[9] are filled. */
static int neighbour_cells(size_t cells[9], const dm_flock_grid *g, const dm_flock_params *p, double x, double y)
{
    int row = dm_flock_cell(y, p->ch, p->R), col = dm_flock_cell(x, p->cw, p->C), n = 0;
    for (int dr = -1; dr <= 1; dr++) {
        int lr = dm_flock_window_row(&g->w, p->R, (row + dr + p->R) % p->R);
        if (lr < 0) continue;
        for (int dc = -1; dc <= 1; dc++) cells[n++] = (size_t)lr * (size_t)p->C + (size_t)((col + dc + p->C) % p->C);
    }
    return n;
}

/* The decision for own boid i and source boid j through the thread's dense row, which holds i
 * from its first pair on (*scattered: -1 not yet, 1 scattered, 0 could not: pair_similar). */
static int row_similar(dense_row *d, int *scattered, const dm_flock_store *own, size_t i, const dm_flock_store *src,
                       size_t j, double threshold)
{
    if (*scattered < 0) *scattered = dense_scatter(d, own, i);
    return *scattered ? dense_similar(d, src, j, threshold) : pair_similar(own, i, src, j, threshold);
}

/* Adds the contributions of the sources (a store with its grid) to every own boid's sums.
 * same: the sources are the own boids (skip the boid itself). rows: the pair cache (NULL: off),
 * it: the iteration. */
static void interact(dm_flock_acc *acc, const dm_flock_store *own, const dm_flock_store *src, const dm_flock_grid *g,
                     const dm_flock_params *p, int same, uint64_t *rows, int it, dm_flock_stats *st)
{
    uint64_t np = 0, ns = 0, nh = 0;
    const long n = (long)own->n;
#pragma omp parallel reduction(+ : np, ns, nh)
    {
        dense_row d = {NULL, 0, NULL, 0};
#pragma omp for schedule(dynamic, 256)
        for (long i = 0; i < n; i++) {
            size_t cells[9];
            int nc = neighbour_cells(cells, g, p, own->x[i], own->y[i]);
            int scattered = -1; /* row_similar */
            uint64_t *row = rows ? rows + DM_FLOCK_CPU_ROW * (size_t)i : NULL; /* i's pair cache */
            for (int c = 0; c < nc; c++)
                for (uint32_t k = g->start[cells[c]]; k < g->start[cells[c] + 1]; k++) {
                    uint32_t j = g->order[k];
                    if (same && j == (uint32_t)i) continue;
                    double dx, dy;
                    double d2 = dm_flock_offset(p, own->x[i], own->y[i], src->x[j], src->y[j], &dx, &dy);
                    if (!(d2 < p->r2)) continue;
                    int sim = row ? cache_get(row, src->id[j], it) : -1;
                    if (sim >= 0) {
                        nh++;
                    } else {
                        sim = row_similar(&d, &scattered, own, (size_t)i, src, j, p->threshold);
                        if (row) cache_put(row, src->id[j], sim, it);
                    }
                    dm_flock_acc_add(&acc[i], p, dx, dy, d2, src->vx[j], src->vy[j], sim);
                    np++;
                    ns += (uint64_t)sim;
                }
            if (scattered > 0) dense_clear(&d);
        }
        dm_free(d.v);
    }
    st->pairs += np;
    st->similar += ns;
    st->sim_cache_hits += nh;
}

int dm_flock_step_cpu(dm_flock_sim *s)
{
    dm_flock_params p;
    DM_TRY(dm_flock_params_at(&p, s, s->iteration)); /* validated at init for every iteration */
    dm_flock_window w;
    dm_flock_window_of(&w, s, &p);
    dm_flock_store *own = &s->own;

    /* the last step's status (dm_flock_sim_run): before the first exchange; a failure reported
     * there stops every rank here */
    DM_TRY(dm_flock_agree_finish(s));

    /* 1. post the halo exchange; 2. own-own interactions while it flies */
    dm_flock_xchg x;
    int rc = dm_flock_halo_exchange_begin(s, &x, dm_flock_step_injected(s));
    dm_flock_acc *acc = dm_malloc(sizeof *acc * (own->n ? own->n : 1));
    if (!acc && rc == DM_OK) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    if (rc == DM_OK) rc = cache_reserve(s, own->n);
    dm_flock_grid g;
    memset(&g, 0, sizeof g);
    if (rc == DM_OK) {
        for (size_t i = 0; i < own->n; i++) dm_flock_acc_zero(&acc[i]);
        dm_timer_start("flock.grid");
        rc = dm_flock_grid_build(&g, s, &p, &w, own->x, own->y, own->n);
        dm_timer_stop("flock.grid");
    }
    dm_flock_xchg_progress(&x); /* post the halo receives whose sizes arrived */
    if (rc == DM_OK) {
        dm_timer_start("flock.interact");
        interact(acc, own, own, &g, &p, 1, s->cpu_rows, s->iteration, &s->stats);
        dm_timer_stop("flock.interact");
    }
    dm_flock_grid_free(&g);

    /* 3. own-halo interactions */
    int re = dm_flock_halo_exchange_end(s, &x);
    if (rc == DM_OK) rc = re;
    if (rc == DM_OK && s->halo.n) {
        dm_timer_start("flock.grid");
        rc = dm_flock_grid_build(&g, s, &p, &w, s->halo.x, s->halo.y, s->halo.n);
        dm_timer_stop("flock.grid");
        if (rc == DM_OK) {
            dm_timer_start("flock.interact");
            interact(acc, own, &s->halo, &g, &p, 0, s->cpu_rows, s->iteration, &s->stats);
            dm_timer_stop("flock.interact");
        }
        dm_flock_grid_free(&g);
    }

    /* 4. update on the next plane */
    if (rc == DM_OK) {
        dm_timer_start("flock.update");
        uint64_t seam = 0;
        const long n = (long)own->n;
#pragma omp parallel for schedule(static) reduction(+ : seam)
        for (long i = 0; i < n; i++)
            seam += (uint64_t)dm_flock_update(&p, &acc[i], &own->x[i], &own->y[i], &own->vx[i], &own->vy[i]);
        s->stats.seam_crossings += seam;
        dm_timer_stop("flock.update");
    }
    dm_free(acc);

    /* 5. migration to the neighbour slices after every migrate_every-th iteration (then always
     * entered: the neighbours wait for it) */
    if (dm_flock_migrates(s)) {
        dm_flock_migration m = {0, 0, NULL, NULL};
        rc = dm_flock_migrate_host(s, p.H1, rc, s->cpu_rows ? &m : NULL);
        if (rc == DM_OK) cache_migrate(s, &m);
        dm_flock_migration_free(&m);
    }
    s->halo_valid = 0;
    if (rc == DM_OK) s->iteration++;
    return rc;
}

/* ---- edges of the final graph ----------------------------------------------------------------- */

static int edges_push(dm_flock_edges *e, uint32_t own, uint32_t nbr, uint8_t halo)
{
    if (e->n == e->cap) {
        size_t c = e->cap ? 2 * e->cap : 1024;
        uint32_t *a = dm_realloc(e->own, sizeof *a * c);
        if (!a) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory for edges");
        e->own = a;
        uint32_t *b = dm_realloc(e->nbr, sizeof *b * c);
        if (!b) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory for edges");
        e->nbr = b;
        uint8_t *h = dm_realloc(e->halo, c);
        if (!h) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory for edges");
        e->halo = h;
        e->cap = c;
    }
    e->own[e->n] = own;
    e->nbr[e->n] = nbr;
    e->halo[e->n] = halo;
    e->n++;
    return DM_OK;
}

void dm_flock_edges_free(dm_flock_edges *e)
{
    dm_free(e->own);
    dm_free(e->nbr);
    dm_free(e->halo);
    memset(e, 0, sizeof *e);
}

/* Edges from the own boids to one source store, appended to e in own-boid order: the own boids
 * are cut into contiguous ranges, one per thread, whose edge lists are concatenated in range
 * order, so the list does not depend on the thread count. */
static int edges_from(dm_flock_edges *e, const dm_flock_store *own, const dm_flock_store *src, const dm_flock_grid *g,
                      const dm_flock_params *p, int same, double threshold)
{
    const int T = omp_get_max_threads();
    dm_flock_edges *part = dm_calloc((size_t)T, sizeof *part);
    if (!part) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory for edges");
    int failed = 0;
    const size_t n = own->n;
#pragma omp parallel num_threads(T) reduction(| : failed)
    {
        const int nt = omp_get_num_threads(), t = omp_get_thread_num();
        const size_t lo = n * (size_t)t / (size_t)nt, hi = n * (size_t)(t + 1) / (size_t)nt;
        dense_row d = {NULL, 0, NULL, 0};
        for (size_t i = lo; i < hi && !failed; i++) {
            size_t cells[9];
            int nc = neighbour_cells(cells, g, p, own->x[i], own->y[i]);
            int scattered = -1; /* row_similar */
            for (int c = 0; c < nc && !failed; c++)
                for (uint32_t k = g->start[cells[c]]; k < g->start[cells[c] + 1]; k++) {
                    uint32_t j = g->order[k];
                    if (same && j == (uint32_t)i) continue;
                    double dx, dy;
                    double d2 = dm_flock_offset(p, own->x[i], own->y[i], src->x[j], src->y[j], &dx, &dy);
                    if (!(d2 < p->r2)) continue;
                    if (!row_similar(&d, &scattered, own, i, src, j, threshold)) continue;
                    if (edges_push(&part[t], (uint32_t)i, j, (uint8_t)!same) != DM_OK) {
                        failed = 1;
                        break;
                    }
                }
            if (scattered > 0) dense_clear(&d);
        }
        dm_free(d.v);
    }
    int rc = failed ? DM_ERR(DM_ERR_NOMEM, "flock: out of memory for edges") : DM_OK;
    for (int t = 0; t < T && rc == DM_OK; t++)
        for (size_t k = 0; k < part[t].n && rc == DM_OK; k++)
            rc = edges_push(e, part[t].own[k], part[t].nbr[k], part[t].halo[k]);
    for (int t = 0; t < T; t++) dm_flock_edges_free(&part[t]);
    dm_free(part);
    return rc;
}

int dm_flock_edges_cpu(dm_flock_edges *out, dm_flock_sim *s, double threshold)
{
    memset(out, 0, sizeof *out);
    dm_flock_params p;
    DM_TRY(dm_flock_params_at(&p, s, s->iteration));
    dm_flock_window w;
    dm_flock_window_of(&w, s, &p);
    int rc = DM_OK;
    if (!s->halo_valid) {
        dm_flock_xchg x;
        rc = dm_flock_halo_exchange_begin(s, &x, rc);
        int re = dm_flock_halo_exchange_end(s, &x);
        if (rc == DM_OK) rc = re;
    }
    dm_flock_grid g;
    for (int pass = 0; pass < 2 && rc == DM_OK; pass++) {
        const dm_flock_store *src = pass == 0 ? &s->own : &s->halo;
        if (src->n == 0) continue;
        rc = dm_flock_grid_build(&g, s, &p, &w, src->x, src->y, src->n);
        if (rc == DM_OK) rc = edges_from(out, &s->own, src, &g, &p, pass == 0, threshold);
        dm_flock_grid_free(&g);
    }
    if (rc != DM_OK) dm_flock_edges_free(out);
    return rc;
}

int dm_flock_attach_cpu(dm_flock_sim *s, int32_t *res, const int32_t *cl, const dm_flock_centroids *c)
{
    const size_t n = s->own.n;
    const int32_t k = c->k > 0 ? c->k : 1;
    int bad = 0;
#pragma omp parallel reduction(| : bad)
    {
        double *dot = calloc((size_t)k, sizeof *dot);
        int32_t *touched = malloc(sizeof *touched * (size_t)k);
        size_t *stamp = calloc((size_t)k, sizeof *stamp); /* i + 1: touched by document i */
        if (!dot || !touched || !stamp) bad = 1;
        const long nl = (long)n;
#pragma omp for schedule(dynamic, 64)
        for (long il = 0; il < nl; il++) {
            size_t i = (size_t)il;
            res[i] = cl[i];
            if (cl[i] >= 0 || !dot || !touched || !stamp) continue;
            const uint32_t *col = s->own.col + s->own.voff[i];
            const float *val = s->own.val + s->own.voff[i];
            int32_t nt = 0;
            for (uint32_t q = 0; q < s->own.vlen[i]; q++) {
                if (col[q] >= c->nterms) continue;
                for (size_t e = c->tstart[col[q]]; e < c->tstart[col[q] + 1]; e++) {
                    int32_t cc = c->cluster[e];
                    if (stamp[cc] != i + 1) {
                        stamp[cc] = i + 1;
                        touched[nt++] = cc;
                    }
                    dot[cc] += (double)val[q] * c->value[e];
                }
            }
            double best = 0.0;
            for (int32_t t = 0; t < nt; t++) {
                int32_t cc = touched[t];
                double cosv = c->norm[cc] > 0 ? dot[cc] / c->norm[cc] : 0.0;
                if (cosv > best || (cosv == best && cosv > 0 && cc < res[i])) {
                    best = cosv;
                    res[i] = cc;
                }
                dot[cc] = 0.0;
            }
        }
        free(dot);
        free(touched);
        free(stamp);
    }
    return bad ? DM_ERR(DM_ERR_NOMEM, "flock: out of memory") : DM_OK;
}
