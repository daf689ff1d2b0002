/* The preprocess driver: lists the corpus, splits files across ranks by bytes, reads and normalises
 * documents into batches, tokenises each batch with the chosen backend and builds the token
 * stream; errors agree across ranks. Reference: the CPU backend (dm_tokenize_cpu).
 * Pipeline: the calling thread reads and normalises batch k+2 while two worker threads tokenise
 * batches k and k+1 (CPU, or CUDA: each worker has its own device workspace and stream, so one
 * batch's H2D/D2H copies overlap the other's kernels) and append them to the stream strictly in
 * batch order; DM_PP_SLOTS batch buffers circulate.
 * Output does not depend on batch sizes or timing (batches are consumed in order). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/context.h"
#include "common/status.h"
#include "preprocess/preprocess.h"
#include "preprocess/stream_build.h"

static double dm_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define DM_PP_DEFAULT_BATCH (32u << 20)
#define DM_PP_WORKERS 2 /* batches k and k+1 are tokenised at once (CUDA: two streams) */
#define DM_PP_SLOTS (DM_PP_WORKERS + 2) /* + the batch being filled + one waiting */

/* One batch of normalised documents with their ids and labels. */
typedef struct dm_pp_batch {
    uint64_t seq;  /* order of the batch in the stream */
    char *text;
    size_t text_len, text_cap;
    uint64_t *doc_off;
    size_t doc_cap, n_docs;
    char *meta; /* per document: id NUL labels NUL */
    size_t meta_len, meta_cap;
} dm_pp_batch;

/* A bounded FIFO of batch pointers. */
typedef struct dm_pp_queue {
    dm_pp_batch *items[DM_PP_SLOTS + 1];
    int head, count;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} dm_pp_queue;

