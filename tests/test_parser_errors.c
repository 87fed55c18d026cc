/* HLO text parser: every error a user will hit comes back as a status with the right
 * code, a message that names the problem and the file:line:col where it is, and leaves
 * nothing allocated (the ASan build checks for leaks). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "compiler/hlo/ir.h"

enum { kModule, kModules, kComputations };

/* Parses `text` as file "x.hlo" and checks the failure's code and exact message. */
static void expect_error_mode(int mode, const char *text, kiln_status_code_t code,
                              const char *message) {
  kiln_hlo_parse_options_t opts = {"x.hlo", 0};
  kiln_status st;
  kiln_hlo_module_t *m = (kiln_hlo_module_t *)1;
  kiln_hlo_module_t **mods = (kiln_hlo_module_t **)1;
  int n = -1;
  if (mode == kModule) {
    st = kiln_hlo_parse_module(text, strlen(text), &opts, &m);
    assert_null(m);
  } else if (mode == kModules) {
    st = kiln_hlo_parse_modules(text, strlen(text), &opts, &mods, &n);
    assert_null(mods);
    assert_int_equal(n, 0);
  } else {
    st = kiln_hlo_parse_computations(text, strlen(text), &opts, &m);
    assert_null(m);
  }
  assert_non_null(st);
  if (strcmp(kiln_status_message(st), message) != 0)
    fprintf(stderr, "got:      %s\nexpected: %s\n", kiln_status_message(st), message);
  assert_string_equal(kiln_status_message(st), message);
  assert_int_equal(kiln_status_code(st), code);
  kiln_status_free(st);
}

static void expect_error(const char *text, const char *message) {
  expect_error_mode(kModule, text, KILN_INVALID_ARGUMENT, message);
}

static void test_unknown_opcode_is_named_at_its_position(void **state) {
  expect_error("HloModule m\n"
               "\n"
               "ENTRY e {\n"
               "  p = f32[2] parameter(0)\n"
               "  ROOT a = f32[2] addd(p, p)\n"
               "}\n",
               "x.hlo:5:19: unknown opcode 'addd'");
}

static void test_bad_dimension_in_shape(void **state) {
  expect_error("HloModule m\nENTRY e {\n  p = f32[2,x] parameter(0)\n}\n",
               "x.hlo:3:13: expected dimension size, found 'x'");
}

static void test_unknown_element_type(void **state) {
  expect_error("HloModule m\nENTRY e {\n  p = f31[2] parameter(0)\n}\n",
               "x.hlo:3:7: unknown element type 'f31'");
}

static void test_undefined_operand_name(void **state) {
  expect_error("HloModule m\n"
               "ENTRY e {\n"
               "  p = f32[2] parameter(0)\n"
               "  ROOT a = f32[2] add(p, %q)\n"
               "}\n",
               "x.hlo:4:26: unknown operand 'q' of instruction 'a'");
}

static void test_undefined_control_predecessor(void **state) {
  expect_error("HloModule m\n"
               "ENTRY e {\n"
               "  p = f32[2] parameter(0)\n"
               "  ROOT a = f32[2] negate(p), control-predecessors={zz}\n"
               "}\n",
               "x.hlo:4:52: unknown control predecessor 'zz' of instruction 'a'");
}

static void test_unterminated_string(void **state) {
  expect_error("HloModule m\n"
               "ENTRY e {\n"
               "  p = f32[2] parameter(0)\n"
               "  ROOT c = f32[2] custom-call(p), custom_call_target=\"foo\n"
               "}\n",
               "x.hlo:4:54: unterminated string");
}

static void test_unterminated_string_in_raw_attribute(void **state) {
  expect_error("HloModule m\n"
               "ENTRY e {\n"
               "  ROOT p = f32[2] parameter(0), metadata={op_name=\"a\\\"b}\n"
               "}\n",
               "x.hlo:3:51: unterminated string");
}

static void test_unterminated_comment(void **state) {
  expect_error("HloModule m\nENTRY e {\n  /* never closed\n}\n", "x.hlo:3:3: unterminated comment");
}

static void test_layout_rank_mismatch(void **state) {
  expect_error("HloModule m\nENTRY e {\n  p = f32[2,3]{1,0,2} parameter(0)\n}\n",
               "x.hlo:3:15: layout {1,0,2} has 3 dimensions but shape f32[2,3] has rank 2");
}

