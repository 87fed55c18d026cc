/* Special functions: CHLO's erfc, bessel_i1e, digamma, zeta, polygamma and next_after as JAX
 * sends them (converted to xla_builder.math.* custom calls), checked against values computed with
 * mpmath at 30 digits on the reference evaluator and on the host backend; then the compiled
 * series (compiler/passes/special_math.c) against the evaluator's long double reference
 * (compiler/eval/eval_special.c; erfc: libm) over sweeps of f32 and f64 inputs, in units in
 * the last place, and the special values (poles, domains, infinities, NaN) element for
 * element; and the corpus's xla_builder.math.Polygamma module at inputs where it has a value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "base/alloc.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "runtime/host/host_device.h"
#include "tools/common/device_run.h"
#include "tools/common/hlo_file.h"
#include "tests/stablehlo_test_util.h"

static const char kProgram[] =
    "func.func @erfc_f64() {\n"
    "  %x = stablehlo.constant dense<[-3.0, -0.5, 0.0, 0.4, 0.5, 1.0, 2.5, 5.0, 10.0, 26.0, "
    "0x7FF0000000000000, 0xFFF0000000000000]> : tensor<12xf64>\n"
    "  %r = chlo.erfc %x : tensor<12xf64> -> tensor<12xf64>\n"
    "  check.expect_almost_eq_const %r, dense<[1.9999779095030014, 1.5204998778130465, 1.0, "
    "0.57160764495333152, 0.47950012218695346, 0.15729920705028513, 4.0695201744495894e-4, "
    "1.5374597944280349e-12, 2.0884875837625448e-45, 5.6631924088561428e-296, 0.0, 2.0]> : "
    "tensor<12xf64> {tolerance = 1.0e-13 : f64}\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @erfc_f32() {\n"
    "  %x = stablehlo.constant dense<[-3.0, 0.4, 0.5, 1.0, 2.5, 5.0]> : tensor<6xf32>\n"
    "  %r = chlo.erfc %x : tensor<6xf32> -> tensor<6xf32>\n"
    "  check.expect_almost_eq_const %r, dense<[1.9999779, 0.57160764, 0.47950012, 0.15729921, "
    "4.0695202e-4, 1.5374598e-12]> : tensor<6xf32> {tolerance = 1.0e-6 : f64}\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @bessel_i1e_f64() {\n"
    "  %x = stablehlo.constant dense<[0.0, 1.0e-3, 0.5, -1.0, 2.5, 7.99, 8.0, -12.0, 50.0, "
    "700.0, 0xFFF0000000000000]> : tensor<11xf64>\n"
    "  %r = chlo.bessel_i1e %x : tensor<11xf64> -> tensor<11xf64>\n"
    "  check.expect_almost_eq_const %r, dense<[0.0, 4.9950031235422135e-4, 0.1564208031848717, "
    "-0.20791041534970845, 0.20658464953126655, 0.13421733957828099, 0.13414249329269818, "
    "-0.11146429929018098, 0.0559931238928954, 0.015070519444716847, 0.0]> : tensor<11xf64> "
    "{tolerance = 1.0e-13 : f64}\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @digamma_f64() {\n"
    "  %x = stablehlo.constant dense<[-2.5, -0.25, 1.0e-3, 0.5, 1.0, 1.4616321449683623, 3.0, "
    "10.0, 1000.0, -2.0, 0.0, 0x7FF0000000000000]> : tensor<12xf64>\n"
    "  %r = chlo.digamma %x : tensor<12xf64> -> tensor<12xf64>\n"
    "  check.expect_almost_eq_const %r, dense<[1.1031566406452432, 2.9141391202135278, "
    "-1000.5755719318103, -1.9635100260214235, -0.57721566490153286, -9.2412655217294275e-17, "
    "0.92278433509846714, 2.2517525890667211, 6.9072551956488121, 0x7FF8000000000000, "
    "0x7FF8000000000000, 0x7FF0000000000000]> : tensor<12xf64> {tolerance = 1.0e-13 : f64}\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @digamma_bf16() {\n"
    "  %x = stablehlo.constant dense<[0.5, 3.0, -2.5]> : tensor<3xbf16>\n"
    "  %r = chlo.digamma %x : tensor<3xbf16> -> tensor<3xbf16>\n"
    "  check.expect_almost_eq_const %r, dense<[-1.9635, 0.92278, 1.10316]> : tensor<3xbf16> "
    "{tolerance = 1.0e-2 : f64}\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @zeta_f64() {\n"
    "  %s = stablehlo.constant dense<[2.0, 3.0, 1.5, 4.0, 20.0, 1.01, 1.0, 0.5, 2.0, 3.0, "
    "2.5]> : tensor<11xf64>\n"
    "  %q = stablehlo.constant dense<[1.0, 2.0, 0.5, 10.0, 0.75, 1.0, 3.0, 3.0, -1.0, -1.0, "
    "-0.5]> : tensor<11xf64>\n"
    "  %r = chlo.zeta %s, %q : tensor<11xf64>, tensor<11xf64> -> tensor<11xf64>\n"
    "  check.expect_almost_eq_const %r, dense<[1.6449340668482264, 0.20205690315959429, "
    "4.7765379475548332, 3.8665021738164473e-4, 315.33686898253157, 100.57794333849678, "
    "0x7FF0000000000000, 0x7FF8000000000000, 0x7FF0000000000000, 0x7FF8000000000000, "
    "0x7FF8000000000000]> : tensor<11xf64> {tolerance = 1.0e-13 : f64}\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @zeta_broadcast_f32() {\n"
    "  %s = stablehlo.constant dense<2.0> : tensor<f32>\n"
    "  %q = stablehlo.constant dense<[1.0, 10.0]> : tensor<2xf32>\n"
    "  %r = chlo.broadcast_zeta %s, %q : (tensor<f32>, tensor<2xf32>) -> tensor<2xf32>\n"
    "  check.expect_almost_eq_const %r, dense<[1.6449341, 0.10516634]> : tensor<2xf32> "
    "{tolerance = 1.0e-6 : f64}\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @polygamma_f64() {\n"
    "  %n = stablehlo.constant dense<[0.0, 1.0, 2.0, 3.0, 5.0, 1.5, -1.0, 1.0]> : "
    "tensor<8xf64>\n"
    "  %x = stablehlo.constant dense<[3.0, 1.0, 0.5, 10.0, 2.5, 1.0, 1.0, 0.0]> : "
    "tensor<8xf64>\n"
    "  %r = chlo.polygamma %n, %x : tensor<8xf64>, tensor<8xf64> -> tensor<8xf64>\n"
    "  check.expect_almost_eq_const %r, dense<[0.92278433509846714, 1.6449340668482264, "
    "-16.82879664423432, 0.0023199013042898684, 0.57856917856718348, 0x7FF8000000000000, "
    "0x7FF8000000000000, 0x7FF0000000000000]> : tensor<8xf64> {tolerance = 1.0e-13 : f64}\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @next_after_f32() {\n"
    "  %x = stablehlo.constant dense<[1.0, 1.0, 0.0]> : tensor<3xf32>\n"
    "  %y = stablehlo.constant dense<[2.0, 0.0, -1.0]> : tensor<3xf32>\n"
    "  %r = chlo.next_after %x, %y : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>\n"
    "  %b = stablehlo.bitcast_convert %r : (tensor<3xf32>) -> tensor<3xui32>\n"
    "  check.expect_eq_const %b, dense<[1065353217, 1065353215, 2147483649]> : tensor<3xui32>\n"
    "  func.return\n"
    "}\n";

enum { kFunctions = 9 };

static void run_program(kiln_device_t *dev) {
  kiln_test_run_checks(kProgram, sizeof kProgram - 1, "special.mlir", dev, kFunctions);
}

static void test_chlo_special_functions_on_the_reference_evaluator(void **state) {
  (void)state;
  run_program(NULL);
}

static void test_chlo_special_functions_on_the_host_backend(void **state) {
  (void)state;
  kiln_device_t *dev = NULL;
  assert_null(kiln_host_device_create(0, &dev));
  run_program(dev);
  kiln_device_destroy(dev);
}

/* ---- the compiled series against the long double reference ---- */

