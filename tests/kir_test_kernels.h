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


/* Finishes a build: returns the module, or NULL (printing the builder's error). */
static inline kiln_kir_module_t *kir_test_finish(kiln_kir_builder_t *b, kiln_kir_module_t *m) {
  kiln_status s = kiln_kir_builder_take_status(b);
  kiln_kir_builder_finish(b);
  if (s) {
    fprintf(stderr, "kir build: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    kiln_kir_module_destroy(m);
    return NULL;
  }
  return m;
}

/* `if cond { insert v into t at idx } else { t }`: the updated tensor. */
static inline kiln_kir_value_t *kir_test_insert_if(kiln_kir_builder_t *b, kiln_kir_value_t *cond,
                                                   kiln_kir_value_t *v, kiln_kir_value_t *t,
                                                   kiln_kir_value_t **idx, int n) {
  const kiln_kir_type_t *ty = t ? t->type : NULL;
  kiln_kir_op_t *op = kiln_kir_if(b, cond, &ty, 1);
  if (op) {
    kiln_kir_builder_enter(b, kiln_kir_op_region(op, 0));
    kiln_kir_value_t *ins = kiln_kir_insert(b, v, t, idx, n);
    kiln_kir_yield(b, &ins, 1);
    kiln_kir_builder_exit(b);
    kiln_kir_builder_enter(b, kiln_kir_op_region(op, 1));
    kiln_kir_yield(b, &t, 1);
    kiln_kir_builder_exit(b);
  }
  return kiln_kir_op_result(op, 0);
}

/* Row reduction out[r] = sum_c in[r, c] of f32[rows, cols] (cols a multiple of 256): one
 * block of 256 threads per row; each thread sums columns th, th + 256, ...; a shuffle-down
 * tree per warp; lane 0 of each warp writes shared[warp]; barrier; every thread reads
 * shared[lane] (lanes < 8, else 0) and reduces again with shuffles; thread 0 stores. */
static inline kiln_kir_module_t *kir_test_build_row_reduce(int64_t rows, int64_t cols) {
  kiln_kir_module_t *m = kiln_kir_module_create("row_reduce", NULL);
  int64_t in_dims[2] = {rows, cols};
  const kiln_kir_type_t *tin = kiln_kir_type_tensor(m, KILN_F32, 2, in_dims, KILN_KIR_SPACE_GLOBAL);
  const kiln_kir_type_t *tout = kiln_kir_type_tensor(m, KILN_F32, 1, &rows, KILN_KIR_SPACE_GLOBAL);
  const kiln_kir_type_t *kp[2] = {tin, tout};
  const char *kn[2] = {"in", "out"};
  kiln_kir_func_t *k = kiln_kir_func_create(m, "row_reduce", KILN_KIR_FUNC_KERNEL, kp, kn, 2, &tout, 1);
  kiln_kir_func_set_written(k, 1, true);
  int64_t block[3] = {256, 1, 1}, grid[3] = {rows, 1, 1};
  kiln_kir_func_set_launch(k, block, grid);
  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, m, kiln_kir_func_body(k));
  kiln_kir_value_t *th = kiln_kir_thread_id(&b, 0, 0, 255);
  kiln_kir_value_t *bl = kiln_kir_block_id(&b, 0, 0, rows - 1);
  int64_t sdim = 8;
  kiln_kir_value_t *shm = kiln_kir_alloc_shared(&b, KILN_F32, 1, &sdim);
  kiln_kir_value_set_name(shm, "shmem");
  char text[256];
  snprintf(text, sizeof(text),
           "(th_x, bl_x)[s] -> (bl_x, s * 256 + th_x), domain: th_x in [0, 255], bl_x in [0, %lld], "
           "s in [0, %lld]", (long long)(rows - 1), (long long)(cols / 256 - 1));
  kiln_kir_value_t *zero = kiln_kir_const_float(&b, KILN_F32, 0.0);
  kiln_kir_value_t *ids[2] = {th, bl};
  kiln_kir_op_t *loop = kiln_kir_loop(&b, kir_test_map(m, text), ids, 2, &zero, 1);
  if (loop) {
    kiln_kir_builder_enter(&b, kiln_kir_op_region(loop, 0));
    kiln_kir_value_t *ix[2] = {kiln_kir_loop_index(loop, 0), kiln_kir_loop_index(loop, 1)};
    kiln_kir_value_t *x = kiln_kir_extract(&b, kiln_kir_func_param(k, 0), ix, 2);
    kiln_kir_value_t *acc = kiln_kir_binary(&b, KILN_KIR_ADD, kiln_kir_loop_iter_arg(loop, 0), x);
    kiln_kir_yield(&b, &acc, 1);
    kiln_kir_builder_exit(&b);
  }
  kiln_kir_value_t *acc = kiln_kir_op_result(loop, 0);
  for (int off = 16; off >= 1; off /= 2)
    acc = kiln_kir_binary(&b, KILN_KIR_ADD, acc, kiln_kir_shuffle(&b, KILN_KIR_SHUFFLE_DOWN, acc, off, 32));
  kiln_kir_value_t *lane = kiln_kir_binary(&b, KILN_KIR_AND, th, kiln_kir_const_index(&b, 31));
  kiln_kir_value_t *warp = kiln_kir_apply_indexing1(
      &b, kir_test_map(m, "(th_x) -> (th_x floordiv 32), domain: th_x in [0, 255]"), &th, 1);
  kiln_kir_value_t *is_lane0 = kiln_kir_cmp(&b, KILN_KIR_CMP_EQ, lane, kiln_kir_const_index(&b, 0));
  kiln_kir_value_t *shm1 = kir_test_insert_if(&b, is_lane0, acc, shm, &warp, 1);
  kiln_kir_value_t *shm2 = kiln_kir_op_result(kiln_kir_barrier(&b, &shm1, 1), 0);
  kiln_kir_value_t *in_range = kiln_kir_cmp(&b, KILN_KIR_CMP_LT, lane, kiln_kir_const_index(&b, 8));
  const kiln_kir_type_t *f32t = kiln_kir_type_scalar(m, KILN_F32);
  kiln_kir_op_t *rd = kiln_kir_if(&b, in_range, &f32t, 1);
  if (rd) {
    kiln_kir_builder_enter(&b, kiln_kir_op_region(rd, 0));
    kiln_kir_value_t *x = kiln_kir_extract(&b, shm2, &lane, 1);
    kiln_kir_yield(&b, &x, 1);
    kiln_kir_builder_exit(&b);
    kiln_kir_builder_enter(&b, kiln_kir_op_region(rd, 1));
    kiln_kir_value_t *z = kiln_kir_const_float(&b, KILN_F32, 0.0);
    kiln_kir_yield(&b, &z, 1);
    kiln_kir_builder_exit(&b);
  }
  kiln_kir_value_t *v = kiln_kir_op_result(rd, 0);
  for (int off = 4; off >= 1; off /= 2)
    v = kiln_kir_binary(&b, KILN_KIR_ADD, v, kiln_kir_shuffle(&b, KILN_KIR_SHUFFLE_DOWN, v, off, 32));
  kiln_kir_value_t *is_t0 = kiln_kir_cmp(&b, KILN_KIR_CMP_EQ, th, kiln_kir_const_index(&b, 0));
  kiln_kir_value_t *res = kir_test_insert_if(&b, is_t0, v, kiln_kir_func_param(k, 1), &bl, 1);
  kiln_kir_return(&b, &res, 1);
  return kir_test_finish(&b, m);
}

