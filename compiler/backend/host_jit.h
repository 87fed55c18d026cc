/* Host backend: LLVM modules -> machine code in this process, through ORC LLJIT.
 *
 * One kiln_host_jit_t is one LLJIT with one main JITDylib that also resolves symbols of
 * the process (libm, libc), so JIT'd code may call tanhf, memcpy, ... The target machine is
 * the host's own: CPU name and features come from LLVMGetHostCPUName/Features (AVX2 and
 * AVX-512 get used), and every module is optimized with LLVMRunPasses(pipeline, host TM)
 * before it is handed to the JIT — without the target machine nothing vectorizes.
 * For testing another x86 machine kind on this one, options.cpu replaces the CPU name and
 * options.extra_features is appended to the features (LLVM's syntax; later entries win:
 * `-avx512f` gives an AVX2-only target); the edges (plugin/env_options.h: the plugin, kiln-run,
 * the tools) fill them from $KILN_HOST_CPU and $KILN_HOST_CPU_FEATURES. This layer reads no
 * environment.
 *
 * Modules should be built in kiln_host_jit_context(jit); a module from another context is
 * moved into it through bitcode (slower, but correct). The context is not thread-safe:
 * callers serialize building modules in it with add_module/lookup (those two lock the JIT
 * internally, so concurrent add/lookup calls alone are fine).
 *
 * Two ways in: kiln_host_jit_add_module (IR; optimized under the JIT's lock, code generated
 * at the first lookup), or kiln_host_jit_compile_object + kiln_host_jit_add_object: the
 * first optimizes and generates an object file with a target machine of its own, so several
 * threads compile modules (each in its own LLVMContext) at once; the objects are then added.
 * Compiled objects are what the per-kernel cache stores (kernel_cache.h).
 *
 * Dumps (options.dump_dir): `<name>.90-llvm-input.ll`, `<name>.92-llvm-opt.ll`,
 * `<name>.93-host-asm.s` for each module added. */
#ifndef KILN_COMPILER_BACKEND_HOST_JIT_H_
#define KILN_COMPILER_BACKEND_HOST_JIT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "base/status.h"
#include "base/str.h"

typedef struct kiln_host_jit kiln_host_jit_t;

/* The host pipeline, chosen by measurement (bench_compile --pipelines: compile time and the
 * kernels' run time per candidate on the corpus's cpu benchmark modules). */
#define KILN_HOST_JIT_DEFAULT_PIPELINE "default<O3>"

/* All fields optional (zeroed struct or NULL = defaults). */
typedef struct kiln_host_jit_options {
  /* Options only: the edges (plugin/env_options.h) fill them from KILN_HOST_CPU,
   * KILN_HOST_CPU_FEATURES, KILN_HOST_LLVM_PIPELINE and KILN_DUMP_TO. */
  const char *cpu;            /* NULL: LLVMGetHostCPUName() */
  const char *features;       /* NULL: LLVMGetHostCPUFeatures() (with extra_features) */
  const char *extra_features; /* appended to the host's features, e.g. "-avx512f" */
  const char *pipeline;       /* NULL: KILN_HOST_JIT_DEFAULT_PIPELINE */
  const char *dump_dir;       /* NULL: no dumps */
  /* The JIT only links object files (kiln_host_jit_add_object; kiln_host_jit_add_module is
   * INVALID_ARGUMENT): its LLJIT takes the host as LLVM detects it instead of a target machine
   * made here (linking does not use one; the objects were compiled for the cpu/features
   * above), which spares a target machine per JIT. */
  bool objects_only;
  /* kiln_host_link_objects (cached executables) and kiln_host_jit_link (freshly compiled
   * kernels) link with ORC only, not with kiln's own ELF loader (host_elf.h) first. The edges set
   * it from $KILN_HOST_ORC_LINK=1 (for comparing the two); it does not change code, so it is not
   * part of kiln_host_jit_target_id. */
  bool orc_link;
} kiln_host_jit_options_t;

typedef struct kiln_host_jit_stats {
  size_t modules;    /* modules added */
  double opt_ms;     /* total time in LLVMRunPasses */
  double lookup_ms;  /* total time in lookups (includes lazy code generation) */
  double codegen_ms; /* kiln_host_jit_compile_object: object emission (summed over threads) */
} kiln_host_jit_stats_t;

/* Creates a JIT for the host. The caller owns *out (kiln_host_jit_destroy). */
kiln_status kiln_host_jit_create(const kiln_host_jit_options_t *opts, kiln_host_jit_t **out);

