/* GPU gemm through cuBLAS, dlopen'ed (cuda_device.h). libcublas.so.13, .so.12, .so.11 and
 * libcublas.so are tried in that order; a missing library or symbol is UNAVAILABLE naming
 * what was tried. Row-major C = op(A) op(B) is computed as the column-major
 * C^T = op(B)^T op(A)^T, so no transposition is materialized. f32 and f64 only: other
 * element types are refused (UNIMPLEMENTED); the CUDA pipeline compiles such dots as kernels
 * (kiln_pass_options_t.gemm_f32_f64_only). */
#include <dlfcn.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "runtime/cuda/cuda_device.h"

typedef struct cublas_ctx *cublas_handle_t;
typedef int cublas_status_t;
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };

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
#define X(field, sym, params) cublas_status_t(*field) params;
  KILN_CUBLAS_SYMBOLS(X)
#undef X
};

static kiln_status blas_load(kiln_cuda_blas_t **out) {
  static const char *const libs[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11",
                                     "libcublas.so"};
  kiln_strbuf_t tried = {0};
  void *lib = NULL;
  for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]) && !lib; i++) {
    lib = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char *e = dlerror();
      kiln_strbuf_printf(&tried, "%s%s (%s)", tried.len ? ", " : "", libs[i], e ? e : "?");
    }
  }
  if (!lib) {
    kiln_status s = kiln_status_make(KILN_UNAVAILABLE, "cuBLAS not found: cannot open any of %s; install "
                                     "cuBLAS or set KILN_GEMM_LIBRARY=none to compile dots as "
                                     "kernels",
                                     kiln_strbuf_cstr(&tried));
    kiln_strbuf_free(&tried);
    return s;
  }
  kiln_strbuf_free(&tried);
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
    return kiln_status_make(KILN_UNAVAILABLE, "cublasCreate failed with status %d", st);
  }
  *out = b;
  return NULL;
}

void kiln_cuda_blas_destroy(kiln_cuda_blas_t *b) {
  if (!b) return;
  b->destroy(b->handle);
  dlclose(b->lib);
  kiln_free(b);
}

kiln_status kiln_cuda_blas_gemm(kiln_cuda_device_t *d, CUstream s, const kiln_gemm_desc_t *g,
                                CUdeviceptr a, CUdeviceptr b, CUdeviceptr c) {
  if (g->dtype != kiln_gemm_desc_out_dtype(g) ||
      (g->dtype != KILN_GEMM_F32 && g->dtype != KILN_GEMM_F64))
    return KILN_ERR_UNIMPLEMENTED(
        "cuBLAS gemm: %s x %s -> %s is not supported on CUDA (f32 and f64 only); compile the "
        "dot for the CUDA target (its pipeline makes such dots kernels) or set "
        "KILN_GEMM_LIBRARY=none",
        kiln_gemm_dtype_name(g->dtype), kiln_gemm_dtype_name(g->dtype),
        kiln_gemm_dtype_name(kiln_gemm_desc_out_dtype(g)));
  if (g->batch > INT32_MAX)
    return KILN_ERR_INVALID("cuBLAS gemm: batch %lld too large", (long long)g->batch);
  pthread_mutex_lock(&d->mu);
  kiln_status s0 = d->blas ? NULL : blas_load(&d->blas);
  kiln_cuda_blas_t *bl = d->blas;
  pthread_mutex_unlock(&d->mu);
  KILN_RETURN_IF_ERROR(s0,
                       "for a %lldx%lldx%lld gemm (the emitted fallback kernel is not "
                       "available yet)",
                       (long long)g->m, (long long)g->n, (long long)g->k);
  const int m = (int)g->m, n = (int)g->n, k = (int)g->k;
  const int lda = g->trans_a ? m : k, ldb = g->trans_b ? k : n;
  const int ta = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
            tb = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  /* One handle per device: the stream is set for each call under the device lock. */
  pthread_mutex_lock(&d->mu);
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
  pthread_mutex_unlock(&d->mu);
  if (st != 0) return KILN_ERR_INTERNAL("cuBLAS gemm failed with status %d", st);
  return NULL;
}
