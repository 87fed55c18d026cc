/* GPU gemm through cuBLASLt, dlopen'ed (libcublasLt.so.13, then .so.12), with kiln's own
 * declarations of the few types and constants it uses (no cuBLAS header is needed to build).
 *
 * A kiln_gemm_desc_t (row-major, batched, contiguous) becomes a plan: cuBLASLt's
 * column-major view computes C^T = op(B)^T op(A)^T, so cuBLASLt's A is kiln's B and the
 * other way round, nothing is transposed in memory, and every matrix of the batch is one
 * stride after the previous one. Element types (A/B -> C, compute type, scale type):
 *   f32 -> f32 (COMPUTE_32F; COMPUTE_32F_FAST_TF32 when the options allow TF32), f64 -> f64
 *   (64F), c64 / c128 (32F / 64F, complex scale), bf16 / f16 -> bf16 / f16 / f32 (32F),
 *   s8 -> s32 (32I), and fp8 (e4m3 or e5m2 operands, not both e5m2) -> bf16 / f16 / f32
 *   (32F, with per-tensor scale pointers for A, B and D), which cuBLASLt takes only in "TN"
 *   form: kiln's trans_a false, trans_b true, k a multiple of 16.
 *
 * The descriptor's epilogue maps onto CUBLASLT_EPILOGUE_*: a bias (kiln's per-column vector
 * of n elements is cuBLASLt's vector along D's n rows, the same for every batch: batch
 * stride 0) gives BIAS, RELU_BIAS or GELU_BIAS (its type CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
 * C's type; its address CUBLASLT_MATMUL_DESC_BIAS_POINTER, set before the heuristic, which
 * reads its alignment), none DEFAULT, RELU or GELU (cuBLASLt's GELU is the tanh form).
 * alpha and beta are the host scalars of the scale type; beta 1 adds the C that the caller
 * left in the output.
 *
 * The algorithm is chosen once per plan by cublasLtMatmulAlgoGetHeuristic and cached
 * (KILN_CUBLASLT_CACHE_SIZE plans per device, the oldest replaced); the workspace is one
 * device buffer per device, allocated on first use.
 *
 * Thread-safety: the plan functions are pure. kiln_cublaslt_gemm takes the device's mutex
 * around the library's handle, the cache and the workspace. */
#ifndef KILN_RUNTIME_CUDA_CUBLASLT_H_
#define KILN_RUNTIME_CUDA_CUBLASLT_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/device.h"

/* cudaDataType_t values (library_types.h). */
enum {
  KILN_CUDA_R_32F = 0,
  KILN_CUDA_R_64F = 1,
  KILN_CUDA_R_16F = 2,
  KILN_CUDA_R_8I = 3,
  KILN_CUDA_C_32F = 4,
  KILN_CUDA_C_64F = 5,
  KILN_CUDA_R_32I = 10,
  KILN_CUDA_R_16BF = 14,
  KILN_CUDA_R_8F_E4M3 = 28,
  KILN_CUDA_R_8F_E5M2 = 29,
};

/* cublasComputeType_t values (cublas_api.h). */
enum {
  KILN_CUBLAS_COMPUTE_32F = 68,
  KILN_CUBLAS_COMPUTE_64F = 70,
  KILN_CUBLAS_COMPUTE_32I = 72,
  KILN_CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
};

enum { KILN_CUBLAS_OP_N = 0, KILN_CUBLAS_OP_T = 1 };

/* cublasLtEpilogue_t values (cublasLt.h). */
enum {
  KILN_CUBLASLT_EPILOGUE_DEFAULT = 1,
  KILN_CUBLASLT_EPILOGUE_RELU = 2,
  KILN_CUBLASLT_EPILOGUE_BIAS = 4,
  KILN_CUBLASLT_EPILOGUE_RELU_BIAS = 6,
  KILN_CUBLASLT_EPILOGUE_GELU = 32,
  KILN_CUBLASLT_EPILOGUE_GELU_BIAS = 36,
};

#define KILN_CUBLASLT_CACHE_SIZE 256
#define KILN_CUBLASLT_WORKSPACE_BYTES ((size_t)32 << 20)

typedef enum kiln_lt_fp8 {
  KILN_LT_FP8_NONE = 0,
  KILN_LT_FP8_E4M3,
  KILN_LT_FP8_E5M2,
} kiln_lt_fp8_t;

