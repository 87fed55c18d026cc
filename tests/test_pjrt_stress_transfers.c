/* Asynchronous uploads of the plugin (plugin/pjrt_buffer.c, "asynchronous transfers"), run
 * in-process through GetPjrtApi's table, with the plugin's internals at hand to hold a device's
 * transfer thread (or its queue thread) on a gate: so what must happen on those threads is
 * shown to happen there, not measured.
 *
 * - BufferFromHostBuffer with kImmutableUntilTransferCompletes of 100 KiB or more returns while
 *   its copy waits on the device's transfer thread (done_with_host_buffer and the buffer's
 *   ready event pending), then holds the data (dense and strided sources); smaller transfers,
 *   the other copying semantics, a client with async_transfers off (or
 *   $KILN_ASYNC_TRANSFERS=0), one whose executes are
 *   "never" asynchronous, and an upload into a full transfer queue copy in the call.
 * - A read of a buffer still being transferred, and an execute of it, wait for the copy.
 * - Uploads never wait for the device's runs: one completes while the queue thread is held,
 *   one that fulfils the alias buffer a queued run waits for completes (a first version,
 *   which queued uploads behind the runs, hung there), one made on the queue thread itself
 *   (an FFI handler's) completes.
 * - Client_Destroy waits for the transfers.
 * - Stress (ThreadSanitizer runs it): threads upload, compute, read and donate at once, each
 *   step's results checked. */
#define PJRT_TEST_IN_PROCESS 1

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/pjrt/pjrt_exec_util.h"

#include "plugin/pjrt_objects.h"

enum { N = 262144 }; /* f32 elements: 1 MiB, past KILN_PJRT_ASYNC_TRANSFER_BYTES */

static const PJRT_Api *api;

/* ---- gates on a device's threads ------------------------------------------------------- */

typedef struct gate {
  kiln_pjrt_work_t work;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool running, open;
} gate_t;

