/* Input-slices emitter (XLA's input slices fusion; DESIGN.md principle 1).
 *
 * For a multi-output fusion whose roots are all unit-stride slices of operands of one
 * common shape, or values of that shape (a whole window: a full slice the simplifier
 * removed; kiln_hero_analyze: INPUT_SLICES), one launch covers the INPUT shape (up to
 * 128 threads per block, one element per thread). Thread t computes input element t and,
 * for each slice root whose window contains it, computes that root's operand there (a
 * subgraph function of its own) and writes it to the root's output at t - start: one
 * guarded write per slice. Roots may have different element counts, which the loop
 * emitter cannot take. UNIMPLEMENTED (named): complex elements. */
#ifndef KILN_COMPILER_CODEGEN_INPUT_SLICES_EMITTER_H_
#define KILN_COMPILER_CODEGEN_INPUT_SLICES_EMITTER_H_

#include "base/status.h"
#include "compiler/codegen/fusion_kernel.h"
#include "compiler/hlo/ir.h"

/* Emits the input-slices kernel for `c`; *out as for kiln_codegen_kernel_emit.
 * INVALID_ARGUMENT when `c` is not an input-slices fusion. */
kiln_status kiln_input_slices_kernel_emit(const kiln_hlo_computation_t *c,
                                          const kiln_codegen_compile_options_t *opts,
                                          kiln_codegen_kernel_t *out);

#endif /* KILN_COMPILER_CODEGEN_INPUT_SLICES_EMITTER_H_ */
