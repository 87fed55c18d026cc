/* Executes of a kernel / custom call / kernel / ... chain on the host (9 fusions with 8
 * custom calls of f32[256] between them), with the handler registered command-buffer
 * compatible (kiln_call_affine_cb: the chain is one command buffer, replayed; the handler runs
 * on the stream's worker) and without the trait (kiln_call_affine: every custom call
 * synchronizes the stream and splits the chain into runs of one kernel, issued one by one).
 * Same handler code, same module, same buffers; runs of at least 2 thunks are converted.
 * Prints the median time per execute of each and their ratio. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/hlo/ir.h"
#include "compiler/thunks/compile.h"
#include "ffi/ffi_registry.h"
#include "runtime/buffer.h"
#include "runtime/device.h"
#include "runtime/executable.h"
#include "plugin/env_options.h"

#ifndef KILN_FFI_TEST_CALL_LIB
#define KILN_FFI_TEST_CALL_LIB "libkiln_ffi_test_handlers_call.so"
#endif

#define STAGES 8
#define EXECUTES 200
#define RUNS 15

static void check(kiln_status s, const char *what) {
  if (!s) return;
  fprintf(stderr, "%s: %s\n", what, kiln_status_message(s));
  exit(1);
}

/* x0 = p + p; c_i = target(x_i); x_{i+1} = c_i - p; ROOT x_STAGES. */
static void chain_module(const char *target, kiln_strbuf_t *b) {
  kiln_strbuf_printf(b, "HloModule chain\nENTRY e {\n  p = f32[256] parameter(0)\n");
  kiln_strbuf_printf(b, "  x0 = f32[256] add(p, p)\n");
  for (int i = 0; i < STAGES; i++) {
    kiln_strbuf_printf(b,
                       "  c%d = f32[256] custom-call(x%d), custom_call_target=\"%s\", "
                       "api_version=API_VERSION_TYPED_FFI\n",
                       i, i, target);
    kiln_strbuf_printf(b, "  %sx%d = f32[256] subtract(c%d, p)\n", i + 1 == STAGES ? "ROOT " : "",
                       i + 1, i);
  }
  kiln_strbuf_printf(b, "}\n");
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct variant {
  kiln_executable_t *exe;
  size_t cbs, inside;
  double us[RUNS];
} variant_t;

/* The chain calling `target`, compiled and loaded. */
static void load_variant(kiln_device_t *dev, const char *target, variant_t *v) {
  kiln_strbuf_t text = {0};
  chain_module(target, &text);
  kiln_hlo_module_t *m = NULL;
  check(kiln_hlo_parse_module(kiln_strbuf_cstr(&text), text.len, NULL, &m), "parse");
  kiln_strbuf_free(&text);
  kiln_compile_options_t co;
  memset(&co, 0, sizeof(co));
  co.emit.target = KILN_TARGET_HOST;
  co.command_buffer_min_run = 2;
  kiln_compile_stats_t st;
  kiln_executable_desc_t *d = NULL;
  kiln_pass_options_t env_passes;
  kiln_pjrt_compile_options_from_env(&co, &env_passes);
  check(kiln_compile_module(m, &co, &d, &st), "compile");
  kiln_hlo_module_destroy(m);
  v->cbs = st.command_buffers;
  v->inside = st.command_buffer_custom_calls;
  check(kiln_executable_load(dev, d, &v->exe), "load");
}

/* µs per execute over EXECUTES executes (fresh outputs each, as a client gets them). */
static double time_executes(variant_t *v, kiln_stream_t *stream, kiln_device_buffer_t *pb) {
  uint64_t size = pb->size;
  double t0 = kiln_clock_ms();
  for (int i = 0; i < EXECUTES; i++) {
    kiln_device_buffer_t *out = NULL;
    check(kiln_executable_run(v->exe, stream, &pb->ptr, &size, 1, &out), "run");
    kiln_device_buffer_destroy(out);
  }
  return (kiln_clock_ms() - t0) * 1e3 / EXECUTES;
}

int main(void) {
  check(kiln_ffi_registry_load_spec(kiln_ffi_registry_default(),
                                    "kiln_affine_cb=" KILN_FFI_TEST_CALL_LIB
                                    ":kiln_call_affine_cb,kiln_affine=" KILN_FFI_TEST_CALL_LIB
                                    ":kiln_call_affine"),
        "loading the handlers");
  kiln_device_t *dev = NULL;
  kiln_stream_t *stream = NULL;
  check(kiln_device_create("host", &dev), "device");
  check(kiln_stream_create(dev, &stream), "stream");
  variant_t on, off;
  load_variant(dev, "kiln_affine_cb", &on);
  load_variant(dev, "kiln_affine", &off);
  float p[256];
  for (int i = 0; i < 256; i++) p[i] = (float)(i % 7) * 0.125f;
  kiln_device_buffer_t *pb = NULL;
  check(kiln_device_buffer_create(dev, sizeof p, &pb), "alloc");
  check(kiln_stream_memcpy_h2d(stream, pb->ptr, p, sizeof p), "upload");
  check(kiln_stream_synchronize(stream), "upload");
  /* Warm-up (records the command buffer), then rounds alternating the two variants so that
   * load changes on a shared machine hit both alike. */
  time_executes(&on, stream, pb);
  time_executes(&off, stream, pb);
  for (int r = 0; r < RUNS; r++) {
    on.us[r] = time_executes(&on, stream, pb);
    off.us[r] = time_executes(&off, stream, pb);
  }
  qsort(on.us, RUNS, sizeof(double), cmp);
  qsort(off.us, RUNS, sizeof(double), cmp);
  double a = on.us[RUNS / 2], b = off.us[RUNS / 2];
  printf(
      "chain of %d custom calls between %d kernels, f32[256], %d executes x %d rounds "
      "(median, alternating)\n",
      STAGES, STAGES + 1, EXECUTES, RUNS);
  printf("command-buffer compatible: %.2f us/execute (%zu command buffers, %zu calls inside)\n", a,
         on.cbs, on.inside);
  printf("not compatible:            %.2f us/execute (%zu command buffers, %zu calls inside)\n", b,
         off.cbs, off.inside);
  printf("ratio not-compatible/compatible: %.2fx\n", b / (a > 0 ? a : 1));
  kiln_device_buffer_destroy(pb);
  kiln_executable_destroy(on.exe);
  kiln_executable_destroy(off.exe);
  kiln_stream_destroy(stream);
  kiln_device_destroy(dev);
  kiln_ffi_registry_default_shutdown();
  return 0;
}
