/* The MLIR text reader: attributes (builtin, dense elements and arrays, StableHLO enums and
 * structured attributes, aliases, unknown dialect attributes kept as text) and locations. */
#include <stdio.h>
#include <string.h>

#include "compiler/frontend/mlir_text_internal.h"

kiln_mlir_attr_t *kiln_mlirp_new_attr(kiln_mlirp_t *P, kiln_mlir_attr_kind_t kind) {
  kiln_mlir_attr_t *a = kiln_arena_alloc(P->a, sizeof(*a));
  if (a == NULL) {
    kiln_mlirp_failf(P, "out of memory");
    return NULL;
  }
  a->kind = kind;
  return a;
}

const kiln_mlir_attr_t *kiln_mlirp_i64_attr(kiln_mlirp_t *P, int64_t v, int32_t width) {
  kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_INTEGER);
  if (a == NULL) return NULL;
  a->i = v;
  a->type = kiln_mlirp_int_type(P, width, KILN_MLIR_SIGNLESS);
  return a;
}

const kiln_mlir_attr_t *kiln_mlirp_dense_i64(kiln_mlirp_t *P, const int64_t *v, int32_t n) {
  kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_DENSE_ARRAY);
  if (a == NULL) return NULL;
  a->type = kiln_mlirp_int_type(P, 64, KILN_MLIR_SIGNLESS);
  a->num_elements = n;
  a->ints = kiln_arena_alloc(P->a, sizeof(int64_t) * (size_t)(n ? n : 1));
  if (a->ints == NULL) {
    kiln_mlirp_failf(P, "out of memory");
    return NULL;
  }
  if (n) memcpy(a->ints, v, sizeof(int64_t) * (size_t)n);
  return a;
}

const kiln_mlir_attr_t *kiln_mlirp_enum_attr(kiln_mlirp_t *P, const char *dialect,
                                             const char *enum_name, const char *value) {
  kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_ENUM);
  if (a == NULL) return NULL;
  a->dialect = kiln_arena_strdup(P->a, dialect);
  a->enum_name = kiln_arena_strdup(P->a, enum_name);
  a->str = kiln_arena_strdup(P->a, value);
  return a;
}

/* A growable array of int64 in the arena. */
typedef struct ivec {
  int64_t *v;
  int32_t n, cap;
} ivec_t;

static bool ivec_push(kiln_mlirp_t *P, ivec_t *iv, int64_t x) {
  if (iv->n == iv->cap) {
    int32_t nc = iv->cap ? iv->cap * 2 : 16;
    int64_t *nv = kiln_arena_realloc(P->a, iv->v, sizeof(int64_t) * (size_t)iv->cap,
                                     sizeof(int64_t) * (size_t)nc);
    if (nv == NULL) return kiln_mlirp_failf(P, "out of memory");
    iv->v = nv;
    iv->cap = nc;
  }
  iv->v[iv->n++] = x;
  return true;
}

bool kiln_mlirp_int_list(kiln_mlirp_t *P, const kiln_mlir_attr_t **out) {
  if (!kiln_mlirp_expect(P, '[')) return false;
  ivec_t iv = {0};
  if (!kiln_mlirp_accept(P, ']')) {
    do {
      int64_t x;
      if (kiln_mlirp_accept(P, '?')) {
        x = KILN_MLIR_DYNAMIC;
      } else if (kiln_mlirp_accept_kw(P, "true")) {
        x = 1;
      } else if (kiln_mlirp_accept_kw(P, "false")) {
        x = 0;
      } else if (!kiln_mlirp_integer(P, &x)) {
        return false;
      }
      if (!ivec_push(P, &iv, x)) return false;
    } while (kiln_mlirp_accept(P, ','));
    if (!kiln_mlirp_expect(P, ']')) return false;
  }
  *out = kiln_mlirp_dense_i64(P, iv.v, iv.n);
  return *out != NULL;
}

/* ---- dense<...> ---- */

typedef struct dense_ctx {
  kiln_literal_t *lit;
  kiln_elem_type_t elem;
  const int64_t *dims;
  int32_t rank;
  int64_t next; /* elements written */
} dense_ctx_t;

static void set_bits(kiln_literal_t *l, kiln_elem_type_t e, int64_t i, uint64_t bits) {
  size_t w = kiln_elem_type_storage_bytes(e);
  unsigned char *d = (unsigned char *)l->data + (size_t)i * w;
  for (size_t k = 0; k < w && k < 8; k++) d[k] = (unsigned char)(bits >> (8 * k));
}

/* One part of a complex element: its value, or (hex) the bit pattern of the part type. */
typedef struct dense_part {
  double value;
  bool is_bits;
  uint64_t bits;
} dense_part_t;

