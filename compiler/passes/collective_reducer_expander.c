/* collective_reducer_expander: an all-reduce or reduce-scatter whose reducer is not one the
 * runtime's cliques fold (add, multiply, minimum, maximum of the two parameters; and/or on
 * pred: kiln_coll_reducer_op; on the types kiln_coll_runtime_reduces_type names, so not on
 * sub-byte integers, fp8 or complex values) becomes an all-gather of every group member's operand
 * along a new leading dimension and a chain of `map`s applying the reducer computation itself,
 * ((v0 f v1) f v2) ..., v_k being the operand of the member at rank k of the group — the
 * evaluator's fold order (compiler/eval/eval_collectives.c), so results are bit-identical.
 * A reduce-scatter first keeps, of what was gathered, the participant's share of its scatter
 * dimension: offset rank * share, rank read from a table of every participant's rank
 * (kiln_hlo_collective_group_resolve in the module's world, kiln_eval_spmd_world_size) at
 * replica-id * num_partitions + partition-id.
 *
 * The all-gather keeps the collective's groups, channel_id and use_global_device_ids (its
 * group modes are all-reduce's), so it gathers from exactly the participants that would have
 * been reduced. Left alone (the thunk emitter then names the reducer as UNIMPLEMENTED):
 * variadic or tuple collectives, reducers that are not scalar (T[], T[]) -> T[], layouts the
 * collective must keep (constrain_layout), control edges, groups of unequal sizes, worlds over 4096
 * participants. It moves group-size times the data an all-reduce would: a fallback for
 * reducers nothing faster folds, not a fast path. */
#include <string.h>

#include "base/alloc.h"

#include "compiler/eval/eval.h"
#include "compiler/hlo/collective_groups.h"
#include "compiler/hlo/literal.h"
#include "compiler/passes/collective_util.h"
#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"

#define MAX_PARTICIPANTS 4096
#define MAX_RANK 32

/* Whether the cliques fold `f` themselves (the thunk emitter's rule). */
static bool folded_by_runtime(const kiln_hlo_computation_t *f) {
  kiln_elem_type_t t = KILN_ELEM_TYPE_COUNT;
  kiln_hlo_opcode_t op = kiln_coll_reducer_op(f, &t);
  if (op != KILN_OP_COUNT && !kiln_coll_runtime_reduces_type(t)) return false;
  switch (op) {
    case KILN_OP_ADD:
    case KILN_OP_MULTIPLY:
    case KILN_OP_MINIMUM:
    case KILN_OP_MAXIMUM:
      return true;
    case KILN_OP_AND:
    case KILN_OP_OR:
      return t == KILN_PRED;
    default:
      return false;
  }
}

/* A scalar binary computation (T[], T[]) -> T[] of `type`. */
static bool scalar_binary(const kiln_hlo_computation_t *f, kiln_elem_type_t type) {
  if (!f || f->num_parameters != 2 || !f->root || !f->root->shape) return false;
  const kiln_shape_t *r = f->root->shape;
  if (!kiln_shape_is_array(r) || r->rank != 0 || r->type != type) return false;
  for (size_t i = 0; i < f->instructions.len; i++) {
    const kiln_hlo_instruction_t *p = f->instructions.data[i];
    if (p->opcode != KILN_OP_PARAMETER) continue;
    if (!p->shape || !kiln_shape_is_array(p->shape) || p->shape->rank != 0 ||
        p->shape->type != type)
      return false;
  }
  return true;
}

static bool default_layout(const kiln_shape_t *s) {
  return !s->has_layout || kiln_layout_is_default(&s->layout);
}

/* Every participant's rank in its group (ranks[q], q = replica * P + partition) and the
 * common group size; false when the world or the groups cannot be resolved or differ in
 * size. */
static bool group_ranks(const kiln_hlo_module_t *m, const kiln_hlo_instruction_t *in, int *R,
                        int *P, int *size, int **ranks) {
  kiln_status s = kiln_eval_spmd_world_size(m, R, P);
  if (s) {
    kiln_status_free(s);
    return false;
  }
  int n = *R * *P;
  if (n < 1 || n > MAX_PARTICIPANTS) return false;
  int *r = kiln_malloc(sizeof(int) * (size_t)n);
  if (!r) return false;
  *size = 0;
  for (int q = 0; q < n; q++) {
    kiln_hlo_collective_group_t g;
    memset(&g, 0, sizeof g);
    s = kiln_hlo_collective_group_resolve(in, *R, *P, q, NULL, &g);
    if (s) {
      kiln_status_free(s);
      kiln_free(r);
      return false;
    }
    bool same = q == 0 || g.size == *size;
    *size = g.size;
    r[q] = g.rank;
    kiln_hlo_collective_group_free(&g);
    if (!same || *size < 1) {
      kiln_free(r);
      return false;
    }
  }
  *ranks = r;
  return true;
}

