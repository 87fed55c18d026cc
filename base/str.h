/* String helpers: a growable string builder and small utilities. */
#ifndef KILN_BASE_STR_H_
#define KILN_BASE_STR_H_

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kiln_strbuf {
  char *data; /* always NUL-terminated once anything was appended */
  size_t len, cap;
} kiln_strbuf_t;

void kiln_strbuf_append(kiln_strbuf_t *b, const char *s);
void kiln_strbuf_append_n(kiln_strbuf_t *b, const char *s, size_t n);
void kiln_strbuf_append_char(kiln_strbuf_t *b, char c);
void kiln_strbuf_printf(kiln_strbuf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void kiln_strbuf_vprintf(kiln_strbuf_t *b, const char *fmt, va_list ap);
/* Returns the buffer's string (owned by the buffer; "" if empty). */
const char *kiln_strbuf_cstr(kiln_strbuf_t *b);
/* Hands ownership of the string to the caller (free with kiln_free); resets the buffer. */
char *kiln_strbuf_take(kiln_strbuf_t *b);
void kiln_strbuf_free(kiln_strbuf_t *b);

bool kiln_str_starts_with(const char *s, const char *prefix);
bool kiln_str_ends_with(const char *s, const char *suffix);
/* 64-bit FNV-1a over bytes. */
uint64_t kiln_hash_bytes(const void *data, size_t n);
/* Reads a whole file into a NUL-terminated heap buffer (free with kiln_free). */
struct kiln_status_payload *kiln_read_file(const char *path, char **out, size_t *out_len);

#endif /* KILN_BASE_STR_H_ */
