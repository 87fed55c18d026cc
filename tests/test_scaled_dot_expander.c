/* scaled_dot_expander: scaled-dot with block scales (fp8 operands and e8m0 scales -> bf16,
 * bf16 with f32 scales -> f32, batch dimensions, several blocks per dimension), scalar
 * scales (operand left unscaled), and the (lhs, lhs_scale, rhs, rhs_scale) operand order
 * evaluate like the original on the reference evaluator, run on the host like it, and
 * forms the evaluator rejects are left alone; the corpus online-quantization modules keep
 * their results through the expander and the pipeline and match the evaluator on the host. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "pass_test_util.h"
#include "expander_test_util.h"
#include "dense_expander_test_util.h"

#define LIST "scaled_dot_expander"

static void test_fp8_block_scales_dequantize_like_the_evaluator(void **state) {
  const char *text =
      "HloModule s\n\nENTRY e {\n  a = f8e4m3fn[4,64] parameter(0)\n  b = f8e4m3fn[64,8] parameter(1)\n"
      "  as = f8e8m0fnu[4,2] parameter(2)\n  bs = f8e8m0fnu[2,8] parameter(3)\n"
      "  ROOT d = f32[4,8] scaled-dot(a, b, as, bs), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  double e = dx_check_text(text, LIST, KILN_OP_SCALED_DOT, true);
  assert_true(e >= 0 && e <= 1);
}

static void test_bf16_with_f32_scales_and_batch_dims_match(void **state) {
  const char *text =
      "HloModule s\n\nENTRY e {\n  a = bf16[2,6,32] parameter(0)\n  b = bf16[2,5,32] parameter(1)\n"
      "  as = f32[2,3,4] parameter(2)\n  bs = f32[1,5,2] parameter(3)\n"
      "  ROOT d = f32[2,6,5] scaled-dot(a, b, as, bs), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
      "rhs_batch_dims={0}, rhs_contracting_dims={2}\n}\n";
  double e = dx_check_text(text, LIST, KILN_OP_SCALED_DOT, true);
  assert_true(e >= 0 && e <= 1);
}

static void test_scalar_scale_leaves_its_operand_unscaled(void **state) {
  const char *text =
      "HloModule s\n\nENTRY e {\n  a = f32[3,16] parameter(0)\n  b = f32[16,4] parameter(1)\n"
      "  as = f32[] parameter(2)\n  bs = f32[2,4] parameter(3)\n"
      "  ROOT d = f32[3,4] scaled-dot(a, b, as, bs), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  double e = dx_check_text(text, LIST, KILN_OP_SCALED_DOT, true);
  assert_true(e >= 0 && e <= 1);
  /* the scalar scale is not read at all: no multiply by a broadcast of parameter 2 */
  kiln_hlo_module_t *m = pt_parse(text);
  pt_run(m, LIST);
  pt_expect_text(m, "convert(as)", false);
  pt_expect_text(m, "convert(bs)", true);
  kiln_hlo_module_destroy(m);
}

static void test_lhs_scale_second_operand_order_is_recognised(void **state) {
  const char *text =
      "HloModule s\n\nENTRY e {\n  a = f32[4,64] parameter(0)\n  as = f32[4,2] parameter(1)\n"
      "  b = f32[8,64] parameter(2)\n  bs = f32[8,2] parameter(3)\n"
      "  ROOT d = f32[4,8] scaled-dot(a, as, b, bs), lhs_contracting_dims={1}, rhs_contracting_dims={1}\n}\n";
  double e = dx_check_text(text, LIST, KILN_OP_SCALED_DOT, false);
  assert_true(e >= 0 && e <= 1);
}

static void test_scales_that_do_not_divide_are_left_alone(void **state) {
  kiln_hlo_module_t *m = pt_parse(
      "HloModule s\n\nENTRY e {\n  a = f32[4,64] parameter(0)\n  b = f32[64,8] parameter(1)\n"
      "  as = f32[3,2] parameter(2)\n  bs = f32[2,8] parameter(3)\n"
      "  ROOT d = f32[4,8] scaled-dot(a, b, as, bs), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n");
  pt_run(m, LIST);
  assert_int_equal(pt_count(m, KILN_OP_SCALED_DOT), 1);
  kiln_hlo_module_destroy(m);
}

static void test_corpus_online_quantization_modules_match_on_the_host(void **state) {
  int n = dx_check_corpus_file(
      "xla/xla__backends__gpu__codegen__triton__tests__scaled_dot__scaled_dot_online_quantization.hlo",
      KILN_OP_SCALED_DOT, LIST);
  n += dx_check_corpus_file(
      "xla/xla__backends__gpu__codegen__triton__tests__scaled_dot__scaled_dot_online_quantization_bitcast.hlo",
      KILN_OP_SCALED_DOT, LIST);
  assert_int_equal(n, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fp8_block_scales_dequantize_like_the_evaluator),
      cmocka_unit_test(test_bf16_with_f32_scales_and_batch_dims_match),
      cmocka_unit_test(test_scalar_scale_leaves_its_operand_unscaled),
      cmocka_unit_test(test_lhs_scale_second_operand_order_is_recognised),
      cmocka_unit_test(test_scales_that_do_not_divide_are_left_alone),
      cmocka_unit_test(test_corpus_online_quantization_modules_match_on_the_host),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
