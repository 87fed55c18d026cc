/* Known-answer tests for compiler/eval/eval_extra.c: rng-get-and-update-state, batch norm
 * (training, inference, grad), scan, ragged-dot (three modes), scaled-dot. Every expected
 * value is computed by hand in the comments next to it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compiler/eval/eval.h"

typedef struct run {
  kiln_hlo_module_t *m;
  kiln_arena_t arena;
  kiln_literal_t *result;
} run_t;

/* Parses and evaluates `text`; returns the evaluation status (parse errors fail the test). */
static kiln_status run_opts(run_t *r, const char *text, const kiln_eval_options_t *opts) {
  memset(r, 0, sizeof *r);
  kiln_arena_init(&r->arena);
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &r->m);
  if (s) {
    kiln_status_report(s, "parse");
    fail();
  }
  return kiln_eval_module(r->m, opts, 0, NULL, &r->arena, &r->result);
}

static void run_text(run_t *r, const char *text) {
  kiln_status s = run_opts(r, text, NULL);
  if (s) {
    kiln_status_report(s, "eval");
    fail();
  }
  assert_non_null(r->result);
}

static void run_done(run_t *r) {
  kiln_arena_destroy(&r->arena);
  kiln_hlo_module_destroy(r->m);
}

static void expect_f64(const kiln_literal_t *l, int n, const double *want, double tol) {
  assert_int_equal(l->num_elements, n);
  for (int i = 0; i < n; i++) {
    double got = kiln_literal_get_f64(l, i);
    if (fabs(got - want[i]) > tol) {
      fprintf(stderr, "element %d: got %.9g, want %.9g\n", i, got, want[i]);
      fail();
    }
  }
}

/* Expects evaluation to fail with `code` and a message mentioning `needle`. */
static void expect_error(const char *text, kiln_status_code_t code, const char *needle) {
  run_t r;
  kiln_status s = run_opts(&r, text, NULL);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), code);
  assert_non_null(strstr(kiln_status_message(s), needle));
  kiln_status_free(s);
  run_done(&r);
}

/* ---- rng-get-and-update-state ---- */

static void test_rng_state_starts_at_xla_initial_value_and_advances_by_delta(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = u64[2] rng-get-and-update-state(), delta=5\n"
           "  b = u64[2] rng-get-and-update-state(), delta=7\n"
           "  c = u64[2] rng-get-and-update-state(), delta=1\n"
           "  ROOT t = (u64[2], u64[2], u64[2]) tuple(a, b, c)\n"
           "}\n");
  /* operands evaluate in order: a sees the initial 0x7012395, b that + 5, c that + 12 */
  assert_true(kiln_literal_get_u64(r.result->tuple_elements[0], 0) == 0x7012395u);
  assert_true(kiln_literal_get_u64(r.result->tuple_elements[0], 1) == 0);
  assert_true(kiln_literal_get_u64(r.result->tuple_elements[1], 0) == 0x7012395u + 5);
  assert_true(kiln_literal_get_u64(r.result->tuple_elements[2], 0) == 0x7012395u + 12);
  run_done(&r);
}

static void test_rng_state_seed_offsets_and_carries_into_high_word(void **state) {
  kiln_eval_options_t o = {.rng_seed = UINT64_MAX - 0x7012395u};
  run_t r;
  kiln_status s = run_opts(&r,
                           "HloModule m\n"
                           "ENTRY e {\n"
                           "  a = u64[2] rng-get-and-update-state(), delta=1\n"
                           "  b = u64[2] rng-get-and-update-state(), delta=1\n"
                           "  ROOT t = (u64[2], u64[2]) tuple(a, b)\n"
                           "}\n",
                           &o);
  assert_null(s);
  /* initial + seed = 2^64 - 1; one more carries into the high word */
  assert_true(kiln_literal_get_u64(r.result->tuple_elements[0], 0) == UINT64_MAX);
  assert_true(kiln_literal_get_u64(r.result->tuple_elements[0], 1) == 0);
  assert_true(kiln_literal_get_u64(r.result->tuple_elements[1], 0) == 0);
  assert_true(kiln_literal_get_u64(r.result->tuple_elements[1], 1) == 1);
  run_done(&r);
}

