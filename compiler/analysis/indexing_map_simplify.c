/* Bounds, simplification, emptiness and symbol rescaling for indexing maps.
 *
 * Bounds are interval arithmetic over the variables' intervals (sound: every value an
 * expression takes at a domain point is inside; unbounded ends are INT64_MIN/INT64_MAX).
 * For results, a constraint `e in [lo, hi]` also narrows the bounds of e itself (points
 * violating it are not in the domain); constraints are never simplified with their own
 * ranges.
 *
 * Expression rules (x, y expressions; k, c, D positive constants), applied bottom-up to
 * a fixed point:
 *   - an expression whose bounds are one value becomes that constant
 *   - (x floordiv a) floordiv b      -> x floordiv (a*b)
 *   - (x mod (a*b)) floordiv a       -> (x floordiv a) mod b
 *   - (x mod (c*D)) mod D            -> x mod D
 *   - (k*D*x + y) floordiv D         -> k*x + y floordiv D  (ceildiv alike)
 *   - (k*D*x + y) mod D              -> y mod D; (c*x + y) mod D -> ((c mod D)*x + y) mod D
 *   - x mod D                        -> x - q*D   when x in [q*D, q*D + D - 1]
 *   - (g*L + T) floordiv D           -> L floordiv (D/g)   when g | D and T in [0, g-1]
 *   - (g*L + T) mod D                -> (L mod (D/g))*g + T when g | D and T in [0, g-1]
 *   - (y mod c)*d + (y floordiv c)*(c*d) -> y*d  (also with y = x floordiv a matched
 *                                                  against x floordiv (a*c), and with
 *                                                  y mod c in its simplified form)
 *   - min/max drop operands that the bounds show can never be selected
 * plus the constructors' canonical form (constant folding, like terms, term order).
 *
 * Constraint rules: constants moved to the range, a common factor divided out (range
 * rounded inwards), a negated single term flipped, single-variable constraints folded
 * into the variable's interval, always-true constraints dropped, contradictions make the
 * map known empty, and duplicate expressions merged. */
#include <stdlib.h>
#include <string.h>

#include "base/hashmap.h"
#include "compiler/analysis/indexing_map.h"

typedef __int128 i128;
#define EXT_INF (((i128)1) << 100)

static i128 ext_lo(int64_t v) { return v == INT64_MIN || v == INT64_MAX ? (v < 0 ? -EXT_INF : EXT_INF) : v; }
static int64_t ext_to(i128 v) {
  if (v <= INT64_MIN) return INT64_MIN;
  if (v >= INT64_MAX) return INT64_MAX;
  return (int64_t)v;
}
static i128 ext_add(i128 a, i128 b) {
  if (a <= -EXT_INF || b <= -EXT_INF) return -EXT_INF;
  if (a >= EXT_INF || b >= EXT_INF) return EXT_INF;
  return a + b;
}
static i128 ext_mul(i128 a, i128 b) {
  if (a == 0 || b == 0) return 0;
  if (a <= -EXT_INF || a >= EXT_INF || b <= -EXT_INF || b >= EXT_INF)
    return ((a < 0) != (b < 0)) ? -EXT_INF : EXT_INF;
  return a * b;
}
/* floor/ceil division of extended values by a nonzero finite-or-infinite divisor. */
static i128 ext_div(i128 a, i128 b, bool ceil) {
  bool ainf = a <= -EXT_INF || a >= EXT_INF, binf = b <= -EXT_INF || b >= EXT_INF;
  if (binf) {
    if (ainf) return ((a < 0) != (b < 0)) ? -EXT_INF : EXT_INF;
    /* |a| finite over an infinite divisor: 0 or -1 (floor) / 0 or 1 (ceil). */
    if (a == 0) return 0;
    bool neg = (a < 0) != (b < 0);
    return ceil ? (neg ? 0 : 1) : (neg ? -1 : 0);
  }
  if (ainf) return ((a < 0) != (b < 0)) ? -EXT_INF : EXT_INF;
  i128 q = a / b;
  if (a % b != 0) {
    bool neg = (a < 0) != (b < 0);
    if (!ceil && neg) q--;
    if (ceil && !neg) q++;
  }
  return q;
}

static kiln_interval_t mk(i128 lo, i128 hi) { return (kiln_interval_t){ext_to(lo), ext_to(hi)}; }

typedef struct bounds_env {
  const kiln_indexing_map_t *m;
  bool use_constraints;
} bounds_env_t;

static kiln_interval_t bounds_rec(const bounds_env_t *env, const kiln_affine_expr_t *e);

