/* Launch limits (see kiln_launch_validate in launch_grid.h): CUDA's per-block and per-grid
 * bounds, with sm_90's values as defaults. */
#include "compiler/analysis/launch_grid.h"

#include <stdint.h>

#define KILN_BLOCK_DIM_XY_LIMIT 1024
#define KILN_BLOCK_DIM_Z_LIMIT 64

static int64_t or_default(int64_t v, int64_t d) { return v > 0 ? v : d; }

int64_t kiln_launch_shared_bytes_limit(const kiln_launch_device_t *dev, bool shared_opt_in) {
  static const kiln_launch_device_t kNone = {0};
  if (!dev) dev = &kNone;
  return shared_opt_in ? or_default(dev->shared_bytes_optin, 227 * 1024)
                       : or_default(dev->shared_bytes_static, 48 * 1024);
}

kiln_status kiln_launch_validate(const int64_t block[3], const int64_t grid[3], int64_t shared_bytes,
                                 bool shared_opt_in, const kiln_launch_device_t *dev) {
  static const kiln_launch_device_t kNone = {0};
  if (!dev) dev = &kNone;
  if (!block || !grid) return kiln_status_make(KILN_INVALID_ARGUMENT, "launch: no block or grid dimensions");
  static const char *const kAxis = "xyz";
  const int64_t block_limit[3] = {KILN_BLOCK_DIM_XY_LIMIT, KILN_BLOCK_DIM_XY_LIMIT, KILN_BLOCK_DIM_Z_LIMIT};
  const int64_t grid_limit[3] = {or_default(dev->block_dim_limit_x, INT32_MAX),
                                 or_default(dev->block_dim_limit_y, 65535), or_default(dev->block_dim_limit_y, 65535)};
  int64_t threads = 1;
  for (int a = 0; a < 3; a++) {
    if (block[a] < 1)
      return kiln_status_make(KILN_OUT_OF_RANGE, "launch: block dimension %c is %lld (must be >= 1)", kAxis[a],
                              (long long)block[a]);
    if (grid[a] < 1)
      return kiln_status_make(KILN_OUT_OF_RANGE, "launch: grid dimension %c is %lld (must be >= 1)", kAxis[a],
                              (long long)grid[a]);
    if (block[a] > block_limit[a])
      return kiln_status_make(KILN_OUT_OF_RANGE, "launch: block dimension %c of %lld threads exceeds the limit %lld",
                              kAxis[a], (long long)block[a], (long long)block_limit[a]);
    if (grid[a] > grid_limit[a])
      return kiln_status_make(KILN_OUT_OF_RANGE, "launch: grid dimension %c of %lld blocks exceeds the limit %lld",
                              kAxis[a], (long long)grid[a], (long long)grid_limit[a]);
    threads *= block[a];
  }
  int64_t max_threads = or_default(dev->max_threads_per_block, 1024);
  if (threads > max_threads)
    return kiln_status_make(KILN_OUT_OF_RANGE, "launch: %lld threads per block exceed the limit %lld",
                            (long long)threads, (long long)max_threads);
  if (shared_bytes < 0)
    return kiln_status_make(KILN_OUT_OF_RANGE, "launch: %lld bytes of shared memory", (long long)shared_bytes);
  int64_t shared_limit = kiln_launch_shared_bytes_limit(dev, shared_opt_in);
  if (shared_bytes > shared_limit)
    return kiln_status_make(KILN_OUT_OF_RANGE, "launch: %lld bytes of %s shared memory per block exceed the limit %lld",
                            (long long)shared_bytes, shared_opt_in ? "opt-in" : "static", (long long)shared_limit);
  return NULL;
}
