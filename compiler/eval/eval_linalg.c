/* Reference evaluator: cholesky, triangular-solve, fft.
 *
 * All three compute in double (complex double) and round once to the result type.
 *
 * cholesky: batched over leading dims; reads only the triangle named by `lower` (default
 * true when not written) and writes the factor there; the other triangle of the result is
 * zero (XLA leaves it unspecified). A matrix that is not positive definite (non-positive or
 * NaN pivot) yields a matrix full of NaN, as XLA's CPU/GPU backends do.
 *
 * triangular-solve: solves op(a) x = b (left_side) or x op(a) = b, op = identity, transpose
 * or adjoint; only the triangle named by `lower` is read, and the diagonal is taken as 1
 * when unit_diagonal.
 *
 * fft: FFT / IFFT (complex -> complex), RFFT (real -> complex, last dim n/2+1), IRFFT
 * (complex -> real) over the last len(fft_length) dims; IFFT and IRFFT divide by the product
 * of fft_length. 1-D transforms use radix-2 for powers of two, a direct DFT otherwise. A 1-D
 * RFFT's bin 0 and (even n) bin n/2 have an imaginary part of exactly 0. */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "compiler/eval/eval.h"

typedef double complex cplx;

static cplx get_c(const kiln_literal_t *l, int64_t i) {
  double re, im = 0;
  if (kiln_elem_type_is_complex(l->shape->type)) kiln_literal_get_c128(l, i, &re, &im);
  else re = kiln_literal_get_f64(l, i);
  return re + im * I;
}

static void set_c(kiln_literal_t *l, int64_t i, cplx v) {
  if (kiln_elem_type_is_complex(l->shape->type)) kiln_literal_set_c128(l, i, creal(v), cimag(v));
  else kiln_literal_set_f64(l, i, creal(v));
}

static bool is_float_or_complex(kiln_elem_type_t t) {
  return kiln_elem_type_is_float(t) || kiln_elem_type_is_complex(t);
}

/* ---- cholesky ---- */

static kiln_status eval_cholesky(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                 kiln_literal_t *const *operands, kiln_literal_t **out) {
  if (instr->num_operands != 1) return KILN_ERR_INVALID("cholesky expects 1 operand");
  const kiln_literal_t *a = operands[0];
  const kiln_shape_t *s = a->shape;
  if (!kiln_shape_is_array(s) || s->rank < 2 || s->dims[s->rank - 1] != s->dims[s->rank - 2])
    return KILN_ERR_INVALID("cholesky operand must be [..., n, n]");
  if (!is_float_or_complex(s->type) || !kiln_shape_compatible(instr->shape, s))
    return KILN_ERR_INVALID("cholesky needs a float/complex result of the operand's shape");
  bool lower = instr->has_lower ? instr->lower : true;
  int64_t n = s->dims[s->rank - 1];
  int64_t batch = n > 0 ? kiln_shape_num_elements(s) / (n * n) : 0;
  kiln_literal_t *res = kiln_eval_literal_make(ctx, instr->shape);
  if (!res) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "cholesky result too large");
  cplx *L = kiln_try_calloc((size_t)(n * n > 0 ? n * n : 1), sizeof(cplx));
  if (!L) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "cholesky: out of memory");
  for (int64_t b = 0; b < batch; b++) {
    int64_t base = b * n * n;
    /* A(i, j) for i >= j, read from the named triangle */
#define A_LOWER(i, j) \
  (lower ? get_c(a, base + (i) * n + (j)) : conj(get_c(a, base + (j) * n + (i))))
    bool bad = false;
    memset(L, 0, sizeof(cplx) * (size_t)(n * n));
    for (int64_t j = 0; j < n && !bad; j++) {
      double d = creal(A_LOWER(j, j));
      for (int64_t k = 0; k < j; k++) {
        cplx v = L[j * n + k];
        d -= creal(v) * creal(v) + cimag(v) * cimag(v);
      }
      if (!(d > 0)) {
        bad = true;
        break;
      }
      double djj = sqrt(d);
      L[j * n + j] = djj;
      for (int64_t i = j + 1; i < n; i++) {
        cplx v = A_LOWER(i, j);
        for (int64_t k = 0; k < j; k++) v -= L[i * n + k] * conj(L[j * n + k]);
        L[i * n + j] = v / djj;
      }
    }
#undef A_LOWER
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        cplx v;
        if (bad) v = kiln_elem_type_is_complex(s->type) ? NAN + NAN * I : NAN;
        else v = lower ? L[i * n + j] : conj(L[j * n + i]);
        set_c(res, base + i * n + j, v);
      }
  }
  kiln_free(L);
  *out = res;
  return KILN_STATUS_OK;
}

