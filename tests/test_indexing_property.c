/* Property test: random expressions and maps over small domains are simplified, and the
 * simplified map must agree with an independent evaluation of the original recipe at
 * every point of the original domain (points violating constraints excluded, and the
 * simplified domain must exclude exactly those). Deterministic (seeded PRNG). */
#include <inttypes.h>
#include <stdlib.h>

#include "tests/indexing_test_util.h"

enum { R_CONST, R_DIM, R_SYM, R_RT, R_ADD, R_SUB, R_MULC, R_MUL, R_FLOORDIV, R_CEILDIV, R_MOD, R_MIN, R_MAX };

typedef struct recipe {
  int op;
  int64_t v;
  struct recipe *a, *b;
} recipe_t;

typedef struct gen {
  idx_rng_t rng;
  kiln_affine_ctx_t *ctx;
  kiln_arena_t arena; /* recipes */
  int ndims, nsyms, nrts;
} gen_t;

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) q--;
  return q;
}

static int64_t recipe_eval(const recipe_t *r, const int64_t *d, const int64_t *s, const int64_t *rt) {
  switch (r->op) {
    case R_CONST: return r->v;
    case R_DIM: return d[r->v];
    case R_SYM: return s[r->v];
    case R_RT: return rt[r->v];
    default: break;
  }
  int64_t a = recipe_eval(r->a, d, s, rt);
  int64_t b = r->b ? recipe_eval(r->b, d, s, rt) : 0;
  switch (r->op) {
    case R_ADD: return a + b;
    case R_SUB: return a - b;
    case R_MULC: return a * r->v;
    case R_MUL: return a * b;
    case R_FLOORDIV: return floor_div(a, r->v);
    case R_CEILDIV: return -floor_div(-a, r->v);
    case R_MOD: return a - r->v * floor_div(a, r->v);
    case R_MIN: return a < b ? a : b;
    case R_MAX: return a > b ? a : b;
  }
  return 0;
}

static recipe_t *mk(gen_t *g, int op, int64_t v, recipe_t *a, recipe_t *b) {
  recipe_t *r = kiln_arena_alloc(&g->arena, sizeof *r);
  r->op = op;
  r->v = v;
  r->a = a;
  r->b = b;
  return r;
}

static const int64_t kDivisors[] = {2, 3, 4, 8, 16, 6};
static const int64_t kCoefs[] = {1, 2, 3, 4, 8, 16, -1, -2, 6};

