/* Helpers shared by the simplification passes; see pass_util.h. */
#include "compiler/passes/pass_util.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

bool kiln_pass_has_own_side_effect(const kiln_hlo_instruction_t *in) {
  switch (in->opcode) {
    case KILN_OP_SEND:
    case KILN_OP_SEND_DONE:
    case KILN_OP_RECV:
    case KILN_OP_RECV_DONE:
    case KILN_OP_INFEED:
    case KILN_OP_OUTFEED:
    case KILN_OP_RNG:
    case KILN_OP_RNG_GET_AND_UPDATE_STATE:
    case KILN_OP_ASYNC_START:
    case KILN_OP_ASYNC_UPDATE:
    case KILN_OP_ASYNC_DONE:
    case KILN_OP_COPY_START:
    case KILN_OP_COPY_DONE:
    case KILN_OP_CUSTOM_CALL_START:
    case KILN_OP_CUSTOM_CALL_UPDATE:
    case KILN_OP_CUSTOM_CALL_DONE:
      return true;
    case KILN_OP_CUSTOM_CALL: {
      const char *v = kiln_hlo_instruction_raw_attr(in, "custom_call_has_side_effect");
      return v && strcmp(v, "true") == 0;
    }
    case KILN_OP_ALL_REDUCE:
    case KILN_OP_ALL_GATHER:
    case KILN_OP_ALL_TO_ALL:
    case KILN_OP_REDUCE_SCATTER:
    case KILN_OP_COLLECTIVE_PERMUTE: {
      /* As XLA: a synchronous collective is a value like any other when every participant
       * runs this program (no channel_id) and its layout is free; a dead one goes for all
       * participants at once. A channel_id may pair it with another program's. */
      return in->constrain_layout || in->channel_id != 0;
    }
    default:
      return (kiln_hlo_opcode_flags(in->opcode) & KILN_OPF_COLLECTIVE) != 0;
  }
}

void kiln_pass_effects_init(kiln_pass_effects_t *e) { kiln_ptrmap_init(&e->comps); }
void kiln_pass_effects_free(kiln_pass_effects_t *e) { kiln_ptrmap_free(&e->comps); }

static bool comp_effectful(kiln_pass_effects_t *e, const kiln_hlo_computation_t *c) {
  void *v = kiln_ptrmap_get(&e->comps, c);
  if (v) return v == (void *)2;
  /* Mark pure first so a (malformed) recursive call graph terminates. */
  kiln_ptrmap_put(&e->comps, c, (void *)1);
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i]; /* NULL: a deferred removal */
    if (in && kiln_pass_effects_instruction(e, in)) {
      kiln_ptrmap_put(&e->comps, c, (void *)2);
      return true;
    }
  }
  return false;
}

bool kiln_pass_effects_instruction(kiln_pass_effects_t *e, const kiln_hlo_instruction_t *in) {
  if (kiln_pass_has_own_side_effect(in)) return true;
  for (int g = 0; g < in->num_called_groups; g++)
    for (int k = 0; k < in->called_groups[g].n; k++) {
      const kiln_hlo_computation_t *c = in->called_groups[g].comps[k];
      if (c && comp_effectful(e, c)) return true;
    }
  return false;
}

bool kiln_pass_same_shape(const kiln_shape_t *a, const kiln_shape_t *b) {
  if (a == b) return true;
  if (!kiln_shape_equal(a, b, true)) return false;
  if (a->type == KILN_TUPLE) {
    for (int i = 0; i < a->num_elements; i++)
      if (!kiln_pass_same_shape(a->elements[i], b->elements[i])) return false;
    return true;
  }
  if (a->rank == 0) return true;
  return a->has_layout == b->has_layout;
}

static bool is_dead(kiln_hlo_instruction_t *in, kiln_pass_effects_t *effects) {
  return in->users.len == 0 && in->parent->root != in && in->opcode != KILN_OP_PARAMETER &&
         in->control_successors.len == 0 && !kiln_pass_effects_instruction(effects, in);
}

