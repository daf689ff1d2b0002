/* libFuzzer target: the token-stream file reader on arbitrary bytes (as a file): it must reject
 * anything malformed with DM_ERR_FORMAT and never read out of bounds. Inputs whose first byte is
 * odd get the magic, version, end marker and checksum made right first, so that the fuzzer
 * explores the counts and offsets behind those checks (random bytes never pass the checksum).
 * Reference: the format in preprocess/preprocess.h. */
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
    if (size >= 24 + 7 * 8 + 8 && (data[0] & 1)) {
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
    if (dm_token_stream_read(&s, path) == 0) {
        for (size_t d = 0; d < s.n_docs; d++) {
            if (s.tok_off[d + 1] > s.n_tokens) abort();
            (void)strlen(dm_token_stream_id(&s, d));
            (void)strlen(dm_token_stream_labels(&s, d));
        }
        static FILE *null_out;
        if (!null_out) null_out = fopen("/dev/null", "w");
        if (null_out) (void)dm_token_stream_dump(&s, null_out); /* every term it names */
        dm_token_stream_free(&s);
    }
    return 0;
}
