/* Loop-emitter launch grids and their indexing maps (see launch_grid.h). */
#include "compiler/analysis/launch_grid.h"

#include <string.h>

#include "compiler/analysis/hlo_indexing.h"
#include "compiler/analysis/hlo_indexing_internal.h"

#define MAX_RANK 32

static kiln_launch_device_t with_defaults(const kiln_launch_device_t *dev) {
  kiln_launch_device_t d = dev ? *dev : (kiln_launch_device_t){0};
  if (d.threads_per_block <= 0) d.threads_per_block = 128;
  if (d.block_dim_limit_x <= 0) d.block_dim_limit_x = 2147483647;
  if (d.block_dim_limit_y <= 0) d.block_dim_limit_y = 65535;
  if (d.threads_per_core_limit <= 0) d.threads_per_core_limit = 2048;
  if (d.core_count <= 0) d.core_count = 132;
  return d;
}

static int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

kiln_status kiln_launch_grid_make(int64_t num_elements, int64_t vector_size, int64_t threads,
                                  const kiln_launch_device_t *dev, kiln_launch_grid_t *out) {
  memset(out, 0, sizeof *out);
  kiln_launch_device_t d = with_defaults(dev);
  if (num_elements < 0 || vector_size < 1 || threads < 1)
    return KILN_ERR_INVALID("launch grid: %lld elements, vector size %lld, %lld threads",
                            (long long)num_elements, (long long)vector_size, (long long)threads);
  int64_t work = num_elements <= 1 ? 1 : ceil_div(num_elements, vector_size);
  int64_t blocks = ceil_div(work, threads);
  int64_t by = ceil_div(blocks, d.block_dim_limit_x);
  int64_t bx = ceil_div(blocks, by);
  if (by > d.block_dim_limit_y)
    return kiln_status_make(KILN_OUT_OF_RANGE,
                            "launch grid: %lld blocks exceed the device's %lld x %lld limit",
                            (long long)blocks, (long long)d.block_dim_limit_x,
                            (long long)d.block_dim_limit_y);
  out->num_elements = num_elements;
  out->vector_size = vector_size;
  out->threads = threads;
  out->blocks_x = bx;
  out->blocks_y = by;
  return KILN_STATUS_OK;
}

kiln_status kiln_launch_grid_for_loop(const kiln_launch_device_t *dev, int64_t num_elements,
                                      bool may_vectorize, kiln_launch_grid_t *out) {
  memset(out, 0, sizeof *out);
  if (num_elements < 0) return KILN_ERR_INVALID("launch grid: negative element count");
  kiln_launch_device_t d = with_defaults(dev);
  int64_t vector = 1;
  /* XLA unrolls only when the fusion saturates the device. */
  if (may_vectorize && num_elements >= d.threads_per_core_limit * d.core_count) {
    if (num_elements % 4 == 0) vector = 4;
    else if (num_elements % 2 == 0) vector = 2;
  }
  int64_t work = num_elements <= 1 ? 1 : ceil_div(num_elements, vector);
  int64_t threads = work < d.threads_per_block ? work : d.threads_per_block;
  return kiln_launch_grid_make(num_elements, vector, threads, &d, out);
}

