/* base/zlinalg.h on seeded random complex matrices of many sizes: Householder QR's Q R = A
 * with Q's columns orthonormal and R's diagonal real; the Hermitian eigh's A V = V diag(w)
 * with V unitary, w ascending and each vector's largest component real and positive; the
 * SVD's A = U diag(s) V^H with U, V orthonormal and s descending, for tall, wide, square and
 * rank-deficient matrices in full and reduced form; the general eigendecomposition's
 * A v = w v and u^H A = w u^H with unit vectors whose largest component is real and positive,
 * a real matrix's conjugate pairs exact and adjacent; the Hessenberg and tridiagonal (both
 * triangles) reductions' Q^H A Q from their stored reflectors; the real Schur form's
 * Z T Z^T = A with standardized 2 x 2 blocks; non-finite input reported (info 1,
 * NaN outputs). Residuals are bounded by 64 n eps ||A|| (a backward-stable method's error). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <float.h>
#include <math.h>

#include "base/cmplx.h"
#include "base/zlinalg.h"

static double rnd(uint64_t *x) {
  *x = *x * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(*x >> 11) / 9007199254740992.0 * 2 - 1;
}

static double complex zrnd(uint64_t *x) {
  double re = rnd(x);
  return CMPLX(re, rnd(x));
}

static double frob(const double complex *a, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += creal(a[i] * conj(a[i]));
  return sqrt(s);
}

/* max |Q^H Q - I| over the c columns of the r x c row-major q. */
static double unitarity(const double complex *q, int64_t r, int64_t c) {
  double worst = 0;
  for (int64_t i = 0; i < c; i++)
    for (int64_t j = 0; j < c; j++) {
      double complex d = 0;
      for (int64_t k = 0; k < r; k++) d += conj(q[k * c + i]) * q[k * c + j];
      worst = fmax(worst, cabs(d - (i == j)));
    }
  return worst;
}

static void test_qr_factors_tall_and_square_matrices(void **state) {
  (void)state;
  uint64_t seed = 3;
  static const int64_t shapes[][2] = {{1, 1}, {4, 3}, {5, 5}, {17, 11}, {32, 32}, {40, 9}};
  for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
    int64_t m = shapes[t][0], n = shapes[t][1];
    double complex *a = malloc(sizeof(double complex) * (size_t)(m * n)),
                   *f = malloc(sizeof(double complex) * (size_t)(m * n)),
                   *q = malloc(sizeof(double complex) * (size_t)(m * n)),
                   *tau = malloc(sizeof(double complex) * (size_t)n);
    for (int64_t i = 0; i < m * n; i++) f[i] = a[i] = zrnd(&seed); /* column-major */
    kiln_householder_zgeqrf(m, n, f, m, tau);
    memcpy(q, f, sizeof(double complex) * (size_t)(m * n));
    kiln_householder_zungqr(m, n, n, q, m, tau);
    double tol = 64 * (double)(m + n) * DBL_EPSILON * frob(a, m * n), worst = 0;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double complex r = 0; /* (Q R)[i][j], R = f's upper triangle */
        for (int64_t l = 0; l <= j; l++) r += q[i + l * m] * f[l + j * m];
        worst = fmax(worst, cabs(r - a[i + j * m]));
      }
    if (worst > tol)
      fail_msg("%lldx%lld: |QR - A| %g > %g", (long long)m, (long long)n, worst, tol);
    double complex *qr = malloc(sizeof(double complex) * (size_t)(m * n)); /* row-major Q */
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) qr[i * n + j] = q[i + j * m];
    assert_true(unitarity(qr, m, n) < 64 * (double)m * DBL_EPSILON);
    for (int64_t j = 0; j < n; j++) assert_true(cimag(f[j + j * m]) == 0);
    free(a);
    free(f);
    free(q);
    free(qr);
    free(tau);
  }
}

