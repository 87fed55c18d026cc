/* Known-answer tests for the evaluator's data-movement opcodes (compiler/eval/eval_data.c):
 * broadcast, reshape, transpose, bitcast, slice, dynamic-slice, dynamic-update-slice,
 * concatenate, pad, reverse, iota, copy. Expectations are hand-computed. */
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


static void test_broadcast_maps_operand_dims(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = s32[2] constant({1, 2})\n"
                      "  b0 = s32[2,3] broadcast(a), dimensions={0}\n"
                      "  c = s32[3] constant({7, 8, 9})\n"
                      "  b1 = s32[2,3] broadcast(c), dimensions={1}\n"
                      "  s = s32[] constant(5)\n"
                      "  bs = s32[2,2] broadcast(s), dimensions={}\n"
                      "  ROOT t = (s32[2,3], s32[2,3], s32[2,2]) tuple(b0, b1, bs)\n"));
  expect_s64(r.result->tuple_elements[0], 6, (int64_t[]){1, 1, 1, 2, 2, 2});
  expect_s64(r.result->tuple_elements[1], 6, (int64_t[]){7, 8, 9, 7, 8, 9});
  expect_s64(r.result->tuple_elements[2], 4, (int64_t[]){5, 5, 5, 5});
  run_done(&r);
}

static void test_reshape_keeps_row_major_order(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = s32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })\n"
                      "  ROOT b = s32[3,1,2] reshape(a)\n"));
  expect_s64(r.result, 6, (int64_t[]){1, 2, 3, 4, 5, 6});
  assert_int_equal(r.result->shape->rank, 3);
  run_done(&r);
}

static void test_transpose_permutes_dimensions(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = s32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })\n"
                      "  t2 = s32[3,2] transpose(a), dimensions={1,0}\n"
                      "  b = s32[2,1,3] constant({ { {1, 2, 3} }, { {4, 5, 6} } })\n"
                      "  t3 = s32[3,2,1] transpose(b), dimensions={2,0,1}\n"
                      "  ROOT t = (s32[3,2], s32[3,2,1]) tuple(t2, t3)\n"));
  expect_s64(r.result->tuple_elements[0], 6, (int64_t[]){1, 4, 2, 5, 3, 6});
  expect_s64(r.result->tuple_elements[1], 6, (int64_t[]){1, 4, 2, 5, 3, 6});
  run_done(&r);
}

/* Transposes large enough for the tiled copy (partial tiles at every edge, 1- to 8-byte
 * elements, ranks 2 to 5, the partner dimension anywhere): every output element is the input
 * element its index maps to. The input counts up from 0 (iota, converted: s8 and u16 wrap). */
static void test_large_transposes_keep_every_element(void **state) {
  static const struct {
    const char *type;
    int rank;
    int64_t dims[5];
    int perm[5];
  } cases[] = {
      {"s8", 2, {37, 70}, {1, 0}},
      {"u16", 4, {5, 33, 3, 40}, {2, 0, 3, 1}},
      {"s32", 2, {64, 65}, {1, 0}},
      {"f64", 3, {3, 34, 35}, {0, 2, 1}},
      {"s32", 5, {2, 3, 4, 5, 6}, {4, 3, 2, 1, 0}},
      {"s32", 3, {40, 2, 33}, {2, 1, 0}},
  };
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    int rank = cases[c].rank;
    const int *perm = cases[c].perm;
    const int64_t *in = cases[c].dims;
    int64_t n = 1, out[5];
    char in_dims[64] = "", out_dims[64] = "", perm_text[32] = "";
    for (int d = 0; d < rank; d++) {
      n *= in[d];
      out[d] = in[perm[d]];
      const char *sep = d ? "," : "";
      snprintf(in_dims + strlen(in_dims), sizeof(in_dims) - strlen(in_dims), "%s%lld", sep,
               (long long)in[d]);
      snprintf(out_dims + strlen(out_dims), sizeof(out_dims) - strlen(out_dims), "%s%lld", sep,
               (long long)out[d]);
      snprintf(perm_text + strlen(perm_text), sizeof(perm_text) - strlen(perm_text), "%s%d", sep,
               perm[d]);
    }
    const char *t = cases[c].type;
    char text[1024];
    snprintf(text, sizeof(text),
             MODULE("  a = s32[%lld] iota(), iota_dimension=0\n"
                    "  c = %s[%lld] convert(a)\n"
                    "  b = %s[%s] reshape(c)\n"
                    "  ROOT t = %s[%s] transpose(b), dimensions={%s}\n"),
             (long long)n, t, (long long)n, t, in_dims, t, out_dims, perm_text);
    run_t r;
    run_text(&r, text);
    int64_t *want = test_malloc((size_t)n * sizeof(int64_t));
    for (int64_t o = 0; o < n; o++) {
      int64_t idx[5], rest = o, lin = 0;
      for (int d = rank - 1; d >= 0; d--) {
        idx[d] = rest % out[d];
        rest /= out[d];
      }
      int64_t src[5];
      for (int d = 0; d < rank; d++) src[perm[d]] = idx[d];
      for (int d = 0; d < rank; d++) lin = lin * in[d] + src[d];
      want[o] = !strcmp(t, "s8") ? (int8_t)lin : !strcmp(t, "u16") ? (uint16_t)lin : lin;
    }
    expect_s64(r.result, (int)n, want);
    test_free(want);
    run_done(&r);
  }
}

