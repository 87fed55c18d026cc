/* Indexing maps: construction, printing, evaluation, brute-force enumeration,
 * composition and removal of unused symbols. Parsing is in indexing_map_parse.c, the
 * simplifier and bounds in indexing_map_simplify.c. */
#include "compiler/analysis/indexing_map.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/analysis/indexing_map_internal.h"

static const char *const kDefaultPrefix[3] = {"d", "s", "rt"};

kiln_indexing_map_t *kiln_indexing_map_create(kiln_affine_ctx_t *ctx, size_t ndims,
                                              size_t nsyms, size_t nrts) {
  kiln_indexing_map_t *m = kiln_calloc(1, sizeof *m);
  m->ctx = ctx;
  size_t counts[3] = {ndims, nsyms, nrts};
  for (int k = 0; k < 3; k++) {
    for (size_t i = 0; i < counts[k]; i++) {
      kiln_indexing_var_t v = {NULL, KILN_INTERVAL_FULL};
      kiln_vec_push(&m->vars[k], v);
    }
  }
  return m;
}

void kiln_indexing_map_free(kiln_indexing_map_t *m) {
  if (!m) return;
  for (int k = 0; k < 3; k++) kiln_vec_free(&m->vars[k]);
  kiln_vec_free(&m->results);
  kiln_vec_free(&m->constraints);
  kiln_free(m);
}

kiln_indexing_map_t *kiln_indexing_map_clone(const kiln_indexing_map_t *m) {
  kiln_indexing_map_t *c = kiln_indexing_map_create(m->ctx, 0, 0, 0);
  for (int k = 0; k < 3; k++)
    for (size_t i = 0; i < m->vars[k].len; i++) kiln_vec_push(&c->vars[k], m->vars[k].data[i]);
  for (size_t i = 0; i < m->results.len; i++) kiln_vec_push(&c->results, m->results.data[i]);
  for (size_t i = 0; i < m->constraints.len; i++)
    kiln_vec_push(&c->constraints, m->constraints.data[i]);
  c->known_empty = m->known_empty;
  return c;
}

void kiln_indexing_map_add_result(kiln_indexing_map_t *m, kiln_affine_expr_t *e) {
  kiln_vec_push(&m->results, e);
}

void kiln_indexing_map_add_constraint(kiln_indexing_map_t *m, kiln_affine_expr_t *e,
                                      int64_t lo, int64_t hi) {
  int k = e->kind == KILN_AFFINE_DIM ? 0 : e->kind == KILN_AFFINE_SYM ? 1
          : e->kind == KILN_AFFINE_RT ? 2 : -1;
  if (k >= 0 && (uint64_t)e->value < m->vars[k].len) {
    /* A bound on one variable is kept as its interval (intersected). */
    kiln_interval_t *b = &m->vars[k].data[e->value].bounds;
    if (lo > b->lo) b->lo = lo;
    if (hi < b->hi) b->hi = hi;
    return;
  }
  kiln_indexing_constraint_t c = {e, {lo, hi}};
  kiln_vec_push(&m->constraints, c);
}

void kiln_indexing_map_set_bounds(kiln_indexing_map_t *m, kiln_indexing_var_kind_t kind,
                                  size_t i, int64_t lo, int64_t hi) {
  if (i < m->vars[kind].len) m->vars[kind].data[i].bounds = (kiln_interval_t){lo, hi};
}

bool kiln_indexing_name_is_valid(const char *s, size_t n) {
  static const char *const kKeywords[] = {"floordiv", "ceildiv", "mod", "min",
                                          "max",      "in",      "domain"};
  if (n == 0) return false;
  if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
    return false;
  for (size_t i = 1; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_'))
      return false;
  }
  for (size_t k = 0; k < sizeof kKeywords / sizeof *kKeywords; k++)
    if (strlen(kKeywords[k]) == n && memcmp(kKeywords[k], s, n) == 0) return false;
  return true;
}

kiln_status kiln_indexing_map_set_name(kiln_indexing_map_t *m, kiln_indexing_var_kind_t kind,
                                       size_t i, const char *name) {
  if (i >= m->vars[kind].len)
    return KILN_ERR_INVALID("variable index %zu out of range (%zu variables)", i,
                            m->vars[kind].len);
  if (!name) {
    m->vars[kind].data[i].name = NULL;
    return NULL;
  }
  if (!kiln_indexing_name_is_valid(name, strlen(name)))
    return KILN_ERR_INVALID("'%s' is not a valid variable name", name);
  m->vars[kind].data[i].name = kiln_arena_strdup(kiln_affine_ctx_arena(m->ctx), name);
  return NULL;
}

