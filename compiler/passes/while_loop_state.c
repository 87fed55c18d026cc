/* Two passes over while loops' state, in the simplification group.
 *
 * while_loop_invariant_code_motion (as XLA's WhileLoopInvariantCodeMotion): work in a loop
 * body that reads only loop-invariant values is computed once, before the loop. Element i of
 * the state is invariant when the body passes it through unchanged (root operand i is
 * get-tuple-element(param, index=i)). An instruction of the body is invariant when it reads
 * only invariant elements, constants and other invariant instructions, has no side effect
 * (nor does what it calls), no control edges, and is not control flow (while, conditional,
 * call), a custom call or a collective. Invariant instructions worth computing once
 * (anything but constants, iotas, broadcasts, reshapes, bitcasts, transposes, slices,
 * reverses, copies, tuples and get-tuple-elements, which cost little or nothing inside the
 * loop), and the invariant instructions they read, are cloned before the loop, reading the
 * loop's initial values; each worth-it hoisted instruction the body still reads becomes a new
 * state element, appended to the state, that the body passes through (a cheap one the body
 * still reads stays there too). The while's users see the old state (a tuple of its first
 * elements where one reads it whole). A hoisted instruction runs even when the loop runs zero
 * times: harmless for the ops kept (no side effects, no traps in HLO), a wasted computation
 * at worst. The new state elements live across the whole loop (XLA's default, no size limit
 * either). The corpus module behind b/380442861 (a loop of 1,000,000 steps, each summing the
 * squares of an iota of 1,000,000: the sum is invariant) ran past two minutes on the host;
 * with the sum computed once it takes 0.21 s; the f8 gemm of fp8_gemm_loop
 * (multihost_hlo_runner's data), the same on every step, took the loop from 44.3 s to 5.7 s.
 *
 * while_loop_dead_state (the part of XLA's WhileLoopSimplifier that drops unused state): an
 * element that neither the loop's users, nor the condition, nor the body beyond passing it on
 * (or computing it for the next step alone) read leaves the state, with whatever only
 * computed it — the elements hoisting left unread, among others. Loops whose result is read
 * whole are left alone, and one element always stays.
 *
 * Both rewrite only loops whose body and condition are called by this loop alone, whose body
 * root is a tuple and whose body and condition parameters are read through get-tuple-element
 * only. */
#include <stdint.h>

#include "base/alloc.h"
#include "base/hashmap.h"
#include "compiler/hlo/opcode.h"
#include "compiler/hlo/shape.h"
#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

/* Cheap enough inside the loop: hoisted only when a hoisted instruction reads them. */
static bool worth_hoisting_alone(const kiln_hlo_instruction_t *in) {
  switch (in->opcode) {
    case KILN_OP_CONSTANT:
    case KILN_OP_IOTA:
    case KILN_OP_BROADCAST:
    case KILN_OP_RESHAPE:
    case KILN_OP_BITCAST:
    case KILN_OP_TRANSPOSE:
    case KILN_OP_SLICE:
    case KILN_OP_REVERSE:
    case KILN_OP_COPY:
    case KILN_OP_TUPLE:
    case KILN_OP_GET_TUPLE_ELEMENT:
    case KILN_OP_PARTITION_ID:
    case KILN_OP_REPLICA_ID:
      return false;
    default:
      return true;
  }
}

/* Whether `in` may leave the loop when its operands do. */
static bool may_hoist(const kiln_hlo_instruction_t *in, kiln_pass_effects_t *effects) {
  switch (in->opcode) {
    case KILN_OP_PARAMETER:
    case KILN_OP_WHILE:
    case KILN_OP_CONDITIONAL:
    case KILN_OP_CALL:
    case KILN_OP_CUSTOM_CALL:
      return false;
    default:
      break;
  }
  /* A collective in a loop meets its peers once per step: it stays (a replica whose loop ran
   * no step would otherwise join one its peers never reach). */
  if (kiln_hlo_opcode_flags(in->opcode) & KILN_OPF_COLLECTIVE) return false;
  return in->num_control_predecessors == 0 && in->control_successors.len == 0 &&
         !kiln_pass_effects_instruction(effects, in);
}

