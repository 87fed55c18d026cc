/* Tuple simplification:
 *   get-tuple-element(tuple(a0, a1, ...), index=i)          -> ai
 *   tuple(gte(t, 0), gte(t, 1), ..., gte(t, n-1)) with n = |t| -> t
 * Both only when the replacement has the instruction's exact shape (layouts included).
 * Instructions with control dependencies are left alone. */
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

static kiln_hlo_instruction_t *simplify_one(kiln_hlo_instruction_t *in) {
  if (in->num_control_predecessors || in->control_successors.len || !in->shape) return NULL;
  if (in->opcode == KILN_OP_GET_TUPLE_ELEMENT && in->num_operands == 1) {
    kiln_hlo_instruction_t *t = in->operands[0];
    if (t->opcode != KILN_OP_TUPLE || in->tuple_index < 0 || in->tuple_index >= t->num_operands)
      return NULL;
    kiln_hlo_instruction_t *e = t->operands[in->tuple_index];
    return e->shape && kiln_pass_same_shape(e->shape, in->shape) ? e : NULL;
  }
  if (in->opcode == KILN_OP_TUPLE && in->num_operands > 0) {
    kiln_hlo_instruction_t *src = NULL;
    for (int i = 0; i < in->num_operands; i++) {
      kiln_hlo_instruction_t *g = in->operands[i];
      if (g->opcode != KILN_OP_GET_TUPLE_ELEMENT || g->tuple_index != i || g->num_operands != 1)
        return NULL;
      if (src && g->operands[0] != src) return NULL;
      src = g->operands[0];
    }
    if (!src->shape || !kiln_shape_is_tuple(src->shape) ||
        src->shape->num_elements != in->num_operands || !kiln_pass_same_shape(src->shape, in->shape))
      return NULL;
    return src;
  }
  return NULL;
}

kiln_status kiln_pass_tuple_simplify(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                     bool *changed) {
  kiln_pass_effects_t effects;
  kiln_pass_effects_init(&effects);
  for (size_t ci = 0; ci < m->computations.len; ci++) {
    kiln_hlo_computation_t *c = m->computations.data[ci];
    /* Both rewrites need a tuple instruction here (the first reads one). */
    if (!kiln_pass_count_opcode(c, KILN_OP_TUPLE, 1)) continue;
    size_t n = 0;
    kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(c, &n);
    bool comp_changed = false;
    for (size_t i = 0; i < n; i++) {
      kiln_hlo_instruction_t *r = simplify_one(order[i]);
      if (!r) continue;
      kiln_pass_replace_instruction(order[i], r, &effects);
      comp_changed = true;
    }
    kiln_free(order);
    if (comp_changed) *changed = true;
  }
  kiln_pass_effects_free(&effects);
  return NULL;
}
