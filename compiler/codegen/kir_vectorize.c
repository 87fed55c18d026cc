/* Stage 4: vectorize contiguous, aligned loads and stores (the emitter document's
 * vectorize_loads_stores). For `for %iv = 0 to N step 1` (N a power of two, 2..16, and
 * N * element bits <= 128) whose body, at its top level, has
 *   extract %t[%i]   with %i = apply_indexing(... %iv ...) = rest + iv, %t defined outside
 *   insert %x into %a[%i] with %a the k-th iteration argument, the result yielded at k, and
 *                    %a used by nothing else
 * where `rest` is a multiple of N for every domain point (each coefficient and the constant
 * divisible by N), the extract becomes `vload %t[rest]` before the loop and `vextract [%iv]`
 * inside; the insert becomes `vinsert [%iv]` into a new vector iteration argument and one
 * `vstore` after the loop. Tensors must be 1-D (run after flatten). */
#include <string.h>

#include "compiler/codegen/kir_pipeline.h"
#include "compiler/codegen/kir_rewrite.h"

typedef struct cand {
  kiln_kir_op_t *op;       /* extract or insert (old) */
  kiln_kir_op_t *ap;       /* its apply_indexing (old) */
  uint32_t iv_operand;     /* operand of ap that is the iv */
  int iter;                /* insert: iteration argument index */
  kiln_kir_value_t *vec;   /* extract: the vload (new); insert: the vector iter arg (new) */
} cand_t;

typedef struct vec_state {
  cand_t c[32];
  int n;
  kiln_kir_value_t *iv_new;
  bool active;
} vec_state_t;

/* Is `e` == rest + var with rest a multiple of n everywhere? */
static bool contiguous_aligned(kiln_affine_ctx_t *c, kiln_affine_expr_t *e,
                               kiln_affine_expr_t *var, int64_t n) {
  kiln_affine_expr_t *zero = kiln_affine_const(c, 0);
  kiln_affine_expr_t *rest;
  if (var->kind == KILN_AFFINE_DIM) {
    kiln_affine_expr_t *dims[KILN_KIR_MAX_RANK * 2] = {0};
    if (var->value >= (int64_t)(sizeof(dims) / sizeof(dims[0]))) return false;
    dims[var->value] = zero;
    rest = kiln_affine_replace(c, e, dims, (size_t)var->value + 1, NULL, 0, NULL, 0);
  } else {
    kiln_affine_expr_t *syms[KILN_KIR_MAX_RANK * 2] = {0};
    if (var->value >= (int64_t)(sizeof(syms) / sizeof(syms[0]))) return false;
    syms[var->value] = zero;
    rest = kiln_affine_replace(c, e, NULL, 0, syms, (size_t)var->value + 1, NULL, 0);
  }
  if (kiln_affine_add(c, rest, var) != e) return false; /* hash-consed: pointer equality */
  size_t nt = rest->kind == KILN_AFFINE_ADD ? rest->n : 1;
  for (size_t i = 0; i < nt; i++) {
    kiln_affine_expr_t *term = rest->kind == KILN_AFFINE_ADD ? rest->ops[i] : rest;
    int64_t coef = 1;
    kiln_affine_term_split(term, &coef);
    if (coef % n != 0) return false;
  }
  return true;
}

