/* Literals: creation, typed get/set per element type (wrapping, sign extension, RNE),
 * bitwise equality and HLO text printing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/hlo/literal.h"
#include "compiler/hlo/numeric.h"

typedef struct {
  kiln_arena_t arena;
  kiln_strbuf_t buf;
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  kiln_arena_init(&f->arena);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  kiln_arena_destroy(&f->arena);
  kiln_strbuf_free(&f->buf);
  free(f);
  return 0;
}

static kiln_literal_t *make(fixture_t *f, kiln_elem_type_t t, int rank, const int64_t *dims) {
  kiln_shape_t *s = kiln_shape_make_array(&f->arena, t, rank, dims);
  kiln_literal_t *l = kiln_literal_make(&f->arena, s);
  assert_non_null(l);
  return l;
}

static kiln_literal_t *make1(fixture_t *f, kiln_elem_type_t t, int64_t n) {
  return make(f, t, 1, &n);
}

static const char *print(fixture_t *f, const kiln_literal_t *l) {
  kiln_strbuf_free(&f->buf);
  kiln_literal_print(&f->buf, l);
  return kiln_strbuf_cstr(&f->buf);
}

static void test_make_is_zero_filled_and_sized_by_storage(void **state) {
  fixture_t *f = *state;
  int64_t dims[2] = {2, 3};
  kiln_literal_t *l = make(f, KILN_C64, 2, dims);
  assert_int_equal(l->num_elements, 6);
  for (int i = 0; i < 6 * 8; i++) assert_int_equal(((uint8_t *)l->data)[i], 0);
  kiln_literal_t *s4 = make1(f, KILN_S4, 5);
  assert_int_equal(s4->num_elements, 5);
  kiln_shape_t *scalar = kiln_shape_make_scalar(&f->arena, KILN_F32);
  kiln_literal_t *sc = kiln_literal_make(&f->arena, scalar);
  assert_int_equal(sc->num_elements, 1);
  assert_true(kiln_literal_get_f64(sc, 0) == 0);
}

static void test_make_fails_when_arena_refuses(void **state) {
  (void)state;
  kiln_arena_t a;
  kiln_arena_init(&a);
  a.limit = 4096;
  int64_t big = 1 << 20;
  kiln_shape_t *s = kiln_shape_make_array(&a, KILN_F32, 1, &big);
  assert_null(kiln_literal_make(&a, s));
  int64_t huge[2] = {INT64_MAX / 2, 4};
  kiln_shape_t *h = kiln_shape_make_array(&a, KILN_F64, 2, huge);
  assert_null(kiln_literal_make(&a, h));
  kiln_arena_destroy(&a);
}

static void test_tuple_literal_holds_element_literals(void **state) {
  fixture_t *f = *state;
  kiln_shape_t *e[2] = {kiln_shape_make_scalar(&f->arena, KILN_S32),
                        kiln_shape_make_scalar(&f->arena, KILN_PRED)};
  kiln_literal_t *t = kiln_literal_make(&f->arena, kiln_shape_make_tuple(&f->arena, 2, e));
  assert_int_equal(t->num_tuple_elements, 2);
  kiln_literal_set_s64(t->tuple_elements[0], 0, -7);
  kiln_literal_set_s64(t->tuple_elements[1], 0, 1);
  assert_string_equal(print(f, t), "( -7, true )");
  kiln_literal_t *empty = kiln_literal_make(&f->arena, kiln_shape_make_tuple(&f->arena, 0, NULL));
  assert_string_equal(print(f, empty), "()");
}

static void test_integer_sets_wrap_to_type_width(void **state) {
  fixture_t *f = *state;
  kiln_literal_t *s8 = make1(f, KILN_S8, 3);
  kiln_literal_set_s64(s8, 0, 200);
  assert_int_equal(kiln_literal_get_s64(s8, 0), -56);
  kiln_literal_set_s64(s8, 1, -129);
  assert_int_equal(kiln_literal_get_s64(s8, 1), 127);
  kiln_literal_set_f64(s8, 2, 300.7); /* trunc to 300, wrap to 44 */
  assert_int_equal(kiln_literal_get_s64(s8, 2), 44);

  kiln_literal_t *u16 = make1(f, KILN_U16, 2);
  kiln_literal_set_s64(u16, 0, -1);
  assert_int_equal(kiln_literal_get_u64(u16, 0), 65535);
  kiln_literal_set_f64(u16, 1, -1.9); /* trunc to -1 -> 65535 */
  assert_int_equal(kiln_literal_get_u64(u16, 1), 65535);

  kiln_literal_t *s4 = make1(f, KILN_S4, 3);
  kiln_literal_set_s64(s4, 0, 7);
  kiln_literal_set_s64(s4, 1, 8);  /* wraps to -8 */
  kiln_literal_set_s64(s4, 2, -1);
  assert_int_equal(kiln_literal_get_s64(s4, 0), 7);
  assert_int_equal(kiln_literal_get_s64(s4, 1), -8);
  assert_int_equal(kiln_literal_get_s64(s4, 2), -1);
  assert_int_equal(((uint8_t *)s4->data)[2], 0xF); /* only the low 4 bits are stored */
  assert_true(kiln_literal_get_f64(s4, 1) == -8);

  kiln_literal_t *s2 = make1(f, KILN_S2, 2);
  kiln_literal_set_s64(s2, 0, 2);
  kiln_literal_set_s64(s2, 1, 5);
  assert_int_equal(kiln_literal_get_s64(s2, 0), -2);
  assert_int_equal(kiln_literal_get_s64(s2, 1), 1);

  /* XLA's 1-bit integers: s1 holds -1 and 0, u1 0 and 1, in bit 0 of a byte. */
  kiln_literal_t *s1 = make1(f, KILN_S1, 3);
  kiln_literal_set_s64(s1, 0, 1);
  kiln_literal_set_s64(s1, 1, 2);
  kiln_literal_set_s64(s1, 2, -3);
  assert_int_equal(kiln_literal_get_s64(s1, 0), -1);
  assert_int_equal(kiln_literal_get_s64(s1, 1), 0);
  assert_int_equal(kiln_literal_get_s64(s1, 2), -1);
  assert_int_equal(((uint8_t *)s1->data)[0], 1);
  assert_true(kiln_literal_get_f64(s1, 2) == -1);
  kiln_literal_t *u1 = make1(f, KILN_U1, 2);
  kiln_literal_set_s64(u1, 0, -1);
  kiln_literal_set_u64(u1, 1, 6);
  assert_int_equal(kiln_literal_get_u64(u1, 0), 1);
  assert_int_equal(kiln_literal_get_u64(u1, 1), 0);

  kiln_literal_t *u4 = make1(f, KILN_U4, 1);
  kiln_literal_set_u64(u4, 0, 17);
  assert_int_equal(kiln_literal_get_u64(u4, 0), 1);
  kiln_literal_t *u2 = make1(f, KILN_U2, 1);
  kiln_literal_set_s64(u2, 0, -1);
  assert_int_equal(kiln_literal_get_u64(u2, 0), 3);

  kiln_literal_t *s64 = make1(f, KILN_S64, 3);
  kiln_literal_set_s64(s64, 0, INT64_MIN);
  kiln_literal_set_u64(s64, 1, UINT64_MAX);
  kiln_literal_set_f64(s64, 2, 18446744073709551616.0 + 4096.0 * 3); /* 2^64 + 12288 */
  assert_true(kiln_literal_get_s64(s64, 0) == INT64_MIN);
  assert_int_equal(kiln_literal_get_s64(s64, 1), -1);
  assert_int_equal(kiln_literal_get_s64(s64, 2), 12288);
  kiln_literal_t *u32 = make1(f, KILN_U32, 2);
  kiln_literal_set_f64(u32, 0, NAN);
  kiln_literal_set_f64(u32, 1, INFINITY);
  assert_int_equal(kiln_literal_get_u64(u32, 0), 0);
  assert_int_equal(kiln_literal_get_u64(u32, 1), 0);
}

