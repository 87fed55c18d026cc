/* Topologies without a client and compiling for them: PJRT_TopologyDescription_Create (named
 * options: platform, number of host devices), _Deserialize of what _Serialize writes (a
 * client's topology and a created one round-trip with the same fingerprint; malformed bytes
 * are INVALID_ARGUMENT), _Destroy, and PJRT_Compile against a topology: its executable
 * serializes and runs after DeserializeAndLoad or PJRT_Client_Load on a client. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "pjrt_exec_util.h"
#include "skip_util.h"

static const PJRT_Api *api;

static int setup(void **state) {
  (void)state;
  api = pjrt_test_load();
  return api ? 0 : -1;
}

static PJRT_Error *try_create(const char *name, const PJRT_NamedValue *o, size_t n,
                              PJRT_TopologyDescription **out) {
  PJRT_TopologyDescription_Create_Args a = {
      .struct_size = PJRT_TopologyDescription_Create_Args_STRUCT_SIZE,
      .topology_name = name,
      .topology_name_size = name ? strlen(name) : 0,
      .create_options = o,
      .num_options = n};
  PJRT_Error *e = api->PJRT_TopologyDescription_Create(&a);
  *out = a.topology;
  return e;
}

static void destroy(PJRT_TopologyDescription *t) {
  PJRT_TopologyDescription_Destroy_Args d = {
      .struct_size = PJRT_TopologyDescription_Destroy_Args_STRUCT_SIZE, .topology = t};
  PJRT_CHECK(api, api->PJRT_TopologyDescription_Destroy(&d));
}

/* What a topology says, as text: platform, version, then each device's id and kind. */
static void describe(PJRT_TopologyDescription *t, char *out, size_t n) {
  PJRT_TopologyDescription_PlatformName_Args pn = {
      .struct_size = PJRT_TopologyDescription_PlatformName_Args_STRUCT_SIZE, .topology = t};
  PJRT_CHECK(api, api->PJRT_TopologyDescription_PlatformName(&pn));
  PJRT_TopologyDescription_PlatformVersion_Args pv = {
      .struct_size = PJRT_TopologyDescription_PlatformVersion_Args_STRUCT_SIZE, .topology = t};
  PJRT_CHECK(api, api->PJRT_TopologyDescription_PlatformVersion(&pv));
  PJRT_TopologyDescription_GetDeviceDescriptions_Args gd = {
      .struct_size = PJRT_TopologyDescription_GetDeviceDescriptions_Args_STRUCT_SIZE,
      .topology = t};
  PJRT_CHECK(api, api->PJRT_TopologyDescription_GetDeviceDescriptions(&gd));
  size_t at =
      (size_t)snprintf(out, n, "%.*s|%.*s|%zu", (int)pn.platform_name_size, pn.platform_name,
                       (int)pv.platform_version_size, pv.platform_version, gd.num_descriptions);
  for (size_t i = 0; i < gd.num_descriptions && at < n; i++) {
    PJRT_DeviceDescription_Id_Args id = {.struct_size = PJRT_DeviceDescription_Id_Args_STRUCT_SIZE,
                                         .device_description = gd.descriptions[i]};
    PJRT_CHECK(api, api->PJRT_DeviceDescription_Id(&id));
    PJRT_DeviceDescription_Kind_Args k = {
        .struct_size = PJRT_DeviceDescription_Kind_Args_STRUCT_SIZE,
        .device_description = gd.descriptions[i]};
    PJRT_CHECK(api, api->PJRT_DeviceDescription_Kind(&k));
    at += (size_t)snprintf(out + at, n - at, "|%d:%.*s", id.id, (int)k.device_kind_size,
                           k.device_kind);
  }
}

static uint64_t fingerprint(PJRT_TopologyDescription *t) {
  PJRT_TopologyDescription_Fingerprint_Args f = {
      .struct_size = PJRT_TopologyDescription_Fingerprint_Args_STRUCT_SIZE, .topology = t};
  PJRT_CHECK(api, api->PJRT_TopologyDescription_Fingerprint(&f));
  return f.fingerprint;
}

static PJRT_Error *try_deserialize(const char *bytes, size_t n, PJRT_TopologyDescription **out) {
  PJRT_TopologyDescription_Deserialize_Args d = {
      .struct_size = PJRT_TopologyDescription_Deserialize_Args_STRUCT_SIZE,
      .serialized_topology = bytes,
      .serialized_topology_size = n};
  PJRT_Error *e = api->PJRT_TopologyDescription_Deserialize(&d);
  *out = d.topology;
  return e;
}

