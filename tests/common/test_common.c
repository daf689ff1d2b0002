/* Unit tests of common/: status messages, counting allocators, the RNG against the Random123
 * known answers, timers, atomic files, progress formatting, the tuner registry and modes, the
 * clustering metrics (NMI, ARI, purity) against hand-computed values. */
#include <CUnit/CUnit.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/report.h"
#include "common/rng.h"
#include "common/status.h"
#include "common/timer.h"
#include "common/tune/tune.h"
#include "testutil.h"

static int fails_with_io(void) { return DM_ERR(DM_ERR_IO, "reading %s failed", "x.txt"); }
static int passes_up(void)
{
    DM_TRY(fails_with_io());
    return DM_OK;
}

static void test_status_message(void)
{
    dm_error_clear();
    CU_ASSERT_EQUAL(dm_error_code(), DM_OK);
    CU_ASSERT_STRING_EQUAL(dm_error_message(), "");
    CU_ASSERT_EQUAL(passes_up(), DM_ERR_IO);
    CU_ASSERT_EQUAL(dm_error_code(), DM_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "reading x.txt failed"));
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "DM_ERR_IO"));
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "test_common.c:"));
    CU_ASSERT_FALSE(dm_error_is_remote());
    dm_error_mark_remote();
    CU_ASSERT_TRUE(dm_error_is_remote());
    dm_status_set_rank(3);
    DM_ERR(DM_ERR_MPI, "boom");
    CU_ASSERT_FALSE(dm_error_is_remote());
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "rank 3"));
    dm_status_set_rank(-1);
    CU_ASSERT_STRING_EQUAL(dm_status_name(DM_ERR_FORMAT), "DM_ERR_FORMAT");
    CU_ASSERT_STRING_EQUAL(dm_status_name(-999), "DM_ERR_UNKNOWN");
    /* a path of 4095 bytes (PATH_MAX - 1) and the problem after it: the whole message kept (768
     * bytes of body cut the path and never said the problem) */
    static char path[4096];
    memset(path, 'p', sizeof path - 1);
    path[sizeof path - 1] = 0;
    DM_ERR(DM_ERR_IO, "%s: cannot rename to %s: No space left on device", path, path);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "p: No space left on device [DM_ERR_IO"));
    dm_error_clear();
}

/* Phases' peaks nest: an inner phase sees only its own peak, the outer one includes the inner's,
 * and the run's peak is put back (the largest of all). Sizes far above the test's other blocks. */
static void test_mem_phases(void)
{
    const size_t MB = 1u << 20;
    char *big = dm_malloc(64 * MB); /* the run's peak, before the phases */
    CU_ASSERT_PTR_NOT_NULL_FATAL(big);
    dm_free(big);
    size_t base = dm_mem_current(DM_MEM_HOST), run_peak = dm_mem_peak(DM_MEM_HOST);
    CU_ASSERT_TRUE(run_peak >= base + 64 * MB);
    dm_mem_phase outer, inner;
    dm_mem_phase_begin(&outer);
    CU_ASSERT_EQUAL(outer.start[DM_MEM_HOST], base);
    char *b = dm_malloc(16 * MB);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    dm_free(b);
    char *keep = dm_malloc(2 * MB);
    CU_ASSERT_PTR_NOT_NULL_FATAL(keep);
    dm_mem_phase_begin(&inner);
    char *c = dm_malloc(4 * MB);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    dm_free(c);
    dm_mem_phase_end(&inner);
    CU_ASSERT_EQUAL(inner.start[DM_MEM_HOST], base + 2 * MB);
    CU_ASSERT_EQUAL(inner.peak[DM_MEM_HOST], base + 6 * MB); /* not the outer phase's 16 MB */
    dm_free(keep);
    dm_mem_phase_end(&outer);
    CU_ASSERT_EQUAL(outer.peak[DM_MEM_HOST], base + 16 * MB); /* not the run's 64 MB */
    CU_ASSERT_EQUAL(dm_mem_peak(DM_MEM_HOST), run_peak);      /* put back */
    CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_HOST), base);
}

static void test_alloc_counts(void)
{
    size_t base = dm_mem_current(DM_MEM_HOST), peak0 = dm_mem_peak(DM_MEM_HOST);
    char *a = dm_malloc(1000);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_HOST), base + 1000);
    memset(a, 7, 1000);
    a = dm_realloc(a, 5000);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_EQUAL(a[999], 7);
    CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_HOST), base + 5000);
    CU_ASSERT_TRUE(dm_mem_peak(DM_MEM_HOST) >= base + 5000 && dm_mem_peak(DM_MEM_HOST) >= peak0);
    int *z = dm_calloc(100, sizeof(int));
    CU_ASSERT_PTR_NOT_NULL_FATAL(z);
    int sum = 0;
    for (int i = 0; i < 100; i++) sum += z[i];
    CU_ASSERT_EQUAL(sum, 0);
    dm_free(z);
    dm_free(a);
    CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_HOST), base);
    /* overflowing requests fail with NOMEM instead of wrapping */
    CU_ASSERT_PTR_NULL(dm_calloc((size_t)-1 / 2, 4));
    CU_ASSERT_EQUAL(dm_error_code(), DM_ERR_NOMEM);
    CU_ASSERT_PTR_NULL(dm_malloc((size_t)-1));
    char *d = dm_strdup("docmine");
    CU_ASSERT_STRING_EQUAL(d, "docmine");
    dm_free(d);
}

