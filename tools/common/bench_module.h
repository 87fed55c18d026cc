/* One HLO module compiled for the host, loaded and run repeatedly on buffers that stay
 * (for the benchmarks that time kiln's gemm and convolution paths against a library): the
 * module is compiled (optionally with no gemm library, the elemental path), loaded, one
 * stream created and each parameter allocated; the caller fills the parameters. Not
 * thread-safe: one thread uses one kiln_bench_module_t. */
#ifndef KILN_TOOLS_COMMON_BENCH_MODULE_H_
#define KILN_TOOLS_COMMON_BENCH_MODULE_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "runtime/device.h"
#include "runtime/executable.h"

#define KILN_BENCH_MODULE_MAX_PARAMS 4

typedef struct kiln_bench_module {
  kiln_executable_t *exe;
  kiln_stream_t *stream;
  kiln_devptr_t params[KILN_BENCH_MODULE_MAX_PARAMS];
  uint64_t sizes[KILN_BENCH_MODULE_MAX_PARAMS];
  int num_params;
  int gemms, kernels; /* gemm and kernel thunks the compile emitted */
} kiln_bench_module_t;

/* Compiles module `text` for the host (`elemental`: with KILN_GEMM_LIBRARY=none, every dot
 * and convolution a kernel), loads it on `dev` and allocates `num_params` parameters of
 * `sizes` bytes. On error *out holds what was made; kiln_bench_module_release frees it. */
kiln_status kiln_bench_module_load(kiln_device_t *dev, const char *text, bool elemental,
                                   int num_params, const uint64_t *sizes, kiln_bench_module_t *out);
/* One run (bind, run on the stream, wait); *ms its wall time. The output is freed. */
kiln_status kiln_bench_module_run(kiln_bench_module_t *k, double *ms);
void kiln_bench_module_release(kiln_device_t *dev, kiln_bench_module_t *k);

/* cblas_sgemm(order, transA, transB, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc). */
typedef void (*kiln_bench_sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
                                    const float *, int, float, float *, int);
/* OpenBLAS's cblas_sgemm to call directly (libopenblas.so.0 dlopen'ed into *handle, which
 * the caller dlcloses), its threads set to the host device's pool size (kiln's gemms set it to
 * one thread while their tiles run and restore this count after);
 * NULL (and *handle NULL) when OpenBLAS is not installed. */
kiln_bench_sgemm_fn kiln_bench_openblas_sgemm(const kiln_device_t *dev, void **handle);

#endif /* KILN_TOOLS_COMMON_BENCH_MODULE_H_ */
