/* Complex Householder QR and Jacobi methods; see zlinalg.h. A Jacobi step on the pair (p, q)
 * whose coupling g e^(i phi) (a[p][q] for the eigensolver, column p's inner product with
 * column q for the SVD) is not negligible scales column q (and for the eigensolver row q by
 * the conjugate) by e^(-i phi), which leaves the coupling real, then rotates p and q by the
 * real (c, s) the real method would pick for the real 2 x 2 problem. */
#include "base/zlinalg.h"

#include "base/cmplx.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { kMaxSweeps = 64 };

#define A(i, j) a[(i) + (j)*lda]

/* Applies H = I - tau v v^H (v = column c below row r, v[r] = 1 implied: (r, c) is not read)
 * from the left to columns c+1 .. n-1, rows r .. m-1. */
static void apply_left(int64_t m, int64_t n, double complex *a, int64_t lda, int64_t r, int64_t c,
                       double complex tau) {
  if (tau == 0) return;
  for (int64_t j = c + 1; j < n; j++) {
    double complex w = A(r, j);
    for (int64_t i = r + 1; i < m; i++) w += conj(A(i, c)) * A(i, j);
    w *= tau;
    A(r, j) -= w;
    for (int64_t i = r + 1; i < m; i++) A(i, j) -= w * A(i, c);
  }
}

void kiln_householder_zgeqrf(int64_t m, int64_t n, double complex *a, int64_t lda,
                             double complex *tau) {
  int64_t k = m < n ? m : n;
  for (int64_t c = 0; c < k; c++) {
    double complex alpha = A(c, c);
    double xnorm = 0;
    for (int64_t i = c + 1; i < m; i++) xnorm = hypot(xnorm, cabs(A(i, c)));
    if (xnorm == 0 && cimag(alpha) == 0) {
      tau[c] = 0;
      continue;
    }
    double re = creal(alpha), im = cimag(alpha);
    double beta = -copysign(hypot(hypot(re, im), xnorm), re);
    tau[c] = CMPLX((beta - re) / beta, -im / beta);
    double complex scale = 1 / (alpha - beta);
    for (int64_t i = c + 1; i < m; i++) A(i, c) *= scale;
    A(c, c) = beta;
    /* geqr2 applies H^H = I - conj(tau) v v^H to the columns after c */
    apply_left(m, n, a, lda, c, c, conj(tau[c]));
  }
}

void kiln_householder_zungqr(int64_t m, int64_t n, int64_t k, double complex *a, int64_t lda,
                             const double complex *tau) {
  for (int64_t j = k; j < n; j++)
    for (int64_t i = 0; i < m; i++) A(i, j) = i == j ? 1 : 0;
  for (int64_t c = k - 1; c >= 0; c--) {
    if (c < n - 1) apply_left(m, n, a, lda, c, c, tau[c]);
    for (int64_t i = c + 1; i < m; i++) A(i, c) *= -tau[c];
    A(c, c) = 1 - tau[c];
    for (int64_t i = 0; i < c; i++) A(i, c) = 0;
  }
}

#undef A

static void rotate(double complex *x, double complex *y, double c, double s) {
  double complex a = *x, b = *y;
  *x = c * a - s * b;
  *y = s * a + c * b;
}

/* t = s / c of the rotation zeroing the real pair's coupling: the smaller root of
 * t^2 + 2 theta t - 1 = 0. */
static void rotation(double theta, double *c, double *s, double *t) {
  *t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1));
  *c = 1 / sqrt(*t * *t + 1);
  *s = *t * *c;
}

/* Scales the vector x[0], x[stride], ... (count components) so its largest-magnitude
 * component (the first of equals) is real and positive; returns the factor used. */
static double complex normalize_phase(double complex *x, int64_t count, int64_t stride) {
  int64_t big = 0;
  for (int64_t k = 1; k < count; k++)
    if (cabs(x[k * stride]) > cabs(x[big * stride])) big = k;
  double mag = count ? cabs(x[big * stride]) : 0;
  if (mag == 0) return 1;
  double complex f = conj(x[big * stride]) / mag;
  for (int64_t k = 0; k < count; k++) x[k * stride] *= f;
  x[big * stride] = mag;
  return f;
}

/* ---- Hermitian eigendecomposition ---- */

static int64_t sweep(int64_t n, double complex *a, double complex *v) {
  int64_t rotations = 0;
  for (int64_t p = 0; p < n; p++) {
    for (int64_t q = p + 1; q < n; q++) {
      double g = cabs(a[p * n + q]), app = creal(a[p * n + p]), aqq = creal(a[q * n + q]);
      if (g <= DBL_MIN || g <= DBL_EPSILON * sqrt(fabs(app * aqq))) {
        a[p * n + q] = a[q * n + p] = 0;
        continue;
      }
      double complex u = a[p * n + q] / g;
      for (int64_t k = 0; k < n; k++) a[k * n + q] *= conj(u); /* A Phi */
      for (int64_t k = 0; k < n; k++) a[q * n + k] *= u;       /* Phi^H . */
      double c, s, t;
      rotation((aqq - app) / (2 * g), &c, &s, &t);
      for (int64_t k = 0; k < n; k++) rotate(&a[k * n + p], &a[k * n + q], c, s);
      for (int64_t k = 0; k < n; k++) rotate(&a[p * n + k], &a[q * n + k], c, s);
      a[p * n + p] = app - t * g;
      a[q * n + q] = aqq + t * g;
      a[p * n + q] = a[q * n + p] = 0;
      for (int64_t k = 0; v && k < n; k++) {
        v[k * n + q] *= conj(u);
        rotate(&v[k * n + p], &v[k * n + q], c, s);
      }
      rotations++;
    }
  }
  return rotations;
}

