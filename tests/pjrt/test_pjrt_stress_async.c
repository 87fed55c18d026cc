/* Asynchronous executes (run under ThreadSanitizer in CI with the other stress tests): an
 * Execute whose run is not cheap returns before the run ends, its completion event and output
 * buffers become ready when it does, and a later execute on the same device runs after it
 * (also a cheap one, which otherwise runs inside its Execute). A custom call that waits for a
 * gate the test opens holds the run, so "before the run ends" is observed, not assumed.
 *
 * Also: async_execute "never" runs in the call; a failed run reaches its event, its outputs
 * and an execute that reads them; an argument destroyed while its run waits stays readable by
 * the run; Client_Destroy waits for queued runs, and ends with an error the fillings nobody will
 * make any more (an alias buffer, a transfer, a control dependency) that queued runs wait for
 * (a fulfilment racing with it says so);
 * ToHostBuffer and CopyRawToHost of an output
 * still being computed return before its run ends, read it before a later execute donates it,
 * and fail with its run's error, and so does CopyToDevice (to a second host device, the copy
 * pending until then, and a read and a copy of the copy too; a chain of 100,000 copies of copies
 * completes without nesting a call per link); DonateWithControlDependency of
 * outputs just computed, some with a read pending, is never refused; a read of a pending output
 * does not wait for a run queued after it (one waiting for a transfer the reader makes next);
 * CopyRawToHostFuture of a pending output waits for nothing in the call or the destination's
 * callback, and reads the output as computed though an execute that would donate it came between;
 * 4 threads read a buffer
 * through queued runs while a cheap execute (run inside its call) donates it: every read sees the
 * buffer before the donation, or is refused; a multi-device execute (2 host devices, an all-reduce
 * after the gate) returns before its run ends too, and 3 threads' multi-device executes interleave
 * on the devices' queues without a hang; and 4 threads each run a chain of 100
 * executes that donate their input (JAX's training-loop pattern) without waiting between
 * them, on a client that queues every execute, reading the chain's value as it goes. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <cmocka.h>

#include "pjrt_exec_util.h"
#include "pjrt_ffi_util.h"
#include "skip_util.h"
#include "xla/pjrt/c/pjrt_c_api_ffi_extension.h"

static const PJRT_Api *api;

/* ---- the gate handler: ret 0 = arg 0 + 1 (f32[4]) once g_gate is open ---- */

static atomic_int g_gate;
static atomic_int g_gate_runs; /* runs of the gate handler that finished */

static void sleep_us(long us) {
  struct timespec t = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&t, NULL);
}

static XLA_FFI_Error *gate(XLA_FFI_CallFrame *f) {
  if (pjrt_ffi_metadata_query(f)) return NULL;
  /* A run inside an Execute that the test expected to return first would wait here for
   * ever: after 10 s it fails instead (and so does the test). */
  for (int waited = 0; !atomic_load(&g_gate); waited++) {
    if (waited == 50000) return pjrt_ffi_error(f->api, "the gate was never opened");
    sleep_us(200);
  }
  const float *x = ((XLA_FFI_Buffer *)f->args.args[0])->data;
  float *y = ((XLA_FFI_Buffer *)f->rets.rets[0])->data;
  for (int i = 0; i < 4; i++) y[i] = x[i] + 1;
  atomic_fetch_add(&g_gate_runs, 1);
  return NULL;
}

static XLA_FFI_Error *fail_handler(XLA_FFI_CallFrame *f) {
  if (pjrt_ffi_metadata_query(f)) return NULL;
  return pjrt_ffi_error(f->api, "kiln_async_fail says no");
}

static void register_handler(const char *name, void *fn) {
  const PJRT_FFI_Extension *ext = NULL;
  for (const PJRT_Extension_Base *e = api->extension_start; e; e = e->next)
    if (e->type == PJRT_Extension_Type_FFI) ext = (const PJRT_FFI_Extension *)e;
  assert_non_null(ext);
  PJRT_FFI_Register_Handler_Args ha;
  memset(&ha, 0, sizeof ha);
  ha.struct_size = PJRT_FFI_Register_Handler_Args_STRUCT_SIZE;
  ha.target_name = name;
  ha.target_name_size = strlen(name);
  ha.handler = fn;
  ha.platform_name = "Host";
  ha.platform_name_size = 4;
  PJRT_CHECK(api, ext->register_handler(&ha));
}

static const char *kGate =
    "HloModule async_gate\n"
    "ENTRY main {\n"
    "  p = f32[4] parameter(0)\n"
    "  ROOT g = f32[4] custom-call(p), custom_call_target=\"kiln_async_gate\",\n"
    "      api_version=API_VERSION_TYPED_FFI\n"
    "}\n";

static const char *kFail =
    "HloModule async_fail\n"
    "ENTRY main {\n"
    "  p = f32[4] parameter(0)\n"
    "  ROOT g = f32[4] custom-call(p), custom_call_target=\"kiln_async_fail\",\n"
    "      api_version=API_VERSION_TYPED_FFI\n"
    "}\n";

/* Cheap: runs inside its Execute when the device has nothing queued. */
static const char *kAddOne =
    "HloModule async_add_one\n"
    "ENTRY main {\n"
    "  p = f32[4] parameter(0)\n"
    "  one = f32[] constant(1)\n"
    "  b = f32[4] broadcast(one), dimensions={}\n"
    "  ROOT s = f32[4] add(p, b)\n"
    "}\n";

/* x + 1 into x's own memory (the input is donated). */
static const char *kStep =
    "HloModule async_step, input_output_alias={ {}: (0, {}, may-alias) }\n"
    "ENTRY main {\n"
    "  p = f32[256] parameter(0)\n"
    "  one = f32[] constant(1)\n"
    "  b = f32[256] broadcast(one), dimensions={}\n"
    "  ROOT s = f32[256] add(p, b)\n"
    "}\n";

/* Cheap (runs inside its Execute when nothing is queued): -x into x's memory. */
static const char *kNegate =
    "HloModule async_negate, input_output_alias={ {}: (0, {}, may-alias) }\n"
    "ENTRY main {\n"
    "  p = f32[4] parameter(0)\n"
    "  ROOT n = f32[4] negate(p)\n"
    "}\n";

static PJRT_Client *client(const char *mode) {
  PJRT_NamedValue o[3] = {pjrt_test_opt_string("platform", "cpu"),
                          pjrt_test_opt_string("cache_dir", ""),
                          pjrt_test_opt_string("async_execute", mode)};
  return pjrt_test_client(api, o, 3);
}

/* Starts `l` on its device; returns Execute's error; *done: the completion event. */
static PJRT_Error *execute(PJRT_LoadedExecutable *l, PJRT_Buffer *const *args, size_t n,
                           PJRT_Buffer **outs, PJRT_Event **done) {
  return pjrt_exec_start(api, l, args, n, outs, NULL, done);
}

static bool event_ready(PJRT_Event *e) {
  PJRT_Event_IsReady_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Event_IsReady_Args_STRUCT_SIZE;
  a.event = e;
  PJRT_CHECK(api, api->PJRT_Event_IsReady(&a));
  return a.is_ready;
}

static PJRT_Event *buffer_ready_event(PJRT_Buffer *b) {
  PJRT_Buffer_ReadyEvent_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE;
  a.buffer = b;
  PJRT_CHECK(api, api->PJRT_Buffer_ReadyEvent(&a));
  return a.event;
}

static PJRT_Error *await_error(PJRT_Event *e) {
  return pjrt_exec_await_error(api, e);
}

/* Starts ToHostBuffer of `b`: the call's error; *event its event. */
static PJRT_Error *to_host(PJRT_Buffer *b, void *dst, size_t size, PJRT_Event **event) {
  PJRT_Buffer_ToHostBuffer_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
  a.src = b;
  a.dst = dst;
  a.dst_size = size;
  PJRT_Error *e = api->PJRT_Buffer_ToHostBuffer(&a);
  *event = a.event;
  return e;
}

