/* STREAM k-median (streamclust): the PARSEC/Rodinia `streamcluster` algorithm with the same
 * parameters (kmin kmax dim n chunksize clustersize), the same lrand48 random-number semantics and
 * the same speedy / selectfeasible_fast / pFL / pgain / contcenters / copycenters logic, split into
 * a backend-neutral driver (streamclust.c), the CPU reference (streamclust_cpu.c) and the CUDA
 * backend (streamclust_cuda.cu). Reference: Rodinia 3.1 cuda/streamcluster (streamcluster_cuda_cpu.cpp,
 * streamcluster_cuda.cu, streamcluster_header.cu) and PARSEC 2.1 streamcluster.cpp.
 * Plain C11: no CUDA types cross this header. See DESIGN.md section 7, and the comment at the top
 * of streamclust.c for the documented differences from Rodinia.
 *
 * Exactness: every sum that decides whether a centre opens or closes (the per-centre "lower" sums
 * and the cost of opening x in gain) is accumulated in 64-bit fixed point with a per-chunk scale
 * 2^S chosen from a bound on the sums (dm_sc_fix_scale). Integer sums are exact and independent
 * of the summation order, so the CPU reference (any OpenMP thread count), the CUDA backend and
 * every tuning instance of the gain kernel make bit-identical decisions. Point distances are
 * computed in float in dimension order without contraction (no FMA) on both backends, so they are
 * bit-identical too. The only difference from PARSEC's double sums is the rounding of each term to
 * 2^-S (S >= 20 for any chunk whose weighted diameter sum is below 2^40), far below float. */
#ifndef DM_STREAMCLUST_H
#define DM_STREAMCLUST_H

#include <stddef.h>
#include <stdint.h>

#include "tfidf/vectors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rodinia's constants. */
#define DM_SC_ITER 3 /* iterate ITER * k * log k times */
#define DM_SC_SP 1   /* repetitions of speedy */

/* --- lrand48-compatible generator with explicit state and jump-ahead ------------------------ */
/* The 48-bit linear congruential generator of POSIX drand48: X' = (0x5DEECE66D X + 0xB) mod 2^48,
 * lrand48() = X >> 17. dm_sc_rng_seed(r, s) == srand48(s); dm_sc_rng_next(r) == lrand48(). */
typedef struct dm_sc_rng {
    uint64_t x;
} dm_sc_rng;
void dm_sc_rng_seed(dm_sc_rng *r, long seed);
long dm_sc_rng_next(dm_sc_rng *r);
/* Advances the state by k draws in O(log k). */
void dm_sc_rng_jump(dm_sc_rng *r, uint64_t k);

/* --- points ---------------------------------------------------------------------------------- */
/* A set of weighted points (Rodinia's Points). Coordinates stay where they were loaded; shuffles
 * permute the per-point arrays and `slot` (the coordinate row of point i is coord + slot[i]*dim),
 * as Rodinia's shuffle permutes Point structs holding coordinate pointers. */
typedef struct dm_sc_points {
    long num, cap;
    int dim;
    float *coord;   /* cap x dim, row-major; row slot[i] belongs to point i */
    long *slot;     /* coordinate row of point i */
    float *weight;  /* weight of point i */
    float *cost;    /* weight * distance to its centre */
    long *assign;   /* index (in this set) of its centre */
    long *id;       /* global id: index in the input stream (chunk points) or of the centre */
} dm_sc_points;

/* The arrays come from dm_malloc (common/alloc.h): release them with dm_sc_points_free only.
 * DM_ERR_NOMEM also when cap x dim floats do not fit a size_t. */
int dm_sc_points_init(dm_sc_points *p, long cap, int dim);
void dm_sc_points_free(dm_sc_points *p);
/* Resets slot[i] = i, weight 1, cost 0, assign 0 for num points (after loading coord and id). */
void dm_sc_points_reset(dm_sc_points *p, long num);
static inline const float *dm_sc_point_coord(const dm_sc_points *p, long i)
{
    return p->coord + (size_t)p->slot[i] * (size_t)p->dim;
}

/* --- the engine: one point set and the backend state that clusters it ----------------------- */
enum dm_sc_backend { DM_SC_CPU = 1, DM_SC_CUDA = 2 };
typedef struct dm_sc_engine dm_sc_engine;

