/* Host backend (ORC LLJIT): JIT'd functions run and give the right answers, libm resolves,
 * several modules share one JIT, the optimizer vectorizes for the host CPU, and errors come
 * back as statuses (missing symbol, duplicate symbol, invalid module, unresolved external). */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/backend/host_jit.h"
#include "tests/backend_test_kernels.h"

typedef void (*saxpy_fn)(float, float *, float *, int64_t);
typedef float (*unary_fn)(float);

static kiln_host_jit_t *new_jit(void) {
  kiln_host_jit_t *jit = NULL;
  kiln_status s = kiln_host_jit_create(NULL, &jit);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  assert_non_null(jit);
  return jit;
}

static void check_saxpy(saxpy_fn f, int64_t n) {
  float *x = kiln_malloc(sizeof(float) * (size_t)(n + 1));
  float *y = kiln_malloc(sizeof(float) * (size_t)(n + 1));
  for (int64_t i = 0; i <= n; i++) {
    x[i] = (float)i * 0.5f - 3.0f;
    y[i] = 1.0f / (float)(i + 1);
  }
  f(2.5f, x, y, n);
  for (int64_t i = 0; i < n; i++) {
    float want = 2.5f * ((float)i * 0.5f - 3.0f) + 1.0f / (float)(i + 1);
    assert_float_equal(y[i], want, 1e-5f * fabsf(want) + 1e-6f);
  }
  /* One past the end is untouched. */
  assert_float_equal(y[n], 1.0f / (float)(n + 1), 0.0f);
  kiln_free(x);
  kiln_free(y);
}

static void test_saxpy_runs_and_is_correct(void **state) {
  (void)state;
  kiln_host_jit_t *jit = new_jit();
  LLVMModuleRef m = kiln_test_build_saxpy(kiln_host_jit_context(jit), "saxpy");
  assert_null(kiln_host_jit_add_module(jit, m, NULL));
  void *addr = NULL;
  assert_null(kiln_host_jit_lookup(jit, "saxpy", &addr));
  assert_non_null(addr);
  saxpy_fn f = (saxpy_fn)addr;
  /* Sizes around vector widths exercise the vector body and the remainder loop. */
  const int64_t sizes[] = {0, 1, 7, 16, 63, 1000, 1027};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) check_saxpy(f, sizes[i]);
  kiln_host_jit_stats_t st = kiln_host_jit_stats(jit);
  assert_int_equal(st.modules, 1);
  assert_true(st.opt_ms > 0);
  kiln_host_jit_destroy(jit);
}

static void test_libm_tanhf_resolves_from_the_process(void **state) {
  (void)state;
  kiln_host_jit_t *jit = new_jit();
  LLVMModuleRef m = kiln_test_build_libm_caller(kiln_host_jit_context(jit), "jit_tanh", "tanhf");
  assert_null(kiln_host_jit_add_module(jit, m, NULL));
  void *addr = NULL;
  kiln_status s = kiln_host_jit_lookup(jit, "jit_tanh", &addr);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  unary_fn f = (unary_fn)addr;
  const float xs[] = {-4.0f, -0.75f, 0.0f, 0.3f, 1.0f, 9.0f};
  for (size_t i = 0; i < sizeof xs / sizeof *xs; i++)
    assert_float_equal(f(xs[i]), tanhf(xs[i]), 1e-6f);
  kiln_host_jit_destroy(jit);
}

/* A JIT that links objects only (an executable from the cache): it takes a saxpy object
 * compiled by another JIT and runs it correctly, and refuses modules. */
static void test_objects_only_jit_links_objects_and_refuses_modules(void **state) {
  (void)state;
  kiln_host_jit_t *compiler = new_jit();
  LLVMContextRef ctx = LLVMContextCreate();
  void *obj = NULL;
  size_t len = 0;
  assert_null(kiln_host_jit_compile_object(compiler, kiln_test_build_saxpy(ctx, "saxpy_obj"),
                                           "saxpy_obj", &obj, &len));
  assert_true(len > 0);
  const kiln_host_jit_options_t jo = {.objects_only = true};
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(&jo, &jit));
  assert_null(kiln_host_jit_add_object(jit, obj, len, "saxpy_obj"));
  void *addr = NULL;
  assert_null(kiln_host_jit_lookup(jit, "saxpy_obj", &addr));
  check_saxpy((saxpy_fn)addr, 1027);
  kiln_status s = kiln_host_jit_add_module(jit, kiln_test_build_saxpy(ctx, "saxpy2"), NULL);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(kiln_status_message(s), "object files only"));
  kiln_status_free(s);
  kiln_free(obj);
  kiln_host_jit_destroy(jit);
  kiln_host_jit_destroy(compiler);
  LLVMContextDispose(ctx);
}