static PJRT_Error *read_error(PJRT_Buffer *b, void *dst, size_t size) {
  PJRT_Event *event = NULL;
  PJRT_Error *e = to_host(b, dst, size, &event);
  if (!e && event) e = await_error(event);
  return e;
}

static const int64_t kDims4[1] = {4};

static void test_execute_returns_before_its_run_ends(void **state) {
  (void)state;
  atomic_store(&g_gate, 0);
  PJRT_Client *c = client("auto");
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_LoadedExecutable *lg = pjrt_exec_compile(api, c, kGate);
  PJRT_LoadedExecutable *la = pjrt_exec_compile(api, c, kAddOne);
  float x[4] = {1, 2, 3, 4};
  PJRT_Buffer *in = pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_F32, kDims4, 1);
  PJRT_Buffer *g = NULL, *a = NULL;
  PJRT_Event *gd = NULL, *ad = NULL;
  PJRT_CHECK(api, execute(lg, &in, 1, &g, &gd));
  /* Returned while the handler waits at the gate: nothing of the run is ready. */
  assert_non_null(g);
  assert_false(event_ready(gd));
  PJRT_Event *gr = buffer_ready_event(g);
  assert_false(event_ready(gr));
  /* Its argument may go now: the run holds the memory. */
  pjrt_exec_buffer_destroy(api, in);
  /* A cheap execute reading the pending output queues behind it (running it in the call
   * would wait at the gate). */
  PJRT_CHECK(api, execute(la, &g, 1, &a, &ad));
  assert_false(event_ready(ad));
  atomic_store(&g_gate, 1);
  PJRT_CHECK(api, await_error(ad));
  assert_true(event_ready(gd));
  PJRT_CHECK(api, await_error(gd));
  PJRT_CHECK(api, await_error(gr));
  float rg[4], ra[4];
  pjrt_exec_read(api, g, rg, sizeof(rg));
  pjrt_exec_read(api, a, ra, sizeof(ra));
  for (int i = 0; i < 4; i++) {
    assert_true(rg[i] == x[i] + 1);
    assert_true(ra[i] == x[i] + 2);
  }
  pjrt_exec_buffer_destroy(api, g);
  pjrt_exec_buffer_destroy(api, a);
  pjrt_exec_destroy(api, lg);
  pjrt_exec_destroy(api, la);
  pjrt_test_client_destroy(api, c);
}

/* An execute with an ExecuteContext is asynchronous too (it ran inside the call before): its
 * user data is copied, and the context (kept, as PJRT asks, until the run ends) is destroyed
 * only then. */
static void test_an_execute_with_a_context_returns_before_its_run_ends(void **state) {
  (void)state;
  atomic_store(&g_gate, 0);
  PJRT_Client *c = client("auto");
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_LoadedExecutable *lg = pjrt_exec_compile(api, c, kGate);
  float x[4] = {1, 2, 3, 4};
  PJRT_Buffer *in = pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_F32, kDims4, 1);
  PJRT_ExecuteContext_Create_Args ca;
  memset(&ca, 0, sizeof ca);
  ca.struct_size = PJRT_ExecuteContext_Create_Args_STRUCT_SIZE;
  PJRT_CHECK(api, api->PJRT_ExecuteContext_Create(&ca));
  PJRT_ExecuteOptions opts;
  memset(&opts, 0, sizeof opts);
  opts.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  opts.context = ca.context;
  PJRT_Buffer *g = NULL;
  PJRT_Event *gd = NULL;
  PJRT_CHECK(api, pjrt_exec_start(api, lg, &in, 1, &g, &opts, &gd));
  assert_false(event_ready(gd));
  atomic_store(&g_gate, 1);
  PJRT_CHECK(api, await_error(gd));
  float r[4];
  pjrt_exec_read(api, g, r, sizeof(r));
  for (int i = 0; i < 4; i++) assert_true(r[i] == x[i] + 1);
  PJRT_ExecuteContext_Destroy_Args da;
  memset(&da, 0, sizeof da);
  da.struct_size = PJRT_ExecuteContext_Destroy_Args_STRUCT_SIZE;
  da.context = ca.context;
  PJRT_CHECK(api, api->PJRT_ExecuteContext_Destroy(&da));
  pjrt_exec_buffer_destroy(api, g);
  pjrt_exec_buffer_destroy(api, in);
  pjrt_exec_destroy(api, lg);
  pjrt_test_client_destroy(api, c);
}

static atomic_int g_opened; /* set by open_gate_later just before it opens the gate */

static void *open_gate_later(void *arg) {
  (void)arg;
  sleep_us(50000);
  atomic_store(&g_opened, 1);
  atomic_store(&g_gate, 1);
  return NULL;
}

static void test_never_runs_in_the_call(void **state) {
  (void)state;
  atomic_store(&g_gate, 0);
  atomic_store(&g_opened, 0);
  PJRT_Client *c = client("never");
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_LoadedExecutable *lg = pjrt_exec_compile(api, c, kGate);
  float x[4] = {1, 2, 3, 4};
  PJRT_Buffer *in = pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_F32, kDims4, 1);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, open_gate_later, NULL), 0);
  PJRT_Buffer *g = NULL;
  PJRT_Event *gd = NULL;
  PJRT_CHECK(api, execute(lg, &in, 1, &g, &gd));
  assert_true(atomic_load(&g_opened)); /* Execute waited for the gate */
  assert_true(event_ready(gd));
  pthread_join(t, NULL);
  PJRT_CHECK(api, await_error(gd));
  float r[4];
  pjrt_exec_read(api, g, r, sizeof(r));
  for (int i = 0; i < 4; i++) assert_true(r[i] == x[i] + 1);
  pjrt_exec_buffer_destroy(api, g);
  pjrt_exec_buffer_destroy(api, in);
  pjrt_exec_destroy(api, lg);
  pjrt_test_client_destroy(api, c);
  /* A mode kiln does not know fails Create, naming it. */
  PJRT_NamedValue o[1] = {pjrt_test_opt_string("async_execute", "sometimes")};
  PJRT_Client_Create_Args ca;
  memset(&ca, 0, sizeof(ca));
  ca.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  ca.create_options = o;
  ca.num_options = 1;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_Create(&ca), PJRT_Error_Code_INVALID_ARGUMENT,
                    "sometimes");
}

static void test_failed_run_reaches_event_outputs_and_readers(void **state) {
  (void)state;
  PJRT_Client *c = client("auto");
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_LoadedExecutable *lf = pjrt_exec_compile(api, c, kFail);
  PJRT_LoadedExecutable *la = pjrt_exec_compile(api, c, kAddOne);
  float x[4] = {1, 2, 3, 4};
  PJRT_Buffer *in = pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_F32, kDims4, 1);
  PJRT_Buffer *f = NULL;
  PJRT_Event *fd = NULL;
  PJRT_CHECK(api, execute(lf, &in, 1, &f, &fd)); /* queued: the failure comes later */
  PJRT_EXPECT_ERROR(api, await_error(fd), PJRT_Error_Code_INVALID_ARGUMENT,
                    "kiln_async_fail says no");
  float r[4];
  PJRT_EXPECT_ERROR(api, read_error(f, r, sizeof(r)), PJRT_Error_Code_INVALID_ARGUMENT,
                    "the execution that computes the buffer failed");
  PJRT_EXPECT_ERROR(api, await_error(buffer_ready_event(f)), PJRT_Error_Code_INVALID_ARGUMENT,
                    "kiln_async_fail says no");
  /* An execute reading the failed output fails with its error (in the call or its event). */
  PJRT_Buffer *a = NULL;
  PJRT_EXPECT_ERROR(api, pjrt_exec_try_run(api, la, &f, 1, &a, NULL),
                    PJRT_Error_Code_INVALID_ARGUMENT, "kiln_async_fail says no");
  assert_null(a);
  pjrt_exec_buffer_destroy(api, f);
  pjrt_exec_buffer_destroy(api, in);
  pjrt_exec_destroy(api, lf);
  pjrt_exec_destroy(api, la);
  pjrt_test_client_destroy(api, c);
}

