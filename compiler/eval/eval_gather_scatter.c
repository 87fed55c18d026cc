/* Reference evaluator: gather and scatter with XLA's full dimension numbers.
 *
 * gather: for every output index, the batch part (output dims not in offset_dims) selects a
 * start vector from start_indices (index_vector_dim == rank means an implicit trailing
 * size-1 dim); start_index_map places it in operand dims, operand_batching_dims take the
 * batch coordinate of the matching start_indices_batching_dims; the start is clamped so the
 * slice fits; the offset part (offset_dims) indexes the slice, whose non-collapsed,
 * non-batching dims appear in the output in increasing order.
 *
 * scatter: operands are copied to the result; update elements are visited in row-major order
 * of the update index space; a whole update window whose start does not let it fit in the
 * operand is skipped (XLA semantics); each element is combined with `to_apply`, with a fast
 * path for single add / multiply / maximum / minimum reducers and for "return the update"
 * (overwrite) and "keep the old value". Variadic scatter (N operands, N updates) calls the
 * computation with 2N scalars and expects an N-tuple. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "compiler/eval/eval.h"

#define KILN_GS_MAX_RANK 64

static bool list_has(const kiln_i64_list_t *l, int64_t v) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == v) return true;
  return false;
}

static int list_find(const kiln_i64_list_t *l, int64_t v) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == v) return i;
  return -1;
}

static kiln_status check_list(const kiln_i64_list_t *l, int rank, const char *op,
                              const char *what) {
  for (int i = 0; i < l->n; i++) {
    if (l->v[i] < 0 || l->v[i] >= rank)
      return KILN_ERR_INVALID("%s: %s entry %lld out of range for rank %d", op, what,
                              (long long)l->v[i], rank);
    for (int j = 0; j < i; j++)
      if (l->v[i] == l->v[j])
        return KILN_ERR_INVALID("%s: %s entry %lld repeated", op, what, (long long)l->v[i]);
  }
  return KILN_STATUS_OK;
}

/* Reads an index element as int64 (unsigned values above INT64_MAX saturate). */
static int64_t read_index(const kiln_literal_t *l, int64_t i) {
  if (kiln_elem_type_is_unsigned_int(l->shape->type)) {
    uint64_t u = kiln_literal_get_u64(l, i);
    return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
  }
  return kiln_literal_get_s64(l, i);
}

static void strides_of(const kiln_shape_t *s, int64_t *st) {
  int64_t v = 1;
  for (int d = s->rank - 1; d >= 0; d--) {
    st[d] = v;
    v *= s->dims[d];
  }
}

static bool bump(int64_t *idx, const int64_t *dims, int rank) {
  for (int d = rank - 1; d >= 0; d--) {
    if (++idx[d] < dims[d]) return true;
    idx[d] = 0;
  }
  return false;
}

/* ---- gather ---- */

