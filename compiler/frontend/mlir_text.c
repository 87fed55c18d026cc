/* The MLIR text reader: module structure, func.func, generic ops, regions, blocks and SSA
 * values. Pretty op forms are in mlir_pretty.c, types in mlir_types.c, attributes in
 * mlir_attrs.c, scanning in mlir_lexer.c. */
#include "compiler/frontend/mlir_text.h"

#include <string.h>

#include "compiler/frontend/mlir_text_internal.h"

/* ---- op builder ---- */

void kiln_mlirp_op_add_operand(kiln_mlirp_t *P, kiln_mlirp_op_t *op, kiln_mlir_value_t *v) {
  if (op->num_operands == op->operands_cap) {
    int32_t nc = op->operands_cap ? op->operands_cap * 2 : 4;
    kiln_mlir_value_t **nv = kiln_arena_realloc(
        P->a, op->operands, sizeof(*nv) * (size_t)op->operands_cap, sizeof(*nv) * (size_t)nc);
    if (nv == NULL) {
      kiln_mlirp_failf(P, "out of memory");
      return;
    }
    op->operands = nv;
    op->operands_cap = nc;
  }
  op->operands[op->num_operands++] = v;
}

void kiln_mlirp_op_add_attr(kiln_mlirp_t *P, kiln_mlirp_op_t *op, const char *name,
                            const kiln_mlir_attr_t *v) {
  if (v == NULL) return; /* an error is already set */
  for (int32_t i = 0; i < op->num_attrs; i++) {
    if (strcmp(op->attrs[i].name, name) == 0) {
      op->attrs[i].value = v;
      return;
    }
  }
  if (op->num_attrs == op->attrs_cap) {
    int32_t nc = op->attrs_cap ? op->attrs_cap * 2 : 4;
    kiln_mlir_named_attr_t *nv = kiln_arena_realloc(
        P->a, op->attrs, sizeof(*nv) * (size_t)op->attrs_cap, sizeof(*nv) * (size_t)nc);
    if (nv == NULL) {
      kiln_mlirp_failf(P, "out of memory");
      return;
    }
    op->attrs = nv;
    op->attrs_cap = nc;
  }
  op->attrs[op->num_attrs].name = name;
  op->attrs[op->num_attrs].value = v;
  op->num_attrs++;
}

kiln_mlir_region_t *kiln_mlirp_op_add_region(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  if (op->num_regions == op->regions_cap) {
    int32_t nc = op->regions_cap ? op->regions_cap * 2 : 2;
    kiln_mlir_region_t *nv = kiln_arena_realloc(
        P->a, op->regions, sizeof(*nv) * (size_t)op->regions_cap, sizeof(*nv) * (size_t)nc);
    if (nv == NULL) {
      kiln_mlirp_failf(P, "out of memory");
      return NULL;
    }
    op->regions = nv;
    op->regions_cap = nc;
  }
  kiln_mlir_region_t *r = &op->regions[op->num_regions++];
  memset(r, 0, sizeof(*r));
  return r;
}

bool kiln_mlirp_op_attr_dict(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  if (kiln_mlirp_peek(P) != '{') return !P->err;
  kiln_mlir_named_attr_t *f;
  int32_t n;
  if (!kiln_mlirp_attr_dict(P, &f, &n)) return false;
  for (int32_t i = 0; i < n; i++) kiln_mlirp_op_add_attr(P, op, f[i].name, f[i].value);
  return !P->err;
}

/* ---- values ---- */

static bool value_name(kiln_mlirp_t *P, const char **s, size_t *n) {
  kiln_mlirp_ws(P);
  const char *p = P->p;
  if (p >= P->end || *p != '%') return kiln_mlirp_fail(P, "a value name (%name)");
  p++;
  while (p < P->end && (kiln_mlirp_is_id_char(*p) || *p == '-')) p++;
  if (p == P->p + 1) return kiln_mlirp_fail(P, "a value name (%name)");
  *s = P->p;
  *n = (size_t)(p - P->p);
  P->p = p;
  return true;
}

bool kiln_mlirp_peek_value_use(kiln_mlirp_t *P) {
  if (kiln_mlirp_peek(P) != '%') return false;
  const char *save = P->p;
  const char *s;
  size_t n;
  if (!value_name(P, &s, &n)) return false;
  if (P->p < P->end && *P->p == '#') {
    P->p++;
    while (P->p < P->end && *P->p >= '0' && *P->p <= '9') P->p++;
  }
  char c = kiln_mlirp_peek(P);
  char c2 = kiln_mlirp_peek2(P);
  bool binding = (c == '=' && c2 != '=') || (c == ':' && c2 >= '0' && c2 <= '9');
  /* `%x, %y:2 = ...` (a list of bindings): `%name` items separated by commas, then '=' */
  if (!binding && c == ',') {
    const char *q = P->p;
    for (;;) {
      while (q < P->end && (*q == ' ' || *q == '\t' || *q == '\n')) q++;
      if (q < P->end && *q == '=') {
        binding = q + 1 < P->end && q[1] != '=';
        break;
      }
      if (q >= P->end || *q != ',') break;
      q++;
      while (q < P->end && (*q == ' ' || *q == '\t' || *q == '\n')) q++;
      if (q >= P->end || *q != '%') break;
      q++;
      while (q < P->end && (kiln_mlirp_is_id_char(*q) || *q == '-')) q++;
      if (q < P->end && *q == ':') {
        q++;
        while (q < P->end && *q >= '0' && *q <= '9') q++;
      }
    }
  }
  P->p = save;
  return !binding;
}

