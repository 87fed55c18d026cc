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

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KILN_TEST_SKIPPED 77

/* Whether a GPU must be there ($KILN_REQUIRE_GPU=1, which scripts/run-gpu.sh sets on a
 * machine with a GPU): a missing driver, device or library is then a failure, never a skip,
 * so a broken driver or cuBLAS on a real GPU cannot finish green. */
static inline bool kiln_gpu_required(void) {
  const char *v = getenv("KILN_REQUIRE_GPU");
  return v && strcmp(v, "1") == 0;
}

/* The exit status of a GPU program that cannot run because `reason`: "SKIP: <reason>" and
 * KILN_TEST_SKIPPED, or under KILN_REQUIRE_GPU=1 "FAIL: <reason>" and 1. */
static inline int kiln_gpu_unavailable_exit(const char *reason) {
  if (kiln_gpu_required()) {
    fprintf(stderr, "FAIL: KILN_REQUIRE_GPU=1 but the GPU is not usable: %s\n", reason);
    return 1;
  }
  printf("SKIP: %s\n", reason);
  return KILN_TEST_SKIPPED;
}

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

/* Ends the current test as skipped, "no corpus at <dir>", unless folder `dir` (the corpus or
 * one of its folders) is there. Call it before the test allocates anything. */
#define KILN_SKIP_WITHOUT_CORPUS(dir)                      \
  do {                                                     \
    const char *kiln_dir_ = (dir);                         \
    DIR *kiln_d_ = opendir(kiln_dir_);                     \
    if (!kiln_d_) KILN_SKIP("no corpus at %s", kiln_dir_); \
    closedir(kiln_d_);                                     \
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
