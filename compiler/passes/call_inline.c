/* Two inlining passes over one body copier.
 *
 * call_inline: every `call` instruction is replaced by a copy of its callee's body in the
 * caller (parameters become the call's operands, uses of the call become uses of the
 * copied root). Each call site gets its own copy, so a computation called from several
 * places is inlined at each. Callees are processed before callers, so nested calls
 * disappear in one run. Computations nothing calls any more are removed afterwards.
 *
 * async-start / async-done pairs (with any async-update between) are inlined the same way:
 * the body where the start was, uses of the done become uses of its root (kiln runs async
 * computations synchronously at their start).
 *
 * Left alone: calls with control dependencies, calls to computations on another execution
 * thread (trailing `execution_thread=...`), and calls whose callee is malformed (a
 * parameter number out of range).
 *
 * fusion_inline: a fusion inside a computation that runs as scalar or elemental code rather
 * than as a sequence of kernels (a sort comparator, a reducer, a map / scatter / select
 * computation, a fused computation) is replaced by its fused computation's instructions, the
 * same way. XLA's after_optimizations dumps hold such fusions (e.g. in sort comparators);
 * codegen then sees plain scalar code. Fusions at the top level of the sequential
 * computations (the entry, while bodies and conditions, conditional branches, call and
 * async targets) are kernels and stay.
 *
 * fusion_unfuse: a top-level multi-output fusion whose outputs cannot be one kernel
 * (`kiln_fusion_outputs_fit_one_kernel`: a reduce the loop emitter computes elementally beside
 * a side output of the reduce's input shape, as a hand-written or other compiler's kInput
 * fusion may hold), or a fusion whose scatter or sort is not at its root
 * (`kiln_fusion_hero_off_root`: a scatter fusion given with a result layout other than its
 * operand's, where layout assignment put a copy after the scatter), is inlined the same way,
 * each get-tuple-element of it becoming the root's operand; priority and multi-output fusion
 * then fuse its instructions as they fuse kiln's own. Runs after layout normalization (which
 * may turn a side output or that copy into a transpose). */
#include <string.h>

#include "compiler/passes/fusion_util.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

static bool inlinable(const kiln_hlo_instruction_t *call, const kiln_hlo_computation_t *callee) {
  if (!callee || callee == call->parent || !callee->root) return false;
  if (call->num_control_predecessors || call->control_successors.len) return false;
  if (callee->trailing_attrs && strstr(callee->trailing_attrs, "execution_thread")) return false;
  if (callee->num_parameters != call->num_operands) return false;
  for (size_t i = 0; i < callee->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = callee->instructions.data[i];
    if (in->opcode == KILN_OP_PARAMETER &&
        (in->parameter_number < 0 || in->parameter_number >= call->num_operands))
      return false;
  }
  return true;
}

/* Each get-tuple-element user of `site` uses the element of the inlined tuple `root` instead
 * (users of the whole tuple keep it). */
static void fold_elements(kiln_hlo_instruction_t *site, kiln_hlo_instruction_t *root) {
  if (root->opcode != KILN_OP_TUPLE) return;
  for (size_t u = site->users.len; u-- > 0;) {
    kiln_hlo_instruction_t *gte = site->users.data[u];
    if (gte->opcode != KILN_OP_GET_TUPLE_ELEMENT || gte->tuple_index < 0 ||
        gte->tuple_index >= root->num_operands || gte->num_control_predecessors ||
        gte->control_successors.len)
      continue;
    kiln_hlo_instruction_replace_all_uses(gte, root->operands[gte->tuple_index]);
    kiln_status_free(kiln_hlo_instruction_remove(gte));
  }
}

/* Which sites an inlining pass takes (NULL: every inlinable one). */
typedef bool (*site_pick_fn)(const kiln_hlo_instruction_t *site,
                             const kiln_hlo_computation_t *callee);

