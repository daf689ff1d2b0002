/* The CPU backend of the sort primitives (sorting/sorting.h), the reference of the CUDA backend:
 * a stable LSD radix sort (8-bit digits over [begin_bit, end_bit)) for (key, value) pairs, and a
 * stable per-segment sort. Reference: this file is the oracle of tests/sorting.
 *
 * Scratch protocol on the CPU: scratch is allocated internally, so *temp_bytes is always 0.
 * A call with temp == NULL and temp_bytes != NULL is a size query and does no work (as CUB);
 * a call with temp == NULL and temp_bytes == NULL sorts at once. */
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "sorting/sorting.h"
#include "sorting/sorting_bitonic.h"
#include "common/rng.h"

static int check_bits(int begin_bit, int end_bit, int key_bits)
{
    if (begin_bit < 0 || end_bit > key_bits || begin_bit > end_bit)
        return DM_ERR(DM_ERR_INVALID_ARG, "sort: bit range [%d, %d) outside a %d-bit key", begin_bit, end_bit, key_bits);
    return DM_OK;
}

/* One stable radix sort over 8-bit digits, written once for both key widths. */
#define DM_RADIX_SORT_BODY(KEY_T)                                                                  \
    /* the bit range is checked by the size query too, as the CUDA backend does */                \
    DM_TRY(check_bits(begin_bit, end_bit, (int)(8 * sizeof(KEY_T))));                              \
    if (temp == NULL && temp_bytes) {                                                              \
        *temp_bytes = 0;                                                                           \
        return DM_OK;                                                                              \
    }                                                                                              \
    if (temp_bytes) *temp_bytes = 0;                                                               \
    if (n == 0) return DM_OK;                                                                      \
    if (!keys_out || !keys_in) return DM_ERR(DM_ERR_INVALID_ARG, "sort: NULL keys");               \
    KEY_T *kb = dm_malloc(sizeof(KEY_T) * n);                                                      \
    uint32_t *vb = dm_malloc(sizeof(uint32_t) * n);                                                \
    uint32_t *vtmp = vals_out ? NULL : dm_malloc(sizeof(uint32_t) * n);                            \
    if (!kb || !vb || (!vals_out && !vtmp)) {                                                      \
        dm_free(kb);                                                                               \
        dm_free(vb);                                                                               \
        dm_free(vtmp);                                                                             \
        return DM_ERR_NOMEM;                                                                       \
    }                                                                                              \
    uint32_t *vo = vals_out ? vals_out : vtmp;                                                     \
    memcpy(keys_out, keys_in, sizeof(KEY_T) * n);                                                  \
    for (size_t i = 0; i < n; i++) vo[i] = vals_in ? vals_in[i] : 0;                               \
    KEY_T *src_k = keys_out, *dst_k = kb;                                                          \
    uint32_t *src_v = vo, *dst_v = vb;                                                             \
    for (int shift = begin_bit; shift < end_bit; shift += 8) {                                     \
        int width = end_bit - shift < 8 ? end_bit - shift : 8;                                     \
        KEY_T mask = (KEY_T)((1u << width) - 1);                                                   \
        size_t cnt[257];                                                                           \
        memset(cnt, 0, sizeof cnt);                                                                \
        for (size_t i = 0; i < n; i++) cnt[((src_k[i] >> shift) & mask) + 1]++;                    \
        for (int d = 0; d < 256; d++) cnt[d + 1] += cnt[d];                                        \
        for (size_t i = 0; i < n; i++) {                                                           \
            size_t p = cnt[(src_k[i] >> shift) & mask]++;                                          \
            dst_k[p] = src_k[i];                                                                   \
            dst_v[p] = src_v[i];                                                                   \
        }                                                                                          \
        KEY_T *tk = src_k;                                                                         \
        src_k = dst_k;                                                                             \
        dst_k = tk;                                                                                \
        uint32_t *tv = src_v;                                                                      \
        src_v = dst_v;                                                                             \
        dst_v = tv;                                                                                \
    }                                                                                              \
    if (src_k != keys_out) {                                                                       \
        memcpy(keys_out, src_k, sizeof(KEY_T) * n);                                                \
        memcpy(vo, src_v, sizeof(uint32_t) * n);                                                   \
    }                                                                                              \
    dm_free(kb);                                                                                   \
    dm_free(vb);                                                                                   \
    dm_free(vtmp);                                                                                 \
    return DM_OK;

