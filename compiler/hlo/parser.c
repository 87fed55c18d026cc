/* HLO text parser: module / computation / instruction structure, attributes, shapes and
 * layouts. Literals are parsed in parser_literal.c.
 *
 * One pass over the text with a hand-written scanner (lexer.c). Names are resolved through
 * hash maps after the enclosing scope is read: operands and control predecessors when
 * their computation ends (so forward references work), called computations when the
 * module ends. Everything lands in the module's arena, whose limit is set from the input
 * size, so no input can make the parser allocate without bound; scratch vectors grow only
 * with the text actually read. */
#include <stdlib.h>
#include <string.h>

#include "compiler/hlo/ir.h"
#include "compiler/hlo/parser_internal.h"

/* ---- small helpers ---- */

bool kiln_hlo_parser_enter(kiln_hlo_parser_t *P) {
  if (++P->depth > KILN_HLO_PARSE_MAX_DEPTH)
    return kiln_hlo_lexer_error_at(&P->L, P->L.p, KILN_INVALID_ARGUMENT,
                                   "nesting too deep (more than %d levels)",
                                   KILN_HLO_PARSE_MAX_DEPTH);
  return true;
}

bool kiln_hlo_parser_oom(kiln_hlo_parser_t *P) {
  return kiln_hlo_lexer_error_at(&P->L, P->L.p, KILN_RESOURCE_EXHAUSTED,
                                 "input needs more than %zu bytes of memory to represent",
                                 P->m->arena.limit);
}

/* Fails with RESOURCE_EXHAUSTED unless `n` more bytes (in at most `allocs` allocations)
 * fit under the arena limit. Called before ir.c / shape.c helpers that do not check for
 * NULL from the arena. */
bool kiln_hlo_parser_reserve(kiln_hlo_parser_t *P, size_t n, size_t allocs) {
  kiln_arena_t *a = &P->m->arena;
  if (!a->limit) return true;
  size_t need = n + 16 * (allocs + 1);
  if (n > a->limit || a->total > a->limit - need || need > a->limit) return kiln_hlo_parser_oom(P);
  return true;
}

void *kiln_hlo_parser_alloc(kiln_hlo_parser_t *P, size_t n) {
  void *p = kiln_arena_alloc(&P->m->arena, n);
  if (!p) kiln_hlo_parser_oom(P);
  return p;
}

static char *arena_strndup(kiln_hlo_parser_t *P, const char *s, size_t n) {
  char *d = kiln_arena_strndup(&P->m->arena, s, n);
  if (!d) kiln_hlo_parser_oom(P);
  return d;
}

/* A NUL-terminated copy of [s, s+n) in the parser's name buffer (valid until next use). */
static const char *cname(kiln_hlo_parser_t *P, const char *s, size_t n) {
  P->nb.len = 0;
  kiln_strbuf_append_n(&P->nb, s, n);
  return kiln_strbuf_cstr(&P->nb);
}

static bool span_eq(const char *s, size_t n, const char *lit) {
  size_t m = strlen(lit);
  return n == m && memcmp(s, lit, n) == 0;
}

/* Copies ints [base, len) of the scratch stack into an arena list and pops them. */
static bool take_ints(kiln_hlo_parser_t *P, size_t base, kiln_i64_list_t *out) {
  size_t n = P->ints.len - base;
  if (n > KILN_HLO_PARSE_MAX_COUNT)
    return kiln_hlo_lexer_error_at(&P->L, P->L.p, KILN_INVALID_ARGUMENT, "list too long");
  out->n = (int)n;
  out->v = NULL;
  if (n) {
    out->v = kiln_hlo_parser_alloc(P, n * sizeof(int64_t));
    if (!out->v) return false;
    memcpy(out->v, P->ints.data + base, n * sizeof(int64_t));
  }
  P->ints.len = base;
  return true;
}

/* {1,2,3} or {} */
static bool parse_i64_list(kiln_hlo_parser_t *P, kiln_i64_list_t *out) {
  kiln_hlo_lexer_t *L = &P->L;
  if (!kiln_hlo_lexer_expect(L, '{')) return false;
  size_t base = P->ints.len;
  if (!kiln_hlo_lexer_accept(L, '}')) {
    for (;;) {
      int64_t v;
      if (!kiln_hlo_lexer_int64(L, "integer", &v)) return false;
      kiln_vec_push(&P->ints, v);
      if (kiln_hlo_lexer_accept(L, ',')) continue;
      if (!kiln_hlo_lexer_expect(L, '}')) return false;
      break;
    }
  }
  return take_ints(P, base, out);
}

static bool parse_bool(kiln_hlo_parser_t *P, bool *out) {
  kiln_hlo_lexer_t *L = &P->L;
  if (kiln_hlo_lexer_accept_word(L, "true")) {
    *out = true;
    return true;
  }
  if (kiln_hlo_lexer_accept_word(L, "false")) {
    *out = false;
    return true;
  }
  return kiln_hlo_lexer_error_expected(L, "'true' or 'false'");
}

static bool parse_word_dup(kiln_hlo_parser_t *P, const char *what, char **out) {
  const char *s;
  size_t n;
  if (!kiln_hlo_lexer_word(&P->L, what, &s, &n)) return false;
  *out = arena_strndup(P, s, n);
  return *out != NULL;
}