bool kiln_mlirp_value_use(kiln_mlirp_t *P, kiln_mlir_value_t **out) {
  const char *s;
  size_t n;
  const char *at = (kiln_mlirp_ws(P), P->p);
  if (!value_name(P, &s, &n)) return false;
  int64_t idx = 0;
  bool has_idx = false;
  if (P->p < P->end && *P->p == '#') {
    P->p++;
    if (P->p >= P->end || *P->p < '0' || *P->p > '9') return kiln_mlirp_fail(P, "a result number");
    while (P->p < P->end && *P->p >= '0' && *P->p <= '9') {
      idx = idx * 10 + (*P->p - '0');
      if (idx > INT32_MAX) return kiln_mlirp_fail_at(P, at, "result number too large");
      P->p++;
    }
    has_idx = true;
  }
  kiln_mlirp_sym_t *sym = kiln_mlirp_lookup(&P->values, s, n);
  if (sym == NULL) return kiln_mlirp_fail_at(P, at, "use of undefined value '%.*s'", (int)n, s);
  if (idx >= sym->count || (!has_idx && sym->count != 1 && sym->count != 0)) {
    if (!has_idx) {
      return kiln_mlirp_fail_at(P, at, "'%.*s' has %d results; use %.*s#N", (int)n, s,
                                (int)sym->count, (int)n, s);
    }
    return kiln_mlirp_fail_at(P, at, "'%.*s' has %d results, not %lld", (int)n, s, (int)sym->count,
                              (long long)idx + 1);
  }
  *out = &sym->values[idx];
  return true;
}

/* ---- regions ---- */

static bool parse_op(kiln_mlirp_t *P, kiln_mlir_block_t *block, int32_t *cap);

static bool push_op(kiln_mlirp_t *P, kiln_mlir_block_t *b, int32_t *cap, kiln_mlir_op_t *op) {
  if (b->num_ops == *cap) {
    int32_t nc = *cap ? *cap * 2 : 8;
    kiln_mlir_op_t **nv =
        kiln_arena_realloc(P->a, b->ops, sizeof(*nv) * (size_t)*cap, sizeof(*nv) * (size_t)nc);
    if (nv == NULL) return kiln_mlirp_failf(P, "out of memory");
    b->ops = nv;
    *cap = nc;
  }
  b->ops[b->num_ops++] = op;
  return true;
}

static bool define_value(kiln_mlirp_t *P, const char *name, size_t len, kiln_mlir_value_t *v,
                         int32_t count) {
  kiln_mlirp_sym_t *s = kiln_mlirp_define(&P->values, name, len);
  s->values = v;
  s->count = count;
  return true;
}

/* `^bb0(%a: t, ...)` block arguments after the label (optional parens). */
static bool block_args(kiln_mlirp_t *P, kiln_mlir_block_t *b) {
  if (!kiln_mlirp_accept(P, '(')) return true;
  const char *names[64];
  size_t lens[64];
  const kiln_mlir_type_t *types[64];
  const char **hn = names;
  size_t *hl = lens;
  const kiln_mlir_type_t **ht = types;
  int32_t n = 0, cap = 64;
  if (!kiln_mlirp_accept(P, ')')) {
    do {
      if (n == cap) {
        int32_t nc = cap * 2;
        const char **a = kiln_arena_alloc(P->a, sizeof(*a) * (size_t)nc);
        size_t *l = kiln_arena_alloc(P->a, sizeof(*l) * (size_t)nc);
        const kiln_mlir_type_t **t = kiln_arena_alloc(P->a, sizeof(*t) * (size_t)nc);
        if (!a || !l || !t) return kiln_mlirp_failf(P, "out of memory");
        memcpy(a, hn, sizeof(*a) * (size_t)n);
        memcpy(l, hl, sizeof(*l) * (size_t)n);
        memcpy(t, ht, sizeof(*t) * (size_t)n);
        hn = a, hl = l, ht = t, cap = nc;
      }
      const char *loc;
      if (!value_name(P, &hn[n], &hl[n]) || !kiln_mlirp_expect(P, ':') ||
          !kiln_mlirp_type(P, &ht[n])) {
        return false;
      }
      kiln_mlirp_location(P, &loc);
      n++;
    } while (kiln_mlirp_accept(P, ','));
    if (!kiln_mlirp_expect(P, ')')) return false;
  }
  b->num_args = n;
  b->args = kiln_arena_alloc(P->a, sizeof(*b->args) * (size_t)(n ? n : 1));
  if (b->args == NULL) return kiln_mlirp_failf(P, "out of memory");
  for (int32_t i = 0; i < n; i++) {
    b->args[i].type = ht[i];
    b->args[i].index = i;
    b->args[i].block = b;
    b->args[i].name = kiln_mlirp_dup(P, hn[i], hl[i]);
    define_value(P, hn[i], hl[i], &b->args[i], 1);
  }
  return !P->err;
}

