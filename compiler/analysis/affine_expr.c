/* Hash-consed affine expressions: construction, canonical order, evaluation, printing. */
#include "compiler/analysis/affine_expr.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/hashmap.h"
#include "base/vec.h"

struct kiln_affine_ctx {
  kiln_arena_t arena;
  kiln_affine_expr_t **buckets;
  size_t nbuckets; /* power of two */
  size_t count;
};

kiln_affine_ctx_t *kiln_affine_ctx_create(void) {
  kiln_affine_ctx_t *ctx = kiln_calloc(1, sizeof *ctx);
  kiln_arena_init(&ctx->arena);
  ctx->nbuckets = 256;
  ctx->buckets = kiln_calloc(ctx->nbuckets, sizeof *ctx->buckets);
  return ctx;
}

void kiln_affine_ctx_destroy(kiln_affine_ctx_t *ctx) {
  if (!ctx) return;
  kiln_arena_destroy(&ctx->arena);
  kiln_free(ctx->buckets);
  kiln_free(ctx);
}

kiln_arena_t *kiln_affine_ctx_arena(kiln_affine_ctx_t *ctx) { return &ctx->arena; }
size_t kiln_affine_ctx_node_count(const kiln_affine_ctx_t *ctx) { return ctx->count; }

/* ---- hash-consing ---- */

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

static void grow(kiln_affine_ctx_t *ctx) {
  size_t nb = ctx->nbuckets * 2;
  kiln_affine_expr_t **b = kiln_calloc(nb, sizeof *b);
  for (size_t i = 0; i < ctx->nbuckets; i++) {
    kiln_affine_expr_t *e = ctx->buckets[i];
    while (e) {
      kiln_affine_expr_t *next = e->chain;
      size_t j = e->hash & (nb - 1);
      e->chain = b[j];
      b[j] = e;
      e = next;
    }
  }
  kiln_free(ctx->buckets);
  ctx->buckets = b;
  ctx->nbuckets = nb;
}

/* Returns the unique node with this exact structure (no canonicalization). */
static kiln_affine_expr_t *intern(kiln_affine_ctx_t *ctx, kiln_affine_kind_t kind,
                                  int64_t value, size_t n, kiln_affine_expr_t *const *ops) {
  uint64_t h = mix((uint64_t)kind, (uint64_t)value);
  h = mix(h, n);
  for (size_t i = 0; i < n; i++) h = mix(h, ops[i]->hash);
  size_t slot = h & (ctx->nbuckets - 1);
  for (kiln_affine_expr_t *e = ctx->buckets[slot]; e; e = e->chain) {
    if (e->hash == h && e->kind == kind && e->value == value && e->n == n &&
        (n == 0 || memcmp(e->ops, ops, n * sizeof *ops) == 0))
      return e;
  }
  kiln_affine_expr_t *e = kiln_arena_alloc(&ctx->arena, sizeof *e + n * sizeof *ops);
  if (!e) {
    /* The arena has no limit set, so this is true heap exhaustion. */
    e = kiln_malloc(1); /* aborts with a message; unreachable in practice */
  }
  e->kind = kind;
  e->n = (uint32_t)n;
  e->value = value;
  e->hash = h;
  if (n) memcpy(e->ops, ops, n * sizeof *ops);
  e->chain = ctx->buckets[slot];
  ctx->buckets[slot] = e;
  if (++ctx->count > ctx->nbuckets) grow(ctx);
  return e;
}

kiln_affine_expr_t *kiln_affine_const(kiln_affine_ctx_t *ctx, int64_t v) {
  return intern(ctx, KILN_AFFINE_CONST, v, 0, NULL);
}
kiln_affine_expr_t *kiln_affine_dim(kiln_affine_ctx_t *ctx, int64_t i) {
  return intern(ctx, KILN_AFFINE_DIM, i, 0, NULL);
}
kiln_affine_expr_t *kiln_affine_sym(kiln_affine_ctx_t *ctx, int64_t i) {
  return intern(ctx, KILN_AFFINE_SYM, i, 0, NULL);
}
kiln_affine_expr_t *kiln_affine_rt(kiln_affine_ctx_t *ctx, int64_t i) {
  return intern(ctx, KILN_AFFINE_RT, i, 0, NULL);
}

