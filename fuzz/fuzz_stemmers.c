/* libFuzzer target: both stemmers on arbitrary words (input split at '\n'): our DM_HD Porter
 * stemmer must give exactly libstemmer's porter stem; any difference aborts. ASCII input is
 * what the tokeniser feeds them; other bytes must pass through unchanged on both.
 * Reference: dm_stem_words_cpu. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "preprocess/preprocess.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *w = (const char *)data;
    size_t n = 0;
    uint32_t *off = malloc((size + 1) * 4), *len = malloc((size + 1) * 4);
    for (size_t p = 0; p < size;) {
        size_t e = p;
        while (e < size && w[e] != '\n') e++;
        off[n] = (uint32_t)p;
        len[n] = (uint32_t)(e - p);
        n++;
        p = e + 1;
    }
    char *a = malloc(size + 1), *b = malloc(size + 1);
    uint32_t *ao = malloc((n + 1) * 4), *al = malloc((n + 1) * 4), *bo = malloc((n + 1) * 4),
             *bl = malloc((n + 1) * 4);
    if (dm_stem_words_cpu(a, ao, al, w, off, len, n) != 0) abort();
    if (dm_stem_words_hd(b, bo, bl, w, off, len, n) != 0) abort();
    for (size_t i = 0; i < n; i++)
        if (al[i] != bl[i] || memcmp(a + ao[i], b + bo[i], al[i]) != 0) abort();
    free(a);
    free(b);
    free(ao);
    free(al);
    free(bo);
    free(bl);
    free(off);
    free(len);
    return 0;
}
