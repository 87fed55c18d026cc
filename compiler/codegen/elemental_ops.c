/* Elemental emitter: scalar math of every elementwise opcode, constants, and scalar
 * computations (reducers, map bodies) emitted inline. */
#include <math.h>
#include <string.h>

#include "base/hashmap.h"
#include "compiler/codegen/elemental_internal.h"

#define B (f->b)

static kiln_elem_type_t elem_of(const kiln_kir_value_t *v) {
  return v->type->elem;
}

static kiln_kir_value_t *cf(kiln_elemental_fn_t *f, const kiln_kir_type_t *t, double v) {
  kiln_kir_const_t c = {0};
  c.f = v;
  return kiln_kir_const(B, t, c);
}

static kiln_kir_value_t *ci(kiln_elemental_fn_t *f, const kiln_kir_type_t *t, int64_t v) {
  kiln_kir_const_t c = {0};
  c.i = v;
  return kiln_kir_const(B, t, c);
}

static kiln_kir_value_t *bin(kiln_elemental_fn_t *f, kiln_kir_opcode_t op, kiln_kir_value_t *a,
                             kiln_kir_value_t *b) {
  return kiln_kir_binary(B, op, a, b);
}

static kiln_kir_value_t *un(kiln_elemental_fn_t *f, kiln_kir_opcode_t op, kiln_kir_value_t *a) {
  return kiln_kir_unary(B, op, a);
}

kiln_kir_value_t *kiln_elemental_constant(kiln_elemental_fn_t *f, const kiln_literal_t *lit,
                                          int64_t i) {
  if (!lit || lit->unknown || !kiln_shape_is_array(lit->shape) || i >= lit->num_elements) {
    kiln_elemental_fail(f, lit && lit->unknown
                               ? kiln_hlo_elided_constant_error(NULL)
                               : KILN_ERR_INTERNAL("constant element %lld of %lld", (long long)i,
                                                   lit ? (long long)lit->num_elements : 0LL));
    return NULL;
  }
  kiln_elem_type_t t = lit->shape->type;
  if (kiln_elem_type_is_float(t)) return kiln_kir_const_float(B, t, kiln_literal_get_f64(lit, i));
  if (kiln_elem_type_is_unsigned_int(t))
    return kiln_kir_const_int(B, t, (int64_t)kiln_literal_get_u64(lit, i));
  return kiln_kir_const_int(B, t, kiln_literal_get_s64(lit, i));
}

/* ---- math built from the kernel IR's ops, computed in f32 (narrow floats) or f64 ---- */

static kiln_kir_value_t *derived_math(kiln_elemental_fn_t *f, kiln_hlo_opcode_t op,
                                      kiln_kir_value_t *x0) {
  kiln_elem_type_t et = elem_of(x0);
  kiln_elem_type_t wt = et == KILN_F64 ? KILN_F64 : KILN_F32;
  const kiln_kir_type_t *w = kiln_kir_type_scalar(f->e->m, wt);
  kiln_kir_value_t *x = et == wt ? x0 : kiln_kir_convert(B, x0, w);
  kiln_kir_value_t *one = cf(f, w, 1.0), *half = cf(f, w, 0.5);
  /* Beyond `big`, x*x overflows (or 1 + x*x == x*x): use log(|x|) + log(2). */
  double big = wt == KILN_F64 ? 1e150 : 1e18;
  kiln_kir_value_t *r = NULL;
  switch (op) {
    case KILN_OP_ACOS:
    case KILN_OP_ASIN: {
      kiln_kir_value_t *s =
          un(f, KILN_KIR_SQRT,
             bin(f, KILN_KIR_MUL, bin(f, KILN_KIR_SUB, one, x), bin(f, KILN_KIR_ADD, one, x)));
      r = op == KILN_OP_ACOS ? bin(f, KILN_KIR_ATAN2, s, x) : bin(f, KILN_KIR_ATAN2, x, s);
      break;
    }
    case KILN_OP_ACOSH: {
      /* log1p(t + sqrt(t * (x + 1))) with t = x - 1: exact near 1. */
      kiln_kir_value_t *t = bin(f, KILN_KIR_SUB, x, one);
      kiln_kir_value_t *s =
          un(f, KILN_KIR_SQRT, bin(f, KILN_KIR_MUL, t, bin(f, KILN_KIR_ADD, x, one)));
      kiln_kir_value_t *small = un(f, KILN_KIR_LOG1P, bin(f, KILN_KIR_ADD, t, s));
      kiln_kir_value_t *large = bin(f, KILN_KIR_ADD, un(f, KILN_KIR_LOG, x), cf(f, w, M_LN2));
      r = kiln_kir_select(B, kiln_kir_cmp(B, KILN_KIR_CMP_GT, x, cf(f, w, big)), large, small);
      /* below 1 (where t * (x + 1) may overflow to +inf) acosh is NaN */
      r = kiln_kir_select(B, kiln_kir_cmp(B, KILN_KIR_CMP_LT, x, one), cf(f, w, NAN), r);
      break;
    }
    case KILN_OP_ASINH: {
      /* sign(x) * log1p(a + a^2 / (1 + sqrt(1 + a^2))), a = |x|. */
      kiln_kir_value_t *a = un(f, KILN_KIR_ABS, x);
      kiln_kir_value_t *a2 = bin(f, KILN_KIR_MUL, a, a);
      kiln_kir_value_t *d =
          bin(f, KILN_KIR_ADD, one, un(f, KILN_KIR_SQRT, bin(f, KILN_KIR_ADD, one, a2)));
      kiln_kir_value_t *small =
          un(f, KILN_KIR_LOG1P, bin(f, KILN_KIR_ADD, a, bin(f, KILN_KIR_DIV, a2, d)));
      kiln_kir_value_t *large = bin(f, KILN_KIR_ADD, un(f, KILN_KIR_LOG, a), cf(f, w, M_LN2));
      kiln_kir_value_t *m =
          kiln_kir_select(B, kiln_kir_cmp(B, KILN_KIR_CMP_GT, a, cf(f, w, big)), large, small);
      r = kiln_kir_select(B, kiln_kir_cmp(B, KILN_KIR_CMP_LT, x, cf(f, w, 0.0)),
                          un(f, KILN_KIR_NEG, m), m);
      break;
    }
    case KILN_OP_ATANH: {
      /* sign(x) * 0.5 * log1p(2a / (1 - a)), a = |x| (log1p of a non-negative argument is
       * well conditioned). */
      kiln_kir_value_t *a = un(f, KILN_KIR_ABS, x);
      kiln_kir_value_t *q =
          bin(f, KILN_KIR_DIV, bin(f, KILN_KIR_ADD, a, a), bin(f, KILN_KIR_SUB, one, a));
      kiln_kir_value_t *m = bin(f, KILN_KIR_MUL, half, un(f, KILN_KIR_LOG1P, q));
      r = kiln_kir_select(B, kiln_kir_cmp(B, KILN_KIR_CMP_LT, x, cf(f, w, 0.0)),
                          un(f, KILN_KIR_NEG, m), m);
      break;
    }
    case KILN_OP_COSH: {
      kiln_kir_value_t *e = un(f, KILN_KIR_EXP, un(f, KILN_KIR_ABS, x));
      r = bin(f, KILN_KIR_ADD, bin(f, KILN_KIR_MUL, half, e), bin(f, KILN_KIR_DIV, half, e));
      break;
    }
    case KILN_OP_SINH: {
      /* e = expm1(|x|); sinh|x| = (e + e / (e + 1)) / 2; sign restored. */
      kiln_kir_value_t *a = un(f, KILN_KIR_ABS, x);
      kiln_kir_value_t *e = un(f, KILN_KIR_EXPM1, a);
      kiln_kir_value_t *q = bin(f, KILN_KIR_DIV, e, bin(f, KILN_KIR_ADD, e, one));
      q = kiln_kir_select(
          B, kiln_kir_cmp(B, KILN_KIR_CMP_LT, a, cf(f, w, wt == KILN_F64 ? 700.0 : 80.0)), q, one);
      kiln_kir_value_t *m = bin(f, KILN_KIR_MUL, half, bin(f, KILN_KIR_ADD, e, q));
      r = kiln_kir_select(B, kiln_kir_cmp(B, KILN_KIR_CMP_LT, x, cf(f, w, 0.0)),
                          un(f, KILN_KIR_NEG, m), m);
      break;
    }
    default:
      kiln_elemental_fail(f, KILN_ERR_INTERNAL("no derived math for %s", kiln_hlo_opcode_name(op)));
      return NULL;
  }
  /* The odd functions keep a zero's sign (the x < 0 above takes −0 for +0): sinh(−0) = −0,
   * so rsqrt(sinh(−0)) = −inf (fuzz-2018114). */
  if (op == KILN_OP_SINH || op == KILN_OP_ASINH || op == KILN_OP_ATANH)
    r = kiln_kir_select(B, kiln_kir_cmp(B, KILN_KIR_CMP_EQ, x, cf(f, w, 0.0)), x, r);
  return et == wt ? r : kiln_kir_convert(B, r, x0->type);
}

/* Integer power by squaring over the exponent's bits; (x == 1 || y == 0) -> 1, a negative
 * signed exponent -> 0 (the evaluator's rule). */
