/* Cyclic Jacobi eigendecomposition; see jacobi_eigh.h. Each rotation J zeroes a[p][q] of
 * A' = J^T A J with J's (p, q) block [[c, s], [-s, c]]: t = s / c is the smaller root of
 * t^2 + 2 theta t - 1 = 0 for theta = (a_qq - a_pp) / (2 a_pq), so a_pp' = a_pp - t a_pq,
 * a_qq' = a_qq + t a_pq, and columns / rows p, q mix as (c x_p - s x_q, s x_p + c x_q). */
#include "base/jacobi_eigh.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/householder.h"

enum { kMaxSweeps = 64 };

static void rotate(double *x, double *y, double c, double s) {
  double a = *x, b = *y;
  *x = c * a - s * b;
  *y = s * a + c * b;
}

/* One sweep over every pair p < q; the number of rotations made. */
static int64_t sweep(int64_t n, double *a, double *v) {
  int64_t rotations = 0;
  for (int64_t p = 0; p < n; p++) {
    for (int64_t q = p + 1; q < n; q++) {
      double apq = a[p * n + q], app = a[p * n + p], aqq = a[q * n + q];
      if (fabs(apq) <= DBL_MIN || fabs(apq) <= DBL_EPSILON * sqrt(fabs(app * aqq))) {
        a[p * n + q] = a[q * n + p] = 0;
        continue;
      }
      double theta = (aqq - app) / (2 * apq);
      double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1));
      double c = 1 / sqrt(t * t + 1), s = t * c;
      for (int64_t k = 0; k < n; k++) rotate(&a[k * n + p], &a[k * n + q], c, s); /* A J */
      for (int64_t k = 0; k < n; k++) rotate(&a[p * n + k], &a[q * n + k], c, s); /* J^T . */
      a[p * n + p] = app - t * apq;
      a[q * n + q] = aqq + t * apq;
      a[p * n + q] = a[q * n + p] = 0;
      if (v)
        for (int64_t k = 0; k < n; k++) rotate(&v[k * n + p], &v[k * n + q], c, s);
      rotations++;
    }
  }
  return rotations;
}

int kiln_jacobi_eigh(int64_t n, double *a, bool lower, double *w, double *v) {
  bool finite = true;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      /* the full symmetric matrix from the triangle read */
      bool in = lower ? j <= i : j >= i;
      if (!in) a[i * n + j] = a[j * n + i];
      finite = finite && isfinite(a[i * n + j]);
    }
  if (v)
    for (int64_t i = 0; i < n * n; i++) v[i] = i % (n + 1) == 0;
  int64_t sweeps = 0;
  while (finite && sweeps < kMaxSweeps && sweep(n, a, v) > 0) sweeps++;
  if (!finite || sweeps == kMaxSweeps) {
    for (int64_t i = 0; i < n; i++) w[i] = NAN;
    for (int64_t i = 0; v && i < n * n; i++) v[i] = NAN;
    return 1;
  }
  for (int64_t i = 0; i < n; i++) w[i] = a[i * n + i];
  /* ascending, each vector following its value (selection: stable enough for ties) */
  for (int64_t i = 0; i < n; i++) {
    int64_t m = i;
    for (int64_t j = i + 1; j < n; j++)
      if (w[j] < w[m]) m = j;
    if (m == i) continue;
    double t = w[i];
    w[i] = w[m];
    w[m] = t;
    for (int64_t k = 0; v && k < n; k++) {
      t = v[k * n + i];
      v[k * n + i] = v[k * n + m];
      v[k * n + m] = t;
    }
  }
  for (int64_t j = 0; v && j < n; j++) {
    int64_t big = 0;
    for (int64_t k = 1; k < n; k++)
      if (fabs(v[k * n + j]) > fabs(v[big * n + j])) big = k;
    if (v[big * n + j] < 0)
      for (int64_t k = 0; k < n; k++) v[k * n + j] = -v[k * n + j];
  }
  return 0;
}

/* ---- SVD: one-sided Jacobi (Hestenes) ---- */

/* Orthogonalizes the columns of W (M x N, column-major) by rotations, V (N x N) collecting
 * them: afterwards W = A V has orthogonal columns. Returns 0, or 1 without convergence. */
static int one_sided(int64_t M, int64_t N, double *W, double *V) {
  for (int64_t i = 0; i < N * N; i++) V[i] = i % (N + 1) == 0;
  /* a column below eps ||A|| is zero to working precision: rotating it against the others
   * only stirs rounding noise (a rank-deficient matrix would never settle) */
  double frob2 = 0;
  for (int64_t i = 0; i < M * N; i++) frob2 += W[i] * W[i];
  double negligible = DBL_EPSILON * DBL_EPSILON * frob2;
  for (int sweeps = 0; sweeps < kMaxSweeps; sweeps++) {
    int64_t rotations = 0;
    for (int64_t p = 0; p < N; p++) {
      for (int64_t q = p + 1; q < N; q++) {
        double alpha = 0, beta = 0, gamma = 0;
        for (int64_t i = 0; i < M; i++) {
          double x = W[p * M + i], y = W[q * M + i];
          alpha += x * x;
          beta += y * y;
          gamma += x * y;
        }
        if (fabs(gamma) <= DBL_MIN || fabs(gamma) <= DBL_EPSILON * sqrt(alpha * beta) ||
            alpha <= negligible || beta <= negligible)
          continue;
        double zeta = (beta - alpha) / (2 * gamma);
        double t = (zeta >= 0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(zeta * zeta + 1));
        double c = 1 / sqrt(t * t + 1), s = t * c;
        for (int64_t i = 0; i < M; i++) rotate(&W[p * M + i], &W[q * M + i], c, s);
        for (int64_t i = 0; i < N; i++) rotate(&V[p * N + i], &V[q * N + i], c, s);
        rotations++;
      }
    }
    if (!rotations) return 0;
  }
  return 1;
}

