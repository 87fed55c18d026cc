/* Shape inference, part 3: the per-instruction dispatch (kiln_shape_infer_instruction):
 * arity, attributes and called computations of every opcode, then the family functions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/hlo/collective_groups.h"
#include "compiler/hlo/replica_groups.h"
#include "compiler/hlo/shape_inference.h"
#include "compiler/hlo/shape_inference_internal.h"

static kiln_status arity_error(const kiln_hlo_instruction_t *in, const char *want) {
  return KILN_ERR_INVALID("%s expects %s operands, but has %d", kiln_hlo_opcode_name(in->opcode),
                          want, in->num_operands);
}

static kiln_status need_called(const kiln_hlo_instruction_t *in, const char *key,
                               kiln_hlo_computation_t **out) {
  *out = kiln_hlo_instruction_called(in, key);
  if (!*out)
    return KILN_ERR_INVALID("%s needs a %s= computation", kiln_hlo_opcode_name(in->opcode), key);
  return KILN_STATUS_OK;
}

/* A reducing collective's to_apply: (T[], T[]) -> T[] for each array operand's type T (the
 * one computation is applied to every operand on its own). */
static kiln_status need_collective_reducer(kiln_arena_t *a, const kiln_hlo_instruction_t *in, int n,
                                           const kiln_shape_t *const *ops) {
  kiln_hlo_computation_t *c;
  KILN_RETURN_IF_ERROR_PLAIN(need_called(in, "to_apply", &c));
  for (int i = 0; i < n; i++) {
    if (kiln_shape_is_tuple(ops[i])) continue;
    kiln_elem_type_t t = ops[i]->type;
    KILN_RETURN_IF_ERROR_PLAIN(
        kiln__check_reducer(a, kiln_hlo_opcode_name(in->opcode), c, 1, &t, &t));
  }
  return KILN_STATUS_OK;
}

static kiln_status need_single_dim(kiln_arena_t *a, const kiln_hlo_instruction_t *in,
                                   int64_t *dim) {
  if (in->dimensions.n != 1)
    return KILN_ERR_INVALID("%s needs dimensions={d} with one entry, but has %s",
                            kiln_hlo_opcode_name(in->opcode), kiln__list_str(a, &in->dimensions));
  *dim = in->dimensions.v[0];
  return KILN_STATUS_OK;
}

static bool is_token(const kiln_shape_t *s) {
  return s->type == KILN_TOKEN;
}

static kiln_status need_token(kiln_arena_t *a, const kiln_hlo_instruction_t *in, int i) {
  if (!is_token(in->operands[i]->shape))
    return KILN_ERR_INVALID("%s operand %d must be a token, but is %s",
                            kiln_hlo_opcode_name(in->opcode), i,
                            kiln__shape_str(a, in->operands[i]->shape));
  return KILN_STATUS_OK;
}

/* Result equal to the operand (one operand) or the tuple of operands (several). */
static kiln_status same_as_operands(kiln_arena_t *a, int n, const kiln_shape_t *const *ops,
                                    kiln_shape_t **out) {
  if (n == 1) {
    *out = (kiln_shape_t *)ops[0];
    return KILN_STATUS_OK;
  }
  return kiln_shape_infer_tuple(a, n, ops, out);
}

/* num_partitions of the module `in` sits in (1 when it does not say, XLA's default). */
static int64_t module_partitions(const kiln_hlo_instruction_t *in) {
  const kiln_hlo_module_t *m = in->parent ? in->parent->module : NULL;
  for (int i = 0; m && i < m->num_raw_attrs; i++)
    if (!strcmp(m->raw_attrs[i].key, "num_partitions")) {
      long long p = strtoll(m->raw_attrs[i].value, NULL, 10);
      return p > 0 ? p : 1;
    }
  return 1;
}

/* Checks the replica_groups of `in` and returns in *shards the size every group shares, or
 * 0 when the module leaves it to run time ({} or no groups). `equal_sizes`: the op splits or
 * gathers data by group size, so every group must have the same size. The size is XLA's
 * subgroup size (its verifier's GetSubgroupSize): the ids of a group, times num_partitions in
 * cross-replica-and-partition mode (a channel_id without use_global_device_ids on all-gather,
 * reduce-scatter and all-reduce), where every partition of each named replica takes part. */
static kiln_status collective_shards(const kiln_hlo_instruction_t *in, bool equal_sizes,
                                     int64_t *shards) {
  *shards = 0;
  if (!in->replica_groups) return KILN_STATUS_OK;
  kiln_hlo_group_mode_t mode;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_hlo_collective_group_mode(in, &mode));
  kiln_hlo_replica_groups_t g;
  KILN_RETURN_IF_ERROR(kiln_hlo_replica_groups_parse(in->replica_groups, &g), "%s",
                       kiln_hlo_opcode_name(in->opcode));
  kiln_status s = KILN_STATUS_OK;
  if (g.num_groups > 0 && g.group_size < 0 && equal_sizes)
    s = KILN_ERR_INVALID(
        "%s replica_groups=%s: every group must have the same size, since the "
        "data is split or gathered by group size",
        kiln_hlo_opcode_name(in->opcode), in->replica_groups);
  else if (g.group_size > 0)
    *shards =
        g.group_size * (mode == KILN_GROUP_CROSS_REPLICA_AND_PARTITION ? module_partitions(in) : 1);
  kiln_hlo_replica_groups_free(&g);
  return s;
}

