/* Outputs of a clustering from each rank's own input rows (DESIGN.md section 8), so that the
 * work of every rank is proportional to its share and nothing of size N passes through one rank:
 * the final state of the flock fetched back to the ranks holding the documents' rows, true
 * classes numbered over all ranks, the quality metrics from merged contingency tables, top terms
 * reduced by owner rank of the cluster, the PNG rendered per rank and merged by a max-reduction,
 * and assignments.tsv / positions.csv formatted per rank and written in rank order, every rank
 * writing its own bytes at its offset with MPI-IO into one temporary file that rank 0 renames
 * (dm_flock_write_ordered; through rank 0 when MPI-IO cannot open the file on every rank or
 * DOCMINE_ORDERED_WRITE=gather). Every file is the same for any number of ranks (the earlier
 * writers gathered all documents to rank 0; these replaced them byte for byte). Reference:
 * flock_output.c (dm_flock_png_write); tests compare the files across rank counts. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <omp.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/status.h"
#include "flock/flock_impl.h"

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* (key, count) records by key. */
static int cmp_u64_first(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* ---- the final state at the rows -------------------------------------------------------------- */

void dm_flock_rows_free(dm_flock_rows *r)
{
    dm_free(r->x);
    dm_free(r->y);
    dm_free(r->cluster);
    memset(r, 0, sizeof *r);
}

/* The rank holding global row id (bases: P row_base values in rank order, shares tile 0..N-1). */
static int row_owner(const uint64_t *bases, int P, uint64_t id)
{
    int lo = 0, hi = P - 1;
    while (lo < hi) { /* last rank whose base <= id (empty ranks share a base: take the last) */
        int mid = (lo + hi + 1) / 2;
        if (bases[mid] <= id) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

typedef struct row_rec {
    double id, x, y, cl;
} row_rec;

int dm_flock_rows_fetch(dm_flock_rows *out, dm_flock_sim *s, const dm_vectors *v, int with_clusters)
{
    memset(out, 0, sizeof *out);
    out->row_base = v->row_base;
    out->n_rows = v->n_rows;
    const int P = s->size;
    size_t nr = (size_t)v->n_rows;
    dm_flock_view view;
    int rc = dm_flock_sim_view(s, &view);
    const int32_t *lab = with_clusters ? s->labels : NULL;
    int32_t nc = 0;
    if (lab)
        for (size_t i = 0; i < view.n; i++)
            if (lab[i] + 1 > nc) nc = lab[i] + 1;
    MPI_Allreduce(MPI_IN_PLACE, &nc, 1, MPI_INT32_T, MPI_MAX, s->comm);
    out->n_clusters = nc;
    out->x = dm_malloc(sizeof *out->x * (nr ? nr : 1));
    out->y = dm_malloc(sizeof *out->y * (nr ? nr : 1));
    out->cluster = dm_malloc(sizeof *out->cluster * (nr ? nr : 1));
    uint64_t *bases = dm_malloc(sizeof *bases * (size_t)P);
    int *scnt = dm_calloc((size_t)P, sizeof *scnt), *rcnt = dm_calloc((size_t)P, sizeof *rcnt);
    int *sdis = dm_calloc((size_t)P + 1, sizeof *sdis), *rdis = dm_calloc((size_t)P + 1, sizeof *rdis);
    int *dest = dm_malloc(sizeof *dest * (view.n ? view.n : 1));
    if (rc == DM_OK && (!out->x || !out->y || !out->cluster || !bases || !scnt || !rcnt || !sdis || !rdis || !dest))
        rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    if (rc == DM_OK && (view.n > INT32_MAX || nr > INT32_MAX))
        rc = DM_ERR(DM_ERR_UNSUPPORTED, "flock: more than 2^31 documents on a rank");
    rc = dm_ctx_agree(s->ctx, rc);
    row_rec *send = NULL, *recv = NULL;
    MPI_Datatype rt = MPI_DATATYPE_NULL;
    if (rc == DM_OK) {
        uint64_t mine = v->row_base;
        MPI_Allgather(&mine, 1, MPI_UINT64_T, bases, 1, MPI_UINT64_T, s->comm);
        for (size_t i = 0; i < view.n; i++) {
            dest[i] = row_owner(bases, P, view.id[i]);
            scnt[dest[i]]++;
        }
        MPI_Alltoall(scnt, 1, MPI_INT, rcnt, 1, MPI_INT, s->comm);
        long long rtot = 0;
        for (int q = 0; q < P; q++) {
            sdis[q + 1] = sdis[q] + scnt[q];
            rtot += rcnt[q];
            rdis[q + 1] = (int)(rdis[q] + rcnt[q]);
        }
        if (rtot != (long long)nr) rc = DM_ERR(DM_ERR_FORMAT, "flock: %lld final states for %zu rows", rtot, nr);
        send = dm_malloc(sizeof *send * (view.n ? view.n : 1));
        recv = dm_malloc(sizeof *recv * (nr ? nr : 1));
        if (rc == DM_OK && (!send || !recv)) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    }
    rc = dm_ctx_agree(s->ctx, rc);
    if (rc == DM_OK) {
        int *at = dm_malloc(sizeof *at * (size_t)P);
        if (!at) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
        for (int q = 0; q < P && at; q++) at[q] = sdis[q];
        for (size_t i = 0; i < view.n && at; i++) {
            row_rec *r = &send[at[dest[i]]++];
            r->id = (double)view.id[i];
            r->x = view.x[i];
            r->y = view.y[i];
            r->cl = lab ? (double)lab[i] : -1.0;
        }
        dm_free(at);
    }
    rc = dm_ctx_agree(s->ctx, rc);
    if (rc == DM_OK) {
        MPI_Type_contiguous(4, MPI_DOUBLE, &rt);
        MPI_Type_commit(&rt);
        if (MPI_Alltoallv(send, scnt, sdis, rt, recv, rcnt, rdis, rt, s->comm) != MPI_SUCCESS)
            rc = DM_ERR(DM_ERR_MPI, "flock: MPI_Alltoallv of the final states failed");
        MPI_Type_free(&rt);
        uint8_t *seen = dm_calloc(nr ? nr : 1, 1);
        if (rc == DM_OK && !seen) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
        for (size_t k = 0; k < nr && rc == DM_OK; k++) {
            uint64_t id = (uint64_t)recv[k].id;
            if (id < v->row_base || id - v->row_base >= nr || seen[id - v->row_base]) {
                rc = DM_ERR(DM_ERR_FORMAT, "flock: final state of document %llu sent to the wrong rank",
                            (unsigned long long)id);
                break;
            }
            size_t r = (size_t)(id - v->row_base);
            seen[r] = 1;
            out->x[r] = recv[k].x;
            out->y[r] = recv[k].y;
            out->cluster[r] = (int32_t)recv[k].cl;
        }
        dm_free(seen);
    }
    dm_free(bases);
    dm_free(scnt);
    dm_free(rcnt);
    dm_free(sdis);
    dm_free(rdis);
    dm_free(dest);
    dm_free(send);
    dm_free(recv);
    rc = dm_ctx_agree(s->ctx, rc);
    if (rc != DM_OK) dm_flock_rows_free(out);
    return rc;
}

/* ---- files written in rank order ---------------------------------------------------------------- */

/* Bytes per message of the gather fallback and per collective write (MPI counts are ints). */
#define ORDERED_CHUNK ((size_t)16 << 20)

/* The fallback (and the writer before MPI-IO): rank 0 receives every rank's bytes in rank order
 * and writes them alone, through dm_atomic_open / dm_atomic_commit. Every buf is non-NULL (the
 * caller agreed on it). */
static int write_ordered_gather(const char *path, const char *buf, size_t len, const dm_ctx *ctx)
{
    if (ctx->rank != 0) {
        /* rank 0 says whether to send (it could open the file and has room); then the size and
         * the bytes in chunks */
        int go = 0;
        MPI_Recv(&go, 1, MPI_INT, 0, 609, ctx->world, MPI_STATUS_IGNORE);
        if (go) {
            uint64_t n = (uint64_t)len;
            MPI_Send(&n, 1, MPI_UINT64_T, 0, 610, ctx->world);
            for (size_t at = 0; at < len; at += ORDERED_CHUNK) {
                size_t c = len - at < ORDERED_CHUNK ? len - at : ORDERED_CHUNK;
                MPI_Send(buf + at, (int)c, MPI_CHAR, 0, 611, ctx->world);
            }
        }
        return dm_ctx_agree(ctx, DM_OK);
    }
    dm_atomic_file f;
    int rc = dm_atomic_open(&f, path);
    const int open_ok = rc == DM_OK;
    if (open_ok && len && fwrite(buf, 1, len, f.fp) != len) rc = DM_ERR(DM_ERR_IO, "%s: write failed", path);
    char *tmp = ctx->size > 1 && rc == DM_OK ? dm_malloc(ORDERED_CHUNK) : NULL;
    if (ctx->size > 1 && !tmp && rc == DM_OK) rc = DM_ERR(DM_ERR_NOMEM, "out of memory");
    for (int q = 1; q < ctx->size; q++) {
        int go = rc == DM_OK;
        MPI_Send(&go, 1, MPI_INT, q, 609, ctx->world);
        if (!go) continue;
        uint64_t n = 0;
        MPI_Recv(&n, 1, MPI_UINT64_T, q, 610, ctx->world, MPI_STATUS_IGNORE);
        for (uint64_t at = 0; at < n; at += ORDERED_CHUNK) {
            size_t c = n - at < ORDERED_CHUNK ? (size_t)(n - at) : ORDERED_CHUNK;
            MPI_Recv(tmp, (int)c, MPI_CHAR, q, 611, ctx->world, MPI_STATUS_IGNORE);
            if (rc == DM_OK && fwrite(tmp, 1, c, f.fp) != c) rc = DM_ERR(DM_ERR_IO, "%s: write failed", path);
        }
    }
    dm_free(tmp);
    if (open_ok) {
        if (rc == DM_OK) rc = dm_atomic_commit(&f);
        else dm_atomic_abort(&f);
    }
    return dm_ctx_agree(ctx, rc);
}

/* DOCMINE_ORDERED_WRITE on rank 0 (broadcast, so that the ranks cannot take different paths):
 * 1 = gather through rank 0. */
static int ordered_gather_wanted(const dm_ctx *ctx)
{
    int gather = 0;
    if (ctx->rank == 0) {
        const char *e = getenv("DOCMINE_ORDERED_WRITE");
        gather = e && strcmp(e, "gather") == 0;
        static int warned;
        if (e && *e && !gather && strcmp(e, "mpiio") != 0 && !warned) {
            warned = 1;
            dm_log_warn("DOCMINE_ORDERED_WRITE=%s: unknown (gather or mpiio); using MPI-IO", e);
        }
    }
    MPI_Bcast(&gather, 1, MPI_INT, 0, ctx->world);
    return gather;
}

/* Every rank writes its bytes at its offset (the lengths of the ranks before it) into rank 0's
 * temporary file, opened by all with MPI-IO; rank 0 renames it once every rank succeeded. */
int dm_flock_write_ordered(const char *path, const char *buf, size_t len, const dm_ctx *ctx)
{
    if (ctx->size == 1) return buf ? dm_write_file_atomic(path, buf, len) : DM_ERR_NOMEM;
    /* buf NULL: that rank recorded its message where the buffer failed; no file is created */
    int rc = dm_ctx_agree(ctx, buf ? DM_OK : DM_ERR_NOMEM);
    if (rc != DM_OK) return rc;
    if (ordered_gather_wanted(ctx)) {
        if (ctx->rank == 0) dm_log_debug("%s: written through rank 0 (DOCMINE_ORDERED_WRITE=gather)", path);
        return write_ordered_gather(path, buf, len, ctx);
    }
    const int rank = ctx->rank, P = ctx->size;
    uint64_t mine = (uint64_t)len, base = 0;
    uint64_t pieces = (mine + ORDERED_CHUNK - 1) / ORDERED_CHUNK, max_pieces = 0;
    if (MPI_Exscan(&mine, &base, 1, MPI_UINT64_T, MPI_SUM, ctx->world) != MPI_SUCCESS ||
        MPI_Allreduce(&pieces, &max_pieces, 1, MPI_UINT64_T, MPI_MAX, ctx->world) != MPI_SUCCESS)
        rc = DM_ERR(DM_ERR_MPI, "%s: MPI_Exscan/Allreduce of the lengths failed", path);
    if (rank == 0) base = 0; /* MPI_Exscan leaves rank 0's undefined */

    /* rank 0 creates the temporary next to the final path (an empty file) and names it */
    dm_atomic_file f;
    char tmp[sizeof f.tmp];
    memset(tmp, 0, sizeof tmp);
    if (rank == 0 && rc == DM_OK) {
        rc = dm_atomic_open(&f, path);
        if (rc == DM_OK) {
            int bad = fclose(f.fp) != 0;
            f.fp = NULL;
            if (bad) {
                rc = DM_ERR(DM_ERR_IO, "%s: cannot create: %s", f.tmp, strerror(errno));
                unlink(f.tmp);
            }
            memcpy(tmp, f.tmp, sizeof tmp);
        }
    }
    rc = dm_ctx_agree(ctx, rc);
    if (rc != DM_OK) return rc;
    MPI_Bcast(tmp, (int)sizeof tmp, MPI_CHAR, 0, ctx->world);

    /* every rank must see rank 0's temporary (DIR on a file system every node sees); a rank that
     * does not takes the fallback below at once: MPI_File_open's failure there came back on the
     * other ranks as another process's error code, which MPICH printed as "Invalid error code"
     * lines. The default error handler of files returns codes; MPI_File_open fails on every rank
     * when one fails (ROMIO agrees); the first rank that failed names the error */
    MPI_File fh = MPI_FILE_NULL;
    int seen = access(tmp, W_OK) == 0, why = seen ? 0 : errno;
    int blind = seen ? P : rank, first_blind = P;
    MPI_Allreduce(&blind, &first_blind, 1, MPI_INT, MPI_MIN, ctx->world);
    int e = first_blind < P ? MPI_ERR_FILE : MPI_File_open(ctx->world, tmp, MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    int failed = e == MPI_SUCCESS ? P : rank, first_failed = P;
    MPI_Allreduce(&failed, &first_failed, 1, MPI_INT, MPI_MIN, ctx->world);
    if (first_failed < P) {
        if (rank == first_blind) { /* a fallback, not an error: the message goes to the log */
            dm_log_warn("%s: not on rank %d's file system (%s); writing %s through rank 0 instead", tmp, rank,
                        strerror(why), path);
        } else if (first_blind == P && rank == first_failed) {
            dm_mpi_io_error(e, "MPI_File_open", tmp);
            dm_log_warn("%s (MPI-IO cannot open it on every rank); writing %s through rank 0 instead",
                        dm_error_message(), path);
            dm_error_clear();
        }
        /* an implementation that left the file open on some ranks keeps the handle: closing is
         * collective over ranks that do not hold it */
        if (rank == 0) unlink(tmp);
        return write_ordered_gather(path, buf, len, ctx);
    }
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);

    /* the same number of collective writes on every rank; a rank past its bytes (or failed)
     * writes 0 bytes */
    for (uint64_t k = 0; k < max_pieces; k++) {
        uint64_t at = k * ORDERED_CHUNK < mine ? k * ORDERED_CHUNK : mine;
        size_t c = rc == DM_OK && mine - at > 0 ? (size_t)(mine - at < ORDERED_CHUNK ? mine - at : ORDERED_CHUNK) : 0;
        MPI_Status st;
        e = MPI_File_write_at_all(fh, (MPI_Offset)(base + at), buf + at, (int)c, MPI_BYTE, &st);
        if (rc != DM_OK) continue;
        if (e != MPI_SUCCESS) {
            rc = dm_mpi_io_error(e, "MPI_File_write_at_all", path);
            continue;
        }
        int got = 0;
        MPI_Get_count(&st, MPI_BYTE, &got);
        if (got != (int)c) rc = DM_ERR(DM_ERR_IO, "%s: short write (%d of %zu bytes)", path, got, c);
    }
    return dm_mpi_file_commit(&fh, tmp, path, rc, ctx);
}

/* A growing text buffer. */
typedef struct tbuf {
    char *p;
    size_t n, cap;
    int err;
} tbuf;

static void tb_reserve(tbuf *b, size_t more)
{
    if (b->err || b->n + more <= b->cap) return;
    size_t c = b->cap ? b->cap : 4096;
    while (c < b->n + more) c *= 2;
    char *q = dm_realloc(b->p, c);
    if (!q) {
        b->err = 1;
        return;
    }
    b->p = q;
    b->cap = c;
}

static void tb_put(tbuf *b, const char *s, size_t len)
{
    tb_reserve(b, len);
    if (b->err) return;
    memcpy(b->p + b->n, s, len);
    b->n += len;
}

static void tb_printf(tbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tb_printf(tbuf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k < 0) {
        b->err = 1;
        return;
    }
    if ((size_t)k < sizeof tmp) {
        tb_put(b, tmp, (size_t)k);
        return;
    }
    tb_reserve(b, (size_t)k + 1);
    if (b->err) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)k;
}

/* TSV fields: tabs and newlines become spaces (as in clusters.tsv, dm_flock_clusters_tsv). */
static void tb_tsv(tbuf *b, const char *s)
{
    size_t len = strlen(s);
    tb_reserve(b, len);
    if (b->err) return;
    for (size_t i = 0; i < len; i++) b->p[b->n + i] = s[i] == '\t' || s[i] == '\n' || s[i] == '\r' ? ' ' : s[i];
    b->n += len;
}

/* CSV fields, quoted when needed (as flock_job.c's csv_field). */
static void tb_csv(tbuf *b, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        tb_put(b, s, strlen(s));
        return;
    }
    tb_put(b, "\"", 1);
    for (; *s; s++) {
        if (*s == '"') tb_put(b, "\"", 1);
        tb_put(b, s, 1);
    }
    tb_put(b, "\"", 1);
}

/* Appends rows [0, n) formatted by fn: chunks of rows formatted in parallel (a buffer each) and
 * appended in row order, so the bytes do not depend on the threads. */
typedef void tb_row_fn(tbuf *b, uint64_t i, const void *arg);
static void tb_rows(tbuf *b, uint64_t n, tb_row_fn *fn, const void *arg)
{
    const uint64_t rows_per_chunk = 4096;
    const long nc = (long)((n + rows_per_chunk - 1) / rows_per_chunk);
    tbuf *cb = nc ? dm_calloc((size_t)nc, sizeof *cb) : NULL;
    if (nc && !cb) {
        b->err = 1;
        return;
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (long c = 0; c < nc; c++) {
        uint64_t hi = (uint64_t)(c + 1) * rows_per_chunk < n ? (uint64_t)(c + 1) * rows_per_chunk : n;
        for (uint64_t i = (uint64_t)c * rows_per_chunk; i < hi && !cb[c].err; i++) fn(&cb[c], i, arg);
    }
    for (long c = 0; c < nc; c++) {
        if (cb[c].err) b->err = 1;
        else tb_put(b, cb[c].p ? cb[c].p : "", cb[c].n);
        dm_free(cb[c].p);
    }
    dm_free(cb);
}

static int tb_write(tbuf *b, const char *path, const dm_ctx *ctx)
{
    if (b->err) DM_ERR(DM_ERR_NOMEM, "out of memory formatting %s", path);
    int rc = dm_flock_write_ordered(path, b->err ? NULL : (b->p ? b->p : ""), b->n, ctx);
    dm_free(b->p);
    memset(b, 0, sizeof *b);
    return rc;
}

/* A row's inputs for the row formatters below. */
typedef struct row_args {
    const dm_vectors *v;
    const double *x, *y;
    const int32_t *cluster;
} row_args;

static void assignment_row(tbuf *b, uint64_t i, const void *arg)
{
    const row_args *a = arg;
    tb_tsv(b, dm_vectors_id(a->v, i));
    tb_put(b, "\t", 1);
    tb_tsv(b, dm_vectors_labels(a->v, i));
    tb_printf(b, "\t%d\n", a->cluster[i]);
}

int dm_flock_write_assignments_rows(const char *path, const dm_vectors *v, const int32_t *cluster, const dm_ctx *ctx)
{
    tbuf b = {0};
    row_args a = {v, NULL, NULL, cluster};
    if (ctx->rank == 0) tb_put(&b, "doc\tlabel\tcluster\n", 18);
    tb_rows(&b, v->n_rows, assignment_row, &a);
    return tb_write(&b, path, ctx);
}

static void position_row(tbuf *b, uint64_t i, const void *arg)
{
    const row_args *a = arg;
    tb_csv(b, dm_vectors_id(a->v, i));
    tb_printf(b, ",%.17g,%.17g,%d,", a->x[i], a->y[i], a->cluster[i]);
    tb_csv(b, dm_vectors_labels(a->v, i));
    tb_put(b, "\n", 1);
}

int dm_flock_write_positions_rows(const char *path, const dm_vectors *v, const double *x, const double *y,
                                  const int32_t *cluster, const dm_ctx *ctx)
{
    tbuf b = {0};
    row_args a = {v, x, y, cluster};
    if (ctx->rank == 0) tb_put(&b, "doc,x,y,cluster,label\n", 22);
    tb_rows(&b, v->n_rows, position_row, &a);
    return tb_write(&b, path, ctx);
}

int dm_flock_write_clusters_rows(const char *path, uint64_t *noise, const int32_t *cluster, uint64_t n_rows,
                                 int32_t n_clusters, const uint32_t *terms, const double *tw, int top_k,
                                 const dm_flock_vocab *voc, const dm_ctx *ctx)
{
    *noise = 0;
    /* sizes: [0, n_clusters) clusters, [n_clusters] noise, summed on rank 0 */
    uint64_t *size = dm_calloc((size_t)n_clusters + 1, sizeof *size);
    int rc = size ? DM_OK : DM_ERR(DM_ERR_NOMEM, "out of memory");
    rc = dm_ctx_agree(ctx, rc);
    if (rc != DM_OK) {
        dm_free(size);
        return rc;
    }
    for (uint64_t i = 0; i < n_rows; i++) {
        if (cluster[i] < 0) size[n_clusters]++;
        else if (cluster[i] < n_clusters) size[cluster[i]]++;
    }
    if (ctx->size > 1 &&
        MPI_Reduce(ctx->rank == 0 ? MPI_IN_PLACE : size, size, n_clusters + 1, MPI_UINT64_T, MPI_SUM, 0, ctx->world) !=
            MPI_SUCCESS)
        rc = DM_ERR(DM_ERR_MPI, "MPI_Reduce of the cluster sizes failed");
    if (rc == DM_OK && ctx->rank == 0) {
        *noise = size[n_clusters];
        rc = dm_flock_clusters_tsv(path, size, n_clusters, terms, tw, top_k, voc);
    }
    dm_free(size);
    return dm_ctx_agree(ctx, rc);
}

/* ---- classes and quality ------------------------------------------------------------------------ */

typedef struct cname {
    const char *s;
    size_t len;
} cname;

static int cmp_cname(const void *a, const void *b)
{
    const cname *x = a, *y = b;
    int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
    if (c) return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

/* Sorted distinct names; returns the count. */
static size_t cname_uniq(cname *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_cname);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || cmp_cname(&v[m - 1], &v[i]) != 0) v[m++] = v[i];
    return m;
}

/* A row's class name: its first label ("" when unlabelled). */
static cname class_of(const dm_vectors *v, size_t i)
{
    const char *s = dm_vectors_labels(v, i);
    return (cname){s, s ? strcspn(s, ",") : 0};
}

static uint64_t cname_hash(cname c)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a */
    for (size_t k = 0; k < c.len; k++) h = (h ^ (unsigned char)c.s[k]) * 1099511628211ull;
    return h;
}