static void test_pred_stores_zero_or_one(void **state) {
  fixture_t *f = *state;
  kiln_literal_t *p = make1(f, KILN_PRED, 4);
  kiln_literal_set_s64(p, 0, 42);
  kiln_literal_set_f64(p, 1, 0.0);
  kiln_literal_set_f64(p, 2, -0.5);
  kiln_literal_set_u64(p, 3, 0);
  assert_int_equal(((uint8_t *)p->data)[0], 1);
  assert_int_equal(kiln_literal_get_s64(p, 1), 0);
  assert_int_equal(kiln_literal_get_u64(p, 2), 1);
  assert_string_equal(print(f, p), "{true, false, true, false}");
}

static void test_float_sets_round_to_nearest_even(void **state) {
  fixture_t *f = *state;
  kiln_literal_t *bf = make1(f, KILN_BF16, 3);
  kiln_literal_set_f64(bf, 0, 1.00390625);
  kiln_literal_set_f64(bf, 1, 1.01171875);
  kiln_literal_set_s64(bf, 2, 257); /* 257 is a tie between 256 and 258 -> 256 */
  uint16_t raw[3];
  memcpy(raw, bf->data, sizeof raw);
  assert_int_equal(raw[0], 0x3F80);
  assert_int_equal(raw[1], 0x3F82);
  assert_true(kiln_literal_get_f64(bf, 2) == 256);

  kiln_literal_t *f32 = make1(f, KILN_F32, 2);
  /* 2^60 + 2^36 + 1 is just above a tie of f32 neighbours; a plain (double) cast would
   * drop the +1 and then round the tie down to even. */
  kiln_literal_set_s64(f32, 0, (int64_t)((UINT64_C(1) << 60) + (UINT64_C(1) << 36) + 1));
  assert_true(kiln_literal_get_f64(f32, 0) == ldexp(1, 60) + ldexp(1, 37));
  kiln_literal_set_u64(f32, 1, UINT64_MAX);
  assert_true(kiln_literal_get_f64(f32, 1) == ldexp(1, 64));

  kiln_literal_t *f8 = make1(f, KILN_F8E4M3FN, 2);
  kiln_literal_set_f64(f8, 0, 1000);
  kiln_literal_set_f64(f8, 1, -0.0);
  assert_int_equal(((uint8_t *)f8->data)[0], 0x7F);
  assert_int_equal(((uint8_t *)f8->data)[1], 0x80);
  assert_true(isnan(kiln_literal_get_f64(f8, 0)));

  kiln_literal_t *f4 = make1(f, KILN_F4E2M1FN, 2);
  kiln_literal_set_f64(f4, 0, -5.5);
  assert_true(kiln_literal_get_f64(f4, 0) == -6);
  assert_int_equal(kiln_literal_get_s64(f4, 0), -6);
}

