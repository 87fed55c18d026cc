/* Host backend: LLVM modules -> machine code in this process, through ORC LLJIT.
 *
 * One kiln_host_jit_t is one LLJIT with one main JITDylib that also resolves symbols of
 * the process (libm, libc), so JIT'd code may call tanhf, memcpy, ... The target machine is
 * the host's own: CPU name and features come from LLVMGetHostCPUName/Features (AVX2 and
 * AVX-512 get used), and every module is optimized with LLVMRunPasses(pipeline, host TM)
 * before it is handed to the JIT — without the target machine nothing vectorizes.
 * For testing another x86 machine kind on this one, $KILN_HOST_CPU replaces the CPU name and
 * $KILN_HOST_CPU_FEATURES is appended to the features (LLVM's syntax; later entries win:
 * `-avx512f` gives an AVX2-only target) when the options leave them unset; both are read at
 * create.
 *
 * Modules should be built in kiln_host_jit_context(jit); a module from another context is
 * moved into it through bitcode (slower, but correct). The context is not thread-safe:
 * callers serialize building modules in it with add_module/lookup (those two lock the JIT
 * internally, so concurrent add/lookup calls alone are fine).
 *
 * Dumps (KILN_DUMP_TO or options.dump_dir): `<name>.90-llvm-input.ll`, `<name>.92-llvm-opt.ll`,
 * `<name>.93-host-asm.s` for each module added. */
#ifndef KILN_COMPILER_BACKEND_HOST_JIT_H_
#define KILN_COMPILER_BACKEND_HOST_JIT_H_

#include <stddef.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "base/status.h"

typedef struct kiln_host_jit kiln_host_jit_t;

/* All fields optional (zeroed struct or NULL = defaults). */
typedef struct kiln_host_jit_options {
  const char *cpu;      /* NULL: LLVMGetHostCPUName() */
  const char *features; /* NULL: LLVMGetHostCPUFeatures() */
  const char *pipeline; /* NULL: "default<O3>" */
  const char *dump_dir; /* NULL: $KILN_DUMP_TO */
  /* Object-code cache (base/disk_cache.h, kind "host-objects"); NULL or "": none. Each module
   * added is keyed by its LLVM IR as given (before optimization), the triple, CPU, features,
   * pipeline and kiln's version; a hit adds the cached object file to the JIT and skips the
   * optimizer and code generation, a miss optimizes, emits the object file with the JIT's
   * target machine, stores it and adds it. Keying per module (one kernel each) rather than
   * per executable lets identical kernels of different programs share entries and makes a
   * key depend only on what determines the code. */
  const char *cache_dir;
} kiln_host_jit_options_t;

typedef struct kiln_host_jit_stats {
  size_t modules;   /* modules added */
  double opt_ms;    /* total time in LLVMRunPasses */
  double lookup_ms; /* total time in lookups (includes lazy code generation) */
  size_t cache_hits, cache_misses; /* object-code cache (options.cache_dir) */
} kiln_host_jit_stats_t;

/* Creates a JIT for the host. The caller owns *out (kiln_host_jit_destroy). */
kiln_status kiln_host_jit_create(const kiln_host_jit_options_t *opts, kiln_host_jit_t **out);

/* The LLVMContext modules for this JIT should be created in (borrowed; lives as long as the
 * JIT). */
LLVMContextRef kiln_host_jit_context(kiln_host_jit_t *jit);
/* CPU name and feature string of the JIT (borrowed). */
const char *kiln_host_jit_cpu(const kiln_host_jit_t *jit);
const char *kiln_host_jit_features(const kiln_host_jit_t *jit);
kiln_host_jit_stats_t kiln_host_jit_stats(kiln_host_jit_t *jit);

/* Verifies `m`, sets its triple and data layout to the JIT's, optimizes it and adds it to the
 * main JITDylib; code is generated on first lookup. Takes ownership of `m` in every case
 * (also on error). `name` names dumps (NULL: the module identifier). An invalid module is
 * INVALID_ARGUMENT; a symbol defined twice across modules is ALREADY_EXISTS. */
kiln_status kiln_host_jit_add_module(kiln_host_jit_t *jit, LLVMModuleRef m, const char *name);

/* Finds the address of `name` (an unmangled C name). NOT_FOUND naming the symbol when no
 * module defines it and the process does not export it; code generation or link failures
 * (e.g. a call to an unknown external) are reported with LLVM's message. */
kiln_status kiln_host_jit_lookup(kiln_host_jit_t *jit, const char *name, void **out_addr);

/* Releases the JIT, its code and its context. NULL is ignored. */
void kiln_host_jit_destroy(kiln_host_jit_t *jit);

#endif /* KILN_COMPILER_BACKEND_HOST_JIT_H_ */
