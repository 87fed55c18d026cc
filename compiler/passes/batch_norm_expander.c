/* batch_norm_expander: batch-norm-training / -inference / -grad -> reduce, broadcast and
 * elementwise HLO (XLA's BatchNormExpander), so the reduction and loop emitters compile them.
 *
 * With x: T[..., C (at feature_index), ...], per = elements / C, reductions over every
 * dimension but the feature one, and per-feature values broadcast back along it:
 *   training(x, scale, offset) -> (y, mean, var):
 *     mean = sum(x) / per; var = sum((x - mean)^2) / per (biased);
 *     y = (x - mean) / sqrt(var + eps) * scale + offset
 *   inference(x, scale, offset, mean, var) -> y, the same formula with the given mean/var
 *   grad(x, scale, mean, var, dy) -> (dx, dscale, doffset):
 *     s1 = sum(dy); s2 = sum(dy * (x - mean)); ve = var + eps;
 *     dx = scale / sqrt(ve) / per * (per * dy - s1 - (x - mean) * s2 / ve);
 *     dscale = s2 / sqrt(ve); doffset = s1
 * These are the evaluator's formulas in its order of operations. Where this differs from
 * XLA's expander, it is for accuracy against the evaluator (which works in double and
 * rounds once):
 *   - the variance takes two passes (squared deviations from the mean, not E[x^2] -
 *     E[x]^2, which cancels catastrophically when |mean| >> stddev);
 *   - training sums x - shift, shift = each feature's first element (0 where that is not
 *     finite), so a mean far from zero costs no digits of x - mean (x - shift is exact for x
 *     within 2x of shift);
 *   - sums accumulate in f64, and the per-feature values (mean, variance, square roots,
 *     the grad's scale factor: C values each) are computed in f64; the elementwise work
 *     over x is in f64 for f64 inputs and in f32 for f32, f16, bf16 and narrower ones,
 *     rounded once to the result type at the end.
 * epsilon is rounded to f32 first, as XLA stores it.
 *
 * Instructions the evaluator would reject (missing or malformed feature_index/epsilon,
 * non-float operands, wrong operand or result shapes) are left as they are. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"

#define MAX_RANK 64

typedef struct bn {
  kiln_builder_t b;
  kiln_elem_type_t ct; /* computation type */
  int64_t f, per;
  const kiln_shape_t *xs;
  kiln_hlo_computation_t *add; /* f64 reducer */
  int num_reduce_dims;
  int64_t reduce_dims[MAX_RANK];
} bn_t;

static bool raw_i64(const kiln_hlo_instruction_t *in, const char *key, int64_t *out) {
  const char *v = kiln_hlo_instruction_raw_attr(in, key);
  if (!v || !*v) return false;
  char *end = NULL;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || *end) return false;
  *out = x;
  return true;
}

static bool raw_f64(const kiln_hlo_instruction_t *in, const char *key, double *out) {
  const char *v = kiln_hlo_instruction_raw_attr(in, key);
  if (!v || !*v) return false;
  char *end = NULL;
  double x = strtod(v, &end);
  if (*end) return false;
  *out = x;
  return true;
}

static bool is_float_array(const kiln_shape_t *s) {
  return kiln_shape_is_array(s) && kiln_elem_type_is_float(s->type) && !kiln_shape_is_dynamic(s);
}

static bool is_feature_vector(const kiln_shape_t *s, int64_t c) {
  return is_float_array(s) && s->rank == 1 && s->dims[0] == c;
}

