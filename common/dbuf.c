/* Multi-buffering in a CPU-only build (common/dbuf.h): not available; the CPU backends process
 * batches in place. The CUDA build uses dbuf_cuda.cu. Reference: none. */
#include "common/dbuf.h"

#include <string.h>

#include "common/status.h"

#if !DM_HAVE_CUDA
int dm_dbuf_init(dm_dbuf *b, int n, size_t host_bytes, size_t dev_bytes)
{
    memset(b, 0, sizeof *b);
    return DM_ERR(DM_ERR_UNSUPPORTED, "pinned multi-buffers need the CUDA backend");
}
void dm_dbuf_free(dm_dbuf *b) { memset(b, 0, sizeof *b); }
int dm_dbuf_acquire(dm_dbuf *b, dm_dbuf_slot **slot) { return DM_ERR_UNSUPPORTED; }
int dm_dbuf_h2d(dm_dbuf_slot *s, size_t n) { return DM_ERR_UNSUPPORTED; }
int dm_dbuf_d2h(dm_dbuf_slot *s, void *dst, const void *src, size_t n) { return DM_ERR_UNSUPPORTED; }
int dm_dbuf_release(dm_dbuf_slot *s) { return DM_ERR_UNSUPPORTED; }
int dm_dbuf_wait(dm_dbuf_slot *s) { return DM_ERR_UNSUPPORTED; }
int dm_dbuf_drain(dm_dbuf *b) { return DM_ERR_UNSUPPORTED; }
int dm_dbuf_upload(dm_dbuf *b, void *dst, const void *src, size_t n) { return DM_ERR_UNSUPPORTED; }
int dm_dbuf_download(dm_dbuf *b, void *dst, const void *src, size_t n) { return DM_ERR_UNSUPPORTED; }
#endif
