#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An atomic, so kiln_log_set_level may race with logging threads. */
static atomic_int g_level = KILN_LOG_WARNING;

bool kiln_log_parse_level(const char *s, kiln_log_level_t *out) {
  if (!s) return false;
  if (s[0] >= '0' && s[0] <= '3' && !s[1]) {
    *out = (kiln_log_level_t)(s[0] - '0');
    return true;
  }
  static const struct {
    const char *name;
    kiln_log_level_t level;
  } kNames[] = {{"error", KILN_LOG_ERROR},
                {"warning", KILN_LOG_WARNING},
                {"warn", KILN_LOG_WARNING},
                {"info", KILN_LOG_INFO},
                {"debug", KILN_LOG_DEBUG}};
  for (size_t i = 0; i < sizeof(kNames) / sizeof(kNames[0]); i++)
    if (!strcmp(s, kNames[i].name)) {
      *out = kNames[i].level;
      return true;
    }
  return false;
}

kiln_log_level_t kiln_log_level(void) {
  return (kiln_log_level_t)atomic_load_explicit(&g_level, memory_order_relaxed);
}

void kiln_log_set_level(kiln_log_level_t level) {
  atomic_store_explicit(&g_level, (int)level, memory_order_relaxed);
}

void kiln_log_at(kiln_log_level_t level, const char *file, int line, const char *fmt, ...) {
  static const char tags[] = "EWID";
  const char *base = strrchr(file, '/');
  flockfile(stderr); /* one message, one piece, whatever other threads log */
  fprintf(stderr, "kiln %c %s:%d] ", tags[level & 3], base ? base + 1 : file, line);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  funlockfile(stderr);
}
