/* The XLA_FFI_Api table kiln serves, exercised through its function pointers the way a C
 * handler does: errors, struct_size checks, type registration, user data, state across
 * stages, device memory, the thread pool, futures, run id / device ordinal, extensions, and
 * registration through the table (into the registry loading on this thread, else the
 * default one). Handlers here are plain C against include/kiln/ffi_c_api.h. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/status.h"
#include "ffi/ffi_api.h"
#include "ffi/ffi_call_frame.h"
#include "ffi/ffi_registry.h"

static const XLA_FFI_Api *api(void) {
  return kiln_ffi_api();
}

static XLA_FFI_Error_Code code_of(XLA_FFI_Error *e, char *msg, size_t cap) {
  XLA_FFI_Error_GetDetails_Args d = {XLA_FFI_Error_GetDetails_Args_STRUCT_SIZE, NULL, e, NULL,
                                     XLA_FFI_Error_Code_OK};
  api()->XLA_FFI_Error_GetDetails(&d);
  if (msg) snprintf(msg, cap, "%s", d.message);
  XLA_FFI_Error_Destroy_Args x = {XLA_FFI_Error_Destroy_Args_STRUCT_SIZE, NULL, e};
  api()->XLA_FFI_Error_Destroy(&x);
  return d.errc;
}

static void test_table_header_and_every_slot_is_filled(void **state) {
  (void)state;
  const XLA_FFI_Api *a = api();
  assert_int_equal(a->struct_size, XLA_FFI_Api_STRUCT_SIZE);
  assert_int_equal(sizeof(XLA_FFI_Api), 200);
  assert_int_equal(a->api_version.major_version, 0);
  assert_int_equal(a->api_version.minor_version, 4);
  void *const *slots =
      (void *const *)((const char *)a + offsetof(XLA_FFI_Api, XLA_FFI_Error_Create));
  for (int i = 0; i < 19; i++) assert_non_null(slots[i]);
  assert_ptr_equal(XLA_FFI_GetApi(), a);
}

static void test_errors_round_trip_and_ok_is_no_error(void **state) {
  (void)state;
  XLA_FFI_Error_Create_Args c = {XLA_FFI_Error_Create_Args_STRUCT_SIZE, NULL, "boom",
                                 XLA_FFI_Error_Code_DATA_LOSS};
  XLA_FFI_Error *e = api()->XLA_FFI_Error_Create(&c);
  char msg[64];
  assert_int_equal(code_of(e, msg, sizeof(msg)), XLA_FFI_Error_Code_DATA_LOSS);
  assert_string_equal(msg, "boom");
  c.errc = XLA_FFI_Error_Code_OK;
  assert_null(api()->XLA_FFI_Error_Create(&c));
  c.message = NULL;
  c.errc = XLA_FFI_Error_Code_ABORTED;
  assert_int_equal(code_of(api()->XLA_FFI_Error_Create(&c), msg, sizeof(msg)),
                   XLA_FFI_Error_Code_ABORTED);
  assert_string_equal(msg, "");
  kiln_status s =
      kiln_ffi_error_to_status(kiln_ffi_error_make(XLA_FFI_Error_Code_NOT_FOUND, "x %d", 5));
  assert_int_equal(kiln_status_code(s), KILN_NOT_FOUND);
  assert_string_equal(kiln_status_message(s), "x 5");
  kiln_status_free(s);
}

static void test_too_small_or_null_args_structs_are_invalid_argument(void **state) {
  (void)state;
  char msg[256];
  XLA_FFI_Error_Create_Args c = {8, NULL, "x", XLA_FFI_Error_Code_INTERNAL};
  assert_int_equal(code_of(api()->XLA_FFI_Error_Create(&c), msg, sizeof(msg)),
                   XLA_FFI_Error_Code_INVALID_ARGUMENT);
  assert_non_null(strstr(msg, "XLA_FFI_Error_Create_Args: struct_size 8 is smaller than"));
  kiln_ffi_context_t ctx = {0};
  XLA_FFI_Stream_Get_Args sg = {XLA_FFI_Stream_Get_Args_STRUCT_SIZE - 1, NULL, &ctx, NULL};
  assert_int_equal(code_of(api()->XLA_FFI_Stream_Get(&sg), NULL, 0),
                   XLA_FFI_Error_Code_INVALID_ARGUMENT);
  assert_int_equal(code_of(api()->XLA_FFI_Stream_Get(NULL), NULL, 0),
                   XLA_FFI_Error_Code_INVALID_ARGUMENT);
  XLA_FFI_RunId_Get_Args r = {XLA_FFI_RunId_Get_Args_STRUCT_SIZE, NULL, NULL, 0};
  assert_int_equal(code_of(api()->XLA_FFI_RunId_Get(&r), msg, sizeof(msg)),
                   XLA_FFI_Error_Code_INVALID_ARGUMENT);
  assert_non_null(strstr(msg, "NULL execution context"));
  XLA_FFI_Handler_Register_Args hr;
  memset(&hr, 0, sizeof(hr));
  hr.struct_size = 16;
  assert_int_equal(code_of(api()->XLA_FFI_Handler_Register(&hr), NULL, 0),
                   XLA_FFI_Error_Code_INVALID_ARGUMENT);
  /* GetDetails / Destroy cannot report: a too-small struct is left alone. */
  XLA_FFI_Error_GetDetails_Args d = {8, NULL, NULL, NULL, XLA_FFI_Error_Code_OK};
  api()->XLA_FFI_Error_GetDetails(&d);
  assert_null(d.message);
  api()->XLA_FFI_Error_GetDetails(NULL);
  api()->XLA_FFI_Error_Destroy(NULL);
}

