/* A small, safe reader of the protobuf wire format (proto2/proto3 binary encoding).
 *
 * It reads fields one at a time from a bounded buffer: varints (at most 10 bytes, the
 * tenth carrying one bit), fixed32, fixed64, length-delimited payloads (bounds-checked
 * against the enclosing message) and groups (skipped whole, nesting bounded). A caller
 * walks a message with kiln_pw_next, dispatches on the field number and converts values
 * with the kiln_pw_as_* helpers, which check the wire type; a submessage is read with a
 * child reader (kiln_pw_sub) whose offsets stay those of the outermost buffer, so every
 * error names the message, the field number and the byte offset. Nothing is allocated
 * except by the repeated-field helpers, which grow caller-owned vectors by at most one
 * element per input byte.
 *
 * Thread-safety: a reader is used by one thread; the bytes are only read. */
#ifndef KILN_BASE_PROTO_WIRE_H_
#define KILN_BASE_PROTO_WIRE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/vec.h"

typedef enum kiln_pw_wire_type {
  KILN_PW_VARINT = 0,
  KILN_PW_FIXED64 = 1,
  KILN_PW_LEN = 2,
  KILN_PW_GROUP_START = 3,
  KILN_PW_GROUP_END = 4,
  KILN_PW_FIXED32 = 5,
} kiln_pw_wire_type_t;

/* How deep messages and groups may nest (protobuf's own default recursion limit). */
#define KILN_PW_MAX_DEPTH 100

typedef struct kiln_pw_reader {
  const uint8_t *base; /* start of the outermost buffer: offsets count from here */
  const uint8_t *p, *end;
  int depth;           /* 0 for the outermost message */
  const char *message; /* message name for errors (e.g. "CompileOptionsProto") */
} kiln_pw_reader_t;

typedef struct kiln_pw_field {
  uint32_t number;
  kiln_pw_wire_type_t wire_type;
  size_t offset;       /* byte offset of the tag from the outermost buffer's start */
  uint64_t value;      /* VARINT, FIXED32 (low 32 bits), FIXED64 */
  const uint8_t *data; /* LEN: the payload */
  size_t len;
} kiln_pw_field_t;

/* Starts reading the message in `bytes` (n bytes; bytes may be NULL when n is 0). */
void kiln_pw_reader_init(kiln_pw_reader_t *r, const void *bytes, size_t n, const char *message);
/* True while fields remain. */
static inline bool kiln_pw_more(const kiln_pw_reader_t *r) {
  return r->p < r->end;
}
/* Reads the next field. A group (wire type 3) is skipped as a whole and returned with
 * wire_type KILN_PW_GROUP_START so callers treat it as unknown. Errors: truncated or
 * overlong varints, field number 0 or above 2^29-1, wire types 6/7, lengths past the end,
 * an end-group without a start, groups nested deeper than KILN_PW_MAX_DEPTH. */
kiln_status kiln_pw_next(kiln_pw_reader_t *r, kiln_pw_field_t *f);
/* A reader over the LEN field `f` (a submessage named `message`), one level deeper. */
kiln_status kiln_pw_sub(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, const char *message,
                        kiln_pw_reader_t *child);
/* INVALID_ARGUMENT "<message> field <n> at byte <offset>: <what>". */
kiln_status kiln_pw_error(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Scalars: each checks the wire type (a mismatch is an error naming the field). */
kiln_status kiln_pw_as_u64(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, uint64_t *out);
kiln_status kiln_pw_as_i64(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, int64_t *out);
/* int32/enum: the low 32 bits, sign-extended (negative int32s are 10-byte varints). */
kiln_status kiln_pw_as_i32(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, int32_t *out);
kiln_status kiln_pw_as_bool(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, bool *out);
/* sint32/sint64 (zigzag). */
kiln_status kiln_pw_as_sint64(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, int64_t *out);
kiln_status kiln_pw_as_float(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, float *out);
kiln_status kiln_pw_as_double(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, double *out);
/* string/bytes: borrowed pointer and length (not NUL-terminated). */
kiln_status kiln_pw_as_bytes(const kiln_pw_reader_t *r, const kiln_pw_field_t *f,
                             const uint8_t **data, size_t *len);
/* string: a kiln_malloc'ed NUL-terminated copy; an embedded NUL is an error. */
kiln_status kiln_pw_as_string(const kiln_pw_reader_t *r, const kiln_pw_field_t *f, char **out);

/* Repeated scalars, packed (one LEN field) or not (one value per field): append to `out`. */
typedef KILN_VEC(int64_t) kiln_pw_i64_vec_t;
typedef KILN_VEC(uint32_t) kiln_pw_u32_vec_t;
typedef KILN_VEC(uint64_t) kiln_pw_u64_vec_t;
/* int64/uint64/int32/enum/bool varints (int32 values as sign-extended 64-bit). */
kiln_status kiln_pw_append_varints(const kiln_pw_reader_t *r, const kiln_pw_field_t *f,
                                   kiln_pw_i64_vec_t *out);
/* fixed32/float bit patterns. */
kiln_status kiln_pw_append_fixed32(const kiln_pw_reader_t *r, const kiln_pw_field_t *f,
                                   kiln_pw_u32_vec_t *out);
/* fixed64/double bit patterns. */
kiln_status kiln_pw_append_fixed64(const kiln_pw_reader_t *r, const kiln_pw_field_t *f,
                                   kiln_pw_u64_vec_t *out);

#endif /* KILN_BASE_PROTO_WIRE_H_ */