/* The same reduction in C, in the kernel's exact summation order. */
static inline float kir_test_row_reduce_ref(const float *row, int64_t cols) {
  float lanes[256], part[8];
  for (int t = 0; t < 256; t++) {
    float acc = 0.0f;
    for (int64_t s = 0; s < cols / 256; s++) acc += row[s * 256 + t];
    lanes[t] = acc;
  }
  for (int w = 0; w < 8; w++) {
    float *l = lanes + w * 32;
    for (int off = 16; off >= 1; off /= 2) {
      float nl[32];
      for (int i = 0; i < 32; i++) nl[i] = l[i] + (i + off < 32 ? l[i + off] : l[i]);
      memcpy(l, nl, sizeof(nl));
    }
    part[w] = l[0];
  }
  float v[32];
  for (int i = 0; i < 32; i++) v[i] = i < 8 ? part[i] : 0.0f;
  for (int off = 4; off >= 1; off /= 2) {
    float nv[32];
    for (int i = 0; i < 32; i++) nv[i] = v[i] + (i + off < 32 ? v[i + off] : v[i]);
    memcpy(v, nv, sizeof(nv));
  }
  return v[0];
}

/* Transpose of f32[h, w] (multiples of 32) through a 32x33 shared tile, block (32, 8):
 * each thread moves 4 elements in, barrier, 4 elements out. */