static void test_float_gets_convert_to_integers_saturating(void **state) {
  fixture_t *f = *state;
  kiln_literal_t *d = make1(f, KILN_F64, 4);
  kiln_literal_set_f64(d, 0, -2.7);
  kiln_literal_set_f64(d, 1, 1e30);
  kiln_literal_set_f64(d, 2, NAN);
  kiln_literal_set_f64(d, 3, -1e30);
  assert_int_equal(kiln_literal_get_s64(d, 0), -2);
  assert_true(kiln_literal_get_s64(d, 1) == INT64_MAX);
  assert_int_equal(kiln_literal_get_s64(d, 2), 0);
  assert_true(kiln_literal_get_s64(d, 3) == INT64_MIN);
  assert_true(kiln_literal_get_u64(d, 1) == UINT64_MAX);
  assert_int_equal(kiln_literal_get_u64(d, 3), 0);
}

static void test_complex_get_set(void **state) {
  fixture_t *f = *state;
  kiln_literal_t *c = make1(f, KILN_C64, 2);
  kiln_literal_set_c128(c, 0, 1.5, -2);
  kiln_literal_set_f64(c, 1, 3);
  double re, im;
  kiln_literal_get_c128(c, 0, &re, &im);
  assert_true(re == 1.5 && im == -2);
  kiln_literal_get_c128(c, 1, &re, &im);
  assert_true(re == 3 && im == 0);
  assert_true(kiln_literal_get_f64(c, 0) == 1.5);
  assert_string_equal(print(f, c), "{(1.5, -2), (3, 0)}");
  kiln_literal_t *z = make1(f, KILN_C128, 1);
  kiln_literal_set_c128(z, 0, 0.1, NAN);
  assert_string_equal(print(f, z), "{(0.1, nan)}");
  kiln_literal_t *r = make1(f, KILN_F32, 1);
  kiln_literal_set_c128(r, 0, 2, 5);
  kiln_literal_get_c128(r, 0, &re, &im);
  assert_true(re == 2 && im == 0);
}

