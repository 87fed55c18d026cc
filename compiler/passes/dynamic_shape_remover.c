/* dynamic_shape_remover: the two dynamic-shape ops whose data the compiler can take as
 * static, rewritten the way the reference evaluator computes them (eval.c, eval_data.c),
 * which treats every dynamic dimension as its bound:
 *
 *   set-dimension-size(x, size), dimensions={d}  -> x
 *       the evaluator relabels x's data with the result shape (same bounds), so the size
 *       only changes the shape's dynamic marker, not a value
 *   dynamic-reshape(x, sizes...)                   -> reshape(x) to the result's bounds
 *       the evaluator runs it as that reshape (and refuses sizes below the bounds, which
 *       kiln does not model: after this pass such sizes are ignored)
 *
 * Forms the evaluator rejects (result bounds that differ from x's dims for
 * set-dimension-size, element counts or types that differ for dynamic-reshape, a missing
 * size operand) are left as they are. */
#include <string.h>

#include "compiler/passes/expander.h"
#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

static bool removable(const kiln_hlo_instruction_t *in) {
  if (in->opcode != KILN_OP_SET_DIMENSION_SIZE && in->opcode != KILN_OP_DYNAMIC_RESHAPE) return false;
  if (in->num_control_predecessors || in->control_successors.len || in->num_operands < 1) return false;
  const kiln_shape_t *xs = in->operands[0]->shape, *rs = in->shape;
  if (!kiln_shape_is_array(xs) || !kiln_shape_is_array(rs) || xs->type != rs->type) return false;
  if (in->opcode == KILN_OP_SET_DIMENSION_SIZE)
    return in->num_operands == 2 && kiln_shape_compatible(xs, rs);
  return in->num_operands == rs->rank + 1 && !kiln_shape_is_dynamic(xs) &&
         kiln_shape_num_elements(xs) == kiln_shape_num_elements(rs);
}

static kiln_status remove_dynamic(kiln_hlo_instruction_t *in, kiln_pass_effects_t *effects) {
  kiln_hlo_instruction_t *x = in->operands[0];
  if (in->opcode == KILN_OP_SET_DIMENSION_SIZE) {
    kiln_pass_replace_instruction(in, x, effects);
    return NULL;
  }
  kiln_builder_t b;
  kiln_builder_init(&b, in->parent, in->name, in->shape->has_layout);
  kiln_hlo_instruction_t *r = kiln_builder_reshape(&b, x, in->shape->rank, in->shape->dims);
  kiln_shape_t *s = r ? kiln_shape_clone(&in->parent->module->arena, in->shape) : NULL;
  if (!s || b.failed)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "dynamic_shape_remover: out of memory rewriting '%s'",
                            in->name);
  s->dynamic = NULL; /* the bounds, static; the layout kept */
  r->shape = s;
  kiln_pass_replace_instruction(in, r, effects);
  return NULL;
}

kiln_status kiln_pass_dynamic_shape_remover(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                            bool *changed) {
  return kiln_expander_run(m, removable, remove_dynamic, changed);
}
