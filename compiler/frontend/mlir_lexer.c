/* The MLIR text reader's scanning helpers, messages and symbol tables. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/frontend/mlir_text_internal.h"

int32_t kiln_mlirp_line_of(kiln_mlirp_t *P, const char *at) {
  if (at < P->line_pos) { /* rare (messages about an earlier spot): count from the start */
    P->line_pos = P->base;
    P->line_no = P->first_line;
  }
  const char *q = P->line_pos;
  while (q < at && (q = memchr(q, '\n', (size_t)(at - q))) != NULL) {
    P->line_no++;
    q++;
  }
  P->line_pos = at;
  return P->line_no;
}

static void describe_found(kiln_mlirp_t *P, const char *at, char *buf, size_t cap) {
  if (at >= P->end) {
    snprintf(buf, cap, "end of input");
    return;
  }
  size_t n = 0;
  const char *q = at;
  bool word =
      kiln_mlirp_is_id_char(*q) || *q == '%' || *q == '#' || *q == '@' || *q == '!' || *q == '-';
  if (word) {
    while (q < P->end && n < 24 && (kiln_mlirp_is_id_char(*q) || (q == at))) {
      q++;
      n++;
    }
  } else {
    n = 1;
  }
  snprintf(buf, cap, "'");
  size_t k = 1;
  for (size_t i = 0; i < n && k + 5 < cap; i++) {
    unsigned char c = (unsigned char)at[i];
    if (c >= 32 && c < 127) {
      buf[k++] = (char)c;
    } else {
      k += (size_t)snprintf(buf + k, cap - k, "\\%02X", c);
    }
  }
  snprintf(buf + k, cap - k, "'");
}

static bool fail_va(kiln_mlirp_t *P, const char *at, const char *fmt, va_list ap) {
  if (P->err) return false;
  int32_t line = kiln_mlirp_line_of(P, at);
  const char *ls = at;
  while (ls > P->base && ls[-1] != '\n') ls--;
  char msg[512];
  vsnprintf(msg, sizeof(msg), fmt, ap);
  P->err =
      kiln_status_make(KILN_INVALID_ARGUMENT, "%s:%d:%d: %s", P->filename ? P->filename : "<mlir>",
                       (int)line, (int)(at - ls) + 1, msg);
  return false;
}

bool kiln_mlirp_fail_at(kiln_mlirp_t *P, const char *at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fail_va(P, at, fmt, ap);
  va_end(ap);
  return false;
}

bool kiln_mlirp_failf(kiln_mlirp_t *P, const char *fmt, ...) {
  kiln_mlirp_ws(P);
  va_list ap;
  va_start(ap, fmt);
  fail_va(P, P->p, fmt, ap);
  va_end(ap);
  return false;
}

bool kiln_mlirp_fail(kiln_mlirp_t *P, const char *what) {
  kiln_mlirp_ws(P);
  char found[128];
  describe_found(P, P->p, found, sizeof(found));
  return kiln_mlirp_fail_at(P, P->p, "expected %s, found %s", what, found);
}

void kiln_mlirp_ws(kiln_mlirp_t *P) {
  const char *p = P->p, *e = P->end;
  for (;;) {
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')) p++;
    if (p + 1 < e && p[0] == '/' && p[1] == '/') {
      while (p < e && *p != '\n') p++;
      continue;
    }
    break;
  }
  P->p = p;
}

char kiln_mlirp_peek(kiln_mlirp_t *P) {
  kiln_mlirp_ws(P);
  return P->p < P->end ? *P->p : 0;
}

char kiln_mlirp_peek2(kiln_mlirp_t *P) {
  kiln_mlirp_ws(P);
  return P->p + 1 < P->end ? P->p[1] : 0;
}

bool kiln_mlirp_accept(kiln_mlirp_t *P, char c) {
  if (P->err) return false;
  if (kiln_mlirp_peek(P) == c && P->p < P->end) {
    P->p++;
    return true;
  }
  return false;
}

bool kiln_mlirp_accept_str(kiln_mlirp_t *P, const char *s) {
  if (P->err) return false;
  kiln_mlirp_ws(P);
  size_t n = strlen(s);
  if ((size_t)(P->end - P->p) >= n && memcmp(P->p, s, n) == 0) {
    P->p += n;
    return true;
  }
  return false;
}

bool kiln_mlirp_expect(kiln_mlirp_t *P, char c) {
  if (kiln_mlirp_accept(P, c)) return true;
  char what[8] = {'\'', c, '\'', 0};
  return kiln_mlirp_fail(P, what);
}

