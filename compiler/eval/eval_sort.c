/* Reference evaluator: sort and topk.
 *
 * sort: every operand is permuted the same way along `dimensions={d}`; the permutation is
 * found by a merge sort (always stable, which is also a valid result of an unstable sort)
 * driven by the comparator `to_apply`, called as comp(a_0, b_0, a_1, b_1, ...) and meaning
 * "a goes before b". A comparator whose root is a single compare of parameters 2i and 2i+1
 * (either order) with direction LT/GT/LE/GE takes a fast path that compares operand i's
 * elements directly (FLOAT semantics: NaN compares false; TOTALORDER: -NaN < -inf < ... <
 * -0 < +0 < ... < inf < +NaN; SIGNED / UNSIGNED for integers).
 *
 * topk: the k largest (or smallest with largest=false) elements along the last dim, in
 * descending (ascending) order, with their s32 indices; ties keep the lower index first.
 * Floats are ordered by the total order, so NaN counts as the largest value. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "compiler/eval/eval.h"

/* A key that orders values as XLA's TOTALORDER compare does (for floats) or numerically. */
static int64_t total_order_key(double v) {
  uint64_t b;
  memcpy(&b, &v, sizeof b);
  int64_t mag = (int64_t)(b & 0x7FFFFFFFFFFFFFFFull);
  return (b >> 63) ? -mag - 1 : mag;
}

typedef struct sort_key {
  kiln_cmp_dir_t dir;
  kiln_cmp_type_t type;
  kiln_elem_type_t et;
  const kiln_literal_t *lit; /* the keyed operand */
  bool swapped;              /* compare(param 2i+1, param 2i): roles of a and b exchanged */
  bool canonicalize;         /* JAX's comparator idiom: zeros and NaNs replaced first */
  double canon_nan, canon_zero; /* the idiom's constants */
  int64_t *ord;              /* precomputed keys (see precompute_keys) */
  double *fv;
} sort_key_t;

typedef struct sort_ctx {
  kiln_eval_ctx_t *ctx;
  const kiln_hlo_computation_t *comp;
  int nop;
  kiln_literal_t *const *operands;
  kiln_literal_t **args; /* 2 * nop scalar literals (general path) */
  kiln_arena_t scratch;  /* comparator intermediates, recycled every kScratchCalls calls */
  int64_t scratch_calls;
  bool fast;
  sort_key_t key;
  kiln_status err;
} sort_ctx_t;

/* Fills the fast path's key arrays once: `fv` (doubles, for FLOAT compares where NaN is
 * unordered) or `ord` (int64 keys whose order is the compare's order: the float total order,
 * signed values, or unsigned values with the top bit flipped). */
static kiln_status precompute_keys(sort_key_t *k) {
  int64_t n = k->lit->num_elements;
  kiln_elem_type_t et = k->et;
  bool is_float = kiln_elem_type_is_float(et);
  bool partial = is_float && k->type != KILN_CMP_TYPE_TOTALORDER;
  size_t bytes = sizeof(int64_t) * (size_t)(n > 0 ? n : 1);
  if (partial) k->fv = kiln_try_malloc(bytes);
  else k->ord = kiln_try_malloc(bytes);
  if (!k->fv && !k->ord) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "sort: out of memory");
  bool as_unsigned = kiln_elem_type_is_unsigned_int(et) || et == KILN_PRED ||
                     k->type == KILN_CMP_TYPE_UNSIGNED;
  for (int64_t i = 0; i < n; i++) {
    if (is_float) {
      double v = kiln_literal_get_f64(k->lit, i);
      if (k->canonicalize) v = isnan(v) ? k->canon_nan : v == 0 ? k->canon_zero : v;
      if (partial) k->fv[i] = v;
      else if (k->canonicalize)
        k->ord[i] = total_order_key(v);
      else
        k->ord[i] = kiln_eval_elem_total_order_key(et, k->lit->data, i);
    } else if (as_unsigned) {
      k->ord[i] = (int64_t)(kiln_literal_get_u64(k->lit, i) ^ (1ull << 63));
    } else {
      k->ord[i] = kiln_literal_get_s64(k->lit, i);
    }
  }
  return KILN_STATUS_OK;
}

