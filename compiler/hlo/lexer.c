#include "compiler/hlo/lexer.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void kiln_hlo_lexer_init(kiln_hlo_lexer_t *L, const char *base, const char *begin,
                         const char *end, const char *filename) {
  L->base = base;
  L->p = begin;
  L->end = end;
  L->filename = filename ? filename : "<input>";
  L->err = NULL;
}

void kiln_hlo_lexer_line_col(const kiln_hlo_lexer_t *L, const char *pos, int *line, int *col) {
  int ln = 1;
  const char *line_start = L->base;
  for (const char *q = L->base; q < pos; q++) {
    if (*q == '\n') {
      ln++;
      line_start = q + 1;
    }
  }
  *line = ln;
  *col = (int)(pos - line_start) + 1;
}

static bool error_va(kiln_hlo_lexer_t *L, const char *pos, kiln_status_code_t code,
                     const char *fmt, va_list ap) {
  if (L->err) return false;
  int line, col;
  kiln_hlo_lexer_line_col(L, pos, &line, &col);
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, "%s:%d:%d: ", L->filename, line, col);
  kiln_strbuf_vprintf(&b, fmt, ap);
  L->err = kiln_status_make(code, "%s", kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return false;
}

bool kiln_hlo_lexer_error_at(kiln_hlo_lexer_t *L, const char *pos, kiln_status_code_t code,
                             const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  error_va(L, pos, code, fmt, ap);
  va_end(ap);
  return false;
}

/* Appends a printable rendering of the token at `p` (quoted) or "end of input". */
static void describe_token(const kiln_hlo_lexer_t *L, const char *p, kiln_strbuf_t *b) {
  if (p >= L->end) {
    kiln_strbuf_append(b, "end of input");
    return;
  }
  const char *q = p;
  enum { kMax = 40 };
  if (*q == '"') {
    q++;
    while (q < L->end && *q != '"' && *q != '\n' && q - p < kMax) q += (*q == '\\' && q + 1 < L->end) ? 2 : 1;
    if (q < L->end && *q == '"') q++;
  } else if (*q == '%' || kiln_hlo_is_name_char(*q)) {
    q++;
    while (q < L->end && kiln_hlo_is_name_char(*q) && q - p < kMax) q++;
  } else if (q + 1 < L->end && ((q[0] == '-' && q[1] == '>') || (q[0] == '<' && q[1] == '='))) {
    q += 2;
  } else {
    q++;
  }
  if (q > L->end) q = L->end;
  kiln_strbuf_append_char(b, '\'');
  for (const char *c = p; c < q; c++) {
    unsigned char u = (unsigned char)*c;
    if (u < 0x20 || u >= 0x7f)
      kiln_strbuf_printf(b, "\\x%02x", u);
    else
      kiln_strbuf_append_char(b, (char)u);
  }
  if (q - p >= kMax && q < L->end && kiln_hlo_is_name_char(*q)) kiln_strbuf_append(b, "...");
  kiln_strbuf_append_char(b, '\'');
}

bool kiln_hlo_lexer_error_expected(kiln_hlo_lexer_t *L, const char *what) {
  if (L->err) return false;
  kiln_strbuf_t b = {0};
  describe_token(L, L->p, &b);
  kiln_hlo_lexer_error_at(L, L->p, KILN_INVALID_ARGUMENT, "expected %s, found %s", what,
                          kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return false;
}

void kiln_hlo_lexer_skip_ws(kiln_hlo_lexer_t *L) {
  const char *p = L->p, *end = L->end;
  while (p < end) {
    char c = *p;
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      p++;
    } else if (c == '/' && p + 1 < end && p[1] == '/') {
      const char *nl = memchr(p, '\n', (size_t)(end - p));
      p = nl ? nl + 1 : end;
    } else if (c == '/' && p + 1 < end && p[1] == '*') {
      const char *q = p + 2;
      while (q + 1 < end && !(q[0] == '*' && q[1] == '/')) q++;
      if (q + 1 >= end) {
        kiln_hlo_lexer_error_at(L, p, KILN_INVALID_ARGUMENT, "unterminated comment");
        p = end;
        break;
      }
      p = q + 2;
    } else {
      break;
    }
  }
  L->p = p;
}

char kiln_hlo_lexer_peek(kiln_hlo_lexer_t *L) {
  kiln_hlo_lexer_skip_ws(L);
  return L->p < L->end ? *L->p : 0;
}

bool kiln_hlo_lexer_at_end(kiln_hlo_lexer_t *L) {
  kiln_hlo_lexer_skip_ws(L);
  return L->p >= L->end;
}

