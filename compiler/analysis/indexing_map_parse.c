/* Parser for the text form of indexing maps and affine expressions.
 *
 *   map    := '(' names? ')' ('[' names? ']')? ('{' names? '}')? '->' '(' exprs? ')'
 *             (',' 'domain' ':' (KNOWN EMPTY | item (',' item)*))?
 *   item   := expr 'in' '[' int ',' int ']'
 *   expr   := term (('+' | '-') term)*
 *   term   := unary (('*' | 'floordiv' | 'ceildiv' | 'mod') unary)*
 *   unary  := '-' unary | primary
 *   primary:= int | name | '(' expr ')' | ('min' | 'max') '(' expr (',' expr)* ')'
 *
 * Every token consumes input and builds O(1) nodes, and nesting is limited, so no input
 * can loop forever, overflow the stack or allocate without bound. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "compiler/analysis/indexing_map.h"
#include "compiler/analysis/indexing_map_internal.h"

#define KILN_PARSE_MAX_DEPTH 200

typedef enum tok_kind {
  TOK_EOF,
  TOK_IDENT,
  TOK_INT,
  TOK_PUNCT, /* one of ( ) [ ] { } , : + - * */
  TOK_ARROW,
  TOK_BAD,
} tok_kind_t;

typedef struct token {
  tok_kind_t kind;
  const char *start;
  size_t len;
  int line, col;
  uint64_t value;  /* TOK_INT */
  bool overflow;   /* TOK_INT above 2^63 */
} token_t;

typedef struct name_list {
  const char **ptr;
  size_t *len;
  size_t n, cap;
} name_list_t;

typedef struct parser {
  kiln_affine_ctx_t *ctx;
  const char *p;
  int line, col;
  token_t tok;
  int depth;
  bool default_names; /* expression parse: d<i>, s<i>, rt<i> */
  name_list_t names[3];
  kiln_status err;
} parser_t;

static void lex(parser_t *ps) {
  for (;;) {
    char c = *ps->p;
    if (c == '\n') {
      ps->line++;
      ps->col = 1;
      ps->p++;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      ps->col++;
      ps->p++;
    } else {
      break;
    }
  }
  token_t *t = &ps->tok;
  memset(t, 0, sizeof *t);
  t->start = ps->p;
  t->line = ps->line;
  t->col = ps->col;
  char c = *ps->p;
  size_t n = 0;
  if (c == 0) {
    t->kind = TOK_EOF;
  } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
    while (1) {
      char d = ps->p[n];
      if (!((d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z') || (d >= '0' && d <= '9') ||
            d == '_'))
        break;
      n++;
    }
    t->kind = TOK_IDENT;
  } else if (c >= '0' && c <= '9') {
    uint64_t v = 0;
    while (ps->p[n] >= '0' && ps->p[n] <= '9') {
      uint64_t dgt = (uint64_t)(ps->p[n] - '0');
      if (v > (UINT64_C(1) << 63) / 10 || v * 10 + dgt > (UINT64_C(1) << 63)) t->overflow = true;
      if (!t->overflow) v = v * 10 + dgt;
      n++;
    }
    t->kind = TOK_INT;
    t->value = v;
  } else if (c == '-' && ps->p[1] == '>') {
    t->kind = TOK_ARROW;
    n = 2;
  } else if (strchr("()[]{},:+-*", c)) {
    t->kind = TOK_PUNCT;
    n = 1;
  } else {
    t->kind = TOK_BAD;
    n = 1;
  }
  t->len = n;
  ps->p += n;
  ps->col += (int)n;
}

static bool is_punct(const parser_t *ps, char c) {
  return ps->tok.kind == TOK_PUNCT && ps->tok.start[0] == c;
}
static bool is_word(const parser_t *ps, const char *w) {
  return ps->tok.kind == TOK_IDENT && ps->tok.len == strlen(w) &&
         memcmp(ps->tok.start, w, ps->tok.len) == 0;
}

