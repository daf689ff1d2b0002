/* libFuzzer target: the vector file reader (tfidf/vectors.c, the .dmv format at dm_vectors_write
 * in tfidf/tfidf.h) on arbitrary bytes. Inputs whose first byte is even are written as they are
 * (the checks in front: magic, header checksum, sizes, trailer checksum); the others become a file
 * whose header, header checksum, section sizes and trailer checksum are right and whose offsets
 * mostly start at 0, rise and end at their section sizes, the rest of the bytes the input's, so
 * that the fuzzer explores the columns, strings and offsets behind those checks. What is read
 * must keep the reader's promises (offsets from 0, monotone, ending at the totals; columns
 * strictly increasing within a row and below n_cols; ids and labels NUL-terminated), and rows read
 * on their own must equal the same rows of the whole file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "tfidf/tfidf.h"

/* A byte of the input, cycling (0 when there is none). */
static uint8_t at(const uint8_t *d, size_t n, size_t i) { return n ? d[i % n] : 0; }

/* n + 1 offsets: small steps from the input, pinned to 0 and total unless the input says not. */
static void offsets(unsigned char *dst, uint64_t n, uint64_t total, const uint8_t *d, size_t size, size_t *k)
{
    int raw = at(d, size, (*k)++) == 0xff; /* now and then: as the input has them */
    uint64_t o = 0;
    for (uint64_t i = 0; i <= n; i++) {
        uint64_t v;
        if (raw) v = (uint64_t)at(d, size, (*k)++) << 8 | at(d, size, (*k)++);
        else if (i == n) v = total;
        else if (i == 0) v = 0;
        else {
            o += at(d, size, (*k)++) % 7;
            v = o < total ? o : total;
        }
        memcpy(dst + 8 * i, &v, 8);
    }
}

static void check(const dm_vectors *v)
{
    if (v->row_off[0] != 0 || v->id_off[0] != 0 || v->label_off[0] != 0) abort();
    for (uint64_t r = 0; r < v->n_rows; r++) {
        if (v->row_off[r + 1] < v->row_off[r] || v->id_off[r + 1] <= v->id_off[r] ||
            v->label_off[r + 1] <= v->label_off[r])
            abort();
        for (uint64_t q = v->row_off[r]; q < v->row_off[r + 1]; q++)
            if (v->col[q] >= v->n_cols || (q > v->row_off[r] && v->col[q] <= v->col[q - 1])) abort();
        if (strlen(dm_vectors_id(v, r)) >= v->id_off[r + 1] - v->id_off[r]) abort();
        if (strlen(dm_vectors_labels(v, r)) >= v->label_off[r + 1] - v->label_off[r]) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0]) snprintf(path, sizeof(path), "/tmp/dm_fuzz_vectors_%d.dmv", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    if (size >= 8 && (data[0] & 1)) {
        uint64_t n_rows = data[1] % 9, nnz = data[2] % 40, idb = n_rows + data[3] % 24,
                 lb = n_rows + data[4] % 24, n_cols = data[5] % 64;
        uint32_t flags = data[6] & 0xf, version = DM_VECTORS_VERSION;
        size_t body = 3 * 8 * (size_t)(n_rows + 1) + 8 * (size_t)nnz + (size_t)idb + (size_t)lb;
        size_t len = 64 + body + 8;
        unsigned char *b = calloc(1, len);
        if (!b) {
            fclose(f);
            return 0;
        }
        memcpy(b, DM_VECTORS_MAGIC, 8);
        memcpy(b + 8, &version, 4);
        memcpy(b + 12, &flags, 4);
        uint64_t h[5] = {n_rows, n_cols, nnz, idb, lb};
        memcpy(b + 16, h, 40);
        uint32_t hc = (uint32_t)crc32(0L, b, 56);
        memcpy(b + 56, &hc, 4);
        size_t k = 7, p = 64;
        offsets(b + p, n_rows, nnz, data, size, &k);
        p += 8 * (n_rows + 1);
        for (uint64_t q = 0, c = 0; q < nnz; q++) { /* mostly rising columns, now and then not */
            uint8_t s = at(data, size, k++);
            c = s == 0xfe ? 0 : c + 1 + s % 3;
            uint32_t c32 = (uint32_t)c;
            memcpy(b + p + 4 * q, &c32, 4);
        }
        p += 4 * nnz;
        for (uint64_t q = 0; q < nnz; q++) {
            float x = (float)(at(data, size, k++) % 100) / 100.0f;
            memcpy(b + p + 4 * q, &x, 4);
        }
        p += 4 * nnz;
        unsigned char *sections[2][2];
        uint64_t bytes[2] = {idb, lb};
        for (int s = 0; s < 2; s++) {
            sections[s][0] = b + p;
            offsets(b + p, n_rows, bytes[s], data, size, &k);
            p += 8 * (n_rows + 1);
            sections[s][1] = b + p;
            for (uint64_t q = 0; q < bytes[s]; q++) b[p + q] = (unsigned char)('a' + at(data, size, k++) % 26);
            /* NUL at each string's end, unless the input says not */
            for (uint64_t r = 1; r <= n_rows; r++) {
                uint64_t e;
                memcpy(&e, sections[s][0] + 8 * r, 8);
                if (e >= 1 && e <= bytes[s] && at(data, size, k++) != 0xfd) sections[s][1][e - 1] = 0;
            }
            p += bytes[s];
        }
        uint32_t c = (uint32_t)crc32(0L, b, (uInt)(64 + body));
        memcpy(b + 64 + body, &c, 4);
        memcpy(b + 64 + body + 4, "END\n", 4);
        fwrite(b, 1, len, f);
        free(b);
    } else {
        fwrite(data, 1, size, f);
    }
    fclose(f);
    dm_vectors v;
    if (dm_vectors_read(&v, path) != 0) return 0;
    check(&v);
    /* rows [first, first + count) read on their own: the same rows */
    uint64_t first = v.n_rows ? at(data, size, 1) % v.n_rows : 0, count = v.n_rows - first;
    dm_vectors w;
    if (dm_vectors_read_rows(&w, path, first, count, 0) != 0) abort();
    if (w.n_rows != count) abort();
    for (uint64_t r = 0; r < count; r++) {
        uint64_t a = v.row_off[first + r], e = v.row_off[first + r + 1];
        if (w.row_off[r + 1] - w.row_off[r] != e - a) abort();
        if (e > a && (memcmp(w.col + w.row_off[r], v.col + a, 4 * (e - a)) ||
                      memcmp(w.val + w.row_off[r], v.val + a, 4 * (e - a))))
            abort();
        if (strcmp(dm_vectors_id(&w, r), dm_vectors_id(&v, first + r)) ||
            strcmp(dm_vectors_labels(&w, r), dm_vectors_labels(&v, first + r)))
            abort();
    }
    dm_vectors_free(&w);
    dm_vectors_free(&v);
    return 0;
}
