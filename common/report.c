/* The JSON run report (common/report.h). Reference: none. */
#include "common/report.h"

#include <archive.h>
#include <inttypes.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>
#include <zlib.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/status.h"
#include "common/timer.h"
#include "common/tune/tune.h"

extern char **environ; /* POSIX: the process environment */

#ifndef DM_GIT_HASH
#define DM_GIT_HASH "unknown"
#endif

json_t *dm_json_u64(uint64_t v)
{
    if (v <= (uint64_t)INT64_MAX) return json_integer((json_int_t)v);
    char b[24];
    snprintf(b, sizeof b, "%" PRIu64, v);
    return json_string(b);
}

json_t *dm_json_text(const char *s)
{
    if (!s) return NULL;
    json_t *v = json_string(s);
    if (v) return v;
    size_t n = strlen(s);
    char *buf = dm_malloc(4 * n + 1);
    if (!buf) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) { /* not the start of a well-formed sequence: this byte alone, escaped */
            static const char hex[] = "0123456789ABCDEF";
            unsigned char b = (unsigned char)s[i++];
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[b >> 4];
            buf[o++] = hex[b & 15];
        } else {
            memcpy(buf + o, s + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
        }
    }
    buf[o] = 0;
    v = json_string(buf);
    dm_free(buf);
    return v;
}

int dm_report_init(dm_report *r, const char *command, int argc, char **argv)
{
    r->root = json_object();
    if (!r->root) return DM_ERR(DM_ERR_NOMEM, "cannot create the report");
    json_t *cl = json_array();
    for (int i = 0; i < argc; i++) json_array_append_new(cl, dm_json_text(argv[i]));
    char when[64];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    json_object_set_new(r->root, "command", json_string(command));
    json_object_set_new(r->root, "command_line", cl);
    json_object_set_new(r->root, "date", json_string(when));
    r->results = json_object();
    json_object_set_new(r->root, "results", r->results);
    return DM_OK;
}

void dm_report_free(dm_report *r)
{
    json_decref(r->root);
    r->root = r->results = NULL;
}

json_t *dm_report_memory_max(const dm_ctx *ctx, const size_t *bytes)
{
    double mine[DM_MEM_KINDS], most[DM_MEM_KINDS];
    for (int k = 0; k < DM_MEM_KINDS; k++) mine[k] = (double)bytes[k];
    if (MPI_Allreduce(mine, most, DM_MEM_KINDS, MPI_DOUBLE, MPI_MAX, ctx->world) != MPI_SUCCESS) return NULL;
    json_t *m = json_object();
    for (int k = 0; k < DM_MEM_KINDS; k++) json_object_set_new(m, dm_mem_kind_name(k), json_integer((json_int_t)most[k]));
    return m;
}

json_t *dm_report_versions(void)
{
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(mpi, &len);
    char *nl = strchr(mpi, '\n');
    if (nl) *nl = '\0';
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "docmine", DM_VERSION,
                     "git", DM_GIT_HASH, "cuda_runtime", dm_device_runtime_version(), "cuda_driver",
                     dm_device_driver_version(), "mpi", mpi, "utf8proc", utf8proc_version(), "jansson",
                     JANSSON_VERSION, "zlib", zlibVersion(), "libarchive", archive_version_string(),
                     "libpng", PNG_LIBPNG_VER_STRING);
}

static json_t *stats_json(const dm_stat *st, int n, int is_counter)
{
    json_t *o = json_object();
    for (int i = 0; i < n; i++) {
        json_t *e = is_counter ? json_pack("{s:I, s:I, s:I, s:f}", "sum", (json_int_t)st[i].sum, "min",
                                           (json_int_t)st[i].min, "max", (json_int_t)st[i].max, "avg",
                                           st[i].avg)
                               : json_pack("{s:f, s:f, s:f, s:I}", "min", st[i].min, "avg", st[i].avg,
                                           "max", st[i].max, "calls", (json_int_t)st[i].calls);
        json_object_set_new(o, st[i].name, e);
    }
    return o;
}

json_t *dm_report_devices(const dm_ctx *ctx)
{
    /* one fixed-size record per rank, gathered to every rank */
    struct rec {
        char host[MPI_MAX_PROCESSOR_NAME];
        char gpu[256];
        int local_rank, device, cc_major, cc_minor, sms, threads;
        double mem_gb;
    } me, *all = dm_malloc(sizeof me * (size_t)ctx->size);
    /* agreed before the gather: a rank without room returning alone left the others in it */
    if (dm_ctx_agree(ctx, all ? DM_OK : DM_ERR(DM_ERR_NOMEM, "report: out of memory for the device records")) < 0) {
        dm_free(all);
        return NULL;
    }
    memset(&me, 0, sizeof me);
    int hl = 0;
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_Get_processor_name(host, &hl);
    snprintf(me.host, sizeof me.host, "%s", host);
    snprintf(me.gpu, sizeof me.gpu, "%s", ctx->device >= 0 ? ctx->dev.name : "none");
    me.local_rank = ctx->local_rank;
    me.device = ctx->device;
    me.cc_major = ctx->dev.cc_major;
    me.cc_minor = ctx->dev.cc_minor;
    me.sms = ctx->dev.sms;
    me.threads = ctx->threads;
    me.mem_gb = (double)ctx->dev.mem_total / 1e9;
    if (MPI_Allgather(&me, sizeof me, MPI_BYTE, all, sizeof me, MPI_BYTE, ctx->world) != MPI_SUCCESS) {
        dm_free(all);
        DM_ERR(DM_ERR_MPI, "report: MPI_Allgather of the device records failed");
        return NULL;
    }
    json_t *devs = json_array();
    for (int i = 0; i < ctx->size; i++) {
        char cc[16] = "-";
        if (all[i].device >= 0) snprintf(cc, sizeof cc, "%d.%d", all[i].cc_major, all[i].cc_minor);
        json_array_append_new(devs, json_pack("{s:i, s:s, s:i, s:i, s:s, s:s, s:i, s:f, s:i}", "rank", i, "host",
                                              all[i].host, "local_rank", all[i].local_rank, "device",
                                              all[i].device, "gpu", all[i].gpu, "compute_capability", cc,
                                              "sms", all[i].sms, "memory_gb", all[i].mem_gb, "threads",
                                              all[i].threads));
    }
    dm_free(all);
    if (!devs) DM_ERR(DM_ERR_NOMEM, "report: out of memory for the device records");
    return devs;
}

