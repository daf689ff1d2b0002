/* `docmine stem`: reads words, one per line, from stdin and writes their Porter stems, one per
 * line, with the selected backend (--backend cpu: libstemmer's porter; cuda: our kernel). The way
 * the two stemmers are compared by hand. Reference: dm_stem_words_cpu. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/commands.h"
#include "common/alloc.h"
#include "common/status.h"
#include "preprocess/preprocess.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: docmine [--backend cpu|cuda] stem [--hd] < words.txt\n\n"
               "Reads words, one per line, from stdin and prints their Porter stems, one per line.\n"
               "Words with non-ASCII bytes or longer than %d bytes are printed unchanged.\n"
               "The CPU backend uses libstemmer's Snowball porter; the CUDA backend our kernel.\n\n"
               "  --hd    use our stemmer on the host (the kernel's code compiled for the CPU)\n\n"
               "example:\n  printf 'running\\nponies\\n' | docmine --backend cpu stem\n",
            DM_TOKEN_MAX_LEN);
}

int dm_cmd_stem(dm_app *app, int argc, char **argv)
{
    static const struct option opts[] = {{"hd", no_argument, 0, 'd'}, {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    dm_ctx *ctx = app->ctx;
    int hd = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': hd = 1; break;
        case 'h':
            if (ctx->rank == 0) usage(stdout);
            return DM_EXIT_OK;
        default:
            return dm_app_usage_error(app, "stem", "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return dm_app_usage_error(app, "stem", "unexpected argument '%s'", argv[optind]);
    if (ctx->rank != 0) { /* stdin belongs to rank 0; the others learn whether it failed */
        int rc = dm_ctx_agree(ctx, DM_OK);
        return rc < 0 ? dm_app_fail(app, "stem", rc) : DM_EXIT_OK;
    }
    char *words = NULL;
    size_t len = 0, cap = 0, n = 0, ncap = 0;
    uint32_t *off = NULL, *wl = NULL;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t k;
    int rc = DM_OK;
    errno = 0;
    while ((k = getline(&line, &lcap, stdin)) >= 0) {
        while (k > 0 && (line[k - 1] == '\n' || line[k - 1] == '\r')) k--;
        if (len + (size_t)k > UINT32_MAX || n >= UINT32_MAX) { /* offsets are 32-bit: checked on every line */
            rc = DM_ERR(DM_ERR_INVALID_ARG, "stem: input too large (more than 4 GiB of words)");
            break;
        }
        if (len + (size_t)k + 1 > cap || n == ncap) {
            cap = 2 * (len + (size_t)k + 1);
            ncap = ncap ? 2 * ncap : 4096;
            char *w2 = dm_realloc(words, cap);
            uint32_t *o2 = dm_realloc(off, ncap * sizeof(*o2)), *l2 = NULL;
            if (w2) words = w2;
            if (o2) off = o2;
            l2 = dm_realloc(wl, ncap * sizeof(*l2));
            if (l2) wl = l2;
            if (!w2 || !o2 || !l2) {
                rc = DM_ERR(DM_ERR_NOMEM, "stem: out of memory for the words");
                break;
            }
        }
        memcpy(words + len, line, (size_t)k);
        off[n] = (uint32_t)len;
        wl[n] = (uint32_t)k;
        len += (size_t)k;
        n++;
    }
    /* getline says -1 at the end and on a read error alike: an error must not pass for the end */
    if (rc >= 0 && ferror(stdin))
        rc = DM_ERR(DM_ERR_IO, "stdin: read error: %s", errno ? strerror(errno) : "unknown error");
    free(line); /* getline's */
    char *out = dm_malloc(len + 1);
    uint32_t *oo = dm_malloc((n + 1) * sizeof(*oo)), *ol = dm_malloc((n + 1) * sizeof(*ol));
    if (rc >= 0 && (!out || !oo || !ol)) rc = DM_ERR(DM_ERR_NOMEM, "stem: out of memory");
    if (rc >= 0) {
        dm_stem_words_fn *fn = hd ? dm_stem_words_hd
                               : ctx->backend == DM_BACKEND_CUDA ? dm_stem_words_cuda
                                                                 : dm_stem_words_cpu;
        rc = fn(out, oo, ol, words ? words : "", off, wl, n);
    }
    for (size_t i = 0; rc >= 0 && i < n; i++) {
        fwrite(out + oo[i], 1, ol[i], stdout);
        fputc('\n', stdout);
    }
    dm_free(words);
    dm_free(off);
    dm_free(wl);
    dm_free(out);
    dm_free(oo);
    dm_free(ol);
    if (rc >= 0 && fflush(stdout) != 0) rc = DM_ERR(DM_ERR_IO, "stem: write error on stdout");
    rc = dm_ctx_agree(ctx, rc);
    return rc < 0 ? dm_app_fail(app, "stem", rc) : DM_EXIT_OK;
}