static kiln_kir_value_t *int_pow(kiln_elemental_fn_t *f, kiln_kir_value_t *x, kiln_kir_value_t *y) {
  const kiln_kir_type_t *t = x->type;
  int bits = kiln_kir_type_bits(t);
  kiln_kir_value_t *one = ci(f, t, 1), *zero = ci(f, t, 0);
  kiln_kir_value_t *inits[3] = {one, x, y};
  kiln_kir_op_t *loop = kiln_kir_for(B, kiln_kir_const_index(B, 0), kiln_kir_const_index(B, bits),
                                     kiln_kir_const_index(B, 1), inits, 3);
  if (!loop) return NULL;
  size_t mark;
  kiln_elemental_enter(f, kiln_kir_op_region(loop, 0), &mark);
  kiln_kir_region_t *body = kiln_kir_op_region(loop, 0);
  kiln_kir_value_t *r = kiln_kir_region_arg(body, 1), *base = kiln_kir_region_arg(body, 2);
  kiln_kir_value_t *e = kiln_kir_region_arg(body, 3);
  kiln_kir_value_t *odd = kiln_kir_cmp(B, KILN_KIR_CMP_NE, bin(f, KILN_KIR_AND, e, one), zero);
  kiln_kir_value_t *ny[3] = {kiln_kir_select(B, odd, bin(f, KILN_KIR_MUL, r, base), r),
                             bin(f, KILN_KIR_MUL, base, base),
                             bin(f, KILN_KIR_SHR_LOGICAL, e, one)};
  kiln_kir_yield(B, ny, 3);
  kiln_elemental_exit(f, mark);
  kiln_kir_value_t *res = kiln_kir_op_result(loop, 0);
  if (kiln_elem_type_is_signed_int(t->elem))
    res = kiln_kir_select(B, kiln_kir_cmp(B, KILN_KIR_CMP_LT, y, zero), zero, res);
  kiln_kir_value_t *trivial = kiln_kir_cmp(B, KILN_KIR_CMP_EQ, y, zero);
  /* (s1 has no 1: its bit pattern 1 is -1, a base the rule leaves alone) */
  if (!(bits == 1 && kiln_elem_type_is_signed_int(t->elem)))
    trivial = kiln_kir_binary(B, KILN_KIR_OR, kiln_kir_cmp(B, KILN_KIR_CMP_EQ, x, one), trivial);
  return kiln_kir_select(B, trivial, one, res);
}

static kiln_elem_type_t signed_of_width(int bits) {
  switch (bits) {
    case 4:
      return KILN_S4;
    case 8:
      return KILN_S8;
    case 16:
      return KILN_S16;
    case 32:
      return KILN_S32;
    default:
      return KILN_S64;
  }
}

/* Total-order key of a float: its bits as a signed integer with the non-sign bits flipped
 * for negative values (-NaN < -inf < ... < -0 < +0 < ... < inf < NaN). */
static kiln_kir_value_t *total_order_key(kiln_elemental_fn_t *f, kiln_kir_value_t *x) {
  int bits = kiln_kir_type_bits(x->type);
  const kiln_kir_type_t *it = kiln_kir_type_scalar(f->e->m, signed_of_width(bits));
  kiln_kir_value_t *k = kiln_kir_bitcast(B, x, it);
  kiln_kir_value_t *mask = bin(f, KILN_KIR_SHR_ARITH, k, ci(f, it, bits - 1));
  int64_t maxv = bits >= 64 ? INT64_MAX : (((int64_t)1 << (bits - 1)) - 1);
  mask = bin(f, KILN_KIR_AND, mask, ci(f, it, maxv));
  return bin(f, KILN_KIR_XOR, k, mask);
}

static kiln_kir_value_t *compare(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                                 kiln_kir_value_t *a, kiln_kir_value_t *b) {
  kiln_kir_cmp_t p;
  switch (instr->comparison_direction) {
    case KILN_CMP_EQ:
      p = KILN_KIR_CMP_EQ;
      break;
    case KILN_CMP_NE:
      p = KILN_KIR_CMP_NE;
      break;
    case KILN_CMP_LT:
      p = KILN_KIR_CMP_LT;
      break;
    case KILN_CMP_LE:
      p = KILN_KIR_CMP_LE;
      break;
    case KILN_CMP_GT:
      p = KILN_KIR_CMP_GT;
      break;
    case KILN_CMP_GE:
      p = KILN_KIR_CMP_GE;
      break;
    default:
      kiln_elemental_fail(f, KILN_ERR_INVALID("%s: compare without a direction", instr->name));
      return NULL;
  }
  if (instr->comparison_type == KILN_CMP_TYPE_TOTALORDER && kiln_elem_type_is_float(elem_of(a))) {
    kiln_elem_type_t et = elem_of(a);
    if (et == KILN_F8E8M0FNU) {
      /* No sign bit: the bits order the values (0xff, the NaN, last). */
      const kiln_kir_type_t *u8 = kiln_kir_type_scalar(f->e->m, KILN_U8);
      a = kiln_kir_bitcast(B, a, u8);
      b = kiln_kir_bitcast(B, b, u8);
    } else {
      if (et == KILN_F4E2M1FN) {
        /* No NaN or inf, and every value (-0 included) is exact in f32, which orders the
         * same way. */
        const kiln_kir_type_t *f32 = kiln_kir_type_scalar(f->e->m, KILN_F32);
        a = kiln_kir_convert(B, a, f32);
        b = kiln_kir_convert(B, b, f32);
      }
      bool fnuz = et == KILN_F8E5M2FNUZ || et == KILN_F8E4M3FNUZ || et == KILN_F8E4M3B11FNUZ;
      kiln_kir_value_t *raw[2] = {a, b};
      a = total_order_key(f, a);
      b = total_order_key(f, b);
      if (fnuz) {
        /* The only NaN, 0x80, has the sign bit of a -0 these types lack; as a NaN it orders
         * last, after the largest finite value (fuzz-1068865), so the keys widen to s16. */
        const kiln_kir_type_t *s8 = kiln_kir_type_scalar(f->e->m, KILN_S8);
        const kiln_kir_type_t *s16 = kiln_kir_type_scalar(f->e->m, KILN_S16);
        kiln_kir_value_t **key[2] = {&a, &b};
        for (int i = 0; i < 2; i++) {
          kiln_kir_value_t *nan =
              kiln_kir_cmp(B, KILN_KIR_CMP_EQ, kiln_kir_bitcast(B, raw[i], s8), ci(f, s8, -128));
          *key[i] = kiln_kir_select(B, nan, ci(f, s16, 128), kiln_kir_convert(B, *key[i], s16));
        }
      }
    }
  }
  return kiln_kir_cmp(B, p, a, b);
}

/* XLA's reduce-precision bit algorithm on f32 / f64 (narrow floats through f32). */
static kiln_kir_value_t *reduce_precision(kiln_elemental_fn_t *f,
                                          const kiln_hlo_instruction_t *instr,
                                          kiln_kir_value_t *x0) {
  kiln_elem_type_t et = elem_of(x0);
  bool f64 = et == KILN_F64;
  kiln_kir_module_t *m = f->e->m;
  kiln_kir_value_t *x =
      f64 || et == KILN_F32 ? x0 : kiln_kir_convert(B, x0, kiln_kir_type_scalar(m, KILN_F32));
  int W = f64 ? 64 : 32, se = f64 ? 11 : 8, sm = f64 ? 52 : 23;
  int64_t eb = instr->exponent_bits, mb = instr->mantissa_bits;
  if (eb < 1 || mb < 0) {
    kiln_elemental_fail(f, KILN_ERR_INVALID("%s: exponent_bits=%lld mantissa_bits=%lld",
                                            instr->name, (long long)eb, (long long)mb));
    return NULL;
  }
  const kiln_kir_type_t *ut = kiln_kir_type_scalar(m, f64 ? KILN_U64 : KILN_U32);
  kiln_kir_value_t *orig = kiln_kir_bitcast(B, x, ut), *v = orig;
  if (mb < sm) {
    int shift = sm - (int)mb;
    uint64_t last = (uint64_t)1 << shift, base_bias = (last >> 1) - 1;
    kiln_kir_value_t *xl = bin(f, KILN_KIR_SHR_LOGICAL,
                               bin(f, KILN_KIR_AND, v, ci(f, ut, (int64_t)last)), ci(f, ut, shift));
    v = bin(f, KILN_KIR_ADD, bin(f, KILN_KIR_ADD, v, xl), ci(f, ut, (int64_t)base_bias));
    v = bin(f, KILN_KIR_AND, v, ci(f, ut, (int64_t) ~(last - 1)));
  }
  uint64_t exp_mask = (((uint64_t)1 << se) - 1) << sm;
  if (eb < se) {
    uint64_t sign_mask = (uint64_t)1 << (W - 1);
    uint64_t bias = ((uint64_t)1 << (se - 1)) - 1, rbias = ((uint64_t)1 << (eb - 1)) - 1;
    uint64_t max_exp = bias + rbias, min_exp = bias - rbias;
    kiln_kir_value_t *xe = bin(f, KILN_KIR_AND, v, ci(f, ut, (int64_t)exp_mask));
    kiln_kir_value_t *over =
        kiln_kir_cmp(B, KILN_KIR_CMP_GT, xe, ci(f, ut, (int64_t)(max_exp << sm)));
    kiln_kir_value_t *under =
        kiln_kir_cmp(B, KILN_KIR_CMP_LE, xe, ci(f, ut, (int64_t)(min_exp << sm)));
    kiln_kir_value_t *sz = bin(f, KILN_KIR_AND, v, ci(f, ut, (int64_t)sign_mask));
    kiln_kir_value_t *sinf = bin(f, KILN_KIR_OR, sz, ci(f, ut, (int64_t)exp_mask));
    v = kiln_kir_select(B, over, sinf, v);
    v = kiln_kir_select(B, under, sz, v);
  }
  kiln_kir_value_t *isnan = kiln_kir_cmp(B, KILN_KIR_CMP_NE, x, x);
  v = kiln_kir_select(B, isnan, mb > 0 ? orig : ci(f, ut, (int64_t)exp_mask), v);
  kiln_kir_value_t *r = kiln_kir_bitcast(B, v, x->type);
  return r && x != x0 ? kiln_kir_convert(B, r, x0->type) : r;
}

