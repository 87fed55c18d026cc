/* Running a whole HLO module through the PJRT plugin, for kiln-run: the job of device_run.h
 * (compile, upload the arguments, run `repeat` times, download the result into a literal of
 * the entry's result shape, with timings), done the way a framework does it — libkiln_pjrt.so
 * loaded with dlopen(RTLD_LOCAL) and driven only through the PJRT function table. The module
 * goes to PJRT_Client_Compile as HLO text (format "hlo"); each argument leaf becomes a
 * PJRT_Buffer from its literal (row-major host data, the executable's parameter layout as
 * the device layout: the entry_computation_layout of its OptimizedProgram, as a framework
 * learns it); each result leaf comes back through PJRT_Buffer_ToHostBuffer in row-major order.
 *
 * Ownership: kiln_pjrt_runner_open returns a runner the caller closes; it owns the client.
 * Not thread-safe: callers serialize uses of one runner. */
#ifndef KILN_TOOLS_COMMON_PJRT_RUN_H_
#define KILN_TOOLS_COMMON_PJRT_RUN_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/status.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "kiln/pjrt_c_api.h"

typedef struct kiln_pjrt_runner kiln_pjrt_runner_t;

typedef struct kiln_pjrt_runner_options {
  /* The plugin: NULL means $KILN_PJRT_PLUGIN, else libkiln_pjrt.so next to the program, else
   * the one this build made, else libkiln_pjrt.so on the loader's search path. */
  const char *plugin;
  const char *platform; /* the client's "platform" option ("cpu", "cuda"); NULL: not given */
  int64_t num_devices;  /* the client's "num_devices" option (host devices); 0: not given */
  bool mpi;             /* the client's "mpi" option: one client across mpirun's processes */
  int64_t collective_timeout_ms; /* the client's "collective_timeout_ms"; 0: not given */
  /* The table of a plugin linked into this program (its GetPjrtApi()), used instead of
   * loading one: `plugin` is then ignored. test_alloc_failure drives the plugin this way, so
   * that the allocation-failure injection (base/alloc.h) it sets reaches the plugin's code. */
  const PJRT_Api *api;
} kiln_pjrt_runner_options_t;

/* Loads the plugin, initializes it and creates a client. */
kiln_status kiln_pjrt_runner_open(const kiln_pjrt_runner_options_t *opts, kiln_pjrt_runner_t **out);
void kiln_pjrt_runner_close(kiln_pjrt_runner_t *r);
/* "PATH: PJRT 0.114, platform cpu, device <kind> (<description>)": borrowed, lives as long as
 * the runner. */
const char *kiln_pjrt_runner_description(const kiln_pjrt_runner_t *r);

typedef struct kiln_pjrt_run_options {
  int64_t repeat;  /* runs (>= 1; 0 means 1); the result is the last run's */
  bool print_runs; /* print each run's time to stdout */
  /* The result is the first run's instead (the evaluator's: a module with an rng counter
   * draws other numbers on each later run). */
  bool first_run_result;
  /* (spmd, optional) participant p's arguments, instead of the same ones on every device */
  kiln_literal_t *const *const *participant_args;
  /* The collective combiners' size bound for all three (kiln_pass_options_t's meaning: 0 the
   * default, negative off), sent as the compile options' DebugOptions
   * xla_gpu_*_combine_threshold_bytes (a negative one as 0, XLA's "combine nothing"). */
  int64_t combine_threshold_bytes;
} kiln_pjrt_run_options_t;

typedef struct kiln_pjrt_run_report {
  double compile_ms;   /* PJRT_Client_Compile: parse, verify, passes (kernels come later) */
  double upload_ms;    /* the arguments' PJRT_Client_BufferFromHostBuffer */
  double first_run_ms; /* the first execute, which generates the kernels (lazy JIT) */
  double run_min_ms, run_mean_ms; /* over all runs, the first included */
  double download_ms;
  int64_t runs;
} kiln_pjrt_run_report_t;

/* Runs `m` with `args` (one array literal per entry parameter) and stores the result in
 * *result (allocated in `arena`). */
kiln_status kiln_pjrt_run_module(kiln_pjrt_runner_t *r, const kiln_hlo_module_t *m,
                                 kiln_literal_t *const *args, int num_args,
                                 const kiln_pjrt_run_options_t *opts, kiln_arena_t *arena,
                                 kiln_literal_t **result, kiln_pjrt_run_report_t *report);

/* Runs `m` compiled for replicas x partitions devices of the client (its num_devices) with
 * the same `args` on every device (or opts->participant_args); results[d] (replicas *
 * partitions entries) gets device d's result, in participant order (replica * partitions +
 * partition). A client across processes (option mpi) runs this process's participants: the
 * others' results stay NULL. */
kiln_status kiln_pjrt_run_module_spmd(kiln_pjrt_runner_t *r, const kiln_hlo_module_t *m,
                                      kiln_literal_t *const *args, int num_args, int replicas,
                                      int partitions, const kiln_pjrt_run_options_t *opts,
                                      kiln_arena_t *arena, kiln_literal_t **results,
                                      kiln_pjrt_run_report_t *report);

/* The pieces other PJRT clients of the tools share (kiln-bench, kiln-replay). */

/* A kiln status from a PJRT error, which it takes over and destroys ("what: message", the
 * error's code); NULL for NULL. */
kiln_status kiln_pjrt_status_from_error(const PJRT_Api *api, PJRT_Error *e, const char *what);
/* dlopen(RTLD_NOW | RTLD_LOCAL) of the plugin at `path`, or when NULL the search of
 * kiln_pjrt_runner_options_t.plugin; `used` gets the path tried. NULL: see dlerror(). */
void *kiln_pjrt_plugin_dlopen(const char *path, char *used, size_t used_size);
/* The PJRT buffer type of an element type and back; false where there is none. */
bool kiln_pjrt_buffer_type_of(kiln_elem_type_t t, PJRT_Buffer_Type *out);
/* Awaits `ev` (NULL: nothing to wait for) and destroys it; the status names `what`. */
kiln_status kiln_pjrt_event_await(const PJRT_Api *api, PJRT_Event *ev, const char *what);
/* One array of `shape` (its layout honoured) from host `data` onto `device`, the upload
 * awaited; *out NULL on error (a tuple, token or non-numeric shape is UNIMPLEMENTED). */
kiln_status kiln_pjrt_buffer_from_host(const PJRT_Api *api, PJRT_Client *client,
                                       PJRT_Device *device, const kiln_shape_t *shape,
                                       const void *data, PJRT_Buffer **out);
bool kiln_pjrt_elem_type_of(PJRT_Buffer_Type t, kiln_elem_type_t *out);

#endif /* KILN_TOOLS_COMMON_PJRT_RUN_H_ */
