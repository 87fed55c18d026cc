/* Reference evaluator: dot and convolution.
 *
 * Both ops follow XLA's "preferred element type" rule: each operand element is first
 * converted to the result's element type, products are accumulated in an accumulation
 * type and the sum is rounded once to the result type:
 *   f64 result              -> double accumulation
 *   other real float result -> float accumulation (bf16, f16, f8 values are exact in f32)
 *   c64 / c128 result       -> float complex / double complex
 *   integer / pred result   -> 64-bit wrapping arithmetic, truncated to the result width
 *                              (pred: operands become x != 0, result sum != 0; float
 *                              operands convert like `convert`, never by truncation
 *                              to an integer first)
 * Operands are first copied into contiguous buffers of the accumulation type in the order
 * the inner loops want (dot: [batch, free, contracting] for lhs, [batch, contracting, free]
 * for rhs), so the hot loops are plain array arithmetic. The summation order over the
 * contracting index is ascending (row-major over multiple contracting dims). */
#include <complex.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "compiler/eval/eval.h"
#include "compiler/hlo/numeric.h"

typedef enum acc_kind { ACC_F32, ACC_F64, ACC_C64, ACC_C128, ACC_INT } acc_kind_t;

static size_t acc_size(acc_kind_t k) {
  switch (k) {
    case ACC_F32: return sizeof(float);
    case ACC_F64: return sizeof(double);
    case ACC_C64: return sizeof(float complex);
    case ACC_C128: return sizeof(double complex);
    case ACC_INT: return sizeof(uint64_t);
  }
  return 8;
}

static kiln_status acc_kind_for(kiln_elem_type_t rt, acc_kind_t *out) {
  if (rt == KILN_F64) *out = ACC_F64;
  else if (kiln_elem_type_is_float(rt)) *out = ACC_F32;
  else if (rt == KILN_C64) *out = ACC_C64;
  else if (rt == KILN_C128) *out = ACC_C128;
  else if (kiln_elem_type_is_integral(rt) || rt == KILN_PRED) *out = ACC_INT;
  else return KILN_ERR_INVALID("unsupported result element type %s", kiln_elem_type_name(rt));
  return KILN_STATUS_OK;
}

/* The accumulator is the result's own storage: the kernel writes the result in place. */
static bool acc_is_storage(acc_kind_t k, kiln_elem_type_t t) {
  return (k == ACC_F32 && t == KILN_F32) || (k == ACC_F64 && t == KILN_F64) ||
         (k == ACC_C64 && t == KILN_C64) || (k == ACC_C128 && t == KILN_C128);
}

/* Wraps `v` to a `bits`-wide integer (sign-extending when `is_signed`). */
static int64_t wrap_int(uint64_t v, int bits, bool is_signed) {
  if (bits >= 64) return (int64_t)v;
  uint64_t mask = ((uint64_t)1 << bits) - 1;
  uint64_t u = v & mask;
  if (is_signed && ((u >> (bits - 1)) & 1)) u |= ~mask;
  return (int64_t)u;
}

/* Reads element `i` of `l` converted to the result type `rt`, stored as accumulation kind
 * `k` at `dst`. */