#define N 4096

/* A float's bits as an integer that orders like the values (-0 and +0 both 0). */
static int64_t ordered(double v, bool f64) {
  if (f64) {
    int64_t a;
    memcpy(&a, &v, 8);
    return a < 0 ? INT64_MIN - a : a;
  }
  float f = (float)v;
  int32_t a;
  memcpy(&a, &f, 4);
  return a < 0 ? (int64_t)INT32_MIN - a : a;
}

/* Distance in units in the last place between two floats of one type (0 for two NaNs,
 * INT64_MAX when only one is NaN). */
static int64_t ulps(double got, double want, bool f64) {
  if (isnan(got) || isnan(want)) return isnan(got) && isnan(want) ? 0 : INT64_MAX;
  int64_t a = ordered(got, f64), b = ordered(want, f64); /* both above INT64_MIN */
  if ((a < 0) == (b < 0)) return a > b ? a - b : b - a;
  uint64_t d = (uint64_t)(a < 0 ? -a : a) + (uint64_t)(b < 0 ? -b : b);
  return d > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)d;
}

typedef struct {
  const char *target;
  int operands;
  /* input i of operand k */
  double (*input)(int k, int i);
  /* the largest error allowed, in ulps of max(|want|, floor) */
  int64_t max_ulp_f32, max_ulp_f64;
  double floor; /* 0: ulps of the value itself */
} sweep_t;

