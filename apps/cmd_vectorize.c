/* `docmine vectorize`: corpus -> TF-IDF (or TF-ICF with --icf) sparse vectors in a .dmv file,
 * written collectively by all ranks, with optional SVMlight / MatrixMarket export and vocabulary.
 * Reference: tfidf/tfidf.h (dm_vectorize_corpus, dm_vectors_write). */
#include "apps/cmd_vectorize.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "apps/commands.h"
#include "common/log.h"
#include "common/report.h"
#include "common/status.h"
#include "common/timer.h"
#include "tfidf/tfidf.h"
#include "tfidf/tfidf_internal.h"

const char dm_vectorize_pp_help[] =
    "reading and preprocessing (the same for every command that reads a corpus):\n"
    "  --format auto|text|jsonl|tsv|reuters   input format (default auto: by extension)\n"
    "  --labels format|dir|none  where labels come from (dir: first-level folder name)\n"
    "  --stopwords FILE          stop-word list (default: built-in English list); --no-stopwords or\n"
    "                            --stopwords none: none (a file named none: ./none).\n"
    "                            One word a line, '#' comments; a line of several words is an error\n"
    "                            (no phrases); a word split by the tokeniser (don't) drops each part\n"
    "  --no-stem                 do not Porter-stem\n"
    "  --keep-numbers            keep tokens made only of digits\n"
    "  --min-len N, --max-len N  token length limits in bytes (default 2, 64)\n"
    "  --batch-bytes N           normalised bytes per batch (default: an eighth of the rank's\n"
    "                            input, 1..32 MiB; 64 MiB when terms are read by their bytes)\n"
    "  --strict                  the first bad input is an error instead of a counted skip\n";

static int parse_uint(const char *s, unsigned long long lo, unsigned long long hi, unsigned long long *v)
{
    char *end;
    errno = 0;
    if (!s || !*s || *s == '-') return -1;
    *v = strtoull(s, &end, 10);
    return (errno || *end || *v < lo || *v > hi) ? -1 : 0;
}

int dm_vectorize_device_tokens(void)
{
    const char *e = getenv("DOCMINE_DEVICE_TOKENS");
    return !(e && strcmp(e, "0") == 0);
}

int dm_vectorize_pp_option(dm_app *app, const char *cmd, int c, const char *arg, dm_preprocess_options *pp)
{
    unsigned long long v;
    switch (c) {
    case DM_VO_FORMAT:
        if (dm_pp_format_parse(arg, &pp->reader.format) != DM_OK)
            return dm_app_usage_error(app, cmd, "invalid --format '%s'", arg);
        return 0;
    case DM_VO_LABELS:
        if (strcmp(arg, "format") == 0) pp->reader.labels = DM_PP_LABELS_FORMAT;
        else if (strcmp(arg, "dir") == 0) pp->reader.labels = DM_PP_LABELS_DIR;
        else if (strcmp(arg, "none") == 0) pp->reader.labels = DM_PP_LABELS_NONE;
        else return dm_app_usage_error(app, cmd, "invalid --labels '%s' (expected format, dir or none)", arg);
        return 0;
    case DM_VO_STOPWORDS: pp->stopwords = strcmp(arg, "none") == 0 ? "" : arg; return 0;
    case DM_VO_NO_STEM: pp->tok.stem = 0; return 0;
    case DM_VO_NO_STOPWORDS: pp->stopwords = ""; return 0;
    case DM_VO_STRICT: pp->reader.strict = 1; return 0;
    case DM_VO_KEEP_NUMBERS: pp->tok.keep_numbers = 1; return 0;
    case DM_VO_MIN_LEN:
    case DM_VO_MAX_LEN:
        if (parse_uint(arg, 1, DM_TOKEN_MAX_LEN, &v))
            return dm_app_usage_error(app, cmd, "invalid token length '%s' (1..%d)", arg, DM_TOKEN_MAX_LEN);
        if (c == DM_VO_MIN_LEN) pp->tok.min_len = (int)v;
        else pp->tok.max_len = (int)v;
        return 0;
    case DM_VO_BATCH:
        if (parse_uint(arg, 1024, 1ull << 40, &v))
            return dm_app_usage_error(app, cmd, "invalid --batch-bytes '%s' (at least 1024)", arg);
        pp->batch_bytes = (size_t)v;
        return 0;
    default: return dm_app_usage_error(app, cmd, "internal: unknown shared option %d", c);
    }
}