bool kiln_mlirp_region(kiln_mlirp_t *P, kiln_mlir_region_t *r,
                       const kiln_mlir_type_t *const *arg_types, int32_t num_args,
                       const char *const *arg_names, const size_t *arg_name_lens) {
  if (++P->depth > KILN_MLIRP_MAX_DEPTH) return kiln_mlirp_failf(P, "regions nested too deeply");
  if (!kiln_mlirp_expect(P, '{')) return false;
  kiln_mlirp_scope_push(P);
  int32_t blocks_cap = 0, ops_cap = 0;
  kiln_mlir_block_t *cur = NULL;
  bool ok = true;
  if (arg_types != NULL) {
    blocks_cap = 1;
    r->blocks = kiln_arena_alloc(P->a, sizeof(*r->blocks));
    if (r->blocks == NULL) return kiln_mlirp_failf(P, "out of memory");
    r->num_blocks = 1;
    cur = &r->blocks[0];
    cur->num_args = num_args;
    cur->args = kiln_arena_alloc(P->a, sizeof(*cur->args) * (size_t)(num_args ? num_args : 1));
    if (cur->args == NULL) return kiln_mlirp_failf(P, "out of memory");
    for (int32_t i = 0; i < num_args; i++) {
      cur->args[i].type = arg_types[i];
      cur->args[i].index = i;
      cur->args[i].block = cur;
      if (arg_names && arg_names[i]) {
        cur->args[i].name = kiln_mlirp_dup(P, arg_names[i], arg_name_lens[i]);
        define_value(P, arg_names[i], arg_name_lens[i], &cur->args[i], 1);
      }
    }
  }
  while (ok) {
    char c = kiln_mlirp_peek(P);
    if (c == '}' || c == 0) break;
    if (c == '^') {
      const char *s = P->p;
      P->p++;
      while (P->p < P->end && (kiln_mlirp_is_id_char(*P->p) || *P->p == '-')) P->p++;
      if (r->num_blocks == blocks_cap) {
        int32_t nc = blocks_cap ? blocks_cap * 2 : 2;
        kiln_mlir_block_t *nb = kiln_arena_realloc(
            P->a, r->blocks, sizeof(*nb) * (size_t)blocks_cap, sizeof(*nb) * (size_t)nc);
        if (nb == NULL) return kiln_mlirp_failf(P, "out of memory");
        /* fix up block pointers of already parsed blocks' arguments */
        for (int32_t b = 0; b < r->num_blocks; b++) {
          for (int32_t i = 0; i < nb[b].num_args; i++) nb[b].args[i].block = &nb[b];
        }
        r->blocks = nb;
        blocks_cap = nc;
      }
      cur = &r->blocks[r->num_blocks++];
      memset(cur, 0, sizeof(*cur));
      ops_cap = 0;
      cur->label = kiln_mlirp_dup(P, s, (size_t)(P->p - s));
      ok = block_args(P, cur) && kiln_mlirp_expect(P, ':');
      continue;
    }
    if (cur == NULL) {
      blocks_cap = 1;
      r->blocks = kiln_arena_alloc(P->a, sizeof(*r->blocks));
      if (r->blocks == NULL) return kiln_mlirp_failf(P, "out of memory");
      r->num_blocks = 1;
      cur = &r->blocks[0];
    }
    ok = parse_op(P, cur, &ops_cap);
  }
  kiln_mlirp_scope_pop(P);
  P->depth--;
  return ok && kiln_mlirp_expect(P, '}');
}

/* ---- signatures ---- */

static bool set_results(kiln_mlirp_t *P, kiln_mlirp_op_t *op, const kiln_mlir_type_t **t,
                        int32_t n) {
  op->result_types = t;
  op->num_result_types = n;
  return true;
}

