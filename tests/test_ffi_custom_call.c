/* Custom calls from HLO text modules compiled for the host and run through the executable
 * path (tools/common/device_run.h): handlers written in C against kiln's ffi_c_api.h and in
 * C++ against OpenXLA's ffi.h (tests/ffi/), loaded with dlopen through registry specs, typed
 * and legacy (api_version 1-3), and the errors a user meets: a failing handler, a missing
 * target, a library that cannot be opened, a wrong-version library, a malformed
 * backend_config. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/status.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "compiler/thunks/custom_call_emitter.h"
#include "ffi/ffi_api.h"
#include "ffi/ffi_registry.h"
#include "kiln/pjrt_ffi_extension.h"
#include "plugin/pjrt_ffi_ext.h"
#include "runtime/device.h"
#include "runtime/ffi_call.h"
#include "tools/common/device_run.h"

#ifndef KILN_FFI_TEST_CALL_LIB
#define KILN_FFI_TEST_CALL_LIB "libkiln_ffi_test_handlers_call.so"
#endif
#ifndef KILN_FFI_TEST_C_LIB
#define KILN_FFI_TEST_C_LIB "libkiln_ffi_test_handlers_c.so"
#endif
#ifndef KILN_FFI_TEST_CXX_LIB
#define KILN_FFI_TEST_CXX_LIB ""
#endif

static kiln_device_t *g_dev;

static int setup(void **state) {
  (void)state;
  kiln_status s = kiln_device_create("host", &g_dev);
  if (s) {
    fprintf(stderr, "no host device: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    return -1;
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  kiln_device_destroy(g_dev);
  kiln_ffi_registry_default_shutdown();
  return 0;
}

static bool have_cxx(void) {
  return KILN_FFI_TEST_CXX_LIB[0] != '\0';
}

static void load(const char *spec) {
  kiln_status s = kiln_ffi_registry_load_spec(kiln_ffi_registry_default(), spec);
  if (s) fail_msg("loading '%s': %s", spec, kiln_status_message(s));
}

/* Parses `hlo`, fills parameter i's elements with args[i][k] (as f64; NULL: 0), compiles for
 * the host and runs it. Returns the status; *out gets the result literal (in `arena`). */
static kiln_status run(const char *hlo, const double *const *args, kiln_arena_t *arena,
                       kiln_literal_t **out) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(hlo, strlen(hlo), NULL, &m);
  if (s) fail_msg("parse: %s", kiln_status_message(s));
  int n = m->entry->num_parameters;
  kiln_literal_t *lits[8];
  for (int i = 0; i < n; i++) {
    lits[i] = kiln_literal_make(arena, m->entry->parameters[i]->shape);
    for (int64_t k = 0; k < lits[i]->num_elements; k++)
      kiln_literal_set_f64(lits[i], k, args && args[i] ? args[i][k] : 0.0);
  }
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = g_dev;
  o.repeat = 2; /* the second run reuses the frame built at compile time */
  s = kiln_device_run_module(m, lits, n, &o, arena, out, NULL);
  if (!s) {
    /* The same through a serialized executable (the handler looked up again by target, the
     * attributes parsed again): the same bits. */
    o.serialize_round_trip = true;
    kiln_literal_t *again = NULL;
    kiln_status s2 = kiln_device_run_module(m, lits, n, &o, arena, &again, NULL);
    if (s2) fail_msg("after a serialize round trip: %s", kiln_status_message(s2));
    if (!kiln_literal_equal(*out, again)) fail_msg("a serialize round trip changed the result");
  }
  kiln_hlo_module_destroy(m);
  return s;
}

static void expect_error(kiln_status s, const char *needle1, const char *needle2) {
  if (!s) fail_msg("expected an error containing '%s'", needle1);
  const char *msg = kiln_status_message(s);
  if (!strstr(msg, needle1) || (needle2 && !strstr(msg, needle2)))
    fail_msg("expected an error containing '%s' and '%s', got: %s", needle1, needle2 ? needle2 : "",
             msg);
  kiln_status_free(s);
}

static void expect_ok(kiln_status s) {
  if (s) fail_msg("%s", kiln_status_message(s));
}

/* ---- C handlers (kiln's header) ------------------------------------------------------------ */

