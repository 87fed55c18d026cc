/* Narrow float conversions: known answers per format (RNE ties, subnormals, overflow,
 * NaN / inf / -0), exhaustive narrow -> f64 -> narrow round trips, and a brute-force
 * nearest-value oracle for every f8 / f4 format. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

#include <cmocka.h>

#include "compiler/hlo/numeric.h"

static uint32_t enc(kiln_elem_type_t t, double d) { return kiln_narrow_from_f64(t, d); }
static double dec(kiln_elem_type_t t, uint32_t b) { return kiln_narrow_to_f64(t, b); }

static void test_bf16_rounds_ties_to_even(void **state) {
  (void)state;
  assert_int_equal(kiln_f64_to_bf16(1.00390625), 0x3F80);  /* 1 + 2^-8: tie -> 1.0 */
  assert_int_equal(kiln_f64_to_bf16(1.01171875), 0x3F82);  /* 1 + 3*2^-8: tie -> 1.015625 */
  assert_int_equal(kiln_f32_to_bf16(1.00390625f), 0x3F80);
  assert_int_equal(kiln_f32_to_bf16(1.01171875f), 0x3F82);
  assert_int_equal(kiln_f32_to_bf16(nextafterf(1.00390625f, 2.0f)), 0x3F81); /* just above the tie */
  assert_true(kiln_bf16_to_f32(0x3F82) == 1.015625f);
  assert_int_equal(kiln_f32_to_bf16(-2.0f), 0xC000);
}

static void test_f64_variants_round_once(void **state) {
  (void)state;
  /* Through f32 these would first round to the tie and then to even (down). */
  double f16_case = 1.0 + ldexp(1, -11) + ldexp(1, -40);
  assert_int_equal(kiln_f64_to_f16(f16_case), 0x3C01);
  assert_int_equal(kiln_f32_to_f16((float)f16_case), 0x3C00);
  double bf16_case = 1.0 + ldexp(1, -8) + ldexp(1, -30);
  assert_int_equal(kiln_f64_to_bf16(bf16_case), 0x3F81);
  assert_int_equal(kiln_f32_to_bf16((float)bf16_case), 0x3F80);
}

static void test_f16_subnormals_and_overflow(void **state) {
  (void)state;
  assert_int_equal(kiln_f64_to_f16(ldexp(1, -24)), 0x0001);
  assert_int_equal(kiln_f64_to_f16(ldexp(1, -25)), 0x0000);               /* tie -> even 0 */
  assert_int_equal(kiln_f64_to_f16(ldexp(1, -25) * 1.0001), 0x0001);
  assert_int_equal(kiln_f64_to_f16(3 * ldexp(1, -25)), 0x0002);           /* tie -> even 2 */
  assert_int_equal(kiln_f64_to_f16(-ldexp(1, -26)), 0x8000);              /* -0 kept */
  assert_int_equal(kiln_f64_to_f16(ldexp(1023, -24) + ldexp(1, -25)), 0x0400); /* to normal */
  assert_int_equal(kiln_f64_to_f16(65504), 0x7BFF);
  assert_int_equal(kiln_f64_to_f16(65519), 0x7BFF);
  assert_int_equal(kiln_f64_to_f16(65520), 0x7C00); /* tie above max -> inf */
  assert_int_equal(kiln_f64_to_f16(-1e300), 0xFC00);
  assert_int_equal(kiln_f64_to_f16(NAN) & 0x7E00, 0x7E00);
  assert_true(kiln_f16_to_f32(0x0001) == ldexp(1, -24));
  assert_true(isinf(kiln_f16_to_f32(0xFC00)) && kiln_f16_to_f32(0xFC00) < 0);
  assert_true(isnan(kiln_f16_to_f32(0x7C01)));
  assert_int_equal(kiln_f32_to_f16(1.5f), 0x3E00);
}

static void test_bf16_overflow_nan_and_subnormals(void **state) {
  (void)state;
  assert_int_equal(kiln_f32_to_bf16(3.4028235e38f), 0x7F80); /* rounds past max -> inf */
  assert_int_equal(kiln_f64_to_bf16(3.3895313892515355e38), 0x7F7F); /* max */
  assert_int_equal(kiln_f32_to_bf16(INFINITY), 0x7F80);
  assert_int_equal(kiln_f32_to_bf16(-NAN) & 0xFFC0, 0xFFC0);
  assert_int_equal(kiln_f64_to_bf16(ldexp(1, -133)), 0x0001); /* min subnormal */
  assert_int_equal(kiln_f64_to_bf16(ldexp(1, -134)), 0x0000);
  assert_int_equal(kiln_f32_to_bf16(ldexp(1, -133)), 0x0001);
}

