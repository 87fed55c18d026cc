/* Dot and reduce-window through the loop emitter, and tensors in non-default layouts.
 *
 * Every distinct dot and reduce-window of the corpus's xla/ and real/ modules, wrapped into a
 * fusion of its own as the fusion wrapper pass does, compiles through the loop emitter,
 * passes ptxas (when present), runs on the host and matches the evaluator within
 * kiln_compare_kernel_tolerance (dots too costly for the evaluator here run with their batch
 * dims cut to 2 and free dims to 8; what is still too costly is compiled and ptxas-checked
 * only). Hand cases add dot element types (bf16, f16, s8 -> s32, f8, c64, pred)
 * with batch and contracting dims anywhere, and reduce-windows with stride, padding, base
 * and window dilation.
 *
 * Layouts: parameters, constants and outputs whose layout is not the default are stored in
 * physical order (minor_to_major reversed is the row-major order of memory). The runner
 * (kiln_runner_check) lays the evaluator's logical inputs out physically and reads the
 * outputs back, so a kernel that ignored the layout would mismatch; hand fusions cover {0,1}
 * parameters and outputs, rank-3 permutations, multi-output fusions whose outputs have
 * different layouts, a reshape to an output of another layout, a parameter returned as is
 * in another layout, a transposed array constant and a bitcast between layouts. */
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

#define RUN_LIMIT wrap_run_limit()

#define MODULE(body) "HloModule t\n\n" body

static void test_dot_element_types(void **state) {
  wrap_run_hand("bf16 -> bf16",
                MODULE("ENTRY f {\n  a = bf16[4,33] parameter(0)\n  b = bf16[33,5] parameter(1)\n"
                       "  ROOT d = bf16[4,5] dot(a, b), lhs_contracting_dims={1}, "
                       "rhs_contracting_dims={0}\n}\n"));
  wrap_run_hand("f16 x f16 -> f32",
                MODULE("ENTRY f {\n  a = f16[4,9] parameter(0)\n  b = f16[9,5] parameter(1)\n"
                       "  ROOT d = f32[4,5] dot(a, b), lhs_contracting_dims={1}, "
                       "rhs_contracting_dims={0}\n}\n"));
  wrap_run_hand("s8 -> s32",
                MODULE("ENTRY f {\n  a = s8[4,17] parameter(0)\n  b = s8[17,5] parameter(1)\n"
                       "  ROOT d = s32[4,5] dot(a, b), lhs_contracting_dims={1}, "
                       "rhs_contracting_dims={0}\n}\n"));
  wrap_run_hand(
      "f8e4m3fn -> f32",
      MODULE("ENTRY f {\n  a = f8e4m3fn[3,16] parameter(0)\n  b = f8e5m2[16,2] parameter(1)\n"
             "  ROOT d = f32[3,2] dot(a, b), lhs_contracting_dims={1}, "
             "rhs_contracting_dims={0}\n}\n"));
  wrap_run_hand("c64",
                MODULE("ENTRY f {\n  a = c64[3,7] parameter(0)\n  b = c64[7,2] parameter(1)\n"
                       "  ROOT d = c64[3,2] dot(a, b), lhs_contracting_dims={1}, "
                       "rhs_contracting_dims={0}\n}\n"));
  wrap_run_hand("c128 x f64 operands",
                MODULE("ENTRY f {\n  a = c128[3,7] parameter(0)\n  b = c128[7,2] parameter(1)\n"
                       "  ROOT d = c128[3,2] dot(a, b), lhs_contracting_dims={1}, "
                       "rhs_contracting_dims={0}\n}\n"));
  wrap_run_hand("pred",
                MODULE("ENTRY f {\n  a = pred[3,7] parameter(0)\n  b = pred[7,2] parameter(1)\n"
                       "  ROOT d = pred[3,2] dot(a, b), lhs_contracting_dims={1}, "
                       "rhs_contracting_dims={0}\n}\n"));
}

