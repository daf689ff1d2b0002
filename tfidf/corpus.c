/* The corpus driver of tfidf: reads this rank's share of a corpus with preprocess's readers,
 * normaliser and tokeniser, batch by batch; resolves every token's (hash, stem bytes) to a local
 * term through the host term table (collisions resolved by bytes); counts each batch's documents
 * with the chosen backend; then TF-IDF over all ranks, or TF-ICF batch by batch (streaming, no
 * global pass). Reference: preprocess/preprocess.c (the same reading and batching) and the CPU
 * backend. */
#include <inttypes.h>
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/context.h"
#include "common/log.h"
#include "common/status.h"
#include "common/timer.h"
#include "tfidf/tfidf.h"
#include "tfidf/tfidf_internal.h"

#define DM_TFIDF_DEFAULT_BATCH (64u << 20)

typedef struct corpus_run corpus_run;
typedef int batch_fn(corpus_run *r, dm_tfidf_local *batch);

struct corpus_run {
    const dm_preprocess_options *pp;
    const dm_tfidf_options *opt;
    int backend;
    dm_tokenize_fn *tokenize;
    dm_tf_count_fn *count;
    dm_stopset stop;
    dm_pp_stats st;
    dm_termtab tab;
    /* the batch being filled */
    char *text;
    size_t text_len, text_cap;
    uint64_t *doc_off;
    size_t doc_cap, batch_docs, batch_bytes;
    uint64_t *id_off, *label_off; /* batch_docs + 1 */
    size_t off_cap;
    char *ids, *labels;
    size_t ids_len, ids_cap, labels_len, labels_cap;
    uint32_t *tok;
    size_t tok_cap;
    /* what happens to a counted batch */
    batch_fn *on_batch;
    void *user;
};

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap && *p) return DM_OK;
    size_t nc = *cap ? *cap : 1024;
    while (nc < need) nc *= 2;
    void *q = dm_realloc(*p, nc * elem);
    if (!q) return DM_ERR(DM_ERR_NOMEM, "vectorize: out of memory");
    *p = q;
    *cap = nc;
    return DM_OK;
}

static int flush(corpus_run *r)
{
    if (r->batch_docs == 0) return DM_OK;
    dm_tok_batch b = {r->text, r->text_len, r->doc_off, r->batch_docs};
    dm_tok_result res;
    dm_timer_start("tfidf.tokenize");
    int rc = r->tokenize(&res, &b, &r->stop, &r->pp->tok);
    dm_timer_stop("tfidf.tokenize");
    if (rc < 0) return rc;
    dm_timer_start("tfidf.terms");
    rc = grow((void **)&r->tok, &r->tok_cap, res.n_tokens + 1, sizeof(uint32_t));
    uint64_t coll0 = r->tab.collisions;
    for (size_t i = 0; rc == DM_OK && i < res.n_tokens; i++)
        rc = dm_termtab_insert(&r->tab, &r->tok[i], NULL, res.hash[i], res.stems + res.start[i], res.stem_len[i]);
    dm_timer_stop("tfidf.terms");
    r->st.docs += r->batch_docs;
    r->st.tokens += res.n_tokens;
    r->st.tokens_short += res.n_short;
    r->st.tokens_long += res.n_long;
    r->st.tokens_number += res.n_number;
    r->st.tokens_stop += res.n_stop;
    r->st.hash_collisions += r->tab.collisions - coll0;
    dm_tfidf_local batch;
    memset(&batch, 0, sizeof batch);
    dm_tf_count_options co = DM_TF_COUNT_OPTIONS_INIT;
    co.variant = r->opt->tf_variant;
    dm_timer_start("tfidf.count");
    if (rc == DM_OK) rc = r->count(&batch.counts, res.doc_tok, r->tok, r->batch_docs, (uint32_t)r->tab.terms.n, &co);
    dm_timer_stop("tfidf.count");
    if (rc == DM_OK) {
        batch.terms = r->tab.terms; /* borrowed */
        batch.id_off = r->id_off;
        batch.ids = r->ids;
        batch.label_off = r->label_off;
        batch.labels = r->labels;
        batch.tokens = res.n_tokens;
        batch.table_rebuilds = co.rebuilds;
        rc = r->on_batch(r, &batch);
    }
    dm_tf_counts_free(&batch.counts);
    dm_tok_result_free(&res);
    r->batch_docs = 0;
    r->text_len = 0;
    r->doc_off[0] = 0;
    r->ids_len = r->labels_len = 0;
    return rc;
}