/* Inlines every `opcode` instruction of `c` (its callee under `key`) that `pick` takes; true
 * when one was. The instruction itself goes even when its callee has side effects: those now
 * live in the copied body. With `fold`, its get-tuple-elements fold into the copied tuple. */
static bool inline_sites(kiln_hlo_computation_t *c, kiln_hlo_opcode_t opcode, const char *key,
                         site_pick_fn pick, bool fold) {
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(c, &n);
  bool changed = false;
  for (size_t i = 0; i < n; i++) {
    kiln_hlo_instruction_t *site = order[i];
    if (site->opcode != opcode) continue;
    kiln_hlo_computation_t *callee = kiln_hlo_instruction_called(site, key);
    if (!inlinable(site, callee) || (pick && !pick(site, callee))) continue;
    kiln_hlo_instruction_t *root = kiln_pass_copy_body(c, callee, site->operands);
    if (!root) continue;
    if (fold) fold_elements(site, root);
    kiln_hlo_instruction_replace_all_uses(site, root);
    kiln_status_free(kiln_hlo_instruction_remove(site));
    if (fold && !root->users.len && root != c->root)
      kiln_status_free(kiln_hlo_instruction_remove(root));
    changed = true;
  }
  kiln_free(order);
  if (changed) kiln_hlo_computation_sort_post_order(c);
  return changed;
}

/* The async-done ending the chain start -> update* -> done, when each link has that one
 * user; NULL otherwise. */
static kiln_hlo_instruction_t *async_done_of(kiln_hlo_instruction_t *start) {
  kiln_hlo_instruction_t *x = start;
  while (x->users.len == 1 && !x->control_successors.len) {
    kiln_hlo_instruction_t *u = x->users.data[0];
    if (u->opcode == KILN_OP_ASYNC_DONE) return u->control_successors.len ? NULL : u;
    if (u->opcode != KILN_OP_ASYNC_UPDATE) return NULL;
    x = u;
  }
  return NULL;
}

/* Inlines every async-start / async-done pair of `c` whose computation is inlinable: the
 * body runs where the start was (kiln runs async computations synchronously at their start),
 * uses of the done become uses of the copied root. */
static bool inline_async_sites(kiln_hlo_computation_t *c) {
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(c, &n);
  bool changed = false;
  for (size_t i = 0; i < n; i++) {
    kiln_hlo_instruction_t *site = order[i];
    if (site->opcode != KILN_OP_ASYNC_START) continue;
    kiln_hlo_computation_t *callee = kiln_hlo_instruction_called(site, "calls");
    kiln_hlo_instruction_t *done = async_done_of(site);
    if (!done || !inlinable(site, callee)) continue;
    kiln_hlo_instruction_t *root = kiln_pass_copy_body(c, callee, site->operands);
    if (!root) continue;
    kiln_hlo_instruction_replace_all_uses(done, root);
    /* done, the updates, then the start: each loses its only user in turn. */
    for (kiln_hlo_instruction_t *x = done; x != site;) {
      kiln_hlo_instruction_t *prev = x->operands[0];
      kiln_status_free(kiln_hlo_instruction_remove(x));
      x = prev;
    }
    kiln_status_free(kiln_hlo_instruction_remove(site));
    changed = true;
  }
  kiln_free(order);
  if (changed) kiln_hlo_computation_sort_post_order(c);
  return changed;
}

static void finish(kiln_hlo_module_t *m, bool any, bool *changed) {
  if (!any) return;
  kiln_pass_remove_unreachable_computations(m);
  *changed = true;
}

/* Which call sites `c` holds: bit 1 an async-start, bit 2 a call. One read of each
 * instruction's opcode (the instruction list is contiguous), so that the computations without
 * call sites, nearly all of them, cost no post order (a walk through operands, users and a
 * hash map keyed by instruction, which misses the caches once the module outgrows them). */
