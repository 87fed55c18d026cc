/* Serialized executables a hostile or buggy writer made (issue 22): blobs whose checksum is
 * valid (plugin/pjrt_blob.h writes them as such a writer would) but whose "optimized" text is
 * a module the passes never saw, through the plugin's API (GetPjrtApi(), linked in):
 * PJRT_Executable_DeserializeAndLoad then one PJRT_LoadedExecutable_Execute. Each must be
 * refused with a clear error, or run correctly; none may crash or leak (the ASan+UBSan build
 * runs this test too). DeserializeAndLoad verifies the module (shapes, structure, the entry
 * layout) and refuses what does not verify; the passes are not run, so a module they did not
 * make is refused by lowering on the first execute (its error), or runs where lowering takes
 * it as it is (a dot at the top level). Also: a real blob with one constant
 * changed and resealed loads and computes with the new constant (kiln_pjrt_blob_reseal is
 * what the fuzzer uses, fuzz/fuzz_pjrt_deserialize.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/status.h"
#include "compiler/hlo/shape.h"
#include "plugin/pjrt_blob.h"
#include "tools/common/pjrt_inproc.h"
#include "tools/common/pjrt_run.h"

static const PJRT_Api *api;
static PJRT_Client *client;
static PJRT_Device *device;

/* Fails the test with kiln's message when `e` is an error. */
static void check(PJRT_Error *e, const char *what) {
  kiln_status s = kiln_pjrt_status_from_error(api, e, what);
  if (s) {
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", kiln_status_message(s));
    kiln_status_free(s);
    fail_msg("%s", msg);
  }
}

static int setup(void **state) {
  (void)state;
  api = GetPjrtApi();
  client = pjrt_inproc_client(api);
  device = pjrt_inproc_device(api, client);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  PJRT_Client_Destroy_Args a = {.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE,
                                .client = client};
  check(api->PJRT_Client_Destroy(&a), "PJRT_Client_Destroy");
  return 0;
}

static void destroy(PJRT_LoadedExecutable *l) {
  pjrt_inproc_destroy(api, l);
}

static void buffer_destroy(PJRT_Buffer *b) {
  if (!b) return;
  PJRT_Buffer_Destroy_Args a = {.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE, .buffer = b};
  check(api->PJRT_Buffer_Destroy(&a), "PJRT_Buffer_Destroy");
}

static PJRT_Error *deserialize(const char *blob, size_t n, PJRT_LoadedExecutable **out) {
  PJRT_Executable_DeserializeAndLoad_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Executable_DeserializeAndLoad_Args_STRUCT_SIZE;
  a.client = client;
  a.serialized_executable = blob;
  a.serialized_executable_size = n;
  PJRT_Error *e = api->PJRT_Executable_DeserializeAndLoad(&a);
  *out = a.loaded_executable;
  return e;
}

/* A sealed blob of `text` with empty compile options (the defaults: one replica). */
static char *blob_of(const char *text, size_t *n) {
  return kiln_pjrt_blob_make("", 0, text, strlen(text), n);
}

/* Loads `text` and runs it once on `nargs` f32 arguments of `dims` (rank `rank`, all alike)
 * holding `args`, reading `nout` floats of the one result into `out`. Returns the error of
 * the first step that failed (NULL: it ran), its message in `msg`. */
