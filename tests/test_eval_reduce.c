/* Known-answer tests for the evaluator's reductions (compiler/eval/eval_reduce.c): reduce
 * (fast-path and general reducers, variadic), reduce-window, select-and-scatter.
 * Expectations are hand-computed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compiler/eval/eval.h"
#include "tests/eval_test_util.h"


#define ADD_F32 "add_f32 {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n\n"
#define MAX_F32 "max_f32 {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] maximum(x, y)\n}\n\n"

static void test_reduce_sum_over_each_dimension_set(void **state) {
  run_t r;
  run_text(&r, "HloModule m\n\n" ADD_F32
               "ENTRY e {\n"
               "  a = f32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })\n"
               "  z = f32[] constant(0)\n"
               "  r1 = f32[2] reduce(a, z), dimensions={1}, to_apply=add_f32\n"
               "  r0 = f32[3] reduce(a, z), dimensions={0}, to_apply=add_f32\n"
               "  ra = f32[] reduce(a, z), dimensions={0,1}, to_apply=add_f32\n"
               "  ten = f32[] constant(10)\n"
               "  rn = f32[2,3] reduce(a, ten), dimensions={}, to_apply=add_f32\n"
               "  ROOT t = (f32[2], f32[3], f32[], f32[2,3]) tuple(r1, r0, ra, rn)\n"
               "}\n");
  expect_f64(r.result->tuple_elements[0], 2, (double[]){6, 15});
  expect_f64(r.result->tuple_elements[1], 3, (double[]){5, 7, 9});
  expect_f64(r.result->tuple_elements[2], 1, (double[]){21});
  /* no reduced dimensions: each element is reducer(init, x) */
  expect_f64(r.result->tuple_elements[3], 6, (double[]){11, 12, 13, 14, 15, 16});
  run_done(&r);
}

/* XLA's maximum propagates NaN, also through reductions. */
static void test_reduce_max_propagates_nan(void **state) {
  run_t r;
  run_text(&r, "HloModule m\n\n" MAX_F32
               "ENTRY e {\n"
               "  a = f32[2,3] constant({ {1, nan, 3}, {-4, -5, -6} })\n"
               "  z = f32[] constant(-inf)\n"
               "  ROOT r = f32[2] reduce(a, z), dimensions={1}, to_apply=max_f32\n"
               "}\n");
  expect_f64(r.result, 2, (double[]){NAN, -4});
  run_done(&r);
}

/* Complex sums keep their imaginary part (a typed fast path once dropped it). */
static void test_reduce_complex_sum_keeps_the_imaginary_part(void **state) {
  run_t r;
  run_text(&r, "HloModule m\n\nadd {\n  a = c64[] parameter(0)\n  b = c64[] parameter(1)\n"
               "  ROOT s = c64[] add(a, b)\n}\n\n"
               "ENTRY e {\n  x = c64[3] constant({(1, 1), (2, 0), (3, -3)})\n"
               "  z = c64[] constant((0, 0))\n"
               "  ROOT r = c64[] reduce(x, z), dimensions={0}, to_apply=add\n}\n");
  double re, im;
  kiln_literal_get_c128(r.result, 0, &re, &im);
  assert_true(re == 6 && im == -2);
  run_done(&r);
}

/* The reducer runs on bf16 scalars, so every step rounds to bf16 (XLA's evaluator):
 * 0+256 = 256, 256+1 = 257 -> 256 (tie to even), again -> 256; an f32 accumulator
 * would give 258. */
static void test_reduce_bf16_rounds_after_every_step(void **state) {
  run_t r;
  run_text(&r, "HloModule m\n\n"
               "add_bf16 {\n  x = bf16[] parameter(0)\n  y = bf16[] parameter(1)\n  ROOT s = bf16[] add(x, y)\n}\n\n"
               "ENTRY e {\n"
               "  a = bf16[3] constant({256, 1, 1})\n"
               "  z = bf16[] constant(0)\n"
               "  ROOT r = bf16[] reduce(a, z), dimensions={0}, to_apply=add_bf16\n"
               "}\n");
  expect_f64(r.result, 1, (double[]){256});
  run_done(&r);
}

/* A reducer that is not one of the fast-path ops runs through the evaluator, folding in
 * row-major order with the accumulator as the first argument: acc*2 + x over {1,2,3}
 * starting from 0 gives ((0*2+1)*2+2)*2+3 = 11. */