/* Builds a random recipe and the matching expression through the public constructors. */
static recipe_t *gen_expr(gen_t *g, int depth, kiln_affine_expr_t **out) {
  idx_rng_t *r = &g->rng;
  int choice = depth <= 0 ? (int)idx_rng_range(r, 0, 3) : (int)idx_rng_range(r, 0, 16);
  if (choice <= 3) {
    int kind = (int)idx_rng_range(r, 0, 9);
    if (kind == 0) {
      int64_t c = idx_rng_range(r, -5, 20);
      *out = kiln_affine_const(g->ctx, c);
      return mk(g, R_CONST, c, NULL, NULL);
    }
    if (kind <= 5 || (g->nsyms == 0 && g->nrts == 0)) {
      int64_t i = idx_rng_range(r, 0, g->ndims - 1);
      *out = kiln_affine_dim(g->ctx, i);
      return mk(g, R_DIM, i, NULL, NULL);
    }
    if (kind <= 8 && g->nsyms > 0) {
      int64_t i = idx_rng_range(r, 0, g->nsyms - 1);
      *out = kiln_affine_sym(g->ctx, i);
      return mk(g, R_SYM, i, NULL, NULL);
    }
    if (g->nrts > 0) {
      int64_t i = idx_rng_range(r, 0, g->nrts - 1);
      *out = kiln_affine_rt(g->ctx, i);
      return mk(g, R_RT, i, NULL, NULL);
    }
    *out = kiln_affine_dim(g->ctx, 0);
    return mk(g, R_DIM, 0, NULL, NULL);
  }
  kiln_affine_expr_t *ea, *eb;
  recipe_t *a = gen_expr(g, depth - 1, &ea), *b;
  switch (choice) {
    case 4:
    case 5:
    case 6:
      b = gen_expr(g, depth - 1, &eb);
      *out = kiln_affine_add(g->ctx, ea, eb);
      return mk(g, R_ADD, 0, a, b);
    case 7:
      b = gen_expr(g, depth - 1, &eb);
      *out = kiln_affine_sub(g->ctx, ea, eb);
      return mk(g, R_SUB, 0, a, b);
    case 8:
    case 9: {
      int64_t k = kCoefs[idx_rng_range(r, 0, 8)];
      *out = kiln_affine_mul_const(g->ctx, ea, k);
      return mk(g, R_MULC, k, a, NULL);
    }
    case 10: {
      b = gen_expr(g, 0, &eb);
      *out = kiln_affine_mul(g->ctx, ea, eb);
      return mk(g, R_MUL, 0, a, b);
    }
    case 11:
    case 12: {
      int64_t k = kDivisors[idx_rng_range(r, 0, 5)];
      *out = kiln_affine_floordiv(g->ctx, ea, kiln_affine_const(g->ctx, k));
      return mk(g, R_FLOORDIV, k, a, NULL);
    }
    case 13: {
      int64_t k = kDivisors[idx_rng_range(r, 0, 5)];
      *out = kiln_affine_ceildiv(g->ctx, ea, kiln_affine_const(g->ctx, k));
      return mk(g, R_CEILDIV, k, a, NULL);
    }
    case 14:
    case 15: {
      int64_t k = kDivisors[idx_rng_range(r, 0, 5)];
      *out = kiln_affine_mod(g->ctx, ea, kiln_affine_const(g->ctx, k));
      return mk(g, R_MOD, k, a, NULL);
    }
    default: {
      b = gen_expr(g, depth - 1, &eb);
      bool is_min = idx_rng_range(r, 0, 1) == 0;
      *out = is_min ? kiln_affine_min(g->ctx, ea, eb) : kiln_affine_max(g->ctx, ea, eb);
      return mk(g, is_min ? R_MIN : R_MAX, 0, a, b);
    }
  }
}

/* A linearize/delinearize-shaped expression: (x*k1 + y*k2 + z) with a div or mod. */
static recipe_t *gen_structured(gen_t *g, kiln_affine_expr_t **out) {
  idx_rng_t *r = &g->rng;
  kiln_affine_expr_t *e1, *e2;
  recipe_t *x = gen_expr(g, 0, &e1), *y = gen_expr(g, 1, &e2);
  int64_t k = kDivisors[idx_rng_range(r, 0, 5)];
  recipe_t *sum = mk(g, R_ADD, 0, mk(g, R_MULC, k, x, NULL), y);
  kiln_affine_expr_t *es = kiln_affine_add(g->ctx, kiln_affine_mul_const(g->ctx, e1, k), e2);
  int64_t d = kDivisors[idx_rng_range(r, 0, 5)] * (idx_rng_range(r, 0, 1) ? k : 1);
  if (idx_rng_range(r, 0, 1)) {
    *out = kiln_affine_floordiv(g->ctx, es, kiln_affine_const(g->ctx, d));
    recipe_t *q = mk(g, R_FLOORDIV, d, sum, NULL);
    if (idx_rng_range(r, 0, 1)) return q;
    /* Recombine: (s floordiv d) * d + s mod d. */
    *out = kiln_affine_add(g->ctx, kiln_affine_mul_const(g->ctx, *out, d),
                           kiln_affine_mod(g->ctx, es, kiln_affine_const(g->ctx, d)));
    return mk(g, R_ADD, 0, mk(g, R_MULC, d, q, NULL), mk(g, R_MOD, d, sum, NULL));
  }
  *out = kiln_affine_mod(g->ctx, es, kiln_affine_const(g->ctx, d));
  return mk(g, R_MOD, d, sum, NULL);
}