kiln_indexing_map_t *kiln_indexing_map_identity(kiln_affine_ctx_t *ctx, const int64_t *shape,
                                                size_t rank) {
  kiln_indexing_map_t *m = kiln_indexing_map_create(ctx, rank, 0, 0);
  for (size_t i = 0; i < rank; i++) {
    kiln_indexing_map_set_bounds(m, KILN_INDEXING_DIM, i, 0, shape[i] - 1);
    kiln_indexing_map_add_result(m, kiln_affine_dim(ctx, (int64_t)i));
  }
  return m;
}

void kiln_affine_delinearize(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *linear,
                             const int64_t *shape, size_t rank, kiln_affine_expr_t **out) {
  int64_t stride = 1;
  for (size_t i = rank; i-- > 0;) {
    kiln_affine_expr_t *q = kiln_affine_floordiv(ctx, linear, kiln_affine_const(ctx, stride));
    out[i] = i == 0 ? q : kiln_affine_mod(ctx, q, kiln_affine_const(ctx, shape[i]));
    if (__builtin_mul_overflow(stride, shape[i], &stride)) stride = INT64_MAX;
  }
}

kiln_affine_expr_t *kiln_affine_linearize(kiln_affine_ctx_t *ctx, kiln_affine_expr_t *const *idx,
                                          const int64_t *shape, size_t rank) {
  kiln_affine_expr_t *sum = kiln_affine_const(ctx, 0);
  int64_t stride = 1;
  for (size_t i = rank; i-- > 0;) {
    sum = kiln_affine_add(ctx, sum, kiln_affine_mul_const(ctx, idx[i], stride));
    if (__builtin_mul_overflow(stride, shape[i], &stride)) stride = INT64_MAX;
  }
  return sum;
}

/* ---- printing ---- */

/* Effective names for printing: custom names if all printed names are distinct, else
 * the default names for every variable (so the text always parses back). */
static void effective_names(const kiln_indexing_map_t *m, const char **names[3],
                            kiln_strbuf_t *scratch) {
  size_t total = 0;
  for (int k = 0; k < 3; k++) total += m->vars[k].len;
  bool custom = false;
  for (int k = 0; k < 3; k++)
    for (size_t i = 0; i < m->vars[k].len; i++) custom |= m->vars[k].data[i].name != NULL;
  for (int k = 0; k < 3; k++) names[k] = NULL;
  if (!custom) return;
  /* Collect printed names and check for duplicates (quadratic; maps are small). */
  char **all = kiln_malloc((total ? total : 1) * sizeof *all);
  size_t n = 0;
  for (int k = 0; k < 3; k++) {
    for (size_t i = 0; i < m->vars[k].len; i++) {
      const char *nm = m->vars[k].data[i].name;
      if (nm) {
        all[n++] = kiln_strdup(nm);
      } else {
        kiln_strbuf_free(scratch);
        kiln_strbuf_printf(scratch, "%s%zu", kDefaultPrefix[k], i);
        all[n++] = kiln_strbuf_take(scratch);
      }
    }
  }
  bool unique = true;
  for (size_t i = 0; i < n && unique; i++)
    for (size_t j = i + 1; j < n && unique; j++) unique = strcmp(all[i], all[j]) != 0;
  for (size_t i = 0; i < n; i++) kiln_free(all[i]);
  kiln_free(all);
  if (!unique) return;
  for (int k = 0; k < 3; k++) {
    if (!m->vars[k].len) continue;
    const char **arr = kiln_malloc(m->vars[k].len * sizeof *arr);
    for (size_t i = 0; i < m->vars[k].len; i++) arr[i] = m->vars[k].data[i].name;
    names[k] = arr;
  }
}

static int constraint_cmp(const void *pa, const void *pb) {
  const kiln_indexing_constraint_t *a = pa, *b = pb;
  int c = kiln_affine_compare(a->expr, b->expr);
  if (c) return c;
  if (a->range.lo != b->range.lo) return a->range.lo < b->range.lo ? -1 : 1;
  if (a->range.hi != b->range.hi) return a->range.hi < b->range.hi ? -1 : 1;
  return 0;
}

static void print_var_name(const char **names, int kind, size_t i, kiln_strbuf_t *out) {
  if (names && names[i]) kiln_strbuf_append(out, names[i]);
  else kiln_strbuf_printf(out, "%s%zu", kDefaultPrefix[kind], i);
}

