/* The CUDA backend of flock: device-resident boids and vectors; per iteration the grid build
 * (cell keys, radix sort by cell through the sorting module, cell bounds, gather into the sorted
 * layout of the forces kernel), neighbour counting and detection with a per-boid cache of exact
 * similarity decisions, the exact similarity of the cache misses (a warp per pair merging the two
 * term-sorted rows 32 columns at a time; of the two own-own pairs (a, b) and (b, a) one is
 * computed, the other copies its decision), the force sums and the update. Each iteration starts
 * with the cache's new rows, built from the last ones (a warp per boid: their most recent
 * decisions, so that a pair that leaves and comes back within a few iterations is not computed
 * again; the forces restamp or insert this iteration's pairs; its time is in flock.forces;
 * DOCMINE_FLOCK_CACHE_CARRY=0 starts every row empty, for comparisons). With several ranks the
 * device selects the halo and the departing boids and only their states cross to the host, which
 * packs them with the vectors it keeps (non-blocking MPI, staged through host memory); the
 * selection (stream B), the exchange and the halo's unpacking and upload run while stream A
 * computes the own-own similarity and forces (the host waits only for the pair counts and the
 * detection's miss counts, which it needs to queue them), then the halo pass runs on stream B;
 * the device
 * applies the host's migration moves to its boids and pair-cache rows in place and receives the
 * arrivals. The device holds the authoritative boid state (the host copy is refreshed on demand).
 * For the clusters it lists the final graph's edges, sums the clusters' centroids and attaches
 * documents to them on its copy of the vectors (the host keeps the components and the merge).
 * Every kernel is launched through the tuner (dm_tune_select) and registered with its compiled
 * instances and bench hooks. The results are bit-identical to the CPU reference: same DM_HD model
 * arithmetic, fixed-point sums, -fmad=false.
 * Reference: flock_cpu.c (dm_flock_step_cpu, dm_flock_edges_cpu, dm_flock_attach_cpu) and
 * flock_clusters.c (centroid_local). */
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cuda/std/functional>
#include <mutex>
#include <new>

#include "common/alloc.h"
#include "common/dbuf.h"
#include "common/cuda_check.h"
#include "common/log.h"
#include "common/rng.h"
#include "common/status.h"
#include "common/timer.h"
#include "common/tune/tune.h"
#include "common/tune/wl_cache.h"
#include "flock/flock_impl.h"
#include "flock/flock_kernels.cuh"
#include "flock/flock_synth.h"
#if DM_FLOCK_HAVE_SORTING_CUDA
#include "sorting/sorting.h"
#endif

namespace {

/* An allocation of this backend: its failure names the stage (common/cuda_check.h). */
#define FK_ALLOC_TRY(call)                                                                         \
    do {                                                                                           \
        int fk_rc_ = (call);                                                                       \
        if (fk_rc_ < 0) return DM_CUDA_STAGE_ERR(fk_rc_, "flock");                                 \
    } while (0)

/* ================================================================ launchers and instances ==== */

inline unsigned blocks_for(size_t n, int block, int rake)
{
    size_t threads = (n + (size_t)rake - 1) / (size_t)rake;
    size_t b = (threads + (size_t)block - 1) / (size_t)block;
    return (unsigned)(b ? b : 1);
}

#define FK_LAUNCHER(NAME, KERNEL, ARGS)                                                            \
    template <int B, int R, bool S>                                                                \
    int NAME(const void *args, size_t n, void *stream)                                             \
    {                                                                                              \
        if (n == 0) return DM_OK;                                                                  \
        ARGS a = *static_cast<const ARGS *>(args);                                                 \
        KERNEL<B, R, S><<<blocks_for(n, B, R), B, 0, static_cast<cudaStream_t>(stream)>>>(a);      \
        DM_CUDA_LAUNCH_CHECK();                                                                    \
        return DM_OK;                                                                              \
    }

FK_LAUNCHER(launch_keys, fk_cell_keys, fk_keys_args)
FK_LAUNCHER(launch_bounds, fk_cell_bounds, fk_bounds_args)
FK_LAUNCHER(launch_gather, fk_gather, fk_gather_args)
FK_LAUNCHER(launch_count, fk_count, fk_pass_args)
FK_LAUNCHER(launch_detect, fk_detect, fk_pass_args)
FK_LAUNCHER(launch_update, fk_update, fk_update_args)
FK_LAUNCHER(launch_flags, fk_flags, fk_flags_args)
FK_LAUNCHER(launch_pick, fk_pick, fk_pick_args)
FK_LAUNCHER(launch_edges, fk_edges, fk_edges_args)

/* n = items (pairs, documents); a warp per item, RAKE items per warp */
#define FK_WARP_LAUNCHER(NAME, KERNEL, ARGS)                                                       \
    template <int B, int R, bool S>                                                                \
    int NAME(const void *args, size_t n, void *stream)                                             \
    {                                                                                              \
        if (n == 0) return DM_OK;                                                                  \
        ARGS a = *static_cast<const ARGS *>(args);                                                 \
        size_t warps = (n + R - 1) / R, threads = warps * 32;                                      \
        unsigned blocks = (unsigned)((threads + B - 1) / B);                                       \
        KERNEL<B, R, S><<<blocks, B, 0, static_cast<cudaStream_t>(stream)>>>(a);                   \
        DM_CUDA_LAUNCH_CHECK();                                                                    \
        return DM_OK;                                                                              \
    }
FK_WARP_LAUNCHER(launch_similarity, fk_similarity, fk_sim_args)
FK_WARP_LAUNCHER(launch_attach, fk_attach, fk_attach_args)
FK_WARP_LAUNCHER(launch_csums, fk_centroid_sums, fk_csums_args)
FK_WARP_LAUNCHER(launch_build, fk_cache_build, fk_build_args)

template <int B, int R, bool S, int L>
int launch_forces(const void *args, size_t n, void *stream)
{
    if (n == 0) return DM_OK;
    fk_forces_args a = *static_cast<const fk_forces_args *>(args);
    fk_forces<B, R, S, L><<<blocks_for(n, B, R), B, 0, static_cast<cudaStream_t>(stream)>>>(a);
    DM_CUDA_LAUNCH_CHECK();
    return DM_OK;
}

/* n = cache slots to move (rows x FK_CACHE) */
template <int B>
int launch_cache_move(const void *args, size_t n, void *stream)
{
    if (n == 0) return DM_OK;
    fk_cache_move_args a = *static_cast<const fk_cache_move_args *>(args);
    fk_cache_move<B><<<blocks_for(n, B, 1), B, 0, static_cast<cudaStream_t>(stream)>>>(a);
    DM_CUDA_LAUNCH_CHECK();
    return DM_OK;
}

#define FK_I(LAUNCH, KERNEL, B, R, S)                                                              \
    {{B, R, S, DM_LAYOUT_NONE, 0}, LAUNCH<B, R, S>, reinterpret_cast<const void *>(&KERNEL<B, R, S>), 0}
/* block {128, 256, 512} x rake {1 consecutive, 4 consecutive, 4 strided} */
#define FK_SPACE(LAUNCH, KERNEL)                                                                   \
    FK_I(LAUNCH, KERNEL, 128, 1, false), FK_I(LAUNCH, KERNEL, 128, 4, false), FK_I(LAUNCH, KERNEL, 128, 4, true), \
        FK_I(LAUNCH, KERNEL, 256, 1, false), FK_I(LAUNCH, KERNEL, 256, 4, false),                  \
        FK_I(LAUNCH, KERNEL, 256, 4, true), FK_I(LAUNCH, KERNEL, 512, 1, false),                   \
        FK_I(LAUNCH, KERNEL, 512, 4, false), FK_I(LAUNCH, KERNEL, 512, 4, true)
#define FK_SPACE_DEFAULT 3 /* block 256, rake 1 */
/* neighbour scans: rake {1, 2 consecutive, 2 strided} */
#define FK_SPACE2(LAUNCH, KERNEL)                                                                  \
    FK_I(LAUNCH, KERNEL, 128, 1, false), FK_I(LAUNCH, KERNEL, 128, 2, false), FK_I(LAUNCH, KERNEL, 128, 2, true), \
        FK_I(LAUNCH, KERNEL, 256, 1, false), FK_I(LAUNCH, KERNEL, 256, 2, false),                  \
        FK_I(LAUNCH, KERNEL, 256, 2, true), FK_I(LAUNCH, KERNEL, 512, 1, false),                   \
        FK_I(LAUNCH, KERNEL, 512, 2, false), FK_I(LAUNCH, KERNEL, 512, 2, true)

const dm_tune_instance g_keys_inst[] = {FK_SPACE(launch_keys, fk_cell_keys)};
const dm_tune_instance g_bounds_inst[] = {FK_SPACE(launch_bounds, fk_cell_bounds)};
const dm_tune_instance g_gather_inst[] = {FK_SPACE(launch_gather, fk_gather)};
const dm_tune_instance g_count_inst[] = {FK_SPACE2(launch_count, fk_count)};
const dm_tune_instance g_detect_inst[] = {FK_SPACE2(launch_detect, fk_detect)};
const dm_tune_instance g_update_inst[] = {FK_SPACE(launch_update, fk_update)};
const dm_tune_instance g_flags_inst[] = {FK_SPACE(launch_flags, fk_flags)};
const dm_tune_instance g_pick_inst[] = {FK_SPACE(launch_pick, fk_pick)};
/* similarity: block x pairs per warp {1, 4 consecutive, 4 strided} */
const dm_tune_instance g_sim_inst[] = {FK_SPACE(launch_similarity, fk_similarity)};
const dm_tune_instance g_edges_inst[] = {FK_SPACE(launch_edges, fk_edges)};
/* attachment: block x documents per warp {1, 4 consecutive, 4 strided} */
const dm_tune_instance g_attach_inst[] = {FK_SPACE(launch_attach, fk_attach)};
const dm_tune_instance g_csums_inst[] = {FK_SPACE(launch_csums, fk_centroid_sums)};
/* the pair cache's new rows: block x boids per warp {1, 4 consecutive, 4 strided} */
const dm_tune_instance g_build_inst[] = {FK_SPACE(launch_build, fk_cache_build)};

#define FK_F(B, R, S, L)                                                                           \
    {{B, R, S, L, (L) == DM_LAYOUT_TILED ? FK_TILE : 0}, launch_forces<B, R, S, L>,                \
     reinterpret_cast<const void *>(&fk_forces<B, R, S, L>), 0}
#define FK_F_L(L)                                                                                  \
    FK_F(128, 1, false, L), FK_F(128, 2, true, L), FK_F(256, 1, false, L), FK_F(256, 2, true, L),  \
        FK_F(512, 1, false, L), FK_F(512, 2, true, L)
/* forces: block {128, 256, 512} x rake {1, 2 strided} x layout {SoA, AoS, tiled AoS of 32} */
const dm_tune_instance g_forces_inst[] = {FK_F_L(DM_LAYOUT_SOA), FK_F_L(DM_LAYOUT_AOS), FK_F_L(DM_LAYOUT_TILED)};
#define FK_FORCES_DEFAULT 8 /* block 256, rake 1, AoS */

const dm_tune_instance g_move_inst[] = {
    {{256, 1, 0, DM_LAYOUT_NONE, 0}, launch_cache_move<256>, reinterpret_cast<const void *>(&fk_cache_move<256>), 0},
    {{512, 1, 0, DM_LAYOUT_NONE, 0}, launch_cache_move<512>, reinterpret_cast<const void *>(&fk_cache_move<512>), 0}};

#define NINST(a) ((int)(sizeof a / sizeof a[0]))

/* ================================================================ device state ================ */

/* Device arrays grow to n plus an eighth (plus 1024 elements), not geometrically from a small
 * start: the arrays that grow during a run (pair lists as the plane shrinks, the vector pool with
 * arrivals) grow a few times, and no array holds much more than it needs (device memory per
 * document is a target of the benchmark). exact: to n only. */
inline size_t grown(size_t n, bool exact) { return exact ? n : n + n / 8 + 1024; }

/* Device blocks replaced by larger ones (ensure, ensure_keep, the pair caches) are freed by
 * retired_free, once the device is idle, not at once: cudaFree waits for all of the device's
 * work, so freeing a grown halo array while stream A's similarity kernel ran held the host - and
 * the halo pass it was about to queue - until that kernel ended (up to 60 ms, several times a run
 * on every rank of a 4-GPU run, each such step setting the pace of all ranks). Process-wide: the
 * tuner's bench states grow arrays too (on its threads). */
std::mutex g_retired_mutex;
void **g_retired = NULL;
size_t g_retired_n = 0, g_retired_cap = 0;

void retire(void *p)
{
    if (!p) return;
    std::lock_guard<std::mutex> lock(g_retired_mutex);
    if (g_retired_n == g_retired_cap) {
        size_t c = g_retired_cap ? 2 * g_retired_cap : 64;
        void **q = static_cast<void **>(dm_realloc(g_retired, sizeof *q * c));
        if (!q) {
            dm_device_free(p); /* no room to defer it: freed now (slower, not wrong) */
            return;
        }
        g_retired = q;
        g_retired_cap = c;
    }
    g_retired[g_retired_n++] = p;
}

/* Frees the retired blocks (call where the device is idle, or may be made to wait); returns
 * how many. last: also the list itself (no flock state left). */
size_t retired_free(bool last = false)
{
    std::lock_guard<std::mutex> lock(g_retired_mutex);
    size_t n = g_retired_n;
    for (size_t i = 0; i < n; i++) dm_device_free(g_retired[i]);
    g_retired_n = 0;
    if (last) {
        dm_free(g_retired);
        g_retired = NULL;
        g_retired_cap = 0;
    }
    return n;
}

template <typename T>
int ensure(T **p, size_t *cap, size_t n, bool exact = false)
{
    if (n <= *cap && *p) return DM_OK;
    size_t c = grown(n, exact);
    retire(*p);
    *p = NULL;
    *cap = 0;
    void *q = NULL;
    FK_ALLOC_TRY(dm_device_alloc(&q, c * sizeof(T)));
    *p = static_cast<T *>(q);
    *cap = c;
    return DM_OK;
}
/* Grows *p to hold n elements keeping the first `used` (device copy). */
template <typename T>
int ensure_keep(T **p, size_t *cap, size_t n, size_t used, cudaStream_t st, bool exact = false)
{
    if (n <= *cap && *p) return DM_OK;
    size_t c = grown(n, exact);
    void *q = NULL;
    FK_ALLOC_TRY(dm_device_alloc(&q, c * sizeof(T)));
    if (*p && used) {
        cudaError_t e = cudaMemcpyAsync(q, *p, used * sizeof(T), cudaMemcpyDeviceToDevice, st);
        if (e == cudaSuccess) e = cudaStreamSynchronize(st);
        if (e != cudaSuccess) {
            dm_device_free(q);
            return DM_ERR(DM_ERR_CUDA, "flock: growing a device array: %s", cudaGetErrorString(e));
        }
    }
    retire(*p);
    *p = static_cast<T *>(q);
    *cap = c;
    return DM_OK;
}

template <typename T>
void release(T **p)
{
    if (*p) dm_device_free(*p);
    *p = NULL;
}

/* A set of boids on the device (own or halo) with its grid and sorted copies. */
struct dset {
    size_t n = 0, cap = 0, pool_cap = 0, pool_n = 0;
    double *x = 0, *y = 0, *vx = 0, *vy = 0;
    uint64_t *id = 0, *voff = 0;
    uint32_t *vlen = 0, *col = 0;
    float *val = 0;
    size_t cap_x = 0, cap_y = 0, cap_vx = 0, cap_vy = 0, cap_id = 0, cap_voff = 0, cap_vlen = 0, cap_col = 0, cap_val = 0;
    /* grid */
    uint32_t *keys = 0, *idx = 0, *skeys = 0, *sidx = 0, *cstart = 0, *cend = 0;
    size_t cap_keys = 0, cap_idx = 0, cap_skeys = 0, cap_sidx = 0, cap_cs = 0, cap_ce = 0;
    void *sort_tmp = 0;
    size_t sort_tmp_cap = 0;
    /* sorted */
    double *sx = 0, *sy = 0, *lbuf = 0;
    uint64_t *sid = 0, *svoff = 0;
    uint32_t *svlen = 0;
    size_t cap_sx = 0, cap_sy = 0, cap_lbuf = 0, cap_sid = 0, cap_svoff = 0, cap_svlen = 0, lcap = 0;
    int first_row = 0, nb = 0;
    void free_all()
    {
        release(&x), release(&y), release(&vx), release(&vy), release(&id), release(&voff), release(&vlen);
        release(&col), release(&val), release(&keys), release(&idx), release(&skeys), release(&sidx);
        release(&cstart), release(&cend), release(&sort_tmp), release(&sx), release(&sy), release(&lbuf);
        release(&sid), release(&svoff), release(&svlen);
    }
};

/* The pair lists of one pass (own targets against a source set). */
struct dpass {
    uint32_t *cnt = 0, *pairs = 0;
    uint64_t *off = 0;
    unsigned long long *miss = 0;
    size_t cap_cnt = 0, cap_off = 0, cap_pairs = 0, cap_miss = 0;
    void *scan_tmp = 0;
    size_t scan_tmp_cap = 0;
    uint64_t total = 0;
    unsigned long long *htotal = 0;  /* page-locked copy of the total (pairs_count) */
    bool counted = false;            /* pairs_count queued, pairs_detect not yet */
    bool detected = false;           /* pairs_detect queued, pairs_similarity not yet */
    bool timed = false;              /* its events are recorded and not yet read */
    unsigned long long n_miss = 0;   /* cache misses computed by the similarity pass */
    unsigned long long n_mirror = 0; /* cache misses resolved from their mirror pair */
    void free_all()
    {
        release(&cnt), release(&pairs), release(&off), release(&miss), release(&scan_tmp);
    }
};

/* A page-locked staging buffer for host-to-device uploads from the (pageable) host stores: the
 * pieces are noted (h2d), then copied into it together on the stage threads and uploaded
 * asynchronously (stage_end); `done` marks when the device has read it (waited for before the
 * buffer is filled again). */
struct pstage {
    struct piece {
        void *dst;       /* on the device */
        const void *src; /* on the host */
        size_t n, at;    /* bytes, and where in buf */
    };
    static const int max_pieces = 16;
    piece pend[max_pieces];
    int n_pend = 0;
    char *buf = 0;
    size_t cap = 0, used = 0;
    cudaEvent_t done = 0;
    bool pending = false;
    void free_all()
    {
        if (done) cudaEventSynchronize(done), cudaEventDestroy(done);
        if (buf) dm_host_free_pinned(buf);
        buf = 0;
        done = 0;
        cap = used = 0;
    }
};

/* A page-locked buffer of at least `bytes` (contents not kept); grown to twice the need, as
 * page-locking is slow. */
int pinned_reserve(char **buf, size_t *cap, size_t bytes)
{
    if (bytes <= *cap && *buf) return DM_OK;
    if (*buf) dm_host_free_pinned(*buf);
    *buf = 0;
    *cap = 0;
    size_t c = 2 * bytes + 4096;
    void *q = NULL;
    FK_ALLOC_TRY(dm_host_alloc_pinned(&q, c));
    *buf = static_cast<char *>(q);
    *cap = c;
    return DM_OK;
}

/* Makes room for `bytes` in the staging buffer (after its previous upload finished). */
int stage_begin(pstage *ps, size_t bytes)
{
    if (!ps->done) DM_CUDA_TRY(cudaEventCreateWithFlags(&ps->done, cudaEventDisableTiming));
    if (ps->pending) DM_CUDA_TRY(cudaEventSynchronize(ps->done));
    ps->pending = false;
    ps->used = 0;
    ps->n_pend = 0;
    return pinned_reserve(&ps->buf, &ps->cap, bytes);
}

/* Uploads n bytes of host memory to dst: through the staging buffer when one is given (room
 * reserved by stage_begin; pieces 8-byte aligned; src is read and the copy queued by stage_end),
 * else through the multi-buffer up when given (dst complete after dm_dbuf_drain), else straight
 * from the host memory. */
int h2d(pstage *ps, void *dst, const void *src, size_t n, cudaStream_t st, dm_dbuf *up = NULL)
{
    if (n == 0) return DM_OK;
    if (!ps && up) return dm_dbuf_upload(up, dst, src, n);
    if (!ps) {
        DM_CUDA_TRY(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, st));
        return DM_OK;
    }
    DM_ASSERT(ps->used + n <= ps->cap && ps->n_pend < pstage::max_pieces);
    ps->pend[ps->n_pend++] = {dst, src, n, ps->used}; /* uploaded on stage_end's stream (the same st) */
    ps->used += (n + 7) & ~(size_t)7;
    return DM_OK;
}

