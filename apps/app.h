/* The `docmine` program: one file per subcommand (apps/cmd_<name>.c), each defining one
 * dm_cmd_fn listed in apps/main.c's command table. Reference: none. */
#ifndef DM_APP_H
#define DM_APP_H

#include "common/context.h"
#include "common/status.h"

/* Exit codes of the program. */
enum { DM_EXIT_OK = 0, DM_EXIT_RUNTIME = 1, DM_EXIT_USAGE = 2 };

typedef struct dm_app {
    dm_ctx *ctx;             /* MPI + device context, already initialised */
    const char *report_path; /* --report FILE, rank 0's on every rank (NULL: none unless the command writes one) */
    int argc_all;            /* the full command line, for the report */
    char **argv_all;
} dm_app;

/* A subcommand. argv[0] is the command name, options follow (global options already removed).
 * Returns a DM_EXIT_* code; prints its own one-line error (via dm_app_error) before failing. */
typedef int dm_cmd_fn(dm_app *app, int argc, char **argv);

/* Collective: every rank calls it with the same (agreed, see dm_ctx_agree) failed status. Prints
 * "docmine <cmd>: <message>" once, from the lowest rank that has its own error message, and
 * returns the exit code: DM_EXIT_USAGE for DM_ERR_INVALID_ARG, else DM_EXIT_RUNTIME. */
int dm_app_fail(const dm_app *app, const char *cmd, int status);
/* Prints a usage error "docmine <cmd>: <message>; see docmine <cmd> --help" and returns 2. */
int dm_app_usage_error(const dm_app *app, const char *cmd, const char *fmt, ...) DM_PRINTF(3, 4);

/* Collective over comm (main calls it once, before the command runs): every rank must be given the
 * same command line (argv: the command and its arguments, after the global options are taken out;
 * the global --seed and --backend; --threads, --report, --tune, --tuning-db and the logging
 * options may differ). Each rank compares its own with rank 0's; a rank whose line differs
 * (mpiexec's ':' form, a script that builds the line per rank) returns DM_ERR_INVALID_ARG naming
 * itself and its first differing argument, the others DM_OK: the caller agrees (main prints the
 * lowest such rank's message once and every rank exits 2), instead of one rank stopping alone at
 * a usage error while the others wait in a collective, or the ranks running with other options. */
int dm_app_same_args(MPI_Comm comm, int argc, char **argv, uint64_t seed, int backend);

/* The longest output path a command takes: dm_atomic_open (common/fileio.h) writes PATH.tmp.<pid>.<n>
 * in a 4096-byte buffer and refuses a PATH of 4064 bytes or more. */
#define DM_APP_PATH_MAX 4063
/* Formats a file's path into buf (size bytes) and checks it before any work is done. A path that
 * does not fit, or is longer than DM_APP_PATH_MAX, is not shortened: returns DM_ERR_INVALID_ARG
 * "<start>...<end>: path too long (N bytes, at most M)" (a shortened OUTDIR/name names another
 * file; and the message of the error met later, after the run's work, showed only the first 700
 * bytes of the path, without the problem). Local: the caller agrees it. */
int dm_app_path(char *buf, size_t size, const char *fmt, ...) DM_PRINTF(3, 4);

struct option;
/* The option getopt_long just returned, as a user writes it, for messages: "--NAME" (longindex,
 * getopt_long's last argument, >= 0) or "-C". argv[optind - 1] is the option's value when the
 * value is a separate word. */
const char *dm_app_opt_name(char buf[64], const struct option *opts, int longindex, int c);

/* Parses a number in [lo, hi] (strtod syntax, nothing after it). Returns 0, or -1. */
int dm_app_parse_num(const char *s, double lo, double hi, double *v);

struct dm_vectors;
/* Collective: the documents of the .dmv file path, read from its header on every rank and
 * compared with rank 0's (one path may name other files on other ranks: node-local copies; a
 * rank's shorter file was clipped and its rows went missing, or the ranks mixed two files, exit
 * 0). Agreed: DM_ERR_FORMAT naming the file, the rank and both counts, or the reader's error. */
int dm_app_vectors_rows(uint64_t *rows, const char *path, const dm_ctx *ctx);
/* Collective: rows [first, first + count) of path into v (rank 0 also checks the whole file's
 * checksum; the others their rows' structure), all of them (a file that shrank while it was read
 * is an error), with rank 0's vocabulary size and flags (another file of as many documents
 * differs there). Agreed; v is freed on failure. A copy that differs from rank 0's in its
 * weights alone is not detected. */
int dm_app_vectors_read(struct dm_vectors *v, const char *path, uint64_t first, uint64_t count, const dm_ctx *ctx);

struct dm_report;
/* Collective: completes the report (dm_report_collect) and writes it to DIR/report.json (dir may
 * be NULL) and to --report FILE when given; the status is agreed on every rank. */
int dm_app_report_write(const dm_app *app, struct dm_report *rep, const char *dir);

#endif
