/* MPI tests of tfidf (mpiexec -n 1, 2, 4 on the CPU backend; built again with TFIDF_TEST_GPU as
 * test_tfidf_mpi_gpu, mpiexec -n 1, 2 on the CUDA backend): vectors written collectively by all ranks
 * are byte-identical to the file one process writes, for core inputs under a weak hash (so terms
 * collide across ranks), for a corpus on disk split by bytes (with ranks that get no file), for
 * TF-ICF tables and TF-ICF vectors, and for Reuters-21578 when present; the vocabulary is the
 * same on every rank; an error on one rank reaches all ranks without a hang. Under
 * compute-sanitizer (DOCMINE_SANITIZER set, scripts/gpu-check.sh; GPU build only) Reuters is left
 * out: the generated corpus runs the same kernels, and racecheck on the whole of Reuters twice
 * dominated the program's time. */
#include <CUnit/CUnit.h>
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/context.h"
#include "common/fileio.h"
#include "common/status.h"
#include "testutil.h"
#include "tfidf/tfidf.h"
#include "tfidf_testlib.h"

static dm_ctx g_ctx;
static char g_tmp[512];
static int g_sanitizer; /* GPU build with DOCMINE_SANITIZER set: Reuters skipped */

#ifndef TFIDF_TEST_GPU
#define TFIDF_TEST_GPU 0
#endif

static int setup(void)
{
    dm_ctx_options o = DM_CTX_OPTIONS_INIT;
    o.backend = TFIDF_TEST_GPU ? DM_BACKEND_CUDA : DM_BACKEND_CPU;
    o.quiet = 1;
    if (dm_ctx_init(&g_ctx, &o) != DM_OK) return 1;
    if (g_ctx.rank == 0 && !dm_test_tmpdir(g_tmp, sizeof g_tmp)) g_tmp[0] = '\0';
    MPI_Bcast(g_tmp, sizeof g_tmp, MPI_CHAR, 0, g_ctx.world);
    return g_tmp[0] ? 0 : 1;
}

static int teardown(void)
{
    MPI_Barrier(g_ctx.world);
    if (g_ctx.rank == 0) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
        if (system(cmd) != 0) return 1;
    }
    dm_ctx_free(&g_ctx);
    return 0;
}

/* Rank 0's verdict, shared with every rank. */
static int bcast_int(int v)
{
    MPI_Bcast(&v, 1, MPI_INT, 0, g_ctx.world);
    return v;
}

/* A checksum of the vocabulary (bytes, offsets, df, N) must be equal on every rank. */
static int vocab_same_everywhere(const dm_vocab *v)
{
    uLong c = crc32(0L, Z_NULL, 0);
    c = crc32(c, (const Bytef *)v->terms.off, (uInt)(8 * (v->terms.n + 1)));
    c = crc32(c, (const Bytef *)v->terms.bytes, (uInt)v->terms.off[v->terms.n]);
    c = crc32(c, (const Bytef *)v->terms.val, (uInt)(8 * v->terms.n));
    c = crc32(c, (const Bytef *)&v->n_docs, 8);
    unsigned long lo = c, hi = c;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UNSIGNED_LONG, MPI_MIN, g_ctx.world);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UNSIGNED_LONG, MPI_MAX, g_ctx.world);
    return lo == hi;
}

/* Documents [first, last) of n: uneven shares (rank r gets about (r + 1) parts). */
static void share(size_t n, size_t *first, size_t *last)
{
    int P = g_ctx.size, r = g_ctx.rank;
    size_t parts = (size_t)P * (P + 1) / 2, before = (size_t)r * (r + 1) / 2;
    *first = n * before / parts;
    *last = n * (before + (size_t)r + 1) / parts;
}

