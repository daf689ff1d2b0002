/* MPI tests of flock (mpiexec -n 1, 2, 4; CPU backend): trajectories after 50 iterations are
 * bit-identical for 1, 2, 3 and 4 ranks (sub-communicators of this job) and for uneven slices,
 * with boids crossing slice edges and the torus seam; every document has exactly one owner
 * after every iteration; clusters are identical and some span slices; a checkpoint written by
 * P ranks resumes on any number of ranks to the uninterrupted result; an error on one rank is
 * reported on all without a hang; files written in rank order (dm_flock_write_ordered, MPI-IO and
 * the gather fallback) hold every rank's bytes, leave no temporary and no file on failure; class
 * numbers from the first labels agree over the ranks. */
#include <CUnit/CUnit.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "common/context.h"
#include "common/fileio.h"
#include "common/timer.h"
#include "common/status.h"
#include "flock/flock.h"
#include "flock/flock_impl.h"
#include "flock/flock_synth.h"
#include "flock_testlib.h"
#include "testutil.h"

static dm_ctx g_ctx;
static char g_tmp[4096];
#define NDOCS 800
#define ITERS 50

static int setup(void)
{
    dm_ctx_options o = DM_CTX_OPTIONS_INIT;
    o.backend = DM_BACKEND_CPU;
    o.quiet = 1;
    if (dm_ctx_init(&g_ctx, &o) != DM_OK) return 1;
    /* one temporary directory for the job, named by rank 0 */
    if (g_ctx.rank == 0 && !dm_test_tmpdir(g_tmp, sizeof g_tmp)) return 1;
    MPI_Bcast(g_tmp, sizeof g_tmp, MPI_CHAR, 0, g_ctx.world);
    return 0;
}
static int teardown(void)
{
    MPI_Barrier(g_ctx.world);
    if (g_ctx.rank == 0) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    }
    dm_ctx_free(&g_ctx);
    return 0;
}

static dm_flock_synth_options corpus(void)
{
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.topics = 4;
    so.tokens = 60;
    so.topic_vocab = 300;
    so.shared_vocab = 300;
    so.seed = 3;
    return so;
}

static dm_flock_options model(void)
{
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = ITERS;
    o.threshold = 0.12;
    o.seed = 99;
    return o;
}

static int same_bits(const ft_state *a, const ft_state *b)
{
    return a->n == b->n && memcmp(a->x, b->x, 8 * a->n) == 0 && memcmp(a->y, b->y, 8 * a->n) == 0 &&
           memcmp(a->vx, b->vx, 8 * a->n) == 0 && memcmp(a->vy, b->vy, 8 * a->n) == 0;
}

/* Runs on the first q ranks of the job (others idle); the state lands on rank 0. */
static int run_on_corpus(ft_state *st, int q, const dm_flock_options *o, const dm_flock_cluster_options *co,
                         const dm_flock_synth_options *so)
{
    memset(st, 0, sizeof *st);
    MPI_Comm sub;
    MPI_Comm_split(g_ctx.world, g_ctx.rank < q ? 0 : MPI_UNDEFINED, g_ctx.rank, &sub);
    int rc = DM_OK;
    if (sub != MPI_COMM_NULL) {
        dm_ctx c;
        ft_ctx_sub(&c, &g_ctx, sub);
        rc = ft_run(st, &c, so, NDOCS, o, co);
        if (rc != DM_OK) fprintf(stderr, "rank %d of %d: %s\n", c.rank, c.size, dm_error_message());
        MPI_Comm_free(&sub);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, g_ctx.world);
    return rc;
}

static int run_on(ft_state *st, int q, const dm_flock_options *o, const dm_flock_cluster_options *co)
{
    dm_flock_synth_options so = corpus();
    return run_on_corpus(st, q, o, co, &so);
}

/* A run on every rank with var=0: the same bits and clusters as ref (rank 0), and what rank 0's
 * distribution read out of and wrote into its peers' memory (d: bytes read, rows written). */
static void run_without(const char *var, const ft_state *ref, const dm_flock_options *o,
                        const dm_flock_cluster_options *co, int64_t d[2])
{
    ft_state st;
    int64_t read0 = dm_counter_get("flock.distribute.cma_bytes");
    int64_t rows0 = dm_counter_get("flock.distribute.direct_rows");
    setenv(var, "0", 1);
    int rc = run_on(&st, g_ctx.size, o, co);
    unsetenv(var);
    CU_ASSERT_EQUAL_FATAL(rc, DM_OK);
    d[0] = dm_counter_get("flock.distribute.cma_bytes") - read0;
    d[1] = dm_counter_get("flock.distribute.direct_rows") - rows0;
    if (g_ctx.rank == 0) {
        CU_ASSERT_TRUE(same_bits(ref, &st));
        CU_ASSERT_EQUAL(memcmp(ref->cluster, st.cluster, 4 * ref->n), 0);
    }
    ft_state_free(&st);
}