static void *destroy_client(void *arg) {
  pjrt_test_client_destroy(api, arg);
  return NULL;
}

static void test_client_destroy_waits_for_queued_runs(void **state) {
  (void)state;
  atomic_store(&g_gate, 0);
  atomic_store(&g_gate_runs, 0);
  PJRT_Client *c = client("auto");
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_LoadedExecutable *lg = pjrt_exec_compile(api, c, kGate);
  float x[4] = {1, 2, 3, 4};
  PJRT_Buffer *in = pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_F32, kDims4, 1);
  enum { RUNS = 10 };
  for (int k = 0; k < RUNS; k++) {
    PJRT_Buffer *g = NULL;
    PJRT_Event *gd = NULL;
    PJRT_CHECK(api, execute(lg, &in, 1, &g, &gd));
    /* the caller lets go of everything at once: the queue keeps what the run needs */
    pjrt_exec_buffer_destroy(api, g);
    pjrt_exec_event_destroy(api, gd);
  }
  pjrt_exec_buffer_destroy(api, in);
  pjrt_exec_destroy(api, lg);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, destroy_client, c), 0);
  sleep_us(20000);
  assert_int_equal(atomic_load(&g_gate_runs), 0); /* still at the gate */
  atomic_store(&g_gate, 1);
  pthread_join(t, NULL);
  assert_int_equal(atomic_load(&g_gate_runs), RUNS); /* Destroy returned after every run */
}

/* DonateWithControlDependency of `b`: the call's outputs (out_buffer, the callback). */
static PJRT_Buffer_DonateWithControlDependency_Args donate_later(PJRT_Buffer *b) {
  return pjrt_exec_donate_later(api, b);
}

static void dependency_ready(const PJRT_Buffer_DonateWithControlDependency_Args *a) {
  pjrt_exec_dependency_ready(a);
}

static PJRT_Error *fulfil(PJRT_FulfillAliasBufferCallback *cb, PJRT_Buffer *target) {
  return pjrt_exec_fulfil(api, cb, target);
}

/* A buffer that CreateAliasBuffer makes (f32[4] on `d`): *cb its fulfil callback. */
static PJRT_Buffer *alias_buffer(PJRT_Client *c, PJRT_Device *d,
                                 PJRT_FulfillAliasBufferCallback **cb) {
  return pjrt_exec_alias_buffer(api, c, d, kDims4, 1, cb);
}

/* Expects `e` to be the error Client_Destroy gives a filling it ended (freed here). */
static void expect_destroyed_error(PJRT_Error *e) {
  assert_non_null(e);
  char msg[512];
  assert_int_equal(pjrt_test_take_error(api, e, msg, sizeof msg), PJRT_Error_Code_CANCELLED);
  assert_non_null(strstr(msg, "client was destroyed"));
}

/* Runs queued behind memory nobody fills any more (an alias buffer never fulfilled, a transfer
 * never made, a control dependency never ready): Client_Destroy ends those fillings with an
 * error, so the runs fail and Destroy returns (it used to wait for them for ever). A cheap run
 * whose argument is pending is queued, not run (and waited for) inside its Execute. */
static void test_client_destroy_ends_fillings_nobody_makes(void **state) {
  (void)state;
  PJRT_Client *c = client("auto");
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_LoadedExecutable *la = pjrt_exec_compile(api, c, kAddOne);
  PJRT_FulfillAliasBufferCallback *cb = NULL;
  PJRT_Buffer *alias = alias_buffer(c, d, &cb);
  PJRT_AsyncHostToDeviceTransferManager *m =
      pjrt_exec_h2d_manager(api, c, PJRT_Buffer_Type_F32, kDims4, 1);
  PJRT_Buffer *h = pjrt_exec_h2d_buffer(api, m);
  float x[4] = {1, 2, 3, 4};
  PJRT_Buffer *in = pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_F32, kDims4, 1);
  PJRT_Buffer_DonateWithControlDependency_Args dw = donate_later(in);
  PJRT_Buffer *pending[3] = {alias, h, dw.out_buffer}, *out[3];
  PJRT_Event *done[3];
  for (int i = 0; i < 3; i++) {
    PJRT_CHECK(api, execute(la, &pending[i], 1, &out[i], &done[i])); /* returns: queued */
    assert_false(event_ready(done[i]));
  }
  pjrt_test_client_destroy(api, c); /* returns: the fillings end with its error */
  for (int i = 0; i < 3; i++) {
    expect_destroyed_error(await_error(done[i]));
    float r[4];
    expect_destroyed_error(read_error(out[i], r, sizeof r));
    pjrt_exec_buffer_destroy(api, out[i]);
  }
  /* The callbacks stay callable once (they free what they hold): the alias's says why nothing
   * happened. */
  PJRT_Error *e = fulfil(cb, in);
  char msg[512];
  assert_int_equal(pjrt_test_take_error(api, e, msg, sizeof msg),
                   PJRT_Error_Code_FAILED_PRECONDITION);
  assert_non_null(strstr(msg, "client was destroyed"));
  dependency_ready(&dw);
  pjrt_exec_h2d_destroy(api, m);
  PJRT_Buffer *bufs[] = {alias, h, dw.out_buffer, in};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) pjrt_exec_buffer_destroy(api, bufs[i]);
  pjrt_exec_destroy(api, la);
}

typedef struct fulfil_call {
  PJRT_FulfillAliasBufferCallback *cb;
  PJRT_Buffer *target;
  PJRT_Error_Code code;
  char msg[512];
} fulfil_call_t;

static void *fulfil_alias(void *arg) {
  fulfil_call_t *f = arg;
  f->code = pjrt_test_take_error(api, fulfil(f->cb, f->target), f->msg, sizeof f->msg);
  return NULL;
}

/* FulfillAliasBuffer with an output still being computed waits for it; when Client_Destroy
 * ends the alias meanwhile, the fulfilment says so (it used to report success over an alias
 * already failed). */
static void test_a_fulfilment_racing_client_destroy_reports_it(void **state) {
  (void)state;
  atomic_store(&g_gate, 0);
  PJRT_Client *c = client("auto");
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_LoadedExecutable *lg = pjrt_exec_compile(api, c, kGate);
  float x[4] = {1, 2, 3, 4};
  PJRT_Buffer *in = pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_F32, kDims4, 1);
  PJRT_Buffer *g = NULL;
  PJRT_Event *gd = NULL;
  PJRT_CHECK(api, execute(lg, &in, 1, &g, &gd));
  fulfil_call_t f = {.target = g};
  PJRT_Buffer *alias = alias_buffer(c, d, &f.cb);
  pthread_t tf, td;
  assert_int_equal(pthread_create(&tf, NULL, fulfil_alias, &f), 0);
  sleep_us(20000); /* (in the fulfilment, waiting for g) */
  assert_int_equal(pthread_create(&td, NULL, destroy_client, c), 0);
  sleep_us(20000); /* (Destroy ended the alias; it waits for the gate's run) */
  atomic_store(&g_gate, 1);
  pthread_join(tf, NULL);
  pthread_join(td, NULL);
  assert_int_equal(f.code, PJRT_Error_Code_FAILED_PRECONDITION);
  assert_non_null(strstr(f.msg, "client was destroyed"));
  float r[4];
  expect_destroyed_error(read_error(alias, r, sizeof r));
  PJRT_CHECK(api, await_error(gd));
  PJRT_Buffer *bufs[] = {alias, g, in};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) pjrt_exec_buffer_destroy(api, bufs[i]);
  pjrt_exec_destroy(api, lg);
}

