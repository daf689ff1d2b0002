/* GPU discovery for a CPU-only build (common/device.h): there are no GPUs.
 * The CUDA build uses device_cuda.cu instead. Reference: none. */
#include "common/device.h"

#include <string.h>

#include "common/status.h"

#if !DM_HAVE_CUDA
int dm_device_count(void) { return 0; }
int dm_device_query(int dev, dm_device_info *out)
{
    memset(out, 0, sizeof *out);
    return DM_ERR(DM_ERR_UNSUPPORTED, "GPU %d: docmine was built without CUDA", dev);
}
int dm_device_bind(int dev, dm_device_info *out) { return dm_device_query(dev, out); }
const char *dm_device_runtime_version(void) { return "none"; }
const char *dm_device_driver_version(void) { return "none"; }
int dm_device_sync(void) { return DM_OK; }
#endif
