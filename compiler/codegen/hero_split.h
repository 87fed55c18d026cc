/* Split scaffolding: work split over several kernels or blocks. Chains of kernels reading a
 * private copy of the fusion (scatter and dynamic-update-slice: an init / copy kernel, then
 * the update kernel), and the atomic combines through which several blocks or threads
 * write one output element (split reductions, scatter).
 *
 * The elemental emitter cannot emit a scatter or a dynamic-update-slice, so these emitters
 * build a private copy of the fusion whose root tuple holds only the values a kernel reads
 * (the hero's operands and everything they depend on), partition and emit that, and create
 * the kernel with the ORIGINAL fusion's outputs. Afterwards the kernel's inputs are mapped
 * back to the original parameters / constants, so the kernel takes exactly the fusion's
 * arguments and the private copy is destroyed. Every kernel of such a chain (init /
 * copy kernel, then the update kernel) is built this way, so all take the same arguments.
 *
 * Layering: uses hero_emit and fusion_kernel; used by emitters only. */
#ifndef KILN_COMPILER_CODEGEN_HERO_SPLIT_H_
#define KILN_COMPILER_CODEGEN_HERO_SPLIT_H_

#include "base/hashmap.h"
#include "base/status.h"
#include "compiler/codegen/hero_emit.h"
#include "compiler/hlo/ir.h"

typedef struct kiln_hero_split {
  kiln_hero_emit_t h; /* h.b builds the kernel body; h.fn for scalar code */
  const kiln_hlo_computation_t *orig;
  kiln_hlo_module_t *mod; /* the private copy (owned) */
  kiln_ptrmap_t clone_of; /* original instruction -> its copy */
  int num_outputs;
  const kiln_shape_t **outputs; /* the original fusion's output leaves (borrowed) */
} kiln_hero_split_t;

/* Starts a kernel for fusion `c` that reads the `nvals` instructions `vals` (instructions of
 * c, none of them depending on the hero) and writes c's outputs (flattened root shape).
 * Tensors of any (untiled) layout are read at their physical index; the caller writes each
 * output at its physical index (kiln_hero_insert_output or kiln_elemental_physical_index).
 * `suffix` (may be NULL) is appended to the kernel name (chains need distinct names).
 * Launch: block / grid as for kiln_hero_emit_begin. On error everything is released. */
kiln_status kiln_hero_split_begin(kiln_hero_split_t *s, const kiln_hlo_computation_t *c,
                                  const kiln_hlo_instruction_t *const *vals, int nvals,
                                  const kiln_codegen_compile_options_t *opts, const char *suffix,
                                  const int64_t block[3], const int64_t grid[3],
                                  kiln_codegen_kernel_t *out);
/* Value of `instr` (one of the vals, or a parameter / constant of c) at logical index idx. */
kiln_kir_value_t *kiln_hero_split_value(kiln_hero_split_t *s, const kiln_hlo_instruction_t *instr,
                                        kiln_kir_value_t *const *idx);
/* Finishes like kiln_hero_emit_finish, then maps the kernel's inputs and outputs back to
 * the original fusion and destroys the private copy (in every case). */
kiln_status kiln_hero_split_finish(kiln_hero_split_t *s, kiln_status st,
                                   const kiln_codegen_compile_options_t *opts);

/* ---- atomics: combining into an output element several blocks or threads write ---- */

/* The combiner's root as add / min / max of its two distinct parameters
 * (KILN_KIR_ATOMIC_ADD / MIN / MAX), else -1. */
int kiln_hero_atomic_kind(const kiln_hlo_computation_t *comb);
/* out[idx] = comb(out[idx], v) in a compare-and-swap loop (the combiner emitted inline on
 * scalars, at h->b). Returns the tensor, or NULL with the error recorded. */
kiln_kir_value_t *kiln_hero_atomic_cas_combine(kiln_hero_emit_t *h,
                                               const kiln_hlo_computation_t *comb,
                                               kiln_kir_value_t *v, kiln_kir_value_t *out,
                                               kiln_kir_value_t *const *idx, size_t n);

#endif /* KILN_COMPILER_CODEGEN_HERO_SPLIT_H_ */
