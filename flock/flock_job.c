/* A whole flock run with its outputs (DESIGN.md section 8), shared by `docmine flock` and
 * `docmine pipeline`: true classes of the rows, the simulation (with an optional PNG series and
 * checkpoints), clusters, the final state fetched back to the rows, top terms, and the files
 * assignments.tsv, clusters.tsv, positions.csv, flock.png, flock-labels.png written from every
 * rank's rows (flock_rows.c: nothing of size N is gathered to one rank), plus the run's section of
 * report.json.
 * Reference: none (a driver over flock.h). */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/report.h"
#include "common/status.h"
#include "common/timer.h"
#include "common/tune/tune.h"
#include "flock/flock.h"

/* TSV fields: tabs and newlines in ids or labels become spaces */
int dm_flock_clusters_tsv(const char *path, const uint64_t *size, int32_t n_clusters, const uint32_t *terms,
                          const double *tw, int top_k, const dm_flock_vocab *voc)
{
    dm_atomic_file f;
    DM_TRY(dm_atomic_open(&f, path));
    fprintf(f.fp, "cluster\tsize\ttop_terms\tweights\n");
    for (int32_t k = 0; k < n_clusters; k++) {
        fprintf(f.fp, "%d\t%llu\t", k, (unsigned long long)size[k]);
        for (int t = 0; t < top_k && terms[(size_t)k * top_k + t] != UINT32_MAX; t++) {
            uint32_t id = terms[(size_t)k * top_k + t];
            if (t) fputc(' ', f.fp);
            if (voc && id < voc->n && voc->term[id]) dm_fput_tsv_field(f.fp, voc->term[id]);
            else fprintf(f.fp, "%u", id);
        }
        fputc('\t', f.fp);
        for (int t = 0; t < top_k && terms[(size_t)k * top_k + t] != UINT32_MAX; t++)
            fprintf(f.fp, "%s%.6g", t ? " " : "", tw[(size_t)k * top_k + t]);
        fputc('\n', f.fp);
    }
    fprintf(f.fp, "-1\t%llu\t\t\n", (unsigned long long)size[n_clusters]);
    return dm_atomic_commit(&f);
}

json_t *dm_flock_quality_json(const dm_metrics *m)
{
    return dm_metrics_json(m); /* the same object as streamclust's reports */
}

/* Each rank's measured speed; NULL (*sw) when they are within 10% (equal slices). */
static int calibrate_slices(double **sw, const dm_ctx *ctx)
{
    *sw = NULL;
    double speed = 0;
    int rc = dm_ctx_agree(ctx, dm_flock_calibrate(&speed, ctx));
    double *w = dm_malloc(sizeof *w * (size_t)ctx->size);
    if (rc == DM_OK && !w) rc = DM_ERR(DM_ERR_NOMEM, "out of memory");
    rc = dm_ctx_agree(ctx, rc);
    if (rc != DM_OK) {
        dm_free(w);
        return rc;
    }
    MPI_Allgather(&speed, 1, MPI_DOUBLE, w, 1, MPI_DOUBLE, ctx->world);
    double lo = w[0], hi = w[0];
    for (int k = 1; k < ctx->size; k++) {
        lo = fmin(lo, w[k]);
        hi = fmax(hi, w[k]);
    }
    /* within 10%: measurement noise, keep equal slices (and their simpler arithmetic) */
    if (hi < 1.1 * lo) {
        dm_free(w);
        w = NULL;
    }
    if (ctx->rank == 0)
        dm_log_info("slice calibration: %.3g .. %.3g boid-iterations/s per rank%s", lo, hi, w ? "" : " (equal slices)");
    *sw = w;
    return DM_OK;
}

/* An output folder used again: a run removes the files of its own names that it will not write
 * this time, so that DIR never mixes two runs' outputs - flock-labels.png when the input has no
 * labels, and snapshots/flock-<iteration>.png beyond the iteration it starts from (every one
 * without --resume; those up to a checkpoint's iteration are the interrupted run's, this run's
 * first part). Other files are never touched, nor a checkpoint (a resume checks that it was
 * written for the same input and options). Rank 0, before the run; the status is agreed. */
