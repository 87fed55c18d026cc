#include "base/proto_wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"

void kiln_pw_reader_init(kiln_pw_reader_t *r, const void *bytes, size_t n, const char *message) {
  r->base = bytes ? (const uint8_t *)bytes : (const uint8_t *)"";
  r->p = r->base;
  r->end = r->base + (bytes ? n : 0);
  r->depth = 0;
  r->message = message ? message : "message";
}

static size_t offset_of(const kiln_pw_reader_t *r, const uint8_t *p) {
  return (size_t)(p - r->base);
}

kiln_status kiln_pw_error(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, const char *fmt,
                          ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (f && f->number)
    return KILN_ERR_INVALID("malformed protobuf: %s field %u at byte %zu: %s", r->message,
                            f->number, f->offset, what);
  return KILN_ERR_INVALID("malformed protobuf: %s at byte %zu: %s", r->message,
                          f ? f->offset : offset_of(r, r->p), what);
}

/* Reads a varint at *p (< end). Returns false when truncated or longer than 10 bytes or
 * when the tenth byte carries more than the one bit a 64-bit value has left. */
static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out, const char **why) {
  uint64_t v = 0;
  const uint8_t *q = *p;
  for (int i = 0; i < 10; i++) {
    if (q >= end) {
      *why = "truncated varint";
      return false;
    }
    uint8_t b = *q++;
    if (i == 9 && b > 1) {
      *why = "varint longer than 64 bits";
      return false;
    }
    v |= (uint64_t)(b & 0x7F) << (7 * i);
    if (!(b & 0x80)) {
      *p = q;
      *out = v;
      return true;
    }
  }
  *why = "varint longer than 10 bytes";
  return false;
}

/* Reads one tag at r->p. */
static kiln_status read_tag(kiln_pw_reader_t *r, kiln_pw_field_t *f) {
  memset(f, 0, sizeof *f);
  f->offset = offset_of(r, r->p);
  uint64_t tag;
  const char *why = NULL;
  if (!read_varint(&r->p, r->end, &tag, &why)) return kiln_pw_error(r, f, "tag: %s", why);
  uint64_t number = tag >> 3;
  unsigned wt = (unsigned)(tag & 7);
  if (number == 0 || number > 0x1FFFFFFFu)
    return kiln_pw_error(r, f, "invalid field number %llu", (unsigned long long)number);
  f->number = (uint32_t)number;
  if (wt > 5) return kiln_pw_error(r, f, "invalid wire type %u", wt);
  f->wire_type = (kiln_pw_wire_type_t)wt;
  return KILN_STATUS_OK;
}

/* Reads the value of a field whose tag was read (not groups). */
static kiln_status read_value(kiln_pw_reader_t *r, kiln_pw_field_t *f) {
  const char *why = NULL;
  size_t left = (size_t)(r->end - r->p);
  switch (f->wire_type) {
    case KILN_PW_VARINT:
      if (!read_varint(&r->p, r->end, &f->value, &why)) return kiln_pw_error(r, f, "%s", why);
      return KILN_STATUS_OK;
    case KILN_PW_FIXED64:
      if (left < 8) return kiln_pw_error(r, f, "fixed64 needs 8 bytes, %zu left", left);
      f->value = 0;
      for (int i = 7; i >= 0; i--) f->value = (f->value << 8) | r->p[i];
      r->p += 8;
      return KILN_STATUS_OK;
    case KILN_PW_FIXED32:
      if (left < 4) return kiln_pw_error(r, f, "fixed32 needs 4 bytes, %zu left", left);
      f->value = (uint64_t)r->p[0] | (uint64_t)r->p[1] << 8 | (uint64_t)r->p[2] << 16 |
                 (uint64_t)r->p[3] << 24;
      r->p += 4;
      return KILN_STATUS_OK;
    case KILN_PW_LEN: {
      uint64_t n;
      if (!read_varint(&r->p, r->end, &n, &why)) return kiln_pw_error(r, f, "length: %s", why);
      left = (size_t)(r->end - r->p);
      if (n > left)
        return kiln_pw_error(r, f, "length %llu runs past the end (%zu bytes left)",
                             (unsigned long long)n, left);
      f->data = r->p;
      f->len = (size_t)n;
      r->p += n;
      return KILN_STATUS_OK;
    }
    default:
      return kiln_pw_error(r, f, "unexpected wire type %d", (int)f->wire_type);
  }
}

