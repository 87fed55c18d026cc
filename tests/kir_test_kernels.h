/* Kernel-IR kernels shared by the test_kir_* suites, built with the builder API the way the
 * emitters build them. Static functions so each test program stays self-contained. */
#ifndef KILN_TESTS_KIR_TEST_KERNELS_H_
#define KILN_TESTS_KIR_TEST_KERNELS_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/codegen/kir.h"

/* Parses a map in the module's context and hands it to the module (borrowed by the caller). */
static inline kiln_indexing_map_t *kir_test_map(kiln_kir_module_t *m, const char *text) {
  kiln_indexing_map_t *map = NULL;
  kiln_status s = kiln_indexing_map_parse(m->ctx, text, &map);
  if (s) {
    fprintf(stderr, "bad map %s: %s\n", text, kiln_status_message(s));
    abort();
  }
  return kiln_kir_module_adopt_map(m, map);
}

/* The loop emitter's map for a row-major output `dims` covered by `threads` threads per
 * block, `blocks` blocks and `vec` elements per thread (symbol v):
 *   (th_x, bl_x)[v] -> delinearize((bl_x * threads + th_x) * vec + v), with the constraint
 *   that the linear index is < N when the grid over-covers. */
static inline kiln_indexing_map_t *kir_test_loop_map(kiln_kir_module_t *m, const int64_t *dims,
                                                     int rank, int64_t threads, int64_t blocks,
                                                     int64_t vec) {
  kiln_affine_ctx_t *c = m->ctx;
  kiln_indexing_map_t *map = kiln_indexing_map_create(c, 2, 1, 0);
  kiln_indexing_map_set_name(map, KILN_INDEXING_DIM, 0, "th_x");
  kiln_indexing_map_set_name(map, KILN_INDEXING_DIM, 1, "bl_x");
  kiln_indexing_map_set_name(map, KILN_INDEXING_SYM, 0, "v");
  kiln_indexing_map_set_bounds(map, KILN_INDEXING_DIM, 0, 0, threads - 1);
  kiln_indexing_map_set_bounds(map, KILN_INDEXING_DIM, 1, 0, blocks - 1);
  kiln_indexing_map_set_bounds(map, KILN_INDEXING_SYM, 0, 0, vec - 1);
  kiln_affine_expr_t *lin = kiln_affine_add(
      c,
      kiln_affine_mul_const(
          c, kiln_affine_add(c, kiln_affine_mul_const(c, kiln_affine_dim(c, 1), threads),
                             kiln_affine_dim(c, 0)),
          vec),
      kiln_affine_sym(c, 0));
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  kiln_affine_expr_t *idx[KILN_KIR_MAX_RANK];
  kiln_affine_delinearize(c, lin, dims, (size_t)rank, idx);
  for (int i = 0; i < rank; i++) kiln_indexing_map_add_result(map, idx[i]);
  if (threads * blocks * vec > n) kiln_indexing_map_add_constraint(map, lin, 0, n - 1);
  kiln_indexing_map_simplify(map);
  return kiln_kir_module_adopt_map(m, map);
}

/* GELU from the emitter document on bf16[d0, d1, d2] (or another float type):
 *   @gelu(%p, %i, %j, %k) -> T computes x * 0.5 * (1 + tanh(0.79785 * (x + 0.044708 x^3)))
 *   @main: loop over (th_x, bl_x)[v] calling @gelu and inserting into the output. */
