/* Layout assignment on small hand-written modules: entry layouts kept, propagation through
 * elementwise ops / transposes / reductions / broadcasts, copies on conflicts, default
 * layouts around dot, while loops sharing one layout, bitcasts keeping theirs, tiles kept
 * on parameters. Every case also checks bitwise identical results on the evaluator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "compiler/passes/layout.h"
#include "tests/pass_test_util.h"

static kiln_hlo_instruction_t *find(const kiln_hlo_module_t *m, const char *comp, const char *name) {
  const kiln_hlo_computation_t *c = comp ? kiln_hlo_module_find_computation(m, comp) : m->entry;
  kiln_hlo_instruction_t *x = c ? kiln_hlo_computation_find(c, name) : NULL;
  if (!x) fail_msg("no instruction '%s'", name);
  return x;
}

static void expect_layout(const kiln_hlo_instruction_t *x, const char *want) {
  char *s = kiln_shape_to_string(x->shape, true);
  if (strcmp(s, want) != 0) {
    print_error("%s has %s\n", x->name, s);
    kiln_free(s);
    fail_msg("expected %s", want);
  }
  kiln_free(s);
}

static void test_entry_layout_is_kept_and_propagates_through_elementwise_ops(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule m, entry_computation_layout={(f32[4,8]{0,1})->f32[4,8]{0,1}}\n"
      "ENTRY main {\n"
      "  p = f32[4,8]{0,1} parameter(0)\n"
      "  n = f32[4,8] negate(p)\n"
      "  ROOT e = f32[4,8] exponential(n)\n"
      "}\n",
      "layout_assignment");
  expect_layout(find(m, NULL, "p"), "f32[4,8]{0,1}");
  expect_layout(find(m, NULL, "n"), "f32[4,8]{0,1}");
  expect_layout(m->entry->root, "f32[4,8]{0,1}");
  assert_int_equal(pt_count(m, KILN_OP_COPY), 0);
  kiln_hlo_module_destroy(m);
}

static void test_entry_result_layout_that_differs_gets_a_copy(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule m, entry_computation_layout={(f32[4,8]{0,1})->f32[4,8]{1,0}}\n"
      "ENTRY main {\n"
      "  p = f32[4,8]{0,1} parameter(0)\n"
      "  ROOT n = f32[4,8] negate(p)\n"
      "}\n",
      "layout_assignment");
  expect_layout(find(m, NULL, "n"), "f32[4,8]{0,1}");
  assert_int_equal(m->entry->root->opcode, KILN_OP_COPY);
  expect_layout(m->entry->root, "f32[4,8]{1,0}");
  kiln_hlo_module_destroy(m);
}

static void test_conflicting_operand_layouts_get_one_copy(void **state) {
  kiln_hlo_module_t *m = pt_parse(
      "HloModule m, entry_computation_layout={(f32[4,8]{0,1}, f32[4,8]{0,1}, f32[4,8]{1,0})->f32[4,8]{0,1}}\n"
      "ENTRY main {\n"
      "  a = f32[4,8]{0,1} parameter(0)\n"
      "  b = f32[4,8]{0,1} parameter(1)\n"
      "  c = f32[4,8]{1,0} parameter(2)\n"
      "  s = f32[4,8] add(a, b)\n"
      "  ROOT t = f32[4,8] multiply(s, c)\n"
      "}\n");
  kiln_layout_assignment_stats_t st = {0};
  bool changed = false;
  assert_null(kiln_layout_assign(m, &st, &changed));
  assert_null(kiln_hlo_module_verify(m));
  assert_true(changed);
  /* the majority layout {0,1} wins; only `c` is copied */
  assert_int_equal(st.copies_inserted, 1);
  kiln_hlo_instruction_t *t = m->entry->root;
  expect_layout(t, "f32[4,8]{0,1}");
  assert_int_equal(t->operands[1]->opcode, KILN_OP_COPY);
  assert_ptr_equal(t->operands[1]->operands[0], find(m, NULL, "c"));
  expect_layout(t->operands[1], "f32[4,8]{0,1}");
  kiln_hlo_module_destroy(m);
}

