/* Per-call overhead of an FFI custom call: a no-op handler with 4 buffers (2 arguments, 2
 * results) and 4 attributes, called through a kiln call frame built once; each call patches
 * the 4 buffer addresses and dispatches (stage, context, handler call, error and future
 * check). Baseline in the same run: a direct call of a no-op C function taking the same 4
 * pointers through a function pointer the compiler cannot see through. Median of 7 runs of
 * 2M calls each.
 *
 * Then the same no-op through a custom-call thunk as an executable runs it
 * (runtime/ffi_call.h): the thunk resolves its 4 slices against the buffer table, the FFI
 * call takes its frame (atomic flag), waits for the host stream (empty here), patches the
 * 4 addresses, sets stream and run id and dispatches. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/status.h"
#include "ffi/ffi_attrs.h"
#include "ffi/ffi_call_frame.h"
#include "ffi/ffi_registry.h"
#include "runtime/buffer.h"
#include "runtime/device.h"
#include "runtime/ffi_call.h"
#include "runtime/thunk.h"

#define CALLS 2000000
#define RUNS 7

static XLA_FFI_Error *noop_handler(XLA_FFI_CallFrame *f) {
  __asm__ volatile("" : : "r"(f) : "memory");
  return NULL;
}

static void noop_direct(void *a, void *b, void *c, void *d) {
  __asm__ volatile("" : : "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(double), kiln_clock_cmp_double);
  return v[n / 2];
}

/* The no-op through a custom-call thunk on the host device; `direct` is the baseline. */
static int bench_thunk(const kiln_ffi_buffer_desc_t *args, const kiln_ffi_buffer_desc_t *rets,
                       const char *cfg, double direct) {
  kiln_device_t *dev = NULL;
  kiln_stream_t *stream = NULL;
  kiln_ffi_attrs_t *attrs = NULL;
  kiln_ffi_call_t *call = NULL;
  kiln_thunk_t *t = NULL;
  kiln_buffer_table_t table;
  kiln_status s = kiln_device_create("host", &dev);
  if (!s) s = kiln_stream_create(dev, &stream);
  if (!s) s = kiln_ffi_attrs_parse(cfg, strlen(cfg), &attrs);
  kiln_ffi_handler_t h;
  memset(&h, 0, sizeof h);
  h.target = "noop";
  h.platform = KILN_FFI_PLATFORM_HOST;
  h.bundle.execute = noop_handler;
  if (!s) {
    kiln_ffi_call_desc_t cd = {0};
    cd.name = "noop";
    cd.handler = &h;
    cd.api_version = 4;
    cd.attrs = attrs;
    cd.args = args;
    cd.nargs = 2;
    cd.rets = rets;
    cd.nrets = 2;
    s = kiln_ffi_call_create(&cd, &call);
  }
  if (s) return (int)kiln_status_report(s, "bench_ffi_call");
  s = kiln_buffer_table_init(&table, dev, 1);
  if (!s) s = kiln_buffer_table_allocate(&table, 0, 4 * 64);
  kiln_slice_t in[2] = {kiln_slice_make(0, 0, 64), kiln_slice_make(0, 64, 64)};
  kiln_slice_t out[2] = {kiln_slice_make(0, 128, 64), kiln_slice_make(0, 192, 64)};
  t = kiln_ffi_call_thunk_create(call, in, 2, out, 2);
  uint64_t size = 256;
  kiln_thunk_prepare_params_t pp = {1, &size};
  kiln_thunk_init_params_t ip = {dev};
  if (!s) s = kiln_thunk_prepare(t, &pp);
  if (!s) s = kiln_thunk_initialize(t, &ip);
  kiln_thunk_exec_params_t ep = {.device = dev, .stream = stream, .buffers = &table, .state = NULL};
  double ns[RUNS];
  for (int r = 0; r < RUNS && !s; r++) {
    double t0 = kiln_clock_ms();
    for (int i = 0; i < CALLS && !s; i++) s = kiln_thunk_execute(t, &ep);
    ns[r] = (kiln_clock_ms() - t0) * 1e6 / CALLS;
  }
  if (s) return (int)kiln_status_report(s, "bench_ffi_call");
  double th = median(ns, RUNS);
  printf(
      "custom-call thunk (4 slices resolved, frame patched, host stream, dispatch): "
      "%.2f ns/call\n",
      th);
  printf("thunk overhead over the direct call: %.2f ns/call (goal <= 100 ns)\n", th - direct);
  kiln_thunk_destroy(t);
  kiln_ffi_call_destroy(call);
  kiln_buffer_table_free(&table);
  kiln_stream_destroy(stream);
  kiln_device_destroy(dev);
  return 0;
}

