/* Executables: PJRT_Executable (the optimized program and what it returns, shared) and
 * PJRT_LoadedExecutable (one per client: the program's kernels loaded on each device, made
 * lazily on the first execute there), plus the client's compile cache.
 *
 * Lazy JIT: Compile parses, verifies and runs the passes; the first execute on a device
 * generates and loads its kernels (once, however many threads execute at once) and keeps
 * them.
 *
 * Thread-safety: thread-safe. */
#ifndef KILN_PLUGIN_PJRT_EXECUTABLE_H_
#define KILN_PLUGIN_PJRT_EXECUTABLE_H_

#include "base/status.h"
#include "plugin/pjrt_objects.h"

kiln_status kiln_pjrt_compile_cache_create(const kiln_pjrt_client_options_t *opts,
                                           kiln_pjrt_compile_cache_t **out);
void kiln_pjrt_compile_cache_destroy(kiln_pjrt_compile_cache_t *c);

#endif /* KILN_PLUGIN_PJRT_EXECUTABLE_H_ */
