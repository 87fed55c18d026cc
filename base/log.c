#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_level = -1;

static int parse_level(const char *s) {
  if (!s || !*s) return KILN_LOG_WARNING;
  if (s[0] >= '0' && s[0] <= '3' && !s[1]) return s[0] - '0';
  if (!strcmp(s, "error")) return KILN_LOG_ERROR;
  if (!strcmp(s, "warning") || !strcmp(s, "warn")) return KILN_LOG_WARNING;
  if (!strcmp(s, "info")) return KILN_LOG_INFO;
  if (!strcmp(s, "debug")) return KILN_LOG_DEBUG;
  return KILN_LOG_WARNING;
}

kiln_log_level_t kiln_log_level(void) {
  if (g_level < 0) g_level = parse_level(getenv("KILN_LOG"));
  return (kiln_log_level_t)g_level;
}

void kiln_log_set_level(kiln_log_level_t level) { g_level = (int)level; }

void kiln_log_at(kiln_log_level_t level, const char *file, int line, const char *fmt, ...) {
  static const char tags[] = "EWID";
  const char *base = strrchr(file, '/');
  fprintf(stderr, "kiln %c %s:%d] ", tags[level & 3], base ? base + 1 : file, line);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}
