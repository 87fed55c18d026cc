/* PJRT conformance, custom calls: handler libraries named by the client option
 * `ffi_libraries` are loaded by the plugin (itself loaded with dlopen(RTLD_LOCAL), as a
 * framework loads it) and called from HLO custom calls: a typed C handler named by
 * `target=lib.so:symbol`, and a C++ library built against OpenXLA's ffi.h that registers its
 * handler when loaded, through xla::ffi::GetXlaFfiApi(), a symbol it can only find if the
 * plugin made its FFI entry points visible. A bad spec fails Client_Create; a target nobody
 * registered fails Compile naming it. A handler registered through PJRT's FFI extension reads
 * the user data a client attached to a PJRT_ExecuteContext and the execution's run id (one per
 * execute, shared by its custom calls; the launch id when given). Built against OpenXLA's
 * pjrt_c_api.h, its FFI extension header and xla/ffi/api/c_api.h. A StableHLO module (the
 * "mlir" format) calls a handler with stablehlo.custom_call, api_version 4 and a
 * backend_config dictionary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "pjrt_exec_util.h"
#include "pjrt_ffi_util.h"
#include "skip_util.h"
#include "xla/ffi/api/c_api.h"
#include "xla/pjrt/c/pjrt_c_api_ffi_extension.h"

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

/* ---- execute context: FFI user data and run ids ---- */

static const PJRT_FFI_Extension *ffi_extension(void) {
  for (const PJRT_Extension_Base *e = api->extension_start; e; e = e->next)
    if (e->type == PJRT_Extension_Type_FFI) return (const PJRT_FFI_Extension *)e;
  return NULL;
}

static int64_t g_counter_type_id;

/* ret 0 (s64[2]) = {the user data (an int64_t) of g_counter_type_id, the run id}. */
static XLA_FFI_Error *read_context(XLA_FFI_CallFrame *f) {
  if (pjrt_ffi_metadata_query(f)) return NULL;
  XLA_FFI_TypeId id = {g_counter_type_id};
  XLA_FFI_InvokeContext_Get_Args g;
  memset(&g, 0, sizeof g);
  g.struct_size = XLA_FFI_InvokeContext_Get_Args_STRUCT_SIZE;
  g.ctx = f->ctx;
  g.type_id = &id;
  XLA_FFI_Error *err = f->api->XLA_FFI_InvokeContext_Get(&g);
  if (err) return err;
  XLA_FFI_RunId_Get_Args r;
  memset(&r, 0, sizeof r);
  r.struct_size = XLA_FFI_RunId_Get_Args_STRUCT_SIZE;
  r.ctx = f->ctx;
  err = f->api->XLA_FFI_RunId_Get(&r);
  if (err) return err;
  int64_t *out = ((XLA_FFI_Buffer *)f->rets.rets[0])->data;
  out[0] = *(const int64_t *)g.data;
  out[1] = r.run_id;
  return NULL;
}

static const char *kReadContext =
    "HloModule ffi_context\n"
    "ENTRY main {\n"
    "  p = f32[2] parameter(0)\n"
    "  q = f32[3] parameter(1)\n"
    "  a = s64[2] custom-call(p), custom_call_target=\"kiln_pjrt_read_context\",\n"
    "      api_version=API_VERSION_TYPED_FFI\n"
    "  b = s64[2] custom-call(q), custom_call_target=\"kiln_pjrt_read_context\",\n"
    "      api_version=API_VERSION_TYPED_FFI\n"
    "  ROOT t = (s64[2], s64[2]) tuple(a, b)\n"
    "}\n";

/* Runs kReadContext with `opts`; the two custom calls' outputs into r[0..1] and r[2..3]. */
static PJRT_Error *run_read_context(PJRT_Client *c, PJRT_LoadedExecutable *l,
                                    const PJRT_ExecuteOptions *opts, int64_t r[4]) {
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  float x[3] = {1, 2, 3};
  int64_t d2[1] = {2}, d3[1] = {3};
  PJRT_Buffer *args[2] = {pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_F32, d2, 1),
                          pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_F32, d3, 1)};
  PJRT_Buffer *out[2] = {NULL, NULL};
  PJRT_Error *e = pjrt_exec_try_run(api, l, args, 2, out, opts);
  for (int i = 0; i < 2 && !e; i++) {
    pjrt_exec_read(api, out[i], r + 2 * i, 2 * sizeof(int64_t));
    pjrt_exec_buffer_destroy(api, out[i]);
  }
  for (int i = 0; i < 2; i++) pjrt_exec_buffer_destroy(api, args[i]);
  return e;
}

