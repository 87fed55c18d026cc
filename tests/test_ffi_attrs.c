/* The backend_config decoder (ffi/ffi_attrs.c): every attribute kind XLA turns into FFI
 * attributes, names sorted as the C++ binding expects, malformed dictionaries rejected with
 * the offset and what was expected, and every typed-FFI backend_config in the corpus. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "ffi/ffi_attrs.h"

static kiln_ffi_attrs_t *parse_ok(const char *text) {
  kiln_ffi_attrs_t *a = NULL;
  kiln_status s = kiln_ffi_attrs_parse(text, strlen(text), &a);
  if (s) fail_msg("parse of '%s' failed: %s", text, kiln_status_message(s));
  return a;
}

static int find(const XLA_FFI_Attrs *d, const char *name) {
  for (int64_t i = 0; i < d->size; i++)
    if (d->names[i]->len == strlen(name) && memcmp(d->names[i]->ptr, name, d->names[i]->len) == 0)
      return (int)i;
  fail_msg("no attribute '%s'", name);
  return -1;
}

static const XLA_FFI_Scalar *scalar(const XLA_FFI_Attrs *d, const char *name, XLA_FFI_DataType dt) {
  int i = find(d, name);
  assert_int_equal(d->types[i], XLA_FFI_AttrType_SCALAR);
  const XLA_FFI_Scalar *s = d->attrs[i];
  assert_int_equal(s->dtype, dt);
  return s;
}

static void test_scalars_of_every_width_bool_and_defaults(void **state) {
  (void)state;
  kiln_ffi_attrs_t *a = parse_ok(
      "{attr_i32 = 42 : i32, attr_f32 = 1.5 : f32, i8 = -128 : i8, i16 = -2 : si16, "
      "i64 = 9223372036854775807 : i64, u8 = 255 : ui8, u16 = 7 : ui16, u32 = 0xFFFFFFFF : ui32, "
      "u64 = 18446744073709551615 : ui64, untyped_int = -5, untyped_float = 2.5e-1, "
      "attr_bool = true, off = false, one = 1 : i1, hexf = 0x3FC00000 : f32, "
      "d = 0.000000e+00 : f64}");
  const XLA_FFI_Attrs *d = kiln_ffi_attrs_get(a);
  assert_int_equal(d->size, 16);
  assert_int_equal(*(int32_t *)scalar(d, "attr_i32", XLA_FFI_DataType_S32)->value, 42);
  assert_true(*(float *)scalar(d, "attr_f32", XLA_FFI_DataType_F32)->value == 1.5f);
  assert_int_equal(*(int8_t *)scalar(d, "i8", XLA_FFI_DataType_S8)->value, -128);
  assert_int_equal(*(int16_t *)scalar(d, "i16", XLA_FFI_DataType_S16)->value, -2);
  assert_int_equal(*(int64_t *)scalar(d, "i64", XLA_FFI_DataType_S64)->value, INT64_MAX);
  assert_int_equal(*(uint8_t *)scalar(d, "u8", XLA_FFI_DataType_U8)->value, 255);
  assert_int_equal(*(uint16_t *)scalar(d, "u16", XLA_FFI_DataType_U16)->value, 7);
  assert_int_equal(*(uint32_t *)scalar(d, "u32", XLA_FFI_DataType_U32)->value, 0xFFFFFFFFu);
  assert_true(*(uint64_t *)scalar(d, "u64", XLA_FFI_DataType_U64)->value == UINT64_MAX);
  assert_int_equal(*(int64_t *)scalar(d, "untyped_int", XLA_FFI_DataType_S64)->value, -5);
  assert_true(*(double *)scalar(d, "untyped_float", XLA_FFI_DataType_F64)->value == 0.25);
  assert_true(*(bool *)scalar(d, "attr_bool", XLA_FFI_DataType_PRED)->value);
  assert_false(*(bool *)scalar(d, "off", XLA_FFI_DataType_PRED)->value);
  assert_true(*(bool *)scalar(d, "one", XLA_FFI_DataType_PRED)->value);
  assert_true(*(float *)scalar(d, "hexf", XLA_FFI_DataType_F32)->value == 1.5f);
  assert_true(*(double *)scalar(d, "d", XLA_FFI_DataType_F64)->value == 0.0);
  kiln_ffi_attrs_destroy(a);
}

static void test_names_are_sorted_bytewise_at_every_level(void **state) {
  (void)state;
  kiln_ffi_attrs_t *a =
      parse_ok("{b = 1, a = 2, \"A quoted\" = 3, ab = {z = 1, y = {q = 1, p = 2}}, aa = 4}");
  const XLA_FFI_Attrs *d = kiln_ffi_attrs_get(a);
  const char *want[] = {"A quoted", "a", "aa", "ab", "b"};
  assert_int_equal(d->size, 5);
  for (int i = 0; i < 5; i++) {
    assert_int_equal(d->names[i]->len, strlen(want[i]));
    assert_memory_equal(d->names[i]->ptr, want[i], strlen(want[i]));
  }
  assert_int_equal(d->types[3], XLA_FFI_AttrType_DICTIONARY);
  const XLA_FFI_Attrs *ab = d->attrs[3];
  assert_int_equal(ab->struct_size, XLA_FFI_Attrs_STRUCT_SIZE);
  assert_memory_equal(ab->names[0]->ptr, "y", 1);
  const XLA_FFI_Attrs *y = ab->attrs[0];
  assert_memory_equal(y->names[0]->ptr, "p", 1);
  assert_int_equal(*(int64_t *)((XLA_FFI_Scalar *)y->attrs[0])->value, 2);
  kiln_ffi_attrs_destroy(a);
}

static void test_arrays_dense_elements_and_strings(void **state) {
  (void)state;
  kiln_ffi_attrs_t *a = parse_ok(
      "{attr_arr = array<i64: 1, 2, 3>, f = array<f32: 0.5, -1>, e = array<i32>, "
      "splat = dense<42> : tensor<i32>, grid = dense<[[1, 2], [3, 4]]> : tensor<2x2xui16>, "
      "fill = dense<7> : tensor<3xi8>, "
      "attr_str = \"hello\", esc = \"a\\\"b\\\\c\\n\\7F\\00z\", attr_dict = {a = 1 : i64}}");
  const XLA_FFI_Attrs *d = kiln_ffi_attrs_get(a);
  const XLA_FFI_Array *arr = d->attrs[find(d, "attr_arr")];
  assert_int_equal(d->types[find(d, "attr_arr")], XLA_FFI_AttrType_ARRAY);
  assert_int_equal(arr->dtype, XLA_FFI_DataType_S64);
  assert_int_equal(arr->size, 3);
  assert_int_equal(((int64_t *)arr->data)[2], 3);
  const XLA_FFI_Array *f = d->attrs[find(d, "f")];
  assert_int_equal(f->dtype, XLA_FFI_DataType_F32);
  assert_true(((float *)f->data)[1] == -1.0f);
  assert_int_equal(((XLA_FFI_Array *)d->attrs[find(d, "e")])->size, 0);
  const XLA_FFI_Array *splat = d->attrs[find(d, "splat")];
  assert_int_equal(splat->dtype, XLA_FFI_DataType_S32);
  assert_int_equal(splat->size, 1);
  assert_int_equal(((int32_t *)splat->data)[0], 42);
  const XLA_FFI_Array *grid = d->attrs[find(d, "grid")];
  assert_int_equal(grid->dtype, XLA_FFI_DataType_U16);
  assert_int_equal(grid->size, 4);
  assert_int_equal(((uint16_t *)grid->data)[3], 4);
  const XLA_FFI_Array *fill = d->attrs[find(d, "fill")];
  assert_int_equal(fill->size, 3);
  assert_int_equal(((int8_t *)fill->data)[2], 7);
  const XLA_FFI_ByteSpan *str = d->attrs[find(d, "attr_str")];
  assert_int_equal(d->types[find(d, "attr_str")], XLA_FFI_AttrType_STRING);
  assert_int_equal(str->len, 5);
  assert_memory_equal(str->ptr, "hello", 5);
  const XLA_FFI_ByteSpan *esc = d->attrs[find(d, "esc")];
  assert_int_equal(esc->len, 9);
  assert_memory_equal(esc->ptr, "a\"b\\c\n\x7f\0z", 9);
  kiln_ffi_attrs_destroy(a);
}

static void test_empty_inputs_are_empty_dictionaries(void **state) {
  (void)state;
  const char *empties[] = {"", "  ", "{}", " { } "};
  for (int i = 0; i < 4; i++) {
    kiln_ffi_attrs_t *a = parse_ok(empties[i]);
    assert_int_equal(kiln_ffi_attrs_get(a)->size, 0);
    kiln_ffi_attrs_destroy(a);
  }
}

static void expect_malformed(const char *text, const char *needle) {
  kiln_ffi_attrs_t *a = (kiln_ffi_attrs_t *)1;
  kiln_status s = kiln_ffi_attrs_parse(text, strlen(text), &a);
  if (!s) fail_msg("'%s' parsed but should not", text);
  assert_null(a);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  if (!strstr(kiln_status_message(s), needle))
    fail_msg("'%s': message '%s' lacks '%s'", text, kiln_status_message(s), needle);
  kiln_status_free(s);
}

static void test_malformed_dictionaries_name_offset_and_expectation(void **state) {
  (void)state;
  expect_malformed(
      "{a = 1",
      "offset 6 (line 1, column 7): expected ',' or '}' after an attribute, got end of input");
  expect_malformed("{a 1}", "offset 3 (line 1, column 4): expected '=' after the attribute name");
  expect_malformed("{a = }", "offset 5 (line 1, column 6): expected an attribute value");
  expect_malformed("a = 1",
                   "offset 0 (line 1, column 1): expected '{' opening a dictionary, got 'a'");
  expect_malformed("{a = 1} x",
                   "offset 8 (line 1, column 9): expected end of input after the dictionary");
  expect_malformed("{a = 1,\n b = 2 : i3}",
                   "offset 17 (line 2, column 10): expected a type XLA FFI");
  expect_malformed("{a = 300 : i8}",
                   "offset 5 (line 1, column 6): expected a value that fits the integer type");
  expect_malformed("{a = -1 : ui32}", "expected a non-negative value for an unsigned type");
  expect_malformed("{a = 1.5 : i32}", "expected an integer literal for an integer type");
  expect_malformed("{a = 1, a = 2}",
                   "offset 8 (line 1, column 9): expected a name not used before");
  expect_malformed("{s = \"open}", "expected a closing '\"'");
  expect_malformed("{s = \"bad \\q\"}", "expected an escape");
  expect_malformed("{a = array<i1: true>}", "expected an array element type XLA FFI supports");
  expect_malformed("{a = array<i64: 1 2>}", "expected ',' or '>' in array<...>");
  expect_malformed("{a = dense<[1, 2, 3]> : tensor<2xi32>}",
                   "as many elements as the dense<...> list");
  expect_malformed("{a = dense<1> : tensor<99999999999xi32>}", "a tensor of at most");
  expect_malformed("{a = 1 : f16}", "expected a type XLA FFI attributes support");
  expect_malformed("{a = 99999999999999999999}", "an integer that fits in 64 bits");
  expect_malformed("{unit}", "XLA FFI has no unit attributes");
  expect_malformed("{a = @sym}", "got '@'");
  expect_malformed("{a = \"x\x01\"", "got end of input");
  /* Deep nesting is refused, not a stack overflow. */
  char deep[400];
  size_t n = 0;
  for (int i = 0; i < 100; i++) n += (size_t)snprintf(deep + n, sizeof(deep) - n, "{a=");
  expect_malformed(deep, "nested at most 64 deep");
}