bool kiln_mlirp_op_signature(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  if (!kiln_mlirp_expect(P, ':')) return false;
  const kiln_mlir_type_t *first;
  if (!kiln_mlirp_type(P, &first)) return false;
  if (first->kind == KILN_MLIR_TYPE_FUNCTION) {
    return set_results(P, op, (const kiln_mlir_type_t **)first->results, first->num_results);
  }
  const kiln_mlir_type_t *small[16];
  const kiln_mlir_type_t **list = small;
  int32_t n = 1, cap = 16;
  small[0] = first;
  while (kiln_mlirp_accept(P, ',')) {
    if (n == cap) {
      const kiln_mlir_type_t **nl = kiln_arena_alloc(P->a, sizeof(*nl) * (size_t)cap * 2);
      if (nl == NULL) return kiln_mlirp_failf(P, "out of memory");
      memcpy(nl, list, sizeof(*nl) * (size_t)n);
      list = nl;
      cap *= 2;
    }
    if (!kiln_mlirp_type(P, &list[n])) return false;
    n++;
  }
  if (kiln_mlirp_accept_str(P, "->")) {
    const kiln_mlir_type_t **res;
    int32_t nr;
    if (kiln_mlirp_peek(P) == '(') {
      if (!kiln_mlirp_type_list_parens(P, &res, &nr)) return false;
    } else {
      res = kiln_arena_alloc(P->a, sizeof(*res));
      nr = 1;
      if (res == NULL || !kiln_mlirp_type(P, &res[0])) return false;
    }
    return set_results(P, op, res, nr);
  }
  const kiln_mlir_type_t **res = kiln_arena_alloc(P->a, sizeof(*res) * (size_t)n);
  if (res == NULL) return kiln_mlirp_failf(P, "out of memory");
  memcpy(res, list, sizeof(*res) * (size_t)n);
  if (op->num_results == 0) return set_results(P, op, res, 0);
  if (op->num_results == n) return set_results(P, op, res, n);
  if (op->num_results == 1) return set_results(P, op, res + n - 1, 1);
  if (n == 1) {
    const kiln_mlir_type_t **all = kiln_arena_alloc(P->a, sizeof(*all) * (size_t)op->num_results);
    if (all == NULL) return kiln_mlirp_failf(P, "out of memory");
    for (int32_t i = 0; i < op->num_results; i++) all[i] = first;
    return set_results(P, op, all, op->num_results);
  }
  return kiln_mlirp_failf(P, "'%s' binds %d results, its type list has %d", op->name,
                          (int)op->num_results, (int)n);
}

/* ---- generic ops ---- */

bool kiln_mlirp_generic_tail(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  if (!kiln_mlirp_expect(P, '(')) return false;
  if (!kiln_mlirp_accept(P, ')')) {
    do {
      kiln_mlir_value_t *v;
      if (!kiln_mlirp_value_use(P, &v)) return false;
      kiln_mlirp_op_add_operand(P, op, v);
    } while (kiln_mlirp_accept(P, ','));
    if (!kiln_mlirp_expect(P, ')')) return false;
  }
  if (kiln_mlirp_peek(P) == '[') {
    return kiln_mlirp_failf(P, "block successors are not supported (StableHLO has no branches)");
  }
  if (kiln_mlirp_accept_str(P, "<{")) {
    P->p--;
    if (!kiln_mlirp_op_attr_dict(P, op) || !kiln_mlirp_expect(P, '>')) return false;
  }
  if (kiln_mlirp_accept(P, '(')) {
    do {
      kiln_mlir_region_t *r = kiln_mlirp_op_add_region(P, op);
      if (r == NULL || !kiln_mlirp_region(P, r, NULL, 0, NULL, NULL)) return false;
    } while (kiln_mlirp_accept(P, ','));
    if (!kiln_mlirp_expect(P, ')')) return false;
  }
  if (!kiln_mlirp_op_attr_dict(P, op)) return false;
  const char *at = (kiln_mlirp_ws(P), P->p);
  if (!kiln_mlirp_expect(P, ':')) return false;
  const kiln_mlir_type_t *t;
  if (!kiln_mlirp_type(P, &t)) return false;
  if (t->kind != KILN_MLIR_TYPE_FUNCTION) {
    return kiln_mlirp_fail_at(P, at, "expected a function type after a generic op");
  }
  if (t->num_types != op->num_operands) {
    return kiln_mlirp_fail_at(P, at, "'%s' has %d operands, its type %d", op->name,
                              (int)op->num_operands, (int)t->num_types);
  }
  return set_results(P, op, (const kiln_mlir_type_t **)t->results, t->num_results);
}

/* ---- func.func and module ---- */

static const kiln_mlir_attr_t *string_attr(kiln_mlirp_t *P, const char *s, size_t n) {
  kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_STRING);
  if (a == NULL) return NULL;
  a->str = kiln_mlirp_dup(P, s, n);
  a->str_len = n;
  return a;
}

static bool symbol_name(kiln_mlirp_t *P, const char **s, size_t *n) {
  if (!kiln_mlirp_expect(P, '@')) return false;
  if (P->p < P->end && *P->p == '"') return kiln_mlirp_name_string(P, s, n);
  const char *q = P->p;
  while (q < P->end && (kiln_mlirp_is_id_char(*q) || *q == '-')) q++;
  if (q == P->p) return kiln_mlirp_fail(P, "a symbol name");
  *s = P->p;
  *n = (size_t)(q - P->p);
  P->p = q;
  return true;
}

