/* Counted skips and counters of the preprocess stage (dm_pp_stats), their names, their sum over
 * ranks and the first skip messages of all ranks. Reference: none (bookkeeping). */
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/status.h"
#include "preprocess/preprocess.h"

const char *dm_pp_skip_name(int reason)
{
    static const char *names[DM_PP_SKIP_COUNT] = {
        "empty_file", "unreadable", "corrupt_gzip", "corrupt_archive",
        "bad_json", "bad_tsv", "bad_sgml", "symlink_loop", "not_regular", "not_text",
        "duplicate_dir", "bad_label"};
    return reason >= 0 && reason < DM_PP_SKIP_COUNT ? names[reason] : "unknown";
}

/* A message cut by its buffer may end inside a UTF-8 sequence: the incomplete sequence goes (a
 * complete one, and bytes that were never UTF-8, stay as they are). */
static void dm_utf8_cut_tail(char *m)
{
    size_t n = strlen(m), b = n;
    while (b > 0 && n - b < 3 && ((unsigned char)m[b - 1] & 0xC0) == 0x80) b--; /* continuation bytes */
    if (b == 0) return;
    unsigned char lead = (unsigned char)m[b - 1];
    size_t want = lead >= 0xF0 && lead < 0xF8 ? 4 : lead >= 0xE0 && lead < 0xF0 ? 3 : lead >= 0xC0 && lead < 0xE0 ? 2 : 0;
    if (want && n - (b - 1) < want) m[b - 1] = 0;
}

void dm_pp_stats_skip(dm_pp_stats *st, int reason, const char *fmt, ...)
{
    if (!st) return;
    if (reason >= 0 && reason < DM_PP_SKIP_COUNT) st->skipped[reason]++;
    if (st->n_messages < DM_PP_MAX_MESSAGES) {
        char *m = st->messages[st->n_messages];
        int k = snprintf(m, DM_PP_MESSAGE_LEN, "skip (%s): ", dm_pp_skip_name(reason));
        va_list ap;
        va_start(ap, fmt);
        if (k > 0 && k < DM_PP_MESSAGE_LEN) vsnprintf(m + k, DM_PP_MESSAGE_LEN - (size_t)k, fmt, ap);
        va_end(ap);
        if (strlen(m) == DM_PP_MESSAGE_LEN - 1) dm_utf8_cut_tail(m); /* cut by the buffer */
    }
    st->n_messages++;
}

/* The counters as an array, in a fixed order (for sums). */
#define DM_PP_NCOUNTERS (14 + DM_PP_SKIP_COUNT)
static void dm_pp_stats_pack(uint64_t *v, const dm_pp_stats *s)
{
    int k = 0;
    v[k++] = s->files_read;
    v[k++] = s->files_ignored;
    v[k++] = s->bytes_read;
    v[k++] = s->docs;
    v[k++] = s->docs_labelled;
    v[k++] = s->docs_empty;
    v[k++] = s->invalid_utf8;
    v[k++] = s->nul_bytes;
    v[k++] = s->tokens;
    v[k++] = s->tokens_short;
    v[k++] = s->tokens_long;
    v[k++] = s->tokens_number;
    v[k++] = s->tokens_stop;
    v[k++] = s->hash_collisions;
    for (int i = 0; i < DM_PP_SKIP_COUNT; i++) v[k++] = s->skipped[i];
}

static void dm_pp_stats_unpack(dm_pp_stats *s, const uint64_t *v)
{
    int k = 0;
    s->files_read = v[k++];
    s->files_ignored = v[k++];
    s->bytes_read = v[k++];
    s->docs = v[k++];
    s->docs_labelled = v[k++];
    s->docs_empty = v[k++];
    s->invalid_utf8 = v[k++];
    s->nul_bytes = v[k++];
    s->tokens = v[k++];
    s->tokens_short = v[k++];
    s->tokens_long = v[k++];
    s->tokens_number = v[k++];
    s->tokens_stop = v[k++];
    s->hash_collisions = v[k++];
    for (int i = 0; i < DM_PP_SKIP_COUNT; i++) s->skipped[i] = v[k++];
}