int kiln_pass_remove_if_dead(kiln_hlo_instruction_t *in, kiln_pass_effects_t *effects) {
  if (!is_dead(in, effects)) return 0;
  int removed = 0;
  kiln_ptrmap_t gone;
  kiln_ptrmap_init(&gone);
  KILN_VEC(kiln_hlo_instruction_t *) work = {0};
  kiln_vec_push(&work, in);
  while (work.len) {
    kiln_hlo_instruction_t *d = kiln_vec_pop(&work);
    if (kiln_ptrmap_contains(&gone, d) || !is_dead(d, effects)) continue;
    /* Operands are visited after `d` lets go of them. */
    KILN_VEC(kiln_hlo_instruction_t *) ops = {0};
    for (int i = 0; i < d->num_operands; i++) {
      bool seen = false;
      for (size_t k = 0; k < ops.len; k++) seen |= ops.data[k] == d->operands[i];
      if (!seen) kiln_vec_push(&ops, d->operands[i]);
    }
    kiln_status s = kiln_hlo_instruction_remove(d);
    if (s) { /* cannot happen: is_dead checked users and root */
      kiln_status_free(s);
      kiln_vec_free(&ops);
      continue;
    }
    removed++;
    kiln_ptrmap_put(&gone, d, (void *)1);
    for (size_t k = 0; k < ops.len; k++) kiln_vec_push(&work, ops.data[k]);
    kiln_vec_free(&ops);
  }
  kiln_vec_free(&work);
  kiln_ptrmap_free(&gone);
  return removed;
}

void kiln_pass_replace_instruction(kiln_hlo_instruction_t *old, kiln_hlo_instruction_t *repl,
                                   kiln_pass_effects_t *effects) {
  if (old == repl) return;
  kiln_hlo_instruction_replace_all_uses(old, repl);
  kiln_pass_remove_if_dead(old, effects);
}

void kiln_pass_replace_operand(kiln_hlo_instruction_t *user, kiln_hlo_instruction_t *old,
                               kiln_hlo_instruction_t *repl) {
  int n = user->num_operands;
  kiln_hlo_instruction_t *small[16] = {0};
  kiln_hlo_instruction_t **ops = n <= 16 ? small : kiln_malloc(sizeof *ops * (size_t)n);
  for (int i = 0; i < n; i++) ops[i] = user->operands[i] == old ? repl : user->operands[i];
  kiln_hlo_instruction_set_operands(user, n, ops);
  if (ops != small) kiln_free(ops);
}

static bool has_pred(const kiln_hlo_instruction_t *s, const kiln_hlo_instruction_t *p) {
  for (int i = 0; i < s->num_control_predecessors; i++)
    if (s->control_predecessors[i] == p) return true;
  return false;
}

static void drop_successor(kiln_hlo_instruction_t *p, const kiln_hlo_instruction_t *s) {
  for (size_t k = 0; k < p->control_successors.len; k++) {
    if (p->control_successors.data[k] == s) {
      memmove(&p->control_successors.data[k], &p->control_successors.data[k + 1],
              (p->control_successors.len - k - 1) * sizeof(p->control_successors.data[0]));
      p->control_successors.len--;
      return;
    }
  }
}

/* Unlinks `d`'s control edges; its live successors inherit its live predecessors. */
static void unlink_control(kiln_hlo_instruction_t *d, kiln_ptrmap_t *dead) {
  kiln_arena_t *arena = &d->parent->module->arena;
  for (size_t k = 0; k < d->control_successors.len; k++) {
    kiln_hlo_instruction_t *s = d->control_successors.data[k];
    if (kiln_ptrmap_contains(dead, s)) continue;
    int n = 0;
    for (int i = 0; i < s->num_control_predecessors; i++)
      if (s->control_predecessors[i] != d) s->control_predecessors[n++] = s->control_predecessors[i];
    s->num_control_predecessors = n;
    for (int i = 0; i < d->num_control_predecessors; i++) {
      kiln_hlo_instruction_t *p = d->control_predecessors[i];
      if (kiln_ptrmap_contains(dead, p) || has_pred(s, p)) continue;
      kiln_hlo_instruction_t **grown = kiln_arena_alloc(
          arena, sizeof(*grown) * (size_t)(s->num_control_predecessors + 1));
      if (!grown) continue; /* arena limit: lose the ordering edge rather than crash */
      if (s->num_control_predecessors)
        memcpy(grown, s->control_predecessors, sizeof(*grown) * (size_t)s->num_control_predecessors);
      grown[s->num_control_predecessors++] = p;
      s->control_predecessors = grown;
      kiln_vec_push(&p->control_successors, s);
    }
  }
  for (int i = 0; i < d->num_control_predecessors; i++) {
    kiln_hlo_instruction_t *p = d->control_predecessors[i];
    if (!kiln_ptrmap_contains(dead, p)) drop_successor(p, d);
  }
  d->num_control_predecessors = 0;
}

