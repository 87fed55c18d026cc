/* Complex counterparts of base/householder.h and base/jacobi_eigh.h, in double precision:
 * Householder QR with LAPACK's complex conventions (?geqr2 / ?ung2r, reflectors from ?larfg),
 * the Hermitian eigendecomposition by cyclic Jacobi rotations and the SVD by one-sided Jacobi
 * rotations. What the evaluator and the host runtime both compute for jaxlib's
 * lapack_{c,z}{geqrf,ungqr,heevd,gesdd}_ffi, sharing this code so they cannot drift.
 *
 * Each Jacobi rotation first turns the element it zeroes real by a unit phase on one
 * column / row, then rotates as the real method does; the stopping rules, sweep limit,
 * orderings and failure values are the real methods'. Phases: each eigenvector, and each
 * singular pair's vector on the shorter side (v when m >= n, u otherwise), is scaled by a unit
 * complex number that makes its largest-magnitude component real and positive (vectors are
 * defined up to such a factor; LAPACK's own choice is not reproduced).
 *
 * Thread-safe (no state). */
#ifndef KILN_BASE_ZLINALG_H_
#define KILN_BASE_ZLINALG_H_

#include <complex.h>
#include <stdbool.h>
#include <stdint.h>

/* Factors the m x n column-major `a` (leading dimension lda >= m) as Q R as LAPACK's ?geqrf
 * leaves it: R on and above the diagonal (a real diagonal), the reflectors' vectors below it
 * (their leading 1 implied), their scalars in tau[0 .. min(m, n) - 1]. H = I - tau v v^H with
 * beta = -sign(Re alpha) ||(alpha, x)||, tau = (beta - alpha) / beta; tau = 0 (H = I) when x
 * is zero and alpha real. */
void kiln_householder_zgeqrf(int64_t m, int64_t n, double complex *a, int64_t lda,
                             double complex *tau);

/* Overwrites the m x n `a` (n <= m, k <= n; its first k columns holding reflectors as
 * kiln_householder_zgeqrf leaves them) with the first n columns of Q = H(0) ... H(k-1), as
 * LAPACK's ?ungqr. */
void kiln_householder_zungqr(int64_t m, int64_t n, int64_t k, double complex *a, int64_t lda,
                             const double complex *tau);

/* LAPACK's ?gehrd on the n x n column-major `h` (jax.lax.linalg.hessenberg): reduced to upper
 * Hessenberg form in rows and columns lo .. hi (0-based; LAPACK's ilo - 1 .. ihi - 1) by
 * reflectors H = I - tau v v^H (h := H^H h H), each column's vector kept below the subdiagonal
 * (its leading 1 implied), tau (n - 1) zero outside lo .. hi - 1. scratch: n entries. */
void kiln_householder_zgehrd(int64_t n, int64_t lo, int64_t hi, double complex *h,
                             double complex *tau, double complex *scratch);

/* LAPACK's ?sytrd / ?hetrd on the n x n column-major Hermitian `a` (jax.lax.linalg.tridiagonal):
 * only the `lower` triangle read (or the upper; the diagonal's imaginary parts ignored) and
 * written: the tridiagonal's diagonal d (n) and off-diagonal e (n - 1, real) on it, the
 * reflectors' vectors past it (lower: below the subdiagonal, column by column from the first;
 * upper: above the superdiagonal, from the last column), their scalars in tau (n - 1, in
 * column order); the other triangle is left as it was. scratch: n * n + n entries. */
void kiln_householder_zhetrd(int64_t n, bool lower, double complex *a, double *d, double *e,
                             double complex *tau, double complex *scratch);

/* The n x n Hermitian `a` (row-major; only the `lower` triangle read, or the upper; the
 * diagonal's imaginary parts ignored) -> eigenvalues `w` (n, ascending) and, when `v` is not
 * NULL, eigenvectors as v's columns (v[i * n + j] is component i of eigenvector j). `a` is
 * overwritten. Returns 0, or 1 when 64 sweeps did not converge or the input holds a NaN or an
 * infinity (w and v are then NaN). */
