/* Little-endian byte formats: a growable writer and a bounds-checked reader (serialized
 * executables, runtime/executable_serialize.h, and the compiler's custom-call recipes).
 *
 * Integers are written byte by byte, least significant first, whatever the host's order;
 * strings and byte runs are a length (u32 / u64) then the bytes. The reader never reads past
 * its end: the first failure (a truncation, a count that cannot fit, a string with a NUL) is
 * kept in `err` (DATA_LOSS / INVALID_ARGUMENT naming what was read), and every later read
 * returns zeros, empty strings and NULL, so a caller checks `err` once after a group of
 * reads.
 *
 * Thread-safety: not thread-safe: one thread uses a writer or reader at a time. */
#ifndef KILN_BASE_BYTE_IO_H_
#define KILN_BASE_BYTE_IO_H_

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/str.h"

typedef struct kiln_byte_writer {
  kiln_strbuf_t b; /* the bytes so far (b.data, b.len); kiln_strbuf_free releases them */
} kiln_byte_writer_t;

void kiln_bw_u8(kiln_byte_writer_t *w, uint8_t v);
void kiln_bw_u32(kiln_byte_writer_t *w, uint32_t v);
void kiln_bw_u64(kiln_byte_writer_t *w, uint64_t v);
void kiln_bw_f64(kiln_byte_writer_t *w, double v);
void kiln_bw_bytes(kiln_byte_writer_t *w, const void *p, uint64_t n); /* u64 length, bytes */
void kiln_bw_str(kiln_byte_writer_t *w, const char *s); /* u32 length, bytes; NULL as "" */

typedef struct kiln_byte_reader {
  const unsigned char *p;
  size_t left;
  kiln_status err; /* the first failure (owned; the caller takes or frees it) */
} kiln_byte_reader_t;

void kiln_br_init(kiln_byte_reader_t *r, const void *data, size_t len);
/* Records `s` as the reader's error unless it has one (then `s` is freed). */
void kiln_br_fail(kiln_byte_reader_t *r, kiln_status s);
/* `n` bytes (borrowed), or NULL after a truncation. */
const unsigned char *kiln_br_take(kiln_byte_reader_t *r, size_t n, const char *what);
uint8_t kiln_br_u8(kiln_byte_reader_t *r, const char *what);
uint32_t kiln_br_u32(kiln_byte_reader_t *r, const char *what);
uint64_t kiln_br_u64(kiln_byte_reader_t *r, const char *what);
double kiln_br_f64(kiln_byte_reader_t *r, const char *what);
/* A u32 count of entries of at least `min_bytes` each: 0 (and an error) when the bytes left
 * cannot hold them. */
uint32_t kiln_br_count(kiln_byte_reader_t *r, size_t min_bytes, const char *what);
/* A string: kiln_malloc'ed and NUL-terminated ("" after an error); the caller frees it. */
char *kiln_br_str(kiln_byte_reader_t *r, const char *what);
/* A byte run, borrowed from the input (NULL and *n = 0 when empty or after an error). */
const void *kiln_br_bytes(kiln_byte_reader_t *r, uint64_t *n, const char *what);

#endif /* KILN_BASE_BYTE_IO_H_ */
