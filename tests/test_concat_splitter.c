/* concat_splitter: concatenates of more than 64 operands become trees of concatenates of at
 * most 64 operands each, bit-identical on the evaluator (150 parameters along an inner
 * dimension; 5,000 along the outer one: three levels; a non-default layout), and the whole
 * module compiles and runs on the host like the evaluator (before, 150 parameters made a
 * kernel of 151 arguments that the executable refused to load); 64 operands are left alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/str.h"
#include "pass_test_util.h"
#include "expander_test_util.h"
#include "dense_expander_test_util.h"

/* A module concatenating n parameters of `shape` (a layout suffix allowed) along `dim`
 * into `result`, then negated (so the concatenate is not the entry's root). */
static char *concat_text(int n, const char *shape, const char *result, int dim) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, "HloModule c\n\nENTRY e {\n");
  for (int i = 0; i < n; i++) kiln_strbuf_printf(&b, "  p%d = %s parameter(%d)\n", i, shape, i);
  kiln_strbuf_printf(&b, "  c = %s concatenate(", result);
  for (int i = 0; i < n; i++) kiln_strbuf_printf(&b, "%sp%d", i ? ", " : "", i);
  kiln_strbuf_printf(&b, "), dimensions={%d}\n  ROOT r = %s negate(c)\n}\n", dim, result);
  return kiln_strbuf_take(&b);
}

/* The most operands of any concatenate in the module. */
static int widest_concat(const kiln_hlo_module_t *m) {
  int widest = 0;
  for (size_t c = 0; c < m->computations.len; c++) {
    const kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++) {
      const kiln_hlo_instruction_t *in = comp->instructions.data[i];
      if (in && in->opcode == KILN_OP_CONCATENATE && in->num_operands > widest)
        widest = in->num_operands;
    }
  }
  return widest;
}

/* Splits (same bits on the evaluator, no concatenate over 64), then `host`: a whole run. */
static void check(int n, const char *shape, const char *result, int dim, int want_concats,
                  bool host) {
  char *text = concat_text(n, shape, result, dim);
  kiln_hlo_module_t *m = pt_run_same_results(text, "concat_splitter");
  assert_true(widest_concat(m) <= 64);
  assert_int_equal(pt_count(m, KILN_OP_CONCATENATE), want_concats);
  kiln_hlo_module_destroy(m);
  if (host) {
    m = pt_parse(text);
    assert_true(dx_host_run_matches(m, "concatenate"));
    kiln_hlo_module_destroy(m);
  }
  kiln_free(text);
}

static void test_150_parameters_split_and_run(void **state) {
  check(150, "f32[4,3]", "f32[4,450]", 1, 4, true); /* 3 groups of 50 and the outer one */
}

static void test_5000_operands_nest_three_levels(void **state) {
  /* 5,000 > 64 * 64: 64 groups of 78-79 operands, each split in two, then the outer one */
  check(5000, "s32[1,2]", "s32[5000,2]", 0, 1 + 64 + 128, false);
}

static void test_non_default_layout_keeps_the_result_layout(void **state) {
  char *text = concat_text(70, "f32[3,2]{0,1}", "f32[210,2]{0,1}", 0);
  kiln_hlo_module_t *m = pt_run_same_results(text, "concat_splitter");
  assert_true(widest_concat(m) <= 64);
  pt_expect_text(m, "f32[210,2]{0,1} concatenate(", true);
  kiln_hlo_module_destroy(m);
  m = pt_parse(text);
  assert_true(dx_host_run_matches(m, "column-major concatenate"));
  kiln_hlo_module_destroy(m);
  kiln_free(text);
}

static void test_64_operands_are_left_alone(void **state) {
  char *text = concat_text(64, "f32[2]", "f32[128]", 0);
  kiln_hlo_module_t *m = pt_parse(text);
  pt_run(m, "concat_splitter");
  assert_int_equal(pt_count(m, KILN_OP_CONCATENATE), 1);
  assert_int_equal(widest_concat(m), 64);
  kiln_hlo_module_destroy(m);
  kiln_free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_150_parameters_split_and_run),
      cmocka_unit_test(test_5000_operands_nest_three_levels),
      cmocka_unit_test(test_non_default_layout_keeps_the_result_layout),
      cmocka_unit_test(test_64_operands_are_left_alone),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
