/* Rewriting machinery for the kernel-IR stages (kir_rewrite.h). */
#include "compiler/codegen/kir_rewrite.h"

#include <string.h>

kiln_kir_value_t *kir_map(kir_rewriter_t *rw, kiln_kir_value_t *old) {
  if (!old) return NULL;
  if (old->id < rw->map_cap && rw->map[old->id]) return rw->map[old->id];
  return old;
}

void kir_map_set(kir_rewriter_t *rw, kiln_kir_value_t *old, kiln_kir_value_t *new_value) {
  if (old->id >= rw->map_cap) {
    size_t cap = rw->map_cap ? rw->map_cap : 64;
    while (cap <= old->id) cap *= 2;
    rw->map = kiln_realloc(rw->map, cap * sizeof(*rw->map));
    memset(rw->map + rw->map_cap, 0, (cap - rw->map_cap) * sizeof(*rw->map));
    rw->map_cap = cap;
  }
  rw->map[old->id] = new_value;
}

void kir_rewrite_fail(kir_rewriter_t *rw, kiln_status s) {
  if (!s) return;
  if (rw->status) kiln_status_free(s);
  else rw->status = s;
}

static const kiln_kir_type_t *new_type(kir_rewriter_t *rw, const kiln_kir_type_t *t) {
  return rw->type_fn ? rw->type_fn(rw, t) : t;
}

kiln_kir_op_t *kir_clone_op(kir_rewriter_t *rw, kiln_kir_op_t *op) {
  kiln_kir_module_t *m = rw->m;
  kiln_kir_value_t **ops = kiln_arena_alloc(&m->arena, sizeof(*ops) * (op->num_operands + 1));
  for (uint32_t i = 0; i < op->num_operands; i++) ops[i] = kir_map(rw, op->operands[i]);
  const kiln_kir_type_t **rt = kiln_arena_alloc(&m->arena, sizeof(*rt) * (op->num_results + 1));
  for (uint32_t i = 0; i < op->num_results; i++) rt[i] = new_type(rw, op->results[i]->type);
  kiln_kir_op_t *n = kiln_kir_op_create(&rw->b, op->opcode, ops, op->num_operands, rt,
                                        op->num_results, op->num_regions, op);
  for (uint32_t i = 0; i < op->num_results; i++) {
    n->results[i]->name = op->results[i]->name;
    kir_map_set(rw, op->results[i], n->results[i]);
  }
  for (uint32_t r = 0; r < op->num_regions; r++) {
    const kiln_kir_region_t *src = op->regions[r];
    kiln_kir_region_t *dst = n->regions[r];
    for (uint32_t a = 0; a < src->num_args; a++) {
      kiln_kir_value_t *na = kiln_kir_region_add_arg(m, dst, new_type(rw, src->args[a]->type));
      na->name = src->args[a]->name;
      kir_map_set(rw, src->args[a], na);
    }
    kiln_kir_builder_enter(&rw->b, dst);
    kir_rewrite_ops(rw, src);
    kiln_kir_builder_exit(&rw->b);
  }
  return n;
}

void kir_rewrite_ops(kir_rewriter_t *rw, const kiln_kir_region_t *src) {
  for (size_t i = 0; i < src->ops.len; i++) {
    kiln_kir_op_t *op = src->ops.data[i];
    if (rw->fn && rw->fn(rw, op)) continue;
    kir_clone_op(rw, op);
  }
}

kiln_kir_value_t **kir_rewrite_body(kir_rewriter_t *rw, const kiln_kir_region_t *src,
                                    uint32_t *num_yielded) {
  size_t n = src->ops.len;
  for (size_t i = 0; i + 1 < n; i++) {
    kiln_kir_op_t *op = src->ops.data[i];
    if (rw->fn && rw->fn(rw, op)) continue;
    kir_clone_op(rw, op);
  }
  const kiln_kir_op_t *t = n ? src->ops.data[n - 1] : NULL;
  uint32_t k = t ? t->num_operands : 0;
  kiln_kir_value_t **out = kiln_arena_alloc(&rw->m->arena, sizeof(*out) * (k + 1));
  for (uint32_t i = 0; i < k; i++) out[i] = kir_map(rw, t->operands[i]);
  *num_yielded = k;
  return out;
}

