/* GPU tests of flock (skipped without a GPU; mpiexec -n 1, 2, 4 on the GPU machine):
 *  - CPU vs CUDA: positions and velocities after 10 iterations agree within a normalised error
 *    of 1e-12 (stated tolerance; the backends share the model arithmetic, fixed-point sums and
 *    -fmad=false, so the expected difference is 0 and the test prints it), with the same neighbour
 *    and similarity counts;
 *  - the pair cache's carry of older decisions (DOCMINE_FLOCK_CACHE_CARRY): over 40 iterations
 *    the same trajectory with and without it, the CPU's neighbour and similarity counts with it
 *    (a wrong carried decision changes them), and more cache hits with it;
 *  - the pair cache's rows after steps (one rank, through a test hook), with and without the
 *    carry: no pair twice in a row, fills right, ages 0..16, every decision the exact one, the
 *    last step's pairs all there;
 *  - every compiled instance of every flock kernel, forced in turn, gives the CPU result;
 *  - the tuner's bench hooks: every instance's output equals the default instance's, exactly;
 *  - the CUDA backend on 1..P ranks (sub-communicators) gives bit-identical trajectories and the
 *    same clusters as the CPU backend, the initial distribution going through the GPUs
 *    (common/peerx.h, turned on here; the CPU backend's runs take MPI), and on P ranks also
 *    through MPI in many pieces;
 *  - the clusters on the device (edges, centroid sums and attachment) against the CPU backend and
 *    against the CUDA backend with the centroids on the host: the same labels and refinement
 *    steps and moves.
 * Inputs: seeded synthetic corpora of sizes that are not multiples of 32 or of a block size.
 *
 * Cost: several ranks often share one GPU here (ctest runs np2 and np4 on one device), where every
 * synchronisation waits for the other processes' time slices, so the multi-rank cases are few
 * and short: the instance test runs on 2 ranks (migration kernels included) every instance of
 * every kernel in max(instances) = 18 combined runs (round r forces instance r mod n_k of every kernel k; a differing round is then
 * taken apart kernel by kernel to name the instance; the runs cluster with the default options, so
 * that the clusters' kernels run too), and the rank-independence test runs 1, 2
 * and P ranks with a speed cap close to r, so that boids still cross slice edges and the torus
 * seam (both asserted). Under compute-sanitizer (DOCMINE_SANITIZER set, as scripts/gpu-check.sh
 * does) every launch is slow: the small variant runs the same cases on a few hundred documents
 * and a few iterations (every kernel and instance still launches) and says so. */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/context.h"
#include "common/status.h"
#include "common/timer.h"
#include "common/tune/tune.h"
#include "flock/flock.h"
#include "flock/flock_impl.h"
#include "flock/flock_synth.h"
#include "flock_testlib.h"
#include "testutil.h"

#define TOL 1e-12

static dm_ctx g_ctx;   /* CUDA backend over the job */
static int g_sanitizer; /* DOCMINE_SANITIZER set: the small variant (see the top) */
static dm_ctx g_cpu;   /* the same, CPU backend */

static int setup(void)
{
    dm_ctx_options o = DM_CTX_OPTIONS_INIT;
    o.backend = DM_BACKEND_CUDA;
    o.quiet = 1;
    setenv("DOCMINE_GPU_EXCHANGE", "1", 1); /* the distribution through the GPUs (opt-in) */
    if (dm_ctx_init(&g_ctx, &o) != DM_OK) return 1;
    g_cpu = g_ctx;
    g_cpu.backend = DM_BACKEND_CPU;
    dm_tune_set_mode(DM_TUNE_OFF); /* defaults unless forced: the tests choose instances */
    if (g_sanitizer && g_ctx.rank == 0)
        printf("\nflock GPU tests: DOCMINE_SANITIZER is set, running the small variant (%d rank(s))\n", g_ctx.size);
    return 0;
}
static int teardown(void)
{
    dm_ctx_free(&g_ctx);
    return 0;
}

