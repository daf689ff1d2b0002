/* The token stream: building it from tokenised batches (with the vocabulary of distinct stems and
 * collision detection), its binary file format (write/read with CRC; named inputs opened only when
 * they are regular files) and the text dump. Reference: the format described in preprocess.h. */
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/rng.h"
#include "common/status.h"
#include "preprocess/preprocess.h"
#include "preprocess/stream_build.h"

void dm_token_stream_free(dm_token_stream *s)
{
    if (!s) return;
    dm_free(s->tok_off);
    dm_free(s->hashes);
    dm_free(s->id_off);
    dm_free(s->ids);
    dm_free(s->label_off);
    dm_free(s->labels);
    dm_free(s->term_hash);
    dm_free(s->term_off);
    dm_free(s->term_bytes);
    dm_device_free(s->dev_hashes);
    memset(s, 0, sizeof(*s));
}

long dm_token_stream_term_find(const dm_token_stream *s, uint64_t hash)
{
    size_t lo = 0, hi = s->n_terms;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->term_hash[mid] < hash) lo = mid + 1;
        else hi = mid;
    }
    return lo < s->n_terms && s->term_hash[lo] == hash ? (long)lo : -1;
}

/* ------------------------------------------------------------------ growable arrays */

static int dm_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return DM_OK;
    size_t nc = *cap ? *cap : 1024;
    while (nc < need) nc *= 2;
    void *q = dm_realloc(*p, nc * elem);
    if (!q) return DM_ERR(DM_ERR_NOMEM, "token stream: cannot grow to %zu entries", nc);
    *p = q;
    *cap = nc;
    return DM_OK;
}

/* ------------------------------------------------------------------ prefaulting (stream_build.h) */

enum { DM_SB_PF_HASHES, DM_SB_PF_IDS, DM_SB_PF_LABELS, DM_SB_PF_TOK_OFF, DM_SB_PF_ID_OFF, DM_SB_PF_LABEL_OFF,
       DM_SB_PF_ARRAYS };
/* Bytes per populate call: a commit that grows waits for the calls in flight, so a chunk is
 * short (~1 ms); large enough that the lock round trips do not count. */
#define DM_SB_PF_CHUNK ((size_t)1 << 20)

typedef struct dm_sb_prefault {
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* work published, pause lifted, or stop */
    pthread_cond_t idle_cv; /* the last populate in flight ended (a paused grower waits) */
    pthread_t th[DM_SB_PF_THREADS];
    int n_threads, stop, paused, inflight;
    /* per array: the block as last published, its next byte to populate and the end of the
     * wanted range (next == end: nothing to do) */
    char *base[DM_SB_PF_ARRAYS];
    size_t next[DM_SB_PF_ARRAYS], end[DM_SB_PF_ARRAYS];
    double seconds;
    uint64_t bytes;
} dm_sb_prefault;

static double dm_sb_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *dm_sb_pf_main(void *arg)
{
    dm_sb_prefault *pf = arg;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    if (page == 0 || (page & (page - 1))) page = 4096;
    pthread_mutex_lock(&pf->mu);
    for (;;) {
        int k = -1;
        while (!pf->stop) {
            if (!pf->paused)
                for (int i = 0; i < DM_SB_PF_ARRAYS && k < 0; i++)
                    if (pf->next[i] < pf->end[i]) k = i;
            if (k >= 0) break;
            pthread_cond_wait(&pf->cv, &pf->mu);
        }
        if (pf->stop) break;
        size_t from = pf->next[k], to = pf->end[k] - from > DM_SB_PF_CHUNK ? from + DM_SB_PF_CHUNK : pf->end[k];
        pf->next[k] = to;
        uintptr_t a = ((uintptr_t)pf->base[k] + from) & ~(page - 1); /* a page shared with the array's */
        uintptr_t e = ((uintptr_t)pf->base[k] + to) & ~(page - 1);   /* start is populated, a partial last one is not */
        pf->inflight++;
        pthread_mutex_unlock(&pf->mu);
        double t0 = dm_sb_now();
        int err = 0;
#ifdef MADV_POPULATE_WRITE
        if (e > a && madvise((void *)a, (size_t)(e - a), MADV_POPULATE_WRITE) != 0) err = errno;
#else
        err = EINVAL;
#endif
        double t1 = dm_sb_now();
        pthread_mutex_lock(&pf->mu);
        pf->seconds += t1 - t0;
        if (!err) pf->bytes += (uint64_t)(e - a);
        if (err == EINVAL) pf->stop = 1; /* no MADV_POPULATE_WRITE: the fills fault as before */
        if (--pf->inflight == 0) pthread_cond_broadcast(&pf->idle_cv);
    }
    pthread_mutex_unlock(&pf->mu);
    return NULL;
}

/* Before a block may move: no populate starts, and those in flight end. */
static void dm_sb_pf_pause(dm_sb_prefault *pf)
{
    if (!pf) return;
    pthread_mutex_lock(&pf->mu);
    pf->paused = 1;
    while (pf->inflight) pthread_cond_wait(&pf->idle_cv, &pf->mu);
    pthread_mutex_unlock(&pf->mu);
}

/* After the grow: the published ranges may name moved blocks, so nothing is populated until
 * the next dm_sb_pf_publish. */
static void dm_sb_pf_resume(dm_sb_prefault *pf)
{
    if (!pf) return;
    pthread_mutex_lock(&pf->mu);
    pf->paused = 0;
    for (int i = 0; i < DM_SB_PF_ARRAYS; i++) pf->end[i] = pf->next[i];
    pthread_mutex_unlock(&pf->mu);
}

/* After a commit of a batch of nd documents, nt tokens, il id and ll label bytes: the ranges of
 * the next DM_SB_PF_AHEAD such batches (within the reserved capacity), beyond what the fills of
 * committed batches write themselves. */