static void test_rank_independence(void)
{
    dm_flock_options o = model();
    dm_flock_cluster_options co = DM_FLOCK_CLUSTER_OPTIONS_INIT;
    ft_state ref, st;
    CU_ASSERT_EQUAL_FATAL(run_on(&ref, 1, &o, &co), DM_OK);
    for (int q = 2; q <= g_ctx.size; q++) {
        int64_t cma0 = dm_counter_get("flock.distribute.cma_bytes");
        int64_t direct0 = dm_counter_get("flock.distribute.direct_rows");
        CU_ASSERT_EQUAL_FATAL(run_on(&st, q, &o, &co), DM_OK);
        if (g_ctx.rank == 0) {
            CU_ASSERT_TRUE(same_bits(&ref, &st));
            CU_ASSERT_EQUAL(memcmp(ref.cluster, st.cluster, 4 * ref.n), 0);
            /* the ranks share this node: the distribution wrote the boids straight into their
             * owners' stores (common/cma.h), nothing was packed for reading */
            CU_ASSERT_TRUE(dm_counter_get("flock.distribute.direct_rows") > direct0);
            CU_ASSERT_EQUAL(dm_counter_get("flock.distribute.cma_bytes"), cma0);
            /* the run exercised the decomposition: halos, migrations, seam crossings */
            CU_ASSERT_TRUE(st.stats.halo_sent > 0);
            /* the halo vector cache was used (most halo boids stay from one iteration to the next)
             * and the trajectories above are still the same bits */
            CU_ASSERT_TRUE(st.stats.halo_vectors > 0);
            CU_ASSERT_TRUE(2 * st.stats.halo_vectors < st.stats.halo_sent);
            CU_ASSERT_TRUE(st.stats.migrated_out > 0);
            CU_ASSERT_EQUAL(st.stats.migrated_out, st.stats.migrated_in);
            /* migrants leave their vectors home: the receiver has them from the halo */
            CU_ASSERT_TRUE(st.stats.migrated_vectors < st.stats.migrated_out);
            /* and the sender keeps them: the next halo from the receiver leaves them out */
            CU_ASSERT_TRUE(st.stats.halo_returned > 0);
            CU_ASSERT_TRUE(st.stats.halo_returned <= st.stats.migrated_in);
            CU_ASSERT_TRUE(st.stats.halo_vectors + st.stats.halo_returned <= st.stats.halo_sent);
            CU_ASSERT_TRUE(st.stats.seam_crossings > 0);
            CU_ASSERT_EQUAL(st.stats.pairs, ref.stats.pairs);
            CU_ASSERT_EQUAL(st.stats.similar, ref.stats.similar);
            /* some cluster has members on two ranks, so its label came from the merge */
            int spans = 0;
            for (uint64_t i = 0; i < st.n && !spans; i++)
                for (uint64_t j = i + 1; j < st.n && !spans; j++)
                    spans = st.cluster[i] >= 0 && st.cluster[i] == st.cluster[j] && st.owner[i] != st.owner[j];
            CU_ASSERT_TRUE(spans);
            printf("\n  %d ranks: %llu migrations, %llu seam crossings, %llu halo boids (%llu with vectors, %llu "
                   "returned migrants without), %llu pairs\n",
                   q, (unsigned long long)st.stats.migrated_out, (unsigned long long)st.stats.seam_crossings,
                   (unsigned long long)st.stats.halo_sent, (unsigned long long)st.stats.halo_vectors,
                   (unsigned long long)st.stats.halo_returned, (unsigned long long)st.stats.pairs);
        }
        ft_state_free(&st);
    }
    if (g_ctx.rank == 0) {
        CU_ASSERT_TRUE(ref.stats.seam_crossings > 0);
        int clustered = 0;
        for (uint64_t i = 0; i < ref.n; i++) clustered += ref.cluster[i] >= 0;
        CU_ASSERT_TRUE(clustered > 0);
    }
    /* uneven slices (as for GPUs of different speeds), the distribution through MPI only: the
     * same bits, nothing read or written in a peer's memory */
    if (g_ctx.size > 1) {
        double w[4] = {1.0, 2.0, 1.0, 1.5};
        int64_t d[2];
        o.slice_weights = w;
        run_without("DOCMINE_CMA", &ref, &o, &co, d);
        if (g_ctx.rank == 0) {
            CU_ASSERT_EQUAL(d[0], 0);
            CU_ASSERT_EQUAL(d[1], 0);
        }
        /* the node peers' boids packed by their senders as for MPI and read by their receivers
         * (DOCMINE_FLOCK_DIST_DIRECT=0): the same bits, nothing written into a peer's store */
        o.slice_weights = NULL;
        run_without("DOCMINE_FLOCK_DIST_DIRECT", &ref, &o, &co, d);
        if (g_ctx.rank == 0) {
            CU_ASSERT_TRUE(d[0] > 0);
            CU_ASSERT_EQUAL(d[1], 0);
        }
    }
    ft_state_free(&ref);
}

/* The migration interval: on a larger plane (5 neighbours at the start, a third less shrinking)
 * 2 and 4 ranks migrate after every 1st, 2nd and 3rd iteration and keep the boids that left their
 * slice in between: the same bits and clusters as one rank, ceil(50 / K) exchanges; an interval
 * that the slices cannot hold is refused on every rank. */
static void test_migrate_every(void)
{
    dm_flock_options o = model();
    o.neighbours = 5;
    o.shrink = 0.3;
    dm_flock_cluster_options co = DM_FLOCK_CLUSTER_OPTIONS_INIT;
    ft_state ref, st;
    CU_ASSERT_EQUAL_FATAL(run_on(&ref, 1, &o, &co), DM_OK);
    for (int q = 2; q <= g_ctx.size; q += 2)
        for (int K = 1; K <= 3; K++) {
            o.migrate_every = K;
            CU_ASSERT_EQUAL_FATAL(run_on(&st, q, &o, &co), DM_OK);
            if (g_ctx.rank == 0) {
                CU_ASSERT_TRUE(same_bits(&ref, &st));
                CU_ASSERT_EQUAL(memcmp(ref.cluster, st.cluster, 4 * ref.n), 0);
                CU_ASSERT_EQUAL(st.migrate_every, K);
                CU_ASSERT_EQUAL(st.stats.migrations, (uint64_t)((ITERS + K - 1) / K));
                CU_ASSERT_TRUE(st.stats.migrated_out > 0);
                CU_ASSERT_EQUAL(st.stats.migrated_out, st.stats.migrated_in);
                CU_ASSERT_TRUE(st.stats.seam_crossings > 0);
                CU_ASSERT_EQUAL(st.stats.pairs, ref.stats.pairs);
                printf("\n  %d ranks, migration every %d: %llu exchanges, %llu migrants, %llu halo boids", q, K,
                       (unsigned long long)st.stats.migrations, (unsigned long long)st.stats.migrated_out,
                       (unsigned long long)st.stats.halo_sent);
            }
            ft_state_free(&st);
        }
    if (g_ctx.size > 1) {
        o.migrate_every = 40; /* a halo reach of about 40 plane units: more than a slice */
        CU_ASSERT_EQUAL(run_on(&st, g_ctx.size, &o, &co), DM_ERR_INVALID_ARG);
        ft_state_free(&st);
    }
    ft_state_free(&ref);
}

/* Small components attached by centroid similarity (centroids all-reduced over the ranks): the
 * same labels on 1 .. P ranks; clustered documents keep their cluster, and only documents that
 * were noise change. Two iterations from the random start and a cluster threshold of 0.18 (above
 * the model's 0.12) leave 5 clusters and 325 documents in small components. */
