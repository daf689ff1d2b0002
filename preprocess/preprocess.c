/* The preprocess driver: lists the corpus, splits files across ranks by bytes, reads and normalises
 * documents into batches, tokenises each batch with the chosen backend and builds the token
 * stream; errors agree across ranks. Reference: the CPU backend (dm_tokenize_cpu).
 * Pipeline: reader threads (a pool, one file each at a time, a bounded window of files ahead)
 * read and normalise documents into pieces; the calling thread takes the pieces strictly in
 * file order and gathers them into the next batch (sizes ramp down at the end, dm_pp_target)
 * while worker threads (4 by default) copy the pieces of the batches before
 * it into their buffers and tokenise them (CPU, or CUDA: each worker has its own device workspace and
 * stream, so one batch's H2D/D2H copies overlap another's kernels), prepare each batch's share
 * of the stream in parallel,
 * commit it strictly in batch order (a short step) and copy it into the stream after the commit
 * (stream_build.h; the builder's prefault threads populate the stream's pages ahead of these
 * copies); workers + 2 batch buffers circulate (page-locked for the CUDA backend, kept for the
 * next run in the process), each handed back as soon as its batch is prepared.
 * Output does not depend on thread counts, batch sizes or timing: pieces, statistics and
 * messages are taken in file order, batches are consumed in order. */
#include <limits.h>
#include <mpi.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/alloc.h"
#include "common/context.h"
#include "common/log.h"
#include "common/status.h"
#include "common/timer.h"
#include "preprocess/preprocess.h"
#include "preprocess/stream_build.h"

static double dm_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define DM_PP_DEFAULT_BATCH (32u << 20)
#define DM_PP_WORKERS_DEFAULT 4 /* batches k .. k+3 are tokenised and built at once (CUDA: a
                                  stream each); the build of a batch is most of a worker's time,
                                  and two workers bounded the pipeline (bench/RESULTS.md) */
#define DM_PP_WORKERS_MAX 8
#define DM_PP_SLOTS_MAX (DM_PP_WORKERS_MAX + 2) /* workers + the batch being filled + one waiting */

/* Normalised documents of one file, in order; a file gives one or more pieces. */
typedef struct dm_pp_piece {
    struct dm_pp_piece *next;
    char *text;
    size_t text_len, text_cap;
    uint64_t *doc_off; /* n_docs + 1, relative to text */
    size_t n_docs, doc_cap;
    char *meta;        /* per document: id NUL labels NUL */
    size_t meta_len, meta_cap;
} dm_pp_piece;

/* One batch of normalised documents with their ids and labels. The calling thread gathers the
 * readers' pieces (in order) and sets the totals; the worker that takes the batch copies the
 * pieces into text, doc_off and meta (dm_pp_assemble) and recycles them. */
typedef struct dm_pp_batch {
    uint64_t seq;  /* order of the batch in the stream */
    char *text;    /* page-locked when pinned (CUDA backend: asynchronous H2D copies) */
    size_t text_len, text_cap;
    int pinned;
    uint64_t *doc_off;
    size_t doc_cap, n_docs;
    char *meta; /* per document: id NUL labels NUL */
    size_t meta_len, meta_cap;
    struct dm_pp_piece **pieces; /* gathered, not yet copied */
    size_t n_pieces, pieces_cap;
} dm_pp_batch;

/* A bounded FIFO of batch pointers. */
typedef struct dm_pp_queue {
    dm_pp_batch *items[DM_PP_SLOTS_MAX + 1];
    int head, count;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} dm_pp_queue;