/* collective-permute(-start): its source_target_pairs are well formed when written. */
static kiln_status check_permute_pairs(const kiln_hlo_instruction_t *in) {
  const char *pairs = kiln_hlo_instruction_raw_attr(in, "source_target_pairs");
  int num_pairs;
  if (!pairs) return KILN_STATUS_OK;
  KILN_RETURN_IF_ERROR(kiln_hlo_source_target_pairs_check(pairs, &num_pairs), "%s",
                       kiln_hlo_opcode_name(in->opcode));
  return KILN_STATUS_OK;
}

/* ragged-all-to-all: input and output arrays of one element type whose rows (every dimension
 * but the first) agree; the four offset / size operands of one s32 or s64 shape of rank 1 or
 * 2 (XLA's verifier), their element count a multiple of the group size. */
static kiln_status check_ragged_all_to_all(kiln_arena_t *a, const kiln_hlo_instruction_t *in,
                                           const kiln_shape_t *const *ops) {
  const kiln_shape_t *x = ops[0], *y = ops[1];
  if (!kiln_shape_is_array(x) || !kiln_shape_is_array(y) || x->type != y->type || x->rank < 1 ||
      x->rank != y->rank)
    return KILN_ERR_INVALID(
        "ragged-all-to-all input %s and output %s must be arrays of one element type and rank "
        ">= 1",
        kiln__shape_str(a, x), kiln__shape_str(a, y));
  for (int d = 1; d < x->rank; d++)
    if (x->dims[d] != y->dims[d])
      return KILN_ERR_INVALID(
          "ragged-all-to-all input %s and output %s must agree in every dimension but the "
          "first (dimension %d)",
          kiln__shape_str(a, x), kiln__shape_str(a, y), d);
  static const char *const names[] = {"input_offsets", "send_sizes", "output_offsets",
                                      "recv_sizes"};
  for (int i = 2; i < 6; i++) {
    const kiln_shape_t *m = ops[i];
    if (!kiln_shape_is_array(m) || (m->type != KILN_S32 && m->type != KILN_S64) ||
        (m->rank != 1 && m->rank != 2))
      return KILN_ERR_INVALID(
          "ragged-all-to-all %s (operand %d) must be s32 or s64 of rank 1 or "
          "2, but is %s",
          names[i - 2], i, kiln__shape_str(a, m));
    if (!kiln_shape_compatible(m, ops[2]))
      return KILN_ERR_INVALID("ragged-all-to-all %s %s differs from input_offsets %s", names[i - 2],
                              kiln__shape_str(a, m), kiln__shape_str(a, ops[2]));
  }
  int64_t shards = 0;
  KILN_RETURN_IF_ERROR_PLAIN(collective_shards(in, false, &shards));
  int64_t count = kiln_shape_num_elements(ops[2]);
  if (shards > 0 && count % shards)
    return KILN_ERR_INVALID(
        "ragged-all-to-all over groups of %lld: its %lld offsets must be a multiple of the "
        "group size (one run of updates per peer)",
        (long long)shards, (long long)count);
  return KILN_STATUS_OK;
}

/* Group checks of a collective whose shapes do not depend on the group size. */
static kiln_status check_groups(const kiln_hlo_instruction_t *in) {
  int64_t shards;
  return collective_shards(in, false, &shards);
}

/* all-gather (grow) / reduce-scatter (shrink) along `dim`: every other dimension and the
 * element type equal, the gathered size `shards` times the scattered one (a multiple of it
 * when `shards` is 0, i.e. decided at run time). */
static kiln_status check_gather_scatter_collective(kiln_arena_t *a, const char *op,
                                                   const kiln_shape_t *in, const kiln_shape_t *res,
                                                   int64_t dim, bool grow, int64_t shards) {
  if (!kiln_shape_is_array(in) || !kiln_shape_is_array(res) || in->type != res->type ||
      in->rank != res->rank || dim < 0 || dim >= in->rank)
    return KILN_ERR_INVALID(
        "%s operand %s and result %s must be arrays of the same type and rank with dimension %lld",
        op, kiln__shape_str(a, in), kiln__shape_str(a, res), (long long)dim);
  for (int i = 0; i < in->rank; i++) {
    if (i == dim) continue;
    if (in->dims[i] != res->dims[i])
      return KILN_ERR_INVALID("%s operand %s and result %s differ in dimension %d", op,
                              kiln__shape_str(a, in), kiln__shape_str(a, res), i);
  }
  int64_t big = grow ? res->dims[dim] : in->dims[dim],
          small = grow ? in->dims[dim] : res->dims[dim];
  if (shards > 0 && big != small * shards)
    return KILN_ERR_INVALID(
        "%s over groups of %lld: dimension %lld of %s must be %lld times that "
        "of %s",
        op, (long long)shards, (long long)dim, kiln__shape_str(a, grow ? res : in),
        (long long)shards, kiln__shape_str(a, grow ? in : res));
  if (small == 0 ? big != 0 : big % small != 0)
    return KILN_ERR_INVALID("%s: dimension %lld of %s must be a multiple of that of %s", op,
                            (long long)dim, kiln__shape_str(a, grow ? res : in),
                            kiln__shape_str(a, grow ? in : res));
  return KILN_STATUS_OK;
}