/* ---- shapes and layouts ---- */

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
          if (!take_ints(P, tbase, &dims)) return false;
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
  if (!take_ints(P, base, &m2m)) return false;
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
    lay->extra = arena_strndup(P, P->extra.data, P->extra.len);
    if (!lay->extra) return false;
  }
  return true;
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
  while (q < L->end && is_lower_alnum(*q)) q++;
  kiln_elem_type_t t;
  if (q == tpos) return kiln_hlo_lexer_error_expected(L, "shape");
  if (!kiln_elem_type_from_name(tpos, (size_t)(q - tpos), &t) || t == KILN_TUPLE) {
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
      if (!kiln_hlo_lexer_int64(L, "dimension size", &d)) return false;
      if (d < 0)
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

/* slice={[0:2], [1:9:2]} */
static bool parse_slice(kiln_hlo_parser_t *P, kiln_hlo_instruction_t *instr) {
  kiln_hlo_lexer_t *L = &P->L;
  if (!kiln_hlo_lexer_expect(L, '{')) return false;
  size_t base = P->ints.len;
  if (!kiln_hlo_lexer_accept(L, '}')) {
    for (;;) {
      int64_t start, limit, stride = 1;
      if (!kiln_hlo_lexer_expect(L, '[') || !kiln_hlo_lexer_int64(L, "slice start", &start) ||
          !kiln_hlo_lexer_expect(L, ':') || !kiln_hlo_lexer_int64(L, "slice limit", &limit))
        return false;
      if (kiln_hlo_lexer_accept(L, ':') && !kiln_hlo_lexer_int64(L, "slice stride", &stride))
        return false;
      if (!kiln_hlo_lexer_expect(L, ']')) return false;
      kiln_vec_push(&P->ints, start);
      kiln_vec_push(&P->ints, limit);
      kiln_vec_push(&P->ints, stride);
      if (kiln_hlo_lexer_accept(L, ',')) continue;
      if (!kiln_hlo_lexer_expect(L, '}')) return false;
      break;
    }
  }
  size_t n = (P->ints.len - base) / 3;
  if (n > KILN_HLO_PARSE_MAX_COUNT)
    return kiln_hlo_lexer_error_at(L, L->p, KILN_INVALID_ARGUMENT, "list too long");
  instr->num_slice_dims = (int)n;
  if (n) {
    instr->slice = kiln_hlo_parser_alloc(P, n * sizeof(kiln_slice_dim_t));
    if (!instr->slice) return false;
    for (size_t i = 0; i < n; i++) {
      instr->slice[i].start = P->ints.data[base + 3 * i];
      instr->slice[i].limit = P->ints.data[base + 3 * i + 1];
      instr->slice[i].stride = P->ints.data[base + 3 * i + 2];
    }
  }
  P->ints.len = base;
  return true;
}

/* Integers separated by `sep` with no spaces: 3x3, 0_1. Pushes them on the int stack. */
static bool parse_int_run(kiln_hlo_parser_t *P, char sep, const char *what) {
  kiln_hlo_lexer_t *L = &P->L;
  for (;;) {
    int64_t v;
    if (!kiln_hlo_lexer_int64(L, what, &v)) return false;
    kiln_vec_push(&P->ints, v);
    if (L->p < L->end && *L->p == sep) {
      L->p++;
      continue;
    }
    return true;
  }
}

/* padding=lo_hi[_interior]x... for pad. */
static bool parse_padding(kiln_hlo_parser_t *P, kiln_hlo_instruction_t *instr) {
  kiln_hlo_lexer_t *L = &P->L;
  size_t base = P->ints.len;
  for (;;) {
    size_t dbase = P->ints.len;
    kiln_hlo_lexer_skip_ws(L);
    const char *pos = L->p;
    if (!parse_int_run(P, '_', "padding")) return false;
    size_t parts = P->ints.len - dbase;
    if (parts < 2 || parts > 3) {
      L->p = pos;
      return kiln_hlo_lexer_error_expected(L, "padding 'low_high' or 'low_high_interior'");
    }
    if (parts == 2) kiln_vec_push(&P->ints, 0);
    if (L->p < L->end && *L->p == 'x') {
      L->p++;
      continue;
    }
    break;
  }
  size_t n = (P->ints.len - base) / 3;
  if (n > KILN_HLO_PARSE_MAX_COUNT)
    return kiln_hlo_lexer_error_at(L, L->p, KILN_INVALID_ARGUMENT, "list too long");
  instr->num_pad_dims = (int)n;
  instr->padding = kiln_hlo_parser_alloc(P, n * sizeof(kiln_pad_dim_t));
  if (!instr->padding) return false;
  for (size_t i = 0; i < n; i++) {
    instr->padding[i].lo = P->ints.data[base + 3 * i];
    instr->padding[i].hi = P->ints.data[base + 3 * i + 1];
    instr->padding[i].interior = P->ints.data[base + 3 * i + 2];
  }
  P->ints.len = base;
  return true;
}

/* window={size=3x3 stride=2x2 pad=0_1x0_1 lhs_dilate=1x2 rhs_dilate=2x1 rhs_reversal=0x1} */
static bool parse_window(kiln_hlo_parser_t *P, kiln_hlo_instruction_t *instr) {
  kiln_hlo_lexer_t *L = &P->L;
  static const char *const kFields[] = {"size", "stride", "pad", "lhs_dilate", "rhs_dilate",
                                        "rhs_reversal"};
  enum { kNumFields = 6 };
  size_t start[kNumFields], count[kNumFields];
  bool present[kNumFields] = {false};
  if (!kiln_hlo_lexer_expect(L, '{')) return false;
  size_t base = P->ints.len;
  int64_t n = -1;
  while (!kiln_hlo_lexer_accept(L, '}')) {
    const char *k, *kpos;
    size_t kn;
    kiln_hlo_lexer_skip_ws(L);
    kpos = L->p;
    if (!kiln_hlo_lexer_word(L, "window field or '}'", &k, &kn)) return false;
    int f = -1;
    for (int i = 0; i < kNumFields; i++)
      if (span_eq(k, kn, kFields[i])) f = i;
    if (f < 0)
      return kiln_hlo_lexer_error_at(L, kpos, KILN_INVALID_ARGUMENT, "unknown window field '%.*s'",
                                     (int)kn, k);
    if (present[f])
      return kiln_hlo_lexer_error_at(L, kpos, KILN_INVALID_ARGUMENT,
                                     "duplicate window field '%s'", kFields[f]);
    if (!kiln_hlo_lexer_expect(L, '=')) return false;
    present[f] = true;
    start[f] = P->ints.len;
    int64_t dims = 0;
    for (;;) {
      size_t before = P->ints.len;
      if (!parse_int_run(P, f == 2 ? '_' : 'x', f == 2 ? "padding" : "window value")) return false;
      if (f == 2) {
        if (P->ints.len - before != 2) {
          return kiln_hlo_lexer_error_at(L, L->p, KILN_INVALID_ARGUMENT,
                                         "window pad must be 'low_high' per dimension");
        }
      }
      dims++;
      if (f == 2 && L->p < L->end && *L->p == 'x') {
        L->p++;
        continue;
      }
      break;
    }
    if (f != 2) dims = (int64_t)(P->ints.len - start[f]);
    count[f] = (size_t)dims;
    if (n < 0) {
      n = dims;
    } else if (dims != n) {
      return kiln_hlo_lexer_error_at(L, kpos, KILN_INVALID_ARGUMENT,
                                     "window field '%s' has %lld dimensions, expected %lld",
                                     kFields[f], (long long)dims, (long long)n);
    }
  }
  if (n < 0) n = 0;
  if ((size_t)n > KILN_HLO_PARSE_MAX_COUNT)
    return kiln_hlo_lexer_error_at(L, L->p, KILN_INVALID_ARGUMENT, "window too long");
  instr->num_window_dims = (int)n;
  if (n) {
    instr->window = kiln_hlo_parser_alloc(P, (size_t)n * sizeof(kiln_window_dim_t));
    if (!instr->window) return false;
  }
  int64_t *v = P->ints.data;
  for (int64_t i = 0; i < n; i++) {
    kiln_window_dim_t *w = &instr->window[i];
    w->size = present[0] ? v[start[0] + i] : 1;
    w->stride = present[1] ? v[start[1] + i] : 1;
    w->pad_lo = present[2] ? v[start[2] + 2 * i] : 0;
    w->pad_hi = present[2] ? v[start[2] + 2 * i + 1] : 0;
    w->lhs_dilate = present[3] ? v[start[3] + i] : 1;
    w->rhs_dilate = present[4] ? v[start[4] + i] : 1;
    w->reversal = present[5] ? v[start[5] + i] != 0 : false;
  }
  (void)count;
  P->ints.len = base;
  return true;
}

/* One dim_labels part: `batch`/`feature` letters (b/f or i/o) and spatial digits. Fills
 * the two positions and spatial[digit] = position. Returns the number of spatial dims or
 * -1 if malformed. */
static int parse_label_part(const char *s, size_t n, char l0, char l1, int64_t *p0, int64_t *p1,
                            int64_t *spatial) {
  int c0 = 0, c1 = 0, ns = 0;
  bool seen[10] = {false};
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == l0) c0++, *p0 = (int64_t)i;
    else if (c == l1) c1++, *p1 = (int64_t)i;
    else if (is_digit(c)) {
      int d = c - '0';
      if (seen[d]) return -1;
      seen[d] = true;
      spatial[d] = (int64_t)i;
      ns++;
    } else {
      return -1;
    }
  }
  if (c0 != 1 || c1 != 1) return -1;
  for (int d = 0; d < ns; d++)
    if (!seen[d]) return -1;
  return ns;
}

/* dim_labels=b01f_01io->b01f */
static bool parse_dim_labels(kiln_hlo_parser_t *P, kiln_hlo_instruction_t *instr) {
  kiln_hlo_lexer_t *L = &P->L;
  kiln_hlo_lexer_skip_ws(L);
  const char *s = L->p, *q = L->p;
  while (q < L->end && (is_lower_alnum(*q) || *q == '_' || *q == '-' || *q == '>' || *q == '?'))
    q++;
  size_t n = (size_t)(q - s);
  const char *us = memchr(s, '_', n);
  const char *arrow = NULL;
  for (const char *r = s; r + 1 < q; r++)
    if (r[0] == '-' && r[1] == '>') {
      arrow = r;
      break;
    }
  int64_t in_sp[10], k_sp[10], out_sp[10];
  kiln_conv_dnums_t *d = &instr->conv_dnums;
  int a = -1, b = -1, c = -1;
  if (us && arrow && us < arrow) {
    a = parse_label_part(s, (size_t)(us - s), 'b', 'f', &d->input_batch, &d->input_feature, in_sp);
    b = parse_label_part(us + 1, (size_t)(arrow - us - 1), 'i', 'o', &d->kernel_input_feature,
                         &d->kernel_output_feature, k_sp);
    c = parse_label_part(arrow + 2, (size_t)(q - arrow - 2), 'b', 'f', &d->output_batch,
                         &d->output_feature, out_sp);
  }
  if (a < 0 || a != b || a != c) {
    if (n == 0) return kiln_hlo_lexer_error_expected(L, "dim_labels");
    return kiln_hlo_lexer_error_at(L, s, KILN_INVALID_ARGUMENT, "malformed dim_labels '%.*s'",
                                   (int)n, s);
  }
  L->p = q;
  d->num_spatial = a;
  if (a) {
    d->input_spatial = kiln_hlo_parser_alloc(P, (size_t)a * 8);
    d->kernel_spatial = kiln_hlo_parser_alloc(P, (size_t)a * 8);
    d->output_spatial = kiln_hlo_parser_alloc(P, (size_t)a * 8);
    if (!d->input_spatial || !d->kernel_spatial || !d->output_spatial) return false;
    memcpy(d->input_spatial, in_sp, (size_t)a * 8);
    memcpy(d->kernel_spatial, k_sp, (size_t)a * 8);
    memcpy(d->output_spatial, out_sp, (size_t)a * 8);
  }
  instr->has_conv_dnums = true;
  return true;
}

/* {default,highest} */
static bool parse_precision(kiln_hlo_parser_t *P, kiln_hlo_instruction_t *instr) {
  kiln_hlo_lexer_t *L = &P->L;
  if (!kiln_hlo_lexer_expect(L, '{')) return false;
  P->strs.len = 0;
  if (!kiln_hlo_lexer_accept(L, '}')) {
    for (;;) {
      char *w;
      if (!parse_word_dup(P, "precision", &w)) return false;
      kiln_vec_push(&P->strs, w);
      if (kiln_hlo_lexer_accept(L, ',')) continue;
      if (!kiln_hlo_lexer_expect(L, '}')) return false;
      break;
    }
  }
  if (P->strs.len > KILN_HLO_PARSE_MAX_COUNT)
    return kiln_hlo_lexer_error_at(L, L->p, KILN_INVALID_ARGUMENT, "list too long");
  instr->num_operand_precision = (int)P->strs.len;
  if (P->strs.len) {
    instr->operand_precision = kiln_hlo_parser_alloc(P, P->strs.len * sizeof(char *));
    if (!instr->operand_precision) return false;
    memcpy(instr->operand_precision, P->strs.data, P->strs.len * sizeof(char *));
  }
  return true;
}

