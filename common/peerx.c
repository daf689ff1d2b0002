/* Messages through the GPUs (common/peerx.h): the switch, and in a CPU-only build the exchange
 * that is never available, so callers use MPI. The CUDA build's exchange is peerx_cuda.cu.
 * Reference: none. */
#include "common/peerx.h"

#include <stdlib.h>
#include <string.h>

#include "common/status.h"

int dm_peerx_asked(void)
{
    const char *e = getenv("DOCMINE_GPU_EXCHANGE");
    return e && strcmp(e, "1") == 0;
}

#if !DM_HAVE_CUDA
int dm_peerx_open(dm_peerx **px, const dm_ctx *ctx, const uint64_t *send_bytes, const uint64_t *recv_bytes)
{
    *px = NULL;
    return DM_OK;
}
int dm_peerx_local(const dm_peerx *px, int q) { return 0; }
int dm_peerx_put(dm_peerx *px, int q, size_t off, const void *src, size_t n) { return DM_ERR_UNSUPPORTED; }
int dm_peerx_exchange(dm_peerx *px) { return DM_ERR_UNSUPPORTED; }
int dm_peerx_get(dm_peerx *px, int q, size_t off, void *dst, size_t n) { return DM_ERR_UNSUPPORTED; }
void dm_peerx_close(dm_peerx *px) {}
#endif
