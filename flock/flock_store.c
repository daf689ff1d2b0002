/* The host boid store (structure of arrays plus a vector pool) and the exchange message format
 * (flock_impl.h). Reference: none (data structures). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "common/timer.h"
#include "flock/flock_impl.h"

void *dm_flock_buf_reserve(dm_flock_buf *b, size_t n)
{
    if (n <= b->cap && b->p) return b->p;
    dm_free(b->p);
    size_t c = n + n / 2 + 64;
    b->p = dm_malloc(c);
    b->cap = b->p ? c : 0;
    if (b->p) dm_mem_prefault(b->p, c);
    return b->p;
}

void dm_flock_buf_free(dm_flock_buf *b)
{
    dm_free(b->p);
    b->p = NULL;
    b->cap = 0;
}

static size_t id_slot(uint64_t id, size_t mask)
{
    uint64_t z = id * 0x9e3779b97f4a7c15ull; /* Fibonacci hashing: the ids are small and dense */
    return (size_t)(z >> 32 ^ z) & mask;
}

int dm_flock_idmap_build(dm_flock_idmap *m, const uint64_t *ids, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    if (cap > m->cap) {
        uint64_t *k = dm_malloc(sizeof *k * cap);
        uint32_t *v = dm_malloc(sizeof *v * cap);
        if (!k || !v) {
            dm_free(k);
            dm_free(v);
            dm_flock_idmap_clear(m); /* no stale keys behind n = 0 for a later add() */
            return DM_ERR(DM_ERR_NOMEM, "flock: out of memory for an id map of %zu entries", n);
        }
        dm_free(m->key);
        dm_free(m->val);
        m->key = k;
        m->val = v;
        m->cap = cap;
    }
    /* the table is used at its full capacity (a smaller load than 1/2 is harmless) */
    memset(m->key, 0xff, sizeof *m->key * m->cap);
    size_t mask = m->cap - 1;
    if (n < DM_FLOCK_IDMAP_PAR_MIN) {
        for (size_t i = 0; i < n; i++) {
            size_t h = id_slot(ids[i], mask);
            while (m->key[h] != UINT64_MAX) h = (h + 1) & mask;
            m->key[h] = ids[i];
            m->val[h] = (uint32_t)i;
        }
    } else {
        /* a probe misses the caches: the inserts of many threads overlap their misses (the halo's
         * maps are rebuilt every iteration, 10^4-10^5 ids each). The ids are distinct, so a claimed
         * slot is never claimed for the same key twice; the values are read after the loop. */
        uint64_t *key = m->key;
        uint32_t *val = m->val;
        const long nl = (long)n;
#pragma omp parallel for schedule(static) num_threads(dm_threads_upto(m->threads))
        for (long i = 0; i < nl; i++) {
            uint64_t id = ids[i];
            for (size_t h = id_slot(id, mask);; h = (h + 1) & mask) {
                uint64_t empty = UINT64_MAX;
                if (__atomic_load_n(&key[h], __ATOMIC_RELAXED) == UINT64_MAX &&
                    __atomic_compare_exchange_n(&key[h], &empty, id, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
                    val[h] = (uint32_t)i;
                    break;
                }
            }
        }
    }
    m->n = n;
    return DM_OK;
}

void dm_flock_idmap_clear(dm_flock_idmap *m)
{
    if (m->cap) memset(m->key, 0xff, sizeof *m->key * m->cap);
    m->n = 0;
}

uint32_t dm_flock_idmap_get(const dm_flock_idmap *m, uint64_t id)
{
    if (!m->n) return UINT32_MAX;
    size_t mask = m->cap - 1;
    for (size_t h = id_slot(id, mask);; h = (h + 1) & mask) {
        if (m->key[h] == id) return m->val[h];
        if (m->key[h] == UINT64_MAX) return UINT32_MAX;
    }
}

int dm_flock_idmap_add(dm_flock_idmap *m, const uint64_t *ids, size_t n)
{
    if (!n) return DM_OK;
    if (2 * (m->n + n) > m->cap) {
        /* the keys held at their indices, then the new ones, into a larger table */
        uint64_t *all = dm_malloc(sizeof *all * (m->n + n));
        if (!all) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory for an id map of %zu entries", m->n + n);
        for (size_t h = 0; h < m->cap; h++)
            if (m->key[h] != UINT64_MAX) {
                DM_ASSERT(m->val[h] < m->n);
                all[m->val[h]] = m->key[h];
            }
        memcpy(all + m->n, ids, sizeof *ids * n);
        int rc = dm_flock_idmap_build(m, all, m->n + n);
        dm_free(all);
        return rc;
    }
    size_t mask = m->cap - 1;
    for (size_t i = 0; i < n; i++) {
        size_t h = id_slot(ids[i], mask);
        while (m->key[h] != UINT64_MAX) h = (h + 1) & mask;
        m->key[h] = ids[i];
        m->val[h] = (uint32_t)(m->n + i);
    }
    m->n += n;
    return DM_OK;
}

void dm_flock_idmap_free(dm_flock_idmap *m)
{
    dm_free(m->key);
    dm_free(m->val);
    memset(m, 0, sizeof *m);
}

void dm_flock_store_init(dm_flock_store *s) { memset(s, 0, sizeof *s); }

void dm_flock_store_free(dm_flock_store *s)
{
    dm_free(s->id);
    dm_free(s->x);
    dm_free(s->y);
    dm_free(s->vx);
    dm_free(s->vy);
    dm_free(s->voff);
    dm_free(s->vlen);
    dm_free(s->col);
    dm_free(s->val);
    dm_flock_idmap_free(&s->index);
    dm_flock_buf_free(&s->scratch);
    memset(s, 0, sizeof *s);
}

void dm_flock_store_clear(dm_flock_store *s)
{
    s->n = s->pool = s->live = 0; /* keeps garbage_ratio, copy_threads and the memory */
    s->indexed = 0;
    s->compactions++; /* every offset is void: a device mirror must copy the pool again */
}

/* Grows an array of old elements to n, its new part prefaulted by the threads (faults taken by one
 * thread inside a step make a slow step, and a slow rank holds up its neighbours). */
static int grow(void **p, size_t elem, size_t old, size_t n)
{
    void *q = dm_realloc(*p, elem * (n ? n : 1));
    if (!q) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory for %zu boid entries", n);
    *p = q;
    if (n > old) dm_mem_prefault((char *)q + elem * old, elem * (n - old));
    return DM_OK;
}

int dm_flock_store_reserve(dm_flock_store *s, size_t n, size_t pool)
{
    if (n > s->cap) {
        size_t c = s->cap ? s->cap : 64;
        while (c < n) c += c / 2 + 1;
        size_t o = s->cap;
        DM_TRY(grow((void **)&s->id, sizeof *s->id, o, c));
        DM_TRY(grow((void **)&s->x, sizeof *s->x, o, c));
        DM_TRY(grow((void **)&s->y, sizeof *s->y, o, c));
        DM_TRY(grow((void **)&s->vx, sizeof *s->vx, o, c));
        DM_TRY(grow((void **)&s->vy, sizeof *s->vy, o, c));
        DM_TRY(grow((void **)&s->voff, sizeof *s->voff, o, c));
        DM_TRY(grow((void **)&s->vlen, sizeof *s->vlen, o, c));
        s->cap = c;
    }
    if (pool > s->pool_cap) {
        size_t c = s->pool_cap ? s->pool_cap : 1024;
        while (c < pool) c += c / 2 + 1;
        DM_TRY(grow((void **)&s->col, sizeof *s->col, s->pool_cap, c));
        DM_TRY(grow((void **)&s->val, sizeof *s->val, s->pool_cap, c));
        s->pool_cap = c;
    }
    return DM_OK;
}

int dm_flock_store_push(dm_flock_store *s, uint64_t id, double x, double y, double vx, double vy,
                        const uint32_t *col, const float *val, uint32_t len)
{
    DM_TRY(dm_flock_store_reserve(s, s->n + 1, s->pool + len));
    size_t i = s->n++;
    s->indexed = 0;
    s->id[i] = id;
    s->x[i] = x;
    s->y[i] = y;
    s->vx[i] = vx;
    s->vy[i] = vy;
    s->voff[i] = s->pool;
    s->vlen[i] = len;
    if (len) {
        memcpy(s->col + s->pool, col, sizeof *col * len);
        memcpy(s->val + s->pool, val, sizeof *val * len);
    }
    s->pool += len;
    s->live += len;
    return DM_OK;
}

int dm_flock_store_append_vectors(dm_flock_store *s, const dm_flock_store *src, const uint64_t *id,
                                  const uint64_t *voff, const uint32_t *vlen, size_t n)
{
    uint64_t nnz = 0;
    for (size_t k = 0; k < n; k++) nnz += vlen[k];
    DM_TRY(dm_flock_store_reserve(s, s->n + n, s->pool + nnz));
    const size_t b = s->n;
    uint64_t at = s->pool;
    for (size_t k = 0; k < n; k++) {
        s->voff[b + k] = at;
        s->vlen[b + k] = vlen[k];
        at += vlen[k];
    }
    const long nl = (long)n;
#pragma omp parallel for schedule(static) num_threads(dm_threads_upto(s->copy_threads))
    for (long k = 0; k < nl; k++) {
        size_t i = b + (size_t)k;
        s->id[i] = id[k];
        s->x[i] = s->y[i] = s->vx[i] = s->vy[i] = 0.0;
        if (vlen[k]) {
            memcpy(s->col + s->voff[i], src->col + voff[k], sizeof *s->col * vlen[k]);
            memcpy(s->val + s->voff[i], src->val + voff[k], sizeof *s->val * vlen[k]);
        }
    }
    s->n = b + n;
    s->live += (size_t)(at - s->pool);
    s->pool = (size_t)at;
    s->indexed = 0;
    return DM_OK;
}

int dm_flock_store_append_unit_rows(dm_flock_store *s, const dm_vectors *v, uint64_t id0, const double *x,
                                    const double *y, const double *vx, const double *vy)
{
    const size_t n = (size_t)v->n_rows, b = s->n;
    const uint64_t nnz = v->row_off[n] - v->row_off[0];
    DM_TRY(dm_flock_store_reserve(s, b + n, s->pool + nnz));
    const uint64_t base = s->pool - v->row_off[0];
    const long nl = (long)n;
#pragma omp parallel for schedule(static) num_threads(dm_threads_upto(s->copy_threads))
    for (long k = 0; k < nl; k++) {
        size_t i = b + (size_t)k;
        uint64_t a = v->row_off[k], e = v->row_off[k + 1];
        s->id[i] = id0 + (uint64_t)k;
        s->x[i] = x[k], s->y[i] = y[k], s->vx[i] = vx[k], s->vy[i] = vy[k];
        s->voff[i] = base + a;
        s->vlen[i] = (uint32_t)(e - a);
        double ss = 0;
        for (uint64_t q = a; q < e; q++) ss += (double)v->val[q] * v->val[q];
        for (uint64_t q = a; q < e; q++) {
            s->col[base + q] = v->col[q];
            s->val[base + q] = (float)(v->val[q] / sqrt(ss));
        }
    }
    s->n = b + n;
    s->pool += (size_t)nnz;
    s->live += (size_t)nnz;
    s->indexed = 0;
    return DM_OK;
}

static int too_much_garbage(const dm_flock_store *s)
{
    size_t ratio = s->garbage_ratio ? s->garbage_ratio : 2;
    return s->pool > ratio * s->live + 4096;
}

int dm_flock_store_removal_compacts(const dm_flock_store *s, size_t nnz)
{
    dm_flock_store after = *s;
    after.live -= nnz < s->live ? nnz : s->live;
    return too_much_garbage(&after);
}

/* A boid's vector range, for compaction in pool order. */
typedef struct vec_at {
    uint64_t voff;
    size_t boid;
} vec_at;

static int vec_at_cmp(const void *a, const void *b)
{
    uint64_t x = ((const vec_at *)a)->voff, y = ((const vec_at *)b)->voff;
    return x < y ? -1 : x > y;
}

/* Moves the live vectors to the front of the pool, in place and in pool order (each range moves
 * down, never over a range not yet moved), keeping the pool's capacity: no fresh memory, which
 * would cost a page fault per 4 KiB on every compaction of a store that turns over each iteration
 * (the halo). */
static int compact_pool(dm_flock_store *s)
{
    vec_at *o = dm_malloc(sizeof *o * (s->n ? s->n : 1));
    if (!o) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory compacting vectors");
    size_t m = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->vlen[i]) {
            o[m].voff = s->voff[i];
            o[m].boid = i;
            m++;
        } else {
            s->voff[i] = 0;
        }
    qsort(o, m, sizeof *o, vec_at_cmp);
    size_t at = 0;
    for (size_t k = 0; k < m; k++) {
        size_t i = o[k].boid, len = s->vlen[i];
        DM_ASSERT(o[k].voff >= at);
        if (o[k].voff != at) {
            memmove(s->col + at, s->col + o[k].voff, sizeof *s->col * len);
            memmove(s->val + at, s->val + o[k].voff, sizeof *s->val * len);
        }
        s->voff[i] = at;
        at += len;
    }
    dm_free(o);
    DM_ASSERT(at == s->live);
    s->pool = at;
    s->compactions++;
    return DM_OK;
}