static kiln_kir_opcode_t unary_kir(kiln_hlo_opcode_t op) {
  switch (op) {
    case KILN_OP_NEGATE:
      return KILN_KIR_NEG;
    case KILN_OP_ABS:
      return KILN_KIR_ABS;
    case KILN_OP_SIGN:
      return KILN_KIR_SIGN;
    case KILN_OP_NOT:
      return KILN_KIR_NOT;
    case KILN_OP_POPCNT:
      return KILN_KIR_POPCNT;
    case KILN_OP_CLZ:
      return KILN_KIR_CLZ;
    case KILN_OP_EXP:
      return KILN_KIR_EXP;
    case KILN_OP_EXPM1:
      return KILN_KIR_EXPM1;
    case KILN_OP_LOG:
      return KILN_KIR_LOG;
    case KILN_OP_LOG1P:
      return KILN_KIR_LOG1P;
    case KILN_OP_TANH:
      return KILN_KIR_TANH;
    case KILN_OP_LOGISTIC:
      return KILN_KIR_LOGISTIC;
    case KILN_OP_SIN:
      return KILN_KIR_SIN;
    case KILN_OP_COS:
      return KILN_KIR_COS;
    case KILN_OP_TAN:
      return KILN_KIR_TAN;
    case KILN_OP_SQRT:
      return KILN_KIR_SQRT;
    case KILN_OP_RSQRT:
      return KILN_KIR_RSQRT;
    case KILN_OP_CBRT:
      return KILN_KIR_CBRT;
    case KILN_OP_ERF:
      return KILN_KIR_ERF;
    case KILN_OP_FLOOR:
      return KILN_KIR_FLOOR;
    case KILN_OP_CEIL:
      return KILN_KIR_CEIL;
    case KILN_OP_ROUND_NEAREST_AFZ:
      return KILN_KIR_ROUND;
    case KILN_OP_ROUND_NEAREST_EVEN:
      return KILN_KIR_ROUND_EVEN;
    default:
      return KILN_KIR_OPCODE_COUNT;
  }
}

static kiln_kir_opcode_t binary_kir(kiln_hlo_opcode_t op, bool pred) {
  switch (op) {
    case KILN_OP_ADD:
      return pred ? KILN_KIR_OR : KILN_KIR_ADD;
    case KILN_OP_SUBTRACT:
      return pred ? KILN_KIR_XOR : KILN_KIR_SUB;
    case KILN_OP_MULTIPLY:
      return pred ? KILN_KIR_AND : KILN_KIR_MUL;
    case KILN_OP_DIVIDE:
      return KILN_KIR_DIV;
    case KILN_OP_REMAINDER:
      return KILN_KIR_REM;
    case KILN_OP_MAXIMUM:
      return pred ? KILN_KIR_OR : KILN_KIR_MAX;
    case KILN_OP_MINIMUM:
      return pred ? KILN_KIR_AND : KILN_KIR_MIN;
    case KILN_OP_AND:
      return KILN_KIR_AND;
    case KILN_OP_OR:
      return KILN_KIR_OR;
    case KILN_OP_XOR:
      return KILN_KIR_XOR;
    case KILN_OP_SHIFT_LEFT:
      return KILN_KIR_SHL;
    case KILN_OP_SHIFT_RIGHT_LOGICAL:
      return KILN_KIR_SHR_LOGICAL;
    case KILN_OP_SHIFT_RIGHT_ARITHMETIC:
      return KILN_KIR_SHR_ARITH;
    case KILN_OP_POWER:
      return KILN_KIR_POW;
    case KILN_OP_ATAN2:
      return KILN_KIR_ATAN2;
    default:
      return KILN_KIR_OPCODE_COUNT;
  }
}

kiln_kir_value_t *kiln_elemental_scalar_op(kiln_elemental_fn_t *f,
                                           const kiln_hlo_instruction_t *instr,
                                           kiln_kir_value_t *const *a, int n) {
  kiln_hlo_opcode_t op = instr->opcode;
  kiln_kir_module_t *m = f->e->m;
  const kiln_kir_type_t *rt = kiln_kir_type_scalar(m, instr->shape->type);
  kiln_elem_type_t at = n > 0 ? elem_of(a[0]) : instr->shape->type;
  switch (op) {
    case KILN_OP_COPY:
      return a[0];
    case KILN_OP_CONVERT:
      return kiln_kir_convert(B, a[0], rt);
    case KILN_OP_BITCAST_CONVERT:
      if (kiln_kir_type_bits(a[0]->type) != kiln_kir_type_bits(rt)) {
        kiln_elemental_fail(
            f, KILN_ERR_UNIMPLEMENTED("%s: bitcast-convert between widths", instr->name));
        return NULL;
      }
      return kiln_kir_bitcast(B, a[0], rt);
    case KILN_OP_COMPARE:
      return compare(f, instr, a[0], a[1]);
    case KILN_OP_SELECT:
      return kiln_kir_select(B, a[0], a[1], a[2]);
    case KILN_OP_CLAMP:
      if (at == KILN_PRED) return bin(f, KILN_KIR_AND, bin(f, KILN_KIR_OR, a[1], a[0]), a[2]);
      return bin(f, KILN_KIR_MIN, bin(f, KILN_KIR_MAX, a[1], a[0]), a[2]);
    case KILN_OP_IS_FINITE:
      return kiln_kir_is_finite(B, a[0]);
    case KILN_OP_REDUCE_PRECISION:
      return reduce_precision(f, instr, a[0]);
    case KILN_OP_ACOS:
    case KILN_OP_ASIN:
    case KILN_OP_ACOSH:
    case KILN_OP_ASINH:
    case KILN_OP_ATANH:
    case KILN_OP_COSH:
    case KILN_OP_SINH:
      return derived_math(f, op, a[0]);
    case KILN_OP_MAP: {
      const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(instr, "to_apply");
      kiln_kir_value_t *out[KILN_ELEM_MAX_OUTPUTS];
      if (!c) {
        kiln_elemental_fail(f, KILN_ERR_INVALID("%s: map without to_apply", instr->name));
        return NULL;
      }
      if (kiln_elemental_emit_scalar_computation(f, c, a, n, out) != 1) return NULL;
      return out[0];
    }
    case KILN_OP_ABS:
      if (kiln_elem_type_is_unsigned_int(at)) return a[0];
      break;
    case KILN_OP_SIGN:
      if (kiln_elem_type_is_unsigned_int(at))
        return kiln_kir_select(B, kiln_kir_cmp(B, KILN_KIR_CMP_NE, a[0], ci(f, a[0]->type, 0)),
                               ci(f, a[0]->type, 1), ci(f, a[0]->type, 0));
      break;
    case KILN_OP_POWER:
      if (!kiln_elem_type_is_float(at)) return int_pow(f, a[0], a[1]);
      break;
    default:
      break;
  }
  kiln_kir_opcode_t k = unary_kir(op);
  if (k != KILN_KIR_OPCODE_COUNT && n == 1) return un(f, k, a[0]);
  k = binary_kir(op, at == KILN_PRED);
  if (k != KILN_KIR_OPCODE_COUNT && n == 2) return bin(f, k, a[0], a[1]);
  kiln_elemental_fail(
      f, KILN_ERR_UNIMPLEMENTED("elemental emitter: %s on %s (%s)", kiln_hlo_opcode_name(op),
                                kiln_elem_type_name(at), instr->name));
  return NULL;
}

/* ---- complex values: (re, im) pairs ---- */

/* |z| = m * sqrt((a/m)^2 + (b/m)^2), m = max(|a|, |b|) (0 when m == 0; inf if either is). */
static kiln_kir_value_t *c_abs(kiln_elemental_fn_t *f, kiln_kir_value_t *a, kiln_kir_value_t *b) {
  const kiln_kir_type_t *t = a->type;
  kiln_kir_value_t *aa = un(f, KILN_KIR_ABS, a), *ab = un(f, KILN_KIR_ABS, b);
  kiln_kir_value_t *m = bin(f, KILN_KIR_MAX, aa, ab);
  kiln_kir_value_t *zero = kiln_kir_cmp(B, KILN_KIR_CMP_EQ, m, cf(f, t, 0.0));
  kiln_kir_value_t *safe = kiln_kir_select(B, zero, cf(f, t, 1.0), m);
  kiln_kir_value_t *x = bin(f, KILN_KIR_DIV, a, safe), *y = bin(f, KILN_KIR_DIV, b, safe);
  kiln_kir_value_t *r =
      bin(f, KILN_KIR_MUL, m,
          un(f, KILN_KIR_SQRT,
             bin(f, KILN_KIR_ADD, bin(f, KILN_KIR_MUL, x, x), bin(f, KILN_KIR_MUL, y, y))));
  kiln_kir_value_t *inf = cf(f, t, INFINITY);
  kiln_kir_value_t *isinf = bin(f, KILN_KIR_OR, kiln_kir_cmp(B, KILN_KIR_CMP_EQ, aa, inf),
                                kiln_kir_cmp(B, KILN_KIR_CMP_EQ, ab, inf));
  return kiln_kir_select(B, isinf, inf, kiln_kir_select(B, zero, cf(f, t, 0.0), r));
}

/* A complex value as its two parts. */
typedef struct cval {
  kiln_kir_value_t *re, *im;
} cval_t;

static cval_t c_mul(kiln_elemental_fn_t *f, cval_t x, cval_t y) {
  cval_t r = {
      bin(f, KILN_KIR_SUB, bin(f, KILN_KIR_MUL, x.re, y.re), bin(f, KILN_KIR_MUL, x.im, y.im)),
      bin(f, KILN_KIR_ADD, bin(f, KILN_KIR_MUL, x.re, y.im), bin(f, KILN_KIR_MUL, x.im, y.re))};
  return r;
}

/* Smith's algorithm: divide by the larger of |c|, |d| first. */
static cval_t c_div(kiln_elemental_fn_t *f, cval_t x, cval_t y) {
  kiln_kir_value_t *a = x.re, *b = x.im, *c = y.re, *d = y.im;
  kiln_kir_value_t *big_c =
      kiln_kir_cmp(B, KILN_KIR_CMP_GE, un(f, KILN_KIR_ABS, c), un(f, KILN_KIR_ABS, d));
  kiln_kir_value_t *r1 = bin(f, KILN_KIR_DIV, d, c),
                   *den1 = bin(f, KILN_KIR_ADD, c, bin(f, KILN_KIR_MUL, d, r1));
  kiln_kir_value_t *re1 =
      bin(f, KILN_KIR_DIV, bin(f, KILN_KIR_ADD, a, bin(f, KILN_KIR_MUL, b, r1)), den1);
  kiln_kir_value_t *im1 =
      bin(f, KILN_KIR_DIV, bin(f, KILN_KIR_SUB, b, bin(f, KILN_KIR_MUL, a, r1)), den1);
  kiln_kir_value_t *r2 = bin(f, KILN_KIR_DIV, c, d),
                   *den2 = bin(f, KILN_KIR_ADD, bin(f, KILN_KIR_MUL, c, r2), d);
  kiln_kir_value_t *re2 =
      bin(f, KILN_KIR_DIV, bin(f, KILN_KIR_ADD, bin(f, KILN_KIR_MUL, a, r2), b), den2);
  kiln_kir_value_t *im2 =
      bin(f, KILN_KIR_DIV, bin(f, KILN_KIR_SUB, bin(f, KILN_KIR_MUL, b, r2), a), den2);
  cval_t r = {kiln_kir_select(B, big_c, re1, re2), kiln_kir_select(B, big_c, im1, im2)};
  return r;
}

