/* The corpus modules with custom calls, end to end on the host against the evaluator: XLA's
 * well-known targets (rewritten by compiler/passes/custom_call_rewrite.c, computed directly
 * by compiler/eval/eval_custom_call.c), and the corpus's made-up targets (foo, bar,
 * some_target, ...) through a C test handler loaded with dlopen (tests/ffi/handlers_call.c:
 * kiln_call_fill) and the same rule given to the evaluator. Every module that does not pass
 * is named with its reason; the test asserts the floor reached. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/status.h"
#include "base/str.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "ffi/ffi_registry.h"
#include "runtime/device.h"
#include "tools/common/compare.h"
#include "tools/common/corpus.h"
#include "tools/common/corpus_eval.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"

#ifndef KILN_FFI_TEST_CALL_LIB
#define KILN_FFI_TEST_CALL_LIB "libkiln_ffi_test_handlers_call.so"
#endif

/* Passing modules this test requires: 88 of the 109 distinct modules with custom calls (in 72
 * files) on 2026-12-02; the others are named in the output with their reason. */
#define FLOOR_PASSED 88

/* The corpus's made-up targets, and two of third-party libraries a user would load (CuteDSL's
 * runtime, Transformer Engine): all served by the test's fill handler. */
static const char *const kMadeUpTargets[] = {
    "foo",
    "bar",
    "some_target",
    "CustomCallTuple",
    "CustomCallConsumeTuple",
    "CuteDSLRT_NvJaxCutlassCall",
    "te_scaled_softmax_forward_ffi",
};

static bool made_up(const char *t) {
  for (size_t i = 0; i < sizeof kMadeUpTargets / sizeof kMadeUpTargets[0]; i++)
    if (t && !strcmp(t, kMadeUpTargets[i])) return true;
  return false;
}

/* The evaluator's side of kiln_call_fill: result leaf r is all r + 1. */
static void fill(kiln_literal_t *l, int *leaf) {
  if (kiln_shape_is_tuple(l->shape)) {
    for (int i = 0; i < l->num_tuple_elements; i++) fill(l->tuple_elements[i], leaf);
    return;
  }
  if (!kiln_shape_is_array(l->shape)) return;
  double v = (double)(*leaf + 1);
  for (int64_t i = 0; i < l->num_elements; i++) kiln_literal_set_f64(l, i, v);
  (*leaf)++;
}

static kiln_status eval_made_up(void *user, const kiln_hlo_instruction_t *in,
                                kiln_literal_t *const *ops, kiln_literal_t *result) {
  (void)user;
  (void)ops;
  if (!made_up(in->custom_call_target))
    return kiln_status_make(KILN_UNIMPLEMENTED, "no test handler for target '%s'",
                            in->custom_call_target);
  int leaf = 0;
  fill(result, &leaf);
  return NULL;
}

typedef struct run_ctx {
  kiln_device_t *dev;
  int with_custom_calls, passed;
  kiln_strbuf_t failures;
  kiln_corpus_repeats_t repeats;
} run_ctx_t;

static bool has_custom_call(const kiln_hlo_module_t *m) {
  for (size_t c = 0; c < m->computations.len; c++) {
    const kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++) {
      kiln_hlo_opcode_t op = comp->instructions.data[i]->opcode;
      if (op == KILN_OP_CUSTOM_CALL || op == KILN_OP_CUSTOM_CALL_START ||
          op == KILN_OP_CUSTOM_CALL_DONE || op == KILN_OP_CUSTOM_CALL_UPDATE)
        return true;
    }
  }
  return false;
}

static void note(run_ctx_t *rc, const char *name, const char *what, const char *why) {
  kiln_strbuf_printf(&rc->failures, "  %s: %s: %.300s\n", name, what, why);
}

