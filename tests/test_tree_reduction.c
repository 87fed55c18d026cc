/* tree_reduction (XLA's TreeReductionRewriter): reduces past the race-free bounds become two
 * reduces within them — a long row (padded with the init value), more than 8 major reduced
 * rows, a long column — with the same integer results on the evaluator and close float ones;
 * those within the bounds and variadic ones are left alone; on the host a complex sum runs as
 * two kernels. (The same bits every run: test_host_determinism.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/str.h"
#include "compiler/analysis/reduction_rule.h"
#include "host_device_fixture.h"
#include "host_run_util.h"
#include "pass_test_util.h"

/* `body` (an entry computation's instructions with ROOT) under the add and max reducers. */
static char *module(const char *body) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b,
                     "HloModule t\n\n"
                     "add {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n"
                     "  ROOT c = s32[] add(a, b)\n}\n\n"
                     "addf {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                     "  ROOT c = f32[] add(a, b)\n}\n\n"
                     "max {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n"
                     "  ROOT c = s32[] maximum(a, b)\n}\n\n"
                     "ENTRY e {\n%s}\n",
                     body);
  return kiln_strbuf_take(&b);
}

/* Runs the pass on `body`: integer results bit-identical (float: within 1e-5 relative), and
 * `want_reduces` reduces afterwards, each within the race-free bounds. */
static void check(const char *body, bool exact, int want_reduces) {
  char *text = module(body);
  kiln_hlo_module_t *m = pt_run_close_results(text, "tree_reduction", exact ? 0.0f : 1e-5f);
  assert_int_equal(pt_count(m, KILN_OP_REDUCE), want_reduces);
  const kiln_hlo_computation_t *c = m->entry;
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    kiln_reduction_dims_t rd;
    if (in && in->opcode == KILN_OP_REDUCE && kiln_reduction_dims_of(in, &rd))
      assert_true(kiln_reduction_is_race_free(&rd));
  }
  kiln_hlo_module_destroy(m);
  kiln_free(text);
}

static void test_long_row_splits_in_two(void **state) {
  (void)state;
  /* 2^20 = 1024 x 1024, no padding */
  check(
      "  p = s32[1048576] parameter(0)\n  z = s32[] constant(0)\n"
      "  ROOT r = s32[] reduce(p, z), dimensions={0}, to_apply=add\n",
      true, 2);
  check(
      "  p = f32[1048576] parameter(0)\n  z = f32[] constant(0)\n"
      "  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=addf\n",
      false, 2);
}

static void test_long_rows_with_kept_dims_pad_with_the_init_value(void **state) {
  (void)state;
  /* 20,001 = 126 x 160 - 159: padded with the init value, the identity of max */
  check(
      "  p = s32[3,20001] parameter(0)\n  z = s32[] constant(-2147483648)\n"
      "  ROOT r = s32[3] reduce(p, z), dimensions={1}, to_apply=max\n",
      true, 2);
  /* reduced dims around the kept one: [R0 = 2, K = 5, R2 = 30,000] */
  check(
      "  p = s32[2,5,300,100] parameter(0)\n  z = s32[] constant(0)\n"
      "  ROOT r = s32[5] reduce(p, z), dimensions={0,2,3}, to_apply=add\n",
      true, 2);
}

/* bf16 summed into an f32 init (shape inference accepts the mixed types, the evaluator does
 * not): converted first, then split into two f32 reduces that verify. */
static void test_an_input_of_another_float_type_is_converted_first(void **state) {
  (void)state;
  char *text = module(
      "  p = bf16[100000] parameter(0)\n  z = f32[] constant(0)\n"
      "  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=addf\n");
  kiln_hlo_module_t *m = pt_parse(text);
  pt_run(m, "tree_reduction");
  assert_int_equal(pt_count(m, KILN_OP_REDUCE), 2);
  assert_int_equal(pt_count(m, KILN_OP_CONVERT), 1);
  pt_expect_text(m, "f32[100000] convert(p)", true);
  kiln_hlo_module_destroy(m);
  kiln_free(text);
}

static void test_many_major_rows_reduce_the_rows_first(void **state) {
  (void)state;
  /* R0 = 100 > 8: the rows (64), then the 100 as a column */
  check(
      "  p = s32[100,4,64] parameter(0)\n  z = s32[] constant(0)\n"
      "  ROOT r = s32[4] reduce(p, z), dimensions={0,2}, to_apply=add\n",
      true, 2);
}

