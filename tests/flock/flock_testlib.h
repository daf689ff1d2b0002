/* Helpers of the flock tests: run contexts over sub-communicators (to compare 1, 2, 3, 4 ranks
 * inside one MPI job), synthetic shares, a simulation run gathered by document index, and a
 * checkpoint writer that places boids by hand (the documented checkpoint format). */
#ifndef DM_FLOCK_TESTLIB_H
#define DM_FLOCK_TESTLIB_H

#include <stddef.h>
#include <stdint.h>

#include "common/context.h"
#include "flock/flock.h"
#include "flock/flock_synth.h"

/* A context over comm (rank and size from it; the rest copied from base). */
void ft_ctx_sub(dm_ctx *out, const dm_ctx *base, MPI_Comm comm);

/* This rank's share of n synthetic documents. */
int ft_synth_share(dm_vectors *v, const dm_flock_synth_options *so, uint64_t n, int rank, int size);

/* Final state gathered on rank 0 of ctx by document index (NULL arrays elsewhere). */
typedef struct ft_state {
    uint64_t n;
    int iteration;
    double *x, *y, *vx, *vy;
    int32_t *cluster;
    int32_t *owner;       /* rank that owned the document at the end */
    dm_flock_stats stats; /* summed over ranks (migrations: the exchanges of one rank) */
    int migrate_every;    /* the simulation's migration interval */
    int refine_steps;     /* ft_run: the clusters' refinement steps, and the moves over them */
    uint64_t refine_moved;
} ft_state;
int ft_gather(ft_state *st, dm_flock_sim *s, const dm_ctx *ctx);
void ft_state_free(ft_state *st);

/* Creates, runs and gathers a simulation of n synthetic docs on ctx (cluster when copt != NULL). */
int ft_run(ft_state *st, const dm_ctx *ctx, const dm_flock_synth_options *so, uint64_t n,
           const dm_flock_options *fo, const dm_flock_cluster_options *copt);

/* CUnit checks: a step fails on one rank (fail_at, injected before the step's exchanges, which it
 * still enters as after a failed device call, or after them) at the first, a middle and the last
 * of `iterations`,
 * on the first and on the last rank: dm_flock_sim_run, whose steps agree on their status one
 * step late, returns an error on every rank, stops within a step of the failure and never hangs. */
void ft_check_error_during_run(const dm_ctx *ctx, const dm_flock_synth_options *so, uint64_t n, int iterations);

/* Writes a checkpoint for opt and the documents v (all of them: row_base 0) at iteration
 * `iteration` with the given state. */
int ft_write_checkpoint(const char *path, const dm_flock_options *opt, const dm_vectors *v, int iteration,
                        const double *x, const double *y, const double *vx, const double *vy);

/* Builds vectors from explicit rows: row r has terms col[off[r]..off[r+1]) with weights val. */
int ft_vectors(dm_vectors *v, uint64_t n, const uint64_t *off, const uint32_t *col, const float *val,
               uint64_t row_base);

#endif
