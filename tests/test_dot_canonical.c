/* Dot canonicalization (compiler/passes/dot_canonicalizer.c): each form a dot may come in
 * is compiled for the host device, run on generated inputs and compared with the reference
 * evaluator; the thunk sequence shows the dot became a gemm thunk and how many kernels the
 * rewrite cost (a transposed operand or a non-default layout: none). With no gemm library
 * the pass leaves dots as written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/passes/fusion_wrapper.h"
#include "compiler/passes/pass.h"
#include "runtime/host/host_device.h"
#include "tests/host_run_util.h"

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

static void test_batch_dims_not_leading_get_a_transpose_then_a_batched_gemm(void **state) {
  (void)state;
  /* lhs batch dim 1: one transpose kernel brings it to the front; rhs is already in form. */
  check(
      "HloModule b\nENTRY e {\n  a = f32[16,4,32] parameter(0)\n  b = f32[4,32,8] parameter(1)\n"
      "  ROOT d = f32[4,16,8] dot(a, b), lhs_batch_dims={1}, lhs_contracting_dims={2}, "
      "rhs_batch_dims={0}, rhs_contracting_dims={1}\n}\n",
      1, 1);
  /* Two batch dims, trailing on the rhs (f64). */
  check(
      "HloModule b2\nENTRY e {\n  a = f64[2,3,5,7] parameter(0)\n  b = f64[7,6,2,3] parameter(1)\n"
      "  ROOT d = f64[2,3,5,6] dot(a, b), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, "
      "rhs_batch_dims={2,3}, rhs_contracting_dims={0}\n}\n",
      1, 1);
}

static void test_two_contracting_dims_collapse_into_one(void **state) {
  (void)state;
  /* Contracting dims stored in the same order on both sides: reshapes only (bitcasts). */
  check(
      "HloModule c\nENTRY e {\n  a = f32[12,5,6] parameter(0)\n  b = f32[5,6,9] parameter(1)\n"
      "  ROOT d = f32[12,9] dot(a, b), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}\n}\n",
      1, 0);
  /* Three contracting dims in different orders: the smaller operand is transposed. */
  check(
      "HloModule c3\nENTRY e {\n  a = f32[6,5,7,3] parameter(0)\n  b = f32[7,3,6,9] parameter(1)\n"
      "  ROOT d = f32[5,9] dot(a, b), lhs_contracting_dims={0,2,3}, "
      "rhs_contracting_dims={2,0,1}\n}\n",
      1, 1);
}

static void test_matrix_vector_and_vector_vector_are_gemms(void **state) {
  (void)state;
  check(
      "HloModule mv\nENTRY e {\n  a = f32[32,16] parameter(0)\n  v = f32[16] parameter(1)\n"
      "  ROOT d = f32[32] dot(a, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
      1, 0);
  check(
      "HloModule vm\nENTRY e {\n  v = f32[16] parameter(0)\n  a = f32[16,24] parameter(1)\n"
      "  ROOT d = f32[24] dot(v, a), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n}\n",
      1, 0);
  check(
      "HloModule vv\nENTRY e {\n  u = f32[64] parameter(0)\n  v = f32[64] parameter(1)\n"
      "  ROOT d = f32[] dot(u, v), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n}\n",
      1, 0);
  /* Batched matrix-vector with the vector's batch dim last. */
  check(
      "HloModule bmv\nENTRY e {\n  a = f32[4,8,16] parameter(0)\n  v = f32[16,4] parameter(1)\n"
      "  ROOT d = f32[4,8] dot(a, v), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
      "rhs_batch_dims={1}, rhs_contracting_dims={0}\n}\n",
      1, 1);
  /* An outer product: k = 1. */
  check(
      "HloModule op\nENTRY e {\n  u = f32[8] parameter(0)\n  v = f32[12] parameter(1)\n"
      "  ROOT d = f32[8,12] dot(u, v)\n}\n",
      1, 0);
}