static void test_typed_c_handler_sees_dtypes_and_dims(void **state) {
  (void)state;
  load("kiln_s32_to_f32=" KILN_FFI_TEST_CALL_LIB ":kiln_call_s32_to_f32");
  const char *hlo =
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = s32[2,3] parameter(0)\n"
      "  n = s32[2,3] negate(p)\n"
      "  ROOT c = f32[2,3] custom-call(n), custom_call_target=\"kiln_s32_to_f32\", "
      "api_version=API_VERSION_TYPED_FFI\n"
      "}\n";
  const double a[6] = {1, 2, 3, -4, 5, 60};
  const double *args[] = {a};
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *r;
  expect_ok(run(hlo, args, &arena, &r));
  for (int i = 0; i < 6; i++) assert_float_equal(kiln_literal_get_f64(r, i), -a[i] + 0.5, 0);
  /* A buffer of the wrong type: the handler's check fails the execution with its message and
   * the custom call's name. */
  const char *bad =
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[2,3] parameter(0)\n"
      "  ROOT wrong_type = f32[2,3] custom-call(p), custom_call_target=\"kiln_s32_to_f32\", "
      "api_version=API_VERSION_TYPED_FFI\n"
      "}\n";
  expect_error(run(bad, NULL, &arena, &r), "arg 0 must be s32", "wrong_type");
  kiln_arena_destroy(&arena);
}

/* Every element type reaches a handler as XLA's FFI data type, sub-byte integers one per byte
 * with the value in the low bits (s1 -1: 0x01, s2 -2: 0x02). */
static void test_handler_sees_every_element_type_code(void **state) {
  (void)state;
  load("kiln_dtype_of=" KILN_FFI_TEST_CALL_LIB ":kiln_call_dtype_of");
  static const struct {
    const char *type;
    XLA_FFI_DataType code;
    double first;
    int32_t byte;
  } kCases[] = {
      {"pred", XLA_FFI_DataType_PRED, 1, 1},
      {"s1", XLA_FFI_DataType_S1, -1, 0x01},
      {"u1", XLA_FFI_DataType_U1, 1, 0x01},
      {"s2", XLA_FFI_DataType_S2, -2, 0x02},
      {"u2", XLA_FFI_DataType_U2, 3, 0x03},
      {"s4", XLA_FFI_DataType_S4, -1, 0x0f},
      {"u4", XLA_FFI_DataType_U4, 9, 0x09},
      {"s8", XLA_FFI_DataType_S8, -1, 0xff},
      {"u16", XLA_FFI_DataType_U16, 7, 7},
      {"s64", XLA_FFI_DataType_S64, 5, 5},
      {"bf16", XLA_FFI_DataType_BF16, 1, 0x80},
      {"f16", XLA_FFI_DataType_F16, 0, 0},
      {"f64", XLA_FFI_DataType_F64, 0, 0},
      {"c64", XLA_FFI_DataType_C64, 0, 0},
      {"f8e4m3fn", XLA_FFI_DataType_F8E4M3FN, 1, 0x38},
      {"f4e2m1fn", XLA_FFI_DataType_F4E2M1FN, 1, 0x2},
      {"f8e8m0fnu", XLA_FFI_DataType_F8E8M0FNU, 1, 0x7f},
  };
  /* Every array type has its FFI data type, of the same name (f4e2m1fn once had none). */
  for (int t = 0; t < KILN_ELEM_TYPE_COUNT; t++) {
    if (!kiln_elem_type_is_array((kiln_elem_type_t)t)) continue;
    const char *name = kiln_elem_type_name((kiln_elem_type_t)t);
    XLA_FFI_DataType code = kiln_custom_call_ffi_dtype((kiln_elem_type_t)t);
    if (code == XLA_FFI_DataType_INVALID || strcmp(kiln_ffi_dtype_name(code), name))
      fail_msg("%s has FFI data type %d (%s)", name, (int)code, kiln_ffi_dtype_name(code));
  }
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; i++) {
    char hlo[512];
    snprintf(hlo, sizeof hlo,
             "HloModule m\n"
             "ENTRY e {\n"
             "  p = %s[3] parameter(0)\n"
             "  ROOT c = s32[2] custom-call(p), custom_call_target=\"kiln_dtype_of\", "
             "api_version=API_VERSION_TYPED_FFI\n"
             "}\n",
             kCases[i].type);
    const double a[3] = {kCases[i].first, 0, 0};
    const double *args[] = {a};
    kiln_literal_t *r;
    expect_ok(run(hlo, args, &arena, &r));
    if (kiln_literal_get_s64(r, 0) != kCases[i].code ||
        kiln_literal_get_s64(r, 1) != kCases[i].byte)
      fail_msg("%s: the handler saw data type %lld, first byte 0x%llx (want %d, 0x%x)",
               kCases[i].type, (long long)kiln_literal_get_s64(r, 0),
               (long long)kiln_literal_get_s64(r, 1), (int)kCases[i].code, kCases[i].byte);
  }
  kiln_arena_destroy(&arena);
}

