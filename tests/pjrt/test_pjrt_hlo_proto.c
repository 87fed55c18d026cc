/* PJRT conformance, protobuf programs and options: Client_Compile of a serialized
 * HloModuleProto ("hlo") and HloModuleProtoWithConfig ("hlo_with_config"), built here byte
 * by byte from the field numbers of xla/service/hlo.proto and xla/xla_data.proto, with the
 * CompileOptionsProto JAX commonly sends; executed and checked against values computed here.
 * Malformed programs and options are INVALID_ARGUMENT with the decoder's message. Built
 * against OpenXLA's pjrt_c_api.h; the plugin is loaded with dlopen(RTLD_LOCAL). */
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

/* ---- a minimal protobuf writer (fixed-size buffers; enough for the modules below) ---- */

typedef struct msg {
  uint8_t b[1024];
  size_t n;
} msg_t;

static void put_varint(msg_t *m, uint64_t v) {
  while (v >= 0x80) {
    m->b[m->n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  m->b[m->n++] = (uint8_t)v;
  assert_true(m->n < sizeof m->b - 16);
}

static void put_int(msg_t *m, uint32_t field, int64_t v) {
  put_varint(m, (uint64_t)field << 3);
  put_varint(m, (uint64_t)v);
}

static void put_bytes(msg_t *m, uint32_t field, const void *data, size_t n) {
  put_varint(m, ((uint64_t)field << 3) | 2);
  put_varint(m, n);
  assert_true(m->n + n < sizeof m->b);
  memcpy(m->b + m->n, data, n);
  m->n += n;
}

static void put_str(msg_t *m, uint32_t field, const char *s) {
  put_bytes(m, field, s, strlen(s));
}

static void put_msg(msg_t *m, uint32_t field, const msg_t *sub) {
  put_bytes(m, field, sub->b, sub->n);
}

/* ShapeProto f32[4]{0} (element_type=2: F32=11, dimensions=3, layout=5 {minor_to_major=1}). */
static void f32x4(msg_t *shape) {
  memset(shape, 0, sizeof *shape);
  put_int(shape, 2, 11);
  put_int(shape, 3, 4);
  msg_t layout = {0};
  put_int(&layout, 1, 0);
  put_msg(shape, 5, &layout);
}

/* HloInstructionProto: name=1, opcode=2, shape=3, id=35, operand_ids=36. */
static void instr(msg_t *out, const char *name, const char *opcode, int64_t id,
                  const int64_t *operands, int n) {
  memset(out, 0, sizeof *out);
  msg_t shape;
  f32x4(&shape);
  put_str(out, 1, name);
  put_str(out, 2, opcode);
  put_msg(out, 3, &shape);
  put_int(out, 35, id);
  for (int i = 0; i < n; i++) put_int(out, 36, operands[i]);
}

/* ENTRY main { x = parameter(0); y = parameter(1); k = constant({1, 2, 3, 4});
 *              s = add(x, y); ROOT m = multiply(s, k) }, all f32[4]. */
static size_t module_proto(uint8_t *out, size_t cap) {
  msg_t ins[5];
  instr(&ins[0], "x", "parameter", 1, NULL, 0);
  put_int(&ins[0], 9, 0); /* parameter_number */
  instr(&ins[1], "y", "parameter", 2, NULL, 0);
  put_int(&ins[1], 9, 1);
  instr(&ins[2], "k", "constant", 3, NULL, 0);
  msg_t literal = {0}, shape;
  f32x4(&shape);
  put_msg(&literal, 1, &shape);
  const float values[4] = {1, 2, 3, 4};
  put_bytes(&literal, 8, values, sizeof values); /* f32s, packed fixed32 */
  put_msg(&ins[2], 8, &literal);
  const int64_t add_ops[2] = {1, 2}, mul_ops[2] = {4, 3};
  instr(&ins[3], "s", "add", 4, add_ops, 2);
  instr(&ins[4], "m", "multiply", 5, mul_ops, 2);
  msg_t comp = {0};
  put_str(&comp, 1, "main");
  for (int i = 0; i < 5; i++) put_msg(&comp, 2, &ins[i]);
  put_int(&comp, 5, 1); /* id */
  put_int(&comp, 6, 5); /* root_id */
  msg_t module = {0};
  put_str(&module, 1, "proto_module");
  put_str(&module, 2, "main");
  put_msg(&module, 3, &comp);
  put_int(&module, 6, 1); /* entry_computation_id */
  assert_true(module.n <= cap);
  memcpy(out, module.b, module.n);
  return module.n;
}

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

/* Runs `l` on x = {1, 1, 1, 1}, y = {0, 1, 2, 3}: (x + y) * {1, 2, 3, 4} = {1, 4, 9, 16}. */
static void run_and_check(PJRT_LoadedExecutable *l) {
  const float x[4] = {1, 1, 1, 1}, y[4] = {0, 1, 2, 3};
  const int64_t dims[1] = {4};
  PJRT_Buffer *args[2] = {pjrt_exec_buffer(api, g_client, g_dev, x, PJRT_Buffer_Type_F32, dims, 1),
                          pjrt_exec_buffer(api, g_client, g_dev, y, PJRT_Buffer_Type_F32, dims, 1)};
  PJRT_Buffer *out[1] = {NULL};
  pjrt_exec_run(api, l, args, 2, out);
  float got[4];
  pjrt_exec_read(api, out[0], got, sizeof got);
  const float want[4] = {1, 4, 9, 16};
  for (int i = 0; i < 4; i++) assert_true(got[i] == want[i]);
  pjrt_exec_buffer_destroy(api, out[0]);
  pjrt_exec_buffer_destroy(api, args[0]);
  pjrt_exec_buffer_destroy(api, args[1]);
}

/* executable_build_options { num_replicas: 1, num_partitions: 1 } */
static const char kJaxOptions[] = "\x1a\x04\x20\x01\x28\x01";

static void test_hlo_module_proto_compiles_and_runs(void **state) {
  (void)state;
  uint8_t bytes[1024];
  size_t n = module_proto(bytes, sizeof bytes);
  PJRT_LoadedExecutable *l = NULL;
  PJRT_CHECK(api, pjrt_exec_try_compile(api, g_client, "hlo", bytes, n, kJaxOptions,
                                        sizeof kJaxOptions - 1, &l));
  assert_non_null(l);
  run_and_check(l);
  pjrt_exec_destroy(api, l);
}

static void test_hlo_module_proto_with_config_compiles_and_runs(void **state) {
  (void)state;
  uint8_t module[1024];
  size_t n = module_proto(module, sizeof module);
  msg_t config = {0}, with = {0};
  put_int(&config, 4, 1); /* replica_count */
  put_int(&config, 5, 1); /* num_partitions */
  put_bytes(&with, 1, module, n);
  put_msg(&with, 2, &config);
  PJRT_LoadedExecutable *l = NULL;
  PJRT_CHECK(api,
             pjrt_exec_try_compile(api, g_client, "hlo_with_config", with.b, with.n, NULL, 0, &l));
  assert_non_null(l);
  run_and_check(l);
  pjrt_exec_destroy(api, l);
}

static void test_malformed_protos_and_options_are_invalid_argument(void **state) {
  (void)state;
  uint8_t bytes[1024];
  size_t n = module_proto(bytes, sizeof bytes);
  PJRT_LoadedExecutable *l = NULL;
  /* cut inside the computation: a length past the end */
  PJRT_EXPECT_ERROR(api, pjrt_exec_try_compile(api, g_client, "hlo", bytes, n - 20, NULL, 0, &l),
                    PJRT_Error_Code_INVALID_ARGUMENT, "runs past the end");
  /* an unknown opcode names the instruction */
  uint8_t *op = NULL;
  for (size_t i = 0; i + 8 <= n && !op; i++)
    if (!memcmp(bytes + i, "multiply", 8)) op = bytes + i;
  assert_non_null(op);
  memcpy(op, "multiplx", 8);
  PJRT_EXPECT_ERROR(api, pjrt_exec_try_compile(api, g_client, "hlo", bytes, n, NULL, 0, &l),
                    PJRT_Error_Code_INVALID_ARGUMENT, "unknown opcode 'multiplx'");
  memcpy(op, "multiply", 8);
  /* options: a truncated varint inside executable_build_options */
  PJRT_EXPECT_ERROR(
      api, pjrt_exec_try_compile(api, g_client, "hlo", bytes, n, "\x1a\x02\x20\xff", 4, &l),
      PJRT_Error_Code_INVALID_ARGUMENT, "truncated varint");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hlo_module_proto_compiles_and_runs),
      cmocka_unit_test(test_hlo_module_proto_with_config_compiles_and_runs),
      cmocka_unit_test(test_malformed_protos_and_options_are_invalid_argument),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