static kiln_interval_t bounds_raw(const bounds_env_t *env, const kiln_affine_expr_t *e) {
  const kiln_indexing_map_t *m = env->m;
  switch (e->kind) {
    case KILN_AFFINE_CONST: return (kiln_interval_t){e->value, e->value};
    case KILN_AFFINE_DIM:
    case KILN_AFFINE_SYM:
    case KILN_AFFINE_RT: {
      int k = e->kind == KILN_AFFINE_DIM ? 0 : e->kind == KILN_AFFINE_SYM ? 1 : 2;
      if (e->value < 0 || (uint64_t)e->value >= m->vars[k].len) return KILN_INTERVAL_FULL;
      return m->vars[k].data[e->value].bounds;
    }
    case KILN_AFFINE_ADD: {
      i128 lo = 0, hi = 0;
      for (uint32_t i = 0; i < e->n; i++) {
        kiln_interval_t b = bounds_rec(env, e->ops[i]);
        lo = ext_add(lo, ext_lo(b.lo));
        hi = ext_add(hi, ext_lo(b.hi));
      }
      return mk(lo, hi);
    }
    case KILN_AFFINE_MUL: {
      kiln_interval_t a = bounds_rec(env, e->ops[0]), b = bounds_rec(env, e->ops[1]);
      i128 p[4] = {ext_mul(ext_lo(a.lo), ext_lo(b.lo)), ext_mul(ext_lo(a.lo), ext_lo(b.hi)),
                   ext_mul(ext_lo(a.hi), ext_lo(b.lo)), ext_mul(ext_lo(a.hi), ext_lo(b.hi))};
      i128 lo = p[0], hi = p[0];
      for (int i = 1; i < 4; i++) {
        if (p[i] < lo) lo = p[i];
        if (p[i] > hi) hi = p[i];
      }
      return mk(lo, hi);
    }
    case KILN_AFFINE_FLOORDIV:
    case KILN_AFFINE_CEILDIV: {
      kiln_interval_t a = bounds_rec(env, e->ops[0]), b = bounds_rec(env, e->ops[1]);
      if (b.lo <= 0 && b.hi >= 0) return KILN_INTERVAL_FULL;
      bool ceil = e->kind == KILN_AFFINE_CEILDIV;
      i128 p[4] = {ext_div(ext_lo(a.lo), ext_lo(b.lo), ceil), ext_div(ext_lo(a.lo), ext_lo(b.hi), ceil),
                   ext_div(ext_lo(a.hi), ext_lo(b.lo), ceil), ext_div(ext_lo(a.hi), ext_lo(b.hi), ceil)};
      i128 lo = p[0], hi = p[0];
      for (int i = 1; i < 4; i++) {
        if (p[i] < lo) lo = p[i];
        if (p[i] > hi) hi = p[i];
      }
      return mk(lo, hi);
    }
    case KILN_AFFINE_MOD: {
      kiln_interval_t a = bounds_rec(env, e->ops[0]), b = bounds_rec(env, e->ops[1]);
      if (b.lo <= 0 || b.hi == INT64_MAX) {
        if (b.hi < 0 && b.lo != INT64_MIN) return (kiln_interval_t){b.lo + 1, 0};
        return KILN_INTERVAL_FULL;
      }
      if (b.lo == b.hi && a.lo != INT64_MIN && a.hi != INT64_MAX) {
        int64_t d = b.lo, qlo, qhi;
        kiln_affine_floordiv_i64(a.lo, d, &qlo);
        kiln_affine_floordiv_i64(a.hi, d, &qhi);
        if (qlo == qhi) return mk((i128)a.lo - (i128)qlo * d, (i128)a.hi - (i128)qlo * d);
      }
      if (a.lo >= 0 && a.hi != INT64_MAX)
        return (kiln_interval_t){0, a.hi < b.hi - 1 ? a.hi : b.hi - 1};
      return (kiln_interval_t){0, b.hi - 1};
    }
    case KILN_AFFINE_MIN:
    case KILN_AFFINE_MAX: {
      kiln_interval_t r = bounds_rec(env, e->ops[0]);
      for (uint32_t i = 1; i < e->n; i++) {
        kiln_interval_t b = bounds_rec(env, e->ops[i]);
        if (e->kind == KILN_AFFINE_MIN) {
          if (b.lo < r.lo) r.lo = b.lo;
          if (b.hi < r.hi) r.hi = b.hi;
        } else {
          if (b.lo > r.lo) r.lo = b.lo;
          if (b.hi > r.hi) r.hi = b.hi;
        }
      }
      return r;
    }
  }
  return KILN_INTERVAL_FULL;
}

static kiln_interval_t bounds_rec(const bounds_env_t *env, const kiln_affine_expr_t *e) {
  kiln_interval_t b = bounds_raw(env, e);
  if (env->use_constraints && e->n > 0) {
    for (size_t i = 0; i < env->m->constraints.len; i++) {
      const kiln_indexing_constraint_t *c = &env->m->constraints.data[i];
      if (c->expr != e) continue;
      if (c->range.lo > b.lo) b.lo = c->range.lo;
      if (c->range.hi < b.hi) b.hi = c->range.hi;
    }
  }
  return b;
}

kiln_interval_t kiln_indexing_map_bounds(const kiln_indexing_map_t *m, const kiln_affine_expr_t *e) {
  bounds_env_t env = {m, true};
  return bounds_rec(&env, e);
}

/* ---- expression simplifier ---- */

typedef struct simp {
  const kiln_indexing_map_t *m;
  kiln_affine_ctx_t *ctx;
  bounds_env_t benv;
  kiln_ptrmap_t memo;
  long fuel; /* rewrite steps left; when spent, expressions are returned as they are */
} simp_t;

static kiln_affine_expr_t *simp(simp_t *s, kiln_affine_expr_t *e);