static void test_two_modules_share_one_jit(void **state) {
  (void)state;
  kiln_host_jit_t *jit = new_jit();
  LLVMContextRef ctx = kiln_host_jit_context(jit);
  assert_null(kiln_host_jit_add_module(jit, kiln_test_build_saxpy(ctx, "saxpy_a"), NULL));
  assert_null(
      kiln_host_jit_add_module(jit, kiln_test_build_libm_caller(ctx, "jit_exp", "expf"), NULL));
  void *a = NULL, *e = NULL;
  assert_null(kiln_host_jit_lookup(jit, "jit_exp", &e));
  assert_null(kiln_host_jit_lookup(jit, "saxpy_a", &a));
  assert_ptr_not_equal(a, e);
  check_saxpy((saxpy_fn)a, 100);
  assert_float_equal(((unary_fn)e)(1.5f), expf(1.5f), 1e-6f * expf(1.5f));
  /* Lookups are stable. */
  void *again = NULL;
  assert_null(kiln_host_jit_lookup(jit, "saxpy_a", &again));
  assert_ptr_equal(a, again);
  assert_int_equal(kiln_host_jit_stats(jit).modules, 2);
  kiln_host_jit_destroy(jit);
}

static void test_module_from_another_context_is_adopted(void **state) {
  (void)state;
  kiln_host_jit_t *jit = new_jit();
  LLVMContextRef other = LLVMContextCreate();
  LLVMModuleRef m = kiln_test_build_saxpy(other, "saxpy_foreign");
  assert_null(kiln_host_jit_add_module(jit, m, NULL)); /* consumes m */
  void *addr = NULL;
  assert_null(kiln_host_jit_lookup(jit, "saxpy_foreign", &addr));
  check_saxpy((saxpy_fn)addr, 33);
  kiln_host_jit_destroy(jit);
  LLVMContextDispose(other);
}

static void test_missing_symbol_is_not_found_with_its_name(void **state) {
  (void)state;
  kiln_host_jit_t *jit = new_jit();
  assert_null(kiln_host_jit_add_module(
      jit, kiln_test_build_saxpy(kiln_host_jit_context(jit), "saxpy"), NULL));
  void *addr = (void *)1;
  kiln_status s = kiln_host_jit_lookup(jit, "kiln_no_such_kernel", &addr);
  assert_int_equal(kiln_status_code(s), KILN_NOT_FOUND);
  assert_non_null(strstr(kiln_status_message(s), "kiln_no_such_kernel"));
  assert_null(addr);
  kiln_status_free(s);
  /* The JIT still works after the failed lookup. */
  assert_null(kiln_host_jit_lookup(jit, "saxpy", &addr));
  check_saxpy((saxpy_fn)addr, 5);
  kiln_host_jit_destroy(jit);
}

static void test_duplicate_symbol_is_already_exists(void **state) {
  (void)state;
  kiln_host_jit_t *jit = new_jit();
  LLVMContextRef ctx = kiln_host_jit_context(jit);
  assert_null(kiln_host_jit_add_module(jit, kiln_test_build_saxpy(ctx, "dup"), NULL));
  kiln_status s = kiln_host_jit_add_module(jit, kiln_test_build_saxpy(ctx, "dup"), NULL);
  assert_int_equal(kiln_status_code(s), KILN_ALREADY_EXISTS);
  assert_non_null(strstr(kiln_status_message(s), "dup"));
  kiln_status_free(s);
  void *addr = NULL;
  assert_null(kiln_host_jit_lookup(jit, "dup", &addr));
  check_saxpy((saxpy_fn)addr, 9);
  kiln_host_jit_destroy(jit);
}

static void test_invalid_module_is_invalid_argument(void **state) {
  (void)state;
  kiln_host_jit_t *jit = new_jit();
  LLVMContextRef ctx = kiln_host_jit_context(jit);
  LLVMModuleRef m = LLVMModuleCreateWithNameInContext("bad", ctx);
  LLVMValueRef fn =
      LLVMAddFunction(m, "bad", LLVMFunctionType(LLVMVoidTypeInContext(ctx), NULL, 0, 0));
  LLVMAppendBasicBlockInContext(ctx, fn, "no_terminator");
  kiln_status s = kiln_host_jit_add_module(jit, m, NULL);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(kiln_status_message(s), "invalid LLVM module"));
  kiln_status_free(s);
  kiln_host_jit_destroy(jit);
}

