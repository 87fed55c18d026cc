/* Known-answer tests for the evaluator's dot and convolution (compiler/eval/eval_dot_conv.c).
 * Each test is a small HLO module with constant inputs; expectations are hand-computed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/str.h"
#include "compiler/eval/eval.h"
#include "tests/eval_test_util.h"


static void test_dot_matmul_f32(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = f32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })\n"
           "  b = f32[3,2] constant({ {7, 8}, {9, 10}, {11, 12} })\n"
           "  ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "}\n");
  expect_f64_near(r.result, 4, (double[]){58, 64, 139, 154}, 0);
  run_done(&r);
}

static void test_dot_batch_dims_put_batch_first(void **state) {
  run_t r;
  /* batch dim of lhs is dim 1 and of rhs dim 2: result = [batch, lhs free, rhs free] */
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = f32[1,2,2] constant({ { {1, 2}, {3, 4} } })\n"
           "  b = f32[2,3,2] constant({ { {1, 0}, {0, 1}, {1, 1} }, { {2, 0}, {0, 2}, {1, -1} } })\n"
           "  ROOT d = f32[2,1,3] dot(a, b), lhs_batch_dims={1}, lhs_contracting_dims={2},"
           " rhs_batch_dims={2}, rhs_contracting_dims={0}\n"
           "}\n");
  /* batch 0: lhs row {1,2}; rhs[k][j][0] = {{1,0,1},{2,0,1}} -> {1+4, 0, 1+2} = {5,0,3}
   * batch 1: lhs row {3,4}; rhs[k][j][1] = {{0,1,1},{0,2,-1}} -> {0, 3+8, 3-4} */
  expect_f64_near(r.result, 6, (double[]){5, 0, 3, 0, 11, -1}, 0);
  run_done(&r);
}

static void test_dot_multiple_contracting_dims_pair_in_order(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = f32[2,2] constant({ {1, 2}, {3, 4} })\n"
           "  b = f32[2,2] constant({ {5, 6}, {7, 8} })\n"
           "  same = f32[] dot(a, b), lhs_contracting_dims={0,1}, rhs_contracting_dims={0,1}\n"
           "  swapped = f32[] dot(a, b), lhs_contracting_dims={0,1}, rhs_contracting_dims={1,0}\n"
           "  ROOT t = (f32[], f32[]) tuple(same, swapped)\n"
           "}\n");
  expect_f64_near(r.result->tuple_elements[0], 1, (double[]){70}, 0);
  expect_f64_near(r.result->tuple_elements[1], 1, (double[]){69}, 0);
  run_done(&r);
}

static void test_dot_bf16_accumulates_in_f32_and_rounds_once(void **state) {
  run_t r;
  /* 256 + 1 + 1: rounding each partial sum to bf16 would give 256; f32 accumulation
   * gives 258, which bf16 represents exactly. */
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = bf16[1,3] constant({ {256, 1, 1} })\n"
           "  b = bf16[3,1] constant({ {1}, {1}, {1} })\n"
           "  d = bf16[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "  c = bf16[1,3] constant({ {1.5, 1.5, 1.5} })\n"
           "  r = bf16[1,1] dot(c, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "  f = f32[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "  ROOT t = (bf16[1,1], bf16[1,1], f32[1,1]) tuple(d, r, f)\n"
           "}\n");
  expect_f64_near(r.result->tuple_elements[0], 1, (double[]){258}, 0);
  expect_f64_near(r.result->tuple_elements[1], 1, (double[]){4.5}, 0);
  expect_f64_near(r.result->tuple_elements[2], 1, (double[]){258}, 0);
  run_done(&r);
}

static void test_dot_integers_wrap_and_widen(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = s8[1,2] constant({ {100, 100} })\n"
           "  b = s8[2,1] constant({ {2}, {1} })\n"
           "  narrow = s8[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "  wide = s32[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "  ROOT t = (s8[1,1], s32[1,1]) tuple(narrow, wide)\n"
           "}\n");
  assert_int_equal(kiln_literal_get_s64(r.result->tuple_elements[0], 0), 300 - 256);
  assert_int_equal(kiln_literal_get_s64(r.result->tuple_elements[1], 0), 300);
  run_done(&r);
}

/* XLA converts each operand to the result type first: to pred that is x != 0, so
 * fractional values (every f8e8m0fnu value below 1) count as true, never truncated to 0. */
