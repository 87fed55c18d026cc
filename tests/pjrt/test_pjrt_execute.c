/* PJRT conformance, executables: Client_Compile of HLO text (an add, GELU from
 * examples/gelu.hlo, a tuple result, a tuple parameter, a donating module), Execute with
 * results checked against values computed here in plain C, donation and
 * non_donatable_input_indices, executable metadata, OptimizedProgram's two calls,
 * Serialize/DeserializeAndLoad (and corrupt blobs), the in-memory compile cache, and the error
 * paths (unknown format, bad HLO with the parser's position, bad StableHLO, wrong
 * arguments, deleted buffers and executables). Built against OpenXLA's pjrt_c_api.h; the plugin
 * is loaded with dlopen(RTLD_LOCAL). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "pjrt_exec_util.h"

static const PJRT_Api *api;
static PJRT_Client *g_client;
static PJRT_Device *g_dev;

static const char *kAdd =
    "HloModule add16\n"
    "ENTRY main {\n"
    "  x = f32[16] parameter(0)\n"
    "  y = f32[16] parameter(1)\n"
    "  ROOT s = f32[16] add(x, y)\n"
    "}\n";

static int setup(void **state) {
  (void)state;
  api = pjrt_test_load();
  if (!api) return -1;
  g_client = pjrt_exec_client(api, "");
  g_dev = pjrt_exec_device(api, g_client, 0);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  if (g_client) pjrt_test_client_destroy(api, g_client);
  return 0;
}

static PJRT_Buffer *f32_buffer(const float *v, const int64_t *dims, size_t rank) {
  return pjrt_exec_buffer(api, g_client, g_dev, v, PJRT_Buffer_Type_F32, dims, rank);
}

static PJRT_Executable *executable_of(PJRT_LoadedExecutable *l) {
  PJRT_LoadedExecutable_GetExecutable_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE;
  a.loaded_executable = l;
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_GetExecutable(&a));
  return a.executable;
}

static void executable_destroy(PJRT_Executable *e) {
  PJRT_Executable_Destroy_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE;
  a.executable = e;
  PJRT_CHECK(api, api->PJRT_Executable_Destroy(&a));
}

static bool buffer_is_deleted(PJRT_Buffer *b) {
  PJRT_Buffer_IsDeleted_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Buffer_IsDeleted_Args_STRUCT_SIZE;
  a.buffer = b;
  PJRT_CHECK(api, api->PJRT_Buffer_IsDeleted(&a));
  return a.is_deleted;
}

static void test_add_executes_and_reports_metadata(void **state) {
  (void)state;
  PJRT_LoadedExecutable *l = pjrt_exec_compile(api, g_client, kAdd);
  float x[16], y[16], r[16];
  for (int i = 0; i < 16; i++) {
    x[i] = (float)i * 0.5f - 3.0f;
    y[i] = (float)(i * i) * 0.25f;
  }
  int64_t dims[1] = {16};
  PJRT_Buffer *args[2] = {f32_buffer(x, dims, 1), f32_buffer(y, dims, 1)};
  PJRT_Buffer *out[1] = {NULL};
  pjrt_exec_run(api, l, args, 2, out);
  pjrt_exec_read(api, out[0], r, sizeof(r));
  for (int i = 0; i < 16; i++) assert_true(r[i] == x[i] + y[i]);
  /* arguments are not donated without input_output_alias */
  assert_false(buffer_is_deleted(args[0]));
  /* twice more: the steady state */
  for (int k = 0; k < 2; k++) {
    PJRT_Buffer *o2[1] = {NULL};
    pjrt_exec_run(api, l, args, 2, o2);
    pjrt_exec_read(api, o2[0], r, sizeof(r));
    assert_true(r[5] == x[5] + y[5]);
    pjrt_exec_buffer_destroy(api, o2[0]);
  }

  PJRT_Executable *e = executable_of(l);
  PJRT_Executable_Name_Args na = {.struct_size = PJRT_Executable_Name_Args_STRUCT_SIZE,
                                  .executable = e};
  PJRT_CHECK(api, api->PJRT_Executable_Name(&na));
  assert_int_equal(na.executable_name_size, strlen("add16"));
  assert_memory_equal(na.executable_name, "add16", 5);
  PJRT_Executable_NumOutputs_Args no = {.struct_size = PJRT_Executable_NumOutputs_Args_STRUCT_SIZE,
                                        .executable = e};
  PJRT_CHECK(api, api->PJRT_Executable_NumOutputs(&no));
  assert_int_equal(no.num_outputs, 1);
  PJRT_Executable_NumReplicas_Args nr = {
      .struct_size = PJRT_Executable_NumReplicas_Args_STRUCT_SIZE, .executable = e};
  PJRT_CHECK(api, api->PJRT_Executable_NumReplicas(&nr));
  assert_int_equal(nr.num_replicas, 1);
  PJRT_Executable_NumPartitions_Args np = {
      .struct_size = PJRT_Executable_NumPartitions_Args_STRUCT_SIZE, .executable = e};
  PJRT_CHECK(api, api->PJRT_Executable_NumPartitions(&np));
  assert_int_equal(np.num_partitions, 1);
  PJRT_Executable_OutputElementTypes_Args ot = {
      .struct_size = PJRT_Executable_OutputElementTypes_Args_STRUCT_SIZE, .executable = e};
  PJRT_CHECK(api, api->PJRT_Executable_OutputElementTypes(&ot));
  assert_int_equal(ot.num_output_types, 1);
  assert_int_equal(ot.output_types[0], PJRT_Buffer_Type_F32);
  PJRT_Executable_OutputDimensions_Args od = {
      .struct_size = PJRT_Executable_OutputDimensions_Args_STRUCT_SIZE, .executable = e};
  PJRT_CHECK(api, api->PJRT_Executable_OutputDimensions(&od));
  assert_int_equal(od.num_outputs, 1);
  assert_int_equal(od.dim_sizes[0], 1);
  assert_int_equal(od.dims[0], 16);
  PJRT_Executable_OutputMemoryKinds_Args mk = {
      .struct_size = PJRT_Executable_OutputMemoryKinds_Args_STRUCT_SIZE, .executable = e};
  PJRT_CHECK(api, api->PJRT_Executable_OutputMemoryKinds(&mk));
  assert_int_equal(mk.num_outputs, 1);
  assert_int_equal(mk.memory_kind_sizes[0], 6);
  assert_memory_equal(mk.memory_kinds[0], "device", 6);
  PJRT_Executable_ParameterMemoryKinds_Args pk = {
      .struct_size = PJRT_Executable_ParameterMemoryKinds_Args_STRUCT_SIZE, .executable = e};
  PJRT_CHECK(api, api->PJRT_Executable_ParameterMemoryKinds(&pk));
  assert_int_equal(pk.num_parameters, 2);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(pk.memory_kind_sizes[i], 6);
    assert_memory_equal(pk.memory_kinds[i], "device", 6);
  }
  PJRT_Executable_Fingerprint_Args fp = {
      .struct_size = PJRT_Executable_Fingerprint_Args_STRUCT_SIZE, .executable = e};
  PJRT_CHECK(api, api->PJRT_Executable_Fingerprint(&fp));
  assert_int_equal(fp.executable_fingerprint_size, 32);
  PJRT_LoadedExecutable_Fingerprint_Args lfp = {
      .struct_size = PJRT_LoadedExecutable_Fingerprint_Args_STRUCT_SIZE, .executable = l};
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_Fingerprint(&lfp));
  assert_memory_equal(lfp.executable_fingerprint, fp.executable_fingerprint, 32);
  PJRT_Executable_GetCompiledMemoryStats_Args ms;
  memset(&ms, 0, sizeof(ms));
  ms.struct_size = PJRT_Executable_GetCompiledMemoryStats_Args_STRUCT_SIZE;
  ms.executable = e;
  PJRT_CHECK(api, api->PJRT_Executable_GetCompiledMemoryStats(&ms));
  assert_int_equal(ms.host_argument_size_in_bytes, 2 * 16 * 4);
  assert_int_equal(ms.host_output_size_in_bytes, 16 * 4);
  PJRT_LoadedExecutable_AddressableDevices_Args ad = {
      .struct_size = PJRT_LoadedExecutable_AddressableDevices_Args_STRUCT_SIZE, .executable = l};
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_AddressableDevices(&ad));
  assert_int_equal(ad.num_addressable_devices, 1);
  assert_ptr_equal(ad.addressable_devices[0], g_dev);
  PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args li = {
      .struct_size = PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args_STRUCT_SIZE,
      .executable = l};
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_AddressableDeviceLogicalIds(&li));
  assert_int_equal(li.num_addressable_device_logical_ids, 1);
  assert_int_equal(li.addressable_device_logical_ids[0].replica, 0);
  assert_int_equal(li.addressable_device_logical_ids[0].partition, 0);
  /* Client_Load of the executable gives another loaded executable that runs */
  PJRT_Client_Load_Args load;
  memset(&load, 0, sizeof(load));
  load.struct_size = PJRT_Client_Load_Args_STRUCT_SIZE;
  load.client = g_client;
  load.executable = e;
  PJRT_CHECK(api, api->PJRT_Client_Load(&load));
  PJRT_Buffer *o3[1] = {NULL};
  pjrt_exec_run(api, load.loaded_executable, args, 2, o3);
  pjrt_exec_read(api, o3[0], r, sizeof(r));
  for (int i = 0; i < 16; i++) assert_true(r[i] == x[i] + y[i]);
  pjrt_exec_buffer_destroy(api, o3[0]);
  pjrt_exec_destroy(api, load.loaded_executable);
  executable_destroy(e);

  /* the device assignment: one replica, one computation, on the device it runs on */
  PJRT_LoadedExecutable_GetDeviceAssignment_Args da;
  memset(&da, 0, sizeof(da));
  da.struct_size = PJRT_LoadedExecutable_GetDeviceAssignment_Args_STRUCT_SIZE;
  da.executable = l;
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_GetDeviceAssignment(&da));
  PJRT_Device_GetDescription_Args gd = {.struct_size = PJRT_Device_GetDescription_Args_STRUCT_SIZE,
                                        .device = g_dev};
  PJRT_CHECK(api, api->PJRT_Device_GetDescription(&gd));
  PJRT_DeviceDescription_Id_Args di = {.struct_size = PJRT_DeviceDescription_Id_Args_STRUCT_SIZE,
                                       .device_description = gd.device_description};
  PJRT_CHECK(api, api->PJRT_DeviceDescription_Id(&di));
  assert_true(di.id >= 0 && di.id < 128);
  const unsigned char want_da[] = {0x08, 1, 0x10, 1, 0x1a, 3, 0x0a, 1, (unsigned char)di.id};
  assert_int_equal(da.serialized_bytes_size, sizeof(want_da));
  assert_memory_equal(da.serialized_bytes, want_da, sizeof(want_da));
  da.serialized_device_assignment_deleter(da.serialized_device_assignment);

  pjrt_exec_buffer_destroy(api, out[0]);
  pjrt_exec_buffer_destroy(api, args[0]);
  pjrt_exec_buffer_destroy(api, args[1]);
  pjrt_exec_destroy(api, l);
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *t = malloc((size_t)n + 1);
  size_t got = fread(t, 1, (size_t)n, f);
  t[got] = 0;
  fclose(f);
  return t;
}

