/* GPU gemm (cuda_device.h): cuBLASLt first (cublaslt.h: every element type of
 * kiln_gemm_desc_t), else cuBLAS, dlopen'ed: libcublas.so.13, .so.12, .so.11 and libcublas.so
 * are tried in that order; a missing library or symbol is UNAVAILABLE naming what was tried,
 * a library that is there but fails cublasCreate is INTERNAL (a broken GPU must not pass as
 * "no GPU"). Without cuBLASLt (the reason logged once) f32 and f64 go to cuBLAS's
 * strided-batched gemm and other element types are refused with that reason. Row-major
 * C = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T, so no transposition
 * is materialized. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/str.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/cuda_device.h"

typedef struct cublas_ctx *cublas_handle_t;
typedef int cublas_status_t;
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_STATUS_ALLOC_FAILED = 3 };

/* KILN_CUBLAS_SYM(field, exported name, (parameters)) */
#define KILN_CUBLAS_SYMBOLS(X)                                                                     \
  X(create, "cublasCreate_v2", (cublas_handle_t * h))                                              \
  X(destroy, "cublasDestroy_v2", (cublas_handle_t h))                                              \
  X(set_stream, "cublasSetStream_v2", (cublas_handle_t h, CUstream s))                             \
  X(sgemm, "cublasSgemmStridedBatched",                                                            \
    (cublas_handle_t h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a,   \
     int lda, long long sa, const float *b, int ldb, long long sb, const float *beta, float *c,    \
     int ldc, long long sc, int batch))                                                            \
  X(dgemm, "cublasDgemmStridedBatched",                                                            \
    (cublas_handle_t h, int ta, int tb, int m, int n, int k, const double *alpha, const double *a, \
     int lda, long long sa, const double *b, int ldb, long long sb, const double *beta, double *c, \
     int ldc, long long sc, int batch))

struct kiln_cuda_blas {
  void *lib;
  cublas_handle_t handle;
  /* cuBLASLt, tried first; NULL when it could not be opened (lt_failure says why). */
  kiln_cublaslt_t *lt;
  const kiln_cuda_driver_t *drv;
  kiln_status_code_t lt_failure_code;
  char lt_failure[512];
#define X(field, sym, params) cublas_status_t(*field) params;
  KILN_CUBLAS_SYMBOLS(X)
#undef X
};

static kiln_status blas_load(kiln_cuda_blas_t **out) {
  static const char *const libs[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11",
                                     "libcublas.so"};
  void *lib = NULL;
  const char *used = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_cuda_library_open(
      libs, sizeof(libs) / sizeof(libs[0]), "cuBLAS",
      "install cuBLAS or set KILN_GEMM_LIBRARY=none to compile dots as kernels", &lib, &used));
  kiln_cuda_blas_t *b = kiln_calloc(1, sizeof(*b));
  b->lib = lib;
  void *p;
#define X(field, sym, params)                                                      \
  p = dlsym(lib, sym);                                                             \
  if (!p) {                                                                        \
    dlclose(lib);                                                                  \
    kiln_free(b);                                                                  \
    return kiln_status_make(KILN_UNAVAILABLE, "cuBLAS: symbol %s not found", sym); \
  }                                                                                \
  memcpy(&b->field, &p, sizeof(p));
  KILN_CUBLAS_SYMBOLS(X)
#undef X
  cublas_status_t st = b->create(&b->handle);
  if (st != 0) {
    dlclose(lib);
    kiln_free(b);
    /* The library is there but does not work with this driver or device: that is a fault
     * to report, not an absent library (UNAVAILABLE would let a broken GPU pass as "no GPU"). */
    return kiln_status_make(
        st == CUBLAS_STATUS_ALLOC_FAILED ? KILN_RESOURCE_EXHAUSTED : KILN_INTERNAL,
        "cublasCreate failed with status %d (%s); check that the driver "
        "supports this cuBLAS and the device is usable (nvidia-smi)",
        st, kiln_cublas_status_name(st));
  }
  *out = b;
  return NULL;
}

void kiln_cuda_blas_destroy(kiln_cuda_blas_t *b) {
  if (!b) return;
  kiln_cublaslt_destroy(b->lt, b->drv);
  b->destroy(b->handle);
  dlclose(b->lib);
  kiln_free(b);
}

/* Opens cuBLASLt for the device once; a failure is remembered (and logged once). */
static void lt_load(kiln_cuda_blas_t *bl) {
  kiln_status s = kiln_cublaslt_open(NULL, 0, &bl->lt);
  if (!s) {
    KILN_LOG_I("cuBLASLt: gemms go through it (algorithms chosen once per shape)");
    return;
  }
  bl->lt_failure_code = kiln_status_code(s);
  snprintf(bl->lt_failure, sizeof(bl->lt_failure), "%s", kiln_status_message(s));
  KILN_LOG_W(
      "cuBLASLt not used: %s; f32 and f64 gemms fall back to cuBLAS, other element "
      "types are refused",
      bl->lt_failure);
  kiln_status_free(s);
}

