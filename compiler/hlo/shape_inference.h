/* HLO shape inference: XLA's shape rules, one function per opcode family.
 *
 * Each kiln_shape_infer_* function takes the operand shapes and the attributes that matter
 * and either returns OK with the result shape in *out (allocated in arena `a`, no layout),
 * or an INVALID_ARGUMENT status whose message says what is wrong, starting with the opcode
 * (e.g. "concatenate operands must match in every dimension except 0; operand 1 is
 * f32[2,5] but operand 0 is f32[2,4]"). The message names no instruction: callers that
 * know one (the verifier) prefix it. *out is set to NULL on entry.
 *
 * kiln_shape_check_* functions are for ops whose result shape is not a function of the
 * operands (broadcast, reshape, iota, ...): they check `result` against the rules.
 *
 * Shapes are compared by element type and dimensions (kiln_shape_compatible): layouts and
 * dynamic-dimension markers are ignored, bounds of dynamic dimensions compared as sizes.
 *
 * Called computations are described by their parameters (c->parameters) and root shape;
 * they are expected to have dense parameter numbers (the verifier checks that first). */
#ifndef KILN_HLO_SHAPE_INFERENCE_H_
#define KILN_HLO_SHAPE_INFERENCE_H_

#include "base/alloc.h"
#include "base/status.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/shape.h"

/* Elementwise unary ops (abs, negate, exponential, not, is-finite, real, imag,
 * count-leading-zeros, popcnt, copy, ...). Not convert / bitcast-convert. */
kiln_status kiln_shape_infer_unary(kiln_arena_t *a, kiln_hlo_opcode_t op,
                                   const kiln_shape_t *operand, kiln_shape_t **out);
/* Elementwise binary ops (add, compare -> pred, complex, shifts, and/or/xor, atan2, ...). */
kiln_status kiln_shape_infer_binary(kiln_arena_t *a, kiln_hlo_opcode_t op,
                                    const kiln_shape_t *lhs, const kiln_shape_t *rhs,
                                    kiln_shape_t **out);
/* select(pred, on_true, on_false): pred is pred-typed, same dims or a scalar. */
kiln_status kiln_shape_infer_select(kiln_arena_t *a, const kiln_shape_t *pred,
                                    const kiln_shape_t *on_true, const kiln_shape_t *on_false,
                                    kiln_shape_t **out);
/* clamp(min, operand, max): min and max are scalars or have the operand's shape. */
kiln_status kiln_shape_infer_clamp(kiln_arena_t *a, const kiln_shape_t *min,
                                   const kiln_shape_t *operand, const kiln_shape_t *max,
                                   kiln_shape_t **out);
/* convert to `to` (any array type to any array type, except complex to real). */
kiln_status kiln_shape_infer_convert(kiln_arena_t *a, const kiln_shape_t *operand,
                                     kiln_elem_type_t to, kiln_shape_t **out);
/* bitcast-convert to `to`: same bit width keeps dims; a narrower target appends a
 * dimension of size (from bits / to bits); a wider one drops a last dimension of that
 * ratio. */
kiln_status kiln_shape_infer_bitcast_convert(kiln_arena_t *a, const kiln_shape_t *operand,
                                             kiln_elem_type_t to, kiln_shape_t **out);
/* stochastic-convert(operand, random) to `to`. */
kiln_status kiln_shape_infer_stochastic_convert(kiln_arena_t *a, const kiln_shape_t *operand,
                                                const kiln_shape_t *random,
                                                kiln_elem_type_t to, kiln_shape_t **out);
kiln_status kiln_shape_infer_reduce_precision(kiln_arena_t *a, const kiln_shape_t *operand,
                                              int64_t exponent_bits, int64_t mantissa_bits,
                                              kiln_shape_t **out);

/* ---- data movement ---- */

kiln_status kiln_shape_infer_concatenate(kiln_arena_t *a, int n,
                                         const kiln_shape_t *const *operands, int64_t dim,
                                         kiln_shape_t **out);
/* broadcast: operand dimension i maps to result dimension dims[i] with equal size. */
kiln_status kiln_shape_check_broadcast(kiln_arena_t *a, const kiln_shape_t *operand,
                                       const kiln_i64_list_t *dims, const kiln_shape_t *result);
