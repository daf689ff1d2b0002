/* bench_tfidf: throughput of tfidf and of the sorts it uses, printed as a table and written as
 * JSON (--json FILE). Issue 4's targets on one H200:
 *  1. per-document TF counting, device-resident tokens, every compiled instance of both table
 *     variants (the tuner's workloads): token inserts per second (target >= 5 G/s);
 *  2. segmented sort of vector rows (the TF-IDF row-length profile): CUB's segmented sort, the
 *     bitonic hybrid per instance, and CUB radix sort's raw rate on the same number of pairs;
 *  3. `vectorize` end to end on >= 1 GB of text including preprocess (read, normalise, tokenise,
 *     count, vocabulary, weights, .dmv write), GB/s of raw text, per backend; and the ratio to
 *     scikit-learn's TfidfVectorizer on the same documents (bench/tfidf/sklearn_tfidf.py, when
 *     python3 + scikit-learn are present).
 * Kernel times: wall clock around repeats of the launch followed by a device sync (median of
 * repeats, after a warm-up). Reference: none (measurement). See bench/RESULTS.md. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "bench/common/bench_util.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "common/context.h"
#include "common/device.h"
#include "common/log.h"
#include "common/status.h"
#include "common/timer.h"
#include "common/tune/tune.h"
#include "sorting/sorting.h"
#include "tfidf/tfidf.h"

#if DM_HAVE_CUDA
#include <cuda_runtime.h>
#endif

static void usage(void)
{
    printf("usage: bench_tfidf [--corpus DIR] [--format F] [--min-bytes N] [--work DIR] [--backend cpu|cuda|both]\n"
           "                   [--tokens N] [--items N] [--repeats N] [--json FILE] [--no-sklearn]\n"
           "                   [--sklearn-max-bytes N] [--skip-e2e | --e2e-only] [--e2e-repeats N]\n"
           "                   [--rows device|host|both]\n\n"
           "One process (no mpiexec -n P > 1). The output starts with the command line, the GPU and the\n"
           "date (what bench/RESULTS.md records); times are in ms or s, rates in G units/s or GB/s.\n"
           "Default corpus: $DOCMINE_DATASETS/reuters21578 (format reuters), else\n"
           "../shared/datasets/reuters21578 beside the source tree ($DOCMINE_SOURCE_DIR, else the tree this\n"
           "program was built from). With --min-bytes (default 1 GB) the corpus (a flat folder) is\n"
           "decompressed once into --work DIR (default /tmp/docmine-bench-tfidf; DIR/base is kept for later\n"
           "runs) and repeated until it holds at least that many bytes: DIR/copies-K/cNNNNN/ are directories\n"
           "of symbolic links to the decompressed files (made anew). The end-to-end run must read every copy\n"
           "(checked).\n"
           "scikit-learn runs on the same folder in the same run (bench/tfidf/sklearn_tfidf.py: python3 with\n"
           "scikit-learn; when it cannot run, the output says why and the run goes on); --sklearn-max-bytes N\n"
           "limits it to the first files holding N bytes (its GB/s is then measured on that prefix, and says\n"
           "so). --no-sklearn: none.\n"
           "--tokens: tokens of the counting benchmark (default 2^26); --items: pairs of the sort\n"
           "benchmark (default 2^26); --repeats N: timed runs of each kernel, the median counts (default 5);\n"
           "the kernel and sort tables need a GPU. --skip-e2e: those only (exit 77 without a GPU); --e2e-only:\n"
           "the end-to-end runs only. --backend of the end-to-end runs: default cuda with a GPU, else cpu (--backend cuda\n"
           "without a GPU exits 77).\n"
           "Each end-to-end run prints its stages (tfidf's named timers, s and text GB/s; level-1 rows are\n"
           "parts of the row above). --e2e-repeats N\n"
           "(default 2) runs each backend N times on the files in the page cache; the last line of a\n"
           "backend gives the best run: GB/s with the .dmv write (wall) and of the vectors in memory\n"
           "(text to vectors, as scikit-learn's fit_transform; the write is bound by the disk).\n"
           "--rows: where the CUDA runs keep the count rows between counting and weighing (default\n"
           "device; host is the earlier path, dm_tfidf_options.host_rows; both compares them).\n"
           "--json FILE: the results as JSON (none by default), rewritten after every section (atomically:\n"
           "a temporary name, then a rename), so a run cut short keeps what it measured.\n"
           "Exit codes: 0 ok, 1 runtime error (the corpus missing, a run or the JSON failed), 2 usage\n"
           "error, 77 --backend cuda without a GPU.\n");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median seconds of `repeats` runs of a tuner instance on its bench state. */
