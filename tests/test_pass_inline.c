/* Call inlining, fusion inlining, while-loop constant sinking, and the pipeline driver (stage
 * lookup by name, missing stages reported) on small hand-written modules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "compiler/passes/pipeline.h"
#include "tests/pass_test_util.h"

static void test_call_inlining_handles_multiple_call_sites(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "square_plus {\n"
      "  x = f32[4] parameter(0)\n"
      "  y = f32[4] parameter(1)\n"
      "  sq = f32[4] multiply(x, x)\n"
      "  ROOT s = f32[4] add(sq, y)\n"
      "}\n"
      "ENTRY e {\n"
      "  p = f32[4] parameter(0)\n"
      "  q = f32[4] parameter(1)\n"
      "  c1 = f32[4] call(p, q), to_apply=square_plus\n"
      "  c2 = f32[4] call(q, c1), to_apply=square_plus\n"
      "  ROOT r = f32[4] subtract(c1, c2)\n"
      "}\n",
      "call_inline");
  assert_int_equal(pt_count(m, KILN_OP_CALL), 0);
  assert_int_equal(pt_count(m, KILN_OP_MULTIPLY), 2);
  assert_int_equal(pt_count(m, KILN_OP_ADD), 2);
  assert_null(kiln_hlo_module_find_computation(m, "square_plus"));
  assert_int_equal(m->computations.len, 1);
  kiln_hlo_module_destroy(m);
}

static void test_call_inlining_handles_nested_calls_and_parameter_roots(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "first {\n"
      "  b = s32[3] parameter(1)\n"
      "  ROOT a = s32[3] parameter(0)\n"
      "}\n"
      "inner {\n"
      "  x = s32[3] parameter(0)\n"
      "  ROOT n = s32[3] negate(x)\n"
      "}\n"
      "outer {\n"
      "  y = s32[3] parameter(0)\n"
      "  i = s32[3] call(y), to_apply=inner\n"
      "  ROOT m = s32[3] multiply(i, y)\n"
      "}\n"
      "ENTRY e {\n"
      "  p = s32[3] parameter(0)\n"
      "  q = s32[3] parameter(1)\n"
      "  f = s32[3] call(q, p), to_apply=first\n"
      "  ROOT o = s32[3] call(f), to_apply=outer\n"
      "}\n",
      "call_inline");
  assert_int_equal(pt_count(m, KILN_OP_CALL), 0);
  assert_int_equal(m->computations.len, 1);
  /* first returns its parameter 0, i.e. q. */
  pt_expect_text(m, "negate(q)", true);
  kiln_hlo_module_destroy(m);
}

static void test_call_inlining_keeps_callees_still_used_elsewhere(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "add {\n"
      "  x = f32[] parameter(0)\n"
      "  y = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(x, y)\n"
      "}\n"
      "ENTRY e {\n"
      "  p = f32[] parameter(0)\n"
      "  c = f32[] call(p, p), to_apply=add\n"
      "  v = f32[4] broadcast(c), dimensions={}\n"
      "  z = f32[] constant(0)\n"
      "  ROOT r = f32[] reduce(v, z), dimensions={0}, to_apply=add\n"
      "}\n",
      "call_inline");
  assert_int_equal(pt_count(m, KILN_OP_CALL), 0);
  assert_non_null(kiln_hlo_module_find_computation(m, "add"));
  kiln_hlo_module_destroy(m);
}

/* The entry holds no call of its own, but the async body it inlines brings one: the call was
 * not inlinable where it was (a control edge from its parameter), and is once copied (edges
 * from parameters are dropped), so it goes in the same run. */
static void test_call_inlining_inlines_calls_an_async_body_brings(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "neg {\n"
      "  x = f32[4] parameter(0)\n"
      "  ROOT n = f32[4] negate(x)\n"
      "}\n"
      "body {\n"
      "  a = f32[4] parameter(0)\n"
      "  ROOT c = f32[4] call(a), to_apply=neg, control-predecessors={a}\n"
      "}\n"
      "ENTRY e {\n"
      "  p = f32[4] parameter(0)\n"
      "  s = ((f32[4]), f32[4], s32[]) async-start(p), calls=body\n"
      "  ROOT d = f32[4] async-done(s)\n"
      "}\n",
      "call_inline");
  assert_int_equal(pt_count(m, KILN_OP_CALL), 0);
  assert_int_equal(pt_count(m, KILN_OP_ASYNC_START), 0);
  assert_int_equal(m->computations.len, 1);
  pt_expect_text(m, "f32[4] negate(p)", true);
  kiln_hlo_module_destroy(m);
}

/* A module without call sites is left as it was, dead computations included (they go only
 * when something was inlined). */
static void test_call_inlining_leaves_a_module_without_calls(void **state) {
  static const char kText[] =
      "HloModule t\n"
      "unused {\n"
      "  x = f32[4] parameter(0)\n"
      "  ROOT n = f32[4] negate(x)\n"
      "}\n"
      "ENTRY e {\n"
      "  p = f32[4] parameter(0)\n"
      "  ROOT r = f32[4] exponential(p)\n"
      "}\n";
  kiln_hlo_module_t *m = pt_parse(kText);
  char *before = kiln_hlo_module_to_string(m);
  bool changed = false; /* passes only ever set it */
  kiln_pass_options_t o = {0};
  assert_null(kiln_pass_call_inline(m, &o, &changed));
  assert_false(changed);
  char *after = kiln_hlo_module_to_string(m);
  assert_string_equal(before, after);
  assert_int_equal(m->computations.len, 2);
  kiln_free(before);
  kiln_free(after);
  kiln_hlo_module_destroy(m);
}

