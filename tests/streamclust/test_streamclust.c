/* Unit tests of the streamclust CPU reference: the lrand48-compatible generator and stream,
 * gain on hand-checked sets, speedy and FL invariants, local search range / give-up, contcenters,
 * thread-count independence and the input errors; the signed feature hashing of document vectors
 * (against the documented hash) and the in-memory stream; every host allocation of a whole run
 * failed in turn (one rank, 1 and 4 threads). Reference: Rodinia streamcluster semantics. */
#include <CUnit/CUnit.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/status.h"
#include "streamclust/streamclust.h"
#include "streamclust/streamclust_impl.h"
#include "testutil.h"

static void test_rng_matches_lrand48(void)
{
    dm_sc_rng r;
    dm_sc_rng_seed(&r, 1);
    srand48(1);
    for (int i = 0; i < 10000; i++) CU_ASSERT_EQUAL_FATAL(dm_sc_rng_next(&r), lrand48());
    /* jump-ahead equals stepping */
    dm_sc_rng a, b;
    dm_sc_rng_seed(&a, 1);
    dm_sc_rng_seed(&b, 1);
    for (int i = 0; i < 12345; i++) dm_sc_rng_next(&a);
    dm_sc_rng_jump(&b, 12345);
    CU_ASSERT_EQUAL(a.x, b.x);
    dm_sc_rng_jump(&a, (uint64_t)1 << 40);
    dm_sc_rng_jump(&b, ((uint64_t)1 << 39));
    dm_sc_rng_jump(&b, ((uint64_t)1 << 39));
    CU_ASSERT_EQUAL(a.x, b.x);
}

static void test_generator_is_rodinia(void)
{
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.dim = 7;
    o.n = 50;
    float all[50 * 7], part[5 * 7];
    CU_ASSERT_EQUAL_FATAL(dm_sc_stream_read(all, &o, 0, 50), DM_OK);
    srand48(1); /* Rodinia's SimStream: lrand48()/(float)INT_MAX, point by point */
    for (int i = 0; i < 50 * 7; i++) CU_ASSERT_EQUAL_FATAL(all[i], lrand48() / (float)INT_MAX);
    CU_ASSERT_EQUAL_FATAL(dm_sc_stream_read(part, &o, 20, 5), DM_OK);
    CU_ASSERT_EQUAL(memcmp(part, all + 20 * 7, sizeof part), 0);
}

/* An engine with 1-D points at coords[], weights w[], each assigned to assign[] (a centre). */
static dm_sc_engine *make_1d(const float *coords, const float *w, const long *assign, long n)
{
    dm_sc_engine *e = NULL;
    CU_ASSERT_EQUAL_FATAL(dm_sc_engine_create(&e, DM_SC_CPU, n, 1), DM_OK);
    dm_sc_points *p = dm_sc_engine_points(e);
    for (long i = 0; i < n; i++) {
        p->coord[i] = coords[i];
        p->id[i] = i;
    }
    dm_sc_points_reset(p, n);
    for (long i = 0; i < n; i++) p->weight[i] = w[i];
    CU_ASSERT_EQUAL_FATAL(dm_sc_engine_load(e, n), DM_OK);
    for (long i = 0; i < n; i++) {
        p->assign[i] = assign[i];
        float d = coords[i] - coords[assign[i]];
        p->cost[i] = d * d * w[i];
        e->is_center[assign[i]] = 1;
    }
    return e;
}

static void test_gain_hand_checked(void)
{
    /* one centre at 0; candidate 10 with z = 5: points 10 and 11 switch (savings 100 and 120),
     * the centre does not close (5 - 100 - 80 < 0): gain = 215, k = 2 */
    {
        float c[] = {0, 1, 10, 11}, w[] = {1, 1, 1, 1};
        long a[] = {0, 0, 0, 0};
        dm_sc_engine *e = make_1d(c, w, a, 4);
        dm_sc_points *p = dm_sc_engine_points(e);
        long k = 1;
        float g = -1;
        CU_ASSERT_EQUAL(dm_sc_gain_cpu(&g, e, 2, 5.0f, &k), DM_OK);
        CU_ASSERT_EQUAL(g, 215.0f);
        CU_ASSERT_EQUAL(k, 2);
        CU_ASSERT_EQUAL(p->assign[0], 0);
        CU_ASSERT_EQUAL(p->assign[1], 0);
        CU_ASSERT_EQUAL(p->assign[2], 2);
        CU_ASSERT_EQUAL(p->assign[3], 2);
        CU_ASSERT_EQUAL(p->cost[3], 1.0f);
        CU_ASSERT(e->is_center[0] && e->is_center[2]);
        dm_sc_engine_destroy(e);
    }
    /* centres 0 and 10, point 11 (weight 2) at centre 10; candidate 11, z = 5: centre 10 closes
     * (5 - 1 = 4 > 0), total 5 - 2 - 4 = -1: opens with gain 1, k stays 2 */
    {
        float c[] = {0, 10, 11}, w[] = {1, 1, 2};
        long a[] = {0, 1, 1};
        dm_sc_engine *e = make_1d(c, w, a, 3);
        dm_sc_points *p = dm_sc_engine_points(e);
        long k = 2;
        float g = -1;
        CU_ASSERT_EQUAL(dm_sc_gain_cpu(&g, e, 2, 5.0f, &k), DM_OK);
        CU_ASSERT_EQUAL(g, 1.0f);
        CU_ASSERT_EQUAL(k, 2);
        CU_ASSERT_EQUAL(p->assign[1], 2);
        CU_ASSERT_EQUAL(p->cost[1], 1.0f);
        CU_ASSERT_EQUAL(p->assign[2], 2);
        CU_ASSERT(!e->is_center[1] && e->is_center[2] && e->is_center[0]);
        dm_sc_engine_destroy(e);
    }
    /* the same with weight 1: total exactly 0 (an exact tie): x does not open, nothing moves */
    {
        float c[] = {0, 10, 11}, w[] = {1, 1, 1};
        long a[] = {0, 1, 1};
        dm_sc_engine *e = make_1d(c, w, a, 3);
        dm_sc_points *p = dm_sc_engine_points(e);
        long k = 2;
        float g = -1;
        CU_ASSERT_EQUAL(dm_sc_gain_cpu(&g, e, 2, 5.0f, &k), DM_OK);
        CU_ASSERT_EQUAL(g, 0.0f);
        CU_ASSERT_EQUAL(k, 2);
        CU_ASSERT_EQUAL(p->assign[2], 1);
        CU_ASSERT(e->is_center[1] && !e->is_center[2]);
        dm_sc_engine_destroy(e);
    }
}

