/* `docmine icf-build`: the TF-ICF table (Reed et al.) of a reference corpus: its terms, the number
 * of its documents containing each (cf) and its document count, plus the preprocessing settings,
 * so that `docmine vectorize --icf` can refuse a corpus preprocessed differently.
 * Reference: tfidf/tfidf.h (dm_icf_build, dm_icf_table_write). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "apps/cmd_vectorize.h"
#include "apps/commands.h"
#include "common/log.h"
#include "common/report.h"
#include "common/status.h"
#include "common/timer.h"
#include "tfidf/tfidf.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: docmine icf-build --corpus REF -o TABLE [options]\n\n"
               "Counts, for every term of a reference corpus, the documents that contain it (cf), and\n"
               "writes the ICF table: icf(t) = ln(N_ref / cf(t)). `docmine vectorize --icf TABLE` then\n"
               "weighs any corpus preprocessed the same way without a global pass.\n\n"
               "  --corpus REF          reference corpus (file or directory tree)\n"
               "  -o, --output TABLE    the table (binary, with checksum)\n"
               "  --vocab FILE          also write the table's terms as TSV: id, term, cf\n\n"
               "%s\n"
               "example:\n  mpiexec -n 4 docmine icf-build --corpus reuters21578 --format reuters -o reuters.icf\n",
               dm_vectorize_pp_help);
}

int dm_cmd_icf_build(dm_app *app, int argc, char **argv)
{
    enum { O_CORPUS = DM_VO_SHARED_END + 1, O_VOCAB };
    static const struct option opts[] = {{"corpus", required_argument, 0, O_CORPUS},
                                         {"output", required_argument, 0, 'o'},
                                         {"vocab", required_argument, 0, O_VOCAB},
                                         {"help", no_argument, 0, 'h'},
                                         DM_VECTORIZE_PP_LONGOPTS,
                                         {0, 0, 0, 0}};
    const char *cmd = "icf-build";
    dm_ctx *ctx = app->ctx;
    dm_preprocess_options pp = DM_PREPROCESS_OPTIONS_INIT;
    dm_tfidf_options o = DM_TFIDF_OPTIONS_INIT;
    const char *corpus = NULL, *out = NULL, *vocab_path = NULL;
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
        case 'o': out = optarg; break;
        case O_VOCAB: vocab_path = optarg; break;
        case 'h':
            if (ctx->rank == 0) usage(stdout);
            return DM_EXIT_OK;
        default: return dm_app_usage_error(app, cmd, "unknown or incomplete option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return dm_app_usage_error(app, cmd, "unexpected argument '%s'", argv[optind]);
    if (!corpus) return dm_app_usage_error(app, cmd, "missing --corpus REF");
    if (!out) return dm_app_usage_error(app, cmd, "missing -o TABLE");
    if (!*out) return dm_app_usage_error(app, cmd, "-o: an empty path");
    if (pp.tok.min_len > pp.tok.max_len) return dm_app_usage_error(app, cmd, "--min-len is above --max-len");

    double t0 = dm_wtime();
    dm_pp_signature sig;
    /* the paths fit, said before the work (the files are written after it) */
    char p[4200];
    int rc = dm_app_path(p, sizeof p, "%s", out);
    if (rc == DM_OK && vocab_path) rc = dm_app_path(p, sizeof p, "%s", vocab_path);
    rc = dm_ctx_agree(ctx, rc);
    if (rc == DM_OK) rc = dm_vectorize_pp_agree(ctx, &pp); /* the same stop words on every rank */
    if (rc == DM_OK) rc = dm_ctx_agree(ctx, dm_pp_signature_of(&sig, &pp));
    dm_tfidf_local local;
    dm_icf_table t;
    dm_tfidf_stats st;
    dm_pp_stats ps;
    memset(&local, 0, sizeof local);
    memset(&t, 0, sizeof t);
    memset(&st, 0, sizeof st);
    memset(&ps, 0, sizeof ps);
    dm_timer_start("icf_build");
    if (rc == DM_OK) rc = dm_tfidf_local_from_corpus(&local, &ps, ctx, corpus, &pp, &o);
    if (rc == DM_OK) rc = dm_icf_build(&t, &st, ctx, &local, &sig, &o);
    dm_timer_stop("icf_build");
    dm_tfidf_local_free(&local);
    if (rc == DM_OK) {
        if (ctx->rank == 0) {
            rc = dm_icf_table_write(&t, out);
            if (rc == DM_OK && vocab_path) rc = dm_vocab_write_tsv(&t.vocab, vocab_path, "cf");
        }
        rc = dm_ctx_agree(ctx, rc);
    }
    uint64_t n_terms = t.vocab.terms.n, n_ref = t.vocab.n_docs;
    dm_icf_table_free(&t);
    double wall = dm_wtime() - t0;
    if (rc != DM_OK) return dm_app_fail(app, cmd, rc);
    dm_vectorize_print_skips(ctx, cmd, &ps);
    dm_log_info("ICF table of %" PRIu64 " terms from %" PRIu64 " reference documents -> %s (%.2f s)", n_terms, n_ref, out,
                wall);
    dm_report rep;
    DM_ASSERT(dm_report_init(&rep, cmd, app->argc_all, app->argv_all) == DM_OK);
    json_object_set_new(rep.results, "reference_docs", json_integer((json_int_t)n_ref));
    json_object_set_new(rep.results, "terms", json_integer((json_int_t)n_terms));
    json_object_set_new(rep.results, "tokens", json_integer((json_int_t)st.tokens));
    json_object_set_new(rep.results, "hash_collisions", json_integer((json_int_t)st.hash_collisions));
    json_object_set_new(rep.results, "bytes_read", json_integer((json_int_t)ps.bytes_read));
    dm_vectorize_report_skips(rep.results, &ps);
    json_object_set_new(rep.results, "output", dm_json_text(out));
    json_object_set_new(rep.results, "seconds", json_real(wall));
    rc = dm_report_collect(&rep, ctx);
    if (rc == DM_OK) rc = dm_report_write(&rep, ctx, app->report_path);
    rc = dm_ctx_agree(ctx, rc);
    dm_report_free(&rep);
    return rc == DM_OK ? DM_EXIT_OK : dm_app_fail(app, cmd, rc);
}