/* Finds the candidate for `op` in the body of `f` (old ops). */
static bool analyze(kiln_kir_module_t *m, kiln_kir_op_t *f, kiln_kir_op_t *op, int64_t n,
                    cand_t *out) {
  const kiln_kir_region_t *body = f->regions[0];
  kiln_kir_value_t *iv = body->args[0];
  size_t tpos = op->opcode == KILN_KIR_INSERT ? 1 : 0;
  const kiln_kir_value_t *t = op->operands[tpos];
  if (t->type->rank != 1 || op->num_operands != tpos + 2) return false;
  if (n * kiln_elem_type_bits(t->type->elem) > 128 || kiln_elem_type_bits(t->type->elem) < 8)
    return false;
  const kiln_kir_value_t *idx = op->operands[tpos + 1];
  kiln_kir_op_t *ap = idx->def;
  if (!ap || ap->opcode != KILN_KIR_APPLY_INDEXING || ap->num_results != 1) return false;
  int pos = -1;
  for (uint32_t i = 0; i < ap->num_operands; i++) {
    if (ap->operands[i] == iv) {
      if (pos >= 0) return false;
      pos = (int)i;
    } else if (kir_defined_in(ap->operands[i], body)) {
      return false; /* the start must be computable before the loop */
    }
  }
  if (pos < 0) return false;
  kiln_affine_expr_t *var = (uint32_t)pos < ap->num_map_dims
                                ? kiln_affine_dim(m->ctx, pos)
                                : kiln_affine_sym(m->ctx, pos - (int)ap->num_map_dims);
  if (!contiguous_aligned(m->ctx, ap->map->results.data[0], var, n)) return false;
  out->op = op;
  out->ap = ap;
  out->iv_operand = (uint32_t)pos;
  out->iter = -1;
  if (op->opcode == KILN_KIR_EXTRACT) return !kir_defined_in(t, body);
  /* insert: into iteration argument k, yielded at k, the argument used only here. */
  if (t->region != body || t->index == 0) return false;
  int k = (int)t->index - 1;
  const kiln_kir_op_t *y = body->ops.data[body->ops.len - 1];
  if (y->operands[k] != op->results[0]) return false;
  size_t uses = 0;
  for (size_t i = 0; i < body->ops.len; i++) {
    const kiln_kir_op_t *o = body->ops.data[i];
    for (uint32_t j = 0; j < o->num_operands; j++) {
      if (o->operands[j] == t) uses++;
      if (o->operands[j] == op->results[0] && o != y) return false;
    }
    for (uint32_t j = 0; j < o->num_regions; j++)
      if (o->num_regions) {
        /* a use inside a nested region counts as another use */
        const kiln_kir_region_t *r = o->regions[j];
        for (size_t q = 0; q < r->ops.len; q++)
          for (uint32_t w = 0; w < r->ops.data[q]->num_operands; w++)
            if (r->ops.data[q]->operands[w] == t) uses += 2;
      }
  }
  if (uses != 1) return false;
  for (uint32_t i = 0; i < y->num_operands; i++)
    if (y->operands[i] == op->results[0] && (int)i != k) return false;
  out->iter = k;
  return true;
}

static kiln_kir_value_t *hoisted_index(kir_rewriter_t *rw, const cand_t *c) {
  kiln_kir_value_t *ops[KILN_KIR_MAX_RANK * 2 + 8];
  if (c->ap->num_operands > sizeof(ops) / sizeof(ops[0])) return NULL;
  for (uint32_t i = 0; i < c->ap->num_operands; i++) ops[i] = kir_map(rw, c->ap->operands[i]);
  ops[c->iv_operand] = kiln_kir_const_index(&rw->b, 0);
  kiln_kir_op_t *n = kiln_kir_apply_indexing(&rw->b, c->ap->map, ops, c->ap->num_map_dims,
                                             ops + c->ap->num_map_dims,
                                             c->ap->num_operands - c->ap->num_map_dims);
  return kiln_kir_op_result(n, 0);
}

static bool vectorize_op(kir_rewriter_t *rw, kiln_kir_op_t *op);

/* Inside a vectorized loop body: replace the candidates. */
static bool rewrite_candidate(kir_rewriter_t *rw, vec_state_t *st, kiln_kir_op_t *op) {
  for (int i = 0; i < st->n; i++) {
    cand_t *c = &st->c[i];
    if (c->op != op) continue;
    if (op->opcode == KILN_KIR_EXTRACT) {
      kiln_kir_value_t *x = kiln_kir_vextract(&rw->b, c->vec, st->iv_new, -1);
      kir_map_set(rw, op->results[0], x);
    } else {
      kiln_kir_value_t *x = kiln_kir_vinsert(&rw->b, kir_map(rw, op->operands[0]), c->vec,
                                             st->iv_new, -1);
      /* The tensor is unchanged inside the loop; the vector carries the values. */
      kir_map_set(rw, op->results[0], kir_map(rw, op->operands[1]));
      c->vec = x; /* the value to yield */
    }
    return true;
  }
  return false;
}

typedef struct vec_user {
  vec_state_t *cur;
} vec_user_t;