/* GELU (tanh form) as examples/gelu.hlo computes it, each step rounded to bf16 the way the
 * module's bf16 ops are; compared within bf16 tolerance. */
static float gelu_ref(float x) {
  float c3 = pjrt_exec_bf16_to_f32(pjrt_exec_f32_to_bf16(0.044708f));
  float c2 = pjrt_exec_bf16_to_f32(pjrt_exec_f32_to_bf16(0.79785f));
  double inner = ((double)x + (double)c3 * x * x * x) * c2;
  return (float)(x * 0.5 * (1.0 + tanh(inner)));
}

static void test_gelu_example(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof(path), "%s/examples/gelu.hlo", KILN_SOURCE_DIR);
  char *text = read_text(path);
  assert_non_null(text);
  PJRT_LoadedExecutable *l = pjrt_exec_compile(api, g_client, text);
  free(text);
  int64_t dims[3] = {6, 512, 4096};
  size_t n = 6 * 512 * 4096;
  uint16_t *in = malloc(n * 2), *res = malloc(n * 2);
  for (size_t i = 0; i < n; i++)
    in[i] = pjrt_exec_f32_to_bf16((float)((int)(i % 1001) - 500) / 125.0f);
  PJRT_Buffer *arg = pjrt_exec_buffer(api, g_client, g_dev, in, PJRT_Buffer_Type_BF16, dims, 3);
  PJRT_Buffer *out[1] = {NULL};
  pjrt_exec_run(api, l, &arg, 1, out);
  pjrt_exec_read(api, out[0], res, n * 2);
  size_t bad = 0;
  for (size_t i = 0; i < n; i += 7) {
    float x = pjrt_exec_bf16_to_f32(in[i]);
    float want = gelu_ref(x), got = pjrt_exec_bf16_to_f32(res[i]);
    if (fabsf(got - want) > 0.02f + 0.02f * fabsf(want)) {
      if (bad++ < 5) fprintf(stderr, "gelu(%g): got %g, want %g\n", x, got, want);
    }
  }
  assert_int_equal(bad, 0);
  free(in);
  free(res);
  pjrt_exec_buffer_destroy(api, out[0]);
  pjrt_exec_buffer_destroy(api, arg);
  pjrt_exec_destroy(api, l);
}

