/* PJRT_Client_CreateAliasBuffer / PJRT_Client_FulfillAliasBuffer: a buffer whose memory is
 * supplied later. Before fulfilment its ready event is pending and an execute that takes it
 * waits (kiln's executes are synchronous: the calling thread waits); fulfilled with a buffer it
 * is that buffer's memory; fulfilled with an error, reads and executes fail with it. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "pjrt_exec_util.h"
#include "skip_util.h"

static const PJRT_Api *api;
static PJRT_Client *g_client;
static PJRT_Device *g_dev;
static PJRT_Memory *g_mem;

static int setup(void **state) {
  (void)state;
  api = pjrt_test_load();
  if (!api) return -1;
  g_client = pjrt_exec_client(api, NULL);
  g_dev = pjrt_exec_device(api, g_client, 0);
  PJRT_Device_DefaultMemory_Args m = {.struct_size = PJRT_Device_DefaultMemory_Args_STRUCT_SIZE,
                                      .device = g_dev};
  PJRT_CHECK(api, api->PJRT_Device_DefaultMemory(&m));
  g_mem = m.memory;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  pjrt_test_client_destroy(api, g_client);
  return 0;
}

static const int64_t kDims[1] = {4};

static PJRT_Buffer *create_alias(PJRT_FulfillAliasBufferCallback **cb) {
  PJRT_Client_CreateAliasBuffer_Args a = {
      .struct_size = PJRT_Client_CreateAliasBuffer_Args_STRUCT_SIZE,
      .client = g_client,
      .memory = g_mem,
      .shape_dims = kDims,
      .shape_num_dims = 1,
      .shape_element_type = PJRT_Buffer_Type_F32};
  PJRT_CHECK(api, api->PJRT_Client_CreateAliasBuffer(&a));
  assert_non_null(a.alias_buffer);
  assert_non_null(a.fulfill_alias_buffer_cb);
  *cb = a.fulfill_alias_buffer_cb;
  return a.alias_buffer;
}

static PJRT_Error *fulfill(PJRT_FulfillAliasBufferCallback *cb, PJRT_Buffer *b,
                           PJRT_Error_Code code, const char *msg) {
  PJRT_Client_FulfillAliasBuffer_Args f = {
      .struct_size = PJRT_Client_FulfillAliasBuffer_Args_STRUCT_SIZE,
      .client = g_client,
      .buffer = b,
      .status_code = code,
      .error_message = msg,
      .error_message_size = msg ? strlen(msg) : 0,
      .fulfill_alias_buffer_cb = cb};
  return api->PJRT_Client_FulfillAliasBuffer(&f);
}

static PJRT_Event *ready_event(PJRT_Buffer *b) {
  PJRT_Buffer_ReadyEvent_Args r = {.struct_size = PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE,
                                   .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_ReadyEvent(&r));
  return r.event;
}

static bool is_ready(PJRT_Event *e) {
  PJRT_Event_IsReady_Args a = {.struct_size = PJRT_Event_IsReady_Args_STRUCT_SIZE, .event = e};
  PJRT_CHECK(api, api->PJRT_Event_IsReady(&a));
  return a.is_ready;
}

static uintptr_t unsafe_pointer(PJRT_Buffer *b) {
  PJRT_Buffer_UnsafePointer_Args a = {.struct_size = PJRT_Buffer_UnsafePointer_Args_STRUCT_SIZE,
                                      .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_UnsafePointer(&a));
  return a.buffer_pointer;
}

typedef struct execute_job {
  PJRT_LoadedExecutable *exe;
  PJRT_Buffer *arg, *out;
  PJRT_Error *error;
  atomic_bool done;
} execute_job_t;

static void *execute_thread(void *p) {
  execute_job_t *j = p;
  j->error = pjrt_exec_try_run(api, j->exe, &j->arg, 1, &j->out, NULL);
  atomic_store(&j->done, true);
  return NULL;
}

static const char *kAddOne =
    "HloModule add_one\nENTRY main {\n  x = f32[4] parameter(0)\n  one = f32[] constant(1)\n"
    "  ones = f32[4] broadcast(one), dimensions={}\n  ROOT y = f32[4] add(x, ones)\n}\n";

static void test_execute_waits_for_the_alias_to_be_fulfilled(void **state) {
  (void)state;
  PJRT_FulfillAliasBufferCallback *cb = NULL;
  PJRT_Buffer *alias = create_alias(&cb);
  PJRT_Event *ready = ready_event(alias);
  assert_false(is_ready(ready));
  PJRT_LoadedExecutable *exe = pjrt_exec_compile(api, g_client, kAddOne);
  execute_job_t job = {.exe = exe, .arg = alias};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, execute_thread, &job), 0);
  usleep(100 * 1000);
  assert_false(atomic_load(&job.done)); /* waiting for the memory */
  const float x[4] = {1, 2, 3, 4};
  PJRT_Buffer *src = pjrt_exec_buffer(api, g_client, g_dev, x, PJRT_Buffer_Type_F32, kDims, 1);
  PJRT_CHECK(api, fulfill(cb, src, PJRT_Error_Code_OK, NULL));
  assert_int_equal(pthread_join(t, NULL), 0);
  PJRT_CHECK(api, job.error);
  float y[4];
  pjrt_exec_read(api, job.out, y, sizeof(y));
  for (int i = 0; i < 4; i++) assert_float_equal(y[i], x[i] + 1, 0);
  assert_true(is_ready(ready));
  pjrt_exec_await(api, ready);
  /* the alias is the source's memory */
  assert_int_equal(unsafe_pointer(alias), unsafe_pointer(src));
  pjrt_exec_read(api, alias, y, sizeof(y));
  assert_memory_equal(y, x, sizeof(x));
  /* the memory stays while the alias does, whatever happens to the source */
  pjrt_exec_buffer_destroy(api, src);
  pjrt_exec_read(api, alias, y, sizeof(y));
  assert_memory_equal(y, x, sizeof(x));
  pjrt_exec_buffer_destroy(api, job.out);
  pjrt_exec_buffer_destroy(api, alias);
  pjrt_exec_destroy(api, exe);
}

