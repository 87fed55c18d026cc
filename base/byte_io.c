/* Little-endian byte formats (byte_io.h). */
#include "base/byte_io.h"

#include <string.h>

#include "base/alloc.h"

void kiln_bw_u8(kiln_byte_writer_t *w, uint8_t v) {
  kiln_strbuf_append_n(&w->b, (const char *)&v, 1);
}

void kiln_bw_u32(kiln_byte_writer_t *w, uint32_t v) {
  unsigned char c[4];
  for (int i = 0; i < 4; i++) c[i] = (unsigned char)(v >> (8 * i));
  kiln_strbuf_append_n(&w->b, (const char *)c, 4);
}

void kiln_bw_u64(kiln_byte_writer_t *w, uint64_t v) {
  unsigned char c[8];
  for (int i = 0; i < 8; i++) c[i] = (unsigned char)(v >> (8 * i));
  kiln_strbuf_append_n(&w->b, (const char *)c, 8);
}

void kiln_bw_f64(kiln_byte_writer_t *w, double v) {
  uint64_t u;
  memcpy(&u, &v, 8);
  kiln_bw_u64(w, u);
}

void kiln_bw_bytes(kiln_byte_writer_t *w, const void *p, uint64_t n) {
  kiln_bw_u64(w, n);
  if (n) kiln_strbuf_append_n(&w->b, (const char *)p, (size_t)n);
}

void kiln_bw_str(kiln_byte_writer_t *w, const char *s) {
  size_t n = s ? strlen(s) : 0;
  kiln_bw_u32(w, (uint32_t)n);
  if (n) kiln_strbuf_append_n(&w->b, s, n);
}

void kiln_br_init(kiln_byte_reader_t *r, const void *data, size_t len) {
  memset(r, 0, sizeof(*r));
  r->p = data;
  r->left = data ? len : 0;
}

void kiln_br_fail(kiln_byte_reader_t *r, kiln_status s) {
  if (!r->err)
    r->err = s;
  else
    kiln_status_free(s);
}

const unsigned char *kiln_br_take(kiln_byte_reader_t *r, size_t n, const char *what) {
  if (r->err) return NULL;
  if (n > r->left) {
    kiln_br_fail(r, kiln_status_make(KILN_DATA_LOSS, "truncated: %s needs %zu bytes, %zu left",
                                     what, n, r->left));
    return NULL;
  }
  const unsigned char *p = r->p;
  r->p += n;
  r->left -= n;
  return p;
}

uint8_t kiln_br_u8(kiln_byte_reader_t *r, const char *what) {
  const unsigned char *p = kiln_br_take(r, 1, what);
  return p ? p[0] : 0;
}

uint32_t kiln_br_u32(kiln_byte_reader_t *r, const char *what) {
  const unsigned char *p = kiln_br_take(r, 4, what);
  uint32_t v = 0;
  for (int i = 0; p && i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
  return v;
}

uint64_t kiln_br_u64(kiln_byte_reader_t *r, const char *what) {
  const unsigned char *p = kiln_br_take(r, 8, what);
  uint64_t v = 0;
  for (int i = 0; p && i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

double kiln_br_f64(kiln_byte_reader_t *r, const char *what) {
  uint64_t u = kiln_br_u64(r, what);
  double v;
  memcpy(&v, &u, 8);
  return v;
}

uint32_t kiln_br_count(kiln_byte_reader_t *r, size_t min_bytes, const char *what) {
  uint32_t n = kiln_br_u32(r, what);
  if (!r->err && (uint64_t)n * min_bytes > r->left) {
    kiln_br_fail(r, kiln_status_make(KILN_DATA_LOSS, "%s: %u entries cannot fit in %zu bytes", what,
                                     n, r->left));
    return 0;
  }
  return r->err ? 0 : n;
}

char *kiln_br_str(kiln_byte_reader_t *r, const char *what) {
  uint32_t n = kiln_br_u32(r, what);
  const unsigned char *p = kiln_br_take(r, n, what);
  if (!p) return kiln_strdup("");
  if (memchr(p, 0, n)) {
    kiln_br_fail(r, KILN_ERR_INVALID("%s holds a NUL byte", what));
    return kiln_strdup("");
  }
  char *s = kiln_malloc((size_t)n + 1);
  memcpy(s, p, n);
  s[n] = 0;
  return s;
}

const void *kiln_br_bytes(kiln_byte_reader_t *r, uint64_t *n, const char *what) {
  *n = kiln_br_u64(r, what);
  if (r->err) {
    *n = 0;
    return NULL;
  }
  if (*n > r->left) {
    kiln_br_fail(r, kiln_status_make(KILN_DATA_LOSS, "truncated: %s of %llu bytes, %zu left", what,
                                     (unsigned long long)*n, r->left));
    *n = 0;
    return NULL;
  }
  return kiln_br_take(r, (size_t)*n, what);
}
