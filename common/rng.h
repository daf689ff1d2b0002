/* Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11 / Random123), keyed by
 * (seed, id) so that a document's random stream is the same whatever rank holds it.
 * Reference: the Random123 known-answer vectors (tests/common/test_rng.c). Host and device. */
#ifndef DM_RNG_H
#define DM_RNG_H

#include <stdint.h>

#include "common/hd.h"

typedef struct dm_philox4 {
    uint32_t v[4];
} dm_philox4;

DM_HD uint32_t dm_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi)
{
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

/* Philox4x32 with 10 rounds: counter ctr, key (k0, k1). */
DM_HD dm_philox4 dm_philox4x32_10(dm_philox4 ctr, uint32_t k0, uint32_t k1)
{
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = dm_mulhilo32(0xD2511F53u, ctr.v[0], &hi0);
        uint32_t lo1 = dm_mulhilo32(0xCD9E8D57u, ctr.v[2], &hi1);
        dm_philox4 n;
        n.v[0] = hi1 ^ ctr.v[1] ^ k0;
        n.v[1] = lo1;
        n.v[2] = hi0 ^ ctr.v[3] ^ k1;
        n.v[3] = lo0;
        ctr = n;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return ctr;
}

/* Four 32-bit random words number `counter` of the stream (seed, id). */
DM_HD dm_philox4 dm_rng4(uint64_t seed, uint64_t id, uint64_t counter)
{
    dm_philox4 c;
    c.v[0] = (uint32_t)counter;
    c.v[1] = (uint32_t)(counter >> 32);
    c.v[2] = (uint32_t)id;
    c.v[3] = (uint32_t)(id >> 32);
    return dm_philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
}

/* A 64-bit random word. */
DM_HD uint64_t dm_rng_u64(uint64_t seed, uint64_t id, uint64_t counter)
{
    dm_philox4 r = dm_rng4(seed, id, counter);
    return ((uint64_t)r.v[1] << 32) | r.v[0];
}

/* Uniform double in [0, 1) with 53 random bits. */
DM_HD double dm_rng_uniform(uint64_t seed, uint64_t id, uint64_t counter)
{
    return (double)(dm_rng_u64(seed, id, counter) >> 11) * (1.0 / 9007199254740992.0);
}

/* SplitMix64 (Steele, Lea and Flood, OOPSLA 2014): a sequential generator for test data and
 * tuning inputs (not keyed by document: use dm_rng_* where a stream must not depend on order). */
DM_HD uint64_t dm_splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Draw k (from 0) of the dm_splitmix64 stream seeded with seed: the stream is a counter, so any
 * draw can be taken without the ones before it (in parallel). */
DM_HD uint64_t dm_splitmix64_at(uint64_t seed, uint64_t k)
{
    uint64_t s = seed + k * 0x9e3779b97f4a7c15ull;
    return dm_splitmix64(&s);
}

#endif