/* Appends a string that identifies the code a JIT made with `opts` (NULL: defaults) would
 * compile, without making one (cache keys): on x86-64 "host|triple|cpu=|features=|extra=|
 * cpuid=|pipeline", the host's CPU name and features given by what LLVM derives them from (the
 * raw CPUID leaves and XCR0, read once per process: no LLVM call, so a process that only links
 * cached objects never touches libLLVM; LLVM's version is in every key besides); elsewhere
 * "host|triple|cpu|features|pipeline" as LLVM reports them; both end in "|small-tier" when
 * the pipeline is not set (kiln_host_jit_small_tier). */
void kiln_host_jit_target_id(const kiln_host_jit_options_t *opts, kiln_strbuf_t *out);

/* The LLVMContext modules for this JIT should be created in (borrowed; lives as long as the
 * JIT). */
LLVMContextRef kiln_host_jit_context(kiln_host_jit_t *jit);
/* CPU name and feature string of the JIT (borrowed). */
const char *kiln_host_jit_cpu(const kiln_host_jit_t *jit);
const char *kiln_host_jit_features(const kiln_host_jit_t *jit);
/* Whether LLVM feature `name` ("avx512f") is on in the feature string `features`
 * (comma-separated "+x" / "-x", as kiln_host_jit_features gives; the last mention wins). */
bool kiln_host_feature_on(const char *features, const char *name);
const char *kiln_host_jit_triple(const kiln_host_jit_t *jit);
const char *kiln_host_jit_pipeline(const kiln_host_jit_t *jit);
/* Whether the JIT's kernels may take the small tier (kiln_host_jit_compile_small_object): its
 * pipeline was not set (options.pipeline NULL or empty; the edges fill it from
 * KILN_HOST_LLVM_PIPELINE). A pipeline set, even "default<O3>", applies to every kernel. */
bool kiln_host_jit_small_tier(const kiln_host_jit_t *jit);
/* The folder dumps go to, or NULL when there are none. */
const char *kiln_host_jit_dump_dir(const kiln_host_jit_t *jit);
kiln_host_jit_stats_t kiln_host_jit_stats(kiln_host_jit_t *jit);

/* Verifies `m`, sets its triple and data layout to the JIT's, optimizes it and adds it to the
 * main JITDylib; code is generated on first lookup. Takes ownership of `m` in every case
 * (also on error). `name` names dumps (NULL: the module identifier). An invalid module is
 * INVALID_ARGUMENT; a symbol defined twice across modules is ALREADY_EXISTS. */
kiln_status kiln_host_jit_add_module(kiln_host_jit_t *jit, LLVMModuleRef m, const char *name);

/* Compiles `m` (any LLVMContext that no other thread uses meanwhile) to an object file for
 * the JIT's target: verify, triple and data layout, dumps as add_module, the JIT's pipeline,
 * code generation with a target machine of the JIT's that no other call uses meanwhile (made
 * for the call, kept for the next one). *obj (kiln_malloc'ed, the caller
 * frees it) / *obj_len. Consumes `m` in every case. Thread-safe: call it from several threads
 * at once; adds nothing to the JIT. */
kiln_status kiln_host_jit_compile_object(kiln_host_jit_t *jit, LLVMModuleRef m, const char *name,
                                         void **obj, size_t *obj_len);
/* The same for a small kernel (kir_compile.c decides which are): KILN_HOST_JIT_SMALL_PIPELINE
 * instead of the JIT's pipeline, and code generation at LLVM's lowest level (fast instruction
 * selection and register allocation) instead of its highest. LLVM's O3 (or O1) passes and full
 * code generation were 5-8 ms of a one-kernel module's ~9 ms cold compile; this tier takes
 * 2-3 ms. Its code is scalar and plainly allocated: for a kernel of a few dozen elements that
 * costs well under a microsecond per launch (the corpus's while loops of such kernels ran as
 * fast as with O3), but a 4,096-element GELU ran 21-33 us against 17 us, hence the small bound
 * on the work (KILN_HOST_SMALL_KERNEL_WORK). Results are the same: only the pipeline changes,
 * not the IR's semantics (llvm.fmuladd fuses on both tiers). */
kiln_status kiln_host_jit_compile_small_object(kiln_host_jit_t *jit, LLVMModuleRef m,
                                               const char *name, void **obj, size_t *obj_len);
/* The small tier's passes, one walk of the call graph from the leaves up: mark what each
 * function reads and writes (function-attrs), inline calls into it (LLVM's cost model; the
 * kernel body into its entry), then merge repeated computations (early CSE), combine and
 * simplify the CFG. The elemental code is a function per instruction read at another index,
 * and one that several instructions read is called by each: a chain of rounds that each read
 * the one before at two places (a threefry hash unrolled) would otherwise call 2^rounds times
 * per element (session 44; until then such kernels went to the full tier, found by their call
 * depth, and a lone unrolled threefry cost 30-40 ms of O3 there, 10-14 ms here).
 * (instcombine's fixpoint check aborts the process in some LLVM builds; this is a one-pass
 * cleanup, so it is off.) */
