/* Counting allocators for host memory (common/alloc.h). Pinned and device memory live in
 * alloc_cuda.cu (or the CPU-only fallbacks below). Reference: none.
 * Host blocks carry a 16-byte header holding their size, so dm_free can count them down. */
#include "common/alloc.h"

#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/log.h"
#include "common/status.h"

#define DM_HDR 16 /* keeps malloc's 16-byte alignment for the caller */

static atomic_llong g_cur[DM_MEM_KINDS];
static atomic_llong g_peak[DM_MEM_KINDS];
static void phase_slots_raise(int kind, long long now);

void dm_mem_account(int kind, long long delta)
{
    long long now = atomic_fetch_add(&g_cur[kind], delta) + delta;
    long long peak = atomic_load(&g_peak[kind]);
    while (now > peak && !atomic_compare_exchange_weak(&g_peak[kind], &peak, now)) {
    }
    if (delta > 0) phase_slots_raise(kind, now);
}

/* Address -> size map for blocks that cannot carry a header (pinned and device memory).
 * Open addressing with tombstones, guarded by one mutex: these allocations are few and large. */
typedef struct {
    const void *p;
    size_t n;
    int kind;
} track_slot;
static track_slot *g_slots;
static size_t g_cap, g_used;
static pthread_mutex_t g_track_lock = PTHREAD_MUTEX_INITIALIZER;
#define DM_TOMB ((const void *)1)

static size_t track_hash(const void *p, size_t cap)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static int track_insert_locked(const void *p, size_t n, int kind)
{
    if ((g_used + 1) * 2 > g_cap) {
        size_t ncap = g_cap ? g_cap * 2 : 64;
        track_slot *ns = calloc(ncap, sizeof *ns);
        if (!ns) return DM_ERR(DM_ERR_NOMEM, "out of host memory tracking allocations");
        size_t live = 0;
        for (size_t i = 0; i < g_cap; i++) {
            if (!g_slots[i].p || g_slots[i].p == DM_TOMB) continue;
            size_t h = track_hash(g_slots[i].p, ncap);
            while (ns[h].p) h = (h + 1) & (ncap - 1);
            ns[h] = g_slots[i];
            live++;
        }
        free(g_slots);
        g_slots = ns;
        g_cap = ncap;
        g_used = live;
    }
    size_t h = track_hash(p, g_cap);
    while (g_slots[h].p && g_slots[h].p != DM_TOMB) h = (h + 1) & (g_cap - 1);
    if (!g_slots[h].p) g_used++;
    g_slots[h] = (track_slot){p, n, kind};
    return DM_OK;
}

int dm_mem_track(int kind, void *p, size_t n)
{
    pthread_mutex_lock(&g_track_lock);
    int rc = track_insert_locked(p, n, kind);
    pthread_mutex_unlock(&g_track_lock);
    if (rc == DM_OK) dm_mem_account(kind, (long long)n);
    return rc;
}

size_t dm_mem_untrack(int kind, const void *p)
{
    size_t n = 0;
    pthread_mutex_lock(&g_track_lock);
    if (g_cap) {
        size_t h = track_hash(p, g_cap);
        while (g_slots[h].p) {
            if (g_slots[h].p == p && g_slots[h].kind == kind) {
                n = g_slots[h].n;
                g_slots[h].p = DM_TOMB;
                break;
            }
            h = (h + 1) & (g_cap - 1);
        }
    }
    pthread_mutex_unlock(&g_track_lock);
    if (n) dm_mem_account(kind, -(long long)n);
    return n;
}

size_t dm_mem_current(int kind) { return (size_t)atomic_load(&g_cur[kind]); }
size_t dm_mem_peak(int kind) { return (size_t)atomic_load(&g_peak[kind]); }
void dm_mem_reset_peak(int kind) { atomic_store(&g_peak[kind], atomic_load(&g_cur[kind])); }

/* Phases' peaks: slots that every count update raises while a phase holds them, so that phases
 * may nest and overlap (threads) without touching the run's peaks. */