bool kiln_mlirp_expect_str(kiln_mlirp_t *P, const char *s) {
  if (kiln_mlirp_accept_str(P, s)) return true;
  char what[64];
  snprintf(what, sizeof(what), "'%s'", s);
  return kiln_mlirp_fail(P, what);
}

bool kiln_mlirp_is_id_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool kiln_mlirp_is_id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$' || c == '.';
}

bool kiln_mlirp_bare_id(kiln_mlirp_t *P, const char **s, size_t *n) {
  if (P->err) return false;
  kiln_mlirp_ws(P);
  const char *p = P->p;
  if (p >= P->end || !kiln_mlirp_is_id_start(*p)) return false;
  while (p < P->end && kiln_mlirp_is_id_char(*p)) p++;
  *s = P->p;
  *n = (size_t)(p - P->p);
  P->p = p;
  return true;
}

bool kiln_mlirp_peek_kw(kiln_mlirp_t *P, const char *kw) {
  if (P->err) return false;
  kiln_mlirp_ws(P);
  size_t n = strlen(kw);
  if ((size_t)(P->end - P->p) < n || memcmp(P->p, kw, n) != 0) return false;
  return P->p + n >= P->end || !kiln_mlirp_is_id_char(P->p[n]);
}

bool kiln_mlirp_accept_kw(kiln_mlirp_t *P, const char *kw) {
  if (!kiln_mlirp_peek_kw(P, kw)) return false;
  P->p += strlen(kw);
  return true;
}

bool kiln_mlirp_expect_kw(kiln_mlirp_t *P, const char *kw) {
  if (kiln_mlirp_accept_kw(P, kw)) return true;
  char what[64];
  snprintf(what, sizeof(what), "'%s'", kw);
  return kiln_mlirp_fail(P, what);
}

