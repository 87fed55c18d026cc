/* Hero analysis and emitter choice (XLA:GPU's HloFusionAnalysis, in kiln terms).
 *
 * A fusion's roots are the operands of its root tuple (or the root itself). Each root's
 * hero is found by walking up from the root through "intermediate" instructions:
 * single-operand elementwise ops, bitcasts, reshapes and transposes that are bitcasts
 * (only size-1 dimensions move). If that walk stops at a reduce, the reduce is the hero.
 * Otherwise a second, wider search (elementwise ops of up to 3 operands are intermediate
 * too) looks for exactly one tiled-transpose candidate, then exactly one concatenate, from
 * which only intermediates are reachable downwards; failing both, the root is its own hero.
 *
 * Emitter choice, in order:
 *   1. reduction: some root has a real reduction hero (a reduce from or to contiguous
 *      dimensions that the reduction emitter does faster than the loop, see
 *      kiln_hero_reduction_dims) and every other root is either a compatible reduction
 *      hero (same [major, middle, minor] form) or has as many elements as the first hero's
 *      input;
 *   2. transpose: at least one hero is a tiled-transpose candidate, all such heroes have
 *      the same normalized dims and permutation, and every other root has as many elements
 *      as the transpose's input;
 *   3. several roots: in-place dynamic-update-slice when every root is one (see 8), input
 *      slices when every root is a unit-stride slice of one common input shape, else loop;
 *   4. scatter (root scatter), 5. sort (root sort, possibly through get-tuple-element),
 *   6. concatenate (hero concatenate with <= 4 operands),
 *   7. input slices (a single slice root: no), 8. in-place dynamic-update-slice: each root
 *      is a dynamic-update-slice (through bitcasts) whose operand 0 is a fusion parameter
 *      (through bitcasts) used only on that path;
 *   9. loop otherwise.
 * Physical (layout) order is used for reductions and transposes; shapes without a layout
 * have the default one. */
#ifndef KILN_COMPILER_CODEGEN_HERO_ANALYSIS_H_
#define KILN_COMPILER_CODEGEN_HERO_ANALYSIS_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "compiler/hlo/ir.h"

typedef enum kiln_hero_emitter {
  KILN_HERO_EMITTER_LOOP = 0,
  KILN_HERO_EMITTER_REDUCTION,
  KILN_HERO_EMITTER_TRANSPOSE,
  KILN_HERO_EMITTER_SCATTER,
  KILN_HERO_EMITTER_SORT,
  KILN_HERO_EMITTER_CONCATENATE,
  KILN_HERO_EMITTER_INPUT_SLICES,
  KILN_HERO_EMITTER_DYNAMIC_UPDATE_SLICE,
} kiln_hero_emitter_t;

/* "loop", "reduction", "transpose", "scatter", "sort", "concatenate", "input_slices",
 * "dynamic_update_slice" (the corpus's file-name spelling). */
const char *kiln_hero_emitter_name(kiln_hero_emitter_t e);

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

/* "reduce_row", "reduce_multirow", "reduce_column", "reduce_column_small" (the corpus's
 * file-name spelling). */
const char *kiln_reduction_kind_name(kiln_reduction_kind_t k);

/* Fills *out for a reduce whose kept or reduced dims are consecutive in physical order
 * (false otherwise, or when `r` is not a well-formed reduce). */
bool kiln_hero_reduction_dims(const kiln_hlo_instruction_t *r, kiln_reduction_dims_t *out);
/* Whether the reduction emitter takes `r` (contiguous dims and faster than elemental:
 * row: minor_red >= 32 or dividing 32; column: XLA's small-column rule). */
bool kiln_hero_is_reduction_hero(const kiln_hlo_instruction_t *r);

/* A transpose normalized to physical order: size-1 dims dropped and runs of input dims that
 * stay adjacent merged. out_dims[i] = in_dims[perm[i]]. */
typedef struct kiln_transpose_desc {
  int rank;
  int64_t in_dims[16];
  int64_t out_dims[16];
  int64_t perm[16];
} kiln_transpose_desc_t;

/* Normalizes a transpose (or layout-changing copy); false when it is not one or is a
 * bitcast (nothing moves). */
bool kiln_hero_transpose_normalize(const kiln_hlo_instruction_t *t, kiln_transpose_desc_t *out);
/* Whether `t` is a tiled-transpose candidate: the minor dimension moves with both minor
 * sizes >= 16 (or >= 8 with at least 8192 elements in the two; or, for elements under 32
 * bits, the narrower side holding >= 64 bits and the wider >= 16), or the minor dimension
 * stays and is narrow (<= 64 bits) while the next two trade places. */
bool kiln_hero_is_transpose_hero(const kiln_hlo_instruction_t *t, kiln_transpose_desc_t *out);

/* The hero of root `root` (see above). */
const kiln_hlo_instruction_t *kiln_hero_find(const kiln_hlo_instruction_t *root);

#define KILN_HERO_MAX_ROOTS 64

typedef struct kiln_hero_analysis {
  kiln_hero_emitter_t emitter;
  int num_roots;
  const kiln_hlo_instruction_t *roots[KILN_HERO_MAX_ROOTS];
  const kiln_hlo_instruction_t *heroes[KILN_HERO_MAX_ROOTS];
  const kiln_hlo_instruction_t *hero; /* the deciding hero (NULL for loop) */
  kiln_reduction_dims_t reduction;    /* REDUCTION */
  kiln_reduction_kind_t reduction_kind; /* REDUCTION: the plan's kind for the default device */
  kiln_transpose_desc_t transpose;    /* TRANSPOSE */
} kiln_hero_analysis_t;

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
  int64_t splits;      /* chunks of the reduced extent (1: race-free or no atomics) */
  int64_t split_size;  /* ROW: R2 elements per chunk; COLUMN/SMALL_COLUMN: R rows per chunk */
  int64_t r0_splits, r0_chunk; /* ROW: major reduced chunks */
} kiln_reduction_plan_t;

/* Plans REDUCTION fusion `c` (ha from kiln_hero_analyze) for a device with `core_count`
 * cores (<= 0: 132). INVALID_ARGUMENT when ha is not a reduction. */
kiln_status kiln_hero_reduction_plan(const kiln_hlo_computation_t *c, const kiln_hero_analysis_t *ha,
                                     int64_t core_count, kiln_reduction_plan_t *out);

/* Analyzes fusion computation `c`. INVALID_ARGUMENT for a computation without a root;
 * UNIMPLEMENTED for more than KILN_HERO_MAX_ROOTS roots. */
kiln_status kiln_hero_analyze(const kiln_hlo_computation_t *c, kiln_hero_analysis_t *out);

#endif /* KILN_COMPILER_CODEGEN_HERO_ANALYSIS_H_ */