/* ---- order ---- */

static int expr_class(const kiln_affine_expr_t *e) {
  switch (e->kind) {
    case KILN_AFFINE_DIM: return 1;
    case KILN_AFFINE_SYM: return 2;
    case KILN_AFFINE_RT: return 3;
    case KILN_AFFINE_CONST: return 4;
    default: return 0;
  }
}

int kiln_affine_compare(const kiln_affine_expr_t *a, const kiln_affine_expr_t *b) {
  if (a == b) return 0;
  int ca = expr_class(a), cb = expr_class(b);
  if (ca != cb) return ca < cb ? -1 : 1;
  if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
  if (a->value != b->value) return a->value < b->value ? -1 : 1;
  if (a->n != b->n) return a->n < b->n ? -1 : 1;
  for (uint32_t i = 0; i < a->n; i++) {
    int c = kiln_affine_compare(a->ops[i], b->ops[i]);
    if (c) return c;
  }
  return 0;
}

kiln_affine_expr_t *kiln_affine_term_split(kiln_affine_expr_t *t, int64_t *coef) {
  if (t->kind == KILN_AFFINE_CONST) {
    *coef = t->value;
    return NULL;
  }
  if (t->kind == KILN_AFFINE_MUL && t->ops[1]->kind == KILN_AFFINE_CONST &&
      t->ops[0]->kind != KILN_AFFINE_CONST) {
    *coef = t->ops[1]->value;
    return t->ops[0];
  }
  *coef = 1;
  return t;
}

/* ---- sums ---- */

typedef struct term {
  kiln_affine_expr_t *atom; /* never NULL here; unmergeable constants are atoms */
  int64_t coef;
} term_t;

static int term_cmp(const void *pa, const void *pb) {
  const term_t *a = pa, *b = pb;
  int c = kiln_affine_compare(a->atom, b->atom);
  if (c) return c;
  return a->coef < b->coef ? -1 : a->coef > b->coef;
}

typedef struct term_list {
  term_t *data;
  size_t len, cap;
  int64_t constant;
} term_list_t;

static void terms_push(term_list_t *l, kiln_affine_expr_t *atom, int64_t coef) {
  if (l->len == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 8;
    l->data = kiln_realloc(l->data, l->cap * sizeof *l->data);
  }
  l->data[l->len].atom = atom;
  l->data[l->len].coef = coef;
  l->len++;
}

static void terms_add_term(kiln_affine_ctx_t *ctx, term_list_t *l, kiln_affine_expr_t *t) {
  int64_t coef;
  kiln_affine_expr_t *atom = kiln_affine_term_split(t, &coef);
  if (!atom) {
    int64_t s;
    if (__builtin_add_overflow(l->constant, coef, &s)) {
      terms_push(l, t, 1); /* keep the unmergeable constant as its own term */
    } else {
      l->constant = s;
    }
    return;
  }
  terms_push(l, atom, coef);
}

static void terms_add_expr(kiln_affine_ctx_t *ctx, term_list_t *l, kiln_affine_expr_t *e) {
  if (e->kind == KILN_AFFINE_ADD) {
    for (uint32_t i = 0; i < e->n; i++) terms_add_term(ctx, l, e->ops[i]);
  } else {
    terms_add_term(ctx, l, e);
  }
}

