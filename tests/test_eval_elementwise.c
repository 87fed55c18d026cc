/* Known-answer tests for the evaluator's elementwise opcodes (compiler/eval/eval_elementwise.c).
 * Each test is a small HLO module with constant inputs; expectations are hand-computed and
 * each test names the XLA rule it pins. */
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


/* ---- integer arithmetic ---- */

/* XLA: signed x / 0 = -1, INT_MIN / -1 = INT_MIN (no trap), otherwise truncating. */
static void test_signed_divide_by_zero_and_int_min_by_minus_one(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = s32[5] constant({7, -7, -2147483648, -2147483648, -7})\n"
                      "  b = s32[5] constant({0, 0, -1, 2, 2})\n"
                      "  ROOT d = s32[5] divide(a, b)\n"));
  expect_s64(r.result, 5, (int64_t[]){-1, -1, INT32_MIN, -1073741824, -3});
  run_done(&r);
}

/* XLA: x % 0 = x, INT_MIN % -1 = 0, the sign follows the dividend. */
static void test_signed_remainder_by_zero_and_int_min_by_minus_one(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = s64[4] constant({7, -7, -9223372036854775808, -7})\n"
                      "  b = s64[4] constant({0, 0, -1, 3})\n"
                      "  ROOT d = s64[4] remainder(a, b)\n"));
  expect_s64(r.result, 4, (int64_t[]){7, -7, 0, -1});
  run_done(&r);
}

/* XLA: unsigned x / 0 = all ones, x % 0 = x. */
static void test_unsigned_divide_and_remainder_by_zero(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = u32[3] constant({7, 0, 4000000000})\n"
                      "  b = u32[3] constant({0, 0, 3})\n"
                      "  d = u32[3] divide(a, b)\n"
                      "  m = u32[3] remainder(a, b)\n"
                      "  ROOT t = (u32[3], u32[3]) tuple(d, m)\n"));
  expect_u64(r.result->tuple_elements[0], 3, (uint64_t[]){4294967295u, 4294967295u, 1333333333u});
  expect_u64(r.result->tuple_elements[1], 3, (uint64_t[]){7, 0, 1});
  run_done(&r);
}

/* XLA: integer add/multiply/negate/abs wrap in two's complement at the type's width. */
static void test_integer_arithmetic_wraps_at_type_width(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = s8[3] constant({127, -128, 100})\n"
                      "  b = s8[3] constant({1, -1, 3})\n"
                      "  s = s8[3] add(a, b)\n"
                      "  p = s8[3] multiply(a, b)\n"
                      "  n = s8[3] negate(a)\n"
                      "  x = s8[3] abs(a)\n"
                      "  u = u8[2] constant({200, 3})\n"
                      "  v = u8[2] multiply(u, u)\n"
                      "  k = u8[2] constant({201, 4})\n"
                      "  w = u8[2] subtract(u, k)\n"
                      "  ROOT t = (s8[3], s8[3], s8[3], s8[3], u8[2], u8[2]) tuple(s, p, n, x, v, w)\n"));
  expect_s64(r.result->tuple_elements[0], 3, (int64_t[]){-128, 127, 103});
  expect_s64(r.result->tuple_elements[1], 3, (int64_t[]){127, -128, 44}); /* 300 mod 256 = 44 */
  expect_s64(r.result->tuple_elements[2], 3, (int64_t[]){-127, -128, -100});
  expect_s64(r.result->tuple_elements[3], 3, (int64_t[]){127, -128, 100});
  expect_u64(r.result->tuple_elements[4], 2, (uint64_t[]){64, 9}); /* 40000 mod 256 = 64 */
  expect_u64(r.result->tuple_elements[5], 2, (uint64_t[]){255, 255});
  run_done(&r);
}

/* XLA: integer power: x^0 = 1, 1^y = 1, negative exponents give 0 for other bases,
 * otherwise repeated squaring with wrapping. */
static void test_integer_power(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = s32[6] constant({2, 2, 1, 0, 3, 2})\n"
                      "  b = s32[6] constant({10, -1, -5, 0, 3, 33})\n"
                      "  ROOT p = s32[6] power(a, b)\n"));
  expect_s64(r.result, 6, (int64_t[]){1024, 0, 1, 1, 27, 0});
  run_done(&r);
}

/* XLA: shift amounts are read as unsigned; amounts >= the bit width give 0 for
 * shift-left and shift-right-logical and the sign fill for shift-right-arithmetic. */
