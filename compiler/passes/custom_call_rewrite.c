/* custom_call_rewrite: XLA's well-known custom-call targets that kiln implements itself,
 * rewritten into plain HLO before the pipeline (the evaluator implements the same targets
 * directly: compiler/eval/eval_custom_call.c):
 *   Sharding, SPMDFullToShardShape, SPMDShardToFullShape (one device), SetBound, MoveToHost,
 *   MoveToDevice, Pin, Unpin, annotate_device_placement   -> a copy of the operand (identity;
 *       only where the result has the operand's element type and dims);
 *   AllocateBuffer, CreateBuffer                           -> zeros (the contents are
 *       unspecified; the evaluator gives zeros too);
 *   xla_builder.* with one called computation              -> a call of it (call_inline then
 *       inlines it: the call carries its own decomposition);
 *   xla_builder.math.{Acos,Asin,Atan,Acosh,Asinh,Cosh} on real floats (no computation:
 *       the builder had not expanded them)                 -> their formulas: acos x =
 *       atan2(sqrt((1-x)(1+x)), x), asin x = atan2(x, sqrt((1-x)(1+x))), atan x = atan2(x, 1),
 *       acosh x = log(x + sqrt((x-1)(x+1))), asinh x = sign(x) log(|x| + sqrt(x^2+1)),
 *       cosh x = (e^x + e^-x) / 2;
 *   xla_builder.math.{Erfc,BesselI1e,Digamma,Zeta,Polygamma} on real floats -> their series
 *       (compiler/passes/special_math.h);
 *   cuda_threefry2x32 (k0, k1, x0, x1 -> (y0, y1), u32)    -> Threefry2x32, 20 rounds, as
 *       elementwise u32 HLO;
 *   __cublas$gemm, __cublas$lt$matmul (GemmBackendConfig JSON: alpha, beta, dot dimension
 *       numbers, epilogue DEFAULT/RELU)                    -> dot, times alpha, plus
 *       beta * operand 2, max(0, .) for RELU; a (result, workspace) tuple gets zeros for
 *       the workspace.
 * Anything else stays a custom call: thunk emission looks for a handler in the FFI registry. */
#include <math.h>
#include <string.h>

#include "compiler/eval/eval.h"
#include "compiler/passes/cholesky_expander.h"
#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/special_math.h"

static bool same_array(const kiln_shape_t *a, const kiln_shape_t *b) {
  return kiln_shape_is_array(a) && kiln_shape_is_array(b) && kiln_shape_compatible(a, b);
}

static kiln_hlo_instruction_t *splat_u32(kiln_builder_t *b, uint32_t v,
                                         const kiln_hlo_instruction_t *like) {
  return kiln_builder_splat(b, kiln_builder_const_u64(b, KILN_U32, v), like);
}

#define BIN(op, x, y) kiln_builder_binary(b, KILN_OP_##op, (x), (y))

static kiln_hlo_instruction_t *rotl(kiln_builder_t *b, kiln_hlo_instruction_t *x, int k) {
  return BIN(OR, BIN(SHIFT_LEFT, x, splat_u32(b, (uint32_t)k, x)),
             BIN(SHIFT_RIGHT_LOGICAL, x, splat_u32(b, (uint32_t)(32 - k), x)));
}

/* Threefry2x32 (20 rounds) with per-element keys, as jax's cuda_threefry2x32 kernel. */
static kiln_hlo_instruction_t *threefry(kiln_builder_t *b, kiln_hlo_instruction_t *in) {
  if (in->num_operands != 4 || !kiln_shape_is_tuple(in->shape) || in->shape->num_elements != 2)
    return NULL;
  const kiln_shape_t *s = in->operands[0]->shape;
  for (int i = 0; i < 4; i++)
    if (!same_array(in->operands[i]->shape, s) || in->operands[i]->shape->type != KILN_U32)
      return NULL;
  for (int i = 0; i < 2; i++)
    if (!same_array(in->shape->elements[i], s)) return NULL;
  static const int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  kiln_hlo_instruction_t *ks[3];
  ks[0] = in->operands[0];
  ks[1] = in->operands[1];
  ks[2] = BIN(XOR, BIN(XOR, splat_u32(b, 0x1BD11BDAu, ks[0]), ks[0]), ks[1]);
  kiln_hlo_instruction_t *x0 = BIN(ADD, in->operands[2], ks[0]);
  kiln_hlo_instruction_t *x1 = BIN(ADD, in->operands[3], ks[1]);
  for (int group = 0; group < 5; group++) {
    for (int k = 0; k < 4; k++) {
      x0 = BIN(ADD, x0, x1);
      x1 = BIN(XOR, rotl(b, x1, rot[(group % 2) * 4 + k]), x0);
    }
    int j = group + 1;
    x0 = BIN(ADD, x0, ks[j % 3]);
    x1 = BIN(ADD, BIN(ADD, x1, ks[(j + 1) % 3]), splat_u32(b, (uint32_t)j, x1));
  }
  if (!x0 || !x1) return NULL;
  x0->shape = in->shape->elements[0];
  x1->shape = in->shape->elements[1];
  kiln_hlo_instruction_t *outs[2] = {x0, x1};
  kiln_hlo_instruction_t *t = kiln_builder_tuple(b, 2, outs);
  if (t) t->shape = in->shape;
  return t;
}

static kiln_hlo_instruction_t *fsplat(kiln_builder_t *b, double v,
                                      const kiln_hlo_instruction_t *like) {
  return kiln_builder_splat(b, kiln_builder_const_f64(b, like->shape->type, v), like);
}

/* Complex a + bi from real arrays `re`, `im`. */
static kiln_hlo_instruction_t *cplx(kiln_builder_t *b, kiln_hlo_instruction_t *re,
                                    kiln_hlo_instruction_t *im) {
  return kiln_builder_complex(b, re, im);
}

/* z * i and z * -i. */
static kiln_hlo_instruction_t *times_i(kiln_builder_t *b, kiln_hlo_instruction_t *z, bool neg) {
  kiln_hlo_instruction_t *re = kiln_builder_real(b, z), *im = kiln_builder_imag(b, z);
  return neg ? cplx(b, im, kiln_builder_unary(b, KILN_OP_NEGATE, re))
             : cplx(b, kiln_builder_unary(b, KILN_OP_NEGATE, im), re);
}

/* The complex constant v + 0i shaped like complex `z`. */
static kiln_hlo_instruction_t *csplat(kiln_builder_t *b, double v, kiln_hlo_instruction_t *z) {
  kiln_hlo_instruction_t *re = kiln_builder_real(b, z);
  return cplx(b, fsplat(b, v, re), fsplat(b, 0.0, re));
}

/* The principal square root of complex z from real ops (kiln's kernels have no complex
 * sqrt): with r = |z|, sqrt z = sqrt((r + re) / 2) + i sign(im) sqrt((r - re) / 2), the
 * imaginary part's sign taken as im < 0 ? - : +. */
