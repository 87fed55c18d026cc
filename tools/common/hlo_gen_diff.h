/* The differential test of kiln-fuzz and tests/test_fuzz_regressions.c: one HLO module
 * compiled and run on the host backend and compared with the reference evaluator on the same
 * fake arguments (fake_args.h, seed 42), under the one comparator's module tolerance
 * (compare.h: exact for integers and pred; per float type an rtol / atol pair, because whole
 * modules sum in a different order and use different math than the evaluator). On a
 * mismatch, pipeline-prefix bisection evaluates the module after every pass that changed it
 * and names the first pass after which the evaluator's result differs from the original's;
 * when none does, the fault is after the passes (emitters, LLVM, runtime).
 *
 * Coverage: every instruction of the module as written counts for its opcode and element
 * type; every fusion of the optimized module counts for the emitter that compiles it. */
#ifndef KILN_TOOLS_COMMON_HLO_GEN_DIFF_H_
#define KILN_TOOLS_COMMON_HLO_GEN_DIFF_H_

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "compiler/hlo/opcode.h"
#include "compiler/hlo/shape.h"
#include "runtime/device.h"

#define KILN_DIFF_EMITTERS 9 /* kiln_codegen_emitter_t's kinds, then library gemm calls */

typedef enum kiln_diff_outcome {
  KILN_DIFF_PASSED = 0,
  KILN_DIFF_SKIPPED,     /* the evaluator cannot run it (its error is the reason) */
  KILN_DIFF_UNSUPPORTED, /* the compiler says UNIMPLEMENTED: a clear refusal, not a bug */
  KILN_DIFF_INVALID,     /* does not parse or verify (a generator bug) */
  KILN_DIFF_ERROR,       /* the compiler or runtime failed with another error */
  KILN_DIFF_MISMATCH,    /* compiled result differs from the evaluator's */
  KILN_DIFF_CRASH,       /* the process running the test died (a signal: kiln-fuzz --fork) */
  KILN_DIFF_TIMEOUT,     /* it ran past its time limit and was killed (kiln-fuzz --fork) */
  KILN_DIFF_OUTCOMES
} kiln_diff_outcome_t;

const char *kiln_diff_outcome_name(kiln_diff_outcome_t o);
/* Whether `o` is a bug to report (invalid, error, mismatch, crash, timeout). */
bool kiln_diff_outcome_is_failure(kiln_diff_outcome_t o);

typedef struct kiln_diff_coverage {
  int64_t op_type[KILN_OP_COUNT][KILN_ELEM_TYPE_COUNT];
  int64_t emitter_type[KILN_DIFF_EMITTERS][KILN_ELEM_TYPE_COUNT]; /* by the fusion root's type */
  int64_t outcomes[KILN_DIFF_OUTCOMES];
} kiln_diff_coverage_t;

typedef struct kiln_diff_result {
  kiln_diff_outcome_t outcome;
  char what[640];   /* the error, mismatch or skip reason */
  char culprit[96]; /* mismatch: the first pass after which the evaluator differs, or
                       "after the passes (emitters, LLVM, runtime)"; "" otherwise */
} kiln_diff_result_t;

typedef struct kiln_diff_options {
  kiln_device_t *device;          /* required: the host device */
  bool bisect;                    /* name the pass on a mismatch */
  kiln_diff_coverage_t *coverage; /* (optional) added to */
} kiln_diff_options_t;

/* Runs the differential test on module text `text`; the outcome is in *out. */
void kiln_diff_check_text(const char *text, const kiln_diff_options_t *o, kiln_diff_result_t *out);

/* Prints the coverage: opcodes (rows) x element types (columns) for every opcode reached,
 * then emitters x element types, then the outcome counts. Names are printed whole, so the
 * table reads back (kiln_diff_coverage_read). */
void kiln_diff_coverage_print(FILE *f, const kiln_diff_coverage_t *c);

/* Adds to *c every coverage table that kiln_diff_coverage_print wrote into `text` (a kiln-fuzz
 * log; tables whose type names were cut to 7 characters, as before, are matched in column
 * order). Returns the number of tables read; -1 when one is malformed (`err` then says
 * where). */
int kiln_diff_coverage_read(const char *text, kiln_diff_coverage_t *c, char *err, size_t err_len);

#endif /* KILN_TOOLS_COMMON_HLO_GEN_DIFF_H_ */