static bool dense_scalar(kiln_mlirp_t *P, dense_ctx_t *c, int64_t i, bool part_of_complex,
                         dense_part_t *part) {
  kiln_elem_type_t e = c->elem;
  if (!part_of_complex && kiln_elem_type_is_complex(e)) {
    dense_part_t re = {0}, im = {0};
    if (!kiln_mlirp_expect(P, '(') || !dense_scalar(P, c, i, true, &re) ||
        !kiln_mlirp_expect(P, ',') || !dense_scalar(P, c, i, true, &im) ||
        !kiln_mlirp_expect(P, ')')) {
      return false;
    }
    if (i < 0) return true;
    kiln_literal_set_c128(c->lit, i, re.value, im.value);
    /* Hex parts are bit patterns of the part type (f32 for c64, f64 for c128), as MLIR reads
     * them; written over the value so that NaN payloads and -0 survive. */
    size_t w = kiln_elem_type_storage_bytes(e) / 2;
    unsigned char *d = (unsigned char *)c->lit->data + (size_t)i * 2 * w;
    for (int k = 0; k < 2; k++) {
      const dense_part_t *pt = k ? &im : &re;
      if (!pt->is_bits) continue;
      for (size_t b = 0; b < w; b++) d[k * w + b] = (unsigned char)(pt->bits >> (8 * b));
    }
    return true;
  }
  char first = kiln_mlirp_peek(P);
  if ((first == 't' || first == 'f') &&
      (kiln_mlirp_accept_kw(P, "true") || kiln_mlirp_accept_kw(P, "false"))) {
    bool v = P->p[-1] == 'e' && P->p[-2] == 'u';
    if (part_of_complex) {
      part->value = v;
    } else if (i >= 0) {
      kiln_literal_set_s64(c->lit, i, v);
    }
    return true;
  }
  const char *at = (kiln_mlirp_ws(P), P->p);
  kiln_mlirp_num_t num;
  if (!kiln_mlirp_number(P, &num)) return false;
  if (part_of_complex) {
    part->is_bits = num.is_hex && !num.neg;
    part->bits = part->is_bits ? kiln_mlirp_num_u64bits(&num) : 0;
    part->value = kiln_mlirp_num_f64(&num);
    return true;
  }
  if (i < 0) return true;
  if (kiln_elem_type_is_float(e)) {
    if (num.is_hex && !num.neg) {
      set_bits(c->lit, e, i, kiln_mlirp_num_u64bits(&num));
    } else {
      kiln_literal_set_f64(c->lit, i, kiln_mlirp_num_f64(&num));
    }
    return true;
  }
  if (num.is_float) return kiln_mlirp_fail_at(P, at, "expected an integer element, found a float");
  bool ovf = false;
  int64_t v = kiln_mlirp_num_i64(&num, &ovf);
  if (ovf) return kiln_mlirp_fail_at(P, at, "integer element out of range");
  if (e == KILN_PRED && v != 0 && v != 1) {
    return kiln_mlirp_fail_at(P, at, "expected 0, 1, true or false for an i1 element");
  }
  if (kiln_elem_type_is_unsigned_int(e)) {
    kiln_literal_set_u64(c->lit, i, (uint64_t)v);
  } else {
    kiln_literal_set_s64(c->lit, i, v);
  }
  return true;
}

static bool dense_list(kiln_mlirp_t *P, dense_ctx_t *c, int32_t depth) {
  if (depth >= c->rank) return kiln_mlirp_failf(P, "dense literal nested deeper than its type");
  if (depth >= KILN_MLIRP_MAX_DEPTH) return kiln_mlirp_failf(P, "dense literal nested too deeply");
  if (!kiln_mlirp_expect(P, '[')) return false;
  int64_t count = 0;
  if (!kiln_mlirp_accept(P, ']')) {
    do {
      if (kiln_mlirp_peek(P) == '[') {
        if (!dense_list(P, c, depth + 1)) return false;
      } else {
        if (depth != c->rank - 1) {
          return kiln_mlirp_failf(P, "dense literal nested less deeply than its type");
        }
        int64_t i = c->next < c->lit->num_elements ? c->next : -1;
        if (!dense_scalar(P, c, i, false, NULL)) return false;
        c->next++;
      }
      count++;
    } while (kiln_mlirp_accept(P, ','));
    if (!kiln_mlirp_expect(P, ']')) return false;
  }
  if (count != c->dims[depth]) {
    return kiln_mlirp_failf(P, "dense literal has %lld elements in dimension %d, its type %lld",
                            (long long)count, depth, (long long)c->dims[depth]);
  }
  if (count == 0 && depth + 1 < c->rank) {
    /* an empty outer list: the inner dimensions hold nothing */
  }
  return true;
}

/* Copies the first element (w bytes) over all n, doubling the copied span. */
static void splat_fill(void *data, size_t w, int64_t n) {
  size_t total = w * (size_t)n, done = w;
  char *d = data;
  while (done < total) {
    size_t k = done < total - done ? done : total - done;
    memcpy(d + done, d, k);
    done += k;
  }
}

/* 0x10 | a hex digit's value; 0 for every other byte. */
static const unsigned char kHexDigit[256] = {
    ['0'] = 0x10, ['1'] = 0x11, ['2'] = 0x12, ['3'] = 0x13, ['4'] = 0x14, ['5'] = 0x15,
    ['6'] = 0x16, ['7'] = 0x17, ['8'] = 0x18, ['9'] = 0x19, ['a'] = 0x1A, ['b'] = 0x1B,
    ['c'] = 0x1C, ['d'] = 0x1D, ['e'] = 0x1E, ['f'] = 0x1F, ['A'] = 0x1A, ['B'] = 0x1B,
    ['C'] = 0x1C, ['D'] = 0x1D, ['E'] = 0x1E, ['F'] = 0x1F,
};

/* Decodes 2n hex digits at `h` into n bytes; false if one is not a hex digit. */
static bool hex_bytes(const char *hex, size_t n, unsigned char *d) {
  const unsigned char *h = (const unsigned char *)hex;
  unsigned valid = 0x10; /* loses bit 4 at the first byte that is not a hex digit */
  for (size_t i = 0; i < n; i++) {
    unsigned hi = kHexDigit[h[2 * i]], lo = kHexDigit[h[2 * i + 1]];
    valid &= hi & lo;
    d[i] = (unsigned char)((hi << 4) | (lo & 0x0F));
  }
  return valid != 0;
}

static bool dense_hex(kiln_mlirp_t *P, dense_ctx_t *c) {
  const char *s;
  size_t n;
  const char *at = (kiln_mlirp_ws(P), P->p);
  if (!kiln_mlirp_string_span(P, &s, &n)) return false;
  if (n < 2 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || (n % 2) != 0) {
    return kiln_mlirp_fail_at(P, at, "expected a hex string \"0x...\" in dense<>");
  }
  size_t bytes = (n - 2) / 2;
  size_t w = kiln_elem_type_storage_bytes(c->elem);
  size_t total = w * (size_t)c->lit->num_elements;
  if (bytes != total && bytes != w) {
    return kiln_mlirp_fail_at(P, at, "hex dense literal has %zu bytes, its type needs %zu", bytes,
                              total);
  }
  unsigned char *d = c->lit->data;
  if (!hex_bytes(s + 2, bytes, d))
    return kiln_mlirp_fail_at(P, at, "bad hex digit in dense literal");
  if (bytes == w && total != w) splat_fill(d, w, c->lit->num_elements);
  if (c->elem == KILN_PRED) {
    for (size_t i = 0; i < total; i++) d[i] = d[i] != 0;
  }
  return true;
}

