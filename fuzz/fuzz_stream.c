/* libFuzzer target: the token-stream file reader on arbitrary bytes (as a file): it must reject
 * anything malformed with DM_ERR_FORMAT and never read out of bounds. Reference: the format in
 * preprocess/preprocess.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preprocess/preprocess.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0]) snprintf(path, sizeof(path), "/tmp/dm_fuzz_stream_%d.dmtok", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    dm_token_stream s;
    if (dm_token_stream_read(&s, path) == 0) {
        for (size_t d = 0; d < s.n_docs; d++) {
            if (s.tok_off[d + 1] > s.n_tokens) abort();
            (void)strlen(dm_token_stream_id(&s, d));
            (void)strlen(dm_token_stream_labels(&s, d));
        }
        dm_token_stream_free(&s);
    }
    return 0;
}
