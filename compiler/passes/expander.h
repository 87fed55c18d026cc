/* The driver shared by the expander passes (stochastic_convert_decomposer,
 * topk_decomposer): find every instruction a pass rewrites, in every computation, and
 * expand each one in place. */
#ifndef KILN_PASSES_EXPANDER_H_
#define KILN_PASSES_EXPANDER_H_

#include <stdbool.h>

#include "base/status.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/pass_util.h"

/* Whether the pass rewrites `in`. */
typedef bool (*kiln_expander_match_fn)(const kiln_hlo_instruction_t *in);
/* Replaces `in` by its expansion (appended to its computation; `effects` is for
 * kiln_pass_replace_instruction). */
typedef kiln_status (*kiln_expander_expand_fn)(kiln_hlo_instruction_t *in,
                                               kiln_pass_effects_t *effects);

/* Expands every matching instruction of every computation of `m` (the instructions are
 * collected first, so expansions are not revisited), then puts each changed computation
 * back into post order. `*changed` (may be NULL) is set when something was expanded; the
 * first failure stops the pass. */
kiln_status kiln_expander_run(kiln_hlo_module_t *m, kiln_expander_match_fn match,
                              kiln_expander_expand_fn expand, bool *changed);

#endif /* KILN_PASSES_EXPANDER_H_ */