/* The checks the evaluator makes (eval_extra.c bn_check), as a predicate. */
static bool supported(const kiln_hlo_instruction_t *in, int64_t *f, double *eps) {
  int nops = in->opcode == KILN_OP_BATCH_NORM_TRAINING ? 3 : 5;
  if (in->num_operands != nops || !raw_i64(in, "feature_index", f) || !raw_f64(in, "epsilon", eps)) return false;
  const kiln_shape_t *xs = in->operands[0]->shape;
  if (!is_float_array(xs) || xs->rank > MAX_RANK || *f < 0 || *f >= xs->rank) return false;
  int64_t c = xs->dims[*f];
  for (int i = 1; i < nops; i++) {
    const kiln_shape_t *s = in->operands[i]->shape;
    bool full = in->opcode == KILN_OP_BATCH_NORM_GRAD && i == 4;
    if (full ? !(is_float_array(s) && kiln_shape_compatible(s, xs)) : !is_feature_vector(s, c)) return false;
  }
  const kiln_shape_t *os = in->shape;
  if (in->opcode == KILN_OP_BATCH_NORM_INFERENCE)
    return is_float_array(os) && os->rank == xs->rank && !memcmp(os->dims, xs->dims, sizeof(int64_t) * (size_t)xs->rank);
  return kiln_shape_is_tuple(os) && os->num_elements == 3 && is_float_array(os->elements[0]) &&
         os->elements[0]->rank == xs->rank &&
         !memcmp(os->elements[0]->dims, xs->dims, sizeof(int64_t) * (size_t)xs->rank) &&
         is_feature_vector(os->elements[1], c) && is_feature_vector(os->elements[2], c);
}

/* x converted to type t (x itself when it has that type). */
static kiln_hlo_instruction_t *cvt(bn_t *s, kiln_hlo_instruction_t *x, kiln_elem_type_t t) {
  return !x || x->shape->type == t ? x : kiln_builder_convert(&s->b, x, t);
}

/* Per-feature vector (any float type) -> ct, broadcast to x's dims. */
static kiln_hlo_instruction_t *bcast(bn_t *s, kiln_hlo_instruction_t *v) {
  return kiln_builder_broadcast(&s->b, cvt(s, v, s->ct), s->xs->rank, s->xs->dims, &s->f);
}

static kiln_hlo_instruction_t *splat(bn_t *s, double v, kiln_hlo_instruction_t *like) {
  return !like ? NULL : kiln_builder_splat(&s->b, kiln_builder_const_f64(&s->b, like->shape->type, v), like);
}

/* Sum over every dimension but the feature one, accumulated in f64: f64[C]. */
static kiln_hlo_instruction_t *feature_sum(bn_t *s, kiln_hlo_instruction_t *x) {
  return kiln_builder_reduce(&s->b, cvt(s, x, KILN_F64), kiln_builder_const_f64(&s->b, KILN_F64, 0),
                             s->num_reduce_dims, s->reduce_dims, s->add);
}

/* The final value: converted to `shape`'s type, and given `shape` itself (layout included). */
static kiln_hlo_instruction_t *result(bn_t *s, kiln_hlo_instruction_t *v, kiln_shape_t *shape) {
  if (!v) return NULL;
  if (v->shape->type == shape->type && kiln_shape_equal(v->shape, shape, true)) return v;
  kiln_hlo_instruction_t *r =
      v->shape->type == shape->type ? kiln_builder_unary(&s->b, KILN_OP_COPY, v) : kiln_builder_convert(&s->b, v, shape->type);
  if (r) r->shape = shape;
  return r;
}

#define BIN(op, x, y) kiln_builder_binary(&s->b, KILN_OP_##op, (x), (y))

/* x at index 0 of every non-feature dimension, or 0 where that is ±inf or NaN: ct[C]; NULL
 * when a dimension is empty. An infinite shift would make x - shift NaN for x equal to it
 * (fuzz-2014028: every x −inf, the mean came out NaN where sum(x) / per is −inf). */