static kiln_status load_and_run(const char *text, int nargs, const int64_t *dims, int rank,
                                const float *const *args, float *out, size_t nout) {
  size_t n = 0;
  char *blob = blob_of(text, &n);
  PJRT_LoadedExecutable *l = NULL;
  kiln_status s = kiln_pjrt_status_from_error(api, deserialize(blob, n, &l),
                                              "PJRT_Executable_DeserializeAndLoad");
  kiln_free(blob);
  if (s) return s;
  kiln_shape_t shape;
  memset(&shape, 0, sizeof(shape));
  shape.type = KILN_F32;
  shape.rank = rank;
  PJRT_Buffer *in[4] = {NULL, NULL, NULL, NULL};
  int64_t shape_dims[4];
  int64_t m2m[4];
  for (int i = 0; i < rank; i++) {
    shape_dims[i] = dims[i];
    m2m[i] = rank - 1 - i;
  }
  shape.dims = shape_dims;
  shape.layout.minor_to_major = m2m;
  shape.has_layout = true;
  for (int i = 0; i < nargs && !s; i++)
    s = kiln_pjrt_buffer_from_host(api, client, device, &shape, args[i], &in[i]);
  PJRT_Buffer *outs[1] = {NULL};
  if (!s) {
    PJRT_ExecuteOptions eo = {.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE};
    PJRT_Buffer *const *arg_lists[1] = {in};
    PJRT_Buffer **out_lists[1] = {outs};
    PJRT_Event *done[1] = {NULL};
    PJRT_LoadedExecutable_Execute_Args ea = {
        .struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE,
        .executable = l,
        .options = &eo,
        .argument_lists = arg_lists,
        .num_devices = 1,
        .num_args = (size_t)nargs,
        .output_lists = out_lists,
        .device_complete_events = done};
    s = kiln_pjrt_status_from_error(api, api->PJRT_LoadedExecutable_Execute(&ea),
                                    "PJRT_LoadedExecutable_Execute");
    if (!s) s = kiln_pjrt_event_await(api, done[0], "the execution");
  }
  if (!s) {
    PJRT_Buffer_ToHostBuffer_Args ta = {.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE,
                                        .src = outs[0],
                                        .dst = out,
                                        .dst_size = nout * sizeof(float)};
    s = kiln_pjrt_status_from_error(api, api->PJRT_Buffer_ToHostBuffer(&ta),
                                    "PJRT_Buffer_ToHostBuffer");
    if (!s) s = kiln_pjrt_event_await(api, ta.event, "PJRT_Buffer_ToHostBuffer");
  }
  buffer_destroy(outs[0]);
  for (int i = 0; i < nargs; i++) buffer_destroy(in[i]);
  destroy(l);
  return s;
}

/* Expects `s` to be an error of `code` whose message mentions `needle`. */
static void expect_error(kiln_status s, kiln_status_code_t code, const char *needle) {
  if (!s) fail_msg("the blob was accepted and ran; expected an error mentioning \"%s\"", needle);
  char msg[2048];
  snprintf(msg, sizeof(msg), "%s", kiln_status_message(s));
  kiln_status_code_t got = kiln_status_code(s);
  kiln_status_free(s);
  printf("  refused: %s\n", msg);
  if (got != code) fail_msg("code %d, expected %d: %s", (int)got, (int)code, msg);
  if (!strstr(msg, needle)) fail_msg("\"%s\" does not mention \"%s\"", msg, needle);
}

static void expect_ok(kiln_status s) {
  if (s) {
    char msg[2048];
    snprintf(msg, sizeof(msg), "%s", kiln_status_message(s));
    kiln_status_free(s);
    fail_msg("%s", msg);
  }
}

static const float kA[4] = {1, 2, 3, 4}, kB[4] = {10, 20, 30, 40};
static const int64_t kDims4[1] = {4};

/* Elementwise ops at the top level of the entry, not in fusions: the passes are not run on
 * a serialized module, so lowering refuses it (on the first execute). */
static void test_unfused_elementwise_ops_are_refused(void **state) {
  (void)state;
  const char *text =
      "HloModule unfused, entry_computation_layout={(f32[4]{0}, f32[4]{0})->f32[4]{0}}\n"
      "ENTRY e {\n  a = f32[4]{0} parameter(0)\n  b = f32[4]{0} parameter(1)\n"
      "  s = f32[4]{0} add(a, b)\n  ROOT m = f32[4]{0} multiply(s, a)\n}\n";
  const float *args[2] = {kA, kB};
  float r[4];
  expect_error(load_and_run(text, 2, kDims4, 1, args, r, 4), KILN_UNIMPLEMENTED,
               "kernels come from fusions");
}

