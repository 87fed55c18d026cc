/* reduce_scatter_creator (XLA's ReduceScatterCreator): an all-reduce whose only user is a
 * dynamic-slice that keeps, on every participant, exactly that participant's share of one
 * dimension — offset rank * (dim / group size) there, 0 elsewhere — becomes a reduce-scatter
 * over that dimension, which moves 1/group-size of the data each participant reads.
 *
 * The offsets are checked, not pattern-matched: each start index is a scalar integer
 * expression of replica-id, partition-id and constants (constants, convert, reshape, bitcast,
 * copy, dynamic-slice of a 1-D constant table, add, subtract, multiply, divide, remainder,
 * minimum, maximum, clamp), evaluated for every participant of the module's world
 * (kiln_eval_spmd_world_size, at most 4096 participants) with the dynamic-slice's clamping,
 * against the participant's rank in its group (kiln_hlo_collective_group_resolve: every
 * group mode). Anything else — another user, control edges, constrain_layout, unequal groups,
 * an index the evaluator above cannot compute, a single participant that does not match —
 * leaves the pair as it is. The reduce-scatter keeps the all-reduce's groups, channel,
 * use_global_device_ids and reducer, so each element is reduced over the same group in the
 * same order as before. */
#include <string.h>

#include "compiler/eval/eval.h"
#include "compiler/hlo/collective_groups.h"
#include "compiler/passes/collective_util.h"
#include "compiler/passes/pass.h"

#define MAX_PARTICIPANTS 4096
#define MAX_DEPTH 16

/* The value of scalar integer expression `in` on participant (r, p); false when it is not one
 * this pass computes. */
static bool scalar_value(const kiln_hlo_instruction_t *in, int64_t r, int64_t p, int depth,
                         int64_t *out) {
  if (depth > MAX_DEPTH || !in->shape || !kiln_shape_is_array(in->shape) ||
      !(kiln_elem_type_is_integral(in->shape->type)) || kiln_shape_num_elements(in->shape) != 1)
    return false;
  int64_t a = 0, b = 0, c = 0;
  switch (in->opcode) {
    case KILN_OP_CONSTANT:
      if (!in->literal || in->literal->unknown) return false;
      *out = kiln_elem_type_is_signed_int(in->shape->type)
                 ? kiln_literal_get_s64(in->literal, 0)
                 : (int64_t)kiln_literal_get_u64(in->literal, 0);
      return true;
    case KILN_OP_REPLICA_ID:
      *out = r;
      return true;
    case KILN_OP_PARTITION_ID:
      *out = p;
      return true;
    case KILN_OP_CONVERT:
    case KILN_OP_RESHAPE:
    case KILN_OP_BITCAST:
    case KILN_OP_COPY:
      return in->num_operands == 1 && scalar_value(in->operands[0], r, p, depth + 1, out);
    case KILN_OP_DYNAMIC_SLICE: {
      const kiln_hlo_instruction_t *t = in->operands[0];
      if (in->num_operands != 2 || t->opcode != KILN_OP_CONSTANT || !t->literal ||
          t->literal->unknown || !t->shape || t->shape->rank != 1 ||
          !kiln_elem_type_is_integral(t->shape->type) ||
          !scalar_value(in->operands[1], r, p, depth + 1, &a))
        return false;
      int64_t n = t->shape->dims[0];
      if (n < 1) return false;
      a = a < 0 ? 0 : a > n - 1 ? n - 1 : a;
      *out = kiln_elem_type_is_signed_int(t->shape->type)
                 ? kiln_literal_get_s64(t->literal, a)
                 : (int64_t)kiln_literal_get_u64(t->literal, a);
      return true;
    }
    case KILN_OP_ADD:
    case KILN_OP_SUBTRACT:
    case KILN_OP_MULTIPLY:
    case KILN_OP_DIVIDE:
    case KILN_OP_REMAINDER:
    case KILN_OP_MINIMUM:
    case KILN_OP_MAXIMUM:
      if (in->num_operands != 2 || !scalar_value(in->operands[0], r, p, depth + 1, &a) ||
          !scalar_value(in->operands[1], r, p, depth + 1, &b))
        return false;
      if (a < -(INT64_C(1) << 31) || a > (INT64_C(1) << 32) || b < -(INT64_C(1) << 31) ||
          b > (INT64_C(1) << 32))
        return false; /* keep to values no wrap-around of a 32-bit type could change */
      switch (in->opcode) {
        case KILN_OP_ADD:
          *out = a + b;
          return true;
        case KILN_OP_SUBTRACT:
          *out = a - b;
          return true;
        case KILN_OP_MULTIPLY:
          *out = a * b;
          return true;
        case KILN_OP_DIVIDE:
          if (b == 0) return false;
          *out = a / b;
          return true;
        case KILN_OP_REMAINDER:
          if (b == 0) return false;
          *out = a % b;
          return true;
        case KILN_OP_MINIMUM:
          *out = a < b ? a : b;
          return true;
        default:
          *out = a > b ? a : b;
          return true;
      }
    case KILN_OP_CLAMP:
      if (in->num_operands != 3 || !scalar_value(in->operands[0], r, p, depth + 1, &a) ||
          !scalar_value(in->operands[1], r, p, depth + 1, &b) ||
          !scalar_value(in->operands[2], r, p, depth + 1, &c))
        return false;
      *out = b < a ? a : b > c ? c : b;
      return true;
    default:
      return false;
  }
}

