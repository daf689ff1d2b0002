/* The backend-neutral tfidf driver: local document frequencies, terms to their owner ranks
 * (MPI_Alltoallv), the merge on the owners, min_df/max_df pruning, term ids from the byte order
 * of the terms (owners sort, runs are allgathered and merged), idf, the weights, and TF-ICF
 * tables and vectors. Errors agree across ranks before every collective. Reference: the CPU
 * backend (tfidf_cpu.c); the contracts are in tfidf/tfidf.h. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/context.h"
#include "common/status.h"
#include "common/timer.h"
#include "tfidf/tfidf.h"
#include "tfidf/tfidf_internal.h"

static int agree(const dm_ctx *ctx, int rc) { return ctx ? dm_ctx_agree(ctx, rc) : rc; }
static int ranks_of(const dm_ctx *ctx) { return ctx ? ctx->size : 1; }

int dm_tfidf_backend(const dm_ctx *ctx, int backend)
{
    if (backend == DM_BACKEND_AUTO) return ctx ? ctx->backend : DM_BACKEND_CPU;
    return backend;
}

void dm_tfidf_local_free(dm_tfidf_local *l)
{
    if (!l) return;
    dm_tf_counts_free(&l->counts);
    dm_tf_dev_free(l->dev);
    dm_termlist_free(&l->terms);
    dm_free(l->id_off);
    dm_free(l->ids);
    dm_free(l->label_off);
    dm_free(l->labels);
    memset(l, 0, sizeof *l);
}

int dm_strings_copy(uint64_t **dst_off, char **dst, const uint64_t *off, const char *s, size_t n)
{
    *dst_off = dm_malloc(sizeof(uint64_t) * (n + 1));
    uint64_t bytes = off ? off[n] : 0;
    *dst = dm_malloc(bytes ? bytes : 1);
    if (!*dst_off || !*dst) return DM_ERR_NOMEM;
    if (off) memcpy(*dst_off, off, sizeof(uint64_t) * (n + 1));
    else memset(*dst_off, 0, sizeof(uint64_t) * (n + 1));
    if (bytes) dm_mem_copy(*dst, s, bytes);
    return DM_OK;
}

/* ------------------------------------------------------------------ term exchange */

static int count_to_int(int *out, uint64_t v)
{
    if (v > INT_MAX) return DM_ERR(DM_ERR_UNSUPPORTED, "tfidf: a message of %" PRIu64 " elements exceeds MPI's int counts", v);
    *out = (int)v;
    return DM_OK;
}

/* Sends term i of `in` to rank dest[i]; out gets the received terms, in order of source rank and,
 * within a source, in the sender's order. Collective; in->val is carried (0 if NULL). */
