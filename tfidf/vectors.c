/* Sparse vectors (tfidf/vectors.h): release, the `.dmv` binary CSR file (collective write through
 * MPI-IO, whole and partial reads with checksum), and the SVMlight / MatrixMarket exports.
 * Reference: the format described at dm_vectors_write in tfidf/tfidf.h. */
#define _GNU_SOURCE /* O_DIRECT */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/context.h"
#include "common/fileio.h"
#include "common/status.h"
#include "tfidf/tfidf.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the .dmv format is written as little-endian host arrays"
#endif

#define DM_VH_BYTES 64u

void dm_vectors_free(dm_vectors *v)
{
    if (!v) return;
    dm_free(v->row_off);
    dm_free(v->col);
    dm_free(v->val);
    dm_free(v->id_off);
    dm_free(v->ids);
    dm_free(v->label_off);
    dm_free(v->labels);
    memset(v, 0, sizeof *v);
}

/* ------------------------------------------------------------------------------- header */

typedef struct vheader {
    uint32_t version, flags;
    uint64_t n_rows, n_cols, nnz, id_bytes, label_bytes;
} vheader;

static void header_pack(unsigned char *b, const vheader *h)
{
    memset(b, 0, DM_VH_BYTES);
    memcpy(b, DM_VECTORS_MAGIC, 8);
    memcpy(b + 8, &h->version, 4);
    memcpy(b + 12, &h->flags, 4);
    uint64_t f[5] = {h->n_rows, h->n_cols, h->nnz, h->id_bytes, h->label_bytes};
    memcpy(b + 16, f, 40);
    uint32_t crc = (uint32_t)crc32(0L, b, 56);
    memcpy(b + 56, &crc, 4);
}

/* Section sizes in file order: row_off, col, val, id_off, ids, label_off, labels. */
#define DM_NSEC 7
static void section_sizes(uint64_t sz[DM_NSEC], const vheader *h)
{
    sz[0] = 8 * (h->n_rows + 1);
    sz[1] = 4 * h->nnz;
    sz[2] = 4 * h->nnz;
    sz[3] = 8 * (h->n_rows + 1);
    sz[4] = h->id_bytes;
    sz[5] = 8 * (h->n_rows + 1);
    sz[6] = h->label_bytes;
}

/* ------------------------------------------------------------------------------- write */

/* One rank's pieces of the seven sections. */
typedef struct vpieces {
    const void *p[DM_NSEC];
    uint64_t len[DM_NSEC];
    uint64_t *tmp[3]; /* rebased offset arrays (owned; NULL when the base is 0) */
} vpieces;

static void pieces_free(vpieces *pc)
{
    for (int i = 0; i < 3; i++) dm_free(pc->tmp[i]);
}

/* Builds the pieces of v given the global bases; `last` = this rank writes the final offset
 * entries of the three offset arrays. An offset array whose base is 0 is written as it is. */
static int pieces_make(vpieces *pc, const dm_vectors *v, uint64_t nnz_base, uint64_t id_base,
                       uint64_t label_base, int last)
{
    memset(pc, 0, sizeof *pc);
    const uint64_t *src[3] = {v->row_off, v->id_off, v->label_off};
    const uint64_t base[3] = {nnz_base, id_base, label_base};
    const uint64_t *off[3];
    uint64_t n = v->n_rows + (last ? 1 : 0);
    for (int k = 0; k < 3; k++) {
        off[k] = src[k];
        if (base[k] == 0) continue;
        pc->tmp[k] = dm_malloc(sizeof(uint64_t) * (n ? n : 1));
        if (!pc->tmp[k]) {
            pieces_free(pc);
            memset(pc, 0, sizeof *pc); /* freeable again */
            return DM_ERR(DM_ERR_NOMEM, "vectors: out of memory for the offsets");
        }
        uint64_t *t = pc->tmp[k];
        const uint64_t *o = src[k], b = base[k];
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < (int64_t)n; i++) t[i] = b + o[i];
        off[k] = t;
    }
    uint64_t nnz = v->row_off[v->n_rows];
    pc->p[0] = off[0];
    pc->len[0] = 8 * n;
    pc->p[1] = v->col;
    pc->len[1] = 4 * nnz;
    pc->p[2] = v->val;
    pc->len[2] = 4 * nnz;
    pc->p[3] = off[1];
    pc->len[3] = 8 * n;
    pc->p[4] = v->ids;
    pc->len[4] = v->id_off[v->n_rows];
    pc->p[5] = off[2];
    pc->len[5] = 8 * n;
    pc->p[6] = v->labels;
    pc->len[6] = v->label_off[v->n_rows];
    return DM_OK;
}

/* Writes the pieces (a callback, so that one process writes with stdio and several with MPI-IO)
 * while the CRC of every piece is computed in blocks by the OpenMP threads: the calling thread
 * writes and then joins the others on the blocks left. crc[s] = zlib crc32 of piece s alone;
 * blocks are combined in order (crc32_combine), so the value does not depend on the threads. */
#define DM_CRC_BLOCK ((uint64_t)4 << 20)
typedef int (*piece_write_fn)(void *ctx, int s, const void *p, uint64_t n);

/* The checksum blocks of the pieces: block i covers bytes [o, o + DM_CRC_BLOCK) of piece bs[i];
 * the blocks of piece s are first[s] .. first[s + 1]. */
typedef struct crc_plan {
    size_t nb, first[DM_NSEC + 1];
    uLong *bc; /* checksum of each block */
    int *bs;   /* piece of each block */
} crc_plan;

static void crc_plan_free(crc_plan *cp)
{
    dm_free(cp->bc);
    dm_free(cp->bs);
}