kiln_status kir_rewrite_module(kiln_kir_module_t *m, kir_rewrite_fn fn, kir_type_fn type_fn,
                               void *user) {
  kir_rewriter_t rw = {.m = m, .fn = fn, .type_fn = type_fn, .user = user};
  for (size_t i = 0; i < m->funcs.len && !rw.status; i++) {
    kiln_kir_func_t *f = m->funcs.data[i];
    rw.func = f;
    kiln_kir_region_t *body = f->body;
    kiln_kir_region_t *tmp = kiln_kir_region_new(m, f, NULL);
    kiln_kir_builder_init(&rw.b, m, tmp);
    kir_rewrite_ops(&rw, body);
    kir_rewrite_fail(&rw, kiln_kir_builder_take_status(&rw.b));
    kiln_kir_builder_finish(&rw.b);
    /* Swap the op lists: the body keeps its arguments (the parameters). */
    KILN_VEC(kiln_kir_op_t *) old = {body->ops.data, body->ops.len, body->ops.cap};
    body->ops.data = tmp->ops.data;
    body->ops.len = tmp->ops.len;
    body->ops.cap = tmp->ops.cap;
    tmp->ops.data = old.data;
    tmp->ops.len = old.len;
    tmp->ops.cap = old.cap;
    for (size_t k = 0; k < body->ops.len; k++) body->ops.data[k]->parent = body;
    /* Parameter types change last: the handler saw the old types while rewriting. */
    for (uint32_t a = 0; a < body->num_args; a++)
      body->args[a]->type = new_type(&rw, body->args[a]->type);
    for (size_t r = 0; r < f->result_types.len; r++)
      f->result_types.data[r] = new_type(&rw, f->result_types.data[r]);
    if (rw.map) memset(rw.map, 0, rw.map_cap * sizeof(*rw.map));
  }
  kiln_free(rw.map);
  if (rw.status) return rw.status;
  kir_dce(m);
  return kiln_kir_verify(m);
}

/* ---- dead code elimination ---- */

static bool is_pure(const kiln_kir_op_t *op) {
  switch (op->opcode) {
    case KILN_KIR_YIELD: case KILN_KIR_RETURN: case KILN_KIR_INSERT: case KILN_KIR_VSTORE:
    case KILN_KIR_ATOMIC_RMW: case KILN_KIR_ATOMIC_CAS: case KILN_KIR_BARRIER:
    case KILN_KIR_SHUFFLE: case KILN_KIR_LOOP: case KILN_KIR_FOR: case KILN_KIR_IF:
    case KILN_KIR_ALLOC_SHARED:
      return false;
    default:
      return true;
  }
}

static void count_uses(const kiln_kir_region_t *r, uint32_t *uses) {
  for (size_t i = 0; i < r->ops.len; i++) {
    const kiln_kir_op_t *op = r->ops.data[i];
    for (uint32_t j = 0; j < op->num_operands; j++) uses[op->operands[j]->id]++;
    for (uint32_t j = 0; j < op->num_regions; j++) count_uses(op->regions[j], uses);
  }
}

static bool dce_region(kiln_kir_region_t *r, uint32_t *uses) {
  bool changed = false;
  for (size_t i = r->ops.len; i-- > 0;) {
    kiln_kir_op_t *op = r->ops.data[i];
    for (uint32_t j = 0; j < op->num_regions; j++) changed |= dce_region(op->regions[j], uses);
    if (!is_pure(op)) continue;
    bool dead = true;
    for (uint32_t j = 0; j < op->num_results; j++)
      if (uses[op->results[j]->id]) dead = false;
    if (!dead) continue;
    for (uint32_t j = 0; j < op->num_operands; j++) uses[op->operands[j]->id]--;
    memmove(r->ops.data + i, r->ops.data + i + 1, (r->ops.len - i - 1) * sizeof(*r->ops.data));
    r->ops.len--;
    changed = true;
  }
  return changed;
}

void kir_dce(kiln_kir_module_t *m) {
  uint32_t *uses = kiln_calloc(m->next_value_id + 1, sizeof(*uses));
  for (size_t i = 0; i < m->funcs.len; i++) {
    kiln_kir_func_t *f = m->funcs.data[i];
    for (int iter = 0; iter < 8; iter++) {
      memset(uses, 0, (m->next_value_id + 1) * sizeof(*uses));
      count_uses(f->body, uses);
      if (!dce_region(f->body, uses)) break;
    }
  }
  kiln_free(uses);
}

/* ---- helpers ---- */

bool kir_const_value(const kiln_kir_value_t *v, int64_t *out) {
  if (!v || !v->def || v->def->opcode != KILN_KIR_CONSTANT) return false;
  const kiln_kir_type_t *t = v->type;
  if (t->kind != KILN_KIR_TYPE_INDEX &&
      !(t->kind == KILN_KIR_TYPE_SCALAR &&
        (kiln_elem_type_is_integral(t->elem) || t->elem == KILN_PRED)))
    return false;
  *out = v->def->cst.i;
  return true;
}

bool kir_defined_in(const kiln_kir_value_t *v, const kiln_kir_region_t *r) {
  const kiln_kir_region_t *at = v->def ? v->def->parent : v->region;
  while (at) {
    if (at == r) return true;
    at = at->parent ? at->parent->parent : NULL;
  }
  return false;
}

kiln_indexing_map_t *kir_map_with_results(kiln_kir_module_t *m, const kiln_indexing_map_t *src,
                                          kiln_affine_expr_t *const *results, size_t n,
                                          bool keep_constraints) {
  kiln_indexing_map_t *map = kiln_indexing_map_clone(src);
  map->results.len = 0;
  if (!keep_constraints) map->constraints.len = 0;
  for (size_t i = 0; i < n; i++) kiln_indexing_map_add_result(map, results[i]);
  return kiln_kir_module_adopt_map(m, map);
}