static void test_transposed_operands_fold_into_the_gemm_flags(void **state) {
  (void)state;
  /* transpose(a) as lhs and transpose(b) as rhs: both folded, no kernel. */
  check(
      "HloModule t\nENTRY e {\n  a = f32[16,24] parameter(0)\n  b = f32[8,16] parameter(1)\n"
      "  ta = f32[24,16] transpose(a), dimensions={1,0}\n"
      "  tb = f32[16,8] transpose(b), dimensions={1,0}\n"
      "  ROOT d = f32[24,8] dot(ta, tb), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
      1, 0);
  /* A batched transpose of the last two dims (attention's q k^T). */
  check(
      "HloModule t2\nENTRY e {\n  q = f32[4,32,16] parameter(0)\n  k = f32[4,32,16] parameter(1)\n"
      "  kt = f32[4,16,32] transpose(k), dimensions={0,2,1}\n"
      "  ROOT s = f32[4,32,32] dot(q, kt), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
      "rhs_batch_dims={0}, rhs_contracting_dims={1}\n}\n",
      1, 0);
  /* One transpose read as both operands (x^T x^T): folded on both sides. */
  check(
      "HloModule t5\nENTRY e {\n  a = f32[16,16] parameter(0)\n"
      "  ta = f32[16,16] transpose(a), dimensions={1,0}\n"
      "  ROOT d = f32[16,16] dot(ta, ta), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
      1, 0);
  /* A transpose that reorders the lhs's free dims cannot fold (the result lists them in
   * operand order); it moves only a size-1 dim, so it is a bitcast. */
  check(
      "HloModule t4\nENTRY e {\n  a = f32[1,101,10] parameter(0)\n  b = f32[10,1] parameter(1)\n"
      "  ta = f32[101,1,10] transpose(a), dimensions={1,0,2}\n"
      "  ROOT d = f32[101,1,1] dot(ta, b), lhs_contracting_dims={2}, rhs_contracting_dims={0}\n}\n",
      1, 0);
  /* A transpose that is read elsewhere too stays for that user; the dot reads around it. */
  check(
      "HloModule t3\nENTRY e {\n  a = f32[16,24] parameter(0)\n  b = f32[16,8] parameter(1)\n"
      "  ta = f32[24,16] transpose(a), dimensions={1,0}\n"
      "  d = f32[24,8] dot(ta, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  ROOT t = (f32[24,8], f32[24,16]) tuple(d, ta)\n}\n",
      1, 1);
}

static void test_non_default_layouts_cost_no_kernel(void **state) {
  (void)state;
  check(
      "HloModule l\nENTRY e {\n  a = f32[32,16]{0,1} parameter(0)\n  b = f32[16,8]{0,1} "
      "parameter(1)\n"
      "  ROOT d = f32[32,8] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
      1, 0);
  check(
      "HloModule l2\nENTRY e {\n  a = f32[4,32,16]{1,2,0} parameter(0)\n  b = f32[4,16,8] "
      "parameter(1)\n"
      "  ROOT d = f32[4,32,8] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
      "rhs_batch_dims={0}, rhs_contracting_dims={1}\n}\n",
      1, 0);
}

static void test_no_gemm_library_leaves_dots_as_written(void **state) {
  (void)state;
  const char *text =
      "HloModule n\nENTRY e {\n  a = f32[16,4,32] parameter(0)\n  b = f32[4,32,8] parameter(1)\n"
      "  ROOT d = f32[4,16,8] dot(a, b), lhs_batch_dims={1}, lhs_contracting_dims={2}, "
      "rhs_batch_dims={0}, rhs_contracting_dims={1}\n}\n";
  kiln_hlo_module_t *m = parse(text);
  char *before = kiln_hlo_module_to_string(m);
  kiln_pass_options_t o = {.verify = 1, .no_gemm_library = true};
  assert_null(kiln_pass_run_list(m, "dot_canonicalizer", &o));
  char *after = kiln_hlo_module_to_string(m);
  assert_string_equal(before, after);
  kiln_free(after);
  o.no_gemm_library = false;
  assert_null(kiln_pass_run_list(m, "dot_canonicalizer", &o));
  after = kiln_hlo_module_to_string(m);
  assert_non_null(strstr(after, "transpose("));
  assert_non_null(strstr(after, "lhs_batch_dims={0}"));
  kiln_free(after);
  kiln_free(before);
  kiln_hlo_module_destroy(m);
}

