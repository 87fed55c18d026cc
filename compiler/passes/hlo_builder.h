/* A small HLO builder for expander passes: appends instructions to one computation with
 * shapes inferred from the operands, so an expansion reads like the math it computes.
 *
 * Every function returns the new instruction, or NULL when an operand is NULL or the
 * module's arena refused memory; the first failure is remembered in `b->failed`, so a
 * caller can build a whole expansion and check once at the end (NULL operands propagate).
 * New instructions are appended at the end of the computation: the caller sorts it into
 * post order (kiln_hlo_computation_sort_post_order) once it is done.
 *
 * Shapes of new arrays get the default descending layout when `b->layouts` is set (a
 * module whose shapes carry layouts), none otherwise. */
#ifndef KILN_PASSES_HLO_BUILDER_H_
#define KILN_PASSES_HLO_BUILDER_H_

#include <stdbool.h>
#include <stdint.h>

#include "compiler/hlo/ir.h"

typedef struct kiln_builder {
  kiln_hlo_module_t *m;
  kiln_hlo_computation_t *c;
  const char *name_hint; /* prefix of every new instruction's name */
  bool layouts;
  bool failed;
} kiln_builder_t;

void kiln_builder_init(kiln_builder_t *b, kiln_hlo_computation_t *c, const char *name_hint,
                       bool layouts);

/* An array shape of `type` and `dims` in the module's arena (layout per b->layouts). */
kiln_shape_t *kiln_builder_shape(kiln_builder_t *b, kiln_elem_type_t type, int rank,
                                 const int64_t *dims);
/* Any instruction: opcode, result shape, operands. Attributes are left for the caller. */
kiln_hlo_instruction_t *kiln_builder_op(kiln_builder_t *b, kiln_hlo_opcode_t op, kiln_shape_t *shape,
                                        int n, kiln_hlo_instruction_t *const *operands);

/* Sets *l to a copy of v[0..n) in the module's arena; false (and b->failed) when it refused. */
bool kiln_builder_list(kiln_builder_t *b, kiln_i64_list_t *l, int n, const int64_t *v);

/* Scalar constants. Integers wrap to the type's width; floats round to the type. */
kiln_hlo_instruction_t *kiln_builder_const_u64(kiln_builder_t *b, kiln_elem_type_t type, uint64_t v);
kiln_hlo_instruction_t *kiln_builder_const_f64(kiln_builder_t *b, kiln_elem_type_t type, double v);

/* Elementwise ops: the result has x's dims (and element type, except compare: pred). */
kiln_hlo_instruction_t *kiln_builder_unary(kiln_builder_t *b, kiln_hlo_opcode_t op,
                                           kiln_hlo_instruction_t *x);
kiln_hlo_instruction_t *kiln_builder_binary(kiln_builder_t *b, kiln_hlo_opcode_t op,
                                            kiln_hlo_instruction_t *x, kiln_hlo_instruction_t *y);
kiln_hlo_instruction_t *kiln_builder_compare(kiln_builder_t *b, kiln_cmp_dir_t dir,
                                             kiln_hlo_instruction_t *x, kiln_hlo_instruction_t *y);
kiln_hlo_instruction_t *kiln_builder_select(kiln_builder_t *b, kiln_hlo_instruction_t *pred,
                                            kiln_hlo_instruction_t *on_true,
                                            kiln_hlo_instruction_t *on_false);
/* convert / bitcast-convert (same width) to `type`, keeping the dims. */
kiln_hlo_instruction_t *kiln_builder_convert(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                             kiln_elem_type_t type);
kiln_hlo_instruction_t *kiln_builder_bitcast_convert(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                                     kiln_elem_type_t type);

/* broadcast(x) to `dims`, x's dimension i going to result dimension map[i]. */
kiln_hlo_instruction_t *kiln_builder_broadcast(kiln_builder_t *b, kiln_hlo_instruction_t *x, int rank,
                                               const int64_t *dims, const int64_t *map);