/* all-gather / reduce-scatter with one or several operands against result `res`. */
static kiln_status check_collective_list(kiln_arena_t *a, const kiln_hlo_instruction_t *in,
                                         const kiln_shape_t *const *ops, const kiln_shape_t *res,
                                         bool grow) {
  int64_t dim = 0, shards = 0;
  KILN_RETURN_IF_ERROR_PLAIN(need_single_dim(a, in, &dim));
  KILN_RETURN_IF_ERROR_PLAIN(collective_shards(in, true, &shards));
  const char *op = kiln_hlo_opcode_name(in->opcode);
  if (in->num_operands == 1 && !kiln_shape_is_tuple(res))
    return check_gather_scatter_collective(a, op, ops[0], res, dim, grow, shards);
  if (!kiln_shape_is_tuple(res) || res->num_elements != in->num_operands)
    return KILN_ERR_INVALID("%s with %d operands must return a tuple of %d arrays, but returns %s",
                            op, in->num_operands, in->num_operands, kiln__shape_str(a, res));
  for (int i = 0; i < in->num_operands; i++)
    KILN_RETURN_IF_ERROR_PLAIN(
        check_gather_scatter_collective(a, op, ops[i], res->elements[i], dim, grow, shards));
  return KILN_STATUS_OK;
}

/* The (operands, results) tuple an async start returns in current dumps; NULL for the older
 * form where the start returns the result itself. */
static const kiln_shape_t *async_pair_results(const kiln_shape_t *res, int n,
                                              const kiln_shape_t *const *ops) {
  if (!kiln_shape_is_tuple(res) || res->num_elements != 2) return NULL;
  const kiln_shape_t *first = res->elements[0];
  if (n == 1) return kiln_shape_compatible(first, ops[0]) ? res->elements[1] : NULL;
  if (!kiln_shape_is_tuple(first) || first->num_elements != n) return NULL;
  for (int i = 0; i < n; i++)
    if (!kiln_shape_compatible(first->elements[i], ops[i])) return NULL;
  return res->elements[1];
}

/* async-start / -update / -done (XLA's HloVerifier: the start returns ((operands...), the
 * called computation's result, context...); -update keeps that shape and -done returns the
 * result; each continues an async-start or -update, and a `calls=` there names the start's). */
static kiln_status infer_async(kiln_arena_t *a, const kiln_hlo_instruction_t *in,
                               const kiln_shape_t *const *ops, const kiln_shape_t *res,
                               kiln_shape_t **out) {
  int n = in->num_operands;
  const char *op = kiln_hlo_opcode_name(in->opcode);
  kiln_hlo_computation_t *callee = kiln_hlo_instruction_called(in, "calls");
  if (in->opcode == KILN_OP_ASYNC_START) {
    if (!callee || !callee->root || !callee->root->shape)
      return KILN_ERR_INVALID("async-start needs a calls= computation");
    if (callee->num_parameters != n)
      return KILN_ERR_INVALID("async-start has %d operands, but its computation '%s' takes %d", n,
                              callee->name, callee->num_parameters);
    for (int i = 0; i < n; i++)
      if (!callee->parameters[i] || !callee->parameters[i]->shape ||
          !kiln_shape_compatible(callee->parameters[i]->shape, ops[i]))
        return KILN_ERR_INVALID("async-start operand %d is %s, but '%s' takes %s", i,
                                kiln__shape_str(a, ops[i]), callee->name,
                                callee->parameters[i] && callee->parameters[i]->shape
                                    ? kiln__shape_str(a, callee->parameters[i]->shape)
                                    : "no shape");
    bool ok = kiln_shape_is_tuple(res) && res->num_elements >= 2 &&
              kiln_shape_is_tuple(res->elements[0]) && res->elements[0]->num_elements == n &&
              kiln_shape_compatible(res->elements[1], callee->root->shape);
    for (int i = 0; ok && i < n; i++)
      ok = kiln_shape_compatible(res->elements[0]->elements[i], ops[i]);
    if (!ok)
      return KILN_ERR_INVALID(
          "async-start must return ((operands...), %s, context...) for '%s', "
          "but returns %s",
          kiln__shape_str(a, callee->root->shape), callee->name, kiln__shape_str(a, res));
    return KILN_STATUS_OK;
  }
  if (n != 1) return arity_error(in, "1");
  const kiln_hlo_instruction_t *prev = in->operands[0];
  if (prev->opcode != KILN_OP_ASYNC_START && prev->opcode != KILN_OP_ASYNC_UPDATE)
    return KILN_ERR_INVALID("%s operand '%s' must be an async-start or async-update, but is %s", op,
                            prev->name, kiln_hlo_opcode_name(prev->opcode));
  if (!kiln_shape_is_tuple(ops[0]) || ops[0]->num_elements < 2)
    return KILN_ERR_INVALID("%s operand must be ((operands...), result, context...), but is %s", op,
                            kiln__shape_str(a, ops[0]));
  const kiln_hlo_instruction_t *start = prev;
  for (int hops = 0;
       start->opcode == KILN_OP_ASYNC_UPDATE && start->num_operands == 1 && hops < 1 << 20; hops++)
    start = start->operands[0];
  kiln_hlo_computation_t *theirs = kiln_hlo_instruction_called(start, "calls");
  if (callee && theirs && callee != theirs)
    return KILN_ERR_INVALID("%s names calls=%s, but its async-start '%s' calls %s", op,
                            callee->name, start->name, theirs->name);
  *out = in->opcode == KILN_OP_ASYNC_UPDATE ? prev->shape : ops[0]->elements[1];
  return KILN_STATUS_OK;
}

static int64_t raw_int_attr(const kiln_hlo_instruction_t *in, const char *key, int64_t dflt) {
  const char *v = kiln_hlo_instruction_raw_attr(in, key);
  if (!v) return dflt;
  char *end;
  long long x = strtoll(v, &end, 10);
  return end == v ? dflt : (int64_t)x;
}

