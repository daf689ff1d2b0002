/* Checkpoints of a flock run: the state (x, y, vx, vy) of every document by global index at an
 * iteration, with the options that shape trajectories and a fingerprint of the input, so that
 * --resume continues with the exact same bits as an uninterrupted run (DESIGN.md section 7,
 * "Checkpoints"). Rank 0 writes the file atomically (temporary name + rename); every rank reads
 * the records of its input rows, whatever the number of ranks that wrote it. Reference: none
 * (tests/flock/test_flock_mpi.c resumes and compares with an uninterrupted run).
 *
 * File (little-endian, 136-byte header):
 *   char magic[8] = "DMFLOCK\1"; u32 version = 2; u32 backend (1 CPU, 2 CUDA; 0 in files of
 *   docmine before 2026-12-02: not known); u64 documents; u64 seed;
 *   i64 iteration; i64 iterations; f64 radius, neighbours, threshold, w_separation, w_dissimilar,
 *   w_alignment, w_cohesion, v_max, shrink, min_dist; u64 input (dm_flock_input_fingerprint);
 *   then per document (global index order) f64 x, y, vx, vy; then u32 CRC-32 (zlib) of all
 *   preceding bytes and u32 zero. Version 1 (128 bytes, no fingerprint) is refused: nothing tells
 *   which input it was written for.
 * Before a run that writes checkpoints its file is checked (dm_flock_checkpoint_target): a folder
 * that exists and takes files, and no directory, device or other file in its place (an existing
 * file is replaced only when it is empty or a checkpoint). A refused resume names the file and
 * what differs (the option, with both values). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/status.h"
#include "flock/flock_impl.h"

#define HEADER 136
#define VERSION 2
static const char MAGIC[8] = {'D', 'M', 'F', 'L', 'O', 'C', 'K', 1};

typedef struct ck_header {
    char magic[8];
    uint32_t version, backend;
    uint64_t docs, seed;
    int64_t iteration, iterations;
    double p[10];
    uint64_t input;
} ck_header;

/* ---- the input's fingerprint ---------------------------------------------------------------- */

/* One round of a 64-bit multiply-rotate hash (xxHash64's round) and its final avalanche. */
static uint64_t fp_round(uint64_t h, uint64_t w)
{
    h += w * 0xC2B2AE3D27D4EB4Full;
    h = (h << 31) | (h >> 33);
    return h * 0x9E3779B185EBCA87ull;
}

static uint64_t fp_final(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ull;
    return h ^ (h >> 33);
}

/* Row r of v as document row_base + r: its id's bytes, then its (term, weight bits) pairs. */
static uint64_t fp_row(const dm_vectors *v, uint64_t r)
{
    uint64_t h = fp_round(0x27D4EB2F165667C5ull, v->row_base + r);
    if (v->ids && v->id_off) {
        const char *id = dm_vectors_id(v, r);
        size_t len = strlen(id);
        h = fp_round(h, len);
        for (size_t k = 0; k < len; k += 8) {
            uint64_t w = 0;
            memcpy(&w, id + k, len - k < 8 ? len - k : 8);
            h = fp_round(h, w);
        }
    }
    for (uint64_t k = v->row_off[r]; k < v->row_off[r + 1]; k++) {
        uint32_t bits;
        memcpy(&bits, &v->val[k], 4);
        h = fp_round(h, (uint64_t)v->col[k] << 32 | bits);
    }
    return fp_final(h);
}

uint64_t dm_flock_rows_fingerprint(const dm_vectors *v)
{
    /* each row's hash is keyed by its global index, and the sum modulo 2^64 does not depend on
     * how the documents are cut into ranks or threads */
    uint64_t sum = 0;
    const long n = (long)v->n_rows;
#pragma omp parallel for schedule(static) reduction(+ : sum)
    for (long r = 0; r < n; r++) sum += fp_row(v, (uint64_t)r);
    return sum;
}

int dm_flock_input_fingerprint(uint64_t *out, const dm_vectors *v, MPI_Comm comm)
{
    *out = dm_flock_rows_fingerprint(v);
    if (MPI_Allreduce(MPI_IN_PLACE, out, 1, MPI_UINT64_T, MPI_SUM, comm) != MPI_SUCCESS)
        return DM_ERR(DM_ERR_MPI, "flock: MPI_Allreduce of the input's fingerprint failed");
    return DM_OK;
}

/* ---- writing ---------------------------------------------------------------------------------- */

