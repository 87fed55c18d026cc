/* HLO literals: dense storage, typed element access and HLO text printing.
 *
 * Storage per element follows element_types.def. Sub-byte integers keep only their low
 * bits in their byte (so equal values have equal bytes) and sign-extend on read; f4e2m1fn
 * keeps its 4-bit code. The set_* helpers are storage helpers, not XLA's convert: stores
 * into integer types wrap to the type's width (two's complement truncation), stores into
 * float types round to nearest even, stores into pred store value != 0. */
#include "compiler/hlo/literal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/hlo/numeric.h"

kiln_literal_t *kiln_literal_make(kiln_arena_t *a, kiln_shape_t *shape) {
  kiln_literal_t *l = kiln_arena_alloc(a, sizeof *l);
  if (!l) return NULL;
  l->shape = shape;
  if (kiln_shape_is_tuple(shape)) {
    l->num_tuple_elements = shape->num_elements;
    if (shape->num_elements > 0) {
      l->tuple_elements =
          kiln_arena_alloc(a, sizeof(*l->tuple_elements) * (size_t)shape->num_elements);
      if (!l->tuple_elements) return NULL;
    }
    for (int i = 0; i < shape->num_elements; i++) {
      l->tuple_elements[i] = kiln_literal_make(a, shape->elements[i]);
      if (!l->tuple_elements[i]) return NULL;
    }
    return l;
  }
  if (!kiln_shape_is_array(shape)) return l; /* token / opaque: no data */
  int64_t n = kiln_shape_num_elements(shape);
  int64_t bytes = kiln_shape_byte_size(shape);
  if (n == INT64_MAX || bytes == INT64_MAX || (uint64_t)bytes > SIZE_MAX / 2) return NULL;
  l->num_elements = n;
  if (bytes > 0) {
    l->data = kiln_arena_alloc(a, (size_t)bytes);
    if (!l->data) return NULL;
  }
  return l;
}

/* ---- raw storage access ---- */

static kiln_elem_type_t elem_type(const kiln_literal_t *l) { return l->shape->type; }

static void *elem_ptr(const kiln_literal_t *l, int64_t i) {
  return (char *)l->data + (size_t)i * kiln_elem_type_storage_bytes(elem_type(l));
}

/* Reads an integer element as its two's complement value widened to 64 bits
 * (sign-extended for signed types, zero-extended for unsigned ones and pred). */
static uint64_t load_int_bits(const kiln_literal_t *l, int64_t i) {
  const void *p = elem_ptr(l, i);
  switch (elem_type(l)) {
    case KILN_PRED: return *(const uint8_t *)p != 0;
    case KILN_S1:
      return (uint64_t)(int64_t)((int8_t)(*(const uint8_t *)p << 7) >> 7);
    case KILN_S2: return (uint64_t)(int64_t)((int8_t)(*(const uint8_t *)p << 6) >> 6);
    case KILN_S4: return (uint64_t)(int64_t)((int8_t)(*(const uint8_t *)p << 4) >> 4);
    case KILN_S8: return (uint64_t)(int64_t) * (const int8_t *)p;
    case KILN_S16: { int16_t v; memcpy(&v, p, 2); return (uint64_t)(int64_t)v; }
    case KILN_S32: { int32_t v; memcpy(&v, p, 4); return (uint64_t)(int64_t)v; }
    case KILN_S64: { int64_t v; memcpy(&v, p, 8); return (uint64_t)v; }
    case KILN_U1:
      return *(const uint8_t *)p & 0x1;
    case KILN_U2: return *(const uint8_t *)p & 0x3;
    case KILN_U4: return *(const uint8_t *)p & 0xF;
    case KILN_U8: return *(const uint8_t *)p;
    case KILN_U16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case KILN_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case KILN_U64: { uint64_t v; memcpy(&v, p, 8); return v; }
    default: return 0;
  }
}