bool kiln_hlo_lexer_accept(kiln_hlo_lexer_t *L, char c) {
  kiln_hlo_lexer_skip_ws(L);
  if (L->p < L->end && *L->p == c) {
    L->p++;
    return true;
  }
  return false;
}

bool kiln_hlo_lexer_accept_op(kiln_hlo_lexer_t *L, const char *op) {
  kiln_hlo_lexer_skip_ws(L);
  if (L->end - L->p >= 2 && L->p[0] == op[0] && L->p[1] == op[1]) {
    L->p += 2;
    return true;
  }
  return false;
}

bool kiln_hlo_lexer_accept_word(kiln_hlo_lexer_t *L, const char *w) {
  kiln_hlo_lexer_skip_ws(L);
  size_t n = strlen(w);
  if ((size_t)(L->end - L->p) < n || memcmp(L->p, w, n) != 0) return false;
  if (L->p + n < L->end && kiln_hlo_is_name_char(L->p[n])) return false;
  L->p += n;
  return true;
}

bool kiln_hlo_lexer_expect(kiln_hlo_lexer_t *L, char c) {
  if (L->err) return false;
  if (kiln_hlo_lexer_accept(L, c)) return true;
  char what[4] = {'\'', c, '\'', 0};
  return kiln_hlo_lexer_error_expected(L, what);
}

bool kiln_hlo_lexer_word(kiln_hlo_lexer_t *L, const char *what, const char **s, size_t *n) {
  if (L->err) return false;
  kiln_hlo_lexer_skip_ws(L);
  const char *q = L->p;
  while (q < L->end && kiln_hlo_is_name_char(*q)) q++;
  if (q == L->p) return kiln_hlo_lexer_error_expected(L, what);
  *s = L->p;
  *n = (size_t)(q - L->p);
  L->p = q;
  return true;
}

bool kiln_hlo_lexer_name(kiln_hlo_lexer_t *L, const char *what, const char **s, size_t *n,
                         const char **pos) {
  if (L->err) return false;
  kiln_hlo_lexer_skip_ws(L);
  const char *start = L->p, *q = L->p;
  if (q < L->end && *q == '%') q++;
  const char *name = q;
  while (q < L->end && kiln_hlo_is_name_char(*q)) q++;
  if (q == name) return kiln_hlo_lexer_error_expected(L, what);
  *s = name;
  *n = (size_t)(q - name);
  if (pos) *pos = start;
  L->p = q;
  return true;
}

bool kiln_hlo_lexer_integer(kiln_hlo_lexer_t *L, const char *what, bool *negative,
                            uint64_t *magnitude) {
  if (L->err) return false;
  kiln_hlo_lexer_skip_ws(L);
  const char *start = L->p, *q = L->p;
  bool neg = false;
  if (q < L->end && (*q == '-' || *q == '+')) {
    neg = *q == '-';
    q++;
  }
  if (q >= L->end || *q < '0' || *q > '9') return kiln_hlo_lexer_error_expected(L, what);
  uint64_t v = 0;
  while (q < L->end && *q >= '0' && *q <= '9') {
    unsigned d = (unsigned)(*q - '0');
    if (v > (UINT64_MAX - d) / 10) {
      while (q < L->end && *q >= '0' && *q <= '9') q++;
      return kiln_hlo_lexer_error_at(L, start, KILN_INVALID_ARGUMENT,
                                     "integer '%.*s' is out of range", (int)(q - start), start);
    }
    v = v * 10 + d;
    q++;
  }
  L->p = q;
  *negative = neg;
  *magnitude = v;
  return true;
}

