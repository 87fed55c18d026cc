/* Thunk emission: a scheduled, fused, buffer-assigned module -> an executable description
 * (runtime/executable.h): allocations, parameter and output bindings, kernel images, and
 * the thunk sequence, in the schedule's order.
 *
 * Per instruction of a sequential computation (the entry, while bodies/conditions,
 * conditional branches, called computations):
 *   parameter, constant, tuple, get-tuple-element, bitcast, after-all  no thunk (buffer
 *       assignment gives them the slices of the values they hold);
 *   fusion          its kernel, or chain of kernels (kiln_codegen_kernel_emit), compiled for
 *                   the target, launched with the fusion's operand slices then its output
 *                   leaves' slices, then its scratch tensors' (a temporary allocation of the
 *                   kernel's own, made here; the long stable sort's merge buffers);
 *                   constants inside the fusion become constant allocations;
 *   dot             a gemm thunk when kiln_fusion_wrapper_is_gemm accepts it (other dots
 *                   are fusions by then);
 *   copy            a device-to-device copy when source and destination store the same
 *                   physical order (a layout-changing copy is a fusion by then);
 *   copy-start/-done, add-dependency, domain, opt-barrier: copies of operand leaves
 *                   to output leaves where the slices differ;
 *   all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute, collective-
 *                   broadcast (and the -start forms)  a collective thunk with every
 *                   participant's group resolved (collective_emitter.h); the -done ops copy
 *                   the start's result part where the slices differ;
 *   partition-id, replica-id  a memset to 0 on one participant, else a collective thunk
 *                   writing the participant's id;
 *   rng-get-and-update-state  a host callback writing the executable's 128-bit generator
 *                   state (XLA's initial value + rng_seed; one state shared by every such
 *                   instruction of the executable) and advancing it by `delta`; as in XLA
 *                   the state carries over from one execution to the next (concurrent
 *                   executions take it under a mutex: each call gets its own value);
 *   while           a while thunk (condition sequence, pred read back, body sequence),
 *                   with copies where the init, body parameter/root or condition parameter
 *                   slices differ from the while's;
 *   conditional     a conditional thunk over the branch sequences, with copies in and out;
 *   call            the callee's sequence inline, with copies in and out;
 *   custom-call     a handler from the FFI registry for the target's platform (Host / CUDA):
 *                   typed XLA FFI (api_version=API_VERSION_TYPED_FFI, or not written with a
 *                   typed handler), its backend_config decoded into attributes here (a
 *                   malformed dictionary is an error naming the custom call and the
 *                   position), or legacy (api_version 1-3, a handler registered as legacy,
 *                   backend_config passed as the opaque string); operand and result leaves
 *                   flattened, depth first; output_to_operand_aliasing is buffer
 *                   assignment's (the aliased result shares its operand's slice). No handler:
 *                   NOT_FOUND "no handler for target X on platform Y (register one with
 *                   KILN_FFI_HANDLERS=... or kiln-run --ffi=...)";
 *   anything else   UNIMPLEMENTED naming the instruction.
 *
 * Kernels are compiled together once every thunk is emitted (kiln_kir_compile_*_batch:
 * identical kernels once, the per-kernel cache in memory and on disk under
 * `kernel_cache_dir`, misses on a pool of workers). Targets: HOST compiles every kernel into
 * one ORC JIT (kept alive by the description) and emits one image with all functions (the
 * kernels' own names); CUDA compiles each distinct kernel to a cubin (nvJitLink or ptxas;
 * kiln_nvptx_compile) and emits one image per distinct kernel, whose entry is
 * kiln_kir_kernel_symbol's name. */
#ifndef KILN_COMPILER_THUNKS_THUNK_EMITTER_H_
#define KILN_COMPILER_THUNKS_THUNK_EMITTER_H_

#include <stdint.h>

#include "base/status.h"
#include "compiler/backend/host_jit.h"
#include "compiler/backend/nvjitlink.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/buffer_assignment.h"
#include "ffi/ffi_registry.h"
#include "runtime/executable.h"

typedef enum kiln_compile_target {
  KILN_TARGET_HOST = 0,
  KILN_TARGET_CUDA = 1,
} kiln_compile_target_t;

