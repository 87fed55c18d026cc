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
 *   cuda_threefry2x32 (k0, k1, x0, x1 -> (y0, y1), u32)    -> Threefry2x32, 20 rounds, as
 *       elementwise u32 HLO;
 *   __cublas$gemm, __cublas$lt$matmul (GemmBackendConfig JSON: alpha, beta, dot dimension
 *       numbers, epilogue DEFAULT/RELU)                    -> dot, times alpha, plus
 *       beta * operand 2, max(0, .) for RELU; a (result, workspace) tuple gets zeros for
 *       the workspace.
 * Anything else stays a custom call: thunk emission looks for a handler in the FFI registry. */
#include <string.h>

#include "compiler/eval/eval.h"
#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"

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
  if (!tuple) return r;
  kiln_hlo_instruction_t *outs[8] = {r};
  int n = in->shape->num_elements;
  if (n > 8) return NULL;
  for (int i = 1; i < n; i++) {
    const kiln_shape_t *ws = in->shape->elements[i];
    if (!kiln_shape_is_array(ws)) return NULL;
    kiln_hlo_instruction_t *zero = kiln_builder_const_u64(b, ws->type, 0);
    outs[i] = zero ? kiln_builder_op(b, KILN_OP_BROADCAST, (kiln_shape_t *)ws, 1, &zero) : NULL;
    if (!outs[i]) return NULL;
  }
  kiln_hlo_instruction_t *t = kiln_builder_tuple(b, n, outs);
  if (t) t->shape = in->shape;
  return t;
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
    if (!callee && !strncmp(t, "xla_builder.math.", 17)) return math(b, in, t + 17);
    if (!callee || callee->num_parameters != in->num_operands) return NULL;
    kiln_hlo_instruction_t *call =
        kiln_builder_op(b, KILN_OP_CALL, in->shape, in->num_operands, in->operands);
    if (call) kiln_hlo_instruction_add_called(call, "to_apply", false, 1, &callee);
    return call;
  }
  if (!strcmp(t, "cuda_threefry2x32")) return threefry(b, in);
  if (kiln_eval_is_gemm_target(t)) return gemm(b, in);
  return NULL;
}

kiln_status kiln_pass_custom_call_rewrite(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                          bool *changed) {
  (void)opts;
  return kiln_builder_expand_all(m, KILN_OP_CUSTOM_CALL, expand, NULL, "custom_call_rewrite",
                                 changed);
}