static kiln_hlo_instruction_t *csqrt_of(kiln_builder_t *b, kiln_hlo_instruction_t *z) {
  kiln_hlo_instruction_t *re = kiln_builder_real(b, z), *im = kiln_builder_imag(b, z);
  kiln_hlo_instruction_t *r =
      kiln_builder_unary(b, KILN_OP_SQRT, BIN(ADD, BIN(MULTIPLY, re, re), BIN(MULTIPLY, im, im)));
  kiln_hlo_instruction_t *half = fsplat(b, 0.5, re), *zero = fsplat(b, 0.0, re);
  /* max(0, .) guards rounding below zero. */
  kiln_hlo_instruction_t *a =
      kiln_builder_unary(b, KILN_OP_SQRT, BIN(MAXIMUM, BIN(MULTIPLY, BIN(ADD, r, re), half), zero));
  kiln_hlo_instruction_t *m = kiln_builder_unary(
      b, KILN_OP_SQRT, BIN(MAXIMUM, BIN(MULTIPLY, BIN(SUBTRACT, r, re), half), zero));
  kiln_hlo_instruction_t *neg = kiln_builder_compare(b, KILN_CMP_LT, im, zero);
  return cplx(b, a, kiln_builder_select(b, neg, kiln_builder_unary(b, KILN_OP_NEGATE, m), m));
}

/* The principal branches on complex numbers (C99's cacos & co. away from the cuts):
 * asin z = -i log(iz + sqrt(1 - z^2)), acos z = pi/2 - asin z,
 * atan z = i/2 (log(1 - iz) - log(1 + iz)), asinh z = log(z + sqrt(z^2 + 1)),
 * acosh z = log(z + sqrt(z + 1) sqrt(z - 1)), cosh z = (e^z + e^-z) / 2. */
static kiln_hlo_instruction_t *cmath(kiln_builder_t *b, kiln_hlo_instruction_t *z, const char *fn) {
  kiln_hlo_instruction_t *one = csplat(b, 1.0, z);
  if (!strcmp(fn, "Asin") || !strcmp(fn, "Acos")) {
    kiln_hlo_instruction_t *root = csqrt_of(b, BIN(SUBTRACT, one, BIN(MULTIPLY, z, z)));
    kiln_hlo_instruction_t *asin =
        times_i(b, kiln_builder_unary(b, KILN_OP_LOG, BIN(ADD, times_i(b, z, false), root)), true);
    if (fn[1] == 's') return asin;
    return BIN(SUBTRACT, csplat(b, 1.57079632679489661923, z), asin);
  }
  if (!strcmp(fn, "Atan")) {
    kiln_hlo_instruction_t *iz = times_i(b, z, false);
    kiln_hlo_instruction_t *d =
        BIN(SUBTRACT, kiln_builder_unary(b, KILN_OP_LOG, BIN(SUBTRACT, one, iz)),
            kiln_builder_unary(b, KILN_OP_LOG, BIN(ADD, one, iz)));
    return BIN(MULTIPLY, times_i(b, d, false), csplat(b, 0.5, z));
  }
  if (!strcmp(fn, "Asinh"))
    return kiln_builder_unary(b, KILN_OP_LOG,
                              BIN(ADD, z, csqrt_of(b, BIN(ADD, BIN(MULTIPLY, z, z), one))));
  if (!strcmp(fn, "Acosh"))
    return kiln_builder_unary(
        b, KILN_OP_LOG,
        BIN(ADD, z,
            BIN(MULTIPLY, csqrt_of(b, BIN(ADD, z, one)), csqrt_of(b, BIN(SUBTRACT, z, one)))));
  if (!strcmp(fn, "Cosh")) {
    kiln_hlo_instruction_t *e = kiln_builder_unary(b, KILN_OP_EXP, z);
    kiln_hlo_instruction_t *f =
        kiln_builder_unary(b, KILN_OP_EXP, kiln_builder_unary(b, KILN_OP_NEGATE, z));
    return BIN(MULTIPLY, BIN(ADD, e, f), csplat(b, 0.5, z));
  }
  return NULL;
}

/* xla_builder.math.* of one floating-point or complex operand; NULL for anything else. */
static kiln_hlo_instruction_t *math(kiln_builder_t *b, kiln_hlo_instruction_t *in, const char *fn) {
  bool zeta = !strcmp(fn, "Zeta");
  if ((zeta || !strcmp(fn, "Polygamma")) && in->num_operands == 2 &&
      kiln_shape_is_array(in->shape) && kiln_elem_type_is_float(in->shape->type) &&
      same_array(in->operands[0]->shape, in->shape) &&
      same_array(in->operands[1]->shape, in->shape)) {
    kiln_hlo_instruction_t *r =
        (zeta ? kiln_special_zeta : kiln_special_polygamma)(b, in->operands[0], in->operands[1]);
    if (r) r->shape = in->shape;
    return r;
  }
  if (in->num_operands != 1 || !kiln_shape_is_array(in->shape) ||
      !same_array(in->operands[0]->shape, in->shape))
    return NULL;
  kiln_hlo_instruction_t *x = in->operands[0], *r = NULL;
  if (kiln_elem_type_is_complex(in->shape->type)) {
    r = cmath(b, x, fn);
    if (r) r->shape = in->shape;
    return r;
  }
  if (!kiln_elem_type_is_float(in->shape->type)) return NULL;
  kiln_hlo_instruction_t *(*special)(kiln_builder_t *, kiln_hlo_instruction_t *) =
      !strcmp(fn, "Erfc")        ? kiln_special_erfc
      : !strcmp(fn, "BesselI1e") ? kiln_special_bessel_i1e
      : !strcmp(fn, "Digamma")   ? kiln_special_digamma
                                 : NULL;
  if (special) {
    r = special(b, x);
    if (r) r->shape = in->shape;
    return r;
  }
  kiln_hlo_instruction_t *one = fsplat(b, 1.0, x);
  if (!strcmp(fn, "Acos") || !strcmp(fn, "Asin")) {
    kiln_hlo_instruction_t *root =
        kiln_builder_unary(b, KILN_OP_SQRT, BIN(MULTIPLY, BIN(SUBTRACT, one, x), BIN(ADD, one, x)));
    r = fn[1] == 'c' ? BIN(ATAN2, root, x) : BIN(ATAN2, x, root);
  } else if (!strcmp(fn, "Atan")) {
    r = BIN(ATAN2, x, one);
  } else if (!strcmp(fn, "Acosh")) {
    kiln_hlo_instruction_t *root =
        kiln_builder_unary(b, KILN_OP_SQRT, BIN(MULTIPLY, BIN(SUBTRACT, x, one), BIN(ADD, x, one)));
    r = kiln_builder_unary(b, KILN_OP_LOG, BIN(ADD, x, root));
  } else if (!strcmp(fn, "Asinh")) {
    kiln_hlo_instruction_t *a = kiln_builder_unary(b, KILN_OP_ABS, x);
    kiln_hlo_instruction_t *root =
        kiln_builder_unary(b, KILN_OP_SQRT, BIN(ADD, BIN(MULTIPLY, x, x), one));
    r = BIN(MULTIPLY, kiln_builder_unary(b, KILN_OP_SIGN, x),
            kiln_builder_unary(b, KILN_OP_LOG, BIN(ADD, a, root)));
  } else if (!strcmp(fn, "Cosh")) {
    kiln_hlo_instruction_t *e = kiln_builder_unary(b, KILN_OP_EXP, x);
    kiln_hlo_instruction_t *f =
        kiln_builder_unary(b, KILN_OP_EXP, kiln_builder_unary(b, KILN_OP_NEGATE, x));
    r = BIN(MULTIPLY, BIN(ADD, e, f), fsplat(b, 0.5, x));
  }
  if (r) r->shape = in->shape;
  return r;
}

