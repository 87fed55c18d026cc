/* Attribute and type entries of MLIR bytecode -> generic attributes and types: the builtin
 * dialect's encodings (MLIR's BuiltinDialectBytecode codes) and the VHLO dialect's (the codes
 * of StableHLO's VhloBytecode.cpp), decoded straight into their current StableHLO / builtin
 * meaning: !vhlo.f32_v1 is f32, #vhlo.integer_v1<1 : i64> is 1 : i64, #vhlo<precision_v1 HIGH>
 * is #stablehlo<precision HIGH>, #vhlo.tensor_v1<dense<..>> is dense<..> with its literal.
 * Entries are decoded once, on first use; a cycle or a nesting deeper than
 * KILN_BC_MAX_DEPTH is an error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/frontend/mlir_bytecode_internal.h"
#include "compiler/hlo/literal.h"
#include "compiler/hlo/numeric.h"

static kiln_status decode_attr(kiln_bc_reader_t *r, const char *dialect,
                               const kiln_mlir_attr_t **out);
static kiln_status decode_type(kiln_bc_reader_t *r, const char *dialect,
                               const kiln_mlir_type_t **out);

static kiln_status resolve(kiln_bc_t *bc, bool is_type, uint64_t index, const void **out) {
  kiln_bc_entry_t *e = is_type ? bc->types : bc->attrs;
  uint64_t n = is_type ? bc->num_types : bc->num_attrs;
  const char *what = is_type ? "type" : "attribute";
  kiln_bc_reader_t r = {bc, bc->sec_off[KILN_BC_SEC_ATTR_TYPE],
                        bc->sec_off[KILN_BC_SEC_ATTR_TYPE] + bc->sec_len[KILN_BC_SEC_ATTR_TYPE],
                        "attribute/type"};
  if (index >= n)
    return kiln_bc_error(&r, "%s index %llu out of range (%llu %ss)", what,
                         (unsigned long long)index, (unsigned long long)n, what);
  kiln_bc_entry_t *en = &e[index];
  if (en->state == 2) {
    *out = en->value;
    return KILN_STATUS_OK;
  }
  r.pos = en->off;
  r.end = en->off + en->len;
  if (en->state == 1)
    return kiln_bc_error(&r, "%s %llu refers to itself", what, (unsigned long long)index);
  if (bc->depth >= KILN_BC_MAX_DEPTH)
    return kiln_bc_error(&r, "attributes/types nested deeper than %d", KILN_BC_MAX_DEPTH);
  en->state = 1;
  bc->depth++;
  const char *dialect = bc->dialects[en->dialect];
  kiln_status st = KILN_STATUS_OK;
  if (!en->custom) {
    const uint8_t *nul = memchr(bc->data + r.pos, 0, en->len);
    if (nul == NULL) {
      st = kiln_bc_error(&r, "textual %s entry lacks its NUL", what);
    } else {
      const char *text = kiln_arena_strndup(bc->arena, (const char *)bc->data + r.pos,
                                            (size_t)(nul - (bc->data + r.pos)));
      r.pos = (size_t)(nul - bc->data) + 1;
      if (is_type) {
        kiln_mlir_type_t *t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_OTHER);
        t->text = text;
        en->value = t;
      } else {
        kiln_mlir_attr_t *a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_OTHER);
        a->str = text;
        en->value = a;
      }
    }
  } else if (is_type) {
    st = decode_type(&r, dialect, (const kiln_mlir_type_t **)&en->value);
  } else {
    st = decode_attr(&r, dialect, (const kiln_mlir_attr_t **)&en->value);
  }
  bc->depth--;
  if (kiln_status_is_ok(st) && r.pos != r.end)
    st = kiln_bc_error(&r, "%zu trailing bytes after %s %llu", r.end - r.pos, what,
                       (unsigned long long)index);
  if (!kiln_status_is_ok(st)) {
    en->state = 0;
    return st;
  }
  en->state = 2;
  *out = en->value;
  return KILN_STATUS_OK;
}

kiln_status kiln_bc_attr(kiln_bc_t *bc, uint64_t index, const kiln_mlir_attr_t **out) {
  return resolve(bc, false, index, (const void **)out);
}
kiln_status kiln_bc_type(kiln_bc_t *bc, uint64_t index, const kiln_mlir_type_t **out) {
  return resolve(bc, true, index, (const void **)out);
}
kiln_status kiln_bc_read_attr(kiln_bc_reader_t *r, const kiln_mlir_attr_t **out) {
  uint64_t i;
  size_t at = r->pos;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &i));
  if (i >= r->bc->num_attrs) {
    r->pos = at;
    return kiln_bc_error(r, "attribute index %llu out of range (%llu attributes)",
                         (unsigned long long)i, (unsigned long long)r->bc->num_attrs);
  }
  return kiln_bc_attr(r->bc, i, out);
}
kiln_status kiln_bc_read_type(kiln_bc_reader_t *r, const kiln_mlir_type_t **out) {
  uint64_t i;
  size_t at = r->pos;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &i));
  if (i >= r->bc->num_types) {
    r->pos = at;
    return kiln_bc_error(r, "type index %llu out of range (%llu types)", (unsigned long long)i,
                         (unsigned long long)r->bc->num_types);
  }
  return kiln_bc_type(r->bc, i, out);
}

/* ---- helpers ---- */

static kiln_status read_types(kiln_bc_reader_t *r, int32_t *n, const kiln_mlir_type_t ***out) {
  uint64_t c;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(r, 1, &c));
  *n = (int32_t)c;
  *out = kiln_arena_alloc(r->bc->arena, (c ? c : 1) * sizeof(**out));
  for (uint64_t i = 0; i < c; i++) KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &(*out)[i]));
  return KILN_STATUS_OK;
}

static kiln_status read_svarints(kiln_bc_reader_t *r, int32_t *n, int64_t **out) {
  uint64_t c;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(r, 1, &c));
  *n = (int32_t)c;
  *out = kiln_arena_alloc(r->bc->arena, (c ? c : 1) * sizeof(int64_t));
  for (uint64_t i = 0; i < c; i++) KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_svarint(r, &(*out)[i]));
  return KILN_STATUS_OK;
}

