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

int dm_metrics_compute(dm_metrics *out, const int32_t *truth, const int32_t *pred, size_t n)
{
    memset(out, 0, sizeof *out);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) m += truth[i] >= 0;
    if (m == 0) return DM_ERR(DM_ERR_INVALID_ARG, "metrics: no labelled documents");
    int32_t *tu = dm_malloc(sizeof *tu * m), *pu = dm_malloc(sizeof *pu * m);
    uint64_t *pairs = dm_malloc(sizeof *pairs * m);
    if (!tu || !pu || !pairs) {
        dm_free(tu);
        dm_free(pu);
        dm_free(pairs);
        return DM_ERR(DM_ERR_NOMEM, "metrics: out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (truth[i] >= 0) {
            tu[k] = truth[i];
            pu[k] = pred[i];
            k++;
        }
    /* dense class and cluster indices */
    int32_t *tc = dm_malloc(sizeof *tc * m), *pc = dm_malloc(sizeof *pc * m);
    double *a = NULL, *b = NULL, *best = NULL;
    int rc = DM_OK;
    if (!tc || !pc) rc = DM_ERR(DM_ERR_NOMEM, "metrics: out of memory");
    size_t nt = 0, np = 0;
    if (rc == DM_OK) {
        memcpy(tc, tu, sizeof *tc * m);
        memcpy(pc, pu, sizeof *pc * m);
        nt = uniq(tc, m);
        np = uniq(pc, m);
        for (size_t i = 0; i < m; i++)
            pairs[i] = ((uint64_t)index_of(tc, nt, tu[i]) << 32) | index_of(pc, np, pu[i]);
        qsort(pairs, m, sizeof *pairs, cmp_u64);
        a = dm_calloc(nt, sizeof *a);
        b = dm_calloc(np, sizeof *b);
        best = dm_calloc(np, sizeof *best);
        if (!a || !b || !best) rc = DM_ERR(DM_ERR_NOMEM, "metrics: out of memory");
    }
    if (rc == DM_OK) {
        for (size_t i = 0; i < m; i++) {
            a[pairs[i] >> 32] += 1.0;
            b[pairs[i] & 0xFFFFFFFFu] += 1.0;
        }
        double N = (double)m, mi = 0, sum_c = 0, sum_a = 0, sum_b = 0, hu = 0, hv = 0;
        for (size_t i = 0; i < m;) {
            size_t j = i;
            while (j < m && pairs[j] == pairs[i]) j++;
            double nij = (double)(j - i);
            uint32_t ti = (uint32_t)(pairs[i] >> 32), pj = (uint32_t)(pairs[i] & 0xFFFFFFFFu);
            mi += nij / N * log(N * nij / (a[ti] * b[pj]));
            sum_c += comb2(nij);
            if (nij > best[pj]) best[pj] = nij;
            i = j;
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
    dm_free(tu);
    dm_free(pu);
    dm_free(pairs);
    dm_free(tc);
    dm_free(pc);
    dm_free(a);
    dm_free(b);
    dm_free(best);
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
