/* Algebraic simplification: rewrites that give bit-identical results.
 *
 *   multiply(x, 1), multiply(1, x), divide(x, 1)           -> x
 *   add(x, 0), add(0, x), subtract(x, 0) for integers        -> x
 *   add(x, -0.0), add(-0.0, x), subtract(x, +0.0) for floats -> x
 *     (x + +0.0 is NOT x: -0.0 + +0.0 = +0.0, so float x + 0 is left alone)
 *   reshape to the same shape, transpose by the identity, convert to the same type, copy or
 *   broadcast to the same shape (same layout), full slice     -> the operand
 *   transpose(transpose(x)), reshape(reshape(x)), slice(slice(x)), broadcast(broadcast(x)),
 *   bitcast(bitcast(x))                                      -> one op on x
 *   broadcast that only inserts size-1 dimensions (keeping the operand's order), transpose
 *   that moves only size-1 dimensions                         -> reshape(x)
 *     (layout-insensitive mode: the same elements in the same row-major order)
 *   elementwise(broadcast(a), broadcast(b), ...) with the same broadcast dimensions and
 *   smaller operands                                          -> broadcast(elementwise(a, b))
 *
 * One rewrite reorders a sum instead, as XLA's algebraic simplifier does (results within
 * the rounding of a reordered sum):
 *   reduce(dot(a, b), 0, add) over dimensions that are all batch dimensions of the dot
 *                                                             -> dot(a, b) contracting them
 *   (one kernel or library call instead of a batched outer product and a reduction)
 *
 * "1" and "0" are constants (or broadcasts of constants) whose every element is that value.
 * The replaced value must have the instruction's exact shape, layout included.
 *
 * `simplify_layout` (layout-sensitive mode, run after layout assignment) also turns a
 * reshape or transpose into a `bitcast` when the instruction and its operand both have
 * (untiled) layouts and the physical order of the elements does not change. */
#include <string.h>

#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

typedef struct simp {
  kiln_hlo_module_t *m;
  bool layout_sensitive;
  kiln_pass_effects_t effects;
} simp_t;

static kiln_hlo_instruction_t *make(simp_t *s, kiln_hlo_computation_t *c, kiln_hlo_opcode_t op,
                                    kiln_shape_t *shape, const char *hint, int n,
                                    kiln_hlo_instruction_t *const *ops) {
  kiln_hlo_instruction_t *in =
      kiln_hlo_instruction_create(c, op, shape, kiln_hlo_module_unique_name(s->m, hint));
  if (in) kiln_hlo_instruction_set_operands(in, n, ops);
  return in;
}

static int64_t *arena_i64(simp_t *s, int n) {
  return kiln_arena_alloc(&s->m->arena, sizeof(int64_t) * (size_t)(n ? n : 1));
}

/* ---- identities ---- */

static kiln_hlo_instruction_t *arith_identity(kiln_hlo_instruction_t *in) {
  if (in->num_operands != 2) return NULL;
  kiln_hlo_instruction_t *a = in->operands[0], *b = in->operands[1];
  kiln_elem_type_t t = in->shape->type;
  bool is_int = kiln_elem_type_is_integral(t), is_float = kiln_elem_type_is_float(t);
  kiln_hlo_instruction_t *keep = NULL;
  switch (in->opcode) {
    case KILN_OP_MULTIPLY:
      if (kiln_pass_is_splat(b, KILN_SPLAT_ONE)) keep = a;
      else if (kiln_pass_is_splat(a, KILN_SPLAT_ONE)) keep = b;
      break;
    case KILN_OP_DIVIDE:
      if ((is_int || is_float) && kiln_pass_is_splat(b, KILN_SPLAT_ONE)) keep = a;
      break;
    case KILN_OP_ADD: {
      kiln_pass_splat_t zero = is_int ? KILN_SPLAT_INT_ZERO : KILN_SPLAT_NEG_ZERO;
      if (!is_int && !is_float) break;
      if (kiln_pass_is_splat(b, zero)) keep = a;
      else if (kiln_pass_is_splat(a, zero)) keep = b;
      break;
    }
    case KILN_OP_SUBTRACT:
      if (is_int && kiln_pass_is_splat(b, KILN_SPLAT_INT_ZERO)) keep = a;
      else if (is_float && kiln_pass_is_splat(b, KILN_SPLAT_POS_ZERO)) keep = a;
      break;
    default:
      break;
  }
  return keep && kiln_pass_same_shape(keep->shape, in->shape) ? keep : NULL;
}