/* A while loop the passes never saw (x added 5 times; no copies for the constant its tuple
 * holds): buffer assignment refuses it. */
static void test_unoptimized_while_loop_is_refused(void **state) {
  (void)state;
  const char *text =
      "HloModule loop, entry_computation_layout={(f32[4]{0})->f32[4]{0}}\n"
      "cond {\n  p = (s32[], f32[4]{0}, f32[4]{0}) parameter(0)\n"
      "  i = s32[] get-tuple-element(p), index=0\n  n = s32[] constant(5)\n"
      "  ROOT lt = pred[] compare(i, n), direction=LT\n}\n"
      "body {\n  p = (s32[], f32[4]{0}, f32[4]{0}) parameter(0)\n"
      "  i = s32[] get-tuple-element(p), index=0\n  one = s32[] constant(1)\n"
      "  j = s32[] add(i, one)\n  acc = f32[4]{0} get-tuple-element(p), index=1\n"
      "  x = f32[4]{0} get-tuple-element(p), index=2\n  acc2 = f32[4]{0} add(acc, x)\n"
      "  ROOT t = (s32[], f32[4]{0}, f32[4]{0}) tuple(j, acc2, x)\n}\n"
      "ENTRY e {\n  x = f32[4]{0} parameter(0)\n  z = f32[] constant(0)\n"
      "  zs = f32[4]{0} broadcast(z), dimensions={}\n  zero = s32[] constant(0)\n"
      "  t = (s32[], f32[4]{0}, f32[4]{0}) tuple(zero, zs, x)\n"
      "  w = (s32[], f32[4]{0}, f32[4]{0}) while(t), condition=cond, body=body\n"
      "  ROOT r = f32[4]{0} get-tuple-element(w), index=1\n}\n";
  const float *args[1] = {kA};
  float r[4];
  expect_error(load_and_run(text, 1, kDims4, 1, args, r, 4), KILN_FAILED_PRECONDITION,
               "run copy_insertion first");
}

/* A dot at the top level (the passes would canonicalize it or give it to the gemm library). */
static void test_unoptimized_dot_runs(void **state) {
  (void)state;
  const char *text =
      "HloModule dot, entry_computation_layout={(f32[2,2]{1,0}, f32[2,2]{1,0})->f32[2,2]{1,0}}\n"
      "ENTRY e {\n  a = f32[2,2]{1,0} parameter(0)\n  b = f32[2,2]{1,0} parameter(1)\n"
      "  ROOT d = f32[2,2]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "}\n";
  const int64_t dims[2] = {2, 2};
  const float *args[2] = {kA, kB};
  float r[4];
  expect_ok(load_and_run(text, 2, dims, 2, args, r, 4));
  /* [[1,2],[3,4]] x [[10,20],[30,40]] */
  assert_true(r[0] == 70 && r[1] == 100 && r[2] == 150 && r[3] == 220);
}

/* A custom call to a target nobody registered. */
static void test_unknown_custom_call_is_refused(void **state) {
  (void)state;
  const char *text =
      "HloModule cc, entry_computation_layout={(f32[4]{0})->f32[4]{0}}\n"
      "ENTRY e {\n  a = f32[4]{0} parameter(0)\n"
      "  ROOT c = f32[4]{0} custom-call(a), custom_call_target=\"no_such_target\"\n}\n";
  const float *args[1] = {kA};
  float r[4];
  kiln_status s = load_and_run(text, 1, kDims4, 1, args, r, 4);
  assert_non_null(s);
  printf("  refused: %s\n", kiln_status_message(s));
  assert_non_null(strstr(kiln_status_message(s), "no_such_target"));
  kiln_status_free(s);
}