static kiln_hlo_instruction_t *first_of_each_feature(bn_t *s, kiln_hlo_instruction_t *x) {
  if (!s->per) return NULL;
  kiln_hlo_instruction_t *v = x;
  for (int d = 0; d < s->xs->rank; d++)
    if (d != s->f && s->xs->dims[d] != 1) v = kiln_builder_slice_dim(&s->b, v, d, 0, 1);
  v = kiln_builder_reshape(&s->b, v, 1, &s->xs->dims[s->f]);
  if (!v) return NULL;
  kiln_hlo_instruction_t *abs = kiln_builder_unary(&s->b, KILN_OP_ABS, v);
  kiln_hlo_instruction_t *finite =
      kiln_builder_compare(&s->b, KILN_CMP_LT, abs, splat(s, INFINITY, abs));
  return kiln_builder_select(&s->b, finite, v, splat(s, 0.0, v));
}

/* (x - mean) / sqrt(var + eps) * scale + offset over x's dims; var and the per-feature
 * square root in f64, the elementwise part in ct. */
static kiln_hlo_instruction_t *normalize(bn_t *s, kiln_hlo_instruction_t *x_minus_mean, kiln_hlo_instruction_t *var,
                                         double eps, const kiln_hlo_instruction_t *in, int scale, int offset) {
  kiln_hlo_instruction_t *v = cvt(s, var, KILN_F64);
  kiln_hlo_instruction_t *sd = kiln_builder_unary(&s->b, KILN_OP_SQRT, BIN(ADD, v, splat(s, eps, v)));
  kiln_hlo_instruction_t *y = BIN(DIVIDE, x_minus_mean, bcast(s, sd));
  return BIN(ADD, BIN(MULTIPLY, y, bcast(s, in->operands[scale])), bcast(s, in->operands[offset]));
}

static kiln_hlo_instruction_t *tuple3(bn_t *s, const kiln_hlo_instruction_t *in, kiln_hlo_instruction_t *a,
                                      kiln_hlo_instruction_t *b, kiln_hlo_instruction_t *c) {
  kiln_hlo_instruction_t *outs[3] = {result(s, a, in->shape->elements[0]), result(s, b, in->shape->elements[1]),
                                     result(s, c, in->shape->elements[2])};
  kiln_hlo_instruction_t *t = kiln_builder_tuple(&s->b, 3, outs);
  if (t) t->shape = in->shape;
  return t;
}

/* Per-feature values (sums, mean, variance, square roots, the grad's factor) are computed
 * in f64 — they are small — and elementwise work over x in ct. */
static kiln_hlo_instruction_t *expand(bn_t *s, kiln_hlo_instruction_t *in, double eps) {
  kiln_hlo_instruction_t *x = cvt(s, in->operands[0], s->ct);
  switch (in->opcode) {
    case KILN_OP_BATCH_NORM_INFERENCE: {
      kiln_hlo_instruction_t *xm = BIN(SUBTRACT, x, bcast(s, in->operands[3]));
      return result(s, normalize(s, xm, in->operands[4], eps, in, 1, 2), in->shape);
    }
    case KILN_OP_BATCH_NORM_TRAINING: {
      /* Sums of x - shift, shift = each feature's first element: no cancellation when the
       * mean is large against the spread (x - shift is exact for x within 2x of shift). */
      kiln_hlo_instruction_t *shift = first_of_each_feature(s, x);
      kiln_hlo_instruction_t *xs = shift ? BIN(SUBTRACT, x, bcast(s, shift)) : x;
      kiln_hlo_instruction_t *sum = feature_sum(s, xs);
      kiln_hlo_instruction_t *ms = BIN(DIVIDE, sum, splat(s, (double)s->per, sum));
      kiln_hlo_instruction_t *mean = shift ? BIN(ADD, cvt(s, shift, KILN_F64), ms) : ms;
      kiln_hlo_instruction_t *xm = BIN(SUBTRACT, xs, bcast(s, ms));
      kiln_hlo_instruction_t *xm64 = cvt(s, xm, KILN_F64);
      kiln_hlo_instruction_t *ss = feature_sum(s, BIN(MULTIPLY, xm64, xm64));
      kiln_hlo_instruction_t *var = BIN(DIVIDE, ss, splat(s, (double)s->per, ss));
      return tuple3(s, in, normalize(s, xm, var, eps, in, 1, 2), mean, var);
    }
    default: { /* grad(x, scale, mean, var, dy) */
      kiln_hlo_instruction_t *dy = cvt(s, in->operands[4], s->ct);
      kiln_hlo_instruction_t *xm = BIN(SUBTRACT, x, bcast(s, in->operands[2]));
      kiln_hlo_instruction_t *s1 = feature_sum(s, dy);
      kiln_hlo_instruction_t *s2 = feature_sum(s, BIN(MULTIPLY, cvt(s, dy, KILN_F64), cvt(s, xm, KILN_F64)));
      kiln_hlo_instruction_t *var = cvt(s, in->operands[3], KILN_F64);
      kiln_hlo_instruction_t *ve = BIN(ADD, var, splat(s, eps, var));
      kiln_hlo_instruction_t *sd = kiln_builder_unary(&s->b, KILN_OP_SQRT, ve);
      /* per * dy - s1 - (x - mean) * s2 / ve */
      kiln_hlo_instruction_t *inner = BIN(SUBTRACT, BIN(SUBTRACT, BIN(MULTIPLY, splat(s, (double)s->per, dy), dy), bcast(s, s1)),
                                          BIN(DIVIDE, BIN(MULTIPLY, xm, bcast(s, s2)), bcast(s, ve)));
      /* scale / sqrt(ve) / per, per feature */
      kiln_hlo_instruction_t *k =
          BIN(DIVIDE, BIN(DIVIDE, cvt(s, in->operands[1], KILN_F64), sd), splat(s, (double)s->per, sd));
      kiln_hlo_instruction_t *dx = BIN(MULTIPLY, bcast(s, k), inner);
      return tuple3(s, in, dx, BIN(DIVIDE, s2, sd), s1);
    }
  }
}

