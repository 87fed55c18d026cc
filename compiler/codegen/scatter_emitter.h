/* Scatter emitter (XLA's scatter fusion; DESIGN.md principle 1: one kernel model, run by
 * both targets).
 *
 * A scatter fusion's root is a scatter (N operands, one indices array, N updates; N > 1 is
 * a variadic scatter returning a tuple). Its operands, indices and updates may be computed
 * inside the fusion. Output buffers are not initialized by the runtime and need not alias
 * the operands, so the fusion compiles to a CHAIN of two kernels sharing one argument list
 * (fusion_compiler.h):
 *   1. init: a loop-emitter grid over the operand shape writes output_i = operand_i (an
 *      identity copy when the operands are parameters, fusion_kernel.h: left out where buffer
 *      assignment updates them in place);
 *   2. update: a grid over the update elements (one thread per element). Each thread reads
 *      its scatter index vector, places it in the operand's dims (scatter_dims_to_operand_dims,
 *      batching dims take the thread's batch coordinate), skips the element when its whole
 *      update window would not fit in the operand (XLA's semantics: the window is dropped, not
 *      clamped), and combines the update into the output with the scatter computation:
 *        - unique_indices: a plain read-combine-write;
 *        - otherwise, one operand: an atomic read-modify-write (kernel-IR atomic_rmw) for an
 *          add of 32/64-bit integers or floats and min/max of 32/64-bit integers; an
 *          overwrite combiner is a plain store (any writer may win, as in XLA); any other
 *          combiner on 16/32/64-bit elements runs inside a compare-and-swap loop;
 *        - indices_are_sorted (and not unique): each thread takes a run of consecutive
 *          scatter indices for one window element, combines updates that land on the same
 *          output element in registers (the scatter computation applied to the updates, as
 *          XLA does) and writes each run's result with one atomic as above;
 *        - elements narrower than 16 bits (pred, s8, u8, s4, f8 ...) and variadic scatters
 *          with duplicate indices, which no single atomic covers: the updates are applied
 *          in order (below);
 *        - on the host (host_target), and on a GPU with deterministic ops, every scatter whose
 *          indices may repeat and whose combiner's result depends on the order (float add,
 *          overwrite, another computation; not integer add/min/max or float min/max) applies
 *          its updates in order too, as XLA:CPU runs scatters: the same result every run.
 *      In order: where the update window spans whole operand dims (an embedding gradient's
 *      rows) or dims no index moves, a thread per coordinate of those dims walks every
 *      update in row-major order of the other update dims: no two threads write one
 *      element, and each element sees its updates in the one-thread order, so the bits are
 *      the same. Otherwise (a scatter of scalars, windows narrower than the operand in
 *      every indexed dim) one thread walks every update element.
 *      A scatter whose combiner returns its first parameter (keep the old value) needs no
 *      update kernel: the chain is the init kernel alone.
 * UNIMPLEMENTED (named): a root that is not the scatter itself, complex elements.
 * The kernels read the fusion through a private copy (hero_split.h). */
#ifndef KILN_COMPILER_CODEGEN_SCATTER_EMITTER_H_
#define KILN_COMPILER_CODEGEN_SCATTER_EMITTER_H_

#include "base/status.h"
#include "compiler/codegen/fusion_kernel.h"
#include "compiler/hlo/ir.h"

/* Emits the scatter chain for `c` (root: a scatter) and runs the kernel-IR pipeline on each
 * kernel; *out as for kiln_codegen_kernel_emit (the head is the init kernel, out->next the
 * update kernel; their names are the kernel name and "<kernel name>_update"). */
kiln_status kiln_scatter_kernel_emit(const kiln_hlo_computation_t *c,
                                     const kiln_codegen_compile_options_t *opts,
                                     kiln_codegen_kernel_t *out);

/* Tests and benchmarks: whether in-order scatters split over window coordinates (default on;
 * off gives the one-thread kernel, to compare). Thread-safe; kernels compiled while it changes
 * may take either form. */
void kiln_scatter_emitter_set_split(bool on);

#endif /* KILN_COMPILER_CODEGEN_SCATTER_EMITTER_H_ */