/* Seeded random points in [0,1)^dim from the generator, loaded into a CPU engine. */
static dm_sc_engine *make_random(long n, int dim, long first)
{
    dm_sc_engine *e = NULL;
    CU_ASSERT_EQUAL_FATAL(dm_sc_engine_create(&e, DM_SC_CPU, n, dim), DM_OK);
    dm_sc_points *p = dm_sc_engine_points(e);
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.dim = dim;
    o.n = first + n;
    CU_ASSERT_EQUAL_FATAL(dm_sc_stream_read(p->coord, &o, first, n), DM_OK);
    dm_sc_points_reset(p, n);
    for (long i = 0; i < n; i++) p->id[i] = first + i;
    CU_ASSERT_EQUAL_FATAL(dm_sc_engine_load(e, n), DM_OK);
    return e;
}

static double true_cost(dm_sc_engine *e, float z, long k)
{
    dm_sc_points *p = dm_sc_engine_points(e);
    double s = (double)z * (double)k;
    for (long i = 0; i < p->num; i++) s += p->cost[i];
    return s;
}

/* every point is assigned to a centre, with cost = weight * distance, and k counts the centres */
static void check_solution(dm_sc_engine *e, long k)
{
    dm_sc_points *p = dm_sc_engine_points(e);
    long centres = 0, bad_assign = 0, bad_cost = 0;
    for (long i = 0; i < p->num; i++) {
        centres += e->is_center[i] != 0;
        if (!e->is_center[p->assign[i]]) bad_assign++;
        float d = dm_sc_dist(dm_sc_point_coord(p, i), dm_sc_point_coord(p, p->assign[i]), p->dim);
        if (d * p->weight[i] != p->cost[i]) bad_cost++;
    }
    CU_ASSERT_EQUAL(centres, k);
    CU_ASSERT_EQUAL(bad_assign, 0);
    CU_ASSERT_EQUAL(bad_cost, 0);
}

static void test_speedy_invariants(void)
{
    dm_sc_engine *e = make_random(1500, 5, 0);
    dm_sc_rng r;
    dm_sc_rng_seed(&r, 7);
    for (int rep = 0; rep < 3; rep++) {
        float z = rep == 0 ? 50.0f : rep == 1 ? 5.0f : 0.5f, cost = 0;
        long k = 0;
        CU_ASSERT_EQUAL_FATAL(dm_sc_speedy_cpu(&cost, e, z, &k, &r), DM_OK);
        dm_sc_points *p = dm_sc_engine_points(e);
        memset(e->is_center, 0, (size_t)p->num);
        for (long i = 0; i < p->num; i++) e->is_center[p->assign[i]] = 1;
        check_solution(e, k);
        CU_ASSERT(fabs(true_cost(e, z, k) - cost) <= 1e-4 * cost);
        CU_ASSERT(k >= 1);
    }
    dm_sc_engine_destroy(e);
}

/* FL invariant: no gain call increases z k + sum of costs, and the reported gain is the decrease */
static void test_fl_cost_never_increases(void)
{
    dm_sc_engine *e = make_random(2000, 6, 100);
    dm_sc_rng r;
    dm_sc_rng_seed(&r, 3);
    float z = 3.0f, cost = 0;
    long k = 0;
    CU_ASSERT_EQUAL_FATAL(dm_sc_speedy_cpu(&cost, e, z, &k, &r), DM_OK);
    dm_sc_points *p = dm_sc_engine_points(e);
    for (long i = 0; i < p->num; i++) e->is_center[p->assign[i]] = 1;
    double before = true_cost(e, z, k);
    long opens = 0;
    for (int round = 0; round < 3; round++) {
        double round_start = before;
        for (int c = 0; c < 300; c++) {
            long x = dm_sc_rng_next(&r) % p->num;
            float g;
            CU_ASSERT_EQUAL_FATAL(dm_sc_gain_cpu(&g, e, x, z, &k), DM_OK);
            double after = true_cost(e, z, k);
            CU_ASSERT(g >= 0.0f);
            CU_ASSERT(after <= before + 1e-6 * before);
            CU_ASSERT(fabs((before - after) - g) <= 1e-5 * before);
            opens += g > 0;
            before = after;
        }
        CU_ASSERT(before <= round_start);
    }
    CU_ASSERT(opens > 0);
    check_solution(e, k);
    dm_sc_engine_destroy(e);
}

static void test_local_search_range(void)
{
    long ranges[][2] = {{5, 10}, {10, 20}, {2, 3}, {1, 1}};
    for (int t = 0; t < 4; t++) {
        dm_sc_engine *e = make_random(3000, 8, 1000 * t);
        dm_sc_rng r;
        dm_sc_rng_seed(&r, 11 + t);
        dm_sc_local_result lr;
        CU_ASSERT_EQUAL_FATAL(dm_sc_local_search(&lr, e, ranges[t][0], ranges[t][1], &r), DM_OK);
        CU_ASSERT(lr.gave_up || (lr.k >= ranges[t][0] && lr.k <= ranges[t][1]));
        CU_ASSERT_EQUAL(lr.gave_up, !(lr.k >= ranges[t][0] && lr.k <= ranges[t][1]));
        if (ranges[t][1] == 1) CU_ASSERT_EQUAL(lr.k, 1); /* 3000 distinct points: one centre is reachable */
        check_solution(e, lr.k);
        double tc = true_cost(e, lr.z, lr.k);
        CU_ASSERT(fabs(tc - lr.cost) <= 1e-3 * tc);
        dm_sc_engine_destroy(e);
    }
    /* KMIN = KMAX = 1 on two and on five points, where speedy opens more than one centre: the
     * local search must close them (ITER k ln k is 0 at k = 1: no gain call, no closing) */
    const float c2[] = {0, 10}, c5[] = {0, 1, 2, 50, 51}, w[] = {1, 1, 1, 1, 1};
    const long a[] = {0, 0, 0, 0, 0};
    for (int t = 0; t < 2; t++) {
        dm_sc_engine *e = make_1d(t ? c5 : c2, w, a, t ? 5 : 2);
        dm_sc_rng r;
        dm_sc_rng_seed(&r, 3 + t);
        dm_sc_local_result lr;
        CU_ASSERT_EQUAL_FATAL(dm_sc_local_search(&lr, e, 1, 1, &r), DM_OK);
        CU_ASSERT_EQUAL(lr.k, 1);
        CU_ASSERT_EQUAL(lr.gave_up, 0);
        check_solution(e, lr.k);
        /* the best centre among the points, by brute force: 10 or 0; 2 */
        const float *c = t ? c5 : c2;
        const long n = t ? 5 : 2;
        double best = INFINITY, got = 0.0;
        for (long j = 0; j < n; j++) {
            double s = 0.0;
            for (long i = 0; i < n; i++) s += (double)(c[i] - c[j]) * (c[i] - c[j]);
            if (s < best) best = s;
        }
        for (long i = 0; i < n; i++) got += dm_sc_engine_points(e)->cost[i];
        CU_ASSERT_DOUBLE_EQUAL(got, best, 1e-3);
        CU_ASSERT_DOUBLE_EQUAL(lr.cost, best + lr.z, 1e-3 * (best + lr.z));
        dm_sc_engine_destroy(e);
    }
}