int dm_flock_classes_rows(int32_t *cls, int32_t *n_classes, const dm_vectors *v, const dm_ctx *ctx)
{
    *n_classes = 0;
    size_t n = (size_t)v->n_rows;
    /* the distinct names of this rank in one pass over the rows (an open-addressing table of
     * indices into loc; each row remembers its name's index), instead of sorting a name per row
     * (1M rows, 10 classes: 0.25-0.36 s with the sort, 0.02-0.03 s now; bench/RESULTS.md,
     * session 20) */
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    cname *loc = dm_malloc(sizeof *loc * (n ? n : 1));
    uint32_t *slot = dm_calloc(cap, sizeof *slot); /* loc index + 1, 0: empty */
    uint32_t *row_name = dm_malloc(sizeof *row_name * (n ? n : 1)); /* loc index, UINT32_MAX: none */
    int rc = loc && slot && row_name ? DM_OK : DM_ERR(DM_ERR_NOMEM, "out of memory");
    if (rc == DM_OK && n >= UINT32_MAX) rc = DM_ERR(DM_ERR_UNSUPPORTED, "more than 2^32 - 1 documents on a rank");
    size_t m = 0, bytes = 0;
    for (size_t i = 0; i < n && rc == DM_OK; i++) {
        cname c = class_of(v, i);
        row_name[i] = UINT32_MAX;
        if (!c.len) continue;
        size_t h = (size_t)cname_hash(c) & (cap - 1);
        while (slot[h] && cmp_cname(&loc[slot[h] - 1], &c) != 0) h = (h + 1) & (cap - 1);
        if (!slot[h]) {
            loc[m++] = c;
            slot[h] = (uint32_t)m;
        }
        row_name[i] = slot[h] - 1;
    }
    int32_t *gidx = dm_malloc(sizeof *gidx * (m ? m : 1)); /* loc[j]'s class */
    if (rc == DM_OK && !gidx) rc = DM_ERR(DM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < m; i++) bytes += loc[i].len + 1;
    if (rc == DM_OK && bytes > INT32_MAX) rc = DM_ERR(DM_ERR_UNSUPPORTED, "more than 2 GiB of class names on a rank");
    char *mine = dm_malloc(bytes ? bytes : 1);
    int *cnt = dm_malloc(sizeof *cnt * (size_t)ctx->size), *dis = dm_malloc(sizeof *dis * (size_t)ctx->size);
    if (rc == DM_OK && (!mine || !cnt || !dis)) rc = DM_ERR(DM_ERR_NOMEM, "out of memory");
    rc = dm_ctx_agree(ctx, rc);
    char *all = NULL;
    cname *names = NULL;
    size_t nn = 0;
    long long tot = 0;
    if (rc == DM_OK) {
        size_t at = 0;
        for (size_t i = 0; i < m; i++) {
            memcpy(mine + at, loc[i].s, loc[i].len);
            mine[at + loc[i].len] = '\0';
            at += loc[i].len + 1;
        }
        int b = (int)bytes;
        MPI_Allgather(&b, 1, MPI_INT, cnt, 1, MPI_INT, ctx->world);
        for (int q = 0; q < ctx->size; q++) {
            dis[q] = (int)tot;
            tot += cnt[q];
        }
        if (tot > INT32_MAX) rc = DM_ERR(DM_ERR_UNSUPPORTED, "more than 2 GiB of class names");
        else if (!(all = dm_malloc((size_t)tot + 1))) rc = DM_ERR(DM_ERR_NOMEM, "out of memory");
    }
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) {
        MPI_Allgatherv(mine, (int)bytes, MPI_CHAR, all, cnt, dis, MPI_CHAR, ctx->world);
        size_t k = 0;
        for (long long at = 0; at < tot; at += (long long)strlen(all + at) + 1) k++;
        names = dm_malloc(sizeof *names * (k ? k : 1));
        if (!names) rc = DM_ERR(DM_ERR_NOMEM, "out of memory");
        for (long long at = 0; names && at < tot; at += (long long)strlen(all + at) + 1)
            names[nn++] = (cname){all + at, strlen(all + at)};
        if (names) nn = cname_uniq(names, nn);
    }
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) {
        for (size_t j = 0; j < m; j++) {
            const cname *f = bsearch(&loc[j], names, nn, sizeof *names, cmp_cname);
            DM_ASSERT(f != NULL);
            gidx[j] = (int32_t)(f - names);
        }
        for (size_t i = 0; i < n; i++) cls[i] = row_name[i] == UINT32_MAX ? -1 : gidx[row_name[i]];
        *n_classes = (int32_t)nn;
    }
    dm_free(loc);
    dm_free(slot);
    dm_free(row_name);
    dm_free(gidx);
    dm_free(mine);
    dm_free(cnt);
    dm_free(dis);
    dm_free(all);
    dm_free(names);
    return rc;
}

