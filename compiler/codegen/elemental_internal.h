/* Internal to the elemental emitter (elemental.c, elemental_ops.c). */
#ifndef KILN_COMPILER_CODEGEN_ELEMENTAL_INTERNAL_H_
#define KILN_COMPILER_CODEGEN_ELEMENTAL_INTERNAL_H_

#include "base/vec.h"
#include "compiler/codegen/elemental.h"

#define KILN_ELEM_MAX_OUTPUTS 16

/* A value emitted for (instr, index values) in the current region or an enclosing one. */
typedef struct kiln_elemental_cache {
  const kiln_hlo_instruction_t *instr;
  int nidx, nvals;
  kiln_kir_value_t *idx[KILN_KIR_MAX_RANK];
  kiln_kir_value_t *vals[KILN_ELEM_MAX_OUTPUTS];
} kiln_elemental_cache_t;

/* State while emitting one function body. */
typedef struct kiln_elemental_fn {
  kiln_elemental_t *e;
  kiln_kir_builder_t *b;
  int sg;                     /* subgraph being emitted */
  kiln_kir_value_t **tensors; /* the function's tensor parameters */
  KILN_VEC(kiln_elemental_cache_t) cache;
  kiln_status err; /* first error */
} kiln_elemental_fn_t;

/* Records the first error (takes ownership); returns false. */
bool kiln_elemental_fail(kiln_elemental_fn_t *f, kiln_status s);
int kiln_elemental_num_outputs(const kiln_hlo_instruction_t *instr);
kiln_elem_type_t kiln_elemental_output_type(const kiln_hlo_instruction_t *instr, int k);
/* Enter / leave a nested region; values cached inside are forgotten on exit. */
void kiln_elemental_enter(kiln_elemental_fn_t *f, kiln_kir_region_t *r, size_t *mark);
void kiln_elemental_exit(kiln_elemental_fn_t *f, size_t mark);

/* Values of `instr`'s outputs at index `idx` (nidx values); returns the count or -1. */
int kiln_elemental_emit(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                        kiln_kir_value_t *const *idx, int nidx, kiln_kir_value_t **out);
int kiln_elemental_emit_instr(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                              kiln_kir_value_t *const *idx, int nidx, kiln_kir_value_t **out);

/* Complex values are two kernel-IR values (re, im) of the part type (c64: f32, c128: f64). */
int kiln_elemental_vals_per(kiln_elem_type_t t);
kiln_elem_type_t kiln_elemental_part_type(kiln_elem_type_t t);
/* Kernel-IR values for all outputs of `instr` (outputs, complex ones counted twice). */
int kiln_elemental_num_values(const kiln_hlo_instruction_t *instr);

/* ---- elemental_ops.c ---- */

/* Elementwise `instr` with complex operands or result: args[k] holds cnt[k] values (1 or 2).
 * Writes the result's values (1 or 2) and returns their count, or -1. */
int kiln_elemental_complex_op(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                              kiln_kir_value_t *const (*args)[2], const int *cnt, int nargs,
                              kiln_kir_value_t **out);

/* bitcast-convert `instr` at `idx` when the widths differ or either side is complex
 * (little-endian: element k of a narrow side holds bits [k*w, (k+1)*w) of the wide one; a
 * complex value's real part is its low half). Returns the count of values or -1. */
int kiln_elemental_bitcast_convert(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                                   kiln_kir_value_t *const *idx, int nidx, kiln_kir_value_t **out);
/* Element i of a literal as a kernel-IR constant of its type. */
kiln_kir_value_t *kiln_elemental_constant(kiln_elemental_fn_t *f, const kiln_literal_t *lit,
                                          int64_t i);
/* The scalar result of elementwise `instr` (or map / copy) on operand values. */
kiln_kir_value_t *kiln_elemental_scalar_op(kiln_elemental_fn_t *f,
                                           const kiln_hlo_instruction_t *instr,
                                           kiln_kir_value_t *const *args, int nargs);
/* Emits a scalar computation (reducer, map body) inline on `args`; returns the number of
 * results written to out, or -1. Arguments and results are flat: a complex parameter or
 * result takes two values (re, im). */
int kiln_elemental_emit_scalar_computation(kiln_elemental_fn_t *f, const kiln_hlo_computation_t *c,
                                           kiln_kir_value_t *const *args, int nargs,
                                           kiln_kir_value_t **out);
/* The value of instruction `which` of scalar computation `c` (a real one), computing only what
 * it reads: `bound[k]` takes `bound_vals[k]` instead of being computed (its operands are not
 * read), parameters it needs read `args` as kiln_elemental_emit_scalar_computation's do.
 * NULL on failure (f->err set). */
kiln_kir_value_t *kiln_elemental_emit_scalar_value(kiln_elemental_fn_t *f,
                                                   const kiln_hlo_computation_t *c,
                                                   kiln_kir_value_t *const *args, int nargs,
                                                   const kiln_hlo_instruction_t *which,
                                                   const kiln_hlo_instruction_t *const *bound,
                                                   kiln_kir_value_t *const *bound_vals, int nbound);

#endif /* KILN_COMPILER_CODEGEN_ELEMENTAL_INTERNAL_H_ */