static void test_builder_rejects_duplicates_at_finalize(void **state) {
  (void)state;
  kiln_ffi_attrs_t *a = kiln_ffi_attrs_create();
  int32_t v = 1;
  assert_null(
      kiln_ffi_dict_add_scalar(a, kiln_ffi_attrs_root(a), "x", 1, XLA_FFI_DataType_S32, &v));
  assert_null(
      kiln_ffi_dict_add_scalar(a, kiln_ffi_attrs_root(a), "x", 1, XLA_FFI_DataType_S32, &v));
  kiln_status s = kiln_ffi_attrs_finalize(a);
  assert_non_null(strstr(kiln_status_message(s), "duplicate attribute name 'x'"));
  kiln_status_free(s);
  assert_null(kiln_ffi_attrs_get(a));
  s = kiln_ffi_dict_add_scalar(a, kiln_ffi_attrs_root(a), "y", 1, XLA_FFI_DataType_S4, &v);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  kiln_status_free(s);
  kiln_ffi_attrs_destroy(a);
}

/* The dictionary after backend_config= on a line: {...} (quotes and escapes respected) or the
 * HLO string form "...". Returns a heap copy or NULL. */
static char *extract_backend_config(const char *line) {
  const char *p = strstr(line, "backend_config=");
  if (!p) return NULL;
  p += strlen("backend_config=");
  kiln_strbuf_t b = {0};
  if (*p == '"') {
    for (p++; *p && *p != '"'; p++) {
      if (*p == '\\' && p[1]) p++;
      kiln_strbuf_append_char(&b, *p);
    }
    return kiln_strbuf_take(&b);
  }
  if (*p != '{') return NULL;
  int depth = 0;
  bool in_str = false;
  const char *s = p;
  for (; *p; p++) {
    if (in_str) {
      if (*p == '\\' && p[1])
        p++;
      else if (*p == '"')
        in_str = false;
      continue;
    }
    if (*p == '"') in_str = true;
    if (*p == '{') depth++;
    if (*p == '}' && --depth == 0) break;
  }
  if (!*p) return NULL;
  kiln_strbuf_append_n(&b, s, (size_t)(p - s + 1));
  return kiln_strbuf_take(&b);
}

