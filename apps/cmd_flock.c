/* `docmine flock`: multi-species flocking clustering of document vectors (flock/flock.h) on the
 * CPU or CUDA backend over any number of ranks, with checkpoints, and the outputs of DESIGN.md
 * section 8: assignments.tsv, clusters.tsv (top terms), positions.csv, flock.png (+ a PNG series),
 * report.json with NMI / ARI / purity when labels are known. Reference: none (a command). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/cmd_flock.h"
#include "apps/commands.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/report.h"
#include "common/status.h"
#include "common/timer.h"
#include "flock/flock.h"
#include "flock/flock_synth.h"
#include "tfidf/tfidf.h"

const char dm_flock_cli_help[] =
    "output:\n"
    "  --top-terms K           terms per cluster in clusters.tsv (default 10)\n"
    "  --png-size N            longer side of the PNGs in pixels (default 1024)\n"
    "  --snapshot-every K      also write DIR/snapshots/flock-<iteration>.png every K iterations\n"
    "                          (the iteration zero-padded to six digits: flock-000100.png)\n"
    "model:\n"
    "  --iterations N          (default 500)\n"
    "  --radius R              interaction radius (default 1; N x R at most 2^30, the force\n"
    "                          sums' fixed point)\n"
    "  --neighbours K          expected neighbours at the initial density; sets the plane\n"
    "                          area N pi R^2 / K, N pi / K grid cells: at most 16 a document\n"
    "                          plus 4096, so K >= 0.2 for large N (default 15)\n"
    "  --threshold T           similar when cosine >= T (default 0.10; compared to 2^-20, so 1\n"
    "                          means identical vectors)\n"
    "  --weights S,D,A,C       separation from similar, separation from dissimilar,\n"
    "                          alignment, cohesion (default 0.02,0.05,0.30,0.05; each\n"
    "                          at most 1e6)\n"
    "  --vmax V                speed cap, < R (default 0.5)\n"
    "  --shrink F              the plane's side shrinks by this fraction over the run (0.5)\n"
    "clusters:\n"
    "  --min-cluster N         smaller components are small (default 5)\n"
    "  --small noise|neighbour|centroid  what becomes of small components' documents: noise\n"
    "                          (-1; pure flocking); neighbour (formerly 'attach'): the cluster of\n"
    "                          the nearest clustered neighbour within R; centroid (default): the\n"
    "                          cluster whose centroid is the most cosine-similar (exact; not\n"
    "                          flocking)\n"
    "  --cluster-threshold T   edges of the final graph need cosine >= T (default: --threshold);\n"
    "                          a higher value cuts chains across topics. With --resume of a\n"
    "                          finished run's checkpoint only the clustering is redone\n"
    "  --merge M               then merge clusters while two centroids have cosine >= M\n"
    "                          (centroid linkage, not flocking; default 0.5; 0: off). Above\n"
    "                          4096 clusters both centroid steps are skipped with a warning\n"
    "  --refine N              then up to N refinement steps: every clustered document moves to\n"
    "                          the cluster with the most cosine-similar centroid, until none\n"
    "                          moves (spherical k-means steps from the flock's clusters, not\n"
    "                          flocking; default 30; 0: off, pure flocking with the steps above)\n"
    "run:\n"
    "  --checkpoint-every K    write a checkpoint every K iterations (atomic; also the last)\n"
    "  --checkpoint FILE       checkpoint file (default DIR/flock.ckpt)\n"
    "  --resume                continue from the checkpoint (same options and input)\n"
    "  --slice-weights equal|auto|W0,W1,...  slice heights per rank (auto: measured speed, equal\n"
    "                          slices when those would be too low for the halo)\n"
    "  --migrate-every K       boids that left their rank's slice move to the next rank after\n"
    "                          every K iterations; the halo widens to R + (K - 1) VMAX (default\n"
    "                          0: the largest K up to 4 that the slices allow; results are the same)\n";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: docmine flock (--vectors FILE | --synth N) -o DIR [options]\n\n"
            "Clusters documents by multi-species flocking: each document is a boid on a toroidal\n"
            "plane that flies with similar documents (cosine >= T) and away from dissimilar ones;\n"
            "clusters are the connected components of \"within r and similar\" at the end. The plane\n"
            "is cut into one horizontal slice per rank. Results do not depend on the number of ranks.\n\n"
            "input:\n"
            "  --vectors FILE          .dmv vectors (docmine vectorize)\n"
            "  --synth N               N synthetic documents instead (--synth-topics K, default 10;\n"
            "                          --synth-tokens T words each, default 600: ~400 distinct terms)\n"
            "  --vocab FILE            term names for clusters.tsv (id<TAB>term<TAB>df lines)\n"
            "  -o, --output DIR        assignments.tsv clusters.tsv positions.csv flock.png report.json;\n"
            "                          flock-labels.png when the documents have labels\n"
            "%s"
            "  (global: --backend, --seed for initial positions, --report, --threads)\n\n"
            "examples:\n"
            "  docmine flock --vectors reuters.dmv --vocab reuters.vocab.tsv -o out/\n"
            "  mpiexec -n 4 docmine flock --synth 1000000 --synth-topics 20 -o out/ --checkpoint-every 100\n",
            dm_flock_cli_help);
}

/* Reads this rank's share of a .dmv file (an even split of its rows), the file checked to be the
 * same on every rank (dm_app_vectors_rows / _read). */
