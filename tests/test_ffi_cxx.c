/* FFI handlers written in C++ against OpenXLA's ffi.h (tests/ffi/handlers_cxx.cc), loaded
 * with dlopen through kiln's registry and called through kiln's call frames: typed buffers
 * with the binding's dtype checks, every attribute kind, variadic arguments, state from
 * instantiate read at execute, a failing handler, an asynchronous handler completing a
 * future, context queries, and a library that registers itself through the C++ accessor
 * kiln exports. Skipped (77) where the build had no C++ compiler. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/status.h"
#include "ffi/ffi_attrs.h"
#include "ffi/ffi_call_frame.h"
#include "ffi/ffi_registry.h"

#ifdef KILN_FFI_TEST_CXX_LIB
#define LIB KILN_FFI_TEST_CXX_LIB

static kiln_ffi_registry_t *g_reg;

static int setup(void **state) {
  (void)state;
  /* Referencing XLA_FFI_GetApi links ffi_export.c, which also defines xla::ffi::GetXlaFfiApi;
   * ENABLE_EXPORTS makes both visible to the libraries this test opens. */
  if (XLA_FFI_GetApi() != kiln_ffi_api()) return -1;
  if (kiln_ffi_registry_create(&g_reg)) return -1;
  kiln_status s = kiln_ffi_registry_load_spec(
      g_reg, "scale=" LIB ":KilnCxxScale,attrs=" LIB ":KilnCxxAttrs,sum=" LIB
             ":KilnCxxSum,"
             "bias=" LIB
             ":instantiate=KilnCxxBiasInstantiate/execute=KilnCxxBiasExecute,"
             "fail=" LIB ":KilnCxxFail,async=" LIB ":KilnCxxAsync,ctx@gpu=" LIB ":KilnCxxContext");
  if (s) {
    kiln_status_report(s, "setup");
    return -1;
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  kiln_ffi_registry_destroy(g_reg);
  return 0;
}

static kiln_ffi_handler_t lookup(const char *target, kiln_ffi_platform_t p) {
  kiln_ffi_handler_t h;
  kiln_status s = kiln_ffi_registry_lookup(g_reg, target, p, &h);
  if (s) fail_msg("%s", kiln_status_message(s));
  return h;
}

static kiln_ffi_attrs_t *parse(const char *text) {
  kiln_ffi_attrs_t *a = NULL;
  kiln_status s = kiln_ffi_attrs_parse(text, strlen(text), &a);
  if (s) fail_msg("%s", kiln_status_message(s));
  return a;
}

static void test_typed_buffers_and_a_scalar_attribute(void **state) {
  (void)state;
  kiln_ffi_handler_t h = lookup("scale", KILN_FFI_PLATFORM_HOST);
  assert_int_equal(h.api_major, 0);
  assert_int_equal(h.api_minor, 4);
  assert_true(h.traits & XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE);
  kiln_ffi_attrs_t *a = parse("{scale = 2.5 : f32}");
  float in[3] = {1, 2, 4}, out[3] = {0};
  int64_t dims[1] = {3};
  kiln_ffi_buffer_desc_t arg = {XLA_FFI_DataType_F32, 1, dims, in};
  kiln_ffi_buffer_desc_t ret = {XLA_FFI_DataType_F32, 1, dims, out};
  kiln_ffi_call_frame_t *cf;
  assert_null(kiln_ffi_call_frame_create(&arg, 1, &ret, 1, a, &cf));
  kiln_ffi_context_t ctx = {0};
  assert_null(kiln_ffi_call_frame_invoke(cf, h.bundle.execute, XLA_FFI_ExecutionStage_EXECUTE, &ctx,
                                         "scale", NULL));
  assert_true(out[0] == 2.5f && out[2] == 10.0f);
  kiln_ffi_call_frame_destroy(cf);

  /* The binding's own check: an s32 buffer where Buffer<F32> is bound. */
  int32_t iin[3] = {0};
  kiln_ffi_buffer_desc_t bad = {XLA_FFI_DataType_S32, 1, dims, iin};
  assert_null(kiln_ffi_call_frame_create(&bad, 1, &ret, 1, a, &cf));
  kiln_status s = kiln_ffi_call_frame_invoke(cf, h.bundle.execute, XLA_FFI_ExecutionStage_EXECUTE,
                                             &ctx, "scale", NULL);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(kiln_status_message(s), "Wrong buffer dtype"));
  kiln_status_free(s);
  kiln_ffi_call_frame_destroy(cf);
  kiln_ffi_attrs_destroy(a);
}

