/* FFI handler libraries loaded with dlopen through the registry's spec strings: a C handler
 * library (tests/ffi/handlers_c.c, built against kiln's ffi_c_api.h) called through a call
 * frame, and the distinct errors for a library that cannot be opened, a missing symbol, a
 * handler built for another FFI version and a target with no handler. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/status.h"
#include "ffi/ffi_call_frame.h"
#include "ffi/ffi_registry.h"
#include "plugin/env_options.h"

#ifndef KILN_FFI_TEST_C_LIB
#define KILN_FFI_TEST_C_LIB "libkiln_ffi_test_handlers_c.so"
#endif

static void expect_error(kiln_status s, kiln_status_code_t code, const char *needle) {
  assert_non_null(s);
  if (kiln_status_code(s) != code || !strstr(kiln_status_message(s), needle))
    fail_msg("expected %s containing '%s', got %s: %s", kiln_status_code_name(code), needle,
             kiln_status_code_name(kiln_status_code(s)), kiln_status_message(s));
  kiln_status_free(s);
}

static void test_c_library_handler_runs_through_a_call_frame(void **state) {
  (void)state;
  kiln_ffi_registry_t *r;
  assert_null(kiln_ffi_registry_create(&r));
  assert_null(kiln_ffi_registry_load_spec(
      r, "kiln_add=" KILN_FFI_TEST_C_LIB ":kiln_test_c_add_f32, kiln_add@CUDA=" KILN_FFI_TEST_C_LIB
         ":kiln_test_c_add_f32"));
  assert_int_equal(kiln_ffi_registry_size(r), 2);
  kiln_ffi_handler_t h;
  assert_null(kiln_ffi_registry_lookup(r, "kiln_add", KILN_FFI_PLATFORM_HOST, &h));
  assert_string_equal(h.target, "kiln_add");
  assert_int_equal(h.api_major, 0);
  assert_int_equal(h.api_minor, 4);
  assert_true(h.traits & XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE);

  float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, out[4] = {0};
  int64_t dims[1] = {4};
  kiln_ffi_buffer_desc_t args[2] = {{XLA_FFI_DataType_F32, 1, dims, NULL},
                                    {XLA_FFI_DataType_F32, 1, dims, NULL}};
  kiln_ffi_buffer_desc_t rets[1] = {{XLA_FFI_DataType_F32, 1, dims, NULL}};
  kiln_ffi_call_frame_t *cf;
  assert_null(kiln_ffi_call_frame_create(args, 2, rets, 1, NULL, &cf));
  void *ap[2] = {a, b}, *rp[1] = {out};
  kiln_ffi_call_frame_patch(cf, ap, rp);
  kiln_ffi_context_t ctx = {0};
  assert_null(kiln_ffi_call_frame_invoke_bundle(cf, &h.bundle, XLA_FFI_ExecutionStage_EXECUTE, &ctx,
                                                "kiln_add", NULL));
  assert_true(out[0] == 11 && out[3] == 44);
  /* Patch only the addresses and call again. */
  float out2[4] = {0};
  kiln_ffi_call_frame_set_ret(cf, 0, out2);
  kiln_ffi_call_frame_set_arg(cf, 1, a);
  assert_null(kiln_ffi_call_frame_invoke_bundle(cf, &h.bundle, XLA_FFI_ExecutionStage_EXECUTE, &ctx,
                                                "kiln_add", NULL));
  assert_true(out2[0] == 2 && out2[3] == 8);
  kiln_ffi_call_frame_destroy(cf);
  kiln_ffi_registry_destroy(r);
}