/* A tuple result is flattened into its leaves; a tuple parameter is passed as its leaves. */
static void test_tuple_result_and_parameter(void **state) {
  (void)state;
  const char *text =
      "HloModule tuples\n"
      "ENTRY main {\n"
      "  p = (f32[4], s32[2,3]) parameter(0)\n"
      "  a = f32[4] get-tuple-element(p), index=0\n"
      "  b = s32[2,3] get-tuple-element(p), index=1\n"
      "  two = f32[] constant(2)\n"
      "  twos = f32[4] broadcast(two), dimensions={}\n"
      "  m = f32[4] multiply(a, twos)\n"
      "  one = s32[] constant(1)\n"
      "  ones = s32[2,3] broadcast(one), dimensions={}\n"
      "  c = s32[2,3] add(b, ones)\n"
      "  t = s32[3,2] transpose(c), dimensions={1,0}\n"
      "  ROOT r = (f32[4], s32[3,2]) tuple(m, t)\n"
      "}\n";
  PJRT_LoadedExecutable *l = pjrt_exec_compile(api, g_client, text);
  PJRT_Executable *e = executable_of(l);
  PJRT_Executable_NumOutputs_Args no = {.struct_size = PJRT_Executable_NumOutputs_Args_STRUCT_SIZE,
                                        .executable = e};
  PJRT_CHECK(api, api->PJRT_Executable_NumOutputs(&no));
  assert_int_equal(no.num_outputs, 2);
  PJRT_Executable_OutputElementTypes_Args ot = {
      .struct_size = PJRT_Executable_OutputElementTypes_Args_STRUCT_SIZE, .executable = e};
  PJRT_CHECK(api, api->PJRT_Executable_OutputElementTypes(&ot));
  assert_int_equal(ot.output_types[0], PJRT_Buffer_Type_F32);
  assert_int_equal(ot.output_types[1], PJRT_Buffer_Type_S32);
  PJRT_Executable_OutputDimensions_Args od = {
      .struct_size = PJRT_Executable_OutputDimensions_Args_STRUCT_SIZE, .executable = e};
  PJRT_CHECK(api, api->PJRT_Executable_OutputDimensions(&od));
  assert_int_equal(od.dim_sizes[0], 1);
  assert_int_equal(od.dim_sizes[1], 2);
  assert_int_equal(od.dims[0], 4);
  assert_int_equal(od.dims[1], 3);
  assert_int_equal(od.dims[2], 2);
  executable_destroy(e);

  float a[4] = {1, -2, 3.5f, 0.25f};
  int32_t b[6] = {0, 1, 2, 3, 4, 5};
  int64_t da[1] = {4}, db[2] = {2, 3};
  PJRT_Buffer *args[2] = {f32_buffer(a, da, 1),
                          pjrt_exec_buffer(api, g_client, g_dev, b, PJRT_Buffer_Type_S32, db, 2)};
  PJRT_Buffer *out[2] = {NULL, NULL};
  pjrt_exec_run(api, l, args, 2, out);
  float ra[4];
  int32_t rb[6];
  pjrt_exec_read(api, out[0], ra, sizeof(ra));
  pjrt_exec_read(api, out[1], rb, sizeof(rb));
  for (int i = 0; i < 4; i++) assert_true(ra[i] == 2 * a[i]);
  /* t[i][j] = b[j][i] + 1 */
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++) assert_int_equal(rb[i * 2 + j], b[j * 3 + i] + 1);
  for (int i = 0; i < 2; i++) {
    pjrt_exec_buffer_destroy(api, out[i]);
    pjrt_exec_buffer_destroy(api, args[i]);
  }
  pjrt_exec_destroy(api, l);
}

