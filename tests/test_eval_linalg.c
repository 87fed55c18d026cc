/* Known-answer tests for the evaluator's cholesky, triangular-solve and fft (compiler/eval/eval_linalg.c).
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


static void expect_c(const kiln_literal_t *l, int n, const double *re_im, double tol) {
  assert_int_equal(l->num_elements, n);
  for (int i = 0; i < n; i++) {
    double re, im;
    kiln_literal_get_c128(l, i, &re, &im);
    if (fabs(re - re_im[2 * i]) > tol || fabs(im - re_im[2 * i + 1]) > tol) {
      fprintf(stderr, "element %d: got (%.9g, %.9g), want (%.9g, %.9g)\n", i, re, im,
              re_im[2 * i], re_im[2 * i + 1]);
      fail();
    }
  }
}

static void test_cholesky_lower_and_upper(void **state) {
  run_t r;
  /* the unused triangle holds garbage that must not be read */
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = f32[3,3] constant({ {25, 99, 99}, {15, 18, 99}, {-5, 0, 11} })\n"
           "  l = f32[3,3] cholesky(a), lower=true\n"
           "  b = f32[3,3] constant({ {25, 15, -5}, {99, 18, 0}, {99, 99, 11} })\n"
           "  u = f32[3,3] cholesky(b), lower=false\n"
           "  ROOT t = (f32[3,3], f32[3,3]) tuple(l, u)\n"
           "}\n");
  expect_f64_near(r.result->tuple_elements[0], 9, (double[]){5, 0, 0, 3, 3, 0, -1, 1, 3}, 1e-6);
  expect_f64_near(r.result->tuple_elements[1], 9, (double[]){5, 3, -1, 0, 3, 1, 0, 0, 3}, 1e-6);
  run_done(&r);
}

static void test_cholesky_batched_not_positive_definite_gives_nan(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = f64[2,2,2] constant({ { {4, 2}, {2, 5} }, { {1, 2}, {2, 1} } })\n"
           "  ROOT l = f64[2,2,2] cholesky(a), lower=true\n"
           "}\n");
  assert_int_equal(r.result->num_elements, 8);
  const double want[4] = {2, 0, 1, 2};
  for (int i = 0; i < 4; i++) assert_true(fabs(kiln_literal_get_f64(r.result, i) - want[i]) < 1e-12);
  for (int i = 4; i < 8; i++) assert_true(isnan(kiln_literal_get_f64(r.result, i)));
  run_done(&r);
}

static void test_cholesky_complex_hermitian(void **state) {
  run_t r;
  /* A = L L^H with L = {{2, 0}, {1+i, 1}}: A = {{4, 2-2i}, {2+2i, 3}} */
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = c64[2,2] constant({ {(4, 0), (2, -2)}, {(2, 2), (3, 0)} })\n"
           "  ROOT l = c64[2,2] cholesky(a), lower=true\n"
           "}\n");
  expect_c(r.result, 4, (double[]){2, 0, 0, 0, 1, 1, 1, 0}, 1e-6);
  run_done(&r);
}

static void test_triangular_solve_left_variants(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = f32[2,2] constant({ {2, 77}, {1, 1} })\n"
           "  b = f32[2,1] constant({ {2}, {3} })\n"
           "  x = f32[2,1] triangular-solve(a, b), left_side=true, lower=true,"
           " transpose_a=NO_TRANSPOSE\n"
           "  y = f32[2,1] triangular-solve(a, b), left_side=true, lower=true,"
           " transpose_a=TRANSPOSE\n"
           "  u = f32[2,2] constant({ {9, 0}, {1, 9} })\n"
           "  z = f32[2,1] triangular-solve(u, b), left_side=true, lower=true, unit_diagonal=true,"
           " transpose_a=NO_TRANSPOSE\n"
           "  ROOT t = (f32[2,1], f32[2,1], f32[2,1]) tuple(x, y, z)\n"
           "}\n");
  expect_f64_near(r.result->tuple_elements[0], 2, (double[]){1, 2}, 1e-6);
  expect_f64_near(r.result->tuple_elements[1], 2, (double[]){-0.5, 3}, 1e-6);
  expect_f64_near(r.result->tuple_elements[2], 2, (double[]){2, 1}, 1e-6);
  run_done(&r);
}

static void test_triangular_solve_right_side_upper_batched(void **state) {
  run_t r;
  /* x a = b with a upper {{2, 1}, {0, 1}}: x0 * 2 = b0, x0 + x1 = b1 */
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = f64[2,2,2] constant({ { {2, 1}, {55, 1} }, { {1, 0}, {-3, 4} } })\n"
           "  b = f64[2,1,2] constant({ { {4, 3} }, { {1, 8} } })\n"
           "  ROOT x = f64[2,1,2] triangular-solve(a, b), left_side=false, lower=false,"
           " transpose_a=NO_TRANSPOSE\n"
           "}\n");
  /* batch 0: x0 = 2, x1 = 1; batch 1: a upper {{1, 0}, {0, 4}}: x0 = 1, x1 = 2 */
  expect_f64_near(r.result, 4, (double[]){2, 1, 1, 2}, 1e-12);
  run_done(&r);
}

