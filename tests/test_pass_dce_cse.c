/* DCE, CSE and tuple simplification on small hand-written modules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tests/pass_test_util.h"

static bool has_instr(const kiln_hlo_module_t *m, const char *comp, const char *name) {
  const kiln_hlo_computation_t *c = comp ? kiln_hlo_module_find_computation(m, comp) : m->entry;
  return c && kiln_hlo_computation_find(c, name) != NULL;
}

static void test_dce_removes_unused_pure_chains(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = f32[4] parameter(0)\n"
      "  q = f32[4] parameter(1)\n"
      "  dead1 = f32[4] exponential(p)\n"
      "  dead2 = f32[4] add(dead1, q)\n"
      "  ROOT r = f32[4] negate(p)\n"
      "}\n",
      "dce");
  assert_false(has_instr(m, NULL, "dead1"));
  assert_false(has_instr(m, NULL, "dead2"));
  /* Unused parameters stay: they are the signature. */
  assert_true(has_instr(m, NULL, "q"));
  assert_int_equal(m->entry->instructions.len, 3);
  kiln_hlo_module_destroy(m);
}

static void test_dce_keeps_side_effects(void **state) {
  kiln_hlo_module_t *m = pt_parse(
      "HloModule t\n"
      "add {\n"
      "  x = f32[] parameter(0)\n"
      "  y = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(x, y)\n"
      "}\n"
      "body {\n"
      "  bp = f32[4] parameter(0)\n"
      "  ROOT cc = f32[4] custom-call(bp), custom_call_target=\"log\", "
      "custom_call_has_side_effect=true\n"
      "}\n"
      "cond {\n"
      "  cp = f32[4] parameter(0)\n"
      "  ROOT f = pred[] constant(false)\n"
      "}\n"
      "ENTRY e {\n"
      "  p = f32[4] parameter(0)\n"
      "  effect = f32[4] custom-call(p), custom_call_target=\"print\", "
      "custom_call_has_side_effect=true\n"
      "  pure_cc = f32[4] custom-call(p), custom_call_target=\"pure\"\n"
      "  tok = token[] after-all()\n"
      "  of = token[] outfeed(p, tok)\n"
      "  ar = f32[4] all-reduce(p), replica_groups={}, to_apply=add\n"
      "  arc = f32[4] all-reduce(p), channel_id=1, replica_groups={}, to_apply=add\n"
      "  arl = f32[4] all-reduce(p), replica_groups={}, constrain_layout=true, to_apply=add\n"
      "  ars = f32[4] all-reduce-start(p), replica_groups={}, to_apply=add\n"
      "  ard = f32[4] all-reduce-done(ars)\n"
      "  lo = f32[] constant(0)\n"
      "  hi = f32[] constant(1)\n"
      "  rn = f32[4] rng(lo, hi), distribution=rng_uniform\n"
      "  w = f32[4] while(p), condition=cond, body=body\n"
      "  unused_add = f32[4] add(p, p)\n"
      "  ROOT r = f32[4] negate(p)\n"
      "}\n");
  pt_run(m, "dce");
  assert_true(has_instr(m, NULL, "effect"));
  assert_true(has_instr(m, NULL, "of"));
  assert_true(has_instr(m, NULL, "tok")); /* the outfeed uses it */
  /* A dead all-reduce goes (as in XLA) unless a channel_id may pair it with another
   * program's or its layout is constrained; async pairs stay. */
  assert_false(has_instr(m, NULL, "ar"));
  assert_true(has_instr(m, NULL, "arc"));
  assert_true(has_instr(m, NULL, "arl"));
  assert_true(has_instr(m, NULL, "ard"));
  assert_true(has_instr(m, NULL, "rn"));
  assert_true(has_instr(m, NULL, "w")); /* its body has a side effect */
  assert_false(has_instr(m, NULL, "pure_cc"));
  assert_false(has_instr(m, NULL, "unused_add"));
  assert_non_null(kiln_hlo_module_find_computation(m, "body"));
  kiln_hlo_module_destroy(m);
}

