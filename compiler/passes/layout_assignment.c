/* Layout assignment; see layout.h.
 *
 * One walk per computation, callers first for parameters and callees first for results:
 *   1. parameters get the layouts the caller passes (entry: entry_computation_layout, else
 *      the written layout, else the default);
 *   2. forward, in post order, each instruction picks a layout from its operands (its
 *      called computations are walked when it is reached, with its operands' layouts);
 *      broadcasts, iotas and constants wait ("weak");
 *   3. backward, each weak instruction takes the layout most of its users ask for;
 *   4. every operand whose layout differs from what its user requires gets a `copy`.
 * Computations nothing reached (async bodies, reducers, unreachable ones) are walked last
 * with their own parameter layouts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hashmap.h"
#include "base/log.h"
#include "compiler/passes/layout.h"
#include "compiler/passes/layout_util.h"
#include "compiler/passes/pass.h"

typedef struct copy_cache {
  const kiln_shape_t *want;
  kiln_hlo_instruction_t *result;
  struct copy_cache *next;
} copy_cache_t;

typedef struct la {
  kiln_hlo_module_t *m;
  kiln_arena_t *a;
  kiln_ptrmap_t orig;   /* instruction -> its shape before the pass */
  kiln_ptrmap_t done;   /* computation -> walked */
  kiln_ptrmap_t weak;   /* instruction -> layout not decided yet */
  kiln_ptrmap_t copies; /* value -> copy_cache_t list */
  int copies_inserted;
  bool changed;
} la_t;

static void walk(la_t *la, kiln_hlo_computation_t *c, kiln_shape_t *const *params);
static void coerce_root(la_t *la, kiln_hlo_computation_t *c, kiln_shape_t *want);

static bool is_weak(const la_t *la, const kiln_hlo_instruction_t *x) {
  return kiln_ptrmap_get(&la->weak, x) != NULL;
}

static kiln_shape_t *orig_shape(la_t *la, const kiln_hlo_instruction_t *x) {
  kiln_shape_t *s = kiln_ptrmap_get(&la->orig, x);
  return s ? s : x->shape;
}

static void set_shape(la_t *la, kiln_hlo_instruction_t *x, kiln_shape_t *s) {
  if (x->shape == s) return;
  if (!kiln_shape_equal(x->shape, s, true) || x->shape->has_layout != s->has_layout)
    la->changed = true;
  x->shape = s;
}

static bool rank_ok(const kiln_shape_t *s) {
  return kiln_shape_is_array(s) && s->rank <= KILN_LAYOUT_MAX_RANK;
}

static kiln_hlo_instruction_t *make(la_t *la, kiln_hlo_computation_t *c, kiln_hlo_opcode_t op,
                                    kiln_shape_t *shape, const char *hint, int n,
                                    kiln_hlo_instruction_t *const *ops) {
  kiln_hlo_instruction_t *in =
      kiln_hlo_instruction_create(c, op, shape, kiln_hlo_module_unique_name(la->m, hint));
  kiln_hlo_instruction_set_operands(in, n, ops);
  la->changed = true;
  return in;
}

/* ---- rules ---- */

/* Ops that keep their operands' layout: elementwise ones and data movement that keeps the
 * rank and the meaning of each dimension. */
static bool layout_preserving(kiln_hlo_opcode_t op) {
  if (kiln_hlo_opcode_is_elementwise(op) && op != KILN_OP_COPY) return true;
  switch (op) {
    case KILN_OP_SLICE:
    case KILN_OP_PAD:
    case KILN_OP_REVERSE:
    case KILN_OP_DYNAMIC_SLICE:
    case KILN_OP_DYNAMIC_UPDATE_SLICE:
    case KILN_OP_CONCATENATE:
    case KILN_OP_SORT:
    case KILN_OP_REDUCE_WINDOW:
    case KILN_OP_SELECT_AND_SCATTER:
    case KILN_OP_BITCAST_CONVERT:
      return true;
    default:
      return false;
  }
}