static void test_eigh_diagonalizes_hermitian_matrices(void **state) {
  (void)state;
  uint64_t seed = 1;
  for (int64_t n = 1; n <= 40; n += (n < 8 ? 1 : 7)) {
    size_t bytes = sizeof(double complex) * (size_t)(n * n);
    double complex *a = malloc(bytes), *work = malloc(bytes), *v = malloc(bytes);
    double *w = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
      for (int64_t j = 0; j < i; j++) {
        a[i * n + j] = zrnd(&seed);
        a[j * n + i] = conj(a[i * n + j]);
      }
      a[i * n + i] = rnd(&seed);
    }
    memcpy(work, a, bytes);
    for (int64_t i = 0; i < n; i++) {
      for (int64_t j = i + 1; j < n; j++) work[i * n + j] = 1e300; /* unread (upper) */
      work[i * n + i] += 5 * I;                                    /* ignored */
    }
    assert_int_equal(kiln_jacobi_zheev(n, work, true, w, v), 0);
    double tol = 64 * (double)n * DBL_EPSILON * frob(a, n * n), worst = 0;
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        double complex av = 0;
        for (int64_t k = 0; k < n; k++) av += a[i * n + k] * v[k * n + j];
        worst = fmax(worst, cabs(av - v[i * n + j] * w[j]));
      }
    if (worst > tol) fail_msg("n=%lld: |AV - VW| %g > %g", (long long)n, worst, tol);
    assert_true(unitarity(v, n, n) < 64 * n * DBL_EPSILON);
    for (int64_t j = 1; j < n; j++) assert_true(w[j - 1] <= w[j]);
    for (int64_t j = 0; j < n; j++) { /* the largest component: real and positive */
      int64_t big = 0;
      for (int64_t k = 1; k < n; k++)
        if (cabs(v[k * n + j]) > cabs(v[big * n + j])) big = k;
      assert_true(creal(v[big * n + j]) > 0 && cimag(v[big * n + j]) == 0);
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
  double complex *a = calloc((size_t)(m * n), sizeof(double complex));
  double *s = malloc(sizeof(double) * (size_t)k);
  double complex *u = malloc(sizeof(double complex) * (size_t)(m * uc)),
                 *vt = malloc(sizeof(double complex) * (size_t)(vr * n));
  for (int64_t r = 0; r < rank; r++) {
    double complex x[64], y[64];
    for (int64_t i = 0; i < m; i++) x[i] = zrnd(seed);
    for (int64_t j = 0; j < n; j++) y[j] = zrnd(seed);
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) a[i * n + j] += x[i] * y[j];
  }
  assert_int_equal(kiln_jacobi_zsvd(m, n, a, s, u, uc, vt, vr), 0);
  double norm = frob(a, m * n), tol = 64 * (double)(m + n) * DBL_EPSILON * fmax(norm, 1e-300),
         worst = 0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double complex r = 0;
      for (int64_t l = 0; l < k; l++) r += u[i * uc + l] * s[l] * vt[l * n + j];
      worst = fmax(worst, cabs(r - a[i * n + j]));
    }
  if (worst > tol)
    fail_msg("%lldx%lld rank %lld: |U S V^H - A| %g > %g", (long long)m, (long long)n,
             (long long)rank, worst, tol);
  double complex *v = malloc(sizeof(double complex) * (size_t)(n * vr)); /* vt^H */
  for (int64_t i = 0; i < vr; i++)
    for (int64_t j = 0; j < n; j++) v[j * vr + i] = conj(vt[i * n + j]);
  double unitary_u = unitarity(u, m, uc), unitary_v = unitarity(v, n, vr);
  if (unitary_u > 1e-12 || unitary_v > 1e-12)
    fail_msg("%lldx%lld rank %lld: unitarity %g / %g", (long long)m, (long long)n, (long long)rank,
             unitary_u, unitary_v);
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
      check_svd(m, n, k, full, &seed);
      if (k > 1) check_svd(m, n, k / 2, full, &seed);
      check_svd(m, n, 0, full, &seed);
    }
  }
}

