/* bench_flock: the flocking benchmark. Runs docmine's flock on synthetic vectors (N documents of
 * about 400 distinct terms, K topics; --docs-per-rank for weak scaling) or on a corpus vectorised
 * in the same process (--corpus, e.g. Reuters-21578 restricted to its top-10 single-label subset),
 * and prints a table with the per-iteration breakdown (grid sort, detection, similarity, forces,
 * communication; min/avg/max over ranks), throughput, pair and cache statistics, memory per
 * document and the documents that fit one GPU, and the clustering quality (NMI, ARI, purity)
 * next to a seeded spherical k-means on the same vectors (--kmeans). --study runs a parameter
 * study (threshold x weights) and reports the quality of each setting. --json FILE writes it all.
 * Reference: DESIGN.md section 9 (benchmarks are programs) and the targets. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/common/bench_util.h"
#include "common/alloc.h"
#include "common/context.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/rng.h"
#include "common/status.h"
#include "common/timer.h"
#include "common/tune/tune.h"
#include "flock/flock.h"
#include "flock/flock_synth.h"
#include "tfidf/tfidf.h"

typedef struct bopts {
    uint64_t docs, docs_per_rank;
    int topics, tokens, iterations;
    const char *corpus, *vocab_out, *vectors_out, *json, *baseline;
    int top_labels;
    int kmeans, study, cluster_study;
    int sublinear;
    double study_thr[16], study_merges[16]; /* --cluster-study grid (-1 counts: not given) */
    int study_mins[16], study_thr_n, study_mins_n, study_merges_n;
    double min_df, max_df;      /* corpus: min_df (count >= 1) and max_df (fraction) of the TF-IDF */
    dm_flock_options fo;
    dm_flock_cluster_options co;
} bopts;

static void usage(void)
{
    printf("usage: [mpiexec -n P] bench_flock [options]\n"
           "  --docs N              synthetic documents in total (default 1000000)\n"
           "  --docs-per-rank N     weak scaling: N documents per rank (instead of --docs)\n"
           "  --topics K            synthetic topics (default 20)\n"
           "  --tokens T            words per synthetic document (default 600: ~400 distinct terms)\n"
           "  --corpus PATH         vectorise a corpus instead (TF-IDF, CPU), e.g. Reuters-21578:\n"
           "                        --corpus \"$DOCMINE_DATASETS/reuters21578\" (the path is used as given)\n"
           "  --top-labels K        keep the documents with exactly one label among the K most\n"
           "                        frequent (default 10 with --corpus; 0 = all)\n"
           "  --iterations I        (default 500)\n"
           "  --threshold T --radius R --neighbours K --vmax V --shrink F --weights S,D,A,C\n"
           "                        the model (defaults 0.10, 1.0, 15, 0.5, 0.5, 0.02,0.05,0.30,0.05)\n"
           "  --migrate-every K     boids that left their slice migrate after every K-th iteration\n"
           "                        (default 0: the largest K up to 4 that the slices allow)\n"
           "  --min-cluster N --small noise|neighbour|centroid --cluster-threshold T --merge M\n"
           "                        cluster options (defaults 5, centroid, the model's T, 0.5; --merge 0: off)\n"
           "                        (--attach = --small neighbour)\n"
           "  --sublinear --min-df N --max-df F   corpus: TF-IDF options (tf = 1 + ln n; keep terms in\n"
           "                        at least N documents and at most a fraction F of them)\n"
           "  --kmeans              seeded spherical k-means on the same vectors (rank 0)\n"
           "  --study               parameter study: threshold x weight presets (quality table)\n"
           "  --confusion           print the clusters x classes contingency table of the run\n"
           "  --cluster-study       one run, then the clusters of its final state for cluster threshold x\n"
           "                        min cluster size x small components (noise, centroid): quality table\n"
           "  --study-thresholds T1,T2,..  cluster thresholds of --cluster-study (default model T,\n"
           "                        0.15,0.2,0.25,0.3; below -1 = the model's T; at most 16)\n"
           "  --study-mins N1,N2,.. minimum cluster sizes of --cluster-study (default 5,10,20,50,100; at most 16)\n"
           "  --study-merges M1,..  --cluster-study: also each row with its clusters merged while two\n"
           "                        centroids have cosine >= M (--merge; a post-processing step; at most 16)\n"
           "  --refine N            then up to N refinement steps (spherical k-means steps from the\n"
           "                        clusters; --cluster-study: each row also refined; default 30, 0: off)\n"
           "  --backend cpu|cuda|auto  (default auto: cuda when a GPU is present)\n"
           "  --seed N              (default 42)\n"
           "  --json FILE           write the results as JSON (atomically: a temporary name, then a rename)\n"
           "  --baseline FILE       the JSON of the same run on one rank (--docs-per-rank N): prints the\n"
           "                        weak-scaling efficiency t(1 rank) / t(P ranks) per iteration (checked\n"
           "                        before the run)\n"
           "  --vocab-out FILE      with --corpus: write the vocabulary (id, term, df) for docmine flock --vocab\n"
           "  --vectors-out FILE    write the input vectors (.dmv) for docmine flock --vectors\n"
           "The output starts with the command line, the GPU and the date (what bench/RESULTS.md records).\n"
           "Exit codes: 0 ok, 1 runtime error (an input, a run or an output failed), 2 usage error.\n");
}

/* ---- corpus input: TF-IDF vectors of the top-K single-label subset ----------------------------- */

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Keeps the rows with exactly one label among the K most frequent single labels (over all ranks:
 * label counts are gathered on every rank). Rebuilds v with the kept rows; row_base recomputed. */