static void test_layout_not_a_permutation(void **state) {
  expect_error("HloModule m\nENTRY e {\n  p = f32[2,3]{1,1} parameter(0)\n}\n",
               "x.hlo:3:15: layout {1,1} is not a permutation of the dimensions of f32[2,3]");
}

static void test_duplicate_instruction_name(void **state) {
  expect_error("HloModule m\n"
               "ENTRY e {\n"
               "  x = f32[] parameter(0)\n"
               "  x = f32[] negate(x)\n"
               "}\n",
               "x.hlo:4:3: duplicate instruction name 'x' (first defined at 3:3)");
}

static void test_duplicate_computation_name(void **state) {
  expect_error("HloModule m\n"
               "c {\n  ROOT p = f32[] parameter(0)\n}\n"
               "c {\n  ROOT p = f32[] parameter(0)\n}\n",
               "x.hlo:5:1: duplicate computation name 'c' (first defined at 2:1)");
}

static void test_unknown_called_computation(void **state) {
  expect_error("HloModule m\n"
               "ENTRY e {\n"
               "  p = f32[4] parameter(0)\n"
               "  z = f32[] constant(0)\n"
               "  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=%sum\n"
               "}\n",
               "x.hlo:5:57: unknown computation 'sum' in to_apply of instruction 'r'");
}

static void test_literal_element_count_mismatch(void **state) {
  expect_error("HloModule m\nENTRY e {\n  ROOT c = f32[3] constant({1, 2})\n}\n",
               "x.hlo:3:28: expected 3 elements in dimension 0 of the literal for f32[3], found 2");
}

static void test_literal_count_mismatch_in_inner_dimension(void **state) {
  expect_error("HloModule m\nENTRY e {\n  ROOT c = s32[2,3] constant({ {1, 2, 3}, {4, 5} })\n}\n",
               "x.hlo:3:43: expected 3 elements in dimension 1 of the literal for s32[2,3], found 2");
}

static void test_huge_declared_literal_fails_without_allocating_it(void **state) {
  /* 4 GB declared, one element written: rejected after reading the one element. */
  expect_error("HloModule m\nENTRY e {\n  ROOT c = f32[1000000000] constant({1})\n}\n",
               "x.hlo:3:37: expected 1000000000 elements in dimension 0 of the literal for "
               "f32[1000000000], found 1");
}

static void test_broadcast_scalar_literal_bounded_by_arena_limit(void **state) {
  /* One scalar for 10^9 elements: the storage would exceed the module's memory bound. */
  const char *text = "HloModule m\nENTRY e {\n  ROOT c = f32[1000000000] constant(1)\n}\n";
  kiln_hlo_parse_options_t opts = {"x.hlo", 0};
  kiln_hlo_module_t *m;
  kiln_status st = kiln_hlo_parse_module(text, strlen(text), &opts, &m);
  assert_null(m);
  assert_int_equal(kiln_status_code(st), KILN_RESOURCE_EXHAUSTED);
  assert_true(kiln_str_starts_with(kiln_status_message(st), "x.hlo:3:38: input needs more than "));
  kiln_status_free(st);
}

static void test_integer_literal_out_of_range(void **state) {
  expect_error("HloModule m\nENTRY e {\n  ROOT c = u8[2] constant({1, 300})\n}\n",
               "x.hlo:3:31: integer 300 is out of range for u8");
  expect_error("HloModule m\nENTRY e {\n  ROOT c = s4[] constant(-9)\n}\n",
               "x.hlo:3:26: integer -9 is out of range for s4");
  expect_error("HloModule m\nENTRY e {\n  ROOT c = s1[2] constant({-1, 1})\n}\n",
               "x.hlo:3:32: integer 1 is out of range for s1");
  expect_error("HloModule m\nENTRY e {\n  ROOT c = u1[] constant(2)\n}\n",
               "x.hlo:3:26: integer 2 is out of range for u1");
}

static void test_float_literal_for_integer_type(void **state) {
  expect_error("HloModule m\nENTRY e {\n  ROOT c = s32[] constant(1.5)\n}\n",
               "x.hlo:3:27: expected an integer for element type s32");
}