static void test_centroid_attach_ranks(void)
{
    dm_flock_options o = model();
    o.iterations = 2;
    dm_flock_cluster_options noise = {12, DM_FLOCK_SMALL_NOISE, 0.18, 0.0, 0};
    dm_flock_cluster_options cen = {12, DM_FLOCK_SMALL_CENTROID, 0.18, 0.0, 0};
    ft_state ref, st;
    CU_ASSERT_EQUAL_FATAL(run_on(&ref, 1, &o, &noise), DM_OK);
    ft_state first;
    memset(&first, 0, sizeof first);
    for (int q = 1; q <= g_ctx.size; q++) {
        CU_ASSERT_EQUAL_FATAL(run_on(&st, q, &o, &cen), DM_OK);
        if (g_ctx.rank == 0) {
            uint64_t was_noise = 0, attached = 0, kept = 0;
            for (uint64_t i = 0; i < ref.n; i++) {
                was_noise += ref.cluster[i] < 0;
                attached += ref.cluster[i] < 0 && st.cluster[i] >= 0;
                kept += ref.cluster[i] >= 0 && st.cluster[i] == ref.cluster[i];
            }
            CU_ASSERT_TRUE(was_noise > 0);
            CU_ASSERT_TRUE(attached > 0);
            CU_ASSERT_EQUAL(kept + was_noise, ref.n);
            if (q == 1) first = st;
            else {
                CU_ASSERT_EQUAL(memcmp(first.cluster, st.cluster, 4 * st.n), 0);
                printf("\n  centroid attachment, %d ranks: %llu of %llu noise documents attached, same labels\n", q,
                       (unsigned long long)attached, (unsigned long long)was_noise);
            }
        }
        if (q > 1 || g_ctx.rank != 0) ft_state_free(&st);
    }
    if (g_ctx.rank == 0) ft_state_free(&first);
    ft_state_free(&ref);
}

/* Number of clusters of a labelling (0 .. k-1, -1 noise): the largest label + 1. */
static int32_t n_labels(const int32_t *cl, uint64_t n)
{
    int32_t k = 0;
    for (uint64_t i = 0; i < n; i++)
        if (cl[i] >= k) k = cl[i] + 1;
    return k;
}

/* Clusters refined by centroid steps (--refine), without and with the merge before them: the same
 * labels on 1 .. P ranks; the same labels, steps and moves when the first step sums its centroids
 * afresh instead of taking the attachment's or the merge's sums; noise stays noise; the numbers
 * 0 .. k-1 are all used; documents moved (the start is not a fixed point); and the result is a
 * fixed point of the step: each clustered document's own cluster has the highest centroid
 * cosine, the centroids summed here in double from the rows (within 1e-9 of the best). A harder
 * corpus than the other tests' (6 topics, 70% background words) and a cluster threshold of 0.22
 * after two iterations leave about 20 impure clusters, so that the steps have work. */
static void refine_ranks(double merge)
{
    dm_flock_options o = model();
    o.iterations = 2;
    dm_flock_cluster_options base = {5, DM_FLOCK_SMALL_CENTROID, 0.22, merge, 0};
    dm_flock_cluster_options co = base;
    co.refine = 200;
    dm_flock_synth_options so = corpus();
    so.topics = 6;
    so.overlap = 0.7;
    ft_state ref, first;
    memset(&first, 0, sizeof first);
    CU_ASSERT_EQUAL_FATAL(run_on_corpus(&ref, 1, &o, &base, &so), DM_OK);
    for (int q = 1; q <= g_ctx.size; q++) {
        ft_state st, fresh;
        CU_ASSERT_EQUAL_FATAL(run_on_corpus(&st, q, &o, &co, &so), DM_OK);
        dm_flock_set_refine_fresh(1);
        int frc = run_on_corpus(&fresh, q, &o, &co, &so);
        dm_flock_set_refine_fresh(0);
        CU_ASSERT_EQUAL_FATAL(frc, DM_OK);
        if (g_ctx.rank != 0) {
            ft_state_free(&fresh);
            continue;
        }
        CU_ASSERT_EQUAL(memcmp(fresh.cluster, st.cluster, 4 * st.n), 0);
        CU_ASSERT_EQUAL(fresh.refine_steps, st.refine_steps);
        CU_ASSERT_EQUAL(fresh.refine_moved, st.refine_moved);
        CU_ASSERT_TRUE(st.refine_steps > 1 && st.refine_moved > 0);
        if (q == 1)
            printf("\n  refinement%s: %d steps, %llu moves, the same with its first sums afresh\n",
                   merge > 0 ? " after the merge" : "", st.refine_steps, (unsigned long long)st.refine_moved);
        ft_state_free(&fresh);
        if (q > 1) {
            CU_ASSERT_EQUAL(memcmp(first.cluster, st.cluster, 4 * st.n), 0);
            printf("\n  refinement, %d ranks: same labels\n", q);
            ft_state_free(&st);
            continue;
        }
        first = st;
        int32_t k = n_labels(st.cluster, st.n);
        uint64_t *size = calloc((size_t)(k > 0 ? k : 1), sizeof *size);
        CU_ASSERT_PTR_NOT_NULL_FATAL(size);
        int bad_noise = 0;
        for (uint64_t i = 0; i < st.n; i++) {
            bad_noise += (ref.cluster[i] < 0) != (st.cluster[i] < 0);
            if (st.cluster[i] >= 0) size[st.cluster[i]]++;
        }
        CU_ASSERT_EQUAL(bad_noise, 0);
        int empty = 0;
        for (int32_t c = 0; c < k; c++) empty += size[c] == 0;
        CU_ASSERT_EQUAL(empty, 0);
        CU_ASSERT_TRUE(k > 1);
        CU_ASSERT_NOT_EQUAL(memcmp(ref.cluster, st.cluster, 4 * st.n), 0);
        /* the fixed point, from the rows of every document (as unit vectors, as the simulation
         * holds them) */
        dm_vectors v;
        CU_ASSERT_EQUAL_FATAL(ft_synth_share(&v, &so, NDOCS, 0, 1), DM_OK);
        for (uint64_t i = 0; i < v.n_rows; i++) {
            double nn = 0;
            for (uint64_t e = v.row_off[i]; e < v.row_off[i + 1]; e++) nn += (double)v.val[e] * v.val[e];
            for (uint64_t e = v.row_off[i]; e < v.row_off[i + 1]; e++) v.val[e] = (float)(v.val[e] / sqrt(nn));
        }
        const size_t T = (size_t)v.n_cols;
        double *cen = calloc((size_t)k * T, sizeof *cen), *norm = calloc((size_t)k, sizeof *norm);
        CU_ASSERT_FATAL(cen && norm);
        for (uint64_t i = 0; i < st.n; i++)
            if (st.cluster[i] >= 0)
                for (uint64_t e = v.row_off[i]; e < v.row_off[i + 1]; e++)
                    cen[(size_t)st.cluster[i] * T + v.col[e]] += v.val[e];
        for (int32_t c = 0; c < k; c++) {
            for (size_t t = 0; t < T; t++) norm[c] += cen[(size_t)c * T + t] * cen[(size_t)c * T + t];
            norm[c] = sqrt(norm[c]);
        }
        int not_fixed = 0;
        for (uint64_t i = 0; i < st.n; i++) {
            if (st.cluster[i] < 0) continue;
            double best = 0, own = 0;
            for (int32_t c = 0; c < k; c++) {
                double dot = 0;
                for (uint64_t e = v.row_off[i]; e < v.row_off[i + 1]; e++) dot += v.val[e] * cen[(size_t)c * T + v.col[e]];
                double cosv = norm[c] > 0 ? dot / norm[c] : 0;
                if (cosv > best) best = cosv;
                if (c == st.cluster[i]) own = cosv;
            }
            not_fixed += own < best - 1e-9;
        }
        CU_ASSERT_EQUAL(not_fixed, 0);
        uint64_t moved = 0;
        for (uint64_t i = 0; i < st.n; i++) moved += ref.cluster[i] != st.cluster[i];
        printf("\n  refinement: %d clusters (%d before), %llu documents with another label than before, a fixed "
               "point\n", k, n_labels(ref.cluster, ref.n), (unsigned long long)moved);
        free(cen);
        free(norm);
        free(size);
        dm_flock_vectors_release(&v);
    }
    if (g_ctx.rank == 0) ft_state_free(&first);
    ft_state_free(&ref);
}