static bool is_identity_perm(const kiln_i64_list_t *p) {
  for (int i = 0; i < p->n; i++)
    if (p->v[i] != i) return false;
  return true;
}

static bool is_full_slice(const kiln_hlo_instruction_t *in) {
  const kiln_shape_t *x = in->operands[0]->shape;
  if (in->num_slice_dims != x->rank) return false;
  for (int i = 0; i < x->rank; i++) {
    const kiln_slice_dim_t *d = &in->slice[i];
    if (d->start != 0 || d->limit != x->dims[i] || (d->stride != 1 && x->dims[i] > 1)) return false;
  }
  return true;
}

/* The operand itself when `in` does nothing to it. */
static kiln_hlo_instruction_t *noop_operand(kiln_hlo_instruction_t *in) {
  if (in->num_operands != 1) return NULL;
  kiln_hlo_instruction_t *x = in->operands[0];
  if (!kiln_pass_same_shape(x->shape, in->shape)) return NULL;
  switch (in->opcode) {
    case KILN_OP_RESHAPE:
    case KILN_OP_CONVERT:
    case KILN_OP_COPY:
    case KILN_OP_BITCAST:
      return x;
    case KILN_OP_TRANSPOSE:
      return is_identity_perm(&in->dimensions) ? x : NULL;
    case KILN_OP_BROADCAST:
      return is_identity_perm(&in->dimensions) ? x : NULL;
    case KILN_OP_SLICE:
      return is_full_slice(in) ? x : NULL;
    default:
      return NULL;
  }
}

/* ---- size-1 dimensions ---- */

/* A broadcast that only inserts size-1 dimensions, keeping the operand's dimension order, or
 * a transpose whose dimensions other than size-1 ones keep their order, as a reshape of the
 * operand (XLA's simplifier does the same; its layouts come later, so layout-insensitive mode
 * only: after layout assignment is_bitcast decides). */
static kiln_hlo_instruction_t *degenerate_reshape(simp_t *s, kiln_hlo_instruction_t *in) {
  if (s->layout_sensitive || in->num_operands != 1) return NULL;
  if (in->opcode != KILN_OP_BROADCAST && in->opcode != KILN_OP_TRANSPOSE) return NULL;
  const kiln_shape_t *x = in->operands[0]->shape, *y = in->shape;
  if (!kiln_shape_is_array(x) || x->type != y->type || kiln_shape_is_dynamic(x) ||
      kiln_shape_is_dynamic(y) || kiln_shape_num_elements(y) == 0)
    return NULL;
  const kiln_i64_list_t *d = &in->dimensions;
  if (in->opcode == KILN_OP_BROADCAST) {
    /* Equal element counts: the dimensions it adds are all of size 1. */
    if (d->n != x->rank || kiln_shape_num_elements(x) != kiln_shape_num_elements(y)) return NULL;
    for (int i = 1; i < d->n; i++)
      if (d->v[i] <= d->v[i - 1]) return NULL;
  } else {
    if (d->n != y->rank) return NULL;
    int64_t last = -1;
    for (int i = 0; i < y->rank; i++) {
      if (y->dims[i] == 1) continue;
      if (d->v[i] <= last) return NULL;
      last = d->v[i];
    }
  }
  return make(s, in->parent, KILN_OP_RESHAPE, in->shape, "reshape", 1, in->operands);
}

/* ---- pairs of the same op ---- */

