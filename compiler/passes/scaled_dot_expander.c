/* scaled_dot_expander (XLA's ScaledDotRewriter): scaled-dot(lhs, rhs, lhs_scale, rhs_scale)
 * -> dequantize both operands, then a plain dot with the same dimension numbers:
 *
 *   t = wider of (operand type, scale type); bf16 when both are narrower than 16 bits;
 *       f32 when they differ but have the same width
 *   q = multiply(convert<t>(x), reshape(broadcast(convert<t>(scale))))
 *       the scale [s0, .., sn] broadcast to [s0, b0, .., sn, bn] (b = x dim / scale dim)
 *       and reshaped to x's dims, so element i of dimension k reads scale i / b_k
 *   scaled-dot = dot(q_lhs, q_rhs), <the scaled-dot's dimension numbers>
 *
 * A scalar scale leaves its operand as it is (not even converted), as XLA does. This is
 * what the reference evaluator computes (eval_extra.c): the product of two values of type t
 * is exact in the kernel's wider arithmetic and rounded once to t. The operand order is
 * (lhs, rhs, lhs_scale, rhs_scale); the order (lhs, lhs_scale, rhs, rhs_scale) of other
 * XLA versions is recognised by the shapes, like the evaluator does. Forms the evaluator
 * rejects (non-float operands, scales that do not divide their operands) are left alone. */
#include <string.h>

#include "compiler/passes/expander.h"
#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

/* Whether `scale` can scale `x` (scalar, or same rank with each dim dividing x's). */
static bool scale_fits(const kiln_shape_t *x, const kiln_shape_t *scale) {
  if (!kiln_shape_is_array(x) || !kiln_shape_is_array(scale)) return false;
  if (scale->rank == 0) return true;
  if (scale->rank != x->rank) return false;
  for (int i = 0; i < x->rank; i++)
    if (scale->dims[i] <= 0 ? x->dims[i] != 0 : x->dims[i] % scale->dims[i] != 0) return false;
  return true;
}

/* The operands in (lhs, rhs, lhs_scale, rhs_scale) order; false when neither order fits. */
static bool operand_order(const kiln_hlo_instruction_t *in, kiln_hlo_instruction_t **ops) {
  kiln_hlo_instruction_t *const *o = in->operands;
  if (scale_fits(o[0]->shape, o[2]->shape) && scale_fits(o[1]->shape, o[3]->shape)) {
    ops[0] = o[0], ops[1] = o[1], ops[2] = o[2], ops[3] = o[3];
    return true;
  }
  if (scale_fits(o[0]->shape, o[1]->shape) && scale_fits(o[2]->shape, o[3]->shape)) {
    ops[0] = o[0], ops[1] = o[2], ops[2] = o[1], ops[3] = o[3];
    return true;
  }
  return false;
}

static bool expandable(const kiln_hlo_instruction_t *in) {
  if (in->opcode != KILN_OP_SCALED_DOT || in->num_operands != 4) return false;
  if (in->num_control_predecessors || in->control_successors.len) return false;
  if (!kiln_shape_is_array(in->shape) || kiln_shape_is_dynamic(in->shape)) return false;
  for (int i = 0; i < 4; i++) {
    const kiln_shape_t *s = in->operands[i]->shape;
    if (!kiln_shape_is_array(s) || kiln_shape_is_dynamic(s) || s->rank > 32 ||
        !kiln_elem_type_is_float(s->type))
      return false;
  }
  const kiln_dot_dnums_t *dn = &in->dot_dnums;
  if (dn->lhs_batch.n != dn->rhs_batch.n || dn->lhs_contracting.n != dn->rhs_contracting.n)
    return false;
  kiln_hlo_instruction_t *ops[4];
  return operand_order(in, ops);
}

/* ScaledDotRewriter's choice of the type both operand and scale are converted to. */
static kiln_elem_type_t target_type(kiln_elem_type_t a, kiln_elem_type_t b) {
  int wa = kiln_elem_type_bits(a), wb = kiln_elem_type_bits(b);
  if (wa < 16 && wb < 16) return KILN_BF16;
  if (a == b) return a;
  if (wa == wb) return KILN_F32;
  return wa > wb ? a : b;
}

/* x * (scale broadcast over blocks), in the target type; x itself for a scalar scale. */
static kiln_hlo_instruction_t *dequantize(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                          kiln_hlo_instruction_t *scale) {
  const kiln_shape_t *xs = x->shape, *ss = scale->shape;
  if (ss->rank == 0) return x;
  kiln_elem_type_t t = target_type(xs->type, ss->type);
  kiln_hlo_instruction_t *xq = kiln_builder_convert(b, x, t);
  kiln_hlo_instruction_t *sq = kiln_builder_convert(b, scale, t);
  int64_t dims[64], map[32];
  for (int k = 0; k < ss->rank; k++) {
    dims[2 * k] = ss->dims[k];
    dims[2 * k + 1] = ss->dims[k] ? xs->dims[k] / ss->dims[k] : 0;
    map[k] = 2 * k;
  }
  kiln_hlo_instruction_t *blocks = kiln_builder_broadcast(b, sq, 2 * ss->rank, dims, map);
  kiln_hlo_instruction_t *full = kiln_builder_reshape(b, blocks, xs->rank, xs->dims);
  return kiln_builder_binary(b, KILN_OP_MULTIPLY, xq, full);
}

static kiln_i64_list_t copy_list(kiln_hlo_module_t *m, kiln_i64_list_t l, bool *ok) {
  kiln_i64_list_t r = {0, NULL};
  if (!l.n) return r;
  r.v = kiln_arena_alloc(&m->arena, sizeof(int64_t) * (size_t)l.n);
  if (!r.v) {
    *ok = false;
    return r;
  }
  memcpy(r.v, l.v, sizeof(int64_t) * (size_t)l.n);
  r.n = l.n;
  return r;
}

static kiln_status expand(kiln_hlo_instruction_t *in, kiln_pass_effects_t *effects) {
  kiln_hlo_module_t *m = in->parent->module;
  kiln_builder_t b;
  kiln_builder_init(&b, in->parent, in->name, in->shape->has_layout);
  kiln_hlo_instruction_t *ops[4];
  operand_order(in, ops);
  kiln_hlo_instruction_t *q[2] = {dequantize(&b, ops[0], ops[2]), dequantize(&b, ops[1], ops[3])};
  kiln_hlo_instruction_t *dot = kiln_builder_op(&b, KILN_OP_DOT, in->shape, 2, q);
  bool ok = dot && !b.failed;
  if (ok) {
    dot->has_dot_dnums = true;
    dot->dot_dnums.lhs_batch = copy_list(m, in->dot_dnums.lhs_batch, &ok);
    dot->dot_dnums.rhs_batch = copy_list(m, in->dot_dnums.rhs_batch, &ok);
    dot->dot_dnums.lhs_contracting = copy_list(m, in->dot_dnums.lhs_contracting, &ok);
    dot->dot_dnums.rhs_contracting = copy_list(m, in->dot_dnums.rhs_contracting, &ok);
  }
  if (!ok)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "scaled_dot_expander: out of memory expanding '%s'",
                            in->name);
  kiln_pass_replace_instruction(in, dot, effects);
  return NULL;
}

kiln_status kiln_pass_scaled_dot_expander(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                          bool *changed) {
  return kiln_expander_run(m, expandable, expand, changed);
}