static bool is_weak_op(const kiln_hlo_instruction_t *x) {
  if (!rank_ok(x->shape) || x->shape->rank < 2) return false;
  return x->opcode == KILN_OP_BROADCAST || x->opcode == KILN_OP_IOTA ||
         x->opcode == KILN_OP_CONSTANT;
}

/* The first array leaf of a shape (the result of sort/reduce-window may be a tuple). */
static const kiln_shape_t *first_leaf(const kiln_shape_t *s) {
  while (kiln_shape_is_tuple(s) && s->num_elements > 0) s = s->elements[0];
  return s;
}

static bool untiled(const kiln_shape_t *s) {
  return !kiln_layout_is_tiled(s);
}
static bool written(const kiln_shape_t *s) {
  return !kiln_shape_is_array(s) || kiln_layout_has_plain_m2m(s);
}
static bool plain_default(const kiln_shape_t *s) {
  return !kiln_shape_is_array(s) || !s->has_layout || kiln_layout_is_default(&s->layout);
}

static bool all_leaves(const kiln_shape_t *s, bool (*pred)(const kiln_shape_t *)) {
  if (!kiln_shape_is_tuple(s)) return pred(s);
  for (int i = 0; i < s->num_elements; i++)
    if (!all_leaves(s->elements[i], pred)) return false;
  return true;
}

static bool operands_default(const kiln_hlo_instruction_t *x) {
  for (int i = 0; i < x->num_operands; i++)
    if (!all_leaves(x->operands[i]->shape, plain_default)) return false;
  return true;
}

/* Result shape with every array leaf (all of rank `rank`) laid out as m2m. */
static kiln_shape_t *leaves_with_m2m(la_t *la, kiln_shape_t *s, const int64_t *m2m, int rank) {
  if (kiln_shape_is_tuple(s)) {
    kiln_shape_t **el = kiln_arena_alloc(la->a, sizeof *el * (size_t)(s->num_elements ? s->num_elements : 1));
    for (int i = 0; i < s->num_elements; i++) el[i] = leaves_with_m2m(la, s->elements[i], m2m, rank);
    return kiln_shape_make_tuple(la->a, s->num_elements, el);
  }
  if (!kiln_shape_is_array(s)) return s;
  if (s->rank != rank) return kiln_layout_all_default(la->a, s);
  return kiln_layout_with_m2m(la->a, s, m2m);
}

/* Most common layout among decided operands of rank `rank` (first one wins ties). */
static bool vote_operands(la_t *la, const kiln_hlo_instruction_t *x, int rank, int64_t *m2m) {
  int best = 0;
  for (int i = 0; i < x->num_operands; i++) {
    const kiln_hlo_instruction_t *o = x->operands[i];
    if (!rank_ok(o->shape) || o->shape->rank != rank || is_weak(la, o)) continue;
    int64_t cand[KILN_LAYOUT_MAX_RANK];
    kiln_layout_m2m(o->shape, cand);
    int votes = 0;
    for (int k = 0; k < x->num_operands; k++) {
      const kiln_hlo_instruction_t *q = x->operands[k];
      if (!rank_ok(q->shape) || q->shape->rank != rank || is_weak(la, q)) continue;
      int64_t other[KILN_LAYOUT_MAX_RANK];
      kiln_layout_m2m(q->shape, other);
      votes += memcmp(cand, other, sizeof(int64_t) * (size_t)rank) == 0;
    }
    if (votes > best) {
      best = votes;
      memcpy(m2m, cand, sizeof(int64_t) * (size_t)rank);
    }
  }
  return best > 0;
}

static kiln_hlo_computation_t *callee(const kiln_hlo_instruction_t *x) {
  if (x->opcode == KILN_OP_FUSION) return kiln_hlo_instruction_called(x, "calls");
  if (x->opcode == KILN_OP_CALL) return kiln_hlo_instruction_called(x, "to_apply");
  return NULL;
}