typedef struct loop {
  kiln_hlo_instruction_t *w;
  kiln_hlo_computation_t *outer, *body, *cond;
  kiln_hlo_instruction_t *param, *root;
  int n; /* state elements before the rewrite */
} loop_t;

/* The rewrite's working sets (instruction -> (void *)1 / clone). */
typedef struct sets {
  kiln_ptrmap_t invariant, hoist, clone;
  kiln_hlo_instruction_t **outside; /* per state element: its initial value, made on demand */
} sets_t;

static bool pass_through(const loop_t *L, int i) {
  const kiln_hlo_instruction_t *op = L->root->operands[i];
  return op->opcode == KILN_OP_GET_TUPLE_ELEMENT && op->tuple_index == i &&
         op->operands[0] == L->param;
}

/* The initial value of state element i, before the loop (`outside`: those made so far). */
static kiln_hlo_instruction_t *outside_value(const loop_t *L, kiln_hlo_instruction_t **outside,
                                             kiln_builder_t *b, int i) {
  kiln_hlo_instruction_t *init = L->w->operands[0];
  if (init->opcode == KILN_OP_TUPLE) return init->operands[i];
  if (!outside[i]) outside[i] = kiln_builder_gte(b, init, i);
  return outside[i];
}

/* Removes the body's instructions nothing reads (no side effect, not the root or parameter),
 * users first, each once: what a rewrite left behind. */
static void body_dce(const loop_t *L, kiln_pass_effects_t *effects) {
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(L->body, &n);
  for (size_t i = n; i-- > 0;) {
    kiln_hlo_instruction_t *in = order[i];
    if (in != L->root && in->opcode != KILN_OP_PARAMETER && in->users.len == 0 &&
        in->control_successors.len == 0 && !kiln_pass_effects_instruction(effects, in))
      kiln_status_free(kiln_hlo_instruction_remove(in));
  }
  kiln_free(order);
}

/* Marks the invariant instructions of the body and those to hoist; returns how many are
 * hoisted. */
static size_t mark(const loop_t *L, sets_t *s, kiln_hlo_instruction_t **order, size_t n,
                   kiln_pass_effects_t *effects) {
  for (size_t i = 0; i < n; i++) {
    kiln_hlo_instruction_t *in = order[i];
    bool inv;
    if (in->opcode == KILN_OP_GET_TUPLE_ELEMENT && in->operands[0] == L->param) {
      inv = in->tuple_index < L->n && pass_through(L, (int)in->tuple_index);
    } else {
      inv = in != L->root && may_hoist(in, effects);
      for (int o = 0; inv && o < in->num_operands; o++)
        inv = kiln_ptrmap_get(&s->invariant, in->operands[o]) != NULL;
    }
    if (inv) kiln_ptrmap_put(&s->invariant, in, (void *)1);
  }
  /* Users before operands: an invariant instruction is hoisted when it is worth it alone or a
   * hoisted instruction reads it (the state's own elements are read from outside). */
  size_t hoisted = 0;
  for (size_t i = n; i-- > 0;) {
    kiln_hlo_instruction_t *in = order[i];
    if (!kiln_ptrmap_get(&s->invariant, in)) continue;
    if (in->opcode == KILN_OP_GET_TUPLE_ELEMENT && in->operands[0] == L->param) continue;
    bool h = worth_hoisting_alone(in);
    for (size_t u = 0; !h && u < in->users.len; u++)
      h = kiln_ptrmap_get(&s->hoist, in->users.data[u]) != NULL;
    if (h) {
      kiln_ptrmap_put(&s->hoist, in, (void *)1);
      hoisted++;
    }
  }
  /* Hoisting only what cost little (a chain of cheap ops read by nothing worth it) gains
   * nothing: every worth-it instruction is in the set by now, so none means none. */
  return hoisted;
}