/* `dense<...> : type` after `dense`. */
static bool dense_attr(kiln_mlirp_t *P, const char *start, const kiln_mlir_attr_t **out) {
  if (kiln_mlirp_peek(P) != '<') return kiln_mlirp_fail(P, "'<' after dense");
  const char *body = P->p + 1;
  if (!kiln_mlirp_skip_balanced(P)) return false;
  const char *body_end = P->p - 1;
  const char *after = P->p;
  const kiln_mlir_type_t *t;
  if (!kiln_mlirp_expect(P, ':') || !kiln_mlirp_type(P, &t)) return false;
  const char *resume = P->p;
  if (t->kind != KILN_MLIR_TYPE_TENSOR || t->unranked) {
    return kiln_mlirp_fail_at(P, after, "expected a ranked tensor type for dense<>");
  }
  kiln_elem_type_t elem;
  kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_DENSE_ELEMENTS);
  if (a == NULL) return false;
  a->type = t;
  for (int32_t d = 0; d < t->rank; d++) {
    if (t->dims[d] == KILN_MLIR_DYNAMIC) {
      return kiln_mlirp_fail_at(P, after, "dense<> needs a static shape");
    }
  }
  if (!kiln_mlirp_elem_of(t->element, &elem)) {
    /* an element type kiln does not model: keep the text */
    a->kind = KILN_MLIR_ATTR_OTHER;
    a->str = kiln_mlirp_dup(P, start, (size_t)(resume - start));
    a->str_len = (size_t)(resume - start);
    *out = a;
    return true;
  }
  kiln_shape_t *shape = kiln_shape_make_array(P->a, elem, t->rank, t->dims);
  if (shape && kiln_shape_byte_size(shape) > KILN_MLIRP_MAX_LITERAL_BYTES) {
    return kiln_mlirp_fail_at(P, start, "dense literal of %lld bytes is above kiln's limit (%lld)",
                              (long long)kiln_shape_byte_size(shape),
                              (long long)KILN_MLIRP_MAX_LITERAL_BYTES);
  }
  kiln_literal_t *lit = shape ? kiln_literal_make(P->a, shape) : NULL;
  if (lit == NULL) return kiln_mlirp_fail_at(P, start, "dense literal too large");
  a->literal = lit;
  dense_ctx_t c = {lit, elem, t->dims, t->rank, 0};
  /* parse the body with the element type known */
  const char *saved_end = P->end;
  P->p = body;
  P->end = body_end;
  char ch = kiln_mlirp_peek(P);
  bool ok = true;
  if (ch == 0) {
    if (lit->num_elements != 0) ok = kiln_mlirp_failf(P, "empty dense<> for a non-empty tensor");
  } else if (ch == '"') {
    ok = dense_hex(P, &c);
  } else if (ch == '[') {
    if (t->rank == 0) {
      ok = kiln_mlirp_failf(P, "dense literal nested deeper than its type");
    } else {
      ok = dense_list(P, &c, 0);
    }
  } else {
    ok = dense_scalar(P, &c, lit->num_elements > 0 ? 0 : -1, false, NULL);
    if (ok && lit->num_elements > 1) {
      splat_fill(lit->data, kiln_elem_type_storage_bytes(elem), lit->num_elements);
    }
  }
  if (ok && kiln_mlirp_peek(P) != 0) ok = kiln_mlirp_fail(P, "'>' to end dense<>");
  P->end = saved_end;
  if (!ok) return false;
  P->p = resume;
  *out = a;
  return true;
}

/* array<i64: 1, 2> after `array`. */
static bool dense_array_attr(kiln_mlirp_t *P, const kiln_mlir_attr_t **out) {
  if (!kiln_mlirp_expect(P, '<')) return false;
  kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_DENSE_ARRAY);
  if (a == NULL || !kiln_mlirp_type(P, &a->type)) return false;
  bool is_float = a->type->kind == KILN_MLIR_TYPE_FLOAT;
  if (!is_float && a->type->kind != KILN_MLIR_TYPE_INTEGER) {
    return kiln_mlirp_failf(P, "array<> of a type that is neither integer nor float");
  }
  ivec_t iv = {0};
  if (kiln_mlirp_accept(P, ':')) {
    do {
      int64_t x;
      if (kiln_mlirp_accept_kw(P, "true")) {
        x = 1;
      } else if (kiln_mlirp_accept_kw(P, "false")) {
        x = 0;
      } else if (!is_float && kiln_mlirp_accept(P, '?')) {
        x = KILN_MLIR_DYNAMIC; /* as `[?]` lists read (the printer writes them back so) */
      } else {
        kiln_mlirp_num_t num;
        const char *at = (kiln_mlirp_ws(P), P->p);
        if (!kiln_mlirp_number(P, &num)) return false;
        if (is_float) {
          double f = kiln_mlirp_num_f64(&num);
          memcpy(&x, &f, sizeof(x));
        } else {
          bool ovf = false;
          if (num.is_float) return kiln_mlirp_fail_at(P, at, "expected an integer");
          x = kiln_mlirp_num_i64(&num, &ovf);
          if (ovf) return kiln_mlirp_fail_at(P, at, "integer out of range");
        }
      }
      if (!ivec_push(P, &iv, x)) return false;
    } while (kiln_mlirp_accept(P, ','));
  }
  if (!kiln_mlirp_expect(P, '>')) return false;
  a->num_elements = iv.n;
  if (is_float) {
    a->floats = kiln_arena_alloc(P->a, sizeof(double) * (size_t)(iv.n ? iv.n : 1));
    if (a->floats == NULL) return kiln_mlirp_failf(P, "out of memory");
    if (iv.n) memcpy(a->floats, iv.v, sizeof(double) * (size_t)iv.n);
  } else {
    a->ints = iv.v ? iv.v : kiln_arena_alloc(P->a, sizeof(int64_t));
  }
  *out = a;
  return true;
}

/* ---- #dialect attributes ---- */

static const char *const kStructs[] = {
    "stablehlo.dot",
    "stablehlo.gather",
    "stablehlo.scatter",
    "stablehlo.conv",
    "stablehlo.channel_handle",
    "stablehlo.output_operand_alias",
    "stablehlo.result_accuracy",
    "stablehlo.type_extensions",
    "stablehlo.dot_algorithm",
    "chlo.ragged_dot",
    "stablehlo.bounds",
    "stablehlo.replica_group_mesh_axes",
    "stablehlo.axis_ref",
    "stablehlo.mesh",
    "stablehlo.mesh_axis",
};