static void test_rng_state_without_delta_is_an_error(void **state) {
  expect_error("HloModule m\nENTRY e {\n  ROOT a = u64[2] rng-get-and-update-state()\n}\n",
               KILN_INVALID_ARGUMENT, "delta");
}

/* ---- batch norm ---- */

static void test_batch_norm_training_normalizes_with_biased_variance(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = f32[2,2] constant({ {1, 2}, {3, 4} })\n"
           "  s = f32[2] constant({1, 2})\n"
           "  o = f32[2] constant({0, 1})\n"
           "  ROOT b = (f32[2,2], f32[2], f32[2]) batch-norm-training(x, s, o), epsilon=0, feature_index=1\n"
           "}\n");
  /* feature 0: {1,3} mean 2 var 1; feature 1: {2,4} mean 3 var 1 (biased);
   * y = (x-mean)/sqrt(var)*scale+offset */
  expect_f64(r.result->tuple_elements[0], 4, (double[]){-1, -1, 1, 3}, 1e-6);
  expect_f64(r.result->tuple_elements[1], 2, (double[]){2, 3}, 1e-6);
  expect_f64(r.result->tuple_elements[2], 2, (double[]){1, 1}, 1e-6);
  run_done(&r);
}

static void test_batch_norm_training_outer_feature_dim_and_epsilon(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = f32[2,1,2] constant({ { {1, 2} }, { {5, 7} } })\n"
           "  s = f32[2] constant({1, 1})\n"
           "  o = f32[2] constant({0, 0})\n"
           "  ROOT b = (f32[2,1,2], f32[2], f32[2]) batch-norm-training(x, s, o), epsilon=0.001, feature_index=0\n"
           "}\n");
  /* feature 0: {1,2} mean 1.5 var 0.25; feature 1: {5,7} mean 6 var 1 */
  double a = 0.5 / sqrt(0.25 + 0.001), b = 1 / sqrt(1 + 0.001);
  expect_f64(r.result->tuple_elements[0], 4, (double[]){-a, a, -b, b}, 1e-6);
  expect_f64(r.result->tuple_elements[1], 2, (double[]){1.5, 6}, 1e-6);
  expect_f64(r.result->tuple_elements[2], 2, (double[]){0.25, 1}, 1e-6);
  run_done(&r);
}

static void test_batch_norm_inference_uses_given_mean_and_variance(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = f32[2,2] constant({ {1, 2}, {3, 4} })\n"
           "  s = f32[2] constant({2, 1})\n"
           "  o = f32[2] constant({1, 0})\n"
           "  mu = f32[2] constant({1, 2})\n"
           "  v = f32[2] constant({4, 1})\n"
           "  ROOT y = f32[2,2] batch-norm-inference(x, s, o, mu, v), epsilon=0, feature_index=1\n"
           "}\n");
  /* f0: (1-1)/2*2+1 = 1, (3-1)/2*2+1 = 3; f1: (2-2)/1 = 0, (4-2)/1 = 2 */
  expect_f64(r.result, 4, (double[]){1, 0, 3, 2}, 1e-6);
  run_done(&r);
}

static void test_batch_norm_grad_matches_expander_formula(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = f32[3,1] constant({ {1}, {2}, {6} })\n"
           "  s = f32[1] constant({2})\n"
           "  mu = f32[1] constant({3})\n"
           "  v = f32[1] constant({4})\n"
           "  dy = f32[3,1] constant({ {1}, {0}, {2} })\n"
           "  ROOT g = (f32[3,1], f32[1], f32[1]) batch-norm-grad(x, s, mu, v, dy), epsilon=0, feature_index=1\n"
           "}\n");
  /* sum(dy)=3, x-mean={-2,-1,3}, sum(dy*(x-mean))=4; grad_scale=4/sqrt(4)=2, grad_offset=3;
   * dx = 2/sqrt(4)/3 * (3*dy - 3 - (x-mean)*4/4) = {2/3, -2/3, 0} */
  expect_f64(r.result->tuple_elements[0], 3, (double[]){2.0 / 3, -2.0 / 3, 0}, 1e-6);
  expect_f64(r.result->tuple_elements[1], 1, (double[]){2}, 1e-6);
  expect_f64(r.result->tuple_elements[2], 1, (double[]){3}, 1e-6);
  run_done(&r);
}