static kiln_status infer_batch_norm(kiln_arena_t *a, const kiln_hlo_instruction_t *in,
                                    const kiln_shape_t *const *ops, kiln_shape_t **out) {
  const char *op = kiln_hlo_opcode_name(in->opcode);
  const kiln_shape_t *x = ops[0];
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "batch-norm operand", x));
  if (!kiln_elem_type_is_float(x->type))
    return KILN_ERR_INVALID("%s operand must be floating-point, but is %s", op,
                            kiln__shape_str(a, x));
  int64_t f = raw_int_attr(in, "feature_index", -1);
  if (f < 0 || f >= x->rank)
    return KILN_ERR_INVALID("%s feature_index=%lld is out of range for %s", op, (long long)f,
                            kiln__shape_str(a, x));
  int64_t fdim = x->dims[f];
  kiln_shape_t *feat = kiln__array(a, x->type, 1, &fdim);
  if (!feat) return kiln__oom();
  /* training: (x, scale, offset); inference: (x, scale, offset, mean, var);
   * grad: (x, scale, mean, var, grad_output), grad_output shaped like x. */
  for (int i = 1; i < in->num_operands; i++) {
    bool like_x = in->opcode == KILN_OP_BATCH_NORM_GRAD && i == 4;
    const kiln_shape_t *want = like_x ? x : feat;
    if (!kiln_shape_compatible(ops[i], want))
      return KILN_ERR_INVALID("%s operand %d must be %s, but is %s", op, i,
                              kiln__shape_str(a, want), kiln__shape_str(a, ops[i]));
  }
  if (in->opcode == KILN_OP_BATCH_NORM_INFERENCE) {
    *out = (kiln_shape_t *)x;
    return KILN_STATUS_OK;
  }
  kiln_shape_t *e[3] = {(kiln_shape_t *)x, feat, feat};
  *out = kiln_shape_make_tuple(a, 3, e);
  return *out ? KILN_STATUS_OK : kiln__oom();
}

static kiln_status infer_rng(kiln_arena_t *a, const kiln_hlo_instruction_t *in,
                             const kiln_shape_t *const *ops) {
  const kiln_shape_t *res = in->shape;
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "rng result", res));
  if (in->num_operands != 2) return arity_error(in, "2");
  for (int i = 0; i < 2; i++)
    if (!kiln__is_scalar(ops[i]) || ops[i]->type != res->type)
      return KILN_ERR_INVALID("rng parameter %d must be a %s scalar, but is %s", i,
                              kiln_elem_type_name(res->type), kiln__shape_str(a, ops[i]));
  if (in->rng_distribution && strcmp(in->rng_distribution, "rng_normal") == 0 &&
      !kiln_elem_type_is_float(res->type))
    return KILN_ERR_INVALID("rng_normal needs a floating-point result, but has %s",
                            kiln__shape_str(a, res));
  return KILN_STATUS_OK;
}

static kiln_status infer_rng_bit_generator(kiln_arena_t *a, const kiln_hlo_instruction_t *in,
                                           const kiln_shape_t *state) {
  const kiln_shape_t *res = in->shape;
  /* XLA's own verifier accepts any array state (u64 in practice; the corpus has f32), so
   * only the (state, bits) result form is checked. */
  if (!kiln_shape_is_array(state))
    return KILN_ERR_INVALID("rng-bit-generator state must be an array, but is %s",
                            kiln__shape_str(a, state));
  if (!kiln_shape_is_tuple(res) || res->num_elements != 2 ||
      !kiln_shape_compatible(res->elements[0], state) || !kiln_shape_is_array(res->elements[1]))
    return KILN_ERR_INVALID("rng-bit-generator must return (state %s, bits array), but returns %s",
                            kiln__shape_str(a, state), kiln__shape_str(a, res));
  return KILN_STATUS_OK;
}

static kiln_status infer_dynamic_reshape(kiln_arena_t *a, const kiln_hlo_instruction_t *in,
                                         const kiln_shape_t *const *ops) {
  const kiln_shape_t *res = in->shape;
  if (in->num_operands < 1) return arity_error(in, "at least 1");
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "dynamic-reshape result", res));
  KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "dynamic-reshape operand", ops[0]));
  if (res->type != ops[0]->type || res->rank != in->num_operands - 1)
    return KILN_ERR_INVALID(
        "dynamic-reshape result %s must keep the element type of %s and have one size operand per "
        "dimension",
        kiln__shape_str(a, res), kiln__shape_str(a, ops[0]));
  for (int i = 1; i < in->num_operands; i++)
    if (!kiln__is_scalar(ops[i]) || !kiln_elem_type_is_integral(ops[i]->type))
      return KILN_ERR_INVALID(
          "dynamic-reshape size operand %d must be an integer scalar, but is %s", i,
          kiln__shape_str(a, ops[i]));
  return KILN_STATUS_OK;
}