static void test_dce_removes_unreachable_computations(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "add {\n"
      "  x = f32[] parameter(0)\n"
      "  y = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(x, y)\n"
      "}\n"
      "orphan {\n"
      "  o = f32[] parameter(0)\n"
      "  ROOT n = f32[] negate(o)\n"
      "}\n"
      "ENTRY e {\n"
      "  p = f32[4] parameter(0)\n"
      "  z = f32[] constant(0)\n"
      "  dead_reduce = f32[] reduce(p, z), dimensions={0}, to_apply=add\n"
      "  ROOT r = f32[4] negate(p)\n"
      "}\n",
      "dce");
  assert_null(kiln_hlo_module_find_computation(m, "orphan"));
  assert_null(kiln_hlo_module_find_computation(m, "add"));
  assert_int_equal(m->computations.len, 1);
  kiln_hlo_module_destroy(m);
}

static void test_dce_moves_control_edges_of_removed_instructions(void **state) {
  kiln_hlo_module_t *m = pt_parse(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = f32[4] parameter(0)\n"
      "  a = f32[4] exponential(p)\n"
      "  dead = f32[4] negate(p), control-predecessors={a}\n"
      "  ROOT r = f32[4] sqrt(a), control-predecessors={dead}\n"
      "}\n");
  pt_run(m, "dce");
  assert_false(has_instr(m, NULL, "dead"));
  pt_expect_text(m, "ROOT r = f32[4] sqrt(a), control-predecessors={a}", true);
  kiln_hlo_module_destroy(m);
}

static void test_cse_merges_identical_instructions(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = f32[4] parameter(0)\n"
      "  q = f32[4] parameter(1)\n"
      "  a1 = f32[4] add(p, q)\n"
      "  a2 = f32[4] add(p, q), metadata={op_name=\"other\"}\n"
      "  e1 = f32[4] exponential(a1)\n"
      "  e2 = f32[4] exponential(a2)\n"
      "  ROOT m = f32[4] multiply(e1, e2)\n"
      "}\n",
      "cse");
  pt_expect_text(m, "ROOT m = f32[4] multiply(e1, e1)", true);
  assert_int_equal(pt_count(m, KILN_OP_ADD), 1);
  assert_int_equal(pt_count(m, KILN_OP_EXP), 1);
  kiln_hlo_module_destroy(m);
}

static void test_cse_merges_commutative_operands_in_either_order(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = s32[4] parameter(0)\n"
      "  q = s32[4] parameter(1)\n"
      "  a1 = s32[4] add(p, q)\n"
      "  a2 = s32[4] add(q, p)\n"
      "  m1 = s32[4] maximum(a1, p)\n"
      "  m2 = s32[4] maximum(p, a2)\n"
      "  s1 = s32[4] subtract(p, q)\n"
      "  s2 = s32[4] subtract(q, p)\n"
      "  ROOT t = (s32[4], s32[4], s32[4], s32[4]) tuple(m1, m2, s1, s2)\n"
      "}\n",
      "cse");
  assert_int_equal(pt_count(m, KILN_OP_ADD), 1);
  assert_int_equal(pt_count(m, KILN_OP_MAXIMUM), 1);
  assert_int_equal(pt_count(m, KILN_OP_SUBTRACT), 2); /* not commutative */
  pt_expect_text(m, "tuple(m1, m1, s1, s2)", true);
  kiln_hlo_module_destroy(m);
}

static void test_cse_never_merges_rng_side_effects_or_parameters(void **state) {
  kiln_hlo_module_t *m = pt_parse(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = f32[4] parameter(0)\n"
      "  q = f32[4] parameter(1)\n"
      "  lo = f32[] constant(0)\n"
      "  hi = f32[] constant(1)\n"
      "  r1 = f32[4] rng(lo, hi), distribution=rng_uniform\n"
      "  r2 = f32[4] rng(lo, hi), distribution=rng_uniform\n"
      "  c1 = f32[4] custom-call(p), custom_call_target=\"f\", custom_call_has_side_effect=true\n"
      "  c2 = f32[4] custom-call(p), custom_call_target=\"f\", custom_call_has_side_effect=true\n"
      "  ROOT t = (f32[4], f32[4], f32[4], f32[4], f32[4], f32[4]) tuple(p, q, r1, r2, c1, c2)\n"
      "}\n");
  pt_run(m, "cse");
  pt_expect_text(m, "tuple(p, q, r1, r2, c1, c2)", true);
  kiln_hlo_module_destroy(m);
}

