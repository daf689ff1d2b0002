/* Atomic output files and mkdir -p (common/fileio.h). Reference: none. */
#include "common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/status.h"

static atomic_int g_seq;

int dm_atomic_open(dm_atomic_file *f, const char *path)
{
    memset(f, 0, sizeof *f);
    if (strlen(path) + 32 >= sizeof f->tmp)
        return DM_ERR(DM_ERR_INVALID_ARG, "%s: path too long", path);
    snprintf(f->path, sizeof f->path, "%s", path);
    snprintf(f->tmp, sizeof f->tmp, "%s.tmp.%ld.%d", path, (long)getpid(), atomic_fetch_add(&g_seq, 1));
    f->fp = fopen(f->tmp, "wb");
    if (!f->fp) return DM_ERR(DM_ERR_IO, "%s: cannot create: %s", f->tmp, strerror(errno));
    return DM_OK;
}

int dm_atomic_finish(dm_atomic_file *f)
{
    int bad = ferror(f->fp);
    if (fflush(f->fp) != 0) bad = 1;
    if (!bad && fsync(fileno(f->fp)) != 0 && errno != EINVAL) bad = 1;
    int err = errno;
    if (fclose(f->fp) != 0) bad = 1;
    f->fp = NULL;
    if (bad) {
        unlink(f->tmp);
        return DM_ERR(DM_ERR_IO, "%s: write failed: %s", f->path, strerror(err));
    }
    return DM_OK;
}

int dm_atomic_place(dm_atomic_file *f)
{
    int rc = dm_rename_output(f->tmp, f->path);
    if (rc != DM_OK) unlink(f->tmp);
    return rc;
}

int dm_atomic_commit(dm_atomic_file *f)
{
    DM_TRY(dm_atomic_finish(f));
    return dm_atomic_place(f);
}

int dm_remove_leftover(const char *path)
{
    if (unlink(path) != 0)
        return DM_ERR(DM_ERR_IO, "%s: cannot remove this leftover of an earlier run: %s", path, strerror(errno));
    dm_log_warn("removed %s: a leftover of an earlier run with more ranks", path);
    return DM_OK;
}

/* What a file of this mode is, when it is not a regular file (NULL when it is). */
static const char *dm_not_regular(mode_t m)
{
    if (S_ISREG(m)) return NULL;
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
    return "a socket or other special file";
}

const char *dm_special_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && !S_ISDIR(st.st_mode) ? dm_not_regular(st.st_mode) : NULL;
}

int dm_rename_output(const char *tmp, const char *path)
{
    const char *kind = dm_special_file(path);
    if (kind)
        return DM_ERR(DM_ERR_IO, "%s: rename from temporary failed: not a regular file (%s, which the rename would "
                      "replace): name a regular file", path, kind);
    if (rename(tmp, path) != 0) return DM_ERR(DM_ERR_IO, "%s: rename from temporary failed: %s", path, strerror(errno));
    return DM_OK;
}

void dm_atomic_abort(dm_atomic_file *f)
{
    if (f->fp) fclose(f->fp);
    f->fp = NULL;
    if (f->tmp[0]) unlink(f->tmp);
}

int dm_write_file_atomic(const char *path, const void *data, size_t n)
{
    dm_atomic_file f;
    DM_TRY(dm_atomic_open(&f, path));
    if (n && fwrite(data, 1, n, f.fp) != n) {
        int err = errno;
        dm_atomic_abort(&f);
        return DM_ERR(DM_ERR_IO, "%s: write failed: %s", path, strerror(err));
    }
    return dm_atomic_commit(&f);
}

void dm_fput_tsv_field(FILE *f, const char *s)
{
    for (; *s; s++) fputc(*s == '\t' || *s == '\n' || *s == '\r' ? ' ' : *s, f);
}

int dm_mkdirs(const char *path)
{
    char buf[4096];
    if (strlen(path) >= sizeof buf) return DM_ERR(DM_ERR_INVALID_ARG, "%s: path too long", path);
    strcpy(buf, path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return DM_ERR(DM_ERR_IO, "%s: cannot create directory: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return DM_ERR(DM_ERR_IO, "%s: cannot create directory: %s", buf, strerror(errno));
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
        return DM_ERR(DM_ERR_IO, "%s: exists and is not a directory", buf);
    return DM_OK;
}

int dm_mkdirs_parent(const char *path)
{
    char dir[4096];
    if (strlen(path) >= sizeof dir) return DM_ERR(DM_ERR_INVALID_ARG, "%s: path too long", path);
    strcpy(dir, path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return DM_OK;
    *slash = '\0';
    return dm_mkdirs(dir);
}

int dm_open_input(FILE **f, const char *path, const char *what)
{
    const char *sep = what ? " " : "";
    what = what ? what : "";
    *f = NULL;
    /* O_NONBLOCK: opening a FIFO without a writer returns at once (fstat then refuses it) */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return DM_ERR(DM_ERR_IO, "%s%s%s: %s", what, sep, path, strerror(errno));
    struct stat sb;
    int err = fstat(fd, &sb) != 0 ? errno : 0;
    const char *kind = err ? NULL : dm_not_regular(sb.st_mode);
    if (!err && !kind && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) err = errno;
    if (!err && !kind && !(*f = fdopen(fd, "rb"))) err = errno;
    if (!err && !kind) return DM_OK;
    close(fd);
    if (kind) return DM_ERR(DM_ERR_IO, "%s%s%s: not a regular file (%s)", what, sep, path, kind);
    return DM_ERR(DM_ERR_IO, "%s%s%s: %s", what, sep, path, strerror(err));
}