static void load_elem(const kiln_literal_t *l, int64_t i, kiln_elem_type_t rt, acc_kind_t k,
                      void *dst) {
  kiln_elem_type_t t = l->shape->type;
  switch (k) {
    case ACC_F32:
    case ACC_F64: {
      double v;
      if (kiln_elem_type_is_complex(t)) {
        double im;
        kiln_literal_get_c128(l, i, &v, &im);
      } else {
        v = kiln_literal_get_f64(l, i);
      }
      if (t != rt && rt != KILN_F32 && rt != KILN_F64)
        v = kiln_narrow_to_f64(rt, kiln_narrow_from_f64(rt, v)); /* round to result type */
      if (k == ACC_F32) *(float *)dst = (float)v;
      else *(double *)dst = v;
      return;
    }
    case ACC_C64:
    case ACC_C128: {
      double re, im = 0;
      if (kiln_elem_type_is_complex(t)) kiln_literal_get_c128(l, i, &re, &im);
      else re = kiln_literal_get_f64(l, i);
      if (k == ACC_C64) *(float complex *)dst = (float)re + (float)im * I;
      else *(double complex *)dst = re + im * I;
      return;
    }
    case ACC_INT: {
      uint64_t v;
      if (kiln_elem_type_is_float(t) || kiln_elem_type_is_complex(t)) {
        /* XLA's convert to the result type: pred is x != 0 (NaN included); integers
         * drop the fraction, NaN -> 0, saturating at the result type's range. Complex
         * operands convert their real part. */
        uint64_t conv = 0;
        double re, im;
        kiln_literal_get_c128(l, i, &re, &im);
        kiln_eval_elem_set_f64(rt, &conv, 0, re);
        v = (uint64_t)kiln_eval_elem_get_s64(rt, &conv, 0);
      } else if (kiln_elem_type_is_unsigned_int(t)) {
        v = kiln_literal_get_u64(l, i);
      } else {
        v = (uint64_t)kiln_literal_get_s64(l, i);
      }
      /* pred operands are 0/1, so a product can never wrap a non-empty sum back to 0 */
      if (rt == KILN_PRED) v = v != 0;
      *(uint64_t *)dst = v;
      return;
    }
  }
}

static void store_elem(kiln_literal_t *out, int64_t i, acc_kind_t k, const void *src) {
  kiln_elem_type_t t = out->shape->type;
  switch (k) {
    case ACC_F32: kiln_literal_set_f64(out, i, (double)*(const float *)src); return;
    case ACC_F64: kiln_literal_set_f64(out, i, *(const double *)src); return;
    case ACC_C64: {
      float complex v = *(const float complex *)src;
      kiln_literal_set_c128(out, i, crealf(v), cimagf(v));
      return;
    }
    case ACC_C128: {
      double complex v = *(const double complex *)src;
      kiln_literal_set_c128(out, i, creal(v), cimag(v));
      return;
    }
    case ACC_INT: {
      uint64_t v = *(const uint64_t *)src;
      if (t == KILN_PRED) kiln_literal_set_s64(out, i, v != 0);
      else if (kiln_elem_type_is_unsigned_int(t))
        kiln_literal_set_u64(out, i, (uint64_t)wrap_int(v, kiln_elem_type_bits(t), false));
      else kiln_literal_set_s64(out, i, wrap_int(v, kiln_elem_type_bits(t), true));
      return;
    }
  }
}

/* Copies `l` into a new contiguous buffer of accumulation kind `k`, visiting source dims
 * in the order perm[0] (outermost) .. perm[rank-1] (innermost). Caller frees. */
static kiln_status pack_operand(const kiln_literal_t *l, const int64_t *perm,
                                kiln_elem_type_t rt, acc_kind_t k, void **out) {
  *out = NULL;
  const kiln_shape_t *s = l->shape;
  int rank = s->rank;
  int64_t n = kiln_shape_num_elements(s);
  size_t es = acc_size(k);
  void *buf = kiln_try_malloc((size_t)(n > 0 ? n : 1) * es);
  if (!buf) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "out of memory packing operand");
  int64_t stride[64], idx[64];
  int64_t st = 1;
  for (int d = rank - 1; d >= 0; d--) {
    stride[d] = st;
    st *= s->dims[d];
  }
  memset(idx, 0, sizeof idx);
  int64_t src = 0;
  for (int64_t o = 0; o < n; o++) {
    load_elem(l, src, rt, k, (char *)buf + (size_t)o * es);
    for (int p = rank - 1; p >= 0; p--) {
      int d = (int)perm[p];
      src += stride[d];
      if (++idx[d] < s->dims[d]) break;
      src -= stride[d] * s->dims[d];
      idx[d] = 0;
    }
  }
  *out = buf;
  return KILN_STATUS_OK;
}