#define MAX_RES 3
#define MAX_CONS 2

typedef struct pmap {
  kiln_indexing_map_t *m;
  recipe_t *res[MAX_RES];
  recipe_t *cons[MAX_CONS];
  kiln_interval_t cons_range[MAX_CONS];
  int nres, ncons;
} pmap_t;

static void gen_map(gen_t *g, pmap_t *p) {
  idx_rng_t *r = &g->rng;
  g->ndims = (int)idx_rng_range(r, 1, 2);
  g->nsyms = (int)idx_rng_range(r, 0, 2);
  g->nrts = idx_rng_range(r, 0, 5) == 0 ? 1 : 0;
  kiln_indexing_map_t *m = kiln_indexing_map_create(g->ctx, (size_t)g->ndims, (size_t)g->nsyms,
                                                    (size_t)g->nrts);
  int counts[3] = {g->ndims, g->nsyms, g->nrts};
  for (int k = 0; k < 3; k++) {
    for (int i = 0; i < counts[k]; i++) {
      int64_t lo = idx_rng_range(r, 0, 3) == 0 ? idx_rng_range(r, -6, 2) : 0;
      int64_t hi = lo + idx_rng_range(r, 0, k == 0 ? 17 : 7);
      kiln_indexing_map_set_bounds(m, (kiln_indexing_var_kind_t)k, (size_t)i, lo, hi);
    }
  }
  p->m = m;
  p->nres = (int)idx_rng_range(r, 1, MAX_RES);
  for (int i = 0; i < p->nres; i++) {
    kiln_affine_expr_t *e;
    p->res[i] = idx_rng_range(r, 0, 2) == 0 ? gen_structured(g, &e) : gen_expr(g, 3, &e);
    kiln_indexing_map_add_result(m, e);
  }
  p->ncons = (int)idx_rng_range(r, 0, MAX_CONS);
  for (int i = 0; i < p->ncons; i++) {
    kiln_affine_expr_t *e;
    p->cons[i] = idx_rng_range(r, 0, 1) ? gen_structured(g, &e) : gen_expr(g, 2, &e);
    /* Centre the range on the value at a random point so most domains stay non-empty. */
    int64_t pt[8];
    for (int k = 0, j = 0; k < 3; k++)
      for (size_t i = 0; i < m->vars[k].len; i++, j++)
        pt[j] = idx_rng_range(r, m->vars[k].data[i].bounds.lo, m->vars[k].data[i].bounds.hi);
    int64_t v = recipe_eval(p->cons[i], pt, pt + g->ndims, pt + g->ndims + g->nsyms);
    int64_t lo = v - idx_rng_range(r, 0, 3), hi = v + idx_rng_range(r, 0, 6);
    if (idx_rng_range(r, 0, 4) == 0) hi = lo = v; /* point constraints, e.g. x mod k in [c, c] */
    p->cons_range[i] = (kiln_interval_t){lo, hi};
    /* add_constraint folds single-variable constraints into intervals; the recipe check
     * below applies them the same way either way. */
    kiln_indexing_map_add_constraint(m, e, lo, hi);
  }
}

typedef struct check_env {
  pmap_t *p;
  kiln_indexing_map_t *orig;   /* as built (unsimplified) */
  kiln_indexing_map_t *simp;
  uint64_t points, feasible;
  kiln_interval_t bounds[MAX_RES];
} check_env_t;

static bool in_box(const kiln_indexing_map_t *m, const int64_t *d, const int64_t *s, const int64_t *rt) {
  const int64_t *vals[3] = {d, s, rt};
  for (int k = 0; k < 3; k++)
    for (size_t i = 0; i < m->vars[k].len; i++)
      if (vals[k][i] < m->vars[k].data[i].bounds.lo || vals[k][i] > m->vars[k].data[i].bounds.hi)
        return false;
  return true;
}