static kiln_status eval_gather(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                               kiln_literal_t *const *operands, kiln_literal_t **out) {
  if (instr->num_operands != 2 || !instr->has_gather_dnums)
    return KILN_ERR_INVALID("gather expects 2 operands and dimension numbers");
  const kiln_literal_t *op = operands[0], *idx = operands[1];
  const kiln_shape_t *os = op->shape, *is = idx->shape, *rs = instr->shape;
  if (!kiln_shape_is_array(os) || !kiln_shape_is_array(is) || !kiln_shape_is_array(rs))
    return KILN_ERR_INVALID("gather operands and result must be arrays");
  if (!kiln_elem_type_is_integral(is->type))
    return KILN_ERR_INVALID("gather: start indices must be integers");
  if (os->rank > KILN_GS_MAX_RANK || is->rank >= KILN_GS_MAX_RANK || rs->rank > KILN_GS_MAX_RANK)
    return KILN_ERR_INVALID("gather: rank too large");
  const kiln_gather_dnums_t *dn = &instr->gather_dnums;
  const char *name = "gather";
  KILN_RETURN_IF_ERROR_PLAIN(check_list(&dn->offset_dims, rs->rank, name, "offset_dims"));
  KILN_RETURN_IF_ERROR_PLAIN(
      check_list(&dn->collapsed_slice_dims, os->rank, name, "collapsed_slice_dims"));
  KILN_RETURN_IF_ERROR_PLAIN(check_list(&dn->start_index_map, os->rank, name, "start_index_map"));
  KILN_RETURN_IF_ERROR_PLAIN(
      check_list(&dn->operand_batching_dims, os->rank, name, "operand_batching_dims"));
  int64_t ivd = dn->index_vector_dim;
  if (ivd < 0 || ivd > is->rank) return KILN_ERR_INVALID("gather: bad index_vector_dim");
  int idx_rank = is->rank + (ivd == is->rank ? 1 : 0); /* with the implicit trailing dim */
  int64_t idx_dims[KILN_GS_MAX_RANK + 1];
  for (int d = 0; d < is->rank; d++) idx_dims[d] = is->dims[d];
  if (ivd == is->rank) idx_dims[is->rank] = 1;
  KILN_RETURN_IF_ERROR_PLAIN(check_list(&dn->start_indices_batching_dims, idx_rank, name,
                                        "start_indices_batching_dims"));
  if (list_has(&dn->start_indices_batching_dims, ivd))
    return KILN_ERR_INVALID("gather: index_vector_dim is a batching dim");
  if (dn->operand_batching_dims.n != dn->start_indices_batching_dims.n)
    return KILN_ERR_INVALID("gather: batching dim lists differ in length");
  if (idx_dims[ivd] != dn->start_index_map.n)
    return KILN_ERR_INVALID("gather: index vector size %lld != start_index_map size %d",
                            (long long)idx_dims[ivd], dn->start_index_map.n);
  if (instr->gather_slice_sizes.n != os->rank)
    return KILN_ERR_INVALID("gather: slice_sizes has %d entries for operand rank %d",
                            instr->gather_slice_sizes.n, os->rank);
  const int64_t *ss = instr->gather_slice_sizes.v;
  for (int d = 0; d < os->rank; d++)
    if (ss[d] < 0 || ss[d] > os->dims[d])
      return KILN_ERR_INVALID("gather: slice size %lld out of range for dim %d",
                              (long long)ss[d], d);
  /* offset dim j of the output <-> j-th operand dim that is neither collapsed nor batching */
  int64_t offset_operand_dim[KILN_GS_MAX_RANK];
  int noff = 0;
  for (int d = 0; d < os->rank; d++)
    if (!list_has(&dn->collapsed_slice_dims, d) && !list_has(&dn->operand_batching_dims, d))
      offset_operand_dim[noff++] = d;
  if (noff != dn->offset_dims.n)
    return KILN_ERR_INVALID("gather: %d offset_dims but %d uncollapsed slice dims",
                            dn->offset_dims.n, noff);
  int nbatch = rs->rank - dn->offset_dims.n;
  if (nbatch != idx_rank - 1)
    return KILN_ERR_INVALID("gather: result has %d batch dims, start indices %d", nbatch,
                            idx_rank - 1);
  /* result dim -> (is offset dim j) or (batch dim b -> start_indices dim) */
  int64_t res_to_idx_dim[KILN_GS_MAX_RANK];
  int res_off_j[KILN_GS_MAX_RANK];
  {
    int b = 0;
    for (int d = 0; d < rs->rank; d++) {
      int j = list_find(&dn->offset_dims, d);
      res_off_j[d] = j;
      res_to_idx_dim[d] = -1;
      if (j >= 0) {
        int64_t want = ss[offset_operand_dim[j]];
        if (rs->dims[d] != want)
          return KILN_ERR_INVALID("gather: result dim %d is %lld, slice size %lld", d,
                                  (long long)rs->dims[d], (long long)want);
      } else {
        int64_t id = b < ivd ? b : b + 1;
        b++;
        res_to_idx_dim[d] = id;
        if (rs->dims[d] != idx_dims[id])
          return KILN_ERR_INVALID("gather: result batch dim %d is %lld, indices dim %lld", d,
                                  (long long)rs->dims[d], (long long)idx_dims[id]);
      }
    }
  }
  kiln_literal_t *res = kiln_eval_literal_make(ctx, instr->shape);
  if (!res) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "gather result too large");
  int64_t n = kiln_shape_num_elements(rs);
  size_t es = kiln_elem_type_storage_bytes(os->type);
  if (kiln_elem_type_storage_bytes(rs->type) != es || rs->type != os->type)
    return KILN_ERR_INVALID("gather: result element type differs from operand");
  int64_t ost[KILN_GS_MAX_RANK], ist[KILN_GS_MAX_RANK + 1];
  strides_of(os, ost);
  /* strides over the index array including the implicit dim (stride of implicit dim: 0) */
  {
    int64_t v = 1;
    for (int d = idx_rank - 1; d >= 0; d--) {
      ist[d] = v;
      v *= idx_dims[d];
    }
  }
  int64_t ridx[KILN_GS_MAX_RANK], iidx[KILN_GS_MAX_RANK + 1], start[KILN_GS_MAX_RANK];
  memset(ridx, 0, sizeof ridx);
  for (int64_t o = 0; o < n; o++) {
    memset(iidx, 0, sizeof iidx);
    for (int d = 0; d < rs->rank; d++)
      if (res_to_idx_dim[d] >= 0) iidx[res_to_idx_dim[d]] = ridx[d];
    int64_t ibase = 0;
    for (int d = 0; d < idx_rank; d++) ibase += iidx[d] * ist[d];
    memset(start, 0, sizeof(int64_t) * (size_t)os->rank);
    for (int k = 0; k < dn->start_index_map.n; k++)
      start[dn->start_index_map.v[k]] = read_index(idx, ibase + k * ist[ivd]);
    for (int k = 0; k < dn->operand_batching_dims.n; k++)
      start[dn->operand_batching_dims.v[k]] = iidx[dn->start_indices_batching_dims.v[k]];
    int64_t src = 0;
    for (int d = 0; d < os->rank; d++) {
      int64_t hi = os->dims[d] - ss[d];
      int64_t s = start[d] < 0 ? 0 : (start[d] > hi ? hi : start[d]);
      src += s * ost[d];
    }
    for (int d = 0; d < rs->rank; d++)
      if (res_off_j[d] >= 0) src += ridx[d] * ost[offset_operand_dim[res_off_j[d]]];
    memcpy((char *)res->data + (size_t)o * es, (const char *)op->data + (size_t)src * es, es);
    bump(ridx, rs->dims, rs->rank);
  }
  *out = res;
  return KILN_STATUS_OK;
}

