/* The host boid store (structure of arrays plus a vector pool) and the exchange message format
 * (flock_impl.h). Reference: none (data structures). */
#include <stdint.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "flock/flock_impl.h"

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
    memset(s, 0, sizeof *s);
}

void dm_flock_store_clear(dm_flock_store *s)
{
    s->n = s->pool = s->live = 0;
    s->compactions++; /* every offset is void: a device mirror must copy the pool again */
}

static int grow(void **p, size_t elem, size_t n)
{
    void *q = dm_realloc(*p, elem * (n ? n : 1));
    if (!q) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory for %zu boid entries", n);
    *p = q;
    return DM_OK;
}

int dm_flock_store_reserve(dm_flock_store *s, size_t n, size_t pool)
{
    if (n > s->cap) {
        size_t c = s->cap ? s->cap : 64;
        while (c < n) c += c / 2 + 1;
        DM_TRY(grow((void **)&s->id, sizeof *s->id, c));
        DM_TRY(grow((void **)&s->x, sizeof *s->x, c));
        DM_TRY(grow((void **)&s->y, sizeof *s->y, c));
        DM_TRY(grow((void **)&s->vx, sizeof *s->vx, c));
        DM_TRY(grow((void **)&s->vy, sizeof *s->vy, c));
        DM_TRY(grow((void **)&s->voff, sizeof *s->voff, c));
        DM_TRY(grow((void **)&s->vlen, sizeof *s->vlen, c));
        s->cap = c;
    }
    if (pool > s->pool_cap) {
        size_t c = s->pool_cap ? s->pool_cap : 1024;
        while (c < pool) c += c / 2 + 1;
        DM_TRY(grow((void **)&s->col, sizeof *s->col, c));
        DM_TRY(grow((void **)&s->val, sizeof *s->val, c));
        s->pool_cap = c;
    }
    return DM_OK;
}

int dm_flock_store_push(dm_flock_store *s, uint64_t id, double x, double y, double vx, double vy,
                        const uint32_t *col, const float *val, uint32_t len)
{
    DM_TRY(dm_flock_store_reserve(s, s->n + 1, s->pool + len));
    size_t i = s->n++;
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

/* Rebuilds the pool with the live vectors only, in boid order. */
static int compact_pool(dm_flock_store *s)
{
    uint32_t *col = dm_malloc(sizeof *col * (s->live ? s->live : 1));
    float *val = dm_malloc(sizeof *val * (s->live ? s->live : 1));
    if (!col || !val) {
        dm_free(col);
        dm_free(val);
        return DM_ERR(DM_ERR_NOMEM, "flock: out of memory compacting vectors");
    }
    size_t at = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->vlen[i]) {
            memcpy(col + at, s->col + s->voff[i], sizeof *col * s->vlen[i]);
            memcpy(val + at, s->val + s->voff[i], sizeof *val * s->vlen[i]);
        }
        s->voff[i] = at;
        at += s->vlen[i];
    }
    DM_ASSERT(at == s->live);
    dm_free(s->col);
    dm_free(s->val);
    s->col = col;
    s->val = val;
    s->pool = s->pool_cap = at;
    s->compactions++;
    return DM_OK;
}