static void test_batch_norm_bad_feature_index_is_an_error(void **state) {
  expect_error("HloModule m\nENTRY e {\n"
               "  x = f32[2,2] constant({ {1, 2}, {3, 4} })\n"
               "  s = f32[2] constant({1, 1})\n"
               "  ROOT b = (f32[2,2], f32[2], f32[2]) batch-norm-training(x, s, s), epsilon=0, feature_index=5\n"
               "}\n",
               KILN_INVALID_ARGUMENT, "feature_index");
}

/* ---- scan ---- */

static const char *kScanSubBody =
    "HloModule m\n"
    "body {\n"
    "  x = f32[] parameter(0)\n"
    "  c = f32[] parameter(1)\n"
    "  d = f32[] subtract(x, c)\n"
    "  n = f32[] add(x, c)\n"
    "  ROOT t = (f32[], f32[]) tuple(d, n)\n"
    "}\n";

static void test_scan_passes_input_then_carry_and_returns_outputs_then_carry(void **state) {
  char text[1024];
  snprintf(text, sizeof text,
           "%sENTRY e {\n"
           "  in = f32[3] constant({1, 2, 3})\n"
           "  i = f32[] constant(0)\n"
           "  ROOT s = (f32[3], f32[]) scan(in, i), dimensions={0}, num_carries=1, to_apply=body\n"
           "}\n",
           kScanSubBody);
  run_t r;
  run_text(&r, text);
  /* t0: 1-0=1, c=1; t1: 2-1=1, c=3; t2: 3-3=0, c=6 */
  expect_f64(r.result->tuple_elements[0], 3, (double[]){1, 1, 0}, 0);
  expect_f64(r.result->tuple_elements[1], 1, (double[]){6}, 0);
  run_done(&r);
}

static void test_scan_reverse_walks_from_the_end(void **state) {
  char text[1024];
  snprintf(text, sizeof text,
           "%sENTRY e {\n"
           "  in = f32[3] constant({1, 2, 3})\n"
           "  i = f32[] constant(0)\n"
           "  ROOT s = (f32[3], f32[]) scan(in, i), dimensions={0}, num_carries=1, is_reverse=true, to_apply=body\n"
           "}\n",
           kScanSubBody);
  run_t r;
  run_text(&r, text);
  /* at 2: 3-0=3, c=3; at 1: 2-3=-1, c=5; at 0: 1-5=-4, c=6 */
  expect_f64(r.result->tuple_elements[0], 3, (double[]){-4, -1, 3}, 0);
  expect_f64(r.result->tuple_elements[1], 1, (double[]){6}, 0);
  run_done(&r);
}

static void test_scan_along_inner_dimension_with_vector_carry(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "add2 {\n"
           "  a = f32[2] parameter(0)\n"
           "  b = f32[2] parameter(1)\n"
           "  s = f32[2] add(a, b)\n"
           "  ROOT t = (f32[2], f32[2]) tuple(s, s)\n"
           "}\n"
           "ENTRY e {\n"
           "  in = f32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })\n"
           "  i = f32[2] constant({0, 100})\n"
           "  ROOT s = (f32[2,3], f32[2]) scan(in, i), dimensions={1}, num_carries=1, is_associative=true, to_apply=add2\n"
           "}\n");
  /* running sums along dim 1, row 1 starting from 100 */
  expect_f64(r.result->tuple_elements[0], 6, (double[]){1, 3, 6, 104, 109, 115}, 0);
  expect_f64(r.result->tuple_elements[1], 2, (double[]){6, 115}, 0);
  run_done(&r);
}

/* ---- ragged-dot ---- */