/* Names of `{a, b}` (braced) or `a` into the given ref vector. */
static bool parse_name_refs(kiln_hlo_parser_t *P, kiln_hlo_name_refs_t *refs, bool allow_bare,
                            bool *braced, const char *what) {
  kiln_hlo_lexer_t *L = &P->L;
  *braced = kiln_hlo_lexer_accept(L, '{');
  if (!*braced && !allow_bare) return kiln_hlo_lexer_error_expected(L, "'{'");
  if (*braced && kiln_hlo_lexer_accept(L, '}')) return true;
  for (;;) {
    kiln_hlo_name_ref_t r;
    size_t n;
    if (!kiln_hlo_lexer_name(L, what, &r.name, &n, &r.pos)) return false;
    r.len = (uint32_t)n;
    kiln_vec_push(refs, r);
    if (!*braced) return true;
    if (kiln_hlo_lexer_accept(L, ',')) continue;
    return kiln_hlo_lexer_expect(L, '}');
  }
}

/* backend_config: {json} | "string" | anything else (raw). */
static bool parse_backend_config(kiln_hlo_parser_t *P, kiln_hlo_instruction_t *instr) {
  kiln_hlo_lexer_t *L = &P->L;
  char c = kiln_hlo_lexer_peek(L);
  if (c == '"') {
    P->sb.len = 0;
    bool has_nul;
    const char *raw;
    if (!kiln_hlo_lexer_string(L, &P->sb, &has_nul, &raw)) return false;
    if (has_nul) {
      /* Opaque bytes: keep the escaped text, the decoded form would stop at the NUL. */
      instr->backend_config_form = KILN_BACKEND_CONFIG_RAW;
      instr->backend_config = arena_strndup(P, raw, (size_t)(L->p - raw));
    } else {
      instr->backend_config_form = KILN_BACKEND_CONFIG_STRING;
      instr->backend_config = arena_strndup(P, P->sb.data, P->sb.len);
    }
    return instr->backend_config != NULL;
  }
  if (!kiln_hlo_lexer_capture(L, true, &P->sb)) return false;
  instr->backend_config_form = c == '{' ? KILN_BACKEND_CONFIG_JSON : KILN_BACKEND_CONFIG_RAW;
  instr->backend_config = arena_strndup(P, P->sb.data, P->sb.len);
  return instr->backend_config != NULL;
}

static const char *const kApiVersions[] = {
    "API_VERSION_UNSPECIFIED", "API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING",
    "API_VERSION_STATUS_RETURNING_UNIFIED", "API_VERSION_TYPED_FFI"};

static bool parse_enum_word(kiln_hlo_parser_t *P, const char *what, const char *const *names,
                            int count, int *out) {
  kiln_hlo_lexer_t *L = &P->L;
  const char *s;
  size_t n;
  kiln_hlo_lexer_skip_ws(L);
  const char *pos = L->p;
  if (!kiln_hlo_lexer_word(L, what, &s, &n)) return false;
  for (int i = 0; i < count; i++)
    if (span_eq(s, n, names[i])) {
      *out = i;
      return true;
    }
  return kiln_hlo_lexer_error_at(L, pos, KILN_INVALID_ARGUMENT, "unknown %s '%.*s'", what, (int)n, s);
}

/* ---- attribute keys ---- */

#define KILN_HLO_ATTRS(X)                                                                   \
  X(INDEX, "index") X(DIMENSIONS, "dimensions") X(IOTA_DIMENSION, "iota_dimension")         \
  X(SLICE, "slice") X(DYNAMIC_SLICE_SIZES, "dynamic_slice_sizes") X(PADDING, "padding")     \
  X(WINDOW, "window") X(DIM_LABELS, "dim_labels")                                           \
  X(FEATURE_GROUP_COUNT, "feature_group_count") X(BATCH_GROUP_COUNT, "batch_group_count")   \
  X(LHS_BATCH, "lhs_batch_dims") X(LHS_CONTRACTING, "lhs_contracting_dims")                 \
  X(RHS_BATCH, "rhs_batch_dims") X(RHS_CONTRACTING, "rhs_contracting_dims")                 \
  X(OPERAND_PRECISION, "operand_precision") X(OFFSET_DIMS, "offset_dims")                   \
  X(COLLAPSED_SLICE_DIMS, "collapsed_slice_dims") X(START_INDEX_MAP, "start_index_map")     \
  X(OPERAND_BATCHING_DIMS, "operand_batching_dims")                                         \
  X(START_INDICES_BATCHING_DIMS, "start_indices_batching_dims")                             \
  X(INDEX_VECTOR_DIM, "index_vector_dim") X(SLICE_SIZES, "slice_sizes")                     \
  X(UPDATE_WINDOW_DIMS, "update_window_dims") X(INSERTED_WINDOW_DIMS, "inserted_window_dims") \
  X(SCATTER_DIMS_TO_OPERAND_DIMS, "scatter_dims_to_operand_dims")                           \
  X(INPUT_BATCHING_DIMS, "input_batching_dims")                                             \
  X(SCATTER_INDICES_BATCHING_DIMS, "scatter_indices_batching_dims")                         \
  X(INDICES_ARE_SORTED, "indices_are_sorted") X(UNIQUE_INDICES, "unique_indices")           \
  X(DIRECTION, "direction") X(TYPE, "type") X(KIND, "kind") X(TO_APPLY, "to_apply")         \
  X(CALLS, "calls") X(CONDITION, "condition") X(BODY, "body") X(SELECT, "select")           \
  X(SCATTER, "scatter") X(TRUE_COMPUTATION, "true_computation")                             \
  X(FALSE_COMPUTATION, "false_computation") X(BRANCH_COMPUTATIONS, "branch_computations")   \
  X(CALLED_COMPUTATIONS, "called_computations") X(CUSTOM_CALL_TARGET, "custom_call_target") \
  X(API_VERSION, "api_version") X(IS_STABLE, "is_stable") X(EXPONENT_BITS, "exponent_bits") \
  X(MANTISSA_BITS, "mantissa_bits") X(FFT_TYPE, "fft_type") X(FFT_LENGTH, "fft_length")     \
  X(DISTRIBUTION, "distribution") X(ALGORITHM, "algorithm") X(LEFT_SIDE, "left_side")       \
  X(LOWER, "lower") X(UNIT_DIAGONAL, "unit_diagonal") X(TRANSPOSE_A, "transpose_a")         \
  X(CHANNEL_ID, "channel_id") X(REPLICA_GROUPS, "replica_groups")                           \
  X(USE_GLOBAL_DEVICE_IDS, "use_global_device_ids") X(CONSTRAIN_LAYOUT, "constrain_layout") \
  X(K, "k") X(LARGEST, "largest") X(CONTROL_PREDECESSORS, "control-predecessors")           \
  X(BACKEND_CONFIG, "backend_config")

typedef enum attr_id {
  ATTR_RAW = 0,
#define X(e, s) ATTR_##e,
  KILN_HLO_ATTRS(X)
#undef X
  ATTR_COUNT
} attr_id_t;

static const char *const kAttrNames[ATTR_COUNT] = {
    "",
#define X(e, s) s,
    KILN_HLO_ATTRS(X)
#undef X
};

static attr_id_t lookup_attr(kiln_hlo_parser_t *P, const char *k, size_t n) {
  void *v = kiln_hashmap_get(&P->attr_keys, k, n);
  if (v) return (attr_id_t)((uintptr_t)v - 1);
  attr_id_t id = ATTR_RAW;
  for (int i = 1; i < ATTR_COUNT; i++)
    if (span_eq(k, n, kAttrNames[i])) id = (attr_id_t)i;
  kiln_hashmap_put(&P->attr_keys, k, n, (void *)(uintptr_t)(id + 1));
  return id;
}

/* Attributes whose typed field belongs to one opcode are decoded only there; elsewhere
 * they stay raw (e.g. `algorithm=` on dot is not the rng algorithm). */
static bool attr_applies(attr_id_t id, kiln_hlo_opcode_t op) {
  switch (id) {
    case ATTR_INDEX: return op == KILN_OP_GET_TUPLE_ELEMENT;
    case ATTR_PADDING: return op == KILN_OP_PAD;
    case ATTR_OFFSET_DIMS: case ATTR_COLLAPSED_SLICE_DIMS: case ATTR_START_INDEX_MAP:
    case ATTR_OPERAND_BATCHING_DIMS: case ATTR_START_INDICES_BATCHING_DIMS:
    case ATTR_SLICE_SIZES:
      return op == KILN_OP_GATHER;
    case ATTR_UPDATE_WINDOW_DIMS: case ATTR_INSERTED_WINDOW_DIMS:
    case ATTR_SCATTER_DIMS_TO_OPERAND_DIMS: case ATTR_INPUT_BATCHING_DIMS:
    case ATTR_SCATTER_INDICES_BATCHING_DIMS:
      return op == KILN_OP_SCATTER;
    case ATTR_INDEX_VECTOR_DIM: return op == KILN_OP_GATHER || op == KILN_OP_SCATTER;
    case ATTR_INDICES_ARE_SORTED: case ATTR_UNIQUE_INDICES:
      return op == KILN_OP_GATHER || op == KILN_OP_SCATTER;
    case ATTR_DIRECTION: case ATTR_TYPE: return op == KILN_OP_COMPARE;
    case ATTR_KIND: return op == KILN_OP_FUSION;
    case ATTR_CUSTOM_CALL_TARGET: case ATTR_API_VERSION: return op == KILN_OP_CUSTOM_CALL;
    case ATTR_IS_STABLE: return op == KILN_OP_SORT;
    case ATTR_EXPONENT_BITS: case ATTR_MANTISSA_BITS: return op == KILN_OP_REDUCE_PRECISION;
    case ATTR_FFT_TYPE: case ATTR_FFT_LENGTH: return op == KILN_OP_FFT;
    case ATTR_DISTRIBUTION: return op == KILN_OP_RNG;
    case ATTR_ALGORITHM: return op == KILN_OP_RNG_BIT_GENERATOR;
    case ATTR_LEFT_SIDE: case ATTR_UNIT_DIAGONAL: case ATTR_TRANSPOSE_A:
      return op == KILN_OP_TRIANGULAR_SOLVE;
    case ATTR_LOWER: return op == KILN_OP_TRIANGULAR_SOLVE || op == KILN_OP_CHOLESKY;
    case ATTR_K: case ATTR_LARGEST: return op == KILN_OP_TOPK;
    default: return true;
  }
}

