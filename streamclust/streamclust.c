/* Backend-neutral driver of streamclust: the lrand48-compatible generator, point sets, the engine,
 * Rodinia's pkmedian / pFL / selectfeasible_fast / shuffle / contcenters / copycenters, the gain
 * decision shared by both backends, the input stream (generator and binary files), option checks
 * and the MPI run (per-rank chunks, tree reduction of weighted centres, final clustering on rank 0,
 * labelling of every point). Reference: Rodinia 3.1 streamcluster_cuda_cpu.cpp / PARSEC 2.1.
 *
 * Documented differences from Rodinia (everything else follows its code statement by statement):
 *  - gain sums are exact 64-bit fixed point (see streamclust.h), not float (Rodinia CUDA) or
 *    double (PARSEC), so every backend and instance decides identically;
 *  - the random sequence: point j of the generated stream is made of draws j*dim .. j*dim+dim-1
 *    of srand48(1) (Rodinia's SimStream, exactly its points when n <= chunksize; for later chunks
 *    Rodinia interleaves the algorithm's draws), and rank r's algorithm draws start at draw
 *    n*dim + r*2^40 (exactly Rodinia's for one rank and one chunk, the benchmark run);
 *  - pkmedian with n <= kmax returns k = n (Rodinia returns a stale static k);
 *  - selectfeasible keeps at least one candidate (Rodinia divides by zero for kmin = 1);
 *  - give-up conditions where Rodinia loops forever (dm_sc_local_search);
 *  - centre ids are stream indices of the points and travel with them through shuffles (Rodinia
 *    prints the shuffled position, and its final shuffle separates ids from centres);
 *  - errors are returned as status codes where Rodinia quits the program. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "common/context.h"
#include "common/fileio.h"
#include "common/status.h"
#include "common/timer.h"
#include "streamclust/streamclust.h"
#include "streamclust/streamclust_impl.h"

#ifndef DM_HAVE_CUDA
#define DM_HAVE_CUDA 0
#endif

/* ---------------------------------------------------------------- generator */
#define DM_SC_RNG_A 0x5DEECE66DULL
#define DM_SC_RNG_C 0xBULL
#define DM_SC_RNG_MASK ((1ULL << 48) - 1)

void dm_sc_rng_seed(dm_sc_rng *r, long seed)
{
    r->x = ((((uint64_t)seed) & 0xFFFFFFFFULL) << 16 | 0x330EULL) & DM_SC_RNG_MASK;
}

long dm_sc_rng_next(dm_sc_rng *r)
{
    r->x = (DM_SC_RNG_A * r->x + DM_SC_RNG_C) & DM_SC_RNG_MASK;
    return (long)(r->x >> 17);
}

void dm_sc_rng_jump(dm_sc_rng *r, uint64_t k)
{
    /* compose the affine map x -> a x + c with itself: (a, c)^2 = (a^2, a c + c) */
    uint64_t a = DM_SC_RNG_A, c = DM_SC_RNG_C, ra = 1, rc = 0;
    while (k) {
        if (k & 1) {
            ra = (ra * a) & DM_SC_RNG_MASK;
            rc = (rc * a + c) & DM_SC_RNG_MASK;
        }
        c = ((a + 1) * c) & DM_SC_RNG_MASK;
        a = (a * a) & DM_SC_RNG_MASK;
        k >>= 1;
    }
    r->x = (ra * r->x + rc) & DM_SC_RNG_MASK;
}

/* ---------------------------------------------------------------- points */
/* Host bytes of dm_sc_points_init(cap, dim), in GB: for the messages that name the option. */
static double sc_points_gb(long cap, int dim)
{
    return (double)cap * ((double)dim * sizeof(float) + 2 * sizeof(float) + 3 * sizeof(long)) / 1e9;
}

int dm_sc_points_init(dm_sc_points *p, long cap, int dim)
{
    memset(p, 0, sizeof *p);
    if (cap < 1 || dim < 1) return DM_ERR(DM_ERR_INVALID_ARG, "points: cap %ld dim %d", cap, dim);
    /* cap x dim floats (and cap longs) must fit a size_t: CLUSTERSIZE = 2^62 wrapped to a few bytes
     * and the points were written past them. More than memory can hold: DM_ERR_NOMEM. */
    if ((unsigned long)cap > SIZE_MAX / sizeof(long) / (size_t)dim)
        return DM_ERR(DM_ERR_NOMEM, "points: %ld x %d floats do not fit in memory", cap, dim);
    p->cap = cap;
    p->dim = dim;
    p->coord = dm_malloc((size_t)cap * (size_t)dim * sizeof(float));
    p->slot = dm_malloc((size_t)cap * sizeof(long));
    p->weight = dm_malloc((size_t)cap * sizeof(float));
    p->cost = dm_malloc((size_t)cap * sizeof(float));
    p->assign = dm_malloc((size_t)cap * sizeof(long));
    p->id = dm_malloc((size_t)cap * sizeof(long));
    if (!p->coord || !p->slot || !p->weight || !p->cost || !p->assign || !p->id) {
        dm_sc_points_free(p);
        return DM_ERR(DM_ERR_NOMEM, "points: %ld x %d floats", cap, dim);
    }
    return DM_OK;
}

void dm_sc_points_free(dm_sc_points *p)
{
    if (!p) return;
    dm_free(p->coord);
    dm_free(p->slot);
    dm_free(p->weight);
    dm_free(p->cost);
    dm_free(p->assign);
    dm_free(p->id);
    memset(p, 0, sizeof *p);
}

void dm_sc_points_reset(dm_sc_points *p, long num)
{
    p->num = num;
    for (long i = 0; i < num; i++) {
        p->slot[i] = i;
        p->weight[i] = 1.0f;
        p->cost[i] = 0.0f;
        p->assign[i] = 0;
    }
}

/* Grows a point set to hold cap points, keeping its contents (slot order is compacted first). */
static int sc_points_grow(dm_sc_points *p, long cap)
{
    if (cap <= p->cap) return DM_OK;
    dm_sc_points q;
    DM_TRY(dm_sc_points_init(&q, cap, p->dim));
    for (long i = 0; i < p->num; i++) {
        memcpy(q.coord + (size_t)i * p->dim, dm_sc_point_coord(p, i), (size_t)p->dim * sizeof(float));
        q.slot[i] = i;
        q.weight[i] = p->weight[i];
        q.cost[i] = p->cost[i];
        q.assign[i] = p->assign[i];
        q.id[i] = p->id[i];
    }
    q.num = p->num;
    dm_sc_points_free(p);
    *p = q;
    return DM_OK;
}

/* ---------------------------------------------------------------- engine */
int dm_sc_engine_create(dm_sc_engine **out, int backend, long cap, int dim)
{
    *out = NULL;
    if (backend != DM_SC_CPU && backend != DM_SC_CUDA)
        return DM_ERR(DM_ERR_INVALID_ARG, "streamclust: unknown backend %d", backend);
    if (backend == DM_SC_CUDA && !DM_HAVE_CUDA)
        return DM_ERR(DM_ERR_UNSUPPORTED, "streamclust: this build has no CUDA backend");
    /* the local search indexes a chunk's points with int (feasible candidates, centre table,
     * assignments), as Rodinia's does */
    if (cap > INT_MAX)
        return DM_ERR(DM_ERR_UNSUPPORTED, "streamclust: %ld points in one chunk (at most 2^31 - 1)", cap);
    dm_sc_engine *e = dm_calloc(1, sizeof *e);
    if (!e) return DM_ERR(DM_ERR_NOMEM, "streamclust engine");
    e->backend = backend;
    e->cap = cap;
    e->dim = dim;
    int rc = dm_sc_points_init(&e->pts, cap, dim);
    if (rc == DM_OK) {
        e->is_center = dm_calloc((size_t)cap, 1);
        e->center_table = dm_calloc((size_t)cap, sizeof(int));
        e->sw = dm_calloc((size_t)cap, 1);
        e->xcost = dm_calloc((size_t)cap, sizeof(float));
        if (!e->is_center || !e->center_table || !e->sw || !e->xcost)
            rc = DM_ERR(DM_ERR_NOMEM, "streamclust engine: %ld points", cap);
    }
    if (rc == DM_OK) rc = dm_sc_engine_reserve(e, 64);
    if (rc == DM_OK && backend == DM_SC_CUDA) rc = dm_sc_cuda_create(e);
    if (rc < 0) {
        dm_sc_engine_destroy(e);
        return rc;
    }
    *out = e;
    return DM_OK;
}