/* ---- scatter ---- */

typedef enum combine_kind {
  COMBINE_CALL = 0, /* general: call the computation */
  COMBINE_ADD,
  COMBINE_MUL,
  COMBINE_MAX,
  COMBINE_MIN,
  COMBINE_OVERWRITE, /* returns its second parameter */
  COMBINE_KEEP,      /* returns its first parameter */
} combine_kind_t;

/* Recognizes a scalar reducer `(a, b) -> op(a, b)` of element type `t`. */
static combine_kind_t classify_reducer(const kiln_hlo_computation_t *c, kiln_elem_type_t t) {
  if (!c || c->num_parameters != 2 || !c->root) return COMBINE_CALL;
  for (int i = 0; i < 2; i++) {
    const kiln_shape_t *ps = c->parameters[i] ? c->parameters[i]->shape : NULL;
    if (!ps || !kiln_shape_is_array(ps) || ps->rank != 0 || ps->type != t) return COMBINE_CALL;
  }
  const kiln_hlo_instruction_t *r = c->root;
  if (!kiln_shape_is_array(r->shape) || r->shape->rank != 0 || r->shape->type != t)
    return COMBINE_CALL;
  if (r->opcode == KILN_OP_PARAMETER)
    return r->parameter_number == 1 ? COMBINE_OVERWRITE : COMBINE_KEEP;
  if (r->num_operands != 2) return COMBINE_CALL;
  const kiln_hlo_instruction_t *a = r->operands[0], *b = r->operands[1];
  if (a->opcode != KILN_OP_PARAMETER || b->opcode != KILN_OP_PARAMETER ||
      a->parameter_number == b->parameter_number)
    return COMBINE_CALL;
  if (t == KILN_PRED) return COMBINE_CALL;
  switch (r->opcode) {
    case KILN_OP_ADD: return COMBINE_ADD;
    case KILN_OP_MULTIPLY: return COMBINE_MUL;
    case KILN_OP_MAXIMUM: return kiln_elem_type_is_complex(t) ? COMBINE_CALL : COMBINE_MAX;
    case KILN_OP_MINIMUM: return kiln_elem_type_is_complex(t) ? COMBINE_CALL : COMBINE_MIN;
    default: return COMBINE_CALL;
  }
}

static int64_t wrap_int(uint64_t v, int bits, bool is_signed) {
  if (bits >= 64) return (int64_t)v;
  uint64_t mask = ((uint64_t)1 << bits) - 1;
  uint64_t u = v & mask;
  if (is_signed && ((u >> (bits - 1)) & 1)) u |= ~mask;
  return (int64_t)u;
}