static bool list_has(const kiln_i64_list_t *l, int64_t v) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == v) return true;
  return false;
}

static kiln_status check_dim_list(const kiln_i64_list_t *l, int rank, const char *what) {
  for (int i = 0; i < l->n; i++) {
    if (l->v[i] < 0 || l->v[i] >= rank)
      return KILN_ERR_INVALID("%s dimension %lld out of range for rank %d", what,
                              (long long)l->v[i], rank);
    for (int j = 0; j < i; j++)
      if (l->v[j] == l->v[i])
        return KILN_ERR_INVALID("%s dimension %lld repeated", what, (long long)l->v[i]);
  }
  return KILN_STATUS_OK;
}

/* GCC's -O2 cost model ("very cheap") refuses loops that need a scalar epilogue; the hot
 * loops below ask for the normal one so that they vectorize in RelWithDebInfo builds. */
#if defined(__GNUC__) && !defined(__clang__)
#define KILN_HOT_LOOP_OPT __attribute__((optimize("vect-cost-model=dynamic")))
#else
#define KILN_HOT_LOOP_OPT
#endif
/* The matmul reads and writes only the packed buffers eval_dot sized for it, so sanitizer
 * builds leave it uninstrumented: a check per element kept it scalar there, a third of the
 * corpus tests' time under ASan. */
#if defined(__GNUC__) || defined(__clang__)
#define KILN_HOT_LOOP KILN_HOT_LOOP_OPT __attribute__((no_sanitize("address", "undefined")))
#else
#define KILN_HOT_LOOP KILN_HOT_LOOP_OPT
#endif

/* The batched matmul on packed buffers: out[b,m,n] = sum_k L[b,m,k] * R[b,k,n]. */
#define KILN_DOT_KERNEL(T)                                                             \
  KILN_HOT_LOOP static void dot_kernel_##T(const T *restrict lhs, const T *restrict rhs,             \
                             T *restrict out, int64_t B, int64_t M, int64_t N,         \
                             int64_t K) {                                              \
    for (int64_t b = 0; b < B; b++) {                                                  \
      const T *restrict lb = lhs + b * M * K;                                          \
      const T *restrict rb = rhs + b * K * N;                                          \
      T *restrict ob = out + b * M * N;                                                \
      for (int64_t m = 0; m < M; m++) {                                                \
        T *restrict orow = ob + m * N;                                                 \
        for (int64_t n = 0; n < N; n++) orow[n] = 0;                                   \
        for (int64_t kk = 0; kk < K; kk++) {                                           \
          T a = lb[m * K + kk];                                                        \
          const T *restrict rrow = rb + kk * N;                                        \
          for (int64_t n = 0; n < N; n++) orow[n] += a * rrow[n];                      \
        }                                                                              \
      }                                                                                \
    }                                                                                  \
  }

typedef float complex cfloat_t;
typedef double complex cdouble_t;
KILN_DOT_KERNEL(float)
KILN_DOT_KERNEL(double)
KILN_DOT_KERNEL(cfloat_t)
KILN_DOT_KERNEL(cdouble_t)
KILN_DOT_KERNEL(uint64_t)

