/* preprocess: corpus readers, Unicode normalisation, tokenising, stop words, Porter stemming and
 * 64-bit term hashing; the token stream that tfidf consumes and its binary file format.
 * Reference: the CPU backend (dm_tokenize_cpu, with Snowball's "porter" from libstemmer).
 * DESIGN.md sections 1, 7 ("Tokenising and stemming") and 8; issue 3. Plain C11, no CUDA types.
 *
 * Data flow of one rank:
 *   files (split across ranks by bytes) -> readers -> raw documents (id, labels, bytes)
 *   -> dm_normalize() (CPU, utf8proc)  -> normalised text: token code points and ' ' only
 *   -> dm_tokenize_fn (CPU or CUDA)    -> per token: 64-bit hash of the stem, stem bytes
 *   -> dm_token_stream (ids, labels, hashes per document, vocabulary of distinct stems).
 *
 * Token rules (identical on both backends; DM_HD code in preprocess/token_rules.h):
 *  - Normalisation: invalid UTF-8 bytes -> U+FFFD (counted), NUL -> separator (counted), then
 *    NFKC + case fold + strip marks + strip default-ignorable code points (utf8proc: soft hyphen,
 *    zero-width joiner and non-joiner, word joiner, bidi marks, variation selectors, BOM: they do
 *    not cut a word; the zero-width space U+200B alone is a separator; case folding comes before
 *    mark stripping: the combining ypogegrammeni U+0345 folds to iota). Every code point that is
 *    not a letter (L*) or a number (N*) becomes one ASCII space. Pure-ASCII documents take a fast path with identical
 *    output (letters lower-cased, digits kept, all else -> ' ').
 *  - A token is a maximal run of non-space bytes of the normalised text, i.e. a run of L/N code
 *    points. Tokens of fewer than min_len or more than max_len bytes are dropped (counted).
 *  - A "pure number" is a token made only of ASCII digits after NFKC (which folds full-width,
 *    superscript and circled digits to ASCII); such tokens are dropped unless keep_numbers.
 *    Tokens written with other scripts' digits are kept.
 *  - Stop words are matched on the normalised token, before stemming.
 *  - Tokens made only of ASCII bytes are Porter-stemmed; others are kept as they are.
 *  - The term key is dm_term_hash(stem) (FNV-1a 64 followed by the murmur3 64-bit finaliser).
 */
#ifndef DM_PREPROCESS_H
#define DM_PREPROCESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct dm_ctx;

/* ---------------------------------------------------------------------------------------------
 * Statistics and counted skips. Every document that is read but not turned into a stream entry,
 * and every file that is not read, is counted here with its reason; the first messages (naming
 * file and line/record) are kept for the report. A record whose text is empty (JSONL "text":"",
 * a TSV line with an empty text field) is not a skip: it stays a document, without tokens, and is
 * counted in docs_empty with every other document left without tokens (only stop words, say). */
enum dm_pp_skip {
    DM_PP_SKIP_EMPTY_FILE = 0,   /* file of 0 bytes */
    DM_PP_SKIP_UNREADABLE,       /* open/read failed (permissions, vanished) */
    DM_PP_SKIP_CORRUPT_GZIP,     /* truncated or corrupt gzip stream: file skipped; bytes after the
                                    last member that start no member (trailing garbage): the
                                    garbage alone, the data before it is read (gzip(1) keeps it
                                    too, and warns) */
    DM_PP_SKIP_CORRUPT_ARCHIVE,  /* libarchive error: rest of archive skipped; a member whose data
                                    libarchive cannot give while the archive goes on (encrypted,
                                    a method it lacks): that member; a corrupt .bz2/.xz/.zst file;
                                    a hard link whose target the archive does not hold before it;
                                    archives nested more than 4 deep */
    DM_PP_SKIP_BAD_JSON,         /* malformed JSONL line, missing "text", a label that is not a
                                    string, a number, null or an array of them, an array label
                                    holding a comma, an id or label holding a NUL (\u0000) */
    DM_PP_SKIP_BAD_TSV,          /* TSV line without 3 fields, with an empty id, or with a NUL byte
                                    in its id or label */
    DM_PP_SKIP_BAD_SGML,         /* malformed Reuters record (no </REUTERS> before the next record,
                                    no NEWID or one over 63 bytes, a TOPICS/D/TITLE/BODY/TEXT
                                    element left open, a <D> topic holding a comma); a Reuters
                                    file without any <REUTERS record */
    DM_PP_SKIP_SYMLINK_LOOP,     /* a symbolic link to a folder that holds it (a loop): not
                                    followed */
    DM_PP_SKIP_NOT_REGULAR,      /* sockets, devices, fifos; in archives also symbolic links */
    DM_PP_SKIP_NOT_TEXT,         /* a file (of any format) that is not text: compressed or archive
                                    data under another name, UTF-16/32 (by its byte-order mark or,
                                    without one, by NUL bytes at every other or three of four
                                    places of its first 4 KB), NUL bytes with malformed UTF-8 in
                                    its first 4 KB */
    DM_PP_SKIP_DUPLICATE_DIR,    /* a folder reached a second way (two symbolic links to it, or
                                    one beside its own path) without a loop: read once, at the
                                    first, the second not read */
    DM_PP_SKIP_BAD_LABEL,        /* --labels dir: a file (or archive member) whose first folder's
                                    name holds a comma (labels are kept joined by commas: it
                                    would read as two labels) */
    DM_PP_SKIP_COUNT
};
const char *dm_pp_skip_name(int reason);

