/* The tuning database (TSV): parse, format, load, merge and atomic store (temp file + rename,
 * writers serialised by an fcntl lock on PATH.lock; readers lock-free). Reference: none. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/status.h"
#include "common/tune/tune_db.h"
#include "common/tune/tune_internal.h"

int dm_tune_db_resolve_path(char *buf, size_t len, const char *override)
{
    int w;
    const char *env = getenv("DOCMINE_TUNING_DB");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (!buf || len == 0) return DM_ERR(DM_ERR_INVALID_ARG, "tuning db: no buffer");
    if (override && override[0]) w = snprintf(buf, len, "%s", override);
    else if (env && env[0]) w = snprintf(buf, len, "%s", env);
    else if (xdg && xdg[0] == '/') w = snprintf(buf, len, "%s/docmine/tuning.tsv", xdg);
    else if (home && home[0]) w = snprintf(buf, len, "%s/.cache/docmine/tuning.tsv", home);
    else return DM_ERR(DM_ERR_INVALID_ARG, "tuning db: neither DOCMINE_TUNING_DB, XDG_CACHE_HOME nor HOME is set");
    if (w < 0 || (size_t)w >= len) return DM_ERR(DM_ERR_INVALID_ARG, "tuning db: path too long");
    return DM_OK;
}

void dm_tune_db_set_name(char *dst, size_t len, const char *src)
{
    size_t i = 0;
    if (!dst || len == 0) return;
    for (; src && src[i] && i + 1 < len; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
    }
    dst[i] = '\0';
}

/* Splits line at tabs into at most max fields (in place). Returns the field count. */
static int split_tabs(char *line, char **f, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        if (n == max) return max + 1;
        f[n++] = p;
        char *t = strchr(p, '\t');
        if (!t) break;
        *t = '\0';
        p = t + 1;
    }
    return n;
}

/* Numbers are plain decimal digits (a '-' first for signed fields): strtoll/strtoull alone would
 * take leading blanks and a sign, and strtoull turns " -5" into 2^64 - 5. */
static int parse_ll(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    if (!(s[0] >= '0' && s[0] <= '9') && !(s[0] == '-' && s[1] >= '0' && s[1] <= '9')) return 0;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

static int parse_ull(const char *s, unsigned long long *out)
{
    char *end;
    if (!(s[0] >= '0' && s[0] <= '9')) return 0;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return 0;
    *out = v;
    return 1;
}

static int parse_ms(const char *s, double *out)
{
    char *end;
    if (!s[0]) return 0;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= 0.0) || v > 1e12) return 0;
    *out = v;
    return 1;
}