/* A tuple instruction of `n` operands in `c` (the builder's tuple takes few). */
static kiln_hlo_instruction_t *make_tuple(kiln_builder_t *b, int n,
                                          kiln_hlo_instruction_t *const *xs) {
  kiln_shape_t **shapes = kiln_malloc((size_t)n * sizeof *shapes);
  for (int i = 0; i < n; i++) shapes[i] = xs[i]->shape;
  kiln_shape_t *t = kiln_shape_make_tuple(&b->m->arena, n, shapes);
  kiln_free(shapes);
  return t ? kiln_builder_op(b, KILN_OP_TUPLE, t, n, xs) : NULL;
}

/* Clones the hoisted instructions before the loop and rewires the loop; false (the module
 * unchanged but for unused new instructions) when the arena refused memory. */
static bool hoist(const loop_t *L, sets_t *s, kiln_hlo_instruction_t **order, size_t n,
                  kiln_pass_effects_t *effects) {
  kiln_builder_t ob, bb;
  kiln_builder_init(&ob, L->outer, "licm", false);
  kiln_builder_init(&bb, L->body, "licm", false);
  KILN_VEC(kiln_hlo_instruction_t *) slots = {0}; /* hoisted instructions the body reads */
  kiln_hlo_instruction_t **ops = NULL;
  size_t cap = 0;
  for (size_t i = 0; i < n && !ob.failed; i++) {
    kiln_hlo_instruction_t *in = order[i];
    if (!kiln_ptrmap_get(&s->hoist, in)) continue;
    if ((size_t)in->num_operands > cap) {
      cap = (size_t)in->num_operands;
      ops = kiln_realloc(ops, cap * sizeof *ops);
    }
    for (int o = 0; o < in->num_operands; o++) {
      kiln_hlo_instruction_t *x = in->operands[o];
      ops[o] = x->opcode == KILN_OP_GET_TUPLE_ELEMENT && x->operands[0] == L->param
                   ? outside_value(L, s->outside, &ob, (int)x->tuple_index)
                   : kiln_ptrmap_get(&s->clone, x);
      if (!ops[o]) ob.failed = true;
    }
    kiln_hlo_instruction_t *c =
        ob.failed ? NULL : kiln_hlo_instruction_clone(L->outer, in, NULL, in->num_operands, ops);
    if (!c) {
      ob.failed = true;
      break;
    }
    kiln_ptrmap_put(&s->clone, in, c);
    /* Read in the body too: a worth-it instruction's value comes from a new state element; a
     * cheap one (a broadcast, a reshape) stays in the body as well rather than widen the
     * state. */
    bool read_inside = false;
    for (size_t u = 0; !read_inside && u < in->users.len; u++)
      read_inside = !kiln_ptrmap_get(&s->hoist, in->users.data[u]);
    if (read_inside && worth_hoisting_alone(in)) kiln_vec_push(&slots, in);
  }
  kiln_free(ops);
  const int total = L->n + (int)slots.len;
  kiln_hlo_instruction_t **state = kiln_malloc((size_t)total * sizeof *state);
  kiln_hlo_instruction_t *init = NULL;
  if (!ob.failed) {
    for (int i = 0; i < L->n; i++) state[i] = outside_value(L, s->outside, &ob, i);
    for (size_t j = 0; j < slots.len; j++)
      state[L->n + (int)j] = kiln_ptrmap_get(&s->clone, slots.data[j]);
    init = make_tuple(&ob, total, state);
  }
  /* The body's reads of each slotted instruction become reads of its state element. */
  kiln_hlo_instruction_t **reads = kiln_calloc(slots.len + 1, sizeof *reads);
  bool ok = init && !ob.failed;
  if (ok) {
    L->param->shape = init->shape;
    for (size_t j = 0; j < slots.len && ok; j++) {
      reads[j] = kiln_builder_gte(&bb, L->param, L->n + (int64_t)j);
      ok = reads[j] != NULL;
    }
  }
  if (!ok) { /* nothing of the loop changed yet: the new instructions are unused */
    for (size_t j = 0; j < slots.len; j++)
      if (reads[j]) kiln_status_free(kiln_hlo_instruction_remove(reads[j]));
    L->param->shape = L->w->shape;
    kiln_free(reads);
    kiln_free(state);
    kiln_vec_free(&slots);
    return false;
  }
  for (int i = 0; i < L->n; i++) state[i] = L->root->operands[i];
  for (size_t j = 0; j < slots.len; j++) {
    kiln_hlo_instruction_replace_all_uses(slots.data[j], reads[j]);
    state[L->n + (int)j] = reads[j];
  }
  kiln_hlo_instruction_set_operands(L->root, total, state);
  L->root->shape = init->shape;
  L->cond->parameters[0]->shape = init->shape;
  /* The loop's users outside read the old state. */
  kiln_shape_t *old_shape = L->w->shape;
  KILN_VEC(kiln_hlo_instruction_t *) whole = {0};
  for (size_t u = 0; u < L->w->users.len; u++)
    if (L->w->users.data[u]->opcode != KILN_OP_GET_TUPLE_ELEMENT)
      kiln_vec_push(&whole, L->w->users.data[u]);
  const bool was_root = L->outer->root == L->w;
  kiln_hlo_instruction_t *old_init = L->w->operands[0];
  kiln_hlo_instruction_set_operands(L->w, 1, &init);
  L->w->shape = init->shape;
  if (whole.len || was_root) {
    for (int i = 0; i < L->n; i++) state[i] = kiln_builder_gte(&ob, L->w, i);
    kiln_hlo_instruction_t *restore = ob.failed ? NULL : make_tuple(&ob, L->n, state);
    if (restore) {
      restore->shape = old_shape;
      for (size_t u = 0; u < whole.len; u++)
        kiln_pass_replace_operand(whole.data[u], L->w, restore);
      if (was_root) L->outer->root = restore;
    }
  }
  kiln_vec_free(&whole);
  kiln_pass_remove_if_dead(old_init, effects);
  /* The hoisted originals (the cheap ones the body still reads stay) and the reads of the
   * state they left unread. */
  body_dce(L, effects);
  kiln_free(reads);
  kiln_free(state);
  kiln_vec_free(&slots);
  kiln_hlo_computation_sort_post_order(L->outer);
  kiln_hlo_computation_sort_post_order(L->body);
  return true;
}

