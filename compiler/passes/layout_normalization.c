/* Layout normalization; see layout.h.
 *
 * Every value x gets a normalized form norm(x): the same data with its logical dimensions
 * listed in physical (major-to-minor) order and the default layout, i.e. logically
 * transpose(x, phys(x)), bytes unchanged. Instructions are rewritten in place in post
 * order so that they compute norm(x) from their operands' normalized forms; where the
 * result's or an operand's order does not line up an explicit transpose is inserted.
 *
 * Computations are handled callees first. A computation is "free" when every caller is a
 * fusion/call/while/conditional whose operands and result match its parameters and root
 * layout for layout: its signature is normalized too. Every other one (the entry, reducers,
 * computations with mismatched callers) keeps its signature: parameters are bitcast to
 * their normalized form where used and the root is bitcast back.
 *
 * An instruction without a rule (or with a tiled layout) keeps its shape; its operands are
 * bitcast back to their original layouts and its result bitcast to the normalized form.
 * That is always correct; it is counted as unsupported and logged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hashmap.h"
#include "base/log.h"
#include "compiler/passes/layout.h"
#include "compiler/passes/layout_util.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

#define MAXR KILN_LAYOUT_MAX_RANK

typedef struct ln {
  kiln_hlo_module_t *m;
  kiln_arena_t *a;
  kiln_ptrmap_t orig;  /* instruction -> shape before the pass */
  kiln_ptrmap_t norm;  /* instruction -> its normalized value */
  kiln_ptrmap_t fixed; /* computation -> keeps its signature */
  kiln_pass_effects_t effects;
  KILN_VEC(kiln_hlo_instruction_t *) created; /* new instructions of the current computation */
  int rewritten, unsupported;
  bool changed;
} ln_t;

static kiln_shape_t *orig_shape(ln_t *ln, const kiln_hlo_instruction_t *x) {
  kiln_shape_t *s = kiln_ptrmap_get(&ln->orig, x);
  return s ? s : x->shape;
}

static bool arr_ok(const kiln_shape_t *s) {
  return kiln_shape_is_array(s) && s->rank <= MAXR;
}

/* Default layout (no layout counts as default), no tiles; tuples leaf by leaf. */
static bool is_normal(const kiln_shape_t *s) {
  if (kiln_shape_is_tuple(s)) {
    for (int i = 0; i < s->num_elements; i++)
      if (!is_normal(s->elements[i])) return false;
    return true;
  }
  if (!kiln_shape_is_array(s) || !s->has_layout) return true;
  if (kiln_layout_is_tiled(s) || s->rank > MAXR) return false;
  int64_t m2m[MAXR];
  kiln_layout_m2m(s, m2m);
  return kiln_layout_m2m_is_default(s->rank, m2m);
}

/* The normalized shape: array dims in physical order, default layout (memory space and
 * element size kept). Tiled leaves (and huge ranks) are left as they are. */
static kiln_shape_t *norm_shape(ln_t *ln, kiln_shape_t *s) {
  if (kiln_shape_is_tuple(s)) {
    kiln_shape_t **el = NULL;
    for (int i = 0; i < s->num_elements; i++) {
      kiln_shape_t *e = norm_shape(ln, s->elements[i]);
      if (e != s->elements[i] && !el) {
        el = kiln_arena_alloc(ln->a, sizeof *el * (size_t)s->num_elements);
        memcpy(el, s->elements, sizeof *el * (size_t)s->num_elements);
      }
      if (el) el[i] = e;
    }
    return el ? kiln_shape_make_tuple(ln->a, s->num_elements, el) : s;
  }
  if (!arr_ok(s) || kiln_layout_is_tiled(s) || is_normal(s)) return s;
  int64_t phys[MAXR], dims[MAXR];
  kiln_layout_phys(s, phys);
  for (int k = 0; k < s->rank; k++) dims[k] = s->dims[phys[k]];
  kiln_shape_t *r = kiln_shape_make_array_with_default_layout(ln->a, s->type, s->rank, dims);
  if (s->dynamic) {
    r->dynamic = kiln_arena_alloc(ln->a, sizeof(bool) * (size_t)s->rank);
    for (int k = 0; k < s->rank; k++) r->dynamic[k] = s->dynamic[phys[k]];
  }
  r->layout.memory_space = s->layout.memory_space;
  r->layout.element_size_bits = s->layout.element_size_bits;
  return r;
}

static kiln_hlo_instruction_t *make(ln_t *ln, kiln_hlo_computation_t *c, kiln_hlo_opcode_t op,
                                    kiln_shape_t *shape, const char *hint, int n,
                                    kiln_hlo_instruction_t *const *ops) {
  kiln_hlo_instruction_t *in =
      kiln_hlo_instruction_create(c, op, shape, kiln_hlo_module_unique_name(ln->m, hint));
  kiln_hlo_instruction_set_operands(in, n, ops);
  kiln_vec_push(&ln->created, in);
  return in;
}

static bool same_layout_shape(const kiln_shape_t *a, const kiln_shape_t *b) {
  return kiln_shape_equal(a, b, true) && kiln_layout_phys_equal(a, b);
}

/* `v` converted to `target` (same logical content up to layout) with bitcasts, tuple by
 * tuple. */
