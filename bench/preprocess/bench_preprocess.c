/* bench_preprocess: throughput of the preprocess stage, printed as a table and written as JSON.
 *  1. kernel throughput on device-resident normalised text (tokenise + stop + stem + hash), GB/s
 *     (CUDA events around the kernels only);
 *  2. end-to-end throughput from files in the page cache (read, gunzip, normalise, tokenise,
 *     build), GB/s of raw input, per-stage seconds, overlap = sum of stages / wall, and the
 *     pipeline stage that limits it (a stage = a pool of threads doing its steps of each batch in
 *     sequence: readers read + normalise, workers copy, tokenise + build, prefault threads
 *     populate pages; preprocess.h, dm_pp_times; and the node's cores, which all pools share:
 *     the process's CPU time over the cores it may use);
 *  3. the CPU backend, and scikit-learn's TfidfVectorizer analyzer on the same documents
 *     (bench/preprocess/sklearn_tokenize.py, when python3 + scikit-learn are present), as ratios;
 *  4. with --build-only: the host's token stream build alone (what follows the tokeniser on both
 *     backends), per step, on batches of the corpus tokenised once by the CPU backend.
 * Targets (issue 3): kernels >= 50 GB/s, end-to-end >= 2 GB/s, wall within 20% of the slowest
 * stage. Reference: none (measurement). Run on the GPU node; see bench/RESULTS.md. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <jansson.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "bench/common/bench_util.h"
#include "common/context.h"
#include "common/device.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "common/status.h"
#include "common/tune/tune.h"
#include "preprocess/preprocess.h"
#include "preprocess/stream_build.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void usage(void)
{
    printf("usage: bench_preprocess [--corpus DIR] [--format F] [--min-bytes N] [--work DIR]\n"
           "                        [--backend cpu|cuda|both] [--repeats N] [--json FILE] [--no-sklearn]\n"
           "                        [--kernels-only] [--kernel-repeats N] [--build-only] [--build-batches N]\n"
           "                        [--no-prefault] [--instances] [--workers N] [--readers N]\n"
           "                        [--batch-bytes N]\n\n"
           "One process (no mpiexec -n P > 1). The output starts with the command line, the GPU and the\n"
           "date (what bench/RESULTS.md records); the tables give times in s or ms and rates in GB/s.\n"
           "--backend: cpu, cuda or both (default both; without a GPU the CUDA runs are skipped, and\n"
           "--backend cuda exits 77). --repeats N: end-to-end runs per backend, the best counts (default 2).\n"
           "--json FILE: the results as JSON (default bench_preprocess.json in the current folder; written\n"
           "atomically: a temporary name, then a rename).\n"
           "--no-sklearn: no scikit-learn comparison (bench/preprocess/sklearn_tokenize.py, python3 with\n"
           "scikit-learn; when it cannot run, the output says why and the run goes on).\n"
           "--kernels-only: only the kernel table (tokenise + stop + stem + hash on resident text,\n"
           "CUDA events, median of --kernel-repeats runs, default 10), no end-to-end or scikit-learn.\n"
           "--build-only: only the token stream build (host, one thread): the corpus normalised and\n"
           "repeated into one batch of about 32 MB, tokenised once (CPU backend), built as\n"
           "--build-batches batches (default 19, about 1 GB of Reuters input) with their own ids, with\n"
           "the builder's prefault threads as in the pipeline; twice: every token probed (CPU backend),\n"
           "then only the tokens the CUDA backend lists as possible first occurrences.\n"
           "--instances: with the kernel table, every instance of the token-bounds and process\n"
           "kernels on the same text (CUDA).\n"
           "--no-prefault: the build (--build-only) or the pipeline (end to end) without the stream\n"
           "builder's prefault threads: the fills fault the stream's fresh pages themselves.\n"
           "--workers N: pipeline workers (tokenise + build a batch each; default 0 = the driver's, 4).\n"
           "--readers N: reader threads (default 0 = the driver's: the threads less the workers and one).\n"
           "--batch-bytes N: normalised bytes per batch (default 0 = the driver's automatic size).\n"
           "Default corpus: $DOCMINE_DATASETS/reuters21578 (format reuters), else\n"
           "../shared/datasets/reuters21578 beside the source tree ($DOCMINE_SOURCE_DIR, else the tree this\n"
           "program was built from). With --min-bytes, the corpus is decompressed once into --work DIR\n"
           "(default /tmp/docmine-bench-pp; DIR/base is kept for later runs, DIR/corpus is made anew) and\n"
           "repeated through symbolic links until it holds at least N bytes (issue 3 asks for >= 1 GB).\n"
           "Exit codes: 0 ok, 1 runtime error (the corpus missing, a run or the JSON failed), 2 usage\n"
           "error, 77 --backend cuda without a GPU.\n");
}

/* Decompresses each *.sgm.gz of src into work/base (kept: a later run reuses the files; each is
 * written under a temporary name and renamed, so a run killed in the middle leaves none cut short)
 * and links copies into work/corpus (made anew) until min_bytes. */