/* Records "line:col: expected <what>, found <token>" (first error wins); returns false. */
static bool fail(parser_t *ps, const char *what) {
  if (ps->err) return false;
  char found[48];
  const token_t *t = &ps->tok;
  if (t->kind == TOK_EOF) {
    snprintf(found, sizeof found, "end of input");
  } else {
    size_t n = t->len > 32 ? 32 : t->len;
    char text[40];
    for (size_t i = 0; i < n; i++) {
      unsigned char ch = (unsigned char)t->start[i];
      text[i] = ch >= 32 && ch < 127 ? (char)ch : '?';
    }
    text[n] = 0;
    snprintf(found, sizeof found, "'%s'", text);
  }
  ps->err = kiln_status_make(KILN_INVALID_ARGUMENT, "%d:%d: expected %s, found %s", t->line,
                             t->col, what, found);
  return false;
}

static bool expect_punct(parser_t *ps, char c) {
  if (!is_punct(ps, c)) {
    char what[8] = {'\'', c, '\'', 0};
    return fail(ps, what);
  }
  lex(ps);
  return true;
}

static kiln_affine_expr_t *parse_expr(parser_t *ps);

static kiln_affine_expr_t *resolve_name(parser_t *ps) {
  const token_t *t = &ps->tok;
  if (ps->default_names) {
    static const char *const prefixes[3] = {"d", "s", "rt"};
    for (int k = 2; k >= 0; k--) {
      size_t pl = strlen(prefixes[k]);
      if (t->len <= pl || t->len > pl + 9 || memcmp(t->start, prefixes[k], pl) != 0) continue;
      int64_t idx = 0;
      bool digits = true;
      for (size_t i = pl; i < t->len; i++) {
        if (t->start[i] < '0' || t->start[i] > '9') digits = false;
        else idx = idx * 10 + (t->start[i] - '0');
      }
      if (!digits) continue;
      return k == 0 ? kiln_affine_dim(ps->ctx, idx)
             : k == 1 ? kiln_affine_sym(ps->ctx, idx)
                      : kiln_affine_rt(ps->ctx, idx);
    }
    return NULL;
  }
  for (int k = 0; k < 3; k++) {
    for (size_t i = 0; i < ps->names[k].n; i++) {
      if (ps->names[k].len[i] == t->len && memcmp(ps->names[k].ptr[i], t->start, t->len) == 0)
        return k == 0 ? kiln_affine_dim(ps->ctx, (int64_t)i)
               : k == 1 ? kiln_affine_sym(ps->ctx, (int64_t)i)
                        : kiln_affine_rt(ps->ctx, (int64_t)i);
    }
  }
  return NULL;
}

static kiln_affine_expr_t *parse_int_literal(parser_t *ps, bool negative) {
  if (ps->tok.kind != TOK_INT) return fail(ps, "integer"), NULL;
  uint64_t v = ps->tok.value;
  if (ps->tok.overflow || v > (negative ? (UINT64_C(1) << 63) : (uint64_t)INT64_MAX))
    return fail(ps, "integer in int64 range"), NULL;
  lex(ps);
  int64_t s = negative ? (v == (UINT64_C(1) << 63) ? INT64_MIN : -(int64_t)v) : (int64_t)v;
  return kiln_affine_const(ps->ctx, s);
}

static kiln_affine_expr_t *parse_primary(parser_t *ps) {
  if (ps->tok.kind == TOK_INT) return parse_int_literal(ps, false);
  if (is_punct(ps, '(')) {
    lex(ps);
    kiln_affine_expr_t *e = parse_expr(ps);
    if (!e || !expect_punct(ps, ')')) return NULL;
    return e;
  }
  if (is_word(ps, "min") || is_word(ps, "max")) {
    kiln_affine_kind_t kind = is_word(ps, "min") ? KILN_AFFINE_MIN : KILN_AFFINE_MAX;
    lex(ps);
    if (!expect_punct(ps, '(')) return NULL;
    kiln_affine_expr_t *acc = parse_expr(ps);
    if (!acc) return NULL;
    while (is_punct(ps, ',')) {
      lex(ps);
      kiln_affine_expr_t *e = parse_expr(ps);
      if (!e) return NULL;
      acc = kind == KILN_AFFINE_MIN ? kiln_affine_min(ps->ctx, acc, e)
                                    : kiln_affine_max(ps->ctx, acc, e);
    }
    if (!expect_punct(ps, ')')) return NULL;
    return acc;
  }
  if (ps->tok.kind == TOK_IDENT) {
    kiln_affine_expr_t *v = resolve_name(ps);
    if (!v) return fail(ps, "a declared variable name"), NULL;
    lex(ps);
    return v;
  }
  return fail(ps, "an expression"), NULL;
}