/* ---- triangular-solve ---- */

/* Solves T x = rhs in place for each of the `cols` columns of X (m x cols, row-major), where
 * T (m x m) is lower or upper triangular. */
static void tri_solve_left(const cplx *T, bool t_lower, bool unit, cplx *X, int64_t m,
                           int64_t cols) {
  for (int64_t c = 0; c < cols; c++) {
    if (t_lower) {
      for (int64_t i = 0; i < m; i++) {
        cplx v = X[i * cols + c];
        for (int64_t k = 0; k < i; k++) v -= T[i * m + k] * X[k * cols + c];
        X[i * cols + c] = unit ? v : v / T[i * m + i];
      }
    } else {
      for (int64_t i = m - 1; i >= 0; i--) {
        cplx v = X[i * cols + c];
        for (int64_t k = i + 1; k < m; k++) v -= T[i * m + k] * X[k * cols + c];
        X[i * cols + c] = unit ? v : v / T[i * m + i];
      }
    }
  }
}

static kiln_status eval_triangular_solve(kiln_eval_ctx_t *ctx,
                                         const kiln_hlo_instruction_t *instr,
                                         kiln_literal_t *const *operands,
                                         kiln_literal_t **out) {
  if (instr->num_operands != 2) return KILN_ERR_INVALID("triangular-solve expects 2 operands");
  const kiln_literal_t *a = operands[0], *b = operands[1];
  const kiln_shape_t *as = a->shape, *bs = b->shape;
  if (!kiln_shape_is_array(as) || !kiln_shape_is_array(bs) || as->rank < 2 ||
      as->rank != bs->rank || as->dims[as->rank - 1] != as->dims[as->rank - 2])
    return KILN_ERR_INVALID("triangular-solve: a must be [..., m, m] and b of the same rank");
  int r = as->rank;
  for (int d = 0; d < r - 2; d++)
    if (as->dims[d] != bs->dims[d])
      return KILN_ERR_INVALID("triangular-solve: batch dimensions differ");
  int64_t m = as->dims[r - 1];
  bool left = instr->left_side;
  int64_t brows = bs->dims[r - 2], bcols = bs->dims[r - 1];
  if ((left ? brows : bcols) != m)
    return KILN_ERR_INVALID("triangular-solve: b's %s dimension must be %lld",
                            left ? "row" : "column", (long long)m);
  if (!is_float_or_complex(bs->type) || !kiln_shape_compatible(instr->shape, bs))
    return KILN_ERR_INVALID("triangular-solve: result must match b");
  const char *ta = instr->transpose_a ? instr->transpose_a : "NO_TRANSPOSE";
  bool trans, conjugate;
  if (!strcmp(ta, "NO_TRANSPOSE")) trans = conjugate = false;
  else if (!strcmp(ta, "TRANSPOSE")) trans = true, conjugate = false;
  else if (!strcmp(ta, "ADJOINT")) trans = conjugate = true;
  else return KILN_ERR_INVALID("triangular-solve: unknown transpose_a %s", ta);
  bool lower = instr->lower;
  bool unit = instr->unit_diagonal;

  kiln_literal_t *res = kiln_eval_literal_make(ctx, instr->shape);
  if (!res) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "triangular-solve: too large");
  int64_t batch = 1;
  for (int d = 0; d < r - 2; d++) batch *= as->dims[d];
  int64_t bn = brows * bcols;
  cplx *T = kiln_try_calloc((size_t)(m * m > 0 ? m * m : 1), sizeof(cplx));
  cplx *X = kiln_try_calloc((size_t)(bn > 0 ? bn : 1), sizeof(cplx));
  if (!T || !X) {
    kiln_free(T);
    kiln_free(X);
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "triangular-solve: out of memory");
  }
  for (int64_t bt = 0; bt < batch; bt++) {
    /* T = op(tri(a)); tri keeps the named triangle (and the diagonal). */
    bool t_lower = lower != trans;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < m; j++) {
        bool in_tri = lower ? j <= i : j >= i;
        cplx v = in_tri ? get_c(a, bt * m * m + i * m + j) : 0;
        if (conjugate) v = conj(v);
        if (trans) T[j * m + i] = v;
        else T[i * m + j] = v;
      }
    if (left) {
      for (int64_t i = 0; i < bn; i++) X[i] = get_c(b, bt * bn + i);
      tri_solve_left(T, t_lower, unit, X, m, bcols);
      for (int64_t i = 0; i < bn; i++) set_c(res, bt * bn + i, X[i]);
    } else {
      /* x T = b  <=>  T^t x^t = b^t: X holds x^t (m x brows) */
      for (int64_t i = 0; i < brows; i++)
        for (int64_t j = 0; j < m; j++) X[j * brows + i] = get_c(b, bt * bn + i * m + j);
      cplx *Tt = T; /* transpose T in place */
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = i + 1; j < m; j++) {
          cplx tmp = Tt[i * m + j];
          Tt[i * m + j] = Tt[j * m + i];
          Tt[j * m + i] = tmp;
        }
      tri_solve_left(Tt, !t_lower, unit, X, m, brows);
      for (int64_t i = 0; i < brows; i++)
        for (int64_t j = 0; j < m; j++) set_c(res, bt * bn + i * m + j, X[j * brows + i]);
    }
  }
  kiln_free(T);
  kiln_free(X);
  *out = res;
  return KILN_STATUS_OK;
}