static kiln_interval_t bnd(simp_t *s, const kiln_affine_expr_t *e) {
  return bounds_rec(&s->benv, e);
}

static uint64_t gcd_u64(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}
static uint64_t uabs(int64_t v) { return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v; }

typedef struct split {
  kiln_affine_expr_t *atoms[64];
  int64_t coefs[64];
  size_t n;
  int64_t constant;
} split_t;

/* Splits a sum into (atom, coef) terms and a constant. False if it has too many terms. */
static bool split_sum(kiln_affine_expr_t *e, split_t *sp) {
  sp->n = 0;
  sp->constant = 0;
  uint32_t n = e->kind == KILN_AFFINE_ADD ? e->n : 1;
  if (n > 64) return false;
  for (uint32_t i = 0; i < n; i++) {
    kiln_affine_expr_t *t = e->kind == KILN_AFFINE_ADD ? e->ops[i] : e;
    int64_t c;
    kiln_affine_expr_t *atom = kiln_affine_term_split(t, &c);
    if (!atom) {
      sp->constant = c;
    } else {
      sp->atoms[sp->n] = atom;
      sp->coefs[sp->n] = c;
      sp->n++;
    }
  }
  return true;
}

static kiln_interval_t terms_bounds(simp_t *s, const split_t *sp, const size_t *idx, size_t n,
                                    int64_t constant) {
  i128 lo = constant, hi = constant;
  for (size_t i = 0; i < n; i++) {
    kiln_interval_t b = bnd(s, sp->atoms[idx[i]]);
    i128 c = sp->coefs[idx[i]];
    i128 x = ext_mul(ext_lo(b.lo), c), y = ext_mul(ext_lo(b.hi), c);
    lo = ext_add(lo, x < y ? x : y);
    hi = ext_add(hi, x < y ? y : x);
  }
  return mk(lo, hi);
}

static kiln_affine_expr_t *terms_sum(simp_t *s, const split_t *sp, const size_t *idx, size_t n,
                                     int64_t divisor, int64_t constant) {
  kiln_affine_expr_t *acc = kiln_affine_const(s->ctx, constant);
  for (size_t i = 0; i < n; i++)
    acc = kiln_affine_add(s->ctx, acc,
                          kiln_affine_mul_const(s->ctx, sp->atoms[idx[i]], sp->coefs[idx[i]] / divisor));
  return acc;
}

/* Insertion sort of term indices by |coefficient| (stable; at most 64 terms). */
static void sort_by_abs_coef(size_t *order, const split_t *sp) {
  for (size_t i = 1; i < sp->n; i++) {
    size_t x = order[i], j = i;
    while (j > 0 && uabs(sp->coefs[order[j - 1]]) > uabs(sp->coefs[x])) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = x;
  }
}

/* Looks for a split of x's terms into T (small-coefficient terms plus the constant) and
 * L (the rest) with g = gcd(D, coefficients of L) > 1 and T in [0, g - 1]. On success
 * returns g and sets *L_over_g and *T. Prefers the largest T. */
static int64_t find_small_split(simp_t *s, kiln_affine_expr_t *x, int64_t D,
                                kiln_affine_expr_t **l_over_g, kiln_affine_expr_t **t_out) {
  split_t sp;
  if (!split_sum(x, &sp) || sp.n == 0) return 0;
  size_t order[64];
  for (size_t i = 0; i < sp.n; i++) order[i] = i;
  sort_by_abs_coef(order, &sp);
  for (size_t k = sp.n; k-- > 0;) {
    /* T = order[0..k) + constant, L = order[k..n). */
    uint64_t g = (uint64_t)D;
    for (size_t i = k; i < sp.n; i++) g = gcd_u64(g, uabs(sp.coefs[order[i]]));
    if (g <= 1) continue;
    kiln_interval_t tb = terms_bounds(s, &sp, order, k, sp.constant);
    if (tb.lo < 0 || tb.hi > (int64_t)g - 1) continue;
    *l_over_g = terms_sum(s, &sp, order + k, sp.n - k, (int64_t)g, 0);
    *t_out = terms_sum(s, &sp, order, k, 1, sp.constant);
    return (int64_t)g;
  }
  return 0;
}

static bool fuel(simp_t *s) { return s->fuel-- > 0; }

static kiln_affine_expr_t *c_(simp_t *s, int64_t v) { return kiln_affine_const(s->ctx, v); }

