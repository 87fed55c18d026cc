/* Gemm epilogue fusion (XLA's GemmRewriter epilogues): what a gemm-form dot's only user
 * chain does to its result elementwise is folded into the gemm, which applies it to each
 * element before storing it:
 *
 *   out = act(alpha * dot(a, b) + C + broadcast(bias))
 *
 * matched bottom-up from the dot, in this order, each step optional, each value in the
 * chain read by the next step alone (the dot has one user, and so does every step but the
 * last):
 *   - alpha: multiply(x, broadcast(c)) with c a scalar constant (either operand order);
 *   - C (beta = 1): add(x, y) with y a full array of x's shape that is not a broadcast;
 *   - bias: add(x, broadcast(v)) with v a vector of the result's last dimension, which must
 *     be the gemm's n (v is then added to every row: the broadcast's dimensions are
 *     {rank - 1}); C and bias in either order, at most one of each;
 *   - activation: ReLU maximum(x, broadcast(0)) (either order), or GELU in the tanh form
 *     JAX's jax.nn.gelu(approximate=True) emits,
 *       x * (0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))))   with x^3 = x * (x * x)
 *     (every multiply and add in either operand order; also (0.5 * x) * (1 + tanh(...))),
 *     its constants within 1e-2 (bf16/f16) or 1e-5 (f32/f64) relative, every intermediate
 *     read only inside the pattern.
 * Every step has the dot's shape and element type, a real float type (f32, f64, bf16, f16);
 * the dot must be a gemm the target takes (kiln_fusion_wrapper_is_gemm_for).
 *
 * The pass (gemm_epilogue_fusion, after dot canonicalization) replaces the dot and the matched
 * chain by one fusion of kind kCustom (which no fusion pass grows) with backend_config
 * {"kiln_gemm_epilogue":...} naming what it holds; its operands are a, b and, when present,
 * C and the bias vector. The thunk emitter recognizes such a fusion by matching its fused
 * root again (kiln_gemm_epilogue_match_fusion) and emits one gemm thunk. It does nothing
 * with no gemm library, or on CUDA without cuBLASLt (classic cuBLAS has no epilogues). */
#ifndef KILN_PASSES_GEMM_EPILOGUE_H_
#define KILN_PASSES_GEMM_EPILOGUE_H_

#include <stdbool.h>

#include "compiler/hlo/ir.h"
#include "compiler/passes/fusion_wrapper.h"
#include "compiler/passes/pass.h"

typedef enum kiln_gemm_act {
  KILN_GEMM_ACT_NONE = 0,
  KILN_GEMM_ACT_RELU,
  KILN_GEMM_ACT_GELU_TANH,
} kiln_gemm_act_t;

#define KILN_GEMM_EPILOGUE_MAX_MEMBERS 24

typedef struct kiln_gemm_epilogue_match {
  kiln_hlo_instruction_t *dot;
  kiln_hlo_instruction_t *root; /* the chain's last instruction (the dot when nothing matched) */
  kiln_gemm_form_t form;
  double alpha;                   /* 1 without a scale */
  kiln_hlo_instruction_t *addend; /* C (beta = 1), or NULL */
  kiln_hlo_instruction_t *bias;   /* the bias vector (not its broadcast), or NULL */
  kiln_gemm_act_t act;
  /* The dot and every instruction of the chain (broadcasts of constants included). */
  int num_members;
  kiln_hlo_instruction_t *members[KILN_GEMM_EPILOGUE_MAX_MEMBERS];
} kiln_gemm_epilogue_match_t;

/* Matches the longest epilogue chain above `dot` (see above). False when `dot` is not a gemm
 * of `types` or not of a real float type; true otherwise, `out->root == dot` when nothing
 * follows it that can fuse. */
bool kiln_gemm_epilogue_match(kiln_hlo_instruction_t *dot, kiln_gemm_types_t types,
                              kiln_gemm_epilogue_match_t *out);

/* Whether `fusion` is a gemm-epilogue fusion the pass made: kind kCustom, the
 * backend_config marker, and its fused root a chain matched from its dot that ends at the
 * root; fills `out` (members inside the fused computation; addend and bias are its
 * parameters). */
bool kiln_gemm_epilogue_match_fusion(const kiln_hlo_instruction_t *fusion, kiln_gemm_types_t types,
                                     kiln_gemm_epilogue_match_t *out);

/* "bias+relu", "alpha+C+gelu_tanh", ...; "" when nothing is fused. Static storage per call
 * site is not used: writes into `buf`. */
const char *kiln_gemm_epilogue_describe(const kiln_gemm_epilogue_match_t *e, char *buf, size_t n);

#endif /* KILN_PASSES_GEMM_EPILOGUE_H_ */