static void test_give_up(void)
{
    /* all points identical: one centre, gave_up since kmin > 1, and it terminates */
    dm_sc_engine *e = NULL;
    CU_ASSERT_EQUAL_FATAL(dm_sc_engine_create(&e, DM_SC_CPU, 100, 3), DM_OK);
    dm_sc_points *p = dm_sc_engine_points(e);
    for (int i = 0; i < 300; i++) p->coord[i] = 0.5f;
    dm_sc_points_reset(p, 100);
    for (long i = 0; i < 100; i++) p->id[i] = i;
    CU_ASSERT_EQUAL_FATAL(dm_sc_engine_load(e, 100), DM_OK);
    dm_sc_rng r;
    dm_sc_rng_seed(&r, 1);
    dm_sc_local_result lr;
    CU_ASSERT_EQUAL(dm_sc_local_search(&lr, e, 3, 6, &r), DM_OK);
    CU_ASSERT_EQUAL(lr.k, 1);
    CU_ASSERT_EQUAL(lr.gave_up, 1);
    /* three distinct points repeated: kmin = 5 cannot be reached */
    for (int i = 0; i < 100; i++)
        for (int d = 0; d < 3; d++) p->coord[i * 3 + d] = (float)(i % 3);
    dm_sc_points_reset(p, 100);
    for (long i = 0; i < 100; i++) p->id[i] = i;
    CU_ASSERT_EQUAL_FATAL(dm_sc_engine_load(e, 100), DM_OK);
    CU_ASSERT_EQUAL(dm_sc_local_search(&lr, e, 5, 8, &r), DM_OK);
    CU_ASSERT(lr.k <= 3);
    CU_ASSERT_EQUAL(lr.gave_up, 1);
    check_solution(e, lr.k);
    dm_sc_engine_destroy(e);
}

static void test_contcenters_copycenters(void)
{
    float c[] = {0, 2, 4, 10}, w[] = {1, 1, 2, 3};
    long a[] = {0, 0, 0, 3};
    dm_sc_engine *e = make_1d(c, w, a, 4);
    dm_sc_points *p = dm_sc_engine_points(e);
    dm_sc_contcenters(p);
    /* centre 0 becomes the weighted mean (0*1 + 2*1 + 4*2) / 4 = 2.5 with weight 4 */
    CU_ASSERT(fabsf(dm_sc_point_coord(p, 0)[0] - 2.5f) < 1e-6f);
    CU_ASSERT_EQUAL(p->weight[0], 4.0f);
    CU_ASSERT_EQUAL(p->weight[3], 3.0f);
    dm_sc_points cs;
    CU_ASSERT_EQUAL_FATAL(dm_sc_points_init(&cs, 3, 1), DM_OK);
    cs.num = 0;
    CU_ASSERT_EQUAL(dm_sc_copycenters(&cs, p), DM_OK);
    CU_ASSERT_EQUAL(cs.num, 2);
    CU_ASSERT_EQUAL(cs.id[0], 0);
    CU_ASSERT_EQUAL(cs.id[1], 3);
    CU_ASSERT_EQUAL(cs.weight[0] + cs.weight[1], 7.0f);
    /* no room for two more: CLUSTERSIZE error */
    CU_ASSERT_EQUAL(dm_sc_copycenters(&cs, p), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "CLUSTERSIZE"));
    dm_sc_points_free(&cs);
    dm_sc_engine_destroy(e);
}

/* the result must not depend on the OpenMP thread count (exact sums) */
static void test_threads_identical(void)
{
    long *assign[2];
    float cost[2];
    long k[2];
    int saved = omp_get_max_threads();
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(t == 0 ? 1 : 3);
        dm_sc_engine *e = make_random(2500, 9, 77);
        dm_sc_rng r;
        dm_sc_rng_seed(&r, 5);
        dm_sc_local_result lr;
        CU_ASSERT_EQUAL_FATAL(dm_sc_local_search(&lr, e, 6, 12, &r), DM_OK);
        dm_sc_points *p = dm_sc_engine_points(e);
        assign[t] = malloc(2500 * sizeof(long));
        memcpy(assign[t], p->assign, 2500 * sizeof(long));
        cost[t] = lr.cost;
        k[t] = lr.k;
        dm_sc_engine_destroy(e);
    }
    omp_set_num_threads(saved);
    CU_ASSERT_EQUAL(k[0], k[1]);
    CU_ASSERT_EQUAL(cost[0], cost[1]);
    CU_ASSERT_EQUAL(memcmp(assign[0], assign[1], 2500 * sizeof(long)), 0);
    free(assign[0]);
    free(assign[1]);
}

static void write_floats(const char *path, long count, float v)
{
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (long i = 0; i < count; i++) fwrite(&v, sizeof v, 1, f);
    fclose(f);
}

