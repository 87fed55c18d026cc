/* Tridiagonal solve with partial pivoting; see gtsv.h. Step i eliminates sub[i] below diag[i];
 * when |sub[i]| > |diag[i]| rows i and i + 1 swap first, and row i then reaches two columns
 * right (sup2[i]). Back substitution uses diag, sup and sup2. */
#include "base/gtsv.h"

#include <math.h>
#include <stdlib.h>

int64_t kiln_gtsv(int64_t n, int64_t nrhs, double *sub, double *diag, double *sup, double *b) {
  if (n <= 0) return 0;
  double *sup2 = calloc((size_t)n, sizeof(double));
  if (!sup2) return n + 1;
  int64_t info = 0;
  for (int64_t i = 0; i + 1 < n && !info; i++) {
    double *row = b + i * nrhs, *next = row + nrhs;
    if (fabs(diag[i]) >= fabs(sub[i])) { /* no swap */
      if (diag[i] == 0) {
        info = i + 1;
        break;
      }
      double f = sub[i] / diag[i];
      diag[i + 1] -= f * sup[i];
      for (int64_t k = 0; k < nrhs; k++) next[k] -= f * row[k];
      sup2[i] = 0;
    } else { /* rows i and i + 1 swap */
      double f = diag[i] / sub[i];
      diag[i] = sub[i];
      double t = diag[i + 1];
      diag[i + 1] = sup[i] - f * t;
      sup[i] = t;
      if (i + 2 < n) {
        sup2[i] = sup[i + 1];
        sup[i + 1] = -f * sup2[i];
      }
      for (int64_t k = 0; k < nrhs; k++) {
        double r = row[k];
        row[k] = next[k];
        next[k] = r - f * next[k];
      }
    }
  }
  if (!info && diag[n - 1] == 0) info = n;
  if (!info) {
    for (int64_t k = 0; k < nrhs; k++) {
      b[(n - 1) * nrhs + k] /= diag[n - 1];
      if (n > 1)
        b[(n - 2) * nrhs + k] =
            (b[(n - 2) * nrhs + k] - sup[n - 2] * b[(n - 1) * nrhs + k]) / diag[n - 2];
      for (int64_t i = n - 3; i >= 0; i--)
        b[i * nrhs + k] =
            (b[i * nrhs + k] - sup[i] * b[(i + 1) * nrhs + k] - sup2[i] * b[(i + 2) * nrhs + k]) /
            diag[i];
    }
  }
  free(sup2);
  return info;
}