static int keep_top_labels(dm_vectors *v, int K, const dm_ctx *ctx)
{
    /* gather the single labels of all ranks */
    size_t n = (size_t)v->n_rows, bytes = 0;
    for (size_t r = 0; r < n; r++) {
        const char *l = dm_vectors_labels(v, r);
        if (*l && !strchr(l, ',')) bytes += strlen(l) + 1;
    }
    char *mine = dm_malloc(bytes + 1);
    if (!mine) return DM_ERR(DM_ERR_NOMEM, "out of memory");
    size_t at = 0;
    for (size_t r = 0; r < n; r++) {
        const char *l = dm_vectors_labels(v, r);
        if (*l && !strchr(l, ',')) {
            memcpy(mine + at, l, strlen(l) + 1);
            at += strlen(l) + 1;
        }
    }
    int cnt = (int)at, *counts = dm_malloc(sizeof(int) * (size_t)ctx->size), *displs = dm_malloc(sizeof(int) * (size_t)ctx->size);
    MPI_Allgather(&cnt, 1, MPI_INT, counts, 1, MPI_INT, ctx->world);
    int tot = 0;
    for (int k = 0; k < ctx->size; k++) {
        displs[k] = tot;
        tot += counts[k];
    }
    char *all = dm_malloc((size_t)tot + 1);
    MPI_Allgatherv(mine, cnt, MPI_CHAR, all, counts, displs, MPI_CHAR, ctx->world);
    /* count labels */
    size_t nl = 0;
    for (int i = 0; i < tot; i++) nl += all[i] == '\0';
    char **names = dm_malloc(sizeof *names * (nl + 1));
    size_t k = 0;
    for (int i = 0; i < tot; i += (int)strlen(all + i) + 1) names[k++] = all + i;
    qsort(names, nl, sizeof *names, cmp_cstr);
    /* unique with counts; pick the K largest (ties by name) */
    typedef struct { const char *name; size_t c; } lc;
    lc *u = dm_malloc(sizeof *u * (nl + 1));
    size_t nu = 0;
    for (size_t i = 0; i < nl; i++) {
        if (nu && strcmp(u[nu - 1].name, names[i]) == 0) u[nu - 1].c++;
        else u[nu++] = (lc){names[i], 1};
    }
    for (size_t i = 0; i < nu; i++)
        for (size_t j = i + 1; j < nu; j++)
            if (u[j].c > u[i].c) {
                lc t = u[i];
                u[i] = u[j];
                u[j] = t;
            }
    size_t keepn = (size_t)K < nu ? (size_t)K : nu;
    /* rebuild the local rows */
    dm_vectors o;
    memset(&o, 0, sizeof o);
    o.n_cols = v->n_cols;
    o.flags = v->flags;
    o.row_off = dm_malloc(sizeof *o.row_off * (n + 1));
    o.col = dm_malloc(sizeof *o.col * (size_t)(dm_vectors_nnz(v) + 1));
    o.val = dm_malloc(sizeof *o.val * (size_t)(dm_vectors_nnz(v) + 1));
    o.id_off = dm_malloc(sizeof *o.id_off * (n + 1));
    o.ids = dm_malloc((size_t)v->id_off[n] + 1);
    o.label_off = dm_malloc(sizeof *o.label_off * (n + 1));
    o.labels = dm_malloc((size_t)v->label_off[n] + 1);
    uint64_t r2 = 0, nz = 0, ib = 0, lb = 0;
    o.row_off[0] = o.id_off[0] = o.label_off[0] = 0;
    for (size_t r = 0; r < n; r++) {
        const char *l = dm_vectors_labels(v, r);
        int keep = 0;
        if (*l && !strchr(l, ','))
            for (size_t q = 0; q < keepn; q++) keep |= strcmp(u[q].name, l) == 0;
        if (!keep) continue;
        uint64_t a = v->row_off[r], b = v->row_off[r + 1];
        memcpy(o.col + nz, v->col + a, 4 * (b - a));
        memcpy(o.val + nz, v->val + a, 4 * (b - a));
        nz += b - a;
        o.row_off[r2 + 1] = nz;
        size_t il = strlen(dm_vectors_id(v, r)) + 1, ll = strlen(l) + 1;
        memcpy(o.ids + ib, dm_vectors_id(v, r), il);
        memcpy(o.labels + lb, l, ll);
        ib += il;
        lb += ll;
        o.id_off[r2 + 1] = ib;
        o.label_off[r2 + 1] = lb;
        r2++;
    }
    o.n_rows = r2;
    uint64_t base = 0;
    MPI_Exscan(&r2, &base, 1, MPI_UINT64_T, MPI_SUM, ctx->world);
    o.row_base = ctx->rank == 0 ? 0 : base;
    if (ctx->rank == 0) {
        printf("top-%zu single-label subset:", keepn);
        for (size_t q = 0; q < keepn; q++) printf(" %s(%zu)", u[q].name, u[q].c);
        printf("\n");
    }
    dm_vectors_free(v);
    *v = o;
    dm_free(mine), dm_free(counts), dm_free(displs), dm_free(all), dm_free(names), dm_free(u);
    return DM_OK;
}

/* ---- spherical k-means (the peer on the same vectors; rank 0, all documents) ------------------ */

typedef struct km_result {
    int32_t *assign;
    int iterations;
    double seconds;
} km_result;

/* Unit-normalised copies of the rows (as flock uses them); dense centroids; k-means++ seeding from
 * the counter-based RNG; Lloyd iterations until no assignment changes (at most 100). */
static int spherical_kmeans(km_result *res, const dm_vectors *v, int K, uint64_t seed)
{
    size_t n = (size_t)v->n_rows, d = (size_t)v->n_cols;
    double t0 = dm_wtime();
    float *val = dm_malloc(sizeof *val * (size_t)(dm_vectors_nnz(v) + 1));
    double *cen = dm_calloc((size_t)K * d, sizeof *cen), *best = dm_malloc(sizeof *best * n);
    res->assign = dm_malloc(sizeof *res->assign * (n ? n : 1));
    if (!val || !cen || !best || !res->assign) return DM_ERR(DM_ERR_NOMEM, "k-means: out of memory");
    for (size_t r = 0; r < n; r++) {
        double ss = 0;
        for (uint64_t q = v->row_off[r]; q < v->row_off[r + 1]; q++) ss += (double)v->val[q] * v->val[q];
        double nr = ss > 0 ? sqrt(ss) : 1;
        for (uint64_t q = v->row_off[r]; q < v->row_off[r + 1]; q++) val[q] = (float)(v->val[q] / nr);
    }
    /* k-means++ with distance 1 - cos */
    size_t first = (size_t)(dm_rng_uniform(seed, 0, 0) * n);
    for (uint64_t q = v->row_off[first]; q < v->row_off[first + 1]; q++) cen[v->col[q]] = val[q];
    for (size_t r = 0; r < n; r++) best[r] = 2.0;
    for (int c = 1; c <= K; c++) {
        double tot = 0;
        const double *cc = cen + (size_t)(c - 1) * d;
        for (size_t r = 0; r < n; r++) {
            double dot = 0;
            for (uint64_t q = v->row_off[r]; q < v->row_off[r + 1]; q++) dot += val[q] * cc[v->col[q]];
            double dist = 1 - dot;
            if (dist < best[r]) best[r] = dist;
            tot += best[r] > 0 ? best[r] : 0;
        }
        if (c == K) break;
        double u = dm_rng_uniform(seed, 1, (uint64_t)c) * tot, acc = 0;
        size_t pick = n - 1;
        for (size_t r = 0; r < n; r++) {
            acc += best[r] > 0 ? best[r] : 0;
            if (acc >= u) {
                pick = r;
                break;
            }
        }
        for (uint64_t q = v->row_off[pick]; q < v->row_off[pick + 1]; q++) cen[(size_t)c * d + v->col[q]] = val[q];
    }
    for (size_t r = 0; r < n; r++) res->assign[r] = -1;
    int it = 0;
    for (; it < 100; it++) {
        size_t changed = 0;
        const long nl = (long)n;
#pragma omp parallel for schedule(dynamic, 64) reduction(+ : changed)
        for (long r = 0; r < nl; r++) {
            int bc = 0;
            double bd = -2;
            for (int c = 0; c < K; c++) {
                const double *cc = cen + (size_t)c * d;
                double dot = 0;
                for (uint64_t q = v->row_off[r]; q < v->row_off[r + 1]; q++) dot += val[q] * cc[v->col[q]];
                if (dot > bd) bd = dot, bc = c;
            }
            if (res->assign[r] != bc) changed++;
            res->assign[r] = bc;
        }
        if (!changed) break;
        memset(cen, 0, sizeof *cen * (size_t)K * d);
        for (size_t r = 0; r < n; r++)
            for (uint64_t q = v->row_off[r]; q < v->row_off[r + 1]; q++)
                cen[(size_t)res->assign[r] * d + v->col[q]] += val[q];
        for (int c = 0; c < K; c++) {
            double ss = 0;
            for (size_t j = 0; j < d; j++) ss += cen[(size_t)c * d + j] * cen[(size_t)c * d + j];
            double nr = ss > 0 ? sqrt(ss) : 1;
            for (size_t j = 0; j < d; j++) cen[(size_t)c * d + j] /= nr;
        }
    }
    res->iterations = it;
    res->seconds = dm_wtime() - t0;
    dm_free(val), dm_free(cen), dm_free(best);
    return DM_OK;
}

/* ---- helpers ---------------------------------------------------------------------------------- */