static void test_bad_input(void)
{
    long n;
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.kmin = 21;
    CU_ASSERT_EQUAL(dm_sc_options_check(&n, &o), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "KMIN (21) > KMAX (20)"));
    o = (dm_sc_options)DM_SC_OPTIONS_INIT;
    o.clustersize = 5;
    CU_ASSERT_EQUAL(dm_sc_options_check(&n, &o), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "CLUSTERSIZE"));
    o = (dm_sc_options)DM_SC_OPTIONS_INIT;
    o.n = 0;
    CU_ASSERT_EQUAL(dm_sc_options_check(&n, &o), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "N = 0"));
    o = (dm_sc_options)DM_SC_OPTIONS_INIT;
    CU_ASSERT_EQUAL(dm_sc_options_check(&n, &o), DM_OK);
    CU_ASSERT_EQUAL(n, 65536);

    char dir[256], path[300];
    CU_ASSERT_PTR_NOT_NULL_FATAL(dm_test_tmpdir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/pts.bin", dir);
    write_floats(path, 10, 0.25f); /* 10 floats: not a multiple of DIM = 3 */
    o.input = path;
    o.dim = 3;
    o.n = 0;
    CU_ASSERT_EQUAL(dm_sc_options_check(&n, &o), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "DIM mismatch"));
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), path));
    write_floats(path, 8, 0.25f); /* 4 points of DIM 2, N = 5 declared */
    o.dim = 2;
    o.n = 5;
    CU_ASSERT_EQUAL(dm_sc_options_check(&n, &o), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "shorter than declared"));
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), path));
    o.n = 0;
    CU_ASSERT_EQUAL(dm_sc_options_check(&n, &o), DM_OK);
    CU_ASSERT_EQUAL(n, 4);
    float buf[8];
    CU_ASSERT_EQUAL(dm_sc_stream_read(buf, &o, 0, 4), DM_OK);
    CU_ASSERT_EQUAL(buf[7], 0.25f);
    CU_ASSERT_EQUAL(dm_sc_stream_read(buf, &o, 1, 4), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), path));
    o.input = "/nonexistent/streamclust.bin";
    CU_ASSERT_EQUAL(dm_sc_options_check(&n, &o), DM_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "/nonexistent/streamclust.bin"));
    /* NaN coordinates are refused at load */
    dm_sc_engine *e = NULL;
    CU_ASSERT_EQUAL_FATAL(dm_sc_engine_create(&e, DM_SC_CPU, 4, 2), DM_OK);
    dm_sc_points *p = dm_sc_engine_points(e);
    for (int i = 0; i < 8; i++) p->coord[i] = (float)i;
    p->coord[5] = NAN;
    dm_sc_points_reset(p, 4);
    for (long i = 0; i < 4; i++) p->id[i] = i;
    CU_ASSERT_EQUAL(dm_sc_engine_load(e, 4), DM_ERR_FORMAT);
    dm_sc_engine_destroy(e);
    unlink(path);
    rmdir(dir);
}

/* A NaN or an infinity in a binary input file: the error names the file and the point (the load
 * refused it as "coordinate 1 of point 2 is not finite", no file named), on the run's first read
 * and on every later one. */
static void test_input_not_finite(void)
{
    char dir[256], path[300];
    CU_ASSERT_PTR_NOT_NULL_FATAL(dm_test_tmpdir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/nan.bin", dir);
    float v[12];
    for (int i = 0; i < 12; i++) v[i] = (float)i;
    v[5] = NAN; /* point 2, coordinate 1 at DIM 2 */
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL_FATAL(fwrite(v, sizeof v, 1, f), 1);
    fclose(f);
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.kmin = 1;
    o.kmax = 2;
    o.dim = 2;
    o.n = 0;
    o.chunksize = 4;
    o.clustersize = 10;
    o.input = path;
    float buf[12];
    CU_ASSERT_EQUAL(dm_sc_stream_read(buf, &o, 0, 2), DM_OK); /* points 0 and 1 are finite */
    CU_ASSERT_EQUAL(dm_sc_stream_read(buf, &o, 1, 3), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), path));
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "coordinate 1 of point 2 is not finite"));
    dm_sc_result r;
    MPI_Comm self = MPI_COMM_SELF;
    CU_ASSERT_EQUAL(dm_sc_run(&r, &o, &self), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), path));
    v[5] = 1.0f;
    v[8] = -INFINITY;
    f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL_FATAL(fwrite(v, sizeof v, 1, f), 1);
    fclose(f);
    CU_ASSERT_EQUAL(dm_sc_run(&r, &o, &self), DM_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), path));
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "coordinate 0 of point 4 is not finite"));
    unlink(path);
    rmdir(dir);
}

/* Point sets whose size overflows a size_t (CLUSTERSIZE or a chunk of 2^62 points): no memory,
 * as for any size beyond the host's. cap x dim x 4 bytes wrapped to 0 and the set was made of
 * empty allocations that the run then wrote past (a crash, or heap corruption). */
static void test_sizes_beyond_size_t(void)
{
    dm_sc_points p;
    CU_ASSERT_EQUAL(dm_sc_points_init(&p, (long)1 << 62, 4), DM_ERR_NOMEM);
    CU_ASSERT_PTR_NULL(p.coord);
    CU_ASSERT_EQUAL(dm_sc_points_init(&p, (long)1 << 61, 1), DM_ERR_NOMEM);
    CU_ASSERT_EQUAL(dm_sc_points_init(&p, LONG_MAX, 65536), DM_ERR_NOMEM);
    dm_sc_engine *e = NULL;
    CU_ASSERT_EQUAL(dm_sc_engine_create(&e, DM_SC_CPU, INT_MAX, 1 << 20), DM_ERR_NOMEM);
    CU_ASSERT_PTR_NULL(e);
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.kmin = 1;
    o.kmax = 2;
    o.dim = 4;
    o.n = 100;
    o.chunksize = 100;
    o.clustersize = (long)1 << 62;
    dm_sc_result r;
    MPI_Comm self = MPI_COMM_SELF;
    CU_ASSERT_EQUAL(dm_sc_run(&r, &o, &self), DM_ERR_NOMEM);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "no memory for CLUSTERSIZE (4611686018427387904)"));
    o.clustersize = 10;
    o.dim = 1 << 20;
    o.n = o.chunksize = INT_MAX;
    CU_ASSERT_EQUAL(dm_sc_run(&r, &o, &self), DM_ERR_NOMEM);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "CHUNKSIZE (2147483647)"));
}

/* A chunk of 2^31 points or more: refused before anything is allocated. The local search indexes
 * a chunk's points with int; such a chunk wrapped the feasible candidates' count (a negative int,
 * then one candidate) and their indices (negative, read before the points). */