static int prepare(char *out_dir, size_t cap, const char *src, const char *work, size_t min_bytes)
{
    char base[4096];
    if (snprintf(base, sizeof(base), "%s/base", work) >= (int)sizeof(base))
        return DM_ERR(DM_ERR_INVALID_ARG, "%s: path too long", work);
    DM_TRY(dm_mkdirs(base));
    dm_reader_options ro = DM_READER_OPTIONS_INIT;
    ro.format = DM_PP_FORMAT_REUTERS;
    dm_pp_stats st;
    memset(&st, 0, sizeof(st));
    dm_pp_file_list fl;
    DM_TRY(dm_pp_list_files(&fl, src, &ro, &st));
    size_t total = 0;
    int rc = DM_OK;
    char **names = calloc(fl.n ? fl.n : 1, sizeof(char *));
    if (!names) rc = DM_ERR(DM_ERR_NOMEM, "bench: out of memory");
    for (size_t i = 0; i < fl.n && rc == DM_OK; i++) {
        if (strchr(fl.files[i].rel, '/')) {
            rc = DM_ERR(DM_ERR_INVALID_ARG, "%s: corpus in subfolders (%s): give a flat folder", src, fl.files[i].rel);
            break;
        }
        char dst[4200];
        snprintf(dst, sizeof(dst), "%s/%s", base, fl.files[i].rel);
        size_t l = strlen(dst);
        if (l > 3 && strcmp(dst + l - 3, ".gz") == 0) dst[l - 3] = 0;
        names[i] = strdup(dst);
        if (!names[i]) rc = DM_ERR(DM_ERR_NOMEM, "bench: out of memory");
        struct stat sb;
        if (rc == DM_OK && stat(dst, &sb) != 0) {
            rc = bench_gunzip_to(fl.files[i].path, dst);
            if (rc == DM_OK && stat(dst, &sb) != 0) rc = DM_ERR(DM_ERR_IO, "%s: %s", dst, strerror(errno));
        }
        if (rc == DM_OK) total += (size_t)sb.st_size;
    }
    size_t copies = total ? (min_bytes + total - 1) / total : 1;
    if (copies < 1) copies = 1;
    if (rc == DM_OK && snprintf(out_dir, cap, "%s/corpus", work) >= (int)cap)
        rc = DM_ERR(DM_ERR_INVALID_ARG, "%s: path too long", work);
    if (rc == DM_OK) rc = bench_remove_tree(out_dir);
    if (rc == DM_OK) rc = dm_mkdirs(out_dir);
    for (size_t c = 0; c < copies && rc == DM_OK; c++) {
        char d[4200];
        snprintf(d, sizeof(d), "%s/copy%04zu", out_dir, c);
        if (mkdir(d, 0755) != 0) rc = DM_ERR(DM_ERR_IO, "%s: cannot create: %s", d, strerror(errno));
        for (size_t i = 0; i < fl.n && rc == DM_OK; i++) {
            char link[4400];
            snprintf(link, sizeof(link), "%s/%s", d, strrchr(names[i], '/') + 1);
            if (symlink(names[i], link) != 0) rc = DM_ERR(DM_ERR_IO, "symlink %s failed: %s", link, strerror(errno));
        }
    }
    for (size_t i = 0; names && i < fl.n; i++) free(names[i]);
    free(names);
    dm_pp_file_list_free(&fl);
    if (rc == DM_OK)
        printf("corpus: %zu copies of %zu bytes = %.2f GB in %s\n", copies, total, (double)(copies * total) / 1e9,
               out_dir);
    return rc;
}

typedef struct result {
    const char *backend;
    double bytes;
    dm_pp_times t; /* of the best run; t.workers at least 1 */
    size_t docs, tokens;
    double cpu_s;  /* the process's CPU time (user + system, all threads) during that run */
} result;

static double cpu_seconds(void)
{
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec +
           1e-6 * (double)u.ru_stime.tv_usec;
}

static int run_end_to_end(result *r, const dm_pp_file_list *fl, int format, int backend, int repeats,
                          int prefault, int workers, int readers, size_t batch_bytes)
{
    dm_preprocess_options o = DM_PREPROCESS_OPTIONS_INIT;
    o.threads = readers;
    o.reader.format = format;
    o.no_prefault = !prefault;
    o.workers = workers;
    o.batch_bytes = batch_bytes;
    memset(r, 0, sizeof(*r));
    r->backend = backend == DM_BACKEND_CUDA ? "cuda" : "cpu";
    r->t.wall = 1e30;
    for (int k = 0; k < repeats; k++) { /* the best of repeats (first run also warms the page cache) */
        dm_token_stream s;
        dm_pp_times t;
        double c0 = cpu_seconds();
        DM_TRY(dm_preprocess_files(&s, &t, fl->files, fl->n, &o, backend));
        double c1 = cpu_seconds();
        if (t.wall < r->t.wall) {
            r->t = t;
            r->cpu_s = c1 - c0;
            if (r->t.workers < 1) r->t.workers = 1;
            r->bytes = (double)s.stats.bytes_read;
            r->docs = s.n_docs;
            r->tokens = s.n_tokens;
        }
        dm_token_stream_free(&s);
    }
    return DM_OK;
}

