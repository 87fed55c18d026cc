/* Comparing a backend's result with the reference evaluator's, leaf by leaf.
 *
 * Whole modules chain many kernels whose summation order and math differ from the
 * evaluator's (tree reductions, polynomial tanh, fused multiply-add), so values are
 * compared the way XLA's tests compare backends: |got - want| <= atol * M + rtol * |want|
 * per element, where M is the largest finite magnitude in the leaf (at least 1: an element
 * that sums many terms carries their rounding, not its own), with per-type defaults
 * (rtol / atol: f64 1e-9 / 1e-9; f32 and c64 1e-4 / 1e-5; f16 and bf16 2e-2 / 1e-2; f8 and
 * narrower 0.25 / 0.1), NaN only matching NaN and infinities only themselves. Integers, pred and other exact types must be equal. */
#ifndef KILN_TOOLS_COMMON_COMPARE_H_
#define KILN_TOOLS_COMMON_COMPARE_H_

#include <stdbool.h>
#include <stdint.h>

#include "compiler/hlo/literal.h"

typedef struct kiln_compare_options {
  double scale; /* multiplies the default tolerances; 0: 1 */
} kiln_compare_options_t;

typedef struct kiln_compare_report {
  int64_t elements, mismatches;
  double max_abs_err, max_rel_err;
  char first[320]; /* the first mismatch, "" when none */
} kiln_compare_report_t;

/* Default (rtol, atol) for element type `t`; both 0 for exact types. */
void kiln_compare_tolerance(kiln_elem_type_t t, double *rtol, double *atol);

/* Compares every array leaf of `got` with the same leaf of `want` (same shapes). Returns
 * false (and sets report->first) when the shapes differ or some element is off. */
bool kiln_compare_literals(const kiln_literal_t *want, const kiln_literal_t *got,
                           const kiln_compare_options_t *opts, kiln_compare_report_t *report);

#endif /* KILN_TOOLS_COMMON_COMPARE_H_ */
