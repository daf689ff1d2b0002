/* Unit tests of the tuning database and the registry (no GPU): row round trip, store/load round
 * trip, corrupted lines, two processes writing at once, path resolution, modes, registration,
 * selection without a GPU and `docmine tune --list`'s printer. */
#include <CUnit/Basic.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/status.h"
#include "common/tune/tune.h"
#include "common/tune/tune_db.h"
#include "common/tune/tune_gpu.h"
#include "common/tune/tune_model.h"
#include "common/tune/tune_print.h"

static char g_dir[256];

static int suite_init(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/dm_tune_db_XXXXXX");
    return mkdtemp(g_dir) ? 0 : 1;
}

static int suite_clean(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : 1;
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 17;
}

static dm_tune_db_row random_row(uint64_t *s, int i)
{
    static const char *gpus[] = {"NVIDIA H200", "NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090"};
    static const int ccs[] = {90, 80, 89};
    dm_tune_db_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.kernel, sizeof r.kernel, "mod%d.kernel%d", (int)(lcg(s) % 5), i);
    int g = (int)(lcg(s) % 3);
    snprintf(r.gpu, sizeof r.gpu, "%s", gpus[g]);
    r.cc = ccs[g];
    r.wclass = (int)(lcg(s) % 40);
    r.policy.block = 32 * (1 + (int)(lcg(s) % 32));
    r.policy.rake = 1 << (lcg(s) % 5);
    r.policy.strided = (int)(lcg(s) % 2);
    r.policy.layout = (int)(lcg(s) % 4);
    r.policy.tile = r.policy.layout == DM_LAYOUT_TILED ? 1 << (lcg(s) % 6) : 0;
    r.default_ms = (double)(lcg(s) % 100000) / 1000.0; /* 3 decimals survive %.6g */
    r.tuned_ms = (double)(lcg(s) % 100000) / 1000.0;
    r.msp_n = lcg(s) % 1000000000ull;
    r.target_n = lcg(s);
    r.mode = 1 + (int)(lcg(s) % 3);
    r.unix_time = 1700000000 + (long long)(lcg(s) % 100000000);
    return r;
}

static int rows_equal(const dm_tune_db_row *a, const dm_tune_db_row *b)
{
    return !strcmp(a->kernel, b->kernel) && !strcmp(a->gpu, b->gpu) && a->cc == b->cc &&
           a->wclass == b->wclass && !memcmp(&a->policy, &b->policy, sizeof a->policy) &&
           a->default_ms == b->default_ms && a->tuned_ms == b->tuned_ms && a->msp_n == b->msp_n &&
           a->target_n == b->target_n && a->mode == b->mode && a->unix_time == b->unix_time;
}

static void test_row_round_trip(void)
{
    uint64_t s = 7;
    for (int i = 0; i < 500; i++) {
        dm_tune_db_row r = random_row(&s, i), back;
        char line[1024];
        const char *why;
        CU_ASSERT_EQUAL_FATAL(dm_tune_db_format_row(line, sizeof line, &r), DM_OK);
        CU_ASSERT(line[strlen(line) - 1] == '\n');
        CU_ASSERT_EQUAL(dm_tune_db_parse_line(&back, line, &why), DM_OK);
        CU_ASSERT(rows_equal(&r, &back));
    }
    /* a GPU name with a tab and a newline is sanitised, the line stays parseable */
    dm_tune_db_row r = random_row(&s, 0), back;
    snprintf(r.gpu, sizeof r.gpu, "Weird\tGPU\nName");
    char line[1024];
    CU_ASSERT_EQUAL(dm_tune_db_format_row(line, sizeof line, &r), DM_OK);
    CU_ASSERT_EQUAL(dm_tune_db_parse_line(&back, line, NULL), DM_OK);
    CU_ASSERT_STRING_EQUAL(back.gpu, "Weird GPU Name");
}

static void path_in_dir(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", g_dir, name);
}

static void test_store_load(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "sub/dir/tuning.tsv"); /* directories are created */
    uint64_t s = 11;
    dm_tune_db_row rows[100];
    for (int i = 0; i < 100; i++) rows[i] = random_row(&s, i);
    CU_ASSERT_EQUAL_FATAL(dm_tune_db_store(path, rows, 60), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_tune_db_store(path, rows + 60, 40), DM_OK);
    dm_tune_db db;
    dm_tune_db_init(&db);
    CU_ASSERT_EQUAL_FATAL(dm_tune_db_load(&db, path), DM_OK);
    CU_ASSERT_EQUAL(db.rejected, 0);
    CU_ASSERT_EQUAL(db.n, 100);
    for (int i = 0; i < 100; i++) {
        const dm_tune_db_row *f = dm_tune_db_find(&db, rows[i].kernel, rows[i].gpu, rows[i].cc,
                                                  rows[i].wclass);
        CU_ASSERT_FATAL(f != NULL);
        CU_ASSERT(rows_equal(f, &rows[i]));
    }
    /* the key: another GPU model, capability or class is another row */
    CU_ASSERT_PTR_NULL(dm_tune_db_find(&db, rows[0].kernel, "Other GPU", rows[0].cc, rows[0].wclass));
    CU_ASSERT_PTR_NULL(dm_tune_db_find(&db, rows[0].kernel, rows[0].gpu, rows[0].cc + 1, rows[0].wclass));
    CU_ASSERT_PTR_NULL(dm_tune_db_find(&db, rows[0].kernel, rows[0].gpu, rows[0].cc, rows[0].wclass + 41));
    /* a store with the same key replaces the row */
    dm_tune_db_row upd = rows[3];
    upd.policy.rake = 64;
    upd.tuned_ms = 0.125;
    CU_ASSERT_EQUAL(dm_tune_db_store(path, &upd, 1), DM_OK);
    CU_ASSERT_EQUAL(dm_tune_db_load(&db, path), DM_OK);
    CU_ASSERT_EQUAL(db.n, 100);
    const dm_tune_db_row *f = dm_tune_db_find(&db, upd.kernel, upd.gpu, upd.cc, upd.wclass);
    CU_ASSERT(f && rows_equal(f, &upd));
    /* a missing file is an empty database */
    path_in_dir(path, sizeof path, "missing.tsv");
    CU_ASSERT_EQUAL(dm_tune_db_load(&db, path), DM_OK);
    CU_ASSERT_EQUAL(db.n, 0);
    dm_tune_db_free(&db);
}

