/* The environment into compile options (env_options.h). */
#include "plugin/env_options.h"

#include <stdlib.h>
#include <string.h>

/* $name when set and not empty, else NULL. */
static const char *env_str(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

void kiln_pjrt_compile_options_from_env(kiln_compile_options_t *o) {
  if (!o->emit.dump_dir) o->emit.dump_dir = env_str("KILN_DUMP_TO");
  if (!o->command_buffer_min_run) {
    const char *v = env_str("KILN_COMMAND_BUFFER_MIN_RUN");
    long n = v ? strtol(v, NULL, 10) : 0;
    if (n > 0) o->command_buffer_min_run = (size_t)n;
  }
  const char *off = env_str("KILN_DISABLE_COMMAND_BUFFERS");
  if (off && strcmp(off, "0") != 0) o->no_command_buffers = true;
  kiln_host_jit_options_t *j = &o->emit.host_jit;
  if (!j->cpu) j->cpu = env_str("KILN_HOST_CPU");
  if (!j->extra_features) j->extra_features = env_str("KILN_HOST_CPU_FEATURES");
  if (!j->pipeline) j->pipeline = env_str("KILN_HOST_LLVM_PIPELINE");
}