static void test_shifts_at_and_beyond_bit_width(void **state) {
  run_t r;
  run_text(&r, MODULE("  one = s32[4] constant({1, 1, 1, 1})\n"
                      "  sa = s32[4] constant({31, 32, 33, -1})\n"
                      "  l = s32[4] shift-left(one, sa)\n"
                      "  m8 = s32[4] constant({-8, -8, -8, 8})\n"
                      "  sb = s32[4] constant({1, 32, 100, 1})\n"
                      "  rl = s32[4] shift-right-logical(m8, sb)\n"
                      "  ra = s32[4] shift-right-arithmetic(m8, sb)\n"
                      "  u = u8[2] constant({128, 128})\n"
                      "  us = u8[2] constant({1, 8})\n"
                      "  ua = u8[2] shift-right-arithmetic(u, us)\n"
                      "  ROOT t = (s32[4], s32[4], s32[4], u8[2]) tuple(l, rl, ra, ua)\n"));
  expect_s64(r.result->tuple_elements[0], 4, (int64_t[]){INT32_MIN, 0, 0, 0});
  expect_s64(r.result->tuple_elements[1], 4, (int64_t[]){2147483644, 0, 0, 4});
  expect_s64(r.result->tuple_elements[2], 4, (int64_t[]){-4, -1, -1, 4});
  /* arithmetic shift of an unsigned value treats it as signed: 0x80 >> 1 = 0xC0 */
  expect_u64(r.result->tuple_elements[3], 2, (uint64_t[]){192, 255});
  run_done(&r);
}

static void test_popcnt_and_count_leading_zeros_use_type_width(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = s32[4] constant({0, 1, -1, 255})\n"
                      "  p = s32[4] popcnt(a)\n"
                      "  c = s32[4] count-leading-zeros(a)\n"
                      "  u = u8[3] constant({0, 1, 128})\n"
                      "  cu = u8[3] count-leading-zeros(u)\n"
                      "  ROOT t = (s32[4], s32[4], u8[3]) tuple(p, c, cu)\n"));
  expect_s64(r.result->tuple_elements[0], 4, (int64_t[]){0, 1, 32, 8});
  expect_s64(r.result->tuple_elements[1], 4, (int64_t[]){32, 31, 0, 24});
  expect_u64(r.result->tuple_elements[2], 3, (uint64_t[]){8, 7, 0});
  run_done(&r);
}

static void test_logical_ops_on_pred_and_bitwise_on_ints(void **state) {
  run_t r;
  run_text(&r, MODULE("  p = pred[4] constant({false, false, true, true})\n"
                      "  q = pred[4] constant({false, true, false, true})\n"
                      "  a = pred[4] and(p, q)\n"
                      "  o = pred[4] or(p, q)\n"
                      "  x = pred[4] xor(p, q)\n"
                      "  n = pred[4] not(p)\n"
                      "  i = s32[2] constant({12, -1})\n"
                      "  j = s32[2] constant({10, 5})\n"
                      "  ia = s32[2] and(i, j)\n"
                      "  in = s32[2] not(i)\n"
                      "  ix = s32[2] xor(i, j)\n"
                      "  ROOT t = (pred[4], pred[4], pred[4], pred[4], s32[2], s32[2], s32[2]) tuple(a, o, x, n, ia, in, ix)\n"));
  expect_s64(r.result->tuple_elements[0], 4, (int64_t[]){0, 0, 0, 1});
  expect_s64(r.result->tuple_elements[1], 4, (int64_t[]){0, 1, 1, 1});
  expect_s64(r.result->tuple_elements[2], 4, (int64_t[]){0, 1, 1, 0});
  expect_s64(r.result->tuple_elements[3], 4, (int64_t[]){1, 1, 0, 0});
  expect_s64(r.result->tuple_elements[4], 2, (int64_t[]){8, 5});
  expect_s64(r.result->tuple_elements[5], 2, (int64_t[]){-13, 0});
  expect_s64(r.result->tuple_elements[6], 2, (int64_t[]){6, -6});
  run_done(&r);
}

/* ---- floats ---- */

