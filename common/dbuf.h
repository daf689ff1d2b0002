/* Pinned multi-buffering for batch pipelines: N slots, each with a pinned host buffer, a device
 * buffer, its own CUDA stream and an event marking the end of the slot's last enqueued work.
 * While the CPU fills slot k+1, slot k's copies and kernels run on its stream.
 * Reference: none (the CPU backends process batches in place). CUDA backend only: in a CPU-only
 * build dm_dbuf_init returns DM_ERR_UNSUPPORTED. */
#ifndef DM_DBUF_H
#define DM_DBUF_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dm_dbuf_slot {
    void *host;      /* pinned, host_bytes */
    void *dev;       /* device, dev_bytes */
    void *stream;    /* cudaStream_t */
    void *done;      /* cudaEvent_t recorded by dm_dbuf_release */
    size_t used;     /* bytes of host filled by the producer (bookkeeping for the caller) */
    int index;
    int pending;     /* work was released on this slot and not yet waited for */
} dm_dbuf_slot;

typedef struct dm_dbuf {
    dm_dbuf_slot *slots;
    int n;
    int next;
    size_t host_bytes, dev_bytes;
} dm_dbuf;

/* Allocates n >= 2 slots. On failure everything already allocated is released. */
int dm_dbuf_init(dm_dbuf *b, int n, size_t host_bytes, size_t dev_bytes);
void dm_dbuf_free(dm_dbuf *b);
/* The next slot in round-robin order, after its previous work has completed (so its host buffer
 * may be overwritten and its results read). */
int dm_dbuf_acquire(dm_dbuf *b, dm_dbuf_slot **slot);
/* Enqueues host -> device copy of the first n bytes of the slot on its stream. */
int dm_dbuf_h2d(dm_dbuf_slot *s, size_t n);
/* Enqueues device -> host copy of n bytes from src (device) to dst (pinned host) on its stream. */
int dm_dbuf_d2h(dm_dbuf_slot *s, void *dst, const void *src, size_t n);
/* Marks the end of the work enqueued on the slot (records its event). */
int dm_dbuf_release(dm_dbuf_slot *s);
/* Waits for the slot's released work. */
int dm_dbuf_wait(dm_dbuf_slot *s);
/* Waits for every slot. */
int dm_dbuf_drain(dm_dbuf *b);
/* Copies n bytes of (pageable) host memory at src to device memory at dst through the slots'
 * pinned buffers: each piece of up to host_bytes is copied into a slot by dm_mem_copy_staged
 * (dm_stage_threads() of the OpenMP threads, common/alloc.h) and uploaded on the slot's stream while the next piece is
 * copied (a pageable cudaMemcpy stages through the driver's buffers on one thread). Returns once
 * every piece is queued; src may change at once, dst is complete after dm_dbuf_drain. The slots'
 * device buffers are not used (dev_bytes may be 0). */
int dm_dbuf_upload(dm_dbuf *b, void *dst, const void *src, size_t n);
/* The reverse: copies n bytes of device memory at src to (pageable) host memory at dst through
 * the slots' pinned buffers: each piece downloads on its slot's stream while dm_stage_threads()
 * threads copy the previous one out. Waits for every slot first (so that work queued before, such
 * as an upload of src, has completed) and returns when dst is complete. */
int dm_dbuf_download(dm_dbuf *b, void *dst, const void *src, size_t n);

#ifdef __cplusplus
}
#endif
#endif
