/* Launch limits (kiln_launch_validate): each of CUDA's per-block and per-grid bounds and the
 * shared-memory budget is enforced with a status naming it; defaults are sm_90's; a device
 * description overrides them; kiln_codegen_kernel_emit refuses a kernel whose launch does not
 * fit the device it compiles for. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "compiler/analysis/launch_grid.h"
#include "compiler/codegen/fusion_compiler.h"
#include "compiler/codegen/kir_pipeline.h"
#include "compiler/hlo/ir.h"

static void expect_out_of_range(const int64_t block[3], const int64_t grid[3], int64_t shared, bool optin,
                                const kiln_launch_device_t *dev, const char *needle) {
  kiln_status s = kiln_launch_validate(block, grid, shared, optin, dev);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_OUT_OF_RANGE);
  if (!strstr(kiln_status_message(s), needle)) fail_msg("'%s' does not mention '%s'", kiln_status_message(s), needle);
  kiln_status_free(s);
}

static void test_launch_within_sm90_limits_is_accepted(void **state) {
  (void)state;
  int64_t b[3] = {1024, 1, 1}, g[3] = {2147483647, 65535, 65535};
  assert_null(kiln_launch_validate(b, g, 48 * 1024, false, NULL));
  int64_t b2[3] = {32, 32, 1}, g2[3] = {1, 1, 1};
  assert_null(kiln_launch_validate(b2, g2, 0, false, NULL));
  int64_t b3[3] = {1, 16, 64};
  assert_null(kiln_launch_validate(b3, g2, 227 * 1024, true, NULL));
}

static void test_launch_block_limits_are_named(void **state) {
  (void)state;
  int64_t g[3] = {1, 1, 1};
  int64_t over_threads[3] = {64, 32, 1};
  expect_out_of_range(over_threads, g, 0, false, NULL, "2048 threads per block exceed the limit 1024");
  int64_t over_x[3] = {1025, 1, 1};
  expect_out_of_range(over_x, g, 0, false, NULL, "block dimension x of 1025");
  int64_t over_z[3] = {1, 1, 65};
  expect_out_of_range(over_z, g, 0, false, NULL, "block dimension z of 65 threads exceeds the limit 64");
  int64_t zero[3] = {0, 1, 1};
  expect_out_of_range(zero, g, 0, false, NULL, "block dimension x is 0");
}

static void test_launch_grid_limits_are_named(void **state) {
  (void)state;
  int64_t b[3] = {128, 1, 1};
  int64_t gx[3] = {2147483648LL, 1, 1};
  expect_out_of_range(b, gx, 0, false, NULL, "grid dimension x of 2147483648 blocks exceeds the limit 2147483647");
  int64_t gy[3] = {1, 65536, 1};
  expect_out_of_range(b, gy, 0, false, NULL, "grid dimension y of 65536");
  int64_t gz[3] = {1, 1, 65536};
  expect_out_of_range(b, gz, 0, false, NULL, "grid dimension z of 65536");
  int64_t g0[3] = {1, 0, 1};
  expect_out_of_range(b, g0, 0, false, NULL, "grid dimension y is 0");
}

static void test_launch_shared_memory_static_and_opt_in(void **state) {
  (void)state;
  int64_t b[3] = {256, 1, 1}, g[3] = {4, 1, 1};
  expect_out_of_range(b, g, 48 * 1024 + 1, false, NULL, "49153 bytes of static shared memory");
  assert_null(kiln_launch_validate(b, g, 48 * 1024 + 1, true, NULL));
  expect_out_of_range(b, g, 227 * 1024 + 1, true, NULL, "opt-in shared memory per block exceed the limit 232448");
}

static void test_launch_device_description_overrides_defaults(void **state) {
  (void)state;
  kiln_launch_device_t dev = {.max_threads_per_block = 512, .block_dim_limit_x = 100, .block_dim_limit_y = 10,
                              .shared_bytes_static = 4096};
  int64_t b[3] = {1024, 1, 1}, g[3] = {1, 1, 1};
  expect_out_of_range(b, g, 0, false, &dev, "1024 threads per block exceed the limit 512");
  int64_t b2[3] = {256, 1, 1}, gx[3] = {101, 1, 1}, gy[3] = {1, 11, 1};
  expect_out_of_range(b2, gx, 0, false, &dev, "grid dimension x of 101 blocks exceeds the limit 100");
  expect_out_of_range(b2, gy, 0, false, &dev, "grid dimension y of 11 blocks exceeds the limit 10");
  expect_out_of_range(b2, g, 4097, false, &dev, "exceed the limit 4096");
}

static kiln_status emit_for(const char *text, const kiln_launch_device_t *dev,
                            kiln_codegen_kernel_t *k) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (s) return s;
  kiln_codegen_compile_options_t co = {0};
  co.device = dev;
  s = kiln_codegen_kernel_emit(m->entry, &co, k);
  kiln_hlo_module_destroy(m);
  return s;
}

static void test_fusion_emit_refuses_kernels_over_the_device_limits(void **state) {
  (void)state;
  /* A stable sort keeps its 3000-element f32 row and 3000 s32 positions (24000 bytes) in
   * shared memory and runs 1024 threads per block. */
  const char *sort =
      "HloModule s\n\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT c = pred[] compare(a, b), direction=LT\n}\n\n"
      "ENTRY fused {\n  p0 = f32[2,3000] parameter(0)\n"
      "  ROOT s = f32[2,3000] sort(p0), dimensions={1}, is_stable=true, to_apply=cmp\n}\n";
  kiln_codegen_kernel_t k;
  assert_null(emit_for(sort, NULL, &k));
  kiln_codegen_kernel_free(&k);
  kiln_launch_device_t small_shared = {.shared_bytes_static = 8192};
  kiln_status s = emit_for(sort, &small_shared, &k);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_OUT_OF_RANGE);
  assert_non_null(strstr(kiln_status_message(s), "24000 bytes of static shared memory"));
  assert_non_null(strstr(kiln_status_message(s), "fusion fused"));
  assert_null(k.kir);
  kiln_status_free(s);
  kiln_launch_device_t few_threads = {.max_threads_per_block = 256};
  s = emit_for(sort, &few_threads, &k);
  assert_non_null(s);
  assert_non_null(strstr(kiln_status_message(s), "1024 threads per block exceed the limit 256"));
  kiln_status_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_launch_within_sm90_limits_is_accepted),
      cmocka_unit_test(test_launch_block_limits_are_named),
      cmocka_unit_test(test_launch_grid_limits_are_named),
      cmocka_unit_test(test_launch_shared_memory_static_and_opt_in),
      cmocka_unit_test(test_launch_device_description_overrides_defaults),
      cmocka_unit_test(test_fusion_emit_refuses_kernels_over_the_device_limits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