static void test_weak_hash_byte_identical(void)
{
    size_t n = 1500;
    char **docs = tl_random_docs(n, 900, 120, 31);
    CU_ASSERT_PTR_NOT_NULL_FATAL(docs);
    size_t a, b;
    share(n, &a, &b);
    dm_tfidf_local l;
    CU_ASSERT_EQUAL_FATAL(tl_local_build(&l, (const char *const *)docs + a, b - a, tl_weak_hash, 2, "d", a, NULL), DM_OK);
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
    o.backend = TFIDF_TEST_GPU ? DM_BACKEND_CUDA : DM_BACKEND_CPU; /* also for the one-process runs */
    o.table_initial_cap = 2;
    o.min_df_count = 2;
    o.max_df_frac = 0.5;
    o.sublinear = 1;
    dm_vectors v;
    dm_vocab voc;
    dm_tfidf_stats st;
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_vectors(&v, &voc, &st, &g_ctx, &l, &o), DM_OK);
    CU_ASSERT_EQUAL(v.row_base, a);
    CU_ASSERT_TRUE(vocab_same_everywhere(&voc));
    CU_ASSERT_TRUE(st.hash_collisions > 100);
    char pa[600], pb[600];
    snprintf(pa, sizeof pa, "%s/weak-np.dmv", g_tmp);
    snprintf(pb, sizeof pb, "%s/weak-1.dmv", g_tmp);
    CU_ASSERT_EQUAL_FATAL(dm_vectors_write(&v, pa, &g_ctx), DM_OK);
    int same = 0;
    if (g_ctx.rank == 0) {
        dm_tfidf_local all;
        dm_vectors v1;
        dm_vocab voc1;
        dm_tfidf_stats st1;
        if (tl_local_build(&all, (const char *const *)docs, n, tl_weak_hash, 2, "d", 0, NULL) == DM_OK &&
            dm_tfidf_vectors(&v1, &voc1, &st1, NULL, &all, &o) == DM_OK) {
            same = dm_vectors_write(&v1, pb, NULL) == DM_OK && tl_files_equal(pa, pb) &&
                   voc1.terms.n == voc.terms.n && st1.hash_collisions == st.hash_collisions &&
                   st1.pruned_min_df == st.pruned_min_df && st1.pruned_max_df == st.pruned_max_df &&
                   st1.empty_docs == st.empty_docs && st1.nnz == st.nnz;
            dm_vectors_free(&v1);
            dm_vocab_free(&voc1);
            dm_tfidf_local_free(&all);
        }
    }
    CU_ASSERT_TRUE(bcast_int(same));
    dm_vectors_free(&v);
    dm_vocab_free(&voc);
    dm_tfidf_local_free(&l);
    tl_docs_free(docs, n);
}

/* Three TSV files of different sizes: with 4 ranks one rank reads nothing. */
static void write_corpus(const char *dir)
{
    if (g_ctx.rank == 0) {
        char **docs = tl_random_docs(700, 1500, 90, 77);
        size_t cut[4] = {0, 90, 400, 700};
        for (int f = 0; f < 3; f++) {
            char p[700];
            snprintf(p, sizeof p, "%s/part-%d.tsv", dir, f);
            FILE *fp = fopen(p, "w");
            for (size_t d = cut[f]; fp && d < cut[f + 1]; d++)
                fprintf(fp, "doc%zu\ttopic%zu\t%s and the of it%s\n", d, d % 7, docs[d], d % 50 == 0 ? " 1984" : "");
            if (fp) fclose(fp);
        }
        tl_docs_free(docs, 700);
    }
    MPI_Barrier(g_ctx.world);
}