static void test_chunk_beyond_int(void)
{
    dm_sc_engine *e = NULL;
    CU_ASSERT_EQUAL(dm_sc_engine_create(&e, DM_SC_CPU, (long)INT_MAX + 1, 1), DM_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NULL(e);
    CU_ASSERT_EQUAL(dm_sc_engine_create(&e, DM_SC_CPU, (long)1 << 62, 4), DM_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NULL(e);
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.kmin = 2;
    o.kmax = 4;
    o.dim = 1;
    o.clustersize = 10;
    o.n = (long)INT_MAX + 2;
    o.chunksize = (long)1 << 40;
    dm_sc_result r;
    MPI_Comm self = MPI_COMM_SELF;
    CU_ASSERT_EQUAL(dm_sc_run(&r, &o, &self), DM_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "a chunk of 2147483649 points (CHUNKSIZE 1099511627776, 2147483649 points on this rank)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "give a smaller CHUNKSIZE"));
}

/* nearest centre: brute force in double agrees up to float ties; exact ties go to the lower index */
static void test_assign_cpu(void)
{
    const long n = 999, k = 13;
    const int dim = 6;
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.dim = dim;
    o.n = n + k;
    static float pts[999 * 6], cs[13 * 6], dist[999];
    static int lab[999];
    CU_ASSERT_EQUAL_FATAL(dm_sc_stream_read(pts, &o, 0, n), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_sc_stream_read(cs, &o, n, k), DM_OK);
    memcpy(cs + 7 * dim, cs + 2 * dim, dim * sizeof(float));
    CU_ASSERT_EQUAL_FATAL(dm_sc_assign_cpu(lab, dist, pts, n, cs, k, dim), DM_OK);
    long bad = 0;
    for (long i = 0; i < n; i++) {
        double best = INFINITY;
        for (long c = 0; c < k; c++) {
            double d = 0;
            for (int j = 0; j < dim; j++) {
                double t = (double)pts[i * dim + j] - cs[c * dim + j];
                d += t * t;
            }
            if (d < best) best = d;
        }
        if (lab[i] == 7 || fabs(dist[i] - best) > 1e-5 * (best + 1e-6)) bad++;
    }
    CU_ASSERT_EQUAL(bad, 0);
}

/* Many documents hashed by several threads into a garbage-filled buffer: every row equals the
 * same document hashed alone (one document, one thread), bit for bit. */
static void test_hash_threads(void)
{
    const long n = 5000;
    const int dim = 48;
    uint64_t *off = malloc(sizeof *off * (size_t)(n + 1));
    uint32_t *terms = malloc(sizeof *terms * (size_t)n * 60);
    float *vals = malloc(sizeof *vals * (size_t)n * 60), *out = malloc(sizeof *out * (size_t)n * dim);
    CU_ASSERT_FATAL(off && terms && vals && out);
    unsigned st = 12345;
    off[0] = 0;
    for (long d = 0; d < n; d++) {
        int len = (int)(rand_r(&st) % 61);
        uint32_t t = 0;
        for (int k = 0; k < len; k++) {
            t += 1 + (uint32_t)(rand_r(&st) % 5000); /* ascending term ids */
            terms[off[d] + k] = t;
            vals[off[d] + k] = (float)rand_r(&st) / (float)RAND_MAX - 0.5f;
        }
        off[d + 1] = off[d] + (uint64_t)len;
    }
    memset(out, 0xff, sizeof *out * (size_t)n * dim); /* NaNs: every row must be zeroed */
    int prev = omp_get_max_threads();
    omp_set_num_threads(4);
    dm_sc_hash_vectors(out, off, terms, vals, n, dim);
    omp_set_num_threads(1);
    long bad = 0;
    for (long d = 0; d < n; d++) {
        float one[48];
        uint64_t o1[2] = {0, off[d + 1] - off[d]};
        dm_sc_hash_vectors(one, o1, terms + off[d], vals + off[d], 1, dim);
        if (memcmp(one, out + (size_t)d * dim, sizeof one) != 0) bad++;
    }
    omp_set_num_threads(prev);
    CU_ASSERT_EQUAL(bad, 0);
    free(off);
    free(terms);
    free(vals);
    free(out);
}

static void test_hash_vectors(void)
{
    uint64_t row_off[] = {0, 2, 3};
    uint32_t terms[] = {17, 99, 17};
    float vals[] = {0.5f, 0.25f, 2.0f};
    float out[2 * 16];
    dm_sc_hash_vectors(out, row_off, terms, vals, 2, 16);
    double s0 = 0, s1 = 0;
    int nz1 = 0;
    for (int d = 0; d < 16; d++) {
        s0 += fabs(out[d]);
        s1 += fabs(out[16 + d]);
        nz1 += out[16 + d] != 0;
    }
    CU_ASSERT(fabs(s1 - 2.0) < 1e-6);
    CU_ASSERT_EQUAL(nz1, 1);
    CU_ASSERT(s0 <= 0.75 + 1e-6 && s0 >= 0.25 - 1e-6);
    /* term 17 lands in the same dimension with the same sign in both documents */
    for (int d = 0; d < 16; d++)
        if (out[16 + d] != 0) CU_ASSERT(out[d] != 0 && (out[d] > 0) == (out[16 + d] > 0));
}

/* ---- document vectors: signed feature hashing -------------------------------------------------- */

/* The documented hash (streamclust.h), written independently: splitmix64's output for state t. */
static uint64_t ref_hash(uint32_t t)
{
    uint64_t z = (uint64_t)t + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* A single term of weight 1 lands on exactly one dimension, h mod dim, as +1 or -1 (sign from bit 63
 * of h); term 0 gives splitmix64's published first output for seed 0. */
static void test_hash_single_terms(void)
{
    CU_ASSERT_EQUAL(ref_hash(0), 0xE220A8397B1DCDAFULL);
    const uint32_t terms[] = {0, 1, 2, 17, 99, 12345, 4000000000u, UINT32_MAX};
    const int dims[] = {1, 2, 7, 64, 256, 1000};
    float *out = malloc(1000 * sizeof(float));
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    long bad = 0;
    for (size_t a = 0; a < sizeof terms / sizeof terms[0]; a++)
        for (size_t b = 0; b < sizeof dims / sizeof dims[0]; b++) {
            const uint64_t off[] = {0, 1};
            const float one = 1.0f;
            const int dim = dims[b];
            dm_sc_hash_vectors(out, off, &terms[a], &one, 1, dim);
            const uint64_t h = ref_hash(terms[a]);
            const int want_d = (int)(h % (uint64_t)dim);
            const float want_v = (h >> 63) ? -1.0f : 1.0f;
            for (int d = 0; d < dim; d++) bad += out[d] != (d == want_d ? want_v : 0.0f);
        }
    CU_ASSERT_EQUAL(bad, 0);
    /* term 0 in 256 dimensions: dimension 175, sign - (computed by hand from 0xE220A8397B1DCDAF) */
    const uint64_t off[] = {0, 1};
    const uint32_t t0 = 0;
    const float half = 0.5f;
    dm_sc_hash_vectors(out, off, &t0, &half, 1, 256);
    CU_ASSERT_EQUAL(out[175], -0.5f);
    free(out);
}

/* Random sparse rows: sorted distinct terms below 5000, values k/8 with 1 <= |k| <= 64 (dyadic, so
 * every sum below is exact in float and linearity can be asserted with ==). */
static int rand_row(uint32_t *col, float *val, int max_terms, unsigned *seed)
{
    int n = 0;
    uint32_t t = (uint32_t)(rand_r(seed) % 50);
    while (n < max_terms && t < 5000) {
        col[n] = t;
        int k = rand_r(seed) % 128 - 64;
        val[n] = (float)(k == 0 ? 1 : k) / 8.0f;
        n++;
        t += 1 + (uint32_t)(rand_r(seed) % 200);
    }
    return n;
}

/* hash(x + y) = hash(x) + hash(y), hash(2x) = 2 hash(x), hash(-x) = -hash(x), exactly; the empty
 * row hashes to 0; with DIM = 1 the one coordinate is the signed sum. */
static void test_hash_linear(void)
{
    enum { T = 60 };
    unsigned seed = 12345;
    const int dims[] = {1, 3, 64, 1000};
    float *hx = malloc(1000 * sizeof(float)), *hy = malloc(1000 * sizeof(float));
    float *hz = malloc(1000 * sizeof(float)), *h2 = malloc(1000 * sizeof(float));
    CU_ASSERT_PTR_NOT_NULL_FATAL(hx && hy && hz && h2);
    long bad = 0;
    for (int rep = 0; rep < 50; rep++) {
        uint32_t cx[T], cy[T], cz[2 * T];
        float vx[T], vy[T], vz[2 * T], v2[T], vn[T];
        int nx = rand_row(cx, vx, T, &seed), ny = rand_row(cy, vy, T, &seed), nz = 0;
        for (int i = 0, j = 0; i < nx || j < ny;) { /* merge: z = x + y */
            if (j >= ny || (i < nx && cx[i] < cy[j])) { cz[nz] = cx[i]; vz[nz++] = vx[i++]; }
            else if (i >= nx || cy[j] < cx[i]) { cz[nz] = cy[j]; vz[nz++] = vy[j++]; }
            else { cz[nz] = cx[i]; vz[nz++] = vx[i++] + vy[j++]; }
        }
        for (int i = 0; i < nx; i++) {
            v2[i] = 2.0f * vx[i];
            vn[i] = -vx[i];
        }
        for (size_t b = 0; b < sizeof dims / sizeof dims[0]; b++) {
            const int dim = dims[b];
            uint64_t ox[] = {0, (uint64_t)nx}, oy[] = {0, (uint64_t)ny}, oz[] = {0, (uint64_t)nz};
            dm_sc_hash_vectors(hx, ox, cx, vx, 1, dim);
            dm_sc_hash_vectors(hy, oy, cy, vy, 1, dim);
            dm_sc_hash_vectors(hz, oz, cz, vz, 1, dim);
            for (int d = 0; d < dim; d++) bad += hz[d] != hx[d] + hy[d];
            dm_sc_hash_vectors(h2, ox, cx, v2, 1, dim);
            for (int d = 0; d < dim; d++) bad += h2[d] != 2.0f * hx[d];
            dm_sc_hash_vectors(h2, ox, cx, vn, 1, dim);
            for (int d = 0; d < dim; d++) bad += h2[d] != -hx[d];
            if (dim == 1) {
                float sum = 0.0f;
                for (int i = 0; i < nx; i++) sum += (ref_hash(cx[i]) >> 63) ? -vx[i] : vx[i];
                bad += hx[0] != sum;
            }
        }
    }
    const uint64_t empty[] = {0, 0};
    hx[0] = hx[1] = hx[2] = 9.0f;
    dm_sc_hash_vectors(hx, empty, NULL, NULL, 1, 3);
    bad += hx[0] != 0.0f || hx[1] != 0.0f || hx[2] != 0.0f;
    CU_ASSERT_EQUAL(bad, 0);
    free(hx);
    free(hy);
    free(hz);
    free(h2);
}

/* A dm_vectors view of rows [first, first + n) of a CSR matrix (offsets rebased to 0 as the reader
 * does), with row_base = first. Arrays owned by the caller's buffers. */
static void view_rows(dm_vectors *v, uint64_t *off_buf, const uint64_t *off, uint32_t *col, float *val,
                      uint64_t first, uint64_t n)
{
    memset(v, 0, sizeof *v);
    for (uint64_t r = 0; r <= n; r++) off_buf[r] = off[first + r] - off[first];
    v->n_rows = n;
    v->row_base = first;
    v->n_cols = 5000;
    v->row_off = off_buf;
    v->col = col + off[first];
    v->val = val + off[first];
}

/* points_from_vectors: ids are global row indices, weight 1, coordinates the hash of each row;
 * the same rows give the same points whatever slice of the matrix (rank share) holds them; calls
 * are deterministic; DIM < 1 is refused. */
static void test_points_from_vectors(void)
{
    enum { N = 37, T = 40, DIM = 50 };
    static uint32_t col[N * T];
    static float val[N * T];
    uint64_t off[N + 1], ob[N + 1];
    unsigned seed = 99;
    off[0] = 0;
    for (int r = 0; r < N; r++) off[r + 1] = off[r] + (uint64_t)rand_row(col + off[r], val + off[r], r % 7 == 3 ? 0 : T, &seed);
    dm_vectors all;
    view_rows(&all, ob, off, col, val, 0, N);
    dm_sc_points p, q;
    CU_ASSERT_EQUAL_FATAL(dm_sc_points_from_vectors(&p, &all, DIM), DM_OK);
    CU_ASSERT_EQUAL(p.num, N);
    CU_ASSERT_EQUAL(p.dim, DIM);
    float *ref = malloc((size_t)N * DIM * sizeof(float));
    CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
    dm_sc_hash_vectors(ref, off, col, val, N, DIM);
    long bad = 0;
    for (long i = 0; i < N; i++) {
        bad += p.id[i] != i || p.weight[i] != 1.0f;
        bad += memcmp(dm_sc_point_coord(&p, i), ref + (size_t)i * DIM, DIM * sizeof(float)) != 0;
    }
    CU_ASSERT_EQUAL(bad, 0);
    /* deterministic */
    CU_ASSERT_EQUAL_FATAL(dm_sc_points_from_vectors(&q, &all, DIM), DM_OK);
    CU_ASSERT_EQUAL(memcmp(p.coord, q.coord, (size_t)N * DIM * sizeof(float)), 0);
    dm_sc_points_free(&q);
    /* rank-independent: three uneven shares (one empty) give the same points and ids */
    const uint64_t cut[] = {0, 11, 11, N};
    bad = 0;
    for (int s = 0; s < 3; s++) {
        dm_vectors part;
        view_rows(&part, ob, off, col, val, cut[s], cut[s + 1] - cut[s]);
        CU_ASSERT_EQUAL_FATAL(dm_sc_points_from_vectors(&q, &part, DIM), DM_OK);
        CU_ASSERT_EQUAL(q.num, (long)(cut[s + 1] - cut[s]));
        for (long i = 0; i < q.num; i++) {
            bad += q.id[i] != (long)cut[s] + i;
            bad += memcmp(dm_sc_point_coord(&q, i), dm_sc_point_coord(&p, (long)cut[s] + i), DIM * sizeof(float)) != 0;
        }
        dm_sc_points_free(&q);
    }
    CU_ASSERT_EQUAL(bad, 0);
    /* the in-memory stream: reads its rows, refuses others, and the options are checked */
    long n = 0;
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.kmin = 2;
    o.kmax = 4;
    o.dim = DIM;
    o.n = 0;
    o.chunksize = 10;
    o.clustersize = 40;
    o.points = &p;
    CU_ASSERT_EQUAL(dm_sc_options_check(&n, &o), DM_OK);
    CU_ASSERT_EQUAL(n, N);
    float *buf = malloc(5 * DIM * sizeof(float));
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    CU_ASSERT_EQUAL(dm_sc_stream_read(buf, &o, 30, 5), DM_OK);
    CU_ASSERT_EQUAL(memcmp(buf, ref + 30 * DIM, 5 * DIM * sizeof(float)), 0);
    CU_ASSERT_EQUAL(dm_sc_stream_read(buf, &o, 33, 5), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "this rank holds 0..36"));
    o.dim = DIM + 1;
    CU_ASSERT_EQUAL(dm_sc_options_check(&n, &o), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "DIM (51) differs"));
    o.dim = DIM;
    o.input = "x.bin";
    CU_ASSERT_EQUAL(dm_sc_options_check(&n, &o), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "exclusive"));
    o.input = NULL;
    p.id[5] = 99;
    CU_ASSERT_EQUAL(dm_sc_options_check(&n, &o), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "id of point 5 is 99"));
    free(buf);
    free(ref);
    dm_sc_points_free(&p);
    /* DIM < 1 */
    CU_ASSERT_EQUAL(dm_sc_points_from_vectors(&q, &all, 0), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "DIM must be >= 1 (got 0)"));
    CU_ASSERT_EQUAL(dm_sc_points_from_vectors(&q, &all, -3), DM_ERR_INVALID_ARG);
    dm_sc_points_free(&q);
}

