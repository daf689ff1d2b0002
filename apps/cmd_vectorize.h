/* Options shared by the commands that read a corpus (preprocess, vectorize, icf-build, pipeline):
 * how it is read and preprocessed (they must agree for an ICF table to fit a corpus). Reference:
 * apps/cmd_vectorize.c. */
#ifndef DM_CMD_VECTORIZE_H
#define DM_CMD_VECTORIZE_H

#include <getopt.h>

#include <jansson.h>

#include "apps/app.h"
#include "preprocess/preprocess.h"
#include "tfidf/tfidf.h"

/* getopt_long values of the shared options (above any single-character option). */
enum {
    DM_VO_FORMAT = 1000, DM_VO_LABELS, DM_VO_STOPWORDS, DM_VO_NO_STEM, DM_VO_KEEP_NUMBERS,
    DM_VO_MIN_LEN, DM_VO_MAX_LEN, DM_VO_BATCH, DM_VO_NO_STOPWORDS, DM_VO_STRICT, DM_VO_SHARED_END
};
#define DM_VECTORIZE_PP_LONGOPTS                                                                   \
    {"format", required_argument, 0, DM_VO_FORMAT}, {"labels", required_argument, 0, DM_VO_LABELS}, \
    {"stopwords", required_argument, 0, DM_VO_STOPWORDS}, {"no-stem", no_argument, 0, DM_VO_NO_STEM}, \
    {"keep-numbers", no_argument, 0, DM_VO_KEEP_NUMBERS},                                         \
    {"min-len", required_argument, 0, DM_VO_MIN_LEN}, {"max-len", required_argument, 0, DM_VO_MAX_LEN}, \
    {"batch-bytes", required_argument, 0, DM_VO_BATCH}, {"no-stopwords", no_argument, 0, DM_VO_NO_STOPWORDS}, \
    {"strict", no_argument, 0, DM_VO_STRICT}

/* The help lines of the shared options. */
extern const char dm_vectorize_pp_help[];

/* Applies one shared option (c, optarg). Returns 0, or the usage exit code after printing. */
int dm_vectorize_pp_option(dm_app *app, const char *cmd, int c, const char *arg, dm_preprocess_options *pp);

/* --min-df / --max-df values: an integer is a document count, a number with '.' or an exponent a
 * fraction (of N, in [0, 1]); either resets the other to its default, so the last one given applies.
 * Returns 0, or -1 for an invalid value. */
int dm_vectorize_parse_df(const char *s, uint64_t *count, double *frac, int is_max);

/* dm_preprocess_options.device_tokens for commands that vectorize what they preprocess: 1 (the
 * token hashes stay on the GPU between the two) unless DOCMINE_DEVICE_TOKENS=0 (comparisons). */
int dm_vectorize_device_tokens(void);

/* Collective, after the options are parsed: every rank loads the stop-word list (--stopwords FILE,
 * else the built-in one) and compares its fingerprint with rank 0's. A list missing or different
 * on some rank (node-local files) fails on every rank naming the file and the rank, instead of the
 * ranks dropping other stop words (a file missing on one rank, or of other words, ran on with a
 * mixed corpus). Returns the agreed status. */
int dm_vectorize_pp_agree(const dm_ctx *ctx, const dm_preprocess_options *pp);

/* The report's TF-IDF and preprocessing counters (ps may be NULL). */
void dm_vectorize_report_stats(json_t *o, const dm_tfidf_stats *st, const dm_pp_stats *ps);

/* What reading a corpus skipped, as every command that reads one prints it (rank 0, stderr):
 * "docmine CMD: N skipped: 2 corrupt_gzip, 1 bad_json", then the first messages (of all ranks,
 * in corpus order) and how many more there were; and a line for files not of --format. Nothing
 * when nothing was skipped or ignored. */
void dm_vectorize_print_skips(const dm_ctx *ctx, const char *cmd, const dm_pp_stats *ps);
/* The same in a report object: "skipped" (the count per reason, every reason named), "messages"
 * (the first ones), "messages_total" and "files_ignored" (files not of --format). */
void dm_vectorize_report_skips(json_t *o, const dm_pp_stats *ps);

#endif