static void dm_pp_queue_push(dm_pp_queue *q, dm_pp_batch *b)
{
    pthread_mutex_lock(&q->mu);
    q->items[(q->head + q->count) % (DM_PP_SLOTS_MAX + 1)] = b;
    q->count++;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

static dm_pp_batch *dm_pp_queue_pop(dm_pp_queue *q)
{
    pthread_mutex_lock(&q->mu);
    while (q->count == 0) pthread_cond_wait(&q->cv, &q->mu);
    dm_pp_batch *b = q->items[q->head];
    q->head = (q->head + 1) % (DM_PP_SLOTS_MAX + 1);
    q->count--;
    pthread_mutex_unlock(&q->mu);
    return b;
}

typedef struct dm_pp_run {
    const dm_preprocess_options *opt;
    dm_tok_options tok;      /* opt->tok, with device_hashes set in device mode */
    dm_tokenize_fn *tokenize;
    int cuda;
    int device;              /* the calling thread's GPU, bound in the worker (CUDA) */
    dm_stopset stop;
    dm_stream_builder sb;    /* touched by the worker only */
    dm_pp_stats st;          /* reader + normaliser counters (main thread) */
    dm_pp_times *times;
    double t_tok, t_build, t_h2d, t_kern, t_d2h; /* worker */
    double w_batch, w_turn;  /* workers idle: waiting for a batch, for their turn to commit */
    double w_slot, w_piece;  /* calling thread idle: for a free batch buffer, for the next piece */
    double w_read;           /* readers idle: the window or their file's pieces are full */
    int n_workers, n_slots;  /* n_slots = n_workers + 2 */
    dm_pp_batch slots[DM_PP_SLOTS_MAX];
    dm_pp_queue free_q, full_q;
    dm_pp_batch *cur;        /* being filled by the main thread */
    size_t batch_bytes;      /* the largest batch (dm_pp_target gives the current one's size) */
    size_t units_taken;      /* units (files) whose pieces are all taken (main thread) */
    uint64_t text_taken;     /* normalised bytes of those units */
    uint64_t next_seq;       /* sequence number of the next submitted batch (main thread) */
    uint64_t next_commit;    /* the batch whose turn it is to enter the stream (under commit_mu) */
    pthread_mutex_t commit_mu;
    pthread_cond_t commit_cv;
    /* reader pool (everything below rd_mu is guarded by it) */
    const dm_doc_source *src; /* its units (files, ranges of generated documents) */
    size_t n_files;          /* = src->n_units */
    int n_readers;
    struct dm_pp_fslot *fslots; /* window entries: file i uses fslots[i % window] */
    size_t window;
    size_t next_file;        /* next file a reader claims */
    size_t head_file;        /* the file the calling thread takes pieces from */
    int stop_readers;        /* end or error: readers stop */
    struct dm_pp_piece *spare; /* taken pieces, kept for reuse (their buffers stay mapped) */
    pthread_mutex_t rd_mu;
    pthread_cond_t rd_cv;
    double t_read, t_norm, t_take; /* readers' thread-seconds; the workers' copying of pieces */
    int worker_rc;           /* first error of the worker (under rc_mu) */
    char worker_msg[512];    /* its message (error messages are thread-local) */
    pthread_mutex_t rc_mu;
} dm_pp_run;

static int dm_pp_worker_rc(dm_pp_run *r)
{
    pthread_mutex_lock(&r->rc_mu);
    int rc = r->worker_rc;
    pthread_mutex_unlock(&r->rc_mu);
    return rc;
}

static void dm_pp_set_rc(dm_pp_run *r, int rc)
{
    pthread_mutex_lock(&r->rc_mu);
    if (r->worker_rc >= 0) {
        r->worker_rc = rc;
        snprintf(r->worker_msg, sizeof(r->worker_msg), "%s", dm_error_message());
    }
    pthread_mutex_unlock(&r->rc_mu);
}

/* Puts a batch's gathered pieces on the spare list (for the readers to reuse). */
static void dm_pp_recycle(dm_pp_run *r, dm_pp_batch *b)
{
    if (b->n_pieces == 0) return;
    pthread_mutex_lock(&r->rd_mu);
    for (size_t i = 0; i < b->n_pieces; i++) {
        b->pieces[i]->next = r->spare;
        r->spare = b->pieces[i];
    }
    pthread_mutex_unlock(&r->rd_mu);
    b->n_pieces = 0;
}

/* Hands a batch buffer back to the calling thread (emptied). */
static void dm_pp_release(dm_pp_run *r, dm_pp_batch *b)
{
    dm_pp_recycle(r, b);
    b->text_len = b->n_docs = b->meta_len = 0;
    b->doc_off[0] = 0;
    dm_pp_queue_push(&r->free_q, b);
}

static int dm_pp_grow(void **p, size_t *cap, size_t need, size_t elem);
static int dm_pp_batch_text_reserve(dm_pp_batch *b, size_t need);

/* Worker: copies the batch's pieces into its text, offsets and metadata (the totals were set
 * when they were gathered) and recycles them. */
static int dm_pp_assemble(dm_pp_run *r, dm_pp_batch *b)
{
    DM_TRY(dm_pp_batch_text_reserve(b, b->text_len));
    DM_TRY(dm_pp_grow((void **)&b->meta, &b->meta_cap, b->meta_len, 1));
    DM_TRY(dm_pp_grow((void **)&b->doc_off, &b->doc_cap, b->n_docs + 1, sizeof(uint64_t)));
    size_t t = 0, m = 0, d = 0;
    b->doc_off[0] = 0;
    for (size_t i = 0; i < b->n_pieces; i++) {
        const dm_pp_piece *p = b->pieces[i];
        memcpy(b->text + t, p->text, p->text_len);
        memcpy(b->meta + m, p->meta, p->meta_len);
        for (size_t k = 1; k <= p->n_docs; k++) b->doc_off[d + k] = t + p->doc_off[k];
        t += p->text_len;
        m += p->meta_len;
        d += p->n_docs;
    }
    dm_pp_recycle(r, b);
    return DM_OK;
}

/* Worker: copies a batch's pieces into its buffer, tokenises it and prepares its share of the
 * stream (distinct terms, ids, labels) in parallel with the other workers, hands the batch
 * buffer back, waits for the batch's turn to
 * commit it (ranges reserved, distinct terms into the vocabulary: short), then fills its ranges
 * (hashes, offsets, ids, labels) after the turn, concurrently with the next batch's commit. */
static int dm_pp_work(dm_pp_run *r, dm_pp_batch *b, dm_tok_result *res, int *have_res, dm_sb_batch *sp)
{
    uint64_t seq = b->seq;
    double t0 = dm_now();
    int rc = dm_pp_assemble(r, b);
    dm_tok_batch tb = {b->text ? b->text : "", b->text_len, b->doc_off, b->n_docs};
    double t1 = dm_now();
    if (rc >= 0) rc = r->tokenize(res, &tb, &r->stop, &r->tok);
    if (rc >= 0 && r->opt->fail_batch > 0 && seq + 1 == (uint64_t)r->opt->fail_batch) {
        dm_tok_result_free(res);
        rc = DM_ERR(DM_ERR_IO, "preprocess: failure injected into batch %d (test)", r->opt->fail_batch);
    }
    double t2 = dm_now();
    *have_res = rc >= 0;
    double h2d = 0, kern = 0, d2h = 0;
    if (r->cuda) dm_pp_cuda_take_times(&h2d, &kern, &d2h);
    if (rc >= 0) rc = dm_sb_batch_prepare(sp, res, b->meta);
    double t3 = dm_now();
    dm_pp_release(r, b); /* text and metadata are no longer needed */
    /* in order: wait for this batch's turn */
    pthread_mutex_lock(&r->commit_mu);
    while (r->next_commit != seq) pthread_cond_wait(&r->commit_cv, &r->commit_mu);
    double t4 = dm_now();
    r->w_turn += t4 - t3;
    int commit = rc >= 0 && dm_pp_worker_rc(r) >= 0; /* not after another batch failed */
    if (commit) rc = dm_sb_batch_commit(&r->sb, sp, res);
    double t5 = dm_now();
    r->t_tok += t2 - t1;
    r->t_take += t1 - t0;
    r->t_build += (t3 - t2) + (t5 - t4);
    r->t_h2d += h2d;
    r->t_kern += kern;
    r->t_d2h += d2h;
    if (rc < 0) dm_pp_set_rc(r, rc);
    r->next_commit++;
    pthread_cond_broadcast(&r->commit_cv);
    pthread_mutex_unlock(&r->commit_mu);
    if (commit && rc >= 0) {
        rc = dm_sb_batch_fill(&r->sb, sp, res);
        if (rc < 0) dm_pp_set_rc(r, rc);
        double t6 = dm_now();
        pthread_mutex_lock(&r->commit_mu);
        r->t_build += t6 - t5;
        pthread_mutex_unlock(&r->commit_mu);
    }
    return rc;
}

static void *dm_pp_worker(void *arg)
{
    dm_pp_run *r = arg;
    if (r->cuda) {
        int rc = dm_pp_cuda_set_device(r->device);
        if (rc < 0) dm_pp_set_rc(r, rc);
    }
    dm_sb_batch sp;
    memset(&sp, 0, sizeof(sp));
    double idle = 0;
    for (;;) {
        double t0 = dm_now();
        dm_pp_batch *b = dm_pp_queue_pop(&r->full_q);
        idle += dm_now() - t0;
        if (!b) {
            dm_pp_queue_push(&r->full_q, NULL); /* let the other workers see the end too */
            break;
        }
        dm_tok_result res;
        int have = 0;
        if (dm_pp_worker_rc(r) >= 0) {
            dm_pp_work(r, b, &res, &have, &sp);
        } else { /* after an error: only keep the commit order moving */
            uint64_t seq = b->seq;
            dm_pp_release(r, b);
            pthread_mutex_lock(&r->commit_mu);
            while (r->next_commit != seq) pthread_cond_wait(&r->commit_cv, &r->commit_mu);
            r->next_commit++;
            pthread_cond_broadcast(&r->commit_cv);
            pthread_mutex_unlock(&r->commit_mu);
        }
        if (have) dm_tok_result_free(&res);
    }
    dm_sb_batch_free(&sp);
    pthread_mutex_lock(&r->commit_mu);
    r->w_batch += idle;
    pthread_mutex_unlock(&r->commit_mu);
    return NULL;
}

static int dm_pp_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return DM_OK;
    size_t nc = *cap ? *cap : 4096;
    while (nc < need) nc *= 2;
    void *q = dm_realloc(*p, nc * elem);
    if (!q) return DM_ERR(DM_ERR_NOMEM, "preprocess: out of memory (%zu bytes)", nc * elem);
    *p = q;
    *cap = nc;
    return DM_OK;
}