static void test_refine_ranks(void)
{
    refine_ranks(0.0);
    refine_ranks(0.7);
}

/* Clusters merged by centroid similarity (--merge): the same labels on 1 .. P ranks; every
 * cluster of the unmerged labelling lies within one merged cluster and noise stays noise; the
 * merged clusters are numbered in the order of the smallest unmerged cluster they hold, and every
 * number is used; a threshold just above 0 (any shared term) merges some clusters, and 0.3 no
 * more than that. */
static void test_merge_ranks(void)
{
    dm_flock_options o = model();
    o.iterations = 2;
    dm_flock_cluster_options base = {12, DM_FLOCK_SMALL_CENTROID, 0.18, 0.0, 0};
    ft_state ref;
    CU_ASSERT_EQUAL_FATAL(run_on(&ref, 1, &o, &base), DM_OK);
    const double levels[2] = {0.3, 1e-6};
    int32_t k_at[2] = {0, 0};
    for (int l = 0; l < 2; l++) {
        dm_flock_cluster_options co = base;
        co.merge = levels[l];
        ft_state first;
        memset(&first, 0, sizeof first);
        for (int q = 1; q <= g_ctx.size; q++) {
            ft_state st;
            CU_ASSERT_EQUAL_FATAL(run_on(&st, q, &o, &co), DM_OK);
            if (g_ctx.rank == 0) {
                if (q == 1) {
                    first = st;
                    int32_t k0 = n_labels(ref.cluster, ref.n), k = n_labels(st.cluster, st.n);
                    CU_ASSERT_FATAL(k0 > 1 && k >= 1 && k <= k0);
                    k_at[l] = k;
                    /* refinement: the merged label of each unmerged cluster is one label */
                    int32_t *to = malloc(sizeof *to * (size_t)k0);
                    CU_ASSERT_PTR_NOT_NULL_FATAL(to);
                    for (int32_t c = 0; c < k0; c++) to[c] = -2;
                    int bad = 0;
                    for (uint64_t i = 0; i < st.n; i++) {
                        if ((ref.cluster[i] < 0) != (st.cluster[i] < 0)) bad++;
                        if (ref.cluster[i] < 0) continue;
                        if (to[ref.cluster[i]] == -2) to[ref.cluster[i]] = st.cluster[i];
                        else if (to[ref.cluster[i]] != st.cluster[i]) bad++;
                    }
                    CU_ASSERT_EQUAL(bad, 0);
                    /* numbering: merged cluster c first appears as unmerged cluster to^-1, in order */
                    int32_t next = 0;
                    for (int32_t c = 0; c < k0; c++) {
                        if (to[c] == next) next++;
                        else if (to[c] > next) bad++;
                    }
                    CU_ASSERT_EQUAL(next, k);
                    CU_ASSERT_EQUAL(bad, 0);
                    free(to);
                    printf("\n  merge at %g: %d clusters of %d", levels[l], k, k0);
                } else {
                    CU_ASSERT_EQUAL(memcmp(first.cluster, st.cluster, 4 * st.n), 0);
                    ft_state_free(&st);
                }
            }
        }
        /* the centroid sums cut into work items of 3 documents: the same exact sums, the same labels */
        dm_flock_set_centroid_item(3);
        ft_state small;
        int rc_small = run_on(&small, g_ctx.size, &o, &co);
        dm_flock_set_centroid_item(0);
        CU_ASSERT_EQUAL_FATAL(rc_small, DM_OK);
        if (g_ctx.rank == 0) {
            CU_ASSERT_EQUAL(memcmp(first.cluster, small.cluster, 4 * small.n), 0);
            ft_state_free(&small);
        }
        if (g_ctx.rank == 0) ft_state_free(&first);
    }
    if (g_ctx.rank == 0) {
        CU_ASSERT_TRUE(k_at[1] < n_labels(ref.cluster, ref.n));
        CU_ASSERT_TRUE(k_at[1] <= k_at[0]);
    }
    ft_state_free(&ref);
}