static bool rewrite(loop_t *L, kiln_pass_effects_t *effects) {
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(L->body, &n);
  sets_t s;
  kiln_ptrmap_init(&s.invariant);
  kiln_ptrmap_init(&s.hoist);
  kiln_ptrmap_init(&s.clone);
  s.outside = kiln_calloc((size_t)L->n + 1, sizeof *s.outside);
  bool changed = mark(L, &s, order, n, effects) > 0 && hoist(L, &s, order, n, effects);
  kiln_free(s.outside);
  kiln_ptrmap_free(&s.clone);
  kiln_ptrmap_free(&s.hoist);
  kiln_ptrmap_free(&s.invariant);
  kiln_free(order);
  return changed;
}

/* The loop `w` as the rewrite needs it, or false when it does not take it. */
static bool take_loop(kiln_hlo_instruction_t *w, kiln_ptrmap_t *callers, loop_t *L) {
  if (w->opcode != KILN_OP_WHILE || w->num_operands != 1 || !kiln_shape_is_tuple(w->shape))
    return false;
  L->w = w;
  L->outer = w->parent;
  L->body = kiln_hlo_instruction_called(w, "body");
  L->cond = kiln_hlo_instruction_called(w, "condition");
  if (!L->body || !L->cond || L->body == L->cond || L->body == L->outer) return false;
  if ((intptr_t)kiln_ptrmap_get(callers, L->body) != 1 ||
      (intptr_t)kiln_ptrmap_get(callers, L->cond) != 1)
    return false;
  if (L->body->num_parameters != 1 || L->cond->num_parameters != 1 || !L->cond->parameters[0])
    return false;
  L->param = L->body->parameters[0];
  L->root = L->body->root;
  L->n = w->shape->num_elements;
  if (!L->param || !L->root || L->root->opcode != KILN_OP_TUPLE || L->root->num_operands != L->n)
    return false;
  for (size_t u = 0; u < L->param->users.len; u++)
    if (L->param->users.data[u]->opcode != KILN_OP_GET_TUPLE_ELEMENT) return false;
  for (size_t u = 0; u < L->cond->parameters[0]->users.len; u++)
    if (L->cond->parameters[0]->users.data[u]->opcode != KILN_OP_GET_TUPLE_ELEMENT) return false;
  return true;
}