/* dst[di] = combine(dst[di], upd[ui]) for the fast-path kinds. Floats narrower than f64 are
 * computed in f32 and rounded once to the element type (like XLA's upcasting). */
static void combine_fast(combine_kind_t k, kiln_literal_t *dst, int64_t di,
                         const kiln_literal_t *upd, int64_t ui) {
  kiln_elem_type_t t = dst->shape->type;
  size_t es = kiln_elem_type_storage_bytes(t);
  if (k == COMBINE_KEEP) return;
  if (k == COMBINE_OVERWRITE) {
    memcpy((char *)dst->data + (size_t)di * es, (const char *)upd->data + (size_t)ui * es, es);
    return;
  }
  if (kiln_elem_type_is_complex(t)) {
    double ar, ai, br, bi;
    kiln_literal_get_c128(dst, di, &ar, &ai);
    kiln_literal_get_c128(upd, ui, &br, &bi);
    if (k == COMBINE_ADD) kiln_literal_set_c128(dst, di, ar + br, ai + bi);
    else kiln_literal_set_c128(dst, di, ar * br - ai * bi, ar * bi + ai * br);
    return;
  }
  if (kiln_elem_type_is_float(t)) {
    double a = kiln_literal_get_f64(dst, di), b = kiln_literal_get_f64(upd, ui);
    const kiln_hlo_opcode_t op = k == COMBINE_ADD   ? KILN_OP_ADD
                                 : k == COMBINE_MUL ? KILN_OP_MULTIPLY
                                 : k == COMBINE_MAX ? KILN_OP_MAXIMUM
                                                    : KILN_OP_MINIMUM;
    double r = t == KILN_F64 ? kiln_eval_fstep(op, a, b) : kiln_eval_fstepf(op, (float)a, (float)b);
    kiln_literal_set_f64(dst, di, r);
    return;
  }
  int bits = kiln_elem_type_bits(t);
  if (kiln_elem_type_is_unsigned_int(t)) {
    uint64_t a = kiln_literal_get_u64(dst, di), b = kiln_literal_get_u64(upd, ui), r;
    switch (k) {
      case COMBINE_ADD: r = a + b; break;
      case COMBINE_MUL: r = a * b; break;
      case COMBINE_MAX: r = a > b ? a : b; break;
      default: r = a < b ? a : b; break;
    }
    kiln_literal_set_u64(dst, di, (uint64_t)wrap_int(r, bits, false));
  } else {
    int64_t a = kiln_literal_get_s64(dst, di), b = kiln_literal_get_s64(upd, ui);
    uint64_t r;
    switch (k) {
      case COMBINE_ADD: r = (uint64_t)a + (uint64_t)b; break;
      case COMBINE_MUL: r = (uint64_t)a * (uint64_t)b; break;
      case COMBINE_MAX: r = (uint64_t)(a > b ? a : b); break;
      default: r = (uint64_t)(a < b ? a : b); break;
    }
    kiln_literal_set_s64(dst, di, wrap_int(r, bits, true));
  }
}

static kiln_literal_t *copy_literal(kiln_eval_ctx_t *ctx, const kiln_literal_t *src,
                                    kiln_shape_t *shape) {
  kiln_literal_t *l = kiln_eval_literal_make(ctx, shape);
  if (!l) return NULL;
  int64_t bytes = kiln_shape_byte_size(shape);
  if (bytes > 0 && src->data) memcpy(l->data, src->data, (size_t)bytes);
  return l;
}