int dm_flock_quality_rows(dm_metrics *out, const int32_t *truth, const int32_t *pred, size_t n, const dm_ctx *ctx)
{
    memset(out, 0, sizeof *out);
    uint64_t *key = NULL, *count = NULL, *rec = NULL, *all = NULL;
    size_t cells = 0;
    int rc = dm_metrics_table(&key, &count, &cells, truth, pred, n);
    if (rc == DM_OK && 2 * cells > INT32_MAX) rc = DM_ERR(DM_ERR_UNSUPPORTED, "metrics: too many cells");
    rec = dm_malloc(sizeof *rec * 2 * (cells ? cells : 1));
    int *cnt = dm_malloc(sizeof *cnt * (size_t)ctx->size), *dis = dm_malloc(sizeof *dis * (size_t)ctx->size);
    if (rc == DM_OK && (!rec || !cnt || !dis)) rc = DM_ERR(DM_ERR_NOMEM, "out of memory");
    rc = dm_ctx_agree(ctx, rc);
    long long tot = 0;
    if (rc == DM_OK) {
        for (size_t i = 0; i < cells; i++) {
            rec[2 * i] = key[i];
            rec[2 * i + 1] = count[i];
        }
        int c2 = (int)(2 * cells);
        MPI_Gather(&c2, 1, MPI_INT, cnt, 1, MPI_INT, 0, ctx->world);
        if (ctx->rank == 0) {
            for (int q = 0; q < ctx->size; q++) {
                dis[q] = (int)tot;
                tot += cnt[q];
            }
            if (tot > INT32_MAX) rc = DM_ERR(DM_ERR_UNSUPPORTED, "metrics: too many cells");
            else if (!(all = dm_malloc(sizeof *all * (size_t)(tot ? tot : 1)))) rc = DM_ERR(DM_ERR_NOMEM, "out of memory");
        }
    }
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) {
        MPI_Gatherv(rec, (int)(2 * cells), MPI_UINT64_T, all, cnt, dis, MPI_UINT64_T, 0, ctx->world);
        if (ctx->rank == 0) {
            /* merge: sort the (key, count) records by key and sum equal keys */
            size_t m = (size_t)tot / 2;
            qsort(all, m, 2 * sizeof *all, cmp_u64_first);
            size_t u = 0;
            for (size_t i = 0; i < m; i++) {
                if (u && all[2 * (u - 1)] == all[2 * i]) all[2 * (u - 1) + 1] += all[2 * i + 1];
                else {
                    all[2 * u] = all[2 * i];
                    all[2 * u + 1] = all[2 * i + 1];
                    u++;
                }
            }
            rc = dm_metrics_from_keys(out, all, all + 1, 2, u);
        }
    }
    dm_free(key);
    dm_free(count);
    dm_free(rec);
    dm_free(all);
    dm_free(cnt);
    dm_free(dis);
    return dm_ctx_agree(ctx, rc);
}