static void test_corrupted_lines(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "corrupt.tsv");
    uint64_t s = 5;
    dm_tune_db_row good[3];
    char lines[3][1024];
    for (int i = 0; i < 3; i++) {
        good[i] = random_row(&s, 1000 + i);
        dm_tune_db_format_row(lines[i], sizeof lines[i], &good[i]);
    }
    FILE *f = fopen(path, "w");
    CU_ASSERT_FATAL(f != NULL);
    int bad = 0;
    fputs(DM_TUNE_DB_HEADER, f);
    fputs(lines[0], f);
    fputs("garbage\n", f), bad++;
    fputs("a\tb\tc\n", f), bad++;
    fputs("k\tGPU\tx.y\t3\t256\t1\t0\t0\t0\t1.0\t1.0\t10\t20\tmsp\t1\n", f), bad++;  /* cc */
    fputs("k\tGPU\t9.0\t3\t250\t1\t0\t0\t0\t1.0\t1.0\t10\t20\tmsp\t1\n", f), bad++;  /* block */
    fputs("k\tGPU\t9.0\t3\t256\t1\t0\t0\t0\t-1.0\t1.0\t10\t20\tmsp\t1\n", f), bad++; /* time */
    fputs("k\tGPU\t9.0\t3\t256\t1\t0\t9\t0\t1.0\t1.0\t10\t20\tmsp\t1\n", f), bad++;  /* layout */
    fputs("k\tGPU\t9.0\t3\t256\t1\t0\t0\t0\t1.0\t1.0\t10\t20\tfast\t1\n", f), bad++; /* mode */
    fputs("k\tGPU\t9.0\t3\t256\t1\t0\t0\t0\t1.0\t1.0\t10\t20\tmsp\t1\textra\n", f), bad++;
    fputs("k\tGPU\t9.0\t3\t256\t1\t0\t0\t0\tnan\t1.0\t10\t20\tmsp\t1\n", f), bad++;
    fputs("\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n", f), bad++;
    /* numbers are plain digits: strtoull would read " -5" as 2^64 - 5 */
    fputs("k\tGPU\t9.0\t3\t256\t1\t0\t0\t0\t1.0\t1.0\t -5\t20\tmsp\t1\n", f), bad++;
    fputs("k\tGPU\t9.0\t3\t256\t1\t0\t0\t0\t1.0\t1.0\t10\t-20\tmsp\t1\n", f), bad++;
    fputs("k\tGPU\t9.0\t3\t256\t1\t0\t0\t0\t1.0\t1.0\t10\t20\tmsp\t -1\n", f), bad++;
    fputs("k\tGPU\t9.0\t3\t256\t1\t0\t0\t0\t1.0\t1.0\t10\t99999999999999999999\tmsp\t1\n", f), bad++;
    /* a policy no kernel can have: a tile without the tiled layout, the tiled layout without one */
    fputs("k\tGPU\t9.0\t3\t256\t1\t0\t0\t8\t1.0\t1.0\t10\t20\tmsp\t1\n", f), bad++;
    fputs("k\tGPU\t9.0\t3\t256\t1\t0\t3\t0\t1.0\t1.0\t10\t20\tmsp\t1\n", f), bad++;
    for (int i = 0; i < 5000; i++) fputc('x', f); /* overlong line */
    fputc('\n', f), bad++;
    fputs(lines[1], f);
    fputs("\x01\x02\xff\xfe binary\tjunk\n", f), bad++;
    fputs("\n# a comment\n", f);
    lines[2][strlen(lines[2]) - 1] = '\0'; /* last line without newline */
    fputs(lines[2], f);
    fclose(f);
    dm_tune_db db;
    dm_tune_db_init(&db);
    CU_ASSERT_EQUAL_FATAL(dm_tune_db_load(&db, path), DM_OK);
    CU_ASSERT_EQUAL(db.rejected, bad);
    CU_ASSERT_EQUAL(db.n, 3);
    for (int i = 0; i < 3; i++) {
        const dm_tune_db_row *r = dm_tune_db_find(&db, good[i].kernel, good[i].gpu, good[i].cc, good[i].wclass);
        CU_ASSERT(r && rows_equal(r, &good[i]));
    }
    /* the next store rewrites the file without the rejected lines */
    dm_tune_db_row more = random_row(&s, 2000);
    CU_ASSERT_EQUAL(dm_tune_db_store(path, &more, 1), DM_OK);
    CU_ASSERT_EQUAL(dm_tune_db_load(&db, path), DM_OK);
    CU_ASSERT_EQUAL(db.rejected, 0);
    CU_ASSERT_EQUAL(db.n, 4);
    dm_tune_db_free(&db);
}


/* The database at path holds exactly the rows writers 0..n-1 stored: writer w's `rows` rows, drawn
 * from seed0 + w and named <who><w>.k<i> (the concurrent stores' tests). */
static void expect_writers_rows(const char *path, const char *who, int writers, int rows, uint64_t seed0)
{
    dm_tune_db db;
    dm_tune_db_init(&db);
    CU_ASSERT_EQUAL_FATAL(dm_tune_db_load(&db, path), DM_OK);
    CU_ASSERT_EQUAL(db.rejected, 0);
    CU_ASSERT_EQUAL(db.n, writers * rows);
    for (int w = 0; w < writers; w++) {
        uint64_t s = seed0 + (uint64_t)w;
        for (int i = 0; i < rows; i++) {
            dm_tune_db_row r = random_row(&s, i);
            snprintf(r.kernel, sizeof r.kernel, "%s%d.k%d", who, w, i);
            const dm_tune_db_row *f = dm_tune_db_find(&db, r.kernel, r.gpu, r.cc, r.wclass);
            CU_ASSERT(f && rows_equal(f, &r));
        }
    }
    dm_tune_db_free(&db);
}

static void test_concurrent_writers(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "concurrent.tsv");
    enum { PROCS = 4, ROWS = 40 };
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        CU_ASSERT_FATAL(pids[p] >= 0);
        if (pids[p] == 0) {
            uint64_t s = 100 + (uint64_t)p;
            int rc = 0;
            for (int i = 0; i < ROWS; i++) {
                dm_tune_db_row r = random_row(&s, i);
                snprintf(r.kernel, sizeof r.kernel, "proc%d.k%d", p, i); /* distinct keys */
                if (dm_tune_db_store(path, &r, 1) != DM_OK) rc = 1;
            }
            _exit(rc);
        }
    }
    for (int p = 0; p < PROCS; p++) {
        int st = 0;
        CU_ASSERT_EQUAL(waitpid(pids[p], &st, 0), pids[p]);
        CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    expect_writers_rows(path, "proc", PROCS, ROWS, 100);
    /* no temporary file is left behind */
    DIR *d = opendir(g_dir);
    CU_ASSERT_FATAL(d != NULL);
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "concurrent.tsv.tmp", 18)) CU_FAIL("temporary file left behind");
    closedir(d);
}

/* Threads of one process storing at once (dm_tune_select is thread-safe, so two threads may tune
 * and store two kernels together): the fcntl lock is the process's, so without the store's own
 * mutex both threads wrote the same PATH.tmp.<pid> and rows were lost. */
enum { THREADS = 4, THREAD_ROWS = 30 };
static char g_thread_path[512];

static void *store_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    uint64_t s = 300 + (uint64_t)t;
    intptr_t failed = 0;
    for (int i = 0; i < THREAD_ROWS; i++) {
        dm_tune_db_row r = random_row(&s, i);
        snprintf(r.kernel, sizeof r.kernel, "thread%d.k%d", t, i);
        if (dm_tune_db_store(g_thread_path, &r, 1) != DM_OK) failed++;
    }
    return (void *)failed;
}

static void test_concurrent_threads(void)
{
    path_in_dir(g_thread_path, sizeof g_thread_path, "threads/tuning.tsv");
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[t], NULL, store_thread, (void *)(intptr_t)t), 0);
    for (int t = 0; t < THREADS; t++) {
        void *failed = NULL;
        pthread_join(th[t], &failed);
        CU_ASSERT_EQUAL(failed, NULL); /* every store succeeded */
    }
    expect_writers_rows(g_thread_path, "thread", THREADS, THREAD_ROWS, 300);
}

/* A model row (`docmine tune --mode model`: no timing) never replaces a measured row (msp,
 * exhaustive) of its key. The store decides it under its lock, on the file as it is then:
 * deciding it before the store (as tune_store_class did alone) let a measured row stored by
 * another process in between be replaced by the model's. */
