/* Internals of the StableHLO -> HLO converter (stablehlo_to_hlo*.c, chlo_decompose.c).
 *
 * The converter writes HLO text and parses it with kiln_hlo_parse_module, which infers
 * nothing the text does not say and verifies the result: every instruction is written with
 * its full shape (from the MLIR result type), so a conversion mistake shows up as a verifier
 * message naming the instruction. Every MLIR value maps to one HLO instruction name in the
 * computation being written (a scope); an op with several results writes a tuple and one
 * get-tuple-element per result. Regions become computations written into their own scope and
 * appended to the module text when finished (callees before callers). */
#ifndef KILN_COMPILER_FRONTEND_STABLEHLO_TO_HLO_INTERNAL_H_
#define KILN_COMPILER_FRONTEND_STABLEHLO_TO_HLO_INTERNAL_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/frontend/mlir_ir.h"
#include "compiler/frontend/stablehlo_to_hlo.h"

typedef struct shc_scope {
  kiln_strbuf_t body;             /* instruction lines */
  kiln_strbuf_t *out;             /* where shc_emit writes: &body, or a shared body */
  const kiln_mlir_value_t **keys; /* value map (open addressing) */
  const char **vals;
  size_t cap, n;
  struct shc_scope *parent;
} shc_scope_t;

#define SHC_MAX_DEPTH 200

typedef struct shc_ctx {
  const kiln_mlir_module_t *m;
  kiln_arena_t arena;
  kiln_strbuf_t comps; /* finished non-entry computations */
  int64_t next_id;
  shc_scope_t *cur;
  int depth; /* inlined calls + nested regions, bounded by SHC_MAX_DEPTH */
  /* interpreter.run_parallel: the participant being converted (replica_id / partition_id
   * become constants) */
  bool spmd;
  int64_t replica, partition;
  /* constants of the entry scope become parameters (check mode's params) */
  bool constants_as_params;
  shc_scope_t *entry_scope;
  int32_t first_param, num_params, cap_params;
  kiln_literal_t **params;
  /* check mode: values of check ops become outputs of the entry */
  bool check_mode;
  int32_t num_outputs, cap_outputs;
  const char **outputs;       /* HLO names */
  const char **output_shapes; /* their shape text */
  int32_t num_checks, cap_checks;
  kiln_stablehlo_check_t *checks;
} shc_ctx_t;