/* Hands the current batch to the worker and takes a free one. */
static int dm_pp_submit(dm_pp_run *r)
{
    if (r->cur->n_docs == 0) return DM_OK;
    r->cur->seq = r->next_seq++;
    dm_pp_queue_push(&r->full_q, r->cur);
    double t0 = dm_now();
    r->cur = dm_pp_queue_pop(&r->free_q);
    r->w_slot += dm_now() - t0;
    return dm_pp_worker_rc(r);
}

/* ------------------------------------------------------------------ reader pool */

#define DM_PP_PIECE_BYTES ((size_t)2 << 20) /* a reader hands over a piece at this size */
#define DM_PP_PIECES_AHEAD 4                /* pieces a file may hold before its reader waits */

/* One file being read. */
typedef struct dm_pp_fslot {
    size_t file;               /* file index; SIZE_MAX before the first claim */
    dm_pp_piece *head, *tail;  /* pieces not yet taken */
    int n_pieces;
    int done;                  /* the reader finished the file */
    int rc;                    /* its status (strict-mode skip, NOMEM, ...) */
    char msg[512];
    dm_pp_stats st;            /* reader + normaliser counters of this file */
    double t_read, t_norm;     /* thread-seconds */
} dm_pp_fslot;

typedef struct dm_pp_reader {
    dm_pp_run *r;
    dm_pp_fslot *slot;
    dm_pp_piece *cur;
    double t_norm, t_wait; /* normalising; waiting for room for a piece */
} dm_pp_reader;

static void dm_pp_piece_free(dm_pp_piece *p)
{
    if (!p) return;
    dm_free(p->text);
    dm_free(p->doc_off);
    dm_free(p->meta);
    dm_free(p);
}

/* Hands the reader's current piece to the calling thread; waits while the file holds
 * DM_PP_PIECES_AHEAD pieces (bounded memory). Returns DM_ERR_INVALID_ARG when told to stop. */
static int dm_pp_reader_flush(dm_pp_reader *rd)
{
    dm_pp_run *r = rd->r;
    dm_pp_piece *p = rd->cur;
    if (!p || p->n_docs == 0) return DM_OK;
    rd->cur = NULL;
    pthread_mutex_lock(&r->rd_mu);
    if (rd->slot->tail) rd->slot->tail->next = p;
    else rd->slot->head = p;
    rd->slot->tail = p;
    rd->slot->n_pieces++;
    pthread_cond_broadcast(&r->rd_cv);
    double t0 = dm_now();
    while (!r->stop_readers && rd->slot->n_pieces >= DM_PP_PIECES_AHEAD) pthread_cond_wait(&r->rd_cv, &r->rd_mu);
    double w = dm_now() - t0;
    r->w_read += w;
    rd->t_wait += w; /* not reading */
    int stop = r->stop_readers;
    pthread_mutex_unlock(&r->rd_mu);
    return stop ? DM_ERR(DM_ERR_INVALID_ARG, "preprocess: reading stopped") : DM_OK;
}

/* A taken piece for reuse (emptied), or NULL. Fresh pieces' buffers are page faults as they
 * grow (about 1 GB/s per thread on the GPU machines), so taken pieces are recycled. */
static dm_pp_piece *dm_pp_piece_reuse(dm_pp_run *r)
{
    pthread_mutex_lock(&r->rd_mu);
    dm_pp_piece *p = r->spare;
    if (p) r->spare = p->next;
    pthread_mutex_unlock(&r->rd_mu);
    if (p) {
        p->next = NULL;
        p->text_len = p->n_docs = p->meta_len = 0;
        p->doc_off[0] = 0;
    }
    return p;
}

static int dm_pp_sink(void *user, const dm_raw_doc *doc)
{
    dm_pp_reader *rd = user;
    double t0 = dm_now();
    if (!rd->cur) rd->cur = dm_pp_piece_reuse(rd->r);
    if (!rd->cur) {
        rd->cur = dm_calloc(1, sizeof(dm_pp_piece));
        if (!rd->cur) return DM_ERR(DM_ERR_NOMEM, "preprocess: out of memory");
        rd->cur->doc_cap = 256;
        rd->cur->doc_off = dm_malloc(rd->cur->doc_cap * sizeof(uint64_t));
        if (!rd->cur->doc_off) return DM_ERR(DM_ERR_NOMEM, "preprocess: out of memory");
        rd->cur->doc_off[0] = 0;
    }
    dm_pp_piece *p = rd->cur;
    size_t il = strlen(doc->id) + 1, ll = strlen(doc->labels) + 1;
    DM_TRY(dm_pp_grow((void **)&p->meta, &p->meta_cap, p->meta_len + il + ll, 1));
    memcpy(p->meta + p->meta_len, doc->id, il);
    memcpy(p->meta + p->meta_len + il, doc->labels, ll);
    p->meta_len += il + ll;
    DM_TRY(dm_pp_grow((void **)&p->doc_off, &p->doc_cap, p->n_docs + 2, sizeof(uint64_t)));
    DM_TRY(dm_normalize(&p->text, &p->text_len, &p->text_cap, doc->text, doc->len,
                        rd->r->opt->force_unicode, &rd->slot->st));
    p->n_docs++;
    p->doc_off[p->n_docs] = p->text_len;
    rd->t_norm += dm_now() - t0;
    if (p->text_len >= DM_PP_PIECE_BYTES) DM_TRY(dm_pp_reader_flush(rd));
    return DM_OK;
}