static void test_store_model_keeps_measured(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "model_rows/tuning.tsv");
    dm_tune_policy p1 = {256, 4, 1, DM_LAYOUT_NONE, 0}, p2 = {128, 1, 0, DM_LAYOUT_NONE, 0};
    dm_tune_db_row meas = {.kernel = "m.k", .gpu = "GPU X", .cc = 90, .wclass = 20, .policy = p1,
                           .default_ms = 2, .tuned_ms = 1, .msp_n = 10, .target_n = 20,
                           .mode = DM_TUNE_MSP, .unix_time = 1};
    dm_tune_db_row model = meas;
    model.policy = p2;
    model.mode = DM_TUNE_MODEL;
    dm_tune_db db;
    dm_tune_db_init(&db);
    const dm_tune_db_row *f;
    for (int m = DM_TUNE_MSP; m <= DM_TUNE_EXHAUSTIVE; m++) {
        meas.mode = m;
        meas.wclass = model.wclass = 20 + m;
        CU_ASSERT_EQUAL(dm_tune_db_store(path, &meas, 1), DM_OK);
        CU_ASSERT_EQUAL(dm_tune_db_store(path, &model, 1), DM_OK); /* dropped, not an error */
        CU_ASSERT_EQUAL_FATAL(dm_tune_db_load(&db, path), DM_OK);
        f = dm_tune_db_find(&db, meas.kernel, meas.gpu, meas.cc, meas.wclass);
        CU_ASSERT(f && rows_equal(f, &meas));
    }
    /* a model row replaces a model row and is replaced by a measured one; a new key takes it */
    model.wclass = 30;
    CU_ASSERT_EQUAL(dm_tune_db_store(path, &model, 1), DM_OK);
    dm_tune_db_row model2 = model;
    model2.policy = p1;
    CU_ASSERT_EQUAL(dm_tune_db_store(path, &model2, 1), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_tune_db_load(&db, path), DM_OK);
    f = dm_tune_db_find(&db, model.kernel, model.gpu, model.cc, 30);
    CU_ASSERT(f && rows_equal(f, &model2));
    meas.wclass = 30;
    meas.mode = DM_TUNE_MSP;
    CU_ASSERT_EQUAL(dm_tune_db_store(path, &meas, 1), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_tune_db_load(&db, path), DM_OK);
    f = dm_tune_db_find(&db, meas.kernel, meas.gpu, meas.cc, 30);
    CU_ASSERT(f && rows_equal(f, &meas));
    CU_ASSERT_EQUAL(db.n, 3);

    /* two processes at once, one storing measured rows and one model rows of the same keys: every
     * key ends with its measured row, whichever order the stores took */
    enum { KEYS = 40 };
    path_in_dir(path, sizeof path, "model_rows/race.tsv");
    pid_t pids[2];
    for (int p = 0; p < 2; p++) {
        pids[p] = fork();
        CU_ASSERT_FATAL(pids[p] >= 0);
        if (pids[p] == 0) {
            int rc = 0;
            for (int i = 0; i < KEYS; i++) {
                dm_tune_db_row r = p ? model : meas;
                r.wclass = i;
                if (dm_tune_db_store(path, &r, 1) != DM_OK) rc = 1;
            }
            _exit(rc);
        }
    }
    for (int p = 0; p < 2; p++) {
        int st = 0;
        CU_ASSERT_EQUAL(waitpid(pids[p], &st, 0), pids[p]);
        CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    CU_ASSERT_EQUAL_FATAL(dm_tune_db_load(&db, path), DM_OK);
    CU_ASSERT_EQUAL(db.n, KEYS);
    int measured = 0;
    for (int i = 0; i < KEYS; i++) {
        f = dm_tune_db_find(&db, meas.kernel, meas.gpu, meas.cc, i);
        measured += f && f->mode == DM_TUNE_MSP && f->policy.block == p1.block;
    }
    CU_ASSERT_EQUAL(measured, KEYS);
    dm_tune_db_free(&db);
}

/* A database that is a symbolic link to a shared file: the store writes the shared file and
 * leaves the link (the rename replaced the link with a private copy, and the shared file was
 * never updated again); a link to nothing is an error, the link left as it is. */
static void test_store_through_symlink(void)
{
    char shared[512], link[512], dangling[512], lockp[600];
    path_in_dir(shared, sizeof shared, "shared/tuning.tsv");
    path_in_dir(link, sizeof link, "linkhome/tuning.tsv");
    path_in_dir(dangling, sizeof dangling, "linkhome/dangling.tsv");
    uint64_t s = 123;
    dm_tune_db_row a = random_row(&s, 1), b = random_row(&s, 2);
    CU_ASSERT_EQUAL_FATAL(dm_tune_db_store(shared, &a, 1), DM_OK);
    CU_ASSERT_EQUAL_FATAL(dm_tune_db_mkdirs(link), DM_OK);
    CU_ASSERT_EQUAL_FATAL(symlink(shared, link), 0);
    CU_ASSERT_EQUAL(dm_tune_db_store(link, &b, 1), DM_OK);
    struct stat st;
    CU_ASSERT(lstat(link, &st) == 0 && S_ISLNK(st.st_mode)); /* still the link */
    dm_tune_db db;
    dm_tune_db_init(&db);
    CU_ASSERT_EQUAL_FATAL(dm_tune_db_load(&db, shared), DM_OK); /* the shared file has both */
    CU_ASSERT_EQUAL(db.n, 2);
    const dm_tune_db_row *f = dm_tune_db_find(&db, b.kernel, b.gpu, b.cc, b.wclass);
    CU_ASSERT(f && rows_equal(f, &b));
    /* the writers' lock is the shared file's, beside it */
    snprintf(lockp, sizeof lockp, "%s.lock", shared);
    CU_ASSERT(stat(lockp, &st) == 0);
    snprintf(lockp, sizeof lockp, "%s.lock", link);
    CU_ASSERT(stat(lockp, &st) != 0);
    /* a link to nothing */
    char nowhere[512];
    path_in_dir(nowhere, sizeof nowhere, "nowhere/x.tsv");
    CU_ASSERT_EQUAL_FATAL(symlink(nowhere, dangling), 0);
    CU_ASSERT_EQUAL(dm_tune_db_store(dangling, &b, 1), DM_ERR_IO);
    CU_ASSERT(strstr(dm_error_message(), dangling) != NULL);
    CU_ASSERT(lstat(dangling, &st) == 0 && S_ISLNK(st.st_mode));
    dm_tune_db_free(&db);
}

/* The whole file, NUL-terminated (malloc'd), or NULL. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = malloc(1 << 16);
    size_t n = buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
    fclose(f);
    if (buf) buf[n] = '\0';
    return buf;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    fputs(text, f);
    fclose(f);
}

/* Files that are not this format's: another version's database is neither read nor rewritten
 * (its rows were rejected and dropped by the next store, its header replaced), a file that is no
 * tuning database at all (a mistyped --tuning-db) is not replaced; a header-less table with valid
 * rows and a CRLF database stay usable. */