/* ---- reads to the host of an output still being computed ---- */

/* Starts a read of `b` to the host (ToHostBuffer, or CopyRawToHost of `size` bytes at
 * `offset` when raw): its event. */
static PJRT_Event *start_read(PJRT_Buffer *b, void *dst, size_t size, bool raw, int64_t offset) {
  if (raw) {
    PJRT_Buffer_CopyRawToHost_Args a;
    memset(&a, 0, sizeof(a));
    a.struct_size = PJRT_Buffer_CopyRawToHost_Args_STRUCT_SIZE;
    a.buffer = b;
    a.dst = dst;
    a.offset = offset;
    a.transfer_size = (int64_t)size;
    PJRT_CHECK(api, api->PJRT_Buffer_CopyRawToHost(&a));
    return a.event;
  }
  PJRT_Event *event = NULL;
  PJRT_CHECK(api, to_host(b, dst, size, &event));
  return event;
}

static void test_reads_of_a_pending_output_return_before_its_run_ends(void **state) {
  (void)state;
  atomic_store(&g_gate, 0);
  PJRT_Client *c = client("auto");
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_LoadedExecutable *lg = pjrt_exec_compile(api, c, kGate);
  PJRT_LoadedExecutable *ln = pjrt_exec_compile(api, c, kNegate);
  PJRT_LoadedExecutable *lf = pjrt_exec_compile(api, c, kFail);
  float x[4] = {1, 2, 3, 4};
  PJRT_Buffer *in = pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_F32, kDims4, 1);
  PJRT_Buffer *g = NULL, *n = NULL, *f = NULL;
  PJRT_Event *gd = NULL, *nd = NULL, *fd = NULL;
  PJRT_CHECK(api, execute(lg, &in, 1, &g, &gd));
  /* Both reads return while the run that computes g waits at the gate. */
  float whole[4] = {0}, part[2] = {0};
  PJRT_Event *r1 = start_read(g, whole, sizeof(whole), false, 0);
  PJRT_Event *r2 = start_read(g, part, sizeof(part), true, 1 * sizeof(float));
  assert_false(event_ready(r1));
  assert_false(event_ready(r2));
  /* An execute that donates g (-g into g's memory) runs after the reads: they see g. */
  PJRT_CHECK(api, execute(ln, &g, 1, &n, &nd));
  /* A run that fails, reading the negation: a read of its output fails with its error. */
  PJRT_CHECK(api, execute(lf, &n, 1, &f, &fd));
  float fr[4];
  PJRT_Event *r3 = start_read(f, fr, sizeof(fr), false, 0);
  assert_false(event_ready(r3));
  pjrt_exec_buffer_destroy(api, g); /* donated already; the reads hold the memory */
  atomic_store(&g_gate, 1);
  PJRT_CHECK(api, await_error(r1));
  PJRT_CHECK(api, await_error(r2));
  PJRT_EXPECT_ERROR(api, await_error(r3), PJRT_Error_Code_INVALID_ARGUMENT,
                    "kiln_async_fail says no");
  for (int i = 0; i < 4; i++) assert_true(whole[i] == x[i] + 1);
  assert_true(part[0] == x[1] + 1 && part[1] == x[2] + 1);
  PJRT_CHECK(api, await_error(gd));
  PJRT_CHECK(api, await_error(nd));
  PJRT_EXPECT_ERROR(api, await_error(fd), PJRT_Error_Code_INVALID_ARGUMENT,
                    "kiln_async_fail says no");
  float rn[4];
  pjrt_exec_read(api, n, rn, sizeof(rn));
  for (int i = 0; i < 4; i++) assert_true(rn[i] == -(x[i] + 1));
  /* A read of a buffer whose run has ended is done in the call. */
  PJRT_Event *r4 = start_read(n, rn, sizeof(rn), false, 0);
  assert_true(event_ready(r4));
  PJRT_CHECK(api, await_error(r4));
  pjrt_exec_buffer_destroy(api, n);
  pjrt_exec_buffer_destroy(api, f);
  pjrt_exec_buffer_destroy(api, in);
  pjrt_exec_destroy(api, lg);
  pjrt_exec_destroy(api, ln);
  pjrt_exec_destroy(api, lf);
  pjrt_test_client_destroy(api, c);
}

/* The deadlock a read queued on the device's queue would make: a run queued after the one
 * computing y waits for a transfer the reading thread makes only after its read of y is done.
 * Reads hook on y's filling instead, so this completes. */
static void test_a_read_does_not_wait_for_later_queued_runs(void **state) {
  (void)state;
  atomic_store(&g_gate, 0);
  PJRT_Client *c = client("auto");
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_LoadedExecutable *lg = pjrt_exec_compile(api, c, kGate);
  PJRT_LoadedExecutable *la = pjrt_exec_compile(api, c, kAddOne);
  float x[4] = {1, 2, 3, 4}, h_data[4] = {10, 20, 30, 40};
  PJRT_Buffer *in = pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_F32, kDims4, 1);
  PJRT_Buffer *y = NULL, *z = NULL;
  PJRT_Event *yd = NULL, *zd = NULL;
  PJRT_CHECK(api, execute(lg, &in, 1, &y, &yd));
  /* h: a buffer a transfer manager fills later. */
  PJRT_AsyncHostToDeviceTransferManager *m =
      pjrt_exec_h2d_manager(api, c, PJRT_Buffer_Type_F32, kDims4, 1);
  PJRT_Buffer *h = pjrt_exec_h2d_buffer(api, m);
  PJRT_CHECK(api, execute(la, &h, 1, &z, &zd)); /* queued; waits there for h */
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, open_gate_later, NULL), 0);
  float r[4];
  pjrt_exec_read(api, y, r, sizeof(r)); /* done when the gate's run ends, not after z's */
  for (int i = 0; i < 4; i++) assert_true(r[i] == x[i] + 1);
  assert_false(event_ready(zd));
  pjrt_exec_h2d_fill(api, m, h_data, sizeof(h_data));
  PJRT_CHECK(api, await_error(zd));
  pjrt_exec_read(api, z, r, sizeof(r));
  for (int i = 0; i < 4; i++) assert_true(r[i] == h_data[i] + 1);
  pthread_join(t, NULL);
  PJRT_CHECK(api, await_error(yd));
  pjrt_exec_h2d_destroy(api, m);
  PJRT_Buffer *bufs[] = {y, z, h, in};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) pjrt_exec_buffer_destroy(api, bufs[i]);
  pjrt_exec_destroy(api, lg);
  pjrt_exec_destroy(api, la);
  pjrt_test_client_destroy(api, c);
}

/* Starts CopyRawToHostFuture of all of `b` (f32[4]). */
static PJRT_Buffer_CopyRawToHostFuture_Args raw_future(PJRT_Buffer *b) {
  PJRT_Buffer_CopyRawToHostFuture_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Buffer_CopyRawToHostFuture_Args_STRUCT_SIZE;
  a.buffer = b;
  a.transfer_size = 4 * sizeof(float);
  PJRT_CHECK(api, api->PJRT_Buffer_CopyRawToHostFuture(&a));
  return a;
}

/* Names the future's destination. */
static void raw_future_dst(const PJRT_Buffer_CopyRawToHostFuture_Args *a, float *dst) {
  PJRT_Buffer_CopyRawToHostFuture_Callback_Args cb;
  memset(&cb, 0, sizeof(cb));
  cb.struct_size = PJRT_Buffer_CopyRawToHostFuture_Callback_Args_STRUCT_SIZE;
  cb.callback_data = a->callback_data;
  cb.error_code = PJRT_Error_Code_OK;
  cb.dst = dst;
  a->future_ready_callback(&cb);
}

