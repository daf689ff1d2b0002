/* The kernel registry, the tuning mode, the process-wide configuration and dm_tune_select: cache
 * -> tuning database -> embedded tuning (one process per key, node-local rank 0 preferred, the
 * others wait and read). Reference: the declared default instance (mode off). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/status.h"
#include "common/timer.h"
#include "common/tune/tune.h"
#include "common/tune/tune_db.h"
#include "common/tune/tune_gpu.h"
#include "common/tune/tune_internal.h"
#include "common/tune/tune_model.h"

enum { DM_TUNE_MAX_KERNELS = 256, DM_TUNE_MAX_CACHE = 1024 };

/* ---- helpers ---------------------------------------------------------------------------------- */

void dm_tune_warn(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    dm_log_warn("tune: %s", msg);
}


static void sleep_s(double s)
{
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* ---- registry ----------------------------------------------------------------------------------- */

static int policy_equal(const dm_tune_policy *a, const dm_tune_policy *b)
{
    return a->block == b->block && a->rake == b->rake && a->strided == b->strided &&
           a->layout == b->layout && a->tile == b->tile;
}

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static const dm_tune_kernel *g_kernels[DM_TUNE_MAX_KERNELS];
static int g_n_kernels;

int dm_tune_register(const dm_tune_kernel *k)
{
    if (!k || !k->name || !k->name[0] || !k->instances || k->n_instances < 1 ||
        k->default_instance < 0 || k->default_instance >= k->n_instances)
        return DM_ERR(DM_ERR_INVALID_ARG, "tune: kernel %s: name, instances and default required",
                      k && k->name ? k->name : "(null)");
    /* the name is the database's key: one that does not fit its field (or holds a tab or another
     * control character, which the database turns into a space) would be stored as another name
     * and never found again: every process would tune it again */
    int plain = 1;
    for (const char *c = k->name; *c; c++) plain &= (unsigned char)*c >= 0x20 && *c != 0x7f;
    if (!plain || strlen(k->name) >= sizeof(((dm_tune_db_row *)0)->kernel))
        return DM_ERR(DM_ERR_INVALID_ARG, "tune: kernel name '%s': at most %zu bytes and no control "
                      "characters (the tuning database's key)", k->name,
                      sizeof(((dm_tune_db_row *)0)->kernel) - 1);
    for (int i = 0; i < k->n_instances; i++) {
        const dm_tune_instance *in = &k->instances[i];
        const dm_tune_policy *p = &in->policy;
        if (!in->launch)
            return DM_ERR(DM_ERR_INVALID_ARG, "tune: kernel %s: instance %d has no launcher",
                          k->name, i);
        /* the validity rule of a space: threads a multiple of 32 and <= 1024, rake >= 1, a known
         * layout, a tile size exactly for the tiled layout (shared memory is checked against the
         * device by the model) */
        if (p->block < 32 || p->block > 1024 || p->block % 32 || p->rake < 1 ||
            p->strided < 0 || p->strided > 1 || p->layout < DM_LAYOUT_NONE ||
            p->layout > DM_LAYOUT_TILED || (p->layout == DM_LAYOUT_TILED) != (p->tile > 0))
            return DM_ERR(DM_ERR_INVALID_ARG, "tune: kernel %s: instance %d has an invalid policy "
                          "(block %d, rake %d, strided %d, layout %d, tile %d)",
                          k->name, i, p->block, p->rake, p->strided, p->layout, p->tile);
        for (int j = 0; j < i; j++)
            if (policy_equal(&k->instances[j].policy, p))
                return DM_ERR(DM_ERR_INVALID_ARG, "tune: kernel %s: instances %d and %d have the "
                              "same policy", k->name, j, i);
    }
    pthread_mutex_lock(&g_lock);
    int rc = DM_OK;
    for (int i = 0; i < g_n_kernels; i++) {
        if (g_kernels[i] == k) goto out; /* registering twice is harmless */
        if (!strcmp(g_kernels[i]->name, k->name)) {
            rc = DM_ERR(DM_ERR_INVALID_ARG, "tune: two kernels named %s", k->name);
            goto out;
        }
    }
    if (g_n_kernels == DM_TUNE_MAX_KERNELS) rc = DM_ERR(DM_ERR_NOMEM, "tune: registry full");
    else g_kernels[g_n_kernels++] = k;
out:
    pthread_mutex_unlock(&g_lock);
    return rc;
}

int dm_tune_kernel_count(void)
{
    pthread_mutex_lock(&g_lock);
    int n = g_n_kernels;
    pthread_mutex_unlock(&g_lock);
    return n;
}

const dm_tune_kernel *dm_tune_kernel_at(int i)
{
    const dm_tune_kernel *k = NULL;
    pthread_mutex_lock(&g_lock);
    if (i >= 0 && i < g_n_kernels) k = g_kernels[i];
    pthread_mutex_unlock(&g_lock);
    return k;
}

const dm_tune_kernel *dm_tune_kernel_find(const char *name)
{
    const dm_tune_kernel *k = NULL;
    if (!name) return NULL;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_n_kernels && !k; i++)
        if (!strcmp(g_kernels[i]->name, name)) k = g_kernels[i];
    pthread_mutex_unlock(&g_lock);
    return k;
}