/* Gates on the device's transfer thread (uploads) and on its queue thread (runs). */
static gate_t g_transfers = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
static gate_t g_queue = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void gate_run(kiln_pjrt_work_t *w) {
  gate_t *g = (gate_t *)w;
  pthread_mutex_lock(&g->mu);
  g->running = true;
  pthread_cond_broadcast(&g->cv);
  while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
  g->running = false;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

/* Holds the thread of `q` at `g` until gate_open: returns once the thread waits there. */
static void gate_close(gate_t *g, kiln_pjrt_queue_t *q) {
  pthread_mutex_lock(&g->mu);
  g->open = false;
  pthread_mutex_unlock(&g->mu);
  g->work.run = gate_run;
  assert_null(kiln_pjrt_queue_push(q, &g->work));
  pthread_mutex_lock(&g->mu);
  while (!g->running) pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
}

/* Lets the thread go, and waits until it has left the gate (which may then be closed again). */
static void gate_open(gate_t *g) {
  pthread_mutex_lock(&g->mu);
  g->open = true;
  pthread_cond_broadcast(&g->cv);
  while (g->running) pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
}

static void *open_later(void *arg) {
  usleep(50 * 1000);
  gate_open(arg);
  return NULL;
}

/* ---- helpers ------------------------------------------------------------------------------ */

/* A host client; `executes`: its async_execute. */
static PJRT_Client *client_with(bool async_transfers, const char *executes) {
  PJRT_NamedValue o[4] = {pjrt_test_opt_string("platform", "cpu"),
                          pjrt_test_opt_string("cache_dir", ""),
                          pjrt_test_opt_string("async_execute", executes),
                          pjrt_test_opt_bool("async_transfers", async_transfers)};
  return pjrt_test_client(api, o, 4);
}

static PJRT_Client *client(bool async_transfers) {
  return client_with(async_transfers, "always");
}

static bool is_ready(PJRT_Event *e) {
  PJRT_Event_IsReady_Args a = {.struct_size = PJRT_Event_IsReady_Args_STRUCT_SIZE, .event = e};
  PJRT_CHECK(api, api->PJRT_Event_IsReady(&a));
  return a.is_ready;
}

static PJRT_Event *ready_event(PJRT_Buffer *b) {
  PJRT_Buffer_ReadyEvent_Args r = {.struct_size = PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE,
                                   .buffer = b};
  PJRT_CHECK(api, api->PJRT_Buffer_ReadyEvent(&r));
  return r.event;
}

/* BufferFromHostBuffer of f32 `dims` (rank 1 or 2) from `data` with `semantics`; `strides`:
 * byte strides or NULL; *done: done_with_host_buffer. */
static PJRT_Buffer *upload(PJRT_Client *c, const float *data, const int64_t *dims, size_t rank,
                           const int64_t *strides, PJRT_HostBufferSemantics semantics,
                           PJRT_Event **done) {
  PJRT_Client_BufferFromHostBuffer_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
  a.client = c;
  a.data = data;
  a.type = PJRT_Buffer_Type_F32;
  a.dims = dims;
  a.num_dims = rank;
  a.byte_strides = strides;
  a.num_byte_strides = strides ? rank : 0;
  a.host_buffer_semantics = semantics;
  PJRT_CHECK(api, api->PJRT_Client_BufferFromHostBuffer(&a));
  *done = a.done_with_host_buffer;
  return a.buffer;
}

/* Starts ToHostBuffer of all of `b` into dst; returns its event. */
static PJRT_Event *start_read(PJRT_Buffer *b, float *dst, size_t n) {
  PJRT_Buffer_ToHostBuffer_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
  a.src = b;
  a.dst = dst;
  a.dst_size = n * sizeof(float);
  PJRT_CHECK(api, api->PJRT_Buffer_ToHostBuffer(&a));
  return a.event;
}

static float *numbers(size_t n, float base) {
  float *x = malloc(n * sizeof(float));
  assert_non_null(x);
  for (size_t i = 0; i < n; i++) x[i] = base + (float)(i % 1000);
  return x;
}

static const char *kAddOne =
    "HloModule add_one\n"
    "ENTRY main {\n"
    "  p = f32[262144] parameter(0)\n"
    "  one = f32[] constant(1)\n"
    "  b = f32[262144] broadcast(one), dimensions={}\n"
    "  ROOT s = f32[262144] add(p, b)\n"
    "}\n";

/* ---- tests -------------------------------------------------------------------------------- */

/* A 1 MiB kImmutableUntilTransferCompletes upload of x on a new client (async_transfers on, a
 * compiled x + 1 in `add`) whose copy waits behind the gate on the device's transfer thread. */
typedef struct held {
  PJRT_Client *c;
  PJRT_Device *d;
  PJRT_LoadedExecutable *add;
  float *x;
  PJRT_Buffer *b;
  PJRT_Event *done; /* done_with_host_buffer */
} held_t;

static held_t held_upload_on(float base, const char *executes) {
  held_t h = {.c = client_with(true, executes), .x = numbers(N, base)};
  h.d = pjrt_exec_device(api, h.c, 0);
  h.add = pjrt_exec_compile(api, h.c, kAddOne);
  int64_t dims[1] = {N};
  gate_close(&g_transfers, &h.d->transfers);
  h.b = upload(h.c, h.x, dims, 1, NULL, PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes,
               &h.done);
  return h;
}

static held_t held_upload(float base) {
  return held_upload_on(base, "always");
}

/* Ends `h` (the gate open by then): its buffer (if kept), executable, client, data. */
static void held_end(held_t *h) {
  pjrt_exec_buffer_destroy(api, h->b);
  pjrt_exec_destroy(api, h->add);
  pjrt_test_client_destroy(api, h->c);
  free(h->x);
}

static void test_a_large_transfer_returns_before_its_copy(void **state) {
  (void)state;
  held_t h = held_upload(0.5f);
  PJRT_Event *ready = ready_event(h.b);
  assert_false(is_ready(h.done)); /* the copy waits behind the gate */
  assert_false(is_ready(ready));
  /* The copying semantics that must copy in the call, and transfers under 100 KiB, do. */
  PJRT_Event *done2 = NULL, *done3 = NULL;
  int64_t dims[1] = {N}, small[1] = {KILN_PJRT_ASYNC_TRANSFER_BYTES / sizeof(float) - 1};
  PJRT_Buffer *b2 =
      upload(h.c, h.x, dims, 1, NULL, PJRT_HostBufferSemantics_kImmutableOnlyDuringCall, &done2);
  PJRT_Buffer *b3 = upload(h.c, h.x, small, 1, NULL,
                           PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes, &done3);
  assert_true(is_ready(done2));
  assert_true(is_ready(done3));
  PJRT_Event *ready3 = ready_event(b3);
  assert_true(is_ready(ready3));
  pjrt_exec_event_destroy(api, ready3);
  gate_open(&g_transfers);
  pjrt_exec_await(api, h.done);
  pjrt_exec_await(api, ready);
  pjrt_exec_await(api, done2);
  pjrt_exec_await(api, done3);
  float *y = calloc(N, sizeof(float));
  pjrt_exec_read(api, h.b, y, N * sizeof(float));
  assert_memory_equal(h.x, y, N * sizeof(float));
  memset(y, 0, N * sizeof(float));
  pjrt_exec_read(api, b2, y, N * sizeof(float));
  assert_memory_equal(h.x, y, N * sizeof(float));
  free(y);
  pjrt_exec_buffer_destroy(api, b2);
  pjrt_exec_buffer_destroy(api, b3);
  held_end(&h);
}

static void test_a_strided_large_transfer_is_laid_out_in_the_background(void **state) {
  (void)state;
  PJRT_Client *c = client(true);
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  enum { R = 512, C = 512 };
  float *x = numbers((size_t)R * C, 3.0f); /* read column-major: element (i, j) at x[j * R + i] */
  int64_t dims[2] = {R, C}, strides[2] = {sizeof(float), (int64_t)(R * sizeof(float))};
  gate_close(&g_transfers, &d->transfers);
  PJRT_Event *done = NULL;
  PJRT_Buffer *b = upload(c, x, dims, 2, strides,
                          PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes, &done);
  assert_false(is_ready(done));
  gate_open(&g_transfers);
  pjrt_exec_await(api, done);
  float *y = calloc((size_t)R * C, sizeof(float));
  pjrt_exec_read(api, b, y, (size_t)R * C * sizeof(float));
  for (int i = 0; i < R; i++)
    for (int j = 0; j < C; j++) assert_true(y[(size_t)i * C + j] == x[(size_t)j * R + i]);
  free(y);
  pjrt_exec_buffer_destroy(api, b);
  pjrt_test_client_destroy(api, c);
  free(x);
}

static void test_async_transfers_off_or_synchronous_executes_copy_in_the_call(void **state) {
  (void)state;
  float *x = numbers(N, 1.0f);
  int64_t dims[1] = {N};
  /* the option off; executes "never"; the option not given and $KILN_ASYNC_TRANSFERS=0 */
  PJRT_Client *cs[3] = {client(false), client_with(true, "never"), NULL};
  setenv("KILN_ASYNC_TRANSFERS", "0", 1);
  PJRT_NamedValue o[2] = {pjrt_test_opt_string("platform", "cpu"),
                          pjrt_test_opt_string("cache_dir", "")};
  cs[2] = pjrt_test_client(api, o, 2);
  unsetenv("KILN_ASYNC_TRANSFERS");
  for (int k = 0; k < 3; k++) {
    PJRT_Device *d = pjrt_exec_device(api, cs[k], 0);
    gate_close(&g_transfers, &d->transfers);
    PJRT_Event *done = NULL;
    PJRT_Buffer *b = upload(cs[k], x, dims, 1, NULL,
                            PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes, &done);
    assert_true(is_ready(done));
    PJRT_Event *ready = ready_event(b);
    assert_true(is_ready(ready));
    pjrt_exec_event_destroy(api, ready);
    gate_open(&g_transfers);
    pjrt_exec_await(api, done);
    pjrt_exec_buffer_destroy(api, b);
    pjrt_test_client_destroy(api, cs[k]);
  }
  free(x);
}

/* With executes "always" and "auto" (whose cheap runs on an idle device run in the call: an
 * argument still being copied sends the run to the queue). */
static void test_an_execute_waits_for_its_arguments_transfer(void **state) {
  const char *executes = *state;
  held_t h = held_upload_on(2.0f, executes);
  PJRT_Buffer *out = NULL;
  PJRT_Event *ran = NULL;
  PJRT_CHECK(api, pjrt_exec_start(api, h.add, &h.b, 1, &out, NULL, &ran));
  usleep(20 * 1000);
  assert_false(is_ready(ran)); /* its argument's copy waits behind the gate */
  gate_open(&g_transfers);
  pjrt_exec_await(api, ran);
  pjrt_exec_await(api, h.done);
  float *y = calloc(N, sizeof(float));
  pjrt_exec_read(api, out, y, N * sizeof(float));
  for (size_t i = 0; i < N; i++) assert_true(y[i] == h.x[i] + 1.0f);
  free(y);
  pjrt_exec_buffer_destroy(api, out);
  held_end(&h);
}

static void test_a_read_of_a_buffer_being_transferred_waits_for_the_copy(void **state) {
  (void)state;
  held_t h = held_upload(6.0f);
  float *y = calloc(N, sizeof(float));
  PJRT_Event *read = start_read(h.b, y, N); /* hooked on the copy: returns at once */
  usleep(20 * 1000);
  assert_false(is_ready(read));
  gate_open(&g_transfers);
  pjrt_exec_await(api, read);
  pjrt_exec_await(api, h.done);
  assert_memory_equal(h.x, y, N * sizeof(float));
  free(y);
  held_end(&h);
}

static void test_client_destroy_waits_for_the_transfers(void **state) {
  (void)state;
  held_t h = held_upload(16.0f);
  pjrt_exec_buffer_destroy(api, h.b); /* the copy still holds the memory */
  h.b = NULL;
  pjrt_exec_destroy(api, h.add);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, open_later, &g_transfers), 0);
  pjrt_test_client_destroy(api, h.c); /* returns once the gate opened and the copy ended */
  assert_true(is_ready(h.done));
  pjrt_exec_event_destroy(api, h.done);
  pthread_join(t, NULL);
  free(h.x);
}

