/* The reduction emitter's rules, stated once for the fusion passes (which decide what to
 * fuse around a reduction and which reductions share a kernel) and the codegen (whose hero
 * analysis picks the emitter and whose reduction emitter allocates the tiles): XLA's rule
 * for when the reduction emitter beats the elemental loop
 * (IsUnnestedReductionFasterThanElemental), its race-free bounds, the plan (variant, block
 * shape, vector size, splits) and the block-shared memory the plan's tiles take.
 *
 * A reduce's input in physical order collapses to three dims: a row reduction
 * [major_red, kept, minor_red], a column reduction [major_kept, red, minor_kept]. */
#ifndef KILN_COMPILER_ANALYSIS_REDUCTION_RULE_H_
#define KILN_COMPILER_ANALYSIS_REDUCTION_RULE_H_

#include <stdbool.h>
#include <stdint.h>

#include "compiler/hlo/ir.h"

/* A reduce's input in physical order collapsed to three dims. Row: [major_red, kept,
 * minor_red]; column: [major_kept, red, minor_kept]. */
typedef struct kiln_reduction_dims {
  bool is_row;
  int64_t dims[3];
} kiln_reduction_dims_t;

/* The reduction emitter's variants (XLA's CreateReductionFusion): a row reduction whose
 * minor reduced size is a power of two that fits one warp's vector loads is MULTI_ROW
 * (several rows per warp, shuffles only); other rows ROW; a column reduction whose minor
 * kept size divides the warp size is SMALL_COLUMN, others COLUMN. */
typedef enum kiln_reduction_kind {
  KILN_REDUCTION_ROW = 0,
  KILN_REDUCTION_MULTI_ROW,
  KILN_REDUCTION_COLUMN,
  KILN_REDUCTION_SMALL_COLUMN,
} kiln_reduction_kind_t;

/* How the reduction emitter runs a REDUCTION fusion (XLA's ReductionFusion subclasses'
 * parameters, with kiln's split of reductions that are not race-free).
 *
 *   ROW [R0, K, R2]: block = threads_reduced (x, a multiple of 32, min(1024,
 *     round_up(ceil(R2 / 32), 32))) times threads_kept (y: more kept rows per block while the
 *     block stays within 256 threads); vector_size per XLA's GetVectorSizeForMlir (R2 even,
 *     2 * threads <= R2, no complex; 1 for 64-bit inputs, 2 for 32-bit, else 4 when
 *     4 * threads <= R2 and R2 % 4 == 0, else 2); minor_tile vectors per thread.
 *   MULTI_ROW: R2 a power of two <= 32 * vector_size; vector_size = min(R2, 64 / smallest
 *     input-or-output bits), at most 128 / largest bits when some are >= 32, halved while
 *     there are fewer blocks than cores; threads_reduced = R2 / vector_size lanes per row,
 *     threads_kept = rows per block (block <= 256 threads).
 *   COLUMN [M, R, N]: 32 x 32 threads, tiles of 32 * vector_size columns (the vector size
 *     rule over N with 32 threads).
 *   SMALL_COLUMN (32 % N == 0): threads_reduced threads (128, fewer when needed) walk the
 *     flattened [R, N] with vector_size (GetVectorSizeForMlir over R * N with 32 threads);
 *     shared_rows = vector_size * threads / N partials per column (<= 32) go through a
 *     shared tile [shared_rows][N + padding] and a shuffle over shared_rows lanes.
 *   splits > 1 (reductions that are not race-free: row R2 > 16384 or R0 > 8, column
 *     R > 4096): the reduced extent is cut into `splits` chunks of `split_size` (R2 units for
 *     rows, R for columns; row R0 in chunks of r0_chunk), one block each, combined into the
 *     output with atomics after an initializing kernel; only when every reduce is single-value
 *     with a 16/32/64-bit result (`atomic` true), else the whole extent stays in one block. */
