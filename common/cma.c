/* Reads of another rank's memory on the same node (common/cma.h): process_vm_readv, a test read
 * of a token from every peer at opening. Reference: none. */
#define _GNU_SOURCE
#include "common/cma.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/status.h"

#if defined(__linux__)
#include <sys/prctl.h>
#include <sys/uio.h>
#ifndef PR_SET_PTRACER
#define PR_SET_PTRACER 0x59616d61
#endif
#ifndef PR_SET_PTRACER_ANY
#define PR_SET_PTRACER_ANY ((unsigned long)-1)
#endif
#define DM_CMA_SUPPORTED 1
#else
#define DM_CMA_SUPPORTED 0
#endif

struct dm_cma {
    int P;
    MPI_Comm world;
    long *pid;      /* per world rank: its process id when it shares this node (0: not a peer) */
    uint64_t token; /* read by the peers at opening */
};

static int cma_wanted(void)
{
    const char *e = getenv("DOCMINE_CMA");
    return DM_CMA_SUPPORTED && !(e && strcmp(e, "0") == 0);
}

#if DM_CMA_SUPPORTED
/* One read of n bytes (no more than the system takes at once) into dst; -errno on failure. */
static long read_once(long pid, void *dst, uint64_t src, size_t n)
{
    struct iovec l = {dst, n}, r = {(void *)(uintptr_t)src, n};
    ssize_t got = process_vm_readv((pid_t)pid, &l, 1, &r, 1, 0);
    return got < 0 ? -(long)errno : (long)got;
}
#endif

