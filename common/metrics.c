/* Clustering quality against known classes: normalised mutual information (arithmetic-mean
 * normalisation, as scikit-learn's default), adjusted Rand index (Hubert and Arabie) and purity,
 * from the contingency table of (class, cluster). Reference: scikit-learn's
 * normalized_mutual_info_score / adjusted_rand_score definitions, including their conventions
 * for degenerate labelings (both trivial: 1); tests/common/test_common.c checks hand-computed values.
 * dm_metrics_classes numbers the first label of every item, as flock's command does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "common/metrics.h"

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorted unique values of v[0..n). Returns the count. */
static size_t uniq(int32_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_i32);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || v[i] != v[m - 1]) v[m++] = v[i];
    return m;
}

static uint32_t index_of(const int32_t *u, size_t m, int32_t x)
{
    const int32_t *f = bsearch(&x, u, m, sizeof *u, cmp_i32);
    return (uint32_t)(f - u);
}

static double comb2(double x) { return x * (x - 1.0) / 2.0; }

int dm_metrics_from_table(dm_metrics *out, const int32_t *cls, const int32_t *pred, const uint64_t *count,
                          size_t cells)
{
    memset(out, 0, sizeof *out);
    uint64_t m = 0;
    for (size_t i = 0; i < cells; i++) {
        if (cls[i] < 0 || count[i] == 0 ||
            (i > 0 && (cls[i] < cls[i - 1] || (cls[i] == cls[i - 1] && pred[i] <= pred[i - 1]))))
            return DM_ERR(DM_ERR_INVALID_ARG, "metrics: the contingency cells are not sorted, distinct and labelled");
        m += count[i];
    }
    if (m == 0) return DM_ERR(DM_ERR_INVALID_ARG, "metrics: no labelled documents");
    /* dense class and cluster indices (cells are sorted by class: classes number in order) */
    int32_t *pc = dm_malloc(sizeof *pc * cells);
    uint32_t *ti = dm_malloc(sizeof *ti * cells), *pj = dm_malloc(sizeof *pj * cells);
    double *a = NULL, *b = NULL, *best = NULL;
    int rc = DM_OK;
    if (!pc || !ti || !pj) rc = DM_ERR(DM_ERR_NOMEM, "metrics: out of memory");
    size_t nt = 0, np = 0;
    if (rc == DM_OK) {
        for (size_t i = 0; i < cells; i++) {
            if (i == 0 || cls[i] != cls[i - 1]) nt++;
            ti[i] = (uint32_t)(nt - 1);
        }
        memcpy(pc, pred, sizeof *pc * cells);
        np = uniq(pc, cells);
        for (size_t i = 0; i < cells; i++) pj[i] = index_of(pc, np, pred[i]);
        a = dm_calloc(nt, sizeof *a);
        b = dm_calloc(np, sizeof *b);
        best = dm_calloc(np, sizeof *best);
        if (!a || !b || !best) rc = DM_ERR(DM_ERR_NOMEM, "metrics: out of memory");
    }
    if (rc == DM_OK) {
        /* the sums are of integers (exact), every other sum runs over the cells in (class,
         * cluster) order: the same doubles for any way the table was counted */
        for (size_t i = 0; i < cells; i++) {
            a[ti[i]] += (double)count[i];
            b[pj[i]] += (double)count[i];
        }
        double N = (double)m, mi = 0, sum_c = 0, sum_a = 0, sum_b = 0, hu = 0, hv = 0;
        for (size_t i = 0; i < cells; i++) {
            double nij = (double)count[i];
            mi += nij / N * log(N * nij / (a[ti[i]] * b[pj[i]]));
            sum_c += comb2(nij);
            if (nij > best[pj[i]]) best[pj[i]] = nij;
        }
        for (size_t i = 0; i < nt; i++) {
            sum_a += comb2(a[i]);
            hu -= a[i] / N * log(a[i] / N);
        }
        double pur = 0;
        for (size_t j = 0; j < np; j++) {
            sum_b += comb2(b[j]);
            hv -= b[j] / N * log(b[j] / N);
            pur += best[j];
        }
        if (mi < 0) mi = 0; /* rounding */
        if ((nt == 1 && np == 1) || (hu == 0 && hv == 0)) out->nmi = 1.0;
        else out->nmi = mi / (0.5 * (hu + hv));
        if (out->nmi > 1.0) out->nmi = 1.0;
        double total = comb2(N), expected = total > 0 ? sum_a * sum_b / total : 0, maxi = 0.5 * (sum_a + sum_b);
        if ((nt == 1 && np == 1) || (nt == m && np == m) || maxi == expected) out->ari = 1.0;
        else out->ari = (sum_c - expected) / (maxi - expected);
        out->purity = pur / N;
        out->n = m;
        out->classes = (int32_t)nt;
        out->clusters = (int32_t)np;
    }
    dm_free(pc);
    dm_free(ti);
    dm_free(pj);
    dm_free(a);
    dm_free(b);
    dm_free(best);
    return rc;
}

