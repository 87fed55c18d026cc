/* The client's compile cache.
 *
 * In memory: a program (format + bytes) with its compile options and the client's target
 * maps to the PJRT_Executable compiled from it (one reference held per entry), so compiling
 * the same program again returns a new handle on the same executable, whose kernels are
 * already loaded: no parse, no passes, no LLVM. Keys are compared byte for byte (a hash picks
 * the bucket). At most KILN_PJRT_COMPILE_CACHE_ENTRIES entries; the oldest goes first.
 *
 * On disk, under the client's cache_dir ("" disables it), in base/disk_cache.h's entries:
 *   "modules"       the optimized module's text, keyed by the program, the options, the
 *                   target and kiln's version: a fresh process skips parsing and the passes;
 *   "host-objects"  each host kernel's object code and
 *   "cuda-cubins"   each CUDA kernel's cubin, keyed by its kernel IR, the target, the LLVM
 *                   pipeline, LLVM's and kiln's versions (compiler/backend/kernel_cache.h,
 *                   which also keeps them in memory for the whole process): a fresh process
 *                   skips LLVM's optimizer, code generation and nvJitLink;
 *   "executables"   each device's whole lowered executable (compiler/thunks/executable_cache.h,
 *                   keyed by the optimized module, the target and the lowering options): a
 *                   fresh process skips buffer assignment and codegen too, and only links
 *                   the executable's objects (kernel objects are then neither read nor made).
 *
 * It also lists every live executable of the client, so destroying the client detaches them
 * (their device code is released while the devices still exist).
 *
 * Thread-safety: thread-safe. */
#ifndef KILN_PLUGIN_COMPILE_CACHE_H_
#define KILN_PLUGIN_COMPILE_CACHE_H_

#include <stddef.h>
#include <stdint.h>

#include "plugin/pjrt_executable.h"

#define KILN_PJRT_COMPILE_CACHE_ENTRIES 256

/* What a compile looks up: built once per Compile call. */
typedef struct kiln_pjrt_cache_key {
  char *bytes; /* format, program and options, each length-prefixed, then the target */
  size_t len;
  uint64_t hash[2];
} kiln_pjrt_cache_key_t;

/* RESOURCE_EXHAUSTED (k empty) when the key's bytes are refused. */
kiln_status kiln_pjrt_cache_key_make(kiln_pjrt_cache_key_t *k, const char *format,
                                     size_t format_len, const void *code, size_t code_len,
                                     const void *options, size_t options_len, const char *target);
void kiln_pjrt_cache_key_free(kiln_pjrt_cache_key_t *k);

/* The executable compiled for `k` (a new reference), or NULL. Counts a hit or a miss. */
PJRT_Executable *kiln_pjrt_compile_cache_get(kiln_pjrt_compile_cache_t *c,
                                             const kiln_pjrt_cache_key_t *k);
/* Records `e` for `k` and returns the executable callers should use (a new reference): `e`,
 * or the one another thread recorded for the same key first. */
PJRT_Executable *kiln_pjrt_compile_cache_put(kiln_pjrt_compile_cache_t *c,
                                             const kiln_pjrt_cache_key_t *k, PJRT_Executable *e);
/* The disk cache folder, or NULL when disabled (borrowed). */
const char *kiln_pjrt_compile_cache_dir(const kiln_pjrt_compile_cache_t *c);

/* The list of live executables (kiln_pjrt_executable_create / its last unref). */
void kiln_pjrt_compile_cache_register(kiln_pjrt_compile_cache_t *c, PJRT_Executable *e);
void kiln_pjrt_compile_cache_unregister(kiln_pjrt_compile_cache_t *c, PJRT_Executable *e);

typedef struct kiln_pjrt_compile_cache_counters {
  int64_t memory_hits, memory_misses;
  int64_t module_disk_hits, module_disk_misses, module_disk_rejected;
  int64_t object_disk_hits, object_disk_misses, object_disk_rejected;
  int64_t executable_disk_hits, executable_disk_misses, executable_disk_rejected;
} kiln_pjrt_compile_cache_counters_t;

/* Memory counts are this client's; disk counts this process's. */
kiln_pjrt_compile_cache_counters_t kiln_pjrt_compile_cache_counters(kiln_pjrt_compile_cache_t *c);

#endif /* KILN_PLUGIN_COMPILE_CACHE_H_ */
