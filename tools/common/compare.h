/* When a result is close enough to the reference evaluator's: the one comparator that the
 * fusion runner (one kernel, tools/common/fusion_runner.h) and whole-module runs (kiln-run,
 * the corpus tests) use.
 *
 * The rule, element by element:
 *   - NaN matches only NaN, an infinity only itself;
 *   - exact types (integers, pred) must have the same value;
 *   - a float element, or each part of a complex element, passes when it is within max_ulp
 *     units in the last place of the wanted value (a complex part: ulps of the element's
 *     larger part, so a part that cancels to a small value keeps the absolute error of the
 *     whole number), or when |got - want| <= atol + rtol * |want|.
 *
 * The two tolerances built on it:
 *   - kernel (kiln_compare_kernel_tolerance): one fusion against the evaluator on the same
 *     inputs. max_ulp 0 for exact types, 1 for f16, bf16, f8 and f4 (one rounding of the
 *     narrow type), 4 for f32, 8 for f64 (math through formulas of several
 *     correctly-rounded-ish ops); rtol = atol = 0. A reduction kernel adds in a tree where
 *     the evaluator adds in order, so its elements also pass within
 *     kiln_compare_summation_atol: 4 * sqrt(n) * eps * M for n terms per output element and M
 *     the largest magnitude of the output.
 *   - module (kiln_compare_module_tolerance): whole modules chain many kernels whose
 *     summation order and math differ from the evaluator's (tree reductions, polynomial tanh,
 *     fused multiply-add), so values are compared the way XLA's tests compare backends:
 *     max_ulp 0, rtol / atol per type (f64 and c128 1e-9 / 1e-9; f32 and c64 1e-4 / 1e-5; f16
 *     and bf16 2e-2 / 1e-2; f8 and narrower 0.25 / 0.1), atol multiplied by M, the leaf's
 *     largest finite magnitude but at least 1 (an element that sums many terms carries their
 *     rounding, not its own). */
#ifndef KILN_TOOLS_COMMON_COMPARE_H_
#define KILN_TOOLS_COMMON_COMPARE_H_

#include <stdbool.h>
#include <stdint.h>

#include "compiler/hlo/literal.h"

typedef struct kiln_tolerance {
  int64_t max_ulp; /* float elements within this many ulps pass */
  double rtol;     /* ... and so do those within atol + rtol * |want| */
  double atol;     /* absolute, already scaled */
} kiln_tolerance_t;

/* The kernel tolerance of element type `t` (complex: its part type's). */
kiln_tolerance_t kiln_compare_kernel_tolerance(kiln_elem_type_t t);
/* The extra absolute tolerance of a tree-summed float result of type `t` whose elements each
 * sum `terms` values and whose largest magnitude is `magnitude`; 0 for other types. */
double kiln_compare_summation_atol(kiln_elem_type_t t, double terms, double magnitude);
/* The module tolerance of a leaf of type `t` whose largest finite magnitude is `magnitude`
 * (kiln_compare_magnitude); all 0 for exact types. */
kiln_tolerance_t kiln_compare_module_tolerance(kiln_elem_type_t t, double magnitude);
/* The largest finite magnitude among `l`'s elements (both parts of complex ones); 0 when
 * none. */
double kiln_compare_magnitude(const kiln_literal_t *l);

typedef struct kiln_compare_report {
  int64_t elements, mismatches;
  int64_t max_ulp; /* largest distance seen (floats; exact types: 0 or 1 for "differs") */
  double max_abs_err, max_rel_err;
  char first[320]; /* the first mismatch, "" when none */
} kiln_compare_report_t;

/* Compares `want`'s elements with `got`, an array of as many elements of want's type stored
 * as a literal stores them, under `tol`; adds to `report` (zero it first). The first
 * mismatch reads "<label> element <i>: want <w>, got <g>". */
void kiln_compare_array(const kiln_literal_t *want, const void *got, const kiln_tolerance_t *tol,
                        const char *label, kiln_compare_report_t *report);

typedef struct kiln_compare_options {
  double scale; /* multiplies the module tolerances; 0: 1 */
  /* When set, every float or complex leaf passes at least under the module tolerance of
   * `floor_type`: a module that computes in a narrow type and converts the result to a wider
   * one carries the narrow type's rounding (kiln-fuzz passes its narrowest float type). */
  bool has_floor_type;
  kiln_elem_type_t floor_type;
} kiln_compare_options_t;

/* Compares every array leaf of `got` with the same leaf of `want` (same shapes) under the
 * module tolerance. Returns false (and sets report->first) when the shapes differ or some
 * element is off. */
bool kiln_compare_literals(const kiln_literal_t *want, const kiln_literal_t *got,
                           const kiln_compare_options_t *opts, kiln_compare_report_t *report);

#endif /* KILN_TOOLS_COMMON_COMPARE_H_ */
