/* The host backend gives the same bits every run, as XLA:CPU does, where the order of float
 * operations could vary with the threads:
 *   - a sum of 2^20 f32 products, and the corpus's f16 sum of 2^20 elements
 *     (`gpu_hlo_buffers.hlo`): tree_reduction splits each into two reduces (before, the blocks
 *     of one split reduce added their partials into the output with atomics in the order they
 *     finished);
 *   - scatter-adds of f32 updates with repeated indices into 4 elements and into embedding
 *     rows: run serially on the host now, bit-identical to the evaluator (before, atomics
 *     from several threads).
 * Each module runs four times on the 2-or-more-thread host device; the first run is also
 * compared with the evaluator (not the f16 sum: see its test), and the thunks are checked for
 * what made runs differ (a split reduction's initializing kernel). Each of these tests fails
 * on the old code. With deterministic ops (KILN_DETERMINISTIC_OPS=1) a long sum inside a
 * fusion given in the input, which tree_reduction leaves, stays in one block too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "host_device_fixture.h"
#include "host_run_util.h"
#include "tools/common/hlo_file.h"

/* Runs `text` four times on the host with the same generated inputs: every run's output
 * bytes equal the first's. */
static void expect_same_bits_every_run(const char *text) {
  kiln_hlo_module_t *m = parse(text);
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **args = NULL;
  int n = 0;
  assert_null(kiln_fake_args_make(m, NULL, &arena, &args, &n));
  const kiln_literal_t *first = NULL;
  for (int run = 0; run < 4; run++) {
    kiln_device_run_options_t o;
    memset(&o, 0, sizeof o);
    o.device = g_dev;
    kiln_device_run_report_t rep;
    kiln_literal_t *got = NULL;
    kiln_status s = kiln_device_run_module(m, args, n, &o, &arena, &got, &rep);
    if (s) fail_msg("run %d: %s", run, kiln_status_message(s));
    assert_true(kiln_shape_is_array(got->shape));
    size_t bytes = (size_t)got->num_elements * kiln_elem_type_storage_bytes(got->shape->type);
    if (!first)
      first = got;
    else if (memcmp(got->data, first->data, bytes))
      fail_msg("run %d differs from run 0", run);
  }
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
}

static const char kAdd[] =
    "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
    "  ROOT c = f32[] add(a, b)\n}\n\n";

static char *module(const char *name, const char *entry) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, "HloModule %s\n\n%sENTRY e {\n%s}\n", name, kAdd, entry);
  return kiln_strbuf_take(&b);
}

/* An f32 sum of 2^20 products: two kernels, no initializing kernel of a split reduction. */
static void test_a_long_sum_gives_the_same_bits_every_run(void **state) {
  (void)state;
  char *text = module("sum",
                      "  p = f32[1048576] parameter(0)\n  q = f32[1048576] parameter(1)\n"
                      "  m = f32[1048576] multiply(p, q)\n  z = f32[] constant(0)\n"
                      "  ROOT r = f32[] reduce(m, z), dimensions={0}, to_apply=add\n");
  char *thunks = NULL;
  run_and_compare_on(g_dev, text, 1, &thunks);
  printf("%s", strstr(thunks, "thunks:"));
  assert_int_equal(count_in(thunks, " kernel "), 2);
  assert_int_equal(count_in(thunks, "_init "), 0);
  kiln_free(thunks);
  expect_same_bits_every_run(text);
  kiln_free(text);
}

