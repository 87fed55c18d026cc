/* Output -> input indexing per opcode (see hlo_indexing.h). Input -> output maps are in
 * hlo_indexing_inverse.c. The maps follow the reference evaluator's element addressing
 * (compiler/eval/), which tests check by brute force. */
#include "compiler/analysis/hlo_indexing.h"

#include <string.h>

#include "base/alloc.h"
#include "compiler/analysis/hlo_indexing_internal.h"

#define MAX_RANK KILN_HLO_INDEXING_MAX_RANK

const kiln_shape_t *kiln_hlo_indexing_output_shape(const kiln_hlo_instruction_t *instr,
                                                   int output_index) {
  const kiln_shape_t *s = instr->shape;
  if (!s) return NULL;
  if (kiln_shape_is_tuple(s)) {
    if (output_index < 0 || output_index >= s->num_elements) return NULL;
    s = s->elements[output_index];
  }
  return kiln_shape_is_array(s) ? s : NULL;
}

kiln_indexing_map_t *kiln_hlo_ix_map_over(kiln_affine_ctx_t *ctx, const kiln_shape_t *s,
                                          size_t nsyms, size_t nrts) {
  kiln_indexing_map_t *m = kiln_indexing_map_create(ctx, (size_t)s->rank, nsyms, nrts);
  for (int i = 0; i < s->rank; i++)
    kiln_indexing_map_set_bounds(m, KILN_INDEXING_DIM, (size_t)i, 0, s->dims[i] - 1);
  return m;
}

/* Physical strides of each logical dimension of `s`; false for tiled/malformed layouts. */
static bool physical_strides(const kiln_shape_t *s, int64_t *strides) {
  if (s->rank > MAX_RANK) return false;
  if (!s->has_layout || s->layout.rank != s->rank) {
    int64_t st = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
      strides[i] = st;
      st *= s->dims[i];
    }
    return true;
  }
  if (s->layout.num_tiles > 0) return false;
  bool seen[MAX_RANK] = {0};
  int64_t st = 1;
  for (int i = 0; i < s->rank; i++) {
    int64_t d = s->layout.minor_to_major[i];
    if (d < 0 || d >= s->rank || seen[d]) return false;
    seen[d] = true;
    strides[d] = st;
    st *= s->dims[d];
  }
  return true;
}

bool kiln_hlo_indexing_linearize_physical(kiln_affine_ctx_t *ctx, const kiln_shape_t *s,
                                          kiln_affine_expr_t *const *idx,
                                          kiln_affine_expr_t **out) {
  int64_t strides[MAX_RANK];
  if (!physical_strides(s, strides)) return false;
  kiln_affine_expr_t *lin = kiln_affine_const(ctx, 0);
  for (int i = 0; i < s->rank; i++)
    lin = kiln_affine_add(ctx, lin, kiln_affine_mul_const(ctx, idx[i], strides[i]));
  *out = lin;
  return true;
}

bool kiln_hlo_indexing_delinearize_physical(kiln_affine_ctx_t *ctx, const kiln_shape_t *s,
                                            kiln_affine_expr_t *linear, kiln_affine_expr_t **out) {
  int64_t strides[MAX_RANK];
  if (!physical_strides(s, strides)) return false;
  int64_t major = -1, major_stride = -1;
  for (int i = 0; i < s->rank; i++)
    if (strides[i] > major_stride || (strides[i] == major_stride && s->dims[i] > 1)) {
      major_stride = strides[i];
      major = i;
    }
  for (int i = 0; i < s->rank; i++) {
    kiln_affine_expr_t *q = kiln_affine_floordiv(ctx, linear, kiln_affine_const(ctx, strides[i]));
    out[i] = i == major ? q : kiln_affine_mod(ctx, q, kiln_affine_const(ctx, s->dims[i]));
  }
  return true;
}

static kiln_status bad(const kiln_hlo_instruction_t *instr, const char *what) {
  return KILN_ERR_INVALID("indexing of %s '%s': %s", kiln_hlo_opcode_name(instr->opcode),
                          instr->name ? instr->name : "?", what);
}

static const kiln_shape_t *operand_shape(const kiln_hlo_instruction_t *instr, int k) {
  const kiln_shape_t *s = instr->operands[k] ? instr->operands[k]->shape : NULL;
  return s && kiln_shape_is_array(s) && s->rank <= MAX_RANK ? s : NULL;
}

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

/* A map over the output with no results: what a scalar operand (pad value, init value,
 * dynamic offset) is read at. */
static kiln_indexing_map_t *scalar_map(kiln_affine_ctx_t *ctx, const kiln_shape_t *os) {
  return kiln_hlo_ix_map_over(ctx, os, 0, 0);
}

static kiln_indexing_map_t *identity_map(kiln_affine_ctx_t *ctx, const kiln_shape_t *os) {
  kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, os, 0, 0);
  for (int i = 0; i < os->rank; i++) kiln_indexing_map_add_result(m, kiln_affine_dim(ctx, i));
  return m;
}

