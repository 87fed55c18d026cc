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
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
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

/* One multi-device module on its world of host devices against the SPMD evaluator
 * (kiln_eval_module_spmd): replicas x partitions participants on `device`, each on the same
 * fake arguments (a ragged-all-to-all's offsets and sizes: one valid exchange, each
 * participant its own: kiln_fake_args_make_world), every participant's result compared under
 * the module tolerance (tools/common/compare.h); with `round_trip`, the executable serialized
 * and read back runs again to the same bits. Shared by test_corpus_host_spmd and
 * test_corpus_custom_calls. */
typedef enum {
  KILN_CORPUS_SPMD_RAN,     /* every participant matched */
  KILN_CORPUS_SPMD_SKIPPED, /* no world, too many participants, too costly, no fake arguments,
                               or no oracle (the evaluator cannot run it) */
  KILN_CORPUS_SPMD_FAILED,  /* the host run failed or differs */
} kiln_corpus_spmd_outcome_t;

typedef struct kiln_corpus_spmd_run {
  kiln_device_t *device;
  int max_participants;         /* more: skipped */
  double max_cost;              /* element-operations over all participants; more: skipped */
  int64_t max_while_iterations; /* evaluator and device */
  int64_t timeout_ms;           /* a collective's deadline, evaluator and device */
  bool round_trip;
  /* (optional) the evaluator's hook for custom calls it does not implement */
  kiln_status (*custom_call)(void *user, const kiln_hlo_instruction_t *instr,
                             kiln_literal_t *const *operands, kiln_literal_t *result);
  void *custom_call_user;
  /* filled */
  int replicas, partitions;
  double eval_s, host_s;
  size_t serialized_bytes; /* round_trip: the serialized executable's size */
  char why[640];           /* SKIPPED / FAILED: what and why */
} kiln_corpus_spmd_run_t;

kiln_corpus_spmd_outcome_t kiln_corpus_spmd_run_module(const kiln_hlo_module_t *m,
                                                       kiln_corpus_spmd_run_t *r);

#endif /* KILN_TOOLS_COMMON_CORPUS_RUN_H_ */