#define DM_PP_MAX_MESSAGES 16
/* A kept message's bytes with its NUL: longer ones are cut at a UTF-8 character's start (a deep
 * path, an archive member, the line and the reason fit). */
#define DM_PP_MESSAGE_LEN 512
typedef struct dm_pp_stats {
    uint64_t files_read, files_ignored; /* ignored: not matching --format (e.g. lewis.dtd) */
    uint64_t bytes_read;                /* raw bytes after decompression */
    uint64_t docs;                      /* documents in the stream */
    uint64_t docs_labelled;             /* documents with at least one label */
    uint64_t docs_empty;                /* documents in the stream without any token (empty text,
                                           or every token dropped); set by dm_preprocess_source */
    uint64_t skipped[DM_PP_SKIP_COUNT]; /* per reason: documents (or files, for file reasons) */
    uint64_t invalid_utf8;              /* invalid UTF-8 bytes replaced by U+FFFD */
    uint64_t nul_bytes;                 /* NUL bytes turned into separators */
    uint64_t tokens;                    /* tokens kept */
    uint64_t tokens_short, tokens_long, tokens_number, tokens_stop; /* tokens dropped */
    uint64_t hash_collisions;           /* distinct stems sharing a hash with another stem */
    uint64_t n_messages;                /* messages produced (only the first DM_PP_MAX_MESSAGES kept) */
    char messages[DM_PP_MAX_MESSAGES][DM_PP_MESSAGE_LEN];
} dm_pp_stats;

/* Records a skip (reason) with a printf message naming file and line/record. */
void dm_pp_stats_skip(dm_pp_stats *st, int reason, const char *fmt, ...) DM_PRINTF(3, 4);
/* Adds the counters, and appends from's messages after into's (the first DM_PP_MAX_MESSAGES kept,
 * all counted). */
void dm_pp_stats_add(dm_pp_stats *into, const dm_pp_stats *from);
uint64_t dm_pp_stats_skipped_total(const dm_pp_stats *st);
/* The skips per reason as text, "2 corrupt_gzip, 1 bad_json" ("" when none), into buf[len]
 * (cut to fit); returns its length. */
size_t dm_pp_stats_skips_str(char *buf, size_t len, const dm_pp_stats *st);
/* Sums counters and message counts over ranks (MPI_Allreduce on *(MPI_Comm *)mpi_comm) and gives
 * every rank the first DM_PP_MAX_MESSAGES messages of all ranks in rank order (the corpus order:
 * the messages one process would keep). Collective; allocates nothing, so every rank reaches the
 * collectives. */
int dm_pp_stats_allreduce(dm_pp_stats *st, const void *mpi_comm);

/* ---------------------------------------------------------------------------------------------
 * Readers. */
enum dm_pp_format {
    DM_PP_FORMAT_AUTO = 0, /* by extension: .sgm -> reuters, .jsonl/.ndjson -> jsonl, .tsv -> tsv,
                              .tar, .tar.gz/.tgz, .tar.bz2/.tbz2/.tbz, .tar.xz/.txz,
                              .tar.zst/.tzst, .zip -> archive members by their own names,
                              anything else -> one text document per file; a trailing .gz, .bz2,
                              .xz or .zst is decompressed first; a leading UTF-8 BOM is dropped */
    DM_PP_FORMAT_TEXT,     /* every file is one document (in every format a file that is not
                              text is skipped: DM_PP_SKIP_NOT_TEXT) */
    DM_PP_FORMAT_JSONL,    /* {"id":..,"text":..,"label":..} per line ("labels" if no "label");
                              id: a string or number, else "FILE:LINE" (FILE as ids name it);
                              label: a string (labels joined by commas, as written), a number,
                              null (none) or an array of these, each element one label, so one
                              holding a comma is a skip (DM_PP_SKIP_BAD_JSON) */
    DM_PP_FORMAT_TSV,      /* id TAB label TAB text per line (text may hold further tabs; label:
                              labels joined by commas) */
    DM_PP_FORMAT_REUTERS   /* Reuters-21578 SGML; only *.sgm files (compressed or not) and
                              archives are read, in folders and in archives */
};
int dm_pp_format_parse(const char *s, int *format);

enum dm_pp_labels { DM_PP_LABELS_FORMAT = 0, DM_PP_LABELS_DIR = 1, DM_PP_LABELS_NONE = 2 };

typedef struct dm_reader_options {
    int format;        /* enum dm_pp_format */
    int labels;        /* enum dm_pp_labels: DIR = first-level folder name under the corpus root
                          (an archive outside any folder: the member's first folder) */
    int strict;        /* 1: the first skip reason becomes an error (DM_ERR_FORMAT / DM_ERR_IO) */
} dm_reader_options;
#define DM_READER_OPTIONS_INIT {DM_PP_FORMAT_AUTO, DM_PP_LABELS_FORMAT, 0}