/* The type of the elementwise work over x: f64 stays f64, everything else is f32. */
static kiln_elem_type_t compute_type(kiln_elem_type_t t) { return t == KILN_F64 ? KILN_F64 : KILN_F32; }

/* Expands one batch-norm op of any of the three kinds; ctx holds the f64 adder. */
static kiln_hlo_instruction_t *expand_one(kiln_builder_t *b, kiln_hlo_instruction_t *in, void *ctx) {
  kiln_hlo_computation_t **adder = ctx;
  int64_t f = 0;
  double eps = 0;
  if (!supported(in, &f, &eps)) return NULL;
  bn_t s;
  memset(&s, 0, sizeof s);
  s.b = *b;
  s.xs = in->operands[0]->shape;
  s.ct = compute_type(s.xs->type);
  s.f = f;
  int64_t n = kiln_shape_num_elements(s.xs), cdim = s.xs->dims[f];
  s.per = cdim ? n / cdim : 0;
  for (int d = 0; d < s.xs->rank; d++)
    if (d != f) s.reduce_dims[s.num_reduce_dims++] = d;
  if (!*adder) *adder = kiln_builder_scalar_computation(b->m, "bn_add_f64", KILN_OP_ADD, KILN_F64);
  s.add = *adder;
  kiln_hlo_instruction_t *r = s.add ? expand(&s, in, (double)(float)eps) : NULL; /* XLA stores epsilon as a float */
  b->failed = s.b.failed || !r;
  return r;
}

kiln_status kiln_pass_batch_norm_expander(kiln_hlo_module_t *m, const kiln_pass_options_t *opts, bool *changed) {
  static const kiln_hlo_opcode_t ops[3] = {KILN_OP_BATCH_NORM_TRAINING, KILN_OP_BATCH_NORM_INFERENCE,
                                           KILN_OP_BATCH_NORM_GRAD};
  kiln_hlo_computation_t *adder = NULL; /* f64 reducer, made on first use */
  for (int i = 0; i < 3; i++)
    KILN_RETURN_IF_ERROR(kiln_builder_expand_all(m, ops[i], expand_one, &adder, "batch_norm_expander", changed),
                         "expanding %s", kiln_hlo_opcode_name(ops[i]));
  return NULL;
}
