/* Text form of indexing maps: canonical printing, round trips, names, runtime vars and
 * error messages; malformed input never crashes. */
#include <stdlib.h>

#include "tests/indexing_test_util.h"

static void assert_round_trip(const char *text) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(ctx, text);
  idx_assert_prints(m, text);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

static void assert_parses_as(const char *text, const char *canonical) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(ctx, text);
  idx_assert_prints(m, canonical);
  /* parse(print(m)) prints the same. */
  kiln_indexing_map_t *again = idx_parse(ctx, canonical);
  idx_assert_prints(again, canonical);
  kiln_indexing_map_free(again);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

static void assert_parse_error(const char *text, const char *message) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = (kiln_indexing_map_t *)1;
  kiln_status st = kiln_indexing_map_parse(ctx, text, &m);
  assert_non_null(st);
  assert_null(m);
  assert_int_equal(kiln_status_code(st), KILN_INVALID_ARGUMENT);
  if (strcmp(kiln_status_message(st), message) != 0) {
    fprintf(stderr, "input:    %s\nexpected: %s\n  actual: %s\n", text, message, kiln_status_message(st));
    kiln_status_free(st);
    fail();
  }
  kiln_status_free(st);
  kiln_affine_ctx_destroy(ctx);
}

static void test_design_doc_example_round_trips(void **state) {
  assert_round_trip(
      "(d0, d1)[s0] -> (d1, d0 floordiv 8 + s0), domain: d0 in [0, 31], d1 in [0, 7], s0 in [0, 3], "
      "d0 mod 8 in [0, 0]");
}

static void test_named_dims_are_kept_for_printing(void **state) {
  assert_round_trip(
      "(th_x, bl_x)[vector_index] -> (bl_x floordiv 4096, (bl_x floordiv 8) mod 512, "
      "(bl_x mod 8) * 512 + th_x * 4 + vector_index), domain: th_x in [0, 127], bl_x in [0, 24575], "
      "vector_index in [0, 3]");
}

static void test_runtime_vars_follow_symbols(void **state) {
  assert_round_trip("(d0)[s0]{rt0} -> (d0 + rt0 * 2, s0), domain: d0 in [0, 9], s0 in [0, 1], rt0 in [0, 100]");
  assert_round_trip("(d0){rt0, rt1} -> (d0 + rt1), domain: rt0 in [0, 3]");
}

static void test_map_without_domain_has_unbounded_vars(void **state) {
  assert_round_trip("(d0, d1) -> (d1, d0)");
  assert_round_trip("() -> (42)");
  assert_round_trip("(d0) -> ()");
}

static void test_sum_terms_print_in_canonical_order(void **state) {
  /* Non-variable terms first, then dims, symbols, runtime vars by index, constant last. */
  assert_parses_as("(d0, d1)[s0] -> (7 + s0 + d1 * 512 + d0 * 4 + (d1 mod 8) * 3)",
                   "(d0, d1)[s0] -> ((d1 mod 8) * 3 + d0 * 4 + d1 * 512 + s0 + 7)");
}

static void test_negative_terms_print_as_subtraction(void **state) {
  assert_parses_as("(d0, d1) -> (d0 + d1 * -3 + -2, -d0 + d1, 0 - d0 * 5, -(d0 floordiv 2))",
                   "(d0, d1) -> (d0 - d1 * 3 - 2, -d0 + d1, d0 * -5, -(d0 floordiv 2))");
}

static void test_nested_operations_get_parentheses(void **state) {
  assert_round_trip("(d0, d1) -> ((d0 + 1) floordiv 2, (d0 floordiv 2) mod 4, (d0 * d1) * 3, d0 ceildiv (d1 + 1))");
}

static void test_min_max_print_as_calls(void **state) {
  assert_parses_as("(d0, d1) -> (min(d1, d0, 4, 7), max(d0 + 1, d1))",
                   "(d0, d1) -> (min(d0, d1, 4), max(d0 + 1, d1))");
}

static void test_constraints_print_sorted(void **state) {
  assert_parses_as("(d0, d1) -> (d0), domain: d1 mod 4 in [0, 1], d0 in [0, 9], d0 mod 4 in [1, 1]",
                   "(d0, d1) -> (d0), domain: d0 in [0, 9], d0 mod 4 in [1, 1], d1 mod 4 in [0, 1]");
}

