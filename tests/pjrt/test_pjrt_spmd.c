/* Multi-device programs through the PJRT table: a host client with 8 devices compiles
 * collective modules for num_replicas x num_partitions devices (CompileOptionsProto), executes
 * them with one argument list per addressable device, and each device's outputs equal the SPMD
 * evaluator's (kiln_eval_module_spmd, linked in as the oracle) for the same per-participant
 * arguments: a corpus all-gather module on 8 replicas and an all-reduce + all-gather +
 * replica-id / partition-id module on 2 and 4 devices (2 x 1, 4 x 1, 2 x 2). Wrong device
 * counts, argument lists and devices are INVALID_ARGUMENT. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "pjrt_exec_util.h"
#include "collective_test_util.h"
#include "skip_util.h"
#include "tools/common/fake_args.h"
#include "tools/common/hlo_proto_encode.h"

#define NUM_DEVICES 8
#define MAX_LEAVES 8

static const PJRT_Api *api;
static PJRT_Client *g_client;

static const char kCorpusAllGather[] =
    "/xla/xla__tools__hlo_opt__tests__gpu_hlo_collective_cse.hlo";

/* all-reduce and all-gather over every replica (of each partition), plus who ran it. */
static const char kSumGather[] =
    "HloModule spmd_sum_gather\n"
    "add { x = s32[] parameter(0)\n y = s32[] parameter(1)\n ROOT s = s32[] add(x, y) }\n"
    "ENTRY e {\n"
    "  p = s32[8] parameter(0)\n"
    "  ar = s32[8] all-reduce(p), replica_groups={}, to_apply=add\n"
    "  ag = s32[%d] all-gather(p), dimensions={0}, replica_groups={}\n"
    "  r = u32[] replica-id()\n"
    "  q = u32[] partition-id()\n"
    "  ROOT t = (s32[8], s32[%d], u32[], u32[]) tuple(ar, ag, r, q)\n"
    "}\n";

static int setup(void **state) {
  (void)state;
  api = pjrt_test_load();
  if (!api) return -1;
  PJRT_NamedValue o[3] = {pjrt_test_opt_string("platform", "cpu"),
                          pjrt_test_opt_string("cache_dir", ""),
                          pjrt_test_opt_int("num_devices", NUM_DEVICES)};
  g_client = pjrt_test_client(api, o, 3);
  return g_client ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  pjrt_test_client_destroy(api, g_client);
  return 0;
}

static size_t world_options(char *b, int r, int p) {
  return pjrt_exec_world_options(b, r, p);
}

/* ... plus device_assignment { replica_count: 2, computation_count: 1,
 * computation_devices { replica_device_ids: [a, b] } } */
static size_t assigned_options(char *b, int a0, int a1) {
  const char o[] = {0x1a, 0x10, 0x20, 2,    0x28, 1,    0x4a, 0x0a,     0x08,
                    2,    0x10, 1,    0x1a, 0x04, 0x0a, 0x02, (char)a0, (char)a1};
  memcpy(b, o, sizeof o);
  return sizeof o;
}

/* `code`: HLO text, or an HloModuleProto's bytes (code_len of them). */
static PJRT_Error *compile_code(const char *code, size_t code_len, const char *opts, size_t n,
                                PJRT_LoadedExecutable **l) {
  return pjrt_exec_try_compile(api, g_client, "hlo", code, code_len, opts, n, l);
}

static PJRT_Error *compile_with(const char *text, const char *opts, size_t n,
                                PJRT_LoadedExecutable **l) {
  return compile_code(text, strlen(text), opts, n, l);
}

static PJRT_Error *compile_world(const char *text, int r, int p, PJRT_LoadedExecutable **l) {
  char opts[8];
  size_t n = world_options(opts, r, p);
  return compile_with(text, opts, n, l);
}

static PJRT_Buffer_Type buffer_type(kiln_elem_type_t t) {
  switch (t) {
    case KILN_S32:
      return PJRT_Buffer_Type_S32;
    case KILN_U32:
      return PJRT_Buffer_Type_U32;
    case KILN_F32:
      return PJRT_Buffer_Type_F32;
    default:
      fail_msg("element type %d is not used here", (int)t);
  }
  return PJRT_Buffer_Type_INVALID;
}