/* ---- names ----------------------------------------------------------------------------------- */

const char *dm_layout_name(int layout)
{
    switch (layout) {
    case DM_LAYOUT_NONE: return "none";
    case DM_LAYOUT_AOS: return "aos";
    case DM_LAYOUT_SOA: return "soa";
    case DM_LAYOUT_TILED: return "tiled";
    default: return "?";
    }
}

const char *dm_tune_policy_str(const dm_tune_policy *p, char *buf, size_t len)
{
    if (!buf || len == 0) return "";
    if (!p) snprintf(buf, len, "(none)");
    else if (p->layout == DM_LAYOUT_TILED)
        snprintf(buf, len, "block=%d rake=%d %s layout=tiled:%d", p->block, p->rake,
                 p->strided ? "strided" : "consecutive", p->tile);
    else
        snprintf(buf, len, "block=%d rake=%d %s layout=%s", p->block, p->rake,
                 p->strided ? "strided" : "consecutive", dm_layout_name(p->layout));
    return buf;
}

static const char *const g_mode_names[] = {"off", "model", "msp", "exhaustive"};

const char *dm_tune_mode_name(int mode)
{
    return mode >= DM_TUNE_OFF && mode <= DM_TUNE_EXHAUSTIVE ? g_mode_names[mode] : "?";
}

int dm_tune_mode_parse(const char *s, int *mode)
{
    if (!s || !mode) return DM_ERR_INVALID_ARG;
    for (int m = DM_TUNE_OFF; m <= DM_TUNE_EXHAUSTIVE; m++)
        if (!strcmp(s, g_mode_names[m])) {
            *mode = m;
            return DM_OK;
        }
    return DM_ERR(DM_ERR_INVALID_ARG, "unknown tuning mode '%s' (off, model, msp, exhaustive)", s);
}

int dm_tune_workload_class(size_t n)
{
    int c = 0;
    while (n > 1) {
        n >>= 1;
        c++;
    }
    return c;
}

/* ---- configuration ---------------------------------------------------------------------------- */

static int g_mode = -1; /* -1: not set, read DOCMINE_TUNE */
static int g_local_rank = -1; /* -1: not set, read from the launcher's environment */
static char g_db_override[PATH_MAX];

int dm_tune_set_mode(int mode)
{
    if (mode < DM_TUNE_OFF || mode > DM_TUNE_EXHAUSTIVE)
        return DM_ERR(DM_ERR_INVALID_ARG, "tune: bad mode %d", mode);
    pthread_mutex_lock(&g_lock);
    g_mode = mode;
    pthread_mutex_unlock(&g_lock);
    dm_tune_cache_clear();
    return DM_OK;
}

int dm_tune_get_mode(void)
{
    pthread_mutex_lock(&g_lock);
    if (g_mode < 0) {
        const char *env = getenv("DOCMINE_TUNE");
        int m = DM_TUNE_MSP;
        if (env && env[0] && dm_tune_mode_parse(env, &m) != DM_OK) {
            dm_tune_warn("DOCMINE_TUNE='%s' is not a mode (off, model, msp, exhaustive); using msp",
                         env);
            m = DM_TUNE_MSP;
        }
        g_mode = m;
    }
    int mode = g_mode;
    pthread_mutex_unlock(&g_lock);
    return mode;
}

