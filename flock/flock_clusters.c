/* Clusters at the end of a flock run (DESIGN.md section 7, "Clusters"): connected components of
 * the graph "within r and similarity >= T", found per rank with union-find over the edges of the
 * backend (dm_flock_edges_*), merged across slices by propagating the smallest document index of
 * each component through the halo until no label changes; components smaller than min_size are
 * noise, attached to the cluster of their nearest clustered neighbour, or attached to the cluster
 * with the most cosine-similar centroid (exact fixed-point sums; see attach_centroid; the CUDA
 * backend sums and attaches on the device, dm_flock_centroid_sums_cuda and dm_flock_attach_cuda,
 * with the same bits as the host's centroid_local and dm_flock_attach_cpu); optionally
 * clusters are then merged by centroid similarity (merge_centroid) and refined by Lloyd steps
 * (refine_centroid); clusters are numbered by their smallest document index (the refinement keeps
 * their order and drops emptied clusters), so the labels do not depend on the number of ranks.
 * Reference: none beyond the design; tests/flock check components spanning slices and ranks. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/status.h"
#include "common/timer.h"
#include "flock/flock_impl.h"

static uint32_t uf_find(uint32_t *parent, uint32_t i)
{
    while (parent[i] != i) {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    return i;
}

static void uf_union(uint32_t *parent, uint32_t a, uint32_t b)
{
    a = uf_find(parent, a);
    b = uf_find(parent, b);
    if (a == b) return;
    if (a < b) parent[b] = a;
    else parent[a] = b;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sends, per neighbour, vals[i] of the own boids in that neighbour's halo (the same selection
 * and order as the halo message), and returns the values of this rank's halo boids in halo store
 * order (the concatenation of the neighbours' messages in neighbour order). */
static int halo_values(dm_flock_sim *s, const uint64_t *vals, uint64_t *halo_vals, int tag)
{
    double W, H;
    dm_flock_plane_at(s, s->iteration, &W, &H);
    char *send[2] = {NULL, NULL}, *recv[2] = {NULL, NULL};
    uint64_t size[2] = {0, 0}, rsize[2] = {0, 0};
    int rc = DM_OK;
    for (int k = 0; k < s->nb.n && rc == DM_OK; k++) {
        size_t cnt = 0;
        for (size_t i = 0; i < s->own.n; i++)
            if (dm_flock_halo_dirs(s, s->own.y[i], H) & s->nb.dir_mask[k]) cnt++;
        uint64_t *b = dm_malloc(8 * (cnt ? cnt : 1));
        if (!b) {
            rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
            break;
        }
        cnt = 0;
        for (size_t i = 0; i < s->own.n; i++)
            if (dm_flock_halo_dirs(s, s->own.y[i], H) & s->nb.dir_mask[k]) b[cnt++] = vals[i];
        send[k] = (char *)b;
        size[k] = 8 * cnt;
    }
    dm_flock_xchg x;
    dm_flock_buf rbuf[2] = {{NULL, 0}, {NULL, 0}};
    int rb = dm_flock_xchg_begin(&x, s->comm, &s->nb, tag, (const char *const *)send, size, rbuf, rc);
    int re = dm_flock_xchg_end(&x, recv, rsize);
    if (rc == DM_OK) rc = rb != DM_OK ? rb : re;
    size_t at = 0;
    for (int k = 0; k < s->nb.n; k++) {
        if (rc == DM_OK) {
            if (at + rsize[k] / 8 > s->halo.n) rc = DM_ERR(DM_ERR_FORMAT, "flock: halo label message too long");
            else if (rsize[k]) memcpy(halo_vals + at, recv[k], rsize[k]);
            at += rsize[k] / 8;
        }
        dm_free(send[k]);
        dm_flock_buf_free(&rbuf[k]);
    }
    if (rc == DM_OK && at != s->halo.n) rc = DM_ERR(DM_ERR_FORMAT, "flock: halo label count mismatch");
    return rc;
}

/* Every rank's n values concatenated in rank order, on every rank: *all (dm_free) holds *total.
 * rc is this rank's status so far; the ranks agree on it first (a failed rank gathers nothing).
 * Collective. */
static int gather_all_u64(dm_flock_sim *s, int rc, const uint64_t *mine, size_t n, uint64_t **all, size_t *total)
{
    *all = NULL;
    *total = 0;
    /* nothing allocated after a failure: a failed allocation would record an error of this rank's
     * over the failure it learnt from another (the ranks then agree on the wrong root cause) */
    int *counts = NULL, *displs = NULL;
    if (rc == DM_OK) {
        counts = dm_malloc(sizeof *counts * (size_t)s->size);
        displs = dm_malloc(sizeof *displs * (size_t)s->size);
        if (!counts || !displs) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    }
    if (rc == DM_OK && n > (size_t)INT32_MAX) rc = DM_ERR(DM_ERR_INVALID_ARG, "flock: %zu values to gather from one rank", n);
    rc = dm_ctx_agree(s->ctx, rc);
    uint64_t tot = 0;
    if (rc == DM_OK) {
        int c = (int)n;
        MPI_Allgather(&c, 1, MPI_INT, counts, 1, MPI_INT, s->comm);
        for (int q = 0; q < s->size; q++) {
            displs[q] = (int)tot;
            tot += (uint64_t)counts[q];
        }
        if (tot > (uint64_t)INT32_MAX) {
            rc = DM_ERR(DM_ERR_INVALID_ARG, "flock: %llu values to gather", (unsigned long long)tot);
        } else {
            *all = dm_malloc(8 * (tot ? tot : 1));
            if (!*all) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory gathering %llu values", (unsigned long long)tot);
        }
    }
    rc = dm_ctx_agree(s->ctx, rc);
    if (rc == DM_OK) {
        MPI_Allgatherv(mine, (int)n, MPI_UINT64_T, *all, counts, displs, MPI_UINT64_T, s->comm);
        *total = (size_t)tot;
    } else {
        dm_free(*all);
        *all = NULL;
    }
    dm_free(counts);
    dm_free(displs);
    return rc;
}