int dm_vectorize_pp_agree(const dm_ctx *ctx, const dm_preprocess_options *pp)
{
    dm_pp_signature sig;
    memset(&sig, 0, sizeof sig);
    int rc = dm_ctx_agree(ctx, dm_pp_signature_of(&sig, pp)); /* loads the list: names a missing file */
    if (rc != DM_OK) return rc;
    uint64_t r0;
    rc = dm_comm_rank0(ctx->world, &sig.stop_fingerprint, &r0, 1);
    if (rc == DM_OK && r0 != sig.stop_fingerprint)
        rc = DM_ERR(DM_ERR_FORMAT, "stop words %s: another list on rank %d than on rank 0 (fingerprint %016" PRIx64
                    " on rank %d, %016" PRIx64 " on rank 0): not the same file on every rank",
                    pp->stopwords ? pp->stopwords : "(built-in)", ctx->rank, sig.stop_fingerprint, ctx->rank, r0);
    return dm_ctx_agree(ctx, rc);
}

/* The ICF table every rank read against rank 0's: its reference documents, signature and a hash of
 * its terms' hashes and cf values. Collective. */
static int icf_agree(const dm_ctx *ctx, const dm_icf_table *t, const char *path)
{
    const dm_termlist *l = &t->vocab.terms;
    uint64_t h = 0xcbf29ce484222325ull;
    uint64_t parts[6] = {t->vocab.n_docs, l->n, t->sig.flags, t->sig.min_len | (uint64_t)t->sig.max_len << 32,
                         t->sig.stop_fingerprint, 0};
    for (size_t i = 0; i < l->n; i++) {
        h = (h ^ l->hash[i]) * 0x100000001b3ull;
        h = (h ^ (l->val ? l->val[i] : 0)) * 0x100000001b3ull;
    }
    parts[5] = h;
    uint64_t r0[6];
    int rc = dm_comm_rank0(ctx->world, parts, r0, 6);
    if (rc == DM_OK && memcmp(r0, parts, sizeof parts) != 0)
        rc = DM_ERR(DM_ERR_FORMAT, "%s: another ICF table on rank %d than on rank 0 (%" PRIu64 " terms of %" PRIu64
                    " reference documents on rank %d, %" PRIu64 " of %" PRIu64 " on rank 0%s): not the same file on "
                    "every rank", path, ctx->rank, parts[1], parts[0], ctx->rank, r0[1], r0[0],
                    parts[0] == r0[0] && parts[1] == r0[1] ? ", other terms or counts" : "");
    return dm_ctx_agree(ctx, rc);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: docmine vectorize --corpus PATH -o VECTORS.dmv [options]\n"
               "       docmine vectorize --tokens STREAM -o VECTORS.dmv [options]\n\n"
               "Turns a corpus into sparse term-sorted document vectors (one row per document, in\n"
               "corpus order, the same file whatever the number of ranks). TF-IDF by default: terms\n"
               "are counted per document, document frequencies are summed across ranks and term ids\n"
               "follow the byte order of the terms. With --icf TABLE (from docmine icf-build) the\n"
               "weights are TF-ICF and the corpus is weighed batch by batch, without a global pass.\n\n"
               "  --corpus PATH         file or directory tree to read\n"
               "  --tokens STREAM       a token stream of docmine preprocess -o STREAM instead (written by as\n"
               "                        many ranks as this run: STREAM, or STREAM.rank<r> for several; the\n"
               "                        files' headers must name one run)\n"
               "  -o, --output FILE     the vectors (.dmv binary CSR with checksum)\n"
               "  --idf log|sklearn     log: ln(N/df) (default); sklearn: ln((1+N)/(1+df)) + 1\n"
               "  --sublinear           tf = 1 + ln(count) instead of count / document length\n"
               "  --no-l2               do not L2-normalise rows\n"
               "  --min-df X            keep terms in at least X documents (a count >= 1)\n"
               "  --max-df X            keep terms in at most X documents (a count); for both, X written\n"
               "                        with a '.' or an exponent is a fraction of N in [0, 1]\n"
               "  --icf TABLE           TF-ICF with the table of docmine icf-build\n"
               "  --vocab FILE          write the vocabulary as TSV: id, term, df (cf with --icf)\n"
               "  --export svmlight|mtx also write OUTPUT with .svm / .mtx for scikit-learn / SciPy\n"
               "  --tf-table atomic|noatomic   GPU per-document table variant (default atomic)\n\n"
               "%s\n"
               "examples:\n"
               "  docmine vectorize --corpus reuters21578 --format reuters -o reuters.dmv --vocab vocab.tsv\n"
               "  mpiexec -n 4 docmine vectorize --corpus news/ -o news.dmv --min-df 2 --max-df 0.5\n"
               "  docmine icf-build --corpus ref/ -o ref.icf && docmine vectorize --corpus new/ --icf ref.icf -o new.dmv\n",
               dm_vectorize_pp_help);
}