/* ---- dead state ---------------------------------------------------------------------- */

/* Whether element i of the loop's state is read by nothing but its own next value: no
 * get-tuple-element of the loop, or of the condition's parameter, takes it, and the body's
 * reads of it feed only instructions (without side effects) whose values end in the root at
 * position i alone. `order`: the body in post order; `only_i`: scratch. */
static bool dead_element(const loop_t *L, int i, kiln_hlo_instruction_t **order, size_t n,
                         kiln_pass_effects_t *effects, kiln_ptrmap_t *only_i) {
  for (size_t u = 0; u < L->w->users.len; u++)
    if (L->w->users.data[u]->tuple_index == i) return false;
  const kiln_hlo_instruction_t *cp = L->cond->parameters[0];
  for (size_t u = 0; u < cp->users.len; u++)
    if (cp->users.data[u]->tuple_index == i) return false;
  /* The instructions whose every use ends in root operand i, users first. */
  kiln_ptrmap_free(only_i);
  kiln_ptrmap_init(only_i);
  for (size_t k = n; k-- > 0;) {
    kiln_hlo_instruction_t *in = order[k];
    if (in == L->root || in == L->param || !in->users.len || in->control_successors.len ||
        in->num_control_predecessors || kiln_pass_effects_instruction(effects, in))
      continue;
    bool only = true;
    for (size_t u = 0; only && u < in->users.len; u++) {
      const kiln_hlo_instruction_t *user = in->users.data[u];
      if (user == L->root) {
        for (int o = 0; only && o < L->root->num_operands; o++)
          only = L->root->operands[o] != in || o == i;
      } else {
        only = kiln_ptrmap_get(only_i, user) != NULL;
      }
    }
    if (only) kiln_ptrmap_put(only_i, in, (void *)1);
  }
  for (size_t u = 0; u < L->param->users.len; u++) {
    kiln_hlo_instruction_t *g = L->param->users.data[u];
    if (g->tuple_index == i && g->users.len && !kiln_ptrmap_get(only_i, g)) return false;
  }
  return true;
}

/* Drops the dead elements of L's state (at least one dead, at least one kept); false when the
 * arena refused memory (nothing of the loop changed). */
static bool drop_dead(const loop_t *L, const bool *dead, kiln_pass_effects_t *effects) {
  int kept = 0;
  int *to = kiln_malloc((size_t)L->n * sizeof *to); /* old index -> new, -1 dropped */
  for (int i = 0; i < L->n; i++) to[i] = dead[i] ? -1 : kept++;
  kiln_builder_t ob;
  kiln_builder_init(&ob, L->outer, "dead_state", false);
  kiln_hlo_instruction_t **outside = kiln_calloc((size_t)L->n + 1, sizeof *outside);
  kiln_hlo_instruction_t **xs = kiln_malloc((size_t)L->n * sizeof *xs);
  for (int i = 0; i < L->n && !ob.failed; i++)
    if (to[i] >= 0) xs[to[i]] = outside_value(L, outside, &ob, i);
  kiln_hlo_instruction_t *init = ob.failed ? NULL : make_tuple(&ob, kept, xs);
  kiln_free(outside);
  if (!init) {
    kiln_free(xs), kiln_free(to);
    return false;
  }
  /* The body's root keeps the kept elements' values. */
  for (int i = 0; i < L->n; i++)
    if (to[i] >= 0) xs[to[i]] = L->root->operands[i];
  kiln_hlo_instruction_set_operands(L->root, kept, xs);
  L->root->shape = init->shape;
  L->param->shape = init->shape;
  L->cond->parameters[0]->shape = init->shape;
  kiln_hlo_instruction_t *old_init = L->w->operands[0];
  kiln_hlo_instruction_set_operands(L->w, 1, &init);
  L->w->shape = init->shape;
  /* Every reader of the state by index reads its new index; the body's reads of dropped
   * elements (the root let go of them) and what only they fed go, users first, each once. */
  kiln_hlo_instruction_t *const holders[3] = {L->w, L->param, L->cond->parameters[0]};
  for (int h = 0; h < 3; h++)
    for (size_t u = 0; u < holders[h]->users.len; u++) {
      kiln_hlo_instruction_t *g = holders[h]->users.data[u];
      if (to[g->tuple_index] >= 0) g->tuple_index = to[g->tuple_index];
    }
  body_dce(L, effects);
  kiln_pass_remove_if_dead(old_init, effects);
  kiln_free(xs), kiln_free(to);
  kiln_hlo_computation_sort_post_order(L->outer);
  kiln_hlo_computation_sort_post_order(L->body);
  return true;
}

