/* A protobuf wire-format writer for tests and tools (not the product): fields appended to
 * a growable buffer; a submessage is built in its own buffer and appended with its length. */
#ifndef KILN_TOOLS_PROTO_WRITE_H_
#define KILN_TOOLS_PROTO_WRITE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kiln_pb {
  uint8_t *data;
  size_t len, cap;
} kiln_pb_t;

void kiln_pb_free(kiln_pb_t *b);
void kiln_pb_raw(kiln_pb_t *b, const void *data, size_t n);
void kiln_pb_varint(kiln_pb_t *b, uint64_t v); /* a bare varint */
void kiln_pb_tag(kiln_pb_t *b, uint32_t field, int wire_type);
/* Scalar fields (always written, even when zero). */
void kiln_pb_u64(kiln_pb_t *b, uint32_t field, uint64_t v);
void kiln_pb_i64(kiln_pb_t *b, uint32_t field, int64_t v);
void kiln_pb_bool(kiln_pb_t *b, uint32_t field, bool v);
void kiln_pb_fixed32(kiln_pb_t *b, uint32_t field, uint32_t v);
void kiln_pb_fixed64(kiln_pb_t *b, uint32_t field, uint64_t v);
void kiln_pb_bytes(kiln_pb_t *b, uint32_t field, const void *data, size_t n);
void kiln_pb_string(kiln_pb_t *b, uint32_t field, const char *s);
/* A repeated varint field: packed (one LEN field) or one field per value. */
void kiln_pb_repeated(kiln_pb_t *b, uint32_t field, const int64_t *v, size_t n, bool packed);
/* Appends `sub` as a length-delimited field. */
void kiln_pb_message(kiln_pb_t *b, uint32_t field, const kiln_pb_t *sub);

#endif /* KILN_TOOLS_PROTO_WRITE_H_ */
