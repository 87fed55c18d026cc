/* Sort emitter on long rows (the inputs that take long to compile; test_sort_emitter.c has
 * the short ones, test_sort_emitter_corpus.c the corpus's sorts), bit for bit against the
 * evaluator: 2^20 elements over 64 rows sorted in global memory, one long row (16 pairs per
 * thread per step in one block), the longest stable row that fits the shared positions, and
 * stable rows past it (the rank sort). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sort_test_util.h"

static void test_sort_large_inputs_match_evaluator(void **state) {
  sort_fixture_t *f = *state;
  /* 2^20 elements over 64 rows, one long row (16 pairs per thread per step in one block),
   * and the longest stable row that fits the shared positions. */
  sort1(f, "f32", "64,16384", 1, "LT", NULL, false, FILL_DISTINCT, 80);
  sort1(f, "s32", "20000", 0, "LT", NULL, false, FILL_DISTINCT, 81);
  sort1(f, "bf16", "8,12288", 1, "LT", NULL, true, FILL_TIES, 82);
}

static void test_sort_stable_long_rows_rank_each_element(void **state) {
  sort_fixture_t *f = *state;
  /* Rows past the shared positions' capacity: topk's (values, indices) form with ties. */
  const char *text =
      "HloModule s\n\ncmp {\n  a = bf16[] parameter(0)\n  b = bf16[] parameter(1)\n"
      "  c = s32[] parameter(2)\n  d = s32[] parameter(3)\n"
      "  ROOT gt = pred[] compare(a, b), direction=GT, type=TOTALORDER\n}\n\n"
      "ENTRY fused {\n  k = bf16[2,13000] parameter(0)\n  v = s32[2,13000] parameter(1)\n"
      "  ROOT s = (bf16[2,13000], s32[2,13000]) sort(k, v), dimensions={1}, is_stable=true, "
      "to_apply=cmp\n}\n";
  sort_expect_match(f, text, FILL_TIES, 85);
  sort1(f, "f32", "20000,1", 0, "LT", "TOTALORDER", true, FILL_SPECIAL, 86);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_sort_large_inputs_match_evaluator, sort_setup,
                                      sort_teardown),
      cmocka_unit_test_setup_teardown(test_sort_stable_long_rows_rank_each_element, sort_setup,
                                      sort_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