/* The array leaves of `l` (depth first). */
static int leaves(kiln_literal_t *l, kiln_literal_t **out, int n) {
  if (!kiln_shape_is_tuple(l->shape)) {
    assert_true(n < MAX_LEAVES);
    out[n] = l;
    return n + 1;
  }
  for (int i = 0; i < l->num_tuple_elements; i++) n = leaves(l->tuple_elements[i], out, n);
  return n;
}

static void addressable(PJRT_LoadedExecutable *l, PJRT_Device *const **devs, size_t *n) {
  PJRT_LoadedExecutable_AddressableDevices_Args ad = {
      .struct_size = PJRT_LoadedExecutable_AddressableDevices_Args_STRUCT_SIZE, .executable = l};
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_AddressableDevices(&ad));
  *devs = ad.addressable_devices;
  *n = ad.num_addressable_devices;
}

static PJRT_Error *execute(PJRT_LoadedExecutable *l, PJRT_Buffer *const *const *argv,
                           size_t num_devices, size_t num_args, PJRT_Buffer **const *outv,
                           PJRT_Event **done) {
  /* Without `done` the runs are awaited here: the error is Execute's or the first device's
   * whose run failed after Execute returned (every output then destroyed). */
  PJRT_Event *own[NUM_DEVICES] = {NULL};
  PJRT_Error *e = pjrt_exec_start_on(api, l, argv, num_devices, num_args, outv, NULL,
                                     done                         ? done
                                     : num_devices <= NUM_DEVICES ? own
                                                                  : NULL);
  if (e || done) return e;
  for (size_t d = 0; d < num_devices && d < NUM_DEVICES; d++) {
    PJRT_Error *de = own[d] ? pjrt_exec_await_error(api, own[d]) : NULL;
    if (!e)
      e = de;
    else if (de)
      pjrt_test_take_error(api, de, NULL, 0);
  }
  size_t no = e ? pjrt_exec_num_outputs(api, l) : 0;
  for (size_t d = 0; d < num_devices && d < NUM_DEVICES; d++)
    for (size_t j = 0; j < no; j++) {
      pjrt_exec_buffer_destroy(api, outv[d][j]);
      outv[d][j] = NULL;
    }
  return e;
}

/* Compiles `text` (or `code`, when not NULL: the same module as an HloModuleProto) for r x p
 * devices (`opts`: the compile options, NULL: just the world; `ids`: the device ids expected per
 * participant, NULL: the default assignment), checks what the executable reports, runs it with
 * per-participant fake arguments (seed 42 + participant) and compares every device's outputs
 * with the evaluator's on `text`, byte for byte (integer modules). */