static void test_f8e4m3fn_overflow_is_nan_and_no_inf(void **state) {
  (void)state;
  kiln_elem_type_t t = KILN_F8E4M3FN;
  assert_int_equal(enc(t, 448), 0x7E);
  assert_int_equal(enc(t, 464), 0x7E); /* tie between 448 and the NaN slot -> even 448 */
  assert_int_equal(enc(t, 465), 0x7F);
  assert_int_equal(enc(t, INFINITY), 0x7F);
  assert_int_equal(enc(t, -INFINITY), 0xFF);
  assert_int_equal(enc(t, -NAN), 0xFF);
  assert_int_equal(enc(t, -0.0), 0x80);
  assert_int_equal(enc(t, ldexp(1, -9)), 0x01);
  assert_true(dec(t, 0x7E) == 448);
  assert_true(isnan(dec(t, 0x7F)) && isnan(dec(t, 0xFF)));
  assert_true(dec(t, 0x78) == 256); /* all-ones exponent is finite here */
}

static void test_f8e5m2_and_f8e4m3_are_ieee_like(void **state) {
  (void)state;
  assert_int_equal(enc(KILN_F8E5M2, 57344), 0x7B);
  assert_int_equal(enc(KILN_F8E5M2, 61440), 0x7C); /* tie above max -> inf */
  assert_int_equal(enc(KILN_F8E5M2, INFINITY), 0x7C);
  assert_int_equal(enc(KILN_F8E5M2, NAN), 0x7E);
  assert_int_equal(enc(KILN_F8E5M2, ldexp(1, -16)), 0x01);
  assert_int_equal(enc(KILN_F8E5M2, -0.0), 0x80);
  assert_true(isinf(dec(KILN_F8E5M2, 0xFC)) && dec(KILN_F8E5M2, 0xFC) < 0);
  assert_int_equal(enc(KILN_F8E4M3, 240), 0x77);
  assert_int_equal(enc(KILN_F8E4M3, 248), 0x78); /* tie, max is odd -> inf */
  assert_int_equal(enc(KILN_F8E4M3, 247), 0x77);
  assert_int_equal(enc(KILN_F8E4M3, NAN), 0x7C);
  assert_int_equal(enc(KILN_F8E4M3, ldexp(1, -9)), 0x01);
  assert_true(isinf(dec(KILN_F8E4M3, 0x78)));
  assert_int_equal(enc(KILN_F8E3M4, 15.5), 0x6F);
  assert_int_equal(enc(KILN_F8E3M4, 15.75), 0x70);
  assert_int_equal(enc(KILN_F8E3M4, ldexp(1, -6)), 0x01);
  assert_int_equal(enc(KILN_F8E3M4, 1.0), 0x30);
  assert_true(isinf(dec(KILN_F8E3M4, 0x70)));
}