int dm_tune_configure(int mode, const char *db_path, int local_rank)
{
    if (db_path && strlen(db_path) >= sizeof g_db_override)
        return DM_ERR(DM_ERR_INVALID_ARG, "tune: database path too long");
    DM_TRY(dm_tune_set_mode(mode));
    if (db_path) dm_tune_set_db_path(db_path);
    pthread_mutex_lock(&g_lock);
    g_local_rank = local_rank;
    pthread_mutex_unlock(&g_lock);
    dm_tune_cache_clear();
    return DM_OK;
}

void dm_tune_set_local_rank(int local_rank)
{
    pthread_mutex_lock(&g_lock);
    g_local_rank = local_rank < 0 ? -1 : local_rank;
    pthread_mutex_unlock(&g_lock);
}

int dm_tune_get_local_rank(void)
{
    pthread_mutex_lock(&g_lock);
    int r = g_local_rank;
    pthread_mutex_unlock(&g_lock);
    if (r >= 0) return r;
    /* not set by dm_ctx: the node-local rank the launcher exports, else 0 */
    static const char *const vars[] = {"SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK",
                                       "MPI_LOCALRANKID", "PMI_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long x;
        if (v && v[0] && (x = strtol(v, &end, 10)) >= 0 && !*end && x < 1 << 20) return (int)x;
    }
    return 0;
}

void dm_tune_set_db_path(const char *path)
{
    pthread_mutex_lock(&g_lock);
    snprintf(g_db_override, sizeof g_db_override, "%s", path ? path : "");
    pthread_mutex_unlock(&g_lock);
    dm_tune_cache_clear();
}

/* The resolved path into buf. */
static int db_path_into(char *buf, size_t len)
{
    char over[PATH_MAX];
    pthread_mutex_lock(&g_lock);
    snprintf(over, sizeof over, "%s", g_db_override);
    pthread_mutex_unlock(&g_lock);
    return dm_tune_db_resolve_path(buf, len, over);
}

int dm_tune_db_current_path(char *buf, size_t len) { return db_path_into(buf, len); }

const char *dm_tune_db_path(void)
{
    static char buf[PATH_MAX];
    if (db_path_into(buf, sizeof buf) != DM_OK) snprintf(buf, sizeof buf, "./tuning.tsv");
    return buf;
}

/* ---- selection cache and database ------------------------------------------------------------- */

typedef struct cache_entry {
    const dm_tune_kernel *k;
    int wclass, mode;
    int inst;
} cache_entry;

static cache_entry g_cache[DM_TUNE_MAX_CACHE];
static int g_n_cache;
static dm_tune_db g_db;
static int g_db_loaded;
static int g_db_bad; /* the last load failed (unreadable, a directory, another format version) */
static struct stat g_db_stat;
static char g_db_loaded_path[PATH_MAX];
static int g_gpu_known; /* 0 unknown, 1 known, -1 none */
static dm_tune_gpu g_gpu;
static _Thread_local int t_tuning; /* select called while this thread tunes: no nested tuning */

void dm_tune_cache_clear(void)
{
    pthread_mutex_lock(&g_lock);
    g_n_cache = 0;
    g_db_loaded = 0;
    pthread_mutex_unlock(&g_lock);
}

int dm_tune_selections(dm_tune_selection *out, int max)
{
    pthread_mutex_lock(&g_lock);
    int n = g_n_cache;
    for (int i = 0; i < n && i < max; i++)
        out[i] = (dm_tune_selection){g_cache[i].k, g_cache[i].wclass, g_cache[i].mode,
                                     &g_cache[i].k->instances[g_cache[i].inst]};
    pthread_mutex_unlock(&g_lock);
    return n;
}

static int cache_find(const dm_tune_kernel *k, int wc, int mode)
{
    for (int i = 0; i < g_n_cache; i++)
        if (g_cache[i].k == k && g_cache[i].wclass == wc && g_cache[i].mode == mode)
            return g_cache[i].inst;
    return -1;
}