static kiln_hlo_instruction_t *merge_pair(simp_t *s, kiln_hlo_instruction_t *in) {
  if (in->num_operands != 1) return NULL;
  kiln_hlo_instruction_t *inner = in->operands[0];
  if (inner->opcode != in->opcode || inner->num_operands != 1 ||
      inner->num_control_predecessors || inner->control_successors.len)
    return NULL;
  kiln_hlo_instruction_t *x = inner->operands[0];
  kiln_hlo_computation_t *c = in->parent;
  switch (in->opcode) {
    case KILN_OP_RESHAPE:
    case KILN_OP_BITCAST:
      if (in->opcode == KILN_OP_RESHAPE && kiln_pass_same_shape(x->shape, in->shape)) return x;
      return kiln_hlo_instruction_clone(c, in, NULL, 1, &x);
    case KILN_OP_TRANSPOSE: {
      /* in[i] = inner[p2[i]] = x[p1[p2[i]]]. */
      const kiln_i64_list_t *p1 = &inner->dimensions, *p2 = &in->dimensions;
      if (p1->n != p2->n) return NULL;
      int64_t *q = arena_i64(s, p2->n);
      if (!q) return NULL;
      for (int i = 0; i < p2->n; i++) {
        if (p2->v[i] < 0 || p2->v[i] >= p1->n) return NULL;
        q[i] = p1->v[p2->v[i]];
      }
      kiln_i64_list_t perm = {p2->n, q};
      if (is_identity_perm(&perm) && kiln_pass_same_shape(x->shape, in->shape)) return x;
      kiln_hlo_instruction_t *t = kiln_hlo_instruction_clone(c, in, NULL, 1, &x);
      if (t) t->dimensions = perm;
      return t;
    }
    case KILN_OP_BROADCAST: {
      /* x dim i -> inner dim d1[i] -> in dim d2[d1[i]]. */
      const kiln_i64_list_t *d1 = &inner->dimensions, *d2 = &in->dimensions;
      int64_t *q = arena_i64(s, d1->n);
      if (!q) return NULL;
      for (int i = 0; i < d1->n; i++) {
        if (d1->v[i] < 0 || d1->v[i] >= d2->n) return NULL;
        q[i] = d2->v[d1->v[i]];
      }
      kiln_hlo_instruction_t *b = kiln_hlo_instruction_clone(c, in, NULL, 1, &x);
      if (b) b->dimensions = (kiln_i64_list_t){d1->n, q};
      return b;
    }
    case KILN_OP_SLICE: {
      /* Element k of `in` along a dim is inner element s2 + k*t2, which is x element
       * s1 + (s2 + k*t2)*t1. */
      int r = in->num_slice_dims;
      if (inner->num_slice_dims != r || in->shape->rank != r) return NULL;
      kiln_slice_dim_t *d = kiln_arena_alloc(&s->m->arena, sizeof *d * (size_t)(r ? r : 1));
      if (!d) return NULL;
      for (int i = 0; i < r; i++) {
        const kiln_slice_dim_t *a = &inner->slice[i], *b = &in->slice[i];
        int64_t n = in->shape->dims[i];
        if (n == 0) return NULL;
        d[i].start = a->start + b->start * a->stride;
        d[i].stride = a->stride * b->stride;
        d[i].limit = d[i].start + (n - 1) * d[i].stride + 1;
        if (d[i].stride < 1) return NULL;
      }
      kiln_hlo_instruction_t *sl = kiln_hlo_instruction_clone(c, in, NULL, 1, &x);
      if (sl) sl->slice = d;
      return sl;
    }
    default:
      return NULL;
  }
}

/* elementwise(broadcast(a), broadcast(b), ...) -> broadcast(elementwise(a, b, ...)). */
static kiln_hlo_instruction_t *sink_broadcasts(simp_t *s, kiln_hlo_instruction_t *in) {
  if (!kiln_hlo_opcode_is_elementwise(in->opcode) || in->opcode == KILN_OP_MAP ||
      in->num_operands < 1 || in->num_called_groups || !kiln_shape_is_array(in->shape))
    return NULL;
  const kiln_hlo_instruction_t *b0 = in->operands[0];
  if (b0->opcode != KILN_OP_BROADCAST) return NULL;
  const kiln_shape_t *x0 = b0->operands[0]->shape;
  if (kiln_shape_num_elements(x0) >= kiln_shape_num_elements(in->shape)) return NULL;
  kiln_hlo_instruction_t *inner_ops[8];
  if (in->num_operands > 8) return NULL;
  for (int i = 0; i < in->num_operands; i++) {
    const kiln_hlo_instruction_t *b = in->operands[i];
    if (b->opcode != KILN_OP_BROADCAST || b->num_operands != 1) return NULL;
    if (b->dimensions.n != b0->dimensions.n ||
        (b->dimensions.n && memcmp(b->dimensions.v, b0->dimensions.v,
                                   sizeof(int64_t) * (size_t)b->dimensions.n) != 0))
      return NULL;
    const kiln_shape_t *x = b->operands[0]->shape;
    if (!kiln_shape_is_array(x) || x->rank != x0->rank ||
        (x->rank && memcmp(x->dims, x0->dims, sizeof(int64_t) * (size_t)x->rank) != 0))
      return NULL;
    inner_ops[i] = b->operands[0];
  }
  kiln_shape_t *shape = kiln_shape_clone(&s->m->arena, x0);
  if (!shape) return NULL;
  shape->type = in->shape->type;
  if (shape->has_layout) shape->layout.element_size_bits = 0;
  kiln_hlo_computation_t *c = in->parent;
  kiln_hlo_instruction_t *op = kiln_hlo_instruction_clone(c, in, NULL, in->num_operands, inner_ops);
  if (!op) return NULL;
  op->shape = shape;
  kiln_hlo_instruction_t *bc = kiln_hlo_instruction_clone(c, b0, NULL, 1, &op);
  if (bc) bc->shape = in->shape;
  return bc;
}