static void test_ragged_dot_noncontracting_picks_rhs_group_per_row(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  l = f32[3,2] constant({ {1, 2}, {3, 4}, {5, 6} })\n"
           "  w = f32[2,2,1] constant({ { {1}, {0} }, { {0}, {1} } })\n"
           "  g1 = s64[2] constant({2, 1})\n"
           "  g2 = s32[2] constant({1, 1})\n"
           "  a = f32[3,1] ragged-dot(l, w, g1), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}\n"
           "  b = f32[3,1] ragged-dot(l, w, g2), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}\n"
           "  ROOT t = (f32[3,1], f32[3,1]) tuple(a, b)\n"
           "}\n");
  /* group 0 takes column 0, group 1 column 1. sizes {2,1}: rows 0,1 -> g0, row 2 -> g1.
   * sizes {1,1}: row 2 is in no group and gives 0. */
  expect_f64(r.result->tuple_elements[0], 3, (double[]){1, 3, 6}, 0);
  expect_f64(r.result->tuple_elements[1], 3, (double[]){1, 4, 0}, 0);
  run_done(&r);
}

static void test_ragged_dot_noncontracting_with_batch_and_per_batch_group_sizes(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  l = f32[2,2,1] constant({ { {1}, {2} }, { {3}, {4} } })\n"
           "  w = f32[2,2,1,1] constant({ { { {10} }, { {100} } }, { { {20} }, { {200} } } })\n"
           "  g = s64[2,2] constant({ {1, 1}, {2, 0} })\n"
           "  ROOT d = f32[2,2,1] ragged-dot(l, w, g), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={1}, rhs_contracting_dims={2}, lhs_ragged_dims={1}, rhs_group_dims={0}\n"
           "}\n");
  /* batch 0: row 0 in g0 (1*10), row 1 in g1 (2*20); batch 1: both rows in g0 (*100) */
  expect_f64(r.result, 4, (double[]){10, 40, 300, 400}, 0);
  run_done(&r);
}

static void test_ragged_dot_contracting_gives_one_result_per_group(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  l = f32[1,4] constant({ {1, 2, 3, 4} })\n"
           "  w = f32[4,1] constant({ {1}, {10}, {100}, {1000} })\n"
           "  g = s64[2] constant({1, 3})\n"
           "  ROOT d = f32[2,1,1] ragged-dot(l, w, g), lhs_contracting_dims={1}, rhs_contracting_dims={0}, lhs_ragged_dims={1}\n"
           "}\n");
  /* group 0 sums k=0: 1; group 1 sums k=1..3: 20+300+4000 */
  expect_f64(r.result, 2, (double[]){1, 4320}, 0);
  run_done(&r);
}

static void test_ragged_dot_batch_mode_is_a_plain_batched_dot(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  l = f32[2,1,1] constant({ { {2} }, { {3} } })\n"
           "  w = f32[2,1,1] constant({ { {5} }, { {7} } })\n"
           "  g = s64[1] constant({2})\n"
           "  ROOT d = f32[2,1,1] ragged-dot(l, w, g), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}, lhs_ragged_dims={0}\n"
           "}\n");
  expect_f64(r.result, 2, (double[]){10, 21}, 0);
  run_done(&r);
}

static void test_ragged_dot_without_ragged_dims_is_an_error(void **state) {
  expect_error("HloModule m\nENTRY e {\n"
               "  w = f32[2,2,1] constant({ { {1}, {0} }, { {0}, {1} } })\n"
               "  g = s64[2] constant({2, 1})\n"
               "  ROOT a = f32[3,1] ragged-dot(w, w, g), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n"
               "}\n",
               KILN_INVALID_ARGUMENT, "ragged");
}

/* ---- scaled-dot ---- */

static void test_scaled_dot_scales_blocks_along_contracting_dim(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = f32[1,4] constant({ {1, 2, 3, 4} })\n"
           "  b = f32[1,4] constant({ {1, 1, 1, 1} })\n"
           "  as = f32[1,2] constant({ {2, 10} })\n"
           "  bs = f32[1,1] constant({ {3} })\n"
           "  ROOT d = f32[1,1] scaled-dot(a, b, as, bs), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n"
           "}\n");
  /* 3 * (1*2 + 2*2 + 3*10 + 4*10) */
  expect_f64(r.result, 1, (double[]){228}, 0);
  run_done(&r);
}