static void dm_sb_pf_publish(dm_stream_builder *b, size_t nd, size_t nt, size_t il, size_t ll)
{
    dm_sb_prefault *pf = b->pf;
    if (!pf) return;
    dm_token_stream *s = &b->s;
    size_t d = (s->n_docs + 1) * sizeof(uint64_t);
    char *base[DM_SB_PF_ARRAYS] = {(char *)s->hashes, s->ids, s->labels, (char *)s->tok_off, (char *)s->id_off,
                                   (char *)s->label_off};
    size_t used[DM_SB_PF_ARRAYS] = {s->n_tokens * sizeof(uint64_t), b->ids_len, b->labels_len, d, d, d};
    size_t cap[DM_SB_PF_ARRAYS] = {b->hashes_cap * sizeof(uint64_t), b->ids_cap, b->labels_cap,
                                   b->tok_off_cap * sizeof(uint64_t), b->id_off_cap * sizeof(uint64_t),
                                   b->label_off_cap * sizeof(uint64_t)};
    size_t step[DM_SB_PF_ARRAYS] = {nt * sizeof(uint64_t), il, ll, nd * sizeof(uint64_t), nd * sizeof(uint64_t),
                                    nd * sizeof(uint64_t)};
    pthread_mutex_lock(&pf->mu);
    for (int i = 0; i < DM_SB_PF_ARRAYS; i++) {
        if (base[i] != pf->base[i]) { /* moved or new: populated pages before used are the fills' */
            pf->base[i] = base[i];
            pf->next[i] = used[i];
        } else if (pf->next[i] < used[i]) {
            pf->next[i] = used[i]; /* behind: the fills fault that range themselves */
        }
        size_t want = used[i] + DM_SB_PF_AHEAD * step[i];
        pf->end[i] = want < cap[i] ? want : cap[i];
        if (pf->end[i] < pf->next[i] || !base[i]) pf->end[i] = pf->next[i];
    }
    pthread_cond_broadcast(&pf->cv);
    pthread_mutex_unlock(&pf->mu);
}

/* Stops and joins the threads; returns their totals. */
static void dm_sb_pf_join(dm_stream_builder *b, double *seconds, uint64_t *bytes)
{
    dm_sb_prefault *pf = b->pf;
    if (seconds) *seconds = 0;
    if (bytes) *bytes = 0;
    if (!pf) return;
    pthread_mutex_lock(&pf->mu);
    pf->stop = 1;
    pthread_cond_broadcast(&pf->cv);
    pthread_mutex_unlock(&pf->mu);
    for (int i = 0; i < pf->n_threads; i++) pthread_join(pf->th[i], NULL);
    if (seconds) *seconds = pf->seconds;
    if (bytes) *bytes = pf->bytes;
    pthread_mutex_destroy(&pf->mu);
    pthread_cond_destroy(&pf->cv);
    pthread_cond_destroy(&pf->idle_cv);
    dm_free(pf);
    b->pf = NULL;
}

int dm_sb_prefault_start(dm_stream_builder *b)
{
    if (!b) return DM_ERR(DM_ERR_INVALID_ARG, "dm_sb_prefault_start: NULL argument");
    if (b->pf) return DM_OK;
    dm_sb_prefault *pf = dm_calloc(1, sizeof(*pf));
    if (!pf) return DM_ERR(DM_ERR_NOMEM, "token stream: out of memory");
    if (pthread_mutex_init(&pf->mu, NULL) != 0 || pthread_cond_init(&pf->cv, NULL) != 0 ||
        pthread_cond_init(&pf->idle_cv, NULL) != 0) {
        dm_free(pf); /* (a failed init leaves nothing to destroy on Linux) */
        return DM_ERR(DM_ERR_NOMEM, "token stream: cannot create a lock");
    }
    b->pf = pf;
    for (int i = 0; i < DM_SB_PF_THREADS; i++) {
        if (pthread_create(&pf->th[i], NULL, dm_sb_pf_main, pf) != 0) {
            dm_sb_pf_join(b, NULL, NULL);
            return DM_ERR(DM_ERR_NOMEM, "token stream: cannot start a prefault thread");
        }
        pf->n_threads++;
    }
    return DM_OK;
}

/* Gives back the capacity reserved beyond the end (the lookahead populated for batches that did
 * not come): a shrinking realloc does not copy. */
static void dm_sb_trim(void **p, size_t *cap, size_t need, size_t elem)
{
    if (!*p || need >= *cap) return;
    void *q = dm_realloc(*p, (need ? need : 1) * elem);
    if (!q) return;
    *p = q;
    *cap = need ? need : 1;
}

void dm_sb_prefault_stop(dm_stream_builder *b, double *seconds, uint64_t *bytes)
{
    int had = b && b->pf;
    dm_sb_pf_join(b, seconds, bytes);
    if (!had) return;
    dm_token_stream *s = &b->s;
    dm_sb_trim((void **)&s->hashes, &b->hashes_cap, s->n_tokens, sizeof(uint64_t));
    dm_sb_trim((void **)&s->ids, &b->ids_cap, b->ids_len, 1);
    dm_sb_trim((void **)&s->labels, &b->labels_cap, b->labels_len, 1);
    dm_sb_trim((void **)&s->tok_off, &b->tok_off_cap, s->n_docs + 1, sizeof(uint64_t));
    dm_sb_trim((void **)&s->id_off, &b->id_off_cap, s->n_docs + 1, sizeof(uint64_t));
    dm_sb_trim((void **)&s->label_off, &b->label_off_cap, s->n_docs + 1, sizeof(uint64_t));
}

/* ------------------------------------------------------------------ builder */

int dm_sb_init(dm_stream_builder *b)
{
    memset(b, 0, sizeof(*b));
    if (pthread_rwlock_init(&b->grow_lock, NULL) != 0) return DM_ERR(DM_ERR_NOMEM, "token stream: cannot create a lock");
    b->map_cap = 1 << 16;
    b->map = dm_calloc(b->map_cap, sizeof(*b->map));
    if (!b->map) return DM_ERR(DM_ERR_NOMEM, "token stream: out of memory");
    DM_TRY(dm_grow((void **)&b->s.tok_off, &b->tok_off_cap, 1, sizeof(uint64_t)));
    DM_TRY(dm_grow((void **)&b->s.id_off, &b->id_off_cap, 1, sizeof(uint64_t)));
    DM_TRY(dm_grow((void **)&b->s.label_off, &b->label_off_cap, 1, sizeof(uint64_t)));
    b->s.tok_off[0] = b->s.id_off[0] = b->s.label_off[0] = 0;
    return DM_OK;
}

void dm_sb_free(dm_stream_builder *b)
{
    dm_sb_pf_join(b, NULL, NULL);
    dm_token_stream_free(&b->s);
    dm_free(b->map);
    dm_free(b->t_hash);
    dm_free(b->t_off);
    dm_free(b->t_len);
    dm_free(b->t_bytes);
    pthread_rwlock_destroy(&b->grow_lock);
    memset(b, 0, sizeof(*b));
}

void dm_sb_device_start(dm_stream_builder *b, size_t limit)
{
    b->dev = 1;
    b->dev_limit = limit;
}