static void cache_put(const dm_tune_kernel *k, int wc, int mode, int inst)
{
    if (g_n_cache == DM_TUNE_MAX_CACHE) g_n_cache = 0; /* rare: start over */
    g_cache[g_n_cache++] = (cache_entry){k, wc, mode, inst};
}

/* Reloads the database when the file changed since the last load (called with g_lock held). */
static void db_refresh(const char *path)
{
    struct stat st;
    int exists = stat(path, &st) == 0;
    if (g_db_loaded && !strcmp(g_db_loaded_path, path)) {
        if (!exists && g_db.n == 0) return;
        if (exists && st.st_mtim.tv_sec == g_db_stat.st_mtim.tv_sec &&
            st.st_mtim.tv_nsec == g_db_stat.st_mtim.tv_nsec && st.st_ino == g_db_stat.st_ino &&
            st.st_size == g_db_stat.st_size)
            return;
    }
    g_db_bad = 0;
    if (dm_tune_db_load(&g_db, path) != DM_OK) {
        dm_tune_warn("%s; the kernels' defaults are used, nothing is tuned", dm_error_message());
        g_db.n = 0;
        g_db_bad = 1;
    }
    g_db_loaded = 1;
    snprintf(g_db_loaded_path, sizeof g_db_loaded_path, "%s", path);
    if (exists) g_db_stat = st;
    else memset(&g_db_stat, 0, sizeof g_db_stat);
}

/* Instance of k with policy p, or -1. */
static int instance_of(const dm_tune_kernel *k, const dm_tune_policy *p)
{
    for (int i = 0; i < k->n_instances; i++)
        if (policy_equal(&k->instances[i].policy, p)) return i;
    return -1;
}

static int row_instance(const dm_tune_kernel *k, const dm_tune_db_row *row)
{
    int i = instance_of(k, &row->policy);
    if (i < 0) {
        char buf[128];
        dm_tune_warn("%s: tuned policy %s is not compiled in this build; using the default",
                     k->name, dm_tune_policy_str(&row->policy, buf, sizeof buf));
        i = k->default_instance;
    }
    return i;
}

static int tune_store_class(dm_tune_result *res, const dm_tune_kernel *k, size_t n,
                            const dm_tune_options *opt, int wc, int *ran);

static int has_bench(const dm_tune_kernel *k)
{
    return k->bench_create && k->bench_run && k->bench_output && k->bench_destroy;
}

/* The model's best predicted instance for n work units (no timing, no output check). */
static int model_choice(const dm_tune_kernel *k, size_t n, const dm_tune_gpu *gpu)
{
    int ni = k->n_instances, best = k->default_instance;
    dm_tune_attr *attr = calloc((size_t)ni, sizeof *attr);
    dm_tune_cand *cand = calloc((size_t)ni, sizeof *cand);
    int *order = calloc((size_t)ni, sizeof *order);
    if (attr && cand && order) {
        int ok = 1;
        for (int i = 0; i < ni && ok; i++) ok = dm_tune_gpu_attributes(&attr[i], &k->instances[i]) == DM_OK;
        double wpi = k->work_per_item > 0 ? k->work_per_item : 1.0;
        if (ok && dm_tune_model_prune(cand, k->instances, attr, ni, &gpu->limits, (double)n / wpi) > 0) {
            dm_tune_model_order(order, cand, ni, NULL);
            best = order[0];
        }
    }
    free(attr);
    free(cand);
    free(order);
    return best;
}

/* Takes the per-key tuning lock: an exclusive flock on a lock file, which the kernel releases
 * when the holder exits or dies, so a crashed or killed tuner never leaves the others waiting.
 * Returns 1 with *fd_out holding the lock, 0 when another process holds it, -1 on error. The file
 * itself stays (unlinking it would race with a process that has just opened it). */
static int key_lock_take(const char *lock, int *fd_out)
{
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
        char pid[32];
        int w = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) == 0 && write(fd, pid, (size_t)w) < 0) {} /* informative only */
        *fd_out = fd;
        return 1;
    }
    int e = errno;
    close(fd);
    errno = e;
    return e == EWOULDBLOCK ? 0 : -1;
}

static void key_lock_release(int fd)
{
    flock(fd, LOCK_UN);
    close(fd);
}