int dm_flock_store_remove_list(dm_flock_store *s, const uint32_t *rm, size_t m, uint32_t *moved_dst,
                               uint32_t *moved_src, size_t *n_moved)
{
    const size_t n = s->n;
    DM_ASSERT(m <= n);
    const size_t new_n = n - m;
    size_t moves = 0;
    for (size_t k = 0; k < m; k++) {
        DM_ASSERT(rm[k] < n && (k == 0 || rm[k] > rm[k - 1]));
        s->live -= s->vlen[rm[k]];
    }
    /* the holes below new_n, in ascending order, take the kept boids at or above new_n from the
     * last one down (rm[r] walks the removed ones among them from the end) */
    size_t j = n, r = m;
    for (size_t k = 0; k < m && rm[k] < new_n; k++) {
        size_t hole = rm[k];
        for (;;) {
            j--;
            if (r > 0 && rm[r - 1] == j) {
                r--;
                continue;
            }
            break;
        }
        DM_ASSERT(j >= new_n);
        s->id[hole] = s->id[j];
        s->x[hole] = s->x[j];
        s->y[hole] = s->y[j];
        s->vx[hole] = s->vx[j];
        s->vy[hole] = s->vy[j];
        s->voff[hole] = s->voff[j];
        s->vlen[hole] = s->vlen[j];
        if (moved_dst) {
            moved_dst[moves] = (uint32_t)hole;
            moved_src[moves] = (uint32_t)j;
        }
        moves++;
    }
    s->n = new_n;
    s->indexed = 0;
    if (n_moved) *n_moved = moves;
    if (too_much_garbage(s)) DM_TRY(compact_pool(s));
    return DM_OK;
}

