/* Tests for the .npy reader/writer (tools/common/npy.h). */
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
#include "base/str.h"
#include "compiler/hlo/literal.h"
#include "compiler/hlo/shape.h"
#include "tools/common/npy.h"

/* Builds a .npy file by hand: preamble of version `major`, `header` verbatim (no padding
 * added), then `n` data bytes. */
static void build_npy(kiln_strbuf_t *b, int major, const char *header, const void *data, size_t n) {
  size_t hlen = strlen(header);
  kiln_strbuf_append_n(b, "\x93NUMPY", 6);
  kiln_strbuf_append_char(b, (char)major);
  kiln_strbuf_append_char(b, 0);
  int len_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < len_bytes; i++) kiln_strbuf_append_char(b, (char)(hlen >> (8 * i)));
  kiln_strbuf_append_n(b, header, hlen);
  if (n) kiln_strbuf_append_n(b, data, n);
}

static kiln_literal_t *make_filled(kiln_arena_t *a, kiln_elem_type_t t, int rank,
                                   const int64_t *dims) {
  kiln_shape_t *s = kiln_shape_make_array_with_default_layout(a, t, rank, dims);
  kiln_literal_t *l = kiln_literal_make(a, s);
  for (int64_t i = 0; i < l->num_elements; i++) {
    if (kiln_elem_type_is_complex(t))
      kiln_literal_set_c128(l, i, 0.5 * (double)i - 1.0, -0.25 * (double)i);
    else if (kiln_elem_type_is_float(t))
      kiln_literal_set_f64(l, i,
                           t == KILN_F8E8M0FNU ? (double)(1 << (i % 4)) : 0.5 * (double)i - 1.0);
    else if (kiln_elem_type_is_signed_int(t))
      kiln_literal_set_s64(l, i, (i % 3) - 1 - (i % 2));
    else
      kiln_literal_set_u64(l, i, (uint64_t)i % 3);
  }
  return l;
}

static kiln_status_code_t parse_code(const kiln_strbuf_t *b, const kiln_shape_t *expected,
                                     kiln_arena_t *a, char *msg, size_t msg_n) {
  kiln_literal_t *l = NULL;
  kiln_status s = kiln_npy_parse(b->data, b->len, expected, "t.npy", a, &l);
  kiln_status_code_t c = kiln_status_code(s);
  if (msg) snprintf(msg, msg_n, "%s", kiln_status_message(s));
  if (s) assert_null(l);
  kiln_status_free(s);
  return c;
}

static void test_npy_round_trips_every_array_type(void **state) {
  int64_t dims[2] = {2, 3};
  for (int t = 0; t < KILN_ELEM_TYPE_COUNT; t++) {
    if (!kiln_elem_type_is_array((kiln_elem_type_t)t)) continue;
    kiln_arena_t a;
    kiln_arena_init(&a);
    kiln_literal_t *l = make_filled(&a, (kiln_elem_type_t)t, 2, dims);
    kiln_strbuf_t b = {0};
    assert_null(kiln_npy_serialize(&b, l));
    kiln_literal_t *back = NULL;
    kiln_status s = kiln_npy_parse(b.data, b.len, l->shape, "rt", &a, &back);
    if (s) fail_msg("%s: %s", kiln_elem_type_name((kiln_elem_type_t)t), kiln_status_message(s));
    assert_true(kiln_literal_equal(l, back));
    assert_int_equal(back->shape->type, t);
    kiln_strbuf_free(&b);
    kiln_arena_destroy(&a);
  }
}

static void test_npy_reads_canonical_dtypes_without_expected_shape(void **state) {
  static const kiln_elem_type_t types[] = {KILN_PRED, KILN_S8,  KILN_S16, KILN_S32, KILN_S64,
                                           KILN_U8,   KILN_U16, KILN_U32, KILN_U64, KILN_F16,
                                           KILN_BF16, KILN_F32, KILN_F64, KILN_C64, KILN_C128};
  int64_t dims[1] = {5};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    kiln_arena_t a;
    kiln_arena_init(&a);
    kiln_literal_t *l = make_filled(&a, types[i], 1, dims);
    kiln_strbuf_t b = {0};
    assert_null(kiln_npy_serialize(&b, l));
    kiln_literal_t *back = NULL;
    assert_null(kiln_npy_parse(b.data, b.len, NULL, "rt", &a, &back));
    assert_int_equal(back->shape->type, types[i]);
    assert_int_equal(back->shape->rank, 1);
    assert_int_equal(back->shape->dims[0], 5);
    assert_true(kiln_literal_equal(l, back));
    kiln_strbuf_free(&b);
    kiln_arena_destroy(&a);
  }
}

