/* Fusion compiler: one fusion computation -> kernel IR (partitioner, elemental emitter,
 * loop emitter) -> the kernel-IR pipeline -> NVPTX PTX / cubin or host machine code. (The
 * fusion runner that tests and tools use to check a fusion against the reference evaluator is
 * tools/common/fusion_runner.h.)
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

#include "base/host_pool.h"
#include "base/status.h"
#include "compiler/analysis/launch_grid.h"
#include "compiler/backend/host_jit.h"
#include "compiler/backend/nvptx.h"
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

#endif /* KILN_COMPILER_CODEGEN_FUSION_COMPILER_H_ */