int kiln_jacobi_zheev(int64_t n, double complex *a, bool lower, double *w, double complex *v) {
  bool finite = true;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      bool in = lower ? j <= i : j >= i;
      if (i == j) a[i * n + j] = creal(a[i * n + j]);
      if (!in) a[i * n + j] = conj(a[j * n + i]);
      finite = finite && isfinite(creal(a[i * n + j])) && isfinite(cimag(a[i * n + j]));
    }
  if (v)
    for (int64_t i = 0; i < n * n; i++) v[i] = i % (n + 1) == 0;
  int64_t sweeps = 0;
  while (finite && sweeps < kMaxSweeps && sweep(n, a, v) > 0) sweeps++;
  if (!finite || sweeps == kMaxSweeps) {
    for (int64_t i = 0; i < n; i++) w[i] = NAN;
    for (int64_t i = 0; v && i < n * n; i++) v[i] = CMPLX(NAN, NAN);
    return 1;
  }
  for (int64_t i = 0; i < n; i++) w[i] = creal(a[i * n + i]);
  for (int64_t i = 0; i < n; i++) {
    int64_t m = i;
    for (int64_t j = i + 1; j < n; j++)
      if (w[j] < w[m]) m = j;
    if (m == i) continue;
    double t = w[i];
    w[i] = w[m];
    w[m] = t;
    for (int64_t k = 0; v && k < n; k++) {
      double complex x = v[k * n + i];
      v[k * n + i] = v[k * n + m];
      v[k * n + m] = x;
    }
  }
  for (int64_t j = 0; v && j < n; j++) normalize_phase(v + j, n, n);
  return 0;
}

/* ---- SVD: one-sided Jacobi ---- */

/* W (M x N column-major) made of orthogonal columns by rotations, V (N x N) collecting them:
 * W = A V. Returns 0, or 1 without convergence. */
static int one_sided(int64_t M, int64_t N, double complex *W, double complex *V) {
  for (int64_t i = 0; i < N * N; i++) V[i] = i % (N + 1) == 0;
  double frob2 = 0;
  for (int64_t i = 0; i < M * N; i++) frob2 += creal(W[i] * conj(W[i]));
  double negligible = DBL_EPSILON * DBL_EPSILON * frob2;
  for (int sweeps = 0; sweeps < kMaxSweeps; sweeps++) {
    int64_t rotations = 0;
    for (int64_t p = 0; p < N; p++) {
      for (int64_t q = p + 1; q < N; q++) {
        double alpha = 0, beta = 0;
        double complex gamma = 0;
        for (int64_t i = 0; i < M; i++) {
          double complex x = W[p * M + i], y = W[q * M + i];
          alpha += creal(x * conj(x));
          beta += creal(y * conj(y));
          gamma += conj(x) * y;
        }
        double g = cabs(gamma);
        if (g <= DBL_MIN || g <= DBL_EPSILON * sqrt(alpha * beta) || alpha <= negligible ||
            beta <= negligible)
          continue;
        double complex f = conj(gamma / g);
        double c, s, t;
        rotation((beta - alpha) / (2 * g), &c, &s, &t);
        for (int64_t i = 0; i < M; i++) {
          W[q * M + i] *= f;
          rotate(&W[p * M + i], &W[q * M + i], c, s);
        }
        for (int64_t i = 0; i < N; i++) {
          V[q * N + i] *= f;
          rotate(&V[p * N + i], &V[q * N + i], c, s);
        }
        rotations++;
      }
    }
    if (!rotations) return 0;
  }
  return 1;
}

/* U's columns from r on (M x C column-major) made an orthonormal basis of the complement of
 * the first r: the full Q of their Householder QR past r. False when out of memory. */
static bool complete(int64_t M, int64_t C, int64_t r, double complex *U) {
  if (r >= C) return true;
  double complex *q = malloc(sizeof(double complex) * (size_t)(M * M + M + 1));
  if (!q) return false;
  double complex *tau = q + M * M;
  memcpy(q, U, sizeof(double complex) * (size_t)(M * r));
  kiln_householder_zgeqrf(M, r, q, M, tau);
  kiln_householder_zungqr(M, M, r, q, M, tau);
  memcpy(U + M * r, q + M * r, sizeof(double complex) * (size_t)(M * (C - r)));
  free(q);
  return true;
}

static void swap_columns(double complex *X, int64_t rows, int64_t i, int64_t j) {
  for (int64_t k = 0; k < rows; k++) {
    double complex t = X[i * rows + k];
    X[i * rows + k] = X[j * rows + k];
    X[j * rows + k] = t;
  }
}

/* The SVD of W (M x N column-major, M >= N): values descending in sig, left vectors in U
 * (M x C, C >= N, completed), right vectors in V (N x N), each pair's phase making the right
 * vector's largest component real and positive. */