/* Gathers every rank's labels, and vectors when asked (k-means), to rank 0. */
static int gather_vectors(dm_vectors *all, const dm_vectors *v, int with_vectors, const dm_ctx *ctx)
{
    memset(all, 0, sizeof *all);
    /* without vectors: the labels only (rows empty) */
    uint64_t mine[3] = {v->n_rows, with_vectors ? dm_vectors_nnz(v) : 0, v->label_off[v->n_rows]};
    uint64_t *g = dm_malloc(sizeof *g * 3 * (size_t)ctx->size);
    MPI_Gather(mine, 3, MPI_UINT64_T, g, 3, MPI_UINT64_T, 0, ctx->world);
    int *c1 = dm_malloc(sizeof(int) * (size_t)ctx->size), *d1 = dm_malloc(sizeof(int) * (size_t)ctx->size);
    int *c2 = dm_malloc(sizeof(int) * (size_t)ctx->size), *d2 = dm_malloc(sizeof(int) * (size_t)ctx->size);
    int *c3 = dm_malloc(sizeof(int) * (size_t)ctx->size), *d3 = dm_malloc(sizeof(int) * (size_t)ctx->size);
    uint64_t N = 0, Z = 0, L = 0;
    if (ctx->rank == 0) {
        for (int k = 0; k < ctx->size; k++) {
            c1[k] = (int)g[3 * k], d1[k] = (int)N, N += g[3 * k];
            c2[k] = (int)g[3 * k + 1], d2[k] = (int)Z, Z += g[3 * k + 1];
            c3[k] = (int)g[3 * k + 2], d3[k] = (int)L, L += g[3 * k + 2];
        }
        all->n_rows = N;
        all->n_cols = v->n_cols;
        all->row_off = dm_malloc(sizeof *all->row_off * (N + 1));
        all->col = dm_malloc(sizeof *all->col * (Z + 1));
        all->val = dm_malloc(sizeof *all->val * (Z + 1));
        all->label_off = dm_malloc(sizeof *all->label_off * (N + 1));
        all->labels = dm_malloc(L + 1);
        all->id_off = dm_calloc(N + 1, sizeof *all->id_off);
        all->ids = dm_calloc(1, 1);
    }
    /* row lengths, not offsets, travel */
    uint64_t *len = dm_malloc(sizeof *len * (v->n_rows + 1)), *llen = dm_malloc(sizeof *llen * (v->n_rows + 1));
    for (uint64_t r = 0; r < v->n_rows; r++) {
        len[r] = with_vectors ? v->row_off[r + 1] - v->row_off[r] : 0;
        llen[r] = v->label_off[r + 1] - v->label_off[r];
    }
    uint64_t *alen = ctx->rank == 0 ? dm_malloc(sizeof *alen * (N + 1)) : NULL;
    uint64_t *allen = ctx->rank == 0 ? dm_malloc(sizeof *allen * (N + 1)) : NULL;
    MPI_Gatherv(len, (int)v->n_rows, MPI_UINT64_T, alen, c1, d1, MPI_UINT64_T, 0, ctx->world);
    MPI_Gatherv(llen, (int)v->n_rows, MPI_UINT64_T, allen, c1, d1, MPI_UINT64_T, 0, ctx->world);
    MPI_Gatherv(v->col + v->row_off[0], (int)mine[1], MPI_UINT32_T, all->col, c2, d2, MPI_UINT32_T, 0, ctx->world);
    MPI_Gatherv(v->val + v->row_off[0], (int)mine[1], MPI_FLOAT, all->val, c2, d2, MPI_FLOAT, 0, ctx->world);
    MPI_Gatherv(v->labels + v->label_off[0], (int)mine[2], MPI_CHAR, all->labels, c3, d3, MPI_CHAR, 0, ctx->world);
    if (ctx->rank == 0) {
        all->row_off[0] = all->label_off[0] = 0;
        for (uint64_t r = 0; r < N; r++) {
            all->row_off[r + 1] = all->row_off[r] + alen[r];
            all->label_off[r + 1] = all->label_off[r] + allen[r];
        }
    }
    dm_free(g), dm_free(c1), dm_free(d1), dm_free(c2), dm_free(d2), dm_free(c3), dm_free(d3);
    dm_free(len), dm_free(llen), dm_free(alen), dm_free(allen);
    return DM_OK;
}

/* True classes from labels (first label, byte order of names); -1 unlabelled. */
static int32_t *classes(const dm_vectors *all)
{
    size_t n = (size_t)all->n_rows;
    int32_t *c = dm_malloc(sizeof *c * (n ? n : 1));
    char **names = dm_malloc(sizeof *names * (n ? n : 1));
    size_t m = 0;
    for (size_t r = 0; r < n; r++)
        if (*dm_vectors_labels(all, r)) names[m++] = (char *)dm_vectors_labels(all, r);
    qsort(names, m, sizeof *names, cmp_cstr);
    size_t u = 0;
    for (size_t i = 0; i < m; i++)
        if (!u || strcmp(names[i], names[u - 1])) names[u++] = names[i];
    for (size_t r = 0; r < n; r++) {
        const char *l = dm_vectors_labels(all, r);
        char *key = (char *)l;
        char **f = *l ? bsearch(&key, names, u, sizeof *names, cmp_cstr) : NULL;
        c[r] = f ? (int32_t)(f - names) : -1;
    }
    dm_free(names);
    return c;
}

static double stat_of(const dm_stat *st, int n, const char *name, int which)
{
    for (int i = 0; i < n; i++)
        if (strcmp(st[i].name, name) == 0) return which == 0 ? st[i].min : which == 1 ? st[i].avg : st[i].max;
    return 0;
}

static int g_confusion; /* --confusion: print the contingency table of the run (rank 0) */

/* One run: flock, clusters, gather; quality on rank 0 against truth (may be NULL). */
typedef struct run_result {
    double wall, nmi, ari, purity;
    int32_t clusters;
    int refine_steps;
    uint64_t noise;
    dm_flock_stats stats; /* summed */
    double steps_searches, steps_tune_s; /* the tuner's searches inside the timed steps, this rank */
} run_result;

static int run_once(run_result *out, const dm_ctx *ctx, const dm_vectors *v, const dm_flock_options *fo,
                    const dm_flock_cluster_options *co, const int32_t *truth, int verbose_progress)
{
    memset(out, 0, sizeof *out);
    dm_flock_sim *s = NULL;
    MPI_Barrier(ctx->world);
    double t0 = dm_wtime();
    int rc = dm_flock_sim_init(&s, ctx, v, fo);
    double t1 = dm_wtime();
    if (rc == DM_OK) {
        const double c0 = (double)dm_counter_get("tune.searches"), s0 = dm_timer_get("tune");
        dm_timer_start("bench.run");
        rc = dm_flock_sim_run(s);
        out->steps_searches = (double)dm_counter_get("tune.searches") - c0;
        out->steps_tune_s = dm_timer_get("tune") - s0;
        MPI_Barrier(ctx->world);
        dm_timer_stop("bench.run");
    }
    out->wall = dm_wtime() - t1;
    (void)t0;
    (void)verbose_progress;
    int32_t k = 0;
    if (rc == DM_OK) rc = dm_flock_sim_cluster(s, co, &k);
    out->clusters = k;
    out->refine_steps = s ? dm_flock_sim_refined(s, NULL) : 0;
    dm_flock_result r;
    memset(&r, 0, sizeof r);
    if (rc == DM_OK) rc = dm_flock_gather(&r, s, v);
    if (rc == DM_OK) {
        const dm_flock_stats *ls = dm_flock_sim_stats(s);
        uint64_t a[8] = {ls->pairs, ls->similar, ls->halo_sent, ls->migrated_out, ls->migrated_in, ls->seam_crossings,
                         ls->sim_cache_hits, ls->halo_vectors};
        uint64_t b[8];
        MPI_Allreduce(a, b, 8, MPI_UINT64_T, MPI_SUM, ctx->world);
        out->stats.pairs = b[0], out->stats.similar = b[1], out->stats.halo_sent = b[2];
        out->stats.migrated_out = b[3], out->stats.migrated_in = b[4], out->stats.seam_crossings = b[5];
        out->stats.sim_cache_hits = b[6], out->stats.halo_vectors = b[7];
        dm_flock_stats_publish(s);
    }
    if (rc == DM_OK && ctx->rank == 0) {
        for (uint64_t i = 0; i < r.n; i++) out->noise += r.cluster[i] < 0;
        if (truth && g_confusion) {
            /* clusters (by size) x classes: where each class went */
            int32_t nc = 0, K = r.n_clusters;
            for (uint64_t i = 0; i < r.n; i++)
                if (truth[i] + 1 > nc) nc = truth[i] + 1;
            uint64_t *ct = calloc((size_t)(K + 1) * (size_t)(nc > 0 ? nc : 1), sizeof *ct);
            for (uint64_t i = 0; ct && i < r.n; i++)
                if (truth[i] >= 0) ct[(size_t)(r.cluster[i] + 1) * (size_t)nc + (size_t)truth[i]]++;
            printf("contingency (cluster: size | documents per class in class order):\n");
            for (int32_t q = -1; ct && q < K; q++) {
                uint64_t tot = 0;
                for (int32_t c = 0; c < nc; c++) tot += ct[(size_t)(q + 1) * (size_t)nc + (size_t)c];
                if (tot < 20 && q >= 0) continue;
                printf("%5d: %5llu |", q, (unsigned long long)tot);
                for (int32_t c = 0; c < nc; c++) printf(" %5llu", (unsigned long long)ct[(size_t)(q + 1) * (size_t)nc + (size_t)c]);
                printf("\n");
            }
            free(ct);
        }
        if (truth) {
            dm_metrics m;
            if (dm_metrics_compute(&m, truth, r.cluster, (size_t)r.n) == DM_OK) {
                out->nmi = m.nmi;
                out->ari = m.ari;
                out->purity = m.purity;
            }
        }
    }
    dm_flock_result_free(&r);
    dm_flock_sim_free(s);
    return dm_ctx_agree(ctx, rc);
}