/* The dimension `ds` scatters `ar` over, or -1. */
static int scatter_dim(const kiln_hlo_instruction_t *ar, const kiln_hlo_instruction_t *ds) {
  const kiln_shape_t *full = ar->shape, *part = ds->shape;
  if (!part || !kiln_shape_is_array(part) || part->rank != full->rank ||
      ds->num_operands != 1 + full->rank)
    return -1;
  int d = -1;
  for (int k = 0; k < full->rank; k++) {
    if (part->dims[k] == full->dims[k]) continue;
    if (d >= 0 || part->dims[k] < 1 || full->dims[k] % part->dims[k]) return -1;
    d = k;
  }
  return d;
}

/* Whether every participant's slice is its share of dimension d. */
static bool slices_are_shares(const kiln_hlo_module_t *m, const kiln_hlo_instruction_t *ar,
                              const kiln_hlo_instruction_t *ds, int d) {
  int R = 1, P = 1;
  kiln_status s = kiln_eval_spmd_world_size(m, &R, &P);
  if (s) {
    kiln_status_free(s);
    return false;
  }
  if ((int64_t)R * P > MAX_PARTICIPANTS) return false;
  int64_t part = ds->shape->dims[d], whole = ar->shape->dims[d];
  for (int q = 0; q < R * P; q++) {
    kiln_hlo_collective_group_t g;
    memset(&g, 0, sizeof g);
    s = kiln_hlo_collective_group_resolve(ar, R, P, q, NULL, &g);
    if (s) {
      kiln_status_free(s);
      return false;
    }
    int size = g.size, rank = g.rank;
    kiln_hlo_collective_group_free(&g);
    if ((int64_t)size * part != whole) return false;
    for (int k = 0; k < ar->shape->rank; k++) {
      int64_t v;
      if (!scalar_value(ds->operands[1 + k], q / P, q % P, 0, &v)) return false;
      int64_t hi = ar->shape->dims[k] - ds->shape->dims[k];
      v = v < 0 ? 0 : v > hi ? hi : v;
      if (v != (k == d ? rank * part : 0)) return false;
    }
  }
  return true;
}

static bool is_all_reduce(kiln_hlo_opcode_t op) {
  return op == KILN_OP_ALL_REDUCE;
}

static kiln_status create_one(void *ctx, kiln_hlo_instruction_t *ar, bool *replaced) {
  kiln_hlo_module_t *m = ctx;
  kiln_hlo_computation_t *c = ar->parent;
  if (ar->opcode != KILN_OP_ALL_REDUCE || ar->num_operands != 1 || !ar->shape ||
      !kiln_shape_is_array(ar->shape) || ar->users.len != 1 || ar->constrain_layout ||
      kiln_coll_has_control_edges(ar) || c->root == ar)
    return KILN_STATUS_OK;
  kiln_hlo_instruction_t *ds = ar->users.data[0];
  if (ds->opcode != KILN_OP_DYNAMIC_SLICE || ds->operands[0] != ar ||
      kiln_coll_has_control_edges(ds))
    return KILN_STATUS_OK;
  int d = scatter_dim(ar, ds);
  if (d < 0 || !slices_are_shares(m, ar, ds, d)) return KILN_STATUS_OK;
  kiln_hlo_instruction_t *rs = kiln_hlo_instruction_clone(c, ar, NULL, 1, ar->operands);
  rs->opcode = KILN_OP_REDUCE_SCATTER;
  rs->name = kiln_hlo_module_unique_name(m, "reduce-scatter");
  rs->shape = kiln_shape_clone(&m->arena, ds->shape);
  rs->has_dimensions = true;
  rs->dimensions.n = 1;
  rs->dimensions.v = kiln_arena_alloc(&m->arena, sizeof(int64_t));
  rs->dimensions.v[0] = d;
  kiln_hlo_instruction_replace_all_uses(ds, rs);
  *replaced = true;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_hlo_instruction_remove(ds));
  return kiln_hlo_instruction_remove(ar);
}

kiln_status kiln_pass_reduce_scatter_creator(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                             bool *changed) {
  (void)opts;
  return kiln_coll_rewrite_each(m, is_all_reduce, create_one, m, changed);
}
