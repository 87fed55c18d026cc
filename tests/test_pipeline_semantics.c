/* Semantics preserved: every evaluable whole module of the corpus (xla/ and real/) gives
 * the same results before and after the whole optimization pipeline (kiln_pipeline_run,
 * as far as its passes are registered), on the reference evaluator with the same fake
 * arguments (tools/common/fake_args.h, seed 42).
 *
 * Comparison, per result leaf: integers, pred and complex-integer data bitwise; floats
 * bitwise, or else within a tolerance (|after - before| <= tol * max(1, |before|), tol =
 * 1e-12 for f64, 1e-5 for f32, 1e-3 for f16, 1e-2 for bf16, 0.125 for 8-bit and narrower
 * floats; NaN must stay NaN, infinities must match exactly). Every pass written so far is
 * exact, so the test prints how many leaves needed the tolerance, and which modules.
 * Except tree_reduction, which reassociates reductions past the race-free bounds, as XLA's
 * semantics allow (the order of a reduce is unspecified): a half-precision (16 bits or fewer)
 * float sum of many elements can move further than any tolerance (an f16 sum of 2^20 elements:
 * 317 in order, 297 as a tree, 289.42 exactly). A module with such a reduce
 * that differs is run again with tree_reduction disabled; when that matches it is counted as
 * reassociated, listed, and not a failure.
 *
 * A module is left out (and printed with the reason) when it
 *   - is not eligible under test_corpus_eval's rules (tools/common/corpus_eval.h: custom-calls,
 *     host/peer transfers, multi-participant collectives, elided constants),
 *   - has the stateful `rng` or rng-get-and-update-state (its values depend on evaluation
 *     order, which the pipeline may change),
 *   - costs more than this test's bound to interpret (kiln_corpus_eval_too_costly with a
 *     lower bound than test_corpus_eval's, since each module is evaluated twice),
 *   - is sampled out (KILN_CORPUS_SAMPLE=N, tools/common/corpus.h), or
 *   - fails to evaluate before the pipeline (the evaluator's limitation, not the
 *     pipeline's: test_corpus_eval reports those).
 * Everything else must evaluate after the pipeline and match; a pipeline error, a verifier
 * error or an evaluation error after the pipeline is a failure.
 *
 * A module whose canonical text (kiln_hlo_module_print) is the same as a module's checked
 * earlier in the walk is not run again: the pipeline, the fake arguments and the evaluator
 * are deterministic, so its check is the earlier one (several corpus files are copies of one
 * test module, e.g. five hlo_opt/benchmark files holding the same 30M-element transpose).
 * Such repeats are listed with the module they repeat and counted apart.
 *
 * Runtime knobs (environment):
 *   KILN_PIPELINE_MAX_COST  element-operation bound (default 4e8; 2e7 under ASan),
 *   KILN_CORPUS_SAMPLE=N    test about one module in N (the sanitizer run in CI sets it),
 *   KILN_CORPUS_VERBOSE=1   print each module as it starts. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/analysis/reduction_rule.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/pipeline.h"
#include "tools/common/corpus.h"
#include "tools/common/corpus_eval.h"
#include "tools/common/fake_args.h"
#include "tools/common/hlo_file.h"
#include "tools/common/run_report.h"

#define MAX_WHILE_ITERATIONS 20000

static double env_double(const char *name, double dflt) {
  const char *v = getenv(name);
  return v && *v ? strtod(v, NULL) : dflt;
}

/* test_corpus_eval's rules, plus: no stateful rng. */
static const char *ineligible_reason(const kiln_hlo_module_t *m) {
  const char *why = kiln_corpus_eval_ineligible_reason(m);
  if (why) return why;
  for (size_t c = 0; c < m->computations.len; c++) {
    const kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++) {
      kiln_hlo_opcode_t op = comp->instructions.data[i]->opcode;
      if (op == KILN_OP_RNG || op == KILN_OP_RNG_GET_AND_UPDATE_STATE)
        return "stateful rng (values depend on evaluation order)";
    }
  }
  return NULL;
}

/* ---- comparison ---- */

static double float_tolerance(kiln_elem_type_t t) {
  switch (t) {
    case KILN_F64:
    case KILN_C128:
      return 1e-12;
    case KILN_F32:
    case KILN_C64:
      return 1e-5;
    case KILN_F16:
      return 1e-3;
    case KILN_BF16:
      return 1e-2;
    default:
      return 0.125;
  }
}

static bool close_enough(double a, double b, double tol) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return a == b;
  return fabs(a - b) <= tol * fmax(1.0, fabs(a));
}

typedef enum { SAME_BITWISE, SAME_WITHIN_TOLERANCE, DIFFERENT } cmp_t;

