/* Stage 5: unroll `for` loops with constant bounds and at most `max_trip` iterations (the
 * emitter document's optimize_loops: the vector loop disappears). The induction variable
 * becomes a constant per copy; lane operands of vextract / vinsert that become constants are
 * folded into the op (printed `[2]`). */
#include "compiler/codegen/kir_pipeline.h"
#include "compiler/codegen/kir_rewrite.h"

typedef struct unroll_user {
  int max_trip;
} unroll_user_t;

static bool unroll_op(kir_rewriter_t *rw, kiln_kir_op_t *op) {
  unroll_user_t *u = rw->user;
  kiln_kir_builder_t *b = &rw->b;
  if (op->opcode == KILN_KIR_VEXTRACT || op->opcode == KILN_KIR_VINSERT) {
    size_t vi = op->opcode == KILN_KIR_VINSERT;
    int64_t lane;
    if (op->lane >= 0 || !kir_const_value(kir_map(rw, op->operands[vi + 1]), &lane)) return false;
    kiln_kir_value_t *vec = kir_map(rw, op->operands[vi]);
    kiln_kir_value_t *r =
        vi ? kiln_kir_vinsert(b, kir_map(rw, op->operands[0]), vec, NULL, lane)
           : kiln_kir_vextract(b, vec, NULL, lane);
    if (!r) {
      kir_rewrite_fail(rw, kiln_kir_builder_take_status(b));
      return true;
    }
    r->name = op->results[0]->name;
    kir_map_set(rw, op->results[0], r);
    return true;
  }
  if (op->opcode != KILN_KIR_FOR) return false;
  int64_t lb, ub, step;
  if (!kir_const_value(kir_map(rw, op->operands[0]), &lb) ||
      !kir_const_value(kir_map(rw, op->operands[1]), &ub) ||
      !kir_const_value(kir_map(rw, op->operands[2]), &step) || step <= 0)
    return false;
  int64_t trips = ub > lb ? (ub - lb + step - 1) / step : 0;
  if (trips > u->max_trip) return false;
  const kiln_kir_region_t *body = op->regions[0];
  uint32_t niter = op->num_results;
  kiln_kir_value_t **cur = kiln_arena_alloc(&rw->m->arena, sizeof(*cur) * (niter + 1));
  for (uint32_t i = 0; i < niter; i++) cur[i] = kir_map(rw, op->operands[3 + i]);
  for (int64_t k = 0; k < trips; k++) {
    kir_map_set(rw, body->args[0], kiln_kir_const_index(b, lb + k * step));
    for (uint32_t i = 0; i < niter; i++) kir_map_set(rw, body->args[1 + i], cur[i]);
    uint32_t n = 0;
    cur = kir_rewrite_body(rw, body, &n);
  }
  for (uint32_t i = 0; i < niter; i++) kir_map_set(rw, op->results[i], cur[i]);
  return true;
}

kiln_status kiln_kir_unroll(kiln_kir_module_t *m, int max_trip) {
  KILN_RETURN_IF_ERROR(kiln_kir_verify(m), "before kir unroll");
  unroll_user_t u = {max_trip};
  KILN_RETURN_IF_ERROR(kir_rewrite_module(m, unroll_op, NULL, &u), "in kir unroll");
  return NULL;
}
