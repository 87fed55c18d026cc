/* rng_expander: modules with the stateful rng op compile and run on the host device, and
 * their results have the distribution asked for: uniform f32 / bf16 / f16 / f64 in [a, b)
 * with the right mean and many distinct values, uniform integers in [a, b) hitting every
 * value of a small range, normal f32 / f64 with mean a and standard deviation b; two rng
 * ops of a module and two runs of an executable give different values, the same run of two
 * compiles the same ones; forms the pass does not take are left for later stages to name;
 * the corpus modules that hold an rng compile and run. */
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
#include "compiler/eval/eval.h"
#include "compiler/thunks/compile.h"
#include "runtime/host/host_device.h"
#include "tools/common/compare.h"
#include "tools/common/device_run.h"
#include "tools/common/hlo_file.h"

#define N 100000

static kiln_device_t *g_dev;

static int setup(void **state) { return kiln_host_device_create(2, &g_dev) ? -1 : 0; }
static int teardown(void **state) {
  kiln_device_destroy(g_dev);
  return 0;
}

/* Runs the module `text` (no parameters) `repeat` times on the host; the last run's result
 * lives in `arena`. */
static kiln_literal_t *run_text(const char *text, int repeat, kiln_arena_t *arena) {
  kiln_hlo_module_t *m = pt_parse(text);
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = g_dev;
  o.repeat = repeat;
  kiln_device_run_report_t rep;
  kiln_literal_t *got = NULL;
  kiln_status s = kiln_device_run_module(m, NULL, 0, &o, arena, &got, &rep);
  kiln_hlo_module_destroy(m);
  if (s) fail_msg("device run: %s", kiln_status_message(s));
  return got;
}

/* `type`[n] rng(lo, hi) with the given distribution, as the module's root. */
static kiln_literal_t *run_rng(const char *type, const char *lo, const char *hi, const char *dist, int64_t n,
                               kiln_arena_t *arena) {
  char text[512];
  snprintf(text, sizeof text,
           "HloModule r\n\nENTRY e {\n  lo = %s[] constant(%s)\n  hi = %s[] constant(%s)\n"
           "  ROOT r = %s[%lld] rng(lo, hi), distribution=%s\n}\n",
           type, lo, type, hi, type, (long long)n, dist);
  kiln_literal_t *l = run_text(text, 1, arena);
  assert_int_equal(l->num_elements, n);
  return l;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

typedef struct moments {
  double min, max, mean, sd;
  int64_t distinct;
} moments_t;

static moments_t moments_of(const kiln_literal_t *l) {
  int64_t n = l->num_elements;
  double *v = kiln_malloc(sizeof(double) * (size_t)n);
  moments_t mo = {INFINITY, -INFINITY, 0, 0, 0};
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; i++) {
    v[i] = kiln_literal_get_f64(l, i);
    sum += v[i];
    if (v[i] < mo.min) mo.min = v[i];
    if (v[i] > mo.max) mo.max = v[i];
  }
  mo.mean = sum / (double)n;
  for (int64_t i = 0; i < n; i++) sq += (v[i] - mo.mean) * (v[i] - mo.mean);
  mo.sd = sqrt(sq / (double)(n - 1));
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  for (int64_t i = 0; i < n; i++) mo.distinct += i == 0 || v[i] != v[i - 1];
  kiln_free(v);
  return mo;
}

/* Every element in [a, b), mean within 5 standard errors of (a + b) / 2, standard deviation
 * within 2% of (b - a) / sqrt(12), at least `min_distinct` distinct values. */
static void expect_uniform_float(const char *type, double a, double b, int64_t min_distinct) {
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  char lo[64], hi[64];
  snprintf(lo, sizeof lo, "%.17g", a);
  snprintf(hi, sizeof hi, "%.17g", b);
  moments_t mo = moments_of(run_rng(type, lo, hi, "rng_uniform", N, &arena));
  kiln_arena_destroy(&arena);
  double sd = (b - a) / sqrt(12.0);
  printf("uniform %s [%g, %g): min %.9g max %.9g mean %.6f (want %.6f +- %.6f) sd %.6f (want %.6f) distinct %lld\n",
         type, a, b, mo.min, mo.max, mo.mean, (a + b) / 2, 5 * sd / sqrt(N), mo.sd, sd, (long long)mo.distinct);
  assert_true(mo.min >= a && mo.max < b);
  assert_true(fabs(mo.mean - (a + b) / 2) < 5 * sd / sqrt(N));
  assert_true(fabs(mo.sd - sd) < 0.02 * sd);
  assert_true(mo.distinct >= min_distinct);
}

