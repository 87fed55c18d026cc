/* Stage 2: lower `loop` (xla_gpu.loop) to nested `for` ops with a bounds-check `if`.
 *
 *   %r = loop (%d...)[%s...] -> (%i...) in MAP iter_args(%a = %init) { BODY; yield %y }
 * becomes
 *   %r = if <dims-only checks> -> (T) {
 *     %f = for %s0 = lo0 to hi0+1 step 1 iter_args(%a0 = %init) -> (T) {
 *       ... innermost: if <symbol checks> { %i... = apply_indexing MAP; BODY; yield %y }
 *                      else { yield %a }
 *     }
 *     yield %f
 *   } else { yield %init }
 *
 * A check is omitted when the operands' known ranges (thread_id / block_id ranges,
 * constants) already guarantee it; an `if` with no checks left is omitted. */
#include "compiler/codegen/kir_pipeline.h"
#include "compiler/codegen/kir_rewrite.h"

/* Known range of an index value: ids carry their range, constants are exact. */
static kiln_interval_t known_range(const kiln_kir_value_t *v) {
  int64_t c;
  if (kir_const_value(v, &c)) return (kiln_interval_t){c, c};
  if (v->def && (v->def->opcode == KILN_KIR_THREAD_ID || v->def->opcode == KILN_KIR_BLOCK_ID))
    return (kiln_interval_t){v->def->range_lo, v->def->range_hi};
  return KILN_INTERVAL_FULL;
}

static bool within(kiln_interval_t inner, kiln_interval_t outer) {
  return inner.lo >= outer.lo && inner.hi <= outer.hi;
}

typedef struct check_list {
  kiln_affine_expr_t *expr[64];
  kiln_interval_t range[64];
  int n;
} check_list_t;

static void and_into(kiln_kir_builder_t *b, kiln_kir_value_t **acc, kiln_kir_value_t *c) {
  *acc = *acc ? kiln_kir_binary(b, KILN_KIR_AND, *acc, c) : c;
}

/* Emits the conjunction of `checks` (each: expr over map vars in range) as a pred. */
static kiln_kir_value_t *emit_checks(kir_rewriter_t *rw, const kiln_indexing_map_t *map,
                                     kiln_kir_value_t *const *dims, kiln_kir_value_t *const *syms,
                                     const check_list_t *checks, bool syms_ready) {
  kiln_kir_builder_t *b = &rw->b;
  kiln_kir_value_t *acc = NULL;
  for (int i = 0; i < checks->n; i++) {
    kiln_affine_expr_t *e = checks->expr[i];
    kiln_kir_value_t *x;
    if (e->kind == KILN_AFFINE_DIM) {
      x = dims[e->value];
    } else if (e->kind == KILN_AFFINE_SYM) {
      x = syms[e->value];
    } else {
      size_t nd = kiln_indexing_map_num_dims(map);
      kiln_indexing_map_t *cm;
      if (syms_ready) {
        cm = kir_map_with_results(rw->m, map, &e, 1, false);
      } else { /* dims-only check emitted before the symbol loops exist */
        cm = kiln_kir_module_adopt_map(rw->m, kiln_indexing_map_create(map->ctx, nd, 0, 0));
        for (size_t d = 0; d < nd; d++) {
          kiln_indexing_var_t dv = map->vars[KILN_INDEXING_DIM].data[d];
          kiln_indexing_map_set_bounds(cm, KILN_INDEXING_DIM, d, dv.bounds.lo, dv.bounds.hi);
          kiln_indexing_map_set_name(cm, KILN_INDEXING_DIM, d, dv.name);
        }
        kiln_indexing_map_add_result(cm, e);
      }
      kiln_kir_op_t *ap = kiln_kir_apply_indexing(b, cm, dims, nd, syms,
                                                  syms_ready ? kiln_indexing_map_num_syms(map) : 0);
      x = kiln_kir_op_result(ap, 0);
    }
    kiln_interval_t r = checks->range[i];
    if (r.lo != INT64_MIN)
      and_into(b, &acc, kiln_kir_cmp(b, KILN_KIR_CMP_GE, x, kiln_kir_const_index(b, r.lo)));
    if (r.hi != INT64_MAX)
      and_into(b, &acc, kiln_kir_cmp(b, KILN_KIR_CMP_LE, x, kiln_kir_const_index(b, r.hi)));
  }
  return acc;
}

typedef struct loop_ctx {
  kiln_kir_op_t *op;          /* the old loop */
  const kiln_indexing_map_t *map;
  kiln_kir_value_t **dims;    /* new dim values */
  kiln_kir_value_t **syms;    /* new symbol values (filled while nesting) */
  check_list_t inner;
} loop_ctx_t;