static void test_type_ids_are_assigned_stable_and_checked(void **state) {
  (void)state;
  XLA_FFI_TypeId a = XLA_FFI_UNKNOWN_TYPE_ID, b = XLA_FFI_UNKNOWN_TYPE_ID;
  XLA_FFI_Type_Register_Args ra = {
      XLA_FFI_Type_Register_Args_STRUCT_SIZE, NULL, {"api_test_type_a", 15}, &a, NULL};
  assert_null(api()->XLA_FFI_Type_Register(&ra));
  assert_true(a.type_id > 0);
  XLA_FFI_TypeId again = XLA_FFI_UNKNOWN_TYPE_ID;
  ra.type_id = &again;
  assert_null(api()->XLA_FFI_Type_Register(&ra)); /* same name: same id */
  assert_int_equal(again.type_id, a.type_id);
  XLA_FFI_Type_Register_Args rb = {
      XLA_FFI_Type_Register_Args_STRUCT_SIZE, NULL, {"api_test_type_b", 15}, &b, NULL};
  assert_null(api()->XLA_FFI_Type_Register(&rb));
  assert_int_not_equal(a.type_id, b.type_id);
  /* A given id that clashes with another name, or a name re-registered with another id. */
  XLA_FFI_TypeId clash = a;
  XLA_FFI_Type_Register_Args rc = {
      XLA_FFI_Type_Register_Args_STRUCT_SIZE, NULL, {"api_test_type_c", 15}, &clash, NULL};
  assert_int_equal(code_of(api()->XLA_FFI_Type_Register(&rc), NULL, 0),
                   XLA_FFI_Error_Code_ALREADY_EXISTS);
  ra.type_id = &b;
  assert_int_equal(code_of(api()->XLA_FFI_Type_Register(&ra), NULL, 0),
                   XLA_FFI_Error_Code_ALREADY_EXISTS);
  XLA_FFI_TypeId want = {900001};
  rc.type_id = &want;
  assert_null(api()->XLA_FFI_Type_Register(&rc));
  XLA_FFI_TypeId got;
  assert_null(kiln_ffi_type_lookup("api_test_type_c", 15, &got));
  assert_int_equal(got.type_id, 900001);
}