static void test_batch_outer_product_of_a_column_major_operand(void **state) {
  (void)state;
  /* From the corpus's model_par modules (dot.233 at 16 x 4 x 24 instead of 1024 x 64 x
   * 10240): a batch dot with no contracting dim whose lhs, a select, has layout {0,1},
   * then a transpose to layout {0,1,2} and a sum over the batch dim. With the simplifier
   * off the dot stays (else the sum becomes a dot contracting the batch dim): one batched
   * k = 1 gemm after the layout passes, kernels for the select, r21 with its batch dim
   * first, the transpose and the sum. Also plain parameters with layout {0,1} and each
   * batch-dim position. */
  setenv("KILN_DISABLE_PASSES", "simplify", 1);
  check(
      "HloModule mp\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(x, y)\n}\nENTRY e {\n"
      "  c40 = pred[4,16]{1,0} parameter(0)\n  g = f32[16,4]{1,0} parameter(1)\n"
      "  v = f32[4]{0} parameter(2)\n  r21 = f32[24,4]{1,0} parameter(3)\n"
      "  t230 = pred[16,4]{0,1} transpose(c40), dimensions={1,0}\n"
      "  b231 = f32[16,4]{1,0} broadcast(v), dimensions={1}\n"
      "  s232 = f32[16,4]{0,1} select(t230, g, b231)\n"
      "  d233 = f32[4,16,24]{2,1,0} dot(s232, r21), lhs_batch_dims={1}, lhs_contracting_dims={}, "
      "rhs_batch_dims={1}, rhs_contracting_dims={}\n"
      "  t234 = f32[24,16,4]{0,1,2} transpose(d233), dimensions={2,1,0}\n"
      "  z = f32[] constant(0)\n"
      "  ROOT r240 = f32[24,16]{1,0} reduce(t234, z), dimensions={2}, to_apply=add\n}\n",
      1, 4);
  static const char *const kForms[][3] = {
      {"f32[4,3]{0,1}", "f32[4,5]{1,0}", "lhs_batch_dims={0}, rhs_batch_dims={0}"},
      {"f32[3,4]{0,1}", "f32[4,5]{0,1}", "lhs_batch_dims={1}, rhs_batch_dims={0}"},
      {"f32[4,3]{0,1}", "f32[5,4]{0,1}", "lhs_batch_dims={0}, rhs_batch_dims={1}"},
  };
  for (size_t i = 0; i < sizeof kForms / sizeof kForms[0]; i++) {
    char text[512];
    snprintf(text, sizeof text,
             "HloModule bo\nENTRY e {\n  a = %s parameter(0)\n  b = %s parameter(1)\n"
             "  ROOT d = f32[4,3,5] dot(a, b), %s\n}\n",
             kForms[i][0], kForms[i][1], kForms[i][2]);
    char *thunks = NULL;
    run_and_compare_on(g_dev, text, 1, &thunks);
    assert_int_equal(count_in(thunks, " gemm "), 1);
    kiln_free(thunks);
  }
  unsetenv("KILN_DISABLE_PASSES");
}

/* Operand types no gemm takes become types one does where the result stays the same (see
 * dot_canonicalizer.c): a convert before (a loop kernel, or fused), a narrower result
 * converted after; the dot itself is a gemm thunk and the result equals the evaluator's. */