/* One raw document as a reader hands it out. Pointers are valid during the callback only.
 * labels: zero or more labels joined by ',' ("" = unlabelled; no label holds a ',' of its own:
 * JSONL array elements and Reuters topics that would are skipped). text is not NUL-terminated.
 * id: relative to the corpus root: the file's path (a compression suffix dropped, unless a file
 * before it has that id: dm_pp_file.id), an archive member's "ARCHIVE/MEMBER" with MEMBER its path
 * without "." and empty components ("./a.txt", "/a.txt" -> "a.txt"), its suffix dropped unless an
 * earlier member of the archive has that id, and when the path with its suffix is taken too,
 * "#2", "#3", ... appended (ids stay unique); a JSONL/TSV/SGML record's own id. */
typedef struct dm_raw_doc {
    const char *id;
    const char *labels;
    const char *text;
    size_t len;
} dm_raw_doc;
/* Return 0 to continue, negative status to stop reading (passed up unchanged). */
typedef int dm_doc_sink(void *user, const dm_raw_doc *doc);

/* One input file of a corpus. */
typedef struct dm_pp_file {
    char *path;        /* path as opened (--corpus as given, then its folders): messages name it */
    char *rel;         /* path relative to the corpus root (its format, DIR labels and ids) */
    uint64_t size;     /* bytes on disk */
    char *id;          /* NULL: ids from rel (a compression suffix dropped); else the name they
                          are formed from instead, when another file of the corpus gives rel's
                          (dm_pp_list_files: "a.txt.gz" beside "a.txt") */
} dm_pp_file;

/* The array and the paths are dm_malloc'ed (common/alloc.h): dm_pp_file_list_free. */
typedef struct dm_pp_file_list {
    dm_pp_file *files;
    size_t n, cap;
} dm_pp_file_list;

/* Lists the files of a corpus path (a file or a directory tree), sorted by relative path in byte
 * order (deterministic), following symbolic links. A folder is read once: the folders reached
 * without a symbolic link first, then the links to folders in the order the walk meets them (names
 * sorted), so a folder reached both ways keeps its own path; a link to a folder that holds it is
 * counted as DM_PP_SKIP_SYMLINK_LOOP, any other second way to a folder already read as
 * DM_PP_SKIP_DUPLICATE_DIR (its documents are not read twice). Hidden entries (".name") are
 * skipped. Files not of `format` are counted as ignored (Reuters: only *.sgm, compressed or not,
 * and archives). Ids are unique over the list (dm_pp_file.id): in byte order of rel, each file
 * takes rel less its compression suffix when no file before has that id, else rel ("a.txt.gz"
 * after "a.txt"), else rel with "#2", "#3", ...; every rank lists the whole tree, so the ids do
 * not depend on which rank reads which file. Errors: DM_ERR_IO when root does not exist or
 * cannot be read. An empty list is not an error here (the driver reports an empty corpus). */
int dm_pp_list_files(dm_pp_file_list *out, const char *root, const dm_reader_options *opt,
                     dm_pp_stats *st);
void dm_pp_file_list_free(dm_pp_file_list *l);
/* Collective over ctx's ranks (NULL: DM_OK): every rank's list of the corpus root must be rank 0's
 * (the same relative paths and sizes, in order): the ranks split it by bytes, each assuming the
 * others see what it sees. A rank that lists another corpus (node-local copies that differ, a file
 * missing on one node, a file replaced while the ranks listed it) fails with DM_ERR_FORMAT naming
 * the root, the rank and the first file that differs, and every rank returns that status (read as
 * it was, ranks read files twice or not at all, and the run went on with mixed data). */
int dm_pp_file_list_agree(const dm_pp_file_list *l, const char *root, const struct dm_ctx *ctx);

/* Splits files[0..n) across `size` ranks into contiguous ranges of about equal bytes: rank r gets
 * [*begin, *end). Ranges concatenated in rank order give the file order, so the document order
 * of the whole corpus does not depend on the number of ranks. */
void dm_pp_split_by_bytes(size_t *begin, size_t *end, const dm_pp_file_list *l, int rank, int size);

/* Reads one file (decompressing .gz, expanding archives) and calls sink per document in file
 * order. Bad input is skipped and counted in st (or an error with opt->strict). Messages name the
 * file by f->path, then "PATH: member M" (M as the archive lists it) inside archives, then
 * ":LINE" or ": record N" (the decompressed data of a .gz keeps the .gz's path); ids come from
 * f->id when set, else f->rel (dm_raw_doc), the format from f->rel. Returns 0, a negative status from the sink, or an error (DM_ERR_IO /
 * DM_ERR_FORMAT in strict mode, DM_ERR_NOMEM). */
int dm_pp_read_file(const dm_pp_file *f, const dm_reader_options *opt, dm_pp_stats *st,
                    dm_doc_sink *sink, void *user);
/* Same on an in-memory buffer (the fuzz targets and tests use it); name is used for ids and
 * messages; format must not be AUTO unless name has an extension. */
int dm_pp_read_buffer(const char *name, const void *data, size_t len, const dm_reader_options *opt,
                      dm_pp_stats *st, dm_doc_sink *sink, void *user);

/* ---------------------------------------------------------------------------------------------
 * Normalisation (CPU, utf8proc). */

/* Normalises text[0..len) into *out (NULL or a dm_malloc'ed block, grown with dm_realloc as
 * needed, *out_cap its capacity; the caller releases it with dm_free), appending to *out_len;
 * always appends one trailing ' ' so documents stay separated when concatenated. Counts invalid UTF-8 and NUL bytes in st (may be NULL). Pure ASCII input takes
 * the fast path unless force_unicode. Errors: DM_ERR_NOMEM. */
