/* Tests for deterministic fake arguments (tools/common/fake_args.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/status.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "tools/common/fake_args.h"

static kiln_hlo_module_t *parse(const char *text) {
  kiln_hlo_module_t *m = NULL;
  kiln_hlo_parse_options_t po = {0};
  po.filename = "test";
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), &po, &m);
  if (s) fail_msg("parse: %s", kiln_status_message(s));
  s = kiln_hlo_module_verify(m);
  if (s) fail_msg("verify: %s", kiln_status_message(s));
  return m;
}

static size_t literal_bytes(const kiln_literal_t *l) {
  return (size_t)l->num_elements * kiln_elem_type_storage_bytes(l->shape->type);
}

static const char kMixed[] =
    "HloModule mixed\n"
    "ENTRY main {\n"
    "  a = f32[4,5] parameter(0)\n"
    "  b = s32[64] parameter(1)\n"
    "  c = pred[33] parameter(2)\n"
    "  d = bf16[2,3] parameter(3)\n"
    "  e = (f32[2], u8[40]) parameter(4)\n"
    "  f = c64[3] parameter(5)\n"
    "  ROOT t = (f32[4,5], s32[64], pred[33], bf16[2,3], (f32[2], u8[40]), c64[3]) "
    "tuple(a, b, c, d, e, f)\n"
    "}\n";

static void test_fake_args_are_deterministic_for_a_seed(void **state) {
  kiln_hlo_module_t *m = parse(kMixed);
  kiln_arena_t a;
  kiln_arena_init(&a);
  kiln_fake_args_options_t o;
  kiln_fake_args_options_init(&o);
  kiln_literal_t **x, **y, **z;
  int nx, ny, nz;
  assert_null(kiln_fake_args_make(m, &o, &a, &x, &nx));
  assert_null(kiln_fake_args_make(m, &o, &a, &y, &ny));
  o.seed = 43;
  assert_null(kiln_fake_args_make(m, &o, &a, &z, &nz));
  assert_int_equal(nx, 6);
  assert_int_equal(ny, 6);
  for (int i = 0; i < 6; i++) assert_true(kiln_literal_equal(x[i], y[i]));
  /* Another seed changes the floats. */
  assert_false(kiln_literal_equal(x[0], z[0]));
  assert_true(memcmp(x[0]->data, z[0]->data, literal_bytes(x[0])) != 0);
  /* Tuple parameter: both leaves filled. */
  assert_int_equal(x[4]->num_tuple_elements, 2);
  assert_int_equal(x[4]->tuple_elements[1]->num_elements, 40);
  /* The module can be destroyed: the literals own cloned shapes. */
  kiln_hlo_module_destroy(m);
  assert_int_equal(x[3]->shape->type, KILN_BF16);
  assert_int_equal(x[3]->shape->dims[1], 3);
  kiln_arena_destroy(&a);
}