/* Creates an engine for up to cap points of dim dimensions on backend (DM_SC_CPU / DM_SC_CUDA).
 * The CUDA engine allocates its device buffers here, once (DM_ERR_UNSUPPORTED without a CUDA
 * build, DM_ERR_NO_DEVICE without a GPU). */
int dm_sc_engine_create(dm_sc_engine **out, int backend, long cap, int dim);
void dm_sc_engine_destroy(dm_sc_engine *e);
/* The engine's point set (owned by the engine). Fill coord/id, then dm_sc_engine_load. */
dm_sc_points *dm_sc_engine_points(dm_sc_engine *e);
/* Takes num points from the engine's point set (coord rows 0..num-1, ids, weights set by caller
 * after dm_sc_points_reset) and makes them current: validates finiteness, computes the fixed
 * point scale, uploads to the device. DM_ERR_FORMAT for NaN/Inf coordinates or weights. */
int dm_sc_engine_load(dm_sc_engine *e, long num);
/* Backend of the engine. */
int dm_sc_engine_backend(const dm_sc_engine *e);
/* Per-engine statistics: gain calls, gain calls that opened, bytes of the gain work buffer. */
typedef struct dm_sc_stats {
    long gain_calls, gain_opens, speedy_calls, fl_rounds;
    size_t work_bytes;   /* peak bytes of the (K+1) x T gain work buffer used (CUDA) */
    char gain_policy[96];/* the tuner's instance for the gain kernel (CUDA) */
} dm_sc_stats;
void dm_sc_engine_stats(const dm_sc_engine *e, dm_sc_stats *out);

/* The function type both backends implement for the hot kernel.
 * gain: Rodinia's pgain(x, points, z, &numcenters): evaluates opening point x as a centre at
 * facility cost z. For every point the saving of moving to x (if positive) or the charge against
 * closing its current centre is summed; centres whose closing saves more than z are closed; x opens
 * when the total is negative, and then points move, centres close and *numcenters is updated.
 * *gain receives Rodinia's return value (the cost reduction, >= 0; 0 when x does not open).
 * Preconditions: a load, a speedy and dm_sc_centers_from_assign since the load. */
typedef int dm_sc_gain_fn(float *gain, dm_sc_engine *e, long x, float z, long *numcenters);
dm_sc_gain_fn dm_sc_gain_cpu, dm_sc_gain_cuda;

/* speedy: Rodinia's pspeedy(points, z, &kcenter): opens point 0, then point i with probability
 * cost_i / z in order (one rng draw per point i >= 1); returns z*k + sum of costs in *cost. */
typedef int dm_sc_speedy_fn(float *cost, dm_sc_engine *e, float z, long *kcenter, dm_sc_rng *rng);
dm_sc_speedy_fn dm_sc_speedy_cpu, dm_sc_speedy_cuda;

/* assign: for every one of n points (row-major, dim floats each) the index of its nearest centre
 * among k centres (ties: lowest index) and the squared distance; used for the per-point output. */
typedef int dm_sc_assign_fn(int *label, float *dist, const float *pts, long n, const float *centres,
                            long k, int dim);
dm_sc_assign_fn dm_sc_assign_cpu, dm_sc_assign_cuda;

/* --- local search (pkmedian) ---------------------------------------------------------------- */
typedef struct dm_sc_local_result {
    float cost;    /* Rodinia's pkmedian return: z * k + sum of weighted distances */
    float z;       /* final facility cost */
    long k;        /* centres at the end */
    int gave_up;   /* 1 when k is outside [kmin, kmax]: see dm_sc_local_search */
} dm_sc_local_result;

