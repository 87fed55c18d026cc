/* Domains of indexing maps: emptiness, sound bounds, brute-force enumeration and the
 * bijection test. */
#include <inttypes.h>

#include "tests/indexing_test_util.h"

static kiln_interval_t bounds_of(kiln_affine_ctx_t *ctx, kiln_indexing_map_t *m, const char *expr) {
  kiln_affine_expr_t *e = NULL;
  kiln_status st = kiln_affine_parse(ctx, expr, &e);
  if (st) {
    fprintf(stderr, "%s\n", kiln_status_message(st));
    kiln_status_free(st);
    fail();
  }
  return kiln_indexing_map_bounds(m, e);
}

#define ASSERT_BOUNDS(ctx, m, expr, lo_, hi_)          \
  do {                                                 \
    kiln_interval_t b_ = bounds_of(ctx, m, expr);      \
    assert_int_equal(b_.lo, (lo_));                    \
    assert_int_equal(b_.hi, (hi_));                    \
  } while (0)

static void test_bounds_follow_interval_arithmetic(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(ctx, "(d0, d1)[s0] -> (), domain: d0 in [-5, 3], d1 in [0, 9], s0 in [2, 4]");
  ASSERT_BOUNDS(ctx, m, "d0 + d1 * 2 - 1", -6, 20);
  ASSERT_BOUNDS(ctx, m, "d0 * -3", -9, 15);
  ASSERT_BOUNDS(ctx, m, "d0 floordiv 4", -2, 0);
  ASSERT_BOUNDS(ctx, m, "d0 ceildiv 4", -1, 1);
  ASSERT_BOUNDS(ctx, m, "d0 mod 8", 0, 7);
  ASSERT_BOUNDS(ctx, m, "d1 mod 16", 0, 9);
  ASSERT_BOUNDS(ctx, m, "(d1 + 16) mod 16", 0, 9);
  ASSERT_BOUNDS(ctx, m, "d0 * d1", -45, 27);
  ASSERT_BOUNDS(ctx, m, "d1 floordiv s0", 0, 4);
  ASSERT_BOUNDS(ctx, m, "d1 mod s0", 0, 3);
  ASSERT_BOUNDS(ctx, m, "min(d0, d1)", -5, 3);
  ASSERT_BOUNDS(ctx, m, "max(d0, d1 - 20)", -5, 3);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

static void test_bounds_of_unbounded_variables_are_unbounded(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(ctx, "(d0, d1) -> (), domain: d1 in [0, 9]");
  kiln_interval_t b = bounds_of(ctx, m, "d0 + d1");
  assert_true(kiln_interval_is_full(b));
  ASSERT_BOUNDS(ctx, m, "d0 mod 4 + d1", 0, 12);
  b = bounds_of(ctx, m, "d0 floordiv d1");
  assert_true(kiln_interval_is_full(b));
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

static void test_bounds_saturate_instead_of_overflowing(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(ctx, "(d0) -> (), domain: d0 in [0, 4611686018427387904]");
  kiln_interval_t b = bounds_of(ctx, m, "d0 * 4");
  assert_int_equal(b.lo, 0);
  assert_int_equal(b.hi, INT64_MAX);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

static void test_constraint_narrows_bounds_of_its_expression(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(ctx, "(d0) -> (), domain: d0 in [0, 63], d0 mod 8 in [2, 3]");
  ASSERT_BOUNDS(ctx, m, "d0 mod 8", 2, 3);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

static void test_empty_variable_interval_is_known_empty(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(ctx, "(d0)[s0] -> (d0), domain: d0 in [0, 3], s0 in [5, 4]");
  assert_true(kiln_indexing_map_check_empty(m));
  assert_true(m->known_empty);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

static void test_unsatisfiable_constraint_is_known_empty(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(ctx, "(d0) -> (d0), domain: d0 in [0, 31], d0 mod 8 in [8, 9]");
  assert_true(kiln_indexing_map_check_empty(m));
  kiln_indexing_map_free(m);
  m = idx_parse(ctx, "(d0, d1) -> (d0), domain: d0 in [0, 3], d1 in [0, 3], d0 + d1 in [0, 1], d0 - d1 in [2, 3]");
  assert_false(kiln_indexing_map_check_empty(m)); /* each constraint alone is satisfiable */
  kiln_indexing_map_simplify(m);
  assert_true(m->known_empty); /* narrowing d0, d1 from the first refutes the second */
  kiln_indexing_map_free(m);
  m = idx_parse(ctx, "(d0) -> (d0), domain: d0 in [0, 3], d0 * 2 in [3, 3]");
  assert_false(kiln_indexing_map_check_empty(m));
  kiln_indexing_map_simplify(m); /* no integer d0 has 2 * d0 == 3 */
  assert_true(m->known_empty);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

static void test_satisfiable_domain_is_not_reported_empty(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(ctx, "(d0, d1) -> (d0), domain: d0 in [0, 3], d1 in [0, 3], d0 * 4 + d1 in [15, 20]");
  kiln_indexing_map_simplify(m);
  assert_false(m->known_empty);
  idx_assert_prints(m, "(d0, d1) -> (d0), domain: d0 in [3, 3], d1 in [3, 3]");
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

static bool count_points(void *user, const int64_t *d, const int64_t *s, const int64_t *rt, const int64_t *res) {
  (*(uint64_t *)user)++;
  return true;
}

static void test_enumeration_skips_points_violating_constraints(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(ctx, "(d0)[s0] -> (d0 + s0), domain: d0 in [0, 31], s0 in [0, 3], d0 mod 8 in [0, 0]");
  uint64_t n = 0;
  assert_null(kiln_indexing_map_for_each_point(m, 1000, count_points, &n));
  assert_int_equal(n, 4 * 4);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

static void test_enumeration_refuses_unbounded_or_huge_domains(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(ctx, "(d0, d1) -> (d0), domain: d0 in [0, 9]");
  uint64_t n = 0;
  kiln_status st = kiln_indexing_map_for_each_point(m, 1000, count_points, &n);
  assert_int_equal(kiln_status_code(st), KILN_OUT_OF_RANGE);
  kiln_status_free(st);
  kiln_indexing_map_free(m);
  m = idx_parse(ctx, "(d0, d1) -> (d0), domain: d0 in [0, 999999], d1 in [0, 999999]");
  st = kiln_indexing_map_for_each_point(m, 1000000, count_points, &n);
  assert_int_equal(kiln_status_code(st), KILN_OUT_OF_RANGE);
  kiln_status_free(st);
  assert_int_equal(n, 0);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

static bool is_bijection(const char *text, const int64_t *sizes) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(ctx, text);
  bool out = false;
  kiln_status st = kiln_indexing_map_is_bijection_brute(m, sizes, 1 << 20, &out);
  assert_null(st);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
  return out;
}

static void test_bijection_brute_force(void **state) {
  assert_true(is_bijection("(d0, d1) -> (d1, d0), domain: d0 in [0, 3], d1 in [0, 5]", (int64_t[]){6, 4}));
  assert_true(is_bijection("(d0)[s0] -> (d0 * 4 + s0), domain: d0 in [0, 7], s0 in [0, 3]", (int64_t[]){32}));
  assert_true(is_bijection("(d0) -> (d0 floordiv 6, d0 mod 6), domain: d0 in [0, 23]", (int64_t[]){4, 6}));
  /* Not injective. */
  assert_false(is_bijection("(d0) -> (d0 floordiv 2), domain: d0 in [0, 7]", (int64_t[]){4}));
  /* Not surjective. */
  assert_false(is_bijection("(d0) -> (d0 * 2), domain: d0 in [0, 7]", (int64_t[]){16}));
  /* Out of the codomain. */
  assert_false(is_bijection("(d0) -> (d0 + 1), domain: d0 in [0, 7]", (int64_t[]){8}));
  /* Constraints remove points: a bijection onto the even half. */
  assert_true(is_bijection("(d0) -> (d0 floordiv 2), domain: d0 in [0, 7], d0 mod 2 in [0, 0]", (int64_t[]){4}));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bounds_follow_interval_arithmetic),
      cmocka_unit_test(test_bounds_of_unbounded_variables_are_unbounded),
      cmocka_unit_test(test_bounds_saturate_instead_of_overflowing),
      cmocka_unit_test(test_constraint_narrows_bounds_of_its_expression),
      cmocka_unit_test(test_empty_variable_interval_is_known_empty),
      cmocka_unit_test(test_unsatisfiable_constraint_is_known_empty),
      cmocka_unit_test(test_satisfiable_domain_is_not_reported_empty),
      cmocka_unit_test(test_enumeration_skips_points_violating_constraints),
      cmocka_unit_test(test_enumeration_refuses_unbounded_or_huge_domains),
      cmocka_unit_test(test_bijection_brute_force),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