/* exp z = e^re (cos im + i sin im); a zero imaginary part stays as it is (e^inf * sin 0 would
 * be NaN). */
static cval_t c_exp(kiln_elemental_fn_t *f, cval_t x) {
  const kiln_kir_type_t *t = x.re->type;
  kiln_kir_value_t *e = un(f, KILN_KIR_EXP, x.re), *zero = cf(f, t, 0.0);
  kiln_kir_value_t *im0 = kiln_kir_cmp(B, KILN_KIR_CMP_EQ, x.im, zero);
  kiln_kir_value_t *c = un(f, KILN_KIR_COS, x.im), *s = un(f, KILN_KIR_SIN, x.im);
  cval_t r = {kiln_kir_select(B, im0, e, bin(f, KILN_KIR_MUL, e, c)),
              kiln_kir_select(B, im0, x.im, bin(f, KILN_KIR_MUL, e, s))};
  return r;
}

/* log z: log|z| near |z| = 1 as 0.5 * log1p((m - 1)(m + 1) + n^2) (m, n = larger and smaller
 * of |re|, |im|), which keeps the cancellation exact; log(|z|) elsewhere. */
static cval_t c_log(kiln_elemental_fn_t *f, cval_t x) {
  const kiln_kir_type_t *t = x.re->type;
  kiln_kir_value_t *one = cf(f, t, 1.0);
  kiln_kir_value_t *aa = un(f, KILN_KIR_ABS, x.re), *ab = un(f, KILN_KIR_ABS, x.im);
  kiln_kir_value_t *m = bin(f, KILN_KIR_MAX, aa, ab), *n = bin(f, KILN_KIR_MIN, aa, ab);
  kiln_kir_value_t *s2 =
      bin(f, KILN_KIR_ADD,
          bin(f, KILN_KIR_MUL, bin(f, KILN_KIR_SUB, m, one), bin(f, KILN_KIR_ADD, m, one)),
          bin(f, KILN_KIR_MUL, n, n));
  kiln_kir_value_t *near =
      bin(f, KILN_KIR_AND, kiln_kir_cmp(B, KILN_KIR_CMP_GE, s2, cf(f, t, -0.5)),
          kiln_kir_cmp(B, KILN_KIR_CMP_LE, s2, cf(f, t, 1.0)));
  kiln_kir_value_t *rn = bin(f, KILN_KIR_MUL, cf(f, t, 0.5), un(f, KILN_KIR_LOG1P, s2));
  /* elsewhere log m + 0.5 log1p((n/m)^2), which neither overflows nor underflows; m = 0
   * gives -inf, m = inf gives inf */
  kiln_kir_value_t *zero = cf(f, t, 0.0), *inf = cf(f, t, INFINITY);
  kiln_kir_value_t *q = bin(f, KILN_KIR_DIV, n, m);
  q = kiln_kir_select(B,
                      bin(f, KILN_KIR_OR, kiln_kir_cmp(B, KILN_KIR_CMP_EQ, m, zero),
                          kiln_kir_cmp(B, KILN_KIR_CMP_EQ, m, inf)),
                      zero, q);
  kiln_kir_value_t *rf =
      bin(f, KILN_KIR_ADD, un(f, KILN_KIR_LOG, m),
          bin(f, KILN_KIR_MUL, cf(f, t, 0.5), un(f, KILN_KIR_LOG1P, bin(f, KILN_KIR_MUL, q, q))));
  cval_t r = {kiln_kir_select(B, near, rn, rf), bin(f, KILN_KIR_ATAN2, x.im, x.re)};
  return r;
}

/* Principal square root: t = sqrt(|re|/2 + |z|/2); re >= 0: (t, im / 2t), else
 * (|im| / 2t, copysign(t, im)); z = 0 gives (0, im). */
static cval_t c_sqrt(kiln_elemental_fn_t *f, cval_t x) {
  const kiln_kir_type_t *t = x.re->type;
  kiln_kir_value_t *half = cf(f, t, 0.5), *zero = cf(f, t, 0.0), *one = cf(f, t, 1.0);
  /* s = sqrt(m) sqrt(|re|/2m + sqrt(1 + (n/m)^2)/2), m, n = larger and smaller of |re|, |im|:
   * no overflow for huge parts (m = 0 gives 0) */
  kiln_kir_value_t *aa = un(f, KILN_KIR_ABS, x.re), *ab = un(f, KILN_KIR_ABS, x.im);
  kiln_kir_value_t *m = bin(f, KILN_KIR_MAX, aa, ab), *n = bin(f, KILN_KIR_MIN, aa, ab);
  kiln_kir_value_t *ms = kiln_kir_select(B, kiln_kir_cmp(B, KILN_KIR_CMP_EQ, m, zero), one, m);
  kiln_kir_value_t *rr = bin(f, KILN_KIR_DIV, n, ms);
  kiln_kir_value_t *h =
      un(f, KILN_KIR_SQRT, bin(f, KILN_KIR_ADD, one, bin(f, KILN_KIR_MUL, rr, rr)));
  kiln_kir_value_t *k =
      bin(f, KILN_KIR_MUL, half, bin(f, KILN_KIR_ADD, bin(f, KILN_KIR_DIV, aa, ms), h));
  kiln_kir_value_t *s = bin(f, KILN_KIR_MUL, un(f, KILN_KIR_SQRT, m), un(f, KILN_KIR_SQRT, k));
  kiln_kir_value_t *q = bin(f, KILN_KIR_DIV, x.im, bin(f, KILN_KIR_ADD, s, s));
  kiln_kir_value_t *pos = kiln_kir_cmp(B, KILN_KIR_CMP_GE, x.re, zero);
  kiln_kir_value_t *neg_im = kiln_kir_cmp(B, KILN_KIR_CMP_LT, x.im, zero);
  kiln_kir_value_t *is0 = kiln_kir_cmp(B, KILN_KIR_CMP_EQ, s, zero);
  kiln_kir_value_t *inf = cf(f, t, INFINITY);
  kiln_kir_value_t *im_inf = kiln_kir_cmp(B, KILN_KIR_CMP_EQ, un(f, KILN_KIR_ABS, x.im), inf);
  cval_t r = {kiln_kir_select(B, pos, s, un(f, KILN_KIR_ABS, q)),
              kiln_kir_select(B, pos, q, kiln_kir_select(B, neg_im, un(f, KILN_KIR_NEG, s), s))};
  /* re = +inf: (inf, +-0); re = -inf: (0, +-inf) (the sign of im); |im| = inf: (inf, im) */
  kiln_kir_value_t *pinf = kiln_kir_cmp(B, KILN_KIR_CMP_EQ, x.re, inf);
  kiln_kir_value_t *ninf = kiln_kir_cmp(B, KILN_KIR_CMP_EQ, x.re, un(f, KILN_KIR_NEG, inf));
  kiln_kir_value_t *sinf = kiln_kir_select(B, neg_im, un(f, KILN_KIR_NEG, inf), inf);
  r.re = kiln_kir_select(B, is0, zero, r.re);
  r.im = kiln_kir_select(B, is0, x.im, r.im);
  r.re = kiln_kir_select(B, pinf, inf, kiln_kir_select(B, ninf, zero, r.re));
  r.im = kiln_kir_select(B, pinf, bin(f, KILN_KIR_MUL, x.im, zero),
                         kiln_kir_select(B, ninf, sinf, r.im));
  r.re = kiln_kir_select(B, im_inf, inf, r.re);
  r.im = kiln_kir_select(B, im_inf, x.im, r.im);
  return r;
}

/* sinh and cosh of a real part value (the derived math, in the part type). */
static kiln_kir_value_t *r_sinh(kiln_elemental_fn_t *f, kiln_kir_value_t *x) {
  return derived_math(f, KILN_OP_SINH, x);
}
static kiln_kir_value_t *r_cosh(kiln_elemental_fn_t *f, kiln_kir_value_t *x) {
  return derived_math(f, KILN_OP_COSH, x);
}

/* tanh(a + bi) = (sinh 2a + i sin 2b) / (cosh 2a + cos 2b); past |a| = 20 (f32) or 40 (f64)
 * the result is (sign(a), 0) to working precision and the quotient would overflow. */
static cval_t c_tanh(kiln_elemental_fn_t *f, cval_t x) {
  const kiln_kir_type_t *t = x.re->type;
  kiln_kir_value_t *a2 = bin(f, KILN_KIR_ADD, x.re, x.re), *b2 = bin(f, KILN_KIR_ADD, x.im, x.im);
  kiln_kir_value_t *den = bin(f, KILN_KIR_ADD, r_cosh(f, a2), un(f, KILN_KIR_COS, b2));
  kiln_kir_value_t *sb = un(f, KILN_KIR_SIN, b2);
  kiln_kir_value_t *big = kiln_kir_cmp(B, KILN_KIR_CMP_GT, un(f, KILN_KIR_ABS, x.re),
                                       cf(f, t, t->elem == KILN_F64 ? 40.0 : 20.0));
  kiln_kir_value_t *sgn = kiln_kir_select(B, kiln_kir_cmp(B, KILN_KIR_CMP_LT, x.re, cf(f, t, 0.0)),
                                          cf(f, t, -1.0), cf(f, t, 1.0));
  cval_t r = {kiln_kir_select(B, big, sgn, bin(f, KILN_KIR_DIV, r_sinh(f, a2), den)),
              kiln_kir_select(B, big, bin(f, KILN_KIR_MUL, sb, cf(f, t, 0.0)),
                              bin(f, KILN_KIR_DIV, sb, den))};
  return r;
}