/* CopyRawToHostFuture of an output still being computed: neither the call nor the
 * destination's callback waits for the run (the callback used to); the copy is made when both
 * have come, and shows the output as computed even when an execute that donates the buffer
 * comes in between (the buffer is not donated while a future waits: that execute copies it). */
static void test_raw_futures_of_a_pending_output(void **state) {
  (void)state;
  atomic_store(&g_gate, 0);
  atomic_store(&g_opened, 0);
  PJRT_Client *c = client("auto");
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_LoadedExecutable *lg = pjrt_exec_compile(api, c, kGate);
  PJRT_LoadedExecutable *ln = pjrt_exec_compile(api, c, kNegate);
  float x[4] = {1, 2, 3, 4};
  PJRT_Buffer *in = pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_F32, kDims4, 1);
  PJRT_Buffer *g = NULL, *n = NULL, *n2 = NULL;
  PJRT_Event *gd = NULL, *nd = NULL, *nd2 = NULL;
  PJRT_CHECK(api, execute(lg, &in, 1, &g, &gd));
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, open_gate_later, NULL), 0);
  float r1[4] = {0}, r2[4] = {0}, rn[4];
  PJRT_Buffer_CopyRawToHostFuture_Args f1 = raw_future(g), f2 = raw_future(g);
  raw_future_dst(&f1, r1);
  assert_int_equal(atomic_load(&g_opened), 0);  /* the callback did not wait for the run */
  PJRT_CHECK(api, execute(ln, &g, 1, &n, &nd)); /* would donate g: copies it */
  PJRT_CHECK(api, await_error(f1.event));
  PJRT_CHECK(api, await_error(nd));
  raw_future_dst(&f2, r2); /* after the donating execute ran */
  PJRT_CHECK(api, await_error(f2.event));
  pjrt_exec_read(api, n, rn, sizeof(rn));
  for (int i = 0; i < 4; i++)
    assert_true(r1[i] == x[i] + 1 && r2[i] == x[i] + 1 && rn[i] == -r1[i]);
  /* No future left: the next execute donates g. */
  PJRT_CHECK(api, execute(ln, &g, 1, &n2, &nd2));
  PJRT_CHECK(api, await_error(nd2));
  PJRT_EXPECT_ERROR(api, read_error(g, rn, sizeof(rn)), PJRT_Error_Code_FAILED_PRECONDITION,
                    "deleted or donated");
  pthread_join(t, NULL);
  PJRT_CHECK(api, await_error(gd));
  PJRT_Buffer *bufs[] = {g, n, n2, in};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) pjrt_exec_buffer_destroy(api, bufs[i]);
  pjrt_exec_destroy(api, lg);
  pjrt_exec_destroy(api, ln);
  pjrt_test_client_destroy(api, c);
}

/* A raw read still waiting for its destination is not overwritten through a view of the
 * memory either: the buffer moved by DonateWithControlDependency, then donated to an execute
 * (the count is on the old buffer's storage; the run used to write in place, and the read,
 * made afterwards, saw the execute's result). */
static void test_a_raw_read_survives_a_donation_of_the_moved_buffer(void **state) {
  (void)state;
  PJRT_Client *c = client("auto");
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_LoadedExecutable *ln = pjrt_exec_compile(api, c, kNegate);
  float x[4] = {1, 2, 3, 4}, r[4] = {0}, rn[4];
  PJRT_Buffer *b = pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_F32, kDims4, 1);
  PJRT_Buffer_CopyRawToHostFuture_Args f = raw_future(b);
  PJRT_Buffer_DonateWithControlDependency_Args dw = donate_later(b);
  dependency_ready(&dw);
  PJRT_Buffer *moved = dw.out_buffer, *n = NULL;
  PJRT_Event *nd = NULL;
  PJRT_CHECK(api, execute(ln, &moved, 1, &n, &nd));
  PJRT_CHECK(api, await_error(nd));
  raw_future_dst(&f, r); /* the read happens now */
  PJRT_CHECK(api, await_error(f.event));
  pjrt_exec_read(api, n, rn, sizeof(rn));
  for (int i = 0; i < 4; i++) assert_true(r[i] == x[i] && rn[i] == -x[i]);
  PJRT_Buffer *bufs[] = {b, moved, n};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) pjrt_exec_buffer_destroy(api, bufs[i]);
  pjrt_exec_destroy(api, ln);
  pjrt_test_client_destroy(api, c);
}

/* DonateWithControlDependency of `b` with its dependency ready at once: the new buffer. */
static PJRT_Buffer *donate_ready(PJRT_Buffer *b) {
  PJRT_Buffer_DonateWithControlDependency_Args a = donate_later(b);
  dependency_ready(&a);
  return a.out_buffer;
}

/* DonateWithControlDependency of an output whose run may still hold it (or a read hooked on
 * its filling): the memory moves, never refused as shared; the new buffer reads x+1 once the
 * dependency is ready. And of an output whose run has not ended: the call does not wait. */
static void test_donate_with_control_dependency_of_pending_outputs(void **state) {
  (void)state;
  PJRT_Client *c = client("always");
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_LoadedExecutable *la = pjrt_exec_compile(api, c, kAddOne);
  float x[4] = {1, 2, 3, 4};
  PJRT_Buffer *in = pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_F32, kDims4, 1);
  for (int k = 0; k < 50; k++) {
    PJRT_Buffer *o = NULL;
    PJRT_Event *od = NULL;
    PJRT_CHECK(api, execute(la, &in, 1, &o, &od));
    float early[4] = {0};
    PJRT_Event *re = k % 2 ? start_read(o, early, sizeof(early), false, 0) : NULL;
    PJRT_Buffer *moved = donate_ready(o);
    float r[4];
    pjrt_exec_read(api, moved, r, sizeof(r));
    for (int i = 0; i < 4; i++) assert_true(r[i] == x[i] + 1);
    if (re) {
      PJRT_CHECK(api, await_error(re));
      for (int i = 0; i < 4; i++) assert_true(early[i] == x[i] + 1);
    }
    PJRT_CHECK(api, await_error(od));
    pjrt_exec_buffer_destroy(api, moved);
    pjrt_exec_buffer_destroy(api, o);
  }
  /* Of an output still being computed (the gate closed): the call returns at once, the new
   * buffer is ready only when both the dependency is and the run has ended. */
  atomic_store(&g_gate, 0);
  PJRT_LoadedExecutable *lg = pjrt_exec_compile(api, c, kGate);
  PJRT_Buffer *g = NULL;
  PJRT_Event *gd = NULL;
  PJRT_CHECK(api, execute(lg, &in, 1, &g, &gd));
  PJRT_Buffer *moved = donate_ready(g);
  PJRT_Event *ready = buffer_ready_event(moved);
  assert_false(event_ready(ready)); /* the run still waits at the gate */
  atomic_store(&g_gate, 1);
  PJRT_CHECK(api, await_error(ready));
  float r[4];
  pjrt_exec_read(api, moved, r, sizeof(r));
  for (int i = 0; i < 4; i++) assert_true(r[i] == x[i] + 1);
  PJRT_CHECK(api, await_error(gd));
  pjrt_exec_buffer_destroy(api, moved);
  pjrt_exec_buffer_destroy(api, g);
  pjrt_exec_destroy(api, lg);
  pjrt_exec_buffer_destroy(api, in);
  pjrt_exec_destroy(api, la);
  pjrt_test_client_destroy(api, c);
}

/* ---- queued readers of a buffer and a cheap execute that donates it ---- */

#define MIX_READERS 4
#define MIX_ROUNDS 20

typedef struct mix {
  PJRT_LoadedExecutable *gate, *negate;
  PJRT_Buffer *s;
  float a[4];
  atomic_int ran, wrong, refused, other, donated_wrong;
} mix_t;