/* Fast-path comparison of elements ia, ib of the keyed operand: "a before b". */
static bool fast_less(const sort_key_t *k, int64_t ia, int64_t ib) {
  if (k->swapped) {
    int64_t t = ia;
    ia = ib;
    ib = t;
  }
  int c; /* -1, 0, 1 or 2 for unordered */
  if (k->fv) {
    double a = k->fv[ia], b = k->fv[ib];
    c = isnan(a) || isnan(b) ? 2 : a < b ? -1 : a > b ? 1 : 0;
  } else {
    int64_t a = k->ord[ia], b = k->ord[ib];
    c = a < b ? -1 : a > b ? 1 : 0;
  }
  switch (k->dir) {
    case KILN_CMP_LT: return c == -1;
    case KILN_CMP_GT: return c == 1;
    case KILN_CMP_LE: return c == -1 || c == 0;
    case KILN_CMP_GE: return c == 1 || c == 0;
    default: return false;
  }
}

enum { kScratchCalls = 4096 };

/* General path: evaluates the comparator on elements ia, ib of every operand. */
static bool call_less(sort_ctx_t *s, int64_t ia, int64_t ib) {
  if (s->err) return false;
  for (int i = 0; i < s->nop; i++) {
    const kiln_literal_t *l = s->operands[i];
    size_t es = kiln_elem_type_storage_bytes(l->shape->type);
    memcpy(s->args[2 * i]->data, (const char *)l->data + (size_t)ia * es, es);
    memcpy(s->args[2 * i + 1]->data, (const char *)l->data + (size_t)ib * es, es);
  }
  if (s->scratch_calls++ >= kScratchCalls) {
    size_t limit = s->scratch.limit;
    kiln_arena_destroy(&s->scratch);
    kiln_arena_init(&s->scratch);
    s->scratch.limit = limit;
    s->scratch_calls = 1;
  }
  kiln_literal_t *r = NULL;
  kiln_arena_t *saved = s->ctx->arena;
  s->ctx->arena = &s->scratch; /* the result is read before the next reset */
  kiln_status st = kiln_eval_computation(s->ctx, s->comp, 2 * s->nop, s->args, &r);
  s->ctx->arena = saved;
  if (st) {
    s->err = st;
    return false;
  }
  if (r && kiln_shape_is_tuple(r->shape) && r->num_tuple_elements == 1) r = r->tuple_elements[0];
  if (!r || !kiln_shape_is_array(r->shape) || r->shape->type != KILN_PRED || r->num_elements != 1) {
    s->err = KILN_ERR_INVALID("sort comparator must return pred[]");
    return false;
  }
  return *(const uint8_t *)r->data != 0;
}

static bool sort_less(sort_ctx_t *s, int64_t ia, int64_t ib) {
  return s->fast ? fast_less(&s->key, ia, ib) : call_less(s, ia, ib);
}

/* Stable merge sort of the linear indices `v[0..n)` (tmp has room for n). */
static void merge_sort(sort_ctx_t *s, int64_t *v, int64_t *tmp, int64_t n) {
  for (int64_t width = 1; width < n; width *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * width) {
      int64_t mid = lo + width < n ? lo + width : n;
      int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
      int64_t i = lo, j = mid, o = lo;
      while (i < mid && j < hi) {
        /* take from the right only when it is strictly before the left: stability */
        if (sort_less(s, v[j], v[i])) tmp[o++] = v[j++];
        else tmp[o++] = v[i++];
      }
      while (i < mid) tmp[o++] = v[i++];
      while (j < hi) tmp[o++] = v[j++];
    }
    memcpy(v, tmp, sizeof(int64_t) * (size_t)n);
    if (s->err) return;
  }
}

static bool is_const_scalar(const kiln_hlo_instruction_t *x, bool want_nan) {
  if (x->opcode != KILN_OP_CONSTANT || !x->literal || x->literal->unknown ||
      x->literal->num_elements != 1 || !kiln_elem_type_is_float(x->shape->type))
    return false;
  double v = kiln_literal_get_f64(x->literal, 0);
  return want_nan ? isnan(v) : v == 0;
}

static bool is_compare_of(const kiln_hlo_instruction_t *x, kiln_cmp_dir_t dir,
                          const kiln_hlo_instruction_t *p, bool rhs_zero) {
  if (x->opcode != KILN_OP_COMPARE || x->num_operands != 2 || x->comparison_direction != dir)
    return false;
  if (x->operands[0] != p) return false;
  return rhs_zero ? is_const_scalar(x->operands[1], false) : x->operands[1] == p;
}

/* The parameter a comparator operand reads: the parameter itself, or JAX's float
 * canonicalization of it, select(p != p, nan, select(p == 0, 0, p)) (sets *canon).
 * NULL when it is neither. */