static inline kiln_kir_module_t *kir_test_build_gelu(kiln_elem_type_t et, const int64_t dims[3],
                                                     int64_t vec) {
  kiln_kir_module_t *m = kiln_kir_module_create("gelu", NULL);
  const kiln_kir_type_t *tt = kiln_kir_type_tensor(m, et, 3, dims, KILN_KIR_SPACE_GLOBAL);
  const kiln_kir_type_t *it = kiln_kir_type_index(m);
  const kiln_kir_type_t *st = kiln_kir_type_scalar(m, et);
  const kiln_kir_type_t *kp[2] = {tt, tt};
  const char *kn[2] = {"input", "output"};
  kiln_kir_func_t *kernel = kiln_kir_func_create(m, "main", KILN_KIR_FUNC_KERNEL, kp, kn, 2, &tt, 1);
  kiln_kir_func_set_written(kernel, 1, true);
  const kiln_kir_type_t *gp[4] = {tt, it, it, it};
  const char *gn[4] = {"arg0", "i", "j", "k"};
  kiln_kir_func_t *gelu = kiln_kir_func_create(m, "gelu", KILN_KIR_FUNC_SUBGRAPH, gp, gn, 4, &st, 1);

  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, m, kiln_kir_func_body(gelu));
  kiln_kir_value_t *c05 = kiln_kir_const_float(&b, et, 0.5);
  kiln_kir_value_t *c1 = kiln_kir_const_float(&b, et, 1.0);
  kiln_kir_value_t *c2 = kiln_kir_const_float(&b, et, 0.79785);
  kiln_kir_value_t *c3 = kiln_kir_const_float(&b, et, 0.044708);
  kiln_kir_value_t *idx[3] = {kiln_kir_func_param(gelu, 1), kiln_kir_func_param(gelu, 2),
                              kiln_kir_func_param(gelu, 3)};
  kiln_kir_value_t *x = kiln_kir_extract(&b, kiln_kir_func_param(gelu, 0), idx, 3);
  kiln_kir_value_t *sq = kiln_kir_binary(&b, KILN_KIR_MUL, x, x);
  kiln_kir_value_t *cube = kiln_kir_binary(&b, KILN_KIR_MUL, sq, x);
  kiln_kir_value_t *m3 = kiln_kir_binary(&b, KILN_KIR_MUL, cube, c3);
  kiln_kir_value_t *a1 = kiln_kir_binary(&b, KILN_KIR_ADD, x, m3);
  kiln_kir_value_t *m2 = kiln_kir_binary(&b, KILN_KIR_MUL, a1, c2);
  kiln_kir_value_t *th = kiln_kir_unary(&b, KILN_KIR_TANH, m2);
  kiln_kir_value_t *a0 = kiln_kir_binary(&b, KILN_KIR_ADD, th, c1);
  kiln_kir_value_t *m1 = kiln_kir_binary(&b, KILN_KIR_MUL, a0, c05);
  kiln_kir_value_t *m0 = kiln_kir_binary(&b, KILN_KIR_MUL, x, m1);
  kiln_kir_return(&b, &m0, 1);

  int64_t n = dims[0] * dims[1] * dims[2];
  int64_t threads = 128, blocks = (n + threads * vec - 1) / (threads * vec);
  int64_t block[3] = {threads, 1, 1}, grid[3] = {blocks, 1, 1};
  kiln_kir_func_set_launch(kernel, block, grid);
  kiln_kir_builder_enter(&b, kiln_kir_func_body(kernel));
  kiln_kir_value_t *ids[2] = {kiln_kir_thread_id(&b, 0, 0, threads - 1),
                              kiln_kir_block_id(&b, 0, 0, blocks - 1)};
  kiln_indexing_map_t *map = kir_test_loop_map(m, dims, 3, threads, blocks, vec);
  kiln_kir_value_t *out = kiln_kir_func_param(kernel, 1);
  kiln_kir_op_t *loop = kiln_kir_loop(&b, map, ids, 2, &out, 1);
  if (loop) {
    kiln_kir_value_set_name(kiln_kir_loop_iter_arg(loop, 0), "iter");
    for (int i = 0; i < 3; i++) {
      char nm[8];
      snprintf(nm, sizeof(nm), "dim%d", i);
      kiln_kir_value_set_name(kiln_kir_loop_index(loop, (size_t)i), nm);
    }
    kiln_kir_builder_enter(&b, kiln_kir_op_region(loop, 0));
    kiln_kir_value_t *args[4] = {kiln_kir_func_param(kernel, 0), kiln_kir_loop_index(loop, 0),
                                 kiln_kir_loop_index(loop, 1), kiln_kir_loop_index(loop, 2)};
    kiln_kir_op_t *call = kiln_kir_call(&b, gelu, args, 4);
    kiln_kir_value_t *ins = kiln_kir_insert(&b, kiln_kir_op_result(call, 0),
                                            kiln_kir_loop_iter_arg(loop, 0), args + 1, 3);
    kiln_kir_value_set_name(ins, "inserted");
    kiln_kir_yield(&b, &ins, 1);
    kiln_kir_builder_exit(&b);
  }
  kiln_kir_value_t *res = kiln_kir_op_result(loop, 0);
  kiln_kir_return(&b, &res, 1);
  kiln_status s = kiln_kir_builder_take_status(&b);
  kiln_kir_builder_finish(&b);
  if (s) {
    fprintf(stderr, "gelu build: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    kiln_kir_module_destroy(m);
    return NULL;
  }
  return m;
}

#endif /* KILN_TESTS_KIR_TEST_KERNELS_H_ */