static void test_dot_pred_result_converts_float_operands_by_nonzero(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = f8e8m0fnu[2,2] constant({ {0.5, 0.25}, {0.125, 2} })\n"
           "  b = f8e8m0fnu[2,1] constant({ {0.5}, {0.25} })\n"
           "  e8 = pred[2,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "  x = f32[1,2] constant({ {0.5, 0} })\n"
           "  y = f32[2,2] constant({ {0.25, 0}, {3, 7} })\n"
           "  f = pred[1,2] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "  n = f32[1,1] constant({ {nan} })\n"
           "  h = f32[1,1] constant({ {0.5} })\n"
           "  nn = pred[1,1] dot(n, h), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "  ROOT t = (pred[2,1], pred[1,2], pred[1,1]) tuple(e8, f, nn)\n"
           "}\n");
  expect_s64(r.result->tuple_elements[0], 2, (int64_t[]){1, 1});
  /* column 0: 0.5 && 0.25 -> true; column 1: (0.5 && 0) || (0 && 7) -> false */
  expect_s64(r.result->tuple_elements[1], 2, (int64_t[]){1, 0});
  expect_s64(r.result->tuple_elements[2], 1, (int64_t[]){1}); /* NaN != 0 */
  run_done(&r);
}

/* Integer operands become 0/1 before multiplying, so 2^32 * 2^32 (0 mod 2^64) is true. */
static void test_dot_pred_result_does_not_wrap_integer_products(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = s64[1,1] constant({ {4294967296} })\n"
           "  ROOT d = pred[1,1] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "}\n");
  expect_s64(r.result, 1, (int64_t[]){1});
  run_done(&r);
}

/* Float operands of an integer dot convert like `convert`: NaN -> 0, saturating. */
static void test_dot_integer_result_converts_float_operands_saturating(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = f32[1,3] constant({ {300, nan, -2.75} })\n"
           "  b = f32[3,1] constant({ {1}, {5}, {1} })\n"
           "  ROOT d = s8[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "}\n");
  expect_s64(r.result, 1, (int64_t[]){127 + 0 - 2});
  run_done(&r);
}

static void test_dot_complex(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = c64[1,2] constant({ {(1, 2), (0, 1)} })\n"
           "  b = c64[2,1] constant({ {(3, 4)}, {(2, 0)} })\n"
           "  ROOT d = c64[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "}\n");
  double re, im;
  kiln_literal_get_c128(r.result, 0, &re, &im);
  assert_true(re == -5 && im == 12);
  run_done(&r);
}

static void test_dot_rejects_mismatched_contracting_sizes(void **state) {
  kiln_hlo_module_t *m = NULL;
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[2,3] parameter(0)\n"
      "  b = f32[2,2] parameter(1)\n"
      "  ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "}\n";
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  assert_null(s);
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_shape_t *s23 = kiln_shape_make_array(&arena, KILN_F32, 2, (int64_t[]){2, 3});
  kiln_shape_t *s22 = kiln_shape_make_array(&arena, KILN_F32, 2, (int64_t[]){2, 2});
  kiln_literal_t *args[2] = {kiln_literal_make(&arena, s23), kiln_literal_make(&arena, s22)};
  kiln_literal_t *res = NULL;
  s = kiln_eval_module(m, NULL, 2, args, &arena, &res);
  assert_non_null(s); /* verifier or handler: an error, never a crash */
  kiln_status_free(s);
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
}

static void test_conv_1d_valid(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = f32[1,1,5] constant({ { {1, 2, 3, 4, 5} } })\n"
           "  k = f32[1,1,3] constant({ { {1, 2, 3} } })\n"
           "  ROOT c = f32[1,1,3] convolution(x, k), window={size=3}, dim_labels=bf0_oi0->bf0\n"
           "}\n");
  expect_f64_near(r.result, 3, (double[]){14, 20, 26}, 0);
  run_done(&r);
}