static int sink(void *user, const dm_raw_doc *doc)
{
    corpus_run *r = user;
    size_t il = strlen(doc->id) + 1, ll = strlen(doc->labels) + 1;
    DM_TRY(grow((void **)&r->doc_off, &r->doc_cap, r->batch_docs + 2, sizeof(uint64_t)));
    size_t oc = r->off_cap;
    DM_TRY(grow((void **)&r->id_off, &oc, r->batch_docs + 2, sizeof(uint64_t)));
    oc = r->off_cap;
    DM_TRY(grow((void **)&r->label_off, &oc, r->batch_docs + 2, sizeof(uint64_t)));
    r->off_cap = oc;
    DM_TRY(grow((void **)&r->ids, &r->ids_cap, r->ids_len + il, 1));
    DM_TRY(grow((void **)&r->labels, &r->labels_cap, r->labels_len + ll, 1));
    size_t d = r->batch_docs;
    r->id_off[d] = r->ids_len;
    r->label_off[d] = r->labels_len;
    memcpy(r->ids + r->ids_len, doc->id, il);
    memcpy(r->labels + r->labels_len, doc->labels, ll);
    r->ids_len += il;
    r->labels_len += ll;
    r->id_off[d + 1] = r->ids_len;
    r->label_off[d + 1] = r->labels_len;
    if (doc->labels[0]) r->st.docs_labelled++;
    dm_timer_start("tfidf.normalize");
    int rc = dm_normalize(&r->text, &r->text_len, &r->text_cap, doc->text, doc->len, r->pp->force_unicode, &r->st);
    dm_timer_stop("tfidf.normalize");
    if (rc < 0) return rc;
    r->batch_docs++;
    r->doc_off[r->batch_docs] = r->text_len;
    /* a document larger than a batch makes a batch of its own: never truncated */
    if (r->text_len >= r->batch_bytes) DM_TRY(flush(r));
    return DM_OK;
}

static void run_free(corpus_run *r)
{
    dm_stopset_free(&r->stop);
    dm_termtab_free(&r->tab);
    dm_free(r->text); /* grown by dm_normalize (dm_realloc) */
    dm_free(r->doc_off);
    dm_free(r->id_off);
    dm_free(r->label_off);
    dm_free(r->ids);
    dm_free(r->labels);
    dm_free(r->tok);
}

/* Reads and counts this rank's share; on_batch gets every batch. Collective (listing and the
 * final agreement). *pp_stats (may be NULL) gets the counters summed over ranks. */
static int run_corpus(corpus_run *r, dm_pp_stats *pp_stats, const dm_ctx *ctx, const char *path)
{
    int rank = ctx ? ctx->rank : 0, size = ctx ? ctx->size : 1;
    dm_pp_stats lst;
    memset(&lst, 0, sizeof lst);
    dm_pp_file_list fl;
    memset(&fl, 0, sizeof fl);
    int rc = dm_pp_list_files(&fl, path, &r->pp->reader, &lst);
    if (ctx) rc = dm_ctx_agree(ctx, rc);
    if (rc >= 0) rc = dm_pp_file_list_agree(&fl, path, ctx); /* every rank the same files */
    if (rc < 0) {
        dm_pp_file_list_free(&fl);
        return rc;
    }
    size_t b, e;
    dm_pp_split_by_bytes(&b, &e, &fl, rank, size);
    if (r->pp->stopwords && r->pp->stopwords[0] == '\0') rc = dm_stopset_from_text(&r->stop, "", 0);
    else rc = dm_stopset_load(&r->stop, r->pp->stopwords);
    if (rc == DM_OK) rc = dm_termtab_init(&r->tab, r->opt->table_initial_cap);
    if (rc == DM_OK) rc = grow((void **)&r->doc_off, &r->doc_cap, 2, sizeof(uint64_t));
    if (rc == DM_OK) {
        r->doc_off[0] = 0;
        r->batch_bytes = r->pp->batch_bytes ? r->pp->batch_bytes : DM_TFIDF_DEFAULT_BATCH;
    }
    dm_timer_start("tfidf.read");
    for (size_t i = b; rc == DM_OK && i < e; i++) rc = dm_pp_read_file(&fl.files[i], &r->pp->reader, &r->st, sink, r);
    if (rc == DM_OK) rc = flush(r);
    dm_timer_stop("tfidf.read");
    dm_pp_file_list_free(&fl);
    if (ctx) rc = dm_ctx_agree(ctx, rc);
    if (rc < 0) return rc;
    if (rank == 0) dm_pp_stats_add(&r->st, &lst);
    dm_pp_stats all = r->st;
    if (ctx) rc = dm_ctx_agree(ctx, dm_pp_stats_allreduce(&all, &ctx->world));
    if (rc < 0) return rc;
    if (pp_stats) *pp_stats = all;
    if (all.docs == 0) return dm_pp_no_documents(path, &all);
    return DM_OK;
}

