/* The runtime's process-wide options: which libraries it loads (the CUDA driver, NCCL, MPI,
 * a CBLAS for the host gemm) and the defaults every device is created with (its allocator,
 * its command-buffer cache). The runtime reads no environment variable: the edges (the PJRT
 * plugin, and the tools, benchmarks and tests through tools/common/) fill these from
 * KILN_ALLOCATOR, KILN_COMMAND_BUFFER_CACHE_SIZE, KILN_DISABLE_COMMAND_BUFFERS,
 * KILN_CUDA_DRIVER, KILN_NCCL_LIBRARY, KILN_MPI_LIBRARY, KILN_HOST_BLAS,
 * KILN_HOST_EPILOGUE_ISA and KILN_HOST_GEMM_HALF (plugin/env_options.h) before the runtime is
 * used.
 *
 * The libraries are loaded once per process, on first use: options set after that change
 * nothing for them. Device defaults apply to devices created after the call.
 *
 * Thread-safety: thread-safe (a lock around one process-wide copy). */
#ifndef KILN_RUNTIME_RUNTIME_OPTIONS_H_
#define KILN_RUNTIME_RUNTIME_OPTIONS_H_

#include <stdbool.h>
#include <stddef.h>

typedef struct kiln_runtime_options {
  /* Devices. */
  bool plain_allocator;             /* every allocation reaches the device (no caching pool) */
  size_t command_buffer_cache_size; /* entries per device; 0: 64 */
  bool no_command_buffers;          /* command-buffer thunks issue their commands directly */
  /* Libraries: a file name or path each; NULL or "": the default search. */
  const char *cuda_driver;  /* default libcuda.so.1, libcuda.so */
  const char *nccl_library; /* default libnccl.so.2, libnccl.so */
  const char *mpi_library;  /* default KILN_MPI_LIBRARY (mpi.c) */
  /* The host gemm's CBLAS: a library, "none" (the built-in C kernel); NULL: OpenBLAS, BLIS or
   * MKL, the first found. */
  const char *host_blas;
  /* The host gemm's variants: "base" picks the portable one (tests), NULL the fastest the
   * CPU runs; host_gemm_half also takes "panels". */
  const char *host_epilogue_isa;
  const char *host_gemm_half;
  /* Where f32 gemms run: "library" (the CBLAS library), "kernel" (kiln's packed-panel
   * kernel); NULL or anything else: auto (kiln_host_gemm_f32_kernel). */
  const char *host_gemm_f32;
  /* Executables loaded after: a per-thunk profile of their runs, a kiln_thunk_profile_mode_t
   * (runtime/thunk.h; 0: off, 1: per thunk, 2: per command of command buffers too;
   * kiln_executable_profile reads it). */
  int profile;
} kiln_runtime_options_t;

/* Replaces the process-wide options with a copy of `o` (strings copied; NULL: the defaults,
 * a zeroed struct). */
void kiln_runtime_options_set(const kiln_runtime_options_t *o);

/* The options in effect. The strings stay valid until the next kiln_runtime_options_set
 * (copies of one set are kept for the whole process, so pointers read before a later set stay
 * valid too). */
kiln_runtime_options_t kiln_runtime_options(void);

#endif /* KILN_RUNTIME_RUNTIME_OPTIONS_H_ */