/* Registers concurrently: ids stay unique. */
static void *register_many(void *arg) {
  int base = *(int *)arg;
  for (int i = 0; i < 50; i++) {
    char name[32];
    int n = snprintf(name, sizeof(name), "api_conc_%d_%d", base, i);
    XLA_FFI_TypeId id = XLA_FFI_UNKNOWN_TYPE_ID;
    kiln_status_free(kiln_ffi_type_register(name, (size_t)n, &id, NULL));
  }
  return NULL;
}

static void test_type_registration_is_thread_safe(void **state) {
  (void)state;
  pthread_t t[4];
  int base[4] = {0, 1, 2, 3};
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, register_many, &base[i]);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  int64_t seen[200];
  int k = 0;
  for (int b = 0; b < 4; b++)
    for (int i = 0; i < 50; i++) {
      char name[32];
      int n = snprintf(name, sizeof(name), "api_conc_%d_%d", b, i);
      XLA_FFI_TypeId id;
      assert_null(kiln_ffi_type_lookup(name, (size_t)n, &id));
      for (int j = 0; j < k; j++) assert_int_not_equal(seen[j], id.type_id);
      seen[k++] = id.type_id;
    }
}

static int g_deleted;
static void count_delete(void *p) {
  g_deleted++;
  free(p);
}

static void test_state_set_get_and_deleter(void **state) {
  (void)state;
  XLA_FFI_TypeInfo info = {XLA_FFI_TypeInfo_STRUCT_SIZE, NULL, count_delete};
  XLA_FFI_TypeId id = XLA_FFI_UNKNOWN_TYPE_ID, other = XLA_FFI_UNKNOWN_TYPE_ID;
  assert_null(kiln_ffi_type_register("api_state_type", 14, &id, &info));
  assert_null(kiln_ffi_type_register("api_state_other", 15, &other, NULL));
  kiln_ffi_context_t ctx = {0};
  int *obj = malloc(sizeof(int));
  *obj = 42;
  XLA_FFI_State_Set_Args set = {XLA_FFI_State_Set_Args_STRUCT_SIZE, NULL, &ctx,
                                XLA_FFI_ExecutionStage_INSTANTIATE, &id,  obj};
  assert_int_equal(code_of(api()->XLA_FFI_State_Set(&set), NULL, 0),
                   XLA_FFI_Error_Code_FAILED_PRECONDITION); /* no state storage */
  ctx.state = kiln_ffi_state_create();
  assert_null(api()->XLA_FFI_State_Set(&set));
  assert_int_equal(code_of(api()->XLA_FFI_State_Set(&set), NULL, 0),
                   XLA_FFI_Error_Code_ALREADY_EXISTS);
  set.stage = XLA_FFI_ExecutionStage_EXECUTE;
  assert_int_equal(code_of(api()->XLA_FFI_State_Set(&set), NULL, 0),
                   XLA_FFI_Error_Code_INVALID_ARGUMENT);
  XLA_FFI_TypeId unknown = {123456789};
  set.stage = XLA_FFI_ExecutionStage_PREPARE;
  set.type_id = &unknown;
  assert_int_equal(code_of(api()->XLA_FFI_State_Set(&set), NULL, 0),
                   XLA_FFI_Error_Code_INVALID_ARGUMENT);
  XLA_FFI_State_Get_Args get = {XLA_FFI_State_Get_Args_STRUCT_SIZE, NULL, &ctx,
                                XLA_FFI_ExecutionStage_INSTANTIATE, &id,  NULL};
  assert_null(api()->XLA_FFI_State_Get(&get));
  assert_ptr_equal(get.state, obj);
  get.type_id = &other;
  assert_int_equal(code_of(api()->XLA_FFI_State_Get(&get), NULL, 0),
                   XLA_FFI_Error_Code_INVALID_ARGUMENT);
  get.stage = XLA_FFI_ExecutionStage_INITIALIZE;
  assert_int_equal(code_of(api()->XLA_FFI_State_Get(&get), NULL, 0), XLA_FFI_Error_Code_NOT_FOUND);
  g_deleted = 0;
  kiln_ffi_state_destroy(ctx.state);
  assert_int_equal(g_deleted, 1);
}