static void test_uniform_f32_is_in_range_with_the_mean_of_the_range_and_many_distinct_values(void **state) {
  expect_uniform_float("f32", -1.5, 2.5, 95000);
  expect_uniform_float("f32", 1000.0, 1000.5, 8000); /* 8192 values 2^-14 apart: b is reached by rounding */
}

static void test_uniform_f64_is_in_range_with_all_values_distinct(void **state) {
  expect_uniform_float("f64", -3.0, 7.0, N - 5);
}

static void test_uniform_bf16_and_f16_stay_below_b_where_rounding_reaches_it(void **state) {
  /* bf16 has 128 values in [0.5, 1) (f32 results round up to 1 for the top ones), f16 1024 */
  expect_uniform_float("bf16", 0.5, 1.0, 128);
  expect_uniform_float("f16", 0.5, 1.0, 1024);
  expect_uniform_float("bf16", -4.0, 4.0, 500);
}

/* Every element of `type`[N] rng(lo, hi) is in [lo, hi) and each of the hi - lo values
 * (when few) is hit about N / (hi - lo) times. */
static void expect_uniform_int(const char *type, int64_t lo, int64_t hi, bool every_value) {
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  char a[32], b[32];
  snprintf(a, sizeof a, "%lld", (long long)lo);
  snprintf(b, sizeof b, "%lld", (long long)hi);
  kiln_literal_t *l = run_rng(type, a, b, "rng_uniform", N, &arena);
  bool unsigned_type = type[0] == 'u';
  int64_t counts[64] = {0};
  double sum = 0;
  for (int64_t i = 0; i < N; i++) {
    int64_t v = unsigned_type ? (int64_t)kiln_literal_get_u64(l, i) : kiln_literal_get_s64(l, i);
    if (v < lo || v >= hi) fail_msg("%s element %lld = %lld outside [%lld, %lld)", type, (long long)i, (long long)v,
                                    (long long)lo, (long long)hi);
    if (every_value) counts[v - lo]++;
    sum += (double)v;
  }
  kiln_arena_destroy(&arena);
  double range = (double)hi - (double)lo, mean = sum / N;
  printf("uniform %s [%lld, %lld): mean %.3f (want %.3f)\n", type, (long long)lo, (long long)hi, mean,
         (double)lo + (range - 1) / 2);
  assert_true(fabs(mean - ((double)lo + (range - 1) / 2)) < 5 * range / sqrt(12.0 * N));
  if (every_value)
    for (int64_t k = 0; k < hi - lo; k++) {
      double want = (double)N / range;
      if (fabs((double)counts[k] - want) > 6 * sqrt(want))
        fail_msg("%s value %lld hit %lld times, want about %.0f", type, (long long)(lo + k), (long long)counts[k],
                 want);
    }
}

static void test_uniform_integers_are_in_range_and_hit_every_value(void **state) {
  expect_uniform_int("s32", -3, 5, true);
  expect_uniform_int("u8", 200, 255, true);
  expect_uniform_int("s8", -128, -100, true);
  expect_uniform_int("s16", -7, 9, true);
  expect_uniform_int("u32", 4000000000ll, 4000000040ll, true);
  expect_uniform_int("s64", -(1ll << 40), 1ll << 40, false);
  expect_uniform_int("u64", 0, 1, true); /* a single value */
}

static void test_uniform_with_b_not_above_a_gives_a(void **state) {
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *i = run_rng("s32", "7", "7", "rng_uniform", 1000, &arena);
  kiln_literal_t *j = run_rng("s32", "9", "-4", "rng_uniform", 1000, &arena);
  kiln_literal_t *f = run_rng("f32", "2.5", "2.5", "rng_uniform", 1000, &arena);
  for (int64_t k = 0; k < 1000; k++) {
    assert_int_equal(kiln_literal_get_s64(i, k), 7);
    assert_int_equal(kiln_literal_get_s64(j, k), 9);
    assert_true(kiln_literal_get_f64(f, k) == 2.5);
  }
  kiln_arena_destroy(&arena);
}