/* XLA: maximum/minimum propagate NaN from either side. */
static void test_float_max_min_propagate_nan(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = f32[3] constant({nan, 1, 2})\n"
                      "  b = f32[3] constant({1, nan, 3})\n"
                      "  mx = f32[3] maximum(a, b)\n"
                      "  mn = f32[3] minimum(a, b)\n"
                      "  ROOT t = (f32[3], f32[3]) tuple(mx, mn)\n"));
  expect_f64(r.result->tuple_elements[0], 3, (double[]){NAN, NAN, 3});
  expect_f64(r.result->tuple_elements[1], 3, (double[]){NAN, NAN, 2});
  run_done(&r);
}

static void test_float_arithmetic_and_fmod_remainder(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = f32[4] constant({5.5, -5.5, 1, 0})\n"
                      "  b = f32[4] constant({2, 2, 0, 0})\n"
                      "  rem = f32[4] remainder(a, b)\n"
                      "  div = f32[4] divide(a, b)\n"
                      "  x = f64[1] constant({1})\n"
                      "  y = f64[1] constant({3})\n"
                      "  third = f64[1] divide(x, y)\n"
                      "  ROOT t = (f32[4], f32[4], f64[1]) tuple(rem, div, third)\n"));
  /* remainder is C fmod: sign of the dividend; fmod(x, 0) = NaN */
  expect_f64(r.result->tuple_elements[0], 4, (double[]){1.5, -1.5, NAN, NAN});
  expect_f64(r.result->tuple_elements[1], 4, (double[]){2.75, -2.75, INFINITY, NAN});
  expect_f64(r.result->tuple_elements[2], 1, (double[]){1.0 / 3.0});
  run_done(&r);
}

/* XLA: pow(1, y) = 1 and pow(x, 0) = 1 even for NaN. */
static void test_float_power_special_cases(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = f32[4] constant({1, nan, 2, 4})\n"
                      "  b = f32[4] constant({nan, 0, -1, 0.5})\n"
                      "  ROOT p = f32[4] power(a, b)\n"));
  expect_f64(r.result, 4, (double[]){1, 1, 0.5, 2});
  run_done(&r);
}

/* XLA: sign keeps NaN and the sign of zero; integer sign is -1/0/1. */
static void test_sign_keeps_nan_and_signed_zero(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = f32[5] constant({-2, -0, 0, nan, 3})\n"
                      "  s = f32[5] sign(a)\n"
                      "  i = s32[3] constant({-5, 0, 5})\n"
                      "  si = s32[3] sign(i)\n"
                      "  ROOT t = (f32[5], s32[3]) tuple(s, si)\n"));
  expect_f64(r.result->tuple_elements[0], 5, (double[]){-1, -0.0, 0, NAN, 1});
  expect_s64(r.result->tuple_elements[1], 3, (int64_t[]){-1, 0, 1});
  run_done(&r);
}

/* round-nearest-afz rounds halves away from zero; round-nearest-even to even. */
static void test_rounding_modes(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = f32[5] constant({0.5, 1.5, 2.5, -0.5, -2.5})\n"
                      "  afz = f32[5] round-nearest-afz(a)\n"
                      "  even = f32[5] round-nearest-even(a)\n"
                      "  fl = f32[5] floor(a)\n"
                      "  ce = f32[5] ceil(a)\n"
                      "  ROOT t = (f32[5], f32[5], f32[5], f32[5]) tuple(afz, even, fl, ce)\n"));
  expect_f64(r.result->tuple_elements[0], 5, (double[]){1, 2, 3, -1, -3});
  expect_f64(r.result->tuple_elements[1], 5, (double[]){0, 2, 2, -0.0, -2});
  expect_f64(r.result->tuple_elements[2], 5, (double[]){0, 1, 2, -1, -3});
  expect_f64(r.result->tuple_elements[3], 5, (double[]){1, 2, 3, -0.0, -2});
  run_done(&r);
}