/* A bitcast reinterprets the physical layout: f32[2,3]{1,0} holds 1..6 in memory order;
 * read as f32[3,2]{0,1} (dimension 0 minor) element [i][j] is memory[j*3 + i]. With
 * default layouts a bitcast is a reshape. */
static void test_bitcast_follows_physical_layouts(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = f32[2,3]{1,0} constant({ {1, 2, 3}, {4, 5, 6} })\n"
                      "  b = f32[3,2]{0,1} bitcast(a)\n"
                      "  c = f32[6]{0} bitcast(a)\n"
                      "  d = f32[3,2]{0,1} constant({ {1, 2}, {3, 4}, {5, 6} })\n"
                      "  e = f32[6]{0} bitcast(d)\n"
                      "  ROOT t = (f32[3,2]{0,1}, f32[6]{0}, f32[6]{0}) tuple(b, c, e)\n"));
  expect_f64(r.result->tuple_elements[0], 6, (double[]){1, 4, 2, 5, 3, 6});
  expect_f64(r.result->tuple_elements[1], 6, (double[]){1, 2, 3, 4, 5, 6});
  /* d in memory (dim 0 minor): d[0][0], d[1][0], d[2][0], d[0][1], ... = 1, 3, 5, 2, 4, 6 */
  expect_f64(r.result->tuple_elements[2], 6, (double[]){1, 3, 5, 2, 4, 6});
  run_done(&r);
}

static void test_slice_with_strides(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = s32[10] iota(), iota_dimension=0\n"
                      "  s = s32[3] slice(a), slice={[1:9:3]}\n"
                      "  b = s32[3,4] iota(), iota_dimension=1\n"
                      "  s2 = s32[2,2] slice(b), slice={[1:3], [0:4:2]}\n"
                      "  ROOT t = (s32[3], s32[2,2]) tuple(s, s2)\n"));
  expect_s64(r.result->tuple_elements[0], 3, (int64_t[]){1, 4, 7});
  expect_s64(r.result->tuple_elements[1], 4, (int64_t[]){0, 2, 0, 2});
  run_done(&r);
}

/* XLA clamps dynamic-slice starts into [0, dim - size]; start indices may be signed or
 * unsigned of any width. */
static void test_dynamic_slice_clamps_start_indices(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = s32[5] constant({0, 1, 2, 3, 4})\n"
                      "  i4 = s32[] constant(4)\n"
                      "  d0 = s32[3] dynamic-slice(a, i4), dynamic_slice_sizes={3}\n"
                      "  im = s32[] constant(-3)\n"
                      "  d1 = s32[3] dynamic-slice(a, im), dynamic_slice_sizes={3}\n"
                      "  iu = u8[] constant(255)\n"
                      "  d2 = s32[3] dynamic-slice(a, iu), dynamic_slice_sizes={3}\n"
                      "  i1 = s64[] constant(1)\n"
                      "  d3 = s32[3] dynamic-slice(a, i1), dynamic_slice_sizes={3}\n"
                      "  b = s32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })\n"
                      "  r1 = u32[] constant(1)\n"
                      "  r9 = s16[] constant(9)\n"
                      "  d4 = s32[1,2] dynamic-slice(b, r1, r9), dynamic_slice_sizes={1,2}\n"
                      "  ROOT t = (s32[3], s32[3], s32[3], s32[3], s32[1,2]) tuple(d0, d1, d2, d3, d4)\n"));
  expect_s64(r.result->tuple_elements[0], 3, (int64_t[]){2, 3, 4});
  expect_s64(r.result->tuple_elements[1], 3, (int64_t[]){0, 1, 2});
  expect_s64(r.result->tuple_elements[2], 3, (int64_t[]){2, 3, 4});
  expect_s64(r.result->tuple_elements[3], 3, (int64_t[]){1, 2, 3});
  expect_s64(r.result->tuple_elements[4], 2, (int64_t[]){5, 6});
  run_done(&r);
}