static void test_corpus_byte_identical(void)
{
    char dir[600], pa[700], pb[700];
    snprintf(dir, sizeof dir, "%s/corpus", g_tmp);
    if (g_ctx.rank == 0) dm_mkdirs(dir);
    write_corpus(dir);
    dm_preprocess_options pp = DM_PREPROCESS_OPTIONS_INIT;
    pp.batch_bytes = 4096;
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
    o.backend = TFIDF_TEST_GPU ? DM_BACKEND_CUDA : DM_BACKEND_CPU; /* also for the one-process runs */
    dm_vectors v;
    dm_vocab voc;
    dm_tfidf_stats st;
    CU_ASSERT_EQUAL_FATAL(dm_vectorize_corpus(&v, &voc, &st, NULL, &g_ctx, dir, &pp, &o, NULL, NULL), DM_OK);
    CU_ASSERT_EQUAL(st.docs, 700);
    CU_ASSERT_TRUE(st.empty_docs > 0); /* the generator makes empty documents: stop words only */
    CU_ASSERT_TRUE(vocab_same_everywhere(&voc));
    snprintf(pa, sizeof pa, "%s/corpus-np.dmv", g_tmp);
    snprintf(pb, sizeof pb, "%s/corpus-1.dmv", g_tmp);
    CU_ASSERT_EQUAL_FATAL(dm_vectors_write(&v, pa, &g_ctx), DM_OK);

    /* TF-ICF: the table built by all ranks, then vectors with it */
    dm_tfidf_local ref;
    CU_ASSERT_EQUAL_FATAL(dm_tfidf_local_from_corpus(&ref, NULL, &g_ctx, dir, &pp, &o), DM_OK);
    dm_pp_signature sig;
    dm_pp_signature_of(&sig, &pp);
    dm_icf_table t;
    CU_ASSERT_EQUAL_FATAL(dm_icf_build(&t, NULL, &g_ctx, &ref, &sig, &o), DM_OK);
    CU_ASSERT_TRUE(vocab_same_everywhere(&t.vocab));
    char ta[700], tb[700], ia[700], ib[700];
    snprintf(ta, sizeof ta, "%s/np.icf", g_tmp);
    snprintf(tb, sizeof tb, "%s/1.icf", g_tmp);
    snprintf(ia, sizeof ia, "%s/icf-np.dmv", g_tmp);
    snprintf(ib, sizeof ib, "%s/icf-1.dmv", g_tmp);
    if (g_ctx.rank == 0) CU_ASSERT_EQUAL(dm_icf_table_write(&t, ta), DM_OK);
    dm_vectors vi;
    o.sublinear = 1;
    o.by_bytes = 1; /* the batched reader across ranks too (TF-ICF always reads batch by batch) */
    CU_ASSERT_EQUAL_FATAL(dm_vectorize_corpus(&vi, NULL, &st, NULL, &g_ctx, dir, &pp, &o, &t, ta), DM_OK);
    CU_ASSERT_EQUAL(st.icf_unknown_tokens, 0);
    CU_ASSERT_EQUAL_FATAL(dm_vectors_write(&vi, ia, &g_ctx), DM_OK);

    int same = 0;
    if (g_ctx.rank == 0) {
        dm_vectors v1, vi1;
        dm_tfidf_local ref1;
        dm_icf_table t1;
        o.sublinear = 0;
        same = dm_vectorize_corpus(&v1, NULL, NULL, NULL, NULL, dir, &pp, &o, NULL, NULL) == DM_OK &&
               dm_vectors_write(&v1, pb, NULL) == DM_OK && tl_files_equal(pa, pb);
        same = same && dm_tfidf_local_from_corpus(&ref1, NULL, NULL, dir, &pp, &o) == DM_OK &&
               dm_icf_build(&t1, NULL, NULL, &ref1, &sig, &o) == DM_OK && dm_icf_table_write(&t1, tb) == DM_OK &&
               tl_files_equal(ta, tb);
        o.sublinear = 1;
        same = same && dm_vectorize_corpus(&vi1, NULL, NULL, NULL, NULL, dir, &pp, &o, &t1, tb) == DM_OK &&
               dm_vectors_write(&vi1, ib, NULL) == DM_OK && tl_files_equal(ia, ib);
        if (same) {
            dm_vectors_free(&v1);
            dm_vectors_free(&vi1);
            dm_tfidf_local_free(&ref1);
            dm_icf_table_free(&t1);
        }
    }
    CU_ASSERT_TRUE(bcast_int(same));
    dm_icf_table_free(&t);
    dm_tfidf_local_free(&ref);
    dm_vectors_free(&vi);
    dm_vectors_free(&v);
    dm_vocab_free(&voc);
}