/* An APInt of known width: one byte up to 8 bits, a zigzag varint up to 64. */
static kiln_status read_apint(kiln_bc_reader_t *r, int width, uint64_t *out) {
  *out = 0;
  if (width <= 8) {
    uint8_t b;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_byte(r, &b));
    *out = b;
    return KILN_STATUS_OK;
  }
  if (width <= 64) {
    int64_t v;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_svarint(r, &v));
    *out = (uint64_t)v;
    return KILN_STATUS_OK;
  }
  return kiln_bc_error(r, "integers of %d bits are not supported", width);
}

static int float_bits(const kiln_mlir_type_t *t) {
  if (t->kind != KILN_MLIR_TYPE_FLOAT) return 0;
  return kiln_elem_type_bits(t->elem);
}

static double bits_to_double(kiln_elem_type_t e, uint64_t bits) {
  if (e == KILN_F64) {
    double d;
    memcpy(&d, &bits, 8);
    return d;
  }
  if (e == KILN_F32) {
    uint32_t u = (uint32_t)bits;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  return kiln_narrow_to_f64(e, (uint32_t)bits);
}

static kiln_status read_float_value(kiln_bc_reader_t *r, const kiln_mlir_type_t *t, double *out) {
  int bits = float_bits(t);
  if (bits == 0) return kiln_bc_error(r, "float attribute of a non-float type");
  uint64_t v;
  KILN_RETURN_IF_ERROR_PLAIN(read_apint(r, bits, &v));
  if (bits < 64) v &= (UINT64_C(1) << bits) - 1;
  *out = bits_to_double(t->elem, v);
  return KILN_STATUS_OK;
}

static int64_t sign_extend(uint64_t v, int width) {
  if (width >= 64 || width <= 0) return (int64_t)v;
  v &= (UINT64_C(1) << width) - 1;
  if (v & (UINT64_C(1) << (width - 1))) v |= ~((UINT64_C(1) << width) - 1);
  return (int64_t)v;
}

static kiln_status read_int_value(kiln_bc_reader_t *r, const kiln_mlir_type_t *t, int64_t *out) {
  int width;
  if (t->kind == KILN_MLIR_TYPE_INDEX) {
    width = 64;
  } else if (t->kind == KILN_MLIR_TYPE_INTEGER) {
    width = t->width;
  } else {
    return kiln_bc_error(r, "integer attribute of a non-integer type");
  }
  uint64_t v;
  KILN_RETURN_IF_ERROR_PLAIN(read_apint(r, width, &v));
  if (t->kind == KILN_MLIR_TYPE_INTEGER && t->signedness == KILN_MLIR_UNSIGNED) {
    *out = width >= 64 ? (int64_t)v : (int64_t)(v & ((UINT64_C(1) << width) - 1));
  } else if (width == 1) {
    *out = (int64_t)(v & 1);
  } else {
    *out = sign_extend(v, width);
  }
  return KILN_STATUS_OK;
}

static const kiln_mlir_type_t *float_type(kiln_bc_t *bc, kiln_elem_type_t e) {
  kiln_mlir_type_t *t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_FLOAT);
  t->elem = e;
  return t;
}

static const kiln_mlir_type_t *int_type(kiln_bc_t *bc, int width, kiln_mlir_signedness_t s) {
  kiln_mlir_type_t *t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_INTEGER);
  t->width = width;
  t->signedness = s;
  return t;
}

/* kiln's element type for a tensor element type; false when there is none. */
static bool elem_of(const kiln_mlir_type_t *t, kiln_elem_type_t *out) {
  switch (t->kind) {
    case KILN_MLIR_TYPE_FLOAT:
      *out = t->elem;
      return true;
    case KILN_MLIR_TYPE_INDEX:
      *out = KILN_S64;
      return true;
    case KILN_MLIR_TYPE_COMPLEX:
      if (t->element->kind != KILN_MLIR_TYPE_FLOAT) return false;
      if (t->element->elem == KILN_F32)
        *out = KILN_C64;
      else if (t->element->elem == KILN_F64)
        *out = KILN_C128;
      else
        return false;
      return true;
    case KILN_MLIR_TYPE_INTEGER: {
      bool u = t->signedness == KILN_MLIR_UNSIGNED;
      switch (t->width) {
        case 1:
          *out = KILN_PRED;
          return true;
        case 2:
          *out = u ? KILN_U2 : KILN_S2;
          return true;
        case 4:
          *out = u ? KILN_U4 : KILN_S4;
          return true;
        case 8:
          *out = u ? KILN_U8 : KILN_S8;
          return true;
        case 16:
          *out = u ? KILN_U16 : KILN_S16;
          return true;
        case 32:
          *out = u ? KILN_U32 : KILN_S32;
          return true;
        case 64:
          *out = u ? KILN_U64 : KILN_S64;
          return true;
        default:
          return false;
      }
    }
    default:
      return false;
  }
}

/* Bytes per element in MLIR's raw dense storage (i1 and bools handled apart). */
static size_t mlir_elem_bytes(kiln_elem_type_t e) {
  if (kiln_elem_type_is_complex(e)) return (size_t)kiln_elem_type_bits(e) / 8;
  int bits = kiln_elem_type_bits(e);
  return (size_t)((bits + 7) / 8);
}