/* XLA's C++ binding passes XLA_FFI_Type_Register_Args_STRUCT_SIZE, which stops before
 * type_info: the deleter must be taken all the same, or state objects leak. */
static void test_type_info_is_read_at_the_binding_struct_size(void **state) {
  (void)state;
  XLA_FFI_TypeInfo info = {XLA_FFI_TypeInfo_STRUCT_SIZE, NULL, count_delete};
  XLA_FFI_TypeId id = XLA_FFI_UNKNOWN_TYPE_ID;
  XLA_FFI_Type_Register_Args r = {
      XLA_FFI_Type_Register_Args_STRUCT_SIZE, NULL, {"api_binding_size_type", 21}, &id, &info};
  assert_true(XLA_FFI_Type_Register_Args_STRUCT_SIZE <
              offsetof(XLA_FFI_Type_Register_Args, type_info) + sizeof(void *));
  assert_null(api()->XLA_FFI_Type_Register(&r));
  kiln_ffi_context_t ctx = {.state = kiln_ffi_state_create()};
  XLA_FFI_State_Set_Args set = {XLA_FFI_State_Set_Args_STRUCT_SIZE, NULL, &ctx,
                                XLA_FFI_ExecutionStage_PREPARE,     &id,  malloc(8)};
  assert_null(api()->XLA_FFI_State_Set(&set));
  g_deleted = 0;
  kiln_ffi_state_destroy(ctx.state);
  assert_int_equal(g_deleted, 1);
}

static void test_user_data_stream_run_id_and_device_ordinal(void **state) {
  (void)state;
  int payload = 5;
  kiln_ffi_user_data_t ud[1] = {{4242, &payload}};
  kiln_ffi_context_t ctx = {.platform = KILN_FFI_PLATFORM_CUDA,
                            .stream = (void *)0x1234,
                            .device_ordinal = 2,
                            .run_id = -9,
                            .user_data = ud,
                            .num_user_data = 1};
  XLA_FFI_TypeId tid = {4242}, missing = {4243};
  XLA_FFI_InvokeContext_Get_Args g = {XLA_FFI_InvokeContext_Get_Args_STRUCT_SIZE, NULL, &ctx, &tid,
                                      NULL};
  assert_null(api()->XLA_FFI_InvokeContext_Get(&g));
  assert_ptr_equal(g.data, &payload);
  g.type_id = &missing;
  assert_int_equal(code_of(api()->XLA_FFI_InvokeContext_Get(&g), NULL, 0),
                   XLA_FFI_Error_Code_NOT_FOUND);
  XLA_FFI_Stream_Get_Args s = {XLA_FFI_Stream_Get_Args_STRUCT_SIZE, NULL, &ctx, NULL};
  assert_null(api()->XLA_FFI_Stream_Get(&s));
  assert_ptr_equal(s.stream, (void *)0x1234);
  /* XLA's C++ binding passes InvokeContext_Get's (larger) size for RunId: accepted. */
  XLA_FFI_RunId_Get_Args r = {XLA_FFI_InvokeContext_Get_Args_STRUCT_SIZE, NULL, &ctx, 0};
  assert_null(api()->XLA_FFI_RunId_Get(&r));
  assert_int_equal(r.run_id, -9);
  XLA_FFI_DeviceOrdinal_Get_Args o = {XLA_FFI_DeviceOrdinal_Get_Args_STRUCT_SIZE, NULL, &ctx, 0};
  assert_null(api()->XLA_FFI_DeviceOrdinal_Get(&o));
  assert_int_equal(o.device_ordinal, 2);
}

