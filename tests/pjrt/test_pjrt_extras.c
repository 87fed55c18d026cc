/* The slots of plugin/pjrt_extras.c through the table (OpenXLA's header): DmaMap/DmaUnmap,
 * async tracking events, PoisonExecution, Buffer_Bitcast, topology Serialize/Fingerprint, and
 * AsyncHostToDeviceTransferManager_TransferLiteral and Buffer_DonateWithControlDependency
 * (plugin/pjrt_buffer.c), each
 * with its error paths (NULL args, short structs, NULL or wrong handles). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "pjrt_exec_util.h"
#include "pjrt_test_util.h"

static const PJRT_Api *g_api;

static int setup(void **state) {
  (void)state;
  g_api = pjrt_test_load();
  return g_api ? 0 : -1;
}

static void test_dma_map_records_mappings_and_refuses_overlaps(void **state) {
  (void)state;
  const PJRT_Api *api = g_api;
  PJRT_Client *c = pjrt_exec_client(api, NULL);
  static char mem[4096];
  PJRT_Client_DmaMap_Args m = {
      .struct_size = PJRT_Client_DmaMap_Args_STRUCT_SIZE, .client = c, .data = mem, .size = 1024};
  PJRT_CHECK(api, api->PJRT_Client_DmaMap(&m));
  /* Overlapping the first mapping; then a disjoint one is fine. */
  m.data = mem + 512;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_DmaMap(&m), PJRT_Error_Code_INVALID_ARGUMENT, "overlaps");
  m.data = mem + 2048;
  PJRT_CHECK(api, api->PJRT_Client_DmaMap(&m));
  PJRT_Client_DmaUnmap_Args u = {
      .struct_size = PJRT_Client_DmaUnmap_Args_STRUCT_SIZE, .client = c, .data = mem + 2048};
  PJRT_CHECK(api, api->PJRT_Client_DmaUnmap(&u));
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_DmaUnmap(&u), PJRT_Error_Code_INVALID_ARGUMENT,
                    "not the start of a mapping");
  /* Errors: NULL args, a short struct, no client, no data. */
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_DmaMap(NULL), PJRT_Error_Code_INVALID_ARGUMENT,
                    "PJRT_Client_DmaMap");
  m.struct_size = offsetof(PJRT_Client_DmaMap_Args, size);
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_DmaMap(&m), PJRT_Error_Code_INVALID_ARGUMENT,
                    "struct_size");
  m.struct_size = PJRT_Client_DmaMap_Args_STRUCT_SIZE;
  m.client = NULL;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_DmaMap(&m), PJRT_Error_Code_INVALID_ARGUMENT,
                    "client is NULL");
  m.client = c;
  m.data = NULL;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_DmaMap(&m), PJRT_Error_Code_INVALID_ARGUMENT,
                    "data is NULL");
  u.struct_size = offsetof(PJRT_Client_DmaUnmap_Args, data);
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_DmaUnmap(&u), PJRT_Error_Code_INVALID_ARGUMENT,
                    "struct_size");
  /* The first mapping stays: destroying the client drops it (LeakSanitizer checks). */
  pjrt_test_client_destroy(api, c);
}