/* (th_x, bl_x[, bl_y])[v] with intervals and names, no results. */
static kiln_status grid_map(kiln_affine_ctx_t *ctx, const kiln_launch_grid_t *g,
                            const char *vector_name, kiln_indexing_map_t **out,
                            kiln_affine_expr_t **linear) {
  *out = NULL;
  if (!g || g->threads < 1 || g->vector_size < 1 || g->blocks_x < 1 || g->blocks_y < 1)
    return KILN_ERR_INVALID("launch grid map: malformed grid");
  bool two_d = g->blocks_y > 1;
  kiln_indexing_map_t *m = kiln_indexing_map_create(ctx, two_d ? 3 : 2, 1, 0);
  kiln_status st = kiln_indexing_map_set_name(m, KILN_INDEXING_DIM, 0, "th_x");
  if (!st) st = kiln_indexing_map_set_name(m, KILN_INDEXING_DIM, 1, "bl_x");
  if (!st && two_d) st = kiln_indexing_map_set_name(m, KILN_INDEXING_DIM, 2, "bl_y");
  if (!st) st = kiln_indexing_map_set_name(m, KILN_INDEXING_SYM, 0, vector_name ? vector_name : "v");
  if (st) {
    kiln_indexing_map_free(m);
    return st;
  }
  kiln_indexing_map_set_bounds(m, KILN_INDEXING_DIM, 0, 0, g->threads - 1);
  kiln_indexing_map_set_bounds(m, KILN_INDEXING_DIM, 1, 0, g->blocks_x - 1);
  if (two_d) kiln_indexing_map_set_bounds(m, KILN_INDEXING_DIM, 2, 0, g->blocks_y - 1);
  kiln_indexing_map_set_bounds(m, KILN_INDEXING_SYM, 0, 0, g->vector_size - 1);
  kiln_affine_expr_t *block = kiln_affine_dim(ctx, 1);
  if (two_d)
    block = kiln_affine_add(ctx, block, kiln_affine_mul_const(ctx, kiln_affine_dim(ctx, 2), g->blocks_x));
  kiln_affine_expr_t *thread = kiln_affine_add(ctx, kiln_affine_mul_const(ctx, block, g->threads),
                                               kiln_affine_dim(ctx, 0));
  /* v stays in the signature (v in [0, 0]) without vectors, but not in the results. */
  *linear = g->vector_size == 1 ? thread
                                : kiln_affine_add(ctx, kiln_affine_mul_const(ctx, thread, g->vector_size),
                                                  kiln_affine_sym(ctx, 0));
  *out = m;
  return KILN_STATUS_OK;
}

kiln_status kiln_launch_grid_linear_map(kiln_affine_ctx_t *ctx, const kiln_launch_grid_t *grid,
                                        const char *vector_name, kiln_indexing_map_t **out) {
  kiln_affine_expr_t *lin = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(grid_map(ctx, grid, vector_name, out, &lin));
  kiln_indexing_map_add_result(*out, lin);
  kiln_indexing_map_add_constraint(*out, lin, 0, grid->num_elements - 1);
  kiln_hlo_ix_simplify(*out);
  return KILN_STATUS_OK;
}

kiln_status kiln_launch_grid_thread_map(kiln_affine_ctx_t *ctx, const kiln_launch_grid_t *grid,
                                        const kiln_shape_t *shape, const char *vector_name,
                                        kiln_indexing_map_t **out) {
  *out = NULL;
  if (!shape || !kiln_shape_is_array(shape) || shape->rank > MAX_RANK)
    return KILN_ERR_INVALID("launch grid map: output must be an array of rank <= %d", MAX_RANK);
  if (!grid || kiln_shape_num_elements(shape) != grid->num_elements)
    return KILN_ERR_INVALID("launch grid map: the grid covers %lld elements, the shape %lld",
                            grid ? (long long)grid->num_elements : -1LL,
                            (long long)kiln_shape_num_elements(shape));
  kiln_affine_expr_t *lin = NULL, *idx[MAX_RANK];
  KILN_RETURN_IF_ERROR_PLAIN(grid_map(ctx, grid, vector_name, out, &lin));
  if (!kiln_hlo_indexing_delinearize_physical(ctx, shape, lin, idx)) {
    kiln_indexing_map_free(*out);
    *out = NULL;
    return KILN_ERR_INVALID("launch grid map: tiled or malformed layout");
  }
  for (int i = 0; i < shape->rank; i++) kiln_indexing_map_add_result(*out, idx[i]);
  kiln_indexing_map_add_constraint(*out, lin, 0, grid->num_elements - 1);
  kiln_hlo_ix_simplify(*out);
  return KILN_STATUS_OK;
}