static void fail_map(check_env_t *env, const char *what, const int64_t *d, const int64_t *s) {
  char *a = kiln_indexing_map_to_string(env->orig), *b = kiln_indexing_map_to_string(env->simp);
  fprintf(stderr, "%s\n  original:   %s\n  simplified: %s\n  at d0=%" PRId64 " s0=%" PRId64 "\n", what,
          a, b, d[0], env->simp->vars[1].len ? s[0] : 0);
  kiln_free(a);
  kiln_free(b);
  fail();
}

/* Enumerates the original box (before any tightening) as one big loop. */
static void check_all_points(check_env_t *env, const kiln_interval_t *box, size_t nd, size_t ns,
                             size_t nr) {
  size_t n = nd + ns + nr;
  int64_t vals[8];
  for (size_t j = 0; j < n; j++) vals[j] = box[j].lo;
  pmap_t *p = env->p;
  for (;;) {
    const int64_t *d = vals, *s = vals + nd, *rt = vals + nd + ns;
    bool feasible = true;
    for (int i = 0; i < p->ncons && feasible; i++) {
      int64_t v = recipe_eval(p->cons[i], d, s, rt);
      feasible = v >= p->cons_range[i].lo && v <= p->cons_range[i].hi;
    }
    feasible = feasible && in_box(env->orig, d, s, rt);
    env->points++;
    if (kiln_indexing_map_contains(env->simp, d, s, rt) != feasible)
      fail_map(env, feasible ? "simplified domain lost a point" : "simplified domain gained a point", d, s);
    if (feasible) {
      env->feasible++;
      int64_t got[MAX_RES], raw[MAX_RES];
      if (!kiln_indexing_map_eval(env->simp, d, s, rt, got)) fail_map(env, "eval failed", d, s);
      if (!kiln_indexing_map_eval(env->orig, d, s, rt, raw)) fail_map(env, "eval failed", d, s);
      for (int i = 0; i < p->nres; i++) {
        int64_t want = recipe_eval(p->res[i], d, s, rt);
        if (raw[i] != want) fail_map(env, "constructed expression disagrees with recipe", d, s);
        if (got[i] != want) fail_map(env, "simplified result disagrees", d, s);
        if (want < env->bounds[i].lo || want > env->bounds[i].hi)
          fail_map(env, "bounds are unsound", d, s);
      }
    }
    size_t k = n;
    while (k > 0 && vals[k - 1] == box[k - 1].hi) {
      vals[k - 1] = box[k - 1].lo;
      k--;
    }
    if (k == 0) break;
    vals[k - 1]++;
  }
}

