/* Reduction emitter (XLA's reduction fusion, DESIGN.md principle 1: one kernel, run by both
 * targets), and the scaffolding the hero emitters share.
 *
 * Supported fusions (kiln_hero_analyze chose REDUCTION): reduce heroes of one
 * [major, middle, minor] form over inputs of one shape; reduces may be variadic; the reduce
 * inputs may be any elementally emittable subgraph (partitioned into their own functions);
 * init values are scalar constants or scalar parameters (they must be the reducer's
 * identity: each thread starts from the init, as in XLA). Roots may be the reduces,
 * epilogues over them (elementwise ops, bitcasts, get-tuple-element; other operands read at
 * the output index), computed by the writing thread from the final values, and side
 * outputs shaped like the input (written while the input is read). UNIMPLEMENTED (named):
 * complex types, reduce inputs of different shapes, non-default output layouts.
 *
 * Row reduction [major_red R0, kept K, minor_red R2]: one block per kept element
 * (grid x = K), T threads (T = min(256, round_up(ceil(R2 / (4 vec)), 32)): about four
 * vector loads per thread before the tree; x only). Each thread
 * keeps partial results over (s, v): r2 = (s * T + th_x) * vec + v, for every r0 — loads of
 * vec contiguous elements; then a shuffle-down tree per warp (offsets 16..1); when T > 32,
 * lane 0 of each warp writes its partial to a shared tile of T/32 + 1 entries (one of
 * padding), a barrier, and the first warp's lanes read the tile (init past the warps) and
 * reduce it again with shuffles; thread 0 writes the outputs.
 *
 * Column reduction [major_kept M, red R, minor_kept N]: blocks of 32 x 32 threads, grid
 * (ceil(N / 32), M). Thread (tx, ty) accumulates column n = bx * 32 + tx over r = ty, ty +
 * 32, ...; the partials go into a 32 x 33 shared tile [ty][tx], a barrier, and each thread
 * reads the transposed element [tx][ty], so a warp (fixed ty) holds the 32 partials of
 * column bx * 32 + ty; a shuffle tree reduces them and lane 0 writes that column.
 *
 * The reducer computation is emitted inline on scalars (the elemental emitter's scalar
 * computation), for the per-thread accumulation and at every shuffle / tile step. */
#ifndef KILN_COMPILER_CODEGEN_REDUCTION_EMITTER_H_
#define KILN_COMPILER_CODEGEN_REDUCTION_EMITTER_H_

#include <stdbool.h>

#include "base/status.h"
#include "compiler/codegen/elemental.h"
#include "compiler/codegen/elemental_internal.h"
#include "compiler/codegen/fusion_compiler.h"
#include "compiler/codegen/hero_analysis.h"
#include "compiler/codegen/partitioner.h"

typedef struct kiln_reduction_options {
  int vector_size; /* row reductions: elements per load; 0: for <= 32-bit types 4 when R2 is
                      a multiple of 4, else 2 when even; else 1 */
  int max_threads; /* row reductions: threads per block (as many as the row needs, up to this);
                      0: the default rule above */
} kiln_reduction_options_t;

/* Emits the reduction kernel for `c` (analyzed as REDUCTION) and runs the kernel-IR
 * pipeline; fills *out like kiln_fusion_kernel_emit (grid: threads / blocks as launched,
 * for column reductions threads = 1024 as 32 x 32). `ropts` may be NULL. */
kiln_status kiln_reduction_kernel_emit(const kiln_hlo_computation_t *c,
                                       const kiln_fusion_compile_options_t *opts,
                                       const kiln_reduction_options_t *ropts,
                                       kiln_fusion_kernel_t *out);

/* ---- shared by the hero emitters (reduction_emitter.c) ---- */

typedef struct kiln_hero_emit {
  const kiln_hlo_computation_t *c;
  kiln_fusion_kernel_t *out;
  kiln_partition_t part;
  bool have_part, have_elem;
  kiln_elemental_t elem;
  kiln_kir_func_t *kernel;
  kiln_kir_value_t **tensors; /* the kernel's input tensor parameters (elem order) */
  kiln_kir_value_t **outs;    /* the kernel's output tensor parameters */
  kiln_kir_builder_t b;       /* at the kernel body */
  kiln_elem_fn_t fn;          /* for scalar computations emitted into the kernel */
  char name[160];
  const char *dump_dir;
  double t0;
} kiln_hero_emit_t;

/* Partitions `c` (instructions selected by is_root head their own functions), emits the
 * subgraph functions, creates the kernel (inputs, then one written tensor per output) with
 * the given launch dimensions and starts a builder in its body. On error everything is
 * released. */
kiln_status kiln_hero_emit_begin(kiln_hero_emit_t *h, const kiln_hlo_computation_t *c,
                                 const kiln_fusion_compile_options_t *opts,
                                 kiln_partition_root_fn is_root, void *user,
                                 const int64_t block[3], const int64_t grid[3],
                                 kiln_fusion_kernel_t *out);
/* Value of (non-complex, single-output) `instr` at logical index `idx`, in the builder's
 * region: a tensor extract for parameters / array constants, a call of its subgraph
 * function otherwise, a constant for scalar constants. NULL (error recorded in h->fn) if
 * it has no function. */
kiln_kir_value_t *kiln_hero_emit_value(kiln_hero_emit_t *h, const kiln_hlo_instruction_t *instr,
                                       kiln_kir_value_t *const *idx);
/* Finishes the kernel (`st`: an error found while emitting, consumed), verifies it, runs
 * the pipeline and fills h->out; releases the emission state in every case. */
kiln_status kiln_hero_emit_finish(kiln_hero_emit_t *h, kiln_status st,
                                  const kiln_fusion_compile_options_t *opts);

/* A map (dims named `dim_names`, bounds [0, dim_hi]) with `nsyms` symbols (bounds sym_hi)
 * built in the module's context and adopted by it. */
kiln_indexing_map_t *kiln_hero_map(kiln_kir_module_t *m, int ndims, const char *const *dim_names,
                                   const int64_t *dim_hi, int nsyms, const int64_t *sym_hi);

/* Logical indices of shape `s` for a physical (layout-order, row-major) linear index: writes
 * s->rank expressions. */
void kiln_hero_delinearize_physical(kiln_affine_ctx_t *ctx, const kiln_shape_t *s,
                                    kiln_affine_expr_t *linear, kiln_affine_expr_t **out);

#endif /* KILN_COMPILER_CODEGEN_REDUCTION_EMITTER_H_ */
