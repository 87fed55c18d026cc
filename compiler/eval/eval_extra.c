/* Evaluator handlers for the less common opcodes: rng-get-and-update-state, the three
 * batch-norm ops, scan, ragged-dot and scaled-dot. Semantics follow XLA:
 *   - rng-get-and-update-state: a 128-bit state (XLA's initial value 0x7012395, offset by
 *     opts->rng_seed) returned as u64[2] {low, high} and then advanced by `delta`.
 *   - batch-norm-*: BatchNormExpander's formulas (biased variance; grad as in the expander),
 *     evaluated in double and rounded once to the result type.
 *   - scan: ScanExpander's loop: to_apply(input slices..., carries...) -> (outputs...,
 *     carries...) along dimensions[0], reversed when is_reverse=true.
 *   - ragged-dot: the three modes of ragged_dot_general (ragged non-contracting, contracting,
 *     batch dimension) by densifying the ragged operand(s) into a group dimension and calling
 *     the ordinary dot.
 *   - scaled-dot: ScaledDotRewriter's dequantization (operand * block-broadcast scale in the
 *     wider of the two types, bf16 when both are narrower than 16 bits; a scalar scale leaves
 *     the operand as is) followed by the ordinary dot. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/eval/eval.h"

#define XERR(...) kiln_status_make(KILN_INVALID_ARGUMENT, __VA_ARGS__)

/* XLA's initial value of the rng-get-and-update-state counter (CPU and GPU backends). */
#define RNG_STATE_INITIAL_VALUE 0x7012395ull

/* ---- attribute helpers ---- */

static bool raw_int(const kiln_hlo_instruction_t *instr, const char *key, int64_t *out) {
  const char *v = kiln_hlo_instruction_raw_attr(instr, key);
  if (!v) return false;
  char *end = NULL;
  long long x = strtoll(v, &end, 10);
  if (end == v || *end) return false;
  *out = x;
  return true;
}

static bool raw_double(const kiln_hlo_instruction_t *instr, const char *key, double *out) {
  const char *v = kiln_hlo_instruction_raw_attr(instr, key);
  if (!v) return false;
  char *end = NULL;
  double x = strtod(v, &end);
  if (end == v || *end) return false;
  *out = x;
  return true;
}

/* Parses `{1,2}` (or `{}`) into at most `cap` values; -1 on bad text or overflow. */
static int parse_i64_list(const char *v, int64_t *out, int cap) {
  if (!v || *v != '{') return -1;
  const char *p = v + 1;
  int n = 0;
  while (*p == ' ') p++;
  if (*p == '}') return p[1] ? -1 : 0;
  for (;;) {
    char *end = NULL;
    long long x = strtoll(p, &end, 10);
    if (end == p || n >= cap) return -1;
    out[n++] = x;
    p = end;
    while (*p == ' ') p++;
    if (*p == '}') return p[1] ? -1 : n;
    if (*p != ',') return -1;
    p++;
  }
}

static bool list_has(const int64_t *v, int n, int64_t x) {
  for (int i = 0; i < n; i++)
    if (v[i] == x) return true;
  return false;
}

static bool is_float_type(kiln_elem_type_t t) { return kiln_elem_type_is_float(t); }

/* ---- rng-get-and-update-state ---- */

void kiln_eval_rng_state_take(kiln_eval_ctx_t *ctx, int64_t delta, uint64_t state[2]) {
  uint64_t seed = ctx->opts ? ctx->opts->rng_seed : 0;
  /* state = initial + seed + advanced, as 128-bit little-endian words */
  uint64_t lo = RNG_STATE_INITIAL_VALUE + seed;
  uint64_t hi = lo < seed ? 1 : 0;
  uint64_t lo2 = lo + ctx->rng_state_advanced_lo;
  hi += ctx->rng_state_advanced_hi + (lo2 < lo ? 1 : 0);
  state[0] = lo2;
  state[1] = hi;
  /* advance by delta (sign-extended to 128 bits) */
  uint64_t dlo = (uint64_t)delta, dhi = delta < 0 ? UINT64_MAX : 0;
  uint64_t a = ctx->rng_state_advanced_lo + dlo;
  ctx->rng_state_advanced_hi += dhi + (a < dlo ? 1 : 0);
  ctx->rng_state_advanced_lo = a;
}

