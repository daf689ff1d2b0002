/* The synthetic labelled corpus (datasets/synth.h). Reference: itself.
 * Random draws for document i use the counter-based stream (seed, i), so documents do not
 * depend on the rank layout or on the order they are generated in. */
#include "datasets/synth.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/rng.h"
#include "common/status.h"

static void cdf_free(dm_synth_cdf *c)
{
    dm_free(c->cdf);
    dm_free(c->guide);
    dm_free(c->bucket);
    memset(c, 0, sizeof *c);
}

static int zipf_cdf(dm_synth_cdf *out, int n, double s)
{
    memset(out, 0, sizeof *out);
    double *c = dm_malloc(sizeof(double) * (size_t)n);
    if (!c) return DM_ERR_NOMEM;
    double acc = 0;
    for (int r = 0; r < n; r++) {
        acc += 1.0 / pow((double)(r + 1), s);
        c[r] = acc;
    }
    for (int r = 0; r < n; r++) c[r] /= acc;
    c[n - 1] = 1.0;
    out->cdf = c;
    out->n = n;
    /* about four guide entries per rank: a draw then scans about one rank */
    int bits = 2;
    while (bits < 26 && (1 << bits) < 4 * n) bits++;
    size_t m = (size_t)1 << bits;
    out->guide = dm_malloc(sizeof(uint32_t) * (m + 1));
    if (!out->guide) {
        cdf_free(out);
        return DM_ERR_NOMEM;
    }
    out->bits = bits;
    uint32_t r = 0;
    for (size_t k = 0; k <= m; k++) {
        double t = (double)k / (double)m; /* exact: m is a power of two */
        while ((int)r < n - 1 && c[r] < t) r++;
        out->guide[k] = r;
    }
    /* the bucket table: a bucket's ranks are those of its smallest and largest v (a draw's rank
     * does not decrease with v); where they differ a boundary lies inside and the draw scans */
    out->bucket = dm_malloc(sizeof(uint32_t) * DM_SYNTH_BUCKETS);
    if (!out->bucket) {
        cdf_free(out);
        return DM_ERR_NOMEM;
    }
    const double scale = 1.0 / 4294967296.0;
    for (uint32_t k = 0; k < DM_SYNTH_BUCKETS; k++) {
        uint32_t lo = dm_synth_draw(out, (double)(k << 16) * scale);
        uint32_t hi = dm_synth_draw(out, (double)((k << 16) | 0xffffu) * scale);
        out->bucket[k] = lo | (hi == lo ? 0u : hi == lo + 1 ? DM_SYNTH_NEXT : DM_SYNTH_SCAN);
    }
    return DM_OK;
}

/* The first rank whose CDF reaches u (u in [0, 1)): the same rank as a binary search over the
 * whole CDF, found between the guide entries of floor(u * 2^bits) and the next. */
uint32_t dm_synth_draw(const dm_synth_cdf *c, double u)
{
    size_t k = (size_t)(u * (double)((size_t)1 << c->bits)); /* exact: a power-of-two scale */
    uint32_t r = c->guide[k], hi = c->guide[k + 1];
    while (r < hi && c->cdf[r] < u) r++;
    return r;
}

static int spell_words(dm_synth *s)
{
    const dm_synth_options *o = &s->opt;
    uint64_t n = (uint64_t)o->topic_vocab > (uint64_t)o->shared_vocab ? (uint64_t)o->topic_vocab : (uint64_t)o->shared_vocab;
    n *= (uint64_t)(o->topics + 1);
    if (n > ((uint64_t)1 << 22)) return DM_OK; /* spelt per draw */
    s->slots = dm_malloc(16 * (size_t)n);
    if (!s->slots) return DM_ERR_NOMEM;
    memset(s->slots, 0, 16 * (size_t)n);
    for (uint64_t v = 0; v < n; v++) {
        char w[32];
        dm_synth_word(w, o->topics, (int)(v % (uint64_t)(o->topics + 1)) - 1, (uint32_t)(v / (uint64_t)(o->topics + 1)));
        size_t l = strlen(w);
        if (l > 14) { /* not below 2^22 words (at most 12 letters there); spelt per draw */
            dm_free(s->slots);
            s->slots = NULL;
            return DM_OK;
        }
        unsigned char *sl = s->slots + 16 * v;
        memcpy(sl, w, l);
        sl[l] = ' ';
        sl[15] = (unsigned char)l;
    }
    s->n_words = n;
    return DM_OK;
}

