/* The fusion runner (tests, tools and benchmarks only; part of kiln_testing): compile one
 * fusion computation, run it on the host on generated inputs, and compare the result with the
 * reference evaluator's on the same inputs (tools/common/compare.h's kernel tolerance). It
 * lives here, not in compiler/codegen, because it reaches the evaluator, which codegen may
 * not use. */
#ifndef KILN_TOOLS_COMMON_FUSION_RUNNER_H_
#define KILN_TOOLS_COMMON_FUSION_RUNNER_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/host_pool.h"
#include "compiler/backend/host_jit.h"
#include "compiler/codegen/fusion_compiler.h"
#include "compiler/codegen/kir_pipeline.h"
#include "compiler/hlo/ir.h"

typedef struct kiln_runner_options {
  uint64_t seed;             /* input generation (splitmix64 per input) */
  double float_lo, float_hi; /* floats uniform in [lo, hi); both 0: [-1, 1) */
  int64_t max_ulp;           /* < 0: per-type default (kiln_compare_kernel_tolerance) */
  bool check_ptx;            /* also run ptxas on the kernel's PTX */
  int64_t max_bytes;         /* inputs/outputs larger than this are not run (RESOURCE_EXHAUSTED
                                after compiling); 0: 2 GiB */
  kiln_host_jit_t *jit;      /* NULL: a JIT of the runner's own */
  kiln_host_pool_t *pool;    /* NULL: run on the calling thread */
  kiln_codegen_compile_options_t compile;
  /* Evaluated instead of the fusion itself when set: a computation with the same parameters
   * and result shape giving the semantics to check against (e.g. the f32-inside form of a
   * bf16 fusion, for excess precision). NULL: the fusion. */
  const kiln_hlo_computation_t *reference;
} kiln_runner_options_t;

/* Defaults; compile.strict_precision is set, so that bf16 results match the evaluator's
 * per-op rounding within the default tolerance (clear it to check excess precision). */
void kiln_runner_options_init(kiln_runner_options_t *o);

typedef struct kiln_runner_report {
  kiln_codegen_emitter_t emitter; /* the one that ran it (kiln_codegen_choose_emitter) */
  kiln_launch_grid_t grid;
  int num_outputs;
  int64_t elements;   /* output elements compared */
  int64_t mismatches; /* elements beyond the tolerance */
  int64_t max_ulp;    /* largest distance seen (floats; integers: 0 or 1 for "differs") */
  int64_t tolerance;  /* the tolerance used for the first output */
  double max_abs_err, max_rel_err;
  char first_mismatch[256];
  double emit_ms, pipeline_ms, host_compile_ms, run_ms, eval_ms;
  bool ptx_checked, ptx_ok;
  char ptx_note[256];
} kiln_runner_report_t;

/* Compiles `c` for the host, runs it on generated inputs, evaluates `c` on the same inputs
 * and compares them with the kernel tolerance of tools/common/compare.h (max_ulp overrides
 * its ulps; a reduction kernel's outputs also pass within its summation slack). Returns an error
 * status when compiling, running or evaluating failed; a numerical mismatch is not an error (see
 * report->mismatches). */
kiln_status kiln_runner_check(const kiln_hlo_computation_t *c, const kiln_runner_options_t *opts,
                              kiln_runner_report_t *report);

/* The fusion computations to run from a module: for bare computations (parsed by
 * kiln_hlo_parse_computations) the entry unless it calls fusions; otherwise the
 * computations called by every fusion instruction of the entry (each once). *out is a
 * kiln_malloc'ed array. */
void kiln_runner_collect_fusions(const kiln_hlo_module_t *m, const kiln_hlo_computation_t ***out,
                                 int *n);

#endif /* KILN_TOOLS_COMMON_FUSION_RUNNER_H_ */
