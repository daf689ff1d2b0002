/* Messages between the ranks of one node through their GPUs (common/peerx.h): CUDA IPC mappings
 * of each rank's staging buffer, device-to-device copies, pinned multi-buffers for the host sides.
 * Reference: none. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cuda_check.h"
#include "common/dbuf.h"
#include "common/log.h"
#include "common/peerx.h"

/* the pinned pieces of the host sides: 4 x 32 MiB (as flock's first upload) */
#define PX_SLOTS 4
#define PX_SLOT_BYTES ((size_t)32 << 20)

struct dm_peerx {
    int P;
    MPI_Comm node;      /* the ranks of ctx->world on this node */
    char *local;        /* local[q]: world rank q shares this node (and is not this rank) */
    /* per world rank q, five arrays of P in one block (sbytes owns it): the message to q / from q,
     * where it lies in sdev / rdev, and where this rank's message lies in q's staging buffer */
    uint64_t *sbytes, *rbytes, *soff, *roff, *rsrc;
    void **peer;        /* q's staging buffer mapped here (NULL when nothing comes from q) */
    int *wr;            /* world rank of each node rank */
    cudaIpcMemHandle_t *hs; /* each node rank's staging handle */
    char *sdev, *rdev;  /* this rank's staging (read by the peers) and receive buffers */
    size_t sdev_bytes, rdev_bytes;
    cudaStream_t stream;
    dm_dbuf db;
};

static void px_free(dm_peerx *x)
{
    if (!x) return;
    for (int q = 0; x->peer && q < x->P; q++)
        if (x->peer[q]) cudaIpcCloseMemHandle(x->peer[q]);
    /* the peers' mappings of this rank's buffer are closed before it is freed */
    if (x->node != MPI_COMM_NULL) MPI_Barrier(x->node);
    if (x->sdev) dm_device_free(x->sdev);
    if (x->rdev) dm_device_free(x->rdev);
    if (x->stream) cudaStreamDestroy(x->stream);
    dm_dbuf_free(&x->db);
    if (x->node != MPI_COMM_NULL) MPI_Comm_free(&x->node);
    dm_free(x->local);
    dm_free(x->sbytes);
    dm_free(x->peer);
    dm_free(x->wr);
    dm_free(x->hs);
    dm_free(x);
}

/* This rank's side of opening: 1 when everything it needs worked (a reason in *why otherwise). */
static int px_setup(dm_peerx *x, int me, MPI_Comm world, const char **why)
{
    int P = x->P, nn = 0, nme = 0;
    MPI_Comm_size(x->node, &nn);
    MPI_Comm_rank(x->node, &nme);
    int *wr = x->wr, ok = 1;
    cudaIpcMemHandle_t *hs = x->hs;
    /* the collectives are called whatever happens on this rank */
    MPI_Allgather(&me, 1, MPI_INT, wr, 1, MPI_INT, x->node);
    for (int k = 0; k < nn; k++)
        if (k != nme) x->local[wr[k]] = 1;
    uint64_t s = 0, r = 0;
    for (int q = 0; q < P; q++) {
        x->soff[q] = s;
        x->roff[q] = r;
        if (!x->local[q]) continue;
        s += x->sbytes[q];
        r += x->rbytes[q];
    }
    MPI_Alltoall(x->soff, 1, MPI_UINT64_T, x->rsrc, 1, MPI_UINT64_T, world);
    /* at least 256 bytes each, so that every rank has a handle to share */
    x->sdev_bytes = s > 256 ? s : 256;
    x->rdev_bytes = r > 256 ? r : 256;
    cudaIpcMemHandle_t h;
    memset(&h, 0, sizeof h);
    if (ok && dm_device_alloc((void **)&x->sdev, x->sdev_bytes) != DM_OK) ok = 0, *why = "no device memory to stage";
    if (ok && dm_device_alloc((void **)&x->rdev, x->rdev_bytes) != DM_OK) ok = 0, *why = "no device memory to receive";
    if (ok && cudaIpcGetMemHandle(&h, x->sdev) != cudaSuccess) ok = 0, *why = "cudaIpcGetMemHandle failed";
    MPI_Allgather(&h, (int)sizeof h, MPI_BYTE, hs, (int)sizeof h, MPI_BYTE, x->node);
    for (int k = 0; ok && k < nn; k++) {
        int q = wr[k];
        if (k == nme || x->rbytes[q] == 0) continue;
        if (cudaIpcOpenMemHandle(&x->peer[q], hs[k], cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
            x->peer[q] = NULL;
            ok = 0;
            *why = "a peer's device memory cannot be mapped (cudaIpcOpenMemHandle)";
        }
    }
    if (ok && cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking) != cudaSuccess) ok = 0, *why = "no stream";
    if (ok && dm_dbuf_init(&x->db, PX_SLOTS, PX_SLOT_BYTES, 0) != DM_OK) ok = 0, *why = "no pinned buffers";
    (void)cudaGetLastError(); /* a failed mapping or allocation leaves nothing behind: MPI is used */
    return ok;
}