/* Stores the low bits of `v` into an integer (or pred) element. */
static void store_int_bits(kiln_literal_t *l, int64_t i, uint64_t v) {
  void *p = elem_ptr(l, i);
  switch (elem_type(l)) {
    case KILN_PRED: *(uint8_t *)p = v != 0; break;
    case KILN_S1:
    case KILN_U1:
      *(uint8_t *)p = (uint8_t)(v & 0x1);
      break;
    case KILN_S2: case KILN_U2: *(uint8_t *)p = (uint8_t)(v & 0x3); break;
    case KILN_S4: case KILN_U4: *(uint8_t *)p = (uint8_t)(v & 0xF); break;
    case KILN_S8: case KILN_U8: *(uint8_t *)p = (uint8_t)v; break;
    case KILN_S16: case KILN_U16: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
    case KILN_S32: case KILN_U32: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    case KILN_S64: case KILN_U64: memcpy(p, &v, 8); break;
    default: break;
  }
}

static bool is_int_or_pred(kiln_elem_type_t t) {
  return t == KILN_PRED || kiln_elem_type_is_integral(t);
}

/* Reads a real float element (f16 ... f64, f8, f4) as double. */
static double load_float(const kiln_literal_t *l, int64_t i) {
  const void *p = elem_ptr(l, i);
  kiln_elem_type_t t = elem_type(l);
  switch (t) {
    case KILN_F32: { float v; memcpy(&v, p, 4); return v; }
    case KILN_F64: { double v; memcpy(&v, p, 8); return v; }
    case KILN_F16: case KILN_BF16: { uint16_t v; memcpy(&v, p, 2); return kiln_narrow_to_f64(t, v); }
    default: return kiln_narrow_to_f64(t, *(const uint8_t *)p);
  }
}

static void store_float(kiln_literal_t *l, int64_t i, double v) {
  void *p = elem_ptr(l, i);
  kiln_elem_type_t t = elem_type(l);
  switch (t) {
    case KILN_F32: { float x = (float)v; memcpy(p, &x, 4); break; }
    case KILN_F64: memcpy(p, &v, 8); break;
    case KILN_F16: case KILN_BF16: {
      uint16_t x = (uint16_t)kiln_narrow_from_f64(t, v);
      memcpy(p, &x, 2);
      break;
    }
    default: *(uint8_t *)p = (uint8_t)kiln_narrow_from_f64(t, v); break;
  }
}

static void load_complex(const kiln_literal_t *l, int64_t i, double *re, double *im) {
  const void *p = elem_ptr(l, i);
  if (elem_type(l) == KILN_C64) {
    float v[2];
    memcpy(v, p, sizeof v);
    *re = v[0];
    *im = v[1];
  } else {
    double v[2];
    memcpy(v, p, sizeof v);
    *re = v[0];
    *im = v[1];
  }
}

static void store_complex(kiln_literal_t *l, int64_t i, double re, double im) {
  void *p = elem_ptr(l, i);
  if (elem_type(l) == KILN_C64) {
    float v[2] = {(float)re, (float)im};
    memcpy(p, v, sizeof v);
  } else {
    double v[2] = {re, im};
    memcpy(p, v, sizeof v);
  }
}

/* double -> integer bits modulo 2^64, truncating toward zero; NaN gives 0. */
static uint64_t f64_to_wrapped_bits(double v) {
  if (isnan(v)) return 0;
  v = trunc(v);
  if (v >= -9223372036854775808.0 && v < 9223372036854775808.0) return (uint64_t)(int64_t)v;
  if (v >= 0 && v < 18446744073709551616.0) return (uint64_t)v;
  if (isinf(v)) return 0;
  double r = fmod(v, 18446744073709551616.0); /* exact; |r| < 2^64 */
  if (r >= 0) return (uint64_t)r;
  return (uint64_t)0 - (uint64_t)(-r);
}