/* A run queued on an alias buffer the caller fulfils with an upload it makes after queueing
 * the run: the upload must not wait for that run (a first version queued uploads behind the
 * device's runs; a review found this hang). */
static void test_an_upload_fulfilling_the_alias_a_queued_run_waits_for_completes(void **state) {
  (void)state;
  PJRT_Client *c = client(true);
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_LoadedExecutable *l = pjrt_exec_compile(api, c, kAddOne);
  float *x = numbers(N, 3.0f);
  int64_t dims[1] = {N};
  PJRT_FulfillAliasBufferCallback *cb = NULL;
  PJRT_Buffer *alias = pjrt_exec_alias_buffer(api, c, d, dims, 1, &cb);
  PJRT_Buffer *out = NULL;
  PJRT_Event *ran = NULL;
  PJRT_CHECK(api, pjrt_exec_start(api, l, &alias, 1, &out, NULL, &ran)); /* waits for alias */
  PJRT_Event *done = NULL;
  PJRT_Buffer *b =
      upload(c, x, dims, 1, NULL, PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes, &done);
  pjrt_exec_await(api, done); /* the upload does not wait for the run */
  PJRT_CHECK(api, pjrt_exec_fulfil(api, cb, b));
  pjrt_exec_await(api, ran);
  float *y = calloc(N, sizeof(float));
  pjrt_exec_read(api, out, y, N * sizeof(float));
  for (size_t i = 0; i < N; i++) assert_true(y[i] == x[i] + 1.0f);
  free(y);
  pjrt_exec_buffer_destroy(api, out);
  pjrt_exec_buffer_destroy(api, alias);
  pjrt_exec_buffer_destroy(api, b);
  pjrt_exec_destroy(api, l);
  pjrt_test_client_destroy(api, c);
  free(x);
}

