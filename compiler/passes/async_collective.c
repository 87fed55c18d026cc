/* Asynchronous collectives (XLA's AsyncCollectiveCreator and the part of its latency-hiding
 * scheduler that places collectives):
 *
 * async_collective_creator: every all-reduce, all-gather and collective-permute (one
 * operand: not the in-place form) without control edges becomes its -start / -done pair:
 *   all-reduce          -> all-reduce-start (the all-reduce's shape) + all-reduce-done
 *   all-gather          -> all-gather-start ((operand, result), variadic: ((operands),
 *                          (results))) + all-gather-done (the result)
 *   collective-permute  -> collective-permute-start ((operand, result)) + -done
 * with the collective's attributes; users read the -done. reduce-scatter and all-to-all
 * have no start opcode of their own: as XLA does, they are wrapped in async-start (shape
 * ((operands...), result), calls= a new computation whose root is the collective of its
 * parameters) + async-done. The thunk emitter runs the wrapped collective at the start
 * (kiln_collective_emit_async); the pass runs after call_inline, which would unwrap them.
 *
 * collective_overlap_schedule (after the memory scheduler): in each computation holding a
 * -start, the instruction order is rebuilt by a list scheduler that keeps the scheduled order
 * as its priority but issues every -start as soon as its operands are done and every -done
 * only when nothing else is ready (the root last), so independent compute runs between a
 * collective's start and its done. Within one program every participant gets the same order,
 * so collectives still meet in the same sequence. The runtime today completes a collective at
 * its start; the order is what a runtime that overlaps them needs. */
#include <string.h>

#include "base/hashmap.h"
#include "base/vec.h"
#include "compiler/passes/collective_util.h"
#include "compiler/passes/pass.h"

static kiln_hlo_opcode_t start_of(kiln_hlo_opcode_t op, kiln_hlo_opcode_t *done) {
  switch (op) {
    case KILN_OP_ALL_REDUCE:
      *done = KILN_OP_ALL_REDUCE_DONE;
      return KILN_OP_ALL_REDUCE_START;
    case KILN_OP_ALL_GATHER:
      *done = KILN_OP_ALL_GATHER_DONE;
      return KILN_OP_ALL_GATHER_START;
    case KILN_OP_COLLECTIVE_PERMUTE:
      *done = KILN_OP_COLLECTIVE_PERMUTE_DONE;
      return KILN_OP_COLLECTIVE_PERMUTE_START;
    default:
      return KILN_OP_COUNT;
  }
}

/* Wrapped in async-start / async-done (no start opcode of their own). */
static bool wrapped_async(kiln_hlo_opcode_t op) {
  return op == KILN_OP_REDUCE_SCATTER || op == KILN_OP_ALL_TO_ALL;
}

static bool converts(kiln_hlo_opcode_t op) {
  kiln_hlo_opcode_t done;
  return start_of(op, &done) != KILN_OP_COUNT || wrapped_async(op);
}

typedef struct {
  kiln_hlo_module_t *m;
  kiln_ptrmap_t wrappers; /* the computations this run made (their collective stays) */
} creator_t;

/* reduce-scatter / all-to-all `in` -> async-start calling a new computation whose root is
 * `in` re-created on its parameters, + async-done; users read the done. */
