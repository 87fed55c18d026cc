/* The StableHLO corpus (../shared/stablehlo): every file of stablehlo/tests/interpret/ (and
 * its chlo/ folder) and testdata-sample/ read, every function holding check ops converted to
 * HLO and run, its checks applied with the StableHLO interpreter's rules
 * (tools/common/stablehlo_run.h) — on the reference evaluator, and on the host backend
 * (compiled through LLVM). Prints per backend the functions passed / run and each failure
 * with its reason, and fails below the floor reached (so that a regression fails).
 *
 * The host run compiles every function and is the slow one (about 70 s on 2 cores): it runs
 * every function by default, every 10th under ASan, every KILN_STABLEHLO_HOST_SAMPLE-th or
 * KILN_CORPUS_SAMPLE-th when set. Where the material is absent the tests skip. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "runtime/host/host_device.h"
#include "skip_util.h"
#include "tools/common/hlo_file.h"
#include "tools/common/stablehlo_run.h"

/* Floors: the pass rates reached (functions whose checks all pass / functions run; math:
 * files), so that a regression fails. A sampled host run (ASan) gets a looser floor: its
 * few functions make the rate coarse. The full host run takes about 70 s on 2 cores, so it
 * runs in full by default. */
#define REFERENCE_FLOOR 0.97
/* Host: 726/747 (complex reduce on the host; tiny dots, such as the c128 dot of
 * dot_general_float16_4_3_complex128_3_6, run on the host gemm's C kernel in the reference's
 * summation order; see host_blas.c). */
#define HOST_FLOOR 0.97
#define HOST_SAMPLED_FLOOR 0.90
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif
/* Under ASan (a Debug build, several times slower) the host runs one function in 10 and one
 * math file in 5, unless KILN_CORPUS_SAMPLE says otherwise. */
#define HOST_SAMPLE_DEFAULT (UNDER_ASAN ? 10 : 1)
#define MATH_SAMPLE_DEFAULT (UNDER_ASAN ? 5 : 1)
/* math: 47/47 files (complex inverse trig and atanh, c64 exp through the f32 sin/cos with
 * Payne-Hanek reduction, square at infinities) */
#define MATH_FLOOR 1.0
#define MATH_SAMPLED_FLOOR 1.0

static char g_dir[4096];

static bool find_material(void) {
  const char *env = getenv("KILN_STABLEHLO_DIR");
  if (env && *env)
    snprintf(g_dir, sizeof g_dir, "%s", env);
  else
    snprintf(g_dir, sizeof g_dir, "%s/../stablehlo", kiln_corpus_dir());
  char probe[4200];
  snprintf(probe, sizeof probe, "%s/stablehlo/tests/interpret", g_dir);
  struct stat st;
  return stat(probe, &st) == 0 && S_ISDIR(st.st_mode);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The .mlir files of `dir`, sorted (kiln_malloc'ed paths). */
static int list_mlir(const char *dir, char ***out) {
  DIR *d = opendir(dir);
  *out = NULL;
  if (!d) return 0;
  int n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!kiln_str_ends_with(e->d_name, ".mlir")) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      *out = kiln_realloc(*out, sizeof(char *) * (size_t)cap);
    }
    size_t len = strlen(dir) + strlen(e->d_name) + 2;
    (*out)[n] = kiln_malloc(len);
    snprintf((*out)[n], len, "%s/%s", dir, e->d_name);
    n++;
  }
  closedir(d);
  if (n) qsort(*out, (size_t)n, sizeof(char *), cmp_str);
  return n;
}

