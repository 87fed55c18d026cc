/* dot_canonicalizer (XLA's DotDecomposer + TransposeFolding + DotDimensionSorter, for the
 * forms kiln's gemm thunks take): after layout normalization, every dot of a sequential
 * computation is rewritten in place so that kiln_fusion_wrapper_is_gemm accepts it:
 *
 *   dot(lhs, rhs)  ->  dot(L, R) with the same result shape, where each operand X becomes
 *     [batch dims (in the dot's batch order), free dims (ascending), contracting dims]
 *     or [batch, contracting, free] (the gemm's transpose flag, so no bytes move),
 *   then its contracting dims collapsed into one by a reshape (a bitcast under the default
 *   layout); with no contracting dim a size-1 one is added (an outer product, k = 1).
 *
 * A transpose feeding the dot is folded into the dot's dimension numbers when the folded
 * operand then needs no transpose of its own (a transposed operand costs nothing: it
 * becomes the gemm's transA/transB or a bitcast). Otherwise a transpose to the form above
 * is inserted (a kernel of its own, or fused into its producer). The contracting pairs are
 * ordered as lhs or rhs stores them, whichever moves fewer bytes. The free dims keep their
 * ascending order, so the result needs no reshape: the dot's result is already
 * [batch, lhs free, rhs free] and a gemm collapses each run into m and n (matrix-vector and
 * vector-vector dots are gemms with n = 1 / m = 1).
 *
 * A dot is rewritten only when the rewritten form is a gemm (kiln_fusion_wrapper_is_gemm:
 * element types, default layouts, static shapes), so dots the runtime cannot hand to a
 * library keep their form for the elemental emitter; with no gemm library
 * (KILN_GEMM_LIBRARY=none) the pass does nothing. Shapes with non-default layouts are left
 * alone (after layout normalization there are none).
 *
 * Operand types no gemm takes (XLA's OperandUpcaster, where the result stays the same): both
 * operands are first converted to the type kiln_gemm_upcast_types (fusion_wrapper.h) picks,
 * and a narrower gemm result is converted to the dot's type after (bf16 x s4 and f8e5m2 x
 * f8e4m3fn -> bf16 in bf16, f16 x bf16 -> f32 in f32, s8 x s8 -> s64 through s32). A transpose
 * only the dot reads stays above the convert, so it still folds. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "compiler/passes/fusion_util.h"
#include "compiler/passes/fusion_wrapper.h"
#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pass_util.h"

#define MAXR 32

/* One operand seen through an optional folded transpose: `x` is the array the dot would
 * read; batch[i] / contr[i] are x's dims for the dot's i-th batch / contracting pair. */
typedef struct operand_view {
  kiln_hlo_instruction_t *x;
  int rank, nb, nc;
  int64_t batch[MAXR], contr[MAXR];
} operand_view_t;

/* How one operand becomes a gemm operand. */
typedef struct operand_plan {
  operand_view_t v;
  bool transpose;        /* x must be transposed first */
  bool contracting_last; /* the form: [B, F, C] (else [B, C, F]) */
  int64_t cost;          /* elements a transpose moves (0: none) */
} operand_plan_t;

static bool default_or_none(const kiln_shape_t *s) {
  return kiln_shape_is_array(s) && !kiln_shape_is_dynamic(s) && s->rank <= MAXR &&
         (!s->has_layout || kiln_layout_is_default(&s->layout));
}

static bool list_ok(const kiln_i64_list_t *l, int rank) {
  if (l->n > rank) return false;
  for (int i = 0; i < l->n; i++) {
    if (l->v[i] < 0 || l->v[i] >= rank) return false;
    for (int j = 0; j < i; j++)
      if (l->v[j] == l->v[i]) return false;
  }
  return true;
}