static kiln_hlo_instruction_t *convert(ln_t *ln, kiln_hlo_instruction_t *v, kiln_shape_t *target) {
  if (same_layout_shape(v->shape, target)) return v;
  kiln_hlo_computation_t *c = v->parent;
  if (kiln_shape_is_tuple(target)) {
    int n = target->num_elements;
    kiln_hlo_instruction_t **el = kiln_arena_alloc(ln->a, sizeof *el * (size_t)(n ? n : 1));
    for (int k = 0; k < n; k++) {
      kiln_hlo_instruction_t *e;
      if (v->opcode == KILN_OP_TUPLE && v->num_operands == n) {
        e = v->operands[k];
      } else {
        e = make(ln, c, KILN_OP_GET_TUPLE_ELEMENT, v->shape->elements[k], "get-tuple-element", 1, &v);
        e->tuple_index = k;
      }
      el[k] = convert(ln, e, target->elements[k]);
    }
    return make(ln, c, KILN_OP_TUPLE, target, "tuple", n, el);
  }
  /* bitcast(bitcast(y)) back to y's own shape is y */
  if (v->opcode == KILN_OP_BITCAST && same_layout_shape(v->operands[0]->shape, target)) return v->operands[0];
  return make(ln, c, KILN_OP_BITCAST, target, "bitcast", 1, &v);
}

static bool fixed_comp(ln_t *ln, const kiln_hlo_computation_t *c) {
  return kiln_ptrmap_get(&ln->fixed, c) != NULL;
}

/* The normalized value of operand `o` (a fixed computation's parameter is bitcast on first
 * use). */
static kiln_hlo_instruction_t *get_norm(ln_t *ln, kiln_hlo_instruction_t *o) {
  kiln_hlo_instruction_t *v = kiln_ptrmap_get(&ln->norm, o);
  if (v) return v;
  if (o->opcode == KILN_OP_PARAMETER && fixed_comp(ln, o->parent))
    v = convert(ln, o, norm_shape(ln, orig_shape(ln, o)));
  else
    v = o;
  kiln_ptrmap_put(&ln->norm, o, v);
  return v;
}

/* ---- permutations ---- */

static void identity(int r, int64_t *p) {
  for (int i = 0; i < r; i++) p[i] = i;
}

static void inverse(int r, const int64_t *p, int64_t *inv) {
  for (int i = 0; i < r; i++) inv[p[i]] = i;
}

static int64_t *arena_list(ln_t *ln, int n, const int64_t *v) {
  int64_t *r = kiln_arena_alloc(ln->a, sizeof(int64_t) * (size_t)(n ? n : 1));
  if (n) memcpy(r, v, sizeof(int64_t) * (size_t)n);
  return r;
}

/* `v` holds logical dims in order `from` (v's dim k is logical dim from[k]); returns the
 * same data with dims in order `to` (a transpose unless the orders agree). */
static kiln_hlo_instruction_t *to_order(ln_t *ln, kiln_hlo_instruction_t *v, const int64_t *from,
                                        const int64_t *to, int r) {
  int64_t pos[MAXR], t[MAXR], dims[MAXR];
  inverse(r, from, pos);
  bool id = true;
  for (int k = 0; k < r; k++) {
    t[k] = pos[to[k]];
    id &= t[k] == k;
  }
  if (id) return v;
  const kiln_shape_t *s = v->shape;
  for (int k = 0; k < r; k++) dims[k] = s->dims[t[k]];
  kiln_shape_t *ns = kiln_shape_make_array_with_default_layout(ln->a, s->type, r, dims);
  if (s->dynamic) {
    ns->dynamic = kiln_arena_alloc(ln->a, sizeof(bool) * (size_t)r);
    for (int k = 0; k < r; k++) ns->dynamic[k] = s->dynamic[t[k]];
  }
  kiln_hlo_instruction_t *tr = make(ln, v->parent, KILN_OP_TRANSPOSE, ns, "transpose", 1, &v);
  tr->has_dimensions = true;
  tr->dimensions.n = r;
  tr->dimensions.v = arena_list(ln, r, t);
  return tr;
}

/* ---- rewrites: each computes norm(x); false = no rule applies (fallback) ---- */

typedef struct rw {
  ln_t *ln;
  kiln_hlo_instruction_t *x;
  kiln_shape_t *xs, *nxs;          /* original and normalized result shapes */
  kiln_hlo_instruction_t **v;      /* normalized operands */
  int r;                           /* result rank (arrays) */
  int64_t P[MAXR], posP[MAXR];     /* result physical order and its inverse */
  kiln_hlo_instruction_t *result;  /* norm(x) */
} rw_t;

static void operand_phys(rw_t *w, int i, int64_t *q) {
  kiln_layout_phys(orig_shape(w->ln, w->x->operands[i]), q);
}

static void set_ops(rw_t *w, kiln_hlo_instruction_t *const *ops) {
  kiln_hlo_instruction_t *x = w->x;
  bool same = true;
  for (int i = 0; i < x->num_operands; i++) same &= ops[i] == x->operands[i];
  if (!same) {
    kiln_hlo_instruction_set_operands(x, x->num_operands, ops);
    w->ln->changed = true;
  }
}

static void set_shape(rw_t *w, kiln_shape_t *s) {
  if (w->x->shape != s) {
    w->x->shape = s;
    w->ln->changed = true;
  }
  w->result = w->x;
}

/* Array operands of the result's rank are brought to the result's order; others (scalars:
 * pad values, indices, selectors) pass through. */
static kiln_hlo_instruction_t **ops_in_result_order(rw_t *w) {
  kiln_hlo_instruction_t *x = w->x;
  kiln_hlo_instruction_t **ops = kiln_arena_alloc(w->ln->a, sizeof *ops * (size_t)(x->num_operands ? x->num_operands : 1));
  for (int i = 0; i < x->num_operands; i++) {
    const kiln_shape_t *os = orig_shape(w->ln, x->operands[i]);
    ops[i] = w->v[i];
    if (arr_ok(os) && os->rank == w->r && w->r > 0) {
      int64_t q[MAXR];
      operand_phys(w, i, q);
      ops[i] = to_order(w->ln, w->v[i], q, w->P, w->r);
    }
  }
  return ops;
}

