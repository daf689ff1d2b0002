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

static int zipf_cdf(double **out, int n, double s)
{
    double *c = dm_malloc(sizeof(double) * (size_t)n);
    if (!c) return DM_ERR_NOMEM;
    double acc = 0;
    for (int r = 0; r < n; r++) {
        acc += 1.0 / pow((double)(r + 1), s);
        c[r] = acc;
    }
    for (int r = 0; r < n; r++) c[r] /= acc;
    c[n - 1] = 1.0;
    *out = c;
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
    int rc = zipf_cdf(&s->topic_cdf, o->topic_vocab, o->zipf_s);
    if (rc == DM_OK) rc = zipf_cdf(&s->shared_cdf, o->shared_vocab, o->zipf_s);
    if (rc != DM_OK) dm_synth_free(s);
    return rc;
}

void dm_synth_free(dm_synth *s)
{
    dm_free(s->topic_cdf);
    dm_free(s->shared_cdf);
    s->topic_cdf = s->shared_cdf = NULL;
}

static uint32_t cdf_draw(const double *cdf, int n, double u)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (cdf[mid] < u) lo = mid + 1;
        else hi = mid;
    }
    return (uint32_t)lo;
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
    for (int w = 0; w < words; w++) {
        double u_mix = dm_rng_uniform(seed, i, c++);
        double u_rank = dm_rng_uniform(seed, i, c++);
        char word[32];
        if (u_mix < o->overlap) dm_synth_word(word, o->topics, -1, cdf_draw(s->shared_cdf, o->shared_vocab, u_rank));
        else dm_synth_word(word, o->topics, topic, cdf_draw(s->topic_cdf, o->topic_vocab, u_rank));
        size_t l = strlen(word);
        if (w) *p++ = ' ';
        memcpy(p, word, l);
        p += l;
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