/* Adds the constraint that window position `e` (in the base-dilated, padded operand)
 * falls on a real element of an operand dimension of size n, and returns the element. */
static kiln_affine_expr_t *dilated_position(kiln_indexing_map_t *m, kiln_affine_expr_t *e,
                                            int64_t n, int64_t lhs_dilate) {
  kiln_affine_ctx_t *ctx = m->ctx;
  if (lhs_dilate <= 1) {
    kiln_indexing_map_add_constraint(m, e, 0, n - 1);
    return e;
  }
  kiln_affine_expr_t *k = kiln_affine_const(ctx, lhs_dilate);
  kiln_indexing_map_add_constraint(m, kiln_affine_mod(ctx, e, k), 0, 0);
  kiln_indexing_map_add_constraint(m, e, 0, n > 0 ? (n - 1) * lhs_dilate : -1);
  return kiln_affine_floordiv(ctx, e, k);
}

/* ---- per-opcode builders: fill ix->operands[k].map (NULL stays "unknown") ---- */

static kiln_status elementwise(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                               const kiln_shape_t *os, kiln_hlo_indexing_t *ix) {
  for (int k = 0; k < instr->num_operands; k++) {
    const kiln_shape_t *s = operand_shape(instr, k);
    if (!s) return bad(instr, "operand is not an array");
    if (s->rank == 0) {
      ix->operands[k].map = scalar_map(ctx, os);
    } else if (s->rank == os->rank) {
      for (int i = 0; i < s->rank; i++)
        if (s->dims[i] != os->dims[i]) return bad(instr, "operand dims differ from the output");
      ix->operands[k].map = identity_map(ctx, os);
    } else {
      return bad(instr, "operand rank differs from the output");
    }
  }
  return KILN_STATUS_OK;
}

/* bitcast-convert between widths: the wider side has one more minor dim. */
static kiln_status bitcast_convert(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                   const kiln_shape_t *os, kiln_hlo_indexing_t *ix) {
  const kiln_shape_t *is = operand_shape(instr, 0);
  if (!is) return bad(instr, "operand is not an array");
  if (is->rank == os->rank) return elementwise(ctx, instr, os, ix);
  if (is->rank == os->rank + 1) { /* narrowing: one output element reads a row */
    kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, os, 1, 0);
    kiln_indexing_map_set_bounds(m, KILN_INDEXING_SYM, 0, 0, is->dims[is->rank - 1] - 1);
    for (int i = 0; i < os->rank; i++) kiln_indexing_map_add_result(m, kiln_affine_dim(ctx, i));
    kiln_indexing_map_add_result(m, kiln_affine_sym(ctx, 0));
    ix->operands[0].map = m;
    return KILN_STATUS_OK;
  }
  if (is->rank + 1 == os->rank) {
    kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, os, 0, 0);
    for (int i = 0; i < is->rank; i++) kiln_indexing_map_add_result(m, kiln_affine_dim(ctx, i));
    ix->operands[0].map = m;
    return KILN_STATUS_OK;
  }
  return bad(instr, "ranks differ by more than one");
}

static kiln_status broadcast(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                             const kiln_shape_t *os, kiln_hlo_indexing_t *ix) {
  const kiln_shape_t *is = operand_shape(instr, 0);
  if (!is || instr->dimensions.n != is->rank) return bad(instr, "dimensions do not match the operand");
  kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, os, 0, 0);
  for (int i = 0; i < is->rank; i++) {
    int64_t d = instr->dimensions.v[i];
    if (d < 0 || d >= os->rank || os->dims[d] != is->dims[i]) {
      kiln_indexing_map_free(m);
      return bad(instr, "dimensions do not match the shapes");
    }
    kiln_indexing_map_add_result(m, kiln_affine_dim(ctx, d));
  }
  ix->operands[0].map = m;
  return KILN_STATUS_OK;
}

static kiln_status transpose(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                             const kiln_shape_t *os, kiln_hlo_indexing_t *ix) {
  const kiln_shape_t *is = operand_shape(instr, 0);
  if (!is || is->rank != os->rank || instr->dimensions.n != os->rank)
    return bad(instr, "dimensions must be a permutation of the operand's");
  int64_t inv[MAX_RANK];
  for (int i = 0; i < is->rank; i++) inv[i] = -1;
  for (int i = 0; i < os->rank; i++) {
    int64_t d = instr->dimensions.v[i];
    if (d < 0 || d >= is->rank || inv[d] >= 0 || is->dims[d] != os->dims[i])
      return bad(instr, "dimensions must be a permutation of the operand's");
    inv[d] = i;
  }
  kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, os, 0, 0);
  for (int j = 0; j < is->rank; j++) kiln_indexing_map_add_result(m, kiln_affine_dim(ctx, inv[j]));
  ix->operands[0].map = m;
  return KILN_STATUS_OK;
}