/* test_alloc_failures' runs: vectorizing dir (the vectors in v, with vocabulary and statistics in
 * voc, st and ps where asked), writing them to path */
typedef struct sweep_arg {
    const char *dir, *path;
    const dm_preprocess_options *pp;
    const dm_tfidf_options *o;
    int vectorized; /* v holds the last run's vectors */
    dm_vectors v, ref;
    dm_vocab voc, rvoc;
    dm_tfidf_stats st;
    dm_pp_stats ps;
} sweep_arg;
/* the corpus vectorized and the vectors written */
static int sweep_vectorize_write(void *a_)
{
    sweep_arg *a = a_;
    int rc = dm_vectorize_corpus(&a->v, NULL, NULL, NULL, &g_ctx, a->dir, a->pp, a->o, NULL, NULL);
    a->vectorized = rc == DM_OK;
    return rc == DM_OK ? dm_vectors_write(&a->v, a->path, &g_ctx) : rc;
}
/* the corpus vectorized with its vocabulary and statistics, as `docmine vectorize --vocab` and the
 * pipeline call it */
static int sweep_vectorize(void *a_)
{
    sweep_arg *a = a_;
    int rc = dm_vectorize_corpus(&a->v, &a->voc, &a->st, &a->ps, &g_ctx, a->dir, a->pp, a->o, NULL, NULL);
    a->vectorized = rc == DM_OK;
    return rc;
}
static int sweep_differs(void *a_)
{
    const sweep_arg *a = a_;
    const dm_vocab *voc = &a->voc, *rvoc = &a->rvoc;
    return a->v.row_base != a->ref.row_base || !tl_vectors_equal(&a->v, &a->ref, 0) || voc->n_docs != rvoc->n_docs ||
           voc->terms.n != rvoc->terms.n || memcmp(voc->terms.off, rvoc->terms.off, 8 * (rvoc->terms.n + 1)) != 0 ||
           memcmp(voc->terms.bytes, rvoc->terms.bytes, rvoc->terms.off[rvoc->terms.n]) != 0 ||
           memcmp(voc->terms.val, rvoc->terms.val, 8 * rvoc->terms.n) != 0;
}
/* the vectors (and the vocabulary, where made), and the batch buffers preprocess keeps for the
 * next run */
static void sweep_release(void *a_, int rc)
{
    sweep_arg *a = a_;
    (void)rc;
    if (a->vectorized) {
        dm_vectors_free(&a->v);
        dm_vocab_free(&a->voc); /* (empty after a run without one) */
    }
    a->vectorized = 0;
    dm_preprocess_release_buffers();
}
/* the vectors written */
static int sweep_write(void *a_)
{
    sweep_arg *a = a_;
    return dm_vectors_write(&a->v, a->path, &g_ctx);
}

/* Every host allocation of vectorizing a corpus and writing the vectors collectively, failed in
 * turn on every rank (each rank's k-th), then vectorizing and the write each with one rank failing
 * alone: every rank returns the same status (every rank the root cause's code), none crashes or
 * waits, a failed run leaves no counted host memory (but the batch buffers preprocess keeps for
 * the next run: released before each measure), and a run afterwards writes the same file. */