static int svd_tall(int64_t M, int64_t N, int64_t C, double complex *W, double *sig,
                    double complex *U, double complex *V) {
  double frob2 = 0;
  for (int64_t i = 0; i < M * N; i++) frob2 += creal(W[i] * conj(W[i]));
  int bad = one_sided(M, N, W, V);
  for (int64_t j = 0; j < N; j++) {
    double norm = 0;
    for (int64_t i = 0; i < M; i++) norm += creal(W[j * M + i] * conj(W[j * M + i]));
    sig[j] = sqrt(norm);
  }
  for (int64_t i = 0; i < N; i++) {
    int64_t m = i;
    for (int64_t j = i + 1; j < N; j++)
      if (sig[j] > sig[m]) m = j;
    if (m == i) continue;
    double t = sig[i];
    sig[i] = sig[m];
    sig[m] = t;
    swap_columns(W, M, i, m);
    swap_columns(V, N, i, m);
  }
  int64_t r = N;
  for (int64_t j = 0; j < N; j++) {
    double complex f = normalize_phase(V + j * N, N, 1);
    if (!(sig[j] > DBL_EPSILON * sqrt(frob2)) && j < r) r = j;
    for (int64_t i = 0; i < M; i++) U[j * M + i] = j >= r ? 0 : f * W[j * M + i] / sig[j];
  }
  return complete(M, C, r, U) ? bad : -1;
}

int kiln_jacobi_zsvd(int64_t m, int64_t n, const double complex *a, double *s, double complex *u,
                     int64_t ucols, double complex *vt, int64_t vrows) {
  bool tall = m >= n;
  int64_t M = tall ? m : n, N = tall ? n : m;
  int64_t C = tall ? (u ? ucols : N) : (vt ? vrows : N);
  if (C < N) C = N;
  double complex *W = malloc(sizeof(double complex) * (size_t)(M * N + N * N + M * C + 1));
  if (!W) return -1;
  double complex *V = W + M * N, *U = V + N * N;
  bool finite = true;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      double complex x = a[i * n + j];
      finite = finite && isfinite(creal(x)) && isfinite(cimag(x));
      if (tall)
        W[j * M + i] = x; /* column j of a */
      else
        W[i * M + j] = conj(x); /* column i of a^H */
    }
  int bad = finite ? svd_tall(M, N, C, W, s, U, V) : 1;
  if (bad < 0) {
    free(W);
    return -1;
  }
  if (bad) {
    for (int64_t i = 0; i < N; i++) s[i] = NAN;
    for (int64_t i = 0; u && i < m * ucols; i++) u[i] = CMPLX(NAN, NAN);
    for (int64_t i = 0; vt && i < vrows * n; i++) vt[i] = CMPLX(NAN, NAN);
  } else if (tall) { /* a = U S V^H */
    for (int64_t i = 0; u && i < m; i++)
      for (int64_t j = 0; j < ucols; j++) u[i * ucols + j] = U[j * M + i];
    for (int64_t j = 0; vt && j < vrows; j++)
      for (int64_t i = 0; i < n; i++) vt[j * n + i] = conj(V[j * N + i]);
  } else { /* a^H = U S V^H, so a = V S U^H */
    for (int64_t i = 0; u && i < m; i++)
      for (int64_t j = 0; j < ucols; j++) u[i * ucols + j] = V[j * N + i];
    for (int64_t j = 0; vt && j < vrows; j++)
      for (int64_t i = 0; i < n; i++) vt[j * n + i] = conj(U[j * M + i]);
  }
  free(W);
  return bad;
}

/* ---- General eigendecomposition: Hessenberg reduction, complex Schur form, eigenvectors ---- */

#define H(i, j) h[(i) + (j)*n]
#define Q(i, j) q[(i) + (j)*n]

static double cabs1(double complex x) {
  return fabs(creal(x)) + fabs(cimag(x));
}

/* h (n x n column-major) reduced to upper Hessenberg form in rows and columns lo .. hi by
 * reflectors as LAPACK's zgehd2 (h := P^H h P with P = I - tau v v^H, column k's P zeroing
 * rows k+2 .. hi and making (k+1, k) real), q := q P collecting them when not NULL. With
 * `taus` (hi - lo entries from column lo) the reflectors are kept as LAPACK leaves them: tau
 * in taus, v below the subdiagonal (its leading 1 implied); else the subdiagonal's below are
 * zeros. v: scratch of n. */
static void reduce(int64_t n, double complex *h, double complex *q, double complex *v, int64_t lo,
                   int64_t hi, double complex *taus) {
  for (int64_t k = lo; k < hi; k++) {
    double complex alpha = H(k + 1, k), tau = 0;
    double xnorm = 0;
    for (int64_t i = k + 2; i <= hi; i++) xnorm = hypot(xnorm, cabs(H(i, k)));
    int64_t len = hi - k; /* v spans rows k+1 .. hi, v[0] = 1 */
    if (xnorm != 0 || cimag(alpha) != 0) {
      double re = creal(alpha), im = cimag(alpha);
      double beta = -copysign(hypot(hypot(re, im), xnorm), re);
      tau = CMPLX((beta - re) / beta, -im / beta);
      double complex scale = 1 / (alpha - beta);
      v[0] = 1;
      for (int64_t i = 1; i < len; i++) {
        v[i] = H(k + 1 + i, k) * scale;
        H(k + 1 + i, k) = taus ? v[i] : 0;
      }
      H(k + 1, k) = beta;
      for (int64_t j = k + 1; j < n; j++) { /* P^H from the left: I - conj(tau) v v^H */
        double complex w = 0;
        for (int64_t i = 0; i < len; i++) w += conj(v[i]) * H(k + 1 + i, j);
        w *= conj(tau);
        for (int64_t i = 0; i < len; i++) H(k + 1 + i, j) -= v[i] * w;
      }
      for (int pass = 0; pass < 2; pass++) { /* P from the right, on h then on q */
        double complex *m = pass ? q : h;
        for (int64_t i = 0; m && i < (pass ? n : hi + 1); i++) {
          double complex w = 0;
          for (int64_t j = 0; j < len; j++) w += m[i + (k + 1 + j) * n] * v[j];
          w *= tau;
          for (int64_t j = 0; j < len; j++) m[i + (k + 1 + j) * n] -= w * conj(v[j]);
        }
      }
    } else if (!taus) {
      for (int64_t i = k + 2; i <= hi; i++) H(i, k) = 0;
    }
    if (taus) taus[k - lo] = tau;
  }
}

