/* The run context: MPI world and node-local communicators, rank -> GPU binding, backend choice and
 * the global options every command accepts. Reference: none (infrastructure).
 * One context per process; created by the `docmine` main (or a test) after MPI_Init. */
#ifndef DM_CONTEXT_H
#define DM_CONTEXT_H

#include <mpi.h>
#include <stdint.h>

#include "common/device.h"

#ifdef __cplusplus
extern "C" {
#endif

enum dm_backend { DM_BACKEND_AUTO = 0, DM_BACKEND_CPU = 1, DM_BACKEND_CUDA = 2 };

typedef struct dm_ctx_options {
    int backend;        /* enum dm_backend; AUTO = CUDA when a GPU is present */
    int threads;        /* OpenMP threads per rank, at most the CPUs it may run on (dm_threads_cap);
                           0 = OMP_NUM_THREADS, else dm_threads_default */
    uint64_t seed;      /* global seed of all counter-based random streams */
    int quiet;          /* only errors */
    int progress;       /* 1: force the progress line even when stderr is not a terminal */
    int verbose;        /* debug logging */
} dm_ctx_options;
#define DM_CTX_OPTIONS_INIT {DM_BACKEND_AUTO, 0, 42, 0, 0, 0}

typedef struct dm_ctx {
    MPI_Comm world;     /* duplicate of MPI_COMM_WORLD owned by the context */
    MPI_Comm node;      /* ranks sharing this node (MPI_Comm_split_type SHARED) */
    int rank, size;
    int local_rank, local_size;
    int backend;        /* resolved: DM_BACKEND_CPU or DM_BACKEND_CUDA */
    int device;         /* bound GPU (local_rank % device_count), -1 on the CPU backend */
    int device_count;   /* GPUs visible to this rank */
    dm_device_info dev; /* info of the bound GPU (valid when device >= 0) */
    int threads;        /* OpenMP threads of this rank after init (omp_get_max_threads) */
    dm_ctx_options opt;
} dm_ctx;

/* Creates the context over MPI_COMM_WORLD (MPI must be initialised). Resolves the backend:
 * CUDA requested but no GPU (or a CPU-only build) -> DM_ERR_NO_DEVICE / DM_ERR_UNSUPPORTED with a
 * message. Binds the GPU. Sets the OpenMP threads: opt->threads when > 0 (at most the CPUs:
 * dm_threads_cap), else OMP_NUM_THREADS when set, else dm_threads_default. Collective over
 * MPI_COMM_WORLD. */
int dm_ctx_init(dm_ctx *ctx, const dm_ctx_options *opt);
void dm_ctx_free(dm_ctx *ctx);
const char *dm_backend_name(int backend);
int dm_backend_parse(const char *s, int *backend);

/* The OpenMP threads of --threads N: N, or the CPUs of this process's affinity mask
 * (omp_get_num_procs) when N is more, with a warning on rank 0: threads beyond the CPUs do not run
 * at once, and at every OpenMP barrier they wait for each other in turn (--threads 4096 on 2 cores
 * made a 0.4 s pipeline take 63 s). OMP_NUM_THREADS is not capped: it is the OpenMP runtime's own
 * setting, and the tests oversubscribe with it on purpose (results must not depend on threads). */
int dm_threads_cap(int threads, int rank);
/* The OpenMP threads a rank uses when neither --threads nor OMP_NUM_THREADS says: the CPUs of its
 * affinity mask divided by the number of ranks of its node whose masks share a CPU with it (itself
 * included), at least 1. Ranks bound to their own cores (SLURM --cpus-per-task, taskset) keep
 * them; unbound ranks (plain mpiexec) split the node's cores instead of each starting a thread per
 * core, which oversubscribes the node (OpenMP threads spinning at barriers on shared cores: a
 * 4-rank test on 2 cores took 100 s instead of 1 s). Collective over node. */
int dm_threads_default(MPI_Comm node);
/* Applies it unless OMP_NUM_THREADS is set (it only lowers the count); returns the threads now in
 * effect. Collective over node: dm_ctx_init and the MPI test programs call it. */
int dm_threads_set_default(MPI_Comm node);
/* The rule of dm_threads_default for n masks of mask_bytes bytes each (bit c of byte c / 8: CPU
 * c), rank me's threads. */
int dm_threads_for_masks(const unsigned char *masks, size_t mask_bytes, int n, int me);

/* Collective: returns the first negative status of any rank (or DM_OK) on every rank, so that an
 * error on one rank does not leave the others waiting in a later collective. A rank's own errors
 * win over those it only learnt of (dm_error_learnt: an error marked remote with this code, e.g.
 * "neighbour rank N failed", even if an own error of another code came after it): every rank
 * returns the root cause's class (a failed allocation's DM_ERR_NOMEM,
 * not a neighbour's derived DM_ERR_MPI); the lowest of the own ones when several ranks failed. */
int dm_ctx_agree(const dm_ctx *ctx, int status);
/* The same over any communicator (dm_ctx_agree is this over ctx->world). */
int dm_comm_agree(MPI_Comm comm, int status);
/* Collective: r0[0 .. n) = rank 0's mine[0 .. n) on every rank (mine and r0 may not overlap), for
 * a rank to compare what it sees with what rank 0 sees (the same file, list, command line).
 * DM_OK, or DM_ERR_MPI when the broadcast fails. */
int dm_comm_rank0(MPI_Comm comm, const uint64_t *mine, uint64_t *r0, int n);
/* The same rule for agreements made elsewhere (non-blocking ones): what a rank contributes,
 * reduced with MPI_MIN over the two ints elementwise, and the agreed status from the reduced pair. */
void dm_agree_pack(int status, int pair[2]);
int dm_agree_unpack(const int pair[2]);

/* Records DM_ERR_IO "name: what failed: <MPI's error string on one line>" and returns it. */
int dm_mpi_io_error(int code, const char *what, const char *name);
/* Ends a collective MPI-IO write of the temporary file tmp, to become path: MPI_File_sync and
 * MPI_File_close of *fh (every rank, whatever rc), the status agreed over ctx's ranks, then rank 0
 * renames tmp onto path when every rank succeeded and removes tmp otherwise. Returns the agreed
 * status. Collective over ctx->world. */
int dm_mpi_file_commit(MPI_File *fh, const char *tmp, const char *path, int rc, const dm_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif
