/* Helpers for PJRT clients in tests/pjrt/ that compile and execute: compile HLO text, make
 * buffers from host data, read them back, execute with one device's arguments. Built on
 * pjrt_test_util.h (OpenXLA's header, the plugin through the table only). Each helper fails
 * the cmocka test on an unexpected error. Include after <cmocka.h>. */
#ifndef KILN_TESTS_PJRT_PJRT_EXEC_UTIL_H_
#define KILN_TESTS_PJRT_PJRT_EXEC_UTIL_H_

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pjrt_test_util.h"

static inline double pjrt_exec_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A host client; `cache_dir` NULL: the disk cache disabled (""). */
static inline PJRT_Client *pjrt_exec_client(const PJRT_Api *api, const char *cache_dir) {
  PJRT_NamedValue o[2] = {pjrt_test_opt_string("platform", "cpu"),
                          pjrt_test_opt_string("cache_dir", cache_dir ? cache_dir : "")};
  return pjrt_test_client(api, o, 2);
}

static inline PJRT_Device *pjrt_exec_device(const PJRT_Api *api, PJRT_Client *c, size_t i) {
  PJRT_Client_AddressableDevices_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE;
  a.client = c;
  PJRT_CHECK(api, api->PJRT_Client_AddressableDevices(&a));
  assert_true(i < a.num_addressable_devices);
  return a.addressable_devices[i];
}

/* CompileOptionsProto { executable_build_options { num_replicas: r, num_partitions: p } }
 * into `b` (room for 6 bytes; r, p < 128); returns its length. */
static inline size_t pjrt_exec_world_options(char *b, int r, int p) {
  const char o[] = {0x1a, 0x04, 0x20, (char)r, 0x28, (char)p};
  memcpy(b, o, sizeof o);
  return sizeof o;
}

/* Compiles `text` (format "hlo") with `opts` (n bytes of CompileOptionsProto); returns the
 * error (NULL: *out set). */
static inline PJRT_Error *pjrt_exec_try_compile(const PJRT_Api *api, PJRT_Client *c,
                                                const char *format, const void *code, size_t len,
                                                const char *opts, size_t opts_len,
                                                PJRT_LoadedExecutable **out) {
  PJRT_Program p;
  memset(&p, 0, sizeof(p));
  p.struct_size = PJRT_Program_STRUCT_SIZE;
  p.code = (char *)code;
  p.code_size = len;
  p.format = format;
  p.format_size = strlen(format);
  PJRT_Client_Compile_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE;
  a.client = c;
  a.program = &p;
  a.compile_options = opts;
  a.compile_options_size = opts_len;
  PJRT_Error *e = api->PJRT_Client_Compile(&a);
  *out = a.executable;
  return e;
}

static inline PJRT_LoadedExecutable *pjrt_exec_compile(const PJRT_Api *api, PJRT_Client *c,
                                                       const char *text) {
  PJRT_LoadedExecutable *l = NULL;
  PJRT_CHECK(api, pjrt_exec_try_compile(api, c, "hlo", text, strlen(text), NULL, 0, &l));
  assert_non_null(l);
  return l;
}

static inline void pjrt_exec_destroy(const PJRT_Api *api, PJRT_LoadedExecutable *l) {
  PJRT_LoadedExecutable_Destroy_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE;
  a.executable = l;
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_Destroy(&a));
}

static inline void pjrt_exec_event_destroy(const PJRT_Api *api, PJRT_Event *e) {
  PJRT_Event_Destroy_Args d;
  memset(&d, 0, sizeof(d));
  d.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE;
  d.event = e;
  PJRT_CHECK(api, api->PJRT_Event_Destroy(&d));
}

/* Awaits `e` and destroys it; returns the event's error (NULL: ready with OK). */
static inline PJRT_Error *pjrt_exec_await_error(const PJRT_Api *api, PJRT_Event *e) {
  PJRT_Event_Await_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE;
  a.event = e;
  PJRT_Error *err = api->PJRT_Event_Await(&a);
  pjrt_exec_event_destroy(api, e);
  return err;
}