int dm_normalize(char **out, size_t *out_len, size_t *out_cap, const char *text, size_t len,
                 int force_unicode, dm_pp_stats *st);

/* ---------------------------------------------------------------------------------------------
 * Stop words: an exact set of normalised words, stored flat so the same table works on the host
 * and, copied as is, on the device (open addressing on dm_term_hash, bytes compared). */
typedef struct dm_stopset {
    uint32_t cap;          /* power of two, > 2 x n */
    uint32_t n;
    uint64_t *keys;        /* cap slot keys (0 = empty slot; a word hashing to 0 is stored as 1),
                              then DM_STOPSET_FILTER_WORDS words of a membership filter
                              (token_rules.h: a clear bit skips the probe) */
    uint32_t *word_off;    /* cap entries: offset of the word in bytes */
    uint8_t *word_len;     /* cap entries */
    char *bytes;           /* the words, concatenated */
    size_t bytes_len;
} dm_stopset;

/* Builds the set from a word list: one word a line, '#' starts a comment, blanks around the word
 * and blank lines ignored. A line of several words (blanks between them: "new york") is refused,
 * DM_ERR_FORMAT naming file and line, never cut to its first word: stop words are matched token
 * by token, so a phrase could not be honoured. The word is normalised like text and every token
 * it yields is a stop word: a word the tokeniser splits ("don't" -> "don" "t", "e-mail" -> "e"
 * "mail") leaves nothing of itself in a document. path == NULL: the built-in English list
 * (preprocess/stopwords_en.txt, compiled in); dm_stopset_from_text: a list in memory (messages
 * say "stop words (list):LINE"). The arrays are dm_malloc'ed (dm_stopset_free).
 * Errors: DM_ERR_IO naming the file, DM_ERR_FORMAT "stop words FILE:LINE: ...", DM_ERR_NOMEM. */
int dm_stopset_load(dm_stopset *s, const char *path);
int dm_stopset_from_text(dm_stopset *s, const char *text, size_t len);
void dm_stopset_free(dm_stopset *s);
int dm_stopset_contains(const dm_stopset *s, const char *w, size_t len);
/* The built-in list (NUL-terminated). */
extern const char dm_stopwords_en[];

/* ---------------------------------------------------------------------------------------------
 * Tokenising, stop words, stemming and hashing of a batch of normalised documents: the function
 * both backends implement. */
typedef struct dm_tok_options {
    int min_len;       /* bytes, default 2 */
    int max_len;       /* bytes, default 64 (<= DM_TOKEN_MAX_LEN) */
    int keep_numbers;  /* 0: drop pure numbers */
    int stem;          /* 1: Porter-stem ASCII tokens */
    int device_hashes; /* CUDA backend: the hashes stay on the device (dm_tok_result.dev_hash) and
                          only the listed first occurrences' hash and start come back; the other
                          backends ignore it */
} dm_tok_options;
#define DM_TOK_OPTIONS_INIT {2, 64, 0, 1, 0}
#define DM_TOKEN_MAX_LEN 255

/* Input: n_docs normalised documents concatenated in text; document d is
 * text[doc_off[d] .. doc_off[d+1]) and ends with ' ' (as dm_normalize leaves it). */
typedef struct dm_tok_batch {
    const char *text;
    size_t text_len;
    const uint64_t *doc_off;   /* n_docs + 1 */
    size_t n_docs;
} dm_tok_batch;

/* Output, owned by the caller (dm_tok_result_free). Token i of the batch (documents in order,
 * tokens in text order): hash[i] = dm_term_hash(stem), stem bytes at stems[start[i] ..
 * start[i] + stem_len[i]) (a stem is never longer than its token, so stems is a copy of text with
 * each kept token's stem written over its start). doc_tok[d] .. doc_tok[d+1] are document d's
 * tokens. Counters of dropped tokens go to the stats. */
typedef struct dm_tok_result {
    size_t n_tokens, cap;
    uint64_t *hash;
    uint64_t *start;
    uint8_t *stem_len;
    uint64_t *doc_tok;         /* n_docs + 1 */
    char *stems;               /* text_len bytes */
    size_t n_docs;
    uint64_t n_short, n_long, n_number, n_stop;
    void *pinned;              /* CUDA backend: the arrays are page-locked buffers of a reused
                                  set (asynchronous D2H at full bandwidth, no page faults);
                                  dm_tok_result_free hands them back to the backend's pool.
                                  NULL: the arrays are dm_malloc'ed (common/alloc.h) */
    uint64_t *first;           /* optional, NULL when not given: n_first ascending token indices
                                  that include every token which is the first occurrence of its
                                  (hash, stem) in the batch; a token not listed has the hash and
                                  stem of an earlier listed one. The CUDA backend and
                                  dm_tokenize_hd give it (tokenize_hd.h, step 6), so that the
                                  stream builder probes only the listed tokens */
    size_t n_first;
    uint64_t *dev_hash;        /* CUDA backend with dm_tok_options.device_hashes: the n_tokens
                                  hashes in device memory (valid until dm_tok_result_free; the
                                  stream builder copies them on the device), and hash and start
                                  on the host hold only the tokens listed in first and the last
                                  token's start (what the builder reads); NULL otherwise */
} dm_tok_result;
/* Frees the arrays (or returns a pinned set to the CUDA backend's pool). */
void dm_tok_result_free(dm_tok_result *r);