/* An error naming the op and where it is. */
kiln_status shc_op_error(const kiln_mlir_op_t *op, kiln_status_code_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define SHC_TRY(expr)            \
  do {                           \
    kiln_status shc__s = (expr); \
    if (shc__s) return shc__s;   \
  } while (0)
#define SHC_UNIMPL(op, ...) shc_op_error((op), KILN_UNIMPLEMENTED, __VA_ARGS__)
#define SHC_INVALID(op, ...) shc_op_error((op), KILN_INVALID_ARGUMENT, __VA_ARGS__)

/* The HLO shape text of an MLIR type ("f32[2,3]", "(s32[], f32[4])", "token[]"). */
kiln_status shc_type_text(shc_ctx_t *c, const kiln_mlir_type_t *t, const char **out);
/* The HLO element type name of a tensor's (or scalar) element type ("f32"). */
kiln_status shc_elem_text(const kiln_mlir_type_t *t, const char **out);
/* The element type of a tensor type (the type itself for a scalar). */
const kiln_mlir_type_t *shc_elem_type(const kiln_mlir_type_t *t);
bool shc_is_float(const kiln_mlir_type_t *elem);
bool shc_is_complex(const kiln_mlir_type_t *elem);
bool shc_is_unsigned(const kiln_mlir_type_t *elem);
bool shc_is_pred(const kiln_mlir_type_t *elem);

/* Writes `name = SHAPE <text>` into the current scope; returns the new name. */
const char *shc_emit(shc_ctx_t *c, const char *shape, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A fresh name with `prefix`. */
const char *shc_fresh(shc_ctx_t *c, const char *prefix);

void shc_bind(shc_ctx_t *c, const kiln_mlir_value_t *v, const char *name);
kiln_status shc_lookup(shc_ctx_t *c, const kiln_mlir_value_t *v, const char **out);
/* Binds op's results to the elements of tuple `t` (one get-tuple-element each). */
kiln_status shc_bind_tuple_results(shc_ctx_t *c, const kiln_mlir_op_t *op, const char *t);
/* "a, b, c": the HLO names of op's operands [from, to). */
kiln_status shc_operand_list(shc_ctx_t *c, const kiln_mlir_op_t *op, int32_t from, int32_t to,
                             const char **out);
/* The tuple shape of op's results. */
kiln_status shc_results_tuple_shape(shc_ctx_t *c, const kiln_mlir_op_t *op, const char **out);

/* Converts the ops of `block` into the current scope; stops at a terminator (func.return,
 * stablehlo.return) and stores its operands' names in *ret (arena array) and count. */
kiln_status shc_convert_block(shc_ctx_t *c, const kiln_mlir_block_t *block, const char ***ret,
                              int32_t *num_ret);
kiln_status shc_convert_op(shc_ctx_t *c, const kiln_mlir_op_t *op);

/* Converts a region whose block arguments are scalars (reduce, sort, scatter, ...) into a
 * computation of those parameters that returns its terminator's operands (a tuple when
 * several or `force_tuple`); *name is the computation's name. Captured constants are
 * re-materialized; other captured values are UNIMPLEMENTED. */
kiln_status shc_region_computation(shc_ctx_t *c, const kiln_mlir_op_t *op,
                                   const kiln_mlir_region_t *r, bool force_tuple,
                                   const char **name);

/* Op families (stablehlo_to_hlo_ops.c, stablehlo_to_hlo_ops2.c, chlo_decompose.c): each
 * returns true in *handled when it knows the op. */
kiln_status shc_convert_simple_op(shc_ctx_t *c, const kiln_mlir_op_t *op, bool *handled);
/* Quantized types (stablehlo_to_hlo_quant.c): uniform_quantize / uniform_dequantize, and any
 * op with a quantized operand or result (dequantize, the op, quantize). */
kiln_status shc_convert_quant_op(shc_ctx_t *c, const kiln_mlir_op_t *op, bool *handled);
bool shc_is_quant(const kiln_mlir_type_t *elem);
/* A quantized element type's storage type as an HLO element type name. */
kiln_status shc_quant_storage_text(const kiln_mlir_type_t *elem, const char **out);
kiln_status shc_convert_complex_op(shc_ctx_t *c, const kiln_mlir_op_t *op, bool *handled);
kiln_status shc_convert_chlo_op(shc_ctx_t *c, const kiln_mlir_op_t *op, bool *handled);
kiln_status shc_convert_run_parallel(shc_ctx_t *c, const kiln_mlir_op_t *op);
/* sdy.manual_computation (jax.shard_map under Shardy), stablehlo_to_hlo_ops2.c. */
kiln_status shc_convert_manual_computation(shc_ctx_t *c, const kiln_mlir_op_t *op);
void shc_scope_init(shc_scope_t *s, shc_scope_t *parent);
void shc_scope_free(shc_scope_t *s);
kiln_status shc_convert_control_op(shc_ctx_t *c, const kiln_mlir_op_t *op, bool *handled);

/* Attribute helpers: an integer list from a DENSE_ARRAY / ARRAY of integers /
 * DENSE_ELEMENTS attr (NULL attr: 0 elements). */
kiln_status shc_attr_ints(shc_ctx_t *c, const kiln_mlir_op_t *op, const kiln_mlir_attr_t *a,
                          const char *what, int64_t **out, int32_t *n);
/* "{1,2,3}" */
const char *shc_ints_text(shc_ctx_t *c, const int64_t *v, int32_t n);
/* An integer attribute (INTEGER or BOOL), or `dflt` when absent. */
int64_t shc_attr_int(const kiln_mlir_attr_t *a, int64_t dflt);
/* ENUM value text, or NULL. */
const char *shc_attr_enum(const kiln_mlir_attr_t *a);
/* The op's channel_handle's handle, 0 when it has none. */
int64_t shc_channel_id(const kiln_mlir_op_t *op);

/* Emits a scalar constant of element type `elem` with value v ("f32[] constant(1)"). */
kiln_status shc_scalar_const(shc_ctx_t *c, const kiln_mlir_type_t *elem, double v,
                             const char **out);
/* Broadcasts a scalar HLO value to `shape` (rank-0 shape: returned as is). */
const char *shc_broadcast_scalar(shc_ctx_t *c, const char *scalar, const char *shape, int32_t rank);
/* "pred[2,3]": the shape of a tensor type with pred elements. */
const char *shc_pred_shape_text(shc_ctx_t *c, const kiln_mlir_type_t *t);

#endif /* KILN_COMPILER_FRONTEND_STABLEHLO_TO_HLO_INTERNAL_H_ */
