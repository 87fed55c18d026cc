/* Reduction emitter (XLA's reduction fusion, DESIGN.md principle 1: one kernel, run by both
 * targets), and the scaffolding the hero emitters share.
 *
 * Supported fusions (kiln_hero_analyze chose REDUCTION): reduce heroes of one
 * [major, middle, minor] form (their inputs may have different shapes of that form: each is
 * indexed through its own physical delinearization); reduces may be variadic; the reduce
 * inputs may be any elementally emittable subgraph (partitioned into their own functions);
 * init values are scalar constants or scalar parameters (they must be the reducer's
 * identity: each thread starts from the init, as in XLA). Roots may be the reduces,
 * epilogues over them (elementwise ops, bitcasts, get-tuple-element; other operands read at
 * the output index), computed by the writing thread from the final values, and side
 * outputs shaped like the input (written while the input is read). Complex reduces with a
 * single input and an add reducer keep two accumulators, (re, im), added apart through the
 * shuffles and tiles; they are never split over blocks (no complex atomics). The reduces
 * and their epilogues get no subgraph function: the kernel computes them
 * (kiln_elemental_t.caller_emits). Other complex reducers and complex epilogues:
 * UNIMPLEMENTED (named). Inputs with non-default layouts are read at their physical index;
 * outputs of any layout are written at their physical index (epilogue values are computed
 * at the reduce's logical output index).
 *
 * The variant and its parameters come from kiln_hero_reduction_plan (XLA's rules, see
 * hero_analysis.h):
 *
 * ROW [major_red R0, kept K, minor_red R2] (reduction_emitter.c): block (tr x, tk y): tr
 * threads per row (a multiple of 32, up to 1024: about 32 elements per thread), tk rows per
 * block (while the block stays within 256 threads); grid (ceil(K / tk), splits). Thread
 * (tx, ty) keeps partials over (s0, s1, v): r0 = s0 (+ its major chunk), r2 = (s1 * tr + tx)
 * * vec + v (+ its split's offset) — loads of vec contiguous elements; a shuffle-down tree
 * per warp (16..1); when tr > 32, lane 0 of each warp writes tile[ty][warp] of a shared
 * [tk][tr / 32 + 1] tile (one entry of padding), a barrier, and each row's first warp reads
 * its row (init past the warps) and reduces again with shuffles; lane tx == 0 writes.
 *
 * MULTI_ROW (reduction_kinds.c): R2 = lanes * vec with lanes a power of two <= 32; one x
 * dimension of rows * lanes threads, thread t reading vec contiguous elements at t * vec of
 * the block's rows (for every r0); a shuffle tree over lanes / 2 .. 1, no shared memory; the
 * first lane of each row writes.
 *
 * COLUMN [major_kept M, red R, minor_kept N] (reduction_emitter.c): blocks of 32 x 32
 * threads, grid (ceil(N / 32), M * splits). Thread (tx, ty) accumulates column
 * n = bx * 32 + tx over r = ty, ty + 32, ... (of its split); the partials go into a 32 x 33
 * shared tile [ty][tx], a barrier, and each thread reads the transposed element [tx][ty], so
 * a warp (fixed ty) holds the 32 partials of column bx * 32 + ty; a shuffle tree reduces them
 * and lane 0 writes that column.
 *
 * SMALL_COLUMN (32 % N == 0, reduction_kinds.c): T threads with vec lanes walk the
 * flattened [R, N] of block m (grid (M, splits)); partials to a [shared_rows][N + 1] tile,
 * barrier, shared_rows consecutive threads hold one column, a shuffle tree over them.
 *
 * Split reductions (not race-free: row R2 > 16384 or R0 > 8, column R > 4096; single-value
 * reduces with 16/32/64-bit results): the fusion compiles to a chain: kernel 1 writes every
 * reduce output's init value, kernel 2 runs the variant above over chunks of the reduced
 * extent (one per block) and combines each block's result into the output atomically
 * (atomic add for add reducers, atomic min/max for integer min/max, otherwise a
 * compare-and-swap loop around the reducer). Other reductions that are not race-free keep the
 * whole reduced extent in one block (correct, slower).
 *
 * The reducer computation is emitted inline on scalars (the elemental emitter's scalar
 * computation), for the per-thread accumulation and at every shuffle / tile step. */
#ifndef KILN_COMPILER_CODEGEN_REDUCTION_EMITTER_H_
#define KILN_COMPILER_CODEGEN_REDUCTION_EMITTER_H_

#include <stdbool.h>

#include "base/status.h"
#include "compiler/codegen/fusion_kernel.h"
#include "compiler/hlo/ir.h"

typedef struct kiln_reduction_options {
  int vector_size; /* ROW: elements per load (1 when R2 is not a multiple); 0: the plan's */
  int max_threads; /* ROW: threads per row (as many as the row needs, up to this; one row
                      per block); 0: the plan's */
} kiln_reduction_options_t;

/* Emits the reduction kernel for `c` (analyzed as REDUCTION) and runs the kernel-IR
 * pipeline; fills *out like kiln_codegen_kernel_emit (grid: threads / blocks as launched,
 * threads counting every block dimension). A split reduction gives a chain of two kernels
 * (the initializer `<name>_init` first). opts->device->core_count feeds the multi-row vector
 * size (default 132). `ropts` may be NULL. */
kiln_status kiln_reduction_kernel_emit(const kiln_hlo_computation_t *c,
                                       const kiln_codegen_compile_options_t *opts,
                                       const kiln_reduction_options_t *ropts,
                                       kiln_codegen_kernel_t *out);

#endif /* KILN_COMPILER_CODEGEN_REDUCTION_EMITTER_H_ */
