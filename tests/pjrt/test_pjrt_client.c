/* PJRT conformance for the plugin, client side: Plugin_Initialize/Attributes, Client_Create
 * options, platform, devices and their descriptions, memories and their 0.105 function table,
 * DefaultDeviceAssignment, events (Create/Set/OnReady/Await/Error), and the error paths of
 * each (NULL args, short struct_size, NULL handles). Built against OpenXLA's pjrt_c_api.h;
 * the plugin is loaded with dlopen(RTLD_LOCAL). Runs on the host platform ("cpu"), and on
 * "cuda" where a GPU is present. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "pjrt_test_util.h"

static const PJRT_Api *api;

static PJRT_Client *cpu_client(int64_t num_devices) {
  PJRT_NamedValue o[2] = {pjrt_test_opt_string("platform", "cpu"),
                          pjrt_test_opt_int("num_devices", num_devices)};
  return pjrt_test_client(api, o, 2);
}

static bool have_cuda(void) {
  PJRT_NamedValue o = pjrt_test_opt_string("platform", "cuda");
  PJRT_Client_Create_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  a.create_options = &o;
  a.num_options = 1;
  PJRT_Error *e = api->PJRT_Client_Create(&a);
  if (e) {
    pjrt_test_take_error(api, e, NULL, 0);
    return false;
  }
  pjrt_test_client_destroy(api, a.client);
  return true;
}

/* ---- table and plugin ---------------------------------------------------------------------- */

static void test_table_and_initialize(void **state) {
  (void)state;
  assert_non_null(api);
  assert_int_equal(api->pjrt_api_version.major_version, PJRT_API_MAJOR);
  assert_int_equal(api->pjrt_api_version.minor_version, PJRT_API_MINOR);
  PJRT_Plugin_Initialize_Args a = {.struct_size = PJRT_Plugin_Initialize_Args_STRUCT_SIZE};
  PJRT_CHECK(api, api->PJRT_Plugin_Initialize(&a));
  PJRT_CHECK(api, api->PJRT_Plugin_Initialize(&a)); /* twice is fine */
  PJRT_EXPECT_ERROR(api, api->PJRT_Plugin_Initialize(NULL), PJRT_Error_Code_INVALID_ARGUMENT,
                    "PJRT_Plugin_Initialize");
}

static const PJRT_NamedValue *find_attr(const PJRT_NamedValue *a, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (a[i].name_size == strlen(name) && !memcmp(a[i].name, name, a[i].name_size)) return &a[i];
  return NULL;
}

static void test_plugin_attributes(void **state) {
  (void)state;
  PJRT_Plugin_Attributes_Args a = {.struct_size = PJRT_Plugin_Attributes_Args_STRUCT_SIZE};
  PJRT_CHECK(api, api->PJRT_Plugin_Attributes(&a));
  const PJRT_NamedValue *v = find_attr(a.attributes, a.num_attributes, "xla_version");
  assert_non_null(v);
  assert_int_equal(v->type, PJRT_NamedValue_kInt64);
  assert_true(v->int64_value >= 1);
  const char *versions[] = {"stablehlo_current_version", "stablehlo_minimum_version"};
  int64_t got[2][3];
  for (int i = 0; i < 2; i++) {
    v = find_attr(a.attributes, a.num_attributes, versions[i]);
    assert_non_null(v);
    assert_int_equal(v->type, PJRT_NamedValue_kInt64List);
    assert_int_equal(v->value_size, 3);
    memcpy(got[i], v->int64_array_value, sizeof(got[i]));
  }
  /* minimum <= current */
  int cmp = 0;
  for (int k = 0; k < 3 && !cmp; k++) cmp = (got[1][k] > got[0][k]) - (got[1][k] < got[0][k]);
  assert_true(cmp <= 0);
  v = find_attr(a.attributes, a.num_attributes, "kiln_version");
  assert_non_null(v);
  assert_int_equal(v->type, PJRT_NamedValue_kString);
  assert_true(v->value_size > 0);
  v = find_attr(a.attributes, a.num_attributes, "program_formats");
  assert_non_null(v);
  assert_int_equal(v->type, PJRT_NamedValue_kString);
  char formats[128];
  snprintf(formats, sizeof(formats), "%.*s", (int)v->value_size, v->string_value);
  assert_non_null(strstr(formats, "mlir"));
  assert_non_null(strstr(formats, "hlo"));
  assert_non_null(strstr(formats, "hlo_with_config"));
  /* Error paths: NULL and short structs. */
  PJRT_EXPECT_ERROR(api, api->PJRT_Plugin_Attributes(NULL), PJRT_Error_Code_INVALID_ARGUMENT,
                    "PJRT_Plugin_Attributes");
  PJRT_Plugin_Attributes_Args s = {.struct_size = 8};
  PJRT_EXPECT_ERROR(api, api->PJRT_Plugin_Attributes(&s), PJRT_Error_Code_INVALID_ARGUMENT,
                    "struct_size");
}

/* ---- client ------------------------------------------------------------------------------ */

