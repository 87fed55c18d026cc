/* while_loop_unroll on small hand-written loops: the trip count a counter gives (its type's
 * width and sign, every direction, either operand order, zero and one trip), the loops it
 * leaves (too many trips or copies, side effects, an unknown start or step, a nested loop of
 * unknown count), nested and shared loops, and the pipeline around it. Every rewrite is checked
 * against the evaluator running the original loop, bit for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/str.h"
#include "compiler/passes/pipeline.h"
#include "tests/pass_test_util.h"

/* A loop whose counter (element 0, of `type`) starts at `start` and steps by `step` while
 * `cmp` holds (`cmp` is the condition's compare, reading `i` and `n`); each step halves the
 * vector and adds the counter to it. The whole state is the result. */
static char *counted_loop(const char *type, const char *start, const char *step, const char *bound,
                          const char *cmp, const char *extra_body) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b,
                     "HloModule t\n"
                     "body {\n"
                     "  s = (%1$s[], f32[4]) parameter(0)\n"
                     "  i = %1$s[] get-tuple-element(s), index=0\n"
                     "  x = f32[4] get-tuple-element(s), index=1\n"
                     "  d = %1$s[] constant(%3$s)\n"
                     "  i2 = %1$s[] add(i, d)\n"
                     "  h = f32[] constant(0.5)\n"
                     "  hb = f32[4] broadcast(h), dimensions={}\n"
                     "  y = f32[4] multiply(x, hb)\n"
                     "  fi = f32[] convert(i)\n"
                     "  fb = f32[4] broadcast(fi), dimensions={}\n"
                     "  z0 = f32[4] add(y, fb)\n"
                     "%6$s"
                     "  ROOT t = (%1$s[], f32[4]) tuple(i2, z)\n"
                     "}\n"
                     "cond {\n"
                     "  cs = (%1$s[], f32[4]) parameter(0)\n"
                     "  i = %1$s[] get-tuple-element(cs), index=0\n"
                     "  n = %1$s[] constant(%4$s)\n"
                     "  ROOT c = pred[] %5$s\n"
                     "}\n"
                     "ENTRY e {\n"
                     "  p = f32[4] parameter(0)\n"
                     "  i0 = %1$s[] constant(%2$s)\n"
                     "  init = (%1$s[], f32[4]) tuple(i0, p)\n"
                     "  ROOT w = (%1$s[], f32[4]) while(init), condition=cond, body=body\n"
                     "}\n",
                     type, start, step, bound, cmp,
                     extra_body ? extra_body : "  z = f32[4] copy(z0)\n");
  return kiln_strbuf_take(&b);
}

/* Unrolls `text`; asserts the results are the loop's and `trips` copies of the body remain
 * (one multiply each; -1: the loop stays, and is not run: it may not end). */
static void expect_trips(const char *text, int trips) {
  kiln_hlo_module_t *m = NULL;
  if (trips < 0) {
    m = pt_parse(text);
    pt_run(m, "while_loop_unroll");
    assert_int_equal(pt_count(m, KILN_OP_WHILE), 1);
  } else {
    m = pt_run_same_results(text, "while_loop_unroll");
    assert_int_equal(pt_count(m, KILN_OP_WHILE), 0);
    assert_int_equal(pt_count(m, KILN_OP_MULTIPLY), trips);
    /* the body and condition went with the loop */
    assert_null(kiln_hlo_module_find_computation(m, "body"));
    assert_null(kiln_hlo_module_find_computation(m, "cond"));
  }
  kiln_hlo_module_destroy(m);
}

static void test_a_counted_loop_becomes_copies_of_its_body(void **state) {
  char *text = counted_loop("s32", "0", "1", "5", "compare(i, n), direction=LT", NULL);
  expect_trips(text, 5);
  /* With the simplification group around it, the state tuples and the counter fold away. */
  kiln_hlo_module_t *m = pt_run_same_results(
      text, "(while_loop_unroll,simplify,constant_folding,tuple_simplify,dce,cse)");
  assert_int_equal(pt_count(m, KILN_OP_GET_TUPLE_ELEMENT), 0);
  assert_int_equal(pt_count(m, KILN_OP_CONVERT), 0);
  kiln_hlo_module_destroy(m);
  kiln_free(text);
}