static const char *kDonate =
    "HloModule donate, input_output_alias={ {}: (0, {}, may-alias) }\n"
    "ENTRY main {\n"
    "  p = f32[8] parameter(0)\n"
    "  q = f32[8] parameter(1)\n"
    "  ROOT s = f32[8] add(p, q)\n"
    "}\n";

static void test_donation_and_non_donatable(void **state) {
  (void)state;
  PJRT_LoadedExecutable *l = pjrt_exec_compile(api, g_client, kDonate);
  float p[8], q[8], r[8], back[8];
  for (int i = 0; i < 8; i++) {
    p[i] = (float)i;
    q[i] = 100.0f + (float)i;
  }
  int64_t dims[1] = {8};
  /* donated: the argument is gone afterwards, the output took its memory */
  PJRT_Buffer *args[2] = {f32_buffer(p, dims, 1), f32_buffer(q, dims, 1)};
  PJRT_Buffer *out[1] = {NULL};
  pjrt_exec_run(api, l, args, 2, out);
  assert_true(buffer_is_deleted(args[0]));
  assert_false(buffer_is_deleted(args[1]));
  pjrt_exec_read(api, out[0], r, sizeof(r));
  for (int i = 0; i < 8; i++) assert_true(r[i] == p[i] + q[i]);
  /* running again with the donated buffer fails, naming the argument */
  PJRT_Buffer *out2[1] = {NULL};
  PJRT_EXPECT_ERROR(api, pjrt_exec_try_run(api, l, args, 2, out2, NULL),
                    PJRT_Error_Code_FAILED_PRECONDITION, "argument 0");
  pjrt_exec_buffer_destroy(api, args[0]);

  /* not donatable: the argument stays, unchanged, and the result is right */
  args[0] = f32_buffer(p, dims, 1);
  int64_t keep[1] = {0};
  PJRT_ExecuteOptions o;
  memset(&o, 0, sizeof(o));
  o.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  o.non_donatable_input_indices = keep;
  o.num_non_donatable_input_indices = 1;
  PJRT_Buffer *out3[1] = {NULL};
  PJRT_CHECK(api, pjrt_exec_try_run(api, l, args, 2, out3, &o));
  assert_false(buffer_is_deleted(args[0]));
  pjrt_exec_read(api, args[0], back, sizeof(back));
  assert_memory_equal(back, p, sizeof(p));
  pjrt_exec_read(api, out3[0], r, sizeof(r));
  for (int i = 0; i < 8; i++) assert_true(r[i] == p[i] + q[i]);

  pjrt_exec_buffer_destroy(api, out3[0]);
  pjrt_exec_buffer_destroy(api, out[0]);
  pjrt_exec_buffer_destroy(api, args[0]);
  pjrt_exec_buffer_destroy(api, args[1]);
  pjrt_exec_destroy(api, l);
}

static void test_compile_errors(void **state) {
  (void)state;
  PJRT_LoadedExecutable *l = NULL;
  PJRT_EXPECT_ERROR(api,
                    pjrt_exec_try_compile(api, g_client, "bogus", kAdd, strlen(kAdd), NULL, 0, &l),
                    PJRT_Error_Code_INVALID_ARGUMENT, "hlo_with_config");
  assert_null(l);
  const char *bad =
      "HloModule bad\nENTRY main {\n  x = f32[16] parameter(0)\n  ROOT y = f32[16] "
      "frobnicate(x)\n}\n";
  PJRT_EXPECT_ERROR(api, pjrt_exec_try_compile(api, g_client, "hlo", bad, strlen(bad), NULL, 0, &l),
                    PJRT_Error_Code_INVALID_ARGUMENT, "<program>:4:");
  const char *mlir =
      "module @m {\n  func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
      "    %0 = stablehlo.frobnicate %a : tensor<4xf32>\n    return %0 : tensor<4xf32>\n  }\n}\n";
  PJRT_Error_Code code = pjrt_test_take_error(
      api, pjrt_exec_try_compile(api, g_client, "mlir", mlir, strlen(mlir), NULL, 0, &l), NULL, 0);
  assert_true(code == PJRT_Error_Code_INVALID_ARGUMENT || code == PJRT_Error_Code_UNIMPLEMENTED);
  assert_null(l);
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_Compile(NULL), PJRT_Error_Code_INVALID_ARGUMENT, "");
  PJRT_Client_Compile_Args small;
  memset(&small, 0, sizeof(small));
  small.struct_size = 8;
  PJRT_EXPECT_ERROR(api, api->PJRT_Client_Compile(&small), PJRT_Error_Code_INVALID_ARGUMENT,
                    "struct_size");
  PJRT_Compile_Args ca;
  memset(&ca, 0, sizeof(ca));
  ca.struct_size = PJRT_Compile_Args_STRUCT_SIZE;
  PJRT_EXPECT_ERROR(api, api->PJRT_Compile(&ca), PJRT_Error_Code_INVALID_ARGUMENT,
                    "topology is NULL"); /* PJRT_Compile itself: test_pjrt_topology */
}