static void test_tracking_events_and_poisoning(void **state) {
  (void)state;
  const PJRT_Api *api = g_api;
  PJRT_Client *c = pjrt_exec_client(api, NULL);
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_Device_CreateAsyncTrackingEvent_Args e = {
      .struct_size = PJRT_Device_CreateAsyncTrackingEvent_Args_STRUCT_SIZE,
      .device = d,
      .description = "step 7",
      .description_size = 6};
  PJRT_CHECK(api, api->PJRT_Device_CreateAsyncTrackingEvent(&e));
  assert_non_null(e.event);
  PJRT_AsyncTrackingEvent_Destroy_Args x = {
      .struct_size = PJRT_AsyncTrackingEvent_Destroy_Args_STRUCT_SIZE, .event = e.event};
  PJRT_CHECK(api, api->PJRT_AsyncTrackingEvent_Destroy(&x));
  e.device = NULL;
  PJRT_EXPECT_ERROR(api, api->PJRT_Device_CreateAsyncTrackingEvent(&e),
                    PJRT_Error_Code_INVALID_ARGUMENT, "device is NULL");
  assert_null(e.event);
  PJRT_EXPECT_ERROR(api, api->PJRT_AsyncTrackingEvent_Destroy(NULL),
                    PJRT_Error_Code_INVALID_ARGUMENT, "PJRT_AsyncTrackingEvent_Destroy");

  PJRT_Device_PoisonExecution_Args p = {.struct_size = PJRT_Device_PoisonExecution_Args_STRUCT_SIZE,
                                        .device = d,
                                        .launch_id = 3,
                                        .error_code = PJRT_Error_Code_ABORTED,
                                        .error_message = "stop",
                                        .error_message_size = 4,
                                        .poisoned = true};
  PJRT_CHECK(api, api->PJRT_Device_PoisonExecution(&p));
  assert_false(p.poisoned); /* executes complete before they return: nothing pending */
  p.error_code = PJRT_Error_Code_OK;
  PJRT_EXPECT_ERROR(api, api->PJRT_Device_PoisonExecution(&p), PJRT_Error_Code_INVALID_ARGUMENT,
                    "error_code is OK");
  p.error_code = PJRT_Error_Code_ABORTED;
  p.device = NULL;
  PJRT_EXPECT_ERROR(api, api->PJRT_Device_PoisonExecution(&p), PJRT_Error_Code_INVALID_ARGUMENT,
                    "device is NULL");
  p.struct_size = offsetof(PJRT_Device_PoisonExecution_Args, poisoned);
  PJRT_EXPECT_ERROR(api, api->PJRT_Device_PoisonExecution(&p), PJRT_Error_Code_INVALID_ARGUMENT,
                    "struct_size");
  pjrt_test_client_destroy(api, c);
}

static void test_bitcast_shares_the_memory_under_a_new_type(void **state) {
  (void)state;
  const PJRT_Api *api = g_api;
  PJRT_Client *c = pjrt_exec_client(api, NULL);
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  const float data[6] = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 7.0f};
  const int64_t dims[2] = {2, 3};
  PJRT_Buffer *b = pjrt_exec_buffer(api, c, d, data, PJRT_Buffer_Type_F32, dims, 2);
  const int64_t flat[1] = {6};
  PJRT_Buffer_Bitcast_Args a = {.struct_size = PJRT_Buffer_Bitcast_Args_STRUCT_SIZE,
                                .buffer = b,
                                .element_type = PJRT_Buffer_Type_S32,
                                .dims = flat,
                                .num_dims = 1};
  PJRT_CHECK(api, api->PJRT_Buffer_Bitcast(&a));
  PJRT_Buffer *s = a.out_buffer;
  assert_non_null(s);
  /* Dropping the original keeps the shared memory alive for the bitcast buffer. */
  pjrt_exec_buffer_destroy(api, b);
  int32_t got[6];
  pjrt_exec_read(api, s, got, sizeof got);
  assert_memory_equal(got, data, sizeof got);
  PJRT_Buffer_ElementType_Args t = {.struct_size = PJRT_Buffer_ElementType_Args_STRUCT_SIZE,
                                    .buffer = s};
  PJRT_CHECK(api, api->PJRT_Buffer_ElementType(&t));
  assert_int_equal(t.type, PJRT_Buffer_Type_S32);
  /* Errors: another byte size, a sub-byte type, a deleted buffer, NULL, a short struct. */
  const int64_t seven[1] = {7};
  a.buffer = s;
  a.dims = seven;
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_Bitcast(&a), PJRT_Error_Code_INVALID_ARGUMENT,
                    "must be equal");
  a.dims = flat;
  a.element_type = PJRT_Buffer_Type_S4;
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_Bitcast(&a), PJRT_Error_Code_UNIMPLEMENTED, "sub-byte");
  a.element_type = PJRT_Buffer_Type_U32;
  PJRT_Buffer_Delete_Args del = {.struct_size = PJRT_Buffer_Delete_Args_STRUCT_SIZE, .buffer = s};
  PJRT_CHECK(api, api->PJRT_Buffer_Delete(&del));
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_Bitcast(&a), PJRT_Error_Code_FAILED_PRECONDITION,
                    "deleted");
  a.buffer = NULL;
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_Bitcast(&a), PJRT_Error_Code_INVALID_ARGUMENT,
                    "buffer is NULL");
  a.struct_size = offsetof(PJRT_Buffer_Bitcast_Args, out_buffer);
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_Bitcast(&a), PJRT_Error_Code_INVALID_ARGUMENT,
                    "struct_size");
  pjrt_exec_buffer_destroy(api, s);
  pjrt_test_client_destroy(api, c);
}