static void test_output_operand_alias_shares_the_buffer(void **state) {
  (void)state;
  load("kiln_double_in_place=" KILN_FFI_TEST_CALL_LIB ":kiln_call_double_in_place");
  const char *hlo =
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[4] parameter(0)\n"
      "  x = f32[4] add(p, p)\n"
      "  ROOT c = f32[4] custom-call(x), custom_call_target=\"kiln_double_in_place\", "
      "api_version=API_VERSION_TYPED_FFI, output_to_operand_aliasing={{}: (0, {})}\n"
      "}\n";
  const double a[4] = {1, 2, 3, 4};
  const double *args[] = {a};
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *r;
  expect_ok(run(hlo, args, &arena, &r));
  for (int i = 0; i < 4; i++) assert_float_equal(kiln_literal_get_f64(r, i), 4 * a[i], 0);
  kiln_arena_destroy(&arena);
}

static void test_legacy_handlers_api_versions_1_2_3(void **state) {
  (void)state;
  load("kiln_legacy_add8=" KILN_FFI_TEST_CALL_LIB
       ":legacy=kiln_legacy_add8,"
       "kiln_legacy_pair8=" KILN_FFI_TEST_CALL_LIB
       ":legacy=kiln_legacy_pair8,"
       "kiln_legacy_scale8=" KILN_FFI_TEST_CALL_LIB ":legacy=kiln_legacy_scale8");
  const char *hlo =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[8] parameter(0)\n"
      "  b = f32[8] parameter(1)\n"
      "  s = f32[8] custom-call(a, b), custom_call_target=\"kiln_legacy_add8\"\n"
      "  t = (f32[8], f32[8]) custom-call(s), custom_call_target=\"kiln_legacy_pair8\", "
      "api_version=API_VERSION_STATUS_RETURNING\n"
      "  t0 = f32[8] get-tuple-element(t), index=0\n"
      "  t1 = f32[8] get-tuple-element(t), index=1\n"
      "  u = f32[8] custom-call(t1), custom_call_target=\"kiln_legacy_scale8\", "
      "api_version=API_VERSION_STATUS_RETURNING_UNIFIED, backend_config=\"0.25\"\n"
      "  ROOT r = (f32[8], f32[8]) tuple(t0, u)\n"
      "}\n";
  double a[8], b[8];
  for (int i = 0; i < 8; i++) a[i] = i, b[i] = 10 * i;
  const double *args[] = {a, b};
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *r;
  expect_ok(run(hlo, args, &arena, &r));
  assert_int_equal(r->num_tuple_elements, 2);
  for (int i = 0; i < 8; i++) {
    double s = a[i] + b[i];
    assert_float_equal(kiln_literal_get_f64(r->tuple_elements[0], i), 2 * s, 0);
    assert_float_equal(kiln_literal_get_f64(r->tuple_elements[1], i), (s + 1) * 0.25, 0);
  }
  /* api_version 2's status: the failure comes back with the handler's message. */
  a[0] = -1000;
  b[0] = 0;
  expect_error(run(hlo, args, &arena, &r), "input below -100", "t");
  /* api_version 3 with no opaque string. */
  const char *no_opaque =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[8] parameter(0)\n"
      "  ROOT unscaled = f32[8] custom-call(a), custom_call_target=\"kiln_legacy_scale8\", "
      "api_version=API_VERSION_STATUS_RETURNING_UNIFIED\n"
      "}\n";
  expect_error(run(no_opaque, NULL, &arena, &r), "no scale in the opaque string", "unscaled");
  /* A typed api_version against a legacy handler is a compile-time error. */
  const char *typed =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[8] parameter(0)\n"
      "  ROOT x = f32[8] custom-call(a, a), custom_call_target=\"kiln_legacy_add8\", "
      "api_version=API_VERSION_TYPED_FFI\n"
      "}\n";
  expect_error(run(typed, NULL, &arena, &r), "only a legacy one is registered", "api_version 4");
  kiln_arena_destroy(&arena);
}

/* ---- errors ------------------------------------------------------------------------------- */