/* ---- allocation failures ------------------------------------------------------------------ */

/* A whole run as the --vectors path makes it: the points of document vectors, then dm_sc_run on
 * this process alone (three chunks and the final clustering). */
static int sweep_run(dm_sc_result *r, const dm_vectors *v, int dim)
{
    dm_sc_points p;
    memset(r, 0, sizeof *r);
    int rc = dm_sc_points_from_vectors(&p, v, dim);
    if (rc == DM_OK) {
        dm_sc_options o = DM_SC_OPTIONS_INIT;
        o.kmin = 3;
        o.kmax = 6;
        o.dim = dim;
        o.n = 0;
        o.chunksize = 400;
        o.clustersize = 60;
        o.points = &p;
        MPI_Comm self = MPI_COMM_SELF;
        rc = dm_sc_run(r, &o, &self);
    }
    dm_sc_points_free(&p);
    return rc;
}

/* 1 when two results are the same, bit for bit */
static int same_result(const dm_sc_result *a, const dm_sc_result *b)
{
    if (a->k != b->k || a->n_local != b->n_local || a->dim != b->dim) return 0;
    const size_t k = (size_t)a->k, n = (size_t)a->n_local;
    return a->total_cost == b->total_cost && a->chunk_cost_first == b->chunk_cost_first &&
           a->kept == b->kept && a->chunks == b->chunks && a->gave_up == b->gave_up &&
           memcmp(a->centres, b->centres, k * (size_t)a->dim * sizeof(float)) == 0 &&
           memcmp(a->weights, b->weights, k * sizeof(float)) == 0 &&
           memcmp(a->centre_ids, b->centre_ids, k * sizeof(long)) == 0 &&
           memcmp(a->labels, b->labels, n * sizeof(int)) == 0 &&
           memcmp(a->dist, b->dist, n * sizeof(float)) == 0;
}