static void test_fake_args_values_follow_the_documented_ranges(void **state) {
  kiln_hlo_module_t *m = parse(kMixed);
  kiln_arena_t a;
  kiln_arena_init(&a);
  kiln_literal_t **x;
  int n;
  assert_null(kiln_fake_args_make(m, NULL, &a, &x, &n));
  bool negative = false;
  for (int64_t i = 0; i < x[0]->num_elements; i++) {
    double v = kiln_literal_get_f64(x[0], i);
    assert_true(v >= -1.0 && v < 1.0);
    negative |= v < 0;
  }
  assert_true(negative);
  int64_t lo = 100, hi = -100;
  for (int64_t i = 0; i < x[1]->num_elements; i++) {
    int64_t v = kiln_literal_get_s64(x[1], i);
    assert_true(v >= -8 && v <= 7);
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  assert_true(lo < 0 && hi > 0);
  int trues = 0;
  for (int64_t i = 0; i < x[2]->num_elements; i++) trues += (int)kiln_literal_get_u64(x[2], i);
  assert_true(trues > 0 && trues < 33);
  for (int64_t i = 0; i < x[3]->num_elements; i++) {
    double v = kiln_literal_get_f64(x[3], i);
    assert_true(v >= -1.0 && v <= 1.0);
  }
  const kiln_literal_t *u8 = x[4]->tuple_elements[1];
  for (int64_t i = 0; i < u8->num_elements; i++) assert_true(kiln_literal_get_u64(u8, i) <= 15);
  for (int64_t i = 0; i < x[5]->num_elements; i++) {
    double re, im;
    kiln_literal_get_c128(x[5], i, &re, &im);
    assert_true(re >= -1 && re < 1 && im >= -1 && im < 1 && im != 0);
  }
  kiln_hlo_module_destroy(m);
  kiln_arena_destroy(&a);
}

static void test_fake_args_parameters_draw_from_independent_streams(void **state) {
  kiln_hlo_module_t *m1 = parse(
      "HloModule m1\nENTRY main {\n  a = f32[8] parameter(0)\n  b = f32[16] parameter(1)\n"
      "  ROOT t = (f32[8], f32[16]) tuple(a, b)\n}\n");
  kiln_hlo_module_t *m2 = parse(
      "HloModule m2\nENTRY main {\n  a = f32[1000] parameter(0)\n  b = f32[16] parameter(1)\n"
      "  ROOT t = (f32[1000], f32[16]) tuple(a, b)\n}\n");
  kiln_arena_t a;
  kiln_arena_init(&a);
  kiln_literal_t *b1, *b2, *a1;
  assert_null(kiln_fake_args_make_one(m1, NULL, 1, &a, &b1));
  assert_null(kiln_fake_args_make_one(m2, NULL, 1, &a, &b2));
  assert_null(kiln_fake_args_make_one(m1, NULL, 0, &a, &a1));
  assert_true(kiln_literal_equal(b1, b2));
  assert_true(memcmp(a1->data, b1->data, literal_bytes(a1)) != 0);
  kiln_status s = kiln_fake_args_make_one(m1, NULL, 2, &a, &a1);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  kiln_status_free(s);
  kiln_hlo_module_destroy(m1);
  kiln_hlo_module_destroy(m2);
  kiln_arena_destroy(&a);
}

/* Checks every element of `l` lies in [0, max] and that more than one value occurs. */
static void assert_indices_in_range(const kiln_literal_t *l, int64_t max) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (int64_t i = 0; i < l->num_elements; i++) {
    int64_t v = kiln_literal_get_s64(l, i);
    if (v < 0 || v > max) fail_msg("index %lld out of [0, %lld]", (long long)v, (long long)max);
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (l->num_elements >= 16) assert_true(hi > lo);
}

static void test_fake_args_gather_indices_are_in_range(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule g\n"
      "ENTRY main {\n"
      "  operand = f32[10,8] parameter(0)\n"
      "  idx = s32[64,1] parameter(1)\n"
      "  ROOT g = f32[64,3,8] gather(operand, idx), offset_dims={1,2}, "
      "collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={3,8}\n"
      "}\n");
  int64_t bound = -1;
  assert_false(kiln_fake_args_index_bound(m, 0, 0, &bound));
  assert_true(kiln_fake_args_index_bound(m, 1, 0, &bound));
  assert_int_equal(bound, 7);
  kiln_arena_t a;
  kiln_arena_init(&a);
  kiln_literal_t **x;
  int n;
  assert_null(kiln_fake_args_make(m, NULL, &a, &x, &n));
  assert_indices_in_range(x[1], 7);
  /* With the analysis off, small signed values (some negative) are generated. */
  kiln_fake_args_options_t o;
  kiln_fake_args_options_init(&o);
  o.index_bounds = false;
  kiln_literal_t *raw;
  assert_null(kiln_fake_args_make_one(m, &o, 1, &a, &raw));
  bool negative = false;
  for (int64_t i = 0; i < raw->num_elements; i++) negative |= kiln_literal_get_s64(raw, i) < 0;
  assert_true(negative);
  kiln_hlo_module_destroy(m);
  kiln_arena_destroy(&a);
}