/* dynamic-update-slice clamps its starts the same way so the update fits. */
static void test_dynamic_update_slice_clamps_start_indices(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = s32[5] constant({0, 0, 0, 0, 0})\n"
                      "  u = s32[2] constant({7, 8})\n"
                      "  i = s32[] constant(10)\n"
                      "  d0 = s32[5] dynamic-update-slice(a, u, i)\n"
                      "  j = s32[] constant(-1)\n"
                      "  d1 = s32[5] dynamic-update-slice(a, u, j)\n"
                      "  k = s32[] constant(2)\n"
                      "  d2 = s32[5] dynamic-update-slice(a, u, k)\n"
                      "  b = s32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })\n"
                      "  v = s32[1,2] constant({ {0, 0} })\n"
                      "  one = s32[] constant(1)\n"
                      "  d3 = s32[2,3] dynamic-update-slice(b, v, one, one)\n"
                      "  ROOT t = (s32[5], s32[5], s32[5], s32[2,3]) tuple(d0, d1, d2, d3)\n"));
  expect_s64(r.result->tuple_elements[0], 5, (int64_t[]){0, 0, 0, 7, 8});
  expect_s64(r.result->tuple_elements[1], 5, (int64_t[]){7, 8, 0, 0, 0});
  expect_s64(r.result->tuple_elements[2], 5, (int64_t[]){0, 0, 7, 8, 0});
  expect_s64(r.result->tuple_elements[3], 6, (int64_t[]){1, 2, 3, 4, 0, 0});
  run_done(&r);
}

static void test_concatenate_along_inner_and_outer_dims(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = s32[2,1] constant({ {1}, {2} })\n"
                      "  b = s32[2,2] constant({ {3, 4}, {5, 6} })\n"
                      "  c1 = s32[2,3] concatenate(a, b), dimensions={1}\n"
                      "  c0 = s32[4,2] concatenate(b, b), dimensions={0}\n"
                      "  ROOT t = (s32[2,3], s32[4,2]) tuple(c1, c0)\n"));
  expect_s64(r.result->tuple_elements[0], 6, (int64_t[]){1, 3, 4, 2, 5, 6});
  expect_s64(r.result->tuple_elements[1], 8, (int64_t[]){3, 4, 5, 6, 3, 4, 5, 6});
  run_done(&r);
}

/* XLA pad: result dim = lo + hi + n + (n-1)*interior; negative lo/hi crop; interior
 * padding goes between elements. */
static void test_pad_with_interior_and_negative_edges(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = s32[3] constant({1, 2, 3})\n"
                      "  z = s32[] constant(0)\n"
                      "  p0 = s32[8] pad(a, z), padding=1_2_1\n"
                      "  p1 = s32[4] pad(a, z), padding=-1_0_1\n"
                      "  p2 = s32[1] pad(a, z), padding=-1_-1\n"
                      "  b = s32[2,2] constant({ {1, 2}, {3, 4} })\n"
                      "  m = s32[] constant(-1)\n"
                      "  p3 = s32[3,4] pad(b, m), padding=0_1x1_1\n"
                      "  ROOT t = (s32[8], s32[4], s32[1], s32[3,4]) tuple(p0, p1, p2, p3)\n"));
  expect_s64(r.result->tuple_elements[0], 8, (int64_t[]){0, 1, 0, 2, 0, 3, 0, 0});
  /* positions of 1, 2, 3 are -1, 1, 3: the first is cropped */
  expect_s64(r.result->tuple_elements[1], 4, (int64_t[]){0, 2, 0, 3});
  expect_s64(r.result->tuple_elements[2], 1, (int64_t[]){2});
  expect_s64(r.result->tuple_elements[3], 12, (int64_t[]){-1, 1, 2, -1, -1, 3, 4, -1, -1, -1, -1, -1});
  run_done(&r);
}

