/* Whole compiled executables as bytes, and the compile driver's cache of them.
 *
 * kiln_executable_desc_to_bytes / _from_bytes wrap runtime/executable_serialize.h with what
 * only the compiler knows: custom-call thunks are made again from their recipes
 * (custom_call_emitter.h: FFI handlers looked up in the registry by target when read,
 * host built-ins, rng-get-and-update-state), and host images are linked again from the object
 * files they hold (kiln_host_link_objects, compiler/backend/host_jit.h: kiln's own ELF loader,
 * or a fresh ORC JIT for what it refuses or with emit.host_jit.orc_link; the description
 * keeps the code alive), so reading needs no pass, no codegen, no LLVM optimization and, on
 * x86-64 Linux, no LLVM at all.
 *
 * The compile driver (compile.h, options.executable_cache_dir) stores every executable it
 * compiles under kind KILN_EXECUTABLE_CACHE_KIND of base/disk_cache.h and looks it up before
 * running the passes (kiln_compile_module) or before buffer assignment
 * (kiln_compile_optimized_module, the plugin's per-device lowering), keyed by
 * kiln_executable_cache_key: the module's canonical text as
 * given to the compiler (before any pass), the options that change the code (target, arch,
 * rng seed, while bound, strict precision, command-buffer settings, the pass options), the
 * environment variables the layers below still read for code (KILN_DISABLE_PASSES,
 * KILN_GEMM_LIBRARY, KILN_ALLOW_EXCESS_PRECISION, XLA_FLAGS, KILN_CUDA_DIR), the host JIT's
 * triple, CPU, features and pipeline (options.emit.host_jit), and kiln's
 * version; base/disk_cache.c mixes in the build's identity. An entry that cannot be read
 * (corrupt, truncated, another version, a custom call whose handler is gone) is a miss: the
 * module is compiled and the entry rewritten.
 *
 * Thread-safety: thread-safe (the disk cache is; each call links into an image of its own). */
#ifndef KILN_COMPILER_THUNKS_EXECUTABLE_CACHE_H_
#define KILN_COMPILER_THUNKS_EXECUTABLE_CACHE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "compiler/thunks/compile.h"
#include "runtime/executable.h"

#define KILN_EXECUTABLE_CACHE_KIND "executables"

/* Serializes `d` (runtime/executable_serialize.h): *out kiln_malloc'ed, the caller frees it. */
kiln_status kiln_executable_desc_to_bytes(const kiln_executable_desc_t *d, void **out, size_t *len);

/* Reads bytes of kiln_executable_desc_to_bytes into a description ready to load: custom calls
 * resolved with `opts` (its ffi_registry; NULL options: the default registry), host images
 * linked (kiln's ELF loader, else a new JIT; opts->host_jit.orc_link: the JIT). *out is the
 * caller's. */
kiln_status kiln_executable_desc_from_bytes(const void *data, size_t len,
                                            const kiln_thunk_emit_options_t *opts,
                                            kiln_executable_desc_t **out);

/* As kiln_executable_desc_from_bytes without linking: host images keep NULL functions and
 * their objects (for fuzzing the format and for inspection; such a description cannot be
 * loaded). */
kiln_status kiln_executable_desc_from_bytes_unlinked(const void *data, size_t len,
                                                     const kiln_thunk_emit_options_t *opts,
                                                     kiln_executable_desc_t **out);

/* The cache key of compiling `m` with `opts` (environment read in: the compile driver passes
 * its resolved options): `optimized` false for kiln_compile_module (m as given, before any
 * pass), true for kiln_compile_optimized_module (m after the passes: the plugin's lowering
 * for a device); the two never share an entry. */
kiln_status kiln_executable_cache_key(const kiln_hlo_module_t *m,
                                      const kiln_compile_options_t *opts, bool optimized,
                                      uint64_t key[2]);

#endif /* KILN_COMPILER_THUNKS_EXECUTABLE_CACHE_H_ */