static void test_foreign_files(void)
{
    char path[512];
    uint64_t s = 77;
    dm_tune_db_row r = random_row(&s, 1), more = random_row(&s, 2);
    char line[1024];
    CU_ASSERT_EQUAL_FATAL(dm_tune_db_format_row(line, sizeof line, &r), DM_OK);
    dm_tune_db db;
    dm_tune_db_init(&db);

    /* v2: a line of 16 fields, and one that would parse as v1 */
    path_in_dir(path, sizeof path, "v2.tsv");
    char text[4096];
    snprintf(text, sizeof text, "# docmine tuning database v2\n#kernel\t...\textra\n%.*s\tnew\n%s",
             (int)strlen(line) - 1, line, line);
    write_text(path, text);
    CU_ASSERT_EQUAL(dm_tune_db_load(&db, path), DM_ERR_FORMAT);
    CU_ASSERT_EQUAL(db.n, 0);
    CU_ASSERT(strstr(dm_error_message(), path) != NULL);
    CU_ASSERT(strstr(dm_error_message(), "v2") != NULL);
    CU_ASSERT_EQUAL(dm_tune_db_store(path, &more, 1), DM_ERR_FORMAT);
    char *now = slurp(path);
    CU_ASSERT(now && !strcmp(now, text)); /* untouched */
    free(now);
    /* v10 is not v1 either */
    snprintf(text, sizeof text, "# docmine tuning database v10\n%s", line);
    write_text(path, text);
    CU_ASSERT_EQUAL(dm_tune_db_load(&db, path), DM_ERR_FORMAT);

    /* not a tuning database: left as it is */
    path_in_dir(path, sizeof path, "notes.txt");
    write_text(path, "my notes\nsecond line\n");
    CU_ASSERT_EQUAL(dm_tune_db_store(path, &more, 1), DM_ERR_FORMAT);
    CU_ASSERT(strstr(dm_error_message(), "not a docmine tuning database") != NULL);
    now = slurp(path);
    CU_ASSERT(now && !strcmp(now, "my notes\nsecond line\n"));
    free(now);

    /* comment lines only (no header, no row): not a tuning database either (it was replaced) */
    path_in_dir(path, sizeof path, "comments.txt");
    write_text(path, "# my notes\n\n# more notes\n");
    CU_ASSERT_EQUAL(dm_tune_db_store(path, &more, 1), DM_ERR_FORMAT);
    now = slurp(path);
    CU_ASSERT(now && !strcmp(now, "# my notes\n\n# more notes\n"));
    free(now);
    /* an empty file (touch) or blank lines only: an empty database, written */
    path_in_dir(path, sizeof path, "empty.tsv");
    write_text(path, "");
    CU_ASSERT_EQUAL(dm_tune_db_store(path, &more, 1), DM_OK);
    path_in_dir(path, sizeof path, "blank.tsv");
    write_text(path, "\n\n");
    CU_ASSERT_EQUAL(dm_tune_db_store(path, &more, 1), DM_OK);
    CU_ASSERT_EQUAL(dm_tune_db_load(&db, path), DM_OK);
    CU_ASSERT_EQUAL(db.n, 1);

    /* no header but a valid row: a hand-written table, merged and rewritten with the header */
    path_in_dir(path, sizeof path, "handwritten.tsv");
    write_text(path, line);
    CU_ASSERT_EQUAL(dm_tune_db_store(path, &more, 1), DM_OK);
    CU_ASSERT_EQUAL(dm_tune_db_load(&db, path), DM_OK);
    CU_ASSERT_EQUAL(db.n, 2);
    CU_ASSERT_EQUAL(db.header, 1);

    /* CRLF line ends (header included): read, then rewritten with LF */
    path_in_dir(path, sizeof path, "crlf.tsv");
    snprintf(text, sizeof text, "# docmine tuning database v1\r\n#kernel\tgpu\r\n%.*s\r\n",
             (int)strlen(line) - 1, line);
    write_text(path, text);
    CU_ASSERT_EQUAL(dm_tune_db_load(&db, path), DM_OK);
    CU_ASSERT_EQUAL(db.rejected, 0);
    CU_ASSERT_EQUAL(db.n, 1);
    CU_ASSERT(db.n == 1 && rows_equal(&db.rows[0], &r));
    CU_ASSERT_EQUAL(dm_tune_db_store(path, &more, 1), DM_OK);
    now = slurp(path);
    CU_ASSERT(now && !strchr(now, '\r'));
    free(now);
    CU_ASSERT_EQUAL(dm_tune_db_load(&db, path), DM_OK);
    CU_ASSERT_EQUAL(db.n, 2);
    dm_tune_db_free(&db);
}

/* A directory where the database should be, an unreadable file, a read-only directory, a path
 * with spaces: errors that name the file and say why, never a crash, never a silent success. */
static void test_unusable_paths(void)
{
    char path[512];
    uint64_t s = 91;
    dm_tune_db_row r = random_row(&s, 1);
    dm_tune_db db;
    dm_tune_db_init(&db);

    path_in_dir(path, sizeof path, "a dir.tsv");
    CU_ASSERT_EQUAL_FATAL(mkdir(path, 0777), 0);
    CU_ASSERT_EQUAL(dm_tune_db_load(&db, path), DM_ERR_IO);
    CU_ASSERT(strstr(dm_error_message(), path) != NULL);
    CU_ASSERT(strstr(dm_error_message(), strerror(EISDIR)) != NULL); /* why, not "read error" */
    CU_ASSERT_EQUAL(dm_tune_db_store(path, &r, 1), DM_ERR_IO);
    CU_ASSERT(strstr(dm_error_message(), strerror(EISDIR)) != NULL);

    /* spaces in the path */
    path_in_dir(path, sizeof path, "with space/my tuning.tsv");
    CU_ASSERT_EQUAL(dm_tune_db_store(path, &r, 1), DM_OK);
    CU_ASSERT_EQUAL(dm_tune_db_load(&db, path), DM_OK);
    CU_ASSERT_EQUAL(db.n, 1);
    dm_tune_db_free(&db);

    /* unreadable file and read-only directory: as another user when root (root reads anything) */
    char ro[512], unread[512];
    path_in_dir(ro, sizeof ro, "ro");
    CU_ASSERT_EQUAL_FATAL(mkdir(ro, 0777), 0);
    path_in_dir(path, sizeof path, "ro/tuning.tsv");
    CU_ASSERT_EQUAL_FATAL(dm_tune_db_store(path, &r, 1), DM_OK);
    char *before = slurp(path);
    CU_ASSERT_EQUAL(chmod(ro, 0555), 0);
    CU_ASSERT_EQUAL(chmod(path, 0444), 0);
    path_in_dir(unread, sizeof unread, "unreadable.tsv");
    write_text(unread, DM_TUNE_DB_HEADER);
    CU_ASSERT_EQUAL(chmod(unread, 0), 0);
    chmod(g_dir, 0755);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) {
            fprintf(stderr, "(cannot drop root: permissions not checked) ");
            _exit(0);
        }
        int code = 0;
        dm_tune_db d;
        dm_tune_db_init(&d);
        if (dm_tune_db_load(&d, unread) != DM_ERR_IO) code |= 1;
        if (!strstr(dm_error_message(), unread) || !strstr(dm_error_message(), strerror(EACCES))) code |= 2;
        dm_tune_db_row more = r;
        more.wclass = (r.wclass + 1) % 40;
        if (dm_tune_db_store(path, &more, 1) != DM_ERR_IO) code |= 4;  /* says it cannot write */
        if (!strstr(dm_error_message(), path) || !strstr(dm_error_message(), strerror(EACCES))) code |= 8;
        if (dm_tune_db_load(&d, path) != DM_OK || d.n != 1) code |= 16; /* still readable */
        _exit(code);
    }
    int st = 0;
    CU_ASSERT_EQUAL(waitpid(pid, &st, 0), pid);
    CU_ASSERT(WIFEXITED(st));
    CU_ASSERT_EQUAL(WEXITSTATUS(st), 0);
    char *after = slurp(path);
    CU_ASSERT(before && after && !strcmp(before, after));
    free(before);
    free(after);
    chmod(ro, 0755);
    chmod(unread, 0644);
}

static void test_path_resolution(void)
{
    char buf[512];
    setenv("HOME", "/home/u", 1);
    unsetenv("DOCMINE_TUNING_DB");
    unsetenv("XDG_CACHE_HOME");
    CU_ASSERT_EQUAL(dm_tune_db_resolve_path(buf, sizeof buf, NULL), DM_OK);
    CU_ASSERT_STRING_EQUAL(buf, "/home/u/.cache/docmine/tuning.tsv");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    CU_ASSERT_EQUAL(dm_tune_db_resolve_path(buf, sizeof buf, NULL), DM_OK);
    CU_ASSERT_STRING_EQUAL(buf, "/xdg/docmine/tuning.tsv");
    setenv("DOCMINE_TUNING_DB", "/env/t.tsv", 1);
    CU_ASSERT_EQUAL(dm_tune_db_resolve_path(buf, sizeof buf, NULL), DM_OK);
    CU_ASSERT_STRING_EQUAL(buf, "/env/t.tsv");
    CU_ASSERT_EQUAL(dm_tune_db_resolve_path(buf, sizeof buf, "/opt/x.tsv"), DM_OK);
    CU_ASSERT_STRING_EQUAL(buf, "/opt/x.tsv");
    CU_ASSERT_EQUAL(dm_tune_db_resolve_path(buf, 5, NULL), DM_ERR_INVALID_ARG);
    /* the configured path goes through the same rules */
    CU_ASSERT_EQUAL(dm_tune_configure(DM_TUNE_MSP, "/cfg/db.tsv", 0), DM_OK);
    CU_ASSERT_STRING_EQUAL(dm_tune_db_path(), "/cfg/db.tsv");
    CU_ASSERT_EQUAL(dm_tune_configure(DM_TUNE_MSP, NULL, 0), DM_OK); /* keeps it */
    CU_ASSERT_STRING_EQUAL(dm_tune_db_path(), "/cfg/db.tsv");
    dm_tune_set_db_path(NULL);
    CU_ASSERT_STRING_EQUAL(dm_tune_db_path(), "/env/t.tsv");
    dm_tune_set_db_path("");
    CU_ASSERT_STRING_EQUAL(dm_tune_db_path(), "/env/t.tsv");
    unsetenv("DOCMINE_TUNING_DB");
    unsetenv("XDG_CACHE_HOME");
}