static PJRT_TopologyDescription *topology_of(const PJRT_Api *api, PJRT_Client *c) {
  PJRT_Client_TopologyDescription_Args t = {
      .struct_size = PJRT_Client_TopologyDescription_Args_STRUCT_SIZE, .client = c};
  PJRT_CHECK(api, api->PJRT_Client_TopologyDescription(&t));
  return t.topology;
}

static void test_topology_serializes_and_fingerprints(void **state) {
  (void)state;
  const PJRT_Api *api = g_api;
  PJRT_NamedValue two[3] = {pjrt_test_opt_string("platform", "cpu"),
                            pjrt_test_opt_string("cache_dir", ""),
                            pjrt_test_opt_int("num_devices", 2)};
  PJRT_Client *c1 = pjrt_exec_client(api, NULL), *c1b = pjrt_exec_client(api, NULL);
  PJRT_Client *c2 = pjrt_test_client(api, two, 3);
  PJRT_TopologyDescription_Serialize_Args s = {
      .struct_size = PJRT_TopologyDescription_Serialize_Args_STRUCT_SIZE,
      .topology = topology_of(api, c2)};
  PJRT_CHECK(api, api->PJRT_TopologyDescription_Serialize(&s));
  assert_non_null(s.serialized_topology_deleter);
  char text[1024];
  snprintf(text, sizeof text, "%.*s", (int)s.serialized_bytes_size, s.serialized_bytes);
  assert_non_null(strstr(text, "platform cpu"));
  assert_non_null(strstr(text, "devices 2"));
  assert_non_null(strstr(text, "device 1 process 0"));
  s.serialized_topology_deleter(s.serialized_topology);
  uint64_t fp[3];
  PJRT_Client *cs[3] = {c1, c1b, c2};
  for (int i = 0; i < 3; i++) {
    PJRT_TopologyDescription_Fingerprint_Args f = {
        .struct_size = PJRT_TopologyDescription_Fingerprint_Args_STRUCT_SIZE,
        .topology = topology_of(api, cs[i])};
    PJRT_CHECK(api, api->PJRT_TopologyDescription_Fingerprint(&f));
    fp[i] = f.fingerprint;
  }
  assert_true(fp[0] == fp[1]); /* the same topology */
  assert_true(fp[0] != fp[2]); /* one device vs two */
  PJRT_TopologyDescription_Fingerprint_Args f = {
      .struct_size = PJRT_TopologyDescription_Fingerprint_Args_STRUCT_SIZE};
  PJRT_EXPECT_ERROR(api, api->PJRT_TopologyDescription_Fingerprint(&f),
                    PJRT_Error_Code_INVALID_ARGUMENT, "topology is NULL");
  s.topology = NULL;
  PJRT_EXPECT_ERROR(api, api->PJRT_TopologyDescription_Serialize(&s),
                    PJRT_Error_Code_INVALID_ARGUMENT, "topology is NULL");
  s.struct_size = offsetof(PJRT_TopologyDescription_Serialize_Args, serialized_topology);
  PJRT_EXPECT_ERROR(api, api->PJRT_TopologyDescription_Serialize(&s),
                    PJRT_Error_Code_INVALID_ARGUMENT, "struct_size");
  for (int i = 0; i < 3; i++) pjrt_test_client_destroy(api, cs[i]);
}