static kiln_affine_expr_t *parse_unary(parser_t *ps) {
  if (!is_punct(ps, '-')) return parse_primary(ps);
  lex(ps);
  if (ps->tok.kind == TOK_INT) return parse_int_literal(ps, true);
  if (++ps->depth > KILN_PARSE_MAX_DEPTH) return fail(ps, "less deeply nested input"), NULL;
  kiln_affine_expr_t *e = parse_unary(ps);
  ps->depth--;
  return e ? kiln_affine_neg(ps->ctx, e) : NULL;
}

static kiln_affine_expr_t *parse_term(parser_t *ps) {
  kiln_affine_expr_t *acc = parse_unary(ps);
  while (acc) {
    kiln_affine_kind_t kind;
    if (is_punct(ps, '*')) kind = KILN_AFFINE_MUL;
    else if (is_word(ps, "floordiv")) kind = KILN_AFFINE_FLOORDIV;
    else if (is_word(ps, "ceildiv")) kind = KILN_AFFINE_CEILDIV;
    else if (is_word(ps, "mod")) kind = KILN_AFFINE_MOD;
    else break;
    lex(ps);
    kiln_affine_expr_t *rhs = parse_unary(ps);
    if (!rhs) return NULL;
    acc = kiln_affine_build(ps->ctx, kind, 2, (kiln_affine_expr_t *[]){acc, rhs});
  }
  return acc;
}

static kiln_affine_expr_t *parse_expr(parser_t *ps) {
  if (++ps->depth > KILN_PARSE_MAX_DEPTH) return fail(ps, "less deeply nested input"), NULL;
  kiln_affine_expr_t *acc = parse_term(ps);
  while (acc && (is_punct(ps, '+') || is_punct(ps, '-'))) {
    bool minus = is_punct(ps, '-');
    lex(ps);
    kiln_affine_expr_t *rhs = parse_term(ps);
    if (!rhs) return NULL;
    acc = minus ? kiln_affine_sub(ps->ctx, acc, rhs) : kiln_affine_add(ps->ctx, acc, rhs);
  }
  ps->depth--;
  return acc;
}

static bool parse_signed_int(parser_t *ps, int64_t *out) {
  bool neg = false;
  if (is_punct(ps, '-')) {
    neg = true;
    lex(ps);
  }
  kiln_affine_expr_t *e = parse_int_literal(ps, neg);
  if (!e) return false;
  *out = e->value;
  return true;
}

static bool name_seen(const parser_t *ps, const char *s, size_t n) {
  for (int k = 0; k < 3; k++)
    for (size_t i = 0; i < ps->names[k].n; i++)
      if (ps->names[k].len[i] == n && memcmp(ps->names[k].ptr[i], s, n) == 0) return true;
  return false;
}

static bool parse_names(parser_t *ps, int kind, char close) {
  name_list_t *l = &ps->names[kind];
  if (is_punct(ps, close)) {
    lex(ps);
    return true;
  }
  for (;;) {
    if (ps->tok.kind != TOK_IDENT || !kiln_indexing_name_is_valid(ps->tok.start, ps->tok.len))
      return fail(ps, "a variable name");
    if (name_seen(ps, ps->tok.start, ps->tok.len)) return fail(ps, "a variable name not used before");
    if (l->n == l->cap) {
      l->cap = l->cap ? l->cap * 2 : 8;
      l->ptr = kiln_realloc(l->ptr, l->cap * sizeof *l->ptr);
      l->len = kiln_realloc(l->len, l->cap * sizeof *l->len);
    }
    l->ptr[l->n] = ps->tok.start;
    l->len[l->n] = ps->tok.len;
    l->n++;
    lex(ps);
    if (is_punct(ps, ',')) {
      lex(ps);
      continue;
    }
    if (is_punct(ps, close)) {
      lex(ps);
      return true;
    }
    char what[24];
    snprintf(what, sizeof what, "',' or '%c'", close);
    return fail(ps, what);
  }
}

static void parser_init(parser_t *ps, kiln_affine_ctx_t *ctx, const char *text) {
  memset(ps, 0, sizeof *ps);
  ps->ctx = ctx;
  ps->p = text ? text : "";
  ps->line = 1;
  ps->col = 1;
  lex(ps);
}