/* ---- top terms ---------------------------------------------------------------------------------- */

/* Weights are summed exactly in fixed point (2^-40 units, 128-bit), so the sums - and the order
 * of the terms - do not depend on how the rows are spread over ranks or summed. */
#define TT_SHIFT 40
typedef __int128 tt_sum;

typedef struct tt_rec {
    uint64_t key;      /* cluster << 32 | term */
    uint64_t lo, hi;   /* the sum, two's complement */
} tt_rec;

/* w in units of 2^-TT_SHIFT, rounded to nearest (ties to even): llrint(ldexp(w, TT_SHIFT)).
 * Below 2^51 the rounding is an addition of 1.5 x 2^52 (exact otherwise: no library call per
 * non-zero); w * 2^40 is exact in double. */
static tt_sum tt_fixed(float w)
{
    double x = (double)w * 1099511627776.0; /* 2^40 */
    if (fabs(x) < 2251799813685248.0) {      /* 2^51 */
        double r = x + 6755399441055744.0; /* 1.5 x 2^52: rounds to an integer */
        return (tt_sum)(int64_t)(r - 6755399441055744.0);
    }
    return (tt_sum)llrint(x);
}

static tt_sum tt_get(const tt_rec *r) { return (tt_sum)(((unsigned __int128)r->hi << 64) | r->lo); }
static void tt_set(tt_rec *r, tt_sum s)
{
    r->lo = (uint64_t)(unsigned __int128)s;
    r->hi = (uint64_t)((unsigned __int128)s >> 64);
}

