/* While-loop invariant constants (XLA's WhileLoopConstantSinking): when element i of a
 * while loop's initial tuple is a constant and the body passes element i through
 * unchanged (root operand i is get-tuple-element(param, index=i)), every
 * get-tuple-element(param, index=i) in the condition, and in the body except the root's
 * pass-through operand, is replaced by a copy of the constant. Later passes can then fold
 * and simplify with the value known.
 *
 * Only loops whose initial value is a `tuple` instruction, and whose body and condition
 * are called by this loop alone, are rewritten. */
#include <stdint.h>

#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

/* Replaces the uses of gte(param, index) in `c` (except by `keep_user`, the body's root
 * when it passes the element through) by a new constant. Returns true when it did. */
static bool sink_into(kiln_hlo_computation_t *c, int64_t index, const kiln_hlo_instruction_t *k,
                      kiln_hlo_instruction_t *keep_user, kiln_pass_effects_t *effects) {
  if (c->num_parameters != 1 || !c->parameters[0]) return false;
  kiln_hlo_instruction_t *param = c->parameters[0];
  bool changed = false;
  KILN_VEC(kiln_hlo_instruction_t *) gtes = {0};
  for (size_t u = 0; u < param->users.len; u++) {
    kiln_hlo_instruction_t *g = param->users.data[u];
    if (g->opcode == KILN_OP_GET_TUPLE_ELEMENT && g->tuple_index == index &&
        kiln_shape_compatible(g->shape, k->shape))
      kiln_vec_push(&gtes, g);
  }
  for (size_t gi = 0; gi < gtes.len; gi++) {
    kiln_hlo_instruction_t *g = gtes.data[gi];
    KILN_VEC(kiln_hlo_instruction_t *) users = {0};
    for (size_t u = 0; u < g->users.len; u++)
      if (g->users.data[u] != keep_user) kiln_vec_push(&users, g->users.data[u]);
    bool is_root = c->root == g;
    if (users.len || is_root) {
      kiln_hlo_instruction_t *kc = kiln_hlo_instruction_create(
          c, KILN_OP_CONSTANT, g->shape, kiln_hlo_module_unique_name(c->module, k->name));
      /* The literal shares the data but carries the new instruction's shape (a layout
       * of the state element may differ from the initial constant's). */
      kiln_literal_t *lit = kc ? kiln_arena_alloc(&c->module->arena, sizeof *lit) : NULL;
      if (kc && !lit) kiln_status_free(kiln_hlo_instruction_remove(kc));
      if (lit) {
        *lit = *k->literal;
        lit->shape = g->shape;
        kc->literal = lit;
        for (size_t u = 0; u < users.len; u++) kiln_pass_replace_operand(users.data[u], g, kc);
        if (is_root) c->root = kc;
        kiln_pass_remove_if_dead(g, effects);
        changed = true;
      }
    }
    kiln_vec_free(&users);
  }
  kiln_vec_free(&gtes);
  if (changed) kiln_hlo_computation_sort_post_order(c);
  return changed;
}

kiln_status kiln_pass_while_loop_constants(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                           bool *changed) {
  kiln_ptrmap_t callers;
  kiln_ptrmap_init(&callers);
  kiln_pass_count_callers(m, &callers);
  kiln_pass_effects_t effects;
  kiln_pass_effects_init(&effects);
  for (size_t ci = 0; ci < m->computations.len; ci++) {
    kiln_hlo_computation_t *c = m->computations.data[ci];
    for (size_t i = 0; i < c->instructions.len; i++) {
      kiln_hlo_instruction_t *w = c->instructions.data[i];
      if (w->opcode != KILN_OP_WHILE || w->num_operands != 1) continue;
      kiln_hlo_instruction_t *init = w->operands[0];
      kiln_hlo_computation_t *body = kiln_hlo_instruction_called(w, "body");
      kiln_hlo_computation_t *cond = kiln_hlo_instruction_called(w, "condition");
      if (init->opcode != KILN_OP_TUPLE || !body || !cond || body == cond) continue;
      if ((intptr_t)kiln_ptrmap_get(&callers, body) != 1 ||
          (intptr_t)kiln_ptrmap_get(&callers, cond) != 1)
        continue;
      kiln_hlo_instruction_t *root = body->root;
      if (!root || root->opcode != KILN_OP_TUPLE || root->num_operands != init->num_operands ||
          body->num_parameters != 1)
        continue;
      for (int e = 0; e < init->num_operands; e++) {
        const kiln_hlo_instruction_t *k = init->operands[e];
        if (k->opcode != KILN_OP_CONSTANT || !k->literal || k->literal->unknown) continue;
        const kiln_hlo_instruction_t *pass = root->operands[e];
        if (pass->opcode != KILN_OP_GET_TUPLE_ELEMENT || pass->tuple_index != e ||
            pass->operands[0] != body->parameters[0])
          continue;
        if (sink_into(body, e, k, root, &effects)) *changed = true;
        if (sink_into(cond, e, k, NULL, &effects)) *changed = true;
      }
    }
  }
  kiln_pass_effects_free(&effects);
  kiln_ptrmap_free(&callers);
  return NULL;
}
