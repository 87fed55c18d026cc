/* collective_simplifier (XLA's AllReduceSimplifier and the degenerate-group cases of its
 * collective simplifications): a collective whose every group holds one participant
 * (replica_groups={{0},{1},...} or [8,1]<=[8], in a mode where those ids are whole
 * participants: kiln_coll_single_participant) computes nothing: all-reduce, reduce-scatter
 * and all-gather over one participant return their operand, all-to-all and
 * collective-broadcast too. Each becomes its operand (a tuple of its operands when variadic).
 * Collectives with control edges, `{}` groups (the world's size) and shapes that differ from
 * the operand's (layouts included) stay. Before the first removal the module's world is
 * written down (kiln_coll_pin_world) so that the remaining collectives, replica-id and
 * partition-id still run on as many participants as before. */
#include "compiler/passes/collective_util.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

static bool removable_opcode(kiln_hlo_opcode_t op) {
  switch (op) {
    case KILN_OP_ALL_REDUCE:
    case KILN_OP_ALL_GATHER:
    case KILN_OP_REDUCE_SCATTER:
    case KILN_OP_ALL_TO_ALL:
    case KILN_OP_COLLECTIVE_BROADCAST:
      return true;
    default:
      return false;
  }
}

/* What `in` becomes (NULL: it stays). */
static kiln_hlo_instruction_t *replacement(kiln_hlo_module_t *m, kiln_hlo_instruction_t *in) {
  if (!removable_opcode(in->opcode) || !in->shape || in->num_operands < 1 ||
      kiln_coll_has_control_edges(in) || !kiln_coll_single_participant(m, in))
    return NULL;
  if (!kiln_shape_is_tuple(in->shape)) {
    if (in->num_operands != 1 || !in->operands[0]->shape ||
        !kiln_pass_same_shape(in->operands[0]->shape, in->shape))
      return NULL;
    return in->operands[0];
  }
  if (in->shape->num_elements != in->num_operands) return NULL;
  for (int i = 0; i < in->num_operands; i++)
    if (!in->operands[i]->shape ||
        !kiln_pass_same_shape(in->operands[i]->shape, in->shape->elements[i]))
      return NULL;
  kiln_hlo_instruction_t *t =
      kiln_hlo_instruction_create(in->parent, KILN_OP_TUPLE, kiln_shape_clone(&m->arena, in->shape),
                                  kiln_hlo_module_unique_name(m, "tuple"));
  kiln_hlo_instruction_set_operands(t, in->num_operands, in->operands);
  return t;
}

typedef struct {
  kiln_hlo_module_t *m;
  bool pinned; /* kiln_coll_pin_world done */
} simplify_ctx_t;

static kiln_status simplify_one(void *ctx, kiln_hlo_instruction_t *in, bool *replaced) {
  simplify_ctx_t *x = ctx;
  if (!removable_opcode(in->opcode) || kiln_coll_has_control_edges(in) ||
      !kiln_coll_single_participant(x->m, in))
    return KILN_STATUS_OK;
  if (!x->pinned) {
    KILN_RETURN_IF_ERROR_PLAIN(kiln_coll_pin_world(x->m));
    x->pinned = true;
  }
  kiln_hlo_instruction_t *r = replacement(x->m, in);
  if (!r) return KILN_STATUS_OK;
  kiln_hlo_instruction_replace_all_uses(in, r);
  *replaced = true;
  return kiln_hlo_instruction_remove(in);
}

kiln_status kiln_pass_collective_simplifier(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                            bool *changed) {
  (void)opts;
  simplify_ctx_t x = {m, false};
  return kiln_coll_rewrite_each(m, removable_opcode, simplify_one, &x, changed);
}