static int time_instance(double *sec, const dm_tune_kernel *k, void *state, const dm_tune_instance *inst, int repeats)
{
    double *t = dm_malloc(sizeof(double) * (size_t)repeats);
    if (!t) return DM_ERR_NOMEM;
    int rc = k->bench_run(state, inst, NULL);
    if (rc == DM_OK) rc = dm_device_sync();
    for (int r = 0; r < repeats && rc == DM_OK; r++) {
        double t0 = dm_wtime();
        rc = k->bench_run(state, inst, NULL);
        if (rc == DM_OK) rc = dm_device_sync();
        t[r] = dm_wtime() - t0;
    }
    if (rc == DM_OK) {
        qsort(t, (size_t)repeats, sizeof *t, cmp_double);
        *sec = t[repeats / 2];
    }
    dm_free(t);
    return rc;
}

/* Every instance of a registered kernel on n work units: rate = n / seconds. */
static int bench_kernel(json_t *arr, const char *name, size_t n, int repeats, const char *unit_label)
{
    const dm_tune_kernel *k = dm_tune_kernel_find(name);
    if (!k || !k->bench_create) return DM_ERR(DM_ERR_INVALID_ARG, "bench: kernel %s is not registered", name);
    void *state = NULL;
    DM_TRY(k->bench_create(&state, n, 42));
    double best = 0;
    int best_i = -1;
    printf("\n%s on %zu %s (%s)\n", name, n, k->work_unit, k->description);
    printf("  %-44s %12s %14s\n", "instance", "ms", unit_label);
    int rc = DM_OK;
    for (int i = 0; i < k->n_instances && rc == DM_OK; i++) {
        double s = 0;
        rc = time_instance(&s, k, state, &k->instances[i], repeats);
        if (rc != DM_OK) break;
        char pol[128];
        dm_tune_policy_str(&k->instances[i].policy, pol, sizeof pol);
        double rate = (double)n / s / 1e9;
        printf("  %-44s %12.3f %14.3f%s\n", pol, s * 1e3, rate, i == k->default_instance ? "  (default)" : "");
        json_t *o = json_object();
        json_object_set_new(o, "kernel", json_string(name));
        json_object_set_new(o, "instance", json_string(pol));
        json_object_set_new(o, "default", json_boolean(i == k->default_instance));
        json_object_set_new(o, "n", json_integer((json_int_t)n));
        json_object_set_new(o, "seconds", json_real(s));
        json_object_set_new(o, "giga_units_per_second", json_real(rate));
        json_array_append_new(arr, o);
        if (rate > best) {
            best = rate;
            best_i = i;
        }
    }
    if (rc == DM_OK && best_i >= 0) {
        char pol[128];
        printf("  best: %s, %.3f %s\n", dm_tune_policy_str(&k->instances[best_i].policy, pol, sizeof pol), best, unit_label);
    }
    k->bench_destroy(state);
    return rc;
}