static void test_alloc_tracking(void)
{
    /* the address -> size map behind pinned/device accounting, through growth and tombstones */
    size_t base = dm_mem_current(DM_MEM_PINNED);
    enum { N = 1000 };
    static char blocks[N];
    for (int i = 0; i < N; i++) CU_ASSERT_EQUAL(dm_mem_track(DM_MEM_PINNED, &blocks[i], (size_t)i + 1), DM_OK);
    CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_PINNED), base + (size_t)N * (N + 1) / 2);
    for (int i = 0; i < N; i += 2) CU_ASSERT_EQUAL(dm_mem_untrack(DM_MEM_PINNED, &blocks[i]), (size_t)i + 1);
    CU_ASSERT_EQUAL(dm_mem_untrack(DM_MEM_PINNED, &blocks[0]), 0);     /* already gone */
    CU_ASSERT_EQUAL(dm_mem_untrack(DM_MEM_DEVICE, &blocks[1]), 0);     /* other kind */
    for (int i = 1; i < N; i += 2) CU_ASSERT_EQUAL(dm_mem_untrack(DM_MEM_PINNED, &blocks[i]), (size_t)i + 1);
    CU_ASSERT_EQUAL(dm_mem_current(DM_MEM_PINNED), base);
    CU_ASSERT_TRUE(dm_mem_peak(DM_MEM_PINNED) >= base + (size_t)N * (N + 1) / 2);
}

static void test_mem_prefault(void)
{
    /* a fresh mapping (small pages): the bytes already written stay, and every page of the range
     * is resident afterwards, also the ones the range only partly covers */
    const size_t page = 4096, n = (size_t)12 << 20;
    unsigned char *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CU_ASSERT_FATAL(m != MAP_FAILED);
    madvise(m, n, MADV_NOHUGEPAGE);
    unsigned char *vec = malloc(n / page);
    CU_ASSERT_PTR_NOT_NULL_FATAL(vec);
    m[5] = 11;
    m[n - 3] = 22;
    CU_ASSERT_EQUAL(mincore(m, n, vec), 0);
    size_t resident = 0;
    for (size_t k = 0; k < n / page; k++) resident += vec[k] & 1;
    CU_ASSERT_TRUE(resident < n / page / 2);
    dm_mem_prefault(m + 3, n - 5); /* unaligned at both ends */
    CU_ASSERT_EQUAL(mincore(m, n, vec), 0);
    resident = 0;
    for (size_t k = 0; k < n / page; k++) resident += vec[k] & 1;
    CU_ASSERT_EQUAL(resident, n / page);
    CU_ASSERT_EQUAL(m[5], 11);
    CU_ASSERT_EQUAL(m[n - 3], 22);
    CU_ASSERT_EQUAL(m[n / 2], 0);
    /* under 4 MiB: left alone */
    unsigned char *s = m; /* reuse the address space: drop the pages, then a small range */
    CU_ASSERT_EQUAL(madvise(s, n, MADV_DONTNEED), 0);
    dm_mem_prefault(s, (size_t)1 << 20);
    CU_ASSERT_EQUAL(mincore(s, (size_t)1 << 20, vec), 0);
    resident = 0;
    for (size_t k = 0; k < ((size_t)1 << 20) / page; k++) resident += vec[k] & 1;
    CU_ASSERT_EQUAL(resident, 0);
    dm_mem_prefault(NULL, n); /* no block: nothing */
    free(vec);
    munmap(m, n);
}

/* n bytes of a xorshift stream. */
static void fill_random(unsigned char *b, size_t n, uint64_t x)
{
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b[i] = (unsigned char)x;
    }
}

/* The staged copies' host side (dm_mem_copy_threads) gives the same bytes for every thread count
 * (0: all; more than OpenMP has; an odd count over an odd length), and writes nothing past n. */
static void test_mem_copy_thread_counts(void)
{
    const size_t n = ((size_t)5 << 20) + 123, pad = 64;
    unsigned char *src = malloc(n), *dst = malloc(n + pad);
    CU_ASSERT_FATAL(src && dst);
    fill_random(src, n, 88172645463325252ull);
    const int threads[] = {0, 1, 2, 3, 8, 1000};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        memset(dst, 0xA5, n + pad);
        dm_mem_copy_threads(dst, src, n, threads[t]);
        CU_ASSERT(memcmp(dst, src, n) == 0);
        size_t past = 0;
        for (size_t i = n; i < n + pad; i++) past += dst[i] != 0xA5;
        CU_ASSERT_EQUAL(past, 0);
    }
    free(src);
    free(dst);
}

/* Batched copies (dm_mem_copy_pieces): pieces of 0 bytes, of one, of odd sizes, of a chunk and a
 * byte either side of one, and one of several chunks, in one batch under the serial size and in
 * one above it, with any thread count: every piece's bytes, nothing past any piece. */
