/* Benchmark of streamclust: Rodinia's default run `10 20 256 65536 65536 1000`, N = 1048576 with
 * CHUNKSIZE 65536 and 262144, and the rake sweep of the gain kernel (time and work-buffer bytes for
 * every compiled instance against the tuner's pick). Prints a table and writes JSON.
 * Reference: Rodinia streamcluster (4.13 s on one H200 for the default run, chunk cost ~2.44e6).
 * usage: bench_streamclust [--backend cpu|cuda|both] [--json FILE] [--quick] [--no-large]
 *                          [--no-sweep]   (usage() below, bench/streamclust/README.md) */
#include <jansson.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/common/bench_util.h"
#include "common/device.h"
#include "common/status.h"
#include "common/timer.h"
#include "streamclust/streamclust.h"

typedef struct run_row {
    char name[96];
    const char *backend;
    long kmin, kmax, dim, n, chunk, clustersize;
    double seconds, gain_s, speedy_s, fl_s, total_cost, chunk_cost;
    long k, gain_calls;
    size_t work_bytes;
    char policy[96];
    int ok;
} run_row;

static int one_run(run_row *row, int backend, long kmin, long kmax, int dim, long n, long chunk,
                   long clustersize, const char *name)
{
    memset(row, 0, sizeof *row);
    snprintf(row->name, sizeof row->name, "%s", name);
    row->backend = backend == DM_SC_CUDA ? "cuda" : "cpu";
    row->kmin = kmin;
    row->kmax = kmax;
    row->dim = dim;
    row->n = n;
    row->chunk = chunk;
    row->clustersize = clustersize;
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.kmin = kmin;
    o.kmax = kmax;
    o.dim = dim;
    o.n = n;
    o.chunksize = chunk;
    o.clustersize = clustersize;
    o.backend = backend;
    dm_timers_reset();
    dm_sc_result r;
    double t0 = MPI_Wtime();
    int rc = dm_sc_run(&r, &o, NULL);
    row->seconds = MPI_Wtime() - t0;
    if (rc != DM_OK) {
        fprintf(stderr, "%s (%s): %s\n", name, row->backend, dm_error_message());
        return rc;
    }
    row->ok = 1;
    row->gain_s = dm_timer_get("streamclust.gain");
    row->speedy_s = dm_timer_get("streamclust.speedy");
    row->fl_s = dm_timer_get("streamclust.fl");
    row->total_cost = r.total_cost;
    row->chunk_cost = r.chunk_cost_first;
    row->k = r.k;
    row->gain_calls = r.stats_all.gain_calls;
    row->work_bytes = r.stats.work_bytes;
    snprintf(row->policy, sizeof row->policy, "%s", r.stats.gain_policy);
    dm_sc_result_free(&r);
    return DM_OK;
}

static void print_row(const run_row *r)
{
    printf("%-28s %-5s %8ld %7ld %8.3f %8.3f %8.3f %4ld %12.6g %12.6g %7ld %10zu  %s\n", r->name,
           r->backend, r->n, r->chunk, r->seconds, r->gain_s, r->speedy_s, r->k, r->chunk_cost,
           r->total_cost, r->gain_calls, r->work_bytes, r->policy);
}

static json_t *row_json(const run_row *r)
{
    return json_pack("{s:s,s:s,s:[I,I,I,I,I,I],s:f,s:f,s:f,s:f,s:I,s:f,s:f,s:I,s:I,s:s,s:b}", "name",
                     r->name, "backend", r->backend, "args", (json_int_t)r->kmin,
                     (json_int_t)r->kmax, (json_int_t)r->dim, (json_int_t)r->n,
                     (json_int_t)r->chunk, (json_int_t)r->clustersize, "seconds", r->seconds,
                     "gain_seconds", r->gain_s, "speedy_seconds", r->speedy_s, "fl_seconds",
                     r->fl_s, "k", (json_int_t)r->k, "first_chunk_cost", r->chunk_cost,
                     "total_cost", r->total_cost, "gain_calls", (json_int_t)r->gain_calls,
                     "work_buffer_bytes", (json_int_t)r->work_bytes, "gain_policy", r->policy,
                     "ok", r->ok);
}

static void usage(void)
{
    printf("usage: bench_streamclust [--backend cpu|cuda|both] [--json FILE] [--quick] [--no-large] [--no-sweep]\n"
           "Rodinia's default run (10 20 256 65536 65536 1000) on each backend, N = 1048576 with chunks of\n"
           "65536 and 262144 (CUDA; the CPU only with --quick), and the rake sweep of the gain kernel\n"
           "(CUDA): a table (times in s, work buffer in bytes) and JSON.\n"
           "  --backend B   cpu, cuda or both (default both: the CUDA runs when a GPU is present;\n"
           "                --backend cuda without a GPU exits 77)\n"
           "  --json FILE   the results as JSON (default bench_streamclust.json in the current folder;\n"
           "                written atomically: a temporary name, then a rename)\n"
           "  --quick       every run small (N = 8192, DIM = 32): a smoke test without a GPU\n"
           "  --no-large    without the N = 1048576 runs\n"
           "  --no-sweep    without the rake sweep\n"
           "The output starts with the command line, the GPU and the date (what bench/RESULTS.md records).\n"
           "Exit codes: 0 ok, 1 a run failed or the JSON could not be written, 2 usage error, 77 no GPU.\n");
}