static kiln_hlo_computation_t *branch(const kiln_hlo_instruction_t *x, int k) {
  int seen = 0;
  for (int g = 0; g < x->num_called_groups; g++) {
    const kiln_called_group_t *cg = &x->called_groups[g];
    if (strcmp(cg->key, "branch_computations") && strcmp(cg->key, "true_computation") &&
        strcmp(cg->key, "false_computation"))
      continue;
    if (k < seen + cg->n) return cg->comps[k - seen];
    seen += cg->n;
  }
  return NULL;
}

static int num_branches(const kiln_hlo_instruction_t *x) {
  int n = 0;
  while (branch(x, n)) n++;
  return n;
}

/* The layout operand i must have for `x` as laid out now; NULL when any will do. */
static kiln_shape_t *required(la_t *la, const kiln_hlo_instruction_t *x, int i) {
  kiln_hlo_instruction_t *o = x->operands[i];
  kiln_shape_t *os = o->shape;
  switch (x->opcode) {
    case KILN_OP_BITCAST:
      return kiln_layout_fill_default(la->a, orig_shape(la, o));
    case KILN_OP_TUPLE:
    case KILN_OP_GET_TUPLE_ELEMENT:
    case KILN_OP_TRANSPOSE:
    case KILN_OP_BROADCAST:
    case KILN_OP_RESHAPE:
    case KILN_OP_COPY:
    case KILN_OP_OPTIMIZATION_BARRIER:
    case KILN_OP_ADD_DEPENDENCY:
    case KILN_OP_PARAMETER:
      return NULL;
    case KILN_OP_REDUCE: {
      int n = x->num_operands / 2;
      if (i == 0 || i >= n || !rank_ok(os) || !rank_ok(x->operands[0]->shape)) return NULL;
      int64_t m2m[KILN_LAYOUT_MAX_RANK];
      kiln_layout_m2m(x->operands[0]->shape, m2m);
      return kiln_layout_with_m2m(la->a, os, m2m);
    }
    case KILN_OP_CUSTOM_CALL: {
      /* operand_layout_constraints: the layouts the handler reads its operands in */
      const char *raw = kiln_hlo_instruction_raw_attr(x, "operand_layout_constraints");
      kiln_shape_t **want = NULL;
      int n = 0;
      kiln_status st = raw ? kiln_hlo_parse_shape_list(la->m, raw, strlen(raw), &want, &n) : NULL;
      if (st) { /* the verifier names a malformed list; here it is no constraint */
        kiln_status_free(st);
        n = 0;
      }
      if (i < n && rank_ok(os) && kiln_shape_is_array(want[i]) && want[i]->has_layout &&
          want[i]->rank == os->rank) {
        int64_t m2m[KILN_LAYOUT_MAX_RANK];
        kiln_layout_m2m(want[i], m2m);
        return kiln_layout_with_m2m(la->a, os, m2m);
      }
      break;
    }
    case KILN_OP_FUSION:
    case KILN_OP_CALL: {
      kiln_hlo_computation_t *c = callee(x);
      return c && i < c->num_parameters && c->parameters[i] ? c->parameters[i]->shape : NULL;
    }
    case KILN_OP_WHILE: {
      kiln_hlo_computation_t *b = kiln_hlo_instruction_called(x, "body");
      return b && b->num_parameters == 1 && b->parameters[0] ? b->parameters[0]->shape : NULL;
    }
    case KILN_OP_CONDITIONAL: {
      kiln_hlo_computation_t *b = i > 0 ? branch(x, i - 1) : NULL;
      return b && b->num_parameters == 1 && b->parameters[0] ? b->parameters[0]->shape : NULL;
    }
    default:
      break;
  }
  if (layout_preserving(x->opcode)) {
    const kiln_shape_t *r = first_leaf(x->shape);
    if (!rank_ok(os) || !rank_ok(r) || os->rank != r->rank || os->rank == 0) return NULL;
    int64_t m2m[KILN_LAYOUT_MAX_RANK];
    kiln_layout_m2m(r, m2m);
    return kiln_layout_with_m2m(la->a, os, m2m);
  }
  /* dot, convolution, custom-call, gather, scatter, ...: default array operands. */
  if (!kiln_shape_is_array(os)) return NULL;
  return kiln_layout_all_default(la->a, os);
}