int dm_vectorize_parse_df(const char *s, uint64_t *count, double *frac, int is_max)
{
    if (strpbrk(s, ".eE")) {
        char *end;
        double v = strtod(s, &end);
        if (*end || !(v >= 0.0 && v <= 1.0)) return -1;
        *frac = v;
        *count = is_max ? UINT64_MAX : 1; /* the last --min-df / --max-df given decides alone */
        return 0;
    }
    unsigned long long v;
    if (parse_uint(s, is_max ? 0 : 1, UINT64_MAX, &v)) return -1;
    *count = v;
    *frac = is_max ? 1.0 : 0.0;
    return 0;
}

/* OUT.dmv -> OUT.<ext> (ext mtx or svm, by the export format); other names get .<ext> appended.
 * Returns buf (len bytes, which hold OUT and 4 bytes more). */
static const char *export_name(char *buf, size_t len, const char *out, int fmt)
{
    const char *ext = fmt == DM_EXPORT_MTX ? "mtx" : "svm";
    size_t n = strlen(out);
    if (n > 4 && strcmp(out + n - 4, ".dmv") == 0) snprintf(buf, len, "%.*s.%s", (int)(n - 4), out, ext);
    else snprintf(buf, len, "%s.%s", out, ext);
    return buf;
}

void dm_vectorize_report_stats(json_t *o, const dm_tfidf_stats *st, const dm_pp_stats *ps)
{
    json_object_set_new(o, "docs", json_integer((json_int_t)st->docs));
    json_object_set_new(o, "empty_docs", json_integer((json_int_t)st->empty_docs));
    json_object_set_new(o, "tokens", json_integer((json_int_t)st->tokens));
    json_object_set_new(o, "terms", json_integer((json_int_t)st->terms));
    json_object_set_new(o, "terms_seen", json_integer((json_int_t)st->terms_seen));
    json_object_set_new(o, "pruned_min_df", json_integer((json_int_t)st->pruned_min_df));
    json_object_set_new(o, "pruned_max_df", json_integer((json_int_t)st->pruned_max_df));
    json_object_set_new(o, "nnz", json_integer((json_int_t)st->nnz));
    json_object_set_new(o, "zero_weight_entries", json_integer((json_int_t)st->zero_weight));
    json_object_set_new(o, "icf_unknown_tokens", json_integer((json_int_t)st->icf_unknown_tokens));
    json_object_set_new(o, "hash_collisions", json_integer((json_int_t)st->hash_collisions));
    json_object_set_new(o, "table_rebuilds", json_integer((json_int_t)st->table_rebuilds));
    if (ps) {
        json_object_set_new(o, "bytes_read", json_integer((json_int_t)ps->bytes_read));
        json_object_set_new(o, "files_read", json_integer((json_int_t)ps->files_read));
        json_object_set_new(o, "docs_skipped", json_integer((json_int_t)dm_pp_stats_skipped_total(ps)));
        json_object_set_new(o, "tokens_stop", json_integer((json_int_t)ps->tokens_stop));
        json_object_set_new(o, "invalid_utf8", json_integer((json_int_t)ps->invalid_utf8));
    }
}

