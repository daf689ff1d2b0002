/* Copy bandwidth in a CPU-only build (common/bandwidth.h): no GPU. Reference: none. */
#include "common/bandwidth.h"

#include <string.h>

#include "common/status.h"

#if !DM_HAVE_CUDA
int dm_bandwidth_measure(dm_bandwidth *out, size_t bytes, int repeats)
{
    memset(out, 0, sizeof *out);
    return DM_ERR(DM_ERR_UNSUPPORTED, "--bandwidth needs the CUDA backend (built without CUDA)");
}
#endif