static kiln_status eval_dot(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                            kiln_literal_t *const *operands, kiln_literal_t **out) {
  if (instr->num_operands != 2) return KILN_ERR_INVALID("dot expects 2 operands");
  const kiln_literal_t *lhs = operands[0], *rhs = operands[1];
  const kiln_shape_t *ls = lhs->shape, *rs = rhs->shape, *os = instr->shape;
  if (!kiln_shape_is_array(ls) || !kiln_shape_is_array(rs) || !kiln_shape_is_array(os))
    return KILN_ERR_INVALID("dot operands and result must be arrays");
  if (ls->rank > 32 || rs->rank > 32) return KILN_ERR_INVALID("dot rank too large");
  const kiln_dot_dnums_t *dn = &instr->dot_dnums;
  KILN_RETURN_IF_ERROR_PLAIN(check_dim_list(&dn->lhs_batch, ls->rank, "lhs batch"));
  KILN_RETURN_IF_ERROR_PLAIN(check_dim_list(&dn->rhs_batch, rs->rank, "rhs batch"));
  KILN_RETURN_IF_ERROR_PLAIN(check_dim_list(&dn->lhs_contracting, ls->rank, "lhs contracting"));
  KILN_RETURN_IF_ERROR_PLAIN(check_dim_list(&dn->rhs_contracting, rs->rank, "rhs contracting"));
  if (dn->lhs_batch.n != dn->rhs_batch.n || dn->lhs_contracting.n != dn->rhs_contracting.n)
    return KILN_ERR_INVALID("dot: lhs/rhs batch or contracting dimension counts differ");

  int64_t lperm[32], rperm[32], odims[64];
  int lp = 0, rp = 0, od = 0;
  int64_t B = 1, M = 1, N = 1, K = 1;
  for (int i = 0; i < dn->lhs_batch.n; i++) {
    int64_t ld = dn->lhs_batch.v[i], rd = dn->rhs_batch.v[i];
    if (list_has(&dn->lhs_contracting, ld) || list_has(&dn->rhs_contracting, rd))
      return KILN_ERR_INVALID("dot: a dimension is both batch and contracting");
    if (ls->dims[ld] != rs->dims[rd])
      return KILN_ERR_INVALID("dot: batch dimension sizes differ (%lld vs %lld)",
                              (long long)ls->dims[ld], (long long)rs->dims[rd]);
    lperm[lp++] = ld;
    rperm[rp++] = rd;
    odims[od++] = ls->dims[ld];
    B *= ls->dims[ld];
  }
  for (int d = 0; d < ls->rank; d++) {
    if (list_has(&dn->lhs_batch, d) || list_has(&dn->lhs_contracting, d)) continue;
    lperm[lp++] = d;
    odims[od++] = ls->dims[d];
    M *= ls->dims[d];
  }
  for (int d = 0; d < rs->rank; d++) {
    if (list_has(&dn->rhs_batch, d) || list_has(&dn->rhs_contracting, d)) continue;
    odims[od++] = rs->dims[d];
    N *= rs->dims[d];
  }
  for (int i = 0; i < dn->lhs_contracting.n; i++) {
    int64_t ld = dn->lhs_contracting.v[i], rd = dn->rhs_contracting.v[i];
    if (ls->dims[ld] != rs->dims[rd])
      return KILN_ERR_INVALID("dot: contracting dimension sizes differ (%lld vs %lld)",
                              (long long)ls->dims[ld], (long long)rs->dims[rd]);
    lperm[lp++] = ld;
    rperm[rp++] = rd; /* rhs contracting dims go right after batch */
    K *= ls->dims[ld];
  }
  for (int d = 0; d < rs->rank; d++)
    if (!list_has(&dn->rhs_batch, d) && !list_has(&dn->rhs_contracting, d)) rperm[rp++] = d;
  if (od != os->rank)
    return KILN_ERR_INVALID("dot: result rank %d, expected %d", os->rank, od);
  for (int d = 0; d < od; d++)
    if (os->dims[d] != odims[d])
      return KILN_ERR_INVALID("dot: result dimension %d is %lld, expected %lld", d,
                              (long long)os->dims[d], (long long)odims[d]);
  if (kiln_elem_type_is_complex(ls->type) && !kiln_elem_type_is_complex(os->type))
    return KILN_ERR_INVALID("dot: complex operands need a complex result");
  if (kiln_elem_type_is_complex(rs->type) && !kiln_elem_type_is_complex(os->type))
    return KILN_ERR_INVALID("dot: complex operands need a complex result");

  acc_kind_t k;
  KILN_RETURN_IF_ERROR_PLAIN(acc_kind_for(os->type, &k));
  kiln_literal_t *res = kiln_eval_literal_make(ctx, instr->shape);
  if (!res) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "dot result too large");
  void *lbuf = NULL, *rbuf = NULL, *obuf = NULL;
  kiln_status st = pack_operand(lhs, lperm, os->type, k, &lbuf);
  if (!st) st = pack_operand(rhs, rperm, os->type, k, &rbuf);
  int64_t on = B * M * N;
  bool in_place = acc_is_storage(k, os->type) && res->data;
  if (!st) {
    obuf = in_place ? res->data : kiln_try_malloc((size_t)(on > 0 ? on : 1) * acc_size(k));
    if (!obuf) st = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "out of memory in dot");
  }
  if (!st) {
    switch (k) {
      case ACC_F32: dot_kernel_float(lbuf, rbuf, obuf, B, M, N, K); break;
      case ACC_F64: dot_kernel_double(lbuf, rbuf, obuf, B, M, N, K); break;
      case ACC_C64: dot_kernel_cfloat_t(lbuf, rbuf, obuf, B, M, N, K); break;
      case ACC_C128: dot_kernel_cdouble_t(lbuf, rbuf, obuf, B, M, N, K); break;
      case ACC_INT: dot_kernel_uint64_t(lbuf, rbuf, obuf, B, M, N, K); break;
    }
    size_t es = acc_size(k);
    for (int64_t i = 0; i < on && !in_place; i++)
      store_elem(res, i, k, (char *)obuf + (size_t)i * es);
    *out = res;
  }
  kiln_free(lbuf);
  kiln_free(rbuf);
  if (!in_place) kiln_free(obuf);
  return st;
}