static void test_every_typed_ffi_backend_config_in_the_corpus(void **state) {
  (void)state;
  const char *corpus = getenv("KILN_CORPUS_DIR");
  char dir[1024];
  snprintf(dir, sizeof(dir), "%s/xla", corpus ? corpus : KILN_CORPUS_DIR);
  DIR *dp = opendir(dir);
  if (!dp) skip();
  int ok = 0, rejected = 0;
  struct dirent *de;
  while ((de = readdir(dp))) {
    if (!kiln_str_ends_with(de->d_name, ".hlo")) continue;
    char path[2048];
    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
    char *text = NULL;
    size_t len = 0;
    kiln_status rs = kiln_read_file(path, &text, &len);
    if (rs) {
      kiln_status_free(rs);
      continue;
    }
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
      if (!strstr(line, "API_VERSION_TYPED_FFI")) continue;
      char *cfg = extract_backend_config(line);
      if (!cfg) continue;
      kiln_ffi_attrs_t *a = NULL;
      kiln_status s = kiln_ffi_attrs_parse(cfg, strlen(cfg), &a);
      if (s) {
        /* XLA refuses these too: MLIR array and type attributes are no FFI attributes. */
        if (!strstr(line, "mhlo.uniform_")) fail_msg("%s: %s", de->d_name, kiln_status_message(s));
        assert_non_null(strstr(kiln_status_message(s),
                               "offset 7 (line 1, column 8): expected an attribute value"));
        rejected++;
        kiln_status_free(s);
      } else {
        assert_true(kiln_ffi_attrs_get(a)->size >= 0);
        ok++;
      }
      kiln_ffi_attrs_destroy(a);
      kiln_free(cfg);
    }
    kiln_free(text);
  }
  closedir(dp);
  printf("corpus typed-FFI backend_configs: %d decoded, %d rejected (mhlo.uniform_*)\n", ok,
         rejected);
  assert_true(ok >= 19);
  assert_int_equal(rejected, 2);
}

