/* StableHLO ops that HLO lacks for a type and that the converter expands (chlo.lgamma as
 * the Lanczos approximation, complex cbrt and atan2, bitcast_convert to and from i1, a
 * chlo.scan of zero length) and complex bitcast_convert between widths, and real
 * math at its edges (acosh below 1, log1p and expm1 near overflow), run on the reference
 * evaluator and on the host backend against values from Python's math and
 * cmath modules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/host/host_device.h"
#include "tests/stablehlo_test_util.h"

static const char kProgram[] =
    "func.func @lgamma_f64() {\n"
    "  %x = stablehlo.constant dense<[0.5, 3.0, 10.0, -2.5, 1.0e-3, -0.25, 100.0, "
    "0x7FF0000000000000]> : tensor<8xf64>\n"
    "  %r = chlo.lgamma %x : tensor<8xf64> -> tensor<8xf64>\n"
    "  check.expect_almost_eq_const %r, dense<[0.5723649429247004, 0.693147180559945, "
    "12.801827480081467, -0.05624371649767457, 6.907178885383854, 1.5895753125511862, "
    "359.1342053695754, 0x7FF0000000000000]> : tensor<8xf64>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @lgamma_f32() {\n"
    "  %x = stablehlo.constant dense<[0.5, 3.0, 10.0, -2.5, -0.25]> : tensor<5xf32>\n"
    "  %r = chlo.lgamma %x : tensor<5xf32> -> tensor<5xf32>\n"
    "  check.expect_almost_eq_const %r, dense<[0.5723649, 0.6931472, 12.801827, -0.0562437, "
    "1.5895753]> : tensor<5xf32>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @cbrt_c128() {\n"
    "  %x = stablehlo.constant dense<(-8.0, 1.0)> : tensor<complex<f64>>\n"
    "  %r = stablehlo.cbrt %x : tensor<complex<f64>>\n"
    "  check.expect_almost_eq_const %r, dense<(1.073687694358913, 1.69349357647772)> : "
    "tensor<complex<f64>>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @atan2_c64() {\n"
    "  %y = stablehlo.constant dense<(1.0, 2.0)> : tensor<complex<f32>>\n"
    "  %x = stablehlo.constant dense<(3.0, -1.0)> : tensor<complex<f32>>\n"
    "  %r = stablehlo.atan2 %y, %x : tensor<complex<f32>>\n"
    "  check.expect_almost_eq_const %r, dense<(0.19025318855618242, 0.8418239574966186)> : "
    "tensor<complex<f32>>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @bitcast_i1_round_trip() {\n"
    "  %x = stablehlo.constant dense<[1.5, -0.0, 0x7FC00001]> : tensor<3xf32>\n"
    "  %b = stablehlo.bitcast_convert %x : (tensor<3xf32>) -> tensor<3x32xi1>\n"
    "  %s = stablehlo.slice %b [0:1, 20:24] : (tensor<3x32xi1>) -> tensor<1x4xi1>\n"
    "  check.expect_eq_const %s, dense<[[false, false, true, true]]> : tensor<1x4xi1>\n"
    "  %y = stablehlo.bitcast_convert %b : (tensor<3x32xi1>) -> tensor<3xui32>\n"
    "  check.expect_eq_const %y, dense<[1069547520, 2147483648, 2143289345]> : tensor<3xui32>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @real_math_edges_f32() {\n"
    "  %a = stablehlo.constant dense<[0.5, -3.0e38, 3.0]> : tensor<3xf32>\n"
    "  %ra = chlo.acosh %a : tensor<3xf32> -> tensor<3xf32>\n"
    "  check.expect_almost_eq_const %ra, dense<[0x7FC00000, 0x7FC00000, 1.7627472]> : "
    "tensor<3xf32>\n"
    "  %l = stablehlo.constant dense<[4.6e36, 1.0e-30]> : tensor<2xf32>\n"
    "  %rl = stablehlo.log_plus_one %l : tensor<2xf32>\n"
    "  check.expect_almost_eq_const %rl, dense<[84.41912, 1.0e-30]> : tensor<2xf32>\n"
    "  %e = stablehlo.constant dense<[88.0]> : tensor<1xf32>\n"
    "  %re = stablehlo.exponential_minus_one %e : tensor<1xf32>\n"
    "  check.expect_almost_eq_const %re, dense<[1.6516363e38]> : tensor<1xf32>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @scan_of_zero_length() {\n"
    "  %in = stablehlo.constant dense<> : tensor<0x2xi32>\n"
    "  %init = stablehlo.constant dense<[7, -1]> : tensor<2xi32>\n"
    "  %0:2 = chlo.scan(%in) inits(%init) dimension=0 {\n"
    "  ^bb0(%a: tensor<2xi32>, %c: tensor<2xi32>):\n"
    "    %s = stablehlo.add %a, %c : tensor<2xi32>\n"
    "    stablehlo.return %s, %s : tensor<2xi32>, tensor<2xi32>\n"
    "  } : (tensor<0x2xi32>, tensor<2xi32>) -> (tensor<0x2xi32>, tensor<2xi32>)\n"
    "  check.expect_eq_const %0#0, dense<> : tensor<0x2xi32>\n"
    "  check.expect_eq_const %0#1, dense<[7, -1]> : tensor<2xi32>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    "func.func @bitcast_c64_pairs_to_c128() {\n"
    "  %x = stablehlo.constant dense<[(0x89ABCDEF, 0x01234567), (0x11111111, 0x00000000)]> : "
    "tensor<2xcomplex<f32>>\n"
    "  %r = stablehlo.bitcast_convert %x : (tensor<2xcomplex<f32>>) -> tensor<complex<f64>>\n"
    "  %b = stablehlo.bitcast_convert %r : (tensor<complex<f64>>) -> tensor<2xui64>\n"
    "  check.expect_eq_const %b, dense<[81985529216486895, 286331153]> : tensor<2xui64>\n"
    "  func.return\n"
    "}\n";

static void run_program(kiln_device_t *dev) {
  kiln_test_run_checks(kProgram, sizeof kProgram - 1, "math_ops.mlir", dev, 8);
}

static void test_expanded_ops_on_the_reference_evaluator(void **state) {
  (void)state;
  run_program(NULL);
}

static void test_expanded_ops_on_the_host_backend(void **state) {
  (void)state;
  kiln_device_t *dev = NULL;
  assert_null(kiln_host_device_create(0, &dev));
  run_program(dev);
  kiln_device_destroy(dev);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_expanded_ops_on_the_reference_evaluator),
      cmocka_unit_test(test_expanded_ops_on_the_host_backend),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