static int read_vectors(dm_vectors *v, const char *path, const dm_ctx *ctx)
{
    memset(v, 0, sizeof *v);
    uint64_t n = 0, first, count;
    DM_TRY(dm_app_vectors_rows(&n, path, ctx));
    dm_flock_share(n, ctx->rank, ctx->size, &first, &count);
    return dm_app_vectors_read(v, path, first, count, ctx);
}

void dm_flock_cli_init(dm_flock_cli *f, const dm_ctx *ctx)
{
    memset(f, 0, sizeof *f);
    dm_flock_options fo = DM_FLOCK_OPTIONS_INIT;
    dm_flock_cluster_options co = DM_FLOCK_CLUSTER_OPTIONS_INIT;
    dm_flock_job_options jo = DM_FLOCK_JOB_OPTIONS_INIT;
    f->fo = fo;
    f->co = co;
    f->jo = jo;
    f->fo.seed = ctx->opt.seed;
    f->slices = "equal";
}

void dm_flock_cli_free(dm_flock_cli *f)
{
    dm_free(f->slice_weights);
    f->slice_weights = NULL;
}

/* A number of option name in [lo, hi] (whole: a whole number, written without a fraction);
 * 0, or the usage error's exit code. */
static int opt_num(dm_app *app, const char *cmd, const char *arg, const char *name, double lo, double hi, int whole,
                   double *v)
{
    if (dm_app_parse_num(arg, lo, hi, v)) return dm_app_usage_error(app, cmd, "invalid value '%s' for %s", arg, name);
    if (whole && *v != floor(*v))
        return dm_app_usage_error(app, cmd, "%s takes a whole number, not '%s'", name, arg);
    return 0;
}
/* a real or a whole number of the option being parsed, or return its usage error */
#define OPT_NUM(lo, hi, whole)                                                                     \
    do {                                                                                           \
        int e_ = opt_num(app, cmd, arg, name, (lo), (hi), (whole), &v);                            \
        if (e_) return e_;                                                                         \
    } while (0)
#define NUM(lo, hi) OPT_NUM(lo, hi, 0)
#define INT(lo, hi) OPT_NUM(lo, hi, 1)

int dm_flock_cli_option(dm_app *app, const char *cmd, int c, const char *arg, const char *name, dm_flock_cli *f)
{
    double v = 0;
    switch (c) {
    case DM_FO_TOP: INT(1, 1000); f->jo.top_k = (int)v; break;
    case DM_FO_PNG: INT(16, 16384); f->jo.png_size = (int)v; break;
    case DM_FO_SNAP: INT(1, 1e9); f->jo.snapshot_every = (int)v; break;
    case DM_FO_ITER: INT(1, 1e9); f->fo.iterations = (int)v; break;
    case DM_FO_RADIUS: NUM(1e-6, 1e6); f->fo.radius = v; break;
    case DM_FO_NB: NUM(1e-6, 1e9); f->fo.neighbours = v; break;
    case DM_FO_THRESH: NUM(-1, 1); f->fo.threshold = v; break;
    case DM_FO_CTHR: NUM(-1, 1); f->co.threshold = v; break;
    case DM_FO_MERGE: NUM(0, 1); f->co.merge = v; break;
    case DM_FO_REFINE: INT(0, 1e6); f->co.refine = (int)v; break;
    case DM_FO_VMAX: NUM(1e-12, 1e6); f->fo.v_max = v; break;
    case DM_FO_SHRINK: NUM(0, 0.999999); f->fo.shrink = v; break;
    case DM_FO_MINC: INT(1, 1e9); f->co.min_size = (int)v; break;
    case DM_FO_CKE: INT(0, 1e9); f->fo.checkpoint_every = (int)v; break;
    case DM_FO_CK: f->fo.checkpoint = arg; break;
    case DM_FO_RESUME: f->fo.resume = 1; break;
    case DM_FO_SLICES: f->slices = arg; break;
    case DM_FO_MIGRATE: INT(0, 1000); f->fo.migrate_every = (int)v; break;
    case DM_FO_SMALL:
        if (dm_flock_small_parse(arg, &f->co.attach) != DM_OK)
            return dm_app_usage_error(app, cmd, "--small must be noise, neighbour or centroid, not '%s'", arg);
        break;
    case DM_FO_WEIGHTS: {
        double w[4];
        char *p = (char *)arg, *end;
        int k = 0;
        for (; k < 4; k++) {
            errno = 0;
            w[k] = strtod(p, &end);
            if (end == p || errno || !(w[k] >= 0 && w[k] <= DM_FLOCK_WEIGHT_MAX)) break;
            p = end;
            if (k < 3) {
                if (*p != ',') break;
                p++;
            }
        }
        if (k != 4 || *p)
            return dm_app_usage_error(app, cmd, "--weights expects S,D,A,C (four numbers in [0, %g]), not '%s'",
                                      DM_FLOCK_WEIGHT_MAX, arg);
        f->fo.w_separation = w[0];
        f->fo.w_dissimilar = w[1];
        f->fo.w_alignment = w[2];
        f->fo.w_cohesion = w[3];
        break;
    }
    default: return dm_app_usage_error(app, cmd, "internal: unknown flock option %d", c);
    }
    return 0;
}