static kiln_affine_expr_t *rewrite_div(simp_t *s, kiln_affine_expr_t *r) {
  kiln_affine_expr_t *a = r->ops[0], *b = r->ops[1];
  bool floor = r->kind == KILN_AFFINE_FLOORDIV;
  if (b->kind != KILN_AFFINE_CONST) {
    kiln_interval_t bb = bnd(s, b), ab = bnd(s, a);
    if (bb.lo > 0 && ab.lo >= 0 && ab.hi < bb.lo && floor) return c_(s, 0);
    return r;
  }
  int64_t D = b->value, p;
  if (D <= 0 || !fuel(s)) return r;
  if (floor && a->kind == KILN_AFFINE_FLOORDIV && a->ops[1]->kind == KILN_AFFINE_CONST &&
      a->ops[1]->value > 0 && !__builtin_mul_overflow(a->ops[1]->value, D, &p))
    return simp(s, kiln_affine_floordiv(s->ctx, a->ops[0], c_(s, p)));
  if (floor && a->kind == KILN_AFFINE_MOD && a->ops[1]->kind == KILN_AFFINE_CONST &&
      a->ops[1]->value > 0 && a->ops[1]->value % D == 0)
    return simp(s, kiln_affine_mod(s->ctx, kiln_affine_floordiv(s->ctx, a->ops[0], b),
                                   c_(s, a->ops[1]->value / D)));
  split_t sp;
  if (!split_sum(a, &sp)) return r;
  /* Pull out summands divisible by D. */
  size_t pulled[64], rest[64], np = 0, nr = 0;
  for (size_t i = 0; i < sp.n; i++) {
    if (sp.coefs[i] % D == 0) pulled[np++] = i;
    else rest[nr++] = i;
  }
  /* floor: q = floor(c / D) leaves a remainder in [0, D-1]; ceil: any q works since
   * ceil((q*D + r) / D) = q + ceil(r / D), truncation leaves |r| < D. */
  int64_t q = sp.constant / D;
  if (floor) kiln_affine_floordiv_i64(sp.constant, D, &q);
  int64_t rem = sp.constant - q * D;
  if (np > 0 || q != 0) {
    kiln_affine_expr_t *out = terms_sum(s, &sp, pulled, np, D, q);
    kiln_affine_expr_t *inner = terms_sum(s, &sp, rest, nr, 1, rem);
    return simp(s, kiln_affine_add(s->ctx, out, kiln_affine_build(s->ctx, r->kind, 2,
                                                                  (kiln_affine_expr_t *[]){inner, b})));
  }
  if (!floor) return r;
  kiln_affine_expr_t *l, *t;
  int64_t g = find_small_split(s, a, D, &l, &t);
  if (g > 1) return simp(s, kiln_affine_floordiv(s->ctx, l, c_(s, D / g)));
  return r;
}

static kiln_affine_expr_t *rewrite_mod(simp_t *s, kiln_affine_expr_t *r) {
  kiln_affine_expr_t *a = r->ops[0], *b = r->ops[1];
  kiln_interval_t ab = bnd(s, a);
  if (b->kind != KILN_AFFINE_CONST) {
    kiln_interval_t bb = bnd(s, b);
    if (bb.lo > 0 && ab.lo >= 0 && ab.hi < bb.lo) return a;
    return r;
  }
  int64_t D = b->value;
  if (D <= 0 || !fuel(s)) return r;
  if (ab.lo != INT64_MIN && ab.hi != INT64_MAX) {
    int64_t qlo, qhi;
    kiln_affine_floordiv_i64(ab.lo, D, &qlo);
    kiln_affine_floordiv_i64(ab.hi, D, &qhi);
    int64_t off;
    if (qlo == qhi && !__builtin_mul_overflow(qlo, -D, &off))
      return simp(s, kiln_affine_add_const(s->ctx, a, off));
  }
  if (a->kind == KILN_AFFINE_MOD && a->ops[1]->kind == KILN_AFFINE_CONST &&
      a->ops[1]->value > 0 && a->ops[1]->value % D == 0)
    return simp(s, kiln_affine_mod(s->ctx, a->ops[0], b));
  split_t sp;
  if (!split_sum(a, &sp)) return r;
  /* Drop summands divisible by D; reduce coefficients above D modulo D. */
  size_t rest[64], nr = 0;
  bool reduced = false;
  for (size_t i = 0; i < sp.n; i++) {
    if (sp.coefs[i] % D == 0) continue;
    if (sp.coefs[i] > D) {
      sp.coefs[i] %= D;
      reduced = true;
    }
    rest[nr++] = i;
  }
  int64_t cm;
  kiln_affine_mod_i64(sp.constant, D, &cm);
  if (reduced || nr < sp.n || cm != sp.constant)
    return simp(s, kiln_affine_mod(s->ctx, terms_sum(s, &sp, rest, nr, 1, cm), b));
  kiln_affine_expr_t *l, *t;
  int64_t g = find_small_split(s, a, D, &l, &t);
  if (g > 1) {
    kiln_affine_expr_t *m = kiln_affine_mod(s->ctx, l, c_(s, D / g));
    return simp(s, kiln_affine_add(s->ctx, kiln_affine_mul_const(s->ctx, m, g), t));
  }
  return r;
}