/* The s32 scalar rank of the running participant: table[replica-id * P + partition-id]. */
static kiln_hlo_instruction_t *own_rank(kiln_builder_t *b, const int *ranks, int R, int P) {
  int64_t n = (int64_t)R * P;
  kiln_shape_t *ts = kiln_builder_shape(b, KILN_S32, 1, &n);
  kiln_literal_t *l = ts ? kiln_literal_make(&b->m->arena, ts) : NULL;
  if (!l) {
    b->failed = true;
    return NULL;
  }
  for (int64_t q = 0; q < n; q++) kiln_literal_set_s64(l, q, ranks[q]);
  kiln_hlo_instruction_t *table = kiln_builder_op(b, KILN_OP_CONSTANT, ts, 0, NULL);
  if (!table) return NULL;
  table->literal = l;
  kiln_shape_t *u32 = kiln_builder_shape(b, KILN_U32, 0, NULL);
  kiln_hlo_instruction_t *rid = kiln_builder_op(b, KILN_OP_REPLICA_ID, u32, 0, NULL);
  kiln_hlo_instruction_t *pid = kiln_builder_op(b, KILN_OP_PARTITION_ID, u32, 0, NULL);
  kiln_hlo_instruction_t *idx = kiln_builder_binary(
      b, KILN_OP_ADD,
      kiln_builder_binary(b, KILN_OP_MULTIPLY, kiln_builder_convert(b, rid, KILN_S32),
                          kiln_builder_const_u64(b, KILN_S32, (uint64_t)P)),
      kiln_builder_convert(b, pid, KILN_S32));
  int64_t one = 1;
  kiln_hlo_instruction_t *r = kiln_builder_dynamic_slice(b, table, &idx, &one);
  return kiln_builder_reshape(b, r, 0, NULL);
}

static kiln_hlo_instruction_t *expand(kiln_builder_t *b, kiln_hlo_instruction_t *in) {
  const kiln_shape_t *out = in->shape;
  kiln_hlo_computation_t *f = kiln_hlo_instruction_called(in, "to_apply");
  if (in->num_operands != 1 || !out || !kiln_shape_is_array(out) || in->constrain_layout ||
      kiln_coll_has_control_edges(in) || !f || folded_by_runtime(f) || !scalar_binary(f, out->type))
    return NULL;
  kiln_hlo_instruction_t *x = in->operands[0];
  if (!x->shape || !kiln_shape_is_array(x->shape) || x->shape->rank >= MAX_RANK) return NULL;
  bool scatter = in->opcode == KILN_OP_REDUCE_SCATTER;
  int d = -1;
  if (scatter) {
    if (!in->has_dimensions || in->dimensions.n != 1) return NULL;
    d = (int)in->dimensions.v[0];
    if (d < 0 || d >= out->rank) return NULL;
  }
  int R = 1, P = 1, G = 0, *ranks = NULL;
  if (!group_ranks(b->m, in, &R, &P, &G, &ranks)) return NULL;
  int r = x->shape->rank;
  int64_t dims[MAX_RANK + 1];
  dims[0] = 1;
  for (int k = 0; k < r; k++) dims[k + 1] = x->shape->dims[k];
  bool fits = !scatter || x->shape->dims[d] == (int64_t)G * out->dims[d];
  for (int k = 0; !scatter && k < r; k++) fits = fits && x->shape->dims[k] == out->dims[k];
  kiln_hlo_instruction_t *acc = NULL;
  if (fits) {
    /* all-gather(reshape(x) to [1, ...]) along dimension 0: [G, ...], member k's at k. */
    kiln_hlo_instruction_t *one = kiln_builder_reshape(b, x, r + 1, dims);
    dims[0] = G;
    kiln_shape_t *gs = kiln_builder_shape(b, x->shape->type, r + 1, dims);
    char *name = kiln_hlo_module_unique_name(b->m, "all-gather");
    kiln_hlo_instruction_t *ag =
        one && gs && name ? kiln_hlo_instruction_clone(b->c, in, name, 1, &one) : NULL;
    if (ag) {
      ag->opcode = KILN_OP_ALL_GATHER;
      ag->shape = gs;
      ag->num_called_groups = 0;
      ag->called_groups = NULL;
      ag->has_dimensions = true;
      ag->dimensions.n = 1;
      ag->dimensions.v = kiln_arena_alloc(&b->m->arena, sizeof(int64_t));
      if (ag->dimensions.v) ag->dimensions.v[0] = 0;
    }
    if (!ag || !ag->dimensions.v) b->failed = true;
    kiln_hlo_instruction_t *src = b->failed ? NULL : ag;
    if (scatter && src) { /* the participant's share of dimension d, every member's */
      kiln_hlo_instruction_t *zero = kiln_builder_const_u64(b, KILN_S32, 0);
      kiln_hlo_instruction_t *off =
          kiln_builder_binary(b, KILN_OP_MULTIPLY, own_rank(b, ranks, R, P),
                              kiln_builder_const_u64(b, KILN_S32, (uint64_t)out->dims[d]));
      kiln_hlo_instruction_t *starts[MAX_RANK + 1];
      for (int k = 0; k <= r; k++) starts[k] = k == d + 1 ? off : zero;
      dims[d + 1] = out->dims[d];
      src = kiln_builder_dynamic_slice(b, src, starts, dims);
    }
    for (int k = 0; k < G && src; k++) {
      kiln_hlo_instruction_t *part =
          kiln_builder_reshape(b, kiln_builder_slice_dim(b, src, 0, k, k + 1), r, dims + 1);
      if (k == 0) {
        acc = part;
        continue;
      }
      kiln_hlo_instruction_t *ops[2] = {acc, part};
      acc = kiln_builder_op(b, KILN_OP_MAP, kiln_builder_shape(b, out->type, r, dims + 1), 2, ops);
      if (!acc) break;
      kiln_hlo_instruction_add_called(acc, "to_apply", false, 1, &f);
      acc->has_dimensions = true;
      acc->dimensions.n = r;
      acc->dimensions.v = r ? kiln_arena_alloc(&b->m->arena, sizeof(int64_t) * (size_t)r) : NULL;
      if (r && !acc->dimensions.v) {
        b->failed = true;
        acc = NULL;
        break;
      }
      for (int k2 = 0; k2 < r; k2++) acc->dimensions.v[k2] = k2;
    }
  }
  kiln_free(ranks);
  if (acc && !default_layout(out)) { /* the fold is in the default layout: copy into out's */
    kiln_shape_t *os = kiln_shape_clone(&b->m->arena, out);
    acc = os ? kiln_builder_op(b, KILN_OP_COPY, os, 1, &acc) : NULL;
    if (!acc) b->failed = true;
  }
  return acc;
}