static void test_triangular_solve_adjoint_complex(void **state) {
  run_t r;
  /* a lower {{1, 0}, {i, 1}}; a^H = {{1, -i}, {0, 1}}; a^H x = b with b = {1, 1}:
   * x1 = 1, x0 = 1 + i */
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  a = c64[2,2] constant({ {(1, 0), (0, 0)}, {(0, 1), (1, 0)} })\n"
           "  b = c64[2,1] constant({ {(1, 0)}, {(1, 0)} })\n"
           "  ROOT x = c64[2,1] triangular-solve(a, b), left_side=true, lower=true,"
           " transpose_a=ADJOINT\n"
           "}\n");
  expect_c(r.result, 2, (double[]){1, 1, 1, 0}, 1e-6);
  run_done(&r);
}

static void test_fft_forward_inverse_power_of_two(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = c64[4] constant({(1, 0), (2, 0), (3, 0), (4, 0)})\n"
           "  f = c64[4] fft(x), fft_type=FFT, fft_length={4}\n"
           "  i = c64[4] fft(f), fft_type=IFFT, fft_length={4}\n"
           "  ROOT t = (c64[4], c64[4]) tuple(f, i)\n"
           "}\n");
  expect_c(r.result->tuple_elements[0], 4, (double[]){10, 0, -2, 2, -2, 0, -2, -2}, 1e-5);
  expect_c(r.result->tuple_elements[1], 4, (double[]){1, 0, 2, 0, 3, 0, 4, 0}, 1e-5);
  run_done(&r);
}

static void test_fft_non_power_of_two_and_2d(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = c128[3] constant({(1, 0), (2, 0), (3, 0)})\n"
           "  f = c128[3] fft(x), fft_type=FFT, fft_length={3}\n"
           "  y = c64[2,2] constant({ {(1, 0), (2, 0)}, {(3, 0), (4, 0)} })\n"
           "  g = c64[2,2] fft(y), fft_type=FFT, fft_length={2,2}\n"
           "  ROOT t = (c128[3], c64[2,2]) tuple(f, g)\n"
           "}\n");
  double h = sqrt(3.0) / 2;
  expect_c(r.result->tuple_elements[0], 3, (double[]){6, 0, -1.5, h, -1.5, -h}, 1e-12);
  expect_c(r.result->tuple_elements[1], 4, (double[]){10, 0, -2, 0, -4, 0, 0, 0}, 1e-5);
  run_done(&r);
}

static void test_rfft_and_irfft_round_trip_batched(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  x = f32[2,4] constant({ {1, 2, 3, 4}, {1, 0, 0, 0} })\n"
           "  f = c64[2,3] fft(x), fft_type=RFFT, fft_length={4}\n"
           "  i = f32[2,4] fft(f), fft_type=IRFFT, fft_length={4}\n"
           "  y = f32[5] constant({1, -1, 2, 0.5, 3})\n"
           "  g = c64[3] fft(y), fft_type=RFFT, fft_length={5}\n"
           "  j = f32[5] fft(g), fft_type=IRFFT, fft_length={5}\n"
           "  ROOT t = (c64[2,3], f32[2,4], f32[5]) tuple(f, i, j)\n"
           "}\n");
  expect_c(r.result->tuple_elements[0], 6, (double[]){10, 0, -2, 2, -2, 0, 1, 0, 1, 0, 1, 0},
           1e-5);
  expect_f64_near(r.result->tuple_elements[1], 8, (double[]){1, 2, 3, 4, 1, 0, 0, 0}, 1e-5);
  expect_f64_near(r.result->tuple_elements[2], 5, (double[]){1, -1, 2, 0.5, 3}, 1e-5);
  run_done(&r);
}

static void test_irfft_2d_matches_hand_inverse(void **state) {
  run_t r;
  /* spectrum of {{1, 2}, {3, 4}} (real 2x2) is {{10, -2}, {-4, 0}}; IRFFT keeps 2/2+1 = 2 */
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  s = c64[2,2] constant({ {(10, 0), (-2, 0)}, {(-4, 0), (0, 0)} })\n"
           "  ROOT x = f32[2,2] fft(s), fft_type=IRFFT, fft_length={2,2}\n"
           "}\n");
  expect_f64_near(r.result, 4, (double[]){1, 2, 3, 4}, 1e-5);
  run_done(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cholesky_lower_and_upper),
      cmocka_unit_test(test_cholesky_batched_not_positive_definite_gives_nan),
      cmocka_unit_test(test_cholesky_complex_hermitian),
      cmocka_unit_test(test_triangular_solve_left_variants),
      cmocka_unit_test(test_triangular_solve_right_side_upper_batched),
      cmocka_unit_test(test_triangular_solve_adjoint_complex),
      cmocka_unit_test(test_fft_forward_inverse_power_of_two),
      cmocka_unit_test(test_fft_non_power_of_two_and_2d),
      cmocka_unit_test(test_rfft_and_irfft_round_trip_batched),
      cmocka_unit_test(test_irfft_2d_matches_hand_inverse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
