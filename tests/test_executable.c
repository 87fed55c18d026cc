/* Thunk emission and executables on the host device: hand-written modules with a while loop,
 * a conditional, a BLAS dot, tuple outputs, a donated parameter, a layout-changing
 * parameter; the emitted thunk sequence's shape; repeated runs with moving buffers; and the
 * errors a caller can provoke (custom calls, wrong parameter sizes, a stream of another
 * device). Results are compared with the reference evaluator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "compiler/eval/eval.h"
#include "compiler/thunks/compile.h"
#include "runtime/executable.h"
#include "runtime/host/host_device.h"
#include "tools/common/compare.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"
#include "tests/host_run_util.h"

static kiln_device_t *g_dev;

static int setup(void **state) { return kiln_host_device_create(2, &g_dev) ? -1 : 0; }
static int teardown(void **state) {
  kiln_device_destroy(g_dev);
  return 0;
}

/* Runs `text` on the host and on the evaluator (tests/host_run_util.h). */
static void run_and_compare(const char *text, int repeat, char **thunks) {
  run_and_compare_on(g_dev, text, repeat, thunks);
}

/* 100 trips: more than while_loop_unroll takes, so it stays a loop. */
static void test_while_loop_runs_its_body_until_the_condition_fails(void **state) {
  char *thunks = NULL;
  run_and_compare(
      "HloModule w\n"
      "cond {\n  p = (s32[], f32[64]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
      "  n = s32[] constant(100)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n"
      "body {\n  p = (s32[], f32[64]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
      "  x = f32[64] get-tuple-element(p), index=1\n  one = s32[] constant(1)\n"
      "  j = s32[] add(i, one)\n  h = f32[] constant(0.5)\n  hb = f32[64] broadcast(h), "
      "dimensions={}\n"
      "  y = f32[64] multiply(x, hb)\n  z = f32[64] add(y, hb)\n  ROOT t = (s32[], f32[64]) "
      "tuple(j, z)\n}\n"
      "ENTRY e {\n  x = f32[64] parameter(0)\n  z = s32[] constant(0)\n"
      "  t = (s32[], f32[64]) tuple(z, x)\n  w = (s32[], f32[64]) while(t), condition=cond, "
      "body=body\n"
      "  ROOT r = f32[64] get-tuple-element(w), index=1\n}\n",
      3, &thunks);
  assert_non_null(strstr(thunks, "while"));
  assert_non_null(strstr(thunks, "kernel"));
  printf("%s", thunks);
  kiln_free(thunks);
}

static void test_conditional_picks_the_branch_of_the_index(void **state) {
  const char *text =
      "HloModule c\n"
      "b0 {\n  p = f32[32] parameter(0)\n  ROOT n = f32[32] negate(p)\n}\n"
      "b1 {\n  p = f32[32] parameter(0)\n  ROOT e = f32[32] exponential(p)\n}\n"
      "b2 {\n  p = f32[32] parameter(0)\n  ROOT a = f32[32] abs(p)\n}\n"
      "ENTRY e {\n  i = s32[] parameter(0)\n  x = f32[32] parameter(1)\n"
      "  ROOT c = f32[32] conditional(i, x, x, x), branch_computations={b0, b1, b2}\n}\n";
  char *thunks = NULL;
  run_and_compare(text, 1, &thunks);
  assert_non_null(strstr(thunks, "conditional"));
  kiln_free(thunks);
}