static void test_unresolved_external_fails_lookup_without_crashing(void **state) {
  (void)state;
  kiln_host_jit_t *jit = new_jit();
  LLVMModuleRef m = kiln_test_build_libm_caller(kiln_host_jit_context(jit), "calls_missing",
                                                "kiln_undefined_external_fn");
  assert_null(kiln_host_jit_add_module(jit, m, NULL));
  void *addr = NULL;
  kiln_status s = kiln_host_jit_lookup(jit, "calls_missing", &addr);
  assert_non_null(s);
  assert_non_null(strstr(kiln_status_message(s), "kiln_undefined_external_fn"));
  assert_null(addr);
  kiln_status_free(s);
  kiln_host_jit_destroy(jit);
}

static void test_bad_pipeline_is_invalid_argument(void **state) {
  (void)state;
  kiln_host_jit_options_t opts = {.pipeline = "no-such-pass"};
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(&opts, &jit));
  kiln_status s = kiln_host_jit_add_module(
      jit, kiln_test_build_saxpy(kiln_host_jit_context(jit), "saxpy"), NULL);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(kiln_status_message(s), "no-such-pass"));
  kiln_status_free(s);
  kiln_host_jit_destroy(jit);
}

static char *read_dump(const char *dir, const char *file) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  char *text = NULL;
  size_t len = 0;
  kiln_status s = kiln_read_file(path, &text, &len);
  if (s) fprintf(stderr, "%s\n", kiln_status_message(s));
  assert_null(s);
  assert_int_equal(unlink(path), 0);
  return text;
}

/* The host target machine reaches the optimizer: with AVX2/AVX-512 in the features, the
 * saxpy loop is vectorized to ymm/zmm registers. Also checks the dump files. */
static void test_saxpy_is_vectorized_for_the_host_cpu(void **state) {
  (void)state;
  char dir[] = "/tmp/kiln-host-dump-XXXXXX";
  assert_non_null(mkdtemp(dir));
  kiln_host_jit_options_t opts = {.dump_dir = dir};
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(&opts, &jit));
  assert_true(strlen(kiln_host_jit_cpu(jit)) > 0);
  assert_null(kiln_host_jit_add_module(
      jit, kiln_test_build_saxpy(kiln_host_jit_context(jit), "saxpy"), "kernel.saxpy"));
  char *input = read_dump(dir, "kernel.saxpy.90-llvm-input.ll");
  char *opt = read_dump(dir, "kernel.saxpy.92-llvm-opt.ll");
  char *as = read_dump(dir, "kernel.saxpy.93-host-asm.s");
  assert_int_equal(rmdir(dir), 0);
  assert_null(strstr(input, "<8 x float>"));
  assert_non_null(strstr(input, "target triple"));
  const char *features = kiln_host_jit_features(jit);
  bool avx512 = strstr(features, "+avx512f") != NULL;
  bool avx2 = strstr(features, "+avx2") != NULL;
  printf("host cpu %s, avx2=%d avx512f=%d\n", kiln_host_jit_cpu(jit), avx2, avx512);
  if (avx2 || avx512) {
    assert_true(strstr(opt, "<8 x float>") || strstr(opt, "<16 x float>"));
    assert_true(strstr(as, "ymm") || strstr(as, "zmm"));
  } else {
    assert_non_null(strstr(opt, "x float>")); /* SSE: still vectorized */
  }
  void *addr = NULL;
  assert_null(kiln_host_jit_lookup(jit, "saxpy", &addr));
  check_saxpy((saxpy_fn)addr, 517);
  kiln_free(input);
  kiln_free(opt);
  kiln_free(as);
  kiln_host_jit_destroy(jit);
}

static void test_null_arguments_are_invalid(void **state) {
  (void)state;
  kiln_host_jit_t *jit = new_jit();
  kiln_status s = kiln_host_jit_add_module(jit, NULL, NULL);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  kiln_status_free(s);
  s = kiln_host_jit_lookup(jit, NULL, NULL);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  kiln_status_free(s);
  kiln_host_jit_destroy(jit);
  kiln_host_jit_destroy(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_saxpy_runs_and_is_correct),
      cmocka_unit_test(test_libm_tanhf_resolves_from_the_process),
      cmocka_unit_test(test_objects_only_jit_links_objects_and_refuses_modules),
      cmocka_unit_test(test_two_modules_share_one_jit),
      cmocka_unit_test(test_module_from_another_context_is_adopted),
      cmocka_unit_test(test_missing_symbol_is_not_found_with_its_name),
      cmocka_unit_test(test_duplicate_symbol_is_already_exists),
      cmocka_unit_test(test_invalid_module_is_invalid_argument),
      cmocka_unit_test(test_unresolved_external_fails_lookup_without_crashing),
      cmocka_unit_test(test_bad_pipeline_is_invalid_argument),
      cmocka_unit_test(test_saxpy_is_vectorized_for_the_host_cpu),
      cmocka_unit_test(test_null_arguments_are_invalid),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
