/* End to end on the host: every evaluable corpus module (../shared/hlo-corpus/xla and real:
 * no custom-call, a single participant, cheap enough to evaluate, not a known-invalid
 * module) is compiled (pass pipeline, fusion wrapper, buffer assignment, thunk emission,
 * kernels through the host JIT, command buffers), run on the host device with generated
 * inputs, and compared with the reference evaluator on the same inputs
 * (tools/common/compare.h: per-type relative/absolute tolerance, exact for integers).
 *
 * A module counts as eligible when the evaluator can run it: a while loop that runs past
 * KILN_CORPUS_MAX_WHILE iterations on the generated inputs, or an evaluator failure, takes
 * it out (listed). Modules with `rng` (random numbers from the evaluator's own generator,
 * which a compiled program does not reproduce) are eligible and fail: that is a real
 * limitation, reported as such.
 *
 * The test prints `passed X / eligible Y`, each failure with its reason, and fails below
 * 90%. With KILN_CORPUS_SAMPLE=N (the ASan run) it takes about one module in N. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/eval/eval.h"
#include "runtime/device.h"
#include "runtime/host/host_device.h"
#include "tools/common/compare.h"
#include "tools/common/corpus.h"
#include "tools/common/corpus_eval.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"

#define KILN_CORPUS_MAX_WHILE 20000

typedef struct e2e_stats {
  kiln_device_t *dev;
  int eligible, passed, skipped;
  kiln_strbuf_t failures, skips;
  double compile_ms, run_ms;
} e2e_stats_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void note_skip(e2e_stats_t *st, const char *name, const char *why) {
  st->skipped++;
  kiln_strbuf_printf(&st->skips, "  %s: %s\n", name, why);
}

static void note_fail(e2e_stats_t *st, const char *name, const char *what, const char *why) {
  kiln_strbuf_printf(&st->failures, "  %s: %s: %.400s\n", name, what, why);
}

static void run_one(void *ctx, kiln_hlo_module_t **mp, const char *name, const char *path,
                    int index, kiln_status error) {
  e2e_stats_t *st = ctx;
  if (!mp) {
    if (!strstr(path, "invalid_concat")) {
      st->eligible++;
      note_fail(st, name, "parse", kiln_status_message(error));
    }
    return;
  }
  kiln_hlo_module_t *m = *mp;
  if (!kiln_corpus_sampled(name)) return;
  if (kiln_corpus_find_invalid(path, index)) return note_skip(st, name, "invalid HLO (known)");
  const char *why = kiln_corpus_eval_ineligible_reason(m);
  if (why) return note_skip(st, name, why);
  char buf[200];
  if (!m->entry) return note_skip(st, name, "no entry computation");
  if ((why = kiln_corpus_eval_too_costly(m, KILN_CORPUS_MAX_COST, buf, sizeof buf)) != NULL)
    return note_skip(st, name, why);
  kiln_status v = kiln_hlo_module_verify(m);
  if (v) {
    note_skip(st, name, "does not verify");
    kiln_status_free(v);
    return;
  }
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **args = NULL;
  int n = 0;
  kiln_status s = kiln_fake_args_make(m, NULL, &arena, &args, &n);
  kiln_literal_t *want = NULL;
  if (!s) {
    kiln_eval_options_t eo = {0};
    eo.rng_seed = 42;
    eo.max_while_iterations = KILN_CORPUS_MAX_WHILE;
    s = kiln_eval_module(m, &eo, n, args, &arena, &want);
  }
  if (s) {
    note_skip(st, name, kiln_status_message(s));
    kiln_status_free(s);
    kiln_arena_destroy(&arena);
    return;
  }
  st->eligible++;
  if (getenv("KILN_TEST_VERBOSE")) fprintf(stderr, "e2e: %s\n", name);
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = st->dev;
  o.max_while_iterations = KILN_CORPUS_MAX_WHILE;
  kiln_device_run_report_t rep;
  kiln_literal_t *got = NULL;
  s = kiln_device_run_module(m, args, n, &o, &arena, &got, &rep);
  st->compile_ms += rep.compile_ms;
  st->run_ms += rep.run_min_ms;
  if (s) {
    note_fail(st, name, kiln_status_code_name(kiln_status_code(s)), kiln_status_message(s));
    kiln_status_free(s);
  } else {
    kiln_compare_report_t cr;
    if (kiln_compare_literals(want, got, NULL, &cr)) {
      st->passed++;
    } else {
      char msg[400];
      snprintf(msg, sizeof msg, "%lld of %lld elements differ; %.320s", (long long)cr.mismatches,
               (long long)cr.elements, cr.first);
      note_fail(st, name, "MISMATCH", msg);
    }
  }
  kiln_arena_destroy(&arena);
}

static void test_corpus_modules_run_on_the_host_and_match_the_evaluator(void **state) {
  e2e_stats_t st;
  memset(&st, 0, sizeof st);
  assert_null(kiln_host_device_create(0, &st.dev));
  const char *root = getenv("KILN_CORPUS_DIR");
  if (!root || !*root) root = KILN_CORPUS_DIR;
  double t0 = now_s();
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/xla", root);
  assert_null(kiln_corpus_for_each_module(dir, "xla", run_one, &st));
  snprintf(dir, sizeof dir, "%s/real", root);
  assert_null(kiln_corpus_for_each_module(dir, "real", run_one, &st));
  double rate = st.eligible ? (double)st.passed / st.eligible : 0;
  printf("corpus on the host: passed %d / eligible %d (%.1f%%), %d not eligible, %.1f s "
         "(compile %.1f s, run %.1f s)\n",
         st.passed, st.eligible, 100 * rate, st.skipped, now_s() - t0, st.compile_ms / 1e3,
         st.run_ms / 1e3);
  printf("failures:\n%s", kiln_strbuf_cstr(&st.failures));
  if (getenv("KILN_TEST_VERBOSE")) printf("not eligible:\n%s", kiln_strbuf_cstr(&st.skips));
  kiln_strbuf_free(&st.failures);
  kiln_strbuf_free(&st.skips);
  kiln_device_destroy(st.dev);
  assert_true(st.eligible > 0);
  assert_true(rate >= 0.90);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus_modules_run_on_the_host_and_match_the_evaluator),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