/* broadcast of a scalar to the dims of `like`. */
kiln_hlo_instruction_t *kiln_builder_splat(kiln_builder_t *b, kiln_hlo_instruction_t *scalar,
                                           const kiln_hlo_instruction_t *like);
kiln_hlo_instruction_t *kiln_builder_reshape(kiln_builder_t *b, kiln_hlo_instruction_t *x, int rank,
                                             const int64_t *dims);
/* slice of a rank-1 array: [start, limit). */
kiln_hlo_instruction_t *kiln_builder_slice1(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                            int64_t start, int64_t limit);
/* slice along dimension `dim` only: [start, limit); the other dimensions whole. */
kiln_hlo_instruction_t *kiln_builder_slice_dim(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                               int dim, int64_t start, int64_t limit);
/* pad(x, value) with lo / hi / interior padding per dimension (none negative). */
kiln_hlo_instruction_t *kiln_builder_pad(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                         kiln_hlo_instruction_t *value, const int64_t *lo,
                                         const int64_t *hi, const int64_t *interior);
/* slice(x) of count[d] elements from start[d] with stride[d] per dimension. */
kiln_hlo_instruction_t *kiln_builder_strided_slice(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                                   const int64_t *start, const int64_t *count,
                                                   const int64_t *stride);
kiln_hlo_instruction_t *kiln_builder_iota(kiln_builder_t *b, kiln_elem_type_t type, int rank,
                                          const int64_t *dims, int dim);
kiln_hlo_instruction_t *kiln_builder_tuple(kiln_builder_t *b, int n, kiln_hlo_instruction_t *const *xs);
kiln_hlo_instruction_t *kiln_builder_gte(kiln_builder_t *b, kiln_hlo_instruction_t *t, int64_t index);
/* reduce(x, init) over `dims` (sorted ascending) with the scalar computation `fn`. */
kiln_hlo_instruction_t *kiln_builder_reduce(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                            kiln_hlo_instruction_t *init, int num_dims,
                                            const int64_t *dims, kiln_hlo_computation_t *fn);

/* Complex helpers: real(x) / imag(x) (the component type), complex(re, im), and the
 * conjugate complex(real(x), -imag(x)) (x itself for real types). */
kiln_hlo_instruction_t *kiln_builder_real(kiln_builder_t *b, kiln_hlo_instruction_t *x);
kiln_hlo_instruction_t *kiln_builder_imag(kiln_builder_t *b, kiln_hlo_instruction_t *x);
kiln_hlo_instruction_t *kiln_builder_complex(kiln_builder_t *b, kiln_hlo_instruction_t *re,
                                             kiln_hlo_instruction_t *im);
kiln_hlo_instruction_t *kiln_builder_conj(kiln_builder_t *b, kiln_hlo_instruction_t *x);

/* transpose(x) with result dimension i = x's dimension perm[i]. */
kiln_hlo_instruction_t *kiln_builder_transpose(kiln_builder_t *b, kiln_hlo_instruction_t *x, const int64_t *perm);
/* reverse(x) along `dims`. */
kiln_hlo_instruction_t *kiln_builder_reverse(kiln_builder_t *b, kiln_hlo_instruction_t *x, int num_dims,
                                             const int64_t *dims);
/* dynamic-slice(x, starts...) of `sizes`; starts are s32 scalars, one per dimension. */
kiln_hlo_instruction_t *kiln_builder_dynamic_slice(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                                   kiln_hlo_instruction_t *const *starts, const int64_t *sizes);
/* dynamic-update-slice(x, update, starts...). */
kiln_hlo_instruction_t *kiln_builder_dynamic_update_slice(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                                          kiln_hlo_instruction_t *update,
                                                          kiln_hlo_instruction_t *const *starts);
/* x with its slice at coordinate `index` (an s32 scalar) of dimension `dim` replaced by
 * `update` (x's dims without `dim`): a dynamic-update-slice, or for complex types (which
 * the in-place emitter does not take) select(iota(dim) == index, broadcast(update), x). */