/* The noted pieces into the staging buffer, all at once on the stage threads (one thread each
 * copied them before: 9 small copies a step for the halo), then their uploads. */
int stage_end(pstage *ps, cudaStream_t st)
{
    if (!ps) return DM_OK;
    dm_copy_piece cp[pstage::max_pieces];
    for (int k = 0; k < ps->n_pend; k++) cp[k] = {ps->buf + ps->pend[k].at, ps->pend[k].src, ps->pend[k].n};
    dm_mem_copy_pieces(cp, (size_t)ps->n_pend, dm_stage_threads());
    for (int k = 0; k < ps->n_pend; k++) {
        const pstage::piece &q = ps->pend[k];
        DM_CUDA_TRY(cudaMemcpyAsync(q.dst, ps->buf + q.at, q.n, cudaMemcpyHostToDevice, st));
    }
    ps->n_pend = 0;
    DM_CUDA_TRY(cudaEventRecord(ps->done, st));
    ps->pending = true;
    return DM_OK;
}

inline size_t up8(size_t n) { return (n + 7) & ~(size_t)7; }

/* The first n documents of a device set with their labels cl (device), for the centroid kernels. */
inline fk_labelled_docs labelled(const dset *d, size_t n, const int32_t *cl)
{
    return {d->voff, d->vlen, d->col, d->val, n, cl};
}

struct dstate {
    cudaStream_t sa = 0, sb = 0;
    dm_flock_xchg *xp = 0; /* an exchange in flight while the host waits for the device (wait_stream) */
    pstage halo_stage, mig_stage; /* uploads of the halo and of the migration arrivals */
    cudaEvent_t own_done = 0, halo_done = 0;
    cudaEvent_t ev[17] = {0}; /* ev[16]: after the pair cache's new rows */
    dset own, halo;
    dpass pown, phalo;
    dm_flock_acc *acc = 0;
    size_t cap_acc = 0;
    uint64_t *cache[2] = {0, 0};
    size_t cap_cache[2] = {0, 0};
    int cur = 0; /* cache[cur] holds the last iteration's decisions */
    uint32_t stamp = 0; /* the iteration mod 256: this iteration's pair-cache entries */
    bool carry = true;  /* older decisions carried into the new rows (DOCMINE_FLOCK_CACHE_CARRY=0: not) */
    int *fill = 0;
    size_t cap_fill = 0;
    unsigned long long *ctr = 0; /* [0] pairs [1] similar [2] seam [3] - [4, 5] miss counters, [6, 7] mirrors */
    int *err = 0;
    unsigned long long *hctr = 0; /* pinned: [0, 8) mirror of ctr, [8, 10) the passes' pair totals,
                                   * [10, 14) their miss and mirror counts */
    size_t host_pool_seen = 0;    /* own pool entries already on the device */
    uint64_t host_compactions = 0;
    size_t halo_pool_seen = 0;    /* halo pool entries already on the device (cached vectors) */
    uint64_t halo_compactions = UINT64_MAX;
    /* the boids that leave the device each step (halo, migrants): flags, their compaction and the
     * host copies of what was fetched */
    double *cut = 0;
    size_t cap_cut = 0;
    uint32_t *sflag = 0, *soff = 0, *sidx = 0, *moves = 0;
    size_t cap_moves = 0;
    uint8_t *sdirs = 0, *sodirs = 0;
    double *sstate = 0;
    size_t cap_sflag = 0, cap_soff = 0, cap_sidx = 0, cap_sdirs = 0, cap_sodirs = 0, cap_sstate = 0;
    void *sscan = 0;
    size_t cap_sscan = 0;
    /* host side of a selection, page-locked (the copies from the device run at full speed and
     * without a staging copy by the driver): state (4 doubles a boid), indices, directions */
    char *hsel = 0;
    size_t cap_hsel = 0;
    size_t sel_n = 0; /* own boids when the selection was queued (select_queue) */
    /* the clusters (freed by dm_flock_edges_cuda and with the state): the edges, the centroid
     * attachment's table, norms, labels in and out, and the centroid sums' table and marks */
    uint32_t *ecnt = 0, *eown = 0, *enbr = 0;
    uint64_t *eoff = 0;
    void *escan = 0;
    size_t cap_ecnt = 0, cap_eown = 0, cap_enbr = 0, cap_eoff = 0, cap_escan = 0;
    double *ctable = 0, *cnorm = 0;
    int32_t *acl = 0, *ares = 0;
    unsigned long long *csum = 0;
    uint8_t *chas = 0;
    size_t cap_ctable = 0, cap_cnorm = 0, cap_acl = 0, cap_ares = 0, cap_csum = 0, cap_chas = 0;
    void free_clusters()
    {
        release(&ecnt), release(&eown), release(&enbr), release(&eoff), release(&escan);
        release(&ctable), release(&cnorm), release(&acl), release(&ares), release(&csum), release(&chas);
        cap_ecnt = cap_eown = cap_enbr = cap_eoff = cap_escan = 0;
        cap_ctable = cap_cnorm = cap_acl = cap_ares = cap_csum = cap_chas = 0;
    }
    void free_all()
    {
        free_clusters();
        if (hsel) dm_host_free_pinned(hsel);
        hsel = 0;
        cap_hsel = 0;
        own.free_all(), halo.free_all(), pown.free_all(), phalo.free_all();
        halo_stage.free_all(), mig_stage.free_all();
        release(&moves), release(&cut), release(&sflag), release(&soff), release(&sidx), release(&sdirs), release(&sodirs);
        release(&sstate), release(&sscan);
        release(&acc), release(&cache[0]), release(&cache[1]), release(&fill), release(&ctr), release(&err);
        if (hctr) dm_host_free_pinned(hctr);
        hctr = 0;
        if (sa) cudaStreamDestroy(sa);
        if (sb) cudaStreamDestroy(sb);
        if (own_done) cudaEventDestroy(own_done);
        if (halo_done) cudaEventDestroy(halo_done);
        for (int i = 0; i < 17; i++)
            if (ev[i]) cudaEventDestroy(ev[i]);
    }
};

/* Stream A, the timing events, the device counters and their page-locked mirror (what every
 * pass needs; the simulation adds stream B and its events). */
int dstate_open(dstate *s)
{
    DM_CUDA_TRY(cudaStreamCreateWithFlags(&s->sa, cudaStreamNonBlocking));
    for (int i = 0; i < 17; i++) DM_CUDA_TRY(cudaEventCreate(&s->ev[i]));
    size_t cap8 = 0, cap1 = 0;
    DM_TRY(ensure(&s->ctr, &cap8, 8));
    DM_CUDA_TRY(cudaMemset(s->ctr, 0, 8 * 8));
    DM_TRY(ensure(&s->err, &cap1, 1));
    DM_CUDA_TRY(cudaMemset(s->err, 0, sizeof(int)));
    void *h = NULL;
    FK_ALLOC_TRY(dm_host_alloc_pinned(&h, 8 * 16));
    s->hctr = static_cast<unsigned long long *>(h);
    return DM_OK;
}

/* ================================================================ kernel registry ============= */

enum {
    K_KEYS, K_BOUNDS, K_GATHER, K_COUNT, K_DETECT, K_SIM, K_FORCES, K_UPDATE, K_MOVE, K_FLAGS, K_PICK,
    K_EDGES, K_ATTACH, K_CSUMS, /* the clusters */
    K_BUILD,                    /* the pair cache's new rows from the last ones, before the forces */
    K_N
};
extern const dm_tune_kernel g_kernels[K_N];
int g_forced[K_N]; /* instance + 1 forced by the tests (0: the tuner's choice) */

const dm_tune_instance *pick(int k, size_t n)
{
    const dm_tune_kernel *kd = &g_kernels[k];
    if (g_forced[k] > 0 && g_forced[k] <= kd->n_instances) return &kd->instances[g_forced[k] - 1];
    return dm_tune_select(kd, n ? n : 1);
}

/* ================================================================ pipeline =================== */

int upload_set_via(dset *d, const dm_flock_store *h, cudaStream_t st, size_t vectors_from, size_t pool_slack,
                   pstage *ps, dm_dbuf *up);

/* Uploads a host store. The vector pool gets room for pool_slack more entries when it is
 * (re)allocated (arrivals on several ranks; 0 for one rank, whose pool never grows). ps: stage the
 * copies through that page-locked buffer (NULL: a whole store, as at the start: through a
 * multi-buffer of pinned pieces filled by the threads, complete on return, when it is large). */
int upload_set(dset *d, const dm_flock_store *h, cudaStream_t st, size_t vectors_from, size_t pool_slack,
               pstage *ps = NULL)
{
    if (!ps) {
        /* 0.45-0.55 s for 3.2 GB from pageable memory at 1M documents (bench/RESULTS.md, session 16) */
        size_t bytes = 52 * h->n + 8 * (h->pool > vectors_from ? h->pool - vectors_from : 0);
        if (bytes >= ((size_t)64 << 20)) {
            dm_dbuf up;
            FK_ALLOC_TRY(dm_dbuf_init(&up, 4, (size_t)32 << 20, 0));
            int rc = upload_set_via(d, h, st, vectors_from, pool_slack, NULL, &up);
            int rd = dm_dbuf_drain(&up);
            dm_dbuf_free(&up);
            return rc != DM_OK ? rc : rd;
        }
    }
    return upload_set_via(d, h, st, vectors_from, pool_slack, ps, NULL);
}

/* upload_set's copies: through ps, or the multi-buffer up, or straight. */
int upload_set_via(dset *d, const dm_flock_store *h, cudaStream_t st, size_t vectors_from, size_t pool_slack,
                   pstage *ps, dm_dbuf *up)
{
    size_t n = h->n;
    DM_TRY(ensure(&d->x, &d->cap_x, n));
    DM_TRY(ensure(&d->y, &d->cap_y, n));
    DM_TRY(ensure(&d->vx, &d->cap_vx, n));
    DM_TRY(ensure(&d->vy, &d->cap_vy, n));
    DM_TRY(ensure(&d->id, &d->cap_id, n));
    DM_TRY(ensure(&d->voff, &d->cap_voff, n));
    DM_TRY(ensure(&d->vlen, &d->cap_vlen, n));
    d->n = n;
    /* the vector pool: entries [vectors_from, pool) are new (0: everything) */
    size_t pool = h->pool;
    if (!d->col) vectors_from = 0;
    if (vectors_from > d->pool_n) vectors_from = 0;
    if (pool > d->pool_cap || !d->col) {
        /* growing keeps the entries already on the device (a copy on the device, instead of
         * uploading the whole pool again) */
        size_t c = pool + pool_slack + 1024;
        DM_TRY(ensure_keep(&d->col, &d->cap_col, c, vectors_from, st, true));
        DM_TRY(ensure_keep(&d->val, &d->cap_val, c, vectors_from, st, true));
        d->pool_cap = d->cap_col < d->cap_val ? d->cap_col : d->cap_val;
    }
    size_t nv = pool > vectors_from ? pool - vectors_from : 0;
    if (ps) DM_TRY(stage_begin(ps, 6 * up8(8 * n) + up8(4 * n) + 2 * up8(4 * nv)));
    if (n) {
        DM_TRY(h2d(ps, d->x, h->x, 8 * n, st, up));
        DM_TRY(h2d(ps, d->y, h->y, 8 * n, st, up));
        DM_TRY(h2d(ps, d->vx, h->vx, 8 * n, st, up));
        DM_TRY(h2d(ps, d->vy, h->vy, 8 * n, st, up));
        DM_TRY(h2d(ps, d->id, h->id, 8 * n, st, up));
        DM_TRY(h2d(ps, d->voff, h->voff, 8 * n, st, up));
        DM_TRY(h2d(ps, d->vlen, h->vlen, 4 * n, st, up));
    }
    if (nv) {
        DM_TRY(h2d(ps, d->col + vectors_from, h->col + vectors_from, 4 * nv, st, up));
        DM_TRY(h2d(ps, d->val + vectors_from, h->val + vectors_from, 4 * nv, st, up));
    }
    DM_TRY(stage_end(ps, st));
    d->pool_n = pool;
    return DM_OK;
}