/* Deterministic inputs spread over each function's range, ends and special values first. */
static double erfc_in(int k, int i) {
  (void)k;
  static const double special[] = {INFINITY, -INFINITY, NAN, 0.0, -0.0, 0.5, 0.49999999, 1e-30};
  if (i < 8) return special[i];
  return -6.0 + 34.0 * (i - 8) / (N - 9); /* past f64's underflow at 27.2 */
}

static double bessel_in(int k, int i) {
  (void)k;
  static const double special[] = {INFINITY, -INFINITY, NAN, 0.0, -0.0, 8.0, -8.0, 1e-300};
  if (i < 8) return special[i];
  if (i < N / 2) return -30.0 + 60.0 * (i - 8) / (N / 2 - 8);
  return pow(10.0, 1.0 + 5.0 * (i - N / 2) / (N / 2)); /* 10 .. 1e6 */
}

static double digamma_in(int k, int i) {
  (void)k;
  static const double special[] = {INFINITY, -INFINITY, NAN, 0.0, -3.0, 1e-20, -1e-20, 1e30};
  if (i < 8) return special[i];
  if (i < N / 2) return -20.0 + 20.5 * (i - 8) / (N / 2 - 8) + 1e-3; /* off the poles */
  return 0.5 * pow(10.0, 7.0 * (i - N / 2) / (N / 2));               /* 0.5 .. 5e6 */
}

static double zeta_in(int k, int i) {
  static const double s_special[] = {1.0, 0.5, 2.0, 3.0, 2.5, NAN, INFINITY, 2.0};
  static const double q_special[] = {2.0, 2.0, -1.0, -1.0, -0.5, 1.0, 2.0, INFINITY};
  if (i < 8) return k == 0 ? s_special[i] : q_special[i];
  uint32_t h = (uint32_t)i * 2654435761u;
  double u = (double)(h >> 8) / (double)(1 << 24), v = (double)(i - 8) / (N - 8);
  return k == 0 ? 1.0 + 0.01 + 39.0 * u * u : 0.05 * pow(10.0, 3.3 * v); /* s 1.01..40 */
}

static double polygamma_in(int k, int i) {
  static const double n_special[] = {-1.0, 1.5, NAN, 1.0, 2.0, 0.0, 0.0, 3.0};
  static const double x_special[] = {1.0, 1.0, 1.0, 0.0, 0.0, -2.0, INFINITY, INFINITY};
  if (i < 8) return k == 0 ? n_special[i] : x_special[i];
  if (k == 0) return (double)((i - 8) % 46);       /* orders 0..45 */
  return 0.1 * pow(10.0, 3.0 * (i - 8) / (N - 8)); /* 0.1 .. 100 */
}