static void test_f32_dot_becomes_a_gemm_thunk(void **state) {
  char *thunks = NULL;
  run_and_compare("HloModule d\nENTRY e {\n  a = f32[2,24,16] parameter(0)\n  b = f32[2,16,8] parameter(1)\n"
                  "  ROOT d = f32[2,24,8] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
                  "rhs_batch_dims={0}, rhs_contracting_dims={1}\n}\n",
                  1, &thunks);
  assert_non_null(strstr(thunks, "gemm"));
  kiln_free(thunks);
  /* A bf16 dot is a gemm on the host too (f32 panels, one rounding). */
  run_and_compare("HloModule d\nENTRY e {\n  a = bf16[24,16] parameter(0)\n  b = bf16[16,8] parameter(1)\n"
                  "  ROOT d = bf16[24,8] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
                  1, &thunks);
  assert_non_null(strstr(thunks, "gemm d bf16 batch=1 m=24 n=8 k=16"));
  kiln_free(thunks);
  /* An s32 dot is a gemm on the host too (kiln's integer kernel). */
  run_and_compare(
      "HloModule d\nENTRY e {\n  a = s32[24,16] parameter(0)\n  b = s32[16,8] parameter(1)\n"
      "  ROOT d = s32[24,8] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
      1, &thunks);
  assert_non_null(strstr(thunks, "gemm d s32 batch=1 m=24 n=8 k=16"));
  kiln_free(thunks);
  /* An s64 dot is a kernel (no gemm takes it). */
  run_and_compare(
      "HloModule d\nENTRY e {\n  a = s64[24,16] parameter(0)\n  b = s64[16,8] parameter(1)\n"
      "  ROOT d = s64[24,8] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
      1, &thunks);
  assert_null(strstr(thunks, "gemm"));
  assert_non_null(strstr(thunks, "kernel"));
  kiln_free(thunks);
  /* Without a gemm library every dot is an emitted kernel. */
  setenv("KILN_GEMM_LIBRARY", "none", 1);
  run_and_compare("HloModule d\nENTRY e {\n  a = f32[24,16] parameter(0)\n  b = f32[16,8] parameter(1)\n"
                  "  ROOT d = f32[24,8] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
                  1, &thunks);
  unsetenv("KILN_GEMM_LIBRARY");
  assert_null(strstr(thunks, "gemm"));
  assert_non_null(strstr(thunks, "kernel"));
  kiln_free(thunks);
}

static void test_tuple_outputs_constants_and_pass_through_parameters(void **state) {
  run_and_compare("HloModule t\nENTRY e {\n  x = f32[8,4] parameter(0)\n  y = s32[3] parameter(1)\n"
                  "  c = f32[8,4] constant({ {1,2,3,4}, {5,6,7,8}, {1,2,3,4}, {5,6,7,8}, {1,2,3,4}, "
                  "{5,6,7,8}, {1,2,3,4}, {5,6,7,8} })\n  s = f32[8,4] add(x, c)\n"
                  "  ROOT t = (f32[8,4], s32[3], f32[8,4]) tuple(s, y, c)\n}\n",
                  2, NULL);
}

static void test_donated_parameter_is_updated_in_place(void **state) {
  run_and_compare("HloModule a, input_output_alias={ {}: (0, {}, may-alias) }\n"
                  "ENTRY e {\n  x = f32[128] parameter(0)\n  one = f32[] constant(1)\n"
                  "  b = f32[128] broadcast(one), dimensions={}\n  ROOT s = f32[128] add(x, b)\n}\n",
                  1, NULL);
}

/* In `thunks`: the update kernel of an in-place chain runs but its head (the same name without
 * _update: the copy of the state onto itself) does not, and the state (`copy`, a "d2d N
 * bytes" text) is copied at most once, before the loop, never in it. */
static void expect_update_alone(const char *thunks, const char *copy) {
  const char *u = strstr(thunks, "_update grid=");
  assert_non_null(u);
  const char *name = u;
  while (name > thunks && name[-1] != ' ') name--;
  char head[128];
  snprintf(head, sizeof head, "%.*s grid=", (int)(u - name), name);
  if (strstr(thunks, head)) fail_msg("the copy kernel %s still runs:\n%s", head, thunks);
  assert_true(count_in(thunks, copy) <= 1);
}

/* A loop of 100 steps each moving one element of its 4096-element state to another place
 * (JAX's x.at[i].set(x[j]), as the corpus's in_place_dynamic_update_slice_fusion does): the
 * slice it reads is its own kernel, the scatter updates the state in place, and the scatter's
 * first kernel (output = operand) is left out: it would copy the state onto itself. */