static dm_flock_synth_options corpus(int tokens)
{
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.topics = 5;
    so.tokens = tokens;
    so.topic_vocab = 1000;
    so.shared_vocab = 2000;
    so.seed = 17;
    return so;
}

/* max |a - b| / max(max |a|, tiny) over the four state arrays */
static double norm_err(const ft_state *a, const ft_state *b)
{
    double num = 0, den = 1e-300;
    const double *pa[4] = {a->x, a->y, a->vx, a->vy}, *pb[4] = {b->x, b->y, b->vx, b->vy};
    for (int f = 0; f < 4; f++)
        for (uint64_t i = 0; i < a->n; i++) {
            num = fmax(num, fabs(pa[f][i] - pb[f][i]));
            den = fmax(den, fabs(pa[f][i]));
        }
    return num / den;
}

static int bit_identical(const ft_state *a, const ft_state *b)
{
    return a->n == b->n && !memcmp(a->x, b->x, 8 * a->n) && !memcmp(a->y, b->y, 8 * a->n) &&
           !memcmp(a->vx, b->vx, 8 * a->n) && !memcmp(a->vy, b->vy, 8 * a->n);
}

/* runs on the first q ranks of the job with ctx's backend */
static int run_on(ft_state *st, const dm_ctx *base, int q, const dm_flock_synth_options *so, uint64_t n,
                  const dm_flock_options *o, const dm_flock_cluster_options *co)
{
    memset(st, 0, sizeof *st);
    MPI_Comm sub;
    MPI_Comm_split(base->world, base->rank < q ? 0 : MPI_UNDEFINED, base->rank, &sub);
    int rc = DM_OK;
    if (sub != MPI_COMM_NULL) {
        dm_ctx c;
        ft_ctx_sub(&c, base, sub);
        rc = ft_run(st, &c, so, n, o, co);
        if (rc != DM_OK) fprintf(stderr, "rank %d of %d: %s\n", c.rank, c.size, dm_error_message());
        MPI_Comm_free(&sub);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, base->world);
    return rc;
}

static void test_cpu_vs_cuda(void)
{
    dm_flock_synth_options so = corpus(g_sanitizer ? 120 : 300);
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = g_sanitizer ? 3 : 10;
    o.threshold = 0.08;
    const uint64_t n = g_sanitizer ? 1201 : 4999;
    ft_state c, g;
    CU_ASSERT_EQUAL_FATAL(run_on(&c, &g_cpu, 1, &so, n, &o, NULL), DM_OK);
    CU_ASSERT_EQUAL_FATAL(run_on(&g, &g_ctx, 1, &so, n, &o, NULL), DM_OK);
    if (g_ctx.rank == 0) {
        double e = norm_err(&c, &g);
        printf("\n  CPU vs CUDA after %d iterations: normalised error %.3g (%s)\n", o.iterations, e,
               bit_identical(&c, &g) ? "bit-identical" : "not bit-identical");
        CU_ASSERT_TRUE(e <= TOL);
        CU_ASSERT_EQUAL(c.stats.pairs, g.stats.pairs);
        CU_ASSERT_EQUAL(c.stats.similar, g.stats.similar);
        CU_ASSERT_TRUE(g.stats.sim_cache_hits > 0);
        CU_ASSERT_TRUE(g.stats.similar > 0);
    }
    ft_state_free(&c);
    ft_state_free(&g);
}

