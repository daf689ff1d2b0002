/* GPU tests of streamclust (label gpu; exit 77 without a device): for every compiled instance of
 * the gain kernel, the CUDA backend makes the same decisions as the CPU reference on seeded inputs
 * (sizes not multiples of 32 or of the block size): same speedy result, same exact gain sums, same
 * gains, same centres opened and closed, same assignments; local search and whole runs agree.
 * Tolerance: the decisions are compared exactly (the sums are exact integers, the distances are
 * computed with the same float operations, see streamclust.h), so no float summation order can
 * flip an open/close decision; the costs are required equal within 1e-4 relative as the issue
 * asks and are reported when they are not bit-identical. Reference: streamclust_cpu.c.
 *
 * Under compute-sanitizer (DOCMINE_SANITIZER set, as scripts/gpu-check.sh does) racecheck makes
 * every launch slow, so the sanitizer variant is small but still runs every kernel: every gain
 * instance (with reduce, apply, scatter, open and permute of its layout) on 3 gain calls, a whole
 * run on one chunk of 300 points (local search with shuffles, assign), the labelling test and the
 * tuner hooks on 1003 points; ~1.6k launches instead of ~80k. The per-instance local search is
 * skipped there (it launches the same kernels as the whole run).
 *
 * alloc_failures: every host allocation of a whole CUDA run failed in turn (dm_alloc_fail_at): the
 * run returns DM_OK or DM_ERR_NOMEM, and host, pinned and device memory go back to what they were
 * (the engines' device buffers are released on every unwind); a run afterwards is unchanged. */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "common/tune/tune.h"
#include "streamclust/streamclust.h"
#include "streamclust/streamclust_impl.h"
#include "sc_testlib.h"
#include "testutil.h"

#define N_PTS 1237 /* > 2 blocks of 512, not a multiple of 32 */
#define DIM 19

static int g_sanitizer; /* DOCMINE_SANITIZER set: the small variant (see the top) */

static dm_sc_engine *make(int backend, long n, int dim, long first)
{
    dm_sc_engine *e = NULL;
    int rc = dm_sc_engine_create(&e, backend, n, dim);
    if (rc != DM_OK) fprintf(stderr, "engine: %s\n", dm_error_message());
    CU_ASSERT_EQUAL_FATAL(rc, DM_OK);
    dm_sc_points *p = dm_sc_engine_points(e);
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.dim = dim;
    o.n = first + n;
    CU_ASSERT_EQUAL_FATAL(dm_sc_stream_read(p->coord, &o, first, n), DM_OK);
    dm_sc_points_reset(p, n);
    for (long i = 0; i < n; i++) {
        p->id[i] = first + i;
        p->weight[i] = 1.0f + (float)(i % 4); /* weighted, like the centre sets */
    }
    CU_ASSERT_EQUAL_FATAL(dm_sc_engine_load(e, n), DM_OK);
    return e;
}

static void set_centers(dm_sc_engine *e)
{
    dm_sc_points *p = dm_sc_engine_points(e);
    memset(e->is_center, 0, (size_t)p->num);
    for (long i = 0; i < p->num; i++) e->is_center[p->assign[i]] = 1;
    if (dm_sc_engine_backend(e) == DM_SC_CUDA) CU_ASSERT_EQUAL_FATAL(dm_sc_cuda_set_centers(e), DM_OK);
}

static void compare_points(dm_sc_engine *a, dm_sc_engine *b)
{
    dm_sc_points *pa = dm_sc_engine_points(a), *pb = dm_sc_engine_points(b);
    if (!b->host_valid) CU_ASSERT_EQUAL_FATAL(dm_sc_cuda_fetch(b), DM_OK);
    CU_ASSERT_EQUAL(memcmp(pa->assign, pb->assign, (size_t)pa->num * sizeof(long)), 0);
    CU_ASSERT_EQUAL(memcmp(pa->cost, pb->cost, (size_t)pa->num * sizeof(float)), 0);
    CU_ASSERT_EQUAL(memcmp(pa->slot, pb->slot, (size_t)pa->num * sizeof(long)), 0);
}