static const char *kLoop =
    "HloModule t\n"
    "body {\n"
    "  s = (s32[], f32[4], f32[4]) parameter(0)\n"
    "  i = s32[] get-tuple-element(s), index=0\n"
    "  k = f32[4] get-tuple-element(s), index=1\n"
    "  acc = f32[4] get-tuple-element(s), index=2\n"
    "  one = s32[] constant(1)\n"
    "  i2 = s32[] add(i, one)\n"
    "  acc2 = f32[4] add(acc, k)\n"
    "  ROOT t = (s32[], f32[4], f32[4]) tuple(i2, k, acc2)\n"
    "}\n"
    "cond {\n"
    "  cs = (s32[], f32[4], f32[4]) parameter(0)\n"
    "  ci = s32[] get-tuple-element(cs), index=0\n"
    "  ck = f32[4] get-tuple-element(cs), index=1\n"
    "  c0 = f32[1] slice(ck), slice={[0:1]}\n"
    "  c0s = f32[] reshape(c0)\n"
    "  lim = s32[] convert(c0s)\n"
    "  ROOT lt = pred[] compare(ci, lim), direction=LT\n"
    "}\n"
    "ENTRY e {\n"
    "  p = f32[4] parameter(0)\n"
    "  zero = s32[] constant(0)\n"
    "  kc = f32[4] constant({5, 1, 2, 3})\n"
    "  init = (s32[], f32[4], f32[4]) tuple(zero, kc, p)\n"
    "  w = (s32[], f32[4], f32[4]) while(init), condition=cond, body=body\n"
    "  ROOT r = f32[4] get-tuple-element(w), index=2\n"
    "}\n";

static void test_while_loop_constants_sink_into_body_and_condition(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(kLoop, "while_loop_constants");
  char *body = pt_comp_text(m, "body");
  char *cond = pt_comp_text(m, "cond");
  /* The body uses a copy of the constant; its root still passes element 1 through. */
  assert_non_null(strstr(body, "f32[4] constant({5, 1, 2, 3})"));
  assert_non_null(strstr(body, "tuple(i2, k, acc2)"));
  assert_null(strstr(body, "add(acc, k)"));
  /* The condition reads the constant instead of the loop state, and the counter (which
   * changes) still comes from the state. */
  assert_non_null(strstr(cond, "f32[4] constant({5, 1, 2, 3})"));
  assert_null(strstr(cond, "index=1"));
  assert_non_null(strstr(cond, "index=0"));
  kiln_free(body);
  kiln_free(cond);
  kiln_hlo_module_destroy(m);
  /* Then folding sees the trip count as a constant. */
  m = pt_run_same_results(kLoop, "while_loop_constants,(constant_folding,dce)");
  char *c2 = pt_comp_text(m, "cond");
  assert_non_null(strstr(c2, "s32[] constant(5)"));
  kiln_free(c2);
  kiln_hlo_module_destroy(m);
}

static void test_while_loop_constants_leave_changing_state(void **state) {
  /* Element 1 starts as a constant but the body changes it: nothing to sink. */
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "body {\n"
      "  s = (s32[], s32[]) parameter(0)\n"
      "  i = s32[] get-tuple-element(s), index=0\n"
      "  v = s32[] get-tuple-element(s), index=1\n"
      "  one = s32[] constant(1)\n"
      "  i2 = s32[] add(i, one)\n"
      "  v2 = s32[] multiply(v, i2)\n"
      "  ROOT t = (s32[], s32[]) tuple(i2, v2)\n"
      "}\n"
      "cond {\n"
      "  cs = (s32[], s32[]) parameter(0)\n"
      "  ci = s32[] get-tuple-element(cs), index=0\n"
      "  ten = s32[] constant(10)\n"
      "  ROOT lt = pred[] compare(ci, ten), direction=LT\n"
      "}\n"
      "ENTRY e {\n"
      "  zero = s32[] constant(0)\n"
      "  two = s32[] constant(2)\n"
      "  init = (s32[], s32[]) tuple(zero, two)\n"
      "  ROOT w = (s32[], s32[]) while(init), condition=cond, body=body\n"
      "}\n",
      "while_loop_constants");
  char *body = pt_comp_text(m, "body");
  assert_non_null(strstr(body, "multiply(v, i2)"));
  kiln_free(body);
  kiln_hlo_module_destroy(m);
}

/* A loop whose body squares and exponentiates a state element it never changes (k), halves
 * that by a broadcast it also uses on the counter, then adds both to an accumulator each
 * step; the counter and the accumulator change. */