static const kiln_mlir_attr_t *dicts_array(kiln_mlirp_t *P, const kiln_mlir_attr_t **d, int32_t n) {
  bool any = false;
  for (int32_t i = 0; i < n; i++) any |= d[i]->num_elements > 0;
  if (!any) return NULL;
  kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_ARRAY);
  if (a == NULL) return NULL;
  a->elements = d;
  a->num_elements = n;
  return a;
}

static bool func_op(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  bool is_private = false;
  if (kiln_mlirp_accept_kw(P, "private")) {
    is_private = true;
  } else if (!kiln_mlirp_accept_kw(P, "public")) {
    kiln_mlirp_accept_kw(P, "nested");
  }
  const char *name;
  size_t name_len;
  if (!symbol_name(P, &name, &name_len) || !kiln_mlirp_expect(P, '(')) return false;
  /* arguments */
  int32_t n = 0, cap = 0;
  const kiln_mlir_type_t **types = NULL;
  const char **names = NULL;
  size_t *lens = NULL;
  const kiln_mlir_attr_t **dicts = NULL;
  bool named = false;
  if (!kiln_mlirp_accept(P, ')')) {
    do {
      if (n == cap) {
        int32_t nc = cap ? cap * 2 : 8;
        types = kiln_arena_realloc(P->a, types, sizeof(*types) * (size_t)cap,
                                   sizeof(*types) * (size_t)nc);
        names = kiln_arena_realloc(P->a, names, sizeof(*names) * (size_t)cap,
                                   sizeof(*names) * (size_t)nc);
        lens =
            kiln_arena_realloc(P->a, lens, sizeof(*lens) * (size_t)cap, sizeof(*lens) * (size_t)nc);
        dicts = kiln_arena_realloc(P->a, dicts, sizeof(*dicts) * (size_t)cap,
                                   sizeof(*dicts) * (size_t)nc);
        if (!types || !names || !lens || !dicts) return kiln_mlirp_failf(P, "out of memory");
        cap = nc;
      }
      if (kiln_mlirp_peek(P) == '%') {
        named = true;
        if (!value_name(P, &names[n], &lens[n]) || !kiln_mlirp_expect(P, ':')) return false;
      } else {
        names[n] = NULL;
        lens[n] = 0;
      }
      if (!kiln_mlirp_type(P, &types[n])) return false;
      kiln_mlir_attr_t *d = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_DICTIONARY);
      if (d == NULL) return false;
      if (kiln_mlirp_peek(P) == '{' && !kiln_mlirp_attr_dict(P, &d->fields, &d->num_elements)) {
        return false;
      }
      dicts[n] = d;
      const char *loc;
      kiln_mlirp_location(P, &loc);
      n++;
    } while (kiln_mlirp_accept(P, ','));
    if (!kiln_mlirp_expect(P, ')')) return false;
  }
  /* results */
  int32_t nr = 0;
  const kiln_mlir_type_t **rtypes = NULL;
  const kiln_mlir_attr_t **rdicts = NULL;
  if (kiln_mlirp_accept_str(P, "->")) {
    bool parens = kiln_mlirp_accept(P, '(');
    int32_t rcap = 0;
    if (!parens || !kiln_mlirp_accept(P, ')')) {
      do {
        if (nr == rcap) {
          int32_t nc = rcap ? rcap * 2 : 4;
          rtypes = kiln_arena_realloc(P->a, rtypes, sizeof(*rtypes) * (size_t)rcap,
                                      sizeof(*rtypes) * (size_t)nc);
          rdicts = kiln_arena_realloc(P->a, rdicts, sizeof(*rdicts) * (size_t)rcap,
                                      sizeof(*rdicts) * (size_t)nc);
          if (!rtypes || !rdicts) return kiln_mlirp_failf(P, "out of memory");
          rcap = nc;
        }
        if (!kiln_mlirp_type(P, &rtypes[nr])) return false;
        kiln_mlir_attr_t *d = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_DICTIONARY);
        if (d == NULL) return false;
        if (parens && kiln_mlirp_peek(P) == '{' &&
            !kiln_mlirp_attr_dict(P, &d->fields, &d->num_elements)) {
          return false;
        }
        rdicts[nr++] = d;
      } while (parens && kiln_mlirp_accept(P, ','));
      if (parens && !kiln_mlirp_expect(P, ')')) return false;
    }
  }
  kiln_mlir_type_t *ft = kiln_mlirp_new_type(P, KILN_MLIR_TYPE_FUNCTION);
  if (ft == NULL) return false;
  ft->types = types;
  ft->num_types = n;
  ft->results = rtypes;
  ft->num_results = nr;
  kiln_mlir_attr_t *fta = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_TYPE);
  if (fta == NULL) return false;
  fta->type = ft;
  kiln_mlirp_op_add_attr(P, op, "sym_name", string_attr(P, name, name_len));
  kiln_mlirp_op_add_attr(P, op, "function_type", fta);
  if (is_private) kiln_mlirp_op_add_attr(P, op, "sym_visibility", string_attr(P, "private", 7));
  const kiln_mlir_attr_t *aa = dicts_array(P, dicts, n);
  if (aa) kiln_mlirp_op_add_attr(P, op, "arg_attrs", aa);
  const kiln_mlir_attr_t *ra = dicts_array(P, rdicts, nr);
  if (ra) kiln_mlirp_op_add_attr(P, op, "res_attrs", ra);
  if (kiln_mlirp_accept_kw(P, "attributes") && !kiln_mlirp_op_attr_dict(P, op)) return false;
  if (kiln_mlirp_peek(P) == '{') {
    if (n > 0 && !named) return kiln_mlirp_failf(P, "a function with a body needs named arguments");
    kiln_mlir_region_t *r = kiln_mlirp_op_add_region(P, op);
    if (r == NULL) return false;
    static const kiln_mlir_type_t *const kNoArgs[1] = {NULL};
    return kiln_mlirp_region(P, r, types ? types : kNoArgs, n, names, lens);
  }
  return !P->err;
}

