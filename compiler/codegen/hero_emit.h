/* Hero-emit scaffolding: what the hero emitters (reduction, transpose, concatenate, input
 * slices, scatter, dynamic-update-slice, sort) share to build a kernel for a fusion:
 * partition and emit the subgraph functions, create the kernel (inputs, then one written
 * tensor per output) with its launch, read values at an index, build grid loops and
 * indexing maps, then finish (verify, run the pipeline, fill the kernel object).
 *
 * Layering: uses fusion_kernel (options, kernel object, names, dumps, pipeline), the
 * partitioner and the elemental emitter; used by hero_split and the emitters, never the
 * other way round. Internal to codegen's emitters: it exposes the elemental emitter's
 * internals (kiln_elemental_fn_t), so public emitter headers do not include it. */
#ifndef KILN_COMPILER_CODEGEN_HERO_EMIT_H_
#define KILN_COMPILER_CODEGEN_HERO_EMIT_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "compiler/analysis/launch_grid.h"
#include "compiler/codegen/elemental.h"
#include "compiler/codegen/elemental_internal.h"
#include "compiler/codegen/fusion_kernel.h"
#include "compiler/codegen/partitioner.h"

typedef struct kiln_hero_emit {
  const kiln_hlo_computation_t *c;
  kiln_codegen_kernel_t *out;
  kiln_partition_t part;
  bool have_part, have_elem;
  kiln_elemental_t elem;
  kiln_kir_func_t *kernel;
  kiln_kir_value_t **tensors; /* the kernel's input tensor parameters (elem order) */
  kiln_kir_value_t **outs;    /* the kernel's output tensor parameters */
  kiln_kir_builder_t b;       /* at the kernel body */
  kiln_elemental_fn_t fn;     /* for scalar computations emitted into the kernel */
  char name[160];
  const char *dump_dir;
  double t0;
} kiln_hero_emit_t;

/* Partitions `c` (instructions selected by is_root head their own functions), emits the
 * subgraph functions, creates the kernel (inputs, then one written tensor per output) with
 * the given launch dimensions and starts a builder in its body. On error everything is
 * released. */
kiln_status kiln_hero_emit_begin(kiln_hero_emit_t *h, const kiln_hlo_computation_t *c,
                                 const kiln_codegen_compile_options_t *opts,
                                 kiln_partition_root_fn is_root, void *user, const int64_t block[3],
                                 const int64_t grid[3], kiln_codegen_kernel_t *out);
/* How kiln_hero_emit_start partitions and emits (NULL: the partitioner's and elemental
 * emitter's defaults). */
typedef struct kiln_hero_emit_setup {
  kiln_partition_root_fn is_root; /* instructions that head their own functions (may be NULL) */
  void *user;                     /* for is_root and caller_emits */
  bool physical_outputs;          /* see kiln_hero_emit_begin_ex */
  kiln_partition_root_fn caller_emits;
} kiln_hero_emit_setup_t;

/* The first half of every begin: names the kernel of fusion `c` (plus `suffix`), dumps `c`
 * (and `emit` when it is a private copy), creates the module, partitions `emit` (`c` or a
 * copy of it the kernel reads) and emits its subgraph functions. No kernel yet: create it
 * with kiln_hero_emit_kernel. On error everything is released. */
kiln_status kiln_hero_emit_start(kiln_hero_emit_t *h, const kiln_hlo_computation_t *c,
                                 const kiln_hlo_computation_t *emit,
                                 const kiln_codegen_compile_options_t *opts, const char *suffix,
                                 const kiln_hero_emit_setup_t *setup, kiln_codegen_kernel_t *out);
/* Releases the emission state and the kernel object after kiln_hero_emit_start. */
void kiln_hero_emit_abort(kiln_hero_emit_t *h);

/* kiln_hero_emit_begin with two more choices: with `physical_outputs` the caller writes
 * every output through kiln_elemental_physical_index (so outputs of any layout are
 * accepted); `caller_emits` (may be NULL) names instructions the kernel computes itself
 * (kiln_elemental_t.caller_emits, with `user`). */
kiln_status kiln_hero_emit_begin_ex(kiln_hero_emit_t *h, const kiln_hlo_computation_t *c,
                                    const kiln_codegen_compile_options_t *opts,
                                    kiln_partition_root_fn is_root, void *user,
                                    const int64_t block[3], const int64_t grid[3],
                                    bool physical_outputs, kiln_partition_root_fn caller_emits,
                                    kiln_codegen_kernel_t *out);
/* Fills out->inputs (elem's tensors) and out->outputs (part's output leaves). */
void kiln_hero_set_kernel_io(kiln_codegen_kernel_t *out, const kiln_elemental_t *elem,
                             const kiln_partition_t *part);
/* Value of (non-complex, single-output) `instr` at logical index `idx`, in the builder's
 * region: a tensor extract for parameters / array constants, a call of its subgraph
 * function otherwise, a constant for scalar constants. NULL (error recorded in h->fn) if
 * it has no function. */