static void header_of(ck_header *h, const dm_flock_sim *s, int iteration)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, MAGIC, 8);
    h->version = VERSION;
    h->backend = (uint32_t)s->backend;
    h->docs = s->n_global;
    h->input = s->input_fingerprint;
    h->seed = s->opt.seed;
    h->iteration = iteration;
    h->iterations = s->opt.iterations;
    const dm_flock_options *o = &s->opt;
    double p[10] = {o->radius, o->neighbours, o->threshold, o->w_separation, o->w_dissimilar,
                    o->w_alignment, o->w_cohesion, o->v_max, o->shrink, o->min_dist};
    memcpy(h->p, p, sizeof p);
}

int dm_flock_checkpoint_write(dm_flock_sim *s, const char *path)
{
    _Static_assert(sizeof(ck_header) == HEADER, "checkpoint header is 136 bytes");
    dm_flock_view v;
    int rc = dm_flock_sim_view(s, &v);
    /* the input's fingerprint is computed when the simulation is created for checkpoints */
    if (rc == DM_OK && !(s->opt.checkpoint_every > 0 || s->opt.resume))
        rc = DM_ERR(DM_ERR_INVALID_ARG, "flock: a checkpoint of a simulation created without checkpoint_every or resume");
    /* rank 0 gathers records of 5 doubles, counted in records (in doubles, MPI's int counts and
     * displacements overflowed past 429M documents) */
    if (rc == DM_OK && s->n_global > (uint64_t)INT32_MAX)
        rc = DM_ERR(DM_ERR_UNSUPPORTED, "flock: a checkpoint of %llu documents (at most 2^31 - 1)",
                    (unsigned long long)s->n_global);
    size_t n = v.n;
    double *rec = rc == DM_OK ? dm_malloc(sizeof *rec * 5 * (n ? n : 1)) : NULL;
    if (!rec && rc == DM_OK) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for a checkpoint");
    if (rc == DM_OK)
        for (size_t i = 0; i < n; i++) {
            double id = (double)v.id[i]; /* exact: ids < 2^32 */
            rec[5 * i] = id;
            rec[5 * i + 1] = v.x[i];
            rec[5 * i + 2] = v.y[i];
            rec[5 * i + 3] = v.vx[i];
            rec[5 * i + 4] = v.vy[i];
        }
    rc = dm_ctx_agree(s->ctx, rc);
    if (rc != DM_OK) {
        dm_free(rec);
        return rc;
    }
    double *all = NULL, *out = NULL;
    if (s->rank == 0) {
        all = dm_malloc(sizeof *all * 5 * (size_t)s->n_global);
        out = dm_malloc(sizeof *out * 4 * (size_t)s->n_global + HEADER + 8);
        if (!all || !out) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for a checkpoint");
    }
    rc = dm_ctx_agree(s->ctx, rc);
    if (rc == DM_OK) rc = dm_flock_gather_records(s, rec, n, 5, all);
    if (rc == DM_OK && s->rank == 0) {
        ck_header h;
        header_of(&h, s, s->iteration);
        memcpy(out, &h, HEADER);
        double *r = (double *)((char *)out + HEADER);
        unsigned char *seen = dm_calloc((size_t)s->n_global, 1);
        if (!seen) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for a checkpoint");
        for (uint64_t k = 0; k < s->n_global && rc == DM_OK; k++) {
            uint64_t id = (uint64_t)all[5 * k];
            DM_ASSERT(id < s->n_global && !seen[id]);
            seen[id] = 1;
            memcpy(&r[4 * id], &all[5 * k + 1], 4 * sizeof(double));
        }
        dm_free(seen);
        size_t body = HEADER + 32 * (size_t)s->n_global;
        uint32_t tail[2] = {(uint32_t)crc32_z(crc32(0L, Z_NULL, 0), (const Bytef *)out, body), 0};
        memcpy((char *)out + body, tail, 8);
        if (rc == DM_OK) rc = dm_write_file_atomic(path, out, body + 8);
    }
    dm_free(rec);
    dm_free(all);
    dm_free(out);
    return dm_ctx_agree(s->ctx, rc);
}

