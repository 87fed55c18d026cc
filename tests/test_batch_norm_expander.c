/* batch_norm_expander: batch-norm-training / -inference / -grad become reduce, broadcast and
 * elementwise HLO that evaluates like the original op on the reference evaluator (which
 * works in double and rounds once): within a tolerance of the leaf's largest magnitude
 * (f64 1e-12, f32 1e-5, f16 2e-3, bf16 1.6e-2), for every feature position, several shapes
 * and element types, inputs whose mean is far from zero (a one-pass variance would cancel),
 * on corpus modules, and through the whole pipeline. */
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


static uint64_t rng_state = 12345;
static double uniform(double lo, double hi) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (hi - lo) * (double)(rng_state >> 11) * 0x1.0p-53;
}

/* A literal of `s` with values uniform in [lo, hi) (rounded to the type). */
static kiln_literal_t *random_literal(kiln_arena_t *a, const kiln_shape_t *s, double lo, double hi) {
  kiln_literal_t *l = kiln_literal_make(a, kiln_shape_clone(a, s));
  for (int64_t i = 0; i < l->num_elements; i++) kiln_literal_set_f64(l, i, uniform(lo, hi));
  return l;
}

static const kiln_hlo_opcode_t kOps[3] = {KILN_OP_BATCH_NORM_TRAINING, KILN_OP_BATCH_NORM_INFERENCE,
                                         KILN_OP_BATCH_NORM_GRAD};

typedef enum { TRAINING, INFERENCE, GRAD } bn_kind_t;

/* One module: x: type[dims] with the feature at `f`; per-feature operands in `ftype`.
 * x has mean `center`; variances are positive. Returns the worst error. */
static double check_case(bn_kind_t kind, const char *type, const char *ftype, int rank, const int64_t *dims,
                         int f, double center, bool pipeline) {
  char xs[128] = "", cs[32];
  int off = snprintf(xs, sizeof xs, "%s[", type);
  for (int d = 0; d < rank; d++) off += snprintf(xs + off, sizeof xs - (size_t)off, "%s%lld", d ? "," : "", (long long)dims[d]);
  snprintf(xs + off, sizeof xs - (size_t)off, "]");
  snprintf(cs, sizeof cs, "%s[%lld]", ftype, (long long)dims[f]);
  char text[1024];
  if (kind == TRAINING)
    snprintf(text, sizeof text,
             "HloModule bn\n\nENTRY e {\n  x = %s parameter(0)\n  s = %s parameter(1)\n  o = %s parameter(2)\n"
             "  ROOT r = (%s, %s, %s) batch-norm-training(x, s, o), epsilon=0.001, feature_index=%d\n}\n",
             xs, cs, cs, xs, cs, cs, f);
  else if (kind == INFERENCE)
    snprintf(text, sizeof text,
             "HloModule bn\n\nENTRY e {\n  x = %s parameter(0)\n  s = %s parameter(1)\n  o = %s parameter(2)\n"
             "  m = %s parameter(3)\n  v = %s parameter(4)\n"
             "  ROOT r = %s batch-norm-inference(x, s, o, m, v), epsilon=1e-05, feature_index=%d\n}\n",
             xs, cs, cs, cs, cs, xs, f);
  else
    snprintf(text, sizeof text,
             "HloModule bn\n\nENTRY e {\n  x = %s parameter(0)\n  s = %s parameter(1)\n  m = %s parameter(2)\n"
             "  v = %s parameter(3)\n  dy = %s parameter(4)\n"
             "  ROOT r = (%s, %s, %s) batch-norm-grad(x, s, m, v, dy), epsilon=0.001, feature_index=%d\n}\n",
             xs, cs, cs, cs, xs, xs, cs, cs, f);
  kiln_hlo_module_t *m = pt_parse(text);
  kiln_arena_t aa;
  kiln_arena_init(&aa);
  kiln_hlo_computation_t *e = m->entry;
  kiln_literal_t *args[5];
  int n = e->num_parameters;
  for (int i = 0; i < n; i++) {
    const kiln_shape_t *s = e->parameters[i]->shape;
    const char *pn = e->parameters[i]->name;
    if (!strcmp(pn, "x")) args[i] = random_literal(&aa, s, center - 1, center + 1);
    else if (!strcmp(pn, "m")) args[i] = random_literal(&aa, s, center - 0.1, center + 0.1);
    else if (!strcmp(pn, "v")) args[i] = random_literal(&aa, s, 0.25, 0.4);
    else args[i] = random_literal(&aa, s, -1, 1);
  }
  double err = et_error_after(m, args, n, pipeline ? NULL : "batch_norm_expander", kOps, 3, false);
  if (err < 0 || err > 1)
    print_error("%s %s feature %d (features %s) center %g: error %g of the tolerance\n",
                kind == TRAINING ? "training" : kind == INFERENCE ? "inference" : "grad", xs, f, ftype, center, err);
  kiln_arena_destroy(&aa);
  kiln_hlo_module_destroy(m);
  return err;
}

