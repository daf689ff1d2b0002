/* The per-element code of the bitonic small-segment sort, written once as DM_HD functions: the
 * CUDA kernel (sorting_kernels.cuh) and its host emulation (dm_segsort_bitonic_hd, sorting_cpu.c)
 * both use it, so the network's indexing is tested without a GPU. Records are (key, position in
 * the segment), compared lexicographically: distinct, so the network gives the stable order.
 * Reference: Batcher's bitonic sorting network; dm_segsort_pairs_cpu. */
#ifndef DM_SORTING_BITONIC_H
#define DM_SORTING_BITONIC_H

#include <stdint.h>

#include "common/hd.h"

/* Compare-exchange t (0 <= t < p2 / 2) of the step (k, j) of a network over p2 records: the pair
 * (*i, *l = *i + j), and whether it is sorted ascending (1) or descending (0). */
DM_HD int dm_bitonic_pair(int t, int j, int k, int *i, int *l)
{
    *i = (t / j) * 2 * j + (t % j);
    *l = *i + j;
    return (*i & k) == 0;
}

DM_HD int dm_bitonic_less(uint32_t ka, uint32_t pa, uint32_t kb, uint32_t pb)
{
    return ka < kb || (ka == kb && pa < pb);
}

/* Tiled AoS: tiles of `tile` keys followed by their `tile` positions; index of record i's key. */
DM_HD int dm_bitonic_tiled_key(int i, int tile) { return (i / tile) * 2 * tile + i % tile; }

/* The smallest power of two >= n (n >= 1). */
DM_HD int dm_bitonic_p2(int n)
{
    int p = 1;
    while (p < n) p <<= 1;
    return p;
}

#endif