/* reshape (row-major, layouts ignored) and bitcast (physical order under both layouts). */
static kiln_status reshape(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                           const kiln_shape_t *os, bool physical, kiln_hlo_indexing_t *ix) {
  const kiln_shape_t *is = operand_shape(instr, 0);
  if (!is) return bad(instr, "operand is not an array");
  if (kiln_shape_num_elements(is) != kiln_shape_num_elements(os))
    return physical ? KILN_STATUS_OK /* a bitcast that changes size: unknown */
                    : bad(instr, "element counts differ");
  kiln_affine_expr_t *dims[MAX_RANK], *out[MAX_RANK], *lin;
  for (int i = 0; i < os->rank; i++) dims[i] = kiln_affine_dim(ctx, i);
  if (physical) {
    if (!kiln_hlo_indexing_linearize_physical(ctx, os, dims, &lin) ||
        !kiln_hlo_indexing_delinearize_physical(ctx, is, lin, out))
      return KILN_STATUS_OK; /* tiled layouts: unknown */
  } else {
    lin = kiln_affine_linearize(ctx, dims, os->dims, (size_t)os->rank);
    if (is->rank > 0) kiln_affine_delinearize(ctx, lin, is->dims, (size_t)is->rank, out);
  }
  kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, os, 0, 0);
  for (int i = 0; i < is->rank; i++) kiln_indexing_map_add_result(m, out[i]);
  kiln_hlo_ix_simplify(m);
  ix->operands[0].map = m;
  return KILN_STATUS_OK;
}

static kiln_status slice(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                         const kiln_shape_t *os, kiln_hlo_indexing_t *ix) {
  const kiln_shape_t *is = operand_shape(instr, 0);
  if (!is || is->rank != os->rank || instr->num_slice_dims != os->rank)
    return bad(instr, "slice must give one range per dimension");
  kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, os, 0, 0);
  for (int i = 0; i < os->rank; i++) {
    const kiln_slice_dim_t *s = &instr->slice[i];
    int64_t stride = s->stride ? s->stride : 1;
    if (stride < 1 || s->start < 0 || s->start > is->dims[i]) {
      kiln_indexing_map_free(m);
      return bad(instr, "bad slice range");
    }
    kiln_indexing_map_add_result(
        m, kiln_affine_add_const(ctx, kiln_affine_mul_const(ctx, kiln_affine_dim(ctx, i), stride),
                                 s->start));
  }
  ix->operands[0].map = m;
  return KILN_STATUS_OK;
}

static kiln_status reverse(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                           const kiln_shape_t *os, kiln_hlo_indexing_t *ix) {
  const kiln_shape_t *is = operand_shape(instr, 0);
  if (!is || is->rank != os->rank) return bad(instr, "rank mismatch");
  for (int k = 0; k < instr->dimensions.n; k++)
    if (instr->dimensions.v[k] < 0 || instr->dimensions.v[k] >= os->rank)
      return bad(instr, "dimension out of range");
  kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, os, 0, 0);
  for (int i = 0; i < os->rank; i++) {
    kiln_affine_expr_t *d = kiln_affine_dim(ctx, i);
    if (list_has(&instr->dimensions, i))
      d = kiln_affine_add_const(ctx, kiln_affine_neg(ctx, d), os->dims[i] - 1);
    kiln_indexing_map_add_result(m, d);
  }
  ix->operands[0].map = m;
  return KILN_STATUS_OK;
}

static kiln_status pad(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                       const kiln_shape_t *os, kiln_hlo_indexing_t *ix) {
  const kiln_shape_t *is = operand_shape(instr, 0);
  if (!is || is->rank != os->rank || instr->num_pad_dims != os->rank || instr->num_operands != 2)
    return bad(instr, "padding config does not match");
  kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, os, 0, 0);
  for (int i = 0; i < os->rank; i++) {
    const kiln_pad_dim_t *p = &instr->padding[i];
    if (p->interior < 0) {
      kiln_indexing_map_free(m);
      return bad(instr, "negative interior padding");
    }
    kiln_affine_expr_t *e = kiln_affine_add_const(ctx, kiln_affine_dim(ctx, i), -p->lo);
    kiln_indexing_map_add_result(m, dilated_position(m, e, is->dims[i], p->interior + 1));
  }
  ix->operands[0].map = m;
  ix->operands[1].map = scalar_map(ctx, os);
  return KILN_STATUS_OK;
}