static void test_transpose_gets_the_layout_that_makes_it_a_bitcast(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule m, entry_computation_layout={(f32[4,8,2]{2,1,0})->f32[8,2,4]{1,0,2}}\n"
      "ENTRY main {\n"
      "  p = f32[4,8,2]{2,1,0} parameter(0)\n"
      "  ROOT t = f32[8,2,4] transpose(p), dimensions={1,2,0}\n"
      "}\n",
      "layout_assignment");
  expect_layout(m->entry->root, "f32[8,2,4]{1,0,2}");
  assert_int_equal(pt_count(m, KILN_OP_COPY), 0);
  kiln_hlo_module_destroy(m);
}

static void test_reduce_keeps_operand_order_and_reshape_becomes_bitcastable(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule m, entry_computation_layout={(f32[4,6,5]{0,2,1})->f32[4,3,2]{0,2,1}}\n"
      "add { x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y) }\n"
      "ENTRY main {\n"
      "  p = f32[4,6,5]{0,2,1} parameter(0)\n"
      "  z = f32[] constant(0)\n"
      "  r = f32[4,6] reduce(p, z), dimensions={2}, to_apply=add\n"
      "  ROOT s = f32[4,3,2] reshape(r)\n"
      "}\n",
      "layout_assignment");
  /* kept dims 0,1 in the operand's physical order (1 major, 0 minor) */
  expect_layout(find(m, NULL, "r"), "f32[4,6]{0,1}");
  /* [4,6]{0,1} -> [4,3,2]: the group (3,2) stays major, 4 minor */
  expect_layout(find(m, NULL, "s"), "f32[4,3,2]{0,2,1}");
  assert_int_equal(pt_count(m, KILN_OP_COPY), 0);
  kiln_hlo_module_destroy(m);
}

static void test_broadcast_and_constant_take_their_users_layout(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule m, entry_computation_layout={(f32[2,3]{0,1}, f32[3])->f32[2,3]{0,1}}\n"
      "ENTRY main {\n"
      "  p = f32[2,3]{0,1} parameter(0)\n"
      "  v = f32[3] parameter(1)\n"
      "  b = f32[2,3] broadcast(v), dimensions={1}\n"
      "  k = f32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })\n"
      "  s = f32[2,3] add(p, b)\n"
      "  ROOT t = f32[2,3] multiply(s, k)\n"
      "}\n",
      "layout_assignment");
  expect_layout(find(m, NULL, "b"), "f32[2,3]{0,1}");
  expect_layout(find(m, NULL, "k"), "f32[2,3]{0,1}");
  assert_int_equal(pt_count(m, KILN_OP_COPY), 0);
  kiln_hlo_module_destroy(m);
}

static void test_dot_operands_and_result_get_default_layouts(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule m, entry_computation_layout={(f32[4,8]{0,1}, f32[8,2]{1,0})->f32[4,2]{1,0}}\n"
      "ENTRY main {\n"
      "  a = f32[4,8]{0,1} parameter(0)\n"
      "  b = f32[8,2]{1,0} parameter(1)\n"
      "  ROOT d = f32[4,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "}\n",
      "layout_assignment");
  kiln_hlo_instruction_t *d = m->entry->root;
  assert_int_equal(d->opcode, KILN_OP_DOT);
  expect_layout(d, "f32[4,2]{1,0}");
  assert_int_equal(d->operands[0]->opcode, KILN_OP_COPY);
  expect_layout(d->operands[0], "f32[4,8]{1,0}");
  assert_int_equal(pt_count(m, KILN_OP_COPY), 1);
  kiln_hlo_module_destroy(m);
}

