/* Fusion wrapper (XLA:GPU's FusionWrapper): runs after the pipeline and wraps every
 * top-level instruction of every sequential computation (the entry and what while loops,
 * conditionals and calls run) that needs a kernel into a fusion of its own, so thunk
 * emission sees one fusion per kernel:
 *
 *   fused_<name> (p0: <shape>, p1: ...) -> <shape> { p0 = parameter(0) ... ROOT <name> = op(p0, p1,
 * ...) }
 *
 * Operand k becomes parameter k (a value read twice gets two parameters); the clone keeps
 * every attribute and shares called computations (comparators, reducers, scatter
 * combiners stay the module's own); the fusion (kind kLoop) takes the instruction's name,
 * shape, place in the instruction order and control edges.
 *
 * Not wrapped (no kernel of their own): parameter, constant, tuple, get-tuple-element,
 * bitcast, fusion, while, conditional, call, async ops, custom-call (and its async forms),
 * after-all, add-dependency, opt-barrier, domain, partition-id, replica-id, copy between
 * equal layouts (a memcpy), copy-start/copy-done, collectives (one participant: the
 * runtime copies), infeed/outfeed/send/recv, rng-get-and-update-state, and a dot the
 * runtime hands to BLAS (kiln_fusion_wrapper_is_gemm). */
#ifndef KILN_PASSES_FUSION_WRAPPER_H_
#define KILN_PASSES_FUSION_WRAPPER_H_

#include <stdbool.h>
#include <stdint.h>

#include "compiler/hlo/ir.h"
#include "compiler/passes/pass.h"

/* A dot as a row-major batched gemm: out[b] (m x n) = op(lhs[b]) (m x k) * op(rhs[b]) (k x n),
 * with op() transposing when the flag is set: lhs[b] is stored m x k (or k x m when
 * transpose_lhs), rhs[b] k x n (or n x k when transpose_rhs). Batches are `batch`
 * consecutive blocks of each operand and of the output. */
typedef struct kiln_gemm_form {
  int64_t batch, m, n, k;
  bool transpose_lhs, transpose_rhs;
  kiln_elem_type_t type;     /* of both operands */
  kiln_elem_type_t out_type; /* of the result */
} kiln_gemm_form_t;

/* Whether the runtime runs `dot` as a BLAS gemm (never with $KILN_GEMM_LIBRARY=none: then
 * every dot is an emitted kernel): one element type for both operands, and a result type
 * the host gemm takes with it (f32, f64, c64, c128 -> the same; bf16 -> bf16 or f32, f16 ->
 * f16 or f32, not one to the other: a dot rounds its operands to its result type first; s8,
 * s16, s32, u8, u16, u32 -> any of those; with KILN_GEMM_TYPES_CUBLAS f32 and f64 only, with
 * KILN_GEMM_TYPES_CUBLASLT those and bf16/f16 -> the same or f32); every shape in the default
 * layout (or none) and static; batch dimensions the leading dimensions of both operands, in order;
 * one contracting dimension per operand; each operand's non-contracting dimensions one run before
 * or after its contracting dimension (collapsed into m or n; none means 1). `form` (may be NULL) is
 * filled when true. */
typedef enum kiln_gemm_types {
  KILN_GEMM_TYPES_HOST = 0,     /* every combination the host gemm takes */
  KILN_GEMM_TYPES_CUBLAS = 1,   /* f32 and f64 (CUDA's classic cuBLAS) */
  KILN_GEMM_TYPES_CUBLASLT = 2, /* f32, f64, bf16/f16 -> the same or f32 (CUDA with cuBLASLt) */
} kiln_gemm_types_t;

/* Whether a gemm of `types` takes operands of type `in` with a result of type `out`. */
bool kiln_gemm_types_take(kiln_elem_type_t in, kiln_elem_type_t out, kiln_gemm_types_t types);

/* For a dot of operand types lt x rt -> out, contracting k elements, that no gemm of `types`
 * takes: the operand type *op both operands convert to and the result type *res of a gemm
 * giving the same result (then converted to out when *res differs), as XLA's
 * OperandUpcaster; false when there is none (or the types are taken as they are). Float
 * results, when both operand types are exact in `out` (a dot rounds its operands to its
 * result type first): `out` itself, else the first of bf16, f16, f32, f64 holding both
 * operand types exactly (pred as 0/1) and taken with `out`; integer results of integer operands:
 * the narrowest of s8, u8, s16, s32 holding both (sums modulo 2^w are the same at any width), a
 * 64-bit result through s32 (u32 for unsigned operands) when k * max|lt| * max|rt| fits it. */
bool kiln_gemm_upcast_types(kiln_elem_type_t lt, kiln_elem_type_t rt, kiln_elem_type_t out,
                            double k, kiln_gemm_types_t types, kiln_elem_type_t *op,
                            kiln_elem_type_t *res);

/* What the pass options say the target's gemm takes (gemm_f32_f64_only, gemm_cublaslt). */
kiln_gemm_types_t kiln_gemm_types_of(const kiln_pass_options_t *opts);

bool kiln_fusion_wrapper_is_gemm_for(const kiln_hlo_instruction_t *dot, kiln_gemm_types_t types,
                                     kiln_gemm_form_t *form);
/* kiln_fusion_wrapper_is_gemm_for without the f32/f64 restriction (what the host takes). */
bool kiln_fusion_wrapper_is_gemm(const kiln_hlo_instruction_t *dot, kiln_gemm_form_t *form);

/* Whether top-level instruction `in` needs a kernel of its own (what the pass wraps). */
bool kiln_fusion_wrapper_needs_kernel(const kiln_hlo_instruction_t *in,
                                      const kiln_pass_options_t *opts);

#endif /* KILN_PASSES_FUSION_WRAPPER_H_ */