/* (y mod c)*d + (y floordiv c)*(c*d) -> y*d, one pair at a time. */
static kiln_affine_expr_t *rewrite_add(simp_t *s, kiln_affine_expr_t *r) {
  for (uint32_t i = 0; i < r->n; i++) {
    int64_t d;
    kiln_affine_expr_t *atom = kiln_affine_term_split(r->ops[i], &d);
    if (!atom || atom->kind != KILN_AFFINE_MOD || atom->ops[1]->kind != KILN_AFFINE_CONST)
      continue;
    int64_t c = atom->ops[1]->value, cd, ac;
    if (c <= 0 || __builtin_mul_overflow(c, d, &cd)) continue;
    kiln_affine_expr_t *y = atom->ops[0], *target;
    if (y->kind == KILN_AFFINE_FLOORDIV && y->ops[1]->kind == KILN_AFFINE_CONST &&
        y->ops[1]->value > 0 && !__builtin_mul_overflow(y->ops[1]->value, c, &ac))
      target = kiln_affine_floordiv(s->ctx, y->ops[0], c_(s, ac));
    else
      target = kiln_affine_floordiv(s->ctx, y, atom->ops[1]);
    for (uint32_t j = 0; j < r->n; j++) {
      int64_t e;
      if (j == i || kiln_affine_term_split(r->ops[j], &e) != target || e != cd) continue;
      if (!fuel(s)) return r;
      kiln_affine_expr_t **ops = kiln_malloc(r->n * sizeof *ops);
      size_t n = 0;
      for (uint32_t k = 0; k < r->n; k++)
        if (k != i && k != j) ops[n++] = r->ops[k];
      ops[n++] = kiln_affine_mul_const(s->ctx, y, d);
      kiln_affine_expr_t *sum = kiln_affine_sum(s->ctx, n, ops);
      kiln_free(ops);
      return simp(s, sum);
    }
  }
  /* General form: a term (x floordiv C) * (C*d) absorbs the terms of simp(x mod C) * d
   * (whatever shape the simplifier gave that mod) when they all occur in the sum with the
   * same coefficients: C*(x floordiv C) + (x mod C) == x. */
  for (uint32_t i = 0; i < r->n; i++) {
    int64_t e;
    kiln_affine_expr_t *atom = kiln_affine_term_split(r->ops[i], &e);
    if (!atom || atom->kind != KILN_AFFINE_FLOORDIV || atom->ops[1]->kind != KILN_AFFINE_CONST)
      continue;
    int64_t C = atom->ops[1]->value;
    if (C <= 1 || e % C != 0) continue;
    if (!fuel(s)) return r;
    int64_t d = e / C;
    kiln_affine_expr_t *x = atom->ops[0];
    kiln_affine_expr_t *md = kiln_affine_mul_const(s->ctx, simp(s, kiln_affine_mod(s->ctx, x, atom->ops[1])), d);
    split_t sp;
    if (!split_sum(md, &sp) || sp.n == 0) continue;
    bool all_present = true;
    for (size_t k = 0; k < sp.n && all_present; k++) {
      bool found = false;
      for (uint32_t j = 0; j < r->n && !found; j++) {
        int64_t cj;
        found = j != i && kiln_affine_term_split(r->ops[j], &cj) == sp.atoms[k] && cj == sp.coefs[k];
      }
      all_present = found;
    }
    if (!all_present) continue;
    kiln_affine_expr_t *parts[3] = {
        kiln_affine_sub(s->ctx, r, r->ops[i]), kiln_affine_neg(s->ctx, md),
        kiln_affine_mul_const(s->ctx, x, d)};
    return simp(s, kiln_affine_sum(s->ctx, 3, parts));
  }
  return r;
}

static kiln_affine_expr_t *rewrite_minmax(simp_t *s, kiln_affine_expr_t *r) {
  bool is_min = r->kind == KILN_AFFINE_MIN;
  size_t n = r->n;
  kiln_interval_t *b = kiln_malloc(n * sizeof *b);
  bool *dropped = kiln_calloc(n, sizeof *dropped);
  for (size_t i = 0; i < n; i++) b[i] = bnd(s, r->ops[i]);
  size_t kept = n;
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < n; j++) {
      if (j == i || dropped[j]) continue;
      bool dominated = is_min ? b[j].hi <= b[i].lo : b[j].lo >= b[i].hi;
      if (dominated) {
        dropped[i] = true;
        kept--;
        break;
      }
    }
  }
  kiln_affine_expr_t *out = r;
  if (kept < n) {
    kiln_affine_expr_t **ops = kiln_malloc(n * sizeof *ops);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
      if (!dropped[i]) ops[m++] = r->ops[i];
    out = kiln_affine_build(s->ctx, r->kind, m, ops);
    kiln_free(ops);
  }
  kiln_free(b);
  kiln_free(dropped);
  return out;
}

static kiln_affine_expr_t *simp(simp_t *s, kiln_affine_expr_t *e) {
  if (e->n == 0) return e;
  kiln_affine_expr_t *memo = kiln_ptrmap_get(&s->memo, e);
  if (memo) return memo;
  kiln_affine_expr_t *stack_ops[8];
  kiln_affine_expr_t **ops = e->n <= 8 ? stack_ops : kiln_malloc(e->n * sizeof *ops);
  bool changed = false;
  for (uint32_t i = 0; i < e->n; i++) {
    ops[i] = simp(s, e->ops[i]);
    changed |= ops[i] != e->ops[i];
  }
  kiln_affine_expr_t *r = changed ? kiln_affine_build(s->ctx, e->kind, e->n, ops) : e;
  if (ops != stack_ops) kiln_free(ops);
  if (r != e && r->n > 0) {
    kiln_affine_expr_t *m2 = kiln_ptrmap_get(&s->memo, r);
    if (m2) r = m2;
  }
  switch (r->kind) {
    case KILN_AFFINE_ADD: r = rewrite_add(s, r); break;
    case KILN_AFFINE_FLOORDIV:
    case KILN_AFFINE_CEILDIV: r = rewrite_div(s, r); break;
    case KILN_AFFINE_MOD: r = rewrite_mod(s, r); break;
    case KILN_AFFINE_MIN:
    case KILN_AFFINE_MAX: r = rewrite_minmax(s, r); break;
    default: break;
  }
  kiln_interval_t b = bnd(s, r);
  if (b.lo == b.hi && b.lo != INT64_MIN && b.hi != INT64_MAX) r = c_(s, b.lo);
  kiln_ptrmap_put(&s->memo, e, r);
  return r;
}

