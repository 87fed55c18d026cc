/* Tests for output summaries (tools/common/run_report.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/hlo/literal.h"
#include "compiler/hlo/shape.h"
#include "tools/common/run_report.h"

static kiln_literal_t *vector(kiln_arena_t *a, kiln_elem_type_t t, int64_t n) {
  return kiln_literal_make(a, kiln_shape_make_array(a, t, 1, &n));
}

static void test_run_report_sums_values_and_counts_nan_and_inf_apart(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  static const kiln_elem_type_t types[] = {KILN_F32, KILN_BF16, KILN_F64, KILN_F16};
  for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
    kiln_literal_t *l = vector(&a, types[k], 6);
    const double v[6] = {1.5, -0.25, NAN, INFINITY, -INFINITY, 2.0};
    for (int i = 0; i < 6; i++) kiln_literal_set_f64(l, i, v[i]);
    kiln_run_report_summary_t s;
    kiln_run_report_summarize(l, &s);
    assert_int_equal(s.num_elements, 6);
    assert_true(s.sum == 3.25);
    assert_int_equal(s.nan_count, 1);
    assert_int_equal(s.inf_count, 2);
    assert_true(s.fnv1a == kiln_hash_bytes(l->data, 6 * kiln_elem_type_storage_bytes(types[k])));
  }
  kiln_literal_t *u = vector(&a, KILN_U64, 2);
  kiln_literal_set_u64(u, 0, UINT64_C(1) << 63);
  kiln_literal_set_u64(u, 1, 1);
  kiln_run_report_summary_t s;
  kiln_run_report_summarize(u, &s);
  assert_true(s.sum == 9223372036854775808.0 + 1.0);
  kiln_literal_t *c = vector(&a, KILN_C64, 2);
  kiln_literal_set_c128(c, 0, 1, -2);
  kiln_literal_set_c128(c, 1, 0.5, NAN);
  kiln_run_report_summarize(c, &s);
  assert_true(s.sum == 1.5 && s.sum_imag == -2);
  assert_int_equal(s.nan_count, 1);
  kiln_arena_destroy(&a);
}

static void test_run_report_flattens_nested_tuples_depth_first(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  int64_t two = 2;
  kiln_shape_t *f = kiln_shape_make_array(&a, KILN_F32, 1, &two);
  kiln_shape_t *s = kiln_shape_make_scalar(&a, KILN_S32);
  kiln_shape_t *inner_elems[2] = {s, f};
  kiln_shape_t *inner = kiln_shape_make_tuple(&a, 2, inner_elems);
  kiln_shape_t *outer_elems[3] = {f, inner, s};
  kiln_literal_t *l = kiln_literal_make(&a, kiln_shape_make_tuple(&a, 3, outer_elems));
  assert_int_equal(kiln_run_report_num_leaves(l), 4);
  assert_ptr_equal(kiln_run_report_leaf(l, 0), l->tuple_elements[0]);
  assert_ptr_equal(kiln_run_report_leaf(l, 1), l->tuple_elements[1]->tuple_elements[0]);
  assert_ptr_equal(kiln_run_report_leaf(l, 2), l->tuple_elements[1]->tuple_elements[1]);
  assert_ptr_equal(kiln_run_report_leaf(l, 3), l->tuple_elements[2]);
  assert_null(kiln_run_report_leaf(l, 4));
  assert_null(kiln_run_report_leaf(l, -1));
  kiln_literal_t *arr = kiln_literal_make(&a, f);
  assert_int_equal(kiln_run_report_num_leaves(arr), 1);
  assert_ptr_equal(kiln_run_report_leaf(arr, 0), arr);
  kiln_arena_destroy(&a);
}

static void test_run_report_line_shows_shape_first_values_and_checksums(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  kiln_literal_t *l = vector(&a, KILN_S32, 5);
  for (int i = 0; i < 5; i++) kiln_literal_set_s64(l, i, i - 2);
  kiln_strbuf_t b = {0};
  kiln_run_report_print_leaf(&b, "out0", l, 3);
  kiln_run_report_summary_t s;
  kiln_run_report_summarize(l, &s);
  char want[160];
  snprintf(want, sizeof want, "out0 s32[5] {-2, -1, 0, ...} sum=0 fnv1a=0x%016llx\n",
           (unsigned long long)s.fnv1a);
  assert_string_equal(kiln_strbuf_cstr(&b), want);
  kiln_strbuf_free(&b);
  kiln_literal_t *p = vector(&a, KILN_PRED, 2);
  kiln_literal_set_u64(p, 1, 1);
  kiln_run_report_print_leaf(&b, "x", p, 8);
  assert_non_null(strstr(kiln_strbuf_cstr(&b), "x pred[2] {false, true} sum=1 "));
  kiln_strbuf_free(&b);
  kiln_literal_t *f = vector(&a, KILN_F32, 1);
  kiln_literal_set_f64(f, 0, NAN);
  kiln_run_report_print_leaf(&b, "y", f, 8);
  assert_non_null(strstr(kiln_strbuf_cstr(&b), "y f32[1] {nan} sum=0 nan=1 fnv1a=0x"));
  kiln_strbuf_free(&b);
  kiln_arena_destroy(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_run_report_sums_values_and_counts_nan_and_inf_apart),
      cmocka_unit_test(test_run_report_flattens_nested_tuples_depth_first),
      cmocka_unit_test(test_run_report_line_shows_shape_first_values_and_checksums),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
