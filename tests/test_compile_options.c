/* The protobuf wire reader (base/proto_wire) and PJRT's compile options
 * (plugin/compile_options): hand-assembled CompileOptionsProto bytes, as JAX sends them and
 * with every kind of damage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/proto_wire.h"
#include "base/status.h"
#include "compiler/passes/pass.h"
#include "plugin/compile_options.h"

/* "1a 04 20 01" -> bytes; returns the count. */
static size_t hex(const char *text, uint8_t *out, size_t cap) {
  size_t n = 0;
  for (const char *p = text; *p;) {
    if (*p == ' ' || *p == '\n') {
      p++;
      continue;
    }
    unsigned v;
    assert_int_equal(sscanf(p, "%2x", &v), 1);
    assert_true(n < cap);
    out[n++] = (uint8_t)v;
    p += 2;
  }
  return n;
}

static kiln_status decode_hex(const char *text, kiln_pjrt_compile_options_t *o) {
  uint8_t buf[1024];
  size_t n = hex(text, buf, sizeof buf);
  return kiln_pjrt_compile_options_decode(buf, n, o);
}

/* Expects INVALID_ARGUMENT whose message holds every given part. */
static void expect_error(kiln_status s, const char *part1, const char *part2) {
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  const char *m = kiln_status_message(s);
  if (!strstr(m, part1) || (part2 && !strstr(m, part2)))
    fail_msg("message '%s' lacks '%s' / '%s'", m, part1, part2 ? part2 : "");
  kiln_status_free(s);
}

/* ---- the wire reader ---- */

static void test_wire_reader_reads_every_scalar_kind(void **state) {
  (void)state;
  /* 1: varint 300; 2: sint64 -3 (zigzag 5); 3: fixed32 1.5f; 4: fixed64 -2.0;
   * 5: string "hi"; 6: int32 -1 as a 10-byte varint */
  uint8_t b[64];
  size_t n =
      hex("08 ac 02 10 05 1d 00 00 c0 3f 21 00 00 00 00 00 00 00 c0 2a 02 68 69"
          " 30 ff ff ff ff ff ff ff ff ff 01",
          b, sizeof b);
  kiln_pw_reader_t r;
  kiln_pw_reader_init(&r, b, n, "Test");
  kiln_pw_field_t f;
  int64_t i64;
  int32_t i32;
  float fl;
  double d;
  char *str;
  assert_null(kiln_pw_next(&r, &f));
  assert_int_equal(f.number, 1);
  assert_null(kiln_pw_as_i64(&r, &f, &i64));
  assert_int_equal(i64, 300);
  assert_null(kiln_pw_next(&r, &f));
  assert_null(kiln_pw_as_sint64(&r, &f, &i64));
  assert_int_equal(i64, -3);
  assert_null(kiln_pw_next(&r, &f));
  assert_null(kiln_pw_as_float(&r, &f, &fl));
  assert_true(fl == 1.5f);
  assert_null(kiln_pw_next(&r, &f));
  assert_null(kiln_pw_as_double(&r, &f, &d));
  assert_true(d == -2.0);
  assert_null(kiln_pw_next(&r, &f));
  assert_int_equal(f.offset, 19);
  assert_null(kiln_pw_as_string(&r, &f, &str));
  assert_string_equal(str, "hi");
  kiln_free(str);
  assert_null(kiln_pw_next(&r, &f));
  assert_null(kiln_pw_as_i32(&r, &f, &i32));
  assert_int_equal(i32, -1);
  assert_false(kiln_pw_more(&r));
}

static void test_wire_reader_reads_packed_and_unpacked_repeated_fields(void **state) {
  (void)state;
  /* field 1 packed {1, 150, 3}, then field 1 unpacked 4; field 2 packed floats {1, 2};
   * field 3 unpacked double 0.5 */
  uint8_t b[64];
  size_t n =
      hex("0a 04 01 96 01 03 08 04 12 08 00 00 80 3f 00 00 00 40"
          " 19 00 00 00 00 00 00 e0 3f",
          b, sizeof b);
  kiln_pw_reader_t r;
  kiln_pw_reader_init(&r, b, n, "Test");
  kiln_pw_i64_vec_t ints = {0};
  kiln_pw_u32_vec_t floats = {0};
  kiln_pw_u64_vec_t doubles = {0};
  while (kiln_pw_more(&r)) {
    kiln_pw_field_t f;
    assert_null(kiln_pw_next(&r, &f));
    if (f.number == 1) assert_null(kiln_pw_append_varints(&r, &f, &ints));
    if (f.number == 2) assert_null(kiln_pw_append_fixed32(&r, &f, &floats));
    if (f.number == 3) assert_null(kiln_pw_append_fixed64(&r, &f, &doubles));
  }
  assert_int_equal(ints.len, 4);
  assert_int_equal(ints.data[0], 1);
  assert_int_equal(ints.data[1], 150);
  assert_int_equal(ints.data[2], 3);
  assert_int_equal(ints.data[3], 4);
  assert_int_equal(floats.len, 2);
  float f1;
  memcpy(&f1, &floats.data[1], 4);
  assert_true(f1 == 2.0f);
  assert_int_equal(doubles.len, 1);
  double d;
  memcpy(&d, &doubles.data[0], 8);
  assert_true(d == 0.5);
  kiln_vec_free(&ints);
  kiln_vec_free(&floats);
  kiln_vec_free(&doubles);
}