static inline void pjrt_exec_await(const PJRT_Api *api, PJRT_Event *e) {
  if (e) PJRT_CHECK(api, pjrt_exec_await_error(api, e));
}

static inline PJRT_Buffer *pjrt_exec_buffer(const PJRT_Api *api, PJRT_Client *c, PJRT_Device *d,
                                            const void *data, PJRT_Buffer_Type t,
                                            const int64_t *dims, size_t rank) {
  PJRT_Client_BufferFromHostBuffer_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
  a.client = c;
  a.data = data;
  a.type = t;
  a.dims = dims;
  a.num_dims = rank;
  a.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
  a.device = d;
  PJRT_CHECK(api, api->PJRT_Client_BufferFromHostBuffer(&a));
  pjrt_exec_await(api, a.done_with_host_buffer);
  return a.buffer;
}

/* A transfer manager (CreateBuffersForAsyncHostToDevice on the client's first device) of one
 * buffer of `type` x dims, filled by the caller's transfers. */
static inline PJRT_AsyncHostToDeviceTransferManager *pjrt_exec_h2d_manager(
    const PJRT_Api *api, PJRT_Client *c, PJRT_Buffer_Type type, const int64_t *dims, size_t rank) {
  PJRT_ShapeSpec spec = {.struct_size = PJRT_ShapeSpec_STRUCT_SIZE,
                         .dims = dims,
                         .num_dims = rank,
                         .element_type = type};
  PJRT_Client_CreateBuffersForAsyncHostToDevice_Args a = {
      .struct_size = PJRT_Client_CreateBuffersForAsyncHostToDevice_Args_STRUCT_SIZE,
      .client = c,
      .shape_specs = &spec,
      .num_shape_specs = 1};
  PJRT_CHECK(api, api->PJRT_Client_CreateBuffersForAsyncHostToDevice(&a));
  return a.transfer_manager;
}

/* The manager's buffer (RetrieveBuffer of buffer 0). */
static inline PJRT_Buffer *pjrt_exec_h2d_buffer(const PJRT_Api *api,
                                                PJRT_AsyncHostToDeviceTransferManager *m) {
  PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args a = {
      .struct_size = PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args_STRUCT_SIZE,
      .transfer_manager = m,
      .buffer_index = 0};
  PJRT_CHECK(api, api->PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer(&a));
  return a.buffer_out;
}

/* Fills the manager's buffer with `size` bytes of `data` (its last transfer) and awaits it. */
static inline void pjrt_exec_h2d_fill(const PJRT_Api *api, PJRT_AsyncHostToDeviceTransferManager *m,
                                      const void *data, size_t size) {
  PJRT_AsyncHostToDeviceTransferManager_TransferData_Args a = {
      .struct_size = PJRT_AsyncHostToDeviceTransferManager_TransferData_Args_STRUCT_SIZE,
      .transfer_manager = m,
      .buffer_index = 0,
      .data = data,
      .transfer_size = (int64_t)size,
      .is_last_transfer = true};
  PJRT_CHECK(api, api->PJRT_AsyncHostToDeviceTransferManager_TransferData(&a));
  pjrt_exec_await(api, a.done_with_h2d_transfer);
}

static inline void pjrt_exec_h2d_destroy(const PJRT_Api *api,
                                         PJRT_AsyncHostToDeviceTransferManager *m) {
  PJRT_AsyncHostToDeviceTransferManager_Destroy_Args a = {
      .struct_size = PJRT_AsyncHostToDeviceTransferManager_Destroy_Args_STRUCT_SIZE,
      .transfer_manager = m};
  PJRT_CHECK(api, api->PJRT_AsyncHostToDeviceTransferManager_Destroy(&a));
}

