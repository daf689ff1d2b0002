/* bench_util: the benchmark programs' shared helpers (bench_util.h). Reference: none. */
#define _XOPEN_SOURCE 700 /* nftw */
#include "bench/common/bench_util.h"

#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "common/fileio.h"

#ifndef DM_BENCH_SOURCE_DIR
#define DM_BENCH_SOURCE_DIR "."
#endif

static struct {
    const char *prog;
    int say;
    char command[8192];
    char date[32];
} g = {"bench", 1, "", ""};

void bench_init(const char *prog, int argc, char **argv, int say)
{
    g.prog = prog;
    g.say = say;
    size_t at = 0;
    g.command[0] = '\0';
    for (int i = 0; i < argc && at + 4 < sizeof g.command; i++) {
        const char *w = argv[i];
        int plain = *w != '\0';
        for (const char *p = w; *p; p++)
            if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=./,:@%", *p)) plain = 0;
        if (i) g.command[at++] = ' ';
        if (!plain) g.command[at++] = '\'';
        for (const char *p = w; *p && at + 6 < sizeof g.command; p++) {
            if (*p == '\'' && !plain) { /* ' -> '\'' */
                memcpy(g.command + at, "'\\''", 4);
                at += 4;
            } else g.command[at++] = *p;
        }
        if (!plain) g.command[at++] = '\'';
        g.command[at] = '\0';
    }
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(g.date, sizeof g.date, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int bench_says(void) { return g.say; }

int bench_usage_error(const char *fmt, ...)
{
    if (!g.say) return BENCH_EXIT_USAGE;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", g.prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "; see %s --help\n", g.prog);
    va_end(ap);
    return BENCH_EXIT_USAGE;
}

int bench_error(const char *fmt, ...)
{
    if (!g.say) return BENCH_EXIT_RUNTIME;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", g.prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return BENCH_EXIT_RUNTIME;
}

int bench_parse_u64(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *v)
{
    char *e = NULL;
    errno = 0;
    /* strtoull takes a sign (and turns "-1" into 2^64 - 1) and leading blanks: digits only */
    unsigned long long x = s[0] >= '0' && s[0] <= '9' ? strtoull(s, &e, 10) : 0;
    if (!e || *e || errno == ERANGE || x < lo || x > hi) {
        bench_usage_error("%s: '%s' is not a whole number from %llu to %llu", opt, s, (unsigned long long)lo,
                          (unsigned long long)hi);
        return -1;
    }
    *v = (uint64_t)x;
    return 0;
}

int bench_parse_int(const char *opt, const char *s, int lo, int hi, int *v)
{
    char *e = NULL;
    errno = 0;
    long long x = (s[0] >= '0' && s[0] <= '9') || (s[0] == '-' && s[1] >= '0' && s[1] <= '9') ? strtoll(s, &e, 10) : 0;
    if (!e || *e || errno == ERANGE || x < lo || x > hi) {
        bench_usage_error("%s: '%s' is not a whole number from %d to %d", opt, s, lo, hi);
        return -1;
    }
    *v = (int)x;
    return 0;
}

int bench_parse_size(const char *opt, const char *s, size_t lo, size_t hi, size_t *v)
{
    uint64_t x = 0;
    if (bench_parse_u64(opt, s, lo, hi, &x) != 0) return -1;
    *v = (size_t)x;
    return 0;
}

int bench_parse_double(const char *opt, const char *s, double lo, double hi, double *v)
{
    char *e = NULL;
    errno = 0;
    double x = *s && !strchr(" \t\n", *s) ? strtod(s, &e) : NAN;
    if (!e || *e || errno == ERANGE || !isfinite(x) || x < lo || x > hi) {
        bench_usage_error("%s: '%s' is not a number from %g to %g", opt, s, lo, hi);
        return -1;
    }
    *v = x;
    return 0;
}

/* The items of a comma-separated list, each given to one(); the count or -1. */
static int parse_list(const char *opt, const char *s, int max, int (*one)(const char *, const char *, void *, int),
                      void *out)
{
    int n = 0;
    const char *p = s;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char item[64];
        if (n == max) {
            bench_usage_error("%s: '%s' has more than %d values", opt, s, max);
            return -1;
        }
        if (len == 0 || len >= sizeof item) {
            bench_usage_error("%s: '%s' is not a comma-separated list of numbers", opt, s);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        if (one(opt, item, out, n) != 0) return -1;
        n++;
        if (!e) break;
        p = e + 1;
    }
    return n;
}

static double g_lo, g_hi; /* the range of the list being parsed */

static int one_double(const char *opt, const char *item, void *out, int i)
{
    return bench_parse_double(opt, item, g_lo, g_hi, (double *)out + i);
}

static int one_int(const char *opt, const char *item, void *out, int i)
{
    return bench_parse_int(opt, item, (int)g_lo, (int)g_hi, (int *)out + i);
}

int bench_parse_doubles(const char *opt, const char *s, double lo, double hi, double *v, int max)
{
    g_lo = lo, g_hi = hi;
    return parse_list(opt, s, max, one_double, v);
}

int bench_parse_ints(const char *opt, const char *s, int lo, int hi, int *v, int max)
{
    g_lo = lo, g_hi = hi;
    return parse_list(opt, s, max, one_int, v);
}

static const char *source_dir(void)
{
    const char *s = getenv("DOCMINE_SOURCE_DIR");
    return s && *s ? s : DM_BENCH_SOURCE_DIR;
}

const char *bench_dataset(const char *name, char *buf, size_t len)
{
    const char *d = getenv("DOCMINE_DATASETS");
    if (d && *d) snprintf(buf, len, "%s/%s", d, name);
    else snprintf(buf, len, "%s/../shared/datasets/%s", source_dir(), name);
    return buf;
}

const char *bench_source_file(const char *rel, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", source_dir(), rel);
    return buf;
}

int bench_check_corpus(const char *path, int is_default)
{
    struct stat st;
    if (stat(path, &st) == 0) return 0;
    const char *d = getenv("DOCMINE_DATASETS");
    if (is_default)
        bench_error("corpus %s not found (the default corpus: $DOCMINE_DATASETS/reuters21578%s, else "
                    "../shared/datasets beside the source tree); set DOCMINE_DATASETS to the folder that holds "
                    "reuters21578, give --corpus PATH, or fetch it with datasets/fetch.sh reuters21578 DIR",
                    path, d && *d ? "" : ", DOCMINE_DATASETS unset");
    else
        bench_error("--corpus %s: %s", path, strerror(errno));
    return -1;
}

const char *bench_command(void) { return g.command; }

const char *bench_date(void) { return g.date; }

void bench_print_header(const char *gpu)
{
    if (!g.say) return;
    printf("command: %s\n", g.command);
    printf("gpu: %s, date: %s\n", gpu && *gpu ? gpu : "none", g.date);
    fflush(stdout);
}

void bench_json_meta(json_t *root, const char *gpu)
{
    json_object_set_new(root, "command", json_string(g.command));
    json_object_set_new(root, "date", json_string(g.date));
    if (!json_object_get(root, "gpu")) json_object_set_new(root, "gpu", json_string(gpu && *gpu ? gpu : "none"));
}

int bench_write_json(const char *path, const json_t *root, size_t flags)
{
    char *txt = json_dumps(root, flags);
    if (!txt) return DM_ERR(DM_ERR_NOMEM, "%s: cannot format the JSON", path);
    size_t n = strlen(txt);
    char *withnl = malloc(n + 2);
    int rc;
    if (!withnl) rc = DM_ERR(DM_ERR_NOMEM, "%s: out of memory", path);
    else {
        memcpy(withnl, txt, n);
        withnl[n] = '\n';
        rc = dm_write_file_atomic(path, withnl, n + 1);
    }
    free(withnl);
    free(txt);
    return rc;
}

/* Appends s to the command in single quotes (a ' as '\''). */
static void shell_word(char *cmd, size_t cap, const char *s)
{
    size_t at = strlen(cmd);
    if (at + 2 < cap) cmd[at++] = ' ', cmd[at++] = '\'';
    for (; *s && at + 6 < cap; s++) {
        if (*s == '\'') {
            memcpy(cmd + at, "'\\''", 4);
            at += 4;
        } else cmd[at++] = *s;
    }
    if (at + 1 < cap) cmd[at++] = '\'';
    cmd[at] = '\0';
}

int bench_python(const char *script, const char *arg1, const char *arg2, char *result, size_t rlen, char *why,
                 size_t wlen)
{
    result[0] = why[0] = '\0';
    if (access(script, R_OK) != 0) {
        snprintf(why, wlen, "%s: %s (the source tree: DOCMINE_SOURCE_DIR)", script, strerror(errno));
        return -1;
    }
    char cmd[16384] = "exec python3";
    shell_word(cmd, sizeof cmd, script);
    shell_word(cmd, sizeof cmd, arg1);
    if (arg2) shell_word(cmd, sizeof cmd, arg2);
    if (strlen(cmd) + 8 >= sizeof cmd) {
        snprintf(why, wlen, "%s: arguments too long", script);
        return -1;
    }
    strcat(cmd, " 2>&1");
    fflush(stdout);
    FILE *p = popen(cmd, "r");
    if (!p) {
        snprintf(why, wlen, "cannot run python3: %s", strerror(errno));
        return -1;
    }
    char line[4096];
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0] || line[0] == '#') continue;
        double x;
        if (!result[0] && sscanf(line, "%lf", &x) == 1) snprintf(result, rlen, "%s", line);
        else snprintf(why, wlen, "%s", line); /* the last message of the script (or the shell) */
    }
    int st = pclose(p);
    if (st != 0 || !result[0]) {
        if (!why[0]) snprintf(why, wlen, "python3 %s: exit status %d, no result", script, st);
        result[0] = '\0';
        return -1;
    }
    return 0;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb, (void)flag, (void)f;
    return remove(p) == 0 || errno == ENOENT ? 0 : -1;
}