/* max over j of |A v_j - w_j v_j| (right) and |v_j^H A - w_j v_j^H| (left), row-major n x n. */
static double eig_residual(int64_t n, const double complex *a, const double complex *w,
                           const double complex *v, bool left) {
  double worst = 0;
  for (int64_t j = 0; j < n; j++)
    for (int64_t i = 0; i < n; i++) {
      double complex x = 0;
      for (int64_t k = 0; k < n; k++)
        x += left ? conj(v[k * n + j]) * a[k * n + i] : a[i * n + k] * v[k * n + j];
      worst = fmax(worst, cabs(x - w[j] * (left ? conj(v[i * n + j]) : v[i * n + j])));
    }
  return worst;
}

/* Each column of v: unit norm, its largest component real and positive. */
static void check_normalized(int64_t n, const double complex *v) {
  for (int64_t j = 0; j < n; j++) {
    double norm = 0;
    int64_t big = 0;
    for (int64_t k = 0; k < n; k++) {
      norm = hypot(norm, cabs(v[k * n + j]));
      if (cabs(v[k * n + j]) > cabs(v[big * n + j])) big = k;
    }
    assert_true(fabs(norm - 1) < 1e-12);
    assert_true(creal(v[big * n + j]) > 0 && cimag(v[big * n + j]) == 0);
  }
}

static void test_geev_decomposes_general_matrices(void **state) {
  (void)state;
  uint64_t seed = 5;
  for (int64_t n = 1; n <= 30; n += (n < 6 ? 1 : 8)) {
    size_t nn = (size_t)(n * n);
    double complex *a = malloc(sizeof(double complex) * nn),
                   *w = malloc(sizeof(double complex) * (size_t)n),
                   *vl = malloc(sizeof(double complex) * nn),
                   *vr = malloc(sizeof(double complex) * nn);
    double *ra = malloc(sizeof(double) * nn), *wr = malloc(sizeof(double) * (size_t)n),
           *wi = malloc(sizeof(double) * (size_t)n);
    /* complex */
    for (size_t i = 0; i < nn; i++) a[i] = zrnd(&seed);
    assert_int_equal(kiln_zgeev(n, a, w, vl, vr), 0);
    double tol = 1e3 * (double)n * DBL_EPSILON * frob(a, (int64_t)nn);
    double rr = eig_residual(n, a, w, vr, false), rl = eig_residual(n, a, w, vl, true);
    if (rr > tol || rl > tol)
      fail_msg("complex n=%lld: residuals %g / %g > %g", (long long)n, rr, rl, tol);
    check_normalized(n, vr);
    check_normalized(n, vl);
    /* real: exact conjugate pairs, positive imaginary part first */
    for (size_t i = 0; i < nn; i++) a[i] = ra[i] = rnd(&seed);
    assert_int_equal(kiln_real_geev(n, ra, wr, wi, vl, vr), 0);
    for (int64_t j = 0; j < n; j++) {
      w[j] = CMPLX(wr[j], wi[j]);
      if (wi[j] > 0) {
        assert_true(j + 1 < n && wr[j + 1] == wr[j] && wi[j + 1] == -wi[j]);
        for (int64_t k = 0; k < n; k++) assert_true(vr[k * n + j + 1] == conj(vr[k * n + j]));
      } else if (wi[j] == 0) {
        for (int64_t k = 0; k < n; k++) assert_true(cimag(vr[k * n + j]) == 0);
      } else {
        assert_true(j > 0 && wi[j - 1] == -wi[j]);
      }
    }
    rr = eig_residual(n, a, w, vr, false);
    rl = eig_residual(n, a, w, vl, true);
    if (rr > tol || rl > tol)
      fail_msg("real n=%lld: residuals %g / %g > %g", (long long)n, rr, rl, tol);
    free(a);
    free(w);
    free(vl);
    free(vr);
    free(ra);
    free(wr);
    free(wi);
  }
}

/* Q (n x n column-major) = diag(1, Q') with Q' from the reflectors below the subdiagonal of
 * the column-major r (their layout is geqrf's one row down). */