/* The view of `x` as the dot reads it: batch / contracting dims from the lists. */
static void view_direct(operand_view_t *v, kiln_hlo_instruction_t *x, const kiln_i64_list_t *b,
                        const kiln_i64_list_t *c) {
  v->x = x;
  v->rank = x->shape->rank;
  v->nb = b->n;
  v->nc = c->n;
  for (int i = 0; i < b->n; i++) v->batch[i] = b->v[i];
  for (int i = 0; i < c->n; i++) v->contr[i] = c->v[i];
}

static int free_dims(const operand_view_t *v, int64_t *out);

/* `v` read through the transpose it points at: result dim d of transpose(y) is y's dim
 * perm[d]. False when x is no foldable transpose, or when the transpose reorders the free
 * dims (the dot's result lists them in operand order). */
static bool view_fold(operand_view_t *out, const operand_view_t *v) {
  const kiln_hlo_instruction_t *t = v->x;
  if (t->opcode != KILN_OP_TRANSPOSE || t->num_operands != 1 || t->dimensions.n != v->rank)
    return false;
  if (!default_or_none(t->operands[0]->shape)) return false;
  int64_t f[MAXR];
  int nf = free_dims(v, f);
  for (int i = 1; i < nf; i++)
    if (t->dimensions.v[f[i - 1]] > t->dimensions.v[f[i]]) return false;
  *out = *v;
  out->x = t->operands[0];
  for (int i = 0; i < v->nb; i++) out->batch[i] = t->dimensions.v[v->batch[i]];
  for (int i = 0; i < v->nc; i++) out->contr[i] = t->dimensions.v[v->contr[i]];
  return true;
}

/* The free dims of `v` in ascending order; returns how many. */
static int free_dims(const operand_view_t *v, int64_t *out) {
  bool used[MAXR] = {false};
  for (int i = 0; i < v->nb; i++) used[v->batch[i]] = true;
  for (int i = 0; i < v->nc; i++) used[v->contr[i]] = true;
  int n = 0;
  for (int d = 0; d < v->rank; d++)
    if (!used[d]) out[n++] = d;
  return n;
}

/* Whether x's dims are, in order, `want` (n entries). */
static bool in_order(const int64_t *want, int n, int offset) {
  for (int i = 0; i < n; i++)
    if (want[i] != offset + i) return false;
  return true;
}

/* Plans operand `v` with its contracting pairs taken in the order `pair_order`:
 * prefers a form x already has (no transpose), else the form `natural_contracting_last`. */
static void plan_operand(operand_plan_t *p, const operand_view_t *v, const int *pair_order,
                         bool natural_contracting_last) {
  p->v = *v;
  for (int i = 0; i < v->nc; i++) p->v.contr[i] = v->contr[pair_order[i]];
  int64_t f[MAXR];
  int nf = free_dims(&p->v, f);
  bool batch_ok = in_order(p->v.batch, v->nb, 0);
  bool fc = batch_ok && in_order(f, nf, v->nb) && in_order(p->v.contr, v->nc, v->nb + nf);
  bool cf = batch_ok && in_order(p->v.contr, v->nc, v->nb) && in_order(f, nf, v->nb + v->nc);
  p->transpose = !fc && !cf;
  p->contracting_last =
      p->transpose ? natural_contracting_last : (fc && cf ? natural_contracting_last : fc);
  p->cost = p->transpose ? kiln_shape_num_elements(v->x->shape) : 0;
}

/* Builds the gemm operand of plan `p`: transpose (if planned), then a reshape collapsing the
 * contracting dims into one (if there are not exactly one). Sets *kdim to its contracting
 * dim. */