static void run_corpus(kiln_device_t *dev, int64_t sample, const char *label, double floor) {
  static const char *const kDirs[] = {"stablehlo/tests/interpret", "stablehlo/tests/interpret/chlo",
                                      "testdata-sample"};
  kiln_stablehlo_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = dev;
  o.sample = sample;
  o.constants_as_params = true;
  o.max_while_iterations = 1000000;
  kiln_stablehlo_run_stats_t st;
  memset(&st, 0, sizeof st);
  int files = 0;
  for (size_t k = 0; k < sizeof kDirs / sizeof kDirs[0]; k++) {
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/%s", g_dir, kDirs[k]);
    char **paths;
    int n = list_mlir(dir, &paths);
    int64_t before_f = st.functions, before_p = st.passed;
    for (int i = 0; i < n; i++) {
      assert_null(kiln_stablehlo_run_file(paths[i], &o, &st));
      kiln_free(paths[i]);
    }
    kiln_free(paths);
    files += n;
    printf("%s: %s: %d files, %" PRId64 " / %" PRId64 " functions pass\n", label, kDirs[k], n,
           st.passed - before_p, st.functions - before_f);
  }
  double rate = st.functions ? (double)st.passed / (double)st.functions : 0;
  printf("%s: %d files, functions: %" PRId64 " passed / %" PRId64
         " run (%.1f%%)%s, checks: %" PRId64 " passed, %" PRId64 " failed, %.1f s\n",
         label, files, st.passed, st.functions, 100 * rate, sample > 1 ? " (sampled)" : "",
         st.checks_passed, st.checks_failed, st.seconds);
  printf("%s failures:\n%s", label, st.failures.data ? kiln_strbuf_cstr(&st.failures) : "");
  fflush(stdout);
  kiln_stablehlo_run_stats_free(&st);
  assert_true(st.functions > 0);
  assert_true(rate >= floor);
}

static void test_stablehlo_corpus_on_the_reference_evaluator(void **state) {
  (void)state;
  if (!find_material()) KILN_SKIP("no StableHLO material at %s", g_dir);
  run_corpus(NULL, 1, "reference", REFERENCE_FLOOR);
}

static void test_stablehlo_corpus_on_the_host_backend(void **state) {
  (void)state;
  if (!find_material()) KILN_SKIP("no StableHLO material at %s", g_dir);
  int64_t sample = HOST_SAMPLE_DEFAULT;
  const char *env = getenv("KILN_CORPUS_SAMPLE");
  const char *env2 = getenv("KILN_STABLEHLO_HOST_SAMPLE");
  if (env2 && atoi(env2) > 0) sample = atoi(env2);
  if (env && atoi(env) > 0) sample = atoi(env);
  kiln_device_t *dev = NULL;
  assert_null(kiln_host_device_create(0, &dev));
  run_corpus(dev, sample, "host", sample > 1 ? HOST_SAMPLED_FLOOR : HOST_FLOOR);
  kiln_device_destroy(dev);
}

/* stablehlo/tests/math: accuracy tests (expect_close with a ulp tolerance) on the host
 * backend, one line per file with the largest ulp distance seen next to the tolerance. */
static void test_stablehlo_math_on_the_host_backend(void **state) {
  (void)state;
  if (!find_material()) KILN_SKIP("no StableHLO material at %s", g_dir);
  kiln_device_t *dev = NULL;
  assert_null(kiln_host_device_create(0, &dev));
  char dir[4300];
  snprintf(dir, sizeof dir, "%s/stablehlo/tests/math", g_dir);
  char **paths;
  int n = list_mlir(dir, &paths);
  int64_t sample = MATH_SAMPLE_DEFAULT;
  const char *env = getenv("KILN_CORPUS_SAMPLE");
  if (env && atoi(env) > 0) sample = atoi(env);
  int passed = 0, run = 0;
  for (int i = 0; i < n; i++) {
    kiln_stablehlo_run_options_t o;
    memset(&o, 0, sizeof o);
    o.device = dev;
    o.constants_as_params = true;
    kiln_stablehlo_run_stats_t st;
    memset(&st, 0, sizeof st);
    if (i % sample == 0) {
      assert_null(kiln_stablehlo_run_file(paths[i], &o, &st));
      const char *base = strrchr(paths[i], '/') + 1;
      run++;
      if (st.functions && st.passed == st.functions) passed++;
      if (st.failures.data && st.passed != st.functions) {
        printf("math %-28s FAIL %s", base, kiln_strbuf_cstr(&st.failures) + 2);
      } else {
        printf("math %-28s pass: max %" PRIu64 " ulp (tolerance %" PRIu64 ")\n", base, st.max_ulp,
               st.ulp_tolerance);
      }
    }
    kiln_stablehlo_run_stats_free(&st);
    kiln_free(paths[i]);
  }
  kiln_free(paths);
  kiln_device_destroy(dev);
  printf("math on the host: %d / %d files pass\n", passed, run);
  assert_true(run > 0);
  assert_true(passed >= (sample > 1 ? MATH_SAMPLED_FLOOR : MATH_FLOOR) * run);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stablehlo_corpus_on_the_reference_evaluator),
      cmocka_unit_test(test_stablehlo_corpus_on_the_host_backend),
      cmocka_unit_test(test_stablehlo_math_on_the_host_backend),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
