/* Fusion dispatcher: one fusion computation -> the emitter its hero picks (through a table
 * indexed by kiln_codegen_emitter_t) -> a kernel after the kernel-IR pipeline, for NVPTX PTX /
 * cubin or host machine code. (The fusion runner that tests and tools use to check a fusion against
 * the reference evaluator is tools/common/fusion_runner.h.)
 *
 * Layers (each uses only those before it; tests/check_codegen_layers.py checks the include
 * and call graphs): fusion_kernel (options, kernel object, names, dumps, pipeline options)
 * <- hero_emit (kernel begin / value / finish, grid helpers) <- hero_split (kernels reading
 * a private copy of the fusion: scatter, dynamic-update-slice chains) <- the emitters (loop,
 * reduction, transpose, concatenate, input slices, scatter, dynamic-update-slice, sort;
 * none uses another) <- this dispatcher.
 *
 * Emitter choice ("kind", kiln_codegen_classify), in this order: any scatter, sort or
 * dynamic-update-slice picks that emitter; a reduce hero (kiln_hero_is_reduction_hero:
 * reduced or kept dimensions contiguous, and XLA's "unnested reduction is faster than
 * elemental" rule, kiln_reduction_faster_than_elemental) picks the reduction emitter; a
 * transpose that moves the minor dimension with both minor sizes >= 16 and >= 8192 elements
 * picks the transpose emitter; a concatenate or input-slices fusion as kiln_hero_analyze
 * decides picks that emitter; anything else is loop kind. kiln_codegen_kernel_emit then lets
 * the hero analysis of the whole fusion decide for the hero kinds (reduction, transpose,
 * concatenate, input slices): XLA's already-optimized fusions are emitted with the emitter
 * it picks, the loop emitter included. */
#ifndef KILN_COMPILER_CODEGEN_FUSION_COMPILER_H_
#define KILN_COMPILER_CODEGEN_FUSION_COMPILER_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "compiler/analysis/launch_grid.h"
#include "compiler/codegen/fusion_kernel.h"
#include "compiler/hlo/ir.h"

typedef enum kiln_codegen_emitter {
  KILN_CODEGEN_EMITTER_LOOP = 0,
  KILN_CODEGEN_EMITTER_REDUCTION,
  KILN_CODEGEN_EMITTER_TRANSPOSE,
  KILN_CODEGEN_EMITTER_CONCATENATE,
  KILN_CODEGEN_EMITTER_SCATTER,
  KILN_CODEGEN_EMITTER_DYNAMIC_UPDATE_SLICE,
  KILN_CODEGEN_EMITTER_SORT,
  KILN_CODEGEN_EMITTER_INPUT_SLICES, /* several unit-stride slice roots of one input shape */
} kiln_codegen_emitter_t;

const char *kiln_codegen_emitter_name(kiln_codegen_emitter_t e);

/* The emitter XLA would pick for computation `c`; *hero (may be NULL) gets the hero. */
kiln_codegen_emitter_t kiln_codegen_classify(const kiln_hlo_computation_t *c,
                                             const kiln_hlo_instruction_t **hero);

/* The emitter kiln_codegen_kernel_emit uses for `c`: kiln_codegen_classify's kind, except that a
 * fusion classified by its hero (reduction, transpose, concatenate, input slices) gets what
 * the hero analysis picks for the fusion as a whole. Fusions XLA already formed (its
 * after-optimizations modules: non-default layouts, a transpose under a concatenate or
 * slices, roots that do not fit the hero's emitter) may need another emitter than their
 * hero suggests, e.g. the loop emitter for a reduction whose roots are not compatible, as in
 * XLA. An error when the hero analysis fails. */
kiln_status kiln_codegen_choose_emitter(const kiln_hlo_computation_t *c,
                                        kiln_codegen_emitter_t *kind);

/* Emits the kernel for `c` with the emitter chosen as above and runs the kernel-IR pipeline
 * (dumped to opts->dump_dir: the HLO of the fusion as `<name>.40-hlo-fusion.txt`, the
 * partition as `<name>.41-partition.txt`, then the pipeline's 5x-kir-* stages); checks every
 * launch of the chain against the device's limits. */
kiln_status kiln_codegen_kernel_emit(const kiln_hlo_computation_t *c,
                                     const kiln_codegen_compile_options_t *opts,
                                     kiln_codegen_kernel_t *out);

#endif /* KILN_COMPILER_CODEGEN_FUSION_COMPILER_H_ */