static kiln_hlo_instruction_t *build_operand(kiln_builder_t *b, const operand_plan_t *p,
                                             int64_t *kdim) {
  const operand_view_t *v = &p->v;
  int64_t f[MAXR], perm[MAXR];
  int nf = free_dims(v, f), n = 0;
  for (int i = 0; i < v->nb; i++) perm[n++] = v->batch[i];
  if (!p->contracting_last)
    for (int i = 0; i < v->nc; i++) perm[n++] = v->contr[i];
  for (int i = 0; i < nf; i++) perm[n++] = f[i];
  if (p->contracting_last)
    for (int i = 0; i < v->nc; i++) perm[n++] = v->contr[i];
  kiln_hlo_instruction_t *x = p->transpose ? kiln_builder_transpose(b, v->x, perm) : v->x;
  *kdim = p->contracting_last ? v->nb + nf : v->nb;
  if (v->nc == 1 || !x) return x;
  int64_t dims[MAXR + 1], k = 1;
  const int64_t *xd = v->x->shape->dims;
  for (int i = 0; i < v->nc; i++) k *= xd[v->contr[i]];
  n = 0;
  for (int i = 0; i < v->nb; i++) dims[n++] = xd[v->batch[i]];
  if (!p->contracting_last) dims[n++] = k;
  for (int i = 0; i < nf; i++) dims[n++] = xd[f[i]];
  if (p->contracting_last) dims[n++] = k;
  return kiln_builder_reshape(b, x, n, dims);
}

static kiln_i64_list_t iota_list(kiln_hlo_module_t *m, int n, bool *ok) {
  kiln_i64_list_t l = {0, NULL};
  if (!n) return l;
  l.v = kiln_arena_alloc(&m->arena, sizeof(int64_t) * (size_t)n);
  if (!l.v) {
    *ok = false;
    return l;
  }
  for (int i = 0; i < n; i++) l.v[i] = i;
  l.n = n;
  return l;
}

static kiln_i64_list_t one_list(kiln_hlo_module_t *m, int64_t v, bool *ok) {
  kiln_i64_list_t l = iota_list(m, 1, ok);
  if (l.v) l.v[0] = v;
  return l;
}

/* The best plan for one side over the folded and unfolded views. */
static void plan_side(operand_plan_t *best, const operand_view_t *direct, const int *order,
                      bool natural_contracting_last) {
  plan_operand(best, direct, order, natural_contracting_last);
  operand_view_t folded;
  if (!view_fold(&folded, direct)) return;
  operand_plan_t p;
  plan_operand(&p, &folded, order, natural_contracting_last);
  /* A folded transpose that needs no transpose of its own is free; otherwise keep it. */
  if (!p.transpose) *best = p;
}