/* double -> int64, truncating toward zero and saturating; NaN gives 0. */
static int64_t f64_to_s64_sat(double v) {
  if (isnan(v)) return 0;
  if (v >= 9223372036854775808.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

static uint64_t f64_to_u64_sat(double v) {
  if (isnan(v) || v <= 0) return 0;
  if (v >= 18446744073709551616.0) return UINT64_MAX;
  return (uint64_t)v;
}

/* A 64-bit integer as a double rounded to odd when inexact, so that a second rounding
 * to a format of at most 51 significant bits equals one direct rounding. */
static double u64_to_f64_odd(uint64_t u) {
  if (u < (UINT64_C(1) << 53)) return (double)u;
  int s = 0;
  while ((u >> s) >= (UINT64_C(1) << 53)) s++;
  uint64_t hi = u >> s;
  if (u & ((UINT64_C(1) << s) - 1)) hi |= 1;
  return ldexp((double)hi, s);
}

static void store_float_from_int(kiln_literal_t *l, int64_t i, uint64_t mag, bool neg) {
  double d = elem_type(l) == KILN_F64 ? (double)mag : u64_to_f64_odd(mag);
  store_float(l, i, neg ? -d : d);
}

/* ---- public element access ---- */

double kiln_literal_get_f64(const kiln_literal_t *l, int64_t i) {
  kiln_elem_type_t t = elem_type(l);
  if (kiln_elem_type_is_float(t)) return load_float(l, i);
  if (kiln_elem_type_is_complex(t)) {
    double re, im;
    load_complex(l, i, &re, &im);
    return re;
  }
  if (kiln_elem_type_is_signed_int(t)) return (double)(int64_t)load_int_bits(l, i);
  if (is_int_or_pred(t)) return (double)load_int_bits(l, i);
  return 0;
}

int64_t kiln_literal_get_s64(const kiln_literal_t *l, int64_t i) {
  kiln_elem_type_t t = elem_type(l);
  if (is_int_or_pred(t)) return (int64_t)load_int_bits(l, i);
  return f64_to_s64_sat(kiln_literal_get_f64(l, i));
}

uint64_t kiln_literal_get_u64(const kiln_literal_t *l, int64_t i) {
  kiln_elem_type_t t = elem_type(l);
  if (is_int_or_pred(t)) return load_int_bits(l, i);
  return f64_to_u64_sat(kiln_literal_get_f64(l, i));
}

void kiln_literal_get_c128(const kiln_literal_t *l, int64_t i, double *re, double *im) {
  if (kiln_elem_type_is_complex(elem_type(l))) {
    load_complex(l, i, re, im);
    return;
  }
  *re = kiln_literal_get_f64(l, i);
  *im = 0;
}

void kiln_literal_set_f64(kiln_literal_t *l, int64_t i, double v) {
  kiln_elem_type_t t = elem_type(l);
  if (kiln_elem_type_is_float(t)) store_float(l, i, v);
  else if (kiln_elem_type_is_complex(t)) store_complex(l, i, v, 0);
  else if (t == KILN_PRED) store_int_bits(l, i, v != 0);
  else if (kiln_elem_type_is_integral(t)) store_int_bits(l, i, f64_to_wrapped_bits(v));
}

void kiln_literal_set_s64(kiln_literal_t *l, int64_t i, int64_t v) {
  kiln_elem_type_t t = elem_type(l);
  if (is_int_or_pred(t)) {
    store_int_bits(l, i, (uint64_t)v);
  } else if (kiln_elem_type_is_float(t)) {
    bool neg = v < 0;
    store_float_from_int(l, i, neg ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, neg);
  } else if (kiln_elem_type_is_complex(t)) {
    store_complex(l, i, (double)v, 0);
  }
}

void kiln_literal_set_u64(kiln_literal_t *l, int64_t i, uint64_t v) {
  kiln_elem_type_t t = elem_type(l);
  if (is_int_or_pred(t)) store_int_bits(l, i, v);
  else if (kiln_elem_type_is_float(t)) store_float_from_int(l, i, v, false);
  else if (kiln_elem_type_is_complex(t)) store_complex(l, i, (double)v, 0);
}

void kiln_literal_set_c128(kiln_literal_t *l, int64_t i, double re, double im) {
  if (kiln_elem_type_is_complex(elem_type(l))) store_complex(l, i, re, im);
  else kiln_literal_set_f64(l, i, re);
}

bool kiln_literal_equal(const kiln_literal_t *a, const kiln_literal_t *b) {
  if (a == b) return true;
  if (!a || !b) return false;
  if (!kiln_shape_equal(a->shape, b->shape, false) || a->unknown != b->unknown) return false;
  if (a->num_tuple_elements != b->num_tuple_elements) return false;
  for (int i = 0; i < a->num_tuple_elements; i++)
    if (!kiln_literal_equal(a->tuple_elements[i], b->tuple_elements[i])) return false;
  if (a->unknown || a->num_elements != b->num_elements) return a->num_elements == b->num_elements;
  size_t bytes = (size_t)a->num_elements * kiln_elem_type_storage_bytes(elem_type(a));
  if (bytes == 0) return true;
  if (!a->data || !b->data) return a->data == b->data;
  return memcmp(a->data, b->data, bytes) == 0;
}

/* ---- printing ---- */

/* Does `s` parse back to exactly `v` in element type `t`? Narrow types (16 bits and
 * fewer) must also parse back to `v` as an f32, so the text shows the value actually
 * stored (bf16 0.1 prints as 0.100097656, f8e4m3fn max as 448) rather than the shortest
 * decimal that merely rounds to it. */
static bool round_trips(kiln_elem_type_t t, const char *s, double v) {
  double p = strtod(s, NULL);
  if (t == KILN_F64) return memcmp(&p, &v, sizeof p) == 0;
  float want = (float)v, a = (float)p, b = strtof(s, NULL);
  if (memcmp(&a, &want, 4) != 0 || memcmp(&b, &want, 4) != 0) return false;
  return t == KILN_F32 || kiln_narrow_from_f64(t, p) == kiln_narrow_from_f64(t, v);
}

/* Prints a finite float of type `t` with the fewest significant digits that parse back
 * to the same value (see round_trips). Numbers with a decimal exponent in
 * [-4, 16) print positionally (integral values without a point: `1`, `1000000`), others
 * as `1.5e+20` / `1e-05`. */
static void print_finite(kiln_strbuf_t *b, kiln_elem_type_t t, double v) {
  if (v == 0) {
    kiln_strbuf_append(b, signbit(v) ? "-0" : "0");
    return;
  }
  char buf[64];
  int max_digits = t == KILN_F64 ? 17 : 9;
  for (int p = 1; p <= max_digits; p++) {
    snprintf(buf, sizeof buf, "%.*e", p - 1, v);
    if (round_trips(t, buf, v)) break;
  }
  /* buf = [-]d[.ddd]e[+-]XX: split into digits and exponent. */
  const char *s = buf;
  bool neg = *s == '-';
  if (neg) s++;
  char digits[32];
  int nd = 0;
  for (; *s && *s != 'e'; s++)
    if (*s != '.') digits[nd++] = *s;
  int exp10 = *s == 'e' ? atoi(s + 1) : 0;
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  digits[nd] = '\0';
  if (neg) kiln_strbuf_append_char(b, '-');
  if (exp10 >= 16 || exp10 < -4) {
    kiln_strbuf_append_char(b, digits[0]);
    if (nd > 1) {
      kiln_strbuf_append_char(b, '.');
      kiln_strbuf_append(b, digits + 1);
    }
    kiln_strbuf_printf(b, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
  } else if (exp10 < 0) {
    kiln_strbuf_append(b, "0.");
    for (int i = 0; i < -exp10 - 1; i++) kiln_strbuf_append_char(b, '0');
    kiln_strbuf_append(b, digits);
  } else if (exp10 + 1 >= nd) {
    kiln_strbuf_append(b, digits);
    for (int i = nd; i < exp10 + 1; i++) kiln_strbuf_append_char(b, '0');
  } else {
    kiln_strbuf_append_n(b, digits, (size_t)exp10 + 1);
    kiln_strbuf_append_char(b, '.');
    kiln_strbuf_append(b, digits + exp10 + 1);
  }
}

static void print_float(kiln_strbuf_t *b, kiln_elem_type_t t, double v) {
  if (isnan(v)) kiln_strbuf_append(b, signbit(v) ? "-nan" : "nan");
  else if (isinf(v)) kiln_strbuf_append(b, v < 0 ? "-inf" : "inf");
  else print_finite(b, t, v);
}

static void print_element(kiln_strbuf_t *b, const kiln_literal_t *l, int64_t i) {
  kiln_elem_type_t t = elem_type(l);
  if (t == KILN_PRED) {
    kiln_strbuf_append(b, load_int_bits(l, i) ? "true" : "false");
  } else if (kiln_elem_type_is_signed_int(t)) {
    kiln_strbuf_printf(b, "%lld", (long long)(int64_t)load_int_bits(l, i));
  } else if (kiln_elem_type_is_unsigned_int(t)) {
    kiln_strbuf_printf(b, "%llu", (unsigned long long)load_int_bits(l, i));
  } else if (kiln_elem_type_is_float(t)) {
    print_float(b, t, load_float(l, i));
  } else if (kiln_elem_type_is_complex(t)) {
    double re, im;
    load_complex(l, i, &re, &im);
    kiln_elem_type_t part = t == KILN_C64 ? KILN_F32 : KILN_F64;
    kiln_strbuf_append_char(b, '(');
    print_float(b, part, re);
    kiln_strbuf_append(b, ", ");
    print_float(b, part, im);
    kiln_strbuf_append_char(b, ')');
  }
}

/* Prints dimension `dim` of the sub-array starting at element *next. Levels whose
 * children are arrays print `{ a, b }`; the innermost level prints `{1, 2}`. */
static void print_dims(kiln_strbuf_t *b, const kiln_literal_t *l, int dim, int64_t *next) {
  const kiln_shape_t *s = l->shape;
  int64_t n = s->dims[dim];
  bool inner = dim == s->rank - 1;
  if (n == 0) {
    kiln_strbuf_append(b, "{}");
    return;
  }
  kiln_strbuf_append(b, inner ? "{" : "{ ");
  for (int64_t i = 0; i < n; i++) {
    if (i) kiln_strbuf_append(b, ", ");
    if (inner) print_element(b, l, (*next)++);
    else print_dims(b, l, dim + 1, next);
  }
  kiln_strbuf_append(b, inner ? "}" : " }");
}

void kiln_literal_print(kiln_strbuf_t *b, const kiln_literal_t *l) {
  if (l->unknown) {
    kiln_strbuf_append(b, "{...}");
    return;
  }
  const kiln_shape_t *s = l->shape;
  if (kiln_shape_is_tuple(s)) {
    if (l->num_tuple_elements == 0) {
      kiln_strbuf_append(b, "()");
      return;
    }
    kiln_strbuf_append(b, "( ");
    for (int i = 0; i < l->num_tuple_elements; i++) {
      if (i) kiln_strbuf_append(b, ", ");
      kiln_literal_print(b, l->tuple_elements[i]);
    }
    kiln_strbuf_append(b, " )");
    return;
  }
  if (!kiln_shape_is_array(s)) {
    kiln_strbuf_append(b, "{}");
    return;
  }
  if (s->rank == 0) {
    print_element(b, l, 0);
    return;
  }
  int64_t next = 0;
  print_dims(b, l, 0, &next);
}
