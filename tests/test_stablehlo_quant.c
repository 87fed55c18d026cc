/* Uniform quantized types in the StableHLO converter (compiler/frontend/stablehlo_to_hlo_quant.c):
 * uniform_quantize (ties to even, clamped to the storage range or to a narrowed `i8<-127:127>`),
 * unsigned storage with a zero point, per-axis scales along dimension 1, requantization,
 * dequantize_op_quantize for elementwise ops, a compare, a transpose and a dot_general, and
 * bitcast_convert to the storage integers — on the reference evaluator and on the host backend,
 * against values worked out by hand from the spec's formulas. An op with a region over
 * quantized values is UNIMPLEMENTED, named. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/host/host_device.h"
#include "tools/common/stablehlo_run.h"

#define Q8(s) "tensor<" s "x!quant.uniform<i8:f32, 1.0>>"
static const char kProgram[] =
    /* x / 1.0 rounded to even, clamped to [-128, 127] */
    "func.func @quantize_rounds_to_even_and_clamps() {\n"
    "  %x = stablehlo.constant dense<[0.5, 1.5, 2.5, -0.5, -1.5, 300.0, -300.0]> : tensor<7xf32>\n"
    "  %q = stablehlo.uniform_quantize %x : (tensor<7xf32>) -> " Q8("7") "\n"
    "  %b = stablehlo.bitcast_convert %q : (" Q8("7") ") -> tensor<7xi8>\n"
    "  check.expect_eq_const %b, dense<[0, 2, 2, 0, -2, 127, -128]> : tensor<7xi8>\n"
    "  %n = stablehlo.uniform_quantize %x : (tensor<7xf32>) -> "
    "tensor<7x!quant.uniform<i8<-127:127>:f32, 1.0>>\n"
    "  %nb = stablehlo.bitcast_convert %n : (tensor<7x!quant.uniform<i8<-127:127>:f32, 1.0>>) -> "
    "tensor<7xi8>\n"
    "  check.expect_eq_const %nb, dense<[0, 2, 2, 0, -2, 127, -127]> : tensor<7xi8>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    /* u8, scale 0.5, zero point 128: x / 0.5 + 128 */
    "func.func @unsigned_storage_with_zero_point() {\n"
    "  %x = stablehlo.constant dense<[-1.0, 0.0, 1.0, 100.0]> : tensor<4xf32>\n"
    "  %q = stablehlo.uniform_quantize %x : (tensor<4xf32>) -> "
    "tensor<4x!quant.uniform<u8:f32, 5.000000e-01:128>>\n"
    "  %b = stablehlo.bitcast_convert %q : (tensor<4x!quant.uniform<u8:f32, 5.000000e-01:128>>) -> "
    "tensor<4xui8>\n"
    "  check.expect_eq_const %b, dense<[126, 128, 130, 255]> : tensor<4xui8>\n"
    "  %d = stablehlo.uniform_dequantize %q : (tensor<4x!quant.uniform<u8:f32, 5.000000e-01:128>>) "
    "-> tensor<4xf32>\n"
    "  check.expect_almost_eq_const %d, dense<[-1.0, 0.0, 1.0, 63.5]> : tensor<4xf32>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    /* column 0: scale 0.5, zero point 0; column 1: scale 2, zero point 1 */
    "func.func @per_axis_along_dimension_1() {\n"
    "  %x = stablehlo.constant dense<[[1.0, 4.0], [3.0, -4.0]]> : tensor<2x2xf32>\n"
    "  %q = stablehlo.uniform_quantize %x : (tensor<2x2xf32>) -> "
    "tensor<2x2x!quant.uniform<i8:f32:1, {0.5, 2.0:1}>>\n"
    "  %b = stablehlo.bitcast_convert %q : (tensor<2x2x!quant.uniform<i8:f32:1, {0.5, 2.0:1}>>) -> "
    "tensor<2x2xi8>\n"
    "  check.expect_eq_const %b, dense<[[2, 3], [6, -1]]> : tensor<2x2xi8>\n"
    /* requantized to one scale 0.25: 1, 4, 3, -4 -> 4, 16, 12, -16 */
    "  %r = stablehlo.uniform_quantize %q : (tensor<2x2x!quant.uniform<i8:f32:1, {0.5, 2.0:1}>>) "
    "-> tensor<2x2x!quant.uniform<i8:f32, 2.500000e-01>>\n"
    "  %rb = stablehlo.bitcast_convert %r : (tensor<2x2x!quant.uniform<i8:f32, 2.500000e-01>>) -> "
    "tensor<2x2xi8>\n"
    "  check.expect_eq_const %rb, dense<[[4, 16], [12, -16]]> : tensor<2x2xi8>\n"
    "  func.return\n"
    "}\n"
    "// -----\n"
    /* dequantize, op, quantize: (2 * 3) = 6 / 0.5 - 10 = 2; compare gives i1; transpose moves
     * the integers; dot [1, 2] . [1, 1] = 3 / 0.25 - 10 = 2 */
    "func.func @dequantize_op_quantize() {\n"
    "  %a = stablehlo.constant dense<[2.0, -1.0]> : tensor<2xf32>\n"
    "  %c = stablehlo.constant dense<[3.0, 3.0]> : tensor<2xf32>\n"
    "  %qa = stablehlo.uniform_quantize %a : (tensor<2xf32>) -> " Q8("2") "\n"
    "  %qc = stablehlo.uniform_quantize %c : (tensor<2xf32>) -> " Q8("2") "\n"
    "  %m = stablehlo.multiply %qa, %qc : (" Q8("2") ", " Q8("2") ") -> "
    "tensor<2x!quant.uniform<i8:f32, 5.000000e-01:-10>>\n"
    "  %mb = stablehlo.bitcast_convert %m : (tensor<2x!quant.uniform<i8:f32, 5.000000e-01:-10>>) -> "
    "tensor<2xi8>\n"
    "  check.expect_eq_const %mb, dense<[2, -16]> : tensor<2xi8>\n"
    "  %lt = stablehlo.compare LT, %qa, %qc : (" Q8("2") ", " Q8("2") ") -> tensor<2xi1>\n"
    "  check.expect_eq_const %lt, dense<[true, true]> : tensor<2xi1>\n"
    "  %x = stablehlo.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>\n"
    "  %qx = stablehlo.uniform_quantize %x : (tensor<2x2xf32>) -> " Q8("2x2") "\n"
    "  %t = stablehlo.transpose %qx, dims = [1, 0] : (" Q8("2x2") ") -> " Q8("2x2") "\n"
    "  %tb = stablehlo.bitcast_convert %t : (" Q8("2x2") ") -> tensor<2x2xi8>\n"
    "  check.expect_eq_const %tb, dense<[[1, 3], [2, 4]]> : tensor<2x2xi8>\n"
    "  %l = stablehlo.constant dense<[[1.0, 2.0]]> : tensor<1x2xf32>\n"
    "  %r = stablehlo.constant dense<[[1.0], [1.0]]> : tensor<2x1xf32>\n"
    "  %ql = stablehlo.uniform_quantize %l : (tensor<1x2xf32>) -> "
    "tensor<1x2x!quant.uniform<i8:f32, 5.000000e-01>>\n"
    "  %qr = stablehlo.uniform_quantize %r : (tensor<2x1xf32>) -> " Q8("2x1") "\n"
    "  %dot = stablehlo.dot_general %ql, %qr, contracting_dims = [1] x [0] : "
    "(tensor<1x2x!quant.uniform<i8:f32, 5.000000e-01>>, " Q8("2x1") ") -> "
    "tensor<1x1x!quant.uniform<i8:f32, 2.500000e-01:-10>>\n"
    "  %db = stablehlo.bitcast_convert %dot : (tensor<1x1x!quant.uniform<i8:f32, 2.500000e-01:-10>>) "
    "-> tensor<1x1xi8>\n"
    "  check.expect_eq_const %db, dense<[[2]]> : tensor<1x1xi8>\n"
    "  func.return\n"
    "}\n";

