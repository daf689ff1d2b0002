/* Reads of another rank's memory on the same node (Linux cross-memory attach, process_vm_readv):
 * a receiver copies a message straight out of the sender's buffer, in pieces, with as many threads
 * as it likes. MPI's intra-node path copies a message in the progress calls of one thread (3-5 GB/s
 * per rank on the 4-H200 hosts); 16 threads reading the same all-to-all went at 18-21 GB/s per
 * rank there (bench/common/intranode_probe; bench/RESULTS.md, session 24). flock's initial distribution uses it for the ranks of
 * a node; MPI stays the path between nodes and wherever this is not available.
 *
 * Usage (open and close are collective over ctx->world; local and read are not):
 *   dm_cma_open(&cm, ctx);             // cm NULL: not available on every rank, use MPI
 *   ... the sender tells the receiver where its message is (an address, through MPI) and that it
 *       is complete (the MPI message carrying the address says so) ...
 *   if (dm_cma_local(cm, q)) dm_cma_read(cm, q, dst, address, bytes);   // any thread
 *   (or the other way: dm_cma_writev puts this rank's bytes into a peer's memory, at addresses
 *    the peer sent, before the barrier that tells the peer they are there)
 *   ... the sender keeps the buffer until the receivers are done (a barrier, or dm_cma_close) ...
 *   dm_cma_close(cm);                  // a barrier: every peer's reads are done
 * Opening lets any process of the user read this one's memory (Yama's PR_SET_PTRACER, where Yama
 * restricts ptrace to descendants) until dm_cma_close puts the default back.
 * Reference: none (MPI point-to-point is the portable path). DOCMINE_CMA=0 turns it off. */
#ifndef DM_CMA_H
#define DM_CMA_H

#include <stddef.h>
#include <stdint.h>

#include "common/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dm_cma dm_cma;

/* Collective over ctx->world. *cm is NULL (and DM_OK returned) when the reads are not available
 * on every rank: DOCMINE_CMA=0, a system without process_vm_readv, no two ranks on one node, or a
 * test read between two ranks of a node failing or reading the wrong process (ptrace not allowed,
 * separate PID namespaces). Allocation errors are agreed over the ranks. */
int dm_cma_open(dm_cma **cm, const dm_ctx *ctx);
/* 1 when world rank q shares this node, q != this rank and cm is open; 0 otherwise (cm NULL). */
int dm_cma_local(const dm_cma *cm, int q);
/* Copies n bytes at address src in world rank q's memory to dst. Thread-safe. DM_ERR_IO naming
 * the rank, the address and the system's reason when the read fails or comes back short. */
int dm_cma_read(const dm_cma *cm, int q, void *dst, uint64_t src, size_t n);
/* Writes count ranges of this process (src[i], len[i] bytes; empty ones allowed) to addresses
 * dst[i] of world rank q's memory, in as few system calls as Linux allows. Thread-safe; errors as
 * dm_cma_read (DM_ERR_IO naming the rank). The writer must know that q has those bytes to spare:
 * nothing checks it. */
int dm_cma_writev(const dm_cma *cm, int q, const void *const *src, const uint64_t *dst, const size_t *len, size_t count);
/* Collective over ctx->world (every rank has a cm or none has): a barrier, then forgets the peers
 * and restores the ptrace setting. NULL: nothing. */
void dm_cma_close(dm_cma *cm);

#ifdef __cplusplus
}
#endif
#endif