static kiln_affine_expr_t *terms_build(kiln_affine_ctx_t *ctx, term_list_t *l) {
  if (l->len > 1) qsort(l->data, l->len, sizeof *l->data, term_cmp);
  /* Merge like terms (sorted, so equal atoms are adjacent). */
  size_t out = 0;
  for (size_t i = 0; i < l->len; i++) {
    if (out > 0 && l->data[out - 1].atom == l->data[i].atom &&
        l->data[i].atom->kind != KILN_AFFINE_CONST) {
      int64_t s;
      if (!__builtin_add_overflow(l->data[out - 1].coef, l->data[i].coef, &s)) {
        l->data[out - 1].coef = s;
        continue;
      }
    }
    l->data[out++] = l->data[i];
  }
  size_t n = 0;
  kiln_affine_expr_t *stack_ops[16];
  kiln_affine_expr_t **ops = out + 1 <= 16 ? stack_ops : kiln_malloc((out + 1) * sizeof *ops);
  for (size_t i = 0; i < out; i++) {
    if (l->data[i].coef == 0) continue;
    kiln_affine_expr_t *atom = l->data[i].atom;
    int64_t c = l->data[i].coef;
    ops[n++] = c == 1 ? atom
                      : intern(ctx, KILN_AFFINE_MUL, 0, 2,
                               (kiln_affine_expr_t *[]){atom, kiln_affine_const(ctx, c)});
  }
  kiln_affine_expr_t *r;
  if (n == 0) {
    r = kiln_affine_const(ctx, l->constant);
  } else if (n == 1 && l->constant == 0) {
    r = ops[0];
  } else {
    if (l->constant != 0) ops[n++] = kiln_affine_const(ctx, l->constant);
    r = intern(ctx, KILN_AFFINE_ADD, 0, n, ops);
  }
  if (ops != stack_ops) kiln_free(ops);
  kiln_free(l->data);
  l->data = NULL;
  l->len = l->cap = 0;
  return r;
}

kiln_affine_expr_t *kiln_affine_sum(kiln_affine_ctx_t *ctx, size_t n,
                                    kiln_affine_expr_t *const *terms) {
  term_list_t l = {0};
  for (size_t i = 0; i < n; i++) terms_add_expr(ctx, &l, terms[i]);
  return terms_build(ctx, &l);
}

kiln_affine_expr_t *kiln_affine_add(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                    kiln_affine_expr_t *b) {
  if (a->kind == KILN_AFFINE_CONST && a->value == 0) return b;
  if (b->kind == KILN_AFFINE_CONST && b->value == 0) return a;
  return kiln_affine_sum(ctx, 2, (kiln_affine_expr_t *[]){a, b});
}

kiln_affine_expr_t *kiln_affine_add_const(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                          int64_t k) {
  return kiln_affine_add(ctx, a, kiln_affine_const(ctx, k));
}

/* ---- products ---- */

kiln_affine_expr_t *kiln_affine_mul_const(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                          int64_t k) {
  kiln_affine_expr_t *kc = kiln_affine_const(ctx, k);
  if (k == 0) return kc;
  if (k == 1) return a;
  int64_t p;
  switch (a->kind) {
    case KILN_AFFINE_CONST:
      if (!__builtin_mul_overflow(a->value, k, &p)) return kiln_affine_const(ctx, p);
      break;
    case KILN_AFFINE_ADD: {
      bool ok = true;
      for (uint32_t i = 0; i < a->n && ok; i++) {
        int64_t c;
        kiln_affine_term_split(a->ops[i], &c);
        ok = !__builtin_mul_overflow(c, k, &p);
      }
      if (!ok) break;
      term_list_t l = {0};
      for (uint32_t i = 0; i < a->n; i++) {
        int64_t c;
        kiln_affine_expr_t *atom = kiln_affine_term_split(a->ops[i], &c);
        if (!atom) {
          l.constant = c * k;
        } else {
          terms_push(&l, atom, c * k);
        }
      }
      return terms_build(ctx, &l);
    }
    case KILN_AFFINE_MUL:
      if (a->ops[1]->kind == KILN_AFFINE_CONST && a->ops[0]->kind != KILN_AFFINE_CONST &&
          !__builtin_mul_overflow(a->ops[1]->value, k, &p))
        return kiln_affine_mul_const(ctx, a->ops[0], p);
      break;
    default:
      break;
  }
  return intern(ctx, KILN_AFFINE_MUL, 0, 2, (kiln_affine_expr_t *[]){a, kc});
}

