/* The CUDA half of the FFI example (examples/ffi/gather_add_cuda.cu, built with nvcc when CMake
 * finds it): the library registers for the CUDA platform through a spec string (kiln asks its
 * handler for its metadata, which needs no GPU), and on a GPU examples/ffi/gather_add.hlo runs
 * with it on the device and agrees with the same formula in plain HLO, also registered
 * command-buffer compatible (its call captured into the CUDA graph). Skipped (77) without
 * nvcc, and the run parts without a CUDA driver and GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <dlfcn.h>

#include "base/status.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "ffi/ffi_registry.h"
#include "runtime/command_buffer.h"
#include "runtime/device.h"
#include "skip_util.h"
#include "tools/common/device_run.h"

#ifndef KILN_FFI_CUDA_EXAMPLE_LIB
#define KILN_FFI_CUDA_EXAMPLE_LIB ""
#endif
#ifndef KILN_FFI_EXAMPLE_HLO
#define KILN_FFI_EXAMPLE_HLO "examples/ffi/gather_add.hlo"
#endif

static bool load_example(void) {
  if (!KILN_FFI_CUDA_EXAMPLE_LIB[0]) return false;
  kiln_status s = kiln_ffi_registry_load_spec(kiln_ffi_registry_default(),
                                              "kiln_gather_add@CUDA=" KILN_FFI_CUDA_EXAMPLE_LIB
                                              ":kiln_gather_add_cuda");
  if (s) fail_msg("%s", kiln_status_message(s));
  return true;
}

static void test_cuda_handler_registers_for_the_cuda_platform(void **state) {
  (void)state;
  if (!load_example())
    KILN_SKIP("nvcc was not found when configuring: the CUDA example is not built");
  kiln_ffi_handler_t h;
  kiln_status s = kiln_ffi_registry_lookup(kiln_ffi_registry_default(), "kiln_gather_add",
                                           KILN_FFI_PLATFORM_CUDA, &h);
  if (s) fail_msg("%s", kiln_status_message(s));
  assert_int_equal(h.api_major, 0); /* the metadata it reported: FFI 0.x */
  assert_non_null(h.bundle.execute);
  s = kiln_ffi_registry_lookup(kiln_ffi_registry_default(), "kiln_gather_add",
                               KILN_FFI_PLATFORM_HOST, &h);
  assert_non_null(s); /* registered for CUDA only */
  assert_non_null(strstr(kiln_status_message(s), "CUDA"));
  kiln_status_free(s);
}

/* Runs examples/ffi/gather_add.hlo on `dev` (its custom call's target renamed to `target`)
 * and checks that the custom call agrees with plain HLO; *report gets the run's report. */
static void run_example(kiln_device_t *dev, const char *target, int64_t repeat,
                        kiln_device_run_report_t *report) {
  FILE *fp = fopen(KILN_FFI_EXAMPLE_HLO, "rb");
  assert_non_null(fp);
  static char file[1 << 14], text[1 << 14];
  size_t len = fread(file, 1, sizeof file - 1, fp);
  fclose(fp);
  file[len] = '\0';
  const char *call = strstr(file, "custom_call_target=\"kiln_gather_add\"");
  assert_non_null(call);
  int n = snprintf(text, sizeof text, "%.*scustom_call_target=\"%s\"%s", (int)(call - file), file,
                   target, call + strlen("custom_call_target=\"kiln_gather_add\""));
  assert_true(n > 0 && (size_t)n < sizeof text);
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, (size_t)n, NULL, &m);
  if (s) fail_msg("%s", kiln_status_message(s));
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *args[2];
  for (int i = 0; i < 2; i++) {
    args[i] = kiln_literal_make(&arena, m->entry->parameters[i]->shape);
    for (int64_t k = 0; k < args[i]->num_elements; k++)
      kiln_literal_set_f64(args[i], k, (double)((k * 7 + i * 3) % 19) - 9.0);
  }
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = dev;
  o.repeat = repeat;
  kiln_literal_t *out = NULL;
  s = kiln_device_run_module(m, args, 2, &o, &arena, &out, report);
  if (s) fail_msg("%s", kiln_status_message(s));
  assert_int_equal(kiln_literal_get_s64(out->tuple_elements[0], 0), 1); /* they agree */
  for (int64_t k = 0; k < args[1]->num_elements; k++)
    assert_true(kiln_literal_get_f64(out->tuple_elements[1], k) ==
                kiln_literal_get_f64(args[0], k % 128) + kiln_literal_get_f64(args[1], k));
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
}

