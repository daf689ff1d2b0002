/* Checks the outputs of one `docmine pipeline` run (used by test_pipeline_cli.sh):
 *   check_outputs DIR METHOD DOCS RANKS MIN_NMI|-
 * report.json parses and holds the run's method, documents, ranks, every stage's timers over
 * ranks (min <= avg <= max), throughput, tuning and the listed outputs; assignments.tsv has one
 * well-formed line per document with clusters in range; clusters.tsv's sizes and noise line
 * agree with assignments.tsv; with labels, the NMI recomputed from assignments.tsv equals the
 * report's and is at least MIN_NMI; flock runs have positions.csv and PNG files. Prints one line
 * per failure and exits 1, else "ok" and 0. Reference: DESIGN.md section 8. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/metrics.h"

static int g_fail;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL %s: ", g_dir);                                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            g_fail = 1;                                                                            \
        }                                                                                          \
    } while (0)
static const char *g_dir;

static FILE *open_in(const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    return fopen(p, "rb");
}

/* Reads a whole line (without its newline) into a growing buffer; 0 at the end of the file. */
static int read_line(FILE *f, char **buf, size_t *cap)
{
    size_t n = 0;
    int c;
    while ((c = fgetc(f)) != EOF && c != '\n') {
        if (n + 2 > *cap) {
            *cap = *cap ? 2 * *cap : 256;
            *buf = realloc(*buf, *cap);
            if (!*buf) exit(2);
        }
        (*buf)[n++] = (char)c;
    }
    if (c == EOF && n == 0) return 0;
    if (!*buf) *buf = malloc(*cap = 256);
    (*buf)[n] = '\0';
    return 1;
}

static const char *str_of(json_t *j)
{
    const char *s = json_string_value(j);
    return s ? s : "";
}

static void check_timer(json_t *timers, const char *name, int ranks)
{
    json_t *t = json_object_get(timers, name);
    CHECK(t != NULL, "report.json: no timer %s", name);
    if (!t) return;
    double mn = json_number_value(json_object_get(t, "min")), av = json_number_value(json_object_get(t, "avg")),
           mx = json_number_value(json_object_get(t, "max"));
    json_int_t calls = json_integer_value(json_object_get(t, "calls"));
    CHECK(mn >= 0 && mn <= av + 1e-12 && av <= mx + 1e-12, "timer %s: min %g avg %g max %g out of order", name, mn, av, mx);
    CHECK(calls >= ranks, "timer %s: %lld calls over %d ranks", name, (long long)calls, ranks);
}