static void test_operand_types_no_gemm_takes_are_converted_first(void **state) {
  (void)state;
  static const struct {
    const char *lhs, *rhs, *out;
    int gemms;
  } kCases[] = {
      {"bf16[16,32]", "s4[32,24]", "bf16[16,24]", 1},         /* int4 weights */
      {"f8e5m2[16,32]", "f8e4m3fn[32,24]", "bf16[16,24]", 1}, /* fp8 */
      {"f16[16,32]", "bf16[32,24]", "f32[16,24]", 1},         /* in f32 */
      {"s4[16,32]", "s4[32,24]", "s8[16,24]", 1},             /* in s8 */
      {"u4[16,32]", "u4[32,24]", "u8[16,24]", 1},             /* in u8 */
      {"s8[16,32]", "u8[32,24]", "s32[16,24]", 1},            /* in s16 */
      {"u16[16,32]", "s8[32,24]", "s32[16,24]", 1},           /* in s32, modulo 2^32 */
      {"s8[16,32]", "s8[32,24]", "s64[16,24]", 1},            /* s32, then s64 */
      {"u8[16,32]", "u8[32,24]", "u64[16,24]", 1},            /* u32, then u64 */
      {"s32[16,32]", "s32[32,24]", "s64[16,24]", 0},          /* sums may pass 2^31: elemental */
  };
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; i++) {
    char text[512];
    snprintf(text, sizeof text,
             "HloModule up\nENTRY e {\n  a = %s parameter(0)\n  b = %s parameter(1)\n"
             "  ROOT d = %s dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
             kCases[i].lhs, kCases[i].rhs, kCases[i].out);
    char *thunks = NULL;
    run_and_compare_on(g_dev, text, 1, &thunks);
    if (count_in(thunks, " gemm ") != kCases[i].gemms)
      fail_msg("%s x %s -> %s: %d gemm thunks, want %d:\n%s", kCases[i].lhs, kCases[i].rhs,
               kCases[i].out, count_in(thunks, " gemm "), kCases[i].gemms, thunks);
    kiln_free(thunks);
  }
}

/* A transpose feeding a converted operand stays foldable: the convert goes below it, and the
 * gemm reads the converted weights transposed (B^T) instead of a transposed copy. */
static void test_a_transposed_converted_operand_folds_into_the_gemm(void **state) {
  (void)state;
  char *thunks = NULL;
  run_and_compare_on(
      g_dev,
      "HloModule tr\nENTRY e {\n  a = bf16[16,32] parameter(0)\n"
      "  w = s4[24,32] parameter(1)\n  t = s4[32,24] transpose(w), dimensions={1,0}\n"
      "  ROOT d = bf16[16,24] dot(a, t), lhs_contracting_dims={1}, "
      "rhs_contracting_dims={0}\n}\n",
      1, &thunks);
  if (count_in(thunks, " gemm ") != 1 || !strstr(thunks, "B^T") ||
      count_in(thunks, " kernel ") != 1)
    fail_msg("want one convert kernel and a gemm reading B transposed:\n%s", thunks);
  kiln_free(thunks);
}

/* The conversion rule itself (kiln_gemm_upcast_types): operands must be exact in the result
 * type as well (a dot rounds them to it first), the result type is tried first; integer
 * 64-bit results only while no sum can pass 32 bits. */