static bool rw_elementwise(rw_t *w) {
  kiln_hlo_instruction_t *x = w->x;
  for (int i = 0; i < x->num_operands; i++) {
    const kiln_shape_t *os = orig_shape(w->ln, x->operands[i]);
    if (!kiln_shape_is_array(os) || (os->rank != 0 && os->rank != w->r)) return false;
  }
  set_ops(w, ops_in_result_order(w));
  set_shape(w, w->nxs);
  return true;
}

static bool rw_copy(rw_t *w) {
  int64_t q[MAXR];
  operand_phys(w, 0, q);
  kiln_hlo_instruction_t *t = to_order(w->ln, w->v[0], q, w->P, w->r);
  if (t == w->v[0]) {
    set_ops(w, &t);
    set_shape(w, w->nxs);
  } else {
    w->result = t; /* a layout-changing copy is a transpose of the normalized operand */
  }
  return true;
}

static bool rw_transpose(rw_t *w) {
  kiln_hlo_instruction_t *x = w->x;
  if (x->dimensions.n != w->r) return false;
  int64_t q[MAXR], posq[MAXR], t[MAXR];
  operand_phys(w, 0, q);
  inverse(w->r, q, posq);
  bool id = true;
  for (int k = 0; k < w->r; k++) {
    t[k] = posq[x->dimensions.v[w->P[k]]];
    id &= t[k] == k;
  }
  if (id) {
    w->result = w->v[0];
    return true;
  }
  set_ops(w, &w->v[0]);
  x->dimensions.v = arena_list(w->ln, w->r, t);
  set_shape(w, w->nxs);
  return true;
}

static bool rw_broadcast(rw_t *w) {
  kiln_hlo_instruction_t *x = w->x;
  const kiln_shape_t *os = orig_shape(w->ln, x->operands[0]);
  int ro = os->rank;
  if (x->dimensions.n != ro) return false;
  int64_t q[MAXR], order[MAXR], dims[MAXR];
  operand_phys(w, 0, q);
  /* operand dims sorted by where they land in the normalized result */
  identity(ro, order);
  for (int i = 1; i < ro; i++)
    for (int j = i; j > 0 && w->posP[x->dimensions.v[order[j]]] < w->posP[x->dimensions.v[order[j - 1]]]; j--) {
      int64_t tmp = order[j];
      order[j] = order[j - 1];
      order[j - 1] = tmp;
    }
  for (int j = 0; j < ro; j++) dims[j] = w->posP[x->dimensions.v[order[j]]];
  kiln_hlo_instruction_t *op = to_order(w->ln, w->v[0], q, order, ro);
  set_ops(w, &op);
  x->dimensions.v = arena_list(w->ln, ro, dims);
  set_shape(w, w->nxs);
  return true;
}

static bool rw_reshape(rw_t *w) {
  ln_t *ln = w->ln;
  kiln_shape_t *os = orig_shape(ln, w->x->operands[0]);
  if (!arr_ok(os)) return false;
  int64_t om2m[MAXR], xm2m[MAXR];
  kiln_layout_m2m(os, om2m);
  kiln_layout_m2m(w->xs, xm2m);
  kiln_hlo_instruction_t *v = w->v[0];
  if (kiln_layout_reshape_bitcast(os, om2m, w->xs, xm2m, NULL)) {
    w->result = kiln_shape_equal(v->shape, w->nxs, true)
                    ? v
                    : make(ln, w->x->parent, KILN_OP_BITCAST, w->nxs, "bitcast", 1, &v);
    return true;
  }
  /* transpose to the operand's logical order, reshape (a bitcast under default layouts),
   * transpose to the result's physical order */
  int64_t q[MAXR], id[MAXR];
  kiln_layout_phys(os, q);
  identity(os->rank > w->r ? os->rank : w->r, id);
  kiln_hlo_instruction_t *a = to_order(ln, v, q, id, os->rank);
  kiln_shape_t *logical = kiln_layout_all_default(ln->a, w->xs);
  kiln_hlo_instruction_t *b = make(ln, w->x->parent, KILN_OP_BITCAST, logical, "bitcast", 1, &a);
  w->result = to_order(ln, b, id, w->P, w->r);
  return true;
}

