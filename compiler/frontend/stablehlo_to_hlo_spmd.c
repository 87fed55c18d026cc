/* `interpreter.run_parallel` (the StableHLO interpreter's tests of collectives): the programs
 * of a replicas x partitions process grid, emulated in one HLO computation. Every
 * participant's function is inlined, op by op in lockstep (the programs must have the same
 * op sequence), each participant with its own value map; replica_id / partition_id become
 * constants, and a collective becomes the explicit exchange among the participants' values
 * as the spec defines it (process groups from replica_groups / channel_id /
 * use_global_device_ids): all_reduce (map of the reducer over the group, in group order, for
 * each operand),
 * all_gather (concatenate), reduce_scatter (reduce, then the process's slice), all_to_all
 * (slices exchanged, concatenated), collective_permute (the source's value, zeros where
 * none), collective_broadcast (the group's first process's value, zeros outside groups),
 * collective_reduce (the group's reduction on its root, zeros elsewhere). */
#include <inttypes.h>
#include <string.h>

#include "compiler/frontend/stablehlo_to_hlo_internal.h"

#define SPMD_MAX 64

typedef struct spmd {
  int64_t R, P, N;
  const kiln_mlir_op_t *fn[SPMD_MAX];
  shc_scope_t scope[SPMD_MAX];
  /* process groups: group_of[k] = index into groups, -1 if none */
  int64_t groups[SPMD_MAX][SPMD_MAX];
  int64_t group_size[SPMD_MAX];
  int64_t num_groups;
  int64_t group_of[SPMD_MAX], pos_in_group[SPMD_MAX];
} spmd_t;

static const char *sym_str(const kiln_mlir_attr_t *a) {
  return a && (a->kind == KILN_MLIR_ATTR_SYMBOL_REF || a->kind == KILN_MLIR_ATTR_STRING) ? a->str
                                                                                         : NULL;
}

typedef enum { CROSS_REPLICA, CROSS_PARTITION, CROSS_REPLICA_AND_PARTITION, FLATTENED } mode_t_;

/* Fills s->groups from the op's groups attribute `name` under `mode`. */
static kiln_status make_groups(const kiln_mlir_op_t *op, spmd_t *s, const char *name,
                               mode_t_ mode) {
  const kiln_mlir_attr_t *a = kiln_mlir_op_attr(op, name);
  if (a && a->kind == KILN_MLIR_ATTR_STRUCT)
    return SHC_UNIMPL(op, "%s: mesh-axes groups are not run under interpreter.run_parallel", name);
  if (!a || a->kind != KILN_MLIR_ATTR_DENSE_ELEMENTS || !a->literal || !a->type ||
      a->type->rank != 2)
    return SHC_INVALID(op, "%s: expected a 2-D tensor", name);
  int64_t rows = a->type->dims[0], cols = a->type->dims[1];
  s->num_groups = 0;
  for (int64_t k = 0; k < s->N; k++) s->group_of[k] = -1;
  int64_t outer = mode == CROSS_REPLICA ? s->P : mode == CROSS_PARTITION ? s->R : 1;
  for (int64_t o = 0; o < outer; o++) {
    for (int64_t r = 0; r < rows; r++) {
      if (s->num_groups >= SPMD_MAX) return SHC_UNIMPL(op, "too many process groups");
      int64_t g = s->num_groups++, n = 0;
      int64_t inner = mode == CROSS_REPLICA_AND_PARTITION ? s->P : 1;
      for (int64_t ip = 0; ip < inner; ip++) {
        for (int64_t col = 0; col < cols; col++) {
          int64_t id = kiln_literal_get_s64(a->literal, r * cols + col);
          if (id < 0) continue;
          int64_t k;
          switch (mode) {
            case CROSS_REPLICA:
              k = id * s->P + o;
              break;
            case CROSS_PARTITION:
              k = o * s->P + id;
              break;
            case CROSS_REPLICA_AND_PARTITION:
              k = id * s->P + ip;
              break;
            default:
              k = id;
              break;
          }
          if (k < 0 || k >= s->N || (mode == CROSS_REPLICA && id >= s->R) ||
              (mode == CROSS_PARTITION && id >= s->P))
            return SHC_INVALID(op, "%s names process %" PRId64 " outside the grid", name, id);
          if (n >= SPMD_MAX) return SHC_UNIMPL(op, "process group too large");
          s->groups[g][n] = k;
          s->group_of[k] = g;
          s->pos_in_group[k] = n;
          n++;
        }
      }
      s->group_size[g] = n;
    }
  }
  return NULL;
}