static int exchange_terms(dm_termlist *out, const dm_termlist *in, const int *dest, const dm_ctx *ctx)
{
    int P = ranks_of(ctx);
    memset(out, 0, sizeof *out);
    if (P == 1) {
        DM_TRY(dm_termlist_alloc(out, in->n, in->off[in->n], 1));
        memcpy(out->hash, in->hash, sizeof(uint64_t) * in->n);
        memcpy(out->off, in->off, sizeof(uint64_t) * (in->n + 1));
        memcpy(out->bytes, in->bytes, in->off[in->n]);
        if (in->val) memcpy(out->val, in->val, sizeof(uint64_t) * in->n);
        return DM_OK;
    }
    int rc = DM_OK;
    uint64_t *sc = dm_calloc(2 * (size_t)P, sizeof(uint64_t)), *rcnt = dm_calloc(2 * (size_t)P, sizeof(uint64_t));
    int *ci = dm_malloc(sizeof(int) * 8 * (size_t)P);
    size_t *pos = dm_malloc(sizeof(size_t) * (size_t)P);
    size_t n = in->n;
    uint64_t nb = in->off[n];
    uint64_t *sh = dm_malloc(sizeof(uint64_t) * (n ? n : 1)), *sv = dm_malloc(sizeof(uint64_t) * (n ? n : 1));
    uint64_t *sl = dm_malloc(sizeof(uint64_t) * (n ? n : 1));
    char *sb = dm_malloc(nb ? nb : 1);
    size_t *bpos = dm_malloc(sizeof(size_t) * (size_t)P);
    if (!sc || !rcnt || !ci || !pos || !sh || !sv || !sl || !sb || !bpos) rc = DM_ERR_NOMEM;
    if (rc == DM_OK) {
        for (size_t i = 0; i < n; i++) {
            sc[2 * dest[i]]++;
            sc[2 * dest[i] + 1] += dm_termlist_len(in, i);
        }
        size_t a = 0, b = 0;
        for (int p = 0; p < P; p++) {
            pos[p] = a;
            bpos[p] = b;
            a += sc[2 * p];
            b += sc[2 * p + 1];
        }
        for (size_t i = 0; i < n; i++) {
            int p = dest[i];
            size_t len = dm_termlist_len(in, i);
            sh[pos[p]] = in->hash[i];
            sv[pos[p]] = in->val ? in->val[i] : 0;
            sl[pos[p]] = len;
            memcpy(sb + bpos[p], dm_termlist_bytes(in, i), len);
            pos[p]++;
            bpos[p] += len;
        }
    }
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK && MPI_Alltoall(sc, 2, MPI_UINT64_T, rcnt, 2, MPI_UINT64_T, ctx->world) != MPI_SUCCESS)
        rc = DM_ERR(DM_ERR_MPI, "tfidf: MPI_Alltoall of term counts failed");
    rc = dm_ctx_agree(ctx, rc);
    int *scnt = ci, *sdis = ci + P, *rcn = ci + 2 * P, *rdis = ci + 3 * P;
    int *sbc = ci + 4 * P, *sbd = ci + 5 * P, *rbc = ci + 6 * P, *rbd = ci + 7 * P;
    uint64_t rn = 0, rb = 0, sn = 0, sbn = 0;
    for (int p = 0; rc == DM_OK && p < P; p++) {
        rc = count_to_int(&scnt[p], sc[2 * p]);
        if (rc == DM_OK) rc = count_to_int(&sbc[p], sc[2 * p + 1]);
        if (rc == DM_OK) rc = count_to_int(&rcn[p], rcnt[2 * p]);
        if (rc == DM_OK) rc = count_to_int(&rbc[p], rcnt[2 * p + 1]);
        if (rc == DM_OK) rc = count_to_int(&sdis[p], sn);
        if (rc == DM_OK) rc = count_to_int(&sbd[p], sbn);
        if (rc == DM_OK) rc = count_to_int(&rdis[p], rn);
        if (rc == DM_OK) rc = count_to_int(&rbd[p], rb);
        sn += sc[2 * p];
        sbn += sc[2 * p + 1];
        rn += rcnt[2 * p];
        rb += rcnt[2 * p + 1];
    }
    if (rc == DM_OK) rc = dm_termlist_alloc(out, (size_t)rn, rb, 1);
    uint64_t *rl = rc == DM_OK ? dm_malloc(sizeof(uint64_t) * (rn ? rn : 1)) : NULL;
    if (rc == DM_OK && !rl) rc = DM_ERR_NOMEM;
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) {
        MPI_Comm w = ctx->world;
        if (MPI_Alltoallv(sh, scnt, sdis, MPI_UINT64_T, out->hash, rcn, rdis, MPI_UINT64_T, w) != MPI_SUCCESS ||
            MPI_Alltoallv(sv, scnt, sdis, MPI_UINT64_T, out->val, rcn, rdis, MPI_UINT64_T, w) != MPI_SUCCESS ||
            MPI_Alltoallv(sl, scnt, sdis, MPI_UINT64_T, rl, rcn, rdis, MPI_UINT64_T, w) != MPI_SUCCESS ||
            MPI_Alltoallv(sb, sbc, sbd, MPI_CHAR, out->bytes, rbc, rbd, MPI_CHAR, w) != MPI_SUCCESS)
            rc = DM_ERR(DM_ERR_MPI, "tfidf: MPI_Alltoallv of terms to their owners failed");
        if (rc == DM_OK) {
            out->off[0] = 0;
            for (uint64_t i = 0; i < rn; i++) out->off[i + 1] = out->off[i] + rl[i];
            if (out->off[rn] != rb) rc = DM_ERR(DM_ERR_MPI, "tfidf: received term bytes do not add up");
        }
    }
    if (rc < 0) dm_termlist_free(out);
    dm_free(rl);
    dm_free(sc);
    dm_free(rcnt);
    dm_free(ci);
    dm_free(pos);
    dm_free(bpos);
    dm_free(sh);
    dm_free(sv);
    dm_free(sl);
    dm_free(sb);
    return dm_ctx_agree(ctx, rc);
}

/* Every rank's `in` (sorted runs) gathered on every rank: out holds run q at
 * [run[q], run[q+1]). Collective. */