static void test_fake_args_dynamic_slice_starts_through_convert_and_reshape(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule ds\n"
      "ENTRY main {\n"
      "  operand = f32[16,16] parameter(0)\n"
      "  i = s32[] parameter(1)\n"
      "  j8 = u8[1] parameter(2)\n"
      "  jr = u8[] reshape(j8)\n"
      "  j = s32[] convert(jr)\n"
      "  ROOT ds = f32[4,10] dynamic-slice(operand, i, j), dynamic_slice_sizes={4,10}\n"
      "}\n");
  int64_t b1 = -1, b2 = -1;
  assert_true(kiln_fake_args_index_bound(m, 1, 0, &b1));
  assert_true(kiln_fake_args_index_bound(m, 2, 0, &b2));
  assert_int_equal(b1, 12);
  assert_int_equal(b2, 6);
  kiln_arena_t a;
  kiln_arena_init(&a);
  for (uint64_t seed = 0; seed < 32; seed++) {
    kiln_fake_args_options_t o;
    kiln_fake_args_options_init(&o);
    o.seed = seed;
    kiln_literal_t **x;
    int n;
    assert_null(kiln_fake_args_make(m, &o, &a, &x, &n));
    assert_indices_in_range(x[1], 12);
    assert_indices_in_range(x[2], 6);
  }
  kiln_hlo_module_destroy(m);
  kiln_arena_destroy(&a);
}

static void test_fake_args_follow_tuples_and_fusions_to_dynamic_update_slice(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule dus\n"
      "fused {\n"
      "  p0 = f32[10] parameter(0)\n"
      "  p1 = f32[3] parameter(1)\n"
      "  p2 = s32[] parameter(2)\n"
      "  ROOT d = f32[10] dynamic-update-slice(p0, p1, p2)\n"
      "}\n"
      "ENTRY main {\n"
      "  t = (f32[10], s32[], f32[3]) parameter(0)\n"
      "  buf = f32[10] get-tuple-element(t), index=0\n"
      "  start = s32[] get-tuple-element(t), index=1\n"
      "  upd = f32[3] get-tuple-element(t), index=2\n"
      "  ROOT f = f32[10] fusion(buf, upd, start), kind=kLoop, calls=fused\n"
      "}\n");
  int64_t b = -1;
  assert_false(kiln_fake_args_index_bound(m, 0, 0, &b));
  assert_true(kiln_fake_args_index_bound(m, 0, 1, &b));
  assert_int_equal(b, 7);
  assert_false(kiln_fake_args_index_bound(m, 0, 2, &b));
  assert_false(kiln_fake_args_index_bound(m, 0, 3, &b)); /* no such leaf */
  kiln_hlo_module_destroy(m);
}

static void test_fake_args_scatter_indices_respect_the_update_window(void **state) {
  kiln_hlo_module_t *m = parse(
      "HloModule sc\n"
      "add {\n"
      "  x = f32[] parameter(0)\n"
      "  y = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(x, y)\n"
      "}\n"
      "ENTRY main {\n"
      "  operand = f32[6,9] parameter(0)\n"
      "  idx = s64[20,1] parameter(1)\n"
      "  upd = f32[20,6,4] parameter(2)\n"
      "  ROOT s = f32[6,9] scatter(operand, idx, upd), update_window_dims={1,2}, "
      "inserted_window_dims={}, scatter_dims_to_operand_dims={1}, index_vector_dim=1, "
      "to_apply=add\n"
      "}\n");
  int64_t b = -1;
  assert_true(kiln_fake_args_index_bound(m, 1, 0, &b));
  assert_int_equal(b, 5); /* operand dim 1 (9) minus window 4 */
  assert_false(kiln_fake_args_index_bound(m, 2, 0, &b));
  kiln_arena_t a;
  kiln_arena_init(&a);
  kiln_literal_t *idx;
  assert_null(kiln_fake_args_make_one(m, NULL, 1, &a, &idx));
  assert_indices_in_range(idx, 5);
  kiln_hlo_module_destroy(m);
  kiln_arena_destroy(&a);
}

/* Reduction inits get the reducer's identity (fake_args.h), also through a fusion's call
 * boundary; an unrecognized reducer's init keeps its random value. */