static bool is_struct_name(const char *s, size_t n) {
  for (size_t i = 0; i < sizeof(kStructs) / sizeof(kStructs[0]); i++) {
    if (strlen(kStructs[i]) == n && memcmp(kStructs[i], s, n) == 0) return true;
  }
  return false;
}

typedef struct fvec {
  kiln_mlir_named_attr_t *v;
  int32_t n, cap;
} fvec_t;

static bool fvec_push(kiln_mlirp_t *P, fvec_t *fv, const char *name, const kiln_mlir_attr_t *a) {
  if (fv->n == fv->cap) {
    int32_t nc = fv->cap ? fv->cap * 2 : 8;
    kiln_mlir_named_attr_t *nv =
        kiln_arena_realloc(P->a, fv->v, sizeof(*nv) * (size_t)fv->cap, sizeof(*nv) * (size_t)nc);
    if (nv == NULL) return kiln_mlirp_failf(P, "out of memory");
    fv->v = nv;
    fv->cap = nc;
  }
  fv->v[fv->n].name = name;
  fv->v[fv->n].value = a;
  fv->n++;
  return true;
}

static bool is_type_keyword(const char *s, size_t n) {
  if (n >= 2 && (s[0] == 'i' || s[0] == 'f') && s[1] >= '0' && s[1] <= '9') return true;
  if (n >= 3 && (s[0] == 's' || s[0] == 'u') && s[1] == 'i' && s[2] >= '0' && s[2] <= '9') {
    return true;
  }
  static const char *const kw[] = {"bf16", "tf32", "index", "none", "tensor", "complex", "tuple"};
  for (size_t i = 0; i < sizeof(kw) / sizeof(kw[0]); i++) {
    if (strlen(kw[i]) == n && memcmp(kw[i], s, n) == 0) return true;
  }
  return false;
}

/* A #dialect.name struct attribute of the fields in fv (`dialect` must outlive the module). */
static bool struct_of(kiln_mlirp_t *P, const char *dialect, const fvec_t *fv,
                      const kiln_mlir_attr_t **out) {
  kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_STRUCT);
  if (a == NULL) return false;
  a->dialect = dialect;
  a->fields = fv->v;
  a->num_elements = fv->n;
  *out = a;
  return true;
}

/* `(pre)size`, an axis_ref's sub_axis_info, as the bytecode reader gives it: a
 * #stablehlo.sub_axis_info struct of pre_size and size. */
static bool sub_axis_info(kiln_mlirp_t *P, const kiln_mlir_attr_t **out) {
  int64_t pre, size;
  if (!kiln_mlirp_expect(P, '(') || !kiln_mlirp_integer(P, &pre) || !kiln_mlirp_expect(P, ')') ||
      !kiln_mlirp_integer(P, &size))
    return false;
  fvec_t fv = {0};
  if (!fvec_push(P, &fv, "pre_size", kiln_mlirp_i64_attr(P, pre, 64)) ||
      !fvec_push(P, &fv, "size", kiln_mlirp_i64_attr(P, size, 64)))
    return false;
  return struct_of(P, "stablehlo.sub_axis_info", &fv, out);
}

/* A struct field's value: an integer list, an integer, a float, a bool, a type, an enum
 * keyword (kept as ENUM named after the field) or any attribute. */
static bool field_value(kiln_mlirp_t *P, const char *dialect, const char *field,
                        const kiln_mlir_attr_t **out) {
  char c = kiln_mlirp_peek(P);
  if (c == '(' && strcmp(field, "sub_axis_info") == 0) return sub_axis_info(P, out);
  if (c == '[') {
    const char *save = P->p;
    P->p++;
    char d = kiln_mlirp_peek(P);
    P->p = save;
    if (d == ']' || d == '?' || d == '-' || (d >= '0' && d <= '9'))
      return kiln_mlirp_int_list(P, out);
    return kiln_mlirp_attr(P, out);
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    kiln_mlirp_num_t num;
    if (!kiln_mlirp_number(P, &num)) return false;
    if (num.is_float) {
      kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_FLOAT);
      if (a == NULL) return false;
      a->f = kiln_mlirp_num_f64(&num);
      a->type = kiln_mlirp_new_type(P, KILN_MLIR_TYPE_FLOAT);
      if (a->type) ((kiln_mlir_type_t *)a->type)->elem = KILN_F64;
      *out = a;
      return true;
    }
    bool ovf = false;
    int64_t v = kiln_mlirp_num_i64(&num, &ovf);
    *out = kiln_mlirp_i64_attr(P, v, 64);
    return *out != NULL;
  }
  if (kiln_mlirp_is_id_start(c)) {
    const char *save = P->p, *s;
    size_t n;
    kiln_mlirp_bare_id(P, &s, &n);
    if (is_type_keyword(s, n) || (n == 4 && memcmp(s, "true", 4) == 0) ||
        (n == 5 && memcmp(s, "false", 5) == 0) || (n == 5 && memcmp(s, "dense", 5) == 0) ||
        (n == 5 && memcmp(s, "array", 5) == 0)) {
      P->p = save;
      return kiln_mlirp_attr(P, out);
    }
    char *v = kiln_mlirp_dup(P, s, n);
    *out = kiln_mlirp_enum_attr(P, dialect, field, v);
    return *out != NULL;
  }
  return kiln_mlirp_attr(P, out);
}

bool kiln_mlirp_struct_body(kiln_mlirp_t *P, const char *name, const kiln_mlir_attr_t **out) {
  char dialect[32];
  size_t dl = strcspn(name, ".");
  snprintf(dialect, sizeof(dialect), "%.*s", (int)(dl < 31 ? dl : 31), name);
  fvec_t fv = {0};
  if (!kiln_mlirp_accept(P, '>')) {
    do {
      const char *s;
      size_t n;
      if (!kiln_mlirp_bare_id(P, &s, &n)) return kiln_mlirp_fail(P, "a field name");
      char *field = kiln_mlirp_dup(P, s, n);
      const kiln_mlir_attr_t *v;
      if (!kiln_mlirp_expect(P, '=') || !field_value(P, dialect, field, &v)) return false;
      if (!fvec_push(P, &fv, field, v)) return false;
    } while (kiln_mlirp_accept(P, ','));
    if (!kiln_mlirp_expect(P, '>')) return false;
  }
  return struct_of(P, kiln_arena_strdup(P->a, name), &fv, out);
}