/* Shapes that do not agree: an add of f32[4] and f32[8] said to be f32[4]. Refused by
 * DeserializeAndLoad (the verifier), before any argument is looked at. */
static void test_ill_typed_module_is_refused(void **state) {
  (void)state;
  const char *text =
      "HloModule bad, entry_computation_layout={(f32[4]{0}, f32[8]{0})->f32[4]{0}}\n"
      "ENTRY e {\n  a = f32[4]{0} parameter(0)\n  b = f32[8]{0} parameter(1)\n"
      "  ROOT s = f32[4]{0} add(a, b)\n}\n";
  const float *args[1] = {kA};
  float r[4];
  expect_error(load_and_run(text, 1, kDims4, 1, args, r, 4), KILN_INVALID_ARGUMENT,
               "instruction 's'");
  /* its message says where it was refused */
  expect_error(load_and_run(text, 1, kDims4, 1, args, r, 4), KILN_INVALID_ARGUMENT,
               "while verifying the serialized module");
}

/* An entry layout that does not match the entry's parameters. */
static void test_bad_entry_layout_is_refused(void **state) {
  (void)state;
  const char *text =
      "HloModule badlayout, entry_computation_layout={(f32[8]{0})->f32[4]{0}}\n"
      "ENTRY e {\n  a = f32[4]{0} parameter(0)\n  ROOT n = f32[4]{0} negate(a)\n}\n";
  const float *args[1] = {kA};
  float r[4];
  expect_error(load_and_run(text, 1, kDims4, 1, args, r, 4), KILN_INVALID_ARGUMENT,
               "entry_computation_layout");
  /* a layout that is not a permutation of the dimensions */
  const char *text2 =
      "HloModule badperm, entry_computation_layout={(f32[2,2]{0,0})->f32[2,2]{1,0}}\n"
      "ENTRY e {\n  a = f32[2,2]{0,0} parameter(0)\n  ROOT n = f32[2,2]{1,0} negate(a)\n}\n";
  const int64_t dims[2] = {2, 2};
  expect_error(load_and_run(text2, 1, dims, 2, args, r, 4), KILN_INVALID_ARGUMENT, "layout");
}

/* A collective over two replicas in a one-device world (the options say 1 x 1). */
static void test_collective_outside_the_options_world_is_refused(void **state) {
  (void)state;
  const char *text =
      "HloModule ar, replica_count=2, entry_computation_layout={(f32[4]{0})->f32[4]{0}}\n"
      "sum {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n"
      "ENTRY e {\n  a = f32[4]{0} parameter(0)\n"
      "  ROOT r = f32[4]{0} all-reduce(a), replica_groups={{0,1}}, to_apply=sum\n}\n";
  const float *args[1] = {kA};
  float r[4];
  kiln_status s = load_and_run(text, 1, kDims4, 1, args, r, 4);
  assert_non_null(s);
  printf("  refused: %s\n", kiln_status_message(s));
  assert_non_null(strstr(kiln_status_message(s), "1 replicas x 1 partitions"));
  kiln_status_free(s);
}

/* Text that is not a module, and an empty one. */
static void test_text_that_is_not_a_module_is_refused(void **state) {
  (void)state;
  const float *args[1] = {kA};
  float r[4];
  expect_error(load_and_run("not a module", 1, kDims4, 1, args, r, 4), KILN_INVALID_ARGUMENT,
               "expected");
  expect_error(load_and_run("", 1, kDims4, 1, args, r, 4), KILN_INVALID_ARGUMENT, "expected");
}

/* A real blob (Compile then Serialize) with its constant changed and the checksum
 * recomputed by kiln_pjrt_blob_reseal: it loads and computes with the new constant; without
 * the reseal the change is refused. */