static int allgather_terms(dm_termlist *out, size_t *run, const dm_termlist *in, const dm_ctx *ctx)
{
    int P = ranks_of(ctx);
    memset(out, 0, sizeof *out);
    if (P == 1) {
        run[0] = 0;
        run[1] = in->n;
        DM_TRY(dm_termlist_alloc(out, in->n, in->off[in->n], 1));
        memcpy(out->hash, in->hash, sizeof(uint64_t) * in->n);
        memcpy(out->off, in->off, sizeof(uint64_t) * (in->n + 1));
        memcpy(out->bytes, in->bytes, in->off[in->n]);
        memcpy(out->val, in->val, sizeof(uint64_t) * in->n);
        return DM_OK;
    }
    uint64_t mine[2] = {in->n, in->off[in->n]};
    uint64_t *all = dm_malloc(sizeof(uint64_t) * 2 * (size_t)P);
    int *ci = dm_malloc(sizeof(int) * 4 * (size_t)P);
    uint64_t *len = dm_malloc(sizeof(uint64_t) * (in->n ? in->n : 1)), *rl = NULL;
    int rc = (all && ci && len) ? DM_OK : DM_ERR_NOMEM;
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK && MPI_Allgather(mine, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, ctx->world) != MPI_SUCCESS)
        rc = DM_ERR(DM_ERR_MPI, "tfidf: MPI_Allgather of vocabulary sizes failed");
    rc = dm_ctx_agree(ctx, rc);
    int *cnt = ci, *dis = ci + P, *bc = ci + 2 * P, *bd = ci + 3 * P;
    uint64_t tn = 0, tb = 0;
    for (int q = 0; rc == DM_OK && q < P; q++) {
        run[q] = (size_t)tn;
        rc = count_to_int(&cnt[q], all[2 * q]);
        if (rc == DM_OK) rc = count_to_int(&bc[q], all[2 * q + 1]);
        if (rc == DM_OK) rc = count_to_int(&dis[q], tn);
        if (rc == DM_OK) rc = count_to_int(&bd[q], tb);
        tn += all[2 * q];
        tb += all[2 * q + 1];
    }
    run[P] = (size_t)tn;
    if (rc == DM_OK) rc = dm_termlist_alloc(out, (size_t)tn, tb, 1);
    if (rc == DM_OK && !(rl = dm_malloc(sizeof(uint64_t) * (tn ? tn : 1)))) rc = DM_ERR_NOMEM;
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) {
        for (size_t i = 0; i < in->n; i++) len[i] = dm_termlist_len(in, i);
        MPI_Comm w = ctx->world;
        if (MPI_Allgatherv(in->hash, cnt[ctx->rank], MPI_UINT64_T, out->hash, cnt, dis, MPI_UINT64_T, w) != MPI_SUCCESS ||
            MPI_Allgatherv(in->val, cnt[ctx->rank], MPI_UINT64_T, out->val, cnt, dis, MPI_UINT64_T, w) != MPI_SUCCESS ||
            MPI_Allgatherv(len, cnt[ctx->rank], MPI_UINT64_T, rl, cnt, dis, MPI_UINT64_T, w) != MPI_SUCCESS ||
            MPI_Allgatherv(in->bytes, bc[ctx->rank], MPI_CHAR, out->bytes, bc, bd, MPI_CHAR, w) != MPI_SUCCESS)
            rc = DM_ERR(DM_ERR_MPI, "tfidf: MPI_Allgatherv of the vocabulary failed");
        if (rc == DM_OK) {
            out->off[0] = 0;
            for (uint64_t i = 0; i < tn; i++) out->off[i + 1] = out->off[i] + rl[i];
        }
    }
    if (rc < 0) dm_termlist_free(out);
    dm_free(all);
    dm_free(ci);
    dm_free(len);
    dm_free(rl);
    return dm_ctx_agree(ctx, rc);
}

/* ------------------------------------------------------------------ ordering */

static const dm_termlist *g_sort_list; /* qsort has no context argument in C11 */

static int cmp_term_idx(const void *a, const void *b)
{
    const dm_termlist *l = g_sort_list;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return dm_term_cmp(dm_termlist_bytes(l, x), dm_termlist_len(l, x), l->hash[x], dm_termlist_bytes(l, y),
                       dm_termlist_len(l, y), l->hash[y]);
}

/* out = the terms idx[0..n) of in, in that order (val carried). */
static int termlist_pick(dm_termlist *out, const dm_termlist *in, const size_t *idx, size_t n)
{
    uint64_t bytes = 0;
    for (size_t k = 0; k < n; k++) bytes += dm_termlist_len(in, idx[k]);
    DM_TRY(dm_termlist_alloc(out, n, bytes, 1));
    for (size_t k = 0; k < n; k++) {
        size_t i = idx[k], len = dm_termlist_len(in, i);
        out->hash[k] = in->hash[i];
        out->val[k] = in->val ? in->val[i] : 0;
        memcpy(out->bytes + out->off[k], dm_termlist_bytes(in, i), len);
        out->off[k + 1] = out->off[k] + len;
    }
    return DM_OK;
}