static bool add_called_ref(kiln_hlo_parser_t *P, kiln_hlo_instruction_t *instr, attr_id_t id) {
  kiln_hlo_called_rec_t rec;
  rec.instr = instr;
  rec.key = kAttrNames[id];
  rec.begin = (uint32_t)P->crefs.len;
  bool braced;
  if (!parse_name_refs(P, &P->crefs, true, &braced, "computation name")) return false;
  rec.braced = braced;
  rec.count = (uint32_t)(P->crefs.len - rec.begin);
  kiln_vec_push(&P->called, rec);
  return true;
}

static bool parse_attr_value(kiln_hlo_parser_t *P, kiln_hlo_instruction_t *instr,
                             kiln_hlo_instr_rec_t *rec, attr_id_t id) {
  kiln_hlo_lexer_t *L = &P->L;
  int e;
  switch (id) {
    case ATTR_INDEX: return kiln_hlo_lexer_int64(L, "tuple index", &instr->tuple_index);
    case ATTR_DIMENSIONS:
      instr->has_dimensions = true;
      return parse_i64_list(P, &instr->dimensions);
    case ATTR_IOTA_DIMENSION: return kiln_hlo_lexer_int64(L, "iota dimension", &instr->iota_dimension);
    case ATTR_SLICE: return parse_slice(P, instr);
    case ATTR_DYNAMIC_SLICE_SIZES: return parse_i64_list(P, &instr->dynamic_slice_sizes);
    case ATTR_PADDING: return parse_padding(P, instr);
    case ATTR_WINDOW: return parse_window(P, instr);
    case ATTR_DIM_LABELS: return parse_dim_labels(P, instr);
    case ATTR_FEATURE_GROUP_COUNT:
      return kiln_hlo_lexer_int64(L, "feature group count", &instr->feature_group_count);
    case ATTR_BATCH_GROUP_COUNT:
      return kiln_hlo_lexer_int64(L, "batch group count", &instr->batch_group_count);
    case ATTR_LHS_BATCH: instr->has_dot_dnums = true; return parse_i64_list(P, &instr->dot_dnums.lhs_batch);
    case ATTR_LHS_CONTRACTING:
      instr->has_dot_dnums = true;
      return parse_i64_list(P, &instr->dot_dnums.lhs_contracting);
    case ATTR_RHS_BATCH: instr->has_dot_dnums = true; return parse_i64_list(P, &instr->dot_dnums.rhs_batch);
    case ATTR_RHS_CONTRACTING:
      instr->has_dot_dnums = true;
      return parse_i64_list(P, &instr->dot_dnums.rhs_contracting);
    case ATTR_OPERAND_PRECISION: return parse_precision(P, instr);
    case ATTR_OFFSET_DIMS:
      instr->has_gather_dnums = true;
      return parse_i64_list(P, &instr->gather_dnums.offset_dims);
    case ATTR_COLLAPSED_SLICE_DIMS:
      instr->has_gather_dnums = true;
      return parse_i64_list(P, &instr->gather_dnums.collapsed_slice_dims);
    case ATTR_START_INDEX_MAP:
      instr->has_gather_dnums = true;
      return parse_i64_list(P, &instr->gather_dnums.start_index_map);
    case ATTR_OPERAND_BATCHING_DIMS:
      instr->has_gather_dnums = true;
      return parse_i64_list(P, &instr->gather_dnums.operand_batching_dims);
    case ATTR_START_INDICES_BATCHING_DIMS:
      instr->has_gather_dnums = true;
      return parse_i64_list(P, &instr->gather_dnums.start_indices_batching_dims);
    case ATTR_INDEX_VECTOR_DIM:
      if (instr->opcode == KILN_OP_GATHER) {
        instr->has_gather_dnums = true;
        return kiln_hlo_lexer_int64(L, "index vector dimension", &instr->gather_dnums.index_vector_dim);
      }
      instr->has_scatter_dnums = true;
      return kiln_hlo_lexer_int64(L, "index vector dimension", &instr->scatter_dnums.index_vector_dim);
    case ATTR_SLICE_SIZES:
      instr->has_gather_dnums = true;
      return parse_i64_list(P, &instr->gather_slice_sizes);
    case ATTR_UPDATE_WINDOW_DIMS:
      instr->has_scatter_dnums = true;
      return parse_i64_list(P, &instr->scatter_dnums.update_window_dims);
    case ATTR_INSERTED_WINDOW_DIMS:
      instr->has_scatter_dnums = true;
      return parse_i64_list(P, &instr->scatter_dnums.inserted_window_dims);
    case ATTR_SCATTER_DIMS_TO_OPERAND_DIMS:
      instr->has_scatter_dnums = true;
      return parse_i64_list(P, &instr->scatter_dnums.scatter_dims_to_operand_dims);
    case ATTR_INPUT_BATCHING_DIMS:
      instr->has_scatter_dnums = true;
      return parse_i64_list(P, &instr->scatter_dnums.input_batching_dims);
    case ATTR_SCATTER_INDICES_BATCHING_DIMS:
      instr->has_scatter_dnums = true;
      return parse_i64_list(P, &instr->scatter_dnums.scatter_indices_batching_dims);
    case ATTR_INDICES_ARE_SORTED: return parse_bool(P, &instr->indices_are_sorted);
    case ATTR_UNIQUE_INDICES: return parse_bool(P, &instr->unique_indices);
    case ATTR_DIRECTION: {
      static const char *const kDirs[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
      if (!parse_enum_word(P, "comparison direction", kDirs, 6, &e)) return false;
      instr->comparison_direction = (kiln_cmp_dir_t)(KILN_CMP_EQ + e);
      return true;
    }
    case ATTR_TYPE: {
      static const char *const kTypes[] = {"FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"};
      if (!parse_enum_word(P, "comparison type", kTypes, 4, &e)) return false;
      instr->comparison_type = (kiln_cmp_type_t)(KILN_CMP_TYPE_FLOAT + e);
      return true;
    }
    case ATTR_KIND: {
      const char *s;
      size_t n;
      if (!kiln_hlo_lexer_word(L, "fusion kind", &s, &n)) return false;
      if (span_eq(s, n, "kLoop")) instr->fusion_kind = KILN_FUSION_LOOP;
      else if (span_eq(s, n, "kInput")) instr->fusion_kind = KILN_FUSION_INPUT;
      else if (span_eq(s, n, "kOutput")) instr->fusion_kind = KILN_FUSION_OUTPUT;
      else if (span_eq(s, n, "kCustom")) instr->fusion_kind = KILN_FUSION_CUSTOM;
      else return (instr->fusion_kind_text = arena_strndup(P, s, n)) != NULL;
      return true;
    }
    case ATTR_TO_APPLY: case ATTR_CALLS: case ATTR_CONDITION: case ATTR_BODY: case ATTR_SELECT:
    case ATTR_SCATTER: case ATTR_TRUE_COMPUTATION: case ATTR_FALSE_COMPUTATION:
    case ATTR_BRANCH_COMPUTATIONS: case ATTR_CALLED_COMPUTATIONS:
      return add_called_ref(P, instr, id);
    case ATTR_CUSTOM_CALL_TARGET: {
      P->sb.len = 0;
      if (!kiln_hlo_lexer_string(L, &P->sb, NULL, NULL)) return false;
      instr->custom_call_target = arena_strndup(P, P->sb.data, P->sb.len);
      return instr->custom_call_target != NULL;
    }
    case ATTR_API_VERSION: {
      kiln_hlo_lexer_skip_ws(L);
      const char *s = L->p;
      if (!parse_enum_word(P, "api_version", kApiVersions, 5, &e)) return false;
      instr->api_version = e;
      instr->api_version_text = arena_strndup(P, s, (size_t)(L->p - s));
      return instr->api_version_text != NULL;
    }
    case ATTR_IS_STABLE: return parse_bool(P, &instr->is_stable);
    case ATTR_EXPONENT_BITS: return kiln_hlo_lexer_int64(L, "exponent bits", &instr->exponent_bits);
    case ATTR_MANTISSA_BITS: return kiln_hlo_lexer_int64(L, "mantissa bits", &instr->mantissa_bits);
    case ATTR_FFT_TYPE: return parse_word_dup(P, "fft type", &instr->fft_type);
    case ATTR_FFT_LENGTH: return parse_i64_list(P, &instr->fft_length);
    case ATTR_DISTRIBUTION: return parse_word_dup(P, "distribution", &instr->rng_distribution);
    case ATTR_ALGORITHM: return parse_word_dup(P, "algorithm", &instr->rng_algorithm);
    case ATTR_LEFT_SIDE: return parse_bool(P, &instr->left_side);
    case ATTR_LOWER: instr->has_lower = true; return parse_bool(P, &instr->lower);
    case ATTR_UNIT_DIAGONAL: return parse_bool(P, &instr->unit_diagonal);
    case ATTR_TRANSPOSE_A: return parse_word_dup(P, "transpose kind", &instr->transpose_a);
    case ATTR_CHANNEL_ID: return kiln_hlo_lexer_int64(L, "channel id", &instr->channel_id);
    case ATTR_REPLICA_GROUPS:
      if (!kiln_hlo_lexer_capture(L, true, &P->sb)) return false;
      instr->replica_groups = arena_strndup(P, P->sb.data, P->sb.len);
      return instr->replica_groups != NULL;
    case ATTR_USE_GLOBAL_DEVICE_IDS: return parse_bool(P, &instr->use_global_device_ids);
    case ATTR_CONSTRAIN_LAYOUT: return parse_bool(P, &instr->constrain_layout);
    case ATTR_K: return kiln_hlo_lexer_int64(L, "k", &instr->k);
    case ATTR_LARGEST: return parse_bool(P, &instr->largest);
    case ATTR_CONTROL_PREDECESSORS: {
      bool braced;
      rec->ctrl_begin = (uint32_t)P->refs.len;
      if (!parse_name_refs(P, &P->refs, false, &braced, "instruction name")) return false;
      rec->ctrl_count = (uint32_t)(P->refs.len - rec->ctrl_begin);
      return true;
    }
    case ATTR_BACKEND_CONFIG: return parse_backend_config(P, instr);
    default: return kiln_hlo_lexer_error_at(L, L->p, KILN_INTERNAL, "unhandled attribute");
  }
}

/* Stores a raw attribute in the per-instruction scratch list (duplicates are an error). */
static bool add_raw(kiln_hlo_parser_t *P, const char *k, size_t kn, const char *kpos,
                    uintptr_t owner_tag) {
  uintptr_t prev = (uintptr_t)kiln_hashmap_put(&P->raw_seen, k, kn, (void *)owner_tag);
  if (prev == owner_tag)
    return kiln_hlo_lexer_error_at(&P->L, kpos, KILN_INVALID_ARGUMENT, "duplicate attribute '%.*s'",
                                   (int)kn, k);
  if (!kiln_hlo_lexer_capture(&P->L, true, &P->sb)) return false;
  kiln_raw_attr_t ra;
  ra.key = arena_strndup(P, k, kn);
  ra.value = arena_strndup(P, P->sb.data, P->sb.len);
  if (!ra.key || !ra.value) return false;
  kiln_vec_push(&P->raws, ra);
  return true;
}

static bool take_raws(kiln_hlo_parser_t *P, kiln_raw_attr_t **out, int *n) {
  *n = 0;
  *out = NULL;
  if (!P->raws.len) return true;
  if (P->raws.len > KILN_HLO_PARSE_MAX_COUNT)
    return kiln_hlo_lexer_error_at(&P->L, P->L.p, KILN_INVALID_ARGUMENT, "too many attributes");
  *out = kiln_hlo_parser_alloc(P, P->raws.len * sizeof(kiln_raw_attr_t));
  if (!*out) return false;
  memcpy(*out, P->raws.data, P->raws.len * sizeof(kiln_raw_attr_t));
  *n = (int)P->raws.len;
  P->raws.len = 0;
  return true;
}

/* ---- instructions ---- */

static bool lookup_opcode(kiln_hlo_parser_t *P, const char *s, size_t n, kiln_hlo_opcode_t *op) {
  void *v = kiln_hashmap_get(&P->opcodes, s, n);
  if (v) {
    *op = (kiln_hlo_opcode_t)((uintptr_t)v - 1);
    return true;
  }
  if (!kiln_hlo_opcode_from_name(s, n, op)) return false;
  kiln_hashmap_put(&P->opcodes, s, n, (void *)(uintptr_t)(*op + 1));
  return true;
}

/* An operand: optionally typed (`f32[2]{0} %x`, `(f32[], s32[]) t`), then a name. */
static bool parse_operand(kiln_hlo_parser_t *P) {
  kiln_hlo_lexer_t *L = &P->L;
  char c = kiln_hlo_lexer_peek(L);
  bool typed = c == '(';
  if (!typed) {
    const char *q = L->p;
    while (q < L->end && is_lower_alnum(*q)) q++;
    kiln_elem_type_t t;
    typed = q > L->p && q < L->end && *q == '[' && kiln_elem_type_from_name(L->p, (size_t)(q - L->p), &t);
  }
  if (typed) {
    kiln_shape_t *ignored;
    if (!kiln_hlo_parse_shape_text(P, &ignored)) return false;
  }
  kiln_hlo_name_ref_t r;
  size_t n;
  if (!kiln_hlo_lexer_name(L, "operand name", &r.name, &n, &r.pos)) return false;
  r.len = (uint32_t)n;
  kiln_vec_push(&P->refs, r);
  return true;
}

static bool parse_instruction(kiln_hlo_parser_t *P, kiln_hlo_computation_t *c) {
  kiln_hlo_lexer_t *L = &P->L;
  kiln_hlo_lexer_skip_ws(L);
  const char *start = L->p;
  bool is_root = kiln_hlo_lexer_accept_word(L, "ROOT");
  const char *name, *npos;
  size_t nlen;
  if (!kiln_hlo_lexer_name(L, "instruction name", &name, &nlen, &npos)) return false;
  if (!kiln_hlo_lexer_expect(L, '=')) return false;
  kiln_shape_t *shape;
  if (!kiln_hlo_parse_shape_text(P, &shape)) return false;
  kiln_hlo_lexer_skip_ws(L);
  const char *opos = L->p, *os;
  size_t on;
  if (!kiln_hlo_lexer_word(L, "opcode", &os, &on)) return false;
  kiln_hlo_opcode_t op;
  if (!lookup_opcode(P, os, on, &op))
    return kiln_hlo_lexer_error_at(L, opos, KILN_INVALID_ARGUMENT, "unknown opcode '%.*s'", (int)on, os);
  uintptr_t prev = (uintptr_t)kiln_hashmap_get(&P->instr_map, name, nlen);
  if (prev) {
    int line, col;
    kiln_hlo_lexer_line_col(L, P->instrs.data[prev - 1].pos, &line, &col);
    return kiln_hlo_lexer_error_at(L, npos, KILN_INVALID_ARGUMENT,
                                   "duplicate instruction name '%.*s' (first defined at %d:%d)",
                                   (int)nlen, name, line, col);
  }
  if (!kiln_hlo_parser_reserve(P, sizeof(kiln_hlo_instruction_t) + nlen + 1, 2)) return false;
  kiln_hlo_instruction_t *instr = kiln_hlo_instruction_create(c, op, shape, cname(P, name, nlen));
  if (!instr || !instr->name) return kiln_hlo_parser_oom(P);
  kiln_hashmap_put(&P->instr_map, name, nlen, (void *)(uintptr_t)(P->instrs.len + 1));
  kiln_hlo_instr_rec_t rec = {0};
  rec.instr = instr;
  rec.pos = npos;
  if (is_root) {
    if (P->root_index >= 0) {
      int line, col;
      kiln_hlo_lexer_line_col(L, P->instrs.data[P->root_index].pos, &line, &col);
      return kiln_hlo_lexer_error_at(L, start, KILN_INVALID_ARGUMENT,
                                     "second ROOT instruction in computation '%s' (first at %d:%d)",
                                     c->name, line, col);
    }
    P->root_index = (int64_t)P->instrs.len;
  }

  if (!kiln_hlo_lexer_expect(L, '(')) return false;
  rec.ops_begin = (uint32_t)P->refs.len;
  if (op == KILN_OP_PARAMETER) {
    kiln_hlo_lexer_skip_ws(L);
    const char *ppos = L->p;
    if (!kiln_hlo_lexer_int64(L, "parameter number", &instr->parameter_number)) return false;
    if (instr->parameter_number < 0)
      return kiln_hlo_lexer_error_at(L, ppos, KILN_INVALID_ARGUMENT, "negative parameter number");
    if (!kiln_hlo_lexer_expect(L, ')')) return false;
  } else if (op == KILN_OP_CONSTANT) {
    if (!kiln_hlo_parse_literal(P, shape, &instr->literal)) return false;
    if (!kiln_hlo_lexer_expect(L, ')')) return false;
  } else if (!kiln_hlo_lexer_accept(L, ')')) {
    for (;;) {
      if (!parse_operand(P)) return false;
      if (kiln_hlo_lexer_accept(L, ',')) continue;
      if (!kiln_hlo_lexer_expect(L, ')')) return false;
      break;
    }
  }
  rec.ops_count = (uint32_t)(P->refs.len - rec.ops_begin);

  memset(P->seen, 0, sizeof P->seen);
  uintptr_t tag = (uintptr_t)instr->id + 2;
  while (kiln_hlo_lexer_accept(L, ',')) {
    kiln_hlo_lexer_skip_ws(L);
    const char *kpos = L->p, *k;
    size_t kn;
    if (!kiln_hlo_lexer_word(L, "attribute name", &k, &kn)) return false;
    if (!kiln_hlo_lexer_expect(L, '=')) return false;
    attr_id_t id = lookup_attr(P, k, kn);
    if (id != ATTR_RAW && !attr_applies(id, op)) id = ATTR_RAW;
    if (id == ATTR_RAW) {
      if (!add_raw(P, k, kn, kpos, tag)) return false;
      continue;
    }
    if (P->seen[id])
      return kiln_hlo_lexer_error_at(L, kpos, KILN_INVALID_ARGUMENT, "duplicate attribute '%.*s'",
                                     (int)kn, k);
    P->seen[id] = true;
    if (!parse_attr_value(P, instr, &rec, id)) return false;
  }
  if (!take_raws(P, &instr->raw_attrs, &instr->num_raw_attrs)) return false;
  kiln_vec_push(&P->instrs, rec);
  return true;
}

/* ---- computations ---- */

/* Resolves the operands and control predecessors of the computation just read, finds its
 * root and parameters, and rejects cycles (possible because forward references are
 * accepted). */
static bool finish_computation(kiln_hlo_parser_t *P, kiln_hlo_computation_t *c, const char *cpos) {
  kiln_hlo_lexer_t *L = &P->L;
  size_t n = P->instrs.len;
  if (n == 0)
    return kiln_hlo_lexer_error_at(L, cpos, KILN_INVALID_ARGUMENT, "computation '%s' has no instructions",
                                   c->name);
  bool forward = false;
  size_t num_params = 0;
  for (size_t i = 0; i < n; i++) {
    kiln_hlo_instr_rec_t *rec = &P->instrs.data[i];
    kiln_hlo_instruction_t *instr = rec->instr;
    if (instr->opcode == KILN_OP_PARAMETER) num_params++;
    for (int pass = 0; pass < 2; pass++) {
      uint32_t begin = pass ? rec->ctrl_begin : rec->ops_begin;
      uint32_t count = pass ? rec->ctrl_count : rec->ops_count;
      if (!count) continue;
      if (count > KILN_HLO_PARSE_MAX_COUNT)
        return kiln_hlo_lexer_error_at(L, rec->pos, KILN_INVALID_ARGUMENT, "too many operands");
      kiln_hlo_instruction_t **arr = kiln_hlo_parser_alloc(P, count * sizeof(*arr));
      if (!arr) return false;
      for (uint32_t j = 0; j < count; j++) {
        kiln_hlo_name_ref_t *r = &P->refs.data[begin + j];
        uintptr_t idx = (uintptr_t)kiln_hashmap_get(&P->instr_map, r->name, r->len);
        if (!idx)
          return kiln_hlo_lexer_error_at(L, r->pos, KILN_INVALID_ARGUMENT,
                                         pass ? "unknown control predecessor '%.*s' of instruction '%s'"
                                              : "unknown operand '%.*s' of instruction '%s'",
                                         (int)r->len, r->name, instr->name);
        if (idx - 1 >= i) forward = true;
        kiln_hlo_instruction_t *o = P->instrs.data[idx - 1].instr;
        arr[j] = o;
        /* Users/successors are distinct and in first-use order; since instructions are
         * wired in order, a repeat use by `instr` is always the last entry. */
        if (pass == 0) {
          if (!o->users.len || kiln_vec_last(&o->users) != instr) kiln_vec_push(&o->users, instr);
        } else if (!o->control_successors.len || kiln_vec_last(&o->control_successors) != instr) {
          kiln_vec_push(&o->control_successors, instr);
        }
      }
      if (pass == 0) {
        instr->operands = arr;
        instr->num_operands = (int)count;
      } else {
        instr->control_predecessors = arr;
        instr->num_control_predecessors = (int)count;
      }
    }
  }
  c->root = P->instrs.data[P->root_index >= 0 ? (size_t)P->root_index : n - 1].instr;

  /* Parameters: numbers 0..k-1, each exactly once. */
  if (num_params) {
    c->parameters = kiln_hlo_parser_alloc(P, num_params * sizeof(*c->parameters));
    if (!c->parameters) return false;
    c->num_parameters = (int)num_params;
    size_t first_unplaced = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
      kiln_hlo_instruction_t *instr = P->instrs.data[i].instr;
      if (instr->opcode != KILN_OP_PARAMETER) continue;
      int64_t k = instr->parameter_number;
      if ((uint64_t)k >= num_params) {
        if (first_unplaced == SIZE_MAX) first_unplaced = i;
        continue;
      }
      if (c->parameters[k]) {
        kiln_hlo_instruction_t *first = c->parameters[k];
        int line, col;
        kiln_hlo_lexer_line_col(L, P->instrs.data[first->id - P->instrs.data[0].instr->id].pos, &line, &col);
        return kiln_hlo_lexer_error_at(L, P->instrs.data[i].pos, KILN_INVALID_ARGUMENT,
                                       "duplicate parameter number %lld in computation '%s' "
                                       "(first used by '%s' at %d:%d)",
                                       (long long)k, c->name, first->name, line, col);
      }
      c->parameters[k] = instr;
    }
    if (first_unplaced != SIZE_MAX) {
      size_t missing = 0;
      while (missing < num_params && c->parameters[missing]) missing++;
      return kiln_hlo_lexer_error_at(L, P->instrs.data[first_unplaced].pos, KILN_INVALID_ARGUMENT,
                                     "computation '%s' has %zu parameters but no parameter %zu "
                                     "(parameter numbers must be 0..%zu)",
                                     c->name, num_params, missing, num_params - 1);
    }
  }

  if (forward) {
    /* Iterative DFS over operand and control edges; 1 = on stack, 2 = done. */
    int64_t base_id = P->instrs.data[0].instr->id;
    unsigned char *color = kiln_calloc(n, 1);
    KILN_VEC(struct { size_t node; int edge; }) stack = {0};
    bool ok = true;
    for (size_t s = 0; s < n && ok; s++) {
      if (color[s]) continue;
      color[s] = 1;
      kiln_vec_reserve(&stack, stack.len + 1);
      stack.data[stack.len].node = s;
      stack.data[stack.len].edge = 0;
      stack.len++;
      while (stack.len && ok) {
        size_t v = stack.data[stack.len - 1].node;
        int e = stack.data[stack.len - 1].edge++;
        kiln_hlo_instruction_t *vi = P->instrs.data[v].instr;
        if (e >= vi->num_operands + vi->num_control_predecessors) {
          color[v] = 2;
          stack.len--;
          continue;
        }
        kiln_hlo_instruction_t *w = e < vi->num_operands ? vi->operands[e]
                                                         : vi->control_predecessors[e - vi->num_operands];
        size_t wi = (size_t)(w->id - base_id);
        if (color[wi] == 1) {
          ok = false;
          kiln_hlo_lexer_error_at(L, P->instrs.data[wi].pos, KILN_INVALID_ARGUMENT,
                                  "instruction '%s' depends on itself (cycle through '%s')",
                                  w->name, vi->name);
        } else if (color[wi] == 0) {
          color[wi] = 1;
          kiln_vec_reserve(&stack, stack.len + 1);
          stack.data[stack.len].node = wi;
          stack.data[stack.len].edge = 0;
          stack.len++;
        }
      }
    }
    kiln_free(color);
    kiln_vec_free(&stack);
    if (!ok) return false;
  }
  return true;
}