/* (class, cluster) as one key that sorts like the pair of signed values. */
static uint64_t cell_key(int32_t c, int32_t p)
{
    return ((uint64_t)((uint32_t)c ^ 0x80000000u) << 32) | ((uint32_t)p ^ 0x80000000u);
}

int dm_metrics_table(uint64_t **key, uint64_t **count, size_t *cells, const int32_t *truth, const int32_t *pred,
                     size_t n)
{
    *key = NULL;
    *count = NULL;
    *cells = 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) m += truth[i] >= 0;
    uint64_t *k = dm_malloc(sizeof *k * (m ? m : 1)), *c = dm_malloc(sizeof *c * (m ? m : 1));
    if (!k || !c) {
        dm_free(k);
        dm_free(c);
        return DM_ERR(DM_ERR_NOMEM, "metrics: out of memory");
    }
    m = 0;
    for (size_t i = 0; i < n; i++)
        if (truth[i] >= 0) k[m++] = cell_key(truth[i], pred[i]);
    qsort(k, m, sizeof *k, cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < m; i++) {
        if (u && k[u - 1] == k[i]) c[u - 1]++;
        else {
            k[u] = k[i];
            c[u++] = 1;
        }
    }
    *key = k;
    *count = c;
    *cells = u;
    return DM_OK;
}

void dm_metrics_table_split(int32_t *cls, int32_t *pred, const uint64_t *key, size_t cells)
{
    for (size_t i = 0; i < cells; i++) {
        cls[i] = (int32_t)((uint32_t)(key[i] >> 32) ^ 0x80000000u);
        pred[i] = (int32_t)((uint32_t)key[i] ^ 0x80000000u);
    }
}

int dm_metrics_compute(dm_metrics *out, const int32_t *truth, const int32_t *pred, size_t n)
{
    memset(out, 0, sizeof *out);
    uint64_t *key = NULL, *count = NULL;
    size_t cells = 0;
    DM_TRY(dm_metrics_table(&key, &count, &cells, truth, pred, n));
    int rc = cells ? dm_metrics_from_keys(out, key, count, 1, cells)
                   : DM_ERR(DM_ERR_INVALID_ARG, "metrics: no labelled documents");
    dm_free(key);
    dm_free(count);
    return rc;
}

int dm_metrics_from_keys(dm_metrics *out, const uint64_t *key, const uint64_t *count, size_t stride, size_t cells)
{
    size_t m = cells ? cells : 1;
    int32_t *c = dm_malloc(sizeof *c * m), *p = dm_malloc(sizeof *p * m);
    uint64_t *k = stride == 1 ? NULL : dm_malloc(sizeof *k * m), *w = stride == 1 ? NULL : dm_malloc(sizeof *w * m);
    int rc = DM_OK;
    if (!c || !p || (stride != 1 && (!k || !w))) rc = DM_ERR(DM_ERR_NOMEM, "metrics: out of memory");
    if (rc == DM_OK) {
        if (stride != 1) {
            for (size_t i = 0; i < cells; i++) {
                k[i] = key[i * stride];
                w[i] = count[i * stride];
            }
            key = k;
            count = w;
        }
        dm_metrics_table_split(c, p, key, cells);
        rc = dm_metrics_from_table(out, c, p, count, cells);
    }
    dm_free(c);
    dm_free(p);
    dm_free(k);
    dm_free(w);
    return rc;
}

typedef struct first_label {
    const char *s;
    size_t len; /* bytes before the first ',' */
    size_t item;
} first_label;

static int cmp_first_label(const void *a, const void *b)
{
    const first_label *x = a, *y = b;
    int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
    if (c) return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

int dm_metrics_classes(int32_t *cls, int32_t *n_classes, const char *const *labels, size_t n)
{
    *n_classes = 0;
    first_label *f = dm_malloc(sizeof *f * (n ? n : 1));
    if (!f) return DM_ERR(DM_ERR_NOMEM, "metrics: out of memory");
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        cls[i] = -1;
        const char *s = labels[i];
        size_t len = s ? strcspn(s, ",") : 0;
        if (len == 0) continue; /* no label, or an empty first label */
        f[m].s = s;
        f[m].len = len;
        f[m].item = i;
        m++;
    }
    qsort(f, m, sizeof *f, cmp_first_label);
    int32_t c = -1;
    for (size_t j = 0; j < m; j++) {
        if (j == 0 || cmp_first_label(&f[j - 1], &f[j]) != 0) c++;
        cls[f[j].item] = c;
    }
    *n_classes = c + 1;
    dm_free(f);
    return DM_OK;
}

json_t *dm_metrics_json(const dm_metrics *m)
{
    return json_pack("{s:f,s:f,s:f,s:I,s:i,s:i}", "nmi", m->nmi, "ari", m->ari, "purity", m->purity,
                     "labelled_documents", (json_int_t)m->n, "classes", (int)m->classes, "clusters",
                     (int)m->clusters);
}