#if DM_HAVE_CUDA
/* CUB's segmented sort and radix sort on the same pairs (device-resident). */
static int bench_sorts(json_t *res, size_t n, int repeats)
{
    uint64_t *off = dm_malloc(8 * (n + 1));
    uint32_t *k = dm_malloc(4 * n);
    float *v = dm_malloc(4 * n);
    if (!off || !k || !v) return DM_ERR_NOMEM;
    size_t n_seg = 0;
    dm_segsort_bench_lengths(off, n, 7, &n_seg);
    uint64_t s = 3;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        k[i] = (uint32_t)(s >> 44);
        v[i] = (float)i;
    }
    void *dk = NULL, *dv = NULL, *dko = NULL, *dvo = NULL, *doff = NULL, *temp = NULL;
    double *t = dm_malloc(sizeof(double) * (size_t)repeats);
    int rc = t ? dm_device_alloc(&dk, 4 * n) : DM_ERR_NOMEM;
    if (rc == DM_OK) rc = dm_device_alloc(&dv, 4 * n);
    if (rc == DM_OK) rc = dm_device_alloc(&dko, 4 * n);
    if (rc == DM_OK) rc = dm_device_alloc(&dvo, 4 * n);
    if (rc == DM_OK) rc = dm_device_alloc(&doff, 8 * (n_seg + 1));
    if (rc == DM_OK && (cudaMemcpy(dk, k, 4 * n, cudaMemcpyHostToDevice) != cudaSuccess ||
                        cudaMemcpy(dv, v, 4 * n, cudaMemcpyHostToDevice) != cudaSuccess ||
                        cudaMemcpy(doff, off, 8 * (n_seg + 1), cudaMemcpyHostToDevice) != cudaSuccess))
        rc = DM_ERR(DM_ERR_CUDA, "bench: upload failed");
    struct {
        const char *name;
        int kind; /* 0 CUB segmented, 1 bitonic hybrid (tuner's/forced), 2 tfidf's row sort, 3 radix sort */
    } runs[] = {{"cub_segmented_sort", 0},
                {"bitonic_hybrid_default", 1},
                {"tfidf_row_sort_u32", 2},
                {"cub_radix_sort_pairs", 3}};
    const int n_runs = 4;
    const double radix_ceiling = 53.5; /* Gkeys/s, CUB radix sort of 2^28 keys on one H200 (RESULTS.md) */
    double rate[4] = {0, 0, 0, 0};
    printf("\nsorting %zu pairs in %zu rows (mean %.1f per row); tfidf's row sort uses %s\n", n, n_seg,
           (double)n / (double)n_seg, dm_segsort_uses_bitonic() ? "the bitonic hybrid" : "CUB's segmented sort");
    printf("  %-30s %10s %10s %10s %12s %12s\n", "sort", "ms", "Gkeys/s", "x CUB seg", "of radix", "of 53.5 G/s");
    for (int r = 0; r < n_runs && rc == DM_OK; r++) {
        size_t tb = 0;
        for (int call = 0; call < 2 + repeats && rc == DM_OK; call++) {
            /* call 0: the scratch size; 1: warm-up; then the timed repeats */
            if (call == 1 && (rc = dm_device_alloc(&temp, tb ? tb : 1)) != DM_OK) break;
            void *tp = call == 0 ? NULL : temp;
            double t0 = dm_wtime();
            if (runs[r].kind == 0) rc = dm_segsort_cub_cuda(tp, &tb, dko, dvo, dk, dv, n, doff, n_seg, NULL);
            else if (runs[r].kind == 1) rc = dm_segsort_bitonic_cuda(tp, &tb, dko, dvo, dk, dv, n, doff, n_seg, NULL);
            else if (runs[r].kind == 2)
                rc = dm_segsort_pairs_u32_cuda(tp, &tb, dko, (uint32_t *)dvo, dk, (const uint32_t *)dv, n, doff, n_seg, NULL);
            else rc = dm_sort_pairs_u32_cuda(tp, &tb, dko, (uint32_t *)dvo, dk, (const uint32_t *)dv, n, 0, 32, NULL);
            if (rc == DM_OK && call > 0) rc = dm_device_sync();
            if (call >= 2) t[call - 2] = dm_wtime() - t0;
        }
        if (rc == DM_OK) {
            qsort(t, (size_t)repeats, sizeof *t, cmp_double);
            double sec = t[repeats / 2];
            rate[r] = (double)n / sec / 1e9;
        }
        dm_device_free(temp);
        temp = NULL;
    }
    for (int r = 0; r < n_runs && rc == DM_OK; r++) {
        double sec = (double)n / rate[r] / 1e9;
        printf("  %-30s %10.3f %10.2f %9.2fx %11.1f%% %11.1f%%\n", runs[r].name, sec * 1e3, rate[r], rate[r] / rate[0],
               100 * rate[r] / rate[3], 100 * rate[r] / radix_ceiling);
        json_t *o = json_object();
        json_object_set_new(o, "sort", json_string(runs[r].name));
        json_object_set_new(o, "pairs", json_integer((json_int_t)n));
        json_object_set_new(o, "rows", json_integer((json_int_t)n_seg));
        json_object_set_new(o, "seconds", json_real(sec));
        json_object_set_new(o, "gkeys_per_second", json_real(rate[r]));
        json_object_set_new(o, "ratio_to_cub_segmented", json_real(rate[r] / rate[0]));
        json_object_set_new(o, "ratio_to_radix_same_run", json_real(rate[r] / rate[3]));
        json_object_set_new(o, "ratio_to_radix_ceiling_53_5", json_real(rate[r] / radix_ceiling));
        json_array_append_new(res, o);
    }
    if (rc == DM_OK)
        printf("  (radix sort ignores the rows: the rate of one sort of all pairs, the ceiling a segmented sort aims at;\n"
               "   53.5 Gkeys/s is CUB radix sort of 2^28 keys on this GPU, bench/RESULTS.md)\n");
    dm_free(t);
    dm_device_free(dk);
    dm_device_free(dv);
    dm_device_free(dko);
    dm_device_free(dvo);
    dm_device_free(doff);
    dm_free(off);
    dm_free(k);
    dm_free(v);
    return rc;
}
#endif

/* Decompresses the corpus' *.gz files once into work/base and makes copies until min_bytes: each
 * copy is a directory of its own holding a symbolic link per file (the reader walks a directory
 * only once, so copies that were links to one directory would be read once). *copy_bytes gets
 * the bytes of one copy, *n_copies the number of copies. */
