/* Narrow floating-point conversions, written once and driven by a table of formats.
 *
 * Every narrow format is described by its exponent and mantissa widths, its bias and
 * how it spends the top of its range (the "style" below). Narrowing takes the double's
 * exact significand and exponent, shifts the significand to the target's precision
 * (further for subnormals), rounds to nearest with ties to even on the integer that is
 * left, and lets a mantissa carry flow into the exponent field. Overflow then follows the
 * style. The semantics are those of ml_dtypes (which XLA uses) with these documented
 * choices:
 *
 *  - NaN inputs to IEEE-style formats keep the sign and the top payload bits and set the
 *    quiet bit (so the canonical quiet NaN maps to the canonical quiet NaN).
 *  - f8e4m3fn: inf, NaN and overflow give NaN (S.1111.111), keeping the sign.
 *  - fnuz formats: inf, NaN and overflow give 0x80; -0 and negative values that round
 *    to zero give +0.
 *  - f4e2m1fn has neither inf nor NaN: overflow and +-inf saturate to +-6 (ml_dtypes'
 *    non-saturating conversion maps to its `infinity()`, which is max). Every NaN, of
 *    either sign, maps to ml_dtypes' quiet_NaN() bit pattern 0x8 (-0). ml_dtypes gives
 *    -NaN the negated pattern (+0), but IEEE 754 leaves the sign of an operation's NaN
 *    result unspecified (libm's log(-1) is -NaN, the emitted one +NaN), and in a format
 *    without NaN that sign would become a visible, implementation-dependent zero sign
 *    (rsqrt then gives +6 or -6). The emitter takes this code from here.
 *  - f8e8m0fnu (2^(e-127), e in 0..254, 0xFF = NaN, unsigned, no zero): a value rounds
 *    to the nearer power of two measured linearly: x in [2^k, 1.5*2^k) gives 2^k and
 *    [1.5*2^k, 2^(k+1)) gives 2^(k+1) (ties go up, as ml_dtypes' bit-level rounding does
 *    because the implicit bit is always odd). Values below 2^-127 give 2^-127 (code 0);
 *    zero, negative values, NaN, inf and values that round above 2^127 give NaN.
 *    Unlike ml_dtypes, the binade [2^-127, 2^-126) also rounds to nearest (ml_dtypes
 *    treats it like a subnormal range and rounds any value above 2^-127 up). */
#include "compiler/hlo/numeric.h"

#include <math.h>
#include <string.h>

typedef enum {
  STYLE_IEEE, /* all-ones exponent: inf (mantissa 0) or NaN */
  STYLE_FN,   /* no inf; only S.1..1.1..1 is NaN */
  STYLE_FNUZ, /* no inf, no -0; 1.0..0.0..0 is the only NaN */
  STYLE_NONE, /* no inf, no NaN (f4e2m1fn) */
  STYLE_E8M0, /* unsigned exponent-only scale, 0xFF = NaN */
} fp_style_t;

typedef struct {
  int ebits, mbits, bias;
  fp_style_t style;
} fp_format_t;

/* Returns the table entry for a narrow float type, or NULL. */
static const fp_format_t *format_of(kiln_elem_type_t t) {
  static const fp_format_t kF16 = {5, 10, 15, STYLE_IEEE};
  static const fp_format_t kBF16 = {8, 7, 127, STYLE_IEEE};
  static const fp_format_t kE5M2 = {5, 2, 15, STYLE_IEEE};
  static const fp_format_t kE4M3 = {4, 3, 7, STYLE_IEEE};
  static const fp_format_t kE4M3FN = {4, 3, 7, STYLE_FN};
  static const fp_format_t kE4M3B11FNUZ = {4, 3, 11, STYLE_FNUZ};
  static const fp_format_t kE5M2FNUZ = {5, 2, 16, STYLE_FNUZ};
  static const fp_format_t kE4M3FNUZ = {4, 3, 8, STYLE_FNUZ};
  static const fp_format_t kE3M4 = {3, 4, 3, STYLE_IEEE};
  static const fp_format_t kE8M0 = {8, 0, 127, STYLE_E8M0};
  static const fp_format_t kE2M1 = {2, 1, 1, STYLE_NONE};
  switch (t) {
    case KILN_F16: return &kF16;
    case KILN_BF16: return &kBF16;
    case KILN_F8E5M2: return &kE5M2;
    case KILN_F8E4M3: return &kE4M3;
    case KILN_F8E4M3FN: return &kE4M3FN;
    case KILN_F8E4M3B11FNUZ: return &kE4M3B11FNUZ;
    case KILN_F8E5M2FNUZ: return &kE5M2FNUZ;
    case KILN_F8E4M3FNUZ: return &kE4M3FNUZ;
    case KILN_F8E3M4: return &kE3M4;
    case KILN_F8E8M0FNU: return &kE8M0;
    case KILN_F4E2M1FN: return &kE2M1;
    default: return NULL;
  }
}