/* speedy + a sequence of gain calls, step by step, CPU vs CUDA with the current instance */
static void gain_sequence(const char *what)
{
    dm_sc_engine *c = make(DM_SC_CPU, N_PTS, DIM, 11);
    dm_sc_engine *g = make(DM_SC_CUDA, N_PTS, DIM, 11);
    dm_sc_rng rc_, rg_;
    dm_sc_rng_seed(&rc_, 9);
    rg_ = rc_;
    /* z = 200 under the sanitizer: speedy opens ~8 centres (~100 launches fewer than z = 20)
     * and 2 of the 3 gain calls still open (apply and scatter run) */
    float z = g_sanitizer ? 200.0f : 20.0f, cc, cg;
    long kc, kg;
    CU_ASSERT_EQUAL_FATAL(dm_sc_speedy_cpu(&cc, c, z, &kc, &rc_), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_sc_speedy_cuda(&cg, g, z, &kg, &rg_), DM_OK);
    CU_ASSERT_EQUAL(kc, kg);
    CU_ASSERT_EQUAL(cc, cg);
    CU_ASSERT_EQUAL(rc_.x, rg_.x);
    compare_points(c, g);
    set_centers(c);
    set_centers(g);
    long mismatched = 0, opens = 0;
    const int calls = g_sanitizer ? 3 : 150;
    for (int call = 0; call < calls; call++) {
        long x = dm_sc_rng_next(&rc_) % N_PTS;
        float gc, gg;
        CU_ASSERT_EQUAL_FATAL(dm_sc_gain_cpu(&gc, c, x, z, &kc), DM_OK);
        long K = kg;
        CU_ASSERT_EQUAL_FATAL(dm_sc_gain_cuda(&gg, g, x, z, &kg), DM_OK);
        if (gc != gg || kc != kg || memcmp(c->sums, g->sums, (size_t)(K + 1) * sizeof(int64_t)) != 0)
            mismatched++;
        opens += gc > 0;
    }
    CU_ASSERT_EQUAL(mismatched, 0);
    CU_ASSERT(opens > 0);
    compare_points(c, g);
    CU_ASSERT_EQUAL(memcmp(c->is_center, g->is_center, N_PTS), 0);
    if (mismatched) fprintf(stderr, "  instance %s: %ld mismatched gain calls\n", what, mismatched);
    dm_sc_engine_destroy(c);
    dm_sc_engine_destroy(g);
}

static void local_search_pair(const char *what)
{
    dm_sc_engine *c = make(DM_SC_CPU, N_PTS, DIM, 500);
    dm_sc_engine *g = make(DM_SC_CUDA, N_PTS, DIM, 500);
    dm_sc_rng rc_, rg_;
    dm_sc_rng_seed(&rc_, 4);
    rg_ = rc_;
    dm_sc_local_result lc, lg;
    CU_ASSERT_EQUAL_FATAL(dm_sc_local_search(&lc, c, 7, 14, &rc_), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_sc_local_search(&lg, g, 7, 14, &rg_), DM_OK);
    CU_ASSERT_EQUAL(lc.k, lg.k);
    CU_ASSERT_EQUAL(lc.gave_up, lg.gave_up);
    CU_ASSERT(fabs((double)lc.cost - lg.cost) <= 1e-4 * fabs((double)lc.cost));
    if (lc.cost != lg.cost)
        fprintf(stderr, "  instance %s: cost %.9g vs %.9g (not bit-identical)\n", what,
                (double)lc.cost, (double)lg.cost);
    compare_points(c, g);
    dm_sc_engine_destroy(c);
    dm_sc_engine_destroy(g);
}

static void test_every_gain_instance(void)
{
    int n = dm_sc_cuda_gain_instances();
    CU_ASSERT_FATAL(n > 0);
    char name[96];
    for (int i = -1; i < n; i++) {
        CU_ASSERT_EQUAL_FATAL(dm_sc_cuda_force_gain_instance(i), DM_OK);
        dm_sc_cuda_gain_instance_name(i, name, sizeof name);
        gain_sequence(name);
        if (!g_sanitizer) local_search_pair(name);
    }
    dm_sc_cuda_force_gain_instance(-1);
}