/* copysign(mag, sgn) through the sign bit (keeps the sign of zeros and NaNs). */
static kiln_kir_value_t *c_copysign(kiln_elemental_fn_t *f, kiln_kir_value_t *mag,
                                    kiln_kir_value_t *sgn) {
  bool f64 = elem_of(mag) == KILN_F64;
  const kiln_kir_type_t *ut = kiln_kir_type_scalar(f->e->m, f64 ? KILN_U64 : KILN_U32);
  int64_t sign = f64 ? (int64_t)(UINT64_C(1) << 63) : (int64_t)(UINT32_C(1) << 31);
  kiln_kir_value_t *m = bin(f, KILN_KIR_AND, kiln_kir_bitcast(B, mag, ut), ci(f, ut, ~sign));
  kiln_kir_value_t *s = bin(f, KILN_KIR_AND, kiln_kir_bitcast(B, sgn, ut), ci(f, ut, sign));
  return kiln_kir_bitcast(B, bin(f, KILN_KIR_OR, m, s), mag->type);
}

/* The magnitudes of asin / acos of x + iy for x, y >= 0, after Hull, Fairgrieve and Tang,
 * "Implementing the complex arcsine and arccosine functions using exception handling" (ACM
 * TOMS 23(3), 1997): with r = |z + 1|, s = |z - 1|, a = (r + s) / 2 and b = x / a,
 * asin re = asin b, acos re = acos b for b <= 0.6417; past it atan forms without
 * cancellation; im = log1p(am1 + sqrt(am1 (a + 1))) with am1 = a - 1 computed without
 * cancellation for a <= 1.5, else log(a + sqrt((a - 1)(a + 1))). Where x or y passes
 * sqrt(max) / 8 (r, s overflow) re = atan2 of the parts and im = log 2 + log |z|; where y
 * underflows squared (x < 1), im = y / sqrt((1 - x)(1 + x)). */
typedef struct asin_parts {
  kiln_kir_value_t *asin_re, *acos_re, *im;
} asin_parts_t;

static asin_parts_t c_asin_parts(kiln_elemental_fn_t *f, kiln_kir_value_t *x, kiln_kir_value_t *y) {
  const kiln_kir_type_t *t = x->type;
  bool f64 = elem_of(x) == KILN_F64;
  kiln_kir_value_t *one = cf(f, t, 1.0), *half = cf(f, t, 0.5);
  kiln_kir_value_t *xp1 = bin(f, KILN_KIR_ADD, x, one), *xm1 = bin(f, KILN_KIR_SUB, x, one);
  kiln_kir_value_t *omx = bin(f, KILN_KIR_SUB, one, x);
  kiln_kir_value_t *r = c_abs(f, xp1, y), *s = c_abs(f, xm1, y);
  kiln_kir_value_t *a = bin(f, KILN_KIR_MUL, half, bin(f, KILN_KIR_ADD, r, s));
  kiln_kir_value_t *b = bin(f, KILN_KIR_DIV, x, a);
  kiln_kir_value_t *y2 = bin(f, KILN_KIR_MUL, y, y);
  kiln_kir_value_t *apx = bin(f, KILN_KIR_ADD, a, x);
  kiln_kir_value_t *rxp1 = bin(f, KILN_KIR_ADD, r, xp1);
  kiln_kir_value_t *le1 = kiln_kir_cmp(B, KILN_KIR_CMP_LE, x, one);
  /* the denominator of the atan forms: sqrt(apx/2 (y2/(r+x+1) + s + 1 - x)) for x <= 1,
   * y sqrt((apx/(r+x+1) + apx/(s+x-1)) / 2) above */
  kiln_kir_value_t *d1 =
      un(f, KILN_KIR_SQRT,
         bin(f, KILN_KIR_MUL, bin(f, KILN_KIR_MUL, half, apx),
             bin(f, KILN_KIR_ADD, bin(f, KILN_KIR_DIV, y2, rxp1), bin(f, KILN_KIR_ADD, s, omx))));
  kiln_kir_value_t *d2 = bin(f, KILN_KIR_MUL, y,
                             un(f, KILN_KIR_SQRT,
                                bin(f, KILN_KIR_MUL, half,
                                    bin(f, KILN_KIR_ADD, bin(f, KILN_KIR_DIV, apx, rxp1),
                                        bin(f, KILN_KIR_DIV, apx, bin(f, KILN_KIR_ADD, s, xm1))))));
  kiln_kir_value_t *den = kiln_kir_select(B, le1, d1, d2);
  kiln_kir_value_t *small_b = kiln_kir_cmp(B, KILN_KIR_CMP_LE, b, cf(f, t, 0.6417));
  asin_parts_t p;
  p.asin_re =
      kiln_kir_select(B, small_b, derived_math(f, KILN_OP_ASIN, b), bin(f, KILN_KIR_ATAN2, x, den));
  p.acos_re =
      kiln_kir_select(B, small_b, derived_math(f, KILN_OP_ACOS, b), bin(f, KILN_KIR_ATAN2, den, x));
  kiln_kir_value_t *lt1 = kiln_kir_cmp(B, KILN_KIR_CMP_LT, x, one);
  kiln_kir_value_t *t1 = bin(f, KILN_KIR_DIV, y2, rxp1);
  kiln_kir_value_t *am1 =
      bin(f, KILN_KIR_MUL, half,
          bin(f, KILN_KIR_ADD, t1,
              kiln_kir_select(B, lt1, bin(f, KILN_KIR_DIV, y2, bin(f, KILN_KIR_ADD, s, omx)),
                              bin(f, KILN_KIR_ADD, s, xm1))));
  kiln_kir_value_t *im_near =
      un(f, KILN_KIR_LOG1P,
         bin(f, KILN_KIR_ADD, am1,
             un(f, KILN_KIR_SQRT, bin(f, KILN_KIR_MUL, am1, bin(f, KILN_KIR_ADD, a, one)))));
  kiln_kir_value_t *im_far =
      un(f, KILN_KIR_LOG,
         bin(f, KILN_KIR_ADD, a,
             un(f, KILN_KIR_SQRT,
                bin(f, KILN_KIR_MUL, bin(f, KILN_KIR_SUB, a, one), bin(f, KILN_KIR_ADD, a, one)))));
  p.im = kiln_kir_select(B, kiln_kir_cmp(B, KILN_KIR_CMP_LE, a, cf(f, t, 1.5)), im_near, im_far);
  /* y so small that y^2 underflows, x < 1: im = y / sqrt((1 - x)(1 + x)) */
  double tiny = f64 ? 1e-150 : 1e-18;
  kiln_kir_value_t *ytiny =
      bin(f, KILN_KIR_AND, lt1, kiln_kir_cmp(B, KILN_KIR_CMP_LT, y, cf(f, t, tiny)));
  p.im = kiln_kir_select(
      B, ytiny, bin(f, KILN_KIR_DIV, y, un(f, KILN_KIR_SQRT, bin(f, KILN_KIR_MUL, omx, xp1))),
      p.im);
  /* huge parts */
  double huge = f64 ? 1.6e153 : 2.3e18; /* about sqrt(max) / 8 */
  kiln_kir_value_t *m = bin(f, KILN_KIR_MAX, x, y), *n = bin(f, KILN_KIR_MIN, x, y);
  kiln_kir_value_t *big = kiln_kir_cmp(B, KILN_KIR_CMP_GE, m, cf(f, t, huge));
  kiln_kir_value_t *q = bin(f, KILN_KIR_DIV, n, m);
  q = kiln_kir_select(B, kiln_kir_cmp(B, KILN_KIR_CMP_EQ, m, cf(f, t, INFINITY)), cf(f, t, 0.0), q);
  kiln_kir_value_t *im_big =
      bin(f, KILN_KIR_ADD, bin(f, KILN_KIR_ADD, un(f, KILN_KIR_LOG, m), cf(f, t, M_LN2)),
          bin(f, KILN_KIR_MUL, half, un(f, KILN_KIR_LOG1P, bin(f, KILN_KIR_MUL, q, q))));
  p.im = kiln_kir_select(B, big, im_big, p.im);
  p.asin_re = kiln_kir_select(B, big, bin(f, KILN_KIR_ATAN2, x, y), p.asin_re);
  p.acos_re = kiln_kir_select(B, big, bin(f, KILN_KIR_ATAN2, y, x), p.acos_re);
  return p;
}

/* asin, acos, asinh, acosh of z = re + i im (asinh z = -i asin(iz), acosh from acos). */
static cval_t c_inverse_trig(kiln_elemental_fn_t *f, kiln_hlo_opcode_t op, cval_t z) {
  const kiln_kir_type_t *t = z.re->type;
  kiln_kir_value_t *are = un(f, KILN_KIR_ABS, z.re), *aim = un(f, KILN_KIR_ABS, z.im);
  bool hyp = op == KILN_OP_ASINH;
  asin_parts_t p = hyp ? c_asin_parts(f, aim, are) : c_asin_parts(f, are, aim);
  cval_t r;
  switch (op) {
    case KILN_OP_ASIN:
      r.re = c_copysign(f, p.asin_re, z.re);
      r.im = c_copysign(f, p.im, z.im);
      break;
    case KILN_OP_ASINH:
      r.re = c_copysign(f, p.im, z.re);
      r.im = c_copysign(f, p.asin_re, z.im);
      break;
    default: {
      /* acos re = pi - re(|z|) for re < 0 (the sign bit: acos(-0 + iy) is pi/2 either way) */
      kiln_kir_value_t *neg = kiln_kir_cmp(B, KILN_KIR_CMP_LT, z.re, cf(f, t, 0.0));
      kiln_kir_value_t *ac =
          kiln_kir_select(B, neg, bin(f, KILN_KIR_SUB, cf(f, t, M_PI), p.acos_re), p.acos_re);
      if (op == KILN_OP_ACOS) {
        r.re = ac;
        r.im = c_copysign(f, p.im, un(f, KILN_KIR_NEG, z.im));
      } else { /* acosh z = |im acos z| + i copysign(re acos z, im z) */
        r.re = p.im;
        r.im = c_copysign(f, ac, z.im);
      }
      break;
    }
  }
  return r;
}