int dm_flock_cli_finish(dm_app *app, const char *cmd, dm_flock_cli *f, const char *out)
{
    dm_ctx *ctx = app->ctx;
    if (!(f->fo.v_max < f->fo.radius)) return dm_app_usage_error(app, cmd, "--vmax must be below --radius");
    if (strcmp(f->slices, "auto") == 0) f->jo.calibrate = 1;
    else if (strcmp(f->slices, "equal") != 0) {
        double *sw = dm_malloc(sizeof *sw * (size_t)ctx->size);
        /* agreed by every rank (one rank's failure alone waited for the others in dm_ctx_agree) */
        int arc = dm_ctx_agree(ctx, sw ? DM_OK : DM_ERR(DM_ERR_NOMEM, "--slice-weights: out of memory"));
        if (arc != DM_OK) {
            dm_free(sw);
            return dm_app_fail(app, cmd, arc);
        }
        char *p = (char *)f->slices, *end;
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
            return dm_app_usage_error(app, cmd, "--slice-weights needs equal, auto or %d positive numbers", ctx->size);
        }
        f->slice_weights = sw;
        f->fo.slice_weights = sw;
    }
    /* every output's path fits, said before the run (OUTDIR/name cut by a buffer named another
     * file; refused when written, after the run, the message was the path's first 700 bytes) */
    int rc = DM_OK;
    if (!f->fo.checkpoint) {
        rc = dm_app_path(f->checkpoint, sizeof f->checkpoint, "%s/flock.ckpt", out);
        f->fo.checkpoint = f->checkpoint;
    }
    char p[4300];
    if (rc == DM_OK) rc = dm_app_path(p, sizeof p, "%s", f->fo.checkpoint);
    if (rc == DM_OK)
        rc = f->jo.snapshot_every ? dm_app_path(p, sizeof p, "%s/snapshots/flock-%06d.png", out, f->fo.iterations)
                                  : dm_app_path(p, sizeof p, "%s/flock-labels.png", out);
    rc = dm_ctx_agree(app->ctx, rc);
    if (rc != DM_OK) {
        dm_flock_cli_free(f);
        return dm_app_fail(app, cmd, rc);
    }
    f->jo.out_dir = out;
    return 0;
}

/* Whether files can be created in the folder dir: a file made and removed there (permission bits
 * alone do not say it for root, nor for a read-only or special file system). */
static int probe_folder(const char *dir)
{
    char p[4300];
    snprintf(p, sizeof p, "%s/.docmine-probe.%ld", dir, (long)getpid());
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST)
        return DM_ERR(DM_ERR_IO, "%s: cannot write the outputs in this folder: %s", dir, strerror(errno));
    if (fd >= 0) {
        close(fd);
        unlink(p);
    }
    return DM_OK;
}

/* The output folders: DIR and, for a PNG series, DIR/snapshots (rank 0), which must take files:
 * said before the run, not when its results are written. With --resume, the checkpoint must open
 * first: a resume without one left an empty DIR behind. Collective. */
int dm_flock_cli_mkdirs(const dm_ctx *ctx, const dm_flock_cli *f)
{
    int rc = DM_OK;
    if (ctx->rank == 0 && f->fo.resume) {
        FILE *cf = NULL;
        rc = dm_open_input(&cf, f->fo.checkpoint, "--resume: checkpoint");
        if (cf) fclose(cf);
    }
    if (rc == DM_OK && ctx->rank == 0) rc = dm_mkdirs(f->jo.out_dir);
    if (rc == DM_OK && ctx->rank == 0) rc = probe_folder(f->jo.out_dir);
    if (rc == DM_OK && ctx->rank == 0 && f->jo.snapshot_every) {
        char d[4200];
        snprintf(d, sizeof d, "%s/snapshots", f->jo.out_dir);
        rc = dm_mkdirs(d);
        if (rc == DM_OK) rc = probe_folder(d);
    }
    return dm_ctx_agree(ctx, rc);
}