static kiln_device_t *cuda_device_or_skip(void) {
  kiln_device_t *dev = NULL;
  kiln_status s = kiln_device_create("cuda", &dev);
  if (s) {
    printf("[  SKIP    ] no CUDA device: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    return NULL;
  }
  return dev;
}

static void test_cuda_example_matches_plain_hlo_on_the_gpu(void **state) {
  (void)state;
  if (!load_example())
    KILN_SKIP("nvcc was not found when configuring: the CUDA example is not built");
  kiln_device_t *dev = cuda_device_or_skip();
  if (!dev) KILN_SKIPPED();
  kiln_device_run_report_t rep;
  run_example(dev, "kiln_gather_add", 1, &rep);
  kiln_device_destroy(dev);
}

/* The same handler registered command-buffer compatible (registration traits, as PJRT's FFI
 * extension or XLA_FFI_Handler_Register pass them): its call is captured into a child node
 * of the CUDA graph with the kernels after it, and repeated runs (fresh outputs: the call is
 * re-captured) still agree with plain HLO. The registration part runs without a GPU. */
static void test_compatible_cuda_handler_is_captured_into_the_graph(void **state) {
  (void)state;
  if (!load_example())
    KILN_SKIP("nvcc was not found when configuring: the CUDA example is not built");
  kiln_ffi_registry_t *reg = kiln_ffi_registry_default();
  void *lib = NULL;
  kiln_status s = kiln_ffi_registry_open_library(reg, KILN_FFI_CUDA_EXAMPLE_LIB, &lib);
  if (s) fail_msg("%s", kiln_status_message(s));
  XLA_FFI_Handler_Bundle b;
  memset(&b, 0, sizeof b);
  b.execute = (XLA_FFI_Handler *)dlsym(lib, "kiln_gather_add_cuda");
  assert_non_null(b.execute);
  const char *name = "kiln_gather_add_cb";
  s = kiln_ffi_registry_register(reg, name, strlen(name), "CUDA", 4, &b,
                                 XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE);
  if (s) fail_msg("%s", kiln_status_message(s));
  kiln_ffi_handler_t h;
  s = kiln_ffi_registry_lookup(reg, name, KILN_FFI_PLATFORM_CUDA, &h);
  if (s) fail_msg("%s", kiln_status_message(s));
  assert_true(h.traits & XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE);
  kiln_device_t *dev = cuda_device_or_skip();
  if (!dev) KILN_SKIPPED();
  setenv("KILN_COMMAND_BUFFER_MIN_RUN", "1", 1);
  kiln_device_run_report_t rep;
  run_example(dev, name, 3, &rep);
  unsetenv("KILN_COMMAND_BUFFER_MIN_RUN");
  assert_int_equal(rep.compile.command_buffer_custom_calls, 1);
  assert_int_equal(rep.compile.split_custom_calls, 0);
  kiln_cmd_stats_t st = kiln_cmd_cache_stats(kiln_device_cmd_cache(dev));
  printf(
      "CUDA graph with the custom call: %lld records, %lld instantiate failures, %lld "
      "patched launches, %lld direct issues\n",
      (long long)st.records, (long long)st.instantiate_failures, (long long)st.patched_launches,
      (long long)st.direct_issues);
  assert_int_equal(st.instantiate_failures, 0); /* captured, not fallen back to issuing */
  kiln_device_destroy(dev);
}

static int teardown(void **state) {
  (void)state;
  kiln_ffi_registry_default_shutdown();
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cuda_handler_registers_for_the_cuda_platform),
      cmocka_unit_test(test_cuda_example_matches_plain_hlo_on_the_gpu),
      cmocka_unit_test(test_compatible_cuda_handler_is_captured_into_the_graph),
  };
  return kiln_run_tests(tests, NULL, teardown);
}