/* The usable row's instance for (k, gpu, wc) under mode, or -1 (reloads the database). */
static int db_lookup(const dm_tune_kernel *k, const dm_tune_gpu *gpu, int wc, int mode,
                     const char *db)
{
    pthread_mutex_lock(&g_lock);
    db_refresh(db);
    const dm_tune_db_row *row = dm_tune_db_find(&g_db, k->name, gpu->name, gpu->cc, wc);
    int inst = row && row->mode >= mode ? row_instance(k, row) : -1;
    pthread_mutex_unlock(&g_lock);
    return inst;
}

/* Tunes and stores the entry for (k, wc) or waits for another process to do it. Called without
 * g_lock. Returns the instance index. */
static int tune_or_wait(const dm_tune_kernel *k, size_t n, int wc, int mode, const dm_tune_gpu *gpu,
                        const char *db)
{
    char lock[PATH_MAX + 64];
    dm_tune_db_key_lock_path(lock, sizeof lock, db, k->name, gpu->name, gpu->cc, wc);
    if (dm_tune_db_mkdirs(db) != DM_OK) {
        dm_tune_warn("%s", dm_error_message());
        return k->default_instance;
    }
    int local_rank = dm_tune_get_local_rank();
    /* node-local rank 0 goes first; the others give it a moment to take the key */
    if (local_rank > 0) sleep_s(0.2 + 0.01 * (local_rank < 50 ? local_rank : 50));
    double wait_max = 600.0;
    const char *w = getenv("DOCMINE_TUNE_WAIT");
    if (w && atof(w) > 0) wait_max = atof(w);
    double t0 = dm_wtime();
    for (;;) {
        int inst = db_lookup(k, gpu, wc, mode, db);
        if (inst >= 0) return inst;
        int lock_fd = -1;
        int got = key_lock_take(lock, &lock_fd);
        if (got < 0) {
            dm_tune_warn("cannot create %s (%s); using the default of %s", lock, strerror(errno),
                         k->name);
            return k->default_instance;
        }
        if (got == 1) {
            /* another process may have stored the row between the lookup and the lock */
            inst = db_lookup(k, gpu, wc, mode, db);
            if (inst >= 0) {
                key_lock_release(lock_fd);
                return inst;
            }
            dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
            opt.mode = mode;
            dm_tune_result res;
            int ran = 0;
            int rc = tune_store_class(&res, k, n, &opt, wc, &ran);
            key_lock_release(lock_fd);
            if (rc != DM_OK && ran) {
                /* the choice is this process's; the other processes cannot read it and tune again */
                dm_tune_warn("tuned %s but could not store the choice (%s); this process uses it", k->name,
                             dm_error_message());
                return res.chosen >= 0 && res.chosen < k->n_instances ? res.chosen : k->default_instance;
            }
            if (rc != DM_OK) {
                dm_tune_warn("tuning %s failed (%s); using the default", k->name, dm_error_message());
                return k->default_instance;
            }
            return res.chosen;
        }
        if (dm_wtime() - t0 > wait_max) {
            dm_tune_warn("waited %.0f s for another process to tune %s; using the default", wait_max,
                         k->name);
            return k->default_instance;
        }
        sleep_s(0.2);
    }
}

/* Whether instance i of k can run on gpu as far as the occupancy model can tell (its attributes:
 * shared memory within the per-block limit, block within the function's maximum, a block fits on
 * an SM). A database row is keyed by the GPU model, not by the build: a row written by another
 * build of the kernels (another docmine version) may name an instance that needs more registers
 * or shared memory in this one and would fail to launch. 1 when it cannot tell. */
static int runs_here(const dm_tune_kernel *k, int i, const dm_tune_gpu *gpu)
{
    dm_tune_attr a;
    dm_tune_cand c;
    if (dm_tune_gpu_attributes(&a, &k->instances[i]) != DM_OK ||
        dm_tune_model_prune(&c, &k->instances[i], &a, 1, &gpu->limits, 1.0) < 0) {
        dm_error_clear();
        return 1;
    }
    if (c.valid) return 1;
    char buf[128];
    dm_tune_warn("%s: the tuned policy %s cannot run on %s in this build (%s); using the default",
                 k->name, dm_tune_policy_str(&k->instances[i].policy, buf, sizeof buf), gpu->name,
                 c.why);
    return 0;
}