static kiln_status eval_rng_get_and_update_state(kiln_eval_ctx_t *ctx,
                                                 const kiln_hlo_instruction_t *instr,
                                                 kiln_literal_t **out) {
  int64_t delta;
  if (!raw_int(instr, "delta", &delta))
    return XERR("rng-get-and-update-state '%s' needs an integer delta", instr->name);
  const kiln_shape_t *s = instr->shape;
  if (!kiln_shape_is_array(s) || s->type != KILN_U64 || s->rank != 1 || s->dims[0] != 2)
    return XERR("rng-get-and-update-state '%s' must produce u64[2]", instr->name);
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, instr->shape, out));
  kiln_eval_rng_state_take(ctx, delta, (uint64_t *)(*out)->data);
  return KILN_STATUS_OK;
}

/* ---- batch norm ---- */

typedef struct bn_geom {
  int64_t n, c, inner; /* elements, features, product of dims after the feature dim */
} bn_geom_t;

static kiln_status bn_check(const kiln_hlo_instruction_t *instr, kiln_literal_t *const *ops,
                            int nops, double *eps, bn_geom_t *g) {
  if (instr->num_operands != nops)
    return XERR("%s '%s' takes %d operands", kiln_hlo_opcode_name(instr->opcode), instr->name, nops);
  int64_t f;
  if (!raw_int(instr, "feature_index", &f))
    return XERR("'%s' needs an integer feature_index", instr->name);
  double e = 0;
  if (!raw_double(instr, "epsilon", &e)) return XERR("'%s' needs a numeric epsilon", instr->name);
  *eps = (double)(float)e; /* XLA stores epsilon as a float */
  const kiln_shape_t *xs = ops[0]->shape;
  if (!kiln_shape_is_array(xs) || !is_float_type(xs->type))
    return XERR("'%s': operand must be a floating-point array", instr->name);
  if (f < 0 || f >= xs->rank) return XERR("'%s': feature_index %" PRId64 " out of range", instr->name, f);
  g->c = xs->dims[f];
  g->n = ops[0]->num_elements;
  g->inner = 1;
  for (int d = (int)f + 1; d < xs->rank; d++) g->inner *= xs->dims[d];
  for (int i = 1; i < nops; i++) {
    const kiln_shape_t *s = ops[i]->shape;
    bool full = (instr->opcode == KILN_OP_BATCH_NORM_GRAD && i == 4);
    if (!kiln_shape_is_array(s) || !is_float_type(s->type) || (ops[i]->num_elements && !ops[i]->data))
      return XERR("'%s': operand %d must be a floating-point array", instr->name, i);
    if (full ? !kiln_shape_compatible(s, xs) : (s->rank != 1 || s->dims[0] != g->c))
      return XERR("'%s': operand %d has the wrong shape", instr->name, i);
  }
  if (g->n && !ops[0]->data) return XERR("'%s': operand has no data", instr->name);
  const kiln_shape_t *os = instr->shape;
  bool tuple_out = instr->opcode != KILN_OP_BATCH_NORM_INFERENCE;
  if (tuple_out) {
    if (os->type != KILN_TUPLE || os->num_elements != 3 ||
        !kiln_shape_compatible(os->elements[0], xs) || os->elements[1]->rank != 1 ||
        os->elements[1]->dims[0] != g->c || os->elements[2]->rank != 1 || os->elements[2]->dims[0] != g->c ||
        !is_float_type(os->elements[1]->type) || !is_float_type(os->elements[2]->type))
      return XERR("'%s': result must be (%s-shaped, f[C], f[C])", instr->name,
                  kiln_hlo_opcode_name(instr->opcode));
  } else if (!kiln_shape_compatible(os, xs)) {
    return XERR("'%s': result must have the operand's shape", instr->name);
  }
  return KILN_STATUS_OK;
}

static inline int64_t bn_feature(const bn_geom_t *g, int64_t i) { return (i / g->inner) % g->c; }

static double get(const kiln_literal_t *l, int64_t i) {
  return kiln_eval_elem_get_f64(l->shape->type, l->data, i);
}