int kiln_jacobi_zheev(int64_t n, double complex *a, bool lower, double *w, double complex *v);

/* The SVD a = u diag(s) vt of the m x n row-major `a` (not written): s (min(m, n))
 * descending; u (m x ucols, row-major) its first ucols left vectors and vt (vrows x n) the
 * conjugate transposes of its first vrows right vectors, as kiln_jacobi_svd (base/
 * jacobi_eigh.h) describes for the real case. Returns 0, 1 (no convergence or a NaN or
 * infinity: the outputs NaN), or -1 when out of memory. */
int kiln_jacobi_zsvd(int64_t m, int64_t n, const double complex *a, double *s, double complex *u,
                     int64_t ucols, double complex *vt, int64_t vrows);

/* The eigenvalues `w` (n) of the n x n row-major `a` (not written) and, where not NULL, its
 * left eigenvectors `vl` (u^H a = w u^H) and right ones `vr` (a v = w v) as columns of n x n
 * row-major arrays, each of unit norm with its largest component real and positive:
 * Householder reduction to Hessenberg form, single-shift complex QR steps to the Schur form
 * T = Q^H a Q (LAPACK's zlahqr scheme: Wilkinson's shift, an exceptional shift every 10th
 * step, at most 30 max(10, n) steps per eigenvalue), eigenvalues in T's diagonal order,
 * vectors by substitution in T (a zero divisor replaced by eps ||a||, as ztrevc). Returns
 * 0, 1 (no convergence or a NaN or infinity: the outputs NaN) or -1 when out of memory. */
int kiln_zgeev(int64_t n, const double complex *a, double complex *w, double complex *vl,
               double complex *vr);

/* The Schur form a = z t z^H of the n x n row-major `a` (not written): t upper triangular with
 * the eigenvalues `w` on its diagonal (kiln_zgeev's iteration and order), z unitary (not
 * computed when NULL), both row-major. Returns 0, 1 (no convergence or a NaN or infinity: the
 * outputs NaN) or -1 when out of memory. */
int kiln_zgees(int64_t n, const double complex *a, double complex *t, double complex *z,
               double complex *w);

/* The real Schur form a = z t z^T of the n x n row-major real `a` (not written), as LAPACK's
 * dgees with no sorting (jax.scipy.linalg.schur): Householder reduction to Hessenberg form,
 * then Francis double-shift steps (dlahqr's scheme: an exceptional shift every 10th step, at
 * most 30 max(10, n) steps per eigenvalue), each 2 x 2 diagonal block standardized as it
 * deflates (dlanv2: upper triangular for real eigenvalues, equal diagonal with b c < 0 for a
 * complex pair), z orthogonal (not computed when NULL); the eigenvalues from t's blocks, a
 * pair's positive imaginary part first. Returns 0, 1 (no convergence or a NaN or infinity:
 * the outputs NaN) or -1 when out of memory. */
int kiln_real_gees(int64_t n, const double *a, double *t, double *z, double *wr, double *wi);

/* kiln_zgeev of a real matrix, in LAPACK's ?geev form: eigenvalues as real and imaginary
 * parts, conjugate pairs adjacent with the positive imaginary part first and exactly
 * conjugate (values and vectors), real eigenvalues (imaginary part within 64 n eps ||a||)
 * with real vectors. */
int kiln_real_geev(int64_t n, const double *a, double *wr, double *wi, double complex *vl,
                   double complex *vr);

/* base/gtsv.h's kiln_gtsv for complex systems (LAPACK's zgtsv: the pivot the larger of the
 * diagonal and the subdiagonal element by |re| + |im|). */
int64_t kiln_zgtsv(int64_t n, int64_t nrhs, double complex *sub, double complex *diag,
                   double complex *sup, double complex *b);

#endif /* KILN_BASE_ZLINALG_H_ */