/* Sorts n records made of `runs` runs each sorted by key (run r: [b[r], b[r + 1]), b[runs] = n):
 * pairwise merges, ceil(log2 runs) passes, instead of sorting records that are nearly in order.
 * *buf may be replaced (dm_free). */
static int tt_merge_runs(tt_rec **buf, size_t n, size_t *b, int runs)
{
    if (runs <= 1 || n == 0) return DM_OK;
    tt_rec *src = *buf, *dst = dm_malloc(sizeof *dst * n);
    if (!dst) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory for top terms");
    while (runs > 1) {
        int out = 0;
        for (int r = 0; r < runs; r += 2) {
            size_t lo = b[r], mid = b[r + 1], hi = r + 2 <= runs ? b[r + 2] : mid, i = lo, j = mid, o = lo;
            while (i < mid && j < hi) dst[o++] = src[j].key < src[i].key ? src[j++] : src[i++];
            while (i < mid) dst[o++] = src[i++];
            while (j < hi) dst[o++] = src[j++];
            b[out++] = lo;
        }
        b[out] = n;
        runs = out;
        tt_rec *t = src;
        src = dst;
        dst = t;
    }
    dm_free(dst);
    *buf = src;
    return DM_OK;
}

/* A segment of the top terms' first step: rows [lo, hi) of the cluster-sorted row list, all of
 * cluster c, and their records (key cluster << 32 | term, in term order, one per term; after
 * tt_merge_segs, the first segment of a cluster holds the whole cluster's records). */
typedef struct tt_seg {
    int32_t c;
    uint32_t lo, hi;
    tt_rec *rec;
    size_t n;
} tt_seg;

/* Entries per part at least: 2^16, or DOCMINE_TT_PART_ENTRIES (tests: a few, so that small
 * inputs are cut into many parts and clusters into several segments). */
static uint64_t tt_part_entries(void)
{
    const char *e = getenv("DOCMINE_TT_PART_ENTRIES");
    unsigned long long x = e ? strtoull(e, NULL, 10) : 0;
    return x >= 1 ? (uint64_t)x : (uint64_t)1 << 16;
}

/* Sums a segment's rows per term into the thread's dense accumulator (acc and touched are zero
 * on entry and on return; list is the thread's growing list of touched terms) and records the
 * sums in term order. A row with a term or weight out of range records its index in *bad_row
 * (the smallest such row) and the segment gets no records. Returns 1 when out of memory. */
static int tt_seg_sum(tt_seg *g, const uint32_t *rows, const dm_vectors *v, size_t V, tt_sum *acc,
                      uint8_t *touched, uint32_t **list, size_t *list_cap, long *bad_row)
{
    size_t nt = 0;
    int bad = 0, nomem = 0;
    for (uint32_t q = g->lo; q < g->hi && !bad && !nomem; q++) {
        uint32_t i = rows[q];
        for (uint64_t e = v->row_off[i]; e < v->row_off[i + 1]; e++) {
            uint32_t t = v->col[e];
            float w = v->val[e];
            if (t >= V || !(fabsf(w) < 4194304.0f)) { /* 2^22: the fixed point holds it */
#pragma omp critical(dm_tt_bad)
                if (*bad_row < 0 || (long)i < *bad_row) *bad_row = (long)i;
                bad = 1;
                break;
            }
            if (!touched[t]) {
                if (nt == *list_cap) {
                    size_t cap = *list_cap ? 2 * *list_cap : 4096;
                    uint32_t *l = dm_realloc(*list, sizeof *l * cap);
                    if (!l) {
                        nomem = 1;
                        break;
                    }
                    *list = l;
                    *list_cap = cap;
                }
                touched[t] = 1;
                (*list)[nt++] = t;
            }
            acc[t] += tt_fixed(w);
        }
    }
    uint32_t *l = *list;
    if (!bad && !nomem && nt) {
        /* the terms in order: read off the flags when they are many, else sorted */
        if (nt > V / 16) {
            size_t j = 0;
            for (uint32_t t = 0; t < V; t++)
                if (touched[t]) l[j++] = t;
        } else {
            qsort(l, nt, sizeof *l, cmp_u32);
        }
        if (!(g->rec = dm_malloc(sizeof *g->rec * nt))) nomem = 1;
    }
    for (size_t j = 0; j < nt; j++) {
        uint32_t t = l[j];
        if (g->rec) {
            g->rec[j].key = ((uint64_t)(uint32_t)g->c << 32) | t;
            tt_set(&g->rec[j], acc[t]);
        }
        acc[t] = 0;
        touched[t] = 0;
    }
    if (g->rec) g->n = nt;
    return nomem;
}

