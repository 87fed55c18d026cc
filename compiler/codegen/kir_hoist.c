/* Stage 6: hoist index arithmetic out of `if`s. An `if` branch that computes an address from
 * values defined outside the `if` (a padded convolution's or reduce-window's in-bounds test,
 * one per window element after unrolling) gets that computation moved in front of the `if`:
 * the guarded code keeps only its loads and the math on them.
 *
 * Why: LLVM's GVN rebuilds the common parts of the addresses of two guarded loads as phis
 * of equal values in the join blocks. To the loop vectorizer such a phi is loop-variant,
 * so the load it feeds becomes a gather: a 3x3 depthwise convolution's thread loop read
 * 8 of its 9 inputs with vgatherqps. Computed once before the branches, the base is loop
 * invariant (on the host, for a value that depends only on block ids, computed once per
 * block) and each load a contiguous masked load.
 *
 * What moves: ops with no regions and no memory access that cannot trap or fail when run
 * on values the guard would have excluded: constants, apply_indexing whose divisions and
 * modulos are by positive constants, index and pred arithmetic (add, sub, mul, min, max,
 * and, or, xor, not, cmp, select). Integer division, float math and conversions stay.
 * An `if` whose condition tests thread ids directly (the host lowering runs its then branch
 * as a thread loop of its own range) is left alone: a value hoisted out of it would cross
 * between thread loops through memory. */
#include <string.h>

#include "compiler/codegen/kir_pipeline.h"

static bool safe_affine(const kiln_affine_expr_t *e) {
  if ((e->kind == KILN_AFFINE_FLOORDIV || e->kind == KILN_AFFINE_CEILDIV ||
       e->kind == KILN_AFFINE_MOD) &&
      (e->ops[1]->kind != KILN_AFFINE_CONST || e->ops[1]->value <= 0))
    return false;
  for (uint32_t i = 0; i < e->n; i++)
    if (!safe_affine(e->ops[i])) return false;
  return true;
}

static bool index_or_pred(const kiln_kir_type_t *t) {
  return t->kind == KILN_KIR_TYPE_INDEX ||
         (t->kind == KILN_KIR_TYPE_SCALAR && t->elem == KILN_PRED);
}

static bool hoistable(const kiln_kir_op_t *op) {
  if (op->num_regions) return false;
  switch (op->opcode) {
    case KILN_KIR_CONSTANT:
      return op->results[0]->type->kind != KILN_KIR_TYPE_TENSOR;
    case KILN_KIR_APPLY_INDEXING:
      for (size_t i = 0; i < kiln_indexing_map_num_results(op->map); i++)
        if (!safe_affine(op->map->results.data[i])) return false;
      return true;
    case KILN_KIR_CMP:
      return index_or_pred(op->operands[0]->type);
    case KILN_KIR_ADD:
    case KILN_KIR_SUB:
    case KILN_KIR_MUL:
    case KILN_KIR_MIN:
    case KILN_KIR_MAX:
    case KILN_KIR_AND:
    case KILN_KIR_OR:
    case KILN_KIR_XOR:
    case KILN_KIR_NOT:
    case KILN_KIR_SELECT:
      return index_or_pred(op->results[0]->type);
    default:
      return false;
  }
}

/* Whether region `r` lies inside op `op` (in one of its regions, at any depth). */
static bool region_inside(const kiln_kir_region_t *r, const kiln_kir_op_t *op) {
  while (r && r->parent) {
    if (r->parent == op) return true;
    r = r->parent->parent;
  }
  return false;
}

static bool defined_inside(const kiln_kir_value_t *v, const kiln_kir_op_t *op) {
  return region_inside(v->def ? v->def->parent : v->region, op);
}

static bool is_thread_id(const kiln_kir_value_t *v) {
  return v->def && v->def->opcode == KILN_KIR_THREAD_ID;
}

/* A condition the host lowering may take as a thread range: an and-tree of compares of a
 * thread id (or a thread id masked with `and`) with something. */
static bool thread_range_like(const kiln_kir_value_t *c) {
  const kiln_kir_op_t *op = c->def;
  if (!op) return false;
  if (op->opcode == KILN_KIR_AND)
    return thread_range_like(op->operands[0]) || thread_range_like(op->operands[1]);
  if (op->opcode != KILN_KIR_CMP) return false;
  const kiln_kir_value_t *x = op->operands[0];
  if (is_thread_id(x)) return true;
  return x->def && x->def->opcode == KILN_KIR_AND && is_thread_id(x->def->operands[0]);
}

/* Moves the hoistable ops of `ifop`'s branches (at `*pos` in `r`) in front of it. */
static void hoist_from_if(kiln_kir_region_t *r, size_t *pos, kiln_kir_op_t *ifop) {
  for (uint32_t k = 0; k < ifop->num_regions; k++) {
    kiln_kir_region_t *br = ifop->regions[k];
    for (size_t j = 0; j + 1 < br->ops.len;) {
      kiln_kir_op_t *op = br->ops.data[j];
      bool ok = hoistable(op);
      for (uint32_t i = 0; i < op->num_operands && ok; i++)
        ok = !defined_inside(op->operands[i], ifop);
      if (!ok) {
        j++;
        continue;
      }
      memmove(br->ops.data + j, br->ops.data + j + 1, (br->ops.len - j - 1) * sizeof(op));
      br->ops.len--;
      kiln_vec_reserve(&r->ops, r->ops.len + 1);
      memmove(r->ops.data + *pos + 1, r->ops.data + *pos, (r->ops.len - *pos) * sizeof(op));
      r->ops.data[*pos] = op;
      r->ops.len++;
      op->parent = r;
      (*pos)++;
    }
  }
}

static void hoist_region(kiln_kir_region_t *r) {
  for (size_t i = 0; i < r->ops.len; i++) {
    kiln_kir_op_t *op = r->ops.data[i];
    for (uint32_t k = 0; k < op->num_regions; k++) hoist_region(op->regions[k]);
    if (op->opcode == KILN_KIR_IF && !thread_range_like(op->operands[0])) hoist_from_if(r, &i, op);
  }
}

kiln_status kiln_kir_hoist(kiln_kir_module_t *m) {
  KILN_RETURN_IF_ERROR(kiln_kir_verify(m), "before kir hoist");
  for (size_t i = 0; i < m->funcs.len; i++) hoist_region(m->funcs.data[i]->body);
  KILN_RETURN_IF_ERROR(kiln_kir_verify(m), "after kir hoist");
  return NULL;
}