/* A dense elements attribute of `type` from MLIR's raw buffer (splat: one element). */
static kiln_status make_dense(kiln_bc_reader_t *r, const kiln_mlir_type_t *type, const uint8_t *raw,
                              size_t len, const kiln_mlir_attr_t **out) {
  kiln_bc_t *bc = r->bc;
  if (type->kind != KILN_MLIR_TYPE_TENSOR || type->unranked)
    return kiln_bc_error(r, "dense elements need a ranked tensor type");
  kiln_elem_type_t e;
  if (!elem_of(type->element, &e))
    return kiln_bc_error(r, "dense elements of an element type kiln does not model");
  int64_t n = 1;
  for (int32_t i = 0; i < type->rank; i++) {
    if (type->dims[i] < 0) return kiln_bc_error(r, "dense elements of a dynamic shape");
    if (n > 0 && type->dims[i] > (INT64_C(1) << 40) / n) {
      return kiln_bc_error(r, "dense elements of %lld x %lld elements are too many", (long long)n,
                           (long long)type->dims[i]);
    }
    n *= type->dims[i];
  }
  if (n > (INT64_C(1) << 40)) return kiln_bc_error(r, "too many dense elements");
  size_t kb = kiln_elem_type_storage_bytes(e);
  /* Splats are expanded into the literal: bound what a few bytes of input can ask for. */
  if ((uint64_t)n * kb > KILN_BC_MAX_LITERAL_BYTES) {
    return kiln_status_annotate(
        kiln_status_make(
            KILN_UNIMPLEMENTED,
            "a constant of %lld elements (%llu bytes) is larger than the %d MiB kiln expands",
            (long long)n, (unsigned long long)((uint64_t)n * kb), KILN_BC_MAX_LITERAL_BYTES >> 20),
        "MLIR bytecode: %s section, offset %zu", r->what, r->pos);
  }
  kiln_shape_t *shape = kiln_shape_make_array(bc->arena, e, type->rank, type->dims);
  kiln_literal_t *lit = kiln_literal_make(bc->arena, shape);
  uint8_t *dst = lit->data;
  if (e == KILN_PRED) {
    /* VHLO writes booleans bit-packed (LSB first), a splat as one 0xFF / 0x00 byte; MLIR's
     * own buffers hold one byte per element or one for a splat. */
    size_t packed = (size_t)((n + 7) / 8);
    if (len == 1 && raw[0] == 0xFF && n > 1) {
      for (int64_t i = 0; i < n; i++) dst[i] = 1;
    } else if (len == packed && len != (size_t)n) {
      for (int64_t i = 0; i < n; i++) dst[i] = (raw[i / 8] >> (i % 8)) & 1;
    } else if (len == (size_t)n) {
      for (int64_t i = 0; i < n; i++) dst[i] = raw[i] != 0;
    } else if (len == 1) {
      for (int64_t i = 0; i < n; i++) dst[i] = raw[0] != 0;
    } else {
      return kiln_bc_error(r, "%zu bytes of data for %lld booleans", len, (long long)n);
    }
  } else {
    size_t mb = mlir_elem_bytes(e);
    if (mb != kb)
      return kiln_bc_error(r, "element type %s has a storage kiln does not read",
                           kiln_elem_type_name(e));
    bool splat = len == mb && n != 1;
    if (!splat && len != mb * (size_t)n)
      return kiln_bc_error(r, "%zu bytes of data for %lld elements of %zu bytes", len, (long long)n,
                           mb);
    int bits = kiln_elem_type_bits(e);
    for (int64_t i = 0; i < n; i++) {
      const uint8_t *src = raw + (splat ? 0 : (size_t)i * mb);
      memcpy(dst + (size_t)i * kb, src, kb);
      if (bits < 8) dst[(size_t)i * kb] &= (uint8_t)((1u << bits) - 1);
    }
  }
  kiln_mlir_attr_t *a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_DENSE_ELEMENTS);
  a->type = type;
  a->literal = lit;
  *out = a;
  return KILN_STATUS_OK;
}

static kiln_status read_blob(kiln_bc_reader_t *r, const uint8_t **p, size_t *len) {
  uint64_t n;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &n));
  if (n > r->end - r->pos)
    return kiln_bc_error(r, "blob of %llu bytes does not fit", (unsigned long long)n);
  *len = (size_t)n;
  return kiln_bc_bytes(r, (size_t)n, p);
}

static kiln_status read_attr_list(kiln_bc_reader_t *r, kiln_mlir_attr_t *a) {
  uint64_t c;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(r, 1, &c));
  a->num_elements = (int32_t)c;
  a->elements = kiln_arena_alloc(r->bc->arena, (c ? c : 1) * sizeof(*a->elements));
  for (uint64_t i = 0; i < c; i++)
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &a->elements[i]));
  return KILN_STATUS_OK;
}

static const char *attr_string(const kiln_mlir_attr_t *a) {
  return a->kind == KILN_MLIR_ATTR_STRING ? a->str : NULL;
}

static kiln_status read_named_list(kiln_bc_reader_t *r, kiln_mlir_attr_t *a) {
  uint64_t c;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(r, 2, &c));
  a->num_elements = (int32_t)c;
  a->fields = kiln_arena_alloc(r->bc->arena, (c ? c : 1) * sizeof(*a->fields));
  for (uint64_t i = 0; i < c; i++) {
    const kiln_mlir_attr_t *name, *value;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &name));
    KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &value));
    if (attr_string(name) == NULL) return kiln_bc_error(r, "dictionary key is not a string");
    a->fields[i].name = name->str;
    a->fields[i].value = value;
  }
  return KILN_STATUS_OK;
}

static kiln_mlir_attr_t *other(kiln_bc_t *bc, const char *text) {
  kiln_mlir_attr_t *a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_OTHER);
  a->str = text;
  return a;
}

static const char *loc_text(const kiln_mlir_attr_t *a) {
  if (a == NULL || a->kind != KILN_MLIR_ATTR_OTHER || !kiln_str_starts_with(a->str, "loc("))
    return "loc(unknown)";
  return a->str;
}

/* ---- builtin ---- */