/* Sums the records of equal keys (r in key order) into the first of each; returns how many
 * records remain. */
static size_t tt_sum_equal(tt_rec *r, size_t n)
{
    size_t u = 0;
    for (size_t i = 0; i < n; i++) {
        if (u && r[u - 1].key == r[i].key) tt_set(&r[u - 1], tt_get(&r[u - 1]) + tt_get(&r[i]));
        else r[u++] = r[i];
    }
    return u;
}

/* Merges the k segments of one cluster (g[0..k), each in key order) into g[0]: concatenated,
 * merged (tt_merge_runs) and equal keys summed. Returns 1 when out of memory. */
static int tt_merge_segs(tt_seg *g, size_t k)
{
    size_t n = 0;
    for (size_t j = 0; j < k; j++) n += g[j].n;
    tt_rec *all = dm_malloc(sizeof *all * (n ? n : 1));
    size_t *b = dm_malloc(sizeof *b * (k + 1));
    if (!all || !b || k > INT32_MAX) {
        dm_free(all);
        dm_free(b);
        return 1;
    }
    size_t o = 0;
    for (size_t j = 0; j < k; j++) {
        b[j] = o;
        if (g[j].n) memcpy(all + o, g[j].rec, sizeof *all * g[j].n);
        o += g[j].n;
        dm_free(g[j].rec);
        g[j].rec = NULL;
        g[j].n = 0;
    }
    b[k] = n;
    int rc = tt_merge_runs(&all, n, b, (int)k);
    dm_free(b);
    if (rc != DM_OK) {
        dm_free(all);
        return 1;
    }
    g[0].rec = all;
    g[0].n = tt_sum_equal(all, n);
    return 0;
}