static int run(int argc, char **argv)
{
    const char *json_path = "bench_streamclust.json", *which = "both";
    int quick = 0, large = 1, sweep = 1, failed = 0;
    bench_init("bench_streamclust", argc, argv, 1);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage();
            return 0;
        } else if (!strcmp(argv[i], "--json") || !strcmp(argv[i], "--backend")) {
            if (i + 1 >= argc) return bench_usage_error("%s needs a value", argv[i]);
            if (!strcmp(argv[i], "--json")) json_path = argv[++i];
            else which = argv[++i];
        } else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--no-large")) large = 0;
        else if (!strcmp(argv[i], "--no-sweep")) sweep = 0;
        else return bench_usage_error("unknown argument '%s'", argv[i]);
    }
    if (strcmp(which, "cpu") && strcmp(which, "cuda") && strcmp(which, "both"))
        return bench_usage_error("--backend: '%s' is not cpu, cuda or both", which);
    int backends[2], nb = 0;
    if (!strcmp(which, "cpu") || !strcmp(which, "both")) backends[nb++] = DM_SC_CPU;
    if ((!strcmp(which, "cuda") || !strcmp(which, "both")) && dm_sc_cuda_gain_instances() > 0)
        backends[nb++] = DM_SC_CUDA;
    if (nb == 0) {
        fprintf(stderr, "bench_streamclust: --backend cuda: no GPU (skipped)\n");
        return BENCH_EXIT_SKIP;
    }
    dm_device_info dev;
    memset(&dev, 0, sizeof dev);
    if (backends[nb - 1] != DM_SC_CUDA || dm_device_query(0, &dev) != DM_OK) dev.name[0] = '\0';
    bench_print_header(dev.name);
    /* --quick: a small version of every run, for a smoke test without a GPU */
    const long n_def = quick ? 8192 : 65536, dim = quick ? 32 : 256;
    /* CUDA context creation, module loading and the tuner's first selection (which may tune the
     * gain kernel for the workload class of each chunk size) are not part of any timed run: warm
     * up once per chunk size with cheap 8-dimensional runs */
    for (int b = 0; b < nb; b++) {
        if (backends[b] != DM_SC_CUDA) continue;
        const long warm_chunks[3] = {quick ? 8192 : 65536, quick ? 32768 : 262144, 4096};
        for (int c = 0; c < 3; c++) {
            run_row warm;
            if (one_run(&warm, DM_SC_CUDA, 3, 5, 8, warm_chunks[c], warm_chunks[c], 100, "warm-up") != DM_OK) {
                nb = b; /* no CUDA runs: the failure is the result (exit 1) */
                failed = 1;
                break;
            }
        }
    }
    json_t *runs = json_array();
    printf("%-28s %-5s %8s %7s %8s %8s %8s %4s %12s %12s %7s %10s  %s\n", "run", "back", "N", "chunk",
           "time_s", "gain_s", "speedy_s", "k", "chunk_cost", "total_cost", "gains", "work_B",
           "gain policy");
    run_row row;
    double cpu_cost = 0;
    for (int b = 0; b < nb; b++) {
        if (one_run(&row, backends[b], 10, 20, (int)dim, n_def, n_def, 1000, "rodinia_default") == DM_OK) {
            print_row(&row);
            if (backends[b] == DM_SC_CPU) cpu_cost = row.chunk_cost;
            else if (cpu_cost > 0)
                printf("  cuda vs cpu chunk cost: %+.3e relative\n", (row.chunk_cost - cpu_cost) / cpu_cost);
        } else failed = 1;
        json_array_append_new(runs, row_json(&row));
    }
    if (large) {
        const long nl = quick ? 65536 : 1048576;
        const long chunks[2] = {quick ? 8192 : 65536, quick ? 32768 : 262144};
        for (int b = 0; b < nb; b++) {
            if (backends[b] == DM_SC_CPU && !quick) continue; /* minutes on CPU: run with --backend cpu --quick off by hand */
            for (int c = 0; c < 2; c++) {
                char name[64];
                snprintf(name, sizeof name, "large_chunk%ld", chunks[c]);
                if (one_run(&row, backends[b], 10, 20, (int)dim, nl, chunks[c], 1000, name) == DM_OK)
                    print_row(&row);
                else failed = 1;
                json_array_append_new(runs, row_json(&row));
            }
        }
    }
    if (sweep && dm_sc_cuda_gain_instances() > 0 && nb > 0 && backends[nb - 1] == DM_SC_CUDA) {
        printf("\nrake sweep (gain kernel instances on the default run; 'tuner' = dm_tune_select):\n");
        for (int i = -1; i < dm_sc_cuda_gain_instances(); i++) {
            char name[96];
            dm_sc_cuda_gain_instance_name(i, name, sizeof name);
            dm_sc_cuda_force_gain_instance(i);
            if (one_run(&row, DM_SC_CUDA, 10, 20, (int)dim, n_def, n_def, 1000, name) == DM_OK)
                print_row(&row);
            else failed = 1;
            json_t *j = row_json(&row);
            json_object_set_new(j, "sweep_instance", json_integer(i));
            json_array_append_new(runs, j);
        }
        dm_sc_cuda_force_gain_instance(-1);
    }
    json_t *root = json_pack("{s:s,s:o}", "benchmark", "streamclust", "runs", runs);
    bench_json_meta(root, dev.name);
    if (failed) fprintf(stderr, "bench_streamclust: a run failed (its row has \"ok\": false in the JSON)\n");
    if (bench_write_json(json_path, root, JSON_INDENT(2)) != DM_OK) {
        fprintf(stderr, "bench_streamclust: --json: %s\n", dm_error_message());
        failed = 1;
    } else
        printf("\nJSON: %s\n", json_path);
    json_decref(root);
    return failed ? BENCH_EXIT_RUNTIME : 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rc = run(argc, argv);
    MPI_Finalize();
    return rc;
}