static kiln_status builtin_attr(kiln_bc_reader_t *r, uint64_t code, const kiln_mlir_attr_t **out) {
  kiln_bc_t *bc = r->bc;
  kiln_mlir_attr_t *a = NULL;
  switch (code) {
    case 0: /* array */
      a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_ARRAY);
      KILN_RETURN_IF_ERROR_PLAIN(read_attr_list(r, a));
      break;
    case 1: /* dictionary */
      a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_DICTIONARY);
      KILN_RETURN_IF_ERROR_PLAIN(read_named_list(r, a));
      break;
    case 2:   /* string */
    case 3: { /* string with type */
      a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_STRING);
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_string(r, &a->str, &a->str_len));
      if (code == 3) KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &a->type));
      break;
    }
    case 4:   /* flat symbol ref */
    case 5: { /* symbol ref */
      const kiln_mlir_attr_t *root;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &root));
      if (attr_string(root) == NULL)
        return kiln_bc_error(r, "symbol reference root is not a string");
      a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_SYMBOL_REF);
      a->str = root->str;
      if (code == 5) {
        kiln_mlir_attr_t nested = {0};
        KILN_RETURN_IF_ERROR_PLAIN(read_attr_list(r, &nested));
        for (int32_t i = 0; i < nested.num_elements; i++) {
          if (nested.elements[i]->kind != KILN_MLIR_ATTR_SYMBOL_REF)
            return kiln_bc_error(r, "nested symbol reference is not one");
          a->str = kiln_arena_printf(bc->arena, "%s::%s", a->str, nested.elements[i]->str);
        }
      }
      break;
    }
    case 6: /* type */
      a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_TYPE);
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &a->type));
      break;
    case 7: /* unit */
      a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_UNIT);
      break;
    case 8: { /* integer */
      const kiln_mlir_type_t *t;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &t));
      if (t->kind == KILN_MLIR_TYPE_INTEGER && t->width == 1 &&
          t->signedness == KILN_MLIR_SIGNLESS) {
        uint64_t v;
        KILN_RETURN_IF_ERROR_PLAIN(read_apint(r, 1, &v));
        a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_BOOL);
        a->b = v & 1;
        break;
      }
      a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_INTEGER);
      a->type = t;
      KILN_RETURN_IF_ERROR_PLAIN(read_int_value(r, t, &a->i));
      break;
    }
    case 9: { /* float */
      const kiln_mlir_type_t *t;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &t));
      a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_FLOAT);
      a->type = t;
      KILN_RETURN_IF_ERROR_PLAIN(read_float_value(r, t, &a->f));
      break;
    }
    case 10: { /* call site loc */
      const kiln_mlir_attr_t *callee, *caller;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &callee));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &caller));
      a = other(bc, kiln_arena_printf(bc->arena, "loc(callsite(%s at %s))", loc_text(callee),
                                      loc_text(caller)));
      break;
    }
    case 11: { /* file line col */
      const kiln_mlir_attr_t *file;
      uint64_t line, col;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &file));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &line));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &col));
      if (attr_string(file) == NULL) return kiln_bc_error(r, "location file name is not a string");
      a = other(bc, kiln_arena_printf(bc->arena, "loc(\"%s\":%llu:%llu)", file->str,
                                      (unsigned long long)line, (unsigned long long)col));
      break;
    }
    case 12:   /* fused loc */
    case 13: { /* fused loc with metadata */
      kiln_mlir_attr_t list = {0};
      KILN_RETURN_IF_ERROR_PLAIN(read_attr_list(r, &list));
      if (code == 13) {
        const kiln_mlir_attr_t *meta;
        KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &meta));
      }
      a = other(bc, list.num_elements > 0 ? list.elements[0]->str : "loc(unknown)");
      if (a->str == NULL) a->str = "loc(unknown)";
      break;
    }
    case 14: { /* name loc */
      const kiln_mlir_attr_t *name, *child;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &name));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &child));
      if (attr_string(name) == NULL) return kiln_bc_error(r, "location name is not a string");
      a = other(bc, kiln_arena_printf(bc->arena, "loc(\"%s\")", name->str));
      break;
    }
    case 15: /* unknown loc */
      a = other(bc, "loc(unknown)");
      break;
    case 17: { /* dense array */
      const kiln_mlir_type_t *t;
      uint64_t n;
      const uint8_t *p;
      size_t len;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &t));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &n));
      KILN_RETURN_IF_ERROR_PLAIN(read_blob(r, &p, &len));
      a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_DENSE_ARRAY);
      a->type = t;
      a->num_elements = (int32_t)n;
      size_t eb;
      if (t->kind == KILN_MLIR_TYPE_INTEGER)
        eb = t->width == 1 ? 1 : (size_t)(t->width + 7) / 8;
      else if (t->kind == KILN_MLIR_TYPE_FLOAT)
        eb = (size_t)float_bits(t) / 8;
      else
        return kiln_bc_error(r, "dense array of a type that is neither integer nor float");
      if (eb == 0 || n > len || len != n * eb)
        return kiln_bc_error(r, "dense array of %llu elements has %zu bytes", (unsigned long long)n,
                             len);
      if (t->kind == KILN_MLIR_TYPE_INTEGER) {
        a->ints = kiln_arena_alloc(bc->arena, (n ? n : 1) * sizeof(int64_t));
        for (uint64_t i = 0; i < n; i++) {
          uint64_t v = 0;
          memcpy(&v, p + i * eb, eb);
          a->ints[i] = t->width == 1 ? (int64_t)(v & 1) : sign_extend(v, (int)eb * 8);
        }
      } else {
        a->floats = kiln_arena_alloc(bc->arena, (n ? n : 1) * sizeof(double));
        for (uint64_t i = 0; i < n; i++) {
          uint64_t v = 0;
          memcpy(&v, p + i * eb, eb);
          a->floats[i] = bits_to_double(t->elem, v);
        }
      }
      break;
    }
    case 18: { /* dense int or fp elements */
      const kiln_mlir_type_t *t;
      const uint8_t *p;
      size_t len;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &t));
      KILN_RETURN_IF_ERROR_PLAIN(read_blob(r, &p, &len));
      return make_dense(r, t, p, len, out);
    }
    case 16: { /* dense resource: its type and a handle (index) to a builtin blob */
      const kiln_mlir_type_t *t;
      uint64_t h;
      size_t at = r->pos;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &t));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &h));
      if (h >= bc->num_resources) {
        return kiln_bc_error(r, "resource handle %llu out of range (%llu resources)",
                             (unsigned long long)h, (unsigned long long)bc->num_resources);
      }
      const struct kiln_bc_resource *res = &bc->resources[h];
      if (strcmp(bc->dialects[res->dialect], "builtin") != 0 || res->kind != 0 || res->len == 0) {
        return kiln_bc_error(r, "dense_resource<%s> names no blob of the builtin dialect%s",
                             res->key, res->kind == 0 ? " (its data is elided)" : "");
      }
      kiln_elem_type_t e;
      int64_t n = 1; /* the element count; -1 when dynamic or huge (make_dense says which) */
      for (int32_t i = 0; t->kind == KILN_MLIR_TYPE_TENSOR && i < t->rank && n >= 0; i++) {
        bool fits = t->dims[i] >= 0 && (n == 0 || t->dims[i] <= (INT64_C(1) << 40) / n);
        n = fits ? n * t->dims[i] : -1;
      }
      if (t->kind == KILN_MLIR_TYPE_TENSOR && !t->unranked && elem_of(t->element, &e) && n >= 0 &&
          res->len != (size_t)n * (e == KILN_PRED ? 1 : mlir_elem_bytes(e))) {
        r->pos = at;
        return kiln_bc_error(r, "dense_resource<%s> holds %zu bytes, its type needs %lld elements",
                             res->key, res->len, (long long)n);
      }
      return make_dense(r, t, bc->data + res->off, res->len, out);
    }
    case 21: { /* distinct */
      const kiln_mlir_attr_t *inner;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &inner));
      *out = inner;
      return KILN_STATUS_OK;
    }
    default:
      return kiln_bc_error(r,
                           "builtin attribute code %llu is not supported (dense string and sparse "
                           "elements are not read)",
                           (unsigned long long)code);
  }
  *out = a;
  return KILN_STATUS_OK;
}