static void test_resealed_blob_loads_with_its_change(void **state) {
  (void)state;
  const char *hlo =
      "HloModule c, entry_computation_layout={(f32[4]{0})->f32[4]{0}}\n"
      "ENTRY e {\n  a = f32[4]{0} parameter(0)\n  c = f32[] constant(3)\n"
      "  b = f32[4]{0} broadcast(c), dimensions={}\n  ROOT m = f32[4]{0} multiply(a, b)\n}\n";
  PJRT_Program prog = {.struct_size = PJRT_Program_STRUCT_SIZE,
                       .code = (char *)hlo,
                       .code_size = strlen(hlo),
                       .format = "hlo",
                       .format_size = 3};
  PJRT_Client_Compile_Args ca = {
      .struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE, .client = client, .program = &prog};
  check(api->PJRT_Client_Compile(&ca), "PJRT_Client_Compile");
  PJRT_LoadedExecutable_GetExecutable_Args ga = {
      .struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE,
      .loaded_executable = ca.executable};
  check(api->PJRT_LoadedExecutable_GetExecutable(&ga), "PJRT_LoadedExecutable_GetExecutable");
  PJRT_Executable_Serialize_Args sa = {.struct_size = PJRT_Executable_Serialize_Args_STRUCT_SIZE,
                                       .executable = ga.executable};
  check(api->PJRT_Executable_Serialize(&sa), "PJRT_Executable_Serialize");
  size_t n = sa.serialized_bytes_size;
  char *blob = malloc(n);
  memcpy(blob, sa.serialized_bytes, n);
  sa.serialized_executable_deleter(sa.serialized_executable);
  PJRT_Executable_Destroy_Args xd = {.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE,
                                     .executable = ga.executable};
  check(api->PJRT_Executable_Destroy(&xd), "PJRT_Executable_Destroy");
  destroy(ca.executable);
  /* the constant 3 in the optimized text becomes 7 */
  char *c = NULL;
  for (size_t i = 0; i + 11 < n && !c; i++)
    if (!memcmp(blob + i, "constant(3)", 11)) c = blob + i + 9;
  assert_non_null(c);
  *c = '7';
  PJRT_LoadedExecutable *l = NULL;
  PJRT_Error *e = deserialize(blob, n, &l);
  kiln_status s = kiln_pjrt_status_from_error(api, e, "PJRT_Executable_DeserializeAndLoad");
  expect_error(s, KILN_INVALID_ARGUMENT, "checksum mismatch");
  assert_true(kiln_pjrt_blob_reseal(blob, n));
  assert_false(kiln_pjrt_blob_reseal(blob, n - 1)); /* lengths that do not add up */
  /* the text after the header: load_and_run seals it again with empty options */
  const char *text = NULL;
  for (size_t i = 0; i + 9 < n && !text; i++)
    if (!memcmp(blob + i, "HloModule", 9)) text = blob + i;
  assert_non_null(text);
  size_t tl = n - (size_t)(text - blob);
  char *t = malloc(tl + 1);
  memcpy(t, text, tl);
  t[tl] = 0;
  const float *args[1] = {kA};
  float r[4];
  expect_ok(load_and_run(t, 1, kDims4, 1, args, r, 4));
  for (int i = 0; i < 4; i++) assert_true(r[i] == 7 * kA[i]);
  free(t);
  check(deserialize(blob, n, &l), "PJRT_Executable_DeserializeAndLoad (resealed)");
  destroy(l);
  free(blob);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unfused_elementwise_ops_are_refused),
      cmocka_unit_test(test_unoptimized_while_loop_is_refused),
      cmocka_unit_test(test_unoptimized_dot_runs),
      cmocka_unit_test(test_unknown_custom_call_is_refused),
      cmocka_unit_test(test_ill_typed_module_is_refused),
      cmocka_unit_test(test_bad_entry_layout_is_refused),
      cmocka_unit_test(test_collective_outside_the_options_world_is_refused),
      cmocka_unit_test(test_text_that_is_not_a_module_is_refused),
      cmocka_unit_test(test_resealed_blob_loads_with_its_change),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