int dm_cmd_flock(dm_app *app, int argc, char **argv)
{
    enum { O_VECTORS = 256, O_SYNTH, O_STOPICS, O_STOKENS, O_VOCAB };
    static const struct option opts[] = {
        {"vectors", required_argument, 0, O_VECTORS}, {"synth", required_argument, 0, O_SYNTH},
        {"synth-topics", required_argument, 0, O_STOPICS}, {"synth-tokens", required_argument, 0, O_STOKENS},
        {"vocab", required_argument, 0, O_VOCAB}, {"output", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'}, DM_FLOCK_LONGOPTS,
        {0, 0, 0, 0}};
    dm_ctx *ctx = app->ctx;
    dm_flock_cli fl;
    dm_flock_cli_init(&fl, ctx);
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.seed = ctx->opt.seed;
    const char *vectors = NULL, *vocab_path = NULL, *out = NULL;
    uint64_t synth_n = 0;
    optind = 1;
    opterr = 0;
    int c, li = -1;
    const char *cmd = "flock";
    while ((c = getopt_long(argc, argv, "o:h", opts, &li)) != -1) {
        double v = 0;
        char nb[64];
        const char *name = dm_app_opt_name(nb, opts, li, c), *arg = optarg;
        li = -1;
        if (c >= DM_FO_TOP && c < DM_FO_SHARED_END) {
            int rc = dm_flock_cli_option(app, cmd, c, arg, name, &fl);
            if (rc) return rc;
            continue;
        }
        switch (c) {
        case O_VECTORS: vectors = optarg; break;
        case O_SYNTH: INT(1, 4e9); synth_n = (uint64_t)v; break;
        case O_STOPICS: INT(1, 1e6); so.topics = (int)v; break;
        case O_STOKENS: INT(1, 1e6); so.tokens = (int)v; break;
        case O_VOCAB: vocab_path = optarg; break;
        case 'o': out = optarg; break;
        case 'h':
            if (ctx->rank == 0) usage(stdout);
            return DM_EXIT_OK;
        default: return dm_app_usage_error(app, "flock", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return dm_app_usage_error(app, "flock", "unexpected argument '%s'", argv[optind]);
    if (!out) return dm_app_usage_error(app, "flock", "missing -o DIR");
    if (!*out) return dm_app_usage_error(app, "flock", "-o: an empty path");
    if (!vectors == !synth_n) return dm_app_usage_error(app, "flock", "give exactly one of --vectors FILE and --synth N");
    int code = dm_flock_cli_finish(app, "flock", &fl, out);
    if (code) return code;

    double t_start = dm_wtime();
    int rc = dm_flock_cli_mkdirs(ctx, &fl);
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
    dm_flock_vocab voc;
    memset(&voc, 0, sizeof voc);
    if (rc == DM_OK && vocab_path && ctx->rank == 0) rc = dm_flock_vocab_read(&voc, vocab_path, vec.n_cols);
    rc = dm_ctx_agree(ctx, rc);
    fl.jo.vocab = vocab_path ? &voc : NULL;

    dm_report rep;
    DM_ASSERT(dm_report_init(&rep, "flock", app->argc_all, app->argv_all) == DM_OK);
    json_object_set_new(rep.results, "input", dm_json_text(synthetic ? "synthetic" : vectors));
    dm_flock_job_result jr;
    memset(&jr, 0, sizeof jr);
    if (rc == DM_OK) rc = dm_flock_job_run(&jr, rep.results, ctx, &vec, &fl.fo, &fl.co, &fl.jo);
    if (rc == DM_OK) {
        rc = dm_app_report_write(app, &rep, out);
    }
    dm_report_free(&rep);
    if (rc == DM_OK && ctx->rank == 0) {
        printf("flock: %llu documents, %d clusters, %llu noise, %d iterations in %.2f s", (unsigned long long)jr.docs,
               jr.clusters, (unsigned long long)jr.noise, fl.fo.iterations, dm_wtime() - t_start);
        if (jr.have_labels) printf(", NMI %.4f ARI %.4f purity %.4f", jr.quality.nmi, jr.quality.ari, jr.quality.purity);
        printf("\n");
    }
    dm_flock_vocab_free(&voc);
    dm_flock_cli_free(&fl);
    if (synthetic) dm_flock_vectors_release(&vec);
    else dm_vectors_free(&vec);
    return rc == DM_OK ? DM_EXIT_OK : dm_app_fail(app, "flock", rc);
}
