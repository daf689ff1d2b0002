/* Status codes, the thread-local error message, DM_TRY and DM_ASSERT.
 * Reference: none (infrastructure). Every library function returns int: 0 = DM_OK, negative = error.
 * The message of the last error on this thread carries file:line, the rank and, for CUDA/MPI
 * errors, the library's error string. Library code never exits; DM_ASSERT aborts the whole job. */
#ifndef DM_STATUS_H
#define DM_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* printf-style argument checking for functions taking (..., fmt, ...). */
#if defined(__GNUC__)
#define DM_PRINTF(fmt_arg, first_arg) __attribute__((format(printf, fmt_arg, first_arg)))
#else
#define DM_PRINTF(fmt_arg, first_arg)
#endif

enum dm_status {
    DM_OK = 0,
    DM_ERR_INVALID_ARG = -1,
    DM_ERR_NOMEM = -2,
    DM_ERR_IO = -3,
    DM_ERR_FORMAT = -4,
    DM_ERR_CUDA = -5,
    DM_ERR_MPI = -6,
    DM_ERR_UNSUPPORTED = -7,
    DM_ERR_NO_DEVICE = -8
};

/* Records an error (printf-style message) for this thread and returns code unchanged, so that
 * `return DM_ERR(DM_ERR_IO, "%s: %s", path, strerror(errno));` both records and propagates. */
int dm_error_set(int code, const char *file, int line, const char *fmt, ...) DM_PRINTF(4, 5);
#define DM_ERR(code, ...) dm_error_set((code), __FILE__, __LINE__, __VA_ARGS__)

/* The message of the last error recorded on this thread ("" if none). Owned by the library. */
const char *dm_error_message(void);
/* The code of the last error recorded on this thread (DM_OK if none). */
int dm_error_code(void);
void dm_error_clear(void);
/* Marks the last error as a remote one ("another rank failed"), so that a rank reporting errors
 * can tell its own failures from failures it only learnt of. dm_error_set clears the mark. */
void dm_error_mark_remote(void);
int dm_error_is_remote(void);
/* Whether status (< 0) is a failure this thread learnt of: the code of the last error marked
 * remote, with no own error of that code recorded since (own errors of other codes may have been:
 * a rank that learnt of a failure and then failed to allocate still returns the learnt status). */
int dm_error_learnt(int status);
/* Short name of a status code, e.g. "DM_ERR_IO". */
const char *dm_status_name(int code);

/* The rank printed in messages; set once by dm_ctx_init (-1 = not set). */
void dm_status_set_rank(int rank);
int dm_status_rank(void);

/* Passes a negative status up unchanged. */
#define DM_TRY(x)                                                                                  \
    do {                                                                                           \
        int dm_try_rc_ = (x);                                                                      \
        if (dm_try_rc_ < 0) return dm_try_rc_;                                                     \
    } while (0)

/* A broken invariant: prints rank and file:line and aborts the whole job (MPI_Abort when MPI is
 * initialised), never a hang. Not for bad input: that gets a status code. */
void dm_assert_fail(const char *expr, const char *file, int line);
#define DM_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (!(cond)) dm_assert_fail(#cond, __FILE__, __LINE__);                                    \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
