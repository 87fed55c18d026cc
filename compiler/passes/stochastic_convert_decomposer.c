/* stochastic_convert_decomposer (XLA's StochasticConvertDecomposer): stochastic-convert(x,
 * r) -> elementwise HLO, so the loop emitter compiles it like any other fusion.
 *
 * stochastic-convert rounds float x to a signed integer, up or down at random: |x| is
 * truncated to t and rounded up when r < frac(|x|) * 2^bits(r); then the sign is applied.
 * NaN gives 0; x at or beyond the result type's range saturates (the range bounds compared
 * in f32 for operands narrower than f64, as XLA does); rounding up past the maximum gives
 * the minimum (XLA's wrap). The expansion computes exactly what the reference evaluator
 * computes (eval_elementwise.c), in f64 (exact for every float operand type: |x| < 2^63
 * and the products are powers of two apart) with the random bits compared as u64:
 *
 *   v = convert<f64>(x); a = abs(v); t = floor(a)
 *   up = convert<u64>(r) < convert<u64>((a - t) * 2^bits)
 *   t' = select(up, t + 1, t); i = convert<T>(t')
 *   res = select(v < 0, -i, i); res = select(t' > max, min, res)
 *   res = select(v <= min', min, res); res = select(v >= max', max, res)
 *   res = select(v != v, 0, res)
 *
 * Forms the evaluator rejects (operand not float, random bits not unsigned of the same
 * width, result not a signed integer) are left as they are. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "compiler/passes/expander.h"
#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

static bool decomposable(const kiln_hlo_instruction_t *in) {
  if (in->opcode != KILN_OP_STOCHASTIC_CONVERT || in->num_operands != 2) return false;
  if (in->num_control_predecessors || in->control_successors.len) return false;
  const kiln_shape_t *x = in->operands[0]->shape, *r = in->operands[1]->shape, *o = in->shape;
  if (!kiln_shape_is_array(x) || !kiln_shape_is_array(r) || !kiln_shape_is_array(o)) return false;
  if (kiln_shape_is_dynamic(o) || kiln_shape_num_elements(x) != kiln_shape_num_elements(o))
    return false;
  return kiln_elem_type_is_float(x->type) && kiln_elem_type_is_unsigned_int(r->type) &&
         kiln_elem_type_bits(r->type) == kiln_elem_type_bits(x->type) &&
         kiln_elem_type_is_signed_int(o->type) && kiln_elem_type_bits(o->type) <= 64;
}

/* A broadcast of an f64 constant to the dims of `like`. */
static kiln_hlo_instruction_t *splat_f64(kiln_builder_t *b, double v,
                                         const kiln_hlo_instruction_t *like) {
  return kiln_builder_splat(b, kiln_builder_const_f64(b, KILN_F64, v), like);
}

static kiln_hlo_instruction_t *splat_int(kiln_builder_t *b, kiln_elem_type_t t, int64_t v,
                                         const kiln_hlo_instruction_t *like) {
  return kiln_builder_splat(b, kiln_builder_const_u64(b, t, (uint64_t)v), like);
}

static kiln_status decompose(kiln_hlo_instruction_t *in, kiln_pass_effects_t *effects) {
  kiln_builder_t b;
  kiln_builder_init(&b, in->parent, in->name, in->shape->has_layout);
  kiln_hlo_instruction_t *x = in->operands[0], *r = in->operands[1];
  kiln_elem_type_t ft = x->shape->type, ot = in->shape->type;
  int rbits = kiln_elem_type_bits(r->shape->type), obits = kiln_elem_type_bits(ot);
  int64_t mx = (int64_t)((obits >= 64 ? UINT64_MAX : ((UINT64_C(1) << obits) - 1)) >> 1);
  int64_t mn = -mx - 1;
  bool narrow = ft != KILN_F64;
  double dmx = narrow ? (double)(float)mx : (double)mx,
         dmn = narrow ? (double)(float)mn : (double)mn;

  kiln_hlo_instruction_t *v = kiln_builder_convert(&b, x, KILN_F64);
  kiln_hlo_instruction_t *a = kiln_builder_unary(&b, KILN_OP_ABS, v);
  kiln_hlo_instruction_t *t = kiln_builder_unary(&b, KILN_OP_FLOOR, a);
  kiln_hlo_instruction_t *frac = kiln_builder_binary(&b, KILN_OP_SUBTRACT, a, t);
  kiln_hlo_instruction_t *scaled =
      kiln_builder_binary(&b, KILN_OP_MULTIPLY, frac, splat_f64(&b, ldexp(1.0, rbits), v));
  kiln_hlo_instruction_t *fixed = kiln_builder_convert(&b, scaled, KILN_U64);
  kiln_hlo_instruction_t *r64 = kiln_builder_convert(&b, r, KILN_U64);
  kiln_hlo_instruction_t *up = kiln_builder_compare(&b, KILN_CMP_LT, r64, fixed);
  kiln_hlo_instruction_t *t1 = kiln_builder_binary(&b, KILN_OP_ADD, t, splat_f64(&b, 1.0, v));
  kiln_hlo_instruction_t *tr = kiln_builder_select(&b, up, t1, t);
  kiln_hlo_instruction_t *ti = kiln_builder_convert(&b, tr, ot);
  kiln_hlo_instruction_t *neg = kiln_builder_compare(&b, KILN_CMP_LT, v, splat_f64(&b, 0.0, v));
  kiln_hlo_instruction_t *res =
      kiln_builder_select(&b, neg, kiln_builder_unary(&b, KILN_OP_NEGATE, ti), ti);
  kiln_hlo_instruction_t *mins = splat_int(&b, ot, mn, ti), *maxs = splat_int(&b, ot, mx, ti);
  kiln_hlo_instruction_t *wrapped =
      kiln_builder_compare(&b, KILN_CMP_GT, tr, splat_f64(&b, (double)mx, v));
  res = kiln_builder_select(&b, wrapped, mins, res);
  res = kiln_builder_select(&b, kiln_builder_compare(&b, KILN_CMP_LE, v, splat_f64(&b, dmn, v)),
                            mins, res);
  res = kiln_builder_select(&b, kiln_builder_compare(&b, KILN_CMP_GE, v, splat_f64(&b, dmx, v)),
                            maxs, res);
  kiln_hlo_instruction_t *nan = kiln_builder_compare(&b, KILN_CMP_NE, v, v);
  res = kiln_builder_select(&b, nan, splat_int(&b, ot, 0, ti), res);
  if (!res || b.failed)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                            "stochastic_convert_decomposer: out of memory expanding '%s'",
                            in->name);
  res->shape = in->shape; /* the result's shape, layout included, exactly */
  kiln_pass_replace_instruction(in, res, effects);
  return NULL;
}

kiln_status kiln_pass_stochastic_convert_decomposer(kiln_hlo_module_t *m,
                                                    const kiln_pass_options_t *opts,
                                                    bool *changed) {
  return kiln_expander_run(m, decomposable, decompose, changed);
}
