/* Convolutions as im2col + gemm (compiler/passes/conv_gemm_rewriter.c): hand cases of each
 * form compiled for the host, run on generated inputs and compared with the reference
 * evaluator, with the thunk sequence showing one gemm and the kernels the rewrite cost (the
 * im2col loop kernel; none for a 1 x 1 convolution); convolutions the rewrite leaves
 * (batch groups, integer types, no gemm library) stay one elemental kernel. Then every
 * distinct convolution of the corpus's xla/ and real/ modules, wrapped as a module of its
 * own, against the evaluator (ones whose evaluation would cost more multiply-adds than
 * wrap_run_limit are counted, not run). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/host/host_device.h"
#include "tests/elemental_wrap_util.h"
#include "tests/host_run_util.h"
#include "tests/skip_util.h"

static kiln_device_t *g_dev;

static int setup(void **state) {
  (void)state;
  return kiln_host_device_create(2, &g_dev) ? -1 : 0;
}
static int teardown(void **state) {
  (void)state;
  kiln_device_destroy(g_dev);
  return 0;
}

static void check(const char *text, int gemms, int kernels) {
  run_and_count_thunks(g_dev, text, gemms, kernels);
}

#define CONV(params, root) "HloModule c\nENTRY e {\n" params "  ROOT r = " root "\n}\n"

static void test_conv_2d_padding_strides_dilations(void **state) {
  (void)state;
  check(CONV("  x = f32[2,9,9,6] parameter(0)\n  w = f32[3,3,6,8] parameter(1)\n",
             "f32[2,5,5,8] convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_1}, "
             "dim_labels=b01f_01io->b01f"),
        1, 1);
  /* NCHW / OIHW with rhs dilation and uneven padding */
  check(CONV("  x = f32[2,3,10,12] parameter(0)\n  w = f32[4,3,3,2] parameter(1)\n",
             "f32[2,4,8,12] convolution(x, w), window={size=3x2 pad=1_1x0_1 rhs_dilate=2x1}, "
             "dim_labels=bf01_oi01->bf01"),
        1, 3); /* + the kernel's and the output's transposes */
  /* lhs dilation (a transposed convolution) with window reversal */
  check(CONV("  x = f32[1,5,5,3] parameter(0)\n  w = f32[3,3,3,4] parameter(1)\n",
             "f32[1,11,11,4] convolution(x, w), window={size=3x3 pad=2_2x2_2 lhs_dilate=2x2 "
             "rhs_reversal=1x1}, "
             "dim_labels=b01f_01io->b01f"),
        1, 2); /* + the kernel's reverse */
  /* unusual dimension numbers: output feature-major */
  check(CONV("  x = f32[7,2,6,5] parameter(0)\n  w = f32[6,2,3,2] parameter(1)\n",
             "f32[3,6,2,4] convolution(x, w), window={size=2x2}, dim_labels=0bf1_i0o1->f0b1"),
        1, 3); /* + the input's and the output's transposes */
}

static void test_conv_1d_3d_and_types(void **state) {
  (void)state;
  check(CONV("  x = f32[2,32,4] parameter(0)\n  w = f32[5,4,6] parameter(1)\n",
             "f32[2,14,6] convolution(x, w), window={size=5 stride=2 pad=0_0}, "
             "dim_labels=b0f_0io->b0f"),
        1, 1);
  check(CONV("  x = f64[1,6,6,6,2] parameter(0)\n  w = f64[3,3,3,2,3] parameter(1)\n",
             "f64[1,6,6,6,3] convolution(x, w), window={size=3x3x3 pad=1_1x1_1x1_1}, "
             "dim_labels=b012f_012io->b012f"),
        1, 1);
  check(CONV("  x = bf16[2,8,8,4] parameter(0)\n  w = bf16[3,3,4,4] parameter(1)\n",
             "bf16[2,6,6,4] convolution(x, w), window={size=3x3}, dim_labels=b01f_01io->b01f"),
        1, 1);
}

