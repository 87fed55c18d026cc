/* PJRT conformance, custom calls: handler libraries named by the client option
 * `ffi_libraries` are loaded by the plugin (itself loaded with dlopen(RTLD_LOCAL), as a
 * framework loads it) and called from HLO custom calls: a typed C handler named by
 * `target=lib.so:symbol`, and a C++ library built against OpenXLA's ffi.h that registers its
 * handler when loaded, through xla::ffi::GetXlaFfiApi(), a symbol it can only find if the
 * plugin made its FFI entry points visible. A bad spec fails Client_Create; a target nobody
 * registered fails Compile naming it. Built against OpenXLA's pjrt_c_api.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "pjrt_exec_util.h"
#include "skip_util.h"

static const PJRT_Api *api;

static PJRT_Client *client_with_ffi(const char *spec) {
  PJRT_NamedValue o[2] = {pjrt_test_opt_string("ffi_libraries", spec),
                          pjrt_test_opt_string("cache_dir", "")};
  return pjrt_test_client(api, o, 2);
}

static const char *kConvert =
    "HloModule ffi_convert\n"
    "ENTRY main {\n"
    "  p = s32[2,3] parameter(0)\n"
    "  ROOT c = f32[2,3] custom-call(p), custom_call_target=\"kiln_pjrt_s32_to_f32\",\n"
    "      api_version=API_VERSION_TYPED_FFI\n"
    "}\n";

static void test_typed_c_handler_from_client_option(void **state) {
  (void)state;
  PJRT_Client *c =
      client_with_ffi("kiln_pjrt_s32_to_f32=" KILN_FFI_TEST_CALL_LIB ":kiln_call_s32_to_f32");
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_LoadedExecutable *l = pjrt_exec_compile(api, c, kConvert);
  int32_t x[6] = {-3, 0, 1, 7, 100, -42};
  int64_t dims[2] = {2, 3};
  PJRT_Buffer *args[1] = {pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_S32, dims, 2)};
  PJRT_Buffer *out[1] = {NULL};
  pjrt_exec_run(api, l, args, 1, out);
  float r[6];
  pjrt_exec_read(api, out[0], r, sizeof(r));
  for (int i = 0; i < 6; i++) assert_true(r[i] == (float)x[i] + 0.5f);
  pjrt_exec_buffer_destroy(api, out[0]);
  pjrt_exec_buffer_destroy(api, args[0]);
  pjrt_exec_destroy(api, l);
  pjrt_test_client_destroy(api, c);
}

static const char *kNegate =
    "HloModule ffi_negate\n"
    "ENTRY main {\n"
    "  p = f32[5] parameter(0)\n"
    "  ROOT c = f32[5] custom-call(p), custom_call_target=\"kiln_cxx_negate\",\n"
    "      api_version=API_VERSION_TYPED_FFI\n"
    "}\n";

static void test_self_registering_cxx_library(void **state) {
  (void)state;
  const char *lib = KILN_FFI_TEST_CXX_LIB;
  if (!*lib) KILN_SKIP("no C++ compiler or no ../shared/abi: the C++ handler library is not built");
  PJRT_Client *c = client_with_ffi(lib);
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_LoadedExecutable *l = pjrt_exec_compile(api, c, kNegate);
  float x[5] = {1.5f, -2.0f, 0.0f, 3.25f, -7.0f};
  int64_t dims[1] = {5};
  PJRT_Buffer *args[1] = {pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_F32, dims, 1)};
  PJRT_Buffer *out[1] = {NULL};
  pjrt_exec_run(api, l, args, 1, out);
  float r[5];
  pjrt_exec_read(api, out[0], r, sizeof(r));
  for (int i = 0; i < 5; i++) assert_true(r[i] == -x[i]);
  pjrt_exec_buffer_destroy(api, out[0]);
  pjrt_exec_buffer_destroy(api, args[0]);
  pjrt_exec_destroy(api, l);
  pjrt_test_client_destroy(api, c);
}

static void test_bad_spec_and_missing_target(void **state) {
  (void)state;
  PJRT_NamedValue bad = pjrt_test_opt_string("ffi_libraries", "t=/no/such/lib.so:sym");
  PJRT_Client_Create_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  a.create_options = &bad;
  a.num_options = 1;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_Create(&a), PJRT_Error_Code_UNAVAILABLE,
                    "/no/such/lib.so");
  assert_null(a.client);

  PJRT_Client *c = pjrt_exec_client(api, "");
  const char *missing =
      "HloModule ffi_missing\n"
      "ENTRY main {\n"
      "  p = f32[2] parameter(0)\n"
      "  ROOT c = f32[2] custom-call(p), custom_call_target=\"kiln_nobody_registered_this\",\n"
      "      api_version=API_VERSION_TYPED_FFI\n"
      "}\n";
  PJRT_LoadedExecutable *l = NULL;
  PJRT_Error *e = pjrt_exec_try_compile(api, c, "hlo", missing, strlen(missing), NULL, 0, &l);
  if (!e) {
    /* Lazy JIT: the handler is looked up when the kernels are made, on the first execute. */
    float x[2] = {1, 2};
    int64_t dims[1] = {2};
    PJRT_Buffer *args[1] = {
        pjrt_exec_buffer(api, c, pjrt_exec_device(api, c, 0), x, PJRT_Buffer_Type_F32, dims, 1)};
    PJRT_Buffer *out[1] = {NULL};
    e = pjrt_exec_try_run(api, l, args, 1, out, NULL);
    pjrt_exec_buffer_destroy(api, args[0]);
    pjrt_exec_destroy(api, l);
  }
  PJRT_EXPECT_ERROR(api, e, PJRT_Error_Code_NOT_FOUND, "kiln_nobody_registered_this");
  pjrt_test_client_destroy(api, c);
}

int main(void) {
  api = pjrt_test_load();
  if (!api) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_typed_c_handler_from_client_option),
      cmocka_unit_test(test_self_registering_cxx_library),
      cmocka_unit_test(test_bad_spec_and_missing_target),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