json_t *dm_report_environment(char *const *env)
{
    static const char *const prefix[] = {"DOCMINE_", "OMP_"};
    static const char *const exact[] = {"CUDA_VISIBLE_DEVICES", "GLIBC_TUNABLES"};
    json_t *o = json_object();
    for (size_t i = 0; o && env && env[i]; i++) {
        const char *eq = strchr(env[i], '=');
        if (!eq || eq == env[i]) continue;
        size_t n = (size_t)(eq - env[i]);
        int keep = 0;
        for (size_t k = 0; k < sizeof prefix / sizeof *prefix; k++)
            keep |= n > strlen(prefix[k]) && strncmp(env[i], prefix[k], strlen(prefix[k])) == 0;
        for (size_t k = 0; k < sizeof exact / sizeof *exact; k++)
            keep |= n == strlen(exact[k]) && strncmp(env[i], exact[k], n) == 0;
        if (!keep) continue;
        char name[256];
        if (n >= sizeof name) continue;
        memcpy(name, env[i], n);
        name[n] = 0;
        /* a value that is not UTF-8 is written with its stray bytes escaped (dm_json_text); a
         * name that is not is left out (an object key cannot be escaped without misleading) */
        json_t *v = dm_json_text(eq + 1);
        if (v) json_object_set_new(o, name, v);
    }
    return o;
}

int dm_report_collect(dm_report *r, const dm_ctx *ctx)
{
    json_object_set_new(r->root, "versions", dm_report_versions());
    json_object_set_new(r->root, "ranks", json_integer(ctx->size));
    json_object_set_new(r->root, "backend", json_string(dm_backend_name(ctx->backend)));
    json_object_set_new(r->root, "tune_mode", json_string(dm_tune_mode_name(dm_tune_get_mode())));
    json_object_set_new(r->root, "environment", dm_report_environment(environ));

    if (!json_object_get(r->root, "devices")) { /* a command may have gathered them already */
        json_t *devs = dm_report_devices(ctx);
        /* (jansson's own allocations can fail on one rank alone: agreed before the next collective) */
        int rc = dm_ctx_agree(ctx, devs ? DM_OK : dm_error_code() < 0 ? dm_error_code() : DM_ERR_MPI);
        if (rc < 0) {
            json_decref(devs);
            return rc;
        }
        json_object_set_new(r->root, "devices", devs);
    }

    dm_stat *st;
    int n;
    DM_TRY(dm_stats_reduce(&st, &n, ctx->world, 0));
    json_object_set_new(r->root, "timers_s", stats_json(st, n, 0));
    dm_free(st);
    DM_TRY(dm_stats_reduce(&st, &n, ctx->world, 1));
    json_object_set_new(r->root, "counters", stats_json(st, n, 1));
    dm_free(st);

    size_t peak[DM_MEM_KINDS];
    for (int k = 0; k < DM_MEM_KINDS; k++) peak[k] = dm_mem_peak(k);
    json_t *mem = dm_report_memory_max(ctx, peak);
    if (!mem) return DM_ERR(DM_ERR_MPI, "MPI_Allreduce of memory peaks failed");
    json_object_set_new(r->root, "peak_memory_bytes_max_over_ranks", mem);

    /* huge pages (docmine's main asks glibc for them): the setting, the kernel's mode, and the
     * largest amount of a rank's memory in huge pages when the report is made */
    double huge = (double)dm_mem_anon_huge_bytes(), maxhuge = 0;
    if (MPI_Allreduce(&huge, &maxhuge, 1, MPI_DOUBLE, MPI_MAX, ctx->world) != MPI_SUCCESS)
        return DM_ERR(DM_ERR_MPI, "MPI_Allreduce of huge page bytes failed");
    const char *tun = dm_mem_hugetlb_tunable();
    json_object_set_new(r->root, "huge_pages",
                        json_pack("{s:s, s:s, s:I}", "glibc_malloc_hugetlb", tun ? tun : "unset",
                                  "transparent_hugepage", dm_mem_thp_mode(), "anon_huge_bytes_max_over_ranks",
                                  (json_int_t)maxhuge));
    return DM_OK;
}

int dm_report_write(const dm_report *r, const dm_ctx *ctx, const char *path)
{
    if (ctx->rank != 0 || !path) return DM_OK;
    char *s = json_dumps(r->root, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(9));
    if (!s) return DM_ERR(DM_ERR_NOMEM, "cannot serialise the report");
    size_t n = strlen(s);
    char *t = dm_malloc(n + 1);
    if (!t) {
        free(s);
        return DM_ERR_NOMEM;
    }
    memcpy(t, s, n);
    t[n] = '\n';
    free(s);
    int rc = dm_write_file_atomic(path, t, n + 1);
    dm_free(t);
    return rc;
}