typedef struct fake_alloc {
  int allocs, frees;
  char pool[256];
} fake_alloc_t;

static kiln_status fake_allocate(void *user, size_t size, size_t align, void **out) {
  fake_alloc_t *f = user;
  if (size > sizeof(f->pool)) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "too big");
  f->allocs++;
  *out = f->pool;
  return NULL;
}
static kiln_status fake_free(void *user, void *data, size_t size) {
  ((fake_alloc_t *)user)->frees++;
  return NULL;
}

static void test_device_memory_goes_through_the_runtime_allocator(void **state) {
  (void)state;
  fake_alloc_t fa = {0};
  kiln_ffi_context_t ctx = {.platform = KILN_FFI_PLATFORM_CUDA,
                            .allocator_user = &fa,
                            .allocate = fake_allocate,
                            .deallocate = fake_free};
  XLA_FFI_DeviceMemory_Allocate_Args a = {
      XLA_FFI_DeviceMemory_Allocate_Args_STRUCT_SIZE, NULL, &ctx, 64, 16, NULL};
  assert_null(api()->XLA_FFI_DeviceMemory_Allocate(&a));
  assert_ptr_equal(a.data, fa.pool);
  XLA_FFI_DeviceMemory_Free_Args f = {XLA_FFI_DeviceMemory_Free_Args_STRUCT_SIZE, NULL, &ctx, 64,
                                      a.data};
  assert_null(api()->XLA_FFI_DeviceMemory_Free(&f));
  assert_int_equal(fa.allocs, 1);
  assert_int_equal(fa.frees, 1);
  a.size = 1 << 20;
  assert_int_equal(code_of(api()->XLA_FFI_DeviceMemory_Allocate(&a), NULL, 0),
                   XLA_FFI_Error_Code_RESOURCE_EXHAUSTED);
  a.size = 8;
  a.alignment = 3;
  assert_int_equal(code_of(api()->XLA_FFI_DeviceMemory_Allocate(&a), NULL, 0),
                   XLA_FFI_Error_Code_INVALID_ARGUMENT);
  /* CUDA without an allocator: UNIMPLEMENTED; Host without one: aligned host memory. */
  kiln_ffi_context_t cuda = {.platform = KILN_FFI_PLATFORM_CUDA};
  a.ctx = &cuda;
  a.alignment = 64;
  assert_int_equal(code_of(api()->XLA_FFI_DeviceMemory_Allocate(&a), NULL, 0),
                   XLA_FFI_Error_Code_UNIMPLEMENTED);
  kiln_ffi_context_t host = {.platform = KILN_FFI_PLATFORM_HOST};
  a.ctx = &host;
  assert_null(api()->XLA_FFI_DeviceMemory_Allocate(&a));
  assert_int_equal((uintptr_t)a.data % 64, 0);
  f.ctx = &host;
  f.data = a.data;
  assert_null(api()->XLA_FFI_DeviceMemory_Free(&f));
}

static kiln_status run_inline(void *user, void (*task)(void *), void *data) {
  (*(int *)user)++;
  task(data);
  return NULL;
}
static void bump(void *p) {
  (*(int *)p) += 10;
}

static void test_thread_pool_schedule_and_num_threads(void **state) {
  (void)state;
  int scheduled = 0, value = 0;
  kiln_ffi_context_t ctx = {.pool_user = &scheduled, .schedule = run_inline, .num_threads = 6};
  XLA_FFI_ThreadPool_Schedule_Args s = {XLA_FFI_ThreadPool_Schedule_Args_STRUCT_SIZE, NULL, &ctx,
                                        bump, &value};
  assert_null(api()->XLA_FFI_ThreadPool_Schedule(&s));
  assert_int_equal(scheduled, 1);
  assert_int_equal(value, 10);
  int64_t n = 0;
  XLA_FFI_ThreadPool_NumThreads_Args nt = {XLA_FFI_ThreadPool_NumThreads_Args_STRUCT_SIZE, NULL,
                                           &ctx, &n};
  assert_null(api()->XLA_FFI_ThreadPool_NumThreads(&nt));
  assert_int_equal(n, 6);
  kiln_ffi_context_t none = {0};
  s.ctx = &none;
  assert_int_equal(code_of(api()->XLA_FFI_ThreadPool_Schedule(&s), NULL, 0),
                   XLA_FFI_Error_Code_UNIMPLEMENTED);
}