int dm_synth_init(dm_synth *s, const dm_synth_options *o)
{
    memset(s, 0, sizeof *s);
    if (o->docs == 0) return DM_ERR(DM_ERR_INVALID_ARG, "synth: the number of documents must be > 0");
    if (o->topics < 1 || o->topics > 100000) return DM_ERR(DM_ERR_INVALID_ARG, "synth: topics must be in 1..100000");
    if (o->min_words < 1 || o->max_words < o->min_words || o->max_words > 10000000)
        return DM_ERR(DM_ERR_INVALID_ARG, "synth: need 1 <= min_words <= max_words");
    if (o->topic_vocab < 1 || o->shared_vocab < 1 || o->topic_vocab > (1 << 24) || o->shared_vocab > (1 << 24))
        return DM_ERR(DM_ERR_INVALID_ARG, "synth: vocabulary sizes must be in 1..2^24");
    if (!(o->overlap >= 0.0 && o->overlap <= 1.0)) return DM_ERR(DM_ERR_INVALID_ARG, "synth: overlap must be in [0, 1]");
    if (!(o->zipf_s > 0.0 && o->zipf_s < 10.0)) return DM_ERR(DM_ERR_INVALID_ARG, "synth: zipf exponent must be in (0, 10)");
    s->opt = *o;
    int rc = zipf_cdf(&s->topic, o->topic_vocab, o->zipf_s);
    if (rc == DM_OK) rc = zipf_cdf(&s->shared, o->shared_vocab, o->zipf_s);
    if (rc == DM_OK) rc = spell_words(s);
    if (rc != DM_OK) dm_synth_free(s);
    return rc;
}

void dm_synth_free(dm_synth *s)
{
    cdf_free(&s->topic);
    cdf_free(&s->shared);
    dm_free(s->slots);
    s->slots = NULL;
    s->n_words = 0;
}

void dm_synth_word(char out[32], int topics, int topic, uint32_t rank)
{
    /* A bijective code: vocabulary index v = rank * (topics + 1) + topic + 1 (shared: topic = -1),
     * so frequent words are short, written in consonant-vowel syllables; the word ends in "fa" or
     * "fo" so that no Porter suffix applies, and a leading "z" keeps it clear of the stop list. */
    static const char cons[] = "bdfgklmnprstvz"; /* 14 */
    static const char vow[] = "aeiou";           /* 5 */
    uint64_t v = (uint64_t)rank * (uint64_t)(topics + 1) + (uint64_t)(topic + 1);
    int n = 0;
    out[n++] = 'z';
    out[n++] = vow[v % 5];
    v /= 5;
    do {
        out[n++] = cons[v % 14];
        v /= 14;
        out[n++] = vow[v % 5];
        v /= 5;
    } while (v > 0 && n < 28);
    out[n++] = 'f';
    out[n++] = (rank & 1) ? 'o' : 'a';
    out[n] = '\0';
}

void dm_synth_share(uint64_t docs, int rank, int size, uint64_t *first, uint64_t *last)
{
    uint64_t base = docs / (uint64_t)size, extra = docs % (uint64_t)size;
    uint64_t r = (uint64_t)rank;
    *first = r * base + (r < extra ? r : extra);
    *last = *first + base + (r < extra ? 1 : 0);
}

/* Words per block of the document loop (even): word j of a block takes the two 32-bit words
 * v[2 (j % 2)] and v[2 (j % 2) + 1] of the block's Philox call j / 2. */
enum { DM_SYNTH_BLOCK = 64, DM_SYNTH_CALLS = DM_SYNTH_BLOCK / 2 };

static int g_synth_simd = 1; /* dm_synth_set_simd */

void dm_synth_set_simd(int on) { g_synth_simd = on != 0; }

/* Calls c .. c + calls - 1 of the stream (seed, i), kept by word: q[m][k] = v[m] of call c + k. */
static void philox_block(uint32_t q[4][DM_SYNTH_CALLS], uint64_t seed, uint64_t i, uint64_t c, int calls)
{
    for (int k = 0; k < calls; k++) {
        dm_philox4 r = dm_rng4(seed, i, c + (uint64_t)k);
        for (int m = 0; m < 4; m++) q[m][k] = r.v[m];
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DM_SYNTH_AVX2 1
/* philox_block eight calls at a time, a call a lane: the rounds of dm_philox4x32_10, the 32 x 32
 * -> 64-bit products of the even and odd lanes apart. The lanes past `calls` compute calls that
 * are not used (q has room for them: calls <= DM_SYNTH_CALLS, a multiple of 8). */
__attribute__((target("avx2"))) static void philox_block_avx2(uint32_t q[4][DM_SYNTH_CALLS], uint64_t seed,
                                                              uint64_t i, uint64_t c, int calls)
{
    const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u), m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
    for (int k = 0; k < calls; k += 8) {
        uint32_t lo[8], hi[8];
        for (int l = 0; l < 8; l++) {
            uint64_t t = c + (uint64_t)(k + l);
            lo[l] = (uint32_t)t;
            hi[l] = (uint32_t)(t >> 32);
        }
        __m256i x0 = _mm256_loadu_si256((const __m256i *)lo), x1 = _mm256_loadu_si256((const __m256i *)hi);
        __m256i x2 = _mm256_set1_epi32((int)(uint32_t)i), x3 = _mm256_set1_epi32((int)(uint32_t)(i >> 32));
        uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
        for (int r = 0; r < 10; r++) {
            __m256i pe0 = _mm256_mul_epu32(x0, m0), po0 = _mm256_mul_epu32(_mm256_srli_epi64(x0, 32), m0);
            __m256i pe1 = _mm256_mul_epu32(x2, m1), po1 = _mm256_mul_epu32(_mm256_srli_epi64(x2, 32), m1);
            __m256i lo0 = _mm256_blend_epi32(pe0, _mm256_slli_epi64(po0, 32), 0xAA);
            __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(pe0, 32), po0, 0xAA);
            __m256i lo1 = _mm256_blend_epi32(pe1, _mm256_slli_epi64(po1, 32), 0xAA);
            __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(pe1, 32), po1, 0xAA);
            x0 = _mm256_xor_si256(_mm256_xor_si256(hi1, x1), _mm256_set1_epi32((int)k0));
            x2 = _mm256_xor_si256(_mm256_xor_si256(hi0, x3), _mm256_set1_epi32((int)k1));
            x1 = lo1;
            x3 = lo0;
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        _mm256_storeu_si256((__m256i *)&q[0][k], x0);
        _mm256_storeu_si256((__m256i *)&q[1][k], x1);
        _mm256_storeu_si256((__m256i *)&q[2][k], x2);
        _mm256_storeu_si256((__m256i *)&q[3][k], x3);
    }
}
#endif