static void test_a_scatter_into_loop_state_runs_in_place(void **state) {
  char *thunks = NULL;
  run_and_compare(
      "HloModule s\n"
      "keep_new {\n  a = f32[] parameter(0)\n  ROOT b = f32[] parameter(1)\n}\n"
      "cond {\n  p = (s32[], f32[4096]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
      "  n = s32[] constant(100)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n"
      "body {\n  p = (s32[], f32[4096]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
      "  x = f32[4096] get-tuple-element(p), index=1\n  one = s32[] constant(1)\n"
      "  i1 = s32[] add(i, one)\n  k = s32[] constant(37)\n  ik = s32[] multiply(i, k)\n"
      "  m = s32[] constant(4095)\n  j = s32[] and(ik, m)\n"
      "  s = f32[1] dynamic-slice(x, j), dynamic_slice_sizes={1}\n  v = f32[] reshape(s)\n"
      "  ii = s32[1] reshape(i)\n"
      "  y = f32[4096] scatter(x, ii, v), update_window_dims={}, inserted_window_dims={0}, "
      "scatter_dims_to_operand_dims={0}, index_vector_dim=0, indices_are_sorted=true, "
      "unique_indices=true, to_apply=keep_new\n"
      "  ROOT t = (s32[], f32[4096]) tuple(i1, y)\n}\n"
      "ENTRY e {\n  x = f32[4096] parameter(0)\n  z = s32[] constant(0)\n"
      "  t = (s32[], f32[4096]) tuple(z, x)\n  w = (s32[], f32[4096]) while(t), condition=cond, "
      "body=body\n"
      "  ROOT r = f32[4096] get-tuple-element(w), index=1\n}\n",
      2, &thunks);
  expect_update_alone(thunks, "d2d 16384 bytes");
  kiln_free(thunks);
}

/* The same for a dynamic-update-slice: a scan writing row i of its f32[100,32] output each step
 * (JAX's ys.at[i].set) from row i of its input. */
static void test_a_dynamic_update_slice_into_loop_state_runs_in_place(void **state) {
  char *thunks = NULL;
  run_and_compare(
      "HloModule s\n"
      "cond {\n  p = (s32[], f32[100,32], f32[100,32]) parameter(0)\n"
      "  i = s32[] get-tuple-element(p), index=0\n"
      "  n = s32[] constant(100)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n"
      "body {\n  p = (s32[], f32[100,32], f32[100,32]) parameter(0)\n"
      "  i = s32[] get-tuple-element(p), index=0\n"
      "  x = f32[100,32] get-tuple-element(p), index=1\n"
      "  y = f32[100,32] get-tuple-element(p), index=2\n"
      "  one = s32[] constant(1)\n  i1 = s32[] add(i, one)\n  z = s32[] constant(0)\n"
      "  r = f32[1,32] dynamic-slice(x, i, z), dynamic_slice_sizes={1,32}\n"
      "  two = f32[] constant(2)\n  tb = f32[1,32] broadcast(two), dimensions={}\n"
      "  r2 = f32[1,32] multiply(r, tb)\n"
      "  y2 = f32[100,32] dynamic-update-slice(y, r2, i, z)\n"
      "  ROOT t = (s32[], f32[100,32], f32[100,32]) tuple(i1, x, y2)\n}\n"
      "ENTRY e {\n  x = f32[100,32] parameter(0)\n  zero = s32[] constant(0)\n"
      "  c = f32[] constant(0)\n  y = f32[100,32] broadcast(c), dimensions={}\n"
      "  t = (s32[], f32[100,32], f32[100,32]) tuple(zero, x, y)\n"
      "  w = (s32[], f32[100,32], f32[100,32]) while(t), condition=cond, body=body\n"
      "  ROOT r = f32[100,32] get-tuple-element(w), index=2\n}\n",
      2, &thunks);
  expect_update_alone(thunks, "d2d 12800 bytes");
  kiln_free(thunks);
}

static void test_non_default_parameter_layout_is_read_physically(void **state) {
  run_and_compare("HloModule l, entry_computation_layout={(f32[16,8]{0,1})->f32[16,8]{1,0}}\n"
                  "ENTRY e {\n  x = f32[16,8]{0,1} parameter(0)\n  ROOT n = f32[16,8]{1,0} copy(x)\n}\n",
                  1, NULL);
}

