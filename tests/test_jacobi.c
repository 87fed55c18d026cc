/* base/jacobi_eigh.h on seeded random matrices of many sizes: eigh's A V = V diag(w) with V
 * orthogonal and w ascending; the SVD's A = U diag(s) V^T with U, V orthonormal and s
 * descending, for tall, wide, square and rank-deficient matrices in full and reduced form;
 * the sign conventions; non-finite input reported (info 1, NaN outputs). Residuals are
 * bounded by 64 n eps ||A|| (a backward-stable method's error). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <float.h>
#include <math.h>

#include "base/jacobi_eigh.h"

static double rnd(uint64_t *x) {
  *x = *x * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(*x >> 11) / 9007199254740992.0 * 2 - 1;
}

static double frob(const double *a, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += a[i] * a[i];
  return sqrt(s);
}

/* max |Q^T Q - I| over the c columns of the r x c row-major q. */
static double orthogonality(const double *q, int64_t r, int64_t c) {
  double worst = 0;
  for (int64_t i = 0; i < c; i++)
    for (int64_t j = 0; j < c; j++) {
      double d = 0;
      for (int64_t k = 0; k < r; k++) d += q[k * c + i] * q[k * c + j];
      worst = fmax(worst, fabs(d - (i == j)));
    }
  return worst;
}

static void test_eigh_diagonalizes_symmetric_matrices(void **state) {
  (void)state;
  uint64_t seed = 1;
  for (int64_t n = 1; n <= 40; n += (n < 8 ? 1 : 7)) {
    double *a = malloc(sizeof(double) * (size_t)(n * n)),
           *work = malloc(sizeof(double) * (size_t)(n * n));
    double *w = malloc(sizeof(double) * (size_t)n), *v = malloc(sizeof(double) * (size_t)(n * n));
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j <= i; j++) a[i * n + j] = a[j * n + i] = rnd(&seed);
    memcpy(work, a, sizeof(double) * (size_t)(n * n));
    for (int64_t j = 1; j < n; j++) work[j] = 1e300; /* upper triangle unread (lower) */
    assert_int_equal(kiln_jacobi_eigh(n, work, true, w, v), 0);
    double tol = 64 * (double)n * DBL_EPSILON * frob(a, n * n), worst = 0;
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        double av = 0;
        for (int64_t k = 0; k < n; k++) av += a[i * n + k] * v[k * n + j];
        worst = fmax(worst, fabs(av - v[i * n + j] * w[j]));
      }
    if (worst > tol) fail_msg("n=%lld: |AV - VW| %g > %g", (long long)n, worst, tol);
    assert_true(orthogonality(v, n, n) < 64 * n * DBL_EPSILON);
    for (int64_t j = 1; j < n; j++) assert_true(w[j - 1] <= w[j]);
    for (int64_t j = 0; j < n; j++) { /* the largest component of each vector is positive */
      int64_t big = 0;
      for (int64_t k = 1; k < n; k++)
        if (fabs(v[k * n + j]) > fabs(v[big * n + j])) big = k;
      assert_true(v[big * n + j] > 0);
    }
    free(a);
    free(work);
    free(w);
    free(v);
  }
}

/* One SVD of an m x n matrix of the given rank (random factors), full or reduced. */
static void check_svd(int64_t m, int64_t n, int64_t rank, bool full, uint64_t *seed) {
  int64_t k = m < n ? m : n, uc = full ? m : k, vr = full ? n : k;
  double *a = calloc((size_t)(m * n), sizeof(double)), *s = malloc(sizeof(double) * (size_t)k);
  double *u = malloc(sizeof(double) * (size_t)(m * uc)),
         *vt = malloc(sizeof(double) * (size_t)(vr * n));
  for (int64_t r = 0; r < rank; r++) {
    double x[64], y[64];
    for (int64_t i = 0; i < m; i++) x[i] = rnd(seed);
    for (int64_t j = 0; j < n; j++) y[j] = rnd(seed);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) a[i * n + j] += x[i] * y[j];
  }
  assert_int_equal(kiln_jacobi_svd(m, n, a, s, u, uc, vt, vr), 0);
  double norm = frob(a, m * n), tol = 64 * (double)(m + n) * DBL_EPSILON * fmax(norm, 1e-300),
         worst = 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double r = 0;
      for (int64_t l = 0; l < k; l++) r += u[i * uc + l] * s[l] * vt[l * n + j];
      worst = fmax(worst, fabs(r - a[i * n + j]));
    }
  if (worst > tol)
    fail_msg("%lldx%lld rank %lld: |U S V^T - A| %g > %g", (long long)m, (long long)n,
             (long long)rank, worst, tol);
  double ortho_u = orthogonality(u, m, uc);
  /* vt's rows: orthogonality of its transpose */
  double *v = malloc(sizeof(double) * (size_t)(n * vr));
  for (int64_t i = 0; i < vr; i++)
    for (int64_t j = 0; j < n; j++) v[j * vr + i] = vt[i * n + j];
  double ortho_v = orthogonality(v, n, vr);
  if (ortho_u > 1e-12 || ortho_v > 1e-12)
    fail_msg("%lldx%lld rank %lld: orthogonality %g / %g", (long long)m, (long long)n,
             (long long)rank, ortho_u, ortho_v);
  for (int64_t l = 1; l < k; l++) assert_true(s[l - 1] >= s[l]);
  for (int64_t l = rank; l < k; l++) assert_true(s[l] <= tol);
  free(a);
  free(s);
  free(u);
  free(vt);
  free(v);
}

static void test_svd_reconstructs_every_shape(void **state) {
  (void)state;
  uint64_t seed = 7;
  static const int64_t shapes[][2] = {{1, 1}, {1, 5},   {5, 1},   {3, 3},   {8, 3},
                                      {3, 8}, {17, 11}, {11, 17}, {32, 32}, {40, 9}};
  for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
    int64_t m = shapes[t][0], n = shapes[t][1], k = m < n ? m : n;
    for (int full = 0; full < 2; full++) {
      check_svd(m, n, k, full, &seed);                /* full rank */
      if (k > 1) check_svd(m, n, k / 2, full, &seed); /* rank deficient */
      check_svd(m, n, 0, full, &seed);                /* zero */
    }
  }
}

static void test_non_finite_input_is_reported(void **state) {
  (void)state;
  double a[4] = {1, NAN, NAN, 2}, w[2], v[4], s[2], u[4], vt[4];
  assert_int_equal(kiln_jacobi_eigh(2, a, true, w, v), 1);
  assert_true(isnan(w[0]) && isnan(v[3]));
  double b[4] = {1, INFINITY, 0, 2};
  assert_int_equal(kiln_jacobi_svd(2, 2, b, s, u, 2, vt, 2), 1);
  assert_true(isnan(s[1]) && isnan(u[0]) && isnan(vt[3]));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_eigh_diagonalizes_symmetric_matrices),
      cmocka_unit_test(test_svd_reconstructs_every_shape),
      cmocka_unit_test(test_non_finite_input_is_reported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