static kiln_status wrap_async(creator_t *C, kiln_hlo_instruction_t *in, bool *replaced) {
  kiln_hlo_module_t *m = C->m;
  int n = in->num_operands;
  if (n < 1 || kiln_ptrmap_contains(&C->wrappers, in->parent)) return KILN_STATUS_OK;
  for (int k = 0; k < n; k++)
    if (!in->operands[k]->shape || !kiln_shape_is_array(in->operands[k]->shape))
      return KILN_STATUS_OK;
  kiln_hlo_computation_t *wc = kiln_hlo_computation_create(
      m, kiln_hlo_module_unique_name(m, kiln_hlo_opcode_name(in->opcode)));
  kiln_ptrmap_put(&C->wrappers, wc, wc);
  kiln_shape_t **ops = kiln_arena_alloc(&m->arena, sizeof *ops * (size_t)n);
  kiln_hlo_instruction_t **params = kiln_arena_alloc(&m->arena, sizeof *params * (size_t)n);
  for (int k = 0; k < n; k++) {
    ops[k] = in->operands[k]->shape;
    params[k] = kiln_hlo_instruction_create(wc, KILN_OP_PARAMETER, ops[k],
                                            kiln_hlo_module_unique_name(m, "param"));
    params[k]->parameter_number = k;
  }
  wc->parameters = params;
  wc->num_parameters = n;
  wc->root = kiln_hlo_instruction_clone(wc, in, NULL, n, params);
  kiln_shape_t *parts[2] = {kiln_shape_make_tuple(&m->arena, n, ops), in->shape};
  kiln_hlo_computation_t *c = in->parent;
  kiln_hlo_instruction_t *start = kiln_hlo_instruction_create(
      c, KILN_OP_ASYNC_START, kiln_shape_make_tuple(&m->arena, 2, parts),
      kiln_hlo_module_unique_name(m, "async-start"));
  kiln_hlo_instruction_set_operands(start, n, in->operands);
  kiln_hlo_instruction_add_called(start, "calls", false, 1, &wc);
  kiln_hlo_instruction_t *done = kiln_hlo_instruction_create(
      c, KILN_OP_ASYNC_DONE, in->shape, kiln_hlo_module_unique_name(m, "async-done"));
  kiln_hlo_instruction_set_operands(done, 1, &start);
  kiln_hlo_instruction_replace_all_uses(in, done);
  *replaced = true;
  return kiln_hlo_instruction_remove(in);
}

/* The -start's shape (NULL: not converted). */
static kiln_shape_t *start_shape(kiln_hlo_module_t *m, const kiln_hlo_instruction_t *in) {
  if (in->opcode == KILN_OP_ALL_REDUCE) return kiln_shape_clone(&m->arena, in->shape);
  if (in->opcode == KILN_OP_COLLECTIVE_PERMUTE && in->num_operands != 1) return NULL;
  kiln_shape_t *parts[2];
  if (in->num_operands == 1) {
    if (kiln_shape_is_tuple(in->shape)) return NULL;
    parts[0] = in->operands[0]->shape;
    parts[1] = in->shape;
  } else {
    if (!kiln_shape_is_tuple(in->shape) || in->shape->num_elements != in->num_operands) return NULL;
    kiln_shape_t **ops = kiln_arena_alloc(&m->arena, sizeof *ops * (size_t)in->num_operands);
    for (int i = 0; i < in->num_operands; i++) ops[i] = in->operands[i]->shape;
    parts[0] = kiln_shape_make_tuple(&m->arena, in->num_operands, ops);
    parts[1] = in->shape;
  }
  return kiln_shape_make_tuple(&m->arena, 2, parts);
}

static kiln_status make_async(void *ctx, kiln_hlo_instruction_t *in, bool *replaced) {
  creator_t *C = ctx;
  kiln_hlo_module_t *m = C->m;
  if (!converts(in->opcode) || !in->shape || kiln_coll_has_control_edges(in)) return KILN_STATUS_OK;
  if (wrapped_async(in->opcode)) return wrap_async(C, in, replaced);
  kiln_hlo_opcode_t done_op, start_op = start_of(in->opcode, &done_op);
  kiln_shape_t *shape = start_shape(m, in);
  if (!shape) return KILN_STATUS_OK;
  kiln_hlo_computation_t *c = in->parent;
  kiln_hlo_instruction_t *start =
      kiln_hlo_instruction_clone(c, in, NULL, in->num_operands, in->operands);
  start->opcode = start_op;
  start->shape = shape;
  start->name = kiln_hlo_module_unique_name(m, kiln_hlo_opcode_name(start_op));
  kiln_hlo_instruction_t *done =
      kiln_hlo_instruction_create(c, done_op, kiln_shape_clone(&m->arena, in->shape),
                                  kiln_hlo_module_unique_name(m, kiln_hlo_opcode_name(done_op)));
  kiln_hlo_instruction_set_operands(done, 1, &start);
  kiln_hlo_instruction_replace_all_uses(in, done);
  *replaced = true;
  return kiln_hlo_instruction_remove(in);
}

kiln_status kiln_pass_async_collective_creator(kiln_hlo_module_t *m,
                                               const kiln_pass_options_t *opts, bool *changed) {
  (void)opts;
  creator_t C = {m, {0}};
  kiln_ptrmap_init(&C.wrappers);
  kiln_status st = kiln_coll_rewrite_each(m, converts, make_async, &C, changed);
  kiln_ptrmap_free(&C.wrappers);
  return st;
}

