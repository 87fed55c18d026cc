/* End to end on the host: every evaluable corpus module (../shared/hlo-corpus/xla and real:
 * no custom-call, a single participant, cheap enough to evaluate, not a known-invalid
 * module) is compiled (pass pipeline, fusion wrapper, buffer assignment, thunk emission,
 * kernels through the host JIT, command buffers), run on the host device with generated
 * inputs, and compared with the reference evaluator on the same inputs
 * (tools/common/corpus_run.h, tools/common/compare.h: per-type relative/absolute
 * tolerance, exact for integers).
 *
 * A module counts as eligible when the evaluator can run it: a while loop that runs past
 * KILN_CORPUS_RUN_MAX_WHILE iterations on the generated inputs, or an evaluator failure,
 * takes it out (listed with KILN_TEST_VERBOSE=1). Modules with `rng` are compared too: the
 * evaluator draws as kiln's rng_expander does, under the same seed.
 *
 * A module whose canonical text an earlier one had (several corpus files hold the same
 * module) runs once; the repeats are counted apart and listed with the others left out.
 *
 * The test prints `passed X / eligible Y`, each failure with its reason, and fails below
 * 90%. With KILN_CORPUS_SAMPLE=N (the ASan run) it takes about one module in N. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "runtime/host/host_device.h"
#include "tools/common/corpus_run.h"

static void test_corpus_modules_run_on_the_host_and_match_the_evaluator(void **state) {
  kiln_device_t *dev = NULL;
  assert_null(kiln_host_device_create(0, &dev));
  kiln_corpus_run_stats_t st;
  bool verbose = getenv("KILN_TEST_VERBOSE") != NULL;
  assert_null(kiln_corpus_run_on_device(dev, NULL, verbose, &st));
  double rate = st.eligible ? (double)st.passed / st.eligible : 0;
  printf("corpus on the host: passed %d / eligible %d (%.1f%%), %d not eligible, %d repeats of a module run "
         "once, %.1f s "
         "(compile %.1f s, run %.1f s)\n",
         st.passed, st.eligible, 100 * rate, st.skipped, st.repeats, st.seconds, st.compile_ms / 1e3,
         st.run_ms / 1e3);
  printf("failures:\n%s", kiln_strbuf_cstr(&st.failures));
  if (verbose) printf("not eligible:\n%s", kiln_strbuf_cstr(&st.skips));
  kiln_corpus_run_stats_free(&st);
  kiln_device_destroy(dev);
  assert_true(st.eligible > 0);
  assert_true(rate >= 0.90);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus_modules_run_on_the_host_and_match_the_evaluator),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
