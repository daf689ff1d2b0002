/* Checkpoints of a flock run: the state (x, y, vx, vy) of every document by global index at an
 * iteration, with the options that shape trajectories, so that --resume continues with the exact
 * same bits as an uninterrupted run (DESIGN.md section 7, "Checkpoints"). Rank 0 writes the file
 * atomically (temporary name + rename); every rank reads the records of its input rows, whatever
 * the number of ranks that wrote it. Reference: none (tests/flock/test_flock_mpi.c resumes and
 * compares with an uninterrupted run).
 *
 * File (little-endian, 128-byte header):
 *   char magic[8] = "DMFLOCK\1"; u32 version = 1; u32 zero; u64 documents; u64 seed;
 *   i64 iteration; i64 iterations; f64 radius, neighbours, threshold, w_separation, w_dissimilar,
 *   w_alignment, w_cohesion, v_max, shrink, min_dist;
 *   then per document (global index order) f64 x, y, vx, vy; then u32 CRC-32 (zlib) of all
 *   preceding bytes and u32 zero. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/status.h"
#include "flock/flock_impl.h"

#define HEADER 128
static const char MAGIC[8] = {'D', 'M', 'F', 'L', 'O', 'C', 'K', 1};

typedef struct ck_header {
    char magic[8];
    uint32_t version, zero;
    uint64_t docs, seed;
    int64_t iteration, iterations;
    double p[10];
} ck_header;

static void header_of(ck_header *h, const dm_flock_sim *s, int iteration)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, MAGIC, 8);
    h->version = 1;
    h->docs = s->n_global;
    h->seed = s->opt.seed;
    h->iteration = iteration;
    h->iterations = s->opt.iterations;
    const dm_flock_options *o = &s->opt;
    double p[10] = {o->radius, o->neighbours, o->threshold, o->w_separation, o->w_dissimilar,
                    o->w_alignment, o->w_cohesion, o->v_max, o->shrink, o->min_dist};
    memcpy(h->p, p, sizeof p);
}

static uLong crc_update(uLong crc, const void *data, size_t n)
{
    const Bytef *b = data;
    while (n) {
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, b, chunk);
        b += chunk;
        n -= chunk;
    }
    return crc;
}

int dm_flock_checkpoint_write(dm_flock_sim *s, const char *path)
{
    _Static_assert(sizeof(ck_header) == HEADER, "checkpoint header is 128 bytes");
    dm_flock_view v;
    int rc = dm_flock_sim_view(s, &v);
    size_t n = v.n;
    double *rec = dm_malloc(sizeof *rec * 5 * (n ? n : 1));
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
    int cnt = (int)(5 * n), *counts = NULL, *displs = NULL;
    double *all = NULL, *out = NULL;
    if (s->rank == 0) {
        counts = dm_malloc(sizeof *counts * (size_t)s->size);
        displs = dm_malloc(sizeof *displs * (size_t)s->size);
        all = dm_malloc(sizeof *all * 5 * (size_t)s->n_global);
        out = dm_malloc(sizeof *out * 4 * (size_t)s->n_global + HEADER + 8);
        if (!counts || !displs || !all || !out) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for a checkpoint");
    }
    rc = dm_ctx_agree(s->ctx, rc);
    if (rc == DM_OK && MPI_Gather(&cnt, 1, MPI_INT, counts, 1, MPI_INT, 0, s->comm) != MPI_SUCCESS)
        rc = DM_ERR(DM_ERR_MPI, "flock: MPI_Gather failed");
    if (rc == DM_OK && s->rank == 0) {
        long long tot = 0;
        for (int k = 0; k < s->size; k++) {
            displs[k] = (int)tot;
            tot += counts[k];
        }
        /* conservation: every document is owned by exactly one rank */
        DM_ASSERT(tot == 5 * (long long)s->n_global);
    }
    if (rc == DM_OK &&
        MPI_Gatherv(rec, cnt, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, s->comm) != MPI_SUCCESS)
        rc = DM_ERR(DM_ERR_MPI, "flock: MPI_Gatherv failed");
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
        uint32_t tail[2] = {(uint32_t)crc_update(crc32(0L, Z_NULL, 0), out, body), 0};
        memcpy((char *)out + body, tail, 8);
        if (rc == DM_OK) rc = dm_write_file_atomic(path, out, body + 8);
    }
    dm_free(rec);
    dm_free(counts);
    dm_free(displs);
    dm_free(all);
    dm_free(out);
    return dm_ctx_agree(s->ctx, rc);
}

static int read_at(FILE *f, const char *path, long long off, void *buf, size_t n)
{
    if (fseeko(f, (off_t)off, SEEK_SET) != 0 || fread(buf, 1, n, f) != n)
        return DM_ERR(DM_ERR_FORMAT, "%s: truncated checkpoint", path);
    return DM_OK;
}

int dm_flock_checkpoint_read_rows(const dm_flock_sim *s, const char *path, uint64_t first, uint64_t n, double *x,
                                  double *y, double *vx, double *vy, int *iteration)
{
    FILE *f;
    DM_TRY(dm_open_input(&f, path, NULL));
    ck_header h, want;
    int rc = read_at(f, path, 0, &h, HEADER);
    header_of(&want, s, 0);
    if (rc == DM_OK && (memcmp(h.magic, MAGIC, 8) != 0 || h.version != 1))
        rc = DM_ERR(DM_ERR_FORMAT, "%s: not a docmine flock checkpoint", path);
    if (rc == DM_OK && h.docs != want.docs)
        rc = DM_ERR(DM_ERR_INVALID_ARG, "%s: checkpoint of %llu documents, the input has %llu", path,
                    (unsigned long long)h.docs, (unsigned long long)want.docs);
    if (rc == DM_OK && (h.seed != want.seed || h.iterations != want.iterations || memcmp(h.p, want.p, sizeof h.p) != 0))
        rc = DM_ERR(DM_ERR_INVALID_ARG,
                    "%s: the checkpoint was written with other options (seed, iterations or model "
                    "parameters); resume with the options of the interrupted run",
                    path);
    if (rc == DM_OK && (h.iteration < 0 || h.iteration > h.iterations))
        rc = DM_ERR(DM_ERR_FORMAT, "%s: bad iteration %lld", path, (long long)h.iteration);
    if (rc == DM_OK && first == 0) {
        /* one reader (the rank with the first documents) checks the CRC of the whole file */
        uLong crc = crc32(0L, Z_NULL, 0);
        char buf[1 << 16];
        long long body = HEADER + 32LL * (long long)h.docs, at = 0;
        if (fseeko(f, 0, SEEK_SET) != 0) rc = DM_ERR(DM_ERR_IO, "%s: seek failed", path);
        while (rc == DM_OK && at < body) {
            size_t want_n = (size_t)(body - at < (long long)sizeof buf ? body - at : (long long)sizeof buf);
            if (fread(buf, 1, want_n, f) != want_n) rc = DM_ERR(DM_ERR_FORMAT, "%s: truncated checkpoint", path);
            crc = crc32(crc, (const Bytef *)buf, (uInt)want_n);
            at += (long long)want_n;
        }
        uint32_t tail[2];
        if (rc == DM_OK && fread(tail, 1, 8, f) != 8) rc = DM_ERR(DM_ERR_FORMAT, "%s: truncated checkpoint", path);
        if (rc == DM_OK && tail[0] != (uint32_t)crc) rc = DM_ERR(DM_ERR_FORMAT, "%s: checkpoint checksum mismatch", path);
    }
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
