/* Elemental emitter: turns each subgraph of a partitioned fusion computation into one
 * kernel-IR function `(tensors..., indices...) -> scalars` that computes its roots' elements
 * at the given output index (the emitter document's "Elemental emission" and "Subgraph
 * functions").
 *
 * Emission is recursive from the roots: an operand in the same subgraph is emitted inline
 * (once per distinct index: a value read twice at the same index, like GELU's parameter, is
 * extracted once), an operand in another subgraph becomes a `call` of that subgraph's
 * function, a parameter (or a non-scalar constant) becomes a tensor `extract`.
 *
 * Supported:
 *   - every elementwise opcode on every element type the kernel IR has (pred, s2..s64,
 *     u2..u64, f16, bf16, f32, f64, every f8, f4e2m1fn); narrow floats compute through f32
 *     and round to nearest even after every op (the kernel IR's rule). acos, asin, acosh,
 *     asinh, atanh, cosh, sinh are built from the kernel IR's math ops with formulas that
 *     keep full precision near zero (log1p / expm1 forms); integer power by squaring;
 *     compare with every direction and type (TOTALORDER through the integer total-order
 *     key); reduce-precision with XLA's bit algorithm; map; clamp; bitcast-convert between
 *     equal widths;
 *   - pure index transforms through the per-opcode indexing maps (hlo_indexing.h):
 *     transpose, broadcast, reshape, bitcast (physical order under both layouts), copy,
 *     slice, reverse, iota,
 *     concatenate (a chain of ifs on the maps' constraints), pad (the padding value unless
 *     the map's constraints hold), dynamic-slice and canonical gather (runtime variables:
 *     start indices read from their operands, clamped into the variable's interval);
 *   - reduce, reduce-window, dot and convolution inside a loop fusion (not as heroes):
 *     nested `for` loops over the map's symbols with the accumulators as iteration
 *     arguments, the reducer computation emitted inline on scalars. Dot and convolution
 *     (any dimension numbers / dim_labels, window stride, padding (negative too), lhs and
 *     rhs dilation, reversal, feature and batch groups) convert each operand element to the
 *     result type, then accumulate as the evaluator does: f32 for f32 and narrower floats
 *     (rounded once at the end), f64 for f64, the result type for integers (wrapping) and
 *     pred (or of ands), (re, im) parts for complex results. The convolution's loops run
 *     over input features (outer) and the window (inner); points on padding or lhs-dilation
 *     holes are skipped by an `if` on the map's constraints.
 *   - complex (c64, c128) values as (re, im) pairs of f32 / f64: add, subtract, multiply,
 *     divide (Smith's scaling), negate, complex, real, imag, abs (scaled hypot), exp, log,
 *     select, compare EQ/NE, convert, copy, and data movement (not pad, concatenate,
 *     reduce).
 * Anything else (sort, scatter, dynamic-update-slice, rng, ...) is UNIMPLEMENTED naming the
 * opcode.
 *
 * Tensors: the functions take one tensor per fusion parameter (by parameter number), then
 * one per non-scalar constant (in instruction order); kiln_elemental_tensor_instr names
 * them. A tensor whose layout is not the default (minor_to_major a permutation, untiled) is
 * stored row-major in its physical dimension order (most major first) and read at the
 * permuted index, so contiguous physical accesses stay contiguous. Values inside the
 * fusion are logical: intermediate layouts are ignored (bitcasts' maps read both layouts).
 * Tensors and outputs in a non-default order are for emitters that set physical_layouts
 * (the loop emitter): for others, which may index tensors or outputs themselves in logical
 * order, kiln_elemental_emit_functions is UNIMPLEMENTED naming the tensor. */
#ifndef KILN_COMPILER_CODEGEN_ELEMENTAL_H_
#define KILN_COMPILER_CODEGEN_ELEMENTAL_H_

#include <stdbool.h>