static mode_t_ reduce_mode(const kiln_mlir_op_t *op) {
  int64_t ch = shc_channel_id(op);
  bool global = shc_attr_int(kiln_mlir_op_attr(op, "use_global_device_ids"), 0) != 0;
  if (ch <= 0 && !global) return CROSS_REPLICA;
  if (ch > 0 && !global) return CROSS_REPLICA_AND_PARTITION;
  return FLATTENED;
}

static const char *value_of(shc_ctx_t *c, spmd_t *s, int64_t k, const kiln_mlir_op_t *op, int32_t i,
                            kiln_status *st) {
  shc_scope_t *saved = c->cur;
  c->cur = &s->scope[k];
  const char *n = NULL;
  *st = shc_lookup(c, op->operands[i], &n);
  c->cur = saved;
  return n;
}

static int32_t rank_of(const kiln_mlir_type_t *t) {
  return t && t->kind == KILN_MLIR_TYPE_TENSOR ? t->rank : 0;
}

/* Zeros of `t`'s shape. */
static kiln_status zeros(shc_ctx_t *c, const kiln_mlir_type_t *t, const char **out) {
  const char *z, *sh;
  SHC_TRY(shc_scalar_const(c, shc_elem_type(t), 0, &z));
  SHC_TRY(shc_type_text(c, t, &sh));
  *out = shc_broadcast_scalar(c, z, sh, rank_of(t));
  return NULL;
}

/* The map of `body` over group g's values of operand j, in group order. */
static kiln_status group_reduce(shc_ctx_t *c, spmd_t *s, const kiln_mlir_op_t *const *ops,
                                int32_t j, int64_t g, const char *body, const char **out) {
  const kiln_mlir_type_t *ot = ops[0]->operands[j]->type;
  const char *osh;
  SHC_TRY(shc_type_text(c, ot, &osh));
  int32_t r = rank_of(ot);
  int64_t dims[64];
  for (int32_t i = 0; i < r && i < 64; i++) dims[i] = i;
  kiln_status st = NULL;
  const char *acc = value_of(c, s, s->groups[g][0], ops[s->groups[g][0]], j, &st);
  SHC_TRY(st);
  for (int64_t jj = 1; jj < s->group_size[g]; jj++) {
    const char *v = value_of(c, s, s->groups[g][jj], ops[s->groups[g][jj]], j, &st);
    SHC_TRY(st);
    acc = shc_emit(c, osh, "map(%s, %s), dimensions=%s, to_apply=%s", acc, v,
                   shc_ints_text(c, dims, r), body);
  }
  *out = acc;
  return NULL;
}

/* Process k's root for data operand j of an op with has_dynamic_root (its last operand holds
 * one root per data operand, an index into the group): a scalar; *et its element type. */
static kiln_status dynamic_root(shc_ctx_t *c, spmd_t *s, const kiln_mlir_op_t *const *ops,
                                int64_t k, int32_t j, const char **out, const char **et) {
  const kiln_mlir_op_t *op = ops[0];
  int32_t nres = op->num_results;
  if (op->num_operands != nres + 1) return SHC_INVALID(op, "expected a root operand");
  kiln_status st = NULL;
  const char *root = value_of(c, s, k, ops[k], nres, &st);
  SHC_TRY(st);
  SHC_TRY(shc_elem_text(shc_elem_type(op->operands[nres]->type), et));
  const char *r1 = shc_emit(c, kiln_arena_printf(&c->arena, "%s[1]", *et),
                            "slice(%s), slice={[%d:%d]}", root, (int)j, (int)j + 1);
  *out = shc_emit(c, kiln_arena_printf(&c->arena, "%s[]", *et), "reshape(%s)", r1);
  return NULL;
}

