/* FFI attributes: a builder for XLA_FFI_Attrs trees and the backend_config decoder.
 *
 * Everything lives in one arena owned by the attrs object; the arena has a limit so a
 * hostile backend_config (a splat into a huge tensor) is an error, not an OOM. */
#include "ffi/ffi_attrs.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "ffi/ffi_api.h"

#define KILN_FFI_ATTRS_ARENA_LIMIT ((size_t)256 << 20)
#define KILN_FFI_ATTRS_MAX_ELEMENTS ((uint64_t)1 << 22)
#define KILN_FFI_ATTRS_MAX_DEPTH 64

typedef struct attr_entry {
  const char *name;
  size_t name_len;
  XLA_FFI_AttrType type;
  void *value; /* XLA_FFI_Scalar*, XLA_FFI_Array*, XLA_FFI_ByteSpan*, or kiln_ffi_dict_t* */
  struct attr_entry *next;
} attr_entry_t;

struct kiln_ffi_dict {
  attr_entry_t *head, *tail;
  size_t count;
  XLA_FFI_Attrs attrs; /* filled by finalize */
};

struct kiln_ffi_attrs {
  kiln_arena_t arena;
  kiln_ffi_dict_t *root;
  bool finalized;
};

kiln_ffi_attrs_t *kiln_ffi_attrs_create(void) {
  kiln_ffi_attrs_t *a = kiln_calloc(1, sizeof(*a));
  kiln_arena_init(&a->arena);
  a->arena.limit = KILN_FFI_ATTRS_ARENA_LIMIT;
  a->root = kiln_arena_alloc(&a->arena, sizeof(kiln_ffi_dict_t));
  return a;
}

void kiln_ffi_attrs_destroy(kiln_ffi_attrs_t *a) {
  if (!a) return;
  kiln_arena_destroy(&a->arena);
  kiln_free(a);
}

kiln_ffi_dict_t *kiln_ffi_attrs_root(kiln_ffi_attrs_t *a) {
  return a->root;
}

const XLA_FFI_Attrs *kiln_ffi_attrs_get(const kiln_ffi_attrs_t *a) {
  return a && a->finalized ? &a->root->attrs : NULL;
}

static void *aalloc(kiln_ffi_attrs_t *a, size_t n) {
  return kiln_arena_alloc(&a->arena, n ? n : 1);
}

static kiln_status exhausted(void) {
  return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "FFI attributes exceed %zu MiB",
                          KILN_FFI_ATTRS_ARENA_LIMIT >> 20);
}

static kiln_status add_entry(kiln_ffi_attrs_t *a, kiln_ffi_dict_t *d, const char *name,
                             size_t name_len, XLA_FFI_AttrType type, void *value) {
  if (a->finalized) return KILN_ERR_INVALID("FFI attributes are already finalized");
  if (!d || (!name && name_len)) return KILN_ERR_INVALID("FFI attribute: NULL dictionary or name");
  attr_entry_t *e = aalloc(a, sizeof(*e));
  char *copy = aalloc(a, name_len + 1);
  if (!e || !copy) return exhausted();
  if (name_len) memcpy(copy, name, name_len);
  e->name = copy;
  e->name_len = name_len;
  e->type = type;
  e->value = value;
  if (d->tail)
    d->tail->next = e;
  else
    d->head = e;
  d->tail = e;
  d->count++;
  return NULL;
}

static kiln_status check_dtype(XLA_FFI_DataType dtype) {
  if (!kiln_ffi_dtype_is_valid(dtype) || kiln_ffi_dtype_bits(dtype) < 8)
    return KILN_ERR_INVALID("FFI attribute: data type %d has no whole-byte size", (int)dtype);
  return NULL;
}

