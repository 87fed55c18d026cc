/* The corpus end to end on the GPU (tools/common/corpus_run.h): every evaluable module of
 * ../shared/hlo-corpus/xla and real compiled for the device (cubins through nvJitLink or
 * ptxas), run with CUDA graphs for runs of kernels, and compared with the evaluator.
 * Prints `passed X / eligible Y` and the failures; exit status 1 below 90%.
 *
 * Without a CUDA driver or GPU it prints "SKIP: <reason>" and exits KILN_TEST_SKIPPED (77),
 * which ctest reports as skipped; with KILN_REQUIRE_GPU=1 (scripts/run-gpu.sh on a GPU
 * machine) that is a failure (exit 1). */
#include <stdio.h>
#include <stdlib.h>

#include "base/status.h"
#include "runtime/device.h"
#include "tools/common/corpus_run.h"
#include "tests/skip_util.h"

int main(void) {
  kiln_device_t *dev = NULL;
  kiln_status s = kiln_device_create("cuda", &dev);
  if (s) {
    int rc = kiln_status_code(s) == KILN_UNAVAILABLE
                 ? kiln_gpu_unavailable_exit(kiln_status_message(s))
                 : 1;
    if (rc == 1) fprintf(stderr, "FAIL: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    return rc;
  }
  kiln_corpus_run_stats_t st;
  s = kiln_corpus_run_on_device(dev, NULL, getenv("KILN_TEST_VERBOSE") != NULL, &st);
  if (s) {
    fprintf(stderr, "FAIL: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    kiln_device_destroy(dev);
    return 1;
  }
  double rate = st.eligible ? (double)st.passed / st.eligible : 0;
  printf("corpus on %s: passed %d / eligible %d (%.1f%%), %d not eligible, %d repeats run once, %.1f s "
         "(compile %.1f s, run %.1f s)\nfailures:\n%s",
         dev->name, st.passed, st.eligible, 100 * rate, st.skipped, st.repeats, st.seconds,
         st.compile_ms / 1e3, st.run_ms / 1e3, kiln_strbuf_cstr(&st.failures));
  kiln_corpus_run_stats_free(&st);
  kiln_device_destroy(dev);
  return rate >= 0.90 ? 0 : 1;
}