static void expect_compile_error(const char *text, kiln_status_code_t code, const char *needle) {
  kiln_hlo_module_t *m = parse(text);
  kiln_executable_desc_t *d = NULL;
  kiln_status s = kiln_compile_module(m, NULL, &d, NULL);
  assert_non_null(s);
  assert_null(d);
  if (kiln_status_code(s) != code || !strstr(kiln_status_message(s), needle)) {
    fprintf(stderr, "got %s: %s\n", kiln_status_code_name(kiln_status_code(s)),
            kiln_status_message(s));
    fail();
  }
  kiln_status_free(s);
  kiln_hlo_module_destroy(m);
}

static void test_custom_call_is_a_clear_error(void **state) {
  expect_compile_error(
      "HloModule cc\nENTRY e {\n  x = f32[4] parameter(0)\n"
      "  ROOT c = f32[4] custom-call(x), custom_call_target=\"my_op\"\n}\n",
      KILN_NOT_FOUND, "no handler for target my_op on platform Host");
}

static void test_run_checks_parameters_and_stream(void **state) {
  kiln_hlo_module_t *m = parse("HloModule p\nENTRY e {\n  x = f32[16] parameter(0)\n"
                               "  ROOT n = f32[16] negate(x)\n}\n");
  kiln_executable_desc_t *d = NULL;
  assert_null(kiln_compile_module(m, NULL, &d, NULL));
  kiln_executable_t *e = NULL;
  assert_null(kiln_executable_load(g_dev, d, &e));
  kiln_stream_t *st = NULL;
  assert_null(kiln_stream_create(g_dev, &st));
  kiln_device_buffer_t *in = NULL, *out[1] = {NULL};
  assert_null(kiln_device_buffer_create(g_dev, 64, &in));
  kiln_devptr_t p = in->ptr;
  uint64_t wrong = 32, right = 64;
  kiln_status s = kiln_executable_run(e, st, &p, &wrong, 1, out);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(kiln_status_message(s), "64 bytes"));
  kiln_status_free(s);
  s = kiln_executable_run(e, st, &p, &right, 2, out);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  kiln_status_free(s);
  /* A stream of another device. */
  kiln_device_t *other = NULL;
  assert_null(kiln_host_device_create(1, &other));
  kiln_stream_t *ost = NULL;
  assert_null(kiln_stream_create(other, &ost));
  s = kiln_executable_run(e, ost, &p, &right, 1, out);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  kiln_status_free(s);
  kiln_stream_destroy(ost);
  kiln_device_destroy(other);
  /* And a correct run: -x of memset 0x3f800000 (1.0) */
  assert_null(kiln_stream_memset(st, p, 0x3F800000u, 4, 16));
  assert_null(kiln_executable_run(e, st, &p, &right, 1, out));
  float host[16];
  assert_null(kiln_stream_memcpy_d2h(st, host, out[0]->ptr, sizeof host));
  assert_null(kiln_stream_synchronize(st));
  assert_true(host[0] == -1.0f && host[15] == -1.0f);
  kiln_device_buffer_destroy(out[0]);
  kiln_device_buffer_destroy(in);
  kiln_stream_destroy(st);
  kiln_executable_destroy(e);
  kiln_hlo_module_destroy(m);
}

static void test_rng_state_matches_the_evaluator_and_advances_across_runs(void **state) {
  const char *text = "HloModule r\nENTRY e {\n  ROOT s = u64[2] rng-get-and-update-state(), delta=5\n}\n";
  run_and_compare(text, 1, NULL); /* seed 0 on both sides (device_run and evaluator defaults) */
  kiln_hlo_module_t *m = parse(text);
  kiln_compile_options_t co;
  memset(&co, 0, sizeof co);
  co.emit.rng_seed = 7;
  kiln_executable_desc_t *d = NULL;
  assert_null(kiln_compile_module(m, &co, &d, NULL));
  kiln_executable_t *e = NULL;
  assert_null(kiln_executable_load(g_dev, d, &e));
  kiln_stream_t *st = NULL;
  assert_null(kiln_stream_create(g_dev, &st));
  uint64_t first[2] = {0, 0}, second[2] = {0, 0};
  for (int run = 0; run < 2; run++) {
    kiln_device_buffer_t *out[1] = {NULL};
    assert_null(kiln_executable_run(e, st, NULL, NULL, 0, out));
    assert_null(kiln_stream_memcpy_d2h(st, run ? second : first, out[0]->ptr, 16));
    assert_null(kiln_stream_synchronize(st));
    kiln_device_buffer_destroy(out[0]);
  }
  assert_true(first[0] == 0x7012395ull + 7 && first[1] == 0);
  assert_true(second[0] == first[0] + 5 && second[1] == 0);
  kiln_stream_destroy(st);
  kiln_executable_destroy(e);
  kiln_hlo_module_destroy(m);
}