static void test_transcendentals_known_values(void **state) {
  run_t r;
  run_text(&r, MODULE("  z = f32[1] constant({0})\n"
                      "  four = f32[1] constant({4})\n"
                      "  one = f32[1] constant({1})\n"
                      "  e = f32[1] exponential(z)\n"
                      "  em = f32[1] exponential-minus-one(z)\n"
                      "  l = f32[1] log(one)\n"
                      "  lp = f32[1] log-plus-one(z)\n"
                      "  s = f32[1] sqrt(four)\n"
                      "  rs = f32[1] rsqrt(four)\n"
                      "  m27 = f32[1] constant({-27})\n"
                      "  cb = f32[1] cbrt(m27)\n"
                      "  lg = f32[1] logistic(z)\n"
                      "  th = f32[1] tanh(z)\n"
                      "  er = f32[1] erf(z)\n"
                      "  si = f32[1] sine(z)\n"
                      "  co = f32[1] cosine(z)\n"
                      "  ta = f32[1] tan(z)\n"
                      "  at = f32[1] atan2(one, one)\n"
                      "  ac = f32[1] acos(one)\n"
                      "  as = f32[1] asin(z)\n"
                      "  ach = f32[1] acosh(one)\n"
                      "  ash = f32[1] asinh(z)\n"
                      "  ath = f32[1] atanh(z)\n"
                      "  ch = f32[1] cosh(z)\n"
                      "  sh = f32[1] sinh(z)\n"
                      "  mone = f32[1] constant({-1})\n"
                      "  lm = f32[1] log(mone)\n"
                      "  ROOT t = (f32[1], f32[1], f32[1], f32[1], f32[1], f32[1], f32[1], f32[1], f32[1],"
                      " f32[1], f32[1], f32[1], f32[1], f32[1], f32[1], f32[1], f32[1], f32[1], f32[1], f32[1],"
                      " f32[1], f32[1]) tuple(e, em, l, lp, s, rs, cb, lg, th, er, si, co, ta, at, ac, as, ach,"
                      " ash, ath, ch, sh, lm)\n"));
  double want[] = {1, 0, 0, 0, 2, 0.5, -3, 0.5, 0, 0, 0, 1, 0, (float)(M_PI / 4), 0, 0, 0, 0, 0, 1, 0, NAN};
  for (int i = 0; i < 22; i++) expect_f64(r.result->tuple_elements[i], 1, &want[i]);
  run_done(&r);
}

static void test_is_finite(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = f32[4] constant({inf, -inf, nan, 1})\n"
                      "  ROOT f = pred[4] is-finite(a)\n"));
  expect_s64(r.result, 4, (int64_t[]){0, 0, 0, 1});
  run_done(&r);
}

/* XLA computes bf16 arithmetic in f32 and rounds the result to bf16 with round to
 * nearest, ties to even: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 -> 1 (even);
 * (1 + 2^-7) + 2^-8 is a tie between 1 + 2^-7 and 1 + 2^-6 -> 1 + 2^-6 (even). */
static void test_bf16_results_round_to_nearest_even(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = bf16[3] constant({1, 1.0078125, 1})\n"
                      "  b = bf16[3] constant({0.00390625, 0.00390625, 0.005859375})\n"
                      "  ROOT s = bf16[3] add(a, b)\n"));
  /* 1 + 0.005859375 = 1 + 3*2^-9: nearer to 1 + 2^-7 */
  expect_f64(r.result, 3, (double[]){1, 1.015625, 1.0078125});
  run_done(&r);
}

static void test_f16_overflow_rounds_to_inf(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = f16[2] constant({60000, 2})\n"
                      "  ROOT m = f16[2] multiply(a, a)\n"));
  expect_f64(r.result, 2, (double[]){INFINITY, 4});
  run_done(&r);
}

/* f8 arithmetic runs in f32 and rounds to the f8 format: in f8e4m3fn 1 + 1/16 is a tie
 * between 1 and 1.125 -> 1 (even); 448 + 64 is beyond the largest finite value and the
 * format has no infinity -> NaN. */
static void test_f8e4m3fn_results_round_and_overflow_to_nan(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = f8e4m3fn[3] constant({1, 448, 1.125})\n"
                      "  b = f8e4m3fn[3] constant({0.0625, 64, 0.0625})\n"
                      "  ROOT s = f8e4m3fn[3] add(a, b)\n"));
  /* 1.125 + 0.0625 = 1.1875: tie between 1.125 (odd mantissa) and 1.25 (even) -> 1.25 */
  expect_f64(r.result, 3, (double[]){1, NAN, 1.25});
  run_done(&r);
}

/* ---- compare ---- */

/* XLA: FLOAT compares follow IEEE (NaN unordered, -0 == +0); TOTALORDER orders
 * -NaN < -inf < ... < -0 < +0 < ... < inf < +NaN. */
