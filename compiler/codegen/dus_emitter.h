/* In-place dynamic-update-slice emitter (XLA's in-place DUS fusion; DESIGN.md principle 1).
 *
 * Roots: dynamic-update-slices (each possibly through bitcasts / reshapes) and, in a
 * multi-output fusion, other roots that do not depend on a dynamic-update-slice. XLA's
 * in-place form launches one thread per UPDATE element and writes only the updated window
 * into the output buffer, which the caller guarantees aliases operand 0. kiln's runtime
 * does not alias them (output buffers are uninitialized, see the session brief), so the
 * fusion compiles to a CHAIN of two kernels sharing one argument list:
 *   1. copy: a grid over the largest output writes every output: a DUS root gets its
 *      operand 0 (elementally, so operand 0 may be computed inside the fusion), any other
 *      root its own value;
 *   2. update: a grid over the largest update; thread t of root i (t < its update size)
 *      computes the update element u, the clamped start (start_d = clamp(index_d, 0,
 *      operand_d - update_d), XLA's semantics) and writes output[start + u] (through the
 *      root's bitcast: same row-major linear position).
 * Where buffer assignment put output and operand 0 in one slice (the update in place), the
 * copy kernel would copy the buffer onto itself: when every root is a dynamic-update-slice of
 * a parameter it is marked an identity copy (fusion_kernel.h) and the thunk emitter leaves it
 * out. Complex elements (c64, c128) are written as their (re, im) parts, as every
 * kernel stores them. UNIMPLEMENTED (named): a DUS whose result feeds anything but bitcasts
 * to a root (e.g. an elementwise epilogue: XLA's loop emitter case). */
#ifndef KILN_COMPILER_CODEGEN_DUS_EMITTER_H_
#define KILN_COMPILER_CODEGEN_DUS_EMITTER_H_

#include "base/status.h"
#include "compiler/codegen/fusion_kernel.h"
#include "compiler/hlo/ir.h"

/* Emits the copy + update chain for `c`; *out as for kiln_codegen_kernel_emit (head: copy
 * kernel, next: "<kernel name>_update"). */
kiln_status kiln_dus_kernel_emit(const kiln_hlo_computation_t *c,
                                 const kiln_codegen_compile_options_t *opts,
                                 kiln_codegen_kernel_t *out);

#endif /* KILN_COMPILER_CODEGEN_DUS_EMITTER_H_ */
