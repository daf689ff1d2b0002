/* The host data of tuning workloads kept between their inputs (wl_cache.h): a small table of
 * entries keyed by (kind, n, seed), least recently used dropped first while the kept bytes
 * exceed the budget. Reference: none (the builders' uncached definitions are). */
#include "common/tune/wl_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/status.h"

enum { WL_MAX = 32, WL_KIND = 48 };

typedef struct wl_entry {
    int used;        /* the slot holds an entry */
    char kind[WL_KIND];
    size_t n;
    uint64_t seed;
    dm_wl_host h;
    int refs;        /* lent and not returned */
    int doomed;      /* dropped when the last lender returns it */
    uint64_t last;   /* tick of its last lending */
} wl_entry;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static wl_entry g_e[WL_MAX];
static size_t g_bytes, g_budget;
static int g_budget_set;
static uint64_t g_tick, g_builds, g_hits;

static void budget_init(void)
{
    if (g_budget_set) return;
    g_budget_set = 1;
    g_budget = (size_t)1 << 30;
    const char *e = getenv("DOCMINE_TUNE_CACHE_MB");
    if (e && *e) {
        char *end = NULL;
        unsigned long long mb = strtoull(e, &end, 10);
        if (end && *end == '\0' && mb < ((unsigned long long)1 << 40)) g_budget = (size_t)mb << 20;
        else dm_log_warn("DOCMINE_TUNE_CACHE_MB=%s: not a number of megabytes; keeping 1024", e);
    }
}

static void drop(wl_entry *e)
{
    if (e->h.drop) e->h.drop(e->h.data);
    else dm_free(e->h.data);
    g_bytes -= e->h.bytes;
    memset(e, 0, sizeof *e);
}

/* Drops unlent entries, least recently used first, until the kept bytes fit the budget; `keep`
 * (may be NULL) is not dropped. */
static void fit(const wl_entry *keep)
{
    while (g_bytes > g_budget) {
        wl_entry *v = NULL;
        for (int i = 0; i < WL_MAX; i++)
            if (g_e[i].used && g_e[i].refs == 0 && &g_e[i] != keep && (!v || g_e[i].last < v->last)) v = &g_e[i];
        if (!v) return;
        drop(v);
    }
}

int dm_wl_cache_get(const char *kind, size_t n, uint64_t seed, dm_wl_build_fn *build, const void *arg, void **data)
{
    *data = NULL;
    if (strlen(kind) >= WL_KIND) return DM_ERR(DM_ERR_INVALID_ARG, "tuning cache: kind '%s' too long", kind);
    pthread_mutex_lock(&g_lock);
    budget_init();
    for (int i = 0; i < WL_MAX; i++) {
        wl_entry *e = &g_e[i];
        if (e->used && !e->doomed && e->n == n && e->seed == seed && strcmp(e->kind, kind) == 0) {
            e->refs++;
            e->last = ++g_tick;
            g_hits++;
            *data = e->h.data;
            pthread_mutex_unlock(&g_lock);
            return DM_OK;
        }
    }
    /* a slot first (an unlent entry makes room when every slot is taken), then the build */
    wl_entry *slot = NULL;
    for (int i = 0; i < WL_MAX && !slot; i++)
        if (!g_e[i].used) slot = &g_e[i];
    if (!slot) {
        for (int i = 0; i < WL_MAX; i++)
            if (g_e[i].refs == 0 && (!slot || g_e[i].last < slot->last)) slot = &g_e[i];
        if (slot) drop(slot);
    }
    if (!slot) {
        pthread_mutex_unlock(&g_lock);
        return DM_ERR(DM_ERR_NOMEM, "tuning cache: all %d entries are in use", WL_MAX);
    }
    dm_wl_host h = {NULL, 0, NULL};
    int rc = build(&h, n, seed, arg);
    if (rc != DM_OK) {
        pthread_mutex_unlock(&g_lock);
        return rc;
    }
    g_builds++;
    memset(slot, 0, sizeof *slot);
    slot->used = 1;
    strcpy(slot->kind, kind);
    slot->n = n;
    slot->seed = seed;
    slot->h = h;
    slot->refs = 1;
    slot->last = ++g_tick;
    g_bytes += h.bytes;
    fit(slot);
    if (h.bytes > g_budget) slot->doomed = 1; /* it alone does not fit: lent once, then dropped */
    *data = h.data;
    pthread_mutex_unlock(&g_lock);
    return DM_OK;
}

void dm_wl_cache_put(void *data)
{
    if (!data) return;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < WL_MAX; i++) {
        wl_entry *e = &g_e[i];
        if (!e->used || e->h.data != data || e->refs == 0) continue;
        if (--e->refs == 0) {
            if (e->doomed) drop(e);
            else fit(NULL);
        }
        break;
    }
    pthread_mutex_unlock(&g_lock);
}

void dm_wl_cache_clear(void)
{
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < WL_MAX; i++) {
        if (!g_e[i].used) continue;
        if (g_e[i].refs == 0) drop(&g_e[i]);
        else g_e[i].doomed = 1;
    }
    pthread_mutex_unlock(&g_lock);
}

size_t dm_wl_cache_set_budget(size_t bytes)
{
    pthread_mutex_lock(&g_lock);
    budget_init();
    size_t old = g_budget;
    g_budget = bytes;
    fit(NULL);
    pthread_mutex_unlock(&g_lock);
    return old;
}

void dm_wl_cache_get_stats(dm_wl_cache_stats *s)
{
    pthread_mutex_lock(&g_lock);
    s->builds = g_builds;
    s->hits = g_hits;
    s->bytes = g_bytes;
    s->entries = 0;
    for (int i = 0; i < WL_MAX; i++) s->entries += g_e[i].used;
    pthread_mutex_unlock(&g_lock);
}