/* In a child of a process that never set a mode: DOCMINE_TUNE=value gives mode `expect`. */
static int mode_from_env_in_child(const char *value)
{
    pid_t pid = fork();
    if (pid < 0) return -2;
    if (pid == 0) {
        if (value) setenv("DOCMINE_TUNE", value, 1);
        else unsetenv("DOCMINE_TUNE");
        _exit(dm_tune_get_mode());
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -3;
    return WEXITSTATUS(st);
}

/* runs first: no mode has been set in this process yet */
static void test_mode_env(void)
{
    CU_ASSERT_EQUAL(mode_from_env_in_child(NULL), DM_TUNE_MSP);
    CU_ASSERT_EQUAL(mode_from_env_in_child("off"), DM_TUNE_OFF);
    CU_ASSERT_EQUAL(mode_from_env_in_child("model"), DM_TUNE_MODEL);
    CU_ASSERT_EQUAL(mode_from_env_in_child("exhaustive"), DM_TUNE_EXHAUSTIVE);
    CU_ASSERT_EQUAL(mode_from_env_in_child("bogus"), DM_TUNE_MSP); /* warns, default */
}

static void test_local_rank(void)
{
    dm_tune_set_local_rank(-1);
    unsetenv("SLURM_LOCALID");
    unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    unsetenv("MPI_LOCALRANKID");
    unsetenv("PMI_LOCAL_RANK");
    unsetenv("MV2_COMM_WORLD_LOCAL_RANK");
    CU_ASSERT_EQUAL(dm_tune_get_local_rank(), 0);
    setenv("MPI_LOCALRANKID", "3", 1);
    CU_ASSERT_EQUAL(dm_tune_get_local_rank(), 3);
    setenv("SLURM_LOCALID", "bogus", 1); /* ignored */
    CU_ASSERT_EQUAL(dm_tune_get_local_rank(), 3);
    setenv("SLURM_LOCALID", "5", 1);
    CU_ASSERT_EQUAL(dm_tune_get_local_rank(), 5);
    dm_tune_set_local_rank(2); /* set by the context: wins */
    CU_ASSERT_EQUAL(dm_tune_get_local_rank(), 2);
    unsetenv("SLURM_LOCALID");
    unsetenv("MPI_LOCALRANKID");
    dm_tune_set_local_rank(0);
}

static void test_modes(void)
{
    int m = -1;
    const char *names[] = {"off", "model", "msp", "exhaustive"};
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(dm_tune_mode_parse(names[i], &m), DM_OK);
        CU_ASSERT_EQUAL(m, i);
        CU_ASSERT_STRING_EQUAL(dm_tune_mode_name(i), names[i]);
    }
    CU_ASSERT_EQUAL(dm_tune_mode_parse("fast", &m), DM_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(dm_tune_set_mode(9), DM_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(dm_tune_set_mode(DM_TUNE_EXHAUSTIVE), DM_OK);
    CU_ASSERT_EQUAL(dm_tune_get_mode(), DM_TUNE_EXHAUSTIVE);
    CU_ASSERT_EQUAL(dm_tune_workload_class(0), 0);
    CU_ASSERT_EQUAL(dm_tune_workload_class(1), 0);
    CU_ASSERT_EQUAL(dm_tune_workload_class(2), 1);
    CU_ASSERT_EQUAL(dm_tune_workload_class(1023), 9);
    CU_ASSERT_EQUAL(dm_tune_workload_class(1024), 10);
    CU_ASSERT_EQUAL(dm_tune_workload_class((size_t)1 << 40), 40);
}

/* host-only fake kernels: the registry and select never launch without a GPU */
static int fake_launch(const void *args, size_t n, void *stream)
{
    (void)args;
    (void)n;
    (void)stream;
    return DM_OK;
}

static const dm_tune_instance g_fake_inst[] = {
    {{128, 1, 0, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 0},
    {{256, 1, 1, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 0},
    {{256, 4, 1, DM_LAYOUT_SOA, 0}, fake_launch, NULL, 0},
    {{512, 2, 0, DM_LAYOUT_TILED, 8}, fake_launch, NULL, 0},
};
static const dm_tune_kernel g_fake = {
    .name = "test.fake", .description = "a host-only test kernel", .work_unit = "items",
    .instances = g_fake_inst, .n_instances = 4, .default_instance = 1};
static const dm_tune_kernel g_fake_dup = {
    .name = "test.fake", .instances = g_fake_inst, .n_instances = 4, .default_instance = 0};
static const dm_tune_kernel g_fake_bad = {
    .name = "test.bad", .instances = g_fake_inst, .n_instances = 4, .default_instance = 4};

static const dm_tune_instance g_bad_inst[][2] = {
    {{{96, 1, 0, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 0}, {{100, 1, 0, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 0}},
    {{{96, 1, 0, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 0}, {{2048, 1, 0, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 0}},
    {{{96, 1, 0, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 0}, {{128, 0, 0, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 0}},
    {{{96, 1, 0, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 0}, {{128, 1, 0, DM_LAYOUT_TILED, 0}, fake_launch, NULL, 0}},
    {{{96, 1, 0, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 0}, {{128, 1, 0, DM_LAYOUT_SOA, 4}, fake_launch, NULL, 0}},
    {{{96, 1, 0, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 0}, {{128, 1, 0, 7, 0}, fake_launch, NULL, 0}},
    {{{96, 1, 0, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 0}, {{96, 1, 0, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 0}},
    {{{96, 1, 0, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 0}, {{128, 1, 0, DM_LAYOUT_NONE, 0}, NULL, NULL, 0}},
};

static void test_register_validity(void)
{
    /* each space has one invalid or duplicate instance: rejected at registration */
    for (size_t i = 0; i < sizeof g_bad_inst / sizeof g_bad_inst[0]; i++) {
        dm_tune_kernel k = {.name = "test.invalid", .instances = g_bad_inst[i], .n_instances = 2,
                            .default_instance = 0};
        CU_ASSERT_EQUAL(dm_tune_register(&k), DM_ERR_INVALID_ARG);
    }
    CU_ASSERT_PTR_NULL(dm_tune_kernel_find("test.invalid"));
    /* a name the database cannot keep as it is (its key): longer than its field, or with a tab;
     * stored truncated or with a space, its rows were never found again (tuned in every process) */
    static char long_name[65];
    memset(long_name, 'x', 64);
    memcpy(long_name, "test.", 5); /* 64 bytes, one more than the field holds */
    static dm_tune_kernel named; /* static: a registration that wrongly succeeds keeps the pointer */
    named = (dm_tune_kernel){.name = long_name, .instances = g_bad_inst[0], .n_instances = 1,
                             .default_instance = 0};
    CU_ASSERT_EQUAL(dm_tune_register(&named), DM_ERR_INVALID_ARG);
    named.name = "test.tab\tname";
    CU_ASSERT_EQUAL(dm_tune_register(&named), DM_ERR_INVALID_ARG);
    static dm_tune_kernel fits; /* registered: the registry keeps the pointer */
    fits = named;
    fits.name = long_name + 1; /* 63 bytes: fits */
    CU_ASSERT_EQUAL(dm_tune_register(&fits), DM_OK);
    CU_ASSERT_PTR_EQUAL(dm_tune_kernel_find(long_name + 1), &fits);
    /* the first instance alone is valid (96 = 3 warps) */
    static const dm_tune_kernel ok = {.name = "test.valid96", .instances = g_bad_inst[0],
                                      .n_instances = 1, .default_instance = 0};
    CU_ASSERT_EQUAL(dm_tune_register(&ok), DM_OK);
}

static void test_registry_select(void)
{
    int before = dm_tune_kernel_count();
    CU_ASSERT_EQUAL(dm_tune_register(&g_fake), DM_OK);
    CU_ASSERT_EQUAL(dm_tune_register(&g_fake), DM_OK); /* the same descriptor twice: harmless */
    CU_ASSERT_EQUAL(dm_tune_register(&g_fake_dup), DM_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(dm_tune_register(&g_fake_bad), DM_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(dm_tune_register(NULL), DM_ERR_INVALID_ARG);
    CU_ASSERT_EQUAL(dm_tune_kernel_count(), before + 1);
    CU_ASSERT_PTR_EQUAL(dm_tune_kernel_find("test.fake"), &g_fake);
    CU_ASSERT_PTR_EQUAL(dm_tune_kernel_at(before), &g_fake);
    CU_ASSERT_PTR_NULL(dm_tune_kernel_find("test.none"));
    CU_ASSERT_PTR_NULL(dm_tune_kernel_at(before + 1));
    /* mode off: the default; without a GPU every mode selects the default (and never NULL) */
    char path[512];
    path_in_dir(path, sizeof path, "registry/tuning.tsv");
    dm_tune_set_db_path(path);
    dm_tune_gpu gpu;
    int have_gpu = dm_tune_gpu_current(&gpu) == DM_OK;
    for (int m = DM_TUNE_OFF; m <= (have_gpu ? DM_TUNE_OFF : DM_TUNE_EXHAUSTIVE); m++) {
        CU_ASSERT_EQUAL(dm_tune_set_mode(m), DM_OK);
        for (size_t n = 1; n < ((size_t)1 << 34); n *= 7)
            CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_fake, n), &g_fake_inst[1]);
    }
    dm_tune_set_db_path(NULL);
    CU_ASSERT_PTR_NULL(dm_tune_select(NULL, 10));
    char buf[128];
    CU_ASSERT_STRING_EQUAL(dm_tune_policy_str(&g_fake_inst[0].policy, buf, sizeof buf),
                           "block=128 rake=1 consecutive layout=none");
    CU_ASSERT_STRING_EQUAL(dm_tune_policy_str(&g_fake_inst[2].policy, buf, sizeof buf),
                           "block=256 rake=4 strided layout=soa");
    CU_ASSERT_STRING_EQUAL(dm_tune_policy_str(&g_fake_inst[3].policy, buf, sizeof buf),
                           "block=512 rake=2 consecutive layout=tiled:8");
}

/* bench hooks of a host-only kernel: creating a tuning input needs a GPU, which these tests do
 * not have, so the tuner's attempt fails and select falls back to the default */
static int nogpu_create(void **state, size_t n, uint64_t seed)
{
    (void)n;
    (void)seed;
    *state = NULL;
    return DM_ERR(DM_ERR_NO_DEVICE, "test kernel: needs a GPU");
}
static int nogpu_run(void *state, const dm_tune_instance *inst, void *stream)
{
    (void)state;
    (void)inst;
    (void)stream;
    return DM_ERR_NO_DEVICE;
}
static int nogpu_output(void *state, void *host, size_t *nbytes)
{
    (void)state;
    (void)host;
    *nbytes = 0;
    return DM_ERR_NO_DEVICE;
}
static void nogpu_destroy(void *state) { (void)state; }

static const dm_tune_kernel g_fake_bench = {
    .name = "test.fake_bench", .work_unit = "items", .instances = g_fake_inst, .n_instances = 4,
    .default_instance = 1, .bench_create = nogpu_create, .bench_run = nogpu_run,
    .bench_output = nogpu_output, .bench_destroy = nogpu_destroy, .bench_default_n = 1 << 20};

static const dm_tune_gpu g_test_gpu = {"Test GPU 9000", 90, {132, 2048, 32, 1024, 65536, 233472, 232448}};

static dm_tune_db_row row_for(const char *kernel, const char *gpu, int wc, const dm_tune_policy *p)
{
    dm_tune_db_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.kernel, sizeof r.kernel, "%s", kernel);
    snprintf(r.gpu, sizeof r.gpu, "%s", gpu);
    r.cc = 90;
    r.wclass = wc;
    r.policy = *p;
    r.default_ms = 2.0;
    r.tuned_ms = 1.0;
    r.msp_n = 1000;
    r.target_n = (unsigned long long)1 << wc;
    r.mode = DM_TUNE_MSP;
    r.unix_time = 1;
    return r;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_select_from_db(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "select/tuning.tsv");
    dm_tune_policy uncompiled = {64, 1, 0, DM_LAYOUT_NONE, 0};
    dm_tune_db_row rows[3] = {row_for("test.fake", g_test_gpu.name, 20, &g_fake_inst[2].policy),
                              row_for("test.fake", g_test_gpu.name, 21, &uncompiled),
                              row_for("test.fake", "Another GPU", 22, &g_fake_inst[3].policy)};
    CU_ASSERT_EQUAL_FATAL(dm_tune_db_store(path, rows, 3), DM_OK);
    dm_tune_register(&g_fake);
    CU_ASSERT_EQUAL(dm_tune_configure(DM_TUNE_MSP, path, 0), DM_OK);
    dm_tune_override_gpu(&g_test_gpu);
    /* the stored choice for this GPU and class */
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_fake, ((size_t)1 << 20) + 12345), &g_fake_inst[2]);
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_fake, (size_t)1 << 20), &g_fake_inst[2]);
    /* a policy this build does not have: the default (with a warning) */
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_fake, (size_t)1 << 21), &g_fake_inst[1]);
    /* another GPU model's row does not apply; no bench hooks: the default, nothing tuned */
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_fake, (size_t)1 << 22), &g_fake_inst[1]);
    /* mode model: the occupancy model's best predicted instance, no database, no timing */
    dm_tune_set_mode(DM_TUNE_MODEL);
    {
        dm_tune_attr attr[4];
        dm_tune_cand cand[4];
        int order[4];
        for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(dm_tune_gpu_attributes(&attr[i], &g_fake_inst[i]), DM_OK);
        size_t n = (size_t)1 << 26;
        CU_ASSERT(dm_tune_model_prune(cand, g_fake_inst, attr, 4, &g_test_gpu.limits, (double)n) > 0);
        dm_tune_model_order(order, cand, 4, NULL);
        CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_fake, n), &g_fake_inst[order[0]]);
    }
    /* mode off ignores the database */
    dm_tune_set_mode(DM_TUNE_OFF);
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_fake, (size_t)1 << 20), &g_fake_inst[1]);
    /* the other GPU reads its own row */
    dm_tune_gpu other = g_test_gpu;
    snprintf(other.name, sizeof other.name, "Another GPU");
    dm_tune_override_gpu(&other);
    dm_tune_set_mode(DM_TUNE_MSP);
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_fake, (size_t)1 << 22), &g_fake_inst[3]);
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_fake, (size_t)1 << 20), &g_fake_inst[1]);
    /* a row stored later (another process) is seen after the cache is cleared */
    dm_tune_db_row late = row_for("test.fake", "Another GPU", 20, &g_fake_inst[0].policy);
    CU_ASSERT_EQUAL(dm_tune_db_store(path, &late, 1), DM_OK);
    dm_tune_cache_clear();
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_fake, (size_t)1 << 20), &g_fake_inst[0]);
    dm_tune_override_gpu(NULL);
    dm_tune_set_db_path(NULL);
}