/* atanh(x + iy) = (1/4) log1p(4x / ((1 - x)^2 + y^2)) + (i/2) atan2(2y, (1 - x)(1 + x) - y^2),
 * computed for |x| (odd in x). Where the quotient's denominator underflows (z near 1) the real
 * part is log(4x)/4 - log|1 - z|/2; past sqrt(max) / 8, re = x / |z|^2 (scaled) and
 * im = copysign(pi/2, y). */
static cval_t c_atanh(kiln_elemental_fn_t *f, cval_t z) {
  const kiln_kir_type_t *t = z.re->type;
  bool f64 = elem_of(z.re) == KILN_F64;
  kiln_kir_value_t *one = cf(f, t, 1.0), *zero = cf(f, t, 0.0);
  kiln_kir_value_t *x = un(f, KILN_KIR_ABS, z.re), *y = z.im, *ay = un(f, KILN_KIR_ABS, z.im);
  kiln_kir_value_t *omx = bin(f, KILN_KIR_SUB, one, x);
  kiln_kir_value_t *h = c_abs(f, omx, ay); /* |1 - z| */
  kiln_kir_value_t *h2 = bin(f, KILN_KIR_MUL, h, h);
  kiln_kir_value_t *x4 = bin(f, KILN_KIR_MUL, cf(f, t, 4.0), x);
  kiln_kir_value_t *re =
      bin(f, KILN_KIR_MUL, cf(f, t, 0.25), un(f, KILN_KIR_LOG1P, bin(f, KILN_KIR_DIV, x4, h2)));
  kiln_kir_value_t *re_near =
      bin(f, KILN_KIR_SUB, bin(f, KILN_KIR_MUL, cf(f, t, 0.25), un(f, KILN_KIR_LOG, x4)),
          bin(f, KILN_KIR_MUL, cf(f, t, 0.5), un(f, KILN_KIR_LOG, h)));
  double tiny = f64 ? 1e-150 : 1e-18;
  kiln_kir_value_t *h_tiny =
      bin(f, KILN_KIR_AND, kiln_kir_cmp(B, KILN_KIR_CMP_LT, h, cf(f, t, tiny)),
          kiln_kir_cmp(B, KILN_KIR_CMP_GT, x, zero));
  re = kiln_kir_select(B, h_tiny, re_near, re);
  kiln_kir_value_t *im =
      bin(f, KILN_KIR_MUL, cf(f, t, 0.5),
          bin(f, KILN_KIR_ATAN2, bin(f, KILN_KIR_ADD, y, y),
              bin(f, KILN_KIR_SUB, bin(f, KILN_KIR_MUL, omx, bin(f, KILN_KIR_ADD, one, x)),
                  bin(f, KILN_KIR_MUL, y, y))));
  double huge = f64 ? 1.6e153 : 2.3e18;
  kiln_kir_value_t *m = bin(f, KILN_KIR_MAX, x, ay), *n = bin(f, KILN_KIR_MIN, x, ay);
  kiln_kir_value_t *big = kiln_kir_cmp(B, KILN_KIR_CMP_GE, m, cf(f, t, huge));
  kiln_kir_value_t *isinf = kiln_kir_cmp(B, KILN_KIR_CMP_EQ, m, cf(f, t, INFINITY));
  kiln_kir_value_t *q = kiln_kir_select(B, isinf, zero, bin(f, KILN_KIR_DIV, n, m));
  /* x / (x^2 + y^2) = ((x / m) / (1 + q^2)) / m: no overflow on the way to a subnormal */
  kiln_kir_value_t *re_big =
      kiln_kir_select(B, isinf, zero,
                      bin(f, KILN_KIR_DIV,
                          bin(f, KILN_KIR_DIV, bin(f, KILN_KIR_DIV, x, m),
                              bin(f, KILN_KIR_ADD, one, bin(f, KILN_KIR_MUL, q, q))),
                          m));
  re = kiln_kir_select(B, big, re_big, re);
  im = kiln_kir_select(B, big, c_copysign(f, cf(f, t, M_PI_2), y), im);
  cval_t r = {c_copysign(f, re, z.re), im};
  return r;
}