/* ---- layout-sensitive: reshape / transpose that move no bytes -> bitcast ---- */

static bool plain_layout(const kiln_shape_t *s) {
  return kiln_shape_is_array(s) && s->has_layout && s->layout.rank == s->rank &&
         s->layout.num_tiles == 0 && s->layout.element_size_bits == 0 && !s->layout.extra &&
         !kiln_shape_is_dynamic(s);
}

/* Logical dims of `s` from major to minor physical position, skipping size-1 dims. */
static int physical_order(const kiln_shape_t *s, int64_t *out) {
  int n = 0;
  for (int k = s->rank - 1; k >= 0; k--) {
    int64_t d = s->layout.minor_to_major[k];
    if (d < 0 || d >= s->rank) return -1;
    if (s->dims[d] != 1) out[n++] = d;
  }
  return n;
}

/* Physical order ascending in the logical dims (row-major up to size-1 dims). */
static bool effectively_row_major(const kiln_shape_t *s) {
  int64_t order[64];
  if (s->rank > 64) return false;
  int n = physical_order(s, order);
  if (n < 0) return false;
  for (int i = 1; i < n; i++)
    if (order[i] <= order[i - 1]) return false;
  return true;
}

static bool is_bitcast(const kiln_hlo_instruction_t *in) {
  const kiln_shape_t *x = in->operands[0]->shape, *y = in->shape;
  if (!plain_layout(x) || !plain_layout(y) || x->type != y->type) return false;
  if (x->layout.memory_space != y->layout.memory_space) return false;
  if (x->rank > 64 || y->rank > 64) return false;
  if (in->opcode == KILN_OP_RESHAPE) return effectively_row_major(x) && effectively_row_major(y);
  /* transpose: result dim d is operand dim perm[d]. */
  if (in->dimensions.n != y->rank) return false;
  int64_t ox[64], oy[64];
  int nx = physical_order(x, ox), ny = physical_order(y, oy);
  if (nx < 0 || nx != ny) return false;
  for (int i = 0; i < ny; i++)
    if (in->dimensions.v[oy[i]] != ox[i]) return false;
  return true;
}

/* ---- driver ---- */

/* ---- dot + reduce ---- */

/* Whether `c` is (x, y) -> x + y on scalars. */
static bool is_scalar_add(const kiln_hlo_computation_t *c) {
  if (!c || c->num_parameters != 2 || !c->root || c->root->opcode != KILN_OP_ADD) return false;
  const kiln_hlo_instruction_t *r = c->root;
  return r->num_operands == 2 && r->operands[0]->opcode == KILN_OP_PARAMETER &&
         r->operands[1]->opcode == KILN_OP_PARAMETER && r->operands[0] != r->operands[1] &&
         kiln_shape_is_array(r->shape) && r->shape->rank == 0;
}

static bool list_has(const kiln_i64_list_t *l, int64_t v) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == v) return true;
  return false;
}

/* The dot a reduce reads, directly or through a transpose that only the reduce reads
 * (`*tr`); NULL when it reads something else. */
static kiln_hlo_instruction_t *reduced_dot(kiln_hlo_instruction_t *in,
                                           kiln_hlo_instruction_t **tr) {
  kiln_hlo_instruction_t *x = in->operands[0];
  *tr = NULL;
  if (x->opcode == KILN_OP_TRANSPOSE && x->users.len == 1 && !x->num_control_predecessors &&
      !x->control_successors.len) {
    *tr = x;
    x = x->operands[0];
  }
  if (x->opcode != KILN_OP_DOT || x->num_operands != 2 || x->users.len != 1 || !x->has_dot_dnums)
    return NULL;
  if (x->num_control_predecessors || x->control_successors.len) return NULL;
  if (!kiln_shape_is_array(x->shape) || x->shape->rank > 64) return NULL;
  return x;
}