static kiln_status concatenate(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                               const kiln_shape_t *os, kiln_hlo_indexing_t *ix) {
  if (instr->dimensions.n != 1) return bad(instr, "needs one dimension");
  int64_t c = instr->dimensions.v[0], off = 0;
  if (c < 0 || c >= os->rank) return bad(instr, "dimension out of range");
  for (int k = 0; k < instr->num_operands; k++) {
    const kiln_shape_t *s = operand_shape(instr, k);
    if (!s || s->rank != os->rank) return bad(instr, "operand rank differs");
    kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, os, 0, 0);
    for (int i = 0; i < os->rank; i++) {
      kiln_affine_expr_t *d = kiln_affine_dim(ctx, i);
      if (i == c) {
        kiln_indexing_map_add_constraint(m, d, off, off + s->dims[c] - 1);
        d = kiln_affine_add_const(ctx, d, -off);
      }
      kiln_indexing_map_add_result(m, d);
    }
    ix->operands[k].map = m;
    off += s->dims[c];
  }
  if (off != os->dims[c]) return bad(instr, "operands do not fill the result");
  return KILN_STATUS_OK;
}

static kiln_status reduce(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                          const kiln_shape_t *os, kiln_hlo_indexing_t *ix) {
  int n = instr->num_operands / 2;
  if (n * 2 != instr->num_operands || n == 0) return bad(instr, "needs inputs and inits");
  for (int k = 0; k < n; k++) {
    const kiln_shape_t *is = operand_shape(instr, k);
    if (!is || is->rank != os->rank + instr->dimensions.n)
      return bad(instr, "input rank does not match the result");
    kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, os, (size_t)instr->dimensions.n, 0);
    int64_t kept = 0, sym = 0;
    for (int j = 0; j < is->rank; j++) {
      if (list_has(&instr->dimensions, j)) {
        kiln_indexing_map_set_bounds(m, KILN_INDEXING_SYM, (size_t)sym, 0, is->dims[j] - 1);
        kiln_indexing_map_add_result(m, kiln_affine_sym(ctx, sym++));
      } else {
        if (kept >= os->rank || os->dims[kept] != is->dims[j]) {
          kiln_indexing_map_free(m);
          return bad(instr, "kept dimensions do not match the result");
        }
        kiln_indexing_map_add_result(m, kiln_affine_dim(ctx, kept++));
      }
    }
    if (sym != instr->dimensions.n) {
      kiln_indexing_map_free(m);
      return bad(instr, "dimensions out of range or repeated");
    }
    ix->operands[k].map = m;
    ix->operands[n + k].map = scalar_map(ctx, os);
  }
  return KILN_STATUS_OK;
}

static kiln_status reduce_window(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                 const kiln_shape_t *os, kiln_hlo_indexing_t *ix) {
  int n = instr->num_operands / 2;
  if (n * 2 != instr->num_operands || n == 0) return bad(instr, "needs inputs and inits");
  for (int k = 0; k < n; k++) {
    const kiln_shape_t *is = operand_shape(instr, k);
    if (!is || is->rank != os->rank || instr->num_window_dims != os->rank)
      return bad(instr, "window does not match the ranks");
    kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, os, (size_t)os->rank, 0);
    for (int i = 0; i < os->rank; i++) {
      const kiln_window_dim_t *w = &instr->window[i];
      int64_t stride = w->stride ? w->stride : 1, rd = w->rhs_dilate ? w->rhs_dilate : 1;
      int64_t ld = w->lhs_dilate ? w->lhs_dilate : 1;
      kiln_indexing_map_set_bounds(m, KILN_INDEXING_SYM, (size_t)i, 0, w->size - 1);
      kiln_affine_expr_t *e = kiln_affine_add(
          ctx, kiln_affine_mul_const(ctx, kiln_affine_dim(ctx, i), stride),
          kiln_affine_mul_const(ctx, kiln_affine_sym(ctx, i), rd));
      e = kiln_affine_add_const(ctx, e, -w->pad_lo);
      kiln_indexing_map_add_result(m, dilated_position(m, e, is->dims[i], ld));
    }
    ix->operands[k].map = m;
    ix->operands[n + k].map = scalar_map(ctx, os);
  }
  return KILN_STATUS_OK;
}