static kiln_kir_value_t **emit_if(kir_rewriter_t *rw, kiln_kir_value_t *cond,
                                  kiln_kir_value_t *const *inits, uint32_t n,
                                  kiln_kir_value_t **(*then_fn)(kir_rewriter_t *, loop_ctx_t *,
                                                                kiln_kir_value_t *const *, int),
                                  loop_ctx_t *lc, int level);

/* Emits the nest from symbol `level` inward with iteration values `iters`; returns the
 * values the nest yields (the loop's results at this level). */
static kiln_kir_value_t **emit_nest(kir_rewriter_t *rw, loop_ctx_t *lc,
                                    kiln_kir_value_t *const *iters, int level) {
  kiln_kir_builder_t *b = &rw->b;
  kiln_kir_op_t *op = lc->op;
  const kiln_indexing_map_t *map = lc->map;
  size_t nsyms = kiln_indexing_map_num_syms(map), nres = kiln_indexing_map_num_results(map);
  uint32_t niter = op->num_results;
  if ((size_t)level < nsyms) {
    kiln_interval_t iv = map->vars[KILN_INDEXING_SYM].data[level].bounds;
    kiln_kir_op_t *f = kiln_kir_for(b, kiln_kir_const_index(b, iv.lo),
                                    kiln_kir_const_index(b, iv.hi + 1), kiln_kir_const_index(b, 1),
                                    iters, niter);
    if (!f) return NULL;
    kiln_kir_region_t *body = kiln_kir_op_region(f, 0);
    kiln_kir_value_t *s = kiln_kir_region_arg(body, 0);
    s->name = op->regions[0]->args[level]->name;
    lc->syms[level] = s;
    kiln_kir_builder_enter(b, body);
    kiln_kir_value_t **inner = emit_nest(rw, lc, body->args + 1, level + 1);
    if (inner) kiln_kir_yield(b, inner, niter);
    kiln_kir_builder_exit(b);
    kiln_kir_value_t **res = kiln_arena_alloc(&rw->m->arena, sizeof(*res) * (niter + 1));
    for (uint32_t i = 0; i < niter; i++) {
      res[i] = kiln_kir_op_result(f, i);
      if (res[i]) res[i]->name = op->results[i]->name;
    }
    return res;
  }
  if (level == (int)nsyms && lc->inner.n > 0) {
    kiln_kir_value_t *cond = emit_checks(rw, map, lc->dims, lc->syms, &lc->inner, true);
    return emit_if(rw, cond, iters, niter, emit_nest, lc, level + 1);
  }
  /* The body: map results, then the old body with its arguments mapped. */
  const kiln_kir_region_t *src = op->regions[0];
  kiln_kir_op_t *ap = kiln_kir_apply_indexing(b, map, lc->dims, kiln_indexing_map_num_dims(map),
                                              lc->syms, nsyms);
  if (!ap) return NULL;
  for (size_t i = 0; i < nsyms; i++) kir_map_set(rw, src->args[i], lc->syms[i]);
  for (size_t i = 0; i < nres; i++) {
    ap->results[i]->name = src->args[nsyms + i]->name;
    kir_map_set(rw, src->args[nsyms + i], ap->results[i]);
  }
  for (uint32_t i = 0; i < niter; i++) kir_map_set(rw, src->args[nsyms + nres + i], iters[i]);
  uint32_t n = 0;
  return kir_rewrite_body(rw, src, &n);
}

static kiln_kir_value_t **emit_if(kir_rewriter_t *rw, kiln_kir_value_t *cond,
                                  kiln_kir_value_t *const *inits, uint32_t n,
                                  kiln_kir_value_t **(*then_fn)(kir_rewriter_t *, loop_ctx_t *,
                                                                kiln_kir_value_t *const *, int),
                                  loop_ctx_t *lc, int level) {
  kiln_kir_builder_t *b = &rw->b;
  const kiln_kir_type_t **tys = kiln_arena_alloc(&rw->m->arena, sizeof(*tys) * (n + 1));
  for (uint32_t i = 0; i < n; i++) tys[i] = inits[i]->type;
  kiln_kir_op_t *iff = kiln_kir_if(b, cond, tys, n);
  if (!iff) return NULL;
  kiln_kir_builder_enter(b, kiln_kir_op_region(iff, 0));
  kiln_kir_value_t **vals = then_fn(rw, lc, inits, level);
  if (vals) kiln_kir_yield(b, vals, n);
  kiln_kir_builder_exit(b);
  kiln_kir_builder_enter(b, kiln_kir_op_region(iff, 1));
  kiln_kir_yield(b, inits, n);
  kiln_kir_builder_exit(b);
  kiln_kir_value_t **res = kiln_arena_alloc(&rw->m->arena, sizeof(*res) * (n + 1));
  for (uint32_t i = 0; i < n; i++) res[i] = kiln_kir_op_result(iff, i);
  return res;
}