void dm_tune_override_gpu(const dm_tune_gpu *gpu)
{
    pthread_mutex_lock(&g_lock);
    if (gpu) {
        g_gpu = *gpu;
        g_gpu_known = 1;
    } else {
        g_gpu_known = 0;
    }
    g_n_cache = 0;
    pthread_mutex_unlock(&g_lock);
}

const dm_tune_instance *dm_tune_select(const dm_tune_kernel *k, size_t n)
{
    if (!k || !k->instances || k->n_instances < 1) return NULL;
    int def = k->default_instance >= 0 && k->default_instance < k->n_instances ? k->default_instance : 0;
    int mode = dm_tune_get_mode();
    if (mode == DM_TUNE_OFF || k->n_instances == 1) return &k->instances[def];
    int wc = dm_tune_workload_class(n);
    char db[PATH_MAX];

    pthread_mutex_lock(&g_lock);
    int inst = cache_find(k, wc, mode);
    if (inst >= 0) {
        pthread_mutex_unlock(&g_lock);
        return &k->instances[inst];
    }
    if (g_gpu_known == 0) g_gpu_known = dm_tune_gpu_current(&g_gpu) == DM_OK ? 1 : -1;
    dm_tune_gpu gpu = g_gpu;
    int gpu_known = g_gpu_known;
    pthread_mutex_unlock(&g_lock);

    if (gpu_known < 0 || t_tuning) return &k->instances[def];
    if (mode == DM_TUNE_MODEL) {
        /* at the class's lower bound, as a tuned row is: the choice is a function of the class
         * (which the cache keys), not of whichever n of the class came first */
        inst = model_choice(k, (size_t)1 << wc, &gpu);
    } else if (db_path_into(db, sizeof db) != DM_OK) {
        dm_tune_warn("%s; not tuning", dm_error_message());
        inst = def;
    } else {
        pthread_mutex_lock(&g_lock);
        db_refresh(db);
        const dm_tune_db_row *row = dm_tune_db_find(&g_db, k->name, gpu.name, gpu.cc, wc);
        /* a row from a weaker search (model < msp < exhaustive) does not answer a stronger one,
         * unless the kernel cannot be tuned here (no bench hooks) */
        int weak = row ? row_instance(k, row) : def;
        inst = row && row->mode >= mode ? weak : -1;
        /* a database that cannot be read cannot be written either: tuning would be lost (and
         * repeated by every process) */
        int unusable = g_db_bad;
        pthread_mutex_unlock(&g_lock);
        if (inst < 0 && (!has_bench(k) || unusable)) inst = weak;
        if (inst < 0) {
            /* tune at the lower bound of the class (never above n), capped at the kernel's own
             * target size: beyond the saturation point the choice carries over, and the
             * tuning input must not compete with the application for memory */
            size_t tn = (size_t)1 << wc;
            size_t cap = k->bench_default_n > 0 ? k->bench_default_n : (size_t)1 << 20;
            if (tn > cap) tn = cap;
            t_tuning = 1;
            inst = tune_or_wait(k, tn, wc, mode, &gpu, db);
            t_tuning = 0;
        }
    }
    if (inst < 0 || inst >= k->n_instances) inst = def;
    if (inst != def && !runs_here(k, inst, &gpu)) inst = def;
    pthread_mutex_lock(&g_lock);
    cache_put(k, wc, mode, inst);
    pthread_mutex_unlock(&g_lock);
    return &k->instances[inst];
}

/* The most memory (host, pinned, device) one search used beyond what was allocated when it began,
 * over this process's searches. */
static size_t g_search_own[DM_MEM_KINDS];

void dm_tune_search_memory(size_t own[DM_MEM_KINDS])
{
    pthread_mutex_lock(&g_lock);
    for (int k = 0; k < DM_MEM_KINDS; k++) own[k] = g_search_own[k];
    pthread_mutex_unlock(&g_lock);
}

/* Tunes k at n and stores the row under workload class wc; *ran (when not NULL) says whether the
 * tuning itself succeeded (res holds its choice even when storing it failed). */