static int png_ok(const char *name)
{
    FILE *f = open_in(name);
    if (!f) return 0;
    unsigned char sig[8] = {0};
    size_t got = fread(sig, 1, 8, f);
    fclose(f);
    return got == 8 && memcmp(sig, "\x89PNG\r\n\x1a\n", 8) == 0;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: check_outputs DIR METHOD DOCS RANKS MIN_NMI|-\n");
        return 2;
    }
    g_dir = argv[1];
    const char *method = argv[2];
    long long docs = atoll(argv[3]);
    int ranks = atoi(argv[4]);
    int want_nmi = strcmp(argv[5], "-") != 0;
    double min_nmi = want_nmi ? atof(argv[5]) : 0;

    /* report.json */
    char p[4096];
    snprintf(p, sizeof p, "%s/report.json", g_dir);
    json_error_t err;
    json_t *rep = json_load_file(p, 0, &err);
    CHECK(rep != NULL, "report.json does not parse: %s (line %d)", err.text, err.line);
    if (!rep) return 1;
    json_t *res = json_object_get(rep, "results");
    CHECK(json_is_object(res), "report.json: no results");
    CHECK(strcmp(str_of(json_object_get(rep, "command")), "pipeline") == 0, "report.json: command");
    CHECK(strcmp(str_of(json_object_get(res, "method")), method) == 0, "report.json: method is not %s", method);
    CHECK(json_integer_value(json_object_get(res, "documents")) == docs, "report.json: documents %lld, expected %lld",
          (long long)json_integer_value(json_object_get(res, "documents")), docs);
    CHECK(json_integer_value(json_object_get(rep, "ranks")) == ranks, "report.json: ranks");
    json_t *timers = json_object_get(rep, "timers_s");
    static const char *const stages[] = {"pipeline.preprocess", "pipeline.tfidf", "pipeline.cluster", "pipeline.total"};
    for (int i = 0; i < 4; i++) check_timer(timers, stages[i], ranks);
    json_t *th = json_object_get(res, "throughput");
    CHECK(json_number_value(json_object_get(th, "documents_per_second")) > 0, "report.json: no throughput");
    json_t *tun = json_object_get(res, "tuning");
    CHECK(json_string_value(json_object_get(tun, "mode")) && json_is_array(json_object_get(tun, "selections")),
          "report.json: no tuning choices");
    for (int k = 0; k < 3; k++) {
        static const char *const kk[] = {"host", "pinned", "device"};
        CHECK(json_is_integer(json_object_get(json_object_get(tun, "search_memory_bytes_max"), kk[k])),
              "report.json: tuning has no search_memory_bytes_max.%s", kk[k]);
    }
    json_t *cl = json_object_get(res, "cluster");
    /* every stage's memory peaks: none above the run's, the run's reached in one of them (the
     * stages hold all of the run's big allocations), and every stage used host memory */
    static const char *const kinds[] = {"host", "pinned", "device"};
    static const char *const parts[] = {"preprocess", "tfidf", "cluster"};
    json_t *run_peak = json_object_get(rep, "peak_memory_bytes_max_over_ranks");
    for (int k = 0; k < 3; k++) {
        json_t *rv = json_object_get(run_peak, kinds[k]);
        CHECK(json_is_integer(rv), "report.json: no run peak of %s memory", kinds[k]);
        json_int_t most = 0;
        for (int s = 0; s < 3; s++) {
            json_t *sv = json_object_get(json_object_get(json_object_get(res, parts[s]), "peak_memory_bytes_max_over_ranks"),
                                         kinds[k]);
            CHECK(json_is_integer(sv), "report.json: no %s peak of %s memory", parts[s], kinds[k]);
            json_int_t v = json_integer_value(sv);
            CHECK(v <= json_integer_value(rv), "report.json: %s's %s peak %lld above the run's %lld", parts[s], kinds[k],
                  (long long)v, (long long)json_integer_value(rv));
            CHECK(k != 0 || v > 0, "report.json: %s used no host memory", parts[s]);
            if (v > most) most = v;
        }
        CHECK(most >= json_integer_value(rv) * 9 / 10, "report.json: the stages' %s peaks (at most %lld) far below the run's %lld",
              kinds[k], (long long)most, (long long)json_integer_value(rv));
    }
    json_int_t n_clusters = json_integer_value(json_object_get(cl, "clusters"));
    CHECK(n_clusters >= 1, "report.json: %lld clusters", (long long)n_clusters);
    json_t *outs = json_object_get(res, "outputs");
    size_t oi;
    json_t *ov;
    json_array_foreach(outs, oi, ov) {
        FILE *f = open_in(json_string_value(ov));
        CHECK(f != NULL, "listed output %s missing", json_string_value(ov));
        if (f) fclose(f);
    }

    /* assignments.tsv */
    FILE *f = open_in("assignments.tsv");
    CHECK(f != NULL, "no assignments.tsv");
    if (!f) return 1;
    char *line = NULL;
    size_t cap = 0;
    CHECK(read_line(f, &line, &cap) && strcmp(line, "doc\tlabel\tcluster") == 0, "assignments.tsv: header");
    int32_t *pred = malloc(sizeof *pred * (size_t)(docs + 1));
    char **lab = calloc((size_t)docs + 1, sizeof *lab);
    long long n = 0;
    long long *size = calloc((size_t)n_clusters + 2, sizeof *size);
    int labelled = 0, bad_lines = 0;
    while (read_line(f, &line, &cap)) {
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!t1 || !t2 || strchr(t2 + 1, '\t') || t1 == line || n >= docs) {
            bad_lines++;
            n++;
            continue;
        }
        *t2 = '\0';
        char *end;
        long c = strtol(t2 + 1, &end, 10);
        if (*end || c < -1 || c >= n_clusters) bad_lines++;
        pred[n] = (int32_t)c;
        size[c + 1]++;
        char *comma = strchr(t1 + 1, ',');
        if (comma) *comma = '\0';
        lab[n] = strdup(t1 + 1);
        if (lab[n][0]) labelled = 1;
        n++;
    }
    fclose(f);
    CHECK(n == docs, "assignments.tsv: %lld documents, expected %lld", n, docs);
    CHECK(bad_lines == 0, "assignments.tsv: %d malformed lines", bad_lines);

    /* clusters.tsv: sizes match */
    f = open_in("clusters.tsv");
    CHECK(f != NULL, "no clusters.tsv");
    if (f) {
        CHECK(read_line(f, &line, &cap) && strcmp(line, "cluster\tsize\ttop_terms\tweights") == 0, "clusters.tsv: header");
        long long rows = 0, noise_line = -1;
        while (read_line(f, &line, &cap)) {
            long k = -2;
            long long s = -1;
            char terms[8];
            if (sscanf(line, "%ld\t%lld\t%7s", &k, &s, terms) < 2) {
                CHECK(0, "clusters.tsv: malformed line '%s'", line);
                continue;
            }
            if (k == -1) noise_line = s;
            else {
                CHECK(k == rows && k < n_clusters, "clusters.tsv: cluster %ld out of order", k);
                if (k >= 0 && k < n_clusters) CHECK(s == size[k + 1], "clusters.tsv: cluster %ld size %lld, assignments %lld", k, s, size[k + 1]);
                CHECK(s == 0 || strchr(line, '\t') != strrchr(line, '\t'), "clusters.tsv: cluster %ld without top terms", k);
                rows++;
            }
        }
        fclose(f);
        CHECK(rows == n_clusters, "clusters.tsv: %lld clusters, report %lld", rows, (long long)n_clusters);
        CHECK(noise_line == size[0], "clusters.tsv: noise %lld, assignments %lld", noise_line, size[0]);
    }

    /* quality: recomputed from assignments.tsv */
    json_t *q = json_object_get(res, "quality");
    CHECK(!labelled == !q, "report.json: quality %s but the documents are %slabelled", q ? "present" : "absent",
          labelled ? "" : "not ");
    if (labelled && n == docs && !bad_lines) {
        int32_t *truth = malloc(sizeof *truth * (size_t)n), n_classes = 0;
        CHECK(dm_metrics_classes(truth, &n_classes, (const char *const *)lab, (size_t)n) == 0, "classes failed");
        dm_metrics met;
        CHECK(dm_metrics_compute(&met, truth, pred, (size_t)n) == 0, "metrics failed");
        double nmi = json_number_value(json_object_get(q, "nmi"));
        CHECK(fabs(met.nmi - nmi) < 1e-9, "NMI from assignments.tsv %.6f, report %.6f", met.nmi, nmi);
        CHECK(fabs(met.ari - json_number_value(json_object_get(q, "ari"))) < 1e-9, "ARI differs from the report");
        CHECK(json_integer_value(json_object_get(q, "clusters")) == met.clusters &&
                  json_integer_value(json_object_get(q, "classes")) == met.classes,
              "report.json: quality's clusters/classes differ from assignments.tsv's (%d, %d)", met.clusters, met.classes);
        if (want_nmi) CHECK(met.nmi >= min_nmi, "NMI %.4f below %.2f (ARI %.4f purity %.4f, %lld clusters)", met.nmi,
                            min_nmi, met.ari, met.purity, (long long)n_clusters);
        printf("%s: NMI %.4f ARI %.4f purity %.4f, %lld clusters\n", g_dir, met.nmi, met.ari, met.purity,
               (long long)n_clusters);
        free(truth);
    } else if (want_nmi) {
        CHECK(0, "no labels to check the NMI against");
    }

    if (strcmp(method, "flock") == 0) {
        f = open_in("positions.csv");
        long long lines = 0;
        if (f) {
            while (read_line(f, &line, &cap)) lines++;
            fclose(f);
        }
        CHECK(lines == docs + 1, "positions.csv: %lld lines, expected %lld", lines, docs + 1);
        CHECK(png_ok("flock.png"), "flock.png missing or not a PNG");
        if (labelled) CHECK(png_ok("flock-labels.png"), "flock-labels.png missing or not a PNG");
    }
    for (long long i = 0; i < n && i < docs; i++) free(lab[i]);
    free(lab);
    free(pred);
    free(size);
    free(line);
    json_decref(rep);
    if (!g_fail) printf("ok %s\n", g_dir);
    return g_fail;
}