static void test_compare_float_vs_totalorder(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = f32[6] constant({-nan, -inf, -0, 0, 1, inf})\n"
                      "  b = f32[6] constant({-inf, -0, 0, 0, nan, nan})\n"
                      "  lt = pred[6] compare(a, b), direction=LT\n"
                      "  tlt = pred[6] compare(a, b), direction=LT, type=TOTALORDER\n"
                      "  eq = pred[6] compare(a, b), direction=EQ\n"
                      "  teq = pred[6] compare(a, b), direction=EQ, type=TOTALORDER\n"
                      "  ne = pred[6] compare(a, b), direction=NE\n"
                      "  ROOT t = (pred[6], pred[6], pred[6], pred[6], pred[6]) tuple(lt, tlt, eq, teq, ne)\n"));
  expect_s64(r.result->tuple_elements[0], 6, (int64_t[]){0, 1, 0, 0, 0, 0});
  expect_s64(r.result->tuple_elements[1], 6, (int64_t[]){1, 1, 1, 0, 1, 1});
  expect_s64(r.result->tuple_elements[2], 6, (int64_t[]){0, 0, 1, 1, 0, 0});
  expect_s64(r.result->tuple_elements[3], 6, (int64_t[]){0, 0, 0, 1, 0, 0});
  expect_s64(r.result->tuple_elements[4], 6, (int64_t[]){1, 1, 0, 0, 1, 1});
  run_done(&r);
}

/* TOTALORDER on narrow floats orders NaNs by their stored bits, as the compiled compare does
 * (fuzz-2422341): converted to f32 first, the signaling NaN f8e5m2 0xFD became a quiet one and
 * sorted after 0xFE. f8e5m2: -NaN 0xFF < 0xFE < 0xFD (signaling) < -inf 0xFC; +NaN 0x7D < 0x7E;
 * f16 0xFC01 (-sNaN) after 0xFE00 (-qNaN); the fnuz NaN 0x80 after the largest number;
 * f8e8m0fnu (no sign) by its bits. */
static void test_compare_totalorder_of_narrow_float_nans_follows_their_bits(void **state) {
  run_t r;
  run_text(&r,
           MODULE("  ua = u8[5] constant({255, 254, 253, 125, 128})\n"
                  "  ub = u8[5] constant({254, 253, 252, 126, 1})\n"
                  "  a = f8e5m2[5] bitcast-convert(ua)\n"
                  "  b = f8e5m2[5] bitcast-convert(ub)\n"
                  "  lt = pred[5] compare(a, b), direction=LT, type=TOTALORDER\n"
                  "  ha = u16[2] constant({65025, 64513})\n"
                  "  hb = u16[2] constant({64513, 65024})\n"
                  "  fa = f16[2] bitcast-convert(ha)\n"
                  "  fb = f16[2] bitcast-convert(hb)\n"
                  "  hlt = pred[2] compare(fa, fb), direction=LT, type=TOTALORDER\n"
                  "  za = f8e4m3fnuz[2] bitcast-convert(u8[2] constant({128, 127}))\n"
                  "  zb = f8e4m3fnuz[2] bitcast-convert(u8[2] constant({127, 128}))\n"
                  "  zgt = pred[2] compare(za, zb), direction=GT, type=TOTALORDER\n"
                  "  ea = f8e8m0fnu[2] bitcast-convert(u8[2] constant({255, 1}))\n"
                  "  eb = f8e8m0fnu[2] bitcast-convert(u8[2] constant({254, 2}))\n"
                  "  egt = pred[2] compare(ea, eb), direction=GT, type=TOTALORDER\n"
                  "  ROOT t = (pred[5], pred[2], pred[2], pred[2]) tuple(lt, hlt, zgt, egt)\n"));
  expect_s64(r.result->tuple_elements[0], 5, (int64_t[]){1, 1, 1, 1, 1});
  expect_s64(r.result->tuple_elements[1], 2, (int64_t[]){1, 0});
  expect_s64(r.result->tuple_elements[2], 2, (int64_t[]){1, 0});
  expect_s64(r.result->tuple_elements[3], 2, (int64_t[]){1, 0});
  run_done(&r);
}

