/* fft_expander: fft (FFT, IFFT, RFFT, IRFFT over the last 1-3 dimensions) -> direct DFTs
 * as real dots with constant twiddle matrices, O(n^2) per transformed dimension, so the
 * gemm path and the loop emitter compile it. It computes what the reference evaluator
 * computes (eval_linalg.c) up to rounding in the component type:
 *
 *   the operand is split into real and imaginary parts (re, im; a real RFFT operand has
 *   no im); for each transformed dimension in order, with n = its fft_length:
 *     W[j, k] = exp(sign * 2*pi*i * (j*k mod n) / n)   (sign -1 forward, +1 inverse)
 *     re' = dot(re, Wr) - dot(im, Wi),  im' = dot(re, Wi) + dot(im, Wr)
 *   each dot contracts the transformed dimension, which is always dimension rank - nf:
 *   the dot puts its output dimension last, so after nf steps the dimensions are back in
 *   order. RFFT keeps the first n/2+1 columns of the last W. IRFFT's last dimension reads
 *   the half spectrum X[0..n/2] and extends it as the evaluator does (X[j] = conj(X[n-j])
 *   for j > n/2), keeping the real part:
 *     out[k] = sum_j re[j] * A[j, k] + im[j] * B[j, k]
 *     A[j, k] = cos(t(j, k)) (+ cos(t(n-j, k)) when 0 < j and n-j > n/2),
 *     B[j, k] = -sin(t(j, k)) (+ sin(t(n-j, k)) likewise),  t(j, k) = 2*pi*(j*k mod n)/n
 *   IFFT and IRFFT divide by the product of fft_length: folded into the first matrices.
 * The twiddles are computed in double and rounded to the component type (f32 for c64,
 * f64 for c128). Forms the evaluator rejects, zero lengths and matrices over
 * KILN_FFT_MAX_MATRIX elements are left as they are. */
#include <math.h>
#include <string.h>

#include "compiler/hlo/literal.h"
#include "compiler/passes/expander.h"
#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

#define KILN_FFT_MAX_MATRIX (1 << 22)

enum fft_kind { FFT_FORWARD, FFT_INVERSE, FFT_REAL, FFT_INVERSE_REAL };

static bool fft_kind(const kiln_hlo_instruction_t *in, enum fft_kind *kind) {
  const char *ft = in->fft_type ? in->fft_type : "FFT";
  if (!strcmp(ft, "FFT")) *kind = FFT_FORWARD;
  else if (!strcmp(ft, "IFFT")) *kind = FFT_INVERSE;
  else if (!strcmp(ft, "RFFT")) *kind = FFT_REAL;
  else if (!strcmp(ft, "IRFFT")) *kind = FFT_INVERSE_REAL;
  else return false;
  return true;
}

/* The real type of the arithmetic: the result's component type (the result itself for
 * IRFFT). */
static kiln_elem_type_t component_type(kiln_elem_type_t result) {
  if (result == KILN_C64) return KILN_F32;
  if (result == KILN_C128) return KILN_F64;
  return result;
}

static bool expandable(const kiln_hlo_instruction_t *in) {
  if (in->opcode != KILN_OP_FFT || in->num_operands != 1) return false;
  if (in->num_control_predecessors || in->control_successors.len) return false;
  const kiln_shape_t *xs = in->operands[0]->shape, *rs = in->shape;
  enum fft_kind kind;
  int nf = in->fft_length.n;
  if (!fft_kind(in, &kind) || !kiln_shape_is_array(xs) || !kiln_shape_is_array(rs) ||
      kiln_shape_is_dynamic(xs) || kiln_shape_is_dynamic(rs) || nf < 1 || nf > 3 || xs->rank < nf ||
      rs->rank != xs->rank)
    return false;
  int r = xs->rank;
  for (int d = 0; d < r - nf; d++)
    if (xs->dims[d] != rs->dims[d]) return false;
  for (int i = 0; i < nf; i++) {
    int d = r - nf + i;
    int64_t n = in->fft_length.v[i], in_want = n, out_want = n;
    bool last = i == nf - 1;
    if (n <= 0) return false;
    if (kind == FFT_REAL && last) out_want = n / 2 + 1;
    if (kind == FFT_INVERSE_REAL && last) in_want = n / 2 + 1;
    if (xs->dims[d] != in_want || rs->dims[d] != out_want) return false;
    if (in_want * out_want > KILN_FFT_MAX_MATRIX) return false;
  }
  bool in_complex = kiln_elem_type_is_complex(xs->type), out_complex = kiln_elem_type_is_complex(rs->type);
  if ((kind == FFT_REAL) != !in_complex || (kind == FFT_INVERSE_REAL) != !out_complex) return false;
  if (!in_complex && !kiln_elem_type_is_float(xs->type)) return false;
  kiln_elem_type_t ct = component_type(rs->type);
  return ct == KILN_F32 || ct == KILN_F64;
}

