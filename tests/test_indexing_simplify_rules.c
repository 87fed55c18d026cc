/* Each simplification rule of the indexing-map simplifier, stated as input and expected
 * output text. */
#include "tests/indexing_test_util.h"

static void test_mod_of_sum_drops_multiples_of_modulus(void **state) {
  idx_assert_simplifies_to("(d0, d1) -> ((d0 * 8 + d1) mod 8), domain: d0 in [0, 100], d1 in [0, 100]",
                           "(d0, d1) -> (d1 mod 8), domain: d0 in [0, 100], d1 in [0, 100]");
}

static void test_mod_reduces_coefficients_and_constants(void **state) {
  idx_assert_simplifies_to("(d0) -> ((d0 * 6 + 11) mod 4)", "(d0) -> ((d0 * 2 + 3) mod 4)");
}

static void test_mod_of_value_below_modulus_is_the_value(void **state) {
  idx_assert_simplifies_to("(d0) -> (d0 mod 16), domain: d0 in [0, 15]",
                           "(d0) -> (d0), domain: d0 in [0, 15]");
}

static void test_mod_within_one_period_subtracts_the_period_start(void **state) {
  idx_assert_simplifies_to("(d0) -> (d0 mod 16), domain: d0 in [16, 31]",
                           "(d0) -> (d0 - 16), domain: d0 in [16, 31]");
}

static void test_mod_is_kept_when_the_value_can_wrap(void **state) {
  idx_assert_simplifies_to("(d0) -> (d0 mod 16), domain: d0 in [0, 16]",
                           "(d0) -> (d0 mod 16), domain: d0 in [0, 16]");
}

static void test_floordiv_of_mod_becomes_mod_of_floordiv(void **state) {
  idx_assert_simplifies_to("(d0) -> ((d0 mod 64) floordiv 8), domain: d0 in [0, 1000]",
                           "(d0) -> ((d0 floordiv 8) mod 8), domain: d0 in [0, 1000]");
}

static void test_nested_floordiv_multiplies_divisors(void **state) {
  idx_assert_simplifies_to("(d0) -> ((d0 floordiv 4) floordiv 8)", "(d0) -> (d0 floordiv 32)");
}

static void test_nested_mod_by_divisor_of_outer_keeps_inner_modulus(void **state) {
  idx_assert_simplifies_to("(d0) -> ((d0 mod 12) mod 4)", "(d0) -> (d0 mod 4)");
}

static void test_floordiv_pulls_out_divisible_summands_and_constant(void **state) {
  idx_assert_simplifies_to("(d0, d1) -> ((d0 * 16 + d1 + 35) floordiv 8), domain: d1 in [0, 100]",
                           "(d0, d1) -> ((d1 + 3) floordiv 8 + d0 * 2 + 4), domain: d1 in [0, 100]");
}

static void test_floordiv_drops_summand_too_small_to_change_quotient(void **state) {
  idx_assert_simplifies_to(
      "(d0, d1) -> ((d0 * 8 + d1) floordiv 8), domain: d0 in [0, 10], d1 in [0, 7]",
      "(d0, d1) -> (d0), domain: d0 in [0, 10], d1 in [0, 7]");
}

static void test_floordiv_keeps_summand_that_can_carry(void **state) {
  idx_assert_simplifies_to(
      "(d0, d1) -> ((d0 * 8 + d1) floordiv 8), domain: d0 in [0, 10], d1 in [0, 8]",
      "(d0, d1) -> (d1 floordiv 8 + d0), domain: d0 in [0, 10], d1 in [0, 8]");
}

static void test_floordiv_by_larger_divisor_with_small_remainder_terms(void **state) {
  idx_assert_simplifies_to(
      "(d0, d1)[s0] -> ((d1 * 512 + d0 * 4 + s0) floordiv 2097152), domain: d0 in [0, 127], "
      "d1 in [0, 24575], s0 in [0, 3]",
      "(d0, d1)[s0] -> (d1 floordiv 4096), domain: d0 in [0, 127], d1 in [0, 24575], s0 in [0, 3]");
}

static void test_mod_by_multiple_of_coefficient_keeps_small_terms(void **state) {
  idx_assert_simplifies_to(
      "(d0, d1)[s0] -> ((d1 * 512 + d0 * 4 + s0) mod 4096), domain: d0 in [0, 127], "
      "d1 in [0, 24575], s0 in [0, 3]",
      "(d0, d1)[s0] -> ((d1 mod 8) * 512 + d0 * 4 + s0), domain: d0 in [0, 127], "
      "d1 in [0, 24575], s0 in [0, 3]");
}

