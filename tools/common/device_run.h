/* Running a whole HLO module on a device (host or CUDA) through the compiler and the
 * runtime, for kiln-run and the corpus tests: compile a copy of the module (the input is
 * left as it is), load it, upload the arguments (in each parameter's physical layout), run
 * it `repeat` times, download the result into a literal of the entry's result shape. */
#ifndef KILN_TOOLS_COMMON_DEVICE_RUN_H_
#define KILN_TOOLS_COMMON_DEVICE_RUN_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/status.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "compiler/thunks/compile.h"
#include "runtime/device.h"
#include "runtime/mpi.h"

/* How long the processes of an MPI run wait for each other to compile and load. */
#define KILN_DEVICE_RUN_MPI_LOAD_TIMEOUT_MS 600000

typedef struct kiln_device_run_options {
  kiln_device_t *device;        /* required: where to run */
  int64_t repeat;               /* runs (>= 1; 0 means 1); the result is the last run's */
  /* The result is the first run's instead (the evaluator's: a module with an rng counter
   * draws other numbers on each later run). */
  bool first_run_result;
  int64_t max_while_iterations; /* 0: unbounded */
  uint64_t rng_seed;            /* as the evaluator's rng_seed (rng-get-and-update-state) */
  const char *dump_dir;         /* NULL: $KILN_DUMP_TO */
  bool no_command_buffers;
  bool strict_precision;         /* round every bf16 op (no excess precision) */
  bool print_thunks;             /* print the thunk sequence (after conversion) to stdout */
  bool print_runs;               /* print each run's time to stdout */
  bool compile_only;             /* compile and load, run nothing: *result stays NULL */
  /* The all-reduce / all-gather / reduce-scatter combiners' size bound, for all three
   * (kiln_pass_options_t.*_combine_threshold_bytes: 0 their default, 30 MiB; negative: off). */
  int64_t combine_threshold_bytes;
  /* A per-thunk profile of the runs (a kiln_thunk_profile_mode_t, 0: off), printed to stdout
   * after them as tools/common/profile_report.h's table (profile_rows rows; 0: all). */
  int profile;
  int profile_rows;
  int64_t collective_timeout_ms; /* SPMD runs: 0: KILN_SPMD_DEFAULT_TIMEOUT_MS */
  /* Serialize the compiled executable, destroy it and run the one read back
   * (compiler/thunks/executable_cache.h): what a fresh process gets from the cache. */
  bool serialize_round_trip;
  /* SPMD runs across the processes of MPI_COMM_WORLD (runtime/mpi.h): this process runs its
   * share of the participants (kiln_spmd_run_params_t.mpi); the others' results stay NULL.
   * The processes meet after loading (kiln_mpi_barrier, KILN_DEVICE_RUN_MPI_LOAD_TIMEOUT_MS). */
  kiln_mpi_t *mpi;
  /* SPMD runs: participant i gets participant_args[i] (num_args literals) instead of `args`. */
  kiln_literal_t *const *const *participant_args;
} kiln_device_run_options_t;

typedef struct kiln_device_run_report {
  kiln_compile_stats_t compile;
  double compile_ms, load_ms, upload_ms, run_min_ms, run_mean_ms, download_ms;
  double compile_load_cpu_ms; /* CPU time of compile + load, all threads (kiln_clock_cpu_ms) */
  int64_t runs;
  size_t serialized_bytes; /* serialize_round_trip: the serialized executable's size */
} kiln_device_run_report_t;

/* Runs `m` on opts->device with `args` (one literal per entry parameter) and stores the
 * result in *result (allocated in `arena`). */
kiln_status kiln_device_run_module(const kiln_hlo_module_t *m, kiln_literal_t *const *args,
                                   int num_args, const kiln_device_run_options_t *opts,
                                   kiln_arena_t *arena, kiln_literal_t **result,
                                   kiln_device_run_report_t *report);

/* The same on num_replicas x num_partitions host devices (runtime/spmd.h): the module
 * compiled once for that world, every participant given the same `args` (or its
 * opts->participant_args) on its own stream and buffers, all run concurrently;
 * results[participant] (caller-provided, R x P entries) receives each participant's result
 * (with opts->mpi: this process's participants'; the others NULL). */
kiln_status kiln_device_run_module_spmd(const kiln_hlo_module_t *m, kiln_literal_t *const *args,
                                        int num_args, int num_replicas, int num_partitions,
                                        const kiln_device_run_options_t *opts, kiln_arena_t *arena,
                                        kiln_literal_t **results, kiln_device_run_report_t *report);

#endif /* KILN_TOOLS_COMMON_DEVICE_RUN_H_ */
