/* The preprocess driver: lists the corpus, splits files across ranks by bytes, reads and normalises
 * documents into batches, tokenises each batch with the chosen backend and builds the token
 * stream; errors agree across ranks. Reference: the CPU backend (dm_tokenize_cpu).
 * The CUDA backend's double-buffered pipeline lives in preprocess_cuda.cu; this file runs batches
 * one after another through dm_tokenize_fn. */
#include <mpi.h>
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

#define DM_PP_DEFAULT_BATCH (64u << 20)

typedef struct dm_pp_run {
    const dm_preprocess_options *opt;
    dm_tokenize_fn *tokenize;
    dm_stopset stop;
    dm_stream_builder sb;
    dm_pp_stats st;          /* reader + normaliser counters */
    dm_pp_times *times;
    /* current batch */
    char *text;
    size_t text_len, text_cap;
    uint64_t *doc_off;
    size_t doc_cap, batch_docs, batch_first;
    size_t batch_bytes;
} dm_pp_run;

static int dm_pp_flush(dm_pp_run *r)
{
    if (r->batch_docs == 0) return DM_OK;
    dm_tok_batch b = {r->text, r->text_len, r->doc_off, r->batch_docs};
    dm_tok_result res;
    double t0 = dm_now();
    DM_TRY(r->tokenize(&res, &b, &r->stop, &r->opt->tok));
    double t1 = dm_now();
    int rc = dm_sb_add_tokens(&r->sb, r->batch_first, &res);
    dm_tok_result_free(&res);
    r->times->kernels += t1 - t0;
    r->times->build += dm_now() - t1;
    r->batch_first += r->batch_docs;
    r->batch_docs = 0;
    r->text_len = 0;
    r->doc_off[0] = 0;
    return rc;
}

static int dm_pp_sink(void *user, const dm_raw_doc *doc)
{
    dm_pp_run *r = user;
    double t0 = dm_now();
    DM_TRY(dm_sb_add_doc(&r->sb, doc->id, doc->labels));
    if (r->batch_docs + 2 > r->doc_cap) {
        size_t nc = r->doc_cap ? 2 * r->doc_cap : 4096;
        uint64_t *q = realloc(r->doc_off, nc * sizeof(*q));
        if (!q) return DM_ERR(DM_ERR_NOMEM, "preprocess: out of memory");
        r->doc_off = q;
        r->doc_cap = nc;
    }
    DM_TRY(dm_normalize(&r->text, &r->text_len, &r->text_cap, doc->text, doc->len,
                        r->opt->force_unicode, &r->st));
    r->batch_docs++;
    r->doc_off[r->batch_docs] = r->text_len;
    r->times->normalize += dm_now() - t0;
    /* a document larger than a batch simply makes a batch of its own: never truncated */
    if (r->text_len >= r->batch_bytes) DM_TRY(dm_pp_flush(r));
    return DM_OK;
}

int dm_preprocess_files(dm_token_stream *out, dm_pp_times *times, const dm_pp_file *files,
                        size_t n_files, const dm_preprocess_options *opt, int backend)
{
    if (!out || !opt || (!files && n_files)) return DM_ERR(DM_ERR_INVALID_ARG, "dm_preprocess_files: NULL argument");
    dm_pp_times tdummy;
    if (!times) times = &tdummy;
    memset(times, 0, sizeof(*times));
    memset(out, 0, sizeof(*out));
    double w0 = dm_now();
    dm_pp_run r;
    memset(&r, 0, sizeof(r));
    r.opt = opt;
    r.times = times;
    r.tokenize = backend == DM_BACKEND_CUDA ? dm_tokenize_cuda : dm_tokenize_cpu;
    r.batch_bytes = opt->batch_bytes ? opt->batch_bytes : DM_PP_DEFAULT_BATCH;
    int rc;
    if (opt->stopwords && opt->stopwords[0] == 0) rc = dm_stopset_from_text(&r.stop, "", 0);
    else rc = dm_stopset_load(&r.stop, opt->stopwords);
    if (rc < 0) return rc;
    rc = dm_sb_init(&r.sb);
    if (rc >= 0) {
        r.doc_cap = 4096;
        r.doc_off = malloc(r.doc_cap * sizeof(uint64_t));
        if (!r.doc_off) rc = DM_ERR(DM_ERR_NOMEM, "preprocess: out of memory");
        else r.doc_off[0] = 0;
    }
    for (size_t i = 0; rc >= 0 && i < n_files; i++) {
        double t0 = dm_now();
        double n0 = times->normalize + times->kernels + times->build;
        rc = dm_pp_read_file(&files[i], &opt->reader, &r.st, dm_pp_sink, &r);
        /* read time = time in the reader minus the sink's work */
        times->read += dm_now() - t0 - (times->normalize + times->kernels + times->build - n0);
    }
    if (rc >= 0) rc = dm_pp_flush(&r);
    if (rc >= 0) {
        dm_pp_stats_add(&r.sb.s.stats, &r.st);
        r.sb.s.flags = (opt->tok.stem ? 1u : 0u) | (opt->tok.keep_numbers ? 2u : 0u);
        double t0 = dm_now();
        rc = dm_sb_finish(out, &r.sb);
        times->build += dm_now() - t0;
    } else {
        dm_sb_free(&r.sb);
    }
    free(r.text);
    free(r.doc_off);
    dm_stopset_free(&r.stop);
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