kiln_status kiln_ffi_dict_add_scalar(kiln_ffi_attrs_t *a, kiln_ffi_dict_t *d, const char *name,
                                     size_t name_len, XLA_FFI_DataType dtype, const void *value) {
  KILN_RETURN_IF_ERROR_PLAIN(check_dtype(dtype));
  size_t sz = kiln_ffi_dtype_byte_size(dtype);
  XLA_FFI_Scalar *s = aalloc(a, sizeof(*s));
  void *v = aalloc(a, sz);
  if (!s || !v) return exhausted();
  memcpy(v, value, sz);
  s->dtype = dtype;
  s->value = v;
  return add_entry(a, d, name, name_len, XLA_FFI_AttrType_SCALAR, s);
}

kiln_status kiln_ffi_dict_add_array(kiln_ffi_attrs_t *a, kiln_ffi_dict_t *d, const char *name,
                                    size_t name_len, XLA_FFI_DataType dtype, const void *data,
                                    size_t count) {
  KILN_RETURN_IF_ERROR_PLAIN(check_dtype(dtype));
  size_t sz = kiln_ffi_dtype_byte_size(dtype);
  if (count > KILN_FFI_ATTRS_ARENA_LIMIT / sz) return exhausted();
  XLA_FFI_Array *arr = aalloc(a, sizeof(*arr));
  void *v = aalloc(a, count * sz);
  if (!arr || !v) return exhausted();
  if (count) memcpy(v, data, count * sz);
  arr->dtype = dtype;
  arr->size = count;
  arr->data = v;
  return add_entry(a, d, name, name_len, XLA_FFI_AttrType_ARRAY, arr);
}

kiln_status kiln_ffi_dict_add_string(kiln_ffi_attrs_t *a, kiln_ffi_dict_t *d, const char *name,
                                     size_t name_len, const char *str, size_t len) {
  XLA_FFI_ByteSpan *b = aalloc(a, sizeof(*b));
  char *copy = aalloc(a, len + 1);
  if (!b || !copy) return exhausted();
  if (len) memcpy(copy, str, len);
  b->ptr = copy;
  b->len = len;
  return add_entry(a, d, name, name_len, XLA_FFI_AttrType_STRING, b);
}

kiln_status kiln_ffi_dict_add_dict(kiln_ffi_attrs_t *a, kiln_ffi_dict_t *d, const char *name,
                                   size_t name_len, kiln_ffi_dict_t **out_sub) {
  kiln_ffi_dict_t *sub = aalloc(a, sizeof(*sub));
  if (!sub) return exhausted();
  KILN_RETURN_IF_ERROR_PLAIN(add_entry(a, d, name, name_len, XLA_FFI_AttrType_DICTIONARY, sub));
  *out_sub = sub;
  return NULL;
}

static int entry_cmp(const void *x, const void *y) {
  const attr_entry_t *a = *(const attr_entry_t *const *)x, *b = *(const attr_entry_t *const *)y;
  size_t n = a->name_len < b->name_len ? a->name_len : b->name_len;
  int c = n ? memcmp(a->name, b->name, n) : 0;
  if (c) return c;
  return a->name_len < b->name_len ? -1 : a->name_len > b->name_len;
}

static kiln_status finalize_dict(kiln_ffi_attrs_t *a, kiln_ffi_dict_t *d) {
  size_t n = d->count;
  attr_entry_t **es = aalloc(a, n * sizeof(*es));
  XLA_FFI_AttrType *types = aalloc(a, n * sizeof(*types));
  XLA_FFI_ByteSpan **names = aalloc(a, n * sizeof(*names));
  XLA_FFI_ByteSpan *spans = aalloc(a, n * sizeof(*spans));
  void **values = aalloc(a, n * sizeof(*values));
  if (!es || !types || !names || !spans || !values) return exhausted();
  size_t i = 0;
  for (attr_entry_t *e = d->head; e; e = e->next) es[i++] = e;
  if (n > 1) qsort(es, n, sizeof(*es), entry_cmp);
  for (i = 0; i < n; i++) {
    attr_entry_t *e = es[i];
    if (i > 0 && entry_cmp(&es[i - 1], &es[i]) == 0)
      return KILN_ERR_INVALID("FFI attributes: duplicate attribute name '%.*s'", (int)e->name_len,
                              e->name);
    if (e->type == XLA_FFI_AttrType_DICTIONARY) {
      kiln_ffi_dict_t *sub = e->value;
      KILN_RETURN_IF_ERROR(finalize_dict(a, sub), "in dictionary '%.*s'", (int)e->name_len,
                           e->name);
      values[i] = &sub->attrs;
    } else {
      values[i] = e->value;
    }
    types[i] = e->type;
    spans[i].ptr = e->name;
    spans[i].len = e->name_len;
    names[i] = &spans[i];
  }
  d->attrs.struct_size = XLA_FFI_Attrs_STRUCT_SIZE;
  d->attrs.extension_start = NULL;
  d->attrs.size = (int64_t)n;
  d->attrs.types = types;
  d->attrs.names = names;
  d->attrs.attrs = values;
  return NULL;
}