static const kiln_hlo_instruction_t *key_param(const kiln_hlo_instruction_t *x, bool *canon,
                                              double *nan_v, double *zero_v) {
  *canon = false;
  if (x->opcode == KILN_OP_PARAMETER) return x;
  if (x->opcode != KILN_OP_SELECT || x->num_operands != 3) return NULL;
  const kiln_hlo_instruction_t *inner = x->operands[2];
  if (inner->opcode != KILN_OP_SELECT || inner->num_operands != 3) return NULL;
  const kiln_hlo_instruction_t *p = inner->operands[2];
  if (p->opcode != KILN_OP_PARAMETER) return NULL;
  if (!is_compare_of(x->operands[0], KILN_CMP_NE, p, false) ||
      !is_const_scalar(x->operands[1], true) ||
      !is_compare_of(inner->operands[0], KILN_CMP_EQ, p, true) ||
      !is_const_scalar(inner->operands[1], false))
    return NULL;
  *canon = true;
  *nan_v = kiln_literal_get_f64(x->operands[1]->literal, 0);
  *zero_v = kiln_literal_get_f64(inner->operands[1]->literal, 0);
  return p;
}

/* Detects `ROOT compare(key(p), key(q))` with {p, q} = {2i, 2i+1}, key = the parameter or
 * JAX's canonicalization of it (the same on both sides). */
static bool classify_comparator(const kiln_hlo_computation_t *c, kiln_literal_t *const *ops,
                                int nop, sort_key_t *k) {
  const kiln_hlo_instruction_t *r = c->root;
  if (!r || r->opcode != KILN_OP_COMPARE || r->num_operands != 2) return false;
  bool ca, cb;
  double na = 0, nb = 0, za = 0, zb = 0;
  const kiln_hlo_instruction_t *a = key_param(r->operands[0], &ca, &na, &za);
  const kiln_hlo_instruction_t *b = key_param(r->operands[1], &cb, &nb, &zb);
  if (!a || !b || ca != cb) return false;
  if (ca && (signbit(na) != signbit(nb) || signbit(za) != signbit(zb))) return false;
  int64_t p = a->parameter_number, q = b->parameter_number;
  if (p / 2 != q / 2 || p == q || p / 2 >= nop) return false;
  int i = (int)(p / 2);
  kiln_elem_type_t et = ops[i]->shape->type;
  if (kiln_elem_type_is_complex(et)) return false;
  if (r->comparison_direction != KILN_CMP_LT && r->comparison_direction != KILN_CMP_GT &&
      r->comparison_direction != KILN_CMP_LE && r->comparison_direction != KILN_CMP_GE)
    return false;
  if (!kiln_shape_is_array(a->shape) || a->shape->rank != 0 || a->shape->type != et)
    return false;
  kiln_cmp_type_t t = r->comparison_type;
  if (kiln_elem_type_is_float(et) && t != KILN_CMP_TYPE_DEFAULT && t != KILN_CMP_TYPE_FLOAT &&
      t != KILN_CMP_TYPE_TOTALORDER)
    return false;
  if (!kiln_elem_type_is_float(et) && t == KILN_CMP_TYPE_TOTALORDER) return false;
  k->dir = r->comparison_direction;
  k->type = t;
  k->et = et;
  k->lit = ops[i];
  k->swapped = (p % 2) == 1;
  k->canonicalize = ca;
  k->canon_nan = na;
  k->canon_zero = za;
  return true;
}