#include "base/status.h"
#include "compiler/codegen/kir.h"
#include "compiler/codegen/partitioner.h"
#include "compiler/hlo/ir.h"

typedef struct kiln_elemental {
  kiln_kir_module_t *m;
  const kiln_hlo_computation_t *comp;
  const kiln_partition_t *part;
  int num_tensors;
  const kiln_hlo_instruction_t **tensors; /* parameters by number, then array constants */
  const kiln_kir_type_t **tensor_types;
  kiln_kir_func_t **funcs; /* one per subgraph */
  /* Set by init: the first tensor / partition output whose layout is not the default. */
  const kiln_hlo_instruction_t *permuted_tensor, *permuted_output;
  /* Set by the caller before emit_functions when every tensor access it makes itself and
   * every output write goes through kiln_elemental_physical_index / tensor_type (else a
   * permuted tensor or output is UNIMPLEMENTED). */
  bool physical_layouts;
  /* Optional, set by the caller before emit_functions: subgraphs whose roots all satisfy
   * caller_emits(caller_user, root) and that no emitted function reads get no function
   * (the caller computes those values itself, e.g. a reduction hero and its epilogue); a
   * call to one is an internal error. */
  kiln_partition_root_fn caller_emits;
  void *caller_user;
} kiln_elemental_t;

/* perm[j] = the logical dimension stored at physical position j (most major first) of an
 * array shape (the identity for no layout, rank <= 1 or a malformed layout). Returns
 * whether it is not the identity. */
bool kiln_elemental_physical_order(const kiln_shape_t *s, int *perm);
/* The physical index of logical index `idx` of a tensor of shape `s` (rank values). */
void kiln_elemental_physical_index(const kiln_shape_t *s, kiln_kir_value_t *const *idx,
                                   kiln_kir_value_t **out);

/* Element type of a kernel-IR scalar for an HLO element type, or UNIMPLEMENTED (complex,
 * token, tuple). */
kiln_status kiln_elemental_check_type(kiln_elem_type_t t);

/* Prepares emission of computation `c` partitioned as `p` into module `m` (whose affine
 * context is used for every map). Checks element types and layouts. */
kiln_status kiln_elemental_init(kiln_elemental_t *e, kiln_kir_module_t *m,
                                const kiln_hlo_computation_t *c, const kiln_partition_t *p);
void kiln_elemental_free(kiln_elemental_t *e);

/* The fusion instruction behind tensor argument i (a parameter or an array constant). */
const kiln_hlo_instruction_t *kiln_elemental_tensor_instr(const kiln_elemental_t *e, int i);

/* Declares one function per subgraph and emits all their bodies. */
kiln_status kiln_elemental_emit_functions(kiln_elemental_t *e);

/* Emits, at builder `b`'s insertion point, a call of subgraph `sg`'s function with the
 * given tensors (num_tensors values) and indices (the subgraph's rank). Returns the call op
 * (its results: every output of every root, in root order). */
kiln_kir_op_t *kiln_elemental_call(kiln_elemental_t *e, kiln_kir_builder_t *b, int sg,
                                   kiln_kir_value_t *const *tensors,
                                   kiln_kir_value_t *const *indices);

/* The kernel-IR tensor type of an HLO array shape: its dims in physical order (see
 * kiln_elemental_physical_order; the same for default layouts), and complex arrays become
 * real arrays (f32 for c64, f64 for c128) with a trailing dimension of 2 (re, im) — the
 * literal storage order. */
const kiln_kir_type_t *kiln_elemental_tensor_type(kiln_kir_module_t *m, const kiln_shape_t *s);

/* Index of the first result of root `instr` in subgraph `sg`'s results, or -1 (a complex
 * output takes two results: re, im). */
int kiln_elemental_root_result(const kiln_elemental_t *e, int sg,
                               const kiln_hlo_instruction_t *instr);

#endif /* KILN_COMPILER_CODEGEN_ELEMENTAL_H_ */
