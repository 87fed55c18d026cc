/* The corpus modules with custom calls, end to end on the host against the evaluator: XLA's
 * well-known targets (rewritten by compiler/passes/custom_call_rewrite.c, computed directly
 * by compiler/eval/eval_custom_call.c), and the corpus's made-up targets (foo, bar,
 * some_target, ...) through a C test handler loaded with dlopen (tests/ffi/handlers_call.c:
 * kiln_call_fill) and the same rule given to the evaluator. A multi-device module runs on
 * its world of host devices against the SPMD evaluator (kiln_corpus_spmd_run_module). Every
 * module that does not pass is named with its reason; the test asserts the floor reached. */
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
#include "tests/collective_test_util.h"
#include "tools/common/compare.h"
#include "tools/common/corpus.h"
#include "tools/common/corpus_eval.h"
#include "tools/common/corpus_run.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"

#ifndef KILN_FFI_TEST_CALL_LIB
#define KILN_FFI_TEST_CALL_LIB "libkiln_ffi_test_handlers_call.so"
#endif

/* Passing modules this test requires: 95 of the 109 distinct modules with custom calls (in 72
 * files) on 2026-12-07 (the multi-device ones on their world of host devices, the
 * xla_builder.math special functions); the others are named in the output with their
 * reason. */
#define FLOOR_PASSED 95
/* The modules calling made-up targets with those targets' handler command-buffer compatible
 * (test_corpus_compatible_calls_run_inside_command_buffers): 17 of 19 pass (2 do not verify),
 * 14 of them with custom calls inside command buffers (in the other 3 the calls are dead code
 * or folded away: no custom-call thunk is left) on 2026-12-02. */
#define FLOOR_MADE_UP_PASSED 17
#define FLOOR_MADE_UP_IN_COMMAND_BUFFERS 14

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
  /* The command-buffer pass: only modules calling a made-up target (served by the
   * command-buffer compatible fill handler); `inside` counts the passing ones whose calls ran
   * inside command buffers. */
  bool made_up_only;
  int inside;
  int with_custom_calls, passed;
  kiln_strbuf_t failures;
  kiln_corpus_repeats_t repeats;
} run_ctx_t;

static bool calls_made_up_target(const kiln_hlo_module_t *m) {
  for (size_t c = 0; c < m->computations.len; c++) {
    const kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++) {
      const kiln_hlo_instruction_t *in = comp->instructions.data[i];
      if (in->opcode == KILN_OP_CUSTOM_CALL && made_up(in->custom_call_target)) return true;
    }
  }
  return false;
}

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

/* A multi-device module (several participants in a collective) on its world of host devices
 * against the SPMD evaluator, as test_corpus_host_spmd runs it. */
static void run_multi_device(run_ctx_t *rc, const kiln_hlo_module_t *m, const char *name,
                             const char *skip) {
  if (skip) return note(rc, name, "multi-device module left out", skip);
  kiln_corpus_spmd_run_t r;
  memset(&r, 0, sizeof r);
  r.device = rc->dev;
  r.max_cost = KILN_CORPUS_MAX_COST;
  r.max_while_iterations = 20000;
  r.timeout_ms = KILN_TEST_COLLECTIVE_TIMEOUT_MS;
  r.custom_call = eval_made_up;
  kiln_corpus_spmd_outcome_t o = kiln_corpus_spmd_run_module(m, &r);
  if (o != KILN_CORPUS_SPMD_RAN)
    return note(rc, name,
                o == KILN_CORPUS_SPMD_SKIPPED ? "multi-device module not run" : "MISMATCH", r.why);
  rc->passed++;
  fprintf(stderr, "passed: %s (%d replicas x %d partitions on host devices)\n", name, r.replicas,
          r.partitions);
}

