/* The collective combiners (XLA's AllReduceCombiner, AllGatherCombiner, ReduceScatterCombiner):
 * independent collectives of one computation that would run the same way become one variadic
 * collective, so a step launches one collective instead of many.
 *
 * Same way (the key): opcode, replica_groups text, channel_id present or not,
 * use_global_device_ids; all-reduce / reduce-scatter: the same reducer
 * (kiln_coll_same_reducer) and one element type; all-gather / reduce-scatter: the same
 * dimension. Collectives with control edges or constrain_layout stay alone. Members are taken
 * in post order and grouped per key while the group's result bytes stay within the threshold
 * (kiln_pass_options_t.*_combine_threshold_bytes; 0: XLA's GPU default of 30 MiB) and its
 * size within 256 ops; a group is combined only with members that do not depend on each other
 * in the graph as it is then (operands and control predecessors, the combined ops made before
 * included) — a member that does starts the next group. The combined collective takes every
 * member's operands in order (a variadic member's all of them) and returns their results as
 * one tuple; each member's users read a get-tuple-element (a tuple of them for a variadic
 * member); its channel_id, metadata and reducer are the first member's. The result of each
 * operand is the one it had alone: every participant still reduces / gathers that operand
 * over the same group in the same order. */
#include <string.h>

#include "base/hashmap.h"
#include "base/vec.h"
#include "compiler/passes/collective_util.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

#define DEFAULT_THRESHOLD_BYTES (INT64_C(30) * 1024 * 1024)
#define MAX_COMBINED_OPS 256

typedef KILN_VEC(kiln_hlo_instruction_t *) instr_vec_t;

static kiln_elem_type_t first_type(const kiln_shape_t *s) {
  if (kiln_shape_is_tuple(s)) return s->num_elements ? first_type(s->elements[0]) : KILN_TUPLE;
  return s->type;
}

/* A collective of opcode `op` the combiner can take: array results (one per operand), no
 * control edges, no constrain_layout, one element type when it reduces. */
static bool candidate(const kiln_hlo_instruction_t *in, kiln_hlo_opcode_t op) {
  if (in->opcode != op || !in->shape || in->num_operands < 1 || kiln_coll_has_control_edges(in) ||
      in->constrain_layout)
    return false;
  if ((op == KILN_OP_ALL_GATHER || op == KILN_OP_REDUCE_SCATTER) &&
      (!in->has_dimensions || in->dimensions.n != 1))
    return false;
  int n = kiln_shape_is_tuple(in->shape) ? in->shape->num_elements : 1;
  if (n != in->num_operands) return false;
  kiln_elem_type_t t = first_type(in->shape);
  for (int i = 0; i < n; i++) {
    const kiln_shape_t *e = kiln_shape_is_tuple(in->shape) ? in->shape->elements[i] : in->shape;
    if (!kiln_shape_is_array(e) || kiln_shape_is_dynamic(e)) return false;
    if (op != KILN_OP_ALL_GATHER && e->type != t) return false;
  }
  return true;
}

static bool same_key(const kiln_hlo_instruction_t *a, const kiln_hlo_instruction_t *b) {
  if (a->opcode != b->opcode || (a->channel_id != 0) != (b->channel_id != 0) ||
      a->use_global_device_ids != b->use_global_device_ids)
    return false;
  if ((a->replica_groups == NULL) != (b->replica_groups == NULL) ||
      (a->replica_groups && strcmp(a->replica_groups, b->replica_groups) != 0))
    return false;
  if (a->opcode == KILN_OP_ALL_GATHER || a->opcode == KILN_OP_REDUCE_SCATTER)
    if (a->dimensions.v[0] != b->dimensions.v[0]) return false;
  if (a->opcode == KILN_OP_ALL_REDUCE || a->opcode == KILN_OP_REDUCE_SCATTER)
    if (!kiln_coll_same_reducer(a, b) || first_type(a->shape) != first_type(b->shape)) return false;
  return true;
}

static int64_t result_bytes(const kiln_shape_t *s) {
  if (!kiln_shape_is_tuple(s)) return kiln_shape_byte_size(s);
  int64_t total = 0;
  for (int i = 0; i < s->num_elements; i++) total += result_bytes(s->elements[i]);
  return total;
}