static void *dm_pp_reader_main(void *arg)
{
    dm_pp_run *r = arg;
    pthread_mutex_lock(&r->rd_mu);
    for (;;) {
        double tw = dm_now();
        while (!r->stop_readers && r->next_file < r->n_files && r->next_file >= r->head_file + r->window)
            pthread_cond_wait(&r->rd_cv, &r->rd_mu);
        r->w_read += dm_now() - tw;
        if (r->stop_readers || r->next_file >= r->n_files) break;
        size_t i = r->next_file++;
        dm_pp_fslot *slot = &r->fslots[i % r->window];
        memset(slot, 0, sizeof(*slot));
        slot->file = i;
        pthread_mutex_unlock(&r->rd_mu);

        dm_pp_reader rd = {r, slot, NULL, 0, 0};
        double t0 = dm_now();
        int rc = r->src->read(r->src->src, i, &slot->st, dm_pp_sink, &rd);
        if (rc >= 0) rc = dm_pp_reader_flush(&rd);
        double t1 = dm_now();
        dm_pp_piece_free(rd.cur);

        pthread_mutex_lock(&r->rd_mu);
        slot->rc = rc;
        if (rc < 0) snprintf(slot->msg, sizeof(slot->msg), "%s", dm_error_message());
        slot->t_norm = rd.t_norm;
        slot->t_read = t1 - t0 - rd.t_norm - rd.t_wait;
        slot->done = 1;
        pthread_cond_broadcast(&r->rd_cv);
    }
    pthread_mutex_unlock(&r->rd_mu);
    return NULL;
}

/* A count setting: the option when > 0 (capped at hi), else the environment variable name when it
 * holds a count in 1..hi (anything else is warned of), else dflt. */
static int dm_pp_count_setting(int opt, const char *name, int hi, int dflt)
{
    if (opt > 0) return opt < hi ? opt : hi;
    const char *e = getenv(name);
    if (e && *e) {
        char *end = NULL;
        long v = strtol(e, &end, 10);
        if (!*end && v >= 1 && v <= hi) return (int)v;
        dm_log_warn("%s=%s is not a count in 1..%d: %d used", name, e, hi, dflt);
    }
    return dflt;
}

/* Units ahead of the taken one per reader thread: the option, else DOCMINE_PP_WINDOW, else 2. */
static size_t dm_pp_window(const dm_preprocess_options *opt)
{
    return (size_t)dm_pp_count_setting(opt->window, "DOCMINE_PP_WINDOW", 64, 2);
}

/* Batch text buffers kept between runs (released at process exit), like the CUDA backend's
 * workspaces and result sets: workers + 2 buffers of batch_bytes + 1/8 (page-locked for CUDA:
 * 6 x 36 MB by default; at most DM_PP_SLOTS_MAX are kept) were allocated, first touched (cudaHostAlloc pins every page) and freed
 * by every run; a later run in the process (the benchmark's repeats, tests, a pipeline calling
 * preprocess again) takes them back as they are. */
typedef struct dm_pp_textbuf {
    char *p;
    size_t cap;
    int pinned;
} dm_pp_textbuf;
static pthread_mutex_t g_tb_mu = PTHREAD_MUTEX_INITIALIZER;
static dm_pp_textbuf g_tb[DM_PP_SLOTS_MAX];
static int g_tb_n;

/* Gives an empty slot a kept buffer of its kind holding at least need bytes, if there is one. */
static void dm_pp_text_take(dm_pp_batch *b, size_t need)
{
    pthread_mutex_lock(&g_tb_mu);
    for (int i = 0; i < g_tb_n; i++) {
        if (g_tb[i].pinned != b->pinned || g_tb[i].cap < need) continue;
        b->text = g_tb[i].p;
        b->text_cap = g_tb[i].cap;
        g_tb[i] = g_tb[--g_tb_n];
        break;
    }
    pthread_mutex_unlock(&g_tb_mu);
}

/* Keeps a slot's buffer for the next run (or frees it when DM_PP_SLOTS_MAX are kept already). */
static void dm_pp_text_give(dm_pp_batch *b)
{
    if (!b->text) return;
    pthread_mutex_lock(&g_tb_mu);
    int kept = g_tb_n < DM_PP_SLOTS_MAX;
    if (kept) g_tb[g_tb_n++] = (dm_pp_textbuf){b->text, b->text_cap, b->pinned};
    pthread_mutex_unlock(&g_tb_mu);
    if (!kept) {
        if (b->pinned) dm_host_free_pinned(b->text);
        else dm_free(b->text);
    }
    b->text = NULL;
    b->text_cap = 0;
}

void dm_preprocess_release_buffers(void)
{
    pthread_mutex_lock(&g_tb_mu);
    for (int i = 0; i < g_tb_n; i++) {
        if (g_tb[i].pinned) dm_host_free_pinned(g_tb[i].p);
        else dm_free(g_tb[i].p);
    }
    g_tb_n = 0;
    pthread_mutex_unlock(&g_tb_mu);
}

/* Grows a batch's text buffer (page-locked ones are re-allocated page-locked), keeping what it
 * holds. dm_pp_assemble calls it with text_len already the batch's new total (the pieces are
 * copied after it), so at most the old capacity is kept: copying text_len bytes read past the old
 * page-locked buffer (test_preprocess_gpu crashed about one run in eight at a mapping's end). */
static int dm_pp_batch_text_reserve(dm_pp_batch *b, size_t need)
{
    if (need <= b->text_cap) return DM_OK;
    size_t nc = b->text_cap ? b->text_cap : 4096;
    while (nc < need) nc *= 2;
    if (!b->pinned) return dm_pp_grow((void **)&b->text, &b->text_cap, need, 1);
    void *q = NULL;
    DM_TRY(dm_host_alloc_pinned(&q, nc));
    size_t keep = b->text_len < b->text_cap ? b->text_len : b->text_cap;
    if (keep) memcpy(q, b->text, keep);
    dm_host_free_pinned(b->text);
    b->text = q;
    b->text_cap = nc;
    return DM_OK;
}

#define DM_PP_MIN_BATCH ((size_t)2 << 20) /* the ramp's smallest batch (a reader's piece) */

/* The size the batch being filled aims at (at most batch_bytes). Ramp down: the text still to
 * come, estimated from the units taken so far (their mean normalised size), is split into a
 * batch per worker, so that the last batches are short and the workers finish together instead
 * of one worker running a full last batch while the others wait (the drain). (No ramp up at the
 * start: small first batches made every worker's device workspace and page-locked result set
 * grow again at its next batch, and freeing device or page-locked memory stalls the whole GPU.)
 * Depends only on the input, never on timing; the output does not depend on batch sizes. */