/* The columns of the M x C column-major U from `r` on (zero singular values' and those past
 * N; a suffix, the values being sorted) made an orthonormal basis of the complement of the
 * first r: Householder QR of those r columns (base/householder.h), the full Q's columns past r.
 * False when out of memory. */
static bool complete(int64_t M, int64_t C, int64_t r, double *U) {
  if (r >= C) return true;
  double *q = malloc(sizeof(double) * (size_t)(M * M + M + 1));
  if (!q) return false;
  double *tau = q + M * M;
  memcpy(q, U, sizeof(double) * (size_t)(M * r));
  kiln_householder_geqrf(M, r, q, M, tau);
  kiln_householder_orgqr(M, M, r, q, M, tau);
  memcpy(U + M * r, q + M * r, sizeof(double) * (size_t)(M * (C - r)));
  free(q);
  return true;
}

/* The SVD of W (M x N column-major, M >= N): singular values descending in sig (N), left
 * vectors in U (M x C column-major, C >= N; columns past N and those of zero singular values
 * completed), right vectors in V (N x N column-major), each pair's sign making the right
 * vector's largest component positive. */
static int svd_tall(int64_t M, int64_t N, int64_t C, double *W, double *sig, double *U, double *V) {
  double frob2 = 0;
  for (int64_t i = 0; i < M * N; i++) frob2 += W[i] * W[i];
  int bad = one_sided(M, N, W, V);
  for (int64_t j = 0; j < N; j++) {
    double norm = 0;
    for (int64_t i = 0; i < M; i++) norm += W[j * M + i] * W[j * M + i];
    sig[j] = sqrt(norm);
  }
  /* descending; W's and V's columns follow */
  for (int64_t i = 0; i < N; i++) {
    int64_t m = i;
    for (int64_t j = i + 1; j < N; j++)
      if (sig[j] > sig[m]) m = j;
    if (m == i) continue;
    double t = sig[i];
    sig[i] = sig[m];
    sig[m] = t;
    for (int64_t k = 0; k < M; k++) {
      t = W[i * M + k];
      W[i * M + k] = W[m * M + k];
      W[m * M + k] = t;
    }
    for (int64_t k = 0; k < N; k++) {
      t = V[i * N + k];
      V[i * N + k] = V[m * N + k];
      V[m * N + k] = t;
    }
  }
  int64_t r = N; /* the columns from r on are completed */
  for (int64_t j = 0; j < N; j++) {
    int64_t big = 0;
    for (int64_t k = 1; k < N; k++)
      if (fabs(V[j * N + k]) > fabs(V[j * N + big])) big = k;
    double sign = V[j * N + big] < 0 ? -1 : 1;
    for (int64_t k = 0; k < N; k++) V[j * N + k] *= sign;
    /* a singular value below eps ||A|| leaves only rounding in its column: completed */
    if (!(sig[j] > DBL_EPSILON * sqrt(frob2)) && j < r) r = j;
    for (int64_t i = 0; i < M; i++) U[j * M + i] = j >= r ? 0 : sign * W[j * M + i] / sig[j];
  }
  return complete(M, C, r, U) ? bad : -1;
}

int kiln_jacobi_svd(int64_t m, int64_t n, const double *a, double *s, double *u, int64_t ucols,
                    double *vt, int64_t vrows) {
  bool tall = m >= n;
  int64_t M = tall ? m : n, N = tall ? n : m;
  /* U side of the internal decomposition: the caller's u (tall) or vt (wide) */
  int64_t C = tall ? (u ? ucols : N) : (vt ? vrows : N);
  if (C < N) C = N;
  double *W = malloc(sizeof(double) * (size_t)(M * N + N * N + M * C + 1));
  if (!W) return -1;
  double *V = W + M * N, *U = V + N * N;
  bool finite = true;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double x = a[i * n + j];
      finite = finite && isfinite(x);
      if (tall)
        W[j * M + i] = x; /* column j of a */
      else
        W[i * M + j] = x; /* column i of a^T */
    }
  int bad = finite ? svd_tall(M, N, C, W, s, U, V) : 1;
  if (bad < 0) {
    free(W);
    return -1;
  }
  if (bad) {
    for (int64_t i = 0; i < N; i++) s[i] = NAN;
    for (int64_t i = 0; u && i < m * ucols; i++) u[i] = NAN;
    for (int64_t i = 0; vt && i < vrows * n; i++) vt[i] = NAN;
  } else if (tall) { /* a = U S V^T */
    for (int64_t i = 0; u && i < m; i++)
      for (int64_t j = 0; j < ucols; j++) u[i * ucols + j] = U[j * M + i];
    for (int64_t j = 0; vt && j < vrows; j++)
      for (int64_t i = 0; i < n; i++) vt[j * n + i] = V[j * N + i];
  } else { /* a^T = U S V^T, so a = V S U^T */
    for (int64_t i = 0; u && i < m; i++)
      for (int64_t j = 0; j < ucols; j++) u[i * ucols + j] = V[j * N + i];
    for (int64_t j = 0; vt && j < vrows; j++)
      for (int64_t i = 0; i < n; i++) vt[j * n + i] = U[j * M + i];
  }
  free(W);
  return bad;
}