int dm_flock_store_remove(dm_flock_store *s, const uint8_t *keep, uint32_t *moved_dst, uint32_t *moved_src,
                          size_t *n_moved)
{
    size_t m = 0;
    for (size_t i = 0; i < s->n; i++) m += !keep[i];
    uint32_t *rm = dm_malloc(sizeof *rm * (m ? m : 1));
    if (!rm) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    m = 0;
    for (size_t i = 0; i < s->n; i++)
        if (!keep[i]) rm[m++] = (uint32_t)i;
    int rc = dm_flock_store_remove_list(s, rm, m, moved_dst, moved_src, n_moved);
    dm_free(rm);
    return rc;
}

static size_t pad8(size_t v) { return (v + 7) & ~(size_t)7; }

void dm_flock_msg_layout_of(dm_flock_msg_layout *l, uint64_t n, uint64_t nnz)
{
    size_t at = DM_FLOCK_MSG_HEADER;
    l->id = at;
    at += 8 * n;
    l->x = at;
    at += 8 * n;
    l->y = at;
    at += 8 * n;
    l->vx = at;
    at += 8 * n;
    l->vy = at;
    at += 8 * n;
    l->off = at;
    at += 8 * (n + 1);
    l->has = at;
    at += pad8(n);
    l->col = at;
    at += pad8(4 * nnz);
    l->val = at;
    at += pad8(4 * nnz);
    l->total = at;
}