/* Skips a group whose start tag `start` was read: fields up to the matching end tag,
 * nested groups counted (iteratively, so a depth bomb costs no stack). */
static kiln_status skip_group(kiln_pw_reader_t *r, const kiln_pw_field_t *start) {
  uint32_t stack[KILN_PW_MAX_DEPTH];
  int depth = 0;
  if (r->depth + 1 > KILN_PW_MAX_DEPTH)
    return kiln_pw_error(r, start, "groups nested deeper than %d", KILN_PW_MAX_DEPTH);
  stack[depth++] = start->number;
  while (depth > 0) {
    if (r->p >= r->end) return kiln_pw_error(r, start, "group without an end tag");
    kiln_pw_field_t f;
    KILN_RETURN_IF_ERROR_PLAIN(read_tag(r, &f));
    if (f.wire_type == KILN_PW_GROUP_START) {
      if (r->depth + depth + 1 > KILN_PW_MAX_DEPTH)
        return kiln_pw_error(r, &f, "groups nested deeper than %d", KILN_PW_MAX_DEPTH);
      stack[depth++] = f.number;
    } else if (f.wire_type == KILN_PW_GROUP_END) {
      if (f.number != stack[depth - 1])
        return kiln_pw_error(r, &f, "end of group %u inside group %u", f.number, stack[depth - 1]);
      depth--;
    } else {
      KILN_RETURN_IF_ERROR_PLAIN(read_value(r, &f));
    }
  }
  return KILN_STATUS_OK;
}

kiln_status kiln_pw_next(kiln_pw_reader_t *r, kiln_pw_field_t *f) {
  KILN_RETURN_IF_ERROR_PLAIN(read_tag(r, f));
  if (f->wire_type == KILN_PW_GROUP_END) return kiln_pw_error(r, f, "end of group without a start");
  if (f->wire_type == KILN_PW_GROUP_START) return skip_group(r, f);
  return read_value(r, f);
}

kiln_status kiln_pw_sub(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, const char *message,
                        kiln_pw_reader_t *child) {
  if (f->wire_type != KILN_PW_LEN)
    return kiln_pw_error(r, f, "expected a message (wire type 2), found wire type %d",
                         (int)f->wire_type);
  if (r->depth + 1 > KILN_PW_MAX_DEPTH)
    return kiln_pw_error(r, f, "messages nested deeper than %d", KILN_PW_MAX_DEPTH);
  child->base = r->base;
  child->p = f->data;
  child->end = f->data + f->len;
  child->depth = r->depth + 1;
  child->message = message ? message : "message";
  return KILN_STATUS_OK;
}

static kiln_status want(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, kiln_pw_wire_type_t wt,
                        const char *what) {
  if (f->wire_type == wt) return KILN_STATUS_OK;
  return kiln_pw_error(r, f, "expected %s (wire type %d), found wire type %d", what, (int)wt,
                       (int)f->wire_type);
}

kiln_status kiln_pw_as_u64(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, uint64_t *out) {
  KILN_RETURN_IF_ERROR_PLAIN(want(r, f, KILN_PW_VARINT, "a varint"));
  *out = f->value;
  return KILN_STATUS_OK;
}

kiln_status kiln_pw_as_i64(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, int64_t *out) {
  KILN_RETURN_IF_ERROR_PLAIN(want(r, f, KILN_PW_VARINT, "a varint"));
  *out = (int64_t)f->value;
  return KILN_STATUS_OK;
}

kiln_status kiln_pw_as_i32(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, int32_t *out) {
  KILN_RETURN_IF_ERROR_PLAIN(want(r, f, KILN_PW_VARINT, "a varint"));
  *out = (int32_t)(uint32_t)(f->value & 0xFFFFFFFFu);
  return KILN_STATUS_OK;
}

kiln_status kiln_pw_as_bool(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, bool *out) {
  KILN_RETURN_IF_ERROR_PLAIN(want(r, f, KILN_PW_VARINT, "a varint"));
  *out = f->value != 0;
  return KILN_STATUS_OK;
}

kiln_status kiln_pw_as_sint64(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, int64_t *out) {
  KILN_RETURN_IF_ERROR_PLAIN(want(r, f, KILN_PW_VARINT, "a varint"));
  *out = (int64_t)(f->value >> 1) ^ -(int64_t)(f->value & 1);
  return KILN_STATUS_OK;
}