int dm_tune_db_parse_line(dm_tune_db_row *row, const char *line, const char **why)
{
    char buf[1024];
    char *f[DM_TUNE_DB_FIELDS + 1];
    const char *dummy;
    if (!why) why = &dummy;
    *why = "";
    if (!row || !line) return DM_ERR_INVALID_ARG;
    size_t len = strlen(line);
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
    if (len >= sizeof buf) {
        *why = "line too long";
        return DM_ERR_FORMAT;
    }
    memcpy(buf, line, len);
    buf[len] = '\0';
    int nf = split_tabs(buf, f, DM_TUNE_DB_FIELDS);
    if (nf != DM_TUNE_DB_FIELDS) {
        *why = "wrong number of fields (15 expected)";
        return DM_ERR_FORMAT;
    }
    memset(row, 0, sizeof *row);
    if (!f[0][0] || strlen(f[0]) >= sizeof row->kernel) {
        *why = "bad kernel name";
        return DM_ERR_FORMAT;
    }
    if (!f[1][0] || strlen(f[1]) >= sizeof row->gpu) {
        *why = "bad GPU name";
        return DM_ERR_FORMAT;
    }
    strcpy(row->kernel, f[0]);
    strcpy(row->gpu, f[1]);
    int maj, min;
    char extra;
    if (sscanf(f[2], "%d.%d%c", &maj, &min, &extra) != 2 || maj < 1 || maj > 99 || min < 0 ||
        min > 9) {
        *why = "bad compute capability";
        return DM_ERR_FORMAT;
    }
    row->cc = maj * 10 + min;
    long long v[6];
    static const long long lo[6] = {0, 32, 1, 0, DM_LAYOUT_NONE, 0};
    static const long long hi[6] = {63, 1024, 1 << 20, 1, DM_LAYOUT_TILED, 1 << 20};
    for (int i = 0; i < 6; i++)
        if (!parse_ll(f[3 + i], lo[i], hi[i], &v[i])) {
            *why = i == 0 ? "bad workload class" : "bad policy field";
            return DM_ERR_FORMAT;
        }
    row->wclass = (int)v[0];
    row->policy.block = (int)v[1];
    row->policy.rake = (int)v[2];
    row->policy.strided = (int)v[3];
    row->policy.layout = (int)v[4];
    row->policy.tile = (int)v[5];
    if (row->policy.block % 32) {
        *why = "block not a multiple of 32";
        return DM_ERR_FORMAT;
    }
    if ((row->policy.layout == DM_LAYOUT_TILED) != (row->policy.tile > 0)) {
        *why = "tile size without the tiled layout or tiled layout without a tile size";
        return DM_ERR_FORMAT;
    }
    if (!parse_ms(f[9], &row->default_ms) || !parse_ms(f[10], &row->tuned_ms)) {
        *why = "bad time";
        return DM_ERR_FORMAT;
    }
    if (!parse_ull(f[11], &row->msp_n) || !parse_ull(f[12], &row->target_n)) {
        *why = "bad size";
        return DM_ERR_FORMAT;
    }
    if (dm_tune_mode_parse(f[13], &row->mode) != DM_OK) {
        *why = "bad mode";
        return DM_ERR_FORMAT;
    }
    if (!parse_ll(f[14], 0, LLONG_MAX, &row->unix_time)) {
        *why = "bad time stamp";
        return DM_ERR_FORMAT;
    }
    return DM_OK;
}

int dm_tune_db_format_row(char *buf, size_t len, const dm_tune_db_row *r)
{
    char kernel[sizeof r->kernel], gpu[sizeof r->gpu];
    dm_tune_db_set_name(kernel, sizeof kernel, r->kernel);
    dm_tune_db_set_name(gpu, sizeof gpu, r->gpu);
    int w = snprintf(buf, len, "%s\t%s\t%d.%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.6g\t%.6g\t%llu\t%llu\t%s\t%lld\n",
                     kernel, gpu, r->cc / 10, r->cc % 10, r->wclass, r->policy.block,
                     r->policy.rake, r->policy.strided, r->policy.layout, r->policy.tile,
                     r->default_ms, r->tuned_ms, r->msp_n, r->target_n, dm_tune_mode_name(r->mode),
                     r->unix_time);
    if (w < 0 || (size_t)w >= len) return DM_ERR(DM_ERR_INVALID_ARG, "tuning db: row too long");
    return DM_OK;
}

void dm_tune_db_init(dm_tune_db *db) { memset(db, 0, sizeof *db); }

void dm_tune_db_free(dm_tune_db *db)
{
    if (!db) return;
    free(db->rows);
    memset(db, 0, sizeof *db);
}

static int same_key(const dm_tune_db_row *a, const char *kernel, const char *gpu, int cc, int wc)
{
    return a->cc == cc && a->wclass == wc && !strcmp(a->kernel, kernel) && !strcmp(a->gpu, gpu);
}

const dm_tune_db_row *dm_tune_db_find(const dm_tune_db *db, const char *kernel, const char *gpu,
                                      int cc, int wclass)
{
    if (!db || !kernel || !gpu) return NULL;
    char g[sizeof db->rows[0].gpu];
    dm_tune_db_set_name(g, sizeof g, gpu);
    for (int i = db->n - 1; i >= 0; i--)
        if (same_key(&db->rows[i], kernel, g, cc, wclass)) return &db->rows[i];
    return NULL;
}