static int run_init(corpus_run *r, const dm_ctx *ctx, const dm_preprocess_options *pp, const dm_tfidf_options *opt,
                    const dm_preprocess_options *def)
{
    memset(r, 0, sizeof *r);
    r->pp = pp ? pp : def;
    r->opt = opt;
    r->backend = dm_tfidf_backend(ctx, opt->backend);
    r->tokenize = r->backend == DM_BACKEND_CUDA ? dm_tokenize_cuda : dm_tokenize_cpu;
    r->count = r->backend == DM_BACKEND_CUDA ? dm_tf_count_cuda : dm_tf_count_cpu;
    return DM_OK;
}

/* ------------------------------------------------------------------ TF-IDF: accumulate counts */

typedef struct accum {
    dm_tfidf_local *l;
    size_t rows_cap, nnz_cap, ids_cap, labels_cap;
} accum;

static int accumulate(corpus_run *r, dm_tfidf_local *b)
{
    accum *a = r->user;
    dm_tfidf_local *l = a->l;
    size_t n0 = l->counts.n_rows, nb = b->counts.n_rows;
    uint64_t z0 = n0 ? l->counts.row_off[n0] : 0, zb = b->counts.row_off[nb];
    uint64_t i0 = n0 ? l->id_off[n0] : 0, l0 = n0 ? l->label_off[n0] : 0;
    size_t c = a->rows_cap;
    DM_TRY(grow((void **)&l->counts.row_off, &c, n0 + nb + 1, sizeof(uint64_t)));
    c = a->rows_cap;
    DM_TRY(grow((void **)&l->id_off, &c, n0 + nb + 1, sizeof(uint64_t)));
    c = a->rows_cap;
    DM_TRY(grow((void **)&l->label_off, &c, n0 + nb + 1, sizeof(uint64_t)));
    a->rows_cap = c;
    c = a->nnz_cap;
    DM_TRY(grow((void **)&l->counts.term, &c, z0 + zb + 1, sizeof(uint32_t)));
    c = a->nnz_cap;
    DM_TRY(grow((void **)&l->counts.count, &c, z0 + zb + 1, sizeof(uint32_t)));
    a->nnz_cap = c;
    DM_TRY(grow((void **)&l->ids, &a->ids_cap, i0 + b->id_off[nb] + 1, 1));
    DM_TRY(grow((void **)&l->labels, &a->labels_cap, l0 + b->label_off[nb] + 1, 1));
    if (n0 == 0) l->counts.row_off[0] = l->id_off[0] = l->label_off[0] = 0;
    for (size_t d = 0; d < nb; d++) {
        l->counts.row_off[n0 + d + 1] = z0 + b->counts.row_off[d + 1];
        l->id_off[n0 + d + 1] = i0 + b->id_off[d + 1];
        l->label_off[n0 + d + 1] = l0 + b->label_off[d + 1];
    }
    memcpy(l->counts.term + z0, b->counts.term, sizeof(uint32_t) * zb);
    memcpy(l->counts.count + z0, b->counts.count, sizeof(uint32_t) * zb);
    memcpy(l->ids + i0, b->ids, b->id_off[nb]);
    memcpy(l->labels + l0, b->labels, b->label_off[nb]);
    l->counts.n_rows = n0 + nb;
    l->tokens += b->tokens;
    l->table_rebuilds += b->table_rebuilds;
    return DM_OK;
}

