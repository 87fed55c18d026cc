/* select_and_scatter_expander: max-pool gradients (GE select, add scatter) with disjoint
 * and overlapping windows, padding, 1-D and 2-D windows, GT/LT selects, a max scatter, a
 * select against a constant with a scatter that keeps the current value evaluate like the
 * evaluator's select-and-scatter and run on the host like it (the unrolled form); windows
 * of more than 64 offsets (9x9, 5x5x5, u4 with many ties) and computations the unrolled form
 * does not take (a subtracting scatter, a select that is not one compare, complex values,
 * windows that hold only padding) do the same through the general form (a reduce-window and
 * a scatter); empty sources and operands give broadcast(init); a dilated window is left alone; the
 * corpus select-and-scatter modules match the evaluator on the host. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "pass_test_util.h"
#include "expander_test_util.h"
#include "dense_expander_test_util.h"

#define LIST "select_and_scatter_expander"

/* A select-and-scatter of element type `t` with operand / source shapes and window; `sel`
 * holds select's instructions after its parameters a, b (a ROOT pred[] among them), `sc`
 * scatter's after its parameters s, c (NULL: the root is c itself, the current value). */
static double sas_module(const char *t, const char *x, const char *src, const char *window,
                         const char *sel, const char *sc, const char *init, bool host) {
  char text[4096], body[512];
  if (sc)
    snprintf(body, sizeof body, "  c = %s[] parameter(1)\n%s", t, sc);
  else
    snprintf(body, sizeof body, "  ROOT c = %s[] parameter(1)\n", t);
  snprintf(text, sizeof text,
           "HloModule s\n\nsel {\n  a = %s[] parameter(0)\n  b = %s[] parameter(1)\n%s}\n\nsc {\n  "
           "s = %s[] "
           "parameter(0)\n%s}\n\nENTRY e {\n  x = %s parameter(0)\n  y = %s parameter(1)\n  i = "
           "%s[] %s\n"
           "  ROOT o = %s select-and-scatter(x, y, i), window={%s}, select=sel, scatter=sc\n}\n",
           t, t, sel, t, body, x, src, t, init, x, window);
  double e = dx_check_text(text, LIST, KILN_OP_SELECT_AND_SCATTER, host);
  if (e < 0 || e > 1) print_error("%s %s {%s}: error %g\n", x, src, window, e);
  return e;
}

/* f32, select root `sel` over a, b (and the constant k = 0.25), scatter root `sc` over s, c. */
static double sas_case(const char *x, const char *src, const char *window, const char *sel,
                       const char *sc, bool host) {
  char sel_body[256], sc_body[256];
  snprintf(sel_body, sizeof sel_body, "  k = f32[] constant(0.25)\n  ROOT r = pred[] %s\n", sel);
  if (sc) snprintf(sc_body, sizeof sc_body, "  ROOT r = f32[] %s\n", sc);
  return sas_module("f32", x, src, window, sel_body, sc ? sc_body : NULL, "parameter(2)", host);
}

static void test_max_pool_gradients_match_the_evaluator(void **state) {
  const char *ge = "compare(a, b), direction=GE", *add = "add(s, c)";
  int bad = 0;
  double e[] = {
      sas_case("f32[4,6]", "f32[2,3]", "size=2x2 stride=2x2", ge, add, true),
      sas_case("f32[5,5]", "f32[5,5]", "size=3x3 pad=1_1x1_1", ge, add, false),
      sas_case("f32[7]", "f32[4]", "size=3 stride=2 pad=1_1", "compare(a, b), direction=GT", add, false),
      sas_case("f32[2,6,5,3]", "f32[2,3,2,3]", "size=1x2x3x1 stride=1x2x2x1 pad=0_0x0_0x0_1x0_0", ge, add, false),
      sas_case("f32[6,4]", "f32[3,2]", "size=2x2 stride=2x2", "compare(a, b), direction=LT", "maximum(s, c)", false),
      sas_case("f32[4,5]", "f32[3,4]", "size=2x2", "compare(a, k), direction=GE", NULL, true),
  };
  for (size_t i = 0; i < sizeof e / sizeof e[0]; i++) bad += e[i] < 0 || e[i] > 1;
  assert_int_equal(bad, 0);
}