typedef int dm_tokenize_fn(dm_tok_result *out, const dm_tok_batch *in, const dm_stopset *stop,
                           const dm_tok_options *opt);
/* CPU: libstemmer porter. CUDA: our kernels (DM_ERR_UNSUPPORTED in a CPU-only build,
 * DM_ERR_NO_DEVICE without a GPU). Errors: DM_ERR_INVALID_ARG, DM_ERR_NOMEM (host or device
 * memory: the CUDA workspaces come from dm_device_alloc), DM_ERR_CUDA. */
dm_tokenize_fn dm_tokenize_cpu, dm_tokenize_cuda;
/* The CUDA backend's algorithm (same per-element code) run on the host: tests it without a GPU. */
dm_tokenize_fn dm_tokenize_hd;
/* Step (6) of that algorithm on the host: sets r->first / n_first (replacing a list r had) from
 * r's tokens; the tests give hand-made results their list with it. r->first is dm_malloc'ed
 * (dm_free it when r's other arrays are the caller's); r is not a CUDA result. Errors: DM_ERR_NOMEM, DM_ERR_INVALID_ARG (2^32 tokens or more, a CUDA result). */
int dm_tok_first_hd(dm_tok_result *r);

/* ---------------------------------------------------------------------------------------------
 * Stemming of single words (the `docmine stem` command and the stemmer tests). Words with a
 * non-ASCII byte, or longer than DM_TOKEN_MAX_LEN, are returned unchanged. out must hold len + 1
 * bytes; *out_len gets the stem length (<= len); out is NUL-terminated. */
typedef int dm_stem_words_fn(char *out, uint32_t *out_off, uint32_t *out_len, const char *words,
                             const uint32_t *off, const uint32_t *len, size_t n);
/* Stems n words words[off[i] .. off[i]+len[i]) into out at out_off[i] = off[i] (same layout),
 * out_len[i] the stem length. out holds as many bytes as words. */
dm_stem_words_fn dm_stem_words_cpu, dm_stem_words_cuda;
/* The same with our own DM_HD Porter stemmer on the host (what the CUDA kernel runs). */
dm_stem_words_fn dm_stem_words_hd;

/* ---------------------------------------------------------------------------------------------
 * The token stream: what `docmine preprocess` produces and tfidf consumes.
 *
 * In memory (all arrays owned by the stream: host arrays dm_malloc'ed (common/alloc.h),
 * dev_hashes dm_device_alloc'ed; freed by dm_token_stream_free):
 *   n_docs documents, in corpus order (file order, then record order within a file);
 *   document d: id = ids + id_off[d] (NUL-terminated, id_off has n_docs + 1 entries, the last
 *   being the bytes used), labels = labels + label_off[d] (NUL-terminated, labels joined by ',',
 *   "" if none), its term hashes = hashes[tok_off[d] .. tok_off[d+1]) in text order.
 *   Vocabulary: n_terms distinct (hash, stem bytes) pairs sorted by hash, then bytes; term t has
 *   hash term_hash[t] and bytes term_bytes[term_off[t] .. term_off[t+1]) (not NUL-terminated).
 *   Two terms with the same hash are a collision: both are kept, counted in stats.hash_collisions,
 *   so that tfidf can resolve them (a hash never silently stands for two words).
 *
 * Binary file (`docmine preprocess -o FILE`), little-endian, written to FILE.tmp.<pid> then
 * renamed:
 *   offset 0  char[8]  magic "DMTOKS\0\1"
 *         8  u32      version (3)
 *        12  u32      flags (bit 0: stemmed; bit 1: numbers kept)
 *        16  u32      rank, ranks: the writer's rank and the number of ranks of its run
 *        24  u64      run id: the same in every file of one `docmine preprocess` run, another in
 *                     every run (random, drawn by rank 0: dm_token_stream_new_run_id); never 0
 *        32  u64      n_docs, n_tokens, n_terms, id_bytes, label_bytes, term_bytes
 *            u64      hash_collisions
 *   then, in order: u64 tok_off[n_docs+1]; u64 hashes[n_tokens]; u64 id_off[n_docs+1];
 *            char ids[id_bytes]; u64 label_off[n_docs+1]; char labels[label_bytes];
 *            u64 term_hash[n_terms]; u64 term_off[n_terms+1]; char term_bytes[term_bytes];
 *   trailer  u32 crc32 (zlib) of every preceding byte, then char[4] "END\n".
 * The reader checks magic, the CRC, version, rank < ranks, run id != 0, every count and size
 * against the bytes the file holds (before allocating: a file never makes the reader allocate
 * more than about its own size), offsets monotone from 0 to their sizes, ids and labels
 * NUL-terminated, and the vocabulary: terms of at most DM_TOKEN_MAX_LEN bytes (an empty one is a
 * stem: Porter stems "s" to ""), strictly increasing in
 * (hash, bytes). Every failure is DM_ERR_FORMAT naming the file; versions 1 (without rank and
 * ranks) and 2 (without the run id) are refused naming the version.
 * With several ranks, each rank writes its share to FILE.rank<r> (r = 0..size-1); reading the
 * files in rank order gives the corpus order. The header's rank, ranks and run id let a reader
 * refuse a set whose files come from different runs (`docmine vectorize --tokens`): a leftover
 * FILE.rank1 of another run with as many ranks has the right rank and ranks, not the run id. */
