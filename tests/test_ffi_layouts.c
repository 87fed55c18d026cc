/* Custom-call operand and result layouts: a handler reads its operands and writes its results
 * in the layouts the call names (HLO's operand_layout_constraints and the result shape's
 * layout; StableHLO's operand_layouts / result_layouts, which the converter turns into them),
 * as XLA lays them out, whatever layout the values have around the call. The handler here
 * copies its operand's bytes to its result, so the result shows the layouts the buffers had. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "ffi/ffi_registry.h"
#include "runtime/host/host_device.h"
#include "tools/common/device_run.h"
#include "tests/stablehlo_test_util.h"

/* A legacy host handler (api_version 1): six floats from operand 0 to the result, byte for
 * byte. */
static void copy6(void *out, const void **in) {
  memcpy(out, in[0], 6 * sizeof(float));
}

static int setup(void **state) {
  (void)state;
  kiln_status s = kiln_ffi_registry_register_legacy(kiln_ffi_registry_default(), "kiln_test_copy6",
                                                    15, "Host", 4, (void *)copy6);
  if (s) fail_msg("%s", kiln_status_message(s));
  return 0;
}

static int teardown(void **state) {
  (void)state;
  kiln_ffi_registry_default_shutdown();
  return 0;
}

/* Runs `hlo` on the host with x = [[1, 2, 3], [4, 5, 6]]; the result's six values. */
static void run(const char *hlo, float got[6]) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(hlo, strlen(hlo), NULL, &m);
  if (s) fail_msg("%s", kiln_status_message(s));
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *x = kiln_literal_make(&arena, m->entry->parameters[0]->shape), *r = NULL;
  for (int i = 0; i < 6; i++) kiln_literal_set_f64(x, i, i + 1);
  kiln_device_t *dev = NULL;
  assert_null(kiln_host_device_create(0, &dev));
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = dev;
  s = kiln_device_run_module(m, &x, 1, &o, &arena, &r, NULL);
  if (s) fail_msg("%s", kiln_status_message(s));
  for (int i = 0; i < 6; i++) got[i] = (float)kiln_literal_get_f64(r, i);
  kiln_device_destroy(dev);
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
}

static void expect(const float *got, const float *want) {
  for (int i = 0; i < 6; i++)
    if (got[i] != want[i])
      fail_msg("element %d: %g, want %g (got %g %g %g %g %g %g)", i, got[i], want[i], got[0],
               got[1], got[2], got[3], got[4], got[5]);
}

/* The operand in column-major order: the bytes 1 4 2 5 3 6, read back row-major. */
static void test_operand_layout_constraint_reaches_the_handler(void **state) {
  (void)state;
  float got[6];
  run("HloModule m\n\nENTRY e {\n  x = f32[2,3] parameter(0)\n"
      "  ROOT c = f32[2,3]{1,0} custom-call(x), custom_call_target=\"kiln_test_copy6\", "
      "api_version=API_VERSION_ORIGINAL, operand_layout_constraints={f32[2,3]{0,1}}\n}\n",
      got);
  static const float want[6] = {1, 4, 2, 5, 3, 6};
  expect(got, want);
}

/* The result in column-major order: the handler writes 1..6, the value is [[1,3,5],[2,4,6]]. */
static void test_result_layout_reaches_the_handler(void **state) {
  (void)state;
  float got[6];
  run("HloModule m\n\nENTRY e {\n  x = f32[2,3] parameter(0)\n"
      "  c = f32[2,3]{0,1} custom-call(x), custom_call_target=\"kiln_test_copy6\", "
      "api_version=API_VERSION_ORIGINAL, operand_layout_constraints={f32[2,3]{1,0}}\n"
      "  ROOT n = f32[2,3] negate(c)\n}\n",
      got);
  static const float want[6] = {-1, -3, -5, -2, -4, -6};
  expect(got, want);
}

/* The same through the StableHLO converter, as jax.ffi.ffi_call(input_layouts=...) writes it. */
static void test_stablehlo_layouts_reach_the_handler(void **state) {
  (void)state;
  static const char kProgram[] =
      "func.func @layouts() {\n"
      "  %x = stablehlo.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>\n"
      "  %0 = stablehlo.custom_call @kiln_test_copy6(%x) {backend_config = \"\", "
      "operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[1, 0]> : "
      "tensor<2xindex>]} : (tensor<2x3xf32>) -> tensor<2x3xf32>\n"
      "  check.expect_eq_const %0, dense<[[1.0, 4.0, 2.0], [5.0, 3.0, 6.0]]> : tensor<2x3xf32>\n"
      "  func.return\n"
      "}\n";
  kiln_device_t *dev = NULL;
  assert_null(kiln_host_device_create(0, &dev));
  kiln_test_run_checks(kProgram, sizeof kProgram - 1, "layouts.mlir", dev, 1);
  kiln_device_destroy(dev);
}

/* A constraint list that does not fit the operands is the verifier's error, naming it. */
static void test_constraints_that_do_not_fit_are_named(void **state) {
  (void)state;
  static const char *const kBad[][2] = {
      {"f32[3,2]{0,1}", "shape 0 is f32[3,2], but operand 0 is f32[2,3]"},
      {"f32[2,3]{0,1}, f32[2]{0}", "names 2 shapes for 1 operands"},
      {"f32[2,3]", "has no layout"},
      {"f32[2,3]{0,1} junk", "expected"},
  };
  for (size_t i = 0; i < sizeof kBad / sizeof kBad[0]; i++) {
    char hlo[512];
    snprintf(hlo, sizeof hlo,
             "HloModule m\n\nENTRY e {\n  x = f32[2,3] parameter(0)\n"
             "  ROOT c = f32[2,3] custom-call(x), custom_call_target=\"kiln_test_copy6\", "
             "operand_layout_constraints={%s}\n}\n",
             kBad[i][0]);
    kiln_hlo_module_t *m = NULL;
    kiln_status s = kiln_hlo_parse_module(hlo, strlen(hlo), NULL, &m);
    if (!s) s = kiln_hlo_module_verify(m);
    if (!s) fail_msg("{%s} verified", kBad[i][0]);
    if (!strstr(kiln_status_message(s), kBad[i][1]))
      fail_msg("{%s}: %s", kBad[i][0], kiln_status_message(s));
    kiln_status_free(s);
    kiln_hlo_module_destroy(m);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_operand_layout_constraint_reaches_the_handler),
      cmocka_unit_test(test_result_layout_reaches_the_handler),
      cmocka_unit_test(test_stablehlo_layouts_reach_the_handler),
      cmocka_unit_test(test_constraints_that_do_not_fit_are_named),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
