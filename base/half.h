/* bf16 and f16 <-> f32, the one copy for every layer (HLO literals and the evaluator through
 * compiler/hlo/numeric.h, the runtime's host gemm and collectives directly): round to nearest
 * even, NaN stays NaN (quieted), overflow to inf, f16 subnormals kept. test_numeric checks
 * them against the generic narrow-format path (kiln_narrow_from_f64) on every tie. */
#ifndef KILN_BASE_HALF_H_
#define KILN_BASE_HALF_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float kiln_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t kiln_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
  return (uint16_t)(u >> 16);
}

static inline float kiln_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0); /* inf / NaN (quieted) */
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (man << 13);
  } else {
    float f = (float)man * 0x1p-24f; /* zero or subnormal: exact */
    memcpy(&u, &f, 4);
    u |= sign;
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t kiln_f32_to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
  if (a < 0x38800000u) {
    /* Below 2^-14: a subnormal half (or zero), units of 2^-24, rounded to nearest even. */
    float v;
    memcpy(&v, &a, 4);
    return (uint16_t)(sign | (uint16_t)nearbyintf(v * 0x1p24f));
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1u); /* round to nearest even at bit 13 */
  return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

#endif /* KILN_BASE_HALF_H_ */