void dm_sc_engine_destroy(dm_sc_engine *e)
{
    if (!e) return;
    if (e->backend == DM_SC_CUDA) dm_sc_cuda_destroy(e);
    dm_sc_points_free(&e->pts);
    dm_free(e->is_center);
    dm_free(e->center_table);
    dm_free(e->sw);
    dm_free(e->xcost);
    dm_free(e->sums);
    dm_free(e->close);
    dm_free(e->centers);
    dm_free(e->lower);
    dm_free(e);
}

dm_sc_points *dm_sc_engine_points(dm_sc_engine *e) { return &e->pts; }
int dm_sc_engine_backend(const dm_sc_engine *e) { return e->backend; }
void dm_sc_engine_stats(const dm_sc_engine *e, dm_sc_stats *out) { *out = e->stats; }

int dm_sc_engine_reserve(dm_sc_engine *e, long k)
{
    if (k + 1 <= e->sums_cap) return DM_OK;
    long cap = e->sums_cap ? e->sums_cap : 64;
    while (cap < k + 1) cap *= 2;
    int64_t *s = dm_realloc(e->sums, (size_t)cap * sizeof *s);
    if (s) e->sums = s;
    unsigned char *c = dm_realloc(e->close, (size_t)cap);
    if (c) e->close = c;
    long *ce = dm_realloc(e->centers, (size_t)cap * sizeof *ce);
    if (ce) e->centers = ce;
    if (!s || !c || !ce) return DM_ERR(DM_ERR_NOMEM, "streamclust: %ld centres", k);
    e->sums_cap = cap;
    return DM_OK;
}

long dm_sc_list_centers(dm_sc_engine *e)
{
    long k = 0;
    for (long i = 0; i < e->pts.num; i++)
        if (e->is_center[i]) e->centers[k++] = i;
    return k;
}

int dm_sc_engine_load(dm_sc_engine *e, long num)
{
    dm_sc_points *p = &e->pts;
    if (num < 1 || num > e->cap)
        return DM_ERR(DM_ERR_INVALID_ARG, "streamclust: %ld points for an engine of %ld", num, e->cap);
    p->num = num;
    const int dim = p->dim;
    double w = 0.0, diam2 = 0.0;
    float *lo = dm_malloc(2 * (size_t)dim * sizeof(float)), *hi = lo + dim;
    if (!lo) return DM_ERR(DM_ERR_NOMEM, "streamclust: load");
    for (int d = 0; d < dim; d++) {
        lo[d] = INFINITY;
        hi[d] = -INFINITY;
    }
    for (long i = 0; i < num; i++) { /* row by row: the bounding box and finiteness */
        const float *row = dm_sc_point_coord(p, i);
        for (int d = 0; d < dim; d++) {
            float v = row[d];
            if (!isfinite(v)) {
                dm_free(lo);
                return DM_ERR(DM_ERR_FORMAT, "streamclust: coordinate %d of point %ld is not finite",
                              d, p->id[i]);
            }
            lo[d] = v < lo[d] ? v : lo[d];
            hi[d] = v > hi[d] ? v : hi[d];
        }
    }
    for (int d = 0; d < dim; d++) diam2 += ((double)hi[d] - lo[d]) * ((double)hi[d] - lo[d]);
    dm_free(lo);
    for (long i = 0; i < num; i++) {
        if (!isfinite(p->weight[i]) || p->weight[i] < 0.0f)
            return DM_ERR(DM_ERR_FORMAT, "streamclust: weight of point %ld is %g", p->id[i],
                          (double)p->weight[i]);
        w += p->weight[i];
    }
    /* squared distances and weighted costs are floats: keep them finite */
    if (!(diam2 < 1e36) || !(w * diam2 < 1e37))
        return DM_ERR(DM_ERR_FORMAT,
                      "streamclust: coordinates too large for float distances (squared diameter "
                      "%g, total weight %g)",
                      diam2, w);
    e->scale = dm_sc_fix_scale(w, diam2, &e->scale_s);
    memset(e->is_center, 0, (size_t)num);
    e->host_valid = 1;
    if (e->backend == DM_SC_CUDA) DM_TRY(dm_sc_cuda_load(e));
    return DM_OK;
}

/* ---------------------------------------------------------------- gain decision */
int dm_sc_decide(float *gain, long *nclose, unsigned char *close, const int64_t *sums, long K,
                 float z, double scale)
{
    /* |z*scale| <= 2^61 and every sum is bounded by 2^61 (dm_sc_fix_scale); 128-bit totals */
    const int64_t zf = dm_sc_fix(z, scale);
    __int128 open = (__int128)zf + sums[K];
    long nc = 0;
    for (long c = 0; c < K; c++) {
        __int128 low = (__int128)zf + sums[c];
        close[c] = low > 0;
        if (close[c]) {
            nc++;
            open -= low;
        }
    }
    *nclose = nc;
    if (open < 0) {
        *gain = (float)(-(double)open / scale);
        return 1;
    }
    *gain = 0.0f;
    return 0;
}

/* ---------------------------------------------------------------- Rodinia's host routines */
/* shuffle points into random order (Rodinia's shuffle: num - 1 draws) */
static int sc_shuffle(dm_sc_engine *e, dm_sc_rng *rng)
{
    dm_timer_start("streamclust.shuffle");
    dm_sc_points *p = &e->pts;
    for (long i = 0; i < p->num - 1; i++) {
        long j = (dm_sc_rng_next(rng) % (p->num - i)) + i;
        long ts = p->slot[i]; p->slot[i] = p->slot[j]; p->slot[j] = ts;
        float tw = p->weight[i]; p->weight[i] = p->weight[j]; p->weight[j] = tw;
        float tc = p->cost[i]; p->cost[i] = p->cost[j]; p->cost[j] = tc;
        long ta = p->assign[i]; p->assign[i] = p->assign[j]; p->assign[j] = ta;
        long ti = p->id[i]; p->id[i] = p->id[j]; p->id[j] = ti;
    }
    int rc = e->backend == DM_SC_CUDA ? dm_sc_cuda_permuted(e) : DM_OK;
    dm_timer_stop("streamclust.shuffle");
    return rc;
}

/* Rodinia's intshuffle: length draws */
static void sc_intshuffle(int *a, int length, dm_sc_rng *rng)
{
    for (long i = 0; i < length; i++) {
        long j = (dm_sc_rng_next(rng) % (length - i)) + i;
        int t = a[i]; a[i] = a[j]; a[j] = t;
    }
}

