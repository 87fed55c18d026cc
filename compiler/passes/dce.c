/* Dead code elimination: removes instructions whose value nobody uses and whose removal
 * cannot be observed, then computations the entry no longer reaches.
 *
 * Kept: roots, parameters (they are the computation's signature), and instructions with a
 * side effect, their own or through what they call (see pass_util.h: infeed/outfeed,
 * send/recv, rng, collectives, async pairs, custom-calls with
 * custom_call_has_side_effect=true, while loops whose body has one). A dead instruction
 * with control successors is removed and its successors inherit its control
 * predecessors. */
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

/* Whether `c` holds an instruction nothing uses besides its root and parameters. Every chain
 * of dead instructions ends in one (the graph has no cycles), so without one nothing is dead;
 * checking costs one read of each instruction's opcode and user count, where the sweep below
 * walks the post order (operands, users and a hash map keyed by instruction) — and after the
 * first run of a fixed-point group nearly every computation has nothing dead. */
static bool has_unused(const kiln_hlo_computation_t *c) {
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    if (in && !in->users.len && in != c->root && in->opcode != KILN_OP_PARAMETER) return true;
  }
  return false;
}

/* Marks the dead instructions of `c` (users come before operands in reverse post order,
 * so one sweep sees every chain) and removes them in one go. */
static int dce_computation(kiln_hlo_computation_t *c, kiln_pass_effects_t *effects) {
  if (!has_unused(c)) return 0;
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(c, &n);
  kiln_ptrmap_t dead;
  kiln_ptrmap_init(&dead);
  for (size_t i = n; i-- > 0;) {
    kiln_hlo_instruction_t *in = order[i];
    if (in == c->root || in->opcode == KILN_OP_PARAMETER) continue;
    bool used = false;
    for (size_t u = 0; u < in->users.len && !used; u++)
      used = !kiln_ptrmap_contains(&dead, in->users.data[u]);
    if (used || kiln_pass_effects_instruction(effects, in)) continue;
    kiln_ptrmap_put(&dead, in, (void *)1);
  }
  int removed = (int)dead.len;
  kiln_pass_remove_instructions(c, &dead);
  kiln_ptrmap_free(&dead);
  kiln_free(order);
  return removed;
}

kiln_status kiln_pass_dce(kiln_hlo_module_t *m, const kiln_pass_options_t *opts, bool *changed) {
  kiln_pass_effects_t effects;
  kiln_pass_effects_init(&effects);
  for (size_t ci = 0; ci < m->computations.len; ci++)
    if (dce_computation(m->computations.data[ci], &effects)) *changed = true;
  kiln_pass_effects_free(&effects);
  if (kiln_pass_remove_unreachable_computations(m)) *changed = true;
  return NULL;
}