kiln_status kiln_ffi_attrs_finalize(kiln_ffi_attrs_t *a) {
  if (!a) return KILN_ERR_INVALID("kiln_ffi_attrs_finalize: NULL attrs");
  if (a->finalized) return NULL;
  KILN_RETURN_IF_ERROR_PLAIN(finalize_dict(a, a->root));
  a->finalized = true;
  return NULL;
}

/*------------------------------------------ Parser ------------------------------------------*/

typedef struct parser {
  const char *s;
  size_t n, pos;
  kiln_ffi_attrs_t *a;
  int depth;
} parser_t;

static kiln_status perr(const parser_t *p, size_t pos, const char *what) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos && i < p->n; i++) {
    if (p->s[i] == '\n') {
      line++;
      col = 1;
    } else {
      col++;
    }
  }
  char got[32];
  if (pos >= p->n) {
    snprintf(got, sizeof(got), "end of input");
  } else {
    unsigned char c = (unsigned char)p->s[pos];
    if (c >= 0x20 && c < 0x7f)
      snprintf(got, sizeof(got), "'%c'", c);
    else
      snprintf(got, sizeof(got), "byte 0x%02x", c);
  }
  return KILN_ERR_INVALID("backend_config offset %zu (line %zu, column %zu): expected %s, got %s",
                          pos, line, col, what, got);
}

static void skip_ws(parser_t *p) {
  while (p->pos < p->n) {
    char c = p->s[p->pos];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
      p->pos++;
    else
      break;
  }
}

static bool at(parser_t *p, char c) {
  skip_ws(p);
  return p->pos < p->n && p->s[p->pos] == c;
}

static kiln_status expect(parser_t *p, char c, const char *what) {
  if (!at(p, c)) return perr(p, p->pos, what);
  p->pos++;
  return NULL;
}

static bool is_id_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
static bool is_id_char(char c) {
  return is_id_start(c) || is_digit(c) || c == '$' || c == '.';
}

