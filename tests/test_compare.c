/* The one "close enough" rule (tools/common/compare.h) that the fusion runner and whole-module
 * comparisons share: what passes and what fails under the kernel and module tolerances. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "compiler/hlo/literal.h"
#include "compiler/hlo/shape.h"
#include "tools/common/compare.h"

typedef struct arrays {
  kiln_arena_t arena;
  kiln_literal_t *want, *got;
} arrays_t;

/* Two literals of `n` elements of type `t`, zeroed. */
static void arrays_init(arrays_t *a, kiln_elem_type_t t, int64_t n) {
  memset(a, 0, sizeof(*a));
  kiln_arena_init(&a->arena);
  kiln_shape_t *shape = kiln_shape_make_array_with_default_layout(&a->arena, t, 1, &n);
  a->want = kiln_literal_make(&a->arena, shape);
  a->got = kiln_literal_make(&a->arena, shape);
}

static int64_t mismatches(arrays_t *a, const kiln_tolerance_t *tol, kiln_compare_report_t *r) {
  memset(r, 0, sizeof(*r));
  kiln_compare_array(a->want, a->got->data, tol, "output 0", r);
  return r->mismatches;
}

static void test_kernel_tolerance_counts_ulps_of_f32(void **state) {
  (void)state;
  arrays_t a;
  arrays_init(&a, KILN_F32, 2);
  float w = 1.5f, g4 = w, g5 = w;
  for (int i = 0; i < 4; i++) g4 = nextafterf(g4, 2.0f);
  g5 = nextafterf(g4, 2.0f);
  kiln_literal_set_f64(a.want, 0, w);
  kiln_literal_set_f64(a.want, 1, -0.0);
  kiln_literal_set_f64(a.got, 0, g4);
  kiln_literal_set_f64(a.got, 1, 0.0); /* -0 and +0: 0 ulps */
  kiln_tolerance_t tol = kiln_compare_kernel_tolerance(KILN_F32);
  assert_int_equal(tol.max_ulp, 4);
  kiln_compare_report_t r;
  assert_int_equal(mismatches(&a, &tol, &r), 0);
  assert_int_equal(r.max_ulp, 4);
  kiln_literal_set_f64(a.got, 0, g5);
  assert_int_equal(mismatches(&a, &tol, &r), 1);
  assert_int_equal(r.max_ulp, 5);
  assert_non_null(strstr(r.first, "output 0 element 0: want 1.5, got"));
  /* The summation slack lets a tree-summed result through. */
  tol.atol = kiln_compare_summation_atol(KILN_F32, 1024, 1.5);
  assert_int_equal(mismatches(&a, &tol, &r), 0);
  kiln_arena_destroy(&a.arena);
}

static void test_nan_matches_only_nan_and_infinity_only_itself(void **state) {
  (void)state;
  arrays_t a;
  arrays_init(&a, KILN_F32, 3);
  kiln_literal_set_f64(a.want, 0, NAN);
  kiln_literal_set_f64(a.got, 0, NAN);
  kiln_literal_set_f64(a.want, 1, INFINITY);
  kiln_literal_set_f64(a.got, 1, INFINITY);
  kiln_tolerance_t loose = {.max_ulp = 1000, .rtol = 1, .atol = 1e30};
  kiln_compare_report_t r;
  assert_int_equal(mismatches(&a, &loose, &r), 0);
  kiln_literal_set_f64(a.got, 1, -INFINITY);
  kiln_literal_set_f64(a.got, 2, NAN);
  assert_int_equal(mismatches(&a, &loose, &r), 2);
  assert_int_equal(r.max_ulp, INT64_MAX);
  kiln_arena_destroy(&a.arena);
}

static void test_exact_types_compare_values(void **state) {
  (void)state;
  arrays_t a;
  arrays_init(&a, KILN_S4, 2);
  kiln_literal_set_s64(a.want, 0, -2);
  kiln_literal_set_s64(a.got, 0, -2);
  kiln_literal_set_s64(a.want, 1, 3);
  kiln_literal_set_s64(a.got, 1, 4);
  kiln_tolerance_t tol = kiln_compare_module_tolerance(KILN_S4, 4);
  assert_int_equal(tol.max_ulp, 0);
  assert_true(tol.rtol == 0 && tol.atol == 0);
  kiln_compare_report_t r;
  assert_int_equal(mismatches(&a, &tol, &r), 1);
  assert_string_equal(r.first, "output 0 element 1: want 3, got 4");
  kiln_arena_destroy(&a.arena);
}

static void test_module_tolerance_scales_with_the_largest_magnitude(void **state) {
  (void)state;
  arrays_t a;
  arrays_init(&a, KILN_F32, 2);
  kiln_literal_set_f64(a.want, 0, 1000);
  kiln_literal_set_f64(a.got, 0, 1000);
  kiln_literal_set_f64(a.want, 1, 0.001);
  kiln_literal_set_f64(a.got, 1, 0.006); /* off by 5e-3 <= 1e-5 * 1000 + 1e-4 * 0.001 */
  kiln_tolerance_t tol = kiln_compare_module_tolerance(KILN_F32, kiln_compare_magnitude(a.want));
  kiln_compare_report_t r;
  assert_int_equal(mismatches(&a, &tol, &r), 0);
  kiln_literal_set_f64(a.got, 1, 0.02); /* off by 2e-2: beyond */
  assert_int_equal(mismatches(&a, &tol, &r), 1);
  kiln_arena_destroy(&a.arena);
}

static void test_complex_parts_count_ulps_of_the_larger_part(void **state) {
  (void)state;
  arrays_t a;
  arrays_init(&a, KILN_C64, 1);
  /* The imaginary part is off by 2 ulps of the real part (1.0), far more of its own. */
  kiln_literal_set_c128(a.want, 0, 1.0, 1e-6);
  kiln_literal_set_c128(a.got, 0, 1.0, 1e-6 + 2 * 0x1p-23);
  kiln_tolerance_t tol = kiln_compare_kernel_tolerance(KILN_C64);
  kiln_compare_report_t r;
  assert_int_equal(mismatches(&a, &tol, &r), 0);
  assert_int_equal(r.max_ulp, 2);
  kiln_literal_set_c128(a.got, 0, 1.0, 1e-6 + 8 * 0x1p-23);
  assert_int_equal(mismatches(&a, &tol, &r), 1);
  assert_non_null(strstr(r.first, "want (1, "));
  kiln_arena_destroy(&a.arena);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kernel_tolerance_counts_ulps_of_f32),
      cmocka_unit_test(test_nan_matches_only_nan_and_infinity_only_itself),
      cmocka_unit_test(test_exact_types_compare_values),
      cmocka_unit_test(test_module_tolerance_scales_with_the_largest_magnitude),
      cmocka_unit_test(test_complex_parts_count_ulps_of_the_larger_part),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