#define KILN_HOST_JIT_SMALL_PIPELINE                                                        \
  "cgscc(function-attrs,inline,function(early-cse<memssa>,instcombine<no-verify-fixpoint>," \
  "simplifycfg))"
/* The largest launch (work items: threads x blocks) a straight-line kernel may have to be
 * compiled on the small tier. Measured on the corpus (scripts/compile-vs-baseline.sh and the
 * run times of its while-loop modules): 4,096 made loops of small kernels run 2-5x slower than
 * O3 (unvectorized), 128 still 1.4-1.8x on the Cholesky loops, 64 as fast as O3. */
#define KILN_HOST_SMALL_KERNEL_WORK 64
/* Call before starting threads that run kiln_host_jit_compile_object (`full`) or
 * kiln_host_jit_compile_small_object (`small`): for each tier asked whose first compile in
 * this process has not run yet, compiles an empty module on this thread, so LLVM's lazily
 * created globals (timer groups, option registries, the tier's code generator) exist before
 * those threads start, rather than being created by whichever thread comes first without
 * synchronization a race detector can see. (Without it the process's first compile of a tier
 * runs alone under a mutex and makes them; the others wait for it: correct, but the first
 * kernel of a batch then compiles before the rest start.) */
void kiln_host_jit_prepare_threads(kiln_host_jit_t *jit, bool full, bool small);

/* Adds an object file (copied) to the main JITDylib under `name`; a second object under a
 * name already added is skipped (the kernel compiler names objects by their content key). A
 * symbol defined twice by different objects is ALREADY_EXISTS. */
kiln_status kiln_host_jit_add_object(kiln_host_jit_t *jit, const void *data, size_t len,
                                     const char *name);

/* Links `n` object files (objects[i] of sizes[i] bytes, each defining symbols[i], distinct
 * names; read, not kept) into the JIT's code and sets addrs[i] to symbols[i]'s address: with
 * kiln's own ELF loader (host_elf.h), the image kept until kiln_host_jit_destroy (no LLJIT is
 * made for it: a fresh process's first ORC link costs ~5 M instructions of LLVM start-up);
 * with `orc_link`, or when the loader refuses the objects, as kiln_host_jit_add_object +
 * kiln_host_jit_lookup. Thread-safe. */
kiln_status kiln_host_jit_link(kiln_host_jit_t *jit, const void *const *objects,
                               const size_t *sizes, const char *const *symbols, int n,
                               void **addrs);

/* Finds the address of `name` (an unmangled C name). NOT_FOUND naming the symbol when no
 * module defines it and the process does not export it; code generation or link failures
 * (e.g. a call to an unknown external) are reported with LLVM's message. */
kiln_status kiln_host_jit_lookup(kiln_host_jit_t *jit, const char *name, void **out_addr);

/* What kiln_host_link_objects made: `owner` keeps the code alive (free it with owner_free);
 * `elf` whether kiln's ELF loader linked it (else an objects-only JIT did). */
typedef struct kiln_host_linked {
  void *owner;
  void (*owner_free)(void *);
  bool elf;
} kiln_host_linked_t;

/* Links `n` object files (objects[i] of sizes[i] bytes, each defining symbols[i]; objects with
 * a symbol seen before are skipped as the same object) and sets addrs[i] to symbols[i]'s
 * address: with kiln's own loader (host_elf.h: no LLVM, no JIT), and when it refuses (a
 * relocation, section or host it does not handle, or any other error) with a new
 * objects-only JIT as kiln_host_jit_add_object + kiln_host_jit_lookup do, whose error, if
 * that fails too, is returned. `orc_only`: the JIT alone. Thread-safe. */
kiln_status kiln_host_link_objects(const void *const *objects, const size_t *sizes,
                                   const char *const *symbols, int n, bool orc_only, void **addrs,
                                   kiln_host_linked_t *out);

/* This process's kiln_host_link_objects calls: linked by the ELF loader, by the JIT because it
 * was asked to (orc_only), by the JIT after the loader refused (fallbacks). */
typedef struct kiln_host_link_counters {
  int64_t elf, orc, fallbacks;
} kiln_host_link_counters_t;
kiln_host_link_counters_t kiln_host_link_counters(void);

/* Releases the JIT, its code and its context. NULL is ignored. */
void kiln_host_jit_destroy(kiln_host_jit_t *jit);

#endif /* KILN_COMPILER_BACKEND_HOST_JIT_H_ */