static void test_cse_merges_equal_constants_only(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  k1 = f32[2] constant({1, 2})\n"
      "  k2 = f32[2] constant({1, 2})\n"
      "  k3 = f32[2] constant({1, 3})\n"
      "  z1 = f32[] constant(0)\n"
      "  z2 = f32[] constant(-0)\n"
      "  ROOT t = (f32[2], f32[2], f32[2], f32[], f32[]) tuple(k1, k2, k3, z1, z2)\n"
      "}\n",
      "cse");
  pt_expect_text(m, "tuple(k1, k1, k3, z1, z2)", true);
  kiln_hlo_module_destroy(m);
}

static void test_cse_distinguishes_attributes_and_called_computations(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "add {\n"
      "  x = f32[] parameter(0)\n"
      "  y = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(x, y)\n"
      "}\n"
      "mx {\n"
      "  x = f32[] parameter(0)\n"
      "  y = f32[] parameter(1)\n"
      "  ROOT s = f32[] maximum(x, y)\n"
      "}\n"
      "ENTRY e {\n"
      "  p = f32[4,4] parameter(0)\n"
      "  z = f32[] constant(0)\n"
      "  r0 = f32[4] reduce(p, z), dimensions={0}, to_apply=add\n"
      "  r1 = f32[4] reduce(p, z), dimensions={1}, to_apply=add\n"
      "  r2 = f32[4] reduce(p, z), dimensions={1}, to_apply=mx\n"
      "  r3 = f32[4] reduce(p, z), dimensions={1}, to_apply=mx\n"
      "  ROOT t = (f32[4], f32[4], f32[4], f32[4]) tuple(r0, r1, r2, r3)\n"
      "}\n",
      "cse");
  pt_expect_text(m, "tuple(r0, r1, r2, r2)", true);
  kiln_hlo_module_destroy(m);
}

static void test_tuple_simplify_forwards_elements_and_whole_tuples(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = (f32[2], s32[3]) parameter(0)\n"
      "  q = f32[2] parameter(1)\n"
      "  g0 = f32[2] get-tuple-element(p), index=0\n"
      "  g1 = s32[3] get-tuple-element(p), index=1\n"
      "  same = (f32[2], s32[3]) tuple(g0, g1)\n"
      "  swapped = (s32[3], f32[2]) tuple(g1, g0)\n"
      "  t = (f32[2], f32[2]) tuple(q, g0)\n"
      "  x = f32[2] get-tuple-element(t), index=0\n"
      "  ROOT r = ((f32[2], s32[3]), (s32[3], f32[2]), f32[2]) tuple(same, swapped, x)\n"
      "}\n",
      "tuple_simplify,dce");
  pt_expect_text(m, "tuple(p, swapped, q)", true);
  assert_false(has_instr(m, NULL, "t"));
  kiln_hlo_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dce_removes_unused_pure_chains),
      cmocka_unit_test(test_dce_keeps_side_effects),
      cmocka_unit_test(test_dce_removes_unreachable_computations),
      cmocka_unit_test(test_dce_moves_control_edges_of_removed_instructions),
      cmocka_unit_test(test_cse_merges_identical_instructions),
      cmocka_unit_test(test_cse_merges_commutative_operands_in_either_order),
      cmocka_unit_test(test_cse_never_merges_rng_side_effects_or_parameters),
      cmocka_unit_test(test_cse_merges_equal_constants_only),
      cmocka_unit_test(test_cse_distinguishes_attributes_and_called_computations),
      cmocka_unit_test(test_tuple_simplify_forwards_elements_and_whole_tuples),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