static void test_mem_copy_pieces(void)
{
    const size_t ch = (size_t)256 << 10;
    const size_t sizes[] = {0, 1, 7, ch - 1, ch, ch + 1, 3 * ch + 5, 0, 13, 2 * ch};
    enum { K = sizeof sizes / sizeof *sizes, PAD = 16 };
    size_t total = 0;
    for (int k = 0; k < K; k++) total += sizes[k] + PAD;
    unsigned char *src = malloc(total), *dst = malloc(total);
    CU_ASSERT_FATAL(src && dst);
    fill_random(src, total, 0x9e3779b97f4a7c15ull);
    const int threads[] = {0, 1, 2, 3, 8, 1000};
    for (int few = 0; few < 2; few++)
        for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
            dm_copy_piece p[K];
            size_t at = 0, n = 0;
            for (int k = 0; k < K; k++) {
                size_t len = few ? sizes[k] % 1000 : sizes[k]; /* few: under 1 MiB in all */
                p[n++] = (dm_copy_piece){dst + at, src + at, len};
                at += len + PAD; /* a gap after each piece that must stay untouched */
            }
            memset(dst, 0xA5, total);
            dm_mem_copy_pieces(p, n, threads[t]);
            size_t wrong = 0, past = 0;
            for (size_t k = 0; k < n; k++) {
                wrong += memcmp(p[k].dst, p[k].src, p[k].n) != 0;
                for (size_t i = 0; i < PAD; i++) past += ((unsigned char *)p[k].dst)[p[k].n + i] != 0xA5;
            }
            CU_ASSERT_EQUAL(wrong, 0);
            CU_ASSERT_EQUAL(past, 0);
        }
    dm_mem_copy_pieces(NULL, 0, 0); /* nothing to copy */
    free(src);
    free(dst);
}

/* The thread caps of the copies beside the DMA: at most the cap, all threads for 0 or less or a
 * cap above OpenMP's; DOCMINE_STAGE_THREADS parsed to a count >= 0 or the default. */
static void test_thread_caps(void)
{
    const int all = omp_get_max_threads();
    CU_ASSERT_EQUAL(dm_threads_upto(0), all);
    CU_ASSERT_EQUAL(dm_threads_upto(-3), all);
    CU_ASSERT_EQUAL(dm_threads_upto(1), 1);
    CU_ASSERT_EQUAL(dm_threads_upto(all), all);
    CU_ASSERT_EQUAL(dm_threads_upto(all + 7), all);
    if (all > 1) CU_ASSERT_EQUAL(dm_threads_upto(all - 1), all - 1);
    CU_ASSERT_EQUAL(dm_stage_threads_parse(NULL), DM_STAGE_THREADS);
    CU_ASSERT_EQUAL(dm_stage_threads_parse(""), DM_STAGE_THREADS);
    CU_ASSERT_EQUAL(dm_stage_threads_parse("0"), 0);
    CU_ASSERT_EQUAL(dm_stage_threads_parse("3"), 3);
    CU_ASSERT_EQUAL(dm_stage_threads_parse("64"), 64);
    int level = dm_log_get_level();
    dm_log_set_level(DM_LOG_ERROR); /* the warnings of the bad values below */
    CU_ASSERT_EQUAL(dm_stage_threads_parse("-1"), DM_STAGE_THREADS);
    CU_ASSERT_EQUAL(dm_stage_threads_parse("4x"), DM_STAGE_THREADS);
    CU_ASSERT_EQUAL(dm_stage_threads_parse("all"), DM_STAGE_THREADS);
    CU_ASSERT_EQUAL(dm_stage_threads_parse("99999999999"), DM_STAGE_THREADS);
    dm_log_set_level(level);
    CU_ASSERT_EQUAL(dm_stage_threads(), dm_stage_threads_parse(getenv("DOCMINE_STAGE_THREADS")));
}