static void test_common_factor_is_divided_out_of_floordiv_and_mod(void **state) {
  idx_assert_simplifies_to(
      "(d0, d1) -> ((d0 * 6 + d1 * 4) floordiv 8, (d0 * 6 + d1 * 4) mod 8), domain: d0 in [0, 100], "
      "d1 in [0, 100]",
      "(d0, d1) -> ((d0 * 3 + d1 * 2) floordiv 4, ((d0 * 3 + d1 * 2) mod 4) * 2), domain: "
      "d0 in [0, 100], d1 in [0, 100]");
}

static void test_mod_and_floordiv_pair_recombines(void **state) {
  idx_assert_simplifies_to("(d0) -> ((d0 mod 4) * 2 + (d0 floordiv 4) * 8)", "(d0) -> (d0 * 2)");
}

static void test_delinearized_three_way_split_recombines(void **state) {
  idx_assert_simplifies_to(
      "(d0) -> (((d0 floordiv 4) mod 8) * 4 + (d0 floordiv 32) * 32 + d0 mod 4)", "(d0) -> (d0)");
}

static void test_recombination_needs_matching_coefficients(void **state) {
  idx_assert_simplifies_to("(d0) -> ((d0 mod 4) * 2 + (d0 floordiv 4) * 4)",
                           "(d0) -> ((d0 floordiv 4) * 4 + (d0 mod 4) * 2)");
}

static void test_constants_fold(void **state) {
  idx_assert_simplifies_to("() -> (3 * 4 + 7 floordiv 2 - 10 mod 3, -7 floordiv 2, -7 mod 2, 7 ceildiv 2)",
                           "() -> (14, -4, 1, 4)");
}

static void test_sum_terms_are_merged_and_ordered(void **state) {
  idx_assert_simplifies_to("(d0, d1)[s0] -> (s0 + 3 + d1 * 2 + d0 - 1 + d0 + d1 floordiv 2)",
                           "(d0, d1)[s0] -> (d1 floordiv 2 + d0 * 2 + d1 * 2 + s0 + 2)");
}

static void test_terms_that_cancel_disappear(void **state) {
  idx_assert_simplifies_to("(d0, d1) -> (d0 + d1 - d0, d1 * 3 - d1 * 3)", "(d0, d1) -> (d1, 0)");
}

static void test_ceildiv_pulls_out_divisible_summands(void **state) {
  idx_assert_simplifies_to("(d0, d1) -> ((d0 * 4 + d1) ceildiv 4), domain: d1 in [0, 100]",
                           "(d0, d1) -> (d1 ceildiv 4 + d0), domain: d1 in [0, 100]");
}

static void test_expression_with_single_value_becomes_constant(void **state) {
  idx_assert_simplifies_to("(d0, d1) -> (d0 floordiv 16 + d1), domain: d0 in [0, 15], d1 in [3, 3]",
                           "(d0, d1) -> (3), domain: d0 in [0, 15], d1 in [3, 3]");
}

static void test_min_and_max_drop_operands_never_selected(void **state) {
  idx_assert_simplifies_to(
      "(d0, d1) -> (min(d0, d1 + 10), max(d0, d1 + 10), min(d0, d1)), domain: d0 in [0, 9], d1 in [0, 5]",
      "(d0, d1) -> (d0, d1 + 10, min(d0, d1)), domain: d0 in [0, 9], d1 in [0, 5]");
}

static void test_constraint_constant_moves_across_and_tightens_interval(void **state) {
  idx_assert_simplifies_to("(d0) -> (d0), domain: d0 in [0, 10], d0 + 5 in [5, 10]",
                           "(d0) -> (d0), domain: d0 in [0, 5]");
}

static void test_linear_constraint_common_factor_is_divided_out_and_narrows_variables(void **state) {
  idx_assert_simplifies_to("(d0, d1) -> (d0), domain: d0 in [0, 10], d1 in [0, 10], d0 * 4 + d1 * 2 in [1, 13]",
                           "(d0, d1) -> (d0), domain: d0 in [0, 3], d1 in [0, 6], d0 * 2 + d1 in [1, 6]");
}

static void test_constraint_negated_variable_is_flipped(void **state) {
  idx_assert_simplifies_to("(d0) -> (d0), domain: d0 in [0, 10], -d0 in [-2, 0]",
                           "(d0) -> (d0), domain: d0 in [0, 2]");
}