static const sweep_t kSweeps[] = {
    {"Erfc", 1, erfc_in, 4, 8, 0},
    {"BesselI1e", 1, bessel_in, 6, 6, 0},
    {"Digamma", 1, digamma_in, 10, 12, 1.0},
    {"Zeta", 2, zeta_in, 12, 24, 0},
    {"Polygamma", 2, polygamma_in, 8, 16, 1.0},
};

static void sweep(kiln_device_t *dev, const sweep_t *sw, bool f64) {
  const char *ty = f64 ? "f64" : "f32";
  char hlo[1024];
  if (sw->operands == 1)
    snprintf(hlo, sizeof hlo,
             "HloModule special\n\nENTRY main {\n  x = %s[%d] parameter(0)\n  ROOT r = %s[%d] "
             "custom-call(x), custom_call_target=\"xla_builder.math.%s\"\n}\n",
             ty, N, ty, N, sw->target);
  else
    snprintf(hlo, sizeof hlo,
             "HloModule special\n\nENTRY main {\n  a = %s[%d] parameter(0)\n  b = %s[%d] "
             "parameter(1)\n  ROOT r = %s[%d] custom-call(a, b), "
             "custom_call_target=\"xla_builder.math.%s\"\n}\n",
             ty, N, ty, N, ty, N, sw->target);
  kiln_hlo_module_t *m = NULL;
  assert_null(kiln_hlo_parse_module(hlo, strlen(hlo), NULL, &m));
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *args[2], *got = NULL, *want = NULL;
  for (int k = 0; k < sw->operands; k++) {
    args[k] = kiln_literal_make(&arena, m->entry->parameters[k]->shape);
    for (int i = 0; i < N; i++) kiln_literal_set_f64(args[k], i, sw->input(k, i));
  }
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = dev;
  kiln_status s = kiln_device_run_module(m, args, sw->operands, &o, &arena, &got, NULL);
  if (s) fail_msg("%s %s: %s", sw->target, ty, kiln_status_message(s));
  kiln_eval_options_t eo;
  memset(&eo, 0, sizeof eo);
  assert_null(kiln_eval_module(m, &eo, sw->operands, args, &arena, &want));
  int64_t worst = 0, limit = f64 ? sw->max_ulp_f64 : sw->max_ulp_f32;
  int at = -1;
  for (int i = 0; i < N; i++) {
    double g = kiln_literal_get_f64(got, i), w = kiln_literal_get_f64(want, i);
    int64_t d = ulps(g, w, f64);
    if (sw->floor > 0 && fabs(w) < sw->floor && d != INT64_MAX && !isnan(w)) {
      /* near a zero: ulps of the floor (the series' absolute error) */
      double e = fabs(g - w) / (f64 ? 0x1p-52 : 0x1p-23) / sw->floor;
      d = (int64_t)ceil(e);
    }
    if (d > worst) worst = d, at = i;
  }
  printf("%-9s %s: max %lld ulp over %d inputs (allowed %lld)", sw->target, ty, (long long)worst, N,
         (long long)limit);
  if (at >= 0) {
    printf("; at (%.17g", sw->input(0, at));
    if (sw->operands == 2) printf(", %.17g", sw->input(1, at));
    printf("): %.17g, reference %.17g", kiln_literal_get_f64(got, at),
           kiln_literal_get_f64(want, at));
  }
  printf("\n");
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
  assert_true(worst <= limit);
}

static void test_compiled_series_match_the_long_double_reference(void **state) {
  (void)state;
  kiln_device_t *dev = NULL;
  assert_null(kiln_host_device_create(0, &dev));
  for (size_t i = 0; i < sizeof kSweeps / sizeof kSweeps[0]; i++) {
    sweep(dev, &kSweeps[i], false);
    sweep(dev, &kSweeps[i], true);
  }
  kiln_device_destroy(dev);
}

/* The corpus's xla_builder.math.Polygamma module (XLA's builder test) on the host against
 * the evaluator and mpmath, at inputs where it has a value (fake arguments give NaN). */