int dm_sc_selectfeasible(int *feasible, int *nfeasible, const dm_sc_points *p, long kmin,
                         dm_sc_rng *rng)
{
    int numfeasible = (int)p->num;
    float bound = (float)(DM_SC_ITER * kmin) * logf((float)kmin);
    if ((float)numfeasible > bound) numfeasible = (int)bound;
    if (numfeasible < 1) numfeasible = 1; /* kmin = 1: Rodinia would select none and divide by 0 */
    *nfeasible = numfeasible;
    if (numfeasible == p->num) {
        for (int i = 0; i < numfeasible; i++) feasible[i] = i;
        return DM_OK;
    }
    float *accum = dm_malloc((size_t)p->num * sizeof *accum);
    if (!accum) return DM_ERR(DM_ERR_NOMEM, "selectfeasible: %ld points", p->num);
    accum[0] = p->weight[0];
    for (long i = 1; i < p->num; i++) accum[i] = accum[i - 1] + p->weight[i];
    float totalweight = accum[p->num - 1];
    for (int i = 0; i < numfeasible; i++) {
        float w = ((float)dm_sc_rng_next(rng) / (float)INT_MAX) * totalweight;
        long l = 0, r = p->num - 1;
        if (accum[0] > w) {
            feasible[i] = 0;
            continue;
        }
        while (l + 1 < r) {
            long k = (l + r) / 2;
            if (accum[k] > w) r = k;
            else l = k;
        }
        feasible[i] = (int)r;
    }
    dm_free(accum);
    return DM_OK;
}

/* Per-phase timers (common/timer.h), reduced over ranks in the report. */
static int sc_speedy(float *cost, dm_sc_engine *e, float z, long *k, dm_sc_rng *rng)
{
    dm_timer_start("streamclust.speedy");
    int rc = e->backend == DM_SC_CUDA ? dm_sc_speedy_cuda(cost, e, z, k, rng)
                                      : dm_sc_speedy_cpu(cost, e, z, k, rng);
    dm_timer_stop("streamclust.speedy");
    return rc;
}

static int sc_gain(float *gain, dm_sc_engine *e, long x, float z, long *k)
{
    dm_timer_start("streamclust.gain");
    int rc = e->backend == DM_SC_CUDA ? dm_sc_gain_cuda(gain, e, x, z, k)
                                      : dm_sc_gain_cpu(gain, e, x, z, k);
    dm_timer_stop("streamclust.gain");
    return rc;
}

#define DM_SC_MAX_FL_ROUNDS 10000

/* Rodinia's pFL: rounds of iter gain calls over the shuffled feasible candidates until the
 * relative improvement of a round is at most e. */
static int sc_fl(float *cost_io, dm_sc_engine *e, int *feasible, int numfeasible, float z, long *k,
                 long iter, float eps, dm_sc_rng *rng)
{
    float cost = *cost_io;
    float change = cost;
    long rounds = 0;
    int rc = DM_OK;
    dm_timer_start("streamclust.fl");
    while (change / cost > 1.0 * eps) {
        if (++rounds > DM_SC_MAX_FL_ROUNDS) {
            fprintf(stderr, "streamclust: FL stopped after %d rounds (change %g, cost %g)\n",
                    DM_SC_MAX_FL_ROUNDS, (double)change, (double)cost);
            break;
        }
        change = 0.0f;
        sc_intshuffle(feasible, numfeasible, rng);
        for (long i = 0; i < iter; i++) {
            long x = i % numfeasible;
            float g;
            rc = sc_gain(&g, e, feasible[x], z, k);
            if (rc < 0) break;
            change += g;
        }
        if (rc < 0) break;
        cost -= change;
        e->stats.fl_rounds++;
    }
    dm_timer_stop("streamclust.fl");
    *cost_io = cost;
    return rc;
}

static int sc_set_centers_from_assign(dm_sc_engine *e)
{
    dm_sc_points *p = &e->pts;
    memset(e->is_center, 0, (size_t)p->num);
    for (long i = 0; i < p->num; i++) e->is_center[p->assign[i]] = 1;
    if (e->backend == DM_SC_CUDA) DM_TRY(dm_sc_cuda_set_centers(e));
    return DM_OK;
}

static int sc_fetch(dm_sc_engine *e)
{
    if (e->backend == DM_SC_CUDA && !e->host_valid) DM_TRY(dm_sc_cuda_fetch(e));
    e->host_valid = 1;
    return DM_OK;
}

static int sc_all_own_centres(dm_sc_local_result *res, dm_sc_engine *e, long k)
{
    dm_sc_points *p = &e->pts;
    for (long i = 0; i < p->num; i++) {
        p->assign[i] = i;
        p->cost[i] = 0.0f;
        e->is_center[i] = 1;
    }
    res->cost = 0.0f;
    res->k = k;
    e->host_valid = 1;
    return DM_OK;
}

static int sc_local_search(dm_sc_local_result *res, dm_sc_engine *e, long kmin, long kmax,
                           dm_sc_rng *rng);

int dm_sc_local_search(dm_sc_local_result *res, dm_sc_engine *e, long kmin, long kmax,
                       dm_sc_rng *rng)
{
    dm_timer_start("streamclust.local_search");
    int rc = sc_local_search(res, e, kmin, kmax, rng);
    dm_timer_stop("streamclust.local_search");
    return rc;
}

/* KMAX = 1: Rodinia's search cannot end with one centre (ITER k ln k = 0 gain calls at k = 1,
 * and closing the last far centre can cost more than hiz, z's upper bound). The cost over
 * points as centres, sum of w_i |x_i - c|^2 = sum of w_i |x_i - m|^2 + W |m - c|^2 with m the
 * weighted mean, is least at the point nearest m (ties: the lowest index): that point, exactly.
 * Host arrays, in point order (the same on both backends). */
static int sc_one_centre(dm_sc_local_result *res, dm_sc_engine *e, float z)
{
    dm_sc_points *p = &e->pts;
    const long n = p->num;
    const int dim = p->dim;
    double *m = dm_calloc((size_t)dim, sizeof *m);
    float *mf = dm_malloc((size_t)dim * sizeof *mf);
    if (!m || !mf) {
        dm_free(m);
        dm_free(mf);
        return DM_ERR(DM_ERR_NOMEM, "local search: a mean of %d dimensions", dim);
    }
    double wsum = 0.0;
    for (long i = 0; i < n; i++) {
        const float *x = dm_sc_point_coord(p, i);
        for (int d = 0; d < dim; d++) m[d] += (double)p->weight[i] * x[d];
        wsum += p->weight[i];
    }
    for (int d = 0; d < dim; d++) mf[d] = (float)(m[d] / wsum);
    long best = 0;
    float bd = dm_sc_dist(dm_sc_point_coord(p, 0), mf, dim);
    for (long i = 1; i < n; i++) {
        float d = dm_sc_dist(dm_sc_point_coord(p, i), mf, dim);
        if (d < bd) bd = d, best = i;
    }
    dm_free(m);
    dm_free(mf);
    const float *c = dm_sc_point_coord(p, best);
    float cost = 0.0f;
    for (long i = 0; i < n; i++) {
        p->assign[i] = best;
        p->cost[i] = dm_sc_dist(dm_sc_point_coord(p, i), c, dim) * p->weight[i];
        cost += p->cost[i];
    }
    memset(e->is_center, 0, (size_t)n);
    e->is_center[best] = 1;
    res->k = 1;
    res->z = z;
    res->cost = cost + z;
    res->gave_up = 0;
    e->host_valid = 1;
    return DM_OK;
}