int kiln_elemental_complex_op(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                              kiln_kir_value_t *const (*args)[2], const int *cnt, int nargs,
                              kiln_kir_value_t **out) {
  kiln_hlo_opcode_t op = instr->opcode;
  if (op == KILN_OP_MAP) { /* the computation takes a complex parameter as (re, im) */
    const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(instr, "to_apply");
    kiln_kir_value_t *flat[2 * 8];
    int n = 0;
    for (int k = 0; k < nargs && k < 8; k++)
      for (int p = 0; p < cnt[k] && p < 2; p++) flat[n++] = args[k][p];
    if (!c || nargs > 8) {
      kiln_elemental_fail(
          f, KILN_ERR_INVALID("%s: map without to_apply or of %d operands", instr->name, nargs));
      return -1;
    }
    kiln_kir_value_t *res[KILN_ELEM_MAX_OUTPUTS]; /* `out` holds two */
    int got = kiln_elemental_emit_scalar_computation(f, c, flat, n, res);
    int want = kiln_elemental_vals_per(instr->shape->type);
    if (got >= 0 && got != want) {
      kiln_elemental_fail(f, KILN_ERR_INVALID("%s: map computation gives %d values, not %d",
                                              instr->name, got, want));
      return -1;
    }
    for (int k = 0; k < got; k++) out[k] = res[k];
    return got;
  }
  kiln_elem_type_t rt = instr->shape->type;
  kiln_elem_type_t pt = kiln_elemental_part_type(rt);
  const kiln_kir_type_t *ptt = kiln_kir_type_scalar(f->e->m, pt);
  /* Operand k as a pair (a real operand gets imaginary part 0). */
  kiln_kir_value_t *re[3] = {0}, *im[3] = {0};
  for (int k = 0; k < nargs && k < 3; k++) {
    re[k] = args[k][0];
    im[k] = cnt[k] > 1 ? args[k][1] : NULL;
  }
#define IM(k) (im[k] ? im[k] : cf(f, re[k]->type, 0.0))
#define X(k) ((cval_t){re[k], IM(k)})
#define ONE ((cval_t){cf(f, ptt, 1.0), cf(f, ptt, 0.0)})
#define RET(v)       \
  do {               \
    cval_t r_ = (v); \
    out[0] = r_.re;  \
    out[1] = r_.im;  \
    return 2;        \
  } while (0)
  switch (op) {
    case KILN_OP_BITCAST_CONVERT:
    case KILN_OP_COPY:
      if (op == KILN_OP_BITCAST_CONVERT && instr->operands[0]->shape->type != rt) break;
      out[0] = re[0];
      out[1] = im[0];
      return cnt[0];
    case KILN_OP_REAL:
      out[0] = re[0];
      return 1;
    case KILN_OP_IMAG:
      out[0] = IM(0);
      return 1;
    case KILN_OP_COMPLEX:
      out[0] = re[0];
      out[1] = re[1];
      return 2;
    case KILN_OP_NEGATE:
      out[0] = un(f, KILN_KIR_NEG, re[0]);
      out[1] = un(f, KILN_KIR_NEG, IM(0));
      return 2;
    case KILN_OP_ADD:
    case KILN_OP_SUBTRACT: {
      kiln_kir_opcode_t k = op == KILN_OP_ADD ? KILN_KIR_ADD : KILN_KIR_SUB;
      out[0] = bin(f, k, re[0], re[1]);
      out[1] = bin(f, k, IM(0), IM(1));
      return 2;
    }
    case KILN_OP_MULTIPLY:
      RET(c_mul(f, X(0), X(1)));
    case KILN_OP_DIVIDE:
      RET(c_div(f, X(0), X(1)));
    case KILN_OP_ABS:
      out[0] = c_abs(f, re[0], IM(0));
      return 1;
    case KILN_OP_EXP:
      RET(c_exp(f, X(0)));
    case KILN_OP_LOG:
      RET(c_log(f, X(0)));
    case KILN_OP_SQRT:
      RET(c_sqrt(f, X(0)));
    case KILN_OP_RSQRT:
      RET(c_div(f, ONE, c_sqrt(f, X(0))));
    case KILN_OP_POWER: {
      /* exp(y log x); x == 1 or y == 0 gives 1 (the evaluator's rule). */
      cval_t x = X(0), y = X(1);
      cval_t p = c_exp(f, c_mul(f, y, c_log(f, x)));
      kiln_kir_value_t *zero = cf(f, ptt, 0.0), *one = cf(f, ptt, 1.0);
      kiln_kir_value_t *x1 = bin(f, KILN_KIR_AND, kiln_kir_cmp(B, KILN_KIR_CMP_EQ, x.re, one),
                                 kiln_kir_cmp(B, KILN_KIR_CMP_EQ, x.im, zero));
      kiln_kir_value_t *y0 = bin(f, KILN_KIR_AND, kiln_kir_cmp(B, KILN_KIR_CMP_EQ, y.re, zero),
                                 kiln_kir_cmp(B, KILN_KIR_CMP_EQ, y.im, zero));
      kiln_kir_value_t *unit = bin(f, KILN_KIR_OR, x1, y0);
      cval_t r = {kiln_kir_select(B, unit, one, p.re), kiln_kir_select(B, unit, zero, p.im)};
      RET(r);
    }
    case KILN_OP_SIGN: {
      /* z / |z|; 0 stays 0 */
      kiln_kir_value_t *m = c_abs(f, re[0], IM(0)), *zero = cf(f, ptt, 0.0);
      kiln_kir_value_t *is0 = kiln_kir_cmp(B, KILN_KIR_CMP_EQ, m, zero);
      cval_t r = {kiln_kir_select(B, is0, zero, bin(f, KILN_KIR_DIV, re[0], m)),
                  kiln_kir_select(B, is0, zero, bin(f, KILN_KIR_DIV, IM(0), m))};
      RET(r);
    }
    case KILN_OP_EXPM1: {
      /* e^a cos b - 1 = expm1(a) cos b - 2 sin^2(b/2): no cancellation near 0. */
      kiln_kir_value_t *a = re[0], *b = IM(0);
      kiln_kir_value_t *c = un(f, KILN_KIR_COS, b),
                       *h = un(f, KILN_KIR_SIN, bin(f, KILN_KIR_MUL, b, cf(f, ptt, 0.5)));
      kiln_kir_value_t *rr = bin(f, KILN_KIR_SUB, bin(f, KILN_KIR_MUL, un(f, KILN_KIR_EXPM1, a), c),
                                 bin(f, KILN_KIR_MUL, cf(f, ptt, 2.0), bin(f, KILN_KIR_MUL, h, h)));
      cval_t r = {rr, bin(f, KILN_KIR_MUL, un(f, KILN_KIR_EXP, a), un(f, KILN_KIR_SIN, b))};
      RET(r);
    }
    case KILN_OP_LOG1P: {
      /* log(1 + z): re = 0.5 log1p(a (2 + a) + b^2) while that argument is small (no
       * cancellation), else log|1 + z|; im = atan2(b, 1 + a). */
      kiln_kir_value_t *a = re[0], *b = IM(0), *one = cf(f, ptt, 1.0);
      kiln_kir_value_t *s2 =
          bin(f, KILN_KIR_ADD, bin(f, KILN_KIR_MUL, a, bin(f, KILN_KIR_ADD, a, cf(f, ptt, 2.0))),
              bin(f, KILN_KIR_MUL, b, b));
      kiln_kir_value_t *small =
          bin(f, KILN_KIR_AND, kiln_kir_cmp(B, KILN_KIR_CMP_GE, s2, cf(f, ptt, -0.5)),
              kiln_kir_cmp(B, KILN_KIR_CMP_LE, s2, one));
      cval_t z1 = {bin(f, KILN_KIR_ADD, a, one), b};
      cval_t l = c_log(f, z1);
      cval_t r = {
          kiln_kir_select(B, small,
                          bin(f, KILN_KIR_MUL, cf(f, ptt, 0.5), un(f, KILN_KIR_LOG1P, s2)), l.re),
          l.im};
      RET(r);
    }
    case KILN_OP_LOGISTIC: {
      cval_t nx = {un(f, KILN_KIR_NEG, re[0]), un(f, KILN_KIR_NEG, IM(0))};
      cval_t e = c_exp(f, nx);
      cval_t d = {bin(f, KILN_KIR_ADD, e.re, cf(f, ptt, 1.0)), e.im};
      RET(c_div(f, ONE, d));
    }
    case KILN_OP_SIN:
    case KILN_OP_COS:
    case KILN_OP_SINH:
    case KILN_OP_COSH: {
      /* sin(a+bi) = sin a cosh b + i cos a sinh b; cos = cos a cosh b - i sin a sinh b;
       * sinh(a+bi) = sinh a cos b + i cosh a sin b; cosh = cosh a cos b + i sinh a sin b. */
      bool hyp = op == KILN_OP_SINH || op == KILN_OP_COSH;
      kiln_kir_value_t *tr = hyp ? IM(0) : re[0], *hy = hyp ? re[0] : IM(0);
      kiln_kir_value_t *s = un(f, KILN_KIR_SIN, tr), *c = un(f, KILN_KIR_COS, tr);
      kiln_kir_value_t *sh = r_sinh(f, hy), *ch = r_cosh(f, hy);
      cval_t r;
      if (op == KILN_OP_SIN) {
        r.re = bin(f, KILN_KIR_MUL, s, ch), r.im = bin(f, KILN_KIR_MUL, c, sh);
      } else if (op == KILN_OP_COS) {
        r.re = bin(f, KILN_KIR_MUL, c, ch), r.im = un(f, KILN_KIR_NEG, bin(f, KILN_KIR_MUL, s, sh));
      } else if (op == KILN_OP_SINH) {
        r.re = bin(f, KILN_KIR_MUL, sh, c), r.im = bin(f, KILN_KIR_MUL, ch, s);
      } else {
        r.re = bin(f, KILN_KIR_MUL, ch, c), r.im = bin(f, KILN_KIR_MUL, sh, s);
      }
      RET(r);
    }
    case KILN_OP_TANH:
      RET(c_tanh(f, X(0)));
    case KILN_OP_ASIN:
    case KILN_OP_ACOS:
    case KILN_OP_ASINH:
    case KILN_OP_ACOSH:
      RET(c_inverse_trig(f, op, X(0)));
    case KILN_OP_ATANH:
      RET(c_atanh(f, X(0)));
    case KILN_OP_TAN: {
      /* tan z = -i tanh(iz) */
      cval_t iz = {un(f, KILN_KIR_NEG, IM(0)), re[0]};
      cval_t t = c_tanh(f, iz);
      cval_t r = {t.im, un(f, KILN_KIR_NEG, t.re)};
      RET(r);
    }
    case KILN_OP_SELECT:
      out[0] = kiln_kir_select(B, re[0], re[1], re[2]);
      out[1] = kiln_kir_select(B, re[0], IM(1), IM(2));
      return 2;
    case KILN_OP_COMPARE: {
      kiln_cmp_dir_t d = instr->comparison_direction;
      if (d != KILN_CMP_EQ && d != KILN_CMP_NE) break;
      kiln_kir_cmp_t p = d == KILN_CMP_EQ ? KILN_KIR_CMP_EQ : KILN_KIR_CMP_NE;
      kiln_kir_value_t *x = kiln_kir_cmp(B, p, re[0], re[1]), *y = kiln_kir_cmp(B, p, IM(0), IM(1));
      out[0] = bin(f, d == KILN_CMP_EQ ? KILN_KIR_AND : KILN_KIR_OR, x, y);
      return 1;
    }
    case KILN_OP_CONVERT:
      if (!kiln_elem_type_is_complex(rt)) break; /* complex -> real is not an HLO convert */
      out[0] = kiln_kir_convert(B, re[0], ptt);
      out[1] = im[0] ? kiln_kir_convert(B, im[0], ptt) : cf(f, ptt, 0.0);
      return 2;
    default:
      break;
  }
#undef IM
#undef X
#undef ONE
#undef RET
  kiln_elemental_fail(f, KILN_ERR_UNIMPLEMENTED("elemental emitter: %s on complex values (%s)",
                                                kiln_hlo_opcode_name(op), instr->name));
  return -1;
}

/* ---- bitcast-convert between widths or to / from complex types ---- */

/* `width` bits at bit `off` of the little-endian concatenation of `pieces` (unsigned integers
 * of `pw` bits each, aligned: a field lies inside one piece or covers whole pieces) as an
 * unsigned integer of `width` bits. */
static kiln_kir_value_t *bits_at(kiln_elemental_fn_t *f, kiln_kir_value_t *const *pieces, int pw,
                                 int off, int width) {
  kiln_kir_module_t *m = f->e->m;
  const kiln_kir_type_t *ut = kiln_kir_type_scalar(m, kiln_elem_type_unsigned_of_width(width));
  if (width <= pw) {
    kiln_kir_value_t *p = pieces[off / pw];
    int sh = off % pw;
    if (sh) p = bin(f, KILN_KIR_SHR_LOGICAL, p, ci(f, p->type, sh));
    return width == pw ? p : kiln_kir_convert(B, p, ut);
  }
  kiln_kir_value_t *acc = NULL;
  for (int k = 0; k < width / pw; k++) {
    kiln_kir_value_t *p = kiln_kir_convert(B, pieces[off / pw + k], ut);
    if (k) p = bin(f, KILN_KIR_SHL, p, ci(f, ut, (int64_t)k * pw));
    acc = acc ? bin(f, KILN_KIR_OR, acc, p) : p;
  }
  return acc;
}

int kiln_elemental_bitcast_convert(kiln_elemental_fn_t *f, const kiln_hlo_instruction_t *instr,
                                   kiln_kir_value_t *const *idx, int nidx, kiln_kir_value_t **out) {
  kiln_kir_module_t *m = f->e->m;
  const kiln_hlo_instruction_t *x = instr->operands[0];
  kiln_elem_type_t st = x->shape->type, dt = instr->shape->type;
  int sbits = kiln_elem_type_bits(st), dbits = kiln_elem_type_bits(dt);
  int ns = kiln_elemental_vals_per(st), nd = kiln_elemental_vals_per(dt);
  int ps = sbits / ns, pd = dbits / nd;
  bool ok = x->shape->rank == instr->shape->rank + (sbits < dbits) - (sbits > dbits);
  for (int w = 0; w < 2; w++) {
    int b = w ? pd : ps;
    ok = ok && (b == 8 || b == 16 || b == 32 || b == 64);
  }
  if (!ok || st == KILN_PRED || dt == KILN_PRED || nidx != instr->shape->rank) {
    kiln_elemental_fail(f,
                        KILN_ERR_UNIMPLEMENTED("%s: bitcast-convert from %s to %s", instr->name,
                                               kiln_elem_type_name(st), kiln_elem_type_name(dt)));
    return -1;
  }
  const kiln_kir_type_t *us = kiln_kir_type_scalar(m, kiln_elem_type_unsigned_of_width(ps));
  const kiln_kir_type_t *dpt = kiln_kir_type_scalar(m, kiln_elemental_part_type(dt));
  /* The source's pieces as unsigned integers: one element's, or (narrow source) the whole
   * minor row's that makes one result element. */
  int rows = sbits < dbits ? dbits / sbits : 1;
  int nsx = sbits > dbits ? nidx - 1 : nidx;
  kiln_kir_value_t *sidx[KILN_KIR_MAX_RANK + 1], *pieces[32], *v[KILN_ELEM_MAX_OUTPUTS];
  if (rows * ns > 32 || nsx + 1 > KILN_KIR_MAX_RANK) {
    kiln_elemental_fail(f, KILN_ERR_UNIMPLEMENTED("%s: bitcast-convert rank", instr->name));
    return -1;
  }
  for (int i = 0; i < nsx; i++) sidx[i] = idx[i];
  for (int r = 0; r < rows; r++) {
    if (sbits < dbits) sidx[nsx] = kiln_kir_const_index(B, r);
    int n = kiln_elemental_emit(f, x, sidx, x->shape->rank, v);
    if (n != ns) {
      if (n >= 0) kiln_elemental_fail(f, KILN_ERR_INTERNAL("%s: operand values", instr->name));
      return -1;
    }
    for (int q = 0; q < ns; q++) pieces[r * ns + q] = kiln_kir_bitcast(B, v[q], us);
  }
  /* Each result piece; a wide source holds dbits/sbits results along the minor index k,
   * chosen by selects (at most 16). */
  int choices = sbits > dbits ? sbits / dbits : 1;
  for (int j = 0; j < nd; j++) {
    kiln_kir_value_t *r = NULL;
    for (int c = 0; c < choices; c++) {
      kiln_kir_value_t *bits = bits_at(f, pieces, ps, c * dbits + j * pd, pd);
      kiln_kir_value_t *val = kiln_kir_bitcast(B, bits, dpt);
      if (!r) {
        r = val;
      } else {
        kiln_kir_value_t *is_c =
            kiln_kir_cmp(B, KILN_KIR_CMP_EQ, idx[nidx - 1], kiln_kir_const_index(B, c));
        r = kiln_kir_select(B, is_c, val, r);
      }
    }
    out[j] = r;
  }
  return nd;
}