typedef struct kiln_reduction_plan {
  kiln_reduction_kind_t kind;
  int vector_size;
  int64_t threads_kept, threads_reduced;
  int64_t minor_tile;  /* ROW: vector loads per thread along R2 (per split) */
  int64_t shared_rows; /* SMALL_COLUMN */
  bool race_free, atomic;
  int64_t splits;     /* chunks of the reduced extent (1: race-free or no atomics) */
  int64_t split_size; /* ROW: R2 elements per chunk; COLUMN/SMALL_COLUMN: R rows per chunk */
  int64_t r0_splits, r0_chunk; /* ROW: major reduced chunks */
} kiln_reduction_plan_t;

/* What the plan reads besides the dims: the smallest element bits of the fusion's inputs
 * (1 << 30 when it has none) and of its outputs (pred counts as 8 bits), whether any input, output
 * or reduced operand is complex, and whether every reduce is single-value with a 16/32/64-bit
 * non-complex result and is its own root (atomics can combine split partials). */
typedef struct kiln_reduction_facts {
  int input_bits_min;
  int output_bits_min;
  bool complex;
  bool atomic_ok;
} kiln_reduction_facts_t;

/* Fills *out for a reduce whose kept or reduced dims are consecutive in physical order
 * (false otherwise, or when `r` is not a well-formed reduce). */
bool kiln_reduction_dims_of(const kiln_hlo_instruction_t *r, kiln_reduction_dims_t *out);

/* XLA's race-free bounds: MinThreadsXRowReduction (1024) x 16 row elements, 8 major reduced
 * rows (the batched row bound), warp (32) x 128 column rows. */
#define KILN_REDUCTION_ROW_RACE_FREE_BOUND (1024 * 16)
#define KILN_REDUCTION_BATCH_RACE_FREE_BOUND 8
#define KILN_REDUCTION_COLUMN_RACE_FREE_BOUND (32 * 128)

/* XLA's race-free bounds (ReductionIsRaceFree): one block covers the whole reduced extent
 * when the row is at most 1024 x 16 elements and at most 8 major reduced rows, or the
 * column at most 32 x 128 rows. */
bool kiln_reduction_is_race_free(const kiln_reduction_dims_t *rd);

/* Plans a reduction of form `rd` on a device with `core_count` cores (<= 0: 132). */
void kiln_reduction_plan_make(const kiln_reduction_dims_t *rd, const kiln_reduction_facts_t *f,
                              int64_t core_count, kiln_reduction_plan_t *out);

/* The block-shared tile the plan's reduction emitter allocates per accumulator (one per
 * reduced value; two, real and imaginary, for a complex add), as [tdims[0]][tdims[1]]
 * elements of the accumulator's type: ROW with more than 32 threads per row
 * [threads_kept][threads_reduced / 32 + 1]; COLUMN [32][32 * vector_size + 1]; SMALL_COLUMN
 * [shared_rows][N + padding]. False (tdims zeroed) when the plan needs none (MULTI_ROW,
 * ROW within a warp). */
bool kiln_reduction_tile_dims(const kiln_reduction_plan_t *p, const kiln_reduction_dims_t *rd,
                              int64_t tdims[2]);

/* Bytes of block-shared memory one block of the plan takes when its accumulators total
 * `acc_bytes` bytes per element (e.g. 12 for three f32 reduces). */
int64_t kiln_reduction_shared_bytes(const kiln_reduction_plan_t *p, const kiln_reduction_dims_t *rd,
                                    int64_t acc_bytes);

/* Row: the minor reduced size is at least a warp (32) or divides it. Column: not one of the
 * small shapes where a loop wins (reduced < 32; < 64 with < 32 kept; < 128 with < 8 kept;
 * < 256 with < 3 kept). */
bool kiln_reduction_faster_than_elemental(bool is_row, const int64_t dims[3]);

/* Whether reduce `r` reduces complex values. */
bool kiln_reduction_reduces_complex(const kiln_hlo_instruction_t *r);
/* Whether the reduction emitter takes `r`'s element types: real reduces, and of complex values
 * a single-input add of the reducer's two parameters only (its accumulators keep (re, im)
 * apart); other complex reduces run on the loop emitter, which reduces (re, im) pairs. */
bool kiln_reduction_of_complex_ok(const kiln_hlo_instruction_t *r);

#endif /* KILN_COMPILER_ANALYSIS_REDUCTION_RULE_H_ */
