/* Outputs of a flock run (DESIGN.md section 8): top terms of each cluster by summed weight
 * (reduced over ranks), the vocabulary file reader for term names, and the PNG rendering of the
 * plane (libpng, written atomically). The TSV/CSV files are written by flock_job.c.
 * Reference: none (formats); tests/flock/test_flock.c checks top terms and the PNG round trip. */
#include <errno.h>
#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/status.h"
#include "flock/flock_impl.h"

int dm_flock_top_terms(uint32_t **terms, double **weights, const dm_flock_result *r, const dm_vectors *v, int k,
                       const dm_ctx *ctx)
{
    return dm_flock_top_terms_rows(terms, weights, r->row_cluster, r->n_clusters, v, k, ctx);
}

/* ---- vocabulary ----------------------------------------------------------------------------- */

int dm_flock_vocab_read(dm_flock_vocab *out, const char *path, uint64_t n_terms)
{
    memset(out, 0, sizeof *out);
    FILE *f;
    DM_TRY(dm_open_input(&f, path, NULL));
    fseeko(f, 0, SEEK_END);
    long long size = (long long)ftello(f);
    fseeko(f, 0, SEEK_SET);
    if (size < 0) {
        fclose(f);
        return DM_ERR(DM_ERR_IO, "%s: cannot tell its size", path);
    }
    out->blob = dm_malloc((size_t)size + 1);
    if (!out->blob) {
        fclose(f);
        return DM_ERR(DM_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t got = fread(out->blob, 1, (size_t)size, f);
    fclose(f);
    if (got != (size_t)size) {
        dm_flock_vocab_free(out);
        return DM_ERR(DM_ERR_IO, "%s: read failed", path);
    }
    out->blob[size] = '\0';
    /* two passes: the largest id, then the names (terms point into the blob) */
    uint64_t maxid = 0;
    int any = 0, rc = DM_OK;
    long line = 0;
    for (int pass = 0; pass < 2 && rc == DM_OK; pass++) {
        char *p = out->blob, *end = out->blob + size;
        line = 0;
        while (p < end && rc == DM_OK) {
            char *nl = memchr(p, '\n', (size_t)(end - p));
            char *next = nl ? nl + 1 : end; /* the next line (past a CR LF's LF too) */
            char *le = nl ? nl : end;
            line++;
            /* a CR LF's CR ends the line's text; the blob is not written here (both passes see the
             * same lines, and the line numbers count the file's lines) */
            if (le > p && le[-1] == '\r') le--;
            if (le == p || *p == '#') {
                p = next;
                continue;
            }
            char *tab = memchr(p, '\t', (size_t)(le - p));
            char *num_end;
            errno = 0;
            unsigned long long id = strtoull(p, &num_end, 10);
            if (!tab || num_end != tab || errno || p == tab) {
                /* a header line "id<TAB>term<TAB>df" is allowed as the first line */
                if (line == 1 && tab) {
                    p = next;
                    continue;
                }
                rc = DM_ERR(DM_ERR_FORMAT, "%s:%ld: expected id<TAB>term<TAB>df", path, line);
                break;
            }
            /* the table is indexed by id: an id no vector has names nothing */
            if (id >= n_terms) {
                rc = DM_ERR(DM_ERR_FORMAT, "%s:%ld: term id %llu, but the vectors have %llu terms (ids 0 .. %llu)", path,
                            line, id, (unsigned long long)n_terms, (unsigned long long)(n_terms ? n_terms - 1 : 0));
                break;
            }
            char *term = tab + 1, *tab2 = memchr(term, '\t', (size_t)(le - term));
            if (pass == 0) {
                if (!any || id > maxid) maxid = id;
                any = 1;
            } else {
                *(tab2 ? tab2 : le) = '\0';
                out->term[id] = term;
            }
            p = next;
        }
        if (pass == 0 && rc == DM_OK) {
            out->n = any ? maxid + 1 : 0;
            if (!(out->term = dm_calloc((size_t)(out->n ? out->n : 1), sizeof *out->term)))
                rc = DM_ERR(DM_ERR_NOMEM, "%s: out of memory", path);
        }
    }
    if (rc != DM_OK) dm_flock_vocab_free(out);
    return rc;
}

int dm_flock_vocab_from_terms(dm_flock_vocab *out, const char *bytes, const uint64_t *off, uint64_t n)
{
    memset(out, 0, sizeof *out);
    uint64_t total = n ? off[n] - off[0] : 0;
    out->blob = dm_malloc((size_t)(total + n + 1));
    out->term = dm_calloc((size_t)(n ? n : 1), sizeof *out->term);
    if (!out->blob || !out->term) {
        dm_flock_vocab_free(out);
        return DM_ERR(DM_ERR_NOMEM, "flock: out of memory for %llu term names", (unsigned long long)n);
    }
    char *p = out->blob;
    for (uint64_t i = 0; i < n; i++) {
        size_t len = (size_t)(off[i + 1] - off[i]);
        memcpy(p, bytes + off[i], len);
        p[len] = '\0';
        out->term[i] = p;
        p += len + 1;
    }
    out->n = n;
    return DM_OK;
}

void dm_flock_vocab_free(dm_flock_vocab *v)
{
    dm_free(v->term);
    dm_free(v->blob);
    memset(v, 0, sizeof *v);
}

/* ---- PNG ------------------------------------------------------------------------------------- */

/* A distinct colour per label: golden-ratio hues, alternating saturation and value. */
void dm_flock_label_rgb(int32_t label, unsigned char rgb[3])
{
    if (label < 0) {
        rgb[0] = rgb[1] = rgb[2] = 190;
        return;
    }
    double h = fmod((double)label * 0.6180339887498949, 1.0) * 6.0;
    double s = (label / 7) % 2 ? 0.55 : 0.85, v = (label / 3) % 2 ? 0.75 : 0.95;
    int i = (int)h;
    double f = h - i, p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
    double r, g, b;
    switch (i % 6) {
    case 0: r = v, g = t, b = p; break;
    case 1: r = q, g = v, b = p; break;
    case 2: r = p, g = v, b = t; break;
    case 3: r = p, g = q, b = v; break;
    case 4: r = t, g = p, b = v; break;
    default: r = v, g = p, b = q; break;
    }
    rgb[0] = (unsigned char)(255 * r);
    rgb[1] = (unsigned char)(255 * g);
    rgb[2] = (unsigned char)(255 * b);
}

/* libpng's errors and warnings kept for our one error line (its default handlers print their own
 * line to stderr) */
static void png_error_kept(png_structp png, png_const_charp msg)
{
    char *why = png_get_error_ptr(png);
    snprintf(why, 128, "%s", msg ? msg : "error");
    png_longjmp(png, 1);
}
static void png_warning_dropped(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

static int png_emit(FILE *f, const char *path, const unsigned char *img, int w, int h)
{
    char why[128] = "error";
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, why, png_error_kept, png_warning_dropped);
    if (!png) return DM_ERR(DM_ERR_NOMEM, "libpng: cannot create a writer");
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        return DM_ERR(DM_ERR_NOMEM, "libpng: cannot create an info struct");
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return DM_ERR(DM_ERR_IO, "%s: libpng: write failed: %s", path, why);
    }
    png_init_io(png, f);
    /* zlib level 1 (lossless like any level): a 1024 x 1024 scatter of 200k points compresses
     * in 0.12 s instead of 0.31 s at the default level 6 for a file 4% larger; a sparse one is
     * up to 40% larger (the pipeline writes two of these per run, on rank 0 while the others
     * wait) */
    png_set_compression_level(png, 1);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < h; y++) png_write_row(png, (png_const_bytep)(img + (size_t)y * (size_t)w * 3));
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return DM_OK;
}