/* Serialize `t`, deserialize it: the same description and fingerprint. */
static void round_trip(PJRT_TopologyDescription *t) {
  PJRT_TopologyDescription_Serialize_Args s = {
      .struct_size = PJRT_TopologyDescription_Serialize_Args_STRUCT_SIZE, .topology = t};
  PJRT_CHECK(api, api->PJRT_TopologyDescription_Serialize(&s));
  PJRT_TopologyDescription *back = NULL;
  PJRT_CHECK(api, try_deserialize(s.serialized_bytes, s.serialized_bytes_size, &back));
  char want[1024], got[1024];
  describe(t, want, sizeof(want));
  describe(back, got, sizeof(got));
  assert_string_equal(want, got);
  assert_true(fingerprint(t) == fingerprint(back));
  destroy(back);
  /* malformed: truncated, a flipped header, a device too many */
  size_t n = s.serialized_bytes_size;
  char *bad = malloc(n + 64);
  memcpy(bad, s.serialized_bytes, n);
  PJRT_EXPECT_ERROR(api, try_deserialize(bad, n - 3, &back), PJRT_Error_Code_INVALID_ARGUMENT,
                    "device");
  assert_null(back);
  memcpy(bad + n, "device 9 process 0 kind cpu\n", 28);
  PJRT_EXPECT_ERROR(api, try_deserialize(bad, n + 28, &back), PJRT_Error_Code_INVALID_ARGUMENT,
                    "more than");
  bad[0] = 'K';
  PJRT_EXPECT_ERROR(api, try_deserialize(bad, n, &back), PJRT_Error_Code_INVALID_ARGUMENT,
                    "not a kiln topology");
  free(bad);
  s.serialized_topology_deleter(s.serialized_topology);
}

static void test_create_describes_host_devices(void **state) {
  (void)state;
  PJRT_NamedValue o[2] = {pjrt_test_opt_string("platform", "cpu"),
                          pjrt_test_opt_int("num_devices", 3)};
  PJRT_TopologyDescription *t = NULL;
  PJRT_CHECK(api, try_create("cpu", o, 2, &t));
  char d[1024];
  describe(t, d, sizeof(d));
  assert_non_null(strstr(d, "cpu|kiln "));
  assert_non_null(strstr(d, "|3|0:cpu|1:cpu|2:cpu"));
  /* the descriptions have the host's attributes, as a client's devices do */
  PJRT_TopologyDescription_GetDeviceDescriptions_Args gd = {
      .struct_size = PJRT_TopologyDescription_GetDeviceDescriptions_Args_STRUCT_SIZE,
      .topology = t};
  PJRT_CHECK(api, api->PJRT_TopologyDescription_GetDeviceDescriptions(&gd));
  PJRT_DeviceDescription_Attributes_Args at = {
      .struct_size = PJRT_DeviceDescription_Attributes_Args_STRUCT_SIZE,
      .device_description = gd.descriptions[2]};
  PJRT_CHECK(api, api->PJRT_DeviceDescription_Attributes(&at));
  assert_int_equal(at.num_attributes, 1);
  assert_int_equal(at.attributes[0].name_size, 5);
  assert_memory_equal(at.attributes[0].name, "cores", 5);
  round_trip(t);
  destroy(t);
  /* defaults: one cpu device */
  PJRT_CHECK(api, try_create(NULL, NULL, 0, &t));
  describe(t, d, sizeof(d));
  assert_non_null(strstr(d, "|1|0:cpu"));
  destroy(t);
}

static void test_create_errors(void **state) {
  (void)state;
  PJRT_TopologyDescription *t = NULL;
  PJRT_NamedValue cuda = pjrt_test_opt_string("platform", "cuda");
  PJRT_EXPECT_ERROR(api, try_create(NULL, &cuda, 1, &t), PJRT_Error_Code_UNIMPLEMENTED, "driver");
  PJRT_NamedValue tpu = pjrt_test_opt_string("platform", "tpu");
  PJRT_EXPECT_ERROR(api, try_create(NULL, &tpu, 1, &t), PJRT_Error_Code_INVALID_ARGUMENT, "tpu");
  PJRT_NamedValue zero = pjrt_test_opt_int("num_devices", 0);
  PJRT_EXPECT_ERROR(api, try_create(NULL, &zero, 1, &t), PJRT_Error_Code_INVALID_ARGUMENT,
                    "num_devices 0");
  PJRT_NamedValue text = pjrt_test_opt_string("cpu_device_count", "2");
  PJRT_EXPECT_ERROR(api, try_create(NULL, &text, 1, &t), PJRT_Error_Code_INVALID_ARGUMENT, "int64");
  assert_null(t);
  PJRT_TopologyDescription_Create_Args a = {
      .struct_size = offsetof(PJRT_TopologyDescription_Create_Args, topology)};
  PJRT_EXPECT_ERROR(api, api->PJRT_TopologyDescription_Create(&a), PJRT_Error_Code_INVALID_ARGUMENT,
                    "struct_size");
}