/* reduce(dot(a, b), 0) with add, or reduce(transpose(dot(a, b)), 0), over batch dimensions
 * of the dot only: those batch dimensions become contracting ones (a transpose of the new
 * dot's result keeps the reduce's dimension order). The dot's output is [batch..., lhs
 * free..., rhs free...]; dropping reduced batch dimensions keeps that order. */
static kiln_hlo_instruction_t *dot_reduce(simp_t *s, kiln_hlo_instruction_t *in) {
  if (in->opcode != KILN_OP_REDUCE || in->num_operands != 2 || s->layout_sensitive) return NULL;
  kiln_hlo_instruction_t *tr, *d = reduced_dot(in, &tr);
  if (!d) return NULL;
  kiln_elem_type_t t = in->shape->type;
  if (t != d->shape->type || !kiln_elem_type_is_float(t) || kiln_elem_type_is_complex(t))
    return NULL;
  if (!kiln_pass_is_splat(in->operands[1], KILN_SPLAT_POS_ZERO) &&
      !kiln_pass_is_splat(in->operands[1], KILN_SPLAT_NEG_ZERO))
    return NULL;
  if (!is_scalar_add(kiln_hlo_instruction_called(in, "to_apply"))) return NULL;
  const kiln_dot_dnums_t *dn = &d->dot_dnums;
  int nb = dn->lhs_batch.n, rank = d->shape->rank;
  if (!in->dimensions.n || nb != dn->rhs_batch.n) return NULL;
  if (tr && (tr->dimensions.n != rank || in->shape->rank != rank - in->dimensions.n)) return NULL;
  bool reduced[64] = {false};
  for (int i = 0; i < in->dimensions.n; i++) {
    int64_t r = in->dimensions.v[i];
    if (r < 0 || r >= rank) return NULL;
    int64_t dd = tr ? tr->dimensions.v[r] : r;
    if (dd < 0 || dd >= nb) return NULL; /* not a batch dimension */
    reduced[dd] = true;
  }
  /* The new dimension numbers: batch dims the reduce keeps, contracting dims plus the
   * reduced batch dims (lhs and rhs paired in the same order). */
  int nc = dn->lhs_contracting.n + in->dimensions.n, nk = nb - in->dimensions.n;
  kiln_dot_dnums_t nd = {
      .lhs_batch = {nk, arena_i64(s, nk)},
      .rhs_batch = {nk, arena_i64(s, nk)},
      .lhs_contracting = {nc, arena_i64(s, nc)},
      .rhs_contracting = {nc, arena_i64(s, nc)},
  };
  if (!nd.lhs_batch.v || !nd.rhs_batch.v || !nd.lhs_contracting.v || !nd.rhs_contracting.v)
    return NULL;
  int kb = 0, kc = 0;
  for (int i = 0; i < dn->lhs_contracting.n; i++, kc++) {
    nd.lhs_contracting.v[kc] = dn->lhs_contracting.v[i];
    nd.rhs_contracting.v[kc] = dn->rhs_contracting.v[i];
  }
  for (int i = 0; i < nb; i++) {
    kiln_i64_list_t *l = reduced[i] ? &nd.lhs_contracting : &nd.lhs_batch;
    kiln_i64_list_t *r = reduced[i] ? &nd.rhs_contracting : &nd.rhs_batch;
    int *k = reduced[i] ? &kc : &kb;
    l->v[*k] = dn->lhs_batch.v[i];
    r->v[*k] = dn->rhs_batch.v[i];
    (*k)++;
  }
  /* The new dot's dimensions: the dot's that are not reduced, in order. With a transpose,
   * output dimension j of the reduce is the j-th kept transpose dimension i, which reads dot
   * dimension tr[i]: perm[j] is the new dot's dimension for it. */
  int64_t dims[64], new_index[64], perm[64];
  int nd_rank = 0;
  for (int i = 0; i < rank; i++) {
    new_index[i] = nd_rank;
    if (!reduced[i]) dims[nd_rank++] = d->shape->dims[i];
  }
  for (int i = 0, j = 0; i < rank; i++)
    if (!tr)
      perm[i] = i;
    else if (!list_has(&in->dimensions, i))
      perm[j++] = new_index[tr->dimensions.v[i]];
  /* The new dot's output is [batch, lhs free, rhs free]: a permutation that keeps the batch
   * dimensions and swaps the two free blocks is the dot with its operands swapped. */
  int nlf = d->operands[0]->shape->rank - nk - nc, nrf = nd_rank - nk - nlf;
  bool identity = true, swapped = nlf > 0 && nrf > 0;
  for (int j = 0; j < nd_rank; j++) {
    identity &= perm[j] == j;
    int64_t want = j < nk ? j : j < nk + nrf ? nk + nlf + (j - nk) : nk + (j - nk - nrf);
    swapped &= perm[j] == want;
  }
  kiln_hlo_instruction_t *ops[2] = {d->operands[0], d->operands[1]};
  if (swapped && !identity) {
    ops[0] = d->operands[1];
    ops[1] = d->operands[0];
    nd = (kiln_dot_dnums_t){.lhs_batch = nd.rhs_batch,
                            .rhs_batch = nd.lhs_batch,
                            .lhs_contracting = nd.rhs_contracting,
                            .rhs_contracting = nd.lhs_contracting};
  }
  bool direct = identity || swapped;
  kiln_shape_t *shape =
      direct ? in->shape
             : kiln_shape_make_array_with_default_layout(&s->m->arena, t, nd_rank, dims);
  kiln_hlo_instruction_t *dot =
      shape ? kiln_hlo_instruction_clone(in->parent, d, NULL, 2, ops) : NULL;
  if (!dot) return NULL;
  dot->shape = shape;
  dot->dot_dnums = nd;
  if (direct) return dot;
  kiln_hlo_instruction_t *out =
      make(s, in->parent, KILN_OP_TRANSPOSE, in->shape, "transpose", 1, &dot);
  int64_t *p = arena_i64(s, nd_rank);
  if (!out || !p) return NULL;
  memcpy(p, perm, sizeof(int64_t) * (size_t)nd_rank);
  out->dimensions = (kiln_i64_list_t){nd_rank, p};
  out->has_dimensions = true;
  return out;
}