#define DM_MEM_PHASE_SLOTS 16
static atomic_int g_slot_used[DM_MEM_PHASE_SLOTS];
static atomic_llong g_slot_peak[DM_MEM_PHASE_SLOTS][DM_MEM_KINDS];
static atomic_int g_slots_active;

static void phase_slots_raise(int kind, long long now)
{
    if (!atomic_load(&g_slots_active)) return;
    for (int i = 0; i < DM_MEM_PHASE_SLOTS; i++) {
        if (!atomic_load(&g_slot_used[i])) continue;
        long long peak = atomic_load(&g_slot_peak[i][kind]);
        while (now > peak && !atomic_compare_exchange_weak(&g_slot_peak[i][kind], &peak, now)) {
        }
    }
}

void dm_mem_phase_begin(dm_mem_phase *ph)
{
    ph->slot = -1;
    for (int k = 0; k < DM_MEM_KINDS; k++) ph->peak[k] = 0;
    for (int i = 0; i < DM_MEM_PHASE_SLOTS && ph->slot < 0; i++) {
        int free_slot = 0;
        if (atomic_compare_exchange_strong(&g_slot_used[i], &free_slot, -1)) ph->slot = i; /* claimed, not live */
    }
    for (int k = 0; k < DM_MEM_KINDS; k++) {
        ph->start[k] = dm_mem_current(k);
        if (ph->slot >= 0) atomic_store(&g_slot_peak[ph->slot][k], (long long)ph->start[k]);
    }
    if (ph->slot >= 0) {
        atomic_fetch_add(&g_slots_active, 1);
        atomic_store(&g_slot_used[ph->slot], 1);
    } else {
        dm_log_debug("memory: more than %d phases at once; one phase's peaks are not measured", DM_MEM_PHASE_SLOTS);
    }
}

void dm_mem_phase_end(dm_mem_phase *ph)
{
    if (ph->slot < 0) return; /* no slot: peaks stay 0 */
    for (int k = 0; k < DM_MEM_KINDS; k++) ph->peak[k] = (size_t)atomic_load(&g_slot_peak[ph->slot][k]);
    atomic_store(&g_slot_used[ph->slot], 0);
    atomic_fetch_sub(&g_slots_active, 1);
    ph->slot = -1;
}

const char *dm_mem_kind_name(int kind)
{
    static const char *names[] = {"host", "pinned", "device"};
    return kind >= 0 && kind < DM_MEM_KINDS ? names[kind] : "?";
}

const char *dm_mem_hugetlb_tunable(void)
{
    static char val[16];
    const char *t = getenv("GLIBC_TUNABLES"), *key = "glibc.malloc.hugetlb=";
    const char *p = t ? strstr(t, key) : NULL;
    if (!p) return NULL;
    p += strlen(key);
    size_t n = strcspn(p, ":");
    if (n >= sizeof val) n = sizeof val - 1;
    memcpy(val, p, n);
    val[n] = '\0';
    return val;
}

const char *dm_mem_thp_mode(void)
{
    static const char *modes[] = {"always", "madvise", "never"};
    char line[256] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return "unknown";
    char *ok = fgets(line, sizeof line, f);
    fclose(f);
    for (int i = 0; ok && i < 3; i++) {
        char want[16];
        snprintf(want, sizeof want, "[%s]", modes[i]);
        if (strstr(line, want)) return modes[i];
    }
    return "unknown";
}

size_t dm_mem_anon_huge_bytes(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %llu kB", &kb) == 1) break;
    fclose(f);
    return (size_t)kb * 1024;
}

/* Tests: the k-th host allocation from now fails (0: none); the allocations counted. */
static uint64_t g_fail_at, g_allocs;

void dm_alloc_fail_at(uint64_t k)
{
    __atomic_store_n(&g_allocs, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_fail_at, k, __ATOMIC_RELAXED);
}

uint64_t dm_alloc_count(void) { return __atomic_load_n(&g_allocs, __ATOMIC_RELAXED); }

static size_t g_dev_fail_from;

