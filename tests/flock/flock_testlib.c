/* Helpers of the flock tests (flock_testlib.h). */
#include "flock_testlib.h"

#include <CUnit/CUnit.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/status.h"
#include "flock/flock_impl.h"

void ft_ctx_sub(dm_ctx *out, const dm_ctx *base, MPI_Comm comm)
{
    *out = *base;
    out->world = comm;
    MPI_Comm_rank(comm, &out->rank);
    MPI_Comm_size(comm, &out->size);
}

int ft_synth_share(dm_vectors *v, const dm_flock_synth_options *so, uint64_t n, int rank, int size)
{
    uint64_t first, count;
    dm_flock_share(n, rank, size, &first, &count);
    return dm_flock_synth_vectors(v, so, first, count);
}

int ft_gather(ft_state *st, dm_flock_sim *s, const dm_ctx *ctx)
{
    memset(st, 0, sizeof *st);
    dm_flock_view v;
    DM_TRY(dm_flock_sim_view(s, &v));
    st->n = dm_flock_sim_docs(s);
    st->iteration = dm_flock_sim_iteration(s);
    const int32_t *lab = dm_flock_sim_labels(s);
    int cnt = (int)(7 * v.n);
    double *rec = malloc(sizeof *rec * (v.n ? 7 * v.n : 1));
    for (size_t i = 0; i < v.n; i++) {
        rec[7 * i] = (double)v.id[i];
        rec[7 * i + 1] = v.x[i];
        rec[7 * i + 2] = v.y[i];
        rec[7 * i + 3] = v.vx[i];
        rec[7 * i + 4] = v.vy[i];
        rec[7 * i + 5] = lab ? lab[i] : -2;
        rec[7 * i + 6] = ctx->rank;
    }
    int *counts = malloc(sizeof *counts * (size_t)ctx->size), *displs = malloc(sizeof *displs * (size_t)ctx->size);
    MPI_Gather(&cnt, 1, MPI_INT, counts, 1, MPI_INT, 0, ctx->world);
    double *all = NULL;
    int tot = 0;
    if (ctx->rank == 0) {
        for (int k = 0; k < ctx->size; k++) {
            displs[k] = tot;
            tot += counts[k];
        }
        all = malloc(sizeof *all * (size_t)(tot ? tot : 1));
    }
    MPI_Gatherv(rec, cnt, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, ctx->world);
    const dm_flock_stats *ls = dm_flock_sim_stats(s);
    uint64_t a[10] = {ls->pairs,          ls->similar,      ls->halo_sent,        ls->migrated_out,
                      ls->migrated_in,    ls->seam_crossings, ls->sim_cache_hits, ls->halo_vectors,
                      ls->migrated_vectors, ls->halo_returned};
    uint64_t b[10];
    MPI_Allreduce(a, b, 10, MPI_UINT64_T, MPI_SUM, ctx->world);
    st->stats.pairs = b[0];
    st->stats.similar = b[1];
    st->stats.halo_sent = b[2];
    st->stats.migrated_out = b[3];
    st->stats.migrated_in = b[4];
    st->stats.seam_crossings = b[5];
    st->stats.sim_cache_hits = b[6];
    st->stats.halo_vectors = b[7];
    st->stats.migrated_vectors = b[8];
    st->stats.halo_returned = b[9];
    /* every rank takes part in every migration exchange: the count of one rank */
    MPI_Allreduce(&ls->migrations, &st->stats.migrations, 1, MPI_UINT64_T, MPI_MAX, ctx->world);
    st->migrate_every = dm_flock_sim_migrate_every(s);
    int rc = DM_OK;
    if (ctx->rank == 0) {
        if ((uint64_t)tot != 7 * st->n) rc = DM_ERR(DM_ERR_FORMAT, "gathered %d values for %llu docs", tot, (unsigned long long)st->n);
        st->x = calloc(st->n, sizeof(double));
        st->y = calloc(st->n, sizeof(double));
        st->vx = calloc(st->n, sizeof(double));
        st->vy = calloc(st->n, sizeof(double));
        st->cluster = calloc(st->n, sizeof(int32_t));
        st->owner = calloc(st->n, sizeof(int32_t));
        unsigned char *seen = calloc(st->n, 1);
        for (int k = 0; k < tot / 7 && rc == DM_OK; k++) {
            uint64_t id = (uint64_t)all[7 * k];
            if (id >= st->n || seen[id]) {
                rc = DM_ERR(DM_ERR_FORMAT, "document %llu owned twice or out of range", (unsigned long long)id);
                break;
            }
            seen[id] = 1;
            st->x[id] = all[7 * k + 1];
            st->y[id] = all[7 * k + 2];
            st->vx[id] = all[7 * k + 3];
            st->vy[id] = all[7 * k + 4];
            st->cluster[id] = (int32_t)all[7 * k + 5];
            st->owner[id] = (int32_t)all[7 * k + 6];
        }
        free(seen);
    }
    free(rec);
    free(counts);
    free(displs);
    free(all);
    MPI_Bcast(&rc, 1, MPI_INT, 0, ctx->world);
    return rc;
}

