/* Per-call overhead of Execute through the PJRT table, next to a direct call of the runtime.
 *
 *   bench_pjrt_execute [iterations]     (default 10000)
 *
 * The module is a tiny f32[16] add on the host device. Through the plugin (dlopen'ed with
 * RTLD_LOCAL, only the table): PJRT_LoadedExecutable_Execute with two argument buffers, then
 * PJRT_Buffer_Destroy of the output and PJRT_Event_Destroy of the completion event, per call.
 * Directly: kiln_executable_run on the same module compiled with kiln_compile_module and
 * loaded on a runtime host device, then kiln_device_buffer_destroy of the output, per call.
 * Prints both per-call times in microseconds and their ratio (goals: <= 5 us per call through
 * the table, <= 2x the direct call), and the in-memory compile-cache hit time of
 * PJRT_Client_Compile (goal <= 1 ms). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "compiler/hlo/ir.h"
#include "compiler/thunks/compile.h"
#include "kiln/pjrt_c_api.h"
#include "runtime/buffer.h"
#include "runtime/device.h"
#include "runtime/executable.h"

static const char *kAdd =
    "HloModule bench_add16\n"
    "ENTRY main {\n"
    "  x = f32[16] parameter(0)\n"
    "  y = f32[16] parameter(1)\n"
    "  ROOT s = f32[16] add(x, y)\n"
    "}\n";

static const PJRT_Api *api;

static int check(PJRT_Error *e, const char *what) {
  if (!e) return 0;
  PJRT_Error_Message_Args m;
  memset(&m, 0, sizeof(m));
  m.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
  m.error = e;
  api->PJRT_Error_Message(&m);
  fprintf(stderr, "%s failed: %.*s\n", what, (int)m.message_size, m.message);
  PJRT_Error_Destroy_Args d;
  memset(&d, 0, sizeof(d));
  d.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
  d.error = e;
  api->PJRT_Error_Destroy(&d);
  return 1;
}

#define CHECK(call)                    \
  do {                                 \
    if (check((call), #call)) exit(1); \
  } while (0)

static void event_destroy(PJRT_Event *ev) {
  if (!ev) return;
  PJRT_Event_Destroy_Args d;
  memset(&d, 0, sizeof(d));
  d.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE;
  d.event = ev;
  CHECK(api->PJRT_Event_Destroy(&d));
}

static PJRT_LoadedExecutable *compile(PJRT_Client *c) {
  PJRT_Program p;
  memset(&p, 0, sizeof(p));
  p.struct_size = PJRT_Program_STRUCT_SIZE;
  p.code = (char *)kAdd;
  p.code_size = strlen(kAdd);
  p.format = "hlo";
  p.format_size = 3;
  PJRT_Client_Compile_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE;
  a.client = c;
  a.program = &p;
  CHECK(api->PJRT_Client_Compile(&a));
  return a.executable;
}

static void loaded_destroy(PJRT_LoadedExecutable *l) {
  PJRT_LoadedExecutable_Destroy_Args d;
  memset(&d, 0, sizeof(d));
  d.struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE;
  d.executable = l;
  CHECK(api->PJRT_LoadedExecutable_Destroy(&d));
}

static void buffer_destroy(PJRT_Buffer *b) {
  PJRT_Buffer_Destroy_Args d;
  memset(&d, 0, sizeof(d));
  d.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE;
  d.buffer = b;
  CHECK(api->PJRT_Buffer_Destroy(&d));
}

/* Through the table: returns microseconds per call; *hit_us the compile-cache hit time. */
static double bench_plugin(int iters, double *hit_us, float *check_out) {
  PJRT_NamedValue opts[2];
  memset(opts, 0, sizeof(opts));
  const char *names[2] = {"platform", "cache_dir"}, *vals[2] = {"cpu", ""};
  for (int i = 0; i < 2; i++) {
    opts[i].struct_size = PJRT_NamedValue_STRUCT_SIZE;
    opts[i].name = names[i];
    opts[i].name_size = strlen(names[i]);
    opts[i].type = PJRT_NamedValue_kString;
    opts[i].string_value = vals[i];
    opts[i].value_size = strlen(vals[i]);
  }
  PJRT_Client_Create_Args ca;
  memset(&ca, 0, sizeof(ca));
  ca.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  ca.create_options = opts;
  ca.num_options = 2;
  CHECK(api->PJRT_Client_Create(&ca));
  PJRT_Client *c = ca.client;
  PJRT_Client_AddressableDevices_Args da;
  memset(&da, 0, sizeof(da));
  da.struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE;
  da.client = c;
  CHECK(api->PJRT_Client_AddressableDevices(&da));
  PJRT_Device *dev = da.addressable_devices[0];

  PJRT_LoadedExecutable *l = compile(c);
  /* the in-memory cache: the same program again */
  const int hits = 200;
  double t0 = kiln_clock_ms();
  for (int i = 0; i < hits; i++) loaded_destroy(compile(c));
  *hit_us = (kiln_clock_ms() - t0) * 1000.0 / hits;

  float x[16], y[16];
  for (int i = 0; i < 16; i++) {
    x[i] = (float)i;
    y[i] = 0.5f;
  }
  int64_t dims[1] = {16};
  PJRT_Buffer *args[2];
  const float *srcs[2] = {x, y};
  for (int i = 0; i < 2; i++) {
    PJRT_Client_BufferFromHostBuffer_Args b;
    memset(&b, 0, sizeof(b));
    b.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
    b.client = c;
    b.data = srcs[i];
    b.type = PJRT_Buffer_Type_F32;
    b.dims = dims;
    b.num_dims = 1;
    b.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
    b.device = dev;
    CHECK(api->PJRT_Client_BufferFromHostBuffer(&b));
    event_destroy(b.done_with_host_buffer);
    args[i] = b.buffer;
  }
  PJRT_ExecuteOptions eo;
  memset(&eo, 0, sizeof(eo));
  eo.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  PJRT_Buffer *out[1];
  PJRT_Buffer *const *lists[1] = {args};
  PJRT_Buffer **out_lists[1] = {out};
  PJRT_Event *done[1];
  PJRT_LoadedExecutable_Execute_Args ea;
  memset(&ea, 0, sizeof(ea));
  ea.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
  ea.executable = l;
  ea.options = &eo;
  ea.argument_lists = lists;
  ea.num_devices = 1;
  ea.num_args = 2;
  ea.output_lists = out_lists;
  ea.device_complete_events = done;
  /* the first execute makes the kernels (lazy JIT): not timed */
  CHECK(api->PJRT_LoadedExecutable_Execute(&ea));
  event_destroy(done[0]);
  PJRT_Buffer_ToHostBuffer_Args th;
  memset(&th, 0, sizeof(th));
  th.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
  th.src = out[0];
  th.dst = check_out;
  th.dst_size = 16 * sizeof(float);
  CHECK(api->PJRT_Buffer_ToHostBuffer(&th));
  if (th.event) {
    PJRT_Event_Await_Args aw;
    memset(&aw, 0, sizeof(aw));
    aw.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE;
    aw.event = th.event;
    CHECK(api->PJRT_Event_Await(&aw));
    event_destroy(th.event);
  }
  buffer_destroy(out[0]);
  double t1 = kiln_clock_ms();
  for (int i = 0; i < iters; i++) {
    CHECK(api->PJRT_LoadedExecutable_Execute(&ea));
    event_destroy(done[0]);
    buffer_destroy(out[0]);
  }
  double us = (kiln_clock_ms() - t1) * 1000.0 / iters;
  buffer_destroy(args[0]);
  buffer_destroy(args[1]);
  loaded_destroy(l);
  PJRT_Client_Destroy_Args cd;
  memset(&cd, 0, sizeof(cd));
  cd.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE;
  cd.client = c;
  CHECK(api->PJRT_Client_Destroy(&cd));
  return us;
}

