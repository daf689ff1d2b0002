/* Host loops of tfidf over O(tokens) or O(entries) arrays, OpenMP-parallel: the input checks of
 * the weights and of the hash lookup, offset rebasing and local document frequencies. Used by the driver (tfidf.c) and the
 * CUDA backend (tfidf_cuda.cu, which nvcc compiles without OpenMP). Results do not depend on the
 * number of threads (integer sums; "first" = smallest index). Reference: the serial loops they
 * replace, written out in each function's comment. */
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "tfidf/tfidf.h"
#include "tfidf/tfidf_internal.h"

#define DM_PAR_MIN ((size_t)1 << 16) /* below this, one thread */

size_t dm_tfidf_first_none(const uint32_t *ids, size_t n)
{
    uint64_t bad = UINT64_MAX; /* for i < n: if ids[i] == DM_TERM_NONE return i */
#pragma omp parallel for schedule(static) reduction(min : bad) if (n >= DM_PAR_MIN)
    for (int64_t i = 0; i < (int64_t)n; i++)
        if (ids[i] == DM_TERM_NONE && (uint64_t)i < bad) bad = (uint64_t)i;
    return bad == UINT64_MAX ? SIZE_MAX : (size_t)bad;
}

uint64_t dm_tfidf_first_bad_entry(const uint32_t *term, uint64_t nnz, const uint32_t *map, size_t n_local_terms,
                                  uint64_t n_cols)
{
    uint64_t bad = UINT64_MAX; /* for k < nnz: term[k] >= n_local_terms or maps to a column >= n_cols */
#pragma omp parallel for schedule(static) reduction(min : bad) if (nnz >= DM_PAR_MIN)
    for (int64_t k = 0; k < (int64_t)nnz; k++) {
        uint32_t t = term[k];
        if ((t >= n_local_terms || (map[t] != DM_TERM_NONE && map[t] >= n_cols)) && (uint64_t)k < bad) bad = (uint64_t)k;
    }
    return bad;
}

void dm_tfidf_rebase(uint64_t *dst, const uint64_t *src, size_t n, uint64_t base)
{
    /* for i < n: dst[i] = src[i] - base (dst may be src) */
#pragma omp parallel for schedule(static) if (n >= DM_PAR_MIN)
    for (int64_t i = 0; i < (int64_t)n; i++) dst[i] = src[i] - base;
}

void dm_tfidf_shift(uint64_t *a, size_t n, uint64_t base)
{
    /* for i < n: a[i] += base */
#pragma omp parallel for schedule(static) if (n >= DM_PAR_MIN)
    for (int64_t i = 0; i < (int64_t)n; i++) a[i] += base;
}

uint64_t dm_tfidf_df_count(uint64_t *df, size_t n_terms, const uint32_t *term, uint64_t nnz)
{
    /* df[t] = entries k < nnz with term[k] == t; the first k with term[k] >= n_terms is returned
     * (UINT64_MAX if none). Threads count into private histograms when they are small, with
     * atomics otherwise. */
    memset(df, 0, sizeof(uint64_t) * n_terms);
    uint64_t bad = UINT64_MAX;
    int nt = omp_get_max_threads();
    uint64_t *priv = NULL;
    if (nnz >= DM_PAR_MIN && nt > 1 && (uint64_t)n_terms * (uint64_t)nt <= ((uint64_t)1 << 24) &&
        (uint64_t)n_terms * 8 < nnz)
        priv = dm_calloc((size_t)nt * n_terms, sizeof(uint64_t));
    if (priv) {
#pragma omp parallel num_threads(nt) reduction(min : bad)
        {
            uint64_t *h = priv + (size_t)omp_get_thread_num() * n_terms;
#pragma omp for schedule(static)
            for (int64_t k = 0; k < (int64_t)nnz; k++) {
                uint32_t t = term[k];
                if (t < n_terms) h[t]++;
                else if ((uint64_t)k < bad) bad = (uint64_t)k;
            }
#pragma omp for schedule(static)
            for (int64_t t = 0; t < (int64_t)n_terms; t++) {
                uint64_t s = 0;
                for (int q = 0; q < nt; q++) s += priv[(size_t)q * n_terms + (size_t)t];
                df[t] = s;
            }
        }
        dm_free(priv);
        return bad;
    }
#pragma omp parallel for schedule(static) reduction(min : bad) if (nnz >= DM_PAR_MIN)
    for (int64_t k = 0; k < (int64_t)nnz; k++) {
        uint32_t t = term[k];
        if (t < n_terms) {
#pragma omp atomic
            df[t]++;
        } else if ((uint64_t)k < bad) {
            bad = (uint64_t)k;
        }
    }
    return bad;
}
