/* topk_decomposer: the sort + slice expansion evaluates bit-identically to the evaluator's
 * topk (values and indices) for float, bf16 and integer operands, largest and smallest,
 * with ties, NaN, infinities and signed zeros in the input; the expansion's sort compiles
 * with the sort emitter; unsupported forms are left alone. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "tools/common/fusion_runner.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/pass.h"
#include "tools/common/run_report.h"

static kiln_hlo_module_t *topk_module(const char *type, const char *dims, const char *out_dims,
                                      int k, bool largest) {
  char text[512];
  snprintf(text, sizeof text,
           "HloModule t\nENTRY main {\n  x = %s[%s] parameter(0)\n"
           "  ROOT t = (%s[%s], s32[%s]) topk(x), k=%d, largest=%s\n}\n",
           type, dims, type, out_dims, out_dims, k, largest ? "true" : "false");
  kiln_hlo_module_t *m = NULL;
  kiln_hlo_parse_options_t po = {0};
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), &po, &m);
  if (s) fail_msg("parse: %s", kiln_status_message(s));
  return m;
}

static void check(const char *type, const char *dims, const char *out_dims, int k, bool largest) {
  kiln_hlo_module_t *m = topk_module(type, dims, out_dims, k, largest);
  kiln_arena_t a;
  kiln_arena_init(&a);
  kiln_literal_t *x = kiln_literal_make(&a, m->entry->parameters[0]->shape);
  uint64_t st = 7;
  const double special[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 3.0, 3.0, -NAN};
  bool is_float = kiln_elem_type_is_float(x->shape->type);
  for (int64_t i = 0; i < x->num_elements; i++) {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    /* small integer values give many ties */
    double v = (double)((int64_t)(st >> 33) % 9) - 4;
    if (is_float && i % 11 < 8 && i % 3 == 0) v = special[i % 8];
    if (!is_float && v < 0 && kiln_elem_type_is_unsigned_int(x->shape->type)) v = -v;
    if (is_float)
      kiln_literal_set_f64(x, i, v);
    else
      kiln_literal_set_s64(x, i, (int64_t)v);
  }
  kiln_eval_options_t eo = {0};
  kiln_literal_t *before = NULL, *after = NULL;
  kiln_status s = kiln_eval_module(m, &eo, 1, &x, &a, &before);
  if (s) fail_msg("eval before: %s", kiln_status_message(s));
  kiln_pass_options_t po = {.verify = 1};
  s = kiln_pass_run_list(m, "topk_decomposer", &po);
  if (s) fail_msg("pass: %s", kiln_status_message(s));
  s = kiln_hlo_module_verify(m);
  if (s) fail_msg("verify: %s", kiln_status_message(s));
  assert_int_equal(m->entry->root->opcode, KILN_OP_TUPLE);
  s = kiln_eval_module(m, &eo, 1, &x, &a, &after);
  if (s) fail_msg("eval after: %s", kiln_status_message(s));
  for (int leaf = 0; leaf < 2; leaf++) {
    const kiln_literal_t *p = kiln_run_report_leaf(before, leaf),
                         *q = kiln_run_report_leaf(after, leaf);
    size_t bytes = (size_t)p->num_elements * kiln_elem_type_storage_bytes(p->shape->type);
    if (p->num_elements != q->num_elements || (bytes && memcmp(p->data, q->data, bytes)))
      fail_msg("%s[%s] k=%d largest=%d: leaf %d differs", type, dims, k, largest, leaf);
  }
  kiln_arena_destroy(&a);
  kiln_hlo_module_destroy(m);
}

static void test_expansion_matches_the_evaluator(void **state) {
  check("f32", "64", "5", 5, true);
  check("f32", "64", "5", 5, false);
  check("f32", "3,40", "3,40", 40, true);
  check("bf16", "4,33", "4,7", 7, true);
  check("f16", "2,16", "2,1", 1, false);
  check("s32", "5,20", "5,6", 6, true);
  check("s32", "5,20", "5,6", 6, false);
  check("u8", "30", "4", 4, true);
  check("f64", "2,9", "2,0", 0, true);
}

static void test_expansion_compiles_with_the_sort_emitter(void **state) {
  kiln_hlo_module_t *m = topk_module("f32", "4,100", "4,3", 3, true);
  kiln_pass_options_t po = {.verify = 1};
  kiln_status s = kiln_pass_run_list(m, "topk_decomposer,priority_fusion,fusion_wrapper", &po);
  if (s) fail_msg("passes: %s", kiln_status_message(s));
  int emitted = 0;
  for (size_t i = 0; i < m->entry->instructions.len; i++) {
    const kiln_hlo_instruction_t *f = m->entry->instructions.data[i];
    if (f->opcode != KILN_OP_FUSION) continue;
    const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(f, "calls");
    kiln_codegen_kernel_t k;
    memset(&k, 0, sizeof k);
    kiln_codegen_compile_options_t co = {0};
    s = kiln_codegen_kernel_emit(body, &co, &k);
    if (s) fail_msg("emit %s: %s", body->name, kiln_status_message(s));
    kiln_codegen_kernel_free(&k);
    /* and the host kernel computes what the evaluator does */
    kiln_runner_options_t o;
    kiln_runner_options_init(&o);
    kiln_runner_report_t r;
    memset(&r, 0, sizeof r);
    s = kiln_runner_check(body, &o, &r);
    if (s) fail_msg("run %s: %s", body->name, kiln_status_message(s));
    if (r.mismatches) fail_msg("%s: %s", body->name, r.first_mismatch);
    emitted++;
  }
  assert_true(emitted >= 2); /* the sort, the slices */
  kiln_hlo_module_destroy(m);
}

static void test_unsupported_forms_are_left_alone(void **state) {
  kiln_hlo_module_t *m = topk_module("c64", "8", "2", 2, true);
  bool changed = false;
  kiln_status s = kiln_pass_topk_decomposer(m, NULL, &changed);
  assert_null(s);
  assert_false(changed);
  assert_int_equal(m->entry->root->opcode, KILN_OP_TOPK);
  kiln_hlo_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_expansion_matches_the_evaluator),
      cmocka_unit_test(test_expansion_compiles_with_the_sort_emitter),
      cmocka_unit_test(test_unsupported_forms_are_left_alone),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