/* The rotation G = [[c, s], [-conj(s), c]] (c real) with G (x, y)^T = (r, 0)^T. */
static void givens(double complex x, double complex y, double *c, double complex *s) {
  double ax = cabs(x), r = hypot(ax, cabs(y));
  if (r == 0) {
    *c = 1;
    *s = 0;
  } else if (ax == 0) {
    *c = 0;
    *s = 1;
  } else {
    *c = ax / r;
    *s = (x / ax) * conj(y) / r;
  }
}

/* The eigenvalue of the trailing 2 x 2 [[a, b], [c, d]] nearer d (Wilkinson's shift). */
static double complex wilkinson(double complex a, double complex b, double complex c,
                                double complex d) {
  double complex p = (a - d) / 2, disc = csqrt(p * p + b * c);
  if (creal(conj(p) * disc) < 0) disc = -disc;
  double complex den = p + disc;
  return den == 0 ? d : d - b * c / den;
}

/* h (upper Hessenberg) made upper triangular by shifted QR steps (each a bulge chased by
 * rotations, as LAPACK's zlahqr with a single shift), q collecting them. False when an
 * eigenvalue took more than 30 max(10, n) steps. */
static bool schur(int64_t n, double complex *h, double complex *q) {
  int64_t budget = 30 * (n > 10 ? n : 10), steps = 0;
  for (int64_t hi = n - 1; hi > 0;) {
    int64_t l = hi;
    for (; l > 0; l--) {
      double sub = cabs1(H(l, l - 1)), near = cabs1(H(l - 1, l - 1)) + cabs1(H(l, l));
      if (sub <= DBL_MIN || sub <= DBL_EPSILON * near) {
        H(l, l - 1) = 0;
        break;
      }
    }
    if (l == hi) { /* H(hi, hi) is an eigenvalue */
      hi--;
      steps = 0;
      continue;
    }
    if (++steps > budget) return false;
    double complex mu = steps % 10 == 0
                            ? H(hi, hi) + 0.75 * fabs(creal(H(hi, hi - 1)))
                            : wilkinson(H(hi - 1, hi - 1), H(hi - 1, hi), H(hi, hi - 1), H(hi, hi));
    double complex x = H(l, l) - mu, y = H(l + 1, l);
    for (int64_t k = l; k < hi; k++) {
      if (k > l) {
        x = H(k, k - 1);
        y = H(k + 1, k - 1);
      }
      double c;
      double complex s;
      givens(x, y, &c, &s);
      for (int64_t j = k > l ? k - 1 : l; j < n; j++) { /* G from the left */
        double complex a = H(k, j), b = H(k + 1, j);
        H(k, j) = c * a + s * b;
        H(k + 1, j) = -conj(s) * a + c * b;
      }
      if (k > l) H(k + 1, k - 1) = 0;
      int64_t last = k + 2 < hi ? k + 2 : hi;
      for (int pass = 0; pass < 2; pass++) { /* G^H from the right, on h then on q */
        double complex *m = pass ? q : h;
        int64_t rows = pass ? n : last + 1;
        for (int64_t i = 0; i < rows; i++) {
          double complex a = m[i + k * n], b = m[i + (k + 1) * n];
          m[i + k * n] = c * a + conj(s) * b;
          m[i + (k + 1) * n] = -s * a + c * b;
        }
      }
    }
  }
  return true;
}

/* Eigenvector j of the upper triangular t into y (n; zeros past j for right vectors, before j
 * for left ones), by substitution; a zero divisor is replaced by eps ||t|| (LAPACK's ztrevc
 * perturbs it alike). */
static void triangular_vector(int64_t n, const double complex *h, int64_t j, bool left,
                              double small, double complex *y) {
  double complex lambda = H(j, j);
  for (int64_t i = 0; i < n; i++) y[i] = i == j ? 1 : 0;
  if (!left) {
    for (int64_t i = j - 1; i >= 0; i--) {
      double complex sum = 0;
      for (int64_t k = i + 1; k <= j; k++) sum += H(i, k) * y[k];
      double complex d = H(i, i) - lambda;
      if (cabs1(d) < small) d = small;
      y[i] = -sum / d;
    }
  } else { /* y^H t = lambda y^H: conj(y_i) (t_ii - lambda) = -sum_k conj(y_k) t_ki */
    for (int64_t i = j + 1; i < n; i++) {
      double complex sum = 0;
      for (int64_t k = j; k < i; k++) sum += conj(y[k]) * H(k, i);
      double complex d = H(i, i) - lambda;
      if (cabs1(d) < small) d = small;
      y[i] = conj(-sum / d);
    }
  }
}