static void test_execute_context_user_data_and_run_ids(void **state) {
  (void)state;
  const PJRT_FFI_Extension *ext = ffi_extension();
  assert_non_null(ext);
  PJRT_FFI_Type_Register_Args ta;
  memset(&ta, 0, sizeof ta);
  ta.struct_size = PJRT_FFI_Type_Register_Args_STRUCT_SIZE;
  ta.type_name = "kiln_test_counter";
  ta.type_name_size = strlen(ta.type_name);
  PJRT_CHECK(api, ext->type_register(&ta));
  assert_true(ta.type_id > 0);
  g_counter_type_id = ta.type_id;
  PJRT_FFI_Register_Handler_Args ha;
  memset(&ha, 0, sizeof ha);
  ha.struct_size = PJRT_FFI_Register_Handler_Args_STRUCT_SIZE;
  ha.target_name = "kiln_pjrt_read_context";
  ha.target_name_size = strlen(ha.target_name);
  ha.handler = (void *)read_context;
  ha.platform_name = "Host";
  ha.platform_name_size = 4;
  PJRT_CHECK(api, ext->register_handler(&ha));

  PJRT_ExecuteContext_Create_Args ca;
  memset(&ca, 0, sizeof ca);
  ca.struct_size = PJRT_ExecuteContext_Create_Args_STRUCT_SIZE;
  PJRT_CHECK(api, api->PJRT_ExecuteContext_Create(&ca));
  assert_non_null(ca.context);
  int64_t value = 4242;
  PJRT_FFI_UserData_Add_Args ua;
  memset(&ua, 0, sizeof ua);
  ua.struct_size = PJRT_FFI_UserData_Add_Args_STRUCT_SIZE;
  ua.context = ca.context;
  ua.user_data.type_id = g_counter_type_id;
  ua.user_data.data = &value;
  PJRT_CHECK(api, ext->user_data_add(&ua));
  ua.context = NULL;
  PJRT_EXPECT_ERROR(api, ext->user_data_add(&ua), PJRT_Error_Code_INVALID_ARGUMENT, "context");

  PJRT_Client *c = pjrt_exec_client(api, "");
  PJRT_LoadedExecutable *l = pjrt_exec_compile(api, c, kReadContext);
  PJRT_ExecuteOptions opts;
  memset(&opts, 0, sizeof opts);
  opts.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  opts.context = ca.context;
  int64_t r1[4], r2[4];
  PJRT_CHECK(api, run_read_context(c, l, &opts, r1));
  PJRT_CHECK(api, run_read_context(c, l, &opts, r2));
  /* The user data reaches both calls; the run id is the execution's, not the call's. */
  assert_int_equal(r1[0], 4242);
  assert_int_equal(r1[2], 4242);
  assert_int_equal(r1[1], r1[3]);
  assert_int_equal(r2[1], r2[3]);
  assert_true(r1[1] != r2[1]);
  value = 7;
  opts.launch_id = 99;
  PJRT_CHECK(api, run_read_context(c, l, &opts, r1));
  assert_int_equal(r1[0], 7);
  assert_int_equal(r1[1], 99);
  assert_int_equal(r1[3], 99);
  /* Without the context the handler finds no user data: its error fails the execute. */
  opts.context = NULL;
  PJRT_EXPECT_ERROR(api, run_read_context(c, l, &opts, r1), PJRT_Error_Code_NOT_FOUND, "user data");
  pjrt_exec_destroy(api, l);
  pjrt_test_client_destroy(api, c);
  PJRT_ExecuteContext_Destroy_Args da;
  memset(&da, 0, sizeof da);
  da.struct_size = PJRT_ExecuteContext_Destroy_Args_STRUCT_SIZE;
  da.context = ca.context;
  PJRT_CHECK(api, api->PJRT_ExecuteContext_Destroy(&da));
}

/* ---- a StableHLO module's stablehlo.custom_call through the "mlir" program format ---- */