static void test_reduce_general_reducer_folds_in_row_major_order(void **state) {
  run_t r;
  run_text(&r, "HloModule m\n\n"
               "fold {\n  acc = s32[] parameter(0)\n  x = s32[] parameter(1)\n"
               "  two = s32[] constant(2)\n  m = s32[] multiply(acc, two)\n  ROOT s = s32[] add(m, x)\n}\n\n"
               "ENTRY e {\n"
               "  a = s32[2,3] constant({ {1, 2, 3}, {1, 0, 1} })\n"
               "  z = s32[] constant(0)\n"
               "  r1 = s32[2] reduce(a, z), dimensions={1}, to_apply=fold\n"
               "  ra = s32[] reduce(a, z), dimensions={0,1}, to_apply=fold\n"
               "  ROOT t = (s32[2], s32[]) tuple(r1, ra)\n"
               "}\n");
  expect_s64(r.result->tuple_elements[0], 2, (int64_t[]){11, 5});
  /* over all six in row-major order: 1,2,3,1,0,1 -> 1,4,11,23,46,93 */
  expect_s64(r.result->tuple_elements[1], 1, (int64_t[]){93});
  run_done(&r);
}

/* Variadic reduce: argmax with ties going to the smaller index. */
static void test_variadic_reduce_argmax(void **state) {
  run_t r;
  run_text(&r, "HloModule m\n\n"
               "argmax {\n"
               "  av = f32[] parameter(0)\n  ai = s32[] parameter(1)\n"
               "  bv = f32[] parameter(2)\n  bi = s32[] parameter(3)\n"
               "  gt = pred[] compare(av, bv), direction=GT\n"
               "  eq = pred[] compare(av, bv), direction=EQ\n"
               "  lt = pred[] compare(ai, bi), direction=LT\n"
               "  tie = pred[] and(eq, lt)\n"
               "  keep = pred[] or(gt, tie)\n"
               "  v = f32[] select(keep, av, bv)\n"
               "  i = s32[] select(keep, ai, bi)\n"
               "  ROOT t = (f32[], s32[]) tuple(v, i)\n"
               "}\n\n"
               "ENTRY e {\n"
               "  a = f32[2,4] constant({ {1, 5, 3, 5}, {9, 0, 9, 2} })\n"
               "  idx = s32[2,4] iota(), iota_dimension=1\n"
               "  vi = f32[] constant(-inf)\n"
               "  ii = s32[] constant(-1)\n"
               "  ROOT r = (f32[2], s32[2]) reduce(a, idx, vi, ii), dimensions={1}, to_apply=argmax\n"
               "}\n");
  expect_f64(r.result->tuple_elements[0], 2, (double[]){5, 9});
  expect_s64(r.result->tuple_elements[1], 2, (int64_t[]){1, 0});
  run_done(&r);
}

static void test_reduce_integer_fast_paths(void **state) {
  run_t r;
  run_text(&r, "HloModule m\n\n"
               "mul {\n  x = s8[] parameter(0)\n  y = s8[] parameter(1)\n  ROOT s = s8[] multiply(x, y)\n}\n\n"
               "mn {\n  x = u32[] parameter(0)\n  y = u32[] parameter(1)\n  ROOT s = u32[] minimum(y, x)\n}\n\n"
               "any {\n  x = pred[] parameter(0)\n  y = pred[] parameter(1)\n  ROOT s = pred[] or(x, y)\n}\n\n"
               "ENTRY e {\n"
               "  a = s8[4] constant({4, 4, 4, 2})\n"
               "  one = s8[] constant(1)\n"
               "  p = s8[] reduce(a, one), dimensions={0}, to_apply=mul\n"
               "  u = u32[3] constant({4294967295, 7, 9})\n"
               "  big = u32[] constant(4294967295)\n"
               "  m = u32[] reduce(u, big), dimensions={0}, to_apply=mn\n"
               "  b = pred[2,2] constant({ {false, false}, {false, true} })\n"
               "  f = pred[] constant(false)\n"
               "  o = pred[2] reduce(b, f), dimensions={1}, to_apply=any\n"
               "  ROOT t = (s8[], u32[], pred[2]) tuple(p, m, o)\n"
               "}\n");
  expect_s64(r.result->tuple_elements[0], 1, (int64_t[]){-128}); /* 128 wraps in s8 */
  expect_u64(r.result->tuple_elements[1], 1, (uint64_t[]){7});
  expect_s64(r.result->tuple_elements[2], 2, (int64_t[]){0, 1});
  run_done(&r);
}

/* reduce-window: stride, padding (padding contributes nothing beyond the init value),
 * base dilation (holes skipped) and window dilation. */
