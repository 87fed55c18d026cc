/* kiln status: a pointer-sized error value. NULL means OK.
 *
 * A non-NULL status owns a heap payload with a code (the absl / XLA FFI code set), a
 * message and the file:line where it was created. Annotations are appended as the error
 * travels up (KILN_RETURN_IF_ERROR(expr, "while parsing %s", name)). Whoever holds a
 * non-NULL status must either return it or free it with kiln_status_free. */
#ifndef KILN_BASE_STATUS_H_
#define KILN_BASE_STATUS_H_

#include <stdarg.h>
#include <stdbool.h>

typedef enum kiln_status_code {
  KILN_OK = 0,
  KILN_CANCELLED = 1,
  KILN_UNKNOWN = 2,
  KILN_INVALID_ARGUMENT = 3,
  KILN_DEADLINE_EXCEEDED = 4,
  KILN_NOT_FOUND = 5,
  KILN_ALREADY_EXISTS = 6,
  KILN_PERMISSION_DENIED = 7,
  KILN_RESOURCE_EXHAUSTED = 8,
  KILN_FAILED_PRECONDITION = 9,
  KILN_ABORTED = 10,
  KILN_OUT_OF_RANGE = 11,
  KILN_UNIMPLEMENTED = 12,
  KILN_INTERNAL = 13,
  KILN_UNAVAILABLE = 14,
  KILN_DATA_LOSS = 15,
  KILN_UNAUTHENTICATED = 16,
} kiln_status_code_t;

typedef struct kiln_status_payload *kiln_status;

#define KILN_STATUS_OK ((kiln_status)0)

/* The static RESOURCE_EXHAUSTED status handed out when a status itself cannot be allocated
 * (freeing it does nothing): for holders of errors that must exist without memory. */
kiln_status kiln_status_out_of_memory(void);
/* Creates a status with a printf-style message. KILN_OK yields NULL. */
kiln_status kiln_status_make_at(kiln_status_code_t code, const char *file, int line,
                                const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
kiln_status kiln_status_make_va(kiln_status_code_t code, const char *file, int line,
                                const char *fmt, va_list ap);

#define kiln_status_make(code, ...) kiln_status_make_at((code), __FILE__, __LINE__, __VA_ARGS__)
#define KILN_ERR_INVALID(...) kiln_status_make(KILN_INVALID_ARGUMENT, __VA_ARGS__)
#define KILN_ERR_UNIMPLEMENTED(...) kiln_status_make(KILN_UNIMPLEMENTED, __VA_ARGS__)
#define KILN_ERR_INTERNAL(...) kiln_status_make(KILN_INTERNAL, __VA_ARGS__)
/* A fallible allocation (kiln_try_*) was refused. */
#define KILN_ERR_EXHAUSTED(...) kiln_status_make(KILN_RESOURCE_EXHAUSTED, __VA_ARGS__)

/* Appends "; <annotation>" to the message of a non-NULL status and returns it. */
kiln_status kiln_status_annotate(kiln_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Joins a cleanup failure into a primary one: returns `primary` if non-NULL (with the
 * other's message appended and freed), else `secondary`. */
kiln_status kiln_status_join(kiln_status primary, kiln_status secondary);
/* A new status with `s`'s code, place and message (NULL for OK): for handing one failure to
 * several owners, each freeing its own. */
kiln_status kiln_status_copy(kiln_status s);

kiln_status_code_t kiln_status_code(kiln_status s);
const char *kiln_status_message(kiln_status s); /* "" for OK; borrowed */
const char *kiln_status_file(kiln_status s);
int kiln_status_line(kiln_status s);
const char *kiln_status_code_name(kiln_status_code_t code);
void kiln_status_free(kiln_status s);
static inline bool kiln_status_is_ok(kiln_status s) { return s == 0; }

/* Prints "CODE: message (file:line)" to stderr, then frees. Returns the code. */
kiln_status_code_t kiln_status_report(kiln_status s, const char *prefix);

#define KILN_RETURN_IF_ERROR(expr, ...)                         \
  do {                                                          \
    kiln_status kiln__s = (expr);                               \
    if (kiln__s) return kiln_status_annotate(kiln__s, __VA_ARGS__); \
  } while (0)

#define KILN_RETURN_IF_ERROR_PLAIN(expr)                        \
  do {                                                          \
    kiln_status kiln__s = (expr);                               \
    if (kiln__s) return kiln__s;                                \
  } while (0)

#endif /* KILN_BASE_STATUS_H_ */