static void test_while_body_condition_and_loop_share_one_layout(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule m, entry_computation_layout={(f32[2,3]{0,1})->(s32[], f32[2,3]{0,1})}\n"
      "body {\n"
      "  s = (s32[], f32[2,3]) parameter(0)\n"
      "  i = s32[] get-tuple-element(s), index=0\n"
      "  x = f32[2,3] get-tuple-element(s), index=1\n"
      "  one = s32[] constant(1)\n"
      "  j = s32[] add(i, one)\n"
      "  k = f32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })\n"
      "  y = f32[2,3] add(x, k)\n"
      "  ROOT t = (s32[], f32[2,3]) tuple(j, y)\n"
      "}\n"
      "cond {\n"
      "  s = (s32[], f32[2,3]) parameter(0)\n"
      "  i = s32[] get-tuple-element(s), index=0\n"
      "  n = s32[] constant(3)\n"
      "  ROOT lt = pred[] compare(i, n), direction=LT\n"
      "}\n"
      "ENTRY main {\n"
      "  p = f32[2,3]{0,1} parameter(0)\n"
      "  z = s32[] constant(0)\n"
      "  init = (s32[], f32[2,3]) tuple(z, p)\n"
      "  ROOT w = (s32[], f32[2,3]) while(init), condition=cond, body=body\n"
      "}\n",
      "layout_assignment");
  expect_layout(find(m, "body", "s"), "(s32[], f32[2,3]{0,1})");
  expect_layout(find(m, "cond", "s"), "(s32[], f32[2,3]{0,1})");
  expect_layout(kiln_hlo_module_find_computation(m, "body")->root, "(s32[], f32[2,3]{0,1})");
  expect_layout(find(m, NULL, "w"), "(s32[], f32[2,3]{0,1})");
  expect_layout(find(m, "body", "k"), "f32[2,3]{0,1}");
  assert_int_equal(pt_count(m, KILN_OP_COPY), 0);
  kiln_hlo_module_destroy(m);
}

static void test_bitcast_keeps_its_operand_and_result_layouts(void **state) {
  /* The bitcast's meaning depends on both layouts: the parameter {0,1} must reach it as
   * {0,1} even though the elementwise user of the parameter wants another layout. */
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule m, entry_computation_layout={(f32[4,6]{0,1})->f32[24]{0}}\n"
      "ENTRY main {\n"
      "  p = f32[4,6]{0,1} parameter(0)\n"
      "  ROOT b = f32[24]{0} bitcast(p)\n"
      "}\n",
      "layout_assignment");
  kiln_hlo_instruction_t *b = m->entry->root;
  assert_int_equal(b->opcode, KILN_OP_BITCAST);
  expect_layout(b->operands[0], "f32[4,6]{0,1}");
  assert_int_equal(pt_count(m, KILN_OP_COPY), 0);
  kiln_hlo_module_destroy(m);
}

/* TPU's tiled layouts, in the entry layout and written on instructions, are dropped: kiln
 * keeps every array untiled in its minor-to-major order (and reports that entry layout). */
static void test_tiled_layouts_are_dropped_keeping_minor_to_major(void **state) {
  kiln_hlo_module_t *m = pt_parse(
      "HloModule m, entry_computation_layout={(f32[8,128]{1,0:T(8,128)})->f32[8,128]{0,1:T(2,1)}}\n"
      "ENTRY main {\n"
      "  p = f32[8,128] parameter(0)\n"
      "  c = f32[8,128]{0,1:T(8,128)} copy(p)\n"
      "  ROOT n = f32[8,128] negate(c)\n"
      "}\n");
  pt_run(m, "layout_assignment");
  expect_layout(find(m, NULL, "p"), "f32[8,128]{1,0}");
  expect_layout(find(m, NULL, "c"), "f32[8,128]{0,1}");
  expect_layout(m->entry->root, "f32[8,128]{0,1}");
  assert_int_equal(m->entry_layout_params[0]->layout.num_tiles, 0);
  assert_int_equal(m->entry_layout_result->layout.num_tiles, 0);
  kiln_hlo_module_destroy(m);
}