/* The batched reader: every token resolved by its bytes as it is read. */
static int local_by_bytes(dm_tfidf_local *out, dm_pp_stats *pp_stats, const dm_ctx *ctx, const char *path,
                          const dm_preprocess_options *pp, const dm_tfidf_options *opt)
{
    memset(out, 0, sizeof *out);
    dm_preprocess_options def = DM_PREPROCESS_OPTIONS_INIT;
    corpus_run r;
    run_init(&r, ctx, pp, opt, &def);
    accum a;
    memset(&a, 0, sizeof a);
    a.l = out;
    r.on_batch = accumulate;
    r.user = &a;
    int rc = run_corpus(&r, pp_stats, ctx, path);
    if (rc == DM_OK && out->counts.n_rows == 0) {
        /* this rank read no document: valid empty arrays */
        dm_free(out->counts.row_off);
        dm_free(out->id_off);
        dm_free(out->label_off);
        out->counts.row_off = dm_calloc(1, sizeof(uint64_t));
        out->id_off = dm_calloc(1, sizeof(uint64_t));
        out->label_off = dm_calloc(1, sizeof(uint64_t));
        if (!out->counts.row_off || !out->id_off || !out->label_off) rc = DM_ERR_NOMEM;
    }
    if (rc == DM_OK) {
        out->terms = r.tab.terms;
        memset(&r.tab.terms, 0, sizeof r.tab.terms);
        if (!out->terms.off) rc = dm_termlist_alloc(&out->terms, 0, 0, 1);
        out->hash_collisions = r.tab.collisions;
        out->table_rebuilds += r.tab.rebuilds;
    }
    run_free(&r);
    if (ctx) rc = dm_ctx_agree(ctx, rc);
    if (rc < 0) dm_tfidf_local_free(out);
    return rc;
}

int dm_tfidf_local_from_corpus(dm_tfidf_local *out, dm_pp_stats *pp_stats, const dm_ctx *ctx, const char *path,
                               const dm_preprocess_options *pp, const dm_tfidf_options *opt)
{
    if (!out || !path || !opt) return DM_ERR(DM_ERR_INVALID_ARG, "dm_tfidf_local_from_corpus: NULL argument");
    memset(out, 0, sizeof *out);
    if (opt->by_bytes) return local_by_bytes(out, pp_stats, ctx, path, pp, opt);
    /* preprocess's pipelined reader (batches read while others are tokenised), then the token
     * hashes onto the stream's vocabulary and the counts, on the chosen backend */
    dm_preprocess_options p = DM_PREPROCESS_OPTIONS_INIT;
    if (pp) p = *pp;
    p.backend = dm_tfidf_backend(ctx, opt->backend);
    dm_token_stream s;
    dm_pp_times pt;
    memset(&pt, 0, sizeof pt);
    dm_timer_start("tfidf.preprocess");
    int rc = dm_preprocess(&s, &pt, ctx, path, &p); /* errors agree across ranks */
    dm_timer_stop("tfidf.preprocess");
    if (rc < 0) return rc;
    /* preprocess's own stages (read and normalise on this thread, the rest on its worker) */
    dm_pp_times_to_timers(&pt, "tfidf.pp", 0);
    if (pp_stats) *pp_stats = s.stats;
    /* hash_collisions is summed over ranks: every rank takes the same branch */
    if (s.stats.hash_collisions > 0) {
        dm_log_warn("%s: %" PRIu64 " stems share a 64-bit hash with another stem; reading again with terms "
                    "resolved by their bytes", path, s.stats.hash_collisions);
        dm_token_stream_free(&s);
        return local_by_bytes(out, pp_stats, ctx, path, pp, opt);
    }
    rc = dm_tfidf_local_from_stream(out, &s, p.backend, opt);
    dm_token_stream_free(&s);
    if (ctx) rc = dm_ctx_agree(ctx, rc);
    if (rc < 0) dm_tfidf_local_free(out);
    return rc;
}