/* A bare identifier at the current position (after whitespace); len 0 if none. */
static size_t ident(parser_t *p, const char **out) {
  skip_ws(p);
  size_t start = p->pos;
  if (start >= p->n || !is_id_start(p->s[start])) return 0;
  size_t i = start + 1;
  while (i < p->n && is_id_char(p->s[i])) i++;
  *out = p->s + start;
  p->pos = i;
  return i - start;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* A quoted string with MLIR escapes, decoded into the arena. */
static kiln_status string_lit(parser_t *p, const char **out, size_t *out_len) {
  skip_ws(p);
  if (p->pos >= p->n || p->s[p->pos] != '"') return perr(p, p->pos, "'\"'");
  size_t start = ++p->pos;
  char *buf = aalloc(p->a, p->n - start + 1);
  if (!buf) return exhausted();
  size_t len = 0;
  while (p->pos < p->n && p->s[p->pos] != '"') {
    char c = p->s[p->pos];
    if (c == '\n') return perr(p, p->pos, "a closing '\"' before the end of the line");
    if (c != '\\') {
      buf[len++] = c;
      p->pos++;
      continue;
    }
    if (p->pos + 1 >= p->n) return perr(p, p->pos + 1, "an escape after '\\'");
    char e = p->s[p->pos + 1];
    if (e == '"' || e == '\\') {
      buf[len++] = e;
      p->pos += 2;
    } else if (e == 'n') {
      buf[len++] = '\n';
      p->pos += 2;
    } else if (e == 't') {
      buf[len++] = '\t';
      p->pos += 2;
    } else if (p->pos + 2 < p->n && hexval(e) >= 0 && hexval(p->s[p->pos + 2]) >= 0) {
      buf[len++] = (char)(hexval(e) * 16 + hexval(p->s[p->pos + 2]));
      p->pos += 3;
    } else {
      return perr(p, p->pos + 1, "an escape (\\\", \\\\, \\n, \\t or two hex digits)");
    }
  }
  if (p->pos >= p->n) return perr(p, p->pos, "a closing '\"'");
  p->pos++;
  buf[len] = '\0';
  *out = buf;
  *out_len = len;
  return NULL;
}

/* A numeric literal. */
typedef struct num {
  bool neg, is_float, hex;
  uint64_t mag; /* integers and hex */
  double f;     /* decimal floats */
  size_t pos;
} num_t;

static bool at_number(parser_t *p) {
  skip_ws(p);
  if (p->pos >= p->n) return false;
  char c = p->s[p->pos];
  return is_digit(c) || ((c == '-' || c == '+') && p->pos + 1 < p->n && is_digit(p->s[p->pos + 1]));
}

static kiln_status number(parser_t *p, num_t *out) {
  skip_ws(p);
  memset(out, 0, sizeof(*out));
  out->pos = p->pos;
  size_t i = p->pos;
  if (i < p->n && (p->s[i] == '-' || p->s[i] == '+')) out->neg = p->s[i++] == '-';
  if (i >= p->n || !is_digit(p->s[i])) return perr(p, i, "a number");
  if (p->s[i] == '0' && i + 1 < p->n && (p->s[i + 1] == 'x' || p->s[i + 1] == 'X')) {
    i += 2;
    size_t digits = 0;
    while (i < p->n && hexval(p->s[i]) >= 0) {
      if (out->mag >> 60) return perr(p, out->pos, "a hexadecimal literal of at most 64 bits");
      out->mag = out->mag * 16 + (uint64_t)hexval(p->s[i++]);
      digits++;
    }
    if (!digits) return perr(p, i, "hexadecimal digits after '0x'");
    out->hex = true;
    p->pos = i;
    return NULL;
  }
  size_t start = i;
  bool overflow = false;
  while (i < p->n && is_digit(p->s[i])) {
    uint64_t d = (uint64_t)(p->s[i++] - '0');
    if (out->mag > (UINT64_MAX - d) / 10) overflow = true;
    out->mag = out->mag * 10 + d;
  }
  if (i < p->n && p->s[i] == '.') {
    out->is_float = true;
    i++;
    while (i < p->n && is_digit(p->s[i])) i++;
  }
  if (i < p->n && (p->s[i] == 'e' || p->s[i] == 'E')) {
    size_t j = i + 1;
    if (j < p->n && (p->s[j] == '+' || p->s[j] == '-')) j++;
    if (j >= p->n || !is_digit(p->s[j])) return perr(p, j, "exponent digits");
    while (j < p->n && is_digit(p->s[j])) j++;
    out->is_float = true;
    i = j;
  }
  if (out->is_float) {
    char tmp[128];
    size_t len = i - start;
    if (len >= sizeof(tmp)) return perr(p, start, "a float literal of at most 127 characters");
    memcpy(tmp, p->s + start, len);
    tmp[len] = '\0';
    out->f = strtod(tmp, NULL);
    if (out->neg) out->f = -out->f;
  } else if (overflow) {
    return perr(p, out->pos, "an integer that fits in 64 bits");
  }
  p->pos = i;
  return NULL;
}

/* Element types of attribute values: an FFI dtype, or INVALID with a reason. */
static kiln_status type_name(parser_t *p, XLA_FFI_DataType *out, bool *is_pred) {
  size_t pos = (skip_ws(p), p->pos);
  const char *t;
  size_t n = ident(p, &t);
  if (!n) return perr(p, pos, "a type (i32, ui8, f32, ...)");
  static const struct {
    const char *name;
    XLA_FFI_DataType dt;
  } types[] = {
      {"i1", XLA_FFI_DataType_PRED},  {"i8", XLA_FFI_DataType_S8},
      {"i16", XLA_FFI_DataType_S16},  {"i32", XLA_FFI_DataType_S32},
      {"i64", XLA_FFI_DataType_S64},  {"si8", XLA_FFI_DataType_S8},
      {"si16", XLA_FFI_DataType_S16}, {"si32", XLA_FFI_DataType_S32},
      {"si64", XLA_FFI_DataType_S64}, {"ui8", XLA_FFI_DataType_U8},
      {"ui16", XLA_FFI_DataType_U16}, {"ui32", XLA_FFI_DataType_U32},
      {"ui64", XLA_FFI_DataType_U64}, {"f32", XLA_FFI_DataType_F32},
      {"f64", XLA_FFI_DataType_F64},
  };
  for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
    if (strlen(types[i].name) == n && memcmp(types[i].name, t, n) == 0) {
      *out = types[i].dt;
      *is_pred = types[i].dt == XLA_FFI_DataType_PRED;
      return NULL;
    }
  }
  return perr(p, pos,
              "a type XLA FFI attributes support (i1, i8-i64, si8-si64, ui8-ui64, f32, f64)");
}

