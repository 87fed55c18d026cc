/* triangular_solve_expander: every combination of left_side, lower, transpose_a and
 * unit_diagonal, for real and complex types and batched shapes, evaluates like the
 * original triangular-solve on the reference evaluator (within a tolerance of each leaf's
 * largest magnitude); the triangle that is not named (and a unit diagonal) hold NaN, so
 * reading them would show. Corpus modules with triangular-solve keep their results through
 * the expander and the whole pipeline. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pass_test_util.h"
#include "expander_test_util.h"


static uint64_t lcg = 99;
static double uniform(double lo, double hi) {
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (hi - lo) * (double)(lcg >> 11) * 0x1.0p-53;
}

static void set_value(kiln_literal_t *l, int64_t i, double re, double im) {
  if (kiln_elem_type_is_complex(l->shape->type)) kiln_literal_set_c128(l, i, re, im);
  else kiln_literal_set_f64(l, i, re);
}

static const kiln_hlo_opcode_t kOps[1] = {KILN_OP_TRIANGULAR_SOLVE};

/* a: type[batch.., m, m], b: type[batch.., rows, cols]. */
static double check_case(const char *type, int nbatch, const int64_t *batch, int64_t m, int64_t other, bool left,
                         bool lower, const char *ta, bool unit, const char *list) {
  char bd[64] = "";
  int off = 0;
  for (int i = 0; i < nbatch; i++) off += snprintf(bd + off, sizeof bd - (size_t)off, "%lld,", (long long)batch[i]);
  int64_t rows = left ? m : other, cols = left ? other : m;
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule ts\n\nENTRY e {\n  a = %s[%s%lld,%lld] parameter(0)\n  b = %s[%s%lld,%lld] parameter(1)\n"
           "  ROOT x = %s[%s%lld,%lld] triangular-solve(a, b), left_side=%s, lower=%s, unit_diagonal=%s, "
           "transpose_a=%s\n}\n",
           type, bd, (long long)m, (long long)m, type, bd, (long long)rows, (long long)cols, type, bd, (long long)rows,
           (long long)cols, left ? "true" : "false", lower ? "true" : "false", unit ? "true" : "false", ta);
  kiln_hlo_module_t *mod = pt_parse(text);
  kiln_arena_t aa;
  kiln_arena_init(&aa);
  kiln_literal_t *args[2];
  for (int p = 0; p < 2; p++) args[p] = kiln_literal_make(&aa, kiln_shape_clone(&aa, mod->entry->parameters[p]->shape));
  bool cplx = kiln_elem_type_is_complex(args[0]->shape->type);
  for (int64_t i = 0; i < args[0]->num_elements; i++) {
    int64_t r = (i / m) % m, c = i % m;
    bool named = lower ? c <= r : c >= r;
    if (!named || (unit && r == c)) set_value(args[0], i, NAN, cplx ? NAN : 0);
    else if (r == c) set_value(args[0], i, uniform(2, 3), cplx ? uniform(-1, 1) : 0);
    else set_value(args[0], i, uniform(-1, 1) / (double)m, cplx ? uniform(-1, 1) / (double)m : 0);
  }
  for (int64_t i = 0; i < args[1]->num_elements; i++) set_value(args[1], i, uniform(-1, 1), cplx ? uniform(-1, 1) : 0);
  double e = et_error_after(mod, args, 2, list, kOps, 1, false);
  if (e < 0 || e > 1)
    print_error("%s batch %s m=%lld left=%d lower=%d %s unit=%d: error %g of the tolerance\n", type, bd, (long long)m,
                left, lower, ta, unit, e);
  kiln_arena_destroy(&aa);
  kiln_hlo_module_destroy(mod);
  return e;
}

static void test_every_side_triangle_transpose_and_diagonal_matches_the_evaluator(void **state) {
  static const char *const tas[] = {"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"};
  static const char *const types[] = {"f32", "f64", "c64", "f16"};
  const int64_t batch[2] = {2, 3};
  int cases = 0, bad = 0;
  double worst = 0;
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
    for (int left = 0; left < 2; left++)
      for (int lower = 0; lower < 2; lower++)
        for (size_t ta = 0; ta < 3; ta++)
          for (int unit = 0; unit < 2; unit++) {
            int nb = (int)((t + (size_t)left + ta) % 3);
            double e = check_case(types[t], nb, batch, 5, 3, left, lower, tas[ta], unit, "triangular_solve_expander");
            cases++;
            bad += e < 0 || e > 1;
            if (e > worst) worst = e;
          }
  printf("triangular-solve expansion: %d of %d cases within tolerance (worst %.3g of the tolerance)\n", cases - bad,
         cases, worst);
  assert_int_equal(bad, 0);
}

/* 1x1 systems, a single right-hand side, and the whole pipeline (loop, fusions, ...). */
static void test_edge_sizes_and_the_pipeline_keep_the_results(void **state) {
  assert_true(check_case("f32", 0, NULL, 1, 1, true, true, "NO_TRANSPOSE", false, "triangular_solve_expander") <= 1);
  assert_true(check_case("f32", 0, NULL, 7, 1, false, false, "TRANSPOSE", false, "triangular_solve_expander") <= 1);
  const int64_t batch[1] = {2};
  double e = check_case("f32", 1, batch, 6, 4, true, false, "ADJOINT", false, NULL);
  assert_true(e >= 0 && e <= 1);
  e = check_case("f64", 0, NULL, 9, 2, false, true, "NO_TRANSPOSE", true, NULL);
  assert_true(e >= 0 && e <= 1);
}

/* Corpus modules with triangular-solve: results kept after the expander and the pipeline. */
static void test_corpus_triangular_solves_keep_their_results(void **state) {
  const char *files[] = {"xla/xla__hlo__translate__hlo_to_mhlo__tests__import.hlo",
                         "xla/xla__hlo__translate__hlo_to_mhlo__tests__import_emit_stablehlo.hlo"};
  int found, compared, rejected;
  et_check_corpus(files, 2, kOps, 1, "triangular_solve_expander", false, &found, &compared, &rejected);
  printf("corpus: %d modules with triangular-solve, %d compared after the expander and the pipeline\n", found,
         compared);
  assert_int_equal(compared + rejected, found);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_side_triangle_transpose_and_diagonal_matches_the_evaluator),
      cmocka_unit_test(test_edge_sizes_and_the_pipeline_keep_the_results),
      cmocka_unit_test(test_corpus_triangular_solves_keep_their_results),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