static kiln_status builtin_type(kiln_bc_reader_t *r, uint64_t code, const kiln_mlir_type_t **out) {
  kiln_bc_t *bc = r->bc;
  kiln_mlir_type_t *t = NULL;
  switch (code) {
    case 0: { /* integer: width << 2 | signedness */
      uint64_t v;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &v));
      if ((v >> 2) == 0 || (v >> 2) > 64 || (v & 3) == 3)
        return kiln_bc_error(r, "integer type of width %llu, signedness %llu",
                             (unsigned long long)(v >> 2), (unsigned long long)(v & 3));
      *out = int_type(bc, (int)(v >> 2),
                      (v & 3) == 0   ? KILN_MLIR_SIGNLESS
                      : (v & 3) == 1 ? KILN_MLIR_SIGNED
                                     : KILN_MLIR_UNSIGNED);
      return KILN_STATUS_OK;
    }
    case 1:
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_INDEX);
      break;
    case 2:
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_FUNCTION);
      KILN_RETURN_IF_ERROR_PLAIN(read_types(r, &t->num_types, &t->types));
      KILN_RETURN_IF_ERROR_PLAIN(read_types(r, &t->num_results, &t->results));
      break;
    case 3:
      *out = float_type(bc, KILN_BF16);
      return KILN_STATUS_OK;
    case 4:
      *out = float_type(bc, KILN_F16);
      return KILN_STATUS_OK;
    case 5:
      *out = float_type(bc, KILN_F32);
      return KILN_STATUS_OK;
    case 6:
      *out = float_type(bc, KILN_F64);
      return KILN_STATUS_OK;
    case 9:
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_COMPLEX);
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &t->element));
      break;
    case 12:
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_NONE);
      break;
    case 13:
    case 14: {
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_TENSOR);
      if (code == 14) KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &t->encoding));
      KILN_RETURN_IF_ERROR_PLAIN(read_svarints(r, &t->rank, &t->dims));
      for (int32_t i = 0; i < t->rank; i++) {
        if (t->dims[i] < 0) t->dims[i] = KILN_MLIR_DYNAMIC;
      }
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &t->element));
      break;
    }
    case 15:
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_TUPLE);
      KILN_RETURN_IF_ERROR_PLAIN(read_types(r, &t->num_types, &t->types));
      break;
    case 18:
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_TENSOR);
      t->unranked = true;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &t->element));
      break;
    default:
      return kiln_bc_error(r, "builtin type code %llu is not supported", (unsigned long long)code);
  }
  *out = t;
  return KILN_STATUS_OK;
}

/* ---- text of the types kiln keeps as KILN_MLIR_TYPE_OTHER, as MLIR's assembly writes them ---- */

static void print_shortest(kiln_strbuf_t *b, double v) {
  char buf[40];
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, sizeof(buf), "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
  kiln_strbuf_append(b, buf);
  if (strpbrk(buf, ".eEn") == NULL) kiln_strbuf_append(b, ".0");
}

/* `i8` / `u8`, with `<min:max>` when the range is not the storage type's whole range. */
static void print_quant_storage(kiln_strbuf_t *b, uint64_t flags, const kiln_mlir_type_t *st,
                                int64_t lo, int64_t hi) {
  bool is_signed = flags & 1;
  int w = st->kind == KILN_MLIR_TYPE_INTEGER ? st->width : 0;
  kiln_strbuf_printf(b, "%s%d", is_signed ? "i" : "u", w);
  int64_t full_lo = 0, full_hi = 0;
  if (w > 0 && w < 64) {
    full_lo = is_signed ? -(INT64_C(1) << (w - 1)) : 0;
    full_hi = is_signed ? (INT64_C(1) << (w - 1)) - 1 : (INT64_C(1) << w) - 1;
  }
  if (lo != full_lo || hi != full_hi)
    kiln_strbuf_printf(b, "<%lld:%lld>", (long long)lo, (long long)hi);
}

static const char *type_text(kiln_bc_t *bc, kiln_strbuf_t *b) {
  const char *t = kiln_arena_strdup(bc->arena, kiln_strbuf_cstr(b));
  kiln_strbuf_free(b);
  return t;
}

/* ---- VHLO ---- */

static kiln_mlir_attr_t *enum_attr(kiln_bc_t *bc, const char *enum_name, const char *value) {
  kiln_mlir_attr_t *a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_ENUM);
  a->dialect = "stablehlo";
  a->enum_name = enum_name;
  a->str = value;
  return a;
}

static kiln_status vhlo_enum(kiln_bc_reader_t *r, const char *enum_name, const char *const *values,
                             uint64_t count, const kiln_mlir_attr_t **out) {
  uint64_t v;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &v));
  if (v >= count || values[v] == NULL)
    return kiln_bc_error(r, "%s value %llu is unknown", enum_name, (unsigned long long)v);
  *out = enum_attr(r->bc, enum_name, values[v]);
  return KILN_STATUS_OK;
}

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

static kiln_mlir_attr_t *struct_attr(kiln_bc_t *bc, const char *name, int32_t n) {
  kiln_mlir_attr_t *a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_STRUCT);
  a->dialect = name;
  a->num_elements = n;
  a->fields = kiln_arena_alloc(bc->arena, (size_t)(n ? n : 1) * sizeof(*a->fields));
  return a;
}

kiln_mlir_attr_t *kiln_bc_i64_array(kiln_bc_t *bc, const int64_t *v, int32_t n);
kiln_mlir_attr_t *kiln_bc_i64_array(kiln_bc_t *bc, const int64_t *v, int32_t n) {
  kiln_mlir_attr_t *a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_DENSE_ARRAY);
  a->type = kiln_bc_int_type(bc, 64);
  a->num_elements = n;
  a->ints = kiln_arena_alloc(bc->arena, (size_t)(n ? n : 1) * sizeof(int64_t));
  if (n) memcpy(a->ints, v, (size_t)n * sizeof(int64_t));
  return a;
}

static kiln_mlir_attr_t *i64_attr(kiln_bc_t *bc, int64_t v) {
  kiln_mlir_attr_t *a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_INTEGER);
  a->type = kiln_bc_int_type(bc, 64);
  a->i = v;
  return a;
}

static kiln_mlir_attr_t *f64_attr(kiln_bc_t *bc, double v) {
  kiln_mlir_attr_t *a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_FLOAT);
  a->type = float_type(bc, KILN_F64);
  a->f = v;
  return a;
}