static void test_equality_is_bitwise(void **state) {
  fixture_t *f = *state;
  kiln_literal_t *a = make1(f, KILN_F32, 2), *b = make1(f, KILN_F32, 2);
  kiln_literal_set_f64(a, 0, NAN);
  kiln_literal_set_f64(b, 0, NAN);
  assert_true(kiln_literal_equal(a, b)); /* same NaN bits */
  kiln_literal_set_f64(b, 1, -0.0);
  assert_false(kiln_literal_equal(a, b)); /* -0 != +0 bitwise */
  kiln_literal_set_f64(a, 1, -0.0);
  assert_true(kiln_literal_equal(a, b));
  kiln_literal_t *c = make1(f, KILN_S32, 2);
  assert_false(kiln_literal_equal(a, c));
  kiln_literal_t *u = make1(f, KILN_F32, 2);
  u->unknown = true;
  assert_false(kiln_literal_equal(a, u));
}

static void test_print_scalars_and_nesting(void **state) {
  fixture_t *f = *state;
  kiln_literal_t *sc = kiln_literal_make(&f->arena, kiln_shape_make_scalar(&f->arena, KILN_F32));
  kiln_literal_set_f64(sc, 0, 1.5);
  assert_string_equal(print(f, sc), "1.5");
  int64_t d2[2] = {2, 2};
  kiln_literal_t *m = make(f, KILN_S32, 2, d2);
  for (int i = 0; i < 4; i++) kiln_literal_set_s64(m, i, i + 1);
  assert_string_equal(print(f, m), "{ {1, 2}, {3, 4} }");
  int64_t d3[3] = {2, 1, 2};
  kiln_literal_t *t3 = make(f, KILN_U8, 3, d3);
  for (int i = 0; i < 4; i++) kiln_literal_set_s64(t3, i, 250 + i);
  assert_string_equal(print(f, t3), "{ { {250, 251} }, { {252, 253} } }");
  kiln_literal_t *e = make1(f, KILN_F32, 0);
  assert_string_equal(print(f, e), "{}");
  int64_t d20[2] = {2, 0};
  assert_string_equal(print(f, make(f, KILN_F32, 2, d20)), "{ {}, {} }");
  int64_t d03[2] = {0, 3};
  assert_string_equal(print(f, make(f, KILN_F32, 2, d03)), "{}");
  kiln_literal_t *u = make1(f, KILN_F32, 3);
  u->unknown = true;
  assert_string_equal(print(f, u), "{...}");
}

static void test_print_integers_exactly(void **state) {
  fixture_t *f = *state;
  kiln_literal_t *s = make1(f, KILN_S64, 2);
  kiln_literal_set_s64(s, 0, INT64_MIN);
  kiln_literal_set_s64(s, 1, INT64_MAX);
  assert_string_equal(print(f, s), "{-9223372036854775808, 9223372036854775807}");
  kiln_literal_t *u = make1(f, KILN_U64, 1);
  kiln_literal_set_u64(u, 0, UINT64_MAX);
  assert_string_equal(print(f, u), "{18446744073709551615}");
  kiln_literal_t *s4 = make1(f, KILN_S4, 2);
  kiln_literal_set_s64(s4, 0, -8);
  kiln_literal_set_s64(s4, 1, 7);
  assert_string_equal(print(f, s4), "{-8, 7}");
}