/* DonateWithControlDependency of `b`: its args (out_buffer, the callback and its data). */
static inline PJRT_Buffer_DonateWithControlDependency_Args pjrt_exec_donate_later(
    const PJRT_Api *api, PJRT_Buffer *b) {
  PJRT_Buffer_DonateWithControlDependency_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Buffer_DonateWithControlDependency_Args_STRUCT_SIZE;
  a.buffer = b;
  PJRT_CHECK(api, api->PJRT_Buffer_DonateWithControlDependency(&a));
  return a;
}

/* Says the donation's dependency is ready. */
static inline void pjrt_exec_dependency_ready(
    const PJRT_Buffer_DonateWithControlDependency_Args *a) {
  PJRT_Buffer_DonateWithControlDependency_Callback_Args cb;
  memset(&cb, 0, sizeof(cb));
  cb.struct_size = sizeof cb;
  cb.callback_data = a->callback_data;
  a->dependency_ready_callback(&cb);
}

/* FulfillAliasBuffer of `cb` with `target`: its error (NULL: OK). */
static inline PJRT_Error *pjrt_exec_fulfil(const PJRT_Api *api, PJRT_FulfillAliasBufferCallback *cb,
                                           PJRT_Buffer *target) {
  PJRT_Client_FulfillAliasBuffer_Args a = {
      .struct_size = PJRT_Client_FulfillAliasBuffer_Args_STRUCT_SIZE,
      .buffer = target,
      .status_code = PJRT_Error_Code_OK,
      .fulfill_alias_buffer_cb = cb};
  return api->PJRT_Client_FulfillAliasBuffer(&a);
}

/* A buffer that CreateAliasBuffer makes (f32 x dims on `d`'s default memory): *cb its fulfil
 * callback. */
static inline PJRT_Buffer *pjrt_exec_alias_buffer(const PJRT_Api *api, PJRT_Client *c,
                                                  PJRT_Device *d, const int64_t *dims, size_t rank,
                                                  PJRT_FulfillAliasBufferCallback **cb) {
  PJRT_Device_DefaultMemory_Args m = {.struct_size = PJRT_Device_DefaultMemory_Args_STRUCT_SIZE,
                                      .device = d};
  PJRT_CHECK(api, api->PJRT_Device_DefaultMemory(&m));
  PJRT_Client_CreateAliasBuffer_Args a = {
      .struct_size = PJRT_Client_CreateAliasBuffer_Args_STRUCT_SIZE,
      .client = c,
      .memory = m.memory,
      .shape_dims = dims,
      .shape_num_dims = rank,
      .shape_element_type = PJRT_Buffer_Type_F32};
  PJRT_CHECK(api, api->PJRT_Client_CreateAliasBuffer(&a));
  *cb = a.fulfill_alias_buffer_cb;
  return a.alias_buffer;
}

static inline void pjrt_exec_buffer_destroy(const PJRT_Api *api, PJRT_Buffer *b) {
  if (!b) return;
  PJRT_Buffer_Destroy_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE;
  a.buffer = b;
  PJRT_CHECK(api, api->PJRT_Buffer_Destroy(&a));
}

/* Reads `b` into `dst` (`size` bytes, which must be its size). */
static inline void pjrt_exec_read(const PJRT_Api *api, PJRT_Buffer *b, void *dst, size_t size) {
  PJRT_Buffer_ToHostBuffer_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
  a.src = b;
  PJRT_CHECK(api, api->PJRT_Buffer_ToHostBuffer(&a)); /* size query */
  assert_int_equal(a.dst_size, size);
  a.dst = dst;
  a.dst_size = size;
  a.event = NULL;
  PJRT_CHECK(api, api->PJRT_Buffer_ToHostBuffer(&a));
  pjrt_exec_await(api, a.event);
}

/* Starts an execute of `l` on `nd` devices: argument list argv[d] (`n` arguments each) and
 * output list outv[d] per device (options `opts_in`, NULL: none); done: room for the `nd`
 * completion events (NULL: none asked for). Returns Execute's error (NULL: started; the runs
 * may still be going). */
