/* HLO text parser: shapes and layouts.
 *
 * f32[2,<=3]{1,0:T(8,128)(2,1)E(4)S(1)}, (f32[], (s32[4], token[])), token[], opaque[],
 * f32[1,?] (unbounded dynamic: dynamic, bound -1) and b(f32[4]) (buffer; kept as its array
 * shape). A layout is parsed only when '{' follows the ']' directly, so the '{' of a
 * computation body after `-> f32[2] {` is never taken for one. */
#include <string.h>

#include "compiler/hlo/parser_internal.h"

static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || is_digit(c); }

static void append_m2m(kiln_strbuf_t *b, const int64_t *v, size_t n) {
  kiln_strbuf_append_char(b, '{');
  for (size_t i = 0; i < n; i++) kiln_strbuf_printf(b, i ? ",%lld" : "%lld", (long long)v[i]);
  kiln_strbuf_append_char(b, '}');
}

/* Layout `{m2m[:items]}` for array shape `s`; the cursor is on '{'. */
static bool parse_layout(kiln_hlo_parser_t *P, kiln_shape_t *s) {
  kiln_hlo_lexer_t *L = &P->L;
  const char *pos = L->p;
  L->p++;
  size_t base = P->ints.len;
  if (kiln_hlo_lexer_peek(L) != '}' && kiln_hlo_lexer_peek(L) != ':') {
    for (;;) {
      int64_t v;
      if (!kiln_hlo_lexer_int64(L, "layout dimension", &v)) return false;
      kiln_vec_push(&P->ints, v);
      if (!kiln_hlo_lexer_accept(L, ',')) break;
    }
  }
  size_t rank = P->ints.len - base;
  kiln_layout_t *lay = &s->layout;
  P->tiles.len = 0;
  P->extra.len = 0;
  if (kiln_hlo_lexer_accept(L, ':')) {
    for (;;) {
      kiln_hlo_lexer_skip_ws(L);
      if (L->p >= L->end) return kiln_hlo_lexer_error_expected(L, "'}'");
      char c = *L->p;
      if (c == '}') break;
      bool paren = L->p + 1 < L->end && L->p[1] == '(';
      if (c == 'T' && paren) {
        L->p++;
        while (L->p < L->end && *L->p == '(') {
          L->p++;
          size_t tbase = P->ints.len;
          if (!kiln_hlo_lexer_accept(L, ')')) {
            for (;;) {
              int64_t v;
              if (kiln_hlo_lexer_accept(L, '*')) {
                v = -1;
              } else if (!kiln_hlo_lexer_int64(L, "tile dimension", &v)) {
                return false;
              }
              kiln_vec_push(&P->ints, v);
              if (kiln_hlo_lexer_accept(L, ',')) continue;
              if (!kiln_hlo_lexer_expect(L, ')')) return false;
              break;
            }
          }
          kiln_i64_list_t dims;
          if (!kiln_hlo_parser_take_ints(P, tbase, &dims)) return false;
          kiln_tile_t t = {dims.n, dims.v};
          kiln_vec_push(&P->tiles, t);
        }
      } else if ((c == 'E' || c == 'S') && paren) {
        L->p += 2;
        int64_t v;
        if (!kiln_hlo_lexer_int64(L, c == 'E' ? "element size" : "memory space", &v)) return false;
        if (!kiln_hlo_lexer_expect(L, ')')) return false;
        if (c == 'E')
          lay->element_size_bits = v;
        else
          lay->memory_space = v;
      } else {
        /* Any other item, e.g. L(4) or #(u8): kept verbatim. */
        const char *q = L->p;
        while (q < L->end && ((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') ||
                              *q == '#' || *q == '*'))
          q++;
        if (q == L->p || q >= L->end || *q != '(') return kiln_hlo_lexer_error_expected(L, "layout item");
        int depth = 0;
        while (q < L->end) {
          if (*q == '(') depth++;
          if (*q == ')' && --depth == 0) break;
          if (*q == '\n' || *q == '{' || *q == '}') break;
          q++;
        }
        if (q >= L->end || *q != ')') {
          L->p = q;
          return kiln_hlo_lexer_error_expected(L, "')'");
        }
        q++;
        kiln_vec_reserve(&P->extra, P->extra.len + (size_t)(q - L->p));
        memcpy(P->extra.data + P->extra.len, L->p, (size_t)(q - L->p));
        P->extra.len += (size_t)(q - L->p);
        L->p = q;
      }
    }
  }
  if (!kiln_hlo_lexer_expect(L, '}')) return false;
  if ((int64_t)rank != s->rank) {
    kiln_strbuf_t b = {0};
    append_m2m(&b, P->ints.data + base, rank);
    char *st = kiln_shape_to_string(s, false);
    kiln_hlo_lexer_error_at(L, pos, KILN_INVALID_ARGUMENT,
                            "layout %s has %zu dimensions but shape %s has rank %d",
                            kiln_strbuf_cstr(&b), rank, st, s->rank);
    kiln_free(st);
    kiln_strbuf_free(&b);
    return false;
  }
  /* minor_to_major must be a permutation of 0..rank-1 */
  if (rank) {
    bool *seen = kiln_calloc(rank, 1);
    bool ok = true;
    for (size_t i = 0; i < rank && ok; i++) {
      int64_t d = P->ints.data[base + i];
      if (d < 0 || (size_t)d >= rank || seen[d]) ok = false;
      else seen[d] = true;
    }
    kiln_free(seen);
    if (!ok) {
      kiln_strbuf_t b = {0};
      append_m2m(&b, P->ints.data + base, rank);
      char *st = kiln_shape_to_string(s, false);
      kiln_hlo_lexer_error_at(L, pos, KILN_INVALID_ARGUMENT,
                              "layout %s is not a permutation of the dimensions of %s",
                              kiln_strbuf_cstr(&b), st);
      kiln_free(st);
      kiln_strbuf_free(&b);
      return false;
    }
  }
  kiln_i64_list_t m2m;
  if (!kiln_hlo_parser_take_ints(P, base, &m2m)) return false;
  s->has_layout = true;
  lay->rank = m2m.n;
  lay->minor_to_major = m2m.v;
  if (P->tiles.len) {
    lay->tiles = kiln_hlo_parser_alloc(P, P->tiles.len * sizeof(kiln_tile_t));
    if (!lay->tiles) return false;
    memcpy(lay->tiles, P->tiles.data, P->tiles.len * sizeof(kiln_tile_t));
    lay->num_tiles = (int)P->tiles.len;
  }
  if (P->extra.len) {
    lay->extra = kiln_hlo_parser_strndup(P, P->extra.data, P->extra.len);
    if (!lay->extra) return false;
  }
  return true;
}

/* The element type named s[0, n) ("f32", "bf16", ...), looked up with a length/first-letter
 * filter (it is on the hot path); false when it names none. */
static bool elem_type_lookup(const char *s, size_t n, kiln_elem_type_t *out) {
  static const struct {
    const char *name;
    size_t len;
  } kTypes[] = {
#define X(e, text, bits, kind) {text, sizeof(text) - 1},
#include "compiler/hlo/element_types.def"
#undef X
  };
  for (int i = 0; i < KILN_ELEM_TYPE_COUNT; i++) {
    if (kTypes[i].len == n && kTypes[i].name[0] == s[0] && memcmp(kTypes[i].name, s, n) == 0) {
      *out = (kiln_elem_type_t)i;
      return true;
    }
  }
  return false;
}

bool kiln_hlo_parse_shape_text(kiln_hlo_parser_t *P, kiln_shape_t **out) {
  kiln_hlo_lexer_t *L = &P->L;
  kiln_arena_t *a = &P->m->arena;
  char c = kiln_hlo_lexer_peek(L);
  if (L->err) return false;
  if (c == '(') {
    if (!kiln_hlo_parser_enter(P)) return false;
    L->p++;
    size_t base = P->shapes.len;
    if (!kiln_hlo_lexer_accept(L, ')')) {
      for (;;) {
        kiln_shape_t *e;
        if (!kiln_hlo_parse_shape_text(P, &e)) return false;
        kiln_vec_push(&P->shapes, e);
        if (kiln_hlo_lexer_accept(L, ',')) continue;
        if (!kiln_hlo_lexer_expect(L, ')')) return false;
        break;
      }
    }
    size_t n = P->shapes.len - base;
    if (n > KILN_HLO_PARSE_MAX_COUNT)
      return kiln_hlo_lexer_error_at(L, L->p, KILN_INVALID_ARGUMENT, "tuple too long");
    if (!kiln_hlo_parser_reserve(P, sizeof(kiln_shape_t) + n * sizeof(kiln_shape_t *), 2)) return false;
    *out = kiln_shape_make_tuple(a, (int)n, P->shapes.data + base);
    P->shapes.len = base;
    P->depth--;
    return *out != NULL || kiln_hlo_parser_oom(P);
  }
  const char *tpos = L->p, *q = L->p;
  if (L->end - q >= 2 && q[0] == 'b' && q[1] == '(') {
    /* b(f32[4]): a buffer of an array shape; kept as the array shape. */
    if (!kiln_hlo_parser_enter(P)) return false;
    L->p += 2;
    if (!kiln_hlo_parse_shape_text(P, out) || !kiln_hlo_lexer_expect(L, ')')) return false;
    P->depth--;
    return true;
  }
  while (q < L->end && is_lower_alnum(*q)) q++;
  kiln_elem_type_t t;
  if (q == tpos) return kiln_hlo_lexer_error_expected(L, "shape");
  if (!elem_type_lookup(tpos, (size_t)(q - tpos), &t) || t == KILN_TUPLE) {
    if (q < L->end && *q == '[')
      return kiln_hlo_lexer_error_at(L, tpos, KILN_INVALID_ARGUMENT, "unknown element type '%.*s'",
                                     (int)(q - tpos), tpos);
    return kiln_hlo_lexer_error_expected(L, "shape");
  }
  L->p = q;
  if (!kiln_hlo_lexer_expect(L, '[')) return false;
  size_t base = P->ints.len;
  P->dyn.len = 0;
  bool any_dynamic = false;
  if (!kiln_hlo_lexer_accept(L, ']')) {
    for (;;) {
      bool dynamic = kiln_hlo_lexer_accept_op(L, "<=");
      int64_t d;
      kiln_hlo_lexer_skip_ws(L);
      const char *dpos = L->p;
      if (!dynamic && kiln_hlo_lexer_accept(L, '?')) {
        dynamic = true; /* unbounded dynamic dimension */
        d = -1;
      } else if (!kiln_hlo_lexer_int64(L, "dimension size", &d)) {
        return false;
      } else if (d < 0)
        return kiln_hlo_lexer_error_at(L, dpos, KILN_INVALID_ARGUMENT,
                                       "negative dimension size %lld", (long long)d);
      kiln_vec_push(&P->ints, d);
      kiln_vec_push(&P->dyn, dynamic);
      any_dynamic |= dynamic;
      if (kiln_hlo_lexer_accept(L, ',')) continue;
      if (!kiln_hlo_lexer_expect(L, ']')) return false;
      break;
    }
  }
  size_t rank = P->ints.len - base;
  if (rank > KILN_HLO_PARSE_MAX_COUNT)
    return kiln_hlo_lexer_error_at(L, tpos, KILN_INVALID_ARGUMENT, "too many dimensions");
  if (!kiln_elem_type_is_array(t) && rank)
    return kiln_hlo_lexer_error_at(L, tpos, KILN_INVALID_ARGUMENT, "%s shape cannot have dimensions",
                                   kiln_elem_type_name(t));
  if (!kiln_hlo_parser_reserve(P, sizeof(kiln_shape_t) + rank * 8, 2)) return false;
  kiln_shape_t *s = t == KILN_TOKEN ? kiln_shape_make_token(a)
                                    : kiln_shape_make_array(a, t, (int)rank, P->ints.data + base);
  if (!s) return kiln_hlo_parser_oom(P);
  s->type = t;
  P->ints.len = base;
  if (any_dynamic) {
    s->dynamic = kiln_hlo_parser_alloc(P, rank);
    if (!s->dynamic) return false;
    memcpy(s->dynamic, P->dyn.data, rank);
  }
  /* A layout follows the ']' directly; a '{' after a space is the computation body. */
  if (L->p < L->end && *L->p == '{' && kiln_elem_type_is_array(t)) {
    const char *r = L->p + 1;
    while (r < L->end && (*r == ' ' || *r == '\t')) r++;
    if (r < L->end && (is_digit(*r) || *r == ':' || *r == '}')) {
      if (!parse_layout(P, s)) return false;
    }
  }
  *out = s;
  return true;
}

/* ---- attribute values ---- */