static void expect_normal(const char *type, double a, double b) {
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  char lo[64], hi[64];
  snprintf(lo, sizeof lo, "%.17g", a);
  snprintf(hi, sizeof hi, "%.17g", b);
  kiln_literal_t *l = run_rng(type, lo, hi, "rng_normal", N, &arena);
  moments_t mo = moments_of(l);
  int64_t within1 = 0;
  for (int64_t i = 0; i < N; i++) within1 += fabs(kiln_literal_get_f64(l, i) - a) < b;
  kiln_arena_destroy(&arena);
  printf("normal %s (%g, %g): mean %.5f sd %.5f min %.4f max %.4f within 1 sd %.4f distinct %lld\n", type, a, b,
         mo.mean, mo.sd, mo.min, mo.max, (double)within1 / N, (long long)mo.distinct);
  assert_true(isfinite(mo.min) && isfinite(mo.max));
  assert_true(fabs(mo.mean - a) < 5 * b / sqrt(N));
  assert_true(fabs(mo.sd - b) < 0.02 * b);
  assert_true(fabs((double)within1 / N - 0.6827) < 0.01); /* the shape, not just two moments */
  assert_true(mo.min < a - 3 * b && mo.max > a + 3 * b);
  assert_true(mo.distinct > N * 9 / 10);
}

static void test_normal_has_mean_a_and_standard_deviation_b(void **state) {
  expect_normal("f32", 3.0, 2.0);
  expect_normal("f64", -1.0, 0.5);
}

static double mismatch_fraction(const kiln_literal_t *x, const kiln_literal_t *y) {
  assert_int_equal(x->num_elements, y->num_elements);
  int64_t diff = 0;
  for (int64_t i = 0; i < x->num_elements; i++) diff += kiln_literal_get_f64(x, i) != kiln_literal_get_f64(y, i);
  return (double)diff / (double)x->num_elements;
}

static const char kTwoRngs[] =
    "HloModule two\n\nENTRY e {\n  lo = f32[] constant(0)\n  hi = f32[] constant(1)\n"
    "  r1 = f32[4096] rng(lo, hi), distribution=rng_uniform\n"
    "  r2 = f32[4096] rng(lo, hi), distribution=rng_uniform\n"
    "  ROOT t = (f32[4096], f32[4096]) tuple(r1, r2)\n}\n";

static void test_two_rngs_and_two_runs_give_different_values(void **state) {
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *once = run_text(kTwoRngs, 1, &arena);
  kiln_literal_t *again = run_text(kTwoRngs, 1, &arena);
  kiln_literal_t *second_run = run_text(kTwoRngs, 2, &arena);
  assert_int_equal(once->num_tuple_elements, 2);
  double within = mismatch_fraction(once->tuple_elements[0], once->tuple_elements[1]);
  double across = mismatch_fraction(once->tuple_elements[0], second_run->tuple_elements[0]);
  printf("two rngs: %.4f of elements differ; run 2 vs run 1: %.4f differ\n", within, across);
  assert_true(within > 0.99);
  assert_true(across > 0.99);
  assert_true(mismatch_fraction(second_run->tuple_elements[1], once->tuple_elements[1]) > 0.99);
  /* a fresh compile starts from the same state: its first run repeats */
  assert_true(mismatch_fraction(once->tuple_elements[0], again->tuple_elements[0]) == 0);
  assert_true(mismatch_fraction(once->tuple_elements[1], again->tuple_elements[1]) == 0);
  kiln_arena_destroy(&arena);
}

static void test_expansion_uses_the_generator_state_and_threefry_bits(void **state) {
  kiln_hlo_module_t *m = pt_parse(kTwoRngs);
  pt_run(m, "rng_expander,dce");
  assert_int_equal(pt_count(m, KILN_OP_RNG), 0);
  assert_int_equal(pt_count(m, KILN_OP_RNG_GET_AND_UPDATE_STATE), 2);
  assert_int_equal(pt_count(m, KILN_OP_RNG_BIT_GENERATOR), 2);
  pt_expect_text(m, "delta=4096", true);
  pt_expect_text(m, "algorithm=rng_three_fry", true);
  pt_run(m, "rng_bit_generator_expander,dce");
  assert_int_equal(pt_count(m, KILN_OP_RNG_BIT_GENERATOR), 0);
  assert_int_equal(pt_count(m, KILN_OP_RNG_GET_AND_UPDATE_STATE), 2);
  kiln_hlo_module_destroy(m);
}

