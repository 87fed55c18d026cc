/* The PJRT table as a client built against OpenXLA's pjrt_c_api.h (not kiln's) sees it:
 * libkiln_pjrt.so loaded with dlopen(RTLD_LOCAL), GetPjrtApi() a PJRT_Api of the 0.114 size and
 * version, all 138 function slots non-NULL (walked as an array and by name), every slot's
 * answer to a NULL or too-small args struct an INVALID_ARGUMENT (or, for what kiln does not
 * offer, UNIMPLEMENTED) error naming the function, and every error's 0.107 function table
 * agreeing with the API's PJRT_Error_* entries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "pjrt_test_util.h"

/* The 138 slots of PJRT_Api 0.114 in table order, written out from OpenXLA's header: the two
 * that return nothing, then the 136 that return a PJRT_Error*. The test checks that the list
 * is contiguous and covers the whole table. */
// clang-format off
#define PJRT_ABI_VOID_SLOTS(X) X(PJRT_Error_Destroy) X(PJRT_Error_Message)
#define PJRT_ABI_ERROR_SLOTS(X) \
  X(PJRT_Error_GetCode) X(PJRT_Plugin_Initialize) \
  X(PJRT_Plugin_Attributes) X(PJRT_Event_Destroy) \
  X(PJRT_Event_IsReady) X(PJRT_Event_Error) \
  X(PJRT_Event_Await) X(PJRT_Event_OnReady) \
  X(PJRT_Client_Create) X(PJRT_Client_Destroy) \
  X(PJRT_Client_PlatformName) X(PJRT_Client_ProcessIndex) \
  X(PJRT_Client_PlatformVersion) X(PJRT_Client_Devices) \
  X(PJRT_Client_AddressableDevices) X(PJRT_Client_LookupDevice) \
  X(PJRT_Client_LookupAddressableDevice) X(PJRT_Client_AddressableMemories) \
  X(PJRT_Client_Compile) X(PJRT_Client_DefaultDeviceAssignment) \
  X(PJRT_Client_BufferFromHostBuffer) X(PJRT_DeviceDescription_Id) \
  X(PJRT_DeviceDescription_ProcessIndex) X(PJRT_DeviceDescription_Attributes) \
  X(PJRT_DeviceDescription_Kind) X(PJRT_DeviceDescription_DebugString) \
  X(PJRT_DeviceDescription_ToString) X(PJRT_Device_GetDescription) \
  X(PJRT_Device_IsAddressable) X(PJRT_Device_LocalHardwareId) \
  X(PJRT_Device_AddressableMemories) X(PJRT_Device_DefaultMemory) \
  X(PJRT_Device_MemoryStats) X(PJRT_Memory_Id) \
  X(PJRT_Memory_Kind) X(PJRT_Memory_DebugString) \
  X(PJRT_Memory_ToString) X(PJRT_Memory_AddressableByDevices) \
  X(PJRT_Executable_Destroy) X(PJRT_Executable_Name) \
  X(PJRT_Executable_NumReplicas) X(PJRT_Executable_NumPartitions) \
  X(PJRT_Executable_NumOutputs) X(PJRT_Executable_SizeOfGeneratedCodeInBytes) \
  X(PJRT_Executable_GetCostAnalysis) X(PJRT_Executable_OutputMemoryKinds) \
  X(PJRT_Executable_OptimizedProgram) X(PJRT_Executable_Serialize) \
  X(PJRT_LoadedExecutable_Destroy) X(PJRT_LoadedExecutable_GetExecutable) \
  X(PJRT_LoadedExecutable_AddressableDevices) X(PJRT_LoadedExecutable_Delete) \
  X(PJRT_LoadedExecutable_IsDeleted) X(PJRT_LoadedExecutable_Execute) \
  X(PJRT_Executable_DeserializeAndLoad) X(PJRT_LoadedExecutable_Fingerprint) \
  X(PJRT_Buffer_Destroy) X(PJRT_Buffer_ElementType) \
  X(PJRT_Buffer_Dimensions) X(PJRT_Buffer_UnpaddedDimensions) \
  X(PJRT_Buffer_DynamicDimensionIndices) X(PJRT_Buffer_GetMemoryLayout) \
  X(PJRT_Buffer_OnDeviceSizeInBytes) X(PJRT_Buffer_Device) \
  X(PJRT_Buffer_Memory) X(PJRT_Buffer_Delete) \
  X(PJRT_Buffer_IsDeleted) X(PJRT_Buffer_CopyToDevice) \
  X(PJRT_Buffer_ToHostBuffer) X(PJRT_Buffer_IsOnCpu) \
  X(PJRT_Buffer_ReadyEvent) X(PJRT_Buffer_UnsafePointer) \
  X(PJRT_Buffer_IncreaseExternalReferenceCount) X(PJRT_Buffer_DecreaseExternalReferenceCount) \
  X(PJRT_Buffer_OpaqueDeviceMemoryDataPointer) X(PJRT_CopyToDeviceStream_Destroy) \
  X(PJRT_CopyToDeviceStream_AddChunk) X(PJRT_CopyToDeviceStream_TotalBytes) \
  X(PJRT_CopyToDeviceStream_GranuleSize) X(PJRT_CopyToDeviceStream_CurrentBytes) \
  X(PJRT_TopologyDescription_Create) X(PJRT_TopologyDescription_Destroy) \
  X(PJRT_TopologyDescription_PlatformName) X(PJRT_TopologyDescription_PlatformVersion) \
  X(PJRT_TopologyDescription_GetDeviceDescriptions) X(PJRT_TopologyDescription_Serialize) \
  X(PJRT_TopologyDescription_Attributes) X(PJRT_Compile) \
  X(PJRT_Executable_OutputElementTypes) X(PJRT_Executable_OutputDimensions) \
  X(PJRT_Buffer_CopyToMemory) X(PJRT_Client_CreateViewOfDeviceBuffer) \
  X(PJRT_Executable_Fingerprint) X(PJRT_Client_TopologyDescription) \
  X(PJRT_Executable_GetCompiledMemoryStats) X(PJRT_Memory_Kind_Id) \
  X(PJRT_ExecuteContext_Create) X(PJRT_ExecuteContext_Destroy) \
  X(PJRT_Buffer_CopyRawToHost) X(PJRT_AsyncHostToDeviceTransferManager_Destroy) \
  X(PJRT_AsyncHostToDeviceTransferManager_TransferData) X(PJRT_Client_CreateBuffersForAsyncHostToDevice) \
  X(PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer) X(PJRT_AsyncHostToDeviceTransferManager_Device) \
  X(PJRT_AsyncHostToDeviceTransferManager_BufferCount) X(PJRT_AsyncHostToDeviceTransferManager_BufferSize) \
  X(PJRT_AsyncHostToDeviceTransferManager_SetBufferError) X(PJRT_AsyncHostToDeviceTransferManager_AddMetadata) \
  X(PJRT_Client_DmaMap) X(PJRT_Client_DmaUnmap) \
  X(PJRT_Client_CreateUninitializedBuffer) X(PJRT_Client_UpdateGlobalProcessInfo) \
  X(PJRT_TopologyDescription_Deserialize) X(PJRT_Client_CreateAliasBuffer) \
  X(PJRT_Client_FulfillAliasBuffer) X(PJRT_LoadedExecutable_GetDeviceAssignment) \
  X(PJRT_Client_CreateErrorBuffer) X(PJRT_AsyncHostToDeviceTransferManager_TransferLiteral) \
  X(PJRT_Buffer_CopyRawToHostFuture) X(PJRT_Device_PoisonExecution) \
  X(PJRT_Device_CreateAsyncTrackingEvent) X(PJRT_AsyncTrackingEvent_Destroy) \
  X(PJRT_Executable_GetCompileOptions) X(PJRT_Buffer_DonateWithControlDependency) \
  X(PJRT_Event_Create) X(PJRT_Event_Set) \
  X(PJRT_Device_GetAttributes) X(PJRT_Client_Load) \
  X(PJRT_LoadedExecutable_AddressableDeviceLogicalIds) X(PJRT_Buffer_Bitcast) \
  X(PJRT_Error_ForEachPayload) X(PJRT_TopologyDescription_Fingerprint) \
  X(PJRT_Executable_ParameterMemoryKinds) X(PJRT_Device_ClearMemoryStats) \
  X(PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace) X(PJRT_TopologyDescription_GetMemorySpaceKindIds)