static void test_missing_target_is_a_compile_error_naming_target_and_platform(void **state) {
  (void)state;
  const char *hlo =
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[4] parameter(0)\n"
      "  ROOT c = f32[4] custom-call(p), custom_call_target=\"kiln_nobody_registered_this\", "
      "api_version=API_VERSION_TYPED_FFI\n"
      "}\n";
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *r;
  kiln_status s = run(hlo, NULL, &arena, &r);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_NOT_FOUND);
  expect_error(s, "no handler for target kiln_nobody_registered_this on platform Host",
               "KILN_FFI_HANDLERS=");
  kiln_arena_destroy(&arena);
}

static void test_library_that_cannot_be_opened_and_wrong_version(void **state) {
  (void)state;
  kiln_ffi_registry_t *r = kiln_ffi_registry_default();
  kiln_status s = kiln_ffi_registry_load_spec(r, "x=/nonexistent/libnothing.so:f");
  assert_int_equal(kiln_status_code(s), KILN_UNAVAILABLE);
  expect_error(s, "cannot open", "/nonexistent/libnothing.so");
  s = kiln_ffi_registry_load_spec(r, "kiln_old=" KILN_FFI_TEST_C_LIB ":kiln_test_c_wrong_version");
  assert_int_equal(kiln_status_code(s), KILN_FAILED_PRECONDITION);
  expect_error(s, "was built for XLA FFI API", "kiln_old");
  s = kiln_ffi_registry_load_spec(r, "x=" KILN_FFI_TEST_CALL_LIB ":legacy=no_such_symbol");
  assert_int_equal(kiln_status_code(s), KILN_NOT_FOUND);
  expect_error(s, "no_such_symbol", "not found");
}

static void test_malformed_backend_config_names_call_and_position(void **state) {
  (void)state;
  load("kiln_s32_to_f32=" KILN_FFI_TEST_CALL_LIB ":kiln_call_s32_to_f32");
  const char *hlo =
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = s32[2,3] parameter(0)\n"
      "  ROOT badcfg = f32[2,3] custom-call(p), custom_call_target=\"kiln_s32_to_f32\", "
      "api_version=API_VERSION_TYPED_FFI, backend_config={x = 1 : i32, y = }\n"
      "}\n";
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *r;
  expect_error(run(hlo, NULL, &arena, &r), "badcfg", "offset");
  kiln_arena_destroy(&arena);
}

/* ---- C++ handlers (OpenXLA's ffi.h) ------------------------------------------------------- */

static void test_cxx_every_attribute_kind(void **state) {
  (void)state;
  if (!have_cxx()) skip();
  load("kiln_cxx_attrs=" KILN_FFI_TEST_CXX_LIB ":KilnCxxAttrs");
  const char *hlo =
      "HloModule m\n"
      "ENTRY e {\n"
      "  ROOT c = f64[16] custom-call(), custom_call_target=\"kiln_cxx_attrs\", "
      "api_version=API_VERSION_TYPED_FFI, backend_config={b = true, i8 = -8 : i8, "
      "i16 = 300 : i16, i32 = 42 : i32, i64 = -5000000000 : i64, u8 = 200 : ui8, "
      "u16 = 60000 : ui16, u32 = 4000000000 : ui32, u64 = 7 : ui64, f32 = 1.5 : f32, "
      "f64 = 0.25 : f64, arr = array<i64: 1, 2, 3>, farr = array<f32: 0.5, 0.25>, "
      "str = \"hello\", dict = {lo = 9 : i64, name = \"inner\"}}\n"
      "}\n";
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *r;
  expect_ok(run(hlo, NULL, &arena, &r));
  const double want[16] = {1, -8,  300,  42,   -5000000000.0, 200, 60000, 4000000000.0,
                           7, 1.5, 0.25, 3006, 0.75,          105, 9,     102};
  for (int i = 0; i < 16; i++) assert_float_equal(kiln_literal_get_f64(r, i), want[i], 0);
  kiln_arena_destroy(&arena);
}

static void test_cxx_variadic_args_with_a_flattened_tuple(void **state) {
  (void)state;
  if (!have_cxx()) skip();
  load("kiln_cxx_sum=" KILN_FFI_TEST_CXX_LIB ":KilnCxxSum");
  /* Three arguments: a plain array and a tuple of two, flattened into args 0..2. */
  const char *hlo =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[4] parameter(0)\n"
      "  b = f32[4] parameter(1)\n"
      "  t = (f32[4], f32[4]) tuple(b, a)\n"
      "  ROOT s = f32[4] custom-call(a, t), custom_call_target=\"kiln_cxx_sum\", "
      "api_version=API_VERSION_TYPED_FFI\n"
      "}\n";
  const double a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
  const double *args[] = {a, b};
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *r;
  expect_ok(run(hlo, args, &arena, &r));
  for (int i = 0; i < 4; i++) assert_float_equal(kiln_literal_get_f64(r, i), 2 * a[i] + b[i], 0);
  kiln_arena_destroy(&arena);
}