/* `(p: shape, ...) -> shape` after a computation name; only checked for syntax. */
static bool parse_signature(kiln_hlo_parser_t *P) {
  kiln_hlo_lexer_t *L = &P->L;
  if (!kiln_hlo_lexer_expect(L, '(')) return false;
  if (!kiln_hlo_lexer_accept(L, ')')) {
    for (;;) {
      const char *s;
      size_t n;
      kiln_shape_t *sh;
      if (!kiln_hlo_lexer_name(L, "parameter name", &s, &n, NULL)) return false;
      if (!kiln_hlo_lexer_expect(L, ':')) return false;
      if (!kiln_hlo_parse_shape_text(P, &sh)) return false;
      if (kiln_hlo_lexer_accept(L, ',')) continue;
      if (!kiln_hlo_lexer_expect(L, ')')) return false;
      break;
    }
  }
  if (!kiln_hlo_lexer_accept_op(L, "->")) return kiln_hlo_lexer_error_expected(L, "'->'");
  kiln_shape_t *result;
  return kiln_hlo_parse_shape_text(P, &result);
}

static bool parse_computation(kiln_hlo_parser_t *P) {
  kiln_hlo_lexer_t *L = &P->L;
  kiln_hlo_lexer_skip_ws(L);
  const char *cpos = L->p;
  bool is_entry = kiln_hlo_lexer_accept_word(L, "ENTRY");
  const char *name, *npos;
  size_t nlen;
  if (!kiln_hlo_lexer_name(L, "computation name", &name, &nlen, &npos)) return false;
  uintptr_t prev = (uintptr_t)kiln_hashmap_get(&P->comp_map, name, nlen);
  if (prev) {
    int line, col;
    kiln_hlo_lexer_line_col(L, P->comps.data[prev - 1].pos, &line, &col);
    return kiln_hlo_lexer_error_at(L, npos, KILN_INVALID_ARGUMENT,
                                   "duplicate computation name '%.*s' (first defined at %d:%d)",
                                   (int)nlen, name, line, col);
  }
  if (!kiln_hlo_parser_reserve(P, sizeof(kiln_hlo_computation_t) + nlen + 1, 2)) return false;
  kiln_hlo_computation_t *c = kiln_hlo_computation_create(P->m, cname(P, name, nlen));
  if (!c || !c->name) return kiln_hlo_parser_oom(P);
  kiln_hlo_comp_rec_t crec = {c, npos};
  kiln_vec_push(&P->comps, crec);
  kiln_hashmap_put(&P->comp_map, name, nlen, (void *)(uintptr_t)P->comps.len);
  if (is_entry) {
    if (P->entry) {
      return kiln_hlo_lexer_error_at(L, cpos, KILN_INVALID_ARGUMENT,
                                     "second ENTRY computation '%s' (the first is '%s')", c->name,
                                     P->entry->name);
    }
    P->entry = c;
  }
  if (kiln_hlo_lexer_peek(L) == '(' && !parse_signature(P)) return false;
  if (!kiln_hlo_lexer_expect(L, '{')) return false;

  kiln_hashmap_free(&P->instr_map);
  kiln_hashmap_init(&P->instr_map);
  P->instrs.len = 0;
  P->refs.len = 0;
  P->root_index = -1;
  for (;;) {
    char ch = kiln_hlo_lexer_peek(L);
    if (L->err) return false;
    if (ch == '}') {
      L->p++;
      break;
    }
    if (!ch) return kiln_hlo_lexer_error_expected(L, "instruction or '}'");
    if (!parse_instruction(P, c)) return false;
  }
  if (kiln_hlo_lexer_accept(L, ',')) {
    if (!kiln_hlo_lexer_capture(L, false, &P->sb)) return false;
    c->trailing_attrs = arena_strndup(P, P->sb.data, P->sb.len);
    if (!c->trailing_attrs) return false;
  }
  return finish_computation(P, c, npos);
}