static int fail(kiln_status s, const char *what) {
  fprintf(stderr, "%s: %s\n", what, kiln_status_message(s));
  kiln_status_free(s);
  return 1;
}

/* The runtime directly: microseconds per call, or a negative number on error. */
static double bench_direct(int iters) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(kAdd, strlen(kAdd), NULL, &m);
  if (s) return -fail(s, "parse");
  kiln_executable_desc_t *d = NULL;
  s = kiln_compile_module(m, NULL, &d, NULL);
  kiln_hlo_module_destroy(m);
  if (s) return -fail(s, "compile");
  kiln_device_t *dev = NULL;
  s = kiln_device_create("host", &dev);
  if (s) return -fail(s, "device");
  kiln_executable_t *x = NULL;
  s = kiln_executable_load(dev, d, &x);
  if (s) return -fail(s, "load");
  kiln_stream_t *stream = NULL;
  s = kiln_stream_create(dev, &stream);
  if (s) return -fail(s, "stream");
  kiln_device_buffer_t *a = NULL, *b = NULL;
  s = kiln_device_buffer_create(dev, 64, &a);
  if (!s) s = kiln_device_buffer_create(dev, 64, &b);
  if (s) return -fail(s, "buffers");
  kiln_devptr_t ptrs[2] = {a->ptr, b->ptr};
  uint64_t sizes[2] = {64, 64};
  kiln_device_buffer_t *out[1];
  s = kiln_executable_run(x, stream, ptrs, sizes, 2, out);
  if (s) return -fail(s, "run");
  kiln_device_buffer_destroy(out[0]);
  double t0 = kiln_clock_ms();
  for (int i = 0; i < iters && !s; i++) {
    s = kiln_executable_run(x, stream, ptrs, sizes, 2, out);
    if (!s) kiln_device_buffer_destroy(out[0]);
  }
  double us = (kiln_clock_ms() - t0) * 1000.0 / iters;
  if (s) return -fail(s, "run");
  kiln_device_buffer_destroy(a);
  kiln_device_buffer_destroy(b);
  kiln_stream_destroy(stream);
  kiln_executable_destroy(x);
  kiln_device_destroy(dev);
  return us;
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 10000;
  if (iters < 1) iters = 10000;
  const char *path = getenv("KILN_PJRT_PLUGIN");
  if (!path || !*path) path = KILN_PJRT_PLUGIN;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
    return 1;
  }
  const PJRT_Api *(*get)(void) = (const PJRT_Api *(*)(void))dlsym(h, "GetPjrtApi");
  if (!get) {
    fprintf(stderr, "%s has no GetPjrtApi\n", path);
    return 1;
  }
  api = get();
  double hit_us = 0;
  float r[16];
  double plugin_us = bench_plugin(iters, &hit_us, r);
  for (int i = 0; i < 16; i++)
    if (r[i] != (float)i + 0.5f) {
      fprintf(stderr, "wrong result at %d: %g\n", i, r[i]);
      return 1;
    }
  double direct_us = bench_direct(iters);
  if (direct_us < 0) return 1;
  printf("f32[16] add, %d executes on the host device:\n", iters);
  printf("  through the PJRT table   %8.2f us/call  (goal <= 5 us)\n", plugin_us);
  printf("  kiln_executable_run      %8.2f us/call\n", direct_us);
  printf("  ratio table/direct       %8.2fx         (goal <= 2x)\n", plugin_us / direct_us);
  printf("compile-cache hit (in memory, PJRT_Client_Compile): %.1f us (goal <= 1000 us)\n", hit_us);
  return 0;
}