/* Room for need hashes: on the device in device mode; where the device array cannot grow, the
 * hashes filled so far move to a host array and the builder continues on the host (every fill
 * has finished: the caller holds the write lock). */
static int dm_sb_hashes_grow(dm_stream_builder *b, size_t need)
{
    dm_token_stream *s = &b->s;
    if (b->dev) {
        int rc = dm_pp_cuda_dev_grow(&s->dev_hashes, &b->hashes_cap, need, s->n_tokens, b->dev_limit);
        if (rc != DM_ERR_NOMEM) return rc;
        dm_error_clear();
        size_t cap = 0;
        uint64_t *h = NULL;
        DM_TRY(dm_grow((void **)&h, &cap, need, sizeof(uint64_t)));
        rc = dm_pp_cuda_copy(h, s->dev_hashes, s->n_tokens * sizeof(uint64_t));
        if (rc < 0) {
            dm_free(h);
            return rc;
        }
        dm_device_free(s->dev_hashes);
        s->dev_hashes = NULL;
        s->hashes = h;
        b->hashes_cap = cap;
        b->dev = 0;
        b->dev_moved = 1;
        return DM_OK;
    }
    return dm_grow((void **)&s->hashes, &b->hashes_cap, need, sizeof(uint64_t));
}

/* Makes room for n_docs more documents, n_tok more tokens and il / ll more id / label bytes. */
static int dm_sb_reserve(dm_stream_builder *b, size_t n_docs, size_t n_tok, size_t il, size_t ll)
{
    dm_token_stream *s = &b->s;
    size_t d = s->n_docs + n_docs + 1;
    if (b->ids_len + il <= b->ids_cap && b->labels_len + ll <= b->labels_cap && d <= b->id_off_cap &&
        d <= b->label_off_cap && d <= b->tok_off_cap && s->n_tokens + n_tok <= b->hashes_cap)
        return DM_OK;
    dm_sb_pf_pause(b->pf); /* blocks may move */
    int rc = dm_grow((void **)&s->ids, &b->ids_cap, b->ids_len + il, 1);
    if (rc >= 0) rc = dm_grow((void **)&s->labels, &b->labels_cap, b->labels_len + ll, 1);
    if (rc >= 0) rc = dm_grow((void **)&s->id_off, &b->id_off_cap, d, sizeof(uint64_t));
    if (rc >= 0) rc = dm_grow((void **)&s->label_off, &b->label_off_cap, d, sizeof(uint64_t));
    if (rc >= 0) rc = dm_grow((void **)&s->tok_off, &b->tok_off_cap, d, sizeof(uint64_t));
    if (rc >= 0) rc = dm_sb_hashes_grow(b, s->n_tokens + n_tok);
    dm_sb_pf_resume(b->pf);
    return rc;
}

int dm_sb_add_doc(dm_stream_builder *b, const char *id, const char *labels)
{
    dm_token_stream *s = &b->s;
    size_t il = strlen(id) + 1, ll = strlen(labels) + 1;
    size_t d = s->n_docs;
    DM_TRY(dm_sb_reserve(b, 1, 0, il, ll));
    memcpy(s->ids + b->ids_len, id, il);
    memcpy(s->labels + b->labels_len, labels, ll);
    b->ids_len += il;
    b->labels_len += ll;
    s->id_off[d + 1] = b->ids_len;
    s->label_off[d + 1] = b->labels_len;
    s->tok_off[d + 1] = s->n_tokens;
    s->n_docs++;
    if (labels[0]) s->stats.docs_labelled++;
    s->stats.docs++;
    return DM_OK;
}

static int dm_sb_map_grow(dm_stream_builder *b)
{
    size_t nc = b->map_cap * 2;
    uint32_t *m = dm_calloc(nc, sizeof(*m));
    if (!m) return DM_ERR(DM_ERR_NOMEM, "vocabulary: out of memory");
    for (size_t t = 0; t < b->n_terms; t++) {
        size_t i = (size_t)(b->t_hash[t] & (nc - 1));
        while (m[i]) i = (i + 1) & (nc - 1);
        m[i] = (uint32_t)(t + 1);
    }
    dm_free(b->map);
    b->map = m;
    b->map_cap = nc;
    return DM_OK;
}

/* Vocabulary insert: entries are (hash, bytes); equal hash with different bytes = collision. */
static int dm_sb_term(dm_stream_builder *b, uint64_t h, const char *w, size_t n)
{
    size_t mask = b->map_cap - 1;
    for (size_t i = (size_t)(h & mask);; i = (i + 1) & mask) {
        uint32_t e = b->map[i];
        if (!e) break;
        size_t t = e - 1;
        if (b->t_hash[t] == h) {
            if (b->t_len[t] == n && memcmp(b->t_bytes + b->t_off[t], w, n) == 0) return DM_OK;
        }
    }
    /* new entry: is it a collision with an existing hash? */
    for (size_t i = (size_t)(h & mask);; i = (i + 1) & mask) {
        uint32_t e = b->map[i];
        if (!e) break;
        if (b->t_hash[e - 1] == h) {
            b->s.stats.hash_collisions++;
            break;
        }
    }
    size_t t = b->n_terms;
    if (t + 1 >= UINT32_MAX) return DM_ERR(DM_ERR_NOMEM, "vocabulary: more than 2^32 terms");
    DM_TRY(dm_grow((void **)&b->t_hash, &b->t_cap, t + 1, sizeof(uint64_t)));
    size_t c1 = b->t_cap_off;
    DM_TRY(dm_grow((void **)&b->t_off, &c1, t + 1, sizeof(uint64_t)));
    size_t c2 = b->t_cap_off;
    DM_TRY(dm_grow((void **)&b->t_len, &c2, t + 1, sizeof(uint8_t)));
    b->t_cap_off = c1 < c2 ? c1 : c2;
    DM_TRY(dm_grow((void **)&b->t_bytes, &b->t_bytes_cap, b->t_bytes_len + n, 1));
    b->t_hash[t] = h;
    b->t_off[t] = b->t_bytes_len;
    b->t_len[t] = (uint8_t)n;
    memcpy(b->t_bytes + b->t_bytes_len, w, n);
    b->t_bytes_len += n;
    b->n_terms++;
    if (2 * b->n_terms > b->map_cap) DM_TRY(dm_sb_map_grow(b));
    mask = b->map_cap - 1;
    size_t i = (size_t)(h & mask);
    while (b->map[i]) i = (i + 1) & mask;
    b->map[i] = (uint32_t)(t + 1);
    return DM_OK;
}

