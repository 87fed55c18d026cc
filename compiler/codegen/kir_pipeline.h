/* The kernel-IR pipeline (the emitter document's stages, DESIGN.md principle 2) and the
 * lowering of a KIR module to LLVM IR for NVPTX and for the host.
 *
 * Stages, each a function on a module, run in this order by kiln_kir_pipeline_run:
 *   1. inline     : subgraph calls are replaced by the callee's body, except calls to a
 *                   function called from two or more sites (those stay functions);
 *                   functions left without callers are removed.
 *   2. lower-loops: every `loop` becomes nested `for` ops (one per range symbol) with the
 *                   map results computed by apply_indexing, guarded by an `if` for the parts
 *                   of the domain (dim intervals, symbol-dependent constraints) that the
 *                   operands' known ranges do not already guarantee; checks that depend only
 *                   on dims are hoisted outside the symbol loops.
 *   3. flatten    : every tensor becomes 1-D (row-major); tensor indices become one
 *                   apply_indexing of the linearized, simplified map.
 *   4. vectorize  : in a `for` from 0 to N step 1 (N in {2, 4, 8, 16}), an extract / insert
 *                   whose flat index is `rest + iv` with `rest` a multiple of N (coefficients
 *                   and constant divisible by N) becomes one vload before the loop
 *                   (vextract inside) / a vinsert into a vector iteration argument and one
 *                   vstore after it.
 *   5. unroll     : `for` loops with constant bounds and at most `unroll_max_trip` trips are
 *                   replaced by copies of their body.
 *   6. hoist      : index arithmetic in an `if` branch that reads only values from outside
 *                   the `if` moves in front of it (kir_hoist.c says why).
 *   7. LLVM       : kiln_kir_lower_nvptx / kiln_kir_lower_host.
 *
 * Dumps: with KILN_DUMP_TO (or options.dump_dir) set, the module text after stage k is
 * written to `<dir>/<name>.5k-kir-<stage>.txt` (50-kir-input, 51-kir-inline, ...,
 * 55-kir-unroll, 56-kir-hoist) so the files sort in pipeline order before the backend's 90+ dumps.
 */
#ifndef KILN_COMPILER_CODEGEN_KIR_PIPELINE_H_
#define KILN_COMPILER_CODEGEN_KIR_PIPELINE_H_

#include <stdbool.h>
#include <stdint.h>

#include <llvm-c/Core.h>

#include "base/host_pool.h"
#include "base/status.h"
#include "compiler/backend/host_jit.h"
#include "compiler/backend/nvptx.h"
#include "compiler/codegen/kir.h"

/* ---- stages (kir_inline.c, kir_lower_loops.c, kir_flatten.c, kir_vectorize.c,
 * kir_unroll.c, kir_hoist.c). Each rewrites the module in place and leaves it verified. ---- */
kiln_status kiln_kir_inline(kiln_kir_module_t *m);
kiln_status kiln_kir_lower_loops(kiln_kir_module_t *m);
kiln_status kiln_kir_flatten(kiln_kir_module_t *m);
kiln_status kiln_kir_vectorize(kiln_kir_module_t *m);
kiln_status kiln_kir_unroll(kiln_kir_module_t *m, int max_trip);
kiln_status kiln_kir_hoist(kiln_kir_module_t *m);

typedef struct kiln_kir_pipeline_options {
  const char *dump_dir;  /* NULL: $KILN_DUMP_TO; no dumps when neither is set */
  const char *dump_name; /* file stem; NULL: the module name */
  bool no_vectorize;     /* skip stage 4 */
  int unroll_max_trip;   /* 0: 8; negative: skip stage 5 */
} kiln_kir_pipeline_options_t;

/* Runs stages 1-6 on `m` in place, verifying before and after each, dumping as above. */
kiln_status kiln_kir_pipeline_run(kiln_kir_module_t *m, const kiln_kir_pipeline_options_t *opts);