/* `[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]` (at the cursor) as a #stablehlo.conv. */
bool kiln_mlirp_conv_dims_pretty(kiln_mlirp_t *P, const kiln_mlir_attr_t **out) {
  static const char kLetters[3][2] = {{'b', 'f'}, {'o', 'i'}, {'b', 'f'}};
  static const char *const kNames[3][3] = {
      {"input_batch_dimension", "input_feature_dimension", "input_spatial_dimensions"},
      {"kernel_output_feature_dimension", "kernel_input_feature_dimension",
       "kernel_spatial_dimensions"},
      {"output_batch_dimension", "output_feature_dimension", "output_spatial_dimensions"}};
  fvec_t fv = {0};
  for (int part = 0; part < 3; part++) {
    if (part == 1 && !kiln_mlirp_expect(P, 'x')) return false;
    if (part == 2 && !kiln_mlirp_expect_str(P, "->")) return false;
    if (!kiln_mlirp_expect(P, '[')) return false;
    int64_t first = -1, second = -1;
    int64_t spatial[64];
    bool seen[64] = {false};
    int32_t nsp = 0;
    int64_t pos = 0;
    if (!kiln_mlirp_accept(P, ']')) {
      do {
        kiln_mlirp_ws(P);
        const char *at = P->p;
        char c = P->p < P->end ? *P->p : 0;
        if (c >= '0' && c <= '9') {
          int64_t k;
          if (!kiln_mlirp_integer(P, &k)) return false;
          if (k < 0 || k >= 64 || seen[k])
            return kiln_mlirp_fail_at(P, at, "bad spatial dimension");
          seen[k] = true;
          spatial[k] = pos;
          nsp = nsp > k + 1 ? nsp : (int32_t)k + 1;
        } else if (c == kLetters[part][0] || c == kLetters[part][1]) {
          P->p++;
          int64_t *slot = c == kLetters[part][0] ? &first : &second;
          if (*slot >= 0) return kiln_mlirp_fail_at(P, at, "'%c' given twice", c);
          *slot = pos;
        } else {
          return kiln_mlirp_fail(P, "a convolution dimension letter or number");
        }
        pos++;
      } while (kiln_mlirp_accept(P, ','));
      if (!kiln_mlirp_expect(P, ']')) return false;
    }
    for (int32_t k = 0; k < nsp; k++) {
      if (!seen[k]) return kiln_mlirp_failf(P, "spatial dimension %d missing", k);
    }
    if (first < 0 || second < 0) return kiln_mlirp_failf(P, "convolution dimensions incomplete");
    if (!fvec_push(P, &fv, kNames[part][0], kiln_mlirp_i64_attr(P, first, 64))) return false;
    if (!fvec_push(P, &fv, kNames[part][1], kiln_mlirp_i64_attr(P, second, 64))) return false;
    if (!fvec_push(P, &fv, kNames[part][2], kiln_mlirp_dense_i64(P, spatial, nsp))) return false;
  }
  /* the spec's field order: input_*, kernel_input_feature, kernel_output_feature, ... */
  kiln_mlir_named_attr_t tmp = fv.v[3];
  fv.v[3] = fv.v[4];
  fv.v[4] = tmp;
  return struct_of(P, "stablehlo.conv", &fv, out);
}

static bool other_text(kiln_mlirp_t *P, const char *start, const kiln_mlir_attr_t **out) {
  kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_OTHER);
  if (a == NULL) return false;
  a->str = kiln_mlirp_dup(P, start, (size_t)(P->p - start));
  a->str_len = (size_t)(P->p - start);
  *out = a;
  return true;
}

/* `#...` at the cursor. */
static bool hash_attr(kiln_mlirp_t *P, const kiln_mlir_attr_t **out) {
  const char *start = P->p;
  P->p++;
  const char *s;
  size_t n;
  if (!kiln_mlirp_bare_id(P, &s, &n)) return kiln_mlirp_fail(P, "an attribute name after '#'");
  bool angle = P->p < P->end && *P->p == '<';
  if (!angle) {
    kiln_mlirp_sym_t *al = kiln_mlirp_lookup(&P->aliases, start, (size_t)(P->p - start));
    if (al && al->attr) {
      *out = al->attr;
      return true;
    }
    if (memchr(s, '.', n) == NULL) {
      return kiln_mlirp_fail_at(P, start, "undefined attribute alias '%.*s'", (int)(P->p - start),
                                start);
    }
    return other_text(P, start, out);
  }
  char *name = kiln_mlirp_dup(P, s, n);
  const char *dot = memchr(s, '.', n);
  if (dot == NULL) {
    /* #dialect<enum_name VALUE> */
    const char *save = P->p;
    P->p++;
    const char *e1, *e2;
    size_t n1, n2;
    if (kiln_mlirp_bare_id(P, &e1, &n1) && kiln_mlirp_bare_id(P, &e2, &n2) &&
        kiln_mlirp_accept(P, '>')) {
      *out = kiln_mlirp_enum_attr(P, name, kiln_mlirp_dup(P, e1, n1), kiln_mlirp_dup(P, e2, n2));
      return *out != NULL;
    }
    if (P->err) return false;
    P->p = save;
    return kiln_mlirp_skip_balanced(P) && other_text(P, start, out);
  }
  if (n == 16 && memcmp(s, "stablehlo.bounds", 16) == 0) {
    /* the pretty form of a tensor's #stablehlo.type_extensions */
    P->p++;
    ivec_t iv = {0};
    if (!kiln_mlirp_accept(P, '>')) {
      do {
        int64_t x;
        if (kiln_mlirp_accept(P, '?')) {
          x = KILN_MLIR_DYNAMIC;
        } else if (!kiln_mlirp_integer(P, &x)) {
          return false;
        }
        if (!ivec_push(P, &iv, x)) return false;
      } while (kiln_mlirp_accept(P, ','));
      if (!kiln_mlirp_expect(P, '>')) return false;
    }
    kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_STRUCT);
    if (a == NULL) return false;
    a->dialect = "stablehlo.type_extensions";
    a->fields = kiln_arena_alloc(P->a, sizeof(*a->fields));
    if (a->fields == NULL) return kiln_mlirp_failf(P, "out of memory");
    a->fields[0].name = "bounds";
    a->fields[0].value = kiln_mlirp_dense_i64(P, iv.v, iv.n);
    a->num_elements = 1;
    *out = a;
    return a->fields[0].value != NULL;
  }
  if (n == 14 && memcmp(s, "stablehlo.conv", 14) == 0) {
    P->p++;
    if (kiln_mlirp_accept_kw(P, "raw")) return kiln_mlirp_struct_body(P, name, out);
    return kiln_mlirp_conv_dims_pretty(P, out) && kiln_mlirp_expect(P, '>');
  }
  if (is_struct_name(s, n)) {
    P->p++;
    return kiln_mlirp_struct_body(P, name, out);
  }
  /* #dialect.enum_name<VALUE> */
  const char *save = P->p;
  P->p++;
  const char *e1;
  size_t n1;
  if (kiln_mlirp_bare_id(P, &e1, &n1) && kiln_mlirp_accept(P, '>')) {
    char *dialect = kiln_mlirp_dup(P, s, (size_t)(dot - s));
    *out = kiln_mlirp_enum_attr(P, dialect, kiln_mlirp_dup(P, dot + 1, (size_t)(s + n - dot - 1)),
                                kiln_mlirp_dup(P, e1, n1));
    return *out != NULL;
  }
  if (P->err) return false;
  P->p = save;
  return kiln_mlirp_skip_balanced(P) && other_text(P, start, out);
}

