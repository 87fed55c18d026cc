/* Stress: 8 threads on one client create buffers from host data (with strides and layouts),
 * copy them between the two host devices and into pinned_host memory, read them back
 * (checked), take and drop external references, register OnReady callbacks on events, and
 * delete and destroy them, all at once; meanwhile every thread reads a shared buffer that one
 * of them deletes midway (readers then get FAILED_PRECONDITION, never garbage or a crash).
 * Device memory statistics return to zero at the end. CI runs it under ThreadSanitizer
 * (scripts/run-tests.sh: tests/pjrt/test_*stress*.c). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "pjrt_test_util.h"

#define NUM_THREADS 8
#define ITERATIONS 200

static const PJRT_Api *api;
static PJRT_Client *g_client;
static PJRT_Device *g_dev[2];
static PJRT_Memory *g_pinned[2];
static PJRT_Buffer *g_shared;
static int32_t g_shared_data[512];
static _Atomic int g_callbacks, g_failures;
static _Atomic int g_ready_registered; /* OnReady callbacks registered on transfer events */

/* Failures in worker threads are counted (cmocka's asserts are for the main thread). */
#define CHECK_OK(call)                                                             \
  do {                                                                             \
    char m_[512];                                                                  \
    if (pjrt_test_take_error(api, (call), m_, sizeof(m_)) != PJRT_Error_Code_OK) { \
      fprintf(stderr, "%s failed: %s\n", #call, m_);                               \
      atomic_fetch_add(&g_failures, 1);                                            \
    }                                                                              \
  } while (0)
#define EXPECT(cond)                                                      \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "%s:%d: %s is false\n", __FILE__, __LINE__, #cond); \
      atomic_fetch_add(&g_failures, 1);                                   \
    }                                                                     \
  } while (0)

static void event_done(PJRT_Event *e) {
  if (!e) return;
  PJRT_Event_Await_Args aw = {.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE, .event = e};
  CHECK_OK(api->PJRT_Event_Await(&aw));
  PJRT_Event_Destroy_Args d = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE, .event = e};
  CHECK_OK(api->PJRT_Event_Destroy(&d));
}

static void destroy(PJRT_Buffer *b) {
  PJRT_Buffer_Destroy_Args d = {.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE, .buffer = b};
  CHECK_OK(api->PJRT_Buffer_Destroy(&d));
}

static pthread_mutex_t g_event_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_event_cv = PTHREAD_COND_INITIALIZER;
static int g_event_callbacks;

static void on_ready(PJRT_Error *e, void *arg) {
  (void)arg;
  pjrt_test_take_error(api, e, NULL, 0);
  pthread_mutex_lock(&g_event_mu);
  atomic_fetch_add(&g_callbacks, 1);
  pthread_cond_broadcast(&g_event_cv);
  pthread_mutex_unlock(&g_event_mu);
}

static void count_event_callback(PJRT_Error *e, void *arg) {
  (void)arg;
  pjrt_test_take_error(api, e, NULL, 0);
  pthread_mutex_lock(&g_event_mu);
  g_event_callbacks++;
  pthread_cond_broadcast(&g_event_cv);
  pthread_mutex_unlock(&g_event_mu);
}

/* Reads `b` (n int32s) and compares with `want`; *code gets the error code. */
static void read_check(PJRT_Buffer *b, const int32_t *want, size_t n, PJRT_Error_Code *code) {
  int32_t *got = malloc(n * sizeof(int32_t) + 1);
  PJRT_Buffer_ToHostBuffer_Args a = {.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE,
                                     .src = b,
                                     .dst = got,
                                     .dst_size = n * sizeof(int32_t)};
  PJRT_Error_Code c = pjrt_test_take_error(api, api->PJRT_Buffer_ToHostBuffer(&a), NULL, 0);
  if (code)
    *code = c;
  else
    EXPECT(c == PJRT_Error_Code_OK);
  if (c == PJRT_Error_Code_OK) {
    /* An OnReady callback on the transfer's event, then wait for it. */
    PJRT_Event_OnReady_Args on = {
        .struct_size = PJRT_Event_OnReady_Args_STRUCT_SIZE, .event = a.event, .callback = on_ready};
    char m[512];
    if (pjrt_test_take_error(api, api->PJRT_Event_OnReady(&on), m, sizeof(m)) ==
        PJRT_Error_Code_OK) {
      atomic_fetch_add(&g_ready_registered, 1);
    } else {
      fprintf(stderr, "PJRT_Event_OnReady failed: %s\n", m);
      atomic_fetch_add(&g_failures, 1);
    }
    event_done(a.event);
    EXPECT(!memcmp(got, want, n * sizeof(int32_t)));
  }
  free(got);
}