static void reflectors_to_q(int64_t n, const double complex *r, const double complex *tau,
                            double complex *q) {
  int64_t m = n - 1;
  double complex *sub = calloc((size_t)(m * m + 1), sizeof(double complex));
  for (int64_t j = 0; j < m; j++)
    for (int64_t i = 0; i < m; i++) sub[i + j * m] = r[(i + 1) + j * n];
  kiln_householder_zungqr(m, m, m, sub, m, tau);
  for (int64_t j = 0; j < n; j++)
    for (int64_t i = 0; i < n; i++)
      q[i + j * n] = i == 0 || j == 0 ? (i == j) : sub[(i - 1) + (j - 1) * m];
  free(sub);
}

/* max |(Q^H A Q)[i][j] - want(i, j)| with want from `h` (column-major) where keep(i, j). */
static double similarity_error(int64_t n, const double complex *a, const double complex *q,
                               const double complex *h, int band) {
  double worst = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      double complex x = 0;
      for (int64_t k = 0; k < n; k++)
        for (int64_t l = 0; l < n; l++) x += conj(q[k + i * n]) * a[k + l * n] * q[l + j * n];
      bool in = i <= j + 1 && (band == 0 || j <= i + 1);
      worst = fmax(worst, cabs(x - (in ? h[i + j * n] : 0)));
    }
  return worst;
}

static void test_hessenberg_and_tridiagonal_reductions(void **state) {
  (void)state;
  uint64_t seed = 9;
  enum { n = 12 };
  double complex a[n * n], h[n * n], q[n * n], tau[n], scratch[n * n + n], t[n * n];
  double d[n], e[n];
  for (int64_t i = 0; i < n * n; i++) a[i] = h[i] = zrnd(&seed);
  kiln_householder_zgehrd(n, 0, n - 1, h, tau, scratch);
  reflectors_to_q(n, h, tau, q);
  double tol = 64 * n * DBL_EPSILON * frob(a, n * n);
  assert_true(similarity_error(n, a, q, h, 0) < tol); /* h's reflectors sit under its band */
  for (int lower = 0; lower < 2; lower++) {
    for (int64_t i = 0; i < n; i++) /* Hermitian */
      for (int64_t j = 0; j <= i; j++) {
        a[i + j * n] = i == j ? creal(zrnd(&seed)) : zrnd(&seed);
        a[j + i * n] = conj(a[i + j * n]);
      }
    for (int64_t i = 0; i < n * n; i++) h[i] = a[i];
    kiln_householder_zhetrd(n, lower, h, d, e, tau, scratch);
    for (int64_t i = 0; i < n * n; i++) t[i] = 0;
    for (int64_t i = 0; i < n; i++) t[i + i * n] = d[i];
    for (int64_t i = 0; i + 1 < n; i++) t[(i + 1) + i * n] = t[i + (i + 1) * n] = e[i];
    if (lower) {
      reflectors_to_q(n, h, tau, q);
    } else { /* the upper form is the lower one of J a J: reverse, build, reverse back */
      double complex r[n * n], rt[n], qr[n * n];
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) r[i + j * n] = h[(n - 1 - i) + (n - 1 - j) * n];
      for (int64_t k = 0; k + 1 < n; k++) rt[k] = tau[n - 2 - k];
      reflectors_to_q(n, r, rt, qr);
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) q[i + j * n] = qr[(n - 1 - i) + (n - 1 - j) * n];
    }
    double err = similarity_error(n, a, q, t, 1);
    if (err > tol) fail_msg("hetrd %s: |Q^H A Q - T| %g > %g", lower ? "L" : "U", err, tol);
  }
}

/* The real Schur form of random matrices: Z T Z^T = A, Z orthogonal, T quasi-triangular with
 * standardized 2 x 2 blocks (equal diagonal, b c < 0) whose eigenvalues are wr +- i wi. */