static inline kiln_kir_module_t *kir_test_build_transpose(int64_t h, int64_t w) {
  kiln_kir_module_t *m = kiln_kir_module_create("transpose", NULL);
  int64_t in_dims[2] = {h, w}, out_dims[2] = {w, h};
  const kiln_kir_type_t *tin = kiln_kir_type_tensor(m, KILN_F32, 2, in_dims, KILN_KIR_SPACE_GLOBAL);
  const kiln_kir_type_t *tout = kiln_kir_type_tensor(m, KILN_F32, 2, out_dims, KILN_KIR_SPACE_GLOBAL);
  const kiln_kir_type_t *kp[2] = {tin, tout};
  const char *kn[2] = {"in", "out"};
  kiln_kir_func_t *k = kiln_kir_func_create(m, "transpose", KILN_KIR_FUNC_KERNEL, kp, kn, 2, &tout, 1);
  kiln_kir_func_set_written(k, 1, true);
  int64_t block[3] = {32, 8, 1}, grid[3] = {w / 32, h / 32, 1};
  kiln_kir_func_set_launch(k, block, grid);
  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, m, kiln_kir_func_body(k));
  kiln_kir_value_t *ids[4] = {kiln_kir_thread_id(&b, 0, 0, 31), kiln_kir_thread_id(&b, 1, 0, 7),
                              kiln_kir_block_id(&b, 0, 0, w / 32 - 1),
                              kiln_kir_block_id(&b, 1, 0, h / 32 - 1)};
  int64_t tile_dims[2] = {32, 33};
  kiln_kir_value_t *tile = kiln_kir_alloc_shared(&b, KILN_F32, 2, tile_dims);
  kiln_kir_value_set_name(tile, "tile");
  char text[512];
  snprintf(text, sizeof(text),
           "(tx, ty, bx, by)[s] -> (by * 32 + ty + s * 8, bx * 32 + tx, ty + s * 8, tx), domain: "
           "tx in [0, 31], ty in [0, 7], bx in [0, %lld], by in [0, %lld], s in [0, 3]",
           (long long)(w / 32 - 1), (long long)(h / 32 - 1));
  kiln_kir_op_t *ld = kiln_kir_loop(&b, kir_test_map(m, text), ids, 4, &tile, 1);
  if (ld) {
    kiln_kir_builder_enter(&b, kiln_kir_op_region(ld, 0));
    kiln_kir_value_t *src[2] = {kiln_kir_loop_index(ld, 0), kiln_kir_loop_index(ld, 1)};
    kiln_kir_value_t *dst[2] = {kiln_kir_loop_index(ld, 2), kiln_kir_loop_index(ld, 3)};
    kiln_kir_value_t *x = kiln_kir_extract(&b, kiln_kir_func_param(k, 0), src, 2);
    kiln_kir_value_t *t = kiln_kir_insert(&b, x, kiln_kir_loop_iter_arg(ld, 0), dst, 2);
    kiln_kir_yield(&b, &t, 1);
    kiln_kir_builder_exit(&b);
  }
  kiln_kir_value_t *t1 = kiln_kir_op_result(ld, 0);
  kiln_kir_value_t *t2 = kiln_kir_op_result(kiln_kir_barrier(&b, &t1, 1), 0);
  snprintf(text, sizeof(text),
           "(tx, ty, bx, by)[s] -> (bx * 32 + ty + s * 8, by * 32 + tx, tx, ty + s * 8), domain: "
           "tx in [0, 31], ty in [0, 7], bx in [0, %lld], by in [0, %lld], s in [0, 3]",
           (long long)(w / 32 - 1), (long long)(h / 32 - 1));
  kiln_kir_value_t *out = kiln_kir_func_param(k, 1);
  kiln_kir_op_t *st = kiln_kir_loop(&b, kir_test_map(m, text), ids, 4, &out, 1);
  if (st) {
    kiln_kir_builder_enter(&b, kiln_kir_op_region(st, 0));
    kiln_kir_value_t *dst[2] = {kiln_kir_loop_index(st, 0), kiln_kir_loop_index(st, 1)};
    kiln_kir_value_t *src[2] = {kiln_kir_loop_index(st, 2), kiln_kir_loop_index(st, 3)};
    kiln_kir_value_t *x = kiln_kir_extract(&b, t2, src, 2);
    kiln_kir_value_t *o = kiln_kir_insert(&b, x, kiln_kir_loop_iter_arg(st, 0), dst, 2);
    kiln_kir_yield(&b, &o, 1);
    kiln_kir_builder_exit(&b);
  }
  kiln_kir_value_t *res = kiln_kir_op_result(st, 0);
  kiln_kir_return(&b, &res, 1);
  return kir_test_finish(&b, m);
}

/* Elementwise over T[d0, d1, d2] with a subgraph called twice (so it stays a function):
 *   @f(x, y, i, j, k) -> T = x[i,j,k] * 3 - y[i,j,k]
 *   out = f(a, b) + f(b, a)   (one element per thread, no vector loop) */