/* q y into column j of the row-major out (n x n), scaled to unit norm with its largest
 * component real and positive. */
static void eigenvector_out(int64_t n, const double complex *q, const double complex *y, int64_t j,
                            double complex *out) {
  double norm = 0;
  for (int64_t i = 0; i < n; i++) {
    double complex x = 0;
    for (int64_t k = 0; k < n; k++) x += Q(i, k) * y[k];
    out[i * n + j] = x;
    norm = hypot(norm, cabs(x));
  }
  for (int64_t i = 0; norm > 0 && i < n; i++) out[i * n + j] /= norm;
  normalize_phase(out + j, n, n);
}

/* The Schur form of the row-major a into h (T, column-major) and q (Q), with y (n) as scratch;
 * *norm gets ||a||_F. False for a NaN or infinity or without convergence. */
static bool schur_form(int64_t n, const double complex *a, double complex *h, double complex *q,
                       double complex *y, double *norm) {
  bool finite = true;
  *norm = 0;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      H(i, j) = a[i * n + j];
      Q(i, j) = i == j;
      finite = finite && isfinite(creal(H(i, j))) && isfinite(cimag(H(i, j)));
      *norm = hypot(*norm, cabs(H(i, j)));
    }
  if (!finite) return false;
  if (n > 0) reduce(n, h, q, y, 0, n - 1, NULL);
  return schur(n, h, q);
}

static void fill_nan(double complex *x, int64_t count) {
  for (int64_t i = 0; x && i < count; i++) x[i] = CMPLX(NAN, NAN);
}

int kiln_zgeev(int64_t n, const double complex *a, double complex *w, double complex *vl,
               double complex *vr) {
  double complex *h = malloc(sizeof(double complex) * (size_t)(2 * n * n + n + 1));
  if (!h) return -1;
  double complex *q = h + n * n, *y = q + n * n;
  double norm;
  if (!schur_form(n, a, h, q, y, &norm)) {
    fill_nan(w, n);
    fill_nan(vl, n * n);
    fill_nan(vr, n * n);
    free(h);
    return 1;
  }
  double small = fmax(DBL_EPSILON * norm, DBL_MIN);
  for (int64_t j = 0; j < n; j++) {
    w[j] = H(j, j);
    for (int side = 0; side < 2; side++) {
      double complex *out = side ? vl : vr;
      if (!out) continue;
      triangular_vector(n, h, j, side == 1, small, y);
      eigenvector_out(n, q, y, j, out);
    }
  }
  free(h);
  return 0;
}

int kiln_zgees(int64_t n, const double complex *a, double complex *t, double complex *z,
               double complex *w) {
  double complex *h = malloc(sizeof(double complex) * (size_t)(2 * n * n + n + 1));
  if (!h) return -1;
  double complex *q = h + n * n, *y = q + n * n;
  double norm;
  if (!schur_form(n, a, h, q, y, &norm)) {
    fill_nan(t, n * n);
    fill_nan(z, n * n);
    fill_nan(w, n);
    free(h);
    return 1;
  }
  for (int64_t i = 0; i < n; i++) {
    w[i] = H(i, i);
    for (int64_t j = 0; j < n; j++) {
      t[i * n + j] = j >= i ? H(i, j) : 0;
      if (z) z[i * n + j] = Q(i, j);
    }
  }
  free(h);
  return 0;
}

void kiln_householder_zgehrd(int64_t n, int64_t lo, int64_t hi, double complex *h,
                             double complex *tau, double complex *scratch) {
  for (int64_t k = 0; k + 1 < n; k++) tau[k] = 0;
  if (lo < hi) reduce(n, h, NULL, scratch, lo, hi, tau + lo);
}

void kiln_householder_zhetrd(int64_t n, bool lower, double complex *a, double *d, double *e,
                             double complex *tau, double complex *scratch) {
  /* The upper form is the lower one of J a J (J reversing the indices): its columns in
   * reverse order, each reflector's vector running up the column above the superdiagonal. */
  double complex *h = scratch, *v = h + n * n;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      int64_t r = lower ? i : n - 1 - i, c = lower ? j : n - 1 - j; /* (i, j) of J a J */
      double complex x = i >= j ? a[r + c * n] : conj(a[c + r * n]);
      H(i, j) = i == j ? creal(x) : x;
    }
  if (n > 1) reduce(n, h, NULL, v, 0, n - 1, tau);
  if (!lower)
    for (int64_t k = 0; 2 * k + 1 < n - 1; k++) { /* tau in the original column order */
      double complex t = tau[k];
      tau[k] = tau[n - 2 - k];
      tau[n - 2 - k] = t;
    }
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j <= i; j++) { /* the read triangle gets the result; the other stays */
      int64_t r = lower ? i : n - 1 - i, c = lower ? j : n - 1 - j;
      a[r + c * n] = H(i, j);
    }
  for (int64_t i = 0; i < n; i++) d[lower ? i : n - 1 - i] = creal(H(i, i));
  for (int64_t i = 0; i + 1 < n; i++) e[lower ? i : n - 2 - i] = creal(H(i + 1, i));
}