void dm_pp_stats_add(dm_pp_stats *into, const dm_pp_stats *from)
{
    uint64_t a[DM_PP_NCOUNTERS], b[DM_PP_NCOUNTERS];
    dm_pp_stats_pack(a, into);
    dm_pp_stats_pack(b, from);
    for (int i = 0; i < DM_PP_NCOUNTERS; i++) a[i] += b[i];
    dm_pp_stats_unpack(into, a);
    /* messages in order: the first DM_PP_MAX_MESSAGES kept, all of them counted */
    for (uint64_t m = 0; m < from->n_messages; m++) {
        if (m < DM_PP_MAX_MESSAGES && into->n_messages < DM_PP_MAX_MESSAGES)
            memcpy(into->messages[into->n_messages], from->messages[m], DM_PP_MESSAGE_LEN);
        into->n_messages++;
    }
}

uint64_t dm_pp_stats_skipped_total(const dm_pp_stats *st)
{
    uint64_t t = 0;
    for (int i = 0; i < DM_PP_SKIP_COUNT; i++) t += st->skipped[i];
    return t;
}

size_t dm_pp_stats_skips_str(char *buf, size_t len, const dm_pp_stats *st)
{
    size_t n = 0;
    if (len) buf[0] = '\0';
    for (int i = 0; i < DM_PP_SKIP_COUNT; i++) {
        if (!st->skipped[i]) continue;
        int k = snprintf(buf + n, len - n, "%s%llu %s", n ? ", " : "", (unsigned long long)st->skipped[i],
                         dm_pp_skip_name(i));
        if (k < 0 || (size_t)k >= len - n) return len ? len - 1 : 0; /* cut: buf stays terminated */
        n += (size_t)k;
    }
    return n;
}

/* The first DM_PP_MAX_MESSAGES messages of all ranks in rank order (files are split across ranks
 * in consecutive ranges, so this is the corpus order: the messages of one process), on every
 * rank. Each rank puts those of its messages that are among the first into their slots of a
 * zeroed block (ranks below it kept `before` messages) and the blocks are OR-ed together: no slot
 * has two writers, and nothing is allocated, so no rank can fail before the collective. */
static int dm_pp_messages_allgather(dm_pp_stats *st, MPI_Comm comm)
{
    char block[DM_PP_MAX_MESSAGES][DM_PP_MESSAGE_LEN];
    uint64_t kept = st->n_messages < DM_PP_MAX_MESSAGES ? st->n_messages : DM_PP_MAX_MESSAGES, before = 0;
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    if (MPI_Exscan(&kept, &before, 1, MPI_UINT64_T, MPI_SUM, comm) != MPI_SUCCESS)
        return DM_ERR(DM_ERR_MPI, "preprocess: MPI_Exscan of the message counts failed");
    if (rank == 0) before = 0; /* MPI_Exscan leaves rank 0's result undefined */
    memset(block, 0, sizeof block);
    for (uint64_t m = 0; m < kept && before + m < DM_PP_MAX_MESSAGES; m++)
        memcpy(block[before + m], st->messages[m], DM_PP_MESSAGE_LEN);
    if (MPI_Allreduce(MPI_IN_PLACE, block, (int)sizeof block, MPI_BYTE, MPI_BOR, comm) != MPI_SUCCESS)
        return DM_ERR(DM_ERR_MPI, "preprocess: MPI_Allreduce of the messages failed");
    memcpy(st->messages, block, sizeof block);
    return DM_OK;
}

int dm_pp_stats_allreduce(dm_pp_stats *st, const void *mpi_comm)
{
    MPI_Comm comm = *(const MPI_Comm *)mpi_comm;
    uint64_t a[DM_PP_NCOUNTERS + 1], b[DM_PP_NCOUNTERS + 1];
    dm_pp_stats_pack(a, st);
    a[DM_PP_NCOUNTERS] = st->n_messages; /* not a counter of dm_pp_stats_add: summed here only */
    int rc = MPI_Allreduce(a, b, DM_PP_NCOUNTERS + 1, MPI_UINT64_T, MPI_SUM, comm);
    if (rc != MPI_SUCCESS) return DM_ERR(DM_ERR_MPI, "preprocess: MPI_Allreduce of the counters failed");
    DM_TRY(dm_pp_messages_allgather(st, comm));
    dm_pp_stats_unpack(st, b);
    st->n_messages = b[DM_PP_NCOUNTERS];
    return DM_OK;
}