static void test_conv_padding_base_and_window_dilation(void **state) {
  run_t r;
  /* x dilated by 2: 1 0 2 0 3; padded 1_1: 0 1 0 2 0 3 0; kernel taps 2 apart. */
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = f32[1,1,3] constant({ { {1, 2, 3} } })\n"
           "  k = f32[1,1,2] constant({ { {1, 10} } })\n"
           "  c = f32[1,1,5] convolution(x, k), window={size=2 pad=1_1 lhs_dilate=2 rhs_dilate=2},"
           " dim_labels=bf0_oi0->bf0\n"
           "  r = f32[1,1,5] convolution(x, k), window={size=2 pad=1_1 lhs_dilate=2 rhs_dilate=2"
           " rhs_reversal=1}, dim_labels=bf0_oi0->bf0\n"
           "  ROOT t = (f32[1,1,5], f32[1,1,5]) tuple(c, r)\n"
           "}\n");
  expect_f64_near(r.result->tuple_elements[0], 5, (double[]){0, 21, 0, 32, 0}, 0);
  expect_f64_near(r.result->tuple_elements[1], 5, (double[]){0, 12, 0, 23, 0}, 0);
  run_done(&r);
}

static void test_conv_stride(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = f32[1,1,5] constant({ { {1, 2, 3, 4, 5} } })\n"
           "  k = f32[1,1,2] constant({ { {1, 1} } })\n"
           "  ROOT c = f32[1,1,2] convolution(x, k), window={size=2 stride=2},"
           " dim_labels=bf0_oi0->bf0\n"
           "}\n");
  expect_f64_near(r.result, 2, (double[]){3, 7}, 0);
  run_done(&r);
}

static void test_conv_feature_groups(void **state) {
  run_t r;
  /* 4 input features in 2 groups; output feature 0 sees inputs 0,1; output 1 sees 2,3 */
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = f32[1,4,1] constant({ { {1}, {2}, {3}, {4} } })\n"
           "  k = f32[2,2,1] constant({ { {1}, {10} }, { {100}, {1000} } })\n"
           "  ROOT c = f32[1,2,1] convolution(x, k), window={size=1}, dim_labels=bf0_oi0->bf0,"
           " feature_group_count=2\n"
           "}\n");
  expect_f64_near(r.result, 2, (double[]){21, 4300}, 0);
  run_done(&r);
}

static void test_conv_batch_groups(void **state) {
  run_t r;
  /* 2 input batches in 2 groups; output feature o uses input batch group o */
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = f32[2,1,1] constant({ { {3} }, { {5} } })\n"
           "  k = f32[2,1,1] constant({ { {10} }, { {100} } })\n"
           "  ROOT c = f32[1,2,1] convolution(x, k), window={size=1}, dim_labels=bf0_oi0->bf0,"
           " batch_group_count=2\n"
           "}\n");
  expect_f64_near(r.result, 2, (double[]){30, 500}, 0);
  run_done(&r);
}

static void test_conv_pred_result_converts_f8e8m0fnu_operands_by_nonzero(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = f8e8m0fnu[1,1,3] constant({ { {0.5, 0.25, 0.125} } })\n"
           "  k = f8e8m0fnu[1,1,2] constant({ { {0.5, 0.5} } })\n"
           "  c = pred[1,1,2] convolution(x, k), window={size=2}, dim_labels=bf0_oi0->bf0\n"
           "  z = f32[1,1,3] constant({ { {0.5, 0, 0} } })\n"
           "  w = f32[1,1,2] constant({ { {0.75, 0.75} } })\n"
           "  d = pred[1,1,2] convolution(z, w), window={size=2}, dim_labels=bf0_oi0->bf0\n"
           "  ROOT t = (pred[1,1,2], pred[1,1,2]) tuple(c, d)\n"
           "}\n");
  expect_s64(r.result->tuple_elements[0], 2, (int64_t[]){1, 1});
  expect_s64(r.result->tuple_elements[1], 2, (int64_t[]){1, 0});
  run_done(&r);
}