enum { kMaxRank = 32 };

/* `in`'s result tuple: `first` as its leading elements, zeros (workspaces) after them. */
static kiln_hlo_instruction_t *tuple_with_zeros(kiln_builder_t *b, kiln_hlo_instruction_t *in,
                                                int nfirst, kiln_hlo_instruction_t *const *first) {
  kiln_hlo_instruction_t *outs[8];
  int n = in->shape->num_elements;
  if (n > 8 || n < nfirst) return NULL;
  for (int i = 0; i < n; i++) {
    kiln_shape_t *s = in->shape->elements[i];
    if (!kiln_shape_is_array(s)) return NULL;
    if (i < nfirst) {
      outs[i] = first[i];
      if (!outs[i] || !same_array(outs[i]->shape, s)) return NULL;
      outs[i]->shape = s;
      continue;
    }
    kiln_hlo_instruction_t *zero = kiln_builder_const_u64(b, s->type, 0);
    outs[i] = zero ? kiln_builder_op(b, KILN_OP_BROADCAST, s, 1, &zero) : NULL;
    if (!outs[i]) return NULL;
  }
  kiln_hlo_instruction_t *t = kiln_builder_tuple(b, n, outs);
  if (t) t->shape = in->shape;
  return t;
}

static kiln_hlo_instruction_t *ssplat(kiln_builder_t *b, int64_t v,
                                      const kiln_hlo_instruction_t *like) {
  return kiln_builder_splat(b, kiln_builder_const_u64(b, KILN_S32, (uint64_t)v), like);
}

static kiln_hlo_instruction_t *iota_like(kiln_builder_t *b, const kiln_hlo_instruction_t *x,
                                         int dim) {
  return kiln_builder_iota(b, KILN_S32, x->shape->rank, x->shape->dims, dim);
}

/* reduce(x) over dimension `dim` with the scalar op (ADD, MAXIMUM, MINIMUM) from `init`. */
static kiln_hlo_instruction_t *reduce_dim(kiln_builder_t *b, kiln_hlo_instruction_t *x, int dim,
                                          kiln_hlo_opcode_t op, kiln_hlo_instruction_t *init) {
  kiln_hlo_computation_t *fn =
      kiln_builder_scalar_computation(b->m, "solver_reduce", op, x->shape->type);
  int64_t d = dim;
  return fn && init ? kiln_builder_reduce(b, x, init, 1, &d, fn) : NULL;
}

/* x ([batch..., n], or [batch...] when dim < 0) broadcast to `like`'s dims: the batch
 * dimensions in place, x's last to `dim`. */
static kiln_hlo_instruction_t *spread(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                      const kiln_hlo_instruction_t *like, int dim) {
  int64_t map[kMaxRank];
  int batch = x->shape->rank - (dim >= 0 ? 1 : 0);
  for (int i = 0; i < batch; i++) map[i] = i;
  if (dim >= 0) map[batch] = dim;
  return kiln_builder_broadcast(b, x, like->shape->rank, like->shape->dims, map);
}

/* The solvers' element types: real and complex floats. */
static bool solver_type(kiln_elem_type_t t) {
  return kiln_elem_type_is_float(t) || kiln_elem_type_is_complex(t);
}

/* The sum of x over `dim` (ADD) from `zero` (x's type), a complex x by its parts. */
static kiln_hlo_instruction_t *sum_dim(kiln_builder_t *b, kiln_hlo_instruction_t *x, int dim,
                                       kiln_hlo_instruction_t *zero) {
  if (!x) return NULL;
  if (!kiln_elem_type_is_complex(x->shape->type)) return reduce_dim(b, x, dim, KILN_OP_ADD, zero);
  kiln_hlo_instruction_t *re = kiln_builder_real(b, x), *im = kiln_builder_imag(b, x);
  kiln_hlo_instruction_t *z = re ? kiln_builder_const_f64(b, re->shape->type, 0) : NULL;
  return kiln_builder_complex(b, reduce_dim(b, re, dim, KILN_OP_ADD, z),
                              reduce_dim(b, im, dim, KILN_OP_ADD, z));
}

/* LAPACK's pivot measure (i?amax): |x|, |re| + |im| for complex x. */
static kiln_hlo_instruction_t *abs1(kiln_builder_t *b, kiln_hlo_instruction_t *x) {
  if (!x || !kiln_elem_type_is_complex(x->shape->type))
    return kiln_builder_unary(b, KILN_OP_ABS, x);
  return BIN(ADD, kiln_builder_unary(b, KILN_OP_ABS, kiln_builder_real(b, x)),
             kiln_builder_unary(b, KILN_OP_ABS, kiln_builder_imag(b, x)));
}

/* cusolver_potrf / lapack_?potrf_ffi -> the Cholesky loop (cholesky_expander.h): the factor in
 * the chosen triangle (the other keeps the input), info = 1 + the first column whose pivot is
 * not positive (0 when none), NaN spreading from it as LAPACK's factor stops there. */
static kiln_hlo_instruction_t *potrf(kiln_builder_t *b, kiln_hlo_instruction_t *in,
                                     const kiln_solver_config_t *cfg) {
  kiln_hlo_instruction_t *x = in->operands[0];
  int r = x->shape->rank;
  if (in->num_operands != 1 || in->shape->num_elements < 2 || r < 2 ||
      !solver_type(x->shape->type) || x->shape->dims[r - 1] != x->shape->dims[r - 2] ||
      !same_array(x->shape, in->shape->elements[0]))
    return NULL;
  kiln_elem_type_t xt = x->shape->type;
  kiln_elem_type_t ct = xt == KILN_F64 || xt == KILN_C128 ? KILN_F64 : KILN_F32;
  kiln_hlo_computation_t *add = kiln_builder_scalar_computation(b->m, "potrf_add", KILN_OP_ADD, ct);
  kiln_hlo_instruction_t *first;
  kiln_hlo_instruction_t *l3 = add ? kiln_cholesky_factor(b, x, cfg->lower, add, &first) : NULL;
  if (!l3) return NULL;
  static const int64_t swap[3] = {0, 2, 1};
  if (!cfg->lower) l3 = kiln_builder_conj(b, kiln_builder_transpose(b, l3, swap));
  kiln_hlo_instruction_t *chol = kiln_builder_reshape(b, l3, r, x->shape->dims);
  if (chol && chol->shape->type != x->shape->type)
    chol = kiln_builder_convert(b, chol, x->shape->type);
  kiln_hlo_instruction_t *rows = iota_like(b, x, r - 2), *cols = iota_like(b, x, r - 1);
  kiln_hlo_instruction_t *keep =
      kiln_builder_compare(b, cfg->lower ? KILN_CMP_GE : KILN_CMP_LE, rows, cols);
  kiln_hlo_instruction_t *f = kiln_builder_select(b, keep, chol, x);
  const kiln_shape_t *is = in->shape->elements[1];
  if (!first || !kiln_shape_is_array(is) ||
      kiln_shape_num_elements(is) != kiln_shape_num_elements(first->shape))
    return NULL;
  kiln_hlo_instruction_t *info =
      kiln_builder_reshape(b, kiln_builder_convert(b, first, is->type), is->rank, is->dims);
  kiln_hlo_instruction_t *outs[2] = {f, info};
  return tuple_with_zeros(b, in, 2, outs);
}