int dm_flock_png_write(const char *path, const double *x, const double *y, const int32_t *color, size_t n,
                       double W, double H, int max_side)
{
    if (!(W > 0 && H > 0) || max_side < 16) return DM_ERR(DM_ERR_INVALID_ARG, "png: bad plane or size");
    int w = W >= H ? max_side : (int)fmax(16, max_side * W / H);
    int h = H >= W ? max_side : (int)fmax(16, max_side * H / W);
    unsigned char *img = dm_malloc((size_t)w * (size_t)h * 3);
    if (!img) return DM_ERR(DM_ERR_NOMEM, "png: out of memory for a %dx%d image", w, h);
    memset(img, 255, (size_t)w * (size_t)h * 3);
    /* dot size: about a third of the mean spacing of the points, 1..5 pixels */
    double spacing = sqrt((double)w * (double)h / (double)(n ? n : 1));
    int dot = (int)fmin(5, fmax(1, spacing / 3));
    /* noise first, so clusters draw on top */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++) {
            int32_t c = color ? color[i] : 0;
            if ((pass == 0) != (c < 0)) continue;
            unsigned char rgb[3];
            dm_flock_label_rgb(c, rgb);
            int px = (int)(x[i] / W * w), py = (int)((1.0 - y[i] / H) * h); /* y up */
            for (int dy = 0; dy < dot; dy++)
                for (int dx = 0; dx < dot; dx++) {
                    int qx = (px + dx) % w, qy = (py + dy) % h;
                    if (qx < 0) qx += w;
                    if (qy < 0) qy += h;
                    memcpy(img + ((size_t)qy * (size_t)w + (size_t)qx) * 3, rgb, 3);
                }
        }
    int rc = dm_flock_png_emit_file(path, img, w, h);
    dm_free(img);
    return rc;
}

int dm_flock_png_emit_file(const char *path, const unsigned char *img, int w, int h)
{
    dm_atomic_file af;
    int rc = dm_atomic_open(&af, path);
    if (rc == DM_OK) {
        rc = png_emit(af.fp, path, img, w, h);
        if (rc == DM_OK) rc = dm_atomic_commit(&af);
        else dm_atomic_abort(&af);
    }
    return rc;
}
