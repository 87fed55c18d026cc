/* Transpose emitter (XLA's shared-memory transpose fusion; DESIGN.md principle 1).
 *
 * For a fusion that kiln_hero_analyze classifies as TRANSPOSE whose (normalized) transpose
 * moves the input's minor dimension: the two tiled dimensions are the input's minor
 * dimension `a` and the input dimension `b` that becomes the output's minor one; every other
 * dimension is a batch dimension. Blocks of 32 x 4 threads (128, four warps) each move one
 * 32 x 32 tile per batch index (grid x = batch * tiles_b * tiles_a):
 *   phase 1: thread (tx, ty) reads input (a = ta*32 + tx, b = tb*32 + 8ty + s), s = 0..7 —
 *            coalesced along the input's minor dimension — computing the hero's operand
 *            (fused producers, through their subgraph functions) and stores it into a
 *            32 x 33 shared tile [b offset][a offset] per hero; roots without a transpose
 *            hero (side outputs shaped like the input) are written here too;
 *   barrier;
 *   phase 2: thread (tx, ty) writes output (b = tb*32 + tx, a = ta*32 + 8ty + s) —
 *            coalesced along the output's minor dimension — reading tile[tx][8ty + s] and
 *            applying the fused consumers between the hero and the root (elementwise ops,
 *            bitcasts; their other operands read at the same index).
 * A transpose that keeps a small minor dimension (XLA's "102" form, elem bits * minor <= 64,
 * e.g. s8[160,170,3] -> s8[170,160,3]) tiles the two dimensions just above it instead; the
 * minor dimension rides along with every tile element as an innermost loop (a second loop
 * symbol), so the shared tile is 32 x 33 x minor and both phases move `minor` contiguous
 * elements per tile element.
 * Packed variant (XLA's packed transpose, elements under 32 bits): when every transpose hero
 * has the same 8- or 16-bit type, both tiled dimensions span at least one tile and the tiles
 * fit in 48 KiB, v = 32 / bits elements share a 32-bit word and the tile is 32v x 32v (64 x
 * 64 for bf16/f16/s16, 128 x 128 for s8/u8/pred), unpadded, its columns swizzled per band of
 * v rows (column (a + (b / v) v) mod 32v) so that both phases stay free of bank conflicts:
 *   phase 1: thread (tx, ty) at step (l, e) reads input (a = ta*32v + v tx + e,
 *            b = tb*32v + (32v/4) ty + l), each thread one word of a row;
 *   phase 2: at step (l, h, w) it takes tile[v tx + w][v (8 ty + l) + h] and writes output
 *            (b = tb*32v + v tx + w, a = ta*32v + v (8 ty + l) + h): a v x v block per step
 *            pair, v consecutive output elements (a word) per thread.
 * kiln_codegen_compile_options_t.host_target keeps the 32 x 33 tile on the host, where the
 * word-per-thread steps lower to strided thread loops (bf16[4096,4096]: ~0.25x of a C tile
 * loop packed, ~0.45x with the 32 x 33 tile; bench_heroes); packed_transpose forces either.
 * UNIMPLEMENTED: complex types, consumers other than elementwise ops and bitcasts. */
#ifndef KILN_COMPILER_CODEGEN_TRANSPOSE_EMITTER_H_
#define KILN_COMPILER_CODEGEN_TRANSPOSE_EMITTER_H_

#include "base/status.h"
#include "compiler/codegen/fusion_kernel.h"
#include "compiler/hlo/ir.h"

/* Emits the transpose kernel for `c` and runs the kernel-IR pipeline; *out as for
 * kiln_codegen_kernel_emit (grid.threads = 128). */
kiln_status kiln_transpose_kernel_emit(const kiln_hlo_computation_t *c,
                                       const kiln_codegen_compile_options_t *opts,
                                       kiln_codegen_kernel_t *out);

#endif /* KILN_COMPILER_CODEGEN_TRANSPOSE_EMITTER_H_ */