static void simp_init(simp_t *s, const kiln_indexing_map_t *m, bool use_constraints) {
  s->m = m;
  s->ctx = m->ctx;
  s->benv.m = m;
  s->benv.use_constraints = use_constraints;
  kiln_ptrmap_init(&s->memo);
  s->fuel = 1 << 20;
}

kiln_affine_expr_t *kiln_indexing_map_simplify_expr(const kiln_indexing_map_t *m,
                                                    kiln_affine_expr_t *e) {
  if (m->known_empty) return e;
  simp_t s;
  simp_init(&s, m, true);
  kiln_affine_expr_t *r = simp(&s, e);
  kiln_ptrmap_free(&s.memo);
  return r;
}

/* ---- domain ---- */

static void mark_empty(kiln_indexing_map_t *m) { m->known_empty = true; }

bool kiln_indexing_map_check_empty(kiln_indexing_map_t *m) {
  if (m->known_empty) return true;
  for (int k = 0; k < 3; k++)
    for (size_t i = 0; i < m->vars[k].len; i++)
      if (kiln_interval_is_empty(m->vars[k].data[i].bounds)) return mark_empty(m), true;
  bounds_env_t env = {m, false};
  for (size_t i = 0; i < m->constraints.len; i++) {
    const kiln_indexing_constraint_t *c = &m->constraints.data[i];
    kiln_interval_t b = bounds_rec(&env, c->expr);
    if (kiln_interval_is_empty(c->range) || b.hi < c->range.lo || b.lo > c->range.hi)
      return mark_empty(m), true;
  }
  return false;
}

static int64_t neg_bound(int64_t v) {
  if (v == INT64_MIN) return INT64_MAX;
  if (v == INT64_MAX) return INT64_MIN;
  return -v;
}

/* For a linear constraint sum c_i * x_i in [lo, hi] over variables, narrows each x_j to
 * what the others' intervals allow: c_j * x_j in [lo - rest.hi, hi - rest.lo]. */
static void tighten_vars(kiln_indexing_map_t *m, const kiln_indexing_constraint_t *c, bool *empty) {
  split_t sp;
  if (!split_sum(c->expr, &sp) || sp.constant != 0 || sp.n < 2) return;
  for (size_t i = 0; i < sp.n; i++)
    if (!kiln_affine_is_var(sp.atoms[i])) return;
  bounds_env_t env = {m, false};
  for (size_t j = 0; j < sp.n; j++) {
    i128 rlo = 0, rhi = 0;
    for (size_t i = 0; i < sp.n; i++) {
      if (i == j) continue;
      kiln_interval_t b = bounds_rec(&env, sp.atoms[i]);
      i128 x = ext_mul(ext_lo(b.lo), sp.coefs[i]), y = ext_mul(ext_lo(b.hi), sp.coefs[i]);
      rlo = ext_add(rlo, x < y ? x : y);
      rhi = ext_add(rhi, x < y ? y : x);
    }
    /* c_j * x_j in [lo - rhi, hi - rlo] */
    i128 lo = ext_add(ext_lo(c->range.lo), -rhi), hi = ext_add(ext_lo(c->range.hi), -rlo);
    if (rhi >= EXT_INF || c->range.lo == INT64_MIN) lo = -EXT_INF;
    if (rlo <= -EXT_INF || c->range.hi == INT64_MAX) hi = EXT_INF;
    i128 cj = sp.coefs[j];
    i128 xlo, xhi;
    if (cj > 0) {
      xlo = ext_div(lo, cj, true);
      xhi = ext_div(hi, cj, false);
    } else {
      xlo = ext_div(hi, cj, true);
      xhi = ext_div(lo, cj, false);
    }
    kiln_affine_expr_t *v = sp.atoms[j];
    int k = v->kind == KILN_AFFINE_DIM ? 0 : v->kind == KILN_AFFINE_SYM ? 1 : 2;
    if ((uint64_t)v->value >= m->vars[k].len) continue;
    kiln_interval_t *vb = &m->vars[k].data[v->value].bounds;
    if (xlo > -EXT_INF && xlo > vb->lo) vb->lo = ext_to(xlo);
    if (xhi < EXT_INF && xhi < vb->hi) vb->hi = ext_to(xhi);
    if (kiln_interval_is_empty(*vb)) *empty = true;
  }
}

/* Normalizes one constraint. Returns false if the constraint is to be dropped (always
 * true, or folded into a variable interval); sets *empty on a contradiction. */