/* `module @name attributes {...} { ... }` after `module` as an op (nested modules). */
static bool module_op(kiln_mlirp_t *P, kiln_mlirp_op_t *op) {
  if (kiln_mlirp_peek(P) == '@') {
    const char *s;
    size_t n;
    if (!symbol_name(P, &s, &n)) return false;
    kiln_mlirp_op_add_attr(P, op, "sym_name", string_attr(P, s, n));
  }
  if (kiln_mlirp_accept_kw(P, "attributes") && !kiln_mlirp_op_attr_dict(P, op)) return false;
  kiln_mlir_region_t *r = kiln_mlirp_op_add_region(P, op);
  return r && kiln_mlirp_region(P, r, NULL, 0, NULL, NULL);
}

/* ---- ops ---- */

typedef struct binding {
  const char *name;
  size_t len;
  int32_t count;
} binding_t;

static bool parse_op(kiln_mlirp_t *P, kiln_mlir_block_t *block, int32_t *cap) {
  kiln_mlirp_op_t b;
  memset(&b, 0, sizeof(b));
  kiln_mlirp_ws(P);
  b.line = kiln_mlirp_line_of(P, P->p);
  binding_t small[8];
  binding_t *binds = small;
  int32_t nb = 0, bcap = 8;
  if (kiln_mlirp_peek(P) == '%') {
    do {
      if (nb == bcap) {
        binding_t *nbs = kiln_arena_alloc(P->a, sizeof(*nbs) * (size_t)bcap * 2);
        if (nbs == NULL) return kiln_mlirp_failf(P, "out of memory");
        memcpy(nbs, binds, sizeof(*nbs) * (size_t)nb);
        binds = nbs;
        bcap *= 2;
      }
      if (!value_name(P, &binds[nb].name, &binds[nb].len)) return false;
      binds[nb].count = 1;
      if (P->p < P->end && *P->p == ':') {
        P->p++;
        int64_t k;
        if (!kiln_mlirp_integer(P, &k)) return false;
        if (k < 1 || k > 1000000) return kiln_mlirp_failf(P, "bad result count");
        binds[nb].count = (int32_t)k;
      }
      b.num_results += binds[nb].count;
      nb++;
    } while (kiln_mlirp_accept(P, ','));
    if (!kiln_mlirp_expect(P, '=')) return false;
  }
  const char *name_at = (kiln_mlirp_ws(P), P->p);
  bool ok;
  if (kiln_mlirp_peek(P) == '"') {
    const char *s;
    size_t n;
    if (!kiln_mlirp_name_string(P, &s, &n)) return false;
    b.name = s;
    ok = kiln_mlirp_generic_tail(P, &b);
  } else {
    const char *s;
    size_t n;
    if (!kiln_mlirp_bare_id(P, &s, &n)) return kiln_mlirp_fail(P, "an operation");
    if (memchr(s, '.', n) != NULL) {
      b.name = kiln_mlirp_dup(P, s, n);
    } else if (n == 6 && memcmp(s, "module", 6) == 0) {
      b.name = "builtin.module";
    } else {
      b.name = kiln_arena_printf(P->a, "func.%.*s", (int)n, s);
    }
    if (strcmp(b.name, "func.func") == 0) {
      ok = func_op(P, &b);
    } else if (strcmp(b.name, "builtin.module") == 0) {
      ok = module_op(P, &b);
    } else {
      ok = kiln_mlirp_pretty_op(P, &b);
    }
  }
  if (!ok || P->err) return false;
  kiln_mlirp_location(P, &b.location);
  if (P->err) return false;
  if (nb > 0 && b.num_result_types != b.num_results) {
    return kiln_mlirp_fail_at(P, name_at, "'%s' binds %d results, its type gives %d", b.name,
                              (int)b.num_results, (int)b.num_result_types);
  }
  kiln_mlir_op_t *op = kiln_arena_alloc(P->a, sizeof(*op));
  if (op == NULL) return kiln_mlirp_failf(P, "out of memory");
  op->name = b.name;
  op->num_operands = b.num_operands;
  op->operands = b.operands;
  op->num_results = b.num_result_types;
  op->results = kiln_arena_alloc(
      P->a, sizeof(*op->results) * (size_t)(op->num_results ? op->num_results : 1));
  if (op->results == NULL) return kiln_mlirp_failf(P, "out of memory");
  for (int32_t i = 0; i < op->num_results; i++) {
    op->results[i].type = b.result_types[i];
    op->results[i].def = op;
    op->results[i].index = i;
  }
  op->num_attrs = b.num_attrs;
  op->attrs = b.attrs;
  op->num_regions = b.num_regions;
  op->regions = b.regions;
  op->location = b.location;
  op->line = b.line;
  int32_t k = 0;
  for (int32_t i = 0; i < nb; i++) {
    for (int32_t j = 0; j < binds[i].count; j++) {
      op->results[k + j].name =
          binds[i].count == 1
              ? kiln_mlirp_dup(P, binds[i].name, binds[i].len)
              : kiln_arena_printf(P->a, "%.*s#%d", (int)binds[i].len, binds[i].name, (int)j);
    }
    define_value(P, binds[i].name, binds[i].len, &op->results[k], binds[i].count);
    k += binds[i].count;
  }
  return push_op(P, block, cap, op);
}

