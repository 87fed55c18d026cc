/* Convolution in the elemental emitter: a loop fusion holding a convolution compiles
 * through the loop emitter, passes ptxas (when present), runs on the host and matches the
 * reference evaluator within kiln_compare_kernel_tolerance (the loops sum in the evaluator's order,
 * window outside input features, so f32 results are normally bit-identical).
 *
 * Hand cases cover dim_labels in any order, stride, padding (negative too), lhs and rhs
 * dilation, window reversal, feature and batch groups, 0/1/3 spatial dims, mixed element
 * types (bf16/f16 through f32, s8 -> s32, c64), non-default layouts of the operands and the
 * output, and a convolution fused with its elementwise consumer. The corpus case wraps every
 * distinct convolution of the xla/ and real/ modules into a fusion of its own (as the
 * fusion wrapper pass does); convolutions too costly for the evaluator here are shrunk to
 * one output batch, and ones still too costly are compiled and ptxas-checked only. Wrapped
 * ops that the verifier rejects (XLA's parser tests hold a few) are skipped and listed; one
 * corpus case (f8e8m0fnu x pred -> pred) differs from the evaluator by design, listed as a
 * known difference (see wrap_known_difference). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/elemental_wrap_util.h"
#include "tests/skip_util.h"

/* Multiply-adds the evaluator does for `in` with output shape `out`. */
static double conv_cost(const kiln_hlo_instruction_t *in, const kiln_shape_t *out) {
  const kiln_shape_t *ks = in->operands[1]->shape;
  double c = (double)kiln_shape_num_elements(out) * (double)ks->dims[in->conv_dnums.kernel_input_feature];
  for (int s = 0; s < in->conv_dnums.num_spatial; s++) c *= (double)ks->dims[in->conv_dnums.kernel_spatial[s]];
  return c;
}

#define RUN_LIMIT wrap_run_limit()

#define CONV_MODULE(params, root) "HloModule c\n\nENTRY fused {\n" params "  ROOT r = " root "\n}\n"

static void test_conv_nhwc_same_padding(void **state) {
  wrap_run_hand("nhwc 3x3 pad 1",
                CONV_MODULE("  p0 = f32[2,5,5,3] parameter(0)\n  p1 = f32[3,3,3,4] parameter(1)\n",
                            "f32[2,5,5,4] convolution(p0, p1), window={size=3x3 pad=1_1x1_1}, "
                            "dim_labels=b01f_01io->b01f"));
}

static void test_conv_nchw_stride_dilations(void **state) {
  wrap_run_hand(
      "nchw stride, lhs and rhs dilation",
      CONV_MODULE("  p0 = f32[2,3,7,6] parameter(0)\n  p1 = f32[4,3,2,3] parameter(1)\n",
                  "f32[2,4,7,5] convolution(p0, p1), window={size=2x3 stride=2x1 "
                  "pad=1_0x2_1 lhs_dilate=2x1 rhs_dilate=1x2}, dim_labels=bf01_oi01->bf01"));
}

static void test_conv_negative_padding_and_reversal(void **state) {
  wrap_run_hand(
      "1-d negative padding, reversal",
      CONV_MODULE("  p0 = f32[2,10,3] parameter(0)\n  p1 = f32[3,3,2] parameter(1)\n",
                  "f32[2,7,2] convolution(p0, p1), window={size=3 pad=-2_1 rhs_reversal=1}, "
                  "dim_labels=b0f_0io->b0f"));
}

static void test_conv_feature_groups(void **state) {
  wrap_run_hand("feature_group_count=2",
                CONV_MODULE("  p0 = f32[1,6,6,4] parameter(0)\n  p1 = f32[3,3,2,6] parameter(1)\n",
                            "f32[1,4,4,6] convolution(p0, p1), window={size=3x3}, "
                            "dim_labels=b01f_01io->b01f, feature_group_count=2"));
  wrap_run_hand(
      "depthwise",
      CONV_MODULE("  p0 = f32[2,5,5,3] parameter(0)\n  p1 = f32[3,3,1,3] parameter(1)\n",
                  "f32[2,3,3,3] convolution(p0, p1), window={size=3x3 stride=2x2 pad=1_1x1_1}, "
                  "dim_labels=b01f_01io->b01f, feature_group_count=3"));
}