/* Merges P sorted runs of `all` (run[q] .. run[q+1]) into one sorted list (binary heap of runs). */
static int merge_runs(dm_termlist *out, const dm_termlist *all, const size_t *run, int P)
{
    size_t *idx = dm_malloc(sizeof(size_t) * (all->n ? all->n : 1));
    size_t *head = dm_malloc(sizeof(size_t) * (size_t)P);
    int *heap = dm_malloc(sizeof(int) * (size_t)P);
    if (!idx || !head || !heap) {
        dm_free(idx);
        dm_free(head);
        dm_free(heap);
        return DM_ERR_NOMEM;
    }
    int hn = 0;
    g_sort_list = all;
#define DM_LESS(a, b) (cmp_term_idx(&head[(a)], &head[(b)]) < 0)
    for (int q = 0; q < P; q++) {
        head[q] = run[q];
        if (run[q] == run[q + 1]) continue;
        int i = hn++;
        heap[i] = q;
        while (i > 0 && DM_LESS(heap[i], heap[(i - 1) / 2])) {
            int t = heap[i];
            heap[i] = heap[(i - 1) / 2];
            heap[(i - 1) / 2] = t;
            i = (i - 1) / 2;
        }
    }
    size_t k = 0;
    while (hn > 0) {
        int q = heap[0];
        idx[k++] = head[q]++;
        if (head[q] == run[q + 1]) heap[0] = heap[--hn];
        int i = 0;
        for (;;) {
            int l = 2 * i + 1, r = l + 1, m = i;
            if (l < hn && DM_LESS(heap[l], heap[m])) m = l;
            if (r < hn && DM_LESS(heap[r], heap[m])) m = r;
            if (m == i) break;
            int t = heap[i];
            heap[i] = heap[m];
            heap[m] = t;
            i = m;
        }
    }
#undef DM_LESS
    g_sort_list = NULL;
    int rc = termlist_pick(out, all, idx, k);
    dm_free(idx);
    dm_free(head);
    dm_free(heap);
    return rc;
}

/* ------------------------------------------------------------------ vocabulary */

static int check_options(const dm_tfidf_options *o)
{
    if (!(o->min_df_frac >= 0.0 && o->min_df_frac <= 1.0) || !(o->max_df_frac >= 0.0 && o->max_df_frac <= 1.0))
        return DM_ERR(DM_ERR_INVALID_ARG, "min_df / max_df fractions must lie in [0, 1]");
    if (o->idf != DM_IDF_LOG && o->idf != DM_IDF_SKLEARN) return DM_ERR(DM_ERR_INVALID_ARG, "unknown idf kind %d", o->idf);
    return DM_OK;
}

/* The document-count bounds of min_df / max_df fractions among n documents: the fewest documents
 * k with k / n >= frac, and the most with k / n <= frac. Decided on k / n (one correctly rounded
 * division, as the fraction was parsed) rather than on frac x n, whose rounding error put
 * --max-df 0.29 of 100 documents below 29 (28.999999999999996) and --min-df 0.07 above 7. */
static uint64_t df_frac_min(double frac, uint64_t n)
{
    if (n == 0 || !(frac > 0.0)) return 0; /* NaN too (refused by check_options) */
    double x = ceil(frac * (double)n);
    uint64_t k = x >= (double)n ? n : (uint64_t)x;
    while (k > 0 && (double)(k - 1) / (double)n >= frac) k--;
    while (k <= n && (double)k / (double)n < frac) k++;
    return k; /* n + 1: none */
}

static uint64_t df_frac_max(double frac, uint64_t n)
{
    if (n == 0 || !(frac < 1.0)) return UINT64_MAX;
    double x = floor(frac * (double)n);
    uint64_t k = x <= 0.0 ? 0 : x >= (double)n ? n : (uint64_t)x;
    while (k < n && (double)(k + 1) / (double)n <= frac) k++;
    while (k > 0 && (double)k / (double)n > frac) k--;
    return k;
}

