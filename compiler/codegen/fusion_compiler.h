/* Fusion dispatcher: one fusion computation -> the emitter its hero picks (through a table
 * indexed by kiln_fusion_emitter_t) -> a kernel after the kernel-IR pipeline, for NVPTX PTX /
 * cubin or host machine code; and the fusion runner used by tests and tools: compile one
 * fusion, run it on the host on generated inputs, compare with the reference evaluator.
 *
 * Layers (each uses only those before it; tests/check_codegen_layers.py checks the include
 * and call graphs): fusion_kernel (options, kernel object, names, dumps, pipeline options)
 * <- hero_emit (kernel begin / value / finish, grid helpers) <- hero_split (kernels reading
 * a private copy of the fusion: scatter, dynamic-update-slice chains) <- the emitters (loop,
 * reduction, transpose, concatenate, input slices, scatter, dynamic-update-slice, sort;
 * none uses another) <- this dispatcher.
 *
 * Emitter choice ("kind", kiln_fusion_classify), in this order: any scatter, sort or
 * dynamic-update-slice picks that emitter; a reduce hero (kiln_hero_is_reduction_hero:
 * reduced or kept dimensions contiguous, and XLA's "unnested reduction is faster than
 * elemental" rule, kiln_reduction_faster_than_elemental) picks the reduction emitter; a
 * transpose that moves the minor dimension with both minor sizes >= 16 and >= 8192 elements
 * picks the transpose emitter; a concatenate or input-slices fusion as kiln_hero_analyze
 * decides picks that emitter; anything else is loop kind. kiln_fusion_kernel_emit then lets
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
/* For the fusion runner's declarations below (kiln_host_jit_t, kiln_host_pool_t). */
#include "compiler/backend/host_jit.h"
#include "compiler/backend/nvptx.h"
#include "compiler/codegen/host_launch.h"
#include "compiler/codegen/kir_pipeline.h"

typedef enum kiln_fusion_emitter {
  KILN_FUSION_EMITTER_LOOP = 0,
  KILN_FUSION_EMITTER_REDUCTION,
  KILN_FUSION_EMITTER_TRANSPOSE,
  KILN_FUSION_EMITTER_CONCATENATE,
  KILN_FUSION_EMITTER_SCATTER,
  KILN_FUSION_EMITTER_DYNAMIC_UPDATE_SLICE,
  KILN_FUSION_EMITTER_SORT,
  KILN_FUSION_EMITTER_INPUT_SLICES, /* several unit-stride slice roots of one input shape */
} kiln_fusion_emitter_t;

const char *kiln_fusion_emitter_name(kiln_fusion_emitter_t e);

/* The emitter XLA would pick for computation `c`; *hero (may be NULL) gets the hero. */
kiln_fusion_emitter_t kiln_fusion_classify(const kiln_hlo_computation_t *c,
                                           const kiln_hlo_instruction_t **hero);

/* The emitter kiln_fusion_kernel_emit uses for `c`: kiln_fusion_classify's kind, except that a
 * fusion classified by its hero (reduction, transpose, concatenate, input slices) gets what
 * the hero analysis picks for the fusion as a whole. Fusions XLA already formed (its
 * after-optimizations modules: non-default layouts, a transpose under a concatenate or
 * slices, roots that do not fit the hero's emitter) may need another emitter than their
 * hero suggests, e.g. the loop emitter for a reduction whose roots are not compatible, as in
 * XLA. An error when the hero analysis fails. */
kiln_status kiln_fusion_choose_emitter(const kiln_hlo_computation_t *c, kiln_fusion_emitter_t *kind);

/* Reads the environment into a copy of `opts` (kiln_fusion_compile_options_from_env),
 * emits the kernel for `c` with the emitter chosen as above and runs the kernel-IR pipeline
 * (dumped with KILN_DUMP_TO: the HLO of the fusion as `<name>.40-hlo-fusion.txt`, the
 * partition as `<name>.41-partition.txt`, then the pipeline's 5x-kir-* stages); checks every
 * launch of the chain against the device's limits. */
kiln_status kiln_fusion_kernel_emit(const kiln_hlo_computation_t *c,
                                    const kiln_fusion_compile_options_t *opts,
                                    kiln_fusion_kernel_t *out);

/* ---- fusion runner ---- */

typedef struct kiln_fusion_run_options {
  uint64_t seed;             /* input generation (splitmix64 per input) */
  double float_lo, float_hi; /* floats uniform in [lo, hi); both 0: [-1, 1) */
  int64_t max_ulp;           /* < 0: per-type default (see kiln_fusion_default_ulp) */
  bool check_ptx;            /* also run ptxas on the kernel's PTX */
  int64_t max_bytes;         /* inputs/outputs larger than this are not run (RESOURCE_EXHAUSTED
                                after compiling); 0: 2 GiB */
  kiln_host_jit_t *jit;      /* NULL: a JIT of the runner's own */
  kiln_host_pool_t *pool;    /* NULL: run on the calling thread */
  kiln_fusion_compile_options_t compile;
  /* Evaluated instead of the fusion itself when set: a computation with the same parameters
   * and result shape giving the semantics to check against (e.g. the f32-inside form of a
   * bf16 fusion, for excess precision). NULL: the fusion. */
  const kiln_hlo_computation_t *reference;
} kiln_fusion_run_options_t;

/* Defaults; compile.strict_precision is set, so that bf16 results match the evaluator's
 * per-op rounding within the default tolerance (clear it to check excess precision). */
void kiln_fusion_run_options_init(kiln_fusion_run_options_t *o);

/* Default tolerance in units in the last place of the output type: 0 (exact) for integers
 * and pred, 1 for f16, bf16, f8 and f4 types (one rounding of the narrow type), 4 for f32,
 * 8 for f64 (math through formulas of several correctly-rounded-ish ops). Complex outputs
 * use their part type's tolerance, in ulps of the element's larger part. */
int64_t kiln_fusion_default_ulp(kiln_elem_type_t t);

typedef struct kiln_fusion_run_report {
  kiln_fusion_emitter_t emitter;
  kiln_launch_grid_t grid;
  int num_outputs;
  int64_t elements;     /* output elements compared */
  int64_t mismatches;   /* elements beyond the tolerance */
  int64_t max_ulp;      /* largest distance seen (floats; integers: 0 or 1 for "differs") */
  int64_t tolerance;    /* the tolerance used for the first output */
  double max_abs_err, max_rel_err;
  char first_mismatch[256];
  double emit_ms, pipeline_ms, host_compile_ms, run_ms, eval_ms;
  bool ptx_checked, ptx_ok;
  char ptx_note[256];
} kiln_fusion_run_report_t;

/* Compiles `c` for the host, runs it on generated inputs, evaluates `c` on the same inputs
 * and compares. Returns an error status when compiling, running or evaluating failed; a
 * numerical mismatch is not an error (see report->mismatches). */
kiln_status kiln_fusion_run_check(const kiln_hlo_computation_t *c,
                                  const kiln_fusion_run_options_t *opts,
                                  kiln_fusion_run_report_t *report);

/* The fusion computations to run from a module: for bare computations (parsed by
 * kiln_hlo_parse_computations) the entry unless it calls fusions; otherwise the
 * computations called by every fusion instruction of the entry (each once). *out is a
 * kiln_malloc'ed array. */
void kiln_fusion_collect(const kiln_hlo_module_t *m, const kiln_hlo_computation_t ***out, int *n);

#endif /* KILN_COMPILER_CODEGEN_FUSION_COMPILER_H_ */