void dm_flock_msg_pack(char *buf, const dm_flock_store *s, const uint32_t *idx, size_t count,
                       const uint8_t *with_vec, const double *state)
{
    /* the vectors' lengths (a cache miss a boid: in parallel) into off[], then their offsets (the
     * part of the layout before the vectors does not depend on their size) */
    dm_flock_msg_layout l;
    dm_flock_msg_layout_of(&l, count, 0);
    uint64_t *off = (uint64_t *)(buf + l.off);
    uint8_t *has = (uint8_t *)(buf + l.has);
    const long nl = (long)count;
    const int threads = dm_threads_upto(s->copy_threads);
#pragma omp parallel for schedule(static) num_threads(threads) if (nl >= 2048)
    for (long k = 0; k < nl; k++) {
        has[k] = (uint8_t)(!with_vec || with_vec[k]);
        off[k] = has[k] ? s->vlen[idx[k]] : 0;
    }
    uint64_t nnz = 0;
    for (size_t k = 0; k < count; k++) {
        uint64_t len = off[k];
        off[k] = nnz;
        nnz += len;
    }
    off[count] = nnz;
    dm_flock_msg_layout_of(&l, count, nnz);
    uint64_t head[3] = {count, nnz, 0};
    memcpy(buf, head, sizeof head);
    uint64_t *id = (uint64_t *)(buf + l.id);
    double *x = (double *)(buf + l.x), *y = (double *)(buf + l.y);
    double *vx = (double *)(buf + l.vx), *vy = (double *)(buf + l.vy);
    uint32_t *col = (uint32_t *)(buf + l.col);
    float *val = (float *)(buf + l.val);
    /* padding: no uninitialised bytes on the wire */
    memset(has + count, 0, l.col - l.has - count);
    memset(col + nnz, 0, l.val - l.col - sizeof *col * nnz);
    memset(val + nnz, 0, l.total - l.val - sizeof *val * nnz);
    /* the copies in parallel (the halo's vectors are megabytes every iteration) */
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long k = 0; k < nl; k++) {
        uint32_t i = idx[k];
        id[k] = s->id[i];
        if (state) {
            x[k] = state[4 * k];
            y[k] = state[4 * k + 1];
            vx[k] = state[4 * k + 2];
            vy[k] = state[4 * k + 3];
        } else {
            x[k] = s->x[i];
            y[k] = s->y[i];
            vx[k] = s->vx[i];
            vy[k] = s->vy[i];
        }
        if (has[k] && s->vlen[i]) {
            memcpy(col + off[k], s->col + s->voff[i], sizeof *col * s->vlen[i]);
            memcpy(val + off[k], s->val + s->voff[i], sizeof *val * s->vlen[i]);
        }
    }
}