static void test_client_topology_round_trips(void **state) {
  (void)state;
  PJRT_NamedValue o[3] = {pjrt_test_opt_string("platform", "cpu"),
                          pjrt_test_opt_int("num_devices", 2),
                          pjrt_test_opt_string("cache_dir", "")};
  PJRT_Client *c = pjrt_test_client(api, o, 3);
  PJRT_Client_TopologyDescription_Args ta = {
      .struct_size = PJRT_Client_TopologyDescription_Args_STRUCT_SIZE, .client = c};
  PJRT_CHECK(api, api->PJRT_Client_TopologyDescription(&ta));
  round_trip(ta.topology);
  destroy(ta.topology); /* the client's: nothing happens */
  char d[1024];
  describe(ta.topology, d, sizeof(d));
  assert_non_null(strstr(d, "|2|0:cpu|1:cpu"));
  pjrt_test_client_destroy(api, c);
}

static const char *kTwice =
    "HloModule twice\nENTRY main {\n  x = f32[4] parameter(0)\n  ROOT y = f32[4] add(x, x)\n}\n";

static PJRT_Executable *compile_for(PJRT_TopologyDescription *t, const char *text,
                                    PJRT_Error **err) {
  PJRT_Program p = {.struct_size = PJRT_Program_STRUCT_SIZE,
                    .code = (char *)text,
                    .code_size = strlen(text),
                    .format = "hlo",
                    .format_size = 3};
  PJRT_Compile_Args a = {
      .struct_size = PJRT_Compile_Args_STRUCT_SIZE, .topology = t, .program = &p};
  *err = api->PJRT_Compile(&a);
  return a.executable;
}

static void run_twice(PJRT_Client *c, PJRT_LoadedExecutable *l) {
  const float x[4] = {1, 2, 3, 4};
  const int64_t dims[1] = {4};
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_Buffer *b = pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_F32, dims, 1);
  PJRT_Buffer *out = NULL;
  pjrt_exec_run(api, l, &b, 1, &out);
  float y[4];
  pjrt_exec_read(api, out, y, sizeof(y));
  for (int i = 0; i < 4; i++) assert_float_equal(y[i], 2 * x[i], 0);
  pjrt_exec_buffer_destroy(api, out);
  pjrt_exec_buffer_destroy(api, b);
}

static void test_compile_for_a_topology_then_load(void **state) {
  (void)state;
  PJRT_NamedValue o = pjrt_test_opt_int("num_devices", 2);
  PJRT_TopologyDescription *t = NULL;
  PJRT_CHECK(api, try_create("cpu", &o, 1, &t));
  PJRT_Error *err = NULL;
  PJRT_Executable *e = compile_for(t, kTwice, &err);
  PJRT_CHECK(api, err);
  assert_non_null(e);
  PJRT_Executable_NumOutputs_Args no = {.struct_size = PJRT_Executable_NumOutputs_Args_STRUCT_SIZE,
                                        .executable = e};
  PJRT_CHECK(api, api->PJRT_Executable_NumOutputs(&no));
  assert_int_equal(no.num_outputs, 1);
  PJRT_Executable_Serialize_Args s = {.struct_size = PJRT_Executable_Serialize_Args_STRUCT_SIZE,
                                      .executable = e};
  PJRT_CHECK(api, api->PJRT_Executable_Serialize(&s));
  destroy(t); /* the executable does not need it */
  PJRT_Client *c = pjrt_exec_client(api, NULL);
  /* DeserializeAndLoad on a client */
  PJRT_Executable_DeserializeAndLoad_Args dl = {
      .struct_size = PJRT_Executable_DeserializeAndLoad_Args_STRUCT_SIZE,
      .client = c,
      .serialized_executable = s.serialized_bytes,
      .serialized_executable_size = s.serialized_bytes_size};
  PJRT_CHECK(api, api->PJRT_Executable_DeserializeAndLoad(&dl));
  run_twice(c, dl.loaded_executable);
  pjrt_exec_destroy(api, dl.loaded_executable);
  s.serialized_executable_deleter(s.serialized_executable);
  /* or PJRT_Client_Load of the executable itself */
  PJRT_Client_Load_Args la = {
      .struct_size = PJRT_Client_Load_Args_STRUCT_SIZE, .client = c, .executable = e};
  PJRT_CHECK(api, api->PJRT_Client_Load(&la));
  run_twice(c, la.loaded_executable);
  pjrt_exec_destroy(api, la.loaded_executable);
  PJRT_Executable_Destroy_Args ed = {.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE,
                                     .executable = e};
  PJRT_CHECK(api, api->PJRT_Executable_Destroy(&ed));
  /* a client's topology compiles on that client */
  PJRT_Client_TopologyDescription_Args ta = {
      .struct_size = PJRT_Client_TopologyDescription_Args_STRUCT_SIZE, .client = c};
  PJRT_CHECK(api, api->PJRT_Client_TopologyDescription(&ta));
  e = compile_for(ta.topology, kTwice, &err);
  PJRT_CHECK(api, err);
  la.executable = e;
  la.loaded_executable = NULL;
  PJRT_CHECK(api, api->PJRT_Client_Load(&la));
  run_twice(c, la.loaded_executable);
  pjrt_exec_destroy(api, la.loaded_executable);
  ed.executable = e;
  PJRT_CHECK(api, api->PJRT_Executable_Destroy(&ed));
  pjrt_test_client_destroy(api, c);
}