static bool lower_loop(kir_rewriter_t *rw, kiln_kir_op_t *op) {
  if (op->opcode != KILN_KIR_LOOP) return false;
  kiln_kir_module_t *m = rw->m;
  const kiln_indexing_map_t *map = op->map;
  size_t ndims = kiln_indexing_map_num_dims(map), nsyms = kiln_indexing_map_num_syms(map);
  loop_ctx_t lc = {.op = op, .map = map};
  lc.dims = kiln_arena_alloc(&m->arena, sizeof(*lc.dims) * (ndims + 1));
  lc.syms = kiln_arena_alloc(&m->arena, sizeof(*lc.syms) * (nsyms + 1));
  for (size_t i = 0; i < ndims; i++) lc.dims[i] = kir_map(rw, op->operands[i]);
  uint32_t niter = op->num_results;
  kiln_kir_value_t **inits = kiln_arena_alloc(&m->arena, sizeof(*inits) * (niter + 1));
  for (uint32_t i = 0; i < niter; i++) inits[i] = kir_map(rw, op->operands[ndims + i]);

  /* Which checks the operands do not already guarantee: evaluate bounds over a copy of the
   * map whose dim intervals are the operands' known ranges. */
  kiln_indexing_map_t *known = kiln_indexing_map_clone(map);
  known->constraints.len = 0; /* bounds must come from the intervals alone */
  check_list_t outer = {0};
  for (size_t i = 0; i < ndims; i++) {
    kiln_interval_t dom = map->vars[KILN_INDEXING_DIM].data[i].bounds;
    kiln_interval_t have = known_range(lc.dims[i]);
    if (!within(have, dom) && outer.n < 64) {
      outer.expr[outer.n] = kiln_affine_dim(m->ctx, (int64_t)i);
      outer.range[outer.n++] = dom;
    }
    known->vars[KILN_INDEXING_DIM].data[i].bounds =
        (kiln_interval_t){have.lo > dom.lo ? have.lo : dom.lo, have.hi < dom.hi ? have.hi : dom.hi};
  }
  for (size_t i = 0; i < map->constraints.len; i++) {
    kiln_indexing_constraint_t c = map->constraints.data[i];
    kiln_interval_t have = kiln_indexing_map_bounds(known, c.expr);
    if (within(have, c.range)) continue;
    if (have.lo >= c.range.lo) c.range.lo = INT64_MIN; /* only the side that can fail */
    if (have.hi <= c.range.hi) c.range.hi = INT64_MAX;
    bool uses_syms[64] = {0};
    kiln_affine_collect_vars(c.expr, NULL, 0, uses_syms, nsyms < 64 ? nsyms : 64, NULL, 0);
    bool any = false;
    for (size_t k = 0; k < nsyms && k < 64; k++) any |= uses_syms[k];
    check_list_t *cl = any ? &lc.inner : &outer;
    if (cl->n < 64) {
      cl->expr[cl->n] = c.expr;
      cl->range[cl->n++] = c.range;
    }
  }
  kiln_indexing_map_free(known);

  kiln_kir_value_t **res;
  if (outer.n) {
    kiln_kir_value_t *cond = emit_checks(rw, map, lc.dims, lc.syms, &outer, false);
    res = emit_if(rw, cond, inits, niter, emit_nest, &lc, 0);
  } else {
    res = emit_nest(rw, &lc, inits, 0);
  }
  if (!res) {
    kir_rewrite_fail(rw, kiln_kir_builder_take_status(&rw->b));
    if (!rw->status) kir_rewrite_fail(rw, KILN_ERR_INTERNAL("kir lower-loops: failed"));
    return true;
  }
  for (uint32_t i = 0; i < niter; i++) {
    if (!res[i]->name) res[i]->name = op->results[i]->name;
    kir_map_set(rw, op->results[i], res[i]);
  }
  return true;
}

kiln_status kiln_kir_lower_loops(kiln_kir_module_t *m) {
  KILN_RETURN_IF_ERROR(kiln_kir_verify(m), "before kir lower-loops");
  KILN_RETURN_IF_ERROR(kir_rewrite_module(m, lower_loop, NULL, NULL), "in kir lower-loops");
  return NULL;
}