/* nearest-centre labelling: identical labels and distances (same float operations) */
static void test_assign_cpu_vs_cuda(void)
{
    const long n = 10007, k = 37;
    const int dim = 29;
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.dim = dim;
    o.n = n + k;
    float *pts = malloc((size_t)n * dim * sizeof(float)), *cs = malloc((size_t)k * dim * sizeof(float));
    int *lc = malloc((size_t)n * sizeof(int)), *lg = malloc((size_t)n * sizeof(int));
    float *dc = malloc((size_t)n * sizeof(float)), *dg = malloc((size_t)n * sizeof(float));
    CU_ASSERT_FATAL(pts && cs && lc && lg && dc && dg);
    CU_ASSERT_EQUAL_FATAL(dm_sc_stream_read(pts, &o, 0, n), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_sc_stream_read(cs, &o, n, k), DM_OK);
    memcpy(cs + 5 * dim, cs + 3 * dim, dim * sizeof(float)); /* a tie: the lower index wins */
    CU_ASSERT_EQUAL_FATAL(dm_sc_assign_cpu(lc, dc, pts, n, cs, k, dim), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_sc_assign_cuda(lg, dg, pts, n, cs, k, dim), DM_OK);
    CU_ASSERT_EQUAL(memcmp(lc, lg, (size_t)n * sizeof(int)), 0);
    CU_ASSERT_EQUAL(memcmp(dc, dg, (size_t)n * sizeof(float)), 0);
    long fives = 0;
    for (long i = 0; i < n; i++) fives += lg[i] == 5;
    CU_ASSERT_EQUAL(fives, 0);
    free(pts);
    free(cs);
    free(lc);
    free(lg);
    free(dc);
    free(dg);
}

/* dm_sc_label_cuda's input: rows of pts, read in order in chunks of at most cap points; read
 * number fail_at (0, 1, ...; -1: none) fails */
typedef struct label_src {
    const float *pts;
    int dim;
    long cap, next;
    int reads, fail_at, bad;
} label_src;

static int label_read(float *out, void *arg, long first, long count)
{
    label_src *s = arg;
    if (first != s->next || count < 1 || count > s->cap) s->bad++;
    s->next = first + count;
    if (s->reads++ == s->fail_at) return DM_ERR(DM_ERR_IO, "label_read: read %d fails", s->fail_at);
    memcpy(out, s->pts + (size_t)first * s->dim, (size_t)count * s->dim * sizeof(float));
    return DM_OK;
}

/* k centres and n points of the generator, and the CPU reference's labels and distances */
typedef struct label_case {
    long n, k;
    int dim;
    float *pts, *cs, *dc, *dg;
    int *lc, *lg;
} label_case;

static void label_case_init(label_case *c, long n, long k, int dim)
{
    c->n = n;
    c->k = k;
    c->dim = dim;
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.dim = dim;
    o.n = n + k;
    c->pts = malloc((size_t)n * dim * sizeof(float));
    c->cs = malloc((size_t)k * dim * sizeof(float));
    c->lc = malloc((size_t)n * sizeof(int));
    c->lg = malloc((size_t)n * sizeof(int));
    c->dc = malloc((size_t)n * sizeof(float));
    c->dg = malloc((size_t)n * sizeof(float));
    CU_ASSERT_FATAL(c->pts && c->cs && c->lc && c->lg && c->dc && c->dg);
    CU_ASSERT_EQUAL_FATAL(dm_sc_stream_read(c->pts, &o, 0, n), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_sc_stream_read(c->cs, &o, n, k), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_sc_assign_cpu(c->lc, c->dc, c->pts, n, c->cs, k, dim), DM_OK);
}

static void label_case_free(label_case *c)
{
    free(c->pts);
    free(c->cs);
    free(c->lc);
    free(c->lg);
    free(c->dc);
    free(c->dg);
}

/* one pipelined labelling of c in chunks of cap points (pin: page-locked staging); returns its
 * status, with the reads' order checked and their number in *reads */
static int label_run(label_case *c, long cap, int pin, int fail_at, int *reads)
{
    label_src s = {c->pts, c->dim, cap, 0, 0, fail_at, 0};
    memset(c->lg, 0xff, (size_t)c->n * sizeof(int));
    memset(c->dg, 0xff, (size_t)c->n * sizeof(float));
    int rc = dm_sc_label_cuda(c->lg, c->dg, c->n, cap, c->cs, c->k, c->dim, pin, label_read, &s);
    CU_ASSERT_EQUAL(s.bad, 0);
    if (reads) *reads = s.reads;
    return rc;
}