static kiln_hlo_instruction_t *rewrite(simp_t *s, kiln_hlo_instruction_t *in) {
  if (in->num_control_predecessors || in->control_successors.len) return NULL;
  if (!in->shape || !kiln_shape_is_array(in->shape)) return NULL;
  for (int i = 0; i < in->num_operands; i++)
    if (!in->operands[i]->shape) return NULL;
  kiln_hlo_instruction_t *r;
  if ((r = noop_operand(in))) return r;
  if ((r = arith_identity(in))) return r;
  if (s->layout_sensitive && in->num_operands == 1 &&
      (in->opcode == KILN_OP_RESHAPE || in->opcode == KILN_OP_TRANSPOSE) && is_bitcast(in))
    return make(s, in->parent, KILN_OP_BITCAST, in->shape, "bitcast", 1, in->operands);
  if ((r = degenerate_reshape(s, in))) return r;
  if ((r = merge_pair(s, in))) return r;
  if ((r = sink_broadcasts(s, in))) return r;
  if ((r = dot_reduce(s, in))) return r;
  return NULL;
}

static kiln_status run(kiln_hlo_module_t *m, bool layout_sensitive, bool *changed) {
  simp_t s = {.m = m, .layout_sensitive = layout_sensitive};
  kiln_pass_effects_init(&s.effects);
  for (size_t ci = 0; ci < m->computations.len; ci++) {
    kiln_hlo_computation_t *c = m->computations.data[ci];
    size_t n = 0;
    kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(c, &n);
    bool comp_changed = false;
    /* Post order: an instruction's removed operands were visited before it, so nothing
     * later in `order` is ever removed. Removals leave holes, closed once after the walk. */
    kiln_hlo_computation_defer_removals(c);
    for (size_t i = 0; i < n; i++) {
      kiln_hlo_instruction_t *in = order[i];
      kiln_hlo_instruction_t *r = rewrite(&s, in);
      if (!r || r == in) continue;
      kiln_pass_replace_instruction(in, r, &s.effects);
      comp_changed = true;
    }
    kiln_hlo_computation_compact(c);
    kiln_free(order);
    if (comp_changed) {
      kiln_hlo_computation_sort_post_order(c);
      *changed = true;
    }
  }
  kiln_pass_effects_free(&s.effects);
  return NULL;
}

kiln_status kiln_pass_simplify(kiln_hlo_module_t *m, const kiln_pass_options_t *opts, bool *changed) {
  return run(m, false, changed);
}

kiln_status kiln_pass_simplify_layout(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                      bool *changed) {
  return run(m, true, changed);
}
