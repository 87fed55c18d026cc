/* HLO pass manager.
 *
 * A pass rewrites a module in place and says whether it changed anything. Passes are
 * registered once in passes.def (name → function) so tools can run any list by name
 * (`kiln-opt --passes=dce,cse`). A pipeline is a list of steps; a step is one pass or a
 * fixed-point group (run the group's passes in order until none changes, bounded).
 *
 * With opts->dump_dir (the edges' KILN_DUMP_TO) every pass that changed the module writes
 * `dir/NNNN.<module>.<pass>.hlo`, NNNN counting up across the pipeline, so the files sort
 * in pipeline order. With opts->verify (default on in debug builds; the edges'
 * KILN_VERIFY_PASSES=1) the verifier runs after every pass that changed the module and names the
 * pass on error. */
#ifndef KILN_PASSES_PASS_H_
#define KILN_PASSES_PASS_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "compiler/hlo/ir.h"

/* Wall time per pass of a pipeline run, filled by the pass runner when
 * kiln_pass_options_t.timings is set (kiln-opt --pass-times). One entry per pass name, in
 * the order the passes first ran; a pass that runs several times (fixed-point groups, cse
 * twice) adds up. Not thread-safe: one table per run. */
#define KILN_PASS_TIMINGS_MAX 64
typedef struct kiln_pass_timing {
  const char *name;   /* the pass's registered name (static) */
  double seconds;     /* total wall time of its runs */
  double cpu_seconds; /* total CPU time of the calling thread (steadier on a busy machine) */
  int runs;           /* how many times it ran */
  int changed;        /* how many of those runs changed the module */
} kiln_pass_timing_t;

typedef struct kiln_pass_timings {
  kiln_pass_timing_t entries[KILN_PASS_TIMINGS_MAX];
  int num_entries;
} kiln_pass_timings_t;

/* Whether the passes verify the module after each change by default (verify = -1): in
 * debug builds. */
#ifdef NDEBUG
#define KILN_PASS_VERIFY_DEFAULT 0
#else
#define KILN_PASS_VERIFY_DEFAULT 1
#endif

/* Options of a pass run. Options only: the edges (plugin/env_options.h: the plugin, the
 * tools) fill them from KILN_DUMP_TO, KILN_VERIFY_PASSES, KILN_DISABLE_PASSES and
 * KILN_GEMM_LIBRARY; passes read only these fields. */
typedef struct kiln_pass_options {
  const char *dump_dir;           /* NULL or "": no dumps */
  int verify;                     /* -1: KILN_PASS_VERIFY_DEFAULT, 0: off, 1: on */
  int max_fixed_point_iterations; /* 0: 25 */
  bool log_changes;     /* print each pass that changed the module to stderr */
  /* Comma-separated pass names the pipeline skips (like XLA's --xla_disable_hlo_passes;
   * '-' and '_' alike). NULL: none. */
  const char *disabled_passes;
  /* Every dot becomes an emitted kernel, none a library call (a GPU without cuBLAS); the
   * edges set it for KILN_GEMM_LIBRARY=none. */
  bool no_gemm_library;
  /* The target's gemm library call takes f32 and f64 dots only (CUDA's cuBLAS path: the
   * compile driver sets it for the CUDA target); dots of other element types become
   * kernels. Off: every combination the host gemm takes (kiln_fusion_wrapper_is_gemm). */
  bool gemm_f32_f64_only;
  /* With gemm_f32_f64_only: the target's gemm library is cuBLASLt (CUDA; a capability the
   * compile driver is told, never probed here): bf16/f16 dots (-> bf16/f16/f32, summed in
   * f32) become gemms too, and gemm epilogues fuse (gemm_epilogue_fusion). */
  bool gemm_cublaslt;
  /* The collective combiners' size bounds: the most result bytes one combined all-reduce /
   * all-gather / reduce-scatter moves (at most 256 ops each). 0: XLA's GPU default, 30 MiB;
   * negative: that combiner does nothing. */
  int64_t all_reduce_combine_threshold_bytes;
  int64_t all_gather_combine_threshold_bytes;
  int64_t reduce_scatter_combine_threshold_bytes;
  kiln_pass_timings_t *timings; /* NULL: not timed; else each pass's time is added here */
  /* (optional) Called after each pass that changed the module (verified and dumped as
   * configured) with the pass's name: kiln-fuzz evaluates every pipeline prefix with it to
   * name the pass that introduced a wrong result. An error stops the pipeline. */
  kiln_status (*after_pass)(void *ctx, const char *pass, const kiln_hlo_module_t *m);
  void *after_pass_ctx;
} kiln_pass_options_t;

typedef kiln_status (*kiln_pass_fn)(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                    bool *changed);

typedef struct kiln_pass {
  const char *name;
  kiln_pass_fn run;
  const char *summary;
} kiln_pass_t;

/* Every registered pass (from passes.def), and lookup by name (NULL if unknown). */
const kiln_pass_t *kiln_pass_registry(int *out_count);
const kiln_pass_t *kiln_pass_find(const char *name);

typedef struct kiln_pass_step {
  int num_passes;          /* 1 = a single pass; >1 = a fixed-point group */
  const kiln_pass_t **passes;
  bool fixed_point;
} kiln_pass_step_t;

/* State of one pipeline run (dump counter). */
typedef struct kiln_pass_runner {
  const kiln_pass_options_t *opts; /* &own: the caller's options with the environment read */
  kiln_pass_options_t own;
  int dump_counter;
  const char *dump_dir;
  bool verify;
} kiln_pass_runner_t;

void kiln_pass_runner_init(kiln_pass_runner_t *r, const kiln_pass_options_t *opts);
/* Runs one pass: verify/dump as configured. `*changed` (may be NULL) is OR-ed. */
kiln_status kiln_pass_runner_run(kiln_pass_runner_t *r, const kiln_pass_t *pass,
                                 kiln_hlo_module_t *m, bool *changed);
/* Runs the passes in order until none changes (at most the configured iteration count). */
kiln_status kiln_pass_runner_run_fixed_point(kiln_pass_runner_t *r, const kiln_pass_t *const *passes,
                                             int n, kiln_hlo_module_t *m, bool *changed);

/* Parses "a,b,(c,d)" — parentheses make a fixed-point group — and runs it. Unknown names
 * give INVALID_ARGUMENT listing the registered passes. */
kiln_status kiln_pass_run_list(kiln_hlo_module_t *m, const char *list,
                               const kiln_pass_options_t *opts);

/* Writes the module as `dir/NNNN.<module>.<suffix>.hlo` (used for dumps of other stages too). */
kiln_status kiln_pass_dump_module(const char *dir, int index, const kiln_hlo_module_t *m,
                                  const char *suffix);

/* The registered pass functions. */
#define KILN_PASS(name, fn, summary) \
  kiln_status fn(kiln_hlo_module_t *m, const kiln_pass_options_t *opts, bool *changed);
#include "compiler/passes/passes.def"
#undef KILN_PASS

#endif /* KILN_PASSES_PASS_H_ */
