/* `docmine pipeline`: preprocess, TF-IDF and clustering (flock or streamclust) in one run per
 * rank without intermediate files, on a corpus or on the synthetic corpus generated in memory;
 * the outputs of DESIGN.md section 8 and one report.json with every stage's timers over ranks,
 * throughput, tuning choices and quality metrics when labels exist. Reference: the stage
 * commands (vectorize, flock, streamclust), whose library calls it chains. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/cmd_flock.h"
#include "apps/cmd_vectorize.h"
#include "apps/commands.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/report.h"
#include "common/status.h"
#include "common/timer.h"
#include "common/tune/tune.h"
#include "common/tune/tune_db.h"
#include "common/tune/wl_cache.h"
#include "datasets/synth.h"
#include "flock/flock.h"
#include "streamclust/streamclust.h"
#include "tfidf/tfidf.h"
#include "tfidf/tfidf_internal.h"

#define DM_PIPELINE_DEFAULT_DOCS 20000

static void usage(FILE *f)
{
    fprintf(f,
            "usage: docmine pipeline (--corpus PATH | --synthetic N|default) [--method flock|streamclust]\n"
            "                        -o DIR [options]\n\n"
            "Reads and preprocesses a corpus, weighs it with TF-IDF and clusters it, in one run per\n"
            "rank without intermediate files. Each rank reads its share (files split by bytes, or its\n"
            "range of synthetic documents); vectors and flocking results do not depend on the number\n"
            "of ranks. Rank 0 prints progress; every rank writes its own rows of the outputs (MPI-IO:\n"
            "DIR belongs on a file system that every node sees).\n\n"
            "input:\n"
            "  --corpus PATH           file or directory tree (formats of docmine vectorize)\n"
            "  --synthetic N|default   N labelled synthetic documents generated in memory by the ranks\n"
            "                          (default: %d documents, 10 topics)\n"
            "  --docs-per-rank N       synthetic: N documents per rank instead (weak scaling)\n"
            "  --synth-share I/G       synthetic, 1 rank: the documents rank I of a G-rank run\n"
            "                          generates (its share of G x N documents), for baselines\n"
            "  --synth-topics K        topics (default 10)\n"
            "  --synth-overlap X       fraction of words from the shared vocabulary (default 0.35)\n"
            "  --synth-words MIN,MAX   document lengths in words (default 50,1000)\n"
            "vectors:\n"
            "  --idf log|sklearn       (default log)     --sublinear   tf = 1 + ln(count)\n"
            "  --min-df X, --max-df X  as for docmine vectorize\n"
            "%s"
            "method (default flock):\n"
            "  --method flock          multi-species flocking (options of docmine flock:)\n"
            "%s"
            "  --method streamclust    STREAM k-median on the vectors hashed into DIM dimensions:\n"
            "  --k KMIN,KMAX           centres (default 10,20)\n"
            "  --dim D                 hashed dimensions (default 256)\n"
            "  --chunksize N           points clustered per step (default 65536)\n"
            "  --clustersize N         room for the intermediate centres (default 1000)\n"
            "output:\n"
            "  -o, --output DIR        assignments.tsv clusters.tsv report.json; flock adds\n"
            "                          positions.csv flock.png flock-labels.png (--top-terms K: both methods)\n"
            "  (global: --backend, --seed, --report, --threads, --tune, --progress)\n\n"
            "examples:\n"
            "  docmine pipeline --synthetic default -o out/demo\n"
            "  docmine pipeline --corpus reuters21578 --format reuters --method flock -o out/reuters\n"
            "  mpiexec -n 4 docmine pipeline --synthetic default --docs-per-rank 250000 --method streamclust -o out/ws\n",
            DM_PIPELINE_DEFAULT_DOCS, dm_vectorize_pp_help, dm_flock_cli_help);
}

/* "A,B" with lo <= A <= B <= hi. */
static int parse_pair(const char *s, long lo, long hi, long *a, long *b)
{
    char *end;
    errno = 0;
    *a = strtol(s, &end, 10);
    if (end == s || *end != ',' || errno) return -1;
    const char *t = end + 1;
    *b = strtol(t, &end, 10);
    if (end == t || *end || errno) return -1;
    return (*a >= lo && *a <= *b && *b <= hi) ? 0 : -1;
}

enum { DM_PIPE_FLOCK = 0, DM_PIPE_STREAMCLUST = 1 };

/* ---- the synthetic corpus as a preprocess document source --------------------------------- */

typedef struct synth_source {
    const dm_synth *s;
    uint64_t first, last;
} synth_source;

/* documents per unit of the source: the reader pool generates units in parallel */
#define SYNTH_UNIT_DOCS 256