static void test_rng_known_answers(void)
{
    /* Random123 kat_vectors, philox4x32 with 10 rounds */
    struct {
        uint32_t ctr[4], key[2], out[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (size_t i = 0; i < sizeof kat / sizeof kat[0]; i++) {
        dm_philox4 c = {{kat[i].ctr[0], kat[i].ctr[1], kat[i].ctr[2], kat[i].ctr[3]}};
        dm_philox4 r = dm_philox4x32_10(c, kat[i].key[0], kat[i].key[1]);
        for (int j = 0; j < 4; j++) CU_ASSERT_EQUAL(r.v[j], kat[i].out[j]);
    }
}

static void test_rng_streams(void)
{
    /* keyed streams: deterministic, distinct per id and seed, uniform in [0,1) */
    CU_ASSERT_EQUAL(dm_rng_u64(1, 2, 3), dm_rng_u64(1, 2, 3));
    CU_ASSERT_NOT_EQUAL(dm_rng_u64(1, 2, 3), dm_rng_u64(1, 3, 3));
    CU_ASSERT_NOT_EQUAL(dm_rng_u64(1, 2, 3), dm_rng_u64(2, 2, 3));
    CU_ASSERT_NOT_EQUAL(dm_rng_u64(1, 2, 3), dm_rng_u64(1, 2, 4));
    enum { N = 200000, B = 10 };
    int hist[B] = {0};
    double mean = 0;
    for (int i = 0; i < N; i++) {
        double u = dm_rng_uniform(42, (uint64_t)i, 0);
        CU_ASSERT_TRUE_FATAL(u >= 0.0 && u < 1.0);
        hist[(int)(u * B)]++;
        mean += u;
    }
    mean /= N;
    CU_ASSERT_DOUBLE_EQUAL(mean, 0.5, 0.005);
    double chi2 = 0, e = (double)N / B;
    for (int b = 0; b < B; b++) chi2 += (hist[b] - e) * (hist[b] - e) / e;
    CU_ASSERT_TRUE(chi2 < 27.9); /* 9 degrees of freedom, p = 0.001 */
}

/* The tests' allocation failure: the k-th call from the request fails as exhaustion would (NULL,
 * DM_ERR_NOMEM recorded), the others do not; 0 stops it. */
static void test_alloc_fail_at(void)
{
    void *p[6];
    dm_alloc_fail_at(3);
    for (int i = 0; i < 5; i++) p[i] = i == 4 ? dm_realloc(p[0], 64) : dm_malloc(16);
    CU_ASSERT_EQUAL(dm_alloc_count(), 5);
    CU_ASSERT_PTR_NOT_NULL(p[0]);
    CU_ASSERT_PTR_NOT_NULL(p[1]);
    CU_ASSERT_PTR_NULL(p[2]);
    CU_ASSERT_PTR_NOT_NULL(p[3]);
    CU_ASSERT_PTR_NOT_NULL(p[4]);
    dm_alloc_fail_at(1);
    p[5] = dm_calloc(4, 4);
    CU_ASSERT_PTR_NULL(p[5]);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "injected"));
    dm_alloc_fail_at(0);
    p[5] = dm_malloc(8);
    CU_ASSERT_PTR_NOT_NULL(p[5]);
    dm_free(p[1]);
    dm_free(p[3]);
    dm_free(p[4]);
    dm_free(p[5]);
}

static void test_timers(void)
{
    dm_timers_reset();
    dm_timer_start("t.a");
    usleep(20000);
    dm_timer_stop("t.a");
    dm_timer_start("t.a");
    dm_timer_stop("t.a");
    double a = dm_timer_get("t.a");
    CU_ASSERT_TRUE(a >= 0.019 && a < 1.0);
    dm_timer_add("t.b", 2.5);
    CU_ASSERT_DOUBLE_EQUAL(dm_timer_get("t.b"), 2.5, 1e-12);
    dm_counter_add("c.docs", 5);
    dm_counter_add("c.docs", 7);
    CU_ASSERT_EQUAL(dm_counter_get("c.docs"), 12);
    CU_ASSERT_EQUAL(dm_counter_get("c.none"), 0);
    /* additions from many threads at once (the tuner adds from whichever thread tunes): none is
     * lost (0.5 is exact in binary, so the sum is too) */
#pragma omp parallel for num_threads(8) schedule(static)
    for (int i = 0; i < 80000; i++) {
        dm_timer_add("t.par", 0.5);
        dm_counter_add("c.par", 1);
    }
    CU_ASSERT_EQUAL(dm_timer_get("t.par"), 40000.0);
    CU_ASSERT_EQUAL(dm_counter_get("c.par"), 80000);
    dm_timers_reset();
    CU_ASSERT_EQUAL(dm_counter_get("c.docs"), 0);
}

static void test_atomic_files(void)
{
    char dir[256], path[1024], sub[512];
    CU_ASSERT_PTR_NOT_NULL_FATAL(dm_test_tmpdir(dir, sizeof dir));
    snprintf(sub, sizeof sub, "%s/a/b/c", dir);
    CU_ASSERT_EQUAL(dm_mkdirs(sub), DM_OK);
    CU_ASSERT_EQUAL(dm_mkdirs(sub), DM_OK); /* idempotent */
    snprintf(path, sizeof path, "%s/out.txt", sub);
    CU_ASSERT_EQUAL(dm_write_file_atomic(path, "hello\n", 6), DM_OK);
    FILE *f = fopen(path, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    char buf[16] = {0};
    CU_ASSERT_EQUAL(fread(buf, 1, sizeof buf, f), 6);
    fclose(f);
    CU_ASSERT_STRING_EQUAL(buf, "hello\n");
    /* an abandoned file leaves neither the final nor the temporary name */
    dm_atomic_file af;
    snprintf(path, sizeof path, "%s/abandoned.txt", sub);
    CU_ASSERT_EQUAL(dm_atomic_open(&af, path), DM_OK);
    fputs("partial", af.fp);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", af.tmp);
    dm_atomic_abort(&af);
    CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0);
    CU_ASSERT_NOT_EQUAL(access(tmp, F_OK), 0);
    /* a directory that does not exist is an IO error naming the file */
    snprintf(path, sizeof path, "%s/missing/x.txt", dir);
    CU_ASSERT_EQUAL(dm_write_file_atomic(path, "x", 1), DM_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(dm_error_message(), "missing/x.txt"));
    /* a regular file in the way of mkdirs */
    snprintf(path, sizeof path, "%s/a/b/c/out.txt/deeper", dir);
    CU_ASSERT_EQUAL(dm_mkdirs(path), DM_ERR_IO);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

/* Strings from the user or the file system in the report: UTF-8 as it is, stray bytes as \xNN
 * (jansson refuses such a string: a Latin-1 corpus path or a cut message went missing). */
static void test_json_text(void)
{
    static const struct {
        const char *in, *out;
    } c[] = {{"plain", "plain"},
             {"caf\xc3\xa9 \xe2\x82\xac", "caf\xc3\xa9 \xe2\x82\xac"}, /* UTF-8 kept */
             {"caf\xe9/a.gz", "caf\\xE9/a.gz"},                         /* Latin-1 byte */
             {"x\xe2\x82", "x\\xE2\\x82"},                             /* cut sequence */
             {"\xc0\xaf", "\\xC0\\xAF"},                               /* overlong */
             {"\xed\xa0\x80", "\\xED\\xA0\\x80"},                     /* surrogate */
             {"\xff", "\\xFF"},
             {"", ""}};
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        json_t *v = dm_json_text(c[i].in);
        CU_ASSERT_PTR_NOT_NULL_FATAL(v);
        CU_ASSERT_STRING_EQUAL(json_string_value(v), c[i].out);
        json_decref(v);
    }
    CU_ASSERT_PTR_NULL(dm_json_text(NULL));
}

