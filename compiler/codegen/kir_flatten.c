/* Stage 3: flatten tensors to 1-D (row-major). Every tensor type becomes tensor<N x T>
 * (rank 0 becomes 1 element); every access (extract, insert, vload, vstore, atomics) gets one
 * linear index. When all indices of an access come from one apply_indexing, the linearized
 * expression is composed into that op's map and simplified against its domain, e.g. the
 * GELU loop's three results become `th_x * 4 + bl_x * 512 + v`. When that op's operands in
 * turn are all results of one apply_indexing (a transpose's permutation of the loop's
 * indices), the composition goes on down the chain. Otherwise the indices are
 * linearized by a map (d0, ..., dn-1) -> (d0 * s0 + ...) over the dims' bounds. */
#include "compiler/codegen/kir_pipeline.h"
#include "compiler/codegen/kir_rewrite.h"

static const kiln_kir_type_t *flat_type(kir_rewriter_t *rw, const kiln_kir_type_t *t) {
  if (t->kind != KILN_KIR_TYPE_TENSOR || t->rank == 1) return t;
  int64_t n = kiln_kir_type_num_elements(t);
  return kiln_kir_type_tensor(rw->m, t->elem, 1, &n, t->space);
}

/* When every operand of `ap` is a result of one other apply_indexing, returns that op and
 * rewrites `*e` (over ap's variables) over that op's variables. */
static const kiln_kir_op_t *compose_through(kiln_affine_ctx_t *c, const kiln_kir_op_t *ap,
                                            kiln_affine_expr_t **e) {
  if (ap->num_operands == 0 || ap->num_operands > 2 * KILN_KIR_MAX_RANK) return NULL;
  const kiln_kir_op_t *src = ap->operands[0]->def;
  if (!src || src->opcode != KILN_KIR_APPLY_INDEXING) return NULL;
  kiln_affine_expr_t *vars[2 * KILN_KIR_MAX_RANK];
  for (uint32_t i = 0; i < ap->num_operands; i++) {
    if (ap->operands[i]->def != src) return NULL;
    vars[i] = src->map->results.data[ap->operands[i]->index];
  }
  size_t nd = ap->num_map_dims;
  *e = kiln_affine_replace(c, *e, vars, nd, vars + nd, ap->num_operands - nd, NULL, 0);
  return src;
}

/* The flat index for indices idx[0..rank) (new values) of a tensor of type `t` (old type). */
static kiln_kir_value_t *linear_index(kir_rewriter_t *rw, const kiln_kir_type_t *t,
                                      kiln_kir_value_t *const *idx) {
  kiln_kir_module_t *m = rw->m;
  kiln_affine_ctx_t *c = m->ctx;
  int rank = t->rank;
  if (rank == 0) return kiln_kir_const_index(&rw->b, 0);
  /* All from one apply_indexing? */
  const kiln_kir_op_t *ap = idx[0]->def;
  bool same = ap && ap->opcode == KILN_KIR_APPLY_INDEXING;
  for (int i = 1; i < rank && same; i++) same = idx[i]->def == ap;
  if (same) {
    kiln_affine_expr_t *res[KILN_KIR_MAX_RANK];
    for (int i = 0; i < rank; i++) res[i] = ap->map->results.data[idx[i]->index];
    kiln_affine_expr_t *lin = kiln_affine_linearize(c, res, t->dims, (size_t)rank);
    /* a permutation (transpose) of a loop's indices: compose down to the loop's variables */
    for (const kiln_kir_op_t *src; (src = compose_through(c, ap, &lin));) ap = src;
    kiln_indexing_map_t *map = kir_map_with_results(m, ap->map, &lin, 1, true);
    kiln_indexing_map_simplify(map);
    size_t nd = ap->num_map_dims;
    kiln_kir_op_t *n = kiln_kir_apply_indexing(&rw->b, map, ap->operands, nd, ap->operands + nd,
                                               ap->num_operands - nd);
    return kiln_kir_op_result(n, 0);
  }
  kiln_indexing_map_t *map = kiln_indexing_map_create(c, (size_t)rank, 0, 0);
  kiln_affine_expr_t *d[KILN_KIR_MAX_RANK];
  for (int i = 0; i < rank; i++) {
    d[i] = kiln_affine_dim(c, i);
    kiln_indexing_map_set_bounds(map, KILN_INDEXING_DIM, (size_t)i, 0, t->dims[i] - 1);
  }
  kiln_indexing_map_add_result(map, kiln_affine_linearize(c, d, t->dims, (size_t)rank));
  kiln_kir_module_adopt_map(m, map);
  kiln_kir_op_t *n = kiln_kir_apply_indexing(&rw->b, map, idx, (size_t)rank, NULL, 0);
  return kiln_kir_op_result(n, 0);
}

static bool flatten_access(kir_rewriter_t *rw, kiln_kir_op_t *op) {
  size_t tpos;
  switch (op->opcode) {
    case KILN_KIR_EXTRACT: case KILN_KIR_VLOAD: case KILN_KIR_ATOMIC_CAS:
      tpos = 0;
      break;
    case KILN_KIR_INSERT: case KILN_KIR_VSTORE: case KILN_KIR_ATOMIC_RMW:
      tpos = 1;
      break;
    default:
      return false;
  }
  const kiln_kir_type_t *t = op->operands[tpos]->type; /* old type (values keep theirs) */
  if (t->rank == 1) return false;
  kiln_kir_value_t *idx[KILN_KIR_MAX_RANK];
  for (int i = 0; i < t->rank; i++) idx[i] = kir_map(rw, op->operands[tpos + 1 + (size_t)i]);
  kiln_kir_value_t *lin = linear_index(rw, t, idx);
  if (!lin) {
    kir_rewrite_fail(rw, kiln_kir_builder_take_status(&rw->b));
    return true;
  }
  /* Clone with the new operand list: [prefix..., tensor, lin]. */
  kiln_kir_value_t *saved[KILN_KIR_MAX_RANK + 2];
  uint32_t saved_n = op->num_operands;
  for (uint32_t i = 0; i < saved_n; i++) saved[i] = op->operands[i];
  /* Build a shadow op whose operands are the old prefix and tensor plus a placeholder index
   * that maps to `lin`; cloning then maps everything. */
  kiln_kir_value_t ph = *lin;
  ph.id = rw->m->next_value_id++;
  kir_map_set(rw, &ph, lin);
  op->operands[tpos + 1] = &ph;
  op->num_operands = (uint32_t)tpos + 2;
  kir_clone_op(rw, op);
  op->num_operands = saved_n;
  for (uint32_t i = 0; i < saved_n; i++) op->operands[i] = saved[i];
  return true;
}

kiln_status kiln_kir_flatten(kiln_kir_module_t *m) {
  KILN_RETURN_IF_ERROR(kiln_kir_verify(m), "before kir flatten");
  KILN_RETURN_IF_ERROR(kir_rewrite_module(m, flatten_access, flat_type, NULL), "in kir flatten");
  return NULL;
}