/* ---- lowering to LLVM (kir_to_llvm.c: NVPTX; kir_to_llvm_host.c: host) ----
 *
 * Both take a module after the pipeline (loops lowered; flattening is not required) with one
 * KERNEL function; remaining subgraph functions become internal LLVM functions.
 *
 * NVPTX: `void <kernel>(ptr noalias align 16 p0, ...)` with LLVMPTXKernelCallConv, one pointer
 * per tensor parameter (index / scalar parameters are not allowed in kernels); ids from
 * llvm.nvvm.read.ptx.sreg.*, barrier as llvm.nvvm.barrier0, shuffles as
 * llvm.nvvm.shfl.sync.*, shared tensors as addrspace(3) globals, atomics as atomicrmw /
 * cmpxchg loops, float math as libdevice __nv_* calls. Index arithmetic is i32 when every
 * tensor and the launch grid fit in 2^31 - 1, i64 otherwise.
 *
 * Host: `void <kernel>(void **args, int64_t block_begin, int64_t block_end)`: args[i] is the
 * base pointer of tensor parameter i; blocks [block_begin, block_end) (linearized x fastest)
 * run one after another. Within a block the kernel body runs as phases separated by barriers
 * and shuffles, each phase as thread loops (one loop per block dimension, x innermost);
 * values that cross a phase (or a thread-loop segment) live in per-thread slot arrays; a
 * top-level `if` on a thread-range predicate (tid < c, tid == c, (tid & (2^k-1)) == 0, and
 * conjunctions of these) becomes its own thread loop with those bounds and step. Barriers
 * and shuffles must be at the top level of the kernel body (UNIMPLEMENTED otherwise).
 * f32 math is inline polynomial code (vectorizable); f64 math calls libm. */
kiln_status kiln_kir_lower_nvptx(const kiln_kir_module_t *m, LLVMContextRef ctx,
                                 LLVMTargetMachineRef tm, LLVMModuleRef *out);
kiln_status kiln_kir_lower_host(const kiln_kir_module_t *m, LLVMContextRef ctx,
                                LLVMModuleRef *out);
/* The same for a target with LLVM's CPU feature string `features` ("+avx2,-avx512f,...", later
 * entries win; NULL: this host's, LLVMGetHostCPUFeatures). Shared tiles of 8/16-bit elements
 * (up to 16384) hold each element in a 32-bit slot where the target has AVX-512F: there the
 * vectorized thread loops read a tile's column with 32-bit gathers (x86 has no narrower
 * ones; bf16[4096,4096] transpose 0.45x -> ~0.85x of the C 16-bit tile loop on a Zen 5).
 * Elsewhere the tile keeps the element type: on an AVX2 Zen 3, whose gathers LLVM does not
 * use, the 32-bit slots were moved one element at a time (0.66-0.70x the C loop; the narrow
 * tile 1.03-1.14x). kiln_kir_lower_host is this with the host's features. */
kiln_status kiln_kir_lower_host_for(const kiln_kir_module_t *m, LLVMContextRef ctx,
                                    const char *features, LLVMModuleRef *out);

/* Lowers `m` to NVPTX and compiles it (kiln_nvptx_compile with `opts`, arch sm_90 when not
 * given). `out` as for kiln_nvptx_compile (always initialized; free it). */
kiln_status kiln_kir_compile_nvptx(const kiln_kir_module_t *m, const kiln_nvptx_options_t *opts,
                                   kiln_nvptx_result_t *out);

/* A kernel compiled for the host. */
typedef struct kiln_kir_host_kernel {
  kiln_host_kernel_fn fn;
  int64_t num_blocks;    /* grid x * y * z */
  size_t num_params;     /* tensor parameters = entries of args */
  char name[64];
  char symbol[64]; /* the JIT symbol fn is (kiln_kir_kernel_symbol) */
  int unique;      /* the first kernel of the batch with the same code (itself if none) */
  /* With options.keep_objects, on the unique kernel only: the object file linked (owned;
   * kiln_kir_host_kernels_free). */
  void *object;
  size_t object_size;
} kiln_kir_host_kernel_t;

/* ---- compiling several kernels (kir_compile.c) ----
 *
 * The kernels of one executable are compiled together:
 *   1. each module gets a content key: its text with functions named by position, excess
 *      precision and the host loop hint; modules with equal content keys are one kernel,
 *      compiled once, under the symbol "kiln_<content key in hex>" (kiln_kir_kernel_symbol);
 *      its cache key (compiler/backend/kernel_cache.h) adds the target (host: triple, CPU,
 *      features, LLVM pipeline; NVPTX: arch, features, pipeline, ftz, cubin tool), LLVM's
 *      and kiln's versions;
 *   2. each distinct kernel is looked up in the kernel cache (memory, then disk under
 *      options.cache_dir), unless dumps are on (KILN_DUMP_TO: every kernel is compiled so
 *      that its LLVM dumps are written);
 *   3. misses are lowered to LLVM IR one after another, each into an LLVMContext of its own,
 *      then optimized and code-generated (host: an object file; NVPTX: PTX and the cubin
 *      through nvJitLink/ptxas) on a pool of workers (kiln_host_pool: options.num_threads,
 *      0 = KILN_HOST_THREADS or the cores), and stored in the cache;
 *   4. host: the objects are added to the JIT and their symbols looked up.
 * The code does not depend on the number of workers (test_kernel_cache compares). */