/* ---- fft ---- */

/* In-place 1-D DFT of `x` (length n, stride 1) with sign -1 (forward) or +1 (inverse, not
 * normalized). `tmp` has room for n values. */
static void dft_1d(cplx *x, cplx *tmp, int64_t n, int sign) {
  if (n <= 1) return;
  if ((n & (n - 1)) == 0) {
    /* iterative radix-2: bit-reversal permutation, then butterflies */
    for (int64_t i = 1, j = 0; i < n; i++) {
      int64_t bit = n >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) {
        cplx t = x[i];
        x[i] = x[j];
        x[j] = t;
      }
    }
    for (int64_t len = 2; len <= n; len <<= 1) {
      for (int64_t k = 0; k < len / 2; k++) {
        double ang = sign * 2.0 * M_PI * (double)k / (double)len;
        cplx w = cos(ang) + sin(ang) * I;
        for (int64_t i = 0; i < n; i += len) {
          cplx u = x[i + k], v = x[i + k + len / 2] * w;
          x[i + k] = u + v;
          x[i + k + len / 2] = u - v;
        }
      }
    }
    return;
  }
  for (int64_t k = 0; k < n; k++) {
    cplx acc = 0;
    for (int64_t j = 0; j < n; j++) {
      int64_t e = (j * k) % n; /* exact angle reduction */
      double ang = sign * 2.0 * M_PI * (double)e / (double)n;
      acc += x[j] * (cos(ang) + sin(ang) * I);
    }
    tmp[k] = acc;
  }
  memcpy(x, tmp, sizeof(cplx) * (size_t)n);
}

/* Applies the 1-D transform along dim `d` of a dense complex array with dims `dims`. */
static void dft_along(cplx *a, const int64_t *dims, int rank, int d, int sign, cplx *line,
                      cplx *tmp) {
  int64_t n = dims[d], inner = 1, outer = 1;
  for (int k = d + 1; k < rank; k++) inner *= dims[k];
  for (int k = 0; k < d; k++) outer *= dims[k];
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      cplx *p = a + o * n * inner + in;
      for (int64_t j = 0; j < n; j++) line[j] = p[j * inner];
      dft_1d(line, tmp, n, sign);
      for (int64_t j = 0; j < n; j++) p[j * inner] = line[j];
    }
}

