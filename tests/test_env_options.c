/* The edges' reader (plugin/env_options.h): every variable the layers used to read themselves
 * reaches them as options — per compile (compile, pass and codegen options, the CUDA toolkit
 * search) and per process (the runtime's options, the log level, the host pool's size, the
 * cache bounds, the FFI handler spec) — and the layers below read none of it themselves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/disk_cache.h"
#include "base/log.h"
#include "plugin/env_options.h"
#include "runtime/runtime_options.h"

/* Sets `n` variables (name, value pairs; NULL value: unset). */
static void set_env(const char *const (*kv)[2], size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (kv[i][1])
      setenv(kv[i][0], kv[i][1], 1);
    else
      unsetenv(kv[i][0]);
  }
}

static void unset_all(const char *const (*kv)[2], size_t n) {
  for (size_t i = 0; i < n; i++) unsetenv(kv[i][0]);
}

static const char *const kCompileVars[][2] = {
    {"KILN_DUMP_TO", "/tmp/kiln-env-dumps"}, {"KILN_COMMAND_BUFFER_MIN_RUN", "3"},
    {"KILN_DISABLE_COMMAND_BUFFERS", "1"},   {"KILN_HOST_CPU", "skylake"},
    {"KILN_HOST_CPU_FEATURES", "-avx512f"},  {"KILN_HOST_LLVM_PIPELINE", "default<O1>"},
    {"KILN_ALLOW_EXCESS_PRECISION", "0"},    {"KILN_CUDA_DIR", "/opt/kiln-cuda"},
    {"CUDA_HOME", "/opt/cuda-home"},         {"CUDA_PATH", "/opt/cuda-path"},
    {"TMPDIR", "/tmp/kiln-env-tmp"},         {"KILN_DISABLE_PASSES", "simplify,cse"},
    {"KILN_GEMM_LIBRARY", "none"},           {"KILN_VERIFY_PASSES", "1"},
};
#define NUM_COMPILE_VARS (sizeof(kCompileVars) / sizeof(kCompileVars[0]))

static void test_compile_options_take_every_variable(void **state) {
  (void)state;
  set_env(kCompileVars, NUM_COMPILE_VARS);
  kiln_compile_options_t o;
  memset(&o, 0, sizeof o);
  kiln_pass_options_t po;
  kiln_pjrt_compile_options_from_env(&o, &po);
  assert_string_equal(o.emit.dump_dir, "/tmp/kiln-env-dumps");
  assert_int_equal(o.command_buffer_min_run, 3);
  assert_true(o.no_command_buffers);
  assert_string_equal(o.emit.host_jit.cpu, "skylake");
  assert_string_equal(o.emit.host_jit.extra_features, "-avx512f");
  assert_string_equal(o.emit.host_jit.pipeline, "default<O1>");
  assert_true(o.emit.strict_precision);
  assert_string_equal(o.emit.cuda.dir, "/opt/kiln-cuda");
  assert_string_equal(o.emit.cuda.home, "/opt/cuda-home");
  assert_string_equal(o.emit.cuda.path, "/opt/cuda-path");
  assert_string_equal(o.emit.cuda.tmp_dir, "/tmp/kiln-env-tmp");
  assert_non_null(o.emit.cuda.exec_path); /* $PATH */
  assert_ptr_equal(o.passes, &po);
  assert_string_equal(po.dump_dir, "/tmp/kiln-env-dumps");
  assert_string_equal(po.disabled_passes, "simplify,cse");
  assert_true(po.no_gemm_library);
  assert_int_equal(po.verify, 1);
  /* What the caller set wins; a caller's own pass options are left alone. */
  kiln_pass_options_t mine = {.verify = 0, .disabled_passes = "dce"};
  memset(&o, 0, sizeof o);
  o.emit.dump_dir = "/tmp/mine";
  o.emit.host_jit.cpu = "znver4";
  o.emit.cuda.dir = "/opt/mine";
  o.passes = &mine;
  kiln_pjrt_compile_options_from_env(&o, &po);
  assert_string_equal(o.emit.dump_dir, "/tmp/mine");
  assert_string_equal(o.emit.host_jit.cpu, "znver4");
  assert_string_equal(o.emit.cuda.dir, "/opt/mine");
  assert_ptr_equal(o.passes, &mine);
  assert_string_equal(mine.disabled_passes, "dce");
  unset_all(kCompileVars, NUM_COMPILE_VARS);
  /* Nothing set: nothing filled (verify stays the layers' default). */
  memset(&o, 0, sizeof o);
  kiln_pjrt_compile_options_from_env(&o, &po);
  assert_null(o.emit.dump_dir);
  assert_false(o.no_command_buffers);
  assert_false(o.emit.strict_precision);
  assert_null(o.emit.cuda.dir);
  assert_null(po.disabled_passes);
  assert_false(po.no_gemm_library);
  assert_int_equal(po.verify, -1);
}