/* Gives `x` its layout from its operands (and walks what it calls). */
static void assign(la_t *la, kiln_hlo_instruction_t *x) {
  kiln_shape_t *s = x->shape, *orig = orig_shape(la, x);
  int64_t m2m[KILN_LAYOUT_MAX_RANK];
  kiln_hlo_instruction_t *o0 = x->num_operands ? x->operands[0] : NULL;
  bool o0_known = o0 && rank_ok(o0->shape) && !is_weak(la, o0);
  switch (x->opcode) {
    case KILN_OP_PARAMETER:
      return;
    case KILN_OP_BITCAST:
      set_shape(la, x, kiln_layout_fill_default(la->a, orig));
      return;
    case KILN_OP_COPY:
      if (rank_ok(orig) && orig->has_layout) set_shape(la, x, orig);
      else if (o0_known && rank_ok(s)) set_shape(la, x, kiln_layout_with_m2m(la->a, s, (kiln_layout_m2m(o0->shape, m2m), m2m)));
      else set_shape(la, x, kiln_layout_all_default(la->a, s));
      return;
    case KILN_OP_GET_TUPLE_ELEMENT:
      if (o0 && kiln_shape_is_tuple(o0->shape) && x->tuple_index >= 0 &&
          x->tuple_index < o0->shape->num_elements)
        set_shape(la, x, o0->shape->elements[x->tuple_index]);
      return;
    case KILN_OP_TUPLE:
    case KILN_OP_OPTIMIZATION_BARRIER: {
      if (x->opcode == KILN_OP_OPTIMIZATION_BARRIER) {
        if (o0) set_shape(la, x, o0->shape);
        return;
      }
      kiln_shape_t **el = kiln_arena_alloc(la->a, sizeof *el * (size_t)(x->num_operands ? x->num_operands : 1));
      for (int i = 0; i < x->num_operands; i++) el[i] = x->operands[i]->shape;
      set_shape(la, x, kiln_shape_make_tuple(la->a, x->num_operands, el));
      return;
    }
    case KILN_OP_ADD_DEPENDENCY:
      if (o0) set_shape(la, x, o0->shape);
      return;
    case KILN_OP_TRANSPOSE:
      if (o0_known && rank_ok(s) && x->dimensions.n == s->rank) {
        int64_t om[KILN_LAYOUT_MAX_RANK], inv[KILN_LAYOUT_MAX_RANK];
        kiln_layout_m2m(o0->shape, om);
        for (int j = 0; j < s->rank; j++) inv[x->dimensions.v[j]] = j;
        for (int k = 0; k < s->rank; k++) m2m[k] = inv[om[k]];
        set_shape(la, x, kiln_layout_with_m2m(la->a, s, m2m));
      } else {
        set_shape(la, x, kiln_layout_all_default(la->a, s));
      }
      return;
    case KILN_OP_RESHAPE:
      if (o0_known && rank_ok(s)) {
        int64_t om[KILN_LAYOUT_MAX_RANK];
        kiln_layout_m2m(o0->shape, om);
        if (kiln_layout_reshape_bitcast(o0->shape, om, s, NULL, m2m)) {
          set_shape(la, x, kiln_layout_with_m2m(la->a, s, m2m));
          return;
        }
      }
      set_shape(la, x, kiln_layout_all_default(la->a, s));
      return;
    case KILN_OP_REDUCE: {
      const kiln_shape_t *in = o0 ? o0->shape : NULL;
      const kiln_shape_t *leaf = first_leaf(s);
      if (o0_known && rank_ok(leaf) && in->rank <= KILN_LAYOUT_MAX_RANK) {
        bool reduced[KILN_LAYOUT_MAX_RANK] = {0};
        for (int i = 0; i < x->dimensions.n; i++)
          if (x->dimensions.v[i] >= 0 && x->dimensions.v[i] < in->rank) reduced[x->dimensions.v[i]] = true;
        int64_t om[KILN_LAYOUT_MAX_RANK], out_of[KILN_LAYOUT_MAX_RANK];
        kiln_layout_m2m(in, om);
        int kept = 0;
        for (int d = 0; d < in->rank; d++) out_of[d] = reduced[d] ? -1 : kept++;
        if (kept == leaf->rank) {
          int k = 0;
          for (int q = 0; q < in->rank; q++)
            if (out_of[om[q]] >= 0) m2m[k++] = out_of[om[q]];
          set_shape(la, x, leaves_with_m2m(la, s, m2m, leaf->rank));
          return;
        }
      }
      set_shape(la, x, kiln_layout_all_default(la->a, s));
      return;
    }
    case KILN_OP_FUSION:
    case KILN_OP_CALL: {
      kiln_hlo_computation_t *c = callee(x);
      if (!c || c->num_parameters != x->num_operands) break;
      kiln_shape_t **ps = kiln_arena_alloc(la->a, sizeof *ps * (size_t)(x->num_operands ? x->num_operands : 1));
      for (int i = 0; i < x->num_operands; i++) ps[i] = x->operands[i]->shape;
      walk(la, c, ps);
      /* A fusion is one kernel: a transposition inside it moves nothing more, a copy
       * after it is another kernel. Its result keeps the layout written on it, as XLA's
       * fusions do; without one, the default when every operand has it (a transpose
       * inside does not pick a layout that makes it a bitcast, as it would unfused), else
       * what the operands give the root. */
      if (x->opcode == KILN_OP_FUSION && (all_leaves(orig, written) || operands_default(x))) {
        kiln_shape_t *want = kiln_layout_fill_default(la->a, orig);
        if (all_leaves(want, untiled) && kiln_shape_compatible(want, c->root->shape))
          coerce_root(la, c, want);
      }
      set_shape(la, x, c->root->shape);
      return;
    }
    case KILN_OP_WHILE: {
      kiln_hlo_computation_t *body = kiln_hlo_instruction_called(x, "body");
      kiln_hlo_computation_t *cond = kiln_hlo_instruction_called(x, "condition");
      if (!body || !cond || !o0 || body->num_parameters != 1 || cond->num_parameters != 1) break;
      kiln_shape_t *state = o0->shape;
      if (kiln_ptrmap_contains(&la->done, body)) state = body->parameters[0]->shape;
      walk(la, body, &state);
      walk(la, cond, &state);
      set_shape(la, x, body->parameters[0]->shape);
      return;
    }
    case KILN_OP_CONDITIONAL: {
      int nb = num_branches(x);
      if (nb == 0 || nb != x->num_operands - 1) break;
      for (int k = 0; k < nb; k++) {
        kiln_hlo_computation_t *b = branch(x, k);
        if (b->num_parameters != 1) return;
        kiln_shape_t *ps = x->operands[k + 1]->shape;
        walk(la, b, &ps);
      }
      set_shape(la, x, branch(x, 0)->root->shape);
      return;
    }
    case KILN_OP_CUSTOM_CALL:
      set_shape(la, x, kiln_layout_fill_default(la->a, orig));
      return;
    default:
      break;
  }
  if (is_weak_op(x)) {
    kiln_ptrmap_put(&la->weak, x, (void *)1);
    set_shape(la, x, kiln_layout_all_default(la->a, s));
    return;
  }
  if (layout_preserving(x->opcode)) {
    const kiln_shape_t *leaf = first_leaf(s);
    if (rank_ok(leaf) && vote_operands(la, x, leaf->rank, m2m)) {
      set_shape(la, x, leaves_with_m2m(la, s, m2m, leaf->rank));
      return;
    }
  }
  set_shape(la, x, kiln_layout_all_default(la->a, s));
}

