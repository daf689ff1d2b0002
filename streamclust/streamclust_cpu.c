/* CPU reference backend of streamclust: speedy, gain and the nearest-centre assignment, OpenMP
 * parallel over points where the result cannot depend on the thread count (independent points,
 * exact integer sums). Reference: Rodinia streamcluster_cuda_cpu.cpp pspeedy and
 * streamcluster_cuda.cu pgain (kernel_compute_cost + the serial part), PARSEC pgain. */
#include <limits.h>
#include <omp.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "streamclust/streamclust.h"
#include "streamclust/streamclust_impl.h"

/* Rodinia's pspeedy (one thread): the draw for point i happens after the updates of all centres
 * opened before i. */
int dm_sc_speedy_cpu(float *cost, dm_sc_engine *e, float z, long *kcenter, dm_sc_rng *rng)
{
    dm_sc_points *p = &e->pts;
    const long n = p->num;
    const int dim = p->dim;
    const float *c0 = dm_sc_point_coord(p, 0);
#pragma omp parallel for schedule(static)
    for (long k = 0; k < n; k++) {
        float d = dm_sc_dist(dm_sc_point_coord(p, k), c0, dim);
        p->cost[k] = d * p->weight[k];
        p->assign[k] = 0;
    }
    *kcenter = 1;
    for (long i = 1; i < n; i++) {
        int to_open = ((float)dm_sc_rng_next(rng) / (float)INT_MAX) < (p->cost[i] / z);
        if (!to_open) continue;
        (*kcenter)++;
        const float *ci = dm_sc_point_coord(p, i);
#pragma omp parallel for schedule(static)
        for (long k = 0; k < n; k++) {
            float d = dm_sc_dist(ci, dm_sc_point_coord(p, k), dim);
            if (d * p->weight[k] < p->cost[k]) {
                p->cost[k] = d * p->weight[k];
                p->assign[k] = i;
            }
        }
    }
    float total = 0.0f;
    for (long k = 0; k < n; k++) total += p->cost[k];
    *cost = z * (float)(*kcenter) + total;
    e->host_valid = 1;
    e->stats.speedy_calls++;
    return DM_OK;
}

/* Room for the partial sums of `threads` threads of K+1 centres each (engine scratch, grown only
 * when K outgrows the centre arrays or the thread count rises: not on every gain call). */
static int sc_reserve_lower(dm_sc_engine *e, int threads)
{
    if (threads <= e->lower_threads && e->lower_stride >= e->sums_cap) return DM_OK;
    int t = threads > e->lower_threads ? threads : e->lower_threads;
    int64_t *l = dm_malloc((size_t)t * (size_t)e->sums_cap * sizeof *l);
    if (!l) return DM_ERR(DM_ERR_NOMEM, "gain: %d threads x %ld centres", t, e->sums_cap);
    dm_free(e->lower);
    e->lower = l;
    e->lower_stride = e->sums_cap;
    e->lower_threads = t;
    return DM_OK;
}

int dm_sc_gain_cpu(float *gain, dm_sc_engine *e, long x, float z, long *numcenters)
{
    dm_sc_points *p = &e->pts;
    const long n = p->num;
    const int dim = p->dim;
    if (x < 0 || x >= n) return DM_ERR(DM_ERR_INVALID_ARG, "gain: candidate %ld outside [0, %ld)", x, n);
    /* centre-index table, rebuilt on every call as Rodinia does */
    long K = 0;
    for (long i = 0; i < n; i++)
        if (e->is_center[i]) e->center_table[i] = (int)K++;
    DM_ASSERT(K == *numcenters);
    DM_TRY(dm_sc_engine_reserve(e, K));
    /* a parallel region has at most omp_get_max_threads() threads (no nesting here) */
    DM_TRY(sc_reserve_lower(e, omp_get_max_threads()));
    const double scale = e->scale;
    const float *cx = dm_sc_point_coord(p, x);
    int64_t *sums = e->sums;
    memset(sums, 0, (size_t)(K + 1) * sizeof *sums);
#pragma omp parallel
    {
        int64_t *lower = e->lower + (size_t)omp_get_thread_num() * (size_t)e->lower_stride;
        memset(lower, 0, (size_t)(K + 1) * sizeof *lower);
#pragma omp for schedule(static)
        for (long i = 0; i < n; i++) {
            float x_cost = dm_sc_dist(dm_sc_point_coord(p, i), cx, dim) * p->weight[i];
            float cur = p->cost[i];
            e->xcost[i] = x_cost;
            if (x_cost < cur) {
                e->sw[i] = 1;
                lower[K] += dm_sc_fix(x_cost - cur, scale);
            } else {
                e->sw[i] = 0;
                lower[e->center_table[p->assign[i]]] += dm_sc_fix(cur - x_cost, scale);
            }
        }
#pragma omp critical(dm_sc_gain_reduce)
        for (long c = 0; c <= K; c++) sums[c] += lower[c];
    }
    e->stats.gain_calls++;
    long nclose = 0;
    if (!dm_sc_decide(gain, &nclose, e->close, sums, K, z, scale)) return DM_OK;
    /* x opens: move the points that switch or whose centre closes */
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        if (e->sw[i] || e->close[e->center_table[p->assign[i]]]) {
            p->cost[i] = e->xcost[i];
            p->assign[i] = x;
        }
    }
    for (long i = 0; i < n; i++)
        if (e->is_center[i] && e->close[e->center_table[i]]) e->is_center[i] = 0;
    e->is_center[x] = 1;
    *numcenters = *numcenters + 1 - nclose;
    e->stats.gain_opens++;
    return DM_OK;
}

int dm_sc_assign_cpu(int *label, float *dist, const float *pts, long n, const float *centres,
                     long k, int dim)
{
    if (k < 1) return DM_ERR(DM_ERR_INVALID_ARG, "assign: no centres");
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) {
        const float *pi = pts + (size_t)i * (size_t)dim;
        int best = 0;
        float bd = dm_sc_dist(pi, centres, dim);
        for (long c = 1; c < k; c++) {
            float d = dm_sc_dist(pi, centres + (size_t)c * (size_t)dim, dim);
            if (d < bd) {
                bd = d;
                best = (int)c;
            }
        }
        label[i] = best;
        dist[i] = bd;
    }
    return DM_OK;
}
