/* Householder QR (householder.h). */
#include "base/householder.h"

#include <math.h>

#define A(i, j) a[(i) + (j)*lda]

/* Applies H = I - tau v v^T (v = column c below row r, with v[r] = 1 implied: the
 * entry at (r, c) is not read) from the left to
 * columns c+1 .. n-1, rows r .. m-1. */
static void apply_left(int64_t m, int64_t n, double *a, int64_t lda, int64_t r, int64_t c,
                       double tau) {
  if (tau == 0) return;
  for (int64_t j = c + 1; j < n; j++) {
    double w = A(r, j);
    for (int64_t i = r + 1; i < m; i++) w += A(i, c) * A(i, j);
    w *= tau;
    A(r, j) -= w;
    for (int64_t i = r + 1; i < m; i++) A(i, j) -= w * A(i, c);
  }
}

void kiln_householder_geqrf(int64_t m, int64_t n, double *a, int64_t lda, double *tau) {
  int64_t k = m < n ? m : n;
  for (int64_t c = 0; c < k; c++) {
    double alpha = A(c, c), xnorm = 0;
    for (int64_t i = c + 1; i < m; i++) xnorm = hypot(xnorm, A(i, c));
    if (xnorm == 0) {
      tau[c] = 0;
      continue;
    }
    double beta = -copysign(hypot(alpha, xnorm), alpha);
    tau[c] = (beta - alpha) / beta;
    double scale = 1 / (alpha - beta);
    for (int64_t i = c + 1; i < m; i++) A(i, c) *= scale;
    A(c, c) = beta;
    apply_left(m, n, a, lda, c, c, tau[c]);
  }
}

void kiln_householder_orgqr(int64_t m, int64_t n, int64_t k, double *a, int64_t lda,
                            const double *tau) {
  /* Columns k .. n-1 start as the identity's. */
  for (int64_t j = k; j < n; j++)
    for (int64_t i = 0; i < m; i++) A(i, j) = i == j ? 1 : 0;
  for (int64_t c = k - 1; c >= 0; c--) {
    if (c < n - 1) apply_left(m, n, a, lda, c, c, tau[c]);
    for (int64_t i = c + 1; i < m; i++) A(i, c) *= -tau[c];
    A(c, c) = 1 - tau[c];
    for (int64_t i = 0; i < c; i++) A(i, c) = 0;
  }
}