/* Unit u: documents [first + u * SYNTH_UNIT_DOCS, ...) up to last, with the ids and labels of
 * `docmine synth` (synth-<i>, topic<k>). */
static int synth_docs(void *src, size_t u, dm_pp_stats *st, dm_doc_sink *sink, void *user)
{
    const synth_source *ss = src;
    char *buf = NULL, id[32], label[32];
    size_t cap = 0, len = 0;
    int rc = DM_OK;
    uint64_t first = ss->first + (uint64_t)u * SYNTH_UNIT_DOCS;
    uint64_t last = first + SYNTH_UNIT_DOCS < ss->last ? first + SYNTH_UNIT_DOCS : ss->last;
    for (uint64_t i = first; i < last && rc == DM_OK; i++) {
        int topic;
        rc = dm_synth_doc(ss->s, i, &topic, &buf, &cap, &len);
        if (rc != DM_OK) break;
        snprintf(id, sizeof id, "synth-%" PRIu64, i);
        snprintf(label, sizeof label, "topic%d", topic);
        dm_raw_doc d = {id, label, buf, len};
        st->bytes_read += len; /* the text a reader would have read */
        rc = sink(user, &d);
    }
    dm_free(buf);
    return rc;
}

/* This rank's token stream of the synthetic corpus (this rank's share, or with share_of > 0 on one
 * rank, share `share` of share_of); stats summed over ranks. Collective. */
static int preprocess_synthetic(dm_token_stream *out, const dm_ctx *ctx, const dm_synth_options *so,
                                const dm_preprocess_options *pp, int share, int share_of)
{
    dm_synth s;
    int rc = dm_ctx_agree(ctx, dm_synth_init(&s, so));
    if (rc != DM_OK) return rc;
    synth_source src = {&s, 0, 0};
    if (share_of > 0) dm_synth_share(so->docs, share, share_of, &src.first, &src.last);
    else dm_synth_share(so->docs, ctx->rank, ctx->size, &src.first, &src.last);
    /* about (min + max) / 2 words of 7 bytes: sizes the automatic batches */
    uint64_t hint = (src.last - src.first) * (uint64_t)(so->min_words + so->max_words) * 4;
    dm_doc_source ds = {synth_docs, &src, (size_t)((src.last - src.first + SYNTH_UNIT_DOCS - 1) / SYNTH_UNIT_DOCS),
                        hint, 1};
    dm_pp_times times;
    memset(&times, 0, sizeof times);
    rc = dm_preprocess_source(out, &times, &ds, pp, pp->backend);
    dm_synth_free(&s);
    /* the stages in the report (read = generating the documents here) */
    if (rc == DM_OK) dm_pp_times_to_timers(&times, "preprocess", 1);
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) rc = dm_ctx_agree(ctx, dm_pp_stats_allreduce(&out->stats, &ctx->world));
    if (rc != DM_OK) dm_token_stream_free(out);
    return rc;
}

/* ---- streamclust on the vectors ------------------------------------------------------------ */

typedef struct sc_params {
    long kmin, kmax, chunksize, clustersize;
    int dim;
} sc_params;

/* STREAM k-median on this rank's vectors hashed into sp->dim dimensions (dm_sc_points_from_vectors,
 * an in-memory stream for dm_sc_run), then the labelled outputs with flock's writers:
 * assignments.tsv, clusters.tsv (top terms by summed weight), and the quality. Collective. */