/* ---- convolution ---- */

typedef struct conv_geom {
  int ns;                      /* spatial dims */
  int64_t in_stride[34], ker_stride[34], out_dims[34];
  const kiln_conv_dnums_t *dn;
  const kiln_window_dim_t *win;
  const int64_t *in_dims, *ker_dims;
  int64_t out_rank;
  int64_t ifg;    /* input features per feature group */
  int64_t ofg;    /* output features per feature group */
  int64_t obg;    /* output features per batch group */
  int64_t bgsize; /* input batch per batch group (= output batch) */
  int64_t win_n;  /* number of window positions */
} conv_geom_t;

/* The conv kernel: for each output element, walks every window position, maps it to an
 * input spatial position (padding, stride, base and window dilation, reversal), skips
 * holes and out-of-range positions, then accumulates over the group's input features.
 * Where the output feature is the innermost output dimension, CONV_LANES consecutive output
 * features of one batch group and of one feature group (or each of its own, one output feature
 * per group: depthwise) accumulate together: each its own sum in the same
 * order (window position, then input feature), so the same bits, but independent chains the
 * processor overlaps (a single sum waits on each add: 1.85G of them, 4.5 s, in the corpus's
 * isolated_convolution). */
#define CONV_LANES 8 /* a0 .. a7 below */
#define KILN_CONV_KERNEL(T)                                                                        \
  static void conv_kernel_##T(const conv_geom_t *g, const T *in, const T *ker, T *out,             \
                              int64_t out_n) {                                                     \
    const kiln_conv_dnums_t *dn = g->dn;                                                           \
    const int last = (int)g->out_rank - 1;                                                         \
    const bool feature_inner = dn->output_feature == last;                                         \
    const int64_t nf = g->out_dims[dn->output_feature];                                            \
    const int64_t kos = g->ker_stride[dn->kernel_output_feature];                                  \
    const int64_t is = g->in_stride[dn->input_feature];                                            \
    const int64_t ks = g->ker_stride[dn->kernel_input_feature];                                    \
    /* the next lane's input: the same features, or (one output feature per group, as in a         \
     * depthwise convolution) the next group's */                                                  \
    const int64_t lis = g->ofg == 1 ? g->ifg * is : 0;                                             \
    int64_t oidx[34];                                                                              \
    memset(oidx, 0, sizeof oidx);                                                                  \
    for (int64_t o = 0; o < out_n;) {                                                              \
      int64_t ob = oidx[dn->output_batch], of = oidx[dn->output_feature];                          \
      int64_t fg = of / g->ofg, bgi = of / g->obg;                                                 \
      int lanes = feature_inner && of + CONV_LANES <= nf &&                                        \
                          ((of + CONV_LANES - 1) / g->ofg == fg || g->ofg == 1) &&                 \
                          (of + CONV_LANES - 1) / g->obg == bgi                                    \
                      ? CONV_LANES                                                                 \
                      : 1;                                                                         \
      int64_t in_base = (ob + bgi * g->bgsize) * g->in_stride[dn->input_batch] + fg * g->ifg * is; \
      int64_t ker_base = of * kos;                                                                 \
      T a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0; /* the lanes' sums */      \
      int64_t widx[34];                                                                            \
      memset(widx, 0, sizeof widx);                                                                \
      for (int64_t w = 0; w < g->win_n; w++) {                                                     \
        int64_t ioff = in_base, koff = ker_base;                                                   \
        bool ok = true;                                                                            \
        for (int s = 0; s < g->ns && ok; s++) {                                                    \
          const kiln_window_dim_t *wd = &g->win[s];                                                \
          int64_t u =                                                                              \
              oidx[dn->output_spatial[s]] * wd->stride - wd->pad_lo + widx[s] * wd->rhs_dilate;    \
          if (wd->lhs_dilate > 1) {                                                                \
            if (u % wd->lhs_dilate != 0) {                                                         \
              ok = false;                                                                          \
              break;                                                                               \
            }                                                                                      \
            u /= wd->lhs_dilate;                                                                   \
          }                                                                                        \
          if (u < 0 || u >= g->in_dims[dn->input_spatial[s]]) {                                    \
            ok = false;                                                                            \
            break;                                                                                 \
          }                                                                                        \
          ioff += u * g->in_stride[dn->input_spatial[s]];                                          \
          int64_t kw = wd->reversal ? wd->size - 1 - widx[s] : widx[s];                            \
          koff += kw * g->ker_stride[dn->kernel_spatial[s]];                                       \
        }                                                                                          \
        if (ok && lanes == CONV_LANES) {                                                           \
          for (int64_t c = 0; c < g->ifg; c++) {                                                   \
            const T *x = in + ioff + c * is;                                                       \
            const T *k = ker + koff + c * ks;                                                      \
            a0 += x[0] * k[0];                                                                     \
            a1 += x[lis] * k[kos];                                                                 \
            a2 += x[2 * lis] * k[2 * kos];                                                         \
            a3 += x[3 * lis] * k[3 * kos];                                                         \
            a4 += x[4 * lis] * k[4 * kos];                                                         \
            a5 += x[5 * lis] * k[5 * kos];                                                         \
            a6 += x[6 * lis] * k[6 * kos];                                                         \
            a7 += x[7 * lis] * k[7 * kos];                                                         \
          }                                                                                        \
        } else if (ok) {                                                                           \
          for (int64_t c = 0; c < g->ifg; c++) a0 += in[ioff + c * is] * ker[koff + c * ks];       \
        }                                                                                          \
        for (int s = g->ns - 1; s >= 0; s--) {                                                     \
          if (++widx[s] < g->win[s].size) break;                                                   \
          widx[s] = 0;                                                                             \
        }                                                                                          \
      }                                                                                            \
      const T sums[CONV_LANES] = {a0, a1, a2, a3, a4, a5, a6, a7};                                 \
      for (int l = 0; l < lanes; l++) out[o + l] = sums[l];                                        \
      o += lanes;                                                                                  \
      oidx[last] += lanes - 1; /* the lanes' features: the innermost dimension */                  \
      for (int d = last; d >= 0; d--) {                                                            \
        if (++oidx[d] < g->out_dims[d]) break;                                                     \
        oidx[d] = 0;                                                                               \
      }                                                                                            \
    }                                                                                              \
  }