static void test_single_variable_constraints_fold_into_intervals(void **state) {
  assert_parses_as("(d0) -> (d0), domain: d0 in [0, 9], d0 in [3, 20]", "(d0) -> (d0), domain: d0 in [3, 9]");
}

static void test_extreme_integers_round_trip(void **state) {
  assert_round_trip("(d0) -> (d0 + 9223372036854775807, -9223372036854775808), domain: d0 in [-9223372036854775808, 0]");
}

static void test_known_empty_round_trips(void **state) {
  assert_round_trip("(d0)[s0] -> (d0 + s0), domain: KNOWN EMPTY");
}

static void test_whitespace_and_newlines_are_ignored(void **state) {
  assert_parses_as("(d0,d1)\n  ->(d1,\n d0),domain:d0 in[0,1],d1 in [0 ,2]",
                   "(d0, d1) -> (d1, d0), domain: d0 in [0, 1], d1 in [0, 2]");
}

static void test_clashing_names_fall_back_to_default_names(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(ctx, "(x)[y] -> (x + y)");
  assert_null(kiln_indexing_map_set_name(m, KILN_INDEXING_SYM, 0, "x"));
  idx_assert_prints(m, "(d0)[s0] -> (d0 + s0)");
  kiln_status st = kiln_indexing_map_set_name(m, KILN_INDEXING_DIM, 0, "mod");
  assert_int_equal(kiln_status_code(st), KILN_INVALID_ARGUMENT);
  kiln_status_free(st);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

static void test_expression_parser_uses_default_names(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_affine_expr_t *e = NULL, *f = NULL;
  assert_null(kiln_affine_parse(ctx, "s1 + d0 * 2 + rt3 - 1", &e));
  assert_string_equal(kiln_affine_to_string(ctx, e), "d0 * 2 + s1 + rt3 - 1");
  /* Hash-consing: the same structure is the same pointer. */
  assert_null(kiln_affine_parse(ctx, "rt3 + (s1 - 1) + 2 * d0", &f));
  assert_ptr_equal(e, f);
  kiln_affine_ctx_destroy(ctx);
}

static void test_parse_errors_say_where_and_what(void **state) {
  assert_parse_error("(d0, d1) -> (d0 +)", "1:18: expected an expression, found ')'");
  assert_parse_error("(d0) -> (x)", "1:10: expected a declared variable name, found 'x'");
  assert_parse_error("(d0,) -> (d0)", "1:5: expected a variable name, found ')'");
  assert_parse_error("(d0, d0) -> (d0)", "1:6: expected a variable name not used before, found 'd0'");
  assert_parse_error("(d0) (d0)", "1:6: expected '->', found '('");
  assert_parse_error("(d0) -> (d0), domain: d0 in [0 5]", "1:32: expected ',', found '5'");
  assert_parse_error("(d0) -> (d0), domain: d0 [0, 5]", "1:26: expected 'in', found '['");
  assert_parse_error("(d0) -> (d0), dom: d0 in [0, 5]", "1:15: expected 'domain', found 'dom'");
  assert_parse_error("(d0) -> (d0) junk", "1:14: expected ',', found 'junk'");
  assert_parse_error("(d0) -> (d0 # 2)", "1:13: expected ')', found '#'");
  assert_parse_error("(d0) -> (99999999999999999999)",
                     "1:10: expected integer in int64 range, found '99999999999999999999'");
  assert_parse_error("", "1:1: expected '(', found end of input");
  assert_parse_error("(d0) ->\n  (d0,\n   d0 mod)", "3:10: expected an expression, found ')'");
  assert_parse_error("(mod) -> (1)", "1:2: expected a variable name, found 'mod'");
}

static void test_deep_nesting_is_an_error_not_a_crash(void **state) {
  size_t n = 100000;
  char *text = kiln_malloc(2 * n + 32);
  strcpy(text, "(d0) -> (");
  size_t len = strlen(text);
  for (size_t i = 0; i < n; i++) text[len++] = '(';
  text[len++] = 'd';
  text[len++] = '0';
  for (size_t i = 0; i < n; i++) text[len++] = ')';
  text[len++] = ')';
  text[len] = 0;
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = NULL;
  kiln_status st = kiln_indexing_map_parse(ctx, text, &m);
  assert_non_null(st);
  assert_non_null(strstr(kiln_status_message(st), "expected less deeply nested input"));
  kiln_status_free(st);
  /* Unary minus chains too. */
  memset(text + 9, '-', n);
  strcpy(text + 9 + n, "d0)");
  st = kiln_indexing_map_parse(ctx, text, &m);
  assert_non_null(st);
  kiln_status_free(st);
  kiln_free(text);
  kiln_affine_ctx_destroy(ctx);
}

/* Mutated valid inputs: every result is either an error or a map that round-trips. */
static void test_mutated_inputs_never_crash(void **state) {
  static const char *const seeds[] = {
      "(d0, d1)[s0] -> (d1, d0 floordiv 8 + s0), domain: d0 in [0, 31], d1 in [0, 7], s0 in [0, 3], d0 mod 8 in [0, 0]",
      "(th_x, bl_x)[v]{rt0} -> (min(bl_x, 3) ceildiv 2, -(th_x * 4) + v - rt0), domain: th_x in [0, 127]",
      "(d0) -> (d0), domain: KNOWN EMPTY",
  };
  static const char kAlphabet[] = "()[]{},:+-*>0123456789dsrt_ \nmodfloordivceilminmaxindomain";
  idx_rng_t rng = {0xfeedfaceull};
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  int parsed = 0, rejected = 0;
  char buf[256];
  for (int iter = 0; iter < 20000; iter++) {
    const char *seed = seeds[iter % 3];
    size_t len = strlen(seed);
    memcpy(buf, seed, len + 1);
    int edits = (int)idx_rng_range(&rng, 1, 4);
    for (int e = 0; e < edits; e++) {
      size_t pos = (size_t)idx_rng_range(&rng, 0, (int64_t)len - 1);
      int kind = (int)idx_rng_range(&rng, 0, 2);
      char c = kAlphabet[idx_rng_range(&rng, 0, (int64_t)sizeof kAlphabet - 2)];
      if (kind == 0) {
        buf[pos] = c;
      } else if (kind == 1 && len > 1) {
        memmove(buf + pos, buf + pos + 1, len - pos);
        len--;
      } else if (len + 1 < sizeof buf) {
        memmove(buf + pos + 1, buf + pos, len - pos + 1);
        buf[pos] = c;
        len++;
      }
    }
    kiln_indexing_map_t *m = NULL;
    kiln_status st = kiln_indexing_map_parse(ctx, buf, &m);
    if (st) {
      assert_null(m);
      assert_int_equal(kiln_status_code(st), KILN_INVALID_ARGUMENT);
      kiln_status_free(st);
      rejected++;
      continue;
    }
    parsed++;
    char *text = kiln_indexing_map_to_string(m);
    kiln_indexing_map_t *again = idx_parse(ctx, text);
    idx_assert_prints(again, text);
    kiln_indexing_map_simplify(again);
    kiln_free(text);
    kiln_indexing_map_free(again);
    kiln_indexing_map_free(m);
  }
  printf("mutated inputs: %d parsed and round-tripped, %d rejected with an error\n", parsed, rejected);
  assert_true(parsed > 100 && rejected > 100);
  kiln_affine_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_design_doc_example_round_trips),
      cmocka_unit_test(test_named_dims_are_kept_for_printing),
      cmocka_unit_test(test_runtime_vars_follow_symbols),
      cmocka_unit_test(test_map_without_domain_has_unbounded_vars),
      cmocka_unit_test(test_sum_terms_print_in_canonical_order),
      cmocka_unit_test(test_negative_terms_print_as_subtraction),
      cmocka_unit_test(test_nested_operations_get_parentheses),
      cmocka_unit_test(test_min_max_print_as_calls),
      cmocka_unit_test(test_constraints_print_sorted),
      cmocka_unit_test(test_single_variable_constraints_fold_into_intervals),
      cmocka_unit_test(test_extreme_integers_round_trip),
      cmocka_unit_test(test_known_empty_round_trips),
      cmocka_unit_test(test_whitespace_and_newlines_are_ignored),
      cmocka_unit_test(test_clashing_names_fall_back_to_default_names),
      cmocka_unit_test(test_expression_parser_uses_default_names),
      cmocka_unit_test(test_parse_errors_say_where_and_what),
      cmocka_unit_test(test_deep_nesting_is_an_error_not_a_crash),
      cmocka_unit_test(test_mutated_inputs_never_crash),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
