/* Concatenate emitter (XLA's concatenate fusion; DESIGN.md principle 1).
 *
 * For a fusion that kiln_hero_analyze classifies as CONCATENATE (one root whose hero is a
 * concatenate of at most 4 operands, or 64 when its result has 2^18 elements or more, reached
 * from the root through intermediates):
 * the grid covers the LARGEST operand (up to 128 threads per block, one element per
 * thread); the kernel holds one loop per operand, in which thread t takes element t of that
 * operand when t is inside its bounds (threads past a smaller operand do nothing), computes
 * the operand's value (its producers are a subgraph function of their own), places it at
 * the concatenated position (the operand's offset added along the concatenate dimension)
 * and applies the epilogue between the concatenate and the root there (elementwise ops,
 * bitcasts, reshapes, copies; their other operands read at that output position). So each
 * output element is written exactly once, by the thread that owns its source element,
 * with no per-element search over the operands as in the loop emitter's elemental form.
 * UNIMPLEMENTED (named): epilogue ops other than those, complex elements. */
#ifndef KILN_COMPILER_CODEGEN_CONCAT_EMITTER_H_
#define KILN_COMPILER_CODEGEN_CONCAT_EMITTER_H_

#include "base/status.h"
#include "compiler/codegen/fusion_kernel.h"
#include "compiler/hlo/ir.h"

/* Emits the concatenate kernel for `c` and runs the kernel-IR pipeline; *out as for
 * kiln_codegen_kernel_emit. INVALID_ARGUMENT when `c` is not a concatenate fusion. */
kiln_status kiln_concat_kernel_emit(const kiln_hlo_computation_t *c,
                                    const kiln_codegen_compile_options_t *opts,
                                    kiln_codegen_kernel_t *out);

#endif /* KILN_COMPILER_CODEGEN_CONCAT_EMITTER_H_ */
