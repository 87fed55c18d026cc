/* Fusion compiler: one fusion computation -> kernel IR (partitioner, elemental emitter,
 * loop emitter) -> the kernel-IR pipeline -> NVPTX PTX / cubin or host machine code; and the
 * fusion runner used by tests and tools: compile one fusion, run it on the host on generated
 * inputs, compare with the reference evaluator.
 *
 * Emitter choice ("kind", kiln_fusion_classify), in this order: any scatter, sort or
 * dynamic-update-slice picks that emitter; a reduce hero (reduced or kept dimensions
 * contiguous, and XLA's "unnested reduction is faster than elemental" rule: a row reduction
 * whose minor reduced size is >= 32 or divides 32, a column reduction that is not small)
 * picks the reduction emitter; a transpose that moves the minor dimension with both minor
 * sizes >= 16 and >= 8192 elements picks the transpose emitter; a concatenate or input-slices
 * fusion as kiln_hero_analyze decides picks that emitter; anything else is loop kind.
 *
 * Ownership: kiln_fusion_kernel_t owns its kernel-IR module and affine context. */
#ifndef KILN_COMPILER_CODEGEN_FUSION_COMPILER_H_
#define KILN_COMPILER_CODEGEN_FUSION_COMPILER_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "compiler/analysis/launch_grid.h"
#include "compiler/backend/host_jit.h"
#include "compiler/backend/nvptx.h"
#include "compiler/codegen/host_launch.h"
#include "compiler/codegen/kir.h"
#include "compiler/codegen/kir_pipeline.h"
#include "compiler/hlo/ir.h"

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

/* Replaces every character that is not an ASCII letter or digit by '_' (kernel names). */
void kiln_fusion_sanitize_name(char *s);
/* Writes `text` to `dir`/`name`.`suffix` for KILN_DUMP_TO dumps, creating `dir`; nothing when
 * `dir` is NULL or empty. Dumps are best effort: a file that cannot be written is skipped. */
void kiln_fusion_dump_text(const char *dir, const char *name, const char *suffix, const char *text);

/* The emitter XLA would pick for computation `c`; *hero (may be NULL) gets the hero. */
kiln_fusion_emitter_t kiln_fusion_classify(const kiln_hlo_computation_t *c,
                                           const kiln_hlo_instruction_t **hero);

typedef struct kiln_fusion_compile_options {
  const kiln_launch_device_t *device; /* NULL: defaults */
  bool no_vectorize;
  const char *kernel_name; /* NULL: "<computation>_kernel" (sanitized) */
  const char *dump_dir;    /* NULL: $KILN_DUMP_TO */
  int unroll_max_trip;     /* as kiln_kir_pipeline_options_t */
  /* Round every bf16 op's result, as the evaluator does. By default kiln allows excess
   * precision as XLA does (kiln_kir_module_t.excess_precision); KILN_ALLOW_EXCESS_PRECISION=0
   * or XLA_FLAGS containing --xla_allow_excess_precision=false also turn it off. */
  bool strict_precision;
  /* The kernel will run on the host backend: emitters may pick the variant of their GPU
   * algorithm that the host lowering runs best (the transpose emitter keeps the 32 x 33 tile
   * for 8/16-bit elements, see transpose_emitter.h). */
  bool host_target;
  /* Transpose emitter: 1 = the packed tile whenever its rule allows (also on the host),
   * -1 = never, 0 = the target's default. */
  int packed_transpose;
} kiln_fusion_compile_options_t;

/* Whether kernels compiled with `opts` (may be NULL) may keep bf16 intermediates in f32. */
bool kiln_fusion_excess_precision(const kiln_fusion_compile_options_t *opts);

/* A fusion compiles to one kernel or, for emitters that need several launches (scatter:
 * initialize the output, then apply the updates; multi-pass sorts), a chain of kernels
 * launched in order through `next`. Every kernel of a chain takes the same arguments: the
 * head's inputs, then its outputs; inputs/outputs are filled on the head only. */
typedef struct kiln_fusion_kernel {
  kiln_kir_module_t *kir; /* after the pipeline */
  kiln_affine_ctx_t *ctx;
  kiln_launch_grid_t grid;
  int num_inputs;
  const kiln_hlo_instruction_t **inputs; /* parameter or array constant per input tensor */
  int num_outputs;
  const kiln_shape_t **outputs; /* array shape per output tensor */
  double emit_ms, pipeline_ms;
  struct kiln_fusion_kernel *next; /* owned: the next launch of the chain, or NULL */
} kiln_fusion_kernel_t;

/* Emits the kernel for `c` and runs the kernel-IR pipeline (dumped with KILN_DUMP_TO: the
 * HLO of the fusion as `<name>.40-hlo-fusion.txt`, the partition as `<name>.41-partition.txt`,
 * then the pipeline's 5x-kir-* stages). */
kiln_status kiln_fusion_kernel_emit(const kiln_hlo_computation_t *c,
                                    const kiln_fusion_compile_options_t *opts,
                                    kiln_fusion_kernel_t *out);
/* Frees `k`'s contents and its chain (the chain's nodes are kiln_malloc'ed). */
void kiln_fusion_kernel_free(kiln_fusion_kernel_t *k);

/* PTX (and, unless opts->cubin_via is SKIP, a cubin) for the kernel. `out` as for
 * kiln_nvptx_compile. */
kiln_status kiln_fusion_kernel_compile_nvptx(const kiln_fusion_kernel_t *k,
                                             const kiln_nvptx_options_t *opts,
                                             kiln_nvptx_result_t *out);
/* Runs `ptxas -arch=sm_90` on the PTX of the kernel and every kernel of its chain. OK when accepted; UNAVAILABLE when ptxas
 * is missing; INVALID_ARGUMENT with ptxas's log otherwise. *ptx (may be NULL) receives the
 * PTX text (kiln_free). */
kiln_status kiln_fusion_kernel_ptxas_check(const kiln_fusion_kernel_t *k, char **ptx);

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