/* cublas_trsm_batched ((a, b) -> (x, ...)) and lapack_?trsm_ffi ((a, b, alpha) -> x, b
 * scaled by alpha) -> triangular-solve. */
static kiln_hlo_instruction_t *trsm(kiln_builder_t *b, kiln_hlo_instruction_t *in,
                                    const kiln_solver_config_t *cfg) {
  static const char *const kTranspose[3] = {"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"};
  bool lapack = in->num_operands == 3, tuple = kiln_shape_is_tuple(in->shape);
  kiln_shape_t *xs = tuple ? (in->shape->num_elements ? in->shape->elements[0] : NULL) : in->shape;
  if ((in->num_operands != 2 && !lapack) || tuple == lapack || !xs ||
      !solver_type(in->operands[1]->shape->type) || !same_array(in->operands[1]->shape, xs) ||
      (lapack && (!kiln_shape_is_array(in->operands[2]->shape) ||
                  in->operands[2]->shape->rank != 0 || in->operands[2]->shape->type != xs->type)))
    return NULL;
  kiln_hlo_instruction_t *ops[2] = {in->operands[0], in->operands[1]};
  if (lapack) ops[1] = BIN(MULTIPLY, ops[1], kiln_builder_splat(b, in->operands[2], ops[1]));
  kiln_hlo_instruction_t *ts = kiln_builder_op(b, KILN_OP_TRIANGULAR_SOLVE, xs, 2, ops);
  if (!ts) return NULL;
  ts->left_side = cfg->left_side;
  ts->lower = cfg->lower;
  ts->has_lower = true;
  ts->unit_diagonal = cfg->unit_diagonal;
  ts->transpose_a = kiln_arena_strdup(&b->m->arena, kTranspose[cfg->transpose]);
  if (!ts->transpose_a) return NULL;
  return tuple ? tuple_with_zeros(b, in, 1, &ts) : ts;
}

/* One step k of LU with partial pivoting on state (k, a, pivots, info), as LAPACK's getf2. */
static kiln_hlo_computation_t *getrf_step(kiln_builder_t *outer, kiln_shape_t *state) {
  kiln_hlo_instruction_t *p;
  kiln_hlo_computation_t *c = kiln_builder_computation(outer->m, "getrf_step", state, &p);
  if (!c) return NULL;
  kiln_builder_t bb, *b = &bb;
  kiln_builder_init(b, c, "getrf", outer->layouts);
  kiln_hlo_instruction_t *k = kiln_builder_gte(b, p, 0), *a = kiln_builder_gte(b, p, 1),
                         *piv = kiln_builder_gte(b, p, 2), *info = kiln_builder_gte(b, p, 3);
  if (!a) return NULL;
  int r = a->shape->rank;
  int64_t m = a->shape->dims[r - 2]; /* the rows: m is "no row" */
  kiln_hlo_instruction_t *zero = kiln_builder_const_f64(b, a->shape->type, 0);
  kiln_hlo_instruction_t *rows = iota_like(b, a, r - 2), *cols = iota_like(b, a, r - 1);
  kiln_hlo_instruction_t *ka = kiln_builder_splat(b, k, a);
  kiln_hlo_instruction_t *in_col = kiln_builder_compare(b, KILN_CMP_EQ, cols, ka);
  kiln_hlo_instruction_t *in_row = kiln_builder_compare(b, KILN_CMP_EQ, rows, ka);
  kiln_hlo_instruction_t *za = kiln_builder_splat(b, zero, a);
  /* The pivot row: the first largest |a[i, k]| with i >= k. */
  kiln_hlo_instruction_t *col = sum_dim(b, kiln_builder_select(b, in_col, a, za), r - 1, zero);
  kiln_hlo_instruction_t *mag = abs1(b, col);
  if (!col || !mag) return NULL;
  kiln_hlo_instruction_t *vrows = iota_like(b, col, r - 2);
  kiln_hlo_instruction_t *cand = kiln_builder_select(
      b, kiln_builder_compare(b, KILN_CMP_GE, vrows, kiln_builder_splat(b, k, col)), mag,
      fsplat(b, -1, mag));
  kiln_hlo_instruction_t *mx =
      reduce_dim(b, cand, r - 2, KILN_OP_MAXIMUM, kiln_builder_const_f64(b, mag->shape->type, -1));
  kiln_hlo_instruction_t *is_max =
      kiln_builder_compare(b, KILN_CMP_EQ, cand, spread(b, mx, col, -1));
  kiln_hlo_instruction_t *none = kiln_builder_const_u64(b, KILN_S32, (uint64_t)m);
  kiln_hlo_instruction_t *pr = reduce_dim(
      b, kiln_builder_select(b, is_max, vrows, ssplat(b, m, vrows)), r - 2, KILN_OP_MINIMUM, none);
  if (!pr) return NULL;
  pr = kiln_builder_select(b, kiln_builder_compare(b, KILN_CMP_EQ, pr, ssplat(b, m, pr)),
                           kiln_builder_splat(b, k, pr), pr);
  /* Rows k and pr exchanged. */
  kiln_hlo_instruction_t *in_prow =
      kiln_builder_compare(b, KILN_CMP_EQ, rows, spread(b, pr, a, -1));
  kiln_hlo_instruction_t *row_k = sum_dim(b, kiln_builder_select(b, in_row, a, za), r - 2, zero);
  kiln_hlo_instruction_t *row_p = sum_dim(b, kiln_builder_select(b, in_prow, a, za), r - 2, zero);
  kiln_hlo_instruction_t *row_p_a = spread(b, row_p, a, r - 1);
  kiln_hlo_instruction_t *a1 = kiln_builder_select(
      b, in_row, row_p_a, kiln_builder_select(b, in_prow, spread(b, row_k, a, r - 1), a));
  /* Elimination below the pivot; a zero pivot leaves its column unscaled. */
  kiln_hlo_instruction_t *col1 = sum_dim(b, kiln_builder_select(b, in_col, a1, za), r - 1, zero);
  kiln_hlo_instruction_t *pivot =
      sum_dim(b,
              kiln_builder_select(
                  b, kiln_builder_compare(b, KILN_CMP_EQ, vrows, kiln_builder_splat(b, k, col)),
                  col1, kiln_builder_splat(b, zero, col)),
              r - 2, zero);
  if (!pivot) return NULL;
  kiln_hlo_instruction_t *pv = spread(b, pivot, col, -1);
  kiln_hlo_instruction_t *l = kiln_builder_select(
      b, kiln_builder_compare(b, KILN_CMP_EQ, pv, kiln_builder_splat(b, zero, pv)), col1,
      BIN(DIVIDE, col1, pv));
  kiln_hlo_instruction_t *l_a = spread(b, l, a, r - 2);
  kiln_hlo_instruction_t *below = kiln_builder_compare(b, KILN_CMP_GT, rows, ka);
  kiln_hlo_instruction_t *right = kiln_builder_compare(b, KILN_CMP_GT, cols, ka);
  kiln_hlo_instruction_t *upd = BIN(SUBTRACT, a1, BIN(MULTIPLY, l_a, row_p_a));
  kiln_hlo_instruction_t *a2 = kiln_builder_select(
      b, BIN(AND, below, right), upd, kiln_builder_select(b, BIN(AND, below, in_col), l_a, a1));
  kiln_hlo_instruction_t *k1 = BIN(ADD, k, kiln_builder_const_u64(b, KILN_S32, 1));
  kiln_hlo_instruction_t *piv2 = kiln_builder_set_slice(
      b, piv, kiln_builder_convert(b, BIN(ADD, pr, ssplat(b, 1, pr)), piv->shape->type), r - 2, k);
  kiln_hlo_instruction_t *first_zero =
      BIN(AND,
          kiln_builder_compare(
              b, KILN_CMP_EQ, info,
              kiln_builder_splat(b, kiln_builder_const_u64(b, info->shape->type, 0), info)),
          kiln_builder_compare(b, KILN_CMP_EQ, pivot, kiln_builder_splat(b, zero, pivot)));
  kiln_hlo_instruction_t *info2 = kiln_builder_select(
      b, first_zero, kiln_builder_splat(b, kiln_builder_convert(b, k1, info->shape->type), info),
      info);
  kiln_hlo_instruction_t *outs[4] = {k1, a2, piv2, info2};
  kiln_hlo_instruction_t *t = kiln_builder_tuple(b, 4, outs);
  if (!t || b->failed) return NULL;
  t->shape = state;
  c->root = t;
  return c;
}