static void dm_pp_queue_push(dm_pp_queue *q, dm_pp_batch *b)
{
    pthread_mutex_lock(&q->mu);
    q->items[(q->head + q->count) % (DM_PP_SLOTS + 1)] = b;
    q->count++;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

static dm_pp_batch *dm_pp_queue_pop(dm_pp_queue *q)
{
    pthread_mutex_lock(&q->mu);
    while (q->count == 0) pthread_cond_wait(&q->cv, &q->mu);
    dm_pp_batch *b = q->items[q->head];
    q->head = (q->head + 1) % (DM_PP_SLOTS + 1);
    q->count--;
    pthread_mutex_unlock(&q->mu);
    return b;
}

typedef struct dm_pp_run {
    const dm_preprocess_options *opt;
    dm_tokenize_fn *tokenize;
    int cuda;
    int device;              /* the calling thread's GPU, bound in the worker (CUDA) */
    dm_stopset stop;
    dm_stream_builder sb;    /* touched by the worker only */
    dm_pp_stats st;          /* reader + normaliser counters (main thread) */
    dm_pp_times *times;
    double t_tok, t_build, t_h2d, t_kern, t_d2h; /* worker */
    dm_pp_batch slots[DM_PP_SLOTS];
    dm_pp_queue free_q, full_q;
    dm_pp_batch *cur;        /* being filled by the main thread */
    size_t batch_bytes;
    uint64_t next_seq;       /* sequence number of the next submitted batch (main thread) */
    uint64_t next_commit;    /* the batch whose turn it is to enter the stream (under commit_mu) */
    pthread_mutex_t commit_mu;
    pthread_cond_t commit_cv;
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

/* Worker: tokenises a batch (in parallel with the other worker), then waits for its turn and
 * appends documents and tokens to the stream in batch order. */
static int dm_pp_work(dm_pp_run *r, dm_pp_batch *b, dm_tok_result *res, int *have_res)
{
    dm_tok_batch tb = {b->text ? b->text : "", b->text_len, b->doc_off, b->n_docs};
    double t1 = dm_now();
    int rc = r->tokenize(res, &tb, &r->stop, &r->opt->tok);
    double t2 = dm_now();
    *have_res = rc >= 0;
    double h2d = 0, kern = 0, d2h = 0;
    if (r->cuda) dm_pp_cuda_take_times(&h2d, &kern, &d2h);
    /* in order: wait for this batch's turn */
    pthread_mutex_lock(&r->commit_mu);
    while (r->next_commit != b->seq) pthread_cond_wait(&r->commit_cv, &r->commit_mu);
    r->t_tok += t2 - t1;
    r->t_h2d += h2d;
    r->t_kern += kern;
    r->t_d2h += d2h;
    if (rc >= 0 && dm_pp_worker_rc(r) >= 0) {
        double t3 = dm_now();
        size_t first = r->sb.s.n_docs;
        for (size_t d = 0, m = 0; rc >= 0 && d < b->n_docs; d++) {
            const char *id = b->meta + m;
            const char *lab = id + strlen(id) + 1;
            m = (size_t)(lab - b->meta) + strlen(lab) + 1;
            rc = dm_sb_add_doc(&r->sb, id, lab);
        }
        if (rc >= 0) rc = dm_sb_add_tokens(&r->sb, first, res);
        r->t_build += dm_now() - t3;
    }
    if (rc < 0) dm_pp_set_rc(r, rc);
    r->next_commit++;
    pthread_cond_broadcast(&r->commit_cv);
    pthread_mutex_unlock(&r->commit_mu);
    return rc;
}

static void *dm_pp_worker(void *arg)
{
    dm_pp_run *r = arg;
    if (r->cuda) {
        int rc = dm_pp_cuda_set_device(r->device);
        if (rc < 0) dm_pp_set_rc(r, rc);
    }
    for (;;) {
        dm_pp_batch *b = dm_pp_queue_pop(&r->full_q);
        if (!b) {
            dm_pp_queue_push(&r->full_q, NULL); /* let the other workers see the end too */
            break;
        }
        dm_tok_result res;
        int have = 0;
        if (dm_pp_worker_rc(r) >= 0) {
            dm_pp_work(r, b, &res, &have);
        } else { /* after an error: only keep the commit order moving */
            pthread_mutex_lock(&r->commit_mu);
            while (r->next_commit != b->seq) pthread_cond_wait(&r->commit_cv, &r->commit_mu);
            r->next_commit++;
            pthread_cond_broadcast(&r->commit_cv);
            pthread_mutex_unlock(&r->commit_mu);
        }
        if (have) dm_tok_result_free(&res);
        b->text_len = b->n_docs = b->meta_len = 0;
        b->doc_off[0] = 0;
        dm_pp_queue_push(&r->free_q, b);
    }
    return NULL;
}

static int dm_pp_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return DM_OK;
    size_t nc = *cap ? *cap : 4096;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, nc * elem);
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
    r->cur = dm_pp_queue_pop(&r->free_q);
    return dm_pp_worker_rc(r);
}

static int dm_pp_sink(void *user, const dm_raw_doc *doc)
{
    dm_pp_run *r = user;
    dm_pp_batch *b = r->cur;
    double t0 = dm_now();
    size_t il = strlen(doc->id) + 1, ll = strlen(doc->labels) + 1;
    DM_TRY(dm_pp_grow((void **)&b->meta, &b->meta_cap, b->meta_len + il + ll, 1));
    memcpy(b->meta + b->meta_len, doc->id, il);
    memcpy(b->meta + b->meta_len + il, doc->labels, ll);
    b->meta_len += il + ll;
    DM_TRY(dm_pp_grow((void **)&b->doc_off, &b->doc_cap, b->n_docs + 2, sizeof(uint64_t)));
    DM_TRY(dm_normalize(&b->text, &b->text_len, &b->text_cap, doc->text, doc->len,
                        r->opt->force_unicode, &r->st));
    b->n_docs++;
    b->doc_off[b->n_docs] = b->text_len;
    r->times->normalize += dm_now() - t0;
    /* a document larger than a batch simply makes a batch of its own: never truncated */
    if (b->text_len >= r->batch_bytes) DM_TRY(dm_pp_submit(r));
    return DM_OK;
}

/* The file list as a document source: every file in order through the readers. */
typedef struct dm_pp_file_source {
    const dm_pp_file *files;
    size_t n_files;
    const dm_reader_options *reader;
} dm_pp_file_source;