static int crc_plan_init(crc_plan *cp, const vpieces *pc)
{
    memset(cp, 0, sizeof *cp);
    for (int s = 0; s < DM_NSEC; s++) {
        cp->first[s] = cp->nb;
        cp->nb += (size_t)((pc->len[s] + DM_CRC_BLOCK - 1) / DM_CRC_BLOCK);
    }
    cp->first[DM_NSEC] = cp->nb;
    cp->bc = dm_malloc(sizeof(uLong) * (cp->nb ? cp->nb : 1));
    cp->bs = dm_malloc(sizeof(int) * (cp->nb ? cp->nb : 1));
    if (!cp->bc || !cp->bs) {
        crc_plan_free(cp);
        return DM_ERR_NOMEM;
    }
    for (int s = 0; s < DM_NSEC; s++)
        for (size_t i = cp->first[s]; i < cp->first[s + 1]; i++) cp->bs[i] = s;
    return DM_OK;
}

/* Bytes of block i: offset *o in its piece, returns the length. */
static uint64_t crc_plan_span(const crc_plan *cp, const vpieces *pc, int s, size_t i, uint64_t *o)
{
    *o = (uint64_t)(i - cp->first[s]) * DM_CRC_BLOCK;
    uint64_t len = pc->len[s] - *o;
    return len < DM_CRC_BLOCK ? len : DM_CRC_BLOCK;
}

static void crc_plan_block(crc_plan *cp, const vpieces *pc, size_t i)
{
    uint64_t o, len = crc_plan_span(cp, pc, cp->bs[i], i, &o);
    cp->bc[i] = crc32_z(crc32(0L, Z_NULL, 0), (const unsigned char *)pc->p[cp->bs[i]] + o, len);
}

/* crc[s] = the checksum of piece s, its blocks combined in order. */
static void crc_plan_combine(const crc_plan *cp, const vpieces *pc, uLong crc[DM_NSEC])
{
    for (int s = 0; s < DM_NSEC; s++) {
        crc[s] = crc32(0L, Z_NULL, 0);
        for (size_t i = cp->first[s]; i < cp->first[s + 1]; i++) {
            uint64_t o, len = crc_plan_span(cp, pc, s, i, &o);
            crc[s] = crc32_combine(crc[s], cp->bc[i], (z_off_t)len);
        }
    }
}

static int pieces_write_crc(uLong crc[DM_NSEC], const vpieces *pc, piece_write_fn wr, void *wctx)
{
    crc_plan cp;
    DM_TRY(crc_plan_init(&cp, pc));
    size_t next = 0;
    int rc = DM_OK;
#pragma omp parallel
    {
        if (omp_get_thread_num() == 0)
            for (int s = 0; s < DM_NSEC && rc == DM_OK; s++)
                if (pc->len[s]) rc = wr(wctx, s, pc->p[s], pc->len[s]);
        for (;;) {
            size_t i;
#pragma omp atomic capture
            i = next++;
            if (i >= cp.nb) break;
            crc_plan_block(&cp, pc, i);
        }
    }
    crc_plan_combine(&cp, pc, crc);
    crc_plan_free(&cp);
    return rc;
}

/* One pass over the rows (the writer and the reader check every entry): the first row that is not
 * term-sorted within n_cols (*unsorted) and the first with a weight that is NaN or infinite
 * (*nonfinite), UINT64_MAX where none. */
static void first_bad_rows(uint64_t *unsorted, uint64_t *nonfinite, const uint64_t *row_off, const uint32_t *col,
                           const float *val, uint64_t n_rows, uint64_t n_cols)
{
    uint64_t bs = UINT64_MAX, bf = UINT64_MAX;
#pragma omp parallel for schedule(static) reduction(min : bs, bf)
    for (int64_t r = 0; r < (int64_t)n_rows; r++) {
        int s_ok = 1, f_ok = 1;
        for (uint64_t k = row_off[r]; k < row_off[r + 1] && (s_ok || f_ok); k++) {
            if (s_ok && (col[k] >= n_cols || (k > row_off[r] && col[k] <= col[k - 1]))) s_ok = 0;
            if (f_ok && !isfinite(val[k])) f_ok = 0;
        }
        if (!s_ok && (uint64_t)r < bs) bs = (uint64_t)r;
        if (!f_ok && (uint64_t)r < bf) bf = (uint64_t)r;
    }
    *unsorted = bs;
    *nonfinite = bf;
}

/* Checks offsets (monotone, from 0, ending at total) of n + 1 entries. */
static int offsets_ok(const uint64_t *o, uint64_t n, uint64_t total)
{
    if (o[0] != 0 || o[n] != total) return 0;
    for (uint64_t i = 0; i < n; i++)
        if (o[i + 1] < o[i]) return 0;
    return 1;
}

/* Strings at offsets are NUL-terminated and do not run into each other. */
static int strings_ok(const uint64_t *o, uint64_t n, const char *s)
{
    for (uint64_t i = 0; i < n; i++)
        if (o[i + 1] == o[i] || s[o[i + 1] - 1] != '\0') return 0;
    return 1;
}