/* The "mlir" format: StableHLO text, compiled and run like any program. */
static void test_stablehlo_program(void **state) {
  (void)state;
  const char *text =
      "module @shlo_add {\n"
      "  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {\n"
      "    %0 = stablehlo.multiply %a, %b : tensor<4xf32>\n"
      "    %1 = stablehlo.add %0, %a : tensor<4xf32>\n"
      "    return %1 : tensor<4xf32>\n"
      "  }\n"
      "}\n";
  PJRT_LoadedExecutable *l = NULL;
  PJRT_CHECK(api, pjrt_exec_try_compile(api, g_client, "mlir", text, strlen(text), NULL, 0, &l));
  float a[4] = {1, 2, 3, 4}, b[4] = {0.5f, -1, 2, 10}, r[4];
  int64_t dims[1] = {4};
  PJRT_Buffer *args[2] = {f32_buffer(a, dims, 1), f32_buffer(b, dims, 1)};
  PJRT_Buffer *out[1] = {NULL};
  pjrt_exec_run(api, l, args, 2, out);
  pjrt_exec_read(api, out[0], r, sizeof(r));
  for (int i = 0; i < 4; i++) assert_true(r[i] == a[i] * b[i] + a[i]);
  pjrt_exec_buffer_destroy(api, out[0]);
  pjrt_exec_buffer_destroy(api, args[0]);
  pjrt_exec_buffer_destroy(api, args[1]);
  pjrt_exec_destroy(api, l);
}

static void test_execute_errors(void **state) {
  (void)state;
  PJRT_LoadedExecutable *l = pjrt_exec_compile(api, g_client, kAdd);
  float x[16] = {0};
  int32_t xi[16] = {0};
  int64_t d16[1] = {16}, d8[1] = {8};
  PJRT_Buffer *good = f32_buffer(x, d16, 1);
  PJRT_Buffer *short_ = f32_buffer(x, d8, 1);
  PJRT_Buffer *ints = pjrt_exec_buffer(api, g_client, g_dev, xi, PJRT_Buffer_Type_S32, d16, 1);
  PJRT_Buffer *out[1] = {NULL};
  PJRT_Buffer *one[1] = {good};
  PJRT_EXPECT_ERROR(api, pjrt_exec_try_run(api, l, one, 1, out, NULL),
                    PJRT_Error_Code_INVALID_ARGUMENT, "takes 2 arguments");
  PJRT_Buffer *wrong_shape[2] = {good, short_};
  PJRT_EXPECT_ERROR(api, pjrt_exec_try_run(api, l, wrong_shape, 2, out, NULL),
                    PJRT_Error_Code_INVALID_ARGUMENT, "parameter 1");
  PJRT_Buffer *wrong_type[2] = {ints, good};
  PJRT_EXPECT_ERROR(api, pjrt_exec_try_run(api, l, wrong_type, 2, out, NULL),
                    PJRT_Error_Code_INVALID_ARGUMENT, "parameter 0");
  PJRT_Buffer *null_arg[2] = {good, NULL};
  PJRT_EXPECT_ERROR(api, pjrt_exec_try_run(api, l, null_arg, 2, out, NULL),
                    PJRT_Error_Code_INVALID_ARGUMENT, "NULL");
  /* a deleted buffer */
  PJRT_Buffer *gone = f32_buffer(x, d16, 1);
  PJRT_Buffer_Delete_Args del = {.struct_size = PJRT_Buffer_Delete_Args_STRUCT_SIZE,
                                 .buffer = gone};
  PJRT_CHECK(api, api->PJRT_Buffer_Delete(&del));
  PJRT_Buffer *with_deleted[2] = {good, gone};
  PJRT_EXPECT_ERROR(api, pjrt_exec_try_run(api, l, with_deleted, 2, out, NULL),
                    PJRT_Error_Code_FAILED_PRECONDITION, "argument 1");
  /* num_devices must be 1 */
  PJRT_Buffer *ok[2] = {good, good};
  PJRT_Buffer *const *lists[1] = {ok};
  PJRT_Buffer **out_lists[1] = {out};
  PJRT_LoadedExecutable_Execute_Args ea;
  memset(&ea, 0, sizeof(ea));
  ea.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
  ea.executable = l;
  ea.argument_lists = lists;
  ea.num_devices = 2;
  ea.num_args = 2;
  ea.output_lists = out_lists;
  PJRT_EXPECT_ERROR(api, api->PJRT_LoadedExecutable_Execute(&ea), PJRT_Error_Code_INVALID_ARGUMENT,
                    "num_devices");
  /* the same buffer twice is fine when nothing is donated */
  pjrt_exec_run(api, l, ok, 2, out);
  pjrt_exec_buffer_destroy(api, out[0]);
  /* a deleted executable */
  PJRT_LoadedExecutable_IsDeleted_Args isd = {
      .struct_size = PJRT_LoadedExecutable_IsDeleted_Args_STRUCT_SIZE, .executable = l};
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_IsDeleted(&isd));
  assert_false(isd.is_deleted);
  PJRT_LoadedExecutable_Delete_Args ld = {
      .struct_size = PJRT_LoadedExecutable_Delete_Args_STRUCT_SIZE, .executable = l};
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_Delete(&ld));
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_IsDeleted(&isd));
  assert_true(isd.is_deleted);
  PJRT_EXPECT_ERROR(api, pjrt_exec_try_run(api, l, ok, 2, out, NULL),
                    PJRT_Error_Code_FAILED_PRECONDITION, "deleted");
  pjrt_exec_buffer_destroy(api, good);
  pjrt_exec_buffer_destroy(api, short_);
  pjrt_exec_buffer_destroy(api, ints);
  pjrt_exec_buffer_destroy(api, gone);
  pjrt_exec_destroy(api, l);
}

