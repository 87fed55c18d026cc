/* cholesky_expander: the expanded loop evaluates like the original cholesky on the
 * reference evaluator (within a tolerance of each leaf's largest magnitude) for lower and
 * upper, real and complex types, batched shapes and a matrix that is not positive definite
 * (NaN result); the triangle that is not named holds NaN, so reading it would show. Corpus
 * modules with cholesky keep their results through the expander and the whole pipeline. */
#include <complex.h>
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


static uint64_t lcg = 7;
static double uniform(double lo, double hi) {
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (hi - lo) * (double)(lcg >> 11) * 0x1.0p-53;
}

static const kiln_hlo_opcode_t kOps[1] = {KILN_OP_CHOLESKY};

/* type[batch, n, n] holding M M^H + n I (positive definite; `definite` false: minus 3 n I)
 * in the named triangle and NaN in the other. */
static double check_case(const char *type, int64_t batch, int64_t n, const char *lower_attr, bool lower,
                         bool definite, const char *list) {
  char text[512];
  snprintf(text, sizeof text,
           "HloModule ch\n\nENTRY e {\n  a = %s[%lld,%lld,%lld] parameter(0)\n"
           "  ROOT l = %s[%lld,%lld,%lld] cholesky(a)%s\n}\n",
           type, (long long)batch, (long long)n, (long long)n, type, (long long)batch, (long long)n, (long long)n,
           lower_attr);
  kiln_hlo_module_t *mod = pt_parse(text);
  kiln_arena_t aa;
  kiln_arena_init(&aa);
  kiln_literal_t *a = kiln_literal_make(&aa, kiln_shape_clone(&aa, mod->entry->parameters[0]->shape));
  bool cplx = kiln_elem_type_is_complex(a->shape->type);
  double complex *M = calloc((size_t)(n * n), sizeof *M);
  for (int64_t b = 0; b < batch; b++) {
    for (int64_t i = 0; i < n * n; i++) M[i] = uniform(-1, 1) + (cplx ? uniform(-1, 1) * I : 0);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        double complex v = 0;
        for (int64_t k = 0; k < n; k++) v += M[i * n + k] * conj(M[j * n + k]);
        if (i == j) v += definite ? (double)n : -3.0 * (double)n;
        bool named = lower ? j <= i : j >= i;
        int64_t at = (b * n + i) * n + j;
        if (!named) v = NAN + (cplx ? NAN * I : 0);
        if (cplx) kiln_literal_set_c128(a, at, creal(v), cimag(v));
        else kiln_literal_set_f64(a, at, creal(v));
      }
  }
  free(M);
  double e = et_error_after(mod, &a, 1, list, kOps, 1, false);
  if (e < 0 || e > 1)
    print_error("%s[%lld,%lld,%lld]%s definite=%d: error %g of the tolerance\n", type, (long long)batch, (long long)n,
                (long long)n, lower_attr, definite, e);
  kiln_arena_destroy(&aa);
  kiln_hlo_module_destroy(mod);
  return e;
}

static void test_lower_upper_real_complex_and_batches_match_the_evaluator(void **state) {
  static const char *const types[] = {"f32", "f64", "c64", "c128", "f16"};
  int cases = 0, bad = 0;
  double worst = 0;
  for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
    for (int form = 0; form < 3; form++) {
      const char *attr = form == 0 ? "" : form == 1 ? ", lower=true" : ", lower=false";
      bool lower = form != 2;
      double e = check_case(types[t], 1 + (int64_t)t % 3, 4 + (int64_t)t, attr, lower, true, "cholesky_expander");
      cases++;
      bad += e < 0 || e > 1;
      if (e > worst) worst = e;
    }
  printf("cholesky expansion: %d of %d cases within tolerance (worst %.3g of the tolerance)\n", cases - bad, cases,
         worst);
  assert_int_equal(bad, 0);
}

/* A matrix that is not positive definite gives NaN everywhere, as the evaluator says. */
static void test_not_positive_definite_gives_nan_like_the_evaluator(void **state) {
  assert_true(check_case("f32", 2, 5, "", true, false, "cholesky_expander") == 0);
  assert_true(check_case("c64", 1, 3, ", lower=false", false, false, "cholesky_expander") == 0);
}

static void test_pipeline_keeps_the_results(void **state) {
  double e = check_case("f32", 3, 6, ", lower=true", true, true, NULL);
  assert_true(e >= 0 && e <= 1);
  e = check_case("f64", 1, 5, ", lower=false", false, true, NULL);
  assert_true(e >= 0 && e <= 1);
}

/* Corpus modules with cholesky: results kept after the expander and after the pipeline. */
static void test_corpus_choleskys_keep_their_results(void **state) {
  const char *files[] = {"xla/xla__hlo__transforms__tests__cholesky_expander.hlo", "xla/xla__tools__tests__data__cholesky.hlo",
                         "xla/xla__hlo__translate__hlo_to_mhlo__tests__import_emit_stablehlo.hlo"};
  int found, compared, rejected;
  et_check_corpus(files, 3, kOps, 1, "cholesky_expander", false, &found, &compared, &rejected);
  printf("corpus: %d modules with cholesky, %d compared after the expander and the pipeline\n", found, compared);
  assert_int_equal(compared + rejected, found);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lower_upper_real_complex_and_batches_match_the_evaluator),
      cmocka_unit_test(test_not_positive_definite_gives_nan_like_the_evaluator),
      cmocka_unit_test(test_pipeline_keeps_the_results),
      cmocka_unit_test(test_corpus_choleskys_keep_their_results),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