static void test_command_buffers_form_over_kernel_runs(void **state) {
  /* Six independent elementwise ops that fusion keeps apart (each is an output). */
  const char *text =
      "HloModule cb\nENTRY e {\n  x = f32[1024] parameter(0)\n  a = f32[1024] negate(x)\n"
      "  b = f32[1024] exponential(a)\n  c = f32[1024] sine(x)\n  d = f32[1024] cosine(c)\n"
      "  f = f32[1024] tanh(x)\n  g = f32[1024] abs(f)\n"
      "  ROOT t = (f32[1024], f32[1024], f32[1024], f32[1024], f32[1024], f32[1024]) "
      "tuple(a, b, c, d, f, g)\n}\n";
  kiln_hlo_module_t *m = parse(text);
  kiln_compile_options_t co;
  memset(&co, 0, sizeof co);
  co.command_buffer_min_run = 1;
  kiln_executable_desc_t *d = NULL;
  kiln_compile_stats_t st;
  assert_null(kiln_compile_module(m, &co, &d, &st));
  assert_true(st.emit.kernels >= 1);
  assert_int_equal(st.command_buffers, 1);
  kiln_strbuf_t b = {0};
  kiln_executable_desc_print(&b, d);
  assert_non_null(strstr(kiln_strbuf_cstr(&b), "command-buffer"));
  kiln_strbuf_free(&b);
  kiln_executable_desc_destroy(d);
  kiln_hlo_module_destroy(m);
  /* The compile dumps: buffer assignment, thunks before and after conversion. */
  char dir[] = "/tmp/kiln_exec_dumpXXXXXX";
  assert_non_null(mkdtemp(dir));
  m = parse(text);
  co.emit.dump_dir = dir;
  assert_null(kiln_compile_module(m, &co, &d, NULL));
  const char *suffixes[] = {"96-buffer-assignment.txt", "97-thunks.txt", "98-command-buffers.txt"};
  const char *needles[] = {"allocation", "kernel", "command-buffer"};
  for (int i = 0; i < 3; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/cb.%s", dir, suffixes[i]);
    char *dump = NULL;
    size_t len = 0;
    assert_null(kiln_read_file(path, &dump, &len));
    if (!strstr(dump, needles[i])) fail_msg("%s lacks \"%s\"", path, needles[i]);
    kiln_free(dump);
    remove(path);
  }
  kiln_executable_desc_destroy(d);
  kiln_hlo_module_destroy(m);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
  run_and_compare(text, 3, NULL); /* replayed on the second and third runs */
}

/* Complex transposes the transpose emitter would take if they were real: it moves real values
 * only, so they run as loop kernels (before, a plain c64[64,32] transpose did not compile:
 * "c64 values in a hero kernel"). A plain one, one fused with math, one keeping the minor
 * dimension, and one whose complex values feed a real result. */
static void test_complex_transposes_compile_and_match_the_evaluator(void **state) {
  (void)state;
  static const char *const kTexts[] = {
      "HloModule t\nENTRY e {\n  p = c64[64,32] parameter(0)\n"
      "  ROOT t = c64[32,64] transpose(p), dimensions={1,0}\n}\n",
      "HloModule t\nENTRY e {\n  p = c128[48,40] parameter(0)\n  a = c128[48,40] multiply(p, p)\n"
      "  t = c128[40,48] transpose(a), dimensions={1,0}\n  ROOT n = c128[40,48] negate(t)\n}\n",
      "HloModule t\nENTRY e {\n  p = c64[32,24,2] parameter(0)\n"
      "  ROOT t = c64[24,32,2] transpose(p), dimensions={1,0,2}\n}\n",
      "HloModule t\nENTRY e {\n  p = c64[64,32] parameter(0)\n"
      "  t = c64[32,64] transpose(p), dimensions={1,0}\n  ROOT r = f32[32,64] real(t)\n}\n",
  };
  for (size_t i = 0; i < sizeof kTexts / sizeof kTexts[0]; i++) run_and_compare(kTexts[i], 1, NULL);
}