/* cublas_getrf_batched / lapack_?getrf_ffi -> a while loop of getrf_step over the min(m, n)
 * columns of [..., m, n] matrices. */
static kiln_hlo_instruction_t *getrf(kiln_builder_t *b, kiln_hlo_instruction_t *in) {
  kiln_hlo_instruction_t *x = in->operands[0];
  int r = x->shape->rank;
  if (in->num_operands != 1 || in->shape->num_elements < 3 || r < 2 ||
      !solver_type(x->shape->type) || !same_array(x->shape, in->shape->elements[0]))
    return NULL;
  int64_t m = x->shape->dims[r - 2], n = x->shape->dims[r - 1], steps = m < n ? m : n;
  const kiln_shape_t *ps = in->shape->elements[1], *is = in->shape->elements[2];
  if (!kiln_shape_is_array(ps) || ps->rank != r - 1 || !kiln_shape_is_array(is) ||
      is->rank != r - 2 || !kiln_elem_type_is_integral(ps->type) ||
      !kiln_elem_type_is_integral(is->type) || ps->dims[r - 2] != steps)
    return NULL;
  for (int d = 0; d < r - 2; d++)
    if (ps->dims[d] != x->shape->dims[d] || is->dims[d] != x->shape->dims[d]) return NULL;
  kiln_hlo_instruction_t *zp = kiln_builder_const_u64(b, ps->type, 0),
                         *zi = kiln_builder_const_u64(b, is->type, 0);
  kiln_hlo_instruction_t *init[4] = {
      kiln_builder_const_u64(b, KILN_S32, 0), x,
      zp ? kiln_builder_op(b, KILN_OP_BROADCAST, (kiln_shape_t *)ps, 1, &zp) : NULL,
      zi ? kiln_builder_op(b, KILN_OP_BROADCAST, (kiln_shape_t *)is, 1, &zi) : NULL};
  kiln_hlo_instruction_t *t = init[2] && init[3] ? kiln_builder_tuple(b, 4, init) : NULL;
  if (!t) return NULL;
  kiln_hlo_computation_t *cond =
      kiln_builder_counter_below(b->m, "getrf_cond", t->shape, steps, b->layouts);
  kiln_hlo_computation_t *body = getrf_step(b, t->shape);
  kiln_hlo_instruction_t *w = cond && body ? kiln_builder_while(b, t, cond, body) : NULL;
  if (!w) return NULL;
  kiln_hlo_instruction_t *outs[3] = {kiln_builder_gte(b, w, 1), kiln_builder_gte(b, w, 2),
                                     kiln_builder_gte(b, w, 3)};
  return tuple_with_zeros(b, in, 3, outs);
}

/* xla_builder.math.NextAfter(x, y) on f32 / f64 from the bits: NaN if either is NaN, y if
 * equal, the smallest subnormal with y's sign from zero, else one step of x's bits away
 * from or towards zero. */
static kiln_hlo_instruction_t *next_after(kiln_builder_t *b, kiln_hlo_instruction_t *in) {
  kiln_elem_type_t t = in->shape->type, ut = t == KILN_F32 ? KILN_U32 : KILN_U64;
  if (in->num_operands != 2 || (t != KILN_F32 && t != KILN_F64) ||
      !same_array(in->operands[0]->shape, in->shape) ||
      !same_array(in->operands[1]->shape, in->shape))
    return NULL;
  kiln_hlo_instruction_t *x = in->operands[0], *y = in->operands[1];
  kiln_hlo_instruction_t *xb = kiln_builder_bitcast_convert(b, x, ut),
                         *yb = kiln_builder_bitcast_convert(b, y, ut);
  uint64_t sign = ut == KILN_U32 ? 0x80000000ull : 0x8000000000000000ull;
  kiln_hlo_instruction_t *one = kiln_builder_splat(b, kiln_builder_const_u64(b, ut, 1), xb);
  kiln_hlo_instruction_t *zero = fsplat(b, 0, x);
  kiln_hlo_instruction_t *tiny =
      BIN(OR, BIN(AND, yb, kiln_builder_splat(b, kiln_builder_const_u64(b, ut, sign), yb)), one);
  kiln_hlo_instruction_t *away = BIN(XOR, kiln_builder_compare(b, KILN_CMP_LT, x, y),
                                     kiln_builder_compare(b, KILN_CMP_LT, x, zero));
  kiln_hlo_instruction_t *next =
      kiln_builder_select(b, away, BIN(ADD, xb, one), BIN(SUBTRACT, xb, one));
  kiln_hlo_instruction_t *r = kiln_builder_bitcast_convert(
      b, kiln_builder_select(b, kiln_builder_compare(b, KILN_CMP_EQ, x, zero), tiny, next), t);
  r = kiln_builder_select(b, kiln_builder_compare(b, KILN_CMP_EQ, x, y), y, r);
  kiln_hlo_instruction_t *nan = BIN(OR, kiln_builder_compare(b, KILN_CMP_NE, x, x),
                                    kiln_builder_compare(b, KILN_CMP_NE, y, y));
  r = kiln_builder_select(b, nan, fsplat(b, NAN, x), r);
  if (r) r->shape = in->shape;
  return r;
}

/* x's diagonal over its dimensions p < q (same size): sum over q of select(i_p == i_q, x, 0). */
static kiln_hlo_instruction_t *diagonal(kiln_builder_t *b, kiln_hlo_instruction_t *x, int p, int q,
                                        kiln_hlo_computation_t *add) {
  kiln_hlo_instruction_t *eq =
      kiln_builder_compare(b, KILN_CMP_EQ, iota_like(b, x, p), iota_like(b, x, q));
  int64_t d = q;
  return kiln_builder_sum(b, kiln_builder_select(b, eq, x, fsplat(b, 0, x)), 1, &d, add);
}

/* xla_builder.matrix.Einsum: each operand's repeated labels reduced to their diagonal, the
 * operands transposed into the order of first appearance and broadcast over every label,
 * multiplied, summed over the labels the result lacks, transposed into the result's order,
 * and repeated result labels placed on their diagonal. */
