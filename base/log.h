/* Logging with a level taken from KILN_LOG (error, warning, info, debug, or 0-3).
 *
 * Thread-safe: the environment is read once, race-free, on the first query; the level is an
 * atomic; each message is written to stderr whole (the stream is locked around it). */
#ifndef KILN_BASE_LOG_H_
#define KILN_BASE_LOG_H_

typedef enum kiln_log_level {
  KILN_LOG_ERROR = 0,
  KILN_LOG_WARNING = 1,
  KILN_LOG_INFO = 2,
  KILN_LOG_DEBUG = 3,
} kiln_log_level_t;

/* The active level: KILN_LOG read once (default: warning). */
kiln_log_level_t kiln_log_level(void);
void kiln_log_set_level(kiln_log_level_t level);
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