/* after every iteration: every document owned by exactly one rank, which holds it in its slice
 * after a migration and at most u v_max outside it u iterations after one */
typedef struct conservation {
    int iterations, violations;
    uint64_t n;
    double v_max;
    uint64_t outside; /* own boids seen outside their rank's slice */
} conservation;

/* How far y lies outside the slice [lo, hi) of a torus of height H (0 inside). */
static double outside_by(double y, double lo, double hi, double H)
{
    if (y >= lo && y < hi) return 0.0;
    if (y < lo) return lo - y < y + H - hi ? lo - y : y + H - hi;
    return y - hi < lo + H - y ? y - hi : lo + H - y;
}

static int check_owners(dm_flock_sim *s, void *user)
{
    conservation *c = user;
    dm_flock_view v;
    if (dm_flock_sim_view(s, &v) != DM_OK) return 1;
    int cnt = (int)v.n, *counts = NULL, *displs = NULL, tot = 0;
    uint64_t *all = NULL;
    if (g_ctx.rank == 0) {
        counts = malloc(sizeof *counts * (size_t)g_ctx.size);
        displs = malloc(sizeof *displs * (size_t)g_ctx.size);
    }
    MPI_Gather(&cnt, 1, MPI_INT, counts, 1, MPI_INT, 0, g_ctx.world);
    if (g_ctx.rank == 0) {
        for (int k = 0; k < g_ctx.size; k++) {
            displs[k] = tot;
            tot += counts[k];
        }
        all = malloc(8 * (size_t)(tot ? tot : 1));
    }
    MPI_Gatherv(v.id, cnt, MPI_UINT64_T, all, counts, displs, MPI_UINT64_T, 0, g_ctx.world);
    if (g_ctx.rank == 0) {
        unsigned char *seen = calloc(c->n, 1);
        int bad = (uint64_t)tot != c->n;
        for (int k = 0; k < tot; k++) {
            if (all[k] >= c->n || seen[all[k]]) bad = 1;
            else seen[all[k]] = 1;
        }
        c->violations += bad;
        free(seen);
    }
    /* own boids lie in this rank's slice, or as far outside as u updates since the last
     * migration can take them */
    double W, H, lo, hi;
    dm_flock_sim_plane(s, &W, &H);
    dm_flock_slice_bounds(s, g_ctx.rank, H, &lo, &hi);
    int K = dm_flock_sim_migrate_every(s), it = dm_flock_sim_iteration(s);
    int u = it >= ITERS ? 0 : it % K;
    for (size_t i = 0; i < v.n; i++) {
        double d = outside_by(v.y[i], lo, hi, H);
        c->violations += d > u * c->v_max * (1 + 1e-9);
        c->outside += d > 0;
        if (u == 0) c->violations += dm_flock_slice_of(s, v.y[i], H) != g_ctx.rank;
    }
    c->iterations++;
    free(counts);
    free(displs);
    free(all);
    return 0;
}

static void test_conservation(void)
{
    dm_flock_options o = model();
    conservation c = {0, 0, NDOCS, o.v_max, 0};
    o.on_iteration = check_owners;
    o.user = &c;
    ft_state st;
    dm_flock_synth_options so = corpus();
    CU_ASSERT_EQUAL_FATAL(ft_run(&st, &g_ctx, &so, NDOCS, &o, NULL), DM_OK);
    CU_ASSERT_EQUAL(c.iterations, ITERS);
    MPI_Allreduce(MPI_IN_PLACE, &c.violations, 1, MPI_INT, MPI_SUM, g_ctx.world);
    MPI_Allreduce(MPI_IN_PLACE, &c.outside, 1, MPI_UINT64_T, MPI_SUM, g_ctx.world);
    CU_ASSERT_EQUAL(c.violations, 0);
    /* between migrations (automatic interval: 3 on 2 ranks, 1 on 4 here) boids do stay outside */
    if (g_ctx.rank == 0) {
        printf("\n  %d ranks: migration every %d iterations, %llu own boid-iterations outside the slice\n", g_ctx.size,
               st.migrate_every, (unsigned long long)c.outside);
        if (g_ctx.size > 1) CU_ASSERT_EQUAL(st.stats.migrations, (uint64_t)((ITERS + st.migrate_every - 1) / st.migrate_every));
        CU_ASSERT_EQUAL(c.outside > 0, st.migrate_every > 1);
    }
    ft_state_free(&st);
}

static void test_resume_across_ranks(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/mpi.ck", g_tmp);
    dm_flock_options o = model();
    dm_flock_cluster_options co = DM_FLOCK_CLUSTER_OPTIONS_INIT;
    ft_state full, part, res;
    CU_ASSERT_EQUAL_FATAL(run_on(&full, g_ctx.size, &o, &co), DM_OK);
    o.checkpoint_every = 10;
    o.checkpoint = path;
    o.stop_after = 35; /* interrupted after 35; the last checkpoint is at 30 */
    CU_ASSERT_EQUAL_FATAL(run_on(&part, g_ctx.size, &o, NULL), DM_OK);
    o.stop_after = 0;
    o.resume = 1;
    o.checkpoint_every = 0;
    /* resume on every number of ranks up to the job's */
    for (int q = 1; q <= g_ctx.size; q++) {
        CU_ASSERT_EQUAL_FATAL(run_on(&res, q, &o, &co), DM_OK);
        if (g_ctx.rank == 0) {
            CU_ASSERT_EQUAL(part.iteration, 35);
            CU_ASSERT_EQUAL(res.iteration, ITERS);
            CU_ASSERT_TRUE(same_bits(&full, &res));
            CU_ASSERT_EQUAL(memcmp(full.cluster, res.cluster, 4 * full.n), 0);
        }
        ft_state_free(&res);
    }
    ft_state_free(&full);
    ft_state_free(&part);
}

/* A neighbour message beyond MPI's int count (over 16 GiB; only its size is declared here, nothing
 * is sent): the sender fails with a message and its neighbours learn it from the handshake (an
 * assertion stopped the sender alone before). Ranks exchange with rank +- 1 on a ring. */
