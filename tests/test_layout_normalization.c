/* Layout normalization on small hand-written modules: the issue's example
 * (f32[10,20,30]{2,0,1} -> f32[20,10,30]{2,1,0}), layout-changing copies becoming
 * transposes, reshapes that are bitcasts and ones that decompose, reduce / broadcast /
 * slice / concatenate / constant / iota / while remapping, the fold order of multi-dim
 * reductions, ops without a rule left alone and counted. Every case checks bitwise
 * identical results on the evaluator and that only boundaries keep non-default layouts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "compiler/passes/layout.h"
#include "tests/pass_test_util.h"

/* Array instructions with a non-default layout that are neither parameters (and their
 * get-tuple-elements) nor bitcasts. */
static int non_default(const kiln_hlo_module_t *m) {
  int n = 0;
  for (size_t c = 0; c < m->computations.len; c++)
    for (size_t i = 0; i < m->computations.data[c]->instructions.len; i++) {
      const kiln_hlo_instruction_t *x = m->computations.data[c]->instructions.data[i];
      const kiln_hlo_instruction_t *b = x;
      while (b->opcode == KILN_OP_GET_TUPLE_ELEMENT) b = b->operands[0];
      if (b->opcode == KILN_OP_PARAMETER || x->opcode == KILN_OP_BITCAST) continue;
      if (kiln_shape_is_array(x->shape) && x->shape->has_layout && !kiln_layout_is_default(&x->shape->layout))
        n++;
    }
  return n;
}

static kiln_hlo_module_t *normalize(const char *text, const char *passes) {
  kiln_hlo_module_t *m = pt_run_same_results(text, passes);
  if (non_default(m)) {
    char *t = kiln_hlo_module_to_string(m);
    print_error("%s\n", t);
    kiln_free(t);
    fail_msg("%d instructions keep a non-default layout", non_default(m));
  }
  return m;
}

static void test_issue_example_permutes_logical_dims_into_physical_order(void **state) {
  kiln_hlo_module_t *m = normalize(
      "HloModule m, entry_computation_layout={(f32[10,20,30]{2,0,1})->f32[10,20,30]{2,0,1}}\n"
      "ENTRY main {\n"
      "  p = f32[10,20,30]{2,0,1} parameter(0)\n"
      "  ROOT n = f32[10,20,30]{2,0,1} negate(p)\n"
      "}\n",
      "layout_assignment,layout_normalization");
  pt_expect_text(m, "bitcast = f32[20,10,30]{2,1,0} bitcast(p)", true);
  pt_expect_text(m, "n = f32[20,10,30]{2,1,0} negate(bitcast)", true);
  /* the entry keeps its signature through a bitcast back */
  pt_expect_text(m, "ROOT bitcast.", true);
  char *root = kiln_shape_to_string(m->entry->root->shape, true);
  assert_string_equal(root, "f32[10,20,30]{2,0,1}");
  kiln_free(root);
  kiln_hlo_module_destroy(m);
}

static void test_layout_changing_copy_becomes_bitcast_and_transpose(void **state) {
  kiln_hlo_module_t *m = normalize(
      "HloModule m, entry_computation_layout={(f32[4,8]{0,1})->f32[4,8]{1,0}}\n"
      "ENTRY main {\n"
      "  p = f32[4,8]{0,1} parameter(0)\n"
      "  ROOT c = f32[4,8]{1,0} copy(p)\n"
      "}\n",
      "layout_normalization");
  assert_int_equal(pt_count(m, KILN_OP_COPY), 0);
  pt_expect_text(m, "bitcast = f32[8,4]{1,0} bitcast(p)", true);
  pt_expect_text(m, "ROOT transpose = f32[4,8]{1,0} transpose(bitcast), dimensions={1,0}", true);
  kiln_hlo_module_destroy(m);
}

static void test_conflict_copy_from_assignment_is_normalized_to_transpose(void **state) {
  kiln_hlo_module_t *m = normalize(
      "HloModule m, entry_computation_layout={(f32[4,8]{0,1}, f32[4,8]{1,0})->f32[4,8]{0,1}}\n"
      "ENTRY main {\n"
      "  a = f32[4,8]{0,1} parameter(0)\n"
      "  b = f32[4,8]{1,0} parameter(1)\n"
      "  ROOT s = f32[4,8] add(a, b)\n"
      "}\n",
      "layout_assignment,layout_normalization");
  assert_int_equal(pt_count(m, KILN_OP_COPY), 0);
  assert_int_equal(pt_count(m, KILN_OP_TRANSPOSE), 1);
  kiln_hlo_module_destroy(m);
}

/* A bitcast of a layout-changing copy of a computed value (fuzz-8000159): the copy becomes a
 * transpose of the normalized operand and the bitcast reads that transpose; it had kept the
 * copy, whose operand then became the normalized [31,1,1,1] under a [1,1,1,31] result. */