/* select(root == pos, v, otherwise), the scalar predicate broadcast to type t. */
static const char *select_at(shc_ctx_t *c, const kiln_mlir_type_t *t, const char *sh,
                             const char *root, const char *et, int64_t pos, const char *v,
                             const char *otherwise) {
  const char *idx =
      shc_emit(c, kiln_arena_printf(&c->arena, "%s[]", et), "constant(%" PRId64 ")", pos);
  const char *eq = shc_emit(c, "pred[]", "compare(%s, %s), direction=EQ", root, idx);
  const char *peq = shc_broadcast_scalar(c, eq, shc_pred_shape_text(c, t), rank_of(t));
  return shc_emit(c, sh, "select(%s, %s, %s)", peq, v, otherwise);
}

/* Result j of the same-position op of every participant (operand j). */
static kiln_status collective_one(shc_ctx_t *c, spmd_t *s, const kiln_mlir_op_t *const *ops,
                                  int32_t j, const char **res) {
  const kiln_mlir_op_t *op = ops[0];
  const char *n = op->name + 10;
  kiln_status st = NULL;
  /* A variadic all_reduce applies its computation to each operand on its own. */
  if (op->num_results != 1 && !strcmp(n, "reduce_scatter"))
    return SHC_UNIMPL(op, "variadic %s in run_parallel", n);
  const kiln_mlir_type_t *rt = op->results[j].type;
  const char *rsh;
  SHC_TRY(shc_type_text(c, rt, &rsh));
  if (!strcmp(n, "all_reduce") || !strcmp(n, "reduce_scatter")) {
    SHC_TRY(make_groups(op, s, "replica_groups", reduce_mode(op)));
    const char *body;
    SHC_TRY(shc_region_computation(c, op, &op->regions[0], false, &body));
    const kiln_mlir_type_t *ot = op->operands[j]->type;
    int32_t r = rank_of(ot);
    for (int64_t k = 0; k < s->N; k++) {
      int64_t g = s->group_of[k];
      if (g < 0) return SHC_INVALID(op, "process %" PRId64 " is in no group", k);
      const char *acc;
      SHC_TRY(group_reduce(c, s, ops, j, g, body, &acc));
      if (!strcmp(n, "reduce_scatter")) {
        int64_t d = shc_attr_int(kiln_mlir_op_attr(op, "scatter_dimension"), 0);
        int64_t part = rt->dims[d];
        kiln_strbuf_t b = {0};
        for (int32_t i = 0; i < r; i++) {
          int64_t lo = i == d ? part * s->pos_in_group[k] : 0;
          int64_t hi = i == d ? lo + part : ot->dims[i];
          kiln_strbuf_printf(&b, "%s[%" PRId64 ":%" PRId64 "]", i ? ", " : "", lo, hi);
        }
        acc = shc_emit(c, rsh, "slice(%s), slice={%s}", acc, kiln_strbuf_cstr(&b));
        kiln_strbuf_free(&b);
      }
      res[k] = acc;
    }
  } else if (!strcmp(n, "all_gather")) {
    SHC_TRY(make_groups(op, s, "replica_groups", reduce_mode(op)));
    int64_t d = shc_attr_int(kiln_mlir_op_attr(op, "all_gather_dim"), 0);
    for (int64_t k = 0; k < s->N; k++) {
      int64_t g = s->group_of[k];
      if (g < 0) return SHC_INVALID(op, "process %" PRId64 " is in no group", k);
      kiln_strbuf_t b = {0};
      for (int64_t jj = 0; jj < s->group_size[g]; jj++) {
        const char *v = value_of(c, s, s->groups[g][jj], ops[s->groups[g][jj]], j, &st);
        if (st) {
          kiln_strbuf_free(&b);
          return st;
        }
        kiln_strbuf_printf(&b, "%s%s", jj ? ", " : "", v);
      }
      res[k] =
          shc_emit(c, rsh, "concatenate(%s), dimensions={%" PRId64 "}", kiln_strbuf_cstr(&b), d);
      kiln_strbuf_free(&b);
    }
  } else if (!strcmp(n, "all_to_all")) {
    SHC_TRY(make_groups(op, s, "replica_groups",
                        shc_channel_id(op) > 0 ? CROSS_PARTITION : CROSS_REPLICA));
    int64_t sd = shc_attr_int(kiln_mlir_op_attr(op, "split_dimension"), 0);
    int64_t cd = shc_attr_int(kiln_mlir_op_attr(op, "concat_dimension"), 0);
    const kiln_mlir_type_t *ot = op->operands[j]->type;
    int32_t r = rank_of(ot);
    const char *e;
    SHC_TRY(shc_elem_text(shc_elem_type(ot), &e));
    for (int64_t k = 0; k < s->N; k++) {
      int64_t g = s->group_of[k];
      if (g < 0) return SHC_INVALID(op, "process %" PRId64 " is in no group", k);
      int64_t gs = s->group_size[g], part = ot->dims[sd] / gs;
      kiln_strbuf_t b = {0}, shb = {0};
      kiln_strbuf_printf(&shb, "%s[", e);
      for (int32_t i = 0; i < r; i++)
        kiln_strbuf_printf(&shb, "%s%" PRId64, i ? "," : "", i == sd ? part : ot->dims[i]);
      kiln_strbuf_append_char(&shb, ']');
      for (int64_t jj = 0; jj < gs; jj++) {
        const char *v = value_of(c, s, s->groups[g][jj], ops[s->groups[g][jj]], j, &st);
        if (st) {
          kiln_strbuf_free(&b);
          kiln_strbuf_free(&shb);
          return st;
        }
        kiln_strbuf_t sl = {0};
        for (int32_t i = 0; i < r; i++) {
          int64_t lo = i == sd ? part * s->pos_in_group[k] : 0;
          int64_t hi = i == sd ? lo + part : ot->dims[i];
          kiln_strbuf_printf(&sl, "%s[%" PRId64 ":%" PRId64 "]", i ? ", " : "", lo, hi);
        }
        const char *piece =
            shc_emit(c, kiln_strbuf_cstr(&shb), "slice(%s), slice={%s}", v, kiln_strbuf_cstr(&sl));
        kiln_strbuf_free(&sl);
        kiln_strbuf_printf(&b, "%s%s", jj ? ", " : "", piece);
      }
      res[k] =
          shc_emit(c, rsh, "concatenate(%s), dimensions={%" PRId64 "}", kiln_strbuf_cstr(&b), cd);
      kiln_strbuf_free(&b);
      kiln_strbuf_free(&shb);
    }
  } else if (!strcmp(n, "collective_permute")) {
    const kiln_mlir_attr_t *a = kiln_mlir_op_attr(op, "source_target_pairs");
    if (!a || a->kind != KILN_MLIR_ATTR_DENSE_ELEMENTS || !a->literal || a->type->rank != 2)
      return SHC_INVALID(op, "source_target_pairs: expected a 2-D tensor");
    bool by_partition = shc_channel_id(op) > 0;
    int64_t outer = by_partition ? s->R : s->P;
    for (int64_t k = 0; k < s->N; k++) res[k] = NULL;
    for (int64_t o = 0; o < outer; o++) {
      for (int64_t i = 0; i < a->type->dims[0]; i++) {
        int64_t src = kiln_literal_get_s64(a->literal, 2 * i);
        int64_t dst = kiln_literal_get_s64(a->literal, 2 * i + 1);
        int64_t ks = by_partition ? o * s->P + src : src * s->P + o;
        int64_t kd = by_partition ? o * s->P + dst : dst * s->P + o;
        if (ks < 0 || ks >= s->N || kd < 0 || kd >= s->N)
          return SHC_INVALID(op, "source_target_pairs outside the grid");
        res[kd] = value_of(c, s, ks, ops[ks], j, &st);
        SHC_TRY(st);
      }
    }
    for (int64_t k = 0; k < s->N; k++)
      if (!res[k]) SHC_TRY(zeros(c, rt, &res[k]));
  } else if (!strcmp(n, "collective_broadcast")) {
    SHC_TRY(make_groups(op, s, "replica_groups",
                        shc_channel_id(op) > 0 ? CROSS_PARTITION : CROSS_REPLICA));
    for (int64_t k = 0; k < s->N; k++) {
      int64_t g = s->group_of[k];
      if (g < 0) {
        SHC_TRY(zeros(c, rt, &res[k]));
      } else if (!shc_attr_int(kiln_mlir_op_attr(op, "has_dynamic_root"), 0)) {
        res[k] = value_of(c, s, s->groups[g][0], ops[s->groups[g][0]], j, &st);
        SHC_TRY(st);
      } else {
        /* the source is group[root[j]]: a select over the group's members */
        const char *root, *et, *acc;
        SHC_TRY(dynamic_root(c, s, ops, k, j, &root, &et));
        SHC_TRY(zeros(c, rt, &acc));
        for (int64_t m = 0; m < s->group_size[g]; m++) {
          const char *v = value_of(c, s, s->groups[g][m], ops[s->groups[g][m]], j, &st);
          SHC_TRY(st);
          acc = select_at(c, rt, rsh, root, et, m, v, acc);
        }
        res[k] = acc;
      }
    }
  } else if (!strcmp(n, "collective_reduce")) {
    /* the group's reduction on its root (the first process, or group[root[j]]), zeros on
     * the other processes and outside groups */
    SHC_TRY(make_groups(op, s, "replica_groups",
                        shc_channel_id(op) > 0 ? CROSS_PARTITION : CROSS_REPLICA));
    const char *body;
    SHC_TRY(shc_region_computation(c, op, &op->regions[0], false, &body));
    bool dynamic = shc_attr_int(kiln_mlir_op_attr(op, "has_dynamic_root"), 0) != 0;
    for (int64_t k = 0; k < s->N; k++) {
      int64_t g = s->group_of[k];
      const char *z;
      SHC_TRY(zeros(c, rt, &z));
      res[k] = z;
      if (g < 0 || (!dynamic && s->pos_in_group[k] != 0)) continue;
      const char *acc;
      SHC_TRY(group_reduce(c, s, ops, j, g, body, &acc));
      if (!dynamic) {
        res[k] = acc;
        continue;
      }
      const char *root, *et;
      SHC_TRY(dynamic_root(c, s, ops, k, j, &root, &et));
      res[k] = select_at(c, rt, rsh, root, et, s->pos_in_group[k], acc, z);
    }
  } else {
    return SHC_UNIMPL(op, "in run_parallel");
  }
  return NULL;
}