static int check_local(const dm_vectors *v)
{
    if (!v->row_off || !v->id_off || !v->label_off)
        return DM_ERR(DM_ERR_INVALID_ARG, "vectors: missing offset arrays");
    if (v->row_off[0] != 0 || v->id_off[0] != 0 || v->label_off[0] != 0)
        return DM_ERR(DM_ERR_INVALID_ARG, "vectors: local offsets must start at 0");
    /* what the reader refuses is not written: offsets that fall back, ids or labels that are not
     * NUL-terminated (first_bad_rows reads each row's [row_off[r], row_off[r + 1]) as given) */
    if (!offsets_ok(v->row_off, v->n_rows, v->row_off[v->n_rows]))
        return DM_ERR(DM_ERR_INVALID_ARG, "vectors: row offsets are not monotone");
    if ((v->row_off[v->n_rows] && (!v->col || !v->val)) ||
        (v->id_off[v->n_rows] && !v->ids) || (v->label_off[v->n_rows] && !v->labels))
        return DM_ERR(DM_ERR_INVALID_ARG, "vectors: missing arrays");
    if (!offsets_ok(v->id_off, v->n_rows, v->id_off[v->n_rows]) || !strings_ok(v->id_off, v->n_rows, v->ids))
        return DM_ERR(DM_ERR_INVALID_ARG, "vectors: document ids are not NUL-terminated strings at rising offsets");
    if (!offsets_ok(v->label_off, v->n_rows, v->label_off[v->n_rows]) || !strings_ok(v->label_off, v->n_rows, v->labels))
        return DM_ERR(DM_ERR_INVALID_ARG, "vectors: labels are not NUL-terminated strings at rising offsets");
    uint64_t u, r;
    first_bad_rows(&u, &r, v->row_off, v->col, v->val, v->n_rows, v->n_cols);
    if (u != UINT64_MAX)
        return DM_ERR(DM_ERR_INVALID_ARG, "vectors: row %" PRIu64 " is not term-sorted within %" PRIu64 " columns",
                      v->row_base + u, v->n_cols);
    if (r != UINT64_MAX)
        return DM_ERR(DM_ERR_INVALID_ARG, "vectors: row %" PRIu64 " has a weight that is not a finite number", v->row_base + r);
    return DM_OK;
}

static int stdio_write(void *ctx, int s, const void *p, uint64_t n)
{
    (void)s;
    dm_atomic_file *f = ctx;
    if (fwrite(p, 1, n, f->fp) != n) return DM_ERR(DM_ERR_IO, "%s: write failed: %s", f->path, strerror(errno));
    return DM_OK;
}

/* One process, direct I/O: the file (header, pieces, trailer) is cut into blocks of
 * DM_DIO_BLOCK bytes; the OpenMP threads copy blocks into aligned buffers of their own and write
 * them with O_DIRECT at their offsets through a second descriptor of the temporary file (several
 * writes in flight: one synchronous writer reached 1.6 GB/s on the GPU machine's disk, four
 * 2.2 GB/s, and the page cache copy of a buffered write costs more than the disk there;
 * bench/RESULTS.md), and they take the checksum's blocks from the same queue of work. Block 0 is
 * written first, alone: when the file system refuses O_DIRECT (EINVAL) nothing else is written
 * and 1 is returned, so that the caller writes through stdio. The block holding the end of the
 * data gets the trailer (the checksum) last; it is padded to the alignment and the file
 * truncated to its size. */
#define DM_DIO_ALIGN ((uint64_t)4096)
#define DM_DIO_BLOCK ((uint64_t)8 << 20)

typedef struct dio_file {
    int fd;
    const char *path;
    const unsigned char *seg[DM_NSEC + 1]; /* header, then the pieces */
    uint64_t seg_len[DM_NSEC + 1];
    uint64_t data;                          /* bytes before the trailer */
} dio_file;

/* Copies the file's bytes [off, off + len) (all before the trailer) to dst. */
static void dio_gather(const dio_file *d, unsigned char *dst, uint64_t off, uint64_t len)
{
    uint64_t at = 0;
    for (int s = 0; s <= DM_NSEC && len; s++) {
        uint64_t e = at + d->seg_len[s];
        if (off < e) {
            uint64_t k = e - off < len ? e - off : len;
            memcpy(dst, d->seg[s] + (off - at), (size_t)k);
            dst += k;
            off += k;
            len -= k;
        }
        at = e;
    }
}

/* Writes buf[0 .. len) (len a multiple of the alignment) at off. *refused = 1 (and DM_OK) when the
 * file system refuses direct I/O on the first write. */
static int dio_pwrite(const dio_file *d, const unsigned char *buf, uint64_t len, uint64_t off, int *refused)
{
    while (len) {
        ssize_t k = pwrite(d->fd, buf, (size_t)len, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && errno == EINVAL && refused && off == 0) {
            *refused = 1;
            return DM_OK;
        }
        if (k <= 0 || (uint64_t)k % DM_DIO_ALIGN)
            return DM_ERR(DM_ERR_IO, "%s: write failed: %s", d->path, k < 0 ? strerror(errno) : "short write");
        buf += k;
        off += (uint64_t)k;
        len -= (uint64_t)k;
    }
    return DM_OK;
}

static unsigned char *dio_buf(unsigned char **raw)
{
    *raw = dm_malloc(DM_DIO_BLOCK + 3 * DM_DIO_ALIGN);
    if (!*raw) return NULL;
    return *raw + (DM_DIO_ALIGN - (uintptr_t)*raw % DM_DIO_ALIGN) % DM_DIO_ALIGN;
}

/* Whether direct I/O is wanted (DOCMINE_DIRECT_IO=0 turns it off: buffered stdio writes). */
static int direct_io_wanted(void)
{
    const char *e = getenv("DOCMINE_DIRECT_IO");
    return !(e && strcmp(e, "0") == 0);
}

