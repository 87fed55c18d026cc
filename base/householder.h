/* Householder QR in double precision on column-major matrices, with LAPACK's conventions
 * (?geqr2 / ?org2r, reflectors from ?larfg): what the evaluator computes for jaxlib's
 * cusolver_geqrf / cusolver_orgqr custom calls, and the host runtime's fallback when no LAPACK
 * library can be loaded. The two sides share this code so their conventions cannot drift.
 *
 * Thread-safe (no state). */
#ifndef KILN_BASE_HOUSEHOLDER_H_
#define KILN_BASE_HOUSEHOLDER_H_

#include <stdint.h>

/* Factors the m x n matrix `a` (leading dimension lda >= m) as Q R: R on and above the
 * diagonal, the reflectors' vectors below it (their leading 1 implied), and their scalars in
 * tau[0 .. min(m, n) - 1], as LAPACK's ?geqrf leaves them. Each reflector is
 * H = I - tau v v^T with beta = -sign(alpha) * ||(alpha, x)||; an all-zero column below the
 * diagonal gives tau = 0 (H = I). */
void kiln_householder_geqrf(int64_t m, int64_t n, double *a, int64_t lda, double *tau);

/* Overwrites the m x n matrix `a` (n <= m, k <= n; its first k columns holding reflectors as
 * kiln_householder_geqrf leaves them) with the first n columns of Q = H(0) H(1) ... H(k-1),
 * as LAPACK's ?orgqr. */
void kiln_householder_orgqr(int64_t m, int64_t n, int64_t k, double *a, int64_t lda,
                            const double *tau);

#endif /* KILN_BASE_HOUSEHOLDER_H_ */