void kiln_pass_remove_instructions(kiln_hlo_computation_t *c, kiln_ptrmap_t *dead) {
  if (!dead->len) return;
  /* 1. Let go of operands (their user lists must still be alive, so before any free). */
  for (size_t i = 0; i < c->instructions.len; i++) {
    kiln_hlo_instruction_t *in = c->instructions.data[i];
    if (kiln_ptrmap_contains(dead, in)) kiln_hlo_instruction_set_operands(in, 0, NULL);
  }
  /* 2. Control edges. */
  for (size_t i = 0; i < c->instructions.len; i++) {
    kiln_hlo_instruction_t *in = c->instructions.data[i];
    if (kiln_ptrmap_contains(dead, in)) unlink_control(in, dead);
  }
  /* 3. Free and compact. */
  size_t n = 0;
  for (size_t i = 0; i < c->instructions.len; i++) {
    kiln_hlo_instruction_t *in = c->instructions.data[i];
    if (kiln_ptrmap_contains(dead, in)) {
      kiln_vec_free(&in->users);
      kiln_vec_free(&in->control_successors);
    } else {
      c->instructions.data[n++] = in;
    }
  }
  c->instructions.len = n;
}

int kiln_pass_remove_unreachable_computations(kiln_hlo_module_t *m) {
  if (!m->entry) return 0;
  kiln_ptrmap_t live;
  kiln_ptrmap_init(&live);
  KILN_VEC(kiln_hlo_computation_t *) work = {0};
  kiln_ptrmap_put(&live, m->entry, (void *)1);
  kiln_vec_push(&work, m->entry);
  while (work.len) {
    kiln_hlo_computation_t *c = kiln_vec_pop(&work);
    for (size_t i = 0; i < c->instructions.len; i++) {
      const kiln_hlo_instruction_t *in = c->instructions.data[i];
      if (!in) continue; /* a deferred removal's hole */
      for (int g = 0; g < in->num_called_groups; g++)
        for (int k = 0; k < in->called_groups[g].n; k++) {
          kiln_hlo_computation_t *callee = in->called_groups[g].comps[k];
          if (!callee || kiln_ptrmap_contains(&live, callee)) continue;
          kiln_ptrmap_put(&live, callee, (void *)1);
          kiln_vec_push(&work, callee);
        }
    }
  }
  kiln_ptrmap_t gone;
  kiln_ptrmap_init(&gone);
  for (size_t i = 0; i < m->computations.len; i++)
    if (!kiln_ptrmap_contains(&live, m->computations.data[i]))
      kiln_ptrmap_put(&gone, m->computations.data[i], (void *)1);
  int n = (int)kiln_hlo_module_remove_computations(m, &gone);
  kiln_ptrmap_free(&gone);
  kiln_vec_free(&work);
  kiln_ptrmap_free(&live);
  return n;
}

size_t kiln_pass_count_opcode(const kiln_hlo_computation_t *c, kiln_hlo_opcode_t op,
                              size_t enough) {
  size_t n = 0;
  for (size_t i = 0; i < c->instructions.len && n < enough; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    if (in && in->opcode == op) n++;
  }
  return n;
}

void kiln_pass_count_callers(const kiln_hlo_module_t *m, kiln_ptrmap_t *counts) {
  for (size_t c = 0; c < m->computations.len; c++) {
    const kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++) {
      const kiln_hlo_instruction_t *in = comp->instructions.data[i];
      for (int g = 0; g < in->num_called_groups; g++)
        for (int k = 0; k < in->called_groups[g].n; k++) {
          kiln_hlo_computation_t *callee = in->called_groups[g].comps[k];
          if (!callee) continue;
          intptr_t n = (intptr_t)kiln_ptrmap_get(counts, callee);
          kiln_ptrmap_put(counts, callee, (void *)(n + 1));
        }
    }
  }
}