static bool drop_dead_state(loop_t *L, kiln_pass_effects_t *effects) {
  for (size_t u = 0; u < L->w->users.len; u++)
    if (L->w->users.data[u]->opcode != KILN_OP_GET_TUPLE_ELEMENT) return false;
  if (L->outer->root == L->w) return false;
  bool *dead = kiln_calloc((size_t)L->n + 1, sizeof *dead);
  int n_dead = 0;
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(L->body, &n);
  kiln_ptrmap_t only_i;
  kiln_ptrmap_init(&only_i);
  for (int i = 0; i < L->n; i++) n_dead += dead[i] = dead_element(L, i, order, n, effects, &only_i);
  kiln_ptrmap_free(&only_i);
  kiln_free(order);
  const bool changed = n_dead > 0 && n_dead < L->n && drop_dead(L, dead, effects);
  kiln_free(dead);
  return changed;
}

/* ---- the passes ------------------------------------------------------------------------ */

/* Runs `fn` on every loop take_loop takes; *changed when one changed its loop. */
static void each_loop(kiln_hlo_module_t *m, bool (*fn)(loop_t *L, kiln_pass_effects_t *effects),
                      bool *changed) {
  kiln_ptrmap_t callers;
  kiln_ptrmap_init(&callers);
  kiln_pass_count_callers(m, &callers);
  kiln_pass_effects_t effects;
  kiln_pass_effects_init(&effects);
  /* Loops found first: a rewrite adds instructions to the computation it walks. */
  KILN_VEC(kiln_hlo_instruction_t *) loops = {0};
  for (size_t ci = 0; ci < m->computations.len; ci++) {
    kiln_hlo_computation_t *c = m->computations.data[ci];
    if (!kiln_pass_count_opcode(c, KILN_OP_WHILE, 1)) continue;
    for (size_t i = 0; i < c->instructions.len; i++)
      if (c->instructions.data[i] && c->instructions.data[i]->opcode == KILN_OP_WHILE)
        kiln_vec_push(&loops, c->instructions.data[i]);
  }
  for (size_t i = 0; i < loops.len; i++) {
    loop_t L;
    if (take_loop(loops.data[i], &callers, &L) && fn(&L, &effects)) *changed = true;
  }
  kiln_vec_free(&loops);
  kiln_pass_effects_free(&effects);
  kiln_ptrmap_free(&callers);
}

kiln_status kiln_pass_while_loop_invariant_code_motion(kiln_hlo_module_t *m,
                                                       const kiln_pass_options_t *opts,
                                                       bool *changed) {
  (void)opts;
  each_loop(m, rewrite, changed);
  return NULL;
}

kiln_status kiln_pass_while_loop_dead_state(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                            bool *changed) {
  (void)opts;
  each_loop(m, drop_dead_state, changed);
  return NULL;
}
