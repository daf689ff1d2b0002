/* The run context: communicators, node-local rank, GPU binding and backend (common/context.h).
 * Reference: none. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "common/context.h"

#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/fileio.h"
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

void dm_agree_pack(int status, int pair[2])
{
    /* a status is the rank's own unless it is one learnt from another rank (dm_error_learnt; a
     * status from another thread is taken as own: the marks are thread-local) */
    int learnt = dm_error_learnt(status);
    pair[0] = learnt ? DM_OK : status;
    pair[1] = status;
}

int dm_agree_unpack(const int pair[2]) { return pair[0] < 0 ? pair[0] : pair[1]; }

int dm_ctx_agree(const dm_ctx *ctx, int status) { return dm_comm_agree(ctx->world, status); }

int dm_comm_rank0(MPI_Comm comm, const uint64_t *mine, uint64_t *r0, int n)
{
    memcpy(r0, mine, sizeof(*r0) * (size_t)n);
    if (MPI_Bcast(r0, n, MPI_UINT64_T, 0, comm) != MPI_SUCCESS)
        return DM_ERR(DM_ERR_MPI, "MPI_Bcast of rank 0's values failed");
    return DM_OK;
}

int dm_comm_agree(MPI_Comm comm, int status)
{
    int mine[2], all[2];
    dm_agree_pack(status, mine);
    if (MPI_Allreduce(mine, all, 2, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
        return DM_ERR(DM_ERR_MPI, "MPI_Allreduce of a status failed");
    int worst = dm_agree_unpack(all);
    if (worst < 0 && status == DM_OK) {
        DM_ERR(worst, "another rank failed (%s)", dm_status_name(worst));
        dm_error_mark_remote();
    }
    return worst;
}

int dm_mpi_io_error(int code, const char *what, const char *name)
{
    char msg[MPI_MAX_ERROR_STRING];
    int n = 0;
    msg[0] = '\0';
    MPI_Error_string(code, msg, &n);
    msg[n >= 0 && n < MPI_MAX_ERROR_STRING ? n : MPI_MAX_ERROR_STRING - 1] = '\0';
    for (char *c = msg; *c; c++) /* MPICH's strings carry an error stack after a newline */
        if (*c == '\n' || *c == '\r') *c = ' ';
    return DM_ERR(DM_ERR_IO, "%s: %s failed: %s", name, what, msg);
}

int dm_mpi_file_commit(MPI_File *fh, const char *tmp, const char *path, int rc, const dm_ctx *ctx)
{
    int e = MPI_File_sync(*fh);
    if (rc == DM_OK && e != MPI_SUCCESS) rc = dm_mpi_io_error(e, "MPI_File_sync", path);
    e = MPI_File_close(fh);
    if (rc == DM_OK && e != MPI_SUCCESS) rc = dm_mpi_io_error(e, "MPI_File_close", path);
    rc = dm_ctx_agree(ctx, rc);
    if (ctx->rank == 0) {
        if (rc == DM_OK) rc = dm_rename_output(tmp, path);
        if (rc != DM_OK) unlink(tmp);
    }
    return dm_ctx_agree(ctx, rc);
}

int dm_threads_for_masks(const unsigned char *masks, size_t mask_bytes, int n, int me)
{
    const unsigned char *mine = masks + (size_t)me * mask_bytes;
    int cpus = 0, sharing = 0;
    for (size_t b = 0; b < mask_bytes; b++) cpus += __builtin_popcount(mine[b]);
    for (int r = 0; r < n; r++) {
        const unsigned char *other = masks + (size_t)r * mask_bytes;
        size_t b = 0;
        while (b < mask_bytes && (other[b] & mine[b]) == 0) b++;
        sharing += b < mask_bytes;
    }
    int t = sharing > 0 ? cpus / sharing : cpus;
    return t > 0 ? t : 1;
}

int dm_threads_default(MPI_Comm node)
{
    int n = 1, me = 0;
    MPI_Comm_size(node, &n);
    MPI_Comm_rank(node, &me);
    cpu_set_t mine;
    CPU_ZERO(&mine);
    unsigned char *masks = dm_malloc(sizeof mine * (size_t)n);
    int ok = masks && sched_getaffinity(0, sizeof mine, &mine) == 0 && CPU_COUNT(&mine) > 0, all_ok = 0;
    /* every rank takes part in the gather, or none */
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, node);
    int t;
    if (all_ok && MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, masks, (int)sizeof mine, MPI_BYTE, node) == MPI_SUCCESS)
        t = dm_threads_for_masks(masks, sizeof mine, n, me);
    else /* no masks (more CPUs than a cpu_set_t holds): the node's processors over its ranks */
        t = omp_get_num_procs() / n > 0 ? omp_get_num_procs() / n : 1;
    dm_free(masks);
    return t;
}

int dm_threads_set_default(MPI_Comm node)
{
    const char *env = getenv("OMP_NUM_THREADS");
    int t = dm_threads_default(node); /* collective: every rank calls it */
    if ((!env || !*env) && t < omp_get_max_threads()) omp_set_num_threads(t);
    return omp_get_max_threads();
}

int dm_threads_cap(int threads, int rank)
{
    int cpus = omp_get_num_procs(); /* the CPUs of this process's affinity mask */
    if (cpus < 1) cpus = 1;
    if (threads <= cpus) return threads;
    if (rank == 0)
        dm_log_warn("--threads %d: rank 0 may run on %d CPU%s, so it uses %d threads (OpenMP threads beyond the "
                    "CPUs only wait for each other)", threads, cpus, cpus == 1 ? "" : "s", cpus);
    return cpus;
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
    /* dm_threads_default is collective over the node: every rank takes part, a rank given
     * --threads too (it skipped it, and a run whose ranks were given --threads or not waited
     * forever: --threads may differ between ranks) */
    if (opt->threads > 0) {
        (void)dm_threads_default(ctx->node);
        omp_set_num_threads(dm_threads_cap(opt->threads, ctx->rank));
    } else {
        dm_threads_set_default(ctx->node);
    }
    ctx->threads = omp_get_max_threads();

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