static void *complete_later(void *f) {
  XLA_FFI_Future_SetAvailable_Args a = {XLA_FFI_Future_SetAvailable_Args_STRUCT_SIZE, NULL, f};
  kiln_ffi_error_free(api()->XLA_FFI_Future_SetAvailable(&a));
  return NULL;
}

static void test_futures_complete_from_another_thread_or_with_an_error(void **state) {
  (void)state;
  XLA_FFI_Future_Create_Args c = {XLA_FFI_Future_Create_Args_STRUCT_SIZE, NULL, NULL};
  assert_null(api()->XLA_FFI_Future_Create(&c));
  assert_non_null(c.future);
  assert_false(kiln_ffi_future_is_ready(c.future));
  pthread_t t;
  pthread_create(&t, NULL, complete_later, c.future);
  assert_null(kiln_ffi_future_wait(c.future));
  pthread_join(t, NULL);
  kiln_ffi_future_release(c.future);

  assert_null(api()->XLA_FFI_Future_Create(&c));
  XLA_FFI_Future_SetError_Args e = {XLA_FFI_Future_SetError_Args_STRUCT_SIZE, NULL, c.future,
                                    kiln_ffi_error_make(XLA_FFI_Error_Code_ABORTED, "gave up")};
  assert_null(api()->XLA_FFI_Future_SetError(&e));
  XLA_FFI_Future_SetAvailable_Args twice = {XLA_FFI_Future_SetAvailable_Args_STRUCT_SIZE, NULL,
                                            c.future};
  kiln_status s = kiln_ffi_future_wait(c.future);
  assert_int_equal(kiln_status_code(s), KILN_ABORTED);
  assert_string_equal(kiln_status_message(s), "gave up");
  kiln_status_free(s);
  /* Completing twice is an error, not a crash (the runtime still holds its reference). */
  assert_int_equal(code_of(api()->XLA_FFI_Future_SetAvailable(&twice), NULL, 0),
                   XLA_FFI_Error_Code_FAILED_PRECONDITION);
  kiln_ffi_future_release(c.future);
}

static void test_find_extension_walks_the_context_chain(void **state) {
  (void)state;
  XLA_FFI_Extension second = {XLA_FFI_Extension_STRUCT_SIZE, {77, 1, 0}, NULL};
  XLA_FFI_Extension first = {XLA_FFI_Extension_STRUCT_SIZE, {5, 0, 3}, &second};
  kiln_ffi_context_t ctx = {.extensions = &first};
  XLA_FFI_InvokeContext_FindExtension_Args f = {
      XLA_FFI_InvokeContext_FindExtension_Args_STRUCT_SIZE, NULL, &ctx, 77, NULL};
  assert_null(api()->XLA_FFI_InvokeContext_FindExtension(&f));
  assert_ptr_equal(f.extension, &second);
  f.extension_type = 6;
  assert_int_equal(code_of(api()->XLA_FFI_InvokeContext_FindExtension(&f), NULL, 0),
                   XLA_FFI_Error_Code_NOT_FOUND);
  assert_null(f.extension);
}