void kiln_indexing_map_print(const kiln_indexing_map_t *m, kiln_strbuf_t *out) {
  kiln_strbuf_t scratch = {0};
  const char **names[3];
  effective_names(m, names, &scratch);
  kiln_strbuf_free(&scratch);
  kiln_affine_names_t nm = {names[0], m->vars[0].len, names[1], m->vars[1].len,
                            names[2], m->vars[2].len};
  static const char kOpen[3] = {'(', '[', '{'}, kClose[3] = {')', ']', '}'};
  for (int k = 0; k < 3; k++) {
    if (k > 0 && m->vars[k].len == 0) continue;
    kiln_strbuf_append_char(out, kOpen[k]);
    for (size_t i = 0; i < m->vars[k].len; i++) {
      if (i) kiln_strbuf_append(out, ", ");
      print_var_name(names[k], k, i, out);
    }
    kiln_strbuf_append_char(out, kClose[k]);
  }
  kiln_strbuf_append(out, " -> (");
  for (size_t i = 0; i < m->results.len; i++) {
    if (i) kiln_strbuf_append(out, ", ");
    kiln_affine_print(m->results.data[i], &nm, out);
  }
  kiln_strbuf_append_char(out, ')');
  if (m->known_empty) {
    kiln_strbuf_append(out, ", domain: KNOWN EMPTY");
  } else {
    bool first = true;
    for (int k = 0; k < 3; k++) {
      for (size_t i = 0; i < m->vars[k].len; i++) {
        kiln_interval_t b = m->vars[k].data[i].bounds;
        if (kiln_interval_is_full(b)) continue;
        kiln_strbuf_append(out, first ? ", domain: " : ", ");
        first = false;
        print_var_name(names[k], k, i, out);
        kiln_strbuf_printf(out, " in [%" PRId64 ", %" PRId64 "]", b.lo, b.hi);
      }
    }
    size_t nc = m->constraints.len;
    if (nc) {
      kiln_indexing_constraint_t *cs = kiln_malloc(nc * sizeof *cs);
      memcpy(cs, m->constraints.data, nc * sizeof *cs);
      qsort(cs, nc, sizeof *cs, constraint_cmp);
      for (size_t i = 0; i < nc; i++) {
        kiln_strbuf_append(out, first ? ", domain: " : ", ");
        first = false;
        kiln_affine_print(cs[i].expr, &nm, out);
        kiln_strbuf_printf(out, " in [%" PRId64 ", %" PRId64 "]", cs[i].range.lo,
                           cs[i].range.hi);
      }
      kiln_free(cs);
    }
  }
  for (int k = 0; k < 3; k++) kiln_free((void *)names[k]);
}

char *kiln_indexing_map_to_string(const kiln_indexing_map_t *m) {
  kiln_strbuf_t b = {0};
  kiln_indexing_map_print(m, &b);
  if (!b.data) kiln_strbuf_append(&b, "");
  return kiln_strbuf_take(&b);
}

/* ---- evaluation and enumeration ---- */

bool kiln_indexing_map_contains(const kiln_indexing_map_t *m, const int64_t *dims,
                                const int64_t *syms, const int64_t *rts) {
  if (m->known_empty) return false;
  const int64_t *vals[3] = {dims, syms, rts};
  for (int k = 0; k < 3; k++) {
    for (size_t i = 0; i < m->vars[k].len; i++) {
      kiln_interval_t b = m->vars[k].data[i].bounds;
      if (vals[k][i] < b.lo || vals[k][i] > b.hi) return false;
    }
  }
  for (size_t i = 0; i < m->constraints.len; i++) {
    int64_t v;
    const kiln_indexing_constraint_t *c = &m->constraints.data[i];
    if (!kiln_affine_eval(c->expr, dims, syms, rts, &v)) return false;
    if (v < c->range.lo || v > c->range.hi) return false;
  }
  return true;
}

bool kiln_indexing_map_eval(const kiln_indexing_map_t *m, const int64_t *dims,
                            const int64_t *syms, const int64_t *rts, int64_t *out) {
  for (size_t i = 0; i < m->results.len; i++)
    if (!kiln_affine_eval(m->results.data[i], dims, syms, rts, &out[i])) return false;
  return true;
}

