/* Sorting boids by grid cell on the host: the sorting module's dm_sort_pairs_u32_cpu (two-call
 * scratch protocol) when the build has it (DM_FLOCK_HAVE_SORTING), else a local stable LSD radix
 * sort with the same contract, kept only until the sorting module is merged.
 * Reference: sorting/sorting.h (stable sort of (key, value) pairs by key bits [0, end_bit)). */
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "flock/flock_impl.h"

#if DM_FLOCK_HAVE_SORTING
#include "sorting/sorting.h"

int dm_flock_sort_pairs_u32_cpu(uint32_t *keys_out, uint32_t *vals_out, const uint32_t *keys_in,
                                const uint32_t *vals_in, size_t n, int end_bit)
{
    size_t bytes = 0;
    DM_TRY(dm_sort_pairs_u32_cpu(NULL, &bytes, keys_out, vals_out, keys_in, vals_in, n, 0, end_bit, NULL));
    /* temp == NULL means "size query" (as CUB): pass real scratch even when none is needed */
    uint64_t none;
    void *tmp = bytes ? dm_malloc(bytes) : &none;
    if (!tmp) return DM_ERR(DM_ERR_NOMEM, "flock: out of memory for sort scratch");
    int rc = dm_sort_pairs_u32_cpu(tmp, &bytes, keys_out, vals_out, keys_in, vals_in, n, 0, end_bit, NULL);
    if (tmp != &none) dm_free(tmp);
    return rc;
}

#else

int dm_flock_sort_pairs_u32_cpu(uint32_t *keys_out, uint32_t *vals_out, const uint32_t *keys_in,
                                const uint32_t *vals_in, size_t n, int end_bit)
{
    if (n == 0) return DM_OK;
    uint32_t *k2 = dm_malloc(sizeof *k2 * n), *v2 = dm_malloc(sizeof *v2 * n);
    if (!k2 || !v2) {
        dm_free(k2);
        dm_free(v2);
        return DM_ERR(DM_ERR_NOMEM, "flock: out of memory for sorting");
    }
    memcpy(keys_out, keys_in, sizeof *keys_out * n);
    memcpy(vals_out, vals_in, sizeof *vals_out * n);
    uint32_t *ka = keys_out, *va = vals_out, *kb = k2, *vb = v2;
    for (int shift = 0; shift < end_bit; shift += 8) {
        size_t cnt[257] = {0};
        for (size_t i = 0; i < n; i++) cnt[((ka[i] >> shift) & 0xFF) + 1]++;
        for (int b = 0; b < 256; b++) cnt[b + 1] += cnt[b];
        for (size_t i = 0; i < n; i++) {
            size_t d = cnt[(ka[i] >> shift) & 0xFF]++;
            kb[d] = ka[i];
            vb[d] = va[i];
        }
        uint32_t *t = ka;
        ka = kb;
        kb = t;
        t = va;
        va = vb;
        vb = t;
    }
    if (ka != keys_out) {
        memcpy(keys_out, ka, sizeof *keys_out * n);
        memcpy(vals_out, va, sizeof *vals_out * n);
    }
    dm_free(k2);
    dm_free(v2);
    return DM_OK;
}
#endif