/* ---- scalar computations ---- */

/* Marks in `need` (bits by post-order position) what `x` reads, stopping at bound values. */
static void mark_needed(const kiln_hlo_instruction_t *x, kiln_ptrmap_t *pos, kiln_ptrmap_t *bound,
                        bool *need) {
  uintptr_t i = (uintptr_t)kiln_ptrmap_get(pos, x);
  if (!i || need[i - 1]) return;
  need[i - 1] = true;
  if (kiln_ptrmap_contains(bound, x)) return;
  for (int k = 0; k < x->num_operands; k++) mark_needed(x->operands[k], pos, bound, need);
}

/* Emits `c` on `args` (see kiln_elemental_emit_scalar_computation): the values of its roots,
 * or with `which` that instruction's value alone, and then only what it reads; `bound[k]`
 * takes `bound_vals[k]` (real values) instead of being computed. */
static int emit_scalar(kiln_elemental_fn_t *f, const kiln_hlo_computation_t *c,
                       kiln_kir_value_t *const *args, int nargs,
                       const kiln_hlo_instruction_t *which,
                       const kiln_hlo_instruction_t *const *bound,
                       kiln_kir_value_t *const *bound_vals, int nbound, kiln_kir_value_t **out) {
  size_t n = 0;
  kiln_hlo_instruction_t **po = kiln_hlo_computation_post_order(c, &n);
  /* each value as (re, im): im is NULL for a real one */
  kiln_kir_value_t **vals = kiln_calloc(2 * (n + 1), sizeof(*vals));
  bool *need = kiln_calloc(n + 1, sizeof(*need));
  kiln_ptrmap_t pos, bmap;
  kiln_ptrmap_init(&pos);
  kiln_ptrmap_init(&bmap);
  int result = -1;
  for (size_t i = 0; i < n; i++) kiln_ptrmap_put(&pos, po[i], (void *)(uintptr_t)(i + 1));
  for (int k = 0; k < nbound; k++) kiln_ptrmap_put(&bmap, bound[k], bound_vals[k]);
  if (which) mark_needed(which, &pos, &bmap, need);
  for (size_t i = 0; !which && i < n; i++) need[i] = true;
#define VAL(instr) vals[2 * ((uintptr_t)kiln_ptrmap_get(&pos, (instr)) - 1)]
#define VAL_IM(instr) vals[2 * ((uintptr_t)kiln_ptrmap_get(&pos, (instr)) - 1) + 1]
  for (size_t i = 0; i < n; i++) {
    const kiln_hlo_instruction_t *in = po[i];
    kiln_kir_value_t *v = NULL, *v_im = NULL;
    if (!need[i]) continue;
    if (kiln_ptrmap_contains(&bmap, in)) {
      VAL(in) = kiln_ptrmap_get(&bmap, in);
      continue;
    }
    switch (in->opcode) {
      case KILN_OP_PARAMETER: {
        /* args are flat: a complex parameter takes two (re, im) */
        int at = 0;
        for (int q = 0; q < in->parameter_number && q < c->num_parameters; q++)
          at += kiln_elemental_vals_per(c->parameters[q]->shape->type);
        int cnt = kiln_elemental_vals_per(in->shape->type);
        if (in->parameter_number < 0 || at + cnt > nargs) {
          kiln_elemental_fail(f, KILN_ERR_INVALID("%s: parameter %lld of %d values", c->name,
                                                  (long long)in->parameter_number, nargs));
          goto done;
        }
        v = args[at];
        if (cnt == 2) v_im = args[at + 1];
        break;
      }
      case KILN_OP_CONSTANT:
        if (kiln_elem_type_is_complex(in->shape->type)) {
          kiln_elem_type_t pt = kiln_elemental_part_type(in->shape->type);
          if (!in->literal || in->literal->unknown) {
            kiln_elemental_fail(f, kiln_hlo_elided_constant_error(in));
            goto done;
          }
          double cre, cim;
          kiln_literal_get_c128(in->literal, 0, &cre, &cim);
          v = kiln_kir_const_float(B, pt, cre);
          v_im = kiln_kir_const_float(B, pt, cim);
        } else {
          v = kiln_elemental_constant(f, in->literal, 0);
        }
        break;
      case KILN_OP_TUPLE:
        continue; /* expanded by its users (root, get-tuple-element) */
      case KILN_OP_GET_TUPLE_ELEMENT: {
        const kiln_hlo_instruction_t *t = in->operands[0];
        if (t->opcode != KILN_OP_TUPLE || in->tuple_index < 0 ||
            in->tuple_index >= t->num_operands) {
          kiln_elemental_fail(f,
                              KILN_ERR_UNIMPLEMENTED("%s: tuple access in %s", in->name, c->name));
          goto done;
        }
        v = VAL(t->operands[in->tuple_index]);
        v_im = VAL_IM(t->operands[in->tuple_index]);
        break;
      }
      default: {
        if (!kiln_hlo_opcode_is_elementwise(in->opcode) && in->opcode != KILN_OP_COPY &&
            in->opcode != KILN_OP_MAP && in->opcode != KILN_OP_BITCAST_CONVERT) {
          kiln_elemental_fail(f, KILN_ERR_UNIMPLEMENTED("%s: %s in scalar computation %s", in->name,
                                                        kiln_hlo_opcode_name(in->opcode), c->name));
          goto done;
        }
        kiln_kir_value_t *ops[8];
        if (in->num_operands > 8) {
          kiln_elemental_fail(f, KILN_ERR_UNIMPLEMENTED("%s: too many operands", in->name));
          goto done;
        }
        bool cplx = kiln_elem_type_is_complex(in->shape->type);
        for (int k = 0; k < in->num_operands; k++) {
          ops[k] = VAL(in->operands[k]);
          if (VAL_IM(in->operands[k])) cplx = true;
        }
        if (cplx) {
          kiln_kir_value_t *cargs[8][2], *cout[2] = {NULL, NULL};
          int cnt[8];
          for (int k = 0; k < in->num_operands; k++) {
            cargs[k][0] = ops[k];
            cargs[k][1] = VAL_IM(in->operands[k]);
            cnt[k] = cargs[k][1] ? 2 : 1;
          }
          if (kiln_elemental_complex_op(f, in, cargs, cnt, in->num_operands, cout) < 1) goto done;
          v = cout[0];
          v_im = cout[1];
        } else {
          v = kiln_elemental_scalar_op(f, in, ops, in->num_operands);
        }
        break;
      }
    }
    if (!v) {
      if (!f->err) kiln_elemental_fail(f, kiln_kir_builder_take_status(B));
      if (!f->err) f->err = KILN_ERR_INTERNAL("%s: no value", in->name);
      goto done;
    }
    VAL(in) = v;
    VAL_IM(in) = v_im;
  }
  /* results flat as the arguments: (re, im) for a complex one */
  const kiln_hlo_instruction_t *single = which ? which : c->root;
  const kiln_hlo_instruction_t *const *roots = &single;
  int nroots = 1;
  if (!which && c->root->opcode == KILN_OP_TUPLE) {
    roots = (const kiln_hlo_instruction_t *const *)c->root->operands;
    nroots = c->root->num_operands;
  }
  result = 0;
  for (int k = 0; k < nroots; k++) {
    int cnt = VAL_IM(roots[k]) ? 2 : 1;
    if (result + cnt > KILN_ELEM_MAX_OUTPUTS) {
      kiln_elemental_fail(f, KILN_ERR_UNIMPLEMENTED("%s: too many results", c->name));
      goto done;
    }
    out[result++] = VAL(roots[k]);
    if (cnt == 2) out[result++] = VAL_IM(roots[k]);
  }
#undef VAL
#undef VAL_IM
done:
  kiln_ptrmap_free(&pos);
  kiln_ptrmap_free(&bmap);
  kiln_free(need);
  kiln_free(vals);
  kiln_free(po);
  return f->err ? -1 : result;
}

int kiln_elemental_emit_scalar_computation(kiln_elemental_fn_t *f, const kiln_hlo_computation_t *c,
                                           kiln_kir_value_t *const *args, int nargs,
                                           kiln_kir_value_t **out) {
  return emit_scalar(f, c, args, nargs, NULL, NULL, NULL, 0, out);
}

kiln_kir_value_t *kiln_elemental_emit_scalar_value(
    kiln_elemental_fn_t *f, const kiln_hlo_computation_t *c, kiln_kir_value_t *const *args,
    int nargs, const kiln_hlo_instruction_t *which, const kiln_hlo_instruction_t *const *bound,
    kiln_kir_value_t *const *bound_vals, int nbound) {
  kiln_kir_value_t *out[KILN_ELEM_MAX_OUTPUTS];
  int n = emit_scalar(f, c, args, nargs, which, bound, bound_vals, nbound, out);
  if (n == 1) return out[0];
  if (n > 1 && !f->err)
    kiln_elemental_fail(f,
                        KILN_ERR_UNIMPLEMENTED("%s: a complex value in %s", which->name, c->name));
  return NULL;
}