static int run_streamclust(dm_flock_job_result *jr, json_t *cl, const dm_ctx *ctx, const dm_vectors *v,
                           const sc_params *sp, const char *out, const dm_flock_vocab *names, int top_k)
{
    memset(jr, 0, sizeof *jr);
    dm_sc_points pts;
    memset(&pts, 0, sizeof pts);
    dm_timer_start("streamclust.vectors");
    int rc = dm_ctx_agree(ctx, dm_sc_points_from_vectors(&pts, v, sp->dim));
    dm_timer_stop("streamclust.vectors");
    if (rc != DM_OK) return rc;
    dm_sc_options o = DM_SC_OPTIONS_INIT;
    o.kmin = sp->kmin;
    o.kmax = sp->kmax;
    o.dim = sp->dim;
    o.chunksize = sp->chunksize;
    o.clustersize = sp->clustersize;
    o.backend = ctx->backend == DM_BACKEND_CUDA ? DM_SC_CUDA : DM_SC_CPU;
    o.points = &pts;
    dm_sc_result r;
    memset(&r, 0, sizeof r);
    dm_timer_start("streamclust.total");
    rc = dm_ctx_agree(ctx, dm_sc_run(&r, &o, (void *)&ctx->world));
    dm_timer_stop("streamclust.total");
    dm_sc_points_free(&pts);
    if (rc != DM_OK) return rc;

    /* the clusters of this rank's rows; every output is written from the rows (flock_rows.c) */
    int32_t *row_cluster = dm_malloc(sizeof *row_cluster * (size_t)(v->n_rows ? v->n_rows : 1));
    int32_t *truth = dm_malloc(sizeof *truth * (size_t)(v->n_rows ? v->n_rows : 1));
    int32_t n_classes = 0;
    if (!row_cluster || !truth || r.n_local != (long)v->n_rows) rc = DM_ERR(DM_ERR_NOMEM, "pipeline: out of memory");
    for (uint64_t i = 0; rc == DM_OK && i < v->n_rows; i++) row_cluster[i] = r.labels[i];
    rc = dm_ctx_agree(ctx, rc);
    dm_timer_start("streamclust.classes");
    if (rc == DM_OK) rc = dm_flock_classes_rows(truth, &n_classes, v, ctx);
    dm_timer_stop("streamclust.classes");
    uint64_t n_docs = v->n_rows;
    MPI_Allreduce(MPI_IN_PLACE, &n_docs, 1, MPI_UINT64_T, MPI_SUM, ctx->world);
    uint32_t *terms = NULL;
    double *tw = NULL;
    dm_timer_start("streamclust.top_terms");
    if (rc == DM_OK) rc = dm_flock_top_terms_rows(&terms, &tw, row_cluster, (int32_t)r.k, v, top_k, ctx);
    dm_timer_stop("streamclust.top_terms");
    jr->docs = n_docs;
    jr->clusters = (int32_t)r.k;
    jr->have_labels = n_classes > 0;
    char p[4300];
    dm_timer_start("streamclust.files");
    snprintf(p, sizeof p, "%s/assignments.tsv", out);
    if (rc == DM_OK) rc = dm_flock_write_assignments_rows(p, v, row_cluster, ctx);
    snprintf(p, sizeof p, "%s/clusters.tsv", out);
    if (rc == DM_OK)
        rc = dm_flock_write_clusters_rows(p, &jr->noise, row_cluster, v->n_rows, jr->clusters, terms, tw, top_k, names, ctx);
    dm_timer_stop("streamclust.files");
    dm_timer_start("streamclust.quality");
    if (rc == DM_OK && jr->have_labels) rc = dm_flock_quality_rows(&jr->quality, truth, row_cluster, (size_t)v->n_rows, ctx);
    dm_timer_stop("streamclust.quality");
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) {
        json_object_set_new(cl, "documents", json_integer((json_int_t)n_docs));
        json_object_set_new(cl, "config", json_pack("{s:I,s:I,s:i,s:I,s:I,s:s}", "kmin", (json_int_t)o.kmin, "kmax",
                                                    (json_int_t)o.kmax, "dim", o.dim, "chunksize", (json_int_t)o.chunksize,
                                                    "clustersize", (json_int_t)o.clustersize, "hashing",
                                                    "signed feature hashing of term ids (splitmix64)"));
        json_object_set_new(cl, "clusters", json_integer(r.k));
        json_object_set_new(cl, "total_cost", json_real(r.total_cost));
        json_object_set_new(cl, "centres_kept", json_integer(r.kept));
        json_object_set_new(cl, "gave_up", json_boolean(r.gave_up));
        json_object_set_new(cl, "gain_calls", json_integer(r.stats_all.gain_calls));
        json_object_set_new(cl, "gain_policy", json_string(r.stats_all.gain_policy));
        if (jr->have_labels) json_object_set_new(cl, "quality", dm_flock_quality_json(&jr->quality));
    }
    dm_sc_result_free(&r);
    dm_free(row_cluster);
    dm_free(truth);
    dm_free(terms);
    dm_free(tw);
    return rc;
}

/* ---- report helpers -------------------------------------------------------------------------- */

/* The tuner's mode, database and the instances this rank's kernels ran (rank 0's list), and the
 * most memory a search added. Collective. */
