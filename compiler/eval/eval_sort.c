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
} sort_key_t;

typedef struct sort_ctx {
  kiln_eval_ctx_t *ctx;
  const kiln_hlo_computation_t *comp;
  int nop;
  kiln_literal_t *const *operands;
  kiln_literal_t **args; /* 2 * nop scalar literals (general path) */
  bool fast;
  sort_key_t key;
  kiln_status err;
} sort_ctx_t;

/* Fast-path comparison of elements ia, ib of the keyed operand: "a before b". */
static bool fast_less(const sort_key_t *k, int64_t ia, int64_t ib) {
  if (k->swapped) {
    int64_t t = ia;
    ia = ib;
    ib = t;
  }
  int c; /* -1, 0, 1 or 2 for unordered */
  kiln_elem_type_t et = k->et;
  if (kiln_elem_type_is_float(et)) {
    double a = kiln_literal_get_f64(k->lit, ia), b = kiln_literal_get_f64(k->lit, ib);
    if (k->type == KILN_CMP_TYPE_TOTALORDER) {
      int64_t x = total_order_key(a), y = total_order_key(b);
      c = x < y ? -1 : x > y ? 1 : 0;
    } else {
      c = isnan(a) || isnan(b) ? 2 : a < b ? -1 : a > b ? 1 : 0;
    }
  } else if (kiln_elem_type_is_unsigned_int(et) || et == KILN_PRED ||
             k->type == KILN_CMP_TYPE_UNSIGNED) {
    uint64_t a = kiln_literal_get_u64(k->lit, ia), b = kiln_literal_get_u64(k->lit, ib);
    c = a < b ? -1 : a > b ? 1 : 0;
  } else {
    int64_t a = kiln_literal_get_s64(k->lit, ia), b = kiln_literal_get_s64(k->lit, ib);
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

/* General path: evaluates the comparator on elements ia, ib of every operand. */
static bool call_less(sort_ctx_t *s, int64_t ia, int64_t ib) {
  if (s->err) return false;
  for (int i = 0; i < s->nop; i++) {
    const kiln_literal_t *l = s->operands[i];
    size_t es = kiln_elem_type_storage_bytes(l->shape->type);
    memcpy(s->args[2 * i]->data, (const char *)l->data + (size_t)ia * es, es);
    memcpy(s->args[2 * i + 1]->data, (const char *)l->data + (size_t)ib * es, es);
  }
  kiln_literal_t *r = NULL;
  kiln_status st = kiln_eval_computation(s->ctx, s->comp, 2 * s->nop, s->args, &r);
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

/* Detects `ROOT compare(param(p), param(q))` with {p, q} = {2i, 2i+1}. */
static bool classify_comparator(const kiln_hlo_computation_t *c, kiln_literal_t *const *ops,
                                int nop, sort_key_t *k) {
  const kiln_hlo_instruction_t *r = c->root;
  if (!r || r->opcode != KILN_OP_COMPARE || r->num_operands != 2) return false;
  const kiln_hlo_instruction_t *a = r->operands[0], *b = r->operands[1];
  if (a->opcode != KILN_OP_PARAMETER || b->opcode != KILN_OP_PARAMETER) return false;
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
  kiln_literal_t *res = kiln_literal_make(ctx->arena, instr->shape);
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
      sc.args[i] = kiln_literal_make(ctx->arena, ps);
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
    int64_t x = total_order_key(kiln_literal_get_f64(t->lit, a));
    int64_t y = total_order_key(kiln_literal_get_f64(t->lit, b));
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
  kiln_literal_t *res = kiln_literal_make(ctx->arena, instr->shape);
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