static kiln_status eval_sort(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                             kiln_literal_t *const *operands, kiln_literal_t **out) {
  int nop = instr->num_operands;
  if (nop < 1) return KILN_ERR_INVALID("sort needs at least one operand");
  if (!instr->has_dimensions || instr->dimensions.n != 1)
    return KILN_ERR_INVALID("sort needs dimensions={d}");
  const kiln_shape_t *s0 = operands[0]->shape;
  if (!kiln_shape_is_array(s0)) return KILN_ERR_INVALID("sort operands must be arrays");
  int64_t dim = instr->dimensions.v[0];
  if (dim < 0 || dim >= s0->rank) return KILN_ERR_INVALID("sort dimension out of range");
  for (int i = 1; i < nop; i++) {
    const kiln_shape_t *si = operands[i]->shape;
    if (!kiln_shape_is_array(si) || si->rank != s0->rank)
      return KILN_ERR_INVALID("sort operands must have the same dimensions");
    for (int d = 0; d < s0->rank; d++)
      if (si->dims[d] != s0->dims[d])
        return KILN_ERR_INVALID("sort operands must have the same dimensions");
  }
  const kiln_hlo_computation_t *comp = kiln_hlo_instruction_called(instr, "to_apply");
  if (!comp) return KILN_ERR_INVALID("sort without comparator");
  if (comp->num_parameters != 2 * nop)
    return KILN_ERR_INVALID("sort comparator takes %d parameters, expected %d",
                            comp->num_parameters, 2 * nop);

  /* result literal(s) */
  const kiln_shape_t *rs = instr->shape;
  kiln_literal_t *res = kiln_eval_literal_make(ctx, instr->shape);
  if (!res) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "sort result too large");
  kiln_literal_t **dst = kiln_arena_alloc(ctx->arena, sizeof(*dst) * (size_t)nop);
  if (!dst) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "sort: arena full");
  if (kiln_shape_is_tuple(rs)) {
    if (rs->num_elements != nop) return KILN_ERR_INVALID("sort result must be a %d-tuple", nop);
    for (int i = 0; i < nop; i++) dst[i] = res->tuple_elements[i];
  } else {
    if (nop != 1) return KILN_ERR_INVALID("sort of %d operands must return a tuple", nop);
    dst[0] = res;
  }
  for (int i = 0; i < nop; i++)
    if (!kiln_shape_compatible(dst[i]->shape, operands[i]->shape))
      return KILN_ERR_INVALID("sort result %d differs from its operand", i);

  sort_ctx_t sc;
  memset(&sc, 0, sizeof sc);
  sc.ctx = ctx;
  sc.comp = comp;
  sc.nop = nop;
  sc.operands = operands;
  sc.fast = classify_comparator(comp, operands, nop, &sc.key);
  if (!sc.fast) {
    sc.args = kiln_arena_alloc(ctx->arena, sizeof(*sc.args) * (size_t)(2 * nop));
    if (!sc.args) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "sort: arena full");
    for (int i = 0; i < 2 * nop; i++) {
      kiln_shape_t *ps = comp->parameters[i] ? comp->parameters[i]->shape : NULL;
      if (!ps || !kiln_shape_is_array(ps) || ps->rank != 0 ||
          ps->type != operands[i / 2]->shape->type)
        return KILN_ERR_INVALID("sort comparator parameter %d must be a %s scalar", i,
                                kiln_elem_type_name(operands[i / 2]->shape->type));
      sc.args[i] = kiln_eval_literal_make(ctx, ps);
      if (!sc.args[i]) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "sort: arena full");
    }
  }

  int64_t n = s0->dims[dim];
  int64_t inner = 1, outer = 1;
  for (int d = dim + 1; d < s0->rank; d++) inner *= s0->dims[d];
  for (int d = 0; d < dim; d++) outer *= s0->dims[d];
  int64_t *v = kiln_try_malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1) * 2);
  if (!v) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "sort: out of memory");
  int64_t *tmp = v + (n > 0 ? n : 1);
  if (sc.fast) {
    kiln_status ks = precompute_keys(&sc.key);
    if (ks) {
      kiln_free(v);
      return ks;
    }
  }
  kiln_arena_init(&sc.scratch);
  sc.scratch.limit = ctx->arena->limit;
  for (int64_t o = 0; o < outer && !sc.err; o++) {
    for (int64_t in = 0; in < inner && !sc.err; in++) {
      int64_t base = o * n * inner + in;
      for (int64_t j = 0; j < n; j++) v[j] = base + j * inner;
      merge_sort(&sc, v, tmp, n);
      for (int i = 0; i < nop; i++) {
        size_t es = kiln_elem_type_storage_bytes(operands[i]->shape->type);
        for (int64_t j = 0; j < n; j++)
          memcpy((char *)dst[i]->data + (size_t)(base + j * inner) * es,
                 (const char *)operands[i]->data + (size_t)v[j] * es, es);
      }
    }
  }
  kiln_free(v);
  kiln_free(sc.key.ord);
  kiln_free(sc.key.fv);
  kiln_arena_destroy(&sc.scratch);
  if (sc.err) return kiln_status_annotate(sc.err, "in sort %s", instr->name);
  *out = res;
  return KILN_STATUS_OK;
}

/* ---- topk ---- */

typedef struct topk_ctx {
  const kiln_literal_t *lit;
  bool largest;
} topk_ctx_t;

