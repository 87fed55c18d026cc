/* The CUDA half of the FFI example (examples/ffi/gather_add_cuda.cu, built with nvcc when CMake
 * finds it): the library registers for the CUDA platform through a spec string (kiln asks its
 * handler for its metadata, which needs no GPU), and on a GPU examples/ffi/gather_add.hlo runs
 * with it on the device and agrees with the same formula in plain HLO. Skipped (77) without
 * nvcc, and the run part without a CUDA driver and GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/status.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "ffi/ffi_registry.h"
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

static void test_cuda_example_matches_plain_hlo_on_the_gpu(void **state) {
  (void)state;
  if (!load_example())
    KILN_SKIP("nvcc was not found when configuring: the CUDA example is not built");
  kiln_device_t *dev = NULL;
  kiln_status s = kiln_device_create("cuda", &dev);
  if (s) {
    printf("[  SKIP    ] no CUDA device: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    KILN_SKIPPED();
  }
  FILE *fp = fopen(KILN_FFI_EXAMPLE_HLO, "rb");
  assert_non_null(fp);
  static char text[1 << 14];
  size_t len = fread(text, 1, sizeof text - 1, fp);
  fclose(fp);
  text[len] = '\0';
  kiln_hlo_module_t *m = NULL;
  s = kiln_hlo_parse_module(text, len, NULL, &m);
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
  kiln_literal_t *out = NULL;
  s = kiln_device_run_module(m, args, 2, &o, &arena, &out, NULL);
  if (s) fail_msg("%s", kiln_status_message(s));
  assert_int_equal(kiln_literal_get_s64(out->tuple_elements[0], 0), 1); /* they agree */
  for (int64_t k = 0; k < args[1]->num_elements; k++)
    assert_true(kiln_literal_get_f64(out->tuple_elements[1], k) ==
                kiln_literal_get_f64(args[0], k % 128) + kiln_literal_get_f64(args[1], k));
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
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
  };
  return kiln_run_tests(tests, NULL, teardown);
}