/* A C handler that answers the metadata query with traits, and adds 1 to a scalar. */
static XLA_FFI_Error *inc_handler(XLA_FFI_CallFrame *f) {
  if (f->extension_start && f->extension_start->type == XLA_FFI_Extension_Metadata) {
    XLA_FFI_Metadata_Extension *m = (XLA_FFI_Metadata_Extension *)f->extension_start;
    m->metadata->api_version.major_version = 0;
    m->metadata->api_version.minor_version = 3;
    m->metadata->traits = XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE;
    return NULL;
  }
  XLA_FFI_Buffer *b = f->rets.rets[0];
  *(int32_t *)b->data += 1;
  return NULL;
}

static void test_registration_through_the_table_lands_in_the_default_registry(void **state) {
  (void)state;
  XLA_FFI_Handler_Register_Args r;
  memset(&r, 0, sizeof(r));
  r.struct_size = XLA_FFI_Handler_Register_Args_STRUCT_SIZE;
  r.name = (XLA_FFI_ByteSpan){"api.inc", 7};
  r.platform = (XLA_FFI_ByteSpan){"HOST", 4}; /* platform names are case-insensitive */
  r.bundle.execute = inc_handler;
  assert_null(api()->XLA_FFI_Handler_Register(&r));
  kiln_ffi_handler_t h;
  assert_null(
      kiln_ffi_registry_lookup(kiln_ffi_registry_default(), "api.inc", KILN_FFI_PLATFORM_HOST, &h));
  assert_int_equal(h.api_minor, 3);
  assert_true(h.traits & XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE);
  int32_t v = 41;
  kiln_ffi_buffer_desc_t ret = {XLA_FFI_DataType_S32, 0, NULL, &v};
  kiln_ffi_call_frame_t *cf;
  assert_null(kiln_ffi_call_frame_create(NULL, 0, &ret, 1, NULL, &cf));
  assert_null(kiln_ffi_call_frame_invoke_bundle(cf, &h.bundle, XLA_FFI_ExecutionStage_INSTANTIATE,
                                                NULL, "api.inc", NULL)); /* no instantiate: OK */
  assert_null(kiln_ffi_call_frame_invoke_bundle(cf, &h.bundle, XLA_FFI_ExecutionStage_EXECUTE, NULL,
                                                "api.inc", NULL));
  assert_int_equal(v, 42);
  kiln_ffi_call_frame_destroy(cf);
  r.bundle.execute = NULL;
  assert_int_equal(code_of(api()->XLA_FFI_Handler_Register(&r), NULL, 0),
                   XLA_FFI_Error_Code_INVALID_ARGUMENT);
  r.bundle.execute = inc_handler;
  r.platform = (XLA_FFI_ByteSpan){"ROCM", 4};
  assert_int_equal(code_of(api()->XLA_FFI_Handler_Register(&r), NULL, 0),
                   XLA_FFI_Error_Code_INVALID_ARGUMENT);
  kiln_ffi_registry_default_shutdown();
}

typedef struct reg_job {
  kiln_ffi_registry_t *r;
  int base;
  int failures;
} reg_job_t;

static void *register_and_look_up(void *arg) {
  reg_job_t *job = arg;
  XLA_FFI_Handler_Bundle b = {NULL, NULL, NULL, inc_handler, NULL};
  for (int i = 0; i < 40; i++) {
    char name[32];
    int n = snprintf(name, sizeof(name), "conc.%d.%d", job->base, i);
    kiln_status s = kiln_ffi_registry_register(job->r, name, (size_t)n, "Host", 4, &b, 0);
    kiln_ffi_handler_t h;
    if (!s) s = kiln_ffi_registry_lookup(job->r, name, KILN_FFI_PLATFORM_HOST, &h);
    if (!s && strcmp(h.target, name) != 0) job->failures++;
    if (s) job->failures++;
    kiln_status_free(s);
  }
  return NULL;
}

