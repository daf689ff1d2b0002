/* `docmine tune`: lists the tunable kernels (--list, no GPU needed) or tunes them on this node's
 * GPUs and stores the choices in the tuning database. Per kernel it prints the default time, the
 * tuned time, the speedup, the chosen policy, the MSP size, the search time and, with
 * --compare-exhaustive, the exhaustive search time and its best. Under MPI the lowest node-local
 * rank of each GPU model tunes, the other ranks wait. Reference: mode off (the defaults). */
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/app.h"
#include "common/alloc.h"
#include "common/status.h"
#include "common/tune/tune.h"
#include "common/tune/tune_db.h"
#include "common/tune/tune_print.h"

static const char *const usage =
    "usage: docmine tune [--list] [--kernels LIST] [--mode off|model|msp|exhaustive]\n"
    "                    [--compare-exhaustive] [--size N] [--prior] [--db PATH] [--no-store]\n"
    "                    [--json FILE] [--repeats N]\n"
    "  --list                print every tunable kernel with its space and default (no GPU needed;\n"
    "                        a CPU-only build has none)\n"
    "  --kernels LIST        comma-separated kernel names or module prefixes ending in '.'\n"
    "                        (default: all)\n"
    "  --mode M              search mode (default: the global --tune, else DOCMINE_TUNE, else msp)\n"
    "  --compare-exhaustive  also run the exhaustive search at the target size\n"
    "  --size N              target size in work units (default: each kernel's own)\n"
    "  --prior               start each search from common.copy's best policy (memory-bound prior)\n"
    "  --db PATH             tuning database (default: --tuning-db, else DOCMINE_TUNING_DB, else\n"
    "                        $XDG_CACHE_HOME/docmine/tuning.tsv, else ~/.cache/docmine/tuning.tsv)\n"
    "  --no-store            do not write the database\n"
    "  --json FILE           write the results as JSON\n"
    "  --repeats N           timed repeats per measurement (median; default 7)\n\n"
    "examples:\n"
    "  docmine tune --list\n"
    "  docmine tune --kernels common.copy,flock. --json tune.json      (needs a GPU)\n";

static int selected(const char *list, const char *name)
{
    if (!list) return 1;
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0) {
            if (p[len - 1] == '.' && !strncmp(name, p, len)) return 1;
            if (strlen(name) == len && !strncmp(name, p, len)) return 1;
        }
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

/* Whether this rank tunes: the lowest node-local rank with its GPU model. */
static int is_node_tuner(const dm_ctx *ctx, int *tuner)
{
    char name[sizeof ctx->dev.name];
    memset(name, 0, sizeof name);
    memcpy(name, ctx->dev.name, sizeof name);
    name[sizeof name - 1] = '\0';
    char *all = dm_malloc((size_t)ctx->local_size * sizeof name);
    if (!all) return DM_ERR(DM_ERR_NOMEM, "tune: out of memory");
    if (MPI_Allgather(name, (int)sizeof name, MPI_CHAR, all, (int)sizeof name, MPI_CHAR,
                      ctx->node) != MPI_SUCCESS) {
        dm_free(all);
        return DM_ERR(DM_ERR_MPI, "tune: MPI_Allgather on the node failed");
    }
    *tuner = 1;
    for (int r = 0; r < ctx->local_rank; r++)
        if (!strcmp(all + (size_t)r * sizeof name, name)) *tuner = 0;
    dm_free(all);
    return DM_OK;
}

