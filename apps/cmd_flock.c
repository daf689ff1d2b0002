/* `docmine flock`: multi-species flocking clustering of document vectors (flock/flock.h) on the
 * CPU or CUDA backend over any number of ranks, with checkpoints, and the outputs of DESIGN.md
 * section 8: assignments.tsv, clusters.tsv (top terms), positions.csv, flock.png (+ a PNG series),
 * report.json with NMI / ARI / purity when labels are known. Reference: none (a command). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/commands.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/report.h"
#include "common/status.h"
#include "common/timer.h"
#include "common/tune/tune.h"
#include "flock/flock.h"
#include "flock/flock_synth.h"
#include "tfidf/tfidf.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: docmine flock (--vectors FILE | --synth N) -o DIR [options]\n\n"
            "Clusters documents by multi-species flocking: each document is a boid on a toroidal\n"
            "plane that flies with similar documents (cosine >= T) and away from dissimilar ones;\n"
            "clusters are the connected components of \"within r and similar\" at the end. The plane\n"
            "is cut into one horizontal slice per rank. Results do not depend on the number of ranks.\n\n"
            "input:\n"
            "  --vectors FILE          .dmv vectors (docmine tfidf)\n"
            "  --synth N               N synthetic documents instead (--synth-topics K, default 10;\n"
            "                          --synth-tokens T words each, default 600: ~400 distinct terms)\n"
            "  --vocab FILE            term names for clusters.tsv (id<TAB>term<TAB>df lines)\n"
            "output:\n"
            "  -o, --output DIR        assignments.tsv clusters.tsv positions.csv flock.png report.json\n"
            "  --top-terms K           terms per cluster in clusters.tsv (default 10)\n"
            "  --png-size N            longer side of the PNGs in pixels (default 1024)\n"
            "  --snapshot-every K      also write DIR/snapshots/flock-<iteration>.png every K iterations\n"
            "model:\n"
            "  --iterations N          (default 500)\n"
            "  --radius R              interaction radius (default 1)\n"
            "  --neighbours K          expected neighbours at the initial density; sets the plane\n"
            "                          area N pi R^2 / K (default 15)\n"
            "  --threshold T           similar when cosine >= T (default 0.10)\n"
            "  --weights S,D,A,C       separation from similar, separation from dissimilar,\n"
            "                          alignment, cohesion (default 0.02,0.05,0.30,0.05)\n"
            "  --vmax V                speed cap, < R (default 0.5)\n"
            "  --shrink F              the plane's side shrinks by this fraction over the run (0.5)\n"
            "clusters:\n"
            "  --min-cluster N         smaller components are small (default 5)\n"
            "  --small noise|attach    small components: noise (-1, default) or attached to the\n"
            "                          cluster of the nearest clustered neighbour within R\n"
            "  --cluster-threshold T   edges of the final graph need cosine >= T (default: --threshold);\n"
            "                          a higher value cuts chains across topics. With --resume of a\n"
            "                          finished run's checkpoint only the clustering is redone\n"
            "run:\n"
            "  --checkpoint-every K    write a checkpoint every K iterations (atomic; also the last)\n"
            "  --checkpoint FILE       checkpoint file (default DIR/flock.ckpt)\n"
            "  --resume                continue from the checkpoint (same options and input)\n"
            "  --slice-weights equal|auto|W0,W1,...  slice heights per rank (auto: measured speed)\n"
            "  (global: --backend, --seed for initial positions, --report, --threads)\n\n"
            "examples:\n"
            "  docmine flock --vectors reuters.dmv --vocab reuters.vocab.tsv -o out/\n"
            "  mpiexec -n 4 docmine flock --synth 1000000 --synth-topics 20 -o out/ --checkpoint-every 100\n");
}

static int parse_num(const char *s, double lo, double hi, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return (*s && !*end && !errno && *v >= lo && *v <= hi) ? 0 : -1;
}

/* Reads this rank's share of a .dmv file: the row count from the header (documented in tfidf.h:
 * u64 n_rows at byte 16 after the 8-byte magic), then an even split of rows. */
