/* The tuner's registry and instance selection (common/tune/tune.h), first version: registered
 * kernels run their declared default instance. Reference: the default instance of each kernel. */
#include "common/tune/tune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"

#define DM_TUNE_MAX_KERNELS 128

static const dm_tune_kernel *g_kernels[DM_TUNE_MAX_KERNELS];
static int g_nkernels;
static int g_mode = DM_TUNE_MSP;

int dm_tune_register(const dm_tune_kernel *k)
{
    if (!k || !k->name || !k->instances || k->n_instances < 1 || k->default_instance < 0 ||
        k->default_instance >= k->n_instances)
        return DM_ERR(DM_ERR_INVALID_ARG, "tuner: kernel '%s' declares no valid default instance",
                      k && k->name ? k->name : "?");
    for (int i = 0; i < g_nkernels; i++)
        if (g_kernels[i] == k) return DM_OK;
    if (g_nkernels == DM_TUNE_MAX_KERNELS)
        return DM_ERR(DM_ERR_NOMEM, "tuner: more than %d kernels", DM_TUNE_MAX_KERNELS);
    g_kernels[g_nkernels++] = k;
    return DM_OK;
}

int dm_tune_register_all(void) { return DM_OK; }
int dm_tune_kernel_count(void) { return g_nkernels; }
const dm_tune_kernel *dm_tune_kernel_at(int i) { return i >= 0 && i < g_nkernels ? g_kernels[i] : NULL; }

const dm_tune_kernel *dm_tune_kernel_find(const char *name)
{
    for (int i = 0; i < g_nkernels; i++)
        if (strcmp(g_kernels[i]->name, name) == 0) return g_kernels[i];
    return NULL;
}

const dm_tune_instance *dm_tune_select(const dm_tune_kernel *k, size_t n)
{
    (void)n;
    return &k->instances[k->default_instance];
}

const char *dm_layout_name(int layout)
{
    static const char *names[] = {"none", "aos", "soa", "tiled"};
    return layout >= 0 && layout <= DM_LAYOUT_TILED ? names[layout] : "?";
}

const char *dm_tune_policy_str(const dm_tune_policy *p, char *buf, size_t len)
{
    if (p->layout == DM_LAYOUT_TILED)
        snprintf(buf, len, "block=%d rake=%d %s layout=tiled:%d", p->block, p->rake,
                 p->strided ? "strided" : "consecutive", p->tile);
    else
        snprintf(buf, len, "block=%d rake=%d %s layout=%s", p->block, p->rake,
                 p->strided ? "strided" : "consecutive", dm_layout_name(p->layout));
    return buf;
}

int dm_tune_set_mode(int mode)
{
    if (mode < DM_TUNE_OFF || mode > DM_TUNE_EXHAUSTIVE)
        return DM_ERR(DM_ERR_INVALID_ARG, "unknown tuning mode %d", mode);
    g_mode = mode;
    return DM_OK;
}
int dm_tune_get_mode(void) { return g_mode; }

static const char *g_mode_names[] = {"off", "model", "msp", "exhaustive"};

const char *dm_tune_mode_name(int mode)
{
    return mode >= DM_TUNE_OFF && mode <= DM_TUNE_EXHAUSTIVE ? g_mode_names[mode] : "?";
}

int dm_tune_mode_parse(const char *s, int *mode)
{
    const char *const *names = g_mode_names;
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0) {
            *mode = i;
            return DM_OK;
        }
    return DM_ERR(DM_ERR_INVALID_ARG, "unknown tuning mode '%s' (expected off, model, msp or exhaustive)", s);
}

static char g_db_path[4096];

void dm_tune_set_db_path(const char *path) { snprintf(g_db_path, sizeof g_db_path, "%s", path ? path : ""); }

const char *dm_tune_db_path(void)
{
    static char buf[4096];
    if (g_db_path[0]) return g_db_path;
    const char *e = getenv("DOCMINE_TUNING_DB");
    if (e && *e) return e;
    const char *x = getenv("XDG_CACHE_HOME");
    if (x && *x) snprintf(buf, sizeof buf, "%s/docmine/tuning.tsv", x);
    else snprintf(buf, sizeof buf, "%s/.cache/docmine/tuning.tsv", getenv("HOME") ? getenv("HOME") : ".");
    return buf;
}