static size_t dm_pp_target(const dm_pp_run *r)
{
    size_t t = r->batch_bytes;
    if (r->units_taken > 0 && r->units_taken < r->n_files) {
        double left = (double)r->text_taken / (double)r->units_taken * (double)(r->n_files - r->units_taken);
        double share = (left + (double)r->cur->text_len) / r->n_workers;
        if (share < (double)t) t = share > (double)DM_PP_MIN_BATCH ? (size_t)share : DM_PP_MIN_BATCH;
    }
    return t < r->batch_bytes ? t : r->batch_bytes;
}

/* Appends a piece's documents to the current batch (in order); submits full batches. The batch
 * owns the piece from here (on an error before that, the piece goes to the spares). */
static int dm_pp_take_piece(dm_pp_run *r, dm_pp_piece *p)
{
    dm_pp_batch *b = r->cur;
    int rc = DM_OK;
    /* a piece that does not fit the current batch starts a new one (a piece larger than a batch
     * makes a batch of its own: never truncated) */
    if (b->n_docs > 0 && b->text_len + p->text_len > dm_pp_target(r)) {
        rc = dm_pp_submit(r);
        b = r->cur;
    }
    /* gathered only: the worker copies it (dm_pp_assemble), so that the copies of several
     * batches run in parallel instead of on this thread */
    if (rc >= 0) rc = dm_pp_grow((void **)&b->pieces, &b->pieces_cap, b->n_pieces + 1, sizeof(*b->pieces));
    if (rc < 0) {
        pthread_mutex_lock(&r->rd_mu);
        p->next = r->spare;
        r->spare = p;
        pthread_mutex_unlock(&r->rd_mu);
        return rc;
    }
    b->pieces[b->n_pieces++] = p;
    b->text_len += p->text_len;
    b->meta_len += p->meta_len;
    b->n_docs += p->n_docs;
    if (b->text_len >= dm_pp_target(r)) DM_TRY(dm_pp_submit(r));
    return DM_OK;
}

/* Takes the pieces of every file in file order (the calling thread). Returns the first error
 * in file order (strict-mode skips included), so the result does not depend on timing. */
static int dm_pp_take_files(dm_pp_run *r)
{
    int rc = DM_OK;
    for (size_t i = 0; rc >= 0 && i < r->n_files; i++) {
        dm_pp_fslot *slot = &r->fslots[i % r->window];
        uint64_t ftext = 0; /* normalised bytes of this file */
        for (;;) {
            pthread_mutex_lock(&r->rd_mu);
            double t0 = dm_now();
            while (!(slot->file == i && (slot->head || slot->done))) pthread_cond_wait(&r->rd_cv, &r->rd_mu);
            r->w_piece += dm_now() - t0;
            dm_pp_piece *p = slot->head;
            if (p) {
                slot->head = p->next;
                if (!slot->head) slot->tail = NULL;
                slot->n_pieces--;
                pthread_cond_broadcast(&r->rd_cv);
            }
            pthread_mutex_unlock(&r->rd_mu);
            if (!p) break;
            ftext += p->text_len;
            rc = dm_pp_take_piece(r, p);
            if (rc < 0) break;
            rc = dm_pp_worker_rc(r);
            if (rc < 0) break;
        }
        if (rc < 0) break;
        /* the file is complete: done is set and read under rd_mu, its fields are final */
        pthread_mutex_lock(&r->rd_mu);
        int frc = slot->rc;
        pthread_mutex_unlock(&r->rd_mu);
        dm_pp_stats_add(&r->st, &slot->st);
        r->t_read += slot->t_read;
        r->t_norm += slot->t_norm;
        if (frc < 0) rc = DM_ERR(frc, "%s", slot->msg);
        r->units_taken = i + 1;
        r->text_taken += ftext;
        pthread_mutex_lock(&r->rd_mu);
        r->head_file = i + 1;
        pthread_cond_broadcast(&r->rd_cv);
        pthread_mutex_unlock(&r->rd_mu);
    }
    return rc;
}

/* The file list as a document source: unit i is file i through the readers. */
typedef struct dm_pp_file_source {
    const dm_pp_file *files;
    const dm_reader_options *reader;
} dm_pp_file_source;

static int dm_pp_file_unit(void *src, size_t i, dm_pp_stats *st, dm_doc_sink *sink, void *user)
{
    const dm_pp_file_source *fs = src;
    return dm_pp_read_file(&fs->files[i], fs->reader, st, sink, user);
}

void dm_pp_times_to_timers(const dm_pp_times *t, const char *prefix, int wall)
{
    const char *name[] = {"read", "normalize", "h2d", "kernels", "d2h", "build", "prefault", "take", "worker", "wall"};
    const double val[] = {t->read,  t->normalize, t->h2d,  t->kernels, t->d2h,
                          t->build, t->prefault,  t->take, t->worker,  t->wall};
    char key[128];
    for (int i = 0; i < 9 + (wall != 0); i++) {
        snprintf(key, sizeof key, "%s.%s", prefix, name[i]);
        dm_timer_add(key, val[i]);
    }
    if (wall) { /* the wall's parts and the pools' idle seconds (per thread), to find what bounds it */
        const char *part[] = {"wall.setup", "wall.run",  "wall.drain", "wall.finish", "idle.read",
                              "idle.slot",  "idle.piece", "idle.batch", "idle.turn"};
        const double w = t->workers > 0 ? (double)t->workers : 1.0;
        const double pv[] = {t->wall_setup, t->wall_run,   t->wall_drain,     t->wall_finish,   t->wait_read,
                             t->wait_slot,  t->wait_piece, t->wait_batch / w, t->wait_turn / w};
        for (int i = 0; i < 9; i++) {
            snprintf(key, sizeof key, "%s.%s", prefix, part[i]);
            dm_timer_add(key, pv[i]);
        }
    }
    snprintf(key, sizeof key, "%s.device_tokens", prefix);
    dm_counter_add(key, t->device_tokens);
}

double dm_pp_times_sum(const dm_pp_times *t)
{
    return t->read + t->normalize + t->take + t->h2d + t->kernels + t->d2h + t->build + t->prefault;
}

/* Documents of the stream without any token: kept, but counted (dm_pp_stats.docs_empty). */
static uint64_t dm_pp_docs_without_tokens(const dm_token_stream *s)
{
    uint64_t n = 0;
    for (size_t d = 0; d < s->n_docs; d++) n += s->tok_off[d + 1] == s->tok_off[d];
    return n;
}