static void test_npy_header_is_padded_to_64_bytes_with_numpy_text(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  int64_t dims[2] = {2, 3};
  kiln_literal_t *l = make_filled(&a, KILN_F32, 2, dims);
  kiln_strbuf_t b = {0};
  assert_null(kiln_npy_serialize(&b, l));
  assert_int_equal(b.data[6], 1);
  assert_int_equal(b.data[7], 0);
  size_t hlen = (unsigned char)b.data[8] | ((size_t)(unsigned char)b.data[9] << 8);
  assert_int_equal((10 + hlen) % 64, 0);
  assert_int_equal(b.data[10 + hlen - 1], '\n');
  assert_int_equal(b.len, 10 + hlen + 6 * 4);
  assert_non_null(
      strstr(b.data + 10, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
  kiln_strbuf_free(&b);
  /* Scalar and rank-1 shapes print as Python tuples. */
  kiln_literal_t *scalar = make_filled(&a, KILN_S32, 0, NULL);
  assert_null(kiln_npy_serialize(&b, scalar));
  assert_non_null(strstr(b.data + 10, "'shape': (), }"));
  kiln_strbuf_free(&b);
  int64_t d1[1] = {7};
  assert_null(kiln_npy_serialize(&b, make_filled(&a, KILN_U8, 1, d1)));
  assert_non_null(strstr(b.data + 10, "'descr': '|u1'"));
  assert_non_null(strstr(b.data + 10, "'shape': (7,), }"));
  kiln_strbuf_free(&b);
  kiln_arena_destroy(&a);
}

static void test_npy_bf16_is_written_as_void2_and_read_from_u2_or_void2(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  int64_t dims[1] = {3};
  kiln_literal_t *l = make_filled(&a, KILN_BF16, 1, dims);
  kiln_strbuf_t b = {0};
  assert_null(kiln_npy_serialize(&b, l));
  assert_non_null(strstr(b.data + 10, "'descr': '|V2'"));
  kiln_strbuf_free(&b);

  /* 1.0, -2.0, 0.5 as bf16 bit patterns. */
  const uint16_t bits[3] = {0x3F80, 0xC000, 0x3F00};
  kiln_shape_t *want = kiln_shape_make_array(&a, KILN_BF16, 1, dims);
  static const char *const descrs[] = {"<u2", "<V2", "|V2"};
  for (int i = 0; i < 3; i++) {
    char header[128];
    snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (3,), }\n",
             descrs[i]);
    build_npy(&b, 1, header, bits, sizeof bits);
    kiln_literal_t *r = NULL;
    assert_null(kiln_npy_parse(b.data, b.len, want, "bf16", &a, &r));
    assert_int_equal(r->shape->type, KILN_BF16);
    assert_true(kiln_literal_get_f64(r, 0) == 1.0);
    assert_true(kiln_literal_get_f64(r, 1) == -2.0);
    assert_true(kiln_literal_get_f64(r, 2) == 0.5);
    kiln_strbuf_free(&b);
  }
  /* Without an expected type, '<u2' is plain u16. */
  build_npy(&b, 1, "{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }\n", bits, 6);
  kiln_literal_t *r = NULL;
  assert_null(kiln_npy_parse(b.data, b.len, NULL, "u16", &a, &r));
  assert_int_equal(r->shape->type, KILN_U16);
  assert_int_equal(kiln_literal_get_u64(r, 0), 0x3F80);
  kiln_strbuf_free(&b);
  /* f32 data is not silently converted to bf16. */
  const float f[3] = {1, 2, 3};
  build_npy(&b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n", f, sizeof f);
  char msg[512];
  assert_int_equal(parse_code(&b, want, &a, msg, sizeof msg), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(msg, "expected bf16[3]"));
  kiln_strbuf_free(&b);
  kiln_arena_destroy(&a);
}

static void test_npy_f8_needs_expected_type_and_subbyte_ints_keep_sign(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  int64_t dims[1] = {4};
  kiln_strbuf_t b = {0};
  const unsigned char f8[4] = {0x38, 0xB8, 0x00, 0x40};
  build_npy(&b, 1, "{'descr': '|V1', 'fortran_order': False, 'shape': (4,), }\n", f8, 4);
  char msg[512];
  assert_int_equal(parse_code(&b, NULL, &a, msg, sizeof msg), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(msg, "expected element type"));
  kiln_shape_t *e4m3 = kiln_shape_make_array(&a, KILN_F8E4M3FN, 1, dims);
  kiln_literal_t *r = NULL;
  assert_null(kiln_npy_parse(b.data, b.len, e4m3, "f8", &a, &r));
  assert_true(kiln_literal_get_f64(r, 0) == 1.0);
  assert_true(kiln_literal_get_f64(r, 1) == -1.0);
  assert_true(kiln_literal_get_f64(r, 3) == 2.0);
  kiln_strbuf_free(&b);

  /* s4 -1 is the byte 0xff in the file. */
  kiln_shape_t *s4 = kiln_shape_make_array(&a, KILN_S4, 1, dims);
  kiln_literal_t *l = kiln_literal_make(&a, s4);
  const int64_t vals[4] = {-8, -1, 0, 7};
  for (int i = 0; i < 4; i++) kiln_literal_set_s64(l, i, vals[i]);
  assert_null(kiln_npy_serialize(&b, l));
  assert_non_null(strstr(b.data + 10, "'descr': '|i1'"));
  const signed char *data = (const signed char *)b.data + b.len - 4;
  for (int i = 0; i < 4; i++) assert_int_equal(data[i], vals[i]);
  assert_null(kiln_npy_parse(b.data, b.len, s4, "s4", &a, &r));
  for (int i = 0; i < 4; i++) assert_int_equal(kiln_literal_get_s64(r, i), vals[i]);
  assert_true(kiln_literal_equal(l, r));
  kiln_strbuf_free(&b);
  /* 9 does not fit s4. */
  const signed char bad[4] = {0, 9, 0, 0};
  build_npy(&b, 1, "{'descr': '|i1', 'fortran_order': False, 'shape': (4,), }\n", bad, 4);
  assert_int_equal(parse_code(&b, s4, &a, msg, sizeof msg), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(msg, "out of range for s4"));
  kiln_strbuf_free(&b);
  /* s1 holds -1 and 0 only. */
  kiln_shape_t *s1 = kiln_shape_make_array(&a, KILN_S1, 1, dims);
  const signed char bad1[4] = {0, -1, 1, 0};
  build_npy(&b, 1, "{'descr': '|i1', 'fortran_order': False, 'shape': (4,), }\n", bad1, 4);
  assert_int_equal(parse_code(&b, s1, &a, msg, sizeof msg), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(msg, "element 2 is 1, out of range for s1"));
  kiln_strbuf_free(&b);
  kiln_arena_destroy(&a);
}

static void test_npy_fortran_order_is_transposed_to_row_major(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  /* Logical [[0,1,2],[3,4,5]] stored column-major: 0 3 1 4 2 5. */
  const int32_t col_major[6] = {0, 3, 1, 4, 2, 5};
  kiln_strbuf_t b = {0};
  build_npy(&b, 1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }\n", col_major,
            sizeof col_major);
  kiln_literal_t *r = NULL;
  assert_null(kiln_npy_parse(b.data, b.len, NULL, "f", &a, &r));
  for (int i = 0; i < 6; i++) assert_int_equal(kiln_literal_get_s64(r, i), i);
  kiln_strbuf_free(&b);
  /* Version 2.0 header and double quotes, no trailing comma. */
  build_npy(&b, 2, "{\"descr\": \"<i4\", \"shape\": (6,), \"fortran_order\": False}", col_major,
            sizeof col_major);
  assert_null(kiln_npy_parse(b.data, b.len, NULL, "v2", &a, &r));
  assert_int_equal(r->num_elements, 6);
  assert_int_equal(kiln_literal_get_s64(r, 1), 3);
  kiln_strbuf_free(&b);
  kiln_arena_destroy(&a);
}