/* Runs the gate (queued: a custom call) on the shared buffer until it is refused. */
static void *mix_reader(void *arg) {
  mix_t *m = arg;
  for (;;) {
    PJRT_Buffer *out = NULL;
    PJRT_Error_Code code =
        pjrt_test_take_error(api, pjrt_exec_try_run(api, m->gate, &m->s, 1, &out, NULL), NULL, 0);
    if (code != PJRT_Error_Code_OK) {
      atomic_fetch_add(code == PJRT_Error_Code_FAILED_PRECONDITION ? &m->refused : &m->other, 1);
      return NULL;
    }
    float r[4];
    pjrt_exec_read(api, out, r, sizeof(r));
    for (int i = 0; i < 4; i++) atomic_fetch_add(&m->wrong, r[i] != m->a[i] + 1);
    pjrt_exec_buffer_destroy(api, out);
    atomic_fetch_add(&m->ran, 1);
  }
}

static void test_queued_readers_then_a_cheap_donor(void **state) {
  (void)state;
  atomic_store(&g_gate, 1);
  PJRT_Client *c = client("auto");
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  mix_t m;
  memset(&m, 0, sizeof(m));
  m.gate = pjrt_exec_compile(api, c, kGate);
  m.negate = pjrt_exec_compile(api, c, kNegate);
  for (int round = 0; round < MIX_ROUNDS; round++) {
    for (int i = 0; i < 4; i++) m.a[i] = (float)(round * 4 + i) + 0.5f;
    m.s = pjrt_exec_buffer(api, c, d, m.a, PJRT_Buffer_Type_F32, kDims4, 1);
    atomic_store(&m.ran, 0);
    atomic_store(&m.refused, 0);
    pthread_t t[MIX_READERS];
    for (int i = 0; i < MIX_READERS; i++)
      assert_int_equal(pthread_create(&t[i], NULL, mix_reader, &m), 0);
    while (atomic_load(&m.ran) < MIX_READERS) sched_yield(); /* reads are queued */
    /* The donor finds reads queued (it waits for them before it writes) or none. */
    PJRT_Buffer *neg = NULL;
    PJRT_CHECK(api, pjrt_exec_try_run(api, m.negate, &m.s, 1, &neg, NULL));
    float r[4];
    pjrt_exec_read(api, neg, r, sizeof(r));
    for (int i = 0; i < 4; i++) atomic_fetch_add(&m.donated_wrong, r[i] != -m.a[i]);
    for (int i = 0; i < MIX_READERS; i++) pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&m.refused), MIX_READERS);
    pjrt_exec_buffer_destroy(api, neg);
    pjrt_exec_buffer_destroy(api, m.s);
  }
  assert_int_equal(atomic_load(&m.other), 0);
  assert_int_equal(atomic_load(&m.wrong), 0);
  assert_int_equal(atomic_load(&m.donated_wrong), 0);
  pjrt_exec_destroy(api, m.gate);
  pjrt_exec_destroy(api, m.negate);
  pjrt_test_client_destroy(api, c);
}

/* ---- multi-device executes: queued on every device, in one order on all ---- */

static const char *kGateSum =
    "HloModule async_gate_sum\n"
    "add { x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y) }\n"
    "ENTRY main {\n"
    "  p = f32[4] parameter(0)\n"
    "  g = f32[4] custom-call(p), custom_call_target=\"kiln_async_gate\",\n"
    "      api_version=API_VERSION_TYPED_FFI\n"
    "  ROOT s = f32[4] all-reduce(g), replica_groups={{0,1}}, to_apply=add\n"
    "}\n";

static PJRT_Client *two_device_client(void) {
  PJRT_NamedValue o[3] = {pjrt_test_opt_string("platform", "cpu"),
                          pjrt_test_opt_string("cache_dir", ""),
                          pjrt_test_opt_int("num_devices", 2)};
  return pjrt_test_client(api, o, 3);
}

static PJRT_LoadedExecutable *compile_two_replicas(PJRT_Client *c, const char *text) {
  char opts[8];
  size_t n = pjrt_exec_world_options(opts, 2, 1);
  PJRT_LoadedExecutable *l = NULL;
  PJRT_CHECK(api, pjrt_exec_try_compile(api, c, "hlo", text, strlen(text), opts, n, &l));
  return l;
}

/* Starts `l` on both devices with in[0] / in[1]; outputs into out[d]; events into done[d]. */
static PJRT_Error *execute_two(PJRT_LoadedExecutable *l, PJRT_Buffer *in[2], PJRT_Buffer *out[2],
                               PJRT_Event *done[2]) {
  PJRT_Buffer *const *lists[2] = {&in[0], &in[1]};
  PJRT_Buffer **out_lists[2] = {&out[0], &out[1]};
  return pjrt_exec_start_on(api, l, lists, 2, 1, out_lists, NULL, done);
}

static void test_multi_device_execute_returns_before_its_run_ends(void **state) {
  (void)state;
  atomic_store(&g_gate, 0);
  PJRT_Client *c = two_device_client();
  PJRT_LoadedExecutable *l = compile_two_replicas(c, kGateSum);
  float x[2][4] = {{1, 2, 3, 4}, {10, 20, 30, 40}};
  PJRT_Buffer *in[2], *out[2] = {NULL, NULL};
  PJRT_Event *done[2] = {NULL, NULL};
  for (int d = 0; d < 2; d++)
    in[d] = pjrt_exec_buffer(api, c, pjrt_exec_device(api, c, (size_t)d), x[d],
                             PJRT_Buffer_Type_F32, kDims4, 1);
  PJRT_CHECK(api, execute_two(l, in, out, done));
  for (int d = 0; d < 2; d++) assert_false(event_ready(done[d])); /* at the gate */
  atomic_store(&g_gate, 1);
  for (int d = 0; d < 2; d++) {
    PJRT_CHECK(api, await_error(done[d]));
    float r[4];
    pjrt_exec_read(api, out[d], r, sizeof(r));
    for (int i = 0; i < 4; i++) assert_true(r[i] == x[0][i] + x[1][i] + 2);
    pjrt_exec_buffer_destroy(api, out[d]);
    pjrt_exec_buffer_destroy(api, in[d]);
  }
  pjrt_exec_destroy(api, l);
  pjrt_test_client_destroy(api, c);
}

static PJRT_Buffer *copy_to_device(PJRT_Buffer *b, PJRT_Device *d) {
  PJRT_Buffer_CopyToDevice_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Buffer_CopyToDevice_Args_STRUCT_SIZE;
  a.buffer = b;
  a.dst_device = d;
  PJRT_CHECK(api, api->PJRT_Buffer_CopyToDevice(&a));
  return a.dst_buffer;
}