/* Rewrites `dot` into a gemm form when that form is a gemm; sets *changed. */
static kiln_status canonicalize(kiln_hlo_instruction_t *dot, kiln_pass_effects_t *effects,
                                bool *changed) {
  kiln_hlo_module_t *m = dot->parent->module;
  const kiln_dot_dnums_t *dn = &dot->dot_dnums;
  kiln_hlo_instruction_t *lhs = dot->operands[0], *rhs = dot->operands[1];
  int lr = lhs->shape->rank, rr = rhs->shape->rank;
  if (dn->lhs_batch.n != dn->rhs_batch.n || dn->lhs_contracting.n != dn->rhs_contracting.n ||
      !list_ok(&dn->lhs_batch, lr) || !list_ok(&dn->rhs_batch, rr) ||
      !list_ok(&dn->lhs_contracting, lr) || !list_ok(&dn->rhs_contracting, rr))
    return NULL;
  int nc = dn->lhs_contracting.n;
  operand_view_t lv, rv;
  view_direct(&lv, lhs, &dn->lhs_batch, &dn->lhs_contracting);
  view_direct(&rv, rhs, &dn->rhs_batch, &dn->rhs_contracting);

  /* Contracting pairs as listed, as lhs stores them, as rhs stores them: the cheapest. */
  int orders[3][MAXR];
  for (int o = 0; o < 3; o++) {
    for (int i = 0; i < nc; i++) orders[o][i] = i;
    const int64_t *key = o == 1 ? dn->lhs_contracting.v : dn->rhs_contracting.v;
    for (int i = 1; o && i < nc; i++) /* insertion sort of the pair indices by key */
      for (int j = i; j > 0 && key[orders[o][j - 1]] > key[orders[o][j]]; j--) {
        int t = orders[o][j];
        orders[o][j] = orders[o][j - 1];
        orders[o][j - 1] = t;
      }
  }
  operand_plan_t lp = {0}, rp = {0};
  int64_t best = -1;
  for (int o = 0; o < 3; o++) {
    operand_plan_t a, b;
    plan_side(&a, &lv, orders[o], true);
    plan_side(&b, &rv, orders[o], false);
    if (best < 0 || a.cost + b.cost < best) best = a.cost + b.cost, lp = a, rp = b;
  }
  /* Already a gemm and nothing to fold away: leave it. */
  bool folds = lp.v.x != lhs || rp.v.x != rhs;
  if (kiln_fusion_wrapper_is_gemm(dot, NULL) && !folds) return NULL;

  kiln_builder_t b;
  kiln_builder_init(&b, dot->parent, dot->name, dot->shape->has_layout);
  int64_t lk = 0, rk = 0;
  kiln_hlo_instruction_t *ops[2] = {build_operand(&b, &lp, &lk), build_operand(&b, &rp, &rk)};
  bool ok = ops[0] && ops[1] && !b.failed;
  kiln_dot_dnums_t nd = {{0, NULL}, {0, NULL}, {0, NULL}, {0, NULL}};
  if (ok) {
    nd.lhs_batch = iota_list(m, dn->lhs_batch.n, &ok);
    nd.rhs_batch = iota_list(m, dn->rhs_batch.n, &ok);
    nd.lhs_contracting = one_list(m, lk, &ok);
    nd.rhs_contracting = one_list(m, rk, &ok);
  }
  if (!ok)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                            "dot_canonicalizer: out of memory rewriting '%s'", dot->name);
  kiln_hlo_instruction_t *old_ops[2] = {lhs, rhs};
  kiln_dot_dnums_t old_dn = *dn;
  bool had_dn = dot->has_dot_dnums;
  kiln_hlo_instruction_set_operands(dot, 2, ops);
  dot->dot_dnums = nd;
  dot->has_dot_dnums = true;
  if (!kiln_fusion_wrapper_is_gemm(dot, NULL)) {
    /* Not a gemm even so (element types): as it was. */
    kiln_hlo_instruction_set_operands(dot, 2, old_ops);
    dot->dot_dnums = old_dn;
    dot->has_dot_dnums = had_dn;
  } else {
    *changed = true;
  }
  /* What became dead: the unused new operands, or the folded transposes (once each). */
  kiln_hlo_instruction_t *maybe_dead[4] = {ops[0], ops[1], old_ops[0], old_ops[1]};
  for (int i = 0; i < 4; i++) {
    bool seen = false;
    for (int j = 0; j < i; j++) seen = seen || maybe_dead[j] == maybe_dead[i];
    if (!seen) kiln_pass_remove_if_dead(maybe_dead[i], effects);
  }
  return NULL;
}

/* kiln_gemm_upcast_types for `dot` (k: the product of its contracting dimensions). */
static bool upcast_types(const kiln_hlo_instruction_t *dot, kiln_gemm_types_t types,
                         kiln_elem_type_t *op, kiln_elem_type_t *res) {
  double k = 1;
  for (int i = 0; i < dot->dot_dnums.lhs_contracting.n; i++)
    k *= (double)dot->operands[0]->shape->dims[dot->dot_dnums.lhs_contracting.v[i]];
  return kiln_gemm_upcast_types(dot->operands[0]->shape->type, dot->operands[1]->shape->type,
                                dot->shape->type, k, types, op, res);
}

/* x converted to `type`; a transpose the dot alone reads stays outermost (convert below it),
 * so canonicalize can still fold it into the gemm's flags. */
static kiln_hlo_instruction_t *converted(kiln_builder_t *b, kiln_hlo_instruction_t *x,
                                         kiln_elem_type_t type) {
  if (x->opcode != KILN_OP_TRANSPOSE || x->num_operands != 1 || x->users.len != 1 ||
      x->dimensions.n != x->shape->rank)
    return kiln_builder_convert(b, x, type);
  return kiln_builder_transpose(b, kiln_builder_convert(b, x->operands[0], type), x->dimensions.v);
}

