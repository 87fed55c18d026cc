/* The whole compiler as one call: HLO module -> executable description.
 *
 *   1. the pass pipeline (compiler/passes/pipeline.h: simplification, layouts, fusion,
 *      the fusion wrapper, copy insertion, scheduling);
 *   2. buffer assignment of the scheduled module;
 *   3. thunk emission (thunk_emitter.h): every fusion compiled for the target;
 *   4. command-buffer conversion: runs of at least `command_buffer_min_run` convertible
 *      thunks become command-buffer thunks (kiln_command_buffer_convert), unless
 *      `no_command_buffers`.
 *
 * Options only: the environment (KILN_DUMP_TO, KILN_COMMAND_BUFFER_MIN_RUN,
 * KILN_DISABLE_COMMAND_BUFFERS, KILN_HOST_CPU*, KILN_HOST_LLVM_PIPELINE) is read at the edges,
 * into these options (plugin/env_options.h: the plugin, kiln-run and the tools).
 *
 * Dumps (options.emit.dump_dir): the passes' HLO dumps, every kernel's
 * stages, and `<module>.96-buffer-assignment.txt`, `<module>.97-thunks.txt` (before
 * conversion), `<module>.98-command-buffers.txt` (after). */
#ifndef KILN_COMPILER_THUNKS_COMPILE_H_
#define KILN_COMPILER_THUNKS_COMPILE_H_

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/pass.h"
#include "compiler/thunks/thunk_emitter.h"
#include "runtime/command_buffer.h"
#include "runtime/executable.h"

/* XLA's default minimum graph size (--xla_gpu_graph_min_graph_size). */
#define KILN_COMMAND_BUFFER_DEFAULT_MIN_RUN 5

typedef struct kiln_compile_options {
  kiln_thunk_emit_options_t emit;
  const kiln_pass_options_t *passes; /* NULL: defaults */
  size_t command_buffer_min_run;     /* 0: KILN_COMMAND_BUFFER_DEFAULT_MIN_RUN */
  bool no_command_buffers;
  /* The whole-executable cache (executable_cache.h): kiln_compile_module looks the module up
   * here before the passes and stores what it compiles. NULL or "": off. Also off while
   * dumps, a pass hook, pass timings or change logging are asked for. */
  const char *executable_cache_dir;
} kiln_compile_options_t;

typedef struct kiln_compile_stats {
  double passes_ms, buffer_assignment_ms, emit_ms, total_ms;
  kiln_thunk_emit_stats_t emit;
  size_t command_buffers;   /* command-buffer thunks made */
  int64_t temp_bytes;       /* the temp allocation */
  /* The whole-executable cache: a hit (then only total_ms and cache_ms are set: no pass, no
   * codegen ran, and the module was not changed), and the time spent on keying, reading,
   * linking (a hit) or writing (a miss). */
  bool executable_cache_hit;
  double cache_ms;
  /* ... of which: the key (printing and hashing the module), reading the entry, and on a hit
   * rebuilding the description (custom calls, JIT creation, linking the objects). */
  double cache_key_ms, cache_read_ms, cache_load_ms;
  /* Custom calls recorded inside command buffers (command-buffer compatible handlers in a
   * converted run) and those left outside, splitting runs. */
  size_t command_buffer_custom_calls, split_custom_calls;
} kiln_compile_stats_t;

/* Compiles `m` in place (the passes rewrite it) into *out (caller-owned). `opts` and
 * `stats` may be NULL. The same as kiln_compile_module_passes then
 * kiln_compile_optimized_module, unless opts->executable_cache_dir holds the executable:
 * then it is read from there and `m` is left as it was. */
kiln_status kiln_compile_module(kiln_hlo_module_t *m, const kiln_compile_options_t *opts,
                                kiln_executable_desc_t **out, kiln_compile_stats_t *stats);

/* Step 1 alone (the PJRT plugin's Compile): runs the pass pipeline on `m` in place; the
 * result is scheduled and ready for step 2. Fills stats->passes_ms only. */
kiln_status kiln_compile_module_passes(kiln_hlo_module_t *m, const kiln_compile_options_t *opts,
                                       kiln_compile_stats_t *stats);

/* Steps 2-4 (the plugin's first execute on a device): buffer assignment, thunk emission and
 * command-buffer conversion of a module step 1 produced; with opts->executable_cache_dir,
 * looked up there first (keyed by the optimized module) and stored after. `m` is only read, so one
 * optimized module may be lowered for several devices, from several threads at once. Fills every
 * field of `stats` but passes_ms (total_ms adds the passes_ms it holds). */
kiln_status kiln_compile_optimized_module(const kiln_hlo_module_t *m,
                                          const kiln_compile_options_t *opts,
                                          kiln_executable_desc_t **out,
                                          kiln_compile_stats_t *stats);

#endif /* KILN_COMPILER_THUNKS_COMPILE_H_ */
