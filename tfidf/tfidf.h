/* tfidf: per-document term counting (GPU hash tables after Zhang & Mueller), the vocabulary /
 * document-frequency table, TF-IDF across ranks, TF-ICF tables, and the sparse vectors' files.
 * Reference: the CPU backend (tfidf_cpu.c). DESIGN.md sections 7 ("TF-IDF / TF-ICF") and 8;
 * issue 4. Plain C11, no CUDA types.
 *
 * Data flow of one rank (dm_vectorize_corpus, or dm_tfidf_from_stream after dm_preprocess):
 *   tokens (64-bit term hash + stem bytes)
 *     -> local terms: distinct (hash, bytes) of this rank, resolved by bytes (dm_termtab), so two
 *        stems with the same hash are two terms; every token becomes a local term index
 *     -> dm_tf_count_fn (CPU or CUDA): per-document term counts, rows sorted by local index
 *     -> local df (rows containing each local term)
 *     -> owner rank of a term = dm_term_owner(hash, ranks); (hash, bytes, df) go to owners with
 *        MPI_Alltoallv; owners merge equal terms (dm_vocab_merge_fn) and sum df; N = all docs
 *     -> min_df / max_df pruning on the owners; each owner sorts its kept terms by bytes; the
 *        sorted runs are allgathered and merged: term id = rank of the term bytes in byte order
 *        (ties, possible only under a test hash, by hash). Ids therefore do not depend on the
 *        number of ranks, and every rank holds the same vocabulary (dm_vocab).
 *     -> local term -> term id (dm_vocab_lookup_fn: open addressing on the 64-bit hash, term
 *        bytes compared through the identity field)
 *     -> weights (dm_tfidf_weigh_fn): rows term-sorted, optionally L2-normalised.
 *
 * Weights (d a document, t a vocabulary term, n(t,d) its count in d, N documents in the corpus):
 *   tf(t,d) = n(t,d) / sum_k n(k,d) over the vocabulary terms k of d (terms pruned by min_df /
 *             max_df, or absent from an ICF table, are not part of d any more);
 *             sublinear: tf(t,d) = 1 + ln n(t,d) (scikit-learn's sublinear_tf).
 *   idf(t)  = ln(N / df(t))                      (DM_IDF_LOG, the default, DESIGN.md)
 *           = ln((1 + N) / (1 + df(t))) + 1      (DM_IDF_SKLEARN: TfidfVectorizer, smooth_idf)
 *   icf(t)  = ln(N_ref / cf(t))                  (TF-ICF, Reed et al.: cf = documents of the
 *                                                 reference corpus containing t)
 *   w(t,d)  = tf x idf (or icf), computed in double; with L2 (default) divided by the row's
 *             Euclidean norm (summed in term-id order); stored as float. Entries whose weight is
 *             exactly 0 (idf = 0: the term is in every document) are not stored. A document
 *             without vocabulary terms is an empty row (counted as empty_docs).
 *   With --idf sklearn and L2 (scikit-learn's defaults) the weights equal TfidfVectorizer's on
 *   the same tokens: its raw-count tf differs from ours by a per-row factor that L2 removes.
 *
 * Hash collisions: a 64-bit hash never stands for two terms. Tables key on the hash and keep an
 * identity field (the index of a term whose bytes are compared), so equal hashes with different
 * bytes get different entries and different ids. Tables that fill up are grown and rebuilt,
 * never truncated. Tests force both with a weak hash and a tiny initial capacity. */
#ifndef DM_TFIDF_H
#define DM_TFIDF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "preprocess/preprocess.h"
#include "tfidf/vectors.h"