static inline kiln_kir_module_t *kir_test_build_twice(kiln_elem_type_t et, const int64_t dims[3]) {
  kiln_kir_module_t *m = kiln_kir_module_create("twice", NULL);
  const kiln_kir_type_t *tt = kiln_kir_type_tensor(m, et, 3, dims, KILN_KIR_SPACE_GLOBAL);
  const kiln_kir_type_t *it = kiln_kir_type_index(m), *st = kiln_kir_type_scalar(m, et);
  const kiln_kir_type_t *kp[3] = {tt, tt, tt};
  const char *kn[3] = {"a", "b", "out"};
  kiln_kir_func_t *k = kiln_kir_func_create(m, "twice", KILN_KIR_FUNC_KERNEL, kp, kn, 3, &tt, 1);
  kiln_kir_func_set_written(k, 2, true);
  const kiln_kir_type_t *fp[5] = {tt, tt, it, it, it};
  const char *fnm[5] = {"x", "y", "i", "j", "k"};
  kiln_kir_func_t *f = kiln_kir_func_create(m, "f", KILN_KIR_FUNC_SUBGRAPH, fp, fnm, 5, &st, 1);
  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, m, kiln_kir_func_body(f));
  kiln_kir_value_t *ix[3] = {kiln_kir_func_param(f, 2), kiln_kir_func_param(f, 3), kiln_kir_func_param(f, 4)};
  kiln_kir_value_t *x = kiln_kir_extract(&b, kiln_kir_func_param(f, 0), ix, 3);
  kiln_kir_value_t *y = kiln_kir_extract(&b, kiln_kir_func_param(f, 1), ix, 3);
  kiln_kir_value_t *three = kiln_elem_type_is_float(et) ? kiln_kir_const_float(&b, et, 3.0)
                                                        : kiln_kir_const_int(&b, et, 3);
  kiln_kir_value_t *r = kiln_kir_binary(&b, KILN_KIR_SUB, kiln_kir_binary(&b, KILN_KIR_MUL, x, three), y);
  kiln_kir_return(&b, &r, 1);
  int64_t n = dims[0] * dims[1] * dims[2], blocks = (n + 127) / 128;
  int64_t block[3] = {128, 1, 1}, grid[3] = {blocks, 1, 1};
  kiln_kir_func_set_launch(k, block, grid);
  kiln_kir_builder_enter(&b, kiln_kir_func_body(k));
  kiln_kir_value_t *ids[2] = {kiln_kir_thread_id(&b, 0, 0, 127), kiln_kir_block_id(&b, 0, 0, blocks - 1)};
  kiln_kir_value_t *out = kiln_kir_func_param(k, 2);
  kiln_kir_op_t *loop = kiln_kir_loop(&b, kir_test_loop_map(m, dims, 3, 128, blocks, 1), ids, 2, &out, 1);
  if (loop) {
    kiln_kir_builder_enter(&b, kiln_kir_op_region(loop, 0));
    kiln_kir_value_t *a1[5] = {kiln_kir_func_param(k, 0), kiln_kir_func_param(k, 1),
                               kiln_kir_loop_index(loop, 0), kiln_kir_loop_index(loop, 1),
                               kiln_kir_loop_index(loop, 2)};
    kiln_kir_value_t *a2[5] = {a1[1], a1[0], a1[2], a1[3], a1[4]};
    kiln_kir_value_t *s1 = kiln_kir_op_result(kiln_kir_call(&b, f, a1, 5), 0);
    kiln_kir_value_t *s2 = kiln_kir_op_result(kiln_kir_call(&b, f, a2, 5), 0);
    kiln_kir_value_t *sum = kiln_kir_binary(&b, KILN_KIR_ADD, s1, s2);
    kiln_kir_value_t *o = kiln_kir_insert(&b, sum, kiln_kir_loop_iter_arg(loop, 0), a1 + 2, 3);
    kiln_kir_yield(&b, &o, 1);
    kiln_kir_builder_exit(&b);
  }
  kiln_kir_value_t *res = kiln_kir_op_result(loop, 0);
  kiln_kir_return(&b, &res, 1);
  return kir_test_finish(&b, m);
}

#ifdef cmocka_unit_test
#include "compiler/backend/host_jit.h"
#include "compiler/codegen/kir_pipeline.h"

/* `m` through the kernel-IR pipeline and a new host JIT (the caller destroys *jit); fails the
 * test on any error. Include after <cmocka.h>. */
static inline kiln_kir_host_kernel_t kir_test_compile_host(kiln_kir_module_t *m,
                                                           kiln_host_jit_t **jit) {
  assert_non_null(m);
  assert_null(kiln_kir_pipeline_run(m, NULL));
  assert_null(kiln_host_jit_create(NULL, jit));
  kiln_kir_host_kernel_t k;
  kiln_status s = kiln_kir_compile_host(m, *jit, &k);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  return k;
}
#endif

#endif /* KILN_TESTS_KIR_TEST_KERNELS_H_ */