static void test_dot_batch_and_contracting_dims_anywhere(void **state) {
  wrap_run_hand(
      "batch in the middle, two contracting dims",
      MODULE("ENTRY f {\n  a = f32[3,2,4,5] parameter(0)\n  b = f32[5,2,6,3] parameter(1)\n"
             "  ROOT d = f32[2,4,6] dot(a, b), lhs_batch_dims={1}, rhs_batch_dims={1}, "
             "lhs_contracting_dims={0,3}, rhs_contracting_dims={3,0}\n}\n"));
  wrap_run_hand(
      "vector . vector",
      MODULE(
          "ENTRY f {\n  a = f32[37] parameter(0)\n  b = f32[37] parameter(1)\n"
          "  ROOT d = f32[] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n}\n"));
  wrap_run_hand(
      "outer product, transposed layouts",
      MODULE("ENTRY f {\n  a = f32[4,3]{0,1} parameter(0)\n  b = f32[3,5]{0,1} parameter(1)\n"
             "  ROOT d = f32[4,5]{0,1} dot(a, b), lhs_contracting_dims={1}, "
             "rhs_contracting_dims={0}\n}\n"));
}

static void test_reduce_window_stride_padding_dilation(void **state) {
  wrap_run_hand("max pool 3x3 stride 2 pad",
                MODULE("max {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT m = "
                       "f32[] maximum(x, y)\n}\n\n"
                       "ENTRY f {\n  a = f32[2,9,9,3] parameter(0)\n  i = f32[] constant(-inf)\n"
                       "  ROOT r = f32[2,5,5,3] reduce-window(a, i), window={size=1x3x3x1 "
                       "stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}, to_apply=max\n}\n"));
  wrap_run_hand("sum with base and window dilation, negative padding",
                MODULE("add {\n  x = s32[] parameter(0)\n  y = s32[] parameter(1)\n  ROOT s = "
                       "s32[] add(x, y)\n}\n\n"
                       "ENTRY f {\n  a = s32[7,6] parameter(0)\n  i = s32[] constant(0)\n"
                       "  ROOT r = s32[11,5] reduce-window(a, i), window={size=2x2 pad=0_-1x1_0 "
                       "lhs_dilate=2x1 rhs_dilate=1x2}, to_apply=add\n}\n"));
  wrap_run_hand(
      "variadic reduce-window (max with index)",
      MODULE("mx {\n  a = f32[] parameter(0)\n  ai = s32[] parameter(1)\n  b = f32[] "
             "parameter(2)\n  bi = s32[] parameter(3)\n"
             "  ge = pred[] compare(a, b), direction=GE\n  v = f32[] select(ge, a, b)\n  i = s32[] "
             "select(ge, ai, bi)\n"
             "  ROOT t = (f32[], s32[]) tuple(v, i)\n}\n\n"
             "ENTRY f {\n  a = f32[12] parameter(0)\n  ix = s32[12] iota(), iota_dimension=0\n"
             "  c = f32[] constant(-inf)\n  z = s32[] constant(0)\n"
             "  ROOT r = (f32[4], s32[4]) reduce-window(a, ix, c, z), window={size=3 stride=3}, "
             "to_apply=mx\n}\n"));
}

/* ---- layouts ---- */

static void test_layout_transposed_parameter_and_output(void **state) {
  wrap_run_hand(
      "{0,1} param -> default output",
      MODULE(
          "ENTRY f {\n  p = f32[5,7]{0,1} parameter(0)\n  ROOT n = f32[5,7]{1,0} negate(p)\n}\n"));
  wrap_run_hand(
      "default param -> {0,1} output",
      MODULE(
          "ENTRY f {\n  p = f32[5,7]{1,0} parameter(0)\n  ROOT n = f32[5,7]{0,1} negate(p)\n}\n"));
  wrap_run_hand(
      "{0,1} + {1,0} -> {0,1}",
      MODULE("ENTRY f {\n  p = f32[6,9]{0,1} parameter(0)\n  q = f32[6,9]{1,0} parameter(1)\n"
             "  ROOT a = f32[6,9]{0,1} add(p, q)\n}\n"));
  wrap_run_hand(
      "rank 3 permutations, s16",
      MODULE(
          "ENTRY f {\n  p = s16[3,4,5]{0,2,1} parameter(0)\n  q = s16[3,4,5]{1,0,2} parameter(1)\n"
          "  ROOT a = s16[3,4,5]{2,0,1} multiply(p, q)\n}\n"));
  wrap_run_hand(
      "complex {0,1}",
      MODULE(
          "ENTRY f {\n  p = c64[3,4]{0,1} parameter(0)\n  ROOT n = c64[3,4]{0,1} negate(p)\n}\n"));
  wrap_run_hand("copy that changes the layout",
                MODULE("ENTRY f {\n  p = f32[64,48]{1,0} parameter(0)\n  ROOT c = f32[64,48]{0,1} "
                       "copy(p)\n}\n"));
}