/* 2^20 f32 updates into 4 elements, and 65,536 embedding-gradient rows into 1,000. */
static void test_scatter_adds_give_the_same_bits_every_run(void **state) {
  (void)state;
  const char *entries[2] = {
      "  op = f32[4] parameter(0)\n  idx = s32[1048576,1] parameter(1)\n"
      "  upd = f32[1048576] parameter(2)\n"
      "  ROOT s = f32[4] scatter(op, idx, upd), update_window_dims={}, inserted_window_dims={0}, "
      "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n",
      "  op = f32[1000,128] parameter(0)\n  idx = s32[65536,1] parameter(1)\n"
      "  upd = f32[65536,128] parameter(2)\n"
      "  ROOT s = f32[1000,128] scatter(op, idx, upd), update_window_dims={1}, "
      "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
      "to_apply=add\n"};
  for (int i = 0; i < 2; i++) {
    char *text = module("scatter", entries[i]);
    run_and_compare_on(g_dev, text, 1, NULL);
    expect_same_bits_every_run(text);
    kiln_free(text);
  }
}

/* A long sum inside a fusion given in the input (tree_reduction leaves fused computations):
 * by default a split over blocks combined by atomics; with deterministic ops
 * (KILN_DETERMINISTIC_OPS=1, XLA's --xla_gpu_deterministic_ops) one block per output, no
 * initializing kernel, the same bits every run. */
static void test_deterministic_ops_keep_fused_sums_in_one_block(void **state) {
  (void)state;
  char *text = module("fused",
                      "  p = f32[1048576] parameter(0)\n"
                      "  ROOT f = f32[] fusion(p), kind=kInput, calls=fsum\n");
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b,
                     "%.*sfsum {\n  x = f32[1048576] parameter(0)\n  z = f32[] constant(0)\n"
                     "  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=add\n}\n\n%s",
                     (int)(strstr(text, "ENTRY") - text), text, strstr(text, "ENTRY"));
  kiln_free(text);
  char *thunks = NULL;
  run_and_compare_on(g_dev, kiln_strbuf_cstr(&b), 1, &thunks);
  assert_int_equal(count_in(thunks, "_init "), 1); /* the default: split, atomics */
  kiln_free(thunks);
  assert_int_equal(setenv("KILN_DETERMINISTIC_OPS", "1", 1), 0);
  run_and_compare_on(g_dev, kiln_strbuf_cstr(&b), 1, &thunks);
  printf("%s", strstr(thunks, "thunks:"));
  assert_int_equal(count_in(thunks, "_init "), 0);
  assert_int_equal(count_in(thunks, " kernel "), 1);
  kiln_free(thunks);
  expect_same_bits_every_run(kiln_strbuf_cstr(&b));
  unsetenv("KILN_DETERMINISTIC_OPS");
  kiln_strbuf_free(&b);
}

/* The corpus's f16 sum of 2^20 elements (XLA's hlo_opt buffer-assignment test), whose
 * result varied run to run (288.75, 289.25, 289.5, 289.25): split by tree_reduction, no
 * initializing kernel, the same bits every run. (Not compared with the evaluator: its
 * in-order f16 sum, 317, is further from the exact 289.42 than any order's tolerance.) */
static void test_the_corpus_f16_sum_gives_the_same_bits_every_run(void **state) {
  (void)state;
  char path[2048], *text = NULL;
  size_t len = 0;
  snprintf(path, sizeof path, "%s/xla/xla__tools__hlo_opt__tests__gpu_hlo_buffers.hlo",
           kiln_corpus_dir());
  kiln_status s = kiln_read_file(path, &text, &len);
  if (s) fail_msg("%s", kiln_status_message(s));
  char *thunks = thunks_of(text);
  printf("%s", strstr(thunks, "thunks:"));
  assert_int_equal(count_in(thunks, "_init "), 0);
  assert_int_equal(count_in(thunks, " kernel "), 2);
  kiln_free(thunks);
  expect_same_bits_every_run(text);
  kiln_free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_long_sum_gives_the_same_bits_every_run),
      cmocka_unit_test(test_the_corpus_f16_sum_gives_the_same_bits_every_run),
      cmocka_unit_test(test_scatter_adds_give_the_same_bits_every_run),
      cmocka_unit_test(test_deterministic_ops_keep_fused_sums_in_one_block),
  };
  return cmocka_run_group_tests(tests, host_device_setup, host_device_teardown);
}
