/* Complex math in the elemental emitter ((re, im) pairs): every transcendental op on c64 and
 * c128 runs on the host and matches the reference evaluator (C's <complex.h>), on inputs in
 * [-3, 3) for both parts, where neither side over- or underflows; bitcast-convert between widths
 * and complex types bit-exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tools/common/fusion_runner.h"

/* One fusion applying `op` (unary, or binary with p1) to p0 of type `ty`. */
static void check_op(const char *ty, const char *op, bool binary, int64_t max_ulp) {
  char text[1024];
  snprintf(text, sizeof text,
           "f {\n  p0 = %s[257] parameter(0)\n  p1 = %s[257] parameter(1)\n"
           "  ROOT r = %s[257] %s(p0%s)\n}\n",
           ty, ty, ty, op, binary ? ", p1" : "");
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_computations(text, strlen(text), NULL, &m);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  kiln_runner_options_t o;
  kiln_runner_options_init(&o);
  o.float_lo = -3.0;
  o.float_hi = 3.0;
  o.max_ulp = max_ulp;
  kiln_runner_report_t r;
  s = kiln_runner_check(m->entry, &o, &r);
  if (s) fprintf(stderr, "%s %s: %s\n", ty, op, kiln_status_message(s));
  assert_null(s);
  printf("%-5s %-22s %lld elements, max %lld ulp (tolerance %lld)\n", ty, op, (long long)r.elements,
         (long long)r.max_ulp, (long long)r.tolerance);
  if (r.mismatches) fprintf(stderr, "%s %s: %s\n", ty, op, r.first_mismatch);
  assert_int_equal(r.mismatches, 0);
  assert_int_equal(r.elements, 257);
  kiln_hlo_module_destroy(m);
}

static const char *const kUnary[] = {
    "sine",
    "cosine",
    "tan",
    "tanh",
    "sinh",
    "cosh",
    "exponential-minus-one",
    "log-plus-one",
    "logistic",
    "sqrt",
    "rsqrt",
    "sign",
    "exponential",
    "log",
    "asin",
    "acos",
    "asinh",
    "acosh",
    "atanh",
    "bitcast-convert",
};

static void test_unary_complex_math(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof kUnary / sizeof kUnary[0]; i++) {
    check_op("c64", kUnary[i], false, 32);
    check_op("c128", kUnary[i], false, 32);
  }
}

static void test_complex_power(void **state) {
  (void)state;
  check_op("c64", "power", true, 32);
  check_op("c128", "power", true, 32);
}

/* One fusion computation, run on the host and compared bit-exactly with the evaluator. */
static void check_exact(const char *text, int64_t elements) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_computations(text, strlen(text), NULL, &m);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  kiln_runner_report_t r;
  s = kiln_runner_check(m->entry, NULL, &r);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  if (r.mismatches) fprintf(stderr, "%s\n", r.first_mismatch);
  assert_int_equal(r.mismatches, 0);
  assert_int_equal(r.max_ulp, 0);
  assert_int_equal(r.elements, elements);
  kiln_hlo_module_destroy(m);
}

/* Concatenate (the loop emitter's elemental form) and pad of complex values. */
static void test_complex_concatenate_and_pad(void **state) {
  (void)state;
  check_exact(
      "f {\n  p0 = c64[2,3] parameter(0)\n  p1 = c64[2,5] parameter(1)\n"
      "  ROOT c = c64[2,8] concatenate(p0, p1), dimensions={1}\n}\n",
      16);
  check_exact(
      "f {\n  p2 = c128[7] parameter(0)\n  z = c128[] constant((1.5, -2))\n"
      "  ROOT pd = c128[12] pad(p2, z), padding=2_3\n}\n",
      12);
}

/* Reduce and reduce-window of complex values: the reducer (a scalar computation) runs on
 * (re, im) pairs: a complex sum, a min by (re, im) in lexicographic order through real/imag/
 * compare/select (as JAX writes it), and a variadic reduce of a complex and an s32 operand. */