static void test_alloc_failures(void)
{
    if (TFIDF_TEST_GPU) return; /* (the device allocations are not these) */
    char dir[600], pa[700], pb[700];
    snprintf(dir, sizeof dir, "%s/corpus-af", g_tmp);
    if (g_ctx.rank == 0) dm_mkdirs(dir);
    write_corpus(dir);
    snprintf(pa, sizeof pa, "%s/af-ref.dmv", g_tmp);
    snprintf(pb, sizeof pb, "%s/af.dmv", g_tmp);
    dm_preprocess_options pp = DM_PREPROCESS_OPTIONS_INIT;
    pp.batch_bytes = 4096;
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
    o.backend = DM_BACKEND_CPU;
    const int threads = omp_get_max_threads();
    omp_set_num_threads(4); /* several threads in every parallel part, whatever the machine */
    sweep_arg a = {.dir = dir, .path = pa, .pp = &pp, .o = &o};
    dm_test_sweep s = {.run = sweep_vectorize_write, .release = sweep_release, .arg = &a, .comm = &g_ctx.world};
    uint64_t n_max;
    int rc = dm_test_sweep_count(&s, &n_max);
    CU_ASSERT_EQUAL_FATAL(rc, DM_OK);
    sweep_release(&a, rc);
    CU_ASSERT_FATAL(n_max > 20);
    a.path = pb;
    dm_test_sweep_stats st = {0};
    dm_test_sweep_run(&s, n_max, 40, n_max / 80 + 1, &st);
    CU_ASSERT(st.failed > st.tried / 2);
    /* vectorizing with one rank failing alone (at the i-th point, rank i mod P its k-th allocation,
     * the others none), vocabulary and statistics too: every rank the same status, nothing left, a
     * run that succeeds the reference's vectors and vocabulary. Points spread over the allocations
     * (fewer on 4 ranks, which share CI's cores: 8 points, about 0.6 s there) */
    s.run = sweep_vectorize;
    s.differs = sweep_differs;
    uint64_t na_max;
    rc = dm_test_sweep_count(&s, &na_max);
    CU_ASSERT_EQUAL_FATAL(rc, DM_OK);
    a.ref = a.v;
    a.rvoc = a.voc;
    a.vectorized = 0;
    memset(&a.voc, 0, sizeof a.voc);
    dm_preprocess_release_buffers();
    const double t_alone = MPI_Wtime();
    dm_test_sweep_stats alone = {0};
    if (g_ctx.size > 1) {
        s.who = DM_TEST_SWEEP_TURN;
        s.label = "one rank alone";
        dm_test_sweep_run(&s, na_max + 1, 0, g_ctx.size > 2 ? na_max / 8 + 1 : na_max / 40 + 1, &alone);
    }
    CU_ASSERT(g_ctx.size == 1 || alone.failed > 0);
    const double s_alone = MPI_Wtime() - t_alone;
    dm_vectors_free(&a.ref);
    dm_vocab_free(&a.rvoc);
    CU_ASSERT_EQUAL_FATAL(dm_vectorize_corpus(&a.v, NULL, NULL, NULL, &g_ctx, dir, &pp, &o, NULL, NULL), DM_OK);
    CU_ASSERT_EQUAL(dm_vectors_write(&a.v, pb, &g_ctx), DM_OK);
    /* the collective write with one rank failing alone, each of its allocations in turn: the
     * others succeed where it fails (rank 0 without room for the checksums entered the gather with
     * a NULL buffer and MPI aborted the job; the other ranks' offsets were left allocated) */
    dm_test_sweep w = {.run = sweep_write, .arg = &a, .comm = &g_ctx.world, .who = DM_TEST_SWEEP_EACH, .label = "write"};
    uint64_t nw_max;
    CU_ASSERT_EQUAL(dm_test_sweep_count(&w, &nw_max), DM_OK);
    dm_test_sweep_stats ws = {0};
    dm_test_sweep_run(&w, nw_max + 1, 0, 1, &ws);
    CU_ASSERT(ws.failed > 0);
    CU_ASSERT_EQUAL(dm_vectors_write(&a.v, pb, &g_ctx), DM_OK);
    dm_vectors_free(&a.v);
    CU_ASSERT_TRUE(bcast_int(g_ctx.rank == 0 ? tl_files_equal(pa, pb) : 0));
    if (g_ctx.rank == 0)
        printf("\n  %d ranks: %llu allocations on the busiest rank, %d failure points tried, %d failed; "
               "vectorizing, one rank failing alone: %d tried, %d failed (%.2f s); the write alone, one rank failing: "
               "%d tried, %d failed",
               g_ctx.size, (unsigned long long)n_max, st.tried, st.failed, alone.tried, alone.failed, s_alone, ws.tried,
               ws.failed);
    omp_set_num_threads(threads);
}