static kiln_status dot(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                       const kiln_shape_t *os, kiln_hlo_indexing_t *ix) {
  const kiln_shape_t *ls = operand_shape(instr, 0), *rs = operand_shape(instr, 1);
  const kiln_dot_dnums_t *dn = &instr->dot_dnums;
  if (!ls || !rs || instr->num_operands != 2) return bad(instr, "needs two array operands");
  if (dn->lhs_batch.n != dn->rhs_batch.n || dn->lhs_contracting.n != dn->rhs_contracting.n)
    return bad(instr, "dimension numbers do not pair up");
  int nb = dn->lhs_batch.n, nc = dn->lhs_contracting.n;
  int lfree = ls->rank - nb - nc, rfree = rs->rank - nb - nc;
  if (lfree < 0 || rfree < 0 || nb + lfree + rfree != os->rank)
    return bad(instr, "result rank does not match the dimension numbers");
  const kiln_shape_t *sides[2] = {ls, rs};
  const kiln_i64_list_t *batch[2] = {&dn->lhs_batch, &dn->rhs_batch};
  const kiln_i64_list_t *contr[2] = {&dn->lhs_contracting, &dn->rhs_contracting};
  for (int side = 0; side < 2; side++) {
    const kiln_shape_t *s = sides[side];
    kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, os, (size_t)nc, 0);
    int64_t next_free = nb + (side == 0 ? 0 : lfree), nfree = 0;
    for (int j = 0; j < s->rank; j++) {
      int b = list_find(batch[side], j), c = list_find(contr[side], j);
      if (b >= 0 && c >= 0) {
        kiln_indexing_map_free(m);
        return bad(instr, "a dimension is both batch and contracting");
      }
      if (b >= 0) {
        kiln_indexing_map_add_result(m, kiln_affine_dim(ctx, b));
      } else if (c >= 0) {
        kiln_indexing_map_set_bounds(m, KILN_INDEXING_SYM, (size_t)c, 0, ls->dims[dn->lhs_contracting.v[c]] - 1);
        kiln_indexing_map_add_result(m, kiln_affine_sym(ctx, c));
      } else {
        kiln_indexing_map_add_result(m, kiln_affine_dim(ctx, next_free + nfree++));
      }
    }
    if (nfree != (side == 0 ? lfree : rfree)) {
      kiln_indexing_map_free(m);
      return bad(instr, "dimension numbers out of range or repeated");
    }
    ix->operands[side].map = m;
  }
  for (int c = 0; c < nc; c++) {
    int64_t a = dn->lhs_contracting.v[c], b = dn->rhs_contracting.v[c];
    if (a < 0 || a >= ls->rank || b < 0 || b >= rs->rank || ls->dims[a] != rs->dims[b])
      return bad(instr, "contracting dimensions differ in size");
  }
  return KILN_STATUS_OK;
}

static kiln_status convolution(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                               const kiln_shape_t *os, kiln_hlo_indexing_t *ix) {
  const kiln_shape_t *is = operand_shape(instr, 0), *ks = operand_shape(instr, 1);
  const kiln_conv_dnums_t *dn = &instr->conv_dnums;
  if (!is || !ks || !instr->has_conv_dnums) return bad(instr, "needs dim_labels and two arrays");
  int ns = dn->num_spatial;
  if (ns < 0 || is->rank != ns + 2 || ks->rank != ns + 2 || os->rank != ns + 2 ||
      (ns > 0 && instr->num_window_dims != ns))
    return bad(instr, "ranks do not match the dimension labels");
  int64_t G = instr->feature_group_count > 0 ? instr->feature_group_count : 1;
  int64_t BG = instr->batch_group_count > 0 ? instr->batch_group_count : 1;
  int64_t kin = ks->dims[dn->kernel_input_feature], kout = ks->dims[dn->kernel_output_feature];
  int64_t ibatch = is->dims[dn->input_batch];
  if (kout % G != 0 || kout % BG != 0 || ibatch % BG != 0 || kout == 0)
    return bad(instr, "group counts do not divide the feature/batch sizes");
  int64_t ofg = kout / G, obg = kout / BG, bgsize = ibatch / BG;
  kiln_indexing_map_t *lm = kiln_hlo_ix_map_over(ctx, os, (size_t)ns + 1, 0);
  kiln_indexing_map_t *km = kiln_hlo_ix_map_over(ctx, os, (size_t)ns + 1, 0);
  kiln_affine_expr_t *lres[MAX_RANK] = {0}, *kres[MAX_RANK] = {0};
  kiln_affine_expr_t *of = kiln_affine_dim(ctx, dn->output_feature);
  kiln_affine_expr_t *ob = kiln_affine_dim(ctx, dn->output_batch);
  kiln_affine_expr_t *c = kiln_affine_sym(ctx, 0);
  for (kiln_indexing_map_t *m = lm; m; m = m == lm ? km : NULL)
    kiln_indexing_map_set_bounds(m, KILN_INDEXING_SYM, 0, 0, kin - 1);
  lres[dn->input_batch] =
      BG > 1 ? kiln_affine_add(ctx, ob, kiln_affine_mul_const(ctx, kiln_affine_floordiv(ctx, of, kiln_affine_const(ctx, obg)), bgsize))
             : ob;
  lres[dn->input_feature] =
      G > 1 ? kiln_affine_add(ctx, kiln_affine_mul_const(ctx, kiln_affine_floordiv(ctx, of, kiln_affine_const(ctx, ofg)), kin), c)
            : c;
  kres[dn->kernel_input_feature] = c;
  kres[dn->kernel_output_feature] = of;
  for (int s = 0; s < ns; s++) {
    const kiln_window_dim_t *w = &instr->window[s];
    int64_t stride = w->stride ? w->stride : 1, rd = w->rhs_dilate ? w->rhs_dilate : 1;
    int64_t ld = w->lhs_dilate ? w->lhs_dilate : 1;
    kiln_affine_expr_t *ws = kiln_affine_sym(ctx, s + 1);
    kiln_indexing_map_set_bounds(lm, KILN_INDEXING_SYM, (size_t)s + 1, 0, w->size - 1);
    kiln_indexing_map_set_bounds(km, KILN_INDEXING_SYM, (size_t)s + 1, 0, w->size - 1);
    kiln_affine_expr_t *e = kiln_affine_add(
        ctx, kiln_affine_mul_const(ctx, kiln_affine_dim(ctx, dn->output_spatial[s]), stride),
        kiln_affine_mul_const(ctx, ws, rd));
    e = kiln_affine_add_const(ctx, e, -w->pad_lo);
    int64_t n = is->dims[dn->input_spatial[s]];
    lres[dn->input_spatial[s]] = dilated_position(lm, e, n, ld);
    dilated_position(km, e, n, ld); /* the kernel element is read only where the input is */
    kres[dn->kernel_spatial[s]] =
        w->reversal ? kiln_affine_add_const(ctx, kiln_affine_neg(ctx, ws), w->size - 1) : ws;
  }
  for (int i = 0; i < ns + 2; i++) {
    if (!lres[i] || !kres[i]) {
      kiln_indexing_map_free(lm);
      kiln_indexing_map_free(km);
      return bad(instr, "dimension labels repeat a dimension");
    }
    kiln_indexing_map_add_result(lm, lres[i]);
    kiln_indexing_map_add_result(km, kres[i]);
  }
  ix->operands[0].map = lm;
  ix->operands[1].map = km;
  return KILN_STATUS_OK;
}

