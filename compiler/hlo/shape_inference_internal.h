/* Helpers shared by the shape inference files (not part of the public API). */
#ifndef KILN_HLO_SHAPE_INFERENCE_INTERNAL_H_
#define KILN_HLO_SHAPE_INFERENCE_INTERNAL_H_

#include "compiler/hlo/shape_inference.h"

/* The shape / list as text, in arena `a` (for messages). */
const char *kiln__shape_str(kiln_arena_t *a, const kiln_shape_t *s);
const char *kiln__list_str(kiln_arena_t *a, const kiln_i64_list_t *l);
kiln_status kiln__oom(void);
kiln_shape_t *kiln__array(kiln_arena_t *a, kiln_elem_type_t t, int rank, const int64_t *dims);
/* An array shape with the dims of `s` and element type `t`, no layout. */
kiln_shape_t *kiln__with_type(kiln_arena_t *a, const kiln_shape_t *s, kiln_elem_type_t t);
bool kiln__same_dims(const kiln_shape_t *x, const kiln_shape_t *y);
bool kiln__is_scalar(const kiln_shape_t *s);
bool kiln__valid_dims(const kiln_i64_list_t *l, int64_t bound);
bool kiln__sorted(const kiln_i64_list_t *l);
bool kiln__contains(const kiln_i64_list_t *l, int64_t x);
kiln_status kiln__require_array(kiln_arena_t *a, const char *what, const kiln_shape_t *s);
/* Checks a reducer computation `(acc0..accN-1, in0..inN-1) -> (acc0..accN-1)` of scalars
 * (a single result may be a scalar or a 1-tuple). Inputs may differ from their parameter
 * in floating-point precision only. */
kiln_status kiln__check_reducer(kiln_arena_t *a, const char *op, const kiln_hlo_computation_t *c,
                                int n, const kiln_elem_type_t *acc_types,
                                const kiln_elem_type_t *input_types);
/* The shape of parameter i of `c`, or NULL when missing. */
const kiln_shape_t *kiln__param_shape(const kiln_hlo_computation_t *c, int i);

#endif /* KILN_HLO_SHAPE_INFERENCE_INTERNAL_H_ */