/* A received message, checked: sections in bounds, offsets monotone, no vector for a boid
 * without has[k]. */
typedef struct msg_view {
    size_t n, nnz;
    const uint64_t *id, *off;
    const double *x, *y, *vx, *vy;
    const uint8_t *has;
    const uint32_t *col;
    const float *val;
} msg_view;

static int msg_view_of(msg_view *m, const char *buf, size_t size)
{
    if (size < DM_FLOCK_MSG_HEADER) return DM_ERR(DM_ERR_FORMAT, "flock: short exchange message (%zu bytes)", size);
    uint64_t head[3];
    memcpy(head, buf, sizeof head);
    dm_flock_msg_layout l;
    if (head[0] > size || head[1] > size) return DM_ERR(DM_ERR_FORMAT, "flock: corrupt exchange message");
    dm_flock_msg_layout_of(&l, head[0], head[1]);
    if (l.total != size) return DM_ERR(DM_ERR_FORMAT, "flock: exchange message of %zu bytes, expected %zu", size, l.total);
    m->n = (size_t)head[0];
    m->nnz = (size_t)head[1];
    m->id = (const uint64_t *)(buf + l.id);
    m->off = (const uint64_t *)(buf + l.off);
    m->x = (const double *)(buf + l.x);
    m->y = (const double *)(buf + l.y);
    m->vx = (const double *)(buf + l.vx);
    m->vy = (const double *)(buf + l.vy);
    m->has = (const uint8_t *)(buf + l.has);
    m->col = (const uint32_t *)(buf + l.col);
    m->val = (const float *)(buf + l.val);
    if (m->off[0] != 0 || m->off[m->n] != head[1]) return DM_ERR(DM_ERR_FORMAT, "flock: corrupt exchange offsets");
    for (size_t k = 0; k < m->n; k++) {
        if (m->off[k + 1] < m->off[k] || m->off[k + 1] - m->off[k] > UINT32_MAX)
            return DM_ERR(DM_ERR_FORMAT, "flock: corrupt exchange offsets");
        if (m->has[k] > 1 || (!m->has[k] && m->off[k + 1] != m->off[k]))
            return DM_ERR(DM_ERR_FORMAT, "flock: corrupt exchange vector flags");
    }
    return DM_OK;
}

int dm_flock_msg_unpack(dm_flock_store *s, const char *buf, size_t size)
{
    return dm_flock_msg_unpack_cached(s, buf, size, NULL);
}