static void set_rt(kiln_hlo_operand_indexing_t *oi, int i, int operand, kiln_indexing_map_t *m) {
  oi->rts[i].operand = operand;
  oi->rts[i].map = m;
}

static kiln_status dynamic_slice(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                 const kiln_shape_t *os, bool update, kiln_hlo_indexing_t *ix) {
  const kiln_shape_t *is = operand_shape(instr, 0);
  int first = update ? 2 : 1;
  const kiln_shape_t *ss = update ? operand_shape(instr, 1) : os; /* slice sizes */
  if (!is || !ss || is->rank != os->rank || ss->rank != os->rank)
    return bad(instr, "operand, slice and result ranks differ");
  int nidx = instr->num_operands - first;
  bool vector_form = nidx == 1 && os->rank != 1 && operand_shape(instr, first) &&
                     operand_shape(instr, first)->rank == 1;
  if (!vector_form && nidx != os->rank) return bad(instr, "needs one start index per dimension");
  for (int i = 0; i < os->rank; i++)
    if (ss->dims[i] > is->dims[i] || (update && is->dims[i] != os->dims[i]))
      return bad(instr, "slice larger than the operand");
  int target = update ? 1 : 0;
  kiln_hlo_operand_indexing_t *oi = &ix->operands[target];
  kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, os, 0, (size_t)os->rank);
  oi->map = m;
  oi->num_rts = os->rank;
  oi->rts = kiln_calloc((size_t)(os->rank ? os->rank : 1), sizeof *oi->rts);
  for (int i = 0; i < os->rank; i++) {
    kiln_indexing_map_set_bounds(m, KILN_INDEXING_RT, (size_t)i, 0, is->dims[i] - ss->dims[i]);
    kiln_affine_expr_t *d = kiln_affine_dim(ctx, i), *rt = kiln_affine_rt(ctx, i);
    if (update) {
      kiln_affine_expr_t *e = kiln_affine_sub(ctx, d, rt);
      kiln_indexing_map_add_constraint(m, e, 0, ss->dims[i] - 1);
      kiln_indexing_map_add_result(m, e);
    } else {
      kiln_indexing_map_add_result(m, kiln_affine_add(ctx, d, rt));
    }
    kiln_indexing_map_t *src = scalar_map(ctx, os);
    if (vector_form) kiln_indexing_map_add_result(src, kiln_affine_const(ctx, i));
    set_rt(oi, i, vector_form ? first : first + i, src);
  }
  if (update) ix->operands[0].map = identity_map(ctx, os);
  for (int k = first; k < instr->num_operands; k++) {
    kiln_indexing_map_t *sm = scalar_map(ctx, os);
    if (vector_form) {
      kiln_indexing_map_free(sm);
      sm = kiln_hlo_ix_map_over(ctx, os, 1, 0);
      kiln_indexing_map_set_bounds(sm, KILN_INDEXING_SYM, 0, 0, os->rank - 1);
      kiln_indexing_map_add_result(sm, kiln_affine_sym(ctx, 0));
    }
    ix->operands[k].map = sm;
  }
  return KILN_STATUS_OK;
}