static void run_and_compare_code(const char *text, const uint8_t *code, size_t code_len, int r,
                                 int p, const char *opts, size_t opts_len, const int *ids) {
  int n = r * p;
  kiln_hlo_module_t *m = NULL;
  kiln_hlo_parse_options_t po = {0};
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), &po, &m);
  if (s) fail_msg("parse: %s", kiln_status_message(s));
  kiln_arena_t arena, out_arena;
  kiln_arena_init(&arena);
  kiln_arena_init(&out_arena);
  kiln_literal_t **args[NUM_DEVICES];
  kiln_literal_t *want[NUM_DEVICES];
  int num_args = 0;
  for (int i = 0; i < n; i++) {
    kiln_fake_args_options_t fo;
    kiln_fake_args_options_init(&fo);
    fo.seed = 42 + (uint64_t)i;
    s = kiln_fake_args_make(m, &fo, &arena, &args[i], &num_args);
    if (s) fail_msg("fake args: %s", kiln_status_message(s));
  }
  kiln_eval_spmd_options_t eo = {
      .num_replicas = r, .num_partitions = p, .timeout_ms = KILN_TEST_COLLECTIVE_TIMEOUT_MS};
  s = kiln_eval_module_spmd(m, &eo, num_args, (kiln_literal_t *const *const *)args, &out_arena,
                            want);
  if (s) fail_msg("evaluator: %s", kiln_status_message(s));

  PJRT_LoadedExecutable *l = NULL;
  char world[8];
  if (!opts) opts_len = world_options(world, r, p), opts = world;
  if (code)
    PJRT_CHECK(api, compile_code((const char *)code, code_len, opts, opts_len, &l));
  else
    PJRT_CHECK(api, compile_with(text, opts, opts_len, &l));
  PJRT_LoadedExecutable_GetExecutable_Args ge = {
      .struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE, .loaded_executable = l};
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_GetExecutable(&ge));
  PJRT_Executable_NumReplicas_Args nr = {
      .struct_size = PJRT_Executable_NumReplicas_Args_STRUCT_SIZE, .executable = ge.executable};
  PJRT_CHECK(api, api->PJRT_Executable_NumReplicas(&nr));
  assert_int_equal(nr.num_replicas, r);
  PJRT_Executable_NumPartitions_Args np = {
      .struct_size = PJRT_Executable_NumPartitions_Args_STRUCT_SIZE, .executable = ge.executable};
  PJRT_CHECK(api, api->PJRT_Executable_NumPartitions(&np));
  assert_int_equal(np.num_partitions, p);
  PJRT_Executable_Destroy_Args ed = {.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE,
                                     .executable = ge.executable};
  PJRT_CHECK(api, api->PJRT_Executable_Destroy(&ed));
  PJRT_Device *const *devs = NULL;
  size_t nd = 0;
  addressable(l, &devs, &nd);
  assert_int_equal(nd, n);
  PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args li = {
      .struct_size = PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args_STRUCT_SIZE,
      .executable = l};
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_AddressableDeviceLogicalIds(&li));
  assert_int_equal(li.num_addressable_device_logical_ids, n);
  /* XLA's default placement: replica r, partition p on device r + p * replicas */
  int assign[NUM_DEVICES];
  PJRT_Client_DefaultDeviceAssignment_Args da = {
      .struct_size = PJRT_Client_DefaultDeviceAssignment_Args_STRUCT_SIZE,
      .client = g_client,
      .num_replicas = r,
      .num_partitions = p,
      .default_assignment_size = NUM_DEVICES,
      .default_assignment = assign};
  PJRT_CHECK(api, api->PJRT_Client_DefaultDeviceAssignment(&da));
  for (int i = 0; i < n; i++) {
    assert_int_equal(li.addressable_device_logical_ids[i].replica, i / p);
    assert_int_equal(li.addressable_device_logical_ids[i].partition, i % p);
    PJRT_Device_GetDescription_Args gd = {
        .struct_size = PJRT_Device_GetDescription_Args_STRUCT_SIZE, .device = devs[i]};
    PJRT_CHECK(api, api->PJRT_Device_GetDescription(&gd));
    PJRT_DeviceDescription_Id_Args di = {.struct_size = PJRT_DeviceDescription_Id_Args_STRUCT_SIZE,
                                         .device_description = gd.device_description};
    PJRT_CHECK(api, api->PJRT_DeviceDescription_Id(&di));
    assert_int_equal(di.id, ids ? ids[i] : assign[i]);
  }

  /* one argument list per device, on that device */
  PJRT_Buffer *bufs[NUM_DEVICES][MAX_LEAVES];
  PJRT_Buffer *outs[NUM_DEVICES][MAX_LEAVES];
  PJRT_Buffer *const *argv[NUM_DEVICES];
  PJRT_Buffer **outv[NUM_DEVICES];
  PJRT_Event *done[NUM_DEVICES];
  memset(outs, 0, sizeof outs);
  assert_true(num_args <= MAX_LEAVES);
  for (int i = 0; i < n; i++) {
    for (int a = 0; a < num_args; a++) {
      kiln_literal_t *x = args[i][a];
      bufs[i][a] = pjrt_exec_buffer(api, g_client, devs[i], x->data, buffer_type(x->shape->type),
                                    x->shape->dims, (size_t)x->shape->rank);
    }
    argv[i] = bufs[i];
    outv[i] = outs[i];
    done[i] = NULL;
  }
  PJRT_CHECK(api, execute(l, argv, (size_t)n, (size_t)num_args, outv, done));
  for (int i = 0; i < n; i++) {
    assert_non_null(done[i]);
    pjrt_exec_await(api, done[i]);
    kiln_literal_t *w[MAX_LEAVES];
    int nl = leaves(want[i], w, 0);
    for (int j = 0; j < nl; j++) {
      size_t bytes = (size_t)w[j]->num_elements * 4;
      void *got = malloc(bytes ? bytes : 1);
      pjrt_exec_read(api, outs[i][j], got, bytes);
      if (memcmp(got, w[j]->data, bytes))
        fail_msg("%d x %d: device %d output %d differs from the evaluator's", r, p, i, j);
      free(got);
      pjrt_exec_buffer_destroy(api, outs[i][j]);
    }
  }

  /* wrong device counts, argument counts and devices */
  PJRT_EXPECT_ERROR(api, execute(l, argv, 1, (size_t)num_args, outv, NULL),
                    PJRT_Error_Code_INVALID_ARGUMENT, "num_devices is 1");
  PJRT_EXPECT_ERROR(api, execute(l, argv, (size_t)n, (size_t)num_args + 1, outv, NULL),
                    PJRT_Error_Code_INVALID_ARGUMENT, "num_args is");
  PJRT_Buffer *const *swapped[NUM_DEVICES];
  for (int i = 0; i < n; i++) swapped[i] = argv[(i + 1) % n];
  PJRT_EXPECT_ERROR(api, execute(l, swapped, (size_t)n, (size_t)num_args, outv, NULL),
                    PJRT_Error_Code_INVALID_ARGUMENT, "the execute is on device");

  for (int i = 0; i < n; i++)
    for (int a = 0; a < num_args; a++) pjrt_exec_buffer_destroy(api, bufs[i][a]);
  pjrt_exec_destroy(api, l);
  kiln_arena_destroy(&out_arena);
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
}