static void test_error_reaches_every_rank(void)
{
    const char *docs[] = {"alpha beta", "beta gamma"};
    dm_tfidf_local l;
    CU_ASSERT_EQUAL_FATAL(tl_local_build(&l, docs, 2, tl_real_hash, 0, "e", 0, NULL), DM_OK);
    /* the last rank's counts name a term it does not have */
    if (g_ctx.rank == g_ctx.size - 1) l.counts.term[0] = 99;
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
    o.backend = TFIDF_TEST_GPU ? DM_BACKEND_CUDA : DM_BACKEND_CPU; /* also for the one-process runs */
    dm_vectors v;
    CU_ASSERT_EQUAL(dm_tfidf_vectors(&v, NULL, NULL, &g_ctx, &l, &o), DM_ERR_INVALID_ARG);
    dm_tfidf_local_free(&l);
    /* and the ranks go on working together afterwards */
    CU_ASSERT_EQUAL(dm_ctx_agree(&g_ctx, DM_OK), DM_OK);
}

static void test_reuters_byte_identical(void)
{
    char buf[1024];
    if (g_sanitizer) {
        if (g_ctx.rank == 0) printf("(sanitizer variant: Reuters skipped) ");
        return;
    }
    if (!dm_test_dataset("reuters21578/reut2-000.sgm", buf, sizeof buf)) {
        if (g_ctx.rank == 0) printf("(Reuters not present: skipped) ");
        return;
    }
    *strrchr(buf, '/') = '\0';
    dm_preprocess_options pp = DM_PREPROCESS_OPTIONS_INIT;
    pp.reader.format = DM_PP_FORMAT_REUTERS;
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
    o.backend = TFIDF_TEST_GPU ? DM_BACKEND_CUDA : DM_BACKEND_CPU; /* also for the one-process runs */
    o.min_df_count = 2;
    dm_vectors v;
    dm_vocab voc;
    CU_ASSERT_EQUAL_FATAL(dm_vectorize_corpus(&v, &voc, NULL, NULL, &g_ctx, buf, &pp, &o, NULL, NULL), DM_OK);
    CU_ASSERT_TRUE(vocab_same_everywhere(&voc));
    char pa[700], pb[700];
    snprintf(pa, sizeof pa, "%s/reuters-np.dmv", g_tmp);
    snprintf(pb, sizeof pb, "%s/reuters-1.dmv", g_tmp);
    CU_ASSERT_EQUAL_FATAL(dm_vectors_write(&v, pa, &g_ctx), DM_OK);
    int same = 0;
    if (g_ctx.rank == 0) {
        dm_vectors v1;
        same = dm_vectorize_corpus(&v1, NULL, NULL, NULL, NULL, buf, &pp, &o, NULL, NULL) == DM_OK &&
               dm_vectors_write(&v1, pb, NULL) == DM_OK && tl_files_equal(pa, pb);
        if (same) dm_vectors_free(&v1);
    }
    CU_ASSERT_TRUE(bcast_int(same));
    dm_vectors_free(&v);
    dm_vocab_free(&voc);
}

int main(int argc, char **argv)
{
    CU_TestInfo tests[] = {{"weak_hash_byte_identical", test_weak_hash_byte_identical},
                           {"corpus_byte_identical", test_corpus_byte_identical},
                           {"error_reaches_every_rank", test_error_reaches_every_rank},
                           {"every host allocation failing in turn", test_alloc_failures},
                           {"reuters_byte_identical", test_reuters_byte_identical},
                           CU_TEST_INFO_NULL};
    CU_SuiteInfo suites[] = {{"tfidf_mpi", setup, teardown, NULL, NULL, tests}, CU_SUITE_INFO_NULL};
    g_sanitizer = TFIDF_TEST_GPU && getenv("DOCMINE_SANITIZER") != NULL;
    if (g_sanitizer) printf("DOCMINE_SANITIZER set: the small variant (Reuters skipped)\n");
    return TFIDF_TEST_GPU ? dm_test_run_gpu(argc, argv, suites) : dm_test_run_mpi(argc, argv, suites);
}
