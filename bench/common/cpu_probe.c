/* cpu_probe: how much slower a rank's threads compute when every rank of a host computes at the
 * same moment, with no communication and no shared data: R rounds of
 *   spin    a dependent chain of integer multiply-adds per thread (registers only: the cores' clock);
 *   synth   N documents of the synthetic corpus per rank (datasets/synth.h, the pipeline's
 *           generator: compute and the caches, each document's text into a thread's own buffer);
 * the slowest rank's time. Run it with 1, 2 and 4 ranks, bound as the jobs bind:
 *   OMP_NUM_THREADS=16 mpiexec -n 4 <bind> build/bench/common/cpu_probe [N documents] [R]
 * (a program, not a test; bench/RESULTS.md session 30). */
#include <mpi.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/common/bench_util.h"
#include "common/alloc.h"
#include "datasets/synth.h"

static double slowest(double t0, double t1)
{
    double t = t1 - t0, m = 0;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    uint64_t N = 200000;
    int rounds = 3;
    bench_init("cpu_probe", argc, argv, rank == 0);
    int a = bench_probe_args(argc, argv,
                             "[mpiexec -n P] cpu_probe [N] [R]\n  N  synthetic documents a rank (default 200000)\n"
                             "  R  rounds (default 3)",
                             "N", &N, 1, (uint64_t)1 << 40, &rounds);
    if (a != 0) {
        MPI_Finalize();
        return a < 0 ? 2 : 0;
    }
    dm_synth_options o = DM_SYNTH_OPTIONS_INIT;
    o.docs = N * (uint64_t)size;
    dm_synth s;
    int rc = dm_synth_init(&s, &o), bad = 0;
    MPI_Allreduce(&rc, &bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (bad != 0) {
        if (rank == 0) fprintf(stderr, "cpu_probe: cannot set up the generator\n");
        MPI_Finalize();
        return 1;
    }
    if (rank == 0)
        printf("cpu_probe: %d ranks x %d threads; spin: 2^28 multiply-adds a thread; synth: %llu documents a rank\n",
               size, omp_get_max_threads(), (unsigned long long)N);
    if (rank == 0) printf("%-6s %5s %9s\n", "work", "round", "max s");
    uint64_t sink = 0;
    for (int r = 0; r < rounds; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
#pragma omp parallel reduction(^ : sink)
        {
            uint64_t x = (uint64_t)omp_get_thread_num() + 1;
            for (long i = 0; i < (1L << 28); i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
            sink ^= x;
        }
        double t = slowest(t0, MPI_Wtime());
        if (rank == 0) printf("%-6s %5d %9.3f\n", "spin", r + 1, t);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        uint64_t first = N * (uint64_t)rank;
#pragma omp parallel reduction(^ : sink)
        {
            char *buf = NULL;
            size_t cap = 0, len = 0;
            int label;
#pragma omp for schedule(dynamic, 256)
            for (uint64_t i = first; i < first + N; i++)
                if (dm_synth_doc(&s, i, &label, &buf, &cap, &len) == 0) sink ^= len;
            dm_free(buf);
        }
        t = slowest(t0, MPI_Wtime());
        if (rank == 0) printf("%-6s %5d %9.3f\n", "synth", r + 1, t);
    }
    if (rank == 0 && sink == 42) printf(" \n"); /* keeps the work */
    dm_synth_free(&s);
    MPI_Finalize();
    return 0;
}