static int sc_local_search(dm_sc_local_result *res, dm_sc_engine *e, long kmin, long kmax,
                           dm_sc_rng *rng)
{
    dm_sc_points *p = &e->pts;
    memset(res, 0, sizeof *res);
    if (kmin < 1 || kmin > kmax)
        return DM_ERR(DM_ERR_INVALID_ARG, "local search: kmin %ld kmax %ld", kmin, kmax);
    const long n = p->num;
    float hiz = 0.0f, loz = 0.0f, z;
    /* hiz: total weighted distance to the first point, summed in point order in float */
    if (e->backend == DM_SC_CUDA) {
        DM_TRY(dm_sc_cuda_dist_to(e, 0));
        for (long kk = 0; kk < n; kk++) hiz += p->cost[kk];
    } else {
        const float *c0 = dm_sc_point_coord(p, 0);
        for (long kk = 0; kk < n; kk++) hiz += dm_sc_dist(dm_sc_point_coord(p, kk), c0, p->dim) * p->weight[kk];
    }
    loz = 0.0f;
    z = (float)((hiz + loz) / 2.0);
    if (n <= kmax) {
        /* just return all points as facilities */
        return sc_all_own_centres(res, e, n);
    }
    if (hiz == 0.0f) {
        /* every point coincides with point 0 (or has weight 0): one centre; Rodinia loops forever */
        for (long i = 0; i < n; i++) {
            p->assign[i] = 0;
            p->cost[i] = 0.0f;
        }
        memset(e->is_center, 0, (size_t)n);
        e->is_center[0] = 1;
        res->k = 1;
        res->cost = 0.0f;
        res->gave_up = kmin > 1;
        e->host_valid = 1;
        return DM_OK;
    }
    if (kmax == 1) return sc_one_centre(res, e, z);
    long k = 0;
    float cost;
    DM_TRY(sc_shuffle(e, rng));
    DM_TRY(sc_speedy(&cost, e, z, &k, rng));
    int i = 0;
    /* give speedy SP chances to get at least kmin/2 facilities */
    while (k < kmin && i < DM_SC_SP) {
        DM_TRY(sc_speedy(&cost, e, z, &k, rng));
        i++;
    }
    /* if still not enough facilities, assume z is too high */
    int halvings = 0, speedy_gave_up = 0;
    while (k < kmin) {
        if (i >= DM_SC_SP) {
            hiz = z;
            z = (float)((hiz + loz) / 2.0);
            i = 0;
            if (++halvings > 200 || z <= 0.0f) {
                speedy_gave_up = 1;
                break;
            }
        }
        DM_TRY(sc_shuffle(e, rng));
        DM_TRY(sc_speedy(&cost, e, z, &k, rng));
        i++;
    }
    /* feasible centres, then the binary search on z */
    int *feasible = dm_malloc((size_t)n * sizeof *feasible);
    if (!feasible) return DM_ERR(DM_ERR_NOMEM, "local search: %ld points", n);
    int numfeasible = 0;
    dm_timer_start("streamclust.select_feasible");
    int rc = dm_sc_selectfeasible(feasible, &numfeasible, p, kmin, rng);
    dm_timer_stop("streamclust.select_feasible");
    if (rc == DM_OK) rc = sc_set_centers_from_assign(e);
    if (rc == DM_OK) {
        /* every centre speedy opened keeps itself (cost 0, strict < elsewhere): the centre set
         * of the assignments has exactly k members, which gain relies on */
        long kc = 0;
        for (long j = 0; j < n; j++) kc += e->is_center[j] != 0;
        DM_ASSERT(kc == k);
    }
    const long iter = (long)((float)(DM_SC_ITER * kmax) * logf((float)kmax));
    while (rc == DM_OK && !speedy_gave_up) {
        rc = sc_fl(&cost, e, feasible, numfeasible, z, &k, iter, 0.1f, rng);
        if (rc < 0) break;
        /* if number of centers seems good, try a more accurate FL */
        if ((k <= 1.1 * kmax && k >= 0.9 * kmin) || (k <= kmax + 2 && k >= kmin - 2)) {
            rc = sc_fl(&cost, e, feasible, numfeasible, z, &k, iter, 0.001f, rng);
            if (rc < 0) break;
        }
        if (k > kmax) {
            /* facilities too cheap: increase facility cost and up the cost accordingly */
            loz = z;
            z = (float)((hiz + loz) / 2.0);
            cost += (z - loz) * (float)k;
        }
        if (k < kmin) {
            /* facilities too expensive: decrease facility cost and reduce the cost accordingly */
            hiz = z;
            z = (float)((hiz + loz) / 2.0);
            cost += (z - hiz) * (float)k;
        }
        /* if k is good, return the result; if we're stuck, just give up and return what we have */
        if ((k <= kmax && k >= kmin) || (loz >= 0.999 * hiz)) break;
    }
    dm_free(feasible);
    DM_TRY(rc);
    DM_TRY(sc_fetch(e));
    res->cost = cost;
    res->z = z;
    res->k = k;
    res->gave_up = !(k >= kmin && k <= kmax);
    return DM_OK;
}

void dm_sc_contcenters(dm_sc_points *p)
{
    const int dim = p->dim;
    for (long i = 0; i < p->num; i++) {
        long a = p->assign[i];
        if (a == i) continue;
        /* compute relative weight of this point to the cluster */
        float relweight = p->weight[a] + p->weight[i];
        relweight = p->weight[i] / relweight;
        float *ca = p->coord + (size_t)p->slot[a] * dim;
        const float *ci = dm_sc_point_coord(p, i);
        for (int d = 0; d < dim; d++) {
            ca[d] *= 1.0 - relweight; /* in double, stored as float, as Rodinia */
            ca[d] += ci[d] * relweight;
        }
        p->weight[a] += p->weight[i];
    }
}

int dm_sc_copycenters(dm_sc_points *centres, const dm_sc_points *p)
{
    unsigned char *is_median = dm_calloc((size_t)p->num, 1);
    if (!is_median) return DM_ERR(DM_ERR_NOMEM, "copycenters");
    for (long i = 0; i < p->num; i++) is_median[p->assign[i]] = 1;
    long add = 0;
    for (long i = 0; i < p->num; i++) add += is_median[i];
    if (centres->num + add > centres->cap) {
        dm_free(is_median);
        return DM_ERR(DM_ERR_INVALID_ARG,
                      "CLUSTERSIZE %ld too small: %ld centres kept and %ld more from this chunk",
                      centres->cap, centres->num, add);
    }
    long k = centres->num;
    for (long i = 0; i < p->num; i++) {
        if (!is_median[i]) continue;
        memcpy(centres->coord + (size_t)k * p->dim, dm_sc_point_coord(p, i),
               (size_t)p->dim * sizeof(float));
        centres->slot[k] = k;
        centres->weight[k] = p->weight[i];
        centres->id[k] = p->id[i];
        centres->assign[k] = k;
        centres->cost[k] = 0.0f;
        k++;
    }
    centres->num = k;
    dm_free(is_median);
    return DM_OK;
}

