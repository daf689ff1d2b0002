/* The tuned device-to-device copy: "common.copy" (uint4 items, space block {128,256,512,1024} x
 * rake {1,2,4,8} x consecutive/strided, default block=256 rake=1 strided) and
 * "common.copy_bytes" (byte items for misaligned copies and tails, one instance), with the bench
 * hooks the tuner times and checks. Reference: dm_copy_cpu (memcpy). */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/status.h"
#include "common/tune/copy.h"
#include "common/tune/copy_kernels.cuh"
#include "common/cuda_check.h"

namespace {

template <typename T, int B, int R, bool S>
int copy_launch(const void *args, size_t n, void *stream)
{
    const dm_copy_args *a = static_cast<const dm_copy_args *>(args);
    size_t items = n / sizeof(T);
    if (items == 0) return DM_OK;
    if (!a || !a->dst || !a->src) return DM_ERR(DM_ERR_INVALID_ARG, "copy: NULL pointer");
    /* one launch covers at most 2^31-1 blocks; larger copies are split */
    const size_t max_items = (size_t)2147483647u * B * R;
    T *dst = static_cast<T *>(a->dst);
    const T *src = static_cast<const T *>(a->src);
    for (size_t off = 0; off < items; off += max_items) {
        size_t cnt = items - off < max_items ? items - off : max_items;
        size_t threads = (cnt + R - 1) / R;
        unsigned blocks = (unsigned)((threads + B - 1) / B);
        dm_copy_kernel<T, B, R, S><<<blocks, B, 0, static_cast<cudaStream_t>(stream)>>>(
            dst + off, src + off, cnt);
        DM_CUDA_TRY(cudaGetLastError());
    }
    return DM_OK;
}

#define DM_COPY_INST(T, B, R, S)                                                                   \
    {{B, R, S, DM_LAYOUT_NONE, 0}, copy_launch<T, B, R, S>,                                        \
     reinterpret_cast<const void *>(&dm_copy_kernel<T, B, R, S>), 0}
#define DM_COPY_RAKES(T, B, S)                                                                     \
    DM_COPY_INST(T, B, 1, S), DM_COPY_INST(T, B, 2, S), DM_COPY_INST(T, B, 4, S),                  \
        DM_COPY_INST(T, B, 8, S)
#define DM_COPY_BLOCK(T, B) DM_COPY_RAKES(T, B, false), DM_COPY_RAKES(T, B, true)

const dm_tune_instance g_copy_instances[] = {
    DM_COPY_BLOCK(uint4, 128), DM_COPY_BLOCK(uint4, 256), DM_COPY_BLOCK(uint4, 512),
    DM_COPY_BLOCK(uint4, 1024)};
/* block 256 (index 8..15), rake 1, strided (+4) */
const int g_copy_default = 12;

const dm_tune_instance g_copy_bytes_instances[] = {DM_COPY_INST(unsigned char, 256, 4, true)};

/* ---- bench hooks: seeded source, poisoned destination ------------------------------------- */

struct copy_bench {
    void *src, *dst;
    size_t n, cap;
};

uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int copy_bench_create(void **state, size_t n, uint64_t seed)
{
    *state = NULL;
    copy_bench *b = static_cast<copy_bench *>(dm_calloc(1, sizeof *b));
    if (!b) return DM_ERR(DM_ERR_NOMEM, "copy bench: out of memory");
    b->n = b->cap = n;
    size_t words = (n + 7) / 8 + 1;
    uint64_t *host = static_cast<uint64_t *>(dm_malloc(words * 8));
    int rc = host ? DM_OK : DM_ERR(DM_ERR_NOMEM, "copy bench: out of memory (%zu bytes)", words * 8);
    if (rc == DM_OK) {
        uint64_t s = seed;
        for (size_t i = 0; i < words; i++) host[i] = splitmix64(&s);
        rc = dm_device_alloc(&b->src, words * 8);
    }
    if (rc == DM_OK) rc = dm_device_alloc(&b->dst, words * 8);
    if (rc == DM_OK) {
        cudaError_t e;
        if ((e = cudaMemcpy(b->src, host, words * 8, cudaMemcpyHostToDevice)) != cudaSuccess ||
            (e = cudaMemset(b->dst, 0xA5, words * 8)) != cudaSuccess ||
            (e = cudaDeviceSynchronize()) != cudaSuccess)
            rc = DM_ERR(DM_ERR_CUDA, "copy bench (%zu bytes): %s", n, cudaGetErrorString(e));
    }
    dm_free(host);
    if (rc != DM_OK) {
        dm_device_free(b->src);
        dm_device_free(b->dst);
        dm_free(b);
        return rc;
    }
    *state = b;
    return DM_OK;
}

int copy_bench_run(void *state, const dm_tune_instance *inst, void *stream)
{
    copy_bench *b = static_cast<copy_bench *>(state);
    dm_copy_args a = {b->dst, b->src};
    return inst->launch(&a, b->n, stream);
}

int copy_bench_resize(void *state, size_t n)
{
    copy_bench *b = static_cast<copy_bench *>(state);
    if (n > b->cap) return DM_ERR(DM_ERR_INVALID_ARG, "copy bench: resize to %zu > %zu", n, b->cap);
    b->n = n;
    return DM_OK;
}

int copy_bench_output(void *state, void *host, size_t *nbytes)
{
    copy_bench *b = static_cast<copy_bench *>(state);
    *nbytes = b->n;
    if (!host || b->n == 0) return DM_OK;
    DM_CUDA_TRY(cudaMemcpy(host, b->dst, b->n, cudaMemcpyDeviceToHost));
    return DM_OK;
}

void copy_bench_destroy(void *state)
{
    copy_bench *b = static_cast<copy_bench *>(state);
    if (!b) return;
    dm_device_free(b->src);
    dm_device_free(b->dst);
    dm_free(b);
}

dm_tune_kernel make_kernel(const char *name, const char *desc, const dm_tune_instance *inst,
                           int n_inst, int def, double work_per_item)
{
    dm_tune_kernel k;
    memset(&k, 0, sizeof k);
    k.name = name;
    k.description = desc;
    k.work_unit = "bytes";
    k.instances = inst;
    k.n_instances = n_inst;
    k.default_instance = def;
    k.bench_create = copy_bench_create;
    k.bench_run = copy_bench_run;
    k.bench_output = copy_bench_output;
    k.bench_destroy = copy_bench_destroy;
    k.tolerance = 0.0;
    /* 1 GiB: the size of a device-to-device bandwidth measurement (docmine info --bandwidth) */
    k.bench_default_n = (size_t)1 << 30;
    k.work_per_item = work_per_item;
    k.bench_resize = copy_bench_resize;
    return k;
}

const dm_tune_kernel g_copy = make_kernel(
    "common.copy", "device-to-device copy of 16-byte items (memory-bound archetype)",
    g_copy_instances, (int)(sizeof g_copy_instances / sizeof g_copy_instances[0]), g_copy_default,
    16.0);
dm_tune_kernel make_bytes_kernel(void)
{
    dm_tune_kernel k = make_kernel(
        "common.copy_bytes", "device-to-device copy of bytes (misaligned copies and tails)",
        g_copy_bytes_instances, 1, 0, 1.0);
    k.bench_default_n = (size_t)16 << 20; /* tails and misaligned copies are small */
    return k;
}
const dm_tune_kernel g_copy_bytes = make_bytes_kernel();

} // namespace

