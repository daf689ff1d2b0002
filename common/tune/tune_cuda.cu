/* The tuner's CUDA measurement layer: device identity and limits (cudaGetDeviceProperties),
 * instance attributes (cudaFuncGetAttributes, cudaOccupancyMaxActiveBlocksPerMultiprocessor),
 * timing with CUDA events (warm-up, batches of at least ~0.2 ms, median of repeats) and the
 * output check of a candidate against the default on fresh tuning inputs. The search itself is
 * search.c's dm_tune_search. Reference: the kernel's default instance. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/status.h"
#include "common/tune/tune.h"
#include "common/cuda_check.h"
#include "common/tune/tune_gpu.h"
#include "common/tune/tune_model.h"

extern "C" int dm_tune_gpu_current(dm_tune_gpu *out)
{
    int count = 0, dev = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        cudaGetLastError(); /* clear the sticky "no device" error */
        return DM_ERR(DM_ERR_NO_DEVICE, "tune: no CUDA device");
    }
    DM_CUDA_TRY(cudaGetDevice(&dev));
    cudaDeviceProp p;
    DM_CUDA_TRY(cudaGetDeviceProperties(&p, dev));
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%.*s", (int)sizeof out->name - 1, p.name);
    out->cc = p.major * 10 + p.minor;
    out->limits.sms = p.multiProcessorCount;
    out->limits.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
    out->limits.max_blocks_per_sm = p.maxBlocksPerMultiProcessor;
    out->limits.max_threads_per_block = p.maxThreadsPerBlock;
    out->limits.regs_per_sm = p.regsPerMultiprocessor;
    out->limits.smem_per_sm = p.sharedMemPerMultiprocessor;
    out->limits.smem_per_block = p.sharedMemPerBlockOptin;
    return DM_OK;
}

extern "C" int dm_tune_gpu_attributes(dm_tune_attr *out, const dm_tune_instance *inst)
{
    memset(out, 0, sizeof *out);
    out->active_blocks_per_sm = -1;
    if (!inst->func) {
        out->smem_dynamic = inst->smem_per_block;
        out->max_threads_per_block = 1024;
        return DM_OK; /* no function to ask: the model estimates */
    }
    cudaFuncAttributes a;
    DM_CUDA_TRY(cudaFuncGetAttributes(&a, inst->func));
    out->regs_per_thread = a.numRegs;
    out->smem_static = a.sharedSizeBytes;
    out->smem_dynamic = inst->smem_per_block;
    out->max_threads_per_block = a.maxThreadsPerBlock;
    if (inst->policy.block <= a.maxThreadsPerBlock) {
        int blocks = 0;
        DM_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &blocks, inst->func, inst->policy.block, inst->smem_per_block));
        out->active_blocks_per_sm = blocks;
    } else {
        out->active_blocks_per_sm = 0;
    }
    return DM_OK;
}