static bool rw_reduce(rw_t *w) {
  ln_t *ln = w->ln;
  kiln_hlo_instruction_t *x = w->x;
  int n = x->num_operands / 2;
  const kiln_shape_t *in = orig_shape(ln, x->operands[0]);
  if (n < 1 || !arr_ok(in)) return false;
  int ri = in->rank;
  int64_t phys0[MAXR], q0[MAXR];
  kiln_layout_phys(in, phys0);
  bool reduced[MAXR] = {0};
  for (int i = 0; i < x->dimensions.n; i++) {
    int64_t d = x->dimensions.v[i];
    if (d < 0 || d >= ri || reduced[d]) return false;
    reduced[d] = true;
  }
  /* The reduced dimensions keep their logical order (the evaluator, like a sequential
   * loop, folds them in operand dimension order: reordering them would reassociate float
   * sums); the kept ones take their physical order. */
  int64_t next_reduced = 0;
  for (int k = 0; k < ri; k++) {
    if (!reduced[phys0[k]]) {
      q0[k] = phys0[k];
      continue;
    }
    while (!reduced[next_reduced]) next_reduced++;
    q0[k] = next_reduced++;
  }
  int64_t out_of[MAXR], K[MAXR], dims[MAXR];
  int kept = 0, nd = 0;
  for (int d = 0; d < ri; d++) out_of[d] = reduced[d] ? -1 : kept++;
  for (int k = 0; k < ri; k++) {
    if (reduced[q0[k]]) dims[nd++] = k;
    else K[k - nd] = out_of[q0[k]];
  }
  kiln_hlo_instruction_t **ops = kiln_arena_alloc(ln->a, sizeof *ops * (size_t)x->num_operands);
  for (int i = 0; i < x->num_operands; i++) {
    ops[i] = w->v[i];
    if (i < n) {
      const kiln_shape_t *s = orig_shape(ln, x->operands[i]);
      if (!arr_ok(s) || s->rank != ri) return false;
      int64_t q[MAXR];
      kiln_layout_phys(s, q);
      ops[i] = to_order(ln, w->v[i], q, q0, ri);
    }
  }
  /* result leaves in K order */
  int nl = kiln_shape_is_tuple(w->xs) ? w->xs->num_elements : 1;
  kiln_shape_t **leaves = kiln_arena_alloc(ln->a, sizeof *leaves * (size_t)nl);
  for (int l = 0; l < nl; l++) {
    const kiln_shape_t *ls = kiln_shape_is_tuple(w->xs) ? w->xs->elements[l] : w->xs;
    if (!arr_ok(ls) || ls->rank != kept) return false;
    int64_t ld[MAXR];
    for (int k = 0; k < kept; k++) ld[k] = ls->dims[K[k]];
    leaves[l] = kiln_shape_make_array_with_default_layout(ln->a, ls->type, kept, ld);
  }
  set_ops(w, ops);
  x->dimensions.v = arena_list(ln, nd, dims);
  x->dimensions.n = nd;
  if (!kiln_shape_is_tuple(w->xs)) {
    set_shape(w, leaves[0]);
    w->result = to_order(ln, x, K, w->P, kept);
    return true;
  }
  set_shape(w, kiln_shape_make_tuple(ln->a, nl, leaves));
  kiln_hlo_instruction_t **el = kiln_arena_alloc(ln->a, sizeof *el * (size_t)nl);
  bool any = false;
  for (int l = 0; l < nl; l++) {
    int64_t pl[MAXR];
    kiln_layout_phys(w->xs->elements[l], pl);
    kiln_hlo_instruction_t *g = make(ln, x->parent, KILN_OP_GET_TUPLE_ELEMENT, leaves[l], "get-tuple-element", 1, &x);
    g->tuple_index = l;
    el[l] = to_order(ln, g, K, pl, kept);
    any |= el[l] != g;
  }
  if (any) w->result = make(ln, x->parent, KILN_OP_TUPLE, w->nxs, "tuple", nl, el);
  return true;
}

static void remap_sorted(rw_t *w, kiln_i64_list_t *l) {
  int64_t out[MAXR];
  for (int i = 0; i < l->n; i++) out[i] = w->posP[l->v[i]];
  for (int i = 1; i < l->n; i++)
    for (int j = i; j > 0 && out[j] < out[j - 1]; j--) {
      int64_t t = out[j];
      out[j] = out[j - 1];
      out[j - 1] = t;
    }
  l->v = arena_list(w->ln, l->n, out);
}

static bool dims_in_range(const kiln_i64_list_t *l, int r) {
  if (l->n > r) return false;
  for (int i = 0; i < l->n; i++)
    if (l->v[i] < 0 || l->v[i] >= r) return false;
  return true;
}

/* Ops whose attributes list one entry per dimension, or name dimensions. */
static bool rw_data(rw_t *w) {
  ln_t *ln = w->ln;
  kiln_hlo_instruction_t *x = w->x;
  int r = w->r;
  kiln_hlo_instruction_t **ops;
  switch (x->opcode) {
    case KILN_OP_CONCATENATE:
    case KILN_OP_REVERSE:
    case KILN_OP_SORT:
      if (!dims_in_range(&x->dimensions, r)) return false;
      if (x->opcode == KILN_OP_SORT && kiln_shape_is_tuple(w->xs))
        for (int l = 0; l < w->xs->num_elements; l++)
          if (!kiln_layout_phys_equal(w->xs->elements[l], w->xs->elements[0])) return false;
      for (int i = 0; i < x->num_operands; i++)
        if (orig_shape(ln, x->operands[i])->rank != r) return false;
      ops = ops_in_result_order(w);
      if (x->opcode == KILN_OP_REVERSE) {
        remap_sorted(w, &x->dimensions);
      } else {
        int64_t *d = arena_list(ln, x->dimensions.n, x->dimensions.v);
        for (int i = 0; i < x->dimensions.n; i++) d[i] = w->posP[d[i]];
        x->dimensions.v = d;
      }
      break;
    case KILN_OP_SLICE: {
      if (x->num_slice_dims != r) return false;
      kiln_slice_dim_t *s = kiln_arena_alloc(ln->a, sizeof *s * (size_t)(r ? r : 1));
      for (int k = 0; k < r; k++) s[k] = x->slice[w->P[k]];
      ops = ops_in_result_order(w);
      x->slice = s;
      break;
    }
    case KILN_OP_PAD: {
      if (x->num_pad_dims != r) return false;
      kiln_pad_dim_t *p = kiln_arena_alloc(ln->a, sizeof *p * (size_t)(r ? r : 1));
      for (int k = 0; k < r; k++) p[k] = x->padding[w->P[k]];
      ops = ops_in_result_order(w);
      x->padding = p;
      break;
    }
    case KILN_OP_DYNAMIC_SLICE:
    case KILN_OP_DYNAMIC_UPDATE_SLICE: {
      int first = x->opcode == KILN_OP_DYNAMIC_SLICE ? 1 : 2;
      if (x->num_operands != first + r) return false;
      for (int i = first; i < x->num_operands; i++)
        if (orig_shape(ln, x->operands[i])->rank != 0) return false;
      if (x->opcode == KILN_OP_DYNAMIC_SLICE && x->dynamic_slice_sizes.n != r) return false;
      kiln_hlo_instruction_t **base = ops_in_result_order(w);
      ops = kiln_arena_alloc(ln->a, sizeof *ops * (size_t)x->num_operands);
      for (int i = 0; i < first; i++) ops[i] = base[i];
      for (int k = 0; k < r; k++) ops[first + k] = base[first + w->P[k]];
      if (x->opcode == KILN_OP_DYNAMIC_SLICE) {
        int64_t sz[MAXR];
        for (int k = 0; k < r; k++) sz[k] = x->dynamic_slice_sizes.v[w->P[k]];
        x->dynamic_slice_sizes.v = arena_list(ln, r, sz);
      }
      break;
    }
    case KILN_OP_REDUCE_WINDOW: {
      /* Window dimensions of size > 1 must keep their order (that is the fold order). */
      if (x->num_window_dims != r) return false;
      int64_t last = -1;
      for (int k = 0; k < r; k++) {
        if (x->window[w->P[k]].size <= 1) continue;
        if (w->P[k] < last) return false;
        last = w->P[k];
      }
      if (kiln_shape_is_tuple(w->xs))
        for (int l = 0; l < w->xs->num_elements; l++)
          if (!kiln_layout_phys_equal(w->xs->elements[l], w->xs->elements[0])) return false;
      kiln_window_dim_t *wd = kiln_arena_alloc(ln->a, sizeof *wd * (size_t)(r ? r : 1));
      for (int k = 0; k < r; k++) wd[k] = x->window[w->P[k]];
      ops = ops_in_result_order(w);
      x->window = wd;
      break;
    }
    case KILN_OP_IOTA:
      if (x->iota_dimension < 0 || x->iota_dimension >= r) return false;
      x->iota_dimension = w->posP[x->iota_dimension];
      set_shape(w, w->nxs);
      return true;
    default:
      return false;
  }
  set_ops(w, ops);
  set_shape(w, w->nxs);
  return true;
}