/* SIGNED / UNSIGNED comparisons follow the element type (or the explicit type). */
static void test_compare_signed_and_unsigned(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = s32[2] constant({-1, 2})\n"
                      "  b = s32[2] constant({1, 2})\n"
                      "  s = pred[2] compare(a, b), direction=LT\n"
                      "  ge = pred[2] compare(a, b), direction=GE\n"
                      "  u = u32[2] constant({4294967295, 0})\n"
                      "  v = u32[2] constant({1, 0})\n"
                      "  us = pred[2] compare(u, v), direction=GT\n"
                      "  c = c64[2] constant({(1, 2), (1, 3)})\n"
                      "  d = c64[2] constant({(1, 2), (1, 2)})\n"
                      "  ce = pred[2] compare(c, d), direction=EQ\n"
                      "  ROOT t = (pred[2], pred[2], pred[2], pred[2]) tuple(s, ge, us, ce)\n"));
  expect_s64(r.result->tuple_elements[0], 2, (int64_t[]){1, 0});
  expect_s64(r.result->tuple_elements[1], 2, (int64_t[]){0, 1});
  expect_s64(r.result->tuple_elements[2], 2, (int64_t[]){1, 0});
  expect_s64(r.result->tuple_elements[3], 2, (int64_t[]){1, 0});
  run_done(&r);
}

/* ---- select / clamp ---- */

static void test_select_with_array_and_scalar_predicates(void **state) {
  run_t r;
  run_text(&r, MODULE("  p = pred[3] constant({true, false, true})\n"
                      "  a = s32[3] constant({1, 2, 3})\n"
                      "  b = s32[3] constant({10, 20, 30})\n"
                      "  s = s32[3] select(p, a, b)\n"
                      "  q = pred[] constant(false)\n"
                      "  sc = s32[3] select(q, a, b)\n"
                      "  ROOT t = (s32[3], s32[3]) tuple(s, sc)\n"));
  expect_s64(r.result->tuple_elements[0], 3, (int64_t[]){1, 20, 3});
  expect_s64(r.result->tuple_elements[1], 3, (int64_t[]){10, 20, 30});
  run_done(&r);
}

/* XLA: clamp(lo, x, hi) with scalar bounds broadcast; a NaN operand gives NaN. */
static void test_clamp_with_scalar_bounds_and_nan(void **state) {
  run_t r;
  run_text(&r, MODULE("  lo = f32[] constant(0)\n"
                      "  hi = f32[] constant(1)\n"
                      "  x = f32[4] constant({-1, 0.5, 2, nan})\n"
                      "  c = f32[4] clamp(lo, x, hi)\n"
                      "  ilo = s32[] constant(-2)\n"
                      "  ihi = s32[] constant(2)\n"
                      "  ix = s32[3] constant({-5, 1, 7})\n"
                      "  ic = s32[3] clamp(ilo, ix, ihi)\n"
                      "  ROOT t = (f32[4], s32[3]) tuple(c, ic)\n"));
  expect_f64(r.result->tuple_elements[0], 4, (double[]){0, 0.5, 1, NAN});
  expect_s64(r.result->tuple_elements[1], 3, (int64_t[]){-2, 1, 2});
  run_done(&r);
}

/* ---- convert ---- */

/* XLA: float -> int converts NaN to 0 and saturates out-of-range values. */
static void test_convert_float_to_int_saturates_and_nan_is_zero(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = f32[6] constant({nan, 3e9, -3e9, -1.9, 1.9, inf})\n"
                      "  s = s32[6] convert(a)\n"
                      "  b = f32[5] constant({nan, 300, -5, 255.9, 1.5})\n"
                      "  u = u8[5] convert(b)\n"
                      "  d = f64[2] constant({1e300, -1e300})\n"
                      "  l = s64[2] convert(d)\n"
                      "  ROOT t = (s32[6], u8[5], s64[2]) tuple(s, u, l)\n"));
  expect_s64(r.result->tuple_elements[0], 6, (int64_t[]){0, INT32_MAX, INT32_MIN, -1, 1, INT32_MAX});
  expect_u64(r.result->tuple_elements[1], 5, (uint64_t[]){0, 255, 0, 255, 1});
  expect_s64(r.result->tuple_elements[2], 2, (int64_t[]){INT64_MAX, INT64_MIN});
  run_done(&r);
}

/* XLA: integer -> narrower integer wraps (two's complement truncation). */
static void test_convert_int_to_narrow_int_wraps(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = s32[4] constant({200, -129, 256, -1})\n"
                      "  b = s8[4] convert(a)\n"
                      "  c = u16[4] convert(a)\n"
                      "  ROOT t = (s8[4], u16[4]) tuple(b, c)\n"));
  expect_s64(r.result->tuple_elements[0], 4, (int64_t[]){-56, 127, 0, -1});
  expect_u64(r.result->tuple_elements[1], 4, (uint64_t[]){200, 65407, 256, 65535});
  run_done(&r);
}