static kiln_status eval_batch_norm(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                   kiln_literal_t *const *ops, kiln_literal_t **out) {
  kiln_hlo_opcode_t op = instr->opcode;
  int nops = op == KILN_OP_BATCH_NORM_TRAINING ? 3 : 5;
  double eps = 0;
  bn_geom_t g = {0};
  KILN_RETURN_IF_ERROR_PLAIN(bn_check(instr, ops, nops, &eps, &g));
  kiln_literal_t *res;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, instr->shape, &res));
  kiln_literal_t *y = op == KILN_OP_BATCH_NORM_INFERENCE ? res : res->tuple_elements[0];
  const kiln_literal_t *x = ops[0];
  int64_t C = g.c, per = C ? g.n / C : 0;
  double *acc = kiln_try_malloc(sizeof(double) * (size_t)(C ? 2 * C : 1));
  if (!acc) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "batch norm '%s': out of memory", instr->name);
  double *s1 = acc, *s2 = acc + C;
  for (int64_t c = 0; c < C; c++) s1[c] = s2[c] = 0;
  switch (op) {
  case KILN_OP_BATCH_NORM_INFERENCE: { /* (x, scale, offset, mean, var) */
    for (int64_t i = 0; i < g.n; i++) {
      int64_t c = bn_feature(&g, i);
      double v = (get(x, i) - get(ops[3], c)) / sqrt(get(ops[4], c) + eps) * get(ops[1], c) + get(ops[2], c);
      kiln_eval_elem_set_f64(y->shape->type, y->data, i, v);
    }
    break;
  }
  case KILN_OP_BATCH_NORM_TRAINING: { /* (x, scale, offset) -> (y, mean, biased var) */
    for (int64_t i = 0; i < g.n; i++) s1[bn_feature(&g, i)] += get(x, i);
    for (int64_t c = 0; c < C; c++) s1[c] /= (double)per;
    for (int64_t i = 0; i < g.n; i++) {
      int64_t c = bn_feature(&g, i);
      double d = get(x, i) - s1[c];
      s2[c] += d * d;
    }
    for (int64_t c = 0; c < C; c++) s2[c] /= (double)per;
    for (int64_t i = 0; i < g.n; i++) {
      int64_t c = bn_feature(&g, i);
      double v = (get(x, i) - s1[c]) / sqrt(s2[c] + eps) * get(ops[1], c) + get(ops[2], c);
      kiln_eval_elem_set_f64(y->shape->type, y->data, i, v);
    }
    kiln_literal_t *mo = res->tuple_elements[1], *vo = res->tuple_elements[2];
    for (int64_t c = 0; c < C; c++) {
      kiln_eval_elem_set_f64(mo->shape->type, mo->data, c, s1[c]);
      kiln_eval_elem_set_f64(vo->shape->type, vo->data, c, s2[c]);
    }
    break;
  }
  default: { /* grad: (x, scale, mean, var, dy) -> (dx, dscale, doffset) */
    const kiln_literal_t *dy = ops[4];
    /* s1 = sum(dy), s2 = sum(dy * (x - mean)) per feature */
    for (int64_t i = 0; i < g.n; i++) {
      int64_t c = bn_feature(&g, i);
      double d = get(dy, i);
      s1[c] += d;
      s2[c] += d * (get(x, i) - get(ops[2], c));
    }
    for (int64_t i = 0; i < g.n; i++) {
      int64_t c = bn_feature(&g, i);
      double ve = get(ops[3], c) + eps;
      double inner = (double)per * get(dy, i) - s1[c] - (get(x, i) - get(ops[2], c)) * s2[c] / ve;
      double v = get(ops[1], c) / sqrt(ve) / (double)per * inner;
      kiln_eval_elem_set_f64(y->shape->type, y->data, i, v);
    }
    kiln_literal_t *gs = res->tuple_elements[1], *go = res->tuple_elements[2];
    for (int64_t c = 0; c < C; c++) {
      kiln_eval_elem_set_f64(gs->shape->type, gs->data, c, s2[c] / sqrt(get(ops[3], c) + eps));
      kiln_eval_elem_set_f64(go->shape->type, go->data, c, s1[c]);
    }
    break;
  }
  }
  kiln_free(acc);
  *out = res;
  return KILN_STATUS_OK;
}

/* ---- scan ---- */

/* Geometry of slicing dimension `d` of an array: outer * len * inner elements. */
typedef struct slab {
  int64_t outer, len, inner;
  size_t es;
} slab_t;

static slab_t slab_of(const kiln_shape_t *s, int d) {
  slab_t g = {1, s->dims[d], 1, kiln_elem_type_storage_bytes(s->type)};
  for (int i = 0; i < d; i++) g.outer *= s->dims[i];
  for (int i = d + 1; i < s->rank; i++) g.inner *= s->dims[i];
  return g;
}

/* Copies slice `t` of `arr` along the slab's dimension into (to_slice) or out of `slice`. */
static void slab_copy(const slab_t *g, void *arr, void *slice, int64_t t, bool to_slice) {
  size_t row = (size_t)g->inner * g->es;
  for (int64_t o = 0; o < g->outer; o++) {
    char *a = (char *)arr + ((size_t)(o * g->len + t) * row);
    char *s = (char *)slice + (size_t)o * row;
    if (to_slice) memcpy(s, a, row);
    else memcpy(a, s, row);
  }
}