typedef struct dm_token_stream {
    size_t n_docs;
    uint64_t *tok_off;
    uint64_t *hashes;
    size_t n_tokens;
    uint64_t *id_off;
    char *ids;
    uint64_t *label_off;
    char *labels;
    size_t n_terms;
    uint64_t *term_hash;
    uint64_t *term_off;
    char *term_bytes;
    uint32_t flags;
    uint32_t rank, n_ranks; /* the writer's rank and its run's rank count (file header; set by
                               dm_preprocess; n_ranks 0 is written as one process: 0 of 1) */
    uint64_t run_id;        /* file header: the run that wrote the file (read back by
                               dm_token_stream_read). Set by `docmine preprocess` for every rank
                               (dm_token_stream_new_run_id); 0 (dm_preprocess leaves it so): the
                               writer draws a new one for the file */
    dm_pp_stats stats;
    uint64_t *dev_hashes; /* the token hashes in device memory instead of `hashes` (NULL then):
                             dm_preprocess_options.device_tokens on the CUDA backend, for
                             dm_tfidf_from_stream on the same GPU; NULL otherwise. Freed by
                             dm_token_stream_free; the file writer and the dump need host hashes */
} dm_token_stream;

#define DM_TOKEN_STREAM_MAGIC "DMTOKS\0\1"
#define DM_TOKEN_STREAM_VERSION 3u

void dm_token_stream_free(dm_token_stream *s);
static inline const char *dm_token_stream_id(const dm_token_stream *s, size_t d)
{
    return s->ids + s->id_off[d];
}
static inline const char *dm_token_stream_labels(const dm_token_stream *s, size_t d)
{
    return s->labels + s->label_off[d];
}
/* Index of the first vocabulary entry with this hash, or -1; entries t.. with equal term_hash
 * are the colliding stems. */
long dm_token_stream_term_find(const dm_token_stream *s, uint64_t hash);

/* A new run id for the files of one run: rank 0 draws 64 random bits (getrandom, mixed with the
 * time, process id and host name) and broadcasts them over *(const MPI_Comm *)mpi_comm (NULL: one
 * process, no MPI call). Never 0. Collective. */
uint64_t dm_token_stream_new_run_id(const void *mpi_comm);
/* Writes the binary file (format above); s->run_id 0 is written as a new id of this file alone.
 * Errors: DM_ERR_INVALID_ARG (hashes in device memory), DM_ERR_IO naming the file, DM_ERR_NOMEM. */
int dm_token_stream_write(const dm_token_stream *s, const char *path);
/* Errors: DM_ERR_IO (open/read, or not a regular file: a FIFO is refused, not waited on),
 * DM_ERR_FORMAT (magic, version, sizes, offsets, vocabulary, CRC) naming the file,
 * DM_ERR_NOMEM. */
int dm_token_stream_read(dm_token_stream *s, const char *path);
/* Human-readable dump: per document "id<TAB>labels<TAB>stem stem ..." (stems from the vocabulary;
 * a colliding hash prints as stem|other). Tabs and line breaks in ids and labels print as spaces
 * (as in assignments.tsv), so that every document is one line of three fields. */
int dm_token_stream_dump(const dm_token_stream *s, FILE *f);

/* ---------------------------------------------------------------------------------------------
 * Driver. */
typedef struct dm_preprocess_options {
    dm_reader_options reader;
    dm_tok_options tok;
    const char *stopwords;    /* NULL: built-in English list; "" : no stop words */
    int backend;              /* enum dm_backend (common/context.h); AUTO resolves from ctx */
    size_t batch_bytes;       /* normalised bytes per batch; 0 = automatic (an eighth of the
                                 rank's input bytes, clamped to 1..32 MB). The batches near the
                                 end of the input are smaller, so that the workers end together
                                 (preprocess.c, dm_pp_target). A document larger than
                                 a batch forms a batch of its own; the CUDA backend further splits
                                 batches to fit free device memory and tokenises a document too
                                 large for the device on the CPU (same output), never truncating */
    int force_unicode;        /* 1: no ASCII fast path (tests) */
    int threads;              /* reader + normaliser threads, at most one per unit (file); 0 = the
                                 source's default (dm_doc_source.all_threads): for files the
                                 rank's threads (omp_get_max_threads(): all cores, OMP_NUM_THREADS
                                 or --threads) less the workers and one, at least 1 */
    int no_prefault;          /* 1: without the stream builder's prefault threads (stream_build.h;
                                 for comparisons: same output, the fills fault the pages) */
    int workers;              /* pipeline workers (tokenise + build a batch each), at most 8;
                                 0 = DOCMINE_PP_WORKERS (1..8) or 4. Same output for any number */
    int device_tokens;        /* CUDA backend: the stream's token hashes stay on the device
                                 (dm_token_stream.dev_hashes), copied there from each batch's
                                 device output, so that TF-IDF on the same GPU does not upload them
                                 again and the host neither fills nor faults in 8 bytes a token.
                                 The device array takes at most half of the free device memory:
                                 beyond that the stream moves its hashes to the host and goes on
                                 there (same stream). Other backends ignore it */
    int window;               /* units (files) the readers may run ahead of the one the calling
                                 thread takes, per reader thread (bounds the pieces held), at
                                 most 64; 0 = DOCMINE_PP_WINDOW (1..64) or 2. Same output for any
                                 value */
    int fail_batch;           /* tests: the worker of batch fail_batch (1-based, in stream order;
                                 0: none) fails as a tokeniser error would, while other batches
                                 are in flight: the run must end with that error, not hang */
} dm_preprocess_options;
#define DM_PREPROCESS_OPTIONS_INIT {DM_READER_OPTIONS_INIT, DM_TOK_OPTIONS_INIT, NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0}