static kiln_status read_all(const char *text) {
  uint8_t b[1024];
  size_t n = hex(text, b, sizeof b);
  kiln_pw_reader_t r;
  kiln_pw_reader_init(&r, b, n, "Test");
  while (kiln_pw_more(&r)) {
    kiln_pw_field_t f;
    KILN_RETURN_IF_ERROR_PLAIN(kiln_pw_next(&r, &f));
  }
  return NULL;
}

static void test_wire_reader_rejects_malformed_bytes_naming_field_and_offset(void **state) {
  (void)state;
  expect_error(read_all("08 ff"), "Test field 1 at byte 0", "truncated varint");
  expect_error(read_all("08 80 80 80 80 80 80 80 80 80 02"), "field 1", "longer than 64 bits");
  expect_error(read_all("08 01 12 05 01 02"), "field 2 at byte 2",
               "length 5 runs past the end (2 bytes left)");
  expect_error(read_all("12 ff ff ff ff ff ff ff ff ff 01"), "field 2", "runs past the end");
  expect_error(read_all("1d 01 02"), "field 3", "fixed32 needs 4 bytes");
  expect_error(read_all("21 01 02 03"), "field 4", "fixed64 needs 8 bytes");
  expect_error(read_all("0e 00"), "field 1", "invalid wire type 6");
  expect_error(read_all("00 00"), "at byte 0", "invalid field number 0");
  expect_error(read_all("0c"), "field 1", "end of group without a start");
  expect_error(read_all("0b 08 01"), "field 1", "group without an end tag");
  expect_error(read_all("0b 14"), "field 2", "end of group 2 inside group 1");
  /* a packed list whose last element is cut short */
  uint8_t b[8];
  size_t n = hex("0a 02 01 80", b, sizeof b);
  kiln_pw_reader_t r;
  kiln_pw_reader_init(&r, b, n, "Test");
  kiln_pw_field_t f;
  assert_null(kiln_pw_next(&r, &f));
  kiln_pw_i64_vec_t v = {0};
  expect_error(kiln_pw_append_varints(&r, &f, &v), "packed element at byte 3", "truncated");
  kiln_vec_free(&v);
  /* wrong wire type for the requested scalar */
  n = hex("0d 01 00 00 00", b, sizeof b);
  kiln_pw_reader_init(&r, b, n, "Test");
  assert_null(kiln_pw_next(&r, &f));
  int64_t x;
  expect_error(kiln_pw_as_i64(&r, &f, &x), "field 1", "expected a varint");
}

static void test_wire_reader_skips_groups_and_stops_group_depth_bombs(void **state) {
  (void)state;
  /* a group holding every wire type and a nested group, then a varint */
  assert_null(
      read_all("0b 08 01 11 00 00 00 00 00 00 00 00 1a 01 41 25 00 00 00 00"
               " 2b 30 05 2c 0c 38 07"));
  char text[4096];
  size_t len = 0;
  for (int i = 0; i < 150; i++) len += (size_t)snprintf(text + len, sizeof text - len, "0b ");
  for (int i = 0; i < 150; i++) len += (size_t)snprintf(text + len, sizeof text - len, "0c ");
  expect_error(read_all(text), "field 1", "nested deeper than 100");
  /* 99 levels are fine */
  len = 0;
  for (int i = 0; i < 99; i++) len += (size_t)snprintf(text + len, sizeof text - len, "0b ");
  for (int i = 0; i < 99; i++) len += (size_t)snprintf(text + len, sizeof text - len, "0c ");
  assert_null(read_all(text));
}