static void run_one(void *ctx, kiln_hlo_module_t **mp, const char *name, const char *path,
                    int index, kiln_status error) {
  (void)path;
  (void)index;
  (void)error;
  run_ctx_t *rc = ctx;
  if (!mp || !*mp || !has_custom_call(*mp)) return;
  kiln_hlo_module_t *m = *mp;
  const char *first = kiln_corpus_repeat_of(&rc->repeats, m, name);
  if (first) return; /* the same module as an earlier file: counted once */
  rc->with_custom_calls++;
  kiln_status s = kiln_hlo_module_verify(m);
  if (s) {
    note(rc, name, "does not verify", kiln_status_message(s));
    kiln_status_free(s);
    return;
  }
  char why[200];
  if (kiln_corpus_eval_too_costly(m, KILN_CORPUS_MAX_COST, why, sizeof why))
    return note(rc, name, "too costly to evaluate", why);
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **args = NULL, *want = NULL, *got = NULL;
  int n = 0;
  s = kiln_fake_args_make(m, NULL, &arena, &args, &n);
  if (!s) {
    kiln_eval_options_t eo = {0};
    eo.rng_seed = 42;
    eo.max_while_iterations = 20000;
    eo.custom_call = eval_made_up;
    s = kiln_eval_module(m, &eo, n, args, &arena, &want);
    if (s) s = kiln_status_annotate(s, "evaluator");
  }
  if (!s) {
    kiln_device_run_options_t o;
    memset(&o, 0, sizeof o);
    o.device = rc->dev;
    o.max_while_iterations = 20000;
    o.rng_seed = 42;
    s = kiln_device_run_module(m, args, n, &o, &arena, &got, NULL);
  }
  if (s) {
    note(rc, name, kiln_status_code_name(kiln_status_code(s)), kiln_status_message(s));
    kiln_status_free(s);
  } else {
    kiln_compare_report_t cr;
    if (kiln_compare_literals(want, got, NULL, &cr)) {
      rc->passed++;
      fprintf(stderr, "passed: %s\n", name);
    } else {
      char msg[400];
      snprintf(msg, sizeof msg, "%lld of %lld elements differ; %.300s", (long long)cr.mismatches,
               (long long)cr.elements, cr.first);
      note(rc, name, "MISMATCH", msg);
    }
  }
  kiln_arena_destroy(&arena);
}

static void test_corpus_custom_calls_match_the_evaluator(void **state) {
  (void)state;
  kiln_ffi_registry_t *reg = kiln_ffi_registry_default();
  for (size_t i = 0; i < sizeof kMadeUpTargets / sizeof kMadeUpTargets[0]; i++) {
    char spec[512];
    snprintf(spec, sizeof spec, "%s=%s:kiln_call_fill", kMadeUpTargets[i], KILN_FFI_TEST_CALL_LIB);
    kiln_status s = kiln_ffi_registry_load_spec(reg, spec);
    if (s) fail_msg("%s", kiln_status_message(s));
  }
  run_ctx_t rc;
  memset(&rc, 0, sizeof rc);
  kiln_status s = kiln_device_create("host", &rc.dev);
  if (s) fail_msg("%s", kiln_status_message(s));
  kiln_corpus_repeats_init(&rc.repeats);
  s = kiln_corpus_for_each_whole_module(NULL, run_one, &rc);
  kiln_corpus_repeats_free(&rc.repeats);
  kiln_device_destroy(rc.dev);
  if (s) fail_msg("%s", kiln_status_message(s));
  printf("custom-call corpus: %d of %d modules with custom calls match the evaluator (%.0f%%)\n",
         rc.passed, rc.with_custom_calls,
         rc.with_custom_calls ? 100.0 * rc.passed / rc.with_custom_calls : 0.0);
  printf("not passing:\n%s", kiln_strbuf_cstr(&rc.failures));
  kiln_strbuf_free(&rc.failures);
  kiln_ffi_registry_default_shutdown();
  assert_true(rc.with_custom_calls > 0);
  assert_true(rc.passed >= FLOOR_PASSED);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus_custom_calls_match_the_evaluator),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
