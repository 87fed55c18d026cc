/* Literal text for constant(...): scalars, nested braces per dimension, complex pairs,
 * tuples, elided `{...}`.
 *
 * Elements are decoded into a scratch byte vector that grows only with the elements the
 * text actually holds; the count is checked against the shape before any storage of the
 * shape's size is allocated, so `f32[1000000000] constant({1})` fails after reading one
 * element. Storage follows element_types.def and literal.c: sub-byte integers keep their
 * low bits in a byte, f16/bf16 are uint16 bit patterns, f8/f4 one byte per code. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/hlo/numeric.h"
#include "compiler/hlo/parser_internal.h"

/* A number as written: the text for strtod/strtof, or inf/nan with sign and payload. */
typedef struct num_text {
  char buf[128];
  size_t len;
  const char *pos;
  bool neg, is_inf, is_nan, has_payload;
  uint64_t payload;
} num_text_t;

static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static int hexval(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static bool read_number(kiln_hlo_parser_t *P, num_text_t *t, const char *what) {
  kiln_hlo_lexer_t *L = &P->L;
  if (L->err) return false;
  kiln_hlo_lexer_skip_ws(L);
  const char *q = L->p, *end = L->end;
  memset(t, 0, sizeof *t);
  t->pos = q;
  if (q < end && (*q == '-' || *q == '+')) {
    t->neg = *q == '-';
    q++;
  }
  if (q < end && is_alpha(*q)) {
    const char *w = q;
    while (q < end && is_alpha(*q)) q++;
    size_t n = (size_t)(q - w);
    if ((n == 3 && memcmp(w, "inf", 3) == 0) || (n == 8 && memcmp(w, "infinity", 8) == 0)) {
      t->is_inf = true;
    } else if (n == 3 && memcmp(w, "nan", 3) == 0) {
      t->is_nan = true;
      if (q < end && *q == '(') {
        /* nan(0x...) payload */
        const char *r = q + 1;
        if (end - r >= 2 && r[0] == '0' && (r[1] == 'x' || r[1] == 'X')) r += 2;
        uint64_t v = 0;
        int digits = 0;
        while (r < end && hexval(*r) >= 0 && digits < 16) v = v * 16 + (uint64_t)hexval(*r++), digits++;
        if (!digits || r >= end || *r != ')') {
          L->p = r;
          return kiln_hlo_lexer_error_expected(L, "NaN payload 'nan(0x...)'");
        }
        t->has_payload = true;
        t->payload = v;
        q = r + 1;
      }
    } else {
      return kiln_hlo_lexer_error_expected(L, what);
    }
    L->p = q;
    return true;
  }
  const char *digits = q;
  bool any = false;
  while (q < end && (is_digit(*q) || *q == '.')) any |= is_digit(*q), q++;
  if (!any) return kiln_hlo_lexer_error_expected(L, what);
  if (q < end && (*q == 'e' || *q == 'E')) {
    const char *e = q + 1;
    if (e < end && (*e == '+' || *e == '-')) e++;
    if (e < end && is_digit(*e)) {
      while (e < end && is_digit(*e)) e++;
      q = e;
    }
  }
  size_t n = (size_t)(q - digits);
  if (n + 2 > sizeof t->buf)
    return kiln_hlo_lexer_error_at(L, t->pos, KILN_INVALID_ARGUMENT, "number too long");
  t->buf[0] = t->neg ? '-' : '+';
  memcpy(t->buf + 1, digits, n);
  t->len = n + 1;
  t->buf[t->len] = 0;
  L->p = q;
  return true;
}

static bool parse_double(kiln_hlo_parser_t *P, const num_text_t *t, double *out) {
  if (t->is_inf) {
    *out = t->neg ? -INFINITY : INFINITY;
    return true;
  }
  if (t->is_nan) {
    *out = t->neg ? -NAN : NAN;
    return true;
  }
  char *e;
  *out = strtod(t->buf, &e);
  if (e != t->buf + t->len)
    return kiln_hlo_lexer_error_at(&P->L, t->pos, KILN_INVALID_ARGUMENT, "malformed number '%s'",
                                   t->buf + 1);
  return true;
}

/* NaN bits for an IEEE-style format with `mbits` mantissa bits and exponent mask `exp`. */
static uint64_t nan_bits(const num_text_t *t, uint64_t sign_bit, uint64_t exp, int mbits) {
  uint64_t mask = ((uint64_t)1 << mbits) - 1;
  uint64_t payload = t->has_payload ? (t->payload & mask) : 0;
  if (!payload) payload = (uint64_t)1 << (mbits - 1);
  return (t->neg ? sign_bit : 0) | exp | payload;
}

static bool store_float(kiln_hlo_parser_t *P, kiln_elem_type_t type, const num_text_t *t,
                        unsigned char *dst) {
  switch (type) {
    case KILN_F32: {
      float f;
      if (t->is_nan) {
        uint32_t bits = (uint32_t)nan_bits(t, 0x80000000u, 0x7f800000u, 23);
        memcpy(&f, &bits, 4);
      } else if (t->is_inf) {
        f = t->neg ? -INFINITY : INFINITY;
      } else {
        char *e;
        f = strtof(t->buf, &e);
        if (e != t->buf + t->len)
          return kiln_hlo_lexer_error_at(&P->L, t->pos, KILN_INVALID_ARGUMENT,
                                         "malformed number '%s'", t->buf + 1);
      }
      memcpy(dst, &f, 4);
      return true;
    }
    case KILN_F64: {
      double d;
      if (t->is_nan) {
        uint64_t bits = nan_bits(t, (uint64_t)1 << 63, (uint64_t)0x7ff << 52, 52);
        memcpy(&d, &bits, 8);
      } else if (!parse_double(P, t, &d)) {
        return false;
      }
      memcpy(dst, &d, 8);
      return true;
    }
    case KILN_F16:
    case KILN_BF16: {
      uint16_t h;
      double d;
      if (t->is_nan && type == KILN_F16) {
        h = (uint16_t)nan_bits(t, 0x8000, 0x7c00, 10);
      } else if (t->is_nan) {
        h = (uint16_t)nan_bits(t, 0x8000, 0x7f80, 7);
      } else {
        if (!parse_double(P, t, &d)) return false;
        h = type == KILN_F16 ? kiln_f64_to_f16(d) : kiln_f64_to_bf16(d);
      }
      memcpy(dst, &h, 2);
      return true;
    }
    default: {
      double d;
      if (!parse_double(P, t, &d)) return false;
      dst[0] = (unsigned char)kiln_narrow_from_f64(type, d);
      return true;
    }
  }
}

static bool store_int(kiln_hlo_parser_t *P, kiln_elem_type_t type, unsigned char *dst) {
  kiln_hlo_lexer_t *L = &P->L;
  kiln_hlo_lexer_skip_ws(L);
  const char *pos = L->p;
  bool neg;
  uint64_t mag;
  if (!kiln_hlo_lexer_integer(L, "integer", &neg, &mag)) return false;
  if (L->p < L->end && (*L->p == '.' || *L->p == 'e' || *L->p == 'E'))
    return kiln_hlo_lexer_error_at(L, pos, KILN_INVALID_ARGUMENT,
                                   "expected an integer for element type %s",
                                   kiln_elem_type_name(type));
  int bits = kiln_elem_type_bits(type);
  bool is_signed = kiln_elem_type_is_signed_int(type);
  uint64_t v;
  bool ok;
  if (is_signed) {
    uint64_t lim = (uint64_t)1 << (bits - 1); /* |min| */
    ok = neg ? mag <= lim : mag < lim;
    v = neg ? 0 - mag : mag;
  } else {
    uint64_t max = bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
    ok = (!neg || mag == 0) && mag <= max;
    v = mag;
  }
  if (!ok)
    return kiln_hlo_lexer_error_at(L, pos, KILN_INVALID_ARGUMENT, "integer %.*s is out of range for %s",
                                   (int)(L->p - pos), pos, kiln_elem_type_name(type));
  size_t bytes = kiln_elem_type_storage_bytes(type);
  if (bits < 8) v &= ((uint64_t)1 << bits) - 1;
  /* little-endian store of the low `bytes` bytes */
  switch (bytes) {
    case 1: dst[0] = (unsigned char)v; break;
    case 2: { uint16_t x = (uint16_t)v; memcpy(dst, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(dst, &x, 4); break; }
    default: memcpy(dst, &v, 8); break;
  }
  return true;
}

/* One element of `type` appended to P->lit. */
static bool parse_element(kiln_hlo_parser_t *P, kiln_elem_type_t type) {
  kiln_hlo_lexer_t *L = &P->L;
  size_t sz = kiln_elem_type_storage_bytes(type);
  kiln_vec_reserve(&P->lit, P->lit.len + sz);
  unsigned char *dst = P->lit.data + P->lit.len;
  bool ok;
  num_text_t t;
  if (type == KILN_PRED) {
    kiln_hlo_lexer_skip_ws(L);
    if (kiln_hlo_lexer_accept_word(L, "true") || kiln_hlo_lexer_accept_word(L, "1")) {
      dst[0] = 1;
      ok = true;
    } else if (kiln_hlo_lexer_accept_word(L, "false") || kiln_hlo_lexer_accept_word(L, "0")) {
      dst[0] = 0;
      ok = true;
    } else {
      ok = kiln_hlo_lexer_error_expected(L, "'true' or 'false'");
    }
  } else if (kiln_elem_type_is_integral(type)) {
    ok = store_int(P, type, dst);
  } else if (kiln_elem_type_is_float(type)) {
    ok = read_number(P, &t, "number") && store_float(P, type, &t, dst);
  } else if (kiln_elem_type_is_complex(type)) {
    kiln_elem_type_t part = type == KILN_C64 ? KILN_F32 : KILN_F64;
    size_t half = sz / 2;
    ok = kiln_hlo_lexer_expect(L, '(') && read_number(P, &t, "real part") &&
         store_float(P, part, &t, dst) && kiln_hlo_lexer_expect(L, ',') &&
         read_number(P, &t, "imaginary part") && store_float(P, part, &t, dst + half) &&
         kiln_hlo_lexer_expect(L, ')');
  } else {
    ok = kiln_hlo_lexer_error_at(L, L->p, KILN_INVALID_ARGUMENT, "no literal for element type %s",
                                 kiln_elem_type_name(type));
  }
  if (ok) P->lit.len += sz;
  return ok;
}

/* `{ ... }` for dimension `dim` of array shape `s`; counts are checked per dimension. */
static bool parse_dense(kiln_hlo_parser_t *P, const kiln_shape_t *s, int dim) {
  kiln_hlo_lexer_t *L = &P->L;
  if (!kiln_hlo_parser_enter(P)) return false;
  kiln_hlo_lexer_skip_ws(L);
  const char *pos = L->p;
  if (!kiln_hlo_lexer_expect(L, '{')) return false;
  int64_t count = 0;
  if (!kiln_hlo_lexer_accept(L, '}')) {
    for (;;) {
      bool ok = dim + 1 < s->rank ? parse_dense(P, s, dim + 1) : parse_element(P, s->type);
      if (!ok) return false;
      count++;
      if (kiln_hlo_lexer_accept(L, ',')) continue;
      if (!kiln_hlo_lexer_expect(L, '}')) return false;
      break;
    }
  }
  if (count != s->dims[dim]) {
    char *st = kiln_shape_to_string(s, false);
    kiln_hlo_lexer_error_at(L, pos, KILN_INVALID_ARGUMENT,
                            "expected %lld elements in dimension %d of the literal for %s, found %lld",
                            (long long)s->dims[dim], dim, st, (long long)count);
    kiln_free(st);
    return false;
  }
  P->depth--;
  return true;
}

/* Consumes `{...}` (an elided literal) if it is next. */
static bool accept_elided(kiln_hlo_lexer_t *L) {
  kiln_hlo_lexer_skip_ws(L);
  const char *q = L->p, *end = L->end;
  if (q >= end || *q != '{') return false;
  q++;
  while (q < end && (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r')) q++;
  if (end - q < 3 || memcmp(q, "...", 3) != 0) return false;
  q += 3;
  while (q < end && (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r')) q++;
  if (q >= end || *q != '}') return false;
  L->p = q + 1;
  return true;
}

bool kiln_hlo_parse_literal(kiln_hlo_parser_t *P, kiln_shape_t *shape, kiln_literal_t **out) {
  kiln_hlo_lexer_t *L = &P->L;
  if (!kiln_hlo_parser_enter(P)) return false;
  kiln_literal_t *l = kiln_hlo_parser_alloc(P, sizeof *l);
  if (!l) return false;
  l->shape = shape;
  if (accept_elided(L)) {
    l->unknown = true;
    if (kiln_shape_is_array(shape)) l->num_elements = kiln_shape_num_elements(shape);
  } else if (kiln_shape_is_tuple(shape)) {
    if (!kiln_hlo_lexer_expect(L, '(')) return false;
    int n = shape->num_elements;
    l->num_tuple_elements = n;
    if (n) {
      l->tuple_elements = kiln_hlo_parser_alloc(P, (size_t)n * sizeof(kiln_literal_t *));
      if (!l->tuple_elements) return false;
    }
    for (int i = 0; i < n; i++) {
      if (i && !kiln_hlo_lexer_expect(L, ',')) return false;
      if (!kiln_hlo_parse_literal(P, shape->elements[i], &l->tuple_elements[i])) return false;
    }
    if (!kiln_hlo_lexer_expect(L, ')')) return false;
  } else if (!kiln_shape_is_array(shape)) {
    return kiln_hlo_lexer_error_at(L, L->p, KILN_INVALID_ARGUMENT, "a %s constant has no literal",
                                   kiln_elem_type_name(shape->type));
  } else {
    size_t base = P->lit.len;
    bool empty_ok = false;
    if (shape->rank > 0 && kiln_shape_num_elements(shape) == 0) {
      /* `{}` for any zero-element array */
      const char *save = L->p;
      if (kiln_hlo_lexer_accept(L, '{') && kiln_hlo_lexer_accept(L, '}')) empty_ok = true;
      else L->p = save;
    }
    bool broadcast = !empty_ok && shape->rank > 0 && kiln_hlo_lexer_peek(L) != '{';
    if (broadcast) {
      /* `f32[3,3] constant(1)`: one scalar for every element. The arena limit bounds
       * the storage this may ask for. */
      if (!parse_element(P, shape->type)) return false;
      size_t sz = kiln_elem_type_storage_bytes(shape->type);
      int64_t n = kiln_shape_num_elements(shape);
      if (n < 0 || (uint64_t)n > (SIZE_MAX / 4) / (sz ? sz : 1)) return kiln_hlo_parser_oom(P);
      l->num_elements = n;
      if (n) {
        unsigned char *d = kiln_hlo_parser_alloc(P, (size_t)n * sz);
        if (!d) return false;
        for (int64_t i = 0; i < n; i++) memcpy(d + (size_t)i * sz, P->lit.data + base, sz);
        l->data = d;
      }
      P->lit.len = base;
      P->depth--;
      *out = l;
      return true;
    }
    if (!empty_ok) {
      bool ok = shape->rank == 0 ? parse_element(P, shape->type) : parse_dense(P, shape, 0);
      if (!ok) return false;
    }
    size_t bytes = P->lit.len - base;
    l->num_elements = kiln_shape_num_elements(shape);
    if (bytes) {
      l->data = kiln_hlo_parser_alloc(P, bytes);
      if (!l->data) return false;
      memcpy(l->data, P->lit.data + base, bytes);
    }
    P->lit.len = base;
  }
  P->depth--;
  *out = l;
  return true;
}
