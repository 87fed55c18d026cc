/* Host gemm: the system CBLAS through dlopen, else a blocked C kernel (host_device.h).
 *
 * Libraries tried, in order: $KILN_HOST_BLAS (when set; "none" skips CBLAS altogether),
 * libopenblas.so.0, libopenblas.so, libblis.so.4, libmkl_rt.so, libcblas.so.3,
 * libblas.so.3, libblas.so. A library is used when it exports both cblas_sgemm and
 * cblas_dgemm; "cannot open" and "symbol not found" are told apart in the tried list. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "runtime/host/host_device.h"

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

typedef void (*cblas_sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
                               const float *a, int lda, const float *b, int ldb, float beta,
                               float *c, int ldc);
typedef void (*cblas_dgemm_fn)(int order, int ta, int tb, int m, int n, int k, double alpha,
                               const double *a, int lda, const double *b, int ldb, double beta,
                               double *c, int ldc);

static struct {
  pthread_once_t once;
  void *handle;
  const char *library;
  cblas_sgemm_fn sgemm;
  cblas_dgemm_fn dgemm;
  char tried[2048];
} g_blas = {.once = PTHREAD_ONCE_INIT};

static void tried_append(const char *what) {
  size_t len = strlen(g_blas.tried);
  snprintf(g_blas.tried + len, sizeof(g_blas.tried) - len, "%s%s", len ? "; " : "", what);
}

static bool try_library(const char *name) {
  char line[512];
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *err = dlerror();
    snprintf(line, sizeof(line), "%s: cannot open (%s)", name, err ? err : "?");
    tried_append(line);
    return false;
  }
  void *s = dlsym(h, "cblas_sgemm"), *d = dlsym(h, "cblas_dgemm");
  if (!s || !d) {
    snprintf(line, sizeof(line), "%s: symbol cblas_%cgemm not found", name, s ? 'd' : 's');
    tried_append(line);
    dlclose(h);
    return false;
  }
  g_blas.handle = h;
  g_blas.library = name;
  /* dlsym returns data pointers; POSIX guarantees they convert to function pointers. */
  memcpy(&g_blas.sgemm, &s, sizeof(s));
  memcpy(&g_blas.dgemm, &d, sizeof(d));
  return true;
}

static void load_blas(void) {
  static const char *const candidates[] = {"libopenblas.so.0", "libopenblas.so", "libblis.so.4",
                                           "libmkl_rt.so",     "libcblas.so.3",  "libblas.so.3",
                                           "libblas.so"};
  const char *env = getenv("KILN_HOST_BLAS");
  if (env && !strcmp(env, "none")) {
    tried_append("KILN_HOST_BLAS=none");
  } else {
    bool ok = env && *env && try_library(env);
    for (size_t i = 0; !ok && i < sizeof(candidates) / sizeof(candidates[0]); i++)
      ok = try_library(candidates[i]);
  }
  if (g_blas.library)
    KILN_LOG_I("host gemm: using %s", g_blas.library);
  else
    KILN_LOG_I("host gemm: no CBLAS found (%s); using the built-in C kernel", g_blas.tried);
}

const char *kiln_host_blas_library(const char **tried) {
  pthread_once(&g_blas.once, load_blas);
  if (tried) *tried = g_blas.tried;
  return g_blas.library;
}

/* The built-in kernel: C = alpha * op(A) op(B) + beta * C, blocked over k and j so the rows
 * of B and C being combined stay in cache. Row-major; op() transposes when asked. */
#define DEFINE_FALLBACK(NAME, T)                                               \
  static void NAME(const kiln_gemm_desc_t *g, const T *A, const T *B, T *C) {  \
    const int64_t m = g->m, n = g->n, k = g->k;                                \
    const T alpha = (T)g->alpha, beta = (T)g->beta;                            \
    enum { KB = 128, JB = 512 };                                               \
    for (int64_t i = 0; i < m * n; i++) C[i] = beta == 0 ? (T)0 : C[i] * beta; \
    for (int64_t p0 = 0; p0 < k; p0 += KB) {                                   \
      int64_t p1 = p0 + KB < k ? p0 + KB : k;                                  \
      for (int64_t j0 = 0; j0 < n; j0 += JB) {                                 \
        int64_t j1 = j0 + JB < n ? j0 + JB : n;                                \
        for (int64_t i = 0; i < m; i++) {                                      \
          T *c = C + i * n;                                                    \
          for (int64_t p = p0; p < p1; p++) {                                  \
            T a = alpha * (g->trans_a ? A[p * m + i] : A[i * k + p]);          \
            if (!g->trans_b) {                                                 \
              const T *b = B + p * n;                                          \
              for (int64_t j = j0; j < j1; j++) c[j] += a * b[j];              \
            } else {                                                           \
              for (int64_t j = j0; j < j1; j++) c[j] += a * B[j * k + p];      \
            }                                                                  \
          }                                                                    \
        }                                                                      \
      }                                                                        \
    }                                                                          \
  }

DEFINE_FALLBACK(gemm_fallback_f32, float)
DEFINE_FALLBACK(gemm_fallback_f64, double)

void kiln_host_gemm(const kiln_gemm_desc_t *g, const void *a, const void *b, void *c,
                    kiln_host_blas_choice_t choice) {
  bool use_blas = choice == KILN_HOST_BLAS_AUTO && kiln_host_blas_library(NULL) != NULL;
  const int64_t sa = g->m * g->k, sb = g->k * g->n, sc = g->m * g->n;
  const int m = (int)g->m, n = (int)g->n, k = (int)g->k;
  const int lda = g->trans_a ? m : k, ldb = g->trans_b ? k : n;
  const int ta = g->trans_a ? CBLAS_TRANS : CBLAS_NO_TRANS;
  const int tb = g->trans_b ? CBLAS_TRANS : CBLAS_NO_TRANS;
  for (int64_t bi = 0; bi < g->batch; bi++) {
    if (g->dtype == KILN_GEMM_F64) {
      const double *A = (const double *)a + bi * sa, *B = (const double *)b + bi * sb;
      double *C = (double *)c + bi * sc;
      if (use_blas)
        g_blas.dgemm(CBLAS_ROW_MAJOR, ta, tb, m, n, k, g->alpha, A, lda, B, ldb, g->beta, C, n);
      else
        gemm_fallback_f64(g, A, B, C);
    } else {
      const float *A = (const float *)a + bi * sa, *B = (const float *)b + bi * sb;
      float *C = (float *)c + bi * sc;
      if (use_blas)
        g_blas.sgemm(CBLAS_ROW_MAJOR, ta, tb, m, n, k, (float)g->alpha, A, lda, B, ldb,
                     (float)g->beta, C, n);
      else
        gemm_fallback_f32(g, A, B, C);
    }
  }
}