static void test_cxx_state_from_instantiate_reaches_execute(void **state) {
  (void)state;
  if (!have_cxx()) skip();
  load("kiln_cxx_bias=" KILN_FFI_TEST_CXX_LIB
       ":instantiate=KilnCxxBiasInstantiate/execute=KilnCxxBiasExecute");
  const char *hlo =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[4] parameter(0)\n"
      "  ROOT s = f32[4] custom-call(a), custom_call_target=\"kiln_cxx_bias\", "
      "api_version=API_VERSION_TYPED_FFI, backend_config={bias = 2.5 : f32}\n"
      "}\n";
  const double a[4] = {1, 2, 3, 4};
  const double *args[] = {a};
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *r;
  expect_ok(run(hlo, args, &arena, &r));
  for (int i = 0; i < 4; i++) assert_float_equal(kiln_literal_get_f64(r, i), a[i] + 2.5, 0);
  kiln_arena_destroy(&arena);
}

static void test_cxx_failing_and_async_handlers(void **state) {
  (void)state;
  if (!have_cxx()) skip();
  load("kiln_cxx_fail=" KILN_FFI_TEST_CXX_LIB ":KilnCxxFail,kiln_cxx_async=" KILN_FFI_TEST_CXX_LIB
       ":KilnCxxAsync");
  const char *failing =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[4] parameter(0)\n"
      "  f = token[] custom-call(), custom_call_target=\"kiln_cxx_fail\", "
      "api_version=API_VERSION_TYPED_FFI, backend_config={why = \"on purpose\"}, "
      "custom_call_has_side_effect=true\n"
      "  ROOT n = f32[4] negate(a)\n"
      "}\n";
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *r;
  expect_error(run(failing, NULL, &arena, &r), "C++ handler failed: on purpose", "f");
  /* The async handler completes its future from another thread after 20 ms: the result is
   * there when the run returns. */
  const char *async =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[64] parameter(0)\n"
      "  d = f32[64] custom-call(a), custom_call_target=\"kiln_cxx_async\", "
      "api_version=API_VERSION_TYPED_FFI\n"
      "  ROOT n = f32[64] add(d, a)\n"
      "}\n";
  double a[64];
  for (int i = 0; i < 64; i++) a[i] = i * 0.5;
  const double *args[] = {a};
  expect_ok(run(async, args, &arena, &r));
  for (int i = 0; i < 64; i++) assert_float_equal(kiln_literal_get_f64(r, i), 3 * a[i], 0);
  kiln_arena_destroy(&arena);
}

/* ---- PJRT's FFI extension ----------------------------------------------------------------- */

XLA_FFI_Error *kiln_test_ext_scale(XLA_FFI_CallFrame *f);
/* In-process handler: out = 3 * in (f32), registered through the PJRT extension. */
XLA_FFI_Error *kiln_test_ext_scale(XLA_FFI_CallFrame *f) {
  if (f->extension_start && f->extension_start->type == XLA_FFI_Extension_Metadata) {
    XLA_FFI_Metadata *md = ((XLA_FFI_Metadata_Extension *)f->extension_start)->metadata;
    md->api_version.major_version = XLA_FFI_API_MAJOR;
    md->api_version.minor_version = XLA_FFI_API_MINOR;
    return NULL;
  }
  const XLA_FFI_Buffer *a = f->args.args[0], *r = f->rets.rets[0];
  for (int64_t i = 0; i < a->dims[0]; i++) ((float *)r->data)[i] = 3 * ((const float *)a->data)[i];
  return NULL;
}

