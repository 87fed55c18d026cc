/* Jacobi methods in double precision. Symmetric eigendecomposition by the cyclic method: what the
 * evaluator and the host runtime both compute for jaxlib's lapack_{s,d}syevd_ffi (jnp.linalg
 * .eigh on CPU), sharing this code so their results agree to the bit. Eigenvalues come out
 * ascending (as LAPACK's ?syevd), each eigenvector with unit norm and its largest-magnitude
 * component positive (eigenvectors are defined up to sign; LAPACK's own choice is not
 * reproduced). Rotations stop when no off-diagonal element is larger than DBL_MIN nor than
 * eps times its diagonal pair (Demmel and Veselic's relative test), or after 64 sweeps.
 *
 * Thread-safe (no state). */
#ifndef KILN_BASE_JACOBI_EIGH_H_
#define KILN_BASE_JACOBI_EIGH_H_

#include <stdbool.h>
#include <stdint.h>

/* The n x n symmetric matrix `a` (row-major; only the `lower` triangle read, or the upper)
 * -> eigenvalues `w` (n, ascending) and, when `v` is not NULL, eigenvectors as v's columns
 * (row-major n x n: v[i * n + j] is component i of eigenvector j). `a` is overwritten.
 * Returns 0, or 1 (LAPACK's info > 0) when 64 sweeps did not converge or the input holds a
 * NaN or an infinity (w and v are then NaN). */
int kiln_jacobi_eigh(int64_t n, double *a, bool lower, double *w, double *v);

/* The SVD a = u diag(s) vt of the m x n row-major `a` (not written) by one-sided Jacobi
 * (Hestenes) rotations, what the evaluator and the host both compute for jaxlib's
 * lapack_{s,d}gesdd_ffi: s (min(m, n)) descending; u (m x ucols, row-major) its first ucols
 * left vectors and vt (vrows x n) its first vrows right vectors as rows, ucols / vrows from
 * min(m, n) (reduced) to m / n (full), either NULL when not wanted. The vectors of singular
 * values below eps ||a|| (zero to working precision) and those past min(m, n) complete an
 * orthonormal basis (the columns past the others' of the full Q of their Householder QR); each
 * pair's sign makes the largest component of its vector on the shorter side (v when m >= n, u
 * otherwise) positive. Returns 0, 1 (no convergence in 64 sweeps or a NaN or infinity: the outputs
 * NaN), or -1 when out of memory. */
int kiln_jacobi_svd(int64_t m, int64_t n, const double *a, double *s, double *u, int64_t ucols,
                    double *vt, int64_t vrows);

#endif /* KILN_BASE_JACOBI_EIGH_H_ */