int dm_cma_open(dm_cma **out, const dm_ctx *ctx)
{
    *out = NULL;
    int want = cma_wanted() && ctx->size > 1, rc = DM_OK;
    dm_cma *cm = NULL;
    uint64_t *info = NULL;
    /* the ranks of ctx->world on this node (ctx->node may be a larger world's: test sub-contexts) */
    MPI_Comm node = MPI_COMM_NULL;
    if (MPI_Comm_split_type(ctx->world, MPI_COMM_TYPE_SHARED, ctx->rank, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        return dm_ctx_agree(ctx, DM_ERR(DM_ERR_MPI, "cma: MPI_Comm_split_type(SHARED) failed"));
    int nn = 1, me = 0;
    MPI_Comm_size(node, &nn);
    MPI_Comm_rank(node, &me);
    if (want) {
        cm = dm_calloc(1, sizeof *cm);
        if (cm) cm->pid = dm_calloc((size_t)ctx->size, sizeof *cm->pid);
        info = dm_malloc(sizeof *info * 4 * (size_t)nn);
        if (!cm || !cm->pid || !info) rc = DM_ERR(DM_ERR_NOMEM, "cma: out of memory");
    }
    rc = dm_ctx_agree(ctx, rc);
    /* every rank must want it before any takes part in the node's collective below */
    int all_want = 0;
    if (rc == DM_OK && MPI_Allreduce(&want, &all_want, 1, MPI_INT, MPI_MIN, ctx->world) != MPI_SUCCESS)
        all_want = 0; /* (MPI's errors abort by default) */
    int ok = 0;
#if DM_CMA_SUPPORTED
    if (rc == DM_OK && all_want) {
        ok = 1;
        cm->P = ctx->size;
        cm->world = ctx->world;
        /* a value no other process holds at that address: a peer that reads it has read this one */
        cm->token = 0x9e3779b97f4a7c15ull * (uint64_t)(getpid() + 1) ^ ((uint64_t)(uintptr_t)cm << 7) ^
                    (uint64_t)ctx->rank;
        prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); /* EINVAL without Yama: nothing to allow */
        uint64_t mine[4] = {(uint64_t)ctx->rank, (uint64_t)getpid(), (uint64_t)(uintptr_t)&cm->token, cm->token};
        if (MPI_Allgather(mine, 4, MPI_UINT64_T, info, 4, MPI_UINT64_T, node) != MPI_SUCCESS) ok = 0;
        for (int k = 0; k < nn && ok; k++) {
            if (k == me) continue;
            uint64_t got = 0;
            long r = read_once((long)info[4 * k + 1], &got, info[4 * k + 2], sizeof got);
            if (r != (long)sizeof got || got != info[4 * k + 3] || info[4 * k] >= (uint64_t)ctx->size) {
                ok = 0;
                dm_log_debug("cma: the test read from node rank %d (pid %llu) %s", k,
                             (unsigned long long)info[4 * k + 1],
                             r < 0 ? strerror((int)-r) : "read another process's memory");
            } else {
                cm->pid[info[4 * k]] = (long)info[4 * k + 1];
            }
        }
    }
#else
    (void)me;
#endif
    MPI_Comm_free(&node);
    /* usable when every rank's test reads worked and some ranks share a node; the reduction also
     * keeps each rank's token alive until its peers have read it */
    int in[2] = {ok, -(nn > 1)}, all[2] = {0, 0};
    if (rc == DM_OK && all_want && MPI_Allreduce(in, all, 2, MPI_INT, MPI_MIN, ctx->world) != MPI_SUCCESS)
        all[0] = 0;
    if (rc != DM_OK || !all[0] || all[1] == 0) {
        if (rc == DM_OK && all_want)
            dm_log_debug("cma: not used (%s)", all[0] ? "no two ranks share a node" : "a test read failed");
#if DM_CMA_SUPPORTED
        if (rc == DM_OK && all_want) prctl(PR_SET_PTRACER, 0, 0, 0, 0);
#endif
        if (cm) dm_free(cm->pid);
        dm_free(cm);
        dm_free(info);
        return rc;
    }
    dm_free(info);
    *out = cm;
    return DM_OK;
}

int dm_cma_local(const dm_cma *cm, int q) { return cm && q >= 0 && q < cm->P && cm->pid[q] != 0; }

int dm_cma_read(const dm_cma *cm, int q, void *dst, uint64_t src, size_t n)
{
    if (!dm_cma_local(cm, q)) return DM_ERR(DM_ERR_INVALID_ARG, "cma: rank %d is not a peer on this node", q);
#if DM_CMA_SUPPORTED
    size_t done = 0;
    while (done < n) {
        size_t c = n - done < ((size_t)1 << 30) ? n - done : (size_t)1 << 30;
        long r = read_once(cm->pid[q], (char *)dst + done, src + done, c);
        if (r == -EINTR) continue;
        if (r <= 0) {
            char buf[128];
            const char *m = r < 0 ? strerror_r((int)-r, buf, sizeof buf) : "nothing read";
            return DM_ERR(DM_ERR_IO, "cma: reading %zu bytes at 0x%llx of rank %d (pid %ld) failed: %s", c,
                          (unsigned long long)(src + done), q, cm->pid[q], m);
        }
        done += (size_t)r;
    }
    return DM_OK;
#else
    (void)dst, (void)src, (void)n;
    return DM_ERR(DM_ERR_UNSUPPORTED, "cma: not supported on this system");
#endif
}

/* Ranges per system call: Linux takes at most IOV_MAX (1024) of them. */
#define DM_CMA_IOV 1024

int dm_cma_writev(const dm_cma *cm, int q, const void *const *src, const uint64_t *dst, const size_t *len, size_t count)
{
    if (!dm_cma_local(cm, q)) return DM_ERR(DM_ERR_INVALID_ARG, "cma: rank %d is not a peer on this node", q);
#if DM_CMA_SUPPORTED
    struct iovec l[DM_CMA_IOV], r[DM_CMA_IOV];
    size_t i = 0, skip = 0; /* the next pair of ranges, and its bytes already written (after a short write) */
    while (i < count) {
        size_t m = 0, want = 0;
        for (size_t j = i; j < count && m < DM_CMA_IOV; j++) {
            size_t o = j == i ? skip : 0;
            if (len[j] == o) continue;
            l[m] = (struct iovec){(char *)(uintptr_t)src[j] + o, len[j] - o};
            r[m++] = (struct iovec){(void *)(uintptr_t)(dst[j] + o), len[j] - o};
            want += len[j] - o;
        }
        if (m == 0) break; /* only empty ranges left */
        ssize_t got = process_vm_writev((pid_t)cm->pid[q], l, (unsigned long)m, r, (unsigned long)m, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            char buf[128];
            const char *msg = got < 0 ? strerror_r(errno, buf, sizeof buf) : "nothing written";
            return DM_ERR(DM_ERR_IO, "cma: writing %zu bytes in %zu ranges to 0x%llx of rank %d (pid %ld) failed: %s",
                          want, m, (unsigned long long)(uintptr_t)r[0].iov_base, q, cm->pid[q], msg);
        }
        /* step over the pairs written: whole ones, then into the one the write stopped in */
        size_t left = (size_t)got;
        while (i < count && left >= len[i] - skip) {
            left -= len[i] - skip;
            skip = 0;
            i++;
        }
        skip += left;
    }
    return DM_OK;
#else
    (void)src, (void)dst, (void)len, (void)count;
    return DM_ERR(DM_ERR_UNSUPPORTED, "cma: not supported on this system");
#endif
}

void dm_cma_close(dm_cma *cm)
{
    if (!cm) return;
    MPI_Barrier(cm->world); /* no peer is still reading */
#if DM_CMA_SUPPORTED
    prctl(PR_SET_PTRACER, 0, 0, 0, 0);
#endif
    dm_free(cm->pid);
    dm_free(cm);
}