static void test_exchange_too_large(void)
{
    if (g_ctx.size < 2) return;
    dm_flock_nbrs nb;
    memset(&nb, 0, sizeof nb);
    int up = (g_ctx.rank + 1) % g_ctx.size, down = (g_ctx.rank + g_ctx.size - 1) % g_ctx.size;
    nb.n = up == down ? 1 : 2;
    nb.rank[0] = up;
    nb.rank[1] = down;
    static char small[8];
    const char *send[2] = {small, small};
    uint64_t size[2] = {8, 8};
    if (g_ctx.rank == 0) size[0] = (uint64_t)17 << 30; /* 17 GiB to rank 1 */
    dm_flock_buf bufs[2];
    memset(bufs, 0, sizeof bufs);
    dm_flock_xchg x;
    int rc = dm_flock_xchg_begin(&x, g_ctx.world, &nb, 9000, send, size, bufs, DM_OK);
    if (g_ctx.rank == 0) {
        CU_ASSERT_EQUAL(rc, DM_ERR_UNSUPPORTED);
        CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "exchange message to rank 1"));
    } else {
        CU_ASSERT_EQUAL(rc, DM_OK);
    }
    char *recv[2];
    uint64_t rsize[2];
    int erc = dm_flock_xchg_end(&x, recv, rsize);
    if (g_ctx.rank == 1) CU_ASSERT_NOT_EQUAL(erc, DM_OK); /* rank 0 failed: learnt, not waited on */
    dm_error_clear();
    dm_flock_buf_free(&bufs[0]);
    dm_flock_buf_free(&bufs[1]);
}

static void test_error_on_one_rank(void)
{
    /* the last rank's vectors are not term-sorted: every rank gets the error, none hangs */
    dm_flock_synth_options so = corpus();
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_synth_share(&v, &so, NDOCS, g_ctx.rank, g_ctx.size), DM_OK);
    if (g_ctx.rank == g_ctx.size - 1 && v.row_off[1] >= 2) v.col[1] = v.col[0];
    dm_flock_options o = model();
    dm_flock_sim *s = NULL;
    CU_ASSERT_EQUAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NULL(s);
    dm_flock_vectors_release(&v);
    /* a non-finite weight in every row of the last rank, its rows packed for reading or written
     * into their owners' stores: every rank gets the error, the last rank names it */
    for (int direct = 0; direct < 2; direct++) {
        setenv("DOCMINE_FLOCK_DIST_DIRECT", direct ? "1" : "0", 1);
        CU_ASSERT_EQUAL_FATAL(ft_synth_share(&v, &so, NDOCS, g_ctx.rank, g_ctx.size), DM_OK);
        if (g_ctx.rank == g_ctx.size - 1)
            for (uint64_t r = 0; r < v.n_rows; r++)
                if (v.row_off[r + 1] > v.row_off[r]) v.val[v.row_off[r + 1] - 1] = NAN;
        CU_ASSERT_EQUAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_ERR_FORMAT);
        CU_ASSERT_PTR_NULL(s);
        if (g_ctx.rank == g_ctx.size - 1)
            CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "non-finite weight in row"));
        dm_flock_vectors_release(&v);
    }
    unsetenv("DOCMINE_FLOCK_DIST_DIRECT");
    /* too many ranks for the plane: refused on every rank */
    if (g_ctx.size > 1) {
        CU_ASSERT_EQUAL_FATAL(ft_synth_share(&v, &so, 60, g_ctx.rank, g_ctx.size), DM_OK);
        o.neighbours = 5; /* side 6.1, slices below the halo margin with 4 ranks at the end */
        o.shrink = 0.8;
        CU_ASSERT_EQUAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_ERR_INVALID_ARG);
        dm_flock_vectors_release(&v);
    }
}

/* Slice weights that leave the last rank's slice below the halo's reach: refused when given,
 * equal slices when measured (--slice-weights auto on a noisy host: the speeds measured once
 * cut the plane for the whole run). */
static void test_measured_weights_fall_back(void)
{
    if (g_ctx.size < 2) return;
    dm_flock_synth_options so = corpus();
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_synth_share(&v, &so, NDOCS, g_ctx.rank, g_ctx.size), DM_OK);
    double *w = malloc(sizeof *w * (size_t)g_ctx.size);
    CU_ASSERT_FATAL(w != NULL);
    for (int k = 0; k < g_ctx.size; k++) w[k] = k == g_ctx.size - 1 ? 1.0 : 1000.0;
    dm_flock_options o = model();
    o.iterations = 6;
    o.slice_weights = w;
    dm_flock_sim *s = NULL;
    CU_ASSERT_EQUAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NULL(s);
    o.slice_weights_measured = 1;
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_OK);
    CU_ASSERT_EQUAL(dm_flock_sim_weighted(s), 0);
    CU_ASSERT_EQUAL(dm_flock_sim_run(s), DM_OK);
    dm_flock_sim_free(s);
    /* weights the slices can hold are kept, measured or not */
    for (int k = 0; k < g_ctx.size; k++) w[k] = 1.0 + 0.2 * (k % 2);
    CU_ASSERT_EQUAL_FATAL(dm_flock_sim_init(&s, &g_ctx, &v, &o), DM_OK);
    CU_ASSERT_EQUAL(dm_flock_sim_weighted(s), 1);
    dm_flock_sim_free(s);
    free(w);
    dm_flock_vectors_release(&v);
}

static void test_error_during_run(void)
{
    dm_flock_synth_options so = corpus();
    ft_check_error_during_run(&g_ctx, &so, NDOCS, 20);
}

/* ---- dm_flock_write_ordered ---- */

/* Rank r's part of P: the last rank has more than two collective write pieces (16 MiB each in
 * flock_rows.c), one rank has nothing (rank 0 with 2 ranks, rank 1 with more), the others a few
 * bytes or MB. */
static size_t wo_len(int r, int P)
{
    if (r == P - 1) return ((size_t)40 << 20) + 7;
    if (r == 0) return P == 2 ? 0 : 1001;
    if (r == 1) return 0;
    return ((size_t)3 << 20) + 17 * (size_t)r;
}