bool kiln_hlo_lexer_int64(kiln_hlo_lexer_t *L, const char *what, int64_t *out) {
  kiln_hlo_lexer_skip_ws(L);
  const char *start = L->p;
  bool neg = false;
  uint64_t mag = 0;
  if (!kiln_hlo_lexer_integer(L, what, &neg, &mag)) return false;
  if (mag > (uint64_t)INT64_MAX + (neg ? 1u : 0u))
    return kiln_hlo_lexer_error_at(L, start, KILN_INVALID_ARGUMENT,
                                   "integer '%.*s' is out of range for s64",
                                   (int)(L->p - start), start);
  *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
  return true;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool kiln_hlo_lexer_string(kiln_hlo_lexer_t *L, kiln_strbuf_t *out, bool *has_nul,
                           const char **raw_begin) {
  if (L->err) return false;
  kiln_hlo_lexer_skip_ws(L);
  const char *start = L->p;
  if (start >= L->end || *start != '"') return kiln_hlo_lexer_error_expected(L, "string");
  const char *q = start + 1, *end = L->end;
  bool nul = false;
  for (;;) {
    const char *run = q;
    while (q < end && *q != '"' && *q != '\\') q++;
    if (q > run) kiln_strbuf_append_n(out, run, (size_t)(q - run));
    if (q >= end)
      return kiln_hlo_lexer_error_at(L, start, KILN_INVALID_ARGUMENT, "unterminated string");
    if (*q == '"') break;
    /* escape */
    q++;
    if (q >= end)
      return kiln_hlo_lexer_error_at(L, start, KILN_INVALID_ARGUMENT, "unterminated string");
    char c = *q++;
    int v;
    switch (c) {
      case 'n': v = '\n'; break;
      case 't': v = '\t'; break;
      case 'r': v = '\r'; break;
      case 'a': v = '\a'; break;
      case 'b': v = '\b'; break;
      case 'f': v = '\f'; break;
      case 'v': v = '\v'; break;
      case 'x': {
        v = 0;
        int digits = 0;
        while (q < end && digits < 2 && hex_value(*q) >= 0) v = v * 16 + hex_value(*q++), digits++;
        if (!digits) v = 'x';
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          v = c - '0';
          for (int i = 0; i < 2 && q < end && *q >= '0' && *q <= '7'; i++) v = v * 8 + (*q++ - '0');
          v &= 0xff;
        } else {
          v = (unsigned char)c; /* \\ \" \' \? and unknown escapes keep the character */
        }
    }
    if (v == 0) nul = true;
    kiln_strbuf_append_char(out, (char)v);
  }
  L->p = q + 1;
  if (!out->data) kiln_strbuf_append_n(out, "", 0);
  if (has_nul) *has_nul = nul;
  if (raw_begin) *raw_begin = start;
  return true;
}

bool kiln_hlo_lexer_capture(kiln_hlo_lexer_t *L, bool stop_at_comma, kiln_strbuf_t *out) {
  if (L->err) return false;
  out->len = 0;
  if (out->data) out->data[0] = 0;
  kiln_hlo_lexer_skip_ws(L);
  const char *q = L->p, *end = L->end, *start = L->p;
  const char *open_pos = NULL; /* outermost open bracket, for the error message */
  int64_t depth = 0;
  bool space = false;
  while (q < end) {
    /* Fast path: a run of ordinary characters. */
    const char *run = q;
    while (q < end) {
      char c = *q;
      if (c == '"' || c == '/' || c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == ',' ||
          c == '{' || c == '}' || c == '[' || c == ']' || c == '(' || c == ')' || c == '\f' ||
          c == '\v')
        break;
      q++;
    }
    if (q > run) {
      if (space && out->len) kiln_strbuf_append_char(out, ' ');
      space = false;
      kiln_strbuf_append_n(out, run, (size_t)(q - run));
      continue;
    }
    char c = *q;
    if (c == '"') {
      const char *s = q++;
      while (q < end && *q != '"') q += (*q == '\\' && q + 1 < end) ? 2 : 1;
      if (q >= end) {
        L->p = end;
        return kiln_hlo_lexer_error_at(L, s, KILN_INVALID_ARGUMENT, "unterminated string");
      }
      q++;
      if (space && out->len) kiln_strbuf_append_char(out, ' ');
      space = false;
      kiln_strbuf_append_n(out, s, (size_t)(q - s));
      continue;
    }
    if (c == '/' && q + 1 < end && q[1] == '/') {
      const char *nl = memchr(q, '\n', (size_t)(end - q));
      q = nl ? nl : end; /* the newline itself is handled below */
      space = true;
      continue;
    }
    if (c == '/' && q + 1 < end && q[1] == '*') {
      const char *s = q;
      q += 2;
      while (q + 1 < end && !(q[0] == '*' && q[1] == '/')) q++;
      if (q + 1 >= end) {
        L->p = end;
        return kiln_hlo_lexer_error_at(L, s, KILN_INVALID_ARGUMENT, "unterminated comment");
      }
      q += 2;
      space = true;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v' || c == '\n') {
      if (c == '\n' && depth == 0) break;
      space = true;
      q++;
      continue;
    }
    if (c == ',' && depth == 0 && stop_at_comma) break;
    if (c == '{' || c == '[' || c == '(') {
      if (depth == 0) open_pos = q;
      depth++;
    } else if (c == '}' || c == ']' || c == ')') {
      if (depth == 0) break;
      depth--;
    }
    if (space && out->len) kiln_strbuf_append_char(out, ' ');
    space = false;
    kiln_strbuf_append_char(out, c);
    q++;
  }
  L->p = q;
  if (depth > 0)
    return kiln_hlo_lexer_error_at(L, open_pos, KILN_INVALID_ARGUMENT,
                                   "unbalanced '%c' in attribute value", *open_pos);
  if (out->len == 0) {
    L->p = start;
    return kiln_hlo_lexer_error_expected(L, "attribute value");
  }
  return true;
}
