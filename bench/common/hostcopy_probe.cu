/* hostcopy_probe: host<->device copies of S bytes per rank, every rank of a node copying at the
 * same moment (one rank per GPU), R rounds, the slowest rank's time. It answers whether the
 * copies of a multi-GPU host share a ceiling: run it with 1, 2 and 4 ranks, bound as the jobs bind:
 *   OMP_NUM_THREADS=16 mpiexec -n 4 <bind> build/bench/common/hostcopy_probe [S bytes] [R]
 * Ways (the same populated buffers every round):
 *   pinned       cudaMemcpyAsync to/from S bytes of pinned memory;
 *   host memcpy  the threads copying S bytes between two pageable buffers, no GPU (nt: stores
 *                that bypass the cache, so the destination's lines are not read first);
 *   staged       through pinned buffers (16 MiB x 2: tfidf's up/down; 4 MiB x 4; 1 MiB x 8) and
 *                the threads' copies into or out of pageable memory, with or without nt stores;
 *   pageable     cudaMemcpy straight to/from pageable memory (the driver stages);
 *   registered   cudaHostRegister of the pageable buffer (timed on its own; 4 KiB pages, or
 *                transparent huge pages), then copies straight into it;
 *   staged, then the staged copies again with 8, 4 or 2 copying threads, 64 MiB chunks, or events
 *                that block instead of spinning (does the copy-out starve the DMA?).
 * A program, not a test (bench/RESULTS.md sessions 25 and 27). */
#include <cuda_runtime.h>
#include <mpi.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bench/common/bench_util.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

static void check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return;
    fprintf(stderr, "hostcopy_probe: %s: %s\n", what, cudaGetErrorString(e));
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* memcpy, or with stores that bypass the cache (nt): the destination's lines are not read first */
static void copy_piece(char *dst, const char *src, size_t n, int nt)
{
#ifdef __SSE2__
    if (nt) {
        size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
        if (head > n) head = n;
        memcpy(dst, src, head);
        dst += head, src += head, n -= head;
        size_t m = n & ~(size_t)63;
        for (size_t o = 0; o < m; o += 64) {
            __m128i a = _mm_loadu_si128((const __m128i *)(src + o)), b = _mm_loadu_si128((const __m128i *)(src + o + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(src + o + 32)), d = _mm_loadu_si128((const __m128i *)(src + o + 48));
            _mm_stream_si128((__m128i *)(dst + o), a);
            _mm_stream_si128((__m128i *)(dst + o + 16), b);
            _mm_stream_si128((__m128i *)(dst + o + 32), c);
            _mm_stream_si128((__m128i *)(dst + o + 48), d);
        }
        _mm_sfence();
        memcpy(dst + m, src + m, n - m);
        return;
    }
#endif
    (void)nt;
    memcpy(dst, src, n);
}

static void memcpy_par(void *dst, const void *src, size_t n, int nt)
{
    /* one piece per thread for a chunk, at most 1 MiB, at least 64 KiB */
    size_t piece = (n / (size_t)omp_get_max_threads() + 65535) & ~(size_t)65535;
    if (piece > ((size_t)1 << 20)) piece = (size_t)1 << 20;
    if (piece < 65536) piece = 65536;
    long np = (long)((n + piece - 1) / piece);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < np; i++) {
        size_t o = (size_t)i * piece, k = n - o < piece ? n - o : piece;
        copy_piece((char *)dst + o, (const char *)src + o, k, nt);
    }
}

/* nb pinned buffers of c bytes in turn */
typedef struct stage {
    char *buf[8];
    cudaEvent_t ev[8];
    size_t c;
    int nb, nt;
} stage;

static void staged_down(char *h, const char *d, size_t bytes, stage *st, cudaStream_t s)
{
    const size_t C = st->c;
    size_t n = (bytes + C - 1) / C;
    const size_t lag = (size_t)st->nb - 1; /* copies in flight while the threads empty a buffer */
    for (size_t i = 0; i < n + lag; i++) {
        if (i < n) {
            size_t o = i * C, k = bytes - o < C ? bytes - o : C;
            int b = (int)(i % (size_t)st->nb);
            check(cudaMemcpyAsync(st->buf[b], d + o, k, cudaMemcpyDeviceToHost, s), "staged d2h");
            check(cudaEventRecord(st->ev[b], s), "record");
        }
        if (i >= lag) {
            size_t j = i - lag, o = j * C, k = bytes - o < C ? bytes - o : C;
            int b = (int)(j % (size_t)st->nb);
            check(cudaEventSynchronize(st->ev[b]), "event");
            memcpy_par(h + o, st->buf[b], k, st->nt);
        }
    }
}