void ft_state_free(ft_state *st)
{
    free(st->x);
    free(st->y);
    free(st->vx);
    free(st->vy);
    free(st->cluster);
    free(st->owner);
    memset(st, 0, sizeof *st);
}

int ft_run(ft_state *st, const dm_ctx *ctx, const dm_flock_synth_options *so, uint64_t n, const dm_flock_options *fo,
           const dm_flock_cluster_options *copt)
{
    memset(st, 0, sizeof *st);
    dm_vectors v;
    int rc = ft_synth_share(&v, so, n, ctx->rank, ctx->size);
    rc = dm_ctx_agree(ctx, rc);
    if (rc != DM_OK) return rc;
    dm_flock_sim *s = NULL;
    rc = dm_flock_sim_init(&s, ctx, &v, fo);
    if (rc == DM_OK) rc = dm_flock_sim_run(s);
    if (rc == DM_OK && copt) {
        int32_t k;
        rc = dm_flock_sim_cluster(s, copt, &k);
    }
    if (rc == DM_OK) rc = ft_gather(st, s, ctx);
    if (rc == DM_OK) st->refine_steps = dm_flock_sim_refined(s, &st->refine_moved);
    dm_flock_sim_free(s);
    dm_flock_vectors_release(&v);
    return rc;
}

void ft_check_error_during_run(const dm_ctx *ctx, const dm_flock_synth_options *so, uint64_t n, int iterations)
{
    dm_vectors v;
    CU_ASSERT_EQUAL_FATAL(ft_synth_share(&v, so, n, ctx->rank, ctx->size), DM_OK);
    const int at[3] = {1, iterations / 2, iterations};
    for (int k = 0; k < 6; k++)
        for (int bad = 0; bad < ctx->size; bad += ctx->size > 1 ? ctx->size - 1 : 1) {
            dm_flock_options o = DM_FLOCK_OPTIONS_INIT;
            o.iterations = iterations;
            dm_flock_sim *s = NULL;
            CU_ASSERT_EQUAL_FATAL(dm_flock_sim_init(&s, ctx, &v, &o), DM_OK);
            if (ctx->rank == bad) {
                s->fail_at = at[k % 3];
                s->fail_late = k >= 3;
            }
            int rc = dm_flock_sim_run(s);
            CU_ASSERT_NOT_EQUAL(rc, DM_OK);
            int it = dm_flock_sim_iteration(s);
            if (ctx->rank == bad) CU_ASSERT_EQUAL(it, at[k % 3] - 1);
            CU_ASSERT_TRUE(it >= at[k % 3] - 1 && it <= at[k % 3]); /* the others: at most one step on */
            int all = rc != DM_OK;
            MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_LAND, ctx->world);
            CU_ASSERT_TRUE(all);
            dm_flock_sim_free(s);
        }
    dm_flock_vectors_release(&v);
}