char *kiln_mlirp_dup(kiln_mlirp_t *P, const char *s, size_t n) {
  return kiln_arena_strndup(P->a, s, n);
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* The closing quote of a string whose text starts at `s` if it holds no escape and no
 * newline (the common case, found with memchr), or NULL. */
static const char *plain_string_end(const char *s, const char *end) {
  const char *q = memchr(s, '"', (size_t)(end - s));
  if (q == NULL || memchr(s, '\\', (size_t)(q - s)) || memchr(s, '\n', (size_t)(q - s))) {
    return NULL;
  }
  return q;
}

bool kiln_mlirp_string_span(kiln_mlirp_t *P, const char **out, size_t *len) {
  if (kiln_mlirp_peek(P) != '"') return kiln_mlirp_fail(P, "a string");
  const char *q = plain_string_end(P->p + 1, P->end);
  if (q == NULL) return kiln_mlirp_string(P, out, len);
  *out = P->p + 1;
  *len = (size_t)(q - P->p - 1);
  P->p = q + 1;
  return true;
}

bool kiln_mlirp_string(kiln_mlirp_t *P, const char **out, size_t *len) {
  if (kiln_mlirp_peek(P) != '"') return kiln_mlirp_fail(P, "a string");
  const char *start = P->p;
  const char *plain = plain_string_end(start + 1, P->end);
  if (plain != NULL) {
    size_t pn = (size_t)(plain - start - 1);
    char *d = kiln_arena_alloc_uninit(P->a, pn + 1); /* filled here, NUL-terminated */
    if (d == NULL) return kiln_mlirp_failf(P, "out of memory");
    memcpy(d, start + 1, pn);
    d[pn] = 0;
    P->p = plain + 1;
    *out = d;
    *len = pn;
    return true;
  }
  const char *p = P->p + 1;
  size_t n = 0;
  bool escapes = false;
  while (p < P->end && *p != '"') {
    if (*p == '\n') return kiln_mlirp_fail_at(P, start, "unterminated string");
    if (*p == '\\') {
      escapes = true;
      p++;
      if (p >= P->end) break;
      if (hexval(*p) >= 0) {
        if (p + 1 >= P->end || hexval(p[1]) < 0) {
          return kiln_mlirp_fail_at(P, p - 1, "bad escape in string");
        }
        p += 2;
      } else if (*p == 'n' || *p == 't' || *p == '"' || *p == '\\') {
        p++;
      } else {
        return kiln_mlirp_fail_at(P, p - 1, "bad escape in string");
      }
      n++;
      continue;
    }
    p++;
    n++;
  }
  if (p >= P->end) return kiln_mlirp_fail_at(P, start, "unterminated string");
  char *s = kiln_arena_alloc_uninit(P->a, n + 1); /* filled below, NUL-terminated */
  if (s == NULL) return kiln_mlirp_failf(P, "out of memory");
  if (!escapes) {
    memcpy(s, start + 1, n);
  } else {
    size_t k = 0;
    for (const char *q = start + 1; q < p; q++) {
      if (*q != '\\') {
        s[k++] = *q;
        continue;
      }
      q++;
      switch (*q) {
        case 'n':
          s[k++] = '\n';
          break;
        case 't':
          s[k++] = '\t';
          break;
        case '"':
          s[k++] = '"';
          break;
        case '\\':
          s[k++] = '\\';
          break;
        default:
          s[k++] = (char)(hexval(q[0]) * 16 + hexval(q[1]));
          q++;
      }
    }
  }
  s[n] = 0;
  P->p = p + 1;
  *out = s;
  *len = n;
  return true;
}

bool kiln_mlirp_name_string(kiln_mlirp_t *P, const char **out, size_t *len) {
  const char *at = (kiln_mlirp_ws(P), P->p);
  if (!kiln_mlirp_string(P, out, len)) return false;
  if (memchr(*out, 0, *len) != NULL) return kiln_mlirp_fail_at(P, at, "NUL byte in a name");
  return true;
}

bool kiln_mlirp_number(kiln_mlirp_t *P, kiln_mlirp_num_t *num) {
  if (P->err) return false;
  kiln_mlirp_ws(P);
  memset(num, 0, sizeof(*num));
  const char *p = P->p, *e = P->end;
  const char *start = p;
  if (p < e && (*p == '-' || *p == '+')) {
    num->neg = *p == '-';
    p++;
  }
  if (p + 2 < e + 0 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X') && p + 2 < e &&
      hexval(p[2]) >= 0) {
    p += 2;
    while (p < e && hexval(*p) >= 0) p++;
    num->is_hex = true;
  } else if (p < e && isdigit((unsigned char)*p)) {
    while (p < e && isdigit((unsigned char)*p)) p++;
    if (p < e && *p == '.') {
      num->is_float = true;
      p++;
      while (p < e && isdigit((unsigned char)*p)) p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
      const char *q = p + 1;
      if (q < e && (*q == '+' || *q == '-')) q++;
      if (q < e && isdigit((unsigned char)*q)) {
        num->is_float = true;
        p = q;
        while (p < e && isdigit((unsigned char)*p)) p++;
      }
    }
  } else if ((size_t)(e - p) >= 3 && (memcmp(p, "inf", 3) == 0 || memcmp(p, "nan", 3) == 0) &&
             (p + 3 >= e || !kiln_mlirp_is_id_char(p[3]))) {
    p += 3;
    num->is_float = true;
    num->is_special = true;
  } else {
    return kiln_mlirp_fail(P, "a number");
  }
  if (p < e && (kiln_mlirp_is_id_char(*p))) return kiln_mlirp_fail_at(P, start, "malformed number");
  num->s = start;
  num->n = (size_t)(p - start);
  P->p = p;
  return true;
}

bool kiln_mlirp_integer(kiln_mlirp_t *P, int64_t *out) {
  kiln_mlirp_num_t num;
  const char *at = (kiln_mlirp_ws(P), P->p);
  if (!kiln_mlirp_number(P, &num)) return false;
  if (num.is_float) return kiln_mlirp_fail_at(P, at, "expected an integer, found a float");
  bool ovf = false;
  *out = kiln_mlirp_num_i64(&num, &ovf);
  if (ovf) return kiln_mlirp_fail_at(P, at, "integer out of range");
  return true;
}

int64_t kiln_mlirp_num_i64(const kiln_mlirp_num_t *num, bool *overflow) {
  const char *s = num->s;
  size_t n = num->n;
  bool neg = false;
  if (n > 0 && (*s == '-' || *s == '+')) {
    neg = *s == '-';
    s++;
    n--;
  }
  uint64_t v = 0;
  if (num->is_hex) {
    for (size_t i = 2; i < n; i++) {
      if (v >> 60) *overflow = true;
      v = v * 16 + (uint64_t)hexval(s[i]);
    }
  } else {
    for (size_t i = 0; i < n; i++) {
      uint64_t d = (uint64_t)(s[i] - '0');
      if (v > (UINT64_MAX - d) / 10) *overflow = true;
      v = v * 10 + d;
    }
  }
  if (neg) {
    if (v > (uint64_t)INT64_MAX + 1) *overflow = true;
    return (int64_t)(0 - v);
  }
  return (int64_t)v; /* values above INT64_MAX keep their bits (ui64) */
}

uint64_t kiln_mlirp_num_u64bits(const kiln_mlirp_num_t *num) {
  bool ovf = false;
  return (uint64_t)kiln_mlirp_num_i64(num, &ovf);
}

/* Decimal `[+-]digits[.digits][e[+-]digits]` whose digits fit 2^53 and whose exponent is at
 * most 22 in magnitude: both the digits and the power of ten are exact doubles, so one
 * multiplication or division rounds correctly (Clinger's fast path). False otherwise. */
static bool decimal_fast_path(const kiln_mlirp_num_t *num, double *out) {
  static const double pow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                   1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  const char *p = num->s, *e = num->s + num->n;
  if (p < e && (*p == '-' || *p == '+')) p++;
  uint64_t m = 0;
  int digits = 0, exp10 = 0;
  for (; p < e && *p >= '0' && *p <= '9'; p++) {
    if (m || *p != '0') digits++;
    m = m * 10 + (uint64_t)(*p - '0');
    if (digits > 15) return false;
  }
  if (p < e && *p == '.') {
    for (p++; p < e && *p >= '0' && *p <= '9'; p++) {
      if (m || *p != '0') digits++;
      m = m * 10 + (uint64_t)(*p - '0');
      exp10--;
      if (digits > 15) return false;
    }
  }
  if (p < e && (*p == 'e' || *p == 'E')) {
    p++;
    bool eneg = p < e && *p == '-';
    if (p < e && (*p == '-' || *p == '+')) p++;
    int x = 0;
    for (; p < e && *p >= '0' && *p <= '9'; p++) {
      x = x * 10 + (*p - '0');
      if (x > 400) return false;
    }
    exp10 += eneg ? -x : x;
  }
  if (p != e || exp10 < -22 || exp10 > 22) return false;
  double v = (double)m; /* m < 10^15 < 2^53: exact */
  v = exp10 < 0 ? v / pow10[-exp10] : v * pow10[exp10];
  *out = num->neg ? -v : v;
  return true;
}

double kiln_mlirp_num_f64(const kiln_mlirp_num_t *num) {
  if (num->is_special) {
    double v = num->s[num->neg || num->s[0] == '+'] == 'i' ? INFINITY : NAN;
    return num->neg ? -v : v;
  }
  double fast;
  if (!num->is_hex && decimal_fast_path(num, &fast)) return fast;
  char buf[128];
  size_t n = num->n < sizeof(buf) - 1 ? num->n : sizeof(buf) - 1;
  if (num->n >= sizeof(buf)) {
    char *tmp = kiln_malloc(num->n + 1);
    memcpy(tmp, num->s, num->n);
    tmp[num->n] = 0;
    double v = strtod(tmp, NULL);
    kiln_free(tmp);
    return v;
  }
  memcpy(buf, num->s, n);
  buf[n] = 0;
  return strtod(buf, NULL);
}

bool kiln_mlirp_skip_balanced(kiln_mlirp_t *P) {
  if (P->err) return false;
  char stack[KILN_MLIRP_MAX_DEPTH];
  int depth = 0;
  const char *p = P->p, *start = P->p;
  while (p < P->end) {
    char c = *p;
    if (c == '"') {
      p++;
      /* common case: no escape, no NUL up to the closing quote (memchr finds them fast) */
      const char *q = memchr(p, '"', (size_t)(P->end - p));
      if (q != NULL && !memchr(p, '\\', (size_t)(q - p)) && !memchr(p, 0, (size_t)(q - p))) {
        p = q + 1;
        continue;
      }
      while (p < P->end && *p != '"') {
        if (*p == 0 || (*p == '\\' && p + 1 < P->end && p[1] == 0)) {
          return kiln_mlirp_fail_at(P, p, "unexpected NUL byte");
        }
        p += (*p == '\\' && p + 1 < P->end) ? 2 : 1;
      }
      if (p >= P->end) break;
      p++;
      continue;
    }
    if (c == 0) return kiln_mlirp_fail_at(P, p, "unexpected NUL byte");
    char close = c == '<' ? '>' : c == '(' ? ')' : c == '[' ? ']' : c == '{' ? '}' : 0;
    if (close) {
      if (depth == KILN_MLIRP_MAX_DEPTH) return kiln_mlirp_fail_at(P, p, "nesting too deep");
      stack[depth++] = close;
    } else if (c == '>' && p > start && p[-1] == '-') {
      /* `->` inside a group is an arrow, not a closing bracket */
    } else if (c == '>' || c == ')' || c == ']' || c == '}') {
      if (depth == 0 || stack[depth - 1] != c) {
        return kiln_mlirp_fail_at(P, p, "unbalanced '%c'", c);
      }
      depth--;
      if (depth == 0) {
        P->p = p + 1;
        return true;
      }
    }
    p++;
  }
  return kiln_mlirp_fail_at(P, start, "unterminated '%c' group", *start);
}

/* ---- Symbol tables ---- */

static uint32_t hash_name(const char *s, size_t n) {
  return (uint32_t)kiln_hash_bytes(s, n);
}

static int32_t *slot_of(kiln_mlirp_table_t *t, const char *name, size_t len) {
  uint32_t mask = t->cap - 1;
  for (uint32_t i = hash_name(name, len) & mask;; i = (i + 1) & mask) {
    int32_t r = t->slots[i];
    if (r == -1) return &t->slots[i];
    kiln_mlirp_name_t *rec = &t->recs[r];
    if (rec->len == len && memcmp(rec->name, name, len) == 0) return &t->slots[i];
  }
}

kiln_mlirp_sym_t *kiln_mlirp_lookup(kiln_mlirp_table_t *t, const char *name, size_t len) {
  if (t->cap == 0) return NULL;
  int32_t r = *slot_of(t, name, len);
  if (r < 0 || t->recs[r].current < 0) return NULL;
  return &t->entries[t->recs[r].current];
}

static void table_grow(kiln_mlirp_table_t *t) {
  uint32_t cap = t->cap ? t->cap * 2 : 64;
  kiln_free(t->slots);
  t->slots = kiln_malloc(sizeof(int32_t) * cap);
  t->cap = cap;
  for (uint32_t i = 0; i < cap; i++) t->slots[i] = -1;
  for (int32_t r = 0; r < t->num_recs; r++) {
    *slot_of(t, t->recs[r].name, t->recs[r].len) = r;
  }
}

kiln_mlirp_sym_t *kiln_mlirp_define(kiln_mlirp_table_t *t, const char *name, size_t len) {
  if ((uint32_t)(t->num_recs + 1) * 2 >= t->cap) table_grow(t);
  int32_t *slot = slot_of(t, name, len);
  if (*slot < 0) {
    if (t->num_recs == t->recs_cap) {
      t->recs_cap = t->recs_cap ? t->recs_cap * 2 : 64;
      t->recs = kiln_realloc(t->recs, sizeof(kiln_mlirp_name_t) * (size_t)t->recs_cap);
    }
    kiln_mlirp_name_t *rec = &t->recs[t->num_recs];
    rec->name = name;
    rec->len = len;
    rec->current = -1;
    *slot = t->num_recs++;
  }
  if (t->num == t->entries_cap) {
    t->entries_cap = t->entries_cap ? t->entries_cap * 2 : 64;
    t->entries = kiln_realloc(t->entries, sizeof(kiln_mlirp_sym_t) * (size_t)t->entries_cap);
  }
  kiln_mlirp_sym_t *s = &t->entries[t->num];
  memset(s, 0, sizeof(*s));
  s->rec = *slot;
  s->prev = t->recs[*slot].current;
  t->recs[*slot].current = t->num++;
  return s;
}

void kiln_mlirp_table_free(kiln_mlirp_table_t *t) {
  kiln_free(t->slots);
  kiln_free(t->recs);
  kiln_free(t->entries);
  memset(t, 0, sizeof(*t));
}

void kiln_mlirp_scope_push(kiln_mlirp_t *P) {
  if (P->num_scopes == P->scopes_cap) {
    P->scopes_cap = P->scopes_cap ? P->scopes_cap * 2 : 16;
    P->scope_marks = kiln_realloc(P->scope_marks, sizeof(int32_t) * (size_t)P->scopes_cap);
  }
  P->scope_marks[P->num_scopes++] = P->values.num;
}

void kiln_mlirp_scope_pop(kiln_mlirp_t *P) {
  kiln_mlirp_table_t *t = &P->values;
  int32_t mark = P->scope_marks[--P->num_scopes];
  while (t->num > mark) {
    kiln_mlirp_sym_t *s = &t->entries[--t->num];
    t->recs[s->rec].current = s->prev;
  }
}