// clang-format on

typedef struct slot_info {
  const char *name;
  size_t offset;
} slot_info_t;

#define SLOT_INFO(name) {#name, offsetof(PJRT_Api, name)},
static const slot_info_t g_slots[] = {PJRT_ABI_VOID_SLOTS(SLOT_INFO)
                                          PJRT_ABI_ERROR_SLOTS(SLOT_INFO)};
#undef SLOT_INFO
enum { kNumSlots = sizeof(g_slots) / sizeof(g_slots[0]) };

typedef void (*any_fn_t)(void);

static const PJRT_Api *load_or_skip(void) {
  const PJRT_Api *api = pjrt_test_load();
  if (!api) fail_msg("the plugin did not load (see above)");
  return api;
}

static void test_table_has_the_0_114_size_and_version(void **state) {
  (void)state;
  const PJRT_Api *api = load_or_skip();
  assert_int_equal(sizeof(PJRT_Api), 1144);
  assert_int_equal(PJRT_Api_STRUCT_SIZE, sizeof(PJRT_Api));
  assert_int_equal(api->struct_size, PJRT_Api_STRUCT_SIZE);
  assert_int_equal(api->pjrt_api_version.struct_size, PJRT_Api_Version_STRUCT_SIZE);
  assert_int_equal(api->pjrt_api_version.major_version, PJRT_API_MAJOR);
  assert_int_equal(api->pjrt_api_version.minor_version, PJRT_API_MINOR);
  assert_int_equal(api->pjrt_api_version.major_version, 0);
  assert_int_equal(api->pjrt_api_version.minor_version, 114);
}