static kiln_status eval_fft(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                            kiln_literal_t *const *operands, kiln_literal_t **out) {
  if (instr->num_operands != 1) return KILN_ERR_INVALID("fft expects 1 operand");
  const kiln_literal_t *x = operands[0];
  const kiln_shape_t *xs = x->shape, *rs = instr->shape;
  const char *ft = instr->fft_type ? instr->fft_type : "FFT";
  int nf = instr->fft_length.n;
  if (!kiln_shape_is_array(xs) || !kiln_shape_is_array(rs) || nf < 1 || nf > 3 ||
      xs->rank < nf || rs->rank != xs->rank)
    return KILN_ERR_INVALID("fft: needs 1-3 fft_length entries and operand rank >= that");
  int r = xs->rank;
  const int64_t *fl = instr->fft_length.v;
  enum { FFT, IFFT, RFFT, IRFFT } kind;
  if (!strcmp(ft, "FFT")) kind = FFT;
  else if (!strcmp(ft, "IFFT")) kind = IFFT;
  else if (!strcmp(ft, "RFFT")) kind = RFFT;
  else if (!strcmp(ft, "IRFFT")) kind = IRFFT;
  else return KILN_ERR_INVALID("fft: unknown fft_type %s", ft);
  for (int i = 0; i < nf; i++)
    if (fl[i] < 0) return KILN_ERR_INVALID("fft: negative fft_length");
  for (int d = 0; d < r - nf; d++)
    if (xs->dims[d] != rs->dims[d]) return KILN_ERR_INVALID("fft: batch dims differ");
  /* expected operand / result fft dims */
  for (int i = 0; i < nf; i++) {
    int d = r - nf + i;
    bool last = i == nf - 1;
    int64_t in_want = fl[i], out_want = fl[i];
    if (kind == RFFT && last) out_want = fl[i] / 2 + 1;
    if (kind == IRFFT && last) in_want = fl[i] / 2 + 1;
    if (xs->dims[d] != in_want || rs->dims[d] != out_want)
      return KILN_ERR_INVALID("fft: dimension %d has sizes %lld -> %lld, expected %lld -> %lld",
                              d, (long long)xs->dims[d], (long long)rs->dims[d],
                              (long long)in_want, (long long)out_want);
  }
  bool in_complex = kiln_elem_type_is_complex(xs->type);
  bool out_complex = kiln_elem_type_is_complex(rs->type);
  if ((kind == RFFT) != !in_complex || (kind == IRFFT) != !out_complex)
    return KILN_ERR_INVALID("fft: element types do not fit %s", ft);
  if (!in_complex && !kiln_elem_type_is_float(xs->type))
    return KILN_ERR_INVALID("fft: operand must be float or complex");

  kiln_literal_t *res = kiln_eval_literal_make(ctx, instr->shape);
  if (!res) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "fft result too large");
  /* work array: batch x full fft_length dims */
  int64_t dims[4], batch = 1, fn = 1, maxn = 1;
  for (int d = 0; d < r - nf; d++) batch *= xs->dims[d];
  for (int i = 0; i < nf; i++) {
    dims[i + 1] = fl[i];
    fn *= fl[i];
    if (fl[i] > maxn) maxn = fl[i];
  }
  dims[0] = batch;
  int64_t total = batch * fn;
  cplx *w = kiln_try_calloc((size_t)(total > 0 ? total : 1), sizeof(cplx));
  cplx *line = kiln_try_calloc((size_t)maxn * 2, sizeof(cplx));
  if (!w || !line) {
    kiln_free(w);
    kiln_free(line);
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "fft: out of memory");
  }
  int64_t nlast = fl[nf - 1];
  int64_t xlast = xs->dims[r - 1]; /* operand's last dim (n/2+1 for IRFFT) */
  int64_t rows = nlast > 0 ? total / nlast : 0;
  for (int64_t row = 0; row < rows; row++)
    for (int64_t j = 0; j < xlast && j < nlast; j++) w[row * nlast + j] = get_c(x, row * xlast + j);
  int sign = (kind == FFT || kind == RFFT) ? -1 : 1;
  if (kind != IRFFT) {
    for (int i = 0; i < nf; i++) dft_along(w, dims, nf + 1, i + 1, sign, line, line + maxn);
  } else {
    /* inverse along the leading fft dims on the half spectrum, then Hermitian-extend the
     * last dim and invert it, keeping the real part */
    for (int i = 0; i < nf - 1; i++) dft_along(w, dims, nf + 1, i + 1, sign, line, line + maxn);
    for (int64_t row = 0; row < rows; row++) {
      cplx *p = w + row * nlast;
      for (int64_t j = xlast; j < nlast; j++) p[j] = conj(p[nlast - j]);
      dft_1d(p, line, nlast, sign);
    }
  }
  double scale = (kind == IFFT || kind == IRFFT) && fn > 0 ? 1.0 / (double)fn : 1.0;
  int64_t rlast = rs->dims[r - 1];
  for (int64_t row = 0; row < rows; row++)
    for (int64_t j = 0; j < rlast; j++) {
      cplx v = w[row * nlast + j] * scale;
      /* A real signal's bin 0, and bin n/2 for an even n, is real: its imaginary part is 0
       * even where a NaN or an infinity in the signal made the complex sums' one NaN (numpy
       * and XLA's CPU FFT give 0 there; fft_expander too). */
      if (kind == RFFT && nf == 1 && (j == 0 || 2 * j == nlast)) v = creal(v);
      set_c(res, row * rlast + j, kind == IRFFT ? creal(v) : v);
    }
  kiln_free(w);
  kiln_free(line);
  *out = res;
  return KILN_STATUS_OK;
}

kiln_status kiln_eval_linalg(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                             kiln_literal_t *const *operands, kiln_literal_t **out) {
  *out = NULL;
  switch (instr->opcode) {
    case KILN_OP_CHOLESKY: return eval_cholesky(ctx, instr, operands, out);
    case KILN_OP_TRIANGULAR_SOLVE: return eval_triangular_solve(ctx, instr, operands, out);
    case KILN_OP_FFT: return eval_fft(ctx, instr, operands, out);
    default:
      return KILN_ERR_UNIMPLEMENTED("eval_linalg: unsupported opcode %s",
                                    kiln_hlo_opcode_name(instr->opcode));
  }
}