static void test_complex_reduce(void **state) {
  (void)state;
  check_exact(
      "add {\n  a = c64[] parameter(0)\n  b = c64[] parameter(1)\n"
      "  ROOT s = c64[] add(a, b)\n}\n"
      "f {\n  p0 = c64[5,7] parameter(0)\n  z = c64[] constant((0.5, -1))\n"
      "  ROOT r = c64[7] reduce(p0, z), dimensions={0}, to_apply=add\n}\n",
      7);
  check_exact(
      "mn {\n  a = c128[] parameter(0)\n  b = c128[] parameter(1)\n"
      "  ar = f64[] real(a)\n  br = f64[] real(b)\n  ai = f64[] imag(a)\n  bi = f64[] imag(b)\n"
      "  eq = pred[] compare(ar, br), direction=EQ\n  lt = pred[] compare(ar, br), direction=LT\n"
      "  li = pred[] compare(ai, bi), direction=LT\n  c = pred[] select(eq, li, lt)\n"
      "  ROOT s = c128[] select(c, a, b)\n}\n"
      "f {\n  p0 = c128[6,9] parameter(0)\n  z = c128[] constant((inf, 0))\n"
      "  ROOT r = c128[6] reduce(p0, z), dimensions={1}, to_apply=mn\n}\n",
      6);
  check_exact(
      "pair {\n  a = c64[] parameter(0)\n  i = s32[] parameter(1)\n  b = c64[] parameter(2)\n"
      "  j = s32[] parameter(3)\n  s = c64[] add(a, b)\n  k = s32[] add(i, j)\n"
      "  ROOT t = (c64[], s32[]) tuple(s, k)\n}\n"
      "f {\n  p0 = c64[4,3] parameter(0)\n  p1 = s32[4,3] parameter(1)\n"
      "  z = c64[] constant((0, 0))\n  zi = s32[] constant(0)\n"
      "  ROOT r = (c64[3], s32[3]) reduce(p0, p1, z, zi), dimensions={0}, to_apply=pair\n}\n",
      6);
  check_exact(
      "add {\n  a = c128[] parameter(0)\n  b = c128[] parameter(1)\n"
      "  ROOT s = c128[] add(a, b)\n}\n"
      "f {\n  p0 = c128[8] parameter(0)\n  z = c128[] constant((0, 0))\n"
      "  ROOT r = c128[7] reduce-window(p0, z), window={size=2}, to_apply=add\n}\n",
      7);
}

/* bitcast-convert between widths and to / from complex types (little-endian pieces: a narrow
 * element k holds bits [k*w, (k+1)*w) of the wide one; a complex value's real part is its low
 * half), each way, matching the evaluator bit for bit. */
static void test_bitcast_convert_between_widths(void **state) {
  (void)state;
  static const struct {
    const char *from, *to;
    int64_t elements;
  } kCases[] = {
      {"c128[5]", "c64[5,2]", 10}, {"c64[3,2]", "c128[3]", 3}, {"c64[4]", "f32[4,2]", 8},
      {"f32[4,2]", "c64[4]", 4},   {"c64[6]", "f64[6]", 6},    {"s64[6]", "c64[6]", 6},
      {"c128[3]", "u16[3,8]", 24}, {"u8[2,16]", "c128[2]", 2}, {"f64[5]", "f32[5,2]", 10},
      {"f32[5,2]", "f64[5]", 5},   {"s32[3]", "s8[3,4]", 12},  {"u16[7,2]", "f32[7]", 7},
      {"c128[]", "c64[2]", 2},     {"bf16[2,4]", "c64[2]", 2}, {"c64[2,3]", "u32[2,3,2]", 12},
  };
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; i++) {
    char text[256];
    snprintf(text, sizeof text,
             "f {\n  p0 = %s parameter(0)\n  ROOT r = %s bitcast-convert(p0)\n}\n", kCases[i].from,
             kCases[i].to);
    printf("bitcast-convert %s -> %s\n", kCases[i].from, kCases[i].to);
    check_exact(text, kCases[i].elements);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unary_complex_math),
      cmocka_unit_test(test_complex_power),
      cmocka_unit_test(test_complex_concatenate_and_pad),
      cmocka_unit_test(test_complex_reduce),
      cmocka_unit_test(test_bitcast_convert_between_widths),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