static const char *kInvariantLoop =
    "HloModule t\n"
    "body {\n"
    "  s = (s32[], f32[4], f32[4]) parameter(0)\n"
    "  i = s32[] get-tuple-element(s), index=0\n"
    "  k = f32[4] get-tuple-element(s), index=1\n"
    "  acc = f32[4] get-tuple-element(s), index=2\n"
    "  one = s32[] constant(1)\n"
    "  i2 = s32[] add(i, one)\n"
    "  half = f32[] constant(0.5)\n"
    "  hb = f32[4] broadcast(half), dimensions={}\n"
    "  sq = f32[4] multiply(k, k)\n"
    "  e = f32[4] exponential(sq)\n"
    "  eh = f32[4] multiply(e, hb)\n"
    "  fi = f32[] convert(i)\n"
    "  fb = f32[4] broadcast(fi), dimensions={}\n"
    "  fbh = f32[4] multiply(fb, hb)\n"
    "  step = f32[4] add(eh, fbh)\n"
    "  acc2 = f32[4] add(acc, step)\n"
    "  ROOT t = (s32[], f32[4], f32[4]) tuple(i2, k, acc2)\n"
    "}\n"
    "cond {\n"
    "  cs = (s32[], f32[4], f32[4]) parameter(0)\n"
    "  ci = s32[] get-tuple-element(cs), index=0\n"
    "  lim = s32[] constant(5)\n"
    "  ROOT lt = pred[] compare(ci, lim), direction=LT\n"
    "}\n"
    "ENTRY e {\n"
    "  p0 = f32[4] parameter(0)\n"
    "  p1 = f32[4] parameter(1)\n"
    "  zero = s32[] constant(0)\n"
    "  init = (s32[], f32[4], f32[4]) tuple(zero, p0, p1)\n"
    "  w = (s32[], f32[4], f32[4]) while(init), condition=cond, body=body\n"
    "  ROOT r = f32[4] get-tuple-element(w), index=2\n"
    "}\n";

static void test_while_loop_invariant_work_moves_before_the_loop(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(kInvariantLoop, "while_loop_invariant_code_motion");
  char *body = pt_comp_text(m, "body");
  char *entry = pt_comp_text(m, "e");
  char *cond = pt_comp_text(m, "cond");
  /* k * k, exp and the scaling by the broadcast half run once, before the loop, reading p0;
   * the body reads their result from a fourth state element it passes through. */
  assert_null(strstr(body, "multiply(k, k)"));
  assert_null(strstr(body, "exponential"));
  assert_non_null(strstr(entry, "exponential("));
  assert_non_null(strstr(entry, "multiply(p0, p0)"));
  /* one new state element (the halved exp), not two: the broadcast half, cheap and read
   * by the counter's work too, stays in the body as well */
  assert_non_null(strstr(body, "(s32[], f32[4], f32[4], f32[4]) parameter(0)"));
  assert_non_null(strstr(body, "index=3"));
  assert_null(strstr(body, "index=4"));
  assert_non_null(strstr(body, "broadcast(half)"));
  assert_non_null(strstr(entry, "broadcast("));
  assert_non_null(strstr(body, "tuple(i2, k, acc2, "));
  assert_non_null(strstr(cond, "(s32[], f32[4], f32[4], f32[4]) parameter(0)"));
  /* what changes each step stays */
  assert_non_null(strstr(body, "convert(i)"));
  assert_non_null(strstr(body, "add(acc, step)"));
  kiln_free(body);
  kiln_free(entry);
  kiln_free(cond);
  kiln_hlo_module_destroy(m);
  /* The whole pipeline's simplification group reaches a fixed point with it. */
  m = pt_run_same_results(kInvariantLoop,
                          "(simplify,constant_folding,tuple_simplify,while_loop_constants,"
                          "while_loop_invariant_code_motion,dce,cse)");
  body = pt_comp_text(m, "body");
  assert_null(strstr(body, "exponential"));
  kiln_free(body);
  kiln_hlo_module_destroy(m);
}

static void test_while_loop_invariant_keeps_the_state_its_users_read(void **state) {
  /* The initial state is a tuple parameter (read through get-tuple-elements made before the
   * loop) and the while is the root: its users see a tuple of the first three elements. */
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "body {\n"
      "  s = (s32[], f32[4], f32[4]) parameter(0)\n"
      "  i = s32[] get-tuple-element(s), index=0\n"
      "  k = f32[4] get-tuple-element(s), index=1\n"
      "  acc = f32[4] get-tuple-element(s), index=2\n"
      "  one = s32[] constant(1)\n"
      "  i2 = s32[] add(i, one)\n"
      "  l = f32[4] log(k)\n"
      "  acc2 = f32[4] add(acc, l)\n"
      "  ROOT t = (s32[], f32[4], f32[4]) tuple(i2, k, acc2)\n"
      "}\n"
      "cond {\n"
      "  cs = (s32[], f32[4], f32[4]) parameter(0)\n"
      "  ci = s32[] get-tuple-element(cs), index=0\n"
      "  lim = s32[] constant(3)\n"
      "  ROOT lt = pred[] compare(ci, lim), direction=LT\n"
      "}\n"
      "ENTRY e {\n"
      "  p = (s32[], f32[4], f32[4]) parameter(0)\n"
      "  ROOT w = (s32[], f32[4], f32[4]) while(p), condition=cond, body=body\n"
      "}\n",
      "while_loop_invariant_code_motion");
  char *body = pt_comp_text(m, "body");
  char *entry = pt_comp_text(m, "e");
  assert_null(strstr(body, "log("));
  assert_non_null(strstr(entry, "log("));
  assert_non_null(strstr(entry, "ROOT"));
  assert_null(strstr(entry, "ROOT w ="));
  assert_int_equal(m->entry->root->opcode, KILN_OP_TUPLE);
  assert_int_equal(m->entry->root->shape->num_elements, 3);
  kiln_free(body);
  kiln_free(entry);
  kiln_hlo_module_destroy(m);
}