/* Unsigned 64-bit values (seeds) exactly: integers up to 2^63 - 1, above as their digits (a seed
 * of 2^64 - 1 was written as -1) */
static void test_json_u64(void)
{
    static const uint64_t ints[] = {0, 42, (uint64_t)INT64_MAX};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        json_t *v = dm_json_u64(ints[i]);
        CU_ASSERT_FATAL(json_is_integer(v));
        CU_ASSERT_EQUAL((uint64_t)json_integer_value(v), ints[i]);
        json_decref(v);
    }
    json_t *v = dm_json_u64((uint64_t)INT64_MAX + 1);
    CU_ASSERT_FATAL(json_is_string(v));
    CU_ASSERT_STRING_EQUAL(json_string_value(v), "9223372036854775808");
    json_decref(v);
    v = dm_json_u64(UINT64_MAX);
    CU_ASSERT_FATAL(json_is_string(v));
    CU_ASSERT_STRING_EQUAL(json_string_value(v), "18446744073709551615");
    json_decref(v);
}

static void test_progress_format(void)
{
    char line[256];
    dm_progress_format(line, sizeof line, "read", "docs", 250, 1000, 5.0, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "250/1000"));
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "25.0%"));
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "50 docs/s"));
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "ETA 15s"));
    dm_progress_format(line, sizeof line, "read", "docs", 10, 0, 2.0, 0); /* unknown total */
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "5 docs/s"));
    CU_ASSERT_PTR_NULL(strstr(line, "ETA"));
    /* the end's line: elapsed time, no ETA */
    dm_progress_format(line, sizeof line, "read", "docs", 1000, 1000, 20.0, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(line, "1000/1000 (100.0%) 50 docs/s in 20s"));
    CU_ASSERT_PTR_NULL(strstr(line, "ETA"));
    /* not a terminal and not forced: the progress line stays off */
    dm_progress p;
    dm_progress_force(0);
    if (!isatty(2)) {
        dm_progress_begin(&p, "x", "y", 10);
        CU_ASSERT_FALSE(p.enabled);
    }
}

/* Runs steps(p) on a progress line of `total` forced into a file (a batch job's log) at level INFO
 * and returns what it printed in buf (NUL-terminated); *in_place: what begin decided. */
static void progress_capture(char *buf, size_t len, uint64_t total, void (*steps)(dm_progress *), int *in_place,
                             double *interval, int *enabled)
{
    buf[0] = 0;
    FILE *tmp = tmpfile();
    CU_ASSERT_PTR_NOT_NULL_FATAL(tmp);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    CU_ASSERT_TRUE_FATAL(saved >= 0);
    CU_ASSERT_TRUE_FATAL(dup2(fileno(tmp), STDERR_FILENO) >= 0);
    int level = dm_log_get_level();
    dm_log_set_level(DM_LOG_INFO);
    dm_progress_force(1);
    dm_progress p;
    dm_progress_begin(&p, "flock", "it", total);
    *in_place = p.in_place;
    *interval = p.interval;
    *enabled = p.enabled;
    steps(&p);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    dm_progress_force(0);
    dm_log_set_level(level);
    rewind(tmp);
    size_t n = fread(buf, 1, len - 1, tmp);
    buf[n] = 0;
    fclose(tmp);
}

static int count_lines(const char *s)
{
    int lines = 0;
    for (; *s; s++) lines += *s == '\n';
    return lines;
}

static void log_file_steps(dm_progress *p)
{
    dm_progress_update(p, 1); /* within the interval: nothing */
    p->interval = 0.0;
    dm_progress_update(p, 5);
    dm_progress_end(p, 10);
    dm_progress_update(p, 11); /* after the end: nothing */
}