bool kiln_mlirp_location(kiln_mlirp_t *P, const char **out) {
  if (!kiln_mlirp_peek_kw(P, "loc")) return false;
  const char *save = P->p;
  P->p += 3;
  if (kiln_mlirp_peek(P) != '(') {
    P->p = save;
    return false;
  }
  const char *inner = P->p + 1;
  if (!kiln_mlirp_skip_balanced(P)) return false;
  *out = kiln_mlirp_dup(P, inner, (size_t)(P->p - 1 - inner));
  return true;
}

static bool symbol_ref(kiln_mlirp_t *P, const kiln_mlir_attr_t **out) {
  kiln_strbuf_t b = {0};
  do {
    if (!kiln_mlirp_expect(P, '@')) {
      kiln_strbuf_free(&b);
      return false;
    }
    if (b.len) kiln_strbuf_append(&b, "::");
    if (P->p < P->end && *P->p == '"') {
      const char *s;
      size_t n;
      if (!kiln_mlirp_name_string(P, &s, &n)) {
        kiln_strbuf_free(&b);
        return false;
      }
      kiln_strbuf_append_n(&b, s, n);
    } else {
      const char *q = P->p;
      while (q < P->end && (kiln_mlirp_is_id_char(*q) || *q == '-')) q++;
      if (q == P->p) {
        kiln_strbuf_free(&b);
        return kiln_mlirp_fail(P, "a symbol name");
      }
      kiln_strbuf_append_n(&b, P->p, (size_t)(q - P->p));
      P->p = q;
    }
  } while (P->p + 1 < P->end && P->p[0] == ':' && P->p[1] == ':' && (P->p += 2));
  kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_SYMBOL_REF);
  if (a) {
    a->str = kiln_mlirp_dup(P, b.data, b.len);
    a->str_len = b.len;
  }
  kiln_strbuf_free(&b);
  *out = a;
  return a != NULL;
}