extern "C" const dm_tune_kernel *dm_copy_tune_kernel(void) { return &g_copy; }
extern "C" const dm_tune_kernel *dm_copy_bytes_tune_kernel(void) { return &g_copy_bytes; }

extern "C" int dm_copy_tune_register(void)
{
    DM_TRY(dm_tune_register(&g_copy));
    return dm_tune_register(&g_copy_bytes);
}

extern "C" int dm_copy_cuda(void *dst, const void *src, size_t bytes, void *stream)
{
    if (bytes == 0) return DM_OK;
    if (!dst || !src) return DM_ERR(DM_ERR_INVALID_ARG, "copy: NULL pointer");
    size_t body = 0;
    if ((uintptr_t)dst % 16 == 0 && (uintptr_t)src % 16 == 0) body = bytes & ~(size_t)15;
    if (body) {
        dm_copy_args a = {dst, src};
        const dm_tune_instance *inst = dm_tune_select(&g_copy, body);
        DM_TRY(inst->launch(&a, body, stream));
    }
    if (bytes > body) {
        dm_copy_args a = {static_cast<char *>(dst) + body, static_cast<const char *>(src) + body};
        const dm_tune_instance *inst = dm_tune_select(&g_copy_bytes, bytes - body);
        DM_TRY(inst->launch(&a, bytes - body, stream));
    }
    return DM_OK;
}