static void test_windows_over_64_offsets_match_the_evaluator(void **state) {
  const char *ge = "compare(a, b), direction=GE", *add = "add(s, c)";
  int bad = 0;
  double e[] = {
      sas_case("f32[13,14]", "f32[4,4]", "size=9x9 stride=2x3 pad=2_1x3_3", ge, add, true),
      sas_case("f32[7,6,8]", "f32[2,2,2]", "size=5x5x5 stride=2x2x3 pad=0_0x1_0x0_0", ge, add,
               false),
      /* 16 values over 81 offsets: most windows hold ties, where the first one must win */
      sas_module("u4", "u4[20,21]", "u4[6,5]", "size=9x9 stride=3x4 pad=2_2x3_3",
                 "  ROOT r = pred[] compare(a, b), direction=GE\n", "  ROOT r = u4[] add(s, c)\n",
                 "constant(3)", true),
  };
  for (size_t i = 0; i < sizeof e / sizeof e[0]; i++) bad += e[i] < 0 || e[i] > 1;
  assert_int_equal(bad, 0);
}

static void test_other_computations_match_the_evaluator(void **state) {
  int bad = 0;
  double e[] = {
      sas_case("f32[4]", "f32[2]", "size=2 stride=2", "compare(a, b), direction=GE",
               "subtract(s, c)", true),
      /* a select that is not one compare: prefer values below 1, then the larger */
      sas_module(
          "f32", "f32[6,7]", "f32[3,3]", "size=3x3 stride=2x3 pad=1_0x1_1",
          "  one = f32[] constant(1)\n  ab = pred[] compare(a, one), direction=LT\n"
          "  bb = pred[] compare(b, one), direction=LT\n  ge = pred[] compare(a, b), direction=GE\n"
          "  nb = pred[] not(bb)\n  keep = pred[] and(ab, nb)\n  same = pred[] compare(ab, bb), "
          "direction=EQ\n"
          "  tie = pred[] and(same, ge)\n  ROOT r = pred[] or(keep, tie)\n",
          "  ROOT r = f32[] add(s, c)\n", "parameter(2)", true),
      /* complex values, chosen by their real parts; the scatter subtracts the source */
      sas_module("c64", "c64[5,6]", "c64[3,2]", "size=3x4 stride=2x3 pad=1_1x1_1",
                 "  ra = f32[] real(a)\n  rb = f32[] real(b)\n  ROOT r = pred[] compare(ra, rb), "
                 "direction=GE\n",
                 "  ROOT r = c64[] subtract(c, s)\n", "constant((1, 2))", true),
      /* an empty source (the window is taller than the operand) and an empty operand */
      sas_case("f32[3,5]", "f32[0,4]", "size=4x2", "compare(a, b), direction=GE", "add(s, c)",
               true),
      sas_case("f32[0,5]", "f32[1,4]", "size=2x2 pad=1_1x0_0", "compare(a, b), direction=GE",
               "add(s, c)", false),
      /* the first source rows' windows hold only padding: they scatter nothing */
      sas_module("s32", "s32[4,5]", "s32[7,5]", "size=2x2 stride=1x2 pad=4_0x1_4",
                 "  ROOT r = pred[] compare(a, b), direction=GT\n",
                 "  m = s32[] multiply(s, c)\n  ROOT r = s32[] subtract(m, s)\n", "constant(7)",
                 true),
  };
  for (size_t i = 0; i < sizeof e / sizeof e[0]; i++) bad += e[i] < 0 || e[i] > 1;
  assert_int_equal(bad, 0);
}

static void test_dilated_window_is_left_alone(void **state) {
  kiln_hlo_module_t *m = pt_parse(
      "HloModule s\n\nsel {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT r = pred[] compare(a, b), direction=GE\n}\n\nsc {\n  s = f32[] parameter(0)\n  c = "
      "f32[] parameter(1)\n"
      "  ROOT r = f32[] add(s, c)\n}\n\nENTRY e {\n  x = f32[5] parameter(0)\n  y = f32[2] "
      "parameter(1)\n"
      "  i = f32[] parameter(2)\n  ROOT o = f32[5] select-and-scatter(x, y, i), window={size=2 "
      "stride=2 rhs_dilate=2}, "
      "select=sel, scatter=sc\n}\n");
  pt_run(m, LIST);
  assert_int_equal(pt_count(m, KILN_OP_SELECT_AND_SCATTER), 1);
  kiln_hlo_module_destroy(m);
}

static void test_corpus_select_and_scatters_match_on_the_host(void **state) {
  int n = dx_check_corpus_file("xla/xla__hlo__translate__hlo_to_mhlo__tests__import_emit_stablehlo.hlo",
                               KILN_OP_SELECT_AND_SCATTER, LIST);
  assert_int_equal(n, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_max_pool_gradients_match_the_evaluator),
      cmocka_unit_test(test_windows_over_64_offsets_match_the_evaluator),
      cmocka_unit_test(test_other_computations_match_the_evaluator),
      cmocka_unit_test(test_dilated_window_is_left_alone),
      cmocka_unit_test(test_corpus_select_and_scatters_match_on_the_host),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