static void test_conv_batch_groups(void **state) {
  wrap_run_hand(
      "batch_group_count=2",
      CONV_MODULE("  p0 = f32[4,5,3] parameter(0)\n  p1 = f32[2,3,4] parameter(1)\n",
                  "f32[2,4,4] convolution(p0, p1), window={size=2}, dim_labels=b0f_0io->b0f, "
                  "batch_group_count=2"));
}

static void test_conv_unusual_dim_labels(void **state) {
  wrap_run_hand("f01b_i01o->01bf",
                CONV_MODULE("  p0 = f32[3,6,5,2] parameter(0)\n  p1 = f32[3,2,2,4] parameter(1)\n",
                            "f32[5,4,2,4] convolution(p0, p1), window={size=2x2}, "
                            "dim_labels=f01b_i01o->01bf"));
}

static void test_conv_zero_and_three_spatial_dims(void **state) {
  wrap_run_hand("0 spatial dims",
                CONV_MODULE("  p0 = f32[3,5] parameter(0)\n  p1 = f32[5,4] parameter(1)\n",
                            "f32[3,4] convolution(p0, p1), dim_labels=bf_io->bf"));
  wrap_run_hand(
      "3 spatial dims",
      CONV_MODULE("  p0 = f32[1,4,4,4,2] parameter(0)\n  p1 = f32[2,2,2,2,3] parameter(1)\n",
                  "f32[1,3,3,3,3] convolution(p0, p1), window={size=2x2x2}, "
                  "dim_labels=b012f_012io->b012f"));
}

static void test_conv_mixed_element_types(void **state) {
  wrap_run_hand(
      "bf16 -> f32",
      CONV_MODULE(
          "  p0 = bf16[2,6,6,3] parameter(0)\n  p1 = bf16[3,3,3,4] parameter(1)\n",
          "f32[2,4,4,4] convolution(p0, p1), window={size=3x3}, dim_labels=b01f_01io->b01f"));
  wrap_run_hand(
      "bf16 -> bf16",
      CONV_MODULE(
          "  p0 = bf16[2,6,6,8] parameter(0)\n  p1 = bf16[3,3,8,4] parameter(1)\n",
          "bf16[2,4,4,4] convolution(p0, p1), window={size=3x3}, dim_labels=b01f_01io->b01f"));
  wrap_run_hand(
      "f16 -> f16",
      CONV_MODULE(
          "  p0 = f16[1,8,5] parameter(0)\n  p1 = f16[3,5,2] parameter(1)\n",
          "f16[1,8,2] convolution(p0, p1), window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f"));
  wrap_run_hand(
      "s8 -> s32",
      CONV_MODULE(
          "  p0 = s8[2,6,6,3] parameter(0)\n  p1 = s8[3,3,3,4] parameter(1)\n",
          "s32[2,4,4,4] convolution(p0, p1), window={size=3x3}, dim_labels=b01f_01io->b01f"));
  wrap_run_hand(
      "f64",
      CONV_MODULE("  p0 = f64[2,6,3] parameter(0)\n  p1 = f64[3,3,4] parameter(1)\n",
                  "f64[2,4,4] convolution(p0, p1), window={size=3}, dim_labels=b0f_0io->b0f"));
  wrap_run_hand(
      "c64",
      CONV_MODULE("  p0 = c64[2,6,3] parameter(0)\n  p1 = c64[3,3,4] parameter(1)\n",
                  "c64[2,4,4] convolution(p0, p1), window={size=3}, dim_labels=b0f_0io->b0f"));
}