/* Loaded RTLD_LOCAL, the plugin adds nothing to the global scope, and a second dlopen of the
 * same path hands back the same table. */
static void test_rtld_local_load_exports_nothing_globally(void **state) {
  (void)state;
  const PJRT_Api *api = load_or_skip();
  assert_null(dlsym(RTLD_DEFAULT, "GetPjrtApi"));
  const char *path = getenv("KILN_PJRT_PLUGIN");
  if (!path || !*path) path = KILN_PJRT_PLUGIN;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(h);
  const PJRT_Api *(*get)(void) = (const PJRT_Api *(*)(void))dlsym(h, "GetPjrtApi");
  assert_non_null(get);
  assert_ptr_equal(get(), api);
  assert_ptr_equal(get(), get());
  dlclose(h);
}

/* The named list covers the table: contiguous pointer-sized slots from the first to the end. */
static void test_slot_list_covers_the_whole_table(void **state) {
  (void)state;
  assert_int_equal(kNumSlots, 138);
  assert_int_equal(g_slots[0].offset, offsetof(PJRT_Api, PJRT_Error_Destroy));
  assert_int_equal(g_slots[0].offset, 40);
  for (size_t i = 0; i < kNumSlots; i++)
    assert_int_equal(g_slots[i].offset, g_slots[0].offset + i * sizeof(any_fn_t));
  assert_int_equal(g_slots[kNumSlots - 1].offset + sizeof(any_fn_t), sizeof(PJRT_Api));
}

/* Walked as an array of function pointers between the first slot and struct_size. */
static void test_every_slot_is_non_null_as_an_array(void **state) {
  (void)state;
  const PJRT_Api *api = load_or_skip();
  const size_t first = offsetof(PJRT_Api, PJRT_Error_Destroy);
  const size_t n = (api->struct_size - first) / sizeof(any_fn_t);
  assert_int_equal(n, 138);
  const unsigned char *base = (const unsigned char *)api;
  size_t null_slots = 0;
  for (size_t i = 0; i < n; i++) {
    any_fn_t fn;
    memcpy(&fn, base + first + i * sizeof(fn), sizeof(fn));
    if (!fn) {
      fprintf(stderr, "slot %zu (%s) is NULL\n", i, g_slots[i].name);
      null_slots++;
    }
  }
  assert_int_equal(null_slots, 0);
}

