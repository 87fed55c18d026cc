/* Known-answer tests for the evaluator's gather and scatter (compiler/eval/eval_gather_scatter.c).
 * Each test is a small HLO module with constant inputs; expectations are hand-computed. */
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


static void test_gather_rows(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = f32[3,3] constant({ {1, 2, 3}, {4, 5, 6}, {7, 8, 9} })\n"
           "  i = s32[2] constant({0, 2})\n"
           "  ROOT g = f32[2,3] gather(x, i), offset_dims={1}, collapsed_slice_dims={0},"
           " start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}\n"
           "}\n");
  expect_f64_near(r.result, 6, (double[]){1, 2, 3, 7, 8, 9}, 0);
  run_done(&r);
}

static void test_gather_clamps_start_so_slice_fits(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = f32[3,3] constant({ {1, 2, 3}, {4, 5, 6}, {7, 8, 9} })\n"
           "  i = s32[2,2] constant({ {2, 7}, {-5, 1} })\n"
           "  ROOT g = f32[2,2,2] gather(x, i), offset_dims={1,2}, collapsed_slice_dims={},"
           " start_index_map={0,1}, index_vector_dim=1, slice_sizes={2,2}\n"
           "}\n");
  /* (2,7) clamps to (1,1); (-5,1) clamps to (0,1) */
  expect_f64_near(r.result, 8, (double[]){5, 6, 8, 9, 2, 3, 5, 6}, 0);
  run_done(&r);
}

static void test_gather_implicit_index_vector_dim(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = s32[3] constant({10, 20, 30})\n"
           "  i = u8[2,2] constant({ {1, 0}, {2, 2} })\n"
           "  ROOT g = s32[2,2] gather(x, i), offset_dims={}, collapsed_slice_dims={0},"
           " start_index_map={0}, index_vector_dim=2, slice_sizes={1}\n"
           "}\n");
  expect_f64_near(r.result, 4, (double[]){20, 10, 30, 30}, 0);
  run_done(&r);
}

static void test_gather_batching_dims(void **state) {
  run_t r;
  /* batch b picks column i[b] of row b */
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = f32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })\n"
           "  i = s32[2,1] constant({ {2}, {0} })\n"
           "  ROOT g = f32[2] gather(x, i), offset_dims={}, collapsed_slice_dims={1},"
           " start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0},"
           " index_vector_dim=1, slice_sizes={1,1}\n"
           "}\n");
  expect_f64_near(r.result, 2, (double[]){3, 4}, 0);
  run_done(&r);
}

static void test_scatter_add_duplicates_and_skips_out_of_bounds(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "add {\n"
           "  p0 = f32[] parameter(0)\n"
           "  p1 = f32[] parameter(1)\n"
           "  ROOT s = f32[] add(p0, p1)\n"
           "}\n"
           "ENTRY e {\n"
           "  x = f32[3] constant({0, 0, 0})\n"
           "  i = s32[5,1] constant({ {0}, {2}, {0}, {5}, {-1} })\n"
           "  u = f32[5] constant({1, 2, 3, 4, 5})\n"
           "  ROOT s = f32[3] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0},"
           " scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n"
           "}\n");
  expect_f64_near(r.result, 3, (double[]){4, 0, 2}, 0);
  run_done(&r);
}

static void test_scatter_skips_whole_window_that_does_not_fit(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "overwrite {\n"
           "  p0 = f32[] parameter(0)\n"
           "  ROOT p1 = f32[] parameter(1)\n"
           "}\n"
           "ENTRY e {\n"
           "  x = f32[4] constant({0, 0, 0, 0})\n"
           "  i = s32[2,1] constant({ {1}, {3} })\n"
           "  u = f32[2,2] constant({ {1, 2}, {3, 4} })\n"
           "  ROOT s = f32[4] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={},"
           " scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=overwrite\n"
           "}\n");
  /* the window at 3 would cover 3..4: skipped entirely, 3 is not written */
  expect_f64_near(r.result, 4, (double[]){0, 1, 2, 0}, 0);
  run_done(&r);
}