kiln_hlo_instruction_t *kiln_builder_set_slice(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                               kiln_hlo_instruction_t *update, int dim, kiln_hlo_instruction_t *index);
/* The replacement of an instruction of shape `shape` from its values: vals[i] copied to exactly
 * element i of `shape` (layouts included), tupled when `shape` is a tuple, else vals[0] alone. */
kiln_hlo_instruction_t *kiln_builder_result(kiln_builder_t *b, kiln_shape_t *shape, int n,
                                            kiln_hlo_instruction_t *const *vals);
/* while(init), condition=cond, body=body. */
kiln_hlo_instruction_t *kiln_builder_while(kiln_builder_t *b, kiln_hlo_instruction_t *init,
                                           kiln_hlo_computation_t *cond, kiln_hlo_computation_t *body);

/* A new, empty computation with one parameter of `param_shape` (returned in *param); the
 * caller builds its instructions with a builder on it and sets `root`. NULL when the arena
 * refused. */
kiln_hlo_computation_t *kiln_builder_computation(kiln_hlo_module_t *m, const char *name_hint,
                                                 kiln_shape_t *param_shape, kiln_hlo_instruction_t **param);
/* The same with `n` parameters of `shapes` (named after `param_hint`), returned in params[]. */
kiln_hlo_computation_t *kiln_builder_computation_n(kiln_hlo_module_t *m, const char *name_hint,
                                                   const char *param_hint, int n,
                                                   kiln_shape_t *const *shapes,
                                                   kiln_hlo_instruction_t **params);

/* Sum of x over `dims` (sorted ascending), starting from zero; `add` adds two scalars of
 * x's type, or of its component type for complex x, which is summed as its real and
 * imaginary parts (two real reductions joined by complex()). */
kiln_hlo_instruction_t *kiln_builder_sum(kiln_builder_t *b, kiln_hlo_instruction_t *x, int num_dims,
                                         const int64_t *dims, kiln_hlo_computation_t *add);

/* A while condition `(p: state) -> pred[] { ROOT get-tuple-element(p, 0) < n }` for a loop
 * whose state tuple starts with an s32 counter; NULL when the arena refused. */
kiln_hlo_computation_t *kiln_builder_counter_below(kiln_hlo_module_t *m, const char *name_hint, kiln_shape_t *state,
                                                   int64_t n, bool layouts);

/* A new computation `(a: T[], b: T[]) -> T[] { ROOT op(a, b) }` in the module (for reduce);
 * NULL when the arena refused. */
kiln_hlo_computation_t *kiln_builder_scalar_computation(kiln_hlo_module_t *m, const char *name_hint,
                                                        kiln_hlo_opcode_t op, kiln_elem_type_t type);

/* ---- the expander passes' driver ---- */

/* Builds the replacement of `in` (an instruction of the driven opcode, without control
 * edges) with `b`, which appends to in's computation. Returns the replacement (it must have
 * in's shape, layouts included), or NULL to leave `in` as it is; a NULL after an allocation
 * failed (b->failed) makes the pass fail with RESOURCE_EXHAUSTED. */
typedef kiln_hlo_instruction_t *(*kiln_builder_expand_fn)(kiln_builder_t *b, kiln_hlo_instruction_t *in, void *ctx);

/* Runs `expand` on every instruction with opcode `op` in the module's computations (those
 * that exist when it starts; computations the expansions add are not visited), replaces
 * each one it expands (removing what became dead) and sorts the changed computations into
 * post order. New arrays get default layouts when in's shape (or its first tuple element)
 * has a layout. `*changed` is set when anything was expanded. */
kiln_status kiln_builder_expand_all(kiln_hlo_module_t *m, kiln_hlo_opcode_t op, kiln_builder_expand_fn expand,
                                    void *ctx, const char *pass_name, bool *changed);

#endif /* KILN_PASSES_HLO_BUILDER_H_ */