/* A constant's literal is stored in logical order: permute it into the new order. */
static bool rw_constant(rw_t *w) {
  kiln_hlo_instruction_t *x = w->x;
  kiln_literal_t *lit = x->literal;
  if (!lit || !kiln_shape_is_array(lit->shape)) return false;
  if (lit->unknown) {
    kiln_literal_t *nl = kiln_arena_alloc(w->ln->a, sizeof *nl);
    *nl = *lit;
    nl->shape = w->nxs;
    x->literal = nl;
    set_shape(w, w->nxs);
    return true;
  }
  kiln_literal_t *nl = kiln_literal_make(w->ln->a, w->nxs);
  if (!nl) return false;
  size_t es = kiln_elem_type_storage_bytes(w->xs->type);
  int r = w->r;
  int64_t nstride[MAXR], dst_stride[MAXR], idx[MAXR] = {0};
  int64_t st = 1;
  for (int k = r - 1; k >= 0; k--) {
    nstride[k] = st;
    st *= w->nxs->dims[k];
  }
  for (int d = 0; d < r; d++) dst_stride[d] = nstride[w->posP[d]];
  const char *src = lit->data;
  char *dst = nl->data;
  for (int64_t i = 0; i < lit->num_elements; i++) {
    int64_t off = 0;
    for (int d = 0; d < r; d++) off += idx[d] * dst_stride[d];
    memcpy(dst + (size_t)off * es, src + (size_t)i * es, es);
    for (int d = r - 1; d >= 0; d--) {
      if (++idx[d] < w->xs->dims[d]) break;
      idx[d] = 0;
    }
  }
  x->literal = nl;
  set_shape(w, w->nxs);
  return true;
}

static bool rw_bitcast(rw_t *w) {
  kiln_hlo_instruction_t *o = w->x->operands[0], *v = w->v[0];
  /* Already a bitcast from the original operand to a normal shape, when that operand stays
   * (it is its own normalized value, or that value is a bitcast of it). An operand rewritten
   * into another instruction (a layout-changing copy that became a transpose) is replaced:
   * read its normalized value (fuzz-8000159: the bitcast kept the copy, whose operand then
   * became the normalized one, a copy between different dims). */
  bool stays = v == o || (v->opcode == KILN_OP_BITCAST && v->operands[0] == o);
  if (is_normal(w->xs) && stays && o->shape == orig_shape(w->ln, o)) {
    w->result = w->x;
    return true;
  }
  if (!is_normal(v->shape)) return false;
  if (kiln_shape_equal(v->shape, w->nxs, true)) {
    w->result = v;
    return true;
  }
  set_ops(w, &v);
  set_shape(w, w->nxs);
  return true;
}