/* A weak instruction takes the layout its users ask for most (default when some user
 * takes any layout — it then depends on this one's — or when it is the root). */
static void resolve_weak(la_t *la, kiln_hlo_instruction_t *x) {
  kiln_ptrmap_put(&la->weak, x, NULL);
  if (x->parent->root == x) return;
  int rank = x->shape->rank;
  int64_t votes[8][KILN_LAYOUT_MAX_RANK];
  int counts[8] = {0}, nv = 0;
  for (size_t u = 0; u < x->users.len; u++) {
    kiln_hlo_instruction_t *user = x->users.data[u];
    for (int i = 0; i < user->num_operands; i++) {
      if (user->operands[i] != x) continue;
      kiln_shape_t *want = required(la, user, i);
      if (!want || !rank_ok(want) || want->rank != rank || kiln_layout_is_tiled(want)) return;
      int64_t m2m[KILN_LAYOUT_MAX_RANK];
      kiln_layout_m2m(want, m2m);
      int k = 0;
      while (k < nv && memcmp(votes[k], m2m, sizeof(int64_t) * (size_t)rank)) k++;
      if (k == nv) {
        if (nv == 8) continue;
        memcpy(votes[nv++], m2m, sizeof(int64_t) * (size_t)rank);
      }
      counts[k]++;
    }
  }
  int best = -1;
  for (int k = 0; k < nv; k++)
    if (best < 0 || counts[k] > counts[best]) best = k;
  if (best >= 0) set_shape(la, x, kiln_layout_with_m2m(la->a, x->shape, votes[best]));
}

