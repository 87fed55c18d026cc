/* Running StableHLO test files (the interpreter's `stablehlo/tests/interpret/` and the
 * JAX-generated `testdata/` files): each `// -----` part is read (MLIR text), every function
 * holding check ops is converted in check mode (compiler/frontend/stablehlo_to_hlo.h), run
 * on the reference evaluator or a device, and its checks applied. Used by kiln-run for
 * .mlir / .mlirbc inputs and by tests/test_stablehlo_corpus.c. */
#ifndef KILN_TOOLS_COMMON_STABLEHLO_RUN_H_
#define KILN_TOOLS_COMMON_STABLEHLO_RUN_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/str.h"
#include "runtime/device.h"
#include "tools/common/hlo_file.h"

typedef struct kiln_stablehlo_run_options {
  kiln_device_t *device;        /* NULL: the reference evaluator */
  bool print;                   /* print `@f: checks: N passed, M failed` per function */
  int64_t max_while_iterations; /* 0: unbounded */
  int64_t sample;               /* > 1: run only every sample-th function (counted over all
                                   calls with the same stats), others are not counted */
  bool constants_as_params;     /* the functions' top-level constants passed as parameters
                                   (a compiler cannot fold the program away) */
} kiln_stablehlo_run_options_t;

typedef struct kiln_stablehlo_run_stats {
  int64_t seen;      /* functions with checks met (sampled or not) */
  int64_t functions; /* functions run */
  int64_t passed;    /* ... whose checks all passed */
  int64_t checks_passed, checks_failed;
  double seconds;
  uint64_t max_ulp;       /* the largest ulp distance an expect_close check saw */
  uint64_t ulp_tolerance; /* ... and the largest max_ulp_difference among them */
  kiln_strbuf_t failures; /* one line per failed function: "file:@f: reason" */
} kiln_stablehlo_run_stats_t;

void kiln_stablehlo_run_stats_free(kiln_stablehlo_run_stats_t *s);

/* Runs every part of `text` (MLIR text, parts split at lines starting with `// -----`, or
 * bytecode as one part). A part that does not read or a function that does not convert or
 * run counts as a failed function with its reason; the status is an error only for
 * misuse. */
kiln_status kiln_stablehlo_run_bytes(const char *bytes, size_t len, const char *filename,
                                     const kiln_stablehlo_run_options_t *opts,
                                     kiln_stablehlo_run_stats_t *stats);
kiln_status kiln_stablehlo_run_file(const char *path, const kiln_stablehlo_run_options_t *opts,
                                    kiln_stablehlo_run_stats_t *stats);

/* Whether the file (text or bytecode) holds a function with check ops. */
kiln_status kiln_stablehlo_file_has_checks(const char *path, bool *out);

/* Reads a StableHLO file as HLO modules (one per `// -----` part, each part's entry
 * function converted): the kiln_hlo_file_t that kiln_hlo_file_load gives for HLO files. */
kiln_status kiln_stablehlo_file_load(const char *path, kiln_hlo_file_t **out);

/* True for file names kiln reads as StableHLO (.mlir, .mlirbc, .mlir.bc). */
bool kiln_stablehlo_is_mlir_path(const char *path);

#endif /* KILN_TOOLS_COMMON_STABLEHLO_RUN_H_ */