static void dm_sb_add_counts(dm_token_stream *s, const dm_tok_result *r)
{
    s->stats.tokens += r->n_tokens;
    s->stats.tokens_short += r->n_short;
    s->stats.tokens_long += r->n_long;
    s->stats.tokens_number += r->n_number;
    s->stats.tokens_stop += r->n_stop;
}

int dm_sb_add_tokens(dm_stream_builder *b, size_t first_doc, const dm_tok_result *r)
{
    dm_token_stream *s = &b->s;
    if (first_doc + r->n_docs != s->n_docs)
        return DM_ERR(DM_ERR_INVALID_ARG, "token stream: batch of %zu documents from %zu does not end at %zu",
                      r->n_docs, first_doc, s->n_docs);
    DM_TRY(dm_sb_reserve(b, 0, r->n_tokens, 0, 0));
    uint64_t base = s->n_tokens;
    for (size_t d = 0; d < r->n_docs; d++) s->tok_off[first_doc + d + 1] = base + r->doc_tok[d + 1];
    if (r->n_tokens) memcpy(s->hashes + s->n_tokens, r->hash, r->n_tokens * sizeof(uint64_t));
    for (size_t i = 0; i < r->n_tokens; i++)
        DM_TRY(dm_sb_term(b, r->hash[i], r->stems + r->start[i], r->stem_len[i]));
    s->n_tokens += r->n_tokens;
    dm_sb_add_counts(s, r);
    return DM_OK;
}

/* ------------------------------------------------------------------ per-batch build */

void dm_sb_batch_free(dm_sb_batch *p)
{
    if (!p) return;
    dm_free(p->term_hash);
    dm_free(p->term_off);
    dm_free(p->term_len);
    dm_free(p->term_bytes);
    dm_free(p->tab);
    dm_free(p->id_off);
    dm_free(p->label_off);
    dm_free(p->ids);
    dm_free(p->labels);
    memset(p, 0, sizeof(*p));
}

/* Slot value of a distinct term: its bytes' offset and length, never 0 (0 = empty slot). */
#define DM_SB_SLOT(off, len) ((uint64_t)(off) << 9 | (uint64_t)(len) << 1 | 1u)

static void dm_sb_tab_put(uint64_t *tab, size_t mask, uint64_t h, uint64_t v)
{
    size_t k = (size_t)(h & mask);
    while (tab[2 * k + 1]) k = (k + 1) & mask;
    tab[2 * k] = h;
    tab[2 * k + 1] = v;
}

static int dm_sb_tab_rehash(dm_sb_batch *p, size_t nc)
{
    uint64_t *t = dm_calloc(2 * nc, sizeof(uint64_t));
    if (!t) return DM_ERR(DM_ERR_NOMEM, "vocabulary: out of memory");
    for (size_t k = 0; k < p->n_terms; k++)
        dm_sb_tab_put(t, nc - 1, p->term_hash[k], DM_SB_SLOT(p->term_off[k], p->term_len[k]));
    dm_free(p->tab);
    p->tab = t;
    p->tab_cap = nc;
    return DM_OK;
}

/* Distance (in tokens) at which the table slot of a later token is prefetched: a probe misses
 * the cache when the table outgrows it, and the hashes are known in advance. */
#define DM_SB_PREFETCH 16

/* Equality of two short byte strings (stems average a few bytes: a libc memcmp call costs more
 * than the comparison). */
static inline int dm_sb_eq(const char *a, const char *b, size_t n)
{
    for (; n >= 8; a += 8, b += 8, n -= 8) {
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y) return 0;
    }
    for (; n; n--)
        if (*a++ != *b++) return 0;
    return 1;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define DM_SB_WORDS 1
/* The same when 8 bytes may be read from both a and b: one masked word compare for the usual
 * stem of at most 8 bytes, no length-dependent branch (little-endian: the first bytes are the
 * low ones). */
static inline int dm_sb_eq8(const char *a, const char *b, size_t n)
{
    uint64_t x, y;
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    if (n <= 8) {
        uint64_t m = n == 8 ? ~(uint64_t)0 : (((uint64_t)1 << (8 * n)) - 1);
        return ((x ^ y) & m) == 0;
    }
    return x == y && dm_sb_eq(a + 8, b + 8, n - 8);
}
#endif