static int remove_stale_outputs(const char *dir, int have_labels, int start, const dm_ctx *ctx)
{
    int rc = DM_OK;
    char p[4300];
    if (ctx->rank == 0 && !have_labels) {
        snprintf(p, sizeof p, "%s/flock-labels.png", dir);
        if (unlink(p) == 0) dm_log_info("removed %s: an earlier run's (this input has no labels)", p);
        else if (errno != ENOENT) rc = DM_ERR(DM_ERR_IO, "%s: cannot remove an earlier run's file: %s", p, strerror(errno));
    }
    snprintf(p, sizeof p, "%s/snapshots", dir);
    DIR *d = ctx->rank == 0 && rc == DM_OK ? opendir(p) : NULL; /* (none: nothing to remove) */
    int removed = 0;
    for (struct dirent *e; d && rc == DM_OK && (e = readdir(d)) != NULL;) {
        const char *n = e->d_name;
        size_t digits = strncmp(n, "flock-", 6) == 0 ? strspn(n + 6, "0123456789") : 0;
        if (digits == 0 || digits > 9 || strcmp(n + 6 + digits, ".png") != 0 || atoi(n + 6) <= start) continue;
        char f[4600];
        snprintf(f, sizeof f, "%s/%s", p, n);
        if (unlink(f) != 0) rc = DM_ERR(DM_ERR_IO, "%s: cannot remove an earlier run's snapshot: %s", f, strerror(errno));
        else removed++;
    }
    if (d) closedir(d);
    if (removed) dm_log_info("removed %d snapshots of an earlier run from %s", removed, p);
    return dm_ctx_agree(ctx, rc);
}

/* The PNG series' picture of the current iteration: the positions fetched to the rows, drawn
 * coloured by class (collective; the status is agreed). */
static int snapshot(dm_flock_sim *sim, const dm_flock_job_options *jo, const dm_vectors *v, const int32_t *truth,
                    const dm_ctx *ctx)
{
    dm_timer_start("flock.snapshots");
    dm_flock_rows rows;
    double W, H;
    int rc = dm_flock_rows_fetch(&rows, sim, v, 0);
    dm_flock_sim_plane(sim, &W, &H);
    if (rc == DM_OK) {
        char p[4300];
        snprintf(p, sizeof p, "%s/snapshots/flock-%06d.png", jo->out_dir, dm_flock_sim_iteration(sim));
        rc = dm_flock_png_write_rows(p, rows.x, rows.y, truth, v->row_base, (size_t)v->n_rows, W, H, jo->png_size, ctx);
    }
    dm_flock_rows_free(&rows);
    dm_timer_stop("flock.snapshots");
    return dm_ctx_agree(ctx, rc);
}

/* Iterates step by step to write the PNG series between steps (and checkpoints); each snapshot
 * fetches the positions to the rows and draws them coloured by class (truth: the rows' classes,
 * NULL without labels). A resumed run first draws the picture of the checkpoint's iteration when
 * one is due there: the interrupted run wrote its checkpoint before that picture and may have
 * been stopped in between (the state is the checkpoint's, so the picture is the same). */
static int run_with_snapshots(dm_flock_sim *sim, const dm_flock_options *fo, const dm_flock_job_options *jo,
                              const dm_vectors *v, const int32_t *truth, const dm_ctx *ctx)
{
    int rc = DM_OK;
    int start = dm_flock_sim_iteration(sim);
    if (fo->resume && start > 0 && (start % jo->snapshot_every == 0 || start == fo->iterations))
        rc = snapshot(sim, jo, v, truth, ctx);
    dm_progress pr;
    dm_progress_begin(&pr, "flock", "it", (uint64_t)fo->iterations);
    while (rc == DM_OK && dm_flock_sim_iteration(sim) < fo->iterations) {
        rc = dm_flock_sim_step(sim);
        int it = dm_flock_sim_iteration(sim);
        if (rc == DM_OK && dm_flock_checkpoint_due(fo, it))
            rc = dm_flock_checkpoint_write(sim, fo->checkpoint);
        if (rc == DM_OK && (it % jo->snapshot_every == 0 || it == fo->iterations))
            rc = snapshot(sim, jo, v, truth, ctx);
        dm_progress_update(&pr, (uint64_t)it);
    }
    dm_progress_end(&pr, (uint64_t)dm_flock_sim_iteration(sim));
    return rc;
}