static bool normalize_constraint(kiln_indexing_map_t *m, kiln_indexing_constraint_t *c,
                                 bool *empty) {
  kiln_affine_ctx_t *ctx = m->ctx;
  for (int guard = 0; guard < 8; guard++) {
    kiln_affine_expr_t *e = c->expr;
    kiln_interval_t r = c->range;
    if (kiln_interval_is_empty(r)) {
      *empty = true;
      return false;
    }
    if (e->kind == KILN_AFFINE_CONST) {
      if (e->value < r.lo || e->value > r.hi) *empty = true;
      return false;
    }
    if (kiln_affine_is_var(e)) {
      int k = e->kind == KILN_AFFINE_DIM ? 0 : e->kind == KILN_AFFINE_SYM ? 1 : 2;
      if ((uint64_t)e->value >= m->vars[k].len) return true;
      kiln_interval_t *b = &m->vars[k].data[e->value].bounds;
      if (r.lo > b->lo) b->lo = r.lo;
      if (r.hi < b->hi) b->hi = r.hi;
      if (kiln_interval_is_empty(*b)) *empty = true;
      return false;
    }
    split_t sp;
    if (!split_sum(e, &sp)) break;
    /* Move the constant across: e + k in [lo, hi] -> e in [lo - k, hi - k]. */
    if (sp.constant != 0) {
      int64_t lo = r.lo, hi = r.hi;
      if ((lo != INT64_MIN && __builtin_sub_overflow(lo, sp.constant, &lo)) ||
          (hi != INT64_MAX && __builtin_sub_overflow(hi, sp.constant, &hi)))
        break;
      c->expr = kiln_affine_add_const(ctx, e, -sp.constant);
      c->range = (kiln_interval_t){lo, hi};
      continue;
    }
    /* Divide out a common factor, rounding the range inwards; flip an all-negative sum. */
    uint64_t g = 0;
    bool all_neg = sp.n > 0;
    for (size_t i = 0; i < sp.n; i++) {
      g = gcd_u64(g, uabs(sp.coefs[i]));
      all_neg &= sp.coefs[i] < 0;
    }
    if (g > 1 && g <= INT64_MAX) {
      int64_t lo = r.lo, hi = r.hi;
      if (lo != INT64_MIN) kiln_affine_ceildiv_i64(lo, (int64_t)g, &lo);
      if (hi != INT64_MAX) kiln_affine_floordiv_i64(hi, (int64_t)g, &hi);
      kiln_affine_expr_t *acc = kiln_affine_const(ctx, 0);
      for (size_t i = 0; i < sp.n; i++)
        acc = kiln_affine_add(ctx, acc, kiln_affine_mul_const(ctx, sp.atoms[i], sp.coefs[i] / (int64_t)g));
      c->expr = acc;
      c->range = (kiln_interval_t){lo, hi};
      continue;
    }
    if (all_neg) {
      c->expr = kiln_affine_neg(ctx, e);
      c->range = (kiln_interval_t){neg_bound(r.hi), neg_bound(r.lo)};
      continue;
    }
    break;
  }
  bounds_env_t env = {m, false};
  kiln_interval_t b = bounds_rec(&env, c->expr);
  if (b.hi < c->range.lo || b.lo > c->range.hi) {
    *empty = true;
    return false;
  }
  if (b.lo >= c->range.lo && b.hi <= c->range.hi) return false; /* always true */
  if (b.lo > c->range.lo) c->range.lo = b.lo;
  if (b.hi < c->range.hi) c->range.hi = b.hi;
  tighten_vars(m, c, empty);
  return true;
}

static bool vars_equal(const kiln_indexing_map_t *m, const kiln_interval_t *saved) {
  size_t j = 0;
  for (int k = 0; k < 3; k++)
    for (size_t i = 0; i < m->vars[k].len; i++, j++)
      if (m->vars[k].data[i].bounds.lo != saved[j].lo || m->vars[k].data[i].bounds.hi != saved[j].hi)
        return false;
  return true;
}

static int constraint_order(const void *pa, const void *pb) {
  const kiln_indexing_constraint_t *a = pa, *b = pb;
  return kiln_affine_compare(a->expr, b->expr);
}

/* One round over the constraints: simplify (without their own ranges), normalize, merge
 * duplicates, sort. */
static void simplify_constraints(kiln_indexing_map_t *m) {
  simp_t s;
  simp_init(&s, m, false);
  size_t out = 0;
  bool empty = false;
  for (size_t i = 0; i < m->constraints.len && !empty; i++) {
    kiln_indexing_constraint_t c = m->constraints.data[i];
    c.expr = simp(&s, c.expr);
    if (normalize_constraint(m, &c, &empty)) m->constraints.data[out++] = c;
  }
  kiln_ptrmap_free(&s.memo);
  m->constraints.len = out;
  if (empty) {
    mark_empty(m);
    return;
  }
  if (out > 1) qsort(m->constraints.data, out, sizeof *m->constraints.data, constraint_order);
  size_t w = 0;
  for (size_t i = 0; i < out; i++) {
    kiln_indexing_constraint_t *c = &m->constraints.data[i];
    if (w > 0 && m->constraints.data[w - 1].expr == c->expr) {
      kiln_interval_t *r = &m->constraints.data[w - 1].range;
      if (c->range.lo > r->lo) r->lo = c->range.lo;
      if (c->range.hi < r->hi) r->hi = c->range.hi;
      if (kiln_interval_is_empty(*r)) mark_empty(m);
      continue;
    }
    m->constraints.data[w++] = *c;
  }
  m->constraints.len = w;
}