int dm_flock_store_remove(dm_flock_store *s, const uint8_t *keep, uint32_t *moved_dst, uint32_t *moved_src,
                          size_t *n_moved)
{
    size_t moves = 0;
    size_t i = 0, j = s->n; /* [i, j): not yet decided; boids >= j are removed */
    while (i < j) {
        if (keep[i]) {
            i++;
            continue;
        }
        s->live -= s->vlen[i];
        /* the last undecided boid fills the hole if it stays */
        while (j > i + 1 && !keep[j - 1]) {
            j--;
            s->live -= s->vlen[j];
        }
        j--;
        if (j == i) break; /* the hole was the last undecided boid */
        s->id[i] = s->id[j];
        s->x[i] = s->x[j];
        s->y[i] = s->y[j];
        s->vx[i] = s->vx[j];
        s->vy[i] = s->vy[j];
        s->voff[i] = s->voff[j];
        s->vlen[i] = s->vlen[j];
        if (moved_dst) {
            moved_dst[moves] = (uint32_t)i;
            moved_src[moves] = (uint32_t)j;
        }
        moves++;
        i++;
    }
    s->n = i;
    if (n_moved) *n_moved = moves;
    if (s->pool > 2 * s->live + 4096) DM_TRY(compact_pool(s));
    return DM_OK;
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
                       const uint8_t *with_vec)
{
    uint64_t nnz = 0;
    for (size_t k = 0; k < count; k++)
        if (!with_vec || with_vec[k]) nnz += s->vlen[idx[k]];
    dm_flock_msg_layout l;
    dm_flock_msg_layout_of(&l, count, nnz);
    uint64_t head[3] = {count, nnz, 0};
    memcpy(buf, head, sizeof head);
    uint64_t *id = (uint64_t *)(buf + l.id), *off = (uint64_t *)(buf + l.off);
    double *x = (double *)(buf + l.x), *y = (double *)(buf + l.y);
    double *vx = (double *)(buf + l.vx), *vy = (double *)(buf + l.vy);
    uint8_t *has = (uint8_t *)(buf + l.has);
    uint32_t *col = (uint32_t *)(buf + l.col);
    float *val = (float *)(buf + l.val);
    uint64_t at = 0;
    for (size_t k = 0; k < count; k++) {
        off[k] = at;
        has[k] = (uint8_t)(!with_vec || with_vec[k]);
        if (has[k]) at += s->vlen[idx[k]];
    }
    off[count] = at;
    memset(has + count, 0, l.col - l.has - count); /* padding: no uninitialised bytes on the wire */
    /* the copies in parallel (the halo's vectors are megabytes every iteration) */
    const long nl = (long)count;
#pragma omp parallel for schedule(static)
    for (long k = 0; k < nl; k++) {
        uint32_t i = idx[k];
        id[k] = s->id[i];
        x[k] = s->x[i];
        y[k] = s->y[i];
        vx[k] = s->vx[i];
        vy[k] = s->vy[i];
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

/* The previous halo's vectors by document id (sorted for binary search). */
typedef struct cached_vec {
    uint64_t id, voff;
    uint32_t len;
} cached_vec;

static int cached_cmp(const void *a, const void *b)
{
    uint64_t x = ((const cached_vec *)a)->id, y = ((const cached_vec *)b)->id;
    return x < y ? -1 : x > y;
}

static const cached_vec *cached_find(const cached_vec *c, size_t n, uint64_t id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && c[lo].id == id ? &c[lo] : NULL;
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
    cached_vec *c = dm_malloc(sizeof *c * (s->n ? s->n : 1));
    if (!c) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory for the halo vector cache");
    const size_t n_old = s->n;
    for (size_t i = 0; i < n_old; i++) {
        c[i].id = s->id[i];
        c[i].voff = s->voff[i];
        c[i].len = s->vlen[i];
    }
    qsort(c, n_old, sizeof *c, cached_cmp);
    int rc = dm_flock_store_reserve(s, n_new, s->pool + nnz_new);
    /* the boids in message order (the clusters' halo labels rely on it); new vectors appended to
     * the pool, cached ones keep their place */
    size_t at = 0, pool = s->pool, live = 0;
    for (int k = 0; k < n_msgs && rc == DM_OK; k++) {
        const msg_view *v = &m[k];
        for (size_t j = 0; j < v->n; j++, at++) {
            s->id[at] = v->id[j];
            s->x[at] = v->x[j];
            s->y[at] = v->y[j];
            s->vx[at] = v->vx[j];
            s->vy[at] = v->vy[j];
            if (v->has[j]) {
                uint32_t len = (uint32_t)(v->off[j + 1] - v->off[j]);
                s->voff[at] = pool;
                s->vlen[at] = len;
                if (len) {
                    memcpy(s->col + pool, v->col + v->off[j], sizeof *s->col * len);
                    memcpy(s->val + pool, v->val + v->off[j], sizeof *s->val * len);
                }
                pool += len;
            } else {
                const cached_vec *e = cached_find(c, n_old, v->id[j]);
                if (!e) {
                    rc = DM_ERR(DM_ERR_FORMAT,
                                "flock: halo message without the vector of document %llu, which this rank "
                                "does not hold (the neighbours' halo caches disagree)",
                                (unsigned long long)v->id[j]);
                    break;
                }
                s->voff[at] = e->voff;
                s->vlen[at] = e->len;
            }
            live += s->vlen[at];
        }
    }
    dm_free(c);
    if (rc != DM_OK) {
        dm_flock_store_clear(s);
        return rc;
    }
    s->n = n_new;
    s->pool = pool;
    s->live = live;
    if (s->pool > 2 * s->live + 4096) DM_TRY(compact_pool(s));
    return DM_OK;
}

int dm_flock_msg_unpack_cached(dm_flock_store *s, const char *buf, size_t size, const dm_flock_store *cache)
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
    cached_vec *c = NULL;
    const cached_vec **src = NULL;
    size_t nc = 0, extra = 0;
    if (missing) {
        nc = cache->n;
        c = dm_malloc(sizeof *c * (nc ? nc : 1));
        src = dm_calloc(m.n ? m.n : 1, sizeof *src);
        if (!c || !src) {
            dm_free(c);
            dm_free(src);
            return DM_ERR(DM_ERR_NOMEM, "flock: out of memory");
        }
        for (size_t i = 0; i < nc; i++) {
            c[i].id = cache->id[i];
            c[i].voff = cache->voff[i];
            c[i].len = cache->vlen[i];
        }
        qsort(c, nc, sizeof *c, cached_cmp);
        for (size_t k = 0; k < m.n; k++) {
            if (m.has[k]) continue;
            src[k] = cached_find(c, nc, m.id[k]);
            if (!src[k]) {
                dm_free(c);
                dm_free(src);
                return DM_ERR(DM_ERR_FORMAT, "flock: the vector of document %llu was left out and is not held here",
                              (unsigned long long)m.id[k]);
            }
            extra += src[k]->len;
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
            at += m.has[k] ? m.off[k + 1] - m.off[k] : src[k]->len;
        }
        dst[n] = at;
        const long nl = (long)n;
#pragma omp parallel for schedule(static)
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
            const uint32_t *fc = m.has[k] ? m.col + m.off[k] : cache->col + src[k]->voff;
            const float *fv = m.has[k] ? m.val + m.off[k] : cache->val + src[k]->voff;
            memcpy(s->col + pool + dst[k], fc, sizeof *fc * len);
            memcpy(s->val + pool + dst[k], fv, sizeof *fv * len);
        }
        s->n = b + n;
        s->pool = pool + at;
        s->live += at;
    }
    dm_free(dst);
    dm_free(c);
    dm_free(src);
    return rc;
}