/* ---------------------------------------------------------------- input stream */
int dm_sc_options_check(long *n_total, const dm_sc_options *o)
{
    *n_total = 0;
    if (o->kmin < 1) return DM_ERR(DM_ERR_INVALID_ARG, "KMIN must be >= 1 (got %ld)", o->kmin);
    if (o->kmin > o->kmax)
        return DM_ERR(DM_ERR_INVALID_ARG, "KMIN (%ld) > KMAX (%ld)", o->kmin, o->kmax);
    if (o->dim < 1) return DM_ERR(DM_ERR_INVALID_ARG, "DIM must be >= 1 (got %d)", o->dim);
    if (o->chunksize < 1)
        return DM_ERR(DM_ERR_INVALID_ARG, "CHUNKSIZE must be >= 1 (got %ld)", o->chunksize);
    if (o->clustersize < o->kmax)
        return DM_ERR(DM_ERR_INVALID_ARG,
                      "CLUSTERSIZE (%ld) too small for the centres kept: it must hold at least "
                      "KMAX (%ld) centres",
                      o->clustersize, o->kmax);
    if (o->n < 0) return DM_ERR(DM_ERR_INVALID_ARG, "N must be >= 0 (got %ld)", o->n);
    if (o->backend != DM_SC_CPU && o->backend != DM_SC_CUDA)
        return DM_ERR(DM_ERR_INVALID_ARG, "unknown backend %d", o->backend);
    if (o->points) {
        const dm_sc_points *p = o->points;
        if (o->input)
            return DM_ERR(DM_ERR_INVALID_ARG, "in-memory points and an input file (%s) are exclusive",
                          o->input);
        if (p->dim != o->dim)
            return DM_ERR(DM_ERR_INVALID_ARG, "DIM (%d) differs from the points' dimensions (%d)",
                          o->dim, p->dim);
        for (long i = 1; i < p->num; i++)
            if (p->id[i] != p->id[0] + i)
                return DM_ERR(DM_ERR_INVALID_ARG,
                              "in-memory points: id of point %ld is %ld, expected %ld (consecutive "
                              "stream positions)",
                              i, p->id[i], p->id[0] + i);
        *n_total = p->num;
        return DM_OK;
    }
    if (!o->input) {
        if (o->n == 0) return DM_ERR(DM_ERR_INVALID_ARG, "N = 0 needs an input file (--input FILE)");
        *n_total = o->n;
        return DM_OK;
    }
    struct stat st;
    FILE *f;
    DM_TRY(dm_open_input(&f, o->input, NULL)); /* a regular file, or a clear error (never waits on a FIFO) */
    int serr = fstat(fileno(f), &st) != 0 ? errno : 0;
    fclose(f);
    if (serr) return DM_ERR(DM_ERR_IO, "%s: %s", o->input, strerror(serr));
    const long long rec = (long long)o->dim * (long long)sizeof(float);
    if (st.st_size % rec != 0)
        return DM_ERR(DM_ERR_FORMAT,
                      "%s: DIM mismatch: %lld bytes is not a whole number of points of DIM = %d "
                      "floats (%lld bytes each)",
                      o->input, (long long)st.st_size, o->dim, rec);
    long long have = st.st_size / rec;
    if (have == 0) return DM_ERR(DM_ERR_FORMAT, "%s: the file holds no points", o->input);
    if (o->n > 0 && have < o->n)
        return DM_ERR(DM_ERR_FORMAT, "%s: file shorter than declared: %lld points of DIM = %d, N = %ld",
                      o->input, have, o->dim, o->n);
    *n_total = o->n > 0 ? o->n : (long)have;
    return DM_OK;
}

int dm_sc_stream_read(float *out, const dm_sc_options *o, long first, long count)
{
    const int dim = o->dim;
    if (o->points) {
        const dm_sc_points *p = o->points;
        const long base = p->num > 0 ? p->id[0] : 0;
        if (count < 0 || first < base || first - base > p->num - count)
            return DM_ERR(DM_ERR_INVALID_ARG,
                          "in-memory points: points %ld..%ld requested, this rank holds %ld..%ld",
                          first, first + count - 1, base, base + p->num - 1);
        const long at = first - base;
        long run = 0; /* rows stored one after another from slot[at] on (points_from_vectors') */
        while (run < count && p->slot[at + run] == p->slot[at] + run) run++;
        if (count > 0 && run == count) {
            /* one copy on the stage threads (the labelling copies into a staging buffer while the
             * device uploads the other) */
            dm_mem_copy_staged(out, dm_sc_point_coord(p, at), (size_t)count * dim * sizeof(float));
            return DM_OK;
        }
        for (long i = 0; i < count; i++)
            memcpy(out + (size_t)i * dim, dm_sc_point_coord(p, at + i), (size_t)dim * sizeof(float));
        return DM_OK;
    }
    if (!o->input) {
#pragma omp parallel
        {
            /* each thread jumps to its own range of the one srand48(1) sequence */
#pragma omp for schedule(static)
            for (long i = 0; i < count; i++) {
                dm_sc_rng r;
                dm_sc_rng_seed(&r, 1);
                dm_sc_rng_jump(&r, (uint64_t)(first + i) * (uint64_t)dim);
                float *row = out + (size_t)i * dim;
                for (int k = 0; k < dim; k++) row[k] = (float)dm_sc_rng_next(&r) / (float)INT_MAX;
            }
        }
        return DM_OK;
    }
    FILE *f;
    DM_TRY(dm_open_input(&f, o->input, NULL));
    int rc = DM_OK;
    if (fseeko(f, (off_t)first * dim * (off_t)sizeof(float), SEEK_SET) != 0) {
        rc = DM_ERR(DM_ERR_IO, "%s: seek to point %ld: %s", o->input, first, strerror(errno));
    } else {
        size_t got = fread(out, sizeof(float) * (size_t)dim, (size_t)count, f);
        if (got != (size_t)count)
            rc = DM_ERR(ferror(f) ? DM_ERR_IO : DM_ERR_FORMAT,
                        "%s: file shorter than declared: read %zu of points %ld..%ld (DIM = %d)",
                        o->input, got, first, first + count - 1, dim);
        /* the load refuses them too, but without the file's name */
        for (size_t i = 0; rc == DM_OK && i < (size_t)count * (size_t)dim; i++)
            if (!isfinite(out[i]))
                rc = DM_ERR(DM_ERR_FORMAT, "%s: coordinate %d of point %ld is not finite (%g)", o->input,
                            (int)(i % (size_t)dim), first + (long)(i / (size_t)dim), (double)out[i]);
    }
    fclose(f);
    return rc;
}

void dm_sc_hash_vectors(float *out, const uint64_t *row_off, const uint32_t *terms,
                        const float *values, long n_docs, int dim)
{
    /* documents in parallel (each writes its own row, zeroed and first touched by its thread);
     * a row's terms in row order, so the result does not depend on the threads. A power-of-two
     * dim (the default 256) takes the bucket with a mask, the same as the remainder but without
     * a division per term. */
    const uint64_t mask = (dim & (dim - 1)) == 0 ? (uint64_t)dim - 1 : 0;
#pragma omp parallel for schedule(dynamic, 1024)
    for (long d = 0; d < n_docs; d++) {
        float *row = out + (size_t)d * dim;
        memset(row, 0, (size_t)dim * sizeof(float));
        for (uint64_t j = row_off[d]; j < row_off[d + 1]; j++) {
            uint64_t h = (uint64_t)terms[j] + 0x9E3779B97F4A7C15ULL; /* splitmix64 */
            h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ULL;
            h = (h ^ (h >> 27)) * 0x94D049BB133111EBULL;
            h ^= h >> 31;
            float s = (h >> 63) ? -1.0f : 1.0f;
            row[mask ? h & mask : h % (uint64_t)dim] += s * values[j];
        }
    }
}

int dm_sc_points_from_vectors(dm_sc_points *out, const dm_vectors *v, int dim)
{
    memset(out, 0, sizeof *out);
    if (dim < 1) return DM_ERR(DM_ERR_INVALID_ARG, "DIM must be >= 1 (got %d)", dim);
    if (v->n_rows > (uint64_t)LONG_MAX / 2 || v->row_base > (uint64_t)LONG_MAX / 2)
        return DM_ERR(DM_ERR_INVALID_ARG, "streamclust: %llu documents from row %llu are too many",
                      (unsigned long long)v->n_rows, (unsigned long long)v->row_base);
    const long n = (long)v->n_rows;
    DM_TRY(dm_sc_points_init(out, n > 0 ? n : 1, dim));
    dm_sc_hash_vectors(out->coord, v->row_off, v->col, v->val, n, dim);
    dm_sc_points_reset(out, n);
    for (long i = 0; i < n; i++) out->id[i] = (long)v->row_base + i;
    return DM_OK;
}