int main(void) {
  static float bufs[2][4][16];
  int64_t dims[1] = {16};
  kiln_ffi_buffer_desc_t args[2] = {{XLA_FFI_DataType_F32, 1, dims, NULL},
                                    {XLA_FFI_DataType_F32, 1, dims, NULL}};
  kiln_ffi_buffer_desc_t rets[2] = {{XLA_FFI_DataType_F32, 1, dims, NULL},
                                    {XLA_FFI_DataType_F32, 1, dims, NULL}};
  const char *cfg = "{alpha = 1.5 : f32, beta = 2 : i64, mode = \"fast\", dims = array<i64: 1, 2>}";
  kiln_ffi_attrs_t *attrs = NULL;
  kiln_ffi_call_frame_t *cf = NULL;
  kiln_status s = kiln_ffi_attrs_parse(cfg, strlen(cfg), &attrs);
  if (!s) s = kiln_ffi_call_frame_create(args, 2, rets, 2, attrs, &cf);
  if (s) return (int)kiln_status_report(s, "bench_ffi_call");
  kiln_ffi_context_t ctx = {0};
  XLA_FFI_Handler *volatile handler = noop_handler;
  void (*volatile direct)(void *, void *, void *, void *) = noop_direct;

  double ffi_ns[RUNS], direct_ns[RUNS];
  for (int r = 0; r < RUNS; r++) {
    XLA_FFI_Handler *h = handler;
    double t0 = kiln_clock_ms();
    for (int i = 0; i < CALLS; i++) {
      float(*b)[16] = bufs[i & 1];
      kiln_ffi_call_frame_set_arg(cf, 0, b[0]);
      kiln_ffi_call_frame_set_arg(cf, 1, b[1]);
      kiln_ffi_call_frame_set_ret(cf, 0, b[2]);
      kiln_ffi_call_frame_set_ret(cf, 1, b[3]);
      kiln_status st =
          kiln_ffi_call_frame_invoke(cf, h, XLA_FFI_ExecutionStage_EXECUTE, &ctx, "noop", NULL);
      if (st) return (int)kiln_status_report(st, "bench_ffi_call");
    }
    double t1 = kiln_clock_ms();
    void (*d)(void *, void *, void *, void *) = direct;
    for (int i = 0; i < CALLS; i++) {
      float(*b)[16] = bufs[i & 1];
      d(b[0], b[1], b[2], b[3]);
    }
    double t2 = kiln_clock_ms();
    ffi_ns[r] = (t1 - t0) * 1e6 / CALLS;
    direct_ns[r] = (t2 - t1) * 1e6 / CALLS;
  }
  double f = median(ffi_ns, RUNS), d = median(direct_ns, RUNS);
  printf("ffi call (4 buffers patched + dispatch, 4 attrs): %.2f ns/call\n", f);
  printf("direct C call of the same no-op (4 pointers):     %.2f ns/call\n", d);
  printf("ratio ffi/direct: %.2fx; overhead %.2f ns/call (goal <= 100 ns)\n", f / (d > 0 ? d : 1),
         f - d);
  kiln_ffi_call_frame_destroy(cf);
  kiln_ffi_attrs_destroy(attrs);
  return bench_thunk(args, rets, cfg, d);
}
