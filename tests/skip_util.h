/* Skipping, as ctest sees it.
 *
 * A test whose prerequisite is missing here (ptxas, nvJitLink, libdevice, a CUDA driver or
 * GPU, the corpus) calls KILN_SKIP("reason", ...): it prints "[  SKIP    ] <reason>" and ends
 * the cmocka test as skipped. kiln_run_tests(group, setup, teardown) runs the group like
 * cmocka_run_group_tests and exits with KILN_TEST_SKIPPED (77, every test's SKIP_RETURN_CODE
 * in CMakeLists.txt) when nothing failed and every test of the group skipped, so that ctest
 * lists the executable as skipped instead of passed; when only some skipped, the others'
 * result stands and the reasons are in its output. Programs without cmocka (tests/gpu/)
 * print "SKIP: <reason>" and return KILN_TEST_SKIPPED themselves. */
#ifndef KILN_TESTS_SKIP_UTIL_H_
#define KILN_TESTS_SKIP_UTIL_H_

#include <stdio.h>

#define KILN_TEST_SKIPPED 77

#ifdef cmocka_unit_test
static size_t kiln_tests_skipped;

/* Ends the current test as skipped; its reason is already printed. */
#define KILN_SKIPPED()    \
  do {                    \
    fflush(stdout);       \
    kiln_tests_skipped++; \
    skip();               \
  } while (0)

#define KILN_SKIP(...)       \
  do {                       \
    printf("[  SKIP    ] "); \
    printf(__VA_ARGS__);     \
    printf("\n");            \
    KILN_SKIPPED();          \
  } while (0)

static inline int kiln_tests_exit_code(int failed, size_t num_tests) {
  if (failed) return failed;
  return num_tests > 0 && kiln_tests_skipped >= num_tests ? KILN_TEST_SKIPPED : 0;
}

#define kiln_run_tests(group, setup, teardown)                         \
  kiln_tests_exit_code(cmocka_run_group_tests(group, setup, teardown), \
                       sizeof(group) / sizeof((group)[0]))
#endif

#endif /* KILN_TESTS_SKIP_UTIL_H_ */
