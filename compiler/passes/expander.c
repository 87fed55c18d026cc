/* The expander passes' driver; see expander.h. */
#include "compiler/passes/expander.h"

#include "base/vec.h"

kiln_status kiln_expander_run(kiln_hlo_module_t *m, kiln_expander_match_fn match,
                              kiln_expander_expand_fn expand, bool *changed) {
  kiln_pass_effects_t effects;
  kiln_pass_effects_init(&effects);
  kiln_status st = NULL;
  KILN_VEC(kiln_hlo_instruction_t *) worklist = {0};
  /* Expansions may add computations (comparators): the bound is re-read every round. */
  for (size_t ci = 0; ci < m->computations.len && !st; ci++) {
    kiln_hlo_computation_t *c = m->computations.data[ci];
    kiln_vec_clear(&worklist);
    for (size_t i = 0; i < c->instructions.len; i++)
      if (match(c->instructions.data[i])) kiln_vec_push(&worklist, c->instructions.data[i]);
    for (size_t i = 0; i < worklist.len && !st; i++) st = expand(worklist.data[i], &effects);
    if (worklist.len) {
      kiln_hlo_computation_sort_post_order(c);
      if (changed) *changed = true;
    }
  }
  kiln_vec_free(&worklist);
  kiln_pass_effects_free(&effects);
  return st;
}