static void test_trip_counts_follow_the_counter(void **state) {
  const struct {
    const char *type, *start, *step, *bound, *cmp;
    int trips;
  } cases[] = {
      {"s32", "10", "-2", "0", "compare(i, n), direction=GT", 5}, /* 10 8 6 4 2 */
      {"s32", "0", "3", "9", "compare(i, n), direction=LE", 4},   /* 0 3 6 9 */
      {"s32", "0", "1", "5", "compare(n, i), direction=GT", 5},   /* bound first */
      {"s32", "2", "1", "6", "compare(i, n), direction=NE", 4},   /* 2 3 4 5 */
      {"u8", "250", "2", "4", "compare(i, n), direction=NE", 5},  /* 250 252 254 0 2: wraps */
      {"s8", "120", "5", "0", "compare(i, n), direction=GT", 2},  /* 120 125, then -126 */
      /* unsigned: 0x7ffffffe up to 0x80000001 (signed, the bound would be negative) */
      {"u32", "2147483646", "1", "2147483649", "compare(i, n), direction=LT", 3},
      {"s64", "-3", "1", "-2", "compare(i, n), direction=LT", 1}, /* one trip */
      {"s32", "7", "1", "5", "compare(i, n), direction=LT", 0},   /* none: the initial state */
      {"s32", "0", "1", "64", "compare(i, n), direction=LT", 64}, /* the most it takes */
      {"s32", "0", "1", "65", "compare(i, n), direction=LT", -1}, /* too many */
      {"s32", "0", "0", "5", "compare(i, n), direction=LT", -1},  /* never ends */
      {"s32", "0", "-1", "5", "compare(i, n), direction=LT", -1}, /* wraps after 2^31 trips */
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char *text = counted_loop(cases[k].type, cases[k].start, cases[k].step, cases[k].bound,
                              cases[k].cmp, NULL);
    print_message("%s from %s by %s, %s\n", cases[k].type, cases[k].start, cases[k].step,
                  cases[k].cmp);
    expect_trips(text, cases[k].trips);
    kiln_free(text);
  }
}