static void test_fnuz_formats_have_one_nan_and_no_negative_zero(void **state) {
  (void)state;
  kiln_elem_type_t fnuz[] = {KILN_F8E4M3B11FNUZ, KILN_F8E5M2FNUZ, KILN_F8E4M3FNUZ};
  for (int i = 0; i < 3; i++) {
    kiln_elem_type_t t = fnuz[i];
    assert_int_equal(enc(t, -0.0), 0x00);
    assert_int_equal(enc(t, NAN), 0x80);
    assert_int_equal(enc(t, -NAN), 0x80);
    assert_int_equal(enc(t, INFINITY), 0x80);
    assert_int_equal(enc(t, -INFINITY), 0x80);
    assert_true(isnan(dec(t, 0x80)));
    assert_true(dec(t, 0x00) == 0 && !signbit(dec(t, 0x00)));
  }
  assert_true(dec(KILN_F8E4M3B11FNUZ, 0x7F) == 30);
  assert_int_equal(enc(KILN_F8E4M3B11FNUZ, 31), 0x80); /* tie, odd max -> overflow -> NaN */
  assert_int_equal(enc(KILN_F8E4M3B11FNUZ, ldexp(1, -13)), 0x01);
  assert_int_equal(enc(KILN_F8E4M3B11FNUZ, -ldexp(1, -15)), 0x00); /* rounds to +0 */
  assert_int_equal(enc(KILN_F8E4M3B11FNUZ, 1.0), 0x58);
  assert_true(dec(KILN_F8E5M2FNUZ, 0x7F) == 57344);
  assert_int_equal(enc(KILN_F8E5M2FNUZ, ldexp(1, -17)), 0x01);
  assert_int_equal(enc(KILN_F8E5M2FNUZ, 1.0), 0x40);
  assert_true(dec(KILN_F8E4M3FNUZ, 0x7F) == 240);
  assert_int_equal(enc(KILN_F8E4M3FNUZ, ldexp(1, -10)), 0x01);
  assert_int_equal(enc(KILN_F8E4M3FNUZ, -1.0), 0xC0);
}

static void test_f8e8m0fnu_rounds_to_nearest_power_of_two(void **state) {
  (void)state;
  kiln_elem_type_t t = KILN_F8E8M0FNU;
  assert_int_equal(enc(t, 1.0), 0x7F);
  assert_int_equal(enc(t, 1.49), 0x7F);
  assert_int_equal(enc(t, 1.5), 0x80); /* linear midpoint, ties up */
  assert_int_equal(enc(t, 3.0), 0x81);
  assert_int_equal(enc(t, 0.75), 0x7F);
  assert_int_equal(enc(t, 0.74), 0x7E);
  assert_int_equal(enc(t, ldexp(1, 127)), 0xFE);
  assert_int_equal(enc(t, ldexp(1.5, 127)), 0xFF); /* rounds past 2^127 -> NaN */
  assert_int_equal(enc(t, ldexp(1, -127)), 0x00);
  assert_int_equal(enc(t, ldexp(1.4, -127)), 0x00);
  assert_int_equal(enc(t, ldexp(1.5, -127)), 0x01);
  assert_int_equal(enc(t, ldexp(1, -140)), 0x00); /* no zero: smallest scale */
  assert_int_equal(enc(t, 0.0), 0xFF);
  assert_int_equal(enc(t, -1.0), 0xFF);
  assert_int_equal(enc(t, INFINITY), 0xFF);
  assert_int_equal(enc(t, NAN), 0xFF);
  assert_true(dec(t, 0x00) == ldexp(1, -127));
  assert_true(dec(t, 0xFE) == ldexp(1, 127));
  assert_true(isnan(dec(t, 0xFF)));
}