int dm_tfidf_vocab_build(dm_vocab *vocab, uint32_t *local_to_id, dm_tfidf_stats *stats, const dm_ctx *ctx,
                         const dm_termlist *terms, uint64_t local_docs, const dm_tfidf_options *opt)
{
    if (!vocab || !terms || !opt) return DM_ERR(DM_ERR_INVALID_ARG, "dm_tfidf_vocab_build: NULL argument");
    memset(vocab, 0, sizeof *vocab);
    int P = ranks_of(ctx);
    int backend = dm_tfidf_backend(ctx, opt->backend);
    dm_vocab_merge_fn *merge = backend == DM_BACKEND_CUDA ? dm_vocab_merge_cuda : dm_vocab_merge_cpu;
    dm_vocab_lookup_fn *lookup = backend == DM_BACKEND_CUDA ? dm_vocab_lookup_cuda : dm_vocab_lookup_cpu;
    int rc = check_options(opt);
    dm_timer_start("tfidf.vocab");

    /* 1. every term to its owner */
    int *dest = dm_malloc(sizeof(int) * (terms->n ? terms->n : 1));
    if (rc == DM_OK && !dest) rc = DM_ERR_NOMEM;
    if (rc == DM_OK)
        for (size_t i = 0; i < terms->n; i++) dest[i] = dm_term_owner(terms->hash[i], P);
    rc = agree(ctx, rc);
    dm_termlist recv = {0}, mine = {0}, kept = {0}, all = {0};
    size_t *run = dm_malloc(sizeof(size_t) * ((size_t)P + 1));
    if (rc == DM_OK && !run) rc = DM_ERR_NOMEM;
    rc = agree(ctx, rc);
    dm_timer_start("tfidf.vocab.exchange");
    if (rc == DM_OK) rc = exchange_terms(&recv, terms, dest, ctx);
    dm_timer_stop("tfidf.vocab.exchange");
    dm_free(dest);

    /* 2. the owner merges equal terms, summing df */
    dm_vocab_table_options vo = DM_VOCAB_TABLE_OPTIONS_INIT;
    vo.initial_cap = opt->table_initial_cap;
    dm_timer_start("tfidf.vocab.merge");
    if (rc == DM_OK) rc = merge(&mine, &recv, &vo);
    dm_timer_stop("tfidf.vocab.merge");
    dm_termlist_free(&recv);
    rc = agree(ctx, rc);

    /* 3. N, and pruning */
    uint64_t n_docs = local_docs;
    if (rc == DM_OK && ctx && MPI_Allreduce(&local_docs, &n_docs, 1, MPI_UINT64_T, MPI_SUM, ctx->world) != MPI_SUCCESS)
        rc = DM_ERR(DM_ERR_MPI, "tfidf: MPI_Allreduce of the document count failed");
    uint64_t lo = df_frac_min(opt->min_df_frac, n_docs), hi = df_frac_max(opt->max_df_frac, n_docs);
    if (opt->min_df_count > lo) lo = opt->min_df_count;
    if (opt->max_df_count < hi) hi = opt->max_df_count;
    if (rc == DM_OK && hi < lo)
        rc = DM_ERR(DM_ERR_INVALID_ARG, "max_df corresponds to fewer documents (%" PRIu64 ") than min_df (%" PRIu64
                    ") among %" PRIu64, hi, lo, n_docs);
    uint64_t sums[5] = {0, 0, 0, 0, 0}; /* terms seen, pruned min, pruned max, collisions, rebuilds */
    size_t *keep = NULL;
    size_t nk = 0;
    if (rc == DM_OK) {
        keep = dm_malloc(sizeof(size_t) * (mine.n ? mine.n : 1));
        if (!keep) rc = DM_ERR_NOMEM;
    }
    if (rc == DM_OK) {
        for (size_t i = 0; i < mine.n; i++) {
            uint64_t df = mine.val[i];
            if (df < lo) sums[1]++;
            else if (df > hi) sums[2]++;
            else keep[nk++] = i;
        }
        sums[0] = mine.n;
        sums[3] = vo.collisions;
        sums[4] = vo.rebuilds;
        /* 4. the owner's kept terms in term order */
        g_sort_list = &mine;
        qsort(keep, nk, sizeof *keep, cmp_term_idx);
        g_sort_list = NULL;
        rc = termlist_pick(&kept, &mine, keep, nk);
    }
    dm_free(keep);
    dm_termlist_free(&mine);
    rc = agree(ctx, rc);
    uint64_t tot[5] = {sums[0], sums[1], sums[2], sums[3], sums[4]};
    if (rc == DM_OK && ctx && MPI_Allreduce(sums, tot, 5, MPI_UINT64_T, MPI_SUM, ctx->world) != MPI_SUCCESS)
        rc = DM_ERR(DM_ERR_MPI, "tfidf: MPI_Allreduce of vocabulary counts failed");
    rc = agree(ctx, rc);

    /* 5. every rank gets the sorted runs and merges them: id = position in term order */
    dm_timer_start("tfidf.vocab.exchange");
    if (rc == DM_OK) rc = allgather_terms(&all, run, &kept, ctx);
    dm_timer_stop("tfidf.vocab.exchange");
    dm_termlist_free(&kept);
    if (rc == DM_OK) rc = merge_runs(&vocab->terms, &all, run, P);
    dm_termlist_free(&all);
    dm_free(run);
    rc = agree(ctx, rc);
    vocab->n_docs = n_docs;
    if (rc == DM_OK && vocab->terms.n == 0) {
        if (tot[0] == 0)
            rc = DM_ERR(DM_ERR_FORMAT, "no terms in any of the %" PRIu64 " documents (every token was dropped "
                                            "by preprocessing, e.g. only stop words, numbers or short tokens)", n_docs);
        else
            rc = DM_ERR(DM_ERR_INVALID_ARG, "all %" PRIu64 " terms were pruned (%" PRIu64 " by min_df, %" PRIu64 " by max_df)",
                        tot[0], tot[1], tot[2]);
    }
    if (rc == DM_OK && vocab->terms.n >= DM_TERM_NONE)
        rc = DM_ERR(DM_ERR_UNSUPPORTED, "vocabulary of %zu terms exceeds 32-bit term ids", vocab->terms.n);

    /* 6. local terms -> ids */
    if (rc == DM_OK && local_to_id) {
        vo.rebuilds = vo.collisions = 0;
        dm_timer_start("tfidf.vocab.lookup");
        rc = lookup(local_to_id, &vocab->terms, terms, &vo);
        dm_timer_stop("tfidf.vocab.lookup");
    }
    rc = agree(ctx, rc);
    dm_timer_stop("tfidf.vocab");
    if (rc < 0) {
        dm_vocab_free(vocab);
        return rc;
    }
    if (stats) {
        stats->terms_seen = tot[0];
        stats->pruned_min_df = tot[1];
        stats->pruned_max_df = tot[2];
        stats->hash_collisions = tot[3];
        stats->table_rebuilds += tot[4];
        stats->terms = vocab->terms.n;
    }
    return DM_OK;
}