namespace {

struct cuda_ctx {
    const dm_tune_kernel *k;
    const dm_tune_options *opt;
    cudaStream_t stream;
    cudaEvent_t start, stop;
    void *state; /* timing input */
    size_t state_n, state_cap;
    double setup_s; /* seconds spent creating tuning inputs (and taking ref from one) */
    int n_created;  /* tuning inputs created */
    unsigned char *ref; /* default instance's output on a fresh input of ref_n */
    size_t ref_n, ref_bytes;
    size_t check_n; /* the search's check size, whose fresh timing input gives ref (0: none) */
};

double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int create_timed(cuda_ctx *c, void **st, size_t n)
{
    double t0 = wall();
    c->n_created++;
    int rc = c->k->bench_create(st, n, c->opt->seed);
    /* the hooks may fill the input with asynchronous copies on any stream: finish them */
    cudaError_t e = rc == DM_OK ? cudaDeviceSynchronize() : cudaSuccess;
    if (e != cudaSuccess) {
        c->k->bench_destroy(*st);
        *st = NULL;
        rc = DM_ERR(DM_ERR_CUDA, "tune: %s: creating the tuning input: %s", c->k->name,
                    cudaGetErrorString(e));
    }
    c->setup_s += wall() - t0;
    return rc;
}

void destroy_timed(cuda_ctx *c, void *st)
{
    double t0 = wall();
    c->k->bench_destroy(st);
    c->setup_s += wall() - t0;
}

/* Runs instance i once on the input st and copies its output into a malloc'ed buffer. */
int output_of(cuda_ctx *c, void *st, int i, unsigned char **out, size_t *bytes)
{
    *out = NULL;
    int rc = c->k->bench_run(st, &c->k->instances[i], c->stream);
    cudaError_t e = rc == DM_OK ? cudaStreamSynchronize(c->stream) : cudaSuccess;
    if (e != cudaSuccess)
        rc = DM_ERR(DM_ERR_CUDA, "tune: %s instance %d: %s", c->k->name, i, cudaGetErrorString(e));
    if (rc == DM_OK) rc = c->k->bench_output(st, NULL, bytes);
    if (rc == DM_OK) {
        *out = static_cast<unsigned char *>(malloc(*bytes ? *bytes : 1));
        if (!*out) rc = DM_ERR(DM_ERR_NOMEM, "tune: out of memory");
    }
    if (rc == DM_OK) rc = c->k->bench_output(st, *out, bytes);
    if (rc != DM_OK) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

/* The timing input for n units: a prefix of the existing one when the kernel can resize. A fresh
 * timing input of the check size also gives the checks their reference, the default's output on
 * a fresh input, before anything else runs on it: a check then creates one fresh input (the
 * candidate's) instead of two. */
int ensure_state(cuda_ctx *c, size_t n)
{
    if (c->state && c->state_n == n) return DM_OK;
    if (c->state && c->k->bench_resize && n <= c->state_cap) {
        DM_TRY(c->k->bench_resize(c->state, n));
        c->state_n = n;
        return DM_OK;
    }
    if (c->state) destroy_timed(c, c->state);
    c->state = NULL;
    DM_TRY(create_timed(c, &c->state, n));
    c->state_n = c->state_cap = n;
    if (!c->ref && c->check_n == n) {
        double t0 = wall(); /* not timing work: with the inputs' seconds */
        int rc = output_of(c, c->state, c->k->default_instance, &c->ref, &c->ref_bytes);
        c->setup_s += wall() - t0;
        DM_TRY(rc);
        c->ref_n = n;
    }
    return DM_OK;
}

int timed_batch(cuda_ctx *c, const dm_tune_instance *inst, int batch, double *ms)
{
    DM_CUDA_TRY(cudaEventRecord(c->start, c->stream));
    for (int b = 0; b < batch; b++) DM_TRY(c->k->bench_run(c->state, inst, c->stream));
    DM_CUDA_TRY(cudaEventRecord(c->stop, c->stream));
    DM_CUDA_TRY(cudaEventSynchronize(c->stop));
    float f = 0.0f;
    DM_CUDA_TRY(cudaEventElapsedTime(&f, c->start, c->stop));
    *ms = (double)f / batch;
    return DM_OK;
}

int op_measure(void *ctx, int i, size_t n, double *ms)
{
    cuda_ctx *c = static_cast<cuda_ctx *>(ctx);
    const dm_tune_instance *inst = &c->k->instances[i];
    DM_TRY(ensure_state(c, n));
    for (int w = 0; w < c->opt->warmup; w++) DM_TRY(c->k->bench_run(c->state, inst, c->stream));
    double one = 0.0;
    DM_TRY(timed_batch(c, inst, 1, &one));
    /* batch short launches so that one sample spans about 50 us (event resolution ~0.5 us) */
    /* (a first sample of 0 ms is below the events' resolution: the largest batch, not 1) */
    int batch = one < 0.05 ? (one > 0.0 ? (int)(0.05 / one) + 1 : 256) : 1;
    if (batch > 256) batch = 256;
    int reps = c->opt->repeats > 0 ? c->opt->repeats : 1;
    double *v = static_cast<double *>(malloc((size_t)reps * sizeof *v));
    if (!v) return DM_ERR(DM_ERR_NOMEM, "tune: out of memory");
    int rc = DM_OK;
    for (int r = 0; r < reps && rc == DM_OK; r++) rc = timed_batch(c, inst, batch, &v[r]);
    if (rc == DM_OK) *ms = dm_tune_median(v, reps);
    free(v);
    return rc;
}

/* Output of instance i on a fresh tuning input of n units into a malloc'ed buffer. */
int fresh_output(cuda_ctx *c, int i, size_t n, unsigned char **out, size_t *bytes)
{
    void *st = NULL;
    *out = NULL;
    DM_TRY(create_timed(c, &st, n));
    int rc = output_of(c, st, i, out, bytes);
    destroy_timed(c, st);
    return rc;
}

int op_check(void *ctx, int i, size_t n, int *same)
{
    cuda_ctx *c = static_cast<cuda_ctx *>(ctx);
    if (!c->ref || c->ref_n != n) {
        free(c->ref);
        c->ref = NULL;
        DM_TRY(fresh_output(c, c->k->default_instance, n, &c->ref, &c->ref_bytes));
        c->ref_n = n;
    }
    unsigned char *out;
    size_t bytes;
    DM_TRY(fresh_output(c, i, n, &out, &bytes));
    *same = bytes == c->ref_bytes && dm_tune_outputs_equal(c->ref, out, bytes, c->k->tolerance);
    free(out);
    return DM_OK;
}

double op_setup_seconds(void *ctx) { return static_cast<cuda_ctx *>(ctx)->setup_s; }

int op_attributes(void *ctx, int i, dm_tune_attr *out)
{
    cuda_ctx *c = static_cast<cuda_ctx *>(ctx);
    return dm_tune_gpu_attributes(out, &c->k->instances[i]);
}

} // namespace

/* The tuner's stream is a blocking one, so that work the bench hooks issue on the legacy default
 * stream (cudaMemcpy, cudaMemset) is ordered with the timed launches. */
extern "C" int dm_tune_run(dm_tune_result *res, const dm_tune_kernel *k, size_t n,
                           const dm_tune_options *opt)
{
    if (!res || !k || !opt || n == 0) return DM_ERR(DM_ERR_INVALID_ARG, "tune: bad arguments");
    if (!k->bench_create || !k->bench_run || !k->bench_output || !k->bench_destroy)
        return DM_ERR(DM_ERR_UNSUPPORTED, "tune: kernel %s has no tuning workload", k->name);
    dm_tune_gpu gpu;
    DM_TRY(dm_tune_gpu_current(&gpu));
    cuda_ctx c;
    memset(&c, 0, sizeof c);
    c.k = k;
    c.opt = opt;
    if (opt->mode != DM_TUNE_OFF) c.check_n = dm_tune_check_size(opt, n);
    DM_CUDA_TRY(cudaStreamCreate(&c.stream));
    int rc = DM_OK;
    cudaError_t e;
    if ((e = cudaEventCreate(&c.start)) != cudaSuccess || (e = cudaEventCreate(&c.stop)) != cudaSuccess)
        rc = DM_ERR(DM_ERR_CUDA, "tune: cudaEventCreate: %s", cudaGetErrorString(e));
    if (rc == DM_OK) {
        dm_tune_ops ops;
        memset(&ops, 0, sizeof ops);
        ops.ctx = &c;
        ops.measure = op_measure;
        ops.check = op_check;
        ops.attributes = op_attributes;
        ops.limits = gpu.limits;
        ops.setup_seconds = op_setup_seconds;
        /* one input at the target size, whose prefixes serve the smaller sizes */
        if (k->bench_resize) rc = ensure_state(&c, n);
        if (rc == DM_OK) rc = dm_tune_search(res, k, n, opt, &ops);
        res->n_inputs = c.n_created;
        res->inputs_s = c.setup_s;
    }
    if (c.state) k->bench_destroy(c.state);
    free(c.ref);
    if (c.start) cudaEventDestroy(c.start);
    if (c.stop) cudaEventDestroy(c.stop);
    e = cudaStreamDestroy(c.stream);
    if (rc == DM_OK && e != cudaSuccess)
        rc = DM_ERR(DM_ERR_CUDA, "tune: cudaStreamDestroy: %s", cudaGetErrorString(e));
    return rc;
}

extern "C" int dm_tune_check_instances(int *n_bad, int *bad, int max_bad, const dm_tune_kernel *k,
                                       size_t n, uint64_t seed)
{
    if (!n_bad || !k || (max_bad > 0 && !bad)) return DM_ERR(DM_ERR_INVALID_ARG, "tune: bad arguments");
    *n_bad = 0;
    if (!k->bench_create || !k->bench_run || !k->bench_output || !k->bench_destroy)
        return DM_ERR(DM_ERR_UNSUPPORTED, "tune: kernel %s has no tuning workload", k->name);
    dm_tune_gpu gpu;
    DM_TRY(dm_tune_gpu_current(&gpu));
    dm_tune_options opt = DM_TUNE_OPTIONS_INIT;
    opt.seed = seed;
    cuda_ctx c;
    memset(&c, 0, sizeof c);
    c.k = k;
    c.opt = &opt;
    DM_CUDA_TRY(cudaStreamCreate(&c.stream));
    int rc = DM_OK;
    /* the default too: a second run on a fresh copy of the same input must give the same
     * output, else the comparison of the others means nothing (a race or an output hook that
     * depends on the order of atomic operations); it is also the only check a kernel with one
     * instance gets */
    for (int i = 0; i < k->n_instances && rc == DM_OK; i++) {
        int same = 0;
        rc = op_check(&c, i, n, &same);
        if (rc == DM_OK && !same) {
            if (*n_bad < max_bad) bad[*n_bad] = i;
            (*n_bad)++;
        }
    }
    free(c.ref);
    cudaError_t e = cudaStreamDestroy(c.stream);
    if (rc == DM_OK && e != cudaSuccess)
        rc = DM_ERR(DM_ERR_CUDA, "tune: cudaStreamDestroy: %s", cudaGetErrorString(e));
    return rc;
}