static int dm_pp_files_source(void *src, dm_pp_stats *st, dm_doc_sink *sink, void *user)
{
    const dm_pp_file_source *fs = src;
    for (size_t i = 0; i < fs->n_files; i++) DM_TRY(dm_pp_read_file(&fs->files[i], fs->reader, st, sink, user));
    return DM_OK;
}

int dm_preprocess_files(dm_token_stream *out, dm_pp_times *times, const dm_pp_file *files,
                        size_t n_files, const dm_preprocess_options *opt, int backend)
{
    if (!out || !opt || (!files && n_files)) return DM_ERR(DM_ERR_INVALID_ARG, "dm_preprocess_files: NULL argument");
    uint64_t in_bytes = 0;
    for (size_t i = 0; i < n_files; i++) in_bytes += files[i].size;
    dm_pp_file_source fs = {files, n_files, &opt->reader};
    return dm_preprocess_source(out, times, dm_pp_files_source, &fs, in_bytes, opt, backend);
}

int dm_preprocess_source(dm_token_stream *out, dm_pp_times *times, dm_doc_source_fn *source, void *src,
                         uint64_t in_bytes, const dm_preprocess_options *opt, int backend)
{
    if (!out || !opt || !source) return DM_ERR(DM_ERR_INVALID_ARG, "dm_preprocess_source: NULL argument");
    dm_pp_times tdummy;
    if (!times) times = &tdummy;
    memset(times, 0, sizeof(*times));
    memset(out, 0, sizeof(*out));
    double w0 = dm_now();
    dm_pp_run *r = calloc(1, sizeof(*r));
    if (!r) return DM_ERR(DM_ERR_NOMEM, "preprocess: out of memory");
    r->opt = opt;
    r->times = times;
    r->cuda = backend == DM_BACKEND_CUDA;
    r->tokenize = backend == DM_BACKEND_CUDA ? dm_tokenize_cuda
                  : backend == DM_PP_BACKEND_HD ? dm_tokenize_hd
                                                : dm_tokenize_cpu;
    /* automatic batches: about an eighth of this rank's input so that small corpora still
     * pipeline, between 1 MB and DM_PP_DEFAULT_BATCH */
    size_t autob = (size_t)(in_bytes / 8);
    if (autob < ((size_t)1 << 20)) autob = (size_t)1 << 20;
    if (autob > DM_PP_DEFAULT_BATCH) autob = DM_PP_DEFAULT_BATCH;
    r->batch_bytes = opt->batch_bytes ? opt->batch_bytes : autob;
    int rc;
    if (r->cuda && (rc = dm_pp_cuda_get_device(&r->device)) < 0) {
        free(r);
        return rc;
    }
    if (opt->stopwords && opt->stopwords[0] == 0) rc = dm_stopset_from_text(&r->stop, "", 0);
    else rc = dm_stopset_load(&r->stop, opt->stopwords);
    if (rc < 0) {
        free(r);
        return rc;
    }
    rc = dm_sb_init(&r->sb);
    pthread_mutex_init(&r->free_q.mu, NULL);
    pthread_cond_init(&r->free_q.cv, NULL);
    pthread_mutex_init(&r->full_q.mu, NULL);
    pthread_cond_init(&r->full_q.cv, NULL);
    pthread_mutex_init(&r->rc_mu, NULL);
    pthread_mutex_init(&r->commit_mu, NULL);
    pthread_cond_init(&r->commit_cv, NULL);
    for (int i = 0; rc >= 0 && i < DM_PP_SLOTS; i++) {
        r->slots[i].doc_cap = 1024;
        r->slots[i].doc_off = malloc(r->slots[i].doc_cap * sizeof(uint64_t));
        if (!r->slots[i].doc_off) rc = DM_ERR(DM_ERR_NOMEM, "preprocess: out of memory");
        else r->slots[i].doc_off[0] = 0;
        if (i > 0) dm_pp_queue_push(&r->free_q, &r->slots[i]);
    }
    r->cur = &r->slots[0];
    pthread_t worker[DM_PP_WORKERS];
    int started = 0;
    for (int i = 0; rc >= 0 && i < DM_PP_WORKERS; i++) {
        if (pthread_create(&worker[i], NULL, dm_pp_worker, r) != 0)
            rc = DM_ERR(DM_ERR_NOMEM, "preprocess: cannot start a worker thread");
        else started++;
    }
    if (rc >= 0) {
        double t0 = dm_now();
        rc = source(src, &r->st, dm_pp_sink, r);
        /* read time = time in the source minus the sink's work */
        times->read += dm_now() - t0 - times->normalize;
        if (rc >= 0) rc = dm_pp_worker_rc(r);
    }
    if (rc >= 0) rc = dm_pp_submit(r);
    if (started) {
        dm_pp_queue_push(&r->full_q, NULL); /* each worker passes the end marker on */
        for (int i = 0; i < started; i++) pthread_join(worker[i], NULL);
    }
    if (r->worker_rc < 0) /* carry the worker's message over to this thread */
        rc = DM_ERR(r->worker_rc, "%s", r->worker_msg);
    times->kernels = r->cuda ? r->t_kern : r->t_tok;
    times->h2d = r->t_h2d;
    times->d2h = r->t_d2h;
    times->build = r->t_build;
    if (rc >= 0) {
        dm_pp_stats_add(&r->sb.s.stats, &r->st);
        r->sb.s.flags = (opt->tok.stem ? 1u : 0u) | (opt->tok.keep_numbers ? 2u : 0u);
        double t0 = dm_now();
        rc = dm_sb_finish(out, &r->sb);
        times->build += dm_now() - t0;
    } else {
        dm_sb_free(&r->sb);
    }
    for (int i = 0; i < DM_PP_SLOTS; i++) {
        free(r->slots[i].text);
        free(r->slots[i].doc_off);
        free(r->slots[i].meta);
    }
    pthread_mutex_destroy(&r->free_q.mu);
    pthread_cond_destroy(&r->free_q.cv);
    pthread_mutex_destroy(&r->full_q.mu);
    pthread_cond_destroy(&r->full_q.cv);
    pthread_mutex_destroy(&r->rc_mu);
    pthread_mutex_destroy(&r->commit_mu);
    pthread_cond_destroy(&r->commit_cv);
    dm_stopset_free(&r->stop);
    free(r);
    times->wall = dm_now() - w0;
    return rc;
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
    if (ctx) {
        int g;
        if (MPI_Allreduce(&rc, &g, 1, MPI_INT, MPI_MIN, ctx->world) != MPI_SUCCESS)
            return DM_ERR(DM_ERR_MPI, "preprocess: MPI_Allreduce failed");
        if (g < 0 && rc >= 0) {
            dm_pp_file_list_free(&fl);
            return DM_ERR(g, "preprocess: another rank failed to list %s", path);
        }
    }
    if (rc < 0) return rc;
    size_t b, e;
    dm_pp_split_by_bytes(&b, &e, &fl, rank, size);
    rc = dm_preprocess_files(out, times, fl.files + b, e - b, opt, backend);
    dm_pp_file_list_free(&fl);
    if (ctx) {
        int g;
        if (MPI_Allreduce(&rc, &g, 1, MPI_INT, MPI_MIN, ctx->world) != MPI_SUCCESS) {
            dm_token_stream_free(out);
            return DM_ERR(DM_ERR_MPI, "preprocess: MPI_Allreduce failed");
        }
        if (g < 0) {
            dm_token_stream_free(out);
            return rc < 0 ? rc : DM_ERR(g, "preprocess: another rank failed on %s", path);
        }
    } else if (rc < 0) {
        return rc;
    }
    /* listing counters were counted on every rank: keep rank 0's */
    if (rank == 0) dm_pp_stats_add(&out->stats, &lst);
    if (ctx) {
        uint64_t n_msgs = out->stats.n_messages;
        DM_TRY(dm_pp_stats_allreduce(&out->stats, &ctx->world));
        out->stats.n_messages = n_msgs;
    }
    if (out->stats.docs == 0) {
        uint64_t sk = dm_pp_stats_skipped_total(&out->stats);
        dm_token_stream_free(out);
        return DM_ERR(DM_ERR_INVALID_ARG, "corpus %s: no documents (%llu skipped)", path,
                      (unsigned long long)sk);
    }
    return DM_OK;
}