/* Uploads the halo store: the boids' states and offsets, and of the vector pool only the entries
 * appended since the last upload (the halo keeps the vectors of documents that stay in it,
 * dm_flock_halo_unpack), everything after a compaction or clear of the host pool. The pool gets
 * room to double before it is reallocated (which copies it all). */
int upload_halo(dm_flock_sim *sim, dstate *s, cudaStream_t st)
{
    const dm_flock_store *h = &sim->halo;
    size_t from = s->halo_pool_seen;
    if (h->compactions != s->halo_compactions || from > h->pool) from = 0;
    DM_TRY(upload_set(&s->halo, h, st, from, h->pool + h->pool / 4, &s->halo_stage));
    s->halo_pool_seen = h->pool;
    s->halo_compactions = h->compactions;
    return DM_OK;
}

int sort_pairs(dset *d, size_t n, int bits, cudaStream_t st)
{
#if DM_FLOCK_HAVE_SORTING_CUDA
    size_t bytes = 0;
    DM_TRY(dm_sort_pairs_u32_cuda(NULL, &bytes, d->skeys, d->sidx, d->keys, d->idx, n, 0, bits, st));
    DM_TRY(ensure(reinterpret_cast<char **>(&d->sort_tmp), &d->sort_tmp_cap, bytes ? bytes : 1));
    return dm_sort_pairs_u32_cuda(d->sort_tmp, &bytes, d->skeys, d->sidx, d->keys, d->idx, n, 0, bits, st);
#else
    /* the sorting module's CUDA backend is not in this build: CUB directly, same contract */
    size_t bytes = 0;
    DM_CUDA_TRY(cub::DeviceRadixSort::SortPairs(NULL, bytes, d->keys, d->skeys, d->idx, d->sidx, (int)n, 0, bits, st));
    DM_TRY(ensure(reinterpret_cast<char **>(&d->sort_tmp), &d->sort_tmp_cap, bytes ? bytes : 1));
    DM_CUDA_TRY(cub::DeviceRadixSort::SortPairs(d->sort_tmp, bytes, d->keys, d->skeys, d->idx, d->sidx, (int)n, 0,
                                                bits, st));
    return DM_OK;
#endif
}

int bits_for(uint64_t v)
{
    int b = 1;
    while (b < 32 && (v >> b) != 0) b++;
    return b;
}

/* Grid of a set: keys, sort, bounds, gather into layout. */
int build_grid(dstate *s, dset *d, const dm_flock_params &p, const dm_flock_window &w, int layout, cudaStream_t st)
{
    size_t n = d->n;
    size_t cells = (size_t)p.C * (size_t)w.nb;
    d->first_row = w.first_row;
    d->nb = w.nb;
    DM_TRY(ensure(&d->keys, &d->cap_keys, n));
    DM_TRY(ensure(&d->idx, &d->cap_idx, n));
    DM_TRY(ensure(&d->skeys, &d->cap_skeys, n));
    DM_TRY(ensure(&d->sidx, &d->cap_sidx, n));
    DM_TRY(ensure(&d->cstart, &d->cap_cs, cells));
    DM_TRY(ensure(&d->cend, &d->cap_ce, cells));
    size_t lcap = (n + FK_TILE - 1) / FK_TILE * FK_TILE;
    DM_TRY(ensure(&d->sx, &d->cap_sx, n));
    DM_TRY(ensure(&d->sy, &d->cap_sy, n));
    DM_TRY(ensure(&d->sid, &d->cap_sid, n));
    DM_TRY(ensure(&d->svoff, &d->cap_svoff, n));
    DM_TRY(ensure(&d->svlen, &d->cap_svlen, n));
    DM_TRY(ensure(&d->lbuf, &d->cap_lbuf, 4 * (lcap ? lcap : FK_TILE)));
    d->lcap = lcap;
    DM_CUDA_TRY(cudaMemsetAsync(d->cstart, 0, 4 * cells, st));
    DM_CUDA_TRY(cudaMemsetAsync(d->cend, 0, 4 * cells, st));
    if (n == 0) return DM_OK;
    fk_keys_args ka = {d->x, d->y, n, p, w.first_row, w.nb, d->keys, d->idx, s->err};
    DM_TRY(pick(K_KEYS, n)->launch(&ka, n, st));
    DM_TRY(sort_pairs(d, n, bits_for(cells), st));
    fk_bounds_args ba = {d->skeys, n, d->cstart, d->cend};
    DM_TRY(pick(K_BOUNDS, n)->launch(&ba, n, st));
    fk_gather_args ga = {d->sidx, d->id, d->voff, d->vlen, d->x, d->y, d->vx, d->vy, n, d->sx, d->sy, d->sid,
                         d->svoff, d->svlen, d->lbuf, layout, lcap};
    DM_TRY(pick(K_GATHER, n)->launch(&ga, n, st));
    return DM_OK;
}

fk_pass_args pass_args(dstate *s, dpass *ps, const dset *t, const dset *src, const dm_flock_params &p, int same)
{
    fk_pass_args a;
    memset(&a, 0, sizeof a);
    a.p = p;
    a.first_row = src->first_row;
    a.nb = src->nb;
    a.n_targets = t->n;
    a.tx = t->sx;
    a.ty = t->sy;
    a.tidx = t->sidx;
    a.tid = t->sid;
    a.sx = src->sx;
    a.sy = src->sy;
    a.sid = src->sid;
    a.cstart = src->cstart;
    a.cend = src->cend;
    a.same = same;
    a.cnt = ps->cnt;
    a.off = ps->off;
    a.pairs = ps->pairs;
    a.cache = s->cache[s->cur];
    a.miss = ps->miss;
    a.n_miss = &s->ctr[same ? 4 : 5];
    a.n_mirror = &s->ctr[same ? 6 : 7];
    a.total = ps->total;
    return a;
}

/* Waits for stream st. While an exchange is in flight (s->xp) it keeps the exchange moving: MPI
 * moves a large message only inside MPI calls, so a halo posted before the host waits for the
 * device would otherwise travel only once the host reaches dm_flock_xchg_end. */
cudaError_t wait_stream(dstate *s, cudaStream_t st)
{
    if (!s->xp) return cudaStreamSynchronize(st);
    cudaError_t e;
    while ((e = cudaStreamQuery(st)) == cudaErrorNotReady) dm_flock_xchg_progress(s->xp);
    return e;
}

/* Count, scan, detect and resolve the similarity of one pass: the pair lists are complete and
 * every pair's state is similar or dissimilar once stream st gets past the work enqueued (the
 * host waits for the counts only, so that it can do the exchange while the similarity runs;
 * pass_times then gives the kernels' times). In three parts, each queueing its kernels and the
 * copy of what the next needs to know to page-locked memory; the next waits for stream st (which
 * must get nothing else in between), so that the host may do other work while the kernels run:
 * pairs_count (counts, their total), pairs_detect (pair lists, cache lookups, the miss counts),
 * pairs_similarity (the misses' similarities). */
int pairs_count(dstate *s, dpass *ps, const dset *t, const dset *src, const dm_flock_params &p, int same,
                cudaStream_t st)
{
    size_t n = t->n;
    DM_TRY(ensure(&ps->cnt, &ps->cap_cnt, n + 1));
    DM_TRY(ensure(&ps->off, &ps->cap_off, n + 1));
    ps->total = 0;
    ps->n_miss = ps->n_mirror = 0;
    ps->counted = ps->detected = false;
    if (n == 0 || src->n == 0) {
        if (n) DM_CUDA_TRY(cudaMemsetAsync(ps->cnt, 0, 4 * (n + 1), st));
        if (n) DM_CUDA_TRY(cudaMemsetAsync(ps->off, 0, 8 * (n + 1), st));
        return DM_OK;
    }
    cudaEvent_t e0 = s->ev[same ? 0 : 4];
    DM_CUDA_TRY(cudaEventRecord(e0, st));
    DM_CUDA_TRY(cudaMemsetAsync(ps->cnt + n, 0, 4, st));
    fk_pass_args a = pass_args(s, ps, t, src, p, same);
    DM_TRY(pick(K_COUNT, n)->launch(&a, n, st));
    size_t bytes = 0;
    DM_CUDA_TRY(cub::DeviceScan::ExclusiveScan(NULL, bytes, ps->cnt, ps->off, cuda::std::plus<uint64_t>(),
                                               (uint64_t)0, (int)(n + 1), st));
    DM_TRY(ensure(reinterpret_cast<char **>(&ps->scan_tmp), &ps->scan_tmp_cap, bytes ? bytes : 1));
    DM_CUDA_TRY(cub::DeviceScan::ExclusiveScan(ps->scan_tmp, bytes, ps->cnt, ps->off, cuda::std::plus<uint64_t>(),
                                               (uint64_t)0, (int)(n + 1), st));
    ps->htotal = &s->hctr[same ? 8 : 9]; /* page-locked: the copy does not block the host */
    DM_CUDA_TRY(cudaMemcpyAsync(ps->htotal, ps->off + n, 8, cudaMemcpyDeviceToHost, st));
    ps->counted = true;
    return DM_OK;
}

int pairs_detect(dstate *s, dpass *ps, const dset *t, const dset *src, const dm_flock_params &p, int same,
                 cudaStream_t st)
{
    if (!ps->counted) return DM_OK; /* no targets or no sources */
    ps->counted = false;
    cudaEvent_t e1 = s->ev[same ? 1 : 5];
    DM_CUDA_TRY(wait_stream(s, st));
    uint64_t total = *ps->htotal;
    if (total >= ((uint64_t)1 << 32) || src->n >= ((size_t)1 << 30))
        return DM_ERR(DM_ERR_UNSUPPORTED, "flock: %llu neighbour pairs on a rank (limit 2^32); use more ranks",
                      (unsigned long long)total);
    ps->total = total;
    DM_TRY(ensure(&ps->pairs, &ps->cap_pairs, total ? total : 1));
    DM_TRY(ensure(&ps->miss, &ps->cap_miss, total ? total : 1));
    fk_pass_args a = pass_args(s, ps, t, src, p, same);
    size_t n = t->n;
    DM_CUDA_TRY(cudaMemsetAsync(a.n_miss, 0, 8, st));
    DM_CUDA_TRY(cudaMemsetAsync(a.n_mirror, 0, 8, st));
    DM_TRY(pick(K_DETECT, n)->launch(&a, n, st));
    /* the miss counts (page-locked: the copies do not block the host) */
    unsigned long long *nm = &s->hctr[same ? 10 : 12];
    DM_CUDA_TRY(cudaMemcpyAsync(&nm[0], a.n_miss, 8, cudaMemcpyDeviceToHost, st));
    DM_CUDA_TRY(cudaMemcpyAsync(&nm[1], a.n_mirror, 8, cudaMemcpyDeviceToHost, st));
    DM_CUDA_TRY(cudaEventRecord(e1, st));
    ps->detected = true;
    return DM_OK;
}

int pairs_similarity(dstate *s, dpass *ps, const dset *t, const dset *src, const dm_flock_params &p, int same,
                     cudaStream_t st)
{
    if (!ps->detected) return DM_OK;
    ps->detected = false;
    cudaEvent_t e2 = s->ev[same ? 2 : 6];
    DM_CUDA_TRY(wait_stream(s, st));
    const unsigned long long *nm = &s->hctr[same ? 10 : 12];
    uint64_t total = ps->total;
    ps->n_miss = nm[0];
    ps->n_mirror = nm[1];
    DM_ASSERT(nm[0] + nm[1] <= total);
    /* the misses, then their mirrors (listed from the end of miss[]) from the decided pairs */
    fk_sim_args sa = {ps->miss, (size_t)nm[0], t->sidx, s->own.voff, s->own.vlen, s->own.col, s->own.val,
                      src->svoff, src->svlen, src->col, src->val, ps->pairs, p.threshold, 0, ps->off, ps->cnt};
    /* no launch for none: a selection at size class 0 would search (a first run) for nothing */
    if (nm[0]) DM_TRY(pick(K_SIM, (size_t)nm[0])->launch(&sa, (size_t)nm[0], st));
    sa.miss = ps->miss + (total - nm[1]);
    sa.n_miss = (size_t)nm[1];
    sa.mirror = 1;
    if (nm[1]) DM_TRY(pick(K_SIM, (size_t)nm[1])->launch(&sa, (size_t)nm[1], st));
    DM_CUDA_TRY(cudaEventRecord(e2, st));
    ps->timed = true; /* pass_times reads the events once the stream is synchronised */
    return DM_OK;
}

int pairs_pass(dstate *s, dpass *ps, const dset *t, const dset *src, const dm_flock_params &p, int same,
               cudaStream_t st)
{
    DM_TRY(pairs_count(s, ps, t, src, p, same, st));
    DM_TRY(pairs_detect(s, ps, t, src, p, same, st));
    return pairs_similarity(s, ps, t, src, p, same, st);
}

/* Adds a pass's detection and similarity times (its events must have completed). */
void pass_times(dstate *s, dpass *ps, int same, double *t_detect, double *t_sim)
{
    if (!ps->timed) return;
    ps->timed = false;
    cudaEvent_t e0 = s->ev[same ? 0 : 4], e1 = s->ev[same ? 1 : 5], e2 = s->ev[same ? 2 : 6];
    float ms1 = 0, ms2 = 0;
    if (cudaEventElapsedTime(&ms1, e0, e1) == cudaSuccess) *t_detect += ms1 / 1e3;
    if (cudaEventElapsedTime(&ms2, e1, e2) == cudaSuccess) *t_sim += ms2 / 1e3;
}

int forces_pass(dstate *s, dpass *ps, const dset *t, const dset *src, const dm_flock_params &p, int accumulate,
                const dm_tune_instance *fi, cudaStream_t st)
{
    size_t n = t->n;
    if (n == 0) return DM_OK;
    if (!accumulate || ps->total) {
        fk_forces_args fa = {p, n, t->sidx, t->lbuf, t->lcap, src->lbuf, src->lcap, src->sid, ps->cnt, ps->off,
                             ps->pairs, s->acc, accumulate, s->cache[1 - s->cur], s->fill, s->ctr, s->stamp};
        DM_TRY(fi->launch(&fa, n, st));
    }
    return DM_OK;
}

int ensure_own_buffers(dstate *s, size_t n)
{
    DM_TRY(ensure(&s->acc, &s->cap_acc, n ? n : 1));
    DM_TRY(ensure(&s->fill, &s->cap_fill, n ? n : 1));
    for (int b = 0; b < 2; b++) {
        size_t old = s->cap_cache[b];
        uint64_t *prev = s->cache[b];
        if (n * FK_CACHE <= old && prev) continue;
        /* grow keeping the rows (the cache of the last iteration is read next) */
        size_t c = (n + n / 16 + 256) * FK_CACHE;
        void *q = NULL;
        FK_ALLOC_TRY(dm_device_alloc(&q, c * 8));
        cudaError_t e = cudaMemsetAsync(q, 0, c * 8, s->sa);
        if (e == cudaSuccess && prev) e = cudaMemcpyAsync(q, prev, old * 8, cudaMemcpyDeviceToDevice, s->sa);
        if (e != cudaSuccess) { /* the new block is not kept: freed, not leaked */
            retire(q);
            return DM_ERR(DM_ERR_CUDA, "flock: growing the pair cache: %s", cudaGetErrorString(e));
        }
        if (prev) retire(prev);
        s->cache[b] = static_cast<uint64_t *>(q);
        s->cap_cache[b] = c;
    }
    return DM_OK;
}

int read_counters(dm_flock_sim *sim, dstate *s)
{
    DM_CUDA_TRY(cudaMemcpyAsync(s->hctr, s->ctr, 8 * 6, cudaMemcpyDeviceToHost, s->sa));
    int herr = 0;
    DM_CUDA_TRY(cudaMemcpyAsync(&herr, s->err, sizeof herr, cudaMemcpyDeviceToHost, s->sa));
    DM_CUDA_TRY(cudaStreamSynchronize(s->sa));
    if (herr == 1) return DM_ERR(DM_ERR_CUDA, "flock: a boid outside its grid window (internal error)");
    if (herr) return DM_ERR(DM_ERR_CUDA, "flock: a boid moved further than one slice (internal error)");
    sim->stats.pairs += s->hctr[0];
    sim->stats.similar += s->hctr[1];
    sim->stats.seam_crossings += s->hctr[2];
    DM_CUDA_TRY(cudaMemsetAsync(s->ctr, 0, 8 * 3, s->sa));
    return DM_OK;
}

