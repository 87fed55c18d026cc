/* A temporary directory for a test (a cache directory, dumps): made with mkdtemp under /tmp
 * and removed with everything in it. Header-only, for tests. */
#ifndef KILN_TESTS_TEMP_DIR_UTIL_H_
#define KILN_TESTS_TEMP_DIR_UTIL_H_

#include <stdio.h>
#include <stdlib.h>

/* `dir` is a writable mkdtemp template ("/tmp/kiln_test_<what>" followed by six X's); the
 * test fails when it cannot be made. */
static inline void kiln_test_temp_dir_make(char *dir) {
  assert_non_null(mkdtemp(dir));
}

/* Removes `dir` and everything under it; the test fails when that fails. */
static inline void kiln_test_temp_dir_remove(const char *dir) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

#endif /* KILN_TESTS_TEMP_DIR_UTIL_H_ */