typedef struct kiln_thunk_emit_options {
  kiln_compile_target_t target;
  const char *arch;             /* CUDA: "sm_90" when NULL */
  const char *dump_dir;         /* NULL: no dumps (the edges pass $KILN_DUMP_TO) */
  int64_t max_while_iterations; /* 0: unbounded */
  uint64_t rng_seed;            /* rng-get-and-update-state starts at XLA's initial value + this */
  bool strict_precision;        /* round every bf16 op (kiln_codegen_compile_options_t) */
  bool deterministic;           /* no order-varying atomics (kiln_codegen_compile_options_t) */
  /* CUDA: the target's gemm library is cuBLASLt, known when compiling (never probed at run
   * time): bf16/f16 dots become gemm thunks and gemm epilogues fuse (the compile driver sets
   * kiln_pass_options_t.gemm_cublaslt from it). Off: classic cuBLAS, f32/f64, no epilogues. */
  bool cublaslt;
  const char
      *kernel_cache_dir; /* the kernel cache's disk level (kernel_cache.h); NULL: memory only */
  /* Where custom-call handlers are looked up (borrowed). NULL: the process-wide registry
   * (kiln_ffi_registry_default), loaded once with the default spec on first use (the edges'
   * $KILN_FFI_HANDLERS, kiln_ffi_registry_set_default_spec). */
  kiln_ffi_registry_t *ffi_registry;
  /* The SPMD world the collectives' groups are resolved for (collective_emitter.h): both
   * >= 1, or 0: the module's (kiln_eval_spmd_world_size: replica_count, num_partitions and
   * the ids its groups name). */
  int num_replicas, num_partitions;
  /* Every async collective pair runs whole at its start (no overlap at run time; off: a pair
   * the runtime can split is, runtime/collective_thunk.h). For comparisons (bench_collectives). */
  bool synchronous_collectives;
  /* Host: the JIT's CPU, features and LLVM pipeline (dump_dir: this struct's dump_dir). */
  kiln_host_jit_options_t host_jit;
  /* CUDA: where the toolkit (libdevice, nvJitLink, ptxas) is found (zeroed: the standard
   * search; the edges pass $KILN_CUDA_DIR, $CUDA_HOME, $CUDA_PATH, $PATH, $TMPDIR). */
  kiln_cuda_search_t cuda;
} kiln_thunk_emit_options_t;

typedef struct kiln_thunk_emit_stats {
  int kernels;  /* kernel thunks (a chain counts each launch) */
  int fusions;  /* fusions compiled */
  int gemms, copies, memsets, loops, conditionals;
  int gemm_epilogues; /* gemm thunks carrying a fused epilogue (alpha, C, bias, activation) */
  int constants; /* constant allocations made for constants inside fusions */
  int custom_calls;  /* FFI custom-call thunks (typed and legacy) */
  int collectives;   /* collective thunks (and replica-id / partition-id on several devices) */
  double codegen_ms; /* fusion -> kernel IR pipeline */
  double backend_ms; /* kernel IR -> machine code / cubin (every kernel together) */
  int distinct_kernels;  /* kernels with distinct code (identical ones compile once) */
  int kernels_compiled;  /* distinct kernels not found in the kernel cache */
  int kernel_cache_hits; /* distinct kernels found in it (memory or disk) */
  int compile_threads;   /* workers that compiled them */
  /* Host: kernel thunks whose code is the JIT's small tier's, compiled now or found in the
   * kernel cache (kiln_kir_batch_stats_t.small_tier_kernels) */
  int small_tier_kernels;
} kiln_thunk_emit_stats_t;

/* Emits `m` (scheduled; `ba` its buffer assignment). *out is owned by the caller
 * (kiln_executable_desc_destroy, or give it to kiln_executable_load). `stats` may be NULL. */
kiln_status kiln_thunk_emit_module(const kiln_hlo_module_t *m, const kiln_buffer_assignment_t *ba,
                                   const kiln_thunk_emit_options_t *opts,
                                   kiln_executable_desc_t **out, kiln_thunk_emit_stats_t *stats);

#endif /* KILN_COMPILER_THUNKS_THUNK_EMITTER_H_ */