static void test_excess_precision_flags(void **state) {
  (void)state;
  static const struct {
    const char *allow, *xla_flags;
    bool strict;
  } kCases[] = {
      {NULL, NULL, false},
      {"0", NULL, true},
      {"false", NULL, true},
      {"1", NULL, false},
      {NULL, "--xla_gpu_foo=1 --xla_allow_excess_precision=false", true},
      {NULL, "--xla_allow_excess_precision=0", true},
      {NULL, "--xla_allow_excess_precision=true", false},
  };
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; i++) {
    const char *const kv[][2] = {{"KILN_ALLOW_EXCESS_PRECISION", kCases[i].allow},
                                 {"XLA_FLAGS", kCases[i].xla_flags}};
    set_env(kv, 2);
    assert_int_equal(kiln_pjrt_strict_precision_from_env(), kCases[i].strict);
    kiln_codegen_compile_options_t co = {0};
    kiln_pjrt_codegen_options_from_env(&co);
    assert_int_equal(kiln_codegen_excess_precision(&co), !kCases[i].strict);
    unset_all(kv, 2);
  }
}

/* Deterministic ops: KILN_DETERMINISTIC_OPS, or XLA's two flags in XLA_FLAGS (whole flags
 * only), reach the codegen and whole-module compile options. */
static void test_deterministic_ops_flags(void **state) {
  (void)state;
  static const struct {
    const char *kiln, *xla_flags;
    bool det;
  } kCases[] = {
      {NULL, NULL, false},
      {"1", NULL, true},
      {"0", NULL, false},
      {NULL, "--xla_gpu_deterministic_ops=true", true},
      {NULL, "--xla_gpu_foo=1 --xla_gpu_exclude_nondeterministic_ops=1", true},
      {NULL, "--xla_gpu_deterministic_ops=false", false},
      {NULL, "--xxla_gpu_deterministic_ops=true", false},
  };
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; i++) {
    const char *const kv[][2] = {{"KILN_DETERMINISTIC_OPS", kCases[i].kiln},
                                 {"XLA_FLAGS", kCases[i].xla_flags}};
    set_env(kv, 2);
    assert_int_equal(kiln_pjrt_deterministic_from_env(), kCases[i].det);
    kiln_codegen_compile_options_t co = {0};
    kiln_pjrt_codegen_options_from_env(&co);
    assert_int_equal(co.deterministic, kCases[i].det);
    kiln_compile_options_t o;
    memset(&o, 0, sizeof o);
    kiln_pass_options_t po;
    kiln_pjrt_compile_options_from_env(&o, &po);
    assert_int_equal(o.emit.deterministic, kCases[i].det);
    unset_all(kv, 2);
  }
}

static const char *const kProcessVars[][2] = {
    {"KILN_ALLOCATOR", "plain"},
    {"KILN_COMMAND_BUFFER_CACHE_SIZE", "7"},
    {"KILN_DISABLE_COMMAND_BUFFERS", "yes"},
    {"KILN_CUDA_DRIVER", "/opt/libcuda-test.so"},
    {"KILN_NCCL_LIBRARY", "/opt/libnccl-test.so"},
    {"KILN_MPI_LIBRARY", "libmpi-test.so"},
    {"KILN_HOST_BLAS", "none"},
    {"KILN_HOST_EPILOGUE_ISA", "base"},
    {"KILN_HOST_GEMM_HALF", "panels"},
    {"KILN_HOST_GEMM_F32", "library"},
    {"KILN_LOG", "debug"},
    {"KILN_CACHE_MAX_BYTES", "2M"},
};
#define NUM_PROCESS_VARS (sizeof(kProcessVars) / sizeof(kProcessVars[0]))

static void test_process_options_reach_the_runtime_and_base(void **state) {
  (void)state;
  kiln_runtime_options_t saved_ro = kiln_runtime_options();
  kiln_log_level_t saved_level = kiln_log_level();
  set_env(kProcessVars, NUM_PROCESS_VARS);
  kiln_pjrt_process_options_reread_env();
  kiln_runtime_options_t ro = kiln_runtime_options();
  assert_true(ro.plain_allocator);
  assert_int_equal(ro.command_buffer_cache_size, 7);
  assert_true(ro.no_command_buffers);
  assert_string_equal(ro.cuda_driver, "/opt/libcuda-test.so");
  assert_string_equal(ro.nccl_library, "/opt/libnccl-test.so");
  assert_string_equal(ro.mpi_library, "libmpi-test.so");
  assert_string_equal(ro.host_blas, "none");
  assert_string_equal(ro.host_epilogue_isa, "base");
  assert_string_equal(ro.host_gemm_half, "panels");
  assert_string_equal(ro.host_gemm_f32, "library");
  assert_int_equal(kiln_log_level(), KILN_LOG_DEBUG);
  assert_int_equal(kiln_disk_cache_max_bytes(), 2 * 1024 * 1024);
  /* The runtime keeps copies: changing the environment changes nothing until read again. */
  setenv("KILN_CUDA_DRIVER", "/opt/other.so", 1);
  assert_string_equal(kiln_runtime_options().cuda_driver, "/opt/libcuda-test.so");
  unset_all(kProcessVars, NUM_PROCESS_VARS);
  assert_string_equal(kiln_runtime_options().cuda_driver, "/opt/libcuda-test.so");
  kiln_pjrt_process_options_reread_env();
  ro = kiln_runtime_options();
  assert_false(ro.plain_allocator);
  assert_int_equal(ro.command_buffer_cache_size, 0);
  assert_null(ro.cuda_driver);
  assert_int_equal(kiln_log_level(), KILN_LOG_WARNING);
  assert_int_equal(kiln_disk_cache_max_bytes(), (int64_t)1 << 30);
  kiln_runtime_options_set(&saved_ro);
  kiln_log_set_level(saved_level);
}