static void test_every_op_feature_position_and_type_matches_the_evaluator(void **state) {
  static const int64_t shapes[][4] = {{2, 3, 4, 5}, {7, 1, 3, 2}, {16, 8, 4, 4}};
  static const char *const types[][2] = {{"f32", "f32"}, {"f64", "f64"}, {"f16", "f16"}, {"bf16", "bf16"}};
  int cases = 0, bad = 0;
  double worst = 0;
  for (int k = 0; k < 3; k++)
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
      for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int f = 0; f < 4; f++) {
          double e = check_case((bn_kind_t)k, types[t][0], types[t][1], 4, shapes[s], f, 0, false);
          cases++;
          bad += e < 0 || e > 1;
          if (e > worst) worst = e;
        }
  printf("batch norm expansion: %d of %d cases within tolerance (worst %.3g of the tolerance)\n", cases - bad, cases,
         worst);
  assert_int_equal(bad, 0);
}

/* Rank 1 and 2 operands, the feature dimension alone, and a mean of 1000 with a spread of
 * 1: sum(x^2)/n - mean^2 would lose every significant digit of the variance in f32. (Not
 * f64 with a huge mean: there the evaluator's own one-pass mean is the less accurate.) */
static void test_small_ranks_and_large_means_keep_the_variance_accurate(void **state) {
  const int64_t d1[1] = {6}, d2[2] = {300, 3}, d3[2] = {4, 257};
  double worst = 0;
  for (int k = 0; k < 3; k++) {
    double e[4] = {check_case((bn_kind_t)k, "f32", "f32", 1, d1, 0, 1000, false),
                   check_case((bn_kind_t)k, "f32", "f32", 2, d2, 1, 1000, false),
                   check_case((bn_kind_t)k, "f32", "f32", 2, d3, 0, 1000, false),
                   check_case((bn_kind_t)k, "bf16", "bf16", 2, d2, 1, 100, false)};
    for (int i = 0; i < 4; i++) {
      assert_true(e[i] >= 0 && e[i] <= 1);
      if (e[i] > worst) worst = e[i];
    }
  }
  printf("large means: worst %.3g of the tolerance\n", worst);
}

/* The whole pipeline (expansion, layouts, fusion, ...) keeps batch norm's results. */
static void test_pipeline_expands_and_keeps_the_results(void **state) {
  const int64_t dims[4] = {4, 6, 5, 3};
  for (int k = 0; k < 3; k++)
    for (int f = 0; f < 4; f += 3) {
      double e = check_case((bn_kind_t)k, "f32", "f32", 4, dims, f, 0.5, true);
      assert_true(e >= 0 && e <= 1);
    }
}

/* Training's mean of infinite values stays infinite: the sums take x - shift, and a shift of
 * -inf made every -inf element NaN (fuzz-2014028: the mean of all -inf came out NaN where
 * sum(x) / per, the evaluator's, is -inf). Feature 0 is all -inf, feature 1 starts with +inf,
 * feature 2 is finite. */