static const char kInits[] =
    "HloModule inits\n"
    "add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }\n"
    "maxf { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] maximum(b, a) }\n"
    "maxh { a = bf16[] parameter(0)  b = bf16[] parameter(1)  ROOT r = bf16[] maximum(a, b) }\n"
    "max8 { a = f8e4m3fn[] parameter(0)  b = f8e4m3fn[] parameter(1)\n"
    "  ROOT r = f8e4m3fn[] maximum(a, b) }\n"
    "mins { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT r = s32[] minimum(a, b) }\n"
    "mulu { a = u8[] parameter(0)  b = u8[] parameter(1)  ROOT r = u8[] multiply(a, b) }\n"
    "andp { a = pred[] parameter(0)  b = pred[] parameter(1)  ROOT r = pred[] and(a, b) }\n"
    "sub { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] subtract(a, b) }\n"
    "ge { a = f32[] parameter(0)  b = f32[] parameter(1)\n"
    "  ROOT r = pred[] compare(a, b), direction=GE }\n"
    "fused { x = u8[8] parameter(0)  i = u8[] parameter(1)\n"
    "  ROOT r = u8[] reduce(x, i), dimensions={0}, to_apply=mulu }\n"
    "ENTRY main {\n"
    "  x = f32[4,8] parameter(0)\n"
    "  i0 = f32[] parameter(1)\n"
    "  i1 = f32[] parameter(2)\n"
    "  h = bf16[8] parameter(3)\n"
    "  i2 = bf16[] parameter(4)\n"
    "  e = f8e4m3fn[8] parameter(5)\n"
    "  i3 = f8e4m3fn[] parameter(6)\n"
    "  s = s32[8] parameter(7)\n"
    "  i4 = s32[] parameter(8)\n"
    "  u = u8[8] parameter(9)\n"
    "  i5 = u8[] parameter(10)\n"
    "  p = pred[8] parameter(11)\n"
    "  i6 = pred[] parameter(12)\n"
    "  i7 = f32[] parameter(13)\n"
    "  src = f32[2,4] parameter(14)\n"
    "  i8 = f32[] parameter(15)\n"
    "  r0 = f32[4] reduce(x, i0), dimensions={1}, to_apply=add\n"
    "  r1 = f32[4,4] reduce-window(x, i1), window={size=1x2 stride=1x2}, to_apply=maxf\n"
    "  r2 = bf16[] reduce(h, i2), dimensions={0}, to_apply=maxh\n"
    "  r3 = f8e4m3fn[] reduce(e, i3), dimensions={0}, to_apply=max8\n"
    "  r4 = s32[] reduce(s, i4), dimensions={0}, to_apply=mins\n"
    "  r5 = u8[] fusion(u, i5), kind=kInput, calls=fused\n"
    "  r6 = pred[] reduce(p, i6), dimensions={0}, to_apply=andp\n"
    "  r7 = f32[4] reduce(x, i7), dimensions={1}, to_apply=sub\n"
    "  r8 = f32[4,8] select-and-scatter(x, src, i8), window={size=2x2 stride=2x2}, "
    "select=ge, scatter=add\n"
    "  ROOT t = (f32[4], f32[4,4], bf16[], f8e4m3fn[], s32[], u8[], pred[], f32[4], f32[4,8]) "
    "tuple(r0, r1, r2, r3, r4, r5, r6, r7, r8)\n"
    "}\n";