/* The shape `s` without dimension `d`. */
static kiln_shape_t *drop_dim(kiln_arena_t *a, const kiln_shape_t *s, int d) {
  int64_t dims[64];
  int r = 0;
  for (int i = 0; i < s->rank; i++)
    if (i != d) dims[r++] = s->dims[i];
  return kiln_shape_make_array(a, s->type, r, dims);
}

static kiln_status eval_scan(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                             kiln_literal_t *const *ops, kiln_literal_t **out) {
  const kiln_hlo_computation_t *body = kiln_hlo_instruction_called(instr, "to_apply");
  if (!body) return XERR("scan '%s' has no to_apply", instr->name);
  int64_t nc;
  if (!raw_int(instr, "num_carries", &nc) || nc < 0 || nc > instr->num_operands)
    return XERR("scan '%s' needs num_carries in [0, %d]", instr->name, instr->num_operands);
  if (!instr->has_dimensions || instr->dimensions.n != 1)
    return XERR("scan '%s' needs dimensions={d}", instr->name);
  const char *rev = kiln_hlo_instruction_raw_attr(instr, "is_reverse");
  bool reverse = rev && strcmp(rev, "true") == 0;
  int64_t d = instr->dimensions.v[0];
  int nin = instr->num_operands - (int)nc, ncar = (int)nc;
  kiln_shape_t *rs = instr->shape;
  bool tuple_out = rs->type == KILN_TUPLE;
  int nout = (tuple_out ? rs->num_elements : 1) - ncar;
  if (nout < 0 || (!tuple_out && nout + ncar != 1))
    return XERR("scan '%s': result shape does not hold %d carries", instr->name, ncar);
  if (nin + ncar > 64 || nout > 64) return kiln_status_make(KILN_UNIMPLEMENTED, "scan '%s': too many operands", instr->name);
  /* output arrays */
  kiln_literal_t *outs[64], *carries[64], *args[128];
  int64_t len = -1;
  for (int i = 0; i < nin; i++) {
    const kiln_shape_t *s = ops[i]->shape;
    if (!kiln_shape_is_array(s) || d < 0 || d >= s->rank || (ops[i]->num_elements && !ops[i]->data))
      return XERR("scan '%s': input %d is not an array with dimension %" PRId64, instr->name, i, d);
    if (len >= 0 && s->dims[d] != len) return XERR("scan '%s': inputs differ in scan length", instr->name);
    len = s->dims[d];
  }
  for (int i = 0; i < nout; i++) {
    kiln_shape_t *s = tuple_out ? rs->elements[i] : rs;
    if (!kiln_shape_is_array(s) || d < 0 || d >= s->rank)
      return XERR("scan '%s': output %d is not an array with dimension %" PRId64, instr->name, i, d);
    if (len >= 0 && s->dims[d] != len) return XERR("scan '%s': output %d has the wrong scan length", instr->name, i);
    len = s->dims[d];
    KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, s, &outs[i]));
  }
  if (len < 0) len = 0; /* nothing to scan along: carries pass through */
  for (int i = 0; i < ncar; i++) carries[i] = ops[nin + i];
  kiln_shape_t *slice_shapes[64];
  for (int i = 0; i < nin; i++) {
    slice_shapes[i] = drop_dim(ctx->arena, ops[i]->shape, (int)d);
    if (!slice_shapes[i])
      return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "scan '%s': out of memory", instr->name);
  }
  for (int64_t t = 0; t < len; t++) {
    int64_t at = reverse ? len - 1 - t : t;
    /* fresh slices each step: the body may hand a slice back as a carry */
    kiln_literal_t *in_slices[64];
    for (int i = 0; i < nin; i++) {
      KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, slice_shapes[i], &in_slices[i]));
      slab_t g = slab_of(ops[i]->shape, (int)d);
      slab_copy(&g, ops[i]->data, in_slices[i]->data, at, true);
      args[i] = in_slices[i];
    }
    for (int i = 0; i < ncar; i++) args[nin + i] = carries[i];
    kiln_literal_t *r = NULL;
    KILN_RETURN_IF_ERROR(kiln_eval_computation(ctx, body, nin + ncar, args, &r),
                         "in scan '%s' step %" PRId64, instr->name, t);
    kiln_literal_t *const *el = &r;
    int nel = 1;
    if (r->shape->type == KILN_TUPLE) {
      el = r->tuple_elements;
      nel = r->num_tuple_elements;
    }
    if (nel != nout + ncar)
      return XERR("scan '%s': to_apply returns %d values, expected %d", instr->name, nel, nout + ncar);
    for (int i = 0; i < nout; i++) {
      slab_t g = slab_of(outs[i]->shape, (int)d);
      if (!kiln_shape_is_array(el[i]->shape) || el[i]->shape->type != outs[i]->shape->type ||
          el[i]->num_elements != g.outer * g.inner || (el[i]->num_elements && !el[i]->data))
        return XERR("scan '%s': step output %d does not fit the result", instr->name, i);
      slab_copy(&g, outs[i]->data, el[i]->data, at, false);
    }
    /* the body's values live in ctx->arena and are never mutated: safe to keep */
    for (int i = 0; i < ncar; i++) carries[i] = el[nout + i];
  }
  kiln_literal_t *all[128];
  for (int i = 0; i < nout; i++) all[i] = outs[i];
  for (int i = 0; i < ncar; i++) all[nout + i] = carries[i];
  if (!tuple_out) {
    *out = all[0];
    return KILN_STATUS_OK;
  }
  kiln_literal_t *res = kiln_arena_alloc(ctx->arena, sizeof *res);
  kiln_literal_t **els = kiln_arena_alloc(ctx->arena, sizeof(*els) * (size_t)(nout + ncar + 1));
  if (!res || !els) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "scan '%s': out of memory", instr->name);
  for (int i = 0; i < nout + ncar; i++) {
    if (!kiln_shape_compatible(all[i]->shape, rs->elements[i]) && all[i]->shape->type != KILN_TUPLE)
      return XERR("scan '%s': carry %d does not match the result shape", instr->name, i - nout);
    els[i] = all[i];
  }
  res->shape = rs;
  res->num_tuple_elements = nout + ncar;
  res->tuple_elements = els;
  *out = res;
  return KILN_STATUS_OK;
}

