/* IEEE 754-2019 maximum / minimum, as XLA's maximum / minimum (StableHLO, llvm.maximum /
 * llvm.minimum, which the backends emit): a NaN operand wins (the first one when both are),
 * and -0 < +0. The one copy of the rule for the evaluator (compiler/eval/eval.h) and the
 * runtime's collective folds (runtime/collectives.c); the fuzz regression
 * max_min_signed_zeros.hlo holds the evaluator to the compiled kernels, test_collectives_runtime
 * the folds to the rule. */
#ifndef KILN_BASE_IEEE_MINMAX_H_
#define KILN_BASE_IEEE_MINMAX_H_

#include <math.h>

#define KILN_IEEE_MINMAX_DEFINE(max_name, min_name, T)                              \
  static inline T max_name(T x, T y) {                                              \
    return isnan(x) ? x : isnan(y) ? y : (x < y || (x == y && signbit(x))) ? y : x; \
  }                                                                                 \
  static inline T min_name(T x, T y) {                                              \
    return isnan(x) ? x : isnan(y) ? y : (y < x || (x == y && signbit(y))) ? y : x; \
  }
KILN_IEEE_MINMAX_DEFINE(kiln_ieee_max, kiln_ieee_min, double)
KILN_IEEE_MINMAX_DEFINE(kiln_ieee_maxf, kiln_ieee_minf, float)
#undef KILN_IEEE_MINMAX_DEFINE

#endif /* KILN_BASE_IEEE_MINMAX_H_ */