static bool vectorize_op(kir_rewriter_t *rw, kiln_kir_op_t *op) {
  vec_user_t *u = rw->user;
  if (u->cur && rewrite_candidate(rw, u->cur, op)) return true;
  if (op->opcode != KILN_KIR_FOR) return false;
  int64_t lb, ub, step;
  if (!kir_const_value(op->operands[0], &lb) || !kir_const_value(op->operands[1], &ub) ||
      !kir_const_value(op->operands[2], &step) || lb != 0 || step != 1)
    return false;
  int64_t n = ub;
  if (n < 2 || n > 16 || (n & (n - 1))) return false;
  vec_state_t st = {0};
  const kiln_kir_region_t *body = op->regions[0];
  for (size_t i = 0; i + 1 < body->ops.len && st.n < 32; i++) {
    kiln_kir_op_t *o = body->ops.data[i];
    if (o->opcode != KILN_KIR_EXTRACT && o->opcode != KILN_KIR_INSERT) continue;
    if (analyze(rw->m, op, o, n, &st.c[st.n])) st.n++;
  }
  /* One insert per iteration argument. */
  for (int i = 0; i < st.n; i++)
    for (int j = i + 1; j < st.n; j++)
      if (st.c[i].iter >= 0 && st.c[i].iter == st.c[j].iter) return false;
  if (st.n == 0) return false;

  kiln_kir_builder_t *b = &rw->b;
  kiln_kir_module_t *m = rw->m;
  /* Hoisted loads, and vector inits for the stores. */
  uint32_t niter = op->num_results, nvec = 0;
  kiln_kir_value_t **inits = kiln_arena_alloc(&m->arena, sizeof(*inits) * (niter + 33));
  for (uint32_t i = 0; i < niter; i++) inits[i] = kir_map(rw, op->operands[3 + i]);
  kiln_kir_value_t *starts[32];
  for (int i = 0; i < st.n; i++) {
    cand_t *c = &st.c[i];
    starts[i] = hoisted_index(rw, c);
    if (c->op->opcode == KILN_KIR_EXTRACT) {
      kiln_kir_value_t *t = kir_map(rw, c->op->operands[0]);
      c->vec = kiln_kir_vload(b, t, &starts[i], 1, (int)n);
    } else {
      const kiln_kir_type_t *vt =
          kiln_kir_type_vector(m, c->op->operands[0]->type->elem, (int)n);
      kiln_kir_const_t zero = {0};
      inits[niter + nvec++] = kiln_kir_const(b, vt, zero);
    }
  }
  kiln_kir_op_t *f = kiln_kir_for(b, kir_map(rw, op->operands[0]), kir_map(rw, op->operands[1]),
                                  kir_map(rw, op->operands[2]), inits, niter + nvec);
  if (!f) {
    kir_rewrite_fail(rw, kiln_kir_builder_take_status(b));
    return true;
  }
  kiln_kir_region_t *nb = kiln_kir_op_region(f, 0);
  nb->args[0]->name = body->args[0]->name;
  kir_map_set(rw, body->args[0], nb->args[0]);
  for (uint32_t i = 0; i < niter; i++) {
    nb->args[1 + i]->name = body->args[1 + i]->name;
    kir_map_set(rw, body->args[1 + i], nb->args[1 + i]);
  }
  uint32_t v = 0;
  for (int i = 0; i < st.n; i++)
    if (st.c[i].op->opcode == KILN_KIR_INSERT) st.c[i].vec = nb->args[1 + niter + v++];
  st.iv_new = nb->args[0];
  vec_state_t *saved = u->cur;
  u->cur = &st;
  kiln_kir_builder_enter(b, nb);
  uint32_t ny = 0;
  kiln_kir_value_t **ys = kir_rewrite_body(rw, body, &ny);
  kiln_kir_value_t **all = kiln_arena_alloc(&m->arena, sizeof(*all) * (ny + nvec + 1));
  if (ny) memcpy(all, ys, sizeof(*all) * ny);
  v = 0;
  for (int i = 0; i < st.n; i++)
    if (st.c[i].op->opcode == KILN_KIR_INSERT) all[ny + v++] = st.c[i].vec;
  kiln_kir_yield(b, all, ny + nvec);
  kiln_kir_builder_exit(b);
  u->cur = saved;
  /* Results; the stores after the loop. */
  for (uint32_t i = 0; i < niter; i++) {
    f->results[i]->name = op->results[i]->name;
    kir_map_set(rw, op->results[i], f->results[i]);
  }
  v = 0;
  for (int i = 0; i < st.n; i++) {
    cand_t *c = &st.c[i];
    if (c->op->opcode != KILN_KIR_INSERT) continue;
    kiln_kir_value_t *vec = f->results[niter + v++];
    kiln_kir_value_t *t = f->results[c->iter];
    kiln_kir_value_t *stored = kiln_kir_vstore(b, vec, t, &starts[i], 1);
    if (stored) stored->name = op->results[c->iter]->name;
    kir_map_set(rw, op->results[c->iter], stored);
  }
  kir_rewrite_fail(rw, kiln_kir_builder_take_status(b));
  return true;
}

kiln_status kiln_kir_vectorize(kiln_kir_module_t *m) {
  KILN_RETURN_IF_ERROR(kiln_kir_verify(m), "before kir vectorize");
  vec_user_t u = {0};
  KILN_RETURN_IF_ERROR(kir_rewrite_module(m, vectorize_op, NULL, &u), "in kir vectorize");
  return NULL;
}