static void test_bitcast_of_a_layout_changing_copy_reads_the_transpose(void **state) {
  kiln_hlo_module_t *m = normalize(
      "HloModule m, entry_computation_layout={(f32[1,1,1,31]{2,1,0,3})->f32[1,31,1,1]{3,2,1,0}}\n"
      "ENTRY main {\n"
      "  p = f32[1,1,1,31]{2,1,0,3} parameter(0)\n"
      "  n = f32[1,1,1,31]{2,1,0,3} negate(p)\n"
      "  c = f32[1,1,1,31]{1,2,3,0} copy(n)\n"
      "  ROOT b = f32[1,31,1,1]{3,2,1,0} bitcast(c)\n"
      "}\n",
      "layout_normalization");
  assert_int_equal(pt_count(m, KILN_OP_COPY), 0);
  pt_expect_text(m, "n = f32[31,1,1,1]{3,2,1,0} negate(bitcast)", true);
  pt_expect_text(m, "ROOT transpose = f32[1,31,1,1]{3,2,1,0} transpose(n), dimensions={1,0,3,2}",
                 true);
  kiln_hlo_module_destroy(m);
}

static void test_reshape_that_is_a_bitcast_stays_one(void **state) {
  kiln_hlo_module_t *m = normalize(
      "HloModule m, entry_computation_layout={(f32[4,6]{0,1})->f32[4,2,3]{0,2,1}}\n"
      "ENTRY main {\n"
      "  p = f32[4,6]{0,1} parameter(0)\n"
      "  ROOT r = f32[4,2,3]{0,2,1} reshape(p)\n"
      "}\n",
      "layout_normalization");
  assert_int_equal(pt_count(m, KILN_OP_TRANSPOSE), 0);
  assert_int_equal(pt_count(m, KILN_OP_RESHAPE), 0);
  kiln_hlo_module_destroy(m);
}

static void test_reshape_that_moves_data_decomposes_into_transpose_bitcast_transpose(void **state) {
  kiln_hlo_module_t *m = normalize(
      "HloModule m, entry_computation_layout={(f32[4,6]{0,1})->f32[2,12]{0,1}}\n"
      "ENTRY main {\n"
      "  p = f32[4,6]{0,1} parameter(0)\n"
      "  ROOT r = f32[2,12]{0,1} reshape(p)\n"
      "}\n",
      "layout_normalization");
  assert_int_equal(pt_count(m, KILN_OP_RESHAPE), 0);
  /* to logical order, reshape as a bitcast, to the result's physical order */
  assert_int_equal(pt_count(m, KILN_OP_TRANSPOSE), 2);
  pt_expect_text(m, "f32[2,12]{1,0} bitcast(transpose", true);
  kiln_hlo_module_destroy(m);
}

static void test_reduce_broadcast_slice_concatenate_are_remapped(void **state) {
  kiln_hlo_module_t *m = normalize(
      "HloModule m, entry_computation_layout={(f32[4,8,3]{0,2,1})->f32[4,10,3]{0,2,1}}\n"
      "add { x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y) }\n"
      "ENTRY main {\n"
      "  p = f32[4,8,3]{0,2,1} parameter(0)\n"
      "  z = f32[] constant(0)\n"
      "  r = f32[4,3] reduce(p, z), dimensions={1}, to_apply=add\n"
      "  b = f32[4,8,3] broadcast(r), dimensions={0,2}\n"
      "  s = f32[4,8,3] subtract(p, b)\n"
      "  sl = f32[4,2,3] slice(s), slice={[0:4], [1:3], [0:3]}\n"
      "  i = f32[4,8,3] iota(), iota_dimension=1\n"
      "  m = f32[4,8,3] multiply(s, i)\n"
      "  ROOT c = f32[4,10,3] concatenate(m, sl), dimensions={1}\n"
      "}\n",
      "layout_assignment,layout_normalization");
  assert_int_equal(pt_count(m, KILN_OP_COPY), 0);
  assert_int_equal(pt_count(m, KILN_OP_TRANSPOSE), 0);
  pt_expect_text(m, "concatenate(", true);
  pt_expect_text(m, "dimensions={0}", true); /* the concatenated dim is now major-most */
  kiln_hlo_module_destroy(m);
}

static void test_multi_dim_reduce_keeps_the_fold_order(void **state) {
  /* Reduced dims 0 and 2 sit in the order 0,2 physically reversed; the reduction must still
   * fold dim 0 before dim 2 so float sums are bitwise the same. */
  kiln_hlo_module_t *m = normalize(
      "HloModule m, entry_computation_layout={(f32[5,3,7]{0,1,2})->f32[3]{0}}\n"
      "add { x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y) }\n"
      "ENTRY main {\n"
      "  p = f32[5,3,7]{0,1,2} parameter(0)\n"
      "  z = f32[] constant(0)\n"
      "  ROOT r = f32[3] reduce(p, z), dimensions={0,2}, to_apply=add\n"
      "}\n",
      "layout_normalization");
  kiln_hlo_module_destroy(m);
}