static void test_every_attribute_kind_decodes_in_the_cxx_binding(void **state) {
  (void)state;
  kiln_ffi_handler_t h = lookup("attrs", KILN_FFI_PLATFORM_HOST);
  kiln_ffi_attrs_t *a = parse(
      "{u64 = 18446744073709551615 : ui64, i8 = -128 : i8, i16 = 32767 : i16, i32 = -7 : i32, "
      "i64 = 1099511627776, u8 = 255 : ui8, u16 = 65535 : ui16, u32 = 4000000000 : ui32, "
      "f32 = 1.5 : f32, f64 = -0.25, b = true, arr = array<i64: 1, 2, 3>, "
      "farr = dense<[0.5, 0.25]> : tensor<2xf32>, str = \"hello\", "
      "dict = {name = \"inner\", lo = -3 : i64}}");
  double out[16] = {0};
  int64_t dims[1] = {16};
  kiln_ffi_buffer_desc_t ret = {XLA_FFI_DataType_F64, 1, dims, out};
  kiln_ffi_call_frame_t *cf;
  assert_null(kiln_ffi_call_frame_create(NULL, 0, &ret, 1, a, &cf));
  kiln_status s = kiln_ffi_call_frame_invoke(cf, h.bundle.execute, XLA_FFI_ExecutionStage_EXECUTE,
                                             NULL, "attrs", NULL);
  if (s) fail_msg("%s", kiln_status_message(s));
  const double want[16] = {1,
                           -128,
                           32767,
                           -7,
                           1099511627776.0,
                           255,
                           65535,
                           4000000000.0,
                           18446744073709551615.0,
                           1.5,
                           -0.25,
                           3006,
                           0.75,
                           105,
                           -3,
                           102};
  for (int i = 0; i < 16; i++)
    if (out[i] != want[i]) fail_msg("attribute %d: got %g, want %g", i, out[i], want[i]);
  kiln_ffi_call_frame_destroy(cf);
  kiln_ffi_attrs_destroy(a);
}

static void test_remaining_args_take_any_number_of_buffers(void **state) {
  (void)state;
  kiln_ffi_handler_t h = lookup("sum", KILN_FFI_PLATFORM_HOST);
  float x[2] = {1, 2}, y[2] = {10, 20}, z[2] = {100, 200}, out[2];
  int64_t dims[1] = {2};
  kiln_ffi_buffer_desc_t args[3] = {{XLA_FFI_DataType_F32, 1, dims, x},
                                    {XLA_FFI_DataType_F32, 1, dims, y},
                                    {XLA_FFI_DataType_F32, 1, dims, z}};
  kiln_ffi_buffer_desc_t ret = {XLA_FFI_DataType_F32, 1, dims, out};
  for (size_t n = 0; n <= 3; n++) {
    kiln_ffi_call_frame_t *cf;
    assert_null(kiln_ffi_call_frame_create(args, n, &ret, 1, NULL, &cf));
    assert_null(kiln_ffi_call_frame_invoke(cf, h.bundle.execute, XLA_FFI_ExecutionStage_EXECUTE,
                                           NULL, "sum", NULL));
    const float want1[4] = {0, 1, 11, 111};
    assert_true(out[0] == want1[n]);
    kiln_ffi_call_frame_destroy(cf);
  }
}