static void test_while_loop_invariant_leaves_cheap_changing_and_effectful_work(void **state) {
  /* Only cheap invariant work (a broadcast, a reshape), work on the changing counter, and an
   * rng (a side effect: each step draws anew) read from the invariant element: nothing moves. */
  const char *text =
      "HloModule t\n"
      "body {\n"
      "  s = (s32[], f32[4], f32[4]) parameter(0)\n"
      "  i = s32[] get-tuple-element(s), index=0\n"
      "  k = f32[4] get-tuple-element(s), index=1\n"
      "  acc = f32[4] get-tuple-element(s), index=2\n"
      "  one = s32[] constant(1)\n"
      "  i2 = s32[] add(i, one)\n"
      "  kr = f32[2,2] reshape(k)\n"
      "  kf = f32[4] reshape(kr)\n"
      "  fi = f32[] convert(i2)\n"
      "  fb = f32[4] broadcast(fi), dimensions={}\n"
      "  lo = f32[] constant(0)\n"
      "  hi = f32[] constant(1)\n"
      "  u = f32[4] rng(lo, hi), distribution=rng_uniform\n"
      "  z = f32[4] multiply(u, kf)\n"
      "  a1 = f32[4] add(acc, kf)\n"
      "  a2 = f32[4] add(a1, fb)\n"
      "  a3 = f32[4] add(a2, z)\n"
      "  ROOT t = (s32[], f32[4], f32[4]) tuple(i2, k, a3)\n"
      "}\n"
      "cond {\n"
      "  cs = (s32[], f32[4], f32[4]) parameter(0)\n"
      "  ci = s32[] get-tuple-element(cs), index=0\n"
      "  lim = s32[] constant(3)\n"
      "  ROOT lt = pred[] compare(ci, lim), direction=LT\n"
      "}\n"
      "ENTRY e {\n"
      "  p0 = f32[4] parameter(0)\n"
      "  p1 = f32[4] parameter(1)\n"
      "  zero = s32[] constant(0)\n"
      "  init = (s32[], f32[4], f32[4]) tuple(zero, p0, p1)\n"
      "  w = (s32[], f32[4], f32[4]) while(init), condition=cond, body=body\n"
      "  ROOT r = f32[4] get-tuple-element(w), index=2\n"
      "}\n";
  kiln_hlo_module_t *m = pt_parse(text);
  char *before = pt_comp_text(m, NULL);
  pt_run(m, "while_loop_invariant_code_motion");
  char *after = pt_comp_text(m, NULL);
  assert_string_equal(before, after);
  kiln_free(before);
  kiln_free(after);
  kiln_hlo_module_destroy(m);
}

static void test_while_loop_dead_state_drops_what_nothing_reads(void **state) {
  /* Element 2 is passed on and read by no one; element 3 is recomputed each step from
   * itself alone and read by no one after the loop; the counter (the condition) and element
   * 1 (the loop's user) stay, renumbered 0 and 1. */
  const char *text =
      "HloModule t\n"
      "body {\n"
      "  s = (s32[], f32[4], f32[4], f32[4]) parameter(0)\n"
      "  i = s32[] get-tuple-element(s), index=0\n"
      "  a = f32[4] get-tuple-element(s), index=1\n"
      "  k = f32[4] get-tuple-element(s), index=2\n"
      "  z = f32[4] get-tuple-element(s), index=3\n"
      "  one = s32[] constant(1)\n"
      "  i2 = s32[] add(i, one)\n"
      "  a2 = f32[4] add(a, a)\n"
      "  z2 = f32[4] multiply(z, z)\n"
      "  ROOT t = (s32[], f32[4], f32[4], f32[4]) tuple(i2, a2, k, z2)\n"
      "}\n"
      "cond {\n"
      "  cs = (s32[], f32[4], f32[4], f32[4]) parameter(0)\n"
      "  ci = s32[] get-tuple-element(cs), index=0\n"
      "  lim = s32[] constant(4)\n"
      "  ROOT lt = pred[] compare(ci, lim), direction=LT\n"
      "}\n"
      "ENTRY e {\n"
      "  p0 = f32[4] parameter(0)\n"
      "  p1 = f32[4] parameter(1)\n"
      "  zero = s32[] constant(0)\n"
      "  init = (s32[], f32[4], f32[4], f32[4]) tuple(zero, p0, p1, p1)\n"
      "  w = (s32[], f32[4], f32[4], f32[4]) while(init), condition=cond, body=body\n"
      "  ROOT r = f32[4] get-tuple-element(w), index=1\n"
      "}\n";
  kiln_hlo_module_t *m = pt_run_same_results(text, "while_loop_dead_state");
  char *body = pt_comp_text(m, "body");
  char *cond = pt_comp_text(m, "cond");
  char *entry = pt_comp_text(m, "e");
  assert_non_null(strstr(body, "(s32[], f32[4]) parameter(0)"));
  assert_non_null(strstr(body, "tuple(i2, a2)"));
  assert_null(strstr(body, "multiply(z, z)"));
  assert_null(strstr(body, "index=2"));
  assert_non_null(strstr(cond, "(s32[], f32[4]) parameter(0)"));
  assert_non_null(strstr(entry, "tuple(zero, p0)"));
  assert_non_null(strstr(entry, "get-tuple-element(w), index=1"));
  kiln_free(body);
  kiln_free(cond);
  kiln_free(entry);
  kiln_hlo_module_destroy(m);
  /* Read after the loop an element stays: the loop's user reads z now, and a goes. */
  char *text3 = kiln_strdup(text);
  char *at = strstr(text3, "get-tuple-element(w), index=1");
  assert_non_null(at);
  at[strlen("get-tuple-element(w), index=")] = '3';
  m = pt_run_same_results(text3, "while_loop_dead_state");
  body = pt_comp_text(m, "body");
  assert_non_null(strstr(body, "(s32[], f32[4]) parameter(0)"));
  assert_non_null(strstr(body, "multiply(z, z)"));
  assert_null(strstr(body, "add(a, a)"));
  kiln_free(body);
  kiln_free(text3);
  kiln_hlo_module_destroy(m);
}