static void test_cache_carry(void)
{
    dm_flock_synth_options so = corpus(g_sanitizer ? 120 : 300);
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = g_sanitizer ? 4 : 40;
    o.threshold = 0.08;
    const uint64_t n = g_sanitizer ? 1201 : 4999;
    ft_state c, off, on;
    CU_ASSERT_EQUAL_FATAL(run_on(&c, &g_cpu, 1, &so, n, &o, NULL), DM_OK);
    setenv("DOCMINE_FLOCK_CACHE_CARRY", "0", 1);
    int rc = run_on(&off, &g_ctx, 1, &so, n, &o, NULL);
    unsetenv("DOCMINE_FLOCK_CACHE_CARRY");
    CU_ASSERT_EQUAL_FATAL(rc, DM_OK);
    CU_ASSERT_EQUAL_FATAL(run_on(&on, &g_ctx, 1, &so, n, &o, NULL), DM_OK);
    if (g_ctx.rank == 0) {
        printf("\n  pair cache over %d iterations: %llu hits of %llu pairs without the carry, %llu with it\n",
               o.iterations, (unsigned long long)off.stats.sim_cache_hits, (unsigned long long)on.stats.pairs,
               (unsigned long long)on.stats.sim_cache_hits);
        CU_ASSERT_TRUE(bit_identical(&off, &on));
        CU_ASSERT_TRUE(norm_err(&c, &on) <= TOL);
        CU_ASSERT_EQUAL(c.stats.pairs, on.stats.pairs);
        CU_ASSERT_EQUAL(c.stats.similar, on.stats.similar);
        CU_ASSERT_EQUAL(off.stats.similar, on.stats.similar);
        CU_ASSERT_TRUE(on.stats.sim_cache_hits > off.stats.sim_cache_hits);
    }
    ft_state_free(&c);
    ft_state_free(&off);
    ft_state_free(&on);
}

/* Checks the pair-cache rows after a step: no pair twice in a row, the device's fill equal to
 * the row's entries, at most the row's limit, ages 0..16, every decision the exact one (the
 * CPU's fixed-point cosine of the two documents' vectors), and the last step's pairs all there
 * (the age-0 entries, when no row reached its limit). Returns the entries older than the last
 * step (carried). */
static size_t check_cache_rows(dm_flock_sim *s, uint64_t step_pairs)
{
    dm_flock_cache_entry *e = NULL;
    size_t m = 0, mismatch = 0;
    int limit = 0;
    CU_ASSERT_EQUAL_FATAL(dm_flock_cuda_cache_entries(s, &e, &m, &mismatch, &limit), DM_OK);
    CU_ASSERT_FATAL(limit > 0 && limit < 256);
    CU_ASSERT_EQUAL_FATAL(dm_flock_cuda_sync_host(s), DM_OK);
    const dm_flock_store *h = &s->own;
    const uint64_t nd = dm_flock_sim_docs(s);
    uint32_t *boid = malloc(sizeof *boid * nd);        /* document -> host boid */
    uint64_t *seen = calloc(nd, sizeof *seen);         /* other -> entry index + 1 of this row's doc */
    uint32_t *count = calloc(nd, sizeof *count);       /* entries per row's document */
    CU_ASSERT_FATAL(boid && seen && count && h->n == nd);
    for (size_t i = 0; i < h->n; i++) boid[h->id[i]] = (uint32_t)i;
    size_t dup = 0, bad_age = 0, wrong = 0, carried = 0, fresh = 0;
    for (size_t k = 0; k < m; k++) {
        const dm_flock_cache_entry *x = &e[k];
        CU_ASSERT_FATAL(x->doc < nd && x->other < nd && x->doc != x->other);
        if (seen[x->other] && e[seen[x->other] - 1].doc == x->doc) dup++;
        seen[x->other] = k + 1;
        count[x->doc]++;
        bad_age += x->age < 0 || x->age > 16;
        carried += x->age > 0;
        fresh += x->age == 0;
        const size_t a = boid[x->doc], b = boid[x->other];
        int64_t dot = dm_flock_dot_fix(h->col + h->voff[a], h->val + h->voff[a], h->vlen[a], h->col + h->voff[b],
                                       h->val + h->voff[b], h->vlen[b]);
        wrong += dm_flock_is_similar(dot, s->opt.threshold) != x->similar;
    }
    int full = 0;
    for (uint64_t d = 0; d < nd; d++) {
        CU_ASSERT(count[d] <= (uint32_t)limit);
        full |= count[d] >= (uint32_t)limit;
    }
    CU_ASSERT_EQUAL(dup, 0);
    CU_ASSERT_EQUAL(mismatch, 0);
    CU_ASSERT_EQUAL(bad_age, 0);
    CU_ASSERT_EQUAL(wrong, 0);
    if (!full) {
        CU_ASSERT_EQUAL(fresh, step_pairs);
    }
    if (dup || mismatch || bad_age || wrong || (!full && fresh != step_pairs))
        printf("\n  cache rows: %zu entries, %zu twice in a row, %zu fills differing, %zu ages out of range, %zu "
               "wrong decisions, %zu of the last step's %llu pairs\n",
               m, dup, mismatch, bad_age, wrong, fresh, (unsigned long long)step_pairs);
    free(boid);
    free(seen);
    free(count);
    free(e);
    return carried;
}