static bool element_matches(const kiln_literal_t *l, int64_t i, kiln_pass_splat_t what) {
  kiln_elem_type_t t = l->shape->type;
  switch (what) {
    case KILN_SPLAT_ONE:
      if (kiln_elem_type_is_float(t)) return kiln_literal_get_f64(l, i) == 1.0;
      if (kiln_elem_type_is_unsigned_int(t)) return kiln_literal_get_u64(l, i) == 1;
      return kiln_literal_get_s64(l, i) == 1;
    case KILN_SPLAT_INT_ZERO:
      return kiln_literal_get_u64(l, i) == 0;
    case KILN_SPLAT_POS_ZERO:
    case KILN_SPLAT_NEG_ZERO: {
      double v = kiln_literal_get_f64(l, i);
      return v == 0.0 && (signbit(v) != 0) == (what == KILN_SPLAT_NEG_ZERO);
    }
  }
  return false;
}

bool kiln_pass_is_splat(const kiln_hlo_instruction_t *in, kiln_pass_splat_t what) {
  if (in->opcode == KILN_OP_BROADCAST && in->num_operands == 1) in = in->operands[0];
  if (in->opcode != KILN_OP_CONSTANT || !in->literal || in->literal->unknown) return false;
  const kiln_literal_t *l = in->literal;
  if (!l->shape || !kiln_shape_is_array(l->shape) || (l->num_elements && !l->data)) return false;
  kiln_elem_type_t t = l->shape->type;
  if (kiln_elem_type_is_complex(t)) return false;
  switch (what) {
    case KILN_SPLAT_ONE:
      if (!kiln_elem_type_is_float(t) && !kiln_elem_type_is_integral(t) && t != KILN_PRED) return false;
      break;
    case KILN_SPLAT_INT_ZERO:
      if (!kiln_elem_type_is_integral(t)) return false;
      break;
    case KILN_SPLAT_POS_ZERO:
    case KILN_SPLAT_NEG_ZERO:
      if (!kiln_elem_type_is_float(t)) return false;
      break;
  }
  for (int64_t i = 0; i < l->num_elements; i++)
    if (!element_matches(l, i, what)) return false;
  return true;
}

kiln_hlo_instruction_t *kiln_pass_copy_body(kiln_hlo_computation_t *dest,
                                            const kiln_hlo_computation_t *callee,
                                            kiln_hlo_instruction_t *const *args) {
  kiln_ptrmap_t map;
  kiln_ptrmap_init(&map);
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(callee, &n);
  KILN_VEC(kiln_hlo_instruction_t *) ops = {0};
  bool ok = order != NULL || n == 0;
  for (size_t i = 0; i < n && ok; i++) {
    kiln_hlo_instruction_t *s = order[i];
    if (s->opcode == KILN_OP_PARAMETER) {
      kiln_ptrmap_put(&map, s, args[s->parameter_number]);
      continue;
    }
    kiln_vec_clear(&ops);
    for (int k = 0; k < s->num_operands; k++)
      kiln_vec_push(&ops, kiln_ptrmap_get(&map, s->operands[k]));
    kiln_hlo_instruction_t *d =
        kiln_hlo_instruction_clone(dest, s, NULL, s->num_operands, ops.data);
    ok = d != NULL;
    if (ok) kiln_ptrmap_put(&map, s, d);
  }
  kiln_arena_t *arena = &dest->module->arena;
  for (size_t i = 0; i < n && ok; i++) {
    kiln_hlo_instruction_t *s = order[i];
    if (s->opcode == KILN_OP_PARAMETER || !s->num_control_predecessors) continue;
    kiln_hlo_instruction_t *d = kiln_ptrmap_get(&map, s);
    d->control_predecessors = kiln_arena_alloc(
        arena, sizeof(kiln_hlo_instruction_t *) * (size_t)s->num_control_predecessors);
    d->num_control_predecessors = 0;
    ok = d->control_predecessors != NULL;
    for (int k = 0; k < s->num_control_predecessors && ok; k++) {
      kiln_hlo_instruction_t *sp = s->control_predecessors[k];
      if (sp->opcode == KILN_OP_PARAMETER) continue;
      kiln_hlo_instruction_t *p = kiln_ptrmap_get(&map, sp);
      d->control_predecessors[d->num_control_predecessors++] = p;
      kiln_vec_push(&p->control_successors, d);
    }
  }
  kiln_hlo_instruction_t *root = ok ? kiln_ptrmap_get(&map, callee->root) : NULL;
  kiln_vec_free(&ops);
  kiln_free(order);
  kiln_ptrmap_free(&map);
  return root;
}