static void test_client_create_options(void **state) {
  (void)state;
  /* Unknown names are ignored; every known one with its type is accepted. */
  PJRT_NamedValue ok[] = {
      pjrt_test_opt_string("platform", "cpu"),      pjrt_test_opt_int("num_devices", 2),
      pjrt_test_opt_string("cache_dir", ""),        pjrt_test_opt_string("dump_dir", "/tmp/x"),
      pjrt_test_opt_bool("command_buffers", false), pjrt_test_opt_string("ffi_libraries", ""),
      pjrt_test_opt_int("some_unknown_option", 7),
  };
  PJRT_Client *c = pjrt_test_client(api, ok, sizeof(ok) / sizeof(ok[0]));
  PJRT_Client_Devices_Args d = {.struct_size = PJRT_Client_Devices_Args_STRUCT_SIZE, .client = c};
  PJRT_CHECK(api, api->PJRT_Client_Devices(&d));
  assert_int_equal(d.num_devices, 2);
  pjrt_test_client_destroy(api, c);
  /* XLA's CPU plugin's name for it. */
  PJRT_NamedValue xla[] = {pjrt_test_opt_string("platform", "cpu"),
                           pjrt_test_opt_int("cpu_device_count", 3)};
  c = pjrt_test_client(api, xla, 2);
  d.client = c;
  PJRT_CHECK(api, api->PJRT_Client_Devices(&d));
  assert_int_equal(d.num_devices, 3);
  pjrt_test_client_destroy(api, c);

  /* Known names with the wrong type. */
  PJRT_NamedValue bad[][1] = {{pjrt_test_opt_int("platform", 1)},
                              {pjrt_test_opt_string("num_devices", "4")},
                              {pjrt_test_opt_int("command_buffers", 1)},
                              {pjrt_test_opt_bool("cache_dir", true)},
                              {pjrt_test_opt_string("platform", "tpu")},
                              {pjrt_test_opt_int("num_devices", 0)},
                              {pjrt_test_opt_int("num_devices", -3)},
                              {pjrt_test_opt_int("collective_timeout_ms", 0)},
                              {pjrt_test_opt_string("collective_timeout_ms", "300")}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    PJRT_Client_Create_Args a;
    memset(&a, 0, sizeof(a));
    a.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
    a.create_options = bad[i];
    a.num_options = 1;
    PJRT_EXPECT_ERROR(api, api->PJRT_Client_Create(&a), PJRT_Error_Code_INVALID_ARGUMENT, "");
    assert_null(a.client);
  }
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_Create(NULL), PJRT_Error_Code_INVALID_ARGUMENT,
                    "PJRT_Client_Create");
  PJRT_Client_Create_Args s;
  memset(&s, 0, sizeof(s));
  s.struct_size = offsetof(PJRT_Client_Create_Args, kv_put_user_arg);
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_Create(&s), PJRT_Error_Code_INVALID_ARGUMENT,
                    "struct_size");
  /* An older client's smaller struct (before kv_try_get) is accepted. */
  PJRT_NamedValue cpu = pjrt_test_opt_string("platform", "cpu");
  memset(&s, 0, sizeof(s));
  s.struct_size = offsetof(PJRT_Client_Create_Args, kv_try_get_callback);
  s.create_options = &cpu;
  s.num_options = 1;
  PJRT_CHECK(api, api->PJRT_Client_Create(&s));
  assert_non_null(s.client);
  pjrt_test_client_destroy(api, s.client);
  /* Destroy of NULL is fine. */
  PJRT_Client_Destroy_Args da = {.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE};
  PJRT_CHECK(api, api->PJRT_Client_Destroy(&da));
}

static void test_client_environment_defaults(void **state) {
  (void)state;
  setenv("KILN_HOST_DEVICES", "3", 1);
  PJRT_NamedValue o = pjrt_test_opt_string("platform", "cpu");
  PJRT_Client *c = pjrt_test_client(api, &o, 1);
  PJRT_Client_Devices_Args d = {.struct_size = PJRT_Client_Devices_Args_STRUCT_SIZE, .client = c};
  PJRT_CHECK(api, api->PJRT_Client_Devices(&d));
  assert_int_equal(d.num_devices, 3);
  pjrt_test_client_destroy(api, c);
  setenv("KILN_HOST_DEVICES", "zero", 1);
  PJRT_Client_Create_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  a.create_options = &o;
  a.num_options = 1;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_Create(&a), PJRT_Error_Code_INVALID_ARGUMENT,
                    "KILN_HOST_DEVICES");
  unsetenv("KILN_HOST_DEVICES");
  setenv("KILN_COLLECTIVE_TIMEOUT_MS", "-5", 1);
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_Create(&a), PJRT_Error_Code_INVALID_ARGUMENT,
                    "KILN_COLLECTIVE_TIMEOUT_MS");
  unsetenv("KILN_COLLECTIVE_TIMEOUT_MS");
  setenv("KILN_PLATFORM", "cpu", 1);
  c = pjrt_test_client(api, NULL, 0);
  PJRT_Client_PlatformName_Args pn = {.struct_size = PJRT_Client_PlatformName_Args_STRUCT_SIZE,
                                      .client = c};
  PJRT_CHECK(api, api->PJRT_Client_PlatformName(&pn));
  assert_int_equal(pn.platform_name_size, 3);
  assert_memory_equal(pn.platform_name, "cpu", 3);
  pjrt_test_client_destroy(api, c);
  unsetenv("KILN_PLATFORM");
}

static void test_client_platform(void **state) {
  (void)state;
  PJRT_Client *c = cpu_client(1);
  PJRT_Client_PlatformName_Args pn = {.struct_size = PJRT_Client_PlatformName_Args_STRUCT_SIZE,
                                      .client = c};
  PJRT_CHECK(api, api->PJRT_Client_PlatformName(&pn));
  assert_int_equal(pn.platform_name_size, 3);
  assert_memory_equal(pn.platform_name, "cpu", 3);
  PJRT_Client_PlatformVersion_Args pv = {
      .struct_size = PJRT_Client_PlatformVersion_Args_STRUCT_SIZE, .client = c};
  PJRT_CHECK(api, api->PJRT_Client_PlatformVersion(&pv));
  assert_true(pv.platform_version_size > 0);
  assert_int_equal(strlen(pv.platform_version), pv.platform_version_size);
  PJRT_Client_ProcessIndex_Args pi = {
      .struct_size = PJRT_Client_ProcessIndex_Args_STRUCT_SIZE, .client = c, .process_index = 9};
  PJRT_CHECK(api, api->PJRT_Client_ProcessIndex(&pi));
  assert_int_equal(pi.process_index, 0);
  /* NULL client handles. */
  pn.client = NULL;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_PlatformName(&pn), PJRT_Error_Code_INVALID_ARGUMENT,
                    "client");
  pv.client = NULL;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_PlatformVersion(&pv), PJRT_Error_Code_INVALID_ARGUMENT,
                    "client");
  pi.client = NULL;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_ProcessIndex(&pi), PJRT_Error_Code_INVALID_ARGUMENT,
                    "client");
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_PlatformName(NULL), PJRT_Error_Code_INVALID_ARGUMENT, "");
  pn.struct_size = offsetof(PJRT_Client_PlatformName_Args, platform_name);
  pn.client = c;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_PlatformName(&pn), PJRT_Error_Code_INVALID_ARGUMENT,
                    "struct_size");
  pjrt_test_client_destroy(api, c);
}