/* The pair cache's rows step by step on one rank, with the carry and without it (DOCMINE_FLOCK_
 * CACHE_CARRY=0: no entry older than the last step). Entries seen through the test hook. Note:
 * "seen" keeps the last entry per other document, and the entries of a row are consecutive, so a
 * repeat within a row is caught. */
static void test_cache_rows(void)
{
    if (g_ctx.rank != 0) return;
    dm_ctx c;
    ft_ctx_sub(&c, &g_ctx, MPI_COMM_SELF);
    dm_flock_synth_options so = corpus(g_sanitizer ? 120 : 300);
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = g_sanitizer ? 4 : 30;
    o.threshold = 0.08;
    const uint64_t n = g_sanitizer ? 1201 : 4999;
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_synth_share(&v, &so, n, 0, 1), DM_OK);
    for (int carry = 1; carry >= 0; carry--) {
        if (!carry) setenv("DOCMINE_FLOCK_CACHE_CARRY", "0", 1);
        dm_flock_sim *s = NULL;
        int rc = dm_flock_sim_init(&s, &c, &v, &o);
        unsetenv("DOCMINE_FLOCK_CACHE_CARRY");
        CU_ASSERT_EQUAL_FATAL(rc, DM_OK);
        size_t carried = 0;
        for (int t = 0; t < o.iterations; t++) {
            uint64_t before = dm_flock_sim_stats(s)->pairs;
            CU_ASSERT_EQUAL_FATAL(dm_flock_sim_step(s), DM_OK);
            if (t < 3 || t % 5 == 4 || t == o.iterations - 1)
                carried += check_cache_rows(s, dm_flock_sim_stats(s)->pairs - before);
        }
        printf("\n  pair cache rows %s the carry: %zu older entries seen, %llu hits of %llu pairs", carry ? "with" : "without",
               carried, (unsigned long long)dm_flock_sim_stats(s)->sim_cache_hits,
               (unsigned long long)dm_flock_sim_stats(s)->pairs);
        if (carry) {
            CU_ASSERT(carried > 0);
        } else {
            CU_ASSERT_EQUAL(carried, 0);
        }
        dm_flock_sim_free(s);
    }
    dm_flock_vectors_release(&v);
}

static const char *const g_kernel_names[] = {"flock.cell_keys", "flock.cell_bounds", "flock.gather",
                                             "flock.count", "flock.detect", "flock.similarity",
                                             "flock.forces", "flock.update", "flock.cache_move", "flock.flags",
                                             "flock.pick", "flock.edges", "flock.attach",
                                             "flock.centroid_sums", "flock.cache_build"};
#define NK ((int)(sizeof g_kernel_names / sizeof g_kernel_names[0]))

/* Forces instance (round mod n_k) of every kernel in only (-1: all kernels), or back to the tuner. */
static void force_round(int round, int only)
{
    for (int k = 0; k < NK; k++) {
        const dm_tune_kernel *kd = dm_tune_kernel_find(g_kernel_names[k]);
        int inst = round < 0 || (only >= 0 && k != only) ? -1 : round % kd->n_instances;
        CU_ASSERT_EQUAL(dm_flock_cuda_force_instance(g_kernel_names[k], inst), DM_OK);
    }
}