static bool attr_inner(kiln_mlirp_t *P, const kiln_mlir_attr_t **out) {
  char c = kiln_mlirp_peek(P);
  const char *start = P->p;
  if (c == '[') {
    P->p++;
    const kiln_mlir_attr_t *small[16];
    const kiln_mlir_attr_t **items = small;
    int32_t num = 0, cap = 16;
    if (!kiln_mlirp_accept(P, ']')) {
      do {
        const kiln_mlir_attr_t *e;
        if (!kiln_mlirp_attr(P, &e)) return false;
        if (num == cap) {
          const kiln_mlir_attr_t **ni = kiln_arena_alloc(P->a, sizeof(*ni) * (size_t)cap * 2);
          if (ni == NULL) return kiln_mlirp_failf(P, "out of memory");
          memcpy(ni, items, sizeof(*ni) * (size_t)num);
          items = ni;
          cap *= 2;
        }
        items[num++] = e;
      } while (kiln_mlirp_accept(P, ','));
      if (!kiln_mlirp_expect(P, ']')) return false;
    }
    kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_ARRAY);
    if (a == NULL) return false;
    a->elements = kiln_arena_alloc(P->a, sizeof(*a->elements) * (size_t)(num ? num : 1));
    if (a->elements == NULL) return kiln_mlirp_failf(P, "out of memory");
    memcpy(a->elements, items, sizeof(*items) * (size_t)num);
    a->num_elements = num;
    *out = a;
    return true;
  }
  if (c == '{') {
    kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_DICTIONARY);
    if (a == NULL || !kiln_mlirp_attr_dict(P, &a->fields, &a->num_elements)) return false;
    *out = a;
    return true;
  }
  if (c == '"') {
    kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_STRING);
    if (a == NULL || !kiln_mlirp_string(P, &a->str, &a->str_len)) return false;
    if (kiln_mlirp_peek(P) == ':' && kiln_mlirp_peek2(P) != ':') {
      P->p++;
      if (!kiln_mlirp_type(P, &a->type)) return false;
    }
    *out = a;
    return true;
  }
  if (c == '@') return symbol_ref(P, out);
  if (c == '#') return hash_attr(P, out);
  if (c == '-' || (c >= '0' && c <= '9')) {
    kiln_mlirp_num_t num;
    if (!kiln_mlirp_number(P, &num)) return false;
    const kiln_mlir_type_t *t = NULL;
    if (kiln_mlirp_peek(P) == ':' && kiln_mlirp_peek2(P) != ':') {
      P->p++;
      if (!kiln_mlirp_type(P, &t)) return false;
    }
    bool is_float = t ? t->kind == KILN_MLIR_TYPE_FLOAT : num.is_float;
    kiln_mlir_attr_t *a =
        kiln_mlirp_new_attr(P, is_float ? KILN_MLIR_ATTR_FLOAT : KILN_MLIR_ATTR_INTEGER);
    if (a == NULL) return false;
    if (t == NULL) {
      t = is_float ? NULL : kiln_mlirp_int_type(P, 64, KILN_MLIR_SIGNLESS);
      if (is_float) {
        kiln_mlir_type_t *ft = kiln_mlirp_new_type(P, KILN_MLIR_TYPE_FLOAT);
        if (ft) ft->elem = KILN_F64;
        t = ft;
      }
    }
    a->type = t;
    if (is_float) {
      if (num.is_hex) {
        /* the float's bits in its own format */
        kiln_shape_t *sh = kiln_shape_make_scalar(P->a, t->elem);
        kiln_literal_t *l = sh ? kiln_literal_make(P->a, sh) : NULL;
        if (l == NULL) return kiln_mlirp_failf(P, "out of memory");
        set_bits(l, t->elem, 0, kiln_mlirp_num_u64bits(&num));
        a->f = kiln_literal_get_f64(l, 0);
      } else {
        a->f = kiln_mlirp_num_f64(&num);
      }
    } else {
      if (num.is_float) return kiln_mlirp_fail_at(P, start, "expected an integer, found a float");
      if (t->kind != KILN_MLIR_TYPE_INTEGER && t->kind != KILN_MLIR_TYPE_INDEX) {
        return kiln_mlirp_fail_at(P, start, "a number needs an integer or float type");
      }
      bool ovf = false;
      a->i = kiln_mlirp_num_i64(&num, &ovf);
      if (ovf) return kiln_mlirp_fail_at(P, start, "integer out of range");
    }
    *out = a;
    return true;
  }
  if (kiln_mlirp_is_id_start(c)) {
    const char *save = P->p, *s;
    size_t n;
    kiln_mlirp_bare_id(P, &s, &n);
#define IS(kw) (n == sizeof(kw) - 1 && memcmp(s, kw, n) == 0)
    if (IS("true") || IS("false")) {
      kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_BOOL);
      if (a == NULL) return false;
      a->b = IS("true");
      *out = a;
      return true;
    }
    if (IS("unit")) {
      *out = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_UNIT);
      return *out != NULL;
    }
    if (IS("dense")) return dense_attr(P, start, out);
    if (IS("array")) return dense_array_attr(P, out);
    if (IS("affine_map") || IS("affine_set") || IS("dense_resource") || IS("sparse") ||
        IS("strided") || IS("opaque") || IS("loc")) {
      if (kiln_mlirp_peek(P) != '<' && kiln_mlirp_peek(P) != '(') return kiln_mlirp_fail(P, "'<'");
      if (!kiln_mlirp_skip_balanced(P)) return false;
      const kiln_mlir_type_t *t = NULL;
      if (!IS("loc") && kiln_mlirp_peek(P) == ':' && kiln_mlirp_peek2(P) != ':') {
        P->p++;
        if (!kiln_mlirp_type(P, &t)) return false;
      }
      if (!other_text(P, start, out)) return false;
      ((kiln_mlir_attr_t *)*out)->type = t; /* e.g. dense_resource<blob> : tensor<4xf32> */
      if (IS("dense_resource") && t != NULL) {
        if (P->num_dense_resources == P->dense_resources_cap) {
          P->dense_resources_cap = P->dense_resources_cap ? 2 * P->dense_resources_cap : 8;
          P->dense_resources = kiln_realloc(
              P->dense_resources, (size_t)P->dense_resources_cap * sizeof(*P->dense_resources));
        }
        P->dense_resources[P->num_dense_resources++] = (kiln_mlir_attr_t *)*out;
      }
      return true;
    }
    if (IS("distinct")) {
      if (kiln_mlirp_peek(P) != '[' || !kiln_mlirp_skip_balanced(P))
        return kiln_mlirp_fail(P, "'['");
      if (kiln_mlirp_peek(P) != '<' || !kiln_mlirp_skip_balanced(P))
        return kiln_mlirp_fail(P, "'<'");
      return other_text(P, start, out);
    }
#undef IS
    P->p = save;
  }
  /* a type used as an attribute */
  kiln_mlir_attr_t *a = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_TYPE);
  if (a == NULL) return false;
  if (!kiln_mlirp_type(P, &a->type)) {
    if (P->err && c != 0 && !kiln_mlirp_is_id_start(c) && c != '(' && c != '!') {
      kiln_status_free(P->err);
      P->err = NULL;
      P->p = start;
      return kiln_mlirp_fail(P, "an attribute");
    }
    return false;
  }
  *out = a;
  return true;
}

bool kiln_mlirp_attr(kiln_mlirp_t *P, const kiln_mlir_attr_t **out) {
  if (P->err) return false;
  if (++P->depth > KILN_MLIRP_MAX_DEPTH) return kiln_mlirp_failf(P, "attributes nested too deeply");
  bool ok = attr_inner(P, out);
  P->depth--;
  return ok && !P->err;
}

bool kiln_mlirp_attr_dict(kiln_mlirp_t *P, kiln_mlir_named_attr_t **out, int32_t *n) {
  if (!kiln_mlirp_expect(P, '{')) return false;
  fvec_t fv = {0};
  if (!kiln_mlirp_accept(P, '}')) {
    do {
      const char *name;
      size_t len;
      if (kiln_mlirp_peek(P) == '"') {
        if (!kiln_mlirp_name_string(P, &name, &len)) return false;
      } else if (kiln_mlirp_bare_id(P, &name, &len)) {
        name = kiln_mlirp_dup(P, name, len);
      } else {
        return kiln_mlirp_fail(P, "an attribute name");
      }
      const kiln_mlir_attr_t *v = NULL;
      if (kiln_mlirp_accept(P, '=')) {
        if (!kiln_mlirp_attr(P, &v)) return false;
      } else {
        v = kiln_mlirp_new_attr(P, KILN_MLIR_ATTR_UNIT);
        if (v == NULL) return false;
      }
      if (!fvec_push(P, &fv, name, v)) return false;
    } while (kiln_mlirp_accept(P, ','));
    if (!kiln_mlirp_expect(P, '}')) return false;
  }
  *out = fv.v;
  *n = fv.n;
  return true;
}

/* ---- dense_resource and the file's dialect_resources ---- */

/* A resource key: a bare identifier or a string (in place when it has no escapes). */
static bool resource_key(kiln_mlirp_t *P, const char **s, size_t *n) {
  if (kiln_mlirp_peek(P) == '"') return kiln_mlirp_string_span(P, s, n);
  if (!kiln_mlirp_bare_id(P, s, n)) return kiln_mlirp_fail(P, "a resource key");
  return true;
}