kiln_status kiln_indexing_map_for_each_point(const kiln_indexing_map_t *m, uint64_t max_points,
                                             kiln_indexing_point_fn fn, void *user) {
  size_t nd = m->vars[0].len, ns = m->vars[1].len, nr = m->vars[2].len;
  size_t n = nd + ns + nr;
  if (m->known_empty) return NULL;
  kiln_interval_t *box = kiln_malloc((n ? n : 1) * sizeof *box);
  uint64_t count = 1;
  size_t j = 0;
  for (int k = 0; k < 3; k++) {
    for (size_t i = 0; i < m->vars[k].len; i++, j++) {
      kiln_interval_t b = m->vars[k].data[i].bounds;
      box[j] = b;
      if (kiln_interval_is_empty(b)) count = 0;
    }
  }
  if (count == 0) {
    kiln_free(box);
    return NULL;
  }
  for (j = 0; j < n; j++) {
    kiln_interval_t b = box[j];
    if (b.lo == INT64_MIN || b.hi == INT64_MAX) {
      kiln_free(box);
      return kiln_status_make(KILN_OUT_OF_RANGE, "variable %zu is unbounded", j);
    }
    uint64_t size = (uint64_t)b.hi - (uint64_t)b.lo + 1;
    if (size > max_points / count) {
      kiln_free(box);
      return kiln_status_make(KILN_OUT_OF_RANGE, "domain has more than %" PRIu64 " points",
                              max_points);
    }
    count *= size;
  }
  int64_t *vals = kiln_malloc((n ? n : 1) * sizeof *vals);
  int64_t *res = kiln_malloc((m->results.len ? m->results.len : 1) * sizeof *res);
  for (j = 0; j < n; j++) vals[j] = box[j].lo;
  kiln_status st = NULL;
  for (;;) {
    const int64_t *d = vals, *s = vals + nd, *r = vals + nd + ns;
    if (kiln_indexing_map_contains(m, d, s, r)) {
      if (!kiln_indexing_map_eval(m, d, s, r, res)) {
        st = KILN_ERR_INVALID("a result cannot be evaluated at a domain point");
        break;
      }
      if (!fn(user, d, s, r, res)) break;
    }
    size_t k = n;
    while (k > 0 && vals[k - 1] == box[k - 1].hi) {
      vals[k - 1] = box[k - 1].lo;
      k--;
    }
    if (k == 0) break;
    vals[k - 1]++;
  }
  kiln_free(vals);
  kiln_free(res);
  kiln_free(box);
  return st;
}

typedef struct bijection_env {
  const int64_t *sizes;
  size_t nres;
  unsigned char *seen;
  uint64_t hits;
  bool ok;
} bijection_env_t;

static bool bijection_visit(void *user, const int64_t *d, const int64_t *s, const int64_t *r,
                            const int64_t *res) {
  bijection_env_t *env = user;
  uint64_t idx = 0;
  for (size_t i = 0; i < env->nres; i++) {
    if (res[i] < 0 || res[i] >= env->sizes[i]) {
      env->ok = false;
      return false;
    }
    idx = idx * (uint64_t)env->sizes[i] + (uint64_t)res[i];
  }
  if (env->seen[idx]) {
    env->ok = false;
    return false;
  }
  env->seen[idx] = 1;
  env->hits++;
  return true;
}

kiln_status kiln_indexing_map_is_bijection_brute(const kiln_indexing_map_t *m,
                                                 const int64_t *sizes, uint64_t max_points,
                                                 bool *out) {
  *out = false;
  uint64_t total = 1;
  for (size_t i = 0; i < m->results.len; i++) {
    if (sizes[i] < 0 || (sizes[i] > 0 && total > max_points / (uint64_t)sizes[i]))
      return kiln_status_make(KILN_OUT_OF_RANGE, "codomain has more than %" PRIu64 " points",
                              max_points);
    total *= (uint64_t)sizes[i];
  }
  bijection_env_t env = {sizes, m->results.len, kiln_calloc(total ? total : 1, 1), 0, true};
  kiln_status st = kiln_indexing_map_for_each_point(m, max_points, bijection_visit, &env);
  if (!st) *out = env.ok && env.hits == total;
  kiln_free(env.seen);
  return st;
}

/* ---- composition ---- */