/* The files of section 8 and the quality metrics, from every rank's rows (collective; rank 0
 * writes). */
static int write_outputs(dm_flock_job_result *res, const dm_flock_rows *fr, const dm_vectors *v, const int32_t *truth,
                         int have_labels, const uint32_t *terms, const double *tw, double W, double H,
                         const dm_flock_job_options *jo, const dm_ctx *ctx)
{
    char p[4300];
    size_t n = (size_t)v->n_rows;
    /* the text files (rank 0 writes what every rank formatted) */
    dm_timer_start("flock.files");
    snprintf(p, sizeof p, "%s/assignments.tsv", jo->out_dir);
    int rc = dm_flock_write_assignments_rows(p, v, fr->cluster, ctx);
    snprintf(p, sizeof p, "%s/positions.csv", jo->out_dir);
    if (rc == DM_OK) rc = dm_flock_write_positions_rows(p, v, fr->x, fr->y, fr->cluster, ctx);
    snprintf(p, sizeof p, "%s/clusters.tsv", jo->out_dir);
    if (rc == DM_OK)
        rc = dm_flock_write_clusters_rows(p, &res->noise, fr->cluster, v->n_rows, fr->n_clusters, terms, tw, jo->top_k,
                                          jo->vocab, ctx);
    dm_timer_stop("flock.files");
    DM_TRY(rc);
    /* flock.png by cluster; flock-labels.png by true class */
    dm_timer_start("flock.png");
    snprintf(p, sizeof p, "%s/flock.png", jo->out_dir);
    rc = dm_flock_png_write_rows(p, fr->x, fr->y, fr->cluster, v->row_base, n, W, H, jo->png_size, ctx);
    if (rc == DM_OK && have_labels) {
        snprintf(p, sizeof p, "%s/flock-labels.png", jo->out_dir);
        rc = dm_flock_png_write_rows(p, fr->x, fr->y, truth, v->row_base, n, W, H, jo->png_size, ctx);
    }
    dm_timer_stop("flock.png");
    if (rc == DM_OK && have_labels) {
        dm_timer_start("flock.quality");
        rc = dm_flock_quality_rows(&res->quality, truth, fr->cluster, n, ctx);
        dm_timer_stop("flock.quality");
    }
    return rc;
}