static void test_nesting_too_deep_in_tuple_shape(void **state) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_append(&b, "HloModule m\nENTRY e {\n  ROOT p = ");
  for (int i = 0; i < 256; i++) kiln_strbuf_append_char(&b, '(');
  kiln_strbuf_append(&b, "f32[]");
  for (int i = 0; i < 256; i++) kiln_strbuf_append_char(&b, ')');
  kiln_strbuf_append(&b, " parameter(0)\n}\n");
  /* The 129th '(' is at column 12 + 128. */
  expect_error(kiln_strbuf_cstr(&b), "x.hlo:3:140: nesting too deep (more than 128 levels)");
  kiln_strbuf_free(&b);
}

static void test_nesting_too_deep_in_literal(void **state) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_append(&b, "HloModule m\nENTRY e {\n  ROOT c = f32[");
  for (int i = 0; i < 256; i++) kiln_strbuf_append(&b, i ? ",1" : "1");
  kiln_strbuf_append(&b, "] constant(");
  for (int i = 0; i < 256; i++) kiln_strbuf_append_char(&b, '{');
  kiln_strbuf_append(&b, "1");
  for (int i = 0; i < 256; i++) kiln_strbuf_append_char(&b, '}');
  kiln_strbuf_append(&b, ")\n}\n");
  char msg[128];
  /* columns: "  ROOT c = f32[" is 15, dims 511, "] constant(" 11; the literal's 128th '{'
   * (the 129th nesting level counting the literal itself) */
  snprintf(msg, sizeof msg, "x.hlo:3:%d: nesting too deep (more than 128 levels)", 15 + 511 + 11 + 128);
  expect_error(kiln_strbuf_cstr(&b), msg);
  kiln_strbuf_free(&b);
}

static void test_truncated_input(void **state) {
  const char *full = "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT a = f32[2] add(p, p)\n}\n";
  /* cut inside the operand list */
  expect_error_mode(kModule, "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT a = f32[2] add(p,",
                    KILN_INVALID_ARGUMENT, "x.hlo:4:25: expected operand name, found end of input");
  /* cut before the closing brace */
  char cut[128];
  snprintf(cut, sizeof cut, "%.*s", (int)(strlen(full) - 2), full);
  expect_error(cut, "x.hlo:5:1: expected instruction or '}', found end of input");
  /* every prefix fails cleanly (no crash, no leak) */
  for (size_t n = 0; n + 1 < strlen(full); n++) {
    kiln_hlo_module_t *m;
    kiln_hlo_parse_options_t opts = {"x.hlo", 0};
    kiln_status st = kiln_hlo_parse_module(full, n, &opts, &m);
    assert_non_null(st);
    assert_null(m);
    assert_non_null(strstr(kiln_status_message(st), "x.hlo:"));
    kiln_status_free(st);
  }
}

static void test_empty_input(void **state) {
  expect_error("", "x.hlo:1:1: expected 'HloModule', found end of input");
  expect_error_mode(kModules, "// only a comment\n", KILN_INVALID_ARGUMENT,
                    "x.hlo:2:1: expected 'HloModule', found end of input");
  expect_error_mode(kComputations, "  \n", KILN_INVALID_ARGUMENT,
                    "x.hlo:2:1: expected computation, found end of input");
}

static void test_missing_punctuation(void **state) {
  expect_error("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT a = f32[2] add(p p)\n}\n",
               "x.hlo:4:25: expected ')', found 'p'");
  expect_error("HloModule m\nENTRY e {\n  p f32[2] parameter(0)\n}\n",
               "x.hlo:3:5: expected '=', found 'f32'");
}

static void test_second_root_and_second_entry(void **state) {
  expect_error("HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0)\n  ROOT q = f32[] negate(p)\n}\n",
               "x.hlo:4:8: second ROOT instruction in computation 'e' (first at 3:8)");
  expect_error("HloModule m\nENTRY a {\n  ROOT p = f32[] parameter(0)\n}\n"
               "ENTRY b {\n  ROOT p = f32[] parameter(0)\n}\n",
               "x.hlo:5:1: second ENTRY computation 'b' (the first is 'a')");
}

static void test_parameter_numbers_must_be_dense_and_unique(void **state) {
  expect_error("HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n  ROOT b = f32[] parameter(2)\n}\n",
               "x.hlo:4:8: computation 'e' has 2 parameters but no parameter 1 "
               "(parameter numbers must be 0..1)");
  expect_error("HloModule m\nENTRY e {\n  a = f32[] parameter(0)\n  ROOT b = f32[] parameter(0)\n}\n",
               "x.hlo:4:8: duplicate parameter number 0 in computation 'e' (first used by 'a' at 3:3)");
}