/* Per-stage seconds of one rank (the batch pipeline fills them; CPU backend: h2d = d2h = 0).
 * Files are read and normalised by `threads` reader threads (one file each at a time); read and
 * normalize are their thread-seconds divided by `threads` (the stage's time on its threads).
 * take = copying the readers' pieces of normalised documents into the batch buffers (the
 * calling thread only gathers them in file order; each worker copies its own batch).
 * take, h2d/kernels/d2h (CUDA events) and build run on the pipeline's `workers` worker threads
 * (summed over them), so overlap = (sum of stages) / wall exceeds 1 when stages overlap; worker =
 * the workers' busy thread-seconds (take + tokenise call + build, summed over them, and the final
 * vocabulary sort; waiting for a batch or for a turn to commit is not counted). build = each batch's prepare (distinct terms, ids and
 * labels; in parallel), commit (in batch order) and fill (copies into the stream; in parallel),
 * plus the final vocabulary sort. prefault = the thread-seconds of the builder's
 * DM_SB_PF_THREADS (2) helper threads that populate the pages of the stream's arrays ahead of the
 * fills (stream_build.h), beside the workers.
 * As a pipeline the stages are the thread pools, each doing its steps of a batch in sequence:
 * readers (read + normalize), workers (worker / workers) and the prefault threads
 * (prefault / 2); the slowest of these bounds the wall time. */
typedef struct dm_pp_times {
    double read, normalize, h2d, kernels, d2h, build, wall;
    int threads, workers;
    double prefault, take, worker;
    /* idle seconds (diagnostics): workers waiting for a batch and for their turn to commit (summed
     * over them); the calling thread waiting for a free batch buffer and for the next piece in
     * file order; readers waiting for room (per reader thread) */
    double wait_batch, wait_turn, wait_slot, wait_piece, wait_read;
    uint64_t batches;                   /* batches tokenised (the ramp makes the last ones smaller) */
    /* the wall in four parts (diagnostics): set-up until the threads run, the pipeline until the
     * last piece is taken, the drain until the workers are done, the finish (vocabulary sort,
     * trims, frees) */
    double wall_setup, wall_run, wall_drain, wall_finish;
    int device_tokens; /* 1: the stream's hashes stayed on the device (dm_preprocess_options.
                          device_tokens), 2: they moved to the host on the way, 0: host */
} dm_pp_times;
/* Adds the stages to the named timers "<prefix>.read", ".normalize", ".h2d", ".kernels", ".d2h",
 * ".build", ".prefault", ".take", ".worker" and, with wall != 0, "<prefix>.wall" with its parts
 * ".wall.setup", ".wall.run", ".wall.drain", ".wall.finish" and the idle seconds ".idle.read"
 * (per reader), ".idle.slot", ".idle.piece" (the calling thread), ".idle.batch", ".idle.turn" (per
 * worker) (common/timer.h), and device_tokens to the counter "<prefix>.device_tokens". */
void dm_pp_times_to_timers(const dm_pp_times *t, const char *prefix, int wall);
/* Sum of the stage seconds (read, normalize, take, h2d, kernels, d2h, build, prefault): overlap =
 * this / wall. */
double dm_pp_times_sum(const dm_pp_times *t);

/* Preprocesses the corpus at `path` on this rank's share of the files (split by bytes over
 * ctx ranks; ctx == NULL: one process, all files). out receives this rank's stream (rank and
 * n_ranks set), its stats summed over ranks with the first messages of all ranks. Errors agree
 * across ranks (no hang): the first error of any rank is returned on every rank. An empty corpus
 * (no document on any rank) is dm_pp_no_documents's error. */
int dm_preprocess(dm_token_stream *out, dm_pp_times *times, const struct dm_ctx *ctx,
                  const char *path, const dm_preprocess_options *opt);

/* The error of a corpus without documents: DM_ERR_FORMAT (a runtime error, exit code 1) naming
 * path, with why: the skips per reason and the first message, or the files ignored (not of the
 * --format), or that no file was found. st: the stats summed over ranks. Returns the status. */
int dm_pp_no_documents(const char *path, const dm_pp_stats *st);


/* Frees the batch text buffers that runs keep for the next run of the process (host or
 * page-locked, at most DM_PP_SLOTS_MAX; otherwise held until the process exits). Not while a run
 * is going on. A later run allocates them again. */
void dm_preprocess_release_buffers(void);

/* Backend value for dm_preprocess_files only: the CUDA algorithm emulated on the host
 * (dm_tokenize_hd), for tests without a GPU. */
#define DM_PP_BACKEND_HD 100