int kiln_real_geev(int64_t n, const double *a, double *wr, double *wi, double complex *vl,
                   double complex *vr) {
  size_t nn = (size_t)(n * n);
  double complex *buf = malloc(sizeof(double complex) * (3 * nn + (size_t)n + 1) + (size_t)n);
  if (!buf) return -1;
  double complex *za = buf, *w = za + nn, *l = w + n, *r = l + nn;
  bool *used = (bool *)(r + nn);
  double norm = 0;
  for (size_t i = 0; i < nn; i++) {
    za[i] = a[i];
    norm = hypot(norm, a[i]);
  }
  int bad = kiln_zgeev(n, za, w, vl ? l : NULL, vr ? r : NULL);
  if (bad) {
    for (int64_t i = 0; i < n; i++) wr[i] = wi[i] = NAN;
    for (size_t i = 0; i < nn; i++) {
      if (vl) vl[i] = CMPLX(NAN, NAN);
      if (vr) vr[i] = CMPLX(NAN, NAN);
    }
    free(buf);
    return bad;
  }
  /* A real matrix's eigenvalues are real or conjugate pairs: the complex iteration leaves
   * them so only to rounding, so each pair is made exact (the value with the positive
   * imaginary part first, its partner's value and vectors the conjugates), and the imaginary
   * parts of the others (at most 64 n eps ||A||) and of their vectors dropped. */
  double tol = 64 * (double)n * DBL_EPSILON * norm;
  memset(used, 0, (size_t)n);
  int64_t out = 0;
  for (int64_t i = 0; i < n; i++) {
    if (used[i]) continue;
    used[i] = true;
    int64_t partner = -1;
    if (fabs(cimag(w[i])) > tol)
      for (int64_t j = i + 1; j < n; j++)
        if (!used[j] && (partner < 0 || cabs(w[j] - conj(w[i])) < cabs(w[partner] - conj(w[i]))))
          partner = j;
    int64_t take = partner >= 0 && cimag(w[partner]) > cimag(w[i]) ? partner : i;
    int count = partner >= 0 ? 2 : 1;
    if (partner >= 0) used[partner] = true;
    double re = partner >= 0 ? (creal(w[i]) + creal(w[partner])) / 2 : creal(w[i]);
    double im = partner >= 0 ? (fabs(cimag(w[i])) + fabs(cimag(w[partner]))) / 2 : 0;
    for (int c = 0; c < count; c++, out++) {
      wr[out] = re;
      wi[out] = c ? -im : im;
      for (int side = 0; side < 2; side++) {
        double complex *dst = side ? vl : vr, *src = side ? l : r;
        for (int64_t k = 0; dst && k < n; k++) {
          double complex x = src[k * n + take];
          dst[k * n + out] = count == 1 ? creal(x) : c ? conj(x) : x;
        }
      }
    }
  }
  free(buf);
  return 0;
}

/* ---- The real Schur form: Francis double-shift QR steps, 2 x 2 blocks standardized ---- */

#define T(i, j) t[(i) + (j)*n]

/* Rows i, j (i, j, columns c0 .. c1) or columns i, j (rows c0 .. c1) of the column-major m mixed
 * by the rotation (x, y) -> (c x + s y, c y - s x), as BLAS's drot. */
static void rot(int64_t n, double *m, bool rows, int64_t i, int64_t j, int64_t c0, int64_t c1,
                double c, double s) {
  for (int64_t k = c0; k <= c1; k++) {
    double *x = rows ? &m[i + k * n] : &m[k + i * n], *y = rows ? &m[j + k * n] : &m[k + j * n];
    double a = *x, b = *y;
    *x = c * a + s * b;
    *y = c * b - s * a;
  }
}

static double sign1(double x) {
  return x < 0 ? -1.0 : 1.0; /* Fortran's SIGN(1, x) with x = -0 giving 1 */
}

/* LAPACK's dlanv2: the rotation (cs, sn) making the 2 x 2 block [[a, b], [c, d]] upper
 * triangular when its eigenvalues are real, else equal-diagonal with b c < 0 (the standard
 * form of a complex pair); the block is overwritten. */
