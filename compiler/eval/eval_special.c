/* The evaluator's special functions (xla_builder.math.{Digamma,Zeta,Polygamma,BesselI1e}): the
 * reference the compiled expansions (compiler/passes/special_math.c) are checked against, so
 * they run in long double with more terms than any element type needs: digamma shifted to
 * 20 or more before its asymptotic series (10 terms), zeta by Euler-Maclaurin over 20 terms
 * with 15 Bernoulli corrections, bessel_i1e by its power series or Hankel's asymptotic
 * series. Special values follow XLA's CHLO rules
 * (compiler/passes/special_math.h). */
#include <math.h>

#include "compiler/eval/eval.h"

static const long double kPi = 3.14159265358979323846264338327950288L;

static bool integral(long double x) {
  return x == floorl(x);
}

static long double digamma_l(long double x) {
  if (isnan(x)) return x;
  if (x <= 0 && integral(x)) return NAN;
  if (x < 0.5L) return digamma_l(1 - x) - kPi / tanl(kPi * (x - roundl(x)));
  if (isinf(x)) return x;
  /* B2k / 2k, k = 1..10 */
  static const long double c[10] = {1.0L / 12,        -1.0L / 120,      1.0L / 252, -1.0L / 240,
                                    1.0L / 132,       -691.0L / 32760,  1.0L / 12,  -3617.0L / 8160,
                                    43867.0L / 14364, -174611.0L / 6600};
  long double acc = 0;
  while (x < 20) acc += 1 / x++;
  long double inv2 = 1 / (x * x), series = 0;
  for (int i = 9; i >= 0; i--) series = c[i] + inv2 * series;
  return logl(x) - 0.5L / x - inv2 * series - acc;
}

static long double zeta_l(long double s, long double q) {
  if (isnan(s) || isnan(q)) return NAN;
  if (s == 1) return INFINITY;
  if (q <= 0 && integral(q)) return integral(s) && fmodl(s, 2) == 0 ? INFINITY : NAN;
  if (q <= 0 && !integral(s)) return NAN;
  if (s < 1) return NAN;
  /* B2j / (2j)!, j = 1..15 */
  static const long double c[15] = {
      8.333333333333333333333333e-2L,  -1.388888888888888888888889e-3L,
      3.306878306878306878306878e-5L,  -8.267195767195767195767196e-7L,
      2.087675698786809897921009e-8L,  -5.284190138687493184847682e-10L,
      1.338253653068467883282698e-11L, -3.389680296322582866830195e-13L,
      8.586062056277844564135905e-15L, -2.174868698558061873041516e-16L,
      5.509002828360229515202653e-18L, -1.395446468581252334070769e-19L,
      3.53470703962946747169323e-21L,  -8.953517427037546850402611e-23L,
      2.267952452337683060310951e-24L};
  enum { N = 20 };
  long double acc = 0;
  for (int k = N - 1; k >= 0; k--) acc += powl(q + k, -s);
  long double a = q + N, a_s = powl(a, -s), fac = s * a_s / a, corr[15];
  for (int j = 0; j < 15; j++) {
    corr[j] = c[j] * fac;
    fac *= (s + 2 * j + 1) * (s + 2 * j + 2) / (a * a);
  }
  long double sum = 0;
  for (int j = 14; j >= 0; j--) sum += corr[j];
  return acc + 0.5L * a_s + a * a_s / (s - 1) + sum;
}

double kiln_eval_digamma(double x) {
  return (double)digamma_l(x);
}

double kiln_eval_zeta(double s, double q) {
  return (double)zeta_l(s, q);
}

double kiln_eval_polygamma(double n, double x) {
  if (isnan(n) || isnan(x) || n < 0 || !integral(n)) return NAN;
  if (n == 0) return kiln_eval_digamma(x);
  long double sign = fmodl(n, 2) == 0 ? -1 : 1;
  return (double)(sign * tgammal((long double)n + 1) * zeta_l((long double)n + 1, x));
}

double kiln_eval_bessel_i1e(double xd) {
  long double x = xd, ax = fabsl(x);
  if (isnan(x)) return xd;
  if (isinf(x)) return copysign(0.0, xd);
  if (ax <= 40) {
    /* sum (x/2)^(2k+1) / (k! (k+1)!): positive terms, no cancellation */
    long double h = x / 2, term = h, sum = h;
    for (int k = 1; k < 400 && fabsl(term) > fabsl(sum) * 1e-22L; k++) {
      term *= h * h / ((long double)k * (k + 1));
      sum += term;
    }
    return (double)(sum * expl(-ax));
  }
  /* e^x / sqrt(2 pi x) sum_k (-1)^k prod_j (4 - (2j-1)^2) / (k! (8x)^k), 30 terms */
  long double term = 1, sum = 1;
  for (int j = 1; j <= 30; j++) {
    term *= -(4.0L - (long double)(2 * j - 1) * (2 * j - 1)) / (j * 8 * ax);
    sum += term;
  }
  long double r = sum / sqrtl(2 * kPi * ax);
  return (double)(x < 0 ? -r : r);
}