static kiln_hlo_instruction_t *einsum(kiln_builder_t *b, kiln_hlo_instruction_t *in) {
  char labels[2][KILN_EINSUM_MAX_LABELS + 1], result[KILN_EINSUM_MAX_LABELS + 1],
      all[2 * KILN_EINSUM_MAX_LABELS + 1] = "";
  if (!kiln_eval_einsum_spec(in, labels, result) || !kiln_elem_type_is_float(in->shape->type))
    return NULL;
  int64_t size[2 * KILN_EINSUM_MAX_LABELS] = {0}, total = 1;
  for (int i = 0; i < in->num_operands; i++)
    for (int d = 0; labels[i][d]; d++) {
      char *at = strchr(all, labels[i][d]);
      if (!at) {
        at = all + strlen(all);
        at[0] = labels[i][d];
        at[1] = 0;
        total *= in->operands[i]->shape->dims[d];
      }
      size[at - all] = in->operands[i]->shape->dims[d];
    }
  int nl = (int)strlen(all);
  if (nl > kMaxRank || total > (1 << 24) || in->operands[0]->shape->type != in->shape->type)
    return NULL;
  kiln_hlo_computation_t *add =
      kiln_builder_scalar_computation(b->m, "einsum_add", KILN_OP_ADD, in->shape->type);
  int64_t dims[kMaxRank], map[kMaxRank], perm[kMaxRank];
  for (int l = 0; l < nl; l++) dims[l] = size[l];
  kiln_hlo_instruction_t *prod = NULL;
  for (int i = 0; i < in->num_operands && add; i++) {
    kiln_hlo_instruction_t *x = in->operands[i];
    char lab[KILN_EINSUM_MAX_LABELS + 1];
    strcpy(lab, labels[i]);
    for (int q = 1; lab[q] && x; q++) {
      char *first = strchr(lab, lab[q]);
      if (first - lab == q) continue;
      x = diagonal(b, x, (int)(first - lab), q, add);
      memmove(lab + q, lab + q + 1, strlen(lab + q));
      q--;
    }
    int n = (int)strlen(lab);
    /* sorted by position in `all` */
    for (int d = 0; d < n; d++) perm[d] = d;
    for (int d = 1; d < n; d++)
      for (int e = d; e > 0 && strchr(all, lab[perm[e]]) < strchr(all, lab[perm[e - 1]]); e--) {
        int64_t tmp = perm[e];
        perm[e] = perm[e - 1];
        perm[e - 1] = tmp;
      }
    for (int d = 0; d < n; d++) map[d] = strchr(all, lab[perm[d]]) - all;
    if (x && n > 1) x = kiln_builder_transpose(b, x, perm);
    x = x ? kiln_builder_broadcast(b, x, nl, dims, map) : NULL;
    prod = !prod ? x : BIN(MULTIPLY, prod, x);
  }
  if (!prod) return NULL;
  /* Sum the labels the result lacks; the rest keep `all`'s order. */
  int64_t gone[kMaxRank];
  int ng = 0;
  char kept[KILN_EINSUM_MAX_LABELS * 2 + 1];
  int nk = 0;
  for (int l = 0; l < nl; l++) {
    if (strchr(result, all[l]))
      kept[nk++] = all[l];
    else
      gone[ng++] = l;
  }
  kept[nk] = 0;
  kiln_hlo_instruction_t *v = ng ? kiln_builder_sum(b, prod, ng, gone, add) : prod;
  /* Into the order of first appearance in the result. */
  char order[KILN_EINSUM_MAX_LABELS + 1];
  int no = 0;
  for (int d = 0; result[d]; d++)
    if (!memchr(order, result[d], (size_t)no)) order[no++] = result[d];
  order[no] = 0;
  for (int d = 0; d < no; d++) perm[d] = strchr(kept, order[d]) - kept;
  if (v && no > 1) v = kiln_builder_transpose(b, v, perm);
  if (!v) return NULL;
  int rr = in->shape->rank;
  if (no != rr) {
    for (int d = 0; d < no; d++) map[d] = strchr(result, order[d]) - result;
    kiln_hlo_instruction_t *bc = kiln_builder_broadcast(b, v, rr, in->shape->dims, map);
    kiln_hlo_instruction_t *on = NULL;
    for (int d = 0; d < rr && bc; d++) {
      int first = (int)(strchr(result, result[d]) - result);
      if (first == d) continue;
      kiln_hlo_instruction_t *eq =
          kiln_builder_compare(b, KILN_CMP_EQ, iota_like(b, bc, first), iota_like(b, bc, d));
      on = on ? BIN(AND, on, eq) : eq;
    }
    v = bc && on ? kiln_builder_select(b, on, bc, fsplat(b, 0, bc)) : NULL;
  }
  if (v) v->shape = in->shape;
  return v;
}

/* xla_builder.tridiagonal.TridiagonalSolver -> the Thomas algorithm unrolled over the M rows
 * (M <= 64): diagonals [..., 3, M] or three [..., 1, M] operands, right-hand sides
 * [..., M, N]. */
static kiln_hlo_instruction_t *tridiagonal(kiln_builder_t *b, kiln_hlo_instruction_t *in) {
  int nop = in->num_operands;
  if (nop != 2 && nop != 4) return NULL;
  kiln_hlo_instruction_t *rhs = in->operands[nop - 1];
  int r = rhs->shape->rank;
  if (r < 2 || !kiln_elem_type_is_float(rhs->shape->type) || !same_array(rhs->shape, in->shape))
    return NULL;
  int64_t m = rhs->shape->dims[r - 2];
  if (m > 64 || m < 1) return NULL;
  for (int i = 0; i < nop - 1; i++) {
    const kiln_shape_t *s = in->operands[i]->shape;
    if (s->rank != r || s->type != rhs->shape->type || s->dims[r - 1] != m ||
        s->dims[r - 2] != (nop == 2 ? 3 : 1))
      return NULL;
    for (int d = 0; d < r - 2; d++)
      if (s->dims[d] != rhs->shape->dims[d]) return NULL;
  }
  int64_t row_dims[kMaxRank], map[kMaxRank];
  for (int d = 0; d < r; d++) row_dims[d] = d == r - 2 ? 1 : rhs->shape->dims[d];
  for (int d = 0; d < r - 2; d++) map[d] = d;
    /* element i of diagonal k (0 lower, 1 main, 2 upper) broadcast along a row [..., 1, N] */
#define DIAG(k, i)                                                                                 \
  kiln_builder_broadcast(                                                                          \
      b,                                                                                           \
      kiln_builder_reshape(                                                                        \
          b,                                                                                       \
          kiln_builder_slice_dim(b,                                                                \
                                 nop == 2                                                          \
                                     ? kiln_builder_slice_dim(b, in->operands[0], r - 2, k, k + 1) \
                                     : in->operands[k],                                            \
                                 r - 1, i, i + 1),                                                 \
          r - 2, row_dims),                                                                        \
      r, row_dims, map)
  kiln_hlo_instruction_t *c[64], *d[64];
  for (int64_t i = 0; i < m; i++) {
    kiln_hlo_instruction_t *row = kiln_builder_slice_dim(b, rhs, r - 2, i, i + 1);
    if (i == 0) {
      kiln_hlo_instruction_t *main0 = DIAG(1, 0);
      c[0] = BIN(DIVIDE, DIAG(2, 0), main0);
      d[0] = BIN(DIVIDE, row, main0);
      continue;
    }
    kiln_hlo_instruction_t *lower = DIAG(0, i);
    kiln_hlo_instruction_t *den = BIN(SUBTRACT, DIAG(1, i), BIN(MULTIPLY, lower, c[i - 1]));
    c[i] = BIN(DIVIDE, DIAG(2, i), den);
    d[i] = BIN(DIVIDE, BIN(SUBTRACT, row, BIN(MULTIPLY, lower, d[i - 1])), den);
  }
#undef DIAG
  for (int64_t i = m - 2; i >= 0; i--) d[i] = BIN(SUBTRACT, d[i], BIN(MULTIPLY, c[i], d[i + 1]));
  for (int64_t i = 0; i < m; i++)
    if (!d[i]) return NULL;
  kiln_hlo_instruction_t *x =
      m == 1 ? d[0] : kiln_builder_op(b, KILN_OP_CONCATENATE, in->shape, (int)m, d);
  if (!x) return NULL;
  if (m > 1) {
    int64_t *dim = kiln_arena_alloc(&b->m->arena, sizeof(int64_t));
    if (!dim) return NULL;
    *dim = r - 2;
    x->has_dimensions = true;
    x->dimensions.n = 1;
    x->dimensions.v = dim;
  }
  x->shape = in->shape;
  return x;
}