static void test_failing_c_handler_error_surfaces_with_the_call_name(void **state) {
  (void)state;
  kiln_ffi_registry_t *r;
  assert_null(kiln_ffi_registry_create(&r));
  assert_null(kiln_ffi_registry_load_spec(r, "kiln_fail=" KILN_FFI_TEST_C_LIB ":kiln_test_c_fail"));
  kiln_ffi_handler_t h;
  assert_null(kiln_ffi_registry_lookup(r, "kiln_fail", KILN_FFI_PLATFORM_HOST, &h));
  assert_int_equal(h.api_minor, 2); /* built against 0.2: accepted */
  kiln_ffi_call_frame_t *cf;
  assert_null(kiln_ffi_call_frame_create(NULL, 0, NULL, 0, NULL, &cf));
  kiln_status s = kiln_ffi_call_frame_invoke(cf, h.bundle.execute, XLA_FFI_ExecutionStage_EXECUTE,
                                             NULL, "my.custom.call", NULL);
  assert_int_equal(kiln_status_code(s), KILN_INTERNAL);
  assert_non_null(strstr(kiln_status_message(s), "C handler failed on purpose"));
  assert_non_null(strstr(kiln_status_message(s), "my.custom.call"));
  kiln_status_free(s);
  kiln_ffi_call_frame_destroy(cf);
  kiln_ffi_registry_destroy(r);
}

static void test_library_that_cannot_be_opened_reports_dlerror(void **state) {
  (void)state;
  kiln_ffi_registry_t *r;
  assert_null(kiln_ffi_registry_create(&r));
  kiln_status s = kiln_ffi_registry_load_spec(r, "x=/nonexistent/libnothing.so:handler");
  assert_int_equal(kiln_status_code(s), KILN_UNAVAILABLE);
  assert_non_null(strstr(kiln_status_message(s), "cannot open FFI handler library"));
  assert_non_null(strstr(kiln_status_message(s), "/nonexistent/libnothing.so"));
  assert_non_null(strstr(kiln_status_message(s), "No such file")); /* dlerror() text */
  kiln_status_free(s);
  kiln_ffi_registry_destroy(r);
}

static void test_missing_symbol_is_not_found(void **state) {
  (void)state;
  kiln_ffi_registry_t *r;
  assert_null(kiln_ffi_registry_create(&r));
  expect_error(kiln_ffi_registry_load_spec(r, "x=" KILN_FFI_TEST_C_LIB ":no_such_handler"),
               KILN_NOT_FOUND, "symbol 'no_such_handler' not found");
  assert_int_equal(kiln_ffi_registry_size(r), 0);
  kiln_ffi_registry_destroy(r);
}

static void test_handler_built_for_another_ffi_version_is_refused(void **state) {
  (void)state;
  kiln_ffi_registry_t *r;
  assert_null(kiln_ffi_registry_create(&r));
  expect_error(
      kiln_ffi_registry_load_spec(r, "v=" KILN_FFI_TEST_C_LIB ":kiln_test_c_wrong_version"),
      KILN_FAILED_PRECONDITION, "built for XLA FFI API 1.0; kiln accepts 0.1 to 0.4");
  expect_error(kiln_ffi_registry_load_spec(r, "v=" KILN_FFI_TEST_C_LIB ":kiln_test_c_future_minor"),
               KILN_FAILED_PRECONDITION, "XLA FFI API 0.99");
  expect_error(kiln_ffi_registry_load_spec(r, "v=" KILN_FFI_TEST_C_LIB ":kiln_test_c_no_metadata"),
               KILN_FAILED_PRECONDITION, "did not report its metadata");
  assert_int_equal(kiln_ffi_registry_size(r), 0);
  kiln_ffi_registry_destroy(r);
}

static void test_missing_target_names_target_and_platform(void **state) {
  (void)state;
  kiln_ffi_registry_t *r;
  assert_null(kiln_ffi_registry_create(&r));
  kiln_ffi_handler_t h;
  expect_error(kiln_ffi_registry_lookup(r, "foo", KILN_FFI_PLATFORM_HOST, &h), KILN_NOT_FOUND,
               "no FFI handler for target 'foo' on platform Host");
  assert_null(
      kiln_ffi_registry_load_spec(r, "foo@cuda=" KILN_FFI_TEST_C_LIB ":kiln_test_c_add_f32"));
  expect_error(kiln_ffi_registry_lookup(r, "foo", KILN_FFI_PLATFORM_HOST, &h), KILN_NOT_FOUND,
               "(there is one on CUDA)");
  /* Target names are exact; platform names are not. */
  expect_error(kiln_ffi_registry_lookup(r, "FOO", KILN_FFI_PLATFORM_CUDA, &h), KILN_NOT_FOUND,
               "'FOO'");
  kiln_ffi_registry_destroy(r);
}

