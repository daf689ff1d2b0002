/* The `docmine` program: global options, MPI start-up, the run context and dispatch to one
 * subcommand. Exit codes: 0 ok, 1 runtime error, 2 usage error. Reference: none. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/app.h"
#include "apps/commands.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/status.h"
#include "common/tune/tune.h"

typedef struct {
    const char *name;
    dm_cmd_fn *fn;
    const char *summary;
} dm_command;

static const dm_command g_commands[] = {
    {"info", dm_cmd_info, "ranks, GPUs, library versions, tuning database; --bandwidth measures copies"},
    {"preprocess", dm_cmd_preprocess, "read a corpus, normalise, tokenise, drop stop words, stem: token stream"},
    {"stem", dm_cmd_stem, "Porter-stem words from stdin, one per line (compare the backends)"},
    {"tune", dm_cmd_tune, "tune every kernel for this GPU (--list: the kernels and their spaces)"},
    {"streamclust", dm_cmd_streamclust, "STREAM k-median (Rodinia streamcluster arguments), across ranks"},
    {"synth", dm_cmd_synth, "write a synthetic labelled corpus (K Zipf topics), in parallel by rank"},
    {"vectorize", dm_cmd_vectorize, "corpus -> TF-IDF / TF-ICF sparse vectors (.dmv, svmlight, mtx)"},
    {"icf-build", dm_cmd_icf_build, "write the TF-ICF table of a reference corpus"},
    {"flock", dm_cmd_flock, "cluster document vectors by multi-species flocking on a sliced plane"},
    {"pipeline", dm_cmd_pipeline, "corpus -> preprocess -> TF-IDF -> flock or streamclust, in one run"},
};
#define DM_NCOMMANDS ((int)(sizeof g_commands / sizeof g_commands[0]))

static void print_help(FILE *f)
{
    fprintf(f,
            "usage: docmine <command> [options]\n"
            "       mpiexec -n <ranks> docmine <command> [options]   (one rank per GPU)\n\n"
            "MPI + CUDA document clustering: preprocess, TF-IDF, flocking and STREAM k-median.\n\n"
            "commands:\n");
    for (int i = 0; i < DM_NCOMMANDS; i++) fprintf(f, "  %-12s %s\n", g_commands[i].name, g_commands[i].summary);
    fprintf(f, "\nglobal options (accepted by every command, before or after it):\n"
               "  --backend cpu|cuda|auto  compute backend (auto: cuda when a GPU is present)\n"
               "  --threads N              OpenMP threads per rank (at most the CPUs it may run on)\n"
               "  --seed N                 seed of all random streams (default 42)\n"
               "  --report FILE            write the JSON run report to FILE\n"
               "  --tune off|model|msp|exhaustive   kernel tuning mode (env DOCMINE_TUNE; default msp)\n"
               "  --tuning-db FILE         tuning database (env DOCMINE_TUNING_DB)\n"
               "  --quiet | --verbose      less / more logging\n"
               "  --progress               progress even when stderr is not a terminal (a line every 10 s)\n"
               "  --help, --version\n\n"
               "example:\n  docmine info --bandwidth\n  docmine <command> --help\n");
}

typedef struct {
    dm_ctx_options ctx;
    const char *report;
    const char *tune;
    const char *tuning_db;
} global_opts;

static int parse_u64(const char *s, unsigned long long *v)
{
    char *end;
    errno = 0;
    if (!s || !*s || *s == '-') return -1;
    *v = strtoull(s, &end, 10);
    return (errno || *end) ? -1 : 0;
}

/* Removes the global options from argv (anywhere on the line). Returns 0, or 2 with a usage error
 * in msg (printed by main once, by the lowest rank that has one). */