static int dm_sb_batch_terms(dm_sb_batch *p, const dm_tok_result *r)
{
    p->n_terms = 0;
    p->term_bytes_len = 0;
    if (!p->tab) DM_TRY(dm_sb_tab_rehash(p, 4096));
    else memset(p->tab, 0, 2 * p->tab_cap * sizeof(uint64_t));
    const uint64_t *hash = r->hash, *start = r->start;
    const uint8_t *len = r->stem_len;
    const char *stems = r->stems;
    size_t n = r->n_tokens;
    /* bytes up to the end of the last stem belong to the stems buffer: a token starting 8 or
     * more bytes before that end can be read as a word */
    uint64_t safe = n ? start[n - 1] + len[n - 1] : 0;
    /* with the backend's list of possible first occurrences (dm_tok_result.first), only those
     * tokens: every other one repeats a listed token's term, already in the table */
    const uint64_t *list = r->first;
    size_t m = list ? r->n_first : n;
    for (size_t q = 0; q < m; q++) {
        size_t mask = p->tab_cap - 1;
        size_t i = list ? (size_t)list[q] : q;
        if (i >= n) return DM_ERR(DM_ERR_INVALID_ARG, "token stream: first-occurrence index %zu of %zu tokens", i, n);
#if defined(__GNUC__)
        if (q + DM_SB_PREFETCH < m)
            __builtin_prefetch(p->tab + 2 * (hash[list ? (size_t)list[q + DM_SB_PREFETCH] : q + DM_SB_PREFETCH] & mask));
#endif
        uint64_t h = hash[i];
        const char *w = stems + start[i];
        size_t l = len[i];
        uint64_t want = (uint64_t)l << 1 | 1u;
        size_t k = (size_t)(h & mask);
        int found = 0;
        for (uint64_t v; (v = p->tab[2 * k + 1]) != 0; k = (k + 1) & mask) {
            if (p->tab[2 * k] != h || (v & 0x1ff) != want) continue;
#ifdef DM_SB_WORDS
            if (start[i] + 8 <= safe ? dm_sb_eq8(p->term_bytes + (v >> 9), w, l) : dm_sb_eq(p->term_bytes + (v >> 9), w, l)) {
#else
            if (dm_sb_eq(p->term_bytes + (v >> 9), w, l)) {
#endif
                found = 1;
                break;
            }
        }
        if (found) continue;
        /* first occurrence in this batch */
        size_t t = p->n_terms;
        if (t + 1 > p->terms_cap) {
            size_t nc = p->terms_cap ? 2 * p->terms_cap : 4096;
            uint64_t *th = dm_realloc(p->term_hash, nc * sizeof(uint64_t));
            if (th) p->term_hash = th;
            uint64_t *to = dm_realloc(p->term_off, nc * sizeof(uint64_t));
            if (to) p->term_off = to;
            uint8_t *tl = dm_realloc(p->term_len, nc);
            if (tl) p->term_len = tl;
            if (!th || !to || !tl) return DM_ERR(DM_ERR_NOMEM, "vocabulary: out of memory");
            p->terms_cap = nc;
        }
        /* + 8: a word may be read at any term's start */
        DM_TRY(dm_grow((void **)&p->term_bytes, &p->term_bytes_cap, p->term_bytes_len + l + 8, 1));
        memcpy(p->term_bytes + p->term_bytes_len, w, l);
        memset(p->term_bytes + p->term_bytes_len + l, 0, 8); /* defined bytes for word reads */
        p->term_hash[t] = h;
        p->term_off[t] = p->term_bytes_len;
        p->term_len[t] = (uint8_t)l;
        p->tab[2 * k] = h;
        p->tab[2 * k + 1] = DM_SB_SLOT(p->term_bytes_len, l);
        p->term_bytes_len += l;
        p->n_terms++;
        if (2 * p->n_terms > p->tab_cap) DM_TRY(dm_sb_tab_rehash(p, 2 * p->tab_cap));
    }
    return DM_OK;
}

int dm_sb_batch_prepare(dm_sb_batch *p, const dm_tok_result *r, const char *meta)
{
    if (!p || !r || (!meta && r->n_docs)) return DM_ERR(DM_ERR_INVALID_ARG, "dm_sb_batch_prepare: NULL argument");
    p->committed = 0;
    p->n_docs = 0;
    p->n_labelled = 0;
    size_t nd = r->n_docs;
    if (nd + 1 > p->docs_cap) {
        size_t nc = p->docs_cap ? p->docs_cap : 1024;
        while (nc < nd + 1) nc *= 2;
        uint64_t *a = dm_realloc(p->id_off, nc * sizeof(uint64_t));
        if (a) p->id_off = a;
        uint64_t *c = dm_realloc(p->label_off, nc * sizeof(uint64_t));
        if (c) p->label_off = c;
        if (!a || !c) return DM_ERR(DM_ERR_NOMEM, "token stream: out of memory");
        p->docs_cap = nc;
    }
    /* ids and labels apart, as the stream keeps them */
    p->id_off[0] = p->label_off[0] = 0;
    const char *m = meta;
    for (size_t d = 0; d < nd; d++) {
        size_t il = strlen(m) + 1;
        const char *lab = m + il;
        size_t ll = strlen(lab) + 1;
        DM_TRY(dm_grow((void **)&p->ids, &p->ids_cap, p->id_off[d] + il, 1));
        DM_TRY(dm_grow((void **)&p->labels, &p->labels_cap, p->label_off[d] + ll, 1));
        memcpy(p->ids + p->id_off[d], m, il);
        memcpy(p->labels + p->label_off[d], lab, ll);
        p->id_off[d + 1] = p->id_off[d] + il;
        p->label_off[d + 1] = p->label_off[d] + ll;
        if (lab[0]) p->n_labelled++;
        m = lab + ll;
    }
    p->n_docs = nd;
    return dm_sb_batch_terms(p, r);
}

int dm_sb_batch_commit(dm_stream_builder *b, dm_sb_batch *p, const dm_tok_result *r)
{
    dm_token_stream *s = &b->s;
    if (p->n_docs != r->n_docs || p->committed)
        return DM_ERR(DM_ERR_INVALID_ARG, "token stream: batch committed without dm_sb_batch_prepare");
    size_t nd = p->n_docs, nt = r->n_tokens;
    uint64_t il = p->id_off[nd], ll = p->label_off[nd];
    /* prefaulting: room for the batches after this one too, so that their pages can be
     * populated before their commits (trimmed by dm_sb_prefault_stop) */
    size_t n = b->pf ? 1 + DM_SB_PF_AHEAD : 1;
    /* grow under the write lock only when needed: fills of earlier batches may be running */
    if (s->n_docs + n * nd + 1 > b->tok_off_cap || s->n_docs + n * nd + 1 > b->id_off_cap ||
        s->n_docs + n * nd + 1 > b->label_off_cap || b->ids_len + n * il > b->ids_cap ||
        b->labels_len + n * ll > b->labels_cap || s->n_tokens + n * nt > b->hashes_cap) {
        pthread_rwlock_wrlock(&b->grow_lock);
        int rc = dm_sb_reserve(b, n * nd, n * nt, (size_t)(n * il), (size_t)(n * ll));
        pthread_rwlock_unlock(&b->grow_lock);
        DM_TRY(rc);
    }
    for (size_t k = 0; k < p->n_terms; k++)
        DM_TRY(dm_sb_term(b, p->term_hash[k], p->term_bytes + p->term_off[k], p->term_len[k]));
    p->doc0 = s->n_docs;
    p->tok0 = s->n_tokens;
    p->id0 = b->ids_len;
    p->label0 = b->labels_len;
    s->n_docs += nd;
    s->n_tokens += nt;
    b->ids_len += il;
    b->labels_len += ll;
    s->stats.docs += nd;
    s->stats.docs_labelled += p->n_labelled;
    dm_sb_add_counts(s, r);
    dm_sb_pf_publish(b, nd, nt, (size_t)il, (size_t)ll);
    p->committed = 1;
    return DM_OK;
}

int dm_sb_batch_fill(dm_stream_builder *b, dm_sb_batch *p, const dm_tok_result *r)
{
    if (!p->committed) return DM_OK;
    dm_token_stream *s = &b->s;
    size_t nd = p->n_docs;
    int rc = DM_OK;
    pthread_rwlock_rdlock(&b->grow_lock);
    if (r->n_tokens && b->dev) {
        if (r->dev_hash) rc = dm_pp_cuda_copy(s->dev_hashes + p->tok0, r->dev_hash, r->n_tokens * sizeof(uint64_t));
        else rc = DM_ERR(DM_ERR_INVALID_ARG, "token stream: a batch without its device hashes in device mode");
    } else if (r->n_tokens && r->dev_hash) { /* moved to the host: the result's host hashes are partial */
        rc = dm_pp_cuda_copy(s->hashes + p->tok0, r->dev_hash, r->n_tokens * sizeof(uint64_t));
    } else if (r->n_tokens) {
        memcpy(s->hashes + p->tok0, r->hash, r->n_tokens * sizeof(uint64_t));
    }
    uint64_t *to = s->tok_off + p->doc0 + 1, *io = s->id_off + p->doc0 + 1, *lo = s->label_off + p->doc0 + 1;
    for (size_t d = 0; d < nd; d++) {
        to[d] = p->tok0 + r->doc_tok[d + 1];
        io[d] = p->id0 + p->id_off[d + 1];
        lo[d] = p->label0 + p->label_off[d + 1];
    }
    if (nd) {
        memcpy(s->ids + p->id0, p->ids, p->id_off[nd]);
        memcpy(s->labels + p->label0, p->labels, p->label_off[nd]);
    }
    pthread_rwlock_unlock(&b->grow_lock);
    p->committed = 0;
    return rc;
}

static const dm_stream_builder *dm_sort_ctx;
static int dm_term_cmp(const void *a, const void *b)
{
    const dm_stream_builder *B = dm_sort_ctx;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (B->t_hash[x] != B->t_hash[y]) return B->t_hash[x] < B->t_hash[y] ? -1 : 1;
    size_t lx = B->t_len[x], ly = B->t_len[y];
    int c = memcmp(B->t_bytes + B->t_off[x], B->t_bytes + B->t_off[y], lx < ly ? lx : ly);
    if (c) return c;
    return lx < ly ? -1 : lx > ly;
}

int dm_sb_finish(dm_token_stream *out, dm_stream_builder *b)
{
    dm_sb_prefault_stop(b, NULL, NULL);
    dm_token_stream *s = &b->s;
    size_t n = b->n_terms;
    uint32_t *idx = dm_malloc((n ? n : 1) * sizeof(*idx));
    s->term_hash = dm_malloc((n ? n : 1) * sizeof(uint64_t));
    s->term_off = dm_malloc((n + 1) * sizeof(uint64_t));
    s->term_bytes = dm_malloc(b->t_bytes_len ? b->t_bytes_len : 1);
    if (!s->hashes && !b->dev) s->hashes = dm_malloc(sizeof(uint64_t));
    if (!s->ids) s->ids = dm_calloc(1, 1);
    if (!s->labels) s->labels = dm_calloc(1, 1);
    if (!idx || !s->term_hash || !s->term_off || !s->term_bytes || (!s->hashes && !b->dev) || !s->ids || !s->labels) {
        dm_free(idx);
        dm_sb_free(b); /* spent either way: the callers free nothing after a finish */
        memset(out, 0, sizeof(*out));
        return DM_ERR(DM_ERR_NOMEM, "vocabulary: out of memory");
    }
    for (size_t t = 0; t < n; t++) idx[t] = (uint32_t)t;
    dm_sort_ctx = b; /* single-threaded finish; qsort has no context argument in C11 */
    qsort(idx, n, sizeof(*idx), dm_term_cmp);
    size_t off = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t t = idx[k];
        s->term_hash[k] = b->t_hash[t];
        s->term_off[k] = off;
        memcpy(s->term_bytes + off, b->t_bytes + b->t_off[t], b->t_len[t]);
        off += b->t_len[t];
    }
    s->term_off[n] = off;
    s->n_terms = n;
    dm_free(idx);
    *out = *s;
    memset(s, 0, sizeof(*s));
    dm_sb_free(b);
    return DM_OK;
}