static void test_loops_it_cannot_or_should_not_unroll_stay(void **state) {
  /* A side effect in a body of 3 trips (each copy's draw would be unordered). */
  char *text = counted_loop("s32", "0", "1", "3", "compare(i, n), direction=LT",
                            "  lo = f32[] constant(0)\n  hi = f32[] constant(1)\n"
                            "  u = f32[4] rng(lo, hi), distribution=rng_uniform\n"
                            "  z = f32[4] add(z0, u)\n");
  kiln_hlo_module_t *m = pt_parse(text);
  pt_run(m, "while_loop_unroll");
  assert_int_equal(pt_count(m, KILN_OP_WHILE), 1);
  kiln_hlo_module_destroy(m);
  kiln_free(text);
  /* ... but a single trip keeps its order: it goes. */
  text = counted_loop("s32", "0", "1", "1", "compare(i, n), direction=LT",
                      "  lo = f32[] constant(0)\n  hi = f32[] constant(1)\n"
                      "  u = f32[4] rng(lo, hi), distribution=rng_uniform\n"
                      "  z = f32[4] add(z0, u)\n");
  m = pt_parse(text);
  pt_run(m, "while_loop_unroll");
  assert_int_equal(pt_count(m, KILN_OP_WHILE), 0);
  assert_int_equal(pt_count(m, KILN_OP_RNG), 1);
  kiln_hlo_module_destroy(m);
  kiln_free(text);
  /* Too many copies: 40 trips of a body of 62 instructions. */
  kiln_strbuf_t chain = {0};
  kiln_strbuf_printf(&chain, "  c0 = f32[4] sine(z0)\n");
  for (int k = 1; k < 50; k++) kiln_strbuf_printf(&chain, "  c%d = f32[4] sine(c%d)\n", k, k - 1);
  kiln_strbuf_printf(&chain, "  z = f32[4] add(z0, c49)\n");
  text =
      counted_loop("s32", "0", "1", "40", "compare(i, n), direction=LT", kiln_strbuf_cstr(&chain));
  expect_trips(text, -1);
  kiln_free(text);
  /* ... the same body 30 times fits. */
  text =
      counted_loop("s32", "0", "1", "30", "compare(i, n), direction=LT", kiln_strbuf_cstr(&chain));
  expect_trips(text, 30);
  kiln_free(text);
  kiln_strbuf_free(&chain);
  /* The counter starts at a parameter's value, or steps by one. */
  expect_trips(
      "HloModule t\n"
      "body {\n  s = (s32[], f32[4]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
      "  x = f32[4] get-tuple-element(s), index=1\n  one = s32[] constant(1)\n"
      "  i2 = s32[] add(i, one)\n  y = f32[4] multiply(x, x)\n"
      "  ROOT t = (s32[], f32[4]) tuple(i2, y)\n}\n"
      "cond {\n  cs = (s32[], f32[4]) parameter(0)\n  i = s32[] get-tuple-element(cs), index=0\n"
      "  n = s32[] constant(3)\n  ROOT c = pred[] compare(i, n), direction=LT\n}\n"
      "ENTRY e {\n  p = f32[4] parameter(0)\n  k = s32[] parameter(1)\n"
      "  init = (s32[], f32[4]) tuple(k, p)\n"
      "  ROOT w = (s32[], f32[4]) while(init), condition=cond, body=body\n}\n",
      -1);
  expect_trips(
      "HloModule t\n"
      "body {\n  s = (s32[], f32[4]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
      "  x = f32[4] get-tuple-element(s), index=1\n  i2 = s32[] multiply(i, i)\n"
      "  y = f32[4] multiply(x, x)\n  ROOT t = (s32[], f32[4]) tuple(i2, y)\n}\n"
      "cond {\n  cs = (s32[], f32[4]) parameter(0)\n  i = s32[] get-tuple-element(cs), index=0\n"
      "  n = s32[] constant(100)\n  ROOT c = pred[] compare(i, n), direction=LT\n}\n"
      "ENTRY e {\n  p = f32[4] parameter(0)\n  two = s32[] constant(2)\n"
      "  init = (s32[], f32[4]) tuple(two, p)\n"
      "  ROOT w = (s32[], f32[4]) while(init), condition=cond, body=body\n}\n",
      -1);
}

/* An outer loop of 3 trips around an inner loop of `inner_bound` trips (a constant, or the
 * outer counter when `inner_bound` is "j"). */
static char *nested_loops(const char *inner_bound) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(
      &b,
      "HloModule t\n"
      "ib {\n  s = (s32[], f32[4], s32[]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
      "  x = f32[4] get-tuple-element(s), index=1\n  j = s32[] get-tuple-element(s), index=2\n"
      "  one = s32[] constant(1)\n  i2 = s32[] add(i, one)\n"
      "  h = f32[] constant(0.5)\n  hb = f32[4] broadcast(h), dimensions={}\n"
      "  y = f32[4] multiply(x, hb)\n  z = f32[4] add(y, hb)\n"
      "  ROOT t = (s32[], f32[4], s32[]) tuple(i2, z, j)\n}\n"
      "ic {\n  s = (s32[], f32[4], s32[]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
      "  j = s32[] get-tuple-element(s), index=2\n  n = s32[] constant(4)\n"
      "  ROOT c = pred[] compare(i, %s), direction=LT\n}\n"
      "ob {\n  s = (s32[], f32[4]) parameter(0)\n  j = s32[] get-tuple-element(s), index=0\n"
      "  x = f32[4] get-tuple-element(s), index=1\n  zero = s32[] constant(0)\n"
      "  it = (s32[], f32[4], s32[]) tuple(zero, x, j)\n"
      "  iw = (s32[], f32[4], s32[]) while(it), condition=ic, body=ib\n"
      "  x2 = f32[4] get-tuple-element(iw), index=1\n  one = s32[] constant(1)\n"
      "  j2 = s32[] add(j, one)\n  ROOT t = (s32[], f32[4]) tuple(j2, x2)\n}\n"
      "oc {\n  s = (s32[], f32[4]) parameter(0)\n  j = s32[] get-tuple-element(s), index=0\n"
      "  n = s32[] constant(3)\n  ROOT c = pred[] compare(j, n), direction=LT\n}\n"
      "ENTRY e {\n  p = f32[4] parameter(0)\n  zero = s32[] constant(0)\n"
      "  init = (s32[], f32[4]) tuple(zero, p)\n"
      "  ROOT w = (s32[], f32[4]) while(init), condition=oc, body=ob\n}\n",
      inner_bound);
  return kiln_strbuf_take(&b);
}

