/* The environment, read at the edges: the PJRT plugin (its compiles, and GetPjrtApi for the
 * process-wide settings), and kiln-run, the other tools, the benchmarks and the tests through
 * tools/common/ (device_run.c, bench_module.c, and env_edge.c, which reads the process-wide
 * settings once when a program linking tools/common/ starts). Nothing below this layer reads
 * the environment (`getenv` in compiler/, runtime/, ffi/ or base/ fails the
 * `no_getenv_below_the_edges` test): every layer takes options, filled here.
 *
 * Strings point into the environment (valid until it changes) unless said otherwise.
 * Thread-safe (reads only), but for kiln_pjrt_process_options_from_env's setters, which are
 * thread-safe themselves. */
#ifndef KILN_PLUGIN_ENV_OPTIONS_H_
#define KILN_PLUGIN_ENV_OPTIONS_H_

#include <stdbool.h>

#include "compiler/backend/nvjitlink.h"
#include "compiler/codegen/fusion_kernel.h"
#include "compiler/passes/pass.h"
#include "compiler/thunks/compile.h"
#include "ffi/ffi_registry.h"
#include "runtime/runtime_options.h"

/* ---- one compile ---- */

/* Fills the fields of `o` that are still unset from the environment; fields already set are
 * kept:
 *   KILN_DUMP_TO=dir                  -> emit.dump_dir (every stage's dumps)
 *   KILN_COMMAND_BUFFER_MIN_RUN=N     -> command_buffer_min_run (N > 0)
 *   KILN_DISABLE_COMMAND_BUFFERS=1    -> no_command_buffers (any value but "" and "0")
 *   KILN_HOST_CPU, KILN_HOST_CPU_FEATURES, KILN_HOST_LLVM_PIPELINE
 *                                     -> emit.host_jit.cpu / .extra_features / .pipeline
 *   KILN_HOST_ORC_LINK=1              -> emit.host_jit.orc_link (kernels linked by ORC, not
 *                                        kiln's ELF loader: new ones and cached executables)
 *   KILN_ALLOW_EXCESS_PRECISION, XLA_FLAGS -> emit.strict_precision (see below)
 *   KILN_DETERMINISTIC_OPS=1, XLA_FLAGS -> emit.deterministic (see below)
 *   KILN_CUDA_DIR, CUDA_HOME, CUDA_PATH, PATH, TMPDIR -> emit.cuda (unset fields)
 * With o->passes NULL and `passes` non-NULL, *passes gets the defaults and what the
 * environment sets (kiln_pjrt_pass_options_from_env) and o->passes points at it; a caller
 * that sets o->passes itself fills it (e.g. with kiln_pjrt_pass_options_from_env). */
void kiln_pjrt_compile_options_from_env(kiln_compile_options_t *o, kiln_pass_options_t *passes);

/* Fills what `o` leaves unset:
 *   KILN_DUMP_TO=dir            -> dump_dir (when NULL)
 *   KILN_VERIFY_PASSES=0/1      -> verify (when -1)
 *   KILN_DISABLE_PASSES=a,b     -> disabled_passes (when NULL)
 *   KILN_GEMM_LIBRARY=none      -> no_gemm_library */
void kiln_pjrt_pass_options_from_env(kiln_pass_options_t *o);

/* Fills what `o` leaves unset: dump_dir (when NULL) from KILN_DUMP_TO; strict_precision
 * (kiln_pjrt_strict_precision_from_env); deterministic (kiln_pjrt_deterministic_from_env). For the
 * fusion runner and the tools that emit one fusion; whole-module compiles get the same through
 * kiln_pjrt_compile_options_from_env. */
void kiln_pjrt_codegen_options_from_env(kiln_codegen_compile_options_t *o);

/* True when KILN_ALLOW_EXCESS_PRECISION is 0 or false, or XLA_FLAGS holds
 * --xla_allow_excess_precision=false (or =0). */
bool kiln_pjrt_strict_precision_from_env(void);

/* True when KILN_DETERMINISTIC_OPS is set (not "" or "0"), or XLA_FLAGS holds
 * --xla_gpu_deterministic_ops=true or --xla_gpu_exclude_nondeterministic_ops=true (or =1):
 * no emitter combines results with atomics whose order varies (the host is deterministic
 * without it). */
bool kiln_pjrt_deterministic_from_env(void);

/* Fills the unset fields of `o`: dir from KILN_CUDA_DIR, home from CUDA_HOME, path from
 * CUDA_PATH, exec_path from PATH, tmp_dir from TMPDIR (empty values: unset). */
void kiln_pjrt_cuda_search_from_env(kiln_cuda_search_t *o);

/* ---- the process ---- */

/* The runtime's options from the environment (strings point into it):
 *   KILN_ALLOCATOR=plain|bfc           -> plain_allocator (another value: a warning, bfc)
 *   KILN_COMMAND_BUFFER_CACHE_SIZE=N   -> command_buffer_cache_size (N > 0)
 *   KILN_DISABLE_COMMAND_BUFFERS=1     -> no_command_buffers (any value but "" and "0")
 *   KILN_CUDA_DRIVER, KILN_NCCL_LIBRARY, KILN_MPI_LIBRARY -> cuda_driver, nccl_library,
 *                                          mpi_library
 *   KILN_HOST_BLAS, KILN_HOST_EPILOGUE_ISA, KILN_HOST_GEMM_HALF -> host_blas,
 *                                          host_epilogue_isa, host_gemm_half */
void kiln_pjrt_runtime_options_from_env(kiln_runtime_options_t *o);

/* Applies the process-wide settings the environment holds, once per process (later calls do
 * nothing): the runtime options above (kiln_runtime_options_set), KILN_LOG
 * (kiln_log_set_level), KILN_HOST_THREADS (kiln_host_pool_set_default_workers),
 * KILN_CACHE_MAX_BYTES (kiln_disk_cache_set_max_bytes), KILN_KERNEL_MEMORY_CACHE_BYTES
 * (kiln_kernel_cache_set_memory_limit), KILN_STABLEHLO_DUMP (kiln_stablehlo_set_dump) and
 * KILN_FFI_HANDLERS (kiln_ffi_registry_set_default_spec). */
void kiln_pjrt_process_options_from_env(void);

/* kiln_pjrt_process_options_from_env's work, every call (tests that change the environment
 * and want the settings read again). */
void kiln_pjrt_process_options_reread_env(void);

/* Whether this process was started by OpenMPI's mpirun (OMPI_COMM_WORLD_SIZE is set). */
bool kiln_pjrt_mpi_launched(void);

/* Loads the handler spec in environment variable `var` into `r` (errors say "in <var>");
 * unset or empty loads nothing. */
kiln_status kiln_pjrt_ffi_registry_load_env(kiln_ffi_registry_t *r, const char *var);

#endif /* KILN_PLUGIN_ENV_OPTIONS_H_ */