static void test_scaled_dot_fp8_with_e8m0_scales(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = f8e4m3fn[1,2] constant({ {1.5, -2} })\n"
           "  b = f8e4m3fn[1,2] constant({ {1, 1} })\n"
           "  as = f8e8m0fnu[1,1] constant({ {4} })\n"
           "  bs = f8e8m0fnu[1,2] constant({ {0.5, 8} })\n"
           "  ROOT d = f32[1,1] scaled-dot(a, b, as, bs), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n"
           "}\n");
  /* 1.5*4*0.5 + (-2)*4*8 = 3 - 64 */
  expect_f64(r.result, 1, (double[]){-61}, 0);
  run_done(&r);
}

static void test_scaled_dot_scalar_scale_leaves_operand_unscaled(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = f32[2,2] constant({ {1, 2}, {3, 4} })\n"
           "  b = f32[2,2] constant({ {1, 0}, {0, 1} })\n"
           "  as = f32[] constant(5)\n"
           "  bs = f32[2,1] constant({ {2}, {3} })\n"
           "  ROOT d = f32[2,2] scaled-dot(a, b, as, bs), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
           "}\n");
  /* lhs as is (XLA ignores a scalar scale); rhs rows scaled by {2, 3}: diag(2,3) */
  expect_f64(r.result, 4, (double[]){2, 6, 6, 12}, 0);
  run_done(&r);
}

static void test_scaled_dot_scale_that_does_not_divide_is_an_error(void **state) {
  expect_error("HloModule m\nENTRY e {\n"
               "  a = f32[1,4] constant({ {1, 2, 3, 4} })\n"
               "  b = f32[2,4] constant({ {1, 2, 3, 4}, {1, 2, 3, 4} })\n"
               "  s = f32[1,3] constant({ {1, 1, 1} })\n"
               "  t = f32[2,2] constant({ {1, 1}, {1, 1} })\n"
               "  ROOT d = f32[1,2] scaled-dot(a, b, s, t), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n"
               "}\n",
               KILN_INVALID_ARGUMENT, "scales");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rng_state_starts_at_xla_initial_value_and_advances_by_delta),
      cmocka_unit_test(test_rng_state_seed_offsets_and_carries_into_high_word),
      cmocka_unit_test(test_rng_state_without_delta_is_an_error),
      cmocka_unit_test(test_batch_norm_training_normalizes_with_biased_variance),
      cmocka_unit_test(test_batch_norm_training_outer_feature_dim_and_epsilon),
      cmocka_unit_test(test_batch_norm_inference_uses_given_mean_and_variance),
      cmocka_unit_test(test_batch_norm_grad_matches_expander_formula),
      cmocka_unit_test(test_batch_norm_bad_feature_index_is_an_error),
      cmocka_unit_test(test_scan_passes_input_then_carry_and_returns_outputs_then_carry),
      cmocka_unit_test(test_scan_reverse_walks_from_the_end),
      cmocka_unit_test(test_scan_along_inner_dimension_with_vector_carry),
      cmocka_unit_test(test_ragged_dot_noncontracting_picks_rhs_group_per_row),
      cmocka_unit_test(test_ragged_dot_noncontracting_with_batch_and_per_batch_group_sizes),
      cmocka_unit_test(test_ragged_dot_contracting_gives_one_result_per_group),
      cmocka_unit_test(test_ragged_dot_batch_mode_is_a_plain_batched_dot),
      cmocka_unit_test(test_ragged_dot_without_ragged_dims_is_an_error),
      cmocka_unit_test(test_scaled_dot_scales_blocks_along_contracting_dim),
      cmocka_unit_test(test_scaled_dot_fp8_with_e8m0_scales),
      cmocka_unit_test(test_scaled_dot_scalar_scale_leaves_operand_unscaled),
      cmocka_unit_test(test_scaled_dot_scale_that_does_not_divide_is_an_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