/* Uploads do not wait for the device's runs: with its queue thread held, one completes. */
static void test_an_upload_does_not_wait_for_the_devices_runs(void **state) {
  (void)state;
  PJRT_Client *c = client(true);
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  float *x = numbers(N, 4.0f);
  int64_t dims[1] = {N};
  gate_close(&g_queue, &d->queue);
  PJRT_Event *done = NULL;
  PJRT_Buffer *b =
      upload(c, x, dims, 1, NULL, PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes, &done);
  PJRT_Event *ready = ready_event(b);
  pjrt_exec_await(api, done);
  pjrt_exec_await(api, ready);
  gate_open(&g_queue);
  float *y = calloc(N, sizeof(float));
  pjrt_exec_read(api, b, y, N * sizeof(float));
  assert_memory_equal(x, y, N * sizeof(float));
  free(y);
  pjrt_exec_buffer_destroy(api, b);
  pjrt_test_client_destroy(api, c);
  free(x);
}

/* Work on the device's queue thread (as an FFI handler of a queued run) that uploads and waits
 * for the upload. */
typedef struct own_thread_upload {
  kiln_pjrt_work_t work;
  PJRT_Client *c;
  const float *x;
  bool done;
  pthread_mutex_t mu;
  pthread_cond_t cv;
} own_thread_upload_t;