/* And by name, through the header's member of each. */
static void test_every_slot_is_non_null_by_name(void **state) {
  (void)state;
  const PJRT_Api *api = load_or_skip();
  size_t seen = 0;
#define CHECK_NAMED(name)                                 \
  if (!api->name) fail_msg("PJRT_Api." #name " is NULL"); \
  seen++;
  PJRT_ABI_VOID_SLOTS(CHECK_NAMED)
  PJRT_ABI_ERROR_SLOTS(CHECK_NAMED)
#undef CHECK_NAMED
  assert_int_equal(seen, 138);
}

static void count_payload(const char *key, size_t key_size, const char *value, size_t value_size,
                          void *user_arg) {
  (void)key;
  (void)key_size;
  (void)value;
  (void)value_size;
  (*(int *)user_arg)++;
}

/* The error's own function table (0.107) answers as the API's entries do. Destroys `e`,
 * through the table when `destroy_through_table`, else through PJRT_Error_Destroy. Returns the
 * code and copies the message. */
static PJRT_Error_Code check_error_both_ways(const PJRT_Api *api, PJRT_Error *e, char *msg,
                                             size_t msg_size, bool destroy_through_table) {
  assert_non_null(e);
  const PJRT_Error_FunctionTable *t = e->vtable;
  assert_non_null(t);
  assert_true(t->struct_size >= PJRT_Error_FunctionTable_STRUCT_SIZE);
  assert_true(t->instance_size >= sizeof(PJRT_Error));
  assert_non_null(t->destroy);
  assert_non_null(t->message);
  assert_non_null(t->get_code);
  assert_non_null(t->for_each_payload);

  PJRT_Error_GetCode_Args ga = {.struct_size = PJRT_Error_GetCode_Args_STRUCT_SIZE, .error = e};
  assert_null(api->PJRT_Error_GetCode(&ga));
  assert_int_equal(t->get_code(e), ga.code);

  PJRT_Error_Message_Args ma = {.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE, .error = e};
  api->PJRT_Error_Message(&ma);
  const char *tm = NULL;
  size_t tm_size = 0;
  t->message(e, &tm, &tm_size);
  assert_non_null(ma.message);
  assert_non_null(tm);
  assert_int_equal(tm_size, ma.message_size);
  assert_memory_equal(tm, ma.message, ma.message_size);
  snprintf(msg, msg_size, "%.*s", (int)ma.message_size, ma.message);

  int table_payloads = 0, api_payloads = 0;
  t->for_each_payload(e, count_payload, &table_payloads);
  PJRT_Error_ForEachPayload_Args pa = {.struct_size = PJRT_Error_ForEachPayload_Args_STRUCT_SIZE,
                                       .error = e,
                                       .visitor = count_payload,
                                       .user_arg = &api_payloads};
  assert_null(api->PJRT_Error_ForEachPayload(&pa));
  assert_int_equal(table_payloads, api_payloads);

  PJRT_Error_Code code = ga.code;
  if (destroy_through_table) {
    t->destroy(e);
  } else {
    PJRT_Error_Destroy_Args da = {.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE, .error = e};
    api->PJRT_Error_Destroy(&da);
  }
  return code;
}

/* What one slot answered to a NULL args struct: needed to judge its answer to short ones. */
typedef struct null_answer {
  const char *name;
  PJRT_Error_Code code;
} null_answer_t;

static null_answer_t g_null_answers[kNumSlots];

/* Every slot that returns an error, called with NULL args: INVALID_ARGUMENT (kiln checked the
 * args) or UNIMPLEMENTED (kiln does not offer it), with a message naming the function. */
static void test_null_args_are_rejected_naming_the_function(void **state) {
  (void)state;
  const PJRT_Api *api = load_or_skip();
  size_t i = 0, implemented = 0, failures = 0;
  char msg[2048];
#define CALL_NULL(fn)                                                                          \
  {                                                                                            \
    PJRT_Error *e = api->fn(NULL);                                                             \
    if (!e) fail_msg(#fn "(NULL) returned no error");                                          \
    PJRT_Error_Code code = check_error_both_ways(api, e, msg, sizeof(msg), i % 2 == 1);        \
    g_null_answers[i] = (null_answer_t){#fn, code};                                            \
    if (code == PJRT_Error_Code_INVALID_ARGUMENT) implemented++;                               \
    if ((code != PJRT_Error_Code_INVALID_ARGUMENT && code != PJRT_Error_Code_UNIMPLEMENTED) || \
        !strstr(msg, #fn)) {                                                                   \
      fprintf(stderr, #fn "(NULL): code %d, message \"%s\"\n", (int)code, msg);                \
      failures++;                                                                              \
    }                                                                                          \
    i++;                                                                                       \
  }
  PJRT_ABI_ERROR_SLOTS(CALL_NULL)
#undef CALL_NULL
  printf(
      "%zu of %zu error-returning slots check their args (INVALID_ARGUMENT on NULL); "
      "the rest answer UNIMPLEMENTED\n",
      implemented, i);
  assert_int_equal(i, 136);
  assert_int_equal(failures, 0);
}

/* An args struct whose struct_size does not even cover the header (0, 8, 15 bytes): every
 * slot that checks its args rejects it with INVALID_ARGUMENT naming the function, and writes
 * nothing past what struct_size covers; the others still answer UNIMPLEMENTED. */
static void test_short_args_are_rejected_and_not_written(void **state) {
  (void)state;
  const PJRT_Api *api = load_or_skip();
  if (!g_null_answers[0].name) test_null_args_are_rejected_naming_the_function(state);
  static const size_t sizes[] = {0, 8, 15};
  _Alignas(16) unsigned char buf[1024];
  size_t failures = 0;
  char msg[2048];
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
    size_t i = 0;
#define CALL_SHORT(fn)                                                                        \
  {                                                                                           \
    memset(buf, 0xA5, sizeof(buf));                                                           \
    size_t ss = sizes[s];                                                                     \
    memcpy(buf, &ss, sizeof(ss));                                                             \
    PJRT_Error *e = api->fn((void *)buf);                                                     \
    if (!e) fail_msg(#fn " with struct_size %zu returned no error", ss);                      \
    PJRT_Error_Code code = check_error_both_ways(api, e, msg, sizeof(msg), (i + s) % 2 == 0); \
    PJRT_Error_Code want = g_null_answers[i].code == PJRT_Error_Code_UNIMPLEMENTED            \
                               ? PJRT_Error_Code_UNIMPLEMENTED                                \
                               : PJRT_Error_Code_INVALID_ARGUMENT;                            \
    bool untouched = true;                                                                    \
    for (size_t b = sizeof(size_t); b < sizeof(buf); b++) untouched &= buf[b] == 0xA5;        \
    if (code != want || !strstr(msg, #fn) || !untouched) {                                    \
      fprintf(stderr, #fn " with struct_size %zu: code %d (want %d), message \"%s\"%s\n", ss, \
              (int)code, (int)want, msg, untouched ? "" : ", wrote past struct_size");        \
      failures++;                                                                             \
    }                                                                                         \
    i++;                                                                                      \
  }
    PJRT_ABI_ERROR_SLOTS(CALL_SHORT)
#undef CALL_SHORT
  }
  assert_int_equal(failures, 0);
}

/* The two slots that return nothing take NULL and short structs without crashing, and
 * PJRT_Error_Destroy takes a NULL error. */
static void test_void_slots_take_null_and_short_args(void **state) {
  (void)state;
  const PJRT_Api *api = load_or_skip();
  api->PJRT_Error_Destroy(NULL);
  api->PJRT_Error_Message(NULL);
  PJRT_Error_Destroy_Args da = {.struct_size = 0};
  api->PJRT_Error_Destroy(&da);
  da.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
  da.error = NULL;
  api->PJRT_Error_Destroy(&da);
  PJRT_Error_Message_Args ma = {.struct_size = 0, .message = NULL, .message_size = 12345};
  api->PJRT_Error_Message(&ma);
  assert_null(ma.message);
  assert_int_equal(ma.message_size, 12345);
}

/* The extension chain ends and each link is well formed. */
static void test_extension_chain_is_well_formed(void **state) {
  (void)state;
  const PJRT_Api *api = load_or_skip();
  size_t n = 0;
  for (const PJRT_Extension_Base *x = api->extension_start; x; x = x->next) {
    assert_true(n++ < 64);
    assert_true(x->struct_size >= PJRT_Extension_Base_STRUCT_SIZE);
    assert_true((int)x->type >= 0 && (int)x->type <= (int)PJRT_Extension_Type_XlaTransform);
    printf("extension type %d, %zu bytes\n", (int)x->type, x->struct_size);
  }
  printf("%zu extensions\n", n);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_has_the_0_114_size_and_version),
      cmocka_unit_test(test_rtld_local_load_exports_nothing_globally),
      cmocka_unit_test(test_slot_list_covers_the_whole_table),
      cmocka_unit_test(test_every_slot_is_non_null_as_an_array),
      cmocka_unit_test(test_every_slot_is_non_null_by_name),
      cmocka_unit_test(test_null_args_are_rejected_naming_the_function),
      cmocka_unit_test(test_short_args_are_rejected_and_not_written),
      cmocka_unit_test(test_void_slots_take_null_and_short_args),
      cmocka_unit_test(test_extension_chain_is_well_formed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
