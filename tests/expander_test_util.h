/* Shared by the expander pass tests (include after <cmocka.h> and pass_test_util.h):
 * compare an expanded module's results with the original's on the reference evaluator
 * within a tolerance scaled by each leaf's largest magnitude. */
#ifndef KILN_TESTS_EXPANDER_TEST_UTIL_H_
#define KILN_TESTS_EXPANDER_TEST_UTIL_H_

#include <math.h>
#include <stdbool.h>

#include "compiler/eval/eval.h"
#include "tools/common/run_report.h"

/* Relative tolerance per element type: f64/c128 1e-12, f32/c64 1e-5, f16 2e-3, else 1.6e-2. */
static inline double et_tolerance_of(kiln_elem_type_t t) {
  switch (t) {
    case KILN_F64: case KILN_C128: return 1e-12;
    case KILN_F32: case KILN_C64: return 1e-5;
    case KILN_F16: return 2e-3;
    default: return 1.6e-2;
  }
}

static inline void et_get(const kiln_literal_t *l, int64_t k, double *re, double *im) {
  *im = 0;
  if (kiln_elem_type_is_complex(l->shape->type)) kiln_literal_get_c128(l, k, re, im);
  else *re = kiln_literal_get_f64(l, k);
}

/* Worst |after - before| / (max|before| of the leaf * the type's tolerance) over every
 * real and imaginary part of every leaf: <= 1 is within tolerance. NaN must stay NaN and
 * infinities must match; -1 when they do not or the leaves differ in shape. */
static inline double et_worst_error(const kiln_literal_t *before, const kiln_literal_t *after) {
  double worst = 0;
  int n = kiln_run_report_num_leaves(before);
  if (n != kiln_run_report_num_leaves(after)) return -1;
  for (int i = 0; i < n; i++) {
    const kiln_literal_t *x = kiln_run_report_leaf(before, i), *y = kiln_run_report_leaf(after, i);
    if (x->num_elements != y->num_elements || x->shape->type != y->shape->type) return -1;
    double t = et_tolerance_of(x->shape->type), mag = 0;
    for (int64_t k = 0; k < x->num_elements; k++) {
      double re, im;
      et_get(x, k, &re, &im);
      if (isfinite(re) && fabs(re) > mag) mag = fabs(re);
      if (isfinite(im) && fabs(im) > mag) mag = fabs(im);
    }
    for (int64_t k = 0; k < x->num_elements; k++) {
      double a[2], b[2];
      et_get(x, k, &a[0], &a[1]);
      et_get(y, k, &b[0], &b[1]);
      for (int p = 0; p < 2; p++) {
        if (!isfinite(a[p]) || !isfinite(b[p])) {
          if (!(isnan(a[p]) && isnan(b[p])) && a[p] != b[p]) return -1;
          continue;
        }
        double e = fabs(a[p] - b[p]) / (mag > 0 ? mag : 1) / t;
        if (e > worst) worst = e;
      }
    }
  }
  return worst;
}

#endif /* KILN_TESTS_EXPANDER_TEST_UTIL_H_ */