static void test_spec_syntax_errors_and_duplicates(void **state) {
  (void)state;
  kiln_ffi_registry_t *r;
  assert_null(kiln_ffi_registry_create(&r));
  expect_error(kiln_ffi_registry_load_spec(r, "x=nolibrary"), KILN_INVALID_ARGUMENT,
               "expected target=library:symbol");
  expect_error(kiln_ffi_registry_load_spec(r, "=lib.so:sym"), KILN_INVALID_ARGUMENT,
               "empty target name");
  expect_error(kiln_ffi_registry_load_spec(r, "x@tpu=" KILN_FFI_TEST_C_LIB ":kiln_test_c_add_f32"),
               KILN_INVALID_ARGUMENT, "unknown FFI platform 'tpu'");
  expect_error(kiln_ffi_registry_load_spec(r, "x=" KILN_FFI_TEST_C_LIB ":warmup=kiln_test_c_fail"),
               KILN_INVALID_ARGUMENT, "unknown stage 'warmup'");
  expect_error(kiln_ffi_registry_load_spec(r, "x=" KILN_FFI_TEST_C_LIB ":prepare=kiln_test_c_fail"),
               KILN_INVALID_ARGUMENT, "no execute= symbol");
  /* The same handler twice is fine; another one for the same target is not. */
  assert_null(kiln_ffi_registry_load_spec(r, "d=" KILN_FFI_TEST_C_LIB ":kiln_test_c_add_f32,"
                                             "d=" KILN_FFI_TEST_C_LIB ":kiln_test_c_add_f32"));
  expect_error(kiln_ffi_registry_load_spec(r, "d=" KILN_FFI_TEST_C_LIB ":kiln_test_c_fail"),
               KILN_ALREADY_EXISTS, "duplicate FFI handler registration for 'd'");
  /* A bundle with stages. */
  assert_null(kiln_ffi_registry_load_spec(
      r, "b@Host=" KILN_FFI_TEST_C_LIB ":prepare=kiln_test_c_fail/execute=kiln_test_c_add_f32"));
  kiln_ffi_handler_t h;
  assert_null(kiln_ffi_registry_lookup(r, "b", KILN_FFI_PLATFORM_HOST, &h));
  assert_non_null(h.bundle.prepare);
  assert_null(h.bundle.instantiate);
  kiln_ffi_registry_destroy(r);
}

static void test_spec_from_the_environment(void **state) {
  (void)state;
  kiln_ffi_registry_t *r;
  assert_null(kiln_ffi_registry_create(&r));
  unsetenv("KILN_FFI_TEST_HANDLERS");
  assert_null(kiln_pjrt_ffi_registry_load_env(r, "KILN_FFI_TEST_HANDLERS"));
  assert_int_equal(kiln_ffi_registry_size(r), 0);
  setenv("KILN_FFI_TEST_HANDLERS", "envadd=" KILN_FFI_TEST_C_LIB ":kiln_test_c_add_f32", 1);
  assert_null(kiln_pjrt_ffi_registry_load_env(r, "KILN_FFI_TEST_HANDLERS"));
  kiln_ffi_handler_t h;
  assert_null(kiln_ffi_registry_lookup(r, "envadd", KILN_FFI_PLATFORM_HOST, &h));
  setenv("KILN_FFI_TEST_HANDLERS", "bad", 1);
  expect_error(kiln_pjrt_ffi_registry_load_env(r, "KILN_FFI_TEST_HANDLERS"), KILN_UNAVAILABLE,
               "in KILN_FFI_TEST_HANDLERS");
  unsetenv("KILN_FFI_TEST_HANDLERS");
  kiln_ffi_registry_destroy(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_c_library_handler_runs_through_a_call_frame),
      cmocka_unit_test(test_failing_c_handler_error_surfaces_with_the_call_name),
      cmocka_unit_test(test_library_that_cannot_be_opened_reports_dlerror),
      cmocka_unit_test(test_missing_symbol_is_not_found),
      cmocka_unit_test(test_handler_built_for_another_ffi_version_is_refused),
      cmocka_unit_test(test_missing_target_names_target_and_platform),
      cmocka_unit_test(test_spec_syntax_errors_and_duplicates),
      cmocka_unit_test(test_spec_from_the_environment),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
