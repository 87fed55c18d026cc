#include "base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

struct kiln_status_payload {
  kiln_status_code_t code;
  const char *file;
  int line;
  char *message;
};

/* When even the payload cannot be allocated, hand out a static one; free ignores it. */
static struct kiln_status_payload kiln_status_oom = {KILN_RESOURCE_EXHAUSTED, __FILE__, 0,
                                                     (char *)"out of memory creating a status"};

kiln_status kiln_status_out_of_memory(void) {
  return &kiln_status_oom;
}

kiln_status kiln_status_make_va(kiln_status_code_t code, const char *file, int line,
                                const char *fmt, va_list ap) {
  if (code == KILN_OK) return NULL;
  struct kiln_status_payload *p = kiln_try_malloc(sizeof *p);
  if (!p) return &kiln_status_oom;
  p->code = code;
  p->file = file;
  p->line = line;
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) n = 0;
  p->message = kiln_try_malloc((size_t)n + 1);
  if (!p->message) {
    kiln_free(p);
    return &kiln_status_oom;
  }
  vsnprintf(p->message, (size_t)n + 1, fmt, ap);
  return p;
}

kiln_status kiln_status_make_at(kiln_status_code_t code, const char *file, int line,
                                const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kiln_status s = kiln_status_make_va(code, file, line, fmt, ap);
  va_end(ap);
  return s;
}

static void append_text(kiln_status s, const char *text) {
  if (!s || s == &kiln_status_oom) return;
  size_t a = strlen(s->message), b = strlen(text);
  char *m = kiln_try_realloc(s->message, a + b + 3);
  if (!m) return;
  memcpy(m + a, "; ", 2);
  memcpy(m + a + 2, text, b + 1);
  s->message = m;
}

kiln_status kiln_status_annotate(kiln_status s, const char *fmt, ...) {
  if (!s) return s;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (buf[0]) append_text(s, buf);
  return s;
}

kiln_status kiln_status_copy(kiln_status s) {
  if (!s) return NULL;
  return kiln_status_make_at(kiln_status_code(s), kiln_status_file(s), kiln_status_line(s), "%s",
                             kiln_status_message(s));
}

kiln_status kiln_status_join(kiln_status primary, kiln_status secondary) {
  if (!primary) return secondary;
  if (secondary) {
    append_text(primary, kiln_status_message(secondary));
    kiln_status_free(secondary);
  }
  return primary;
}

kiln_status_code_t kiln_status_code(kiln_status s) { return s ? s->code : KILN_OK; }
const char *kiln_status_message(kiln_status s) { return s ? s->message : ""; }
const char *kiln_status_file(kiln_status s) { return s ? s->file : ""; }
int kiln_status_line(kiln_status s) { return s ? s->line : 0; }

const char *kiln_status_code_name(kiln_status_code_t code) {
  static const char *const names[] = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  if ((unsigned)code < sizeof names / sizeof names[0]) return names[code];
  return "UNKNOWN_CODE";
}

void kiln_status_free(kiln_status s) {
  if (!s || s == &kiln_status_oom) return;
  kiln_free(s->message);
  kiln_free(s);
}

kiln_status_code_t kiln_status_report(kiln_status s, const char *prefix) {
  kiln_status_code_t c = kiln_status_code(s);
  if (s) {
    fprintf(stderr, "%s%s%s: %s (%s:%d)\n", prefix ? prefix : "", prefix ? ": " : "",
            kiln_status_code_name(c), s->message, s->file, s->line);
    kiln_status_free(s);
  }
  return c;
}