static bool add_blob(kiln_mlirp_t *P, const char *key, size_t klen, const char *hex, size_t hlen) {
  if (P->num_blobs == P->blobs_cap) {
    int32_t nc = P->blobs_cap ? 2 * P->blobs_cap : 8;
    P->blob_keys = kiln_realloc(P->blob_keys, (size_t)nc * sizeof(char *));
    P->blob_hex = kiln_realloc(P->blob_hex, (size_t)nc * sizeof(char *));
    P->blob_key_lens = kiln_realloc(P->blob_key_lens, (size_t)nc * sizeof(size_t));
    P->blob_hex_lens = kiln_realloc(P->blob_hex_lens, (size_t)nc * sizeof(size_t));
    P->blobs_cap = nc;
  }
  int32_t i = P->num_blobs++;
  P->blob_keys[i] = key;
  P->blob_key_lens[i] = klen;
  P->blob_hex[i] = hex;
  P->blob_hex_lens[i] = hlen;
  return true;
}

bool kiln_mlirp_file_metadata(kiln_mlirp_t *P) {
  P->p += 3; /* {-# */
  while (!P->err) {
    kiln_mlirp_ws(P);
    if (P->end - P->p >= 3 && memcmp(P->p, "#-}", 3) == 0) {
      P->p += 3;
      return true;
    }
    const char *id;
    size_t idn;
    if (!kiln_mlirp_bare_id(P, &id, &idn)) return kiln_mlirp_fail(P, "'#-}' or a section name");
    if (!kiln_mlirp_expect(P, ':')) return false;
    if (idn != strlen("dialect_resources") || memcmp(id, "dialect_resources", idn) != 0) {
      if (kiln_mlirp_peek(P) != '{') return kiln_mlirp_fail(P, "'{'");
      if (!kiln_mlirp_skip_balanced(P)) return false;
    } else {
      if (!kiln_mlirp_expect(P, '{')) return false;
      while (!kiln_mlirp_accept(P, '}')) {
        const char *d;
        size_t dn;
        if (!resource_key(P, &d, &dn) || !kiln_mlirp_expect(P, ':')) return false;
        bool builtin = dn == 7 && memcmp(d, "builtin", 7) == 0;
        if (!builtin) {
          if (kiln_mlirp_peek(P) != '{') return kiln_mlirp_fail(P, "'{'");
          if (!kiln_mlirp_skip_balanced(P)) return false;
        } else {
          if (!kiln_mlirp_expect(P, '{')) return false;
          while (!kiln_mlirp_accept(P, '}')) {
            const char *k, *v;
            size_t kn, vn;
            if (!resource_key(P, &k, &kn) || !kiln_mlirp_expect(P, ':')) return false;
            if (kiln_mlirp_peek(P) == '"') {
              if (!kiln_mlirp_string_span(P, &v, &vn) || !add_blob(P, k, kn, v, vn)) return false;
            } else if (!kiln_mlirp_accept_kw(P, "true") && !kiln_mlirp_accept_kw(P, "false")) {
              return kiln_mlirp_fail(P, "a resource value");
            }
            if (!kiln_mlirp_accept(P, ',') && kiln_mlirp_peek(P) != '}')
              return kiln_mlirp_fail(P, "',' or '}'");
          }
        }
        if (!kiln_mlirp_accept(P, ',') && kiln_mlirp_peek(P) != '}')
          return kiln_mlirp_fail(P, "',' or '}'");
      }
    }
    if (!kiln_mlirp_accept(P, ',') && kiln_mlirp_peek(P) != '#')
      return kiln_mlirp_fail(P, "',' or '#-}'");
  }
  return false;
}

bool kiln_mlirp_resolve_dense_resources(kiln_mlirp_t *P) {
  for (int32_t i = 0; i < P->num_dense_resources && !P->err; i++) {
    kiln_mlir_attr_t *a = P->dense_resources[i];
    const char *k = a->str + strlen("dense_resource"), *ke = k[0] == '<' ? strchr(k, '>') : NULL;
    if (ke == NULL) continue; /* `dense_resource(...)`: not a resource reference */
    size_t kn = (size_t)(ke - ++k);
    if (kn >= 2 && k[0] == '"') k++, kn -= 2;
    int32_t b = 0;
    while (b < P->num_blobs && (P->blob_key_lens[b] != kn || memcmp(P->blob_keys[b], k, kn) != 0))
      b++;
    kiln_elem_type_t elem;
    const kiln_mlir_type_t *t = a->type;
    if (b == P->num_blobs || t->kind != KILN_MLIR_TYPE_TENSOR || t->unranked ||
        !kiln_mlirp_elem_of(t->element, &elem)) {
      continue; /* no blob (elided) or a type kiln does not model: stays text */
    }
    const char *hex = P->blob_hex[b];
    size_t hn = P->blob_hex_lens[b];
    kiln_shape_t *shape = kiln_shape_make_array(P->a, elem, t->rank, t->dims);
    if (shape == NULL) return kiln_mlirp_fail_at(P, hex, "dense_resource of a dynamic shape");
    size_t need = (size_t)kiln_shape_byte_size(shape);
    if (hn < 10 || hex[0] != '0' || (hex[1] != 'x' && hex[1] != 'X') || (hn - 10) != 2 * need) {
      return kiln_mlirp_fail_at(P, hex,
                                "resource '%.*s' must be \"0x\", a 4-byte alignment and %zu "
                                "bytes of data for %s",
                                (int)kn, k, need, a->str);
    }
    kiln_literal_t *lit = kiln_literal_make(P->a, shape);
    if (lit == NULL) return kiln_mlirp_failf(P, "out of memory");
    unsigned char *d = lit->data;
    if (!hex_bytes(hex + 10, need, d))
      return kiln_mlirp_fail_at(P, hex, "bad hex digit in resource '%.*s'", (int)kn, k);
    for (size_t j = 0; elem == KILN_PRED && j < need; j++) d[j] = d[j] != 0;
    a->kind = KILN_MLIR_ATTR_DENSE_ELEMENTS;
    a->literal = lit;
  }
  return !P->err;
}