/* ---- module ---- */

/* DFS over the call graph; a computation reachable from itself is an error (passes and
 * the evaluator recurse into called computations). */
static bool check_call_graph(kiln_hlo_parser_t *P) {
  size_t n = P->comps.len;
  kiln_ptrmap_t index;
  kiln_ptrmap_init(&index);
  for (size_t i = 0; i < n; i++) kiln_ptrmap_put(&index, P->comps.data[i].comp, (void *)(i + 1));
  unsigned char *color = kiln_calloc(n ? n : 1, 1);
  typedef struct { size_t comp, instr; int group, k; } frame_t;
  KILN_VEC(frame_t) st = {0};
  bool ok = true;
  for (size_t s = 0; s < n && ok; s++) {
    if (color[s]) continue;
    color[s] = 1;
    frame_t f0 = {s, 0, 0, 0};
    kiln_vec_push(&st, f0);
    while (st.len && ok) {
      frame_t *f = &st.data[st.len - 1];
      kiln_hlo_computation_t *c = P->comps.data[f->comp].comp;
      if (f->instr >= c->instructions.len) {
        color[f->comp] = 2;
        st.len--;
        continue;
      }
      kiln_hlo_instruction_t *instr = c->instructions.data[f->instr];
      if (f->group >= instr->num_called_groups) {
        f->instr++, f->group = 0, f->k = 0;
        continue;
      }
      kiln_called_group_t *g = &instr->called_groups[f->group];
      if (f->k >= g->n) {
        f->group++, f->k = 0;
        continue;
      }
      kiln_hlo_computation_t *callee = g->comps[f->k++];
      size_t ci = (size_t)(uintptr_t)kiln_ptrmap_get(&index, callee) - 1;
      if (color[ci] == 1) {
        ok = false;
        kiln_hlo_lexer_error_at(&P->L, P->comps.data[ci].pos, KILN_INVALID_ARGUMENT,
                                "computation '%s' calls itself (through '%s' in '%s')",
                                callee->name, instr->name, c->name);
      } else if (color[ci] == 0) {
        color[ci] = 1;
        frame_t f1 = {ci, 0, 0, 0};
        kiln_vec_push(&st, f1);
      }
    }
  }
  kiln_vec_free(&st);
  kiln_free(color);
  kiln_ptrmap_free(&index);
  return ok;
}

