/* The run context: communicators, node-local rank, GPU binding and backend (common/context.h).
 * Reference: none. */
#include "common/context.h"

#include <omp.h>
#include <string.h>

#include "common/log.h"
#include "common/status.h"

const char *dm_backend_name(int backend)
{
    switch (backend) {
    case DM_BACKEND_CPU: return "cpu";
    case DM_BACKEND_CUDA: return "cuda";
    default: return "auto";
    }
}

int dm_backend_parse(const char *s, int *backend)
{
    if (strcmp(s, "cpu") == 0) *backend = DM_BACKEND_CPU;
    else if (strcmp(s, "cuda") == 0) *backend = DM_BACKEND_CUDA;
    else if (strcmp(s, "auto") == 0) *backend = DM_BACKEND_AUTO;
    else return DM_ERR(DM_ERR_INVALID_ARG, "unknown backend '%s' (expected cpu, cuda or auto)", s);
    return DM_OK;
}

int dm_ctx_agree(const dm_ctx *ctx, int status)
{
    int worst = status;
    if (MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MIN, ctx->world) != MPI_SUCCESS)
        return DM_ERR(DM_ERR_MPI, "MPI_Allreduce of a status failed");
    if (worst < 0 && status == DM_OK) {
        DM_ERR(worst, "another rank failed (%s)", dm_status_name(worst));
        dm_error_mark_remote();
    }
    return worst;
}

int dm_ctx_init(dm_ctx *ctx, const dm_ctx_options *opt)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->world = ctx->node = MPI_COMM_NULL;
    ctx->device = -1;
    ctx->opt = *opt;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &ctx->world) != MPI_SUCCESS)
        return DM_ERR(DM_ERR_MPI, "MPI_Comm_dup failed");
    MPI_Comm_rank(ctx->world, &ctx->rank);
    MPI_Comm_size(ctx->world, &ctx->size);
    dm_status_set_rank(ctx->size > 1 ? ctx->rank : -1);
    dm_log_set_rank(ctx->rank, ctx->size);
    dm_log_set_level(opt->quiet ? DM_LOG_ERROR : opt->verbose ? DM_LOG_DEBUG : DM_LOG_INFO);
    dm_progress_force(opt->progress);
    if (MPI_Comm_split_type(ctx->world, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL, &ctx->node) !=
        MPI_SUCCESS)
        return DM_ERR(DM_ERR_MPI, "MPI_Comm_split_type(SHARED) failed");
    MPI_Comm_rank(ctx->node, &ctx->local_rank);
    MPI_Comm_size(ctx->node, &ctx->local_size);
    if (opt->threads > 0) omp_set_num_threads(opt->threads);

    ctx->device_count = dm_device_count();
    int rc = DM_OK;
    if (opt->backend == DM_BACKEND_CUDA && !DM_HAVE_CUDA) {
        rc = DM_ERR(DM_ERR_UNSUPPORTED, "--backend cuda: this docmine was built without CUDA "
                                        "(configure with -DDOCMINE_CUDA=ON)");
    } else if (opt->backend == DM_BACKEND_CUDA && ctx->device_count == 0) {
        rc = DM_ERR(DM_ERR_NO_DEVICE, "--backend cuda: no CUDA GPU is visible on this node");
    } else {
        ctx->backend = (opt->backend == DM_BACKEND_AUTO)
                           ? (ctx->device_count > 0 ? DM_BACKEND_CUDA : DM_BACKEND_CPU)
                           : opt->backend;
        if (ctx->backend == DM_BACKEND_CUDA) {
            ctx->device = ctx->local_rank % ctx->device_count;
            rc = dm_device_bind(ctx->device, &ctx->dev);
        }
    }
    return dm_ctx_agree(ctx, rc);
}

void dm_ctx_free(dm_ctx *ctx)
{
    if (ctx->node != MPI_COMM_NULL) MPI_Comm_free(&ctx->node);
    if (ctx->world != MPI_COMM_NULL) MPI_Comm_free(&ctx->world);
}