static int take_globals(int *argc, char **argv, global_opts *g, char *msg, size_t len)
{
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        char *a = argv[i];
        const char *names[] = {"--backend", "--threads", "--seed", "--report", "--tune", "--tuning-db"};
        int which = -1;
        const char *val = NULL;
        for (int k = 0; k < 6; k++) {
            size_t l = strlen(names[k]);
            if (strncmp(a, names[k], l) == 0 && (a[l] == '\0' || a[l] == '=')) {
                which = k;
                if (a[l] == '=') val = a + l + 1;
                else if (i + 1 < *argc) val = argv[++i];
                else {
                    snprintf(msg, len, "docmine: option %s needs a value (see docmine --help)", names[k]);
                    return DM_EXIT_USAGE;
                }
                break;
            }
        }
        if (which < 0) {
            if (strcmp(a, "--quiet") == 0) g->ctx.quiet = 1;
            else if (strcmp(a, "--verbose") == 0) g->ctx.verbose = 1;
            else if (strcmp(a, "--progress") == 0) g->ctx.progress = 1;
            else argv[out++] = a;
            continue;
        }
        unsigned long long v = 0;
        int bad = 0;
        switch (which) {
        case 0: bad = dm_backend_parse(val, &g->ctx.backend) != DM_OK; break;
        case 1: bad = parse_u64(val, &v) != 0 || v < 1 || v > 4096; g->ctx.threads = (int)v; break;
        case 2: bad = parse_u64(val, &v) != 0; g->ctx.seed = v; break;
        case 3: bad = !val[0]; g->report = val; break;
        case 4: { int m; bad = dm_tune_mode_parse(val, &m) != DM_OK; g->tune = val; } break;
        case 5: bad = !val[0]; g->tuning_db = val; break; /* "" would quietly mean the default */
        }
        if (bad) {
            snprintf(msg, len, "docmine: invalid value '%.200s' for %s (see docmine --help)", val, names[which]);
            return DM_EXIT_USAGE;
        }
    }
    *argc = out;
    argv[out] = NULL;
    return 0;
}

/* Collective: an error of some rank before the command (msg set, code 2 for a usage error, 1 for
 * another failure) is every rank's: the lowest such rank prints its message once, and every rank
 * returns its code (one rank stopping alone left the others in a collective). */
static int agree_usage(int code, const char *msg, int rank)
{
    struct { int rank, code; } mine = {code ? rank : INT_MAX, code}, lowest = mine;
    MPI_Allreduce(&mine, &lowest, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD);
    if (lowest.rank == INT_MAX) return 0;
    if (lowest.rank == rank) fprintf(stderr, "%s\n", msg);
    return lowest.code;
}

static int has_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
    return 0;
}

/* Large malloc blocks in transparent huge pages: with several ranks on one host, faulting
 * gigabytes of fresh memory in 4 KiB pages at once was the largest multi-rank loss
 * (bench/RESULTS.md, session 9). glibc (2.35 and later; older ones ignore it) does it when
 * GLIBC_TUNABLES holds glibc.malloc.hugetlb=1, which it reads when the program starts: so, unless
 * DOCMINE_HUGEPAGES=0 or GLIBC_TUNABLES already names that tunable (the user's choice), docmine
 * adds it and executes itself again, once, before MPI starts (the launcher's connection is
 * inherited). If that exec fails, the run goes on with the default pages. */
static void exec_with_huge_pages(char **argv)
{
    if (getenv("DOCMINE_HUGEPAGES_EXEC")) { /* this is the second start */
        unsetenv("DOCMINE_HUGEPAGES_EXEC");
        return;
    }
    const char *off = getenv("DOCMINE_HUGEPAGES");
    if (off && strcmp(off, "0") == 0) return;
    if (dm_mem_hugetlb_tunable()) return; /* the user's setting */
    const char *t = getenv("GLIBC_TUNABLES");
    size_t n = (t ? strlen(t) + 1 : 0) + sizeof "glibc.malloc.hugetlb=1";
    char *v = malloc(n), *old = t ? strdup(t) : NULL;
    if (v && (!t || old)) {
        snprintf(v, n, "%s%sglibc.malloc.hugetlb=1", t && *t ? t : "", t && *t ? ":" : "");
        if (setenv("GLIBC_TUNABLES", v, 1) == 0 && setenv("DOCMINE_HUGEPAGES_EXEC", "1", 1) == 0)
            execv("/proc/self/exe", argv);
        /* still here: the environment as it was */
        if (old) setenv("GLIBC_TUNABLES", old, 1);
        else unsetenv("GLIBC_TUNABLES");
        unsetenv("DOCMINE_HUGEPAGES_EXEC");
    }
    free(v);
    free(old);
}