static void test_conv_2d_nhwc(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = f32[1,3,3,1] constant({ { { {1}, {2}, {3} }, { {4}, {5}, {6} },"
           " { {7}, {8}, {9} } } })\n"
           "  k = f32[2,2,1,1] constant({ { { {1} }, { {1} } }, { { {1} }, { {1} } } })\n"
           "  ROOT c = f32[1,2,2,1] convolution(x, k), window={size=2x2},"
           " dim_labels=b01f_01io->b01f\n"
           "}\n");
  expect_f64_near(r.result, 4, (double[]){12, 16, 24, 28}, 0);
  run_done(&r);
}

/* Prints a constant of `n` values v(i) with the given shape text (row-major, one level of
 * braces per dimension). */
static void print_constant(kiln_strbuf_t *t, const int64_t *dims, int rank, float (*v)(int64_t)) {
  int64_t n = 1, idx[4] = {0};
  for (int d = 0; d < rank; d++) n *= dims[d];
  for (int64_t i = 0; i < n; i++) {
    int open = 0;
    for (int d = rank - 1; d >= 0 && idx[d] == 0; d--) open++;
    for (int k = 0; k < open; k++) kiln_strbuf_printf(t, "{");
    kiln_strbuf_printf(t, "%.9g", (double)v(i));
    int close = 0;
    for (int d = rank - 1; d >= 0; d--) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
      close++;
    }
    for (int k = 0; k < close; k++) kiln_strbuf_printf(t, "}");
    if (i + 1 < n) kiln_strbuf_printf(t, ", ");
  }
}

static float input_value(int64_t i) {
  return (float)((i * 37 % 19) - 9) * 0.37f;
}

static float kernel_value(int64_t i) {
  return (float)((i * 53 % 23) - 11) * 0.113f;
}

/* Convolutions with 12 and 24 output features innermost run eight features' sums at once
 * (plain, depthwise, two groups of 12: lanes that would cross a group boundary run one by
 * one): every output is the f32 sum in the evaluator's order (window position, then input
 * feature), bit for bit, as a loop written here computes it. */
static void test_conv_output_feature_lanes_keep_each_sums_order(void **state) {
  const struct { int cin, cout, groups; } cases[] = {{5, 12, 1}, {12, 12, 12}, {6, 24, 2}};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const int H = 4, W = 5, cin = cases[ci].cin, cout = cases[ci].cout, G = cases[ci].groups;
    const int cig = cin / G, cog = cout / G;
    const int64_t in_dims[4] = {1, H, W, cin}, ker_dims[4] = {3, 3, cig, cout};
    kiln_strbuf_t t = {0};
    kiln_strbuf_printf(&t, "HloModule m\nENTRY e {\n  x = f32[1,%d,%d,%d] constant(", H, W, cin);
    print_constant(&t, in_dims, 4, input_value);
    kiln_strbuf_printf(&t, ")\n  k = f32[3,3,%d,%d] constant(", cig, cout);
    print_constant(&t, ker_dims, 4, kernel_value);
    kiln_strbuf_printf(&t,
                       ")\n  ROOT c = f32[1,%d,%d,%d] convolution(x, k), window={size=3x3 "
                       "pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=%d\n}\n",
                       H, W, cout, G);
    run_t r;
    run_text(&r, kiln_strbuf_cstr(&t));
    double *want = calloc((size_t)(H * W * cout), sizeof *want);
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++)
        for (int o = 0; o < cout; o++) {
          float acc = 0;
          for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++) {
              int iy = y + ky - 1, ix = x + kx - 1;
              if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
              for (int c = 0; c < cig; c++) {
                float a = input_value(((int64_t)iy * W + ix) * cin + (o / cog) * cig + c);
                float b = kernel_value(((int64_t)(ky * 3 + kx) * cig + c) * cout + o);
                float p = a * b;
                acc += p;
              }
            }
          want[(y * W + x) * cout + o] = acc;
        }
    expect_f64(r.result, H * W * cout, want);
    free(want);
    run_done(&r);
    kiln_strbuf_free(&t);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dot_matmul_f32),
      cmocka_unit_test(test_dot_batch_dims_put_batch_first),
      cmocka_unit_test(test_dot_multiple_contracting_dims_pair_in_order),
      cmocka_unit_test(test_dot_bf16_accumulates_in_f32_and_rounds_once),
      cmocka_unit_test(test_dot_integers_wrap_and_widen),
      cmocka_unit_test(test_dot_pred_result_converts_float_operands_by_nonzero),
      cmocka_unit_test(test_dot_pred_result_does_not_wrap_integer_products),
      cmocka_unit_test(test_dot_integer_result_converts_float_operands_saturating),
      cmocka_unit_test(test_dot_complex),
      cmocka_unit_test(test_dot_rejects_mismatched_contracting_sizes),
      cmocka_unit_test(test_conv_1d_valid),
      cmocka_unit_test(test_conv_padding_base_and_window_dilation),
      cmocka_unit_test(test_conv_stride),
      cmocka_unit_test(test_conv_feature_groups),
      cmocka_unit_test(test_conv_batch_groups),
      cmocka_unit_test(test_conv_pred_result_converts_f8e8m0fnu_operands_by_nonzero),
      cmocka_unit_test(test_conv_2d_nhwc),
      cmocka_unit_test(test_conv_output_feature_lanes_keep_each_sums_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