int ft_write_checkpoint(const char *path, const dm_flock_options *o, const dm_vectors *v, int iteration,
                        const double *x, const double *y, const double *vx, const double *vy)
{
    const uint64_t n = v->n_rows;
    const size_t H = 136;
    size_t size = H + 32 * n + 8;
    unsigned char *b = calloc(1, size);
    const char magic[8] = {'D', 'M', 'F', 'L', 'O', 'C', 'K', 1};
    memcpy(b, magic, 8);
    uint32_t ver[2] = {2, 0};
    memcpy(b + 8, ver, 8);
    uint64_t u[2] = {n, o->seed};
    memcpy(b + 16, u, 16);
    int64_t it[2] = {iteration, o->iterations};
    memcpy(b + 32, it, 16);
    double p[10] = {o->radius, o->neighbours, o->threshold, o->w_separation, o->w_dissimilar,
                    o->w_alignment, o->w_cohesion, o->v_max, o->shrink, o->min_dist};
    memcpy(b + 48, p, 80);
    uint64_t input = dm_flock_rows_fingerprint(v); /* all the documents: the sum over every rank's */
    memcpy(b + 128, &input, 8);
    for (uint64_t i = 0; i < n; i++) {
        double r[4] = {x[i], y[i], vx[i], vy[i]};
        memcpy(b + H + 32 * i, r, 32);
    }
    uint32_t crc[2] = {(uint32_t)crc32(crc32(0L, Z_NULL, 0), b, (uInt)(H + 32 * n)), 0};
    memcpy(b + H + 32 * n, crc, 8);
    FILE *f = fopen(path, "wb");
    int rc = f && fwrite(b, 1, size, f) == size ? DM_OK : DM_ERR(DM_ERR_IO, "cannot write %s", path);
    if (f) fclose(f);
    free(b);
    return rc;
}

int ft_vectors(dm_vectors *v, uint64_t n, const uint64_t *off, const uint32_t *col, const float *val, uint64_t row_base)
{
    memset(v, 0, sizeof *v);
    v->n_rows = n;
    v->row_base = row_base;
    uint64_t nnz = off[n];
    v->row_off = dm_malloc(sizeof *v->row_off * (n + 1));
    v->col = dm_malloc(sizeof *v->col * (nnz ? nnz : 1));
    v->val = dm_malloc(sizeof *v->val * (nnz ? nnz : 1));
    v->id_off = dm_malloc(sizeof *v->id_off * (n + 1));
    v->ids = dm_malloc(24 * (n ? n : 1));
    v->label_off = dm_malloc(sizeof *v->label_off * (n + 1));
    v->labels = dm_malloc(n ? n : 1);
    if (!v->row_off || !v->col || !v->val || !v->id_off || !v->ids || !v->label_off || !v->labels)
        return DM_ERR(DM_ERR_NOMEM, "test vectors");
    memcpy(v->row_off, off, sizeof *off * (n + 1));
    if (nnz) {
        memcpy(v->col, col, sizeof *col * nnz);
        memcpy(v->val, val, sizeof *val * nnz);
    }
    uint32_t maxc = 0;
    for (uint64_t k = 0; k < nnz; k++)
        if (col[k] + 1 > maxc) maxc = col[k] + 1;
    v->n_cols = maxc;
    uint64_t at = 0;
    for (uint64_t r = 0; r < n; r++) {
        v->id_off[r] = at;
        at += (uint64_t)snprintf(v->ids + at, 24, "d%llu", (unsigned long long)(row_base + r)) + 1;
        v->label_off[r] = r;
        v->labels[r] = '\0';
    }
    v->id_off[n] = at;
    v->label_off[n] = n;
    return DM_OK;
}