static int prepare(char *out, size_t cap, size_t *copy_bytes, size_t *n_copies, const char *src, int format,
                   const char *work, size_t min_bytes)
{
    char base[4096];
    if (snprintf(base, sizeof base, "%s/base", work) >= (int)sizeof base)
        return DM_ERR(DM_ERR_INVALID_ARG, "%s: path too long", work);
    DM_TRY(dm_mkdirs(base));
    dm_reader_options ro = DM_READER_OPTIONS_INIT;
    ro.format = format;
    dm_pp_stats st;
    memset(&st, 0, sizeof st);
    dm_pp_file_list fl;
    DM_TRY(dm_pp_list_files(&fl, src, &ro, &st));
    size_t total = 0;
    int rc = DM_OK;
    char **names = dm_calloc(fl.n ? fl.n : 1, sizeof(char *));
    if (!names) rc = DM_ERR_NOMEM;
    for (size_t i = 0; i < fl.n && rc == DM_OK; i++) {
        if (strchr(fl.files[i].rel, '/')) {
            rc = DM_ERR(DM_ERR_INVALID_ARG, "%s: corpus in subfolders (%s): give a flat folder", src, fl.files[i].rel);
            break;
        }
        char dst[4400];
        snprintf(dst, sizeof dst, "%s/%s", base, fl.files[i].rel);
        size_t l = strlen(dst);
        if (l > 3 && strcmp(dst + l - 3, ".gz") == 0) dst[l - 3] = 0;
        names[i] = dm_strdup(strrchr(dst, '/') + 1);
        if (!names[i]) rc = DM_ERR_NOMEM;
        struct stat sb;
        if (rc == DM_OK && stat(dst, &sb) != 0) {
            /* through a temporary name: a run killed here leaves no cut-short file for the next */
            rc = bench_gunzip_to(fl.files[i].path, dst);
            if (rc == DM_OK && stat(dst, &sb) != 0) rc = DM_ERR(DM_ERR_IO, "cannot stat %s", dst);
        }
        if (rc == DM_OK) total += (size_t)sb.st_size;
    }
    size_t n_files = fl.n;
    dm_pp_file_list_free(&fl);
    size_t copies = total ? (min_bytes + total - 1) / total : 1;
    if (copies < 1) copies = 1;
    *copy_bytes = total;
    *n_copies = copies;
    if (rc == DM_OK && snprintf(out, cap, "%s/copies-%zu", work, copies) >= (int)cap)
        rc = DM_ERR(DM_ERR_INVALID_ARG, "%s: path too long", work);
    if (rc == DM_OK) rc = bench_remove_tree(out);
    if (rc == DM_OK) rc = dm_mkdirs(out);
    for (size_t c = 0; c < copies && rc == DM_OK; c++) {
        char dir[4400];
        if (snprintf(dir, sizeof dir, "%s/c%05zu", out, c) >= (int)sizeof dir) {
            rc = DM_ERR(DM_ERR_INVALID_ARG, "%s: path too long", out);
            break;
        }
        if (mkdir(dir, 0755) != 0) rc = DM_ERR(DM_ERR_IO, "%s: mkdir failed: %s", dir, strerror(errno));
        for (size_t i = 0; i < n_files && rc == DM_OK; i++) {
            char target[8400], link[8400];
            snprintf(target, sizeof target, "%s/%s", base, names[i]);
            snprintf(link, sizeof link, "%s/%s", dir, names[i]);
            if (symlink(target, link) != 0) rc = DM_ERR(DM_ERR_IO, "%s: symlink failed: %s", link, strerror(errno));
        }
    }
    for (size_t i = 0; names && i < n_files; i++) dm_free(names[i]);
    dm_free(names);
    return rc;
}

/* scikit-learn's TfidfVectorizer on the same corpus folder (files in sorted order, stopping after
 * max_bytes of files when max_bytes > 0): GB/s of raw file bytes; *bytes gets the bytes read; why
 * gets the reason when it did not run. */
static double run_sklearn(const char *script, const char *corpus, size_t max_bytes, double *bytes, int *ok, char *why,
                          size_t wlen)
{
    char res[256], mb[32];
    double v = 0;
    *bytes = 0;
    snprintf(mb, sizeof mb, "%zu", max_bytes);
    *ok = bench_python(script, corpus, mb, res, sizeof res, why, wlen) == 0 && sscanf(res, "%lf %lf", &v, bytes) == 2 &&
          v > 0;
    if (!*ok && !why[0]) snprintf(why, wlen, "no rate from %.900s", script);
    return *ok ? v : 0;
}

/* The stages of one vectorize run, from the named timers of tfidf (this rank's seconds). Level 0
 * stages add up to the wall time (the rest is "other"); level 1 are parts of the stage above. */