/* The run's part of the report. */
static void fill_results(json_t *r, const dm_flock_job_result *res, const dm_flock_options *fo,
                         const dm_flock_cluster_options *co, const double *sw, double W, double H, const dm_ctx *ctx)
{
    json_object_set_new(r, "documents", json_integer((json_int_t)res->docs));
    json_object_set_new(r, "iterations", json_integer(fo->iterations));
    json_t *m = json_object();
    json_object_set_new(m, "radius", json_real(fo->radius));
    json_object_set_new(m, "neighbours", json_real(fo->neighbours));
    json_object_set_new(m, "threshold", json_real(fo->threshold));
    json_object_set_new(m, "w_separation", json_real(fo->w_separation));
    json_object_set_new(m, "w_dissimilar", json_real(fo->w_dissimilar));
    json_object_set_new(m, "w_alignment", json_real(fo->w_alignment));
    json_object_set_new(m, "w_cohesion", json_real(fo->w_cohesion));
    json_object_set_new(m, "v_max", json_real(fo->v_max));
    json_object_set_new(m, "shrink", json_real(fo->shrink));
    json_object_set_new(m, "min_dist", json_real(fo->min_dist));
    json_object_set_new(m, "seed", dm_json_u64(fo->seed));
    json_object_set_new(m, "min_cluster", json_integer(co->min_size));
    json_object_set_new(m, "small", json_string(dm_flock_small_name(co->attach)));
    json_object_set_new(m, "merge", json_real(co->merge));
    json_object_set_new(m, "refine", json_integer(co->refine));
    json_object_set_new(m, "cluster_threshold", json_real(co->threshold < -1 ? fo->threshold : co->threshold));
    json_object_set_new(r, "model", m);
    char extraction[1024]; /* every step described takes about 500 bytes, and a skip adds 70 */
    dm_flock_cluster_describe(extraction, sizeof extraction, co, fo->threshold);
    if (res->centroid_skipped) {
        size_t used = strlen(extraction);
        snprintf(extraction + used, sizeof extraction - used,
                 "; the centroid steps were SKIPPED: %d clusters, more than %d", (int)res->centroid_skipped,
                 DM_FLOCK_CENTROID_MAX);
    }
    json_object_set_new(r, "cluster_extraction", json_string(extraction));
    json_object_set_new(r, "centroid_steps_skipped_clusters", json_integer(res->centroid_skipped));
    json_object_set_new(r, "refine_steps", json_integer(res->refine_steps));
    json_object_set_new(r, "refine_moved", json_integer((json_int_t)res->refine_moved));
    json_t *pl = json_object();
    json_object_set_new(pl, "final_width", json_real(W));
    json_object_set_new(pl, "final_height", json_real(H));
    json_object_set_new(pl, "slices", json_integer(ctx->size));
    json_t *swj = json_array();
    for (int k = 0; k < ctx->size; k++) json_array_append_new(swj, json_real(sw ? sw[k] : 1.0));
    json_object_set_new(pl, "slice_weights", swj);
    json_object_set_new(pl, "migrate_every", json_integer(res->migrate_every));
    json_object_set_new(r, "plane", pl);
    json_object_set_new(r, "similarity",
                        json_string("exact: cosine of the float unit vectors, dot products summed in 2^-61 "
                                    "fixed point (order independent); the CUDA pair cache stores exact decisions"));
    json_object_set_new(r, "clusters", json_integer(res->clusters));
    json_object_set_new(r, "noise", json_integer((json_int_t)res->noise));
    if (res->have_labels) json_object_set_new(r, "quality", dm_flock_quality_json(&res->quality));
    if (ctx->backend == DM_BACKEND_CUDA) {
        /* the instance each kernel runs for this rank's share (its workload class) */
        static const char *const kn[] = {"flock.cell_keys", "flock.cell_bounds", "flock.gather",
                                         "flock.count", "flock.detect", "flock.similarity",
                                         "flock.forces", "flock.update", "flock.cache_move", "flock.flags",
                                         "flock.pick"};
        json_t *tj = json_object();
        size_t share = (size_t)(res->docs / (uint64_t)ctx->size) + 1;
        for (size_t k = 0; k < sizeof kn / sizeof kn[0]; k++) {
            const dm_tune_kernel *kd = dm_tune_kernel_find(kn[k]);
            if (!kd) continue;
            char pol[128];
            json_object_set_new(tj, kn[k], json_string(dm_tune_policy_str(&dm_tune_select(kd, share)->policy, pol, sizeof pol)));
        }
        json_object_set_new(r, "tuning", tj);
    }
    /* after --resume the run's time covers the iterations from the checkpoint's on */
    double t_run = dm_timer_get("flock.run");
    int run = fo->iterations - res->start_iteration;
    if (fo->resume) json_object_set_new(r, "resumed_from_iteration", json_integer(res->start_iteration));
    json_object_set_new(r, "iterations_run", json_integer(run));
    json_object_set_new(r, "run_seconds", json_real(t_run));
    json_object_set_new(r, "boid_iterations_per_second",
                        json_real(t_run > 0 ? (double)res->docs * run / t_run : 0));
}

