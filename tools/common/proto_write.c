#include "tools/common/proto_write.h"

#include <string.h>

#include "base/alloc.h"

void kiln_pb_free(kiln_pb_t *b) {
  kiln_free(b->data);
  memset(b, 0, sizeof *b);
}

void kiln_pb_raw(kiln_pb_t *b, const void *data, size_t n) {
  if (b->len + n > b->cap) {
    size_t c = b->cap ? b->cap * 2 : 64;
    while (c < b->len + n) c *= 2;
    b->data = kiln_realloc(b->data, c);
    b->cap = c;
  }
  if (n) memcpy(b->data + b->len, data, n);
  b->len += n;
}

void kiln_pb_varint(kiln_pb_t *b, uint64_t v) {
  uint8_t tmp[10];
  size_t n = 0;
  while (v >= 0x80) {
    tmp[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  tmp[n++] = (uint8_t)v;
  kiln_pb_raw(b, tmp, n);
}

void kiln_pb_tag(kiln_pb_t *b, uint32_t field, int wire_type) {
  kiln_pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wire_type);
}

void kiln_pb_u64(kiln_pb_t *b, uint32_t field, uint64_t v) {
  kiln_pb_tag(b, field, 0);
  kiln_pb_varint(b, v);
}

void kiln_pb_i64(kiln_pb_t *b, uint32_t field, int64_t v) {
  kiln_pb_u64(b, field, (uint64_t)v);
}

void kiln_pb_bool(kiln_pb_t *b, uint32_t field, bool v) {
  kiln_pb_u64(b, field, v ? 1 : 0);
}

void kiln_pb_fixed32(kiln_pb_t *b, uint32_t field, uint32_t v) {
  uint8_t t[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  kiln_pb_tag(b, field, 5);
  kiln_pb_raw(b, t, 4);
}

void kiln_pb_fixed64(kiln_pb_t *b, uint32_t field, uint64_t v) {
  uint8_t t[8];
  for (int i = 0; i < 8; i++) t[i] = (uint8_t)(v >> (8 * i));
  kiln_pb_tag(b, field, 1);
  kiln_pb_raw(b, t, 8);
}

void kiln_pb_bytes(kiln_pb_t *b, uint32_t field, const void *data, size_t n) {
  kiln_pb_tag(b, field, 2);
  kiln_pb_varint(b, n);
  kiln_pb_raw(b, data, n);
}

void kiln_pb_string(kiln_pb_t *b, uint32_t field, const char *s) {
  kiln_pb_bytes(b, field, s, strlen(s));
}

void kiln_pb_repeated(kiln_pb_t *b, uint32_t field, const int64_t *v, size_t n, bool packed) {
  if (!n) return;
  if (!packed) {
    for (size_t i = 0; i < n; i++) kiln_pb_i64(b, field, v[i]);
    return;
  }
  kiln_pb_t p = {0};
  for (size_t i = 0; i < n; i++) kiln_pb_varint(&p, (uint64_t)v[i]);
  kiln_pb_message(b, field, &p);
  kiln_pb_free(&p);
}

void kiln_pb_message(kiln_pb_t *b, uint32_t field, const kiln_pb_t *sub) {
  kiln_pb_bytes(b, field, sub->data, sub->len);
}
