/* The process-wide settings of every program built on tools/common/ (the tools, benchmarks
 * and tests): read from the environment once, as the program starts, before main — so the
 * variables a user sets (KILN_LOG, KILN_ALLOCATOR, KILN_HOST_BLAS, KILN_CUDA_DRIVER, ...; see
 * plugin/env_options.h) hold for them as they do for the plugin. CMakeLists.txt links this
 * object into every program that links kiln_testing (-Wl,--undefined=kiln_tools_env_edge). */
#include "plugin/env_options.h"

void kiln_tools_env_edge(void) __attribute__((constructor));
void kiln_tools_env_edge(void) {
  kiln_pjrt_process_options_from_env();
}
