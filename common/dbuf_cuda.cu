/* Pinned multi-buffering with per-slot streams and events (common/dbuf.h). Reference: none. */
#include <string.h>

#include "common/alloc.h"
#include "common/cuda_check.h"
#include "common/dbuf.h"

extern "C" void dm_dbuf_free(dm_dbuf *b)
{
    if (!b->slots) return;
    for (int i = 0; i < b->n; i++) {
        dm_dbuf_slot *s = &b->slots[i];
        if (s->stream) cudaStreamSynchronize((cudaStream_t)s->stream);
        if (s->done) cudaEventDestroy((cudaEvent_t)s->done);
        if (s->stream) cudaStreamDestroy((cudaStream_t)s->stream);
        dm_host_free_pinned(s->host);
        if (s->dev) dm_device_free(s->dev);
    }
    dm_free(b->slots);
    memset(b, 0, sizeof *b);
}

extern "C" int dm_dbuf_init(dm_dbuf *b, int n, size_t host_bytes, size_t dev_bytes)
{
    memset(b, 0, sizeof *b);
    if (n < 2) return DM_ERR(DM_ERR_INVALID_ARG, "a multi-buffer needs at least 2 slots, got %d", n);
    b->slots = (dm_dbuf_slot *)dm_calloc((size_t)n, sizeof *b->slots);
    if (!b->slots) return DM_ERR_NOMEM;
    b->n = n;
    b->host_bytes = host_bytes;
    b->dev_bytes = dev_bytes;
    int rc = DM_OK;
    for (int i = 0; i < n && rc == DM_OK; i++) {
        dm_dbuf_slot *s = &b->slots[i];
        s->index = i;
        rc = dm_host_alloc_pinned(&s->host, host_bytes);
        if (rc == DM_OK && dev_bytes) rc = dm_device_alloc(&s->dev, dev_bytes);
        cudaStream_t st;
        cudaEvent_t ev;
        if (rc == DM_OK) {
            cudaError_t e = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
            if (e == cudaSuccess) s->stream = st;
            else rc = DM_ERR(DM_ERR_CUDA, "cudaStreamCreate: %s", cudaGetErrorString(e));
        }
        if (rc == DM_OK) {
            cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
            if (e == cudaSuccess) s->done = ev;
            else rc = DM_ERR(DM_ERR_CUDA, "cudaEventCreate: %s", cudaGetErrorString(e));
        }
    }
    if (rc != DM_OK) dm_dbuf_free(b);
    return rc;
}

extern "C" int dm_dbuf_wait(dm_dbuf_slot *s)
{
    if (!s->pending) return DM_OK;
    DM_CUDA_TRY(cudaEventSynchronize((cudaEvent_t)s->done));
    s->pending = 0;
    return DM_OK;
}

extern "C" int dm_dbuf_acquire(dm_dbuf *b, dm_dbuf_slot **slot)
{
    dm_dbuf_slot *s = &b->slots[b->next];
    b->next = (b->next + 1) % b->n;
    DM_TRY(dm_dbuf_wait(s));
    s->used = 0;
    *slot = s;
    return DM_OK;
}

extern "C" int dm_dbuf_h2d(dm_dbuf_slot *s, size_t n)
{
    DM_CUDA_TRY(cudaMemcpyAsync(s->dev, s->host, n, cudaMemcpyHostToDevice, (cudaStream_t)s->stream));
    return DM_OK;
}

extern "C" int dm_dbuf_d2h(dm_dbuf_slot *s, void *dst, const void *src, size_t n)
{
    DM_CUDA_TRY(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, (cudaStream_t)s->stream));
    return DM_OK;
}

extern "C" int dm_dbuf_release(dm_dbuf_slot *s)
{
    DM_CUDA_TRY(cudaEventRecord((cudaEvent_t)s->done, (cudaStream_t)s->stream));
    s->pending = 1;
    return DM_OK;
}

extern "C" int dm_dbuf_drain(dm_dbuf *b)
{
    for (int i = 0; i < b->n; i++) DM_TRY(dm_dbuf_wait(&b->slots[i]));
    return DM_OK;
}

extern "C" int dm_dbuf_upload(dm_dbuf *b, void *dst, const void *src, size_t n)
{
    if (!b->slots || b->host_bytes == 0) return DM_ERR(DM_ERR_INVALID_ARG, "dm_dbuf_upload: no slot buffers");
    for (size_t at = 0; at < n;) {
        size_t len = n - at < b->host_bytes ? n - at : b->host_bytes;
        dm_dbuf_slot *s;
        DM_TRY(dm_dbuf_acquire(b, &s)); /* its last upload has read the buffer */
        dm_mem_copy_staged(s->host, (const char *)src + at, len);
        DM_CUDA_TRY(cudaMemcpyAsync((char *)dst + at, s->host, len, cudaMemcpyHostToDevice, (cudaStream_t)s->stream));
        DM_TRY(dm_dbuf_release(s));
        at += len;
    }
    return DM_OK;
}

extern "C" int dm_dbuf_download(dm_dbuf *b, void *dst, const void *src, size_t n)
{
    if (!b->slots || b->host_bytes == 0) return DM_ERR(DM_ERR_INVALID_ARG, "dm_dbuf_download: no slot buffers");
    DM_TRY(dm_dbuf_drain(b));
    /* piece i downloads into slot i mod n while piece i - 1 is copied out of its slot; a slot is
     * acquired again only after its piece was copied out (n >= 2) */
    dm_dbuf_slot *prev = NULL;
    size_t prev_at = 0, prev_len = 0;
    for (size_t at = 0; at < n || prev;) {
        dm_dbuf_slot *s = NULL;
        size_t len = 0;
        if (at < n) {
            len = n - at < b->host_bytes ? n - at : b->host_bytes;
            DM_TRY(dm_dbuf_acquire(b, &s));
            DM_CUDA_TRY(cudaMemcpyAsync(s->host, (const char *)src + at, len, cudaMemcpyDeviceToHost,
                                        (cudaStream_t)s->stream));
            DM_TRY(dm_dbuf_release(s));
        }
        if (prev) {
            DM_TRY(dm_dbuf_wait(prev));
            dm_mem_copy_staged((char *)dst + prev_at, prev->host, prev_len);
        }
        prev = s;
        prev_at = at;
        prev_len = len;
        at += len;
    }
    return DM_OK;
}