/* to pred is != 0 (NaN is true); from pred gives 0/1; complex -> real takes the real part;
 * narrowing rounds to nearest even (257 is a tie in bf16 -> 256; 16777217 in f32 -> 16777216). */
static void test_convert_pred_complex_and_rounding(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = f32[4] constant({0, -0, 0.5, nan})\n"
                      "  p = pred[4] convert(a)\n"
                      "  f = f32[4] convert(p)\n"
                      "  c = c64[2] constant({(1.5, 2), (-3, 4)})\n"
                      "  re = f32[2] convert(c)\n"
                      "  i = s32[2] constant({257, 16777217})\n"
                      "  bf = bf16[2] convert(i)\n"
                      "  fl = f32[2] convert(i)\n"
                      "  ROOT t = (pred[4], f32[4], f32[2], bf16[2], f32[2]) tuple(p, f, re, bf, fl)\n"));
  expect_s64(r.result->tuple_elements[0], 4, (int64_t[]){0, 0, 1, 1});
  expect_f64(r.result->tuple_elements[1], 4, (double[]){0, 0, 1, 1});
  expect_f64(r.result->tuple_elements[2], 2, (double[]){1.5, -3});
  expect_f64(r.result->tuple_elements[3], 2, (double[]){256, 16777216});
  expect_f64(r.result->tuple_elements[4], 2, (double[]){257, 16777216});
  run_done(&r);
}

/* f32 -> bf16 rounds to nearest even: 1 + 2^-8 -> 1, 1 + 3*2^-9 -> 1 + 2^-7. */
static void test_convert_f32_to_bf16_rounds_to_nearest_even(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = f32[3] constant({1.00390625, 1.005859375, 1.01171875})\n"
                      "  ROOT b = bf16[3] convert(a)\n"));
  expect_f64(r.result, 3, (double[]){1, 1.0078125, 1.015625});
  run_done(&r);
}

/* ---- bitcast-convert / reduce-precision ---- */

/* Same width reinterprets bits; a narrower result adds a minor dimension (little-endian). */
static void test_bitcast_convert_same_and_different_widths(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = f32[2] constant({1, -2})\n"
                      "  u = u32[2] bitcast-convert(a)\n"
                      "  b = u8[2,4] bitcast-convert(a)\n"
                      "  c = u8[1,4] constant({ {0, 0, 128, 63} })\n"
                      "  f = f32[1] bitcast-convert(c)\n"
                      "  ROOT t = (u32[2], u8[2,4], f32[1]) tuple(u, b, f)\n"));
  expect_u64(r.result->tuple_elements[0], 2, (uint64_t[]){0x3F800000u, 0xC0000000u});
  expect_u64(r.result->tuple_elements[1], 8, (uint64_t[]){0, 0, 128, 63, 0, 0, 0, 192});
  expect_f64(r.result->tuple_elements[2], 1, (double[]){1});
  run_done(&r);
}

/* XLA's reduce-precision: mantissa rounds to nearest even; exponents above the reduced
 * range become inf, below it flush to (signed) zero; NaN stays NaN. */
static void test_reduce_precision_rounding_overflow_underflow_nan(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = f32[4] constant({1.00390625, 1.005859375, -3.5, nan})\n"
                      "  b = f32[4] reduce-precision(a), exponent_bits=8, mantissa_bits=7\n"
                      "  c = f32[4] constant({70000, -1e-8, 65504, 1})\n"
                      "  d = f32[4] reduce-precision(c), exponent_bits=5, mantissa_bits=10\n"
                      "  ROOT t = (f32[4], f32[4]) tuple(b, d)\n"));
  expect_f64(r.result->tuple_elements[0], 4, (double[]){1, 1.0078125, -3.5, NAN});
  expect_f64(r.result->tuple_elements[1], 4, (double[]){INFINITY, -0.0, 65504, 1});
  run_done(&r);
}

/* ---- complex ---- */