/* Local df: rows that contain each local term (rows hold distinct terms). */
static int local_df(dm_tfidf_local *l)
{
    if (!l->terms.val) {
        l->terms.val = dm_calloc(l->terms.n ? l->terms.n : 1, sizeof(uint64_t));
        if (!l->terms.val) return DM_ERR_NOMEM;
    } else {
        memset(l->terms.val, 0, sizeof(uint64_t) * l->terms.n);
    }
    if (l->dev) return dm_tf_dev_df(l->terms.val, l->terms.n, l->dev, NULL);
    const dm_tf_counts *c = &l->counts;
    uint64_t bad = dm_tfidf_df_count(l->terms.val, l->terms.n, c->term, c->row_off[c->n_rows]);
    if (bad != UINT64_MAX) return DM_ERR(DM_ERR_INVALID_ARG, "tfidf: a count row names term %u of %zu", c->term[bad], l->terms.n);
    return DM_OK;
}

/* ------------------------------------------------------------------ vectors */

static uint32_t weigh_flags(const dm_tfidf_options *opt, int icf)
{
    return (opt->l2 ? DM_VECTORS_L2 : 0u) | (opt->sublinear ? DM_VECTORS_SUBLINEAR : 0u) |
           (icf ? DM_VECTORS_ICF : (opt->idf == DM_IDF_SKLEARN ? DM_VECTORS_IDF_SKLEARN : 0u));
}

/* Fills the fields of out beyond the weights: ids, labels, flags. */
static int finish_rows(dm_vectors *out, const dm_tfidf_local *local, uint32_t flags)
{
    out->flags = flags;
    DM_TRY(dm_strings_copy(&out->id_off, &out->ids, local->id_off, local->ids, out->n_rows));
    DM_TRY(dm_strings_copy(&out->label_off, &out->labels, local->label_off, local->labels, out->n_rows));
    return DM_OK;
}

/* The weights of a local's rows, where they are: on the device (local->dev), else on the host
 * with the chosen backend. */
static int weigh_local(dm_vectors *out, const dm_tfidf_local *l, int backend, const uint32_t *map, const double *w,
                       uint64_t n_cols, dm_weigh_options *wo)
{
    if (l->dev) return dm_tfidf_weigh_dev_cuda(out, l->dev, map, l->terms.n, w, n_cols, wo);
    return (backend == DM_BACKEND_CUDA ? dm_tfidf_weigh_cuda : dm_tfidf_weigh_cpu)(out, &l->counts, map, l->terms.n, w,
                                                                                  n_cols, wo);
}

static uint64_t empty_rows(const dm_vectors *v)
{
    uint64_t e = 0;
    for (uint64_t r = 0; r < v->n_rows; r++) e += v->row_off[r + 1] == v->row_off[r];
    return e;
}

int dm_tfidf_vectors(dm_vectors *out, dm_vocab *vocab_out, dm_tfidf_stats *stats, const dm_ctx *ctx,
                     dm_tfidf_local *local, const dm_tfidf_options *opt)
{
    if (!out || !local || !opt) return DM_ERR(DM_ERR_INVALID_ARG, "dm_tfidf_vectors: NULL argument");
    memset(out, 0, sizeof *out);
    dm_tfidf_stats st;
    memset(&st, 0, sizeof st);
    int backend = dm_tfidf_backend(ctx, opt->backend);
    dm_timer_start("tfidf.df");
    int rc = local_df(local);
    dm_timer_stop("tfidf.df");
    rc = agree(ctx, rc);
    if (rc < 0) return rc;
    dm_vocab vocab;
    uint32_t *map = dm_malloc(sizeof(uint32_t) * (local->terms.n ? local->terms.n : 1));
    rc = agree(ctx, map ? DM_OK : DM_ERR_NOMEM);
    if (rc == DM_OK) rc = dm_tfidf_vocab_build(&vocab, map, &st, ctx, &local->terms, local->counts.n_rows, opt);
    if (rc < 0) {
        dm_free(map);
        return rc;
    }
    uint64_t n_cols = vocab.terms.n;
    double *w = dm_malloc(sizeof(double) * n_cols);
    if (!w) rc = DM_ERR_NOMEM;
    for (uint64_t c = 0; rc == DM_OK && c < n_cols; c++) w[c] = dm_idf_value(opt->idf, vocab.terms.val[c], vocab.n_docs);
    dm_weigh_options wo = DM_WEIGH_OPTIONS_INIT;
    wo.sublinear = opt->sublinear;
    wo.l2 = opt->l2;
    dm_timer_start("tfidf.weigh");
    if (rc == DM_OK) rc = weigh_local(out, local, backend, map, w, n_cols, &wo);
    dm_timer_stop("tfidf.weigh");
    dm_free(w);
    dm_free(map);
    dm_timer_start("tfidf.rows");
    if (rc == DM_OK) rc = finish_rows(out, local, weigh_flags(opt, 0));
    dm_timer_stop("tfidf.rows");
    rc = agree(ctx, rc);
    uint64_t mine[5] = {out->n_rows, rc == DM_OK ? empty_rows(out) : 0, local->tokens,
                        rc == DM_OK ? dm_vectors_nnz(out) : 0, wo.zero_weight};
    uint64_t tot[5] = {mine[0], mine[1], mine[2], mine[3], mine[4]}, base = 0;
    if (rc == DM_OK && ctx &&
        (MPI_Allreduce(mine, tot, 5, MPI_UINT64_T, MPI_SUM, ctx->world) != MPI_SUCCESS ||
         MPI_Exscan(&mine[0], &base, 1, MPI_UINT64_T, MPI_SUM, ctx->world) != MPI_SUCCESS))
        rc = DM_ERR(DM_ERR_MPI, "tfidf: MPI reductions of the vector counts failed");
    rc = agree(ctx, rc);
    if (rc < 0) {
        dm_vectors_free(out);
        dm_vocab_free(&vocab);
        return rc;
    }
    out->row_base = ctx && ctx->rank > 0 ? base : 0;
    out->n_cols = n_cols;
    /* this rank's share, for the report's counters (summed over ranks there) */
    dm_counter_add("tfidf.docs", (int64_t)mine[0]);
    dm_counter_add("tfidf.empty_docs", (int64_t)mine[1]);
    dm_counter_add("tfidf.tokens", (int64_t)mine[2]);
    dm_counter_add("tfidf.nnz", (int64_t)mine[3]);
    st.docs = tot[0];
    st.empty_docs = tot[1];
    st.tokens = tot[2];
    st.nnz = tot[3];
    st.zero_weight = tot[4];
    if (stats) *stats = st;
    if (vocab_out) *vocab_out = vocab;
    else dm_vocab_free(&vocab);
    return DM_OK;
}