static void standardize(double *a, double *b, double *c, double *d, double *cs, double *sn) {
  if (*c == 0) {
    *cs = 1;
    *sn = 0;
  } else if (*b == 0) { /* swap rows and columns */
    *cs = 0;
    *sn = 1;
    double t = *d;
    *d = *a;
    *a = t;
    *b = -*c;
    *c = 0;
  } else if (*a - *d == 0 && sign1(*b) != sign1(*c)) {
    *cs = 1;
    *sn = 0;
  } else {
    double temp = *a - *d, p = 0.5 * temp;
    double bcmax = fmax(fabs(*b), fabs(*c));
    double bcmis = fmin(fabs(*b), fabs(*c)) * sign1(*b) * sign1(*c);
    double scale = fmax(fabs(p), bcmax);
    double z = (p / scale) * p + (bcmax / scale) * bcmis;
    if (z >= 4 * DBL_EPSILON) { /* real eigenvalues */
      z = p + copysign(sqrt(scale) * sqrt(z), p);
      *a = *d + z;
      *d = *d - (bcmax / z) * bcmis;
      double tau = hypot(*c, z);
      *cs = z / tau;
      *sn = *c / tau;
      *b = *b - *c;
      *c = 0;
    } else { /* complex, or real and nearly equal: equal diagonal first */
      double sigma = *b + *c, tau = hypot(sigma, temp);
      *cs = sqrt(0.5 * (1 + fabs(sigma) / tau));
      *sn = -(p / (tau * *cs)) * sign1(sigma);
      double aa = *a * *cs + *b * *sn, bb = -*a * *sn + *b * *cs;
      double cc = *c * *cs + *d * *sn, dd = -*c * *sn + *d * *cs;
      *a = aa * *cs + cc * *sn;
      *b = bb * *cs + dd * *sn;
      *c = -aa * *sn + cc * *cs;
      *d = -bb * *sn + dd * *cs;
      temp = 0.5 * (*a + *d);
      *a = *d = temp;
      if (*c != 0) {
        if (*b != 0) {
          if (sign1(*b) == sign1(*c)) { /* real after all: upper triangular */
            double sab = sqrt(fabs(*b)), sac = sqrt(fabs(*c));
            p = copysign(sab * sac, *c);
            tau = 1 / sqrt(fabs(*b + *c));
            *a = temp + p;
            *d = temp - p;
            *b = *b - *c;
            *c = 0;
            double cs1 = sab * tau, sn1 = sac * tau;
            temp = *cs * cs1 - *sn * sn1;
            *sn = *cs * sn1 + *sn * cs1;
            *cs = temp;
          }
        } else {
          *b = -*c;
          *c = 0;
          temp = *cs;
          *cs = -*sn;
          *sn = temp;
        }
      }
    }
  }
}

/* The reflector P = I - tau v v^T (v[0] = 1) with P x = (beta, 0, ...) for x of `len` (2 or 3)
 * entries, as dlarfg; tau 0 when x's tail is zero. */
static double reflector(int len, const double *x, double *v) {
  double xnorm = len == 3 ? hypot(x[1], x[2]) : fabs(x[1]);
  v[0] = 1;
  if (xnorm == 0) {
    v[1] = v[2] = 0;
    return 0;
  }
  double beta = -copysign(hypot(x[0], xnorm), x[0]);
  for (int i = 1; i < len; i++) v[i] = x[i] / (x[0] - beta);
  return (beta - x[0]) / beta;
}

/* P (from reflector) applied to rows r .. r+len-1 of columns c0 .. c1 (rows), or to columns
 * r .. r+len-1 of rows c0 .. c1. */
static void reflect(int64_t n, double *m, bool rows, int64_t r, int len, const double *v,
                    double tau, int64_t c0, int64_t c1) {
  if (tau == 0) return;
  for (int64_t k = c0; k <= c1; k++) {
    double *e[3];
    for (int i = 0; i < len; i++) e[i] = rows ? &m[(r + i) + k * n] : &m[k + (r + i) * n];
    double w = 0;
    for (int i = 0; i < len; i++) w += *e[i] * v[i];
    w *= tau;
    for (int i = 0; i < len; i++) *e[i] -= w * v[i];
  }
}

/* t (upper Hessenberg, column-major) made quasi-triangular by Francis double-shift steps on
 * its active window, z collecting them; each 2 x 2 block standardized as it deflates. False
 * without convergence (30 max(10, n) steps for an eigenvalue). */
static bool real_schur(int64_t n, double *t, double *z) {
  int64_t budget = 30 * (n > 10 ? n : 10), steps = 0;
  for (int64_t hi = n - 1; hi >= 0;) {
    int64_t l = hi;
    for (; l > 0; l--) {
      double sub = fabs(T(l, l - 1)), near = fabs(T(l - 1, l - 1)) + fabs(T(l, l));
      if (sub <= DBL_MIN || sub <= DBL_EPSILON * near) {
        T(l, l - 1) = 0;
        break;
      }
    }
    if (l == hi) { /* a 1 x 1 block */
      hi--;
      steps = 0;
      continue;
    }
    if (l == hi - 1) { /* a 2 x 2 block: standardized, the rotation carried everywhere */
      double cs, sn;
      standardize(&T(hi - 1, hi - 1), &T(hi - 1, hi), &T(hi, hi - 1), &T(hi, hi), &cs, &sn);
      if (hi + 1 < n) rot(n, t, true, hi - 1, hi, hi + 1, n - 1, cs, sn);
      if (hi >= 2) rot(n, t, false, hi - 1, hi, 0, hi - 2, cs, sn);
      if (z) rot(n, z, false, hi - 1, hi, 0, n - 1, cs, sn);
      hi -= 2;
      steps = 0;
      continue;
    }
    if (++steps > budget) return false;
    /* the shifts: the trailing 2 x 2's eigenvalues (their sum s and product p), or an
     * exceptional pair every 10th step */
    double s, p;
    if (steps % 10 == 0) {
      double w = fabs(T(hi, hi - 1)) + fabs(T(hi - 1, hi - 2));
      double h11 = 0.75 * w + T(hi, hi), h12 = -0.4375 * w;
      s = 2 * h11;
      p = h11 * h11 - h12 * w;
    } else {
      s = T(hi - 1, hi - 1) + T(hi, hi);
      p = T(hi - 1, hi - 1) * T(hi, hi) - T(hi - 1, hi) * T(hi, hi - 1);
    }
    double x[3] = {T(l, l) * T(l, l) + T(l, l + 1) * T(l + 1, l) - s * T(l, l) + p,
                   T(l + 1, l) * (T(l, l) + T(l + 1, l + 1) - s), T(l + 1, l) * T(l + 2, l + 1)};
    for (int64_t k = l; k <= hi - 1; k++) {
      int len = k + 2 <= hi ? 3 : 2;
      double v[3];
      double tau = reflector(len, x, v);
      int64_t from = k > l ? k - 1 : l, last = k + 3 < hi ? k + 3 : hi;
      reflect(n, t, true, k, len, v, tau, from, n - 1);
      if (k > l) { /* the bulge's column is now (beta, 0, ...) */
        T(k + 1, k - 1) = 0;
        if (len == 3) T(k + 2, k - 1) = 0;
      }
      reflect(n, t, false, k, len, v, tau, 0, last);
      if (z) reflect(n, z, false, k, len, v, tau, 0, n - 1);
      if (k + 1 <= hi - 1) {
        x[0] = T(k + 1, k);
        x[1] = T(k + 2, k);
        x[2] = k + 3 <= hi ? T(k + 3, k) : 0;
      }
    }
  }
  return true;
}

