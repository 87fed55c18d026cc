/* Known-answer tests for the evaluator's sort and topk (compiler/eval/eval_sort.c).
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


static void test_sort_ascending_f32(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "lt {\n"
           "  a = f32[] parameter(0)\n"
           "  b = f32[] parameter(1)\n"
           "  ROOT c = pred[] compare(a, b), direction=LT\n"
           "}\n"
           "ENTRY e {\n"
           "  x = f32[5] constant({3, 1, 2, -7, 0.5})\n"
           "  ROOT s = f32[5] sort(x), dimensions={0}, to_apply=lt\n"
           "}\n");
  expect_f64_near(r.result, 5, (double[]){-7, 0.5, 1, 2, 3}, 0);
  run_done(&r);
}

static void test_sort_stable_keeps_equal_keys_in_order(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "lt {\n"
           "  a = s32[] parameter(0)\n"
           "  b = s32[] parameter(1)\n"
           "  c = s32[] parameter(2)\n"
           "  d = s32[] parameter(3)\n"
           "  ROOT r = pred[] compare(a, b), direction=LT\n"
           "}\n"
           "ENTRY e {\n"
           "  k = s32[6] constant({2, 1, 2, 1, 0, 2})\n"
           "  v = s32[6] constant({0, 1, 2, 3, 4, 5})\n"
           "  ROOT s = (s32[6], s32[6]) sort(k, v), dimensions={0}, is_stable=true, to_apply=lt\n"
           "}\n");
  expect_f64_near(r.result->tuple_elements[0], 6, (double[]){0, 1, 1, 2, 2, 2}, 0);
  expect_f64_near(r.result->tuple_elements[1], 6, (double[]){4, 1, 3, 0, 2, 5}, 0);
  run_done(&r);
}

static void test_sort_key_from_second_operand_and_swapped_params(void **state) {
  run_t r;
  /* compare(p3, p2) with LT: operand 1 sorted descending */
  run_text(&r,
           "HloModule m\n"
           "cmp {\n"
           "  a = s32[] parameter(0)\n"
           "  b = s32[] parameter(1)\n"
           "  c = u32[] parameter(2)\n"
           "  d = u32[] parameter(3)\n"
           "  ROOT r = pred[] compare(d, c), direction=LT\n"
           "}\n"
           "ENTRY e {\n"
           "  k = s32[4] constant({0, 1, 2, 3})\n"
           "  v = u32[4] constant({5, 4294967295, 7, 1})\n"
           "  ROOT s = (s32[4], u32[4]) sort(k, v), dimensions={0}, to_apply=cmp\n"
           "}\n");
  expect_f64_near(r.result->tuple_elements[0], 4, (double[]){1, 2, 0, 3}, 0);
  run_done(&r);
}

static void test_sort_descending_totalorder_places_nan_and_signed_zeros(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "gt {\n"
           "  a = f32[] parameter(0)\n"
           "  b = f32[] parameter(1)\n"
           "  ROOT c = pred[] compare(a, b), direction=GT, type=TOTALORDER\n"
           "}\n"
           "ENTRY e {\n"
           "  x = f32[7] constant({1, nan, -inf, 3, -0, 0, -nan})\n"
           "  ROOT s = f32[7] sort(x), dimensions={0}, is_stable=true, to_apply=gt\n"
           "}\n");
  const kiln_literal_t *l = r.result;
  double v[7];
  for (int i = 0; i < 7; i++) v[i] = kiln_literal_get_f64(l, i);
  assert_true(isnan(v[0]) && !signbit(v[0]));
  assert_true(v[1] == 3 && v[2] == 1);
  assert_true(v[3] == 0 && !signbit(v[3]));
  assert_true(v[4] == 0 && signbit(v[4]));
  assert_true(isinf(v[5]) && v[5] < 0);
  assert_true(isnan(v[6]) && signbit(v[6]));
  run_done(&r);
}

static void test_sort_general_comparator_is_called(void **state) {
  run_t r;
  /* not a bare compare of parameters: sorts by |x| through the evaluator */
  run_text(&r,
           "HloModule m\n"
           "absless {\n"
           "  a = f32[] parameter(0)\n"
           "  b = f32[] parameter(1)\n"
           "  aa = f32[] abs(a)\n"
           "  ab = f32[] abs(b)\n"
           "  ROOT c = pred[] compare(aa, ab), direction=LT\n"
           "}\n"
           "ENTRY e {\n"
           "  x = f32[4] constant({-3, 1, -2, 0})\n"
           "  ROOT s = f32[4] sort(x), dimensions={0}, is_stable=true, to_apply=absless\n"
           "}\n");
  expect_f64_near(r.result, 4, (double[]){0, 1, -2, -3}, 0);
  run_done(&r);
}