static bool rw_dot(rw_t *w) {
  ln_t *ln = w->ln;
  kiln_hlo_instruction_t *x = w->x;
  kiln_dot_dnums_t *d = &x->dot_dnums;
  if (x->num_operands != 2 || !x->has_dot_dnums) return false;
  const kiln_shape_t *ls = orig_shape(ln, x->operands[0]), *rs = orig_shape(ln, x->operands[1]);
  if (!arr_ok(ls) || !arr_ok(rs)) return false;
  int64_t ql[MAXR], qr[MAXR], pl[MAXR], pr[MAXR];
  kiln_layout_phys(ls, ql);
  kiln_layout_phys(rs, qr);
  inverse(ls->rank, ql, pl);
  inverse(rs->rank, qr, pr);
  const kiln_i64_list_t *lists[4] = {&d->lhs_batch, &d->lhs_contracting, &d->rhs_batch, &d->rhs_contracting};
  for (int i = 0; i < 4; i++)
    if (!dims_in_range(lists[i], i < 2 ? ls->rank : rs->rank)) return false;
  /* result dims: batch (in list order), lhs free in normalized lhs order, rhs free likewise */
  int64_t K[MAXR];
  int nb = d->lhs_batch.n, n = 0;
  for (int i = 0; i < nb; i++) K[n++] = i;
  int out = nb;
  int64_t lhs_out[MAXR], rhs_out[MAXR];
  for (int side = 0; side < 2; side++) {
    const kiln_shape_t *s = side ? rs : ls;
    const kiln_i64_list_t *b = side ? &d->rhs_batch : &d->lhs_batch;
    const kiln_i64_list_t *c = side ? &d->rhs_contracting : &d->lhs_contracting;
    int64_t *res = side ? rhs_out : lhs_out;
    for (int e = 0; e < s->rank; e++) {
      bool used = false;
      for (int i = 0; i < b->n; i++) used |= b->v[i] == e;
      for (int i = 0; i < c->n; i++) used |= c->v[i] == e;
      res[e] = used ? -1 : out++;
    }
  }
  if (out != w->r) return false;
  for (int k = 0; k < ls->rank; k++)
    if (lhs_out[ql[k]] >= 0) K[n++] = lhs_out[ql[k]];
  for (int k = 0; k < rs->rank; k++)
    if (rhs_out[qr[k]] >= 0) K[n++] = rhs_out[qr[k]];
  kiln_dot_dnums_t nd;
  kiln_i64_list_t *nlists[4] = {&nd.lhs_batch, &nd.lhs_contracting, &nd.rhs_batch, &nd.rhs_contracting};
  for (int i = 0; i < 4; i++) {
    const int64_t *pos = i < 2 ? pl : pr;
    nlists[i]->n = lists[i]->n;
    nlists[i]->v = arena_list(ln, lists[i]->n, lists[i]->v);
    for (int k = 0; k < lists[i]->n; k++) nlists[i]->v[k] = pos[lists[i]->v[k]];
  }
  int64_t ld[MAXR];
  for (int k = 0; k < w->r; k++) ld[k] = w->xs->dims[K[k]];
  *d = nd;
  set_ops(w, w->v);
  set_shape(w, kiln_shape_make_array_with_default_layout(ln->a, w->xs->type, w->r, ld));
  w->result = to_order(ln, x, K, w->P, w->r);
  return true;
}

static bool rw_get_tuple_element(rw_t *w) {
  kiln_hlo_instruction_t *x = w->x, *o = x->operands[0], *v = w->v[0];
  if (v != o && o->shape == orig_shape(w->ln, o)) {
    /* the tuple kept its layout: take the element, then normalize it */
    w->result = convert(w->ln, x, norm_shape(w->ln, w->xs));
    return true;
  }
  if (!kiln_shape_is_tuple(v->shape) || x->tuple_index < 0 || x->tuple_index >= v->shape->num_elements)
    return false;
  set_ops(w, &v);
  set_shape(w, v->shape->elements[x->tuple_index]);
  return true;
}

static bool rw_tuple(rw_t *w) {
  kiln_hlo_instruction_t *x = w->x;
  kiln_shape_t **el = kiln_arena_alloc(w->ln->a, sizeof *el * (size_t)(x->num_operands ? x->num_operands : 1));
  for (int i = 0; i < x->num_operands; i++) el[i] = w->v[i]->shape;
  set_ops(w, w->v);
  set_shape(w, kiln_shape_make_tuple(w->ln->a, x->num_operands, el));
  return true;
}

/* fusion / call / while / conditional whose called computations are free. */
static bool rw_control(rw_t *w) {
  kiln_hlo_instruction_t *x = w->x;
  for (int g = 0; g < x->num_called_groups; g++)
    for (int k = 0; k < x->called_groups[g].n; k++)
      if (fixed_comp(w->ln, x->called_groups[g].comps[k])) return false;
  set_ops(w, w->v);
  set_shape(w, w->nxs);
  return true;
}

static bool rewrite(rw_t *w) {
  kiln_hlo_instruction_t *x = w->x;
  switch (x->opcode) {
    case KILN_OP_GET_TUPLE_ELEMENT:
      return rw_get_tuple_element(w);
    case KILN_OP_TUPLE:
      return rw_tuple(w);
    case KILN_OP_FUSION:
    case KILN_OP_CALL:
    case KILN_OP_WHILE:
    case KILN_OP_CONDITIONAL:
      return rw_control(w);
    default:
      break;
  }
  if (kiln_shape_is_tuple(w->xs)) {
    if (x->opcode == KILN_OP_REDUCE) return rw_reduce(w);
    if (x->opcode != KILN_OP_SORT && x->opcode != KILN_OP_REDUCE_WINDOW) return false;
    const kiln_shape_t *l0 = w->xs->num_elements ? w->xs->elements[0] : NULL;
    if (!l0 || !arr_ok(l0)) return false;
    w->r = l0->rank;
    kiln_layout_phys(l0, w->P);
    inverse(w->r, w->P, w->posP);
    return rw_data(w);
  }
  if (!arr_ok(w->xs)) return false;
  switch (x->opcode) {
    case KILN_OP_COPY:
      return rw_copy(w);
    case KILN_OP_TRANSPOSE:
      return rw_transpose(w);
    case KILN_OP_BROADCAST:
      return rw_broadcast(w);
    case KILN_OP_RESHAPE:
      return rw_reshape(w);
    case KILN_OP_REDUCE:
      return rw_reduce(w);
    case KILN_OP_CONSTANT:
      return rw_constant(w);
    case KILN_OP_BITCAST:
      return rw_bitcast(w);
    case KILN_OP_DOT:
      return rw_dot(w);
    case KILN_OP_BITCAST_CONVERT:
      if (x->num_operands != 1 || orig_shape(w->ln, x->operands[0])->rank != w->r) return false;
      return rw_elementwise(w);
    default:
      break;
  }
  if (kiln_hlo_opcode_is_elementwise(x->opcode)) return rw_elementwise(w);
  return rw_data(w);
}