static void parser_free(parser_t *ps) {
  for (int k = 0; k < 3; k++) {
    kiln_free(ps->names[k].ptr);
    kiln_free(ps->names[k].len);
  }
}

static bool parse_map_body(parser_t *ps, kiln_indexing_map_t **out) {
  if (!expect_punct(ps, '(') || !parse_names(ps, 0, ')')) return false;
  if (is_punct(ps, '[')) {
    lex(ps);
    if (!parse_names(ps, 1, ']')) return false;
  }
  if (is_punct(ps, '{')) {
    lex(ps);
    if (!parse_names(ps, 2, '}')) return false;
  }
  if (ps->tok.kind != TOK_ARROW) return fail(ps, "'->'");
  lex(ps);
  kiln_indexing_map_t *m =
      kiln_indexing_map_create(ps->ctx, ps->names[0].n, ps->names[1].n, ps->names[2].n);
  *out = m;
  static const char *const prefixes[3] = {"d", "s", "rt"};
  for (int k = 0; k < 3; k++) {
    for (size_t i = 0; i < ps->names[k].n; i++) {
      char def[32];
      snprintf(def, sizeof def, "%s%zu", prefixes[k], i);
      if (strlen(def) == ps->names[k].len[i] &&
          memcmp(def, ps->names[k].ptr[i], ps->names[k].len[i]) == 0)
        continue;
      m->vars[k].data[i].name = kiln_arena_strndup(kiln_affine_ctx_arena(ps->ctx),
                                                   ps->names[k].ptr[i], ps->names[k].len[i]);
    }
  }
  if (!expect_punct(ps, '(')) return false;
  if (is_punct(ps, ')')) {
    lex(ps);
  } else {
    for (;;) {
      kiln_affine_expr_t *e = parse_expr(ps);
      if (!e) return false;
      kiln_indexing_map_add_result(m, e);
      if (is_punct(ps, ',')) {
        lex(ps);
        continue;
      }
      if (!expect_punct(ps, ')')) return false;
      break;
    }
  }
  if (ps->tok.kind == TOK_EOF) return true;
  if (!expect_punct(ps, ',')) return false;
  if (!is_word(ps, "domain")) return fail(ps, "'domain'");
  lex(ps);
  if (!expect_punct(ps, ':')) return false;
  if (is_word(ps, "KNOWN")) {
    lex(ps);
    if (!is_word(ps, "EMPTY")) return fail(ps, "'EMPTY'");
    lex(ps);
    m->known_empty = true;
  } else {
    for (;;) {
      kiln_affine_expr_t *e = parse_expr(ps);
      if (!e) return false;
      if (!is_word(ps, "in")) return fail(ps, "'in'");
      lex(ps);
      int64_t lo, hi;
      if (!expect_punct(ps, '[') || !parse_signed_int(ps, &lo) || !expect_punct(ps, ',') ||
          !parse_signed_int(ps, &hi) || !expect_punct(ps, ']'))
        return false;
      kiln_indexing_map_add_constraint(m, e, lo, hi);
      if (!is_punct(ps, ',')) break;
      lex(ps);
    }
  }
  if (ps->tok.kind != TOK_EOF) return fail(ps, "end of input");
  return true;
}

kiln_status kiln_indexing_map_parse(kiln_affine_ctx_t *ctx, const char *text,
                                    kiln_indexing_map_t **out) {
  *out = NULL;
  parser_t ps;
  parser_init(&ps, ctx, text);
  kiln_indexing_map_t *m = NULL;
  bool ok = parse_map_body(&ps, &m);
  parser_free(&ps);
  if (!ok) {
    kiln_indexing_map_free(m);
    return ps.err ? ps.err : KILN_ERR_INTERNAL("map parse failed without a message");
  }
  *out = m;
  return NULL;
}

kiln_status kiln_affine_parse(kiln_affine_ctx_t *ctx, const char *text,
                              kiln_affine_expr_t **out) {
  *out = NULL;
  parser_t ps;
  parser_init(&ps, ctx, text);
  ps.default_names = true;
  kiln_affine_expr_t *e = parse_expr(&ps);
  if (e && ps.tok.kind != TOK_EOF) {
    fail(&ps, "end of input");
    e = NULL;
  }
  parser_free(&ps);
  if (!e) return ps.err ? ps.err : KILN_ERR_INTERNAL("expression parse failed");
  *out = e;
  return NULL;
}