static void test_conv_non_default_layouts(void **state) {
  wrap_run_hand(
      "layouts {1,2,3,0} x {0,1,2,3} -> {2,1,3,0}",
      CONV_MODULE("  p0 = f32[2,5,5,3]{1,2,3,0} parameter(0)\n"
                  "  p1 = f32[3,3,3,4]{0,1,2,3} parameter(1)\n",
                  "f32[2,5,5,4]{2,1,3,0} convolution(p0, p1), window={size=3x3 pad=1_1x1_1}, "
                  "dim_labels=b01f_01io->b01f"));
}

static void test_conv_fused_with_bias_and_relu(void **state) {
  wrap_run_hand("conv + bias + relu",
                "HloModule c\n\nENTRY fused {\n"
                "  p0 = f32[2,6,6,3] parameter(0)\n  p1 = f32[3,3,3,4] parameter(1)\n"
                "  p2 = f32[4] parameter(2)\n"
                "  c = f32[2,6,6,4] convolution(p0, p1), window={size=3x3 pad=1_1x1_1}, "
                "dim_labels=b01f_01io->b01f\n"
                "  b = f32[2,6,6,4] broadcast(p2), dimensions={3}\n"
                "  a = f32[2,6,6,4] add(c, b)\n"
                "  z = f32[] constant(0)\n  zb = f32[2,6,6,4] broadcast(z), dimensions={}\n"
                "  ROOT r = f32[2,6,6,4] maximum(a, zb)\n}\n");
}

static void corpus_conv(void *vctx, const kiln_hlo_instruction_t *in, const char *label) {
  wrap_corpus_ctx_t *ctx = vctx;
  if (in->num_operands != 2 || !in->has_conv_dnums || !kiln_shape_is_array(in->shape)) return;
  char *text = wrap_text(in, NULL, NULL);
  if (!text) return;
  if (wrap_seen(&ctx->st, text)) {
    kiln_free(text);
    return;
  }
  ctx->st.unique++;
  double cost = conv_cost(in, in->shape);
  bool compile_only = false;
  if (cost > RUN_LIMIT) {
    /* One output batch: the input keeps one batch per batch group. */
    const kiln_conv_dnums_t *dn = &in->conv_dnums;
    int64_t bg = in->batch_group_count > 0 ? in->batch_group_count : 1;
    kiln_shape_t lhs = *in->operands[0]->shape, out = *in->shape;
    int64_t ld[16], od[16];
    memcpy(ld, lhs.dims, sizeof(int64_t) * (size_t)lhs.rank);
    memcpy(od, out.dims, sizeof(int64_t) * (size_t)out.rank);
    ld[dn->input_batch] = bg;
    od[dn->output_batch] = 1;
    lhs.dims = ld;
    out.dims = od;
    kiln_shape_t *ops[2] = {&lhs, NULL};
    kiln_free(text);
    text = wrap_text(in, ops, &out);
    compile_only = conv_cost(in, &out) > RUN_LIMIT;
  }
  wrap_run_known(label, text, compile_only, ctx->jit, ctx->pool, &ctx->st, wrap_known_difference(in));
  kiln_free(text);
}

static void test_corpus_convolutions_match_evaluator(void **state) {
  wrap_stats_t st;
  wrap_run_corpus(KILN_OP_CONVOLUTION, "convolution(", "convolutions", corpus_conv, &st);
  assert_true(st.known <= 1);
  if (!kiln_corpus_sampling()) assert_true(st.passed > 40);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_nhwc_same_padding),
      cmocka_unit_test(test_conv_nchw_stride_dilations),
      cmocka_unit_test(test_conv_negative_padding_and_reversal),
      cmocka_unit_test(test_conv_feature_groups),
      cmocka_unit_test(test_conv_batch_groups),
      cmocka_unit_test(test_conv_unusual_dim_labels),
      cmocka_unit_test(test_conv_zero_and_three_spatial_dims),
      cmocka_unit_test(test_conv_mixed_element_types),
      cmocka_unit_test(test_conv_non_default_layouts),
      cmocka_unit_test(test_conv_fused_with_bias_and_relu),
      cmocka_unit_test(test_corpus_convolutions_match_evaluator),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