static void test_pjrt_ffi_extension_registers_a_handler_the_compiler_finds(void **state) {
  (void)state;
  const PJRT_FFI_Extension *ext = (const PJRT_FFI_Extension *)kiln_pjrt_ffi_extension();
  assert_int_equal(ext->base.type, PJRT_Extension_Type_FFI);
  PJRT_FFI_Register_Handler_Args ra;
  memset(&ra, 0, sizeof ra);
  ra.struct_size = PJRT_FFI_Register_Handler_Args_STRUCT_SIZE;
  ra.target_name = "kiln_ext_scale";
  ra.target_name_size = strlen(ra.target_name);
  ra.handler = (void *)kiln_test_ext_scale;
  ra.platform_name = "cpu";
  ra.platform_name_size = 3;
  assert_null(ext->register_handler(&ra));
  PJRT_FFI_Type_Register_Args ta;
  memset(&ta, 0, sizeof ta);
  ta.struct_size = PJRT_FFI_Type_Register_Args_STRUCT_SIZE;
  ta.type_name = "kiln_ext_type";
  ta.type_name_size = strlen(ta.type_name);
  assert_null(ext->type_register(&ta));
  assert_true(ta.type_id != 0);
  const char *hlo =
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[4] parameter(0)\n"
      "  ROOT s = f32[4] custom-call(a), custom_call_target=\"kiln_ext_scale\", "
      "api_version=API_VERSION_TYPED_FFI\n"
      "}\n";
  const double a[4] = {1, -2, 3, 0.5};
  const double *args[] = {a};
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *r;
  expect_ok(run(hlo, args, &arena, &r));
  for (int i = 0; i < 4; i++) assert_float_equal(kiln_literal_get_f64(r, i), 3 * a[i], 0);
  kiln_arena_destroy(&arena);
}

/* ---- concurrent executions ----------------------------------------------------------------- */

typedef struct worker {
  kiln_ffi_call_t *call;
  int bad;
} worker_t;

static void *worker_main(void *p) {
  worker_t *w = p;
  float in[4], out[4];
  for (int k = 0; k < 2000; k++) {
    for (int i = 0; i < 4; i++) in[i] = (float)(k + i);
    kiln_devptr_t a = (kiln_devptr_t)(uintptr_t)in, r = (kiln_devptr_t)(uintptr_t)out;
    kiln_status s = kiln_ffi_call_execute(w->call, NULL, NULL, &a, 1, &r, 1);
    if (s) {
      kiln_status_free(s);
      w->bad++;
      continue;
    }
    for (int i = 0; i < 4; i++) w->bad += out[i] != 3 * in[i];
  }
  return NULL;
}

/* One call site executed from 4 threads at once: each execution gets a frame of its own (the
 * first by its atomic flag, the others from the free list), so addresses never mix. */
static void test_concurrent_executions_of_one_call_use_separate_frames(void **state) {
  (void)state;
  kiln_ffi_handler_t h;
  memset(&h, 0, sizeof h);
  h.target = "kiln_ext_scale";
  h.platform = KILN_FFI_PLATFORM_HOST;
  h.bundle.execute = kiln_test_ext_scale;
  int64_t dims[1] = {4};
  kiln_ffi_buffer_desc_t d = {XLA_FFI_DataType_F32, 1, dims, NULL};
  kiln_ffi_call_desc_t cd;
  memset(&cd, 0, sizeof cd);
  cd.name = "scale";
  cd.handler = &h;
  cd.api_version = 4;
  cd.args = &d;
  cd.nargs = 1;
  cd.rets = &d;
  cd.nrets = 1;
  kiln_ffi_call_t *call;
  expect_ok(kiln_ffi_call_create(&cd, &call));
  pthread_t th[4];
  worker_t w[4];
  for (int i = 0; i < 4; i++) {
    w[i].call = call;
    w[i].bad = 0;
    assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
  }
  int bad = 0;
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    bad += w[i].bad;
  }
  kiln_ffi_call_destroy(call);
  assert_int_equal(bad, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_typed_c_handler_sees_dtypes_and_dims),
      cmocka_unit_test(test_handler_sees_every_element_type_code),
      cmocka_unit_test(test_output_operand_alias_shares_the_buffer),
      cmocka_unit_test(test_legacy_handlers_api_versions_1_2_3),
      cmocka_unit_test(test_missing_target_is_a_compile_error_naming_target_and_platform),
      cmocka_unit_test(test_library_that_cannot_be_opened_and_wrong_version),
      cmocka_unit_test(test_malformed_backend_config_names_call_and_position),
      cmocka_unit_test(test_cxx_every_attribute_kind),
      cmocka_unit_test(test_cxx_variadic_args_with_a_flattened_tuple),
      cmocka_unit_test(test_cxx_state_from_instantiate_reaches_execute),
      cmocka_unit_test(test_cxx_failing_and_async_handlers),
      cmocka_unit_test(test_pjrt_ffi_extension_registers_a_handler_the_compiler_finds),
      cmocka_unit_test(test_concurrent_executions_of_one_call_use_separate_frames),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