int dm_flock_checkpoint_target(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return DM_ERR(DM_ERR_INVALID_ARG, "%s: the checkpoint file is a directory; name a file", path);
        const char *kind = dm_special_file(path);
        if (kind)
            return DM_ERR(DM_ERR_INVALID_ARG, "%s: the checkpoint file is not a regular file (%s); name a file", path,
                          kind);
        /* an existing file is replaced only when it is a checkpoint (of any version) or empty: a
         * mistyped --checkpoint naming the input or a result must not be overwritten */
        if (st.st_size > 0) {
            FILE *f = fopen(path, "rb");
            char magic[8] = {0};
            size_t got = f ? fread(magic, 1, 8, f) : 0;
            if (f) fclose(f);
            if (!f) return DM_ERR(DM_ERR_IO, "%s: cannot read the existing checkpoint file: %s", path, strerror(errno));
            if (got < 7 || memcmp(magic, MAGIC, 7) != 0)
                return DM_ERR(DM_ERR_INVALID_ARG,
                              "%s: exists and is not a docmine flock checkpoint; not overwriting it (name another "
                              "--checkpoint file or remove this one)",
                              path);
        }
    }
    /* its folder must exist and take files: said now, not at the first checkpoint */
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else if ((size_t)(slash - path) >= sizeof dir) return DM_ERR(DM_ERR_INVALID_ARG, "%s: path too long", path);
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (stat(dir, &st) != 0)
        return DM_ERR(DM_ERR_IO, "%s: cannot write the checkpoint: its folder %s: %s", path, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return DM_ERR(DM_ERR_IO, "%s: cannot write the checkpoint: %s is not a folder", path, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return DM_ERR(DM_ERR_IO, "%s: cannot write the checkpoint in the folder %s: %s", path, dir, strerror(errno));
    return DM_OK;
}

int dm_flock_checkpoint_due(const dm_flock_options *o, int iteration)
{
    /* the last one too: a --resume of it then only redoes the clustering (other cluster options) */
    return o->checkpoint_every > 0 && (iteration % o->checkpoint_every == 0 || iteration >= o->iterations);
}

/* ---- reading ---------------------------------------------------------------------------------- */

static int read_at(FILE *f, const char *path, long long off, void *buf, size_t n)
{
    if (fseeko(f, (off_t)off, SEEK_SET) != 0 || fread(buf, 1, n, f) != n)
        return DM_ERR(DM_ERR_FORMAT, "%s: truncated checkpoint", path);
    return DM_OK;
}

/* Checks the CRC of the whole file (every byte but the 8 of the tail) before anything in the
 * header is believed, so that a corrupt header says so instead of "other options"; *size gets
 * the file's size. */
static int check_crc(FILE *f, const char *path, long long *size)
{
    if (fseeko(f, 0, SEEK_END) != 0) return DM_ERR(DM_ERR_IO, "%s: seek failed", path);
    *size = (long long)ftello(f);
    long long body = *size - 8, at = 0;
    if (body < HEADER) return DM_ERR(DM_ERR_FORMAT, "%s: truncated checkpoint", path);
    if (fseeko(f, 0, SEEK_SET) != 0) return DM_ERR(DM_ERR_IO, "%s: seek failed", path);
    uLong crc = crc32(0L, Z_NULL, 0);
    char buf[1 << 16];
    while (at < body) {
        size_t m = (size_t)(body - at < (long long)sizeof buf ? body - at : (long long)sizeof buf);
        if (fread(buf, 1, m, f) != m) return DM_ERR(DM_ERR_IO, "%s: read failed", path);
        crc = crc32(crc, (const Bytef *)buf, (uInt)m);
        at += (long long)m;
    }
    uint32_t tail[2];
    if (fread(tail, 1, 8, f) != 8) return DM_ERR(DM_ERR_IO, "%s: read failed", path);
    if (tail[0] != (uint32_t)crc)
        return DM_ERR(DM_ERR_FORMAT, "%s: checkpoint checksum mismatch (a truncated or corrupt file)", path);
    return DM_OK;
}

/* The header h of path against want (this run's): the same documents, input and options; size:
 * the file's (-1: not known here). */
static const char *backend_name(uint32_t b)
{
    return b == DM_BACKEND_CPU ? "cpu" : b == DM_BACKEND_CUDA ? "cuda" : "unknown";
}

static int check_header(const ck_header *h, const ck_header *want, const char *path, long long size)
{
    if (h->version != VERSION)
        return DM_ERR(DM_ERR_FORMAT,
                      "%s: checkpoint format version %u, this docmine reads version %u%s", path,
                      (unsigned)h->version, VERSION,
                      h->version == 1 ? " (version 1 does not record its input: run again without --resume)" : "");
    /* (a count of documents beyond 2^40 matches no file of this size) */
    if (size >= 0 && (h->docs >= ((uint64_t)1 << 40) || size != HEADER + 32 * (long long)h->docs + 8))
        return DM_ERR(DM_ERR_FORMAT, "%s: checkpoint of %lld bytes, not the size of its %llu documents", path, size,
                      (unsigned long long)h->docs);
    if (h->docs != want->docs)
        return DM_ERR(DM_ERR_INVALID_ARG, "%s: checkpoint of %llu documents, the input has %llu", path,
                      (unsigned long long)h->docs, (unsigned long long)want->docs);
    if (h->input != want->input)
        return DM_ERR(DM_ERR_INVALID_ARG,
                      "%s: the checkpoint was written for another input (its documents' ids or vectors "
                      "differ); resume with the input of the interrupted run",
                      path);
    /* the backends' trajectories agree to rounding, not bit for bit: a resume on the other one
     * would give neither run's result (a file that does not record it is taken as it is) */
    if (h->backend > DM_BACKEND_CUDA)
        return DM_ERR(DM_ERR_FORMAT, "%s: checkpoint of an unknown backend (%u)", path, (unsigned)h->backend);
    if (h->backend != 0 && h->backend != want->backend)
        return DM_ERR(DM_ERR_INVALID_ARG,
                      "%s: the checkpoint was written by the %s backend, this run uses the %s backend; resume "
                      "with --backend %s (the backends agree to rounding, not bit for bit) or run again "
                      "without --resume",
                      path, backend_name(h->backend), backend_name(want->backend), backend_name(h->backend));
    /* the first option that differs, by its name, with both values */
    if (h->seed != want->seed)
        return DM_ERR(DM_ERR_INVALID_ARG,
                      "%s: the checkpoint was written with --seed %llu, this run has --seed %llu; resume with the "
                      "options of the interrupted run",
                      path, (unsigned long long)h->seed, (unsigned long long)want->seed);
    if (h->iterations != want->iterations)
        return DM_ERR(DM_ERR_INVALID_ARG,
                      "%s: the checkpoint was written with --iterations %lld, this run has --iterations %lld; resume "
                      "with the options of the interrupted run",
                      path, (long long)h->iterations, (long long)want->iterations);
    static const char *const pname[10] = {"--radius",
                                          "--neighbours",
                                          "--threshold",
                                          "--weights (separation)",
                                          "--weights (dissimilar)",
                                          "--weights (alignment)",
                                          "--weights (cohesion)",
                                          "--vmax",
                                          "--shrink",
                                          "min_dist"};
    for (int k = 0; k < 10; k++)
        if (memcmp(&h->p[k], &want->p[k], sizeof h->p[k]) != 0) {
            /* as short as still tells them apart */
            char a[32], b[32];
            for (int digits = 6; digits <= 17; digits++) {
                snprintf(a, sizeof a, "%.*g", digits, h->p[k]);
                snprintf(b, sizeof b, "%.*g", digits, want->p[k]);
                if (strcmp(a, b) != 0) break;
            }
            return DM_ERR(DM_ERR_INVALID_ARG,
                          "%s: the checkpoint was written with %s %s, this run has %s %s; resume with the "
                          "options of the interrupted run",
                          path, pname[k], a, pname[k], b);
        }
    if (h->iteration < 0 || h->iteration > h->iterations)
        return DM_ERR(DM_ERR_FORMAT, "%s: bad iteration %lld", path, (long long)h->iteration);
    return DM_OK;
}

int dm_flock_checkpoint_read_rows(const dm_flock_sim *s, const char *path, uint64_t first, uint64_t n, double *x,
                                  double *y, double *vx, double *vy, int *iteration)
{
    FILE *f;
    DM_TRY(dm_open_input(&f, path, "--resume: checkpoint"));
    ck_header h, want;
    memset(&h, 0, sizeof h);
    /* a file shorter than the header: empty, foreign or a truncated checkpoint, said as such */
    size_t got = fread(&h, 1, HEADER, f);
    int rc = DM_OK;
    if (got == 0) rc = DM_ERR(DM_ERR_FORMAT, "%s: an empty file, not a docmine flock checkpoint", path);
    else if (got < 8 || memcmp(h.magic, MAGIC, 8) != 0)
        rc = DM_ERR(DM_ERR_FORMAT, "%s: not a docmine flock checkpoint", path);
    else if (got < HEADER)
        rc = DM_ERR(DM_ERR_FORMAT, "%s: truncated checkpoint (%zu bytes, shorter than its %d-byte header)", path, got,
                    HEADER);
    header_of(&want, s, 0);
    /* one reader (the rank with the first documents) checks the CRC of the whole file */
    long long size = -1;
    if (rc == DM_OK && first == 0) rc = check_crc(f, path, &size);
    if (rc == DM_OK) rc = check_header(&h, &want, path, size);
    double rec[4 * 1024];
    for (uint64_t k = 0; k < n && rc == DM_OK; k += 1024) {
        size_t m = (size_t)(n - k < 1024 ? n - k : 1024);
        rc = read_at(f, path, HEADER + 32LL * (long long)(first + k), rec, 32 * m);
        for (size_t j = 0; j < m && rc == DM_OK; j++) {
            x[k + j] = rec[4 * j];
            y[k + j] = rec[4 * j + 1];
            vx[k + j] = rec[4 * j + 2];
            vy[k + j] = rec[4 * j + 3];
        }
    }
    fclose(f);
    if (rc == DM_OK) *iteration = (int)h.iteration;
    return rc;
}