/* ---- devices ----------------------------------------------------------------------------- */

static void check_devices(PJRT_Client *c, size_t expect, const char *platform) {
  PJRT_Client_Devices_Args d = {.struct_size = PJRT_Client_Devices_Args_STRUCT_SIZE, .client = c};
  PJRT_CHECK(api, api->PJRT_Client_Devices(&d));
  if (expect) assert_int_equal(d.num_devices, expect);
  PJRT_Client_AddressableDevices_Args ad = {
      .struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE, .client = c};
  PJRT_CHECK(api, api->PJRT_Client_AddressableDevices(&ad));
  assert_int_equal(ad.num_addressable_devices, d.num_devices);
  PJRT_Client_AddressableMemories_Args am = {
      .struct_size = PJRT_Client_AddressableMemories_Args_STRUCT_SIZE, .client = c};
  PJRT_CHECK(api, api->PJRT_Client_AddressableMemories(&am));
  assert_int_equal(am.num_addressable_memories, 2 * d.num_devices);
  bool cuda = !strcmp(platform, "cuda");
  for (size_t i = 0; i < d.num_devices; i++) {
    PJRT_Device *dev = d.devices[i];
    assert_ptr_equal(ad.addressable_devices[i], dev);
    PJRT_Device_GetDescription_Args gd = {
        .struct_size = PJRT_Device_GetDescription_Args_STRUCT_SIZE, .device = dev};
    PJRT_CHECK(api, api->PJRT_Device_GetDescription(&gd));
    PJRT_DeviceDescription *desc = gd.device_description;
    PJRT_DeviceDescription_Id_Args id = {.struct_size = PJRT_DeviceDescription_Id_Args_STRUCT_SIZE,
                                         .device_description = desc};
    PJRT_CHECK(api, api->PJRT_DeviceDescription_Id(&id));
    assert_int_equal(id.id, (int)i);
    PJRT_DeviceDescription_ProcessIndex_Args pi = {
        .struct_size = PJRT_DeviceDescription_ProcessIndex_Args_STRUCT_SIZE,
        .device_description = desc};
    PJRT_CHECK(api, api->PJRT_DeviceDescription_ProcessIndex(&pi));
    assert_int_equal(pi.process_index, 0);
    PJRT_DeviceDescription_Kind_Args k = {
        .struct_size = PJRT_DeviceDescription_Kind_Args_STRUCT_SIZE, .device_description = desc};
    PJRT_CHECK(api, api->PJRT_DeviceDescription_Kind(&k));
    assert_true(k.device_kind_size > 0);
    if (!cuda) {
      assert_int_equal(k.device_kind_size, 3);
      assert_memory_equal(k.device_kind, "cpu", 3);
    }
    PJRT_DeviceDescription_DebugString_Args ds = {
        .struct_size = PJRT_DeviceDescription_DebugString_Args_STRUCT_SIZE,
        .device_description = desc};
    PJRT_CHECK(api, api->PJRT_DeviceDescription_DebugString(&ds));
    assert_true(ds.debug_string_size > 0);
    PJRT_DeviceDescription_ToString_Args ts = {
        .struct_size = PJRT_DeviceDescription_ToString_Args_STRUCT_SIZE,
        .device_description = desc};
    PJRT_CHECK(api, api->PJRT_DeviceDescription_ToString(&ts));
    char want[64];
    snprintf(want, sizeof(want), "%s(id=%zu)", cuda ? "CudaDevice" : "CpuDevice", i);
    assert_int_equal(ts.to_string_size, strlen(want));
    assert_memory_equal(ts.to_string, want, strlen(want));
    PJRT_DeviceDescription_Attributes_Args at = {
        .struct_size = PJRT_DeviceDescription_Attributes_Args_STRUCT_SIZE,
        .device_description = desc};
    PJRT_CHECK(api, api->PJRT_DeviceDescription_Attributes(&at));
    if (cuda) {
      const PJRT_NamedValue *cc = find_attr(at.attributes, at.num_attributes, "compute_capability");
      assert_non_null(cc);
      assert_int_equal(cc->type, PJRT_NamedValue_kString);
      const PJRT_NamedValue *sm = find_attr(at.attributes, at.num_attributes, "core_count");
      assert_non_null(sm);
      assert_true(sm->int64_value > 0);
      const PJRT_NamedValue *mem = find_attr(at.attributes, at.num_attributes, "memory_size");
      assert_non_null(mem);
      assert_true(mem->int64_value > 0);
    } else {
      const PJRT_NamedValue *cores = find_attr(at.attributes, at.num_attributes, "cores");
      assert_non_null(cores);
      assert_int_equal(cores->type, PJRT_NamedValue_kInt64);
      assert_true(cores->int64_value >= 1);
    }
    PJRT_Device_IsAddressable_Args ia = {.struct_size = PJRT_Device_IsAddressable_Args_STRUCT_SIZE,
                                         .device = dev};
    PJRT_CHECK(api, api->PJRT_Device_IsAddressable(&ia));
    assert_true(ia.is_addressable);
    PJRT_Device_LocalHardwareId_Args lh = {
        .struct_size = PJRT_Device_LocalHardwareId_Args_STRUCT_SIZE, .device = dev};
    PJRT_CHECK(api, api->PJRT_Device_LocalHardwareId(&lh));
    assert_int_equal(lh.local_hardware_id, (int)i);
    PJRT_Client_LookupDevice_Args ld = {
        .struct_size = PJRT_Client_LookupDevice_Args_STRUCT_SIZE, .client = c, .id = (int)i};
    PJRT_CHECK(api, api->PJRT_Client_LookupDevice(&ld));
    assert_ptr_equal(ld.device, dev);
    PJRT_Client_LookupAddressableDevice_Args la = {
        .struct_size = PJRT_Client_LookupAddressableDevice_Args_STRUCT_SIZE,
        .client = c,
        .local_hardware_id = (int)i};
    PJRT_CHECK(api, api->PJRT_Client_LookupAddressableDevice(&la));
    assert_ptr_equal(la.addressable_device, dev);
    /* Memories: "device" (default) and "pinned_host". */
    PJRT_Device_AddressableMemories_Args dm = {
        .struct_size = PJRT_Device_AddressableMemories_Args_STRUCT_SIZE, .device = dev};
    PJRT_CHECK(api, api->PJRT_Device_AddressableMemories(&dm));
    assert_int_equal(dm.num_memories, 2);
    PJRT_Device_DefaultMemory_Args def = {.struct_size = PJRT_Device_DefaultMemory_Args_STRUCT_SIZE,
                                          .device = dev};
    PJRT_CHECK(api, api->PJRT_Device_DefaultMemory(&def));
    assert_ptr_equal(def.memory, dm.memories[0]);
    const char *kinds[2] = {"device", "pinned_host"};
    for (size_t m = 0; m < 2; m++) {
      PJRT_Memory *mem = dm.memories[m];
      PJRT_Memory_Kind_Args mk = {.struct_size = PJRT_Memory_Kind_Args_STRUCT_SIZE, .memory = mem};
      PJRT_CHECK(api, api->PJRT_Memory_Kind(&mk));
      assert_int_equal(mk.kind_size, strlen(kinds[m]));
      assert_memory_equal(mk.kind, kinds[m], mk.kind_size);
      PJRT_Memory_Kind_Id_Args mki = {.struct_size = PJRT_Memory_Kind_Id_Args_STRUCT_SIZE,
                                      .memory = mem};
      PJRT_CHECK(api, api->PJRT_Memory_Kind_Id(&mki));
      assert_int_equal(mki.kind_id, (int)m);
      PJRT_Memory_Id_Args mid = {.struct_size = PJRT_Memory_Id_Args_STRUCT_SIZE, .memory = mem};
      PJRT_CHECK(api, api->PJRT_Memory_Id(&mid));
      assert_int_equal(mid.id, (int)(2 * i + m));
      assert_ptr_equal(am.addressable_memories[2 * i + m], mem);
      PJRT_Memory_DebugString_Args mds = {.struct_size = PJRT_Memory_DebugString_Args_STRUCT_SIZE,
                                          .memory = mem};
      PJRT_CHECK(api, api->PJRT_Memory_DebugString(&mds));
      assert_true(mds.debug_string_size > 0);
      PJRT_Memory_ToString_Args mts = {.struct_size = PJRT_Memory_ToString_Args_STRUCT_SIZE,
                                       .memory = mem};
      PJRT_CHECK(api, api->PJRT_Memory_ToString(&mts));
      assert_true(mts.to_string_size > 0);
      PJRT_Memory_AddressableByDevices_Args abd = {
          .struct_size = PJRT_Memory_AddressableByDevices_Args_STRUCT_SIZE, .memory = mem};
      PJRT_CHECK(api, api->PJRT_Memory_AddressableByDevices(&abd));
      assert_int_equal(abd.num_devices, 1);
      assert_ptr_equal(abd.devices[0], dev);
      /* The 0.105 function table. */
      assert_non_null(mem->vtable);
      assert_true(mem->vtable->struct_size >= PJRT_Memory_FunctionTable_STRUCT_SIZE);
      assert_int_equal(mem->vtable->instance_struct_size, PJRT_Memory_STRUCT_SIZE);
    }
  }
}