static void test_optimized_program(void **state) {
  (void)state;
  PJRT_LoadedExecutable *l = pjrt_exec_compile(api, g_client, kAdd);
  PJRT_Executable *e = executable_of(l);
  PJRT_Program p;
  memset(&p, 0, sizeof(p));
  p.struct_size = PJRT_Program_STRUCT_SIZE;
  PJRT_Executable_OptimizedProgram_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Executable_OptimizedProgram_Args_STRUCT_SIZE;
  a.executable = e;
  a.program = &p;
  PJRT_CHECK(api, api->PJRT_Executable_OptimizedProgram(&a));
  assert_true(p.code_size > 20);
  size_t n = p.code_size;
  p.code = malloc(n);
  p.code_size = 4; /* too small */
  PJRT_EXPECT_ERROR(api, api->PJRT_Executable_OptimizedProgram(&a),
                    PJRT_Error_Code_INVALID_ARGUMENT, "code_size");
  p.code_size = n;
  PJRT_CHECK(api, api->PJRT_Executable_OptimizedProgram(&a));
  assert_int_equal(p.code_size, n);
  assert_int_equal(p.format_size, 3);
  assert_memory_equal(p.format, "hlo", 3);
  assert_memory_equal(p.code, "HloModule add16", 15);
  /* the optimized program is a program: it compiles and runs */
  PJRT_LoadedExecutable *l2 = NULL;
  PJRT_CHECK(api, pjrt_exec_try_compile(api, g_client, "hlo", p.code, n, NULL, 0, &l2));
  float x[16], y[16], r[16];
  for (int i = 0; i < 16; i++) x[i] = y[i] = (float)i;
  int64_t dims[1] = {16};
  PJRT_Buffer *args[2] = {f32_buffer(x, dims, 1), f32_buffer(y, dims, 1)};
  PJRT_Buffer *out[1] = {NULL};
  pjrt_exec_run(api, l2, args, 2, out);
  pjrt_exec_read(api, out[0], r, sizeof(r));
  for (int i = 0; i < 16; i++) assert_true(r[i] == 2.0f * (float)i);
  pjrt_exec_buffer_destroy(api, out[0]);
  pjrt_exec_buffer_destroy(api, args[0]);
  pjrt_exec_buffer_destroy(api, args[1]);
  free(p.code);
  executable_destroy(e);
  pjrt_exec_destroy(api, l2);
  pjrt_exec_destroy(api, l);
}

static PJRT_Error *deserialize(const char *bytes, size_t n, PJRT_LoadedExecutable **out) {
  PJRT_Executable_DeserializeAndLoad_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Executable_DeserializeAndLoad_Args_STRUCT_SIZE;
  a.client = g_client;
  a.serialized_executable = bytes;
  a.serialized_executable_size = n;
  PJRT_Error *e = api->PJRT_Executable_DeserializeAndLoad(&a);
  *out = a.loaded_executable;
  return e;
}

static void test_serialize_round_trip_and_corrupt_blobs(void **state) {
  (void)state;
  PJRT_LoadedExecutable *l = pjrt_exec_compile(api, g_client, kDonate);
  PJRT_Executable *e = executable_of(l);
  PJRT_Executable_Serialize_Args sa;
  memset(&sa, 0, sizeof(sa));
  sa.struct_size = PJRT_Executable_Serialize_Args_STRUCT_SIZE;
  sa.executable = e;
  PJRT_CHECK(api, api->PJRT_Executable_Serialize(&sa));
  assert_true(sa.serialized_bytes_size > 16);
  assert_non_null(sa.serialized_executable_deleter);
  size_t n = sa.serialized_bytes_size;
  char *blob = malloc(n);
  memcpy(blob, sa.serialized_bytes, n);
  sa.serialized_executable_deleter(sa.serialized_executable);

  PJRT_LoadedExecutable *l2 = NULL;
  PJRT_CHECK(api, deserialize(blob, n, &l2));
  float p[8], q[8], r[8];
  for (int i = 0; i < 8; i++) {
    p[i] = (float)i * 3.0f;
    q[i] = -1.0f;
  }
  int64_t dims[1] = {8};
  PJRT_Buffer *args[2] = {f32_buffer(p, dims, 1), f32_buffer(q, dims, 1)};
  PJRT_Buffer *out[1] = {NULL};
  pjrt_exec_run(api, l2, args, 2, out);
  pjrt_exec_read(api, out[0], r, sizeof(r));
  for (int i = 0; i < 8; i++) assert_true(r[i] == p[i] + q[i]);
  assert_true(buffer_is_deleted(args[0])); /* the alias survived the round trip */
  /* the same fingerprint */
  PJRT_LoadedExecutable_Fingerprint_Args f1 = {
      .struct_size = PJRT_LoadedExecutable_Fingerprint_Args_STRUCT_SIZE, .executable = l};
  PJRT_LoadedExecutable_Fingerprint_Args f2 = {
      .struct_size = PJRT_LoadedExecutable_Fingerprint_Args_STRUCT_SIZE, .executable = l2};
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_Fingerprint(&f1));
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_Fingerprint(&f2));
  assert_memory_equal(f1.executable_fingerprint, f2.executable_fingerprint, 32);

  /* corrupt: one flipped byte anywhere, truncated, padded, garbage, empty */
  PJRT_LoadedExecutable *bad = NULL;
  for (size_t at = 0; at < n; at += (n / 13) + 1) {
    blob[at] ^= 0x5a;
    PJRT_EXPECT_ERROR(api, deserialize(blob, n, &bad), PJRT_Error_Code_INVALID_ARGUMENT, "");
    assert_null(bad);
    blob[at] ^= 0x5a;
  }
  PJRT_EXPECT_ERROR(api, deserialize(blob, n - 1, &bad), PJRT_Error_Code_INVALID_ARGUMENT,
                    "truncated");
  PJRT_EXPECT_ERROR(api, deserialize(blob, 10, &bad), PJRT_Error_Code_INVALID_ARGUMENT, "");
  char *padded = calloc(1, n + 4);
  memcpy(padded, blob, n);
  PJRT_EXPECT_ERROR(api, deserialize(padded, n + 4, &bad), PJRT_Error_Code_INVALID_ARGUMENT, "");
  free(padded);
  const char garbage[] = "HloModule not_a_blob, really not one at all, no no no no no no no no";
  PJRT_EXPECT_ERROR(api, deserialize(garbage, sizeof(garbage), &bad),
                    PJRT_Error_Code_INVALID_ARGUMENT, "magic");
  PJRT_EXPECT_ERROR(api, deserialize(NULL, 0, &bad), PJRT_Error_Code_INVALID_ARGUMENT, "");

  free(blob);
  pjrt_exec_buffer_destroy(api, out[0]);
  pjrt_exec_buffer_destroy(api, args[0]);
  pjrt_exec_buffer_destroy(api, args[1]);
  executable_destroy(e);
  pjrt_exec_destroy(api, l2);
  pjrt_exec_destroy(api, l);
}