int dm_tune_db_put(dm_tune_db *db, const dm_tune_db_row *row)
{
    for (int i = 0; i < db->n; i++)
        if (same_key(&db->rows[i], row->kernel, row->gpu, row->cc, row->wclass)) {
            db->rows[i] = *row;
            return DM_OK;
        }
    if (db->n == db->cap) {
        int cap = db->cap ? 2 * db->cap : 32;
        dm_tune_db_row *r = realloc(db->rows, (size_t)cap * sizeof *r);
        if (!r) return DM_ERR(DM_ERR_NOMEM, "tuning db: out of memory");
        db->rows = r;
        db->cap = cap;
    }
    db->rows[db->n++] = *row;
    return DM_OK;
}

int dm_tune_db_load(dm_tune_db *db, const char *path)
{
    if (!db || !path) return DM_ERR(DM_ERR_INVALID_ARG, "tuning db: bad arguments");
    db->n = 0;
    db->rejected = 0;
    db->header = 0;
    db->comments = 0;
    const char *kind = dm_special_file(path); /* a FIFO would block the read (every rank) */
    if (kind) return DM_ERR(DM_ERR_IO, "tuning db %s: not a regular file (%s)", path, kind);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) return DM_OK;
        return DM_ERR(DM_ERR_IO, "tuning db %s: %s", path, strerror(errno));
    }
    char line[2048];
    int lineno = 0, rc = DM_OK;
    errno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (lineno == 1 && !strncmp(line, DM_TUNE_DB_MAGIC, strlen(DM_TUNE_DB_MAGIC))) {
            /* the format's header: another version is neither read nor rewritten */
            const char *v = line + strlen(DM_TUNE_DB_MAGIC);
            size_t vl = strcspn(v, " \t\r\n");
            if (vl != 1 || v[0] != '0' + DM_TUNE_DB_VERSION) {
                rc = DM_ERR(DM_ERR_FORMAT, "tuning db %s: format v%.*s, this build reads v%d only "
                            "(use another --tuning-db)", path, (int)(vl < 32 ? vl : 32), v,
                            DM_TUNE_DB_VERSION);
                break;
            }
            db->header = 1;
            continue;
        }
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            /* overlong line: skip the rest of it */
            int c;
            while ((c = fgetc(f)) != EOF && c != '\n') {}
            dm_tune_warn("tuning db %s:%d: rejected (line too long)", path, lineno);
            db->rejected++;
            continue;
        }
        if (line[0] == '#') {
            db->comments++;
            continue;
        }
        if (line[0] == '\n' || (line[0] == '\r' && line[1] == '\n')) continue;
        dm_tune_db_row row;
        const char *why;
        if (dm_tune_db_parse_line(&row, line, &why) != DM_OK) {
            dm_tune_warn("tuning db %s:%d: rejected (%s)", path, lineno, why);
            db->rejected++;
            continue;
        }
        rc = dm_tune_db_put(db, &row);
        if (rc != DM_OK) break;
    }
    if (ferror(f) && rc == DM_OK)
        rc = DM_ERR(DM_ERR_IO, "tuning db %s: read error (%s)", path,
                    errno ? strerror(errno) : "unknown");
    fclose(f);
    if (rc != DM_OK) db->n = 0;
    return rc;
}

int dm_tune_db_mkdirs(const char *path) { return dm_mkdirs_parent(path); }

static int write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The fcntl lock belongs to the process, not to a thread: two threads storing at once would
 * both hold it and write the same PATH.tmp.<pid>. This mutex serialises the process's writers. */
static pthread_mutex_t g_store_lock = PTHREAD_MUTEX_INITIALIZER;

static int store_locked(const char *path, const dm_tune_db_row *rows, int n);

int dm_tune_db_store(const char *path, const dm_tune_db_row *rows, int n)
{
    if (!path || !path[0] || (!rows && n > 0) || n < 0)
        return DM_ERR(DM_ERR_INVALID_ARG, "tuning db: bad arguments");
    /* A database reached through a symbolic link (a shared file linked into ~/.cache) is written
     * where the link points: renaming the new file over the link would replace the link by a
     * private copy (the shared file no longer updated, silently) and lock PATH.lock beside the
     * link, where a writer through another link or the file's own path does not look. */
    char real[PATH_MAX];
    struct stat lst;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        if (!realpath(path, real))
            return DM_ERR(DM_ERR_IO, "tuning db %s: a symbolic link whose target cannot be resolved "
                          "(%s); not replacing the link", path, strerror(errno));
        path = real;
    }
    pthread_mutex_lock(&g_store_lock);
    int rc = store_locked(path, rows, n);
    pthread_mutex_unlock(&g_store_lock);
    return rc;
}

