/* Hero analysis and emitter choice (XLA:GPU's HloFusionAnalysis, in kiln terms).
 *
 * A fusion's roots are the operands of its root tuple (or the root itself). Each root's
 * hero is found by walking up from the root through "intermediate" instructions:
 * single-operand elementwise ops, bitcasts, reshapes and transposes that are bitcasts
 * (only size-1 dimensions move). If that walk stops at a reduce, or at an element of a
 * variadic one (argmax's index, session 31), the reduce is the hero.
 * Otherwise a second, wider search (elementwise ops of up to 3 operands are intermediate
 * too) looks for exactly one tiled-transpose candidate, then exactly one concatenate, from
 * which only intermediates are reachable downwards; failing both, the root is its own hero.
 *
 * Emitter choice, in order:
 *   1. reduction: some root has a real reduction hero (a reduce from or to contiguous
 *      dimensions that the reduction emitter does faster than the loop, see
 *      kiln_reduction_dims_of) and every other root is either a compatible reduction
 *      hero (same [major, middle, minor] form) or has as many elements as the first hero's
 *      input;
 *   2. transpose: at least one hero is a tiled-transpose candidate, all such heroes have
 *      the same normalized dims and permutation, every other root has as many elements
 *      as the transpose's input, and no root keeps a non-default layout;
 *   3. several roots: in-place dynamic-update-slice when every root is one (see 8), input
 *      slices when every root is a unit-stride slice of one common input shape or (not
 *      all) a value of that shape (the whole window), else loop;
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
#include "compiler/analysis/reduction_rule.h"
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

/* "reduce_row", "reduce_multirow", "reduce_column", "reduce_column_small" (the corpus's
 * file-name spelling). */
const char *kiln_reduction_kind_name(kiln_reduction_kind_t k);

/* Whether the reduction emitter takes `r` (contiguous dims and faster than elemental:
 * row: minor_red >= 32 or dividing 32; column: XLA's small-column rule; element types as
 * kiln_reduction_of_complex_ok says). */
bool kiln_hero_is_reduction_hero(const kiln_hlo_instruction_t *r);

/* How the index of a value between a reduce and a root (an epilogue) follows from the
 * reduce's output index: BY_LOGICAL, it is that index (same dims, reached through
 * elementwise ops); BY_PHYSICAL, it is the index of the same memory position as the reduce's
 * (first) output at that index (reached through bitcasts and ops that keep the layout). A
 * value with neither (a bitcast across layouts, then an op that changes the layout) is not
 * a reduction epilogue. */
#define KILN_HERO_BY_LOGICAL 1u
#define KILN_HERO_BY_PHYSICAL 2u
/* The mode of reduce r's output x (r itself or an element of it): both, or BY_LOGICAL for
 * an element laid out unlike the first. */
unsigned kiln_hero_reduce_output_mode(const kiln_hlo_instruction_t *x,
                                      const kiln_hlo_instruction_t *r);
/* The mode of x from its operand y's, `mode_y`: an elementwise op keeps y's logical index,
 * and the physical position when laid out like y; a bitcast keeps the physical position,
 * and the logical index when it changes nothing; a reshape keeps the logical index when it
 * changes no dims and the physical position between row-major layouts. */
unsigned kiln_hero_epilogue_step(const kiln_hlo_instruction_t *x, const kiln_hlo_instruction_t *y,
                                 unsigned mode_y);

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

/* Plans REDUCTION fusion `c` (ha from kiln_hero_analyze) for a device with `core_count`
 * cores (<= 0: 132). INVALID_ARGUMENT when ha is not a reduction. */
kiln_status kiln_hero_reduction_plan(const kiln_hlo_computation_t *c, const kiln_hero_analysis_t *ha,
                                     int64_t core_count, kiln_reduction_plan_t *out);
/* The same for the host (`core_count` workers, <= 0: 16): a row reduction keeps each row in
 * one block, however long, while the kept rows number at least 4 x core_count (no split with
 * atomics). */
kiln_status kiln_hero_reduction_plan_host(const kiln_hlo_computation_t *c,
                                          const kiln_hero_analysis_t *ha, int64_t core_count,
                                          kiln_reduction_plan_t *out);
/* Either of the two (host_target picks) without a split over blocks combined by atomics:
 * every output's whole reduced extent in one block, whatever its length (deterministic ops;
 * tree_reduction keeps top-level reduces within the bounds, so this matters only inside
 * fusions given in the input). */
kiln_status kiln_hero_reduction_plan_deterministic(const kiln_hlo_computation_t *c,
                                                   const kiln_hero_analysis_t *ha,
                                                   int64_t core_count, bool host_target,
                                                   kiln_reduction_plan_t *out);

/* Analyzes fusion computation `c`. INVALID_ARGUMENT for a computation without a root;
 * UNIMPLEMENTED for more than KILN_HERO_MAX_ROOTS roots. */
kiln_status kiln_hero_analyze(const kiln_hlo_computation_t *c, kiln_hero_analysis_t *out);

#endif /* KILN_COMPILER_CODEGEN_HERO_ANALYSIS_H_ */