static kiln_status vhlo_attr(kiln_bc_reader_t *r, uint64_t code, const kiln_mlir_attr_t **out) {
  kiln_bc_t *bc = r->bc;
  static const char *const kCmpDir[] = {"EQ", "NE", "GE", "GT", "LE", "LT"};
  static const char *const kCmpType[] = {"NOTYPE", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"};
  static const char *const kFft[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
  static const char *const kPrecision[] = {"DEFAULT", "HIGH", "HIGHEST"};
  static const char *const kRngAlg[] = {"DEFAULT", "THREE_FRY", "PHILOX"};
  static const char *const kRngDist[] = {NULL, "UNIFORM", "NORMAL"};
  static const char *const kTranspose[] = {"TRANSPOSE_INVALID", "NO_TRANSPOSE", "TRANSPOSE",
                                           "ADJOINT"};
  static const char *const kAccMode[] = {"DEFAULT", "HIGHEST", "TOLERANCE"};
  kiln_mlir_attr_t *a = NULL;
  switch (code) {
    case 1: /* array */
      a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_ARRAY);
      KILN_RETURN_IF_ERROR_PLAIN(read_attr_list(r, a));
      break;
    case 2: { /* bool */
      uint64_t v;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &v));
      if (v > 1) return kiln_bc_error(r, "boolean value %llu", (unsigned long long)v);
      a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_BOOL);
      a->b = v == 1;
      break;
    }
    case 3:
      return vhlo_enum(r, "comparison_direction", kCmpDir, NELEMS(kCmpDir), out);
    case 4:
      return vhlo_enum(r, "comparison_type", kCmpType, NELEMS(kCmpType), out);
    case 5: { /* custom call api version: an i32 in StableHLO */
      uint64_t v;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &v));
      if (v > 4)
        return kiln_bc_error(r, "custom call API version %llu is unknown", (unsigned long long)v);
      a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_INTEGER);
      a->type = kiln_bc_int_type(bc, 32);
      a->i = (int64_t)v;
      break;
    }
    case 6: /* dictionary */
      a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_DICTIONARY);
      KILN_RETURN_IF_ERROR_PLAIN(read_named_list(r, a));
      break;
    case 7:
      return vhlo_enum(r, "fft_type", kFft, NELEMS(kFft), out);
    case 8: { /* float */
      const kiln_mlir_type_t *t;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &t));
      a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_FLOAT);
      a->type = t;
      KILN_RETURN_IF_ERROR_PLAIN(read_float_value(r, t, &a->f));
      break;
    }
    case 9: { /* integer */
      const kiln_mlir_type_t *t;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &t));
      if (t->kind == KILN_MLIR_TYPE_INTEGER && t->width == 1)
        return kiln_bc_error(r, "integer attribute of type i1");
      a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_INTEGER);
      a->type = t;
      KILN_RETURN_IF_ERROR_PLAIN(read_int_value(r, t, &a->i));
      break;
    }
    case 10: { /* output operand alias */
      int32_t no, nt;
      int64_t *outs, *tups, idx;
      KILN_RETURN_IF_ERROR_PLAIN(read_svarints(r, &no, &outs));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_svarint(r, &idx));
      KILN_RETURN_IF_ERROR_PLAIN(read_svarints(r, &nt, &tups));
      a = struct_attr(bc, "stablehlo.output_operand_alias", 3);
      a->fields[0] =
          (kiln_mlir_named_attr_t){"output_tuple_indices", kiln_bc_i64_array(bc, outs, no)};
      a->fields[1] = (kiln_mlir_named_attr_t){"operand_index", i64_attr(bc, idx)};
      a->fields[2] =
          (kiln_mlir_named_attr_t){"operand_tuple_indices", kiln_bc_i64_array(bc, tups, nt)};
      break;
    }
    case 11:
      return vhlo_enum(r, "precision", kPrecision, NELEMS(kPrecision), out);
    case 12:
      return vhlo_enum(r, "rng_algorithm", kRngAlg, NELEMS(kRngAlg), out);
    case 13:
      return vhlo_enum(r, "rng_distribution", kRngDist, NELEMS(kRngDist), out);
    case 14: /* string */
      a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_STRING);
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_string(r, &a->str, &a->str_len));
      break;
    case 15: { /* tensor */
      const kiln_mlir_type_t *t;
      const uint8_t *p;
      size_t len;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &t));
      KILN_RETURN_IF_ERROR_PLAIN(read_blob(r, &p, &len));
      return make_dense(r, t, p, len, out);
    }
    case 16:
      return vhlo_enum(r, "transpose", kTranspose, NELEMS(kTranspose), out);
    case 17: /* type */
      a = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_TYPE);
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &a->type));
      break;
    case 18: { /* type extensions */
      int32_t n;
      int64_t *b;
      KILN_RETURN_IF_ERROR_PLAIN(read_svarints(r, &n, &b));
      for (int32_t i = 0; i < n; i++) {
        if (b[i] < 0) b[i] = KILN_MLIR_DYNAMIC;
      }
      a = struct_attr(bc, "stablehlo.type_extensions", 1);
      a->fields[0] = (kiln_mlir_named_attr_t){"bounds", kiln_bc_i64_array(bc, b, n)};
      break;
    }
    case 19:
      return vhlo_enum(r, "result_accuracy_mode", kAccMode, NELEMS(kAccMode), out);
    case 20: { /* result accuracy */
      uint64_t atol, rtol;
      int64_t ulps;
      const kiln_mlir_attr_t *mode;
      KILN_RETURN_IF_ERROR_PLAIN(read_apint(r, 64, &atol));
      KILN_RETURN_IF_ERROR_PLAIN(read_apint(r, 64, &rtol));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_svarint(r, &ulps));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &mode));
      a = struct_attr(bc, "stablehlo.result_accuracy", 4);
      a->fields[0] = (kiln_mlir_named_attr_t){"atol", f64_attr(bc, bits_to_double(KILN_F64, atol))};
      a->fields[1] = (kiln_mlir_named_attr_t){"rtol", f64_attr(bc, bits_to_double(KILN_F64, rtol))};
      a->fields[2] = (kiln_mlir_named_attr_t){"ulps", i64_attr(bc, ulps)};
      a->fields[3] = (kiln_mlir_named_attr_t){"mode", mode};
      break;
    }
    case 21: { /* sub axis info */
      int64_t pre, size;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_svarint(r, &pre));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_svarint(r, &size));
      a = struct_attr(bc, "stablehlo.sub_axis_info", 2);
      a->fields[0] = (kiln_mlir_named_attr_t){"pre_size", i64_attr(bc, pre)};
      a->fields[1] = (kiln_mlir_named_attr_t){"size", i64_attr(bc, size)};
      break;
    }
    case 22: { /* axis ref */
      const kiln_mlir_attr_t *name, *sub = NULL;
      uint64_t has;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &name));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &has));
      if (has) KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &sub));
      a = struct_attr(bc, "stablehlo.axis_ref", sub ? 2 : 1);
      a->fields[0] = (kiln_mlir_named_attr_t){"name", name};
      if (sub) a->fields[1] = (kiln_mlir_named_attr_t){"sub_axis_info", sub};
      break;
    }
    case 23: { /* replica group mesh axes */
      const kiln_mlir_attr_t *mesh, *axes;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &mesh));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &axes));
      if (mesh->kind == KILN_MLIR_ATTR_STRING) { /* VHLO names a mesh symbol by a string */
        kiln_mlir_attr_t *sym = kiln_bc_new_attr(bc, KILN_MLIR_ATTR_SYMBOL_REF);
        sym->str = mesh->str;
        mesh = sym;
      }
      a = struct_attr(bc, "stablehlo.replica_group_mesh_axes", 2);
      a->fields[0] = (kiln_mlir_named_attr_t){"mesh", mesh};
      a->fields[1] = (kiln_mlir_named_attr_t){"axes", axes};
      break;
    }
    case 24: { /* mesh axis */
      const kiln_mlir_attr_t *name;
      int64_t size;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &name));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_svarint(r, &size));
      a = struct_attr(bc, "stablehlo.mesh_axis", 2);
      a->fields[0] = (kiln_mlir_named_attr_t){"name", name};
      a->fields[1] = (kiln_mlir_named_attr_t){"size", i64_attr(bc, size)};
      break;
    }
    case 25: { /* mesh */
      const kiln_mlir_attr_t *axes, *ids = NULL;
      uint64_t v;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &axes));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &v));
      if (v & 1) KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_attr(bc, v >> 1, &ids));
      a = struct_attr(bc, "stablehlo.mesh", ids ? 2 : 1);
      a->fields[0] = (kiln_mlir_named_attr_t){"axes", axes};
      if (ids) a->fields[1] = (kiln_mlir_named_attr_t){"device_ids", ids};
      break;
    }
    default:
      return kiln_bc_error(r, "VHLO attribute code %llu is unknown", (unsigned long long)code);
  }
  *out = a;
  return KILN_STATUS_OK;
}

