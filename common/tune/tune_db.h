/* The tuning database: a TSV file, one row per kernel x GPU model x compute capability x
 * workload class, with the chosen policy and the times measured. Readers never lock (a file is
 * always complete: writers write a temporary file and rename it); writers serialise their
 * read-merge-rename with an advisory lock on PATH.lock so that two processes writing at once lose
 * no row. Rejected lines warn and are skipped, never a crash. Reference: none. Plain C. */
#ifndef DM_TUNE_DB_H
#define DM_TUNE_DB_H

#include <stddef.h>

#include "common/tune/tune.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The first line of a database names its format version; a file with another version is
 * neither read nor rewritten (load: DM_ERR_FORMAT). */
#define DM_TUNE_DB_MAGIC "# docmine tuning database v"
enum { DM_TUNE_DB_VERSION = 1 };
#define DM_TUNE_DB_HEADER                                                                          \
    DM_TUNE_DB_MAGIC "1\n"                                                                         \
    "#kernel\tgpu\tcc\tclass\tblock\trake\tstrided\tlayout\ttile\tdefault_ms\ttuned_ms\tmsp_n\t"   \
    "target_n\tmode\tunix_time\n"
enum { DM_TUNE_DB_FIELDS = 15 };

typedef struct dm_tune_db_row {
    char kernel[64];
    char gpu[128];   /* GPU model name (tabs and newlines replaced by spaces) */
    int cc;          /* compute capability x 10 + minor, written "9.0" */
    int wclass;      /* dm_tune_workload_class */
    dm_tune_policy policy;
    double default_ms, tuned_ms;
    unsigned long long msp_n, target_n;
    int mode;        /* enum dm_tune_mode that produced the row */
    long long unix_time;
} dm_tune_db_row;

typedef struct dm_tune_db {
    dm_tune_db_row *rows;
    int n, cap;
    int rejected; /* lines rejected by the last load */
    int header;   /* the last load found the v1 header line */
    int comments; /* lines starting with '#' the last load found, the header line excepted */
} dm_tune_db;

/* Resolves the path: override if not NULL/empty, else $DOCMINE_TUNING_DB, else
 * $XDG_CACHE_HOME/docmine/tuning.tsv, else $HOME/.cache/docmine/tuning.tsv.
 * DM_ERR_INVALID_ARG if it does not fit in len or no HOME is known. */
int dm_tune_db_resolve_path(char *buf, size_t len, const char *override);
/* The path dm_tune_select and dm_tune_and_store use: dm_tune_db_resolve_path with the configured
 * override (--tuning-db, dm_tune_set_db_path). Unlike dm_tune_db_path(), which shows
 * "./tuning.tsv" then, DM_ERR_INVALID_ARG when no path is known (nothing is stored). */
int dm_tune_db_current_path(char *buf, size_t len);

/* Parses one data line (no trailing newline needed). DM_OK, or DM_ERR_FORMAT with *why set to a
 * static reason. */
int dm_tune_db_parse_line(dm_tune_db_row *row, const char *line, const char **why);
/* Formats row as one line with a trailing newline. DM_ERR_INVALID_ARG if it does not fit. */
int dm_tune_db_format_row(char *buf, size_t len, const dm_tune_db_row *row);
/* Copies a name into a field, replacing tabs/newlines/control characters by spaces. */
void dm_tune_db_set_name(char *dst, size_t len, const char *src);

void dm_tune_db_init(dm_tune_db *db);
void dm_tune_db_free(dm_tune_db *db);
/* Loads path into db (replacing its rows). A missing file is an empty database (DM_OK). Each
 * rejected line warns with path:line and the reason and is counted in db->rejected. A file whose
 * header names another format version: DM_ERR_FORMAT and no rows; unreadable: DM_ERR_IO. */
int dm_tune_db_load(dm_tune_db *db, const char *path);
/* The row for the key, or NULL. When several lines have the key, the last one wins on load. */
const dm_tune_db_row *dm_tune_db_find(const dm_tune_db *db, const char *kernel, const char *gpu,
                                      int cc, int wclass);
/* Inserts row, replacing a row with the same key. */
int dm_tune_db_put(dm_tune_db *db, const dm_tune_db_row *row);
/* Adds rows to the file at path: creates the directory, takes the writer lock, re-reads the file,
 * merges (rows replace same-key rows, except that a row of mode model never replaces a measured
 * one, msp or exhaustive: it is dropped), writes path.tmp.<pid> and renames it over path (a path
 * that is a symbolic link: the file it points to, whose directory holds the lock). Rejected
 * lines of the old file are dropped (they warned on load). Fails, leaving the file as it is, when
 * it cannot be read, has another format version, or has neither the header line nor a valid row
 * (not a tuning database). Thread-safe (the process's writers take turns). */
int dm_tune_db_store(const char *path, const dm_tune_db_row *rows, int n);
/* The key lock file of (kernel, gpu, cc, wclass) next to the database at db: "<db>.<16 hex
 * digits of FNV-1a of the key>.tuning". The process holding an exclusive flock on it tunes the
 * key (the kernel drops the lock when that process dies). */
void dm_tune_db_key_lock_path(char *buf, size_t len, const char *db, const char *kernel,
                              const char *gpu, int cc, int wclass);
/* Creates the directories of path's parent (mkdir -p). */
int dm_tune_db_mkdirs(const char *path);

#ifdef __cplusplus
}
#endif
#endif
