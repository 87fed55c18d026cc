/* Custom calls inside command buffers (issue 17 item 5), on the host: an HLO module with
 * kernels around three custom calls, two of whose handler (tests/ffi/handlers_call.c,
 * loaded with dlopen) reports XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE in its
 * metadata and one that does not. The compatible calls are recorded inside command buffers
 * with the kernels around them, the other splits its run (the compile statistics count
 * both); results equal the evaluator's and those with KILN_DISABLE_COMMAND_BUFFERS=1, across
 * executes whose parameter buffers alternate (the recorded calls are patched, not
 * re-recorded); a failing compatible handler fails the execute with its message and the
 * call's name, and the next execute works; after a hit in the compile driver's executable cache
 * (the executable serialized and read back) the compatible calls are still recorded inside
 * command buffers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/status.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "compiler/thunks/compile.h"
#include "ffi/ffi_registry.h"
#include "runtime/buffer.h"
#include "runtime/command_buffer.h"
#include "runtime/device.h"
#include "runtime/executable.h"
#include "runtime/thunk.h"
#include "tests/temp_dir_util.h"
#include "tools/common/device_run.h"
#include "plugin/env_options.h"

#ifndef KILN_FFI_TEST_CALL_LIB
#define KILN_FFI_TEST_CALL_LIB "libkiln_ffi_test_handlers_call.so"
#endif

#define N 256

/* add, affine (compatible), multiply, affine (not compatible), subtract, affine
 * (compatible), add: with runs of at least 2 the kernels around each compatible call form one
 * command buffer with it; the other call runs on its own. */
static const char kModule[] =
    "HloModule cmdbuf_custom_calls\n"
    "ENTRY e {\n"
    "  p = f32[256] parameter(0)\n"
    "  q = f32[256] parameter(1)\n"
    "  a = f32[256] add(p, q)\n"
    "  c1 = f32[256] custom-call(a), custom_call_target=\"kiln_affine_cb\", "
    "api_version=API_VERSION_TYPED_FFI\n"
    "  m = f32[256] multiply(c1, p)\n"
    "  c2 = f32[256] custom-call(m), custom_call_target=\"kiln_affine\", "
    "api_version=API_VERSION_TYPED_FFI\n"
    "  s = f32[256] subtract(c2, q)\n"
    "  c3 = f32[256] custom-call(s), custom_call_target=\"kiln_affine_cb\", "
    "api_version=API_VERSION_TYPED_FFI\n"
    "  ROOT r = f32[256] add(c3, p)\n"
    "}\n";