static kiln_status gather(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                          const kiln_shape_t *rs, kiln_hlo_indexing_t *ix) {
  const kiln_shape_t *os = operand_shape(instr, 0), *is = operand_shape(instr, 1);
  const kiln_gather_dnums_t *dn = &instr->gather_dnums;
  if (!os || !is || !instr->has_gather_dnums || instr->gather_slice_sizes.n != os->rank)
    return bad(instr, "needs dimension numbers and slice sizes");
  int64_t ivd = dn->index_vector_dim;
  int idx_rank = is->rank;
  if (ivd < 0 || ivd > idx_rank) return bad(instr, "bad index_vector_dim");
  int64_t nvec = ivd < idx_rank ? is->dims[ivd] : 1;
  if (nvec != dn->start_index_map.n) return bad(instr, "start_index_map length differs");
  int64_t idx_of_res[MAX_RANK], res_of_idx[MAX_RANK + 1], off_dim[MAX_RANK];
  int noff = 0;
  for (int d = 0; d < os->rank; d++)
    if (!list_has(&dn->collapsed_slice_dims, d) && !list_has(&dn->operand_batching_dims, d))
      off_dim[noff++] = d;
  if (noff != dn->offset_dims.n) return bad(instr, "offset_dims do not match the slice");
  for (int i = 0; i <= idx_rank; i++) res_of_idx[i] = -1;
  int b = 0;
  for (int d = 0; d < rs->rank; d++) {
    idx_of_res[d] = -1;
    if (list_has(&dn->offset_dims, d)) continue;
    int64_t id = b < ivd ? b : b + 1;
    b++;
    if (id >= idx_rank && !(id == idx_rank && ivd == idx_rank)) return bad(instr, "too many batch dims");
    if (id < idx_rank) {
      idx_of_res[d] = id;
      res_of_idx[id] = d;
    }
  }
  int nrt = dn->start_index_map.n;
  kiln_hlo_operand_indexing_t *oi = &ix->operands[0];
  kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, rs, 0, (size_t)nrt);
  oi->map = m;
  oi->num_rts = nrt;
  oi->rts = kiln_calloc((size_t)(nrt ? nrt : 1), sizeof *oi->rts);
  /* The indices element a batch position reads: (batch coordinates, k at ivd). */
  for (int k = 0; k < nrt; k++) {
    int64_t d = dn->start_index_map.v[k];
    if (d < 0 || d >= os->rank) return bad(instr, "start_index_map out of range");
    kiln_indexing_map_set_bounds(m, KILN_INDEXING_RT, (size_t)k, 0,
                                 os->dims[d] - instr->gather_slice_sizes.v[d]);
    kiln_indexing_map_t *src = kiln_hlo_ix_map_over(ctx, rs, 0, 0);
    for (int i = 0; i < idx_rank; i++) {
      if (i == ivd) kiln_indexing_map_add_result(src, kiln_affine_const(ctx, k));
      else if (res_of_idx[i] >= 0) kiln_indexing_map_add_result(src, kiln_affine_dim(ctx, res_of_idx[i]));
      else {
        kiln_indexing_map_free(src);
        return bad(instr, "indices dims do not match the result's batch dims");
      }
    }
    set_rt(oi, k, 1, src);
  }
  for (int d = 0; d < os->rank; d++) {
    kiln_affine_expr_t *e = kiln_affine_const(ctx, 0);
    int k = list_find(&dn->start_index_map, d);
    if (k >= 0) e = kiln_affine_rt(ctx, k);
    int bi = list_find(&dn->operand_batching_dims, d);
    if (bi >= 0) {
      if (bi >= dn->start_indices_batching_dims.n) return bad(instr, "batching dims differ");
      int64_t id = dn->start_indices_batching_dims.v[bi];
      if (id < 0 || id >= idx_rank || res_of_idx[id] < 0) return bad(instr, "bad batching dim");
      e = kiln_affine_add(ctx, e, kiln_affine_dim(ctx, res_of_idx[id]));
    }
    for (int j = 0; j < noff; j++)
      if (off_dim[j] == d) {
        int64_t rd = dn->offset_dims.v[j];
        if (rd < 0 || rd >= rs->rank) return bad(instr, "offset dim out of range");
        e = kiln_affine_add(ctx, e, kiln_affine_dim(ctx, rd));
      }
    kiln_indexing_map_add_result(m, e);
  }
  /* The indices operand: each output element reads its batch position's whole vector. */
  kiln_indexing_map_t *im = kiln_hlo_ix_map_over(ctx, rs, ivd < idx_rank ? 1 : 0, 0);
  if (ivd < idx_rank) kiln_indexing_map_set_bounds(im, KILN_INDEXING_SYM, 0, 0, nvec - 1);
  for (int i = 0; i < idx_rank; i++)
    kiln_indexing_map_add_result(im, i == ivd ? kiln_affine_sym(ctx, 0)
                                              : kiln_affine_dim(ctx, res_of_idx[i]));
  ix->operands[1].map = im;
  (void)idx_of_res;
  return KILN_STATUS_OK;
}