/* ------------------------------------------------------------------ file format */

typedef struct dm_wr {
    FILE *f;
    uLong crc;
    int err;
} dm_wr;

static void dm_wr_put(dm_wr *w, const void *p, size_t n)
{
    if (w->err || n == 0) return;
    if (fwrite(p, 1, n, w->f) != n) w->err = errno ? errno : EIO;
    w->crc = crc32_z(w->crc, p, n);
}

static void dm_wr_u64(dm_wr *w, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
    dm_wr_put(w, b, 8);
}

static void dm_wr_u64s(dm_wr *w, const uint64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++) dm_wr_u64(w, v[i]);
}

/* 64 random bits of this process: getrandom where it answers, mixed with the wall and monotonic
 * clocks, the process id, the host name and a per-process counter (so that two calls differ even
 * without getrandom). */
static uint64_t dm_run_id_draw(void)
{
    static uint64_t counter;
    uint64_t r = 0, id;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) r = 0;
    struct timespec w, m;
    clock_gettime(CLOCK_REALTIME, &w);
    clock_gettime(CLOCK_MONOTONIC, &m);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *c = host; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
    /* each source through splitmix64's finaliser (common/rng.h), then mixed once more */
    id = dm_splitmix64_at(r ^ dm_splitmix64_at((uint64_t)w.tv_sec * 1000000000ull + (uint64_t)w.tv_nsec, 1) ^
                              dm_splitmix64_at(((uint64_t)getpid() << 32) ^ (uint64_t)m.tv_nsec ^ h, 2) ^
                              dm_splitmix64_at(__atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED), 3),
                          4);
    return id ? id : 1;
}

uint64_t dm_token_stream_new_run_id(const void *mpi_comm)
{
    uint64_t id = 0;
    if (!mpi_comm) return dm_run_id_draw();
    MPI_Comm comm = *(const MPI_Comm *)mpi_comm;
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    if (rank == 0) id = dm_run_id_draw();
    MPI_Bcast(&id, 1, MPI_UINT64_T, 0, comm);
    return id ? id : 1;
}