static void test_fusion_parameters_follow_the_operands(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule m, entry_computation_layout={(f32[4,8]{0,1})->f32[4,8]{0,1}}\n"
      "fused {\n"
      "  x = f32[4,8] parameter(0)\n"
      "  ROOT y = f32[4,8] negate(x)\n"
      "}\n"
      "ENTRY main {\n"
      "  p = f32[4,8]{0,1} parameter(0)\n"
      "  ROOT f = f32[4,8] fusion(p), kind=kLoop, calls=fused\n"
      "}\n",
      "layout_assignment");
  expect_layout(find(m, "fused", "x"), "f32[4,8]{0,1}");
  expect_layout(find(m, "fused", "y"), "f32[4,8]{0,1}");
  expect_layout(m->entry->root, "f32[4,8]{0,1}");
  assert_int_equal(pt_count(m, KILN_OP_COPY), 0);
  kiln_hlo_module_destroy(m);
}

/* The corpus's gpu/tests/vectorization.hlo: a fused transpose over default operands keeps
 * the default result (one kernel that moves the bytes), where unfused it would take the
 * layout that makes it a bitcast and need a copy after; a written result layout is kept
 * whatever the operand's. */
static void test_fused_transpose_keeps_the_fusions_own_layout(void **state) {
  static const char *kTexts[2] = {
      "HloModule m\n"
      "tr {\n"
      "  a = s8[8,6,16] parameter(0)\n"
      "  ROOT b = s8[6,8,16] transpose(a), dimensions={1,0,2}\n"
      "}\n"
      "ENTRY e {\n"
      "  p = s8[8,6,16] parameter(0)\n"
      "  ROOT t = s8[6,8,16] fusion(p), kind=kInput, calls=tr\n"
      "}\n",
      "HloModule m\n"
      "tr {\n"
      "  a = s8[8,6,16]{2,1,0} parameter(0)\n"
      "  ROOT b = s8[6,8,16]{2,1,0} transpose(a), dimensions={1,0,2}\n"
      "}\n"
      "ENTRY e {\n"
      "  p = s8[8,6,16]{1,2,0} parameter(0)\n"
      "  ROOT t = s8[6,8,16]{2,1,0} fusion(p), kind=kInput, calls=tr\n"
      "}\n"};
  for (int k = 0; k < 2; k++) {
    kiln_hlo_module_t *m = pt_run_same_results(kTexts[k], "layout_assignment");
    expect_layout(m->entry->root, "s8[6,8,16]{2,1,0}");
    assert_int_equal(m->entry->root->opcode, KILN_OP_FUSION);
    kiln_hlo_computation_t *tr = kiln_hlo_instruction_called(m->entry->root, "calls");
    expect_layout(tr->root, "s8[6,8,16]{2,1,0}");
    /* the transposition is a copy inside the fusion, none outside */
    assert_int_equal(m->entry->root->operands[0]->opcode, KILN_OP_PARAMETER);
    assert_int_equal(tr->root->opcode, KILN_OP_COPY);
    kiln_hlo_module_destroy(m);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_entry_layout_is_kept_and_propagates_through_elementwise_ops),
      cmocka_unit_test(test_entry_result_layout_that_differs_gets_a_copy),
      cmocka_unit_test(test_conflicting_operand_layouts_get_one_copy),
      cmocka_unit_test(test_transpose_gets_the_layout_that_makes_it_a_bitcast),
      cmocka_unit_test(test_reduce_keeps_operand_order_and_reshape_becomes_bitcastable),
      cmocka_unit_test(test_broadcast_and_constant_take_their_users_layout),
      cmocka_unit_test(test_dot_operands_and_result_get_default_layouts),
      cmocka_unit_test(test_while_body_condition_and_loop_share_one_layout),
      cmocka_unit_test(test_bitcast_keeps_its_operand_and_result_layouts),
      cmocka_unit_test(test_tiled_layouts_are_dropped_keeping_minor_to_major),
      cmocka_unit_test(test_fusion_parameters_follow_the_operands),
      cmocka_unit_test(test_fused_transpose_keeps_the_fusions_own_layout),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