static void test_while_loop_hoisting_then_dead_state_leave_the_work_outside(void **state) {
  /* After hoisting, k (element 1) is only passed on: the group drops it and keeps the
   * hoisted value's element. */
  kiln_hlo_module_t *m = pt_run_same_results(
      kInvariantLoop, "(while_loop_invariant_code_motion,while_loop_dead_state,dce)");
  char *body = pt_comp_text(m, "body");
  assert_non_null(strstr(body, "(s32[], f32[4], f32[4]) parameter(0)"));
  assert_null(strstr(body, "exponential"));
  kiln_free(body);
  kiln_hlo_module_destroy(m);
}

static void test_pass_lists_and_groups_run_by_name(void **state) {
  kiln_hlo_module_t *m = pt_parse(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = f32[4] parameter(0)\n"
      "  ROOT r = f32[4] negate(p)\n"
      "}\n");
  kiln_pass_options_t o = {.verify = 1};
  kiln_status s = kiln_pass_run_list(m, "call_inline,(simplify,constant_folding,dce,cse)", &o);
  assert_null(s);
  s = kiln_pass_run_list(m, "simplify,no_such_pass", &o);
  assert_non_null(s);
  assert_non_null(strstr(kiln_status_message(s), "no_such_pass"));
  kiln_status_free(s);
  kiln_hlo_module_destroy(m);
}

/* A fusion inside a sort comparator (as XLA's after_optimizations dumps hold it, with a
 * fusion nested in its fused computation) becomes plain instructions; the entry's own
 * fusion is a kernel and stays. */
static void test_fusion_inlining_flattens_fusions_in_comparators_only(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "inner {\n"
      "  a = f32[] parameter(0)\n"
      "  ROOT n = f32[] negate(a)\n"
      "}\n"
      "fused_gt {\n"
      "  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n"
      "  na = f32[] fusion(a), kind=kLoop, calls=inner\n"
      "  nb = f32[] negate(b)\n"
      "  ROOT gt = pred[] compare(na, nb), direction=GT\n"
      "}\n"
      "cmp {\n"
      "  p0 = f32[] parameter(0)\n"
      "  p1 = f32[] parameter(1)\n"
      "  p2 = s32[] parameter(2)\n"
      "  p3 = s32[] parameter(3)\n"
      "  ROOT f = pred[] fusion(p0, p1), kind=kLoop, calls=fused_gt\n"
      "}\n"
      "twice {\n"
      "  x = f32[4,8] parameter(0)\n"
      "  ROOT d = f32[4,8] add(x, x)\n"
      "}\n"
      "ENTRY e {\n"
      "  x = f32[4,8] parameter(0)\n"
      "  y = f32[4,8] fusion(x), kind=kLoop, calls=twice\n"
      "  i = s32[4,8] iota(), iota_dimension=1\n"
      "  ROOT s = (f32[4,8], s32[4,8]) sort(y, i), dimensions={1}, is_stable=true, to_apply=cmp\n"
      "}\n",
      "fusion_inline");
  assert_int_equal(pt_count(m, KILN_OP_FUSION), 1);
  assert_non_null(kiln_hlo_module_find_computation(m, "twice"));
  assert_null(kiln_hlo_module_find_computation(m, "fused_gt"));
  assert_null(kiln_hlo_module_find_computation(m, "inner"));
  const kiln_hlo_computation_t *cmp = kiln_hlo_module_find_computation(m, "cmp");
  assert_non_null(cmp);
  assert_int_equal(cmp->root->opcode, KILN_OP_COMPARE);
  kiln_hlo_module_destroy(m);
}

/* The start of the fusion_unfuse modules: an f32 add reducer and the fused computation
 * `mixed`'s parameters. */