/* cuBLAS's strided-batched sgemm / dgemm (f32 and f64 only). */
static kiln_status classic_gemm(kiln_cuda_blas_t *bl, CUstream s, const kiln_gemm_desc_t *g,
                                CUdeviceptr a, CUdeviceptr b, CUdeviceptr c) {
  const int m = (int)g->m, n = (int)g->n, k = (int)g->k;
  const int lda = g->trans_a ? m : k, ldb = g->trans_b ? k : n;
  const int ta = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
            tb = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublas_status_t st = bl->set_stream(bl->handle, s);
  if (st == 0) {
    if (g->dtype == KILN_GEMM_F64) {
      double alpha = g->alpha, beta = g->beta;
      st = bl->dgemm(bl->handle, tb, ta, n, m, k, &alpha, (const double *)(uintptr_t)b, ldb,
                     (long long)k * n, (const double *)(uintptr_t)a, lda, (long long)m * k, &beta,
                     (double *)(uintptr_t)c, n, (long long)m * n, (int)g->batch);
    } else {
      float alpha = (float)g->alpha, beta = (float)g->beta;
      st = bl->sgemm(bl->handle, tb, ta, n, m, k, &alpha, (const float *)(uintptr_t)b, ldb,
                     (long long)k * n, (const float *)(uintptr_t)a, lda, (long long)m * k, &beta,
                     (float *)(uintptr_t)c, n, (long long)m * n, (int)g->batch);
    }
  }
  if (st != 0)
    return KILN_ERR_INTERNAL("cuBLAS gemm failed with %s (%d)", kiln_cublas_status_name(st), st);
  return NULL;
}

kiln_status kiln_cuda_blas_gemm(kiln_cuda_device_t *d, CUstream s, const kiln_gemm_desc_t *g,
                                CUdeviceptr a, CUdeviceptr b, CUdeviceptr c) {
  KILN_RETURN_IF_ERROR_PLAIN(kiln_gemm_desc_check(g, NULL, NULL, NULL));
  /* Classic cuBLAS has no epilogue: a gemm with one needs cuBLASLt (the compile driver fuses
   * epilogues for CUDA only when told the target has it). */
  const bool classic_ok = g->dtype == kiln_gemm_desc_out_dtype(g) &&
                          (g->dtype == KILN_GEMM_F32 || g->dtype == KILN_GEMM_F64) && !g->bias &&
                          g->epilogue == KILN_GEMM_EPILOGUE_NONE;
  if (g->batch > INT32_MAX)
    return KILN_ERR_INVALID("cuBLAS gemm: batch %lld too large", (long long)g->batch);
  /* One set of handles per device, used under the device lock (the stream is per call). */
  kiln_mutex_lock(&d->mu);
  kiln_status st = d->blas ? NULL : blas_load(&d->blas);
  kiln_cuda_blas_t *bl = d->blas;
  if (!st && !bl->drv) {
    bl->drv = d->drv;
    lt_load(bl);
  }
  bool done = false;
  if (!st && bl->lt) {
    st = kiln_cublaslt_matmul(bl->lt, d->drv, s, g, NULL, a, b, c);
    done = !st || !classic_ok || kiln_status_code(st) != KILN_UNIMPLEMENTED;
    if (!done) {
      KILN_LOG_I("cuBLASLt: %s; this gemm goes to cuBLAS", kiln_status_message(st));
      kiln_status_free(st);
      st = NULL;
    }
  } else if (!st && !classic_ok) {
    st = kiln_status_make(bl->lt_failure_code == KILN_OK ? KILN_UNAVAILABLE : bl->lt_failure_code,
                          "a %s x %s -> %s gemm%s needs cuBLASLt: %s; compile the dot for the "
                          "CUDA target without cuBLASLt (kiln_thunk_emit_options_t.cublaslt "
                          "off: such dots become kernels, epilogues stay unfused) or set "
                          "KILN_GEMM_LIBRARY=none",
                          kiln_gemm_dtype_name(g->dtype), kiln_gemm_dtype_name(g->dtype),
                          kiln_gemm_dtype_name(kiln_gemm_desc_out_dtype(g)),
                          g->bias || g->epilogue ? " with an epilogue" : "", bl->lt_failure);
    done = true;
  }
  if (!st && !done) st = classic_gemm(bl, s, g, a, b, c);
  kiln_mutex_unlock(&d->mu);
  KILN_RETURN_IF_ERROR(st,
                       "for a %lldx%lldx%lld gemm (the emitted fallback kernel is not "
                       "available yet)",
                       (long long)g->m, (long long)g->n, (long long)g->k);
  return NULL;
}
