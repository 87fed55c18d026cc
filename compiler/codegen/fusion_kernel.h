/* Kernel scaffolding shared by the fusion dispatcher and every hero emitter (the bottom of
 * codegen's emitter layers: fusion_kernel <- hero_emit <- hero_split <- *_emitter <-
 * fusion_compiler): the compile options, the kernel object
 * a fusion compiles to, kernel names, KILN_DUMP_TO dumps and the kernel-IR pipeline options,
 * built one way for every emitter.
 *
 * Ownership: kiln_codegen_kernel_t owns its kernel-IR module, its affine context and the
 * rest of its chain. */
#ifndef KILN_COMPILER_CODEGEN_FUSION_KERNEL_H_
#define KILN_COMPILER_CODEGEN_FUSION_KERNEL_H_

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"
#include "compiler/analysis/launch_grid.h"
#include "compiler/codegen/kir.h"
#include "compiler/codegen/partitioner.h"
#include "compiler/hlo/ir.h"

struct kiln_nvptx_options;
struct kiln_nvptx_result;

typedef struct kiln_codegen_compile_options {
  const kiln_launch_device_t *device; /* NULL: defaults */
  bool no_vectorize;
  const char *kernel_name; /* NULL: "<computation>_kernel" (sanitized) */
  const char *dump_dir;    /* NULL or "": no dumps (the edges pass $KILN_DUMP_TO) */
  int unroll_max_trip;     /* as kiln_kir_pipeline_options_t */
  /* Round every bf16 op's result, as the evaluator does. By default kiln allows excess
   * precision as XLA does (kiln_kir_module_t.excess_precision); the edges set this for
   * KILN_ALLOW_EXCESS_PRECISION=0 or XLA_FLAGS containing --xla_allow_excess_precision=false. */
  bool strict_precision;
  /* The kernel will run on the host backend: emitters may pick the variant of their GPU
   * algorithm that the host lowering runs best (the transpose emitter keeps the 32 x 33 tile
   * for 8/16-bit elements, see transpose_emitter.h). */
  bool host_target;
  /* XLA's --xla_gpu_deterministic_ops: no emitter combines results with atomics whose order
   * can vary from run to run (scatters with repeated indices and an order-dependent combiner
   * run serially, as on the host; reductions are never split over blocks). */
  bool deterministic;
  /* Transpose emitter: 1 = the packed tile whenever its rule allows (also on the host),
   * -1 = never, 0 = the target's default. */
  int packed_transpose;
} kiln_codegen_compile_options_t;

/* Whether kernels compiled with `opts` (may be NULL: the defaults) may keep bf16
 * intermediates in f32. */
bool kiln_codegen_excess_precision(const kiln_codegen_compile_options_t *opts);

/* A fusion compiles to one kernel or, for emitters that need several launches (scatter:
 * initialize the output, then apply the updates; multi-pass sorts), a chain of kernels
 * launched in order through `next`. Every kernel of a chain takes the same arguments: the
 * head's inputs, then its outputs, then its scratch tensors; inputs/outputs/scratch are
 * filled on the head only. Scratch tensors (the merge sort's second buffer) are the
 * kernel's own working memory: contents undefined on entry, nobody reads them after; the
 * thunk emitter gives them a temporary allocation of their own. */
typedef struct kiln_codegen_kernel {
  kiln_kir_module_t *kir; /* after the pipeline */
  kiln_affine_ctx_t *ctx;
  kiln_launch_grid_t grid;
  int num_inputs;
  const kiln_hlo_instruction_t **inputs; /* parameter or array constant per input tensor */
  int num_outputs;
  const kiln_shape_t **outputs; /* array shape per output tensor */
  int num_scratch;
  const kiln_shape_t **scratch; /* array shape per scratch tensor (written, never an output) */
  /* When set (num_outputs entries): all the kernel does is copy input identity_inputs[o] to
   * output o, every element to its own place (the first kernel of a scatter or
   * dynamic-update-slice chain whose operands are the fusion's parameters). A launch where each
   * such pair is one slice (the update runs in place) would change nothing: the thunk emitter
   * leaves it out. */
  int *identity_inputs;
  double emit_ms, pipeline_ms;
  struct kiln_codegen_kernel *next; /* owned: the next launch of the chain, or NULL */
} kiln_codegen_kernel_t;