static bool is_float_dt(XLA_FFI_DataType t) {
  return t == XLA_FFI_DataType_F32 || t == XLA_FFI_DataType_F64;
}
static bool is_unsigned_dt(XLA_FFI_DataType t) {
  return t == XLA_FFI_DataType_U8 || t == XLA_FFI_DataType_U16 || t == XLA_FFI_DataType_U32 ||
         t == XLA_FFI_DataType_U64;
}

/* Stores `v` as `dt` at `dst`, checking the value fits. */
static kiln_status store(parser_t *p, const num_t *v, XLA_FFI_DataType dt, void *dst) {
  if (is_float_dt(dt)) {
    if (v->hex) {
      if (dt == XLA_FFI_DataType_F32) {
        if (v->mag >> 32) return perr(p, v->pos, "a 32-bit hexadecimal f32 bit pattern");
        uint32_t bits = (uint32_t)v->mag;
        memcpy(dst, &bits, 4);
      } else {
        memcpy(dst, &v->mag, 8);
      }
      return NULL;
    }
    double d = v->is_float ? v->f : (v->neg ? -(double)v->mag : (double)v->mag);
    if (dt == XLA_FFI_DataType_F32) {
      float f = (float)d;
      memcpy(dst, &f, 4);
    } else {
      memcpy(dst, &d, 8);
    }
    return NULL;
  }
  if (v->is_float) return perr(p, v->pos, "an integer literal for an integer type");
  int bits = dt == XLA_FFI_DataType_PRED ? 1 : kiln_ffi_dtype_bits(dt);
  if (dt == XLA_FFI_DataType_PRED) {
    if (v->neg || v->mag > 1) return perr(p, v->pos, "0 or 1 for an i1 value");
    bool b = v->mag != 0;
    memcpy(dst, &b, 1);
    return NULL;
  }
  uint64_t value;
  if (is_unsigned_dt(dt) || v->hex) {
    if (v->neg && !v->hex) return perr(p, v->pos, "a non-negative value for an unsigned type");
    uint64_t max = bits == 64 ? UINT64_MAX : (((uint64_t)1 << bits) - 1);
    if (v->mag > max) return perr(p, v->pos, "a value that fits the integer type");
    value = v->neg ? (uint64_t)0 - v->mag : v->mag;
  } else {
    uint64_t lim = (uint64_t)1 << (bits - 1); /* |min| */
    if (v->neg ? v->mag > lim : v->mag > lim - 1)
      return perr(p, v->pos, "a value that fits the integer type");
    value = v->neg ? (uint64_t)0 - v->mag : v->mag;
  }
  switch (bits) {
    case 8: {
      uint8_t x = (uint8_t)value;
      memcpy(dst, &x, 1);
      break;
    }
    case 16: {
      uint16_t x = (uint16_t)value;
      memcpy(dst, &x, 2);
      break;
    }
    case 32: {
      uint32_t x = (uint32_t)value;
      memcpy(dst, &x, 4);
      break;
    }
    default:
      memcpy(dst, &value, 8);
      break;
  }
  return NULL;
}