/* 1: the run with the forced instances gives the reference, clusters included (rank 0 decides,
 * all ranks learn). */
static int matches(const ft_state *ref, const dm_flock_synth_options *so, uint64_t n, const dm_flock_options *o,
                   const dm_flock_cluster_options *co, double *err)
{
    ft_state g;
    int rc = run_on(&g, &g_ctx, g_ctx.size < 2 ? g_ctx.size : 2, so, n, o, co);
    CU_ASSERT_EQUAL(rc, DM_OK);
    int ok = rc == DM_OK;
    *err = 0;
    if (g_ctx.rank == 0 && ok) {
        *err = norm_err(ref, &g);
        ok = *err <= TOL && ref->stats.pairs == g.stats.pairs && ref->stats.similar == g.stats.similar &&
             memcmp(ref->cluster, g.cluster, 4 * ref->n) == 0 && ref->refine_moved == g.refine_moved;
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, g_ctx.world);
    ft_state_free(&g);
    return ok;
}

static void test_every_instance_vs_cpu(void)
{
    CU_ASSERT_EQUAL_FATAL(dm_flock_tune_register(), DM_OK);
    dm_flock_synth_options so = corpus(120);
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = g_sanitizer ? 2 : 3;
    o.threshold = 0.08;
    const uint64_t n = g_sanitizer ? 601 : 3001;
    ft_state ref;
    /* two ranks (when there are) so that the migration kernels (flags, pick, cache move) run too;
     * more ranks would only add processes sharing the device (rank counts: the test below); the
     * clusters with the default options (edges, attachment, merge and refinement) */
    const int q = g_ctx.size < 2 ? g_ctx.size : 2;
    const dm_flock_cluster_options co = DM_FLOCK_CLUSTER_OPTIONS_INIT;
    CU_ASSERT_EQUAL_FATAL(run_on(&ref, &g_cpu, q, &so, n, &o, &co), DM_OK);
    int rounds = 0;
    for (int k = 0; k < NK; k++) {
        const dm_tune_kernel *kd = dm_tune_kernel_find(g_kernel_names[k]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(kd);
        if (kd->n_instances > rounds) rounds = kd->n_instances;
    }
    int bad = 0, runs = 0;
    for (int r = 0; r < rounds; r++) {
        force_round(r, -1);
        double e = 0;
        runs++;
        if (matches(&ref, &so, n, &o, &co, &e)) continue;
        /* name the instance: this round's instances one kernel at a time */
        int named = 0;
        for (int k = 0; k < NK; k++) {
            const dm_tune_kernel *kd = dm_tune_kernel_find(g_kernel_names[k]);
            force_round(r, k);
            runs++;
            if (matches(&ref, &so, n, &o, &co, &e)) continue;
            char pol[128];
            if (g_ctx.rank == 0)
                printf("\n  %s instance %d (%s) differs from the CPU: error %.3g\n", g_kernel_names[k],
                       r % kd->n_instances,
                       dm_tune_policy_str(&kd->instances[r % kd->n_instances].policy, pol, sizeof pol), e);
            named++;
        }
        if (g_ctx.rank == 0) printf("\n  round %d (instance r mod n of every kernel) differs from the CPU\n", r);
        bad += named ? named : 1; /* a combination may differ though no single instance does */
    }
    force_round(-1, -1);
    if (g_ctx.rank == 0) printf("\n  %d runs on %d rank(s) cover every instance of %d kernels, %d differ\n", runs, q,
                                NK, bad);
    CU_ASSERT_EQUAL(bad, 0);
    ft_state_free(&ref);
}

static void test_bench_hooks(void)
{
    CU_ASSERT_EQUAL_FATAL(dm_flock_tune_register(), DM_OK);
    if (g_ctx.rank != 0) return;
    for (int k = 0; k < NK; k++) {
        const dm_tune_kernel *kd = dm_tune_kernel_find(g_kernel_names[k]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(kd);
        const size_t base = g_sanitizer ? 601 : 3001;
        size_t n = strcmp(kd->work_unit, "slots") == 0 ? base * 256 : strcmp(kd->work_unit, "pairs") == 0 ? (g_sanitizer ? 8001 : 40001) : base;
        void *st = NULL;
        CU_ASSERT_EQUAL_FATAL(kd->bench_create(&st, n, 7), DM_OK);
        size_t bytes = 0;
        CU_ASSERT_EQUAL_FATAL(kd->bench_run(st, &kd->instances[kd->default_instance], NULL), DM_OK);
        CU_ASSERT_EQUAL_FATAL(kd->bench_output(st, NULL, &bytes), DM_OK);
        CU_ASSERT_TRUE(bytes > 0);
        unsigned char *want = malloc(bytes ? bytes : 1), *got = malloc(bytes ? bytes : 1);
        CU_ASSERT_EQUAL(kd->bench_output(st, want, &bytes), DM_OK);
        for (int i = 0; i < kd->n_instances; i++) {
            size_t b2 = 0;
            memset(got, 0xA5, bytes);
            CU_ASSERT_EQUAL(kd->bench_run(st, &kd->instances[i], NULL), DM_OK);
            CU_ASSERT_EQUAL(kd->bench_output(st, got, &b2), DM_OK);
            CU_ASSERT_EQUAL(b2, bytes);
            if (memcmp(want, got, bytes) != 0) {
                char pol[128];
                printf("\n  bench output of %s instance %d (%s) differs from the default\n", kd->name, i,
                       dm_tune_policy_str(&kd->instances[i].policy, pol, sizeof pol));
                CU_FAIL("instance output differs");
            }
        }
        free(want);
        free(got);
        kd->bench_destroy(st);
    }
}

static void test_cuda_rank_independence(void)
{
    dm_flock_synth_options so = corpus(100);
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    /* a speed cap close to r: boids cross slice edges and the torus seam within a few iterations */
    o.iterations = g_sanitizer ? 8 : 20;
    o.v_max = 0.9;
    o.threshold = 0.08;
    const uint64_t n = g_sanitizer ? 601 : 1999;
    dm_flock_cluster_options co = DM_FLOCK_CLUSTER_OPTIONS_INIT;
    ft_state cpu, one, st;
    CU_ASSERT_EQUAL_FATAL(run_on(&cpu, &g_cpu, 1, &so, n, &o, &co), DM_OK);
    CU_ASSERT_EQUAL_FATAL(run_on(&one, &g_ctx, 1, &so, n, &o, &co), DM_OK);
    if (g_ctx.rank == 0) {
        printf("\n  CPU vs CUDA after %d iterations: normalised error %.3g, %llu seam crossings\n", o.iterations,
               norm_err(&cpu, &one), (unsigned long long)one.stats.seam_crossings);
        CU_ASSERT_EQUAL(memcmp(cpu.cluster, one.cluster, 4 * cpu.n), 0);
        CU_ASSERT_TRUE(one.stats.seam_crossings > 0);
    }
    /* 2 ranks and all of them (and 3 when that is all); 2 ranks also migrating after every
     * iteration (the automatic interval is 3 there, 1 on 4 ranks). The initial distribution goes
     * through the GPUs, and on all ranks also through MPI in pieces of 64 KiB */
    for (int q = 2; q <= g_ctx.size; q++) {
        if (q != 2 && q != g_ctx.size) continue;
        for (int variant = 0; variant < (q == g_ctx.size ? 3 : 2); variant++) {
            int every = variant == 1, gpu = variant <= 1;
            if (every && q != 2) continue;
            o.migrate_every = every;
            setenv("DOCMINE_GPU_EXCHANGE", gpu ? "1" : "0", 1);
            if (!gpu) setenv("DOCMINE_FLOCK_DIST_CHUNK", "65536", 1);
            int64_t gpu0 = dm_counter_get("flock.distribute.gpu_bytes");
            CU_ASSERT_EQUAL_FATAL(run_on(&st, &g_ctx, q, &so, n, &o, &co), DM_OK);
            unsetenv("DOCMINE_FLOCK_DIST_CHUNK");
            setenv("DOCMINE_GPU_EXCHANGE", "1", 1);
            if (g_ctx.rank == 0) {
                /* the initial distribution went through the GPUs (the ranks share this node) or
                 * through MPI */
                CU_ASSERT_EQUAL(dm_counter_get("flock.distribute.gpu_bytes") > gpu0, gpu);
                printf("  %d ranks, migration every %d, distribution through %s: %s, %llu boids migrated, "
                       "%llu seam crossings\n",
                       q, st.migrate_every, gpu ? "the GPUs" : "MPI (64 KiB pieces)",
                       bit_identical(&one, &st) ? "bit-identical" : "NOT bit-identical",
                       (unsigned long long)st.stats.migrated_out, (unsigned long long)st.stats.seam_crossings);
                if (every) CU_ASSERT_EQUAL(st.migrate_every, every);
                CU_ASSERT_TRUE(bit_identical(&one, &st));
                CU_ASSERT_EQUAL(memcmp(one.cluster, st.cluster, 4 * one.n), 0);
                CU_ASSERT_TRUE(st.stats.migrated_out > 0);
                CU_ASSERT_TRUE(st.stats.migrated_vectors < st.stats.migrated_out); /* from the halo */
                /* the senders kept the migrants' vectors: the next halo left them out */
                CU_ASSERT_TRUE(st.stats.halo_returned > 0);
                CU_ASSERT_TRUE(st.stats.seam_crossings > 0);
            }
            ft_state_free(&st);
        }
    }
    o.migrate_every = 0;
    ft_state_free(&cpu);
    ft_state_free(&one);
}

/* The clusters on the device (flock.edges; flock.centroid_sums and flock.attach for the centroid
 * attachment, the merge and every refinement step) against the CPU backend, and against the CUDA
 * backend summing and attaching on the host:
 * the same labels, refinement steps and moves, on 1 rank and on all of them, with small components
 * attached by centroid, with and without the merge, and with the defaults. Two iterations on a
 * corpus of overlapping topics leave many small components, so that the refinement moves
 * documents over several steps (asserted). */
static void test_clusters_cpu_vs_cuda(void)
{
    dm_flock_synth_options so = corpus(60);
    so.topics = 6;
    so.topic_vocab = 300;
    so.shared_vocab = 300;
    so.overlap = 0.7;
    so.seed = 3;
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = 2;
    o.threshold = 0.12;
    o.seed = 99;
    const uint64_t n = g_sanitizer ? 801 : 1999; /* on the CPU: 15 and 21 steps, 87 and 1261 moves */
    const dm_flock_cluster_options variants[3] = {
        {5, DM_FLOCK_SMALL_CENTROID, 0.22, 0.0, 200}, {5, DM_FLOCK_SMALL_CENTROID, 0.22, 0.7, 200},
        DM_FLOCK_CLUSTER_OPTIONS_INIT};
    uint64_t moved = 0;
    int multi_step = 0;
    for (int v = 0; v < 3; v++)
        for (int q = 1; q <= g_ctx.size; q++) {
            if (q != 1 && q != g_ctx.size) continue;
            ft_state c, h, d;
            CU_ASSERT_EQUAL_FATAL(run_on(&c, &g_cpu, q, &so, n, &o, &variants[v]), DM_OK);
            dm_flock_set_attach_device(0);
            int hrc = run_on(&h, &g_ctx, q, &so, n, &o, &variants[v]);
            dm_flock_set_attach_device(1);
            CU_ASSERT_EQUAL_FATAL(hrc, DM_OK);
            CU_ASSERT_EQUAL_FATAL(run_on(&d, &g_ctx, q, &so, n, &o, &variants[v]), DM_OK);
            if (g_ctx.rank == 0) {
                int same = !memcmp(c.cluster, d.cluster, 4 * c.n) && !memcmp(h.cluster, d.cluster, 4 * c.n);
                printf("\n  clusters, options %d, %d rank(s): %d refinement steps, %llu moves; CPU, CUDA "
                       "with the centroids on the host and on the device: %s",
                       v, q, d.refine_steps, (unsigned long long)d.refine_moved, same ? "the same" : "DIFFERENT");
                CU_ASSERT_TRUE(same);
                CU_ASSERT_EQUAL(c.refine_steps, d.refine_steps);
                CU_ASSERT_EQUAL(h.refine_steps, d.refine_steps);
                CU_ASSERT_EQUAL(c.refine_moved, d.refine_moved);
                CU_ASSERT_EQUAL(h.refine_moved, d.refine_moved);
                moved += d.refine_moved;
                multi_step |= d.refine_steps > 1;
            }
            ft_state_free(&c);
            ft_state_free(&h);
            ft_state_free(&d);
        }
    if (g_ctx.rank == 0) {
        printf("\n");
        CU_ASSERT_TRUE(moved > 0);
        CU_ASSERT_TRUE(multi_step);
    }
}

/* Out of device memory on rank 0 (dm_test_device_hog: no allocation of 2 MiB or more succeeds,
 * and the pair cache of 4999 boids needs 10 MB): the simulation is refused with DM_ERR_NOMEM whose
 * message names the stage (the allocator's own says only what did not fit), no device memory is
 * kept, and with the memory back the same run works. The other ranks wait meanwhile (run_on). */
static void test_out_of_device_memory(void)
{
    dm_flock_synth_options so = corpus(300);
    dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
    o.iterations = 2;
    o.threshold = 0.08;
    const uint64_t n = 4999;
    size_t d0 = dm_mem_current(DM_MEM_DEVICE);
    int held = g_ctx.rank == 0 ? dm_test_device_hog() : 0;
    ft_state g;
    int rc = run_on(&g, &g_ctx, 1, &so, n, &o, NULL);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", dm_error_message());
    if (g_ctx.rank == 0) dm_test_device_unhog();
    ft_state_free(&g);
    if (g_ctx.rank == 0) {
        printf("\n  injected %d; run: %d (%s)", held, rc, msg);
        CU_ASSERT_EQUAL(rc, DM_ERR_NOMEM);
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, "flock"));
        CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_DEVICE), d0);
    }
    dm_error_clear();
    CU_ASSERT_EQUAL(run_on(&g, &g_ctx, 1, &so, n, &o, NULL), DM_OK);
    ft_state_free(&g);
    if (g_ctx.rank == 0) CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_DEVICE), d0);
}