static void run_and_compare_with(const char *text, int r, int p, const char *opts, size_t opts_len,
                                 const int *ids) {
  run_and_compare_code(text, NULL, 0, r, p, opts, opts_len, ids);
}

static void run_and_compare(const char *text, int r, int p) {
  run_and_compare_with(text, r, p, NULL, 0, NULL);
}

/* Groups over mesh axes with a device order of their own, and iota groups, as XLA's newer
 * HloModuleProto writer puts them (mesh_axes_replica_group_list, iota_collective_device_list):
 * compiled from the proto on 8 devices, every participant equals the evaluator on the text. */
static const char kMeshGroups[] =
    "HloModule mesh_groups\n\n"
    "add { a = s32[] parameter(0)\n b = s32[] parameter(1)\n ROOT s = s32[] add(a, b) }\n\n"
    "ENTRY e {\n  p = s32[4] parameter(0)\n"
    "  ar = s32[4] all-reduce(p), replica_groups=mesh['x'=2,'y'=4], "
    "device_ids=(7,5,3,1,6,4,2,0) {'y':(2)2,'x'}, to_apply=add\n"
    "  ag = s32[16] all-gather(ar), dimensions={0}, replica_groups=[2,4]<=[2,4]T(1,0)\n"
    "  ROOT t = (s32[4], s32[16]) tuple(ar, ag)\n}\n";

static void test_mesh_and_iota_groups_from_a_proto_match_the_evaluator(void **state) {
  (void)state;
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(kMeshGroups, strlen(kMeshGroups), NULL, &m);
  if (s) fail_msg("parse: %s", kiln_status_message(s));
  kiln_hlo_proto_encode_options_t o = {.packed = true, .iota_at_instruction = true};
  uint8_t *code = NULL;
  size_t n = 0;
  s = kiln_hlo_proto_encode(m, &o, &code, &n);
  if (s) fail_msg("encode: %s", kiln_status_message(s));
  kiln_hlo_module_destroy(m);
  run_and_compare_code(kMeshGroups, code, n, 8, 1, NULL, 0, NULL);
  kiln_free(code);
}

static void test_all_reduce_and_all_gather_on_2_and_4_devices_match_the_evaluator(void **state) {
  (void)state;
  const int worlds[3][2] = {{2, 1}, {4, 1}, {2, 2}};
  for (int w = 0; w < 3; w++) {
    char text[1024];
    int gathered = 8 * worlds[w][0];
    snprintf(text, sizeof text, kSumGather, gathered, gathered);
    run_and_compare(text, worlds[w][0], worlds[w][1]);
  }
}