static int write_direct(const dm_atomic_file *f, const unsigned char *hb, const vpieces *pc, uLong *crc)
{
    dio_file d;
    memset(&d, 0, sizeof d);
    d.path = f->path;
#ifdef O_DIRECT
    d.fd = open(f->tmp, O_WRONLY | O_DIRECT);
#else
    d.fd = -1;
#endif
    if (d.fd < 0) return 1;
    d.seg[0] = hb;
    d.seg_len[0] = DM_VH_BYTES;
    d.data = DM_VH_BYTES;
    for (int s = 0; s < DM_NSEC; s++) {
        d.seg[s + 1] = pc->p[s];
        d.seg_len[s + 1] = pc->len[s];
        d.data += pc->len[s];
    }
    /* data blocks 0 .. last - 1 are full; block `last` holds the rest of the data and the trailer */
    const uint64_t last = d.data / DM_DIO_BLOCK;
    int rc = DM_OK, refused = 0;
    unsigned char *raw0 = NULL, *b0 = dio_buf(&raw0);
    if (!b0) rc = DM_ERR_NOMEM;
    if (rc == DM_OK && last > 0) {
        dio_gather(&d, b0, 0, DM_DIO_BLOCK);
        rc = dio_pwrite(&d, b0, DM_DIO_BLOCK, 0, &refused);
    }
    /* the checksum blocks of the pieces, then the write blocks 1 .. last - 1, from one counter */
    crc_plan cp;
    int prc = crc_plan_init(&cp, pc);
    if (rc == DM_OK) rc = prc;
    /* nothing more when block 0 failed or was refused */
    const size_t nw = rc == DM_OK && !refused && last > 1 ? (size_t)(last - 1) : 0;
    const size_t nb = rc == DM_OK && !refused ? cp.nb : 0;
    size_t next = 0;
#pragma omp parallel if (nb + nw > 1)
    {
        unsigned char *raw = NULL, *buf = NULL;
        for (;;) {
            size_t i;
#pragma omp atomic capture
            i = next++;
            if (i >= nb + nw) break;
            if (i < nb) {
                crc_plan_block(&cp, pc, i);
                continue;
            }
            int err;
#pragma omp atomic read
            err = rc;
            if (err != DM_OK) continue;
            if (!buf && !(buf = dio_buf(&raw))) err = DM_ERR_NOMEM;
            uint64_t off = (uint64_t)(i - nb + 1) * DM_DIO_BLOCK;
            if (err == DM_OK) {
                dio_gather(&d, buf, off, DM_DIO_BLOCK);
                err = dio_pwrite(&d, buf, DM_DIO_BLOCK, off, NULL);
            }
            if (err != DM_OK) {
#pragma omp critical(dm_dio_err)
                if (rc == DM_OK) rc = err;
            }
        }
        dm_free(raw);
    }
    uLong sc[DM_NSEC];
    if (rc == DM_OK && !refused) {
        crc_plan_combine(&cp, pc, sc);
        *crc = crc32_z(crc32(0L, Z_NULL, 0), hb, DM_VH_BYTES);
        for (int s = 0; s < DM_NSEC; s++) *crc = crc32_combine(*crc, sc[s], (z_off_t)pc->len[s]);
        /* the last block: the rest of the data, the trailer, zero padding */
        uint64_t off = last * DM_DIO_BLOCK, fill = d.data - off;
        uint32_t c32 = (uint32_t)*crc;
        dio_gather(&d, b0, off, fill);
        memcpy(b0 + fill, &c32, 4);
        memcpy(b0 + fill + 4, "END\n", 4);
        uint64_t len = (fill + 8 + DM_DIO_ALIGN - 1) / DM_DIO_ALIGN * DM_DIO_ALIGN;
        memset(b0 + fill + 8, 0, (size_t)(len - fill - 8));
        rc = dio_pwrite(&d, b0, len, off, last == 0 ? &refused : NULL);
        if (rc == DM_OK && !refused && ftruncate(d.fd, (off_t)(d.data + 8)) != 0)
            rc = DM_ERR(DM_ERR_IO, "%s: truncate failed: %s", f->path, strerror(errno));
    }
    if (close(d.fd) != 0 && rc == DM_OK) rc = DM_ERR(DM_ERR_IO, "%s: write failed: %s", f->path, strerror(errno));
    if (prc == DM_OK) crc_plan_free(&cp);
    dm_free(raw0);
    return rc == DM_OK && refused ? 1 : rc;
}