static void test_cycle_through_forward_references(void **state) {
  expect_error("HloModule m\n"
               "ENTRY e {\n"
               "  a = f32[] negate(b)\n"
               "  ROOT b = f32[] negate(a)\n"
               "}\n",
               "x.hlo:3:3: instruction 'a' depends on itself (cycle through 'b')");
}

static void test_recursive_call_graph(void **state) {
  expect_error("HloModule m\n"
               "f {\n  p = f32[] parameter(0)\n  ROOT c = f32[] call(p), to_apply=f\n}\n"
               "ENTRY e {\n  p = f32[] parameter(0)\n  ROOT c = f32[] call(p), to_apply=f\n}\n",
               "x.hlo:2:1: computation 'f' calls itself (through 'c' in 'f')");
}

static void test_duplicate_attribute(void **state) {
  expect_error("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n"
               "  ROOT t = f32[2] transpose(p), dimensions={0}, dimensions={0}\n}\n",
               "x.hlo:4:49: duplicate attribute 'dimensions'");
  expect_error("HloModule m\nENTRY e {\n  ROOT p = f32[2] parameter(0), sharding={replicated}, "
               "sharding={replicated}\n}\n",
               "x.hlo:3:56: duplicate attribute 'sharding'");
}

static void test_bad_enum_attribute_values(void **state) {
  expect_error("HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n"
               "  ROOT c = pred[] compare(p, p), direction=LTE\n}\n",
               "x.hlo:4:44: unknown comparison direction 'LTE'");
  expect_error("HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n"
               "  ROOT c = f32[] custom-call(p), custom_call_target=\"x\", api_version=API_VERSION_NEW\n}\n",
               "x.hlo:4:70: unknown api_version 'API_VERSION_NEW'");
  expect_error("HloModule m\nENTRY e {\n  p = s32[4] parameter(0)\n"
               "  ROOT s = s32[4] sort(p), dimensions={0}, is_stable=maybe, to_apply=e\n}\n",
               "x.hlo:4:54: expected 'true' or 'false', found 'maybe'");
}

static void test_malformed_conv_attributes(void **state) {
  expect_error("HloModule m\nENTRY e {\n  a = f32[1,4,4,1] parameter(0)\n  b = f32[2,2,1,1] parameter(1)\n"
               "  ROOT c = f32[1,3,3,1] convolution(a, b), window={size=2x2 stride=1}, dim_labels=b01f_01io->b01f\n}\n",
               "x.hlo:5:61: window field 'stride' has 1 dimensions, expected 2");
  expect_error("HloModule m\nENTRY e {\n  a = f32[1,4,4,1] parameter(0)\n  b = f32[2,2,1,1] parameter(1)\n"
               "  ROOT c = f32[1,3,3,1] convolution(a, b), window={size=2x2}, dim_labels=b01f_01xo->b01f\n}\n",
               "x.hlo:5:74: malformed dim_labels 'b01f_01xo->b01f'");
}

static void test_error_positions_count_from_start_of_multi_module_file(void **state) {
  expect_error_mode(kModules,
                    "HloModule a\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n"
                    "// -----\n"
                    "HloModule b\nENTRY e {\n  ROOT p = f32[] prameter(0)\n}\n",
                    KILN_INVALID_ARGUMENT, "x.hlo:8:18: unknown opcode 'prameter'");
}

static void test_two_modules_given_to_parse_module(void **state) {
  expect_error("HloModule a\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n"
               "HloModule b\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n",
               "x.hlo:5:1: a second HloModule in one module (files with several modules separate "
               "them with `// -----` lines)");
}

static void test_shape_needed_where_it_cannot_be_inferred(void **state) {
  expect_error("HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT b = broadcast(p), dimensions={}\n}\n",
               "x.hlo:4:8: cannot infer the shape of 'b' (write its shape: it is not a function of "
               "the operands)");
  expect_error("HloModule m\nENTRY e {\n  ROOT p = parameter(0)\n}\n",
               "x.hlo:3:12: parameter 'p' needs a shape");
}