static void test_transfer_literal_fills_a_buffer_from_any_host_layout(void **state) {
  (void)state;
  const PJRT_Api *api = g_api;
  PJRT_Client *c = pjrt_exec_client(api, NULL);
  int64_t dims[2] = {2, 3};
  PJRT_AsyncHostToDeviceTransferManager *m =
      pjrt_exec_h2d_manager(api, c, PJRT_Buffer_Type_S32, dims, 2);
  /* The literal is column-major (minor_to_major {0, 1}): element (i, j) at j * 2 + i. */
  const int32_t col_major[6] = {1, 4, 2, 5, 3, 6};
  const int64_t m2m[2] = {0, 1};
  PJRT_Buffer_MemoryLayout layout = {.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE,
                                     .type = PJRT_Buffer_MemoryLayout_Type_Tiled};
  layout.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
  layout.tiled.minor_to_major = m2m;
  layout.tiled.minor_to_major_size = 2;
  PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args tl = {
      .struct_size = PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args_STRUCT_SIZE,
      .transfer_manager = m,
      .buffer_index = 0,
      .data = col_major,
      .shape_dims = dims,
      .shape_num_dims = 2,
      .shape_element_type = PJRT_Buffer_Type_F32,
      .shape_layout = &layout};
  /* Errors first: another element type, an index out of range, NULL, a short struct. */
  PJRT_EXPECT_ERROR(api, api->PJRT_AsyncHostToDeviceTransferManager_TransferLiteral(&tl),
                    PJRT_Error_Code_INVALID_ARGUMENT, "does not have buffer 0's shape");
  tl.shape_element_type = PJRT_Buffer_Type_S32;
  tl.buffer_index = 1;
  PJRT_EXPECT_ERROR(api, api->PJRT_AsyncHostToDeviceTransferManager_TransferLiteral(&tl),
                    PJRT_Error_Code_INVALID_ARGUMENT, "buffer_index 1");
  tl.buffer_index = 0;
  PJRT_EXPECT_ERROR(api, api->PJRT_AsyncHostToDeviceTransferManager_TransferLiteral(NULL),
                    PJRT_Error_Code_INVALID_ARGUMENT, "TransferLiteral");
  tl.struct_size =
      offsetof(PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args, done_with_h2d_transfer);
  PJRT_EXPECT_ERROR(api, api->PJRT_AsyncHostToDeviceTransferManager_TransferLiteral(&tl),
                    PJRT_Error_Code_INVALID_ARGUMENT, "struct_size");
  tl.struct_size = PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args_STRUCT_SIZE;
  PJRT_CHECK(api, api->PJRT_AsyncHostToDeviceTransferManager_TransferLiteral(&tl));
  pjrt_exec_await(api, tl.done_with_h2d_transfer);
  /* The literal completed the buffer: a second one is refused. */
  PJRT_EXPECT_ERROR(api, api->PJRT_AsyncHostToDeviceTransferManager_TransferLiteral(&tl),
                    PJRT_Error_Code_FAILED_PRECONDITION, "already completed");
  PJRT_Buffer *b = pjrt_exec_h2d_buffer(api, m);
  int32_t got[6];
  const int32_t row_major[6] = {1, 2, 3, 4, 5, 6};
  pjrt_exec_read(api, b, got, sizeof got);
  assert_memory_equal(got, row_major, sizeof got);
  pjrt_exec_buffer_destroy(api, b);
  pjrt_exec_h2d_destroy(api, m);
  pjrt_test_client_destroy(api, c);
}

static bool event_is_ready(const PJRT_Api *api, PJRT_Event *e) {
  PJRT_Event_IsReady_Args a = {.struct_size = PJRT_Event_IsReady_Args_STRUCT_SIZE, .event = e};
  PJRT_CHECK(api, api->PJRT_Event_IsReady(&a));
  return a.is_ready;
}