/* Holds the key lock of path's key like a tuning process: an exclusive flock. */
static int hold_key_lock(const char *lock)
{
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void test_select_waits(void)
{
    char path[512], lock[1024];
    path_in_dir(path, sizeof path, "wait/tuning.tsv");
    CU_ASSERT_EQUAL_FATAL(dm_tune_db_mkdirs(path), DM_OK);
    CU_ASSERT_EQUAL(dm_tune_configure(DM_TUNE_MSP, path, 0), DM_OK);
    dm_tune_override_gpu(&g_test_gpu);
    /* another process tunes class 18: it holds the key lock and stores the row after 0.5 s */
    dm_tune_db_key_lock_path(lock, sizeof lock, path, g_fake_bench.name, g_test_gpu.name, 90, 18);
    int pipefd[2];
    CU_ASSERT_FATAL(pipe(pipefd) == 0);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        close(pipefd[0]);
        int fd = hold_key_lock(lock);
        char ok = fd >= 0 ? 'y' : 'n';
        if (write(pipefd[1], &ok, 1) != 1) _exit(2);
        struct timespec ts = {0, 500000000};
        nanosleep(&ts, NULL);
        dm_tune_db_row r = row_for(g_fake_bench.name, g_test_gpu.name, 18, &g_fake_inst[3].policy);
        int rc = dm_tune_db_store(path, &r, 1);
        _exit(fd >= 0 && rc == DM_OK ? 0 : 1); /* exiting releases the lock */
    }
    close(pipefd[1]);
    char ok = 0;
    CU_ASSERT_FATAL(read(pipefd[0], &ok, 1) == 1 && ok == 'y');
    close(pipefd[0]);
    setenv("DOCMINE_TUNE_WAIT", "30", 1);
    double t0 = now_s();
    const dm_tune_instance *sel = dm_tune_select(&g_fake_bench, (size_t)1 << 18);
    double waited = now_s() - t0;
    int st = 0;
    waitpid(pid, &st, 0);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* the other process's row (without waiting: this process would tune, fail without a GPU and
     * take the default); no lower bound on the wait, which a loaded host can shorten */
    CU_ASSERT_PTR_EQUAL(sel, &g_fake_inst[3]);
    CU_ASSERT(waited < 30);
    /* a lock that is held throughout: the default after DOCMINE_TUNE_WAIT seconds */
    dm_tune_db_key_lock_path(lock, sizeof lock, path, g_fake_bench.name, g_test_gpu.name, 90, 19);
    int held = hold_key_lock(lock);
    CU_ASSERT_FATAL(held >= 0);
    setenv("DOCMINE_TUNE_WAIT", "1", 1);
    t0 = now_s();
    sel = dm_tune_select(&g_fake_bench, (size_t)1 << 19);
    waited = now_s() - t0;
    CU_ASSERT_PTR_EQUAL(sel, &g_fake_inst[1]);
    CU_ASSERT(waited >= 1.0);
    close(held);
    /* a tuner that died (its lock file left behind, no lock held) does not block anyone:
     * this process takes the key, fails to tune without a GPU and releases the key */
    dm_tune_db_key_lock_path(lock, sizeof lock, path, g_fake_bench.name, g_test_gpu.name, 90, 17);
    FILE *f = fopen(lock, "w");
    CU_ASSERT_FATAL(f != NULL);
    fclose(f);
    setenv("DOCMINE_TUNE_WAIT", "60", 1); /* a wait would take 60 s: far from a loaded host's noise */
    t0 = now_s();
    sel = dm_tune_select(&g_fake_bench, (size_t)1 << 17);
    CU_ASSERT_PTR_EQUAL(sel, &g_fake_inst[1]);
    CU_ASSERT(now_s() - t0 < 20.0);
    held = hold_key_lock(lock); /* released again */
    CU_ASSERT(held >= 0);
    if (held >= 0) close(held);
    unsetenv("DOCMINE_TUNE_WAIT");
    dm_tune_override_gpu(NULL);
    dm_tune_set_db_path(NULL);
}