static int read_vectors(dm_vectors *v, const char *path, const dm_ctx *ctx)
{
    uint64_t n = 0;
    int rc = DM_OK;
    if (ctx->rank == 0) {
        FILE *f = fopen(path, "rb");
        unsigned char h[24];
        if (!f) rc = DM_ERR(DM_ERR_IO, "%s: %s", path, strerror(errno));
        else {
            if (fread(h, 1, 24, f) != 24 || memcmp(h, DM_VECTORS_MAGIC, 8) != 0)
                rc = DM_ERR(DM_ERR_FORMAT, "%s: not a .dmv vector file", path);
            else memcpy(&n, h + 16, 8);
            fclose(f);
        }
    }
    rc = dm_ctx_agree(ctx, rc);
    if (rc != DM_OK) return rc;
    MPI_Bcast(&n, 1, MPI_UINT64_T, 0, ctx->world);
    uint64_t first, count;
    dm_flock_share(n, ctx->rank, ctx->size, &first, &count);
    rc = dm_vectors_read_rows(v, path, first, count, ctx->rank == 0);
    return dm_ctx_agree(ctx, rc);
}

/* Gathers the id and label strings of all documents to rank 0 (document order). */
typedef struct strings {
    char *blob;
    uint64_t *off; /* n + 1 */
} strings;

static int gather_strings(strings *out, const dm_vectors *v, int labels, uint64_t n_global, const dm_ctx *ctx)
{
    memset(out, 0, sizeof *out);
    const uint64_t *off = labels ? v->label_off : v->id_off;
    const char *blob = labels ? v->labels : v->ids;
    uint64_t n = v->n_rows;
    int bytes = (int)(n ? off[n] - off[0] : 0);
    int rc = DM_OK;
    if (n && off[n] - off[0] > (uint64_t)1 << 30) rc = DM_ERR(DM_ERR_UNSUPPORTED, "flock: more than 1 GiB of document ids on a rank");
    int *counts = NULL, *displs = NULL, tot = 0;
    if (ctx->rank == 0) {
        counts = dm_malloc(sizeof *counts * (size_t)ctx->size);
        displs = dm_malloc(sizeof *displs * (size_t)ctx->size);
        out->off = dm_malloc(sizeof *out->off * (size_t)(n_global + 1));
        if (!counts || !displs || !out->off) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    }
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) {
        MPI_Gather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, 0, ctx->world);
        if (ctx->rank == 0) {
            long long t = 0;
            for (int k = 0; k < ctx->size; k++) {
                displs[k] = (int)t;
                t += counts[k];
            }
            if (t > 2147483647LL) rc = DM_ERR(DM_ERR_UNSUPPORTED, "flock: more than 2 GiB of document ids");
            else if (!(out->blob = dm_malloc((size_t)t + 1))) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
            tot = (int)t;
        }
    }
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) {
        MPI_Gatherv(n ? blob + off[0] : blob, bytes, MPI_CHAR, out->blob, counts, displs, MPI_CHAR, 0, ctx->world);
        if (ctx->rank == 0) {
            /* strings are NUL-terminated and consecutive: offsets follow by scanning */
            uint64_t at = 0, k = 0;
            while (k < n_global && at < (uint64_t)tot) {
                out->off[k++] = at;
                at += strlen(out->blob + at) + 1;
            }
            if (k != n_global) rc = DM_ERR(DM_ERR_FORMAT, "flock: document strings do not match the documents");
            out->off[n_global] = at;
        }
    }
    dm_free(counts);
    dm_free(displs);
    return dm_ctx_agree(ctx, rc);
}