static bool finish_module(kiln_hlo_parser_t *P) {
  kiln_hlo_lexer_t *L = &P->L;
  kiln_hlo_module_t *m = P->m;
  if (!P->comps.len) return kiln_hlo_lexer_error_expected(L, "computation");
  KILN_VEC(kiln_hlo_computation_t *) tmp = {0};
  for (size_t i = 0; i < P->called.len; i++) {
    kiln_hlo_called_rec_t *rec = &P->called.data[i];
    tmp.len = 0;
    for (uint32_t j = 0; j < rec->count; j++) {
      kiln_hlo_name_ref_t *r = &P->crefs.data[rec->begin + j];
      uintptr_t idx = (uintptr_t)kiln_hashmap_get(&P->comp_map, r->name, r->len);
      if (!idx) {
        kiln_vec_free(&tmp);
        return kiln_hlo_lexer_error_at(L, r->pos, KILN_INVALID_ARGUMENT,
                                       "unknown computation '%.*s' in %s of instruction '%s'",
                                       (int)r->len, r->name, rec->key, rec->instr->name);
      }
      kiln_vec_push(&tmp, P->comps.data[idx - 1].comp);
    }
    if (!kiln_hlo_parser_reserve(P, sizeof(kiln_called_group_t) * (size_t)(rec->instr->num_called_groups + 1) +
                                        strlen(rec->key) + 1 + tmp.len * sizeof(void *), 3)) {
      kiln_vec_free(&tmp);
      return false;
    }
    kiln_hlo_instruction_add_called(rec->instr, rec->key, rec->braced, (int)tmp.len, tmp.data);
  }
  kiln_vec_free(&tmp);
  if (!check_call_graph(P)) return false;
  m->entry = P->entry ? P->entry : P->comps.data[P->comps.len - 1].comp;
  m->entry->is_entry = true;
  return true;
}

/* entry_computation_layout={(shape, ...)->shape} */
static bool parse_entry_layout(kiln_hlo_parser_t *P) {
  kiln_hlo_lexer_t *L = &P->L;
  kiln_hlo_module_t *m = P->m;
  if (!kiln_hlo_lexer_expect(L, '{') || !kiln_hlo_lexer_expect(L, '(')) return false;
  size_t base = P->shapes.len;
  if (!kiln_hlo_lexer_accept(L, ')')) {
    for (;;) {
      kiln_shape_t *s;
      if (!kiln_hlo_parse_shape_text(P, &s)) return false;
      kiln_vec_push(&P->shapes, s);
      if (kiln_hlo_lexer_accept(L, ',')) continue;
      if (!kiln_hlo_lexer_expect(L, ')')) return false;
      break;
    }
  }
  if (!kiln_hlo_lexer_accept_op(L, "->")) return kiln_hlo_lexer_error_expected(L, "'->'");
  if (!kiln_hlo_parse_shape_text(P, &m->entry_layout_result)) return false;
  if (!kiln_hlo_lexer_expect(L, '}')) return false;
  size_t n = P->shapes.len - base;
  if (n > KILN_HLO_PARSE_MAX_COUNT)
    return kiln_hlo_lexer_error_at(L, L->p, KILN_INVALID_ARGUMENT, "too many parameters");
  m->num_entry_layout_params = (int)n;
  if (n) {
    m->entry_layout_params = kiln_hlo_parser_alloc(P, n * sizeof(kiln_shape_t *));
    if (!m->entry_layout_params) return false;
    memcpy(m->entry_layout_params, P->shapes.data + base, n * sizeof(kiln_shape_t *));
  }
  P->shapes.len = base;
  m->has_entry_layout = true;
  return true;
}

/* input_output_alias={ {0}: (0, {}, may-alias), ... } */
static bool parse_io_alias(kiln_hlo_parser_t *P) {
  kiln_hlo_lexer_t *L = &P->L;
  kiln_hlo_module_t *m = P->m;
  KILN_VEC(kiln_io_alias_t) v = {0};
  bool ok = kiln_hlo_lexer_expect(L, '{');
  if (ok && !kiln_hlo_lexer_accept(L, '}')) {
    for (;;) {
      kiln_io_alias_t a = {0};
      ok = parse_i64_list(P, &a.output_index) && kiln_hlo_lexer_expect(L, ':') &&
           kiln_hlo_lexer_expect(L, '(') &&
           kiln_hlo_lexer_int64(L, "parameter number", &a.param_number) &&
           kiln_hlo_lexer_expect(L, ',') && parse_i64_list(P, &a.param_index);
      if (ok && kiln_hlo_lexer_accept(L, ',')) ok = parse_word_dup(P, "alias kind", &a.kind);
      ok = ok && kiln_hlo_lexer_expect(L, ')');
      if (!ok) break;
      kiln_vec_push(&v, a);
      if (kiln_hlo_lexer_accept(L, ',')) continue;
      ok = kiln_hlo_lexer_expect(L, '}');
      break;
    }
  }
  if (ok && v.len > KILN_HLO_PARSE_MAX_COUNT)
    ok = kiln_hlo_lexer_error_at(L, L->p, KILN_INVALID_ARGUMENT, "too many aliases");
  if (ok && v.len) {
    m->io_aliases = kiln_hlo_parser_alloc(P, v.len * sizeof(kiln_io_alias_t));
    ok = m->io_aliases != NULL;
    if (ok) {
      memcpy(m->io_aliases, v.data, v.len * sizeof(kiln_io_alias_t));
      m->num_io_aliases = (int)v.len;
    }
  }
  kiln_vec_free(&v);
  return ok;
}