/* Rodinia's localSearch/pkmedian on the engine's loaded points: binary search on z between 0 and
 * hiz (total weighted distance to point 0), speedy, selectfeasible_fast, pFL rounds. Deviations:
 *  - KMAX = 1: the point nearest the points' weighted mean, the exact best single centre (Rodinia
 *    makes ITER k ln k = 0 gain calls at k = 1 and ends with speedy's centres);
 *  - n <= KMAX points: every point its own centre, not a give-up even when n < KMIN (a stream's
 *    last chunk may be short; dm_sc_run flags a final k below KMIN).
 * Give-up condition (documented, result.gave_up = 1, k may be outside [kmin, kmax]):
 *  - Rodinia's own: the z interval collapsed, loz >= 0.999 hiz, before k reached the range;
 *  - all points coincide (hiz == 0): one centre (Rodinia would loop forever);
 *  - speedy cannot reach kmin (fewer than kmin distinct points): after z was halved 200 times
 *    or reached 0 (Rodinia would loop forever).
 * pFL additionally stops after 10000 rounds (never reached in practice; logged).
 * On return the host arrays cost/assign of the points are valid (assign[i] is a centre). */
int dm_sc_local_search(dm_sc_local_result *res, dm_sc_engine *e, long kmin, long kmax,
                       dm_sc_rng *rng);

/* Rodinia's contcenters: moves each centre to the weighted mean of its members and adds their
 * weights, in point order. Host arrays. */
void dm_sc_contcenters(dm_sc_points *p);
/* Rodinia's copycenters: appends the centres of p (point order) to centres (coordinates, weight,
 * id). DM_ERR_INVALID_ARG when centres would exceed their capacity (CLUSTERSIZE too small). */
int dm_sc_copycenters(dm_sc_points *centres, const dm_sc_points *p);
/* Rodinia's selectfeasible_fast: *nfeasible candidates drawn by weight (ITER kmin ln kmin of
 * them, all points when there are fewer). feasible has room for p->num entries. */
int dm_sc_selectfeasible(int *feasible, int *nfeasible, const dm_sc_points *p, long kmin,
                         dm_sc_rng *rng);

/* --- whole runs -------------------------------------------------------------------------------- */
typedef struct dm_sc_options {
    long kmin, kmax;
    int dim;
    long n;              /* points to generate or read; 0 = the whole file */
    long chunksize;
    long clustersize;    /* room for the centres kept from all chunks */
    const char *input;   /* binary file of float[dim] records, NULL = Rodinia's generator */
    int backend;         /* DM_SC_CPU / DM_SC_CUDA */
    /* In-memory stream instead of the generator or a file (NULL: none): this rank's points, in
     * stream order (e.g. dm_sc_points_from_vectors); only coordinates and ids are read. The stream is the
     * concatenation of every rank's points in rank order; rank r's ids must be its stream
     * positions (id[i] = id[0] + i, id[0] = points held by lower ranks), and rank r clusters
     * exactly its own points. n is ignored; input must be NULL; dim must equal points->dim. */
    const dm_sc_points *points;
} dm_sc_options;
/* Rodinia's default run `10 20 256 65536 65536 1000` on the generator, CPU backend */
#define DM_SC_OPTIONS_INIT {10, 20, 256, 65536, 65536, 1000, NULL, DM_SC_CPU, NULL}

/* Validates the options against each other and against the input file: KMIN > KMAX, KMIN < 1,
 * DIM < 1, CHUNKSIZE < 1, CLUSTERSIZE < KMAX, N < 0, N == 0 without input, a file whose size is
 * not a multiple of DIM floats ("DIM mismatch"), a file shorter than N points; with in-memory
 * points: input also set, DIM != points->dim, ids not consecutive. Fills *n_total with the
 * number of points of the stream (in-memory points: this rank's count; dm_sc_run sums over the
 * ranks). Messages name the file. Not collective (dm_sc_run agrees on its outcome over the ranks). */
int dm_sc_options_check(long *n_total, const dm_sc_options *o);

/* The result of a run: the final centres and the total cost on every rank, plus each rank's labels. */
typedef struct dm_sc_result {
    long k;              /* final centres */
    int dim;
    float *centres;      /* k x dim */
    float *weights;      /* k */
    long *centre_ids;    /* k: stream index of the point each centre grew from */
    long n_local, first_local; /* this rank's points: [first_local, first_local + n_local) */
    int *labels;         /* n_local: nearest final centre of each of this rank's points */
    float *dist;         /* n_local: squared distance of each of this rank's points to it */
    double total_cost;   /* sum over all points of the squared distance to its centre (all ranks) */
    double chunk_cost_first; /* pkmedian cost of this rank's first chunk (Rodinia's figure) */
    long chunks;         /* chunks clustered on this rank */
    long kept;           /* centres kept before the final clustering (all ranks) */
    int gave_up;         /* any local search gave up (all ranks), or the final k is outside
                          * [kmin, kmax] (fewer points in all than kmin) */
    dm_sc_stats stats;   /* this rank's engine statistics */
    dm_sc_stats stats_all; /* the counts summed over the ranks, work_bytes the largest, the
                            * policy this rank's */
} dm_sc_result;
void dm_sc_result_free(dm_sc_result *r);