/* The store's id -> boid map, built when stale. */
static int store_index(dm_flock_store *s)
{
    if (s->indexed && s->index.n == s->n) return DM_OK;
    s->index.threads = s->copy_threads;
    DM_TRY(dm_flock_idmap_build(&s->index, s->id, s->n));
    s->indexed = 1;
    return DM_OK;
}

int dm_flock_halo_unpack(dm_flock_store *s, char *const *bufs, const uint64_t *sizes, int n_msgs)
{
    msg_view m[2];
    DM_ASSERT(n_msgs >= 0 && n_msgs <= 2);
    size_t n_new = 0, nnz_new = 0;
    for (int k = 0; k < n_msgs; k++) {
        if (!bufs[k] || !sizes[k]) {
            memset(&m[k], 0, sizeof m[k]);
            continue;
        }
        DM_TRY(msg_view_of(&m[k], bufs[k], (size_t)sizes[k]));
        n_new += m[k].n;
        nnz_new += m[k].nnz;
    }
    /* the previous halo by document id (its voff/vlen are read before they are overwritten) */
    dm_timer_start("flock.comm.halo_unpack.index");
    int rc = store_index(s);
    dm_timer_stop("flock.comm.halo_unpack.index");
    const int threads = dm_threads_upto(s->copy_threads);
    /* per boid of the new halo, in message order (the clusters' halo labels rely on it): its
     * vector's place and length, nv[2 at], nv[2 at + 1]. A left-out vector stays where the
     * previous halo holds it; the lookups (a cache miss each, for nearly every boid) run in
     * parallel, then one pass gives the new vectors their places at the end of the pool. */
    uint64_t *nv = NULL;
    if (rc == DM_OK) rc = dm_flock_store_reserve(s, n_new > s->n ? n_new : s->n, s->pool + nnz_new);
    if (rc == DM_OK && !(nv = dm_flock_buf_reserve(&s->scratch, sizeof *nv * 2 * (n_new ? n_new : 1))))
        rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory for the halo vector cache");
    long missing = (long)n_new; /* the first boid whose left-out vector is not held here */
    for (int k = 0; k < n_msgs && rc == DM_OK; k++) {
        const msg_view *v = &m[k];
        const long nl = (long)v->n, base = k ? (long)m[0].n : 0;
        long first = (long)n_new;
#pragma omp parallel for schedule(static) num_threads(threads) reduction(min : first)
        for (long j = 0; j < nl; j++) {
            uint64_t *o = nv + 2 * ((size_t)base + (size_t)j);
            if (v->has[j]) {
                o[0] = UINT64_MAX; /* placed below */
                o[1] = v->off[j + 1] - v->off[j];
                continue;
            }
            uint32_t e = dm_flock_idmap_get(&s->index, v->id[j]);
            if (e == UINT32_MAX) {
                if (base + j < first) first = base + j;
                o[0] = o[1] = 0;
                continue;
            }
            o[0] = s->voff[e];
            o[1] = s->vlen[e];
        }
        if (first < missing) missing = first;
    }
    size_t pool = s->pool, live = 0;
    if (rc == DM_OK && missing < (long)n_new) {
        size_t k = 0, j = (size_t)missing;
        while (j >= m[k].n) j -= m[k++].n;
        rc = DM_ERR(DM_ERR_FORMAT,
                    "flock: halo message without the vector of document %llu, which this rank does not hold "
                    "(the neighbours' halo caches disagree)",
                    (unsigned long long)m[k].id[j]);
    }
    if (rc == DM_OK)
        for (size_t i = 0; i < n_new; i++) {
            if (nv[2 * i] == UINT64_MAX) {
                nv[2 * i] = pool;
                pool += nv[2 * i + 1];
            }
            live += nv[2 * i + 1];
        }
    if (rc != DM_OK) {
        dm_flock_store_clear(s);
        return rc;
    }
    size_t at = 0;
    for (int k = 0; k < n_msgs; k++) {
        const msg_view *v = &m[k];
        const long nl = (long)v->n;
        const size_t base = at;
#pragma omp parallel for schedule(static) num_threads(threads)
        for (long j = 0; j < nl; j++) {
            size_t i = base + (size_t)j;
            s->id[i] = v->id[j];
            s->x[i] = v->x[j];
            s->y[i] = v->y[j];
            s->vx[i] = v->vx[j];
            s->vy[i] = v->vy[j];
            s->voff[i] = nv[2 * i];
            s->vlen[i] = (uint32_t)nv[2 * i + 1];
            if (v->has[j] && s->vlen[i]) {
                memcpy(s->col + s->voff[i], v->col + v->off[j], sizeof *s->col * s->vlen[i]);
                memcpy(s->val + s->voff[i], v->val + v->off[j], sizeof *s->val * s->vlen[i]);
            }
        }
        at += v->n;
    }
    s->n = n_new;
    s->pool = pool;
    s->live = live;
    s->indexed = 0;
    dm_timer_start("flock.comm.halo_unpack.compact");
    rc = too_much_garbage(s) ? compact_pool(s) : DM_OK;
    dm_timer_stop("flock.comm.halo_unpack.compact");
    /* the next halo and the migration of this iteration look documents up by id */
    dm_timer_start("flock.comm.halo_unpack.index");
    if (rc == DM_OK) rc = store_index(s);
    dm_timer_stop("flock.comm.halo_unpack.index");
    return rc;
}