/* Compares two results leaf by leaf; on DIFFERENT, `why` says where. */
static cmp_t compare_results(const kiln_literal_t *before, const kiln_literal_t *after, char *why,
                             size_t why_n) {
  int n = kiln_run_report_num_leaves(before);
  if (n != kiln_run_report_num_leaves(after)) {
    snprintf(why, why_n, "%d result leaves before, %d after", n, kiln_run_report_num_leaves(after));
    return DIFFERENT;
  }
  cmp_t worst = SAME_BITWISE;
  for (int i = 0; i < n; i++) {
    const kiln_literal_t *a = kiln_run_report_leaf(before, i), *b = kiln_run_report_leaf(after, i);
    if (!kiln_shape_compatible(a->shape, b->shape)) {
      char *sa = kiln_shape_to_string(a->shape, false), *sb = kiln_shape_to_string(b->shape, false);
      snprintf(why, why_n, "leaf %d: shape %s before, %s after", i, sa, sb);
      kiln_free(sa);
      kiln_free(sb);
      return DIFFERENT;
    }
    if (!kiln_shape_is_array(a->shape) || a->num_elements == 0) continue;
    size_t bytes = (size_t)a->num_elements * kiln_elem_type_storage_bytes(a->shape->type);
    if (a->data && b->data && memcmp(a->data, b->data, bytes) == 0) continue;
    kiln_elem_type_t t = a->shape->type;
    bool is_float = kiln_elem_type_is_float(t), is_complex = kiln_elem_type_is_complex(t);
    if (!a->data || !b->data || (!is_float && !is_complex)) {
      int64_t k = 0;
      while (a->data && b->data && k < a->num_elements &&
             kiln_literal_get_s64(a, k) == kiln_literal_get_s64(b, k))
        k++;
      snprintf(why, why_n, "leaf %d (%s): element %lld differs: %lld before, %lld after", i,
               kiln_elem_type_name(t), (long long)k,
               (long long)(a->data && k < a->num_elements ? kiln_literal_get_s64(a, k) : 0),
               (long long)(b->data && k < b->num_elements ? kiln_literal_get_s64(b, k) : 0));
      return DIFFERENT;
    }
    double tol = float_tolerance(t);
    for (int64_t k = 0; k < a->num_elements; k++) {
      double ar, ai = 0, br, bi = 0;
      if (is_complex) {
        kiln_literal_get_c128(a, k, &ar, &ai);
        kiln_literal_get_c128(b, k, &br, &bi);
      } else {
        ar = kiln_literal_get_f64(a, k);
        br = kiln_literal_get_f64(b, k);
      }
      if (!close_enough(ar, br, tol) || !close_enough(ai, bi, tol)) {
        snprintf(why, why_n, "leaf %d (%s): element %lld: %.9g before, %.9g after (tolerance %g)", i,
                 kiln_elem_type_name(t), (long long)k, ar, br, tol);
        return DIFFERENT;
      }
    }
    worst = SAME_WITHIN_TOLERANCE;
  }
  return worst;
}

/* ---- the run ---- */

typedef struct run_stats {
  int bitwise, tolerance, failed, skipped, repeats, reassociated;
  int64_t instrs_before, instrs_after; /* over the compared modules */
  double max_cost;
  kiln_strbuf_t failures, skips, tolerant, repeated, reassociations;
  kiln_corpus_repeats_t checked; /* the modules checked */
} run_stats_t;

/* Whether `m` has a reduce of 16-bit or narrower floats past the race-free bounds (one
 * tree_reduction reassociates). */
static bool has_long_half_reduce(const kiln_hlo_module_t *m) {
  for (size_t c = 0; c < m->computations.len; c++) {
    const kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++) {
      const kiln_hlo_instruction_t *in = comp->instructions.data[i];
      kiln_reduction_dims_t rd;
      if (in && in->opcode == KILN_OP_REDUCE && kiln_shape_is_array(in->shape) &&
          kiln_elem_type_is_float(in->shape->type) && kiln_elem_type_bits(in->shape->type) <= 16 &&
          kiln_reduction_dims_of(in, &rd) && !kiln_reduction_is_race_free(&rd))
        return true;
    }
  }
  return false;
}

/* Whether `text` through the pipeline without tree_reduction evaluates to `before`. */
static bool same_without_tree_reduction(const char *text, const kiln_eval_options_t *eo,
                                        kiln_literal_t **args, int n,
                                        const kiln_literal_t *before) {
  kiln_hlo_module_t *m = NULL;
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_pass_options_t po = {.verify = 1, .disabled_passes = "tree_reduction"};
  kiln_literal_t *after = NULL;
  char buf[512];
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (!s) s = kiln_pipeline_run(m, &po);
  if (!s) s = kiln_eval_module(m, eo, n, args, &arena, &after);
  bool same = !s && compare_results(before, after, buf, sizeof buf) != DIFFERENT;
  kiln_status_free(s);
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
  return same;
}