/* What the descriptor does not say. A zeroed struct: exact f32, no fp8. */
typedef struct kiln_cublaslt_options {
  bool allow_tf32; /* f32 dots whose precision config allows TF32 (XLA's DEFAULT) */
  /* fp8 operands: both set, g->dtype is then ignored for A and B; C is g->out_dtype
   * (bf16, f16 or f32; KILN_GEMM_SAME means f32). Scales are device pointers to one f32
   * each (NULL: 1). */
  kiln_lt_fp8_t fp8_a, fp8_b;
  CUdeviceptr a_scale, b_scale, d_scale;
} kiln_cublaslt_options_t;

/* One matrix as cuBLASLt sees it (column-major). */
typedef struct kiln_lt_layout {
  int32_t type; /* KILN_CUDA_* */
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch;
  int64_t stride; /* elements between the matrices of the batch */
} kiln_lt_layout_t;

/* Everything cublasLtMatmul is told, in cuBLASLt's terms. Zero-initialized by
 * kiln_cublaslt_plan (padding included), so plans compare with memcmp. */
typedef struct kiln_lt_plan {
  int32_t compute_type, scale_type;
  int32_t trans_a, trans_b; /* cuBLASLt's A is kiln's B, its B is kiln's A */
  kiln_lt_layout_t a, b, c; /* D has C's layout */
  uint32_t epilogue;
  bool fp8;
  bool bias;         /* CUBLASLT_MATMUL_DESC_BIAS_POINTER is set (the address is not planned) */
  int32_t bias_type; /* CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE when `bias`: KILN_CUDA_*, C's */
} kiln_lt_plan_t;

/* Builds the plan for `g` (checked with kiln_gemm_desc_check) and `o` (NULL: defaults).
 * UNIMPLEMENTED naming the reason for what cuBLASLt cannot do (fp8 not in TN form, a
 * dimension past its 32-bit batch count, ...). */
kiln_status kiln_cublaslt_plan(const kiln_gemm_desc_t *g, const kiln_cublaslt_options_t *o,
                               kiln_lt_plan_t *out);

/* The library names tried, in order, and how many. */
const char *const *kiln_cublaslt_library_names(size_t *n);

/* Whether cuBLASLt can be used by this process: the first of `names` (NULL:
 * kiln_cublaslt_library_names) that dlopens exports cublasLtMatmul (the library is closed
 * again; no handle, no GPU needed). What compiles for CUDA sets
 * kiln_thunk_emit_options_t.cublaslt from it. Thread-safe. */
bool kiln_cublaslt_probe(const char *const *names, size_t num_names);
/* kiln_cublaslt_probe of the default names, done once per process (later calls return the
 * first answer). Thread-safe. */
bool kiln_cublaslt_available(void);

typedef struct kiln_cublaslt kiln_cublaslt_t;

/* Opens cuBLASLt from `names` (NULL: kiln_cublaslt_library_names), resolves its entry points
 * and creates a handle. UNAVAILABLE listing "name (dlerror)" for every library tried when
 * none opens, or naming a missing symbol; a failing cublasLtCreate is INTERNAL (the library
 * is there but does not work). The caller owns *out (kiln_cublaslt_destroy). */
kiln_status kiln_cublaslt_open(const char *const *names, size_t num_names, kiln_cublaslt_t **out);
/* Frees the handle, the workspace (through `drv`, in the current context) and the cache. */
void kiln_cublaslt_destroy(kiln_cublaslt_t *lt, const kiln_cuda_driver_t *drv);

/* Plans in the cache (for tests and logs). */
size_t kiln_cublaslt_cache_size(const kiln_cublaslt_t *lt);

/* C = alpha op(A) op(B) + beta C on stream `s` with the plan of `g` and `o`: the algorithm
 * from the cache, else from the heuristic (then cached). The caller holds the device's
 * mutex and has made its context current. */
kiln_status kiln_cublaslt_matmul(kiln_cublaslt_t *lt, const kiln_cuda_driver_t *drv, CUstream s,
                                 const kiln_gemm_desc_t *g, const kiln_cublaslt_options_t *o,
                                 CUdeviceptr a, CUdeviceptr b, CUdeviceptr c);

/* "CUBLAS_STATUS_NOT_SUPPORTED", ... ("unknown cuBLAS status" otherwise). */
const char *kiln_cublas_status_name(int status);

#endif /* KILN_RUNTIME_CUDA_CUBLASLT_H_ */