static int label_same(const label_case *c)
{
    return memcmp(c->lc, c->lg, (size_t)c->n * sizeof(int)) == 0 &&
           memcmp(c->dc, c->dg, (size_t)c->n * sizeof(float)) == 0;
}

/* the final labelling's pipeline (dm_sc_label_cuda): in chunks of several sizes (one chunk, a
 * partial last chunk, a cap above n), from page-locked and from pageable staging, the CPU
 * reference's labels and distances bit for bit (so the same cost summed in point order); chunks
 * of at most 16 MiB of points whatever the cap (DIM 4096: 1024 points); a failing read in the
 * middle or at the start is returned as it is and leaves no host, pinned or device memory */
static void test_label_pipeline(void)
{
    label_case c;
    label_case_init(&c, 10007, 37, 29);
    memcpy(c.cs + 5 * 29, c.cs + 3 * 29, 29 * sizeof(float)); /* a tie: the lower index wins */
    CU_ASSERT_EQUAL_FATAL(dm_sc_assign_cpu(c.lc, c.dc, c.pts, c.n, c.cs, c.k, c.dim), DM_OK);
    const long caps[] = {1000, 4001, 10007, 20000};
    for (int pin = 0; pin < 2; pin++)
        for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
            int reads = 0;
            int rc = label_run(&c, caps[i], pin, -1, &reads);
            if (rc != DM_OK) fprintf(stderr, "label cap %ld pin %d: %s\n", caps[i], pin, dm_error_message());
            CU_ASSERT_EQUAL(rc, DM_OK);
            long cap = caps[i] < c.n ? caps[i] : c.n;
            CU_ASSERT_EQUAL(reads, (int)((c.n + cap - 1) / cap));
            CU_ASSERT(label_same(&c));
        }
    size_t held[DM_MEM_KINDS];
    for (int m = 0; m < DM_MEM_KINDS; m++) held[m] = dm_mem_current(m);
    for (int pin = 0; pin < 2; pin++)
        for (int fail_at = 0; fail_at < 3; fail_at += 2) {
            int reads = 0;
            CU_ASSERT_EQUAL(label_run(&c, 1000, pin, fail_at, &reads), DM_ERR_IO);
            CU_ASSERT_EQUAL(reads, fail_at + 1);
            for (int m = 0; m < DM_MEM_KINDS; m++) CU_ASSERT_EQUAL(dm_mem_current(m), held[m]);
        }
    label_case_free(&c);

    /* 16 MiB chunks: 2500 points of DIM 4096 asked in one chunk go in chunks of 1024 */
    label_case_init(&c, 2500, 3, 4096);
    int reads = 0;
    CU_ASSERT_EQUAL(label_run(&c, 2500, 1, -1, &reads), DM_OK);
    CU_ASSERT_EQUAL(reads, 3);
    CU_ASSERT(label_same(&c));
    label_case_free(&c);
}

/* label_sweep: every host allocation of the pipeline failed in turn (page-locked and pageable
 * staging) */
typedef struct label_sweep {
    label_case *c;
    int pin;
} label_sweep;

static int label_sweep_run(void *arg)
{
    label_sweep *w = arg;
    return label_run(w->c, 1000, w->pin, -1, NULL);
}

static int label_sweep_differs(void *arg) { return !label_same(((label_sweep *)arg)->c); }

static void test_label_alloc_failures(void)
{
    label_case c;
    label_case_init(&c, 3001, 7, 13);
    for (int pin = 0; pin < 2; pin++) {
        label_sweep w = {&c, pin};
        dm_test_sweep s = {.run = label_sweep_run, .differs = label_sweep_differs, .arg = &w,
                           .kinds = DM_MEM_KINDS, .label = pin ? "pinned" : "pageable"};
        uint64_t n = 0;
        CU_ASSERT_EQUAL_FATAL(dm_test_sweep_count(&s, &n), DM_OK);
        CU_ASSERT(label_same(&c));
        CU_ASSERT(n >= 1);
        dm_test_sweep_stats st = {0};
        dm_test_sweep_run(&s, n + 1, n + 1, 1, &st);
        CU_ASSERT_EQUAL(st.failed, (int)n);
    }
    label_case_free(&c);
}