kiln_kir_value_t *kiln_hero_emit_value(kiln_hero_emit_t *h, const kiln_hlo_instruction_t *instr,
                                       kiln_kir_value_t *const *idx);
/* Finishes the kernel (`st`: an error found while emitting, consumed), verifies it, runs
 * the pipeline and fills h->out; releases the emission state in every case. */
kiln_status kiln_hero_emit_finish(kiln_hero_emit_t *h, kiln_status st,
                                  const kiln_codegen_compile_options_t *opts);

/* Whether `s`'s layout is the default one (no layout, or minor_to_major descending): logical
 * order is memory order. */
bool kiln_hero_has_default_layout(const kiln_shape_t *s);

/* A map (dims named `dim_names`, bounds [0, dim_hi]) with `nsyms` symbols (bounds sym_hi)
 * built in the module's context and adopted by it. */
kiln_indexing_map_t *kiln_hero_map(kiln_kir_module_t *m, int ndims, const char *const *dim_names,
                                   const int64_t *dim_hi, int nsyms, const int64_t *sym_hi);

/* Logical indices of shape `s` for a physical (layout-order, row-major) linear index: writes
 * s->rank expressions. */
void kiln_hero_delinearize_physical(kiln_affine_ctx_t *ctx, const kiln_shape_t *s,
                                    kiln_affine_expr_t *linear, kiln_affine_expr_t **out);

/* A one-dimensional grid for n elements: up to 128 threads per block, one element per
 * thread, blocks = ceil(n / threads) on x. */
kiln_status kiln_hero_linear_grid(int64_t n, kiln_launch_grid_t *g);
/* A loop over every element of `shape` (at most g's threads * blocks elements; thread
 * t of block b takes the physical linear index b * threads + t, threads past the shape do
 * nothing) at h->b's insertion point, threading `inits` (output tensors) through it.
 * Returns the loop op (enter its region 0; indices are kiln_kir_loop_index(loop, 0..rank-1)),
 * or NULL with the error recorded. */
kiln_kir_op_t *kiln_hero_grid_loop(kiln_hero_emit_t *h, const kiln_launch_grid_t *g,
                                   const kiln_shape_t *shape, kiln_kir_value_t *const *inits,
                                   int ninits);
/* idx (logical indices of shape `from`) -> the indices of the same row-major linear
 * position in shape `to` (a bitcast / reshape between default layouts), emitted at h->b. */
bool kiln_hero_reshape_index(kiln_hero_emit_t *h, const kiln_shape_t *from,
                             kiln_kir_value_t *const *idx, const kiln_shape_t *to,
                             kiln_kir_value_t **out);
/* The same for the same memory position (a bitcast between any layouts): false for tiled
 * layouts. */
bool kiln_hero_bitcast_index(kiln_hero_emit_t *h, const kiln_shape_t *from,
                             kiln_kir_value_t *const *idx, const kiln_shape_t *to,
                             kiln_kir_value_t **out);
/* The launch dimensions of grid `g` (block, grid arrays for kiln_hero_emit_begin). */
void kiln_hero_grid_dims(const kiln_launch_grid_t *g, int64_t block[3], int64_t grid[3]);

/* Creates kernel `name` in `m`: elem's tensors as inputs (named after their instructions),
 * then one written tensor per shape of `outputs` (named output, or output0, output1, ...),
 * launched with `block` x `grid`. NULL when the kernel IR rejects it. */
kiln_kir_func_t *kiln_hero_kernel_create(kiln_kir_module_t *m, const char *name,
                                         const kiln_elemental_t *elem,
                                         const kiln_shape_t *const *outputs, int nout,
                                         const int64_t block[3], const int64_t grid[3]);
/* For a hero emitter whose h->elem is ready: creates h->kernel (kiln_hero_kernel_create,
 * named h->name, in h->out->kir), records its launch in h->out->grid, binds h->tensors and
 * h->outs to its parameters and starts h->b and h->fn in its body. Releases nothing on error. */
kiln_status kiln_hero_emit_kernel(kiln_hero_emit_t *h, const kiln_shape_t *const *outputs, int nout,
                                  const int64_t block[3], const int64_t grid[3]);
/* Inserts the element `v` (nv values: 2, (re, im), for complex shapes) into output tensor `t`
 * (of HLO shape `s`, stored in physical order, complex parts as a minor dimension of 2) at
 * logical index `idx` (s->rank values); returns the new tensor, NULL when a value is NULL. */
kiln_kir_value_t *kiln_hero_insert_output(kiln_hero_emit_t *h, kiln_kir_value_t *const *v, int nv,
                                          kiln_kir_value_t *t, const kiln_shape_t *s,
                                          kiln_kir_value_t *const *idx);
/* kiln_hero_emit_value that also takes complex arrays: writes (re, im) for them. Returns the
 * number of values (1 or 2), -1 on error (recorded in h->fn). */
int kiln_hero_emit_values(kiln_hero_emit_t *h, const kiln_hlo_instruction_t *instr,
                          kiln_kir_value_t *const *idx, kiln_kir_value_t **out);

#endif /* KILN_COMPILER_CODEGEN_HERO_EMIT_H_ */