/* A growable list of numbers (heap; freed by the caller). */
typedef struct numlist {
  num_t *v;
  size_t len, cap;
} numlist_t;

static kiln_status numlist_push(parser_t *p, numlist_t *l, const num_t *x) {
  if (l->len >= KILN_FFI_ATTRS_MAX_ELEMENTS) return perr(p, x->pos, "fewer array elements");
  if (l->len == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 16;
    l->v = kiln_realloc(l->v, l->cap * sizeof(num_t));
  }
  l->v[l->len++] = *x;
  return NULL;
}

/* A number, or true/false as 1/0. */
static kiln_status element(parser_t *p, num_t *x) {
  const char *t;
  size_t save = p->pos;
  size_t n = ident(p, &t);
  if (n) {
    memset(x, 0, sizeof(*x));
    x->pos = save;
    if (n == 4 && memcmp(t, "true", 4) == 0) {
      x->mag = 1;
      return NULL;
    }
    if (n == 5 && memcmp(t, "false", 5) == 0) return NULL;
    return perr(p, save, "a number");
  }
  return number(p, x);
}

static kiln_status add_numbers(parser_t *p, kiln_ffi_dict_t *d, const char *name, size_t nlen,
                               XLA_FFI_DataType dt, const numlist_t *l) {
  size_t sz = kiln_ffi_dtype_byte_size(dt);
  void *buf = kiln_try_malloc(l->len * sz + 1);
  if (!buf) return exhausted();
  kiln_status s = NULL;
  for (size_t i = 0; i < l->len && !s; i++) s = store(p, &l->v[i], dt, (char *)buf + i * sz);
  if (!s) s = kiln_ffi_dict_add_array(p->a, d, name, nlen, dt, buf, l->len);
  kiln_free(buf);
  return s;
}

/* array<T: v, ...> after the "array" keyword. */
static kiln_status dense_array(parser_t *p, kiln_ffi_dict_t *d, const char *name, size_t nlen) {
  KILN_RETURN_IF_ERROR_PLAIN(expect(p, '<', "'<' after 'array'"));
  size_t tpos = (skip_ws(p), p->pos);
  XLA_FFI_DataType dt;
  bool pred;
  KILN_RETURN_IF_ERROR_PLAIN(type_name(p, &dt, &pred));
  if (pred || is_unsigned_dt(dt))
    return perr(p, tpos, "an array element type XLA FFI supports (i8, i16, i32, i64, f32, f64)");
  numlist_t l = {0};
  kiln_status s = NULL;
  if (at(p, ':')) {
    p->pos++;
    do {
      num_t x;
      s = number(p, &x);
      if (!s) s = numlist_push(p, &l, &x);
    } while (!s && at(p, ',') && (p->pos++, true));
  }
  if (!s) s = expect(p, '>', l.len ? "',' or '>' in array<...>" : "':' or '>' in array<...>");
  if (!s) s = add_numbers(p, d, name, nlen, dt, &l);
  kiln_free(l.v);
  return s;
}

