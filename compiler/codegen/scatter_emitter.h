/* Scatter emitter (XLA's scatter fusion; DESIGN.md principle 1: one kernel model, run by
 * both targets), and the "split" scaffolding shared with the dynamic-update-slice emitter.
 *
 * A scatter fusion's root is a scatter (N operands, one indices array, N updates; N > 1 is
 * a variadic scatter returning a tuple). Its operands, indices and updates may be computed
 * inside the fusion. Output buffers are not initialized by the runtime and need not alias
 * the operands, so the fusion compiles to a CHAIN of two kernels sharing one argument list
 * (fusion_compiler.h):
 *   1. init: a loop-emitter grid over the operand shape writes output_i = operand_i;
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
 *          with duplicate indices, which no single atomic covers: the update kernel runs
 *          as one thread visiting every update in order (correct, serial).
 *      A scatter whose combiner returns its first parameter (keep the old value) needs no
 *      update kernel: the chain is the init kernel alone.
 * UNIMPLEMENTED (named): a root that is not the scatter itself, complex elements.
 *
 * ---- split scaffolding ----
 * The elemental emitter cannot emit a scatter or a dynamic-update-slice, so these emitters
 * build a private copy of the fusion whose root tuple holds only the values a kernel reads
 * (the hero's operands and everything they depend on), partition and emit that, and create
 * the kernel with the ORIGINAL fusion's outputs. Afterwards the kernel's inputs are mapped
 * back to the original parameters / constants, so the kernel takes exactly the fusion's
 * arguments and the private copy is destroyed. */
#ifndef KILN_COMPILER_CODEGEN_SCATTER_EMITTER_H_
#define KILN_COMPILER_CODEGEN_SCATTER_EMITTER_H_

#include "base/hashmap.h"
#include "base/status.h"
#include "compiler/codegen/fusion_compiler.h"
#include "compiler/codegen/reduction_emitter.h"
#include "compiler/hlo/ir.h"

/* Emits the scatter chain for `c` (root: a scatter) and runs the kernel-IR pipeline on each
 * kernel; *out as for kiln_fusion_kernel_emit (the head is the init kernel, out->next the
 * update kernel; their names are the kernel name and "<kernel name>_update"). */
kiln_status kiln_scatter_kernel_emit(const kiln_hlo_computation_t *c,
                                     const kiln_fusion_compile_options_t *opts,
                                     kiln_fusion_kernel_t *out);

/* ---- split scaffolding (shared with dus_emitter.c) ---- */

typedef struct kiln_hero_split {
  kiln_hero_emit_t h;               /* h.b builds the kernel body; h.fn for scalar code */
  const kiln_hlo_computation_t *orig;
  kiln_hlo_module_t *mod;           /* the private copy (owned) */
  kiln_ptrmap_t clone_of;           /* original instruction -> its copy */
  int num_outputs;
  const kiln_shape_t **outputs;     /* the original fusion's output leaves (borrowed) */
} kiln_hero_split_t;

/* Starts a kernel for fusion `c` that reads the `nvals` instructions `vals` (instructions of
 * c, none of them depending on the hero) and writes c's outputs (flattened root shape).
 * `suffix` (may be NULL) is appended to the kernel name (chains need distinct names).
 * Launch: block / grid as for kiln_hero_emit_begin. On error everything is released. */
kiln_status kiln_hero_split_begin(kiln_hero_split_t *s, const kiln_hlo_computation_t *c,
                                  const kiln_hlo_instruction_t *const *vals, int nvals,
                                  const kiln_fusion_compile_options_t *opts, const char *suffix,
                                  const int64_t block[3], const int64_t grid[3],
                                  kiln_fusion_kernel_t *out);
/* Value of `instr` (one of the vals, or a parameter / constant of c) at logical index idx. */
kiln_kir_value_t *kiln_hero_split_value(kiln_hero_split_t *s, const kiln_hlo_instruction_t *instr,
                                        kiln_kir_value_t *const *idx);
/* Finishes like kiln_hero_emit_finish, then maps the kernel's inputs and outputs back to
 * the original fusion and destroys the private copy (in every case). */
kiln_status kiln_hero_split_finish(kiln_hero_split_t *s, kiln_status st,
                                   const kiln_fusion_compile_options_t *opts);

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
bool kiln_hero_reshape_index(kiln_hero_emit_t *h, const kiln_shape_t *from, kiln_kir_value_t *const *idx,
                             const kiln_shape_t *to, kiln_kir_value_t **out);
/* The launch dimensions of grid `g` (block, grid arrays for kiln_hero_emit_begin). */
void kiln_hero_grid_dims(const kiln_launch_grid_t *g, int64_t block[3], int64_t grid[3]);

/* Name of the kernel of `c` under `opts` (as kiln_hero_emit_begin names it) plus `suffix`. */
void kiln_hero_kernel_name(const kiln_hlo_computation_t *c, const kiln_fusion_compile_options_t *opts,
                           const char *suffix, char *buf, size_t n);

/* Creates kernel `name` in `m`: elem's tensors as inputs (named after their instructions),
 * then one written tensor per shape of `outputs` (named output, or output0, output1, ...),
 * launched with `block` x `grid`. NULL when the kernel IR rejects it. */
kiln_kir_func_t *kiln_hero_kernel_create(kiln_kir_module_t *m, const char *name, const kiln_elemental_t *elem,
                                         const kiln_shape_t *const *outputs, int nout, const int64_t block[3],
                                         const int64_t grid[3]);
/* For a hero emitter whose h->elem is ready: creates h->kernel (kiln_hero_kernel_create,
 * named h->name, in h->out->kir), records its launch in h->out->grid, binds h->tensors and
 * h->outs to its parameters and starts h->b and h->fn in its body. Releases nothing on error. */
kiln_status kiln_hero_emit_kernel(kiln_hero_emit_t *h, const kiln_shape_t *const *outputs, int nout,
                                  const int64_t block[3], const int64_t grid[3]);
/* With a dump folder (`dump_dir` non-empty): writes `<name>.40-hlo-fusion.txt`, the fusion
 * `c`, then, when `reads` is given, the computation holding the values the kernel reads. */
void kiln_hero_dump_fusion(const char *dump_dir, const char *name, const kiln_hlo_computation_t *c,
                           const kiln_hlo_computation_t *reads);
/* Runs the kernel-IR pipeline on `kir` with the fusion options' vectorize / unroll settings,
 * dumping as `name` into `dump_dir` (may be NULL); adds the time to *ms. */
kiln_status kiln_hero_run_pipeline(kiln_kir_module_t *kir, const char *dump_dir, const char *name,
                                   const kiln_fusion_compile_options_t *opts, double *ms);

#endif /* KILN_COMPILER_CODEGEN_SCATTER_EMITTER_H_ */