/* Forced into a file (a batch job's log): whole lines, none within the interval, one at the end
 * (with the elapsed time, no ETA), no carriage returns. */
static void test_progress_log_file(void)
{
    char buf[1024];
    int in_place, enabled;
    double interval;
    progress_capture(buf, sizeof buf, 10, log_file_steps, &in_place, &interval, &enabled);
    CU_ASSERT_TRUE(enabled);
    CU_ASSERT_FALSE(in_place);
    CU_ASSERT_DOUBLE_EQUAL(interval, DM_PROGRESS_LOG_S, 0.0);
    CU_ASSERT_EQUAL(count_lines(buf), 2);
    CU_ASSERT_PTR_NULL(strchr(buf, '\r'));
    CU_ASSERT_PTR_NULL(strstr(buf, "1/10 "));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "docmine: flock 5/10 (50.0%)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "docmine: flock 10/10 (100.0%)"));
    CU_ASSERT_PTR_NULL(strstr(buf, "11/10"));
    const char *end = strstr(buf, "flock 10/10");
    CU_ASSERT_TRUE(end && !strstr(end, "ETA") && strstr(end, " in "));
}

static void no_repeat_steps(dm_progress *p)
{
    p->interval = 0.0;
    dm_progress_update(p, 2);
    dm_progress_update(p, 4);
    dm_progress_end(p, 4);
}

/* A periodic line that already showed the final count is not followed by a second, equal one (the
 * demo's log ended with "flock 100/100" twice). */
static void test_progress_log_no_repeat(void)
{
    char buf[1024];
    int in_place, enabled;
    double interval;
    progress_capture(buf, sizeof buf, 4, no_repeat_steps, &in_place, &interval, &enabled);
    CU_ASSERT_FALSE(in_place);
    CU_ASSERT_EQUAL(count_lines(buf), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "docmine: flock 2/4 (50.0%)"));
    const char *last = strstr(buf, "docmine: flock 4/4 (100.0%)");
    CU_ASSERT_PTR_NOT_NULL(last);
    if (last) CU_ASSERT_PTR_NULL(strstr(last + 1, "docmine: flock 4/4"));
}

static int fake_launch(const void *args, size_t n, void *stream) { return DM_OK; }

static void test_tune_registry(void)
{
    static const dm_tune_instance inst[] = {
        {{128, 1, 0, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 0},
        {{256, 4, 1, DM_LAYOUT_TILED, 8}, fake_launch, NULL, 0},
    };
    static const dm_tune_kernel k = {.name = "test.fake", .instances = inst, .n_instances = 2, .default_instance = 1};
    static const dm_tune_kernel bad = {.name = "test.bad", .instances = inst, .n_instances = 2, .default_instance = 2};
    CU_ASSERT_EQUAL(dm_tune_register(&k), DM_OK);
    CU_ASSERT_EQUAL(dm_tune_register(&k), DM_OK); /* idempotent */
    CU_ASSERT_EQUAL(dm_tune_register(&bad), DM_ERR_INVALID_ARG);
    CU_ASSERT_PTR_EQUAL(dm_tune_kernel_find("test.fake"), &k);
    CU_ASSERT_PTR_NULL(dm_tune_kernel_find("test.bad"));
    /* mode off: the declared default */
    dm_tune_set_mode(DM_TUNE_OFF);
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&k, 12345), &inst[1]);
    char buf[128];
    CU_ASSERT_STRING_EQUAL(dm_tune_policy_str(&inst[1].policy, buf, sizeof buf), "block=256 rake=4 strided layout=tiled:8");
    int m = -1;
    CU_ASSERT_EQUAL(dm_tune_mode_parse("exhaustive", &m), DM_OK);
    CU_ASSERT_EQUAL(m, DM_TUNE_EXHAUSTIVE);
    CU_ASSERT_EQUAL(dm_tune_mode_parse("fast", &m), DM_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(dm_tune_set_mode(9), DM_ERR_INVALID_ARG);
    setenv("DOCMINE_TUNING_DB", "/tmp/x/tuning.tsv", 1);
    CU_ASSERT_STRING_EQUAL(dm_tune_db_path(), "/tmp/x/tuning.tsv");
    dm_tune_set_db_path("/y/db.tsv");
    CU_ASSERT_STRING_EQUAL(dm_tune_db_path(), "/y/db.tsv");
    dm_tune_set_db_path(NULL);
    unsetenv("DOCMINE_TUNING_DB");
    setenv("XDG_CACHE_HOME", "/cache", 1);
    CU_ASSERT_STRING_EQUAL(dm_tune_db_path(), "/cache/docmine/tuning.tsv");
}