static void test_training_mean_of_infinite_values_stays_infinite(void **state) {
  (void)state;
  kiln_hlo_module_t *m = pt_parse(
      "HloModule bn_inf\n\nENTRY e {\n  x = f32[4,3] parameter(0)\n  s = f32[3] parameter(1)\n"
      "  o = f32[3] parameter(2)\n"
      "  ROOT r = (f32[4,3], f32[3], f32[3]) batch-norm-training(x, s, o), epsilon=0.001, "
      "feature_index=1\n}\n");
  kiln_arena_t aa, a0, a1;
  kiln_arena_init(&aa);
  kiln_arena_init(&a0);
  kiln_arena_init(&a1);
  const double xs[12] = {-INFINITY, INFINITY, 1, -INFINITY, 1, 2, -INFINITY, 2, 3, -INFINITY, 3, 4};
  kiln_literal_t *args[3];
  for (int i = 0; i < 3; i++) {
    args[i] = kiln_literal_make(&aa, kiln_shape_clone(&aa, m->entry->parameters[i]->shape));
    for (int64_t j = 0; j < args[i]->num_elements; j++)
      kiln_literal_set_f64(args[i], j, i ? 1 : xs[j]);
  }
  kiln_literal_t *before = pt_eval(m, args, 3, &a0);
  et_run(m, "batch_norm_expander", kOps, 3);
  kiln_literal_t *after = pt_eval(m, args, 3, &a1);
  const double want[3] = {-INFINITY, INFINITY, 2.5};
  for (int i = 0; i < 3; i++) {
    double b = kiln_literal_get_f64(kiln_run_report_leaf(before, 1), i);
    double a = kiln_literal_get_f64(kiln_run_report_leaf(after, 1), i);
    printf("mean of feature %d: evaluator %g, expanded %g\n", i, b, a);
    assert_true(b == want[i]);
    assert_true(a == want[i]);
  }
  kiln_arena_destroy(&a1);
  kiln_arena_destroy(&a0);
  kiln_arena_destroy(&aa);
  kiln_hlo_module_destroy(m);
}

/* Malformed instructions (no feature_index, a feature operand of the wrong length) stay. */
static void test_malformed_batch_norms_are_left_alone(void **state) {
  const char *texts[] = {
      "HloModule a\n\nENTRY e {\n  x = f32[2,3] parameter(0)\n  s = f32[3] parameter(1)\n  o = f32[3] parameter(2)\n"
      "  ROOT r = (f32[2,3], f32[3], f32[3]) batch-norm-training(x, s, o), epsilon=0.001\n}\n",
      "HloModule b\n\nENTRY e {\n  x = f32[2,3] parameter(0)\n  s = f32[2] parameter(1)\n  o = f32[2] parameter(2)\n"
      "  ROOT r = (f32[2,3], f32[2], f32[2]) batch-norm-training(x, s, o), epsilon=0.001, feature_index=1\n}\n",
      "HloModule c\n\nENTRY e {\n  x = s32[2,3] parameter(0)\n  s = f32[3] parameter(1)\n  o = f32[3] parameter(2)\n"
      "  m = f32[3] parameter(3)\n  v = f32[3] parameter(4)\n"
      "  ROOT r = s32[2,3] batch-norm-inference(x, s, o, m, v), epsilon=0.001, feature_index=1\n}\n",
  };
  et_expect_unchanged(texts, (int)(sizeof texts / sizeof texts[0]), kiln_pass_batch_norm_expander);
}

/* Corpus modules with batch-norm ops that verify and evaluate: the same results within
 * tolerance after the expander and after the pipeline, on fake arguments. */
static void test_corpus_batch_norm_modules_keep_their_results(void **state) {
  const char *files[] = {"xla/xla__hlo__translate__hlo_to_mhlo__tests__import.hlo",
                         "xla/xla__hlo__translate__hlo_to_mhlo__tests__import_emit_stablehlo.hlo"};
  int found, compared, rejected;
  et_check_corpus(files, 2, kOps, 3, "batch_norm_expander", false, &found, &compared, &rejected);
  printf("corpus: %d modules with batch norm, %d compared after the expander and after the pipeline\n", found,
         compared);
  assert_int_equal(compared + rejected, found);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_op_feature_position_and_type_matches_the_evaluator),
      cmocka_unit_test(test_small_ranks_and_large_means_keep_the_variance_accurate),
      cmocka_unit_test(test_pipeline_expands_and_keeps_the_results),
      cmocka_unit_test(test_training_mean_of_infinite_values_stays_infinite),
      cmocka_unit_test(test_malformed_batch_norms_are_left_alone),
      cmocka_unit_test(test_corpus_batch_norm_modules_keep_their_results),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