static void test_devices_host(void **state) {
  (void)state;
  PJRT_Client *c = cpu_client(4);
  check_devices(c, 4, "cpu");
  /* Lookups that miss, NULL handles. */
  PJRT_Client_LookupDevice_Args ld = {
      .struct_size = PJRT_Client_LookupDevice_Args_STRUCT_SIZE, .client = c, .id = 4};
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_LookupDevice(&ld), PJRT_Error_Code_INVALID_ARGUMENT,
                    "id 4");
  ld.id = -1;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_LookupDevice(&ld), PJRT_Error_Code_INVALID_ARGUMENT, "");
  ld.client = NULL;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_LookupDevice(&ld), PJRT_Error_Code_INVALID_ARGUMENT,
                    "client");
  PJRT_Client_LookupAddressableDevice_Args la = {
      .struct_size = PJRT_Client_LookupAddressableDevice_Args_STRUCT_SIZE,
      .client = c,
      .local_hardware_id = 17};
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_LookupAddressableDevice(&la),
                    PJRT_Error_Code_INVALID_ARGUMENT, "17");
  PJRT_Device_GetDescription_Args gd = {.struct_size = PJRT_Device_GetDescription_Args_STRUCT_SIZE};
  PJRT_EXPECT_ERROR(api, api->PJRT_Device_GetDescription(&gd), PJRT_Error_Code_INVALID_ARGUMENT,
                    "device");
  PJRT_DeviceDescription_Id_Args id = {.struct_size = PJRT_DeviceDescription_Id_Args_STRUCT_SIZE};
  PJRT_EXPECT_ERROR(api, api->PJRT_DeviceDescription_Id(&id), PJRT_Error_Code_INVALID_ARGUMENT,
                    "device_description");
  PJRT_Memory_Kind_Args mk = {.struct_size = PJRT_Memory_Kind_Args_STRUCT_SIZE};
  PJRT_EXPECT_ERROR(api, api->PJRT_Memory_Kind(&mk), PJRT_Error_Code_INVALID_ARGUMENT, "memory");
  PJRT_Device_MemoryStats_Args ms = {.struct_size = PJRT_Device_MemoryStats_Args_STRUCT_SIZE};
  PJRT_EXPECT_ERROR(api, api->PJRT_Device_MemoryStats(&ms), PJRT_Error_Code_INVALID_ARGUMENT,
                    "device");
  PJRT_Device_AddressableMemories_Args dm = {.struct_size =
                                                 PJRT_Device_AddressableMemories_Args_STRUCT_SIZE};
  PJRT_EXPECT_ERROR(api, api->PJRT_Device_AddressableMemories(NULL),
                    PJRT_Error_Code_INVALID_ARGUMENT, "");
  dm.struct_size = 16;
  PJRT_EXPECT_ERROR(api, api->PJRT_Device_AddressableMemories(&dm),
                    PJRT_Error_Code_INVALID_ARGUMENT, "struct_size");
  pjrt_test_client_destroy(api, c);
}

