/* The synthetic labelled corpus (datasets/synth.h). Reference: itself.
 * Random draws for document i use the counter-based stream (seed, i), so documents do not
 * depend on the rank layout or on the order they are generated in. */
#include "datasets/synth.h"

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
    s->word_off = dm_malloc(sizeof(uint32_t) * (size_t)(n + 1));
    size_t cap = (size_t)n * 12 + 64, len = 0;
    s->words = dm_malloc(cap);
    if (!s->word_off || !s->words) return DM_ERR_NOMEM;
    for (uint64_t v = 0; v < n; v++) {
        s->word_off[v] = (uint32_t)len;
        uint32_t rank = (uint32_t)(v / (uint64_t)(o->topics + 1));
        int topic = (int)(v % (uint64_t)(o->topics + 1)) - 1;
        if (len + 32 > cap) {
            char *q = dm_realloc(s->words, cap * 2);
            if (!q) return DM_ERR_NOMEM;
            s->words = q;
            cap *= 2;
        }
        dm_synth_word(s->words + len, o->topics, topic, rank);
        len += strlen(s->words + len);
    }
    s->word_off[n] = (uint32_t)len;
    if (len + 16 > cap) { /* dm_synth_doc copies 16 bytes from the start of a short word */
        char *q = dm_realloc(s->words, len + 16);
        if (!q) return DM_ERR_NOMEM;
        s->words = q;
    }
    memset(s->words + len, 0, 16);
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
    dm_free(s->words);
    dm_free(s->word_off);
    s->words = NULL;
    s->word_off = NULL;
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
     * the length): v[2 (w % 2)] picks the vocabulary (background when below overlap * 2^32), v[2 (w
     * % 2) + 1] the rank (u = v / 2^32, a resolution of 2^-32 against the rarest rank's probability
     * of about 10^-5 at the defaults). One call serves two words: the calls were most of the
     * generation's time. A block of calls is drawn first, independent calls that the compiler can
     * run side by side. */
    enum { BLOCK = 64 }; /* words per block (even) */
    uint32_t r[2 * BLOCK];
    /* overlap * 2^32, rounded up: v < mix_below exactly when v / 2^32 < overlap */
    double mix = ceil(o->overlap * 4294967296.0);
    uint64_t mix_below = mix >= 4294967296.0 ? (uint64_t)1 << 32 : (uint64_t)mix;
    for (int w = 0; w < words; w++) {
        int j = w % BLOCK;
        if (j == 0) {
            int calls = ((words - w < BLOCK ? words - w : BLOCK) + 1) / 2;
            for (int k = 0; k < calls; k++) {
                dm_philox4 q = dm_rng4(seed, i, c + (uint64_t)k);
                memcpy(r + 4 * k, q.v, sizeof q.v);
            }
            c += (uint64_t)calls;
        }
        int t = (uint64_t)r[2 * j] < mix_below ? -1 : topic;
        double u_rank = (double)r[2 * j + 1] * (1.0 / 4294967296.0);
        uint32_t rank = dm_synth_draw(t < 0 ? &s->shared : &s->topic, u_rank);
        if (w) *p++ = ' ';
        if (s->words) {
            uint64_t v = (uint64_t)rank * (uint64_t)(o->topics + 1) + (uint64_t)(t + 1);
            const char *src = s->words + s->word_off[v];
            size_t l = s->word_off[v + 1] - s->word_off[v];
            /* a fixed 16-byte copy for the usual short word: the buffer has 32 bytes per word and
             * the spelt words 16 bytes of slack after the last */
            if (l <= 16) memcpy(p, src, 16);
            else memcpy(p, src, l);
            p += l;
        } else {
            char word[32];
            dm_synth_word(word, o->topics, t, rank);
            size_t l = strlen(word);
            memcpy(p, word, l);
            p += l;
        }
    }
    *p = '\0';
    *len = (size_t)(p - *buf);
    *label = topic;
    return DM_OK;
}

int dm_synth_write_tsv(const dm_synth *s, const char *path, uint64_t first, uint64_t last)
{
    dm_atomic_file f;
    DM_TRY(dm_atomic_open(&f, path));
    char *buf = NULL;
    size_t cap = 0, len = 0;
    int rc = DM_OK;
    for (uint64_t i = first; i < last && rc == DM_OK; i++) {
        int label;
        rc = dm_synth_doc(s, i, &label, &buf, &cap, &len);
        if (rc == DM_OK && fprintf(f.fp, "synth-%llu\ttopic%d\t%s\n", (unsigned long long)i, label, buf) < 0)
            rc = DM_ERR(DM_ERR_IO, "%s: write failed", path);
    }
    dm_free(buf);
    if (rc != DM_OK) {
        dm_atomic_abort(&f);
        return rc;
    }
    return dm_atomic_commit(&f);
}