/* ---- top level ---- */

static bool alias_def(kiln_mlirp_t *P) {
  const char *start = P->p;
  bool is_type = *start == '!';
  P->p++;
  const char *s;
  size_t n;
  if (!kiln_mlirp_bare_id(P, &s, &n)) return kiln_mlirp_fail(P, "an alias name");
  size_t len = (size_t)(P->p - start);
  if (!kiln_mlirp_expect(P, '=')) return false;
  kiln_mlirp_sym_t tmp;
  memset(&tmp, 0, sizeof(tmp));
  if (is_type) {
    if (!kiln_mlirp_type(P, &tmp.type)) return false;
  } else if (!kiln_mlirp_location(P, &tmp.loc_text)) {
    if (P->err || !kiln_mlirp_attr(P, &tmp.attr)) return false;
  }
  kiln_mlirp_sym_t *sym = kiln_mlirp_define(&P->aliases, start, len);
  sym->type = tmp.type;
  sym->attr = tmp.attr;
  sym->loc_text = tmp.loc_text;
  return true;
}

static bool is_alias_def(kiln_mlirp_t *P) {
  char c = kiln_mlirp_peek(P);
  if (c != '#' && c != '!') return false;
  const char *q = P->p + 1;
  while (q < P->end && kiln_mlirp_is_id_char(*q)) q++;
  while (q < P->end && (*q == ' ' || *q == '\t')) q++;
  return q < P->end && *q == '=';
}

static void resolve_locations(kiln_mlirp_t *P, kiln_mlir_block_t *b) {
  for (int32_t i = 0; i < b->num_ops; i++) {
    kiln_mlir_op_t *op = b->ops[i];
    for (int hops = 0; hops < 8 && op->location && op->location[0] == '#'; hops++) {
      kiln_mlirp_sym_t *s = kiln_mlirp_lookup(&P->aliases, op->location, strlen(op->location));
      if (s == NULL || s->loc_text == NULL) break;
      op->location = s->loc_text;
    }
    for (int32_t r = 0; r < op->num_regions; r++) {
      for (int32_t k = 0; k < op->regions[r].num_blocks; k++) {
        resolve_locations(P, &op->regions[r].blocks[k]);
      }
    }
  }
}