static int64_t cost_property(PJRT_LoadedExecutable *l, const char *name) {
  PJRT_Executable *e = executable_of(l);
  PJRT_Executable_GetCostAnalysis_Args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = PJRT_Executable_GetCostAnalysis_Args_STRUCT_SIZE;
  a.executable = e;
  PJRT_CHECK(api, api->PJRT_Executable_GetCostAnalysis(&a));
  int64_t v = -1;
  for (size_t i = 0; i < a.num_properties; i++)
    if (a.properties[i].name_size == strlen(name) &&
        !memcmp(a.properties[i].name, name, strlen(name)))
      v = a.properties[i].int64_value;
  executable_destroy(e);
  return v;
}

static void test_memory_cache_hit(void **state) {
  (void)state;
  const char *text =
      "HloModule cached\nENTRY main {\n  x = f32[32] parameter(0)\n  ROOT n = f32[32] "
      "negate(x)\n}\n";
  double t0 = pjrt_exec_now_ms();
  PJRT_LoadedExecutable *l1 = pjrt_exec_compile(api, g_client, text);
  double t1 = pjrt_exec_now_ms();
  int64_t hits = cost_property(l1, "kiln.compile_cache.memory_hits");
  PJRT_LoadedExecutable *l2 = pjrt_exec_compile(api, g_client, text);
  double t2 = pjrt_exec_now_ms();
  printf("compile: first %.3f ms, cache hit %.3f ms\n", t1 - t0, t2 - t1);
  assert_int_equal(cost_property(l2, "kiln.compile_cache.memory_hits"), hits + 1);
  /* both handles run; deleting one leaves the other usable */
  PJRT_LoadedExecutable_Delete_Args ld = {
      .struct_size = PJRT_LoadedExecutable_Delete_Args_STRUCT_SIZE, .executable = l1};
  PJRT_CHECK(api, api->PJRT_LoadedExecutable_Delete(&ld));
  float x[32], r[32];
  for (int i = 0; i < 32; i++) x[i] = (float)i;
  int64_t dims[1] = {32};
  PJRT_Buffer *arg = f32_buffer(x, dims, 1);
  PJRT_Buffer *out[1] = {NULL};
  pjrt_exec_run(api, l2, &arg, 1, out);
  pjrt_exec_read(api, out[0], r, sizeof(r));
  for (int i = 0; i < 32; i++) assert_true(r[i] == -x[i]);
  pjrt_exec_buffer_destroy(api, out[0]);
  pjrt_exec_buffer_destroy(api, arg);
  pjrt_exec_destroy(api, l1);
  pjrt_exec_destroy(api, l2);
}

/* A program with an rng-get-and-update-state counter compiles to an executable of its own
 * each time (not the cache's), so a second compile draws from the seed again, as XLA's
 * would, while each executable's own counter moves on with every run. */
static void test_rng_state_is_per_compile(void **state) {
  (void)state;
  const char *text =
      "HloModule rng_counter\nENTRY main {\n  ROOT s = u64[2] "
      "rng-get-and-update-state(), delta=16\n}\n";
  PJRT_LoadedExecutable *l1 = pjrt_exec_compile(api, g_client, text);
  int64_t hits = cost_property(l1, "kiln.compile_cache.memory_hits");
  uint64_t first[2], again[2], second[2];
  PJRT_Buffer *out[1] = {NULL};
  pjrt_exec_run(api, l1, NULL, 0, out);
  pjrt_exec_read(api, out[0], first, sizeof(first));
  pjrt_exec_buffer_destroy(api, out[0]);
  pjrt_exec_run(api, l1, NULL, 0, out);
  pjrt_exec_read(api, out[0], again, sizeof(again));
  pjrt_exec_buffer_destroy(api, out[0]);
  assert_true(again[0] == first[0] + 16 && again[1] == first[1]);
  PJRT_LoadedExecutable *l2 = pjrt_exec_compile(api, g_client, text);
  assert_int_equal(cost_property(l2, "kiln.compile_cache.memory_hits"), hits);
  pjrt_exec_run(api, l2, NULL, 0, out);
  pjrt_exec_read(api, out[0], second, sizeof(second));
  pjrt_exec_buffer_destroy(api, out[0]);
  assert_true(second[0] == first[0] && second[1] == first[1]);
  pjrt_exec_destroy(api, l1);
  pjrt_exec_destroy(api, l2);
}

/* An executable that outlives its client fails cleanly (the caller's error, no crash). */
static void test_executable_outliving_client(void **state) {
  (void)state;
  PJRT_Client *c = pjrt_exec_client(api, "");
  PJRT_LoadedExecutable *l = pjrt_exec_compile(api, c, kAdd);
  pjrt_test_client_destroy(api, c);
  PJRT_Buffer *out[1] = {NULL};
  PJRT_Buffer *none[2] = {NULL, NULL};
  PJRT_EXPECT_ERROR(api, pjrt_exec_try_run(api, l, none, 2, out, NULL),
                    PJRT_Error_Code_FAILED_PRECONDITION, "client");
  pjrt_exec_destroy(api, l);
}