static void test_always_true_constraint_is_removed(void **state) {
  idx_assert_simplifies_to("(d0, d1) -> (d0), domain: d0 in [0, 10], d1 in [0, 10], d0 + d1 in [0, 100]",
                           "(d0, d1) -> (d0), domain: d0 in [0, 10], d1 in [0, 10]");
}

static void test_contradicting_constraint_makes_map_known_empty(void **state) {
  idx_assert_simplifies_to("(d0, d1) -> (d0), domain: d0 in [0, 10], d1 in [0, 10], d0 + d1 in [30, 40]",
                           "(d0, d1) -> (d0), domain: KNOWN EMPTY");
}

static void test_duplicate_constraints_are_intersected(void **state) {
  idx_assert_simplifies_to(
      "(d0, d1) -> (d0), domain: d0 in [0, 10], d1 in [0, 10], d0 mod 4 + d1 in [0, 8], d1 + d0 mod 4 in [2, 20]",
      "(d0, d1) -> (d0), domain: d0 in [0, 10], d1 in [0, 10], d0 mod 4 + d1 in [2, 8]");
}

static void test_constraint_simplifies_results(void **state) {
  idx_assert_simplifies_to("(d0) -> (d0 mod 8 + d0), domain: d0 in [0, 31], d0 mod 8 in [0, 0]",
                           "(d0) -> (d0), domain: d0 in [0, 31], d0 mod 8 in [0, 0]");
}

static void test_simplify_reaches_fixed_point(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(
      ctx, "(d0, d1)[s0] -> (((d1 * 512 + d0 * 4 + s0) floordiv 4096) mod 512, (d0 * 8 + 3) mod 8), "
           "domain: d0 in [0, 127], d1 in [0, 24575], s0 in [0, 3], d0 + 1 in [1, 100]");
  assert_true(kiln_indexing_map_simplify(m));
  char *once = kiln_indexing_map_to_string(m);
  assert_false(kiln_indexing_map_simplify(m));
  idx_assert_prints(m, once);
  kiln_free(once);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mod_of_sum_drops_multiples_of_modulus),
      cmocka_unit_test(test_mod_reduces_coefficients_and_constants),
      cmocka_unit_test(test_mod_of_value_below_modulus_is_the_value),
      cmocka_unit_test(test_mod_within_one_period_subtracts_the_period_start),
      cmocka_unit_test(test_mod_is_kept_when_the_value_can_wrap),
      cmocka_unit_test(test_floordiv_of_mod_becomes_mod_of_floordiv),
      cmocka_unit_test(test_nested_floordiv_multiplies_divisors),
      cmocka_unit_test(test_nested_mod_by_divisor_of_outer_keeps_inner_modulus),
      cmocka_unit_test(test_floordiv_pulls_out_divisible_summands_and_constant),
      cmocka_unit_test(test_floordiv_drops_summand_too_small_to_change_quotient),
      cmocka_unit_test(test_floordiv_keeps_summand_that_can_carry),
      cmocka_unit_test(test_floordiv_by_larger_divisor_with_small_remainder_terms),
      cmocka_unit_test(test_mod_by_multiple_of_coefficient_keeps_small_terms),
      cmocka_unit_test(test_common_factor_is_divided_out_of_floordiv_and_mod),
      cmocka_unit_test(test_mod_and_floordiv_pair_recombines),
      cmocka_unit_test(test_delinearized_three_way_split_recombines),
      cmocka_unit_test(test_recombination_needs_matching_coefficients),
      cmocka_unit_test(test_constants_fold),
      cmocka_unit_test(test_sum_terms_are_merged_and_ordered),
      cmocka_unit_test(test_terms_that_cancel_disappear),
      cmocka_unit_test(test_ceildiv_pulls_out_divisible_summands),
      cmocka_unit_test(test_expression_with_single_value_becomes_constant),
      cmocka_unit_test(test_min_and_max_drop_operands_never_selected),
      cmocka_unit_test(test_constraint_constant_moves_across_and_tightens_interval),
      cmocka_unit_test(test_linear_constraint_common_factor_is_divided_out_and_narrows_variables),
      cmocka_unit_test(test_constraint_negated_variable_is_flipped),
      cmocka_unit_test(test_always_true_constraint_is_removed),
      cmocka_unit_test(test_contradicting_constraint_makes_map_known_empty),
      cmocka_unit_test(test_duplicate_constraints_are_intersected),
      cmocka_unit_test(test_constraint_simplifies_results),
      cmocka_unit_test(test_simplify_reaches_fixed_point),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