/* ret 0 = arg 0 * the f32 attribute `factor` + the s64 attribute `offset` (f32[n]). */
static XLA_FFI_Error *scale(XLA_FFI_CallFrame *f) {
  if (pjrt_ffi_metadata_query(f)) return NULL;
  float factor = 0;
  int64_t offset = 0;
  int found = 0;
  for (int64_t i = 0; i < f->attrs.size; i++) {
    const XLA_FFI_ByteSpan *n = f->attrs.names[i];
    const XLA_FFI_Scalar *v = f->attrs.attrs[i];
    if (f->attrs.types[i] != XLA_FFI_AttrType_SCALAR)
      return pjrt_ffi_error(f->api, "scalar attributes only");
    if (n->len == 6 && !memcmp(n->ptr, "factor", 6) && v->dtype == XLA_FFI_DataType_F32) {
      factor = *(const float *)v->value;
      found++;
    } else if (n->len == 6 && !memcmp(n->ptr, "offset", 6) && v->dtype == XLA_FFI_DataType_S64) {
      offset = *(const int64_t *)v->value;
      found++;
    }
  }
  if (found != 2 || f->args.size != 1 || f->rets.size != 1)
    return pjrt_ffi_error(f->api,
                          "scale: one f32 arg, one ret, attributes factor (f32), offset (s64)");
  const XLA_FFI_Buffer *a = f->args.args[0], *r = f->rets.rets[0];
  if (a->dtype != XLA_FFI_DataType_F32 || a->rank != 1)
    return pjrt_ffi_error(f->api, "scale: f32[n]");
  const float *x = a->data;
  float *y = r->data;
  for (int64_t i = 0; i < a->dims[0]; i++) y[i] = x[i] * factor + (float)offset;
  return NULL;
}

static const char *kStablehloScale =
    "module @jit_scale {\n"
    "  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
    "    %0 = stablehlo.custom_call @kiln_pjrt_scale(%arg0) {api_version = 4 : i32, "
    "backend_config = {factor = 2.5 : f32, offset = 3 : i64}} : (tensor<4xf32>) -> "
    "tensor<4xf32>\n"
    "    return %0 : tensor<4xf32>\n"
    "  }\n"
    "}\n";

/* The same call as JAX writes it (jax.ffi.ffi_call): the attributes in the discardable
 * `mhlo.backend_config` dictionary, `backend_config` the empty string, no api_version. */
static const char *kStablehloScaleJax =
    "module @jit_scale {\n"
    "  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
    "    %0 = stablehlo.custom_call @kiln_pjrt_scale(%arg0) {backend_config = \"\", "
    "mhlo.backend_config = {factor = 2.5 : f32, offset = 3 : i64}, operand_layouts = "
    "[dense<0> : tensor<1xindex>], result_layouts = [dense<0> : tensor<1xindex>]} : "
    "(tensor<4xf32>) -> tensor<4xf32>\n"
    "    return %0 : tensor<4xf32>\n"
    "  }\n"
    "}\n";

static void test_stablehlo_custom_call_through_the_plugin(void **state) {
  (void)state;
  const PJRT_FFI_Extension *ext = ffi_extension();
  assert_non_null(ext);
  PJRT_FFI_Register_Handler_Args ha;
  memset(&ha, 0, sizeof ha);
  ha.struct_size = PJRT_FFI_Register_Handler_Args_STRUCT_SIZE;
  ha.target_name = "kiln_pjrt_scale";
  ha.target_name_size = strlen(ha.target_name);
  ha.handler = (void *)scale;
  ha.platform_name = "Host";
  ha.platform_name_size = 4;
  PJRT_CHECK(api, ext->register_handler(&ha));
  PJRT_Client *c = pjrt_exec_client(api, "");
  const char *const programs[2] = {kStablehloScale, kStablehloScaleJax};
  for (int p = 0; p < 2; p++) {
    PJRT_LoadedExecutable *l = NULL;
    PJRT_CHECK(
        api, pjrt_exec_try_compile(api, c, "mlir", programs[p], strlen(programs[p]), NULL, 0, &l));
    float x[4] = {1, -2, 0.5f, 4};
    int64_t dims[1] = {4};
    PJRT_Buffer *args[1] = {
        pjrt_exec_buffer(api, c, pjrt_exec_device(api, c, 0), x, PJRT_Buffer_Type_F32, dims, 1)};
    PJRT_Buffer *out[1] = {NULL};
    pjrt_exec_run(api, l, args, 1, out);
    float r[4];
    pjrt_exec_read(api, out[0], r, sizeof r);
    for (int i = 0; i < 4; i++) assert_true(r[i] == x[i] * 2.5f + 3.0f);
    pjrt_exec_buffer_destroy(api, out[0]);
    pjrt_exec_buffer_destroy(api, args[0]);
    pjrt_exec_destroy(api, l);
  }
  pjrt_test_client_destroy(api, c);
}

int main(void) {
  api = pjrt_test_load();
  if (!api) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_typed_c_handler_from_client_option),
      cmocka_unit_test(test_self_registering_cxx_library),
      cmocka_unit_test(test_bad_spec_and_missing_target),
      cmocka_unit_test(test_execute_context_user_data_and_run_ids),
      cmocka_unit_test(test_stablehlo_custom_call_through_the_plugin),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