/* Runs STREAM over the stream described by o on the ranks of comm (an MPI_Comm passed as a
 * pointer so that this header stays MPI-free; NULL = MPI_COMM_WORLD). Rank r clusters points
 * [n r / P, n (r+1) / P) (in-memory points: its own) chunk by chunk; the weighted centres are
 * reduced up a binary tree (a receiver re-clusters when the union exceeds clustersize) and
 * clustered again on rank 0; the final centres are broadcast and every rank labels its points.
 * Collective. Every rank returns the same status (a failure on one rank, e.g. an allocation's
 * DM_ERR_NOMEM, is agreed before the next collective; the ranks that only learnt of it record
 * "another rank failed", marked remote); after a failure *res holds nothing to free. Host memory
 * comes from dm_malloc (counted for the report): res's arrays are released by dm_sc_result_free. */
int dm_sc_run(dm_sc_result *res, const dm_sc_options *o, void *comm);

/* Reads points [first, first + count) of the stream into out (count x dim floats): Rodinia's
 * generator (point j = draws j*dim .. j*dim+dim-1 of srand48(1), each lrand48()/(float)INT_MAX),
 * the binary file (DM_ERR_FORMAT naming it for a short read or a NaN / infinite coordinate), or the
 * in-memory points (only this rank's: DM_ERR_INVALID_ARG outside them). */
int dm_sc_stream_read(float *out, const dm_sc_options *o, long first, long count);

/* Signed feature hashing (Weinberger et al.) of sparse document vectors into dim dense
 * dimensions. The hash of term id t is splitmix64's output for state t:
 *   h = t + 0x9E3779B97F4A7C15; h = (h ^ h >> 30) * 0xBF58476D1CE4E5B9;
 *   h = (h ^ h >> 27) * 0x94D049BB133111EB; h ^= h >> 31   (64-bit unsigned arithmetic)
 * and term t adds sign * value to dimension h mod dim, sign = -1 when bit 63 of h is set, else +1.
 * It depends on the term id only (vocabulary ids are rank-independent, tfidf), so a document
 * hashes to the same point whatever the rank layout. Terms are added in row order (term-sorted
 * rows: ascending term id). out: n_docs x dim, zeroed here. Documents are hashed in parallel
 * (OpenMP); the result does not depend on the number of threads. */
void dm_sc_hash_vectors(float *out, const uint64_t *row_off, const uint32_t *terms,
                        const float *values, long n_docs, int dim);

/* The points of document vectors: row r of v becomes point r with id v->row_base + r, weight 1
 * and the dim coordinates of dm_sc_hash_vectors (slot[i] = i), ready for dm_sc_options.points.
 * *out is initialised here (capacity max(1, n_rows)); free with dm_sc_points_free.
 * Errors: DM_ERR_INVALID_ARG for dim < 1 ("DIM must be >= 1") or more rows than a long holds,
 * DM_ERR_NOMEM. */
int dm_sc_points_from_vectors(dm_sc_points *out, const dm_vectors *v, int dim);

/* Tests and benchmarks: the number of compiled instances of the gain kernel, a description of
 * instance i, and forcing instance i for engines loaded afterwards (-1: the tuner's choice). */
int dm_sc_cuda_gain_instances(void);
const char *dm_sc_cuda_gain_instance_name(int i, char *buf, size_t len);
int dm_sc_cuda_force_gain_instance(int i);

/* The kernels of the module for the tuner (CUDA builds; DM_OK and nothing registered otherwise). */
int dm_sc_tune_register(void);

#ifdef __cplusplus
}
#endif
#endif