#define UNFUSE_HEAD               \
  "HloModule t\n"                 \
  "add {\n"                       \
  "  a = f32[] parameter(0)\n"    \
  "  b = f32[] parameter(1)\n"    \
  "  ROOT r = f32[] add(a, b)\n"  \
  "}\n"                           \
  "mixed {\n"                     \
  "  a = f32[6,5] parameter(0)\n" \
  "  i = f32[] parameter(1)\n"

/* A given kInput fusion whose reduce the loop emitter computes elementally (a column
 * reduction over 6 rows) beside a side output of its input's shape: two element counts, no
 * one kernel (fuzz: "loop fusion outputs with different element counts"). It is inlined, its
 * get-tuple-elements become the root's operands; a multi-output loop fusion of one element
 * count and a reduction fusion with a side output of its input's shape stay. */
static void test_fusion_unfuse_inlines_only_fusions_no_kernel_can_hold(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      UNFUSE_HEAD
      "  x = f32[6,5] multiply(a, a)\n"
      "  r = f32[5] reduce(x, i), dimensions={0}, to_apply=add\n"
      "  y = f32[6,5] negate(x)\n"
      "  ROOT t = (f32[5], f32[6,5]) tuple(r, y)\n"
      "}\n"
      "same_count {\n"
      "  a = f32[6,5] parameter(0)\n"
      "  n = f32[6,5] negate(a)\n"
      "  tr = f32[5,6] transpose(a), dimensions={1,0}\n"
      "  ROOT t = (f32[6,5], f32[5,6]) tuple(n, tr)\n"
      "}\n"
      "row {\n"
      "  a = f32[6,4096] parameter(0)\n"
      "  i = f32[] parameter(1)\n"
      "  e = f32[6,4096] exponential(a)\n"
      "  r = f32[6] reduce(e, i), dimensions={1}, to_apply=add\n"
      "  ROOT t = (f32[6], f32[6,4096]) tuple(r, e)\n"
      "}\n"
      "ENTRY e {\n"
      "  p = f32[6,5] parameter(0)\n"
      "  z = f32[] constant(0)\n"
      "  f = (f32[5], f32[6,5]) fusion(p, z), kind=kInput, calls=mixed\n"
      "  r = f32[5] get-tuple-element(f), index=0\n"
      "  y = f32[6,5] get-tuple-element(f), index=1\n"
      "  g = (f32[6,5], f32[5,6]) fusion(y), kind=kLoop, calls=same_count\n"
      "  q = f32[6,4096] parameter(1)\n"
      "  h = (f32[6], f32[6,4096]) fusion(q, z), kind=kInput, calls=row\n"
      "  ROOT o = (f32[5], (f32[6,5], f32[5,6]), (f32[6], f32[6,4096])) tuple(r, g, h)\n"
      "}\n",
      "fusion_unfuse");
  assert_null(kiln_hlo_module_find_computation(m, "mixed"));
  assert_non_null(kiln_hlo_module_find_computation(m, "same_count"));
  assert_non_null(kiln_hlo_module_find_computation(m, "row"));
  assert_int_equal(pt_count(m, KILN_OP_FUSION), 2);
  assert_int_equal(pt_count(m, KILN_OP_GET_TUPLE_ELEMENT), 0);
  const kiln_hlo_computation_t *e = m->entry;
  assert_int_equal(e->root->operands[0]->opcode, KILN_OP_REDUCE);
  assert_int_equal(e->root->operands[1]->operands[0]->opcode, KILN_OP_NEGATE);
  kiln_hlo_module_destroy(m);
}

/* The whole result of such a fusion used as a tuple (the entry's root) keeps the inlined
 * tuple. */
static void test_fusion_unfuse_keeps_a_tuple_used_whole(void **state) {
  kiln_hlo_module_t *m =
      pt_run_same_results(UNFUSE_HEAD
                          "  r = f32[5] reduce(a, i), dimensions={0}, to_apply=add\n"
                          "  y = f32[6,5] negate(a)\n"
                          "  ROOT t = (f32[5], f32[6,5]) tuple(r, y)\n"
                          "}\n"
                          "ENTRY e {\n"
                          "  p = f32[6,5] parameter(0)\n"
                          "  z = f32[] constant(0)\n"
                          "  ROOT f = (f32[5], f32[6,5]) fusion(p, z), kind=kInput, calls=mixed\n"
                          "}\n",
                          "fusion_unfuse");
  assert_int_equal(pt_count(m, KILN_OP_FUSION), 0);
  assert_int_equal(m->entry->root->opcode, KILN_OP_TUPLE);
  assert_int_equal(m->entry->root->operands[0]->opcode, KILN_OP_REDUCE);
  kiln_hlo_module_destroy(m);
}

/* A given fusion whose scatter is not its root (an exponential after it, or the copy layout
 * assignment puts there when the fusion's result layout is not the operand's; fuzz:
 * "scatter fusion whose root is not the scatter") or whose root is a transpose of its sort
 * ("the root is not a sort") is inlined; a scatter fusion ending at the scatter and a sort
 * fusion ending at a sort output stay. */