kiln_affine_expr_t *kiln_affine_mul(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                    kiln_affine_expr_t *b) {
  if (a->kind == KILN_AFFINE_CONST) {
    kiln_affine_expr_t *t = a;
    a = b;
    b = t;
  }
  if (b->kind == KILN_AFFINE_CONST) return kiln_affine_mul_const(ctx, a, b->value);
  int64_t ca, cb, c;
  kiln_affine_expr_t *xa = kiln_affine_term_split(a, &ca);
  kiln_affine_expr_t *xb = kiln_affine_term_split(b, &cb);
  if (__builtin_mul_overflow(ca, cb, &c)) {
    xa = a;
    xb = b;
    c = 1;
  }
  if (kiln_affine_compare(xa, xb) > 0) {
    kiln_affine_expr_t *t = xa;
    xa = xb;
    xb = t;
  }
  kiln_affine_expr_t *prod = intern(ctx, KILN_AFFINE_MUL, 0, 2, (kiln_affine_expr_t *[]){xa, xb});
  return kiln_affine_mul_const(ctx, prod, c);
}

kiln_affine_expr_t *kiln_affine_neg(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a) {
  return kiln_affine_mul_const(ctx, a, -1);
}

kiln_affine_expr_t *kiln_affine_sub(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                    kiln_affine_expr_t *b) {
  return kiln_affine_add(ctx, a, kiln_affine_neg(ctx, b));
}

/* ---- scalar semantics ---- */

bool kiln_affine_floordiv_i64(int64_t a, int64_t b, int64_t *out) {
  if (b == 0 || (a == INT64_MIN && b == -1)) return false;
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) q--;
  *out = q;
  return true;
}

bool kiln_affine_ceildiv_i64(int64_t a, int64_t b, int64_t *out) {
  if (b == 0 || (a == INT64_MIN && b == -1)) return false;
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) == (b < 0))) q++;
  *out = q;
  return true;
}

bool kiln_affine_mod_i64(int64_t a, int64_t b, int64_t *out) {
  if (b == 0) return false;
  if (b == -1) {
    *out = 0;
    return true;
  }
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  *out = r;
  return true;
}

/* ---- division-like ops, min, max ---- */

static kiln_affine_expr_t *binary(kiln_affine_ctx_t *ctx, kiln_affine_kind_t kind,
                                  kiln_affine_expr_t *a, kiln_affine_expr_t *b) {
  if (a->kind == KILN_AFFINE_CONST && b->kind == KILN_AFFINE_CONST) {
    int64_t r;
    bool ok = kind == KILN_AFFINE_FLOORDIV  ? kiln_affine_floordiv_i64(a->value, b->value, &r)
              : kind == KILN_AFFINE_CEILDIV ? kiln_affine_ceildiv_i64(a->value, b->value, &r)
                                            : kiln_affine_mod_i64(a->value, b->value, &r);
    if (ok) return kiln_affine_const(ctx, r);
  }
  if (b->kind == KILN_AFFINE_CONST && b->value == 1)
    return kind == KILN_AFFINE_MOD ? kiln_affine_const(ctx, 0) : a;
  return intern(ctx, kind, 0, 2, (kiln_affine_expr_t *[]){a, b});
}

kiln_affine_expr_t *kiln_affine_floordiv(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                         kiln_affine_expr_t *b) {
  return binary(ctx, KILN_AFFINE_FLOORDIV, a, b);
}
kiln_affine_expr_t *kiln_affine_ceildiv(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                        kiln_affine_expr_t *b) {
  return binary(ctx, KILN_AFFINE_CEILDIV, a, b);
}
kiln_affine_expr_t *kiln_affine_mod(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                    kiln_affine_expr_t *b) {
  return binary(ctx, KILN_AFFINE_MOD, a, b);
}

static int ptr_cmp(const void *pa, const void *pb) {
  return kiln_affine_compare(*(kiln_affine_expr_t *const *)pa, *(kiln_affine_expr_t *const *)pb);
}