static void test_real_schur_form(void **state) {
  (void)state;
  uint64_t seed = 13;
  for (int64_t n = 1; n <= 40; n += (n < 6 ? 1 : 11)) {
    size_t nn = (size_t)(n * n);
    double *a = malloc(sizeof(double) * nn), *t = malloc(sizeof(double) * nn),
           *z = malloc(sizeof(double) * nn), *wr = malloc(sizeof(double) * (size_t)n),
           *wi = malloc(sizeof(double) * (size_t)n);
    double norm = 0;
    for (size_t i = 0; i < nn; i++) {
      a[i] = rnd(&seed);
      norm = hypot(norm, a[i]);
    }
    assert_int_equal(kiln_real_gees(n, a, t, z, wr, wi), 0);
    double worst = 0, orth = 0;
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        double x = 0, o = 0;
        for (int64_t k = 0; k < n; k++) {
          o += z[k * n + i] * z[k * n + j];
          for (int64_t l = 0; l < n; l++) x += z[i * n + k] * t[k * n + l] * z[j * n + l];
        }
        worst = fmax(worst, fabs(x - a[i * n + j]));
        orth = fmax(orth, fabs(o - (i == j)));
      }
    double tol = 64 * (double)n * DBL_EPSILON * norm;
    if (worst > tol || orth > 64 * (double)n * DBL_EPSILON)
      fail_msg("n=%lld: |Z T Z^T - A| %g, |Z^T Z - I| %g", (long long)n, worst, orth);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j + 1 < i; j++) assert_true(t[i * n + j] == 0);
    for (int64_t i = 0; i < n; i++) {
      if (i + 1 < n && t[(i + 1) * n + i] != 0) { /* a block: standard, and its eigenvalues */
        double b = t[i * n + i + 1], c = t[(i + 1) * n + i];
        assert_true(i + 2 >= n || t[(i + 2) * n + i + 1] == 0);
        assert_true(t[i * n + i] == t[(i + 1) * n + i + 1] && b * c < 0);
        assert_true(wr[i] == t[i * n + i] && wr[i + 1] == wr[i] && wi[i] > 0 &&
                    wi[i + 1] == -wi[i]);
        assert_true(fabs(wi[i] * wi[i] + b * c) <= 1e-12 * (1 + fabs(b * c)));
        i++;
      } else {
        assert_true(wr[i] == t[i * n + i] && wi[i] == 0);
      }
    }
    free(a);
    free(t);
    free(z);
    free(wr);
    free(wi);
  }
}

static void test_non_finite_input_is_reported(void **state) {
  (void)state;
  double complex a[4] = {1, CMPLX(NAN, 0), CMPLX(NAN, 0), 2}, v[4], u[4], vt[4];
  double w[2], s[2];
  assert_int_equal(kiln_jacobi_zheev(2, a, true, w, v), 1);
  assert_true(isnan(w[0]) && isnan(creal(v[3])) && isnan(cimag(v[3])));
  double complex b[4] = {1, CMPLX(0, INFINITY), 0, 2};
  assert_int_equal(kiln_jacobi_zsvd(2, 2, b, s, u, 2, vt, 2), 1);
  assert_true(isnan(s[1]) && isnan(creal(u[0])) && isnan(cimag(vt[3])));
  double complex c[4] = {1, 2, CMPLX(NAN, 1), 3}, ew[2];
  assert_int_equal(kiln_zgeev(2, c, ew, NULL, v), 1);
  assert_true(isnan(creal(ew[0])) && isnan(cimag(v[2])));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_qr_factors_tall_and_square_matrices),
      cmocka_unit_test(test_eigh_diagonalizes_hermitian_matrices),
      cmocka_unit_test(test_svd_reconstructs_every_shape),
      cmocka_unit_test(test_geev_decomposes_general_matrices),
      cmocka_unit_test(test_hessenberg_and_tridiagonal_reductions),
      cmocka_unit_test(test_real_schur_form),
      cmocka_unit_test(test_non_finite_input_is_reported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