static void *worker(void *arg) {
  int t = (int)(intptr_t)arg;
  int32_t *data = malloc(1024 * sizeof(int32_t));
  int32_t *want = malloc(1024 * sizeof(int32_t));
  bool shared_deleted_seen = false;
  for (int it = 0; it < ITERATIONS; it++) {
    int64_t rows = 1 + (t + it) % 8, cols = 1 + (it * 7 + t) % 16;
    size_t n = (size_t)(rows * cols);
    for (size_t i = 0; i < n; i++) data[i] = (int32_t)(t * 1000000 + it * 1000 + (int)i);
    PJRT_Device *dev = g_dev[(t + it) % 2], *other = g_dev[(t + it + 1) % 2];
    const int64_t dims[2] = {rows, cols};
    PJRT_Client_BufferFromHostBuffer_Args a;
    memset(&a, 0, sizeof(a));
    a.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
    a.client = g_client;
    a.type = PJRT_Buffer_Type_S32;
    a.dims = dims;
    a.num_dims = 2;
    a.host_buffer_semantics = (PJRT_HostBufferSemantics)(it % 3);
    a.device = dev;
    int64_t strides[2];
    if (it % 4 == 1) {
      /* The host data is the transpose: column-major strides. */
      for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) want[c * rows + r] = data[r * cols + c];
      memcpy(data, want, n * sizeof(int32_t));
      strides[0] = 4;
      strides[1] = 4 * rows;
      a.byte_strides = strides;
      a.num_byte_strides = 2;
      for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) want[r * cols + c] = data[c * rows + r];
    } else {
      memcpy(want, data, n * sizeof(int32_t));
    }
    a.data = data;
    CHECK_OK(api->PJRT_Client_BufferFromHostBuffer(&a));
    if (!a.buffer) continue;
    /* kImmutableZeroCopy may alias `data` (not transposed): done once the buffer is gone */
    const bool zero_copy = a.host_buffer_semantics == PJRT_HostBufferSemantics_kImmutableZeroCopy;
    if (!zero_copy) {
      event_done(a.done_with_host_buffer);
      memset(data, 0xee, n * sizeof(int32_t)); /* the buffer must not see this */
    }
    read_check(a.buffer, want, n, NULL);

    PJRT_Buffer_CopyToDevice_Args cd = {.struct_size = PJRT_Buffer_CopyToDevice_Args_STRUCT_SIZE,
                                        .buffer = a.buffer,
                                        .dst_device = other};
    CHECK_OK(api->PJRT_Buffer_CopyToDevice(&cd));
    if (cd.dst_buffer) read_check(cd.dst_buffer, want, n, NULL);
    PJRT_Buffer_CopyToMemory_Args cm = {.struct_size = PJRT_Buffer_CopyToMemory_Args_STRUCT_SIZE,
                                        .buffer = cd.dst_buffer ? cd.dst_buffer : a.buffer,
                                        .dst_memory = g_pinned[t % 2]};
    CHECK_OK(api->PJRT_Buffer_CopyToMemory(&cm));
    if (cm.dst_buffer) read_check(cm.dst_buffer, want, n, NULL);

    if (it % 5 == 0) {
      PJRT_Buffer_IncreaseExternalReferenceCount_Args inc = {
          .struct_size = PJRT_Buffer_IncreaseExternalReferenceCount_Args_STRUCT_SIZE,
          .buffer = a.buffer};
      CHECK_OK(api->PJRT_Buffer_IncreaseExternalReferenceCount(&inc));
      PJRT_Buffer_Delete_Args del = {.struct_size = PJRT_Buffer_Delete_Args_STRUCT_SIZE,
                                     .buffer = a.buffer};
      CHECK_OK(api->PJRT_Buffer_Delete(&del));
      PJRT_Buffer_DecreaseExternalReferenceCount_Args dec = {
          .struct_size = PJRT_Buffer_DecreaseExternalReferenceCount_Args_STRUCT_SIZE,
          .buffer = a.buffer};
      CHECK_OK(api->PJRT_Buffer_DecreaseExternalReferenceCount(&dec));
    }
    destroy(a.buffer);
    if (cd.dst_buffer) destroy(cd.dst_buffer);
    if (cm.dst_buffer) destroy(cm.dst_buffer);
    if (zero_copy) event_done(a.done_with_host_buffer);

    /* The shared buffer: readable until thread 0 deletes it halfway, then refused. */
    if (t == 0 && it == ITERATIONS / 2) {
      PJRT_Buffer_Delete_Args del = {.struct_size = PJRT_Buffer_Delete_Args_STRUCT_SIZE,
                                     .buffer = g_shared};
      CHECK_OK(api->PJRT_Buffer_Delete(&del));
    }
    PJRT_Error_Code code;
    read_check(g_shared, g_shared_data, 512, &code);
    EXPECT(code == PJRT_Error_Code_OK || code == PJRT_Error_Code_FAILED_PRECONDITION);
    if (code == PJRT_Error_Code_FAILED_PRECONDITION) shared_deleted_seen = true;
    EXPECT(!(shared_deleted_seen && code == PJRT_Error_Code_OK)); /* deletion is final */
  }
  /* Events: callbacks registered, the event set and destroyed at once (its callbacks still
   * run, each exactly once, on the callback thread). */
  for (int it = 0; it < ITERATIONS; it++) {
    PJRT_Event_Create_Args ec = {.struct_size = PJRT_Event_Create_Args_STRUCT_SIZE};
    CHECK_OK(api->PJRT_Event_Create(&ec));
    if (!ec.event) continue;
    PJRT_Event_OnReady_Args on = {.struct_size = PJRT_Event_OnReady_Args_STRUCT_SIZE,
                                  .event = ec.event,
                                  .callback = count_event_callback};
    CHECK_OK(api->PJRT_Event_OnReady(&on));
    CHECK_OK(api->PJRT_Event_OnReady(&on));
    PJRT_Event_Set_Args set = {.struct_size = PJRT_Event_Set_Args_STRUCT_SIZE,
                               .event = ec.event,
                               .error_code = it % 2 ? PJRT_Error_Code_OK : PJRT_Error_Code_ABORTED,
                               .error_message = "x",
                               .error_message_size = 1};
    CHECK_OK(api->PJRT_Event_Set(&set));
    PJRT_Event_Destroy_Args d = {.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE,
                                 .event = ec.event};
    CHECK_OK(api->PJRT_Event_Destroy(&d));
  }
  free(data);
  free(want);
  return NULL;
}