static int setup(void **state) {
  (void)state;
  setenv("KILN_COMMAND_BUFFER_MIN_RUN", "2", 1);
  kiln_status s = kiln_ffi_registry_load_spec(
      kiln_ffi_registry_default(),
      "kiln_affine_cb=" KILN_FFI_TEST_CALL_LIB
      ":kiln_call_affine_cb,kiln_affine=" KILN_FFI_TEST_CALL_LIB ":kiln_call_affine");
  if (s) {
    fprintf(stderr, "loading the test handlers: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    return -1;
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  unsetenv("KILN_COMMAND_BUFFER_MIN_RUN");
  kiln_ffi_registry_default_shutdown();
  return 0;
}

static kiln_hlo_module_t *parse(void) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(kModule, strlen(kModule), NULL, &m);
  if (s) fail_msg("parse: %s", kiln_status_message(s));
  return m;
}

/* The evaluator's side of both handlers: 2x + 1. */
static kiln_status eval_affine(void *user, const kiln_hlo_instruction_t *in,
                               kiln_literal_t *const *ops, kiln_literal_t *result) {
  (void)user;
  if (strncmp(in->custom_call_target, "kiln_affine", 11) != 0)
    return kiln_status_make(KILN_UNIMPLEMENTED, "no rule for %s", in->custom_call_target);
  for (int64_t i = 0; i < result->num_elements; i++)
    kiln_literal_set_f64(result, i, 2 * kiln_literal_get_f64(ops[0], i) + 1);
  return NULL;
}

static void inputs(int variant, float *p, float *q) {
  for (int i = 0; i < N; i++) {
    p[i] = (float)((i * 7 + variant * 3) % 17) * 0.25f - 2.0f;
    q[i] = (float)((i * 5 + variant) % 11) * 0.5f - 1.0f;
  }
}

/* The evaluator's result for inputs(variant). */
static void evaluate(int variant, float *want) {
  kiln_hlo_module_t *m = parse();
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  float p[N], q[N];
  inputs(variant, p, q);
  kiln_literal_t *args[2];
  for (int k = 0; k < 2; k++) {
    args[k] = kiln_literal_make(&arena, m->entry->parameters[k]->shape);
    for (int i = 0; i < N; i++) kiln_literal_set_f64(args[k], i, k ? q[i] : p[i]);
  }
  kiln_eval_options_t eo = {0};
  eo.custom_call = eval_affine;
  kiln_literal_t *r = NULL;
  kiln_status s = kiln_eval_module(m, &eo, 2, args, &arena, &r);
  if (s) fail_msg("evaluator: %s", kiln_status_message(s));
  for (int i = 0; i < N; i++) want[i] = (float)kiln_literal_get_f64(r, i);
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
}

/* A device of its own (its command-buffer cache configured from the environment now), the
 * module compiled for it and loaded. */
typedef struct rig {
  kiln_device_t *dev;
  kiln_stream_t *stream;
  kiln_executable_t *exe;
  kiln_compile_stats_t stats;
} rig_t;

/* cache_dir (NULL: none): the compile driver's executable cache (compile.h). */
static void rig_make_cached(rig_t *r, const char *cache_dir) {
  memset(r, 0, sizeof(*r));
  kiln_status s = kiln_device_create("host", &r->dev);
  if (!s) s = kiln_stream_create(r->dev, &r->stream);
  kiln_hlo_module_t *m = parse();
  kiln_compile_options_t co;
  memset(&co, 0, sizeof(co));
  co.emit.target = KILN_TARGET_HOST;
  co.executable_cache_dir = cache_dir;
  /* KILN_COMMAND_BUFFER_MIN_RUN (setup) and KILN_DISABLE_COMMAND_BUFFERS, read at the edge */
  kiln_pass_options_t env_passes;
  kiln_pjrt_compile_options_from_env(&co, &env_passes);
  kiln_executable_desc_t *d = NULL;
  if (!s) s = kiln_compile_module(m, &co, &d, &r->stats);
  if (!s) s = kiln_executable_load(r->dev, d, &r->exe);
  kiln_hlo_module_destroy(m);
  if (s) fail_msg("%s", kiln_status_message(s));
}

static void rig_make(rig_t *r) {
  rig_make_cached(r, NULL);
}

static void rig_free(rig_t *r) {
  kiln_executable_destroy(r->exe);
  kiln_stream_destroy(r->stream);
  kiln_device_destroy(r->dev);
}

/* Parameter buffers holding inputs(variant) (p[0] replaced by `p0` when not 0). */
static void upload(rig_t *r, int variant, float p0, kiln_device_buffer_t *bufs[2]) {
  float p[N], q[N];
  inputs(variant, p, q);
  if (p0 != 0) p[0] = p0;
  for (int k = 0; k < 2; k++) {
    kiln_status s = kiln_device_buffer_create(r->dev, N * 4, &bufs[k]);
    if (!s) s = kiln_stream_memcpy_h2d(r->stream, bufs[k]->ptr, k ? q : p, N * 4);
    if (!s) s = kiln_stream_synchronize(r->stream);
    if (s) fail_msg("%s", kiln_status_message(s));
  }
}

static kiln_status execute(rig_t *r, kiln_device_buffer_t *const bufs[2], float *out) {
  kiln_devptr_t ptrs[2] = {bufs[0]->ptr, bufs[1]->ptr};
  uint64_t sizes[2] = {N * 4, N * 4};
  kiln_device_buffer_t *o = NULL;
  kiln_status s = kiln_executable_run(r->exe, r->stream, ptrs, sizes, 2, &o);
  if (!s) s = kiln_stream_memcpy_d2h(r->stream, out, o->ptr, N * 4);
  if (!s) s = kiln_stream_synchronize(r->stream);
  kiln_device_buffer_destroy(o);
  return s;
}

static void expect_equal(const float *want, const float *got, const char *what) {
  for (int i = 0; i < N; i++)
    if (want[i] != got[i])
      fail_msg("%s: element %d is %.9g, expected %.9g", what, i, (double)got[i], (double)want[i]);
}

static void test_compatible_calls_run_inside_command_buffers_and_match(void **state) {
  (void)state;
  rig_t r;
  rig_make(&r);
  /* [fusion, c1, fusion] and [fusion, c3, fusion] are command buffers; c2 splits. */
  assert_int_equal(r.stats.command_buffers, 2);
  assert_int_equal(r.stats.command_buffer_custom_calls, 2);
  assert_int_equal(r.stats.split_custom_calls, 1);

  /* Executes alternating between two sets of parameter buffers (and fresh outputs): each
   * result equals the evaluator's, bit for bit. */
  float want[2][N], got[N];
  evaluate(0, want[0]);
  evaluate(1, want[1]);
  kiln_device_buffer_t *bufs[2][2];
  upload(&r, 0, 0, bufs[0]);
  upload(&r, 1, 0, bufs[1]);
  kiln_cmd_cache_t *cache = kiln_device_cmd_cache(r.dev);
  for (int run = 0; run < 6; run++) {
    int v = run % 2;
    kiln_status s = execute(&r, bufs[v], got);
    if (s) fail_msg("run %d: %s", run, kiln_status_message(s));
    expect_equal(want[v], got, v ? "buffers 1" : "buffers 0");
  }
  kiln_cmd_stats_t st = kiln_cmd_cache_stats(cache);
  assert_int_equal(st.records, 2);        /* each command buffer recorded once */
  assert_int_equal(st.direct_issues, 0);  /* never issued one by one */
  assert_true(st.patched_launches >= 8);  /* runs 1-5: the moved parameters patched in */
  assert_int_equal(st.instantiations, 2); /* patched in place, never re-instantiated */

  /* With KILN_DISABLE_COMMAND_BUFFERS=1 the same results. */
  setenv("KILN_DISABLE_COMMAND_BUFFERS", "1", 1);
  rig_t off;
  rig_make(&off);
  unsetenv("KILN_DISABLE_COMMAND_BUFFERS");
  assert_int_equal(off.stats.command_buffers, 0);
  for (int v = 0; v < 2; v++) {
    kiln_device_buffer_t *ob[2];
    upload(&off, v, 0, ob);
    kiln_status s = execute(&off, ob, got);
    if (s) fail_msg("without command buffers: %s", kiln_status_message(s));
    expect_equal(want[v], got, "without command buffers");
    for (int k = 0; k < 2; k++) kiln_device_buffer_destroy(ob[k]);
  }
  assert_int_equal(kiln_cmd_cache_stats(kiln_device_cmd_cache(off.dev)).records, 0);
  rig_free(&off);

  for (int v = 0; v < 2; v++)
    for (int k = 0; k < 2; k++) kiln_device_buffer_destroy(bufs[v][k]);
  rig_free(&r);
}

static void test_failing_compatible_handler_fails_the_execute_and_the_next_one_works(void **state) {
  (void)state;
  rig_t r;
  rig_make(&r);
  float want[N], got[N];
  evaluate(0, want);
  kiln_device_buffer_t *good[2], *bad[2];
  upload(&r, 0, 0, good);
  upload(&r, 0, -1000.0f, bad); /* c1's operand starts below -100: its handler fails */
  kiln_status s = execute(&r, good, got);
  if (s) fail_msg("%s", kiln_status_message(s));
  expect_equal(want, got, "before the failure");
  kiln_cmd_stats_t before = kiln_cmd_cache_stats(kiln_device_cmd_cache(r.dev));

  s = execute(&r, bad, got);
  assert_non_null(s);
  const char *msg = kiln_status_message(s);
  fprintf(stderr, "the failing execute: %s\n", msg);
  if (!strstr(msg, "affine_cb: input below -100") || !strstr(msg, "custom call c1"))
    fail_msg("expected the handler's message and the call's name, got: %s", msg);
  kiln_status_free(s);

  /* The recorded command buffers still work: the next execute (buffers moved back) matches,
   * patched, not recorded again. */
  s = execute(&r, good, got);
  if (s) fail_msg("after the failure: %s", kiln_status_message(s));
  expect_equal(want, got, "after the failure");
  kiln_cmd_stats_t after = kiln_cmd_cache_stats(kiln_device_cmd_cache(r.dev));
  assert_int_equal(after.records, before.records);
  assert_int_equal(after.instantiate_failures, 0);
  assert_int_equal(after.direct_issues, 0);
  for (int k = 0; k < 2; k++) {
    kiln_device_buffer_destroy(good[k]);
    kiln_device_buffer_destroy(bad[k]);
  }
  rig_free(&r);
}

/* Thunks of `s` at its top level of kind `k`. */
static int top_level(const kiln_thunk_seq_t *s, kiln_thunk_kind_t k) {
  int n = 0;
  for (size_t i = 0; i < s->len; i++) n += kiln_thunk_kind(s->items[i]) == k;
  return n;
}

/* Through the executable cache (the executable serialized, then read back in the next
 * compile, its FFI calls rebuilt from their recipes): the compatible calls are inside command
 * buffers again — the same thunk tree, two command buffers holding c1 and c3, only c2 at the
 * top level — and executes record each command buffer once, never issue one by one, and
 * match the evaluator. */
static void test_compatible_calls_stay_in_command_buffers_after_a_cache_hit(void **state) {
  (void)state;
  char dir[] = "/tmp/kiln_test_ffi_cmdbuf_cacheXXXXXX";
  kiln_test_temp_dir_make(dir);
  rig_t first, hit;
  rig_make_cached(&first, dir);
  assert_false(first.stats.executable_cache_hit);
  rig_make_cached(&hit, dir);
  assert_true(hit.stats.executable_cache_hit);
  const kiln_executable_desc_t *d1 = kiln_executable_desc(first.exe);
  const kiln_executable_desc_t *d2 = kiln_executable_desc(hit.exe);
  kiln_strbuf_t p1 = {0}, p2 = {0};
  kiln_executable_desc_print(&p1, d1);
  kiln_executable_desc_print(&p2, d2);
  assert_string_equal(kiln_strbuf_cstr(&p1), kiln_strbuf_cstr(&p2));
  kiln_strbuf_free(&p1);
  kiln_strbuf_free(&p2);
  int64_t k1[KILN_THUNK_NUM_KINDS] = {0}, k2[KILN_THUNK_NUM_KINDS] = {0};
  kiln_thunk_seq_count_kinds(&d1->thunks, k1);
  kiln_thunk_seq_count_kinds(&d2->thunks, k2);
  assert_memory_equal(k1, k2, sizeof k1);
  assert_int_equal(k2[KILN_THUNK_COMMAND_BUFFER], 2);
  assert_int_equal(k2[KILN_THUNK_CUSTOM_CALL], 3);
  assert_int_equal(top_level(&d2->thunks, KILN_THUNK_COMMAND_BUFFER), 2);
  assert_int_equal(top_level(&d2->thunks, KILN_THUNK_CUSTOM_CALL), 1);
  printf("after the cache hit: %lld command buffers, %lld custom calls, %d of them outside\n",
         (long long)k2[KILN_THUNK_COMMAND_BUFFER], (long long)k2[KILN_THUNK_CUSTOM_CALL],
         top_level(&d2->thunks, KILN_THUNK_CUSTOM_CALL));

  float want[2][N], got[N];
  evaluate(0, want[0]);
  evaluate(1, want[1]);
  kiln_device_buffer_t *bufs[2][2];
  upload(&hit, 0, 0, bufs[0]);
  upload(&hit, 1, 0, bufs[1]);
  for (int run = 0; run < 4; run++) {
    kiln_status s = execute(&hit, bufs[run % 2], got);
    if (s) fail_msg("run %d after the cache hit: %s", run, kiln_status_message(s));
    expect_equal(want[run % 2], got, "after the cache hit");
  }
  kiln_cmd_stats_t st = kiln_cmd_cache_stats(kiln_device_cmd_cache(hit.dev));
  assert_int_equal(st.records, 2);
  assert_int_equal(st.direct_issues, 0);
  for (int v = 0; v < 2; v++)
    for (int k = 0; k < 2; k++) kiln_device_buffer_destroy(bufs[v][k]);
  rig_free(&hit);
  rig_free(&first);
  kiln_test_temp_dir_remove(dir);
}

/* The same module through the tools' runner (what kiln-run does): repeated runs agree with
 * the evaluator. */
static void test_device_run_with_compatible_calls_matches_the_evaluator(void **state) {
  (void)state;
  kiln_device_t *dev = NULL;
  kiln_status s = kiln_device_create("host", &dev);
  if (s) fail_msg("%s", kiln_status_message(s));
  kiln_hlo_module_t *m = parse();
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  float p[N], q[N], want[N], got[N];
  inputs(0, p, q);
  evaluate(0, want);
  kiln_literal_t *args[2];
  for (int k = 0; k < 2; k++) {
    args[k] = kiln_literal_make(&arena, m->entry->parameters[k]->shape);
    for (int i = 0; i < N; i++) kiln_literal_set_f64(args[k], i, k ? q[i] : p[i]);
  }
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = dev;
  o.repeat = 3;
  kiln_device_run_report_t rep;
  kiln_literal_t *res = NULL;
  s = kiln_device_run_module(m, args, 2, &o, &arena, &res, &rep);
  if (s) fail_msg("%s", kiln_status_message(s));
  assert_int_equal(rep.compile.command_buffer_custom_calls, 2);
  for (int i = 0; i < N; i++) got[i] = (float)kiln_literal_get_f64(res, i);
  expect_equal(want, got, "device run");
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
  kiln_device_destroy(dev);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compatible_calls_run_inside_command_buffers_and_match),
      cmocka_unit_test(test_failing_compatible_handler_fails_the_execute_and_the_next_one_works),
      cmocka_unit_test(test_device_run_with_compatible_calls_matches_the_evaluator),
      cmocka_unit_test(test_compatible_calls_stay_in_command_buffers_after_a_cache_hit),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