static void test_conv_feature_groups_and_1x1(void **state) {
  (void)state;
  /* 4 groups of one input feature, 8 outputs each */
  check(CONV("  x = f32[2,7,7,4] parameter(0)\n  w = f32[3,3,1,32] parameter(1)\n",
             "f32[2,7,7,32] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
             "dim_labels=b01f_01io->b01f, "
             "feature_group_count=4"),
        1, 3);
  /* two groups of 3 features, 8 outputs each */
  check(CONV("  x = f32[1,6,6,6] parameter(0)\n  w = f32[2,2,3,16] parameter(1)\n",
             "f32[1,5,5,16] convolution(x, w), window={size=2x2}, dim_labels=b01f_01io->b01f, "
             "feature_group_count=2"),
        1, 3);
  /* NCHW / OIHW, 3 groups over a batch of 3 with stride, rhs dilation and uneven padding: the
   * groups join the batch before im2col */
  check(CONV("  x = f32[3,6,9,8] parameter(0)\n  w = f32[24,2,3,2] parameter(1)\n",
             "f32[3,24,3,8] convolution(x, w), window={size=3x2 stride=2x1 pad=0_1x0_1 "
             "rhs_dilate=2x1}, "
             "dim_labels=bf01_oi01->bf01, feature_group_count=3"),
        1, 3);
  /* grouped 1 x 1 (no slice) and a 1-D grouped convolution */
  check(CONV("  x = f32[2,5,5,6] parameter(0)\n  w = f32[1,1,3,16] parameter(1)\n",
             "f32[2,5,5,16] convolution(x, w), window={size=1x1}, dim_labels=b01f_01io->b01f, "
             "feature_group_count=2"),
        1, 3);
  check(CONV("  x = f32[4,20,8] parameter(0)\n  w = f32[5,2,32] parameter(1)\n",
             "f32[4,18,32] convolution(x, w), window={size=5 pad=1_1}, dim_labels=b0f_0io->b0f, "
             "feature_group_count=4"),
        1, 3);
  /* 1 x 1: the dot alone */
  check(CONV("  x = f32[2,6,6,16] parameter(0)\n  w = f32[1,1,16,8] parameter(1)\n",
             "f32[2,6,6,8] convolution(x, w), window={size=1x1}, dim_labels=b01f_01io->b01f"),
        1, 0);
}

static void test_conv_left_elemental(void **state) {
  (void)state;
  /* depthwise (two outputs per group), batch groups and types no gemm takes even converted
   * (s64 sums of s32 products that may pass 2^31) stay one elemental kernel */
  check(CONV("  x = f32[2,7,7,8] parameter(0)\n  w = f32[3,3,1,16] parameter(1)\n",
             "f32[2,7,7,16] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
             "dim_labels=b01f_01io->b01f, "
             "feature_group_count=8"),
        0, 1);
  check(CONV("  x = f32[4,5,5,2] parameter(0)\n  w = f32[3,3,2,4] parameter(1)\n",
             "f32[2,3,3,4] convolution(x, w), window={size=3x3}, dim_labels=b01f_01io->b01f, "
             "batch_group_count=2"),
        0, 1);
  check(CONV("  x = s32[1,5,5,2] parameter(0)\n  w = s32[3,3,2,4] parameter(1)\n",
             "s64[1,3,3,4] convolution(x, w), window={size=3x3}, dim_labels=b01f_01io->b01f"),
        0, 1);
  /* f8e8m0fnu has no zero for im2col's padding */
  check(CONV("  x = f8e8m0fnu[1,6,6,2] parameter(0)\n  w = f8e8m0fnu[3,3,2,8] parameter(1)\n",
             "f32[1,6,6,8] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
             "dim_labels=b01f_01io->b01f"),
        0, 1);
  /* integer, mixed and pred operands: im2col + a gemm once their operands are converted
   * (s32 as it is; s8 x s8 -> s32 in s8; f32 x pred in f32, the kernel's convert fused) */
  check(CONV("  x = s32[1,5,5,2] parameter(0)\n  w = s32[3,3,2,4] parameter(1)\n",
             "s32[1,3,3,4] convolution(x, w), window={size=3x3}, dim_labels=b01f_01io->b01f"),
        1, 1);
  check(CONV("  x = s8[2,6,6,3] parameter(0)\n  w = s8[3,3,3,8] parameter(1)\n",
             "s32[2,6,6,8] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
             "dim_labels=b01f_01io->b01f"),
        1, 1);
  check(CONV("  x = f32[1,28,1] parameter(0)\n  w = pred[28,1,1] parameter(1)\n",
             "f32[1,28,1] convolution(x, w), window={size=28 pad=13_14}, dim_labels=b0f_0io->b0f"),
        1, 2);
  /* no gemm library: the pass does nothing */
  kiln_hlo_module_t *m =
      parse(CONV("  x = f32[2,9,9,6] parameter(0)\n  w = f32[3,3,6,8] parameter(1)\n",
                 "f32[2,7,7,8] convolution(x, w), window={size=3x3}, dim_labels=b01f_01io->b01f"));
  kiln_pass_options_t o = {.verify = 1, .no_gemm_library = true};
  bool changed = false;
  assert_null(kiln_pass_conv_gemm_rewriter(m, &o, &changed));
  assert_false(changed);
  o.no_gemm_library = false;
  assert_null(kiln_pass_conv_gemm_rewriter(m, &o, &changed));
  assert_true(changed);
  kiln_hlo_module_destroy(m);
}