/* A constant [rows, cols] of type t whose element (j, c) is f(j, k0 + c) * scale, where f
 * is the twiddle part `part` (0: real, 1: imaginary) of the transform described by `n`,
 * `sign` and `half` (the IRFFT extension). */
static kiln_hlo_instruction_t *twiddles(kiln_builder_t *b, kiln_elem_type_t t, int64_t rows,
                                        int64_t cols, int64_t k0, int64_t n, int sign, bool half,
                                        int part, double scale) {
  int64_t dims[2] = {rows, cols};
  kiln_shape_t *s = kiln_builder_shape(b, t, 2, dims);
  kiln_literal_t *l = s ? kiln_literal_make(&b->m->arena, s) : NULL;
  if (!l) {
    b->failed = true;
    return NULL;
  }
  for (int64_t j = 0; j < rows; j++)
    for (int64_t c = 0; c < cols; c++) {
      int64_t k = k0 + c;
      double ang = 2.0 * M_PI * (double)((j * k) % n) / (double)n, v;
      if (!half) {
        v = part == 0 ? cos(ang) : sign * sin(ang);
      } else {
        /* Re((a + ib) e^{i ang}) = a cos - b sin; the conjugate copy at n - j adds
         * a cos(ang') + b sin(ang') */
        v = part == 0 ? cos(ang) : -sin(ang);
        if (j > 0 && n - j >= rows) {
          double ang2 = 2.0 * M_PI * (double)(((n - j) * k) % n) / (double)n;
          v += part == 0 ? cos(ang2) : sin(ang2);
        }
      }
      kiln_literal_set_f64(l, j * cols + c, v * scale);
    }
  kiln_hlo_instruction_t *c = kiln_builder_op(b, KILN_OP_CONSTANT, s, 0, NULL);
  if (c) c->literal = l;
  return c;
}

/* dot(x, w) contracting x's dimension `d` with w's dimension 0. */
static kiln_hlo_instruction_t *contract(kiln_builder_t *b, kiln_hlo_instruction_t *x, int d,
                                        kiln_hlo_instruction_t *w) {
  if (!x || !w) {
    b->failed = true;
    return NULL;
  }
  const kiln_shape_t *xs = x->shape;
  int64_t dims[64];
  int r = 0;
  for (int k = 0; k < xs->rank; k++)
    if (k != d) dims[r++] = xs->dims[k];
  dims[r++] = w->shape->dims[1];
  kiln_hlo_instruction_t *ops[2] = {x, w};
  kiln_hlo_instruction_t *dot = kiln_builder_op(b, KILN_OP_DOT, kiln_builder_shape(b, xs->type, r, dims), 2, ops);
  int64_t *v = dot ? kiln_arena_alloc(&b->m->arena, sizeof(int64_t) * 2) : NULL;
  if (!v) {
    b->failed = true;
    return NULL;
  }
  v[0] = d;
  v[1] = 0;
  dot->has_dot_dnums = true;
  dot->dot_dnums.lhs_contracting = (kiln_i64_list_t){1, v};
  dot->dot_dnums.rhs_contracting = (kiln_i64_list_t){1, v + 1};
  return dot;
}