static void run_one(void *ctx, kiln_hlo_module_t **mp, const char *name, const char *path,
                    int index, kiln_status error) {
  (void)error;
  run_ctx_t *rc = ctx;
  if (!mp || !*mp || !has_custom_call(*mp)) return;
  /* Under ASan, one module in KILN_CORPUS_ASAN_SAMPLE (the same ones every run): the whole
   * set costs minutes there, and the normal build runs them all. */
  if (!kiln_corpus_sampled(name)) return;
  kiln_hlo_module_t *m = *mp;
  if (rc->made_up_only && !calls_made_up_target(m)) return;
  const char *first = kiln_corpus_repeat_of(&rc->repeats, m, name);
  if (first) return; /* the same module as an earlier file: counted once */
  rc->with_custom_calls++;
  kiln_status s = kiln_hlo_module_verify(m);
  if (s) {
    note(rc, name, "does not verify", kiln_status_message(s));
    kiln_status_free(s);
    return;
  }
  bool multi;
  const char *skip;
  kiln_corpus_multi_device_module(m, path, index, &multi, &skip);
  if (multi) return run_multi_device(rc, m, name, skip);
  char why[200];
  if (kiln_corpus_eval_too_costly(m, KILN_CORPUS_MAX_COST, why, sizeof why))
    return note(rc, name, "too costly to evaluate", why);
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **args = NULL, *want = NULL, *got = NULL;
  int n = 0;
  kiln_device_run_report_t rep;
  memset(&rep, 0, sizeof rep);
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
    o.repeat = rc->made_up_only ? 2 : 1; /* the second run replays the command buffers */
    s = kiln_device_run_module(m, args, n, &o, &arena, &got, &rep);
  }
  if (s) {
    note(rc, name, kiln_status_code_name(kiln_status_code(s)), kiln_status_message(s));
    kiln_status_free(s);
  } else {
    kiln_compare_report_t cr;
    if (kiln_compare_literals(want, got, NULL, &cr)) {
      rc->passed++;
      rc->inside += rep.compile.command_buffer_custom_calls > 0;
      fprintf(stderr, "passed: %s (custom calls: %zu inside command buffers, %zu outside)\n", name,
              rep.compile.command_buffer_custom_calls, rep.compile.split_custom_calls);
    } else {
      char msg[400];
      snprintf(msg, sizeof msg, "%lld of %lld elements differ; %.300s", (long long)cr.mismatches,
               (long long)cr.elements, cr.first);
      note(rc, name, "MISMATCH", msg);
    }
  }
  kiln_arena_destroy(&arena);
}

/* Registers handler `symbol` of the test library for every made-up target. */
static void register_made_up(const char *symbol) {
  kiln_ffi_registry_t *reg = kiln_ffi_registry_default();
  for (size_t i = 0; i < sizeof kMadeUpTargets / sizeof kMadeUpTargets[0]; i++) {
    char spec[512];
    snprintf(spec, sizeof spec, "%s=%s:%s", kMadeUpTargets[i], KILN_FFI_TEST_CALL_LIB, symbol);
    kiln_status s = kiln_ffi_registry_load_spec(reg, spec);
    if (s) fail_msg("%s", kiln_status_message(s));
  }
}

/* Runs every corpus module through run_one on a host device of its own. */
static void run_corpus(run_ctx_t *rc) {
  kiln_status s = kiln_device_create("host", &rc->dev);
  if (s) fail_msg("%s", kiln_status_message(s));
  kiln_corpus_repeats_init(&rc->repeats);
  s = kiln_corpus_for_each_whole_module(NULL, run_one, rc);
  kiln_corpus_repeats_free(&rc->repeats);
  kiln_device_destroy(rc->dev);
  if (s) fail_msg("%s", kiln_status_message(s));
}

static void test_corpus_custom_calls_match_the_evaluator(void **state) {
  (void)state;
  register_made_up("kiln_call_fill");
  run_ctx_t rc;
  memset(&rc, 0, sizeof rc);
  run_corpus(&rc);
  printf("custom-call corpus: %d of %d modules with custom calls match the evaluator (%.0f%%)\n",
         rc.passed, rc.with_custom_calls,
         rc.with_custom_calls ? 100.0 * rc.passed / rc.with_custom_calls : 0.0);
  printf("not passing:\n%s", kiln_strbuf_cstr(&rc.failures));
  kiln_strbuf_free(&rc.failures);
  kiln_ffi_registry_default_shutdown();
  assert_true(rc.with_custom_calls > 0);
  assert_true(rc.passed > 0);
  if (kiln_corpus_sampling()) return; /* the floor counts the whole corpus */
  assert_true(rc.passed >= FLOOR_PASSED);
}

/* The modules calling made-up targets again, with those targets' handler registered
 * command-buffer compatible and runs of one thunk converted: their calls run inside command
 * buffers (recorded, then replayed by a second run) and still match the evaluator. */
static void test_corpus_compatible_calls_run_inside_command_buffers(void **state) {
  (void)state;
  register_made_up("kiln_call_fill_cb");
  setenv("KILN_COMMAND_BUFFER_MIN_RUN", "1", 1);
  run_ctx_t rc;
  memset(&rc, 0, sizeof rc);
  rc.made_up_only = true;
  run_corpus(&rc);
  unsetenv("KILN_COMMAND_BUFFER_MIN_RUN");
  printf(
      "custom-call corpus, command-buffer compatible made-up targets: %d of %d modules match "
      "the evaluator, %d of them with their custom calls inside command buffers\n",
      rc.passed, rc.with_custom_calls, rc.inside);
  printf("not passing:\n%s", kiln_strbuf_cstr(&rc.failures));
  kiln_strbuf_free(&rc.failures);
  kiln_ffi_registry_default_shutdown();
  if (kiln_corpus_sampling()) return; /* a sample may hold none of them */
  assert_true(rc.passed >= FLOOR_MADE_UP_PASSED);
  assert_true(rc.inside >= FLOOR_MADE_UP_IN_COMMAND_BUFFERS);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus_custom_calls_match_the_evaluator),
      cmocka_unit_test(test_corpus_compatible_calls_run_inside_command_buffers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