static kiln_status eval_scatter(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                kiln_literal_t *const *operands, kiln_literal_t **out) {
  if (!instr->has_scatter_dnums) return KILN_ERR_INVALID("scatter without dimension numbers");
  if (instr->num_operands < 3 || instr->num_operands % 2 == 0)
    return KILN_ERR_INVALID("scatter expects 2N+1 operands, got %d", instr->num_operands);
  int nop = (instr->num_operands - 1) / 2;
  const kiln_literal_t *idx = operands[nop];
  const kiln_shape_t *is = idx->shape;
  const kiln_shape_t *os = operands[0]->shape, *us = operands[nop + 1]->shape;
  const char *name = "scatter";
  if (!kiln_shape_is_array(is) || !kiln_elem_type_is_integral(is->type))
    return KILN_ERR_INVALID("scatter: indices must be an integer array");
  for (int i = 0; i < nop; i++) {
    const kiln_shape_t *a = operands[i]->shape, *u = operands[nop + 1 + i]->shape;
    if (!kiln_shape_is_array(a) || !kiln_shape_is_array(u))
      return KILN_ERR_INVALID("scatter: operands and updates must be arrays");
    if (a->rank != os->rank || u->rank != us->rank)
      return KILN_ERR_INVALID("scatter: operand/update ranks differ between inputs");
    for (int d = 0; d < a->rank; d++)
      if (a->dims[d] != os->dims[d]) return KILN_ERR_INVALID("scatter: operand shapes differ");
    for (int d = 0; d < u->rank; d++)
      if (u->dims[d] != us->dims[d]) return KILN_ERR_INVALID("scatter: update shapes differ");
    if (a->type != u->type)
      return KILN_ERR_INVALID("scatter: operand %d and its updates differ in element type", i);
  }
  if (os->rank > KILN_GS_MAX_RANK || us->rank > KILN_GS_MAX_RANK ||
      is->rank >= KILN_GS_MAX_RANK)
    return KILN_ERR_INVALID("scatter: rank too large");
  const kiln_scatter_dnums_t *dn = &instr->scatter_dnums;
  KILN_RETURN_IF_ERROR_PLAIN(
      check_list(&dn->update_window_dims, us->rank, name, "update_window_dims"));
  KILN_RETURN_IF_ERROR_PLAIN(
      check_list(&dn->inserted_window_dims, os->rank, name, "inserted_window_dims"));
  KILN_RETURN_IF_ERROR_PLAIN(check_list(&dn->scatter_dims_to_operand_dims, os->rank, name,
                                        "scatter_dims_to_operand_dims"));
  KILN_RETURN_IF_ERROR_PLAIN(
      check_list(&dn->input_batching_dims, os->rank, name, "input_batching_dims"));
  int64_t ivd = dn->index_vector_dim;
  if (ivd < 0 || ivd > is->rank) return KILN_ERR_INVALID("scatter: bad index_vector_dim");
  int idx_rank = is->rank + (ivd == is->rank ? 1 : 0);
  int64_t idx_dims[KILN_GS_MAX_RANK + 1];
  for (int d = 0; d < is->rank; d++) idx_dims[d] = is->dims[d];
  if (ivd == is->rank) idx_dims[is->rank] = 1;
  KILN_RETURN_IF_ERROR_PLAIN(check_list(&dn->scatter_indices_batching_dims, idx_rank, name,
                                        "scatter_indices_batching_dims"));
  if (list_has(&dn->scatter_indices_batching_dims, ivd))
    return KILN_ERR_INVALID("scatter: index_vector_dim is a batching dim");
  if (dn->input_batching_dims.n != dn->scatter_indices_batching_dims.n)
    return KILN_ERR_INVALID("scatter: batching dim lists differ in length");
  if (idx_dims[ivd] != dn->scatter_dims_to_operand_dims.n)
    return KILN_ERR_INVALID("scatter: index vector size %lld != scatter_dims_to_operand_dims %d",
                            (long long)idx_dims[ivd], dn->scatter_dims_to_operand_dims.n);
  /* window dim j of updates <-> j-th operand dim neither inserted nor batching */
  int64_t win_operand_dim[KILN_GS_MAX_RANK];
  int nwin = 0;
  for (int d = 0; d < os->rank; d++)
    if (!list_has(&dn->inserted_window_dims, d) && !list_has(&dn->input_batching_dims, d))
      win_operand_dim[nwin++] = d;
  if (nwin != dn->update_window_dims.n)
    return KILN_ERR_INVALID("scatter: %d update_window_dims but %d window operand dims",
                            dn->update_window_dims.n, nwin);
  int nscat = us->rank - dn->update_window_dims.n;
  if (nscat != idx_rank - 1)
    return KILN_ERR_INVALID("scatter: updates have %d scatter dims, indices %d", nscat,
                            idx_rank - 1);
  int64_t upd_to_idx_dim[KILN_GS_MAX_RANK];
  int upd_win_j[KILN_GS_MAX_RANK];
  int64_t win_size[KILN_GS_MAX_RANK]; /* per operand dim */
  for (int d = 0; d < os->rank; d++) win_size[d] = 1;
  {
    int b = 0;
    for (int d = 0; d < us->rank; d++) {
      int j = list_find(&dn->update_window_dims, d);
      upd_win_j[d] = j;
      upd_to_idx_dim[d] = -1;
      if (j >= 0) {
        win_size[win_operand_dim[j]] = us->dims[d];
        if (us->dims[d] > os->dims[win_operand_dim[j]])
          return KILN_ERR_INVALID("scatter: update window dim %d larger than operand", d);
      } else {
        int64_t id = b < ivd ? b : b + 1;
        b++;
        upd_to_idx_dim[d] = id;
        if (us->dims[d] != idx_dims[id])
          return KILN_ERR_INVALID("scatter: update scatter dim %d is %lld, indices dim %lld", d,
                                  (long long)us->dims[d], (long long)idx_dims[id]);
      }
    }
  }

  /* results start as copies of the operands */
  const kiln_shape_t *rshape = instr->shape;
  if (nop > 1 && (!kiln_shape_is_tuple(rshape) || rshape->num_elements != nop))
    return KILN_ERR_INVALID("scatter: result must be a %d-tuple", nop);
  kiln_literal_t *res;
  kiln_literal_t *dst[KILN_GS_MAX_RANK];
  if (nop > KILN_GS_MAX_RANK) return KILN_ERR_INVALID("scatter: too many operands");
  if (nop == 1 && !kiln_shape_is_tuple(rshape)) {
    if (!kiln_shape_compatible(rshape, os))
      return KILN_ERR_INVALID("scatter: result shape differs from operand");
    res = copy_literal(ctx, operands[0], instr->shape);
    if (!res) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "scatter result too large");
    dst[0] = res;
  } else {
    if (!kiln_shape_is_tuple(rshape) || rshape->num_elements != nop)
      return KILN_ERR_INVALID("scatter: result must be a %d-tuple", nop);
    res = kiln_arena_alloc(ctx->arena, sizeof *res);
    kiln_literal_t **elems = kiln_arena_alloc(ctx->arena, sizeof(*elems) * (size_t)nop);
    if (!res || !elems) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "scatter: arena full");
    res->shape = instr->shape;
    res->num_tuple_elements = nop;
    res->tuple_elements = elems;
    for (int i = 0; i < nop; i++) {
      if (!kiln_shape_compatible(rshape->elements[i], operands[i]->shape))
        return KILN_ERR_INVALID("scatter: result element %d differs from operand", i);
      elems[i] = copy_literal(ctx, operands[i], rshape->elements[i]);
      if (!elems[i]) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "scatter result too large");
      dst[i] = elems[i];
    }
  }

  const kiln_hlo_computation_t *comp = kiln_hlo_instruction_called(instr, "to_apply");
  if (!comp) return KILN_ERR_INVALID("scatter without to_apply computation");
  if (comp->num_parameters != 2 * nop)
    return KILN_ERR_INVALID("scatter: to_apply takes %d parameters, expected %d",
                            comp->num_parameters, 2 * nop);
  combine_kind_t ck = nop == 1 ? classify_reducer(comp, os->type) : COMBINE_CALL;
  kiln_literal_t *args[2 * KILN_GS_MAX_RANK];
  if (ck == COMBINE_CALL) {
    for (int i = 0; i < 2 * nop; i++) {
      kiln_shape_t *ps = comp->parameters[i] ? comp->parameters[i]->shape : NULL;
      kiln_elem_type_t want = operands[i % nop]->shape->type;
      if (!ps || !kiln_shape_is_array(ps) || ps->rank != 0 || ps->type != want)
        return KILN_ERR_INVALID("scatter: to_apply parameter %d must be a %s scalar", i,
                                kiln_elem_type_name(want));
      args[i] = kiln_eval_literal_make(ctx, ps);
      if (!args[i]) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "scatter: arena full");
    }
  }

  int64_t ost[KILN_GS_MAX_RANK], ist[KILN_GS_MAX_RANK + 1];
  strides_of(os, ost);
  {
    int64_t v = 1;
    for (int d = idx_rank - 1; d >= 0; d--) {
      ist[d] = v;
      v *= idx_dims[d];
    }
  }
  int64_t un = kiln_shape_num_elements(us);
  int64_t uidx[KILN_GS_MAX_RANK], iidx[KILN_GS_MAX_RANK + 1], start[KILN_GS_MAX_RANK];
  memset(uidx, 0, sizeof uidx);
  kiln_arena_t scratch;
  kiln_arena_init(&scratch);
  scratch.limit = ctx->arena->limit;
  int64_t scratch_calls = 0;
  kiln_status err = KILN_STATUS_OK;
  for (int64_t u = 0; u < un && !err; u++) {
    memset(iidx, 0, sizeof iidx);
    for (int d = 0; d < us->rank; d++)
      if (upd_to_idx_dim[d] >= 0) iidx[upd_to_idx_dim[d]] = uidx[d];
    int64_t ibase = 0;
    for (int d = 0; d < idx_rank; d++) ibase += iidx[d] * ist[d];
    memset(start, 0, sizeof(int64_t) * (size_t)os->rank);
    for (int k = 0; k < dn->scatter_dims_to_operand_dims.n; k++)
      start[dn->scatter_dims_to_operand_dims.v[k]] = read_index(idx, ibase + k * ist[ivd]);
    for (int k = 0; k < dn->input_batching_dims.n; k++)
      start[dn->input_batching_dims.v[k]] = iidx[dn->scatter_indices_batching_dims.v[k]];
    bool in_bounds = true;
    for (int d = 0; d < os->rank; d++)
      if (start[d] < 0 || start[d] > os->dims[d] - win_size[d]) in_bounds = false;
    if (in_bounds) {
      int64_t di = 0;
      for (int d = 0; d < os->rank; d++) di += start[d] * ost[d];
      for (int d = 0; d < us->rank; d++)
        if (upd_win_j[d] >= 0) di += uidx[d] * ost[win_operand_dim[upd_win_j[d]]];
      if (ck != COMBINE_CALL) {
        combine_fast(ck, dst[0], di, operands[nop + 1], u);
      } else {
        for (int i = 0; i < nop; i++) {
          size_t es = kiln_elem_type_storage_bytes(dst[i]->shape->type);
          memcpy(args[i]->data, (char *)dst[i]->data + (size_t)di * es, es);
          memcpy(args[nop + i]->data, (const char *)operands[nop + 1 + i]->data + (size_t)u * es,
                 es);
        }
        if (scratch_calls++ >= 4096) { /* recycle the combiner's intermediates */
          size_t limit = scratch.limit;
          kiln_arena_destroy(&scratch);
          kiln_arena_init(&scratch);
          scratch.limit = limit;
          scratch_calls = 1;
        }
        kiln_literal_t *r = NULL;
        kiln_arena_t *saved = ctx->arena;
        ctx->arena = &scratch;
        kiln_status st = kiln_eval_computation(ctx, comp, 2 * nop, args, &r);
        ctx->arena = saved;
        if (st) {
          err = kiln_status_annotate(st, "in scatter %s", instr->name);
          break;
        }
        for (int i = 0; i < nop && !err; i++) {
          const kiln_literal_t *ri = r;
          if (kiln_shape_is_tuple(r->shape))
            ri = i < r->num_tuple_elements ? r->tuple_elements[i] : NULL;
          else if (nop > 1)
            ri = NULL;
          if (!ri || !kiln_shape_is_array(ri->shape) || ri->shape->type != dst[i]->shape->type ||
              ri->num_elements != 1) {
            err = KILN_ERR_INVALID("scatter %s: to_apply must return %d %s scalar(s)",
                                   instr->name, nop, kiln_elem_type_name(dst[i]->shape->type));
            break;
          }
          size_t es = kiln_elem_type_storage_bytes(dst[i]->shape->type);
          memcpy((char *)dst[i]->data + (size_t)di * es, ri->data, es);
        }
      }
    }
    bump(uidx, us->dims, us->rank);
  }
  kiln_arena_destroy(&scratch);
  if (err) return err;
  *out = res;
  return KILN_STATUS_OK;
}

kiln_status kiln_eval_gather_scatter(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                     kiln_literal_t *const *operands, kiln_literal_t **out) {
  *out = NULL;
  switch (instr->opcode) {
    case KILN_OP_GATHER: return eval_gather(ctx, instr, operands, out);
    case KILN_OP_SCATTER: return eval_scatter(ctx, instr, operands, out);
    default:
      return KILN_ERR_UNIMPLEMENTED("eval_gather_scatter: unsupported opcode %s",
                                    kiln_hlo_opcode_name(instr->opcode));
  }
}
