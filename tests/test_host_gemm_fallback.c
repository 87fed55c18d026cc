/* The host gemm without a library: with KILN_HOST_BLAS=none, and with KILN_HOST_BLAS naming a
 * library that does not exist, the built-in C kernel runs every element-type combination
 * correctly (host_gemm_test_util.h) and the reason is logged (a warning for the bogus
 * library, info for "none") and reported by kiln_host_blas_library. The library is chosen once
 * per process, so each case runs in a forked child with its environment set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/log.h"
#include "host_gemm_test_util.h"
#include "runtime/runtime_options.h"

/* What a child checks; returns 0 when all is well, else a code naming the failed step. */
static int child_checks(const char *want_tried, const char *want_log, const char *log_path) {
  const char *tried = NULL;
  if (kiln_host_blas_library(&tried) != NULL) return 10;
  if (!strstr(tried, want_tried)) return 11;
  kiln_host_pool_t *pool = NULL;
  if (kiln_host_pool_create(2, &pool)) return 12;
  static const kiln_gemm_dtype_t kTypes[][2] = {
      {KILN_GEMM_F32, KILN_GEMM_SAME}, {KILN_GEMM_F64, KILN_GEMM_SAME},
      {KILN_GEMM_C64, KILN_GEMM_SAME}, {KILN_GEMM_C128, KILN_GEMM_SAME},
      {KILN_GEMM_BF16, KILN_GEMM_F32}, {KILN_GEMM_F16, KILN_GEMM_F16},
      {KILN_GEMM_S8, KILN_GEMM_S32},
  };
  int rc = 0;
  for (size_t i = 0; !rc && i < sizeof(kTypes) / sizeof(kTypes[0]); i++)
    for (int t = 0; !rc && t < 4; t++) {
      kiln_gemm_desc_t g = {kTypes[i][0],
                            2,
                            19,
                            23,
                            37,
                            (t & 1) != 0,
                            (t & 2) != 0,
                            1,
                            0,
                            kTypes[i][1],
                            KILN_GEMM_EPILOGUE_NONE,
                            0};
      /* AUTO: what the runtime asks for; there is no library, so the C kernel runs. */
      if (!hg_check(&g, KILN_HOST_BLAS_AUTO, pool) || !hg_check(&g, KILN_HOST_BLAS_AUTO, NULL))
        rc = 20 + (int)i;
    }
  kiln_host_pool_destroy(pool);
  fflush(stderr);
  FILE *f = fopen(log_path, "r");
  if (!f) return rc ? rc : 13;
  char buf[8192] = {0};
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = 0;
  if (!rc && !strstr(buf, want_log)) rc = 14;
  return rc;
}

/* Forks a child with KILN_HOST_BLAS=`value` and KILN_LOG=info whose stderr goes to a file. */
static void run_child(const char *value, const char *want_tried, const char *want_log) {
  char log_path[] = "/tmp/kiln_host_gemm_fallback_XXXXXX";
  int fd = mkstemp(log_path);
  assert_true(fd >= 0);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    kiln_runtime_options_t ro = kiln_runtime_options();
    ro.host_blas = value;
    kiln_runtime_options_set(&ro);
    kiln_log_set_level(KILN_LOG_INFO);
    dup2(fd, 2);
    _exit(child_checks(want_tried, want_log, log_path));
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  char buf[8192] = {0};
  ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  close(fd);
  unlink(log_path);
  printf("[  INFO    ] KILN_HOST_BLAS=%s: child log:\n%s", value, n > 0 ? buf : "(empty)\n");
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_kiln_host_blas_none_runs_the_c_kernel_and_says_so(void **state) {
  (void)state;
  run_child("none", "KILN_HOST_BLAS=none", "KILN_HOST_BLAS=none; using the built-in C kernel");
}

static void test_a_missing_library_is_logged_and_the_c_kernel_runs(void **state) {
  (void)state;
  run_child("/nonexistent/libkiln_no_such_blas.so",
            "/nonexistent/libkiln_no_such_blas.so: cannot open",
            "KILN_HOST_BLAS=/nonexistent/libkiln_no_such_blas.so cannot be used");
}

/* A library that opens but is no CBLAS (libc) is told apart from one that cannot be opened. */
static void test_a_library_without_cblas_is_logged_and_the_c_kernel_runs(void **state) {
  (void)state;
  run_child("libc.so.6", "libc.so.6: symbol cblas_sgemm not found",
            "KILN_HOST_BLAS=libc.so.6 cannot be used");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kiln_host_blas_none_runs_the_c_kernel_and_says_so),
      cmocka_unit_test(test_a_missing_library_is_logged_and_the_c_kernel_runs),
      cmocka_unit_test(test_a_library_without_cblas_is_logged_and_the_c_kernel_runs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
