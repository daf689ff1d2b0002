/* One allocation wrapper for host memory, one for pinned host memory and one for device memory,
 * each counting bytes (current and peak) for the run report. Reference: none.
 * Thread-safe. Device and pinned allocations need the CUDA backend (DM_ERR_UNSUPPORTED otherwise). */
#ifndef DM_ALLOC_H
#define DM_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum dm_mem_kind { DM_MEM_HOST = 0, DM_MEM_PINNED = 1, DM_MEM_DEVICE = 2, DM_MEM_KINDS = 3 };

/* Host memory. Return NULL on failure (with DM_ERR_NOMEM recorded) or for n == 0 requests that
 * the C library answers with NULL. Memory from these must be released with dm_free. */
void *dm_malloc(size_t n);
void *dm_calloc(size_t count, size_t size);
void *dm_realloc(void *p, size_t n);
void dm_free(void *p);
char *dm_strdup(const char *s);
/* Tests: from now on the k-th call of dm_malloc / dm_calloc / dm_realloc (any thread) fails as an
 * exhausted host would (NULL, DM_ERR_NOMEM recorded); 0 stops it. dm_alloc_count: the calls
 * counted since (only while k > 0), so that a test can try every k of a piece of work. */
void dm_alloc_fail_at(uint64_t k);
uint64_t dm_alloc_count(void);
/* Tests: from now on every dm_device_alloc of at least min_bytes bytes fails as a full device would
 * (DM_ERR_NOMEM, "out of memory (injected, test)"); 0 stops it. It acts in this process only:
 * filling the real device instead would also fail the other tests that share the GPU (ctest -j). */
void dm_device_alloc_fail_from(size_t min_bytes);
/* The threshold dm_device_alloc_fail_from set (0: none); read by dm_device_alloc. */
size_t dm_device_alloc_failing_from(void);
/* Populates the pages of the host range [p, p + n) with the OpenMP threads (8 MiB each turn,
 * madvise MADV_POPULATE_WRITE, or a read and write of a byte per page where the kernel lacks it),
 * so that later writes do not page-fault: a fresh block's first writer - one thread, or a pageable
 * device-to-host copy - otherwise takes every fault itself. Contents are kept. Ranges under 4 MiB
 * are left alone. */
void dm_mem_prefault(void *p, size_t n);
/* memcpy, on the OpenMP threads in 1 MiB pieces from 4 MiB on (staging megabytes into pinned
 * buffers for the device: one thread copies 5-10 GB/s). */
void dm_mem_copy(void *dst, const void *src, size_t n);
/* The same on at most `threads` threads (<= 0: all of OpenMP's): staged copies that run while the
 * GPU's DMA runs leave it memory bandwidth by copying on fewer threads (bench/RESULTS.md, session 27). */
void dm_mem_copy_threads(void *dst, const void *src, size_t n, int threads);
/* Several copies at once (disjoint destinations), on at most `threads` threads (<= 0: all of
 * OpenMP's): the pieces are cut into 256 KiB chunks shared among the threads, so that a batch of
 * small copies (a step's halo: seven arrays of 10^4-10^5 entries and the new vectors) takes all of
 * them; under 1 MiB in all, one thread copies. */
typedef struct dm_copy_piece {
    void *dst;
    const void *src;
    size_t n;
} dm_copy_piece;
void dm_mem_copy_pieces(const dm_copy_piece *p, size_t count, int threads);
/* The OpenMP threads of a loop capped at `cap`: min(cap, omp_get_max_threads()), all of them for
 * cap <= 0. */
int dm_threads_upto(int cap);
/* The threads of a rank's host copies that run beside the GPUs' DMA (staging into and out of
 * pinned buffers, flock's per-step halo and migration copies on the CUDA backend):
 * DOCMINE_STAGE_THREADS, default DM_STAGE_THREADS, 0 = all of OpenMP's (for dm_mem_copy_threads
 * and dm_threads_upto). With every thread of every rank of a host copying, the CPUs' reads and
 * writes starve the DMA of memory bandwidth and the two no longer overlap: on a 4-GPU host, 4 ranks
 * staged 3 GiB each at 2.7-5.9 GB/s a rank with 16 threads and at 12.9-15.8 with 8 (bench/RESULTS.md,
 * session 27). Read once; any other value than a count >= 0 is warned of and the default used. */
#define DM_STAGE_THREADS 8
int dm_stage_threads(void);
/* dm_mem_copy_threads with dm_stage_threads() threads: the host side of a staged copy. */
void dm_mem_copy_staged(void *dst, const void *src, size_t n);
/* The value of DOCMINE_STAGE_THREADS e means (NULL or empty: DM_STAGE_THREADS). */
int dm_stage_threads_parse(const char *e);

/* Pinned (page-locked) host memory, for asynchronous copies. */
int dm_host_alloc_pinned(void **out, size_t n);
void dm_host_free_pinned(void *p);

/* Device memory on the current GPU. */
int dm_device_alloc(void **out, size_t n);
void dm_device_free(void *p);

/* Bytes currently allocated and the peak, per kind. */
size_t dm_mem_current(int kind);
size_t dm_mem_peak(int kind);
/* Starts a new peak at the current count (a benchmark measures one phase, e.g. after tuning). */
void dm_mem_reset_peak(int kind);
const char *dm_mem_kind_name(int kind);
/* The peaks of one phase of a run (a pipeline stage, a tuning search): the most bytes of each kind
 * in use at once between begin and end (what was allocated before included), and the counts at
 * begin. Phases may nest (a search inside a stage) and overlap (threads), up to 16 at once (more:
 * their peaks read 0); allocations of other threads during a phase count in it. The run's peaks
 * (dm_mem_peak) are not touched. */
typedef struct {
    size_t start[DM_MEM_KINDS]; /* the counts when the phase began */
    size_t peak[DM_MEM_KINDS];  /* set by dm_mem_phase_end: the phase's peaks */
    int slot;                   /* internal */
} dm_mem_phase;
void dm_mem_phase_begin(dm_mem_phase *ph);
void dm_mem_phase_end(dm_mem_phase *ph);

/* Huge pages for the large blocks of glibc's malloc: the value of glibc.malloc.hugetlb in the
 * GLIBC_TUNABLES of this process ("1": transparent huge pages by madvise; docmine's main sets it
 * unless DOCMINE_HUGEPAGES=0 or the user set it), or NULL when it is not set. The string is
 * static: valid until the next call (not for concurrent callers). */
const char *dm_mem_hugetlb_tunable(void);
/* The kernel's transparent huge page mode ("always", "madvise" or "never": the bracketed word of
 * /sys/kernel/mm/transparent_hugepage/enabled), or "unknown". */
const char *dm_mem_thp_mode(void);
/* Bytes of this process's anonymous memory in huge pages now (AnonHugePages of
 * /proc/self/smaps_rollup), 0 when unknown. */
size_t dm_mem_anon_huge_bytes(void);

/* Used by the CUDA allocation functions to keep the counters (internal): remembers the size of
 * a pinned or device block by address, and forgets it returning the size (0 if unknown). */
void dm_mem_account(int kind, long long delta);
int dm_mem_track(int kind, void *p, size_t n);
size_t dm_mem_untrack(int kind, const void *p);

#ifdef __cplusplus
}
#endif
#endif