/* All normalised documents of the corpus in one batch. */
typedef struct acc {
    char *text;
    size_t len, cap;
    uint64_t *off;
    size_t n, ncap;
} acc;

static int sink(void *user, const dm_raw_doc *d);

/* An empty accumulator with room for the first document offsets. */
static int acc_init(acc *a)
{
    memset(a, 0, sizeof(*a));
    a->ncap = 1 << 16;
    a->off = malloc(a->ncap * 8);
    if (!a->off) return DM_ERR(DM_ERR_NOMEM, "bench: out of memory");
    a->off[0] = 0;
    return DM_OK;
}

/* Kernel throughput on device-resident text (issue 3 item 1): the whole normalised corpus (or its
 * first documents up to 2 GB) in one batch. CUDA: uploaded once, kernels run once untimed
 * (instances selected or tuned), then krep times, each timed with CUDA events around the kernels
 * only; the median counts (dm_pp_cuda_kernel_bench), with its phases. CPU: the median wall time
 * of dm_tokenize_cpu on the same batch (the same work from host memory). */
typedef struct kres {
    double gbps, seconds, phase[4], norm_bytes;
    size_t tokens;
} kres;

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* --instances: every compiled instance of the token-bounds and process kernels on the same
 * resident text (the others at their default), one row each. */
static int sweep_instances(const dm_tok_batch *b, const dm_stopset *stop, const dm_tok_options *o, int krep)
{
    printf("\nevery instance on the same text (median of %d; the other kernels at their default)\n", krep);
    printf("%-20s %-22s %9s %9s %9s %9s %9s\n", "kernel", "instance", "total_ms", "tok_ms", "proc_ms", "docs_ms",
           "GB/s");
    int rc = dm_preprocess_tune_register(); /* so that the tuner names the instances */
    for (int kk = 0; rc >= 0 && kk < dm_pp_cuda_kernel_count(); kk++) {
        const char *name = dm_pp_cuda_kernel_name(kk);
        if (strcmp(name, "preprocess.tokens") != 0 && strcmp(name, "preprocess.process") != 0) continue;
        const dm_tune_kernel *tk = dm_tune_kernel_find(name);
        for (int i = 0; rc >= 0 && i < dm_pp_cuda_instance_count(kk); i++) {
            rc = dm_pp_cuda_force_instance(kk, i);
            double sec = 0, ph[4] = {0, 0, 0, 0};
            size_t tok = 0;
            if (rc >= 0) rc = dm_pp_cuda_kernel_bench(&sec, ph, &tok, b, stop, o, krep);
            char pol[96] = "?";
            if (tk) dm_tune_policy_str(&tk->instances[i].policy, pol, sizeof pol);
            if (rc >= 0)
                printf("%-20s %-22s %9.2f %9.2f %9.2f %9.2f %9.2f\n", name, pol, sec * 1e3, ph[0] * 1e3, ph[1] * 1e3,
                       ph[2] * 1e3, (double)b->text_len / sec / 1e9);
        }
        dm_pp_cuda_force_instance(kk, -1);
    }
    return rc;
}

static int run_kernels(kres *k, const dm_pp_file_list *fl, int format, int backend, int krep, int instances)
{
    acc a;
    memset(k, 0, sizeof(*k));
    dm_reader_options ro = DM_READER_OPTIONS_INIT;
    ro.format = format;
    dm_pp_stats st;
    memset(&st, 0, sizeof(st));
    DM_TRY(acc_init(&a));
    for (size_t i = 0; i < fl->n; i++) DM_TRY(dm_pp_read_file(&fl->files[i], &ro, &st, sink, &a));
    size_t nd = a.n;
    while (nd > 0 && a.off[nd] >= ((size_t)1 << 31) - 1) nd--; /* one device batch: < 2 GB */
    dm_stopset stop;
    DM_TRY(dm_stopset_load(&stop, NULL));
    dm_tok_batch b = {a.text, (size_t)a.off[nd], a.off, nd};
    dm_tok_options o = DM_TOK_OPTIONS_INIT;
    int rc = DM_OK;
    if (backend == DM_BACKEND_CUDA) {
        rc = dm_pp_cuda_kernel_bench(&k->seconds, k->phase, &k->tokens, &b, &stop, &o, krep);
        if (rc >= 0 && instances) rc = sweep_instances(&b, &stop, &o, krep);
    } else {
        int reps = krep < 3 ? krep : 3; /* the CPU backend takes seconds per run */
        double t[3];
        for (int r = 0; rc >= 0 && r < reps; r++) {
            dm_tok_result res;
            double t0 = now();
            rc = dm_tokenize_cpu(&res, &b, &stop, &o);
            t[r] = now() - t0;
            if (rc >= 0) k->tokens = res.n_tokens, dm_tok_result_free(&res);
        }
        qsort(t, (size_t)reps, sizeof(double), cmp_d);
        k->seconds = t[reps / 2];
    }
    k->norm_bytes = (double)b.text_len;
    k->gbps = k->seconds > 0 ? (double)b.text_len / k->seconds / 1e9 : 0;
    dm_stopset_free(&stop);
    dm_free(a.text); /* dm_normalize's (dm_realloc) */
    free(a.off);
    return rc;
}