static int tune_store_class(dm_tune_result *res, const dm_tune_kernel *k, size_t n,
                            const dm_tune_options *opt, int wc, int *ran)
{
    if (ran) *ran = 0;
    dm_tune_result local;
    if (!res) res = &local;
    if (!k || !opt || n == 0) return DM_ERR(DM_ERR_INVALID_ARG, "tune: bad arguments");
    dm_tune_gpu gpu;
    DM_TRY(dm_tune_gpu_current(&gpu));
    char db[PATH_MAX];
    DM_TRY(db_path_into(db, sizeof db));
    int was = t_tuning;
    t_tuning = 1;
    double t0 = dm_wtime();
    dm_mem_phase mem;
    dm_mem_phase_begin(&mem);
    int rc = dm_tune_run(res, k, n, opt);
    dm_mem_phase_end(&mem);
    t_tuning = was;
    pthread_mutex_lock(&g_lock);
    for (int m = 0; m < DM_MEM_KINDS; m++)
        if (mem.peak[m] > mem.start[m] && mem.peak[m] - mem.start[m] > g_search_own[m])
            g_search_own[m] = mem.peak[m] - mem.start[m];
    pthread_mutex_unlock(&g_lock);
    DM_TRY(rc);
    if (ran) *ran = 1;
    /* what tuning cost this run (the report's timers): the whole, its timed search, its output
     * checks and the tuning inputs it created (the checks' own inputs are in both) */
    double total = dm_wtime() - t0;
    dm_timer_add("tune", total);
    dm_timer_add("tune.search", res->search_s);
    dm_timer_add("tune.checks", res->check_s);
    dm_timer_add("tune.inputs", res->inputs_s);
    dm_counter_add("tune.searches", 1);
    dm_log_debug("tune: %s at %zu %s (class %d): %s, %.2f s: search %.2f s, %d checks %.2f s, "
                "%d inputs created %.2f s", k->name, n, k->work_unit ? k->work_unit : "units", wc,
                res->chosen == res->default_instance ? "default kept" : "tuned", total,
                res->search_s, res->n_checks, res->check_s, res->n_inputs, res->inputs_s);
    if (opt->mode == DM_TUNE_OFF) return DM_OK; /* nothing learned */
    dm_tune_db_row row;
    memset(&row, 0, sizeof row);
    dm_tune_db_set_name(row.kernel, sizeof row.kernel, k->name);
    dm_tune_db_set_name(row.gpu, sizeof row.gpu, gpu.name);
    row.cc = gpu.cc;
    row.wclass = wc;
    row.policy = k->instances[res->chosen].policy;
    row.default_ms = res->default_ms;
    row.tuned_ms = res->tuned_ms;
    row.msp_n = res->msp_n;
    row.target_n = res->target_n;
    row.mode = opt->mode;
    row.unix_time = (long long)time(NULL);
    if (opt->mode == DM_TUNE_MODEL) {
        /* a model row (`docmine tune --mode model`) never replaces a measured one: the database
         * keeps one row a key, and selection tunes again past a model row */
        dm_tune_db old;
        dm_tune_db_init(&old);
        const dm_tune_db_row *o = dm_tune_db_load(&old, db) == DM_OK
                                      ? dm_tune_db_find(&old, row.kernel, row.gpu, row.cc, row.wclass)
                                      : NULL;
        /* (dm_tune_db_store decides it again under its lock: this only says so) */
        int measured = o && (o->mode == DM_TUNE_MSP || o->mode == DM_TUNE_EXHAUSTIVE);
        dm_tune_db_free(&old);
        dm_error_clear();
        if (measured) {
            dm_log_info("tune: %s (class %d): the database's measured row is kept, not replaced by the model's",
                        k->name, wc);
            return DM_OK;
        }
    }
    DM_TRY(dm_tune_db_store(db, &row, 1));
    pthread_mutex_lock(&g_lock);
    g_n_cache = 0;
    g_db_loaded = 0;
    pthread_mutex_unlock(&g_lock);
    return DM_OK;
}

int dm_tune_and_store(dm_tune_result *res, const dm_tune_kernel *k, size_t n,
                      const dm_tune_options *opt)
{
    return tune_store_class(res, k, n, opt, dm_tune_workload_class(n), NULL);
}