/* Rank of an instruction in the list scheduler's choice: -starts first, then the scheduled
 * order, -dones (and the root) only when nothing else is ready. */
static int tier(const kiln_hlo_instruction_t *in) {
  if (kiln_hlo_opcode_starts_async(in->opcode)) return 0;
  if (in == in->parent->root) return 3;
  return kiln_hlo_opcode_ends_async(in->opcode) ? 2 : 1;
}

static void overlap_computation(kiln_hlo_computation_t *c, bool *changed) {
  size_t n = c->instructions.len;
  bool any = false;
  for (size_t i = 0; i < n && !any; i++)
    any = kiln_hlo_opcode_starts_async(c->instructions.data[i]->opcode);
  if (!any) return;
  kiln_ptrmap_t pos;
  kiln_ptrmap_init(&pos);
  for (size_t i = 0; i < n; i++) kiln_ptrmap_put(&pos, c->instructions.data[i], (void *)(i + 1));
  /* Each instruction's count of not-yet-issued predecessors in this computation. */
  int *pending = kiln_calloc(n, sizeof *pending);
  bool *issued = kiln_calloc(n, sizeof *issued);
  for (size_t i = 0; i < n; i++) {
    kiln_hlo_instruction_t *in = c->instructions.data[i];
    kiln_ptrmap_t seen;
    kiln_ptrmap_init(&seen);
    for (int k = 0; k < in->num_operands; k++)
      if (kiln_ptrmap_contains(&pos, in->operands[k]) &&
          !kiln_ptrmap_contains(&seen, in->operands[k])) {
        kiln_ptrmap_put(&seen, in->operands[k], (void *)1);
        pending[i]++;
      }
    for (int k = 0; k < in->num_control_predecessors; k++)
      if (kiln_ptrmap_contains(&pos, in->control_predecessors[k]) &&
          !kiln_ptrmap_contains(&seen, in->control_predecessors[k])) {
        kiln_ptrmap_put(&seen, in->control_predecessors[k], (void *)1);
        pending[i]++;
      }
    kiln_ptrmap_free(&seen);
  }
  kiln_hlo_instruction_t **out = kiln_malloc(sizeof *out * (n ? n : 1));
  size_t done = 0;
  while (done < n) {
    size_t best = n;
    for (size_t i = 0; i < n; i++) {
      if (issued[i] || pending[i]) continue;
      if (best == n || tier(c->instructions.data[i]) < tier(c->instructions.data[best])) best = i;
    }
    if (best == n) break; /* a cycle: cannot happen in a valid module; keep the old order */
    kiln_hlo_instruction_t *in = c->instructions.data[best];
    issued[best] = true;
    out[done++] = in;
    /* Its users and control successors here lose one pending predecessor. */
    kiln_ptrmap_t seen;
    kiln_ptrmap_init(&seen);
    for (size_t u = 0; u < in->users.len; u++) {
      kiln_hlo_instruction_t *x = in->users.data[u];
      uintptr_t p = (uintptr_t)kiln_ptrmap_get(&pos, x);
      if (p && !kiln_ptrmap_contains(&seen, x)) {
        kiln_ptrmap_put(&seen, x, (void *)1);
        pending[p - 1]--;
      }
    }
    for (size_t u = 0; u < in->control_successors.len; u++) {
      kiln_hlo_instruction_t *x = in->control_successors.data[u];
      uintptr_t p = (uintptr_t)kiln_ptrmap_get(&pos, x);
      if (p && !kiln_ptrmap_contains(&seen, x)) {
        kiln_ptrmap_put(&seen, x, (void *)1);
        pending[p - 1]--;
      }
    }
    kiln_ptrmap_free(&seen);
  }
  if (done == n) {
    bool differs = memcmp(out, c->instructions.data, sizeof *out * n) != 0;
    if (differs) {
      memcpy(c->instructions.data, out, sizeof *out * n);
      *changed = true;
    }
  }
  kiln_free(out);
  kiln_free(issued);
  kiln_free(pending);
  kiln_ptrmap_free(&pos);
}

kiln_status kiln_pass_collective_overlap_schedule(kiln_hlo_module_t *m,
                                                  const kiln_pass_options_t *opts, bool *changed) {
  (void)opts;
  for (size_t ci = 0; ci < m->computations.len; ci++)
    overlap_computation(m->computations.data[ci], changed);
  return KILN_STATUS_OK;
}