/* The whole run on both backends: the same centres, labels and cost; and with KMAX = 1 (the one
 * centre nearest the weighted mean, chosen on the host from the engine's points) */
static void run_cpu_vs_cuda(long kmin, long kmax)
{
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.kmin = kmin;
    o.kmax = kmax;
    o.dim = 23;
    o.n = 7001;
    o.chunksize = 2500;
    o.clustersize = 200;
    if (g_sanitizer) { /* one chunk, ~350 gain calls */
        o.kmin = kmin < 3 ? kmin : 3;
        o.kmax = kmax < 5 ? kmax : 5;
        o.n = 300;
        o.chunksize = 300;
    }
    dm_sc_result rc_, rg_;
    o.backend = DM_SC_CPU;
    CU_ASSERT_EQUAL_FATAL(dm_sc_run(&rc_, &o, NULL), DM_OK);
    o.backend = DM_SC_CUDA;
    CU_ASSERT_EQUAL_FATAL(dm_sc_run(&rg_, &o, NULL), DM_OK);
    CU_ASSERT_EQUAL(rc_.k, rg_.k);
    if (kmax == 1) CU_ASSERT_EQUAL(rg_.k, 1);
    CU_ASSERT(fabs(rc_.total_cost - rg_.total_cost) <= 1e-4 * rc_.total_cost);
    if (rc_.k == rg_.k) {
        CU_ASSERT_EQUAL(memcmp(rc_.centre_ids, rg_.centre_ids, (size_t)rc_.k * sizeof(long)), 0);
        CU_ASSERT_EQUAL(memcmp(rc_.labels, rg_.labels, (size_t)rc_.n_local * sizeof(int)), 0);
        /* the same centres: the same distances, summed in point order */
        if (memcmp(rc_.centres, rg_.centres, (size_t)rc_.k * o.dim * sizeof(float)) == 0) {
            CU_ASSERT_EQUAL(memcmp(rc_.dist, rg_.dist, (size_t)rc_.n_local * sizeof(float)), 0);
            CU_ASSERT_EQUAL(rc_.total_cost, rg_.total_cost);
        }
    }
    dm_sc_result_free(&rc_);
    dm_sc_result_free(&rg_);
}

static void test_run_cpu_vs_cuda(void)
{
    run_cpu_vs_cuda(5, 10);
    run_cpu_vs_cuda(1, 1);
}

/* the tuner's workloads (one per DIM class of the gain kernel): every instance returns the
 * default's bytes (tolerance 0) */