/* ---------------------------------------------------------------- the MPI run */
void dm_sc_result_free(dm_sc_result *r)
{
    if (!r) return;
    dm_free(r->centres);
    dm_free(r->weights);
    dm_free(r->centre_ids);
    dm_free(r->labels);
    dm_free(r->dist);
    memset(r, 0, sizeof *r);
}

#define DM_SC_MPI_TRY(call)                                                                        \
    do {                                                                                           \
        int mpi_rc_ = (call);                                                                      \
        if (mpi_rc_ != MPI_SUCCESS) return DM_ERR(DM_ERR_MPI, "%s failed (%d)", #call, mpi_rc_);   \
    } while (0)

/* Sends (to peer), receives (from peer) or broadcasts (from rank 0) count points of dim floats
 * as count records of one MPI type: MPI's int counts of floats would overflow at count x dim >=
 * 2^31, counts of points stay below 2^31. */
enum { SC_SEND, SC_RECV, SC_BCAST };
static int sc_points_mpi(float *coord, long count, int dim, int op, int peer, int tag, MPI_Comm comm)
{
    MPI_Datatype pt;
    if (MPI_Type_contiguous(dim, MPI_FLOAT, &pt) != MPI_SUCCESS || MPI_Type_commit(&pt) != MPI_SUCCESS)
        return DM_ERR(DM_ERR_MPI, "streamclust: MPI point type of %d floats failed", dim);
    int mrc = op == SC_SEND   ? MPI_Send(coord, (int)count, pt, peer, tag, comm)
              : op == SC_RECV ? MPI_Recv(coord, (int)count, pt, peer, tag, comm, MPI_STATUS_IGNORE)
                              : MPI_Bcast(coord, (int)count, pt, 0, comm);
    MPI_Type_free(&pt);
    return mrc == MPI_SUCCESS ? DM_OK : DM_ERR(DM_ERR_MPI, "streamclust: MPI transfer of %ld points failed (%d)", count, mrc);
}

/* Clusters the weighted point set `set` (compacted, slot = index) into kmin..kmax centres with a
 * fresh engine and replaces it by its centres (after contcenters). */
static int sc_recluster(dm_sc_points *set, const dm_sc_options *o, dm_sc_rng *rng,
                        int *gave_up, dm_sc_stats *stats)
{
    dm_sc_engine *e = NULL;
    DM_TRY(dm_sc_engine_create(&e, o->backend, set->num, set->dim));
    dm_sc_points *p = dm_sc_engine_points(e);
    for (long i = 0; i < set->num; i++) {
        memcpy(p->coord + (size_t)i * set->dim, dm_sc_point_coord(set, i),
               (size_t)set->dim * sizeof(float));
        p->slot[i] = i;
        p->weight[i] = set->weight[i];
        p->id[i] = set->id[i];
        p->cost[i] = 0.0f;
        p->assign[i] = 0;
    }
    int rc = dm_sc_engine_load(e, set->num);
    dm_sc_local_result lr;
    if (rc == DM_OK) rc = dm_sc_local_search(&lr, e, o->kmin, o->kmax, rng);
    if (rc == DM_OK) {
        if (lr.gave_up) *gave_up = 1;
        dm_sc_contcenters(p);
        set->num = 0;
        rc = dm_sc_copycenters(set, p);
        if (stats) {
            dm_sc_stats s;
            dm_sc_engine_stats(e, &s);
            stats->gain_calls += s.gain_calls;
            stats->gain_opens += s.gain_opens;
            stats->speedy_calls += s.speedy_calls;
            stats->fl_rounds += s.fl_rounds;
        }
    }
    dm_sc_engine_destroy(e);
    return rc;
}

/* A set goes up the tree as a header {points, status}, then, once the receiver has made room for
 * it (its reply), the coordinates, weights and ids. A sender that failed sends only its status; a
 * receiver that failed, or cannot grow its set, replies so and the sender stops: neither is left
 * waiting for the other. Returns the sender's own status (a receiver's failure is agreed later). */
static int sc_send_set(const dm_sc_points *s, int status, int to, MPI_Comm comm)
{
    if (status == DM_OK && s->num > INT_MAX) /* the receiver learns it from the header */
        status = DM_ERR(DM_ERR_UNSUPPORTED, "streamclust: %ld centres on one rank (at most 2^31 - 1)", s->num);
    long hdr[2] = {status < 0 ? 0 : s->num, status};
    DM_SC_MPI_TRY(MPI_Send(hdr, 2, MPI_LONG, to, 701, comm));
    if (status < 0 || s->num == 0) return status;
    int room = DM_OK;
    DM_SC_MPI_TRY(MPI_Recv(&room, 1, MPI_INT, to, 705, comm, MPI_STATUS_IGNORE));
    if (room < 0) return DM_OK;
    DM_TRY(sc_points_mpi(s->coord, s->num, s->dim, SC_SEND, to, 702, comm));
    DM_SC_MPI_TRY(MPI_Send(s->weight, (int)s->num, MPI_FLOAT, to, 703, comm));
    DM_SC_MPI_TRY(MPI_Send(s->id, (int)s->num, MPI_LONG, to, 704, comm));
    return DM_OK;
}

/* The receiving side of sc_send_set: appends the sender's points to s. status: this rank's so far
 * (a failed rank still answers its sender). Returns it, or the sender's failure, or its own. */
static int sc_recv_append(dm_sc_points *s, int status, int from, MPI_Comm comm)
{
    long hdr[2];
    DM_SC_MPI_TRY(MPI_Recv(hdr, 2, MPI_LONG, from, 701, comm, MPI_STATUS_IGNORE));
    long m = hdr[0];
    if (hdr[1] < 0) {
        if (status < 0) return status;
        DM_ERR((int)hdr[1], "streamclust: rank %d failed (%s)", from, dm_status_name((int)hdr[1]));
        dm_error_mark_remote();
        return (int)hdr[1];
    }
    if (m == 0) return status;
    int rc = status;
    if (rc == DM_OK && s->num + m > INT_MAX)
        rc = DM_ERR(DM_ERR_UNSUPPORTED, "streamclust: %ld centres merged on one rank (at most 2^31 - 1)", s->num + m);
    if (rc == DM_OK) rc = sc_points_grow(s, s->num + m);
    DM_SC_MPI_TRY(MPI_Send(&rc, 1, MPI_INT, from, 705, comm));
    if (rc < 0) return rc;
    long k = s->num;
    DM_TRY(sc_points_mpi(s->coord + (size_t)k * s->dim, m, s->dim, SC_RECV, from, 702, comm));
    DM_SC_MPI_TRY(MPI_Recv(s->weight + k, (int)m, MPI_FLOAT, from, 703, comm, MPI_STATUS_IGNORE));
    DM_SC_MPI_TRY(MPI_Recv(s->id + k, (int)m, MPI_LONG, from, 704, comm, MPI_STATUS_IGNORE));
    for (long i = k; i < k + m; i++) {
        s->slot[i] = i;
        s->assign[i] = i;
        s->cost[i] = 0.0f;
    }
    s->num = k + m;
    return DM_OK;
}

/* Clusters this rank's points [first, last) of the stream chunk by chunk into centres. */
static int sc_run_local(dm_sc_result *res, dm_sc_points *centres, const dm_sc_options *o,
                        long first, long last, dm_sc_rng *rng)
{
    res->first_local = first;
    res->n_local = last - first;
    long cap = o->chunksize < res->n_local ? o->chunksize : res->n_local;
    if (cap < 1) return DM_OK; /* more ranks than points */
    if (cap > INT_MAX)
        return DM_ERR(DM_ERR_UNSUPPORTED, "streamclust: a chunk of %ld points (CHUNKSIZE %ld, %ld "
                      "points on this rank): at most 2^31 - 1 points a chunk; give a smaller CHUNKSIZE",
                      cap, o->chunksize, res->n_local);
    dm_sc_engine *e = NULL;
    int rc0 = dm_sc_engine_create(&e, o->backend, cap, o->dim);
    if (rc0 == DM_ERR_NOMEM)
        return DM_ERR(DM_ERR_NOMEM, "streamclust: no memory for a chunk of CHUNKSIZE (%ld) points of DIM (%d): %.3g GB",
                      cap, o->dim, sc_points_gb(cap, o->dim));
    DM_TRY(rc0);
    dm_sc_points *p = dm_sc_engine_points(e);
    int rc = DM_OK;
    for (long off = first; off < last && rc == DM_OK; off += o->chunksize) {
        long m = last - off < o->chunksize ? last - off : o->chunksize;
        dm_timer_start("streamclust.read");
        rc = dm_sc_stream_read(p->coord, o, off, m);
        dm_timer_stop("streamclust.read");
        if (rc < 0) break;
        dm_sc_points_reset(p, m);
        for (long i = 0; i < m; i++) p->id[i] = off + i;
        rc = dm_sc_engine_load(e, m);
        dm_sc_local_result lr;
        if (rc == DM_OK) rc = dm_sc_local_search(&lr, e, o->kmin, o->kmax, rng);
        if (rc < 0) break;
        if (lr.gave_up) res->gave_up = 1;
        if (res->chunks == 0) res->chunk_cost_first = lr.cost;
        res->chunks++;
        dm_timer_start("streamclust.copies");
        dm_sc_contcenters(p);
        rc = dm_sc_copycenters(centres, p);
        dm_timer_stop("streamclust.copies");
    }
    dm_sc_engine_stats(e, &res->stats);
    dm_sc_engine_destroy(e);
    return rc;
}

/* The labelling's input: this rank's points of the stream from first on (dm_sc_read_fn). */
typedef struct sc_stream_part {
    const dm_sc_options *o;
    long first;
} sc_stream_part;

static int sc_read_part(float *out, void *arg, long first, long count)
{
    const sc_stream_part *s = arg;
    return dm_sc_stream_read(out, s->o, s->first + first, count);
}

/* The CPU backend's labelling of res's points (res->labels, res->dist) by res->centres, chunks of
 * cap points. */
static int sc_label_cpu(dm_sc_result *res, const dm_sc_options *o, long cap)
{
    float *buf = dm_malloc((size_t)cap * o->dim * sizeof(float));
    if (!buf) return DM_ERR(DM_ERR_NOMEM, "streamclust: labelling buffer");
    int rc = DM_OK;
    for (long off = 0; off < res->n_local && rc == DM_OK; off += cap) {
        long m = res->n_local - off < cap ? res->n_local - off : cap;
        rc = dm_sc_stream_read(buf, o, res->first_local + off, m);
        if (rc == DM_OK)
            rc = dm_sc_assign_cpu(res->labels + off, res->dist + off, buf, m, res->centres, res->k, o->dim);
    }
    dm_free(buf);
    return rc;
}

static int sc_run(dm_sc_result *res, const dm_sc_options *o, MPI_Comm comm);

int dm_sc_run(dm_sc_result *res, const dm_sc_options *o, void *comm_ptr)
{
    memset(res, 0, sizeof *res);
    int rc = sc_run(res, o, comm_ptr ? *(MPI_Comm *)comm_ptr : MPI_COMM_WORLD);
    if (rc < 0) dm_sc_result_free(res); /* a failed run leaves nothing to free */
    return rc;
}

/* dm_sc_run. Every failure is agreed over comm before the next collective (or, inside the tree,
 * passed to the partner: sc_send_set), so that all ranks return the same status. */
static int sc_run(dm_sc_result *res, const dm_sc_options *o, MPI_Comm comm)
{
    int rank, size;
    DM_SC_MPI_TRY(MPI_Comm_rank(comm, &rank));
    DM_SC_MPI_TRY(MPI_Comm_size(comm, &size));
    long n_total = 0;
    int rc = dm_sc_options_check(&n_total, o);
    long first = 0, last = 0;
    if (o->points) {
        /* each rank checked its own points: agree, then the stream is their concatenation */
        DM_TRY(dm_comm_agree(comm, rc));
        long mine = n_total;
        DM_SC_MPI_TRY(MPI_Allreduce(&mine, &n_total, 1, MPI_LONG, MPI_SUM, comm));
        DM_SC_MPI_TRY(MPI_Exscan(&mine, &first, 1, MPI_LONG, MPI_SUM, comm));
        if (rank == 0) first = 0; /* MPI_Exscan leaves rank 0's result undefined */
        last = first + mine;
        if (mine > 0 && o->points->id[0] != first) rc = DM_ERR(DM_ERR_INVALID_ARG,
                "in-memory points: rank %d's ids start at %ld, expected %ld (the points of the "
                "lower ranks)", rank, o->points->id[0], first);
        DM_TRY(dm_comm_agree(comm, rc));
        if (n_total < 1) return DM_ERR(DM_ERR_INVALID_ARG, "streamclust: no points on any rank");
    } else {
        /* agreed: the file is checked on every rank, and a rank can fail alone (a file that one
         * node cannot read, or that changed in between); it returned while the others went on
         * to the collectives */
        DM_TRY(dm_comm_agree(comm, rc));
        /* N = 0 takes the file's points, which each rank counted in its own file: one path that
         * names files of other sizes on some ranks (node-local copies) clustered a stream that
         * no file holds, exit 0 (a shorter file's points missing from the outputs) */
        if (o->input && o->n == 0) { /* the same options on every rank */
            uint64_t mine = (uint64_t)n_total, r0 = 0;
            DM_TRY(dm_comm_rank0(comm, &mine, &r0, 1));
            if (mine != r0)
                rc = DM_ERR(DM_ERR_FORMAT, "%s: %llu points of DIM = %d on rank %d, %llu on rank 0: every rank "
                            "must read the same file", o->input, (unsigned long long)mine, o->dim, rank,
                            (unsigned long long)r0);
            DM_TRY(dm_comm_agree(comm, rc));
        }
        /* in 128 bits: N x rank overflows a long from N = 2^63 / P on */
        first = (long)(((__int128)n_total * rank) / size);
        last = (long)(((__int128)n_total * (rank + 1)) / size);
    }
    res->dim = o->dim;

    dm_sc_rng rng;
    dm_sc_rng_seed(&rng, 1);
    dm_sc_rng_jump(&rng, (uint64_t)n_total * (uint64_t)o->dim + ((uint64_t)rank << 40));

    dm_sc_points centres;
    rc = dm_sc_points_init(&centres, o->clustersize, o->dim);
    if (rc == DM_ERR_NOMEM)
        rc = DM_ERR(DM_ERR_NOMEM, "streamclust: no memory for CLUSTERSIZE (%ld) centres of DIM (%d): %.3g GB",
                    o->clustersize, o->dim, sc_points_gb(o->clustersize, o->dim));
    if (rc == DM_OK) rc = sc_run_local(res, &centres, o, first, last, &rng);
    /* agree on failure before the tree so that nobody waits for a dead partner */
    rc = dm_comm_agree(comm, rc);
    if (rc < 0) {
        dm_sc_points_free(&centres);
        return rc;
    }

    dm_timer_start("streamclust.merge");
    /* binary tree: at step s, rank r with r % 2s == s sends to r - s; a rank that failed on the way
     * still meets its partners (sc_send_set) */
    for (int step = 1; step < size; step *= 2) {
        if (rank % (2 * step) == step) {
            rc = sc_send_set(&centres, rc, rank - step, comm);
            break;
        }
        if (rank % (2 * step) == 0 && rank + step < size) {
            rc = sc_recv_append(&centres, rc, rank + step, comm);
            /* re-cluster a union that outgrew CLUSTERSIZE, except the root's last merge, which
             * the final clustering handles */
            if (rc == DM_OK && centres.num > o->clustersize && !(rank == 0 && 2 * step >= size))
                rc = sc_recluster(&centres, o, &rng, &res->gave_up, &res->stats);
        }
    }
    dm_timer_stop("streamclust.merge");
    long kept = 0;
    if (rank == 0) kept = centres.num;
    /* final clustering on rank 0 */
    if (rank == 0 && rc == DM_OK) {
        if (centres.num < 1) {
            rc = DM_ERR(DM_ERR_INVALID_ARG, "streamclust: no centres to cluster");
        } else {
            rc = sc_recluster(&centres, o, &rng, &res->gave_up, &res->stats);
        }
    }
    rc = dm_comm_agree(comm, rc);
    if (rc < 0) {
        dm_sc_points_free(&centres);
        return rc;
    }
    long k = rank == 0 ? centres.num : 0;
    DM_SC_MPI_TRY(MPI_Bcast(&k, 1, MPI_LONG, 0, comm));
    DM_SC_MPI_TRY(MPI_Bcast(&kept, 1, MPI_LONG, 0, comm));
    res->k = k;
    res->kept = kept;
    res->centres = dm_malloc((size_t)k * o->dim * sizeof(float));
    res->weights = dm_malloc((size_t)k * sizeof(float));
    res->centre_ids = dm_malloc((size_t)k * sizeof(long));
    res->labels = dm_malloc((size_t)(res->n_local > 0 ? res->n_local : 1) * sizeof(int));
    res->dist = dm_malloc((size_t)(res->n_local > 0 ? res->n_local : 1) * sizeof(float));
    if (!res->centres || !res->weights || !res->centre_ids || !res->labels || !res->dist)
        rc = DM_ERR(DM_ERR_NOMEM, "streamclust: %ld centres", k);
    if (rank == 0 && rc == DM_OK) {
        memcpy(res->centres, centres.coord, (size_t)k * o->dim * sizeof(float));
        memcpy(res->weights, centres.weight, (size_t)k * sizeof(float));
        memcpy(res->centre_ids, centres.id, (size_t)k * sizeof(long));
    }
    dm_sc_points_free(&centres);
    DM_TRY(dm_comm_agree(comm, rc)); /* every rank has room for the centres before the broadcasts */
    DM_TRY(sc_points_mpi(res->centres, k, o->dim, SC_BCAST, 0, 0, comm));
    DM_SC_MPI_TRY(MPI_Bcast(res->weights, (int)k, MPI_FLOAT, 0, comm));
    DM_SC_MPI_TRY(MPI_Bcast(res->centre_ids, (int)k, MPI_LONG, 0, comm));
    int gu = res->gave_up, gu_all = 0;
    DM_SC_MPI_TRY(MPI_Allreduce(&gu, &gu_all, 1, MPI_INT, MPI_MAX, comm));
    /* fewer points than kmin in all: every one a centre, and still fewer than asked for */
    res->gave_up = gu_all || k < o->kmin || k > o->kmax;
    long cnt[4] = {res->stats.gain_calls, res->stats.gain_opens, res->stats.speedy_calls, res->stats.fl_rounds};
    long cnt_all[4];
    unsigned long long wb = res->stats.work_bytes, wb_max = 0;
    DM_SC_MPI_TRY(MPI_Allreduce(cnt, cnt_all, 4, MPI_LONG, MPI_SUM, comm));
    DM_SC_MPI_TRY(MPI_Allreduce(&wb, &wb_max, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, comm));
    res->stats_all = res->stats;
    res->stats_all.gain_calls = cnt_all[0], res->stats_all.gain_opens = cnt_all[1];
    res->stats_all.speedy_calls = cnt_all[2], res->stats_all.fl_rounds = cnt_all[3];
    res->stats_all.work_bytes = (size_t)wb_max;

    /* label this rank's points by the nearest final centre, chunk by chunk */
    dm_timer_start("streamclust.assign");
    long cap = o->chunksize < res->n_local ? o->chunksize : res->n_local;
    if (cap > 0) {
        if (o->backend == DM_SC_CUDA) {
            sc_stream_part part = {o, res->first_local};
            rc = dm_sc_label_cuda(res->labels, res->dist, res->n_local, cap, res->centres, k, o->dim,
                                  1, sc_read_part, &part);
        } else {
            rc = sc_label_cpu(res, o, cap);
        }
    }
    /* in point order, whatever the chunks: the same sum on both backends and any chunking */
    double local_cost = 0.0;
    for (long i = 0; i < res->n_local && rc == DM_OK; i++) local_cost += res->dist[i];
    dm_timer_stop("streamclust.assign");
    DM_TRY(dm_comm_agree(comm, rc));
    DM_SC_MPI_TRY(MPI_Allreduce(&local_cost, &res->total_cost, 1, MPI_DOUBLE, MPI_SUM, comm));
    return DM_OK;
}

#if !DM_HAVE_CUDA
/* CPU-only build: the CUDA backend reports itself unsupported. */
#define DM_SC_NO_CUDA return DM_ERR(DM_ERR_UNSUPPORTED, "streamclust: built without CUDA")
int dm_sc_gain_cuda(float *gain, dm_sc_engine *e, long x, float z, long *numcenters) { DM_SC_NO_CUDA; }
int dm_sc_speedy_cuda(float *cost, dm_sc_engine *e, float z, long *kcenter, dm_sc_rng *rng) { DM_SC_NO_CUDA; }
int dm_sc_assign_cuda(int *label, float *dist, const float *pts, long n, const float *centres,
                      long k, int dim) { DM_SC_NO_CUDA; }
int dm_sc_label_cuda(int *label, float *dist, long n, long cap, const float *centres, long k,
                     int dim, int pin, dm_sc_read_fn *read, void *arg) { DM_SC_NO_CUDA; }
int dm_sc_cuda_create(dm_sc_engine *e) { DM_SC_NO_CUDA; }
void dm_sc_cuda_destroy(dm_sc_engine *e) { (void)e; }
int dm_sc_cuda_load(dm_sc_engine *e) { DM_SC_NO_CUDA; }
int dm_sc_cuda_permuted(dm_sc_engine *e) { DM_SC_NO_CUDA; }
int dm_sc_cuda_dist_to(dm_sc_engine *e, long c) { DM_SC_NO_CUDA; }
int dm_sc_cuda_set_centers(dm_sc_engine *e) { DM_SC_NO_CUDA; }
int dm_sc_cuda_fetch(dm_sc_engine *e) { DM_SC_NO_CUDA; }
int dm_sc_tune_register(void) { return DM_OK; }
int dm_sc_cuda_gain_instances(void) { return 0; }
const char *dm_sc_cuda_gain_instance_name(int i, char *buf, size_t len)
{
    (void)i;
    if (len) buf[0] = 0;
    return buf;
}
int dm_sc_cuda_force_gain_instance(int i) { DM_SC_NO_CUDA; }
#endif
