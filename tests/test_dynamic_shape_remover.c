/* dynamic_shape_remover: set-dimension-size becomes its operand and dynamic-reshape a
 * reshape to the result's bounds; modules with them evaluate as before (the evaluator takes
 * dynamic dimensions at their bounds) and now compile and run on the host like the
 * evaluator; the corpus modules with set-dimension-size and dynamic-reshape (the latter
 * with sizes at the bounds, the only ones the evaluator runs) match it on the host. */
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

#define LIST "dynamic_shape_remover"

static void test_set_dimension_size_keeps_the_operands_data(void **state) {
  const char *text =
      "HloModule d\n\nENTRY e {\n  x = f32[4,5] parameter(0)\n  n = s32[] parameter(1)\n"
      "  s = f32[4,<=5] set-dimension-size(x, n), dimensions={1}\n"
      "  ROOT y = f32[4,<=5] multiply(s, s)\n}\n";
  double e = dx_check_text(text, LIST, KILN_OP_SET_DIMENSION_SIZE, true);
  assert_true(e >= 0 && e <= 1);
}

static void test_dynamic_reshape_at_its_bounds_is_a_reshape(void **state) {
  const char *text =
      "HloModule d\n\nENTRY e {\n  x = f32[12] parameter(0)\n  a = s32[] constant(3)\n  b = s32[] constant(4)\n"
      "  r = f32[<=3,<=4] dynamic-reshape(x, a, b)\n  ROOT y = f32[<=3,<=4] add(r, r)\n}\n";
  double e = dx_check_text(text, LIST, KILN_OP_DYNAMIC_RESHAPE, true);
  assert_true(e >= 0 && e <= 1);
  kiln_hlo_module_t *m = pt_parse(text);
  pt_run(m, LIST);
  pt_expect_text(m, "f32[3,4] reshape(x)", true);
  kiln_hlo_module_destroy(m);
}

static void test_corpus_set_dimension_size_modules_match_on_the_host(void **state) {
  int n = dx_check_corpus_file("xla/xla__hlo__translate__hlo_to_mhlo__tests__import_emit_stablehlo.hlo",
                               KILN_OP_SET_DIMENSION_SIZE, LIST);
  assert_int_equal(n, 3);
}

/* The corpus dynamic-reshape modules take their sizes as parameters 1..: set to the
 * result's bounds. */
static void test_corpus_dynamic_reshapes_at_their_bounds_match_on_the_host(void **state) {
  char path[1024];
  snprintf(path, sizeof path, "%s/xla/xla__hlo__translate__hlo_to_mhlo__tests__import_dynamic_reshape.hlo",
           kiln_corpus_dir());
  int checked = 0;
  for (int host = 0; host < 2; host++) {
    kiln_hlo_file_t *f = NULL;
    kiln_status s = kiln_hlo_file_load(path, &f);
    if (s) fail_msg("%s: %s", path, kiln_status_message(s));
    for (int k = 0; k < f->num_modules; k++) {
      kiln_hlo_module_t *m = f->modules[k];
      const kiln_shape_t *rs = m->entry->root->shape;
      kiln_arena_t aa;
      kiln_arena_init(&aa);
      kiln_literal_t **args = NULL;
      int n = 0;
      s = kiln_fake_args_make(m, NULL, &aa, &args, &n);
      if (s) fail_msg("fake args: %s", kiln_status_message(s));
      assert_int_equal(n, rs->rank + 1);
      for (int i = 1; i < n; i++) kiln_literal_set_s64(args[i], 0, rs->dims[i - 1]);
      if (host) {
        if (!dx_host_run_matches_args(m, args, n, "dynamic-reshape module")) fail_msg("module %d differs", k);
        checked++;
      } else {
        double e = dx_error_after(m, args, n, LIST, KILN_OP_DYNAMIC_RESHAPE);
        if (e < 0 || e > 1) fail_msg("module %d: error %g of the tolerance", k, e);
      }
      kiln_arena_destroy(&aa);
    }
    kiln_hlo_file_free(f);
  }
  printf("corpus: %d dynamic-reshape modules match the evaluator on the host\n", checked);
  assert_int_equal(checked, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_set_dimension_size_keeps_the_operands_data),
      cmocka_unit_test(test_dynamic_reshape_at_its_bounds_is_a_reshape),
      cmocka_unit_test(test_corpus_set_dimension_size_modules_match_on_the_host),
      cmocka_unit_test(test_corpus_dynamic_reshapes_at_their_bounds_match_on_the_host),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