void dm_vectorize_print_skips(const dm_ctx *ctx, const char *cmd, const dm_pp_stats *ps)
{
    uint64_t total = dm_pp_stats_skipped_total(ps);
    if (ctx->rank == 0 && ps->files_ignored)
        fprintf(stderr, "docmine %s: %llu file%s not of the corpus format ignored\n", cmd,
                (unsigned long long)ps->files_ignored, ps->files_ignored == 1 ? "" : "s");
    if (ctx->rank != 0 || total == 0) return;
    char why[512];
    dm_pp_stats_skips_str(why, sizeof why, ps);
    fprintf(stderr, "docmine %s: %llu skipped: %s\n", cmd, (unsigned long long)total, why);
    for (uint64_t i = 0; i < ps->n_messages && i < DM_PP_MAX_MESSAGES; i++)
        fprintf(stderr, "docmine %s: %s\n", cmd, ps->messages[i]);
    if (ps->n_messages > DM_PP_MAX_MESSAGES)
        fprintf(stderr, "docmine %s: ... %llu more skip messages\n", cmd,
                (unsigned long long)(ps->n_messages - DM_PP_MAX_MESSAGES));
}

void dm_vectorize_report_skips(json_t *o, const dm_pp_stats *ps)
{
    json_t *sk = json_object();
    for (int i = 0; i < DM_PP_SKIP_COUNT; i++)
        json_object_set_new(sk, dm_pp_skip_name(i), json_integer((json_int_t)ps->skipped[i]));
    json_object_set_new(o, "skipped", sk);
    json_t *msgs = json_array();
    for (uint64_t i = 0; i < ps->n_messages && i < DM_PP_MAX_MESSAGES; i++)
        json_array_append_new(msgs, dm_json_text(ps->messages[i]));
    json_object_set_new(o, "messages", msgs);
    json_object_set_new(o, "messages_total", json_integer((json_int_t)ps->n_messages));
    json_object_set_new(o, "files_ignored", json_integer((json_int_t)ps->files_ignored));
}

static int file_exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0; /* not fopen: a FIFO would block it */
}

/* The ranks of the run that wrote a token stream file, from its header (0: not a readable token
 * stream of a version that records them). Sets no error: the caller's read error stands. */