/* ---- compile options ---- */

static void test_empty_options_are_the_defaults(void **state) {
  (void)state;
  kiln_pjrt_compile_options_t o;
  assert_null(kiln_pjrt_compile_options_decode(NULL, 0, &o));
  assert_int_equal(o.device_ordinal, -1);
  assert_int_equal(o.num_replicas, 1);
  assert_int_equal(o.num_partitions, 1);
  assert_false(o.has_device_assignment);
  assert_null(o.xla_dump_to);
  assert_int_equal(o.num_argument_layouts, 0);
  kiln_pjrt_compile_options_free(&o);
}

static void test_what_jax_commonly_sends_decodes(void **state) {
  (void)state;
  kiln_pjrt_compile_options_t o;
  assert_null(decode_hex("1a 04 20 01 28 01", &o));
  assert_int_equal(o.num_replicas, 1);
  assert_int_equal(o.num_partitions, 1);
  assert_int_equal(o.device_ordinal, -1);
  kiln_pjrt_compile_options_free(&o);
  /* other values, to see the fields land where they belong */
  assert_null(decode_hex("1a 08 08 03 20 02 28 04 30 01", &o));
  assert_int_equal(o.device_ordinal, 3);
  assert_int_equal(o.num_replicas, 2);
  assert_int_equal(o.num_partitions, 4);
  assert_true(o.use_spmd_partitioning);
  kiln_pjrt_compile_options_free(&o);
}

static void test_device_assignment_decodes_packed_and_unpacked(void **state) {
  (void)state;
  kiln_pjrt_compile_options_t o;
  /* replicas 2, computations 2: computation 0 on devices {0, 1} (packed), computation 1 on
   * {2, 3} (unpacked) */
  assert_null(
      decode_hex("1a 16 20 02 28 02 4a 10 08 02 10 02 1a 04 0a 02 00 01"
                 " 1a 04 08 02 08 03",
                 &o));
  assert_true(o.has_device_assignment);
  assert_int_equal(o.da_replica_count, 2);
  assert_int_equal(o.da_computation_count, 2);
  /* device_ids[replica * computation_count + computation] */
  assert_int_equal(o.device_ids[0], 0);
  assert_int_equal(o.device_ids[1], 2);
  assert_int_equal(o.device_ids[2], 1);
  assert_int_equal(o.device_ids[3], 3);
  kiln_pjrt_compile_options_free(&o);
  /* a computation with too few devices */
  expect_error(decode_hex("1a 0a 4a 08 08 02 10 01 1a 02 08 00", &o),
               "computation_devices[0] has 1 replica_device_ids, replica_count is 2", NULL);
  expect_error(decode_hex("1a 06 4a 04 08 01 10 01", &o),
               "computation_count is 1 but 0 computation_devices", NULL);
}

static void test_debug_options_dump_dir_and_command_buffers(void **state) {
  (void)state;
  kiln_pjrt_compile_options_t o;
  /* debug_options { xla_dump_to: "/tmp/d" (field 109) } */
  assert_null(decode_hex("1a 0b 1a 09 ea 06 06 2f 74 6d 70 2f 64", &o));
  assert_string_equal(o.xla_dump_to, "/tmp/d");
  assert_false(o.has_command_buffer_option);
  kiln_pjrt_compile_options_free(&o);
  /* xla_gpu_enable_command_buffer (258): empty (given, off), then {FUSION, CUBLAS} */
  assert_null(decode_hex("1a 05 1a 03 92 10 00", &o));
  assert_true(o.has_command_buffer_option);
  assert_false(o.command_buffers);
  kiln_pjrt_compile_options_free(&o);
  assert_null(decode_hex("1a 07 1a 05 92 10 02 01 02", &o));
  assert_true(o.has_command_buffer_option);
  assert_true(o.command_buffers);
  kiln_pjrt_compile_options_free(&o);
}

/* The collective combiners' thresholds: DebugOptions fields 212 and 213, then
 * env_option_overrides (int and string values) over them, which also set xla_dump_to and
 * turn command buffers off; the passes get 0 as -1 (off) and unset ones untouched. */