/* Rewrites `dot` in place to operand types a gemm takes when upcast_types finds them: converts
 * before it, and a narrower result converted after it (which takes over the dot's uses). */
static kiln_status upcast(kiln_hlo_instruction_t *dot, kiln_gemm_types_t types,
                          kiln_pass_effects_t *effects, bool *changed) {
  kiln_elem_type_t op, res;
  if (!upcast_types(dot, types, &op, &res)) return NULL;
  kiln_builder_t b;
  kiln_builder_init(&b, dot->parent, dot->name, dot->shape->has_layout);
  kiln_hlo_instruction_t *old[2] = {dot->operands[0], dot->operands[1]}, *ops[2];
  for (int i = 0; i < 2; i++)
    ops[i] = old[i]->shape->type == op ? old[i]
             : i && old[1] == old[0]   ? ops[0] /* dot(x, x): one convert */
                                       : converted(&b, old[i], op);
  kiln_hlo_instruction_t *out = NULL;
  kiln_shape_t *narrow = NULL;
  if (res != dot->shape->type && !b.failed) {
    out = kiln_builder_convert(&b, dot, dot->shape->type);
    narrow = kiln_shape_clone(&dot->parent->module->arena, dot->shape);
  }
  if (!ops[0] || !ops[1] || b.failed || (res != dot->shape->type && (!out || !narrow)))
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                            "dot_canonicalizer: out of memory converting the operands of '%s'",
                            dot->name);
  kiln_hlo_instruction_set_operands(dot, 2, ops);
  for (int i = 0; i < 2 && old[0] != old[1]; i++) kiln_pass_remove_if_dead(old[i], effects);
  if (out) { /* the convert takes the dot's uses (its own operand restored after) */
    narrow->type = res;
    dot->shape = narrow;
    kiln_hlo_instruction_replace_all_uses(dot, out);
    kiln_hlo_instruction_set_operands(out, 1, &dot);
  }
  *changed = true;
  return NULL;
}

static bool candidate(const kiln_hlo_instruction_t *in) {
  if (in->opcode != KILN_OP_DOT || in->num_operands != 2) return false;
  if (in->num_control_predecessors || in->control_successors.len) return false;
  const kiln_shape_t *s[3] = {in->shape, in->operands[0]->shape, in->operands[1]->shape};
  for (int i = 0; i < 3; i++)
    if (!default_or_none(s[i]) || kiln_shape_num_elements(s[i]) == 0) return false;
  return true;
}

kiln_status kiln_pass_dot_canonicalizer(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                        bool *changed) {
  if (opts && opts->no_gemm_library) return NULL;
  kiln_gemm_types_t types = kiln_gemm_types_of(opts);
  size_t nc = 0;
  kiln_hlo_computation_t **comps = kiln_fusion_sequential_computations(m, &nc);
  kiln_pass_effects_t effects;
  kiln_pass_effects_init(&effects);
  kiln_status st = NULL;
  bool any = false;
  KILN_VEC(kiln_hlo_instruction_t *) dots = {0};
  for (size_t i = 0; i < nc && !st; i++) {
    kiln_hlo_computation_t *c = comps[i];
    kiln_vec_clear(&dots);
    for (size_t k = 0; k < c->instructions.len; k++)
      if (candidate(c->instructions.data[k])) kiln_vec_push(&dots, c->instructions.data[k]);
    bool here = false;
    for (size_t k = 0; k < dots.len && !st; k++) {
      st = upcast(dots.data[k], types, &effects, &here);
      if (!st) st = canonicalize(dots.data[k], &effects, &here);
    }
    if (here) kiln_hlo_computation_sort_post_order(c);
    any = any || here;
  }
  kiln_vec_free(&dots);
  kiln_pass_effects_free(&effects);
  kiln_free(comps);
  if (changed) *changed = *changed || any;
  return st;
}
