/* `docmine info`: ranks, node-local ranks, the GPU of each rank, library versions and the tuning
 * database; `--bandwidth` times pinned H2D, D2H and device-to-device copies on every rank's GPU.
 * Reference: none. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "apps/commands.h"
#include "common/alloc.h"
#include "common/bandwidth.h"
#include "common/report.h"
#include "common/status.h"
#include "common/tune/tune.h"
#include "common/tune/tune_db.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: docmine info [--bandwidth] [--bytes N] [--repeats N]\n\n"
               "Prints the MPI ranks and nodes, each rank's OpenMP threads and the GPU it is bound to\n"
               "(local_rank %% GPUs), library versions and where the tuning database is.\n\n"
               "  --bandwidth   measure pinned host-to-device, device-to-host and device-to-device\n"
               "                copy bandwidth on every rank's GPU, one rank at a time\n"
               "  --bytes N     bytes per copy (default 1073741824 = 1 GiB)\n"
               "  --repeats N   timed repeats, the median is reported (default 10)\n\n"
               "examples:\n  docmine info\n  mpiexec -n 2 docmine info --bandwidth --report info.json\n");
}

/* The tuning database's path into db and what it holds into state: "not yet written", "N rows",
 * "N rows, M lines rejected: see the warnings", or why it cannot be used (a directory, unreadable,
 * another format version, no path at all). */
static void describe_db(char *db, size_t len, char *state, size_t slen)
{
    struct stat st;
    dm_tune_db t;
    if (dm_tune_db_current_path(db, len) != DM_OK) {
        snprintf(state, slen, "%s: tuning results are not kept", dm_error_message());
        snprintf(db, len, "none");
        dm_error_clear();
        return;
    }
    if (stat(db, &st) != 0 && errno == ENOENT) {
        snprintf(state, slen, "not yet written");
        return;
    }
    dm_tune_db_init(&t);
    if (dm_tune_db_load(&t, db) != DM_OK) {
        snprintf(state, slen, "unusable: %s", dm_error_message());
        dm_error_clear();
    } else if (t.rejected) {
        snprintf(state, slen, "%d row%s, %d line%s rejected: see the warnings", t.n,
                 t.n == 1 ? "" : "s", t.rejected, t.rejected == 1 ? "" : "s");
    } else {
        snprintf(state, slen, "%d row%s", t.n, t.n == 1 ? "" : "s");
    }
    dm_tune_db_free(&t);
}