static void test_copies_of_a_pending_output_return_before_its_run_ends(void **state) {
  (void)state;
  atomic_store(&g_gate, 0);
  PJRT_Client *c = two_device_client();
  PJRT_Device *d0 = pjrt_exec_device(api, c, 0), *d1 = pjrt_exec_device(api, c, 1);
  PJRT_LoadedExecutable *lg = pjrt_exec_compile(api, c, kGate);
  PJRT_LoadedExecutable *ln = pjrt_exec_compile(api, c, kNegate);
  PJRT_LoadedExecutable *lf = pjrt_exec_compile(api, c, kFail);
  float x[4] = {1, 2, 3, 4};
  PJRT_Buffer *in = pjrt_exec_buffer(api, c, d0, x, PJRT_Buffer_Type_F32, kDims4, 1);
  PJRT_Buffer *g = NULL, *n = NULL, *f = NULL;
  PJRT_Event *gd = NULL, *nd = NULL, *fd = NULL;
  PJRT_CHECK(api, execute(lg, &in, 1, &g, &gd));
  /* A copy to device 1 while g's run waits at the gate: pending, and so are a read of it and
   * a copy of the copy back to device 0. */
  PJRT_Buffer *g1 = copy_to_device(g, d1);
  PJRT_Event *g1r = buffer_ready_event(g1);
  assert_false(event_ready(g1r));
  float r1[4] = {0}, r2[4] = {0};
  PJRT_Event *read1 = start_read(g1, r1, sizeof(r1), false, 0);
  assert_false(event_ready(read1));
  PJRT_Buffer *g2 = copy_to_device(g1, d0);
  /* An execute that donates g (-g into g's memory) runs after the copy: it copied g. */
  PJRT_CHECK(api, execute(ln, &g, 1, &n, &nd));
  /* A copy of a failing run's output fails with the run's error. */
  PJRT_CHECK(api, execute(lf, &n, 1, &f, &fd));
  PJRT_Buffer *f1 = copy_to_device(f, d1);
  pjrt_exec_buffer_destroy(api, g); /* donated already; the copy holds the memory */
  atomic_store(&g_gate, 1);
  PJRT_CHECK(api, await_error(g1r));
  PJRT_CHECK(api, await_error(read1));
  pjrt_exec_read(api, g2, r2, sizeof(r2));
  for (int i = 0; i < 4; i++) assert_true(r1[i] == x[i] + 1 && r2[i] == x[i] + 1);
  float rf[4];
  PJRT_EXPECT_ERROR(api, read_error(f1, rf, sizeof(rf)), PJRT_Error_Code_INVALID_ARGUMENT,
                    "kiln_async_fail says no");
  PJRT_CHECK(api, await_error(gd));
  PJRT_CHECK(api, await_error(nd));
  PJRT_EXPECT_ERROR(api, await_error(fd), PJRT_Error_Code_INVALID_ARGUMENT,
                    "kiln_async_fail says no");
  PJRT_Buffer *bufs[] = {g1, g2, n, f, f1, in};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) pjrt_exec_buffer_destroy(api, bufs[i]);
  pjrt_exec_destroy(api, lg);
  pjrt_exec_destroy(api, ln);
  pjrt_exec_destroy(api, lf);
  pjrt_test_client_destroy(api, c);
}

#define SPMD_THREADS 3
#define SPMD_ITERS 30

typedef struct spmd_worker {
  PJRT_Client *c;
  PJRT_LoadedExecutable *sum; /* shared by the threads */
  int id, wrong;
} spmd_worker_t;

/* Reads and copies of memory the calling thread itself fills afterwards (an alias buffer, a
 * transfer manager's buffer, a control dependency's new buffer) return at once and are done
 * by the fill (they used to wait in the call: a single-threaded client hung). */
static void test_reads_of_buffers_the_caller_fills_later_do_not_wait(void **state) {
  (void)state;
  PJRT_Client *c = two_device_client();
  PJRT_Device *d0 = pjrt_exec_device(api, c, 0), *d1 = pjrt_exec_device(api, c, 1);
  float x[4] = {1, 2, 3, 4}, h_data[4] = {5, 6, 7, 8};
  PJRT_Buffer *in = pjrt_exec_buffer(api, c, d0, x, PJRT_Buffer_Type_F32, kDims4, 1);
  PJRT_Buffer *target = pjrt_exec_buffer(api, c, d0, h_data, PJRT_Buffer_Type_F32, kDims4, 1);
  PJRT_FulfillAliasBufferCallback *cb = NULL;
  PJRT_Buffer *alias = alias_buffer(c, d0, &cb);
  PJRT_AsyncHostToDeviceTransferManager *m =
      pjrt_exec_h2d_manager(api, c, PJRT_Buffer_Type_F32, kDims4, 1);
  PJRT_Buffer *h = pjrt_exec_h2d_buffer(api, m);
  PJRT_Buffer_DonateWithControlDependency_Args dw = donate_later(in);
  PJRT_Buffer *pending[3] = {alias, h, dw.out_buffer}, *copies[3];
  float r[3][4], rc[3][4];
  PJRT_Event *reads[3], *copy_reads[3];
  for (int i = 0; i < 3; i++) {
    reads[i] = start_read(pending[i], r[i], sizeof r[i], i == 1, 0);
    copies[i] = copy_to_device(pending[i], d1);
    copy_reads[i] = start_read(copies[i], rc[i], sizeof rc[i], false, 0);
    assert_false(event_ready(reads[i]));
    assert_false(event_ready(copy_reads[i]));
  }
  /* Now this thread fills them. */
  PJRT_CHECK(api, fulfil(cb, target));
  pjrt_exec_h2d_fill(api, m, h_data, sizeof(h_data));
  dependency_ready(&dw);
  const float *want[3] = {h_data, h_data, x};
  for (int i = 0; i < 3; i++) {
    PJRT_CHECK(api, await_error(reads[i]));
    PJRT_CHECK(api, await_error(copy_reads[i]));
    assert_memory_equal(r[i], want[i], sizeof r[i]);
    assert_memory_equal(rc[i], want[i], sizeof rc[i]);
  }
  pjrt_exec_h2d_destroy(api, m);
  PJRT_Buffer *bufs[] = {alias, h, dw.out_buffer, in, target, copies[0], copies[1], copies[2]};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) pjrt_exec_buffer_destroy(api, bufs[i]);
  pjrt_test_client_destroy(api, c);
}

/* More executes than the queue holds, all behind an alias buffer the calling thread fulfils
 * only afterwards: the queue stalls on memory from outside, so the caller queues past its
 * depth instead of waiting for room for ever (the 33rd Execute used to hang). */
static void test_executes_past_the_queue_depth_behind_an_unfilled_buffer(void **state) {
  (void)state;
  PJRT_Client *c = client("auto");
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_LoadedExecutable *la = pjrt_exec_compile(api, c, kAddOne);
  float h_data[4] = {5, 6, 7, 8};
  PJRT_Buffer *target = pjrt_exec_buffer(api, c, d, h_data, PJRT_Buffer_Type_F32, kDims4, 1);
  PJRT_FulfillAliasBufferCallback *cb = NULL;
  PJRT_Buffer *alias = alias_buffer(c, d, &cb);
  enum { RUNS = 36 }; /* the depth is 32 */
  PJRT_Buffer *out[RUNS];
  PJRT_Event *done[RUNS];
  for (int k = 0; k < RUNS; k++) PJRT_CHECK(api, execute(la, &alias, 1, &out[k], &done[k]));
  assert_false(event_ready(done[RUNS - 1]));
  PJRT_CHECK(api, fulfil(cb, target));
  for (int k = 0; k < RUNS; k++) {
    PJRT_CHECK(api, await_error(done[k]));
    float r[4];
    pjrt_exec_read(api, out[k], r, sizeof r);
    for (int i = 0; i < 4; i++) assert_true(r[i] == h_data[i] + 1);
    pjrt_exec_buffer_destroy(api, out[k]);
  }
  pjrt_exec_buffer_destroy(api, alias);
  pjrt_exec_buffer_destroy(api, target);
  pjrt_exec_destroy(api, la);
  pjrt_test_client_destroy(api, c);
}

/* A chain of copies of copies of an output still being computed (back and forth between two
 * devices), all made before its run ends: they complete one after another when it does,
 * without one nested call per link (a chain this long overflowed the queue thread's stack). */