kiln_status kiln_shape_infer_transpose(kiln_arena_t *a, const kiln_shape_t *operand,
                                       const kiln_i64_list_t *perm, kiln_shape_t **out);
/* reshape: same element type and element count. */
kiln_status kiln_shape_check_reshape(kiln_arena_t *a, const kiln_shape_t *operand,
                                     const kiln_shape_t *result);
/* bitcast: same total bit size for arrays (any shape). */
kiln_status kiln_shape_check_bitcast(kiln_arena_t *a, const kiln_shape_t *operand,
                                     const kiln_shape_t *result);
kiln_status kiln_shape_infer_slice(kiln_arena_t *a, const kiln_shape_t *operand, int n,
                                   const kiln_slice_dim_t *slice, kiln_shape_t **out);
/* dynamic-slice(operand, i0, i1, ...) with scalar integer indices (or one rank-1 index
 * vector, the old form). */
kiln_status kiln_shape_infer_dynamic_slice(kiln_arena_t *a, const kiln_shape_t *operand,
                                           int num_indices, const kiln_shape_t *const *indices,
                                           const kiln_i64_list_t *sizes, kiln_shape_t **out);
kiln_status kiln_shape_infer_dynamic_update_slice(kiln_arena_t *a, const kiln_shape_t *operand,
                                                  const kiln_shape_t *update, int num_indices,
                                                  const kiln_shape_t *const *indices,
                                                  kiln_shape_t **out);
kiln_status kiln_shape_infer_pad(kiln_arena_t *a, const kiln_shape_t *operand,
                                 const kiln_shape_t *value, int n, const kiln_pad_dim_t *pad,
                                 kiln_shape_t **out);
kiln_status kiln_shape_infer_reverse(kiln_arena_t *a, const kiln_shape_t *operand,
                                     const kiln_i64_list_t *dims, kiln_shape_t **out);
kiln_status kiln_shape_check_iota(kiln_arena_t *a, const kiln_shape_t *result, int64_t dim);
kiln_status kiln_shape_infer_gather(kiln_arena_t *a, const kiln_shape_t *operand,
                                    const kiln_shape_t *indices, const kiln_gather_dnums_t *d,
                                    const kiln_i64_list_t *slice_sizes, kiln_shape_t **out);
/* scatter(inputs[0..n-1], indices, updates[0..n-1]): `operands` holds all 2n+1. */
kiln_status kiln_shape_infer_scatter(kiln_arena_t *a, int num_operands,
                                     const kiln_shape_t *const *operands,
                                     const kiln_scatter_dnums_t *d,
                                     const kiln_hlo_computation_t *to_apply,
                                     kiln_shape_t **out);

/* ---- reductions and computations ---- */

/* reduce(inputs[0..n-1], inits[0..n-1]), to_apply (T0..Tn-1, T0..Tn-1) -> (T0..Tn-1). */
kiln_status kiln_shape_infer_reduce(kiln_arena_t *a, int num_operands,
                                    const kiln_shape_t *const *operands,
                                    const kiln_i64_list_t *dims,
                                    const kiln_hlo_computation_t *to_apply, kiln_shape_t **out);
/* The output dims of sliding `window` over `operand` (reduce-window, convolution, ...). */
kiln_status kiln_shape_infer_window_output(kiln_arena_t *a, const kiln_shape_t *operand,
                                           int n, const kiln_window_dim_t *window,
                                           kiln_elem_type_t type, kiln_shape_t **out);
kiln_status kiln_shape_infer_reduce_window(kiln_arena_t *a, int num_operands,
                                           const kiln_shape_t *const *operands, int n,
                                           const kiln_window_dim_t *window,
                                           const kiln_hlo_computation_t *to_apply,
                                           kiln_shape_t **out);
kiln_status kiln_shape_infer_select_and_scatter(
    kiln_arena_t *a, const kiln_shape_t *operand, const kiln_shape_t *source,
    const kiln_shape_t *init, int n, const kiln_window_dim_t *window,
    const kiln_hlo_computation_t *select, const kiln_hlo_computation_t *scatter,
    kiln_shape_t **out);