static void test_scatter_general_combiner_applies_in_update_order(void **state) {
  run_t r;
  /* subtract is not a fast-path reducer: the computation is called for each update */
  run_text(&r,
           "HloModule m\n"
           "sub {\n"
           "  p0 = s32[] parameter(0)\n"
           "  p1 = s32[] parameter(1)\n"
           "  ROOT s = s32[] subtract(p0, p1)\n"
           "}\n"
           "ENTRY e {\n"
           "  x = s32[3] constant({10, 10, 10})\n"
           "  i = s32[2,1] constant({ {0}, {0} })\n"
           "  u = s32[2] constant({1, 2})\n"
           "  ROOT s = s32[3] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0},"
           " scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=sub\n"
           "}\n");
  expect_f64_near(r.result, 3, (double[]){7, 10, 10}, 0);
  run_done(&r);
}

static void test_scatter_variadic(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "comb {\n"
           "  a0 = f32[] parameter(0)\n"
           "  a1 = s32[] parameter(1)\n"
           "  b0 = f32[] parameter(2)\n"
           "  b1 = s32[] parameter(3)\n"
           "  s = f32[] add(a0, b0)\n"
           "  m = s32[] maximum(a1, b1)\n"
           "  ROOT t = (f32[], s32[]) tuple(s, m)\n"
           "}\n"
           "ENTRY e {\n"
           "  x = f32[2] constant({1, 1})\n"
           "  y = s32[2] constant({0, 0})\n"
           "  i = s32[3,1] constant({ {1}, {1}, {0} })\n"
           "  u = f32[3] constant({2, 3, 4})\n"
           "  v = s32[3] constant({7, 5, -1})\n"
           "  ROOT s = (f32[2], s32[2]) scatter(x, y, i, u, v), update_window_dims={},"
           " inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,"
           " to_apply=comb\n"
           "}\n");
  expect_f64_near(r.result->tuple_elements[0], 2, (double[]){5, 6}, 0);
  expect_f64_near(r.result->tuple_elements[1], 2, (double[]){0, 7}, 0);
  run_done(&r);
}

static void test_scatter_batching_dims(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "overwrite {\n"
           "  p0 = f32[] parameter(0)\n"
           "  ROOT p1 = f32[] parameter(1)\n"
           "}\n"
           "ENTRY e {\n"
           "  x = f32[2,3] constant({ {0, 0, 0}, {0, 0, 0} })\n"
           "  i = s32[2,1] constant({ {1}, {2} })\n"
           "  u = f32[2] constant({5, 6})\n"
           "  ROOT s = f32[2,3] scatter(x, i, u), update_window_dims={}, inserted_window_dims={1},"
           " scatter_dims_to_operand_dims={1}, input_batching_dims={0},"
           " scatter_indices_batching_dims={0}, index_vector_dim=1, to_apply=overwrite\n"
           "}\n");
  expect_f64_near(r.result, 6, (double[]){0, 5, 0, 0, 0, 6}, 0);
  run_done(&r);
}

static void test_scatter_window_with_max(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "mx {\n"
           "  p0 = s32[] parameter(0)\n"
           "  p1 = s32[] parameter(1)\n"
           "  ROOT m = s32[] maximum(p0, p1)\n"
           "}\n"
           "ENTRY e {\n"
           "  x = s32[3,3] constant({ {5, 5, 5}, {5, 5, 5}, {5, 5, 5} })\n"
           "  i = s32[1,2] constant({ {1, 0} })\n"
           "  u = s32[1,2,3] constant({ { {1, 9, 2}, {7, 3, 8} } })\n"
           "  ROOT s = s32[3,3] scatter(x, i, u), update_window_dims={1,2}, inserted_window_dims={},"
           " scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=mx\n"
           "}\n");
  expect_f64_near(r.result, 9, (double[]){5, 5, 5, 5, 9, 5, 7, 5, 8}, 0);
  run_done(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gather_rows),
      cmocka_unit_test(test_gather_clamps_start_so_slice_fits),
      cmocka_unit_test(test_gather_implicit_index_vector_dim),
      cmocka_unit_test(test_gather_batching_dims),
      cmocka_unit_test(test_scatter_add_duplicates_and_skips_out_of_bounds),
      cmocka_unit_test(test_scatter_skips_whole_window_that_does_not_fit),
      cmocka_unit_test(test_scatter_general_combiner_applies_in_update_order),
      cmocka_unit_test(test_scatter_variadic),
      cmocka_unit_test(test_scatter_batching_dims),
      cmocka_unit_test(test_scatter_window_with_max),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