int dm_flock_msg_unpack_cached(dm_flock_store *s, const char *buf, size_t size, dm_flock_store *cache)
{
    msg_view m;
    DM_TRY(msg_view_of(&m, buf, size));
    size_t missing = 0;
    for (size_t k = 0; k < m.n; k++) missing += !m.has[k];
    if (missing && !cache) {
        for (size_t k = 0; k < m.n; k++)
            if (!m.has[k])
                return DM_ERR(DM_ERR_FORMAT, "flock: exchange message without the vector of document %llu",
                              (unsigned long long)m.id[k]);
    }
    /* the left-out vectors from the cache store (by document id) */
    uint32_t *src = NULL;
    size_t extra = 0;
    if (missing) {
        DM_TRY(store_index(cache));
        src = dm_malloc(sizeof *src * (m.n ? m.n : 1));
        if (!src) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
        for (size_t k = 0; k < m.n; k++) {
            if (m.has[k]) continue;
            src[k] = dm_flock_idmap_get(&cache->index, m.id[k]);
            if (src[k] == UINT32_MAX) {
                dm_free(src);
                return DM_ERR(DM_ERR_FORMAT, "flock: the vector of document %llu was left out and is not held here",
                              (unsigned long long)m.id[k]);
            }
            extra += cache->vlen[src[k]];
        }
    }
    const size_t n = m.n;
    int rc = dm_flock_store_reserve(s, s->n + n, s->pool + m.nnz + extra);
    /* the boids appended as by dm_flock_store_push one after the other (vectors at the end of the
     * pool in message order, wherever they came from), the copies in parallel */
    uint64_t *dst = rc == DM_OK ? dm_malloc(sizeof *dst * (n + 1)) : NULL;
    if (rc == DM_OK && !dst) rc = DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
    if (rc == DM_OK) {
        const size_t b = s->n, pool = s->pool;
        uint64_t at = 0;
        for (size_t k = 0; k < n; k++) {
            dst[k] = at;
            at += m.has[k] ? m.off[k + 1] - m.off[k] : cache->vlen[src[k]];
        }
        dst[n] = at;
        const long nl = (long)n;
#pragma omp parallel for schedule(static) num_threads(dm_threads_upto(s->copy_threads))
        for (long k = 0; k < nl; k++) {
            size_t i = b + (size_t)k;
            uint32_t len = (uint32_t)(dst[k + 1] - dst[k]);
            s->id[i] = m.id[k];
            s->x[i] = m.x[k];
            s->y[i] = m.y[k];
            s->vx[i] = m.vx[k];
            s->vy[i] = m.vy[k];
            s->voff[i] = pool + dst[k];
            s->vlen[i] = len;
            if (!len) continue;
            const uint32_t *fc = m.has[k] ? m.col + m.off[k] : cache->col + cache->voff[src[k]];
            const float *fv = m.has[k] ? m.val + m.off[k] : cache->val + cache->voff[src[k]];
            memcpy(s->col + pool + dst[k], fc, sizeof *fc * len);
            memcpy(s->val + pool + dst[k], fv, sizeof *fv * len);
        }
        s->n = b + n;
        s->indexed = 0;
        s->pool = pool + at;
        s->live += at;
    }
    dm_free(dst);
    dm_free(src);
    return rc;
}