typedef struct kiln_kir_batch_options {
  const char *cache_dir; /* the kernel cache's disk level; NULL or "": memory only */
  int num_threads;       /* workers for the misses: 0 = the pool's default, 1 = this thread */
  bool keep_objects;     /* host: hand each distinct kernel's object file back (serialization) */
} kiln_kir_batch_options_t;

typedef struct kiln_kir_batch_stats {
  int kernels;                          /* modules given */
  int unique;                           /* distinct keys among them */
  int memory_hits;                      /* distinct kernels found in the memory cache */
  int disk_hits;                        /* ... on disk */
  int compiled;                         /* ... compiled */
  int small_tier;                       /* ... of them on the host's small tier */
  /* Host: the modules given whose kernel is small-tier code, whether compiled now or found in
   * the cache (then compiled on that tier before: the tier follows from the kernel's content
   * and the JIT's pipeline setting, both in the cache key). Counted like `kernels`. */
  int small_tier_kernels;
  int threads;                          /* workers that compiled them */
  double lower_ms, compile_ms, link_ms; /* wall time per step */
} kiln_kir_batch_stats_t;

/* The symbol module `m`'s kernel is compiled under by the batch functions below. */
void kiln_kir_kernel_symbol(const kiln_kir_module_t *m, char out[64]);

/* Compiles `n` modules for the host into `jit`; out[i] gets module i's entry point (name:
 * the module's kernel name). `opts` and `stats` may be NULL. */
kiln_status kiln_kir_compile_host_batch(const kiln_kir_module_t *const *mods, size_t n,
                                        kiln_host_jit_t *jit, const kiln_kir_batch_options_t *opts,
                                        kiln_kir_host_kernel_t *out, kiln_kir_batch_stats_t *stats);

/* Whether host kernel module `m` is small: straight-line (no loop or shared tile left in it,
 * nor in what it calls) with at most KILN_HOST_SMALL_KERNEL_WORK work items. The batch compiles
 * small kernels on the small tier (kiln_host_jit_compile_small_object) when the JIT allows it
 * (kiln_host_jit_small_tier; the cache key says which). A function of the kernel's content. */
bool kiln_kir_host_small_kernel(const kiln_kir_module_t *m);

/* Frees the objects kept by keep_objects (the kernels themselves live in the JIT). */
void kiln_kir_host_kernels_free(kiln_kir_host_kernel_t *k, size_t n);

/* One module: kiln_kir_compile_host_batch of one (the memory cache applies). */
kiln_status kiln_kir_compile_host(const kiln_kir_module_t *m, kiln_host_jit_t *jit,
                                  kiln_kir_host_kernel_t *out);

/* A kernel compiled for NVPTX. */
typedef struct kiln_kir_gpu_kernel {
  void *image; /* cubin, or PTX text with its NUL when no cubin tool was found (owned) */
  size_t size;
  char symbol[64]; /* the kernel's entry point in the image */
  int unique;      /* the first module of the batch with the same code (itself if none) */
} kiln_kir_gpu_kernel_t;

/* Compiles `n` modules for NVPTX with `nvptx` (NULL: defaults); out[i] for module i (free
 * with kiln_kir_gpu_kernels_free, also after an error). */
kiln_status kiln_kir_compile_nvptx_batch(const kiln_kir_module_t *const *mods, size_t n,
                                         const kiln_nvptx_options_t *nvptx,
                                         const kiln_kir_batch_options_t *opts,
                                         kiln_kir_gpu_kernel_t *out, kiln_kir_batch_stats_t *stats);
void kiln_kir_gpu_kernels_free(kiln_kir_gpu_kernel_t *k, size_t n);

/* Runs a host kernel over all its blocks on `pool` (NULL: the calling thread only). */
kiln_status kiln_kir_host_kernel_run(const kiln_kir_host_kernel_t *k, kiln_host_pool_t *pool,
                                     void **args);

#endif /* KILN_COMPILER_CODEGEN_KIR_PIPELINE_H_ */