/* `text` keeps its rng through the pass, and compiling it fails naming rng. */
static void expect_left_alone(const char *text) {
  kiln_hlo_module_t *m = pt_parse(text);
  int before = pt_count(m, KILN_OP_RNG);
  assert_true(before > 0);
  pt_run(m, "rng_expander");
  assert_int_equal(pt_count(m, KILN_OP_RNG), before);
  assert_int_equal(pt_count(m, KILN_OP_RNG_GET_AND_UPDATE_STATE), 0);
  kiln_hlo_module_destroy(m);
  m = pt_parse(text);
  kiln_executable_desc_t *d = NULL;
  kiln_status s = kiln_compile_module(m, NULL, &d, NULL);
  kiln_hlo_module_destroy(m);
  if (!s) {
    kiln_executable_desc_destroy(d);
    fail_msg("compiled:\n%s", text);
  }
  printf("left alone, compile says: %s\n", kiln_status_message(s));
  assert_non_null(strstr(kiln_status_message(s), "rng"));
  kiln_status_free(s);
}

static void test_forms_it_does_not_take_are_left_for_later_stages_to_name(void **state) {
  /* complex */
  expect_left_alone("HloModule a\n\nENTRY e {\n  lo = c64[] constant((0, 0))\n  hi = c64[] constant((1, 1))\n"
                    "  ROOT r = c64[16] rng(lo, hi), distribution=rng_uniform\n}\n");
  /* pred */
  expect_left_alone("HloModule b\n\nENTRY e {\n  lo = pred[] constant(false)\n  hi = pred[] constant(true)\n"
                    "  ROOT r = pred[16] rng(lo, hi), distribution=rng_uniform\n}\n");
  /* inside a fusion: no generator state there */
  expect_left_alone("HloModule c\n\nf {\n  lo = f32[] parameter(0)\n  hi = f32[] parameter(1)\n"
                    "  ROOT r = f32[16] rng(lo, hi), distribution=rng_uniform\n}\n\n"
                    "ENTRY e {\n  lo = f32[] constant(0)\n  hi = f32[] constant(1)\n"
                    "  ROOT fu = f32[16] fusion(lo, hi), kind=kLoop, calls=f\n}\n");
}

/* The corpus files holding rng ops: every module with one compiles and runs on the host
 * (the values differ from the evaluator's own generator, so they are not compared). */
/* The evaluator draws as the expansion does (eval_rng.c): a compiled module's rng values
 * equal the reference's under the same seed, for every result type the pass takes, a
 * scalar, an odd shape (the Threefry words split along its largest dim) and a normal's pairs.
 * (Of two independent rngs in one module, which draws first is the schedule's choice, which
 * the evaluator does not know; XLA leaves that order unspecified too.) */
static void test_compiled_rng_matches_the_evaluator(void **state) {
  static const char *const kForms[] = {
      "f32[1000] rng(f32[] constant(-2), f32[] constant(3)), distribution=rng_uniform",
      "bf16[3,5] rng(bf16[] constant(0), bf16[] constant(1)), distribution=rng_uniform",
      "f16[7] rng(f16[] constant(1), f16[] constant(1.01)), distribution=rng_uniform",
      "f64[2,3,5] rng(f64[] constant(0), f64[] constant(1)), distribution=rng_uniform",
      "f32[] rng(f32[] constant(5), f32[] constant(2)), distribution=rng_normal",
      "f32[9,31] rng(f32[] constant(5), f32[] constant(2)), distribution=rng_normal",
      "f64[64] rng(f64[] constant(0), f64[] constant(1)), distribution=rng_normal",
      "bf16[33] rng(bf16[] constant(0), bf16[] constant(1)), distribution=rng_normal",
      "s8[100] rng(s8[] constant(-100), s8[] constant(120)), distribution=rng_uniform",
      "u16[100] rng(u16[] constant(7), u16[] constant(9)), distribution=rng_uniform",
      "s32[10,10] rng(s32[] constant(-1000000), s32[] constant(2000000000)), "
      "distribution=rng_uniform",
      "s64[50] rng(s64[] constant(-9), s64[] constant(-5)), distribution=rng_uniform",
      "u64[50] rng(u64[] constant(1), u64[] constant(18446744073709551615)), "
      "distribution=rng_uniform",
  };
  for (size_t k = 0; k < sizeof kForms / sizeof kForms[0]; k++) {
    for (uint64_t seed = 0; seed < 3; seed++) {
      char text[1024];
      const char *form = kForms[k];
      snprintf(text, sizeof text, "HloModule r\n\nENTRY e {\n  ROOT a = %s\n}\n", form);
      kiln_hlo_module_t *m = pt_parse(text);
      kiln_arena_t arena;
      kiln_arena_init(&arena);
      kiln_eval_options_t eo = {0};
      eo.rng_seed = seed;
      kiln_literal_t *want = NULL, *got = NULL;
      kiln_status s = kiln_eval_module(m, &eo, 0, NULL, &arena, &want);
      if (s) fail_msg("%s: evaluator: %s", form, kiln_status_message(s));
      kiln_device_run_options_t o;
      memset(&o, 0, sizeof o);
      o.device = g_dev;
      o.rng_seed = seed;
      kiln_device_run_report_t rep;
      s = kiln_device_run_module(m, NULL, 0, &o, &arena, &got, &rep);
      if (s) fail_msg("%s: device run: %s", form, kiln_status_message(s));
      kiln_compare_report_t cr;
      if (!kiln_compare_literals(want, got, NULL, &cr))
        fail_msg("%s (seed %llu): %lld of %lld elements differ; %s", form, (unsigned long long)seed,
                 (long long)cr.mismatches, (long long)cr.elements, cr.first);
      kiln_arena_destroy(&arena);
      kiln_hlo_module_destroy(m);
    }
  }
}

