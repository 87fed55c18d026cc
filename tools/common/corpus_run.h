/* The corpus end to end on a device, as `kiln-run --backend=<dev> --compare=reference`
 * runs a file (the same loader, fake arguments, device run, evaluator and comparison):
 * every evaluable module of ../shared/hlo-corpus/xla and real (no custom-call, a single
 * participant, cheap enough to evaluate, not a known-invalid module, the evaluator runs it within
 * KILN_CORPUS_RUN_MAX_WHILE loop iterations) is compiled for the device, run on generated inputs
 * and compared with the evaluator on the same inputs (tools/common/compare.h). Shared by
 * tests/test_corpus_host_run.c and the GPU suite. Honors KILN_CORPUS_SAMPLE (corpus.h). */
#ifndef KILN_TOOLS_COMMON_CORPUS_RUN_H_
#define KILN_TOOLS_COMMON_CORPUS_RUN_H_

#include <stdbool.h>

#include "base/status.h"
#include "base/str.h"
#include "runtime/device.h"

#define KILN_CORPUS_RUN_MAX_WHILE 20000
/* Under AddressSanitizer one module in this many runs (KILN_CORPUS_SAMPLE overrides). */
#define KILN_CORPUS_RUN_ASAN_SAMPLE 20

typedef struct kiln_corpus_run_stats {
  int eligible, passed, skipped;
  int compiled_only; /* emitter snippets too costly to run here: compiled and loaded only */
  int sampled_out;   /* left out by KILN_CORPUS_SAMPLE / the ASan sampling */
  int repeats; /* modules whose canonical text an earlier one had: run once, listed in skips */
  kiln_strbuf_t failures; /* "  <module>: <what>: <why>\n" per failure */
  kiln_strbuf_t skips;    /* the same for modules left out, with the reason */
  double seconds, compile_ms, run_ms;
} kiln_corpus_run_stats_t;

/* Runs the corpus under `root` (NULL: $KILN_CORPUS_DIR, else the build's KILN_CORPUS_DIR)
 * on `dev`. `verbose` prints each module's name to stderr before it runs. Free the stats'
 * buffers with kiln_corpus_run_stats_free. */
kiln_status kiln_corpus_run_on_device(kiln_device_t *dev, const char *root, bool verbose,
                                      kiln_corpus_run_stats_t *st);
/* The emitter snippets under `root`/emitters (bare fusion computations, each parsed as
 * kiln-run parses it: one module whose entry is the fusion) through the same path: fake
 * arguments, compile + run on `dev`, the evaluator, the comparison. A snippet too costly to
 * evaluate (KILN_CORPUS_MAX_COST; the 2.4 TB broadcast) is compiled and loaded only and
 * counted in compiled_only. */
kiln_status kiln_corpus_run_emitters_on_device(kiln_device_t *dev, const char *root, bool verbose,
                                               kiln_corpus_run_stats_t *st);
void kiln_corpus_run_stats_free(kiln_corpus_run_stats_t *st);

#endif /* KILN_TOOLS_COMMON_CORPUS_RUN_H_ */