/* "a before b" for topk: by value (desc when largest), then by lower index. */
static bool topk_before(const topk_ctx_t *t, int64_t a, int64_t b) {
  kiln_elem_type_t et = t->lit->shape->type;
  int c;
  if (kiln_elem_type_is_float(et)) {
    int64_t x = kiln_eval_elem_total_order_key(et, t->lit->data, a);
    int64_t y = kiln_eval_elem_total_order_key(et, t->lit->data, b);
    c = x < y ? -1 : x > y ? 1 : 0;
  } else if (kiln_elem_type_is_unsigned_int(et) || et == KILN_PRED) {
    uint64_t x = kiln_literal_get_u64(t->lit, a), y = kiln_literal_get_u64(t->lit, b);
    c = x < y ? -1 : x > y ? 1 : 0;
  } else {
    int64_t x = kiln_literal_get_s64(t->lit, a), y = kiln_literal_get_s64(t->lit, b);
    c = x < y ? -1 : x > y ? 1 : 0;
  }
  if (c == 0) return a < b;
  return t->largest ? c > 0 : c < 0;
}

static kiln_status eval_topk(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                             kiln_literal_t *const *operands, kiln_literal_t **out) {
  if (instr->num_operands != 1) return KILN_ERR_INVALID("topk expects one operand");
  const kiln_literal_t *in = operands[0];
  const kiln_shape_t *is = in->shape, *rs = instr->shape;
  if (!kiln_shape_is_array(is) || is->rank < 1)
    return KILN_ERR_INVALID("topk operand must be an array of rank >= 1");
  if (kiln_elem_type_is_complex(is->type)) return KILN_ERR_INVALID("topk of complex values");
  int64_t n = is->dims[is->rank - 1], k = instr->k;
  if (k < 0 || k > n) return KILN_ERR_INVALID("topk: k=%lld out of range [0, %lld]",
                                              (long long)k, (long long)n);
  if (!kiln_shape_is_tuple(rs) || rs->num_elements != 2)
    return KILN_ERR_INVALID("topk result must be a (values, indices) tuple");
  const kiln_shape_t *vs = rs->elements[0], *xs = rs->elements[1];
  if (!kiln_shape_is_array(vs) || !kiln_shape_is_array(xs) || vs->rank != is->rank ||
      xs->rank != is->rank || vs->type != is->type || !kiln_elem_type_is_integral(xs->type))
    return KILN_ERR_INVALID("topk result shapes do not match the operand");
  for (int d = 0; d < is->rank; d++) {
    int64_t want = d == is->rank - 1 ? k : is->dims[d];
    if (vs->dims[d] != want || xs->dims[d] != want)
      return KILN_ERR_INVALID("topk result dimension %d should be %lld", d, (long long)want);
  }
  kiln_literal_t *res = kiln_eval_literal_make(ctx, instr->shape);
  if (!res) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "topk result too large");
  kiln_literal_t *vals = res->tuple_elements[0], *idxs = res->tuple_elements[1];
  int64_t rows = n > 0 ? kiln_shape_num_elements(is) / n : 0;
  if (n == 0) rows = 0;
  int64_t *v = kiln_try_malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
  if (!v) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "topk: out of memory");
  topk_ctx_t t = {in, instr->largest};
  size_t es = kiln_elem_type_storage_bytes(is->type);
  for (int64_t r = 0; r < rows; r++) {
    /* partial selection: keep the best k in v[0..k) by insertion (k is small in practice) */
    int64_t have = 0;
    for (int64_t j = 0; j < n; j++) {
      int64_t e = r * n + j;
      if (have == k && (k == 0 || !topk_before(&t, e, v[k - 1]))) continue;
      int64_t pos = have < k ? have++ : k - 1;
      while (pos > 0 && topk_before(&t, e, v[pos - 1])) {
        v[pos] = v[pos - 1];
        pos--;
      }
      v[pos] = e;
    }
    for (int64_t j = 0; j < k; j++) {
      memcpy((char *)vals->data + (size_t)(r * k + j) * es, (const char *)in->data + (size_t)v[j] * es,
             es);
      kiln_literal_set_s64(idxs, r * k + j, v[j] - r * n);
    }
  }
  kiln_free(v);
  *out = res;
  return KILN_STATUS_OK;
}

kiln_status kiln_eval_sort(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                           kiln_literal_t *const *operands, kiln_literal_t **out) {
  *out = NULL;
  switch (instr->opcode) {
    case KILN_OP_SORT: return eval_sort(ctx, instr, operands, out);
    case KILN_OP_TOPK: return eval_topk(ctx, instr, operands, out);
    default:
      return KILN_ERR_UNIMPLEMENTED("eval_sort: unsupported opcode %s",
                                    kiln_hlo_opcode_name(instr->opcode));
  }
}