static void note_skip(run_stats_t *st, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note_skip(run_stats_t *st, const char *name, const char *fmt, ...) {
  st->skipped++;
  kiln_strbuf_printf(&st->skips, "  skip %s: ", name);
  va_list ap;
  va_start(ap, fmt);
  kiln_strbuf_vprintf(&st->skips, fmt, ap);
  va_end(ap);
  kiln_strbuf_append_char(&st->skips, '\n');
}

static void note_fail(run_stats_t *st, const char *name, const char *what, const char *msg) {
  st->failed++;
  kiln_strbuf_printf(&st->failures, "  FAIL %s: %s: %.800s\n", name, what, msg);
}

static void fail_status(run_stats_t *st, const char *name, const char *what, kiln_status s) {
  note_fail(st, name, what, kiln_status_message(s));
  kiln_status_free(s);
}

/* Whether `m`'s canonical text is that of a module checked earlier (then listed as a repeat
 * of it); otherwise remembers the text under `name`. */
static bool repeats_an_earlier_module(run_stats_t *st, const kiln_hlo_module_t *m,
                                      const char *name) {
  const char *first = kiln_corpus_repeat_of(&st->checked, m, name);
  if (first) {
    st->repeats++;
    kiln_strbuf_printf(&st->repeated, "  %s: same module as %s\n", name, first);
  }
  return first != NULL;
}

static void run_module(run_stats_t *st, kiln_hlo_module_t *m, const char *name) {
  const char *why = ineligible_reason(m);
  if (why) {
    note_skip(st, name, "%s", why);
    return;
  }
  if (!m->entry) {
    note_skip(st, name, "no entry computation");
    return;
  }
  kiln_status s = kiln_hlo_module_verify(m);
  if (s) {
    note_skip(st, name, "invalid module: %.200s", kiln_status_message(s));
    kiln_status_free(s);
    return;
  }
  char costly[200];
  if (kiln_corpus_eval_too_costly(m, st->max_cost, costly, sizeof costly)) {
    note_skip(st, name, "too costly to interpret twice: %s", costly);
    return;
  }
  if (!kiln_corpus_sampled(name)) {
    note_skip(st, name, "sampled out (KILN_CORPUS_SAMPLE)");
    return;
  }
  if (repeats_an_earlier_module(st, m, name)) return;
  if (getenv("KILN_CORPUS_VERBOSE")) fprintf(stderr, "pipeline semantics: %s\n", name);
  kiln_arena_t args_arena, before_arena, after_arena;
  kiln_arena_init(&args_arena);
  kiln_arena_init(&before_arena);
  kiln_arena_init(&after_arena);
  kiln_literal_t **args = NULL, *before = NULL, *after = NULL;
  int n = 0;
  kiln_eval_options_t eo = {0};
  eo.rng_seed = 42;
  eo.max_while_iterations = MAX_WHILE_ITERATIONS;
  kiln_pass_options_t po = {.verify = 1};
  char *text = has_long_half_reduce(m) ? kiln_hlo_module_to_string(m) : NULL;
  if ((s = kiln_fake_args_make(m, NULL, &args_arena, &args, &n))) {
    note_skip(st, name, "fake arguments: %.200s", kiln_status_message(s));
    kiln_status_free(s);
  } else if ((s = kiln_eval_module(m, &eo, n, args, &before_arena, &before))) {
    note_skip(st, name, "does not evaluate before the pipeline: %.200s", kiln_status_message(s));
    kiln_status_free(s);
  } else if ((st->instrs_before += kiln_hlo_module_instruction_count(m),
              s = kiln_pipeline_run(m, &po))) {
    fail_status(st, name, "pipeline", s);
  } else if ((s = kiln_hlo_module_verify(m))) {
    fail_status(st, name, "verify after the pipeline", s);
  } else if ((s = kiln_eval_module(m, &eo, n, args, &after_arena, &after))) {
    fail_status(st, name, "evaluate after the pipeline", s);
  } else {
    st->instrs_after += kiln_hlo_module_instruction_count(m);
    char buf[512];
    switch (compare_results(before, after, buf, sizeof buf)) {
      case SAME_BITWISE:
        st->bitwise++;
        break;
      case SAME_WITHIN_TOLERANCE:
        st->tolerance++;
        kiln_strbuf_printf(&st->tolerant, "  %s\n", name);
        break;
      case DIFFERENT:
        if (text && same_without_tree_reduction(text, &eo, args, n, before)) {
          st->reassociated++;
          kiln_strbuf_printf(&st->reassociations, "  %s: %s\n", name, buf);
        } else {
          note_fail(st, name, "results differ", buf);
        }
        break;
    }
  }
  kiln_free(text);
  kiln_arena_destroy(&after_arena);
  kiln_arena_destroy(&before_arena);
  kiln_arena_destroy(&args_arena);
}

/* One module (or one file that does not load) of the shared corpus walk. */
static void corpus_module(void *ctx, kiln_hlo_module_t **m, const char *name, const char *path, int index,
                          kiln_status error) {
  run_stats_t *st = ctx;
  if (error) {
    note_skip(st, name, "does not load: %.200s", kiln_status_message(error));
    return;
  }
  run_module(st, *m, name);
}

static void test_corpus_results_survive_the_pipeline(void **state) {
  run_stats_t st;
  memset(&st, 0, sizeof st);
  kiln_corpus_repeats_init(&st.checked);
  st.max_cost = env_double("KILN_PIPELINE_MAX_COST", kiln_corpus_under_asan() ? 2e7 : 4e8);
  const char *missing[32];
  int num_missing = kiln_pipeline_missing_passes(missing, 32);
  printf("pipeline stages not available yet (skipped):");
  for (int i = 0; i < num_missing && i < 32; i++) printf(" %s", missing[i]);
  printf("%s\n", num_missing ? "" : " none");
  double t0 = kiln_now_seconds();
  kiln_status walk = kiln_corpus_for_each_whole_module(NULL, corpus_module, &st);
  if (walk) fail_msg("%s", kiln_status_message(walk));
  int compared = st.bitwise + st.tolerance + st.reassociated + st.failed;
  printf(
      "pipeline semantics: %d of %d modules give the same results (%d bitwise, %d within "
      "tolerance), %d half-precision reductions reassociated by tree_reduction, %d fail, %d "
      "left out, %d repeat a module checked earlier, %.1f s\n",
      st.bitwise + st.tolerance, compared, st.bitwise, st.tolerance, st.reassociated, st.failed,
      st.skipped, st.repeats, kiln_now_seconds() - t0);
  printf("instructions in the modules compared: %lld before the pipeline, %lld after\n",
         (long long)st.instrs_before, (long long)st.instrs_after);
  printf("left out:\n%s", kiln_strbuf_cstr(&st.skips));
  printf("repeats (checked once):\n%s", kiln_strbuf_cstr(&st.repeated));
  if (st.tolerance) printf("within tolerance, not bitwise:\n%s", kiln_strbuf_cstr(&st.tolerant));
  if (st.reassociated)
    printf("reassociated by tree_reduction (the same without it):\n%s",
           kiln_strbuf_cstr(&st.reassociations));
  printf("failures:\n%s", kiln_strbuf_cstr(&st.failures));
  fflush(stdout);
  kiln_strbuf_free(&st.reassociations);
  kiln_strbuf_free(&st.skips);
  kiln_strbuf_free(&st.failures);
  kiln_strbuf_free(&st.tolerant);
  kiln_strbuf_free(&st.repeated);
  kiln_corpus_repeats_free(&st.checked);
  assert_int_equal(st.failed, 0);
  assert_true(compared >= (kiln_corpus_sampling() ? 10 : 100));
}

/* The comparison itself: a changed integer or a float beyond tolerance is caught. */
static void test_result_comparison_catches_differences(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  int64_t dims[1] = {3};
  kiln_shape_t *si = kiln_shape_make_array(&a, KILN_S32, 1, dims);
  kiln_shape_t *sf = kiln_shape_make_array(&a, KILN_F32, 1, dims);
  kiln_literal_t *i0 = kiln_literal_make(&a, si), *i1 = kiln_literal_make(&a, si);
  kiln_literal_t *f0 = kiln_literal_make(&a, sf), *f1 = kiln_literal_make(&a, sf);
  char why[256];
  assert_int_equal(compare_results(i0, i1, why, sizeof why), SAME_BITWISE);
  kiln_literal_set_s64(i1, 2, 1);
  assert_int_equal(compare_results(i0, i1, why, sizeof why), DIFFERENT);
  assert_non_null(strstr(why, "element 2"));
  kiln_literal_set_f64(f0, 1, 1.0);
  kiln_literal_set_f64(f1, 1, 1.000001);
  assert_int_equal(compare_results(f0, f1, why, sizeof why), SAME_WITHIN_TOLERANCE);
  kiln_literal_set_f64(f1, 1, 1.01);
  assert_int_equal(compare_results(f0, f1, why, sizeof why), DIFFERENT);
  kiln_literal_set_f64(f0, 1, NAN);
  kiln_literal_set_f64(f1, 1, NAN);
  assert_int_equal(compare_results(f0, f1, why, sizeof why), SAME_BITWISE);
  kiln_literal_set_f64(f1, 1, INFINITY);
  assert_int_equal(compare_results(f0, f1, why, sizeof why), DIFFERENT);
  kiln_arena_destroy(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_result_comparison_catches_differences),
      cmocka_unit_test(test_corpus_results_survive_the_pipeline),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