static void staged_up(char *d, const char *h, size_t bytes, stage *st, cudaStream_t s)
{
    const size_t C = st->c;
    for (size_t o = 0, i = 0; o < bytes; o += C, i++) {
        size_t k = bytes - o < C ? bytes - o : C;
        int b = (int)(i % (size_t)st->nb);
        check(cudaEventSynchronize(st->ev[b]), "event");
        memcpy_par(st->buf[b], h + o, k, st->nt);
        check(cudaMemcpyAsync(d + o, st->buf[b], k, cudaMemcpyHostToDevice, s), "staged h2d");
        check(cudaEventRecord(st->ev[b], s), "record");
    }
    check(cudaStreamSynchronize(s), "sync");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int P = 1, r = 0, lr = 0, ndev = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    uint64_t S_arg = (uint64_t)3 << 30;
    int rounds = 2;
    bench_init("hostcopy_probe", argc, argv, r == 0);
    int a = bench_probe_args(argc, argv,
                             "mpiexec -n P hostcopy_probe [S] [R]\n  S  bytes a rank copies, at least 1 MiB "
                             "(default 3221225472 = 3 GiB)\n  R  rounds (default 2)",
                             "S", &S_arg, (uint64_t)1 << 20, (uint64_t)1 << 40, &rounds);
    if (a != 0) {
        MPI_Finalize();
        return a < 0 ? 2 : 0;
    }
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &lr);
    check(cudaGetDeviceCount(&ndev), "device count");
    check(cudaSetDevice(lr % ndev), "set device");
    const size_t S = (size_t)S_arg;
    char *dev = NULL, *pin = NULL;
    check(cudaMalloc((void **)&dev, S), "cudaMalloc");
    check(cudaMallocHost((void **)&pin, S), "cudaMallocHost");
    /* pageable buffers: pg with 4 KiB pages, hp asking for transparent huge pages (as glibc's
     * hugetlb=1 tunable does for the pipeline's large blocks), pg2 the second buffer of a memcpy */
    char *pg = (char *)malloc(S), *pg2 = (char *)malloc(S), *hp = NULL;
    if (posix_memalign((void **)&hp, (size_t)2 << 20, S) != 0) hp = NULL;
    if (!pg || !pg2 || !hp) {
        fprintf(stderr, "hostcopy_probe: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    madvise(hp, S, MADV_HUGEPAGE);
    memset(pg, 1, S); /* populated once, as dm_mem_prefault leaves a destination */
    memset(pg2, 1, S);
    memset(hp, 1, S);
    memset(pin, 2, S);
    check(cudaMemset(dev, 3, S), "memset");
    cudaStream_t s;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
    /* staging variants: chunk bytes, buffers, cache-bypassing stores */
    const struct {
        size_t c;
        int nb, nt;
    } sv[] = {{(size_t)16 << 20, 2, 0}, {(size_t)16 << 20, 2, 1}, {(size_t)4 << 20, 4, 0},
              {(size_t)4 << 20, 4, 1},  {(size_t)1 << 20, 8, 0},  {(size_t)1 << 20, 8, 1}};
    const int nsv = (int)(sizeof sv / sizeof *sv);
    stage st[6];
    for (int v = 0; v < nsv; v++) {
        st[v].c = sv[v].c, st[v].nb = sv[v].nb, st[v].nt = sv[v].nt;
        for (int b = 0; b < st[v].nb; b++) {
            check(cudaMallocHost((void **)&st[v].buf[b], st[v].c), "cudaMallocHost");
            check(cudaEventCreateWithFlags(&st[v].ev[b], cudaEventDisableTiming), "event");
        }
    }
    check(cudaDeviceSynchronize(), "sync");
    if (r == 0) {
        printf("hostcopy_probe: %d ranks, %zu MiB per rank, %d threads per rank, %d GPUs visible\n", P, S >> 20,
               omp_get_max_threads(), ndev);
        printf("%-34s %5s %9s %10s %10s\n", "way", "round", "max s", "GB/s/rank", "GB/s all");
    }
    enum { PIN_D2H, PIN_H2D, CPU_COPY, CPU_COPY_NT, STAGED_D2H, STAGED_H2D = STAGED_D2H + 6, PAGEABLE_D2H = STAGED_H2D + 6,
           PAGEABLE_H2D, REG, REG_D2H, REG_H2D, UNREG, HREG, HREG_D2H, HUNREG, NWAY };
    char name[64];
    for (int round = 0; round < rounds; round++) {
        for (int w = 0; w < NWAY; w++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t = MPI_Wtime();
            if (w >= STAGED_D2H && w < STAGED_D2H + nsv) {
                const stage *q = &st[w - STAGED_D2H];
                snprintf(name, sizeof name, "staged d2h %zu MiB x %d%s", q->c >> 20, q->nb, q->nt ? " nt" : "");
                staged_down(pg, dev, S, &st[w - STAGED_D2H], s);
            } else if (w >= STAGED_H2D && w < STAGED_H2D + nsv) {
                const stage *q = &st[w - STAGED_H2D];
                snprintf(name, sizeof name, "staged h2d %zu MiB x %d%s", q->c >> 20, q->nb, q->nt ? " nt" : "");
                staged_up(dev, pg, S, &st[w - STAGED_H2D], s);
            } else {
                const char *nm = "";
                switch (w) {
                case PIN_D2H: nm = "pinned d2h"; check(cudaMemcpyAsync(pin, dev, S, cudaMemcpyDeviceToHost, s), "d2h"); break;
                case PIN_H2D: nm = "pinned h2d"; check(cudaMemcpyAsync(dev, pin, S, cudaMemcpyHostToDevice, s), "h2d"); break;
                case CPU_COPY: nm = "host memcpy (no GPU)"; memcpy_par(pg2, pg, S, 0); break;
                case CPU_COPY_NT: nm = "host memcpy nt (no GPU)"; memcpy_par(pg2, pg, S, 1); break;
                case PAGEABLE_D2H: nm = "pageable d2h"; check(cudaMemcpy(pg, dev, S, cudaMemcpyDeviceToHost), "d2h"); break;
                case PAGEABLE_H2D: nm = "pageable h2d"; check(cudaMemcpy(dev, pg, S, cudaMemcpyHostToDevice), "h2d"); break;
                case REG: nm = "register (4 KiB pages)"; check(cudaHostRegister(pg, S, cudaHostRegisterDefault), "register"); break;
                case REG_D2H: nm = "registered d2h"; check(cudaMemcpyAsync(pg, dev, S, cudaMemcpyDeviceToHost, s), "d2h"); break;
                case REG_H2D: nm = "registered h2d"; check(cudaMemcpyAsync(dev, pg, S, cudaMemcpyHostToDevice, s), "h2d"); break;
                case UNREG: nm = "unregister"; check(cudaHostUnregister(pg), "unregister"); break;
                case HREG: nm = "register (huge pages)"; check(cudaHostRegister(hp, S, cudaHostRegisterDefault), "register"); break;
                case HREG_D2H: nm = "registered d2h (huge pages)"; check(cudaMemcpyAsync(hp, dev, S, cudaMemcpyDeviceToHost, s), "d2h"); break;
                case HUNREG: nm = "unregister (huge pages)"; check(cudaHostUnregister(hp), "unregister"); break;
                default: continue;
                }
                snprintf(name, sizeof name, "%s", nm);
            }
            check(cudaStreamSynchronize(s), "sync");
            t = MPI_Wtime() - t;
            double tmax = 0;
            MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            if (r == 0) printf("%-34s %5d %9.4f %10.2f %10.2f\n", name, round, tmax, (double)S / tmax / 1e9, (double)S * P / tmax / 1e9);
        }
    }
    /* the staged download and upload with fewer copying threads, larger chunks, and events that
     * block instead of spinning: does the copy-out starve the DMA of memory bandwidth when every
     * rank of a host copies at once? */
    const int full = omp_get_max_threads();
    const struct {
        size_t c;
        int threads, blocking, up;
    } tv[] = {{(size_t)16 << 20, 8, 0, 0}, {(size_t)16 << 20, 4, 0, 0}, {(size_t)16 << 20, 2, 0, 0},
              {(size_t)64 << 20, 16, 0, 0}, {(size_t)64 << 20, 4, 0, 0}, {(size_t)16 << 20, 16, 1, 0},
              {(size_t)16 << 20, 4, 0, 1}, {(size_t)64 << 20, 4, 0, 1}};
    stage big;
    big.c = (size_t)64 << 20, big.nb = 2, big.nt = 0;
    stage blk = st[0];
    for (int b = 0; b < 2; b++) {
        check(cudaMallocHost((void **)&big.buf[b], big.c), "cudaMallocHost");
        check(cudaEventCreateWithFlags(&big.ev[b], cudaEventDisableTiming), "event");
        check(cudaEventCreateWithFlags(&blk.ev[b], cudaEventDisableTiming | cudaEventBlockingSync), "event");
    }
    for (int round = 0; round < rounds; round++)
        for (size_t v = 0; v < sizeof tv / sizeof *tv; v++) {
            stage *q = tv[v].blocking ? &blk : tv[v].c == big.c ? &big : &st[0];
            omp_set_num_threads(tv[v].threads);
            MPI_Barrier(MPI_COMM_WORLD);
            double t = MPI_Wtime();
            if (tv[v].up) staged_up(dev, pg, S, q, s);
            else staged_down(pg, dev, S, q, s);
            check(cudaStreamSynchronize(s), "sync");
            t = MPI_Wtime() - t;
            omp_set_num_threads(full);
            double tmax = 0;
            MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            snprintf(name, sizeof name, "staged %s %zu MiB x 2, %d thr%s", tv[v].up ? "h2d" : "d2h", q->c >> 20,
                     tv[v].threads, tv[v].blocking ? ", blocking" : "");
            if (r == 0) printf("%-34s %5d %9.4f %10.2f %10.2f\n", name, round, tmax, (double)S / tmax / 1e9, (double)S * P / tmax / 1e9);
        }
    for (int b = 0; b < 2; b++) cudaFreeHost(big.buf[b]), cudaEventDestroy(big.ev[b]), cudaEventDestroy(blk.ev[b]);
    fflush(stdout);
    for (int v = 0; v < nsv; v++)
        for (int b = 0; b < st[v].nb; b++) cudaFreeHost(st[v].buf[b]), cudaEventDestroy(st[v].ev[b]);
    cudaStreamDestroy(s);
    cudaFreeHost(pin);
    cudaFree(dev);
    free(pg);
    free(pg2);
    free(hp);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return 0;
}