int dm_synth_doc(const dm_synth *s, uint64_t i, int *label, char **buf, size_t *cap, size_t *len)
{
    const dm_synth_options *o = &s->opt;
    uint64_t seed = o->seed, c = 0;
    int topic = (int)(dm_rng_u64(seed, i, c++) % (uint64_t)o->topics);
    int span = o->max_words - o->min_words + 1;
    int words = o->min_words + (int)(dm_rng_u64(seed, i, c++) % (uint64_t)span);
    size_t need = (size_t)words * 32 + 1;
    if (*cap < need) {
        char *nb = dm_realloc(*buf, need);
        if (!nb) return DM_ERR_NOMEM;
        *buf = nb;
        *cap = need;
    }
    char *p = *buf;
    /* Word w takes two 32-bit words of Philox call 2 + w / 2 (counters 0 and 1 drew the topic and
     * the length): the first picks the vocabulary (background when below overlap * 2^32), the
     * second v the rank (u = v / 2^32, a resolution of 2^-32 against the rarest rank's probability
     * of about 10^-5 at the defaults; dm_synth_draw32). One call serves two words: the calls were
     * most of the generation's time. A block of calls is drawn first (eight at a time with AVX2). */
    uint32_t q[4][DM_SYNTH_CALLS];
#ifdef DM_SYNTH_AVX2
    int simd = g_synth_simd && __builtin_cpu_supports("avx2");
#endif
    /* overlap * 2^32, rounded up: v < mix_below exactly when v / 2^32 < overlap */
    double mix = ceil(o->overlap * 4294967296.0);
    uint64_t mix_below = mix >= 4294967296.0 ? (uint64_t)1 << 32 : (uint64_t)mix;
    const uint64_t stride = (uint64_t)(o->topics + 1);
    const unsigned char *src[DM_SYNTH_BLOCK];
    for (int w = 0; w < words; w += DM_SYNTH_BLOCK) {
        int nb = words - w < DM_SYNTH_BLOCK ? words - w : DM_SYNTH_BLOCK, calls = (nb + 1) / 2;
#ifdef DM_SYNTH_AVX2
        if (simd) philox_block_avx2(q, seed, i, c, calls);
        else
#endif
            philox_block(q, seed, i, c, calls);
        c += (uint64_t)calls;
        for (int j = 0; j < nb; j++) {
            int m = (j & 1) << 1;
            int t = (uint64_t)q[m][j >> 1] < mix_below ? -1 : topic;
            uint32_t rank = dm_synth_draw32(t < 0 ? &s->shared : &s->topic, q[m + 1][j >> 1]);
            uint64_t v = (uint64_t)rank * stride + (uint64_t)(t + 1);
            if (s->slots) { /* copied below, once the block's words are drawn */
                src[j] = s->slots + 16 * v;
                continue;
            }
            if (w + j) *p++ = ' ';
            char word[32];
            dm_synth_word(word, o->topics, t, rank);
            size_t l = strlen(word);
            memcpy(p, word, l);
            p += l;
        }
        if (s->slots) /* a slot's 16 bytes at once: the word, its space and its length */
            for (int j = 0; j < nb; j++) {
                memcpy(p, src[j], 16); /* the buffer has 32 bytes per word */
                p += src[j][15] + 1;
            }
    }
    if (s->slots && words > 0) p--; /* the last word's space */
    *p = '\0';
    *len = (size_t)(p - *buf);
    *label = topic;
    return DM_OK;
}

int dm_synth_write_tsv(const dm_synth *s, dm_atomic_file *f, uint64_t first, uint64_t last)
{
    char *buf = NULL;
    size_t cap = 0, len = 0;
    int rc = DM_OK;
    for (uint64_t i = first; i < last && rc == DM_OK; i++) {
        int label;
        rc = dm_synth_doc(s, i, &label, &buf, &cap, &len);
        if (rc == DM_OK && fprintf(f->fp, "synth-%llu\ttopic%d\t%s\n", (unsigned long long)i, label, buf) < 0)
            rc = DM_ERR(DM_ERR_IO, "%s: write failed: %s", f->path, strerror(errno));
    }
    dm_free(buf);
    return rc;
}