static void test_npy_zero_element_arrays_round_trip(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  int64_t dims[2] = {0, 4};
  kiln_literal_t *l = make_filled(&a, KILN_F64, 2, dims);
  kiln_strbuf_t b = {0};
  assert_null(kiln_npy_serialize(&b, l));
  kiln_literal_t *r = NULL;
  assert_null(kiln_npy_parse(b.data, b.len, NULL, "z", &a, &r));
  assert_int_equal(r->shape->rank, 2);
  assert_int_equal(r->shape->dims[0], 0);
  assert_int_equal(r->num_elements, 0);
  kiln_strbuf_free(&b);
  kiln_arena_destroy(&a);
}

static void test_npy_malformed_headers_are_invalid_argument(void **state) {
  static const struct {
    const char *header;
    const char *message_part;
  } cases[] = {
      {"", "expected '{'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), ", "expected a string"},
      {"{'descr': '<f4', 'fortran_order': False}", "lacks 'shape'"},
      {"{'descr': '<f4', 'shape': (2,)}", "lacks 'fortran_order'"},
      {"{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", "big-endian"},
      {"{'descr': '>i8', 'fortran_order': False, 'shape': (1,), }", "big-endian"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", "structured"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", "dimension size"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", "overflows"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
       "overflows"},
      {"{'descr': '<f4', 'fortran_order': maybe, 'shape': (2,), }", "True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", "unexpected key"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", "repeats"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}", "unsupported .npy dtype"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (2,)}", "expected ':'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", "found end of header"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk", "padding"},
      {"{'descr': '<O8', 'fortran_order': False, 'shape': (2,)}", "unsupported"},
      {"{'descr': '<f3', 'fortran_order': False, 'shape': (2,)}", "unsupported"},
      {"{'descr': 'f4', 'fortran_order': False, 'shape': (2,)}", "unsupported"},
      {"{'descr': '<U10', 'fortran_order': False, 'shape': (2,)}", "unsupported"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", "',' or ')'"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", "',' or '}'"},
  };
  kiln_arena_t a;
  kiln_arena_init(&a);
  const float data[2] = {1, 2};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    kiln_strbuf_t b = {0};
    build_npy(&b, 1, cases[i].header, data, sizeof data);
    char msg[512];
    kiln_status_code_t c = parse_code(&b, NULL, &a, msg, sizeof msg);
    if (c != KILN_INVALID_ARGUMENT || !strstr(msg, cases[i].message_part))
      fail_msg("header %zu <%s>: code %d message <%s>, wanted <%s>", i, cases[i].header, c, msg,
               cases[i].message_part);
    kiln_strbuf_free(&b);
  }
  kiln_arena_destroy(&a);
}