kiln_status kiln_indexing_map_compose(const kiln_indexing_map_t *a, const kiln_indexing_map_t *b,
                                      kiln_indexing_map_t **out) {
  *out = NULL;
  if (a->ctx != b->ctx)
    return KILN_ERR_INVALID("cannot compose maps from different affine contexts");
  if (a->results.len != b->vars[0].len)
    return KILN_ERR_INVALID("cannot compose: first map has %zu results, second has %zu dims",
                            a->results.len, b->vars[0].len);
  kiln_affine_ctx_t *ctx = a->ctx;
  kiln_indexing_map_t *m = kiln_indexing_map_create(ctx, 0, 0, 0);
  for (int k = 0; k < 3; k++) {
    for (size_t i = 0; i < a->vars[k].len; i++) kiln_vec_push(&m->vars[k], a->vars[k].data[i]);
    if (k == 0) continue;
    for (size_t i = 0; i < b->vars[k].len; i++) kiln_vec_push(&m->vars[k], b->vars[k].data[i]);
  }
  size_t nsb = b->vars[1].len, nrb = b->vars[2].len;
  kiln_affine_expr_t **syms = kiln_malloc((nsb ? nsb : 1) * sizeof *syms);
  kiln_affine_expr_t **rts = kiln_malloc((nrb ? nrb : 1) * sizeof *rts);
  for (size_t i = 0; i < nsb; i++) syms[i] = kiln_affine_sym(ctx, (int64_t)(a->vars[1].len + i));
  for (size_t i = 0; i < nrb; i++) rts[i] = kiln_affine_rt(ctx, (int64_t)(a->vars[2].len + i));
  kiln_affine_expr_t *const *ys = a->results.data;
  size_t ny = a->results.len;
  for (size_t i = 0; i < b->results.len; i++)
    kiln_vec_push(&m->results,
                  kiln_affine_replace(ctx, b->results.data[i], ys, ny, syms, nsb, rts, nrb));
  for (size_t i = 0; i < a->constraints.len; i++)
    kiln_vec_push(&m->constraints, a->constraints.data[i]);
  for (size_t i = 0; i < ny; i++) {
    kiln_interval_t bd = b->vars[0].data[i].bounds;
    if (!kiln_interval_is_full(bd)) kiln_indexing_map_add_constraint(m, ys[i], bd.lo, bd.hi);
  }
  for (size_t i = 0; i < b->constraints.len; i++) {
    const kiln_indexing_constraint_t *c = &b->constraints.data[i];
    kiln_indexing_map_add_constraint(
        m, kiln_affine_replace(ctx, c->expr, ys, ny, syms, nsb, rts, nrb), c->range.lo,
        c->range.hi);
  }
  m->known_empty = a->known_empty || b->known_empty;
  kiln_free(syms);
  kiln_free(rts);
  *out = m;
  return NULL;
}

/* ---- unused symbols ---- */

bool kiln_indexing_map_remove_unused_symbols(kiln_indexing_map_t *m) {
  size_t ns = m->vars[1].len, nr = m->vars[2].len;
  bool *used = kiln_calloc(ns + nr + 1, sizeof *used);
  for (size_t i = 0; i < m->results.len; i++)
    kiln_affine_collect_vars(m->results.data[i], NULL, 0, used, ns, used + ns, nr);
  for (size_t i = 0; i < m->constraints.len; i++)
    kiln_affine_collect_vars(m->constraints.data[i].expr, NULL, 0, used, ns, used + ns, nr);
  /* A variable with an empty interval makes the domain empty: keep it. */
  for (size_t i = 0; i < ns; i++) used[i] |= kiln_interval_is_empty(m->vars[1].data[i].bounds);
  for (size_t i = 0; i < nr; i++)
    used[ns + i] |= kiln_interval_is_empty(m->vars[2].data[i].bounds);
  bool any = false;
  for (size_t i = 0; i < ns + nr; i++) any |= !used[i];
  if (!any) {
    kiln_free(used);
    return false;
  }
  kiln_affine_expr_t **repl = kiln_calloc(ns + nr + 1, sizeof *repl);
  size_t next[3] = {0, 0, 0};
  for (int k = 1; k < 3; k++) {
    size_t base = k == 1 ? 0 : ns;
    size_t out = 0;
    for (size_t i = 0; i < m->vars[k].len; i++) {
      if (!used[base + i]) continue;
      repl[base + i] = k == 1 ? kiln_affine_sym(m->ctx, (int64_t)out)
                              : kiln_affine_rt(m->ctx, (int64_t)out);
      m->vars[k].data[out++] = m->vars[k].data[i];
    }
    next[k] = out;
  }
  m->vars[1].len = next[1];
  m->vars[2].len = next[2];
  for (size_t i = 0; i < m->results.len; i++)
    m->results.data[i] =
        kiln_affine_replace(m->ctx, m->results.data[i], NULL, 0, repl, ns, repl + ns, nr);
  for (size_t i = 0; i < m->constraints.len; i++)
    m->constraints.data[i].expr = kiln_affine_replace(m->ctx, m->constraints.data[i].expr,
                                                      NULL, 0, repl, ns, repl + ns, nr);
  kiln_free(repl);
  kiln_free(used);
  return true;
}