/* map(operands...), to_apply takes one scalar per operand. `dims` may be NULL. */
kiln_status kiln_shape_infer_map(kiln_arena_t *a, int n, const kiln_shape_t *const *operands,
                                 const kiln_i64_list_t *dims,
                                 const kiln_hlo_computation_t *to_apply, kiln_shape_t **out);
/* sort(operands...) along `dim`, comparator (T0, T0, T1, T1, ...) -> pred[]. */
kiln_status kiln_shape_infer_sort(kiln_arena_t *a, int n, const kiln_shape_t *const *operands,
                                  int64_t dim, const kiln_hlo_computation_t *comparator,
                                  kiln_shape_t **out);
/* dot with general dimension numbers; the result has element type `result_type` (XLA lets
 * it differ from the operands': preferred element type). */
kiln_status kiln_shape_infer_dot(kiln_arena_t *a, const kiln_shape_t *lhs,
                                 const kiln_shape_t *rhs, const kiln_dot_dnums_t *d,
                                 kiln_elem_type_t result_type, kiln_shape_t **out);
/* convolution; feature/batch group counts of 0 mean 1. */
kiln_status kiln_shape_infer_convolution(kiln_arena_t *a, const kiln_shape_t *lhs,
                                         const kiln_shape_t *rhs, const kiln_conv_dnums_t *d,
                                         int n, const kiln_window_dim_t *window,
                                         int64_t feature_group_count,
                                         int64_t batch_group_count,
                                         kiln_elem_type_t result_type, kiln_shape_t **out);

/* ---- tuples and control flow ---- */

kiln_status kiln_shape_infer_tuple(kiln_arena_t *a, int n, const kiln_shape_t *const *operands,
                                   kiln_shape_t **out);
kiln_status kiln_shape_infer_get_tuple_element(kiln_arena_t *a, const kiln_shape_t *operand,
                                               int64_t index, kiln_shape_t **out);
/* while: condition (S) -> pred[], body (S) -> S, operand S. */
kiln_status kiln_shape_infer_while(kiln_arena_t *a, const kiln_shape_t *operand,
                                   const kiln_hlo_computation_t *condition,
                                   const kiln_hlo_computation_t *body, kiln_shape_t **out);
/* conditional(selector, branch operands...): selector pred[] with 2 branches (true first)
 * or s32[] with any number; branch i takes operand i+1; all roots equal. */
kiln_status kiln_shape_infer_conditional(kiln_arena_t *a, int num_operands,
                                         const kiln_shape_t *const *operands, int num_branches,
                                         kiln_hlo_computation_t *const *branches,
                                         kiln_shape_t **out);
/* call / fusion: the computation's parameters match the operands; result is its root. */
kiln_status kiln_shape_infer_call(kiln_arena_t *a, const char *what, int n,
                                  const kiln_shape_t *const *operands,
                                  const kiln_hlo_computation_t *callee, kiln_shape_t **out);

/* ---- linear algebra and misc ---- */

kiln_status kiln_shape_infer_cholesky(kiln_arena_t *a, const kiln_shape_t *operand,
                                      kiln_shape_t **out);
kiln_status kiln_shape_infer_triangular_solve(kiln_arena_t *a, const kiln_shape_t *lhs,
                                              const kiln_shape_t *rhs, bool left_side,
                                              kiln_shape_t **out);
/* fft_type is "FFT", "IFFT", "RFFT" or "IRFFT". */
kiln_status kiln_shape_infer_fft(kiln_arena_t *a, const kiln_shape_t *operand,
                                 const char *fft_type, const kiln_i64_list_t *fft_length,
                                 kiln_shape_t **out);
kiln_status kiln_shape_infer_topk(kiln_arena_t *a, const kiln_shape_t *operand, int64_t k,
                                  kiln_shape_t **out);

/* The whole rule set for one instruction: arity, attributes, operand and called
 * computation shapes. *out is the inferred result shape, or NULL when the result is free
 * (custom-call, async ops, ...) or was checked against instr->shape directly (broadcast,
 * reshape, iota, ...). Operands and called computations must be non-NULL. */
kiln_status kiln_shape_infer_instruction(kiln_arena_t *a, const kiln_hlo_instruction_t *instr,
                                         kiln_shape_t **out);

#endif /* KILN_HLO_SHAPE_INFERENCE_H_ */
