/* Host QR (host_device.h): LAPACK's ?geqrf / ?orgqr from the CBLAS library host_blas.c loaded
 * (OpenBLAS ships LAPACK), else kiln's Householder loop (base/householder.h) in f64. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/householder.h"
#include "runtime/host/host_device.h"

/* Fortran LAPACK: every argument by address, 32-bit integers (LP64 builds). */
typedef void (*geqrf_fn)(const int *m, const int *n, void *a, const int *lda, void *tau, void *work,
                         const int *lwork, int *info);
typedef void (*orgqr_fn)(const int *m, const int *n, const int *k, void *a, const int *lda,
                         const void *tau, void *work, const int *lwork, int *info);

static void *lapack_symbol(bool f64, const char *suffix, kiln_host_blas_choice_t choice) {
  if (choice != KILN_HOST_BLAS_AUTO) return NULL;
  char name[16];
  snprintf(name, sizeof name, "%c%s_", f64 ? 'd' : 's', suffix);
  return kiln_host_blas_symbol(name);
}

static kiln_status check_dims(const char *what, int64_t m, int64_t n) {
  if (m < 0 || n < 0 || m > INT_MAX || n > INT_MAX || (m && n > INT_MAX / m))
    return KILN_ERR_INVALID("host %s: a %lld x %lld matrix exceeds LAPACK's 32-bit sizes", what,
                            (long long)m, (long long)n);
  return NULL;
}

/* The LAPACK workspace for `lwork_query` (the size it reported), at least one element. */
static void *work_alloc(bool f64, double lwork_query, int *lwork) {
  *lwork = lwork_query >= 1 && lwork_query < INT_MAX ? (int)lwork_query : 1;
  return kiln_try_malloc((size_t)*lwork * (f64 ? 8 : 4));
}

static double elem(bool f64, const void *p, int64_t i) {
  return f64 ? ((const double *)p)[i] : ((const float *)p)[i];
}

static void set_elem(bool f64, void *p, int64_t i, double v) {
  if (f64)
    ((double *)p)[i] = v;
  else
    ((float *)p)[i] = (float)v;
}

/* The f64 fallback on one matrix: widen, run, narrow (in place when already f64). geqrf
 * writes `tau_out`; orgqr reads `tau_in`. */
static kiln_status fallback(bool f64, int64_t m, int64_t n, int64_t k, void *a, const void *tau_in,
                            void *tau_out) {
  bool orgqr = tau_in != NULL;
  int64_t kt = orgqr ? k : (m < n ? m : n);
  double *wa = f64 ? a : kiln_try_malloc(sizeof(double) * (size_t)(m * n + kt + 1));
  if (!wa) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "host QR: out of memory");
  double *wt = f64 ? NULL : wa + m * n;
  if (!f64) {
    for (int64_t i = 0; i < m * n; i++) wa[i] = elem(false, a, i);
    for (int64_t i = 0; orgqr && i < kt; i++) wt[i] = elem(false, tau_in, i);
  }
  if (orgqr)
    kiln_householder_orgqr(m, n, k, wa, m, f64 ? tau_in : wt);
  else
    kiln_householder_geqrf(m, n, wa, m, f64 ? tau_out : wt);
  if (!f64) {
    for (int64_t i = 0; i < m * n; i++) set_elem(false, a, i, wa[i]);
    for (int64_t i = 0; !orgqr && i < kt; i++) set_elem(false, tau_out, i, wt[i]);
    kiln_free(wa);
  }
  return NULL;
}

kiln_status kiln_host_geqrf(bool f64, int64_t batch, int64_t m, int64_t n, void *a, void *tau,
                            kiln_host_blas_choice_t choice) {
  KILN_RETURN_IF_ERROR_PLAIN(check_dims("geqrf", m, n));
  size_t es = f64 ? 8 : 4;
  int64_t kt = m < n ? m : n;
  void *sym = lapack_symbol(f64, "geqrf", choice);
  geqrf_fn fn;
  memcpy(&fn, &sym, sizeof fn);
  if (!sym || !m || !n) {
    for (int64_t b = 0; b < batch; b++)
      KILN_RETURN_IF_ERROR_PLAIN(fallback(f64, m, n, 0, (char *)a + (size_t)(b * m * n) * es, NULL,
                                          (char *)tau + (size_t)(b * kt) * es));
    return NULL;
  }
  int im = (int)m, in = (int)n, lwork = -1, info = 0;
  double query[2] = {0, 0};
  fn(&im, &in, a, &im, tau, query, &lwork, &info);
  void *work = work_alloc(f64, elem(f64, query, 0), &lwork);
  if (!work) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "host geqrf: out of memory");
  for (int64_t b = 0; b < batch && !info; b++)
    fn(&im, &in, (char *)a + (size_t)(b * m * n) * es, &im, (char *)tau + (size_t)(b * kt) * es,
       work, &lwork, &info);
  kiln_free(work);
  if (info)
    return KILN_ERR_INTERNAL("host geqrf: LAPACK reported info %d for a %d x %d matrix", info, im,
                             in);
  return NULL;
}

kiln_status kiln_host_orgqr(bool f64, int64_t batch, int64_t m, int64_t n, int64_t k, void *a,
                            const void *tau, kiln_host_blas_choice_t choice) {
  KILN_RETURN_IF_ERROR_PLAIN(check_dims("orgqr", m, n));
  if (n > m || k > n || k < 0)
    return KILN_ERR_INVALID("host orgqr: needs k <= n <= m, got m %lld, n %lld, k %lld",
                            (long long)m, (long long)n, (long long)k);
  size_t es = f64 ? 8 : 4;
  void *sym = lapack_symbol(f64, "orgqr", choice);
  orgqr_fn fn;
  memcpy(&fn, &sym, sizeof fn);
  if (!sym || !n) {
    for (int64_t b = 0; b < batch; b++)
      KILN_RETURN_IF_ERROR_PLAIN(fallback(f64, m, n, k, (char *)a + (size_t)(b * m * n) * es,
                                          (const char *)tau + (size_t)(b * k) * es, NULL));
    return NULL;
  }
  int im = (int)m, in = (int)n, ik = (int)k, lwork = -1, info = 0;
  double query[2] = {0, 0};
  fn(&im, &in, &ik, a, &im, tau, query, &lwork, &info);
  void *work = work_alloc(f64, elem(f64, query, 0), &lwork);
  if (!work) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "host orgqr: out of memory");
  for (int64_t b = 0; b < batch && !info; b++)
    fn(&im, &in, &ik, (char *)a + (size_t)(b * m * n) * es, &im,
       (const char *)tau + (size_t)(b * k) * es, work, &lwork, &info);
  kiln_free(work);
  if (info)
    return KILN_ERR_INTERNAL("host orgqr: LAPACK reported info %d for a %d x %d matrix", info, im,
                             in);
  return NULL;
}