KILN_CONV_KERNEL(float)
KILN_CONV_KERNEL(double)
KILN_CONV_KERNEL(cfloat_t)
KILN_CONV_KERNEL(cdouble_t)
KILN_CONV_KERNEL(uint64_t)

static kiln_status check_dim(int64_t d, int rank, const char *what) {
  if (d < 0 || d >= rank)
    return KILN_ERR_INVALID("convolution: %s dimension %lld out of range", what, (long long)d);
  return KILN_STATUS_OK;
}

static kiln_status eval_conv(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                             kiln_literal_t *const *operands, kiln_literal_t **out) {
  if (instr->num_operands != 2) return KILN_ERR_INVALID("convolution expects 2 operands");
  if (!instr->has_conv_dnums) return KILN_ERR_INVALID("convolution without dim_labels");
  const kiln_literal_t *in = operands[0], *ker = operands[1];
  const kiln_shape_t *is = in->shape, *ks = ker->shape, *os = instr->shape;
  const kiln_conv_dnums_t *dn = &instr->conv_dnums;
  int ns = dn->num_spatial;
  if (!kiln_shape_is_array(is) || !kiln_shape_is_array(ks) || !kiln_shape_is_array(os))
    return KILN_ERR_INVALID("convolution operands and result must be arrays");
  if (ns < 0 || ns > 32 || is->rank != ns + 2 || ks->rank != ns + 2 || os->rank != ns + 2)
    return KILN_ERR_INVALID("convolution: ranks must be spatial dims + 2 (%d spatial)", ns);
  if (instr->num_window_dims != ns && !(ns == 0 && instr->num_window_dims == 0))
    return KILN_ERR_INVALID("convolution: window has %d dims, expected %d",
                            instr->num_window_dims, ns);
  KILN_RETURN_IF_ERROR_PLAIN(check_dim(dn->input_batch, is->rank, "input batch"));
  KILN_RETURN_IF_ERROR_PLAIN(check_dim(dn->input_feature, is->rank, "input feature"));
  KILN_RETURN_IF_ERROR_PLAIN(check_dim(dn->kernel_input_feature, ks->rank, "kernel input"));
  KILN_RETURN_IF_ERROR_PLAIN(check_dim(dn->kernel_output_feature, ks->rank, "kernel output"));
  KILN_RETURN_IF_ERROR_PLAIN(check_dim(dn->output_batch, os->rank, "output batch"));
  KILN_RETURN_IF_ERROR_PLAIN(check_dim(dn->output_feature, os->rank, "output feature"));
  for (int s = 0; s < ns; s++) {
    KILN_RETURN_IF_ERROR_PLAIN(check_dim(dn->input_spatial[s], is->rank, "input spatial"));
    KILN_RETURN_IF_ERROR_PLAIN(check_dim(dn->kernel_spatial[s], ks->rank, "kernel spatial"));
    KILN_RETURN_IF_ERROR_PLAIN(check_dim(dn->output_spatial[s], os->rank, "output spatial"));
    const kiln_window_dim_t *wd = &instr->window[s];
    if (wd->size != ks->dims[dn->kernel_spatial[s]])
      return KILN_ERR_INVALID("convolution: window size %lld differs from kernel dim %lld",
                              (long long)wd->size, (long long)ks->dims[dn->kernel_spatial[s]]);
    if (wd->stride < 1 || wd->lhs_dilate < 1 || wd->rhs_dilate < 1)
      return KILN_ERR_INVALID("convolution: stride and dilations must be >= 1");
  }
  int64_t G = instr->feature_group_count > 0 ? instr->feature_group_count : 1;
  int64_t BG = instr->batch_group_count > 0 ? instr->batch_group_count : 1;
  int64_t ifeat = is->dims[dn->input_feature], ibatch = is->dims[dn->input_batch];
  int64_t kin = ks->dims[dn->kernel_input_feature], kout = ks->dims[dn->kernel_output_feature];
  if (ifeat % G != 0 || ifeat / G != kin)
    return KILN_ERR_INVALID("convolution: input features %lld / feature_group_count %lld "
                            "must equal kernel input features %lld",
                            (long long)ifeat, (long long)G, (long long)kin);
  if (kout % G != 0 || kout % BG != 0 || ibatch % BG != 0)
    return KILN_ERR_INVALID("convolution: group counts do not divide the feature/batch sizes");
  if (os->dims[dn->output_feature] != kout || os->dims[dn->output_batch] != ibatch / BG)
    return KILN_ERR_INVALID("convolution: result batch/feature sizes do not match");

  conv_geom_t g;
  memset(&g, 0, sizeof g);
  g.ns = ns;
  g.dn = dn;
  g.win = instr->window;
  g.in_dims = is->dims;
  g.ker_dims = ks->dims;
  g.out_rank = os->rank;
  int64_t st = 1;
  for (int d = is->rank - 1; d >= 0; d--) { g.in_stride[d] = st; st *= is->dims[d]; }
  st = 1;
  for (int d = ks->rank - 1; d >= 0; d--) { g.ker_stride[d] = st; st *= ks->dims[d]; }
  for (int d = 0; d < os->rank; d++) g.out_dims[d] = os->dims[d];
  g.ifg = kin;
  g.ofg = kout / G;
  g.obg = kout / BG;
  g.bgsize = ibatch / BG;
  g.win_n = 1;
  for (int s = 0; s < ns; s++) g.win_n *= instr->window[s].size;
  if (g.ofg == 0 || g.obg == 0) g.ofg = g.obg = 1; /* zero output features: nothing to do */

  acc_kind_t k;
  KILN_RETURN_IF_ERROR_PLAIN(acc_kind_for(os->type, &k));
  kiln_literal_t *res = kiln_eval_literal_make(ctx, instr->shape);
  if (!res) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "convolution result too large");
  int64_t ident[34];
  for (int d = 0; d < 34; d++) ident[d] = d;
  void *ibuf = NULL, *kbuf = NULL, *obuf = NULL;
  kiln_status s = pack_operand(in, ident, os->type, k, &ibuf);
  if (!s) s = pack_operand(ker, ident, os->type, k, &kbuf);
  int64_t on = kiln_shape_num_elements(os);
  bool in_place = acc_is_storage(k, os->type) && res->data;
  if (!s) {
    obuf = in_place ? res->data : kiln_try_malloc((size_t)(on > 0 ? on : 1) * acc_size(k));
    if (!obuf) s = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "out of memory in convolution");
  }
  if (!s) {
    switch (k) {
      case ACC_F32: conv_kernel_float(&g, ibuf, kbuf, obuf, on); break;
      case ACC_F64: conv_kernel_double(&g, ibuf, kbuf, obuf, on); break;
      case ACC_C64: conv_kernel_cfloat_t(&g, ibuf, kbuf, obuf, on); break;
      case ACC_C128: conv_kernel_cdouble_t(&g, ibuf, kbuf, obuf, on); break;
      case ACC_INT: conv_kernel_uint64_t(&g, ibuf, kbuf, obuf, on); break;
    }
    size_t es = acc_size(k);
    for (int64_t i = 0; i < on && !in_place; i++)
      store_elem(res, i, k, (char *)obuf + (size_t)i * es);
    *out = res;
  }
  kiln_free(ibuf);
  kiln_free(kbuf);
  if (!in_place) kiln_free(obuf);
  return s;
}

kiln_status kiln_eval_dot_conv(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                               kiln_literal_t *const *operands, kiln_literal_t **out) {
  *out = NULL;
  switch (instr->opcode) {
    case KILN_OP_DOT: return eval_dot(ctx, instr, operands, out);
    case KILN_OP_CONVOLUTION: return eval_conv(ctx, instr, operands, out);
    default:
      return KILN_ERR_UNIMPLEMENTED("eval_dot_conv: unsupported opcode %s",
                                    kiln_hlo_opcode_name(instr->opcode));
  }
}