static uint64_t f64_bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

static double f64_from_bits(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* Largest finite code (without sign) of a format. */
static uint32_t max_finite_code(const fp_format_t *f) {
  uint32_t all = (1u << (f->ebits + f->mbits)) - 1;
  switch (f->style) {
    case STYLE_IEEE: return (((1u << f->ebits) - 1) << f->mbits) - 1;
    case STYLE_FN: return all - 1;
    case STYLE_E8M0: return all - 1;
    default: return all;
  }
}

/* The code a NaN input becomes (sign handled here). */
static uint32_t nan_code(const fp_format_t *f, bool neg, uint64_t payload52) {
  uint32_t sign = 1u << (f->ebits + f->mbits);
  uint32_t exp_all = ((1u << f->ebits) - 1) << f->mbits;
  switch (f->style) {
    case STYLE_IEEE: {
      uint32_t quiet = 1u << (f->mbits - 1);
      uint32_t top = (uint32_t)(payload52 >> (52 - f->mbits));
      return (neg ? sign : 0) | exp_all | top | quiet;
    }
    case STYLE_FN: return (neg ? sign : 0) | exp_all | ((1u << f->mbits) - 1);
    case STYLE_FNUZ: return sign;
    case STYLE_NONE:
      return sign; /* ml_dtypes quiet_NaN() (-0); a NaN's sign is ignored */
    case STYLE_E8M0: return 0xFF;
  }
  return 0;
}

/* The code for an infinite input or an overflowing finite one. */
static uint32_t overflow_code(const fp_format_t *f, bool neg) {
  uint32_t sign = 1u << (f->ebits + f->mbits);
  switch (f->style) {
    case STYLE_IEEE: return (neg ? sign : 0) | (((1u << f->ebits) - 1) << f->mbits);
    case STYLE_FN: return nan_code(f, neg, 0);
    case STYLE_FNUZ: return sign;
    case STYLE_NONE: return (neg ? sign : 0) | max_finite_code(f);
    case STYLE_E8M0: return 0xFF;
  }
  return 0;
}

/* Rounds sig >> shift to nearest, ties to even. shift in [1, 63]. */
static uint64_t shift_round_even(uint64_t sig, int shift) {
  uint64_t q = sig >> shift;
  uint64_t rem = sig & ((UINT64_C(1) << shift) - 1);
  uint64_t half = UINT64_C(1) << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) q++;
  return q;
}