/* Sets k->identity_inputs when each of its `n` outputs is written with values[o] at the same
 * index and each values[o] is a fusion parameter the kernel reads, shaped (layout included) as
 * the output; otherwise leaves it unset. For chains whose first kernel copies operands to
 * outputs (scatter, dynamic-update-slice). */
void kiln_codegen_kernel_mark_identity(kiln_codegen_kernel_t *k, int n,
                                       const kiln_hlo_instruction_t *const *values);

/* Frees `k`'s contents and its chain (the chain's nodes are kiln_malloc'ed). */
void kiln_codegen_kernel_free(kiln_codegen_kernel_t *k);

/* PTX (and, unless opts->cubin_via is SKIP, a cubin) for the kernel. `out` as for
 * kiln_nvptx_compile. */
kiln_status kiln_codegen_kernel_compile_nvptx(const kiln_codegen_kernel_t *k,
                                              const struct kiln_nvptx_options *opts,
                                              struct kiln_nvptx_result *out);
/* Runs `ptxas -arch=sm_90` on the PTX of the kernel and every kernel of its chain. OK when
 * accepted; UNAVAILABLE when ptxas is missing; INVALID_ARGUMENT with ptxas's log otherwise.
 * *ptx (may be NULL) receives the PTX text (kiln_free). */
kiln_status kiln_codegen_kernel_ptxas_check(const kiln_codegen_kernel_t *k, char **ptx);

/* Replaces every character that is not an ASCII letter or digit by '_' (kernel names). */
void kiln_codegen_sanitize_name(char *s);
/* The kernel name of `c` under `opts` (opts->kernel_name, else "<computation>_kernel")
 * plus `suffix` (may be NULL; chains need distinct names), sanitized, into buf[n]. */
void kiln_codegen_kernel_name(const kiln_hlo_computation_t *c,
                              const kiln_codegen_compile_options_t *opts, const char *suffix,
                              char *buf, size_t n);

/* Writes `text` to `dir`/`name`.`suffix` for KILN_DUMP_TO dumps, creating `dir`; nothing when
 * `dir` is NULL or empty. Dumps are best effort: a file that cannot be written is skipped. */
void kiln_codegen_dump_text(const char *dir, const char *name, const char *suffix,
                            const char *text);
/* With a dump folder (`dump_dir` non-empty): writes `<name>.40-hlo-fusion.txt`, the fusion
 * `c`, then, when `reads` is given, the computation holding the values the kernel reads. */
void kiln_codegen_dump_fusion(const char *dump_dir, const char *name,
                              const kiln_hlo_computation_t *c, const kiln_hlo_computation_t *reads);
/* With a dump folder: writes `<name>.41-partition.txt`, the partition `part`. */
void kiln_codegen_dump_partition(const char *dump_dir, const char *name,
                                 const kiln_partition_t *part);

/* Runs the kernel-IR pipeline on `kir` with the options' vectorize / unroll settings (the
 * one place they become kiln_kir_pipeline_options_t), dumping as `name` into `dump_dir` (may
 * be NULL); adds the time to *ms. */
kiln_status kiln_codegen_kernel_run_pipeline(kiln_kir_module_t *kir, const char *dump_dir,
                                             const char *name,
                                             const kiln_codegen_compile_options_t *opts,
                                             double *ms);

/* The start of every emitter: names the kernel of `c` (plus `suffix`, may be NULL) into
 * name[n], dumps `c` (and `reads`, see kiln_codegen_dump_fusion) and creates out's affine
 * context and kernel-IR module. Returns the dump folder (opts->dump_dir; may be NULL). */
const char *kiln_codegen_kernel_start(kiln_codegen_kernel_t *out, const kiln_hlo_computation_t *c,
                                      const kiln_hlo_computation_t *reads,
                                      const kiln_codegen_compile_options_t *opts,
                                      const char *suffix, char *name, size_t n);
/* The end of every emitter: unless `st` (an error met while emitting; consumed) is set,
 * verifies the kernel IR and runs the pipeline (kiln_codegen_kernel_run_pipeline); records
 * out->emit_ms since `t0` (kiln_clock_ms) and out->pipeline_ms. On error frees `out` and
 * returns the error annotated with fusion `c`'s name. */
kiln_status kiln_codegen_kernel_finish(kiln_codegen_kernel_t *out, kiln_status st, double t0,
                                       const char *dump_dir, const char *name,
                                       const kiln_codegen_compile_options_t *opts,
                                       const kiln_hlo_computation_t *c);

#endif /* KILN_COMPILER_CODEGEN_FUSION_KERNEL_H_ */