kiln_status kiln_pw_as_float(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, float *out) {
  KILN_RETURN_IF_ERROR_PLAIN(want(r, f, KILN_PW_FIXED32, "a fixed32"));
  uint32_t bits = (uint32_t)f->value;
  memcpy(out, &bits, sizeof bits);
  return KILN_STATUS_OK;
}

kiln_status kiln_pw_as_double(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, double *out) {
  KILN_RETURN_IF_ERROR_PLAIN(want(r, f, KILN_PW_FIXED64, "a fixed64"));
  memcpy(out, &f->value, sizeof *out);
  return KILN_STATUS_OK;
}

kiln_status kiln_pw_as_bytes(const kiln_pw_reader_t *r, const kiln_pw_field_t *f,
                             const uint8_t **data, size_t *len) {
  KILN_RETURN_IF_ERROR_PLAIN(want(r, f, KILN_PW_LEN, "bytes"));
  *data = f->data;
  *len = f->len;
  return KILN_STATUS_OK;
}

kiln_status kiln_pw_as_string(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, char **out) {
  KILN_RETURN_IF_ERROR_PLAIN(want(r, f, KILN_PW_LEN, "a string"));
  if (memchr(f->data, 0, f->len)) return kiln_pw_error(r, f, "string holds a NUL byte");
  char *s = kiln_try_malloc(f->len + 1);
  if (!s) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "string of %zu bytes", f->len);
  if (f->len) memcpy(s, f->data, f->len);
  s[f->len] = '\0';
  *out = s;
  return KILN_STATUS_OK;
}

kiln_status kiln_pw_append_varints(const kiln_pw_reader_t *r, const kiln_pw_field_t *f,
                                   kiln_pw_i64_vec_t *out) {
  if (f->wire_type == KILN_PW_VARINT) {
    kiln_vec_push(out, (int64_t)f->value);
    return KILN_STATUS_OK;
  }
  KILN_RETURN_IF_ERROR_PLAIN(want(r, f, KILN_PW_LEN, "a varint or packed varints"));
  const uint8_t *p = f->data, *end = f->data + f->len;
  while (p < end) {
    uint64_t v;
    const char *why = NULL;
    const uint8_t *at = p;
    if (!read_varint(&p, end, &v, &why))
      return kiln_pw_error(r, f, "packed element at byte %zu: %s", offset_of(r, at), why);
    kiln_vec_push(out, (int64_t)v);
  }
  return KILN_STATUS_OK;
}

kiln_status kiln_pw_append_fixed32(const kiln_pw_reader_t *r, const kiln_pw_field_t *f,
                                   kiln_pw_u32_vec_t *out) {
  if (f->wire_type == KILN_PW_FIXED32) {
    kiln_vec_push(out, (uint32_t)f->value);
    return KILN_STATUS_OK;
  }
  KILN_RETURN_IF_ERROR_PLAIN(want(r, f, KILN_PW_LEN, "a fixed32 or packed fixed32s"));
  if (f->len % 4)
    return kiln_pw_error(r, f, "packed fixed32 payload of %zu bytes is not a multiple of 4",
                         f->len);
  kiln_vec_reserve(out, out->len + f->len / 4);
  for (size_t i = 0; i < f->len; i += 4) {
    const uint8_t *q = f->data + i;
    out->data[out->len++] =
        (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
  }
  return KILN_STATUS_OK;
}

kiln_status kiln_pw_append_fixed64(const kiln_pw_reader_t *r, const kiln_pw_field_t *f,
                                   kiln_pw_u64_vec_t *out) {
  if (f->wire_type == KILN_PW_FIXED64) {
    kiln_vec_push(out, f->value);
    return KILN_STATUS_OK;
  }
  KILN_RETURN_IF_ERROR_PLAIN(want(r, f, KILN_PW_LEN, "a fixed64 or packed fixed64s"));
  if (f->len % 8)
    return kiln_pw_error(r, f, "packed fixed64 payload of %zu bytes is not a multiple of 8",
                         f->len);
  kiln_vec_reserve(out, out->len + f->len / 8);
  for (size_t i = 0; i < f->len; i += 8) {
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) v = (v << 8) | f->data[i + (size_t)k];
    out->data[out->len++] = v;
  }
  return KILN_STATUS_OK;
}