static void test_corpus_polygamma_module(void **state) {
  (void)state;
  char path[4096];
  snprintf(path, sizeof path, "%s/xla/xla__hlo__builder__tests__math_polygamma.hlo",
           kiln_corpus_dir());
  kiln_hlo_file_t *f = NULL;
  kiln_status s = kiln_hlo_file_load(path, &f);
  if (s) {
    printf("SKIP: corpus not readable: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    return;
  }
  assert_int_equal(f->num_modules, 1);
  kiln_hlo_module_t *m = f->modules[0];
  kiln_device_t *dev = NULL;
  assert_null(kiln_host_device_create(0, &dev));
  /* polygamma(n, x) from mpmath */
  static const double kCases[][3] = {{0, 3.0, 0.92278433509846714},
                                     {1, 1.0, 1.6449340668482264},
                                     {2, 1.5, -0.82879664423432},
                                     {3, 10.0, 0.0023199013042898684}};
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; i++) {
    kiln_arena_t arena;
    kiln_arena_init(&arena);
    kiln_literal_t *args[2], *got = NULL, *want = NULL;
    for (int k = 0; k < 2; k++) {
      args[k] = kiln_literal_make(&arena, m->entry->parameters[k]->shape);
      kiln_literal_set_f64(args[k], 0, kCases[i][k]);
    }
    kiln_device_run_options_t o;
    memset(&o, 0, sizeof o);
    o.device = dev;
    assert_null(kiln_device_run_module(m, args, 2, &o, &arena, &got, NULL));
    kiln_eval_options_t eo;
    memset(&eo, 0, sizeof eo);
    assert_null(kiln_eval_module(m, &eo, 2, args, &arena, &want));
    double g = kiln_literal_get_f64(got, 0), w = kiln_literal_get_f64(want, 0);
    if (ulps(g, w, false) > 8 || fabs(g - kCases[i][2]) > 1e-6 * fabs(kCases[i][2]))
      fail_msg("polygamma(%g, %g): host %.9g, evaluator %.9g, mpmath %.9g", kCases[i][0],
               kCases[i][1], g, w, kCases[i][2]);
    kiln_arena_destroy(&arena);
  }
  kiln_device_destroy(dev);
  kiln_hlo_file_free(f);
}

/* The reference itself at values known in closed form. */
static void test_reference_meets_closed_forms(void **state) {
  (void)state;
  const double euler = 0.57721566490153286061, pi2_6 = 1.6449340668482264365;
  assert_true(fabs(kiln_eval_digamma(1.0) + euler) < 1e-16);
  assert_true(fabs(kiln_eval_digamma(0.5) + euler + 2 * log(2.0)) < 4e-16);
  assert_true(fabs(kiln_eval_digamma(-0.5) - (2 - euler - 2 * log(2.0))) < 4e-16);
  assert_true(fabs(kiln_eval_zeta(2.0, 1.0) - pi2_6) < 4e-16);
  assert_true(fabs(kiln_eval_zeta(4.0, 1.0) - pow(M_PI, 4) / 90) < 4e-16);
  assert_true(fabs(kiln_eval_zeta(2.0, 0.5) - 3 * pi2_6) < 1e-15); /* (2^s - 1) zeta(s) */
  assert_true(fabs(kiln_eval_polygamma(1.0, 1.0) - pi2_6) < 4e-16);
  assert_true(fabs(kiln_eval_polygamma(3.0, 1.0) - pow(M_PI, 4) / 15) < 2e-15);
  assert_true(isnan(kiln_eval_digamma(-4.0)) && isnan(kiln_eval_polygamma(0.5, 1.0)));
  assert_true(isinf(kiln_eval_zeta(1.0, 3.0)) && isnan(kiln_eval_zeta(0.5, 3.0)));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_meets_closed_forms),
      cmocka_unit_test(test_chlo_special_functions_on_the_reference_evaluator),
      cmocka_unit_test(test_chlo_special_functions_on_the_host_backend),
      cmocka_unit_test(test_compiled_series_match_the_long_double_reference),
      cmocka_unit_test(test_corpus_polygamma_module),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