static void test_corpus_all_gather_on_8_devices_matches_the_evaluator(void **state) {
  (void)state;
  const char *dir = getenv("KILN_CORPUS_DIR");
  if (!dir || !*dir) dir = KILN_CORPUS_DIR;
  char path[1024];
  snprintf(path, sizeof path, "%s%s", dir, kCorpusAllGather);
  char *text = NULL;
  size_t len = 0;
  struct kiln_status_payload *s = kiln_read_file(path, &text, &len);
  if (s) {
    kiln_status_free(s);
    KILN_SKIP("no corpus module %s\n", path);
  }
  run_and_compare(text, 8, 1);
  kiln_free(text);
}

static void test_compile_options_device_assignment_places_the_participants(void **state) {
  (void)state;
  char text[1024];
  snprintf(text, sizeof text, kSumGather, 16, 16);
  char opts[32];
  size_t n = assigned_options(opts, 5, 3);
  const int ids[2] = {5, 3};
  run_and_compare_with(text, 2, 1, opts, n, ids);
  PJRT_LoadedExecutable *l = NULL;
  n = assigned_options(opts, 9, 3);
  PJRT_EXPECT_ERROR(api, compile_with(text, opts, n, &l), PJRT_Error_Code_INVALID_ARGUMENT,
                    "device 9 is not an addressable device");
  n = assigned_options(opts, 4, 4);
  PJRT_EXPECT_ERROR(api, compile_with(text, opts, n, &l), PJRT_Error_Code_INVALID_ARGUMENT,
                    "puts participants 0 and 1 on device 4");
  assert_null(l);
}

static void test_worlds_larger_than_the_client_are_invalid_argument(void **state) {
  (void)state;
  char text[1024];
  snprintf(text, sizeof text, kSumGather, 64, 64);
  PJRT_LoadedExecutable *l = NULL;
  PJRT_EXPECT_ERROR(api, compile_world(text, 4, 4, &l), PJRT_Error_Code_INVALID_ARGUMENT,
                    "4 replicas x 4 partitions need 16 devices; the client has 8");
  assert_null(l);
}

static void test_single_device_execute_of_a_multi_device_executable_is_invalid(void **state) {
  (void)state;
  char text[1024];
  snprintf(text, sizeof text, kSumGather, 16, 16);
  PJRT_LoadedExecutable *l = NULL;
  PJRT_CHECK(api, compile_world(text, 2, 1, &l));
  PJRT_Device *const *devs = NULL;
  size_t nd = 0;
  addressable(l, &devs, &nd);
  int32_t x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t dims[1] = {8};
  PJRT_Buffer *b = pjrt_exec_buffer(api, g_client, devs[0], x, PJRT_Buffer_Type_S32, dims, 1);
  PJRT_Buffer *out[4] = {NULL};
  PJRT_EXPECT_ERROR(api, pjrt_exec_try_run(api, l, &b, 1, out, NULL),
                    PJRT_Error_Code_INVALID_ARGUMENT, "runs on 2 devices");
  pjrt_exec_buffer_destroy(api, b);
  pjrt_exec_destroy(api, l);
}

/* Two independent all-reduces of 32 bytes each: the all-reduce combiner joins them unless
 * the compile options' threshold says otherwise. */
static const char kTwoSums[] =
    "HloModule two_sums\n"
    "add { x = s32[] parameter(0)\n y = s32[] parameter(1)\n ROOT s = s32[] add(x, y) }\n"
    "ENTRY e {\n"
    "  p = s32[8] parameter(0)\n"
    "  q = s32[8] multiply(p, p)\n"
    "  a = s32[8] all-reduce(p), replica_groups={}, to_apply=add\n"
    "  b = s32[8] all-reduce(q), replica_groups={}, to_apply=add\n"
    "  ROOT t = (s32[8], s32[8]) tuple(a, b)\n"
    "}\n";

typedef struct {
  char b[256];
  size_t n;
} pb_t;