static void test_compile_for_a_topology_errors(void **state) {
  (void)state;
  PJRT_Error *err = NULL;
  assert_null(compile_for(NULL, kTwice, &err));
  PJRT_EXPECT_ERROR(api, err, PJRT_Error_Code_INVALID_ARGUMENT, "topology is NULL");
  PJRT_TopologyDescription *t = NULL;
  PJRT_CHECK(api, try_create("cpu", NULL, 0, &t));
  assert_null(compile_for(t, "HloModule broken\nENTRY main {\n  ROOT x = f32[] nope()\n}\n", &err));
  PJRT_EXPECT_ERROR(api, err, PJRT_Error_Code_INVALID_ARGUMENT, "<program>:3:");
  destroy(t);
}

static PJRT_Error *canonical(PJRT_TopologyDescription *t, int kind, const int64_t *dims, size_t n,
                             const PJRT_Buffer_MemoryLayout *layout,
                             PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args *a) {
  memset(a, 0, sizeof(*a));
  a->struct_size = PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args_STRUCT_SIZE;
  a->topology = t;
  a->memory_space_kind_id = kind;
  a->dims = dims;
  a->num_dims = n;
  a->element_type = PJRT_Buffer_Type_F32;
  a->layout = layout;
  return api->PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace(a);
}

/* The ShapeProto bytes, field by field (xla_data.proto): element_type (2) F32 = 11,
 * dimensions (3) packed, layout (5) { minor_to_major (1) packed, memory_space (8) }, and
 * is_dynamic_dimension (6) packed. */
static void test_canonical_shape_for_memory_space(void **state) {
  (void)state;
  PJRT_TopologyDescription *t = NULL;
  PJRT_CHECK(api, try_create("cpu", NULL, 0, &t));
  const int64_t dims[2] = {2, 3}, m2m[2] = {0, 1};
  PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args a;
  PJRT_CHECK(api, canonical(t, 0, dims, 2, NULL, &a));
  const unsigned char device[] = {0x10, 11, 0x1a, 2, 2, 3, 0x2a, 4, 0x0a, 2, 1, 0, 0x32, 2, 0, 0};
  assert_int_equal(a.serialized_shape_size, sizeof(device));
  assert_memory_equal(a.serialized_shape, device, sizeof(device));
  a.serialized_shape_deleter(a.serialized_shape);
  PJRT_Buffer_MemoryLayout l = {.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE,
                                .type = PJRT_Buffer_MemoryLayout_Type_Tiled};
  l.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
  l.tiled.minor_to_major = m2m;
  l.tiled.minor_to_major_size = 2;
  PJRT_CHECK(api, canonical(t, 1, dims, 2, &l, &a));
  const unsigned char host[] = {0x10, 11, 0x1a, 2,    2, 3,    0x2a, 6, 0x0a,
                                2,    0,  1,    0x40, 5, 0x32, 2,    0, 0};
  assert_int_equal(a.serialized_shape_size, sizeof(host));
  assert_memory_equal(a.serialized_shape, host, sizeof(host));
  a.serialized_shape_deleter(a.serialized_shape);
  PJRT_EXPECT_ERROR(api, canonical(t, 7, dims, 2, NULL, &a), PJRT_Error_Code_INVALID_ARGUMENT,
                    "memory_space_kind_id 7");
  const int64_t bad_m2m[2] = {0, 0};
  l.tiled.minor_to_major = bad_m2m;
  PJRT_EXPECT_ERROR(api, canonical(t, 0, dims, 2, &l, &a), PJRT_Error_Code_INVALID_ARGUMENT,
                    "permutation");
  destroy(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_describes_host_devices),
      cmocka_unit_test(test_create_errors),
      cmocka_unit_test(test_client_topology_round_trips),
      cmocka_unit_test(test_compile_for_a_topology_then_load),
      cmocka_unit_test(test_compile_for_a_topology_errors),
      cmocka_unit_test(test_canonical_shape_for_memory_space),
  };
  return kiln_run_tests(tests, setup, NULL);
}