static void test_upcast_types_keep_the_dots_rounding(void **state) {
  (void)state;
  static const struct {
    kiln_elem_type_t l, r, out;
    double k;
    kiln_gemm_types_t types;
    bool taken;
    kiln_elem_type_t op, res;
  } kCases[] = {
      {KILN_BF16, KILN_S4, KILN_BF16, 64, KILN_GEMM_TYPES_HOST, true, KILN_BF16, KILN_BF16},
      {KILN_F8E5M2, KILN_F8E4M3FN, KILN_BF16, 64, KILN_GEMM_TYPES_HOST, true, KILN_BF16, KILN_BF16},
      {KILN_F16, KILN_BF16, KILN_F32, 64, KILN_GEMM_TYPES_HOST, true, KILN_F32, KILN_F32},
      {KILN_S8, KILN_S8, KILN_F16, 64, KILN_GEMM_TYPES_HOST, true, KILN_F16, KILN_F16},
      {KILN_S8, KILN_S8, KILN_F16, 64, KILN_GEMM_TYPES_CUBLASLT, true, KILN_F16, KILN_F16},
      {KILN_S8, KILN_S8, KILN_F32, 64, KILN_GEMM_TYPES_HOST, true, KILN_F32, KILN_F32},
      {KILN_F16, KILN_BF16, KILN_F32, 64, KILN_GEMM_TYPES_CUBLAS, true, KILN_F32, KILN_F32},
      /* an operand not exact in the result type: the dot would round it first */
      {KILN_F8E8M0FNU, KILN_F8E8M0FNU, KILN_F16, 1, KILN_GEMM_TYPES_HOST, false, 0, 0},
      {KILN_BF16, KILN_S8, KILN_F16, 1, KILN_GEMM_TYPES_HOST, false, 0, 0},
      {KILN_F16, KILN_S8, KILN_BF16, 1, KILN_GEMM_TYPES_HOST, false, 0, 0},
      {KILN_F16, KILN_F16, KILN_BF16, 1, KILN_GEMM_TYPES_HOST, false, 0, 0},
      {KILN_BF16, KILN_S4, KILN_BF16, 64, KILN_GEMM_TYPES_CUBLAS, false, 0, 0},
      /* integers */
      {KILN_S8, KILN_S8, KILN_S64, 100, KILN_GEMM_TYPES_HOST, true, KILN_S8, KILN_S32},
      {KILN_S8, KILN_U8, KILN_S32, 100, KILN_GEMM_TYPES_HOST, true, KILN_S16, KILN_S32},
      {KILN_U32, KILN_S8, KILN_U16, 100, KILN_GEMM_TYPES_HOST, true, KILN_S32, KILN_U16},
      {KILN_U8, KILN_U8, KILN_U64, 66051, KILN_GEMM_TYPES_HOST, true, KILN_U8, KILN_U32},
      {KILN_U8, KILN_U8, KILN_U64, 66052, KILN_GEMM_TYPES_HOST, false, 0, 0},
      {KILN_S32, KILN_S32, KILN_S64, 2, KILN_GEMM_TYPES_HOST, false, 0, 0},
      {KILN_S8, KILN_S8, KILN_S32, 64, KILN_GEMM_TYPES_HOST, false, 0, 0}, /* taken as is */
  };
  assert_false(kiln_gemm_types_take(KILN_F16, KILN_BF16, KILN_GEMM_TYPES_HOST));
  assert_false(kiln_gemm_types_take(KILN_BF16, KILN_F16, KILN_GEMM_TYPES_CUBLASLT));
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; i++) {
    kiln_elem_type_t op = KILN_PRED, res = KILN_PRED;
    bool taken = kiln_gemm_upcast_types(kCases[i].l, kCases[i].r, kCases[i].out, kCases[i].k,
                                        kCases[i].types, &op, &res);
    if (taken != kCases[i].taken || (taken && (op != kCases[i].op || res != kCases[i].res)))
      fail_msg("case %zu (%s x %s -> %s): %s, %s -> %s", i, kiln_elem_type_name(kCases[i].l),
               kiln_elem_type_name(kCases[i].r), kiln_elem_type_name(kCases[i].out),
               taken ? "taken" : "not taken", kiln_elem_type_name(op), kiln_elem_type_name(res));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batch_dims_not_leading_get_a_transpose_then_a_batched_gemm),
      cmocka_unit_test(test_two_contracting_dims_collapse_into_one),
      cmocka_unit_test(test_matrix_vector_and_vector_vector_are_gemms),
      cmocka_unit_test(test_transposed_operands_fold_into_the_gemm_flags),
      cmocka_unit_test(test_non_default_layouts_cost_no_kernel),
      cmocka_unit_test(test_no_gemm_library_leaves_dots_as_written),
      cmocka_unit_test(test_batch_outer_product_of_a_column_major_operand),
      cmocka_unit_test(test_operand_types_no_gemm_takes_are_converted_first),
      cmocka_unit_test(test_upcast_types_keep_the_dots_rounding),
      cmocka_unit_test(test_a_transposed_converted_operand_folds_into_the_gemm),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