static void pb_varint(pb_t *o, uint64_t v) {
  do {
    assert_true(o->n < sizeof o->b);
    o->b[o->n++] = (char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
}

static void pb_bytes(pb_t *o, uint32_t field, const char *data, size_t len) {
  pb_varint(o, (uint64_t)field << 3 | 2);
  pb_varint(o, len);
  assert_true(o->n + len <= sizeof o->b);
  memcpy(o->b + o->n, data, len);
  o->n += len;
}

/* CompileOptionsProto for 2 replicas; debug_threshold >= 0 sets DebugOptions field 157;
 * override_value (not NULL) adds env_option_overrides
 * {xla_gpu_all_reduce_combine_threshold_bytes: string override_value}. */
static void two_replica_options(pb_t *o, int64_t debug_threshold, const char *override_value) {
  memset(o, 0, sizeof *o);
  pb_t debug = {0}, build = {0};
  if (debug_threshold >= 0) {
    pb_varint(&debug, 157u << 3);
    pb_varint(&debug, (uint64_t)debug_threshold);
  }
  pb_varint(&build, 4u << 3);
  pb_varint(&build, 2);
  pb_varint(&build, 5u << 3);
  pb_varint(&build, 1);
  pb_bytes(&build, 3, debug.b, debug.n);
  pb_bytes(o, 3, build.b, build.n);
  if (override_value) {
    static const char key[] = "xla_gpu_all_reduce_combine_threshold_bytes";
    pb_t value = {0}, entry = {0};
    pb_bytes(&value, 1, override_value, strlen(override_value));
    pb_bytes(&entry, 1, key, strlen(key));
    pb_bytes(&entry, 2, value.b, value.n);
    pb_bytes(o, 7, entry.b, entry.n);
  }
}

/* The all-reduces (synchronous or -start) in the executable's OptimizedProgram. */
static int compiled_all_reduces(PJRT_LoadedExecutable *l) {
  PJRT_LoadedExecutable_GetExecutable_Args g = {
      .struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE, .loaded_executable = l};
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_GetExecutable(&g));
  PJRT_Program p = {.struct_size = PJRT_Program_STRUCT_SIZE};
  PJRT_Executable_OptimizedProgram_Args oa = {
      .struct_size = PJRT_Executable_OptimizedProgram_Args_STRUCT_SIZE,
      .executable = g.executable,
      .program = &p};
  PJRT_CHECK(api, api->PJRT_Executable_OptimizedProgram(&oa));
  char *code = calloc(p.code_size + 1, 1);
  assert_non_null(code);
  p.code = code;
  PJRT_CHECK(api, api->PJRT_Executable_OptimizedProgram(&oa));
  int n = 0;
  for (const char *c = code; (c = strstr(c, " all-reduce")); c++)
    if (!strncmp(c, " all-reduce(", 12) || !strncmp(c, " all-reduce-start(", 18)) n++;
  free(code);
  PJRT_Executable_Destroy_Args ed = {.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE,
                                     .executable = g.executable};
  PJRT_CHECK(api, api->PJRT_Executable_Destroy(&ed));
  return n;
}

static void test_compile_options_set_the_all_reduce_combine_threshold(void **state) {
  (void)state;
  const struct {
    int64_t debug;        /* DebugOptions field 157; -1: not given */
    const char *override; /* env_option_overrides; NULL: none */
    int all_reduces;
  } cases[] = {
      {-1, NULL, 1},  /* XLA's default (30 MiB): combined */
      {0, NULL, 2},   /* 0 bytes: nothing combines */
      {32, NULL, 2},  /* 64 bytes together: over 32 */
      {64, NULL, 1},  /* within 64 */
      {0, "1024", 1}, /* the override wins over DebugOptions */
      {-1, "-5", 2},  /* a negative size combines nothing */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pb_t o;
    two_replica_options(&o, cases[i].debug, cases[i].override);
    PJRT_LoadedExecutable *l = NULL;
    PJRT_CHECK(api, compile_with(kTwoSums, o.b, o.n, &l));
    if (compiled_all_reduces(l) != cases[i].all_reduces)
      fail_msg("case %zu: %d all-reduces compiled, expected %d", i, compiled_all_reduces(l),
               cases[i].all_reduces);
    pjrt_exec_destroy(api, l);
    run_and_compare_with(kTwoSums, 2, 1, o.b, o.n, NULL);
  }
  pb_t o;
  two_replica_options(&o, -1, "lots");
  PJRT_LoadedExecutable *l = NULL;
  PJRT_EXPECT_ERROR(api, compile_with(kTwoSums, o.b, o.n, &l), PJRT_Error_Code_INVALID_ARGUMENT,
                    "xla_gpu_all_reduce_combine_threshold_bytes needs an integer");
  assert_null(l);
}

/* The client option collective_timeout_ms bounds how long a participant waits for a peer that
 * skips a collective (replica 1 takes the branch without the all-reduce): DEADLINE_EXCEEDED
 * naming the missing rank and the 300 ms, in well under the 30 s default; and from
 * $KILN_COLLECTIVE_TIMEOUT_MS when the option is not given. */
static const char kSkip[] =
    "HloModule skip\n"
    "add { x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y) }\n"
    "with_ar { p = f32[4] parameter(0)\n"
    "  ROOT ar = f32[4] all-reduce(p), replica_groups={{0,1}}, to_apply=add }\n"
    "without { p = f32[4] parameter(0)\n ROOT n = f32[4] negate(p) }\n"
    "ENTRY e {\n  x = f32[4] parameter(0)\n  rid = u32[] replica-id()\n"
    "  zero = u32[] constant(0)\n  first = pred[] compare(rid, zero), direction=EQ\n"
    "  ROOT r = f32[4] conditional(first, x, x), true_computation=with_ar, "
    "false_computation=without\n}\n";

static void expect_deadline_within(PJRT_Client *c, const char *needle) {
  PJRT_LoadedExecutable *l = NULL;
  char opts[8];
  size_t n = world_options(opts, 2, 1);
  PJRT_CHECK(api, pjrt_exec_try_compile(api, c, "hlo", kSkip, strlen(kSkip), opts, n, &l));
  PJRT_Device *const *devs = NULL;
  size_t nd = 0;
  addressable(l, &devs, &nd);
  assert_int_equal(nd, 2);
  const float x[4] = {1, 2, 3, 4};
  const int64_t dims[1] = {4};
  PJRT_Buffer *b[2], *outs[2][1] = {{NULL}, {NULL}};
  PJRT_Buffer *const *argv[2];
  PJRT_Buffer **outv[2];
  for (int i = 0; i < 2; i++) {
    b[i] = pjrt_exec_buffer(api, c, devs[i], x, PJRT_Buffer_Type_F32, dims, 1);
    argv[i] = &b[i];
    outv[i] = outs[i];
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  PJRT_EXPECT_ERROR(api, execute(l, argv, 2, 1, outv, NULL), PJRT_Error_Code_DEADLINE_EXCEEDED,
                    needle);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  printf("deadline after %.2f s (%s)\n", s, needle);
  assert_true(s < 25); /* the default would take 30 s */
  for (int i = 0; i < 2; i++) pjrt_exec_buffer_destroy(api, b[i]);
  pjrt_exec_destroy(api, l);
}

static void test_collective_timeout_option_bounds_a_missing_peer(void **state) {
  (void)state;
  PJRT_NamedValue o[4] = {
      pjrt_test_opt_string("platform", "cpu"), pjrt_test_opt_string("cache_dir", ""),
      pjrt_test_opt_int("num_devices", 2), pjrt_test_opt_int("collective_timeout_ms", 300)};
  PJRT_Client *c = pjrt_test_client(api, o, 4);
  expect_deadline_within(c, "rank(s) 1 did not arrive within 300 ms");
  pjrt_test_client_destroy(api, c);
  setenv("KILN_COLLECTIVE_TIMEOUT_MS", "400", 1);
  c = pjrt_test_client(api, o, 3);
  unsetenv("KILN_COLLECTIVE_TIMEOUT_MS");
  expect_deadline_within(c, "rank(s) 1 did not arrive within 400 ms");
  pjrt_test_client_destroy(api, c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_reduce_and_all_gather_on_2_and_4_devices_match_the_evaluator),
      cmocka_unit_test(test_corpus_all_gather_on_8_devices_matches_the_evaluator),
      cmocka_unit_test(test_mesh_and_iota_groups_from_a_proto_match_the_evaluator),
      cmocka_unit_test(test_compile_options_device_assignment_places_the_participants),
      cmocka_unit_test(test_worlds_larger_than_the_client_are_invalid_argument),
      cmocka_unit_test(test_single_device_execute_of_a_multi_device_executable_is_invalid),
      cmocka_unit_test(test_compile_options_set_the_all_reduce_combine_threshold),
      cmocka_unit_test(test_collective_timeout_option_bounds_a_missing_peer),
  };
  return kiln_run_tests(tests, setup, teardown);
}