int dm_preprocess_files(dm_token_stream *out, dm_pp_times *times, const dm_pp_file *files,
                        size_t n_files, const dm_preprocess_options *opt, int backend)
{
    if (!out || !opt || (!files && n_files)) return DM_ERR(DM_ERR_INVALID_ARG, "dm_preprocess_files: NULL argument");
    dm_pp_file_source fs = {files, &opt->reader};
    dm_doc_source src = {dm_pp_file_unit, &fs, n_files, 0, 0};
    for (size_t i = 0; i < n_files; i++) src.in_bytes += files[i].size;
    return dm_preprocess_source(out, times, &src, opt, backend);
}

int dm_preprocess_source(dm_token_stream *out, dm_pp_times *times, const dm_doc_source *src,
                         const dm_preprocess_options *opt, int backend)
{
    if (!out || !opt || !src || !src->read) return DM_ERR(DM_ERR_INVALID_ARG, "dm_preprocess_source: NULL argument");
    size_t n_files = src->n_units;
    dm_pp_times tdummy;
    if (!times) times = &tdummy;
    memset(times, 0, sizeof(*times));
    memset(out, 0, sizeof(*out));
    double w0 = dm_now();
    dm_pp_run *r = dm_calloc(1, sizeof(*r));
    if (!r) return DM_ERR(DM_ERR_NOMEM, "preprocess: out of memory");
    r->opt = opt;
    r->times = times;
    r->cuda = backend == DM_BACKEND_CUDA;
    r->tokenize = backend == DM_BACKEND_CUDA ? dm_tokenize_cuda
                  : backend == DM_PP_BACKEND_HD ? dm_tokenize_hd
                                                : dm_tokenize_cpu;
    /* automatic batches: about an eighth of this rank's input so that small corpora still
     * pipeline, between 1 MB and DM_PP_DEFAULT_BATCH */
    size_t autob = (size_t)(src->in_bytes / 8);
    if (autob < ((size_t)1 << 20)) autob = (size_t)1 << 20;
    if (autob > DM_PP_DEFAULT_BATCH) autob = DM_PP_DEFAULT_BATCH;
    r->batch_bytes = opt->batch_bytes ? opt->batch_bytes : autob;
    r->n_workers = dm_pp_count_setting(opt->workers, "DOCMINE_PP_WORKERS", DM_PP_WORKERS_MAX, DM_PP_WORKERS_DEFAULT);
    r->n_slots = r->n_workers + 2;
    int rc;
    if (r->cuda && (rc = dm_pp_cuda_get_device(&r->device)) < 0) {
        dm_free(r);
        return rc;
    }
    if (opt->stopwords && opt->stopwords[0] == 0) rc = dm_stopset_from_text(&r->stop, "", 0);
    else rc = dm_stopset_load(&r->stop, opt->stopwords);
    if (rc < 0) {
        dm_free(r);
        return rc;
    }
    rc = dm_sb_init(&r->sb);
    /* device mode: the stream's hashes stay on this GPU (dm_preprocess_options.device_tokens) */
    r->tok = opt->tok;
    r->tok.device_hashes = r->cuda && opt->device_tokens;
    if (r->tok.device_hashes) {
        const char *lim = getenv("DOCMINE_PP_DEVICE_TOKENS_LIMIT"); /* tests: force the move to the host */
        dm_sb_device_start(&r->sb, lim ? (size_t)strtoull(lim, NULL, 10) : 0);
    }
    /* the stream's arrays are fresh memory: helper threads populate their pages ahead of the
     * fills (stream_build.h), so that the build mostly copies */
    if (rc >= 0 && !opt->no_prefault) rc = dm_sb_prefault_start(&r->sb);
    pthread_mutex_init(&r->free_q.mu, NULL);
    pthread_cond_init(&r->free_q.cv, NULL);
    pthread_mutex_init(&r->full_q.mu, NULL);
    pthread_cond_init(&r->full_q.cv, NULL);
    pthread_mutex_init(&r->rc_mu, NULL);
    pthread_mutex_init(&r->commit_mu, NULL);
    pthread_cond_init(&r->commit_cv, NULL);
    pthread_mutex_init(&r->rd_mu, NULL);
    pthread_cond_init(&r->rd_cv, NULL);
    for (int i = 0; rc >= 0 && i < r->n_slots; i++) {
        r->slots[i].doc_cap = 1024;
        r->slots[i].doc_off = dm_malloc(r->slots[i].doc_cap * sizeof(uint64_t));
        if (!r->slots[i].doc_off) rc = DM_ERR(DM_ERR_NOMEM, "preprocess: out of memory");
        else r->slots[i].doc_off[0] = 0;
        /* CUDA: page-locked batch text, so that H2D copies are asynchronous DMA */
        r->slots[i].pinned = r->cuda;
        size_t tb = r->batch_bytes + (r->batch_bytes >> 3);
        dm_pp_text_take(&r->slots[i], tb);
        if (rc >= 0) rc = dm_pp_batch_text_reserve(&r->slots[i], tb);
        if (i > 0) dm_pp_queue_push(&r->free_q, &r->slots[i]);
    }
    /* reader pool: one file per thread at a time, at most `window` files ahead of the one taken */
    /* default for files: the rank's cores less the workers and one for the calling thread and
     * the prefault threads; one reader per core oversubscribed the node (16 readers + 4 workers
     * + 3 others on 16 cores: wall 1.30-1.35x the busiest stage, 12 readers 1.19-1.21x and as
     * fast, bench/RESULTS.md session 8). The generator keeps one reader per thread: there the
     * readers are the heavy stage (11 readers: 0.86 -> 1.05 s at 200k documents). */
    int nt = opt->threads > 0 ? opt->threads
             : src->all_threads ? omp_get_max_threads()
                                : omp_get_max_threads() - r->n_workers - 1;
    if (nt < 1) nt = 1;
    if (nt > 256) nt = 256;
    if ((size_t)nt > n_files) nt = n_files ? (int)n_files : 1;
    r->src = src;
    r->n_files = n_files;
    r->n_readers = nt;
    r->window = dm_pp_window(opt) * (size_t)nt;
    times->threads = nt;
    times->workers = r->n_workers;
    if (rc >= 0) {
        r->fslots = dm_calloc(r->window, sizeof(dm_pp_fslot));
        if (!r->fslots) rc = DM_ERR(DM_ERR_NOMEM, "preprocess: out of memory");
        for (size_t i = 0; rc >= 0 && i < r->window; i++) r->fslots[i].file = SIZE_MAX;
    }
    r->cur = &r->slots[0];
    pthread_t worker[DM_PP_WORKERS_MAX];
    int started = 0;
    for (int i = 0; rc >= 0 && i < r->n_workers; i++) {
        if (pthread_create(&worker[i], NULL, dm_pp_worker, r) != 0)
            rc = DM_ERR(DM_ERR_NOMEM, "preprocess: cannot start a worker thread");
        else started++;
    }
    pthread_t reader[256];
    int readers = 0;
    for (int i = 0; rc >= 0 && i < nt; i++) {
        if (pthread_create(&reader[i], NULL, dm_pp_reader_main, r) != 0)
            rc = DM_ERR(DM_ERR_NOMEM, "preprocess: cannot start a reader thread");
        else readers++;
    }
    double w1 = dm_now();
    if (rc >= 0) rc = dm_pp_take_files(r);
    double w2 = dm_now();
    pthread_mutex_lock(&r->rd_mu);
    r->stop_readers = 1;
    pthread_cond_broadcast(&r->rd_cv);
    pthread_mutex_unlock(&r->rd_mu);
    for (int i = 0; i < readers; i++) pthread_join(reader[i], NULL);
    if (r->fslots)
        for (size_t i = 0; i < r->window; i++)
            for (dm_pp_piece *p = r->fslots[i].head, *q; p; p = q) {
                q = p->next;
                dm_pp_piece_free(p);
            }
    times->read = r->t_read / nt;
    times->normalize = r->t_norm / nt;
    if (rc >= 0) rc = dm_pp_submit(r);
    if (started) {
        dm_pp_queue_push(&r->full_q, NULL); /* each worker passes the end marker on */
        for (int i = 0; i < started; i++) pthread_join(worker[i], NULL);
    }
    double w3 = dm_now();
    /* every batch is back (the workers recycled their pieces); a batch not submitted after an
     * error still holds its pieces */
    for (int i = 0; i < r->n_slots; i++) dm_pp_recycle(r, &r->slots[i]);
    for (dm_pp_piece *p = r->spare, *q; p; p = q) {
        q = p->next;
        dm_pp_piece_free(p);
    }
    times->take = r->t_take;
    if (r->worker_rc < 0) /* carry the worker's message over to this thread */
        rc = DM_ERR(r->worker_rc, "%s", r->worker_msg);
    times->kernels = r->cuda ? r->t_kern : r->t_tok;
    times->h2d = r->t_h2d;
    times->d2h = r->t_d2h;
    times->build = r->t_build;
    times->worker = r->t_take + r->t_tok + r->t_build;
    times->wait_batch = r->w_batch;
    times->wait_turn = r->w_turn;
    times->wait_slot = r->w_slot;
    times->wait_piece = r->w_piece;
    times->wait_read = r->w_read / nt;
    times->batches = r->next_seq;
    if (rc >= 0) {
        dm_pp_stats_add(&r->sb.s.stats, &r->st);
        r->sb.s.flags = (opt->tok.stem ? 1u : 0u) | (opt->tok.keep_numbers ? 2u : 0u);
        double t0 = dm_now();
        dm_sb_prefault_stop(&r->sb, &times->prefault, NULL); /* every fill is done */
        times->device_tokens = r->sb.dev ? 1 : r->sb.dev_moved ? 2 : 0;
        if (r->sb.dev_moved)
            dm_log_info("preprocess: the token hashes moved from the device to the host on the way (their device "
                        "array would have taken more than half of the free device memory)");
        rc = dm_sb_finish(out, &r->sb);
        if (rc >= 0) out->stats.docs_empty = dm_pp_docs_without_tokens(out);
        times->build += dm_now() - t0;
        times->worker += dm_now() - t0;
    } else {
        dm_sb_free(&r->sb);
    }
    for (int i = 0; i < r->n_slots; i++) {
        dm_pp_text_give(&r->slots[i]);
        dm_free(r->slots[i].doc_off);
        dm_free(r->slots[i].meta);
        dm_free(r->slots[i].pieces);
    }
    pthread_mutex_destroy(&r->free_q.mu);
    pthread_cond_destroy(&r->free_q.cv);
    pthread_mutex_destroy(&r->full_q.mu);
    pthread_cond_destroy(&r->full_q.cv);
    pthread_mutex_destroy(&r->rc_mu);
    pthread_mutex_destroy(&r->rd_mu);
    pthread_cond_destroy(&r->rd_cv);
    dm_free(r->fslots);
    pthread_mutex_destroy(&r->commit_mu);
    pthread_cond_destroy(&r->commit_cv);
    dm_stopset_free(&r->stop);
    dm_free(r);
    times->wall = dm_now() - w0;
    times->wall_setup = w1 - w0;
    times->wall_run = w2 - w1;
    times->wall_drain = w3 - w2;
    times->wall_finish = times->wall - (w3 - w0);
    return rc;
}