static bool parse_module_header(kiln_hlo_parser_t *P) {
  kiln_hlo_lexer_t *L = &P->L;
  if (!kiln_hlo_lexer_accept_word(L, "HloModule")) return kiln_hlo_lexer_error_expected(L, "'HloModule'");
  const char *s;
  size_t n;
  if (!kiln_hlo_lexer_name(L, "module name", &s, &n, NULL)) return false;
  P->m->name = arena_strndup(P, s, n);
  if (!P->m->name) return false;
  bool seen_layout = false, seen_alias = false;
  while (kiln_hlo_lexer_accept(L, ',')) {
    kiln_hlo_lexer_skip_ws(L);
    const char *kpos = L->p, *k;
    size_t kn;
    if (!kiln_hlo_lexer_word(L, "attribute name", &k, &kn)) return false;
    if (!kiln_hlo_lexer_expect(L, '=')) return false;
    bool is_layout = span_eq(k, kn, "entry_computation_layout");
    bool is_alias = span_eq(k, kn, "input_output_alias");
    if ((is_layout && seen_layout) || (is_alias && seen_alias))
      return kiln_hlo_lexer_error_at(L, kpos, KILN_INVALID_ARGUMENT, "duplicate attribute '%.*s'",
                                     (int)kn, k);
    if (is_layout) {
      seen_layout = true;
      if (!parse_entry_layout(P)) return false;
    } else if (is_alias) {
      seen_alias = true;
      if (!parse_io_alias(P)) return false;
    } else if (!add_raw(P, k, kn, kpos, 1)) {
      return false;
    }
  }
  return take_raws(P, &P->m->raw_attrs, &P->m->num_raw_attrs);
}

/* ---- entry points ---- */

enum { kModeModule, kModeComputations };

static void parser_free(kiln_hlo_parser_t *P) {
  kiln_strbuf_free(&P->sb);
  kiln_strbuf_free(&P->nb);
  kiln_vec_free(&P->lit);
  kiln_vec_free(&P->ints);
  kiln_vec_free(&P->dyn);
  kiln_vec_free(&P->shapes);
  kiln_vec_free(&P->tiles);
  kiln_vec_free(&P->extra);
  kiln_vec_free(&P->raws);
  kiln_vec_free(&P->strs);
  kiln_vec_free(&P->instrs);
  kiln_vec_free(&P->refs);
  kiln_vec_free(&P->comps);
  kiln_vec_free(&P->called);
  kiln_vec_free(&P->crefs);
  kiln_hashmap_free(&P->instr_map);
  kiln_hashmap_free(&P->comp_map);
  kiln_hashmap_free(&P->opcodes);
  kiln_hashmap_free(&P->attr_keys);
  kiln_hashmap_free(&P->raw_seen);
}

/* Parses [begin, end) of the file starting at `base` as one module. */
static kiln_status parse_range(const char *base, const char *begin, const char *end,
                               const kiln_hlo_parse_options_t *opts, int mode,
                               const char *module_name, kiln_hlo_module_t **out) {
  kiln_hlo_parser_t P;
  memset(&P, 0, sizeof P);
  kiln_hlo_lexer_init(&P.L, base, begin, end, opts ? opts->filename : NULL);
  P.root_index = -1;
  P.m = kiln_hlo_module_create(module_name);
  size_t factor = opts && opts->max_bytes_per_input_byte ? opts->max_bytes_per_input_byte : 64;
  size_t len = (size_t)(end - begin);
  const size_t kSlack = (size_t)1 << 20;
  size_t limit = len > (SIZE_MAX / 4 - kSlack) / factor ? SIZE_MAX / 4 : len * factor + kSlack;
  P.m->arena.limit = P.m->arena.total + limit;

  bool ok = true;
  if (mode == kModeModule) ok = parse_module_header(&P);
  while (ok && !kiln_hlo_lexer_at_end(&P.L) && !P.L.err) ok = parse_computation(&P);
  ok = ok && !P.L.err && finish_module(&P);
  kiln_status st = P.L.err;
  if (ok && st) ok = false;
  parser_free(&P);
  if (!ok) {
    kiln_hlo_module_destroy(P.m);
    *out = NULL;
    if (!st) st = kiln_status_make(KILN_INTERNAL, "HLO parser failed without a message");
    return st;
  }
  *out = P.m;
  return NULL;
}

static kiln_status check_args(const char *text, size_t len, const void *out) {
  if (!out) return kiln_status_make(KILN_INVALID_ARGUMENT, "HLO parser: NULL output pointer");
  if (!text && len) return kiln_status_make(KILN_INVALID_ARGUMENT, "HLO parser: NULL text");
  return NULL;
}

kiln_status kiln_hlo_parse_module(const char *text, size_t len, const kiln_hlo_parse_options_t *opts,
                                  kiln_hlo_module_t **out) {
  KILN_RETURN_IF_ERROR_PLAIN(check_args(text, len, out));
  *out = NULL;
  if (!text) text = "";
  return parse_range(text, text, text + len, opts, kModeModule, "module", out);
}

kiln_status kiln_hlo_parse_computations(const char *text, size_t len,
                                        const kiln_hlo_parse_options_t *opts,
                                        kiln_hlo_module_t **out) {
  KILN_RETURN_IF_ERROR_PLAIN(check_args(text, len, out));
  *out = NULL;
  if (!text) text = "";
  /* Module name: the file's base name without its extension. */
  const char *fn = opts ? opts->filename : NULL;
  char name[256] = "computations";
  if (fn && *fn) {
    const char *slash = strrchr(fn, '/');
    const char *b = slash ? slash + 1 : fn;
    const char *dot = strrchr(b, '.');
    size_t n = dot && dot != b ? (size_t)(dot - b) : strlen(b);
    if (n >= sizeof name) n = sizeof name - 1;
    if (n) {
      memcpy(name, b, n);
      name[n] = 0;
    }
  }
  return parse_range(text, text, text + len, opts, kModeComputations, name, out);
}

/* True when the line starting at `p` begins with `word` (after spaces/tabs). */
static bool line_starts_with(const char *p, const char *end, const char *word) {
  while (p < end && (*p == ' ' || *p == '\t')) p++;
  size_t n = strlen(word);
  return (size_t)(end - p) >= n && memcmp(p, word, n) == 0;
}

kiln_status kiln_hlo_parse_modules(const char *text, size_t len, const kiln_hlo_parse_options_t *opts,
                                   kiln_hlo_module_t ***out_modules, int *out_count) {
  KILN_RETURN_IF_ERROR_PLAIN(check_args(text, len, out_modules));
  if (!out_count) return kiln_status_make(KILN_INVALID_ARGUMENT, "HLO parser: NULL count pointer");
  *out_modules = NULL;
  *out_count = 0;
  if (!text) text = "";
  const char *end = text + len;
  /* Split at `// -----` lines, but a piece without a `HloModule` line stays with the
   * module before it (some files use such lines as plain separators between
   * computations of one module). */
  KILN_VEC(const char *) starts = {0};
  kiln_vec_push(&starts, text);
  bool group_has_module = false;
  const char *line = text;
  while (line < end) {
    const char *nl = memchr(line, '\n', (size_t)(end - line));
    const char *next = nl ? nl + 1 : end;
    if ((size_t)(end - line) >= 8 && memcmp(line, "// -----", 8) == 0) {
      /* Does the piece after this separator hold a module? */
      bool has_module = false;
      for (const char *q = next; q < end;) {
        const char *qnl = memchr(q, '\n', (size_t)(end - q));
        const char *qnext = qnl ? qnl + 1 : end;
        if ((size_t)(end - q) >= 8 && memcmp(q, "// -----", 8) == 0) break;
        if (line_starts_with(q, qnext, "HloModule")) {
          has_module = true;
          break;
        }
        q = qnext;
      }
      if (has_module && group_has_module) {
        kiln_vec_push(&starts, next);
        group_has_module = false;
      }
    } else if (!group_has_module && line_starts_with(line, next, "HloModule")) {
      group_has_module = true;
    }
    line = next;
  }
  kiln_hlo_module_t **mods = kiln_calloc(starts.len, sizeof *mods);
  kiln_status st = NULL;
  size_t count = 0;
  for (size_t i = 0; i < starts.len && !st; i++) {
    const char *b = starts.data[i];
    const char *e = i + 1 < starts.len ? starts.data[i + 1] : end;
    st = parse_range(text, b, e, opts, kModeModule, "module", &mods[count]);
    if (!st) count++;
  }
  kiln_vec_free(&starts);
  if (st) {
    for (size_t i = 0; i < count; i++) kiln_hlo_module_destroy(mods[i]);
    kiln_free(mods);
    return st;
  }
  *out_modules = mods;
  *out_count = (int)count;
  return NULL;
}