/* Whether some instruction of `set` is reached from the operands (or control predecessors) of
 * the instructions in `set`: one of them depends on another. */
static bool depends_within(const instr_vec_t *set) {
  kiln_ptrmap_t members, seen;
  kiln_ptrmap_init(&members);
  kiln_ptrmap_init(&seen);
  instr_vec_t stack = {0};
  for (size_t i = 0; i < set->len; i++) kiln_ptrmap_put(&members, set->data[i], (void *)1);
  for (size_t i = 0; i < set->len; i++) {
    const kiln_hlo_instruction_t *in = set->data[i];
    for (int k = 0; k < in->num_operands; k++) kiln_vec_push(&stack, in->operands[k]);
    for (int k = 0; k < in->num_control_predecessors; k++)
      kiln_vec_push(&stack, in->control_predecessors[k]);
  }
  bool found = false;
  while (stack.len && !found) {
    kiln_hlo_instruction_t *x = stack.data[--stack.len];
    if (kiln_ptrmap_contains(&seen, x)) continue;
    kiln_ptrmap_put(&seen, x, (void *)1);
    if (kiln_ptrmap_contains(&members, x)) {
      found = true;
      break;
    }
    for (int k = 0; k < x->num_operands; k++) kiln_vec_push(&stack, x->operands[k]);
    for (int k = 0; k < x->num_control_predecessors; k++)
      kiln_vec_push(&stack, x->control_predecessors[k]);
  }
  kiln_vec_free(&stack);
  kiln_ptrmap_free(&seen);
  kiln_ptrmap_free(&members);
  return found;
}

static kiln_hlo_instruction_t *make_gte(kiln_hlo_instruction_t *t, int64_t index) {
  kiln_hlo_module_t *m = t->parent->module;
  kiln_hlo_instruction_t *g = kiln_hlo_instruction_create(
      t->parent, KILN_OP_GET_TUPLE_ELEMENT, kiln_shape_clone(&m->arena, t->shape->elements[index]),
      kiln_hlo_module_unique_name(m, "get-tuple-element"));
  g->tuple_index = index;
  kiln_hlo_instruction_set_operands(g, 1, &t);
  return g;
}

/* Replaces the members (>= 2, independent) by one combined collective. */
static kiln_status combine(const instr_vec_t *members) {
  kiln_hlo_instruction_t *first = members->data[0];
  kiln_hlo_computation_t *c = first->parent;
  kiln_hlo_module_t *m = c->module;
  instr_vec_t ops = {0};
  KILN_VEC(kiln_shape_t *) shapes = {0};
  for (size_t i = 0; i < members->len; i++) {
    kiln_hlo_instruction_t *in = members->data[i];
    for (int k = 0; k < in->num_operands; k++) {
      kiln_vec_push(&ops, in->operands[k]);
      kiln_vec_push(&shapes, kiln_shape_is_tuple(in->shape) ? in->shape->elements[k] : in->shape);
    }
  }
  kiln_hlo_instruction_t *comb = kiln_hlo_instruction_clone(c, first, NULL, (int)ops.len, ops.data);
  comb->shape = kiln_shape_make_tuple(&m->arena, (int)shapes.len, shapes.data);
  kiln_status st = KILN_STATUS_OK;
  int64_t at = 0;
  for (size_t i = 0; i < members->len && !st; i++) {
    kiln_hlo_instruction_t *in = members->data[i];
    kiln_hlo_instruction_t *repl;
    if (!kiln_shape_is_tuple(in->shape)) {
      repl = make_gte(comb, at++);
    } else {
      instr_vec_t parts = {0};
      for (int k = 0; k < in->num_operands; k++) kiln_vec_push(&parts, make_gte(comb, at++));
      repl = kiln_hlo_instruction_create(c, KILN_OP_TUPLE, kiln_shape_clone(&m->arena, in->shape),
                                         kiln_hlo_module_unique_name(m, "tuple"));
      kiln_hlo_instruction_set_operands(repl, (int)parts.len, parts.data);
      kiln_vec_free(&parts);
    }
    kiln_hlo_instruction_replace_all_uses(in, repl);
    st = kiln_hlo_instruction_remove(in);
  }
  kiln_vec_free(&ops);
  kiln_vec_free(&shapes);
  return st;
}