static void test_registry_takes_concurrent_registrations_and_lookups(void **state) {
  (void)state;
  kiln_ffi_registry_t *r;
  assert_null(kiln_ffi_registry_create(&r));
  pthread_t t[4];
  reg_job_t jobs[4];
  for (int i = 0; i < 4; i++) {
    jobs[i] = (reg_job_t){r, i, 0};
    pthread_create(&t[i], NULL, register_and_look_up, &jobs[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(jobs[i].failures, 0);
  }
  assert_int_equal(kiln_ffi_registry_size(r), 160);
  kiln_ffi_registry_destroy(r);
}

static void test_call_frame_rejects_bad_descriptions(void **state) {
  (void)state;
  kiln_ffi_call_frame_t *cf = NULL;
  int64_t neg[1] = {-1};
  kiln_ffi_buffer_desc_t bad_type = {(XLA_FFI_DataType)99, 0, NULL, NULL};
  kiln_ffi_buffer_desc_t bad_dim = {XLA_FFI_DataType_F32, 1, neg, NULL};
  kiln_ffi_buffer_desc_t no_dims = {XLA_FFI_DataType_F32, 2, NULL, NULL};
  kiln_status s = kiln_ffi_call_frame_create(&bad_type, 1, NULL, 0, NULL, &cf);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  kiln_status_free(s);
  s = kiln_ffi_call_frame_create(NULL, 0, &bad_dim, 1, NULL, &cf);
  assert_non_null(strstr(kiln_status_message(s), "result 0 has negative dimension -1"));
  kiln_status_free(s);
  s = kiln_ffi_call_frame_create(&no_dims, 1, NULL, 0, NULL, &cf);
  assert_non_null(strstr(kiln_status_message(s), "no dims"));
  kiln_status_free(s);
  assert_null(cf);
}

static void test_dtype_sizes_follow_ffi_numbering(void **state) {
  (void)state;
  assert_int_equal(kiln_ffi_dtype_byte_size(XLA_FFI_DataType_BF16), 2);
  assert_int_equal(XLA_FFI_DataType_BF16, 16);
  assert_int_equal(kiln_ffi_dtype_byte_size(XLA_FFI_DataType_C128), 16);
  assert_int_equal(kiln_ffi_dtype_byte_size(XLA_FFI_DataType_PRED), 1);
  assert_int_equal(kiln_ffi_dtype_bits(XLA_FFI_DataType_S4), 4);
  assert_int_equal(kiln_ffi_dtype_byte_size(XLA_FFI_DataType_TOKEN), 0);
  assert_int_equal(kiln_ffi_dtype_byte_size((XLA_FFI_DataType)14), 0); /* no such number */
  assert_string_equal(kiln_ffi_dtype_name(XLA_FFI_DataType_F8E4M3FN), "f8e4m3fn");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_header_and_every_slot_is_filled),
      cmocka_unit_test(test_errors_round_trip_and_ok_is_no_error),
      cmocka_unit_test(test_too_small_or_null_args_structs_are_invalid_argument),
      cmocka_unit_test(test_type_ids_are_assigned_stable_and_checked),
      cmocka_unit_test(test_type_registration_is_thread_safe),
      cmocka_unit_test(test_state_set_get_and_deleter),
      cmocka_unit_test(test_type_info_is_read_at_the_binding_struct_size),
      cmocka_unit_test(test_user_data_stream_run_id_and_device_ordinal),
      cmocka_unit_test(test_device_memory_goes_through_the_runtime_allocator),
      cmocka_unit_test(test_thread_pool_schedule_and_num_threads),
      cmocka_unit_test(test_futures_complete_from_another_thread_or_with_an_error),
      cmocka_unit_test(test_find_extension_walks_the_context_chain),
      cmocka_unit_test(test_registration_through_the_table_lands_in_the_default_registry),
      cmocka_unit_test(test_registry_takes_concurrent_registrations_and_lookups),
      cmocka_unit_test(test_call_frame_rejects_bad_descriptions),
      cmocka_unit_test(test_dtype_sizes_follow_ffi_numbering),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