static void own_thread_upload_run(kiln_pjrt_work_t *w) {
  own_thread_upload_t *o = (own_thread_upload_t *)w;
  int64_t dims[1] = {N};
  PJRT_Event *done = NULL;
  PJRT_Buffer *b = upload(o->c, o->x, dims, 1, NULL,
                          PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes, &done);
  pjrt_exec_await(api, done);
  pjrt_exec_buffer_destroy(api, b);
  pthread_mutex_lock(&o->mu);
  o->done = true;
  pthread_cond_broadcast(&o->cv);
  pthread_mutex_unlock(&o->mu);
}

static void test_an_upload_made_on_the_devices_queue_thread_completes(void **state) {
  (void)state;
  PJRT_Client *c = client(true);
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  float *x = numbers(N, 5.0f);
  own_thread_upload_t o = {.work.run = own_thread_upload_run,
                           .c = c,
                           .x = x,
                           .mu = PTHREAD_MUTEX_INITIALIZER,
                           .cv = PTHREAD_COND_INITIALIZER};
  assert_null(kiln_pjrt_queue_push(&d->queue, &o.work));
  pthread_mutex_lock(&o.mu);
  while (!o.done) pthread_cond_wait(&o.cv, &o.mu);
  pthread_mutex_unlock(&o.mu);
  pjrt_test_client_destroy(api, c);
  free(x);
}

static void noop_run(kiln_pjrt_work_t *w) {
  (void)w;
}

/* A full transfer queue: the upload copies in the call instead of waiting for room. */
static void test_an_upload_to_a_full_queue_copies_in_the_call(void **state) {
  (void)state;
  PJRT_Client *c = client(true);
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  float *x = numbers(N, 7.0f);
  int64_t dims[1] = {N};
  gate_close(&g_transfers, &d->transfers);
  kiln_pjrt_work_t fill[KILN_PJRT_QUEUE_DEPTH - 1];
  for (int i = 0; i < KILN_PJRT_QUEUE_DEPTH - 1; i++) {
    fill[i].run = noop_run;
    assert_null(kiln_pjrt_queue_push(&d->transfers, &fill[i]));
  }
  PJRT_Event *done = NULL;
  PJRT_Buffer *b =
      upload(c, x, dims, 1, NULL, PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes, &done);
  assert_true(is_ready(done));
  gate_open(&g_transfers);
  pjrt_exec_await(api, done);
  float *y = calloc(N, sizeof(float));
  pjrt_exec_read(api, b, y, N * sizeof(float));
  assert_memory_equal(x, y, N * sizeof(float));
  free(y);
  pjrt_exec_buffer_destroy(api, b);
  pjrt_test_client_destroy(api, c); /* (the queue ran the no-ops: `fill` may go) */
  free(x);
}

/* 128 KiB steps: x + 1 and 2x in place (donated), from several threads on one device. */
static const char *kAddOneSmall =
    "HloModule add_one_small\n"
    "ENTRY main {\n"
    "  p = f32[32768] parameter(0)\n"
    "  one = f32[] constant(1)\n"
    "  b = f32[32768] broadcast(one), dimensions={}\n"
    "  ROOT s = f32[32768] add(p, b)\n"
    "}\n";
static const char *kDoubleInPlaceSmall =
    "HloModule double_in_place_small, input_output_alias={ {}: (0, {}, may-alias) }\n"
    "ENTRY main {\n"
    "  p = f32[32768] parameter(0)\n"
    "  ROOT s = f32[32768] add(p, p)\n"
    "}\n";

typedef struct stress_job {
  PJRT_Client *client;
  PJRT_LoadedExecutable *add, *dbl;
  int id, steps;
  int wrong; /* elements that came out wrong */
} stress_job_t;