/* Selects own boids on the device - mode 0: the halo of the current plane (slice [lo, hi), height
 * H), mode 1: the boids that left the slice on the next plane (height H) - and fetches them into
 * *sel (ascending boid indices with their direction bits and their states, in the state's
 * buffers, valid until the next selection; the host store's states stay as they were: written
 * there, 2-3 x 10^4 boids scattered over the store cost about 1 ms a step, bench/RESULTS.md
 * session 32). In two parts on stream st: select_queue queues the kernels and the copy of the
 * count (buffers sized for every own boid, so nothing waits), select_finish waits for them and
 * fetches the selected boids (synchronised on return). Between the two the host may queue other
 * work, which the selection (stream B, high priority) does not hold up. */
int select_queue(dm_flock_sim *sim, dstate *s, int mode, double lo, double hi, double H, cudaStream_t st)
{
    size_t n = s->own.n;
    s->sel_n = n;
    if (n == 0) return DM_OK;
    DM_TRY(ensure(&s->sflag, &s->cap_sflag, n + 1));
    DM_TRY(ensure(&s->soff, &s->cap_soff, n + 1));
    DM_TRY(ensure(&s->sdirs, &s->cap_sdirs, n));
    DM_TRY(ensure(&s->sidx, &s->cap_sidx, n));
    DM_TRY(ensure(&s->sstate, &s->cap_sstate, 4 * n));
    DM_TRY(ensure(&s->sodirs, &s->cap_sodirs, n));
    DM_CUDA_TRY(cudaMemsetAsync(s->sflag + n, 0, 4, st));
    fk_flags_args fa = {s->own.y, n, mode, lo, hi, sim->margin, s->cut, sim->size, sim->rank, H,
                        s->sflag, s->sdirs, s->err};
    DM_TRY(pick(K_FLAGS, n)->launch(&fa, n, st));
    size_t bytes = 0;
    DM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(NULL, bytes, s->sflag, s->soff, (int)(n + 1), st));
    DM_TRY(ensure(reinterpret_cast<char **>(&s->sscan), &s->cap_sscan, bytes ? bytes : 1));
    DM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(s->sscan, bytes, s->sflag, s->soff, (int)(n + 1), st));
    fk_pick_args pa = {s->sflag, s->soff, n, s->own.x, s->own.y, s->own.vx, s->own.vy, s->sdirs,
                       s->sidx, s->sstate, s->sodirs};
    DM_TRY(pick(K_PICK, n)->launch(&pa, n, st));
    DM_CUDA_TRY(cudaMemcpyAsync(&s->hctr[6], s->soff + n, 4, cudaMemcpyDeviceToHost, st));
    DM_CUDA_TRY(cudaMemcpyAsync(&s->hctr[7], s->err, sizeof(int), cudaMemcpyDeviceToHost, st));
    return DM_OK;
}

int select_finish(dstate *s, dm_flock_sel *sel, cudaStream_t st)
{
    sel->idx = NULL;
    sel->dirs = NULL;
    sel->n = 0;
    sel->state = NULL;
    size_t n = s->sel_n;
    if (n == 0) return DM_OK;
    DM_ASSERT(n == s->own.n);
    dm_timer_start("flock.comm.select.wait");
    cudaError_t ce = cudaStreamSynchronize(st);
    dm_timer_stop("flock.comm.select.wait");
    DM_CUDA_TRY(ce);
    uint32_t m = 0;
    int herr = 0;
    memcpy(&m, &s->hctr[6], 4);
    memcpy(&herr, &s->hctr[7], sizeof herr);
    if (herr == 2) return DM_ERR(DM_ERR_CUDA, "flock: a boid moved further than one slice (internal error)");
    if (m == 0) return DM_OK;
    DM_TRY(pinned_reserve(&s->hsel, &s->cap_hsel, 37 * (size_t)m));
    double *state = reinterpret_cast<double *>(s->hsel);
    uint32_t *idx = reinterpret_cast<uint32_t *>(s->hsel + 32 * (size_t)m);
    uint8_t *od = reinterpret_cast<uint8_t *>(s->hsel + 36 * (size_t)m);
    dm_timer_start("flock.comm.select.fetch");
    const int failed = cudaMemcpyAsync(idx, s->sidx, 4 * (size_t)m, cudaMemcpyDeviceToHost, st) != cudaSuccess ||
                       cudaMemcpyAsync(state, s->sstate, 32 * (size_t)m, cudaMemcpyDeviceToHost, st) != cudaSuccess ||
                       cudaMemcpyAsync(od, s->sodirs, m, cudaMemcpyDeviceToHost, st) != cudaSuccess ||
                       cudaStreamSynchronize(st) != cudaSuccess;
    dm_timer_stop("flock.comm.select.fetch");
    if (failed) return DM_ERR(DM_ERR_CUDA, "flock: fetching the selected boids failed");
    sel->idx = idx;
    sel->dirs = od;
    sel->n = m;
    sel->state = state;
    return DM_OK;
}

int select_fetch(dm_flock_sim *sim, dstate *s, int mode, double lo, double hi, double H, dm_flock_sel *sel,
                 cudaStream_t st)
{
    sel->idx = NULL;
    sel->dirs = NULL;
    sel->n = 0;
    sel->state = NULL;
    DM_TRY(select_queue(sim, s, mode, lo, hi, H, st));
    return select_finish(s, sel, st);
}

/* After a migration decided on the host (dm_flock_store_remove's moves, arrivals appended), the
 * device applies the same moves to the boids and to the cache rows filled this iteration
 * (cache[1 - cur], read next), receives the arrivals and their vectors, and starts them with
 * empty cache rows. The device keeps the authoritative state of the boids that stayed. */
int mirror_after_migration(dm_flock_sim *sim, dstate *s, const dm_flock_migration *mig)
{
    dm_flock_store *h = &sim->own;
    dset *d = &s->own;
    cudaStream_t st = s->sa;
    size_t n = h->n, nk = mig->n_kept;
    /* 1. moves (before any growth: the sources lie beyond the kept boids) */
    if (mig->n_moved) {
        DM_TRY(ensure(&s->moves, &s->cap_moves, 2 * mig->n_moved));
        uint32_t *dsrc = s->moves, *ddst = dsrc + mig->n_moved;
        int rc = DM_OK;
        if (cudaMemcpyAsync(dsrc, mig->moved_src, 4 * mig->n_moved, cudaMemcpyHostToDevice, st) != cudaSuccess ||
            cudaMemcpyAsync(ddst, mig->moved_dst, 4 * mig->n_moved, cudaMemcpyHostToDevice, st) != cudaSuccess)
            rc = DM_ERR(DM_ERR_CUDA, "flock: copying the migration moves failed");
        fk_cache_move_args ma = {s->cache[1 - s->cur], dsrc, ddst, mig->n_moved, d->x, d->y, d->vx, d->vy,
                                 d->id, d->voff, d->vlen};
        if (rc == DM_OK) rc = pick(K_MOVE, mig->n_moved * FK_CACHE)->launch(&ma, mig->n_moved * FK_CACHE, st);
        /* the host's move lists are pageable (their copies are done when the calls return) */
        DM_TRY(rc);
    }
    /* 2. room for the arrivals, keeping the boids that stayed */
    DM_TRY(ensure_keep(&d->x, &d->cap_x, n, nk, st));
    DM_TRY(ensure_keep(&d->y, &d->cap_y, n, nk, st));
    DM_TRY(ensure_keep(&d->vx, &d->cap_vx, n, nk, st));
    DM_TRY(ensure_keep(&d->vy, &d->cap_vy, n, nk, st));
    DM_TRY(ensure_keep(&d->id, &d->cap_id, n, nk, st));
    DM_TRY(ensure_keep(&d->voff, &d->cap_voff, n, nk, st));
    DM_TRY(ensure_keep(&d->vlen, &d->cap_vlen, n, nk, st));
    d->n = n;
    /* 3. the arrivals (the host has their state from the messages) and 4. the vectors: after a
     * compaction of the host pool every offset changed (the host's are current for all boids);
     * else only new entries were appended. Staged through page-locked memory. */
    size_t pool = h->pool, from = s->host_pool_seen;
    int compacted = h->compactions != s->host_compactions;
    if (compacted) from = 0;
    if (from > pool) from = 0;
    size_t m = n - nk, nv = pool - from;
    pstage *ps = &s->mig_stage;
    DM_TRY(stage_begin(ps, 6 * up8(8 * m) + up8(4 * m) + (compacted ? up8(8 * n) + up8(4 * n) : 0) + 2 * up8(4 * nv)));
    if (m) {
        DM_TRY(h2d(ps, d->x + nk, h->x + nk, 8 * m, st));
        DM_TRY(h2d(ps, d->y + nk, h->y + nk, 8 * m, st));
        DM_TRY(h2d(ps, d->vx + nk, h->vx + nk, 8 * m, st));
        DM_TRY(h2d(ps, d->vy + nk, h->vy + nk, 8 * m, st));
        DM_TRY(h2d(ps, d->id + nk, h->id + nk, 8 * m, st));
        DM_TRY(h2d(ps, d->voff + nk, h->voff + nk, 8 * m, st));
        DM_TRY(h2d(ps, d->vlen + nk, h->vlen + nk, 4 * m, st));
    }
    if (compacted && n) {
        DM_TRY(h2d(ps, d->voff, h->voff, 8 * n, st));
        DM_TRY(h2d(ps, d->vlen, h->vlen, 4 * n, st));
    }
    if (pool > d->pool_cap || !d->col) {
        size_t c = pool + pool / 4 + 1024;
        DM_TRY(ensure_keep(&d->col, &d->cap_col, c, from, st, true));
        DM_TRY(ensure_keep(&d->val, &d->cap_val, c, from, st, true));
        d->pool_cap = d->cap_col < d->cap_val ? d->cap_col : d->cap_val;
    }
    if (nv) {
        DM_TRY(h2d(ps, d->col + from, h->col + from, 4 * nv, st));
        DM_TRY(h2d(ps, d->val + from, h->val + from, 4 * nv, st));
    }
    d->pool_n = pool;
    s->host_pool_seen = pool;
    s->host_compactions = h->compactions;
    /* 5. buffers per boid and the arrivals' empty cache rows */
    DM_TRY(ensure_own_buffers(s, n)); /* may grow the caches, keeping their rows */
    if (n > nk) DM_CUDA_TRY(cudaMemsetAsync(s->cache[1 - s->cur] + nk * FK_CACHE, 0, 8 * (n - nk) * FK_CACHE, st));
    DM_TRY(stage_end(ps, st)); /* the host store may change from now on: the device reads the stage */
    return DM_OK;
}

} // namespace

/* ================================================================ backend entry points ======== */

extern "C" int dm_flock_tune_register(void)
{
    for (int k = 0; k < K_N; k++) DM_TRY(dm_tune_register(&g_kernels[k]));
    return DM_OK;
}

extern "C" int dm_flock_cuda_force_instance(const char *kernel, int index)
{
    for (int k = 0; k < K_N; k++)
        if (strcmp(g_kernels[k].name, kernel) == 0) {
            if (index >= g_kernels[k].n_instances) return DM_ERR(DM_ERR_INVALID_ARG, "flock: no instance %d of %s", index, kernel);
            g_forced[k] = index < 0 ? 0 : index + 1;
            return DM_OK;
        }
    return DM_ERR(DM_ERR_INVALID_ARG, "flock: no kernel %s", kernel);
}

extern "C" int dm_flock_cuda_select_ahead(size_t n, int ranks)
{
    DM_TRY(dm_flock_tune_register());
    if (!n) n = 1;
    for (int k = 0; k < K_N; k++) {
        if (k == K_SIM || k == K_MOVE) continue; /* below; the moves' sizes are the migrations' */
        if (ranks < 2 && (k == K_FLAGS || k == K_PICK)) continue; /* the halo's */
        pick(k, n);
    }
    /* the misses and their mirrors: a first step's are all its pairs (~30 a boid), later ones a
     * few percent, the halo's fewer */
    const int lo = dm_tune_workload_class(n / 64), hi = dm_tune_workload_class(64 * n);
    for (int q = lo; q <= hi && q < 40; q++) pick(K_SIM, (size_t)1 << q);
    return DM_OK;
}

extern "C" int dm_flock_cuda_init(dm_flock_sim *sim)
{
    DM_TRY(dm_flock_cuda_select_ahead(sim->own.n, sim->size));
    dstate *s = new (std::nothrow) dstate();
    if (!s) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    sim->dev = s;
    const char *carry = getenv("DOCMINE_FLOCK_CACHE_CARRY");
    s->carry = !(carry && strcmp(carry, "0") == 0);
    DM_TRY(dstate_open(s));
    /* stream B at the highest priority: the halo selection it runs while stream A's similarity
     * kernel fills the device must not wait for that kernel's blocks (the host waits for it) */
    int prio_low = 0, prio_high = 0;
    DM_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&prio_low, &prio_high));
    DM_CUDA_TRY(cudaStreamCreateWithPriority(&s->sb, cudaStreamNonBlocking, prio_high));
    DM_CUDA_TRY(cudaEventCreateWithFlags(&s->own_done, cudaEventDisableTiming));
    DM_CUDA_TRY(cudaEventCreateWithFlags(&s->halo_done, cudaEventDisableTiming));
    DM_TRY(ensure(&s->cut, &s->cap_cut, (size_t)sim->size + 1));
    DM_CUDA_TRY(cudaMemcpy(s->cut, sim->cut, 8 * ((size_t)sim->size + 1), cudaMemcpyHostToDevice));
    DM_TRY(upload_set(&s->own, &sim->own, s->sa, 0, sim->size > 1 ? sim->own.pool / 4 : 0));
    s->host_pool_seen = sim->own.pool;
    s->host_compactions = sim->own.compactions;
    DM_TRY(ensure_own_buffers(s, sim->own.n));
    DM_CUDA_TRY(cudaMemsetAsync(s->cache[0], 0, 8 * s->cap_cache[0], s->sa));
    DM_CUDA_TRY(cudaStreamSynchronize(s->sa));
    sim->host_valid = 1;
    return DM_OK;
}

/* Also drops the tuning workloads' documents (bench_docs) and every other workload's host data
 * kept by the tuning cache: a run's tuning is over when its simulation ends, and a later search
 * builds them again. */
extern "C" void dm_flock_cuda_free(dm_flock_sim *sim)
{
    dm_wl_cache_clear();
    dstate *s = static_cast<dstate *>(sim->dev);
    if (!s) return;
    if (s->sa) cudaStreamSynchronize(s->sa);
    if (s->sb) cudaStreamSynchronize(s->sb);
    retired_free(true);
    s->free_all();
    delete s;
    sim->dev = NULL;
}

extern "C" int dm_flock_cuda_sync_host(dm_flock_sim *sim)
{
    dstate *s = static_cast<dstate *>(sim->dev);
    if (sim->host_valid) return DM_OK;
    dm_flock_store *h = &sim->own;
    DM_ASSERT(s->own.n == h->n);
    size_t n = h->n;
    if (n) {
        DM_CUDA_TRY(cudaMemcpyAsync(h->x, s->own.x, 8 * n, cudaMemcpyDeviceToHost, s->sa));
        DM_CUDA_TRY(cudaMemcpyAsync(h->y, s->own.y, 8 * n, cudaMemcpyDeviceToHost, s->sa));
        DM_CUDA_TRY(cudaMemcpyAsync(h->vx, s->own.vx, 8 * n, cudaMemcpyDeviceToHost, s->sa));
        DM_CUDA_TRY(cudaMemcpyAsync(h->vy, s->own.vy, 8 * n, cudaMemcpyDeviceToHost, s->sa));
    }
    DM_CUDA_TRY(cudaStreamSynchronize(s->sa));
    sim->host_valid = 1;
    return DM_OK;
}

/* This iteration's pair-cache rows of the n own boids empty, and their fills. */
int empty_rows(dstate *s, size_t n, cudaStream_t st)
{
    if (!n) return DM_OK;
    DM_CUDA_TRY(cudaMemsetAsync(s->cache[1 - s->cur], 0, 8 * n * FK_CACHE, st));
    DM_CUDA_TRY(cudaMemsetAsync(s->fill, 0, sizeof(int) * n, st));
    return DM_OK;
}