static void test_bad_values_fall_back_to_the_defaults(void **state) {
  (void)state;
  const char *const kv[][2] = {{"KILN_ALLOCATOR", "slab"},
                               {"KILN_CACHE_MAX_BYTES", "lots"},
                               {"KILN_COMMAND_BUFFER_CACHE_SIZE", "-3"},
                               {"KILN_LOG", "loud"}};
  kiln_log_level_t saved_level = kiln_log_level();
  set_env(kv, 4);
  kiln_pjrt_process_options_reread_env(); /* warns for KILN_ALLOCATOR and the size */
  kiln_runtime_options_t ro = kiln_runtime_options();
  assert_false(ro.plain_allocator);
  assert_int_equal(ro.command_buffer_cache_size, 0);
  assert_int_equal(kiln_disk_cache_max_bytes(), (int64_t)1 << 30);
  assert_int_equal(kiln_log_level(), KILN_LOG_WARNING);
  unset_all(kv, 4);
  kiln_pjrt_process_options_reread_env();
  kiln_log_set_level(saved_level);
}

static void test_log_level_and_size_parsers(void **state) {
  (void)state;
  kiln_log_level_t l = KILN_LOG_ERROR;
  assert_true(kiln_log_parse_level("info", &l));
  assert_int_equal(l, KILN_LOG_INFO);
  assert_true(kiln_log_parse_level("warn", &l));
  assert_int_equal(l, KILN_LOG_WARNING);
  assert_true(kiln_log_parse_level("3", &l));
  assert_int_equal(l, KILN_LOG_DEBUG);
  assert_false(kiln_log_parse_level("4", &l));
  assert_false(kiln_log_parse_level("", &l));
  assert_false(kiln_log_parse_level(NULL, &l));
  assert_int_equal(l, KILN_LOG_DEBUG); /* unchanged by a refusal */
  int64_t b = 0;
  assert_true(kiln_disk_cache_parse_size("512", &b));
  assert_int_equal(b, 512);
  assert_true(kiln_disk_cache_parse_size("1.5K", &b));
  assert_int_equal(b, 1536);
  assert_true(kiln_disk_cache_parse_size("3g", &b));
  assert_int_equal(b, (int64_t)3 << 30);
  assert_false(kiln_disk_cache_parse_size("-1", &b));
  assert_false(kiln_disk_cache_parse_size("G", &b));
}

static void test_ffi_spec_from_a_variable(void **state) {
  (void)state;
  kiln_ffi_registry_t *r = NULL;
  assert_null(kiln_ffi_registry_create(&r));
  unsetenv("KILN_ENV_TEST_HANDLERS");
  assert_null(kiln_pjrt_ffi_registry_load_env(r, "KILN_ENV_TEST_HANDLERS"));
  setenv("KILN_ENV_TEST_HANDLERS", "x=/nonexistent/libkiln-env-test.so:f", 1);
  kiln_status s = kiln_pjrt_ffi_registry_load_env(r, "KILN_ENV_TEST_HANDLERS");
  assert_non_null(s);
  assert_non_null(strstr(kiln_status_message(s), "in KILN_ENV_TEST_HANDLERS"));
  kiln_status_free(s);
  /* The default spec: what custom calls load before their first lookup, with its origin. */
  kiln_ffi_registry_set_default_spec("y=/nonexistent/libkiln-env-test.so:g", "KILN_FFI_HANDLERS");
  s = kiln_ffi_registry_load_default_spec(r);
  assert_non_null(s);
  assert_non_null(strstr(kiln_status_message(s), "in KILN_FFI_HANDLERS"));
  kiln_status_free(s);
  kiln_ffi_registry_set_default_spec(NULL, NULL);
  assert_null(kiln_ffi_registry_load_default_spec(r));
  unsetenv("KILN_ENV_TEST_HANDLERS");
  kiln_ffi_registry_destroy(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compile_options_take_every_variable),
      cmocka_unit_test(test_excess_precision_flags),
      cmocka_unit_test(test_deterministic_ops_flags),
      cmocka_unit_test(test_process_options_reach_the_runtime_and_base),
      cmocka_unit_test(test_bad_values_fall_back_to_the_defaults),
      cmocka_unit_test(test_log_level_and_size_parsers),
      cmocka_unit_test(test_ffi_spec_from_a_variable),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
