/* Logging at a level the program sets (default: warning); the edges (plugin/env_options.h:
 * the plugin, the tools, benchmarks and tests) set it from KILN_LOG (error, warning, info,
 * debug, or 0-3).
 *
 * Thread-safe: the level is an atomic; each message is written to stderr whole (the stream
 * is locked around it). */
#ifndef KILN_BASE_LOG_H_
#define KILN_BASE_LOG_H_

#include <stdbool.h>

typedef enum kiln_log_level {
  KILN_LOG_ERROR = 0,
  KILN_LOG_WARNING = 1,
  KILN_LOG_INFO = 2,
  KILN_LOG_DEBUG = 3,
} kiln_log_level_t;

/* The active level (default: warning). */
kiln_log_level_t kiln_log_level(void);
void kiln_log_set_level(kiln_log_level_t level);
/* Reads a level as KILN_LOG spells it: error, warning (or warn), info, debug, or 0-3. False
 * (and *out unchanged) for anything else. */
bool kiln_log_parse_level(const char *s, kiln_log_level_t *out);
void kiln_log_at(kiln_log_level_t level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define KILN_LOG(level, ...)                                               \
  do {                                                                     \
    if ((level) <= kiln_log_level()) kiln_log_at((level), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define KILN_LOG_E(...) KILN_LOG(KILN_LOG_ERROR, __VA_ARGS__)
#define KILN_LOG_W(...) KILN_LOG(KILN_LOG_WARNING, __VA_ARGS__)
#define KILN_LOG_I(...) KILN_LOG(KILN_LOG_INFO, __VA_ARGS__)
#define KILN_LOG_D(...) KILN_LOG(KILN_LOG_DEBUG, __VA_ARGS__)

#endif /* KILN_BASE_LOG_H_ */