static kiln_status collective(shc_ctx_t *c, spmd_t *s, const kiln_mlir_op_t *const *ops) {
  const char *res[SPMD_MAX];
  for (int32_t j = 0; j < ops[0]->num_results; j++) {
    SHC_TRY(collective_one(c, s, ops, j, res));
    for (int64_t k = 0; k < s->N; k++) {
      shc_scope_t *saved = c->cur;
      c->cur = &s->scope[k];
      shc_bind(c, &ops[k]->results[j], res[k]);
      c->cur = saved;
    }
  }
  return NULL;
}

static bool is_collective(const kiln_mlir_op_t *op) {
  static const char *const k[] = {"stablehlo.all_reduce",         "stablehlo.all_gather",
                                  "stablehlo.reduce_scatter",     "stablehlo.all_to_all",
                                  "stablehlo.collective_permute", "stablehlo.collective_broadcast",
                                  "stablehlo.collective_reduce"};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
    if (!strcmp(op->name, k[i])) return true;
  return false;
}

static kiln_status run_parallel(shc_ctx_t *c, const kiln_mlir_op_t *op, spmd_t *s) {
  const kiln_mlir_attr_t *pr = kiln_mlir_op_attr(op, "programs");
  if (!pr || pr->kind != KILN_MLIR_ATTR_ARRAY || pr->num_elements < 1)
    return SHC_INVALID(op, "no programs");
  if (kiln_mlir_op_attr(op, "infeed")) return SHC_UNIMPL(op, "infeed queues");
  s->R = pr->num_elements;
  s->P = pr->elements[0]->kind == KILN_MLIR_ATTR_ARRAY ? pr->elements[0]->num_elements : 0;
  s->N = s->R * s->P;
  if (s->N < 1 || s->N > SPMD_MAX)
    return SHC_UNIMPL(op, "process grid of %" PRId64 " processes", s->N);
  for (int64_t r = 0; r < s->R; r++) {
    const kiln_mlir_attr_t *row = pr->elements[r];
    if (row->kind != KILN_MLIR_ATTR_ARRAY || row->num_elements != s->P)
      return SHC_INVALID(op, "programs: rows of different lengths");
    for (int64_t p = 0; p < s->P; p++) {
      const char *name = sym_str(row->elements[p]);
      const kiln_mlir_op_t *fn = name ? kiln_mlir_module_func(c->m, name) : NULL;
      if (!fn) return SHC_INVALID(op, "program @%s is not defined", name ? name : "?");
      if (fn->num_regions < 1 || fn->regions[0].num_blocks != 1)
        return SHC_UNIMPL(op, "program @%s without exactly one block", name);
      s->fn[r * s->P + p] = fn;
    }
  }
  const kiln_mlir_block_t *b0 = &s->fn[0]->regions[0].blocks[0];
  for (int64_t k = 1; k < s->N; k++) {
    const kiln_mlir_block_t *bk = &s->fn[k]->regions[0].blocks[0];
    bool same = bk->num_ops == b0->num_ops;
    for (int32_t i = 0; same && i < b0->num_ops; i++)
      same = !strcmp(bk->ops[i]->name, b0->ops[i]->name);
    if (!same) return SHC_UNIMPL(op, "programs with different op sequences (e.g. send/recv)");
  }
  /* bind arguments in order */
  int32_t next = 0;
  for (int64_t k = 0; k < s->N; k++) {
    const kiln_mlir_block_t *bk = &s->fn[k]->regions[0].blocks[0];
    for (int32_t i = 0; i < bk->num_args; i++) {
      if (next >= op->num_operands) return SHC_INVALID(op, "too few operands for the programs");
      const char *v;
      SHC_TRY(shc_lookup(c, op->operands[next++], &v));
      shc_bind(c, &bk->args[i], v); /* harmless in the caller's map */
      shc_scope_t *saved = c->cur;
      c->cur = &s->scope[k];
      shc_bind(c, &bk->args[i], v);
      c->cur = saved;
    }
  }
  if (next != op->num_operands) return SHC_INVALID(op, "more operands than the programs take");
  /* lockstep */
  int32_t nres = 0;
  shc_scope_t *saved = c->cur;
  const kiln_mlir_op_t *ops[SPMD_MAX];
  for (int32_t i = 0; i < b0->num_ops; i++) {
    for (int64_t k = 0; k < s->N; k++) ops[k] = s->fn[k]->regions[0].blocks[0].ops[i];
    const kiln_mlir_op_t *o0 = ops[0];
    if (!strcmp(o0->name, "func.return") || !strcmp(o0->name, "return")) {
      for (int64_t k = 0; k < s->N; k++) {
        c->cur = &s->scope[k];
        for (int32_t j = 0; j < ops[k]->num_operands; j++) {
          const char *v;
          kiln_status st = shc_lookup(c, ops[k]->operands[j], &v);
          c->cur = saved;
          if (st) return st;
          if (nres >= op->num_results)
            return SHC_INVALID(op, "the programs return too many values");
          shc_bind(c, &op->results[nres++], v);
          c->cur = &s->scope[k];
        }
      }
      c->cur = saved;
      break;
    }
    if (is_collective(o0)) {
      SHC_TRY(collective(c, s, ops));
      continue;
    }
    for (int64_t k = 0; k < s->N; k++) {
      c->cur = &s->scope[k];
      c->replica = k / s->P;
      c->partition = k % s->P;
      kiln_status st = shc_convert_op(c, ops[k]);
      c->cur = saved;
      if (st) return st;
    }
  }
  if (nres != op->num_results)
    return SHC_INVALID(op, "the programs return %d values for %d results", (int)nres,
                       (int)op->num_results);
  return NULL;
}

kiln_status shc_convert_run_parallel(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  if (c->spmd) return SHC_UNIMPL(op, "nested run_parallel");
  spmd_t *s = kiln_calloc(1, sizeof *s);
  for (int64_t k = 0; k < SPMD_MAX; k++) {
    shc_scope_init(&s->scope[k], c->cur);
    s->scope[k].out = c->cur->out;
  }
  c->spmd = true;
  kiln_status st = run_parallel(c, op, s);
  c->spmd = false;
  for (int64_t k = 0; k < SPMD_MAX; k++) shc_scope_free(&s->scope[k]);
  kiln_free(s);
  return st;
}
