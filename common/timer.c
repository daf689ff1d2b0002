/* Named timers and counters and their reduction over ranks (common/timer.h). Reference: none. */
#include "common/timer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/context.h"
#include "common/log.h"
#include "common/status.h"

#define DM_MAX_ENTRIES 256

typedef struct {
    char name[64];
    int is_counter;
    double total;   /* seconds, or the count for counters */
    double started; /* wall time at start, < 0 when stopped */
    int64_t calls;
} entry;

static entry g_e[DM_MAX_ENTRIES];
static int g_n;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static entry *lookup(const char *name, int is_counter)
{
    pthread_mutex_lock(&g_lock);
    entry *e = NULL;
    for (int i = 0; i < g_n; i++)
        if (g_e[i].is_counter == is_counter && strcmp(g_e[i].name, name) == 0) {
            e = &g_e[i];
            break;
        }
    if (!e && g_n < DM_MAX_ENTRIES) {
        e = &g_e[g_n++];
        memset(e, 0, sizeof *e);
        strncpy(e->name, name, sizeof e->name - 1);
        e->is_counter = is_counter;
        e->started = -1;
    }
    pthread_mutex_unlock(&g_lock);
    DM_ASSERT(e != NULL); /* more than DM_MAX_ENTRIES distinct names is a programming error */
    return e;
}

void dm_timer_start(const char *name) { lookup(name, 0)->started = dm_wtime(); }

void dm_timer_stop(const char *name)
{
    entry *e = lookup(name, 0);
    if (e->started < 0) {
        dm_log_warn("timer '%s' stopped without being started", name);
        return;
    }
    e->total += dm_wtime() - e->started;
    e->started = -1;
    e->calls++;
}

void dm_timer_add(const char *name, double seconds)
{
    entry *e = lookup(name, 0);
    pthread_mutex_lock(&g_lock);
    e->total += seconds;
    e->calls++;
    pthread_mutex_unlock(&g_lock);
}

double dm_timer_get(const char *name) { return lookup(name, 0)->total; }

void dm_counter_add(const char *name, int64_t n)
{
    entry *e = lookup(name, 1);
    pthread_mutex_lock(&g_lock);
    e->total += (double)n;
    e->calls++;
    pthread_mutex_unlock(&g_lock);
}

int64_t dm_counter_get(const char *name) { return (int64_t)lookup(name, 1)->total; }

void dm_timers_reset(void)
{
    pthread_mutex_lock(&g_lock);
    g_n = 0;
    pthread_mutex_unlock(&g_lock);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int dm_stats_reduce(dm_stat **out, int *n, MPI_Comm comm, int is_counter)
{
    *out = NULL;
    *n = 0;
    int size;
    MPI_Comm_size(comm, &size);
    /* 1. every rank's names, packed as NUL-terminated strings, gathered everywhere */
    char mine[DM_MAX_ENTRIES * 64];
    int len = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_n; i++) {
        if (g_e[i].is_counter != is_counter) continue;
        size_t l = strlen(g_e[i].name) + 1;
        memcpy(mine + len, g_e[i].name, l);
        len += (int)l;
    }
    pthread_mutex_unlock(&g_lock);
    /* every allocation's failure is agreed before the next collective: a rank that returned
     * alone would leave the others waiting in it */
    int *lens = dm_malloc(sizeof(int) * (size_t)size * 2);
    int rc = dm_comm_agree(comm, lens ? DM_OK : DM_ERR(DM_ERR_NOMEM, "timers: out of memory"));
    if (rc < 0) {
        dm_free(lens);
        return rc;
    }
    int *displs = lens + size;
    if (MPI_Allgather(&len, 1, MPI_INT, lens, 1, MPI_INT, comm) != MPI_SUCCESS) {
        dm_free(lens);
        return DM_ERR(DM_ERR_MPI, "MPI_Allgather of timer names failed");
    }
    int total = 0;
    for (int r = 0; r < size; r++) {
        displs[r] = total;
        total += lens[r];
    }
    char *all = dm_malloc((size_t)total + 1);
    const char **names = dm_malloc(sizeof(char *) * ((size_t)total / 2 + 1));
    rc = dm_comm_agree(comm, all && names ? DM_OK : DM_ERR(DM_ERR_NOMEM, "timers: out of memory"));
    if (rc < 0) {
        dm_free(lens);
        dm_free(all);
        dm_free(names);
        return rc;
    }
    rc = MPI_Allgatherv(mine, len, MPI_CHAR, all, lens, displs, MPI_CHAR, comm);
    dm_free(lens);
    if (rc != MPI_SUCCESS) {
        dm_free(all);
        dm_free(names);
        return DM_ERR(DM_ERR_MPI, "MPI_Allgatherv of timer names failed");
    }
    /* 2. the sorted union */
    int nn = 0;
    for (int off = 0; off < total; off += (int)strlen(all + off) + 1) names[nn++] = all + off;
    qsort(names, (size_t)nn, sizeof *names, cmp_name);
    int u = 0;
    for (int i = 0; i < nn; i++)
        if (u == 0 || strcmp(names[u - 1], names[i]) != 0) names[u++] = names[i];
    /* 3. reduce values in union order */
    dm_stat *st = dm_calloc((size_t)(u ? u : 1), sizeof *st);
    double *v = dm_malloc(sizeof(double) * (size_t)(u ? u : 1) * 4);
    int64_t *calls = dm_calloc((size_t)(u ? u : 1), sizeof *calls);
    rc = dm_comm_agree(comm, st && v && calls ? DM_OK : DM_ERR(DM_ERR_NOMEM, "timers: out of memory"));
    if (rc < 0) {
        dm_free(all);
        dm_free(names);
        dm_free(st);
        dm_free(v);
        dm_free(calls);
        return rc;
    }
    double *mn = v + u, *mx = v + 2 * u, *sm = v + 3 * u;
    for (int i = 0; i < u; i++) {
        entry *e = lookup(names[i], is_counter);
        v[i] = e->total;
        calls[i] = e->calls;
    }
    rc = MPI_Allreduce(v, mn, u, MPI_DOUBLE, MPI_MIN, comm);
    rc |= MPI_Allreduce(v, mx, u, MPI_DOUBLE, MPI_MAX, comm);
    rc |= MPI_Allreduce(v, sm, u, MPI_DOUBLE, MPI_SUM, comm);
    rc |= MPI_Allreduce(MPI_IN_PLACE, calls, u, MPI_INT64_T, MPI_SUM, comm);
    for (int i = 0; i < u; i++) {
        strncpy(st[i].name, names[i], sizeof st[i].name - 1);
        st[i].min = mn[i];
        st[i].max = mx[i];
        st[i].sum = sm[i];
        st[i].avg = sm[i] / size;
        st[i].calls = calls[i];
    }
    dm_free(all);
    dm_free(names);
    dm_free(v);
    dm_free(calls);
    if (rc != MPI_SUCCESS) {
        dm_free(st);
        return DM_ERR(DM_ERR_MPI, "MPI_Allreduce of timers failed");
    }
    *out = st;
    *n = u;
    return DM_OK;
}