int dm_flock_top_terms_rows(uint32_t **terms, double **weights, const int32_t *row_cluster, int32_t nc,
                            const dm_vectors *v, int k, const dm_ctx *ctx)
{
    *terms = NULL;
    *weights = NULL;
    const int P = ctx->size;
    size_t nr = (size_t)v->n_rows, V = (size_t)v->n_cols;
    int rc = DM_OK;
    /* 1. rows by cluster (counting sort), cut into one part per thread of about equal entries;
     * each part's piece of each cluster it meets (a segment) is summed into the thread's dense
     * exact accumulator over terms, and a cluster's segments are then merged. The sums are exact,
     * so the records are the same for any cut (and as from one thread). */
    uint32_t *start = dm_calloc((size_t)nc + 1, sizeof *start);
    uint32_t *rows = dm_malloc(sizeof *rows * (nr ? nr : 1));
    uint64_t *cum = dm_malloc(sizeof *cum * (nr + 1)); /* entries before each place of rows */
    tt_rec *loc = NULL;
    size_t m = 0;
    if (!start || !rows || !cum) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for top terms");
    if (rc == DM_OK && nr > UINT32_MAX) rc = DM_ERR(DM_ERR_UNSUPPORTED, "flock: more than 2^32 rows on a rank");
    if (rc == DM_OK) {
        for (size_t i = 0; i < nr; i++)
            if (row_cluster[i] >= 0 && row_cluster[i] < nc) start[row_cluster[i] + 1]++;
        for (int32_t c = 0; c < nc; c++) start[c + 1] += start[c];
        uint32_t *at = dm_malloc(sizeof *at * ((size_t)nc ? (size_t)nc : 1));
        if (!at) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
        for (int32_t c = 0; at && c < nc; c++) at[c] = start[c];
        for (size_t i = 0; at && i < nr; i++)
            if (row_cluster[i] >= 0 && row_cluster[i] < nc) rows[at[row_cluster[i]]++] = (uint32_t)i;
        dm_free(at);
    }
    const size_t R = rc == DM_OK ? start[nc] : 0; /* rows in a cluster */
    if (rc == DM_OK) {
        cum[0] = 0;
        for (size_t q = 0; q < R; q++) {
            const uint64_t *o = v->row_off + rows[q];
            cum[q + 1] = cum[q] + (o[1] >= o[0] ? o[1] - o[0] : 0);
        }
    }
    /* a dense accumulator per thread (17 bytes per term): at most 256 MB of them; a part per
     * thread, each of at least tt_part_entries() entries */
    int nth = omp_get_max_threads();
    size_t per = (V ? V : 1) * (sizeof(tt_sum) + 1);
    if ((size_t)nth * per > ((size_t)256 << 20)) nth = (int)(((size_t)256 << 20) / per);
    if (nth < 1) nth = 1;
    const uint64_t total = rc == DM_OK ? cum[R] : 0, min_part = tt_part_entries();
    int T = (int)(total / min_part < (uint64_t)nth ? total / min_part : (uint64_t)nth);
    if (T < 1) T = 1;
    if (nth > T) nth = T;
    tt_seg *sg = dm_calloc((size_t)T + (size_t)nc + 1, sizeof *sg);
    size_t *ps = dm_malloc(sizeof *ps * ((size_t)T + 1));           /* part p: segments [ps[p], ps[p + 1]) */
    size_t *cs = dm_calloc((size_t)nc + 1, sizeof *cs);              /* cluster c: segments [cs[c], cs[c + 1]) */
    if (rc == DM_OK && (!sg || !ps || !cs)) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for top terms");
    size_t ns = 0;
    if (rc == DM_OK) {
        /* part p starts at the first place with (p / T) of the entries before it; its segments
         * follow in place (= cluster) order, so a cluster's segments are consecutive */
        size_t b0 = 0;
        int32_t c = 0;
        for (int p = 0; p < T; p++) {
            size_t b1 = R;
            if (p + 1 < T) {
                uint64_t want = (uint64_t)((unsigned __int128)total * (uint64_t)(p + 1) / (uint64_t)T);
                size_t lo = b0, hi = R;
                while (lo < hi) {
                    size_t mid = lo + (hi - lo) / 2;
                    if (cum[mid] < want) lo = mid + 1;
                    else hi = mid;
                }
                b1 = lo;
            }
            ps[p] = ns;
            while (c < nc && start[c + 1] <= b0) c++;
            for (int32_t d = c; d < nc && start[d] < b1; d++) {
                uint32_t lo = start[d] > b0 ? start[d] : (uint32_t)b0, hi = start[d + 1] < b1 ? start[d + 1] : (uint32_t)b1;
                if (lo < hi) sg[ns++] = (tt_seg){d, lo, hi, NULL, 0};
            }
            b0 = b1;
        }
        ps[T] = ns;
        for (size_t j = 0; j < ns; j++) cs[sg[j].c + 1]++;
        for (int32_t d = 0; d < nc; d++) cs[d + 1] += cs[d];
    }
    long bad_row = -1; /* the smallest row with a term or weight out of range */
    int nomem = 0;
    if (rc == DM_OK && ns) {
#pragma omp parallel num_threads(nth) reduction(|| : nomem)
        {
            tt_sum *acc = dm_calloc(V ? V : 1, sizeof *acc);
            uint8_t *touched = dm_calloc(V ? V : 1, 1);
            uint32_t *list = NULL;
            size_t list_cap = 0;
            if (!acc || !touched) nomem = 1;
#pragma omp for schedule(dynamic, 1)
            for (int p = 0; p < T; p++)
                for (size_t j = ps[p]; j < ps[p + 1] && !nomem; j++)
                    nomem = tt_seg_sum(&sg[j], rows, v, V, acc, touched, &list, &list_cap, &bad_row);
            dm_free(acc);
            dm_free(touched);
            dm_free(list);
        }
        /* each cluster's segments merged into its first (clusters in parallel) */
        if (!nomem && bad_row < 0) {
#pragma omp parallel for schedule(dynamic, 1) reduction(|| : nomem)
            for (int32_t d = 0; d < nc; d++)
                if (cs[d + 1] - cs[d] > 1) nomem = tt_merge_segs(&sg[cs[d]], cs[d + 1] - cs[d]);
        }
        if (nomem) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for top terms");
        else if (bad_row >= 0)
            rc = DM_ERR(DM_ERR_FORMAT, "flock: a term or weight of row %llu out of range",
                        (unsigned long long)(v->row_base + (uint64_t)bad_row));
    }
    if (rc == DM_OK) {
        for (int32_t d = 0; d < nc; d++)
            if (cs[d] < cs[d + 1]) m += sg[cs[d]].n;
        if (!(loc = dm_malloc(sizeof *loc * (m ? m : 1)))) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for top terms");
        size_t o = 0;
        for (int32_t d = 0; loc && d < nc; d++) {
            if (cs[d] == cs[d + 1] || !sg[cs[d]].n) continue;
            memcpy(loc + o, sg[cs[d]].rec, sizeof *loc * sg[cs[d]].n);
            o += sg[cs[d]].n;
        }
    }
    for (size_t j = 0; sg && j < ns; j++) dm_free(sg[j].rec);
    dm_free(sg);
    dm_free(ps);
    dm_free(cs);
    dm_free(cum);
    dm_free(start);
    dm_free(rows);
    rc = dm_ctx_agree(ctx, rc);
    /* 2. every (cluster, term) sum to the owner of the cluster (cluster % P); loc is sorted by key,
     * so each owner's records are contiguous runs per cluster */
    int *scnt = dm_calloc((size_t)P, sizeof *scnt), *rcnt = dm_calloc((size_t)P, sizeof *rcnt);
    int *sdis = dm_calloc((size_t)P, sizeof *sdis), *rdis = dm_calloc((size_t)P, sizeof *rdis);
    tt_rec *sbuf = NULL, *rbuf = NULL;
    long long rtot = 0;
    if (rc == DM_OK && (!scnt || !rcnt || !sdis || !rdis)) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    if (rc == DM_OK && m > INT32_MAX) rc = DM_ERR(DM_ERR_UNSUPPORTED, "flock: too many (cluster, term) pairs");
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) {
        for (size_t i = 0; i < m; i++) scnt[(int)((loc[i].key >> 32) % (uint64_t)P)]++;
        for (int q = 1; q < P; q++) sdis[q] = sdis[q - 1] + scnt[q - 1];
        sbuf = dm_malloc(sizeof *sbuf * (m ? m : 1));
        int *at = dm_malloc(sizeof *at * (size_t)P);
        if (!sbuf || !at) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
        for (int q = 0; at && q < P; q++) at[q] = sdis[q];
        for (size_t i = 0; sbuf && at && i < m; i++) sbuf[at[(int)((loc[i].key >> 32) % (uint64_t)P)]++] = loc[i];
        dm_free(at);
    }
    dm_free(loc);
    rc = dm_ctx_agree(ctx, rc);
    MPI_Datatype rt = MPI_DATATYPE_NULL;
    if (rc == DM_OK) {
        MPI_Alltoall(scnt, 1, MPI_INT, rcnt, 1, MPI_INT, ctx->world);
        for (int q = 0; q < P; q++) {
            rdis[q] = (int)rtot;
            rtot += rcnt[q];
        }
        if (rtot > INT32_MAX) rc = DM_ERR(DM_ERR_UNSUPPORTED, "flock: too many (cluster, term) pairs");
        else if (!(rbuf = dm_malloc(sizeof *rbuf * (size_t)(rtot ? rtot : 1)))) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    }
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) {
        MPI_Type_contiguous(3, MPI_UINT64_T, &rt);
        MPI_Type_commit(&rt);
        if (MPI_Alltoallv(sbuf, scnt, sdis, rt, rbuf, rcnt, rdis, rt, ctx->world) != MPI_SUCCESS)
            rc = DM_ERR(DM_ERR_MPI, "flock: MPI_Alltoallv of the term weights failed");
        MPI_Type_free(&rt);
    }
    dm_free(sbuf);
    /* 3. the owner sums and keeps the k heaviest terms of its clusters (ties: smaller term id) */
    int32_t own_nc = 0; /* clusters owned: rank, rank + P, ... */
    for (int32_t c = ctx->rank; c < nc; c += P) own_nc++;
    uint32_t *ot = dm_malloc(sizeof *ot * ((size_t)own_nc * (size_t)k + 1));
    double *ow = dm_malloc(sizeof *ow * ((size_t)own_nc * (size_t)k + 1));
    tt_sum *os = dm_malloc(sizeof *os * ((size_t)k + 1));
    if (rc == DM_OK && (!ot || !ow || !os)) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) {
        size_t n = (size_t)rtot, u = 0;
        /* each sender's records are sorted by key (its clusters in order, their terms in order) */
        size_t *b = dm_malloc(sizeof *b * ((size_t)P + 1));
        if (!b) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for top terms");
        for (int q = 0; b && q < P; q++) b[q] = (size_t)rdis[q];
        if (b) b[P] = n;
        if (rc == DM_OK) rc = tt_merge_runs(&rbuf, n, b, P);
        dm_free(b);
        if (rc != DM_OK) n = 0;
        u = tt_sum_equal(rbuf, n);
        for (size_t i = 0; i < (size_t)own_nc * (size_t)k; i++) {
            ot[i] = UINT32_MAX;
            ow[i] = 0;
        }
        int32_t cur = -1;
        for (size_t i = 0; i < u; i++) {
            int32_t c = (int32_t)(rbuf[i].key >> 32);
            uint32_t t = (uint32_t)rbuf[i].key;
            if (c >= nc) continue;
            size_t slot = (size_t)(c / P) * (size_t)k;
            uint32_t *ct = ot + slot;
            double *cw = ow + slot;
            if (c != cur) { /* a new cluster: its sums restart */
                cur = c;
                for (int j = 0; j < k; j++) os[j] = 0;
            }
            tt_sum w = tt_get(&rbuf[i]);
            int pos = k;
            while (pos > 0 && (ct[pos - 1] == UINT32_MAX || os[pos - 1] < w)) pos--;
            if (pos >= k) continue;
            memmove(ct + pos + 1, ct + pos, sizeof *ct * (size_t)(k - pos - 1));
            memmove(cw + pos + 1, cw + pos, sizeof *cw * (size_t)(k - pos - 1));
            memmove(os + pos + 1, os + pos, sizeof *os * (size_t)(k - pos - 1));
            ct[pos] = t;
            os[pos] = w;
            cw[pos] = ldexp((double)w, -TT_SHIFT);
        }
    }
    dm_free(rbuf);
    dm_free(os);
    /* 4. rank 0 gathers the owners' lists (cluster c at position c of the result) */
    uint32_t *gt = NULL;
    double *gw = NULL;
    if (rc == DM_OK && ctx->rank == 0) {
        gt = dm_malloc(sizeof *gt * ((size_t)nc * (size_t)k + 1));
        gw = dm_malloc(sizeof *gw * ((size_t)nc * (size_t)k + 1));
        *terms = dm_malloc(sizeof **terms * ((size_t)nc * (size_t)k + 1));
        *weights = dm_malloc(sizeof **weights * ((size_t)nc * (size_t)k + 1));
        if (!gt || !gw || !*terms || !*weights) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
        if ((long long)nc * k > INT32_MAX) rc = DM_ERR(DM_ERR_UNSUPPORTED, "flock: too many clusters for top terms");
    }
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) {
        int c1 = own_nc * k;
        if (ctx->rank == 0) {
            int at = 0;
            for (int q = 0; q < P; q++) {
                int oq = 0;
                for (int32_t c = q; c < nc; c += P) oq++;
                scnt[q] = oq * k;
                sdis[q] = at;
                at += oq * k;
            }
        }
        MPI_Gatherv(ot, c1, MPI_UINT32_T, gt, scnt, sdis, MPI_UINT32_T, 0, ctx->world);
        MPI_Gatherv(ow, c1, MPI_DOUBLE, gw, scnt, sdis, MPI_DOUBLE, 0, ctx->world);
        if (ctx->rank == 0)
            for (int32_t c = 0; c < nc; c++) {
                int q = c % P;
                size_t from = (size_t)sdis[q] + (size_t)(c / P) * (size_t)k, to = (size_t)c * (size_t)k;
                memcpy(*terms + to, gt + from, sizeof *gt * (size_t)k);
                memcpy(*weights + to, gw + from, sizeof *gw * (size_t)k);
            }
    }
    dm_free(gt);
    dm_free(gw);
    dm_free(ot);
    dm_free(ow);
    dm_free(scnt);
    dm_free(rcnt);
    dm_free(sdis);
    dm_free(rdis);
    rc = dm_ctx_agree(ctx, rc);
    if (rc != DM_OK) {
        dm_free(*terms);
        dm_free(*weights);
        *terms = NULL;
        *weights = NULL;
    }
    return rc;
}