static kiln_status expand(kiln_hlo_instruction_t *in, kiln_pass_effects_t *effects) {
  kiln_builder_t b;
  kiln_builder_init(&b, in->parent, in->name, in->shape->has_layout);
  enum fft_kind kind = FFT_FORWARD;
  fft_kind(in, &kind);
  kiln_hlo_instruction_t *x = in->operands[0];
  const kiln_shape_t *xs = x->shape;
  kiln_elem_type_t ct = component_type(in->shape->type);
  int nf = in->fft_length.n, r = xs->rank, d = r - nf;
  int sign = kind == FFT_FORWARD || kind == FFT_REAL ? -1 : 1;
  double scale = 1.0;
  if (kind == FFT_INVERSE || kind == FFT_INVERSE_REAL)
    for (int i = 0; i < nf; i++) scale /= (double)in->fft_length.v[i];
  kiln_hlo_instruction_t *re, *im = NULL;
  if (kiln_elem_type_is_complex(xs->type)) {
    re = kiln_builder_real(&b, x);
    im = kiln_builder_imag(&b, x);
    if (re && re->shape->type != ct) re = kiln_builder_convert(&b, re, ct), im = kiln_builder_convert(&b, im, ct);
  } else {
    re = xs->type == ct ? x : kiln_builder_convert(&b, x, ct);
  }
  for (int i = 0; i < nf && !b.failed; i++) {
    int64_t n = in->fft_length.v[i];
    bool last = i == nf - 1;
    int64_t rows = xs->dims[d + i], cols = in->shape->dims[d + i];
    double s = i == 0 ? scale : 1.0;
    if (kind == FFT_INVERSE_REAL && last) {
      kiln_hlo_instruction_t *a = twiddles(&b, ct, rows, cols, 0, n, sign, true, 0, s);
      kiln_hlo_instruction_t *bm = twiddles(&b, ct, rows, cols, 0, n, sign, true, 1, s);
      re = kiln_builder_binary(&b, KILN_OP_ADD, contract(&b, re, d, a), contract(&b, im, d, bm));
      im = NULL;
      break;
    }
    kiln_hlo_instruction_t *wr = twiddles(&b, ct, rows, cols, 0, n, sign, false, 0, s);
    kiln_hlo_instruction_t *rr = contract(&b, re, d, wr), *ri;
    if (kind == FFT_REAL && nf == 1) {
      /* A real signal's bin 0, and bin n/2 when n is even, has no imaginary part: those
       * columns are zeros padded around the other bins' dot, exactly 0 as an FFT library
       * gives them (numpy, XLA's CPU FFT), where a twiddle column of sin(0) = 0 made a NaN or
       * an infinity in the signal a NaN there (fuzz-4813871). */
      int64_t hi = n % 2 == 0 && cols > 1, inner = cols - 1 - hi;
      kiln_hlo_instruction_t *zero = kiln_builder_const_f64(&b, ct, 0.0);
      if (inner > 0) {
        int64_t lo_pad[64] = {0}, hi_pad[64] = {0}, interior[64] = {0};
        lo_pad[d] = 1;
        hi_pad[d] = hi;
        ri = contract(&b, re, d, twiddles(&b, ct, rows, inner, 1, n, sign, false, 1, s));
        ri = ri ? kiln_builder_pad(&b, ri, zero, lo_pad, hi_pad, interior) : NULL;
      } else {
        ri = rr ? kiln_builder_splat(&b, zero, rr) : NULL;
      }
      re = rr;
      im = ri;
      continue;
    }
    kiln_hlo_instruction_t *wi = twiddles(&b, ct, rows, cols, 0, n, sign, false, 1, s);
    ri = contract(&b, re, d, wi);
    if (im) {
      rr = kiln_builder_binary(&b, KILN_OP_SUBTRACT, rr, contract(&b, im, d, wi));
      ri = kiln_builder_binary(&b, KILN_OP_ADD, ri, contract(&b, im, d, wr));
    }
    re = rr;
    im = ri;
  }
  kiln_hlo_instruction_t *res = im ? kiln_builder_complex(&b, re, im) : re;
  if (!res || b.failed)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "fft_expander: out of memory expanding '%s'", in->name);
  res->shape = in->shape; /* the result's shape, layout included */
  kiln_pass_replace_instruction(in, res, effects);
  return NULL;
}

kiln_status kiln_pass_fft_expander(kiln_hlo_module_t *m, const kiln_pass_options_t *opts, bool *changed) {
  return kiln_expander_run(m, expandable, expand, changed);
}