static void test_error_during_run(void)
{
    dm_flock_synth_options so = corpus(100);
    ft_check_error_during_run(&g_ctx, &so, g_sanitizer ? 301 : 1999, g_sanitizer ? 4 : 12);
}

int main(int argc, char **argv)
{
    CU_TestInfo gpu[] = {{"CPU vs CUDA after 10 iterations", test_cpu_vs_cuda},
                         {"pair cache: older decisions carried", test_cache_carry},
                         {"pair cache: rows after each step", test_cache_rows},
                         {"every instance of every kernel vs the CPU", test_every_instance_vs_cpu},
                         {"bench hooks: every instance equals the default", test_bench_hooks},
                         {"CUDA backend: rank independence and clusters", test_cuda_rank_independence},
                         {"clusters on the device vs the CPU", test_clusters_cpu_vs_cuda},
                         {"CUDA backend: a step failing on one rank stops all", test_error_during_run},
                         {"CUDA backend: out of device memory", test_out_of_device_memory},
                         CU_TEST_INFO_NULL};
    CU_SuiteInfo suites[] = {{"flock_gpu", setup, teardown, NULL, NULL, gpu}, CU_SUITE_INFO_NULL};
    g_sanitizer = getenv("DOCMINE_SANITIZER") != NULL;
    return dm_test_run_gpu(argc, argv, suites);
}