static void test_state_created_at_instantiate_is_read_at_execute(void **state) {
  (void)state;
  kiln_ffi_handler_t h = lookup("bias", KILN_FFI_PLATFORM_HOST);
  assert_non_null(h.bundle.instantiate);
  XLA_FFI_TypeId id;
  assert_null(kiln_ffi_type_lookup("kiln_test_bias", 14, &id)); /* XLA_FFI_REGISTER_TYPE ran */
  assert_true(id.type_id > 0);
  kiln_ffi_attrs_t *a = parse("{bias = 0.5 : f32}");
  float in[2] = {1, 2}, out[2] = {0};
  int64_t dims[1] = {2};
  kiln_ffi_buffer_desc_t arg = {XLA_FFI_DataType_F32, 1, dims, in};
  kiln_ffi_buffer_desc_t ret = {XLA_FFI_DataType_F32, 1, dims, out};
  kiln_ffi_call_frame_t *cf;
  assert_null(kiln_ffi_call_frame_create(&arg, 1, &ret, 1, a, &cf));
  kiln_ffi_context_t ctx = {0};
  /* Execute before instantiate: the state is missing, and the binding says so. */
  ctx.state = kiln_ffi_state_create();
  kiln_status s = kiln_ffi_call_frame_invoke_bundle(cf, &h.bundle, XLA_FFI_ExecutionStage_EXECUTE,
                                                    &ctx, "bias", NULL);
  assert_non_null(s);
  assert_non_null(strstr(kiln_status_message(s), "no state was set at stage instantiate"));
  kiln_status_free(s);
  for (int stage = 0; stage <= 3; stage++)
    assert_null(kiln_ffi_call_frame_invoke_bundle(cf, &h.bundle, (XLA_FFI_ExecutionStage)stage,
                                                  &ctx, "bias", NULL));
  assert_true(out[0] == 1.5f && out[1] == 2.5f);
  kiln_ffi_state_destroy(ctx.state); /* runs the C++ deleter (LSan checks) */
  kiln_ffi_call_frame_destroy(cf);
  kiln_ffi_attrs_destroy(a);
}

static void test_failing_cxx_handler_message_surfaces(void **state) {
  (void)state;
  kiln_ffi_handler_t h = lookup("fail", KILN_FFI_PLATFORM_HOST);
  kiln_ffi_attrs_t *a = parse("{why = \"disk on fire\"}");
  kiln_ffi_call_frame_t *cf;
  assert_null(kiln_ffi_call_frame_create(NULL, 0, NULL, 0, a, &cf));
  kiln_status s = kiln_ffi_call_frame_invoke(cf, h.bundle.execute, XLA_FFI_ExecutionStage_EXECUTE,
                                             NULL, "custom-call.7", NULL);
  assert_int_equal(kiln_status_code(s), KILN_INTERNAL);
  assert_non_null(strstr(kiln_status_message(s), "C++ handler failed: disk on fire"));
  assert_non_null(strstr(kiln_status_message(s), "custom-call.7"));
  kiln_status_free(s);
  kiln_ffi_call_frame_destroy(cf);
  kiln_ffi_attrs_destroy(a);
}

static void test_async_handler_completes_its_future(void **state) {
  (void)state;
  kiln_ffi_handler_t h = lookup("async", KILN_FFI_PLATFORM_HOST);
  float in[3] = {1, 2, 3}, out[3] = {0};
  int64_t dims[1] = {3};
  kiln_ffi_buffer_desc_t arg = {XLA_FFI_DataType_F32, 1, dims, in};
  kiln_ffi_buffer_desc_t ret = {XLA_FFI_DataType_F32, 1, dims, out};
  kiln_ffi_call_frame_t *cf;
  assert_null(kiln_ffi_call_frame_create(&arg, 1, &ret, 1, NULL, &cf));
  XLA_FFI_Future *f = NULL;
  assert_null(kiln_ffi_call_frame_invoke(cf, h.bundle.execute, XLA_FFI_ExecutionStage_EXECUTE, NULL,
                                         "async", &f));
  assert_non_null(f);
  assert_null(kiln_ffi_future_wait(f));
  assert_true(kiln_ffi_future_is_ready(f));
  kiln_ffi_future_release(f);
  assert_true(out[0] == 2 && out[2] == 6);
  /* Without out_future the invoke waits itself. */
  out[0] = 0;
  assert_null(kiln_ffi_call_frame_invoke(cf, h.bundle.execute, XLA_FFI_ExecutionStage_EXECUTE, NULL,
                                         "async", NULL));
  assert_true(out[0] == 2);
  kiln_ffi_call_frame_destroy(cf);
}