static void test_fake_args_reduction_inits_get_the_reducer_identity(void **state) {
  kiln_hlo_module_t *m = parse(kInits);
  kiln_arena_t a;
  kiln_arena_init(&a);
  kiln_literal_t **x;
  int n;
  assert_null(kiln_fake_args_make(m, NULL, &a, &x, &n));
  assert_int_equal(n, 16);
  assert_true(kiln_literal_get_f64(x[1], 0) == 0.0);          /* add */
  assert_true(kiln_literal_get_f64(x[2], 0) == -INFINITY);    /* maximum, f32 */
  assert_true(kiln_literal_get_f64(x[4], 0) == -INFINITY);    /* maximum, bf16 */
  assert_true(kiln_literal_get_f64(x[6], 0) == -448.0);       /* f8e4m3fn has no inf */
  assert_int_equal(kiln_literal_get_s64(x[8], 0), INT32_MAX); /* minimum, s32 */
  assert_int_equal(kiln_literal_get_u64(x[10], 0), 1);        /* multiply, through a fusion */
  assert_int_equal(kiln_literal_get_u64(x[12], 0), 1);        /* and: true */
  double sub = kiln_literal_get_f64(x[13], 0);                /* unrecognized: random */
  assert_true(sub >= -1.0 && sub < 1.0 && sub != 0.0);
  assert_true(kiln_literal_get_f64(x[15], 0) == 0.0); /* select-and-scatter's add */
  /* The reduced operands themselves stay random. */
  assert_true(kiln_literal_get_f64(x[0], 0) != 0.0);
  kiln_arena_destroy(&a);
  kiln_hlo_module_destroy(m);
}

/* Inputs past the memory available are refused before anything is allocated: the whole
 * set (kiln_fake_args_make, kiln_fake_args_check_memory, also as copies) and a parameter of
 * its own (kiln_fake_args_make_one), with RESOURCE_EXHAUSTED naming the largest parameter;
 * a small parameter beside a huge one is still made alone. */
static void test_fake_args_past_the_memory_available_are_refused(void **state) {
  (void)state;
  assert_true(kiln_fake_args_memory_available() > 0); /* Linux: /proc/meminfo */
  kiln_hlo_module_t *m = parse(
      "HloModule huge\nENTRY main {\n  big = f32[1000000,1000000,1000] parameter(0)\n"
      "  small = f32[4] parameter(1)\n  ROOT r = f32[4] negate(small)\n}\n");
  kiln_arena_t a;
  kiln_arena_init(&a);
  kiln_literal_t **args = NULL, *one = NULL;
  int n = -1;
  kiln_status s = kiln_fake_args_make(m, NULL, &a, &args, &n);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_RESOURCE_EXHAUSTED);
  assert_non_null(
      strstr(kiln_status_message(s), "largest: parameter 0, f32[1000000,1000000,1000]"));
  assert_non_null(strstr(kiln_status_message(s), "of memory available on this machine"));
  assert_null(args);
  kiln_status_free(s);
  s = kiln_fake_args_make_one(m, NULL, 0, &a, &one);
  assert_int_equal(kiln_status_code(s), KILN_RESOURCE_EXHAUSTED);
  assert_null(one);
  kiln_status_free(s);
  assert_null(kiln_fake_args_make_one(m, NULL, 1, &a, &one));
  assert_int_equal(one->num_elements, 4);
  kiln_hlo_module_destroy(m);
  /* A small module fits, and so do a few copies of it; copies past memory do not. */
  m = parse(kMixed);
  assert_null(kiln_fake_args_check_memory(m, 1));
  assert_null(kiln_fake_args_check_memory(m, 64));
  s = kiln_fake_args_check_memory(m, 1 << 30);
  assert_int_equal(kiln_status_code(s), KILN_RESOURCE_EXHAUSTED);
  assert_non_null(strstr(kiln_status_message(s), "copies"));
  kiln_status_free(s);
  kiln_hlo_module_destroy(m);
  kiln_arena_destroy(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fake_args_are_deterministic_for_a_seed),
      cmocka_unit_test(test_fake_args_past_the_memory_available_are_refused),
      cmocka_unit_test(test_fake_args_reduction_inits_get_the_reducer_identity),
      cmocka_unit_test(test_fake_args_values_follow_the_documented_ranges),
      cmocka_unit_test(test_fake_args_parameters_draw_from_independent_streams),
      cmocka_unit_test(test_fake_args_gather_indices_are_in_range),
      cmocka_unit_test(test_fake_args_dynamic_slice_starts_through_convert_and_reshape),
      cmocka_unit_test(test_fake_args_follow_tuples_and_fusions_to_dynamic_update_slice),
      cmocka_unit_test(test_fake_args_scatter_indices_respect_the_update_window),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