static void test_print_floats_shortest_and_special(void **state) {
  fixture_t *f = *state;
  kiln_literal_t *l = make1(f, KILN_F32, 11);
  double v[11] = {0.1, 1, -0.0, 1e6, 1e20, 3.4028234663852886e38, 1e-5, 0.00123,
                  NAN, -INFINITY, -2.5e15};
  for (int i = 0; i < 11; i++) kiln_literal_set_f64(l, i, v[i]);
  assert_string_equal(print(f, l), "{0.1, 1, -0, 1000000, 1e+20, 3.4028235e+38, 1e-05, 0.00123, "
                                   "nan, -inf, -2500000000000000}");
  kiln_literal_t *d = make1(f, KILN_F64, 5);
  double w[5] = {0.1, 1.0 / 3, 123456789012345.0, -NAN, INFINITY};
  for (int i = 0; i < 5; i++) kiln_literal_set_f64(d, i, w[i]);
  assert_string_equal(print(f, d),
                      "{0.1, 0.3333333333333333, 123456789012345, -nan, inf}");
  kiln_literal_t *h = make1(f, KILN_BF16, 3);
  kiln_literal_set_f64(h, 0, 0.1);   /* stored 0.10009765625: printed as that value */
  kiln_literal_set_f64(h, 1, 300.0); /* 300 -> bf16 300 */
  kiln_literal_set_f64(h, 2, 1e30);
  assert_string_equal(print(f, h), "{0.100097656, 300, 1.00025555e+30}");
  kiln_literal_t *fnuz = make1(f, KILN_F8E5M2FNUZ, 2);
  kiln_literal_set_f64(fnuz, 0, NAN);
  kiln_literal_set_f64(fnuz, 1, -57344);
  assert_string_equal(print(f, fnuz), "{nan, -57344}");
  kiln_literal_t *e8 = make1(f, KILN_F8E8M0FNU, 2);
  kiln_literal_set_f64(e8, 0, 0.25);
  kiln_literal_set_f64(e8, 1, 0);
  assert_string_equal(print(f, e8), "{0.25, nan}");
}

/* Every printed value of every narrow type parses (strtod + RNE) back to its bits. */
static void test_printed_floats_parse_back_to_same_bits(void **state) {
  fixture_t *f = *state;
  const kiln_elem_type_t types[] = {KILN_F16, KILN_BF16, KILN_F8E5M2, KILN_F8E4M3,
                                    KILN_F8E4M3FN, KILN_F8E4M3B11FNUZ, KILN_F8E5M2FNUZ,
                                    KILN_F8E4M3FNUZ, KILN_F8E3M4, KILN_F8E8M0FNU,
                                    KILN_F4E2M1FN};
  for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
    kiln_elem_type_t t = types[k];
    uint32_t n = kiln_elem_type_bits(t) == 16 ? 65536u : kiln_elem_type_bits(t) == 4 ? 16u : 256u;
    kiln_literal_t *l = make1(f, t, 1);
    for (uint32_t b = 0; b < n; b++) {
      double v = kiln_narrow_to_f64(t, b);
      if (isnan(v)) continue;
      kiln_literal_set_f64(l, 0, v);
      const char *s = print(f, l);
      assert_true(s[0] == '{');
      double back = strtod(s + 1, NULL);
      if (kiln_narrow_from_f64(t, back) != b)
        fail_msg("%s 0x%x printed as %s", kiln_elem_type_name(t), b, s);
    }
  }
  /* random f32 and f64 values */
  kiln_literal_t *l32 = make1(f, KILN_F32, 1), *l64 = make1(f, KILN_F64, 1);
  uint64_t x = 88172645463325252u;
  for (int i = 0; i < 20000; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    uint32_t u32 = (uint32_t)x;
    float fv;
    memcpy(&fv, &u32, 4);
    double dv;
    memcpy(&dv, &x, 8);
    if (!isnan(fv)) {
      kiln_literal_set_f64(l32, 0, fv);
      float back = strtof(print(f, l32) + 1, NULL);
      assert_memory_equal(&back, &fv, 4);
    }
    if (!isnan(dv)) {
      kiln_literal_set_f64(l64, 0, dv);
      double back = strtod(print(f, l64) + 1, NULL);
      assert_memory_equal(&back, &dv, 8);
    }
  }
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(test_make_is_zero_filled_and_sized_by_storage),
      T(test_make_fails_when_arena_refuses),
      T(test_tuple_literal_holds_element_literals),
      T(test_integer_sets_wrap_to_type_width),
      T(test_pred_stores_zero_or_one),
      T(test_float_sets_round_to_nearest_even),
      T(test_float_gets_convert_to_integers_saturating),
      T(test_complex_get_set),
      T(test_equality_is_bitwise),
      T(test_print_scalars_and_nesting),
      T(test_print_integers_exactly),
      T(test_print_floats_shortest_and_special),
      T(test_printed_floats_parse_back_to_same_bits),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
