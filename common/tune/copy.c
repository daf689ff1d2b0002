/* The CPU reference of the copy kernel: memcpy. Reference: itself (the C library). */
#include <string.h>

#include "common/status.h"
#include "common/tune/copy.h"

int dm_copy_cpu(void *dst, const void *src, size_t bytes, void *stream)
{
    (void)stream;
    if (bytes == 0) return DM_OK;
    if (!dst || !src) return DM_ERR(DM_ERR_INVALID_ARG, "copy: NULL pointer");
    memcpy(dst, src, bytes);
    return DM_OK;
}