/* ---- dots built from the ordinary dot ---- */

static kiln_i64_list_t mk_list(kiln_arena_t *a, const int64_t *v, int n) {
  kiln_i64_list_t l = {n, kiln_arena_alloc(a, sizeof(int64_t) * (size_t)(n ? n : 1))};
  if (l.v && n > 0) memcpy(l.v, v, sizeof(int64_t) * (size_t)n);
  return l;
}

/* Evaluates dot(lhs, rhs) with the given dimension numbers into `result_shape`. */
static kiln_status run_dot(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                           kiln_shape_t *result_shape, kiln_literal_t *lhs, kiln_literal_t *rhs,
                           const int64_t *lb, const int64_t *rb, int nb, const int64_t *lc,
                           const int64_t *rc, int ncontr, kiln_literal_t **out) {
  kiln_hlo_instruction_t tmp;
  memset(&tmp, 0, sizeof tmp);
  tmp.name = instr->name;
  tmp.opcode = KILN_OP_DOT;
  tmp.shape = result_shape;
  tmp.parent = instr->parent;
  tmp.num_operands = 2;
  tmp.has_dot_dnums = true;
  tmp.dot_dnums.lhs_batch = mk_list(ctx->arena, lb, nb);
  tmp.dot_dnums.rhs_batch = mk_list(ctx->arena, rb, nb);
  tmp.dot_dnums.lhs_contracting = mk_list(ctx->arena, lc, ncontr);
  tmp.dot_dnums.rhs_contracting = mk_list(ctx->arena, rc, ncontr);
  if (!tmp.dot_dnums.lhs_batch.v || !tmp.dot_dnums.rhs_batch.v || !tmp.dot_dnums.lhs_contracting.v ||
      !tmp.dot_dnums.rhs_contracting.v)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "'%s': out of memory", instr->name);
  kiln_literal_t *operands[2] = {lhs, rhs};
  return kiln_eval_dot_conv(ctx, &tmp, operands, out);
}

/* ragged-dot: expands `x` (ragged along `rd`) into [g, x dims...]: element (j, idx) is x[idx]
 * when idx[rd] lies in group j of the group sizes selected by idx's `prefix` dims. */