/* ------------------------------------------------------------------ TF-ICF: weigh each batch */

typedef struct icf_sink {
    const dm_icf_table *table;
    dm_vectors *out;
    dm_tfidf_stats st;
    size_t rows_cap, nnz_cap, ids_cap, labels_cap;
} icf_sink;

static int vectors_append(icf_sink *s, const dm_vectors *b)
{
    dm_vectors *v = s->out;
    uint64_t n0 = v->n_rows, nb = b->n_rows;
    uint64_t z0 = v->row_off ? v->row_off[n0] : 0, zb = b->row_off[nb];
    uint64_t i0 = v->id_off ? v->id_off[n0] : 0, l0 = v->label_off ? v->label_off[n0] : 0;
    size_t c = s->rows_cap;
    DM_TRY(grow((void **)&v->row_off, &c, n0 + nb + 1, sizeof(uint64_t)));
    c = s->rows_cap;
    DM_TRY(grow((void **)&v->id_off, &c, n0 + nb + 1, sizeof(uint64_t)));
    c = s->rows_cap;
    DM_TRY(grow((void **)&v->label_off, &c, n0 + nb + 1, sizeof(uint64_t)));
    s->rows_cap = c;
    c = s->nnz_cap;
    DM_TRY(grow((void **)&v->col, &c, z0 + zb + 1, sizeof(uint32_t)));
    c = s->nnz_cap;
    DM_TRY(grow((void **)&v->val, &c, z0 + zb + 1, sizeof(float)));
    s->nnz_cap = c;
    DM_TRY(grow((void **)&v->ids, &s->ids_cap, i0 + b->id_off[nb] + 1, 1));
    DM_TRY(grow((void **)&v->labels, &s->labels_cap, l0 + b->label_off[nb] + 1, 1));
    if (n0 == 0) v->row_off[0] = v->id_off[0] = v->label_off[0] = 0;
    for (uint64_t d = 0; d < nb; d++) {
        v->row_off[n0 + d + 1] = z0 + b->row_off[d + 1];
        v->id_off[n0 + d + 1] = i0 + b->id_off[d + 1];
        v->label_off[n0 + d + 1] = l0 + b->label_off[d + 1];
    }
    memcpy(v->col + z0, b->col, sizeof(uint32_t) * zb);
    memcpy(v->val + z0, b->val, sizeof(float) * zb);
    memcpy(v->ids + i0, b->ids, b->id_off[nb]);
    memcpy(v->labels + l0, b->labels, b->label_off[nb]);
    v->n_rows = n0 + nb;
    v->n_cols = b->n_cols;
    v->flags = b->flags;
    return DM_OK;
}

static int weigh_batch(corpus_run *r, dm_tfidf_local *b)
{
    icf_sink *s = r->user;
    dm_vectors v;
    dm_timer_start("tfidf.weigh");
    int rc = dm_icf_vectors(&v, &s->st, s->table, b, r->opt, r->backend);
    dm_timer_stop("tfidf.weigh");
    if (rc < 0) return rc;
    s->st.table_rebuilds += b->table_rebuilds;
    rc = vectors_append(s, &v);
    dm_vectors_free(&v);
    return rc;
}