static void test_topology(void **state) {
  (void)state;
  PJRT_Client *c = cpu_client(3);
  PJRT_Client_TopologyDescription_Args t = {
      .struct_size = PJRT_Client_TopologyDescription_Args_STRUCT_SIZE, .client = c};
  PJRT_CHECK(api, api->PJRT_Client_TopologyDescription(&t));
  assert_non_null(t.topology);
  PJRT_TopologyDescription_PlatformName_Args pn = {
      .struct_size = PJRT_TopologyDescription_PlatformName_Args_STRUCT_SIZE,
      .topology = t.topology};
  PJRT_CHECK(api, api->PJRT_TopologyDescription_PlatformName(&pn));
  assert_int_equal(pn.platform_name_size, 3);
  assert_memory_equal(pn.platform_name, "cpu", 3);
  PJRT_TopologyDescription_PlatformVersion_Args pv = {
      .struct_size = PJRT_TopologyDescription_PlatformVersion_Args_STRUCT_SIZE,
      .topology = t.topology};
  PJRT_CHECK(api, api->PJRT_TopologyDescription_PlatformVersion(&pv));
  assert_true(pv.platform_version_size > 0);
  PJRT_TopologyDescription_GetDeviceDescriptions_Args gd = {
      .struct_size = PJRT_TopologyDescription_GetDeviceDescriptions_Args_STRUCT_SIZE,
      .topology = t.topology};
  PJRT_CHECK(api, api->PJRT_TopologyDescription_GetDeviceDescriptions(&gd));
  assert_int_equal(gd.num_descriptions, 3);
  PJRT_Client_Devices_Args d = {.struct_size = PJRT_Client_Devices_Args_STRUCT_SIZE, .client = c};
  PJRT_CHECK(api, api->PJRT_Client_Devices(&d));
  for (size_t i = 0; i < 3; i++) {
    PJRT_Device_GetDescription_Args g = {.struct_size = PJRT_Device_GetDescription_Args_STRUCT_SIZE,
                                         .device = d.devices[i]};
    PJRT_CHECK(api, api->PJRT_Device_GetDescription(&g));
    assert_ptr_equal(gd.descriptions[i], g.device_description);
  }
  PJRT_TopologyDescription_GetMemorySpaceKindIds_Args k = {
      .struct_size = PJRT_TopologyDescription_GetMemorySpaceKindIds_Args_STRUCT_SIZE,
      .topology = t.topology};
  PJRT_CHECK(api, api->PJRT_TopologyDescription_GetMemorySpaceKindIds(&k));
  assert_int_equal(k.num_memory_space_kind_ids, 2);
  gd.topology = NULL;
  PJRT_EXPECT_ERROR(api, api->PJRT_TopologyDescription_GetDeviceDescriptions(&gd),
                    PJRT_Error_Code_INVALID_ARGUMENT, "topology");
  t.client = NULL;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_TopologyDescription(&t), PJRT_Error_Code_INVALID_ARGUMENT,
                    "client");
  pjrt_test_client_destroy(api, c);
}

static void test_devices_cuda(void **state) {
  (void)state;
  if (!have_cuda()) skip();
  PJRT_NamedValue o = pjrt_test_opt_string("platform", "cuda");
  PJRT_Client *c = pjrt_test_client(api, &o, 1);
  PJRT_Client_PlatformName_Args pn = {.struct_size = PJRT_Client_PlatformName_Args_STRUCT_SIZE,
                                      .client = c};
  PJRT_CHECK(api, api->PJRT_Client_PlatformName(&pn));
  assert_int_equal(pn.platform_name_size, 4);
  assert_memory_equal(pn.platform_name, "cuda", 4);
  check_devices(c, 0, "cuda");
  pjrt_test_client_destroy(api, c);
}

/* ---- memory user data (0.105 table) ------------------------------------------------------ */

static int g_dtor_calls;
static void count_dtor(void *p) {
  (void)p;
  g_dtor_calls++;
}