static void test_context_queries_reach_the_cxx_binding(void **state) {
  (void)state;
  kiln_ffi_handler_t h = lookup("ctx", KILN_FFI_PLATFORM_CUDA);
  int64_t out[2] = {0};
  int64_t dims[1] = {2};
  kiln_ffi_buffer_desc_t ret = {XLA_FFI_DataType_S64, 1, dims, out};
  kiln_ffi_call_frame_t *cf;
  assert_null(kiln_ffi_call_frame_create(NULL, 0, &ret, 1, NULL, &cf));
  kiln_ffi_context_t ctx = {.platform = KILN_FFI_PLATFORM_CUDA, .device_ordinal = 3, .run_id = 77};
  assert_null(kiln_ffi_call_frame_invoke(cf, h.bundle.execute, XLA_FFI_ExecutionStage_EXECUTE, &ctx,
                                         "ctx", NULL));
  assert_int_equal(out[0], 77);
  assert_int_equal(out[1], 3);
  kiln_ffi_call_frame_destroy(cf);
}

static void test_library_registers_itself_through_the_cxx_accessor(void **state) {
  (void)state;
  /* A bare library entry: its XLA_FFI_REGISTER_HANDLER calls xla::ffi::GetXlaFfiApi(), which
   * this executable exports, and lands in the registry that is loading it. The library was
   * opened already (cached by path), so open it through a fresh registry. */
  kiln_ffi_registry_t *r;
  assert_null(kiln_ffi_registry_create(&r));
  assert_null(kiln_ffi_registry_load_spec(r, LIB));
  kiln_ffi_handler_t h;
  kiln_status s = kiln_ffi_registry_lookup(r, "kiln_cxx_negate", KILN_FFI_PLATFORM_HOST, &h);
  if (s) {
    /* dlopen returned the already-loaded library without rerunning its initializers: its
     * registration went to the registry that first loaded it. */
    kiln_status_free(s);
    assert_null(kiln_ffi_registry_lookup(g_reg, "kiln_cxx_negate", KILN_FFI_PLATFORM_HOST, &h));
  }
  float in[2] = {1, -2}, out[2];
  int64_t dims[1] = {2};
  kiln_ffi_buffer_desc_t arg = {XLA_FFI_DataType_F32, 1, dims, in};
  kiln_ffi_buffer_desc_t ret = {XLA_FFI_DataType_F32, 1, dims, out};
  kiln_ffi_call_frame_t *cf;
  assert_null(kiln_ffi_call_frame_create(&arg, 1, &ret, 1, NULL, &cf));
  assert_null(kiln_ffi_call_frame_invoke(cf, h.bundle.execute, XLA_FFI_ExecutionStage_EXECUTE, NULL,
                                         "negate", NULL));
  assert_true(out[0] == -1 && out[1] == 2);
  kiln_ffi_call_frame_destroy(cf);
  kiln_ffi_registry_destroy(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_typed_buffers_and_a_scalar_attribute),
      cmocka_unit_test(test_every_attribute_kind_decodes_in_the_cxx_binding),
      cmocka_unit_test(test_remaining_args_take_any_number_of_buffers),
      cmocka_unit_test(test_state_created_at_instantiate_is_read_at_execute),
      cmocka_unit_test(test_failing_cxx_handler_message_surfaces),
      cmocka_unit_test(test_async_handler_completes_its_future),
      cmocka_unit_test(test_context_queries_reach_the_cxx_binding),
      cmocka_unit_test(test_library_registers_itself_through_the_cxx_accessor),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}

#else

int main(void) {
  printf(
      "test_ffi_cxx: SKIPPED: no C++ compiler (or no ../shared/abi) at configure time, so "
      "the C++ handler library was not built\n");
  return 77;
}

#endif