static void strings_free(strings *s)
{
    dm_free(s->blob);
    dm_free(s->off);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* True classes from the label strings (first label of a multi-label document; "" = none, -1),
 * numbered in byte order of the names; names_out lists them. */
static int classes_of(int32_t *cls, char ***names_out, int32_t *n_names, const strings *lab, uint64_t n)
{
    char **all = dm_malloc(sizeof *all * (size_t)(n ? n : 1));
    if (!all) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    uint64_t m = 0;
    for (uint64_t i = 0; i < n; i++) {
        char *s = lab->blob + lab->off[i];
        char *comma = strchr(s, ',');
        if (comma) *comma = '\0'; /* the first label names the class */
        if (*s) all[m++] = s;
    }
    qsort(all, (size_t)m, sizeof *all, cmp_str);
    uint64_t u = 0;
    for (uint64_t i = 0; i < m; i++)
        if (u == 0 || strcmp(all[i], all[u - 1]) != 0) all[u++] = all[i];
    for (uint64_t i = 0; i < n; i++) {
        char *s = lab->blob + lab->off[i];
        cls[i] = -1;
        if (!*s) continue;
        char **f = bsearch(&s, all, (size_t)u, sizeof *all, cmp_str);
        cls[i] = (int32_t)(f - all);
    }
    *names_out = all;
    *n_names = (int32_t)u;
    return DM_OK;
}

static void csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* TSV fields: tabs and newlines in ids or labels become spaces */
static void tsv_field(FILE *f, const char *s)
{
    for (; *s; s++) fputc(*s == '\t' || *s == '\n' || *s == '\r' ? ' ' : *s, f);
}

/* Gathers positions to rank 0 (document order). */
static int gather_positions(double **x, double **y, dm_flock_sim *s, const dm_ctx *ctx)
{
    *x = *y = NULL;
    dm_flock_view v;
    int rc = dm_flock_sim_view(s, &v);
    uint64_t n = dm_flock_sim_docs(s);
    double *rec = dm_malloc(sizeof *rec * 3 * (v.n ? v.n : 1)), *all = NULL;
    int cnt = (int)(3 * v.n), *counts = NULL, *displs = NULL;
    if (!rec && rc == DM_OK) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    if (ctx->rank == 0) {
        counts = dm_malloc(sizeof *counts * (size_t)ctx->size);
        displs = dm_malloc(sizeof *displs * (size_t)ctx->size);
        all = dm_malloc(sizeof *all * 3 * (size_t)n);
        *x = dm_malloc(sizeof **x * (size_t)n);
        *y = dm_malloc(sizeof **y * (size_t)n);
        if (!counts || !displs || !all || !*x || !*y) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    }
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) {
        for (size_t i = 0; i < v.n; i++) {
            rec[3 * i] = (double)v.id[i];
            rec[3 * i + 1] = v.x[i];
            rec[3 * i + 2] = v.y[i];
        }
        MPI_Gather(&cnt, 1, MPI_INT, counts, 1, MPI_INT, 0, ctx->world);
        if (ctx->rank == 0) {
            int t = 0;
            for (int k = 0; k < ctx->size; k++) {
                displs[k] = t;
                t += counts[k];
            }
        }
        MPI_Gatherv(rec, cnt, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, ctx->world);
        if (ctx->rank == 0)
            for (uint64_t k = 0; k < n; k++) {
                uint64_t id = (uint64_t)all[3 * k];
                (*x)[id] = all[3 * k + 1];
                (*y)[id] = all[3 * k + 2];
            }
    }
    dm_free(rec);
    dm_free(all);
    dm_free(counts);
    dm_free(displs);
    if (rc != DM_OK) {
        dm_free(*x);
        dm_free(*y);
        *x = *y = NULL;
    }
    return rc;
}