/* A sweep's run: its result in r, the first run's in r0 */
typedef struct sweep_arg {
    const dm_vectors *v;
    int dim;
    dm_sc_result r0, r;
} sweep_arg;
static int sweep_arg_run(void *a_)
{
    sweep_arg *a = a_;
    return sweep_run(&a->r, a->v, a->dim);
}
static int sweep_arg_differs(void *a_)
{
    sweep_arg *a = a_;
    return !same_result(&a->r, &a->r0);
}
static void sweep_arg_release(void *a_, int rc)
{
    (void)rc;
    dm_sc_result_free(&((sweep_arg *)a_)->r);
}

/* Every host allocation of a whole run (dm_malloc / dm_calloc / dm_realloc, any thread), failed in
 * turn on `threads` OpenMP threads (every `stride`-th one): each run returns DM_OK or DM_ERR_NOMEM
 * without a crash or a hang and leaves no host memory behind, the runs that succeed give the first
 * run's result, and a run afterwards is unchanged. Returns the allocations of a run. */
static uint64_t alloc_sweep(int threads, uint64_t stride)
{
    enum { N = 1100, T = 30, DIM = 12 };
    static uint32_t col[N * T];
    static float val[N * T];
    static uint64_t off[N + 1], ob[N + 1];
    unsigned seed = 4242;
    off[0] = 0;
    for (int r = 0; r < N; r++) off[r + 1] = off[r] + (uint64_t)rand_row(col + off[r], val + off[r], T, &seed);
    dm_vectors v;
    view_rows(&v, ob, off, col, val, 0, N);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    sweep_arg a = {.v = &v, .dim = DIM};
    dm_test_sweep s = {.run = sweep_arg_run, .differs = sweep_arg_differs, .release = sweep_arg_release, .arg = &a};
    uint64_t n;
    int rc = dm_test_sweep_count(&s, &n);
    a.r0 = a.r; /* the reference: memory held during the sweep */
    CU_ASSERT_EQUAL_FATAL(rc, DM_OK);
    CU_ASSERT_FATAL(n > 30);
    /* the first 40 one by one, then spread over the rest (every one while there are few) */
    const uint64_t first = stride > 1 ? 0 : 40, step = stride * (n <= 200 ? 1 : n / 60 + 1);
    const double t0 = omp_get_wtime();
    dm_test_sweep_stats st = {0};
    dm_test_sweep_run(&s, n + 1, first, step, &st);
    CU_ASSERT(st.failed > st.tried / 2);
    rc = sweep_run(&a.r, &v, DIM); /* and nothing is left broken */
    CU_ASSERT_EQUAL(rc, DM_OK);
    CU_ASSERT(rc == DM_OK && same_result(&a.r, &a.r0));
    dm_sc_result_free(&a.r);
    dm_sc_result_free(&a.r0);
    omp_set_num_threads(saved);
    printf("\n  %d threads: %llu allocations, %d failure points tried, %d failed the run (%.2f s)",
           threads, (unsigned long long)n, st.tried, st.failed, omp_get_wtime() - t0);
    return n;
}