/* One process: direct I/O where the file system allows it, else sequential stdio. */
static int write_single(const dm_vectors *v, const char *path)
{
    vheader h = {DM_VECTORS_VERSION, v->flags, v->n_rows, v->n_cols, v->row_off[v->n_rows],
                 v->id_off[v->n_rows], v->label_off[v->n_rows]};
    unsigned char hb[DM_VH_BYTES];
    header_pack(hb, &h);
    vpieces pc;
    DM_TRY(pieces_make(&pc, v, 0, 0, 0, 1));
    dm_atomic_file f;
    int rc = dm_atomic_open(&f, path);
    if (rc < 0) {
        pieces_free(&pc);
        return rc;
    }
    uLong crc = 0, sc[DM_NSEC];
    rc = direct_io_wanted() ? write_direct(&f, hb, &pc, &crc) : 1;
    if (rc == 1) { /* buffered */
        crc = crc32_z(crc32(0L, Z_NULL, 0), hb, DM_VH_BYTES);
        rc = fwrite(hb, 1, DM_VH_BYTES, f.fp) == DM_VH_BYTES ? DM_OK
                                                            : DM_ERR(DM_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        if (rc == DM_OK) rc = pieces_write_crc(sc, &pc, stdio_write, &f);
        for (int s = 0; s < DM_NSEC; s++) crc = crc32_combine(crc, sc[s], (z_off_t)pc.len[s]);
        uint32_t c32 = (uint32_t)crc;
        unsigned char t[8];
        memcpy(t, &c32, 4);
        memcpy(t + 4, "END\n", 4);
        if (rc == DM_OK && fwrite(t, 1, 8, f.fp) != 8) rc = DM_ERR(DM_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    }
    pieces_free(&pc);
    if (rc != DM_OK) {
        dm_atomic_abort(&f);
        return rc;
    }
    return dm_atomic_commit(&f);
}

static int write_at(MPI_File fh, uint64_t off, const void *p, uint64_t n, const char *path)
{
    const char *b = p;
    while (n) {
        int k = n > (1u << 30) ? (1 << 30) : (int)n;
        MPI_Status st;
        int e = MPI_File_write_at(fh, (MPI_Offset)off, b, k, MPI_BYTE, &st);
        if (e != MPI_SUCCESS) return dm_mpi_io_error(e, "MPI_File_write_at", path);
        int got = 0;
        MPI_Get_count(&st, MPI_BYTE, &got);
        if (got != k) return DM_ERR(DM_ERR_IO, "%s: short write (%d of %d bytes)", path, got, k);
        off += (uint64_t)k;
        b += k;
        n -= (uint64_t)k;
    }
    return DM_OK;
}

/* Piece s of this rank goes to its section at the rank's element base. */
typedef struct mpi_piece_ctx {
    MPI_File fh;
    const char *path;
    const uint64_t *sec_start, *elem_base;
    int skip; /* an earlier step failed: compute the checksums only */
} mpi_piece_ctx;

static int mpi_piece_write(void *ctx, int s, const void *p, uint64_t n)
{
    mpi_piece_ctx *c = ctx;
    if (c->skip) return DM_OK;
    return write_at(c->fh, c->sec_start[s] + c->elem_base[s], p, n, c->path);
}

int dm_vectors_write(const dm_vectors *v, const char *path, const dm_ctx *ctx)
{
    if (!v || !path) return DM_ERR(DM_ERR_INVALID_ARG, "dm_vectors_write: NULL argument");
    int rc = check_local(v);
    if (!ctx || ctx->size == 1) return rc < 0 ? rc : write_single(v, path);

    MPI_Comm comm = ctx->world;
    int rank = ctx->rank, size = ctx->size;
    rc = dm_ctx_agree(ctx, rc);
    if (rc < 0) return rc;
    /* global bases and totals */
    uint64_t mine[4] = {v->n_rows, v->row_off[v->n_rows], v->id_off[v->n_rows], v->label_off[v->n_rows]};
    uint64_t base[4] = {0, 0, 0, 0}, tot[4];
    if (MPI_Exscan(mine, base, 4, MPI_UINT64_T, MPI_SUM, comm) != MPI_SUCCESS ||
        MPI_Allreduce(mine, tot, 4, MPI_UINT64_T, MPI_SUM, comm) != MPI_SUCCESS)
        return DM_ERR(DM_ERR_MPI, "vectors: MPI_Exscan/Allreduce failed");
    if (rank == 0) memset(base, 0, sizeof base);
    if (base[0] != v->row_base) rc = DM_ERR(DM_ERR_INVALID_ARG, "vectors: rank %d has row_base %" PRIu64 ", expected %" PRIu64,
                                            rank, v->row_base, base[0]);
    uint64_t meta[2] = {v->n_cols, v->flags}, meta0[2] = {v->n_cols, v->flags};
    MPI_Bcast(meta0, 2, MPI_UINT64_T, 0, comm);
    if (rc == DM_OK && (meta[0] != meta0[0] || meta[1] != meta0[1]))
        rc = DM_ERR(DM_ERR_INVALID_ARG, "vectors: ranks disagree on columns or flags");
    rc = dm_ctx_agree(ctx, rc);
    if (rc < 0) return rc;

    vheader h = {DM_VECTORS_VERSION, v->flags, tot[0], v->n_cols, tot[1], tot[2], tot[3]};
    uint64_t sz[DM_NSEC];
    section_sizes(sz, &h);
    uint64_t sec_start[DM_NSEC + 1];
    sec_start[0] = DM_VH_BYTES;
    for (int s = 0; s < DM_NSEC; s++) sec_start[s + 1] = sec_start[s] + sz[s];
    const uint64_t elem_base[DM_NSEC] = {8 * base[0], 4 * base[1], 4 * base[1], 8 * base[0], base[2],
                                         8 * base[0], base[3]};

    vpieces pc;
    rc = pieces_make(&pc, v, base[1], base[2], base[3], rank == size - 1);
    /* rank 0's room for every rank's checksums, taken before this agreement: a root without it
     * could not take part in the gather below (MPI aborts on its NULL receive buffer) */
    uint64_t *all = rank == 0 ? dm_malloc(sizeof(uint64_t) * 2 * DM_NSEC * (size_t)size) : NULL;
    if (rank == 0 && !all && rc == DM_OK) rc = DM_ERR(DM_ERR_NOMEM, "vectors: out of memory for the checksums");
    rc = dm_ctx_agree(ctx, rc);
    if (rc < 0) {
        pieces_free(&pc); /* this rank's, when another one failed */
        dm_free(all);
        return rc;
    }

    /* the temporary name is rank 0's */
    char tmp[4200];
    if (rank == 0) snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    MPI_Bcast(tmp, (int)sizeof tmp, MPI_CHAR, 0, comm);
    MPI_File fh;
    int e = MPI_File_open(comm, tmp, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    if (e != MPI_SUCCESS) {
        rc = dm_mpi_io_error(e, "MPI_File_open", tmp);
        /* ranks that see other folders (node-local paths): rank 0's open may have made the file */
        if (rank == 0) remove(tmp);
        pieces_free(&pc);
        dm_free(all);
        return dm_ctx_agree(ctx, rc);
    }
    e = MPI_File_set_size(fh, 0); /* collective */
    rc = e == MPI_SUCCESS ? DM_OK : dm_mpi_io_error(e, "MPI_File_set_size", tmp);
    uint64_t crcs[2 * DM_NSEC];
    uLong sc[DM_NSEC];
    mpi_piece_ctx wc = {fh, tmp, sec_start, elem_base, rc != DM_OK};
    int wrc = pieces_write_crc(sc, &pc, mpi_piece_write, &wc);
    if (rc == DM_OK) rc = wrc;
    for (int s = 0; s < DM_NSEC; s++) {
        crcs[2 * s] = sc[s];
        crcs[2 * s + 1] = pc.len[s];
    }
    pieces_free(&pc);
    if (MPI_Gather(crcs, 2 * DM_NSEC, MPI_UINT64_T, all, 2 * DM_NSEC, MPI_UINT64_T, 0, comm) != MPI_SUCCESS)
        rc = DM_ERR(DM_ERR_MPI, "vectors: MPI_Gather of checksums failed");
    if (rank == 0 && all) {
        unsigned char hb[DM_VH_BYTES];
        header_pack(hb, &h);
        uLong crc = crc32_z(crc32(0L, Z_NULL, 0), hb, DM_VH_BYTES);
        for (int s = 0; s < DM_NSEC; s++)
            for (int q = 0; q < size; q++) {
                const uint64_t *c = all + (size_t)q * 2 * DM_NSEC + 2 * s;
                if (c[1]) crc = crc32_combine(crc, (uLong)c[0], (z_off_t)c[1]);
            }
        uint32_t c32 = (uint32_t)crc;
        unsigned char t[8];
        memcpy(t, &c32, 4);
        memcpy(t + 4, "END\n", 4);
        if (rc == DM_OK) rc = write_at(fh, 0, hb, DM_VH_BYTES, tmp);
        if (rc == DM_OK) rc = write_at(fh, sec_start[DM_NSEC], t, 8, tmp);
    }
    dm_free(all);
    return dm_mpi_file_commit(&fh, tmp, path, rc, ctx);
}

/* ------------------------------------------------------------------------------- read */

typedef struct vfile {
    FILE *f;
    const char *path;
    vheader h;
    uint64_t sec_start[DM_NSEC + 1];
    uint64_t file_size;
} vfile;

static int vf_fail(vfile *vf, const char *why)
{
    return DM_ERR(DM_ERR_FORMAT, "%s: not a valid docmine vector file: %s", vf->path, why);
}

static int vf_open(vfile *vf, const char *path)
{
    memset(vf, 0, sizeof *vf);
    vf->path = path;
    DM_TRY(dm_open_input(&vf->f, path, NULL));
    struct stat st;
    if (fstat(fileno(vf->f), &st) != 0) return DM_ERR(DM_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    vf->file_size = (uint64_t)st.st_size;
    unsigned char b[DM_VH_BYTES];
    if (fread(b, 1, DM_VH_BYTES, vf->f) != DM_VH_BYTES) return vf_fail(vf, "shorter than its header");
    if (memcmp(b, DM_VECTORS_MAGIC, 8) != 0) return vf_fail(vf, "bad magic");
    uint32_t crc;
    memcpy(&crc, b + 56, 4);
    if ((uint32_t)crc32(0L, b, 56) != crc) return vf_fail(vf, "header checksum mismatch (corrupt file)");
    memcpy(&vf->h.version, b + 8, 4);
    memcpy(&vf->h.flags, b + 12, 4);
    uint64_t f[5];
    memcpy(f, b + 16, 40);
    vf->h.n_rows = f[0];
    vf->h.n_cols = f[1];
    vf->h.nnz = f[2];
    vf->h.id_bytes = f[3];
    vf->h.label_bytes = f[4];
    if (vf->h.version != DM_VECTORS_VERSION) {
        return DM_ERR(DM_ERR_FORMAT, "%s: vector file version %u, this docmine reads version %u", path,
                      vf->h.version, DM_VECTORS_VERSION);
    }
    /* sizes must add up to the file size; guard every product against overflow first */
    const uint64_t lim = UINT64_MAX / 16;
    if (vf->h.n_rows > lim || vf->h.nnz > lim || vf->h.id_bytes > lim || vf->h.label_bytes > lim ||
        vf->h.n_cols > UINT32_MAX + 1ull)
        return vf_fail(vf, "impossible sizes in the header");
    uint64_t sz[DM_NSEC];
    section_sizes(sz, &vf->h);
    /* each section within what is left of the file before it is added: the sum of the seven could
     * wrap around to the file size (a header claiming 7.7e17 rows in an 80-byte file) */
    if (vf->file_size < DM_VH_BYTES + 8) return vf_fail(vf, "size does not match its header (truncated?)");
    vf->sec_start[0] = DM_VH_BYTES;
    for (int s = 0; s < DM_NSEC; s++) {
        if (sz[s] > vf->file_size - vf->sec_start[s]) return vf_fail(vf, "size does not match its header (truncated?)");
        vf->sec_start[s + 1] = vf->sec_start[s] + sz[s];
    }
    if (vf->sec_start[DM_NSEC] + 8 != vf->file_size) return vf_fail(vf, "size does not match its header (truncated?)");
    return DM_OK;
}

static void vf_close(vfile *vf)
{
    if (vf->f) fclose(vf->f);
    vf->f = NULL;
}

static int vf_read_at(vfile *vf, void *dst, uint64_t off, uint64_t n)
{
    if (n == 0) return DM_OK;
    if (fseeko(vf->f, (off_t)off, SEEK_SET) != 0 || fread(dst, 1, n, vf->f) != n)
        return DM_ERR(DM_ERR_IO, "%s: read failed at byte %" PRIu64, vf->path, off);
    return DM_OK;
}

/* CRC of the whole file against the trailer. */
static int vf_verify_crc(vfile *vf)
{
    if (fseeko(vf->f, 0, SEEK_SET) != 0) return DM_ERR(DM_ERR_IO, "%s: seek failed", vf->path);
    size_t cap = 1u << 20;
    unsigned char *buf = dm_malloc(cap);
    if (!buf) return DM_ERR_NOMEM;
    uLong crc = crc32(0L, Z_NULL, 0);
    uint64_t left = vf->sec_start[DM_NSEC];
    while (left) {
        size_t k = left > cap ? cap : (size_t)left;
        if (fread(buf, 1, k, vf->f) != k) {
            dm_free(buf);
            return DM_ERR(DM_ERR_IO, "%s: read failed", vf->path);
        }
        crc = crc32(crc, buf, (uInt)k);
        left -= k;
    }
    unsigned char t[8];
    int ok = fread(t, 1, 8, vf->f) == 8;
    dm_free(buf);
    if (!ok) return DM_ERR(DM_ERR_IO, "%s: read failed", vf->path);
    uint32_t want;
    memcpy(&want, t, 4);
    if (memcmp(t + 4, "END\n", 4) != 0) return vf_fail(vf, "bad trailer");
    if ((uint32_t)crc != want) return vf_fail(vf, "checksum mismatch (corrupt file)");
    return DM_OK;
}

static int validate(vfile *vf, const dm_vectors *v)
{
    uint64_t nnz = v->row_off[v->n_rows];
    if (!offsets_ok(v->row_off, v->n_rows, nnz)) return vf_fail(vf, "row offsets are not monotone");
    if (!offsets_ok(v->id_off, v->n_rows, v->id_off[v->n_rows]) || !strings_ok(v->id_off, v->n_rows, v->ids))
        return vf_fail(vf, "document id offsets are broken");
    if (!offsets_ok(v->label_off, v->n_rows, v->label_off[v->n_rows]) ||
        !strings_ok(v->label_off, v->n_rows, v->labels))
        return vf_fail(vf, "label offsets are broken");
    uint64_t u, r;
    first_bad_rows(&u, &r, v->row_off, v->col, v->val, v->n_rows, v->n_cols);
    if (u != UINT64_MAX) return vf_fail(vf, "a row's columns are out of range or not increasing");
    if (r != UINT64_MAX)
        return DM_ERR(DM_ERR_FORMAT, "%s: not a valid docmine vector file: row %" PRIu64 " (document '%s') has a weight "
                      "that is not a finite number",
                      vf->path, v->row_base + r, v->ids + v->id_off[r]);
    return DM_OK;
}

/* Reads offsets [first, first + n] of an offset section and rebases them to 0. */
static int read_offsets(vfile *vf, uint64_t **out, int sec, uint64_t first, uint64_t n, uint64_t *base)
{
    *out = dm_malloc(sizeof(uint64_t) * (n + 1));
    if (!*out) return DM_ERR_NOMEM;
    DM_TRY(vf_read_at(vf, *out, vf->sec_start[sec] + 8 * first, 8 * (n + 1)));
    *base = (*out)[0];
    for (uint64_t i = 0; i <= n; i++) {
        if ((*out)[i] < *base) return vf_fail(vf, "offsets are not monotone");
        (*out)[i] -= *base;
    }
    return DM_OK;
}

static int read_range(vfile *vf, dm_vectors *v, uint64_t first, uint64_t count)
{
    vheader *h = &vf->h;
    if (first > h->n_rows) first = h->n_rows;
    if (count > h->n_rows - first) count = h->n_rows - first;
    v->n_rows = count;
    v->row_base = first;
    v->n_cols = h->n_cols;
    v->flags = h->flags;
    uint64_t nb, ib, lb;
    DM_TRY(read_offsets(vf, &v->row_off, 0, first, count, &nb));
    DM_TRY(read_offsets(vf, &v->id_off, 3, first, count, &ib));
    DM_TRY(read_offsets(vf, &v->label_off, 5, first, count, &lb));
    uint64_t nnz = v->row_off[count], idb = v->id_off[count], lab = v->label_off[count];
    if (nb + nnz > h->nnz || ib + idb > h->id_bytes || lb + lab > h->label_bytes)
        return vf_fail(vf, "offsets point past their sections");
    v->col = dm_malloc(4 * (nnz ? nnz : 1));
    v->val = dm_malloc(4 * (nnz ? nnz : 1));
    v->ids = dm_malloc(idb ? idb : 1);
    v->labels = dm_malloc(lab ? lab : 1);
    if (!v->col || !v->val || !v->ids || !v->labels) return DM_ERR_NOMEM;
    DM_TRY(vf_read_at(vf, v->col, vf->sec_start[1] + 4 * nb, 4 * nnz));
    DM_TRY(vf_read_at(vf, v->val, vf->sec_start[2] + 4 * nb, 4 * nnz));
    DM_TRY(vf_read_at(vf, v->ids, vf->sec_start[4] + ib, idb));
    DM_TRY(vf_read_at(vf, v->labels, vf->sec_start[6] + lb, lab));
    return validate(vf, v);
}

int dm_vectors_rows(uint64_t *n_rows, const char *path)
{
    if (!n_rows || !path) return DM_ERR(DM_ERR_INVALID_ARG, "dm_vectors_rows: NULL argument");
    vfile vf;
    int rc = vf_open(&vf, path);
    *n_rows = rc == DM_OK ? vf.h.n_rows : 0;
    vf_close(&vf);
    return rc;
}

int dm_vectors_read_rows(dm_vectors *v, const char *path, uint64_t first, uint64_t count, int verify_crc)
{
    if (!v || !path) return DM_ERR(DM_ERR_INVALID_ARG, "dm_vectors_read_rows: NULL argument");
    memset(v, 0, sizeof *v);
    vfile vf;
    int rc = vf_open(&vf, path);
    if (rc == DM_OK && verify_crc) rc = vf_verify_crc(&vf);
    if (rc == DM_OK) rc = read_range(&vf, v, first, count);
    if (rc == DM_OK && first == 0 && v->n_rows == vf.h.n_rows &&
        (v->row_off[v->n_rows] != vf.h.nnz || v->id_off[v->n_rows] != vf.h.id_bytes ||
         v->label_off[v->n_rows] != vf.h.label_bytes))
        rc = vf_fail(&vf, "offsets do not end at their section sizes");
    vf_close(&vf);
    if (rc < 0) dm_vectors_free(v);
    return rc;
}

int dm_vectors_read(dm_vectors *v, const char *path)
{
    return dm_vectors_read_rows(v, path, 0, UINT64_MAX, 1);
}

/* ------------------------------------------------------------------------------- exports */

int dm_export_format_parse(const char *s, int *format)
{
    if (strcmp(s, "svmlight") == 0 || strcmp(s, "svm") == 0) *format = DM_EXPORT_SVMLIGHT;
    else if (strcmp(s, "mtx") == 0 || strcmp(s, "matrixmarket") == 0) *format = DM_EXPORT_MTX;
    else return DM_ERR(DM_ERR_INVALID_ARG, "unknown export format '%s' (expected svmlight or mtx)", s);
    return DM_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Distinct labels of all rows, sorted (pointers into a copy of the label bytes). */
typedef struct label_map {
    char *buf;
    char **names;
    size_t n;
} label_map;

static int label_map_build(label_map *m, const dm_vectors *v)
{
    memset(m, 0, sizeof *m);
    uint64_t bytes = v->label_off[v->n_rows];
    m->buf = dm_malloc(bytes ? bytes : 1);
    if (!m->buf) return DM_ERR_NOMEM;
    memcpy(m->buf, v->labels, bytes);
    size_t cap = 0;
    for (uint64_t i = 0; i < bytes; i++) cap += m->buf[i] == ',' || m->buf[i] == '\0';
    m->names = dm_malloc(sizeof(char *) * (cap ? cap : 1));
    if (!m->names) return DM_ERR_NOMEM;
    for (uint64_t r = 0; r < v->n_rows; r++) {
        char *s = m->buf + v->label_off[r];
        while (*s) {
            char *e = strchr(s, ',');
            if (e) *e = '\0';
            if (*s) m->names[m->n++] = s;
            if (!e) break;
            s = e + 1;
        }
    }
    qsort(m->names, m->n, sizeof *m->names, cmp_str);
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++)
        if (k == 0 || strcmp(m->names[k - 1], m->names[i]) != 0) m->names[k++] = m->names[i];
    m->n = k;
    return DM_OK;
}

static void label_map_free(label_map *m)
{
    dm_free(m->buf);
    dm_free(m->names);
}

static size_t label_index(const label_map *m, const char *s, size_t len)
{
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strncmp(m->names[mid], s, len);
        if (c == 0 && m->names[mid][len] != '\0') c = 1;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo + 1;
}

/* Prints a string with control characters replaced (comments end at a newline). */
static void put_clean(FILE *f, const char *s)
{
    for (; *s; s++) fputc((unsigned char)*s < 0x20 ? '?' : *s, f);
}

static int export_svmlight(FILE *f, const dm_vectors *v)
{
    label_map m;
    int rc = label_map_build(&m, v);
    if (rc < 0) {
        label_map_free(&m);
        return rc;
    }
    fprintf(f, "# docmine vectors: %" PRIu64 " rows, %" PRIu64 " columns, %" PRIu64 " non-zeros\n", v->n_rows,
            v->n_cols, dm_vectors_nnz(v));
    fprintf(f, "# feature index = term id + 1 (1-based); label 0 = unlabelled; labels:\n");
    for (size_t i = 0; i < m.n; i++) {
        fprintf(f, "# label %zu ", i + 1);
        put_clean(f, m.names[i]);
        fputc('\n', f);
    }
    for (uint64_t r = 0; r < v->n_rows; r++) {
        const char *s = dm_vectors_labels(v, r);
        if (!*s) fputc('0', f);
        int first = 1;
        while (*s) {
            const char *e = strchr(s, ',');
            size_t len = e ? (size_t)(e - s) : strlen(s);
            if (len) {
                fprintf(f, "%s%zu", first ? "" : ",", label_index(&m, s, len));
                first = 0;
            }
            if (!e) break;
            s = e + 1;
        }
        if (first && *dm_vectors_labels(v, r)) fputc('0', f);
        for (uint64_t k = v->row_off[r]; k < v->row_off[r + 1]; k++)
            fprintf(f, " %" PRIu32 ":%.9g", v->col[k] + 1, (double)v->val[k]);
        fputs(" # ", f);
        put_clean(f, dm_vectors_id(v, r));
        fputc('\n', f);
    }
    label_map_free(&m);
    return DM_OK;
}

static int export_mtx(FILE *f, const dm_vectors *v)
{
    fprintf(f, "%%%%MatrixMarket matrix coordinate real general\n");
    fprintf(f, "%% docmine vectors: rows are documents in corpus order, columns term ids + 1\n");
    fprintf(f, "%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", v->n_rows, v->n_cols, dm_vectors_nnz(v));
    for (uint64_t r = 0; r < v->n_rows; r++)
        for (uint64_t k = v->row_off[r]; k < v->row_off[r + 1]; k++)
            fprintf(f, "%" PRIu64 " %" PRIu32 " %.9g\n", r + 1, v->col[k] + 1, (double)v->val[k]);
    return DM_OK;
}

int dm_vectors_export(const dm_vectors *v, const char *path, int format)
{
    if (!v || !path) return DM_ERR(DM_ERR_INVALID_ARG, "dm_vectors_export: NULL argument");
    if (format != DM_EXPORT_SVMLIGHT && format != DM_EXPORT_MTX)
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_vectors_export: unknown format %d", format);
    dm_atomic_file f;
    DM_TRY(dm_atomic_open(&f, path));
    int rc = format == DM_EXPORT_SVMLIGHT ? export_svmlight(f.fp, v) : export_mtx(f.fp, v);
    if (rc < 0) {
        dm_atomic_abort(&f);
        return rc;
    }
    return dm_atomic_commit(&f);
}
