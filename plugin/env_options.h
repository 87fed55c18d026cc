/* The environment, read at the edges: the PJRT plugin's compiles, and kiln-run and the other
 * tools through tools/common/device_run.c and bench_module.c. The compiler layers below
 * (compiler/backend/, compiler/thunks/) take options only; this is where the variables that
 * configure a whole-module compile become those options. Thread-safe (reads only). */
#ifndef KILN_PLUGIN_ENV_OPTIONS_H_
#define KILN_PLUGIN_ENV_OPTIONS_H_

#include "compiler/thunks/compile.h"

/* Fills the fields of `o` that are still unset from the environment; fields already set are
 * kept. The strings point into the environment (valid until it changes):
 *   KILN_DUMP_TO=dir                  -> emit.dump_dir (every stage's dumps)
 *   KILN_COMMAND_BUFFER_MIN_RUN=N     -> command_buffer_min_run (N > 0)
 *   KILN_DISABLE_COMMAND_BUFFERS=1    -> no_command_buffers (any value but "" and "0")
 *   KILN_HOST_CPU, KILN_HOST_CPU_FEATURES, KILN_HOST_LLVM_PIPELINE
 *                                     -> emit.host_jit.cpu / .extra_features / .pipeline */
void kiln_pjrt_compile_options_from_env(kiln_compile_options_t *o);

#endif /* KILN_PLUGIN_ENV_OPTIONS_H_ */