static int sink(void *user, const dm_raw_doc *d)
{
    acc *a = user;
    DM_TRY(dm_normalize(&a->text, &a->len, &a->cap, d->text, d->len, 0, NULL));
    if (a->n + 2 > a->ncap) {
        uint64_t *o = realloc(a->off, a->ncap * 2 * 8);
        if (!o) return DM_ERR(DM_ERR_NOMEM, "bench: out of memory"); /* a->off kept for its free */
        a->off = o;
        a->ncap *= 2;
    }
    a->off[++a->n] = a->len;
    return 0;
}

static double tnow(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The token stream build alone, on one thread: prepare, commit and fill of nb batches (each the
 * same tokenised batch of about 32 MB under new document ids, as the pipeline's workers run them)
 * and the final vocabulary sort, timed per step (thread CPU time and wall time), twice: every
 * token probed for the batch's distinct terms (the CPU backend's result), then only the tokens
 * listed as possible first occurrences (the CUDA backend's result carries that list; here it is
 * made on the host by the same step, dm_tok_first_hd, untimed). With prefault, the builder's
 * prefault threads populate the stream's pages ahead of the fills, as in the pipeline; their
 * thread-seconds are printed apart. */
static int build_once(dm_tok_result *r, const acc *a, int nb, int prefault, char *meta, size_t mcap)
{
    dm_stream_builder sb;
    dm_sb_batch sp;
    memset(&sp, 0, sizeof(sp));
    DM_TRY(dm_sb_init(&sb));
    if (prefault) DM_TRY(dm_sb_prefault_start(&sb));
    double c[4] = {0, 0, 0, 0}, w[4] = {0, 0, 0, 0};
    for (int k = 0; k < nb; k++) {
        size_t m = 0;
        for (size_t d = 0; d < a->n; d++) {
            m += (size_t)snprintf(meta + m, mcap - m, "copy%04d/reut2-%03zu.sgm:%zu", k, d % 22, d) + 1;
            m += (size_t)snprintf(meta + m, mcap - m, "%s", d % 4 ? "earn" : "") + 1;
        }
        double c0 = tnow(), w0 = now();
        DM_TRY(dm_sb_batch_prepare(&sp, r, meta));
        double c1 = tnow(), w1 = now();
        DM_TRY(dm_sb_batch_commit(&sb, &sp, r));
        double c2 = tnow(), w2 = now();
        DM_TRY(dm_sb_batch_fill(&sb, &sp, r));
        double c3 = tnow(), w3 = now();
        c[0] += c1 - c0, c[1] += c2 - c1, c[2] += c3 - c2;
        w[0] += w1 - w0, w[1] += w2 - w1, w[2] += w3 - w2;
    }
    size_t distinct = sp.n_terms;
    dm_token_stream s;
    double c0 = tnow(), w0 = now(), pf_s = 0;
    uint64_t pf_bytes = 0;
    dm_sb_prefault_stop(&sb, &pf_s, &pf_bytes); /* the trim of the lookahead counts as finish */
    DM_TRY(dm_sb_finish(&s, &sb));
    c[3] = tnow() - c0, w[3] = now() - w0;
    double tok = (double)r->n_tokens * nb, ct = c[0] + c[1] + c[2] + c[3], wt = w[0] + w[1] + w[2] + w[3];
    printf("\ntoken stream build (host, one thread), %s: %d batches of %.1f MB normalised, %zu documents, "
           "%zu tokens, %zu distinct terms each; %.0f tokens, %zu terms in the stream\n",
           r->first ? "listed first occurrences only (CUDA backend)" : "every token probed (CPU backend)", nb,
           (double)a->len / 1e6, a->n, r->n_tokens, distinct, tok, s.n_terms);
    if (r->first)
        printf("tokens listed as possible first occurrences: %zu of %zu per batch\n", r->n_first, r->n_tokens);
    printf("%-10s %9s %9s %9s\n", "step", "cpu_s", "wall_s", "ns/token");
    static const char *nm[4] = {"prepare", "commit", "fill", "finish"};
    for (int i = 0; i < 4; i++) printf("%-10s %9.3f %9.3f %9.2f\n", nm[i], c[i], w[i], c[i] / tok * 1e9);
    printf("%-10s %9.3f %9.3f %9.2f\n", "total", ct, wt, ct / tok * 1e9);
    printf("in batch order (serial in the pipeline): commit %.3f s (%.1f%%); the rest runs on the "
           "pipeline's workers in parallel\n", c[1], 100 * c[1] / ct);
    if (prefault)
        printf("prefault threads (%d, beside the build): %.3f thread-s populating %.1f MB of the stream\n",
               DM_SB_PF_THREADS, pf_s, (double)pf_bytes / 1e6);
    else
        printf("prefault off (--no-prefault): the fills fault the stream's pages\n");
    dm_token_stream_free(&s);
    dm_sb_batch_free(&sp);
    return DM_OK;
}

static int run_build(const dm_pp_file_list *fl, int format, int nb, int prefault)
{
    acc a;
    dm_reader_options ro = DM_READER_OPTIONS_INIT;
    ro.format = format;
    dm_pp_stats st;
    memset(&st, 0, sizeof(st));
    DM_TRY(acc_init(&a));
    do {
        for (size_t i = 0; i < fl->n; i++) DM_TRY(dm_pp_read_file(&fl->files[i], &ro, &st, sink, &a));
    } while (a.len > 0 && a.len < (size_t)32000000);
    if (a.n == 0) return DM_ERR(DM_ERR_INVALID_ARG, "bench: no documents");
    dm_stopset stop;
    DM_TRY(dm_stopset_load(&stop, NULL));
    dm_tok_batch b = {a.text, a.len, a.off, a.n};
    dm_tok_options o = DM_TOK_OPTIONS_INIT;
    dm_tok_result r;
    DM_TRY(dm_tokenize_cpu(&r, &b, &stop, &o));
    size_t mcap = a.n * 48 + 64;
    char *meta = malloc(mcap);
    int rc = meta ? DM_OK : DM_ERR(DM_ERR_NOMEM, "bench: out of memory");
    if (rc >= 0) rc = build_once(&r, &a, nb, prefault, meta, mcap);
    if (rc >= 0) rc = dm_tok_first_hd(&r);
    if (rc >= 0) rc = build_once(&r, &a, nb, prefault, meta, mcap);
    dm_tok_result_free(&r);
    dm_stopset_free(&stop);
    free(meta);
    dm_free(a.text); /* dm_normalize's (dm_realloc) */
    free(a.off);
    return rc;
}

/* scikit-learn's analyzer on the same corpus: GB/s, or 0 with why it did not run. */
static double run_sklearn(const char *script, const char *corpus, int *ok, char *why, size_t wlen)
{
    char res[256];
    double gbps = 0;
    *ok = bench_python(script, corpus, NULL, res, sizeof res, why, wlen) == 0 && sscanf(res, "%lf", &gbps) == 1 &&
          gbps > 0;
    if (!*ok && !why[0]) snprintf(why, wlen, "no rate from %.900s", script);
    return *ok ? gbps : 0;
}

static int run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"corpus", required_argument, 0, 'c'}, {"format", required_argument, 0, 'f'},
        {"min-bytes", required_argument, 0, 'm'}, {"work", required_argument, 0, 'w'},
        {"backend", required_argument, 0, 'b'}, {"repeats", required_argument, 0, 'r'},
        {"json", required_argument, 0, 'j'}, {"no-sklearn", no_argument, 0, 's'},
        {"kernels-only", no_argument, 0, 'k'}, {"kernel-repeats", required_argument, 0, 'K'},
        {"build-only", no_argument, 0, 'B'}, {"build-batches", required_argument, 0, 'n'},
        {"no-prefault", no_argument, 0, 'P'}, {"instances", no_argument, 0, 'I'},
        {"workers", required_argument, 0, 'W'}, {"readers", required_argument, 0, 'R'},
        {"batch-bytes", required_argument, 0, 'X'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *corpus = NULL, *work = "/tmp/docmine-bench-pp", *json_path = "bench_preprocess.json",
               *backends = "both";
    int format = DM_PP_FORMAT_REUTERS, repeats = 2, sklearn = 1, kernels_only = 0, krep = 10, c, li;
    int build_only = 0, build_batches = 19, prefault = 1, instances = 0, workers = 0, readers = 0, bad = 0;
    size_t min_bytes = 0, batch_bytes = 0;
    int nranks = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    bench_init("bench_preprocess", argc, argv, rank == 0);
    opterr = rank == 0;
    while (!bad && (li = -1, c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
        char on[64];
        snprintf(on, sizeof on, "--%s", li >= 0 ? opts[li].name : "?");
        switch (c) {
        case 'c': corpus = optarg; break;
        case 'f':
            if (dm_pp_format_parse(optarg, &format) < 0) return bench_usage_error("--format: %s", dm_error_message());
            break;
        case 'm': bad = bench_parse_size(on, optarg, 0, SIZE_MAX, &min_bytes); break;
        case 'w': work = optarg; break;
        case 'b':
            if (strcmp(optarg, "cpu") && strcmp(optarg, "cuda") && strcmp(optarg, "both"))
                return bench_usage_error("--backend: '%s' is not cpu, cuda or both", optarg);
            backends = optarg;
            break;
        case 'r': bad = bench_parse_int(on, optarg, 1, 1000000, &repeats); break;
        case 'j': json_path = optarg; break;
        case 's': sklearn = 0; break;
        case 'k': kernels_only = 1, sklearn = 0; break;
        case 'K': bad = bench_parse_int(on, optarg, 1, 1000000, &krep); break;
        case 'B': build_only = 1; break;
        case 'P': prefault = 0; break;
        case 'I': instances = 1; break;
        case 'W': bad = bench_parse_int(on, optarg, 0, 4096, &workers); break;
        case 'R': bad = bench_parse_int(on, optarg, 0, 4096, &readers); break;
        case 'X': bad = bench_parse_size(on, optarg, 0, SIZE_MAX, &batch_bytes); break;
        case 'n': bad = bench_parse_int(on, optarg, 1, 1000000, &build_batches); break;
        case 'h': usage(); return 0;
        default: /* getopt_long named it */
            fprintf(stderr, "bench_preprocess: see bench_preprocess --help\n");
            return BENCH_EXIT_USAGE;
        }
    }
    if (bad) return BENCH_EXIT_USAGE;
    if (optind < argc) return bench_usage_error("unexpected argument '%s'", argv[optind]);
    if (build_only && kernels_only) return bench_usage_error("--build-only and --kernels-only: give one of them");
    /* every rank would run the whole benchmark and rebuild the same --work folder */
    if (nranks > 1) return bench_usage_error("runs as one process, not %d ranks", nranks);
    char src[4096], dir[4096];
    int default_corpus = !corpus;
    if (!corpus) corpus = bench_dataset("reuters21578", src, sizeof(src));
    if (bench_check_corpus(corpus, default_corpus) != 0) return BENCH_EXIT_RUNTIME;
    if (!build_only && strcmp(backends, "cuda") == 0 && dm_device_count() == 0) {
        fprintf(stderr, "bench_preprocess: --backend cuda: no GPU (skipped)\n");
        return BENCH_EXIT_SKIP;
    }
    if (min_bytes > 0) {
        if (prepare(dir, sizeof(dir), corpus, work, min_bytes) < 0) {
            fprintf(stderr, "bench_preprocess: %s\n", dm_error_message());
            return 1;
        }
        corpus = dir;
    }
    dm_reader_options ro = DM_READER_OPTIONS_INIT;
    ro.format = format;
    dm_pp_stats st;
    memset(&st, 0, sizeof(st));
    dm_pp_file_list fl;
    if (dm_pp_list_files(&fl, corpus, &ro, &st) < 0) {
        fprintf(stderr, "bench_preprocess: %s\n", dm_error_message());
        return 1;
    }
    if (fl.n == 0) {
        dm_pp_file_list_free(&fl);
        return bench_error("%s: no input files (for --format reuters: *.sgm, compressed or not)", corpus);
    }
    if (build_only) {
        bench_print_header(NULL);
        int rc = run_build(&fl, format, build_batches, prefault);
        dm_pp_file_list_free(&fl);
        if (rc < 0) {
            fprintf(stderr, "bench_preprocess: %s\n", dm_error_message());
            return 1;
        }
        return 0;
    }
    int want_cpu = strcmp(backends, "cuda") != 0, want_cuda = strcmp(backends, "cpu") != 0;
    if (want_cuda && dm_device_count() == 0) {
        printf("no GPU: CUDA backend skipped\n");
        want_cuda = 0;
    }
    dm_device_info dev;
    memset(&dev, 0, sizeof(dev));
    if (want_cuda) dm_device_bind(0, &dev);
    bench_print_header(want_cuda ? dev.name : NULL);
    result res[2];
    kres kr[2];
    const char *kname[2];
    int nres = 0;
    json_t *root = json_object();
    json_t *runs = json_array();
    for (int k = 0; k < 2; k++) {
        int be = k == 0 ? DM_BACKEND_CUDA : DM_BACKEND_CPU;
        if ((be == DM_BACKEND_CUDA && !want_cuda) || (be == DM_BACKEND_CPU && !want_cpu)) continue;
        kname[nres] = be == DM_BACKEND_CUDA ? "cuda" : "cpu";
        if ((!kernels_only && run_end_to_end(&res[nres], &fl, format, be, repeats, prefault, workers, readers, batch_bytes) < 0) ||
            run_kernels(&kr[nres], &fl, format, be, krep, instances) < 0) {
            fprintf(stderr, "bench_preprocess: %s\n", dm_error_message());
            json_decref(root);
            json_decref(runs);
            dm_pp_file_list_free(&fl);
            return 1;
        }
        nres++;
    }
    /* table 1: kernels on device-resident normalised text */
    printf("\npreprocess benchmark: %zu files, GPU %s\n", fl.n, want_cuda ? dev.name : "none");
    printf("\nkernels on resident normalised text (%.3f GB; CUDA: median of %d, CUDA events around the "
           "kernels only; CPU: dm_tokenize_cpu wall time; first_ms: the list of the terms' first occurrences "
           "for the stream build, run after the kernels and not in total_ms or GB/s)\n",
           nres ? kr[0].norm_bytes / 1e9 : 0.0, krep);
    printf("%-7s %9s %9s %9s %9s %9s %9s %9s\n", "backend", "total_ms", "tok_ms", "proc_ms", "docs_ms", "GB/s", "Mtok",
           "first_ms");
    for (int i = 0; i < nres; i++) {
        kres *k = &kr[i];
        if (kname[i][1] == 'u')
            printf("%-7s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", kname[i], k->seconds * 1e3, k->phase[0] * 1e3,
                   k->phase[1] * 1e3, k->phase[2] * 1e3, k->gbps, (double)k->tokens / 1e6, k->phase[3] * 1e3);
        else
            printf("%-7s %9.2f %9s %9s %9s %9.2f %9.2f %9s\n", kname[i], k->seconds * 1e3, "-", "-", "-", k->gbps,
                   (double)k->tokens / 1e6, "-");
        if (kname[i][1] == 'u' && k->gbps < 50) {
            static const char *pn[3] = {"tokenise (count per tile, scan, place)",
                                        "process (filter, stop, stem, hash, compact)", "document bounds"};
            int pm = 0;
            for (int p = 1; p < 3; p++)
                if (k->phase[p] > k->phase[pm]) pm = p;
            printf("  target missed: kernels %.2f GB/s < 50 GB/s, slowest phase: %s\n", k->gbps, pn[pm]);
        }
        json_t *j = json_pack("{s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:I,s:i}", "backend", kname[i], "normalized_bytes",
                              k->norm_bytes, "seconds", k->seconds, "tokenise_s", k->phase[0], "process_s",
                              k->phase[1], "docs_s", k->phase[2], "first_s", k->phase[3], "gbps", k->gbps, "tokens",
                              (json_int_t)k->tokens, "repeats", krep);
        json_array_append_new(runs, j);
    }
    if (kernels_only) nres = 0;
    int sk_ok = 0;
    double sk_gbps = 0;
    char sk_why[1024] = "";
    if (sklearn) {
        char script[4096];
        bench_source_file("bench/preprocess/sklearn_tokenize.py", script, sizeof(script));
        sk_gbps = run_sklearn(script, corpus, &sk_ok, sk_why, sizeof(sk_why));
    }
    int ncores = 0; /* the cores this process may run on */
    {
        cpu_set_t cs;
        CPU_ZERO(&cs);
        if (sched_getaffinity(0, sizeof cs, &cs) == 0) ncores = CPU_COUNT(&cs);
        if (ncores < 1) ncores = (int)sysconf(_SC_NPROCESSORS_ONLN);
        if (ncores < 1) ncores = 1;
    }
    if (nres) printf("\nend to end from files in the page cache (read/normalize: thread-seconds / reader threads)\n");
    if (nres) printf("%-6s %10s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %9s %9s  %s\n", "backend", "GB", "wall_s",
           "read", "norm", "take", "h2d", "kernels", "d2h", "build", "prefault", "e2e_GB/s", "overlap", "kern_GB/s",
           "Mtok", "limited by");
    for (int i = 0; i < nres; i++) {
        result *r = &res[i];
        /* overlap: the stages (read, normalize, h2d, kernels, d2h) plus the batch assembly,
         * the build and prefault, summed, over the wall */
        double sum = dm_pp_times_sum(&r->t);
        /* the limit: the pipeline's stages are its thread pools, each doing its steps of a batch
         * in sequence (preprocess.h, dm_pp_times): the reader threads read and normalise each
         * document (the two cannot overlap each other), a worker copies its batch's pieces
         * (take), tokenises (h2d, kernels, d2h) and builds it (the workers overlap each other),
         * the prefault threads populate pages; each stage's time is per thread (the calling
         * thread only gathers pieces in order and waits) */
        /* and the cores the pools share: the process's CPU time during the run (getrusage, all
         * threads) over the cores it may run on, the wall it would take with every core busy all
         * the time. When more threads are busy than there are cores, the pools' busy times
         * (wall clock) include waiting for a core, and the node's CPU is the limit. */
        double stage[4] = {r->t.read + r->t.normalize, r->t.worker / r->t.workers, r->t.prefault / DM_SB_PF_THREADS,
                           r->cpu_s / ncores};
        static const char *names[4] = {"readers (read + normalize)", "workers (take + tokenise + build)",
                                       "prefault threads", "the node's cores (CPU time / cores)"};
        int imx = 0;
        for (int k = 1; k < 4; k++)
            if (stage[k] > stage[imx]) imx = k;
        double pool = stage[0] > stage[1] ? stage[0] : stage[1];
        if (stage[2] > pool) pool = stage[2];
        double mx = stage[imx], e2e = r->bytes / r->t.wall / 1e9;
        printf("%-7s %10.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.2f %9.2f %9.2f  %s (%.3f s)%s\n",
               r->backend, r->bytes / 1e9, r->t.wall, r->t.read, r->t.normalize, r->t.take, r->t.h2d, r->t.kernels, r->t.d2h,
               r->t.build, r->t.prefault, e2e, sum / r->t.wall, kr[i].gbps, (double)r->tokens / 1e6, names[imx], mx,
               r->t.wall > 1.2 * mx ? " (wall > 1.2 x slowest stage: overlap target missed)" : "");
        printf("        pipeline stages, s per thread: readers %.3f (%d threads), workers %.3f (%d), prefault %.3f "
               "(%d); CPU time / %d cores %.3f; wall / slowest = %.2f (wall / busiest pool = %.2f); %llu batches\n",
               stage[0], r->t.threads, stage[1], r->t.workers, stage[2], DM_SB_PF_THREADS, ncores, stage[3],
               r->t.wall / mx, r->t.wall / pool, (unsigned long long)r->t.batches);
        printf("        idle, s per thread: readers %.3f; calling thread: for a free batch %.3f, for the next piece "
               "%.3f; workers: for a batch %.3f, for their commit turn %.3f\n",
               r->t.wait_read, r->t.wait_slot, r->t.wait_piece, r->t.wait_batch / r->t.workers, r->t.wait_turn / r->t.workers);
        printf("        wall: set-up %.3f, pipeline until the last piece %.3f, drain %.3f, finish %.3f s\n", r->t.wall_setup,
               r->t.wall_run, r->t.wall_drain, r->t.wall_finish);
        json_t *j = json_pack("{s:s,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:I,s:I,s:s}", "backend",
                              r->backend, "bytes", r->bytes, "normalized_bytes", kr[i].norm_bytes, "wall_s", r->t.wall,
                              "read_s", r->t.read, "normalize_s", r->t.normalize, "h2d_s", r->t.h2d, "kernels_s",
                              r->t.kernels, "d2h_s", r->t.d2h, "build_s", r->t.build, "end_to_end_gbps", e2e,
                              "overlap", sum / r->t.wall, "kernel_gbps", kr[i].gbps, "documents",
                              (json_int_t)r->docs, "tokens", (json_int_t)r->tokens, "limiting_stage", names[imx]);
        json_object_set_new(j, "workers", json_integer(r->t.workers));
        json_object_set_new(j, "batches", json_integer((json_int_t)r->t.batches));
        json_object_set_new(j, "wall_parts_s", json_pack("{s:f,s:f,s:f,s:f}", "setup", r->t.wall_setup, "run",
                                                         r->t.wall_run, "drain", r->t.wall_drain, "finish",
                                                         r->t.wall_finish));
        json_object_set_new(j, "reader_threads", json_integer(r->t.threads));
        json_object_set_new(j, "take_s", json_real(r->t.take));
        json_object_set_new(j, "worker_busy_s", json_real(r->t.worker));
        json_object_set_new(j, "prefault_s", json_real(r->t.prefault));
        json_object_set_new(j, "prefault_threads", json_integer(DM_SB_PF_THREADS));
        json_object_set_new(j, "wall_over_slowest_stage", json_real(r->t.wall / mx));
        json_object_set_new(j, "cores", json_integer(ncores));
        json_object_set_new(j, "cpu_s", json_real(r->cpu_s));
        json_object_set_new(j, "cpu_bound_s", json_real(stage[3]));
        json_object_set_new(j, "idle_s", json_pack("{s:f,s:f,s:f,s:f,s:f}", "reader", r->t.wait_read, "free_batch",
                                                   r->t.wait_slot, "next_piece", r->t.wait_piece, "worker_batch",
                                                   r->t.wait_batch / r->t.workers, "worker_turn",
                                                   r->t.wait_turn / r->t.workers));
        json_array_append_new(runs, j);
        if (r->backend[0] == 'c' && r->backend[1] == 'u') {
            if (e2e < 2) printf("  target missed: end-to-end %.2f GB/s < 2 GB/s, limited by %s\n", e2e, names[imx]);
        }
    }
    if (nres)
        printf("(h2d .. build, take, prefault: thread-seconds summed over the stage's threads; the pipeline stages "
               "divide them by the threads)\n");
    if (nres == 2) printf("CUDA / CPU end-to-end: %.2fx\n", res[1].t.wall / res[0].t.wall);
    if (sk_ok) {
        printf("scikit-learn TfidfVectorizer analyzer: %.3f GB/s", sk_gbps);
        for (int i = 0; i < nres; i++) printf("; %s / sklearn %.2fx", res[i].backend, res[i].bytes / res[i].t.wall / 1e9 / sk_gbps);
        printf("\n");
    } else if (sklearn) {
        printf("scikit-learn comparison skipped: %s\n", sk_why);
    }
    json_object_set_new(root, "runs", runs);
    json_object_set_new(root, "corpus", json_string(corpus));
    json_object_set_new(root, "gpu", json_string(want_cuda ? dev.name : "none"));
    bench_json_meta(root, want_cuda ? dev.name : NULL);
    if (sk_ok) json_object_set_new(root, "sklearn_gbps", json_real(sk_gbps));
    else if (sklearn) json_object_set_new(root, "sklearn_skipped", json_string(sk_why));
    int rc = bench_write_json(json_path, root, JSON_INDENT(2));
    if (rc == DM_OK) printf("JSON: %s\n", json_path);
    else fprintf(stderr, "bench_preprocess: --json: %s\n", dm_error_message());
    json_decref(root);
    dm_pp_file_list_free(&fl);
    return rc == DM_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rc = run(argc, argv);
    MPI_Finalize();
    return rc;
}