/* Outputs reuse a destroyed output's allocation (the device's spare block): each execute's
 * output has its own values, dims and layout whatever the output before it was (rank 1, then
 * rank 2, then rank 9, past the spare blocks' rank); outputs destroyed after their client
 * (the spare slot closed) are freed with their memory (LeakSanitizer checks the rest). */
static void test_outputs_reuse_destroyed_outputs(void **state) {
  (void)state;
  PJRT_Client *c = pjrt_exec_client(api, "");
  PJRT_Device *d = pjrt_exec_device(api, c, 0);
  PJRT_LoadedExecutable *add = pjrt_exec_compile(api, c, kAdd);
  PJRT_LoadedExecutable *neg2 = pjrt_exec_compile(
      api, c,
      "HloModule neg2\nENTRY main {\n  x = f32[2,8] parameter(0)\n  ROOT n = f32[2,8] "
      "negate(x)\n}\n");
  PJRT_LoadedExecutable *neg9 = pjrt_exec_compile(
      api, c,
      "HloModule neg9\nENTRY main {\n  x = f32[2,1,2,1,2,1,2,1,1] parameter(0)\n  ROOT n = "
      "f32[2,1,2,1,2,1,2,1,1] negate(x)\n}\n");
  float x[16], y[16], r[16];
  for (int i = 0; i < 16; i++) {
    x[i] = (float)i;
    y[i] = 100.0f;
  }
  int64_t d1[1] = {16}, d2[2] = {2, 8}, d9[9] = {2, 1, 2, 1, 2, 1, 2, 1, 1};
  PJRT_Buffer *a1[2] = {pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_F32, d1, 1),
                        pjrt_exec_buffer(api, c, d, y, PJRT_Buffer_Type_F32, d1, 1)};
  PJRT_Buffer *a2 = pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_F32, d2, 2);
  PJRT_Buffer *a9 = pjrt_exec_buffer(api, c, d, x, PJRT_Buffer_Type_F32, d9, 9);
  PJRT_Buffer *kept[3] = {NULL, NULL, NULL};
  for (int round = 0; round < 3; round++) {
    PJRT_Buffer *out[1] = {NULL};
    pjrt_exec_run(api, add, a1, 2, out);
    pjrt_exec_read(api, out[0], r, sizeof(r));
    for (int i = 0; i < 16; i++) assert_true(r[i] == x[i] + 100.0f);
    pjrt_exec_buffer_destroy(api, out[0]); /* its allocation: the next output's */
    pjrt_exec_run(api, neg2, &a2, 1, out);
    PJRT_Buffer_Dimensions_Args da = {.struct_size = PJRT_Buffer_Dimensions_Args_STRUCT_SIZE,
                                      .buffer = out[0]};
    PJRT_CHECK(api, api->PJRT_Buffer_Dimensions(&da));
    assert_int_equal(da.num_dims, 2);
    assert_int_equal(da.dims[0], 2);
    assert_int_equal(da.dims[1], 8);
    pjrt_exec_read(api, out[0], r, sizeof(r));
    for (int i = 0; i < 16; i++) assert_true(r[i] == -x[i]);
    pjrt_exec_buffer_destroy(api, out[0]);
    pjrt_exec_run(api, neg9, &a9, 1, out); /* rank 9: an allocation of its own */
    da.buffer = out[0];
    PJRT_CHECK(api, api->PJRT_Buffer_Dimensions(&da));
    assert_int_equal(da.num_dims, 9);
    pjrt_exec_read(api, out[0], r, sizeof(r));
    for (int i = 0; i < 16; i++) assert_true(r[i] == -x[i]);
    kept[round] = out[0];
  }
  pjrt_exec_buffer_destroy(api, kept[0]);
  PJRT_Buffer *last[1] = {NULL};
  pjrt_exec_run(api, add, a1, 2, last);
  pjrt_exec_destroy(api, add);
  pjrt_exec_destroy(api, neg2);
  pjrt_exec_destroy(api, neg9);
  pjrt_test_client_destroy(api, c);
  /* after the client: still readable, then freed with the client's last memory */
  pjrt_exec_read(api, last[0], r, sizeof(r));
  for (int i = 0; i < 16; i++) assert_true(r[i] == x[i] + 100.0f);
  pjrt_exec_buffer_destroy(api, last[0]);
  pjrt_exec_buffer_destroy(api, kept[1]);
  pjrt_exec_buffer_destroy(api, kept[2]);
  pjrt_exec_buffer_destroy(api, a1[0]);
  pjrt_exec_buffer_destroy(api, a1[1]);
  pjrt_exec_buffer_destroy(api, a2);
  pjrt_exec_buffer_destroy(api, a9);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_add_executes_and_reports_metadata),
      cmocka_unit_test(test_gelu_example),
      cmocka_unit_test(test_tuple_result_and_parameter),
      cmocka_unit_test(test_donation_and_non_donatable),
      cmocka_unit_test(test_compile_errors),
      cmocka_unit_test(test_stablehlo_program),
      cmocka_unit_test(test_execute_errors),
      cmocka_unit_test(test_optimized_program),
      cmocka_unit_test(test_serialize_round_trip_and_corrupt_blobs),
      cmocka_unit_test(test_memory_cache_hit),
      cmocka_unit_test(test_rng_state_is_per_compile),
      cmocka_unit_test(test_executable_outliving_client),
      cmocka_unit_test(test_outputs_reuse_destroyed_outputs),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
