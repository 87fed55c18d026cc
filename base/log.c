#include "base/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* KILN_LOG is read once, on the first query from any thread (pthread_once); the level itself
 * is an atomic so kiln_log_set_level may race with logging threads. */
static pthread_once_t g_level_once = PTHREAD_ONCE_INIT;
static atomic_int g_level = KILN_LOG_WARNING;

static int parse_level(const char *s) {
  if (!s || !*s) return KILN_LOG_WARNING;
  if (s[0] >= '0' && s[0] <= '3' && !s[1]) return s[0] - '0';
  if (!strcmp(s, "error")) return KILN_LOG_ERROR;
  if (!strcmp(s, "warning") || !strcmp(s, "warn")) return KILN_LOG_WARNING;
  if (!strcmp(s, "info")) return KILN_LOG_INFO;
  if (!strcmp(s, "debug")) return KILN_LOG_DEBUG;
  return KILN_LOG_WARNING;
}

static void read_level_from_env(void) {
  atomic_store_explicit(&g_level, parse_level(getenv("KILN_LOG")), memory_order_relaxed);
}

kiln_log_level_t kiln_log_level(void) {
  pthread_once(&g_level_once, read_level_from_env);
  return (kiln_log_level_t)atomic_load_explicit(&g_level, memory_order_relaxed);
}

void kiln_log_set_level(kiln_log_level_t level) {
  pthread_once(&g_level_once, read_level_from_env); /* so the environment cannot override it */
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