void dm_device_alloc_fail_from(size_t min_bytes) { __atomic_store_n(&g_dev_fail_from, min_bytes, __ATOMIC_RELAXED); }

size_t dm_device_alloc_failing_from(void) { return __atomic_load_n(&g_dev_fail_from, __ATOMIC_RELAXED); }

/* 1 when this allocation is the one to fail (only while a test asked for one). */
static int injected_failure(size_t n)
{
    uint64_t k = __atomic_load_n(&g_fail_at, __ATOMIC_RELAXED);
    if (!k || __atomic_add_fetch(&g_allocs, 1, __ATOMIC_RELAXED) != k) return 0;
    DM_ERR(DM_ERR_NOMEM, "out of host memory allocating %zu bytes (injected, test)", n);
    return 1;
}

void *dm_malloc(size_t n)
{
    if (injected_failure(n)) return NULL;
    if (n > SIZE_MAX - DM_HDR) {
        DM_ERR(DM_ERR_NOMEM, "allocation of %zu bytes is too large", n);
        return NULL;
    }
    unsigned char *p = malloc(n + DM_HDR);
    if (!p) {
        DM_ERR(DM_ERR_NOMEM, "out of host memory allocating %zu bytes", n);
        return NULL;
    }
    memcpy(p, &n, sizeof n);
    dm_mem_account(DM_MEM_HOST, (long long)n);
    return p + DM_HDR;
}

void *dm_calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size) {
        DM_ERR(DM_ERR_NOMEM, "allocation of %zu x %zu bytes overflows", count, size);
        return NULL;
    }
    void *p = dm_malloc(count * size);
    if (p) memset(p, 0, count * size);
    return p;
}

void *dm_realloc(void *p, size_t n)
{
    if (!p) return dm_malloc(n);
    if (injected_failure(n)) return NULL;
    if (n > SIZE_MAX - DM_HDR) {
        DM_ERR(DM_ERR_NOMEM, "allocation of %zu bytes is too large", n);
        return NULL;
    }
    unsigned char *base = (unsigned char *)p - DM_HDR;
    size_t old;
    memcpy(&old, base, sizeof old);
    unsigned char *q = realloc(base, n + DM_HDR);
    if (!q) {
        DM_ERR(DM_ERR_NOMEM, "out of host memory growing a block to %zu bytes", n);
        return NULL;
    }
    memcpy(q, &n, sizeof n);
    dm_mem_account(DM_MEM_HOST, (long long)n - (long long)old);
    return q + DM_HDR;
}

void dm_free(void *p)
{
    if (!p) return;
    unsigned char *base = (unsigned char *)p - DM_HDR;
    size_t n;
    memcpy(&n, base, sizeof n);
    dm_mem_account(DM_MEM_HOST, -(long long)n);
    free(base);
}

char *dm_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = dm_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

void dm_mem_prefault(void *p, size_t n)
{
    const uintptr_t page = 4096, chunk = (uintptr_t)8 << 20;
    if (!p || n < ((size_t)4 << 20)) return;
    uintptr_t a = (uintptr_t)p & ~(page - 1), e = ((uintptr_t)p + n + page - 1) & ~(page - 1);
    const long turns = (long)((e - a + chunk - 1) / chunk);
#pragma omp parallel for schedule(dynamic, 1)
    for (long k = 0; k < turns; k++) {
        uintptr_t from = a + (uintptr_t)k * chunk, to = e - from > chunk ? from + chunk : e;
        int done = 0;
#ifdef MADV_POPULATE_WRITE
        done = madvise((void *)from, (size_t)(to - from), MADV_POPULATE_WRITE) == 0;
#endif
        /* the pages wholly or partly in [p, p + n) are the block's: touching them keeps the bytes */
        for (uintptr_t q = from; !done && q < to; q += page) {
            volatile char *c = (volatile char *)(q < (uintptr_t)p ? (uintptr_t)p : q);
            *c = *c;
        }
    }
}