static void test_stress_buffers(void **state) {
  (void)state;
  PJRT_NamedValue o[2] = {pjrt_test_opt_string("platform", "cpu"),
                          pjrt_test_opt_int("num_devices", 2)};
  g_client = pjrt_test_client(api, o, 2);
  PJRT_Client_Devices_Args d = {.struct_size = PJRT_Client_Devices_Args_STRUCT_SIZE,
                                .client = g_client};
  PJRT_CHECK(api, api->PJRT_Client_Devices(&d));
  assert_int_equal(d.num_devices, 2);
  for (int i = 0; i < 2; i++) {
    g_dev[i] = d.devices[i];
    PJRT_Device_AddressableMemories_Args m = {
        .struct_size = PJRT_Device_AddressableMemories_Args_STRUCT_SIZE, .device = g_dev[i]};
    PJRT_CHECK(api, api->PJRT_Device_AddressableMemories(&m));
    g_pinned[i] = m.memories[1];
  }
  for (int i = 0; i < 512; i++) g_shared_data[i] = i * 3 + 1;
  const int64_t sd[1] = {512};
  PJRT_Client_BufferFromHostBuffer_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
  a.client = g_client;
  a.data = g_shared_data;
  a.type = PJRT_Buffer_Type_S32;
  a.dims = sd;
  a.num_dims = 1;
  a.device = g_dev[0];
  PJRT_CHECK(api, api->PJRT_Client_BufferFromHostBuffer(&a));
  g_shared = a.buffer;
  event_done(a.done_with_host_buffer);

  pthread_t th[NUM_THREADS];
  for (int t = 0; t < NUM_THREADS; t++)
    assert_int_equal(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t), 0);
  for (int t = 0; t < NUM_THREADS; t++) pthread_join(th[t], NULL);
  assert_int_equal(atomic_load(&g_failures), 0);
  /* Every callback runs, and only once: the transfers' OnReady ones and the events' ones.
   * They run on the callback thread, possibly after the workers returned, so they are waited
   * for (counted at once, none of the transfers' had run yet in 1 of 30 runs at nice 19 beside
   * a busy loop and other stress tests). */
  int registered = atomic_load(&g_ready_registered);
  assert_true(registered > 0);
  pthread_mutex_lock(&g_event_mu);
  while (atomic_load(&g_callbacks) < registered || g_event_callbacks < NUM_THREADS * ITERATIONS * 2)
    pthread_cond_wait(&g_event_cv, &g_event_mu);
  pthread_mutex_unlock(&g_event_mu);
  usleep(20000);
  pthread_mutex_lock(&g_event_mu);
  assert_int_equal(atomic_load(&g_callbacks), registered);
  assert_int_equal(g_event_callbacks, NUM_THREADS * ITERATIONS * 2);
  pthread_mutex_unlock(&g_event_mu);

  PJRT_Buffer_Destroy_Args bd = {.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE,
                                 .buffer = g_shared};
  PJRT_CHECK(api, api->PJRT_Buffer_Destroy(&bd));
  for (int i = 0; i < 2; i++) {
    PJRT_Device_MemoryStats_Args ms = {.struct_size = PJRT_Device_MemoryStats_Args_STRUCT_SIZE,
                                       .device = g_dev[i]};
    PJRT_CHECK(api, api->PJRT_Device_MemoryStats(&ms));
    assert_int_equal(ms.bytes_in_use, 0);
    assert_true(ms.num_allocs > 0);
  }
  pjrt_test_client_destroy(api, g_client);
}

int main(void) {
  api = pjrt_test_load();
  if (!api) return 1;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_stress_buffers)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
