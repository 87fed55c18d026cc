/* cmocka checks of kiln_status results, shared by the runtime tests. Include after cmocka.h. */
#ifndef KILN_TESTS_STATUS_TEST_UTIL_H
#define KILN_TESTS_STATUS_TEST_UTIL_H

#include "base/status.h"

#define ASSERT_OK(expr)                                           \
  do {                                                            \
    kiln_status s__ = (expr);                                     \
    if (s__) fail_msg("%s: %s", #expr, kiln_status_message(s__)); \
  } while (0)

/* Fails unless `s` is an error with `code`; frees it. */
static inline void assert_code(kiln_status s, kiln_status_code_t code) {
  assert_non_null(s);
  if (kiln_status_code(s) != code)
    fail_msg("expected %s, got %s: %s", kiln_status_code_name(code),
             kiln_status_code_name(kiln_status_code(s)), kiln_status_message(s));
  kiln_status_free(s);
}

#endif
