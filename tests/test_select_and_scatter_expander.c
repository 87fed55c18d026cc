/* select_and_scatter_expander: max-pool gradients (GE select, add scatter) with disjoint
 * and overlapping windows, padding, 1-D and 2-D windows, GT/LT selects, a max scatter, a
 * select against a constant with a scatter that keeps the current value evaluate like the
 * evaluator's select-and-scatter and run on the host like it; an unsupported scatter is
 * left alone; the corpus select-and-scatter modules match the evaluator on the host. */
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

/* operand/source shapes, window, select root (over a, b), scatter root (over s, c; NULL:
 * the root is c itself, the current value). */
static double sas_case(const char *x, const char *src, const char *window, const char *sel, const char *sc,
                       bool host) {
  char text[2048], body[256];
  if (sc)
    snprintf(body, sizeof body, "  c = f32[] parameter(1)\n  ROOT r = f32[] %s\n", sc);
  else
    snprintf(body, sizeof body, "  ROOT c = f32[] parameter(1)\n");
  snprintf(text, sizeof text,
           "HloModule s\n\nsel {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  k = f32[] constant(0.25)\n"
           "  ROOT r = pred[] %s\n}\n\nsc {\n  s = f32[] parameter(0)\n%s}\n\n"
           "ENTRY e {\n  x = %s parameter(0)\n  y = %s parameter(1)\n  i = f32[] parameter(2)\n"
           "  ROOT o = %s select-and-scatter(x, y, i), window={%s}, select=sel, scatter=sc\n}\n",
           sel, body, x, src, x, window);
  double e = dx_check_text(text, LIST, KILN_OP_SELECT_AND_SCATTER, host);
  if (e < 0 || e > 1) print_error("%s %s {%s}: error %g\n", x, src, window, e);
  return e;
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

static void test_unsupported_scatter_is_left_alone(void **state) {
  kiln_hlo_module_t *m = pt_parse(
      "HloModule s\n\nsel {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT r = pred[] compare(a, b), direction=GE\n}\n\nsc {\n  s = f32[] parameter(0)\n  c = f32[] parameter(1)\n"
      "  ROOT r = f32[] subtract(s, c)\n}\n\nENTRY e {\n  x = f32[4] parameter(0)\n  y = f32[2] parameter(1)\n"
      "  i = f32[] parameter(2)\n  ROOT o = f32[4] select-and-scatter(x, y, i), window={size=2 stride=2}, select=sel, "
      "scatter=sc\n}\n");
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
      cmocka_unit_test(test_unsupported_scatter_is_left_alone),
      cmocka_unit_test(test_corpus_select_and_scatters_match_on_the_host),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
