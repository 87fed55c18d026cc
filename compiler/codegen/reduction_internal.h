/* Internal to the reduction emitter (reduction_emitter.c: state, shared steps, row and
 * column kernels; reduction_kinds.c: multi-row and small-column kernels, atomic writes and
 * the output-initializing kernel of split reductions). */
#ifndef KILN_COMPILER_CODEGEN_REDUCTION_INTERNAL_H_
#define KILN_COMPILER_CODEGEN_REDUCTION_INTERNAL_H_

#include "compiler/codegen/hero_analysis.h"
#include "compiler/codegen/hero_emit.h"
#include "compiler/codegen/hero_split.h"
#include "compiler/codegen/reduction_emitter.h"

#define KILN_RED_MAX_ACC 16
#define KILN_RED_MAX_LANES 8

typedef struct kiln_red_state {
  kiln_hero_analysis_t ha;
  kiln_reduction_plan_t plan;
  bool atomic_writes; /* outputs are combined with atomics (plan.splits > 1) */
  int nred;
  const kiln_hlo_instruction_t *reds[KILN_HERO_MAX_ROOTS];
  int nacc;                              /* accumulators over all reduces */
  int acc_red[KILN_RED_MAX_ACC];         /* reduce of accumulator */
  int acc_first[KILN_HERO_MAX_ROOTS];    /* first accumulator of reduce j */
  /* Reduce j adds complex values (one input, reducer add(p0, p1)): two accumulators of the
   * part type, (re, im), added apart (so shuffles, tiles and atomics stay scalar). */
  bool complex_add[KILN_HERO_MAX_ROOTS];
  /* When not NULL: the linear input index the accumulation loop gets is
   * lin_outer * lin_inner_extent + inner with 0 <= inner < lin_inner_extent wherever an
   * element is read (bounds constraints guard the rest). Input indices are then delinearized
   * from the two parts separately, so the minor part needs no division by a dimension that
   * the ranges of the thread and loop ids alone cannot prove away. */
  kiln_affine_expr_t *lin_outer;
  int64_t lin_inner_extent;
  /* Epilogues: instructions between a root and its reduce hero (both included). */
  int npath;
  const kiln_hlo_instruction_t *path[256];
  /* How the index of path[i] follows from its reduce's (KILN_HERO_BY_*, both, or neither). */
  unsigned char path_mode[256];
} kiln_red_state_t;

/* kiln_hero_emit_begin for the reduction kernels: they write every output through
 * kiln_hero_insert_output / physical indices, so outputs may have any layout. */
kiln_status kiln_red_emit_begin(kiln_hero_emit_t *h, const kiln_hlo_computation_t *c,
                                const kiln_codegen_compile_options_t *opts, kiln_red_state_t *rs,
                                const int64_t block[3], const int64_t grid[3],
                                kiln_codegen_kernel_t *out);
/* The input values of reduce j at its input's logical index `idx`: x[rs->acc_first[j] ..]. */
bool kiln_red_input_values(kiln_hero_emit_t *h, kiln_red_state_t *rs, int j, kiln_kir_value_t *const *idx,
                           kiln_kir_value_t **x);
/* Index of reduce hero x in rs->reds, or -1. */
int kiln_red_index(const kiln_red_state_t *rs, const kiln_hlo_instruction_t *x);
/* Partition roots: reduce inputs and epilogue operands head their own functions. */
bool kiln_red_is_root(void *user, const kiln_hlo_instruction_t *instr);
/* Logical indices of `s` for the physical linear index value `lin`. */
bool kiln_red_index_of(kiln_hero_emit_t *h, const kiln_shape_t *s, kiln_kir_value_t *lin, kiln_kir_value_t **idx);
/* Adds to `map` the logical indices, for the physical linear index `lin`, of every distinct
 * reduce input shape; off[j]: position of reduce j's indices among them. Returns how many.
 * With rs->lin_outer set, lin = lin_outer * lin_inner_extent + inner (see there). */
int kiln_red_add_input_indices(kiln_hero_emit_t *h, kiln_red_state_t *rs, kiln_indexing_map_t *map,
                               kiln_affine_expr_t *lin, int *off);