static void test_f4e2m1fn_saturates_and_rounds_ties_to_even(void **state) {
  (void)state;
  kiln_elem_type_t t = KILN_F4E2M1FN;
  static const double values[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (uint32_t b = 0; b < 8; b++) {
    assert_true(dec(t, b) == values[b]);
    assert_true(dec(t, b | 8) == -values[b]);
  }
  assert_int_equal(enc(t, 5.0), 0x6);  /* tie 4 / 6 -> even 4 */
  assert_int_equal(enc(t, 5.01), 0x7);
  assert_int_equal(enc(t, 2.5), 0x4);  /* tie 2 / 3 -> even 2 */
  assert_int_equal(enc(t, 0.25), 0x0); /* tie 0 / 0.5 -> 0 */
  assert_int_equal(enc(t, 0.26), 0x1);
  assert_int_equal(enc(t, 7.0), 0x7);
  assert_int_equal(enc(t, 100.0), 0x7);
  assert_int_equal(enc(t, -100.0), 0xF);
  assert_int_equal(enc(t, INFINITY), 0x7);
  assert_int_equal(enc(t, -INFINITY), 0xF);
  assert_int_equal(enc(t, -0.0), 0x8);
  assert_int_equal(enc(t, NAN), 0x8); /* ml_dtypes' quiet_NaN() pattern */
  assert_int_equal(enc(t, -NAN), 0x8); /* a NaN's sign is ignored (fuzz-100756) */
}

static const kiln_elem_type_t kNarrow[] = {
    KILN_F16,          KILN_BF16,       KILN_F8E5M2,      KILN_F8E4M3,
    KILN_F8E4M3FN,     KILN_F8E4M3B11FNUZ, KILN_F8E5M2FNUZ, KILN_F8E4M3FNUZ,
    KILN_F8E3M4,       KILN_F8E8M0FNU,  KILN_F4E2M1FN};

static uint32_t pattern_count(kiln_elem_type_t t) {
  return t == KILN_F16 || t == KILN_BF16 ? 65536u : t == KILN_F4E2M1FN ? 16u : 256u;
}

static void test_every_pattern_round_trips_through_f64(void **state) {
  (void)state;
  for (size_t k = 0; k < sizeof kNarrow / sizeof kNarrow[0]; k++) {
    kiln_elem_type_t t = kNarrow[k];
    int nans = 0;
    for (uint32_t b = 0; b < pattern_count(t); b++) {
      double d = dec(t, b);
      uint32_t back = enc(t, d);
      if (isnan(d)) {
        nans++;
        assert_true(isnan(dec(t, back)));
      } else if (back != b) {
        fail_msg("%s: bits 0x%x -> %.17g -> 0x%x", kiln_elem_type_name(t), b, d, back);
      }
    }
    /* NaN counts per encoding style. */
    int want = t == KILN_F16 ? 2046 : t == KILN_BF16 ? 254 : 0;
    switch (t) {
      case KILN_F8E5M2: want = 6; break;
      case KILN_F8E4M3: want = 14; break;
      case KILN_F8E3M4: want = 30; break;
      case KILN_F8E4M3FN: want = 2; break;
      case KILN_F8E4M3B11FNUZ: case KILN_F8E5M2FNUZ: case KILN_F8E4M3FNUZ:
      case KILN_F8E8M0FNU: want = 1; break;
      default: break;
    }
    assert_int_equal(nans, want);
  }
  /* bf16 / f16 helper functions (base/half.h) round-trip every pattern. */
  for (uint32_t b = 0; b < 65536; b++) {
    float f = kiln_bf16_to_f32((uint16_t)b);
    if (!isnan(f)) assert_int_equal(kiln_f32_to_bf16(f), b);
    float h = kiln_f16_to_f32((uint16_t)b);
    if (!isnan(h)) assert_int_equal(kiln_f32_to_f16(h), b);
  }
}

/* base/half.h's f32 <-> bf16 / f16 (the one copy every layer uses) against the generic
 * narrow-format path: every pattern decodes to the same value (NaNs: a NaN of the same sign
 * and payload; bf16 -> f32 is a plain shift, so it keeps a signaling NaN signaling), and f32 -> 16
 * bits rounds the same on every midpoint between neighbouring codes, one f32 ulp either side of it,
 * and a sweep over all f32 patterns. */
static void test_half_helpers_match_generic_path(void **state) {
  (void)state;
  const kiln_elem_type_t types[2] = {KILN_F16, KILN_BF16};
  for (int k = 0; k < 2; k++) {
    kiln_elem_type_t t = types[k];
    float (*to_f32)(uint16_t) = t == KILN_F16 ? kiln_f16_to_f32 : kiln_bf16_to_f32;
    uint16_t (*from_f32)(float) = t == KILN_F16 ? kiln_f32_to_f16 : kiln_f32_to_bf16;
    for (uint32_t b = 0; b < 65536; b++) {
      float got = to_f32((uint16_t)b), want = (float)dec(t, b);
      uint32_t gu, wu;
      memcpy(&gu, &got, 4);
      memcpy(&wu, &want, 4);
      if (isnan(got) && isnan(want)) gu |= 0x400000u, wu |= 0x400000u; /* bf16 keeps sNaNs */
      if (gu != wu)
        fail_msg("%s 0x%04x -> f32 0x%08x, generic 0x%08x", kiln_elem_type_name(t), b, gu, wu);
      /* the midpoint to the next code (larger magnitude; the tie above the largest finite
       * value is covered by the sweep and test_f16_subnormals_and_overflow), exact in f32 */
      if (isnan(got) || isinf(got) || isinf(to_f32((uint16_t)(b + 1)))) continue;
      float mid = (float)((dec(t, b) + dec(t, b + 1)) / 2);
      float probes[3] = {mid, nextafterf(mid, 0), nextafterf(mid, 2 * mid)};
      for (int p = 0; p < 3; p++) {
        float x = probes[p];
        uint32_t w = enc(t, (double)x);
        if (from_f32(x) != w)
          fail_msg("%s: f32 %a -> 0x%04x, generic 0x%04x", kiln_elem_type_name(t), (double)x,
                   from_f32(x), w);
      }
    }
    for (uint64_t u = 0; u < (UINT64_C(1) << 32); u += 4099) {
      uint32_t bits = (uint32_t)u;
      float x;
      memcpy(&x, &bits, 4);
      uint32_t w = enc(t, (double)x);
      if (from_f32(x) != w)
        fail_msg("%s: f32 0x%08x -> 0x%04x, generic 0x%04x", kiln_elem_type_name(t), bits,
                 from_f32(x), w);
    }
  }
}

/* xorshift64* */
static uint64_t rng_next(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * UINT64_C(2685821657736338717);
}

/* Nearest finite non-negative value by brute force; ties pick the even code. */
static uint32_t oracle_nearest(kiln_elem_type_t t, double x) {
  uint32_t best = 0;
  double best_err = INFINITY;
  uint32_t half = pattern_count(t) / 2;
  for (uint32_t b = 0; b < half; b++) {
    double v = dec(t, b);
    if (!isfinite(v)) continue;
    double err = fabs(v - x);
    if (err < best_err || (err == best_err && (b & 1) == 0)) {
      best = b;
      best_err = err;
    }
  }
  return best;
}

static void test_f8_and_f4_match_nearest_value_oracle(void **state) {
  (void)state;
  uint64_t seed = 0x9E3779B97F4A7C15u;
  for (size_t k = 2; k < sizeof kNarrow / sizeof kNarrow[0]; k++) {
    kiln_elem_type_t t = kNarrow[k];
    if (t == KILN_F8E8M0FNU) continue;
    uint32_t half = pattern_count(t) / 2;
    uint32_t sign = half;
    /* the largest finite positive code */
    double maxv = 0;
    for (uint32_t b = 0; b < half; b++)
      if (isfinite(dec(t, b)) && dec(t, b) > maxv) maxv = dec(t, b);
    /* all midpoints between neighbours, just off them, and random values in range */
    for (uint32_t b = 0; b + 1 < half; b++) {
      double lo = dec(t, b), hi = dec(t, b + 1);
      if (!isfinite(lo) || !isfinite(hi)) continue;
      double mid = (lo + hi) / 2;
      double probes[3] = {mid, nextafter(mid, 0), nextafter(mid, INFINITY)};
      for (int p = 0; p < 3; p++) {
        uint32_t want = oracle_nearest(t, probes[p]);
        assert_int_equal(enc(t, probes[p]), want);
        uint32_t neg = enc(t, -probes[p]);
        bool fnuz = t == KILN_F8E4M3B11FNUZ || t == KILN_F8E5M2FNUZ || t == KILN_F8E4M3FNUZ;
        assert_int_equal(neg, want == 0 && fnuz ? 0 : (want | sign));
      }
    }
    for (int i = 0; i < 20000; i++) {
      double x = (double)(rng_next(&seed) >> 11) / 9007199254740992.0 * maxv;
      assert_int_equal(enc(t, x), oracle_nearest(t, x));
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bf16_rounds_ties_to_even),
      cmocka_unit_test(test_f64_variants_round_once),
      cmocka_unit_test(test_f16_subnormals_and_overflow),
      cmocka_unit_test(test_bf16_overflow_nan_and_subnormals),
      cmocka_unit_test(test_f8e4m3fn_overflow_is_nan_and_no_inf),
      cmocka_unit_test(test_f8e5m2_and_f8e4m3_are_ieee_like),
      cmocka_unit_test(test_fnuz_formats_have_one_nan_and_no_negative_zero),
      cmocka_unit_test(test_f8e8m0fnu_rounds_to_nearest_power_of_two),
      cmocka_unit_test(test_f4e2m1fn_saturates_and_rounds_ties_to_even),
      cmocka_unit_test(test_every_pattern_round_trips_through_f64),
      cmocka_unit_test(test_half_helpers_match_generic_path),
      cmocka_unit_test(test_f8_and_f4_match_nearest_value_oracle),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