static kiln_status ragged_expand(kiln_eval_ctx_t *ctx, const kiln_literal_t *x, int64_t rd,
                                 const int64_t *prefix, int np, const kiln_literal_t *gs,
                                 kiln_literal_t **out) {
  const kiln_shape_t *xs = x->shape;
  int64_t g = gs->shape->dims[gs->shape->rank - 1];
  int64_t dims[65];
  dims[0] = g;
  for (int i = 0; i < xs->rank; i++) dims[i + 1] = xs->dims[i];
  kiln_shape_t *es = kiln_shape_make_array_with_default_layout(ctx->arena, xs->type, xs->rank + 1, dims);
  if (!es) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "ragged-dot: out of memory");
  kiln_literal_t *e;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, es, &e));
  bool bcast = gs->shape->rank == 1;
  size_t esz = kiln_elem_type_storage_bytes(xs->type);
  int64_t n = x->num_elements;
  int64_t idx[64] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t p = 0;
    if (!bcast)
      for (int k = 0; k < np; k++) p = p * xs->dims[prefix[k]] + idx[prefix[k]];
    int64_t v = idx[rd], start = 0;
    for (int64_t j = 0; j < g; j++) {
      int64_t end = start + kiln_eval_elem_get_s64(gs->shape->type, gs->data, p * g + j);
      if (start <= v && v < end) {
        memcpy((char *)e->data + (size_t)(j * n + i) * esz, (const char *)x->data + (size_t)i * esz, esz);
        break;
      }
      start = end;
    }
    for (int k = xs->rank - 1; k >= 0; k--) {
      if (++idx[k] < xs->dims[k]) break;
      idx[k] = 0;
    }
  }
  *out = e;
  return KILN_STATUS_OK;
}

static kiln_status eval_ragged_dot(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                   kiln_literal_t *const *ops, kiln_literal_t **out) {
  if (instr->num_operands != 3) return XERR("ragged-dot '%s' takes 3 operands", instr->name);
  kiln_literal_t *lhs = ops[0], *rhs = ops[1], *gs = ops[2];
  for (int i = 0; i < 3; i++)
    if (!kiln_shape_is_array(ops[i]->shape) || ops[i]->shape->rank > 32 || (ops[i]->num_elements && !ops[i]->data))
      return XERR("ragged-dot '%s': operand %d is not an array", instr->name, i);
  if (!kiln_elem_type_is_integral(gs->shape->type) || gs->shape->rank < 1)
    return XERR("ragged-dot '%s': group_sizes must be an integer array", instr->name);
  int64_t lr[4], rg[4];
  int nlr = parse_i64_list(kiln_hlo_instruction_raw_attr(instr, "lhs_ragged_dims"), lr, 4);
  const char *rgt = kiln_hlo_instruction_raw_attr(instr, "rhs_group_dims");
  int nrg = rgt ? parse_i64_list(rgt, rg, 4) : 0;
  if (nlr != 1) return XERR("ragged-dot '%s' needs lhs_ragged_dims={d}", instr->name);
  if (nrg < 0 || nrg > 1) return XERR("ragged-dot '%s': bad rhs_group_dims", instr->name);
  const kiln_dot_dnums_t *dn = &instr->dot_dnums;
  const int64_t *lb = dn->lhs_batch.v, *rb = dn->rhs_batch.v, *lc = dn->lhs_contracting.v,
                *rc = dn->rhs_contracting.v;
  int nb = dn->lhs_batch.n, ncn = dn->lhs_contracting.n;
  if (dn->rhs_batch.n != nb || dn->rhs_contracting.n != ncn || nb + ncn > 30)
    return XERR("ragged-dot '%s': mismatched dimension numbers", instr->name);
  int lrank = lhs->shape->rank;
  int64_t rd = lr[0];
  if (rd < 0 || rd >= lrank) return XERR("ragged-dot '%s': lhs ragged dim out of range", instr->name);
  int64_t g = gs->shape->dims[gs->shape->rank - 1];
  /* prefix dims of lhs that index group_sizes (besides the group dim) */
  int64_t prefix[64];
  int np = 0;
  int mode; /* 1 non-contracting, 2 contracting, 3 batch */
  int ci = -1;
  for (int i = 0; i < ncn; i++)
    if (lc[i] == rd) ci = i;
  if (ci >= 0) {
    mode = 2;
    for (int i = 0; i < nb; i++) prefix[np++] = lb[i];
    for (int i = 0; i < ci; i++) prefix[np++] = lc[i];
  } else if (list_has(lb, nb, rd)) {
    mode = 3;
    for (int i = 0; i < nb && lb[i] != rd; i++) prefix[np++] = lb[i];
  } else {
    mode = 1;
    for (int i = 0; i < nb; i++) prefix[np++] = lb[i];
    for (int d = 0; d < rd; d++)
      if (!list_has(lb, nb, d) && !list_has(lc, ncn, d)) prefix[np++] = d;
  }
  if (gs->shape->rank != 1) {
    if (gs->shape->rank != np + 1)
      return XERR("ragged-dot '%s': group_sizes rank %d, expected 1 or %d", instr->name, gs->shape->rank, np + 1);
    for (int k = 0; k < np; k++)
      if (gs->shape->dims[k] != lhs->shape->dims[prefix[k]])
        return XERR("ragged-dot '%s': group_sizes dimension %d does not match lhs", instr->name, k);
  }
  int64_t a[34], b[34], c[34], e[34];
  switch (mode) {
  case 3:
    if (nrg) return XERR("ragged-dot '%s': rhs_group_dims with a ragged batch dimension", instr->name);
    return run_dot(ctx, instr, instr->shape, lhs, rhs, lb, rb, nb, lc, rc, ncn, out);
  case 1: {
    if (nrg != 1 || rg[0] < 0 || rg[0] >= rhs->shape->rank || rhs->shape->dims[rg[0]] != g)
      return XERR("ragged-dot '%s': ragged non-contracting mode needs an rhs group dim of size %" PRId64,
                  instr->name, g);
    kiln_literal_t *le;
    KILN_RETURN_IF_ERROR_PLAIN(ragged_expand(ctx, lhs, rd, prefix, np, gs, &le));
    for (int i = 0; i < nb; i++) a[i] = lb[i] + 1;
    for (int i = 0; i < ncn; i++) c[i] = lc[i] + 1, e[i] = rc[i];
    c[ncn] = 0;
    e[ncn] = rg[0];
    return run_dot(ctx, instr, instr->shape, le, rhs, a, rb, nb, c, e, ncn + 1, out);
  }
  default: {
    if (nrg) return XERR("ragged-dot '%s': rhs_group_dims with a ragged contracting dimension", instr->name);
    int64_t rrd = rc[ci], rprefix[64];
    int nrp = 0;
    for (int i = 0; i < nb; i++) rprefix[nrp++] = rb[i];
    for (int i = 0; i < ci; i++) rprefix[nrp++] = rc[i];
    kiln_literal_t *le, *re;
    KILN_RETURN_IF_ERROR_PLAIN(ragged_expand(ctx, lhs, rd, prefix, np, gs, &le));
    KILN_RETURN_IF_ERROR_PLAIN(ragged_expand(ctx, rhs, rrd, rprefix, nrp, gs, &re));
    a[0] = b[0] = 0;
    for (int i = 0; i < nb; i++) a[i + 1] = lb[i] + 1, b[i + 1] = rb[i] + 1;
    for (int i = 0; i < ncn; i++) c[i] = lc[i] + 1, e[i] = rc[i] + 1;
    return run_dot(ctx, instr, instr->shape, le, re, a, b, nb + 1, c, e, ncn, out);
  }
  }
}