/* The nested [..] lists of a dense<...> literal, flattened. */
static kiln_status dense_values(parser_t *p, numlist_t *l, int depth) {
  if (depth > KILN_FFI_ATTRS_MAX_DEPTH) return perr(p, p->pos, "less deeply nested lists");
  if (!at(p, '[')) {
    num_t x;
    KILN_RETURN_IF_ERROR_PLAIN(element(p, &x));
    return numlist_push(p, l, &x);
  }
  p->pos++;
  if (at(p, ']')) {
    p->pos++;
    return NULL;
  }
  do {
    KILN_RETURN_IF_ERROR_PLAIN(dense_values(p, l, depth + 1));
  } while (at(p, ',') && (p->pos++, true));
  return expect(p, ']', "',' or ']' in a dense list");
}

/* dense<...> : tensor<AxBxT> after the "dense" keyword. */
static kiln_status dense_elements(parser_t *p, kiln_ffi_dict_t *d, const char *name, size_t nlen) {
  KILN_RETURN_IF_ERROR_PLAIN(expect(p, '<', "'<' after 'dense'"));
  numlist_t l = {0};
  bool splat = !at(p, '[');
  kiln_status s = dense_values(p, &l, 0);
  if (!s) s = expect(p, '>', "'>' closing dense<...>");
  if (!s) s = expect(p, ':', "': tensor<...>' after dense<...>");
  const char *t = NULL;
  size_t tpos = (skip_ws(p), p->pos);
  if (!s && !(ident(p, &t) == 6 && memcmp(t, "tensor", 6) == 0))
    s = perr(p, tpos, "'tensor' after dense<...> :");
  if (!s) s = expect(p, '<', "'<' after 'tensor'");
  uint64_t count = 1;
  while (!s) {
    skip_ws(p);
    if (p->pos >= p->n || !is_digit(p->s[p->pos])) break;
    uint64_t dim = 0;
    size_t dpos = p->pos;
    while (p->pos < p->n && is_digit(p->s[p->pos])) {
      dim = dim * 10 + (uint64_t)(p->s[p->pos++] - '0');
      if (dim > KILN_FFI_ATTRS_MAX_ELEMENTS) break;
    }
    if (dim > KILN_FFI_ATTRS_MAX_ELEMENTS || (dim && count > KILN_FFI_ATTRS_MAX_ELEMENTS / dim)) {
      s = perr(p, dpos, "a tensor of at most 4194304 elements");
      break;
    }
    count *= dim;
    if (p->pos >= p->n || p->s[p->pos] != 'x') {
      s = perr(p, p->pos, "'x' after a tensor dimension");
      break;
    }
    p->pos++;
  }
  XLA_FFI_DataType dt = XLA_FFI_DataType_INVALID;
  bool pred = false;
  size_t epos = (skip_ws(p), p->pos);
  if (!s) s = type_name(p, &dt, &pred);
  if (!s && pred) s = perr(p, epos, "a tensor element type XLA FFI supports (not i1)");
  if (!s) s = expect(p, '>', "'>' closing tensor<...>");
  if (!s && splat && l.len == 1) {
    num_t one = l.v[0];
    l.len = 0;
    for (uint64_t i = 0; i < count && !s; i++) s = numlist_push(p, &l, &one);
  } else if (!s && l.len != count) {
    s = perr(p, tpos, "a tensor type with as many elements as the dense<...> list");
  }
  if (!s) s = add_numbers(p, d, name, nlen, dt, &l);
  kiln_free(l.v);
  return s;
}

static kiln_status dictionary(parser_t *p, kiln_ffi_dict_t *d);