static void test_npy_bad_preamble_and_data_sizes_are_invalid_argument(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  char msg[512];
  kiln_strbuf_t b = {0};
  kiln_strbuf_append_n(&b, "\x93NUMP", 5);
  assert_int_equal(parse_code(&b, NULL, &a, msg, sizeof msg), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(msg, "magic"));
  kiln_strbuf_free(&b);
  const char *h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
  const float data[3] = {1, 2, 3};
  build_npy(&b, 9, h, data, 8);
  assert_int_equal(parse_code(&b, NULL, &a, msg, sizeof msg), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(msg, "version 9"));
  kiln_strbuf_free(&b);
  build_npy(&b, 1, h, data, 4);
  assert_int_equal(parse_code(&b, NULL, &a, msg, sizeof msg), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(msg, "truncated .npy data"));
  kiln_strbuf_free(&b);
  build_npy(&b, 1, h, data, 12);
  assert_int_equal(parse_code(&b, NULL, &a, msg, sizeof msg), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(msg, "after its 8 bytes"));
  kiln_strbuf_free(&b);
  /* A header length past the end of the file. */
  build_npy(&b, 1, h, NULL, 0);
  b.data[8] = (char)0xff;
  b.data[9] = (char)0x7f;
  assert_int_equal(parse_code(&b, NULL, &a, msg, sizeof msg), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(msg, "truncated .npy header"));
  kiln_strbuf_free(&b);
  /* Shape mismatch against the expected shape names both. */
  build_npy(&b, 1, h, data, 8);
  int64_t d3[1] = {3};
  kiln_shape_t *want = kiln_shape_make_array(&a, KILN_F32, 1, d3);
  assert_int_equal(parse_code(&b, want, &a, msg, sizeof msg), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(msg, "'<f4' (2,)"));
  assert_non_null(strstr(msg, "expected f32[3]"));
  kiln_strbuf_free(&b);
  kiln_arena_destroy(&a);
}

