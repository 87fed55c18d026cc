/* Conversions between float and the narrow floating-point formats kiln stores as bits:
 * f16, bf16, the f8 family and f4e2m1fn. All narrowing conversions round to nearest,
 * ties to even, and follow each format's rules for overflow (to inf where the format
 * has one, else to NaN, or saturate for e8m0), NaN and signed zero (fnuz formats have
 * no negative zero: -0 becomes +0). */
#ifndef KILN_HLO_NUMERIC_H_
#define KILN_HLO_NUMERIC_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/half.h" /* kiln_{f32,bf16,f16}_to_{bf16,f32,f16}: the f32 <-> 16-bit pairs */
#include "compiler/hlo/shape.h"

uint16_t kiln_f64_to_f16(double d);   /* rounds once, directly from f64 */
uint16_t kiln_f64_to_bf16(double d);  /* rounds once, directly from f64 */

/* For any real float type `t` with storage of at most 16 bits (f16, bf16, f8*, f4*). */
uint32_t kiln_narrow_from_f64(kiln_elem_type_t t, double d);
double kiln_narrow_to_f64(kiln_elem_type_t t, uint32_t bits);

#endif /* KILN_HLO_NUMERIC_H_ */