static void test_layout_multi_output_and_reshape(void **state) {
  wrap_run_hand(
      "two outputs in different layouts",
      MODULE("ENTRY f {\n  p = f32[6,4]{0,1} parameter(0)\n  e = f32[6,4]{1,0} exponential(p)\n"
             "  n = f32[6,4]{0,1} negate(p)\n  ROOT t = (f32[6,4]{1,0}, f32[6,4]{0,1}) tuple(e, "
             "n)\n}\n"));
  wrap_run_hand(
      "outputs of other dims and layouts",
      MODULE("ENTRY f {\n  p = f32[6,4]{1,0} parameter(0)\n  e = f32[6,4]{0,1} exponential(p)\n"
             "  r = f32[4,6]{0,1} reshape(p)\n  ROOT t = (f32[6,4]{0,1}, f32[4,6]{0,1}) tuple(e, "
             "r)\n}\n"));
  wrap_run_hand(
      "parameter returned as is next to a computed output",
      MODULE("ENTRY f {\n  p = f32[3,5]{0,1} parameter(0)\n  n = f32[3,5]{1,0} negate(p)\n"
             "  ROOT t = (f32[3,5]{1,0}, f32[3,5]{0,1}) tuple(n, p)\n}\n"));
  wrap_run_hand("transposed array constant",
                MODULE("ENTRY f {\n  p = f32[2,3]{0,1} parameter(0)\n"
                       "  c = f32[2,3]{0,1} constant({ {1, 2, 3}, {4, 5, 6} })\n  ROOT a = "
                       "f32[2,3]{1,0} add(p, c)\n}\n"));
  wrap_run_hand(
      "bitcast between layouts",
      MODULE("ENTRY f {\n  p = f32[4,6]{0,1} parameter(0)\n  b = f32[6,4]{1,0} bitcast(p)\n"
             "  ROOT n = f32[6,4]{1,0} negate(b)\n}\n"));
}

static void test_layout_tiled_is_unimplemented(void **state) {
  const char *text = MODULE("ENTRY f {\n  p = f32[8,128]{1,0:T(8,128)} parameter(0)\n  ROOT n = f32[8,128]{1,0} negate(p)\n}\n");
  kiln_hlo_module_t *m = NULL;
  assert_null(kiln_hlo_parse_module(text, strlen(text), NULL, &m));
  kiln_codegen_kernel_t k;
  kiln_status s = kiln_codegen_kernel_emit(m->entry, NULL, &k);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_UNIMPLEMENTED);
  assert_non_null(strstr(kiln_status_message(s), "tiled layout"));
  kiln_status_free(s);
  kiln_hlo_module_destroy(m);
}

/* ---- corpus ---- */

static double op_cost(const kiln_hlo_instruction_t *in) {
  const kiln_shape_t *s = in->shape;
  if (kiln_shape_is_tuple(s)) s = s->num_elements > 0 ? s->elements[0] : NULL;
  if (!s) return 0;
  double c = (double)kiln_shape_num_elements(s);
  if (in->opcode == KILN_OP_DOT) {
    const kiln_shape_t *ls = in->operands[0]->shape;
    for (int i = 0; i < in->dot_dnums.lhs_contracting.n; i++) {
      int64_t d = in->dot_dnums.lhs_contracting.v[i];
      if (d >= 0 && d < ls->rank) c *= (double)ls->dims[d];
    }
  } else {
    for (int i = 0; i < in->num_window_dims; i++) c *= (double)in->window[i].size;
  }
  return c;
}

