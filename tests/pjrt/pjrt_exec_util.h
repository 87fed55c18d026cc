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

static inline void pjrt_exec_await(const PJRT_Api *api, PJRT_Event *e) {
  if (!e) return;
  PJRT_Event_Await_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE;
  a.event = e;
  PJRT_CHECK(api, api->PJRT_Event_Await(&a));
  PJRT_Event_Destroy_Args d;
  memset(&d, 0, sizeof(d));
  d.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE;
  d.event = e;
  PJRT_CHECK(api, api->PJRT_Event_Destroy(&d));
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

/* Executes `l` on its device with `n` arguments; outputs into `outs` (room for its outputs).
 * Returns the error (NULL on success); awaits and destroys the completion event. */
static inline PJRT_Error *pjrt_exec_try_run(const PJRT_Api *api, PJRT_LoadedExecutable *l,
                                            PJRT_Buffer *const *args, size_t n, PJRT_Buffer **outs,
                                            const PJRT_ExecuteOptions *opts_in) {
  PJRT_ExecuteOptions opts;
  memset(&opts, 0, sizeof(opts));
  opts.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  if (opts_in) opts = *opts_in;
  PJRT_Buffer *const *lists[1] = {args};
  PJRT_Buffer **out_lists[1] = {outs};
  PJRT_Event *done[1] = {NULL};
  PJRT_LoadedExecutable_Execute_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
  a.executable = l;
  a.options = &opts;
  a.argument_lists = lists;
  a.num_devices = 1;
  a.num_args = n;
  a.output_lists = out_lists;
  a.device_complete_events = done;
  PJRT_Error *e = api->PJRT_LoadedExecutable_Execute(&a);
  if (!e) pjrt_exec_await(api, done[0]);
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
