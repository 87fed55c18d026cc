/* Input -> output indexing per opcode (see hlo_indexing.h): for an element of one
 * operand, the output elements it contributes to. Range symbols stand for the outputs an
 * element is broadcast over; constraints keep the elements that reach no output (sliced
 * off, cropped by negative padding) out of the domain. */
#include <string.h>

#include "compiler/analysis/hlo_indexing.h"
#include "compiler/analysis/hlo_indexing_internal.h"

#define MAX_RANK KILN_HLO_INDEXING_MAX_RANK

static kiln_status bad(const kiln_hlo_instruction_t *instr, const char *what) {
  return KILN_ERR_INVALID("input->output indexing of %s '%s': %s",
                          kiln_hlo_opcode_name(instr->opcode), instr->name ? instr->name : "?",
                          what);
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

/* Operand element -> every element of `os` (a scalar feeding a whole output). */
static kiln_indexing_map_t *scalar_to_all(kiln_affine_ctx_t *ctx, const kiln_shape_t *is,
                                          const kiln_shape_t *os) {
  kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, is, (size_t)os->rank, 0);
  for (int i = 0; i < os->rank; i++) {
    kiln_indexing_map_set_bounds(m, KILN_INDEXING_SYM, (size_t)i, 0, os->dims[i] - 1);
    kiln_indexing_map_add_result(m, kiln_affine_sym(ctx, i));
  }
  return m;
}

static kiln_indexing_map_t *identity(kiln_affine_ctx_t *ctx, const kiln_shape_t *is) {
  kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, is, 0, 0);
  for (int i = 0; i < is->rank; i++) kiln_indexing_map_add_result(m, kiln_affine_dim(ctx, i));
  return m;
}

static kiln_status broadcast(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                             const kiln_shape_t *is, const kiln_shape_t *os,
                             kiln_indexing_map_t **out) {
  if (instr->dimensions.n != is->rank) return bad(instr, "dimensions do not match the operand");
  size_t nsyms = (size_t)(os->rank - is->rank);
  if (os->rank < is->rank) return bad(instr, "result rank below operand rank");
  kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, is, nsyms, 0);
  int64_t sym = 0;
  for (int i = 0; i < os->rank; i++) {
    int j = list_find(&instr->dimensions, i);
    if (j >= 0) {
      kiln_indexing_map_add_result(m, kiln_affine_dim(ctx, j));
    } else {
      if ((size_t)sym >= nsyms) break;
      kiln_indexing_map_set_bounds(m, KILN_INDEXING_SYM, (size_t)sym, 0, os->dims[i] - 1);
      kiln_indexing_map_add_result(m, kiln_affine_sym(ctx, sym++));
    }
  }
  if (m->results.len != (size_t)os->rank) {
    kiln_indexing_map_free(m);
    return bad(instr, "dimensions out of range or repeated");
  }
  *out = m;
  return KILN_STATUS_OK;
}

static kiln_status reshape(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                           const kiln_shape_t *is, const kiln_shape_t *os, bool physical,
                           kiln_indexing_map_t **out) {
  if (kiln_shape_num_elements(is) != kiln_shape_num_elements(os))
    return physical ? KILN_STATUS_OK : bad(instr, "element counts differ");
  kiln_affine_expr_t *dims[MAX_RANK], *res[MAX_RANK], *lin;
  for (int i = 0; i < is->rank; i++) dims[i] = kiln_affine_dim(ctx, i);
  if (physical) {
    if (!kiln_hlo_indexing_linearize_physical(ctx, is, dims, &lin) ||
        !kiln_hlo_indexing_delinearize_physical(ctx, os, lin, res))
      return KILN_STATUS_OK;
  } else {
    lin = kiln_affine_linearize(ctx, dims, is->dims, (size_t)is->rank);
    if (os->rank > 0) kiln_affine_delinearize(ctx, lin, os->dims, (size_t)os->rank, res);
  }
  kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, is, 0, 0);
  for (int i = 0; i < os->rank; i++) kiln_indexing_map_add_result(m, res[i]);
  kiln_hlo_ix_simplify(m);
  *out = m;
  return KILN_STATUS_OK;
}

static kiln_status transpose(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                             const kiln_shape_t *is, const kiln_shape_t *os,
                             kiln_indexing_map_t **out) {
  if (instr->dimensions.n != os->rank || is->rank != os->rank) return bad(instr, "bad permutation");
  kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, is, 0, 0);
  for (int i = 0; i < os->rank; i++) {
    int64_t d = instr->dimensions.v[i];
    if (d < 0 || d >= is->rank) {
      kiln_indexing_map_free(m);
      return bad(instr, "bad permutation");
    }
    kiln_indexing_map_add_result(m, kiln_affine_dim(ctx, d));
  }
  *out = m;
  return KILN_STATUS_OK;
}