static kiln_status value(parser_t *p, kiln_ffi_dict_t *d, const char *name, size_t nlen) {
  skip_ws(p);
  size_t vpos = p->pos;
  if (at(p, '{')) {
    kiln_ffi_dict_t *sub = NULL;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_ffi_dict_add_dict(p->a, d, name, nlen, &sub));
    return dictionary(p, sub);
  }
  if (at(p, '"')) {
    const char *str;
    size_t len;
    KILN_RETURN_IF_ERROR_PLAIN(string_lit(p, &str, &len));
    return kiln_ffi_dict_add_string(p->a, d, name, nlen, str, len);
  }
  if (at_number(p)) {
    num_t x;
    KILN_RETURN_IF_ERROR_PLAIN(number(p, &x));
    XLA_FFI_DataType dt = x.is_float ? XLA_FFI_DataType_F64 : XLA_FFI_DataType_S64;
    bool pred = false;
    if (at(p, ':')) {
      p->pos++;
      KILN_RETURN_IF_ERROR_PLAIN(type_name(p, &dt, &pred));
    }
    uint64_t buf = 0;
    KILN_RETURN_IF_ERROR_PLAIN(store(p, &x, dt, &buf));
    return kiln_ffi_dict_add_scalar(p->a, d, name, nlen, dt, &buf);
  }
  const char *t;
  size_t n = ident(p, &t);
  if (n == 4 && memcmp(t, "true", 4) == 0) {
    bool b = true;
    return kiln_ffi_dict_add_scalar(p->a, d, name, nlen, XLA_FFI_DataType_PRED, &b);
  }
  if (n == 5 && memcmp(t, "false", 5) == 0) {
    bool b = false;
    return kiln_ffi_dict_add_scalar(p->a, d, name, nlen, XLA_FFI_DataType_PRED, &b);
  }
  if (n == 5 && memcmp(t, "array", 5) == 0) return dense_array(p, d, name, nlen);
  if (n == 5 && memcmp(t, "dense", 5) == 0) return dense_elements(p, d, name, nlen);
  return perr(p, vpos,
              "an attribute value (number, true/false, \"string\", array<...>, dense<...> or "
              "{dictionary})");
}

static kiln_status dictionary(parser_t *p, kiln_ffi_dict_t *d) {
  if (++p->depth > KILN_FFI_ATTRS_MAX_DEPTH)
    return perr(p, p->pos, "dictionaries nested at most 64 deep");
  KILN_RETURN_IF_ERROR_PLAIN(expect(p, '{', "'{' opening a dictionary"));
  if (at(p, '}')) {
    p->pos++;
    p->depth--;
    return NULL;
  }
  for (;;) {
    skip_ws(p);
    size_t npos = p->pos;
    const char *name = NULL;
    size_t nlen = 0;
    if (at(p, '"')) {
      KILN_RETURN_IF_ERROR_PLAIN(string_lit(p, &name, &nlen));
    } else if (!(nlen = ident(p, &name))) {
      return perr(p, npos, "an attribute name");
    }
    for (attr_entry_t *e = d->head; e; e = e->next)
      if (e->name_len == nlen && memcmp(e->name, name, nlen) == 0)
        return perr(p, npos, "a name not used before in this dictionary");
    if (!at(p, '='))
      return perr(p, p->pos, "'=' after the attribute name (XLA FFI has no unit attributes)");
    p->pos++;
    KILN_RETURN_IF_ERROR_PLAIN(value(p, d, name, nlen));
    if (at(p, ',')) {
      p->pos++;
      continue;
    }
    KILN_RETURN_IF_ERROR_PLAIN(expect(p, '}', "',' or '}' after an attribute"));
    p->depth--;
    return NULL;
  }
}

kiln_status kiln_ffi_attrs_parse(const char *text, size_t len, kiln_ffi_attrs_t **out) {
  if (!out) return KILN_ERR_INVALID("kiln_ffi_attrs_parse: NULL out");
  *out = NULL;
  if (!text && len) return KILN_ERR_INVALID("kiln_ffi_attrs_parse: NULL text");
  kiln_ffi_attrs_t *a = kiln_ffi_attrs_create();
  parser_t p = {.s = text, .n = len, .pos = 0, .a = a, .depth = 0};
  kiln_status s = NULL;
  skip_ws(&p);
  if (p.pos < p.n) {
    s = dictionary(&p, a->root);
    if (!s) {
      skip_ws(&p);
      if (p.pos < p.n) s = perr(&p, p.pos, "end of input after the dictionary");
    }
  }
  if (!s) s = kiln_ffi_attrs_finalize(a);
  if (s) {
    kiln_ffi_attrs_destroy(a);
    return s;
  }
  *out = a;
  return NULL;
}