int dm_tfidf_local_from_stream(dm_tfidf_local *out, const dm_token_stream *s, int backend,
                               const dm_tfidf_options *opt)
{
    if (!out || !s || !opt) return DM_ERR(DM_ERR_INVALID_ARG, "dm_tfidf_local_from_stream: NULL argument");
    memset(out, 0, sizeof *out);
    if (s->n_terms >= DM_TERM_NONE) return DM_ERR(DM_ERR_UNSUPPORTED, "token stream: too many terms");
    int rc = dm_termlist_alloc(&out->terms, s->n_terms, s->n_terms ? s->term_off[s->n_terms] : 0, 1);
    if (rc == DM_OK && s->n_terms) {
        memcpy(out->terms.hash, s->term_hash, sizeof(uint64_t) * s->n_terms);
        memcpy(out->terms.off, s->term_off, sizeof(uint64_t) * (s->n_terms + 1));
        memcpy(out->terms.bytes, s->term_bytes, s->term_off[s->n_terms]);
    }
    /* token hashes -> local terms (the stream's vocabulary) -> count rows; on the GPU in one pass,
     * the rows left there for the weights unless opt->host_rows */
    dm_vocab_table_options vo = DM_VOCAB_TABLE_OPTIONS_INIT;
    vo.initial_cap = opt->table_initial_cap;
    dm_tf_count_options co = DM_TF_COUNT_OPTIONS_INIT;
    co.variant = opt->tf_variant;
    int cuda = backend == DM_BACKEND_CUDA;
    /* hashes left on the device by preprocess (dm_preprocess_options.device_tokens) are read there */
    co.hashes_on_device = s->dev_hashes != NULL;
    if (rc == DM_OK && co.hashes_on_device && !cuda)
        rc = DM_ERR(DM_ERR_INVALID_ARG, "token stream: its hashes are in device memory, the %s backend cannot read them",
                    dm_backend_name(backend));
    dm_timer_start("tfidf.count");
    if (rc == DM_OK)
        rc = (cuda ? dm_tf_count_hashes_cuda : dm_tf_count_hashes_cpu)(&out->counts, cuda && !opt->host_rows ? &out->dev : NULL,
                                                                      s->tok_off, s->dev_hashes ? s->dev_hashes : s->hashes,
                                                                      s->n_docs, &out->terms, &co, &vo);
    dm_timer_stop("tfidf.count");
    dm_timer_start("tfidf.rows");
    if (rc == DM_OK) rc = dm_strings_copy(&out->id_off, &out->ids, s->id_off, s->ids, s->n_docs);
    if (rc == DM_OK) rc = dm_strings_copy(&out->label_off, &out->labels, s->label_off, s->labels, s->n_docs);
    dm_timer_stop("tfidf.rows");
    if (rc < 0) {
        dm_tfidf_local_free(out);
        return rc;
    }
    out->tokens = s->n_tokens;
    out->hash_collisions = s->stats.hash_collisions;
    out->table_rebuilds = vo.rebuilds + co.rebuilds;
    return DM_OK;
}

