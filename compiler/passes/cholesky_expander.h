/* The Cholesky loop of the cholesky_expander pass, for other expansions (custom_call_rewrite's
 * LAPACK/cuSOLVER potrf): the factor of each matrix of `a` ([..., n, n], float or complex),
 * read from the `lower` triangle, as a [B, n, n] array in the lower triangle (conj-transposed
 * back by the caller for upper; the other triangle zero), computed in f32 for f16 / bf16 /
 * f32 and in its own type otherwise; NaN spreads from a pivot that is not > 0 to the columns
 * after it. *first: s32[B], 1 + the first column whose pivot was not > 0, 0 when none (LAPACK's
 * info). `add` is the scalar adder of the sum type (cholesky_expander.c). NULL when the builder
 * failed. */
#ifndef KILN_PASSES_CHOLESKY_EXPANDER_H_
#define KILN_PASSES_CHOLESKY_EXPANDER_H_

#include <stdbool.h>

#include "compiler/passes/hlo_builder.h"

kiln_hlo_instruction_t *kiln_cholesky_factor(kiln_builder_t *b, kiln_hlo_instruction_t *a,
                                             bool lower, kiln_hlo_computation_t *add,
                                             kiln_hlo_instruction_t **first);

#endif /* KILN_PASSES_CHOLESKY_EXPANDER_H_ */