static bool parse_top(kiln_mlirp_t *P) {
  kiln_mlir_module_t *m = P->m;
  int32_t cap = 0;
  bool had_module = false;
  while (!P->err) {
    char c = kiln_mlirp_peek(P);
    if (c == 0) break;
    if (is_alias_def(P)) {
      if (!alias_def(P)) return false;
      continue;
    }
    if (P->end - P->p >= 3 && memcmp(P->p, "{-#", 3) == 0) {
      if (!kiln_mlirp_file_metadata(P)) return false;
      continue;
    }
    if (!had_module && m->body.num_ops == 0 && kiln_mlirp_accept_kw(P, "module")) {
      had_module = true;
      if (kiln_mlirp_peek(P) == '@') {
        const char *s;
        size_t n;
        if (!symbol_name(P, &s, &n)) return false;
        m->name = kiln_mlirp_dup(P, s, n);
      }
      if (kiln_mlirp_accept_kw(P, "attributes") &&
          !kiln_mlirp_attr_dict(P, &m->attrs, &m->num_attrs)) {
        return false;
      }
      if (!kiln_mlirp_expect(P, '{')) return false;
      kiln_mlirp_scope_push(P);
      while (!P->err && kiln_mlirp_peek(P) != '}' && kiln_mlirp_peek(P) != 0) {
        if (!parse_op(P, &m->body, &cap)) return false;
      }
      kiln_mlirp_scope_pop(P);
      if (!kiln_mlirp_expect(P, '}')) return false;
      const char *loc;
      kiln_mlirp_location(P, &loc);
      continue;
    }
    if (had_module) return kiln_mlirp_fail(P, "the end of input after the module");
    if (!parse_op(P, &m->body, &cap)) return false;
  }
  if (!P->err && !had_module && m->body.num_ops == 1 &&
      strcmp(m->body.ops[0]->name, "builtin.module") == 0 && m->body.ops[0]->num_regions == 1 &&
      m->body.ops[0]->regions[0].num_blocks <= 1) {
    /* a lone generic "builtin.module" op is the module itself */
    kiln_mlir_op_t *mod = m->body.ops[0];
    memset(&m->body, 0, sizeof(m->body));
    if (mod->regions[0].num_blocks == 1) m->body = mod->regions[0].blocks[0];
    int32_t k = 0;
    for (int32_t i = 0; i < mod->num_attrs; i++) {
      const kiln_mlir_attr_t *v = mod->attrs[i].value;
      if (strcmp(mod->attrs[i].name, "sym_name") == 0 && v->kind == KILN_MLIR_ATTR_STRING) {
        m->name = v->str;
      } else {
        mod->attrs[k++] = mod->attrs[i];
      }
    }
    m->attrs = mod->attrs;
    m->num_attrs = k;
  }
  if (!P->err) resolve_locations(P, &m->body);
  return !P->err && kiln_mlirp_resolve_dense_resources(P);
}

kiln_status kiln_mlir_parse_text(const char *text, size_t len, const char *filename,
                                 kiln_mlir_module_t **out) {
  return kiln_mlir_parse_text_at(text, len, filename, 1, out);
}

static kiln_status parse_text_at(const char *text, size_t len, const char *filename,
                                 int32_t first_line, kiln_mlir_module_t **out) {
  if (out == NULL) return KILN_ERR_INVALID("kiln_mlir_parse_text: out is NULL");
  *out = NULL;
  if (text == NULL && len > 0) return KILN_ERR_INVALID("kiln_mlir_parse_text: text is NULL");
  kiln_mlirp_t P;
  memset(&P, 0, sizeof(P));
  P.base = P.p = text ? text : "";
  P.end = P.base + len;
  P.filename = filename;
  P.m = kiln_mlir_module_create();
  P.a = &P.m->arena;
  P.line_pos = P.base;
  P.first_line = first_line > 0 ? first_line : 1;
  P.line_no = P.first_line;
  parse_top(&P);
  kiln_mlirp_table_free(&P.values);
  kiln_mlirp_table_free(&P.aliases);
  kiln_mlirp_table_free(&P.types);
  kiln_free(P.scope_marks);
  kiln_free(P.dense_resources);
  kiln_free(P.blob_keys);
  kiln_free(P.blob_hex);
  kiln_free(P.blob_key_lens);
  kiln_free(P.blob_hex_lens);
  if (P.err) {
    kiln_mlir_module_destroy(P.m);
    return P.err;
  }
  *out = P.m;
  return KILN_STATUS_OK;
}

size_t kiln_mlir_split_text(const char *text, size_t len, kiln_mlir_text_part_t *parts,
                            size_t max_parts) {
  size_t n = 0;
  const char *p = text, *end = text + len, *part = text;
  int32_t line = 1, part_line = 1;
  while (p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    const char *le = eol ? eol : end;
    const char *q = p;
    while (q < le && (*q == ' ' || *q == '\t')) q++;
    if ((size_t)(le - q) >= 8 && memcmp(q, "// -----", 8) == 0) {
      if (n < max_parts) {
        parts[n].text = part;
        parts[n].len = (size_t)(p - part);
        parts[n].line = part_line;
      }
      n++;
      part = eol ? eol + 1 : end;
      part_line = line + 1;
    }
    p = eol ? eol + 1 : end;
    line++;
  }
  if (n < max_parts) {
    parts[n].text = part;
    parts[n].len = (size_t)(end - part);
    parts[n].line = part_line;
  }
  return n + 1;
}

/* Every allocation may fail: an out-of-memory scope (base/alloc.h) around the whole read. */
kiln_status kiln_mlir_parse_text_at(const char *text, size_t len, const char *filename,
                                    int32_t first_line, kiln_mlir_module_t **out) {
  KILN_OOM_SCOPED_RETURN(parse_text_at(text, len, filename, first_line, out), if (out) *out = NULL,
                         "parsing MLIR text");
}