/* A root that is neither a reduce nor an epilogue (shaped like the input). */
bool kiln_red_is_side_output(const kiln_red_state_t *rs, const kiln_hlo_instruction_t *root);
/* a[k] = reducer(a[k], b[k]) for every accumulator. */
bool kiln_red_combine(kiln_hero_emit_t *h, kiln_red_state_t *rs, kiln_kir_value_t **a, kiln_kir_value_t *const *b);
/* Shuffle-down tree over offsets from, from / 2, ..., 1. */
void kiln_red_shuffle_tree(kiln_hero_emit_t *h, kiln_red_state_t *rs, kiln_kir_value_t **acc, int from);
/* Init values of every accumulator at the builder's position. */
bool kiln_red_init_values(kiln_hero_emit_t *h, kiln_red_state_t *rs, kiln_kir_value_t **init);
/* The accumulation loop over `map`'s domain (its results are added here: the input's
 * logical indices and the linear index `lin`); side outputs are written inside. */
kiln_kir_op_t *kiln_red_accumulate(kiln_hero_emit_t *h, kiln_red_state_t *rs, kiln_indexing_map_t *map,
                                   kiln_affine_expr_t *lin, kiln_kir_value_t *const *ids, int nids,
                                   kiln_kir_value_t **init);
/* Writes the final accumulators at kept physical index `kept` inside an if on `cond`
 * (atomically when rs->atomic_writes). */
void kiln_red_write_outputs(kiln_hero_emit_t *h, kiln_red_state_t *rs, kiln_kir_value_t *cond,
                            kiln_kir_value_t *kept, kiln_kir_value_t **acc);

/* Writes as kiln_red_write_outputs when `cond` holds and, if `bounded` is not NULL,
 * bounded < bound (checked inside the `cond` branch: a block-dependent bound). */
void kiln_red_write_guarded(kiln_hero_emit_t *h, kiln_red_state_t *rs, kiln_kir_value_t *cond,
                            kiln_kir_value_t *bounded, int64_t bound, kiln_kir_value_t *kept,
                            kiln_kir_value_t **acc);

/* ---- reduction_kinds.c ---- */

/* The accumulation loop for threads that keep `lanes` (<= KILN_RED_MAX_LANES) partial
 * results per reduced value: lane v accumulates the elements at physical linear index
 * lin + v * lane_stride. The map gets, per lane, the input's logical indices and the linear index.
 * acc_out[k * lanes + v]: accumulator k of lane v. Side outputs are written inside. */
bool kiln_red_accumulate_lanes(kiln_hero_emit_t *h, kiln_red_state_t *rs, kiln_indexing_map_t *map,
                               kiln_affine_expr_t *lin, int lanes, int64_t lane_stride,
                               kiln_kir_value_t *const *ids, int nids, kiln_kir_value_t **init,
                               kiln_kir_value_t **acc_out);

/* Combines `v` into out[idx] with an atomic (add/min/max read-modify-write when the reducer
 * is recognized and the type allows, else a compare-and-swap loop around the reducer).
 * Returns the tensor. */
kiln_kir_value_t *kiln_red_atomic_combine(kiln_hero_emit_t *h, kiln_red_state_t *rs, int j,
                                          kiln_kir_value_t *v, kiln_kir_value_t *out,
                                          kiln_kir_value_t *const *idx, int n);
kiln_status kiln_red_emit_multirow(const kiln_hlo_computation_t *c,
                                   const kiln_codegen_compile_options_t *opts, kiln_red_state_t *rs,
                                   kiln_codegen_kernel_t *out);
kiln_status kiln_red_emit_small_column(const kiln_hlo_computation_t *c,
                                       const kiln_codegen_compile_options_t *opts,
                                       kiln_red_state_t *rs, kiln_codegen_kernel_t *out);
/* The kernel that writes every reduce output's init value (the head of a split reduction's
 * chain). */
kiln_status kiln_red_emit_init(const kiln_hlo_computation_t *c,
                               const kiln_codegen_compile_options_t *opts, kiln_red_state_t *rs,
                               kiln_codegen_kernel_t *out);

#endif /* KILN_COMPILER_CODEGEN_REDUCTION_INTERNAL_H_ */