static void test_reduce_window_strides_padding_and_dilations(void **state) {
  run_t r;
  run_text(&r, "HloModule m\n\n" ADD_F32
               "ENTRY e {\n"
               "  a = f32[4] constant({1, 2, 3, 4})\n"
               "  z = f32[] constant(0)\n"
               "  w0 = f32[3] reduce-window(a, z), window={size=2}, to_apply=add_f32\n"
               "  w1 = f32[5] reduce-window(a, z), window={size=2 pad=1_1}, to_apply=add_f32\n"
               "  w2 = f32[2] reduce-window(a, z), window={size=2 stride=2}, to_apply=add_f32\n"
               "  w3 = f32[6] reduce-window(a, z), window={size=2 lhs_dilate=2}, to_apply=add_f32\n"
               "  w4 = f32[2] reduce-window(a, z), window={size=2 rhs_dilate=2}, to_apply=add_f32\n"
               "  ten = f32[] constant(10)\n"
               "  w5 = f32[2] reduce-window(a, ten), window={size=3 stride=3 pad=0_2}, to_apply=add_f32\n"
               "  ROOT t = (f32[3], f32[5], f32[2], f32[6], f32[2], f32[2]) tuple(w0, w1, w2, w3, w4, w5)\n"
               "}\n");
  expect_f64(r.result->tuple_elements[0], 3, (double[]){3, 5, 7});
  expect_f64(r.result->tuple_elements[1], 5, (double[]){1, 3, 5, 7, 4});
  expect_f64(r.result->tuple_elements[2], 2, (double[]){3, 7});
  /* dilated base: 1 _ 2 _ 3 _ 4 */
  expect_f64(r.result->tuple_elements[3], 6, (double[]){1, 2, 2, 3, 3, 4});
  /* window taps 0 and 2: 1+3, 2+4 */
  expect_f64(r.result->tuple_elements[4], 2, (double[]){4, 6});
  /* init 10 once per window: 10+1+2+3, 10+4 */
  expect_f64(r.result->tuple_elements[5], 2, (double[]){16, 14});
  run_done(&r);
}

static void test_reduce_window_2d_max_pool(void **state) {
  run_t r;
  run_text(&r, "HloModule m\n\n" MAX_F32
               "ENTRY e {\n"
               "  a = f32[3,3] constant({ {1, 2, 3}, {4, 5, 6}, {7, 8, 9} })\n"
               "  z = f32[] constant(-inf)\n"
               "  ROOT w = f32[2,2] reduce-window(a, z), window={size=2x2}, to_apply=max_f32\n"
               "}\n");
  expect_f64(r.result, 4, (double[]){5, 6, 8, 9});
  run_done(&r);
}

/* select-and-scatter: each source value goes to the window element chosen by `select`
 * (GE keeps the first maximum) and is combined there with `scatter` (add). */
static void test_select_and_scatter_routes_to_window_max(void **state) {
  run_t r;
  run_text(&r, "HloModule m\n\n" ADD_F32
               "ge {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT c = pred[] compare(x, y), direction=GE\n}\n\n"
               "ENTRY e {\n"
               "  a = f32[4] constant({1, 5, 3, 2})\n"
               "  s = f32[2] constant({10, 20})\n"
               "  z = f32[] constant(0)\n"
               "  r0 = f32[4] select-and-scatter(a, s, z), window={size=2 stride=2}, select=ge, scatter=add_f32\n"
               "  b = f32[3] constant({1, 5, 3})\n"
               "  r1 = f32[3] select-and-scatter(b, s, z), window={size=2}, select=ge, scatter=add_f32\n"
               "  c = f32[3] constant({4, 4, 1})\n"
               "  one = f32[1] constant({7})\n"
               "  r2 = f32[3] select-and-scatter(c, one, z), window={size=3}, select=ge, scatter=add_f32\n"
               "  ROOT t = (f32[4], f32[3], f32[3]) tuple(r0, r1, r2)\n"
               "}\n");
  expect_f64(r.result->tuple_elements[0], 4, (double[]){0, 10, 20, 0});
  /* overlapping windows both pick the 5 */
  expect_f64(r.result->tuple_elements[1], 3, (double[]){0, 30, 0});
  /* ties: GE keeps the first */
  expect_f64(r.result->tuple_elements[2], 3, (double[]){7, 0, 0});
  run_done(&r);
}

static void test_reduce_with_bad_dimension_is_invalid_argument(void **state) {
  expect_error("HloModule m\n\n" ADD_F32
               "ENTRY e {\n"
               "  a = f32[2] constant({1, 2})\n"
               "  z = f32[] constant(0)\n"
               "  ROOT r = f32[] reduce(a, z), dimensions={3}, to_apply=add_f32\n"
               "}\n",
               KILN_INVALID_ARGUMENT, "reduce");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reduce_sum_over_each_dimension_set),
      cmocka_unit_test(test_reduce_max_propagates_nan),
      cmocka_unit_test(test_reduce_complex_sum_keeps_the_imaginary_part),
      cmocka_unit_test(test_reduce_bf16_rounds_after_every_step),
      cmocka_unit_test(test_reduce_general_reducer_folds_in_row_major_order),
      cmocka_unit_test(test_variadic_reduce_argmax),
      cmocka_unit_test(test_reduce_integer_fast_paths),
      cmocka_unit_test(test_reduce_window_strides_padding_and_dilations),
      cmocka_unit_test(test_reduce_window_2d_max_pool),
      cmocka_unit_test(test_select_and_scatter_routes_to_window_max),
      cmocka_unit_test(test_reduce_with_bad_dimension_is_invalid_argument),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