static bool reduces(kiln_hlo_opcode_t op) {
  return op == KILN_OP_ALL_REDUCE || op == KILN_OP_REDUCE_SCATTER || op == KILN_OP_ALL_REDUCE_DONE;
}

/* An all-reduce, a reduce-scatter, or the done of an all-reduce-start (single-operand, the
 * done its only user: the pair as written in the input, before async_collective_creator),
 * which is expanded as the all-reduce it stands for. */
static kiln_status expand_one(void *ctx, kiln_hlo_instruction_t *in, bool *replaced) {
  (void)ctx;
  if (!reduces(in->opcode)) return KILN_STATUS_OK;
  kiln_hlo_instruction_t *start = NULL, *done = in;
  if (in->opcode == KILN_OP_ALL_REDUCE_DONE) {
    start = in->num_operands == 1 ? in->operands[0] : NULL;
    if (!start || start->opcode != KILN_OP_ALL_REDUCE_START || start->users.len != 1 ||
        start->num_operands != 1 || kiln_coll_has_control_edges(in) || !start->shape ||
        !in->shape || !kiln_shape_is_array(start->shape))
      return KILN_STATUS_OK;
    in = start;
  }
  kiln_builder_t b;
  kiln_builder_init(&b, in->parent, NULL, in->shape && in->shape->has_layout);
  kiln_hlo_instruction_t *r = expand(&b, in);
  if (b.failed)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                            "collective_reducer_expander: out of memory expanding '%s'", in->name);
  if (!r) return KILN_STATUS_OK;
  kiln_hlo_instruction_replace_all_uses(done, r);
  *replaced = true;
  if (start) KILN_RETURN_IF_ERROR_PLAIN(kiln_hlo_instruction_remove(done));
  return kiln_hlo_instruction_remove(in); /* a collective: nothing removes it as dead */
}

kiln_status kiln_pass_collective_reducer_expander(kiln_hlo_module_t *m,
                                                  const kiln_pass_options_t *opts, bool *changed) {
  (void)opts;
  return kiln_coll_rewrite_each(m, reduces, expand_one, NULL, changed);
}