int dm_vectorize_corpus(dm_vectors *out, dm_vocab *vocab, dm_tfidf_stats *stats, dm_pp_stats *pp_stats,
                        const dm_ctx *ctx, const char *path, const dm_preprocess_options *pp,
                        const dm_tfidf_options *opt, const dm_icf_table *icf, const char *icf_name)
{
    if (!out || !path || !opt) return DM_ERR(DM_ERR_INVALID_ARG, "dm_vectorize_corpus: NULL argument");
    memset(out, 0, sizeof *out);
    if (vocab) memset(vocab, 0, sizeof *vocab);
    if (!icf) {
        dm_tfidf_local local;
        DM_TRY(dm_tfidf_local_from_corpus(&local, pp_stats, ctx, path, pp, opt));
        int rc = dm_tfidf_vectors(out, vocab, stats, ctx, &local, opt);
        dm_tfidf_local_free(&local);
        return rc;
    }

    /* TF-ICF: the table fixes the columns; every batch is weighed as it is read */
    dm_pp_signature sig;
    int rc = dm_pp_signature_of(&sig, pp);
    if (rc == DM_OK) rc = dm_icf_table_check(icf, &sig, icf_name);
    if (ctx) rc = dm_ctx_agree(ctx, rc);
    if (rc < 0) return rc;
    dm_preprocess_options def = DM_PREPROCESS_OPTIONS_INIT;
    corpus_run r;
    run_init(&r, ctx, pp, opt, &def);
    icf_sink s;
    memset(&s, 0, sizeof s);
    s.table = icf;
    s.out = out;
    r.on_batch = weigh_batch;
    r.user = &s;
    rc = run_corpus(&r, pp_stats, ctx, path);
    if (rc == DM_OK && !out->row_off) {
        out->row_off = dm_calloc(1, sizeof(uint64_t));
        out->id_off = dm_calloc(1, sizeof(uint64_t));
        out->label_off = dm_calloc(1, sizeof(uint64_t));
        out->col = dm_malloc(4);
        out->val = dm_malloc(4);
        out->ids = dm_calloc(1, 1);
        out->labels = dm_calloc(1, 1);
        if (!out->row_off || !out->id_off || !out->label_off || !out->col || !out->val || !out->ids || !out->labels)
            rc = DM_ERR_NOMEM;
        out->n_cols = icf->vocab.terms.n;
        out->flags = DM_VECTORS_ICF | (opt->l2 ? DM_VECTORS_L2 : 0u) | (opt->sublinear ? DM_VECTORS_SUBLINEAR : 0u);
    }
    s.st.table_rebuilds += r.tab.rebuilds;
    s.st.hash_collisions = r.tab.collisions;
    run_free(&r);
    if (ctx) rc = dm_ctx_agree(ctx, rc);
    uint64_t mine[8] = {s.st.docs, s.st.empty_docs, s.st.tokens, s.st.nnz, s.st.zero_weight, s.st.icf_unknown_tokens,
                        s.st.table_rebuilds, s.st.hash_collisions};
    uint64_t tot[8], base = 0;
    memcpy(tot, mine, sizeof tot);
    if (rc == DM_OK && ctx &&
        (MPI_Allreduce(mine, tot, 8, MPI_UINT64_T, MPI_SUM, ctx->world) != MPI_SUCCESS ||
         MPI_Exscan(&out->n_rows, &base, 1, MPI_UINT64_T, MPI_SUM, ctx->world) != MPI_SUCCESS))
        rc = DM_ERR(DM_ERR_MPI, "vectorize: MPI reductions failed");
    if (ctx) rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK && tot[2] > 0 && tot[5] == tot[2])
        rc = DM_ERR(DM_ERR_INVALID_ARG, "%s does not match this corpus: none of its %" PRIu64 " tokens is in the table",
                    icf_name ? icf_name : "ICF table", tot[2]);
    if (rc == DM_OK && vocab) {
        const dm_termlist *t = &icf->vocab.terms;
        rc = dm_termlist_alloc(&vocab->terms, t->n, t->off[t->n], 1);
        if (rc == DM_OK) {
            memcpy(vocab->terms.hash, t->hash, 8 * t->n);
            memcpy(vocab->terms.off, t->off, 8 * (t->n + 1));
            memcpy(vocab->terms.bytes, t->bytes, t->off[t->n]);
            memcpy(vocab->terms.val, t->val, 8 * t->n);
            vocab->n_docs = icf->vocab.n_docs;
        }
        if (ctx) rc = dm_ctx_agree(ctx, rc);
    }
    if (rc < 0) {
        dm_vectors_free(out);
        if (vocab) dm_vocab_free(vocab);
        return rc;
    }
    out->row_base = ctx && ctx->rank > 0 ? base : 0;
    if (stats) {
        memset(stats, 0, sizeof *stats);
        stats->docs = tot[0];
        stats->empty_docs = tot[1];
        stats->tokens = tot[2];
        stats->nnz = tot[3];
        stats->zero_weight = tot[4];
        stats->icf_unknown_tokens = tot[5];
        stats->table_rebuilds = tot[6];
        stats->hash_collisions = tot[7];
        stats->terms = icf->vocab.terms.n;
    }
    return DM_OK;
}
