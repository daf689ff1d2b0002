/* libFuzzer target: the token-stream file reader on arbitrary bytes (as a file): it must reject
 * anything malformed with DM_ERR_FORMAT and never read out of bounds; what it accepts must hold
 * what preprocess.h says the reader checks (offsets, NUL-terminated ids and labels, terms of at
 * most DM_TOKEN_MAX_LEN bytes strictly increasing in (hash, bytes)): abort() otherwise. Inputs
 * whose first byte is odd get the magic, version, end marker and checksum made right first, so
 * that the fuzzer explores the counts and offsets behind those checks (random bytes never pass
 * the checksum). Seeds (fuzz/corpus/stream) are small `docmine preprocess -o` outputs of format
 * version 3, each also with its first byte made odd ('E'), so that mutations behind the header
 * keep a valid CRC. Reference: the format in preprocess/preprocess.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "preprocess/preprocess.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0]) snprintf(path, sizeof(path), "/tmp/dm_fuzz_stream_%d.dmtok", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    /* the smallest file of version 3: magic, version, flags, rank, ranks (24 bytes), the 64-bit
     * run id, the seven counts and the trailer (CRC, "END\n"); as DM_TOKS_HEAD + 8 in stream.c */
    if (size >= 24 + 8 + 7 * 8 + 8 && (data[0] & 1)) {
        unsigned char *b = malloc(size);
        if (!b) {
            fclose(f);
            return 0;
        }
        memcpy(b, data, size);
        memcpy(b, DM_TOKEN_STREAM_MAGIC, 8);
        b[8] = DM_TOKEN_STREAM_VERSION & 0xff, b[9] = b[10] = b[11] = 0;
        memcpy(b + size - 4, "END\n", 4);
        uLong c = crc32(crc32(0L, Z_NULL, 0), b, (uInt)(size - 8));
        for (int k = 0; k < 4; k++) b[size - 8 + k] = (unsigned char)(c >> (8 * k));
        fwrite(b, 1, size, f);
        free(b);
    } else {
        fwrite(data, 1, size, f);
    }
    fclose(f);
    dm_token_stream s;
    int rc = dm_token_stream_read(&s, path);
    if (rc != DM_OK && rc != DM_ERR_FORMAT) abort(); /* malformed input is DM_ERR_FORMAT, only */
    if (rc == DM_OK) {
        /* what preprocess.h says the reader has checked of a file it accepts */
        if (s.run_id == 0 || s.rank >= s.n_ranks || s.tok_off[0] != 0 || s.tok_off[s.n_docs] != s.n_tokens) abort();
        for (size_t d = 0; d < s.n_docs; d++) {
            if (s.tok_off[d + 1] < s.tok_off[d] || s.tok_off[d + 1] > s.n_tokens) abort();
            if (s.id_off[d + 1] <= s.id_off[d] || s.ids[s.id_off[d + 1] - 1] != 0) abort();
            if (s.label_off[d + 1] <= s.label_off[d] || s.labels[s.label_off[d + 1] - 1] != 0) abort();
            (void)strlen(dm_token_stream_id(&s, d));
            (void)strlen(dm_token_stream_labels(&s, d));
        }
        /* the vocabulary: terms of at most DM_TOKEN_MAX_LEN bytes (an empty stem is valid: Porter
         * makes "" of "s"), strictly increasing in (hash, bytes) */
        for (size_t t = 0; t < s.n_terms; t++) {
            uint64_t len = s.term_off[t + 1] - s.term_off[t];
            if (s.term_off[t + 1] < s.term_off[t] || len > DM_TOKEN_MAX_LEN) abort();
            if (t == 0 || s.term_hash[t] > s.term_hash[t - 1]) continue;
            if (s.term_hash[t] < s.term_hash[t - 1]) abort();
            uint64_t lp = s.term_off[t] - s.term_off[t - 1];
            int c = memcmp(s.term_bytes + s.term_off[t - 1], s.term_bytes + s.term_off[t], lp < len ? lp : len);
            if (c > 0 || (c == 0 && lp >= len)) abort();
        }
        for (size_t i = 0; i < s.n_tokens; i++) (void)dm_token_stream_term_find(&s, s.hashes[i]);
        static FILE *null_out;
        if (!null_out) null_out = fopen("/dev/null", "w");
        if (null_out) (void)dm_token_stream_dump(&s, null_out); /* every term it names */
        dm_token_stream_free(&s);
    }
    return 0;
}