static kiln_affine_expr_t *minmax(kiln_affine_ctx_t *ctx, kiln_affine_kind_t kind, size_t n,
                                  kiln_affine_expr_t *const *in) {
  KILN_VEC(kiln_affine_expr_t *) ops = {0};
  bool have_const = false;
  int64_t cval = 0;
  for (size_t i = 0; i < n; i++) {
    kiln_affine_expr_t *e = in[i];
    size_t m = e->kind == kind ? e->n : 1;
    for (size_t j = 0; j < m; j++) {
      kiln_affine_expr_t *x = e->kind == kind ? e->ops[j] : e;
      if (x->kind == KILN_AFFINE_CONST) {
        if (!have_const || (kind == KILN_AFFINE_MIN ? x->value < cval : x->value > cval))
          cval = x->value;
        have_const = true;
      } else {
        kiln_vec_push(&ops, x);
      }
    }
  }
  if (have_const) kiln_vec_push(&ops, kiln_affine_const(ctx, cval));
  if (ops.len > 1) qsort(ops.data, ops.len, sizeof *ops.data, ptr_cmp);
  size_t out = 0;
  for (size_t i = 0; i < ops.len; i++)
    if (out == 0 || ops.data[out - 1] != ops.data[i]) ops.data[out++] = ops.data[i];
  kiln_affine_expr_t *r = out == 1 ? ops.data[0] : intern(ctx, kind, 0, out, ops.data);
  kiln_vec_free(&ops);
  return r;
}

kiln_affine_expr_t *kiln_affine_min(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                    kiln_affine_expr_t *b) {
  return minmax(ctx, KILN_AFFINE_MIN, 2, (kiln_affine_expr_t *[]){a, b});
}
kiln_affine_expr_t *kiln_affine_max(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *a,
                                    kiln_affine_expr_t *b) {
  return minmax(ctx, KILN_AFFINE_MAX, 2, (kiln_affine_expr_t *[]){a, b});
}

kiln_affine_expr_t *kiln_affine_build(kiln_affine_ctx_t *ctx, kiln_affine_kind_t kind,
                                      size_t n, kiln_affine_expr_t *const *ops) {
  switch (kind) {
    case KILN_AFFINE_ADD: return kiln_affine_sum(ctx, n, ops);
    case KILN_AFFINE_MUL: return kiln_affine_mul(ctx, ops[0], ops[1]);
    case KILN_AFFINE_FLOORDIV:
    case KILN_AFFINE_CEILDIV:
    case KILN_AFFINE_MOD: return binary(ctx, kind, ops[0], ops[1]);
    case KILN_AFFINE_MIN:
    case KILN_AFFINE_MAX: return minmax(ctx, kind, n, ops);
    default: return ops ? ops[0] : kiln_affine_const(ctx, 0);
  }
}

/* ---- evaluation ---- */

bool kiln_affine_eval(const kiln_affine_expr_t *e, const int64_t *dims, const int64_t *syms,
                      const int64_t *rts, int64_t *out) {
  int64_t a, b;
  switch (e->kind) {
    case KILN_AFFINE_CONST: *out = e->value; return true;
    case KILN_AFFINE_DIM: *out = dims[e->value]; return true;
    case KILN_AFFINE_SYM: *out = syms[e->value]; return true;
    case KILN_AFFINE_RT: *out = rts[e->value]; return true;
    case KILN_AFFINE_ADD:
    case KILN_AFFINE_MIN:
    case KILN_AFFINE_MAX: {
      if (!kiln_affine_eval(e->ops[0], dims, syms, rts, &a)) return false;
      for (uint32_t i = 1; i < e->n; i++) {
        if (!kiln_affine_eval(e->ops[i], dims, syms, rts, &b)) return false;
        if (e->kind == KILN_AFFINE_ADD) {
          if (__builtin_add_overflow(a, b, &a)) return false;
        } else if (e->kind == KILN_AFFINE_MIN) {
          a = b < a ? b : a;
        } else {
          a = b > a ? b : a;
        }
      }
      *out = a;
      return true;
    }
    default: break;
  }
  if (!kiln_affine_eval(e->ops[0], dims, syms, rts, &a)) return false;
  if (!kiln_affine_eval(e->ops[1], dims, syms, rts, &b)) return false;
  switch (e->kind) {
    case KILN_AFFINE_MUL: return !__builtin_mul_overflow(a, b, out);
    case KILN_AFFINE_FLOORDIV: return kiln_affine_floordiv_i64(a, b, out);
    case KILN_AFFINE_CEILDIV: return kiln_affine_ceildiv_i64(a, b, out);
    case KILN_AFFINE_MOD: return kiln_affine_mod_i64(a, b, out);
    default: return false;
  }
}