/* JAX's comparator: canonicalize -0 -> 0 and NaN -> nan, then LT under TOTALORDER. `nanc`
 * is the NaN constant's instruction text; wrapping it in a copy defeats the pattern match
 * so the same sort runs through the called comparator. */
static void run_jax_sort(run_t *r, bool through_copy) {
  char text[2048];
  snprintf(text, sizeof text,
           "HloModule m\n"
           "cmp {\n"
           "  p0 = f32[] parameter(0)\n"
           "  p1 = f32[] parameter(1)\n"
           "  p2 = s32[] parameter(2)\n"
           "  p3 = s32[] parameter(3)\n"
           "  nan0 = f32[] constant(nan)\n"
           "  nan = f32[] %s\n"
           "  zero = f32[] constant(0)\n"
           "  ne0 = pred[] compare(p0, p0), direction=NE\n"
           "  eq0 = pred[] compare(p0, zero), direction=EQ\n"
           "  s0 = f32[] select(eq0, zero, p0)\n"
           "  c0 = f32[] select(ne0, nan, s0)\n"
           "  ne1 = pred[] compare(p1, p1), direction=NE\n"
           "  eq1 = pred[] compare(p1, zero), direction=EQ\n"
           "  s1 = f32[] select(eq1, zero, p1)\n"
           "  c1 = f32[] select(ne1, nan, s1)\n"
           "  ROOT lt = pred[] compare(c0, c1), direction=LT, type=TOTALORDER\n"
           "}\n"
           "ENTRY e {\n"
           "  x = f32[6] constant({nan, 0, -0, -1, -nan, 2})\n"
           "  i = s32[6] iota(), iota_dimension=0\n"
           "  ROOT s = (f32[6], s32[6]) sort(x, i), dimensions={0}, is_stable=true, to_apply=cmp\n"
           "}\n",
           through_copy ? "copy(nan0)" : "constant(nan)");
  run_text(r, text);
}

static void test_sort_jax_canonicalizing_comparator_fast_path_matches_called(void **state) {
  run_t fast, called;
  run_jax_sort(&fast, false);
  run_jax_sort(&called, true);
  /* -1 < 0 == -0 < 2 < nan == -nan (canonical nan is positive); ties keep input order */
  expect_f64_near(fast.result->tuple_elements[1], 6, (double[]){3, 1, 2, 5, 0, 4}, 0);
  expect_f64_near(called.result->tuple_elements[1], 6, (double[]){3, 1, 2, 5, 0, 4}, 0);
  run_done(&fast);
  run_done(&called);
}

static void test_sort_along_leading_dim(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "lt {\n"
           "  a = s32[] parameter(0)\n"
           "  b = s32[] parameter(1)\n"
           "  ROOT c = pred[] compare(a, b), direction=LT\n"
           "}\n"
           "ENTRY e {\n"
           "  x = s32[3,2] constant({ {3, 1}, {1, 2}, {2, 0} })\n"
           "  ROOT s = s32[3,2] sort(x), dimensions={0}, to_apply=lt\n"
           "}\n");
  expect_f64_near(r.result, 6, (double[]){1, 0, 2, 1, 3, 2}, 0);
  run_done(&r);
}

static void test_topk_largest_with_ties_by_lower_index(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = f32[2,4] constant({ {1, 3, 2, 3}, {4, 1, 0, 6} })\n"
           "  ROOT t = (f32[2,2], s32[2,2]) topk(x), k=2, largest=true\n"
           "}\n");
  expect_f64_near(r.result->tuple_elements[0], 4, (double[]){3, 3, 6, 4}, 0);
  expect_f64_near(r.result->tuple_elements[1], 4, (double[]){1, 3, 3, 0}, 0);
  run_done(&r);
}

static void test_topk_bf16_full_sort(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = bf16[5] constant({0.5, -1, 8, 2, 2})\n"
           "  ROOT t = (bf16[5], s32[5]) topk(x), k=5, largest=true\n"
           "}\n");
  expect_f64_near(r.result->tuple_elements[0], 5, (double[]){8, 2, 2, 0.5, -1}, 0);
  expect_f64_near(r.result->tuple_elements[1], 5, (double[]){2, 3, 4, 0, 1}, 0);
  run_done(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sort_ascending_f32),
      cmocka_unit_test(test_sort_stable_keeps_equal_keys_in_order),
      cmocka_unit_test(test_sort_key_from_second_operand_and_swapped_params),
      cmocka_unit_test(test_sort_descending_totalorder_places_nan_and_signed_zeros),
      cmocka_unit_test(test_sort_general_comparator_is_called),
      cmocka_unit_test(test_sort_jax_canonicalizing_comparator_fast_path_matches_called),
      cmocka_unit_test(test_sort_along_leading_dim),
      cmocka_unit_test(test_topk_largest_with_ties_by_lower_index),
      cmocka_unit_test(test_topk_bf16_full_sort),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