bool kiln_indexing_map_simplify(kiln_indexing_map_t *m) {
  if (m->known_empty) return false;
  size_t nv = m->vars[0].len + m->vars[1].len + m->vars[2].len;
  kiln_interval_t *saved = kiln_malloc((nv ? nv : 1) * sizeof *saved);
  kiln_affine_expr_t **saved_res = kiln_malloc((m->results.len ? m->results.len : 1) * sizeof *saved_res);
  KILN_VEC(kiln_indexing_constraint_t) saved_cons = {0};
  bool changed_any = false;
  for (int round = 0; round < 64; round++) {
    size_t j = 0;
    for (int k = 0; k < 3; k++)
      for (size_t i = 0; i < m->vars[k].len; i++) saved[j++] = m->vars[k].data[i].bounds;
    if (m->results.len) memcpy(saved_res, m->results.data, m->results.len * sizeof *saved_res);
    kiln_vec_clear(&saved_cons);
    for (size_t i = 0; i < m->constraints.len; i++) kiln_vec_push(&saved_cons, m->constraints.data[i]);

    if (kiln_indexing_map_check_empty(m)) {
      changed_any = true;
      break;
    }
    simplify_constraints(m);
    if (m->known_empty || kiln_indexing_map_check_empty(m)) {
      changed_any = true;
      break;
    }
    simp_t s;
    simp_init(&s, m, true);
    for (size_t i = 0; i < m->results.len; i++) m->results.data[i] = simp(&s, m->results.data[i]);
    kiln_ptrmap_free(&s.memo);

    bool same = vars_equal(m, saved) && saved_cons.len == m->constraints.len &&
                (m->results.len == 0 ||
                 memcmp(saved_res, m->results.data, m->results.len * sizeof *saved_res) == 0);
    for (size_t i = 0; same && i < saved_cons.len; i++)
      same = saved_cons.data[i].expr == m->constraints.data[i].expr &&
             saved_cons.data[i].range.lo == m->constraints.data[i].range.lo &&
             saved_cons.data[i].range.hi == m->constraints.data[i].range.hi;
    if (same) break;
    changed_any = true;
  }
  kiln_free(saved);
  kiln_free(saved_res);
  kiln_vec_free(&saved_cons);
  return changed_any;
}

/* ---- symbol rescaling ---- */

bool kiln_indexing_map_rescale_symbols(kiln_indexing_map_t *m) {
  if (m->known_empty) return false;
  bool changed = false;
  for (size_t ci = 0; ci < m->constraints.len;) {
    kiln_indexing_constraint_t c = m->constraints.data[ci];
    kiln_affine_expr_t *e = c.expr;
    if (e->kind != KILN_AFFINE_MOD || e->ops[0]->kind != KILN_AFFINE_SYM ||
        e->ops[1]->kind != KILN_AFFINE_CONST || e->ops[1]->value <= 0 ||
        c.range.lo != c.range.hi || (uint64_t)e->ops[0]->value >= m->vars[1].len) {
      ci++;
      continue;
    }
    int64_t k = e->ops[1]->value, r = c.range.lo, j = e->ops[0]->value;
    kiln_interval_t *b = &m->vars[1].data[j].bounds;
    if (b->lo == INT64_MIN || b->hi == INT64_MAX) {
      ci++;
      continue;
    }
    if (r < 0 || r >= k) {
      mark_empty(m);
      return true;
    }
    int64_t lo, hi, blo, bhi;
    if (__builtin_sub_overflow(b->lo, r, &blo) || __builtin_sub_overflow(b->hi, r, &bhi)) {
      ci++;
      continue;
    }
    kiln_affine_ceildiv_i64(blo, k, &lo);
    kiln_affine_floordiv_i64(bhi, k, &hi);
    m->constraints.data[ci] = m->constraints.data[--m->constraints.len];
    changed = true;
    *b = (kiln_interval_t){lo, hi};
    size_t ns = m->vars[1].len;
    kiln_affine_expr_t **repl = kiln_calloc(ns, sizeof *repl);
    repl[j] = kiln_affine_add_const(m->ctx, kiln_affine_mul_const(m->ctx, e->ops[0], k), r);
    for (size_t i = 0; i < m->results.len; i++)
      m->results.data[i] = kiln_affine_replace(m->ctx, m->results.data[i], NULL, 0, repl, ns, NULL, 0);
    for (size_t i = 0; i < m->constraints.len; i++)
      m->constraints.data[i].expr =
          kiln_affine_replace(m->ctx, m->constraints.data[i].expr, NULL, 0, repl, ns, NULL, 0);
    kiln_free(repl);
    if (lo > hi) {
      mark_empty(m);
      return true;
    }
    ci = 0; /* expressions changed: rescan */
  }
  return changed;
}