/* Its bytes, the same on every rank. */
static void wo_fill(char *b, int r, size_t n)
{
    for (size_t i = 0; i < n; i++) b[i] = (char)(((uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull + (uint64_t)r * 977) >> 56);
}

/* Entries of dir whose name contains s (rank 0). */
static int wo_entries(const char *dir, const char *s)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, s)) n++;
    closedir(d);
    return n;
}

static int wo_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* The checks of one path (MPI-IO or gather, as DOCMINE_ORDERED_WRITE says). */
static void wo_check(const char *tag)
{
    const int r = g_ctx.rank, P = g_ctx.size;
    char dir[4200], path[4300];
    snprintf(dir, sizeof dir, "%s/ordered-%s", g_tmp, tag);
    int ok = g_ctx.rank != 0 || dm_mkdirs(dir) == DM_OK;
    MPI_Bcast(&ok, 1, MPI_INT, 0, g_ctx.world);
    CU_ASSERT_FATAL(ok);

    /* every rank's bytes in rank order, over a longer file that was there before */
    snprintf(path, sizeof path, "%s/rows.bin", dir);
    if (r == 0) {
        size_t older = ((size_t)48 << 20) / 4096; /* blocks of 4 KiB: more than all ranks' bytes */
        char blk[4096];
        memset(blk, 'z', sizeof blk);
        FILE *f = fopen(path, "wb");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        for (size_t i = 0; i < older; i++) CU_ASSERT_EQUAL(fwrite(blk, 1, sizeof blk, f), sizeof blk);
        CU_ASSERT_EQUAL(fclose(f), 0);
    }
    MPI_Barrier(g_ctx.world);
    size_t n = wo_len(r, P);
    char *b = dm_malloc(n ? n : 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    wo_fill(b, r, n);
    int rc = dm_flock_write_ordered(path, b, n, &g_ctx);
    if (rc != DM_OK) fprintf(stderr, "rank %d: %s\n", r, dm_error_message());
    CU_ASSERT_EQUAL(rc, DM_OK);
    dm_free(b);
    if (r == 0) {
        size_t total = 0, at = 0;
        for (int q = 0; q < P; q++) total += wo_len(q, P);
        FILE *f = fopen(path, "rb");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        char *got = dm_malloc(total + 1), *want = dm_malloc(wo_len(P - 1, P));
        CU_ASSERT_FATAL(got && want);
        CU_ASSERT_EQUAL(fread(got, 1, total + 1, f), total); /* nothing after the last rank's bytes */
        fclose(f);
        for (int q = 0; q < P; q++) {
            size_t k = wo_len(q, P);
            wo_fill(want, q, k);
            CU_ASSERT_EQUAL(memcmp(got + at, want, k), 0);
            at += k;
        }
        dm_free(got);
        dm_free(want);
        CU_ASSERT_EQUAL(wo_entries(dir, ".tmp."), 0);
    }

    /* buf NULL on one rank (the last, then rank 0): every rank fails, no file is left */
    const int bads[2] = {P - 1, 0};
    for (int t = 0; t < (P > 1 ? 2 : 1); t++) {
        const int bad = bads[t];
        snprintf(path, sizeof path, "%s/failed-%d.bin", dir, bad);
        const char *mine = "a row\n";
        rc = dm_flock_write_ordered(path, r == bad ? NULL : mine, r == bad ? 0 : strlen(mine), &g_ctx);
        CU_ASSERT_EQUAL(rc, DM_ERR_NOMEM);
        MPI_Barrier(g_ctx.world);
        if (r == 0) {
            CU_ASSERT_FALSE(wo_exists(path));
            CU_ASSERT_EQUAL(wo_entries(dir, ".tmp."), 0);
            CU_ASSERT_EQUAL(wo_entries(dir, "failed-"), 0);
        }
    }

    /* an error naming the file on every rank: the directory does not exist */
    snprintf(path, sizeof path, "%s/missing/rows.bin", dir);
    rc = dm_flock_write_ordered(path, "x\n", 2, &g_ctx);
    CU_ASSERT_EQUAL(rc, DM_ERR_IO);
    if (r == 0) CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), path));
    MPI_Barrier(g_ctx.world);
}

static void test_write_ordered(void)
{
    unsetenv("DOCMINE_ORDERED_WRITE");
    wo_check("mpiio");
}

static void test_write_ordered_gather(void)
{
    setenv("DOCMINE_ORDERED_WRITE", "gather", 1);
    wo_check("gather");
    unsetenv("DOCMINE_ORDERED_WRITE");
}

/* Class numbers from the first labels (dm_flock_classes_rows): the distinct first labels of all
 * ranks, sorted by their bytes, numbered 0 .. k-1 on every rank; unlabelled rows are -1. Each rank
 * holds 3000 rows whose names come in no order and repeat, one name only that rank has, names
 * that are prefixes of others ("b" and "b2"), multi-labels ("c,a": class "c") and unlabelled
 * rows. */
static void test_classes_rows(void)
{
    const int P = g_ctx.size, r = g_ctx.rank;
    const uint64_t n = 3000;
    /* all names that any rank uses, sorted: "a" "b" "b2" "c" "only-0" ... "only-{P-1}" "zz" */
    char names[16][16] = {"a", "b", "b2", "c"};
    int k = 4;
    for (int q = 0; q < P; q++) snprintf(names[k++], sizeof names[0], "only-%d", q);
    snprintf(names[k++], sizeof names[0], "zz");
    dm_vectors v;
    memset(&v, 0, sizeof v);
    v.n_rows = n;
    v.label_off = malloc(sizeof *v.label_off * (n + 1));
    v.labels = malloc(16 * n);
    int32_t *want = malloc(sizeof *want * n), *got = malloc(sizeof *got * n);
    CU_ASSERT_FATAL(v.label_off && v.labels && want && got);
    uint64_t at = 0;
    for (uint64_t i = 0; i < n; i++) {
        v.label_off[i] = at;
        uint64_t h = (i * 2654435761u + (uint64_t)r * 97u) % 11u; /* no order, every value repeated */
        const char *lab;
        int cls;
        if (h == 0) lab = "", cls = -1;
        else if (h == 1) lab = "c,a", cls = 3;
        else if (h == 2) lab = "b", cls = 1;
        else if (h == 3) lab = "b2", cls = 2;
        else if (h == 4) lab = "zz", cls = k - 1;
        else if (h < 8 && r == 0) lab = "a", cls = 0;
        else if (h < 8) lab = "b,zz", cls = 1;
        else lab = names[4 + r], cls = 4 + r;
        at += (uint64_t)snprintf(v.labels + at, 16, "%s", lab) + 1;
        want[i] = cls;
    }
    v.label_off[n] = at;
    int32_t nc = -1;
    CU_ASSERT_EQUAL(dm_flock_classes_rows(got, &nc, &v, &g_ctx), DM_OK);
    CU_ASSERT_EQUAL(nc, k);
    CU_ASSERT_EQUAL(memcmp(got, want, sizeof *got * n), 0);
    free(v.label_off);
    free(v.labels);
    free(want);
    free(got);
}