#ifdef __cplusplus
extern "C" {
#endif

struct dm_ctx;

#define DM_TERM_NONE UINT32_MAX /* "no term id": pruned, or absent from an ICF table */

/* ---------------------------------------------------------------------------------------------
 * Term lists: n terms, term i = (hash[i], bytes[off[i] .. off[i+1])). Depending on use the terms
 * are distinct or not (documented at each function). val is an optional per-term u64 (df, cf). */
typedef struct dm_termlist {
    size_t n;
    uint64_t *hash;
    uint64_t *off;  /* n + 1 */
    char *bytes;
    uint64_t *val;  /* n, or NULL */
} dm_termlist;

void dm_termlist_free(dm_termlist *l);
/* Allocates a list of n terms and `bytes` term bytes (off[0] = 0, other offsets unset; val zeroed
 * when with_val, else NULL). Errors: NOMEM. */
int dm_termlist_alloc(dm_termlist *l, size_t n, uint64_t bytes, int with_val);
/* Appends one term (grows the arrays; cap counters kept in the list's allocation sizes). */
int dm_termlist_push(dm_termlist *l, size_t *cap, size_t *bytes_cap, uint64_t hash, const char *w,
                     size_t len, uint64_t val);
static inline const char *dm_termlist_bytes(const dm_termlist *l, size_t i) { return l->bytes + l->off[i]; }
static inline size_t dm_termlist_len(const dm_termlist *l, size_t i) { return (size_t)(l->off[i + 1] - l->off[i]); }

/* Byte order of terms (memcmp, a prefix first), then hash: the order of term ids. */
int dm_term_cmp(const char *a, size_t la, uint64_t ha, const char *b, size_t lb, uint64_t hb);
/* The owner rank of a term hash among `ranks` ranks. */
int dm_term_owner(uint64_t hash, int ranks);

/* ---------------------------------------------------------------------------------------------
 * The host term table (CPU reference of the vocabulary table): open addressing with linear
 * probing on the 64-bit hash; a slot holds the hash and an identity (term index + 1, 0 = empty)
 * through which the term bytes are compared. Grown (x2) and rebuilt when the load passes 1/2.
 * Terms are appended to `terms` in insertion order. */
typedef struct dm_termtab {
    size_t cap;          /* slots, power of two */
    uint64_t *key;       /* cap */
    uint32_t *ident;     /* cap; 0 = empty, else term index + 1 */
    dm_termlist terms;   /* the distinct terms, in insertion order; terms.val unused */
    size_t terms_cap, bytes_cap;
    uint64_t rebuilds;   /* times the table was grown */
    uint64_t collisions; /* distinct terms whose hash another distinct term already had */
} dm_termtab;

/* initial_cap: slots to start with (rounded up to a power of two, at least 2); 0 = 1024. */
int dm_termtab_init(dm_termtab *t, size_t initial_cap);
void dm_termtab_free(dm_termtab *t);
/* *idx = index of the term (hash, w[0..len)), inserted if new (*added = 1). Errors: NOMEM,
 * INVALID_ARG beyond 2^32 - 2 terms. */
int dm_termtab_insert(dm_termtab *t, uint32_t *idx, int *added, uint64_t hash, const char *w, size_t len);
/* The index of the term, or DM_TERM_NONE. */
uint32_t dm_termtab_find(const dm_termtab *t, uint64_t hash, const char *w, size_t len);

/* ---------------------------------------------------------------------------------------------
 * Per-document term counts: CSR rows, distinct term indices strictly increasing within a row. */
typedef struct dm_tf_counts {
    size_t n_rows;
    uint64_t *row_off;  /* n_rows + 1 */
    uint32_t *term;     /* row_off[n_rows] entries */
    uint32_t *count;
} dm_tf_counts;
void dm_tf_counts_free(dm_tf_counts *c);

/* GPU per-document table variants (Zhang & Mueller). The CPU backend ignores the choice. */
enum dm_tf_variant {
    DM_TF_ATOMIC = 0,    /* threads of a block insert with atomics into intermediate buckets,
                            then compaction into a header (per-bucket counts) + entry array */
    DM_TF_NOATOMIC = 1   /* each thread fills a private sub-table; sub-tables are merged bucket by
                            bucket, one thread per bucket, without atomics */
};
int dm_tf_variant_parse(const char *s, int *variant);
const char *dm_tf_variant_name(int variant);

typedef struct dm_tf_count_options {
    int variant;          /* enum dm_tf_variant */
    int bucket_slack;     /* GPU: per-bucket capacity factor (>= 1; 0 = 2); doubled on overflow */
    void *stream;         /* cudaStream_t (CUDA backend) */
    uint64_t rebuilds;    /* out: per-document tables rebuilt because a bucket overflowed */
    int hashes_on_device; /* dm_tf_count_hashes_cuda: `hashes` is a device address (the token
                             stream's dev_hashes), read in place; the CPU backend refuses it */
} dm_tf_count_options;
#define DM_TF_COUNT_OPTIONS_INIT {DM_TF_ATOMIC, 0, NULL, 0, 0}

/* Counts the tokens of n_docs documents: document d's tokens are tok[tok_off[d] ..
 * tok_off[d+1]), each a term index < n_terms. out (caller frees with dm_tf_counts_free) gets one
 * row per document with its distinct terms ascending and their counts. Host pointers in and out
 * on both backends. Errors: INVALID_ARG (a token >= n_terms), NOMEM, CUDA, NO_DEVICE/UNSUPPORTED. */
typedef int dm_tf_count_fn(dm_tf_counts *out, const uint64_t *tok_off, const uint32_t *tok,
                           size_t n_docs, uint32_t n_terms, dm_tf_count_options *opt);
dm_tf_count_fn dm_tf_count_cpu, dm_tf_count_cuda;
/* Count rows kept in device memory by the CUDA backend, so that a rank's tokens cross the bus
 * once (as hashes, up) and its rows once (as weights, down): between counting and weighing the
 * rows stay where they were made. Pieces of whole documents in order (one per count chunk).
 * Opaque; dm_tf_dev_free (NULL is fine; a CPU-only build never makes one). */
typedef struct dm_tf_dev dm_tf_dev;
void dm_tf_dev_free(dm_tf_dev *dev);
struct dm_vocab_table_options;

/* Counts tokens given by their hashes: a token's term is the index of the term of `terms` with
 * its hash (the token stream's vocabulary: dm_hash_lookup_fn then dm_tf_count_fn, in one pass on
 * the GPU). Errors: those of both, and DM_ERR_FORMAT "token stream: token K has hash H, which is
 * not in its vocabulary". dev NULL: out gets the rows. dev non-NULL (CUDA): the rows stay on the
 * device in *dev and out gets n_rows and row_off only (term and count NULL), unless the device
 * lacks the memory for them: then *dev = NULL and out gets everything, as the CPU backend always
 * does. vo: the hash table's options and counters. */
typedef int dm_tf_count_hashes_fn(dm_tf_counts *out, dm_tf_dev **dev, const uint64_t *tok_off, const uint64_t *hashes,
                                  size_t n_docs, const dm_termlist *terms, dm_tf_count_options *opt,
                                  struct dm_vocab_table_options *vo);
dm_tf_count_hashes_fn dm_tf_count_hashes_cpu, dm_tf_count_hashes_cuda;
/* df[t] = rows of dev that hold term t, for its n_terms terms (a histogram on the device). */
int dm_tf_dev_df(uint64_t *df, size_t n_terms, const dm_tf_dev *dev, void *stream);

/* The CUDA backend's table algorithm (same per-element code, tfidf_tables.h) run on the host, lane
 * by lane: tests it without a GPU. Not a production backend. */
dm_tf_count_fn dm_tf_count_hd;
/* Host helpers of the CUDA tables' tuning workload (tfidf_hd.c, so the tests run them without a
 * GPU). dm_tf_table_grow_fit: for a document of len tokens whose distinct terms are
 * terms[0 .. n_distinct) (a row of dm_tf_count_cpu), the smallest `grow` (dm_tf_bcap's bucket
 * doublings) at which no bucket gets more distinct terms than it has slots, i.e. the table size
 * the driver ends with after its rebuilds; such a table never overflows, whatever the order of the
 * inserts. */
int dm_tf_table_grow_fit(const uint32_t *terms, uint64_t n_distinct, uint64_t len, int slack);
/* The canonical content of n_docs per-document tables (tab_off as the kernels take it; key/cnt
 * their slots, DM_TF_EMPTY = free): out[tab_off[d] ...] = document d's occupied slots as
 * (term << 32 | count), ascending, then zeros up to tab_off[d + 1]. Which slot a term takes
 * depends on the order of the atomic inserts, so instances compare on this form. A document
 * whose overflow flag is set contributes zeros only: its table is partial, and which terms it
 * holds depends on the insert order (the driver discards it and rebuilds larger); whether a
 * document overflows does not depend on the order (a bucket overflows exactly when more distinct
 * terms fall into it than it has slots). out has tab_off[n_docs] entries. */
void dm_tf_tables_canonical(uint64_t *out, const uint32_t *key, const uint32_t *cnt, const uint64_t *tab_off,
                            const uint32_t *overflow, size_t n_docs);

/* Tests and benchmarks of the CUDA tables: compiled instances of a variant's counting kernel,
 * their names, and forcing instance i of whichever variant runs (-1: the tuner's choice). */
int dm_tf_count_cuda_instances(int variant);
const char *dm_tf_count_cuda_instance_name(int variant, int i, char *buf, size_t len);
int dm_tf_count_cuda_force_instance(int i);
/* The CUDA backend counts and weighs in chunks of whole documents of at most `tokens` tokens and
 * rows of at most `entries` entries (device memory of one call); 0 restores the defaults
 * (2^26, 2^27). Tests make them small to exercise the chunking. */
void dm_tfidf_cuda_set_chunks(uint64_t tokens, uint64_t entries);
/* Benchmark input: documents of term indices < n_terms covering n_tok tokens (lengths 1..400,
 * one in 128 up to 5000; skewed term frequencies). tok_off holds up to n_tok + 1 entries. */
int dm_tf_bench_docs(uint64_t *tok_off, uint32_t *tok, size_t n_tok, uint32_t n_terms, uint64_t seed,
                     size_t *n_docs);
/* Registers the tfidf kernels with the tuner (CUDA builds; common/tune/register_all.c). */
int dm_tfidf_tune_register(void);

/* ---------------------------------------------------------------------------------------------
 * The vocabulary / document-frequency table: merge and lookup, both backends. */
typedef struct dm_vocab_table_options {
    size_t initial_cap;   /* slots to start with (0 = sized from the input); tests force tiny */
    void *stream;         /* cudaStream_t */
    uint64_t rebuilds;    /* out: times the table was grown and rebuilt */
    uint64_t collisions;  /* out: distinct terms sharing their hash with another distinct term */
} dm_vocab_table_options;
#define DM_VOCAB_TABLE_OPTIONS_INIT {0, NULL, 0, 0}

/* Merges possibly repeated terms: out (caller frees) gets the distinct (hash, bytes) of in, in
 * order of first occurrence, with out->val = the sum of in->val over equal terms (in->val NULL:
 * counts occurrences). */
typedef int dm_vocab_merge_fn(dm_termlist *out, const dm_termlist *in, dm_vocab_table_options *opt);
dm_vocab_merge_fn dm_vocab_merge_cpu, dm_vocab_merge_cuda;

/* For each query term q: ids_out[q] = the index i of the vocabulary term equal to it (hash and
 * bytes), or DM_TERM_NONE. The vocabulary terms must be distinct (DM_ERR_INVALID_ARG if not). */
typedef int dm_vocab_lookup_fn(uint32_t *ids_out, const dm_termlist *vocab, const dm_termlist *queries,
                               dm_vocab_table_options *opt);
dm_vocab_lookup_fn dm_vocab_lookup_cpu, dm_vocab_lookup_cuda;
/* Hash-only lookup (token hashes of a token stream onto its vocabulary): ids_out[i] = the index
 * of the vocabulary term with hash hashes[i], DM_TERM_NONE if none; a queried hash that several
 * vocabulary terms share is ambiguous: DM_ERR_FORMAT naming the terms. */
typedef int dm_hash_lookup_fn(uint32_t *ids_out, const dm_termlist *vocab, const uint64_t *hashes,
                              size_t n, dm_vocab_table_options *opt);
dm_hash_lookup_fn dm_hash_lookup_cpu, dm_hash_lookup_cuda;

/* ---------------------------------------------------------------------------------------------
 * Weights. */
enum dm_idf_kind { DM_IDF_LOG = 0, DM_IDF_SKLEARN = 1 };
int dm_idf_parse(const char *s, int *kind);

typedef struct dm_weigh_options {
    int sublinear;         /* tf = 1 + ln n */
    int l2;                /* L2-normalise rows */
    void *stream;          /* cudaStream_t */
    uint64_t zero_weight;  /* out: entries of weight 0, not stored */
    uint64_t unmapped;     /* out: tokens (sum of counts) of terms mapped to DM_TERM_NONE */
} dm_weigh_options;
#define DM_WEIGH_OPTIONS_INIT {0, 1, NULL, 0, 0}

/* Weighs count rows: term_map[local term] = column (term id) or DM_TERM_NONE (dropped); col_w[c]
 * = the idf / icf of column c. out gets n_rows = counts->n_rows, row_off, col (strictly
 * increasing per row) and val; other fields of out are left as they are (zeroed by the callee
 * only for the arrays it sets). Entries of weight 0 are not stored. Host pointers on both
 * backends. Errors: NOMEM, CUDA. */
typedef int dm_tfidf_weigh_fn(dm_vectors *out, const dm_tf_counts *counts, const uint32_t *term_map,
                              size_t n_local_terms, const double *col_w, uint64_t n_cols,
                              dm_weigh_options *opt);
dm_tfidf_weigh_fn dm_tfidf_weigh_cpu, dm_tfidf_weigh_cuda;
/* dm_tfidf_weigh_cuda on rows kept on the device (dm_tf_count_hashes_cuda); dev->terms must be
 * n_local_terms. */
int dm_tfidf_weigh_dev_cuda(dm_vectors *out, const dm_tf_dev *dev, const uint32_t *term_map, size_t n_local_terms,
                            const double *col_w, uint64_t n_cols, dm_weigh_options *opt);

/* ---------------------------------------------------------------------------------------------
 * The vocabulary: n_terms terms, id = index, in byte order of the terms; df[id] = documents that
 * contain the term (cf for an ICF table), n_docs = N. Identical on every rank. */
typedef struct dm_vocab {
    dm_termlist terms;  /* terms.val = df */
    uint64_t n_docs;
} dm_vocab;
void dm_vocab_free(dm_vocab *v);

/* Writes the vocabulary as TSV: a header line "id<TAB>term<TAB>df", then one line per term
 * (tab, newline and backslash in term bytes escaped as \t \n \\). Atomic write. */
int dm_vocab_write_tsv(const dm_vocab *v, const char *path, const char *val_name);

/* ---------------------------------------------------------------------------------------------
 * Options and statistics of the TF-IDF driver. */
typedef struct dm_tfidf_options {
    int backend;                /* enum dm_backend; AUTO = the context's backend */
    int idf;                    /* enum dm_idf_kind */
    int sublinear;
    int l2;                     /* default 1 */
    uint64_t min_df_count;      /* keep terms with df >= min_df_count (default 1) */
    double min_df_frac;         /* ... and df / N >= min_df_frac (default 0; decided on df / N, not frac x N) */
    uint64_t max_df_count;      /* keep terms with df <= max_df_count (default UINT64_MAX) */
    double max_df_frac;         /* ... and df / N <= max_df_frac (default 1) */
    int tf_variant;             /* enum dm_tf_variant (CUDA backend) */
    size_t table_initial_cap;   /* vocabulary tables' first capacity (0 = automatic; tests) */
    int by_bytes;               /* corpus input: resolve every token by its bytes as it is read
                                   (the batched reader) even when no two stems share a hash */
    int host_rows;              /* CUDA: a token stream's count rows go to the host between
                                   counting and weighing (default 0: they stay on the device when
                                   it has room; dm_tfidf_local.dev) */
} dm_tfidf_options;
#define DM_TFIDF_OPTIONS_INIT {0, DM_IDF_LOG, 0, 1, 1, 0.0, UINT64_MAX, 1.0, DM_TF_ATOMIC, 0, 0, 0}

/* Counted over all ranks (identical on every rank after the driver returns). */
typedef struct dm_tfidf_stats {
    uint64_t docs;              /* rows */
    uint64_t empty_docs;        /* rows without any stored entry */
    uint64_t tokens;            /* tokens counted */
    uint64_t terms_seen;        /* distinct terms before pruning (TF-IDF) */
    uint64_t terms;             /* vocabulary size (columns) */
    uint64_t pruned_min_df, pruned_max_df;
    uint64_t nnz;
    uint64_t zero_weight;       /* entries not stored because their weight was 0 */
    uint64_t icf_unknown_tokens;/* TF-ICF: tokens whose term is not in the table */
    uint64_t hash_collisions;   /* distinct terms sharing a hash with another (vocabulary) */
    uint64_t table_rebuilds;    /* vocabulary/per-document tables grown and rebuilt */
} dm_tfidf_stats;

/* One rank's documents after term resolution: count rows over local terms, plus ids/labels in
 * the layout of dm_vectors. All arrays owned (dm_tfidf_local_free). */
typedef struct dm_tfidf_local {
    dm_tf_counts counts;        /* rows = this rank's documents in corpus order */
    dm_termlist terms;          /* distinct local terms; terms.val = local df (filled by driver) */
    uint64_t *id_off;           /* n_rows + 1 */
    char *ids;
    uint64_t *label_off;        /* n_rows + 1 */
    char *labels;
    uint64_t tokens;            /* tokens counted on this rank */
    uint64_t hash_collisions;   /* local term resolution: stems sharing a hash */
    uint64_t table_rebuilds;
    dm_tf_dev *dev;             /* CUDA: the count rows on the device (then counts.term and
                                   counts.count are NULL; counts.row_off is set); dm_tfidf_vectors
                                   and dm_icf_build use them there */
} dm_tfidf_local;
void dm_tfidf_local_free(dm_tfidf_local *l);

/* Collective: builds the vocabulary from every rank's local terms and local df (terms->val) and
 * this rank's document count, applies min_df/max_df, and maps the local terms to ids
 * (local_to_id, n = terms->n entries, DM_TERM_NONE for pruned terms). ctx NULL = one process.
 * An empty vocabulary (no term anywhere, or everything pruned) is DM_ERR_INVALID_ARG with the
 * reason. Errors agree across ranks. */
int dm_tfidf_vocab_build(dm_vocab *vocab, uint32_t *local_to_id, dm_tfidf_stats *stats,
                         const struct dm_ctx *ctx, const dm_termlist *terms, uint64_t local_docs,
                         const dm_tfidf_options *opt);

/* Collective: TF-IDF vectors of the local documents (consumes nothing; local->terms.val is
 * (re)computed). out: this rank's rows, row_base = documents of lower ranks, n_cols = vocabulary
 * size, flags from opt. vocab and stats may be NULL. */
int dm_tfidf_vectors(dm_vectors *out, dm_vocab *vocab, dm_tfidf_stats *stats, const struct dm_ctx *ctx,
                     dm_tfidf_local *local, const dm_tfidf_options *opt);

/* Turns a token stream (dm_preprocess's output on this rank) into local counts. The stream's
 * per-token hashes are mapped onto its vocabulary; a hash that stands for several stems in the
 * stream (a collision) makes its tokens ambiguous: DM_ERR_FORMAT naming the stems (vectorise
 * from the corpus instead, which resolves collisions by bytes). On the CUDA backend the rows
 * stay on the device (out->dev) unless opt->host_rows or the device lacks the room. */
int dm_tfidf_local_from_stream(dm_tfidf_local *out, const dm_token_stream *s, int backend,
                               const dm_tfidf_options *opt);

/* Collective: TF-IDF vectors of this rank's token stream (dm_preprocess's output): local counts
 * (dm_tfidf_local_from_stream) then dm_tfidf_vectors. For `docmine pipeline`. Errors agree. */
int dm_tfidf_from_stream(dm_vectors *out, dm_vocab *vocab, dm_tfidf_stats *stats, const struct dm_ctx *ctx,
                         const dm_token_stream *s, const dm_tfidf_options *opt);

/* ---------------------------------------------------------------------------------------------
 * TF-ICF tables (Reed et al.): the vocabulary of a reference corpus with cf = document
 * frequency there and N_ref documents, plus the preprocessing that produced its terms, so that a
 * corpus preprocessed differently is refused instead of silently mismatching.
 *
 * Binary file (`docmine icf-build -o FILE`), little-endian, atomic write:
 *   char[8] magic "DMICF\0\0\1"; u32 version (1); u32 flags (bit 0 stemmed, bit 1 numbers kept);
 *   u32 min_len; u32 max_len; u64 stop-word fingerprint (dm_stopset_fingerprint, 0 = none);
 *   u64 n_ref_docs; u64 n_terms; u64 term_bytes;
 *   u64 hash[n_terms]; u64 cf[n_terms]; u64 term_off[n_terms + 1]; char bytes[term_bytes];
 *   u32 crc32 (zlib) of every preceding byte; char[4] "END\n".
 * Terms are in byte order (term id = index). */
typedef struct dm_pp_signature {
    uint32_t flags;             /* bit 0: stemmed; bit 1: numbers kept */
    uint32_t min_len, max_len;  /* token length limits */
    uint64_t stop_fingerprint;  /* dm_stopset_fingerprint of the stop list (0 = no stop words) */
} dm_pp_signature;

typedef struct dm_icf_table {
    dm_vocab vocab;             /* terms.val = cf, n_docs = N_ref */
    dm_pp_signature sig;
} dm_icf_table;
void dm_icf_table_free(dm_icf_table *t);
int dm_icf_table_write(const dm_icf_table *t, const char *path);
/* The header is checked against the file size before anything is allocated (a large file that
 * is not a table costs no memory). Errors: IO (open/read), FORMAT (magic, version, sizes, unknown
 * flags, token lengths out of range, more terms than term ids, CRC, terms out of byte order or
 * twice, a term longer than the table's max length (an empty one is a stem: Porter stems "s" to ""), cf of 0 or above N_ref)
 * naming the file. */
int dm_icf_table_read(dm_icf_table *t, const char *path);
/* Checks that a corpus preprocessed with `sig` and hashed with dm_term_hash can be weighed with
 * the table: DM_ERR_INVALID_ARG naming the first differing setting, or DM_ERR_FORMAT when the
 * table's hashes are not dm_term_hash of its terms (another hash function). */
int dm_icf_table_check(const dm_icf_table *t, const dm_pp_signature *sig, const char *path);

/* Collective: the ICF table of the local documents of every rank (no pruning). */
int dm_icf_build(dm_icf_table *out, dm_tfidf_stats *stats, const struct dm_ctx *ctx,
                 dm_tfidf_local *local, const dm_pp_signature *sig, const dm_tfidf_options *opt);
/* Not collective: TF-ICF vectors of local documents with the table (no global pass). Columns =
 * table terms; tokens of terms absent from the table are dropped and counted in
 * stats->icf_unknown_tokens (stats accumulate: call once per batch). row_base is left 0. */
int dm_icf_vectors(dm_vectors *out, dm_tfidf_stats *stats, const dm_icf_table *table,
                   const dm_tfidf_local *local, const dm_tfidf_options *opt, int backend);

/* ---------------------------------------------------------------------------------------------
 * The corpus driver. TF-IDF: this rank's share of the corpus goes through dm_preprocess (its
 * pipelined reader and tokeniser) and dm_tfidf_local_from_stream; when any two stems of the
 * corpus share a 64-bit hash (counted by preprocess, summed over ranks), or with opt->by_bytes,
 * the corpus is read batch by batch instead with every token resolved by its bytes. TF-ICF
 * (icf != NULL): always batch by batch, each batch weighed with the table and its tokens
 * dropped (streaming, no global pass; the table is first
 * checked against the preprocessing options, icf_name naming it in errors). ctx NULL = one
 * process. pp: preprocessing options (NULL = defaults). Collective. vocab, stats and pp_stats
 * may be NULL. */
int dm_vectorize_corpus(dm_vectors *out, dm_vocab *vocab, dm_tfidf_stats *stats, dm_pp_stats *pp_stats,
                        const struct dm_ctx *ctx, const char *path, const dm_preprocess_options *pp,
                        const dm_tfidf_options *opt, const dm_icf_table *icf, const char *icf_name);
/* Collective: local counts of this rank's share of a corpus (what dm_vectorize_corpus weighs).
 * pp_stats (may be NULL): preprocessing counters summed over ranks. */
int dm_tfidf_local_from_corpus(dm_tfidf_local *out, dm_pp_stats *pp_stats, const struct dm_ctx *ctx,
                               const char *path, const dm_preprocess_options *pp,
                               const dm_tfidf_options *opt);
/* An order-independent fingerprint of a stop-word set (0 for an empty set). */
uint64_t dm_stopset_fingerprint(const dm_stopset *s);
/* The signature of preprocessing options (NULL = defaults). */
int dm_pp_signature_of(dm_pp_signature *sig, const dm_preprocess_options *pp);

/* ---------------------------------------------------------------------------------------------
 * Vector files.
 *
 * `.dmv` binary CSR, little-endian, one file for all ranks, written to a temporary name and
 * renamed:
 *   offset 0   char[8] magic "DMVECS\0\1"
 *          8   u32     version (1)
 *         12   u32     flags (DM_VECTORS_*)
 *         16   u64     n_rows, n_cols, nnz, id_bytes, label_bytes
 *         56   u32     crc32 of bytes 0..55 (header check); u32 0
 *         64   u64 row_off[n_rows + 1]; u32 col[nnz]; f32 val[nnz];
 *              u64 id_off[n_rows + 1]; char ids[id_bytes]; u64 label_off[n_rows + 1];
 *              char labels[label_bytes]
 *   trailer    u32 crc32 (zlib) of every preceding byte; char[4] "END\n".
 * Offsets are global (row_off[0] = id_off[0] = label_off[0] = 0). Rows are documents in corpus
 * order, whatever the number of ranks that wrote them, so the bytes are the same for 1, 2 or 4
 * ranks. The reader checks magic, version, header CRC, sizes against the file size, offsets
 * monotone, columns strictly increasing and < n_cols, and the CRC. */
#define DM_VECTORS_MAGIC "DMVECS\0\1"
#define DM_VECTORS_VERSION 1u

/* Collective over ctx (NULL = one process): each rank contributes its rows (v->row_base must be
 * the number of rows of lower ranks, v->n_cols and flags the same on every rank). The CRC is
 * computed in 4 MB blocks by the OpenMP threads while the calling thread writes (combined with
 * crc32_combine: the same value for any thread count). One process writes with O_DIRECT through
 * an aligned 8 MB block buffer where the file system allows it (else, or with the environment
 * variable DOCMINE_DIRECT_IO=0, buffered stdio); several ranks write with MPI-IO. The bytes are
 * the same on every path. What the reader would refuse is not written (INVALID_ARG): offsets
 * that fall back, ids or labels that are not NUL-terminated, unsorted or out-of-range columns, weights that are not finite. */
int dm_vectors_write(const dm_vectors *v, const char *path, const struct dm_ctx *ctx);
/* Reads a whole file. Errors: IO, FORMAT (naming the file and what is wrong, "checksum
 * mismatch" for a CRC error). */
int dm_vectors_read(dm_vectors *v, const char *path);
/* The number of rows of a file, from its checked header (magic, version, header CRC, section
 * sizes against the file size; not the whole-file CRC). Errors: IO, FORMAT as dm_vectors_read. */
int dm_vectors_rows(uint64_t *n_rows, const char *path);
/* Reads rows [first, first + count) (count clipped at the end); row_base = first. The header
 * CRC and all structural checks are done; the whole-file CRC only when verify_crc. */
int dm_vectors_read_rows(dm_vectors *v, const char *path, uint64_t first, uint64_t count, int verify_crc);

enum dm_export_format { DM_EXPORT_SVMLIGHT = 0, DM_EXPORT_MTX = 1 };
int dm_export_format_parse(const char *s, int *format);
/* Exports vectors (all rows, one process):
 *  - SVMlight: comment lines with the label map, then per row "<labels> <col+1>:<val> ... # id";
 *    labels are numbered 1.. in byte order of their names (0 = unlabelled), several joined by
 *    ',' (load with sklearn.datasets.load_svmlight_file(f, multilabel=True, zero_based=False,
 *    n_features=n_cols)).
 *  - MatrixMarket coordinate real general, 1-based (scipy.io.mmread).
 * Values print with 9 significant digits (float round trip). Atomic write. */
int dm_vectors_export(const dm_vectors *v, const char *path, int format);

#ifdef __cplusplus
}
#endif
#endif