/* ScaledDotRewriter's choice of the type both operand and scale are converted to. */
static kiln_elem_type_t scaled_target_type(kiln_elem_type_t a, kiln_elem_type_t b) {
  int wa = kiln_elem_type_bits(a), wb = kiln_elem_type_bits(b);
  if (wa < 16 && wb < 16) return KILN_BF16;
  if (a == b) return a;
  if (wa == wb) return KILN_F32;
  return wa > wb ? a : b;
}

/* Whether `scale` can scale `x` (scalar, or same rank with each dim dividing x's). */
static bool scale_fits(const kiln_shape_t *x, const kiln_shape_t *scale) {
  if (scale->rank == 0) return true;
  if (scale->rank != x->rank) return false;
  for (int i = 0; i < x->rank; i++)
    if (scale->dims[i] <= 0 ? x->dims[i] != 0 : x->dims[i] % scale->dims[i] != 0) return false;
  return true;
}

static kiln_status dequantize(kiln_eval_ctx_t *ctx, kiln_literal_t *x, kiln_literal_t *scale,
                              kiln_literal_t **out) {
  const kiln_shape_t *xs = x->shape, *ss = scale->shape;
  if (ss->rank == 0) { /* XLA leaves the operand unscaled */
    *out = x;
    return KILN_STATUS_OK;
  }
  kiln_elem_type_t t = scaled_target_type(xs->type, ss->type);
  kiln_shape_t *ts = kiln_shape_make_array_with_default_layout(ctx->arena, t, xs->rank, xs->dims);
  if (!ts) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "scaled-dot: out of memory");
  kiln_literal_t *r;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, ts, &r));
  int64_t idx[64] = {0}, block[64];
  for (int k = 0; k < xs->rank; k++) block[k] = xs->dims[k] / ss->dims[k];
  for (int64_t i = 0; i < x->num_elements; i++) {
    int64_t si = 0;
    for (int k = 0; k < xs->rank; k++) si = si * ss->dims[k] + idx[k] / block[k];
    /* convert both to t, multiply, round to t (an exact double product rounded once) */
    kiln_eval_elem_set_f64(t, r->data, i, kiln_eval_elem_get_f64(xs->type, x->data, i));
    double a = kiln_eval_elem_get_f64(t, r->data, i);
    kiln_eval_elem_set_f64(t, r->data, i, kiln_eval_elem_get_f64(ss->type, scale->data, si));
    double b = kiln_eval_elem_get_f64(t, r->data, i);
    kiln_eval_elem_set_f64(t, r->data, i, a * b);
    for (int k = xs->rank - 1; k >= 0; k--) {
      if (++idx[k] < xs->dims[k]) break;
      idx[k] = 0;
    }
  }
  *out = r;
  return KILN_STATUS_OK;
}