/* Returns a value with `v`'s contents laid out as `want` (a copy per array leaf that
 * differs; tuples are rebuilt). Copies are shared between users that want the same. */
static kiln_hlo_instruction_t *coerce(la_t *la, kiln_hlo_instruction_t *v, kiln_shape_t *want) {
  if (kiln_layout_phys_equal(v->shape, want)) return v;
  kiln_hlo_computation_t *c = v->parent;
  copy_cache_t *cached = kiln_ptrmap_get(&la->copies, v);
  for (copy_cache_t *e = cached; e; e = e->next)
    if (kiln_layout_phys_equal(e->want, want)) return e->result;
  kiln_hlo_instruction_t *r;
  if (kiln_shape_is_tuple(v->shape)) {
    int n = v->shape->num_elements;
    kiln_hlo_instruction_t **el = kiln_arena_alloc(la->a, sizeof *el * (size_t)(n ? n : 1));
    kiln_shape_t **shapes = kiln_arena_alloc(la->a, sizeof *shapes * (size_t)(n ? n : 1));
    for (int k = 0; k < n; k++) {
      kiln_hlo_instruction_t *e;
      if (v->opcode == KILN_OP_TUPLE && v->num_operands == n) {
        e = v->operands[k];
      } else {
        e = make(la, c, KILN_OP_GET_TUPLE_ELEMENT, v->shape->elements[k], "get-tuple-element", 1, &v);
        e->tuple_index = k;
      }
      el[k] = coerce(la, e, want->elements[k]);
      shapes[k] = el[k]->shape;
    }
    r = make(la, c, KILN_OP_TUPLE, kiln_shape_make_tuple(la->a, n, shapes), "tuple", n, el);
  } else {
    r = make(la, c, KILN_OP_COPY, want, "copy", 1, &v);
    la->copies_inserted++;
  }
  copy_cache_t *e = kiln_arena_alloc(la->a, sizeof *e);
  e->want = want;
  e->result = r;
  e->next = cached;
  kiln_ptrmap_put(&la->copies, v, e);
  return r;
}

static void coerce_root(la_t *la, kiln_hlo_computation_t *c, kiln_shape_t *want) {
  kiln_hlo_instruction_t *r = coerce(la, c->root, want);
  if (r != c->root) c->root = r;
}