int dm_sort_pairs_u32_cpu(void *temp, size_t *temp_bytes, uint32_t *keys_out, uint32_t *vals_out,
                          const uint32_t *keys_in, const uint32_t *vals_in, size_t n, int begin_bit, int end_bit,
                          void *stream)
{
    DM_RADIX_SORT_BODY(uint32_t)
}

int dm_sort_pairs_u64_cpu(void *temp, size_t *temp_bytes, uint64_t *keys_out, uint32_t *vals_out,
                          const uint64_t *keys_in, const uint32_t *vals_in, size_t n, int begin_bit, int end_bit,
                          void *stream)
{
    DM_RADIX_SORT_BODY(uint64_t)
}

/* ------------------------------------------------------------------ segmented sort */

typedef struct rec {
    uint32_t key;
    uint32_t idx; /* position in the segment: ties keep input order (stable) */
} rec;

static int cmp_rec(const void *a, const void *b)
{
    const rec *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static int check_segments(const uint64_t *seg_off, size_t n_segments, size_t n, size_t *max_len)
{
    *max_len = 0;
    if (n_segments == 0) return DM_OK;
    if (!seg_off) return DM_ERR(DM_ERR_INVALID_ARG, "segmented sort: NULL segment offsets");
    for (size_t s = 0; s < n_segments; s++) {
        if (seg_off[s + 1] < seg_off[s] || seg_off[s + 1] > n)
            return DM_ERR(DM_ERR_INVALID_ARG, "segmented sort: segment %zu is not within the %zu items", s, n);
        if (seg_off[s + 1] - seg_off[s] > UINT32_MAX)
            return DM_ERR(DM_ERR_INVALID_ARG, "segmented sort: segment %zu is longer than 2^32 items", s);
        if (seg_off[s + 1] - seg_off[s] > *max_len) *max_len = (size_t)(seg_off[s + 1] - seg_off[s]);
    }
    return DM_OK;
}

/* The pointers of a segmented sort of n > 0 items: keys both ways; output values only from input
 * values (sorting.h). A NULL here is an error code, not a crash. */
static int check_pairs(const uint32_t *keys_out, const uint32_t *keys_in, int has_vals_out, int has_vals_in)
{
    if (!keys_out || !keys_in) return DM_ERR(DM_ERR_INVALID_ARG, "segmented sort: NULL keys");
    if (has_vals_out && !has_vals_in)
        return DM_ERR(DM_ERR_INVALID_ARG, "segmented sort: output values need input values (vals_in is NULL)");
    return DM_OK;
}

/* Items outside every segment are copied unchanged (as CUB leaves them untouched, they are
 * defined here so outputs compare). */
#define DM_SEGSORT_BODY(VAL_T)                                                                     \
    if (temp == NULL && temp_bytes) {                                                              \
        *temp_bytes = 0;                                                                           \
        return DM_OK;                                                                              \
    }                                                                                              \
    if (temp_bytes) *temp_bytes = 0;                                                               \
    size_t max_len;                                                                                \
    DM_TRY(check_segments(seg_off, n_segments, n, &max_len));                                      \
    if (n == 0) return DM_OK;                                                                      \
    DM_TRY(check_pairs(keys_out, keys_in, vals_out != NULL, vals_in != NULL));                     \
    memcpy(keys_out, keys_in, sizeof(uint32_t) * n);                                               \
    if (vals_out) memcpy(vals_out, vals_in, sizeof(VAL_T) * n);                                    \
    int rc = DM_OK;                                                                                \
    _Pragma("omp parallel")                                                                        \
    {                                                                                              \
        rec *r = dm_malloc(sizeof(rec) * (max_len ? max_len : 1));                                 \
        if (!r) {                                                                                  \
            _Pragma("omp atomic write") rc = DM_ERR_NOMEM;                                         \
        }                                                                                          \
        { /* every thread meets the loop: one that skipped it would leave the others waiting */    \
            _Pragma("omp for schedule(dynamic, 64)") for (size_t s = 0; s < n_segments; s++)       \
            {                                                                                      \
                if (!r) continue;                                                                  \
                uint64_t b = seg_off[s], len = seg_off[s + 1] - b;                                 \
                for (uint64_t i = 0; i < len; i++) r[i] = (rec){keys_in[b + i], (uint32_t)i};      \
                qsort(r, (size_t)len, sizeof *r, cmp_rec);                                         \
                for (uint64_t i = 0; i < len; i++) {                                               \
                    keys_out[b + i] = r[i].key;                                                    \
                    if (vals_out) vals_out[b + i] = vals_in[b + r[i].idx];                         \
                }                                                                                  \
            }                                                                                      \
            dm_free(r);                                                                            \
        }                                                                                          \
    }                                                                                              \
    return rc;

int dm_segsort_pairs_cpu(void *temp, size_t *temp_bytes, uint32_t *keys_out, float *vals_out, const uint32_t *keys_in,
                         const float *vals_in, size_t n, const uint64_t *seg_off, size_t n_segments, void *stream)
{
    DM_SEGSORT_BODY(float)
}

int dm_segsort_pairs_u32_cpu(void *temp, size_t *temp_bytes, uint32_t *keys_out, uint32_t *vals_out,
                             const uint32_t *keys_in, const uint32_t *vals_in, size_t n, const uint64_t *seg_off,
                             size_t n_segments, void *stream)
{
    DM_SEGSORT_BODY(uint32_t)
}

/* ------------------------------------------------------------------ benchmark inputs */

static uint64_t bench_rand(uint64_t *s)
{
    return dm_splitmix64(s);
}

int dm_segsort_bench_lengths(uint64_t *off, size_t n, uint64_t seed, size_t *n_seg)
{
    /* lengths 1..140 (about the rows of news articles' vectors), one in 64 rows 200..2999 */
    uint64_t s = seed, pos = 0;
    size_t k = 0;
    off[0] = 0;
    while (pos < n) {
        uint64_t r = bench_rand(&s);
        uint64_t len = (r & 63) == 0 ? 200 + (r >> 8) % 2800 : 1 + ((r >> 8) % 140);
        if (len > n - pos) len = n - pos;
        pos += len;
        off[++k] = pos;
    }
    *n_seg = k;
    return DM_OK;
}

/* ------------------------------------------------------------------ bitonic network on the host */

int dm_segsort_bitonic_hd(uint32_t *keys_out, float *vals_out, const uint32_t *keys_in, const float *vals_in,
                          size_t n, const uint64_t *seg_off, size_t n_segments, int cap, int tile)
{
    if (cap < 2 || (cap & (cap - 1)) || (tile > 0 && cap % tile))
        return DM_ERR(DM_ERR_INVALID_ARG, "bitonic: capacity %d must be a power of two (and a multiple of the tile)", cap);
    size_t max_len;
    DM_TRY(check_segments(seg_off, n_segments, n, &max_len));
    if (n > 0 && (!vals_out || !vals_in)) return DM_ERR(DM_ERR_INVALID_ARG, "bitonic: NULL values");
    /* long segments first, as CUB does them in the hybrid */
    DM_TRY(dm_segsort_pairs_cpu(NULL, NULL, keys_out, vals_out, keys_in, vals_in, n, seg_off, n_segments, NULL));
    uint32_t *m = dm_malloc(sizeof(uint32_t) * 2 * (size_t)cap);
    if (!m) return DM_ERR_NOMEM;
#define DM_KI(i) (tile > 0 ? dm_bitonic_tiled_key((i), tile) : 2 * (i))
#define DM_PI(i) (tile > 0 ? dm_bitonic_tiled_key((i), tile) + tile : 2 * (i) + 1)
    for (size_t s = 0; s < n_segments; s++) {
        uint64_t b = seg_off[s], len = seg_off[s + 1] - b;
        if (len < 2 || len > (uint64_t)cap) continue;
        int p2 = dm_bitonic_p2((int)len);
        for (int i = 0; i < p2; i++) {
            m[DM_KI(i)] = i < (int)len ? keys_in[b + (uint64_t)i] : 0xffffffffu;
            m[DM_PI(i)] = i < (int)len ? (uint32_t)i : 0xffffffffu;
        }
        for (int k = 2; k <= p2; k <<= 1)
            for (int j = k >> 1; j > 0; j >>= 1)
                for (int t = 0; t < p2 / 2; t++) { /* the threads of one step */
                    int i, l;
                    int up = dm_bitonic_pair(t, j, k, &i, &l);
                    uint32_t xk = m[DM_KI(i)], xp = m[DM_PI(i)], yk = m[DM_KI(l)], yp = m[DM_PI(l)];
                    if (dm_bitonic_less(yk, yp, xk, xp) == up) {
                        m[DM_KI(i)] = yk;
                        m[DM_PI(i)] = yp;
                        m[DM_KI(l)] = xk;
                        m[DM_PI(l)] = xp;
                    }
                }
        for (int i = 0; i < (int)len; i++) {
            keys_out[b + (uint64_t)i] = m[DM_KI(i)];
            vals_out[b + (uint64_t)i] = vals_in[b + m[DM_PI(i)]];
        }
    }
#undef DM_KI
#undef DM_PI
    dm_free(m);
    return DM_OK;
}