static uint64_t g_allocs_one_thread;
static void test_alloc_failures(void) { g_allocs_one_thread = alloc_sweep(1, 1); }
/* No allocation happens inside a parallel region (gain's per-thread sums are engine scratch), so a
 * run allocates the same on any number of threads: every third failure point is enough here. */
static void test_alloc_failures_threads(void)
{
    uint64_t n = alloc_sweep(4, 3);
    if (g_allocs_one_thread) CU_ASSERT_EQUAL(n, g_allocs_one_thread);
}

/* Side by side with Rodinia 3.1's code (review session, /tmp copy of cuda/streamcluster: its
 * float pspeedy / pFL / pkmedian and pgain's kernel + serial part run serially on the CPU, and
 * openmp/streamcluster_omp.cpp's double pgain): the final centres in outcenterIDs' text, gain
 * calls and total cost of three runs, recorded from the reference. The ids are the stream indices
 * of the points the centres grew from (Rodinia prints their shuffled positions: 17 for 897). The
 * first two runs are one chunk, where docmine's draws are Rodinia's own; the third has four chunks,
 * recorded from Rodinia's code on docmine's stream (all points drawn first, each chunk's points in
 * stream order: README, "Compared with Rodinia's code"). */
static void test_rodinia_reference(void)
{
    static const struct {
        long kmin, kmax;
        int dim;
        long n, chunk, cluster, gain_calls;
        double total;
        const char *centres;
    } runs[] = {
        {2, 5, 8, 1000, 1000, 100, 216, 604.71582,
         "897\n514.000000\n0.705734 0.399045 0.462988 0.490833 0.526009 0.548143 0.460124 0.512382 \n\n"
         "841\n486.000000\n0.288895 0.585125 0.529655 0.534136 0.474949 0.464317 0.554872 0.488514 \n\n"},
        {5, 5, 4, 3000, 3000, 100, 624, 553.797175,
         "1039\n432.000000\n0.272736 0.532414 0.343756 0.199174 \n\n"
         "972\n890.000000\n0.424808 0.531984 0.804249 0.575097 \n\n"
         "2339\n581.000000\n0.533428 0.807433 0.295725 0.642899 \n\n"
         "2916\n423.000000\n0.791303 0.402265 0.587864 0.201005 \n\n"
         "614\n674.000000\n0.574947 0.224431 0.307623 0.679881 \n\n"},
        {4, 8, 8, 1500, 400, 200, 2058, 830.951963,
         "1239\n149.000000\n0.689149 0.510976 0.672270 0.525981 0.368412 0.630893 0.589927 0.403830 \n\n"
         "502\n296.000000\n0.540813 0.504277 0.374942 0.602984 0.461361 0.446102 0.638412 0.674308 \n\n"
         "846\n518.000000\n0.497918 0.522355 0.604386 0.365268 0.568869 0.443962 0.568388 0.488780 \n\n"
         "504\n537.000000\n0.457306 0.453607 0.407599 0.601645 0.513351 0.555721 0.330924 0.433088 \n\n"},
    };
    for (size_t t = 0; t < sizeof runs / sizeof runs[0]; t++) {
        dm_sc_options o = DM_SC_OPTIONS_INIT;
        o.kmin = runs[t].kmin;
        o.kmax = runs[t].kmax;
        o.dim = runs[t].dim;
        o.n = runs[t].n;
        o.chunksize = runs[t].chunk;
        o.clustersize = runs[t].cluster;
        o.backend = DM_SC_CPU;
        dm_sc_result r;
        CU_ASSERT_EQUAL_FATAL(dm_sc_run(&r, &o, NULL), DM_OK);
        char text[2048];
        size_t len = 0;
        for (long c = 0; c < r.k && len < sizeof text; c++) {
            len += (size_t)snprintf(text + len, sizeof text - len, "%ld\n%lf\n", r.centre_ids[c],
                                    (double)r.weights[c]);
            for (int d = 0; d < o.dim && len < sizeof text; d++)
                len += (size_t)snprintf(text + len, sizeof text - len, "%lf ",
                                        (double)r.centres[(size_t)c * o.dim + d]);
            if (len < sizeof text) len += (size_t)snprintf(text + len, sizeof text - len, "\n\n");
        }
        CU_ASSERT_STRING_EQUAL(text, runs[t].centres);
        CU_ASSERT_EQUAL(r.stats_all.gain_calls, runs[t].gain_calls);
        CU_ASSERT_DOUBLE_EQUAL(r.total_cost, runs[t].total, 1e-5);
        CU_ASSERT_FALSE(r.gave_up);
        dm_sc_result_free(&r);
    }
}

static CU_TestInfo tests[] = {
    {"rng_matches_lrand48", test_rng_matches_lrand48},
    {"generator_is_rodinia", test_generator_is_rodinia},
    {"gain_hand_checked", test_gain_hand_checked},
    {"speedy_invariants", test_speedy_invariants},
    {"fl_cost_never_increases", test_fl_cost_never_increases},
    {"local_search_range", test_local_search_range},
    {"give_up", test_give_up},
    {"contcenters_copycenters", test_contcenters_copycenters},
    {"threads_identical", test_threads_identical},
    {"rodinia_reference", test_rodinia_reference},
    {"bad_input", test_bad_input},
    {"input_not_finite", test_input_not_finite},
    {"sizes_beyond_size_t", test_sizes_beyond_size_t},
    {"chunk_beyond_int", test_chunk_beyond_int},
    {"assign_cpu", test_assign_cpu},
    {"hash_vectors", test_hash_vectors},
    {"hash_threads", test_hash_threads},
    {"hash_single_terms", test_hash_single_terms},
    {"hash_linear", test_hash_linear},
    {"points_from_vectors", test_points_from_vectors},
    {"alloc_failures", test_alloc_failures},
    {"alloc_failures_threads", test_alloc_failures_threads},
    CU_TEST_INFO_NULL,
};
static CU_SuiteInfo suites[] = {{"streamclust_cpu", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

/* MPI for dm_sc_run on this process alone (MPI_COMM_SELF; a singleton, no mpiexec needed) */
int main(int argc, char **argv) { return dm_test_run_mpi(argc, argv, suites); }
