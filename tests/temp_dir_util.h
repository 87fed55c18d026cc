/* A temporary directory for a test (a cache directory, dumps): made with mkdtemp under /tmp
 * and removed with everything in it. Header-only, for tests. */
#ifndef KILN_TESTS_TEMP_DIR_UTIL_H_
#define KILN_TESTS_TEMP_DIR_UTIL_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* `dir` is a writable mkdtemp template ("/tmp/kiln_test_<what>" followed by six X's); the
 * test fails when it cannot be made. */
static inline void kiln_test_temp_dir_make(char *dir) {
  assert_non_null(mkdtemp(dir));
}

/* Makes a fresh directory /tmp/kiln_test_<what>_<six random characters> into `dir` (at least
 * 64 bytes; `what` short): the template written here, then kiln_test_temp_dir_make. */
static inline void kiln_test_temp_dir_named(char *dir, size_t n, const char *what) {
  int len = snprintf(dir, n, "/tmp/kiln_test_%s_", what);
  assert_true(len > 0 && (size_t)len + 7 <= n);
  memset(dir + len, 'X', 6); /* mkdtemp's template */
  dir[len + 6] = '\0';
  kiln_test_temp_dir_make(dir);
}

/* Removes `dir` and everything under it; the test fails when that fails. */
static inline void kiln_test_temp_dir_remove(const char *dir) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

#endif /* KILN_TESTS_TEMP_DIR_UTIL_H_ */