static void test_alias_fulfilled_with_an_error_fails_its_readers(void **state) {
  (void)state;
  PJRT_FulfillAliasBufferCallback *cb = NULL;
  PJRT_Buffer *alias = create_alias(&cb);
  PJRT_Event *ready = ready_event(alias);
  PJRT_CHECK(api, fulfill(cb, NULL, PJRT_Error_Code_INTERNAL, "delayed error"));
  assert_true(is_ready(ready));
  PJRT_Event_Await_Args aw = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE, .event = ready};
  PJRT_EXPECT_ERROR(api, api->PJRT_Event_Await(&aw), PJRT_Error_Code_INTERNAL, "delayed error");
  PJRT_Event_Destroy_Args ed = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE, .event = ready};
  PJRT_CHECK(api, api->PJRT_Event_Destroy(&ed));
  float y[4];
  PJRT_Buffer_ToHostBuffer_Args th = {.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE,
                                      .src = alias,
                                      .dst = y,
                                      .dst_size = sizeof(y)};
  PJRT_EXPECT_ERROR(api, api->PJRT_Buffer_ToHostBuffer(&th), PJRT_Error_Code_INTERNAL,
                    "delayed error");
  PJRT_LoadedExecutable *exe = pjrt_exec_compile(api, g_client, kAddOne);
  PJRT_Buffer *out = NULL;
  PJRT_EXPECT_ERROR(api, pjrt_exec_try_run(api, exe, &alias, 1, &out, NULL),
                    PJRT_Error_Code_INTERNAL, "delayed error");
  assert_null(out);
  pjrt_exec_buffer_destroy(api, alias);
  pjrt_exec_destroy(api, exe);
}

static void test_alias_buffer_errors(void **state) {
  (void)state;
  PJRT_Client_CreateAliasBuffer_Args a = {
      .struct_size = PJRT_Client_CreateAliasBuffer_Args_STRUCT_SIZE,
      .client = g_client,
      .shape_dims = kDims,
      .shape_num_dims = 1,
      .shape_element_type = PJRT_Buffer_Type_F32};
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_CreateAliasBuffer(&a), PJRT_Error_Code_INVALID_ARGUMENT,
                    "memory is NULL");
  a.struct_size = offsetof(PJRT_Client_CreateAliasBuffer_Args, alias_buffer);
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_CreateAliasBuffer(&a), PJRT_Error_Code_INVALID_ARGUMENT,
                    "struct_size");
  PJRT_EXPECT_ERROR(api, fulfill(NULL, NULL, PJRT_Error_Code_OK, NULL),
                    PJRT_Error_Code_INVALID_ARGUMENT, "fulfill_alias_buffer_cb is NULL");
  PJRT_FulfillAliasBufferCallback *cb = NULL;
  PJRT_Buffer *alias = create_alias(&cb);
  PJRT_EXPECT_ERROR(api, fulfill(cb, NULL, PJRT_Error_Code_OK, NULL),
                    PJRT_Error_Code_INVALID_ARGUMENT, "buffer is NULL");
  const int64_t two[1] = {2};
  const float x[4] = {5, 6, 7, 8};
  PJRT_Buffer *small = pjrt_exec_buffer(api, g_client, g_dev, x, PJRT_Buffer_Type_F32, two, 1);
  PJRT_EXPECT_ERROR(api, fulfill(cb, small, PJRT_Error_Code_OK, NULL),
                    PJRT_Error_Code_INVALID_ARGUMENT, "needs 16");
  /* the callback is still good after a refused fulfilment; the alias may go first */
  pjrt_exec_buffer_destroy(api, alias);
  PJRT_Buffer *src = pjrt_exec_buffer(api, g_client, g_dev, x, PJRT_Buffer_Type_F32, kDims, 1);
  PJRT_CHECK(api, fulfill(cb, src, PJRT_Error_Code_OK, NULL));
  pjrt_exec_buffer_destroy(api, src);
  pjrt_exec_buffer_destroy(api, small);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_execute_waits_for_the_alias_to_be_fulfilled),
      cmocka_unit_test(test_alias_fulfilled_with_an_error_fails_its_readers),
      cmocka_unit_test(test_alias_buffer_errors),
  };
  return kiln_run_tests(tests, setup, teardown);
}