static void corpus_op(void *vctx, const kiln_hlo_instruction_t *in, const char *label) {
  wrap_corpus_ctx_t *ctx = vctx;
  for (int k = 0; k < in->num_operands; k++)
    if (!kiln_shape_is_array(in->operands[k]->shape) || kiln_shape_is_dynamic(in->operands[k]->shape)) return;
  if (kiln_shape_is_dynamic(in->shape)) return;
  char *text = wrap_text(in, NULL, NULL);
  if (!text) return;
  if (wrap_seen(&ctx->st, text)) {
    kiln_free(text);
    return;
  }
  ctx->st.unique++;
  bool compile_only = op_cost(in) > RUN_LIMIT;
  if (compile_only && in->opcode == KILN_OP_DOT && in->num_operands == 2) {
    /* Shrink batch dims to 2 and free dims to 8 (contracting dims stay): the same dot on
     * fewer rows and columns. */
    const kiln_dot_dnums_t *dn = &in->dot_dnums;
    kiln_shape_t lhs = *in->operands[0]->shape, rhs = *in->operands[1]->shape, out = *in->shape;
    int64_t ld[16] = {0}, rd[16] = {0}, od[16] = {0};
    bool ok = lhs.rank <= 16 && rhs.rank <= 16 && out.rank <= 16;
    for (int i = 0; ok && i < lhs.rank; i++) ld[i] = lhs.dims[i] < 8 ? lhs.dims[i] : 8;
    for (int i = 0; ok && i < rhs.rank; i++) rd[i] = rhs.dims[i] < 8 ? rhs.dims[i] : 8;
    for (int i = 0; ok && i < dn->lhs_contracting.n; i++) {
      ld[dn->lhs_contracting.v[i]] = lhs.dims[dn->lhs_contracting.v[i]];
      rd[dn->rhs_contracting.v[i]] = rhs.dims[dn->rhs_contracting.v[i]];
    }
    int o = 0;
    for (int i = 0; ok && i < dn->lhs_batch.n; i++) {
      int64_t b = lhs.dims[dn->lhs_batch.v[i]] < 2 ? lhs.dims[dn->lhs_batch.v[i]] : 2;
      ld[dn->lhs_batch.v[i]] = rd[dn->rhs_batch.v[i]] = od[o++] = b;
    }
    for (int side = 0; ok && side < 2; side++) {
      const kiln_shape_t *sh = side ? &rhs : &lhs;
      const kiln_i64_list_t *bl = side ? &dn->rhs_batch : &dn->lhs_batch;
      const kiln_i64_list_t *cl = side ? &dn->rhs_contracting : &dn->lhs_contracting;
      for (int i = 0; i < sh->rank; i++) {
        bool skip = false;
        for (int j = 0; j < bl->n; j++) skip |= bl->v[j] == i;
        for (int j = 0; j < cl->n; j++) skip |= cl->v[j] == i;
        if (!skip && o < 16) od[o++] = side ? rd[i] : ld[i];
      }
    }
    if (ok && o == out.rank) {
      lhs.dims = ld, rhs.dims = rd, out.dims = od;
      kiln_shape_t *ops[2] = {&lhs, &rhs};
      char *small = wrap_text(in, ops, &out);
      if (small) {
        kiln_free(text);
        text = small;
        double k = 1;
        for (int i = 0; i < dn->lhs_contracting.n; i++) k *= (double)ld[dn->lhs_contracting.v[i]];
        compile_only = (double)kiln_shape_num_elements(&out) * k > RUN_LIMIT;
      }
    }
  }
  wrap_run_known(label, text, compile_only, ctx->jit, ctx->pool, &ctx->st, wrap_known_difference(in));
  kiln_free(text);
}

static void run_corpus(kiln_hlo_opcode_t op, const char *needle, int min_passed) {
  wrap_stats_t st;
  wrap_run_corpus(op, needle, kiln_hlo_opcode_name(op), corpus_op, &st);
  if (!kiln_corpus_sampling()) assert_true(st.passed >= min_passed);
}

static void test_corpus_dots_match_evaluator(void **state) { run_corpus(KILN_OP_DOT, " dot(", 20); }

static void test_corpus_reduce_windows_match_evaluator(void **state) {
  run_corpus(KILN_OP_REDUCE_WINDOW, "reduce-window(", 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dot_element_types),
      cmocka_unit_test(test_dot_batch_and_contracting_dims_anywhere),
      cmocka_unit_test(test_reduce_window_stride_padding_dilation),
      cmocka_unit_test(test_layout_transposed_parameter_and_output),
      cmocka_unit_test(test_layout_multi_output_and_reshape),
      cmocka_unit_test(test_layout_tiled_is_unimplemented),
      cmocka_unit_test(test_corpus_dots_match_evaluator),
      cmocka_unit_test(test_corpus_reduce_windows_match_evaluator),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