static uint32_t peek_ranks(const char *p)
{
    struct stat sb;
    unsigned char h[24];
    if (stat(p, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0; /* not fopen on a FIFO: it would block */
    FILE *f = fopen(p, "rb");
    if (!f) return 0;
    size_t n = fread(h, 1, sizeof h, f);
    fclose(f);
    if (n < sizeof h || memcmp(h, DM_TOKEN_STREAM_MAGIC, 8) != 0 || (h[8] | h[9] << 8) < 2) return 0;
    return (uint32_t)h[20] | (uint32_t)h[21] << 8 | (uint32_t)h[22] << 16 | (uint32_t)h[23] << 24;
}

/* The files of a token stream must be one run's, of as many ranks as this one; their headers
 * name the writer's rank, its run's ranks and the run's id. Rank 0's file decides how many ranks
 * wrote the set (when rank 0 has no file, the header of the set of another rank count: STREAM.rank0
 * for one rank, STREAM for several); when that is this run's, every file must say so and its own
 * rank, and carry rank 0's run id: a file left by an earlier run, with more ranks or with as many,
 * is refused naming it, never mixed in. read_rc: this rank's read. Collective: every rank returns
 * the same status. */
static int check_stream_set(const dm_ctx *ctx, const char *stream, const char *path, const dm_token_stream *s,
                            int read_rc)
{
    char rank0[4200], named[4200];
    snprintf(rank0, sizeof rank0, "%s%s", stream, ctx->size == 1 ? "" : ".rank0");
    snprintf(named, sizeof named, "%s", path);
    uint64_t head[2] = {0, 0}; /* rank 0's file: its run's ranks (0: unknown) and run id */
    if (ctx->rank == 0 && read_rc == DM_OK) {
        head[0] = s->n_ranks;
        head[1] = s->run_id;
    } else if (ctx->rank == 0 && !file_exists(path)) {
        if (ctx->size == 1) snprintf(named, sizeof named, "%s.rank0", stream);
        else snprintf(named, sizeof named, "%s", stream);
        head[0] = peek_ranks(named);
    }
    MPI_Bcast(head, 2, MPI_UINT64_T, 0, ctx->world);
    uint32_t n0 = (uint32_t)head[0];
    int other_run = n0 != 0 && n0 != (uint32_t)ctx->size;
    int rc = other_run ? DM_OK : read_rc; /* a missing STREAM.rank<r> is then rank 0's error, explained */
    if (other_run && ctx->rank == 0 && read_rc == DM_OK && ctx->size == 1)
        rc = DM_ERR(DM_ERR_INVALID_ARG, "%s is rank %u's file of a token stream written by %u ranks: run vectorize "
                    "with %u ranks, naming the stream without its .rank%u", path, s->rank, n0, n0, s->rank);
    else if (other_run && ctx->rank == 0 && ctx->size == 1)
        rc = DM_ERR(DM_ERR_INVALID_ARG, "%s was written by several ranks (%s): run vectorize with %u ranks", stream,
                    named, n0);
    else if (other_run && ctx->rank == 0)
        rc = DM_ERR(DM_ERR_INVALID_ARG, "%s was written by %u rank%s (%s): run vectorize with %u rank%s", stream, n0,
                    n0 == 1 ? "" : "s", named, n0, n0 == 1 ? "" : "s");
    else if (rc == DM_OK && n0 == (uint32_t)ctx->size && (s->n_ranks != n0 || s->rank != (uint32_t)ctx->rank))
        rc = DM_ERR(DM_ERR_FORMAT, "%s: written by rank %u of a %u-rank run, not by rank %d of the %u-rank run that "
                    "wrote %s: the files are of different runs (a leftover?); run docmine preprocess again",
                    path, s->rank, s->n_ranks, ctx->rank, n0, rank0);
    else if (rc == DM_OK && n0 == (uint32_t)ctx->size && s->run_id != head[1])
        rc = DM_ERR(DM_ERR_FORMAT, "%s: written by another docmine preprocess run (run id %016" PRIx64 ") than %s "
                    "(run id %016" PRIx64 "): the files are of different runs (a leftover?); run docmine preprocess again",
                    path, s->run_id, rank0, head[1]);
    return dm_ctx_agree(ctx, rc);
}

/* TF-IDF of a token stream written by `docmine preprocess -o STREAM` with as many ranks. */
static int vectorize_tokens(dm_vectors *v, dm_vocab *vocab, dm_tfidf_stats *st, dm_pp_stats *ps, dm_ctx *ctx,
                            const char *stream, const dm_tfidf_options *o)
{
    char path[4200];
    int rc = DM_OK;
    if (ctx->size == 1) snprintf(path, sizeof path, "%s", stream);
    else snprintf(path, sizeof path, "%s.rank%d", stream, ctx->rank);
    dm_token_stream s;
    memset(&s, 0, sizeof s);
    rc = check_stream_set(ctx, stream, path, &s, dm_token_stream_read(&s, path));
    if (rc < 0) {
        dm_token_stream_free(&s);
        return rc;
    }
    dm_tfidf_local local;
    memset(&local, 0, sizeof local);
    rc = dm_ctx_agree(ctx, dm_tfidf_local_from_stream(&local, &s, dm_tfidf_backend(ctx, o->backend), o));
    /* docs, tokens and collisions: the file carries no skips (docmine preprocess reported them) */
    *ps = s.stats;
    dm_token_stream_free(&s);
    if (rc == DM_OK) rc = dm_tfidf_vectors(v, vocab, st, ctx, &local, o);
    dm_tfidf_local_free(&local);
    return rc;
}

int dm_cmd_vectorize(dm_app *app, int argc, char **argv)
{
    enum { O_CORPUS = DM_VO_SHARED_END + 1, O_IDF, O_SUBLINEAR, O_NOL2, O_MINDF, O_MAXDF, O_ICF, O_VOCAB, O_EXPORT,
           O_TFTABLE, O_TOKENS };
    static const struct option opts[] = {
        {"corpus", required_argument, 0, O_CORPUS}, {"output", required_argument, 0, 'o'},
        {"idf", required_argument, 0, O_IDF},       {"sublinear", no_argument, 0, O_SUBLINEAR},
        {"no-l2", no_argument, 0, O_NOL2},          {"min-df", required_argument, 0, O_MINDF},
        {"max-df", required_argument, 0, O_MAXDF},  {"icf", required_argument, 0, O_ICF},
        {"vocab", required_argument, 0, O_VOCAB},   {"export", required_argument, 0, O_EXPORT},
        {"tf-table", required_argument, 0, O_TFTABLE}, {"tokens", required_argument, 0, O_TOKENS},
        {"help", no_argument, 0, 'h'},
        DM_VECTORIZE_PP_LONGOPTS,                   {0, 0, 0, 0}};
    const char *cmd = "vectorize";
    dm_ctx *ctx = app->ctx;
    dm_preprocess_options pp = DM_PREPROCESS_OPTIONS_INIT;
    pp.device_tokens = dm_vectorize_device_tokens();
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
    const char *corpus = NULL, *out = NULL, *icf_path = NULL, *vocab_path = NULL, *tokens = NULL;
    int export_fmt = -1;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        if (c >= DM_VO_FORMAT && c < DM_VO_SHARED_END) {
            int rc = dm_vectorize_pp_option(app, cmd, c, optarg, &pp);
            if (rc) return rc;
            continue;
        }
        switch (c) {
        case O_CORPUS: corpus = optarg; break;
        case O_TOKENS: tokens = optarg; break;
        case 'o': out = optarg; break;
        case O_IDF:
            if (dm_idf_parse(optarg, &o.idf) != DM_OK) return dm_app_usage_error(app, cmd, "invalid --idf '%s' (log or sklearn)", optarg);
            break;
        case O_SUBLINEAR: o.sublinear = 1; break;
        case O_NOL2: o.l2 = 0; break;
        case O_MINDF:
            if (dm_vectorize_parse_df(optarg, &o.min_df_count, &o.min_df_frac, 0))
                return dm_app_usage_error(app, cmd, "invalid --min-df '%s' (a count >= 1 or a fraction in [0, 1])", optarg);
            break;
        case O_MAXDF:
            if (dm_vectorize_parse_df(optarg, &o.max_df_count, &o.max_df_frac, 1))
                return dm_app_usage_error(app, cmd, "invalid --max-df '%s' (a count or a fraction in [0, 1])", optarg);
            break;
        case O_ICF: icf_path = optarg; break;
        case O_VOCAB: vocab_path = optarg; break;
        case O_EXPORT:
            if (dm_export_format_parse(optarg, &export_fmt) != DM_OK)
                return dm_app_usage_error(app, cmd, "invalid --export '%s' (svmlight or mtx)", optarg);
            break;
        case O_TFTABLE:
            if (dm_tf_variant_parse(optarg, &o.tf_variant) != DM_OK)
                return dm_app_usage_error(app, cmd, "invalid --tf-table '%s' (atomic or noatomic)", optarg);
            break;
        case 'h':
            if (ctx->rank == 0) usage(stdout);
            return DM_EXIT_OK;
        default: return dm_app_usage_error(app, cmd, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return dm_app_usage_error(app, cmd, "unexpected argument '%s'", argv[optind]);
    if (!corpus && !tokens) return dm_app_usage_error(app, cmd, "missing --corpus PATH (or --tokens STREAM)");
    if (corpus && tokens) return dm_app_usage_error(app, cmd, "--corpus and --tokens exclude each other");
    if (tokens && icf_path)
        return dm_app_usage_error(app, cmd, "--icf needs --corpus: the table is checked against the preprocessing options");
    if (!out) return dm_app_usage_error(app, cmd, "missing -o FILE");
    if (!*out) return dm_app_usage_error(app, cmd, "-o: an empty path");
    if (pp.tok.min_len > pp.tok.max_len) return dm_app_usage_error(app, cmd, "--min-len is above --max-len");
    if (icf_path && (o.idf != DM_IDF_LOG || o.min_df_count != 1 || o.min_df_frac != 0.0 ||
                     o.max_df_count != UINT64_MAX || o.max_df_frac != 1.0))
        return dm_app_usage_error(app, cmd, "--icf takes its weights from the table: --idf, --min-df and --max-df do not apply");

    /* the paths fit, said before the work (the files are written after it) */
    char xpath[4200] = "";
    {
        char p[4200];
        int prc = dm_app_path(p, sizeof p, "%s", out);
        if (prc == DM_OK && export_fmt >= 0)
            prc = dm_app_path(xpath, sizeof xpath, "%s", export_name(p, sizeof p, out, export_fmt));
        if (prc == DM_OK && vocab_path) prc = dm_app_path(p, sizeof p, "%s", vocab_path);
        /* the name vectorize_tokens reads: STREAM alone on one rank */
        if (prc == DM_OK && tokens && ctx->size == 1) prc = dm_app_path(p, sizeof p, "%s", tokens);
        else if (prc == DM_OK && tokens) prc = dm_app_path(p, sizeof p, "%s.rank%d", tokens, ctx->size - 1);
        prc = dm_ctx_agree(ctx, prc);
        if (prc != DM_OK) return dm_app_fail(app, cmd, prc);
    }
    double t0 = dm_wtime();
    dm_icf_table table;
    memset(&table, 0, sizeof table);
    int rc = DM_OK;
    if (icf_path) rc = dm_ctx_agree(ctx, dm_icf_table_read(&table, icf_path));
    if (icf_path && rc == DM_OK) rc = icf_agree(ctx, &table, icf_path);
    if (corpus && rc == DM_OK) rc = dm_vectorize_pp_agree(ctx, &pp);
    dm_vectors v;
    dm_vocab vocab;
    dm_tfidf_stats st;
    dm_pp_stats ps;
    memset(&v, 0, sizeof v);
    memset(&vocab, 0, sizeof vocab);
    memset(&st, 0, sizeof st);
    memset(&ps, 0, sizeof ps);
    dm_timer_start("vectorize");
    if (rc == DM_OK && tokens) rc = vectorize_tokens(&v, vocab_path ? &vocab : NULL, &st, &ps, ctx, tokens, &o);
    else if (rc == DM_OK)
        rc = dm_vectorize_corpus(&v, vocab_path ? &vocab : NULL, &st, &ps, ctx, corpus, &pp, &o,
                                 icf_path ? &table : NULL, icf_path);
    dm_timer_stop("vectorize");
    dm_timer_start("vectorize.write");
    if (rc == DM_OK) rc = dm_vectors_write(&v, out, ctx);
    dm_timer_stop("vectorize.write");
    dm_vectors_free(&v);
    if (rc == DM_OK && vocab_path) {
        if (ctx->rank == 0) rc = dm_vocab_write_tsv(&vocab, vocab_path, icf_path ? "cf" : "df");
        rc = dm_ctx_agree(ctx, rc);
    }
    dm_vocab_free(&vocab);
    dm_icf_table_free(&table);
    if (rc == DM_OK && export_fmt >= 0) {
        /* rank 0 reads the file back (checking it) and exports it to xpath */
        if (ctx->rank == 0) {
            dm_vectors all;
            rc = dm_vectors_read(&all, out);
            if (rc == DM_OK) rc = dm_vectors_export(&all, xpath, export_fmt);
            dm_vectors_free(&all);
        }
        rc = dm_ctx_agree(ctx, rc);
    }
    double wall = dm_wtime() - t0;
    if (rc != DM_OK) return dm_app_fail(app, cmd, rc);
    dm_log_info("%" PRIu64 " documents (%" PRIu64 " empty), %" PRIu64 " terms, %" PRIu64 " non-zeros -> %s%s%s "
                "(%.2f s, %.1f MB/s of text)",
                st.docs, st.empty_docs, st.terms, st.nnz, out, xpath[0] ? ", " : "", xpath, wall,
                wall > 0 ? (double)ps.bytes_read / wall / 1e6 : 0.0);
    dm_vectorize_print_skips(ctx, cmd, &ps);
    dm_report rep;
    DM_ASSERT(dm_report_init(&rep, cmd, app->argc_all, app->argv_all) == DM_OK);
    dm_vectorize_report_stats(rep.results, &st, &ps);
    if (corpus) dm_vectorize_report_skips(rep.results, &ps);
    json_object_set_new(rep.results, "weighting", json_string(icf_path ? "tf-icf" : o.idf == DM_IDF_SKLEARN ? "tf-idf (sklearn idf)" : "tf-idf"));
    json_object_set_new(rep.results, "output", dm_json_text(out));
    json_object_set_new(rep.results, "seconds", json_real(wall));
    json_object_set_new(rep.results, "text_bytes_per_second", json_real(wall > 0 ? (double)ps.bytes_read / wall : 0.0));
    rc = dm_report_collect(&rep, ctx);
    if (rc == DM_OK) rc = dm_report_write(&rep, ctx, app->report_path);
    rc = dm_ctx_agree(ctx, rc);
    dm_report_free(&rep);
    return rc == DM_OK ? DM_EXIT_OK : dm_app_fail(app, cmd, rc);
}