kiln_status kiln_shape_infer_instruction(kiln_arena_t *a, const kiln_hlo_instruction_t *in,
                                         kiln_shape_t **out) {
  *out = NULL;
  kiln_hlo_opcode_t op = in->opcode;
  int n = in->num_operands;
  int arity = kiln_hlo_opcode_arity(op);
  if (arity >= 0 && n != arity) {
    char want[16];
    snprintf(want, sizeof want, "%d", arity);
    return arity_error(in, want);
  }
  const kiln_shape_t **ops = NULL;
  if (n > 0) {
    ops = kiln_arena_alloc(a, sizeof(*ops) * (size_t)n);
    if (!ops) return kiln__oom();
    for (int i = 0; i < n; i++) {
      if (!in->operands[i] || !in->operands[i]->shape)
        return KILN_ERR_INVALID("%s operand %d has no shape", kiln_hlo_opcode_name(op), i);
      ops[i] = in->operands[i]->shape;
      if (kiln_shape_is_array(ops[i]) && ops[i]->rank > 64)
        return KILN_ERR_INVALID("%s operand %d has rank %d; at most 64 is supported",
                                kiln_hlo_opcode_name(op), i, ops[i]->rank);
    }
  }
  const kiln_shape_t *res = in->shape;
  if (!res) return KILN_ERR_INVALID("%s has no shape", kiln_hlo_opcode_name(op));
  kiln_hlo_computation_t *c1, *c2;
  int64_t dim = 0;

  if (kiln_hlo_opcode_is_elementwise(op) && arity == 1 && op != KILN_OP_CONVERT &&
      op != KILN_OP_REDUCE_PRECISION)
    return kiln_shape_infer_unary(a, op, ops[0], out);
  switch (op) {
    case KILN_OP_ADD:
    case KILN_OP_SUBTRACT:
    case KILN_OP_MULTIPLY:
    case KILN_OP_DIVIDE:
    case KILN_OP_MAXIMUM:
    case KILN_OP_MINIMUM:
    case KILN_OP_REMAINDER:
    case KILN_OP_POWER:
    case KILN_OP_COMPARE:
    case KILN_OP_ATAN2:
    case KILN_OP_AND:
    case KILN_OP_OR:
    case KILN_OP_XOR:
    case KILN_OP_SHIFT_LEFT:
    case KILN_OP_SHIFT_RIGHT_ARITHMETIC:
    case KILN_OP_SHIFT_RIGHT_LOGICAL:
    case KILN_OP_COMPLEX:
      return kiln_shape_infer_binary(a, op, ops[0], ops[1], out);
    case KILN_OP_DOMAIN:
    case KILN_OP_OPTIMIZATION_BARRIER:
      return kiln_shape_infer_unary(a, op, ops[0], out);
    case KILN_OP_SELECT:
      return kiln_shape_infer_select(a, ops[0], ops[1], ops[2], out);
    case KILN_OP_CLAMP:
      return kiln_shape_infer_clamp(a, ops[0], ops[1], ops[2], out);
    case KILN_OP_CONVERT:
      return kiln_shape_infer_convert(a, ops[0], res->type, out);
    case KILN_OP_BITCAST_CONVERT:
      return kiln_shape_infer_bitcast_convert(a, ops[0], res->type, out);
    case KILN_OP_STOCHASTIC_CONVERT:
      return kiln_shape_infer_stochastic_convert(a, ops[0], ops[1], res->type, out);
    case KILN_OP_REDUCE_PRECISION:
      return kiln_shape_infer_reduce_precision(a, ops[0], in->exponent_bits, in->mantissa_bits,
                                               out);
    case KILN_OP_MAP:
      KILN_RETURN_IF_ERROR_PLAIN(need_called(in, "to_apply", &c1));
      return kiln_shape_infer_map(a, n, ops, in->has_dimensions ? &in->dimensions : NULL, c1, out);

    case KILN_OP_CONCATENATE:
      KILN_RETURN_IF_ERROR_PLAIN(need_single_dim(a, in, &dim));
      return kiln_shape_infer_concatenate(a, n, ops, dim, out);
    case KILN_OP_BROADCAST:
      return kiln_shape_check_broadcast(a, ops[0], &in->dimensions, res);
    case KILN_OP_TRANSPOSE:
      return kiln_shape_infer_transpose(a, ops[0], &in->dimensions, out);
    case KILN_OP_RESHAPE:
      return kiln_shape_check_reshape(a, ops[0], res);
    case KILN_OP_BITCAST:
      return kiln_shape_check_bitcast(a, ops[0], res);
    case KILN_OP_SLICE:
      return kiln_shape_infer_slice(a, ops[0], in->num_slice_dims, in->slice, out);
    case KILN_OP_DYNAMIC_SLICE:
      if (n < 2) return arity_error(in, "at least 2");
      return kiln_shape_infer_dynamic_slice(a, ops[0], n - 1, ops + 1, &in->dynamic_slice_sizes,
                                            out);
    case KILN_OP_DYNAMIC_UPDATE_SLICE:
      if (n < 3) return arity_error(in, "at least 3");
      return kiln_shape_infer_dynamic_update_slice(a, ops[0], ops[1], n - 2, ops + 2, out);
    case KILN_OP_PAD:
      return kiln_shape_infer_pad(a, ops[0], ops[1], in->num_pad_dims, in->padding, out);
    case KILN_OP_REVERSE:
      return kiln_shape_infer_reverse(a, ops[0], &in->dimensions, out);
    case KILN_OP_IOTA:
      return kiln_shape_check_iota(a, res, in->iota_dimension);
    case KILN_OP_GATHER:
      if (!in->has_gather_dnums) return KILN_ERR_INVALID("gather needs dimension numbers");
      return kiln_shape_infer_gather(a, ops[0], ops[1], &in->gather_dnums, &in->gather_slice_sizes,
                                     out);
    case KILN_OP_SCATTER:
      if (!in->has_scatter_dnums) return KILN_ERR_INVALID("scatter needs dimension numbers");
      KILN_RETURN_IF_ERROR_PLAIN(need_called(in, "to_apply", &c1));
      return kiln_shape_infer_scatter(a, n, ops, &in->scatter_dnums, c1, out);

    case KILN_OP_REDUCE:
      KILN_RETURN_IF_ERROR_PLAIN(need_called(in, "to_apply", &c1));
      return kiln_shape_infer_reduce(a, n, ops, &in->dimensions, c1, out);
    case KILN_OP_REDUCE_WINDOW:
      KILN_RETURN_IF_ERROR_PLAIN(need_called(in, "to_apply", &c1));
      return kiln_shape_infer_reduce_window(a, n, ops, in->num_window_dims, in->window, c1, out);
    case KILN_OP_SELECT_AND_SCATTER:
      KILN_RETURN_IF_ERROR_PLAIN(need_called(in, "select", &c1));
      KILN_RETURN_IF_ERROR_PLAIN(need_called(in, "scatter", &c2));
      return kiln_shape_infer_select_and_scatter(a, ops[0], ops[1], ops[2], in->num_window_dims,
                                                 in->window, c1, c2, out);
    case KILN_OP_SORT:
      KILN_RETURN_IF_ERROR_PLAIN(need_single_dim(a, in, &dim));
      KILN_RETURN_IF_ERROR_PLAIN(need_called(in, "to_apply", &c1));
      return kiln_shape_infer_sort(a, n, ops, dim, c1, out);
    case KILN_OP_DOT:
      KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "dot result", res));
      return kiln_shape_infer_dot(a, ops[0], ops[1], &in->dot_dnums, res->type, out);
    case KILN_OP_CONVOLUTION:
      KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "convolution result", res));
      if (!in->has_conv_dnums) return KILN_ERR_INVALID("convolution needs dim_labels");
      return kiln_shape_infer_convolution(a, ops[0], ops[1], &in->conv_dnums, in->num_window_dims,
                                          in->window, in->feature_group_count,
                                          in->batch_group_count, res->type, out);

    case KILN_OP_TUPLE:
      return kiln_shape_infer_tuple(a, n, ops, out);
    case KILN_OP_GET_TUPLE_ELEMENT:
      return kiln_shape_infer_get_tuple_element(a, ops[0], in->tuple_index, out);
    case KILN_OP_WHILE:
      KILN_RETURN_IF_ERROR_PLAIN(need_called(in, "condition", &c1));
      KILN_RETURN_IF_ERROR_PLAIN(need_called(in, "body", &c2));
      return kiln_shape_infer_while(a, ops[0], c1, c2, out);
    case KILN_OP_CONDITIONAL: {
      for (int g = 0; g < in->num_called_groups; g++)
        if (strcmp(in->called_groups[g].key, "branch_computations") == 0)
          return kiln_shape_infer_conditional(a, n, ops, in->called_groups[g].n,
                                              in->called_groups[g].comps, out);
      KILN_RETURN_IF_ERROR_PLAIN(need_called(in, "true_computation", &c1));
      KILN_RETURN_IF_ERROR_PLAIN(need_called(in, "false_computation", &c2));
      if (n < 1 || !kiln__is_scalar(ops[0]) || ops[0]->type != KILN_PRED)
        return KILN_ERR_INVALID("conditional with true/false computations needs a pred[] selector");
      kiln_hlo_computation_t *br[2] = {c1, c2};
      return kiln_shape_infer_conditional(a, n, ops, 2, br, out);
    }
    case KILN_OP_CALL:
      KILN_RETURN_IF_ERROR_PLAIN(need_called(in, "to_apply", &c1));
      return kiln_shape_infer_call(a, "call", n, ops, c1, out);
    case KILN_OP_FUSION:
      KILN_RETURN_IF_ERROR_PLAIN(need_called(in, "calls", &c1));
      return kiln_shape_infer_call(a, "fusion", n, ops, c1, out);
    case KILN_OP_CONSTANT:
      if (!in->literal) return KILN_ERR_INVALID("constant has no literal");
      if (in->literal->shape) *out = in->literal->shape;
      return KILN_STATUS_OK;
    case KILN_OP_PARAMETER:
      return KILN_STATUS_OK; /* checked against the computation by the verifier */

    case KILN_OP_CHOLESKY:
      return kiln_shape_infer_cholesky(a, ops[0], out);
    case KILN_OP_TRIANGULAR_SOLVE:
      return kiln_shape_infer_triangular_solve(a, ops[0], ops[1], in->left_side, out);
    case KILN_OP_FFT:
      return kiln_shape_infer_fft(a, ops[0], in->fft_type, &in->fft_length, out);
    case KILN_OP_TOPK:
      return kiln_shape_infer_topk(a, ops[0], in->k, out);
    case KILN_OP_BATCH_NORM_GRAD:
    case KILN_OP_BATCH_NORM_INFERENCE:
    case KILN_OP_BATCH_NORM_TRAINING:
      return infer_batch_norm(a, in, ops, out);
    case KILN_OP_RNG:
      return infer_rng(a, in, ops);
    case KILN_OP_RNG_BIT_GENERATOR:
      return infer_rng_bit_generator(a, in, ops[0]);
    case KILN_OP_RNG_GET_AND_UPDATE_STATE: {
      int64_t two = 2;
      *out = kiln__array(a, KILN_U64, 1, &two);
      return *out ? KILN_STATUS_OK : kiln__oom();
    }
    case KILN_OP_GET_DIMENSION_SIZE:
      KILN_RETURN_IF_ERROR_PLAIN(need_single_dim(a, in, &dim));
      KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "get-dimension-size operand", ops[0]));
      if (dim < 0 || dim >= ops[0]->rank)
        return KILN_ERR_INVALID("get-dimension-size dimension %lld is out of range for %s",
                                (long long)dim, kiln__shape_str(a, ops[0]));
      *out = kiln_shape_make_scalar(a, KILN_S32);
      return *out ? KILN_STATUS_OK : kiln__oom();
    case KILN_OP_SET_DIMENSION_SIZE:
      KILN_RETURN_IF_ERROR_PLAIN(need_single_dim(a, in, &dim));
      KILN_RETURN_IF_ERROR_PLAIN(kiln__require_array(a, "set-dimension-size operand", ops[0]));
      if (dim < 0 || dim >= ops[0]->rank)
        return KILN_ERR_INVALID("set-dimension-size dimension %lld is out of range for %s",
                                (long long)dim, kiln__shape_str(a, ops[0]));
      if (!kiln__is_scalar(ops[1]) || !kiln_elem_type_is_integral(ops[1]->type))
        return KILN_ERR_INVALID("set-dimension-size size must be an integer scalar, but is %s",
                                kiln__shape_str(a, ops[1]));
      *out = (kiln_shape_t *)ops[0];
      return KILN_STATUS_OK;
    case KILN_OP_DYNAMIC_RESHAPE:
      return infer_dynamic_reshape(a, in, ops);

    case KILN_OP_ADD_DEPENDENCY:
      KILN_RETURN_IF_ERROR_PLAIN(need_token(a, in, 1));
      *out = (kiln_shape_t *)ops[0];
      return KILN_STATUS_OK;
    case KILN_OP_AFTER_ALL:
      for (int i = 0; i < n; i++) KILN_RETURN_IF_ERROR_PLAIN(need_token(a, in, i));
      *out = kiln_shape_make_token(a);
      return *out ? KILN_STATUS_OK : kiln__oom();
    case KILN_OP_PARTITION_ID:
    case KILN_OP_REPLICA_ID:
      *out = kiln_shape_make_scalar(a, KILN_U32);
      return *out ? KILN_STATUS_OK : kiln__oom();
    case KILN_OP_INFEED:
    case KILN_OP_RECV:
      KILN_RETURN_IF_ERROR_PLAIN(need_token(a, in, 0));
      if (!kiln_shape_is_tuple(res) || res->num_elements < 2)
        return KILN_ERR_INVALID("%s must return a tuple (data, ..., token), but returns %s",
                                kiln_hlo_opcode_name(op), kiln__shape_str(a, res));
      return KILN_STATUS_OK;
    case KILN_OP_OUTFEED:
      KILN_RETURN_IF_ERROR_PLAIN(need_token(a, in, 1));
      *out = kiln_shape_make_token(a);
      return *out ? KILN_STATUS_OK : kiln__oom();
    case KILN_OP_SEND:
      KILN_RETURN_IF_ERROR_PLAIN(need_token(a, in, 1));
      if (!kiln_shape_is_tuple(res) || res->num_elements < 1 ||
          !kiln_shape_compatible(res->elements[0], ops[0]))
        return KILN_ERR_INVALID(
            "send must return a tuple starting with the data shape %s, but returns %s",
            kiln__shape_str(a, ops[0]), kiln__shape_str(a, res));
      return KILN_STATUS_OK;

    case KILN_OP_ALL_REDUCE_START:
      /* Older dumps give the start op the (operands, results) tuple of the async pair. */
      if (n >= 1 && kiln_shape_is_tuple(res) && res->num_elements == 2 * n) {
        KILN_RETURN_IF_ERROR_PLAIN(need_collective_reducer(a, in, n, ops));
        for (int i = 0; i < n; i++)
          if (!kiln_shape_compatible(res->elements[i], ops[i]) ||
              !kiln_shape_compatible(res->elements[n + i], ops[i]))
            return KILN_ERR_INVALID(
                "all-reduce-start's (operands, results) tuple %s must hold operand %d's shape %s "
                "at %d and %d",
                kiln__shape_str(a, res), i, kiln__shape_str(a, ops[i]), i, n + i);
        return check_groups(in);
      }
      /* fall through */
    case KILN_OP_ALL_REDUCE:
      if (n < 1) return arity_error(in, "at least 1");
      KILN_RETURN_IF_ERROR_PLAIN(need_collective_reducer(a, in, n, ops));
      KILN_RETURN_IF_ERROR_PLAIN(check_groups(in));
      return same_as_operands(a, n, ops, out);
    case KILN_OP_ALL_REDUCE_DONE:
      /* The done op of the older tuple form returns the results half of the tuple. */
      if (n == 1 && kiln_shape_is_tuple(ops[0]) && ops[0]->num_elements > 0 &&
          in->operands[0]->opcode == KILN_OP_ALL_REDUCE_START &&
          ops[0]->num_elements == 2 * in->operands[0]->num_operands) {
        int half = ops[0]->num_elements / 2;
        bool same = half == 1 ? kiln_shape_compatible(res, ops[0]->elements[1])
                              : kiln_shape_is_tuple(res) && res->num_elements == half;
        for (int i = 0; same && half > 1 && i < half; i++)
          same = kiln_shape_compatible(res->elements[i], ops[0]->elements[half + i]);
        if (!same)
          return KILN_ERR_INVALID(
              "all-reduce-done of %s must return the results half of it, but returns %s",
              kiln__shape_str(a, ops[0]), kiln__shape_str(a, res));
        return KILN_STATUS_OK;
      }
      /* fall through */
    case KILN_OP_COLLECTIVE_BROADCAST:
      if (n < 1) return arity_error(in, "at least 1");
      KILN_RETURN_IF_ERROR_PLAIN(check_groups(in));
      return same_as_operands(a, n, ops, out);
    case KILN_OP_COLLECTIVE_PERMUTE:
      if (n < 1) return arity_error(in, "at least 1");
      KILN_RETURN_IF_ERROR_PLAIN(check_permute_pairs(in));
      if (n == 1) *out = (kiln_shape_t *)ops[0];
      return KILN_STATUS_OK; /* the in-place / combined forms are accepted */
    case KILN_OP_COLLECTIVE_PERMUTE_START:
      if (n < 1) return arity_error(in, "at least 1");
      KILN_RETURN_IF_ERROR_PLAIN(check_permute_pairs(in));
      /* (operand, result, contexts...) in current dumps; the result itself in older ones. */
      if (n == 1 && !kiln_shape_is_tuple(res))
        *out = (kiln_shape_t *)ops[0];
      else if (n == 1 &&
               (res->num_elements < 2 || !kiln_shape_compatible(res->elements[0], ops[0]) ||
                !kiln_shape_compatible(res->elements[1], ops[0])))
        return KILN_ERR_INVALID(
            "collective-permute-start must return (%s, %s, contexts...), but "
            "returns %s",
            kiln__shape_str(a, ops[0]), kiln__shape_str(a, ops[0]), kiln__shape_str(a, res));
      return KILN_STATUS_OK;
    case KILN_OP_COLLECTIVE_PERMUTE_DONE:
      if (kiln_shape_is_tuple(ops[0]) && ops[0]->num_elements >= 2)
        *out = ops[0]->elements[1];
      else
        *out = (kiln_shape_t *)ops[0];
      return KILN_STATUS_OK;
    case KILN_OP_ALL_TO_ALL:
      if (n < 1) return arity_error(in, "at least 1");
      if (in->has_dimensions && n == 1) {
        int64_t shards = 0;
        KILN_RETURN_IF_ERROR_PLAIN(need_single_dim(a, in, &dim));
        KILN_RETURN_IF_ERROR_PLAIN(collective_shards(in, true, &shards));
        if (!kiln_shape_is_array(ops[0]) || dim < 0 || dim >= ops[0]->rank)
          return KILN_ERR_INVALID("all-to-all split dimension %lld is out of range for %s",
                                  (long long)dim, kiln__shape_str(a, ops[0]));
        if (shards > 0 && ops[0]->dims[dim] % shards != 0)
          return KILN_ERR_INVALID(
              "all-to-all over groups of %lld: split dimension %lld of %s "
              "must be a multiple of %lld",
              (long long)shards, (long long)dim, kiln__shape_str(a, ops[0]), (long long)shards);
        *out = (kiln_shape_t *)ops[0];
        return KILN_STATUS_OK;
      }
      return kiln_shape_infer_tuple(a, n, ops, out);
    case KILN_OP_ALL_GATHER_START: {
      if (n < 1) return arity_error(in, "at least 1");
      const kiln_shape_t *gathered = async_pair_results(res, n, ops);
      return check_collective_list(a, in, ops, gathered ? gathered : res, true);
    }
    case KILN_OP_ALL_GATHER_DONE:
      /* The pair form returns the results half; the older form passes the result on. */
      if (kiln_shape_is_tuple(ops[0]) && ops[0]->num_elements == 2)
        *out = ops[0]->elements[1];
      else
        *out = (kiln_shape_t *)ops[0];
      return KILN_STATUS_OK;
    case KILN_OP_ALL_GATHER:
      if (n < 1) return arity_error(in, "at least 1");
      return check_collective_list(a, in, ops, res, true);
    case KILN_OP_REDUCE_SCATTER:
      if (n < 1) return arity_error(in, "at least 1");
      KILN_RETURN_IF_ERROR_PLAIN(need_collective_reducer(a, in, n, ops));
      return check_collective_list(a, in, ops, res, false);
    case KILN_OP_RAGGED_ALL_TO_ALL: /* 6 operands: opcodes.def */
      KILN_RETURN_IF_ERROR_PLAIN(check_ragged_all_to_all(a, in, ops));
      if (!kiln_shape_compatible(res, ops[1]))
        return KILN_ERR_INVALID("ragged-all-to-all result %s must equal its output operand %s",
                                kiln__shape_str(a, res), kiln__shape_str(a, ops[1]));
      return KILN_STATUS_OK;
    case KILN_OP_ASYNC_START:
    case KILN_OP_ASYNC_UPDATE:
    case KILN_OP_ASYNC_DONE:
      return infer_async(a, in, ops, res, out);
    case KILN_OP_COPY_START:
      if (!kiln_shape_is_tuple(res) || res->num_elements < 2 ||
          !kiln_shape_compatible(res->elements[0], ops[0]) ||
          !kiln_shape_compatible(res->elements[1], ops[0]))
        return KILN_ERR_INVALID("copy-start must return (%s, %s, context), but returns %s",
                                kiln__shape_str(a, ops[0]), kiln__shape_str(a, ops[0]),
                                kiln__shape_str(a, res));
      return KILN_STATUS_OK;
    case KILN_OP_COPY_DONE:
      if (!kiln_shape_is_tuple(ops[0]) || ops[0]->num_elements < 1)
        return KILN_ERR_INVALID("copy-done operand must be a copy-start tuple, but is %s",
                                kiln__shape_str(a, ops[0]));
      *out = ops[0]->elements[0];
      return KILN_STATUS_OK;

    /* Results not determined by the operands: accepted (called computations exist by
     * construction and are checked structurally by the verifier). */
    case KILN_OP_CUSTOM_CALL:
    case KILN_OP_CUSTOM_CALL_START:
    case KILN_OP_CUSTOM_CALL_UPDATE:
    case KILN_OP_CUSTOM_CALL_DONE:
    case KILN_OP_SEND_DONE:
    case KILN_OP_RECV_DONE:
    case KILN_OP_SCAN:
    case KILN_OP_RAGGED_DOT:
    case KILN_OP_SCALED_DOT:
      return KILN_STATUS_OK;
    default:
      break;
  }
  return KILN_ERR_INVALID("no shape rule for opcode %s", kiln_hlo_opcode_name(op));
}