static void test_long_column_splits_in_two(void **state) {
  (void)state;
  /* 10,000 rows = 79 x 128 - 112 */
  check(
      "  p = s32[10000,16] parameter(0)\n  z = s32[] constant(0)\n"
      "  ROOT r = s32[16] reduce(p, z), dimensions={0}, to_apply=add\n",
      true, 2);
  /* [M = 3, R = 5000, N = 7] */
  check(
      "  p = s32[3,5000,7] parameter(0)\n  z = s32[] constant(0)\n"
      "  ROOT r = s32[3,7] reduce(p, z), dimensions={1}, to_apply=add\n",
      true, 2);
}

static void test_rows_past_two_bounds_take_three_reduces(void **state) {
  (void)state;
  /* a long row beside 20 major rows: inner, then R0 with the outer chunks, then R0 alone */
  check(
      "  p = s32[20,2,40000] parameter(0)\n  z = s32[] constant(0)\n"
      "  ROOT r = s32[2] reduce(p, z), dimensions={0,2}, to_apply=add\n",
      true, 3);
}

static void test_race_free_and_variadic_reduces_are_left_alone(void **state) {
  (void)state;
  check(
      "  p = s32[16384] parameter(0)\n  z = s32[] constant(0)\n"
      "  ROOT r = s32[] reduce(p, z), dimensions={0}, to_apply=add\n",
      true, 1);
  check(
      "  p = s32[4096,16] parameter(0)\n  z = s32[] constant(0)\n"
      "  ROOT r = s32[16] reduce(p, z), dimensions={0}, to_apply=add\n",
      true, 1);
  char *text = module(
      "  p = s32[100000] parameter(0)\n  q = s32[100000] parameter(1)\n"
      "  z = s32[] constant(0)\n"
      "  ROOT r = (s32[], s32[]) reduce(p, q, z, z), dimensions={0}, "
      "to_apply=pair\n");
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, "%.*s", (int)(strstr(text, "ENTRY") - text), text);
  kiln_strbuf_printf(&b,
                     "pair {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n"
                     "  c = s32[] parameter(2)\n  d = s32[] parameter(3)\n"
                     "  s = s32[] add(a, c)\n  t = s32[] add(b, d)\n"
                     "  ROOT u = (s32[], s32[]) tuple(s, t)\n}\n\n%s",
                     strstr(text, "ENTRY"));
  kiln_free(text);
  kiln_hlo_module_t *m = pt_parse(kiln_strbuf_cstr(&b));
  pt_run(m, "tree_reduction");
  assert_int_equal(pt_count(m, KILN_OP_REDUCE), 1);
  kiln_hlo_module_destroy(m);
  kiln_strbuf_free(&b);
}

/* A complex sum (never split by the emitter: no complex atomics) runs as two kernels, the
 * second writing the result itself (a reshape after it would be a kernel of its own). */
static void test_host_complex_sum_is_two_kernels(void **state) {
  (void)state;
  run_and_count_thunks(
      g_dev,
      "HloModule c\n\nadd {\n  a = c64[] parameter(0)\n  b = c64[] parameter(1)\n"
      "  ROOT c = c64[] add(a, b)\n}\n\nENTRY e {\n  p = c64[100000] parameter(0)\n"
      "  z = c64[] constant((0, 0))\n"
      "  ROOT r = c64[] reduce(p, z), dimensions={0}, to_apply=add\n}\n",
      0, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_long_row_splits_in_two),
      cmocka_unit_test(test_long_rows_with_kept_dims_pad_with_the_init_value),
      cmocka_unit_test(test_an_input_of_another_float_type_is_converted_first),
      cmocka_unit_test(test_many_major_rows_reduce_the_rows_first),
      cmocka_unit_test(test_long_column_splits_in_two),
      cmocka_unit_test(test_rows_past_two_bounds_take_three_reduces),
      cmocka_unit_test(test_race_free_and_variadic_reduces_are_left_alone),
      cmocka_unit_test(test_host_complex_sum_is_two_kernels),
  };
  return cmocka_run_group_tests(tests, host_device_setup, host_device_teardown);
}