int dm_cmd_tune(dm_app *app, int argc, char **argv)
{
    const char *cmd = "tune";
    int list = 0, compare = 0, store = 1, use_prior = 0, repeats = 0;
    int mode = -1;
    const char *kernels = NULL, *db = NULL, *json = NULL;
    size_t size = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!more && (!strcmp(a, "--kernels") || !strcmp(a, "--db") || !strcmp(a, "--json") ||
                      !strcmp(a, "--mode") || !strcmp(a, "--size") || !strcmp(a, "--repeats")))
            return dm_app_usage_error(app, cmd, "option '%s' needs a value", a);
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            if (!app || !app->ctx || app->ctx->rank == 0) fputs(usage, stdout);
            return DM_EXIT_OK;
        } else if (!strcmp(a, "--list")) {
            list = 1;
        } else if (!strcmp(a, "--compare-exhaustive")) {
            compare = 1;
        } else if (!strcmp(a, "--no-store")) {
            store = 0;
        } else if (!strcmp(a, "--prior")) {
            use_prior = 1;
        } else if (!strcmp(a, "--kernels") && more) {
            kernels = argv[++i];
        } else if (!strcmp(a, "--db") && more) {
            db = argv[++i];
        } else if (!strcmp(a, "--json") && more) {
            json = argv[++i];
        } else if (!strcmp(a, "--mode") && more) {
            if (dm_tune_mode_parse(argv[++i], &mode) != DM_OK)
                return dm_app_usage_error(app, cmd, "unknown mode '%s'", argv[i]);
        } else if (!strcmp(a, "--size") && more) {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(argv[++i], &end, 10);
            if (*end || v == 0 || !(argv[i][0] >= '0' && argv[i][0] <= '9') || errno ||
                v > (unsigned long long)SIZE_MAX)
                return dm_app_usage_error(app, cmd, "bad --size '%s'", argv[i]);
            size = (size_t)v;
        } else if (!strcmp(a, "--repeats") && more) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            repeats = *end || !argv[i][0] || v < 1 || v > 1000 ? 0 : (int)v;
            if (repeats < 1)
                return dm_app_usage_error(app, cmd, "bad --repeats '%s'", argv[i]);
        } else {
            return dm_app_usage_error(app, cmd, "unknown option '%s'", a);
        }
    }
    int rc = dm_tune_register_all();
    if (rc != DM_OK) return dm_app_fail(app, cmd, rc);
    if (kernels) {
        int any = 0;
        for (int i = 0; i < dm_tune_kernel_count(); i++) any |= selected(kernels, dm_tune_kernel_at(i)->name);
        if (!any) return dm_app_usage_error(app, cmd, "no registered kernel matches '%s'", kernels);
    }
    if (mode < 0) mode = dm_tune_get_mode();
    const dm_ctx *ctx = app ? app->ctx : NULL;
    int rank = ctx ? ctx->rank : 0;
    if (list) {
        dm_tune_set_mode(mode); /* the list's header names this command's mode (--mode, else the global) */
        if (rank == 0) {
            rc = dm_tune_list_print(stdout);
            if (rc != DM_OK) return dm_app_fail(app, cmd, rc);
        }
        return DM_EXIT_OK;
    }
    if (!ctx || ctx->backend != DM_BACKEND_CUDA || ctx->device < 0)
        return dm_app_fail(app, cmd, DM_ERR(DM_ERR_NO_DEVICE, "tuning needs a GPU (CUDA backend)"));
    rc = dm_tune_configure(mode, db, ctx->local_rank);
    if (rc != DM_OK) return dm_app_fail(app, cmd, rc);

    int tuner = 1;
    rc = is_node_tuner(ctx, &tuner);
    if (rc != DM_OK) return dm_app_fail(app, cmd, rc);
    FILE *jf = NULL;
    if (json && tuner && rank == 0) {
        jf = fopen(json, "w");
        if (!jf) rc = DM_ERR(DM_ERR_IO, "%s: cannot write (%s)", json, strerror(errno));
    }
    /* dm_app_fail is collective: every rank learns that rank 0 cannot write the JSON */
    rc = dm_ctx_agree(ctx, rc);
    if (rc != DM_OK) return dm_app_fail(app, cmd, rc);
    if (jf) {
        fprintf(jf, "{\"gpu\": ");
        dm_tune_json_string(jf, ctx->dev.name);
        fprintf(jf, ", \"cc\": \"%d.%d\", \"mode\": \"%s\", \"results\": [", ctx->dev.cc_major,
                ctx->dev.cc_minor, dm_tune_mode_name(mode));
    }
    int status = DM_OK, first = 1;
    dm_tune_policy prior;
    int have_prior = 0;
    if (tuner) {
        char path[4096];
        int have_path = dm_tune_db_current_path(path, sizeof path) == DM_OK;
        if (!have_path) {
            snprintf(path, sizeof path, "none (no DOCMINE_TUNING_DB, XDG_CACHE_HOME or HOME: nothing is stored)");
            dm_error_clear();
        }
        if (ctx->size > 1) printf("rank %d: ", rank);
        printf("tuning on %s (cc %d.%d), mode %s%s%s\n", ctx->dev.name, ctx->dev.cc_major,
               ctx->dev.cc_minor, dm_tune_mode_name(mode), store ? ", database " : "",
               store ? path : "");
        /* as the line says: the kernels are tuned and printed, nothing is stored (storing would
         * fail every kernel before its search, dm_tune_and_store needs the path first) */
        if (!have_path) store = 0;
        if (use_prior) {
            /* the memory-bound prior: common.copy's best policy, tuned first */
            const dm_tune_kernel *ck = dm_tune_kernel_find("common.copy");
            dm_tune_options o = DM_TUNE_OPTIONS_INIT;
            dm_tune_result r;
            if (repeats) o.repeats = repeats;
            if (ck && dm_tune_run(&r, ck, ck->bench_default_n, &o) == DM_OK) {
                prior = ck->instances[r.chosen].policy;
                have_prior = 1;
                char buf[128];
                printf("memory-bound prior (common.copy): %s\n", dm_tune_policy_str(&prior, buf, sizeof buf));
            } else {
                /* a warning of this rank alone: dm_app_fail is collective and the other ranks
                 * are not here (only the node's tuners are) */
                fprintf(stderr, "docmine tune: warning: no prior: common.copy could not be tuned "
                        "(%s); searching without it\n",
                        ck ? dm_error_message() : "not registered");
            }
        }
        dm_tune_result_header(stdout, compare || mode == DM_TUNE_EXHAUSTIVE);
        for (int i = 0; i < dm_tune_kernel_count(); i++) {
            const dm_tune_kernel *k = dm_tune_kernel_at(i);
            if (!selected(kernels, k->name)) continue;
            if (!k->bench_create || !k->bench_run || !k->bench_output || !k->bench_destroy) {
                printf("%-22s (no tuning workload: runs its default)\n", k->name);
                continue;
            }
            dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
            opt.mode = mode;
            opt.compare_exhaustive = compare;
            if (repeats) opt.repeats = repeats;
            if (have_prior) opt.prior = &prior;
            size_t n = size ? size : k->bench_default_n;
            if (n == 0) n = (size_t)1 << 24;
            dm_tune_result r;
            rc = store ? dm_tune_and_store(&r, k, n, &opt) : dm_tune_run(&r, k, n, &opt);
            if (rc != DM_OK) {
                fprintf(stderr, "docmine tune: %s: %s\n", k->name, dm_error_message());
                if (status == DM_OK) status = rc;
                continue;
            }
            dm_tune_result_row(stdout, k, &r, compare || mode == DM_TUNE_EXHAUSTIVE);
            if (r.n_rejected)
                printf("  %d instance(s) of %s rejected for wrong output: a bug, see the warnings\n",
                       r.n_rejected, k->name);
            if (jf) {
                fprintf(jf, "%s\n  ", first ? "" : ",");
                dm_tune_result_json(jf, k, &r);
                first = 0;
            }
        }
        fflush(stdout);
    }
    if (jf) {
        fprintf(jf, "\n]}\n");
        if (fclose(jf) != 0 && status == DM_OK) status = DM_ERR(DM_ERR_IO, "%s: write error", json);
    }
    /* the other ranks of the node wait for the tuners, then read the database */
    if (MPI_Barrier(ctx->node) != MPI_SUCCESS && status == DM_OK)
        status = DM_ERR(DM_ERR_MPI, "tune: MPI_Barrier failed");
    dm_tune_cache_clear();
    status = dm_ctx_agree(ctx, status);
    return status == DM_OK ? DM_EXIT_OK : dm_app_fail(app, cmd, status);
}
