/* dm_tf_count_hd: the CUDA per-document table algorithm run on the host, lane by lane, with the
 * same per-element code as the kernels (tfidf_tables.h): bucket layout, overflow and rebuild
 * with larger buckets, the no-atomic variant's per-lane sub-tables merged bucket by bucket, the
 * header + entry compaction and the term sort of each row. It lets the tests check the
 * algorithm on machines without a GPU. Reference: dm_tf_count_cpu (tfidf_cpu.c). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "sorting/sorting.h"
#include "tfidf/tfidf.h"
#include "tfidf/tfidf_tables.h"

#define DM_HD_RAKE 4 /* tokens per lane per round of the emulated no-atomic kernel */

/* Fills one document's table; returns 0 when a bucket overflowed. */
static int fill_doc(uint32_t *key, uint32_t *cnt, uint32_t bcap, const uint32_t *tok, uint64_t b, uint64_t e,
                    uint32_t n_terms, int variant, int *bad)
{
    int ok = 1;
    if (variant == DM_TF_ATOMIC) {
        /* lanes of a warp in turn: token i goes to lane (i - b) % 32, order does not matter */
        for (uint64_t i = b; i < e; i++) {
            if (tok[i] >= n_terms) {
                *bad = 1;
                continue;
            }
            if (ok) ok = dm_tf_insert(key, cnt, bcap, tok[i], 1, 1);
        }
        return ok;
    }
    /* rounds of 32 x RAKE tokens: 32 private sub-tables, then bucket `lane` merged by lane */
    uint32_t pk[32 * DM_HD_RAKE], pc[32 * DM_HD_RAKE];
    for (uint64_t base = b; base < e; base += 32 * DM_HD_RAKE) {
        for (int lane = 0; lane < 32; lane++) {
            uint32_t kt[DM_HD_RAKE], kc[DM_HD_RAKE];
            int m = dm_tf_subtable(kt, kc, tok, base + (uint64_t)lane * DM_HD_RAKE, 1, e, DM_HD_RAKE, n_terms, bad);
            for (int j = 0; j < DM_HD_RAKE; j++) {
                pk[lane * DM_HD_RAKE + j] = j < m ? kt[j] : DM_TF_EMPTY;
                pc[lane * DM_HD_RAKE + j] = j < m ? kc[j] : 0;
            }
        }
        for (uint32_t lane = 0; lane < 32; lane++)
            for (int q = 0; q < 32 * DM_HD_RAKE; q++) {
                if (pk[q] == DM_TF_EMPTY || dm_tf_bucket_of(pk[q]) != lane) continue;
                if (ok) ok = dm_tf_insert(key, cnt, bcap, pk[q], pc[q], 0);
            }
    }
    return ok;
}