static void test_constant_literal_is_permuted(void **state) {
  kiln_hlo_module_t *m = normalize(
      "HloModule m, entry_computation_layout={(f32[2,3]{0,1})->f32[2,3]{0,1}}\n"
      "ENTRY main {\n"
      "  p = f32[2,3]{0,1} parameter(0)\n"
      "  k = f32[2,3]{0,1} constant({ {1, 2, 3}, {4, 5, 6} })\n"
      "  ROOT s = f32[2,3]{0,1} add(p, k)\n"
      "}\n",
      "layout_normalization");
  pt_expect_text(m, "f32[3,2]{1,0} constant({ {1, 4}, {2, 5}, {3, 6} })", true);
  kiln_hlo_module_destroy(m);
}

static void test_while_loop_state_is_normalized_inside_the_body(void **state) {
  kiln_hlo_module_t *m = normalize(
      "HloModule m, entry_computation_layout={(f32[2,3]{0,1})->(s32[], f32[2,3]{0,1})}\n"
      "body {\n"
      "  s = (s32[], f32[2,3]{0,1}) parameter(0)\n"
      "  i = s32[] get-tuple-element(s), index=0\n"
      "  x = f32[2,3]{0,1} get-tuple-element(s), index=1\n"
      "  one = s32[] constant(1)\n"
      "  j = s32[] add(i, one)\n"
      "  y = f32[2,3]{0,1} exponential(x)\n"
      "  ROOT t = (s32[], f32[2,3]{0,1}) tuple(j, y)\n"
      "}\n"
      "cond {\n"
      "  s = (s32[], f32[2,3]{0,1}) parameter(0)\n"
      "  i = s32[] get-tuple-element(s), index=0\n"
      "  n = s32[] constant(3)\n"
      "  ROOT lt = pred[] compare(i, n), direction=LT\n"
      "}\n"
      "ENTRY main {\n"
      "  p = f32[2,3]{0,1} parameter(0)\n"
      "  z = s32[] constant(0)\n"
      "  init = (s32[], f32[2,3]{0,1}) tuple(z, p)\n"
      "  ROOT w = (s32[], f32[2,3]{0,1}) while(init), condition=cond, body=body\n"
      "}\n",
      "layout_assignment,layout_normalization");
  char *body = pt_comp_text(m, "body");
  assert_non_null(strstr(body, "s = (s32[], f32[3,2]{1,0}) parameter(0)"));
  assert_null(strstr(body, "bitcast"));
  kiln_free(body);
  kiln_hlo_module_destroy(m);
}

static void test_op_without_a_rule_keeps_its_layout_and_is_counted(void **state) {
  kiln_hlo_module_t *m = pt_parse(
      "HloModule m, entry_computation_layout={(f32[4,4]{0,1})->f32[4,4]{0,1}}\n"
      "ENTRY main {\n"
      "  p = f32[4,4]{0,1} parameter(0)\n"
      "  ROOT c = f32[4,4]{0,1} cholesky(p), lower=true\n"
      "}\n");
  kiln_layout_normalization_stats_t st = {0};
  bool changed = false;
  assert_null(kiln_layout_normalize(m, &st, &changed));
  assert_null(kiln_hlo_module_verify(m));
  assert_int_equal(st.unsupported, 1);
  assert_int_equal(m->entry->root->opcode, KILN_OP_CHOLESKY);
  kiln_hlo_module_destroy(m);
}

static void test_normalized_module_is_a_fixed_point(void **state) {
  kiln_hlo_module_t *m = normalize(
      "HloModule m, entry_computation_layout={(f32[10,20,30]{2,0,1})->f32[20,10,30]{2,1,0}}\n"
      "ENTRY main {\n"
      "  p = f32[10,20,30]{2,0,1} parameter(0)\n"
      "  n = f32[10,20,30]{2,0,1} negate(p)\n"
      "  ROOT t = f32[20,10,30]{2,1,0} transpose(n), dimensions={1,0,2}\n"
      "}\n",
      "layout_assignment,layout_normalization");
  assert_int_equal(pt_count(m, KILN_OP_TRANSPOSE), 0); /* it was a bitcast */
  kiln_layout_normalization_stats_t st = {0};
  bool changed = true;
  assert_null(kiln_layout_normalize(m, &st, &changed));
  assert_false(changed);
  assert_int_equal(st.rewritten, 0);
  kiln_hlo_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_issue_example_permutes_logical_dims_into_physical_order),
      cmocka_unit_test(test_layout_changing_copy_becomes_bitcast_and_transpose),
      cmocka_unit_test(test_conflict_copy_from_assignment_is_normalized_to_transpose),
      cmocka_unit_test(test_bitcast_of_a_layout_changing_copy_reads_the_transpose),
      cmocka_unit_test(test_reshape_that_is_a_bitcast_stays_one),
      cmocka_unit_test(test_reshape_that_moves_data_decomposes_into_transpose_bitcast_transpose),
      cmocka_unit_test(test_reduce_broadcast_slice_concatenate_are_remapped),
      cmocka_unit_test(test_multi_dim_reduce_keeps_the_fold_order),
      cmocka_unit_test(test_constant_literal_is_permuted),
      cmocka_unit_test(test_while_loop_state_is_normalized_inside_the_body),
      cmocka_unit_test(test_op_without_a_rule_keeps_its_layout_and_is_counted),
      cmocka_unit_test(test_normalized_module_is_a_fixed_point),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