static void test_select_mode_strength(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "strength/tuning.tsv");
    dm_tune_db_row rows[2] = {row_for("test.fake", g_test_gpu.name, 16, &g_fake_inst[2].policy),
                              row_for("test.fake_bench", g_test_gpu.name, 16, &g_fake_inst[2].policy)};
    CU_ASSERT_EQUAL_FATAL(dm_tune_db_store(path, rows, 2), DM_OK); /* both found by msp */
    CU_ASSERT_EQUAL(dm_tune_configure(DM_TUNE_MSP, path, 0), DM_OK);
    dm_tune_override_gpu(&g_test_gpu);
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_fake_bench, (size_t)1 << 16), &g_fake_inst[2]);
    /* exhaustive asks for a stronger search: the tunable kernel is tuned again (which fails
     * here without a GPU: the default), the one without bench hooks keeps the msp row */
    setenv("DOCMINE_TUNE_WAIT", "5", 1);
    dm_tune_set_mode(DM_TUNE_EXHAUSTIVE);
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_fake_bench, (size_t)1 << 16), &g_fake_inst[1]);
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_fake, (size_t)1 << 16), &g_fake_inst[2]);
    /* an exhaustive row answers msp too */
    dm_tune_db_row ex = row_for("test.fake_bench", g_test_gpu.name, 16, &g_fake_inst[3].policy);
    ex.mode = DM_TUNE_EXHAUSTIVE;
    CU_ASSERT_EQUAL(dm_tune_db_store(path, &ex, 1), DM_OK);
    dm_tune_cache_clear();
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_fake_bench, (size_t)1 << 16), &g_fake_inst[3]);
    dm_tune_set_mode(DM_TUNE_MSP);
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_fake_bench, (size_t)1 << 16), &g_fake_inst[3]);
    unsetenv("DOCMINE_TUNE_WAIT");
    dm_tune_override_gpu(NULL);
    dm_tune_set_db_path(NULL);
}

/* A database that cannot be read (another format version, a directory) cannot be written either:
 * select keeps the default and does not tune (tuning would be lost, and repeated by every process
 * of the job in turn); a missing key is tuned as soon as the database is usable again. */
static void test_select_unusable_db(void)
{
    char path[512], lock[1024];
    struct stat st;
    dm_tune_register(&g_fake_bench);
    path_in_dir(path, sizeof path, "unusable/tuning.tsv");
    dm_tune_db_key_lock_path(lock, sizeof lock, path, g_fake_bench.name, g_test_gpu.name,
                             g_test_gpu.cc, 15);
    CU_ASSERT_EQUAL_FATAL(dm_tune_db_mkdirs(path), DM_OK);
    write_text(path, "# docmine tuning database v2\n");
    CU_ASSERT_EQUAL(dm_tune_configure(DM_TUNE_MSP, path, 0), DM_OK);
    dm_tune_override_gpu(&g_test_gpu);
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_fake_bench, (size_t)1 << 15), &g_fake_inst[1]);
    CU_ASSERT(stat(lock, &st) != 0); /* no tuning was started: its key lock was never made */
    /* the same with a directory in its place */
    CU_ASSERT_EQUAL(unlink(path), 0);
    CU_ASSERT_EQUAL(mkdir(path, 0777), 0);
    dm_tune_cache_clear();
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_fake_bench, (size_t)1 << 15), &g_fake_inst[1]);
    CU_ASSERT(stat(lock, &st) != 0);
    /* usable again (missing: an empty database): the key is tuned (which fails without a GPU) */
    CU_ASSERT_EQUAL(rmdir(path), 0);
    dm_tune_cache_clear();
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_fake_bench, (size_t)1 << 15), &g_fake_inst[1]);
    CU_ASSERT(stat(lock, &st) == 0);
    dm_tune_override_gpu(NULL);
    dm_tune_set_db_path(NULL);
}