/* test_alloc_failures' job: its result in r, the first job's in r0 */
typedef struct sweep_arg {
    const dm_vectors *v;
    const dm_flock_options *o;
    const dm_flock_cluster_options *co;
    const dm_flock_job_options *jo;
    dm_flock_job_result r0, r;
} sweep_arg;
static int sweep_run(void *a_)
{
    sweep_arg *a = a_;
    return dm_flock_job_run(&a->r, NULL, &g_ctx, a->v, a->o, a->co, a->jo);
}
static int sweep_differs(void *a_)
{
    const sweep_arg *a = a_;
    return a->r.clusters != a->r0.clusters;
}

/* Every host allocation of a whole job (simulation, clusters, the output files), failed in turn
 * on every rank (each rank's k-th dm_malloc / dm_calloc / dm_realloc, so the ranks fail at
 * different points of their work): the job ends with the same status on every rank, no rank
 * crashes or waits forever, and a job whose allocations all succeed is unchanged. */
static void test_alloc_failures(void)
{
    dm_flock_synth_options so = corpus();
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_synth_share(&v, &so, NDOCS, g_ctx.rank, g_ctx.size), DM_OK);
    dm_flock_options o = model();
    o.iterations = 6;
    o.migrate_every = 1;
    dm_flock_cluster_options co = DM_FLOCK_CLUSTER_OPTIONS_INIT; /* centroid steps, merge, refine */
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/alloc", g_tmp);
    if (g_ctx.rank == 0) CU_ASSERT_EQUAL(mkdir(dir, 0700), 0);
    MPI_Barrier(g_ctx.world);
    dm_flock_job_options jo = DM_FLOCK_JOB_OPTIONS_INIT;
    jo.out_dir = dir;
    jo.png_size = 64;
    sweep_arg a = {.v = &v, .o = &o, .co = &co, .jo = &jo};
    /* the job's status the same on every rank, and the allocation's error on every rank: the ranks
     * agree on the root cause's code, not on a neighbour's report that this rank failed
     * (DM_ERR_MPI); a failed job leaves no counted memory */
    dm_test_sweep s = {.run = sweep_run, .differs = sweep_differs, .arg = &a, .comm = &g_ctx.world};
    uint64_t n_max;
    int rc = dm_test_sweep_count(&s, &n_max);
    a.r0 = a.r;
    CU_ASSERT_EQUAL_FATAL(rc, DM_OK);
    CU_ASSERT_FATAL(n_max > 100);
    /* the first allocations (set-up) one by one, then points spread over the rest (fewer on 4
     * ranks, which share this machine's cores) */
    const uint64_t first = g_ctx.size > 2 ? 15 : 40, step = n_max / (g_ctx.size > 2 ? 30 : 80) + 1;
    dm_test_sweep_stats st = {0};
    /* pass 0: every rank fails its k-th allocation; pass 1 (several ranks): rank k mod P alone,
     * the others succeed where it fails (fewer points) */
    s.label = "pass 0";
    dm_test_sweep_run(&s, n_max + 1, first, step, &st);
    if (g_ctx.size > 1) {
        s.who = DM_TEST_SWEEP_K_MOD;
        s.label = "pass 1";
        dm_test_sweep_run(&s, n_max + 1, 0, 3 * step + (uint64_t)g_ctx.size - 1, &st);
    }
    CU_ASSERT(st.failed > st.tried / 2);
    rc = sweep_run(&a); /* and nothing is left broken */
    CU_ASSERT_EQUAL(rc, DM_OK);
    CU_ASSERT_EQUAL(a.r.clusters, a.r0.clusters);
    if (g_ctx.rank == 0)
        printf("\n  %d ranks: %llu allocations on the busiest rank, %d failure points tried, %d failed the job",
               g_ctx.size, (unsigned long long)n_max, st.tried, st.failed);
    dm_flock_vectors_release(&v);
}

int main(int argc, char **argv)
{
    CU_TestInfo mpi[] = {{"rank independence (bit-identical) and clusters", test_rank_independence},
                         {"migration every K iterations: the same bits", test_migrate_every},
                         {"small components attached by centroid, across ranks", test_centroid_attach_ranks},
                         {"clusters merged by centroid, across ranks", test_merge_ranks},
                         {"clusters refined by centroid steps, across ranks", test_refine_ranks},
                         {"conservation: one owner per document per iteration", test_conservation},
                         {"resume across rank counts", test_resume_across_ranks},
                         {"an error on one rank reaches all", test_error_on_one_rank},
                         {"an exchange message beyond 16 GiB: an error on both sides", test_exchange_too_large},
                         {"measured slice weights too uneven: equal slices", test_measured_weights_fall_back},
                         {"a step failing on one rank stops all (lagged agreement)", test_error_during_run},
                         {"files in rank order: MPI-IO, every rank's bytes, no temporary", test_write_ordered},
                         {"files in rank order: DOCMINE_ORDERED_WRITE=gather", test_write_ordered_gather},
                         {"class numbers from the first labels, across ranks", test_classes_rows},
                         {"every host allocation failing in turn: all ranks agree, none hangs", test_alloc_failures},
                         CU_TEST_INFO_NULL};
    CU_SuiteInfo suites[] = {{"flock_mpi", setup, teardown, NULL, NULL, mpi}, CU_SUITE_INFO_NULL};
    return dm_test_run_mpi(argc, argv, suites);
}