/* Every truncation and every single-byte corruption of a valid file either parses or
 * fails with a status; run under ASan this checks nothing reads out of bounds. */
static void test_npy_truncated_or_corrupted_files_never_crash(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  int64_t dims[2] = {3, 2};
  kiln_literal_t *l = make_filled(&a, KILN_S16, 2, dims);
  kiln_strbuf_t good = {0};
  assert_null(kiln_npy_serialize(&good, l));
  int errors = 0;
  for (size_t n = 0; n < good.len; n++) {
    unsigned char *copy = malloc(n ? n : 1);
    memcpy(copy, good.data, n);
    kiln_literal_t *r = NULL;
    kiln_status s = kiln_npy_parse(copy, n, NULL, "cut", &a, &r);
    assert_non_null(s); /* every proper prefix is incomplete */
    assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
    kiln_status_free(s);
    free(copy);
  }
  static const unsigned char junk[] = {0, '\'', '"', '(', ')', '{', '}', ',', ':', '9', 0xff};
  for (size_t pos = 0; pos < good.len - 12; pos++) {
    for (size_t j = 0; j < sizeof junk; j++) {
      unsigned char *copy = malloc(good.len);
      memcpy(copy, good.data, good.len);
      copy[pos] = junk[j];
      kiln_literal_t *r = NULL;
      kiln_status s = kiln_npy_parse(copy, good.len, NULL, "flip", &a, &r);
      if (s) {
        errors++;
        assert_null(r);
      } else {
        assert_non_null(r);
      }
      kiln_status_free(s);
      free(copy);
    }
  }
  assert_true(errors > 0);
  kiln_strbuf_free(&good);
  kiln_arena_destroy(&a);
}

static void test_npy_files_round_trip_and_missing_file_is_not_found(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  char path[] = "/tmp/kiln_test_npy_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  int64_t dims[3] = {2, 2, 2};
  kiln_literal_t *l = make_filled(&a, KILN_C64, 3, dims);
  assert_null(kiln_npy_write_file(path, l));
  kiln_literal_t *r = NULL;
  assert_null(kiln_npy_read_file(path, l->shape, &a, &r));
  assert_true(kiln_literal_equal(l, r));
  unlink(path);
  kiln_status s = kiln_npy_read_file("/nonexistent/kiln/x.npy", NULL, &a, &r);
  assert_int_equal(kiln_status_code(s), KILN_NOT_FOUND);
  assert_null(r);
  kiln_status_free(s);
  /* Tuples cannot be written. */
  kiln_shape_t *elems[1] = {l->shape};
  kiln_literal_t *tup = kiln_literal_make(&a, kiln_shape_make_tuple(&a, 1, elems));
  kiln_strbuf_t b = {0};
  s = kiln_npy_serialize(&b, tup);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  kiln_status_free(s);
  kiln_strbuf_free(&b);
  kiln_arena_destroy(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_npy_round_trips_every_array_type),
      cmocka_unit_test(test_npy_reads_canonical_dtypes_without_expected_shape),
      cmocka_unit_test(test_npy_header_is_padded_to_64_bytes_with_numpy_text),
      cmocka_unit_test(test_npy_bf16_is_written_as_void2_and_read_from_u2_or_void2),
      cmocka_unit_test(test_npy_f8_needs_expected_type_and_subbyte_ints_keep_sign),
      cmocka_unit_test(test_npy_fortran_order_is_transposed_to_row_major),
      cmocka_unit_test(test_npy_zero_element_arrays_round_trip),
      cmocka_unit_test(test_npy_malformed_headers_are_invalid_argument),
      cmocka_unit_test(test_npy_bad_preamble_and_data_sizes_are_invalid_argument),
      cmocka_unit_test(test_npy_truncated_or_corrupted_files_never_crash),
      cmocka_unit_test(test_npy_files_round_trip_and_missing_file_is_not_found),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