static void test_combine_thresholds_from_debug_options_and_overrides(void **state) {
  (void)state;
  kiln_pjrt_compile_options_t o;
  /* debug_options { 212: 100, 213: 0 } */
  assert_null(decode_hex("1a 08 1a 06 a0 0d 64 a8 0d 00", &o));
  assert_int_equal(o.all_reduce_combine_threshold_bytes, KILN_PJRT_OPTION_UNSET);
  assert_int_equal(o.all_gather_combine_threshold_bytes, 100);
  assert_int_equal(o.reduce_scatter_combine_threshold_bytes, 0);
  kiln_pass_options_t po;
  memset(&po, 0, sizeof po);
  po.all_reduce_combine_threshold_bytes = 5;
  kiln_pjrt_compile_options_to_passes(&o, &po);
  assert_int_equal(po.all_reduce_combine_threshold_bytes, 5);
  assert_int_equal(po.all_gather_combine_threshold_bytes, 100);
  assert_int_equal(po.reduce_scatter_combine_threshold_bytes, -1);
  kiln_pjrt_compile_options_free(&o);
  /* ... plus overrides xla_gpu_all_gather_combine_threshold_bytes: int 7, xla_dump_to: "/o",
   * xla_gpu_enable_command_buffer: "" */
  assert_null(decode_hex(
      "1a 08 1a 06 a0 0d 64 a8 0d 00"
      " 3a 30 0a 2a 78 6c 61 5f 67 70 75 5f 61 6c 6c 5f 67 61 74 68 65 72 5f 63 6f 6d 62 69 6e"
      " 65 5f 74 68 72 65 73 68 6f 6c 64 5f 62 79 74 65 73 12 02 18 07"
      " 3a 13 0a 0b 78 6c 61 5f 64 75 6d 70 5f 74 6f 12 04 0a 02 2f 6f"
      " 3a 23 0a 1d 78 6c 61 5f 67 70 75 5f 65 6e 61 62 6c 65 5f 63 6f 6d 6d 61 6e 64 5f 62 75"
      " 66 66 65 72 12 02 0a 00",
      &o));
  assert_int_equal(o.all_gather_combine_threshold_bytes, 7);
  assert_string_equal(o.xla_dump_to, "/o");
  assert_true(o.has_command_buffer_option);
  assert_false(o.command_buffers);
  kiln_pjrt_compile_options_free(&o);
  /* the same override with int replaced by string "x7": not a number */
  expect_error(decode_hex(" 3a 31 0a 2a 78 6c 61 5f 67 70 75 5f 61 6c 6c 5f 67 61 74 68 65 72"
                          " 5f 63 6f 6d 62 69 6e 65 5f 74 68 72 65 73 68 6f 6c 64 5f 62 79 74"
                          " 65 73 12 03 0a 01 78",
                          &o),
               "xla_gpu_all_gather_combine_threshold_bytes needs an integer", "'x'");
  assert_int_equal(o.all_gather_combine_threshold_bytes, KILN_PJRT_OPTION_UNSET);
}

static void test_argument_layouts_and_overrides_become_text(void **state) {
  (void)state;
  kiln_pjrt_compile_options_t o;
  /* argument_layouts: f32[2,3]{0,1}; (s32[], pred[4]{0}); env override "a" -> bool true;
   * "n" -> int 7; "s" -> string "x"; result_layout bf16[8]{0:T(128)} */
  assert_null(
      decode_hex("0a 0c 10 0b 1a 02 02 03 2a 04 0a 02 00 01"
                 " 0a 12 10 0d 22 02 10 04 22 0a 10 01 1a 01 04 2a 03 0a 01 00"
                 " 3a 07 0a 01 61 12 02 10 01"
                 " 3a 07 0a 01 6e 12 02 18 07"
                 " 3a 08 0a 01 73 12 03 0a 01 78"
                 " 1a 11 12 0f 10 10 1a 01 08 2a 08 0a 01 00 32 03 08 80 01",
                 &o));
  assert_int_equal(o.num_argument_layouts, 2);
  assert_string_equal(o.argument_layouts[0], "f32[2,3]{0,1}");
  assert_string_equal(o.argument_layouts[1], "(s32[], pred[4]{0})");
  assert_int_equal(o.num_env_overrides, 3);
  assert_string_equal(o.env_overrides[0], "a=true");
  assert_string_equal(o.env_overrides[1], "n=7");
  assert_string_equal(o.env_overrides[2], "s=x");
  assert_string_equal(o.result_layout, "bf16[8]{0:T(128)}");
  kiln_pjrt_compile_options_free(&o);
}