static void walk(la_t *la, kiln_hlo_computation_t *c, kiln_shape_t *const *params) {
  if (kiln_ptrmap_contains(&la->done, c)) return;
  kiln_ptrmap_put(&la->done, c, (void *)1);
  for (int i = 0; i < c->num_parameters; i++) {
    kiln_hlo_instruction_t *p = c->parameters[i];
    if (!p) continue;
    kiln_shape_t *want = params && params[i] && kiln_shape_compatible(params[i], p->shape)
                             ? params[i]
                             : kiln_layout_fill_default(la->a, orig_shape(la, p));
    set_shape(la, p, want);
  }
  size_t n = 0;
  kiln_hlo_instruction_t **order = kiln_hlo_computation_post_order(c, &n);
  for (size_t i = 0; i < n; i++) assign(la, order[i]);
  for (size_t i = n; i-- > 0;)
    if (is_weak(la, order[i]))
      resolve_weak(la, order[i]);
  /* Callees whose roots must match a shared layout (while bodies, conditional branches). */
  for (size_t i = 0; i < n; i++) {
    kiln_hlo_instruction_t *x = order[i];
    if (x->opcode == KILN_OP_WHILE) {
      kiln_hlo_computation_t *body = kiln_hlo_instruction_called(x, "body");
      if (body && body->num_parameters == 1) coerce_root(la, body, body->parameters[0]->shape);
    } else if (x->opcode == KILN_OP_CONDITIONAL) {
      int nb = num_branches(x);
      for (int k = 1; k < nb; k++) coerce_root(la, branch(x, k), x->shape);
    }
  }
  for (size_t i = 0; i < n; i++) {
    kiln_hlo_instruction_t *x = order[i];
    for (int k = 0; k < x->num_operands; k++) {
      kiln_shape_t *want = required(la, x, k);
      if (!want) continue;
      kiln_hlo_instruction_t *o = x->operands[k];
      kiln_hlo_instruction_t *r = coerce(la, o, want);
      if (r == o) continue;
      kiln_hlo_instruction_t **ops = kiln_arena_alloc(la->a, sizeof *ops * (size_t)x->num_operands);
      memcpy(ops, x->operands, sizeof *ops * (size_t)x->num_operands);
      ops[k] = r;
      kiln_hlo_instruction_set_operands(x, x->num_operands, ops);
    }
  }
  kiln_free(order);
}

/* The layout an entry parameter or result must have: entry_computation_layout where it
 * gives one, else the instruction's own, else the default (leaf by leaf). */
static kiln_shape_t *entry_want(la_t *la, kiln_shape_t *given, kiln_shape_t *own) {
  if (!given || !kiln_shape_compatible(given, own) || kiln_shape_is_tuple(given) != kiln_shape_is_tuple(own))
    return kiln_layout_fill_default(la->a, own);
  if (kiln_shape_is_tuple(own)) {
    if (given->num_elements != own->num_elements) return kiln_layout_fill_default(la->a, own);
    kiln_shape_t **el = kiln_arena_alloc(la->a, sizeof *el * (size_t)(own->num_elements ? own->num_elements : 1));
    for (int i = 0; i < own->num_elements; i++)
      el[i] = entry_want(la, given->elements[i], own->elements[i]);
    return kiln_shape_make_tuple(la->a, own->num_elements, el);
  }
  if (kiln_shape_is_array(given) && given->has_layout && given->layout.rank == given->rank) {
    /* the entry layout's dims may lack dynamism markers: keep the instruction's dims */
    kiln_shape_t *r = kiln_shape_clone(la->a, own);
    r->has_layout = true;
    r->layout = given->layout;
    return r;
  }
  return kiln_layout_fill_default(la->a, own);
}

/* Clears the tiles of `s` and of its tuple elements; whether any had some. */
static bool drop_tiles(kiln_shape_t *s) {
  if (!s) return false;
  bool had = s->has_layout && s->layout.num_tiles > 0;
  if (had) {
    s->layout.num_tiles = 0;
    s->layout.tiles = NULL;
  }
  for (int i = 0; i < s->num_elements; i++) had |= drop_tiles(s->elements[i]);
  return had;
}

/* Tiled layouts (TPU's `{1,0:T(8,128)}`, written in modules and entry layouts) are dropped
 * first: kiln's devices keep every array untiled, in its minor-to-major order, and the
 * executable reports those layouts, so a client passes untiled bytes. A tile changes where
 * bytes lie, never a value. */