int main(int argc, char **argv)
{
    exec_with_huge_pages(argv);
    int full_argc = argc;
    char **full_argv = malloc(sizeof(char *) * (size_t)(argc + 1));
    if (!full_argv) return DM_EXIT_RUNTIME;
    memcpy(full_argv, argv, sizeof(char *) * (size_t)(argc + 1));

    int provided;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "docmine: MPI_Init failed\n");
        return DM_EXIT_RUNTIME;
    }
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);

    global_opts g = {.ctx = DM_CTX_OPTIONS_INIT};
    char msg[1024] = "";
    int code = agree_usage(take_globals(&argc, argv, &g, msg, sizeof msg), msg, rank);
    /* every rank must be given the same command line (the command, its arguments, --seed and
     * --backend; --threads, --report, --tune, --tuning-db and the logging options may differ):
     * said once, before a usage error of one rank alone or a run on other options per rank */
    if (code == 0) {
        if (dm_app_same_args(MPI_COMM_WORLD, argc - 1, argv + 1, g.ctx.seed, g.ctx.backend) != DM_OK)
            snprintf(msg, sizeof msg, "docmine: %s", dm_error_message());
        /* ranks that differ: a usage error; no memory or MPI failing there: a runtime error */
        int err = dm_error_code();
        code = agree_usage(err == DM_OK ? 0 : err == DM_ERR_INVALID_ARG ? DM_EXIT_USAGE : DM_EXIT_RUNTIME, msg, rank);
        dm_error_clear();
    }
    /* --report: rank 0's is the run's (rank 0 writes the report, every rank takes part in making
     * it; --report may differ per rank, so a rank given none or another one takes rank 0's: a
     * rank without one skipped the report's collectives and left the others waiting). Its path
     * fits: said before any work. */
    char *report0 = NULL;
    if (code == 0) {
        int len = rank == 0 && g.report ? (int)strlen(g.report) : -1;
        MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (len >= 0 && (report0 = malloc((size_t)len + 1)) == NULL) len = -2;
        if (rank == 0 && report0) memcpy(report0, g.report, (size_t)len + 1);
        int ok = len != -2, all = ok;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all) code = DM_EXIT_RUNTIME;
        else if (len >= 0) {
            MPI_Bcast(report0, len + 1, MPI_CHAR, 0, MPI_COMM_WORLD);
            g.report = report0;
            char p[DM_APP_PATH_MAX + 2];
            if (dm_app_path(p, sizeof p, "%s", g.report) != DM_OK) {
                if (rank == 0) fprintf(stderr, "docmine: --report %s\n", dm_error_message());
                code = DM_EXIT_USAGE; /* the same on every rank */
            }
            dm_error_clear();
        } else g.report = NULL;
    }
    const dm_command *cmd = NULL;
    if (code == 0) {
        if (argc < 2) {
            if (rank == 0) print_help(stderr);
            code = DM_EXIT_USAGE;
        } else if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
            if (rank == 0) print_help(stdout);
        } else if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
            if (rank == 0) printf("docmine %s (git %s)\n", DM_VERSION, DM_GIT_HASH);
        } else {
            for (int i = 0; i < DM_NCOMMANDS; i++)
                if (strcmp(argv[1], g_commands[i].name) == 0) cmd = &g_commands[i];
            if (!cmd) {
                if (rank == 0)
                    fprintf(stderr, "docmine: unknown %s '%s' (see docmine --help)\n",
                            argv[1][0] == '-' ? "option" : "command", argv[1]);
                code = DM_EXIT_USAGE;
            }
        }
    }
    if (cmd) {
        if (g.tune) {
            int m = DM_TUNE_MSP;
            dm_tune_mode_parse(g.tune, &m);
            dm_tune_set_mode(m);
        } else if (getenv("DOCMINE_TUNE")) {
            int m;
            if (dm_tune_mode_parse(getenv("DOCMINE_TUNE"), &m) == DM_OK) dm_tune_set_mode(m);
            else {
                /* said once (rank 0), and the mode set, so that the tuner does not say it again per rank */
                if (rank == 0)
                    fprintf(stderr, "docmine: ignoring DOCMINE_TUNE='%s' (off, model, msp or exhaustive); using msp\n",
                            getenv("DOCMINE_TUNE"));
                dm_error_clear();
                dm_tune_set_mode(DM_TUNE_MSP);
            }
        }
        if (g.tuning_db) dm_tune_set_db_path(g.tuning_db);
        /* help needs no GPU: do not let --backend cuda stop it */
        if (has_help(argc - 1, argv + 1)) g.ctx.backend = DM_BACKEND_CPU;
        dm_ctx ctx;
        dm_app app = {.ctx = &ctx, .report_path = g.report, .argc_all = full_argc, .argv_all = full_argv};
        int rc = dm_ctx_init(&ctx, &g.ctx);
        dm_tune_set_local_rank(ctx.local_rank); /* node-local rank 0 tunes, the others wait */
        if (rc == DM_OK) rc = dm_tune_register_all();
        if (rc != DM_OK) code = dm_app_fail(&app, cmd->name, rc);
        else code = cmd->fn(&app, argc - 1, argv + 1);
        dm_ctx_free(&ctx);
    }
    free(full_argv);
    free(report0);
    MPI_Finalize();
    return code;
}