int kiln_real_gees(int64_t n, const double *a, double *t, double *z, double *wr, double *wi) {
  size_t nn = (size_t)(n * n);
  double complex *h =
      malloc(sizeof(double complex) * (2 * nn + (size_t)n + 1) + sizeof(double) * (2 * nn + 1));
  if (!h) return -1;
  double complex *q = h + nn, *y = q + nn;
  double *rt = (double *)(y + n), *rz = rt + nn;
  bool finite = true;
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      H(i, j) = a[i * n + j];
      Q(i, j) = i == j;
      finite = finite && isfinite(a[i * n + j]);
    }
  bool ok = finite;
  if (ok) {
    /* the complex Householder steps on real data keep it real: zero imaginary parts */
    if (n > 0) reduce(n, h, q, y, 0, n - 1, NULL);
    for (size_t i = 0; i < nn; i++) {
      rt[i] = creal(h[i]);
      rz[i] = creal(q[i]);
    }
    ok = real_schur(n, rt, rz);
  }
  if (!ok) {
    for (size_t i = 0; i < nn; i++) t[i] = NAN;
    for (size_t i = 0; z && i < nn; i++) z[i] = NAN;
    for (int64_t i = 0; i < n; i++) wr[i] = wi[i] = NAN;
    free(h);
    return 1;
  }
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      t[i * n + j] = j + 1 >= i ? rt[i + j * n] : 0;
      if (z) z[i * n + j] = rz[i + j * n];
    }
  for (int64_t i = 0; i < n; i++) {
    bool pair = i + 1 < n && rt[(i + 1) + i * n] != 0;
    wr[i] = rt[i + i * n];
    wi[i] = 0;
    if (pair) {
      double b = rt[i + (i + 1) * n], c = rt[(i + 1) + i * n];
      wr[i + 1] = rt[(i + 1) + (i + 1) * n];
      wi[i] = sqrt(fabs(b)) * sqrt(fabs(c));
      wi[i + 1] = -wi[i];
      i++;
    }
  }
  free(h);
  return 0;
}

#undef T
int64_t kiln_zgtsv(int64_t n, int64_t nrhs, double complex *sub, double complex *diag,
                   double complex *sup, double complex *b) {
  if (n <= 0) return 0;
  double complex *sup2 = calloc((size_t)n, sizeof(double complex));
  if (!sup2) return n + 1;
  int64_t info = 0;
  for (int64_t i = 0; i + 1 < n && !info; i++) {
    double complex *row = b + i * nrhs, *next = row + nrhs;
    if (cabs1(diag[i]) >= cabs1(sub[i])) { /* no swap */
      if (diag[i] == 0) {
        info = i + 1;
        break;
      }
      double complex f = sub[i] / diag[i];
      diag[i + 1] -= f * sup[i];
      for (int64_t k = 0; k < nrhs; k++) next[k] -= f * row[k];
    } else { /* rows i and i + 1 swap */
      double complex f = diag[i] / sub[i];
      diag[i] = sub[i];
      double complex t = diag[i + 1];
      diag[i + 1] = sup[i] - f * t;
      sup[i] = t;
      if (i + 2 < n) {
        sup2[i] = sup[i + 1];
        sup[i + 1] = -f * sup2[i];
      }
      for (int64_t k = 0; k < nrhs; k++) {
        double complex r = row[k];
        row[k] = next[k];
        next[k] = r - f * next[k];
      }
    }
  }
  if (!info && diag[n - 1] == 0) info = n;
  for (int64_t k = 0; !info && k < nrhs; k++) {
    b[(n - 1) * nrhs + k] /= diag[n - 1];
    if (n > 1)
      b[(n - 2) * nrhs + k] =
          (b[(n - 2) * nrhs + k] - sup[n - 2] * b[(n - 1) * nrhs + k]) / diag[n - 2];
    for (int64_t i = n - 3; i >= 0; i--)
      b[i * nrhs + k] =
          (b[i * nrhs + k] - sup[i] * b[(i + 1) * nrhs + k] - sup2[i] * b[(i + 2) * nrhs + k]) /
          diag[i];
  }
  free(sup2);
  return info;
}

#undef Q
#undef H