/* This iteration's pair-cache rows of the n own boids, before any forces pass: built from the
 * last ones (fk_cache_build, instance inst or the tuner's choice when NULL: their recent
 * decisions, and the fills), or empty with the carry off (DOCMINE_FLOCK_CACHE_CARRY=0). */
int new_rows(dstate *s, size_t n, cudaStream_t st, const dm_tune_instance *inst)
{
    if (!n) return DM_OK;
    if (s->carry) {
        fk_build_args a = {s->cache[s->cur], s->cache[1 - s->cur], s->fill, n, s->stamp};
        return (inst ? inst : pick(K_BUILD, n))->launch(&a, n, st);
    }
    return empty_rows(s, n, st);
}

/* Tests (flock_impl.h): the pair-cache rows the next step reads, decoded. */
extern "C" int dm_flock_cuda_cache_entries(dm_flock_sim *sim, dm_flock_cache_entry **out, size_t *n_out,
                                           size_t *fill_mismatch, int *limit)
{
    dstate *s = static_cast<dstate *>(sim->dev);
    *limit = FK_CACHE_LIMIT;
    *out = NULL;
    *n_out = 0;
    *fill_mismatch = 0;
    const size_t n = s->own.n;
    if (!n) return DM_OK;
    /* the copies below run on the legacy stream, which does not wait for the non-blocking streams:
     * after a migration, stream A may still be moving the rows and the boids (the step returns
     * without waiting for mirror_after_migration's work) */
    DM_CUDA_TRY(cudaStreamSynchronize(s->sa));
    DM_CUDA_TRY(cudaStreamSynchronize(s->sb));
    uint64_t *rows = static_cast<uint64_t *>(malloc(8 * n * FK_CACHE));
    uint64_t *id = static_cast<uint64_t *>(malloc(8 * n));
    int *fill = static_cast<int *>(malloc(sizeof(int) * n));
    dm_flock_cache_entry *e = static_cast<dm_flock_cache_entry *>(malloc(sizeof *e * n * FK_CACHE));
    int rc = rows && id && fill && e ? DM_OK : DM_ERR(DM_ERR_NOMEM, "flock: cache entries: out of memory");
    if (rc == DM_OK && (cudaMemcpy(rows, s->cache[s->cur], 8 * n * FK_CACHE, cudaMemcpyDeviceToHost) != cudaSuccess ||
                        cudaMemcpy(id, s->own.id, 8 * n, cudaMemcpyDeviceToHost) != cudaSuccess ||
                        cudaMemcpy(fill, s->fill, sizeof(int) * n, cudaMemcpyDeviceToHost) != cudaSuccess))
        rc = DM_ERR(DM_ERR_CUDA, "flock: cache entries: copy failed");
    size_t m = 0;
    for (size_t i = 0; rc == DM_OK && i < n; i++) {
        int c = 0;
        for (int k = 0; k < FK_CACHE; k++) {
            const uint64_t v = rows[i * FK_CACHE + k];
            if (!v) continue;
            e[m].doc = id[i];
            e[m].other = ((v & FK_KEY_MASK) >> 1) - 1;
            e[m].similar = (int)(v & 1);
            e[m].age = (int)((s->stamp - (uint32_t)(v >> FK_STAMP_SHIFT)) & 255u);
            m++;
            c++;
        }
        *fill_mismatch += c != fill[i];
    }
    free(rows);
    free(id);
    free(fill);
    if (rc != DM_OK) {
        free(e);
        return rc;
    }
    *out = e;
    *n_out = m;
    return DM_OK;
}

/* The own-own similarity and forces on stream A, once the detection's miss counts are known
 * (pairs_similarity waits for them). */
int queue_own(dstate *s, const dm_flock_params &p, const dm_tune_instance *fi)
{
    cudaStream_t a = s->sa;
    DM_TRY(pairs_similarity(s, &s->pown, &s->own, &s->own, p, 1, a));
    DM_CUDA_TRY(cudaEventRecord(s->ev[10], a));
    DM_TRY(forces_pass(s, &s->pown, &s->own, &s->own, p, 0, fi, a));
    DM_CUDA_TRY(cudaEventRecord(s->ev[7], a));
    DM_CUDA_TRY(cudaEventRecord(s->own_done, a));
    return DM_OK;
}

/* One iteration (see the file comment). */
extern "C" int dm_flock_step_cuda(dm_flock_sim *sim)
{
    dstate *s = static_cast<dstate *>(sim->dev);
    dm_flock_params p;
    DM_TRY(dm_flock_params_at(&p, sim, sim->iteration));
    dm_flock_window w;
    dm_flock_window_of(&w, sim, &p);
    const int multi = sim->size > 1;
    int rc = dm_flock_step_injected(sim);
    double t_grid = 0, t_detect = 0, t_sim = 0, t_forces = 0;

    /* 1. own-own grid on stream A */
    const dm_tune_instance *fi = pick(K_FORCES, sim->own.n);
    int layout = fi->policy.layout;
    size_t n = s->own.n;
    cudaStream_t a = s->sa, b = s->sb;
    if (rc == DM_OK) rc = ensure_own_buffers(s, n);
    s->stamp = (uint32_t)sim->iteration & 255u;
    if (rc == DM_OK && cudaEventRecord(s->ev[8], a) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "event");
    if (rc == DM_OK) rc = new_rows(s, n, a, NULL); /* its time is in flock.forces */
    if (rc == DM_OK && cudaEventRecord(s->ev[16], a) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "event");
    if (rc == DM_OK) rc = build_grid(s, &s->own, p, w, layout, a);
    if (rc == DM_OK && cudaEventRecord(s->ev[9], a) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "event");

    /* 2. own-own pair counts on stream A (then detection, similarity and forces, queued as the
     * host learns the sizes, between the steps of the halo exchange) */
    if (rc == DM_OK) rc = pairs_count(s, &s->pown, &s->own, &s->own, p, 1, a);

    /* 3. while A counts and detects, stream B (high priority, after the last step's work on A:
     * ev[8]) selects the halo boids and the host fetches their states; once the host has queued
     * the own-own similarity and forces on A it packs the halo boids with their vectors and posts
     * the exchange (both streams only read the positions). With sim->halo_first
     * (DOCMINE_FLOCK_HALO_FIRST=1, for comparisons) the host fetches, packs and posts the halo
     * first and queues the own-own detection, similarity and forces after: the halo leaves
     * sooner, and stream A waits when that takes longer than its pair counts. The detection's
     * timer (ev[0] to ev[1]) includes any wait of stream A for the host here. */
    dm_flock_xchg x;
    if (multi) {
        dm_flock_sel sel = {NULL, NULL, 0, NULL};
        double lo, hi;
        dm_flock_slice_bounds(sim, sim->rank, p.H, &lo, &hi);
        /* the selection's kernels first, then the own-own detection (queued once the host has the
         * pair total), then the wait for the selection: the detection does not wait for it */
        dm_timer_start("flock.comm"); /* selection and device-to-host copies feed the exchange */
        dm_timer_start("flock.comm.halo_select");
        const int fetch = !sim->host_valid;
        if (rc == DM_OK && fetch) {
            if (cudaStreamWaitEvent(b, s->ev[8], 0) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "wait");
            if (rc == DM_OK) rc = select_queue(sim, s, 0, lo, hi, p.H, b);
        }
        dm_timer_stop("flock.comm.halo_select");
        dm_timer_stop("flock.comm");
        if (rc == DM_OK && !sim->halo_first) rc = pairs_detect(s, &s->pown, &s->own, &s->own, p, 1, a);
        dm_timer_start("flock.comm");
        dm_timer_start("flock.comm.halo_select");
        if (rc == DM_OK && fetch) rc = select_finish(s, &sel, b);
        dm_timer_stop("flock.comm.halo_select");
        dm_timer_stop("flock.comm");
        dm_flock_trace(sim, DM_FT_HALO_SEL);
        /* the last step's status (dm_flock_sim_run): completed before this step's first
         * exchange, while the device detects; a failure reported there stops every rank here */
        int ra = dm_flock_agree_finish(sim);
        if (ra != DM_OK) {
            cudaStreamSynchronize(a);
            cudaStreamSynchronize(b);
            return ra;
        }
        /* the own-own similarity and forces on stream A as soon as the detection's miss counts
         * are in, before the halo is packed and posted: queued after the posting, they left
         * stream A idle 4-12 ms a step at 4 GPUs. The halo leaves a few ms later; on a host whose
         * halo packing is slow it then reaches the device after stream A's own-own work more
         * often, which costs less than the idle time did (bench/RESULTS.md, session 20) */
        if (sim->halo_first) {
            rc = dm_flock_halo_exchange_begin_sel(sim, &x, rc, sim->host_valid ? NULL : &sel);
            dm_flock_trace(sim, DM_FT_HALO_SENT);
            s->xp = &x; /* the halo travels while the host waits for the counts */
            if (rc == DM_OK) rc = pairs_detect(s, &s->pown, &s->own, &s->own, p, 1, a);
            if (rc == DM_OK) rc = queue_own(s, p, fi);
            s->xp = 0;
            dm_flock_trace(sim, DM_FT_OWN_QUEUED);
        } else {
            if (rc == DM_OK) rc = queue_own(s, p, fi);
            dm_flock_trace(sim, DM_FT_OWN_QUEUED);
            rc = dm_flock_halo_exchange_begin_sel(sim, &x, rc, sim->host_valid ? NULL : &sel);
            dm_flock_trace(sim, DM_FT_HALO_SENT);
        }
    } else {
        if (rc == DM_OK) rc = pairs_detect(s, &s->pown, &s->own, &s->own, p, 1, a);
        int ra = dm_flock_agree_finish(sim); /* one rank: nothing to wait for */
        if (rc == DM_OK) rc = ra;
        /* own-own similarity and forces on stream A */
        if (rc == DM_OK) rc = queue_own(s, p, fi);
        dm_flock_trace(sim, DM_FT_OWN_QUEUED);
    }

    /* 4. own-halo on stream B: the host completes the exchange and unpacks the halo while the
     * device still works through the own-own similarity and forces */
    if (multi) {
        int re = dm_flock_halo_exchange_end(sim, &x);
        if (rc == DM_OK) rc = re;
        dm_flock_trace(sim, DM_FT_HALO_RECV);
        dm_timer_start("flock.comm"); /* the halo's way to the device is communication too */
        dm_timer_start("flock.comm.halo_upload");
        if (rc == DM_OK) rc = upload_halo(sim, s, b);
        dm_timer_stop("flock.comm.halo_upload");
        dm_timer_stop("flock.comm");
        dm_flock_trace(sim, DM_FT_HALO_UP);
        if (rc == DM_OK && cudaEventRecord(s->ev[12], b) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "event");
        if (rc == DM_OK) rc = build_grid(s, &s->halo, p, w, layout, b);
        if (rc == DM_OK && cudaEventRecord(s->ev[13], b) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "event");
        /* the targets are the own boids in own-grid order: wait for that grid (stream A) */
        if (rc == DM_OK && cudaStreamWaitEvent(b, s->ev[9], 0) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "wait");
        if (rc == DM_OK) rc = pairs_pass(s, &s->phalo, &s->own, &s->halo, p, 0, b);
        if (rc == DM_OK && cudaStreamWaitEvent(b, s->own_done, 0) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "wait");
        if (rc == DM_OK && cudaEventRecord(s->ev[14], b) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "event");
        if (rc == DM_OK) rc = forces_pass(s, &s->phalo, &s->own, &s->halo, p, 1, fi, b);
        if (rc == DM_OK && cudaEventRecord(s->ev[15], b) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "event");
        if (rc == DM_OK && cudaEventRecord(s->halo_done, b) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "event");
        if (rc == DM_OK && cudaStreamWaitEvent(s->sa, s->halo_done, 0) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "wait");
    }

    /* 5. update (ev[3]: after stream A waited for the halo pass, so that the forces time holds
     * the kernels only; the wait for the exchange is in flock.comm on the host) */
    if (rc == DM_OK && cudaEventRecord(s->ev[3], s->sa) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "event");
    if (rc == DM_OK && n) {
        fk_update_args ua = {p, n, s->acc, s->own.x, s->own.y, s->own.vx, s->own.vy, &s->ctr[2]};
        rc = pick(K_UPDATE, n)->launch(&ua, n, s->sa);
    }
    if (rc == DM_OK && cudaEventRecord(s->ev[11], s->sa) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "event");
    if (rc == DM_OK) rc = read_counters(sim, s); /* synchronises stream A, after B's work */
    sim->stats.device_grows += retired_free();     /* the device is idle here (after a failure: waited for) */
    dm_flock_trace(sim, DM_FT_DEV_DONE);
    if (rc == DM_OK) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, s->ev[16], s->ev[9]) == cudaSuccess) t_grid += ms / 1e3;
        if (cudaEventElapsedTime(&ms, s->ev[8], s->ev[16]) == cudaSuccess) t_forces += ms / 1e3;
        if (multi && cudaEventElapsedTime(&ms, s->ev[12], s->ev[13]) == cudaSuccess) t_grid += ms / 1e3;
        if (cudaEventElapsedTime(&ms, s->ev[10], s->ev[7]) == cudaSuccess) t_forces += ms / 1e3;
        if (cudaEventElapsedTime(&ms, s->ev[3], s->ev[11]) == cudaSuccess) t_forces += ms / 1e3;
        if (multi && cudaEventElapsedTime(&ms, s->ev[14], s->ev[15]) == cudaSuccess) {
            t_forces += ms / 1e3;
            dm_timer_add("flock.forces.halo", ms / 1e3); /* after stream A's own forces: A waits */
        }
        /* the step on the device (grid to update), and with several ranks how long the halo kept
         * the device after stream A's own-own work: until the halo arrived (A idle unless the
         * halo pass overlapped it) and until the halo pass ended */
        if (cudaEventElapsedTime(&ms, s->ev[8], s->ev[11]) == cudaSuccess) dm_timer_add("flock.device.step", ms / 1e3);
        if (multi && cudaEventElapsedTime(&ms, s->ev[7], s->ev[12]) == cudaSuccess)
            dm_timer_add("flock.device.halo_late", ms > 0 ? ms / 1e3 : 0.0);
        if (multi && cudaEventElapsedTime(&ms, s->ev[7], s->ev[15]) == cudaSuccess)
            dm_timer_add("flock.device.halo_tail", ms > 0 ? ms / 1e3 : 0.0);
        pass_times(s, &s->pown, 1, &t_detect, &t_sim);
        if (multi) { /* the halo pass's share (stream B: it may overlap stream A's own pass) */
            double hd = 0, hs = 0;
            pass_times(s, &s->phalo, 0, &hd, &hs);
            dm_timer_add("flock.detect.halo", hd);
            dm_timer_add("flock.similarity.halo", hs);
            t_detect += hd;
            t_sim += hs;
        }
        dm_timer_add("flock.grid", t_grid);
        dm_timer_add("flock.detect", t_detect);
        dm_timer_add("flock.similarity", t_sim);
        dm_timer_add("flock.forces", t_forces);
        sim->stats.sim_cache_hits += (s->pown.total - s->pown.n_miss - s->pown.n_mirror) +
                                     (s->phalo.total - s->phalo.n_miss - s->phalo.n_mirror);
    }
    sim->host_valid = 0;

    /* 6. migration (several ranks, after every migrate_every-th iteration and the last): the
     * device finds the boids that left the slice, the host exchanges them (state fetched, vectors
     * from the host store), the device mirrors */
    if (multi && dm_flock_migrates(sim)) {
        dm_flock_sel sel = {NULL, NULL, 0, NULL};
        dm_timer_start("flock.comm");
        dm_timer_start("flock.comm.mig_select");
        if (rc == DM_OK) rc = select_fetch(sim, s, 1, 0, 0, p.H1, &sel, s->sa);
        dm_timer_stop("flock.comm.mig_select");
        dm_timer_stop("flock.comm");
        dm_flock_trace(sim, DM_FT_MIG_SEL);
        dm_flock_migration mig;
        /* the neighbours wait for the migration exchange even when this rank failed */
        rc = dm_flock_migrate_host_sel(sim, p.H1, rc, &mig, &sel);
        dm_flock_trace(sim, DM_FT_MIG_DONE);
        dm_timer_start("flock.comm");
        dm_timer_start("flock.comm.mirror");
        if (rc == DM_OK) rc = mirror_after_migration(sim, s, &mig);
        dm_timer_stop("flock.comm.mirror");
        dm_timer_stop("flock.comm");
        dm_flock_migration_free(&mig);
    }
    sim->halo_valid = 0; /* the halo was exchanged before the update */
    if (rc == DM_OK) {
        s->cur = 1 - s->cur; /* this iteration's decisions are read next */
        sim->iteration++;
    }
    return rc;
}