static inline PJRT_Error *pjrt_exec_start_on(const PJRT_Api *api, PJRT_LoadedExecutable *l,
                                             PJRT_Buffer *const *const *argv, size_t nd, size_t n,
                                             PJRT_Buffer **const *outv,
                                             const PJRT_ExecuteOptions *opts_in,
                                             PJRT_Event **done) {
  PJRT_ExecuteOptions opts;
  memset(&opts, 0, sizeof(opts));
  opts.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  if (opts_in) opts = *opts_in;
  PJRT_LoadedExecutable_Execute_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
  a.executable = l;
  a.options = &opts;
  a.argument_lists = argv;
  a.num_devices = nd;
  a.num_args = n;
  a.output_lists = outv;
  a.device_complete_events = done;
  for (size_t d = 0; done && d < nd; d++) done[d] = NULL;
  return api->PJRT_LoadedExecutable_Execute(&a);
}

/* pjrt_exec_start_on on `l`'s one device; *done: its completion event. */
static inline PJRT_Error *pjrt_exec_start(const PJRT_Api *api, PJRT_LoadedExecutable *l,
                                          PJRT_Buffer *const *args, size_t n, PJRT_Buffer **outs,
                                          const PJRT_ExecuteOptions *opts_in, PJRT_Event **done) {
  PJRT_Buffer *const *lists[1] = {args};
  PJRT_Buffer **out_lists[1] = {outs};
  return pjrt_exec_start_on(api, l, lists, 1, n, out_lists, opts_in, done);
}

static inline size_t pjrt_exec_num_outputs(const PJRT_Api *api, PJRT_LoadedExecutable *l) {
  PJRT_LoadedExecutable_GetExecutable_Args g;
  memset(&g, 0, sizeof(g));
  g.struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE;
  g.loaded_executable = l;
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_GetExecutable(&g));
  PJRT_Executable_NumOutputs_Args na;
  memset(&na, 0, sizeof(na));
  na.struct_size = PJRT_Executable_NumOutputs_Args_STRUCT_SIZE;
  na.executable = g.executable;
  PJRT_CHECK(api, api->PJRT_Executable_NumOutputs(&na));
  PJRT_Executable_Destroy_Args xd;
  memset(&xd, 0, sizeof(xd));
  xd.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE;
  xd.executable = g.executable;
  PJRT_CHECK(api, api->PJRT_Executable_Destroy(&xd));
  return na.num_outputs;
}

/* Executes `l` on its device with `n` arguments; outputs into `outs` (room for its outputs).
 * Returns the error (NULL on success): Execute's, or that of a run that failed after Execute
 * returned (an asynchronous one fails its event; its outputs then hold the error and are
 * destroyed here). Awaits and destroys the completion event. */
static inline PJRT_Error *pjrt_exec_try_run(const PJRT_Api *api, PJRT_LoadedExecutable *l,
                                            PJRT_Buffer *const *args, size_t n, PJRT_Buffer **outs,
                                            const PJRT_ExecuteOptions *opts_in) {
  PJRT_Event *done = NULL;
  PJRT_Error *e = pjrt_exec_start(api, l, args, n, outs, opts_in, &done);
  if (e || !done) return e;
  e = pjrt_exec_await_error(api, done);
  for (size_t j = 0, no = e ? pjrt_exec_num_outputs(api, l) : 0; j < no; j++) {
    pjrt_exec_buffer_destroy(api, outs[j]);
    outs[j] = NULL;
  }
  return e;
}

static inline void pjrt_exec_run(const PJRT_Api *api, PJRT_LoadedExecutable *l,
                                 PJRT_Buffer *const *args, size_t n, PJRT_Buffer **outs) {
  PJRT_CHECK(api, pjrt_exec_try_run(api, l, args, n, outs, NULL));
}

/* bf16 <-> f32 (round to nearest even). */
static inline uint16_t pjrt_exec_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static inline float pjrt_exec_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

#endif /* KILN_TESTS_PJRT_PJRT_EXEC_UTIL_H_ */
