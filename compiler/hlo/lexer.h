/* Character-level scanning helpers for the HLO text parser (internal to compiler/hlo).
 *
 * The lexer is a cursor over a byte range [p, end) of a larger buffer `base` (the whole
 * file: line and column numbers in messages count from `base`, so a module cut out of a
 * multi-module file still reports positions in the file). The input need not be
 * NUL-terminated; nothing reads outside [base, end).
 *
 * Errors are sticky: the first one is kept in `err` and every helper returns false once an
 * error is set. Positions are computed only when an error is reported, so scanning itself
 * never counts lines. */
#ifndef KILN_HLO_LEXER_H_
#define KILN_HLO_LEXER_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/str.h"

typedef struct kiln_hlo_lexer {
  const char *base; /* start of the whole file (line 1, column 1) */
  const char *p;    /* cursor */
  const char *end;  /* end of the range being parsed */
  const char *filename;
  kiln_status err; /* first error, or NULL */
} kiln_hlo_lexer_t;

void kiln_hlo_lexer_init(kiln_hlo_lexer_t *L, const char *base, const char *begin,
                         const char *end, const char *filename);

/* Skips whitespace, `// ...` line comments and `/ * ... * /` block comments. An unterminated
 * block comment is an error. */
void kiln_hlo_lexer_skip_ws(kiln_hlo_lexer_t *L);

/* The next significant character (after skip_ws), or 0 at the end of input. */
char kiln_hlo_lexer_peek(kiln_hlo_lexer_t *L);
bool kiln_hlo_lexer_at_end(kiln_hlo_lexer_t *L);
/* Consumes `c` if it is the next significant character. */
bool kiln_hlo_lexer_accept(kiln_hlo_lexer_t *L, char c);
/* Consumes the two-character operator `op` ("->", "<=") if next. */
bool kiln_hlo_lexer_accept_op(kiln_hlo_lexer_t *L, const char *op);
/* Consumes the keyword `w` if it is next and not followed by a name character. */
bool kiln_hlo_lexer_accept_word(kiln_hlo_lexer_t *L, const char *w);
/* Consumes `c` or reports "expected 'c', found <token>". */
bool kiln_hlo_lexer_expect(kiln_hlo_lexer_t *L, char c);

static inline bool kiln_hlo_is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '.' || c == '-';
}

/* Reads a name: an optional '%' (dropped) and then one or more name characters. On
 * success (*s, *n) is the name without '%' and *pos (if non-NULL) where the token starts.
 * `what` names the expected thing in the error message. */
bool kiln_hlo_lexer_name(kiln_hlo_lexer_t *L, const char *what, const char **s, size_t *n,
                         const char **pos);
/* Reads a run of name characters with no '%' (opcodes, attribute keys, enum values). */
bool kiln_hlo_lexer_word(kiln_hlo_lexer_t *L, const char *what, const char **s, size_t *n);
/* Reads a decimal integer with an optional sign; out of int64 range is an error. */
bool kiln_hlo_lexer_int64(kiln_hlo_lexer_t *L, const char *what, int64_t *out);
/* Reads an unsigned decimal magnitude with an optional sign; for literals of every
 * integer width. */
bool kiln_hlo_lexer_integer(kiln_hlo_lexer_t *L, const char *what, bool *negative,
                            uint64_t *magnitude);
/* Reads a "..." string, decoding C escapes (\n \t \\ \" \' octal \ooo hex \xHH) into
 * `out` (appended; `out` is NUL-terminated). *has_nul reports a decoded NUL byte. The
 * verbatim text including quotes is [*raw_begin, L->p). */
bool kiln_hlo_lexer_string(kiln_hlo_lexer_t *L, kiln_strbuf_t *out, bool *has_nul,
                           const char **raw_begin);

/* Captures an attribute value verbatim into `out` (reset first): from the cursor up to the
 * next `,` at bracket depth 0 (when stop_at_comma), the end of the line at depth 0, a
 * closing bracket that was not opened in the value, or the end of input. Brackets {[( are
 * balanced, "..." strings are copied with their escapes, comments are dropped, whitespace
 * runs outside strings become one space and leading/trailing whitespace is dropped. An
 * empty value is an error. */
bool kiln_hlo_lexer_capture(kiln_hlo_lexer_t *L, bool stop_at_comma, kiln_strbuf_t *out);

/* Line and column (1-based) of `pos`. */
void kiln_hlo_lexer_line_col(const kiln_hlo_lexer_t *L, const char *pos, int *line, int *col);
/* Reports "file:line:col: expected <what>, found <token at the cursor>". Returns false. */
bool kiln_hlo_lexer_error_expected(kiln_hlo_lexer_t *L, const char *what);
/* Reports "file:line:col: <message>" at `pos` with `code`. Returns false. */
bool kiln_hlo_lexer_error_at(kiln_hlo_lexer_t *L, const char *pos, kiln_status_code_t code,
                             const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif /* KILN_HLO_LEXER_H_ */