static void test_unknown_fields_of_every_wire_type_are_skipped(void **state) {
  (void)state;
  kiln_pjrt_compile_options_t o;
  /* top level: varint 15, fixed64 16, bytes 17, group 18 (with a nested group), fixed32 19,
   * then executable_build_options with its own unknown fields around num_replicas 2 */
  assert_null(
      decode_hex("78 96 01 81 01 01 02 03 04 05 06 07 08 8a 01 03 61 62 63"
                 " 93 01 08 05 13 08 01 14 94 01 9d 01 01 02 03 04"
                 " 1a 12 b8 01 01 20 02 c2 01 02 00 00 28 03 f5 01 00 00 80 3f",
                 &o));
  assert_int_equal(o.num_replicas, 2);
  assert_int_equal(o.num_partitions, 3);
  kiln_pjrt_compile_options_free(&o);
}

static void test_malformed_options_are_clear_errors(void **state) {
  (void)state;
  kiln_pjrt_compile_options_t o;
  expect_error(decode_hex("1a 02 20 ff", &o), "ExecutableBuildOptionsProto field 4 at byte 2",
               "truncated varint");
  expect_error(decode_hex("1a 05 20 01", &o), "CompileOptionsProto field 3 at byte 0",
               "runs past the end");
  expect_error(decode_hex("20 ff ff ff ff ff ff ff ff ff 7f", &o), "field 4",
               "longer than 64 bits");
  expect_error(decode_hex("1a 05 25 01 00 00 00", &o), "field 4", "expected a varint");
  expect_error(decode_hex("1a 02 20 7f 1a 02 20 ff", &o), "truncated", NULL);
  /* BUFFER (34), an XLA type kiln lacks */
  expect_error(decode_hex("0a 02 10 22", &o), "element_type 34 is not a type kiln supports",
               "argument_layouts[0]");
  /* negative replica count */
  expect_error(decode_hex("1a 0b 20 ff ff ff ff ff ff ff ff ff 01", &o), "num_replicas -1", NULL);
  /* the options are reset after an error */
  assert_int_equal(o.num_replicas, 1);
  assert_null(o.argument_layouts);
}

static void test_nested_shape_depth_bomb_is_an_error(void **state) {
  (void)state;
  /* argument_layouts: 150 tuple_shapes nested in each other, built inside out */
  enum { kDepth = 150 };
  size_t cap = 8 * kDepth + 64;
  uint8_t *msg = kiln_malloc(cap), *tmp = kiln_malloc(cap);
  size_t n = 2;
  msg[0] = 0x10, msg[1] = 0x0b; /* innermost: f32[] */
  for (int d = 0; d < kDepth; d++) {
    size_t k = 0;
    tmp[k++] = 0x10, tmp[k++] = 0x0d; /* TUPLE */
    tmp[k++] = 0x22;                  /* tuple_shapes */
    size_t len = n;
    do {
      tmp[k++] = (uint8_t)((len & 0x7F) | (len > 0x7F ? 0x80 : 0));
      len >>= 7;
    } while (len);
    memcpy(tmp + k, msg, n);
    n += k;
    memcpy(msg, tmp, n);
  }
  size_t k = 0;
  tmp[k++] = 0x0a;
  size_t len = n;
  do {
    tmp[k++] = (uint8_t)((len & 0x7F) | (len > 0x7F ? 0x80 : 0));
    len >>= 7;
  } while (len);
  memcpy(tmp + k, msg, n);
  kiln_pjrt_compile_options_t o;
  expect_error(kiln_pjrt_compile_options_decode(tmp, n + k, &o), "nested deeper than 100", NULL);
  kiln_free(msg);
  kiln_free(tmp);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wire_reader_reads_every_scalar_kind),
      cmocka_unit_test(test_wire_reader_reads_packed_and_unpacked_repeated_fields),
      cmocka_unit_test(test_wire_reader_rejects_malformed_bytes_naming_field_and_offset),
      cmocka_unit_test(test_wire_reader_skips_groups_and_stops_group_depth_bombs),
      cmocka_unit_test(test_empty_options_are_the_defaults),
      cmocka_unit_test(test_what_jax_commonly_sends_decodes),
      cmocka_unit_test(test_device_assignment_decodes_packed_and_unpacked),
      cmocka_unit_test(test_debug_options_dump_dir_and_command_buffers),
      cmocka_unit_test(test_combine_thresholds_from_debug_options_and_overrides),
      cmocka_unit_test(test_argument_layouts_and_overrides_become_text),
      cmocka_unit_test(test_unknown_fields_of_every_wire_type_are_skipped),
      cmocka_unit_test(test_malformed_options_are_clear_errors),
      cmocka_unit_test(test_nested_shape_depth_bomb_is_an_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