void kiln_hlo_indexing_free(kiln_hlo_indexing_t *ix) {
  if (!ix) return;
  for (int k = 0; k < ix->num_operands; k++) {
    kiln_hlo_operand_indexing_t *oi = &ix->operands[k];
    kiln_indexing_map_free(oi->map);
    for (int i = 0; i < oi->num_rts; i++) kiln_indexing_map_free(oi->rts[i].map);
    kiln_free(oi->rts);
  }
  kiln_free(ix->operands);
  ix->operands = NULL;
  ix->num_operands = 0;
}

kiln_status kiln_hlo_indexing_output_to_input(kiln_affine_ctx_t *ctx,
                                              const kiln_hlo_instruction_t *instr,
                                              int output_index, kiln_hlo_indexing_t *out) {
  memset(out, 0, sizeof *out);
  if (!ctx || !instr) return KILN_ERR_INVALID("indexing: NULL argument");
  kiln_hlo_opcode_t op = instr->opcode;
  const kiln_shape_t *os = NULL;
  if (op == KILN_OP_TUPLE || op == KILN_OP_GET_TUPLE_ELEMENT) {
    /* Output k of a tuple is operand k; a get-tuple-element reads the same index of the
     * tuple element it selects. */
    os = kiln_hlo_indexing_output_shape(instr, output_index);
    if (op == KILN_OP_GET_TUPLE_ELEMENT) os = kiln_hlo_indexing_output_shape(instr, 0);
    if (!os || os->rank > MAX_RANK) return bad(instr, "output is not an array");
  } else {
    os = kiln_hlo_indexing_output_shape(instr, output_index);
    if (!os) return bad(instr, "output index does not name an array");
    if (os->rank > MAX_RANK) return bad(instr, "rank too large");
  }
  int n = instr->num_operands;
  if (n < 0 || (n > 0 && !instr->operands)) return bad(instr, "bad operand list");
  out->num_operands = n;
  out->operands = kiln_calloc((size_t)(n ? n : 1), sizeof *out->operands);
  kiln_status st = KILN_STATUS_OK;
  switch (op) {
  case KILN_OP_BROADCAST: st = broadcast(ctx, instr, os, out); break;
  case KILN_OP_TRANSPOSE: st = transpose(ctx, instr, os, out); break;
  case KILN_OP_RESHAPE: st = reshape(ctx, instr, os, false, out); break;
  case KILN_OP_BITCAST: st = reshape(ctx, instr, os, true, out); break;
  case KILN_OP_SLICE: st = slice(ctx, instr, os, out); break;
  case KILN_OP_REVERSE: st = reverse(ctx, instr, os, out); break;
  case KILN_OP_PAD: st = pad(ctx, instr, os, out); break;
  case KILN_OP_CONCATENATE: st = concatenate(ctx, instr, os, out); break;
  case KILN_OP_REDUCE: st = reduce(ctx, instr, os, out); break;
  case KILN_OP_REDUCE_WINDOW: st = reduce_window(ctx, instr, os, out); break;
  case KILN_OP_DOT: st = dot(ctx, instr, os, out); break;
  case KILN_OP_CONVOLUTION: st = convolution(ctx, instr, os, out); break;
  case KILN_OP_DYNAMIC_SLICE: st = dynamic_slice(ctx, instr, os, false, out); break;
  case KILN_OP_DYNAMIC_UPDATE_SLICE: st = dynamic_slice(ctx, instr, os, true, out); break;
  case KILN_OP_GATHER: st = gather(ctx, instr, os, out); break;
  case KILN_OP_BITCAST_CONVERT: st = bitcast_convert(ctx, instr, os, out); break;
  case KILN_OP_IOTA:
  case KILN_OP_CONSTANT:
  case KILN_OP_PARAMETER:
  case KILN_OP_REPLICA_ID:
  case KILN_OP_PARTITION_ID:
    break; /* no operands */
  case KILN_OP_TUPLE:
    if (output_index < 0 || output_index >= n) {
      st = bad(instr, "output index out of range");
      break;
    }
    for (int k = 0; k < n; k++) {
      out->operands[k].map = identity_map(ctx, os);
      if (k != output_index) out->operands[k].map->known_empty = true; /* not read */
    }
    break;
  case KILN_OP_GET_TUPLE_ELEMENT:
  case KILN_OP_OPTIMIZATION_BARRIER:
    if (n == 1) out->operands[0].map = identity_map(ctx, os);
    break;
  default:
    if (kiln_hlo_opcode_is_elementwise(op)) st = elementwise(ctx, instr, os, out);
    break; /* anything else: unknown */
  }
  if (st) {
    kiln_hlo_indexing_free(out);
    return st;
  }
  /* Constraints on single dimensions become their intervals; constants move across. */
  for (int k = 0; k < n; k++)
    if (out->operands[k].map && !out->operands[k].map->known_empty)
      kiln_hlo_ix_simplify(out->operands[k].map);
  return KILN_STATUS_OK;
}
