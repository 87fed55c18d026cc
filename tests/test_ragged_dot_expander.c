/* ragged_dot_expander: the three ragged-dot modes (ragged non-contracting with an rhs group
 * dimension, ragged contracting, ragged batch), with group sizes of rank 1 and per-batch
 * group sizes, rows in no group, empty groups and overlapping groups (negative sizes: an
 * index belongs to the first group holding it) evaluate like the original on the reference
 * evaluator and run on the host like it; forms the evaluator rejects are left alone; the
 * corpus ragged-dot modules keep their results through the expander and the pipeline and
 * match the evaluator on the host. */
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

#define LIST "ragged_dot_expander"

static double non_contracting(const char *sizes) {
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule r\n\nENTRY e {\n  a = f32[10,4] parameter(0)\n  b = f32[3,4,5] parameter(1)\n"
           "  g = s32[3] constant(%s)\n"
           "  ROOT d = f32[10,5] ragged-dot(a, b, g), lhs_contracting_dims={1}, rhs_contracting_dims={1}, "
           "lhs_ragged_dims={0}, rhs_group_dims={0}\n}\n",
           sizes);
  return dx_check_text(text, LIST, KILN_OP_RAGGED_DOT, true);
}

static void test_non_contracting_rows_take_their_groups_matrix(void **state) {
  double e = non_contracting("{3, 2, 5}");
  assert_true(e >= 0 && e <= 1);
  /* rows 7..9 in no group are zero; group 1 empty */
  e = non_contracting("{4, 0, 3}");
  assert_true(e >= 0 && e <= 1);
  /* a negative size makes groups 0 and 2 overlap: rows 2..3 stay in group 0 */
  e = non_contracting("{4, -2, 5}");
  assert_true(e >= 0 && e <= 1);
}

static void test_non_contracting_with_batch_and_per_batch_sizes(void **state) {
  const char *text =
      "HloModule r\n\nENTRY e {\n  a = f32[2,7,3] parameter(0)\n  b = f32[2,3,3,5] parameter(1)\n"
      "  g = s64[2,3] constant({ {2, 2, 3}, {0, 6, 1} })\n"
      "  ROOT d = f32[2,7,5] ragged-dot(a, b, g), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
      "rhs_batch_dims={0}, rhs_contracting_dims={2}, lhs_ragged_dims={1}, rhs_group_dims={1}\n}\n";
  double e = dx_check_text(text, LIST, KILN_OP_RAGGED_DOT, true);
  assert_true(e >= 0 && e <= 1);
}

static void test_contracting_mode_gives_one_product_per_group(void **state) {
  const char *text =
      "HloModule r\n\nENTRY e {\n  a = f32[6,12] parameter(0)\n  b = f32[12,5] parameter(1)\n"
      "  g = s32[3] constant({4, 5, 2})\n"
      "  ROOT d = f32[3,6,5] ragged-dot(a, b, g), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
      "lhs_ragged_dims={1}\n}\n";
  double e = dx_check_text(text, LIST, KILN_OP_RAGGED_DOT, true);
  assert_true(e >= 0 && e <= 1);
}

static void test_batch_mode_is_the_plain_dot(void **state) {
  const char *text =
      "HloModule r\n\nENTRY e {\n  a = f32[4,3,5] parameter(0)\n  b = f32[4,5,2] parameter(1)\n"
      "  g = s32[2] constant({1, 3})\n"
      "  ROOT d = f32[4,3,2] ragged-dot(a, b, g), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
      "rhs_batch_dims={0}, rhs_contracting_dims={1}, lhs_ragged_dims={0}\n}\n";
  double e = dx_check_text(text, LIST, KILN_OP_RAGGED_DOT, true);
  assert_true(e >= 0 && e <= 1);
}

static void test_missing_group_dim_is_left_alone(void **state) {
  kiln_hlo_module_t *m = pt_parse(
      "HloModule r\n\nENTRY e {\n  a = f32[10,4] parameter(0)\n  b = f32[3,4,5] parameter(1)\n"
      "  g = s32[3] parameter(2)\n"
      "  ROOT d = f32[3,10,5] ragged-dot(a, b, g), lhs_contracting_dims={1}, rhs_contracting_dims={1}, "
      "lhs_ragged_dims={0}\n}\n");
  pt_run(m, LIST);
  assert_int_equal(pt_count(m, KILN_OP_RAGGED_DOT), 1);
  kiln_hlo_module_destroy(m);
}

static void test_corpus_ragged_dots_match_on_the_host(void **state) {
  int n = dx_check_corpus_file("xla/xla__hlo__translate__hlo_to_mhlo__tests__ragged_dot.hlo", KILN_OP_RAGGED_DOT,
                               LIST);
  assert_int_equal(n, 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_non_contracting_rows_take_their_groups_matrix),
      cmocka_unit_test(test_non_contracting_with_batch_and_per_batch_sizes),
      cmocka_unit_test(test_contracting_mode_gives_one_product_per_group),
      cmocka_unit_test(test_batch_mode_is_the_plain_dot),
      cmocka_unit_test(test_missing_group_dim_is_left_alone),
      cmocka_unit_test(test_corpus_ragged_dots_match_on_the_host),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