int dm_token_stream_write(const dm_token_stream *s, const char *path)
{
    if (!s || !path) return DM_ERR(DM_ERR_INVALID_ARG, "dm_token_stream_write: NULL argument");
    if (s->dev_hashes) return DM_ERR(DM_ERR_INVALID_ARG, "%s: the token stream's hashes are in device memory", path);
    /* the temporary name is this process's (as dm_atomic_open's): a fixed PATH.tmp could be
     * another run's file, or a FIFO that fopen would wait on forever while the other ranks wait
     * for this one */
    size_t pl = strlen(path) + 32;
    char *tmp = dm_malloc(pl);
    if (!tmp) return DM_ERR(DM_ERR_NOMEM, "out of memory");
    snprintf(tmp, pl, "%s.tmp.%ld", path, (long)getpid());
    dm_wr w = {fopen(tmp, "wb"), crc32(0L, Z_NULL, 0), 0};
    if (!w.f) {
        int e = errno;
        dm_free(tmp);
        return DM_ERR(DM_ERR_IO, "%s: cannot create: %s", path, strerror(e));
    }
    dm_wr_put(&w, DM_TOKEN_STREAM_MAGIC, 8);
    uint32_t head[4] = {DM_TOKEN_STREAM_VERSION, s->flags, s->n_ranks ? s->rank : 0, s->n_ranks ? s->n_ranks : 1};
    unsigned char v[16];
    for (int k = 0; k < 16; k++) v[k] = (unsigned char)(head[k / 4] >> (8 * (k % 4)));
    dm_wr_put(&w, v, 16);
    dm_wr_u64(&w, s->run_id ? s->run_id : dm_run_id_draw());
    dm_wr_u64(&w, s->n_docs);
    dm_wr_u64(&w, s->n_tokens);
    dm_wr_u64(&w, s->n_terms);
    dm_wr_u64(&w, s->id_off[s->n_docs]);
    dm_wr_u64(&w, s->label_off[s->n_docs]);
    dm_wr_u64(&w, s->term_off[s->n_terms]);
    dm_wr_u64(&w, s->stats.hash_collisions);
    dm_wr_u64s(&w, s->tok_off, s->n_docs + 1);
    dm_wr_u64s(&w, s->hashes, s->n_tokens);
    dm_wr_u64s(&w, s->id_off, s->n_docs + 1);
    dm_wr_put(&w, s->ids, s->id_off[s->n_docs]);
    dm_wr_u64s(&w, s->label_off, s->n_docs + 1);
    dm_wr_put(&w, s->labels, s->label_off[s->n_docs]);
    dm_wr_u64s(&w, s->term_hash, s->n_terms);
    dm_wr_u64s(&w, s->term_off, s->n_terms + 1);
    dm_wr_put(&w, s->term_bytes, s->term_off[s->n_terms]);
    uint32_t crc = (uint32_t)w.crc;
    unsigned char t[8] = {(unsigned char)crc, (unsigned char)(crc >> 8), (unsigned char)(crc >> 16),
                          (unsigned char)(crc >> 24), 'E', 'N', 'D', '\n'};
    if (!w.err && fwrite(t, 1, 8, w.f) != 8) w.err = EIO;
    if (fclose(w.f) != 0 && !w.err) w.err = errno ? errno : EIO;
    if (w.err) {
        remove(tmp);
        dm_free(tmp);
        return DM_ERR(DM_ERR_IO, "%s: write failed: %s", path, strerror(w.err));
    }
    int rc = dm_rename_output(tmp, path);
    if (rc != DM_OK) {
        remove(tmp);
        dm_free(tmp);
        return rc;
    }
    dm_free(tmp);
    return DM_OK;
}

typedef struct dm_rdr {
    const unsigned char *p;
    size_t n, pos;
} dm_rdr;

static int dm_rd_u64(dm_rdr *r, uint64_t *v)
{
    if (r->n - r->pos < 8) return -1;
    uint64_t x = 0;
    for (int i = 0; i < 8; i++) x |= (uint64_t)r->p[r->pos + i] << (8 * i);
    r->pos += 8;
    *v = x;
    return 0;
}

static int dm_rd_u64s(dm_rdr *r, uint64_t **out, uint64_t n)
{
    if (n > (r->n - r->pos) / 8) return -1;
    *out = dm_malloc((size_t)(n ? n : 1) * 8);
    if (!*out) return -2;
    for (uint64_t i = 0; i < n; i++) dm_rd_u64(r, &(*out)[i]);
    return 0;
}

static int dm_rd_bytes(dm_rdr *r, char **out, uint64_t n)
{
    if (n > r->n - r->pos) return -1;
    *out = dm_malloc((size_t)(n ? n : 1));
    if (!*out) return -2;
    memcpy(*out, r->p + r->pos, (size_t)n);
    r->pos += (size_t)n;
    return 0;
}

static int dm_monotone(const uint64_t *o, uint64_t n, uint64_t last)
{
    if (o[0] != 0) return 0;
    for (uint64_t i = 0; i < n; i++)
        if (o[i + 1] < o[i]) return 0;
    return o[n] == last;
}

static uint32_t dm_le32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* The vocabulary as dm_sb_finish leaves it, which dm_token_stream_term_find and tfidf rely on:
 * strictly increasing in (hash, bytes) (no term twice), each term of at most DM_TOKEN_MAX_LEN
 * bytes (a stem is never longer than its token). The offsets are already known monotone. */
static int dm_vocab_ok(const dm_token_stream *s, uint64_t nv)
{
    for (uint64_t t = 0; t < nv; t++) {
        uint64_t len = s->term_off[t + 1] - s->term_off[t];
        if (len > DM_TOKEN_MAX_LEN) return 0;
        if (t == 0 || s->term_hash[t] > s->term_hash[t - 1]) continue;
        if (s->term_hash[t] < s->term_hash[t - 1]) return 0;
        uint64_t lp = s->term_off[t] - s->term_off[t - 1];
        int c = memcmp(s->term_bytes + s->term_off[t - 1], s->term_bytes + s->term_off[t], (size_t)(lp < len ? lp : len));
        if (c > 0 || (c == 0 && lp >= len)) return 0;
    }
    return 1;
}

/* Bytes of the fixed header of the current version: magic, version, flags, rank, ranks, run id and
 * the seven counts; with the trailer, the smallest file. */
#define DM_TOKS_HEAD (8 + 4 * 4 + 8 + 7 * 8)