static kiln_status slice(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                         const kiln_shape_t *is, const kiln_shape_t *os, kiln_indexing_map_t **out) {
  if (instr->num_slice_dims != is->rank || is->rank != os->rank) return bad(instr, "bad slice");
  kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, is, 0, 0);
  for (int i = 0; i < is->rank; i++) {
    const kiln_slice_dim_t *s = &instr->slice[i];
    int64_t stride = s->stride ? s->stride : 1;
    if (stride < 1) {
      kiln_indexing_map_free(m);
      return bad(instr, "bad stride");
    }
    kiln_affine_expr_t *e = kiln_affine_add_const(ctx, kiln_affine_dim(ctx, i), -s->start);
    kiln_indexing_map_add_constraint(m, e, 0, os->dims[i] > 0 ? (os->dims[i] - 1) * stride : -1);
    if (stride > 1) {
      kiln_affine_expr_t *k = kiln_affine_const(ctx, stride);
      kiln_indexing_map_add_constraint(m, kiln_affine_mod(ctx, e, k), 0, 0);
      e = kiln_affine_floordiv(ctx, e, k);
    }
    kiln_indexing_map_add_result(m, e);
  }
  *out = m;
  return KILN_STATUS_OK;
}

static kiln_status pad(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                       const kiln_shape_t *is, const kiln_shape_t *os, kiln_indexing_map_t **out) {
  if (instr->num_pad_dims != is->rank || is->rank != os->rank) return bad(instr, "bad padding");
  kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, is, 0, 0);
  for (int i = 0; i < is->rank; i++) {
    const kiln_pad_dim_t *p = &instr->padding[i];
    kiln_affine_expr_t *e = kiln_affine_add_const(
        ctx, kiln_affine_mul_const(ctx, kiln_affine_dim(ctx, i), p->interior + 1), p->lo);
    kiln_indexing_map_add_constraint(m, e, 0, os->dims[i] - 1);
    kiln_indexing_map_add_result(m, e);
  }
  *out = m;
  return KILN_STATUS_OK;
}

static kiln_status reduce(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr, int operand,
                          const kiln_shape_t *is, const kiln_shape_t *os, kiln_indexing_map_t **out) {
  int n = instr->num_operands / 2;
  if (operand >= n) {
    *out = scalar_to_all(ctx, is, os);
    return KILN_STATUS_OK;
  }
  if (is->rank != os->rank + instr->dimensions.n) return bad(instr, "rank mismatch");
  kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, is, 0, 0);
  for (int j = 0; j < is->rank; j++)
    if (!list_has(&instr->dimensions, j)) kiln_indexing_map_add_result(m, kiln_affine_dim(ctx, j));
  *out = m;
  return KILN_STATUS_OK;
}

static kiln_status dot(kiln_affine_ctx_t *ctx, const kiln_hlo_instruction_t *instr, int operand,
                       const kiln_shape_t *is, const kiln_shape_t *os, kiln_indexing_map_t **out) {
  const kiln_dot_dnums_t *dn = &instr->dot_dnums;
  const kiln_shape_t *other = instr->operands[1 - operand]->shape;
  if (!kiln_shape_is_array(other)) return bad(instr, "operands must be arrays");
  const kiln_i64_list_t *batch = operand == 0 ? &dn->lhs_batch : &dn->rhs_batch;
  const kiln_i64_list_t *contr = operand == 0 ? &dn->lhs_contracting : &dn->rhs_contracting;
  int nb = batch->n, nc = contr->n;
  int my_free = is->rank - nb - nc, other_free = other->rank - nb - nc;
  if (my_free < 0 || other_free < 0 || nb + my_free + other_free != os->rank)
    return bad(instr, "dimension numbers do not match the shapes");
  kiln_indexing_map_t *m = kiln_hlo_ix_map_over(ctx, is, (size_t)other_free, 0);
  kiln_affine_expr_t *res[MAX_RANK] = {0};
  int64_t lhs_free = operand == 0 ? my_free : other_free;
  int64_t mine = nb + (operand == 0 ? 0 : lhs_free), theirs = nb + (operand == 0 ? lhs_free : 0);
  int64_t f = 0;
  for (int j = 0; j < is->rank; j++) {
    int b = list_find(batch, j);
    if (b >= 0) res[b] = kiln_affine_dim(ctx, j);
    else if (!list_has(contr, j)) res[mine + f++] = kiln_affine_dim(ctx, j);
  }
  for (int s = 0; s < other_free; s++) {
    kiln_indexing_map_set_bounds(m, KILN_INDEXING_SYM, (size_t)s, 0, os->dims[theirs + s] - 1);
    res[theirs + s] = kiln_affine_sym(ctx, s);
  }
  for (int i = 0; i < os->rank; i++) {
    if (!res[i]) {
      kiln_indexing_map_free(m);
      return bad(instr, "dimension numbers do not match the shapes");
    }
    kiln_indexing_map_add_result(m, res[i]);
  }
  *out = m;
  return KILN_STATUS_OK;
}