/* Mode model answers per workload class like the database: the choice for a class does not depend
 * on which n of the class came first (Fang's b is taken at the class's lower bound 2^class). Here
 * b = n / (132 SMs x 64 warps x 32) is 3.9 at 2^20 and 7.8 at 2^21 - 1: rake 2 against rake 4. */
static const dm_tune_instance g_rake_inst[] = {
    {{256, 1, 1, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 0},
    {{256, 2, 1, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 0},
    {{256, 4, 1, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 0},
};
static const dm_tune_kernel g_rake = {
    .name = "test.rake", .work_unit = "items", .instances = g_rake_inst, .n_instances = 3,
    .default_instance = 0};

static void test_select_model_class(void)
{
    CU_ASSERT_EQUAL(dm_tune_configure(DM_TUNE_MODEL, NULL, 0), DM_OK);
    dm_tune_override_gpu(&g_test_gpu);
    const size_t lo = (size_t)1 << 20, hi = ((size_t)1 << 21) - 1;
    CU_ASSERT_EQUAL(dm_tune_workload_class(lo), dm_tune_workload_class(hi));
    /* the model alone differs between the two ends of the class */
    dm_tune_attr attr[3];
    dm_tune_cand cand[3];
    int order_lo[3], order_hi[3];
    for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(dm_tune_gpu_attributes(&attr[i], &g_rake_inst[i]), DM_OK);
    CU_ASSERT(dm_tune_model_prune(cand, g_rake_inst, attr, 3, &g_test_gpu.limits, (double)lo) > 0);
    dm_tune_model_order(order_lo, cand, 3, NULL);
    CU_ASSERT(dm_tune_model_prune(cand, g_rake_inst, attr, 3, &g_test_gpu.limits, (double)hi) > 0);
    dm_tune_model_order(order_hi, cand, 3, NULL);
    CU_ASSERT_NOT_EQUAL(order_lo[0], order_hi[0]);
    /* select: the lower bound's choice, whichever size asks first */
    const dm_tune_instance *a = dm_tune_select(&g_rake, hi);
    const dm_tune_instance *b = dm_tune_select(&g_rake, lo);
    dm_tune_cache_clear();
    const dm_tune_instance *c = dm_tune_select(&g_rake, lo);
    const dm_tune_instance *d = dm_tune_select(&g_rake, hi);
    CU_ASSERT_PTR_EQUAL(a, &g_rake_inst[order_lo[0]]);
    CU_ASSERT_PTR_EQUAL(b, a);
    CU_ASSERT_PTR_EQUAL(c, a);
    CU_ASSERT_PTR_EQUAL(d, a);
    dm_tune_override_gpu(NULL);
    dm_tune_set_mode(DM_TUNE_MSP);
}

/* A database row naming a compiled instance that cannot run on this GPU in this build (a row from
 * another docmine version, whose instance needed less shared memory or fewer registers; the key
 * is the GPU model, not the build): select launched it, and the launch failed. Now the default,
 * with a warning; a row whose instance runs is used as before. */
static const dm_tune_instance g_smem_inst[] = {
    {{256, 1, 1, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 0},
    {{128, 1, 1, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 300000}, /* above 232448 per block */
    {{512, 1, 1, DM_LAYOUT_NONE, 0}, fake_launch, NULL, 1024},
};
static const dm_tune_kernel g_smem = {
    .name = "test.smem", .work_unit = "items", .instances = g_smem_inst, .n_instances = 3,
    .default_instance = 0};

static void test_select_row_cannot_run(void)
{
    char path[512];
    path_in_dir(path, sizeof path, "cannot_run/tuning.tsv");
    dm_tune_db_row rows[2] = {row_for(g_smem.name, g_test_gpu.name, 20, &g_smem_inst[1].policy),
                              row_for(g_smem.name, g_test_gpu.name, 21, &g_smem_inst[2].policy)};
    CU_ASSERT_EQUAL_FATAL(dm_tune_db_store(path, rows, 2), DM_OK);
    CU_ASSERT_EQUAL(dm_tune_configure(DM_TUNE_MSP, path, 0), DM_OK);
    dm_tune_override_gpu(&g_test_gpu);
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_smem, (size_t)1 << 20), &g_smem_inst[0]);
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_smem, (size_t)1 << 21), &g_smem_inst[2]);
    /* exhaustive reads the same rows only when they are exhaustive ones */
    rows[0].mode = DM_TUNE_EXHAUSTIVE;
    CU_ASSERT_EQUAL_FATAL(dm_tune_db_store(path, rows, 1), DM_OK);
    dm_tune_set_mode(DM_TUNE_EXHAUSTIVE);
    CU_ASSERT_PTR_EQUAL(dm_tune_select(&g_smem, (size_t)1 << 20), &g_smem_inst[0]);
    dm_tune_override_gpu(NULL);
    dm_tune_set_mode(DM_TUNE_MSP);
    dm_tune_set_db_path(NULL);
}

static void test_list(void)
{
    dm_tune_register(&g_fake);
    char path[512];
    path_in_dir(path, sizeof path, "list.txt");
    FILE *f = fopen(path, "w+");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT_EQUAL(dm_tune_list_print(f), DM_OK);
    rewind(f);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    /* every registered kernel with its space and default */
    for (int i = 0; i < dm_tune_kernel_count(); i++) {
        const dm_tune_kernel *k = dm_tune_kernel_at(i);
        char pol[128], space[512];
        CU_ASSERT(strstr(text, k->name) != NULL);
        CU_ASSERT(strstr(text, dm_tune_policy_str(&k->instances[k->default_instance].policy, pol, sizeof pol)) != NULL);
        CU_ASSERT(strstr(text, dm_tune_space_str(k, space, sizeof space)) != NULL);
    }
    char space[512];
    CU_ASSERT_STRING_EQUAL(dm_tune_space_str(&g_fake, space, sizeof space),
                           "block {128,256,512} x rake {1,2,4} x {consecutive,strided} x "
                           "layout {none,soa,tiled} x tile {8} (4 instances)");
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    CU_pSuite s = CU_add_suite("tune_db", suite_init, suite_clean);
    CU_add_test(s, "mode_env", test_mode_env);
    CU_add_test(s, "row_round_trip", test_row_round_trip);
    CU_add_test(s, "store_load", test_store_load);
    CU_add_test(s, "corrupted_lines", test_corrupted_lines);
    CU_add_test(s, "concurrent_writers", test_concurrent_writers);
    CU_add_test(s, "concurrent_threads", test_concurrent_threads);
    CU_add_test(s, "store_model_keeps_measured", test_store_model_keeps_measured);
    CU_add_test(s, "store_through_symlink", test_store_through_symlink);
    CU_add_test(s, "foreign_files", test_foreign_files);
    CU_add_test(s, "unusable_paths", test_unusable_paths);
    CU_add_test(s, "path_resolution", test_path_resolution);
    CU_add_test(s, "modes", test_modes);
    CU_add_test(s, "local_rank", test_local_rank);
    CU_add_test(s, "register_validity", test_register_validity);
    CU_add_test(s, "registry_select", test_registry_select);
    CU_add_test(s, "select_from_db", test_select_from_db);
    CU_add_test(s, "select_waits", test_select_waits);
    CU_add_test(s, "select_mode_strength", test_select_mode_strength);
    CU_add_test(s, "select_unusable_db", test_select_unusable_db);
    CU_add_test(s, "list", test_list);
    CU_add_test(s, "select_model_class", test_select_model_class);
    CU_add_test(s, "select_row_cannot_run", test_select_row_cannot_run);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned fails = CU_get_number_of_failures();
    CU_cleanup_registry();
    return fails ? 1 : 0;
}
