/* Small file helpers: atomic writes (temporary name + rename, never half-written outputs) and
 * directory creation. Reference: none. */
#ifndef DM_FILEIO_H
#define DM_FILEIO_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An output file being written under a temporary name next to its final path. */
typedef struct dm_atomic_file {
    FILE *fp;
    char path[4096];
    char tmp[4096];
} dm_atomic_file;

/* Opens path.tmp.<pid>.<n> for writing ("wb"). DM_ERR_IO naming the file on failure. */
int dm_atomic_open(dm_atomic_file *f, const char *path);
/* Flushes, fsyncs and renames onto the final path. On any error the temporary file is removed.
 * dm_atomic_finish + dm_atomic_place. */
int dm_atomic_commit(dm_atomic_file *f);
/* Flushes, fsyncs and closes the file, which stays under its temporary name: for outputs that are
 * put in place together (every rank's part, once all of them were written). On error the
 * temporary is removed; dm_atomic_abort removes it after success too. */
int dm_atomic_finish(dm_atomic_file *f);
/* Renames a finished file onto its final path (dm_rename_output); on error the temporary is
 * removed. */
int dm_atomic_place(dm_atomic_file *f);
/* Abandons the file: closes and removes the temporary. */
void dm_atomic_abort(dm_atomic_file *f);
/* Writes a whole buffer atomically. */
int dm_write_file_atomic(const char *path, const void *data, size_t n);
/* mkdir -p. */
int dm_mkdirs(const char *path);
/* mkdir -p of the folder of the file path (nothing when path names no folder). */
int dm_mkdirs_parent(const char *path);
/* Removes path, an earlier run's output with more ranks than this one, with a warning naming it
 * (DM_ERR_IO when it cannot be removed). */
int dm_remove_leftover(const char *path);
/* What path is when it exists as a device, FIFO or socket ("a FIFO", ...); NULL for a regular
 * file, a directory or no file. */
const char *dm_special_file(const char *path);
/* Puts a finished temporary file in place: rename(tmp, path), refused (tmp left for the caller to
 * remove) when path is a device, FIFO or socket, which a rename would replace (as root, /dev/null
 * or /dev/stdout itself). DM_ERR_IO naming path: "rename from temporary failed: <why>". */
int dm_rename_output(const char *tmp, const char *path);
/* Opens a named input file (stop words, a token stream, vectors, a table, a checkpoint) for
 * reading. Anything but a regular file is refused, never waited on (a FIFO without a writer would
 * block every rank for ever): the error is DM_ERR_IO "<what> <path>: ..." (what may be NULL). */
int dm_open_input(FILE **f, const char *path, const char *what);
/* Writes s as one TSV field: tabs, newlines and carriage returns become spaces (the rule of
 * assignments.tsv and clusters.tsv), so a record stays one line of its fields. */
void dm_fput_tsv_field(FILE *f, const char *s);

#ifdef __cplusplus
}
#endif
#endif