static void test_simplify_preserves_meaning_on_random_maps(void **state) {
  gen_t g = {{0x5eed1234abcdull}, kiln_affine_ctx_create(), {0}, 0, 0, 0};
  kiln_arena_init(&g.arena);
  const int kMaps = 4000;
  uint64_t points = 0, feasible = 0, changed = 0, emptied = 0;
  for (int iter = 0; iter < kMaps; iter++) {
    pmap_t p;
    gen_map(&g, &p);
    /* The box before add_constraint folded single-variable constraints into it. */
    kiln_interval_t box[8];
    size_t j = 0;
    for (int k = 0; k < 3; k++)
      for (size_t i = 0; i < p.m->vars[k].len; i++) box[j++] = p.m->vars[k].data[i].bounds;
    /* Widen the enumeration box a little so interval tightening is checked too. */
    for (size_t i = 0; i < j; i++) {
      if (box[i].lo > box[i].hi) box[i].hi = box[i].lo;
      box[i].lo -= 1;
      box[i].hi += 1;
    }
    kiln_indexing_map_t *s = kiln_indexing_map_clone(p.m);
    changed += kiln_indexing_map_simplify(s);
    emptied += s->known_empty;
    check_env_t env = {&p, p.m, s, 0, 0, {{0, 0}}};
    for (int i = 0; i < p.nres; i++) env.bounds[i] = kiln_indexing_map_bounds(p.m, p.m->results.data[i]);
    check_all_points(&env, box, p.m->vars[0].len, p.m->vars[1].len, p.m->vars[2].len);
    points += env.points;
    feasible += env.feasible;

    /* Fixed point: a second simplify changes nothing. */
    char *once = kiln_indexing_map_to_string(s);
    if (kiln_indexing_map_simplify(s)) {
      char *twice = kiln_indexing_map_to_string(s);
      fprintf(stderr, "not a fixed point:\n  %s\n  %s\n", once, twice);
      kiln_free(twice);
      fail();
    }
    /* Round trip of the canonical text. */
    kiln_indexing_map_t *back = idx_parse(g.ctx, once);
    idx_assert_prints(back, once);
    kiln_indexing_map_free(back);
    kiln_free(once);
    kiln_indexing_map_free(s);
    kiln_indexing_map_free(p.m);
  }
  printf("property: %d random maps, %" PRIu64 " points checked (%" PRIu64
         " in the domain); %" PRIu64 " maps changed by simplify, %" PRIu64 " found empty; %zu nodes\n",
         kMaps, points, feasible, changed, emptied, kiln_affine_ctx_node_count(g.ctx));
  assert_true(points > 100000);
  assert_true(changed > (uint64_t)kMaps / 2);
  kiln_arena_destroy(&g.arena);
  kiln_affine_ctx_destroy(g.ctx);
}

/* Single expressions, simplified through kiln_indexing_map_simplify_expr. */
static void test_simplify_expr_preserves_value_on_random_expressions(void **state) {
  gen_t g = {{0x0ddba11ull}, kiln_affine_ctx_create(), {0}, 2, 1, 0};
  kiln_arena_init(&g.arena);
  kiln_indexing_map_t *m = kiln_indexing_map_create(g.ctx, 2, 1, 0);
  kiln_indexing_map_set_bounds(m, KILN_INDEXING_DIM, 0, -3, 9);
  kiln_indexing_map_set_bounds(m, KILN_INDEXING_DIM, 1, 0, 15);
  kiln_indexing_map_set_bounds(m, KILN_INDEXING_SYM, 0, 0, 3);
  uint64_t checked = 0;
  for (int iter = 0; iter < 3000; iter++) {
    kiln_affine_expr_t *e;
    recipe_t *r = idx_rng_range(&g.rng, 0, 1) ? gen_structured(&g, &e) : gen_expr(&g, 4, &e);
    kiln_affine_expr_t *se = kiln_indexing_map_simplify_expr(m, e);
    for (int64_t a = -3; a <= 9; a++)
      for (int64_t b = 0; b <= 15; b++)
        for (int64_t c = 0; c <= 3; c++) {
          int64_t d[2] = {a, b}, s[1] = {c}, got;
          assert_true(kiln_affine_eval(se, d, s, NULL, &got));
          if (got != recipe_eval(r, d, s, NULL)) {
            fprintf(stderr, "%s -> %s differs at (%" PRId64 ", %" PRId64 ", %" PRId64 ")\n",
                    kiln_affine_to_string(g.ctx, e), kiln_affine_to_string(g.ctx, se), a, b, c);
            fail();
          }
          checked++;
        }
  }
  printf("property: 3000 random expressions, %" PRIu64 " points checked\n", checked);
  kiln_indexing_map_free(m);
  kiln_arena_destroy(&g.arena);
  kiln_affine_ctx_destroy(g.ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_simplify_preserves_meaning_on_random_maps),
      cmocka_unit_test(test_simplify_expr_preserves_value_on_random_expressions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