static void test_tuner_hooks(void)
{
    CU_ASSERT_EQUAL_FATAL(dm_sc_tune_register(), DM_OK);
    const char *const names[] = {"streamclust.gain", "streamclust.gain_d256"};
    for (int c = 0; c < 2; c++) {
        const dm_tune_kernel *k = dm_tune_kernel_find(names[c]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(k);
        CU_ASSERT_EQUAL(k->tolerance, 0.0);
        void *st = NULL;
        CU_ASSERT_EQUAL_FATAL(k->bench_create(&st, g_sanitizer ? 1003 : 5003, 42), DM_OK);
        size_t nb = 0;
        CU_ASSERT_EQUAL_FATAL(k->bench_output(st, NULL, &nb), DM_OK);
        unsigned char *ref = malloc(nb), *out = malloc(nb);
        CU_ASSERT_EQUAL_FATAL(k->bench_run(st, &k->instances[k->default_instance], NULL), DM_OK);
        CU_ASSERT_EQUAL_FATAL(k->bench_output(st, ref, &nb), DM_OK);
        long differ = 0;
        for (int i = 0; i < k->n_instances; i++) {
            CU_ASSERT_EQUAL_FATAL(k->bench_run(st, &k->instances[i], NULL), DM_OK);
            CU_ASSERT_EQUAL_FATAL(k->bench_output(st, out, &nb), DM_OK);
            differ += memcmp(ref, out, nb) != 0;
        }
        CU_ASSERT_EQUAL(differ, 0);
        free(ref);
        free(out);
        k->bench_destroy(st);
    }
}

/* alloc_failures' comparison: the run's labels, k and cost against the reference's */
static int sweep_differs(void *sweep)
{
    const dm_sc_result *r = &((sc_sweep *)sweep)->r, *r0 = &((sc_sweep *)sweep)->r0;
    return r->k != r0->k || r->total_cost != r0->total_cost ||
           memcmp(r->labels, r0->labels, (size_t)r0->n_local * sizeof(int)) != 0;
}

static void test_alloc_failures(void)
{
    sc_sweep a;
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.kmin = 3;
    o.kmax = 6;
    o.dim = 8;
    o.n = 900;
    o.chunksize = 300;
    o.clustersize = 60;
    o.backend = DM_SC_CUDA;
    a.o = o;
    /* host, pinned and device memory */
    dm_test_sweep s = {.run = sc_sweep_run, .differs = sweep_differs, .release = sc_sweep_release, .arg = &a,
                       .kinds = DM_MEM_KINDS};
    uint64_t n;
    int rc = dm_test_sweep_count(&s, &n);
    a.r0 = a.r;
    CU_ASSERT_EQUAL_FATAL(rc, DM_OK);
    /* every one while there are few, else the first 40 and a spread; every 4th under the sanitizer */
    const uint64_t first = g_sanitizer ? 0 : 40, step = (g_sanitizer ? 4 : 1) * (n <= 150 ? 1 : n / 60 + 1);
    dm_test_sweep_stats st = {0};
    dm_test_sweep_run(&s, n + 1, first, step, &st);
    CU_ASSERT(st.failed > st.tried / 2);
    sc_sweep_check_after(&a);
    printf("\n  CUDA: %llu allocations, %d failure points tried, %d failed the run", (unsigned long long)n,
           st.tried, st.failed);
}

/* Out of device memory (dm_test_device_hog: no allocation of 2 MiB or more succeeds): a CUDA engine
 * is refused with DM_ERR_NOMEM whose message names the stage (the allocator's own says only what
 * did not fit), no device or pinned memory is kept, and with the memory back the engine works. */
static void test_engine_out_of_device_memory(void)
{
    const long cap = 20011; /* x DIM 64 x 4 bytes: 5 MB a coordinate array */
    size_t d0 = dm_mem_current(DM_MEM_DEVICE), p0 = dm_mem_current(DM_MEM_PINNED);
    int held = dm_test_device_hog();
    dm_sc_engine *e = NULL;
    int rc = dm_sc_engine_create(&e, DM_SC_CUDA, cap, 64);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", dm_error_message());
    dm_test_device_unhog();
    printf("\n  injected %d; engine: %d (%s)", held, rc, msg);
    CU_ASSERT_EQUAL(rc, DM_ERR_NOMEM);
    CU_ASSERT_PTR_NULL(e);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "streamclust"));
    CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_DEVICE), d0);
    CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_PINNED), p0);
    if (rc == DM_OK) dm_sc_engine_destroy(e);
    dm_error_clear();
    e = make(DM_SC_CUDA, N_PTS, DIM, 0);
    dm_sc_engine_destroy(e);
    CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_DEVICE), d0);
}

static CU_TestInfo tests[] = {
    {"every_gain_instance", test_every_gain_instance},
    {"assign_cpu_vs_cuda", test_assign_cpu_vs_cuda},
    {"label_pipeline", test_label_pipeline},
    {"label_alloc_failures", test_label_alloc_failures},
    {"run_cpu_vs_cuda", test_run_cpu_vs_cuda},
    {"tuner_hooks", test_tuner_hooks},
    {"alloc_failures", test_alloc_failures},
    {"engine_out_of_device_memory", test_engine_out_of_device_memory},
    CU_TEST_INFO_NULL,
};
static CU_SuiteInfo suites[] = {{"streamclust_gpu", NULL, NULL, NULL, NULL, tests}, CU_SUITE_INFO_NULL};

int main(int argc, char **argv)
{
    /* every instance is tested explicitly; the tuner's own search (which may run inside
     * dm_tune_select) would only slow the test down, especially under compute-sanitizer */
    dm_tune_set_mode(DM_TUNE_OFF);
    g_sanitizer = getenv("DOCMINE_SANITIZER") != NULL;
    if (g_sanitizer) printf("DOCMINE_SANITIZER set: the small variant (every kernel, fewer calls)\n");
    return dm_test_run_gpu(argc, argv, suites);
}