static void test_memory_user_data(void **state) {
  (void)state;
  PJRT_Client *c = cpu_client(2);
  PJRT_Client_AddressableMemories_Args am = {
      .struct_size = PJRT_Client_AddressableMemories_Args_STRUCT_SIZE, .client = c};
  PJRT_CHECK(api, api->PJRT_Client_AddressableMemories(&am));
  PJRT_Memory *m0 = am.addressable_memories[0], *m1 = am.addressable_memories[1];
  static int key_a, key_b, v1, v2, v3;
  g_dtor_calls = 0;
  assert_null(m0->vtable->get_user_data(m0, &key_a));
  m0->vtable->set_user_data(m0, &key_a, &v1, count_dtor);
  m0->vtable->set_user_data(m0, &key_b, &v2, count_dtor);
  assert_ptr_equal(m0->vtable->get_user_data(m0, &key_a), &v1);
  assert_ptr_equal(m0->vtable->get_user_data(m0, &key_b), &v2);
  assert_null(m1->vtable->get_user_data(m1, &key_a));     /* per memory */
  m0->vtable->set_user_data(m0, &key_a, &v3, count_dtor); /* replaces: old dtor runs */
  assert_int_equal(g_dtor_calls, 1);
  assert_ptr_equal(m0->vtable->get_user_data(m0, &key_a), &v3);
  pjrt_test_client_destroy(api, c); /* the rest are destroyed with the client */
  assert_int_equal(g_dtor_calls, 3);
}

/* ---- device assignment ------------------------------------------------------------------- */

static void test_default_device_assignment(void **state) {
  (void)state;
  PJRT_Client *c = cpu_client(4);
  int ids[4] = {-1, -1, -1, -1};
  PJRT_Client_DefaultDeviceAssignment_Args a = {
      .struct_size = PJRT_Client_DefaultDeviceAssignment_Args_STRUCT_SIZE,
      .client = c,
      .num_replicas = 2,
      .num_partitions = 2,
      .default_assignment_size = 4,
      .default_assignment = ids};
  PJRT_CHECK(api, api->PJRT_Client_DefaultDeviceAssignment(&a));
  /* replica r, partition p -> device r + p * replicas, written replica-major. */
  assert_int_equal(ids[0], 0);
  assert_int_equal(ids[1], 2);
  assert_int_equal(ids[2], 1);
  assert_int_equal(ids[3], 3);
  a.num_replicas = 4;
  a.num_partitions = 1;
  PJRT_CHECK(api, api->PJRT_Client_DefaultDeviceAssignment(&a));
  for (int i = 0; i < 4; i++) assert_int_equal(ids[i], i);
  a.num_replicas = 5;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_DefaultDeviceAssignment(&a),
                    PJRT_Error_Code_INVALID_ARGUMENT, "devices");
  a.num_replicas = 0;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_DefaultDeviceAssignment(&a),
                    PJRT_Error_Code_INVALID_ARGUMENT, "");
  a.num_replicas = 2;
  a.num_partitions = 2;
  a.default_assignment_size = 3;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_DefaultDeviceAssignment(&a),
                    PJRT_Error_Code_INVALID_ARGUMENT, "default_assignment");
  a.client = NULL;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_DefaultDeviceAssignment(&a),
                    PJRT_Error_Code_INVALID_ARGUMENT, "client");
  pjrt_test_client_destroy(api, c);
}

/* ---- events ------------------------------------------------------------------------------ */

typedef struct cb_state {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int calls;
  PJRT_Error_Code code;
  pthread_t thread;
  char message[256];
} cb_state_t;

static void on_ready(PJRT_Error *error, void *arg) {
  cb_state_t *s = arg;
  char msg[256];
  PJRT_Error_Code code = pjrt_test_take_error(api, error, msg, sizeof(msg));
  pthread_mutex_lock(&s->mu);
  s->calls++;
  s->code = code;
  s->thread = pthread_self();
  snprintf(s->message, sizeof(s->message), "%s", msg);
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void cb_init(cb_state_t *s) {
  memset(s, 0, sizeof(*s));
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
}

static void cb_wait(cb_state_t *s, int calls) {
  pthread_mutex_lock(&s->mu);
  while (s->calls < calls) pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
}

static PJRT_Event *event_create(void) {
  PJRT_Event_Create_Args a = {.struct_size = PJRT_Event_Create_Args_STRUCT_SIZE};
  PJRT_CHECK(api, api->PJRT_Event_Create(&a));
  assert_non_null(a.event);
  return a.event;
}

static void event_destroy(PJRT_Event *e) {
  PJRT_Event_Destroy_Args d = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE, .event = e};
  PJRT_CHECK(api, api->PJRT_Event_Destroy(&d));
}

static bool event_ready(PJRT_Event *e) {
  PJRT_Event_IsReady_Args r = {.struct_size = PJRT_Event_IsReady_Args_STRUCT_SIZE, .event = e};
  PJRT_CHECK(api, api->PJRT_Event_IsReady(&r));
  return r.is_ready;
}