namespace {

/* The first half of the edges of a pass (a: its pair lists, n targets): each target's count of
 * similar pairs and their exclusive sums (s->eoff) by instance inst, and room on the device for
 * the *m edges. Synchronises st. */
int edges_count(dstate *s, fk_edges_args *a, size_t n, const dm_tune_instance *inst, cudaStream_t st, uint64_t *m)
{
    DM_TRY(ensure(&s->ecnt, &s->cap_ecnt, n + 1));
    DM_TRY(ensure(&s->eoff, &s->cap_eoff, n + 1));
    a->eoff = NULL;
    a->ecnt = s->ecnt;
    DM_CUDA_TRY(cudaMemsetAsync(s->ecnt + n, 0, 4, st));
    DM_TRY(inst->launch(a, n, st));
    size_t bytes = 0;
    DM_CUDA_TRY(cub::DeviceScan::ExclusiveScan(NULL, bytes, s->ecnt, s->eoff, cuda::std::plus<uint64_t>(),
                                               (uint64_t)0, (int)(n + 1), st));
    DM_TRY(ensure(reinterpret_cast<char **>(&s->escan), &s->cap_escan, bytes ? bytes : 1));
    DM_CUDA_TRY(cub::DeviceScan::ExclusiveScan(s->escan, bytes, s->ecnt, s->eoff, cuda::std::plus<uint64_t>(),
                                               (uint64_t)0, (int)(n + 1), st));
    DM_CUDA_TRY(cudaMemcpyAsync(m, s->eoff + n, 8, cudaMemcpyDeviceToHost, st));
    DM_CUDA_TRY(cudaStreamSynchronize(st));
    DM_TRY(ensure(&s->eown, &s->cap_eown, *m ? (size_t)*m : 1));
    DM_TRY(ensure(&s->enbr, &s->cap_enbr, *m ? (size_t)*m : 1));
    a->eown = s->eown;
    a->enbr = s->enbr;
    return DM_OK;
}

/* Appends a pass's similar pairs to out as edges (halo: the pass's source set): counted, summed
 * and written on the device (fk_edges), so that only the edges cross to the host. Synchronises
 * stream A. */
int edges_pass(dm_flock_edges *out, dstate *s, const dpass *ps, const dset *src, size_t n, uint8_t halo)
{
    cudaStream_t st = s->sa;
    if (!n || !src->n || !ps->total) { /* no pairs */
        DM_CUDA_TRY(cudaStreamSynchronize(st));
        return DM_OK;
    }
    fk_edges_args a = {ps->cnt, ps->off, ps->pairs, n, s->own.sidx, src->sidx, NULL, NULL, NULL, NULL};
    uint64_t m = 0;
    DM_TRY(edges_count(s, &a, n, pick(K_EDGES, n), st, &m));
    if (!m) return DM_OK;
    a.eoff = s->eoff;
    DM_TRY(pick(K_EDGES, n)->launch(&a, n, st));
    size_t c = out->n + (size_t)m;
    if (c > out->cap) {
        uint32_t *own = static_cast<uint32_t *>(dm_realloc(out->own, 4 * c));
        if (own) out->own = own;
        uint32_t *nbr = static_cast<uint32_t *>(dm_realloc(out->nbr, 4 * c));
        if (nbr) out->nbr = nbr;
        uint8_t *h = static_cast<uint8_t *>(dm_realloc(out->halo, c));
        if (h) out->halo = h;
        if (!own || !nbr || !h) {
            cudaStreamSynchronize(st);
            return DM_ERR(DM_ERR_NOMEM, "flock: out of memory for %zu edges", c);
        }
        out->cap = c;
    }
    DM_CUDA_TRY(cudaMemcpyAsync(out->own + out->n, s->eown, 4 * (size_t)m, cudaMemcpyDeviceToHost, st));
    DM_CUDA_TRY(cudaMemcpyAsync(out->nbr + out->n, s->enbr, 4 * (size_t)m, cudaMemcpyDeviceToHost, st));
    memset(out->halo + out->n, halo, (size_t)m);
    DM_CUDA_TRY(cudaStreamSynchronize(st));
    out->n = c;
    return DM_OK;
}

} // namespace

/* The edges of the final graph (own-own and own-halo, similar and within r), for the clusters. */
extern "C" int dm_flock_edges_cuda(dm_flock_edges *out, dm_flock_sim *sim, double threshold)
{
    memset(out, 0, sizeof *out);
    dstate *s = static_cast<dstate *>(sim->dev);
    DM_TRY(dm_flock_cuda_sync_host(sim));
    dm_flock_params p;
    DM_TRY(dm_flock_params_at(&p, sim, sim->iteration));
    dm_flock_window w;
    dm_flock_window_of(&w, sim, &p);
    int rc = DM_OK;
    if (!sim->halo_valid) {
        dm_flock_xchg x;
        rc = dm_flock_halo_exchange_begin(sim, &x, rc);
        int re = dm_flock_halo_exchange_end(sim, &x);
        if (rc == DM_OK) rc = re;
    }
    /* the pair cache holds decisions at the model's threshold: another one needs fresh ones */
    if (rc == DM_OK && threshold != p.threshold) {
        p.threshold = threshold;
        if (s->own.n && cudaMemset(s->cache[s->cur], 0, 8 * s->own.n * FK_CACHE) != cudaSuccess)
            rc = DM_ERR(DM_ERR_CUDA, "flock: clearing the pair cache failed");
    }
    double td = 0, ts = 0;
    size_t n = s->own.n;
    for (int pass = 0; pass < 2 && rc == DM_OK; pass++) {
        dset *src = pass == 0 ? &s->own : &s->halo;
        dpass *ps = pass == 0 ? &s->pown : &s->phalo;
        if (pass == 1) {
            if (sim->halo.n == 0) break;
            rc = upload_halo(sim, s, s->sa);
        }
        if (rc == DM_OK) rc = build_grid(s, src, p, w, DM_LAYOUT_SOA, s->sa);
        if (rc == DM_OK) rc = pairs_pass(s, ps, &s->own, src, p, pass == 0, s->sa);
        if (rc == DM_OK) rc = edges_pass(out, s, ps, src, n, (uint8_t)pass);
        if (rc != DM_OK) break;
        pass_times(s, ps, pass == 0, &td, &ts);
    }
    s->free_clusters();
    retired_free(); /* the passes synchronised stream A */
    if (rc != DM_OK) dm_flock_edges_free(out);
    return rc;
}

/* The dense centroid tables of the device's sums and attachment: at most this many bytes. */
#define FK_ATTACH_TABLE_MAX ((uint64_t)256 << 20)

extern "C" int dm_flock_centroid_sums_cuda_fits(int32_t k, uint64_t nterms)
{
    return k >= 1 && nterms <= FK_ATTACH_TABLE_MAX / 9 / (uint64_t)k;
}

extern "C" int dm_flock_centroid_sums_cuda(dm_flock_sim *sim, const int32_t *cl, int32_t k, uint64_t nterms,
                                           dm_flock_centroid_entry **loc, size_t *m)
{
    *loc = NULL;
    *m = 0;
    if (!dm_flock_centroid_sums_cuda_fits(k, nterms))
        return DM_ERR(DM_ERR_UNSUPPORTED, "flock: %d clusters x %llu terms do not fit the device's centroid sums", k,
                      (unsigned long long)nterms);
    dstate *s = static_cast<dstate *>(sim->dev);
    const size_t n = sim->own.n, cells = (size_t)nterms * (size_t)k;
    DM_ASSERT(s->own.n == n);
    if (n == 0 || cells == 0) return DM_OK;
    cudaStream_t st = s->sa;
    unsigned long long *sum = static_cast<unsigned long long *>(dm_malloc(8 * cells));
    uint8_t *has = static_cast<uint8_t *>(dm_malloc(cells));
    int rc = sum && has ? DM_OK : DM_ERR(DM_ERR_NOMEM, "flock: out of memory for the centroid sums");
    if (rc == DM_OK) rc = ensure(&s->csum, &s->cap_csum, cells, true);
    if (rc == DM_OK) rc = ensure(&s->chas, &s->cap_chas, cells, true);
    if (rc == DM_OK) rc = ensure(&s->acl, &s->cap_acl, n, true);
    if (rc == DM_OK && (cudaMemsetAsync(s->csum, 0, 8 * cells, st) != cudaSuccess ||
                        cudaMemsetAsync(s->chas, 0, cells, st) != cudaSuccess ||
                        cudaMemcpyAsync(s->acl, cl, 4 * n, cudaMemcpyHostToDevice, st) != cudaSuccess))
        rc = DM_ERR(DM_ERR_CUDA, "flock: preparing the centroid sums failed");
    fk_csums_args a = {labelled(&s->own, n, s->acl), s->csum, s->chas, nterms, k};
    if (rc == DM_OK) rc = pick(K_CSUMS, n)->launch(&a, n, st);
    if (rc == DM_OK && (cudaMemcpyAsync(sum, s->csum, 8 * cells, cudaMemcpyDeviceToHost, st) != cudaSuccess ||
                        cudaMemcpyAsync(has, s->chas, cells, cudaMemcpyDeviceToHost, st) != cudaSuccess))
        rc = DM_ERR(DM_ERR_CUDA, "flock: copying the centroid sums failed");
    if (cudaStreamSynchronize(st) != cudaSuccess && rc == DM_OK) rc = DM_ERR(DM_ERR_CUDA, "flock: sync failed");
    /* the cells some document has, in (term, cluster) order: sorted by key */
    size_t e = 0;
    for (size_t q = 0; rc == DM_OK && q < cells; q++) e += has[q] != 0;
    dm_flock_centroid_entry *out = NULL;
    if (rc == DM_OK) {
        out = static_cast<dm_flock_centroid_entry *>(dm_malloc(sizeof *out * (e ? e : 1)));
        if (!out) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for the centroid sums");
    }
    if (rc == DM_OK) {
        size_t j = 0;
        for (size_t q = 0; q < cells; q++)
            if (has[q]) out[j++] = {(uint64_t)(q / (size_t)k) << 32 | (uint64_t)(q % (size_t)k), (int64_t)sum[q]};
        *loc = out;
        *m = e;
    }
    dm_free(sum);
    dm_free(has);
    return rc;
}

extern "C" int dm_flock_attach_cuda_fits(const dm_flock_centroids *c)
{
    return c->k >= 1 && c->k <= 32 * FK_ATTACH_LANE && c->nterms <= FK_ATTACH_TABLE_MAX / 8 / (uint64_t)c->k;
}

extern "C" int dm_flock_attach_cuda(dm_flock_sim *sim, int32_t *res, const int32_t *cl, const dm_flock_centroids *c)
{
    if (!dm_flock_attach_cuda_fits(c))
        return DM_ERR(DM_ERR_UNSUPPORTED, "flock: %d clusters x %llu terms do not fit the device attachment", c->k,
                      (unsigned long long)c->nterms);
    dstate *s = static_cast<dstate *>(sim->dev);
    const size_t n = sim->own.n, k = (size_t)c->k, cells = (size_t)c->nterms * k;
    DM_ASSERT(s->own.n == n);
    if (n == 0) return DM_OK;
    /* the table: the entries' values at (term, cluster), 0 elsewhere */
    double *t = static_cast<double *>(dm_calloc(cells ? cells : 1, sizeof *t));
    if (!t) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory for the centroid table");
    for (uint64_t term = 0; term < c->nterms; term++)
        for (size_t e = c->tstart[term]; e < c->tstart[term + 1]; e++) t[term * k + (size_t)c->cluster[e]] = c->value[e];
    cudaStream_t st = s->sa;
    int rc = ensure(&s->ctable, &s->cap_ctable, cells ? cells : 1, true);
    if (rc == DM_OK) rc = ensure(&s->cnorm, &s->cap_cnorm, k, true);
    if (rc == DM_OK) rc = ensure(&s->acl, &s->cap_acl, n, true);
    if (rc == DM_OK) rc = ensure(&s->ares, &s->cap_ares, n, true);
    if (rc == DM_OK && ((cells && cudaMemcpyAsync(s->ctable, t, 8 * cells, cudaMemcpyHostToDevice, st) != cudaSuccess) ||
                        cudaMemcpyAsync(s->cnorm, c->norm, 8 * k, cudaMemcpyHostToDevice, st) != cudaSuccess ||
                        cudaMemcpyAsync(s->acl, cl, 4 * n, cudaMemcpyHostToDevice, st) != cudaSuccess))
        rc = DM_ERR(DM_ERR_CUDA, "flock: uploading the centroids failed");
    fk_attach_args a = {labelled(&s->own, n, s->acl), s->ares, s->ctable, s->cnorm, c->nterms, c->k};
    if (rc == DM_OK) rc = pick(K_ATTACH, n)->launch(&a, n, st);
    if (rc == DM_OK && cudaMemcpyAsync(res, s->ares, 4 * n, cudaMemcpyDeviceToHost, st) != cudaSuccess)
        rc = DM_ERR(DM_ERR_CUDA, "flock: copying the attachment failed");
    if (cudaStreamSynchronize(st) != cudaSuccess && rc == DM_OK) rc = DM_ERR(DM_ERR_CUDA, "flock: sync failed");
    dm_free(t);
    return rc;
}

/* ================================================================ bench hooks (tuner) ======== */

