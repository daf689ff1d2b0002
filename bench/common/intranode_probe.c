/* intranode_probe: an all-to-all of S bytes per pair between the ranks of one node, through MPI
 * (Isend/Irecv) and through the threads reading the peers' send buffers (common/cma.h, pieces of
 * 4 MiB), R rounds, max over ranks. Run it with one rank per GPU's block of cores, as the jobs do:
 *   OMP_NUM_THREADS=16 mpiexec -n 4 <bind> build/bench/common/intranode_probe [S bytes] [R]
 * (a program, not a test; bench/RESULTS.md session 24). */
#include <limits.h>
#include <mpi.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/common/bench_util.h"
#include "common/alloc.h"
#include "common/cma.h"
#include "common/context.h"
#include "common/status.h"

int main(int argc, char **argv)
{
    int provided = 0, rank0 = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank0);
    uint64_t S_arg = (uint64_t)768 << 20;
    int rounds = 3;
    bench_init("intranode_probe", argc, argv, rank0 == 0);
    /* S: a multiple of 8 (sent as 64-bit words), at most MPI's int count of them */
    int a = bench_probe_args(argc, argv,
                             "mpiexec -n P intranode_probe [S] [R]\n  S  bytes per pair of ranks, a multiple of 8 "
                             "(default 805306368 = 768 MiB)\n  R  rounds (default 3)",
                             "S", &S_arg, 8, (uint64_t)8 * INT_MAX, &rounds);
    if (a == 0 && S_arg % 8) a = -1, bench_usage_error("S: '%s' is not a multiple of 8", argv[1]);
    if (a != 0) {
        MPI_Finalize();
        return a < 0 ? 2 : 0;
    }
    dm_ctx ctx;
    dm_ctx_options co = DM_CTX_OPTIONS_INIT;
    co.backend = DM_BACKEND_CPU;
    co.quiet = 1;
    int rc = dm_ctx_init(&ctx, &co);
    const size_t S = (size_t)S_arg;
    const int P = ctx.size, r = ctx.rank;
    char *sb = rc == DM_OK ? dm_malloc(S * (size_t)P) : NULL, *rb = sb ? dm_malloc(S * (size_t)P) : NULL;
    uint64_t *addr = dm_malloc(sizeof *addr * (size_t)P);
    if (rc == DM_OK && (!sb || !rb || !addr)) rc = DM_ERR(DM_ERR_NOMEM, "intranode_probe: out of memory");
    rc = dm_ctx_agree(&ctx, rc);
    dm_cma *cm = NULL;
    if (rc == DM_OK) rc = dm_cma_open(&cm, &ctx);
    if (rc != DM_OK || P < 2) {
        if (r == 0) fprintf(stderr, "intranode_probe: %s\n", rc != DM_OK ? dm_error_message() : "needs 2 or more ranks");
        MPI_Finalize();
        return 1;
    }
    const long total = (long)(S * (size_t)P);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < total; i += 4096) sb[i] = (char)(r + 1), rb[i] = 0; /* pages faulted */
    uint64_t me = (uint64_t)(uintptr_t)sb;
    MPI_Allgather(&me, 1, MPI_UINT64_T, addr, 1, MPI_UINT64_T, ctx.world);
    if (r == 0) {
        printf("intranode_probe: %d ranks, %zu MiB per pair, %d threads per rank, reads %s\n", P, S >> 20,
               omp_get_max_threads(), cm ? "available" : "NOT available (MPI only)");
        printf("round  MPI s  MPI GB/s/rank  reads s  reads GB/s/rank  correct\n");
    }
    const size_t piece = (size_t)4 << 20, pieces = (S + piece - 1) / piece;
    MPI_Request *req = dm_malloc(sizeof *req * 2 * (size_t)P);
    MPI_Status *st = dm_malloc(sizeof *st * 2 * (size_t)P);
    for (int round = 0; round < rounds && req && st; round++) {
        MPI_Barrier(ctx.world);
        double t = MPI_Wtime();
        int nq = 0;
        for (int p = 0; p < P; p++)
            if (p != r) MPI_Irecv(rb + S * (size_t)p, (int)(S / 8), MPI_UINT64_T, p, 1, ctx.world, &req[nq++]);
        for (int p = 0; p < P; p++)
            if (p != r) MPI_Isend(sb + S * (size_t)p, (int)(S / 8), MPI_UINT64_T, p, 1, ctx.world, &req[nq++]);
        MPI_Waitall(nq, req, st);
        double tm = MPI_Wtime() - t, tc = 0;
        long bad = 0;
        if (cm) {
            MPI_Barrier(ctx.world);
            memset(rb, 0, S * (size_t)P);
            MPI_Barrier(ctx.world);
            t = MPI_Wtime();
            const long items = (long)(pieces * (size_t)(P - 1));
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : bad)
            for (long k = 0; k < items; k++) {
                int p = (r + 1 + (int)(k / (long)pieces)) % P;
                size_t lo = (size_t)(k % (long)pieces) * piece, n = S - lo < piece ? S - lo : piece;
                bad += dm_cma_read(cm, p, rb + S * (size_t)p + lo, addr[p] + S * (size_t)r + lo, n) != DM_OK;
            }
            tc = MPI_Wtime() - t;
        }
        for (int p = 0; p < P; p++)
            if (p != r)
                for (size_t i = 0; i < S; i += 4096) bad += rb[S * (size_t)p + i] != (char)(p + 1);
        double mx[2] = {tm, tc}, all[2];
        long badall = 0;
        MPI_Reduce(mx, all, 2, MPI_DOUBLE, MPI_MAX, 0, ctx.world);
        MPI_Reduce(&bad, &badall, 1, MPI_LONG, MPI_SUM, 0, ctx.world);
        const double gb = (double)S * (P - 1) / 1e9;
        if (r == 0)
            printf("%5d  %5.3f  %13.2f  %7.3f  %15.2f  %s\n", round + 1, all[0], gb / all[0], all[1],
                   all[1] > 0 ? gb / all[1] : 0.0, badall ? "NO" : "yes");
    }
    dm_cma_close(cm);
    dm_free(req);
    dm_free(st);
    dm_free(addr);
    dm_free(sb);
    dm_free(rb);
    dm_ctx_free(&ctx);
    MPI_Finalize();
    return 0;
}