static void destroy_event(const PJRT_Api *api, PJRT_Event *e) {
  PJRT_Event_Destroy_Args a = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE, .event = e};
  PJRT_CHECK(api, api->PJRT_Event_Destroy(&a));
}

static void test_donate_with_control_dependency_waits_for_the_callback(void **state) {
  (void)state;
  const PJRT_Api *api = g_api;
  PJRT_Client *c = pjrt_exec_client(api, NULL);
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  const float data[4] = {1, 2, 3, 4};
  const int64_t dims[1] = {4};
  for (int fail = 0; fail < 2; fail++) {
    PJRT_Buffer *b = pjrt_exec_buffer(api, c, d, data, PJRT_Buffer_Type_F32, dims, 1);
    PJRT_Buffer_DonateWithControlDependency_Args a = {
        .struct_size = PJRT_Buffer_DonateWithControlDependency_Args_STRUCT_SIZE, .buffer = b};
    PJRT_CHECK(api, api->PJRT_Buffer_DonateWithControlDependency(&a));
    assert_non_null(a.out_buffer);
    assert_non_null(a.dependency_ready_callback);
    PJRT_Buffer_IsDeleted_Args del = {.struct_size = PJRT_Buffer_IsDeleted_Args_STRUCT_SIZE,
                                      .buffer = b};
    PJRT_CHECK(api, api->PJRT_Buffer_IsDeleted(&del));
    assert_true(del.is_deleted); /* the memory moved to the new buffer */
    PJRT_Buffer_DonateWithControlDependency_Args again = a;
    PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_DonateWithControlDependency(&again),
                      PJRT_Error_Code_FAILED_PRECONDITION, "deleted or donated");
    assert_null(again.out_buffer);
    PJRT_Buffer_ReadyEvent_Args re = {.struct_size = PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE,
                                      .buffer = a.out_buffer};
    PJRT_CHECK(api, api->PJRT_Buffer_ReadyEvent(&re));
    assert_false(event_is_ready(api, re.event));
    PJRT_Buffer_DonateWithControlDependency_Callback_Args cb = {
        .struct_size = sizeof cb,
        .callback_data = a.callback_data,
        .error_code = fail ? PJRT_Error_Code_ABORTED : PJRT_Error_Code_OK,
        .error_message = fail ? "producer died" : NULL,
        .error_message_size = fail ? 13 : 0};
    a.dependency_ready_callback(&cb);
    PJRT_Event_Await_Args aw = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE,
                                .event = re.event};
    if (!fail) {
      PJRT_CHECK(api, api->PJRT_Event_Await(&aw));
      float got[4];
      pjrt_exec_read(api, a.out_buffer, got, sizeof got);
      assert_memory_equal(got, data, sizeof got);
    } else {
      PJRT_EXPECT_ERROR(api, api->PJRT_Event_Await(&aw), PJRT_Error_Code_ABORTED, "producer died");
    }
    destroy_event(api, re.event);
    pjrt_exec_buffer_destroy(api, a.out_buffer);
    pjrt_exec_buffer_destroy(api, b);
    a.buffer = NULL;
    a.struct_size = PJRT_Buffer_DonateWithControlDependency_Args_STRUCT_SIZE;
    PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_DonateWithControlDependency(&a),
                      PJRT_Error_Code_INVALID_ARGUMENT, "buffer is NULL");
    a.struct_size = offsetof(PJRT_Buffer_DonateWithControlDependency_Args, out_buffer);
    PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_DonateWithControlDependency(&a),
                      PJRT_Error_Code_INVALID_ARGUMENT, "struct_size");
  }
  pjrt_test_client_destroy(api, c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dma_map_records_mappings_and_refuses_overlaps),
      cmocka_unit_test(test_tracking_events_and_poisoning),
      cmocka_unit_test(test_bitcast_shares_the_memory_under_a_new_type),
      cmocka_unit_test(test_topology_serializes_and_fingerprints),
      cmocka_unit_test(test_transfer_literal_fills_a_buffer_from_any_host_layout),
      cmocka_unit_test(test_donate_with_control_dependency_waits_for_the_callback),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