/* Keeps `x` as it is: operands back to their original layouts, result bitcast to its
 * normalized form. */
static kiln_hlo_instruction_t *fallback(ln_t *ln, kiln_hlo_instruction_t *x, kiln_hlo_instruction_t **v) {
  kiln_hlo_instruction_t **ops = kiln_arena_alloc(ln->a, sizeof *ops * (size_t)(x->num_operands ? x->num_operands : 1));
  bool same = true;
  for (int i = 0; i < x->num_operands; i++) {
    ops[i] = convert(ln, v[i], orig_shape(ln, x->operands[i]));
    same &= ops[i] == x->operands[i];
  }
  if (!same) kiln_hlo_instruction_set_operands(x, x->num_operands, ops);
  return convert(ln, x, norm_shape(ln, x->shape));
}

static void normalize_instruction(ln_t *ln, kiln_hlo_instruction_t *x) {
  rw_t w = {.ln = ln, .x = x, .xs = x->shape};
  w.v = kiln_arena_alloc(ln->a, sizeof *w.v * (size_t)(x->num_operands ? x->num_operands : 1));
  bool all_normal = is_normal(w.xs);
  for (int i = 0; i < x->num_operands; i++) {
    w.v[i] = get_norm(ln, x->operands[i]);
    all_normal &= is_normal(orig_shape(ln, x->operands[i]));
  }
  bool control = x->opcode == KILN_OP_FUSION || x->opcode == KILN_OP_CALL ||
                 x->opcode == KILN_OP_WHILE || x->opcode == KILN_OP_CONDITIONAL;
  kiln_hlo_instruction_t *result = NULL;
  if (all_normal && !control) {
    /* nothing to do but read the operands' normalized values (the same shapes) */
    set_ops(&w, w.v);
    result = x;
  } else {
    w.nxs = norm_shape(ln, w.xs);
    bool ok = is_normal(w.nxs);
    for (int i = 0; ok && i < x->num_operands; i++) ok = is_normal(w.v[i]->shape);
    if (ok && arr_ok(w.xs)) {
      w.r = w.xs->rank;
      kiln_layout_phys(w.xs, w.P);
      inverse(w.r, w.P, w.posP);
    }
    if (ok && rewrite(&w)) {
      result = w.result;
      if (!is_normal(w.xs)) ln->rewritten++;
    } else if (control && !ok) {
      result = fallback(ln, x, w.v);
    } else {
      result = fallback(ln, x, w.v);
      if (!all_normal) {
        ln->unsupported++;
        char *s = kiln_shape_to_string(w.xs, true);
        KILN_LOG_I("layout normalization: %s '%s' (%s) left with its layout", kiln_hlo_opcode_name(x->opcode),
                   x->name, s);
        kiln_free(s);
      }
    }
  }
  kiln_ptrmap_put(&ln->norm, x, result);
}

/* ---- computations ---- */

static bool fully_normalizable(ln_t *ln, kiln_shape_t *s) {
  return is_normal(norm_shape(ln, s));
}

static bool matches(ln_t *ln, const kiln_hlo_instruction_t *a, const kiln_hlo_instruction_t *b) {
  kiln_shape_t *sa = orig_shape(ln, a), *sb = orig_shape(ln, b);
  return kiln_layout_phys_equal(sa, sb) && fully_normalizable(ln, sa);
}

/* Whether the call site `x` lets its callees' signatures be normalized. */
static bool site_ok(ln_t *ln, const kiln_hlo_instruction_t *x) {
  switch (x->opcode) {
    case KILN_OP_FUSION:
    case KILN_OP_CALL: {
      if (x->num_called_groups != 1 || x->called_groups[0].n != 1) return false;
      const kiln_hlo_computation_t *c = x->called_groups[0].comps[0];
      if (c->num_parameters != x->num_operands || !c->root) return false;
      for (int i = 0; i < x->num_operands; i++)
        if (!c->parameters[i] || !matches(ln, x->operands[i], c->parameters[i])) return false;
      return matches(ln, c->root, x);
    }
    case KILN_OP_WHILE: {
      const kiln_hlo_computation_t *b = kiln_hlo_instruction_called(x, "body");
      const kiln_hlo_computation_t *c = kiln_hlo_instruction_called(x, "condition");
      if (!b || !c || b == c || x->num_operands != 1 || b->num_parameters != 1 || c->num_parameters != 1 ||
          !b->parameters[0] || !c->parameters[0])
        return false;
      return matches(ln, x->operands[0], x) && matches(ln, b->parameters[0], x) &&
             matches(ln, c->parameters[0], x) && matches(ln, b->root, x);
    }
    case KILN_OP_CONDITIONAL: {
      int k = 0;
      for (int g = 0; g < x->num_called_groups; g++)
        for (int j = 0; j < x->called_groups[g].n; j++, k++) {
          const kiln_hlo_computation_t *b = x->called_groups[g].comps[j];
          if (k + 1 >= x->num_operands || b->num_parameters != 1 || !b->parameters[0] ||
              !matches(ln, x->operands[k + 1], b->parameters[0]) || !matches(ln, b->root, x))
            return false;
        }
      return k == x->num_operands - 1;
    }
    default:
      return false;
  }
}