int dm_cmd_flock(dm_app *app, int argc, char **argv)
{
    enum {
        O_VECTORS = 256, O_SYNTH, O_STOPICS, O_STOKENS, O_VOCAB, O_TOP, O_PNG, O_SNAP, O_ITER, O_RADIUS, O_NB,
        O_THRESH, O_WEIGHTS, O_VMAX, O_SHRINK, O_MINC, O_SMALL, O_CKE, O_CK, O_RESUME, O_SLICES, O_CTHR
    };
    static const struct option opts[] = {
        {"vectors", required_argument, 0, O_VECTORS}, {"synth", required_argument, 0, O_SYNTH},
        {"synth-topics", required_argument, 0, O_STOPICS}, {"synth-tokens", required_argument, 0, O_STOKENS},
        {"vocab", required_argument, 0, O_VOCAB}, {"output", required_argument, 0, 'o'},
        {"top-terms", required_argument, 0, O_TOP}, {"png-size", required_argument, 0, O_PNG},
        {"snapshot-every", required_argument, 0, O_SNAP}, {"iterations", required_argument, 0, O_ITER},
        {"radius", required_argument, 0, O_RADIUS}, {"neighbours", required_argument, 0, O_NB},
        {"neighbors", required_argument, 0, O_NB}, {"threshold", required_argument, 0, O_THRESH},
        {"weights", required_argument, 0, O_WEIGHTS}, {"vmax", required_argument, 0, O_VMAX},
        {"shrink", required_argument, 0, O_SHRINK}, {"min-cluster", required_argument, 0, O_MINC},
        {"small", required_argument, 0, O_SMALL}, {"checkpoint-every", required_argument, 0, O_CKE},
        {"checkpoint", required_argument, 0, O_CK}, {"resume", no_argument, 0, O_RESUME},
        {"slice-weights", required_argument, 0, O_SLICES}, {"cluster-threshold", required_argument, 0, O_CTHR},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    dm_ctx *ctx = app->ctx;
    dm_flock_options fo = DM_FLOCK_OPTIONS_INIT;
    fo.seed = ctx->opt.seed;
    dm_flock_cluster_options co = DM_FLOCK_CLUSTER_OPTIONS_INIT;
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.seed = ctx->opt.seed;
    const char *vectors = NULL, *vocab_path = NULL, *out = NULL, *ckpath = NULL, *slices = "equal";
    uint64_t synth_n = 0;
    int top_k = 10, png_size = 1024, snap_every = 0;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        double v = 0;
        const char *name = argv[optind - 1];
#define NUM(lo, hi)                                                                                \
    do {                                                                                           \
        if (parse_num(optarg, (lo), (hi), &v))                                                    \
            return dm_app_usage_error(app, "flock", "invalid value '%s' for %s", optarg, name);   \
    } while (0)
        switch (c) {
        case O_VECTORS: vectors = optarg; break;
        case O_SYNTH: NUM(1, 4e9); synth_n = (uint64_t)v; break;
        case O_STOPICS: NUM(1, 1e6); so.topics = (int)v; break;
        case O_STOKENS: NUM(1, 1e6); so.tokens = (int)v; break;
        case O_VOCAB: vocab_path = optarg; break;
        case 'o': out = optarg; break;
        case O_TOP: NUM(1, 1000); top_k = (int)v; break;
        case O_PNG: NUM(16, 16384); png_size = (int)v; break;
        case O_SNAP: NUM(1, 1e9); snap_every = (int)v; break;
        case O_ITER: NUM(1, 1e9); fo.iterations = (int)v; break;
        case O_RADIUS: NUM(1e-6, 1e9); fo.radius = v; break;
        case O_NB: NUM(1e-6, 1e9); fo.neighbours = v; break;
        case O_THRESH: NUM(-1, 1); fo.threshold = v; break;
        case O_CTHR: NUM(-1, 1); co.threshold = v; break;
        case O_VMAX: NUM(1e-12, 1e9); fo.v_max = v; break;
        case O_SHRINK: NUM(0, 0.999999); fo.shrink = v; break;
        case O_MINC: NUM(1, 1e9); co.min_size = (int)v; break;
        case O_CKE: NUM(0, 1e9); fo.checkpoint_every = (int)v; break;
        case O_CK: ckpath = optarg; break;
        case O_RESUME: fo.resume = 1; break;
        case O_SLICES: slices = optarg; break;
        case O_SMALL:
            if (strcmp(optarg, "noise") == 0) co.attach = 0;
            else if (strcmp(optarg, "attach") == 0) co.attach = 1;
            else return dm_app_usage_error(app, "flock", "--small must be noise or attach, not '%s'", optarg);
            break;
        case O_WEIGHTS: {
            double w[4];
            char *p = optarg, *end;
            int k = 0;
            for (; k < 4; k++) {
                errno = 0;
                w[k] = strtod(p, &end);
                if (end == p || errno || !(w[k] >= 0) || !isfinite(w[k])) break;
                p = end;
                if (k < 3) {
                    if (*p != ',') break;
                    p++;
                }
            }
            if (k != 4 || *p) return dm_app_usage_error(app, "flock", "--weights expects S,D,A,C (four numbers >= 0), not '%s'", optarg);
            fo.w_separation = w[0];
            fo.w_dissimilar = w[1];
            fo.w_alignment = w[2];
            fo.w_cohesion = w[3];
            break;
        }
        case 'h':
            if (ctx->rank == 0) usage(stdout);
            return DM_EXIT_OK;
        default: return dm_app_usage_error(app, "flock", "unknown or incomplete option '%s'", name);
        }
#undef NUM
    }
    if (optind < argc) return dm_app_usage_error(app, "flock", "unexpected argument '%s'", argv[optind]);
    if (!out) return dm_app_usage_error(app, "flock", "missing -o DIR");
    if (!vectors == !synth_n) return dm_app_usage_error(app, "flock", "give exactly one of --vectors FILE and --synth N");
    if (!(fo.v_max < fo.radius)) return dm_app_usage_error(app, "flock", "--vmax must be below --radius");
    double *sw = NULL;
    int calibrate = 0;
    if (strcmp(slices, "auto") == 0) calibrate = 1;
    else if (strcmp(slices, "equal") != 0) {
        sw = dm_malloc(sizeof *sw * (size_t)ctx->size);
        if (!sw) return dm_app_fail(app, "flock", dm_ctx_agree(ctx, DM_ERR(DM_ERR_NOMEM, "out of memory")));
        char *p = (char *)slices, *end;
        int k = 0;
        for (; k < ctx->size; k++) {
            sw[k] = strtod(p, &end);
            if (end == p || !(sw[k] > 0)) break;
            p = end;
            if (k < ctx->size - 1) {
                if (*p != ',') break;
                p++;
            }
        }
        if (k != ctx->size || *p) {
            dm_free(sw);
            return dm_app_usage_error(app, "flock", "--slice-weights needs equal, auto or %d positive numbers", ctx->size);
        }
    }
    char ckbuf[4096];
    if (!ckpath) {
        snprintf(ckbuf, sizeof ckbuf, "%s/flock.ckpt", out);
        ckpath = ckbuf;
    }
    fo.checkpoint = ckpath;

    double t_start = dm_wtime();
    int rc = DM_OK;
    if (ctx->rank == 0) rc = dm_mkdirs(out);
    if (rc == DM_OK && ctx->rank == 0 && snap_every) {
        char d[4200];
        snprintf(d, sizeof d, "%s/snapshots", out);
        rc = dm_mkdirs(d);
    }
    rc = dm_ctx_agree(ctx, rc);
    dm_vectors vec;
    memset(&vec, 0, sizeof vec);
    int synthetic = synth_n > 0;
    if (rc == DM_OK) {
        dm_timer_start("flock.input");
        if (synthetic) {
            uint64_t first, count;
            dm_flock_share(synth_n, ctx->rank, ctx->size, &first, &count);
            rc = dm_ctx_agree(ctx, dm_flock_synth_vectors(&vec, &so, first, count));
        } else {
            rc = read_vectors(&vec, vectors, ctx);
        }
        dm_timer_stop("flock.input");
    }
    /* slice weights measured per rank */
    if (rc == DM_OK && calibrate) {
        double speed = 0;
        rc = dm_ctx_agree(ctx, dm_flock_calibrate(&speed, ctx));
        sw = dm_malloc(sizeof *sw * (size_t)ctx->size);
        if (rc == DM_OK && !sw) rc = DM_ERR(DM_ERR_NOMEM, "out of memory");
        rc = dm_ctx_agree(ctx, rc);
        if (rc == DM_OK) {
            MPI_Allgather(&speed, 1, MPI_DOUBLE, sw, 1, MPI_DOUBLE, ctx->world);
            double lo = sw[0], hi = sw[0];
            for (int k = 1; k < ctx->size; k++) {
                lo = fmin(lo, sw[k]);
                hi = fmax(hi, sw[k]);
            }
            /* within 10%: measurement noise, keep equal slices (and their simpler arithmetic) */
            if (hi < 1.1 * lo) {
                dm_free(sw);
                sw = NULL;
            }
            if (ctx->rank == 0) dm_log_info("slice calibration: %.3g .. %.3g boid-iterations/s per rank%s", lo, hi,
                                            sw ? "" : " (equal slices)");
        }
    }
    fo.slice_weights = sw;

    /* labels and ids on rank 0 */
    strings ids, labs;
    memset(&ids, 0, sizeof ids);
    memset(&labs, 0, sizeof labs);
    uint64_t n_global = 0;
    if (rc == DM_OK) {
        uint64_t mine = vec.n_rows;
        MPI_Allreduce(&mine, &n_global, 1, MPI_UINT64_T, MPI_SUM, ctx->world);
        rc = gather_strings(&ids, &vec, 0, n_global, ctx);
        if (rc == DM_OK) rc = gather_strings(&labs, &vec, 1, n_global, ctx);
    }
    int32_t *truth = NULL, n_classes = 0;
    char **class_names = NULL;
    char *label_copy = NULL; /* classes_of cuts multi-labels to the first: keep labs whole */
    if (rc == DM_OK && ctx->rank == 0) {
        truth = dm_malloc(sizeof *truth * (size_t)(n_global ? n_global : 1));
        label_copy = dm_malloc(labs.off[n_global] + 1);
        if (!truth || !label_copy) rc = DM_ERR(DM_ERR_NOMEM, "out of memory");
        else {
            memcpy(label_copy, labs.blob, labs.off[n_global]);
            strings cut = {label_copy, labs.off};
            rc = classes_of(truth, &class_names, &n_classes, &cut, n_global);
        }
    }
    rc = dm_ctx_agree(ctx, rc);
    int have_labels = 0;
    if (ctx->rank == 0 && rc == DM_OK) have_labels = n_classes > 0;
    MPI_Bcast(&have_labels, 1, MPI_INT, 0, ctx->world);

    /* run */
    dm_flock_sim *sim = NULL;
    int32_t n_clusters = 0;
    if (rc == DM_OK) {
        dm_timer_start("flock.setup");
        rc = dm_flock_sim_init(&sim, ctx, &vec, &fo);
        dm_timer_stop("flock.setup");
    }
    if (rc == DM_OK) {
        dm_log_info("flock: %llu documents on %d rank(s), %s backend, %d iterations from %d", (unsigned long long)n_global,
                    ctx->size, dm_backend_name(ctx->backend), fo.iterations, dm_flock_sim_iteration(sim));
        dm_timer_start("flock.run");
        if (snap_every) {
            /* iterate here to write the PNG series between steps */
            dm_progress pr;
            dm_progress_begin(&pr, "flock", "it", (uint64_t)fo.iterations);
            while (rc == DM_OK && dm_flock_sim_iteration(sim) < fo.iterations) {
                rc = dm_flock_sim_step(sim);
                int it = dm_flock_sim_iteration(sim);
                if (rc == DM_OK && fo.checkpoint_every > 0 && it % fo.checkpoint_every == 0)
                    rc = dm_flock_checkpoint_write(sim, ckpath);
                if (rc == DM_OK && (it % snap_every == 0 || it == fo.iterations)) {
                    double *x = NULL, *y = NULL, W, H;
                    rc = gather_positions(&x, &y, sim, ctx);
                    dm_flock_sim_plane(sim, &W, &H);
                    if (rc == DM_OK && ctx->rank == 0) {
                        char p[4300];
                        snprintf(p, sizeof p, "%s/snapshots/flock-%06d.png", out, it);
                        rc = dm_flock_png_write(p, x, y, have_labels ? truth : NULL, (size_t)n_global, W, H, png_size);
                    }
                    dm_free(x);
                    dm_free(y);
                    rc = dm_ctx_agree(ctx, rc);
                }
                dm_progress_update(&pr, (uint64_t)it);
            }
            dm_progress_end(&pr, (uint64_t)dm_flock_sim_iteration(sim));
        } else {
            rc = dm_flock_sim_run(sim);
        }
        dm_timer_stop("flock.run");
    }
    if (rc == DM_OK) rc = dm_flock_sim_cluster(sim, &co, &n_clusters);
    dm_flock_result res;
    memset(&res, 0, sizeof res);
    if (rc == DM_OK) rc = dm_flock_gather(&res, sim, &vec);
    uint32_t *terms = NULL;
    double *tw = NULL;
    if (rc == DM_OK) rc = dm_flock_top_terms(&terms, &tw, &res, &vec, top_k, ctx);
    dm_flock_vocab voc;
    memset(&voc, 0, sizeof voc);
    if (rc == DM_OK && vocab_path && ctx->rank == 0) rc = dm_flock_vocab_read(&voc, vocab_path);
    rc = dm_ctx_agree(ctx, rc);

    /* outputs (rank 0) */
    dm_metrics met;
    memset(&met, 0, sizeof met);
    uint64_t noise = 0;
    double W = 0, H = 0;
    if (rc == DM_OK) dm_flock_sim_plane(sim, &W, &H);
    if (rc == DM_OK && ctx->rank == 0) {
        dm_timer_start("flock.output");
        char p[4300];
        dm_atomic_file f;
        uint64_t *size = dm_calloc((size_t)(n_clusters + 1), sizeof *size);
        if (!size) rc = DM_ERR(DM_ERR_NOMEM, "out of memory");
        for (uint64_t i = 0; i < n_global && rc == DM_OK; i++) {
            if (res.cluster[i] < 0) noise++;
            else size[res.cluster[i]]++;
        }
        /* assignments.tsv */
        snprintf(p, sizeof p, "%s/assignments.tsv", out);
        if (rc == DM_OK && (rc = dm_atomic_open(&f, p)) == DM_OK) {
            fprintf(f.fp, "doc\tlabel\tcluster\n");
            for (uint64_t i = 0; i < n_global; i++) {
                tsv_field(f.fp, ids.blob + ids.off[i]);
                fputc('\t', f.fp);
                tsv_field(f.fp, labs.blob + labs.off[i]);
                fprintf(f.fp, "\t%d\n", res.cluster[i]);
            }
            rc = dm_atomic_commit(&f);
        }
        /* positions.csv */
        snprintf(p, sizeof p, "%s/positions.csv", out);
        if (rc == DM_OK && (rc = dm_atomic_open(&f, p)) == DM_OK) {
            fprintf(f.fp, "doc,x,y,cluster,label\n");
            for (uint64_t i = 0; i < n_global; i++) {
                csv_field(f.fp, ids.blob + ids.off[i]);
                fprintf(f.fp, ",%.17g,%.17g,%d,", res.x[i], res.y[i], res.cluster[i]);
                csv_field(f.fp, labs.blob + labs.off[i]);
                fputc('\n', f.fp);
            }
            rc = dm_atomic_commit(&f);
        }
        /* clusters.tsv */
        snprintf(p, sizeof p, "%s/clusters.tsv", out);
        if (rc == DM_OK && (rc = dm_atomic_open(&f, p)) == DM_OK) {
            fprintf(f.fp, "cluster\tsize\ttop_terms\tweights\n");
            for (int32_t k = 0; k < n_clusters; k++) {
                fprintf(f.fp, "%d\t%llu\t", k, (unsigned long long)size[k]);
                for (int t = 0; t < top_k && terms[(size_t)k * top_k + t] != UINT32_MAX; t++) {
                    uint32_t id = terms[(size_t)k * top_k + t];
                    if (t) fputc(' ', f.fp);
                    if (id < voc.n && voc.term[id]) tsv_field(f.fp, voc.term[id]);
                    else fprintf(f.fp, "%u", id);
                }
                fputc('\t', f.fp);
                for (int t = 0; t < top_k && terms[(size_t)k * top_k + t] != UINT32_MAX; t++)
                    fprintf(f.fp, "%s%.6g", t ? " " : "", tw[(size_t)k * top_k + t]);
                fputc('\n', f.fp);
            }
            fprintf(f.fp, "-1\t%llu\t\t\n", (unsigned long long)noise);
            rc = dm_atomic_commit(&f);
        }
        /* flock.png by cluster; flock-labels.png by true class */
        snprintf(p, sizeof p, "%s/flock.png", out);
        if (rc == DM_OK) rc = dm_flock_png_write(p, res.x, res.y, res.cluster, (size_t)n_global, W, H, png_size);
        if (rc == DM_OK && have_labels) {
            snprintf(p, sizeof p, "%s/flock-labels.png", out);
            rc = dm_flock_png_write(p, res.x, res.y, truth, (size_t)n_global, W, H, png_size);
        }
        if (rc == DM_OK && have_labels) rc = dm_metrics_compute(&met, truth, res.cluster, (size_t)n_global);
        dm_free(size);
        dm_timer_stop("flock.output");
    }
    rc = dm_ctx_agree(ctx, rc);

    /* report */
    if (rc == DM_OK) {
        dm_flock_stats_publish(sim);
        dm_report rep;
        DM_ASSERT(dm_report_init(&rep, "flock", app->argc_all, app->argv_all) == DM_OK);
        json_t *r = rep.results;
        json_object_set_new(r, "documents", json_integer((json_int_t)n_global));
        json_object_set_new(r, "input", json_string(synthetic ? "synthetic" : vectors));
        json_object_set_new(r, "iterations", json_integer(fo.iterations));
        json_t *m = json_object();
        json_object_set_new(m, "radius", json_real(fo.radius));
        json_object_set_new(m, "neighbours", json_real(fo.neighbours));
        json_object_set_new(m, "threshold", json_real(fo.threshold));
        json_object_set_new(m, "w_separation", json_real(fo.w_separation));
        json_object_set_new(m, "w_dissimilar", json_real(fo.w_dissimilar));
        json_object_set_new(m, "w_alignment", json_real(fo.w_alignment));
        json_object_set_new(m, "w_cohesion", json_real(fo.w_cohesion));
        json_object_set_new(m, "v_max", json_real(fo.v_max));
        json_object_set_new(m, "shrink", json_real(fo.shrink));
        json_object_set_new(m, "min_dist", json_real(fo.min_dist));
        json_object_set_new(m, "seed", json_integer((json_int_t)fo.seed));
        json_object_set_new(m, "min_cluster", json_integer(co.min_size));
        json_object_set_new(m, "small", json_string(co.attach ? "attach" : "noise"));
        json_object_set_new(m, "cluster_threshold", json_real(co.threshold < -1 ? fo.threshold : co.threshold));
        json_object_set_new(r, "model", m);
        json_t *pl = json_object();
        json_object_set_new(pl, "final_width", json_real(W));
        json_object_set_new(pl, "final_height", json_real(H));
        json_object_set_new(pl, "slices", json_integer(ctx->size));
        json_t *swj = json_array();
        for (int k = 0; k < ctx->size; k++) json_array_append_new(swj, json_real(sw ? sw[k] : 1.0));
        json_object_set_new(pl, "slice_weights", swj);
        json_object_set_new(r, "plane", pl);
        json_object_set_new(r, "similarity",
                            json_string("exact: cosine of the float unit vectors, dot products summed in 2^-61 "
                                        "fixed point (order independent); the CUDA pair cache stores exact decisions"));
        json_object_set_new(r, "clusters", json_integer(n_clusters));
        json_object_set_new(r, "noise", json_integer((json_int_t)noise));
        if (have_labels) {
            json_t *q = json_object();
            json_object_set_new(q, "nmi", json_real(met.nmi));
            json_object_set_new(q, "ari", json_real(met.ari));
            json_object_set_new(q, "purity", json_real(met.purity));
            json_object_set_new(q, "labelled_documents", json_integer((json_int_t)met.n));
            json_object_set_new(q, "classes", json_integer(met.classes));
            json_object_set_new(r, "quality", q);
        }
        if (ctx->backend == DM_BACKEND_CUDA) {
            /* the instance each kernel runs for this rank's share (its workload class) */
            static const char *const kn[] = {"flock.cell_keys", "flock.cell_bounds", "flock.gather",
                                             "flock.count", "flock.detect", "flock.similarity",
                                             "flock.forces", "flock.update", "flock.cache_move", "flock.flags",
                                             "flock.pick"};
            json_t *tj = json_object();
            size_t share = (size_t)(n_global / (uint64_t)ctx->size) + 1;
            for (size_t k = 0; k < sizeof kn / sizeof kn[0]; k++) {
                const dm_tune_kernel *kd = dm_tune_kernel_find(kn[k]);
                if (!kd) continue;
                char pol[128];
                json_object_set_new(tj, kn[k], json_string(dm_tune_policy_str(&dm_tune_select(kd, share)->policy, pol, sizeof pol)));
            }
            json_object_set_new(r, "tuning", tj);
        }
        double t_run = dm_timer_get("flock.run");
        json_object_set_new(r, "run_seconds", json_real(t_run));
        json_object_set_new(r, "boid_iterations_per_second",
                            json_real(t_run > 0 ? (double)n_global * fo.iterations / t_run : 0));
        rc = dm_report_collect(&rep, ctx);
        char p[4300];
        snprintf(p, sizeof p, "%s/report.json", out);
        if (rc == DM_OK) rc = dm_report_write(&rep, ctx, p);
        if (rc == DM_OK && app->report_path) rc = dm_report_write(&rep, ctx, app->report_path);
        rc = dm_ctx_agree(ctx, rc);
        dm_report_free(&rep);
    }
    if (rc == DM_OK && ctx->rank == 0) {
        printf("flock: %llu documents, %d clusters, %llu noise, %d iterations in %.2f s", (unsigned long long)n_global,
               n_clusters, (unsigned long long)noise, fo.iterations, dm_wtime() - t_start);
        if (have_labels) printf(", NMI %.4f ARI %.4f purity %.4f", met.nmi, met.ari, met.purity);
        printf("\n");
    }
    dm_flock_sim_free(sim);
    dm_flock_result_free(&res);
    dm_free(terms);
    dm_free(tw);
    dm_flock_vocab_free(&voc);
    dm_free(class_names);
    dm_free(label_copy);
    dm_free(truth);
    strings_free(&ids);
    strings_free(&labs);
    dm_free(sw);
    if (synthetic) dm_flock_vectors_release(&vec);
    else dm_vectors_free(&vec);
    return rc == DM_OK ? DM_EXIT_OK : dm_app_fail(app, "flock", rc);
}