/* ---- substitution and variable collection ---- */

typedef struct replace_env {
  kiln_affine_ctx_t *ctx;
  kiln_affine_expr_t *const *repl[3];
  size_t nrepl[3];
  kiln_ptrmap_t memo;
} replace_env_t;

static kiln_affine_expr_t *replace_rec(replace_env_t *env, kiln_affine_expr_t *e) {
  int which = e->kind == KILN_AFFINE_DIM ? 0 : e->kind == KILN_AFFINE_SYM ? 1
              : e->kind == KILN_AFFINE_RT ? 2 : -1;
  if (which >= 0) {
    size_t i = (size_t)e->value;
    if (env->repl[which] && i < env->nrepl[which] && env->repl[which][i])
      return env->repl[which][i];
    return e;
  }
  if (e->n == 0) return e;
  kiln_affine_expr_t *m = kiln_ptrmap_get(&env->memo, e);
  if (m) return m;
  kiln_affine_expr_t *stack_ops[8];
  kiln_affine_expr_t **ops = e->n <= 8 ? stack_ops : kiln_malloc(e->n * sizeof *ops);
  bool changed = false;
  for (uint32_t i = 0; i < e->n; i++) {
    ops[i] = replace_rec(env, e->ops[i]);
    changed |= ops[i] != e->ops[i];
  }
  kiln_affine_expr_t *r = changed ? kiln_affine_build(env->ctx, e->kind, e->n, ops) : e;
  if (ops != stack_ops) kiln_free(ops);
  kiln_ptrmap_put(&env->memo, e, r);
  return r;
}

kiln_affine_expr_t *kiln_affine_replace(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *e,
                                        kiln_affine_expr_t *const *dims, size_t ndims,
                                        kiln_affine_expr_t *const *syms, size_t nsyms,
                                        kiln_affine_expr_t *const *rts, size_t nrts) {
  replace_env_t env = {ctx, {dims, syms, rts}, {ndims, nsyms, nrts}, {0}};
  kiln_ptrmap_init(&env.memo);
  kiln_affine_expr_t *r = replace_rec(&env, e);
  kiln_ptrmap_free(&env.memo);
  return r;
}

void kiln_affine_collect_vars(const kiln_affine_expr_t *e, bool *dims, size_t ndims,
                              bool *syms, size_t nsyms, bool *rts, size_t nrts) {
  switch (e->kind) {
    case KILN_AFFINE_DIM:
      if (dims && (uint64_t)e->value < ndims) dims[e->value] = true;
      return;
    case KILN_AFFINE_SYM:
      if (syms && (uint64_t)e->value < nsyms) syms[e->value] = true;
      return;
    case KILN_AFFINE_RT:
      if (rts && (uint64_t)e->value < nrts) rts[e->value] = true;
      return;
    default:
      for (uint32_t i = 0; i < e->n; i++)
        kiln_affine_collect_vars(e->ops[i], dims, ndims, syms, nsyms, rts, nrts);
  }
}

/* ---- printing ---- */

static void print_var(const char *const *names, size_t n, const char *prefix, int64_t i,
                      kiln_strbuf_t *out) {
  if (names && i >= 0 && (uint64_t)i < n && names[i]) {
    kiln_strbuf_append(out, names[i]);
  } else {
    kiln_strbuf_printf(out, "%s%" PRId64, prefix, i);
  }
}

static void print_rec(const kiln_affine_expr_t *e, const kiln_affine_names_t *nm,
                      kiln_strbuf_t *out);

/* Operands of *, floordiv, ceildiv and mod: parenthesize anything that is itself an
 * infix operation. */
static void print_strong(const kiln_affine_expr_t *e, const kiln_affine_names_t *nm,
                         kiln_strbuf_t *out) {
  bool paren = e->kind == KILN_AFFINE_ADD || e->kind == KILN_AFFINE_MUL ||
               e->kind == KILN_AFFINE_FLOORDIV || e->kind == KILN_AFFINE_CEILDIV ||
               e->kind == KILN_AFFINE_MOD;
  if (paren) kiln_strbuf_append_char(out, '(');
  print_rec(e, nm, out);
  if (paren) kiln_strbuf_append_char(out, ')');
}