enum { HAS_ASYNC_START = 1, HAS_CALL = 2 };
static unsigned call_sites_of(const kiln_hlo_computation_t *c) {
  unsigned found = 0;
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    if (!in) continue;
    if (in->opcode == KILN_OP_ASYNC_START)
      found |= HAS_ASYNC_START;
    else if (in->opcode == KILN_OP_CALL)
      found |= HAS_CALL;
  }
  return found;
}

kiln_status kiln_pass_call_inline(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                  bool *changed) {
  /* A module without call sites (most modules; the pipeline's second run finds none when the
   * first inlined them all) is left after one scan of its instruction lists. */
  bool any_site = false;
  for (size_t ci = 0; ci < m->computations.len && !any_site; ci++)
    any_site = call_sites_of(m->computations.data[ci]) != 0;
  if (!any_site) return NULL;
  size_t nc = 0;
  kiln_hlo_computation_t **comps = kiln_hlo_module_computation_post_order(m, &nc);
  bool any = false;
  for (size_t ci = 0; ci < nc; ci++) {
    unsigned sites = call_sites_of(comps[ci]);
    bool inlined = (sites & HAS_ASYNC_START) && inline_async_sites(comps[ci]);
    /* An inlined async body may have brought calls in. */
    if (inlined || (sites & HAS_CALL))
      inlined |= inline_sites(comps[ci], KILN_OP_CALL, "to_apply", NULL, false);
    any |= inlined;
  }
  kiln_free(comps);
  finish(m, any, changed);
  return NULL;
}

/* Marks `c` and the sequential computations it reaches through control flow. */
static void mark_sequential(const kiln_hlo_computation_t *c, kiln_ptrmap_t *seq) {
  if (!c || kiln_ptrmap_get(seq, c)) return;
  kiln_ptrmap_put(seq, c, (void *)c);
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    bool control = in->opcode == KILN_OP_WHILE || in->opcode == KILN_OP_CONDITIONAL ||
                   in->opcode == KILN_OP_CALL || in->opcode == KILN_OP_ASYNC_START;
    for (int g = 0; control && g < in->num_called_groups; g++)
      for (int k = 0; k < in->called_groups[g].n; k++)
        mark_sequential(in->called_groups[g].comps[k], seq);
  }
}

/* Inlines the fusions `pick` takes in the sequential computations (`sequential`) or in the
 * others (scalar and fused ones, repeated until none is left: an inlined body may hold
 * fusions of its own). */
static kiln_status inline_fusions(kiln_hlo_module_t *m, bool sequential, site_pick_fn pick,
                                  bool *changed) {
  kiln_ptrmap_t seq;
  kiln_ptrmap_init(&seq);
  mark_sequential(m->entry, &seq);
  size_t nc = 0;
  kiln_hlo_computation_t **comps = kiln_hlo_module_computation_post_order(m, &nc);
  bool any = false;
  for (size_t ci = 0; ci < nc; ci++) {
    if ((kiln_ptrmap_get(&seq, comps[ci]) != NULL) != sequential) continue;
    if (sequential)
      any |= inline_sites(comps[ci], KILN_OP_FUSION, "calls", pick, true);
    else
      while (inline_sites(comps[ci], KILN_OP_FUSION, "calls", pick, false)) any = true;
  }
  kiln_free(comps);
  kiln_ptrmap_free(&seq);
  finish(m, any, changed);
  return NULL;
}

kiln_status kiln_pass_fusion_inline(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                    bool *changed) {
  (void)opts;
  return inline_fusions(m, false, NULL, changed);
}

/* A multi-output fusion whose outputs no one kernel can hold, or a fusion whose scatter or
 * sort is not at its root. */
static bool no_one_kernel(const kiln_hlo_instruction_t *site,
                          const kiln_hlo_computation_t *callee) {
  return (callee->root->opcode == KILN_OP_TUPLE && !kiln_fusion_outputs_fit_one_kernel(site)) ||
         kiln_fusion_hero_off_root(site);
}

kiln_status kiln_pass_fusion_unfuse(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                    bool *changed) {
  (void)opts;
  return inline_fusions(m, true, no_one_kernel, changed);
}