static void test_event_create_set_ok(void **state) {
  (void)state;
  PJRT_Event *e = event_create();
  assert_false(event_ready(e));
  PJRT_Event_Error_Args ea = {.struct_size = PJRT_Event_Error_Args_STRUCT_SIZE, .event = e};
  PJRT_EXPECT_ERROR(api, api->PJRT_Event_Error(&ea), PJRT_Error_Code_FAILED_PRECONDITION,
                    "not ready");
  cb_state_t s;
  cb_init(&s);
  PJRT_Event_OnReady_Args on = {.struct_size = PJRT_Event_OnReady_Args_STRUCT_SIZE,
                                .event = e,
                                .callback = on_ready,
                                .user_arg = &s};
  PJRT_CHECK(api, api->PJRT_Event_OnReady(&on));
  usleep(10000);
  pthread_mutex_lock(&s.mu);
  assert_int_equal(s.calls, 0);
  pthread_mutex_unlock(&s.mu);
  PJRT_Event_Set_Args set = {
      .struct_size = PJRT_Event_Set_Args_STRUCT_SIZE, .event = e, .error_code = PJRT_Error_Code_OK};
  PJRT_CHECK(api, api->PJRT_Event_Set(&set));
  cb_wait(&s, 1);
  assert_int_equal(s.code, PJRT_Error_Code_OK);
  assert_false(pthread_equal(s.thread, pthread_self())); /* on a kiln thread */
  assert_true(event_ready(e));
  PJRT_CHECK(api, api->PJRT_Event_Error(&ea));
  PJRT_Event_Await_Args aw = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE, .event = e};
  PJRT_CHECK(api, api->PJRT_Event_Await(&aw));
  /* Set twice: refused. */
  PJRT_EXPECT_ERROR(api, api->PJRT_Event_Set(&set), PJRT_Error_Code_FAILED_PRECONDITION, "already");
  /* OnReady on a ready event: dispatched to the callback thread too, exactly once. */
  PJRT_CHECK(api, api->PJRT_Event_OnReady(&on));
  cb_wait(&s, 2);
  usleep(10000);
  pthread_mutex_lock(&s.mu);
  assert_int_equal(s.calls, 2);
  assert_false(pthread_equal(s.thread, pthread_self()));
  pthread_mutex_unlock(&s.mu);
  event_destroy(e);
}

static void test_event_set_error(void **state) {
  (void)state;
  PJRT_Event *e = event_create();
  cb_state_t s;
  cb_init(&s);
  PJRT_Event_OnReady_Args on = {.struct_size = PJRT_Event_OnReady_Args_STRUCT_SIZE,
                                .event = e,
                                .callback = on_ready,
                                .user_arg = &s};
  PJRT_CHECK(api, api->PJRT_Event_OnReady(&on));
  PJRT_CHECK(api, api->PJRT_Event_OnReady(&on)); /* two callbacks, each called once */
  const char *msg = "the host ran out of patience";
  PJRT_Event_Set_Args set = {.struct_size = PJRT_Event_Set_Args_STRUCT_SIZE,
                             .event = e,
                             .error_code = PJRT_Error_Code_DEADLINE_EXCEEDED,
                             .error_message = msg,
                             .error_message_size = strlen(msg)};
  PJRT_CHECK(api, api->PJRT_Event_Set(&set));
  cb_wait(&s, 2);
  assert_int_equal(s.code, PJRT_Error_Code_DEADLINE_EXCEEDED);
  assert_non_null(strstr(s.message, "patience"));
  PJRT_Event_Await_Args aw = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE, .event = e};
  PJRT_EXPECT_ERROR(api, api->PJRT_Event_Await(&aw), PJRT_Error_Code_DEADLINE_EXCEEDED, "patience");
  PJRT_Event_Error_Args ea = {.struct_size = PJRT_Event_Error_Args_STRUCT_SIZE, .event = e};
  PJRT_EXPECT_ERROR(api, api->PJRT_Event_Error(&ea), PJRT_Error_Code_DEADLINE_EXCEEDED, "patience");
  /* Each call hands out its own copy: a second one works after the first was destroyed. */
  PJRT_EXPECT_ERROR(api, api->PJRT_Event_Error(&ea), PJRT_Error_Code_DEADLINE_EXCEEDED, "");
  event_destroy(e);
  usleep(10000);
  assert_int_equal(s.calls, 2);
}

typedef struct setter {
  PJRT_Event *e;
} setter_t;

static void *set_later(void *arg) {
  setter_t *st = arg;
  usleep(20000);
  PJRT_Event_Set_Args set = {.struct_size = PJRT_Event_Set_Args_STRUCT_SIZE,
                             .event = st->e,
                             .error_code = PJRT_Error_Code_OK};
  PJRT_CHECK(api, api->PJRT_Event_Set(&set));
  return NULL;
}

static void test_event_await_blocks(void **state) {
  (void)state;
  PJRT_Event *e = event_create();
  setter_t st = {e};
  pthread_t t;
  pthread_create(&t, NULL, set_later, &st);
  PJRT_Event_Await_Args aw = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE, .event = e};
  PJRT_CHECK(api, api->PJRT_Event_Await(&aw));
  assert_true(event_ready(e));
  pthread_join(t, NULL);
  event_destroy(e);
}

/* A callback that calls back into the API (destroys its event): possible because no kiln
 * lock is held while it runs. */
typedef struct reentrant {
  PJRT_Event *e;
  cb_state_t s;
} reentrant_t;

static void destroy_in_callback(PJRT_Error *error, void *arg) {
  reentrant_t *r = arg;
  pjrt_test_take_error(api, error, NULL, 0);
  PJRT_Event_IsReady_Args ir = {.struct_size = PJRT_Event_IsReady_Args_STRUCT_SIZE, .event = r->e};
  PJRT_CHECK(api, api->PJRT_Event_IsReady(&ir));
  assert_true(ir.is_ready);
  on_ready(NULL, &r->s);
}

static void test_event_callback_reenters(void **state) {
  (void)state;
  reentrant_t r;
  cb_init(&r.s);
  r.e = event_create();
  PJRT_Event_OnReady_Args on = {.struct_size = PJRT_Event_OnReady_Args_STRUCT_SIZE,
                                .event = r.e,
                                .callback = destroy_in_callback,
                                .user_arg = &r};
  PJRT_CHECK(api, api->PJRT_Event_OnReady(&on));
  PJRT_Event_Set_Args set = {.struct_size = PJRT_Event_Set_Args_STRUCT_SIZE,
                             .event = r.e,
                             .error_code = PJRT_Error_Code_OK};
  PJRT_CHECK(api, api->PJRT_Event_Set(&set));
  cb_wait(&r.s, 1);
  event_destroy(r.e);
}

