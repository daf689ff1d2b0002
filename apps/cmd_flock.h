/* Options shared by `docmine flock` and `docmine pipeline --method flock`: the model, the
 * clusters, checkpoints and the outputs of a flock run (flock/flock.h dm_flock_job_run).
 * Reference: apps/cmd_flock.c. */
#ifndef DM_CMD_FLOCK_H
#define DM_CMD_FLOCK_H

#include <getopt.h>

#include "apps/app.h"
#include "flock/flock.h"

/* getopt_long values of the shared options (above the preprocess options of cmd_vectorize.h). */
enum {
    DM_FO_TOP = 1100, DM_FO_PNG, DM_FO_SNAP, DM_FO_ITER, DM_FO_RADIUS, DM_FO_NB, DM_FO_THRESH, DM_FO_WEIGHTS,
    DM_FO_VMAX, DM_FO_SHRINK, DM_FO_MINC, DM_FO_SMALL, DM_FO_CKE, DM_FO_CK, DM_FO_RESUME, DM_FO_SLICES,
    DM_FO_CTHR, DM_FO_MERGE, DM_FO_MIGRATE, DM_FO_REFINE, DM_FO_SHARED_END
};
#define DM_FLOCK_LONGOPTS                                                                          \
    {"top-terms", required_argument, 0, DM_FO_TOP}, {"png-size", required_argument, 0, DM_FO_PNG},       \
    {"snapshot-every", required_argument, 0, DM_FO_SNAP}, {"iterations", required_argument, 0, DM_FO_ITER}, \
    {"radius", required_argument, 0, DM_FO_RADIUS}, {"neighbours", required_argument, 0, DM_FO_NB},      \
    {"neighbors", required_argument, 0, DM_FO_NB}, {"threshold", required_argument, 0, DM_FO_THRESH},    \
    {"weights", required_argument, 0, DM_FO_WEIGHTS}, {"vmax", required_argument, 0, DM_FO_VMAX},        \
    {"shrink", required_argument, 0, DM_FO_SHRINK}, {"min-cluster", required_argument, 0, DM_FO_MINC},   \
    {"small", required_argument, 0, DM_FO_SMALL}, {"checkpoint-every", required_argument, 0, DM_FO_CKE}, \
    {"checkpoint", required_argument, 0, DM_FO_CK}, {"resume", no_argument, 0, DM_FO_RESUME},            \
    {"slice-weights", required_argument, 0, DM_FO_SLICES},                                              \
    {"cluster-threshold", required_argument, 0, DM_FO_CTHR}, {"merge", required_argument, 0, DM_FO_MERGE}, \
    {"migrate-every", required_argument, 0, DM_FO_MIGRATE}, {"refine", required_argument, 0, DM_FO_REFINE}

/* The help lines of the shared options. */
extern const char dm_flock_cli_help[];

typedef struct dm_flock_cli {
    dm_flock_options fo;
    dm_flock_cluster_options co;
    dm_flock_job_options jo;
    const char *slices;      /* --slice-weights as given */
    double *slice_weights;   /* parsed by dm_flock_cli_finish (owned) */
    char checkpoint[4096];   /* default OUTDIR/flock.ckpt */
} dm_flock_cli;

/* Defaults (seed from the global --seed). */
void dm_flock_cli_init(dm_flock_cli *f, const dm_ctx *ctx);
/* Applies one shared option c with its argument; name is the option as written (for messages).
 * Returns 0, or the usage exit code after printing. */
int dm_flock_cli_option(dm_app *app, const char *cmd, int c, const char *arg, const char *name, dm_flock_cli *f);
/* After parsing: checks the options against each other, parses --slice-weights for the ranks,
 * sets the checkpoint path (default out/flock.ckpt) and the output directory. Returns 0, or the
 * usage exit code after printing. */
int dm_flock_cli_finish(dm_app *app, const char *cmd, dm_flock_cli *f, const char *out);
void dm_flock_cli_free(dm_flock_cli *f);
/* Collective: creates the output folder (and DIR/snapshots for a PNG series) on rank 0. */
int dm_flock_cli_mkdirs(const dm_ctx *ctx, const dm_flock_cli *f);

#endif
