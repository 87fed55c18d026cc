/* Tridiagonal solve with partial pivoting in double precision (LAPACK's ?gtsv algorithm:
 * Gaussian elimination, each step taking the larger of the pivot and the subdiagonal element
 * below it, a row swap filling a second superdiagonal): what the evaluator and the host both
 * compute for jaxlib's lapack_{s,d}gtsv_ffi (lax.linalg.tridiagonal_solve on CPU), one code
 * so their results agree to the bit.
 *
 * Thread-safe (no state). */
#ifndef KILN_BASE_GTSV_H_
#define KILN_BASE_GTSV_H_

#include <stdint.h>

/* Solves A X = B in place for the n x n tridiagonal A (sub[i] = A[i+1][i] and sup[i] =
 * A[i][i+1] for i < n - 1, diag[i] = A[i][i]) and B (n x nrhs, row-major; X on return).
 * sub, diag and sup are overwritten. Returns 0, or 1 + the row whose pivot was exactly zero
 * (LAPACK's info; X is then unspecified). */
int64_t kiln_gtsv(int64_t n, int64_t nrhs, double *sub, double *diag, double *sup, double *b);

#endif /* KILN_BASE_GTSV_H_ */