/* ---- the PNG ------------------------------------------------------------------------------------ */

/* Pixels of a band of rows, one 64-bit key per pixel: bit 57 set when a point covers it, bit 56
 * the pass (clusters draw after noise), bits 24..55 the document index, bits 0..23 the colour.
 * The largest key is the point drawn last by dm_flock_png_write (noise first, then clusters, in
 * document order), so a max-reduction over ranks gives the serial picture. */
#define PNG_BAND_BYTES ((size_t)64 << 20)

int dm_flock_png_write_rows(const char *path, const double *x, const double *y, const int32_t *color, uint64_t id0,
                            size_t n, double W, double H, int max_side, const dm_ctx *ctx)
{
    if (!(W > 0 && H > 0) || max_side < 16) return dm_ctx_agree(ctx, DM_ERR(DM_ERR_INVALID_ARG, "png: bad plane or size"));
    int w = W >= H ? max_side : (int)fmax(16, max_side * W / H);
    int h = H >= W ? max_side : (int)fmax(16, max_side * H / W);
    uint64_t n_all = n;
    MPI_Allreduce(MPI_IN_PLACE, &n_all, 1, MPI_UINT64_T, MPI_SUM, ctx->world);
    double spacing = sqrt((double)w * (double)h / (double)(n_all ? n_all : 1));
    int dot = (int)fmin(5, fmax(1, spacing / 3));
    int band = (int)(PNG_BAND_BYTES / (8 * (size_t)w));
    if (band < 1) band = 1;
    if (band > h) band = h;
    uint64_t *keys = dm_malloc(8 * (size_t)w * (size_t)band);
    unsigned char *img = NULL;
    int rc = keys ? DM_OK : DM_ERR(DM_ERR_NOMEM, "png: out of memory");
    if (rc == DM_OK && ctx->rank == 0 && !(img = dm_malloc((size_t)w * (size_t)h * 3)))
        rc = DM_ERR(DM_ERR_NOMEM, "png: out of memory for a %dx%d image", w, h);
    rc = dm_ctx_agree(ctx, rc);
    for (int b0 = 0; b0 < h && rc == DM_OK; b0 += band) {
        int nb = h - b0 < band ? h - b0 : band;
        /* each thread owns a range of the band's rows: it scans every point and draws the pixels
         * of its rows only (no two threads write a pixel; a pixel's largest key does not depend on
         * the order of the points) */
#pragma omp parallel
        {
            const int T = omp_get_num_threads(), t = omp_get_thread_num();
            const int r0 = b0 + (int)((long)nb * t / T), r1 = b0 + (int)((long)nb * (t + 1) / T);
            memset(keys + (size_t)(r0 - b0) * (size_t)w, 0, 8 * (size_t)w * (size_t)(r1 - r0));
            for (size_t i = 0; i < n && r0 < r1; i++) {
                int py = (int)((1.0 - y[i] / H) * h) % h; /* (py + dy) mod h, as (py mod h + dy) mod h */
                if (py < 0) py += h;
                int any = 0;
                for (int dy = 0; dy < dot && !any; dy++) {
                    int qy = py + dy < h ? py + dy : py + dy - h;
                    any = qy >= r0 && qy < r1;
                }
                if (!any) continue;
                int32_t c = color ? color[i] : 0;
                int px = (int)(x[i] / W * w) % w;
                if (px < 0) px += w;
                unsigned char rgb[3];
                dm_flock_label_rgb(c, rgb);
                uint64_t key = ((uint64_t)1 << 57) | ((uint64_t)(c >= 0) << 56) | ((id0 + i) & 0xFFFFFFFFu) << 24 |
                               (uint64_t)rgb[0] << 16 | (uint64_t)rgb[1] << 8 | rgb[2];
                for (int dy = 0; dy < dot; dy++) {
                    int qy = py + dy < h ? py + dy : py + dy - h;
                    if (qy < r0 || qy >= r1) continue;
                    uint64_t *row = keys + (size_t)(qy - b0) * (size_t)w;
                    for (int dx = 0; dx < dot; dx++) {
                        int qx = px + dx < w ? px + dx : px + dx - w;
                        if (row[qx] < key) row[qx] = key;
                    }
                }
            }
        }
        if (ctx->size > 1 &&
            MPI_Reduce(ctx->rank == 0 ? MPI_IN_PLACE : keys, keys, w * nb, MPI_UINT64_T, MPI_MAX, 0, ctx->world) !=
                MPI_SUCCESS)
            rc = DM_ERR(DM_ERR_MPI, "png: MPI_Reduce failed");
        if (ctx->rank == 0)
#pragma omp parallel for schedule(static)
            for (size_t p = 0; p < (size_t)w * (size_t)nb; p++) {
                unsigned char *o = img + ((size_t)b0 * (size_t)w + p) * 3;
                uint64_t kk = keys[p];
                if (!kk) o[0] = o[1] = o[2] = 255;
                else {
                    o[0] = (unsigned char)(kk >> 16);
                    o[1] = (unsigned char)(kk >> 8);
                    o[2] = (unsigned char)kk;
                }
            }
    }
    dm_free(keys);
    if (rc == DM_OK && ctx->rank == 0) rc = dm_flock_png_emit_file(path, img, w, h);
    dm_free(img);
    return dm_ctx_agree(ctx, rc);
}
