/* Special functions as elementwise HLO (custom_call_rewrite expands XLA's
 * xla_builder.math.{Erfc,BesselI1e,Digamma,Zeta,Polygamma} calls with them; the StableHLO
 * front end sends CHLO's erfc, bessel_i1e, digamma, zeta and polygamma there). Each takes operands
 * of one real float type and dims and returns a result of that type; f16, bf16 and the 8-bit floats
 * compute in f32, f64 in f64. NULL when an operand is NULL or not a real float array (the
 * builder's failure rule, compiler/passes/hlo_builder.h).
 *
 * How each is computed (the evaluator's reference, compiler/eval/eval_special.c, computes
 * the same functions in long double with more terms):
 *   erfc x     1 - erf x below 0.5; above, exp(-x^2) (x^2 split into an exact square and a
 *              small part) times a Chebyshev series in t = (3.5 - x) / (x + 2.5) of
 *              x exp(x^2) erfc x, divided by x;
 *   bessel_i1e x  exp(-|x|) I1(x): x exp(-|x|) times the power series of I1(x) / x in x^2
 *              up to |x| = 8, past it sign(x) / sqrt|x| times a Chebyshev series in 16 / |x|;
 *   digamma x  the recurrence psi(x) = psi(x + K) - sum 1/(x + k) to x + K >= 6.5 (f32) or
 *              10.5 (f64), then the asymptotic series ln y - 1/2y - sum B2k / (2k y^2k);
 *              below 0.5 the reflection psi(1 - x) - pi / tan(pi (x - round x)); NaN at the
 *              poles
 *              (x <= 0, integral);
 *   zeta(s, q) Hurwitz zeta by Euler-Maclaurin: N terms (q + k)^-s, the integral
 *              (q + N)^(1-s) / (s - 1), half the next term, M Bernoulli corrections; +inf at
 *              s = 1; for q <= 0 integral, +inf when s is an even integer else NaN; NaN for
 *              q <= 0 with s not integral and for s < 1 (XLA's CHLO rules);
 *   polygamma(n, x)  digamma for n = 0, else (-1)^(n+1) n! zeta(n + 1, x) (n! = (10a)! from
 *              a table times the rest of the product), in f64 for every type (in f32, n! and the
 *              zeta overflow and underflow where their product does not); NaN for n
 *              negative or not integral. */
#ifndef KILN_PASSES_SPECIAL_MATH_H_
#define KILN_PASSES_SPECIAL_MATH_H_

#include "compiler/passes/hlo_builder.h"

kiln_hlo_instruction_t *kiln_special_erfc(kiln_builder_t *b, kiln_hlo_instruction_t *x);
kiln_hlo_instruction_t *kiln_special_bessel_i1e(kiln_builder_t *b, kiln_hlo_instruction_t *x);
kiln_hlo_instruction_t *kiln_special_digamma(kiln_builder_t *b, kiln_hlo_instruction_t *x);
kiln_hlo_instruction_t *kiln_special_zeta(kiln_builder_t *b, kiln_hlo_instruction_t *s,
                                          kiln_hlo_instruction_t *q);
kiln_hlo_instruction_t *kiln_special_polygamma(kiln_builder_t *b, kiln_hlo_instruction_t *n,
                                               kiln_hlo_instruction_t *x);

#endif /* KILN_PASSES_SPECIAL_MATH_H_ */