int bench_remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? DM_OK : DM_ERR(DM_ERR_IO, "%s: %s", path, strerror(errno));
    if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return DM_ERR(DM_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    return DM_OK;
}

int bench_gunzip_to(const char *src, const char *dst)
{
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.part.%ld", dst, (long)getpid()) >= (int)sizeof tmp)
        return DM_ERR(DM_ERR_INVALID_ARG, "%s: path too long", dst);
    gzFile in = gzopen(src, "rb");
    if (!in) return DM_ERR(DM_ERR_IO, "%s: cannot open: %s", src, strerror(errno));
    FILE *out = fopen(tmp, "wb");
    if (!out) {
        int e = errno;
        gzclose(in);
        return DM_ERR(DM_ERR_IO, "%s: cannot create: %s", tmp, strerror(e));
    }
    char buf[1 << 16];
    int k, rc = DM_OK;
    while ((k = gzread(in, buf, sizeof buf)) > 0)
        if (fwrite(buf, 1, (size_t)k, out) != (size_t)k) {
            rc = DM_ERR(DM_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
            break;
        }
    if (rc == DM_OK && k < 0) {
        int ez = 0;
        const char *m = gzerror(in, &ez);
        rc = DM_ERR(DM_ERR_IO, "%s: cannot decompress: %s", src, m ? m : "error");
    }
    gzclose(in);
    if (fclose(out) != 0 && rc == DM_OK) rc = DM_ERR(DM_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
    if (rc == DM_OK && rename(tmp, dst) != 0) rc = DM_ERR(DM_ERR_IO, "%s: rename failed: %s", dst, strerror(errno));
    if (rc != DM_OK) remove(tmp);
    return rc;
}

int bench_probe_args(int argc, char **argv, const char *usage, const char *nname, uint64_t *n, uint64_t nlo,
                     uint64_t nhi, int *rounds)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            if (g.say) printf("usage: %s\nExit codes: 0 ok, 1 runtime error, 2 usage error.\n", usage);
            return 1;
        }
    if (argc > 3) {
        bench_usage_error("unexpected argument '%s'", argv[3]);
        return -1;
    }
    if (argc > 1 && bench_parse_u64(nname, argv[1], nlo, nhi, n) != 0) return -1;
    if (argc > 2 && bench_parse_int("R (rounds)", argv[2], 1, 1000, rounds) != 0) return -1;
    return 0;
}