int dm_token_stream_read(dm_token_stream *s, const char *path)
{
    if (!s || !path) return DM_ERR(DM_ERR_INVALID_ARG, "dm_token_stream_read: NULL argument");
    memset(s, 0, sizeof(*s));
    FILE *f;
    DM_TRY(dm_open_input(&f, path, NULL));
    /* the whole file in one block of its size (growing only if it grows while read): the arrays
     * copied out of it then take about as much again, never more */
    struct stat sb;
    size_t n = 0, cap = (size_t)1 << 20, k;
    if (fstat(fileno(f), &sb) == 0 && sb.st_size > 0 && (uint64_t)sb.st_size < (uint64_t)SIZE_MAX / 2)
        cap = (size_t)sb.st_size + 1; /* + 1: the read that finds the end needs room */
    unsigned char *buf = dm_malloc(cap);
    for (;;) {
        if (buf && n == cap) {
            unsigned char *q = cap <= SIZE_MAX / 2 ? dm_realloc(buf, 2 * cap) : NULL;
            if (!q) dm_free(buf);
            buf = q;
            cap *= 2;
        }
        if (!buf) {
            fclose(f);
            return DM_ERR(DM_ERR_NOMEM, "%s: out of memory", path);
        }
        k = fread(buf + n, 1, cap - n, f);
        if (k == 0) break;
        n += k;
    }
    int ferr = ferror(f);
    fclose(f);
    if (ferr) {
        dm_free(buf);
        return DM_ERR(DM_ERR_IO, "%s: read error", path);
    }
    const char *why = NULL;
    if (n < 8 || memcmp(buf, DM_TOKEN_STREAM_MAGIC, 8) != 0) why = "not a docmine token stream (bad magic)";
    else if (n < 8 + 4 + 8 || memcmp(buf + n - 4, "END\n", 4) != 0) why = "truncated (no end marker)";
    else {
        uint32_t want = (uint32_t)buf[n - 8] | (uint32_t)buf[n - 7] << 8 | (uint32_t)buf[n - 6] << 16 |
                        (uint32_t)buf[n - 5] << 24;
        uLong crc = crc32_z(crc32(0L, Z_NULL, 0), buf, n - 8);
        if ((uint32_t)crc != want) why = "checksum mismatch (corrupt file)";
    }
    uint32_t version = why ? 0 : dm_le32(buf + 8);
    if (!why && version == 1)
        why = "token stream of format version 1 (an older docmine, without the writer's rank): run docmine "
              "preprocess again";
    else if (!why && version == 2)
        why = "token stream of format version 2 (an older docmine, without the run id): run docmine "
              "preprocess again";
    else if (!why && version != DM_TOKEN_STREAM_VERSION) why = "unsupported version (a newer docmine?)";
    else if (!why && n < DM_TOKS_HEAD + 8) why = "truncated header";
    if (why) {
        dm_free(buf);
        return DM_ERR(DM_ERR_FORMAT, "%s: %s", path, why);
    }
    s->flags = dm_le32(buf + 12);
    s->rank = dm_le32(buf + 16);
    s->n_ranks = dm_le32(buf + 20);
    /* every count is checked against the bytes left before its array is allocated (nd + 1 and
     * nv + 1 cannot wrap: both are below the file's size) */
    dm_rdr r = {buf, n - 8, 24};
    uint64_t run, nd, nt, nv, ib, lb, tb, coll;
    int e = dm_rd_u64(&r, &run) | dm_rd_u64(&r, &nd) | dm_rd_u64(&r, &nt) | dm_rd_u64(&r, &nv) |
            dm_rd_u64(&r, &ib) | dm_rd_u64(&r, &lb) | dm_rd_u64(&r, &tb) | dm_rd_u64(&r, &coll);
    if (!e && (nd >= n || nv >= n || s->rank >= s->n_ranks || run == 0)) e = -1;
    if (!e) e = dm_rd_u64s(&r, &s->tok_off, nd + 1);
    if (!e) e = dm_rd_u64s(&r, &s->hashes, nt);
    if (!e) e = dm_rd_u64s(&r, &s->id_off, nd + 1);
    if (!e) e = dm_rd_bytes(&r, &s->ids, ib);
    if (!e) e = dm_rd_u64s(&r, &s->label_off, nd + 1);
    if (!e) e = dm_rd_bytes(&r, &s->labels, lb);
    if (!e) e = dm_rd_u64s(&r, &s->term_hash, nv);
    if (!e) e = dm_rd_u64s(&r, &s->term_off, nv + 1);
    if (!e) e = dm_rd_bytes(&r, &s->term_bytes, tb);
    if (!e && r.pos != r.n) e = -1;
    if (!e && (!dm_monotone(s->tok_off, nd, nt) || !dm_monotone(s->id_off, nd, ib) ||
               !dm_monotone(s->label_off, nd, lb) || !dm_monotone(s->term_off, nv, tb)))
        e = -1;
    /* ids and labels must be NUL-terminated strings */
    for (uint64_t d = 0; !e && d < nd; d++)
        if ((s->id_off[d + 1] > s->id_off[d] && s->ids[s->id_off[d + 1] - 1] != 0) || s->id_off[d + 1] == s->id_off[d] ||
            s->label_off[d + 1] == s->label_off[d] || s->labels[s->label_off[d + 1] - 1] != 0)
            e = -1;
    if (!e && !dm_vocab_ok(s, nv)) e = -3;
    dm_free(buf);
    if (e) {
        dm_token_stream_free(s);
        return e == -2   ? DM_ERR(DM_ERR_NOMEM, "%s: out of memory", path)
               : e == -3 ? DM_ERR(DM_ERR_FORMAT, "%s: vocabulary not sorted, with a repeated term or a term of more "
                                  "than %d bytes", path, DM_TOKEN_MAX_LEN)
                         : DM_ERR(DM_ERR_FORMAT, "%s: inconsistent sizes or offsets", path);
    }
    s->run_id = run;
    s->n_docs = (size_t)nd;
    s->n_tokens = (size_t)nt;
    s->n_terms = (size_t)nv;
    s->stats.hash_collisions = coll;
    s->stats.docs = nd;
    s->stats.tokens = nt;
    return DM_OK;
}

int dm_token_stream_dump(const dm_token_stream *s, FILE *f)
{
    if (s->dev_hashes) return DM_ERR(DM_ERR_INVALID_ARG, "token stream dump: its hashes are in device memory");
    for (size_t d = 0; d < s->n_docs; d++) {
        dm_fput_tsv_field(f, dm_token_stream_id(s, d));
        fputc('\t', f);
        dm_fput_tsv_field(f, dm_token_stream_labels(s, d));
        fputc('\t', f);
        for (uint64_t i = s->tok_off[d]; i < s->tok_off[d + 1]; i++) {
            long t = dm_token_stream_term_find(s, s->hashes[i]);
            if (i > s->tok_off[d]) fputc(' ', f);
            if (t < 0) {
                fprintf(f, "#%016llx", (unsigned long long)s->hashes[i]);
                continue;
            }
            for (size_t k = (size_t)t; k < s->n_terms && s->term_hash[k] == s->hashes[i]; k++) {
                if (k > (size_t)t) fputc('|', f);
                fwrite(s->term_bytes + s->term_off[k], 1, s->term_off[k + 1] - s->term_off[k], f);
            }
        }
        fputc('\n', f);
    }
    return ferror(f) ? DM_ERR(DM_ERR_IO, "dump: write error") : DM_OK;
}