static void test_real_transformer_engine_config_decodes(void **state) {
  (void)state;
  kiln_ffi_attrs_t *a = parse_ok(
      "{attn_heads = 64 : i64, bias_batch = 0 : i64, bias_heads = 0 : i64, bias_type = 0 : i64, "
      "deterministic = false, dropout_probability = 0.000000e+00 : f64, input_batch = 2 : i64, "
      "is_training = true, kv_max_seqlen = 8192 : i64, mask_type = 3 : i64, "
      "max_segments_per_seq = 1 : i64, num_gqa_groups = 8 : i64, q_max_seqlen = 8192 : i64, "
      "qk_head_dim = 128 : i64, qkv_layout = 9 : i64, scaling_factor = 1.000000e+00 : f64, "
      "v_head_dim = 128 : i64, window_size_left = -1 : i64, window_size_right = -1 : i64}");
  const XLA_FFI_Attrs *d = kiln_ffi_attrs_get(a);
  assert_int_equal(d->size, 19);
  assert_int_equal(*(int64_t *)scalar(d, "window_size_left", XLA_FFI_DataType_S64)->value, -1);
  assert_false(*(bool *)scalar(d, "deterministic", XLA_FFI_DataType_PRED)->value);
  assert_true(*(double *)scalar(d, "scaling_factor", XLA_FFI_DataType_F64)->value == 1.0);
  kiln_ffi_attrs_destroy(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scalars_of_every_width_bool_and_defaults),
      cmocka_unit_test(test_names_are_sorted_bytewise_at_every_level),
      cmocka_unit_test(test_arrays_dense_elements_and_strings),
      cmocka_unit_test(test_empty_inputs_are_empty_dictionaries),
      cmocka_unit_test(test_malformed_dictionaries_name_offset_and_expectation),
      cmocka_unit_test(test_builder_rejects_duplicates_at_finalize),
      cmocka_unit_test(test_every_typed_ffi_backend_config_in_the_corpus),
      cmocka_unit_test(test_real_transformer_engine_config_decodes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