static void test_metrics_hand(void)
{
    dm_metrics m;
    /* truth 000111, pred 001122: contingency [[2,1,0],[0,1,2]], a = (3,3), b = (2,2,2), N = 6.
     * MI = 2 * (2/6) ln(6*2/(3*2)) = (2/3) ln 2; H(U) = ln 2; H(V) = ln 3;
     * NMI = (2/3) ln 2 / ((ln 2 + ln 3)/2) = 0.515803742979...
     * ARI: sum C(nij,2) = 2, sum C(a,2) = 6, sum C(b,2) = 3, C(6,2) = 15, expected = 6*3/15 = 1.2,
     * max = 4.5: ARI = 0.8 / 3.3; purity = (2 + 1 + 2) / 6 */
    int32_t t1[] = {0, 0, 0, 1, 1, 1}, p1[] = {0, 0, 1, 1, 2, 2};
    CU_ASSERT_EQUAL_FATAL(dm_metrics_compute(&m, t1, p1, 6), DM_OK);
    CU_ASSERT_DOUBLE_EQUAL(m.nmi, (2.0 / 3.0) * log(2.0) / ((log(2.0) + log(3.0)) / 2), 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.nmi, 0.515803742979, 1e-11);
    CU_ASSERT_DOUBLE_EQUAL(m.ari, 0.8 / 3.3, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.purity, 5.0 / 6.0, 1e-12);
    CU_ASSERT_EQUAL(m.classes, 2);
    CU_ASSERT_EQUAL(m.clusters, 3);
    /* truth 0012, pred 0011: ARI = (1 - 1/3) / (1.5 - 1/3) = 4/7 (scikit-learn's doc example) */
    int32_t t2[] = {0, 0, 1, 2}, p2[] = {0, 0, 1, 1};
    CU_ASSERT_EQUAL_FATAL(dm_metrics_compute(&m, t2, p2, 4), DM_OK);
    CU_ASSERT_DOUBLE_EQUAL(m.ari, 4.0 / 7.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.purity, 3.0 / 4.0, 1e-12);
    /* a relabelled perfect clustering: all 1; unlabelled items (truth -1) are skipped; noise (-1)
     * is one cluster */
    int32_t t3[] = {5, 5, 9, 9, -1, 7}, p3[] = {-1, -1, 3, 3, 0, 8};
    CU_ASSERT_EQUAL_FATAL(dm_metrics_compute(&m, t3, p3, 6), DM_OK);
    CU_ASSERT_EQUAL(m.n, 5);
    CU_ASSERT_DOUBLE_EQUAL(m.nmi, 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.ari, 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.purity, 1.0, 1e-12);
    /* everything in one cluster against two balanced classes: NMI 0, ARI 0, purity 1/2 */
    int32_t t4[] = {0, 1, 0, 1}, p4[] = {4, 4, 4, 4};
    CU_ASSERT_EQUAL_FATAL(dm_metrics_compute(&m, t4, p4, 4), DM_OK);
    CU_ASSERT_DOUBLE_EQUAL(m.nmi, 0.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.ari, 0.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.purity, 0.5, 1e-12);
    int32_t t5[] = {-1, -1};
    CU_ASSERT_EQUAL(dm_metrics_compute(&m, t5, p4, 2), DM_ERR_INVALID_ARG);
}