int dm_cmd_info(dm_app *app, int argc, char **argv)
{
    static const struct option opts[] = {{"bandwidth", no_argument, 0, 'b'}, {"bytes", required_argument, 0, 'n'},
                                         {"repeats", required_argument, 0, 'r'}, {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    dm_ctx *ctx = app->ctx;
    int bandwidth = 0, repeats = 10;
    size_t bytes = (size_t)1 << 30;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'b': bandwidth = 1; break;
        case 'n':
            bytes = strtoull(optarg, &end, 10); /* which takes "-1" as 2^64 - 1: digits only */
            if (*end || bytes == 0 || optarg[strspn(optarg, " \t")] == '-')
                return dm_app_usage_error(app, "info", "invalid --bytes '%s'", optarg);
            break;
        case 'r':
            repeats = (int)strtol(optarg, &end, 10);
            if (*end || repeats < 1 || repeats > 1000)
                return dm_app_usage_error(app, "info", "invalid --repeats '%s' (1..1000)", optarg);
            break;
        case 'h':
            if (ctx->rank == 0) usage(stdout);
            return DM_EXIT_OK;
        default:
            return dm_app_usage_error(app, "info", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return dm_app_usage_error(app, "info", "unexpected argument '%s'", argv[optind]);
    if (bandwidth && ctx->backend != DM_BACKEND_CUDA) {
        dm_error_set(DM_ERR_NO_DEVICE, __FILE__, __LINE__,
                     "--bandwidth needs a GPU (backend is %s: %s)", dm_backend_name(ctx->backend),
                     DM_HAVE_CUDA ? "no GPU visible or --backend cpu" : "built without CUDA");
        return dm_app_fail(app, "info", DM_ERR_NO_DEVICE);
    }

    dm_report rep;
    DM_ASSERT(dm_report_init(&rep, "info", app->argc_all, app->argv_all) == DM_OK);
    json_t *devs = dm_report_devices(ctx);
    int nodes = ctx->local_rank == 0, total_nodes = 0;
    MPI_Allreduce(&nodes, &total_nodes, 1, MPI_INT, MPI_SUM, ctx->world);
    json_t *ver = dm_report_versions();
    if (ctx->rank == 0 && devs) {
        char db[PATH_MAX], dbstate[1200];
        describe_db(db, sizeof db, dbstate, sizeof dbstate);
        printf("docmine %s (git %s)\n", json_string_value(json_object_get(ver, "docmine")),
               json_string_value(json_object_get(ver, "git")));
        printf("MPI      %s\n", json_string_value(json_object_get(ver, "mpi")));
        printf("ranks    %d on %d node(s); backend %s\n", ctx->size, total_nodes, dm_backend_name(ctx->backend));
        printf("CUDA     runtime %s, driver %s\n", dm_device_runtime_version(), dm_device_driver_version());
        printf("libs     utf8proc %s, jansson %s, zlib %s, %s, libpng %s\n",
               json_string_value(json_object_get(ver, "utf8proc")), json_string_value(json_object_get(ver, "jansson")),
               json_string_value(json_object_get(ver, "zlib")), json_string_value(json_object_get(ver, "libarchive")),
               json_string_value(json_object_get(ver, "libpng")));
        printf("tuning   mode %s, database %s (%s)\n", dm_tune_mode_name(dm_tune_get_mode()), db,
               dbstate);
        const char *tun = dm_mem_hugetlb_tunable();
        printf("memory   large blocks in huge pages: %s (glibc.malloc.hugetlb=%s; DOCMINE_HUGEPAGES=0 turns it off), "
               "transparent huge pages %s\n",
               tun && strcmp(tun, "0") != 0 ? "yes" : "no", tun ? tun : "unset", dm_mem_thp_mode());
        printf("\n%-5s %-20s %-10s %-7s %-6s %-28s %-5s %-5s %s\n", "rank", "host", "local_rank", "threads", "gpu",
               "name", "cc", "SMs", "memory");
        for (size_t i = 0; i < json_array_size(devs); i++) {
            json_t *d = json_array_get(devs, i);
            int dev = (int)json_integer_value(json_object_get(d, "device"));
            char gpu[16] = "-";
            if (dev >= 0) snprintf(gpu, sizeof gpu, "%d", dev);
            printf("%-5d %-20s %-10d %-7d %-6s %-28s %-5s %-5d %.1f GB\n", (int)json_integer_value(json_object_get(d, "rank")),
                   json_string_value(json_object_get(d, "host")), (int)json_integer_value(json_object_get(d, "local_rank")),
                   (int)json_integer_value(json_object_get(d, "threads")), gpu, json_string_value(json_object_get(d, "gpu")),
                   json_string_value(json_object_get(d, "compute_capability")),
                   (int)json_integer_value(json_object_get(d, "sms")), json_real_value(json_object_get(d, "memory_gb")));
        }
    }
    json_decref(ver);

    int rc = DM_OK;
    if (bandwidth) {
        /* one rank at a time, so ranks sharing a node do not share the copy engines or host memory */
        dm_bandwidth mine = {0};
        for (int r = 0; r < ctx->size; r++) {
            MPI_Barrier(ctx->world);
            if (r == ctx->rank) rc = dm_bandwidth_measure(&mine, bytes, repeats);
        }
        rc = dm_ctx_agree(ctx, rc);
        double v[4] = {mine.h2d_gbs, mine.d2h_gbs, mine.d2d_gbs, mine.d2d_kernel_gbs};
        double *all = dm_malloc(sizeof v * (size_t)ctx->size);
        DM_ASSERT(all != NULL);
        MPI_Gather(v, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, 0, ctx->world);
        json_t *bw = json_array();
        if (rc == DM_OK && ctx->rank == 0) {
            printf("\nbandwidth, %zu bytes per copy, median of %d (GB/s = 1e9 B/s; device-to-device counts bytes read + written)\n",
                   bytes, repeats);
            printf("%-5s %-28s %10s %10s %12s %14s\n", "rank", "gpu", "H2D", "D2H", "D2D memcpy", "D2D kernel");
            for (int r = 0; r < ctx->size; r++) {
                json_t *d = json_array_get(devs, (size_t)r);
                double *x = all + 4 * r;
                char k[32] = "n/a";
                if (x[3] > 0) snprintf(k, sizeof k, "%.1f", x[3]);
                printf("%-5d %-28s %10.1f %10.1f %12.1f %14s\n", r, json_string_value(json_object_get(d, "gpu")), x[0],
                       x[1], x[2], k);
                json_array_append_new(bw, json_pack("{s:i, s:f, s:f, s:f, s:f}", "rank", r, "h2d_gbs", x[0], "d2h_gbs",
                                                    x[1], "d2d_memcpy_gbs", x[2], "d2d_kernel_gbs", x[3]));
            }
        }
        dm_free(all);
        json_object_set_new(rep.results, "bandwidth", bw);
        json_object_set_new(rep.results, "bandwidth_bytes", json_integer((json_int_t)bytes));
    }
    if (devs) json_object_set_new(rep.root, "devices", devs); /* collect need not gather again */
    int rrc = rc == DM_OK ? dm_report_collect(&rep, ctx) : rc;
    if (rrc == DM_OK) rrc = dm_report_write(&rep, ctx, app->report_path);
    rrc = dm_ctx_agree(ctx, rrc);
    dm_report_free(&rep);
    return rrc == DM_OK ? DM_EXIT_OK : dm_app_fail(app, "info", rrc);
}