/* Same on an explicit list of files (this rank's share), one process. backend: DM_BACKEND_CPU,
 * DM_BACKEND_CUDA or DM_PP_BACKEND_HD. */
int dm_preprocess_files(dm_token_stream *out, dm_pp_times *times, const dm_pp_file *files,
                        size_t n_files, const dm_preprocess_options *opt, int backend);

/* A source of raw documents in n_units independent units, read in parallel by the reader pool
 * and taken strictly in unit order: read(src, i, st, sink, user) calls sink(user, doc) for each
 * document of unit i, in order, and returns 0, the sink's negative status unchanged, or its own
 * error; skips it counts go to st. It is called from several threads at once (for different
 * units), so it must not modify *src. A list of files through the readers is one source (unit =
 * file; dm_preprocess_files); a generator is another (`docmine pipeline --synthetic` feeds
 * datasets/synth.h documents in ranges without writing them). in_bytes: about how many raw bytes
 * the source produces (sizes automatic batches; 0 = the smallest). all_threads: with
 * opt->threads 0, 1 gives one reader per thread (a source whose reading is the heavy stage: the
 * generator), 0 the threads less the workers and one (files: readers, workers and the calling
 * thread then do not oversubscribe the cores; bench/RESULTS.md, sessions 8 and 9). */
typedef int dm_doc_unit_fn(void *src, size_t unit, dm_pp_stats *st, dm_doc_sink *sink, void *user);
typedef struct dm_doc_source {
    dm_doc_unit_fn *read;
    void *src;
    size_t n_units;
    uint64_t in_bytes;
    int all_threads;
} dm_doc_source;

/* The batch pipeline (reader pool + in-order batches + tokenising workers) over the documents of
 * a source, one process: what dm_preprocess_files runs. backend as for dm_preprocess_files. The
 * stream's stats hold the source's and the normaliser's counters. */
int dm_preprocess_source(dm_token_stream *out, dm_pp_times *times, const dm_doc_source *src,
                         const dm_preprocess_options *opt, int backend);

/* ---------------------------------------------------------------------------------------------
 * Kernels of the CUDA backend, for the tuner and the tests. dm_preprocess_tune_register registers
 * them with the tuner (to be called from dm_tune_register_all). dm_pp_cuda_force_instance makes
 * the CUDA backend launch instance `instance` of kernel number `kernel` (0-based, in
 * registration order) instead of the tuner's choice; instance -1 restores the tuner's choice.
 * Both return DM_ERR_UNSUPPORTED in a CPU-only build. */
int dm_preprocess_tune_register(void);
int dm_pp_cuda_kernel_count(void);
/* Number of compiled instances of kernel k, and its name. */
int dm_pp_cuda_instance_count(int kernel);
const char *dm_pp_cuda_kernel_name(int kernel);
int dm_pp_cuda_force_instance(int kernel, int instance);
/* The calling thread's current GPU, and binding a (worker) thread to it: CUDA's current device
 * is per thread, and the pipeline's worker must use the rank's GPU. */
int dm_pp_cuda_get_device(int *dev);
int dm_pp_cuda_set_device(int dev);
/* Kernel throughput on device-resident text (bench_preprocess, issue 3 item 1): uploads the batch
 * once (at most 2 GB, one sub-batch), runs the CUDA kernels once untimed (instances selected,
 * tuned if the database has no answer), then `repeats` times timed with CUDA events around the
 * kernels only (no copies of text or results). *seconds: median time of the kernel sequence;
 * phase: medians of its parts [0] tokenise (starts counted per tile, tiles scanned, tokens
 * placed), [1] process (length / number / stop filter, Porter stem, hash) and compaction of the
 * kept tokens, [2] per-document bounds, and after them [3] the first occurrences of the terms
 * (the stream builder's help, not part of *seconds); *tokens: tokens kept.
 * Errors: DM_ERR_INVALID_ARG, DM_ERR_NO_DEVICE, DM_ERR_NOMEM (host or device memory),
 * DM_ERR_CUDA, DM_ERR_UNSUPPORTED in a CPU-only build. */
int dm_pp_cuda_kernel_bench(double *seconds, double phase[4], size_t *tokens, const dm_tok_batch *in,
                            const dm_stopset *stop, const dm_tok_options *opt, int repeats);
/* Seconds spent in H2D copies, kernels and D2H copies (CUDA events) since the last call; resets. */
void dm_pp_cuda_take_times(double *h2d, double *kernels, double *d2h);
/* Returns the page-locked arrays of a result of dm_tokenize_cuda (r->pinned) to the backend's
 * pool of reused sets; dm_tok_result_free calls it. */
void dm_pp_cuda_result_release(dm_tok_result *r);
/* Device memory for the stream builder (stream.c): grows the device array *p of *cap elements of
 * 8 bytes to hold need, keeping its first keep elements (a device copy), by half again; refuses
 * (DM_ERR_NOMEM, *p unchanged) when the new array would take more than half of the free device
 * memory (or more than limit elements when limit > 0: tests). Copies n bytes between any two of
 * host and device memory (synchronous for the calling thread). CPU-only build: DM_ERR_UNSUPPORTED. */
int dm_pp_cuda_dev_grow(uint64_t **p, size_t *cap, size_t need, size_t keep, size_t limit);
int dm_pp_cuda_copy(void *dst, const void *src, size_t n);

#ifdef __cplusplus
}
#endif
#endif