static void test_reverse_selected_dimensions(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = s32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })\n"
                      "  r1 = s32[2,3] reverse(a), dimensions={1}\n"
                      "  r01 = s32[2,3] reverse(a), dimensions={0,1}\n"
                      "  ROOT t = (s32[2,3], s32[2,3]) tuple(r1, r01)\n"));
  expect_s64(r.result->tuple_elements[0], 6, (int64_t[]){3, 2, 1, 6, 5, 4});
  expect_s64(r.result->tuple_elements[1], 6, (int64_t[]){6, 5, 4, 3, 2, 1});
  run_done(&r);
}

static void test_iota_on_int_and_float_types(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = s32[2,3] iota(), iota_dimension=1\n"
                      "  b = f32[2,3] iota(), iota_dimension=0\n"
                      "  c = bf16[3] iota(), iota_dimension=0\n"
                      "  d = u8[300] iota(), iota_dimension=0\n"
                      "  e = u8[2] slice(d), slice={[256:258]}\n"
                      "  ROOT t = (s32[2,3], f32[2,3], bf16[3], u8[2]) tuple(a, b, c, e)\n"));
  expect_s64(r.result->tuple_elements[0], 6, (int64_t[]){0, 1, 2, 0, 1, 2});
  expect_f64(r.result->tuple_elements[1], 6, (double[]){0, 0, 0, 1, 1, 1});
  expect_f64(r.result->tuple_elements[2], 3, (double[]){0, 1, 2});
  expect_u64(r.result->tuple_elements[3], 2, (uint64_t[]){0, 1}); /* wraps at u8 */
  run_done(&r);
}

static void test_copy_is_identity(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = s32[2,2]{1,0} constant({ {1, 2}, {3, 4} })\n"
                      "  ROOT c = s32[2,2]{0,1} copy(a)\n"));
  expect_s64(r.result, 4, (int64_t[]){1, 2, 3, 4});
  run_done(&r);
}

/* dynamic-reshape is evaluated statically: sizes equal to the bounds make it a reshape;
 * smaller sizes would need dynamic shapes and are UNIMPLEMENTED. */
static void test_dynamic_reshape_with_static_sizes(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = s32[4] constant({1, 2, 3, 4})\n"
                      "  two = s32[] constant(2)\n"
                      "  ROOT d = s32[2,2] dynamic-reshape(a, two, two)\n"));
  expect_s64(r.result, 4, (int64_t[]){1, 2, 3, 4});
  assert_int_equal(r.result->shape->rank, 2);
  run_done(&r);
  expect_error(MODULE("  a = s32[4] constant({1, 2, 3, 4})\n"
                      "  one = s32[] constant(1)\n"
                      "  two = s32[] constant(2)\n"
                      "  ROOT d = s32[<=2,2] dynamic-reshape(a, one, two)\n"),
               KILN_UNIMPLEMENTED, "dynamic shapes");
}

static void test_mismatched_slice_is_invalid_argument(void **state) {
  expect_error(MODULE("  a = s32[4] constant({1, 2, 3, 4})\n"
                      "  ROOT s = s32[3] slice(a), slice={[0:2]}\n"),
               KILN_INVALID_ARGUMENT, "slice");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_broadcast_maps_operand_dims),
      cmocka_unit_test(test_reshape_keeps_row_major_order),
      cmocka_unit_test(test_transpose_permutes_dimensions),
      cmocka_unit_test(test_large_transposes_keep_every_element),
      cmocka_unit_test(test_bitcast_follows_physical_layouts),
      cmocka_unit_test(test_slice_with_strides),
      cmocka_unit_test(test_dynamic_slice_clamps_start_indices),
      cmocka_unit_test(test_dynamic_update_slice_clamps_start_indices),
      cmocka_unit_test(test_concatenate_along_inner_and_outer_dims),
      cmocka_unit_test(test_pad_with_interior_and_negative_edges),
      cmocka_unit_test(test_reverse_selected_dimensions),
      cmocka_unit_test(test_iota_on_int_and_float_types),
      cmocka_unit_test(test_copy_is_identity),
      cmocka_unit_test(test_dynamic_reshape_with_static_sizes),
      cmocka_unit_test(test_mismatched_slice_is_invalid_argument),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