int dm_tfidf_from_stream(dm_vectors *out, dm_vocab *vocab, dm_tfidf_stats *stats, const dm_ctx *ctx,
                         const dm_token_stream *s, const dm_tfidf_options *opt)
{
    if (!out || !s || !opt) return DM_ERR(DM_ERR_INVALID_ARG, "dm_tfidf_from_stream: NULL argument");
    memset(out, 0, sizeof *out);
    dm_tfidf_local local;
    int rc = agree(ctx, dm_tfidf_local_from_stream(&local, s, dm_tfidf_backend(ctx, opt->backend), opt));
    if (rc < 0) return rc;
    rc = dm_tfidf_vectors(out, vocab, stats, ctx, &local, opt);
    dm_tfidf_local_free(&local);
    return rc;
}

/* ------------------------------------------------------------------ TF-ICF */

int dm_icf_build(dm_icf_table *out, dm_tfidf_stats *stats, const dm_ctx *ctx, dm_tfidf_local *local,
                 const dm_pp_signature *sig, const dm_tfidf_options *opt)
{
    if (!out || !local || !sig || !opt) return DM_ERR(DM_ERR_INVALID_ARG, "dm_icf_build: NULL argument");
    memset(out, 0, sizeof *out);
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT; /* no pruning: cf is counted for every term */
    o.backend = opt->backend;
    o.table_initial_cap = opt->table_initial_cap;
    int rc = agree(ctx, local_df(local));
    if (rc < 0) return rc;
    dm_tfidf_stats st;
    memset(&st, 0, sizeof st);
    DM_TRY(dm_tfidf_vocab_build(&out->vocab, NULL, &st, ctx, &local->terms, local->counts.n_rows, &o));
    out->sig = *sig;
    uint64_t mine[2] = {local->counts.n_rows, local->tokens}, tot[2] = {mine[0], mine[1]};
    if (ctx && MPI_Allreduce(mine, tot, 2, MPI_UINT64_T, MPI_SUM, ctx->world) != MPI_SUCCESS)
        rc = DM_ERR(DM_ERR_MPI, "icf-build: MPI_Allreduce failed");
    rc = agree(ctx, rc);
    if (rc < 0) {
        dm_icf_table_free(out);
        return rc;
    }
    st.docs = tot[0];
    st.tokens = tot[1];
    if (stats) *stats = st;
    return DM_OK;
}

int dm_icf_vectors(dm_vectors *out, dm_tfidf_stats *stats, const dm_icf_table *table, const dm_tfidf_local *local,
                   const dm_tfidf_options *opt, int backend)
{
    if (!out || !table || !local || !opt) return DM_ERR(DM_ERR_INVALID_ARG, "dm_icf_vectors: NULL argument");
    memset(out, 0, sizeof *out);
    const dm_vocab *v = &table->vocab;
    if (v->terms.n == 0 || v->n_docs == 0) return DM_ERR(DM_ERR_INVALID_ARG, "ICF table is empty");
    uint32_t *map = dm_malloc(sizeof(uint32_t) * (local->terms.n ? local->terms.n : 1));
    double *w = dm_malloc(sizeof(double) * v->terms.n);
    int rc = map && w ? DM_OK : DM_ERR_NOMEM;
    dm_vocab_table_options vo = DM_VOCAB_TABLE_OPTIONS_INIT;
    vo.initial_cap = opt->table_initial_cap;
    if (rc == DM_OK)
        rc = (backend == DM_BACKEND_CUDA ? dm_vocab_lookup_cuda : dm_vocab_lookup_cpu)(map, &v->terms, &local->terms, &vo);
    for (size_t c = 0; rc == DM_OK && c < v->terms.n; c++) w[c] = log((double)v->n_docs / (double)v->terms.val[c]);
    dm_weigh_options wo = DM_WEIGH_OPTIONS_INIT;
    wo.sublinear = opt->sublinear;
    wo.l2 = opt->l2;
    if (rc == DM_OK) rc = weigh_local(out, local, backend, map, w, v->terms.n, &wo);
    dm_free(map);
    dm_free(w);
    if (rc == DM_OK) rc = finish_rows(out, local, weigh_flags(opt, 1));
    if (rc < 0) {
        dm_vectors_free(out);
        return rc;
    }
    dm_counter_add("tfidf.docs", (int64_t)out->n_rows);
    dm_counter_add("tfidf.empty_docs", (int64_t)empty_rows(out));
    dm_counter_add("tfidf.tokens", (int64_t)local->tokens);
    dm_counter_add("tfidf.nnz", (int64_t)dm_vectors_nnz(out));
    dm_counter_add("tfidf.icf_unknown_tokens", (int64_t)wo.unmapped);
    if (stats) {
        stats->docs += out->n_rows;
        stats->empty_docs += empty_rows(out);
        stats->tokens += local->tokens;
        stats->nnz += dm_vectors_nnz(out);
        stats->zero_weight += wo.zero_weight;
        stats->icf_unknown_tokens += wo.unmapped;
        stats->terms = v->terms.n;
        stats->table_rebuilds += vo.rebuilds;
    }
    return DM_OK;
}