/* degenerate labelings (scikit-learn's conventions) and counts beyond 2^32, by hand */
static void test_metrics_edges(void)
{
    dm_metrics m;
    /* one document: one class, one cluster: 1, 1, 1 */
    int32_t t1[] = {3}, p1[] = {-1};
    CU_ASSERT_EQUAL_FATAL(dm_metrics_compute(&m, t1, p1, 1), DM_OK);
    CU_ASSERT_DOUBLE_EQUAL(m.nmi, 1.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(m.ari, 1.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(m.purity, 1.0, 0);
    /* one class, every document its own cluster: MI 0 (NMI 0, not 0/0); ARI: no pair together in
     * a cluster, expected 0, max C(3,2)/2: 0; purity 1 */
    int32_t t2[] = {0, 0, 0}, p2[] = {0, 1, 2};
    CU_ASSERT_EQUAL_FATAL(dm_metrics_compute(&m, t2, p2, 3), DM_OK);
    CU_ASSERT_DOUBLE_EQUAL(m.nmi, 0.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(m.ari, 0.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(m.purity, 1.0, 0);
    /* two classes of two, singletons: MI = H(U) = ln 2, H(V) = ln 4: NMI = ln 2 / (3 ln 2 / 2) = 2/3;
     * ARI 0; purity 1 */
    int32_t t3[] = {0, 0, 1, 1}, p3[] = {0, 1, 2, 3};
    CU_ASSERT_EQUAL_FATAL(dm_metrics_compute(&m, t3, p3, 4), DM_OK);
    CU_ASSERT_DOUBLE_EQUAL(m.nmi, 2.0 / 3.0, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(m.ari, 0.0, 1e-15);
    CU_ASSERT_EQUAL(m.clusters, 4);
    /* every document noise: one cluster (-1) against two classes: 0, 0, 1/2 */
    int32_t p4[] = {-1, -1, -1, -1};
    CU_ASSERT_EQUAL_FATAL(dm_metrics_compute(&m, t3, p4, 4), DM_OK);
    CU_ASSERT_DOUBLE_EQUAL(m.nmi, 0.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(m.ari, 0.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(m.purity, 0.5, 0);
    CU_ASSERT_EQUAL(m.clusters, 1);
    /* 2^33 documents, classes independent of clusters, a = 2^31 in each cell: NMI 0, purity 1/2,
     * ARI = (4 C(a,2) - E) / (2 C(2a,2) - E), E = (2 C(2a,2))^2 / C(4a,2), which is -1 / (4a - 2) */
    const uint64_t a = (uint64_t)1 << 31, cnt[] = {a, a, a, a};
    const int32_t cc[] = {0, 0, 1, 1}, cp[] = {0, 1, 0, 1};
    CU_ASSERT_EQUAL_FATAL(dm_metrics_from_table(&m, cc, cp, cnt, 4), DM_OK);
    CU_ASSERT_EQUAL(m.n, (uint64_t)1 << 33);
    CU_ASSERT_DOUBLE_EQUAL(m.nmi, 0.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.purity, 0.5, 0);
    CU_ASSERT_DOUBLE_EQUAL(m.ari, -1.0 / (4.0 * (double)a - 2.0), 1e-18);
    /* the same size, each class split in two equal clusters: MI = H(U) = ln 2, H(V) = ln 4:
     * NMI 2/3, purity 1 */
    const int32_t dp[] = {0, 1, 2, 3};
    const int32_t dc[] = {0, 0, 1, 1};
    CU_ASSERT_EQUAL_FATAL(dm_metrics_from_table(&m, dc, dp, cnt, 4), DM_OK);
    CU_ASSERT_DOUBLE_EQUAL(m.purity, 1.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(m.nmi, 2.0 / 3.0, 1e-12);
}

/* classes from label strings: the first label, numbered in byte order of the names (a prefix
 * first); "" / NULL / an empty first label: -1 */
static void test_metrics_classes(void)
{
    const char *labels[] = {"earn", "acq,earn", "", "earn,grain", NULL, "ac", "acq", ",grain", "zz"};
    int32_t cls[9], n = -5;
    CU_ASSERT_EQUAL_FATAL(dm_metrics_classes(cls, &n, labels, 9), DM_OK);
    CU_ASSERT_EQUAL(n, 4); /* ac < acq < earn < zz */
    const int32_t want[] = {2, 1, -1, 2, -1, 0, 1, -1, 3};
    for (int i = 0; i < 9; i++) CU_ASSERT_EQUAL(cls[i], want[i]);
    CU_ASSERT_EQUAL_FATAL(dm_metrics_classes(cls, &n, labels + 2, 1), DM_OK);
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_EQUAL(cls[0], -1);
    /* the classes feed the metrics: a clustering that splits by first label is perfect */
    int32_t pred[] = {7, 8, 9, 7, 9, 5, 8, 9, 6};
    dm_metrics m;
    CU_ASSERT_EQUAL_FATAL(dm_metrics_classes(cls, &n, labels, 9), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_metrics_compute(&m, cls, pred, 9), DM_OK);
    CU_ASSERT_EQUAL(m.n, 6);
    CU_ASSERT_DOUBLE_EQUAL(m.nmi, 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(m.purity, 1.0, 1e-12);
    /* the report's quality object */
    json_t *q = dm_metrics_json(&m);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(q, "nmi")), m.nmi, 0.0);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(q, "ari")), m.ari, 0.0);
    CU_ASSERT_DOUBLE_EQUAL(json_real_value(json_object_get(q, "purity")), 1.0, 0.0);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(q, "labelled_documents")), 6);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(q, "classes")), 4);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(q, "clusters")), 4);
    json_decref(q);
}

int main(void)
{
    CU_TestInfo t_common[] = {
        {"status messages and DM_TRY", test_status_message},
        {"host allocation counting", test_alloc_counts},
        {"memory peaks of nested phases", test_mem_phases},
        {"pinned/device size tracking", test_alloc_tracking},
        {"prefault keeps bytes and populates pages", test_mem_prefault},
        {"thread caps of the staged copies", test_thread_caps},
        {"copies on any number of threads", test_mem_copy_thread_counts},
        {"batched copies: every piece, any threads", test_mem_copy_pieces},
        {"philox known answers", test_rng_known_answers},
        {"keyed random streams", test_rng_streams},
        {"timers and counters", test_timers},
        {"allocation failure injection (tests)", test_alloc_fail_at},
        {"atomic files and mkdirs", test_atomic_files},
        {"report strings: stray bytes escaped, not lost", test_json_text},
        {"report numbers: unsigned 64-bit values exactly", test_json_u64},
        {"progress line", test_progress_format},
        {"progress lines in a log file", test_progress_log_file},
        {"progress: no repeated end line in a log file", test_progress_log_no_repeat},
        {"tuner registry and modes", test_tune_registry},
        {"clustering metrics against hand-computed values", test_metrics_hand},
        {"clustering metrics: degenerate labelings, 2^33 documents", test_metrics_edges},
        {"classes from label strings", test_metrics_classes},
        CU_TEST_INFO_NULL,
    };
    CU_SuiteInfo suites[] = {{"common", NULL, NULL, NULL, NULL, t_common}, CU_SUITE_INFO_NULL};
    return dm_test_run(suites);
}