static json_t *tuning_json(const dm_ctx *ctx)
{
    json_t *t = json_object();
    int mode = dm_tune_get_mode();
    json_object_set_new(t, "backend", json_string(dm_backend_name(ctx->backend)));
    json_object_set_new(t, "mode", json_string(dm_tune_mode_name(mode)));
    char db[4096];
    if (dm_tune_db_current_path(db, sizeof db) != DM_OK) {
        snprintf(db, sizeof db, "none (%s)", dm_error_message()); /* no path known: nothing is kept */
        dm_error_clear();
    }
    json_object_set_new(t, "database", dm_json_text(db));
    json_t *sel = json_array();
    dm_tune_selection s[256];
    int n = dm_tune_selections(s, 256);
    for (int i = 0; i < n && i < 256; i++) {
        char pol[128];
        json_array_append_new(sel, json_pack("{s:s,s:i,s:s,s:s}", "kernel", s[i].kernel->name, "workload_class",
                                             s[i].workload_class, "mode", dm_tune_mode_name(s[i].mode), "instance",
                                             dm_tune_policy_str(&s[i].instance->policy, pol, sizeof pol)));
    }
    json_object_set_new(t, "selections", sel);
    /* what a search added to the memory in use (the largest over this run's searches and ranks):
     * a first run's peaks include it, a run with the database filled does not */
    size_t own[DM_MEM_KINDS];
    dm_tune_search_memory(own);
    json_t *m = dm_report_memory_max(ctx, own);
    if (m) json_object_set_new(t, "search_memory_bytes_max", m);
    json_object_set_new(t, "note", json_string(ctx->backend == DM_BACKEND_CUDA
                                                   ? (mode == DM_TUNE_OFF ? "tuning off: every kernel ran its default instance"
                                                                          : "instances chosen on rank 0, per kernel and workload class")
                                                   : "CPU backend: no kernels to tune"));
    return t;
}

/* A stage's memory peaks (dm_mem_phase: the most bytes of each kind in use at once during the
 * stage), the largest over the ranks, into o's "peak_memory_bytes_max_over_ranks". Collective. */
static int stage_memory(json_t *o, const dm_ctx *ctx, const dm_mem_phase *ph)
{
    json_t *m = dm_report_memory_max(ctx, ph->peak);
    if (!m) return DM_ERR(DM_ERR_MPI, "MPI_Allreduce of a stage's memory peaks failed");
    json_object_set_new(o, "peak_memory_bytes_max_over_ranks", m);
    return DM_OK;
}

static int file_nonempty(const char *dir, const char *name)
{
    char p[4300];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "rb");
    if (!f) return 0;
    int c = fgetc(f);
    fclose(f);
    return c != EOF;
}

