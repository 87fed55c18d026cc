/* Launch grids for the loop emitter and their thread -> output-element indexing maps.
 *
 * XLA's loop emitter rules: each thread handles `vector_size` consecutive elements (the
 * unroll factor: gcd(N, 4), i.e. 4 or 2 when it divides N, and only when there is enough
 * work — N at least threads_per_core_limit * core_count — and vectorization is allowed),
 * blocks have min(threads_per_block, ceil(N / vector_size)) threads (128: a warp times the
 * scheduling granularity 4), and blocks = ceil(N / vector_size / threads). Blocks beyond the
 * device's x-dimension limit are split over y: blocks_y = ceil(blocks / limit_x),
 * blocks_x = ceil(blocks / blocks_y).
 *
 * The thread map sends (th_x, bl_x[, bl_y])[v] to the output element that vector lane v
 * of that thread writes: the linear index
 *   ((bl_y * blocks_x + bl_x) * threads + th_x) * vector_size + v
 * delinearized into the output shape in its layout's physical order (row-major without a
 * layout), simplified. When the grid covers more than N elements the map carries the
 * constraint `linear in [0, N - 1]` (threads past the end write nothing). For the emitter
 * document's GELU over bf16[6,512,4096] this gives
 *   (th_x, bl_x)[v] -> (bl_x floordiv 4096, (bl_x floordiv 8) mod 512,
 *                       (bl_x mod 8) * 512 + th_x * 4 + v)
 * with th_x in [0, 127], bl_x in [0, 24575], v in [0, 3]. */
#ifndef KILN_COMPILER_ANALYSIS_LAUNCH_GRID_H_
#define KILN_COMPILER_ANALYSIS_LAUNCH_GRID_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "compiler/analysis/indexing_map.h"
#include "compiler/hlo/shape.h"

typedef struct kiln_launch_device {
  int64_t threads_per_block;      /* loop emitter block size; 0 = 128 */
  int64_t block_dim_limit_x;      /* 0 = 2^31 - 1 */
  int64_t block_dim_limit_y;      /* 0 = 65535 */
  int64_t threads_per_core_limit; /* 0 = 2048 */
  int64_t core_count;             /* 0 = 132 (H100 SXM) */
  /* Launch limits checked by kiln_launch_validate (launch_limits.c); 0 = sm_90's value. */
  int64_t max_threads_per_block;  /* 0 = 1024 */
  int64_t shared_bytes_static;    /* 0 = 48 KiB: static shared memory per block */
  int64_t shared_bytes_optin;     /* 0 = 227 KiB: dynamic shared memory after the opt-in */
} kiln_launch_device_t;

typedef struct kiln_launch_grid {
  int64_t num_elements; /* N: elements of the output shape */
  int64_t vector_size;  /* elements per thread (unroll factor) */
  int64_t threads;      /* threads per block (x) */
  int64_t blocks_x, blocks_y;
} kiln_launch_grid_t;

/* The loop emitter's grid for `num_elements` outputs. `dev` may be NULL (defaults).
 * `may_vectorize` false forces vector_size 1 (XLA: fusions whose ops prevent
 * vectorization). N <= 1 gives one thread in one block. OUT_OF_RANGE when even the
 * y-split grid exceeds the device limits; INVALID_ARGUMENT for a negative count. */
kiln_status kiln_launch_grid_for_loop(const kiln_launch_device_t *dev, int64_t num_elements,
                                      bool may_vectorize, kiln_launch_grid_t *out);

/* The same grid with an explicit vector size and block size (for tests and emitters
 * that chose their own), checked for consistency. */
kiln_status kiln_launch_grid_make(int64_t num_elements, int64_t vector_size, int64_t threads,
                                  const kiln_launch_device_t *dev, kiln_launch_grid_t *out);

/* (th_x, bl_x[, bl_y])[v] -> output element index in `shape` (an array shape with
 * N == grid->num_elements), simplified. The vector symbol is named `vector_name`
 * ("v" when NULL). The map is owned by the caller. INVALID_ARGUMENT if the shape does
 * not match the grid or its layout is tiled. */
kiln_status kiln_launch_grid_thread_map(kiln_affine_ctx_t *ctx, const kiln_launch_grid_t *grid,
                                        const kiln_shape_t *shape, const char *vector_name,
                                        kiln_indexing_map_t **out);

/* The flattened form: (th_x, bl_x[, bl_y])[v] -> (linear index), simplified, e.g.
 * `th_x * 4 + bl_x * 512 + v` for the GELU example. */
kiln_status kiln_launch_grid_linear_map(kiln_affine_ctx_t *ctx, const kiln_launch_grid_t *grid,
                                        const char *vector_name, kiln_indexing_map_t **out);

/* Block-shared bytes a kernel may take on `dev` (NULL: defaults): shared_bytes_static, or
 * with `shared_opt_in` shared_bytes_optin. */
int64_t kiln_launch_shared_bytes_limit(const kiln_launch_device_t *dev, bool shared_opt_in);

/* Checks a launch against the device's limits (launch_limits.c): threads per block
 * (block x * y * z) <= max_threads_per_block, block x, y <= 1024 and z <= 64, grid x <=
 * block_dim_limit_x, grid y, z <= block_dim_limit_y, every dimension >= 1, and
 * `shared_bytes` <= shared_bytes_static (or, with `shared_opt_in`, shared_bytes_optin).
 * OK or OUT_OF_RANGE naming the limit exceeded and both numbers; `dev` may be NULL. */
kiln_status kiln_launch_validate(const int64_t block[3], const int64_t grid[3], int64_t shared_bytes,
                                 bool shared_opt_in, const kiln_launch_device_t *dev);

#endif /* KILN_COMPILER_ANALYSIS_LAUNCH_GRID_H_ */