extern "C" int dm_peerx_open(dm_peerx **px, const dm_ctx *ctx, const uint64_t *send_bytes, const uint64_t *recv_bytes)
{
    *px = NULL;
    int want = ctx->backend == DM_BACKEND_CUDA && ctx->size > 1 && dm_peerx_asked();
    MPI_Allreduce(MPI_IN_PLACE, &want, 1, MPI_INT, MPI_MIN, ctx->world);
    if (!want) return DM_OK;
    MPI_Comm node = MPI_COMM_NULL;
    if (MPI_Comm_split_type(ctx->world, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        return dm_ctx_agree(ctx, DM_ERR(DM_ERR_MPI, "MPI_Comm_split_type failed"));
    int nn = 0;
    MPI_Comm_size(node, &nn);
    int shared = nn > 1;
    MPI_Allreduce(MPI_IN_PLACE, &shared, 1, MPI_INT, MPI_MAX, ctx->world);
    if (!shared) { /* one rank per node: nothing to gain */
        MPI_Comm_free(&node);
        return DM_OK;
    }
    const int P = ctx->size;
    dm_peerx *x = (dm_peerx *)dm_calloc(1, sizeof *x);
    int ok = x != NULL;
    if (x) {
        x->P = P;
        x->node = node;
        x->local = (char *)dm_calloc((size_t)P, 1);
        x->sbytes = (uint64_t *)dm_malloc(5 * sizeof(uint64_t) * (size_t)P);
        if (x->sbytes) {
            x->rbytes = x->sbytes + P;
            x->soff = x->rbytes + P;
            x->roff = x->soff + P;
            x->rsrc = x->roff + P;
        }
        x->peer = (void **)dm_calloc((size_t)P, sizeof(void *));
        x->wr = (int *)dm_malloc(sizeof(int) * (size_t)nn);
        x->hs = (cudaIpcMemHandle_t *)dm_malloc(sizeof(cudaIpcMemHandle_t) * (size_t)nn);
        ok = x->local && x->sbytes && x->peer && x->wr && x->hs;
    }
    int rc = dm_ctx_agree(ctx, ok ? DM_OK : DM_ERR(DM_ERR_NOMEM, "out of memory"));
    if (rc != DM_OK) {
        if (x) {
            px_free(x); /* its barrier on node */
        } else {
            MPI_Barrier(node);
            MPI_Comm_free(&node);
        }
        return rc;
    }
    for (int q = 0; q < P; q++) {
        x->sbytes[q] = q == ctx->rank ? 0 : send_bytes[q];
        x->rbytes[q] = q == ctx->rank ? 0 : recv_bytes[q];
    }
    const char *why = "";
    ok = px_setup(x, ctx->rank, ctx->world, &why);
    int all = ok;
    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, ctx->world);
    if (!all) {
        if (ctx->rank == 0 || !ok) dm_log_debug("exchange through the GPUs not used%s%s", ok ? "" : ": ", why);
        px_free(x);
        return DM_OK;
    }
    *px = x;
    return DM_OK;
}

extern "C" int dm_peerx_local(const dm_peerx *px, int q) { return px && q >= 0 && q < px->P && px->local[q]; }

extern "C" int dm_peerx_put(dm_peerx *px, int q, size_t off, const void *src, size_t n)
{
    if (!dm_peerx_local(px, q) || off > px->sbytes[q] || n > px->sbytes[q] - off)
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_peerx_put: bytes %zu..%zu outside the message to rank %d", off, off + n, q);
    return n ? dm_dbuf_upload(&px->db, px->sdev + px->soff[q] + off, src, n) : DM_OK;
}

extern "C" int dm_peerx_exchange(dm_peerx *px)
{
    int rc = dm_dbuf_drain(&px->db); /* this rank's staging is complete */
    MPI_Barrier(px->node);            /* and every peer's */
    for (int q = 0; q < px->P && rc == DM_OK; q++) {
        if (!px->local[q] || px->rbytes[q] == 0) continue;
        cudaError_t e = cudaMemcpyAsync(px->rdev + px->roff[q], (const char *)px->peer[q] + px->rsrc[q], px->rbytes[q],
                                        cudaMemcpyDeviceToDevice, px->stream);
        if (e != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "peer copy from rank %d: %s", q, cudaGetErrorString(e));
    }
    /* also after a failed copy: the ones queued before it read the peers' buffers, which the
     * peers free once dm_peerx_close has passed its barrier (and this rank unmaps them there) */
    cudaError_t se = cudaStreamSynchronize(px->stream);
    if (rc == DM_OK && se != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "peer copies: %s", cudaGetErrorString(se));
    return rc;
}

extern "C" int dm_peerx_get(dm_peerx *px, int q, size_t off, void *dst, size_t n)
{
    if (!dm_peerx_local(px, q) || off > px->rbytes[q] || n > px->rbytes[q] - off)
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_peerx_get: bytes %zu..%zu outside the message from rank %d", off, off + n, q);
    return n ? dm_dbuf_download(&px->db, dst, px->rdev + px->roff[q] + off, n) : DM_OK;
}

extern "C" void dm_peerx_close(dm_peerx *px) { px_free(px); }