static const struct {
    const char *timer, *label;
    int level;
} g_stages[] = {
    {"tfidf.preprocess", "preprocess (dm_preprocess wall)", 0},
    {"tfidf.pp.read", "read (reader thread)", 1},
    {"tfidf.pp.normalize", "normalize (reader thread)", 1},
    {"tfidf.pp.take", "batch assembly (calling thread)", 1},
    {"tfidf.pp.h2d", "H2D (worker)", 1},
    {"tfidf.pp.kernels", "tokenize+stem kernels (worker)", 1},
    {"tfidf.pp.d2h", "D2H (worker)", 1},
    {"tfidf.pp.build", "token stream build (worker)", 1},
    {"tfidf.pp.prefault", "stream page prefault (helper threads)", 1},
    {"tfidf.read", "by-bytes reader (collisions)", 0},
    {"tfidf.count", "token hash -> local term, TF counting", 0},
    {"tfidf.count.h2d", "H2D", 1},
    {"tfidf.count.map", "token hash -> local term", 1},
    {"tfidf.count.tables", "per-document tables", 1},
    {"tfidf.count.compact", "compaction", 1},
    {"tfidf.count.sort", "row sort", 1},
    {"tfidf.count.d2h", "D2H", 1},
    {"tfidf.df", "local df", 0},
    {"tfidf.vocab", "vocabulary / df", 0},
    {"tfidf.vocab.exchange", "df exchange (Alltoallv, Allgatherv)", 1},
    {"tfidf.vocab.merge", "owner merge", 1},
    {"tfidf.vocab.lookup", "local term -> id", 1},
    {"tfidf.weigh", "weights", 0},
    {"tfidf.weigh.check", "input check (host)", 1},
    {"tfidf.weigh.prefault", "output pages populated (threads)", 1},
    {"tfidf.weigh.h2d", "H2D", 1},
    {"tfidf.weigh.kernels", "kernels", 1},
    {"tfidf.weigh.sort", "row sort", 1},
    {"tfidf.weigh.d2h", "D2H", 1},
    {"tfidf.rows", "ids and labels", 0},
    {"bench.write", "write .dmv", 0},
};