static void test_arena_limit_from_options(void **state) {
  /* A tiny factor makes a normal module exceed its memory bound. */
  const char *text = "HloModule m\nENTRY e {\n  ROOT c = f32[300000] constant(0)\n}\n";
  kiln_hlo_parse_options_t opts = {"x.hlo", 1};
  kiln_hlo_module_t *m;
  kiln_status st = kiln_hlo_parse_module(text, strlen(text), &opts, &m);
  assert_non_null(st);
  assert_null(m);
  assert_int_equal(kiln_status_code(st), KILN_RESOURCE_EXHAUSTED);
  kiln_status_free(st);
}

static void test_null_arguments(void **state) {
  kiln_hlo_module_t *m;
  kiln_status st = kiln_hlo_parse_module(NULL, 3, NULL, &m);
  assert_int_equal(kiln_status_code(st), KILN_INVALID_ARGUMENT);
  kiln_status_free(st);
  st = kiln_hlo_parse_module("HloModule m", 11, NULL, NULL);
  assert_int_equal(kiln_status_code(st), KILN_INVALID_ARGUMENT);
  kiln_status_free(st);
  /* no filename: "<input>" */
  st = kiln_hlo_parse_module("HloModule", 9, NULL, &m);
  assert_string_equal(kiln_status_message(st), "<input>:1:10: expected module name, found end of input");
  kiln_status_free(st);
}

static void test_text_is_not_read_past_its_length(void **state) {
  /* The buffer continues after `len` with text that would complete the module. */
  const char *text = "HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n";
  kiln_hlo_module_t *m;
  kiln_hlo_parse_options_t opts = {"x.hlo", 0};
  kiln_status st = kiln_hlo_parse_module(text, strlen(text) - 3, &opts, &m);
  assert_non_null(st);
  assert_string_equal(kiln_status_message(st), "x.hlo:3:30: expected instruction or '}', found end of input");
  kiln_status_free(st);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unknown_opcode_is_named_at_its_position),
      cmocka_unit_test(test_bad_dimension_in_shape),
      cmocka_unit_test(test_unknown_element_type),
      cmocka_unit_test(test_undefined_operand_name),
      cmocka_unit_test(test_undefined_control_predecessor),
      cmocka_unit_test(test_unterminated_string),
      cmocka_unit_test(test_unterminated_string_in_raw_attribute),
      cmocka_unit_test(test_unterminated_comment),
      cmocka_unit_test(test_layout_rank_mismatch),
      cmocka_unit_test(test_layout_not_a_permutation),
      cmocka_unit_test(test_duplicate_instruction_name),
      cmocka_unit_test(test_duplicate_computation_name),
      cmocka_unit_test(test_unknown_called_computation),
      cmocka_unit_test(test_literal_element_count_mismatch),
      cmocka_unit_test(test_literal_count_mismatch_in_inner_dimension),
      cmocka_unit_test(test_huge_declared_literal_fails_without_allocating_it),
      cmocka_unit_test(test_broadcast_scalar_literal_bounded_by_arena_limit),
      cmocka_unit_test(test_integer_literal_out_of_range),
      cmocka_unit_test(test_float_literal_for_integer_type),
      cmocka_unit_test(test_nesting_too_deep_in_tuple_shape),
      cmocka_unit_test(test_nesting_too_deep_in_literal),
      cmocka_unit_test(test_truncated_input),
      cmocka_unit_test(test_empty_input),
      cmocka_unit_test(test_missing_punctuation),
      cmocka_unit_test(test_second_root_and_second_entry),
      cmocka_unit_test(test_parameter_numbers_must_be_dense_and_unique),
      cmocka_unit_test(test_cycle_through_forward_references),
      cmocka_unit_test(test_recursive_call_graph),
      cmocka_unit_test(test_duplicate_attribute),
      cmocka_unit_test(test_bad_enum_attribute_values),
      cmocka_unit_test(test_malformed_conv_attributes),
      cmocka_unit_test(test_error_positions_count_from_start_of_multi_module_file),
      cmocka_unit_test(test_two_modules_given_to_parse_module),
      cmocka_unit_test(test_shape_needed_where_it_cannot_be_inferred),
      cmocka_unit_test(test_arena_limit_from_options),
      cmocka_unit_test(test_null_arguments),
      cmocka_unit_test(test_text_is_not_read_past_its_length),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