static void *stress_thread(void *arg) {
  stress_job_t *j = arg;
  enum { M = 32768 };
  int64_t dims[1] = {M};
  float *y = malloc(M * sizeof(float)), *z = malloc(M * sizeof(float));
  for (int step = 0; step < j->steps; step++) {
    float *x = numbers(M, (float)(j->id * 1000 + step));
    PJRT_Event *done = NULL;
    PJRT_Buffer *b = upload(j->client, x, dims, 1, NULL,
                            PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes, &done);
    /* Even steps: x + 1 (the upload destroyed at once), then 2(x + 1) in place; odd steps:
     * 2x in the upload's own memory (donated while it may still be copied), then 2x + 1. */
    const bool even = step % 2 == 0;
    PJRT_LoadedExecutable *first = even ? j->add : j->dbl, *second = even ? j->dbl : j->add;
    PJRT_Buffer *out1 = NULL, *out2 = NULL;
    PJRT_Event *ran1 = NULL, *ran2 = NULL;
    PJRT_CHECK(api, pjrt_exec_start(api, first, &b, 1, &out1, NULL, &ran1));
    pjrt_exec_buffer_destroy(api, b); /* the run holds its memory (donated: b reads deleted) */
    PJRT_Event *read = start_read(out1, y, M);
    PJRT_CHECK(api, pjrt_exec_start(api, second, &out1, 1, &out2, NULL, &ran2));
    PJRT_Event *read2 = start_read(out2, z, M);
    pjrt_exec_await(api, read);
    pjrt_exec_await(api, read2);
    pjrt_exec_await(api, ran1);
    pjrt_exec_await(api, ran2);
    pjrt_exec_await(api, done);
    for (int i = 0; i < M; i++) {
      j->wrong += y[i] != (even ? x[i] + 1.0f : 2.0f * x[i]);
      j->wrong += z[i] != (even ? 2.0f * (x[i] + 1.0f) : 2.0f * x[i] + 1.0f);
    }
    pjrt_exec_buffer_destroy(api, out1);
    pjrt_exec_buffer_destroy(api, out2);
    free(x);
  }
  free(y);
  free(z);
  return NULL;
}

static void test_threads_upload_compute_read_and_donate_at_once(void **state) {
  (void)state;
  PJRT_Client *c = client(true);
  PJRT_LoadedExecutable *add = pjrt_exec_compile(api, c, kAddOneSmall);
  PJRT_LoadedExecutable *dbl = pjrt_exec_compile(api, c, kDoubleInPlaceSmall);
  enum { T = 3 };
  stress_job_t jobs[T];
  pthread_t threads[T];
  for (int t = 0; t < T; t++) {
    jobs[t] = (stress_job_t){.client = c, .add = add, .dbl = dbl, .id = t, .steps = 40};
    assert_int_equal(pthread_create(&threads[t], NULL, stress_thread, &jobs[t]), 0);
  }
  for (int t = 0; t < T; t++) {
    pthread_join(threads[t], NULL);
    assert_int_equal(jobs[t].wrong, 0);
  }
  pjrt_exec_destroy(api, add);
  pjrt_exec_destroy(api, dbl);
  pjrt_test_client_destroy(api, c);
}

int main(void) {
  api = pjrt_test_load();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_large_transfer_returns_before_its_copy),
      cmocka_unit_test(test_a_strided_large_transfer_is_laid_out_in_the_background),
      cmocka_unit_test(test_async_transfers_off_or_synchronous_executes_copy_in_the_call),
      cmocka_unit_test_prestate(test_an_execute_waits_for_its_arguments_transfer, "always"),
      cmocka_unit_test_prestate(test_an_execute_waits_for_its_arguments_transfer, "auto"),
      cmocka_unit_test(test_a_read_of_a_buffer_being_transferred_waits_for_the_copy),
      cmocka_unit_test(test_client_destroy_waits_for_the_transfers),
      cmocka_unit_test(test_an_upload_fulfilling_the_alias_a_queued_run_waits_for_completes),
      cmocka_unit_test(test_an_upload_does_not_wait_for_the_devices_runs),
      cmocka_unit_test(test_an_upload_made_on_the_devices_queue_thread_completes),
      cmocka_unit_test(test_an_upload_to_a_full_queue_copies_in_the_call),
      cmocka_unit_test(test_threads_upload_compute_read_and_donate_at_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
