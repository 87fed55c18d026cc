/* Host QR, eigh and SVD (host_device.h): LAPACK's ?geqrf / ?orgqr / dsyevd / dgesdd from the
 * CBLAS library host_blas.c loaded (OpenBLAS ships LAPACK), else kiln's own loops in f64
 * (base/householder.h, base/jacobi_eigh.h). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/householder.h"
#include "base/jacobi_eigh.h"
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

/* ---- eigh and SVD (LAPACK dsyevd / dgesdd, else base/jacobi_eigh.h) ---------------------- */

/* Every element NaN: a failed decomposition, as the Jacobi fallback reports one. */
static void nan_fill(double *p, int64_t n) {
  for (int64_t i = 0; p && i < n; i++) p[i] = NAN;
}

/* Flips vector j (of `count`, `len` components; element i at p[i * si + j * sj]) and its
 * partner q (same layout) so that its largest-magnitude component is positive. */
static void normalize_sign(double *p, int64_t si, int64_t sj, int64_t len, int64_t j, double *q,
                           int64_t qi, int64_t qj, int64_t qlen) {
  int64_t big = 0;
  for (int64_t i = 1; i < len; i++)
    if (fabs(p[i * si + j * sj]) > fabs(p[big * si + j * sj])) big = i;
  if (!(p[big * si + j * sj] < 0)) return;
  for (int64_t i = 0; i < len; i++) p[i * si + j * sj] = -p[i * si + j * sj];
  for (int64_t i = 0; q && i < qlen; i++) q[i * qi + j * qj] = -q[i * qi + j * qj];
}

int kiln_host_eigh(int64_t n, double *a, bool lower, double *w, double *v) {
  void *sym = kiln_host_blas_symbol("dsyevd_");
  if (!sym || n < 1 || n > 46340) return kiln_jacobi_eigh(n, a, lower, w, v);
  kiln_lapack_dsyevd_fn fn;
  memcpy(&fn, &sym, sizeof fn);
  /* row-major `a` is column-major a^T: its lower triangle is LAPACK's upper */
  int in = (int)n, lwork = -1, liwork = -1, iq = 0, info = 0;
  double q = 0;
  const char *jobz = v ? "V" : "N", *uplo = lower ? "U" : "L";
  fn(jobz, uplo, &in, a, &in, w, &q, &lwork, &iq, &liwork, &info);
  lwork = q >= 1 && q < INT_MAX ? (int)q : 1;
  liwork = iq >= 1 ? iq : 1;
  double *work = kiln_try_malloc(sizeof(double) * (size_t)lwork);
  int *iwork = kiln_try_malloc(sizeof(int) * (size_t)liwork);
  if (!work || !iwork) {
    kiln_free(work);
    kiln_free(iwork);
    return kiln_jacobi_eigh(n, a, lower, w, v);
  }
  fn(jobz, uplo, &in, a, &in, w, work, &lwork, iwork, &liwork, &info);
  kiln_free(work);
  kiln_free(iwork);
  bool finite = info == 0;
  for (int64_t i = 0; finite && i < n; i++) finite = isfinite(w[i]);
  if (!finite) {
    nan_fill(w, n);
    nan_fill(v, n * n);
    return 1;
  }
  if (v) { /* column j of the column-major result is eigenvector j: v[i * n + j] */
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) v[i * n + j] = a[j * n + i];
    for (int64_t j = 0; j < n; j++) normalize_sign(v, n, 1, n, j, NULL, 0, 0, 0);
  }
  return 0;
}

int kiln_host_svd(int64_t m, int64_t n, const double *a, double *s, double *u, int64_t ucols,
                  double *vt, int64_t vrows) {
  void *sym = kiln_host_blas_symbol("dgesdd_");
  int64_t k = m < n ? m : n;
  bool full = u && ucols == m && vrows == n && m != n, none = !u && !vt;
  bool ok_form = none || (u && vt && ((ucols == k && vrows == k) || (ucols == m && vrows == n)));
  if (!sym || k < 1 || m > 46340 || n > 46340 || !ok_form)
    return kiln_jacobi_svd(m, n, a, s, u, ucols, vt, vrows);
  kiln_lapack_dgesdd_fn fn;
  memcpy(&fn, &sym, sizeof fn);
  /* row-major `a` is column-major B = a^T (n x m): B = Ub S VBt, so a = VBt^T S Ub^T */
  int im = (int)n, in = (int)m, ldu = (int)n, ldvt = full ? (int)m : (int)k, lwork = -1, info = 0;
  const char *jobz = none ? "N" : full ? "A" : "S";
  double *b = kiln_try_malloc(sizeof(double) * (size_t)(m * n + n * n + m * m + 1));
  int *iwork = kiln_try_malloc(sizeof(int) * (size_t)(8 * k));
  if (!b || !iwork) {
    kiln_free(b);
    kiln_free(iwork);
    return kiln_jacobi_svd(m, n, a, s, u, ucols, vt, vrows);
  }
  double *ub = b + m * n, *vbt = ub + n * n, q = 0;
  memcpy(b, a, sizeof(double) * (size_t)(m * n));
  fn(jobz, &im, &in, b, &im, s, ub, &ldu, vbt, &ldvt, &q, &lwork, iwork, &info);
  lwork = q >= 1 && q < INT_MAX ? (int)q : 1;
  double *work = kiln_try_malloc(sizeof(double) * (size_t)lwork);
  if (!work) {
    kiln_free(b);
    kiln_free(iwork);
    return kiln_jacobi_svd(m, n, a, s, u, ucols, vt, vrows);
  }
  fn(jobz, &im, &in, b, &im, s, ub, &ldu, vbt, &ldvt, work, &lwork, iwork, &info);
  kiln_free(work);
  kiln_free(iwork);
  bool finite = info == 0;
  for (int64_t i = 0; finite && i < k; i++) finite = isfinite(s[i]);
  if (!finite) {
    nan_fill(s, k);
    nan_fill(u, m * ucols);
    nan_fill(vt, vrows * n);
    kiln_free(b);
    return 1;
  }
  if (!none) {
    /* u[i][j] = VBt(j, i) = vbt[j + i * ldvt]; vt[j][i] = Ub(i, j) = ub[i + j * ldu] */
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < ucols; j++) u[i * ucols + j] = vbt[j + i * ldvt];
    for (int64_t j = 0; j < vrows; j++)
      for (int64_t i = 0; i < n; i++) vt[j * n + i] = ub[i + j * ldu];
    /* the Jacobi code's signs: the shorter side's vector's largest component positive */
    for (int64_t j = 0; j < k; j++) {
      if (m >= n)
        normalize_sign(vt, 1, n, n, j, u, ucols, 1, m);
      else
        normalize_sign(u, ucols, 1, m, j, vt, 1, n, n);
    }
  }
  kiln_free(b);
  return 0;
}