static void test_fusion_unfuse_inlines_a_scatter_or_sort_off_the_root(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "add {\n"
      "  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n"
      "  ROOT r = f32[] add(a, b)\n"
      "}\n"
      "lt {\n"
      "  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n"
      "  ROOT r = pred[] compare(a, b), direction=LT\n"
      "}\n"
      "scatter_then_exp {\n"
      "  a = f32[5,3] parameter(0)\n"
      "  i = s32[2,1] parameter(1)\n"
      "  u = f32[2,3] parameter(2)\n"
      "  s = f32[5,3] scatter(a, i, u), update_window_dims={1}, inserted_window_dims={0}, "
      "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n"
      "  ROOT e = f32[5,3] exponential(s)\n"
      "}\n"
      "scatter_at_root {\n"
      "  a = f32[5,3] parameter(0)\n"
      "  i = s32[2,1] parameter(1)\n"
      "  u = f32[2,3] parameter(2)\n"
      "  n = f32[2,3] negate(u)\n"
      "  ROOT s = f32[5,3] scatter(a, i, n), update_window_dims={1}, inserted_window_dims={0}, "
      "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n"
      "}\n"
      "sort_then_transpose {\n"
      "  a = f32[5,3] parameter(0)\n"
      "  s = f32[5,3] sort(a), dimensions={1}, to_apply=lt\n"
      "  ROOT t = f32[3,5] transpose(s), dimensions={1,0}\n"
      "}\n"
      "sort_at_root {\n"
      "  a = f32[5,3] parameter(0)\n"
      "  n = f32[5,3] negate(a)\n"
      "  ROOT s = f32[5,3] sort(n), dimensions={0}, to_apply=lt\n"
      "}\n"
      "ENTRY e {\n"
      "  p = f32[5,3] parameter(0)\n"
      "  i = s32[2,1] parameter(1)\n"
      "  u = f32[2,3] parameter(2)\n"
      "  f = f32[5,3] fusion(p, i, u), kind=kInput, calls=scatter_then_exp\n"
      "  g = f32[5,3] fusion(p, i, u), kind=kInput, calls=scatter_at_root\n"
      "  h = f32[3,5] fusion(p), kind=kLoop, calls=sort_then_transpose\n"
      "  k = f32[5,3] fusion(p), kind=kLoop, calls=sort_at_root\n"
      "  ROOT o = (f32[5,3], f32[5,3], f32[3,5], f32[5,3]) tuple(f, g, h, k)\n"
      "}\n",
      "fusion_unfuse");
  assert_null(kiln_hlo_module_find_computation(m, "scatter_then_exp"));
  assert_null(kiln_hlo_module_find_computation(m, "sort_then_transpose"));
  assert_non_null(kiln_hlo_module_find_computation(m, "scatter_at_root"));
  assert_non_null(kiln_hlo_module_find_computation(m, "sort_at_root"));
  assert_int_equal(pt_count(m, KILN_OP_FUSION), 2);
  const kiln_hlo_computation_t *e = m->entry;
  assert_int_equal(e->root->operands[0]->opcode, KILN_OP_EXP);
  assert_int_equal(e->root->operands[2]->opcode, KILN_OP_TRANSPOSE);
  kiln_hlo_module_destroy(m);
}

/* Without a reduce: outputs of two element counts that are not input slices (a slice and a
 * transpose of another shape; fuzz: a given slices fusion whose layouts made its roots
 * transposes of slices, "loop fusion outputs with different element counts") are inlined;
 * slices beside a whole window, and outputs of one element count, stay. */
static void test_fusion_unfuse_inlines_outputs_of_two_counts_that_are_not_slices(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "mixed {\n"
      "  a = f32[6,5] parameter(0)\n"
      "  e = f32[6,5] exponential(a)\n"
      "  s = f32[2,5] slice(e), slice={[1:3], [0:5]}\n"
      "  t = f32[5,6] transpose(e), dimensions={1,0}\n"
      "  ROOT r = (f32[2,5], f32[5,6]) tuple(s, t)\n"
      "}\n"
      "slices {\n"
      "  a = f32[6,5] parameter(0)\n"
      "  e = f32[6,5] exponential(a)\n"
      "  s = f32[2,5] slice(e), slice={[1:3], [0:5]}\n"
      "  ROOT r = (f32[2,5], f32[6,5]) tuple(s, e)\n"
      "}\n"
      "same_count {\n"
      "  a = f32[6,5] parameter(0)\n"
      "  n = f32[6,5] negate(a)\n"
      "  t = f32[5,6] transpose(a), dimensions={1,0}\n"
      "  ROOT r = (f32[6,5], f32[5,6]) tuple(n, t)\n"
      "}\n"
      "ENTRY e {\n"
      "  p = f32[6,5] parameter(0)\n"
      "  f = (f32[2,5], f32[5,6]) fusion(p), kind=kLoop, calls=mixed\n"
      "  g = (f32[2,5], f32[6,5]) fusion(p), kind=kLoop, calls=slices\n"
      "  h = (f32[6,5], f32[5,6]) fusion(p), kind=kLoop, calls=same_count\n"
      "  ROOT o = ((f32[2,5], f32[5,6]), (f32[2,5], f32[6,5]), (f32[6,5], f32[5,6])) "
      "tuple(f, g, h)\n"
      "}\n",
      "fusion_unfuse");
  assert_null(kiln_hlo_module_find_computation(m, "mixed"));
  assert_non_null(kiln_hlo_module_find_computation(m, "slices"));
  assert_non_null(kiln_hlo_module_find_computation(m, "same_count"));
  assert_int_equal(pt_count(m, KILN_OP_FUSION), 2);
  kiln_hlo_module_destroy(m);
}