namespace {

/* A seeded flock problem of nb boids on the device (one rank, whole plane), advanced to the input
 * of kernel k: the kernels before it run with their default instances. */
struct bench {
    int k;
    size_t n, cap;    /* work units */
    dstate *s;
    dm_flock_params p;
    dm_flock_window w;
    /* inputs kept pristine for kernels that write them */
    double *x0, *y0, *vx0, *vy0;
    uint32_t *src_map; /* cache move bench: src then dst indices */
    int ck;            /* attachment bench: clusters of its table */
    uint64_t cterms;   /* the documents' terms (1 + the largest column), the table's rows */
};

/* The documents of the tuning workloads: nb synthetic unit vectors on a W x W plane (W from nb,
 * bench_plane) in one block that is page-locked while it is kept (cudaHostRegister, best
 * effort), so that every tuning input uploads them straight at the copy engines' speed. Kept
 * between inputs by the tuning cache (common/tune/wl_cache.h: the searches of a run's kernels
 * share the documents of one size, and a small input in between no longer evicts them) until a
 * simulation ends (dm_flock_cuda_free clears it). The store's arrays point into the block. */
struct bench_docs {
    dm_flock_store h;
    void *block;
    bool pinned;
    uint64_t terms; /* 1 + the largest column */
};

void bench_docs_drop(void *p)
{
    bench_docs *d = static_cast<bench_docs *>(p);
    if (!d) return;
    if (d->pinned && cudaHostUnregister(d->block) != cudaSuccess)
        cudaGetLastError(); /* not sticky: clear it for the launches' checks */
    dm_free(d->block);
    dm_free(d);
}

double bench_plane(size_t nb)
{
    double W = sqrt((double)nb * 3.141592653589793 / 15.0);
    return W < 3.5 ? 3.5 : W;
}

int bench_docs_build(dm_wl_host *out, size_t nb, uint64_t seed, const void *arg)
{
    (void)arg;
    const double W = bench_plane(nb);
    bench_docs *d = static_cast<bench_docs *>(dm_calloc(1, sizeof *d));
    if (!d) return DM_ERR(DM_ERR_NOMEM, "flock bench: out of memory for %zu documents", nb);
    dm_flock_store *h = &d->h;
    dm_flock_store_init(h);
    dm_flock_synth_options so = DM_FLOCK_SYNTH_OPTIONS_INIT;
    so.tokens = 80;
    so.seed = seed;
    dm_vectors v;
    int rc = dm_flock_synth_vectors(&v, &so, 0, nb);
    if (rc != DM_OK) {
        dm_free(d);
        return rc;
    }
    const size_t nnz = (size_t)v.row_off[nb];
    const size_t a8 = (8 * nb + 63) & ~(size_t)63, a4 = (4 * nb + 63) & ~(size_t)63,
                 p4 = (4 * nnz + 63) & ~(size_t)63;
    const size_t bytes = 6 * a8 + a4 + 2 * p4 + 4 * 8 * nb + 64;
    char *blk = static_cast<char *>(dm_malloc(bytes));
    if (!blk) rc = DM_ERR(DM_ERR_NOMEM, "flock bench: out of memory for %zu documents", nb);
    if (rc == DM_OK) {
        d->block = blk;
        h->id = reinterpret_cast<uint64_t *>(blk);
        h->x = reinterpret_cast<double *>(blk + a8);
        h->y = reinterpret_cast<double *>(blk + 2 * a8);
        h->vx = reinterpret_cast<double *>(blk + 3 * a8);
        h->vy = reinterpret_cast<double *>(blk + 4 * a8);
        h->voff = reinterpret_cast<uint64_t *>(blk + 5 * a8);
        h->vlen = reinterpret_cast<uint32_t *>(blk + 6 * a8);
        h->col = reinterpret_cast<uint32_t *>(blk + 6 * a8 + a4);
        h->val = reinterpret_cast<float *>(blk + 6 * a8 + a4 + p4);
        h->cap = nb, h->pool_cap = nnz; /* the appending below allocates nothing */
        double *st = reinterpret_cast<double *>(blk + 6 * a8 + a4 + 2 * p4); /* the initial states */
        for (size_t i = 0; i < nb; i++) {
            dm_philox4 r = dm_rng4(seed, i, 7);
            st[i] = W * (r.v[0] / 4294967296.0);
            st[nb + i] = W * (r.v[1] / 4294967296.0);
            st[2 * nb + i] = 0.2 * (r.v[2] / 4294967296.0 - 0.5);
            st[3 * nb + i] = 0.2 * (r.v[3] / 4294967296.0 - 0.5);
        }
        rc = dm_flock_store_append_unit_rows(h, &v, 0, st, st + nb, st + 2 * nb, st + 3 * nb);
    }
    dm_flock_vectors_release(&v);
    for (size_t q = 0; rc == DM_OK && q < h->pool; q++)
        if (h->col[q] + (uint64_t)1 > d->terms) d->terms = h->col[q] + (uint64_t)1;
    if (rc == DM_OK) {
        d->pinned = cudaHostRegister(blk, bytes, cudaHostRegisterDefault) == cudaSuccess;
        if (!d->pinned) cudaGetLastError(); /* not sticky: clear it for the launches' checks */
    }
    if (rc != DM_OK) {
        bench_docs_drop(d);
        return rc;
    }
    out->data = d;
    out->bytes = bytes;
    out->drop = bench_docs_drop;
    return DM_OK;
}

int bench_problem(bench *b, size_t nb, uint64_t seed)
{
    const double W = bench_plane(nb);
    memset(&b->p, 0, sizeof b->p);
    b->p.r = 1;
    b->p.r2 = 1;
    b->p.dmin2 = 0.0025;
    b->p.threshold = 0.08;
    b->p.w_sep = 0.02, b->p.w_dis = 0.05, b->p.w_ali = 0.3, b->p.w_coh = 0.05;
    b->p.vmax = 0.5, b->p.vmax2 = 0.25;
    b->p.W = b->p.H = b->p.W1 = b->p.H1 = W;
    b->p.half_W = b->p.half_H = W / 2;
    b->p.ratio_x = b->p.ratio_y = 1;
    b->p.C = b->p.R = (int)floor(W / (1 + 1e-9));
    b->p.cw = b->p.ch = W / b->p.C;
    b->w.first_row = 0;
    b->w.nb = b->p.R;
    b->s = new (std::nothrow) dstate();
    if (!b->s) return DM_ERR(DM_ERR_NOMEM, "flock bench: out of memory");
    dstate *s = b->s;
    DM_TRY(dstate_open(s));
    {
        void *lent = NULL;
        DM_TRY(dm_wl_cache_get("flock.docs", nb, seed, bench_docs_build, NULL, &lent));
        const bench_docs *d = static_cast<const bench_docs *>(lent);
        b->cterms = d->terms;
        int rc = d->pinned ? upload_set_via(&s->own, &d->h, s->sa, 0, 0, NULL, NULL)
                           : upload_set(&s->own, &d->h, s->sa, 0, 0);
        /* the copies done before the documents are returned */
        if (cudaStreamSynchronize(s->sa) != cudaSuccess && rc == DM_OK) rc = DM_ERR(DM_ERR_CUDA, "flock bench: upload");
        dm_wl_cache_put(lent);
        DM_TRY(rc);
    }
    DM_TRY(ensure_own_buffers(s, nb));
    DM_CUDA_TRY(cudaMemsetAsync(s->cache[0], 0, 8 * s->cap_cache[0], s->sa));
    DM_CUDA_TRY(cudaStreamSynchronize(s->sa));
    return DM_OK;
}

/* Runs one iteration's pipeline up to (not including) kernel k with the default instances. An
 * iteration is run first so that the pair cache holds decisions, as in a real run. */
int bench_advance(bench *b)
{
    dstate *s = b->s;
    const dm_tune_instance *fi = &g_kernels[K_FORCES].instances[g_kernels[K_FORCES].default_instance];
    int saved[K_N];
    for (int k = 0; k < K_N; k++) {
        saved[k] = g_forced[k];
        g_forced[k] = g_kernels[k].default_instance + 1;
    }
    const dm_tune_instance *bi = &g_kernels[K_BUILD].instances[g_kernels[K_BUILD].default_instance];
    s->stamp = 0; /* iterations 0 and 1 (the pair cache's stamps); the first from empty rows */
    int rc = empty_rows(s, s->own.n, s->sa);
    if (rc == DM_OK) rc = build_grid(s, &s->own, b->p, b->w, fi->policy.layout, s->sa);
    if (rc == DM_OK) rc = pairs_pass(s, &s->pown, &s->own, &s->own, b->p, 1, s->sa);
    if (rc == DM_OK) rc = forces_pass(s, &s->pown, &s->own, &s->own, b->p, 0, fi, s->sa);
    if (rc == DM_OK) {
        s->cur = 1 - s->cur;
        s->stamp = 1;
        /* second iteration's rows, grid and pairs (with cache hits) are the kernels' inputs */
        rc = new_rows(s, s->own.n, s->sa, bi);
    }
    int layout = fi->policy.layout;
    if (b->k == K_FORCES) layout = DM_LAYOUT_SOA; /* rebuilt per instance below */
    if (rc == DM_OK) rc = build_grid(s, &s->own, b->p, b->w, layout, s->sa);
    /* the similarity kernel's work is the cache misses: with an empty cache every pair is one */
    if (rc == DM_OK && b->k == K_SIM &&
        cudaMemsetAsync(s->cache[s->cur], 0, 8 * s->own.n * FK_CACHE, s->sa) != cudaSuccess)
        rc = DM_ERR(DM_ERR_CUDA, "memset");
    if (rc == DM_OK && b->k != K_KEYS && b->k != K_BOUNDS && b->k != K_GATHER && b->k != K_COUNT)
        rc = pairs_pass(s, &s->pown, &s->own, &s->own, b->p, 1, s->sa);
    for (int k = 0; k < K_N; k++) g_forced[k] = saved[k];
    if (rc == DM_OK && cudaStreamSynchronize(s->sa) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "sync");
    return rc;
}

void bench_free(bench *b)
{
    if (!b) return;
    if (b->s) {
        cudaStreamSynchronize(b->s->sa);
        retired_free();
        b->s->free_all();
        delete b->s;
    }
    release(&b->x0), release(&b->y0), release(&b->vx0), release(&b->vy0), release(&b->src_map);
    free(b);
}

/* The edges bench: every target's count of similar pairs and their sums (the default instance),
 * so that the writing pass (the one timed) has its input. */
int bench_edges_input(dstate *s, size_t nb)
{
    fk_edges_args a = {s->pown.cnt, s->pown.off, s->pown.pairs, nb, s->own.sidx, s->own.sidx, NULL, NULL, NULL, NULL};
    uint64_t m = 0;
    return edges_count(s, &a, nb, &g_kernels[K_EDGES].instances[g_kernels[K_EDGES].default_instance], s->sa, &m);
}

/* The attachment bench: 16 clusters whose centroids have seeded values at every term of the
 * bench's vectors and 0 at a third of them; every fifth document keeps a cluster given. The
 * centroid sums bench: the sums of those every fifth documents' clusters. */
int bench_attach_input(bench *b, size_t nb, uint64_t seed)
{
    dstate *s = b->s;
    const uint64_t T = b->cterms; /* of the documents bench_problem uploaded */
    const int k = 16;
    b->ck = k;
    size_t cells = (size_t)T * k;
    double *t = static_cast<double *>(malloc(8 * (cells ? cells : 1)));
    double *norm = static_cast<double *>(calloc(k, 8));
    int32_t *cl = static_cast<int32_t *>(malloc(4 * nb));
    int rc = t && norm && cl ? DM_OK : DM_ERR(DM_ERR_NOMEM, "flock bench: out of memory");
    for (size_t e = 0; rc == DM_OK && e < cells; e++) {
        dm_philox4 r = dm_rng4(seed, e, 11);
        t[e] = r.v[0] % 3 == 0 ? 0.0 : r.v[1] / 4294967296.0;
        norm[e % k] += t[e] * t[e];
    }
    for (int c = 0; rc == DM_OK && c < k; c++) norm[c] = sqrt(norm[c]);
    for (size_t i = 0; rc == DM_OK && i < nb; i++) cl[i] = i % 5 == 0 ? (int32_t)(i / 5 % k) : -1;
    if (rc == DM_OK) rc = ensure(&s->ctable, &s->cap_ctable, cells ? cells : 1, true);
    if (rc == DM_OK) rc = ensure(&s->cnorm, &s->cap_cnorm, (size_t)k, true);
    if (rc == DM_OK) rc = ensure(&s->acl, &s->cap_acl, nb, true);
    if (rc == DM_OK) rc = ensure(&s->ares, &s->cap_ares, nb, true);
    if (rc == DM_OK) rc = ensure(&s->csum, &s->cap_csum, cells ? cells : 1, true);
    if (rc == DM_OK) rc = ensure(&s->chas, &s->cap_chas, cells ? cells : 1, true);
    if (rc == DM_OK && (cudaMemcpy(s->ctable, t, 8 * cells, cudaMemcpyHostToDevice) != cudaSuccess ||
                        cudaMemcpy(s->cnorm, norm, 8 * (size_t)k, cudaMemcpyHostToDevice) != cudaSuccess ||
                        cudaMemcpy(s->acl, cl, 4 * nb, cudaMemcpyHostToDevice) != cudaSuccess))
        rc = DM_ERR(DM_ERR_CUDA, "flock bench: copy");
    free(t);
    free(norm);
    free(cl);
    return rc;
}

int bench_create_k(void **state, size_t n, uint64_t seed, int k)
{
    *state = NULL;
    bench *b = static_cast<bench *>(calloc(1, sizeof *b));
    if (!b) return DM_ERR(DM_ERR_NOMEM, "flock bench: out of memory");
    b->k = k;
    /* work units -> boids: similarity counts pairs, cache moves count slots */
    size_t nb = n;
    if (k == K_SIM) {
        /* about 15 pairs per boid, half of them mirrors; a power of two of boids, so that the
         * other kernels' inputs of that many boids share the documents (bench_docs) */
        nb = 64;
        while (nb < n / 5 + 64) nb *= 2;
    }
    if (k == K_MOVE) nb = 2 * (n / FK_CACHE) + 2;
    if (nb < 64) nb = 64;
    int rc = bench_problem(b, nb, seed);
    if (rc == DM_OK) rc = bench_advance(b);
    dstate *s = b->s;
    if (rc == DM_OK && k == K_UPDATE) {
        size_t c = 0;
        rc = ensure(&b->x0, &c, nb);
        c = 0;
        if (rc == DM_OK) rc = ensure(&b->y0, &c, nb);
        c = 0;
        if (rc == DM_OK) rc = ensure(&b->vx0, &c, nb);
        c = 0;
        if (rc == DM_OK) rc = ensure(&b->vy0, &c, nb);
        if (rc == DM_OK && (cudaMemcpy(b->x0, s->own.x, 8 * nb, cudaMemcpyDeviceToDevice) != cudaSuccess ||
                            cudaMemcpy(b->y0, s->own.y, 8 * nb, cudaMemcpyDeviceToDevice) != cudaSuccess ||
                            cudaMemcpy(b->vx0, s->own.vx, 8 * nb, cudaMemcpyDeviceToDevice) != cudaSuccess ||
                            cudaMemcpy(b->vy0, s->own.vy, 8 * nb, cudaMemcpyDeviceToDevice) != cudaSuccess))
            rc = DM_ERR(DM_ERR_CUDA, "flock bench: copy");
        /* sums to update from: one forces pass */
        if (rc == DM_OK)
            rc = forces_pass(s, &s->pown, &s->own, &s->own, b->p, 0,
                             &g_kernels[K_FORCES].instances[g_kernels[K_FORCES].default_instance], s->sa);
    }
    if (rc == DM_OK && (k == K_FLAGS || k == K_PICK)) {
        /* a slice [0.3 W, 0.6 W) with margin r: its halo; the pick input from the default flags */
        rc = ensure(&s->sflag, &s->cap_sflag, nb + 1);
        if (rc == DM_OK) rc = ensure(&s->soff, &s->cap_soff, nb + 1);
        if (rc == DM_OK) rc = ensure(&s->sdirs, &s->cap_sdirs, nb);
        if (rc == DM_OK) rc = ensure(&s->sidx, &s->cap_sidx, nb);
        if (rc == DM_OK) rc = ensure(&s->sstate, &s->cap_sstate, 4 * nb);
        if (rc == DM_OK) rc = ensure(&s->sodirs, &s->cap_sodirs, nb);
        if (rc == DM_OK && cudaMemset(s->sflag + nb, 0, 4) != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "memset");
        fk_flags_args fa = {s->own.y, nb, 0, 0.3 * b->p.H, 0.6 * b->p.H, 1.001, NULL, 1, 0, b->p.H, s->sflag,
                            s->sdirs, s->err};
        if (rc == DM_OK)
            rc = g_kernels[K_FLAGS].instances[g_kernels[K_FLAGS].default_instance].launch(&fa, nb, s->sa);
        size_t bytes = 0;
        if (rc == DM_OK &&
            (cub::DeviceScan::ExclusiveSum(NULL, bytes, s->sflag, s->soff, (int)(nb + 1), s->sa) != cudaSuccess ||
             ensure(reinterpret_cast<char **>(&s->sscan), &s->cap_sscan, bytes ? bytes : 1) != DM_OK ||
             cub::DeviceScan::ExclusiveSum(s->sscan, bytes, s->sflag, s->soff, (int)(nb + 1), s->sa) != cudaSuccess ||
             cudaStreamSynchronize(s->sa) != cudaSuccess))
            rc = DM_ERR(DM_ERR_CUDA, "flock bench: selection scan");
    }
    if (rc == DM_OK && k == K_MOVE) {
        /* moves as after a migration: rows from the second half into the first (src > dst) */
        size_t c = 0, half = nb / 2;
        uint32_t *h = static_cast<uint32_t *>(malloc(8 * (half ? half : 1)));
        if (!h) rc = DM_ERR(DM_ERR_NOMEM, "flock bench: out of memory");
        for (size_t i = 0; rc == DM_OK && i < half; i++) {
            h[i] = (uint32_t)(nb - 1 - i); /* src */
            h[half + i] = (uint32_t)i;     /* dst */
        }
        if (rc == DM_OK) rc = ensure(&b->src_map, &c, 2 * (half ? half : 1));
        if (rc == DM_OK && cudaMemcpy(b->src_map, h, 8 * half, cudaMemcpyHostToDevice) != cudaSuccess)
            rc = DM_ERR(DM_ERR_CUDA, "flock bench: copy");
        free(h);
    }
    if (rc == DM_OK && k == K_EDGES) rc = bench_edges_input(s, nb);
    if (rc == DM_OK && (k == K_ATTACH || k == K_CSUMS)) rc = bench_attach_input(b, nb, seed);
    /* the units this state can run */
    size_t units = nb;
    if (k == K_SIM) units = (size_t)s->pown.n_miss;
    if (k == K_MOVE) units = nb / 2 * FK_CACHE;
    b->cap = units;
    b->n = n < units ? n : units;
    if (rc == DM_OK && cudaDeviceSynchronize() != cudaSuccess) rc = DM_ERR(DM_ERR_CUDA, "flock bench: sync");
    if (rc != DM_OK) {
        bench_free(b);
        return rc;
    }
    *state = b;
    return DM_OK;
}

int bench_run(void *state, const dm_tune_instance *inst, void *stream)
{
    bench *b = static_cast<bench *>(state);
    dstate *s = b->s;
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    size_t n = b->n;
    dset *d = &s->own;
    switch (b->k) {
    case K_KEYS: {
        fk_keys_args a = {d->x, d->y, n, b->p, 0, b->w.nb, d->keys, d->idx, s->err};
        return inst->launch(&a, n, stream);
    }
    case K_BOUNDS: {
        size_t cells = (size_t)b->p.C * (size_t)b->w.nb;
        DM_CUDA_TRY(cudaMemsetAsync(d->cstart, 0, 4 * cells, st));
        DM_CUDA_TRY(cudaMemsetAsync(d->cend, 0, 4 * cells, st));
        fk_bounds_args a = {d->skeys, n, d->cstart, d->cend};
        return inst->launch(&a, n, stream);
    }
    case K_GATHER: {
        fk_gather_args a = {d->sidx, d->id, d->voff, d->vlen, d->x, d->y, d->vx, d->vy, n, d->sx, d->sy, d->sid,
                            d->svoff, d->svlen, d->lbuf, DM_LAYOUT_AOS, d->lcap};
        return inst->launch(&a, n, stream);
    }
    case K_COUNT: {
        fk_pass_args a = pass_args(s, &s->pown, d, d, b->p, 1);
        a.n_targets = n;
        return inst->launch(&a, n, stream);
    }
    case K_DETECT: {
        fk_pass_args a = pass_args(s, &s->pown, d, d, b->p, 1);
        a.n_targets = n;
        DM_CUDA_TRY(cudaMemsetAsync(a.n_miss, 0, 8, st));
        DM_CUDA_TRY(cudaMemsetAsync(a.n_mirror, 0, 8, st));
        return inst->launch(&a, n, stream);
    }
    case K_SIM: {
        fk_sim_args a = {s->pown.miss, n, d->sidx, d->voff, d->vlen, d->col, d->val, d->svoff, d->svlen, d->col, d->val,
                         s->pown.pairs, b->p.threshold, 0, s->pown.off, s->pown.cnt};
        return inst->launch(&a, n, stream);
    }
    case K_FORCES: {
        /* the sorted state in this instance's layout */
        fk_gather_args g = {d->sidx, d->id, d->voff, d->vlen, d->x, d->y, d->vx, d->vy, d->n, d->sx, d->sy, d->sid,
                            d->svoff, d->svlen, d->lbuf, inst->policy.layout, d->lcap};
        DM_TRY(g_kernels[K_GATHER].instances[g_kernels[K_GATHER].default_instance].launch(&g, d->n, stream));
        /* this iteration's rows as the step builds them, every run from the same last rows */
        DM_TRY(new_rows(s, d->n, st, &g_kernels[K_BUILD].instances[g_kernels[K_BUILD].default_instance]));
        fk_forces_args a = {b->p, n, d->sidx, d->lbuf, d->lcap, d->lbuf, d->lcap, d->sid, s->pown.cnt, s->pown.off,
                            s->pown.pairs, s->acc, 0, s->cache[1 - s->cur], s->fill, s->ctr, s->stamp};
        return inst->launch(&a, n, stream);
    }
    case K_UPDATE: {
        DM_CUDA_TRY(cudaMemcpyAsync(d->x, b->x0, 8 * n, cudaMemcpyDeviceToDevice, st));
        DM_CUDA_TRY(cudaMemcpyAsync(d->y, b->y0, 8 * n, cudaMemcpyDeviceToDevice, st));
        DM_CUDA_TRY(cudaMemcpyAsync(d->vx, b->vx0, 8 * n, cudaMemcpyDeviceToDevice, st));
        DM_CUDA_TRY(cudaMemcpyAsync(d->vy, b->vy0, 8 * n, cudaMemcpyDeviceToDevice, st));
        fk_update_args a = {b->p, n, s->acc, d->x, d->y, d->vx, d->vy, &s->ctr[2]};
        return inst->launch(&a, n, stream);
    }
    case K_BUILD: {
        /* the second iteration's rows from the first's (stamp 1; bench_advance) */
        fk_build_args a = {s->cache[s->cur], s->cache[1 - s->cur], s->fill, n, s->stamp};
        return inst->launch(&a, n, stream);
    }
    case K_FLAGS: {
        fk_flags_args a = {d->y, n, 0, 0.3 * b->p.H, 0.6 * b->p.H, 1.001, NULL, 1, 0, b->p.H, s->sflag, s->sdirs, s->err};
        return inst->launch(&a, n, stream);
    }
    case K_PICK: {
        fk_pick_args a = {s->sflag, s->soff, n, d->x, d->y, d->vx, d->vy, s->sdirs, s->sidx, s->sstate, s->sodirs};
        return inst->launch(&a, n, stream);
    }
    case K_EDGES: {
        fk_edges_args a = {s->pown.cnt, s->pown.off, s->pown.pairs, n, d->sidx, d->sidx, s->eoff, s->ecnt, s->eown,
                           s->enbr};
        return inst->launch(&a, n, stream);
    }
    case K_ATTACH: {
        fk_attach_args a = {labelled(d, n, s->acl), s->ares, s->ctable, s->cnorm, b->cterms, b->ck};
        return inst->launch(&a, n, stream);
    }
    case K_CSUMS: {
        const size_t cells = (size_t)b->cterms * (size_t)b->ck;
        DM_CUDA_TRY(cudaMemsetAsync(s->csum, 0, 8 * cells, st));
        DM_CUDA_TRY(cudaMemsetAsync(s->chas, 0, cells, st));
        fk_csums_args a = {labelled(d, n, s->acl), s->csum, s->chas, b->cterms, b->ck};
        return inst->launch(&a, n, stream);
    }
    case K_MOVE: {
        size_t half = b->cap / FK_CACHE;
        fk_cache_move_args a = {s->cache[s->cur], b->src_map, b->src_map + half, n / FK_CACHE,
                                d->x, d->y, d->vx, d->vy, d->id, d->voff, d->vlen};
        return inst->launch(&a, (n / FK_CACHE) * FK_CACHE, stream);
    }
    }
    return DM_ERR(DM_ERR_INVALID_ARG, "flock bench: unknown kernel");
}

int bench_output(void *state, void *host, size_t *nbytes)
{
    bench *b = static_cast<bench *>(state);
    dstate *s = b->s;
    dset *d = &s->own;
    size_t n = b->n;
    struct part {
        const void *p;
        size_t bytes;
    } parts[8];
    int np = 0;
    switch (b->k) {
    case K_KEYS: parts[np++] = {d->keys, 4 * n}, parts[np++] = {d->idx, 4 * n}; break;
    case K_BOUNDS: {
        size_t cells = (size_t)b->p.C * (size_t)b->w.nb;
        parts[np++] = {d->cstart, 4 * cells}, parts[np++] = {d->cend, 4 * cells};
        break;
    }
    case K_GATHER:
        /* the AoS buffer's first n boids: the padding to the tile size is never written */
        parts[np++] = {d->sx, 8 * n}, parts[np++] = {d->sy, 8 * n}, parts[np++] = {d->sid, 8 * n};
        parts[np++] = {d->lbuf, 8 * 4 * n};
        break;
    case K_COUNT: parts[np++] = {s->pown.cnt, 4 * n}; break;
    case K_DETECT: {
        /* the pair lists of the first n targets */
        uint64_t end = 0;
        if (n) DM_CUDA_TRY(cudaMemcpy(&end, s->pown.off + n, 8, cudaMemcpyDeviceToHost));
        parts[np++] = {s->pown.pairs, 4 * (size_t)end};
        break;
    }
    case K_SIM: parts[np++] = {s->pown.pairs, 4 * (size_t)s->pown.total}; break;
    case K_FORCES: parts[np++] = {s->acc, sizeof(dm_flock_acc) * n}; break;
    case K_UPDATE:
        parts[np++] = {d->x, 8 * n}, parts[np++] = {d->y, 8 * n}, parts[np++] = {d->vx, 8 * n}, parts[np++] = {d->vy, 8 * n};
        break;
    case K_MOVE: /* the destinations are boids 0 .. moves - 1 */
        parts[np++] = {s->cache[s->cur], 8 * (n / FK_CACHE) * FK_CACHE};
        parts[np++] = {d->x, 8 * (n / FK_CACHE)}, parts[np++] = {d->id, 8 * (n / FK_CACHE)};
        break;
    case K_FLAGS: parts[np++] = {s->sflag, 4 * n}, parts[np++] = {s->sdirs, n}; break;
    case K_EDGES: {
        uint64_t m = 0; /* the edges of the first n targets */
        if (n) DM_CUDA_TRY(cudaMemcpy(&m, s->eoff + n, 8, cudaMemcpyDeviceToHost));
        parts[np++] = {s->eown, 4 * (size_t)m}, parts[np++] = {s->enbr, 4 * (size_t)m};
        break;
    }
    case K_ATTACH: parts[np++] = {s->ares, 4 * n}; break;
    case K_BUILD: parts[np++] = {s->fill, 4 * n}; break; /* the rows' fills (their slots depend on the lanes' order) */
    case K_CSUMS: {
        const size_t cells = (size_t)b->cterms * (size_t)b->ck;
        parts[np++] = {s->csum, 8 * cells}, parts[np++] = {s->chas, cells};
        break;
    }
    case K_PICK: {
        uint32_t m = 0; /* the selected among the first n boids */
        if (n) DM_CUDA_TRY(cudaMemcpy(&m, s->soff + n, 4, cudaMemcpyDeviceToHost));
        parts[np++] = {s->sidx, 4 * (size_t)m}, parts[np++] = {s->sstate, 32 * (size_t)m}, parts[np++] = {s->sodirs, m};
        break;
    }
    }
    size_t tot = 0;
    for (int i = 0; i < np; i++) tot += parts[i].bytes;
    *nbytes = tot;
    if (!host) return DM_OK;
    DM_CUDA_TRY(cudaDeviceSynchronize());
    char *h = static_cast<char *>(host);
    for (int i = 0; i < np; i++) {
        if (parts[i].bytes) DM_CUDA_TRY(cudaMemcpy(h, parts[i].p, parts[i].bytes, cudaMemcpyDeviceToHost));
        h += parts[i].bytes;
    }
    return DM_OK;
}

int bench_resize(void *state, size_t n)
{
    bench *b = static_cast<bench *>(state);
    if (n > b->cap) return DM_ERR(DM_ERR_INVALID_ARG, "flock bench: resize to %zu > %zu", n, b->cap);
    b->n = b->k == K_MOVE ? n / FK_CACHE * FK_CACHE : n;
    return DM_OK;
}

void bench_destroy(void *state) { bench_free(static_cast<bench *>(state)); }

#define FK_BENCH_CREATE(K)                                                                         \
    int bench_create_##K(void **state, size_t n, uint64_t seed) { return bench_create_k(state, n, seed, K); }
FK_BENCH_CREATE(K_KEYS)
FK_BENCH_CREATE(K_BOUNDS)
FK_BENCH_CREATE(K_GATHER)
FK_BENCH_CREATE(K_COUNT)
FK_BENCH_CREATE(K_DETECT)
FK_BENCH_CREATE(K_SIM)
FK_BENCH_CREATE(K_FORCES)
FK_BENCH_CREATE(K_UPDATE)
FK_BENCH_CREATE(K_MOVE)
FK_BENCH_CREATE(K_FLAGS)
FK_BENCH_CREATE(K_PICK)
FK_BENCH_CREATE(K_EDGES)
FK_BENCH_CREATE(K_ATTACH)
FK_BENCH_CREATE(K_CSUMS)
FK_BENCH_CREATE(K_BUILD)

/* bench_resize is a newer field of dm_tune_kernel: set it where the tuner has it */
template <typename K>
auto set_resize(K &k, int) -> decltype(k.bench_resize = bench_resize, void())
{
    k.bench_resize = bench_resize;
}
template <typename K>
void set_resize(K &, long)
{
}

dm_tune_kernel make_kernel(const char *name, const char *desc, const char *unit, const dm_tune_instance *inst, int n,
                           int def, int (*create)(void **, size_t, uint64_t), size_t dflt_n)
{
    dm_tune_kernel k;
    memset(&k, 0, sizeof k);
    k.name = name;
    k.description = desc;
    k.work_unit = unit;
    k.instances = inst;
    k.n_instances = n;
    k.default_instance = def;
    k.bench_create = create;
    k.bench_run = bench_run;
    k.bench_output = bench_output;
    k.bench_destroy = bench_destroy;
    k.tolerance = 0.0; /* every flock kernel's output is exact (integers or fixed-point sums) */
    k.bench_default_n = dflt_n;
    set_resize(k, 0);
    return k;
}

const dm_tune_kernel g_kernels[K_N] = {
    make_kernel("flock.cell_keys", "grid cell key of every boid", "boids", g_keys_inst, NINST(g_keys_inst),
                FK_SPACE_DEFAULT, bench_create_K_KEYS, (size_t)1 << 20),
    make_kernel("flock.cell_bounds", "first and last sorted boid of every grid cell", "boids", g_bounds_inst,
                NINST(g_bounds_inst), FK_SPACE_DEFAULT, bench_create_K_BOUNDS, (size_t)1 << 20),
    make_kernel("flock.gather", "boids in cell order, forces layout", "boids", g_gather_inst, NINST(g_gather_inst),
                FK_SPACE_DEFAULT, bench_create_K_GATHER, (size_t)1 << 20),
    make_kernel("flock.count", "neighbours within r per boid (3x3 cells)", "boids", g_count_inst, NINST(g_count_inst),
                FK_SPACE_DEFAULT, bench_create_K_COUNT, (size_t)1 << 20),
    make_kernel("flock.detect", "neighbour pair lists and pair-cache lookups", "boids", g_detect_inst,
                NINST(g_detect_inst), FK_SPACE_DEFAULT, bench_create_K_DETECT, (size_t)1 << 20),
    make_kernel("flock.similarity", "exact cosine of sparse vectors, a warp per pair (tile merge)", "pairs", g_sim_inst,
                NINST(g_sim_inst), FK_SPACE_DEFAULT, bench_create_K_SIM, (size_t)1 << 21),
    make_kernel("flock.forces", "fixed-point force sums over the pair lists", "boids", g_forces_inst,
                NINST(g_forces_inst), FK_FORCES_DEFAULT, bench_create_K_FORCES, (size_t)1 << 20),
    make_kernel("flock.update", "velocity and position update", "boids", g_update_inst, NINST(g_update_inst),
                FK_SPACE_DEFAULT, bench_create_K_UPDATE, (size_t)1 << 20),
    make_kernel("flock.cache_move", "boids and pair-cache rows moved into the holes after a migration", "slots",
                g_move_inst, NINST(g_move_inst), 0, bench_create_K_MOVE, (size_t)1 << 24),
    make_kernel("flock.flags", "halo or departure decision of every boid", "boids", g_flags_inst,
                NINST(g_flags_inst), FK_SPACE_DEFAULT, bench_create_K_FLAGS, (size_t)1 << 20),
    make_kernel("flock.pick", "the selected boids' states, compacted for the host", "boids", g_pick_inst,
                NINST(g_pick_inst), FK_SPACE_DEFAULT, bench_create_K_PICK, (size_t)1 << 20),
    make_kernel("flock.edges", "the clusters' edges (similar pairs) of the pair lists, written in order", "boids",
                g_edges_inst, NINST(g_edges_inst), FK_SPACE_DEFAULT, bench_create_K_EDGES, (size_t)1 << 20),
    make_kernel("flock.attach", "most cosine-similar centroid per document, a warp per document", "documents",
                g_attach_inst, NINST(g_attach_inst), FK_SPACE_DEFAULT, bench_create_K_ATTACH, (size_t)1 << 20),
    make_kernel("flock.centroid_sums", "clusters' fixed-point centroid sums, a warp per document", "documents",
                g_csums_inst, NINST(g_csums_inst), FK_SPACE_DEFAULT, bench_create_K_CSUMS, (size_t)1 << 20),
    make_kernel("flock.cache_build", "this iteration's pair-cache rows from the last ones, a warp per boid",
                "boids", g_build_inst, NINST(g_build_inst), FK_SPACE_DEFAULT, bench_create_K_BUILD, (size_t)1 << 20),
};

} // namespace