static void print_stages(json_t *o, double wall, double gb)
{
    json_t *st = json_object();
    double top = 0, worst = 0;
    const char *worst_name = "";
    printf("    %-40s %10s %7s %10s\n", "stage", "s", "% wall", "text GB/s");
    for (size_t i = 0; i < sizeof g_stages / sizeof g_stages[0]; i++) {
        double t = dm_timer_get(g_stages[i].timer);
        if (t <= 0) continue;
        printf("    %s%-*s %10.3f %6.1f%% %10.3f\n", g_stages[i].level ? "  " : "", g_stages[i].level ? 38 : 40,
               g_stages[i].label, t, 100 * t / wall, gb / t);
        json_object_set_new(st, g_stages[i].timer, json_real(t));
        if (g_stages[i].level == 0) {
            top += t;
            if (t > worst && strcmp(g_stages[i].timer, "tfidf.preprocess") != 0) {
                worst = t;
                worst_name = g_stages[i].label;
            }
        }
    }
    printf("    %-40s %10.3f %6.1f%%\n", "other (allocation, agreement, host glue)", wall - top, 100 * (wall - top) / wall);
    printf("    limiting tfidf-owned stage: %s (%.3f s, %.1f%% of the wall)\n", worst_name, worst, 100 * worst / wall);
    json_object_set_new(st, "other", json_real(wall - top));
    json_object_set_new(o, "stages", st);
    json_object_set_new(o, "limiting_tfidf_stage", json_string(worst_name));
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"corpus", required_argument, 0, 'c'}, {"format", required_argument, 0, 'f'},
        {"min-bytes", required_argument, 0, 'm'}, {"work", required_argument, 0, 'w'},
        {"backend", required_argument, 0, 'b'}, {"tokens", required_argument, 0, 't'},
        {"items", required_argument, 0, 'i'},   {"repeats", required_argument, 0, 'r'},
        {"json", required_argument, 0, 'j'},    {"no-sklearn", no_argument, 0, 's'},
        {"skip-e2e", no_argument, 0, 'e'},      {"help", no_argument, 0, 'h'},
        {"sklearn-max-bytes", required_argument, 0, 'k'}, {"e2e-only", no_argument, 0, 'E'},
        {"e2e-repeats", required_argument, 0, 'R'}, {"rows", required_argument, 0, 'H'},
        {0, 0, 0, 0}};
    const char *corpus = NULL, *work = "/tmp/docmine-bench-tfidf", *json_path = NULL, *backend = NULL;
    int format = DM_PP_FORMAT_REUTERS, repeats = 5, sklearn = 1, e2e = 1, kernels = 1, e2e_rep = 2, c, li, bad = 0;
    int rows_first = 0, rows_last = 0; /* host_rows values of the CUDA runs */
    size_t sk_max = 0;
    size_t min_bytes = (size_t)1 << 30, n_tok = (size_t)1 << 26, n_items = (size_t)1 << 26;
    bench_init("bench_tfidf", argc, argv, 1);
    while (!bad && (li = -1, c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
        char on[64];
        snprintf(on, sizeof on, "--%s", li >= 0 ? opts[li].name : "?");
        switch (c) {
        case 'c': corpus = optarg; break;
        case 'f':
            if (dm_pp_format_parse(optarg, &format) != DM_OK) return bench_usage_error("--format: %s", dm_error_message());
            break;
        case 'm': bad = bench_parse_size(on, optarg, 0, SIZE_MAX, &min_bytes); break;
        case 'w': work = optarg; break;
        case 'b':
            if (strcmp(optarg, "cpu") && strcmp(optarg, "cuda") && strcmp(optarg, "both"))
                return bench_usage_error("--backend: '%s' is not cpu, cuda or both", optarg);
            backend = optarg;
            break;
        case 't': bad = bench_parse_size(on, optarg, 1, (size_t)1 << 40, &n_tok); break;
        case 'i': bad = bench_parse_size(on, optarg, 1, (size_t)1 << 40, &n_items); break;
        case 'r': bad = bench_parse_int(on, optarg, 1, 1000000, &repeats); break;
        case 'j': json_path = optarg; break;
        case 's': sklearn = 0; break;
        case 'e': e2e = 0; break;
        case 'E': kernels = 0; break;
        case 'R': bad = bench_parse_int(on, optarg, 1, 1000000, &e2e_rep); break;
        case 'k': bad = bench_parse_size(on, optarg, 0, SIZE_MAX, &sk_max); break;
        case 'H':
            if (strcmp(optarg, "device") != 0 && strcmp(optarg, "host") != 0 && strcmp(optarg, "both") != 0)
                return bench_usage_error("--rows: '%s' is not device, host or both", optarg);
            rows_first = strcmp(optarg, "host") == 0;
            rows_last = strcmp(optarg, "device") != 0;
            break;
        case 'h': usage(); return 0;
        default: /* getopt_long named it */
            fprintf(stderr, "bench_tfidf: see bench_tfidf --help\n");
            return BENCH_EXIT_USAGE;
        }
    }
    if (bad) return BENCH_EXIT_USAGE;
    if (optind < argc) return bench_usage_error("unexpected argument '%s'", argv[optind]);
    if (!e2e && !kernels) return bench_usage_error("--skip-e2e and --e2e-only: nothing left to run");
    char buf[4096], dir[4400];
    if (e2e) {
        int default_corpus = !corpus;
        if (!corpus) corpus = bench_dataset("reuters21578", buf, sizeof buf);
        if (bench_check_corpus(corpus, default_corpus) != 0) return BENCH_EXIT_RUNTIME;
    }
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int nranks = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (nranks > 1) { /* every rank would run the whole benchmark and rebuild the same --work folder */
        bench_init("bench_tfidf", argc, argv, rank == 0); /* one message, rank 0's */
        bench_usage_error("runs as one process, not %d ranks", nranks);
        MPI_Finalize();
        return BENCH_EXIT_USAGE;
    }
    dm_ctx_options co = DM_CTX_OPTIONS_INIT;
    co.quiet = 1;
    dm_ctx ctx;
    int rc = dm_ctx_init(&ctx, &co);
    if (rc == DM_OK) rc = dm_tune_register_all();
    /* fixed launch shapes unless DOCMINE_TUNE says otherwise: every instance is measured here */
    if (!getenv("DOCMINE_TUNE")) dm_tune_set_mode(DM_TUNE_OFF);
    int gpu = rc == DM_OK && ctx.backend == DM_BACKEND_CUDA;
    if (rc == DM_OK && !gpu && ((backend && strcmp(backend, "cuda") == 0) || !e2e)) {
        fprintf(stderr, "bench_tfidf: %s: no GPU (skipped)\n", e2e ? "--backend cuda" : "--skip-e2e (the kernel tables)");
        dm_ctx_free(&ctx);
        MPI_Finalize();
        return BENCH_EXIT_SKIP;
    }
    json_t *root = json_object(), *kern = json_array(), *sorts = json_array(), *e2e_res = json_array();
    if (!backend) backend = gpu ? "cuda" : "cpu"; /* the CPU on >= 1 GB is slow: only when asked */
    json_object_set_new(root, "device", json_string(gpu ? ctx.dev.name : "none"));
    bench_json_meta(root, gpu ? ctx.dev.name : NULL);
    if (rc == DM_OK) bench_print_header(gpu ? ctx.dev.name : NULL);
    json_object_set(root, "kernels", kern);
    json_object_set(root, "sorts", sorts);
    json_object_set(root, "vectorize", e2e_res);
    /* the JSON is rewritten after every section, so a run cut short keeps what it measured */
#define DM_FLUSH_JSON()                                                                            \
    do {                                                                                           \
        if (json_path && rc == DM_OK) rc = bench_write_json(json_path, root, JSON_INDENT(2));      \
    } while (0)
    if (rc == DM_OK) printf("bench_tfidf: %s\n", gpu ? ctx.dev.name : "no GPU: CPU backend only");
    if (rc == DM_OK && gpu && kernels) {
        rc = bench_kernel(kern, "tfidf.tf_count_atomic", n_tok, repeats, "G inserts/s");
        DM_FLUSH_JSON();
        if (rc == DM_OK) rc = bench_kernel(kern, "tfidf.tf_count_noatomic", n_tok, repeats, "G inserts/s");
        DM_FLUSH_JSON();
        if (rc == DM_OK) rc = bench_kernel(kern, "tfidf.vocab_merge", n_tok / 16, repeats, "G terms/s");
        if (rc == DM_OK) rc = bench_kernel(kern, "sorting.bitonic_segsort", n_items, repeats, "G items/s");
        DM_FLUSH_JSON();
#if DM_HAVE_CUDA
        if (rc == DM_OK) rc = bench_sorts(sorts, n_items, repeats);
        DM_FLUSH_JSON();
#endif
    }
    /* end to end */
    double sk_gbps = 0, sk_bytes = 0;
    int sk_ok = 0;
    char sk_why[1024] = "";
    if (rc == DM_OK && e2e) {
        size_t copy_bytes = 0, copies = 0;
        rc = prepare(dir, sizeof dir, &copy_bytes, &copies, corpus, format, work, min_bytes);
        if (rc == DM_OK && sklearn) {
            char script[4200];
            bench_source_file("bench/tfidf/sklearn_tfidf.py", script, sizeof script);
            printf("\nscikit-learn TfidfVectorizer on %s (%s)...\n", dir,
                   sk_max ? "a prefix of the files, --sklearn-max-bytes" : "the whole corpus");
            fflush(stdout);
            sk_gbps = run_sklearn(script, dir, sk_max, &sk_bytes, &sk_ok, sk_why, sizeof sk_why);
            if (!sk_ok) printf("scikit-learn comparison skipped: %s\n", sk_why);
        }
        printf("\nvectorize end to end on %s: %zu copies of %zu bytes (>= %zu bytes)%s\n", dir, copies, copy_bytes,
               min_bytes, sk_ok ? "" : " (scikit-learn not measured)");
        if (sk_ok)
            printf("  scikit-learn TfidfVectorizer (one core, read + parse + fit_transform) on %.3f GB of the same "
                   "files: %.4f GB/s\n", sk_bytes / 1e9, sk_gbps);
        for (int b = 0; b < 2 && rc == DM_OK; b++) {
            int be = b == 0 ? DM_BACKEND_CUDA : DM_BACKEND_CPU;
            if (be == DM_BACKEND_CUDA && (!gpu || (strcmp(backend, "cuda") != 0 && strcmp(backend, "both") != 0))) continue;
            if (be == DM_BACKEND_CPU && strcmp(backend, "cpu") != 0 && strcmp(backend, "both") != 0) continue;
            for (int vr = 0; vr < 2 * (rows_last - rows_first + 1) && rc == DM_OK; vr++) {
                int v = DM_TF_ATOMIC + vr / (rows_last - rows_first + 1), host_rows = rows_first + vr % (rows_last - rows_first + 1);
                if (be == DM_BACKEND_CPU && (v != DM_TF_ATOMIC || host_rows != rows_first)) continue;
                double best_wall = 0, best_vec = 0, best_gb = 0;
                for (int rep = 0; rep < e2e_rep && rc == DM_OK; rep++) {
                    dm_preprocess_options pp = DM_PREPROCESS_OPTIONS_INIT;
                    pp.reader.format = format;
                    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
                    o.backend = be;
                    o.tf_variant = v;
                    o.host_rows = host_rows;
                    dm_vectors vec;
                    dm_tfidf_stats st;
                    dm_pp_stats ps;
                    char out[4500];
                    snprintf(out, sizeof out, "%s/bench.dmv", work);
                    dm_timers_reset();
                    double t0 = dm_wtime();
                    rc = dm_vectorize_corpus(&vec, NULL, &st, &ps, &ctx, dir, &pp, &o, NULL, NULL);
                    double t1 = dm_wtime();
                    dm_timer_start("bench.write");
                    if (rc == DM_OK) rc = dm_vectors_write(&vec, out, &ctx);
                    dm_timer_stop("bench.write");
                    double t2 = dm_wtime();
                    if (rc == DM_OK) dm_vectors_free(&vec);
                    if (rc != DM_OK) break;
                    if (ps.bytes_read != (uint64_t)copies * copy_bytes) {
                        rc = DM_ERR(DM_ERR_IO, "%s: read %llu bytes, expected %zu x %zu (%llu files skipped)", dir,
                                    (unsigned long long)ps.bytes_read, copies, copy_bytes,
                                    (unsigned long long)dm_pp_stats_skipped_total(&ps));
                        break;
                    }
                    double gb = (double)ps.bytes_read / 1e9, gbps = gb / (t2 - t0);
                    char label[64];
                    snprintf(label, sizeof label, "%s%s%s%s", dm_backend_name(be), be == DM_BACKEND_CUDA ? " " : "",
                             be == DM_BACKEND_CUDA ? dm_tf_variant_name(v) : "",
                             be == DM_BACKEND_CUDA && host_rows ? " host-rows" : "");
                    printf("\n  %-22s %5s %9s %8s %8s %10s %10s %10s %10s %11s\n", "backend", "run", "text GB",
                           "wall s", "GB/s", "vectors s", "in-mem GB/s", "docs", "nnz", "vs sklearn");
                    printf("  %-22s %5d %9.3f %8.2f %8.3f %10.2f %10.3f %10llu %10llu", label, rep + 1, gb, t2 - t0,
                           gbps, t1 - t0, gb / (t1 - t0), (unsigned long long)st.docs, (unsigned long long)st.nnz);
                    if (sk_ok) printf(" %11.1fx", gbps / sk_gbps);
                    printf("\n");
                    json_t *o2 = json_object();
                    json_object_set_new(o2, "backend", json_string(label));
                    json_object_set_new(o2, "run", json_integer(rep + 1));
                    json_object_set_new(o2, "in_memory_gb_per_second", json_real(gb / (t1 - t0)));
                    json_object_set_new(o2, "text_bytes", json_integer((json_int_t)ps.bytes_read));
                    json_object_set_new(o2, "copies", json_integer((json_int_t)copies));
                    json_object_set_new(o2, "docs", json_integer((json_int_t)st.docs));
                    json_object_set_new(o2, "tokens", json_integer((json_int_t)st.tokens));
                    json_object_set_new(o2, "terms", json_integer((json_int_t)st.terms));
                    json_object_set_new(o2, "nnz", json_integer((json_int_t)st.nnz));
                    json_object_set_new(o2, "table_rebuilds", json_integer((json_int_t)st.table_rebuilds));
                    json_object_set_new(o2, "vectorize_seconds", json_real(t1 - t0));
                    json_object_set_new(o2, "write_seconds", json_real(t2 - t1));
                    json_object_set_new(o2, "gb_per_second", json_real(gbps));
                    if (sk_ok) json_object_set_new(o2, "ratio_to_sklearn", json_real(gbps / sk_gbps));
                    print_stages(o2, t2 - t0, gb);
                    json_array_append_new(e2e_res, o2);
                    DM_FLUSH_JSON();
                    if (rep == 0 || t2 - t0 < best_wall) best_wall = t2 - t0;
                    if (rep == 0 || t1 - t0 < best_vec) best_vec = t1 - t0;
                    best_gb = gb;
                }
                if (rc == DM_OK && e2e_rep > 1)
                    printf("\n  %s, best of %d runs: with the .dmv write %.3f GB/s (%.2f s); vectors in memory "
                           "%.3f GB/s (%.2f s); target 2 GB/s\n",
                           be == DM_BACKEND_CUDA ? (host_rows ? (v == DM_TF_ATOMIC ? "atomic, host rows" : "noatomic, host rows")
                                                              : dm_tf_variant_name(v))
                                                 : "cpu",
                           e2e_rep, best_gb / best_wall,
                           best_wall, best_gb / best_vec, best_vec);
            }
        }
    }
    json_decref(kern);
    json_decref(sorts);
    json_decref(e2e_res);
    if (sk_ok) {
        json_object_set_new(root, "sklearn_gb_per_second", json_real(sk_gbps));
        json_object_set_new(root, "sklearn_text_bytes", json_real(sk_bytes));
    } else if (sk_why[0]) json_object_set_new(root, "sklearn_skipped", json_string(sk_why));
    if (rc == DM_OK && json_path) rc = bench_write_json(json_path, root, JSON_INDENT(2));
    json_decref(root);
    if (rc != DM_OK) fprintf(stderr, "bench_tfidf: %s\n", dm_error_message());
    dm_ctx_free(&ctx);
    MPI_Finalize();
    return rc == DM_OK ? 0 : 1;
}