static void test_a_long_chain_of_copies_completes(void **state) {
  (void)state;
  atomic_store(&g_gate, 0);
  PJRT_Client *c = two_device_client();
  PJRT_Device *dev[2] = {pjrt_exec_device(api, c, 0), pjrt_exec_device(api, c, 1)};
  PJRT_LoadedExecutable *lg = pjrt_exec_compile(api, c, kGate);
  float x[4] = {1, 2, 3, 4};
  PJRT_Buffer *in = pjrt_exec_buffer(api, c, dev[0], x, PJRT_Buffer_Type_F32, kDims4, 1);
  PJRT_Buffer *g = NULL;
  PJRT_Event *gd = NULL;
  PJRT_CHECK(api, execute(lg, &in, 1, &g, &gd));
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  enum { LINKS = 20000 }; /* (sanitizers: 0.35-0.85 GB for 100,000) */
#else
  enum { LINKS = 100000 }; /* (recursion overflowed 8 MiB of stack at this length) */
#endif
  PJRT_Buffer **chain = calloc(LINKS + 1, sizeof(*chain));
  assert_non_null(chain);
  chain[0] = g;
  for (int i = 1; i <= LINKS; i++) chain[i] = copy_to_device(chain[i - 1], dev[i % 2]);
  PJRT_Event *last = buffer_ready_event(chain[LINKS]);
  assert_false(event_ready(last));
  atomic_store(&g_gate, 1);
  PJRT_CHECK(api, await_error(last));
  float r[4];
  pjrt_exec_read(api, chain[LINKS], r, sizeof(r));
  for (int i = 0; i < 4; i++) assert_true(r[i] == x[i] + 1);
  PJRT_CHECK(api, await_error(gd));
  for (int i = 0; i <= LINKS; i++) pjrt_exec_buffer_destroy(api, chain[i]);
  free(chain);
  pjrt_exec_buffer_destroy(api, in);
  pjrt_exec_destroy(api, lg);
  pjrt_test_client_destroy(api, c);
}

/* Executes on both devices, again and again, reading the sums. */
static void *spmd_work(void *arg) {
  spmd_worker_t *w = arg;
  for (int it = 0; it < SPMD_ITERS; it++) {
    float x[2][4];
    PJRT_Buffer *in[2], *out[2] = {NULL, NULL};
    PJRT_Event *done[2] = {NULL, NULL};
    for (int d = 0; d < 2; d++) {
      for (int i = 0; i < 4; i++) x[d][i] = (float)(w->id * 1000 + it * 10 + d * 4 + i);
      in[d] = pjrt_exec_buffer(api, w->c, pjrt_exec_device(api, w->c, (size_t)d), x[d],
                               PJRT_Buffer_Type_F32, kDims4, 1);
    }
    PJRT_CHECK(api, execute_two(w->sum, in, out, done));
    for (int d = 0; d < 2; d++) {
      pjrt_exec_event_destroy(api, done[d]);
      pjrt_exec_buffer_destroy(api, in[d]); /* the runs hold what they read */
    }
    for (int d = 0; d < 2; d++) {
      float r[4];
      pjrt_exec_read(api, out[d], r, sizeof(r));
      for (int i = 0; i < 4; i++) w->wrong += r[i] != x[0][i] + x[1][i] + 2;
      pjrt_exec_buffer_destroy(api, out[d]);
    }
  }
  return NULL;
}

/* Three threads' multi-device executes interleave on the two queues: each device's queue must
 * hold the participants in one order (else two runs would each wait at the start line for a
 * participant queued behind the other's: a hang). */
static void test_multi_device_executes_from_three_threads(void **state) {
  (void)state;
  atomic_store(&g_gate, 1);
  PJRT_Client *c = two_device_client();
  PJRT_LoadedExecutable *sum = compile_two_replicas(c, kGateSum);
  spmd_worker_t w[SPMD_THREADS];
  pthread_t t[SPMD_THREADS];
  for (int i = 0; i < SPMD_THREADS; i++) {
    w[i] = (spmd_worker_t){.c = c, .sum = sum, .id = i};
    assert_int_equal(pthread_create(&t[i], NULL, spmd_work, &w[i]), 0);
  }
  for (int i = 0; i < SPMD_THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < SPMD_THREADS; i++) assert_int_equal(w[i].wrong, 0);
  pjrt_exec_destroy(api, sum);
  pjrt_test_client_destroy(api, c);
}

/* ---- chains of donating executes from 4 threads ---- */

#define CHAIN_THREADS 4
#define CHAIN_STEPS 100
#define CHAIN_N 256

typedef struct chain {
  PJRT_Client *c;
  PJRT_Device *d;
  PJRT_LoadedExecutable *step;
  int id;
  int wrong;
} chain_t;

static void *run_chain(void *arg) {
  chain_t *ch = arg;
  float x[CHAIN_N], r[CHAIN_N];
  for (int i = 0; i < CHAIN_N; i++) x[i] = (float)(ch->id * 1000 + i);
  int64_t dims[1] = {CHAIN_N};
  PJRT_Buffer *cur = pjrt_exec_buffer(api, ch->c, ch->d, x, PJRT_Buffer_Type_F32, dims, 1);
  for (int k = 1; k <= CHAIN_STEPS; k++) {
    PJRT_Buffer *next = NULL;
    PJRT_Event *done = NULL;
    PJRT_CHECK(api, execute(ch->step, &cur, 1, &next, &done));
    pjrt_exec_event_destroy(api, done); /* nobody waits for it */
    pjrt_exec_buffer_destroy(api, cur); /* donated: gone already */
    cur = next;
    if (k % 25 == 0) { /* reading waits for the run that computes it */
      pjrt_exec_read(api, cur, r, sizeof(r));
      for (int i = 0; i < CHAIN_N; i++)
        if (r[i] != x[i] + (float)k) ch->wrong++;
    }
  }
  pjrt_exec_buffer_destroy(api, cur);
  return NULL;
}

static void test_donation_chains_from_four_threads(void **state) {
  (void)state;
  PJRT_Client *c = client("always");
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_LoadedExecutable *step = pjrt_exec_compile(api, c, kStep);
  chain_t ch[CHAIN_THREADS];
  pthread_t t[CHAIN_THREADS];
  for (int i = 0; i < CHAIN_THREADS; i++) {
    ch[i] = (chain_t){.c = c, .d = d, .step = step, .id = i};
    assert_int_equal(pthread_create(&t[i], NULL, run_chain, &ch[i]), 0);
  }
  for (int i = 0; i < CHAIN_THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < CHAIN_THREADS; i++) assert_int_equal(ch[i].wrong, 0);
  pjrt_exec_destroy(api, step);
  pjrt_test_client_destroy(api, c);
}

int main(void) {
  api = pjrt_test_load();
  if (!api) return 1;
  register_handler("kiln_async_gate", (void *)gate);
  register_handler("kiln_async_fail", (void *)fail_handler);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_execute_returns_before_its_run_ends),
      cmocka_unit_test(test_an_execute_with_a_context_returns_before_its_run_ends),
      cmocka_unit_test(test_never_runs_in_the_call),
      cmocka_unit_test(test_failed_run_reaches_event_outputs_and_readers),
      cmocka_unit_test(test_client_destroy_waits_for_queued_runs),
      cmocka_unit_test(test_client_destroy_ends_fillings_nobody_makes),
      cmocka_unit_test(test_a_fulfilment_racing_client_destroy_reports_it),
      cmocka_unit_test(test_reads_of_buffers_the_caller_fills_later_do_not_wait),
      cmocka_unit_test(test_reads_of_a_pending_output_return_before_its_run_ends),
      cmocka_unit_test(test_a_read_does_not_wait_for_later_queued_runs),
      cmocka_unit_test(test_raw_futures_of_a_pending_output),
      cmocka_unit_test(test_a_raw_read_survives_a_donation_of_the_moved_buffer),
      cmocka_unit_test(test_donate_with_control_dependency_of_pending_outputs),
      cmocka_unit_test(test_queued_readers_then_a_cheap_donor),
      cmocka_unit_test(test_donation_chains_from_four_threads),
      cmocka_unit_test(test_multi_device_execute_returns_before_its_run_ends),
      cmocka_unit_test(test_copies_of_a_pending_output_return_before_its_run_ends),
      cmocka_unit_test(test_executes_past_the_queue_depth_behind_an_unfilled_buffer),
      cmocka_unit_test(test_a_long_chain_of_copies_completes),
      cmocka_unit_test(test_multi_device_executes_from_three_threads),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