static void test_nested_counted_loops_unroll_inside_out(void **state) {
  /* The outer body holds a loop, so the outer loop waits for the inner one: 3 x 4 copies. */
  char *text = nested_loops("n");
  kiln_hlo_module_t *m = pt_run_same_results(text, "(while_loop_unroll,tuple_simplify,dce)");
  assert_int_equal(pt_count(m, KILN_OP_WHILE), 0);
  assert_int_equal(pt_count(m, KILN_OP_MULTIPLY), 12);
  kiln_hlo_module_destroy(m);
  kiln_free(text);
  /* An inner loop bounded by the outer counter has no count of its own: both stay. */
  text = nested_loops("j");
  m = pt_run_same_results(text, "(while_loop_unroll,tuple_simplify,dce)");
  assert_int_equal(pt_count(m, KILN_OP_WHILE), 2);
  kiln_hlo_module_destroy(m);
  kiln_free(text);
}

static void test_loops_sharing_a_body_each_unroll(void **state) {
  /* A function with a loop inlined twice: both loops call one body and condition. */
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "body {\n  s = (s32[], u32[2]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
      "  x = u32[2] get-tuple-element(s), index=1\n  one = s32[] constant(1)\n"
      "  i2 = s32[] add(i, one)\n  k = u32[] constant(13)\n  kb = u32[2] broadcast(k), "
      "dimensions={}\n"
      "  r = u32[2] shift-left(x, kb)\n  y = u32[2] xor(x, r)\n"
      "  ROOT t = (s32[], u32[2]) tuple(i2, y)\n}\n"
      "cond {\n  cs = (s32[], u32[2]) parameter(0)\n  i = s32[] get-tuple-element(cs), index=0\n"
      "  n = s32[] constant(5)\n  ROOT c = pred[] compare(i, n), direction=LT\n}\n"
      "ENTRY e {\n  a = u32[2] parameter(0)\n  b = u32[2] parameter(1)\n  zero = s32[] "
      "constant(0)\n"
      "  ia = (s32[], u32[2]) tuple(zero, a)\n  ib = (s32[], u32[2]) tuple(zero, b)\n"
      "  wa = (s32[], u32[2]) while(ia), condition=cond, body=body\n"
      "  wb = (s32[], u32[2]) while(ib), condition=cond, body=body\n"
      "  ra = u32[2] get-tuple-element(wa), index=1\n  rb = u32[2] get-tuple-element(wb), index=1\n"
      "  ROOT r = u32[2] add(ra, rb)\n}\n",
      "while_loop_unroll");
  assert_int_equal(pt_count(m, KILN_OP_WHILE), 0);
  assert_int_equal(pt_count(m, KILN_OP_XOR), 10);
  kiln_hlo_module_destroy(m);
}

static void test_the_simplification_stages_unroll_a_counted_loop(void **state) {
  /* The pipeline's simplification stages leave one computation of straight code. */
  char *text = counted_loop("s32", "0", "1", "5", "compare(i, n), direction=LT", NULL);
  kiln_hlo_module_t *m = pt_parse(text);
  kiln_pass_options_t o = {.verify = 1};
  kiln_status s = kiln_pipeline_run_simplification(m, &o);
  if (s) fail_msg("pipeline: %s", kiln_status_message(s));
  assert_int_equal(pt_count(m, KILN_OP_WHILE), 0);
  assert_int_equal(m->computations.len, 1);
  kiln_hlo_module_destroy(m);
  kiln_free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_counted_loop_becomes_copies_of_its_body),
      cmocka_unit_test(test_trip_counts_follow_the_counter),
      cmocka_unit_test(test_loops_it_cannot_or_should_not_unroll_stay),
      cmocka_unit_test(test_nested_counted_loops_unroll_inside_out),
      cmocka_unit_test(test_loops_sharing_a_body_each_unroll),
      cmocka_unit_test(test_the_simplification_stages_unroll_a_counted_loop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