static uint64_t list_hash(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull; /* FNV-1a 64 */
    return h;
}

int dm_pp_file_list_agree(const dm_pp_file_list *l, const char *root, const struct dm_ctx *ctx)
{
    if (!ctx) return DM_OK;
    /* the list's count, bytes and a hash of its (rel, size) pairs, against rank 0's */
    uint64_t head[3] = {l->n, 0, 0xcbf29ce484222325ull}, head0[3];
    size_t ser = 0; /* rank 0's list serialised: rel, NUL, 8 bytes of size, per file */
    for (size_t i = 0; i < l->n; i++) {
        size_t rl = strlen(l->files[i].rel) + 1;
        head[1] += l->files[i].size;
        head[2] = list_hash(head[2], l->files[i].rel, rl);
        head[2] = list_hash(head[2], &l->files[i].size, sizeof l->files[i].size);
        ser += rl + sizeof(uint64_t);
    }
    if (dm_comm_rank0(ctx->world, head, head0, 3) != DM_OK)
        return dm_ctx_agree(ctx, DM_ERR(DM_ERR_MPI, "corpus %s: MPI_Bcast of the file list failed", root));
    int differs = memcmp(head, head0, sizeof head) != 0, any = differs;
    if (MPI_Allreduce(&differs, &any, 1, MPI_INT, MPI_MAX, ctx->world) != MPI_SUCCESS)
        return dm_ctx_agree(ctx, DM_ERR(DM_ERR_MPI, "corpus %s: MPI_Allreduce of the file list failed", root));
    if (!any) return DM_OK;
    /* some rank lists another corpus: rank 0's list to every rank, which names the first file
     * that differs */
    uint64_t len0 = ser;
    MPI_Bcast(&len0, 1, MPI_UINT64_T, 0, ctx->world);
    int rc = len0 > (uint64_t)INT_MAX ? DM_ERR(DM_ERR_FORMAT, "corpus %s: the ranks list other files", root) : DM_OK;
    char *r0 = rc == DM_OK ? dm_malloc(len0 ? len0 : 1) : NULL;
    if (rc == DM_OK && !r0) rc = DM_ERR(DM_ERR_NOMEM, "corpus %s: out of memory comparing the file lists", root);
    rc = dm_ctx_agree(ctx, rc);
    if (rc != DM_OK) {
        dm_free(r0);
        return rc;
    }
    if (ctx->rank == 0) {
        size_t o = 0;
        for (size_t i = 0; i < l->n; i++) {
            size_t rl = strlen(l->files[i].rel) + 1;
            memcpy(r0 + o, l->files[i].rel, rl);
            memcpy(r0 + o + rl, &l->files[i].size, sizeof(uint64_t));
            o += rl + sizeof(uint64_t);
        }
    }
    MPI_Bcast(r0, (int)len0, MPI_CHAR, 0, ctx->world);
    if (differs) {
        const char *q = r0, *end = r0 + len0;
        size_t i = 0;
        for (; i < l->n && q < end; i++) {
            const char *rel0 = q;
            uint64_t size0;
            q += strlen(rel0) + 1;
            memcpy(&size0, q, sizeof size0);
            q += sizeof size0;
            const dm_pp_file *f = &l->files[i];
            if (strcmp(f->rel, rel0) != 0) {
                rc = DM_ERR(DM_ERR_FORMAT,
                            "corpus %s: rank %d lists %s where rank 0 lists %s (file %zu): not the same corpus on "
                            "every rank", root, ctx->rank, f->path, rel0, i + 1);
                break;
            }
            if (f->size != size0) {
                rc = DM_ERR(DM_ERR_FORMAT,
                            "corpus %s: %s is %llu bytes on rank %d, %llu bytes on rank 0: not the same corpus on "
                            "every rank", root, f->path, (unsigned long long)f->size, ctx->rank,
                            (unsigned long long)size0);
                break;
            }
        }
        if (rc == DM_OK && i < l->n)
            rc = DM_ERR(DM_ERR_FORMAT, "corpus %s: rank %d lists %s, which rank 0 does not (%zu files on rank 0, "
                        "%zu on rank %d): not the same corpus on every rank", root, ctx->rank, l->files[i].path,
                        (size_t)head0[0], l->n, ctx->rank);
        else if (rc == DM_OK && q < end)
            rc = DM_ERR(DM_ERR_FORMAT, "corpus %s: rank 0 lists %s, which rank %d does not (%zu files on rank 0, %zu "
                        "on rank %d): not the same corpus on every rank", root, q, ctx->rank, (size_t)head0[0], l->n,
                        ctx->rank);
        else if (rc == DM_OK) /* a hash collision of two different lists: said plainly all the same */
            rc = DM_ERR(DM_ERR_FORMAT, "corpus %s: rank %d lists other files than rank 0: not the same corpus on "
                        "every rank", root, ctx->rank);
    }
    dm_free(r0);
    return dm_ctx_agree(ctx, rc);
}