void dm_mem_copy(void *dst, const void *src, size_t n) { dm_mem_copy_threads(dst, src, n, 0); }

int dm_threads_upto(int cap)
{
    int all = omp_get_max_threads();
    return cap > 0 && cap < all ? cap : all;
}

int dm_stage_threads_parse(const char *e)
{
    if (!e || !*e) return DM_STAGE_THREADS;
    char *end = NULL;
    long v = strtol(e, &end, 10);
    if (*end || v < 0 || v > 1 << 20) {
        dm_log_warn("DOCMINE_STAGE_THREADS=%s is not a thread count (0 = all): %d used", e, DM_STAGE_THREADS);
        return DM_STAGE_THREADS;
    }
    return (int)v;
}

static int g_stage_threads;
static pthread_once_t g_stage_once = PTHREAD_ONCE_INIT;

static void stage_threads_read(void) { g_stage_threads = dm_stage_threads_parse(getenv("DOCMINE_STAGE_THREADS")); }

int dm_stage_threads(void)
{
    pthread_once(&g_stage_once, stage_threads_read);
    return g_stage_threads;
}

void dm_mem_copy_staged(void *dst, const void *src, size_t n) { dm_mem_copy_threads(dst, src, n, dm_stage_threads()); }

void dm_mem_copy_pieces(const dm_copy_piece *p, size_t count, int threads)
{
    const size_t chunk = (size_t)256 << 10;
    size_t total = 0, chunks = 0;
    for (size_t k = 0; k < count; k++) {
        total += p[k].n;
        chunks += (p[k].n + chunk - 1) / chunk;
    }
    threads = dm_threads_upto(threads);
    if (total < 4 * chunk || threads < 2) {
        for (size_t k = 0; k < count; k++)
            if (p[k].n) memcpy(p[k].dst, p[k].src, p[k].n);
        return;
    }
    const long nc = (long)chunks;
#pragma omp parallel num_threads(threads)
    {
        /* a static schedule hands each thread ascending chunks: its piece only moves forward */
        size_t k = 0, first = 0; /* piece k's chunks start at chunk `first` of the whole */
#pragma omp for schedule(static)
        for (long c = 0; c < nc; c++) {
            while ((size_t)c >= first + (p[k].n + chunk - 1) / chunk) first += (p[k++].n + chunk - 1) / chunk;
            size_t at = ((size_t)c - first) * chunk, len = p[k].n - at < chunk ? p[k].n - at : chunk;
            memcpy((char *)p[k].dst + at, (const char *)p[k].src + at, len);
        }
    }
}

void dm_mem_copy_threads(void *dst, const void *src, size_t n, int threads)
{
    const size_t chunk = (size_t)1 << 20;
    threads = dm_threads_upto(threads);
    if (n < 4 * chunk || threads < 2) {
        if (n) memcpy(dst, src, n);
        return;
    }
    const long pieces = (long)((n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long k = 0; k < pieces; k++) {
        size_t at = (size_t)k * chunk, len = n - at < chunk ? n - at : chunk;
        memcpy((char *)dst + at, (const char *)src + at, len);
    }
}

#if !DM_HAVE_CUDA
int dm_host_alloc_pinned(void **out, size_t n)
{
    /* CPU-only build: ordinary memory stands in for pinned memory, counted as pinned. */
    void *p = malloc(n ? n : 1);
    *out = NULL;
    if (!p) return DM_ERR(DM_ERR_NOMEM, "out of host memory allocating %zu pinned bytes", n);
    int rc = dm_mem_track(DM_MEM_PINNED, p, n);
    if (rc) free(p);
    else *out = p;
    return rc;
}
void dm_host_free_pinned(void *p)
{
    if (!p) return;
    dm_mem_untrack(DM_MEM_PINNED, p);
    free(p);
}
int dm_device_alloc(void **out, size_t n)
{
    *out = NULL;
    return DM_ERR(DM_ERR_UNSUPPORTED, "device allocation of %zu bytes: built without CUDA", n);
}
void dm_device_free(void *p) { (void)p; }
#endif