static int cmp_pair(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Sorts n (a, b) pairs and drops repeats; returns the distinct count. */
static size_t pairs_uniq(uint64_t *p, size_t n)
{
    if (n) qsort(p, n, 2 * sizeof *p, cmp_pair);
    size_t m = 0;
    for (size_t k = 0; k < n; k++)
        if (m == 0 || p[2 * k] != p[2 * (m - 1)] || p[2 * k + 1] != p[2 * (m - 1) + 1]) {
            p[2 * m] = p[2 * k];
            p[2 * m + 1] = p[2 * k + 1];
            m++;
        }
    return m;
}

/* Unites the local components across the slices: lab[r] of every crossing root r becomes the
 * smallest index of its component over all ranks. One exchange of the local labels (own_lab:
 * lab of each own boid's root; every local component's label is its smallest index, so labels
 * name components uniquely) gives the (own, halo) label pair of every edge to a halo boid; every
 * rank gathers the distinct pairs of all ranks and unites them, so all ranks get the same sets.
 * (Propagating labels through the halo instead took a round per slice a component spans.)
 * Collective. */
static int merge_across(dm_flock_sim *s, const uint32_t *parent, uint64_t *lab, const uint8_t *crossing,
                        const uint64_t *own_lab, uint64_t *halo_lab, const dm_flock_edges *e)
{
    int rc = halo_values(s, own_lab, halo_lab, 400);
    size_t np = 0;
    for (size_t k = 0; k < e->n; k++) np += e->halo[k] != 0;
    uint64_t *pr = dm_malloc(16 * (np ? np : 1));
    if (rc == DM_OK && !pr) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for cluster labels");
    if (rc == DM_OK) {
        np = 0;
        for (size_t k = 0; k < e->n; k++)
            if (e->halo[k]) {
                uint64_t a = own_lab[e->own[k]], b = halo_lab[e->nbr[k]];
                pr[2 * np] = a < b ? a : b; /* an edge seen from both slices is one pair */
                pr[2 * np + 1] = a < b ? b : a;
                np++;
            }
        np = pairs_uniq(pr, np);
    }
    uint64_t *all = NULL, *lv = NULL;
    uint32_t *up = NULL;
    size_t tot = 0;
    rc = gather_all_u64(s, rc, pr, 2 * np, &all, &tot);
    if (rc == DM_OK) {
        lv = dm_malloc(8 * (tot ? tot : 1));
        up = dm_malloc(sizeof *up * (tot ? tot : 1));
        if (!lv || !up) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for cluster labels");
    }
    rc = dm_ctx_agree(s->ctx, rc);
    if (rc == DM_OK) {
        /* the distinct labels, sorted: a label's set is named by its smallest member's slot */
        memcpy(lv, all, 8 * tot);
        if (tot) qsort(lv, tot, sizeof *lv, cmp_u64);
        size_t nl = 0;
        for (size_t k = 0; k < tot; k++)
            if (nl == 0 || lv[k] != lv[nl - 1]) lv[nl++] = lv[k];
        for (size_t k = 0; k < nl; k++) up[k] = (uint32_t)k;
        for (size_t k = 0; k < tot / 2; k++) {
            uint64_t *a = bsearch(&all[2 * k], lv, nl, sizeof *lv, cmp_u64), *b = bsearch(&all[2 * k + 1], lv, nl, sizeof *lv, cmp_u64);
            DM_ASSERT(a && b);
            uf_union(up, (uint32_t)(a - lv), (uint32_t)(b - lv)); /* the root is the smaller slot */
        }
        for (size_t i = 0; i < s->own.n; i++) {
            if (parent[i] != i || !crossing[i]) continue;
            uint64_t *f = bsearch(&lab[i], lv, nl, sizeof *lv, cmp_u64);
            if (f) lab[i] = lv[uf_find(up, (uint32_t)(f - lv))];
        }
    }
    dm_free(pr);
    dm_free(all);
    dm_free(lv);
    dm_free(up);
    return rc;
}

/* Attaches own boids of small components (cluster -1) to the cluster of their nearest neighbour
 * within r that is in a cluster (plane distance, ties by smaller document index). */
static int attach_small(dm_flock_sim *s, int32_t *cl, const int32_t *halo_cl)
{
    dm_flock_params p;
    DM_TRY(dm_flock_params_at(&p, s, s->iteration));
    dm_flock_window w;
    dm_flock_window_of(&w, s, &p);
    int32_t *res = dm_malloc(sizeof *res * (s->own.n ? s->own.n : 1));
    double *best = dm_malloc(sizeof *best * (s->own.n ? s->own.n : 1));
    uint64_t *best_id = dm_malloc(sizeof *best_id * (s->own.n ? s->own.n : 1));
    if (!res || !best || !best_id) {
        dm_free(res);
        dm_free(best);
        dm_free(best_id);
        return DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    }
    for (size_t i = 0; i < s->own.n; i++) {
        res[i] = cl[i];
        best[i] = 2 * p.r2;
        best_id[i] = UINT64_MAX;
    }
    int rc = DM_OK;
    for (int pass = 0; pass < 2 && rc == DM_OK; pass++) {
        const dm_flock_store *src = pass == 0 ? &s->own : &s->halo;
        const int32_t *scl = pass == 0 ? cl : halo_cl;
        if (src->n == 0) continue;
        dm_flock_grid g;
        rc = dm_flock_grid_build(&g, s, &p, &w, src->x, src->y, src->n);
        if (rc != DM_OK) break;
        for (size_t i = 0; i < s->own.n; i++) {
            if (cl[i] >= 0) continue;
            int row = dm_flock_cell(s->own.y[i], p.ch, p.R), col = dm_flock_cell(s->own.x[i], p.cw, p.C);
            for (int dr = -1; dr <= 1; dr++) {
                int lr = dm_flock_window_row(&w, p.R, (row + dr + p.R) % p.R);
                if (lr < 0) continue;
                for (int dc = -1; dc <= 1; dc++) {
                    size_t cell = (size_t)lr * (size_t)p.C + (size_t)((col + dc + p.C) % p.C);
                    for (uint32_t k = g.start[cell]; k < g.start[cell + 1]; k++) {
                        uint32_t j = g.order[k];
                        if (scl[j] < 0) continue;
                        double dx, dy;
                        double d2 = dm_flock_offset(&p, s->own.x[i], s->own.y[i], src->x[j], src->y[j], &dx, &dy);
                        if (!(d2 < p.r2)) continue;
                        if (d2 < best[i] || (d2 == best[i] && src->id[j] < best_id[i])) {
                            best[i] = d2;
                            best_id[i] = src->id[j];
                            res[i] = scl[j];
                        }
                    }
                }
            }
        }
        dm_flock_grid_free(&g);
    }
    memcpy(cl, res, sizeof *cl * s->own.n);
    dm_free(res);
    dm_free(best);
    dm_free(best_id);
    return rc;
}

/* ---- attachment by centroid similarity (DM_FLOCK_SMALL_CENTROID) ------------------------------- */

/* Centroid sums are accumulated in 64-bit fixed point with 32 fraction bits
 * (dm_flock_centroid_entry, DM_FLOCK_CENTROID_ONE): every unit-vector component is rounded to a
 * multiple of 2^-32 once, and integer sums do not depend on their order, so the centroids - and
 * every decision taken from them - are the same bits for any number of ranks, any order of boids
 * and either backend. A cluster of fewer than 2^31 documents cannot overflow (|component| <= 1). */
typedef dm_flock_centroid_entry centroid_entry;

static int cmp_centroid_entry(const void *a, const void *b)
{
    uint64_t x = ((const centroid_entry *)a)->key, y = ((const centroid_entry *)b)->key;
    return x < y ? -1 : x > y;
}

/* Sorts entries by key (term, then cluster) and sums the values of equal keys, in O(n + terms):
 * a stable counting sort by term into a new array, then each term's few entries by cluster.
 * *e is replaced by the result (dm_free); *n: the distinct count. */
static int centroid_reduce(centroid_entry **e, size_t *n)
{
    size_t cnt = *n;
    if (cnt == 0) return DM_OK;
    centroid_entry *in = *e;
    uint64_t nterms = 0;
    for (size_t i = 0; i < cnt; i++)
        if ((in[i].key >> 32) + 1 > nterms) nterms = (in[i].key >> 32) + 1;
    size_t *first = dm_calloc((size_t)nterms + 1, sizeof *first);
    centroid_entry *out = dm_malloc(sizeof *out * cnt);
    if (!first || !out) {
        dm_free(first);
        dm_free(out);
        return DM_ERR(DM_ERR_NOMEM, "flock: out of memory for centroids");
    }
    for (size_t i = 0; i < cnt; i++) first[(in[i].key >> 32) + 1]++;
    for (uint64_t t = 0; t < nterms; t++) first[t + 1] += first[t];
    for (size_t i = 0; i < cnt; i++) out[first[in[i].key >> 32]++] = in[i];
    /* first[t] is now where term t + 1 starts: sort each term's entries by cluster */
    const long nt = (long)nterms;
#pragma omp parallel for schedule(dynamic, 1024)
    for (long t = 0; t < nt; t++) {
        size_t lo = t ? first[t - 1] : 0, hi = first[t];
        if (hi - lo > 1) qsort(out + lo, hi - lo, sizeof *out, cmp_centroid_entry);
    }
    size_t m = 0;
    for (size_t i = 0; i < cnt; i++) {
        if (m && out[m - 1].key == out[i].key) out[m - 1].sum += out[i].sum;
        else out[m++] = out[i];
    }
    dm_free(first);
    dm_free(in);
    *e = out;
    *n = m;
    return DM_OK;
}

/* Documents per work item of the local centroid sums (an item never spans two clusters). */
#define DM_FLOCK_CENTROID_ITEM 16384
static size_t g_centroid_item = DM_FLOCK_CENTROID_ITEM;

void dm_flock_set_centroid_item(size_t docs)
{
    g_centroid_item = docs ? docs : DM_FLOCK_CENTROID_ITEM;
}

static int g_refine_fresh;

void dm_flock_set_refine_fresh(int fresh) { g_refine_fresh = fresh != 0; }

static int g_attach_device = 1;

void dm_flock_set_attach_device(int device) { g_attach_device = device != 0; }

/* Per-thread dense accumulators of the local centroid sums: at most this many bytes in all. */
#define DM_FLOCK_CENTROID_DENSE_BYTES ((size_t)1 << 30)

/* This rank's (term << 32 | cluster, sum) entries of the clustered own boids, distinct and sorted
 * (*loc, dm_free; *m entries). The boids are grouped by cluster and cut into items of at most
 * g_centroid_item documents (DM_FLOCK_CENTROID_ITEM); each thread sums an item's rows into a
 * dense array over the terms and emits one entry per term it touched; centroid_reduce then sums
 * the items of a cluster. O(entries) instead of sorting every entry of every row. */
static int centroid_local(dm_flock_sim *s, const int32_t *cl, centroid_entry **loc, size_t *m)
{
    size_t n = s->own.n;
    *loc = NULL;
    *m = 0;
    int32_t k = 0;
    uint32_t nterms = 0; /* rows are term-sorted: a row's largest term is its last */
    for (size_t i = 0; i < n; i++) {
        if (cl[i] < 0) continue;
        if (cl[i] + 1 > k) k = cl[i] + 1;
        uint32_t len = s->own.vlen[i], last = len ? s->own.col[s->own.voff[i] + len - 1] : 0;
        if (len && last + 1 > nterms) nterms = last + 1;
    }
    if (k == 0) return DM_OK;
    if (s->backend == DM_BACKEND_CUDA && g_attach_device && dm_flock_centroid_sums_cuda_fits(k, nterms))
        return dm_flock_centroid_sums_cuda(s, cl, k, nterms, loc, m);
    size_t *start = dm_calloc((size_t)k + 1, sizeof *start), *at = dm_malloc(sizeof *at * (size_t)k);
    size_t *order = dm_malloc(sizeof *order * (n ? n : 1));
    int rc = start && at && order ? DM_OK : DM_ERR(DM_ERR_NOMEM, "flock: out of memory for centroids");
    size_t nitems = 0;
    size_t *item = NULL; /* item j: order[item[j] .. item[j + 1]) */
    centroid_entry **part = NULL;
    size_t *plen = NULL;
    if (rc == DM_OK) {
        for (size_t i = 0; i < n; i++)
            if (cl[i] >= 0) start[cl[i] + 1]++;
        for (int32_t c = 0; c < k; c++) {
            start[c + 1] += start[c];
            at[c] = start[c];
            nitems += (start[c + 1] - start[c] + g_centroid_item - 1) / g_centroid_item;
        }
        for (size_t i = 0; i < n; i++)
            if (cl[i] >= 0) order[at[cl[i]]++] = i;
        item = dm_malloc(sizeof *item * (nitems + 1));
        part = dm_calloc(nitems ? nitems : 1, sizeof *part);
        plen = dm_calloc(nitems ? nitems : 1, sizeof *plen);
        if (!item || !part || !plen) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for centroids");
    }
    if (rc == DM_OK) {
        size_t j = 0;
        for (int32_t c = 0; c < k; c++)
            for (size_t b = start[c]; b < start[c + 1]; b += g_centroid_item) item[j++] = b;
        item[nitems] = start[k];
        size_t per = (size_t)nterms * (sizeof(int64_t) + sizeof(uint32_t) + sizeof(size_t)) + 1;
        int threads = omp_get_max_threads();
        if ((size_t)threads * per > DM_FLOCK_CENTROID_DENSE_BYTES)
            threads = (int)(DM_FLOCK_CENTROID_DENSE_BYTES / per) > 1 ? (int)(DM_FLOCK_CENTROID_DENSE_BYTES / per) : 1;
        int bad = 0;
#pragma omp parallel num_threads(threads) reduction(| : bad)
        {
            int64_t *acc = calloc(nterms ? nterms : 1, sizeof *acc);
            uint32_t *touched = malloc(sizeof *touched * (nterms ? nterms : 1));
            size_t *stamp = calloc(nterms ? nterms : 1, sizeof *stamp); /* item + 1: touched by it */
            if (!acc || !touched || !stamp) bad = 1;
#pragma omp for schedule(dynamic, 1)
            for (long jl = 0; jl < (long)nitems; jl++) {
                if (!acc || !touched || !stamp) continue;
                size_t nt = 0;
                uint32_t c = (uint32_t)cl[order[item[jl]]];
                for (size_t o = item[jl]; o < item[jl + 1]; o++) {
                    size_t i = order[o];
                    const uint32_t *col = s->own.col + s->own.voff[i];
                    const float *val = s->own.val + s->own.voff[i];
                    for (uint32_t q = 0; q < s->own.vlen[i]; q++) {
                        if (stamp[col[q]] != (size_t)jl + 1) {
                            stamp[col[q]] = (size_t)jl + 1;
                            touched[nt++] = col[q];
                        }
                        acc[col[q]] += (int64_t)llrint((double)val[q] * DM_FLOCK_CENTROID_ONE);
                    }
                }
                centroid_entry *pe = malloc(sizeof *pe * (nt ? nt : 1));
                if (!pe) {
                    bad = 1;
                    for (size_t t = 0; t < nt; t++) acc[touched[t]] = 0;
                    continue;
                }
                for (size_t t = 0; t < nt; t++) {
                    pe[t] = (centroid_entry){(uint64_t)touched[t] << 32 | c, acc[touched[t]]};
                    acc[touched[t]] = 0;
                }
                part[jl] = pe;
                plen[jl] = nt;
            }
            free(acc);
            free(touched);
            free(stamp);
        }
        if (bad) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for centroids");
    }
    centroid_entry *all = NULL;
    size_t total = 0;
    for (size_t j = 0; rc == DM_OK && j < nitems; j++) total += plen[j];
    if (rc == DM_OK) {
        all = dm_malloc(sizeof *all * (total ? total : 1));
        if (!all) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for centroids");
    }
    if (rc == DM_OK) {
        size_t o = 0;
        for (size_t j = 0; j < nitems; j++) {
            if (plen[j]) memcpy(all + o, part[j], sizeof *all * plen[j]);
            o += plen[j];
        }
        rc = centroid_reduce(&all, &total);
    }
    for (size_t j = 0; part && j < nitems; j++) free(part[j]);
    dm_free(part);
    dm_free(plen);
    dm_free(item);
    dm_free(order);
    dm_free(start);
    dm_free(at);
    if (rc != DM_OK) {
        dm_free(all);
        return rc;
    }
    *loc = all;
    *m = total;
    return DM_OK;
}

/* Sums the ranks' sorted, reduced entries (*e, *n: this rank's; replaced by the result, the same
 * sorted entries on every rank). A reduce-scatter by term range, then an all-gather: rank q reduces
 * the entries of terms [q T / P, (q + 1) T / P) of every rank (T: the largest term + 1 over the
 * ranks), and the reduced ranges, gathered in rank order, are sorted as they are. Each rank sends,
 * receives and reduces about one rank's worth of entries before the all-gather of the result,
 * where gathering every rank's entries and reducing them all on every rank cost P times that
 * (bench/RESULTS.md, session 20). Integer sums: the same bits in any order. rc: this rank's status
 * so far (the ranks agree on it first). Collective. */
static int centroid_allreduce(dm_flock_sim *s, int rc, centroid_entry **e, size_t *n)
{
    const int P = s->size;
    centroid_entry *loc = *e;
    size_t m = *n;
    int *cnt = dm_calloc(4 * (size_t)P, sizeof *cnt); /* send counts, displacements; receive */
    if (rc == DM_OK && !cnt) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for centroids");
    if (rc == DM_OK && 2 * m > (size_t)INT32_MAX)
        rc = DM_ERR(DM_ERR_INVALID_ARG, "flock: %zu centroid entries on one rank", m);
    rc = dm_ctx_agree(s->ctx, rc);
    uint64_t T = m ? (loc[m - 1].key >> 32) + 1 : 0;
    if (rc == DM_OK && MPI_Allreduce(MPI_IN_PLACE, &T, 1, MPI_UINT64_T, MPI_MAX, s->comm) != MPI_SUCCESS)
        rc = DM_ERR(DM_ERR_MPI, "flock: MPI_Allreduce failed (centroids)");
    int *sc = cnt, *sd = cnt + P, *rcnt = cnt + 2 * P, *rd = cnt + 3 * P;
    if (rc == DM_OK) {
        size_t at = 0;
        for (int q = 0; q < P; q++) {
            uint64_t hi = T * (uint64_t)(q + 1) / (uint64_t)P; /* terms below hi go to ranks <= q */
            size_t from = at;
            while (at < m && (loc[at].key >> 32) < hi) at++;
            sd[q] = (int)(2 * from);
            sc[q] = (int)(2 * (at - from));
        }
        if (MPI_Alltoall(sc, 1, MPI_INT, rcnt, 1, MPI_INT, s->comm) != MPI_SUCCESS)
            rc = DM_ERR(DM_ERR_MPI, "flock: MPI_Alltoall failed (centroids)");
    }
    uint64_t tot = 0;
    for (int q = 0; q < P && rc == DM_OK; q++) {
        rd[q] = (int)tot;
        tot += (uint64_t)rcnt[q];
    }
    if (rc == DM_OK && tot > (uint64_t)INT32_MAX)
        rc = DM_ERR(DM_ERR_INVALID_ARG, "flock: %llu centroid entries for one rank", (unsigned long long)(tot / 2));
    centroid_entry *part = rc == DM_OK ? dm_malloc(8 * (tot ? tot : 2)) : NULL;
    if (rc == DM_OK && !part) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for centroids");
    rc = dm_ctx_agree(s->ctx, rc);
    if (rc == DM_OK && MPI_Alltoallv(loc, sc, sd, MPI_UINT64_T, part, rcnt, rd, MPI_UINT64_T, s->comm) != MPI_SUCCESS)
        rc = DM_ERR(DM_ERR_MPI, "flock: MPI_Alltoallv failed (centroids)");
    dm_free(cnt);
    dm_free(loc);
    *e = NULL;
    *n = 0;
    size_t np = (size_t)(tot / 2);
    if (rc == DM_OK) rc = centroid_reduce(&part, &np);
    uint64_t *raw = NULL;
    size_t nraw = 0;
    rc = gather_all_u64(s, rc, (const uint64_t *)part, 2 * np, &raw, &nraw);
    dm_free(part);
    if (rc != DM_OK) {
        dm_free(raw);
        return rc;
    }
    *e = (centroid_entry *)raw;
    *n = nraw / 2;
    return DM_OK;
}

/* The centroid sums of the clusters (cl[i] >= 0 of the own boids), reduced over the ranks: every
 * rank gets the same (term << 32 | cluster, sum) entries, sorted, in *all (dm_free). Collective. */
static int centroid_sums(dm_flock_sim *s, const int32_t *cl, centroid_entry **all_out, size_t *total_out)
{
    *all_out = NULL;
    *total_out = 0;
    centroid_entry *all = NULL;
    size_t total = 0;
    int rc = centroid_local(s, cl, &all, &total);
    if (s->size > 1) rc = centroid_allreduce(s, rc, &all, &total);
    rc = dm_ctx_agree(s->ctx, rc);
    if (rc != DM_OK) {
        dm_free(all);
        return rc;
    }
    *all_out = all;
    *total_out = total;
    return DM_OK;
}

/* Own boids with cl[i] < 0 join the cluster (0 .. k-1) whose centroid is the most cosine-similar:
 * all[0 .. total) are the centroids (sums of the clustered documents' unit vectors, reduced over
 * the ranks as sparse (term, cluster) sums by centroid_sums, the same on every rank), and a
 * document's cosine with each centroid sharing a term with it is summed over its terms in term
 * order (dm_flock_attach_cpu, or dm_flock_attach_cuda on the device that holds the vectors: the
 * same bits). Local: no communication. */
static int attach_centroid(dm_flock_sim *s, int32_t *cl, int32_t k, const centroid_entry *all, size_t total)
{
    size_t n = s->own.n;
    /* the centroid norms (summed in (term, cluster) order), each term's first entry, the entries'
     * clusters and values */
    uint64_t nterms = total ? (all[total - 1].key >> 32) + 1 : 0;
    double *norm = dm_calloc((size_t)(k > 0 ? k : 1), sizeof *norm);
    double *scale = dm_calloc((size_t)(k > 0 ? k : 1), sizeof *scale);
    size_t *tstart = dm_calloc((size_t)nterms + 1, sizeof *tstart);
    int32_t *cluster = dm_malloc(sizeof *cluster * (total ? total : 1));
    double *value = dm_malloc(sizeof *value * (total ? total : 1));
    int32_t *res = dm_malloc(sizeof *res * (n ? n : 1));
    int rc = norm && scale && tstart && cluster && value && res ? DM_OK : DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    if (rc == DM_OK) {
        /* each centroid divided by its largest |component|: the integer sums of parallel centroids
         * (clusters of copies of one document) are proportional, so their scaled components are
         * the same correctly rounded quotients, and so are their norms and every document's
         * cosines with them: an exact tie stays a tie (to the lower cluster), where the unscaled
         * sums' norms rounded differently and picked either. Exact while the sums convert to
         * doubles exactly (|sum| <= 2^53: about 2^21 copies of one document in a cluster) */
        for (size_t q = 0; q < total; q++) {
            DM_ASSERT((all[q].key & 0xffffffffu) < (uint64_t)k); /* the sums belong to clusters 0 .. k-1 */
            double a = fabs((double)all[q].sum);
            if (a > scale[all[q].key & 0xffffffffu]) scale[all[q].key & 0xffffffffu] = a;
        }
        for (size_t q = 0; q < total; q++) {
            cluster[q] = (int32_t)(all[q].key & 0xffffffffu);
            double c = scale[cluster[q]] > 0 ? (double)all[q].sum / scale[cluster[q]] : 0.0;
            value[q] = c;
            norm[cluster[q]] += c * c;
            tstart[(all[q].key >> 32) + 1]++;
        }
        for (uint64_t t = 0; t < nterms; t++) tstart[t + 1] += tstart[t];
        for (int32_t c = 0; c < k; c++) norm[c] = sqrt(norm[c]);
        dm_flock_centroids cen = {k, nterms, tstart, cluster, value, norm};
        const int device = s->backend == DM_BACKEND_CUDA && g_attach_device && dm_flock_attach_cuda_fits(&cen);
        rc = device ? dm_flock_attach_cuda(s, res, cl, &cen) : dm_flock_attach_cpu(s, res, cl, &cen);
        if (rc == DM_OK) memcpy(cl, res, sizeof *cl * n);
    }
    dm_free(norm);
    dm_free(scale);
    dm_free(tstart);
    dm_free(cluster);
    dm_free(value);
    dm_free(res);
    return rc;
}

/* ---- merging clusters by centroid similarity (dm_flock_cluster_options.merge) ------------------ */

typedef struct merge_state {
    int32_t k;
    __int128 *dot;   /* upper triangle (a <= b), row by row: centroid dot products in 2^-64 units,
                        exact (sums of the fixed-point products); the diagonal the norms^2 */
    char *alive;
    int32_t *to;     /* the cluster a cluster was merged into (itself while alive) */
    double *bestv;   /* per alive cluster: its most similar other alive cluster's cosine ... */
    int32_t *bestj;  /* ... and that cluster (-1: none) */
} merge_state;

static size_t mtri(int32_t k, int32_t a, int32_t b)
{
    return (size_t)a * (size_t)k - (size_t)a * ((size_t)a - 1) / 2 + (size_t)(b - a);
}

static __int128 *mdot(const merge_state *m, int32_t a, int32_t b)
{
    return a <= b ? &m->dot[mtri(m->k, a, b)] : &m->dot[mtri(m->k, b, a)];
}

/* *hi, *lo: the 256-bit product of a and b. */
static void mul_u256(unsigned __int128 a, unsigned __int128 b, unsigned __int128 *hi, unsigned __int128 *lo)
{
    const unsigned __int128 m64 = ((unsigned __int128)1 << 64) - 1;
    unsigned __int128 a0 = a & m64, a1 = a >> 64, b0 = b & m64, b1 = b >> 64;
    unsigned __int128 p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    unsigned __int128 mid = (p00 >> 64) + (p01 & m64) + (p10 & m64);
    *lo = (p00 & m64) | (mid << 64);
    *hi = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
}

/* The cosine of the centroids a and b (0 when one is empty). Exactly 1 when they are parallel
 * (dot^2 = |a|^2 |b|^2 in integers: clusters of copies of one document), else the double quotient
 * kept below 1: --merge 1 merges exactly the parallel centroids, and their ties are exact (the
 * quotient of the rounded products of parallel centroids missed 1 by an ulp or two, so --merge 1
 * left them apart and equal cosines compared by their rounding). */
static double mcos(const merge_state *m, int32_t a, int32_t b)
{
    __int128 na = *mdot(m, a, a), nb = *mdot(m, b, b), d = *mdot(m, a, b);
    if (na <= 0 || nb <= 0) return 0.0;
    if (d > 0) {
        unsigned __int128 h1, l1, h2, l2;
        mul_u256((unsigned __int128)d, (unsigned __int128)d, &h1, &l1);
        mul_u256((unsigned __int128)na, (unsigned __int128)nb, &h2, &l2);
        if (h1 == h2 && l1 == l2) return 1.0;
    }
    double c = ldexp((double)d, -64) / sqrt(ldexp((double)na, -64) * ldexp((double)nb, -64));
    return c < 1.0 ? c : nextafter(1.0, 0.0);
}

/* Cluster a's most similar alive partner (ties: the lower cluster number). */
static void mbest(merge_state *m, int32_t a)
{
    m->bestv[a] = -2.0;
    m->bestj[a] = -1;
    for (int32_t b = 0; b < m->k; b++) {
        if (b == a || !m->alive[b]) continue;
        double c = mcos(m, a, b);
        if (c > m->bestv[a]) {
            m->bestv[a] = c;
            m->bestj[a] = b;
        }
    }
}

/* Merges the clusters 0 .. k-1 of the own boids (cl[i]; < 0: noise, left alone) while the two most
 * cosine-similar centroids have cosine >= tm, centroid linkage: a merged cluster's centroid is the
 * sum of the two, so its dot products are the sums of theirs (the k x k matrix is updated, never
 * recomputed). The dot products are exact: centroid sums in 2^-32 fixed point (centroid_sums), the
 * products and their sums over the terms in 128-bit integers (|sum| <= |a| |b| < 2^126 for
 * clusters below 2^31 documents), kept exact through the merges (the cosines come from them:
 * mcos); every rank computes the same matrix and takes the same merges (the largest cosine first;
 * ties: the lowest pair), so the result does not depend on the ranks or threads. Clusters are renumbered by their smallest old number (= their smallest
 * document index, as the extraction numbers them); *k_out: how many remain. all[0 .. total): the
 * centroid sums of the labels cl (centroid_sums). Local: every rank holds the same sums. */
static int merge_centroid(dm_flock_sim *s, int32_t *cl, int32_t k, double tm, int32_t *k_out, const centroid_entry *all,
                          size_t total, int32_t *map)
{
    *k_out = k;
    for (int32_t a = 0; a < k; a++) map[a] = a;
    if (k < 2) return DM_OK;
    DM_ASSERT(k <= DM_FLOCK_CENTROID_MAX); /* dm_flock_sim_cluster skips the step above it */
    int rc = DM_OK;
    const size_t K = (size_t)k;
    merge_state m = {k, dm_calloc(K * (K + 1) / 2, sizeof(__int128)), dm_malloc(K), dm_malloc(sizeof(int32_t) * K),
                     dm_malloc(sizeof(double) * K), dm_malloc(sizeof(int32_t) * K)};
    size_t *start = dm_calloc(K + 1, sizeof *start), *pos = dm_malloc(sizeof *pos * (total ? total : 1));
    int32_t *num = dm_malloc(sizeof *num * K);
    if (!m.dot || !m.alive || !m.to || !m.bestv || !m.bestj || !start || !pos || !num)
        rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory merging %d clusters", k);
    if (rc == DM_OK) {
        /* each cluster's entries in term order (all[] is sorted by term, then cluster) */
        for (size_t e = 0; e < total; e++) start[(all[e].key & 0xffffffffu) + 1]++;
        for (size_t c = 0; c < K; c++) start[c + 1] += start[c];
        for (size_t e = 0; e < total; e++) pos[start[all[e].key & 0xffffffffu]++] = e;
        for (size_t c = K; c > 0; c--) start[c] = start[c - 1];
        start[0] = 0;
        /* row a: a's entries against the entries of the same term after them (clusters b >= a) */
#pragma omp parallel
        {
            __int128 *row = malloc(sizeof *row * K);
            if (!row) {
#pragma omp atomic write
                rc = DM_ERR_NOMEM;
            }
#pragma omp for schedule(dynamic, 1)
            for (int32_t a = 0; a < k; a++) {
                if (!row) continue;
                memset(row, 0, sizeof *row * K);
                for (size_t p = start[a]; p < start[a + 1]; p++) {
                    size_t e = pos[p];
                    uint64_t term = all[e].key >> 32;
                    for (size_t q = e; q < total && (all[q].key >> 32) == term; q++)
                        row[all[q].key & 0xffffffffu] += (__int128)all[e].sum * all[q].sum;
                }
                for (int32_t b = a; b < k; b++) m.dot[mtri(k, a, b)] = row[b];
            }
            free(row);
        }
        if (rc != DM_OK) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory merging %d clusters", k);
    }
    if (rc == DM_OK) {
        for (int32_t a = 0; a < k; a++) {
            m.alive[a] = 1;
            m.to[a] = a;
        }
        for (int32_t a = 0; a < k; a++) mbest(&m, a);
        for (;;) {
            int32_t a = -1;
            for (int32_t c = 0; c < k; c++)
                if (m.alive[c] && m.bestj[c] >= 0 && (a < 0 || m.bestv[c] > m.bestv[a])) a = c;
            if (a < 0 || !(m.bestv[a] >= tm)) break;
            int32_t b = m.bestj[a];
            if (b < a) {
                int32_t t = a;
                a = b;
                b = t;
            }
            /* b joins a: the merged centroid's dot products are the sums */
            __int128 ab = *mdot(&m, a, b);
            *mdot(&m, a, a) += *mdot(&m, b, b) + 2 * ab;
            for (int32_t o = 0; o < k; o++)
                if (m.alive[o] && o != a && o != b) *mdot(&m, a, o) += *mdot(&m, b, o);
            m.alive[b] = 0;
            m.to[b] = a;
            mbest(&m, a);
            for (int32_t o = 0; o < k; o++) {
                if (!m.alive[o] || o == a) continue;
                if (m.bestj[o] == a || m.bestj[o] == b) mbest(&m, o);
                else {
                    double c = mcos(&m, o, a);
                    if (c > m.bestv[o] || (c == m.bestv[o] && a < m.bestj[o])) {
                        m.bestv[o] = c;
                        m.bestj[o] = a;
                    }
                }
            }
        }
        /* a cluster's final group is that of the cluster it joined (a lower number), numbered in order */
        int32_t left = 0;
        for (int32_t a = 0; a < k; a++) {
            m.to[a] = m.to[m.to[a]];
            num[a] = m.to[a] == a ? left++ : num[m.to[a]];
        }
        for (size_t i = 0; i < s->own.n; i++)
            if (cl[i] >= 0) cl[i] = num[cl[i]];
        memcpy(map, num, sizeof *map * K);
        *k_out = left;
    }
    dm_free(m.dot);
    dm_free(m.alive);
    dm_free(m.to);
    dm_free(m.bestv);
    dm_free(m.bestj);
    dm_free(start);
    dm_free(pos);
    dm_free(num);
    return rc;
}

/* ---- refinement by centroids (dm_flock_cluster_options.refine) --------------------------------- */

/* Up to `steps` Lloyd steps of spherical k-means started from the clusters cl (0 .. *k - 1): in a
 * step every clustered document moves at once to the cluster whose centroid is the most
 * cosine-similar (attach_centroid: exact sums, ties to the lower number; a document that shares no
 * term with any centroid stays); the steps end after one that moves no document. Noise stays
 * noise. Clusters left empty are dropped and the others renumbered in their order. *done gets the
 * steps taken, *moved the moves summed over them. *first: the centroid sums of cl as they are
 * (centroid_sums' entries, taken over and freed here), or NULL: the first step sums them too.
 * Collective: every rank gets the same counts, and the labels are the same bits for any number of
 * ranks. */
static int refine_centroid(dm_flock_sim *s, int32_t *cl, int32_t *k, int steps, int *done, uint64_t *moved,
                           centroid_entry **first, size_t nfirst)
{
    const size_t n = s->own.n;
    *done = 0;
    *moved = 0;
    centroid_entry *given = *first; /* the first step's sums, or NULL: taken over here */
    *first = NULL;
    if (steps <= 0 || *k < 2) {
        dm_free(given);
        return DM_OK;
    }
    int32_t *nc = dm_malloc(sizeof *nc * (n > (size_t)*k ? n : (size_t)*k)); /* labels, then the renumbering */
    uint64_t *size = dm_calloc((size_t)*k, sizeof *size);
    int rc = dm_ctx_agree(s->ctx, nc && size ? DM_OK : DM_ERR(DM_ERR_NOMEM, "flock: out of memory for the refinement"));
    for (int it = 0; it < steps && rc == DM_OK; it++) {
        centroid_entry *sums = given;
        size_t nsums = nfirst;
        given = NULL;
        dm_timer_start("flock.clusters.centroids");
        if (!sums) rc = centroid_sums(s, cl, &sums, &nsums);
        dm_timer_stop("flock.clusters.centroids");
        if (rc != DM_OK) break;
        for (size_t i = 0; i < n; i++) nc[i] = -1;
        rc = attach_centroid(s, nc, *k, sums, nsums);
        dm_free(sums);
        uint64_t m = 0;
        if (rc == DM_OK)
            for (size_t i = 0; i < n; i++)
                if (cl[i] >= 0 && nc[i] >= 0 && nc[i] != cl[i]) {
                    cl[i] = nc[i];
                    m++;
                }
        rc = dm_ctx_agree(s->ctx, rc);
        if (rc == DM_OK && s->size > 1 && MPI_Allreduce(MPI_IN_PLACE, &m, 1, MPI_UINT64_T, MPI_SUM, s->comm) != MPI_SUCCESS)
            rc = DM_ERR(DM_ERR_MPI, "flock: MPI_Allreduce failed (refinement)");
        rc = dm_ctx_agree(s->ctx, rc);
        if (rc != DM_OK) break;
        (*done)++;
        *moved += m;
        if (!m) break;
    }
    /* the clusters that kept documents, in order */
    if (rc == DM_OK && *moved) {
        for (size_t i = 0; i < n; i++)
            if (cl[i] >= 0) size[cl[i]]++;
        if (s->size > 1 &&
            MPI_Allreduce(MPI_IN_PLACE, size, *k, MPI_UINT64_T, MPI_SUM, s->comm) != MPI_SUCCESS)
            rc = DM_ERR(DM_ERR_MPI, "flock: MPI_Allreduce failed (refinement)");
        rc = dm_ctx_agree(s->ctx, rc);
        if (rc == DM_OK) {
            int32_t left = 0;
            for (int32_t c = 0; c < *k; c++) nc[c] = size[c] ? left++ : -1; /* nc reused as the map */
            for (size_t i = 0; i < n; i++)
                if (cl[i] >= 0) cl[i] = nc[cl[i]];
            *k = left;
        }
    }
    dm_free(given);
    dm_free(nc);
    dm_free(size);
    return rc;
}

const char *dm_flock_small_name(int attach)
{
    switch (attach) {
    case DM_FLOCK_SMALL_NOISE: return "noise";
    case DM_FLOCK_SMALL_NEIGHBOUR: return "neighbour";
    case DM_FLOCK_SMALL_CENTROID: return "centroid";
    default: return NULL;
    }
}

int dm_flock_small_parse(const char *name, int *attach)
{
    if (strcmp(name, "noise") == 0) *attach = DM_FLOCK_SMALL_NOISE;
    else if (strcmp(name, "neighbour") == 0 || strcmp(name, "neighbor") == 0 || strcmp(name, "attach") == 0)
        *attach = DM_FLOCK_SMALL_NEIGHBOUR;
    else if (strcmp(name, "centroid") == 0) *attach = DM_FLOCK_SMALL_CENTROID;
    else return DM_ERR(DM_ERR_INVALID_ARG, "small components: '%s' is not noise, neighbour or centroid", name);
    return DM_OK;
}

void dm_flock_cluster_describe(char *buf, size_t size, const dm_flock_cluster_options *opt, double model_threshold)
{
    double thr = opt->threshold < -1.0 ? model_threshold : opt->threshold;
    const char *small = opt->attach == DM_FLOCK_SMALL_NEIGHBOUR ? "each document joins the cluster of its nearest "
                                                                  "clustered neighbour within r, else noise"
                        : opt->attach == DM_FLOCK_SMALL_CENTROID ? "each document joins the cluster whose centroid "
                                                                   "(sum of its members' unit vectors) is the most "
                                                                   "cosine-similar (exact, not flocking)"
                                                                 : "noise (-1)";
    int w = snprintf(buf, size, "connected components of (within r, cosine >= %g), merged across slices; components "
                     "below %d documents: %s", thr, opt->min_size, small);
    if (opt->merge > 0.0 && w >= 0 && (size_t)w < size)
        w += snprintf(buf + w, size - (size_t)w, "; then clusters merged while two centroids have cosine >= %g "
                      "(centroid linkage, not flocking)", opt->merge);
    if (opt->refine > 0 && w >= 0 && (size_t)w < size)
        snprintf(buf + w, size - (size_t)w, "; then up to %d refinement steps: every clustered document moves to "
                 "the cluster with the most cosine-similar centroid (spherical k-means steps from these clusters, "
                 "not flocking)", opt->refine);
}

int dm_flock_sim_cluster(dm_flock_sim *s, const dm_flock_cluster_options *opt, int32_t *n_clusters)
{
    *n_clusters = 0;
    if (opt->min_size < 1 || !dm_flock_small_name(opt->attach) || !(opt->threshold <= 1.0) ||
        !(opt->merge >= 0.0 && opt->merge <= 1.0) || opt->refine < 0)
        return DM_ERR(DM_ERR_INVALID_ARG,
                      "flock: cluster options (min size %d, small %d, threshold %g, merge %g, refine %d)",
                      opt->min_size, opt->attach, opt->threshold, opt->merge, opt->refine);
    dm_timer_start("flock.clusters");
    s->centroid_skipped = 0;
    s->refine_steps = 0;
    s->refine_moved = 0;
    dm_flock_view v;
    int rc = dm_flock_sim_view(s, &v);
    rc = dm_ctx_agree(s->ctx, rc);
    if (rc != DM_OK) {
        dm_timer_stop("flock.clusters");
        return rc;
    }
    dm_flock_edges e;
    memset(&e, 0, sizeof e);
    double thr = opt->threshold < -1.0 ? s->opt.threshold : opt->threshold;
    dm_timer_start("flock.clusters.edges");
    rc = s->backend == DM_BACKEND_CUDA ? dm_flock_edges_cuda(&e, s, thr) : dm_flock_edges_cpu(&e, s, thr);
    rc = dm_ctx_agree(s->ctx, rc);
    dm_timer_stop("flock.clusters.edges");
    dm_timer_start("flock.clusters.components");
    size_t n = s->own.n, nh = s->halo.n;
    uint32_t *parent = dm_malloc(sizeof *parent * (n ? n : 1));
    uint64_t *lab = dm_malloc(sizeof *lab * (n ? n : 1));      /* per root: smallest index */
    uint64_t *own_lab = dm_malloc(sizeof *own_lab * (n ? n : 1));
    uint64_t *halo_lab = dm_malloc(sizeof *halo_lab * (nh ? nh : 1));
    uint8_t *crossing = dm_calloc(n ? n : 1, 1);                /* per root */
    uint32_t *local_cnt = dm_calloc(n ? n : 1, sizeof *local_cnt); /* per root */
    uint64_t *local_min = dm_malloc(sizeof *local_min * (n ? n : 1)); /* per root: own smallest */
    int32_t *cl = dm_malloc(sizeof *cl * (n ? n : 1));
    if (rc == DM_OK && (!parent || !lab || !own_lab || !halo_lab || !crossing || !local_cnt || !local_min || !cl))
        rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for clusters");
    rc = dm_ctx_agree(s->ctx, rc);
    if (rc == DM_OK) {
        for (size_t i = 0; i < n; i++) parent[i] = (uint32_t)i;
        for (size_t k = 0; k < e.n; k++)
            if (!e.halo[k]) uf_union(parent, e.own[k], e.nbr[k]);
        for (size_t i = 0; i < n; i++) local_min[i] = UINT64_MAX;
        for (size_t i = 0; i < n; i++) {
            uint32_t r = uf_find(parent, (uint32_t)i);
            if (s->own.id[i] < local_min[r]) local_min[r] = s->own.id[i];
            local_cnt[r]++;
        }
        for (size_t i = 0; i < n; i++) lab[i] = local_min[i];
        for (size_t k = 0; k < e.n; k++)
            if (e.halo[k]) crossing[uf_find(parent, e.own[k])] = 1;
    }
    /* a component's label is its smallest index over all ranks: the local components that touch
     * the halo are united across the slices in one step (merge_across) */
    if (rc == DM_OK) {
        for (size_t i = 0; i < n; i++) own_lab[i] = lab[uf_find(parent, (uint32_t)i)];
        if (s->size > 1) rc = merge_across(s, parent, lab, crossing, own_lab, halo_lab, &e);
    }
    /* global sizes: local components are complete; crossing ones are summed over ranks */
    uint64_t *gsize = NULL, *pairs = NULL, *all = NULL;
    size_t npairs = 0, total = 0;
    if (rc == DM_OK) {
        gsize = dm_malloc(sizeof *gsize * (n ? n : 1));
        pairs = dm_malloc(sizeof *pairs * 2 * (n ? n : 1));
        if (!gsize || !pairs) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    }
    if (rc == DM_OK) {
        for (size_t i = 0; i < n; i++)
            if (parent[i] == i) {
                gsize[i] = local_cnt[i];
                if (crossing[i]) {
                    pairs[2 * npairs] = lab[i];
                    pairs[2 * npairs + 1] = local_cnt[i];
                    npairs++;
                }
            }
    }
    rc = gather_all_u64(s, rc, pairs, 2 * npairs, &all, &total);
    if (rc == DM_OK) {
        /* sort (label, count) pairs by label and sum */
        qsort(all, (size_t)total / 2, 2 * sizeof *all, cmp_u64);
        for (size_t i = 0; i < n; i++) {
            if (parent[i] != i || !crossing[i]) continue;
            size_t lo = 0, hi = (size_t)total / 2;
            while (lo < hi) { /* first pair with label >= lab[i] */
                size_t mid = (lo + hi) / 2;
                if (all[2 * mid] < lab[i]) lo = mid + 1;
                else hi = mid;
            }
            uint64_t sum = 0;
            for (size_t k = lo; k < (size_t)total / 2 && all[2 * k] == lab[i]; k++) sum += all[2 * k + 1];
            gsize[i] = sum;
        }
    }
    /* number the big components by their smallest index: the rank holding that boid lists it */
    uint64_t *big = NULL, *allbig = NULL;
    size_t nbig = 0, nall = 0;
    int totbig = 0;
    if (rc == DM_OK) {
        big = dm_malloc(sizeof *big * (n ? n : 1));
        if (!big) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    }
    if (rc == DM_OK)
        for (size_t i = 0; i < n; i++)
            if (parent[i] == i && gsize[i] >= (uint64_t)opt->min_size && local_min[i] == lab[i]) big[nbig++] = lab[i];
    rc = gather_all_u64(s, rc, big, nbig, &allbig, &nall);
    totbig = (int)nall;
    if (rc == DM_OK) {
        qsort(allbig, (size_t)totbig, sizeof *allbig, cmp_u64);
        for (size_t i = 0; i < n; i++) {
            uint32_t r = uf_find(parent, (uint32_t)i);
            cl[i] = -1;
            if (gsize[r] < (uint64_t)opt->min_size) continue;
            uint64_t *f = bsearch(&lab[r], allbig, (size_t)totbig, sizeof *allbig, cmp_u64);
            DM_ASSERT(f != NULL);
            cl[i] = (int32_t)(f - allbig);
        }
        *n_clusters = totbig;
        dm_counter_add("flock.clusters.components", (int64_t)nbig); /* summed over ranks: the big components */
    }
    dm_timer_stop("flock.clusters.components");
    dm_timer_start("flock.clusters.small_merge");
    /* the centroid steps cost (small documents x the clusters sharing their terms) and k^2: with
     * more clusters than DM_FLOCK_CENTROID_MAX both are skipped (the same k on every rank) */
    int centroid_steps = opt->attach == DM_FLOCK_SMALL_CENTROID || opt->merge > 0.0;
    if (rc == DM_OK && centroid_steps && totbig > DM_FLOCK_CENTROID_MAX) {
        s->centroid_skipped = totbig;
        if (s->rank == 0)
            dm_log_warn("flock: %d clusters are too many for the centroid steps (at most %d): small components "
                        "are noise and clusters are not merged (a larger --min-cluster makes fewer clusters)",
                        totbig, DM_FLOCK_CENTROID_MAX);
    }
    /* the centroid sums are computed once: the merge's are the attachment's plus the sums of the
     * documents it attached (integer sums: the same bits as summing the new labels afresh), and the
     * refinement's first step takes them (relabelled by the merge) */
    centroid_entry *sums = NULL;
    size_t nsums = 0;
    if (rc == DM_OK && opt->attach == DM_FLOCK_SMALL_CENTROID && !s->centroid_skipped) {
        /* the sums are kept up to date for the merge and the refinement's first step */
        const int keep = opt->merge > 0.0 || opt->refine > 0;
        int32_t *before = keep ? dm_malloc(sizeof *before * (n ? n : 1)) : NULL;
        rc = keep && !before ? DM_ERR(DM_ERR_NOMEM, "flock: out of memory") : DM_OK;
        if (before) memcpy(before, cl, sizeof *before * n);
        rc = dm_ctx_agree(s->ctx, rc);
        dm_timer_start("flock.clusters.centroids");
        if (rc == DM_OK) rc = centroid_sums(s, cl, &sums, &nsums);
        dm_timer_stop("flock.clusters.centroids");
        dm_timer_start("flock.clusters.attach");
        if (rc == DM_OK) rc = attach_centroid(s, cl, totbig, sums, nsums);
        dm_timer_stop("flock.clusters.attach");
        rc = dm_ctx_agree(s->ctx, rc);
        if (rc == DM_OK && before) {
            for (size_t i = 0; i < n; i++) before[i] = before[i] < 0 ? cl[i] : -1; /* the attached */
            centroid_entry *add = NULL;
            size_t nadd = 0;
            dm_timer_start("flock.clusters.centroids");
            rc = centroid_sums(s, before, &add, &nadd);
            dm_timer_stop("flock.clusters.centroids");
            centroid_entry *both = rc == DM_OK ? dm_realloc(sums, sizeof *both * (nsums + nadd + 1)) : NULL;
            if (rc == DM_OK && !both) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for centroids");
            if (both) {
                sums = both;
                if (nadd) memcpy(sums + nsums, add, sizeof *sums * nadd);
                nsums += nadd;
                rc = centroid_reduce(&sums, &nsums);
            }
            dm_free(add);
            rc = dm_ctx_agree(s->ctx, rc);
        }
        dm_free(before);
    } else if (rc == DM_OK && opt->attach == DM_FLOCK_SMALL_NEIGHBOUR) {
        int32_t *hcl = dm_malloc(sizeof *hcl * (nh ? nh : 1));
        uint64_t *tmp = dm_malloc(sizeof *tmp * (n ? n : 1));
        if (!hcl || !tmp) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
        if (rc == DM_OK) {
            for (size_t i = 0; i < n; i++) tmp[i] = (uint64_t)(int64_t)cl[i];
            if (s->size > 1) rc = halo_values(s, tmp, halo_lab, 500);
            for (size_t h = 0; h < nh && rc == DM_OK; h++) hcl[h] = (int32_t)(int64_t)halo_lab[h];
        }
        rc = dm_ctx_agree(s->ctx, rc);
        if (rc == DM_OK) rc = attach_small(s, cl, hcl);
        rc = dm_ctx_agree(s->ctx, rc);
        dm_free(hcl);
        dm_free(tmp);
    }
    if (rc == DM_OK && opt->merge > 0.0 && !s->centroid_skipped) {
        dm_timer_start("flock.clusters.centroids");
        if (!sums) rc = centroid_sums(s, cl, &sums, &nsums);
        dm_timer_stop("flock.clusters.centroids");
        int32_t *map = rc == DM_OK ? dm_malloc(sizeof *map * (size_t)(totbig > 0 ? totbig : 1)) : NULL;
        if (rc == DM_OK && !map) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory merging clusters");
        dm_timer_start("flock.clusters.merge");
        if (rc == DM_OK) rc = merge_centroid(s, cl, totbig, opt->merge, n_clusters, sums, nsums, map);
        /* the sums of the merged clusters are the sums of their parts (integer sums: the same bits
         * as summing the merged labels afresh), kept for the refinement's first step */
        if (rc == DM_OK && opt->refine > 0 && *n_clusters < totbig) {
            for (size_t q = 0; q < nsums; q++)
                sums[q].key = (sums[q].key & ~(uint64_t)0xffffffffu) | (uint32_t)map[sums[q].key & 0xffffffffu];
            rc = centroid_reduce(&sums, &nsums);
        }
        dm_timer_stop("flock.clusters.merge");
        dm_free(map);
        rc = dm_ctx_agree(s->ctx, rc);
    }
    dm_timer_stop("flock.clusters.small_merge");
    if (rc == DM_OK && opt->refine > 0 && !s->centroid_skipped) {
        /* the sums of the labels as they are now, if the steps above computed them: the first step
         * needs no pass of its own (on a corpus whose clusters need no repair, the only step) */
        dm_timer_start("flock.clusters.refine");
        if (g_refine_fresh) {
            dm_free(sums);
            sums = NULL;
            nsums = 0;
        }
        rc = refine_centroid(s, cl, n_clusters, opt->refine, &s->refine_steps, &s->refine_moved, &sums, nsums);
        dm_timer_stop("flock.clusters.refine");
    }
    dm_free(sums);
    if (rc == DM_OK) {
        dm_free(s->labels);
        s->labels = cl;
        cl = NULL;
    }
    dm_flock_edges_free(&e);
    dm_free(parent);
    dm_free(lab);
    dm_free(own_lab);
    dm_free(halo_lab);
    dm_free(crossing);
    dm_free(local_cnt);
    dm_free(local_min);
    dm_free(cl);
    dm_free(gsize);
    dm_free(pairs);
    dm_free(all);
    dm_free(big);
    dm_free(allbig);
    dm_timer_stop("flock.clusters");
    return dm_ctx_agree(s->ctx, rc);
}

/* ---- gathering the result ----------------------------------------------------------------------- */

int dm_flock_gather_records(const dm_flock_sim *s, const double *rec, size_t n, int width, double *all)
{
    DM_ASSERT(s->n_global <= (uint64_t)INT32_MAX);
    int cnt = (int)n, *counts = NULL, *displs = NULL, rc = DM_OK;
    if (s->rank == 0) {
        counts = dm_malloc(sizeof *counts * (size_t)s->size);
        displs = dm_malloc(sizeof *displs * (size_t)s->size);
        if (!counts || !displs) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory gathering records");
    }
    rc = dm_ctx_agree(s->ctx, rc);
    if (rc == DM_OK && MPI_Gather(&cnt, 1, MPI_INT, counts, 1, MPI_INT, 0, s->comm) != MPI_SUCCESS)
        rc = DM_ERR(DM_ERR_MPI, "flock: MPI_Gather failed");
    if (rc == DM_OK && s->rank == 0) {
        int64_t tot = 0;
        for (int k = 0; k < s->size; k++) {
            displs[k] = (int)tot;
            tot += counts[k];
        }
        DM_ASSERT((uint64_t)tot == s->n_global); /* conservation: every document has one owner */
    }
    if (rc == DM_OK) {
        MPI_Datatype rt;
        MPI_Type_contiguous(width, MPI_DOUBLE, &rt);
        MPI_Type_commit(&rt);
        if (MPI_Gatherv(rec, cnt, rt, all, counts, displs, rt, 0, s->comm) != MPI_SUCCESS)
            rc = DM_ERR(DM_ERR_MPI, "flock: MPI_Gatherv failed");
        MPI_Type_free(&rt);
    }
    dm_free(counts);
    dm_free(displs);
    return dm_ctx_agree(s->ctx, rc);
}

int dm_flock_gather(dm_flock_result *out, dm_flock_sim *s, const dm_vectors *vec)
{
    memset(out, 0, sizeof *out);
    out->n = s->n_global;
    out->row_base = vec->row_base;
    out->n_rows = vec->n_rows;
    dm_flock_view v;
    int rc = dm_flock_sim_view(s, &v);
    int32_t nc = 0;
    if (s->labels)
        for (size_t i = 0; i < v.n; i++)
            if (s->labels[i] + 1 > nc) nc = s->labels[i] + 1;
    MPI_Allreduce(MPI_IN_PLACE, &nc, 1, MPI_INT32_T, MPI_MAX, s->comm);
    out->n_clusters = nc;
    size_t n = v.n;
    double *rec = dm_malloc(sizeof *rec * 4 * (n ? n : 1));
    if (!rec && rc == DM_OK) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    if (rc == DM_OK)
        for (size_t i = 0; i < n; i++) {
            rec[4 * i] = (double)v.id[i];
            rec[4 * i + 1] = v.x[i];
            rec[4 * i + 2] = v.y[i];
            rec[4 * i + 3] = s->labels ? (double)s->labels[i] : -1.0;
        }
    /* dm_flock_gather_records counts records in an int */
    if (rc == DM_OK && s->n_global > (uint64_t)INT32_MAX)
        rc = DM_ERR(DM_ERR_UNSUPPORTED, "flock: gathering %llu documents on one rank (at most 2^31 - 1)",
                    (unsigned long long)s->n_global);
    int *counts = NULL, *displs = NULL;
    double *all = NULL;
    uint64_t *rows = NULL;
    int32_t *scat = NULL;
    if (s->rank == 0 && rc == DM_OK) {
        counts = dm_malloc(sizeof *counts * (size_t)s->size);
        displs = dm_malloc(sizeof *displs * (size_t)s->size);
        all = dm_malloc(sizeof *all * 4 * (size_t)s->n_global);
        out->x = dm_malloc(sizeof *out->x * (size_t)s->n_global);
        out->y = dm_malloc(sizeof *out->y * (size_t)s->n_global);
        out->cluster = dm_malloc(sizeof *out->cluster * (size_t)s->n_global);
        rows = dm_malloc(sizeof *rows * 2 * (size_t)s->size);
        if (!counts || !displs || !all || !out->x || !out->y || !out->cluster || !rows)
            rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory gathering results");
    }
    out->row_cluster = dm_malloc(sizeof *out->row_cluster * (size_t)(vec->n_rows ? vec->n_rows : 1));
    if (!out->row_cluster && rc == DM_OK) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    rc = dm_ctx_agree(s->ctx, rc);
    if (rc == DM_OK) rc = dm_flock_gather_records(s, rec, n, 4, all);
    if (rc == DM_OK) {
        uint64_t mine[2] = {vec->row_base, vec->n_rows};
        MPI_Gather(mine, 2, MPI_UINT64_T, rows, 2, MPI_UINT64_T, 0, s->comm);
        if (s->rank == 0) {
            for (uint64_t k = 0; k < s->n_global; k++) {
                uint64_t id = (uint64_t)all[4 * k];
                DM_ASSERT(id < s->n_global);
                out->x[id] = all[4 * k + 1];
                out->y[id] = all[4 * k + 2];
                out->cluster[id] = (int32_t)all[4 * k + 3];
            }
            for (int k = 0; k < s->size; k++) {
                counts[k] = (int)rows[2 * k + 1];
                displs[k] = (int)rows[2 * k];
            }
        }
        scat = out->cluster;
        MPI_Scatterv(scat, counts, displs, MPI_INT32_T, out->row_cluster, (int)vec->n_rows, MPI_INT32_T, 0, s->comm);
    }
    dm_free(rec);
    dm_free(counts);
    dm_free(displs);
    dm_free(all);
    dm_free(rows);
    if (rc != DM_OK) dm_flock_result_free(out);
    return rc;
}

void dm_flock_result_free(dm_flock_result *r)
{
    dm_free(r->x);
    dm_free(r->y);
    dm_free(r->cluster);
    dm_free(r->row_cluster);
    r->x = r->y = NULL;
    r->cluster = r->row_cluster = NULL;
}