static const char kRegion[] =
    "func.func @reduce_of_quantized_values() {\n"
    "  %x = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>\n"
    "  %q = stablehlo.uniform_quantize %x : (tensor<2xf32>) -> " Q8("2") "\n"
    "  %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
    "  %qz = stablehlo.uniform_quantize %z : (tensor<f32>) -> tensor<!quant.uniform<i8:f32, 1.0>>\n"
    "  %s = stablehlo.reduce(%q init: %qz) across dimensions = [0] : (" Q8("2") ", "
    "tensor<!quant.uniform<i8:f32, 1.0>>) -> tensor<!quant.uniform<i8:f32, 1.0>>\n"
    "   reducer(%a: tensor<!quant.uniform<i8:f32, 1.0>>, %b: tensor<!quant.uniform<i8:f32, 1.0>>) {\n"
    "    %t = stablehlo.add %a, %b : tensor<!quant.uniform<i8:f32, 1.0>>\n"
    "    stablehlo.return %t : tensor<!quant.uniform<i8:f32, 1.0>>\n"
    "  }\n"
    "  %b = stablehlo.bitcast_convert %s : (tensor<!quant.uniform<i8:f32, 1.0>>) -> tensor<i8>\n"
    "  check.expect_eq_const %b, dense<3> : tensor<i8>\n"
    "  func.return\n"
    "}\n";

static void run(kiln_device_t *dev, const char *text, size_t len, int want_passed,
                kiln_stablehlo_run_stats_t *st) {
  kiln_stablehlo_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = dev;
  o.print = true;
  memset(st, 0, sizeof *st);
  kiln_status s = kiln_stablehlo_run_bytes(text, len, "quant.mlir", &o, st);
  if (s) fail_msg("%s", kiln_status_message(s));
  if (st->failures.data) fprintf(stderr, "%s", kiln_strbuf_cstr(&st->failures));
  assert_int_equal(st->passed, want_passed);
  assert_int_equal(st->checks_failed, 0);
}

static void run_on(kiln_device_t *dev) {
  kiln_stablehlo_run_stats_t st;
  run(dev, kProgram, sizeof kProgram - 1, 4, &st);
  assert_int_equal(st.functions, 4);
  kiln_stablehlo_run_stats_free(&st);
  run(dev, kRegion, sizeof kRegion - 1, 0, &st);
  assert_non_null(st.failures.data);
  assert_non_null(strstr(kiln_strbuf_cstr(&st.failures), "quantized values in an op with regions"));
  kiln_stablehlo_run_stats_free(&st);
}

static void test_quantized_ops_on_the_reference_evaluator(void **state) {
  (void)state;
  run_on(NULL);
}

static void test_quantized_ops_on_the_host_backend(void **state) {
  (void)state;
  kiln_device_t *dev = NULL;
  assert_null(kiln_host_device_create(0, &dev));
  run_on(dev);
  kiln_device_destroy(dev);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quantized_ops_on_the_reference_evaluator),
      cmocka_unit_test(test_quantized_ops_on_the_host_backend),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