int dm_preprocess(dm_token_stream *out, dm_pp_times *times, const struct dm_ctx *ctx,
                  const char *path, const dm_preprocess_options *opt)
{
    if (!out || !path || !opt) return DM_ERR(DM_ERR_INVALID_ARG, "dm_preprocess: NULL argument");
    memset(out, 0, sizeof(*out));
    int rank = ctx ? ctx->rank : 0, size = ctx ? ctx->size : 1;
    int backend = opt->backend;
    if (backend == DM_BACKEND_AUTO) backend = ctx ? ctx->backend : DM_BACKEND_CPU;
    dm_pp_stats lst;
    memset(&lst, 0, sizeof(lst));
    dm_pp_file_list fl;
    int rc = dm_pp_list_files(&fl, path, &opt->reader, &lst);
    /* every rank lists the same tree; agree on errors before doing work */
    if (ctx) rc = dm_ctx_agree(ctx, rc); /* the others learn it marked remote (dm_app_fail) */
    if (rc >= 0) rc = dm_pp_file_list_agree(&fl, path, ctx);
    if (rc < 0) {
        dm_pp_file_list_free(&fl);
        return rc;
    }
    size_t b, e;
    dm_pp_split_by_bytes(&b, &e, &fl, rank, size);
    rc = dm_preprocess_files(out, times, fl.files + b, e - b, opt, backend);
    dm_pp_file_list_free(&fl);
    if (ctx) {
        rc = dm_ctx_agree(ctx, rc); /* one status on every rank, the root cause's */
        if (rc < 0) {
            dm_token_stream_free(out);
            return rc;
        }
    } else if (rc < 0) {
        return rc;
    }
    /* listing counters were counted on every rank: keep rank 0's, its messages first (they come
     * before any file's, whatever the number of ranks) */
    if (rank == 0) {
        dm_pp_stats st = lst;
        dm_pp_stats_add(&st, &out->stats);
        out->stats = st;
    }
    out->rank = (uint32_t)rank;
    out->n_ranks = (uint32_t)size;
    if (ctx) {
        rc = dm_ctx_agree(ctx, dm_pp_stats_allreduce(&out->stats, &ctx->world));
        if (rc < 0) {
            dm_token_stream_free(out);
            return rc;
        }
    }
    if (out->stats.docs == 0) {
        dm_pp_stats st = out->stats;
        dm_token_stream_free(out);
        return dm_pp_no_documents(path, &st);
    }
    return DM_OK;
}

int dm_pp_no_documents(const char *path, const dm_pp_stats *st)
{
    uint64_t sk = dm_pp_stats_skipped_total(st);
    if (sk > 0) {
        char why[256];
        dm_pp_stats_skips_str(why, sizeof why, st);
        /* the first message without its "skip (reason): " (the reasons are counted before it) */
        const char *first = st->n_messages ? st->messages[0] : "-", *c = strstr(first, "): ");
        if (strncmp(first, "skip (", 6) == 0 && c) first = c + 3;
        return DM_ERR(DM_ERR_FORMAT, "corpus %s: no documents, %llu skipped (%s); the first: %s", path,
                      (unsigned long long)sk, why, first);
    }
    if (st->files_ignored > 0)
        return DM_ERR(DM_ERR_FORMAT, "corpus %s: no documents: %llu files read, %llu ignored (not of the --format)",
                      path, (unsigned long long)st->files_read, (unsigned long long)st->files_ignored);
    return DM_ERR(DM_ERR_FORMAT, "corpus %s: no documents (%llu files read, nothing skipped)", path,
                  (unsigned long long)st->files_read);
}