static void test_complex_construct_multiply_real_imag_abs(void **state) {
  run_t r;
  run_text(&r, MODULE("  re = f32[2] constant({1, 3})\n"
                      "  im = f32[2] constant({2, 4})\n"
                      "  c = c64[2] complex(re, im)\n"
                      "  d = c64[2] constant({(3, 4), (1, 0)})\n"
                      "  m = c64[2] multiply(c, d)\n"
                      "  r = f32[2] real(m)\n"
                      "  i = f32[2] imag(m)\n"
                      "  a = f32[2] abs(d)\n"
                      "  ROOT t = (f32[2], f32[2], f32[2]) tuple(r, i, a)\n"));
  /* (1+2i)(3+4i) = -5+10i; (3+4i)(1+0i) = 3+4i */
  expect_f64(r.result->tuple_elements[0], 2, (double[]){-5, 3});
  expect_f64(r.result->tuple_elements[1], 2, (double[]){10, 4});
  expect_f64(r.result->tuple_elements[2], 2, (double[]){5, 1});
  run_done(&r);
}

/* ---- unsupported ---- */

/* XLA's stochastic-convert: |x| is truncated and rounded up when the random bits are below
 * frac(|x|) * 2^32; NaN -> 0, +-inf and out-of-range values saturate; exact integers stay. */
static void test_stochastic_convert_rounds_by_random_bits(void **state) {
  run_t r;
  run_text(&r, MODULE("  a = f32[9] constant({2.25, 2.25, -2.25, -2.25, nan, inf, -inf, 3e9, 5})\n"
                      "  b = u32[9] constant({1073741823, 1073741824, 0, 4294967295, 0, 0, 0, 0, 0})\n"
                      "  ROOT s = s32[9] stochastic-convert(a, b)\n"));
  expect_s64(r.result, 9, (int64_t[]){3, 2, -3, -2, 0, INT32_MAX, INT32_MIN, INT32_MAX, 5});
  run_done(&r);
}

static void test_wrong_element_type_is_invalid_argument(void **state) {
  expect_error(MODULE("  a = s32[2] constant({1, 2})\n"
                      "  ROOT f = s32[2] floor(a)\n"),
               KILN_INVALID_ARGUMENT, "floor");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_signed_divide_by_zero_and_int_min_by_minus_one),
      cmocka_unit_test(test_signed_remainder_by_zero_and_int_min_by_minus_one),
      cmocka_unit_test(test_unsigned_divide_and_remainder_by_zero),
      cmocka_unit_test(test_integer_arithmetic_wraps_at_type_width),
      cmocka_unit_test(test_integer_power),
      cmocka_unit_test(test_shifts_at_and_beyond_bit_width),
      cmocka_unit_test(test_popcnt_and_count_leading_zeros_use_type_width),
      cmocka_unit_test(test_logical_ops_on_pred_and_bitwise_on_ints),
      cmocka_unit_test(test_float_max_min_propagate_nan),
      cmocka_unit_test(test_float_arithmetic_and_fmod_remainder),
      cmocka_unit_test(test_float_power_special_cases),
      cmocka_unit_test(test_sign_keeps_nan_and_signed_zero),
      cmocka_unit_test(test_rounding_modes),
      cmocka_unit_test(test_transcendentals_known_values),
      cmocka_unit_test(test_is_finite),
      cmocka_unit_test(test_bf16_results_round_to_nearest_even),
      cmocka_unit_test(test_f16_overflow_rounds_to_inf),
      cmocka_unit_test(test_f8e4m3fn_results_round_and_overflow_to_nan),
      cmocka_unit_test(test_compare_float_vs_totalorder),
      cmocka_unit_test(test_compare_signed_and_unsigned),
      cmocka_unit_test(test_compare_totalorder_of_narrow_float_nans_follows_their_bits),
      cmocka_unit_test(test_select_with_array_and_scalar_predicates),
      cmocka_unit_test(test_clamp_with_scalar_bounds_and_nan),
      cmocka_unit_test(test_convert_float_to_int_saturates_and_nan_is_zero),
      cmocka_unit_test(test_convert_int_to_narrow_int_wraps),
      cmocka_unit_test(test_convert_pred_complex_and_rounding),
      cmocka_unit_test(test_convert_f32_to_bf16_rounds_to_nearest_even),
      cmocka_unit_test(test_bitcast_convert_same_and_different_widths),
      cmocka_unit_test(test_reduce_precision_rounding_overflow_underflow_nan),
      cmocka_unit_test(test_complex_construct_multiply_real_imag_abs),
      cmocka_unit_test(test_stochastic_convert_rounds_by_random_bits),
      cmocka_unit_test(test_wrong_element_type_is_invalid_argument),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