static void print_sum_term(const kiln_affine_expr_t *t, bool first,
                           const kiln_affine_names_t *nm, kiln_strbuf_t *out) {
  int64_t c;
  kiln_affine_expr_t *atom = kiln_affine_term_split((kiln_affine_expr_t *)t, &c);
  if (!atom) {
    if (first) kiln_strbuf_printf(out, "%" PRId64, c);
    else if (c < 0 && c != INT64_MIN) kiln_strbuf_printf(out, " - %" PRId64, -c);
    else kiln_strbuf_printf(out, " + %" PRId64, c);
    return;
  }
  if (!first) {
    if (c < 0 && c != INT64_MIN) {
      kiln_strbuf_append(out, " - ");
      c = -c;
    } else {
      kiln_strbuf_append(out, " + ");
    }
  }
  if (c == 1) {
    if (atom->kind == KILN_AFFINE_ADD) print_strong(atom, nm, out);
    else print_rec(atom, nm, out);
  } else if (c == -1) {
    kiln_strbuf_append_char(out, '-');
    print_strong(atom, nm, out);
  } else {
    print_strong(atom, nm, out);
    kiln_strbuf_printf(out, " * %" PRId64, c);
  }
}

static void print_rec(const kiln_affine_expr_t *e, const kiln_affine_names_t *nm,
                      kiln_strbuf_t *out) {
  switch (e->kind) {
    case KILN_AFFINE_CONST: kiln_strbuf_printf(out, "%" PRId64, e->value); return;
    case KILN_AFFINE_DIM: print_var(nm ? nm->dims : NULL, nm ? nm->ndims : 0, "d", e->value, out); return;
    case KILN_AFFINE_SYM: print_var(nm ? nm->syms : NULL, nm ? nm->nsyms : 0, "s", e->value, out); return;
    case KILN_AFFINE_RT: print_var(nm ? nm->rts : NULL, nm ? nm->nrts : 0, "rt", e->value, out); return;
    case KILN_AFFINE_ADD:
      for (uint32_t i = 0; i < e->n; i++) print_sum_term(e->ops[i], i == 0, nm, out);
      return;
    case KILN_AFFINE_MUL:
      if (e->ops[1]->kind == KILN_AFFINE_CONST && e->ops[0]->kind != KILN_AFFINE_CONST) {
        print_sum_term(e, true, nm, out);
        return;
      }
      print_strong(e->ops[0], nm, out);
      kiln_strbuf_append(out, " * ");
      print_strong(e->ops[1], nm, out);
      return;
    case KILN_AFFINE_FLOORDIV:
    case KILN_AFFINE_CEILDIV:
    case KILN_AFFINE_MOD:
      print_strong(e->ops[0], nm, out);
      kiln_strbuf_append(out, e->kind == KILN_AFFINE_FLOORDIV  ? " floordiv "
                              : e->kind == KILN_AFFINE_CEILDIV ? " ceildiv "
                                                               : " mod ");
      print_strong(e->ops[1], nm, out);
      return;
    case KILN_AFFINE_MIN:
    case KILN_AFFINE_MAX:
      kiln_strbuf_append(out, e->kind == KILN_AFFINE_MIN ? "min(" : "max(");
      for (uint32_t i = 0; i < e->n; i++) {
        if (i) kiln_strbuf_append(out, ", ");
        print_rec(e->ops[i], nm, out);
      }
      kiln_strbuf_append_char(out, ')');
      return;
  }
}

void kiln_affine_print(const kiln_affine_expr_t *e, const kiln_affine_names_t *names,
                       kiln_strbuf_t *out) {
  print_rec(e, names, out);
}

const char *kiln_affine_to_string(kiln_affine_ctx_t *ctx, const kiln_affine_expr_t *e) {
  kiln_strbuf_t b = {0};
  print_rec(e, NULL, &b);
  const char *s = kiln_arena_strdup(&ctx->arena, kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return s;
}