/* One run, then the clusters of its final state for a grid of cluster options (cluster threshold
 * x min size x small components); prints and returns the quality of each (rank 0). */
static int cluster_study(json_t *rows, const dm_ctx *ctx, const dm_vectors *v, const dm_flock_options *fo,
                         const int32_t *truth, const double *cthr, size_t ncthr, const int *mins, size_t nmins,
                         const double *merges, size_t nmerges, int refine)
{
    static const int smalls[] = {DM_FLOCK_SMALL_NOISE, DM_FLOCK_SMALL_CENTROID};
    dm_flock_sim *s = NULL;
    double t0 = dm_wtime();
    int rc = dm_flock_sim_init(&s, ctx, v, fo);
    if (rc == DM_OK) rc = dm_flock_sim_run(s);
    if (ctx->rank == 0)
        printf("\ncluster study: %d iterations (%.1f s), T %.3f, weights %.3f,%.3f,%.3f,%.3f\n%-9s %-8s %-9s %8s %8s %8s %9s %8s\n",
               fo->iterations, dm_wtime() - t0, fo->threshold, fo->w_separation, fo->w_dissimilar, fo->w_alignment,
               fo->w_cohesion, "cl.thr", "min", "small", "NMI", "ARI", "purity", "clusters", "noise");
    for (size_t a = 0; a < ncthr && rc == DM_OK; a++)
        for (size_t b = 0; b < nmins && rc == DM_OK; b++)
            for (size_t c = 0; c < sizeof smalls / sizeof smalls[0] && rc == DM_OK; c++)
                for (size_t g = 0; g < 2 * (nmerges + 1) && rc == DM_OK; g++) {
                    const size_t gm = g / 2;
                    if (g % 2 && refine <= 0) continue; /* the refined twin of each row */
                    dm_flock_cluster_options co = {mins[b], smalls[c], cthr[a], gm ? merges[gm - 1] : 0.0,
                                                   g % 2 ? refine : 0};
                    int32_t k = 0;
                    rc = dm_flock_sim_cluster(s, &co, &k);
                    dm_flock_result r;
                    memset(&r, 0, sizeof r);
                    if (rc == DM_OK) rc = dm_flock_gather(&r, s, v);
                    if (rc == DM_OK && ctx->rank == 0) {
                        uint64_t noise = 0;
                        for (uint64_t i = 0; i < r.n; i++) noise += r.cluster[i] < 0;
                        dm_metrics m;
                        memset(&m, 0, sizeof m);
                        if (truth) dm_metrics_compute(&m, truth, r.cluster, (size_t)r.n);
                        double thr = cthr[a] < -1 ? fo->threshold : cthr[a];
                        printf("%-9.3f %-8d %-9s %8.4f %8.4f %8.4f %9d %8llu", thr, mins[b], dm_flock_small_name(smalls[c]),
                               m.nmi, m.ari, m.purity, k, (unsigned long long)noise);
                        if (co.merge > 0) printf("  merged at %.3f", co.merge);
                        if (co.refine > 0) printf("  refined (%d steps)", dm_flock_sim_refined(s, NULL));
                        printf("\n");
                        fflush(stdout);
                        json_t *row = json_object();
                        json_object_set_new(row, "cluster_threshold", json_real(thr));
                        json_object_set_new(row, "min_cluster", json_integer(mins[b]));
                        json_object_set_new(row, "small", json_string(dm_flock_small_name(smalls[c])));
                        json_object_set_new(row, "merge", json_real(co.merge));
                        json_object_set_new(row, "refine_steps", json_integer(dm_flock_sim_refined(s, NULL)));
                        json_object_set_new(row, "nmi", json_real(m.nmi));
                        json_object_set_new(row, "ari", json_real(m.ari));
                        json_object_set_new(row, "purity", json_real(m.purity));
                        json_object_set_new(row, "clusters", json_integer(k));
                        json_object_set_new(row, "noise", json_integer((json_int_t)noise));
                        json_array_append_new(rows, row);
                    }
                    dm_flock_result_free(&r);
                }
    dm_flock_sim_free(s);
    return dm_ctx_agree(ctx, rc);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    bopts o;
    memset(&o, 0, sizeof o);
    o.docs = 1000000;
    o.topics = 20;
    o.tokens = 600;
    o.iterations = 500;
    o.top_labels = -1;
    o.fo = (dm_flock_options)DM_FLOCK_OPTIONS_INIT;
    o.co = (dm_flock_cluster_options)DM_FLOCK_CLUSTER_OPTIONS_INIT;
    dm_ctx_options co = DM_CTX_OPTIONS_INIT;
    co.quiet = 0;
    enum { O_DOCS = 256, O_DPR, O_TOPICS, O_TOKENS, O_CORPUS, O_TOPL, O_ITER, O_THR, O_RAD, O_NB, O_VMAX, O_SHR, O_W,
           O_MINC, O_ATT, O_KM, O_STUDY, O_BACK, O_SEED, O_JSON, O_VOCAB, O_VECOUT, O_CTHR, O_BASE, O_SMALL,
           O_CSTUDY, O_SUBL, O_MINDF, O_MAXDF, O_CONF, O_STHR, O_SMINS, O_SMERGE, O_MERGE, O_REFINE, O_MIGR };
    static const struct option lo[] = {
        {"docs", 1, 0, O_DOCS}, {"docs-per-rank", 1, 0, O_DPR}, {"topics", 1, 0, O_TOPICS}, {"tokens", 1, 0, O_TOKENS},
        {"corpus", 1, 0, O_CORPUS}, {"top-labels", 1, 0, O_TOPL}, {"iterations", 1, 0, O_ITER},
        {"threshold", 1, 0, O_THR}, {"radius", 1, 0, O_RAD}, {"neighbours", 1, 0, O_NB}, {"vmax", 1, 0, O_VMAX},
        {"shrink", 1, 0, O_SHR}, {"weights", 1, 0, O_W}, {"min-cluster", 1, 0, O_MINC}, {"attach", 0, 0, O_ATT},
        {"kmeans", 0, 0, O_KM}, {"study", 0, 0, O_STUDY}, {"backend", 1, 0, O_BACK}, {"seed", 1, 0, O_SEED},
        {"json", 1, 0, O_JSON}, {"vocab-out", 1, 0, O_VOCAB}, {"vectors-out", 1, 0, O_VECOUT}, {"cluster-threshold", 1, 0, O_CTHR}, {"baseline", 1, 0, O_BASE},
        {"small", 1, 0, O_SMALL}, {"cluster-study", 0, 0, O_CSTUDY}, {"sublinear", 0, 0, O_SUBL},
        {"min-df", 1, 0, O_MINDF}, {"max-df", 1, 0, O_MAXDF}, {"confusion", 0, 0, O_CONF},
        {"study-thresholds", 1, 0, O_STHR}, {"study-mins", 1, 0, O_SMINS}, {"study-merges", 1, 0, O_SMERGE}, {"merge", 1, 0, O_MERGE}, {"refine", 1, 0, O_REFINE}, {"migrate-every", 1, 0, O_MIGR}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c, bad = 0, rank0 = 0, got_docs = 0, corpus_only = 0, n_merges = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank0);
    bench_init("bench_flock", argc, argv, rank0 == 0);
    opterr = rank0 == 0; /* getopt's own messages (an unknown option, a missing value): rank 0's */
    double wv[4];
    o.study_thr_n = o.study_mins_n = -1;
#define NUM_D(lo_, hi_, dst) bad |= bench_parse_double(oname, optarg, (lo_), (hi_), &(dst)) != 0
#define NUM_I(lo_, hi_, dst) bad |= bench_parse_int(oname, optarg, (lo_), (hi_), &(dst)) != 0
    int li = -1;
    while (!bad && (li = -1, c = getopt_long(argc, argv, "h", lo, &li)) != -1) {
        char oname[64];
        snprintf(oname, sizeof oname, "--%s", li >= 0 ? lo[li].name : "?");
        switch (c) {
        case O_DOCS: bad |= bench_parse_u64(oname, optarg, 1, UINT32_MAX, &o.docs) != 0, got_docs |= 1; break;
        case O_DPR: bad |= bench_parse_u64(oname, optarg, 1, UINT32_MAX, &o.docs_per_rank) != 0, got_docs |= 2; break;
        case O_TOPICS: NUM_I(1, 1 << 20, o.topics), got_docs |= 4; break;
        case O_TOKENS: NUM_I(1, 1 << 24, o.tokens), got_docs |= 4; break;
        case O_CORPUS: o.corpus = optarg; break;
        case O_TOPL: NUM_I(0, INT_MAX, o.top_labels), corpus_only = 1; break;
        case O_ITER: NUM_I(1, INT_MAX, o.fo.iterations); break;
        case O_THR: NUM_D(-1, 1, o.fo.threshold); break;
        case O_RAD: NUM_D(1e-300, 1e300, o.fo.radius); break;
        case O_NB: NUM_D(1e-300, 1e300, o.fo.neighbours); break;
        case O_VMAX: NUM_D(1e-300, 1e300, o.fo.v_max); break;
        case O_SHR: NUM_D(0, 1, o.fo.shrink); break;
        case O_W: {
            int nw = bench_parse_doubles(oname, optarg, 0, DM_FLOCK_WEIGHT_MAX, wv, 4);
            if (nw >= 0 && nw != 4) bench_usage_error("--weights: '%s' is not 4 numbers S,D,A,C", optarg);
            if (nw != 4) {
                bad = 1;
                break;
            }
            o.fo.w_separation = wv[0], o.fo.w_dissimilar = wv[1], o.fo.w_alignment = wv[2], o.fo.w_cohesion = wv[3];
            break;
        }
        case O_MINC: NUM_I(1, INT_MAX, o.co.min_size); break;
        case O_ATT: o.co.attach = DM_FLOCK_SMALL_NEIGHBOUR; break;
        case O_SMALL:
            if (dm_flock_small_parse(optarg, &o.co.attach) != DM_OK)
                bad = 1, bench_usage_error("--small: '%s' is not noise, neighbour or centroid", optarg);
            break;
        case O_CSTUDY: o.cluster_study = 1; break;
        case O_CONF: g_confusion = 1; break;
        case O_STHR:
            o.study_thr_n = bench_parse_doubles(oname, optarg, -1e300, 1, o.study_thr, 16);
            bad |= o.study_thr_n < 0;
            break;
        case O_SMINS:
            o.study_mins_n = bench_parse_ints(oname, optarg, 1, INT_MAX, o.study_mins, 16);
            bad |= o.study_mins_n < 0;
            break;
        case O_SMERGE:
            n_merges = bench_parse_doubles(oname, optarg, 0, 1, o.study_merges, 16);
            bad |= n_merges < 0;
            o.study_merges_n = n_merges > 0 ? n_merges : 0;
            break;
        case O_SUBL: o.sublinear = 1, corpus_only = 1; break;
        case O_MINDF: NUM_D(1, 1e18, o.min_df), corpus_only = 1; break;
        case O_MAXDF:
            NUM_D(0, 1, o.max_df), corpus_only = 1;
            if (!bad && !(o.max_df > 0)) bad = 1, bench_usage_error("--max-df: '%s' is not a fraction in (0, 1]", optarg);
            break;
        case O_CTHR: NUM_D(-1e300, 1, o.co.threshold); break;
        case O_MERGE: NUM_D(0, 1, o.co.merge); break;
        case O_REFINE: NUM_I(0, 1000000, o.co.refine); break;
        case O_MIGR: NUM_I(0, 1000, o.fo.migrate_every); break;
        case O_KM: o.kmeans = 1; break;
        case O_STUDY: o.study = 1; break;
        case O_BACK:
            if (dm_backend_parse(optarg, &co.backend) != DM_OK)
                bad = 1, bench_usage_error("--backend: '%s' is not cpu, cuda or auto", optarg);
            break;
        case O_SEED: bad |= bench_parse_u64(oname, optarg, 0, UINT64_MAX, &co.seed) != 0; break;
        case O_JSON: o.json = optarg; break;
        case O_VOCAB: o.vocab_out = optarg, corpus_only = 1; break;
        case O_VECOUT: o.vectors_out = optarg; break;
        case O_BASE: o.baseline = optarg; break;
        case 'h':
            if (rank0 == 0) usage();
            MPI_Finalize();
            return 0;
        default: /* getopt_long named it */
            bad = 1;
            if (rank0 == 0) fprintf(stderr, "bench_flock: see bench_flock --help\n");
        }
    }
#undef NUM_D
#undef NUM_I
    if (!bad && optind < argc) bad = 1, bench_usage_error("unexpected argument '%s'", argv[optind]);
    if (!bad && (got_docs & 3) == 3) bad = 1, bench_usage_error("--docs and --docs-per-rank: give one of them");
    if (!bad && o.corpus && got_docs)
        bad = 1, bench_usage_error("--corpus: --docs, --docs-per-rank, --topics and --tokens are for synthetic documents");
    if (!bad && !o.corpus && corpus_only)
        bad = 1, bench_usage_error("--top-labels, --sublinear, --min-df, --max-df and --vocab-out need --corpus");
    if (!bad && o.study && o.cluster_study) bad = 1, bench_usage_error("--study and --cluster-study: give one of them");
    if (!bad && o.baseline && (o.study || o.cluster_study))
        bad = 1, bench_usage_error("--baseline: the weak scaling of a plain run (not with --study or --cluster-study)");
    if (!bad && !o.cluster_study && (o.study_thr_n >= 0 || o.study_mins_n >= 0 || n_merges > 0))
        bad = 1, bench_usage_error("--study-thresholds, --study-mins and --study-merges need --cluster-study");
    if (bad) {
        MPI_Finalize();
        return 2;
    }
    if (o.corpus && bench_check_corpus(o.corpus, 0) != 0) { /* one line, before any set-up */
        MPI_Finalize();
        return 1;
    }
    /* the baseline first: a run of minutes must not end without the efficiency it was asked for */
    double base_ms = 0;
    long long base_docs = 0;
    if (o.baseline) {
        char why[512] = "";
        if (rank0 == 0) {
            json_error_t je;
            json_t *b = json_load_file(o.baseline, 0, &je);
            if (!b) snprintf(why, sizeof why, "%s", je.text);
            else if (json_integer_value(json_object_get(b, "ranks")) != 1 ||
                     !(json_number_value(json_object_get(b, "ms_per_iteration")) > 0))
                snprintf(why, sizeof why, "not the JSON of a one-rank run (ranks 1, ms_per_iteration)");
            else {
                base_ms = json_number_value(json_object_get(b, "ms_per_iteration"));
                base_docs = (long long)json_integer_value(json_object_get(b, "documents"));
            }
            json_decref(b);
        }
        MPI_Bcast(why, (int)sizeof why, MPI_CHAR, 0, MPI_COMM_WORLD);
        if (why[0]) {
            bench_error("--baseline %s: %s", o.baseline, why);
            MPI_Finalize();
            return 1;
        }
    }
    dm_ctx ctx;
    int rc = dm_ctx_init(&ctx, &co);
    if (rc != DM_OK) {
        fprintf(stderr, "bench_flock: %s\n", dm_error_message());
        MPI_Finalize();
        return 1;
    }
    bench_print_header(ctx.device >= 0 ? ctx.dev.name : NULL);
    o.fo.seed = ctx.opt.seed;
    if (o.fo.iterations == 0) o.fo.iterations = 500;

    /* input */
    dm_vectors v;
    memset(&v, 0, sizeof v);
    int synthetic = !o.corpus;
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.topics = o.topics;
    so.tokens = o.tokens;
    so.seed = ctx.opt.seed;
    double t_in = dm_wtime();
    if (synthetic) {
        uint64_t n = o.docs_per_rank ? o.docs_per_rank * (uint64_t)ctx.size : o.docs;
        uint64_t first, count;
        dm_flock_share(n, ctx.rank, ctx.size, &first, &count);
        rc = dm_ctx_agree(&ctx, dm_flock_synth_vectors(&v, &so, first, count));
    } else {
        dm_preprocess_options pp = DM_PREPROCESS_OPTIONS_INIT;
        pp.backend = DM_BACKEND_CPU;
        dm_tfidf_options to = DM_TFIDF_OPTIONS_INIT;
        to.backend = DM_BACKEND_CPU;
        to.sublinear = o.sublinear;
        if (o.min_df >= 1) to.min_df_count = (uint64_t)o.min_df;
        if (o.max_df > 0) to.max_df_frac = o.max_df;
        dm_vocab vocab;
        memset(&vocab, 0, sizeof vocab);
        rc = dm_vectorize_corpus(&v, &vocab, NULL, NULL, &ctx, o.corpus, &pp, &to, NULL, NULL);
        if (rc == DM_OK && o.vocab_out && ctx.rank == 0) rc = dm_vocab_write_tsv(&vocab, o.vocab_out, "df");
        dm_vocab_free(&vocab);
        rc = dm_ctx_agree(&ctx, rc);
        int K = o.top_labels < 0 ? 10 : o.top_labels;
        if (rc == DM_OK && K > 0) rc = dm_ctx_agree(&ctx, keep_top_labels(&v, K, &ctx));
    }
    t_in = dm_wtime() - t_in;
    if (rc != DM_OK) {
        if (ctx.rank == 0) fprintf(stderr, "bench_flock: input: %s\n", dm_error_message());
        dm_ctx_free(&ctx);
        MPI_Finalize();
        return 1;
    }
    if (o.vectors_out) {
        rc = dm_ctx_agree(&ctx, dm_vectors_write(&v, o.vectors_out, &ctx));
        if (rc != DM_OK) { /* an output asked for and not written: no run (it used to go on, exit 0) */
            if (ctx.rank == 0) fprintf(stderr, "bench_flock: --vectors-out: %s\n", dm_error_message());
            if (synthetic) dm_flock_vectors_release(&v);
            else dm_vectors_free(&v);
            dm_ctx_free(&ctx);
            MPI_Finalize();
            return 1;
        }
    }
    uint64_t N = 0, nnz = 0, mine_nnz = dm_vectors_nnz(&v);
    MPI_Allreduce(&v.n_rows, &N, 1, MPI_UINT64_T, MPI_SUM, ctx.world);
    MPI_Allreduce(&mine_nnz, &nnz, 1, MPI_UINT64_T, MPI_SUM, ctx.world);

    /* truth and k-means on rank 0: the labels (and with --kmeans the vectors) gathered there with
     * MPI's int counts; beyond them the run is refused (the counts used to wrap silently) */
    uint64_t mine_lb = v.label_off[v.n_rows] - v.label_off[0], lbytes = 0;
    MPI_Allreduce(&mine_lb, &lbytes, 1, MPI_UINT64_T, MPI_SUM, ctx.world);
    if (N > INT_MAX || lbytes > INT_MAX || (o.kmeans && nnz > INT_MAX)) {
        if (ctx.rank == 0)
            fprintf(stderr, "bench_flock: %llu documents, %llu label bytes%s: more than the %d a gather to rank 0 "
                    "(the true classes%s) can take; use fewer documents%s\n", (unsigned long long)N,
                    (unsigned long long)lbytes, o.kmeans ? " and --kmeans's non-zeros" : "", INT_MAX,
                    o.kmeans ? ", k-means" : "", o.kmeans ? " or leave out --kmeans" : "");
        if (synthetic) dm_flock_vectors_release(&v);
        else dm_vectors_free(&v);
        dm_ctx_free(&ctx);
        MPI_Finalize();
        return 1;
    }
    dm_vectors all;
    memset(&all, 0, sizeof all);
    int32_t *truth = NULL;
    gather_vectors(&all, &v, o.kmeans, &ctx);
    if (ctx.rank == 0) truth = classes(&all);
    km_result km;
    memset(&km, 0, sizeof km);
    dm_metrics kmm;
    memset(&kmm, 0, sizeof kmm);
    int n_classes = 0;
    if (ctx.rank == 0) {
        for (uint64_t i = 0; i < N; i++)
            if (truth[i] + 1 > n_classes) n_classes = truth[i] + 1;
        if (o.kmeans && spherical_kmeans(&km, &all, n_classes > 0 ? n_classes : o.topics, ctx.opt.seed) == DM_OK)
            dm_metrics_compute(&kmm, truth, km.assign, (size_t)N);
    }

#if DM_FLOCK_CUDA
    /* tune the kernels for this workload before anything is timed (the first selection of a
     * kernel tunes it when the database has no entry) */
    if (ctx.backend == DM_BACKEND_CUDA) {
        double t0 = dm_wtime();
        rc = dm_flock_cuda_select_ahead((size_t)(N / (uint64_t)ctx.size), ctx.size);
        if (ctx.rank == 0) printf("kernel selection (%s): %.1f s\n", dm_tune_mode_name(dm_tune_get_mode()), dm_wtime() - t0);
    }
#endif
    json_t *js = json_object();
    json_object_set_new(js, "documents", json_integer((json_int_t)N));
    json_object_set_new(js, "terms_per_document", json_real((double)nnz / (double)(N ? N : 1)));
    json_object_set_new(js, "input", json_string(synthetic ? "synthetic" : o.corpus));
    json_object_set_new(js, "ranks", json_integer(ctx.size));
    json_object_set_new(js, "backend", json_string(dm_backend_name(ctx.backend)));
    json_object_set_new(js, "gpu", json_string(ctx.device >= 0 ? ctx.dev.name : ""));
    json_object_set_new(js, "iterations", json_integer(o.fo.iterations));
    json_object_set_new(js, "input_seconds", json_real(t_in));

    if (o.study) {
        /* threshold x weight presets at the given iterations */
        static const double thr[] = {0.04, 0.06, 0.08, 0.10, 0.12, 0.15, 0.20};
        static const double wts[][4] = {{0.02, 0.05, 0.30, 0.05}, {0.02, 0.25, 0.30, 0.05}, {0.01, 0.05, 0.30, 0.50},
                                        {0.005, 0.02, 0.50, 0.50}, {0.02, 0.10, 0.30, 0.20}};
        json_t *rows = json_array();
        if (ctx.rank == 0) printf("\nparameter study: %llu documents, %d iterations\n%-9s %-26s %8s %8s %8s %9s %8s\n",
                                  (unsigned long long)N, o.fo.iterations, "threshold", "weights S,D,A,C", "NMI", "ARI",
                                  "purity", "clusters", "noise");
        for (size_t a = 0; a < sizeof thr / sizeof thr[0] && rc == DM_OK; a++)
            for (size_t b = 0; b < sizeof wts / sizeof wts[0] && rc == DM_OK; b++) {
                dm_flock_options fo = o.fo;
                fo.threshold = thr[a];
                fo.w_separation = wts[b][0], fo.w_dissimilar = wts[b][1], fo.w_alignment = wts[b][2], fo.w_cohesion = wts[b][3];
                run_result rr;
                rc = run_once(&rr, &ctx, &v, &fo, &o.co, truth, 0);
                if (rc != DM_OK) break;
                if (ctx.rank == 0) {
                    printf("%-9.3f %5.3f,%5.3f,%5.3f,%5.3f %8.4f %8.4f %8.4f %9d %8llu\n", thr[a], wts[b][0], wts[b][1],
                           wts[b][2], wts[b][3], rr.nmi, rr.ari, rr.purity, rr.clusters, (unsigned long long)rr.noise);
                    fflush(stdout);
                    json_t *row = json_object();
                    json_object_set_new(row, "threshold", json_real(thr[a]));
                    json_t *w = json_array();
                    for (int q = 0; q < 4; q++) json_array_append_new(w, json_real(wts[b][q]));
                    json_object_set_new(row, "weights", w);
                    json_object_set_new(row, "nmi", json_real(rr.nmi));
                    json_object_set_new(row, "ari", json_real(rr.ari));
                    json_object_set_new(row, "purity", json_real(rr.purity));
                    json_object_set_new(row, "clusters", json_integer(rr.clusters));
                    json_object_set_new(row, "noise", json_integer((json_int_t)rr.noise));
                    json_array_append_new(rows, row);
                }
            }
        json_object_set_new(js, "study", rows);
    } else if (o.cluster_study) {
        double cthr[16] = {-2.0, 0.15, 0.20, 0.25, 0.30};
        int mins[16] = {5, 10, 20, 50, 100};
        size_t ncthr = 5, nmins = 5, nmerges = (size_t)o.study_merges_n;
        if (o.study_thr_n > 0) {
            ncthr = (size_t)o.study_thr_n;
            memcpy(cthr, o.study_thr, sizeof cthr);
        }
        if (o.study_mins_n > 0) {
            nmins = (size_t)o.study_mins_n;
            memcpy(mins, o.study_mins, sizeof mins);
        }
        json_t *rows = json_array();
        const double *merges = o.study_merges;
        rc = cluster_study(rows, &ctx, &v, &o.fo, truth, cthr, ncthr, mins, nmins, merges, nmerges, o.co.refine);
        if (ctx.rank == 0 && o.kmeans)
            printf("k-means (k=%d, spherical, seeded k-means++): NMI %.4f ARI %.4f purity %.4f, %d iterations\n",
                   n_classes > 0 ? n_classes : o.topics, kmm.nmi, kmm.ari, kmm.purity, km.iterations);
        json_object_set_new(js, "cluster_study", rows);
        if (o.kmeans) {
            json_t *k = json_object();
            json_object_set_new(k, "nmi", json_real(kmm.nmi));
            json_object_set_new(k, "ari", json_real(kmm.ari));
            json_object_set_new(k, "purity", json_real(kmm.purity));
            json_object_set_new(js, "kmeans", k);
        }
        json_t *m = json_object();
        json_object_set_new(m, "threshold", json_real(o.fo.threshold));
        json_object_set_new(m, "min_df", json_real(o.min_df));
        json_object_set_new(m, "max_df", json_real(o.max_df));
        json_object_set_new(m, "sublinear", json_integer(o.sublinear));
        json_object_set_new(js, "model", m);
    } else {
        dm_timers_reset();
        /* memory of the run itself: the peaks restart here (the tuner's inputs, k-means and the
         * corpus reader are done; the input vectors stay counted on the host) */
        dm_mem_reset_peak(DM_MEM_DEVICE);
        dm_mem_reset_peak(DM_MEM_HOST);
        run_result rr;
        rc = run_once(&rr, &ctx, &v, &o.fo, &o.co, truth, 1);
        dm_stat *st = NULL;
        int ns = 0;
        if (rc == DM_OK) rc = dm_stats_reduce(&st, &ns, ctx.world, 0);
        if (rc == DM_OK) {
            const char *stages[][2] = {{"grid sort", "flock.grid"},      {"detection", "flock.detect"},
                                       {"similarity", "flock.similarity"}, {"forces", "flock.forces"},
                                       {"  halo pass", "flock.forces.halo"}, {"interact (CPU)", "flock.interact"},
                                       {"update (CPU)", "flock.update"},   {"communication", "flock.comm"},
                                       {"step (device)", "flock.device.step"}, {"step (wall)", "flock.step"}};
            double it = o.fo.iterations;
            json_t *br = json_object();
            if (ctx.rank == 0) {
                printf("\nflock benchmark: %llu documents (%.0f terms each), %d iterations, %d rank(s), %s backend%s%s\n",
                       (unsigned long long)N, (double)nnz / (double)(N ? N : 1), o.fo.iterations, ctx.size,
                       dm_backend_name(ctx.backend), ctx.device >= 0 ? ", " : "", ctx.device >= 0 ? ctx.dev.name : "");
                printf("%-22s %12s %12s %12s %8s\n", "stage", "ms/iter min", "avg", "max", "share");
            }
            double step_avg = stat_of(st, ns, "flock.step", 1);
            for (size_t q = 0; q < sizeof stages / sizeof stages[0]; q++) {
                double mn = stat_of(st, ns, stages[q][1], 0), av = stat_of(st, ns, stages[q][1], 1),
                       mx = stat_of(st, ns, stages[q][1], 2);
                if (av == 0 && mx == 0) continue;
                if (ctx.rank == 0)
                    printf("%-22s %12.3f %12.3f %12.3f %7.1f%%\n", stages[q][0], 1e3 * mn / it, 1e3 * av / it,
                           1e3 * mx / it, step_avg > 0 ? 100 * av / step_avg : 0);
                json_t *e = json_object();
                json_object_set_new(e, "ms_per_iteration_min", json_real(1e3 * mn / it));
                json_object_set_new(e, "ms_per_iteration_avg", json_real(1e3 * av / it));
                json_object_set_new(e, "ms_per_iteration_max", json_real(1e3 * mx / it));
                json_object_set_new(br, stages[q][1], e);
                if (strcmp(stages[q][1], "flock.comm") != 0) continue;
                /* where the communication goes (flock.comm.* sub-timers; the step's phases on the
                 * host, including its waits for the device and the neighbours) */
                for (int i = 0; i < ns; i++) {
                    if (strncmp(st[i].name, "flock.comm.", 11) != 0) continue;
                    if (ctx.rank == 0)
                        printf("  %-20s %12.3f %12.3f %12.3f %7.1f%%\n", st[i].name + 11, 1e3 * st[i].min / it,
                               1e3 * st[i].avg / it, 1e3 * st[i].max / it, step_avg > 0 ? 100 * st[i].avg / step_avg : 0);
                    json_t *ce = json_object();
                    json_object_set_new(ce, "ms_per_iteration_min", json_real(1e3 * st[i].min / it));
                    json_object_set_new(ce, "ms_per_iteration_avg", json_real(1e3 * st[i].avg / it));
                    json_object_set_new(ce, "ms_per_iteration_max", json_real(1e3 * st[i].max / it));
                    json_object_set_new(br, st[i].name, ce);
                }
            }
            json_object_set_new(js, "breakdown", br);
            double comm_frac = step_avg > 0 ? stat_of(st, ns, "flock.comm", 1) / step_avg : 0;
            size_t dpeak = dm_mem_peak(DM_MEM_DEVICE), hpeak = dm_mem_peak(DM_MEM_HOST), dmax = 0, hmax = 0;
            MPI_Allreduce(&dpeak, &dmax, 1, MPI_UNSIGNED_LONG, MPI_MAX, ctx.world);
            MPI_Allreduce(&hpeak, &hmax, 1, MPI_UNSIGNED_LONG, MPI_MAX, ctx.world);
            double per_doc = ctx.backend == DM_BACKEND_CUDA ? (double)dmax / ((double)N / ctx.size) : 0;
            double fit = per_doc > 0 ? 0.9 * (double)ctx.dev.mem_total / per_doc : 0;
            /* tuning searches in the run (a kernel or size class not selected before it, with no
             * entry in the database): inside the timed steps their time is in the run's, and
             * anywhere (set-up, steps, clusters) their workloads' memory is in the device peak */
            double tin[4] = {(double)dm_counter_get("tune.searches"), dm_timer_get("tune"), rr.steps_searches,
                             rr.steps_tune_s},
                   tmax[4] = {0, 0, 0, 0};
            MPI_Allreduce(tin, tmax, 4, MPI_DOUBLE, MPI_MAX, ctx.world);
            json_object_set_new(js, "tune_searches_in_run", json_integer((json_int_t)tmax[0]));
            json_object_set_new(js, "tune_seconds_in_run", json_real(tmax[1]));
            json_object_set_new(js, "tune_searches_in_steps", json_integer((json_int_t)tmax[2]));
            json_object_set_new(js, "tune_seconds_in_steps", json_real(tmax[3]));
            if (ctx.rank == 0) {
                printf("run %.2f s (%.1f ms/iteration), %.3g boid-iterations/s, communication %.1f%% of a step\n", rr.wall,
                       1e3 * rr.wall / it, (double)N * it / rr.wall, 100 * comm_frac);
                if (tmax[0] > 0)
                    printf("tuning searches in the run: %.0f (%.2f s), of them in the timed steps %.0f (%.2f s) (the "
                           "slowest rank; run again with the tuning database to time the kernels alone)\n",
                           tmax[0], tmax[1], tmax[2], tmax[3]);
                printf("pairs %.1f per boid per iteration, %.1f%% similar, pair cache hits %.1f%%, %llu migrations, "
                       "%llu halo boids (%llu with their vector, the others cached by the receiver)\n",
                       (double)rr.stats.pairs / ((double)N * it), 100.0 * (double)rr.stats.similar / (double)(rr.stats.pairs ? rr.stats.pairs : 1),
                       100.0 * (double)rr.stats.sim_cache_hits / (double)(rr.stats.pairs ? rr.stats.pairs : 1),
                       (unsigned long long)rr.stats.migrated_out, (unsigned long long)rr.stats.halo_sent,
                       (unsigned long long)rr.stats.halo_vectors);
                if (per_doc > 0)
                    printf("device memory peak of the run %.2f GiB per rank = %.0f bytes/document: about %.3g documents "
                           "fit one %s (90%% of its memory)\n",
                           (double)dmax / (1 << 30), per_doc, fit, ctx.dev.name);
                printf("host memory peak %.2f GiB per rank\n", (double)hmax / (1 << 30));
                printf("clusters %d, noise %llu", rr.clusters, (unsigned long long)rr.noise);
                if (o.co.refine > 0) printf(" (refined: %d steps)", rr.refine_steps);
                if (n_classes > 0) printf(", NMI %.4f ARI %.4f purity %.4f", rr.nmi, rr.ari, rr.purity);
                printf("\n");
                if (o.kmeans)
                    printf("k-means (k=%d, spherical, seeded k-means++): NMI %.4f ARI %.4f purity %.4f, %d iterations, %.2f s\n",
                           n_classes > 0 ? n_classes : o.topics, kmm.nmi, kmm.ari, kmm.purity, km.iterations, km.seconds);
            }
            if (o.baseline && ctx.rank == 0) {
                /* weak scaling against the one-rank run of the same documents per rank (read and
                 * checked before the run) */
                double ms = 1e3 * rr.wall / it;
                if ((uint64_t)base_docs * (uint64_t)ctx.size != N)
                    printf("note: the baseline has %lld documents on one rank, this run %llu on %d (not the same "
                           "documents per rank)\n",
                           base_docs, (unsigned long long)N, ctx.size);
                printf("weak scaling: 1 rank %.2f ms/iteration, %d ranks %.2f ms/iteration: efficiency %.1f%%, "
                       "communication %.1f%% of a step\n",
                       base_ms, ctx.size, ms, 100 * base_ms / ms, 100 * comm_frac);
                json_object_set_new(js, "weak_scaling_efficiency", json_real(base_ms / ms));
                json_object_set_new(js, "baseline_ms_per_iteration", json_real(base_ms));
            }
            json_object_set_new(js, "run_seconds", json_real(rr.wall));
            json_object_set_new(js, "ms_per_iteration", json_real(1e3 * rr.wall / it));
            json_object_set_new(js, "boid_iterations_per_second", json_real((double)N * it / rr.wall));
            json_object_set_new(js, "communication_fraction", json_real(comm_frac));
            json_object_set_new(js, "pairs_per_boid_iteration", json_real((double)rr.stats.pairs / ((double)N * it)));
            json_object_set_new(js, "similar_fraction", json_real((double)rr.stats.similar / (double)(rr.stats.pairs ? rr.stats.pairs : 1)));
            json_object_set_new(js, "cache_hit_fraction", json_real((double)rr.stats.sim_cache_hits / (double)(rr.stats.pairs ? rr.stats.pairs : 1)));
            json_object_set_new(js, "migrations", json_integer((json_int_t)rr.stats.migrated_out));
            json_object_set_new(js, "device_peak_bytes", json_integer((json_int_t)dmax));
            json_object_set_new(js, "host_peak_bytes", json_integer((json_int_t)hmax));
            json_object_set_new(js, "device_bytes_per_document", json_real(per_doc));
            json_object_set_new(js, "documents_fitting_one_gpu", json_real(fit));
            json_t *q = json_object();
            json_object_set_new(q, "clusters", json_integer(rr.clusters));
            json_object_set_new(q, "noise", json_integer((json_int_t)rr.noise));
            if (n_classes > 0) {
                json_object_set_new(q, "nmi", json_real(rr.nmi));
                json_object_set_new(q, "ari", json_real(rr.ari));
                json_object_set_new(q, "purity", json_real(rr.purity));
            }
            if (o.kmeans) {
                json_t *k = json_object();
                json_object_set_new(k, "nmi", json_real(kmm.nmi));
                json_object_set_new(k, "ari", json_real(kmm.ari));
                json_object_set_new(k, "purity", json_real(kmm.purity));
                json_object_set_new(k, "seconds", json_real(km.seconds));
                json_object_set_new(q, "kmeans", k);
            }
            json_object_set_new(js, "quality", q);
            json_t *m = json_object();
            json_object_set_new(m, "threshold", json_real(o.fo.threshold));
            json_object_set_new(m, "radius", json_real(o.fo.radius));
            json_object_set_new(m, "neighbours", json_real(o.fo.neighbours));
            json_object_set_new(m, "v_max", json_real(o.fo.v_max));
            json_object_set_new(m, "shrink", json_real(o.fo.shrink));
            json_object_set_new(m, "migrate_every", json_integer(o.fo.migrate_every));
            json_t *w = json_array();
            json_array_append_new(w, json_real(o.fo.w_separation));
            json_array_append_new(w, json_real(o.fo.w_dissimilar));
            json_array_append_new(w, json_real(o.fo.w_alignment));
            json_array_append_new(w, json_real(o.fo.w_cohesion));
            json_object_set_new(m, "weights", w);
            json_object_set_new(js, "model", m);
        }
        dm_free(st);
    }
    if (rc == DM_OK && o.json && ctx.rank == 0) {
        bench_json_meta(js, ctx.device >= 0 ? ctx.dev.name : NULL);
        rc = bench_write_json(o.json, js, JSON_INDENT(2) | JSON_SORT_KEYS);
    }
    rc = dm_ctx_agree(&ctx, rc);
    if (rc != DM_OK && ctx.rank == 0) fprintf(stderr, "bench_flock: %s\n", dm_error_message());
    json_decref(js);
    dm_free(truth);
    dm_free(km.assign);
    if (ctx.rank == 0) dm_vectors_free(&all);
    if (synthetic) dm_flock_vectors_release(&v);
    else dm_vectors_free(&v);
    dm_ctx_free(&ctx);
    MPI_Finalize();
    return rc == DM_OK ? 0 : 1;
}