static void test_corpus_modules_with_rng_compile_and_run(void **state) {
  static const char *const kFiles[] = {
      "xla/xla__hlo__translate__hlo_to_mhlo__tests__import.hlo",
      "xla/xla__hlo__translate__hlo_to_mhlo__tests__frontend_attributes.hlo",
      "xla/xla__hlo__translate__hlo_to_mhlo__tests__import_emit_stablehlo.hlo",
      "real/HeydrichBeillschmidt__alpa_trimming__tests__hlo__module_0096.func_shard_parallel__2.68."
      "before_optimizations.txt",
      "real/HeydrichBeillschmidt__alpa_trimming__tests__hlo__module_0095.func_shard_parallel__2.68.0011.spmd-"
      "partitioner.after_auto_sharding.before_slice_auto_sharded_stages.txt",
  };
  int ran = 0, failed = 0;
  for (size_t f = 0; f < sizeof kFiles / sizeof kFiles[0]; f++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", kiln_corpus_dir(), kFiles[f]);
    kiln_hlo_file_t *file = NULL;
    kiln_status s = kiln_hlo_file_load(path, &file);
    if (s) fail_msg("%s: %s", path, kiln_status_message(s));
    for (int i = 0; i < file->num_modules; i++) {
      kiln_hlo_module_t *m = file->modules[i];
      if (!pt_count(m, KILN_OP_RNG)) continue;
      kiln_arena_t arena;
      kiln_arena_init(&arena);
      kiln_literal_t **args = NULL, *got = NULL;
      int n = 0;
      s = kiln_fake_args_make(m, NULL, &arena, &args, &n);
      kiln_device_run_options_t o;
      memset(&o, 0, sizeof o);
      o.device = g_dev;
      kiln_device_run_report_t rep;
      if (!s) s = kiln_device_run_module(m, args, n, &o, &arena, &got, &rep);
      printf("%s module %s: %s\n", kFiles[f], m->name, s ? kiln_status_message(s) : "ran");
      failed += s != NULL;
      ran++;
      kiln_status_free(s);
      kiln_arena_destroy(&arena);
    }
    kiln_hlo_file_free(file);
  }
  printf("corpus modules with rng: %d ran, %d failed\n", ran - failed, failed);
  assert_true(ran >= 6);
  assert_int_equal(failed, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(
          test_uniform_f32_is_in_range_with_the_mean_of_the_range_and_many_distinct_values),
      cmocka_unit_test(test_uniform_f64_is_in_range_with_all_values_distinct),
      cmocka_unit_test(test_uniform_bf16_and_f16_stay_below_b_where_rounding_reaches_it),
      cmocka_unit_test(test_uniform_integers_are_in_range_and_hit_every_value),
      cmocka_unit_test(test_uniform_with_b_not_above_a_gives_a),
      cmocka_unit_test(test_normal_has_mean_a_and_standard_deviation_b),
      cmocka_unit_test(test_two_rngs_and_two_runs_give_different_values),
      cmocka_unit_test(test_expansion_uses_the_generator_state_and_threefry_bits),
      cmocka_unit_test(test_forms_it_does_not_take_are_left_for_later_stages_to_name),
      cmocka_unit_test(test_compiled_rng_matches_the_evaluator),
      cmocka_unit_test(test_corpus_modules_with_rng_compile_and_run),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