int dm_tf_count_hd(dm_tf_counts *out, const uint64_t *tok_off, const uint32_t *tok, size_t n_docs, uint32_t n_terms,
                   dm_tf_count_options *opt)
{
    if (!out || !tok_off || !opt || (!tok && tok_off[n_docs] > 0))
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_tf_count_hd: NULL argument");
    if (opt->variant != DM_TF_ATOMIC && opt->variant != DM_TF_NOATOMIC)
        return DM_ERR(DM_ERR_INVALID_ARG, "dm_tf_count_hd: unknown variant %d", opt->variant);
    memset(out, 0, sizeof *out);
    int slack = opt->bucket_slack > 0 ? opt->bucket_slack : 2;
    uint8_t *grow = dm_calloc(n_docs ? n_docs : 1, 1);
    uint64_t *tab_off = dm_malloc(8 * (n_docs + 1));
    uint32_t *key = NULL, *cnt = NULL;
    int rc = grow && tab_off ? DM_OK : DM_ERR_NOMEM;
    for (int attempt = 0; rc == DM_OK; attempt++) {
        tab_off[0] = 0;
        for (size_t d = 0; d < n_docs; d++)
            tab_off[d + 1] = tab_off[d] + DM_TF_BUCKETS * dm_tf_bcap(tok_off[d + 1] - tok_off[d], slack, grow[d]);
        dm_free(key);
        dm_free(cnt);
        key = dm_malloc(4 * (tab_off[n_docs] ? tab_off[n_docs] : 1));
        cnt = dm_calloc(tab_off[n_docs] ? tab_off[n_docs] : 1, 4);
        if (!key || !cnt) {
            rc = DM_ERR_NOMEM;
            break;
        }
        memset(key, 0xff, 4 * tab_off[n_docs]);
        int any = 0, bad = 0;
        for (size_t d = 0; d < n_docs; d++) {
            uint32_t bcap = (uint32_t)((tab_off[d + 1] - tab_off[d]) / DM_TF_BUCKETS);
            if (!fill_doc(key + tab_off[d], cnt + tab_off[d], bcap, tok, tok_off[d], tok_off[d + 1], n_terms,
                          opt->variant, &bad)) {
                grow[d]++;
                any = 1;
            }
        }
        if (bad) rc = DM_ERR(DM_ERR_INVALID_ARG, "dm_tf_count_hd: a token names a term >= %u", n_terms);
        if (rc != DM_OK || !any) break;
        opt->rebuilds++;
        if (attempt > 40) rc = DM_ERR(DM_ERR_NOMEM, "dm_tf_count_hd: tables keep overflowing");
    }
    /* compaction: header (entries per bucket), its scan, the entries; then rows term-sorted */
    uint64_t n_tok = tok_off[n_docs];
    uint32_t *term = NULL, *count = NULL;
    if (rc == DM_OK) {
        out->row_off = dm_malloc(8 * (n_docs + 1));
        term = dm_malloc(4 * (n_tok ? n_tok : 1));
        count = dm_malloc(4 * (n_tok ? n_tok : 1));
        out->term = dm_malloc(4 * (n_tok ? n_tok : 1));
        out->count = dm_malloc(4 * (n_tok ? n_tok : 1));
        if (!out->row_off || !term || !count || !out->term || !out->count) rc = DM_ERR_NOMEM;
    }
    if (rc == DM_OK) {
        uint64_t p = 0;
        for (size_t d = 0; d < n_docs; d++) {
            uint32_t bcap = (uint32_t)((tab_off[d + 1] - tab_off[d]) / DM_TF_BUCKETS);
            out->row_off[d] = p;
            for (uint32_t b = 0; b < DM_TF_BUCKETS; b++) {
                uint64_t want = p + dm_tf_bucket_used(key + tab_off[d], bcap, b);
                p = dm_tf_bucket_emit(key + tab_off[d], cnt + tab_off[d], bcap, b, term, count, p);
                if (p != want) rc = DM_ERR(DM_ERR_INVALID_ARG, "dm_tf_count_hd: header and entries disagree");
            }
        }
        out->row_off[n_docs] = p;
        out->n_rows = n_docs;
        if (rc == DM_OK)
            rc = dm_segsort_pairs_u32_cpu(NULL, NULL, out->term, out->count, term, count, (size_t)p, out->row_off,
                                          n_docs, NULL);
    }
    dm_free(term);
    dm_free(count);
    dm_free(key);
    dm_free(cnt);
    dm_free(grow);
    dm_free(tab_off);
    if (rc != DM_OK) dm_tf_counts_free(out);
    return rc;
}

/* ------------------------------------------------------------------ tuning workload helpers */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

int dm_tf_table_grow_fit(const uint32_t *terms, uint64_t n_distinct, uint64_t len, int slack)
{
    uint64_t per[DM_TF_BUCKETS] = {0}, most = 0;
    if (slack <= 0) slack = 2;
    for (uint64_t i = 0; i < n_distinct; i++) {
        uint64_t c = ++per[dm_tf_bucket_of(terms[i])];
        if (c > most) most = c;
    }
    int grow = 0;
    while (dm_tf_bcap(len, slack, grow) < most) grow++;
    return grow;
}

void dm_tf_tables_canonical(uint64_t *out, const uint32_t *key, const uint32_t *cnt, const uint64_t *tab_off,
                            const uint32_t *overflow, size_t n_docs)
{
    const long nd = (long)n_docs;
#pragma omp parallel for schedule(dynamic, 256)
    for (long d = 0; d < nd; d++) {
        uint64_t b = tab_off[d], e = tab_off[d + 1], m = b;
        if (!overflow[d]) {
            for (uint64_t s = b; s < e; s++)
                if (key[s] != DM_TF_EMPTY) out[m++] = (uint64_t)key[s] << 32 | cnt[s];
            qsort(out + b, (size_t)(m - b), 8, cmp_u64);
        }
        for (uint64_t s = m; s < e; s++) out[s] = 0;
    }
}