static kiln_status vhlo_type(kiln_bc_reader_t *r, uint64_t code, const kiln_mlir_type_t **out) {
  kiln_bc_t *bc = r->bc;
  kiln_mlir_type_t *t = NULL;
  switch (code) {
    case 0:
      *out = int_type(bc, 1, KILN_MLIR_SIGNLESS);
      return KILN_STATUS_OK;
    case 1:
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_COMPLEX);
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &t->element));
      break;
    case 2:
      *out = float_type(bc, KILN_BF16);
      return KILN_STATUS_OK;
    case 3:
      *out = float_type(bc, KILN_F16);
      return KILN_STATUS_OK;
    case 4:
      *out = float_type(bc, KILN_F32);
      return KILN_STATUS_OK;
    case 5:
      *out = float_type(bc, KILN_F64);
      return KILN_STATUS_OK;
    case 6:
      *out = float_type(bc, KILN_F8E4M3FN);
      return KILN_STATUS_OK;
    case 7:
      *out = float_type(bc, KILN_F8E5M2);
      return KILN_STATUS_OK;
    case 8:
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_FUNCTION);
      KILN_RETURN_IF_ERROR_PLAIN(read_types(r, &t->num_types, &t->types));
      KILN_RETURN_IF_ERROR_PLAIN(read_types(r, &t->num_results, &t->results));
      break;
    case 9:
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_INDEX);
      break;
    case 10:
      *out = int_type(bc, 4, KILN_MLIR_SIGNLESS);
      return KILN_STATUS_OK;
    case 11:
      *out = int_type(bc, 8, KILN_MLIR_SIGNLESS);
      return KILN_STATUS_OK;
    case 12:
      *out = int_type(bc, 16, KILN_MLIR_SIGNLESS);
      return KILN_STATUS_OK;
    case 13:
      *out = int_type(bc, 32, KILN_MLIR_SIGNLESS);
      return KILN_STATUS_OK;
    case 14:
      *out = int_type(bc, 64, KILN_MLIR_SIGNLESS);
      return KILN_STATUS_OK;
    case 15:
      *out = int_type(bc, 4, KILN_MLIR_UNSIGNED);
      return KILN_STATUS_OK;
    case 16:
      *out = int_type(bc, 8, KILN_MLIR_UNSIGNED);
      return KILN_STATUS_OK;
    case 17:
      *out = int_type(bc, 16, KILN_MLIR_UNSIGNED);
      return KILN_STATUS_OK;
    case 18:
      *out = int_type(bc, 32, KILN_MLIR_UNSIGNED);
      return KILN_STATUS_OK;
    case 19:
      *out = int_type(bc, 64, KILN_MLIR_UNSIGNED);
      return KILN_STATUS_OK;
    case 20:
    case 21: {
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_TENSOR);
      if (code == 21) KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_attr(r, &t->encoding));
      KILN_RETURN_IF_ERROR_PLAIN(read_svarints(r, &t->rank, &t->dims));
      for (int32_t i = 0; i < t->rank; i++) {
        if (t->dims[i] < 0) t->dims[i] = KILN_MLIR_DYNAMIC;
      }
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &t->element));
      break;
    }
    case 22:
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_TOKEN);
      break;
    case 23:
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_TUPLE);
      KILN_RETURN_IF_ERROR_PLAIN(read_types(r, &t->num_types, &t->types));
      break;
    case 24: { /* uniform quantized: kept as its text */
      uint64_t flags;
      const kiln_mlir_type_t *st, *et;
      uint64_t scale;
      int64_t zp, lo, hi;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &flags));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &st));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &et));
      KILN_RETURN_IF_ERROR_PLAIN(read_apint(r, 64, &scale));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_svarint(r, &zp));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_svarint(r, &lo));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_svarint(r, &hi));
      kiln_strbuf_t b = {0};
      kiln_strbuf_append(&b, "!quant.uniform<");
      print_quant_storage(&b, flags, st, lo, hi);
      kiln_strbuf_append(&b, ":");
      kiln_mlir_type_print(&b, et);
      kiln_strbuf_append(&b, ", ");
      print_shortest(&b, bits_to_double(KILN_F64, scale));
      if (zp != 0) kiln_strbuf_printf(&b, ":%lld", (long long)zp);
      kiln_strbuf_append(&b, ">");
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_OTHER);
      t->text = type_text(bc, &b);
      break;
    }
    case 25:
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_TENSOR);
      t->unranked = true;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &t->element));
      break;
    case 26:
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_OTHER);
      t->text = "!shape.witness";
      break;
    case 27:
      *out = float_type(bc, KILN_F8E4M3FNUZ);
      return KILN_STATUS_OK;
    case 28:
      *out = float_type(bc, KILN_F8E5M2FNUZ);
      return KILN_STATUS_OK;
    case 29:
      *out = float_type(bc, KILN_F8E4M3B11FNUZ);
      return KILN_STATUS_OK;
    case 30: { /* uniform quantized per axis: kept as its text */
      uint64_t flags, qdim, c;
      const kiln_mlir_type_t *st, *et;
      int64_t lo, hi;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &flags));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &st));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &et));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &qdim));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_svarint(r, &lo));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_svarint(r, &hi));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(r, 1, &c));
      uint64_t *scales = kiln_arena_alloc(bc->arena, (c ? c : 1) * sizeof(uint64_t));
      for (uint64_t i = 0; i < c; i++) KILN_RETURN_IF_ERROR_PLAIN(read_apint(r, 64, &scales[i]));
      uint64_t nz;
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_count(r, 1, &nz));
      if (nz != c)
        return kiln_bc_error(r, "%llu scales but %llu zero points", (unsigned long long)c,
                             (unsigned long long)nz);
      kiln_strbuf_t b = {0};
      kiln_strbuf_append(&b, "!quant.uniform<");
      print_quant_storage(&b, flags, st, lo, hi);
      kiln_strbuf_append(&b, ":");
      kiln_mlir_type_print(&b, et);
      kiln_strbuf_printf(&b, ":%llu, {", (unsigned long long)qdim);
      for (uint64_t i = 0; i < c; i++) {
        int64_t zp;
        kiln_status st2 = kiln_bc_svarint(r, &zp);
        if (st2) {
          kiln_strbuf_free(&b);
          return st2;
        }
        if (i) kiln_strbuf_append(&b, ", ");
        print_shortest(&b, bits_to_double(KILN_F64, scales[i]));
        if (zp != 0) kiln_strbuf_printf(&b, ":%lld", (long long)zp);
      }
      kiln_strbuf_append(&b, "}>");
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_OTHER);
      t->text = type_text(bc, &b);
      break;
    }
    case 31:
      *out = int_type(bc, 2, KILN_MLIR_SIGNLESS);
      return KILN_STATUS_OK;
    case 32:
      *out = int_type(bc, 2, KILN_MLIR_UNSIGNED);
      return KILN_STATUS_OK;
    case 33:
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_NONE);
      break;
    case 34:
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_OTHER);
      t->text = "tf32";
      break;
    case 35:
      *out = float_type(bc, KILN_F8E4M3);
      return KILN_STATUS_OK;
    case 36:
      *out = float_type(bc, KILN_F8E3M4);
      return KILN_STATUS_OK;
    case 37:
      *out = float_type(bc, KILN_F4E2M1FN);
      return KILN_STATUS_OK;
    case 38:
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_OTHER);
      t->text = "f6E2M3FN";
      break;
    case 39:
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_OTHER);
      t->text = "f6E3M2FN";
      break;
    case 40:
      *out = float_type(bc, KILN_F8E8M0FNU);
      return KILN_STATUS_OK;
    case 41: { /* ranked buffer: a memref, kept as its text */
      int32_t n;
      int64_t *dims;
      const kiln_mlir_type_t *e;
      KILN_RETURN_IF_ERROR_PLAIN(read_svarints(r, &n, &dims));
      KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_read_type(r, &e));
      kiln_strbuf_t b = {0};
      kiln_strbuf_append(&b, "memref<");
      for (int32_t i = 0; i < n; i++) {
        if (dims[i] < 0)
          kiln_strbuf_append(&b, "?x");
        else
          kiln_strbuf_printf(&b, "%lldx", (long long)dims[i]);
      }
      kiln_mlir_type_print(&b, e);
      kiln_strbuf_append(&b, ">");
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_OTHER);
      t->text = type_text(bc, &b);
      break;
    }
    case 42: { /* future: kept as its text */
      int32_t n;
      const kiln_mlir_type_t **ts;
      KILN_RETURN_IF_ERROR_PLAIN(read_types(r, &n, &ts));
      kiln_strbuf_t b = {0};
      kiln_strbuf_append(&b, "!stablehlo.future<");
      for (int32_t i = 0; i < n; i++) {
        if (i) kiln_strbuf_append(&b, ", ");
        kiln_mlir_type_print(&b, ts[i]);
      }
      kiln_strbuf_append(&b, ">");
      t = kiln_bc_new_type(bc, KILN_MLIR_TYPE_OTHER);
      t->text = type_text(bc, &b);
      break;
    }
    default:
      return kiln_bc_error(r, "VHLO type code %llu is unknown", (unsigned long long)code);
  }
  *out = t;
  return KILN_STATUS_OK;
}

static kiln_status decode_attr(kiln_bc_reader_t *r, const char *dialect,
                               const kiln_mlir_attr_t **out) {
  uint64_t code;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &code));
  if (strcmp(dialect, "builtin") == 0) return builtin_attr(r, code, out);
  if (strcmp(dialect, "vhlo") == 0) return vhlo_attr(r, code, out);
  return kiln_bc_error(r, "attributes of dialect '%s' have an encoding kiln does not know",
                       dialect);
}

static kiln_status decode_type(kiln_bc_reader_t *r, const char *dialect,
                               const kiln_mlir_type_t **out) {
  uint64_t code;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_bc_varint(r, &code));
  if (strcmp(dialect, "builtin") == 0) return builtin_type(r, code, out);
  if (strcmp(dialect, "vhlo") == 0) return vhlo_type(r, code, out);
  return kiln_bc_error(r, "types of dialect '%s' have an encoding kiln does not know", dialect);
}
