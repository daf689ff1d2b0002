/* bench_util: what the benchmark programs share (a static library of bench/, dm_bench):
 *  - strict numbers on their command lines: the whole word is a number in range, or the program
 *    stops with "PROG: --OPT: 'WORD' is not ...; see PROG --help" and exit code 2 (no atoi-style
 *    silent 0, no negative count read as a huge one);
 *  - where the datasets are, as the tests find them: $DOCMINE_DATASETS/NAME, else
 *    SRC/../shared/datasets/NAME with SRC = $DOCMINE_SOURCE_DIR or the source tree the program was
 *    built from; and a corpus that is not there named with what to do;
 *  - the lines every table starts with (the command line, the GPU, the date: what bench/RESULTS.md
 *    records with each number), also put in the JSON;
 *  - JSON written atomically (a temporary name, then a rename: never half-written), scratch folders
 *    removed without a shell.
 * Reference: none. */
#ifndef DM_BENCH_UTIL_H
#define DM_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exit codes of the benchmarks: 0 ok, 1 runtime error, 2 usage error, 77 skipped (no GPU for a
 * run that needs one). */
enum { BENCH_EXIT_OK = 0, BENCH_EXIT_RUNTIME = 1, BENCH_EXIT_USAGE = 2, BENCH_EXIT_SKIP = 77 };

/* Names the program in messages and keeps the command line and the start time for the header;
 * say = 0 silences the messages (the ranks other than 0 of a multi-rank run). */
void bench_init(const char *prog, int argc, char **argv, int say);
/* Whether this process prints (bench_init's say). */
int bench_says(void);
/* Prints "PROG: MESSAGE; see PROG --help" on stderr (when it says) and returns BENCH_EXIT_USAGE. */
int bench_usage_error(const char *fmt, ...) DM_PRINTF(1, 2);
/* Prints "PROG: MESSAGE" on stderr (when it says) and returns BENCH_EXIT_RUNTIME. */
int bench_error(const char *fmt, ...) DM_PRINTF(1, 2);

/* Numbers: s must be one number (nothing before or after it) in [lo, hi]; whole numbers take no
 * sign. Returns 0, or prints a usage error naming opt and s and returns -1. */
int bench_parse_u64(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *v);
int bench_parse_int(const char *opt, const char *s, int lo, int hi, int *v);
int bench_parse_size(const char *opt, const char *s, size_t lo, size_t hi, size_t *v);
int bench_parse_double(const char *opt, const char *s, double lo, double hi, double *v);
/* A comma-separated list of 1 to max numbers, each in [lo, hi]. Returns the count, or prints a
 * usage error naming opt and the bad item and returns -1. */
int bench_parse_doubles(const char *opt, const char *s, double lo, double hi, double *v, int max);
int bench_parse_ints(const char *opt, const char *s, int lo, int hi, int *v, int max);

/* The path of a dataset NAME (e.g. "reuters21578"): $DOCMINE_DATASETS/NAME when the variable is
 * set and not empty, else SRC/../shared/datasets/NAME (SRC: $DOCMINE_SOURCE_DIR, else the source
 * tree the program was built from). Returns buf. */
const char *bench_dataset(const char *name, char *buf, size_t len);
/* A file of the source tree (e.g. a scikit-learn script): SRC/rel as above. Returns buf. */
const char *bench_source_file(const char *rel, char *buf, size_t len);
/* Whether a corpus path exists. If not, prints what was looked for and how to fix it (the default
 * corpus: where DOCMINE_DATASETS points, --corpus, datasets/fetch.sh) and returns -1. */
int bench_check_corpus(const char *path, int is_default);

/* The command line as one line (words a shell would split quoted). */
const char *bench_command(void);
/* The start time, UTC, ISO 8601 (2026-11-21T10:00:00Z). */
const char *bench_date(void);
/* Prints the header of the tables: "command: ...", "gpu: GPU (or none), date: DATE". */
void bench_print_header(const char *gpu);

struct json_t;
/* Adds "command", "date" and "gpu" to a JSON object. */
void bench_json_meta(struct json_t *root, const char *gpu);
/* Writes a JSON value to path atomically (jansson's flags). DM_OK, or an error naming path. */
int bench_write_json(const char *path, const struct json_t *root, size_t flags);

/* Runs `python3 SCRIPT ARG1 [ARG2]` (a peer measurement: the scikit-learn scripts). Returns 0 with
 * the first line of its output that is not a "# " comment in result, or -1 with why it gave none
 * in why: the script missing (DOCMINE_SOURCE_DIR), python3 missing, the script's own last message
 * (scikit-learn not installed, no files), or its exit status. arg2 may be NULL. */
int bench_python(const char *script, const char *arg1, const char *arg2, char *result, size_t rlen, char *why,
                 size_t wlen);

/* rm -rf path (no shell: any name works); a missing path is not an error. */
int bench_remove_tree(const char *path);
/* Decompresses (or copies) src to dst through dst.part and a rename, so that a run killed in the
 * middle leaves no truncated file under dst for the next run to take as complete. */
int bench_gunzip_to(const char *src, const char *dst);

/* The probes' command line, `PROG [N] [R]` (the probes of bench/common): N (called nname in
 * messages) a whole number in [nlo, nhi]
 * (default *n), R rounds in [1, 1000] (default *rounds); -h/--help prints `usage` (one line per
 * argument, after "usage: ") and the exit codes. Returns -1 after a usage error (exit 2), 1 after
 * the help (exit 0), 0 to run. Call after bench_init. */
int bench_probe_args(int argc, char **argv, const char *usage, const char *nname, uint64_t *n, uint64_t nlo,
                     uint64_t nhi, int *rounds);

#ifdef __cplusplus
}
#endif
#endif