static bool drop_module_tiles(kiln_hlo_module_t *m) {
  bool had = false;
  for (size_t ci = 0; ci < m->computations.len; ci++) {
    kiln_hlo_computation_t *c = m->computations.data[ci];
    for (size_t i = 0; i < c->instructions.len; i++)
      had |= drop_tiles(c->instructions.data[i]->shape);
  }
  if (m->has_entry_layout) {
    for (int i = 0; i < m->num_entry_layout_params; i++)
      had |= drop_tiles(m->entry_layout_params[i]);
    had |= drop_tiles(m->entry_layout_result);
  }
  if (had) KILN_LOG_I("layout assignment: tiled layouts in %s kept untiled", m->name);
  return had;
}

kiln_status kiln_layout_assign(kiln_hlo_module_t *m, kiln_layout_assignment_stats_t *stats,
                               bool *changed) {
  if (!m->entry) return kiln_status_make(KILN_INVALID_ARGUMENT, "layout assignment: module has no entry");
  /* New instructions and shapes go to the module's arena: refuse up front, before changing
   * anything, when a parser-set bound leaves too little room (never fail half-way). */
  size_t need = (size_t)kiln_hlo_module_instruction_count(m) * 4096 + ((size_t)64 << 10);
  if (m->arena.limit && m->arena.total + need > m->arena.limit)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                            "layout assignment: module '%s' may need %zu more arena bytes than its bound allows",
                            m->name, need);
  la_t la = {.m = m, .a = &m->arena};
  la.changed = drop_module_tiles(m);
  kiln_ptrmap_init(&la.orig);
  kiln_ptrmap_init(&la.done);
  kiln_ptrmap_init(&la.weak);
  kiln_ptrmap_init(&la.copies);
  for (size_t ci = 0; ci < m->computations.len; ci++) {
    kiln_hlo_computation_t *c = m->computations.data[ci];
    for (size_t i = 0; i < c->instructions.len; i++)
      kiln_ptrmap_put(&la.orig, c->instructions.data[i], c->instructions.data[i]->shape);
  }
  kiln_hlo_computation_t *e = m->entry;
  kiln_shape_t **params = kiln_arena_alloc(la.a, sizeof *params * (size_t)(e->num_parameters ? e->num_parameters : 1));
  for (int i = 0; i < e->num_parameters; i++) {
    kiln_shape_t *given = m->has_entry_layout && i < m->num_entry_layout_params ? m->entry_layout_params[i] : NULL;
    params[i] = e->parameters[i] ? entry_want(&la, given, e->parameters[i]->shape) : NULL;
  }
  kiln_shape_t *result = entry_want(&la, m->has_entry_layout ? m->entry_layout_result : NULL,
                                    orig_shape(&la, e->root));
  walk(&la, e, params);
  coerce_root(&la, e, result);
  for (size_t ci = 0; ci < m->computations.len; ci++) walk(&la, m->computations.data[ci], NULL);
  for (size_t ci = 0; ci < m->computations.len; ci++)
    kiln_hlo_computation_sort_post_order(m->computations.data[ci]);
  if (m->has_entry_layout) {
    for (int i = 0; i < e->num_parameters && i < m->num_entry_layout_params; i++)
      if (e->parameters[i]) m->entry_layout_params[i] = e->parameters[i]->shape;
    m->entry_layout_result = e->root->shape;
  }
  if (stats) stats->copies_inserted = la.copies_inserted;
  if (la.copies_inserted) KILN_LOG_I("layout assignment: %d copies inserted in %s", la.copies_inserted, m->name);
  *changed = la.changed;
  kiln_ptrmap_free(&la.orig);
  kiln_ptrmap_free(&la.done);
  kiln_ptrmap_free(&la.weak);
  kiln_ptrmap_free(&la.copies);
  return NULL;
}

kiln_status kiln_pass_layout_assignment(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                        bool *changed) {
  return kiln_layout_assign(m, NULL, changed);
}