/* Complex reductions the reduction emitter does not take (it keeps (re, im) apart for a
 * single-input add only) run as loop kernels, which reduce (re, im) pairs: a row product, a
 * column product of c128, a complex add under a real epilogue, a variadic (c64, f32) reduce
 * (before, each was UNIMPLEMENTED "complex reduction ... other than a single-input add" or
 * "with an epilogue"). */
static void test_complex_reductions_other_than_add_run_as_loops(void **state) {
  (void)state;
  static const char *const kTexts[] = {
      "HloModule r\nmul { a = c64[] parameter(0)\n b = c64[] parameter(1)\n"
      " ROOT m = c64[] multiply(a, b) }\nENTRY e {\n  p = c64[16,64] parameter(0)\n"
      "  one = c64[] constant((1, 0))\n"
      "  ROOT r = c64[16] reduce(p, one), dimensions={1}, to_apply=mul\n}\n",
      "HloModule r\nmul { a = c128[] parameter(0)\n b = c128[] parameter(1)\n"
      " ROOT m = c128[] multiply(a, b) }\nENTRY e {\n  p = c128[40,8] parameter(0)\n"
      "  one = c128[] constant((1, 0))\n"
      "  ROOT r = c128[8] reduce(p, one), dimensions={0}, to_apply=mul\n}\n",
      "HloModule r\nadd { a = c64[] parameter(0)\n b = c64[] parameter(1)\n"
      " ROOT s = c64[] add(a, b) }\nENTRY e {\n  p = c64[8,128] parameter(0)\n"
      "  z = c64[] constant((0, 0))\n  r = c64[8] reduce(p, z), dimensions={1}, to_apply=add\n"
      "  ROOT i = f32[8] imag(r)\n}\n",
      "HloModule r\nboth { a = c64[] parameter(0)\n b = f32[] parameter(1)\n"
      " c = c64[] parameter(2)\n d = f32[] parameter(3)\n s = c64[] add(a, c)\n"
      " m = f32[] maximum(b, d)\n ROOT t = (c64[], f32[]) tuple(s, m) }\n"
      "ENTRY e {\n  p = c64[4,96] parameter(0)\n  q = f32[4,96] parameter(1)\n"
      "  z = c64[] constant((0, 0))\n  lo = f32[] constant(-inf)\n"
      "  ROOT r = (c64[4], f32[4]) reduce(p, q, z, lo), dimensions={1}, to_apply=both\n}\n",
  };
  for (size_t i = 0; i < sizeof kTexts / sizeof kTexts[0]; i++) run_and_compare(kTexts[i], 1, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_while_loop_runs_its_body_until_the_condition_fails),
      cmocka_unit_test(test_conditional_picks_the_branch_of_the_index),
      cmocka_unit_test(test_f32_dot_becomes_a_gemm_thunk),
      cmocka_unit_test(test_tuple_outputs_constants_and_pass_through_parameters),
      cmocka_unit_test(test_donated_parameter_is_updated_in_place),
      cmocka_unit_test(test_a_scatter_into_loop_state_runs_in_place),
      cmocka_unit_test(test_a_dynamic_update_slice_into_loop_state_runs_in_place),
      cmocka_unit_test(test_non_default_parameter_layout_is_read_physically),
      cmocka_unit_test(test_custom_call_is_a_clear_error),
      cmocka_unit_test(test_run_checks_parameters_and_stream),
      cmocka_unit_test(test_rng_state_matches_the_evaluator_and_advances_across_runs),
      cmocka_unit_test(test_command_buffers_form_over_kernel_runs),
      cmocka_unit_test(test_complex_transposes_compile_and_match_the_evaluator),
      cmocka_unit_test(test_complex_reductions_other_than_add_run_as_loops),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