static uint32_t narrow_encode(const fp_format_t *f, double d) {
  uint64_t u = f64_bits(d);
  bool neg = (u >> 63) != 0;
  uint32_t sign = 1u << (f->ebits + f->mbits);
  uint64_t mag = u & ~(UINT64_C(1) << 63);
  if (mag > UINT64_C(0x7FF0000000000000)) return nan_code(f, neg, mag & ((UINT64_C(1) << 52) - 1));
  if (mag == UINT64_C(0x7FF0000000000000)) return overflow_code(f, neg);

  if (f->style == STYLE_E8M0) {
    if (neg || mag == 0) return 0xFF;
  }
  if (mag == 0) return (neg && f->style != STYLE_FNUZ) ? sign : 0;

  /* d = sig * 2^(e2 - 52) with sig in [2^52, 2^53). */
  int e2;
  double frac = frexp(fabs(d), &e2); /* [0.5, 1) * 2^e2 */
  uint64_t sig = (uint64_t)ldexp(frac, 53);
  int64_t unbiased = e2 - 1;

  int64_t code;
  if (f->style == STYLE_E8M0) {
    /* Round the significand to 1 or 2 (ties up: the implicit bit is odd). */
    uint64_t q = shift_round_even(sig, 52);
    code = unbiased + f->bias + (int64_t)(q - 1);
    if (code < 0) code = 0; /* no zero: saturate to the smallest scale */
  } else {
    int64_t biased = unbiased + f->bias;
    int shift = 52 - f->mbits;
    if (biased < 1) {
      int64_t extra = 1 - biased;
      shift = extra > 54 - shift ? 54 : (int)(shift + extra);
      code = (int64_t)shift_round_even(sig, shift); /* subnormal; may carry into normal */
    } else {
      /* (biased - 1) << m plus the rounded significand with its implicit bit lets a
       * carry (1.11.. -> 10.0..) move into the exponent. */
      code = ((biased - 1) << f->mbits) + (int64_t)shift_round_even(sig, shift);
    }
  }
  if (code > (int64_t)max_finite_code(f)) return overflow_code(f, neg);
  if (code == 0 && f->style == STYLE_FNUZ) return 0;
  return (neg ? sign : 0) | (uint32_t)code;
}

static double narrow_decode(const fp_format_t *f, uint32_t bits) {
  int total = f->ebits + f->mbits;
  bits &= (1u << (total + (f->style == STYLE_E8M0 ? 0 : 1))) - 1;
  if (f->style == STYLE_E8M0) {
    if (bits == 0xFF) return NAN;
    return ldexp(1.0, (int)bits - f->bias);
  }
  bool neg = (bits >> total) & 1;
  uint32_t exp = (bits >> f->mbits) & ((1u << f->ebits) - 1);
  uint32_t man = bits & ((1u << f->mbits) - 1);
  uint32_t exp_all = (1u << f->ebits) - 1;
  switch (f->style) {
    case STYLE_IEEE:
      if (exp == exp_all) {
        if (man == 0) return neg ? -INFINITY : INFINITY;
        /* keep sign and payload: the payload lands in the double's top mantissa bits */
        uint64_t u = (neg ? UINT64_C(1) << 63 : 0) | UINT64_C(0x7FF0000000000000) |
                     ((uint64_t)man << (52 - f->mbits));
        return f64_from_bits(u);
      }
      break;
    case STYLE_FN:
      if (exp == exp_all && man == (1u << f->mbits) - 1) return neg ? -NAN : NAN;
      break;
    case STYLE_FNUZ:
      if (neg && exp == 0 && man == 0) return NAN;
      break;
    default:
      break;
  }
  double v = exp == 0 ? ldexp((double)man, 1 - f->bias - f->mbits)
                      : ldexp((double)(man | (1u << f->mbits)), (int)exp - f->bias - f->mbits);
  return neg ? -v : v;
}

uint32_t kiln_narrow_from_f64(kiln_elem_type_t t, double d) {
  const fp_format_t *f = format_of(t);
  if (f) return narrow_encode(f, d);
  if (t == KILN_F32) {
    float x = (float)d;
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
  }
  return 0;
}

double kiln_narrow_to_f64(kiln_elem_type_t t, uint32_t bits) {
  const fp_format_t *f = format_of(t);
  if (f) return narrow_decode(f, bits);
  if (t == KILN_F32) {
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
  }
  return NAN;
}

uint16_t kiln_f64_to_bf16(double d) { return (uint16_t)narrow_encode(format_of(KILN_BF16), d); }
uint16_t kiln_f64_to_f16(double d) {
  return (uint16_t)narrow_encode(format_of(KILN_F16), d);
}