static kiln_status eval_scaled_dot(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                   kiln_literal_t *const *ops, kiln_literal_t **out) {
  if (instr->num_operands != 4) return XERR("scaled-dot '%s' takes 4 operands", instr->name);
  for (int i = 0; i < 4; i++) {
    const kiln_shape_t *s = ops[i]->shape;
    if (!kiln_shape_is_array(s) || s->rank > 32 || (ops[i]->num_elements && !ops[i]->data) ||
        !kiln_elem_type_is_float(s->type))
      return XERR("scaled-dot '%s': operand %d is not a real floating-point array", instr->name, i);
  }
  /* Operand order: (lhs, rhs, lhs_scale, rhs_scale) as in the HLO text; XLA versions that
   * order them (lhs, lhs_scale, rhs, rhs_scale) are recognised by the shapes. */
  kiln_literal_t *l = ops[0], *r = ops[1], *ls = ops[2], *rs = ops[3];
  if (!(scale_fits(l->shape, ls->shape) && scale_fits(r->shape, rs->shape))) {
    if (scale_fits(ops[0]->shape, ops[1]->shape) && scale_fits(ops[2]->shape, ops[3]->shape)) {
      r = ops[2];
      ls = ops[1];
    } else {
      return XERR("scaled-dot '%s': scales do not divide their operands' dimensions", instr->name);
    }
  }
  kiln_literal_t *lq, *rq;
  KILN_RETURN_IF_ERROR_PLAIN(dequantize(ctx, l, ls, &lq));
  KILN_RETURN_IF_ERROR_PLAIN(dequantize(ctx, r, rs, &rq));
  const kiln_dot_dnums_t *dn = &instr->dot_dnums;
  if (dn->lhs_batch.n != dn->rhs_batch.n || dn->lhs_contracting.n != dn->rhs_contracting.n)
    return XERR("scaled-dot '%s': mismatched dimension numbers", instr->name);
  return run_dot(ctx, instr, instr->shape, lq, rq, dn->lhs_batch.v, dn->rhs_batch.v, dn->lhs_batch.n,
                 dn->lhs_contracting.v, dn->rhs_contracting.v, dn->lhs_contracting.n, out);
}

kiln_status kiln_eval_extra(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                            kiln_literal_t *const *operands, kiln_literal_t **out) {
  switch (instr->opcode) {
  case KILN_OP_RNG_GET_AND_UPDATE_STATE:
    return eval_rng_get_and_update_state(ctx, instr, out);
  case KILN_OP_BATCH_NORM_TRAINING:
  case KILN_OP_BATCH_NORM_INFERENCE:
  case KILN_OP_BATCH_NORM_GRAD:
    return eval_batch_norm(ctx, instr, operands, out);
  case KILN_OP_SCAN:
    return eval_scan(ctx, instr, operands, out);
  case KILN_OP_RAGGED_DOT:
    return eval_ragged_dot(ctx, instr, operands, out);
  case KILN_OP_SCALED_DOT:
    return eval_scaled_dot(ctx, instr, operands, out);
  default:
    return kiln_status_make(KILN_UNIMPLEMENTED, "evaluator does not support opcode '%s' (instruction '%s')",
                            kiln_hlo_opcode_name(instr->opcode), instr->name);
  }
}