static void test_event_errors(void **state) {
  (void)state;
  PJRT_EXPECT_ERROR(api, api->PJRT_Event_Create(NULL), PJRT_Error_Code_INVALID_ARGUMENT, "");
  PJRT_Event_IsReady_Args ir = {.struct_size = PJRT_Event_IsReady_Args_STRUCT_SIZE};
  PJRT_EXPECT_ERROR(api, api->PJRT_Event_IsReady(&ir), PJRT_Error_Code_INVALID_ARGUMENT, "event");
  PJRT_Event_Await_Args aw = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE};
  PJRT_EXPECT_ERROR(api, api->PJRT_Event_Await(&aw), PJRT_Error_Code_INVALID_ARGUMENT, "event");
  PJRT_Event *e = event_create();
  PJRT_Event_OnReady_Args on = {.struct_size = PJRT_Event_OnReady_Args_STRUCT_SIZE, .event = e};
  PJRT_EXPECT_ERROR(api, api->PJRT_Event_OnReady(&on), PJRT_Error_Code_INVALID_ARGUMENT,
                    "callback");
  on.struct_size = offsetof(PJRT_Event_OnReady_Args, callback);
  PJRT_EXPECT_ERROR(api, api->PJRT_Event_OnReady(&on), PJRT_Error_Code_INVALID_ARGUMENT,
                    "struct_size");
  PJRT_Event_Set_Args set = {.struct_size = PJRT_Event_Set_Args_STRUCT_SIZE,
                             .event = e,
                             .error_code = (PJRT_Error_Code)99};
  PJRT_EXPECT_ERROR(api, api->PJRT_Event_Set(&set), PJRT_Error_Code_INVALID_ARGUMENT, "99");
  /* Destroying an event nobody set is fine (Set afterwards would be the caller's error). */
  event_destroy(e);
  PJRT_Event_Destroy_Args d = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE};
  PJRT_CHECK(api, api->PJRT_Event_Destroy(&d));
}

/* The callback thread's kernel id, read inside a callback. */
typedef struct tid_state {
  cb_state_t s;
  long tid;
  PJRT_Client *destroy; /* destroyed inside the callback when set */
} tid_state_t;

static void record_tid(PJRT_Error *error, void *arg) {
  tid_state_t *t = arg;
  t->tid = (long)syscall(SYS_gettid);
  if (t->destroy) pjrt_test_client_destroy(api, t->destroy); /* the last client, here */
  on_ready(error, &t->s);
}

/* Sets a new event with record_tid registered and waits for the callback. */
static void callback_on_new_event(tid_state_t *t) {
  cb_init(&t->s);
  PJRT_Event *e = event_create();
  PJRT_Event_OnReady_Args on = {.struct_size = PJRT_Event_OnReady_Args_STRUCT_SIZE,
                                .event = e,
                                .callback = record_tid,
                                .user_arg = t};
  PJRT_CHECK(api, api->PJRT_Event_OnReady(&on));
  PJRT_Event_Set_Args set = {
      .struct_size = PJRT_Event_Set_Args_STRUCT_SIZE, .event = e, .error_code = PJRT_Error_Code_OK};
  PJRT_CHECK(api, api->PJRT_Event_Set(&set));
  cb_wait(&t->s, 1);
  event_destroy(e);
}

static bool task_alive(long tid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%ld", tid);
  return access(path, F_OK) == 0;
}

/* Whether thread `tid` is gone within 2 s. A joined thread's /proc entry goes a moment after
 * pthread_join returns (the kernel wakes the joiner before it unhashes the task: the fresh
 * clone of eb18b37 saw it still there once); a parked thread never goes. */
static bool task_gone(long tid) {
  for (int i = 0; i < 2000 && task_alive(tid); i++) usleep(1000);
  return !task_alive(tid);
}

/* When the last client is destroyed the callback thread is joined (no plugin thread outlives
 * the clients: LeakSanitizer's exit check once crashed walking a parked one), the next
 * callback starts it again, and a callback that destroys the last client itself does not
 * wait for its own thread. */
static void test_last_client_destroy_joins_the_callback_thread(void **state) {
  (void)state;
  PJRT_Client *c = cpu_client(1);
  tid_state_t t = {0};
  callback_on_new_event(&t);
  long first = t.tid;
  assert_true(first > 0 && task_alive(first));
  pjrt_test_client_destroy(api, c);
  assert_true(task_gone(first));   /* joined */
  callback_on_new_event(&t);       /* no client: the thread starts again */
  assert_true(t.tid != first && task_alive(t.tid));
  long second = t.tid;
  t.destroy = cpu_client(1);
  callback_on_new_event(&t); /* destroys the last client on the callback thread */
  assert_int_equal(t.tid, second);
  assert_true(task_alive(second)); /* not joined from itself */
  c = cpu_client(1);
  pjrt_test_client_destroy(api, c); /* the next last client joins it */
  assert_true(task_gone(second));
}

int main(void) {
  api = pjrt_test_load();
  if (!api) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_and_initialize),
      cmocka_unit_test(test_plugin_attributes),
      cmocka_unit_test(test_client_create_options),
      cmocka_unit_test(test_client_environment_defaults),
      cmocka_unit_test(test_client_platform),
      cmocka_unit_test(test_devices_host),
      cmocka_unit_test(test_topology),
      cmocka_unit_test(test_devices_cuda),
      cmocka_unit_test(test_memory_user_data),
      cmocka_unit_test(test_default_device_assignment),
      cmocka_unit_test(test_event_create_set_ok),
      cmocka_unit_test(test_event_set_error),
      cmocka_unit_test(test_event_await_blocks),
      cmocka_unit_test(test_event_callback_reenters),
      cmocka_unit_test(test_event_errors),
      cmocka_unit_test(test_last_client_destroy_joins_the_callback_thread),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