static void find_fixed(ln_t *ln) {
  kiln_ptrmap_t called;
  kiln_ptrmap_init(&called);
  kiln_hlo_module_t *m = ln->m;
  for (size_t ci = 0; ci < m->computations.len; ci++) {
    kiln_hlo_computation_t *c = m->computations.data[ci];
    for (size_t i = 0; i < c->instructions.len; i++) {
      kiln_hlo_instruction_t *x = c->instructions.data[i];
      if (!x->num_called_groups) continue;
      bool ok = site_ok(ln, x);
      for (int g = 0; g < x->num_called_groups; g++)
        for (int k = 0; k < x->called_groups[g].n; k++) {
          kiln_hlo_computation_t *callee = x->called_groups[g].comps[k];
          kiln_ptrmap_put(&called, callee, (void *)1);
          if (!ok) kiln_ptrmap_put(&ln->fixed, callee, (void *)1);
        }
    }
  }
  for (size_t ci = 0; ci < m->computations.len; ci++) {
    kiln_hlo_computation_t *c = m->computations.data[ci];
    if (c == m->entry || !kiln_ptrmap_contains(&called, c)) kiln_ptrmap_put(&ln->fixed, c, (void *)1);
  }
  kiln_ptrmap_free(&called);
}

static void normalize_computation(ln_t *ln, kiln_hlo_computation_t *c) {
  bool fixed = fixed_comp(ln, c);
  if (!fixed)
    for (int i = 0; i < c->num_parameters; i++) {
      kiln_hlo_instruction_t *p = c->parameters[i];
      if (!p) continue;
      kiln_shape_t *ns = norm_shape(ln, p->shape);
      if (ns != p->shape) {
        p->shape = ns;
        ln->changed = true;
      }
      kiln_ptrmap_put(&ln->norm, p, p);
    }
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(c, &n);
  kiln_hlo_instruction_t *old_root = c->root;
  for (size_t i = 0; i < n; i++)
    if (order[i]->opcode != KILN_OP_PARAMETER) normalize_instruction(ln, order[i]);
  kiln_hlo_instruction_t *root = get_norm(ln, old_root);
  if (fixed) root = convert(ln, root, orig_shape(ln, old_root));
  if (root != c->root) {
    c->root = root;
    ln->changed = true;
  }
  /* Drop the originals that a new value replaced, users before operands (reverse post
   * order), each on its own: an original's other operands may still be needed. Holes instead
   * of shifting the list per removal, closed once below. */
  kiln_hlo_computation_defer_removals(c);
  for (size_t i = n; i-- > 0;) {
    kiln_hlo_instruction_t *x = order[i];
    if (x->opcode == KILN_OP_PARAMETER || kiln_ptrmap_get(&ln->norm, x) == x || x == c->root ||
        x->users.len || x->control_successors.len || kiln_pass_effects_instruction(&ln->effects, x))
      continue;
    kiln_status s = kiln_hlo_instruction_remove(x);
    kiln_status_free(s);
  }
  /* new instructions nothing uses (a parameter's bitcast that a user did not need) */
  for (size_t i = ln->created.len; i-- > 0;) {
    kiln_hlo_instruction_t *x = ln->created.data[i];
    if (x->users.len || x == c->root) {
      ln->changed = true;
      continue;
    }
    kiln_status s = kiln_hlo_instruction_remove(x);
    kiln_status_free(s);
  }
  ln->created.len = 0;
  kiln_hlo_computation_compact(c);
  kiln_free(order);
  kiln_hlo_computation_sort_post_order(c);
}

kiln_status kiln_layout_normalize(kiln_hlo_module_t *m, kiln_layout_normalization_stats_t *stats,
                                  bool *changed) {
  if (!m->entry) return kiln_status_make(KILN_INVALID_ARGUMENT, "layout normalization: module has no entry");
  /* New instructions and shapes go to the module's arena: refuse up front, before changing
   * anything, when a parser-set bound leaves too little room (never fail half-way). */
  size_t need = (size_t)kiln_hlo_module_instruction_count(m) * 4096 + ((size_t)64 << 10);
  if (m->arena.limit && m->arena.total + need > m->arena.limit)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                            "layout normalization: module '%s' may need %zu more arena bytes than its bound allows",
                            m->name, need);
  ln_t ln = {.m = m, .a = &m->arena};
  kiln_ptrmap_init(&ln.orig);
  kiln_ptrmap_init(&ln.norm);
  kiln_ptrmap_init(&ln.fixed);
  kiln_pass_effects_init(&ln.effects);
  for (size_t ci = 0; ci < m->computations.len; ci++) {
    kiln_hlo_computation_t *c = m->computations.data[ci];
    for (size_t i = 0; i < c->instructions.len; i++)
      kiln_ptrmap_put(&ln.orig, c->instructions.data[i], c->instructions.data[i]->shape);
  }
  find_fixed(&ln);
  size_t nc = 0;
  kiln_hlo_computation_t **comps = kiln_hlo_module_computation_post_order(m, &nc);
  for (size_t i = 0; i < nc; i++) normalize_computation(&ln, comps[i]);
  kiln_free(comps);
  if (stats) {
    stats->rewritten = ln.rewritten;
    stats->unsupported = ln.unsupported;
  }
  if (ln.unsupported)
    KILN_LOG_I("layout normalization: %d instruction(s) of %s left with non-default layouts", ln.unsupported, m->name);
  *changed = ln.changed;
  kiln_pass_effects_free(&ln.effects);
  kiln_vec_free(&ln.created);
  kiln_ptrmap_free(&ln.orig);
  kiln_ptrmap_free(&ln.norm);
  kiln_ptrmap_free(&ln.fixed);
  return NULL;
}

kiln_status kiln_pass_layout_normalization(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                           bool *changed) {
  return kiln_layout_normalize(m, NULL, changed);
}