int dm_cmd_pipeline(dm_app *app, int argc, char **argv)
{
    enum { O_CORPUS = 256, O_SYNTH, O_DPR, O_SSHARE, O_STOPICS, O_SOVERLAP, O_SWORDS, O_IDF, O_SUBLINEAR, O_MINDF, O_MAXDF,
           O_METHOD, O_K, O_DIM, O_CHUNK, O_CSIZE };
    static const struct option opts[] = {
        {"corpus", required_argument, 0, O_CORPUS}, {"synthetic", required_argument, 0, O_SYNTH},
        {"docs-per-rank", required_argument, 0, O_DPR}, {"synth-share", required_argument, 0, O_SSHARE},
        {"synth-topics", required_argument, 0, O_STOPICS},
        {"synth-overlap", required_argument, 0, O_SOVERLAP}, {"synth-words", required_argument, 0, O_SWORDS},
        {"idf", required_argument, 0, O_IDF}, {"sublinear", no_argument, 0, O_SUBLINEAR},
        {"min-df", required_argument, 0, O_MINDF}, {"max-df", required_argument, 0, O_MAXDF},
        {"method", required_argument, 0, O_METHOD}, {"k", required_argument, 0, O_K},
        {"dim", required_argument, 0, O_DIM}, {"chunksize", required_argument, 0, O_CHUNK},
        {"clustersize", required_argument, 0, O_CSIZE}, {"output", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'}, DM_VECTORIZE_PP_LONGOPTS, DM_FLOCK_LONGOPTS,
        {0, 0, 0, 0}};
    const char *cmd = "pipeline";
    dm_ctx *ctx = app->ctx;
    dm_preprocess_options pp = DM_PREPROCESS_OPTIONS_INIT;
    pp.device_tokens = dm_vectorize_device_tokens();
    dm_tfidf_options to = DM_TFIDF_OPTIONS_INIT;
    dm_synth_options so = DM_SYNTH_OPTIONS_INIT;
    so.seed = ctx->opt.seed;
    so.docs = 0;
    uint64_t per_rank = 0;
    int share = 0, share_of = 0; /* --synth-share I/G (share_of 0: none) */
    const char *synth_opt = NULL; /* the last generator option given (--synth-topics, ...) */
    dm_flock_cli fl;
    dm_flock_cli_init(&fl, ctx);
    sc_params sp = {10, 20, 65536, 1000, 256};
    const char *corpus = NULL, *out = NULL;
    int synthetic = 0, method = DM_PIPE_FLOCK, flock_opts = 0, sc_opts = 0;
    optind = 1;
    opterr = 0;
    int c, li = -1;
    while ((c = getopt_long(argc, argv, "o:h", opts, &li)) != -1) {
        char nb[64];
        const char *name = dm_app_opt_name(nb, opts, li, c);
        li = -1;
        double v = 0;
        long a, b;
        int code = 0;
        if (c >= DM_VO_FORMAT && c < DM_VO_SHARED_END) code = dm_vectorize_pp_option(app, cmd, c, optarg, &pp);
        else if (c >= DM_FO_TOP && c < DM_FO_SHARED_END) {
            code = dm_flock_cli_option(app, cmd, c, optarg, name, &fl);
            if (c != DM_FO_TOP) flock_opts = 1; /* --top-terms serves both methods */
        }
        if (code) return code;
        if ((c >= DM_VO_FORMAT && c < DM_VO_SHARED_END) || (c >= DM_FO_TOP && c < DM_FO_SHARED_END)) continue;
/* NUM: a number in [lo, hi]; COUNT: a whole one (10.5 documents must not run as 10) */
#define NUM(lo, hi)                                                                                \
    do {                                                                                           \
        if (dm_app_parse_num(optarg, (lo), (hi), &v))                                              \
            return dm_app_usage_error(app, cmd, "invalid value '%s' for %s", optarg, name);        \
    } while (0)
#define COUNT(lo, hi)                                                                              \
    do {                                                                                           \
        if (dm_app_parse_num(optarg, (lo), (hi), &v) || v != floor(v))                             \
            return dm_app_usage_error(app, cmd, "invalid value '%s' for %s (a whole number, %.0f to %.0f)", optarg, \
                                      name, (double)(lo), (double)(hi));                          \
    } while (0)
        switch (c) {
        case O_CORPUS: corpus = optarg; break;
        case O_SYNTH:
            synthetic = 1;
            if (strcmp(optarg, "default") == 0) so.docs = DM_PIPELINE_DEFAULT_DOCS;
            else {
                COUNT(1, 1e12);
                so.docs = (uint64_t)v;
            }
            break;
        case O_DPR: COUNT(1, 1e12); per_rank = (uint64_t)v; break;
        case O_SSHARE: {
            char tail = 0;
            if (sscanf(optarg, "%d/%d%c", &share, &share_of, &tail) != 2 || share_of < 1 || share_of > 1000000 ||
                share < 0 || share >= share_of)
                return dm_app_usage_error(app, cmd, "--synth-share expects I/G with 0 <= I < G, not '%s'", optarg);
            break;
        }
        case O_STOPICS: COUNT(1, 100000); so.topics = (int)v; synth_opt = "--synth-topics"; break;
        case O_SOVERLAP: NUM(0, 1); so.overlap = v; synth_opt = "--synth-overlap"; break;
        case O_SWORDS:
            synth_opt = "--synth-words";
            if (parse_pair(optarg, 1, 10000000, &a, &b))
                return dm_app_usage_error(app, cmd, "--synth-words expects MIN,MAX with 1 <= MIN <= MAX, not '%s'", optarg);
            so.min_words = (int)a;
            so.max_words = (int)b;
            break;
        case O_IDF:
            if (dm_idf_parse(optarg, &to.idf) != DM_OK) return dm_app_usage_error(app, cmd, "invalid --idf '%s' (log or sklearn)", optarg);
            break;
        case O_SUBLINEAR: to.sublinear = 1; break;
        case O_MINDF:
            if (dm_vectorize_parse_df(optarg, &to.min_df_count, &to.min_df_frac, 0))
                return dm_app_usage_error(app, cmd, "invalid --min-df '%s' (a count >= 1 or a fraction in [0, 1])", optarg);
            break;
        case O_MAXDF:
            if (dm_vectorize_parse_df(optarg, &to.max_df_count, &to.max_df_frac, 1))
                return dm_app_usage_error(app, cmd, "invalid --max-df '%s' (a count or a fraction in [0, 1])", optarg);
            break;
        case O_METHOD:
            if (strcmp(optarg, "flock") == 0) method = DM_PIPE_FLOCK;
            else if (strcmp(optarg, "streamclust") == 0) method = DM_PIPE_STREAMCLUST;
            else return dm_app_usage_error(app, cmd, "--method must be flock or streamclust, not '%s'", optarg);
            break;
        case O_K:
            if (parse_pair(optarg, 1, 1000000, &a, &b))
                return dm_app_usage_error(app, cmd, "--k expects KMIN,KMAX with 1 <= KMIN <= KMAX, not '%s'", optarg);
            sp.kmin = a;
            sp.kmax = b;
            sc_opts = 1;
            break;
        case O_DIM: COUNT(1, 65536); sp.dim = (int)v; sc_opts = 1; break;
        case O_CHUNK: COUNT(1, 1e9); sp.chunksize = (long)v; sc_opts = 1; break;
        case O_CSIZE: COUNT(1, 1e9); sp.clustersize = (long)v; sc_opts = 1; break;
        case 'o': out = optarg; break;
        case 'h':
            if (ctx->rank == 0) usage(stdout);
            return DM_EXIT_OK;
        default: return dm_app_usage_error(app, cmd, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
#undef NUM
#undef COUNT
    }
    if (optind < argc) return dm_app_usage_error(app, cmd, "unexpected argument '%s'", argv[optind]);
    if (!out) return dm_app_usage_error(app, cmd, "missing -o DIR");
    if (!*out) return dm_app_usage_error(app, cmd, "-o: an empty path");
    if (!corpus == !(synthetic || per_rank))
        return dm_app_usage_error(app, cmd, "give exactly one of --corpus PATH and --synthetic N|default");
    /* the generator's options with a corpus read from disk were ignored without a word */
    if (synth_opt && corpus)
        return dm_app_usage_error(app, cmd, "%s is for a synthetic corpus (--synthetic), not --corpus", synth_opt);
    if (share_of > 0 && (!(synthetic || per_rank) || ctx->size != 1))
        return dm_app_usage_error(app, cmd, "--synth-share is for a synthetic corpus on 1 rank");
    if (per_rank) {
        synthetic = 1;
        so.docs = per_rank * (uint64_t)(share_of > 0 ? share_of : ctx->size);
    }
    if (pp.tok.min_len > pp.tok.max_len) return dm_app_usage_error(app, cmd, "--min-len is above --max-len");
    if (method == DM_PIPE_FLOCK && sc_opts)
        return dm_app_usage_error(app, cmd, "--k, --dim, --chunksize and --clustersize are streamclust options");
    if (method == DM_PIPE_STREAMCLUST && flock_opts)
        return dm_app_usage_error(app, cmd, "flock options given with --method streamclust");
    if (method == DM_PIPE_STREAMCLUST && sp.clustersize < sp.kmax)
        return dm_app_usage_error(app, cmd, "--clustersize (%ld) must hold at least KMAX (%ld) centres", sp.clustersize, sp.kmax);
    if (synthetic) {
        dm_synth probe;
        if (dm_synth_init(&probe, &so) != DM_OK) return dm_app_usage_error(app, cmd, "%s", dm_error_message());
        dm_synth_free(&probe);
    }
    int code = dm_flock_cli_finish(app, cmd, &fl, out); /* also: every output's path fits */
    if (code) return code;
    pp.backend = ctx->backend;
    to.backend = ctx->backend;

    double t0 = dm_wtime();
    dm_timer_start("pipeline.total");
    int rc = dm_vectorize_pp_agree(ctx, &pp); /* the same stop words on every rank */
    if (rc == DM_OK) rc = dm_flock_cli_mkdirs(ctx, &fl);
    if (rc == DM_OK && ctx->rank == 0)
        dm_log_info("pipeline: %s on %d rank(s), %s backend, method %s", synthetic ? "synthetic corpus" : corpus,
                    ctx->size, dm_backend_name(ctx->backend),
                    method == DM_PIPE_FLOCK ? "flock" : "streamclust");

    /* stage 1: preprocess */
    dm_token_stream stream;
    memset(&stream, 0, sizeof stream);
    dm_pp_stats ps;
    memset(&ps, 0, sizeof ps);
    dm_mem_phase mem_pp, mem_tf, mem_cl; /* each stage's memory peaks, for the report */
    memset(&mem_pp, 0, sizeof mem_pp);
    memset(&mem_tf, 0, sizeof mem_tf);
    memset(&mem_cl, 0, sizeof mem_cl);
    if (rc == DM_OK) {
        dm_mem_phase_begin(&mem_pp);
        dm_timer_start("pipeline.preprocess");
        if (synthetic) rc = preprocess_synthetic(&stream, ctx, &so, &pp, share, share_of);
        else {
            dm_pp_times times;
            memset(&times, 0, sizeof times);
            rc = dm_preprocess(&stream, &times, ctx, corpus, &pp);
            if (rc == DM_OK) dm_pp_times_to_timers(&times, "preprocess", 1);
        }
        dm_timer_stop("pipeline.preprocess");
        dm_wl_cache_clear(); /* the stage's tuning inputs' host data (common/tune/wl_cache.h) */
        dm_mem_phase_end(&mem_pp);
        if (rc == DM_OK) ps = stream.stats;
        if (rc == DM_OK)
            dm_log_info("preprocess: %" PRIu64 " documents, %" PRIu64 " tokens, %.1f MB of text in %.2f s", ps.docs,
                        ps.tokens, (double)ps.bytes_read / 1e6, dm_timer_get("pipeline.preprocess"));
        if (rc == DM_OK) dm_vectorize_print_skips(ctx, cmd, &ps);
    }

    /* stage 2: TF-IDF */
    dm_vectors vec;
    dm_vocab vocab;
    dm_tfidf_stats ts;
    memset(&vec, 0, sizeof vec);
    memset(&vocab, 0, sizeof vocab);
    memset(&ts, 0, sizeof ts);
    if (rc == DM_OK) {
        dm_mem_phase_begin(&mem_tf);
        dm_timer_start("pipeline.tfidf");
        if (ps.hash_collisions > 0 && !synthetic) {
            /* two stems share a 64-bit hash somewhere: read again resolving terms by bytes */
            dm_log_warn("%s: %" PRIu64 " stems share a 64-bit hash with another stem; reading again with terms "
                        "resolved by their bytes", corpus, ps.hash_collisions);
            dm_token_stream_free(&stream);
            to.by_bytes = 1;
            rc = dm_vectorize_corpus(&vec, &vocab, &ts, &ps, ctx, corpus, &pp, &to, NULL, NULL);
        } else {
            /* dm_tfidf_from_stream in two steps, so that the stream (8 bytes a token) is freed
             * before the vectors are made: their host arrays then take pages the process has
             * just given back instead of fresh ones */
            dm_tfidf_local local;
            rc = dm_ctx_agree(ctx, dm_tfidf_local_from_stream(&local, &stream, dm_tfidf_backend(ctx, to.backend), &to));
            dm_token_stream_free(&stream);
            if (rc == DM_OK) {
                rc = dm_tfidf_vectors(&vec, &vocab, &ts, ctx, &local, &to);
                dm_tfidf_local_free(&local);
            }
        }
        dm_token_stream_free(&stream);
        dm_wl_cache_clear();
        dm_timer_stop("pipeline.tfidf");
        dm_mem_phase_end(&mem_tf);
        if (rc == DM_OK)
            dm_log_info("tfidf: %" PRIu64 " terms, %" PRIu64 " non-zeros (%.1f per document) in %.2f s", ts.terms, ts.nnz,
                        ts.docs ? (double)ts.nnz / (double)ts.docs : 0.0, dm_timer_get("pipeline.tfidf"));
    }

    /* stage 3: clusters and outputs */
    dm_report rep;
    DM_ASSERT(dm_report_init(&rep, cmd, app->argc_all, app->argv_all) == DM_OK);
    json_t *res = rep.results;
    json_t *cl = json_object();
    dm_flock_job_result jr;
    memset(&jr, 0, sizeof jr);
    dm_flock_vocab names;
    memset(&names, 0, sizeof names);
    if (rc == DM_OK && ctx->rank == 0)
        rc = dm_flock_vocab_from_terms(&names, vocab.terms.bytes, vocab.terms.off, vocab.terms.n);
    rc = dm_ctx_agree(ctx, rc);
    fl.jo.vocab = &names;
    if (rc == DM_OK) {
        dm_mem_phase_begin(&mem_cl);
        dm_timer_start("pipeline.cluster");
        if (method == DM_PIPE_FLOCK) {
            rc = dm_flock_job_run(&jr, cl, ctx, &vec, &fl.fo, &fl.co, &fl.jo);
        } else {
            rc = run_streamclust(&jr, cl, ctx, &vec, &sp, out, &names, fl.jo.top_k);
        }
        dm_timer_stop("pipeline.cluster");
        dm_mem_phase_end(&mem_cl);
    }
    dm_timer_stop("pipeline.total");
    double wall = dm_wtime() - t0;

    /* report */
    if (rc == DM_OK) {
        json_object_set_new(res, "method", json_string(method == DM_PIPE_FLOCK ? "flock" : "streamclust"));
        json_t *in = json_object();
        if (synthetic) {
            json_object_set_new(in, "kind", json_string("synthetic"));
            json_object_set_new(in, "documents", json_integer((json_int_t)so.docs));
            json_object_set_new(in, "documents_per_rank", json_real((double)so.docs / (share_of > 0 ? share_of : ctx->size)));
            if (share_of > 0) {
                char sh[32];
                snprintf(sh, sizeof sh, "%d/%d", share, share_of);
                json_object_set_new(in, "share", json_string(sh)); /* this run generated that share only */
            }
            json_object_set_new(in, "topics", json_integer(so.topics));
            json_object_set_new(in, "overlap", json_real(so.overlap));
            json_object_set_new(in, "min_words", json_integer(so.min_words));
            json_object_set_new(in, "max_words", json_integer(so.max_words));
            json_object_set_new(in, "seed", dm_json_u64(so.seed));
        } else {
            json_object_set_new(in, "kind", json_string("corpus"));
            json_object_set_new(in, "path", dm_json_text(corpus));
        }
        json_object_set_new(res, "input", in);
        json_object_set_new(res, "ranks", json_integer(ctx->size));
        json_object_set_new(res, "documents", json_integer((json_int_t)ts.docs));
        json_t *pj = json_object();
        json_object_set_new(pj, "seconds", json_real(dm_timer_get("pipeline.preprocess")));
        dm_vectorize_report_skips(pj, &ps);
        rc = stage_memory(pj, ctx, &mem_pp);
        json_object_set_new(res, "preprocess", pj);
        json_t *tj = json_object();
        dm_vectorize_report_stats(tj, &ts, &ps);
        json_object_set_new(tj, "weighting", json_string(to.idf == DM_IDF_SKLEARN ? "tf-idf (sklearn idf)" : "tf-idf"));
        json_object_set_new(tj, "seconds", json_real(dm_timer_get("pipeline.tfidf")));
        if (rc == DM_OK) rc = stage_memory(tj, ctx, &mem_tf);
        json_object_set_new(res, "tfidf", tj);
        json_object_set_new(cl, "seconds", json_real(dm_timer_get("pipeline.cluster")));
        if (rc == DM_OK) rc = stage_memory(cl, ctx, &mem_cl);
        json_t *q = json_object_get(cl, "quality");
        if (q) json_object_set(res, "quality", q);
        json_object_set_new(res, "cluster", cl);
        cl = NULL;
        json_t *th = json_object();
        json_object_set_new(th, "seconds", json_real(wall));
        json_object_set_new(th, "documents_per_second", json_real(wall > 0 ? (double)ts.docs / wall : 0));
        json_object_set_new(th, "text_bytes_per_second", json_real(wall > 0 ? (double)ps.bytes_read / wall : 0));
        json_object_set_new(th, "documents_per_second_per_rank",
                            json_real(wall > 0 ? (double)ts.docs / wall / ctx->size : 0));
        json_object_set_new(res, "throughput", th);
        json_object_set_new(res, "tuning", tuning_json(ctx));
        /* the files this run wrote (method and labels), not whatever an earlier run left in OUTDIR */
        json_t *files = json_array();
        static const char *const names_out[] = {"assignments.tsv", "clusters.tsv", "positions.csv", "flock.png",
                                                "flock-labels.png"};
        const size_t n_out = method != DM_PIPE_FLOCK ? 2 : jr.have_labels ? 5 : 4;
        for (size_t k = 0; k < n_out; k++)
            if (ctx->rank == 0 && file_nonempty(out, names_out[k])) json_array_append_new(files, json_string(names_out[k]));
        json_array_append_new(files, json_string("report.json"));
        json_object_set_new(res, "outputs", files);
        if (rc == DM_OK) rc = dm_app_report_write(app, &rep, out);
    }
    json_decref(cl);
    dm_report_free(&rep);
    if (rc == DM_OK && ctx->rank == 0) {
        printf("pipeline: %" PRIu64 " documents, %d clusters, %.2f s (%.0f documents/s) on %d rank(s), %s backend\n",
               ts.docs, jr.clusters, wall, wall > 0 ? (double)ts.docs / wall : 0.0, ctx->size,
               dm_backend_name(ctx->backend));
        if (jr.have_labels)
            printf("quality against the labels: NMI %.4f  ARI %.4f  purity %.4f\n", jr.quality.nmi, jr.quality.ari,
                   jr.quality.purity);
        else
            printf("no labels: no quality metrics\n");
        if (method == DM_PIPE_FLOCK)
            printf("outputs: %s/assignments.tsv %s/clusters.tsv %s/positions.csv %s/report.json\n", out, out, out, out);
        else
            printf("outputs: %s/assignments.tsv %s/clusters.tsv %s/report.json\n", out, out, out);
        if (method == DM_PIPE_FLOCK)
            printf("picture: %s/flock.png (by cluster)%s%s%s\n", out, jr.have_labels ? ", " : "",
                   jr.have_labels ? out : "", jr.have_labels ? "/flock-labels.png (by label)" : "");
    }
    dm_flock_vocab_free(&names);
    dm_vectors_free(&vec);
    dm_vocab_free(&vocab);
    dm_flock_cli_free(&fl);
    return rc == DM_OK ? DM_EXIT_OK : dm_app_fail(app, cmd, rc);
}