static int store_locked(const char *path, const dm_tune_db_row *rows, int n)
{
    DM_TRY(dm_tune_db_mkdirs(path));
    char lockpath[PATH_MAX], tmppath[PATH_MAX];
    if (snprintf(lockpath, sizeof lockpath, "%s.lock", path) >= (int)sizeof lockpath ||
        snprintf(tmppath, sizeof tmppath, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmppath)
        return DM_ERR(DM_ERR_INVALID_ARG, "tuning db: path too long");
    int lfd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (lfd < 0) return DM_ERR(DM_ERR_IO, "tuning db: %s: %s", lockpath, strerror(errno));
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    int locked = 0;
    while (fcntl(lfd, F_SETLKW, &fl) != 0) {
        if (errno == EINTR) continue;
        /* a file system without locks: the write is still atomic, a concurrent writer may win */
        dm_tune_warn("tuning db: cannot lock %s (%s); writing without the lock", lockpath,
                     strerror(errno));
        break;
    }
    locked = 1;
    dm_tune_db db;
    dm_tune_db_init(&db);
    int rc = dm_tune_db_load(&db, path);
    if (rc == DM_OK && !db.header && db.n == 0 && (db.rejected > 0 || db.comments > 0))
        /* no header and not one row: some other file (a mistyped --tuning-db), not ours to replace */
        rc = DM_ERR(DM_ERR_FORMAT, "tuning db %s: not a docmine tuning database (no header line, "
                    "no valid row); not overwriting it", path);
    for (int i = 0; i < n && rc == DM_OK; i++) {
        dm_tune_db_row r = rows[i];
        dm_tune_db_set_name(r.kernel, sizeof r.kernel, rows[i].kernel);
        dm_tune_db_set_name(r.gpu, sizeof r.gpu, rows[i].gpu);
        /* a model row (no timing) never replaces a measured one: decided here, under the lock,
         * on the file as it is now (a measured row another process stored a moment ago too) */
        const dm_tune_db_row *old = dm_tune_db_find(&db, r.kernel, r.gpu, r.cc, r.wclass);
        if (r.mode == DM_TUNE_MODEL && old &&
            (old->mode == DM_TUNE_MSP || old->mode == DM_TUNE_EXHAUSTIVE))
            continue;
        rc = dm_tune_db_put(&db, &r);
    }
    if (rc == DM_OK) {
        int fd = open(tmppath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (fd < 0) {
            rc = DM_ERR(DM_ERR_IO, "tuning db: %s: %s", tmppath, strerror(errno));
        } else {
            char line[1024];
            int bad = write_all(fd, DM_TUNE_DB_HEADER, strlen(DM_TUNE_DB_HEADER));
            for (int i = 0; i < db.n && !bad; i++) {
                if (dm_tune_db_format_row(line, sizeof line, &db.rows[i]) != DM_OK) continue;
                bad = write_all(fd, line, strlen(line));
            }
            if (!bad) bad = fsync(fd);
            if (close(fd) != 0) bad = 1;
            if (bad) rc = DM_ERR(DM_ERR_IO, "tuning db: writing %s: %s", tmppath, strerror(errno));
            else
                rc = dm_rename_output(tmppath, path);
            if (rc != DM_OK) unlink(tmppath);
        }
    }
    dm_tune_db_free(&db);
    if (locked) {
        fl.l_type = F_UNLCK;
        fcntl(lfd, F_SETLK, &fl);
    }
    close(lfd);
    return rc;
}

void dm_tune_db_key_lock_path(char *buf, size_t len, const char *db, const char *kernel,
                              const char *gpu, int cc, int wclass)
{
    uint64_t h = 1469598103934665603ull;
    char key[512], g[128];
    dm_tune_db_set_name(g, sizeof g, gpu);
    snprintf(key, sizeof key, "%s\t%s\t%d\t%d", kernel, g, cc, wclass);
    for (const char *p = key; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    snprintf(buf, len, "%s.%016llx.tuning", db, (unsigned long long)h);
}