kiln_status kiln_hlo_indexing_input_to_output(kiln_affine_ctx_t *ctx,
                                              const kiln_hlo_instruction_t *instr, int operand,
                                              int output_index, kiln_indexing_map_t **out) {
  *out = NULL;
  if (!ctx || !instr) return KILN_ERR_INVALID("indexing: NULL argument");
  if (operand < 0 || operand >= instr->num_operands || !instr->operands[operand])
    return bad(instr, "operand number out of range");
  const kiln_shape_t *is = instr->operands[operand]->shape;
  const kiln_shape_t *os = kiln_hlo_indexing_output_shape(instr, output_index);
  if (!is || !kiln_shape_is_array(is) || !os) return KILN_STATUS_OK; /* tuples: unknown */
  if (is->rank > MAX_RANK || os->rank > MAX_RANK) return bad(instr, "rank too large");
  kiln_hlo_opcode_t op = instr->opcode;
  switch (op) {
  case KILN_OP_BROADCAST: return broadcast(ctx, instr, is, os, out);
  case KILN_OP_TRANSPOSE: return transpose(ctx, instr, is, os, out);
  case KILN_OP_RESHAPE: return reshape(ctx, instr, is, os, false, out);
  case KILN_OP_BITCAST: return reshape(ctx, instr, is, os, true, out);
  case KILN_OP_SLICE: return slice(ctx, instr, is, os, out);
  case KILN_OP_REVERSE: {
    /* reverse is its own inverse */
    kiln_hlo_indexing_t ix;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_hlo_indexing_output_to_input(ctx, instr, 0, &ix));
    *out = ix.operands[0].map;
    ix.operands[0].map = NULL;
    kiln_hlo_indexing_free(&ix);
    return KILN_STATUS_OK;
  }
  case KILN_OP_PAD:
    if (operand == 0) return pad(ctx, instr, is, os, out);
    return KILN_STATUS_OK; /* the pad value feeds the complement of the operand: unknown */
  case KILN_OP_CONCATENATE: {
    if (instr->dimensions.n != 1 || is->rank != os->rank) return bad(instr, "bad concatenate");
    int64_t c = instr->dimensions.v[0], off = 0;
    if (c < 0 || c >= os->rank) return bad(instr, "dimension out of range");
    for (int k = 0; k < operand; k++) off += instr->operands[k]->shape->dims[c];
    kiln_indexing_map_t *m = identity(ctx, is);
    m->results.data[c] = kiln_affine_add_const(ctx, m->results.data[c], off);
    *out = m;
    return KILN_STATUS_OK;
  }
  case KILN_OP_REDUCE: return reduce(ctx, instr, operand, is, os, out);
  case KILN_OP_DOT: return dot(ctx, instr, operand, is, os, out);
  case KILN_OP_DYNAMIC_UPDATE_SLICE:
    if (operand == 0 && is->rank == os->rank) *out = identity(ctx, is);
    return KILN_STATUS_OK;
  case KILN_OP_TUPLE:
    if (output_index == operand) *out = identity(ctx, is);
    return KILN_STATUS_OK;
  case KILN_OP_BITCAST_CONVERT:
    if (is->rank == os->rank) *out = identity(ctx, is);
    return KILN_STATUS_OK;
  default:
    if (kiln_hlo_opcode_is_elementwise(op) || op == KILN_OP_OPTIMIZATION_BARRIER) {
      if (is->rank == 0 && os->rank > 0) *out = scalar_to_all(ctx, is, os);
      else if (is->rank == os->rank) *out = identity(ctx, is);
      else return bad(instr, "operand rank differs from the output");
    }
    return KILN_STATUS_OK; /* unknown */
  }
}
