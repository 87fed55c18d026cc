#include "base/str.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"

static void reserve(kiln_strbuf_t *b, size_t extra) {
  size_t need = b->len + extra + 1;
  if (need <= b->cap) return;
  size_t c = b->cap ? b->cap * 2 : 64;
  while (c < need) c *= 2;
  b->data = kiln_realloc(b->data, c);
  b->cap = c;
}

void kiln_strbuf_append_n(kiln_strbuf_t *b, const char *s, size_t n) {
  reserve(b, n);
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = 0;
}

void kiln_strbuf_append(kiln_strbuf_t *b, const char *s) { kiln_strbuf_append_n(b, s, strlen(s)); }

void kiln_strbuf_append_char(kiln_strbuf_t *b, char c) {
  reserve(b, 1);
  b->data[b->len++] = c;
  b->data[b->len] = 0;
}

void kiln_strbuf_vprintf(kiln_strbuf_t *b, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n <= 0) return;
  reserve(b, (size_t)n);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
}

void kiln_strbuf_printf(kiln_strbuf_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kiln_strbuf_vprintf(b, fmt, ap);
  va_end(ap);
}

const char *kiln_strbuf_cstr(kiln_strbuf_t *b) { return b->data ? b->data : ""; }

char *kiln_strbuf_take(kiln_strbuf_t *b) {
  char *d = b->data;
  if (!d) d = kiln_strdup("");
  b->data = NULL;
  b->len = b->cap = 0;
  return d;
}

void kiln_strbuf_free(kiln_strbuf_t *b) {
  kiln_free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

bool kiln_str_starts_with(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool kiln_str_ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

uint64_t kiln_hash_bytes(const void *data, size_t n) {
  const unsigned char *p = data;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

kiln_status kiln_read_file(const char *path, char **out, size_t *out_len) {
  *out = NULL;
  if (out_len) *out_len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return kiln_status_make(KILN_NOT_FOUND, "cannot open '%s': %s", path, strerror(errno));
  kiln_strbuf_t b = {0};
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) kiln_strbuf_append_n(&b, chunk, n);
  int err = ferror(f);
  fclose(f);
  if (err) {
    kiln_strbuf_free(&b);
    return kiln_status_make(KILN_DATA_LOSS, "error reading '%s'", path);
  }
  if (out_len) *out_len = b.len;
  *out = kiln_strbuf_take(&b);
  return NULL;
}