int dm_flock_job_run(dm_flock_job_result *res, json_t *results, const dm_ctx *ctx, const dm_vectors *v,
                     const dm_flock_options *fo_in, const dm_flock_cluster_options *co, const dm_flock_job_options *jo)
{
    memset(res, 0, sizeof *res);
    dm_flock_options fo = *fo_in;
    double t_start = dm_wtime();
    double *sw = NULL;
    int rc = DM_OK;
    if (jo->calibrate) {
        rc = calibrate_slices(&sw, ctx);
        fo.slice_weights = sw;
        fo.slice_weights_measured = 1;
    }
    const double *weights = fo.slice_weights;

    /* the documents stay on their rows: classes are numbered over all ranks, nothing gathered */
    int32_t *truth = dm_malloc(sizeof *truth * (size_t)(v->n_rows ? v->n_rows : 1));
    int32_t n_classes = 0;
    if (rc == DM_OK && !truth) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    rc = dm_ctx_agree(ctx, rc);
    dm_timer_start("flock.classes");
    if (rc == DM_OK) rc = dm_flock_classes_rows(truth, &n_classes, v, ctx);
    dm_timer_stop("flock.classes");
    uint64_t n_docs = v->n_rows;
    MPI_Allreduce(MPI_IN_PLACE, &n_docs, 1, MPI_UINT64_T, MPI_SUM, ctx->world);
    res->docs = n_docs;
    res->have_labels = n_classes > 0;

    dm_flock_sim *sim = NULL;
    if (rc == DM_OK) {
        dm_timer_start("flock.setup");
        rc = dm_flock_sim_init(&sim, ctx, v, &fo);
        dm_timer_stop("flock.setup");
    }
    if (rc == DM_OK) res->migrate_every = dm_flock_sim_migrate_every(sim);
    if (rc == DM_OK) res->start_iteration = dm_flock_sim_iteration(sim);
    if (rc == DM_OK) rc = remove_stale_outputs(jo->out_dir, res->have_labels, res->start_iteration, ctx);
    if (rc == DM_OK && !dm_flock_sim_weighted(sim)) weights = NULL; /* equal slices after all */
    if (rc == DM_OK) {
        dm_log_info("flock: %llu documents on %d rank(s), %s backend, %d iterations from %d", (unsigned long long)n_docs,
                    ctx->size, dm_backend_name(ctx->backend), fo.iterations, dm_flock_sim_iteration(sim));
        dm_timer_start("flock.run");
        rc = jo->snapshot_every > 0 ? run_with_snapshots(sim, &fo, jo, v, res->have_labels ? truth : NULL, ctx)
                                    : dm_flock_sim_run(sim);
        dm_timer_stop("flock.run");
    }
    if (rc == DM_OK) rc = dm_flock_sim_cluster(sim, co, &res->clusters);
    if (rc == DM_OK) res->centroid_skipped = dm_flock_sim_centroid_skipped(sim);
    if (rc == DM_OK) res->refine_steps = dm_flock_sim_refined(sim, &res->refine_moved);
    dm_flock_rows fr;
    memset(&fr, 0, sizeof fr);
    dm_timer_start("flock.rows");
    if (rc == DM_OK) rc = dm_flock_rows_fetch(&fr, sim, v, 1);
    dm_timer_stop("flock.rows");
    uint32_t *terms = NULL;
    double *tw = NULL;
    dm_timer_start("flock.top_terms");
    if (rc == DM_OK) rc = dm_flock_top_terms_rows(&terms, &tw, fr.cluster, fr.n_clusters, v, jo->top_k, ctx);
    dm_timer_stop("flock.top_terms");
    double W = 0, H = 0;
    if (rc == DM_OK) dm_flock_sim_plane(sim, &W, &H);
    if (rc == DM_OK) {
        dm_timer_start("flock.output");
        rc = write_outputs(res, &fr, v, truth, res->have_labels, terms, tw, W, H, jo, ctx);
        dm_timer_stop("flock.output");
    }
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) {
        dm_flock_stats_publish(sim);
        if (results) fill_results(results, res, &fo, co, weights, W, H, ctx);
    }
    res->seconds = dm_wtime() - t_start;
    dm_flock_sim_free(sim);
    dm_flock_rows_free(&fr);
    dm_free(terms);
    dm_free(tw);
    dm_free(truth);
    dm_free(sw);
    return rc;
}