/* ---- corpus ---- */

typedef struct corpus_stats {
  wrap_stats_t wrap;
  int run, gemm, costly, invalid; /* invalid: rejected by the verifier or a known difference */
} corpus_stats_t;

static double conv_cost(const kiln_hlo_instruction_t *in) {
  const kiln_shape_t *ks = in->operands[1]->shape;
  double c = (double)kiln_shape_num_elements(in->shape) *
             (double)ks->dims[in->conv_dnums.kernel_input_feature];
  for (int s = 0; s < in->conv_dnums.num_spatial; s++)
    c *= (double)ks->dims[in->conv_dnums.kernel_spatial[s]];
  return c;
}

static void corpus_conv(void *ctx, const kiln_hlo_instruction_t *in, const char *label) {
  corpus_stats_t *st = ctx;
  char *text = wrap_text(in, NULL, NULL);
  if (!text || wrap_seen(&st->wrap, text)) {
    kiln_free(text);
    return;
  }
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (!s) s = kiln_hlo_module_verify(m);
  if (m) kiln_hlo_module_destroy(m);
  if (s) { /* XLA's parser tests hold a few invalid convolutions */
    kiln_status_free(s);
    st->invalid++;
    kiln_free(text);
    return;
  }
  if (wrap_known_difference(in)) { /* differs from the evaluator by design (elemental too) */
    st->invalid++;
    kiln_free(text);
    return;
  }
  if (conv_cost(in) > wrap_run_limit()) {
    printf("costly (not run, %.2g multiply-adds): %s\n", conv_cost(in), label);
    st->costly++;
    kiln_free(text);
    return;
  }
  char *thunks = NULL;
  run_and_compare_on(g_dev, text, 1, &thunks);
  int gemms = count_in(thunks, " gemm ");
  printf("%s: %s\n", label, gemms ? "im2col + gemm" : "elemental");
  st->run++;
  st->gemm += gemms > 0;
  kiln_free(thunks);
  kiln_free(text);
}

static void test_corpus_convolutions_match_evaluator(void **state) {
  (void)state;
  KILN_SKIP_WITHOUT_CORPUS(kiln_corpus_dir());
  corpus_stats_t st;
  memset(&st, 0, sizeof st);
  int files = wrap_for_each_corpus_instr(KILN_OP_CONVOLUTION, "convolution(", corpus_conv, &st);
  wrap_stats_free(&st.wrap);
  if (files < 0) fail_msg("no xla/ or real/ folder in the corpus at %s", kiln_corpus_dir());
  printf(
      "corpus convolutions: %d distinct run against the evaluator, %d as im2col + gemm, %d too "
      "costly to "
      "evaluate, %d invalid\n",
      st.run, st.gemm, st.costly, st.invalid);
  if (!kiln_corpus_sampling()) assert_true(st.gemm > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_2d_padding_strides_dilations),
      cmocka_unit_test(test_conv_1d_3d_and_types),
      cmocka_unit_test(test_conv_feature_groups_and_1x1),
      cmocka_unit_test(test_conv_left_elemental),
      cmocka_unit_test(test_corpus_convolutions_match_evaluator),
  };
  return kiln_run_tests(tests, setup, teardown);
}
