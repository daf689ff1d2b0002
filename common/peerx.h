/* Point-to-point messages between the ranks of one node through their GPUs: every rank stages what
 * it sends to its node's other ranks in one device buffer, the receivers map that buffer (CUDA IPC)
 * and copy their messages out of it over NVLink (or PCIe), then download them to host memory.
 * GPU to GPU is about 390 GB/s on the 4-H200 hosts, but the host sides (staging and unstaging
 * through pinned pieces) and opening the mappings bound it: for flock's distribution it beat MPI
 * with 2 ranks on a host (-25%) and lost with 4 (bench/RESULTS.md, session 17), so it is opt-in.
 * Ranks on other nodes keep using MPI.
 *
 * Usage (every call collective over the communicator given to dm_peerx_open, except put/get):
 *   dm_peerx_open(&px, ctx, send_bytes, recv_bytes);  // px NULL: not available, use MPI
 *   for q with dm_peerx_local(px, q): dm_peerx_put(px, q, off, src, n) ...   // stage
 *   dm_peerx_exchange(px);                                                  // copy over
 *   for q with dm_peerx_local(px, q): dm_peerx_get(px, q, off, dst, n) ...   // unstage
 *   dm_peerx_close(px);
 * A message's bytes are addressed by offset, so the sender may stage it in pieces and the receiver
 * may download it in other pieces.
 * Reference: none (MPI point-to-point is the portable path). CUDA backend only: in a CPU-only build
 * and on the CPU backend dm_peerx_open returns DM_OK with *px NULL. It is used only with
 * DOCMINE_GPU_EXCHANGE=1 (the MPI path otherwise). */
#ifndef DM_PEERX_H
#define DM_PEERX_H

#include <stddef.h>
#include <stdint.h>

#include "common/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dm_peerx dm_peerx;

/* Collective over ctx->world. send_bytes[q] / recv_bytes[q]: the message this rank sends to /
 * receives from world rank q (q = this rank ignored). *px is NULL (and DM_OK returned) when the
 * exchange is not available on every rank: the CPU backend, no two ranks on one node, the GPUs of
 * a node not mappable from each other's processes (for example one GPU visible per process), too
 * little device memory, or DOCMINE_GPU_EXCHANGE not 1; the caller then sends everything through MPI.
 * Errors are agreed over the ranks. */
int dm_peerx_open(dm_peerx **px, const dm_ctx *ctx, const uint64_t *send_bytes, const uint64_t *recv_bytes);
/* 1 when DOCMINE_GPU_EXCHANGE=1 asks for the exchange (whether or not it is available). */
int dm_peerx_asked(void);
/* 1 when the messages between this rank and world rank q go through px (q shares this node and
 * q != this rank), 0 otherwise (and for px NULL). */
int dm_peerx_local(const dm_peerx *px, int q);
/* Stages n bytes of the message to q at offset off from pageable host memory (src may be reused
 * at once). */
int dm_peerx_put(dm_peerx *px, int q, size_t off, const void *src, size_t n);
/* Collective: waits until every rank of the node has staged its messages, then copies this rank's
 * messages from the other ranks' buffers. */
int dm_peerx_exchange(dm_peerx *px);
/* Downloads n bytes of the message from q at offset off to pageable host memory. */
int dm_peerx_get(dm_peerx *px, int q, size_t off, void *dst, size_t n);
/* Collective: releases the mappings and buffers (after every rank has copied its messages). */
void dm_peerx_close(dm_peerx *px);

#ifdef __cplusplus
}
#endif
#endif