static kiln_hlo_instruction_t *usplat(kiln_builder_t *b, kiln_elem_type_t t, uint64_t v,
                                      const kiln_hlo_instruction_t *like) {
  return kiln_builder_splat(b, kiln_builder_const_u64(b, t, v), like);
}

/* xla_builder.prng.ScramblePhiloxKey(key u64) -> Philox4x32-10 of the counter (lo, 0, hi, 0)
 * of the key's 32-bit halves under XLA's fixed key, words 0 and 1 joined as the new u64. */
static kiln_hlo_instruction_t *scramble_philox_key(kiln_builder_t *b, kiln_hlo_instruction_t *in) {
  kiln_hlo_instruction_t *key = in->operands[0];
  if (in->num_operands != 1 || key->shape->type != KILN_U64 || !same_array(key->shape, in->shape))
    return NULL;
  kiln_hlo_instruction_t *x[4];
  x[0] = kiln_builder_convert(b, key, KILN_U32);
  x[1] = usplat(b, KILN_U32, 0, key);
  x[2] = kiln_builder_convert(b, BIN(SHIFT_RIGHT_LOGICAL, key, usplat(b, KILN_U64, 32, key)),
                              KILN_U32);
  x[3] = x[1];
  uint32_t k0 = KILN_EVAL_PHILOX_SCRAMBLE_KEY0, k1 = KILN_EVAL_PHILOX_SCRAMBLE_KEY1;
  kiln_hlo_instruction_t *c32 = usplat(b, KILN_U64, 32, key);
  for (int round = 0; round < 10; round++) {
    kiln_hlo_instruction_t *p0 = BIN(MULTIPLY, kiln_builder_convert(b, x[0], KILN_U64),
                                     usplat(b, KILN_U64, 0xD2511F53u, key));
    kiln_hlo_instruction_t *p1 = BIN(MULTIPLY, kiln_builder_convert(b, x[2], KILN_U64),
                                     usplat(b, KILN_U64, 0xCD9E8D57u, key));
    kiln_hlo_instruction_t *y[4] = {
        BIN(XOR,
            BIN(XOR, kiln_builder_convert(b, BIN(SHIFT_RIGHT_LOGICAL, p1, c32), KILN_U32), x[1]),
            usplat(b, KILN_U32, k0, key)),
        kiln_builder_convert(b, p1, KILN_U32),
        BIN(XOR,
            BIN(XOR, kiln_builder_convert(b, BIN(SHIFT_RIGHT_LOGICAL, p0, c32), KILN_U32), x[3]),
            usplat(b, KILN_U32, k1, key)),
        kiln_builder_convert(b, p0, KILN_U32)};
    memcpy(x, y, sizeof x);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  kiln_hlo_instruction_t *r = BIN(OR, kiln_builder_convert(b, x[0], KILN_U64),
                                  BIN(SHIFT_LEFT, kiln_builder_convert(b, x[1], KILN_U64), c32));
  if (r) r->shape = in->shape;
  return r;
}

/* Dynamic shapes as kiln models them (every dynamic dimension at its bound, as the pass
 * dynamic_shape_remover and the evaluator's set-dimension-size / get-dimension-size take
 * them): SliceToDynamic(x, sizes...) -> x; PadToStatic(x) -> (x, the bounds as s32). */
static kiln_hlo_instruction_t *dynamic_padding(kiln_builder_t *b, kiln_hlo_instruction_t *in) {
  kiln_hlo_instruction_t *x = in->operands[0];
  if (!strcmp(in->custom_call_target, "SliceToDynamic")) {
    if (!kiln_shape_is_array(x->shape) || in->num_operands != 1 + x->shape->rank ||
        !same_array(x->shape, in->shape))
      return NULL;
    return kiln_builder_op(b, KILN_OP_COPY, in->shape, 1, &x);
  }
  int r = x->shape->rank;
  if (in->num_operands != 1 || !kiln_shape_is_array(x->shape) || !kiln_shape_is_tuple(in->shape) ||
      in->shape->num_elements != 1 + r || r > 7 || !same_array(x->shape, in->shape->elements[0]))
    return NULL;
  kiln_hlo_instruction_t *outs[8] = {
      kiln_builder_op(b, KILN_OP_COPY, in->shape->elements[0], 1, &x)};
  for (int d = 0; d < r; d++) {
    const kiln_shape_t *s = in->shape->elements[1 + d];
    if (!kiln_shape_is_array(s) || s->rank != 0 || !kiln_elem_type_is_integral(s->type))
      return NULL;
    outs[1 + d] = kiln_builder_const_u64(b, s->type, (uint64_t)x->shape->dims[d]);
  }
  return tuple_with_zeros(b, in, 1 + r, outs);
}

/* TopK -> topk (k from the result, largest from the comparator); PartialReduce (XLA's
 * approximate top-k) -> the exact one: a stable sort of (values, positions) by its
 * comparator along the last dimension, then the first m of both. */
static kiln_hlo_instruction_t *top_k(kiln_builder_t *b, kiln_hlo_instruction_t *in) {
  bool partial = !strcmp(in->custom_call_target, "PartialReduce"), largest;
  kiln_hlo_computation_t *cmp = kiln_hlo_instruction_called(in, "called_computations");
  if (in->num_operands != (partial ? 4 : 1) || !kiln_eval_topk_comparator(cmp, &largest) ||
      !kiln_shape_is_tuple(in->shape) || in->shape->num_elements != 2)
    return NULL;
  kiln_hlo_instruction_t *x = in->operands[0];
  const kiln_shape_t *vs = in->shape->elements[0], *is = in->shape->elements[1];
  int r = x->shape->rank;
  if (!kiln_shape_is_array(x->shape) || r < 1 || !kiln_shape_is_array(vs) || vs->rank != r ||
      !kiln_shape_is_array(is) || is->rank != r || !kiln_elem_type_is_integral(is->type))
    return NULL;
  for (int d = 0; d < r; d++)
    if (is->dims[d] != vs->dims[d] || (d < r - 1 && vs->dims[d] != x->shape->dims[d])) return NULL;
  int64_t m = vs->dims[r - 1];
  if (m > x->shape->dims[r - 1]) return NULL;
  if (!partial) {
    kiln_hlo_instruction_t *t = kiln_builder_op(b, KILN_OP_TOPK, in->shape, 1, &x);
    if (!t) return NULL;
    t->k = m;
    t->largest = largest;
    return t;
  }
  const kiln_shape_t *ps = in->operands[1]->shape;
  if (!kiln_shape_is_array(ps) || ps->rank != r || cmp->num_parameters != 4) return NULL;
  for (int d = 0; d < r; d++)
    if (ps->dims[d] != x->shape->dims[d]) return NULL;
  kiln_shape_t *ss[2] = {x->shape, in->operands[1]->shape};
  kiln_shape_t *ts = kiln_shape_make_tuple(&b->m->arena, 2, ss);
  kiln_hlo_instruction_t *sort = ts ? kiln_builder_op(b, KILN_OP_SORT, ts, 2, in->operands) : NULL;
  int64_t *dim = sort ? kiln_arena_alloc(&b->m->arena, sizeof(int64_t)) : NULL;
  if (!dim) return NULL;
  *dim = r - 1;
  sort->has_dimensions = true;
  sort->dimensions.n = 1;
  sort->dimensions.v = dim;
  sort->is_stable = true;
  kiln_hlo_instruction_add_called(sort, "to_apply", false, 1, &cmp);
  kiln_hlo_instruction_t *outs[2] = {
      kiln_builder_slice_dim(b, kiln_builder_gte(b, sort, 0), r - 1, 0, m),
      kiln_builder_slice_dim(b, kiln_builder_gte(b, sort, 1), r - 1, 0, m)};
  return tuple_with_zeros(b, in, 2, outs);
}

static kiln_hlo_instruction_t *gemm(kiln_builder_t *b, kiln_hlo_instruction_t *in) {
  kiln_gemm_config_t g;
  bool tuple = kiln_shape_is_tuple(in->shape);
  kiln_shape_t *rs = tuple && in->shape->num_elements > 0 ? in->shape->elements[0] : in->shape;
  if (!kiln_eval_gemm_config(in->backend_config, &g) || in->num_operands < 2 ||
      !kiln_shape_is_array(rs) || !kiln_elem_type_is_float(rs->type))
    return NULL;
  kiln_hlo_instruction_t *d = kiln_builder_op(b, KILN_OP_DOT, rs, 2, in->operands);
  if (!d) return NULL;
  d->has_dot_dnums = true;
  kiln_i64_list_t *dst[4] = {&d->dot_dnums.lhs_batch, &d->dot_dnums.lhs_contracting,
                             &d->dot_dnums.rhs_batch, &d->dot_dnums.rhs_contracting};
  const kiln_i64_list_t *src[4] = {&g.dnums.lhs_batch, &g.dnums.lhs_contracting, &g.dnums.rhs_batch,
                                   &g.dnums.rhs_contracting};
  for (int i = 0; i < 4; i++) {
    dst[i]->n = src[i]->n;
    dst[i]->v = kiln_arena_alloc(&b->m->arena, sizeof(int64_t) * (size_t)(src[i]->n + 1));
    if (!dst[i]->v) return NULL;
    memcpy(dst[i]->v, src[i]->v, sizeof(int64_t) * (size_t)src[i]->n);
  }
  kiln_hlo_instruction_t *r = d;
  if (g.alpha != 1.0) r = BIN(MULTIPLY, r, fsplat(b, g.alpha, r));
  if (g.beta != 0.0 && in->num_operands >= 3 && same_array(in->operands[2]->shape, rs)) {
    kiln_hlo_instruction_t *c = in->operands[2];
    if (g.beta != 1.0) c = BIN(MULTIPLY, c, fsplat(b, g.beta, c));
    r = BIN(ADD, r, c);
  } else if (g.beta != 0.0) {
    return NULL;
  }
  if (g.relu) r = BIN(MAXIMUM, r, fsplat(b, 0.0, r));
  if (!r) return NULL;
  r->shape = rs;
  return tuple ? tuple_with_zeros(b, in, 1, &r) : r;
}

static kiln_hlo_instruction_t *expand(kiln_builder_t *b, kiln_hlo_instruction_t *in, void *ctx) {
  (void)ctx;
  const char *t = in->custom_call_target;
  if (!t) return NULL;
  if (kiln_eval_is_identity_target(t)) {
    if (in->num_operands != 1 || !same_array(in->operands[0]->shape, in->shape)) return NULL;
    /* An annotation marked side-effecting would outlive its replacement: it goes. */
    kiln_hlo_instruction_set_raw_attr(in, "custom_call_has_side_effect", "false");
    kiln_hlo_instruction_t *op = in->operands[0];
    return kiln_builder_op(b, KILN_OP_COPY, in->shape, 1, &op);
  }
  if (!strcmp(t, "AllocateBuffer") || !strcmp(t, "CreateBuffer")) {
    if (in->num_operands != 0 || !kiln_shape_is_array(in->shape)) return NULL;
    kiln_hlo_instruction_t *zero = kiln_builder_const_u64(b, in->shape->type, 0);
    if (!zero) return NULL;
    kiln_hlo_instruction_t *r = kiln_builder_op(b, KILN_OP_BROADCAST, in->shape, 1, &zero);
    return r;
  }
  if (!strncmp(t, "xla_builder.", 12)) {
    kiln_hlo_computation_t *callee = kiln_hlo_instruction_called(in, "called_computations");
    if (!callee && !strcmp(t, "xla_builder.math.NextAfter")) return next_after(b, in);
    if (!callee && !strcmp(t, "xla_builder.prng.ScramblePhiloxKey"))
      return scramble_philox_key(b, in);
    if (!callee && !strcmp(t, "xla_builder.matrix.Einsum")) return einsum(b, in);
    if (!callee && !strcmp(t, "xla_builder.tridiagonal.TridiagonalSolver"))
      return tridiagonal(b, in);
    if (!callee && !strncmp(t, "xla_builder.math.", 17)) return math(b, in, t + 17);
    if (!callee || callee->num_parameters != in->num_operands) return NULL;
    kiln_hlo_instruction_t *call =
        kiln_builder_op(b, KILN_OP_CALL, in->shape, in->num_operands, in->operands);
    if (call) kiln_hlo_instruction_add_called(call, "to_apply", false, 1, &callee);
    return call;
  }
  if (!strcmp(t, "cuda_threefry2x32")) return threefry(b, in);
  if (kiln_eval_is_gemm_target(t)) return gemm(b, in);
  if (!strcmp(t, "TopK") || !strcmp(t, "PartialReduce")) return top_k(b, in);
  if (!strcmp(t, "SliceToDynamic") || !strcmp(t, "PadToStatic")) return dynamic_padding(b, in);
  kiln_solver_config_t sc;
  if (kiln_eval_solver_config(in, &sc))
    return sc.kind == KILN_SOLVER_POTRF  ? potrf(b, in, &sc)
           : sc.kind == KILN_SOLVER_TRSM ? trsm(b, in, &sc)
                                         : getrf(b, in);
  return NULL;
}

kiln_status kiln_pass_custom_call_rewrite(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                          bool *changed) {
  (void)opts;
  return kiln_builder_expand_all(m, KILN_OP_CUSTOM_CALL, expand, NULL, "custom_call_rewrite",
                                 changed);
}