/* Combines what it can of `group` (in post order): members that do not depend on the ones
 * taken before go together; the others form the next group. */
static kiln_status flush(instr_vec_t *group, bool *changed) {
  while (group->len >= 2) {
    instr_vec_t taken = {0}, rest = {0};
    for (size_t i = 0; i < group->len; i++) {
      kiln_vec_push(&taken, group->data[i]);
      if (taken.len > 1 && depends_within(&taken)) {
        taken.len--;
        kiln_vec_push(&rest, group->data[i]);
      }
    }
    kiln_status st = KILN_STATUS_OK;
    if (taken.len >= 2) {
      st = combine(&taken);
      *changed = true;
    }
    kiln_vec_free(&taken);
    kiln_vec_free(group);
    *group = rest;
    if (st) return st;
  }
  group->len = 0;
  return KILN_STATUS_OK;
}

typedef struct bucket {
  instr_vec_t members;
  int64_t bytes;
} bucket_t;

static kiln_status combine_computation(kiln_hlo_computation_t *c, kiln_hlo_opcode_t op,
                                       int64_t threshold, bool *changed) {
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(c, &n);
  KILN_VEC(bucket_t) buckets = {0};
  kiln_status st = KILN_STATUS_OK;
  bool comp_changed = false;
  for (size_t i = 0; i < n && !st; i++) {
    kiln_hlo_instruction_t *in = order[i];
    if (!candidate(in, op)) continue;
    int64_t bytes = result_bytes(in->shape);
    if (bytes > threshold) continue;
    bucket_t *b = NULL;
    for (size_t k = 0; k < buckets.len && !b; k++)
      if (same_key(buckets.data[k].members.data[0], in)) b = &buckets.data[k];
    if (!b) {
      kiln_vec_push(&buckets, ((bucket_t){{0}, 0}));
      b = &buckets.data[buckets.len - 1];
    } else if (b->bytes + bytes > threshold || b->members.len >= MAX_COMBINED_OPS) {
      st = flush(&b->members, &comp_changed);
      b->bytes = 0;
      for (size_t k = 0; k < b->members.len; k++)
        b->bytes += result_bytes(b->members.data[k]->shape);
    }
    kiln_vec_push(&b->members, in);
    b->bytes += bytes;
  }
  for (size_t k = 0; k < buckets.len; k++) {
    if (!st) st = flush(&buckets.data[k].members, &comp_changed);
    kiln_vec_free(&buckets.data[k].members);
  }
  kiln_vec_free(&buckets);
  kiln_free(order);
  if (comp_changed) {
    kiln_hlo_computation_sort_post_order(c);
    *changed = true;
  }
  return st;
}

static kiln_status combine_module(kiln_hlo_module_t *m, kiln_hlo_opcode_t op, int64_t threshold,
                                  bool *changed) {
  if (threshold < 0) return KILN_STATUS_OK;
  if (threshold == 0) threshold = DEFAULT_THRESHOLD_BYTES;
  for (size_t ci = 0; ci < m->computations.len; ci++) {
    kiln_hlo_computation_t *c = m->computations.data[ci];
    /* A group needs two members: a computation with fewer than two `op` instructions (nearly
     * all) is passed over after one read of each instruction's opcode, without the post
     * order (a walk through operands and a hash map keyed by instruction). */
    if (kiln_pass_count_opcode(c, op, 2) < 2) continue;
    KILN_RETURN_IF_ERROR(combine_computation(c, op, threshold, changed), "combining %ss of '%s'",
                         kiln_hlo_opcode_name(op), c->name);
  }
  return KILN_STATUS_OK;
}

kiln_status kiln_pass_all_reduce_combiner(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                          bool *changed) {
  return combine_module(m, KILN_OP_ALL_REDUCE, opts->all_reduce_combine_threshold_bytes, changed);
}

kiln_status kiln_pass_all_gather_combiner(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                          bool *changed) {
  return combine_module(m, KILN_OP_ALL_GATHER, opts->all_gather_combine_threshold_bytes, changed);
}

kiln_status kiln_pass_reduce_scatter_combiner(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                              bool *changed) {
  return combine_module(m, KILN_OP_REDUCE_SCATTER, opts->reduce_scatter_combine_threshold_bytes,
                        changed);
}