static void test_pipeline_reports_exactly_the_unregistered_stages(void **state) {
  const char *missing[32];
  int n = kiln_pipeline_missing_passes(missing, 32);
  assert_true(n <= 32);
  for (int i = 0; i < n; i++) assert_null(kiln_pipeline_find_pass(missing[i]));
  /* The simplification stages are all here. */
  const char *mine[] = {"call_inline",    "fusion_inline",        "simplify", "constant_folding",
                        "tuple_simplify", "while_loop_constants", "dce",      "cse",
                        "simplify_layout"};
  for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++) {
    assert_non_null(kiln_pipeline_find_pass(mine[i]));
    for (int k = 0; k < n; k++) assert_string_not_equal(missing[k], mine[i]);
  }
  /* '-' and '_' are interchangeable. */
  assert_ptr_equal(kiln_pipeline_find_pass("constant-folding"), kiln_pass_find("constant_folding"));
  kiln_strbuf_t b = {0};
  kiln_pipeline_describe(&b);
  const char *d = kiln_strbuf_cstr(&b);
  assert_non_null(strstr(d, "simplification"));
  assert_non_null(strstr(d, "buffer assignment"));
  int marked = 0;
  for (const char *p = d; (p = strstr(p, "[not registered]")) != NULL; p++) marked++;
  assert_int_equal(marked, n);
  printf("pipeline:\n%s", d);
  kiln_strbuf_free(&b);
}

static void test_pipeline_simplifies_and_keeps_results(void **state) {
  kiln_hlo_module_t *m = pt_parse(
      "HloModule t\n"
      "helper {\n"
      "  x = f32[8] parameter(0)\n"
      "  one = f32[] constant(1)\n"
      "  b = f32[8] broadcast(one), dimensions={}\n"
      "  ROOT m = f32[8] multiply(x, b)\n"
      "}\n"
      "ENTRY e {\n"
      "  p = f32[8] parameter(0)\n"
      "  c = f32[8] call(p), to_apply=helper\n"
      "  t = f32[8] transpose(c), dimensions={0}\n"
      "  e1 = f32[8] exponential(t)\n"
      "  e2 = f32[8] exponential(p)\n"
      "  ROOT s = f32[8] add(e1, e2)\n"
      "}\n");
  kiln_pass_options_t o = {.verify = 1};
  kiln_status s = kiln_pipeline_run_simplification(m, &o);
  if (s) fail_msg("%s", kiln_status_message(s));
  /* call inlined, x*1 and the identity transpose gone, the two exponentials merged. */
  assert_int_equal(pt_count(m, KILN_OP_CALL), 0);
  assert_int_equal(pt_count(m, KILN_OP_MULTIPLY), 0);
  assert_int_equal(pt_count(m, KILN_OP_TRANSPOSE), 0);
  assert_int_equal(pt_count(m, KILN_OP_EXP), 1);
  assert_int_equal(m->computations.len, 1);
  kiln_hlo_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_call_inlining_handles_multiple_call_sites),
      cmocka_unit_test(test_call_inlining_handles_nested_calls_and_parameter_roots),
      cmocka_unit_test(test_call_inlining_keeps_callees_still_used_elsewhere),
      cmocka_unit_test(test_call_inlining_inlines_calls_an_async_body_brings),
      cmocka_unit_test(test_call_inlining_leaves_a_module_without_calls),
      cmocka_unit_test(test_while_loop_constants_sink_into_body_and_condition),
      cmocka_unit_test(test_while_loop_constants_leave_changing_state),
      cmocka_unit_test(test_while_loop_invariant_work_moves_before_the_loop),
      cmocka_unit_test(test_while_loop_invariant_keeps_the_state_its_users_read),
      cmocka_unit_test(test_while_loop_invariant_leaves_cheap_changing_and_effectful_work),
      cmocka_unit_test(test_while_loop_dead_state_drops_what_nothing_reads),
      cmocka_unit_test(test_while_loop_hoisting_then_dead_state_leave_the_work_outside),
      cmocka_unit_test(test_pass_lists_and_groups_run_by_name),
      cmocka_unit_test(test_fusion_inlining_flattens_fusions_in_comparators_only),
      cmocka_unit_test(test_fusion_unfuse_inlines_only_fusions_no_kernel_can_hold),
      cmocka_unit_test(test_fusion_unfuse_keeps_a_tuple_used_whole),
      cmocka_unit_test(test_fusion_unfuse_inlines_a_scatter_or_sort_off_the_root),
      cmocka_unit_test(test_fusion_unfuse_inlines_outputs_of_two_counts_that_are_not_slices),
      cmocka_unit_test(test_pipeline_reports_exactly_the_unregistered_stages),
      cmocka_unit_test(test_pipeline_simplifies_and_keeps_results),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
