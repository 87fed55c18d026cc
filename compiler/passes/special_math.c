/* Special functions as elementwise HLO: compiler/passes/special_math.h says how each is
 * computed. The constants are mathematics: Bernoulli numbers (B2k / (2k)! for Euler-Maclaurin,
 * B2k / 2k for the digamma series, (10i)! rounded) and Chebyshev series made for kiln with
 * 50-digit arithmetic (60 nodes each; the terms kept leave a relative 1e-19 for f64, 3e-10
 * for f32): x exp(x^2) erfc(x) on [0.5, inf) through t = (3.5 - x) / (x + 2.5), and
 * sqrt(x) exp(-x) I1(x) on [8, inf) through t = 16 / x - 1. */
#include "compiler/passes/special_math.h"

#include <math.h>

#define BIN(op, x, y) kiln_builder_binary(b, KILN_OP_##op, (x), (y))
#define UN(op, x) kiln_builder_unary(b, KILN_OP_##op, (x))
#define CMP(dir, x, y) kiln_builder_compare(b, KILN_CMP_##dir, (x), (y))
#define SEL(p, x, y) kiln_builder_select(b, (p), (x), (y))

typedef kiln_hlo_instruction_t instr_t;

/* The constant v shaped like x. */
static instr_t *k(kiln_builder_t *b, double v, const instr_t *x) {
  if (!x) return NULL;
  return kiln_builder_splat(b, kiln_builder_const_f64(b, x->shape->type, v), x);
}

/* x in the type the math runs in (f64 stays, other floats go to f32); NULL when x is not a
 * real float array. */
static instr_t *widen(kiln_builder_t *b, instr_t *x) {
  if (!x || !kiln_shape_is_array(x->shape) || !kiln_elem_type_is_float(x->shape->type)) return NULL;
  kiln_elem_type_t t = x->shape->type;
  return t == KILN_F64 || t == KILN_F32 ? x : kiln_builder_convert(b, x, KILN_F32);
}

static instr_t *narrow(kiln_builder_t *b, instr_t *r, kiln_elem_type_t type) {
  return r && r->shape->type != type ? kiln_builder_convert(b, r, type) : r;
}

static bool is_f64(const instr_t *x) {
  return x && x->shape->type == KILN_F64;
}

/* x == floor(x) (false for NaN; true for infinities). */
static instr_t *integral(kiln_builder_t *b, instr_t *x) {
  return CMP(EQ, x, UN(FLOOR, x));
}

/* ---- erfc ---- */

static const double kErfcxCheb[27] = {
    4.93173431818814924648e-1,   -1.11290035925720856086e-1,  -5.37517298878831362322e-2,
    -1.6478490113218727056e-2,   -3.40163625739344949026e-3,  -4.11313262030043746704e-4,
    -3.45044911803848053762e-6,  7.7690566317856007461e-6,    7.89749609969214470605e-7,
    -1.38577516229461683525e-7,  -2.80374036278792689848e-8,  3.19913901848319817265e-9,
    9.14640964797101886703e-10,  -1.07514694642945006167e-10, -3.00818987660935314162e-11,
    4.81352264711201817577e-12,  9.47404128053807123574e-13,  -2.42033354998780701066e-13,
    -2.35694524050555870718e-14, 1.21172339298762155841e-14,  1.85003158113188078729e-17,
    -5.54494915964330888358e-16, 5.61286292676225677908e-17,  2.0519876216533587897e-17,
    -5.23381360249567427555e-18, -3.75504350951598981334e-19, 3.22827450692392062676e-19};

/* sum c[i] T_i(t) for i < n (Clenshaw's recurrence). */
static instr_t *chebyshev(kiln_builder_t *b, instr_t *t, const double *c, int n) {
  instr_t *two_t = BIN(ADD, t, t), *b1 = k(b, 0.0, t), *b2 = b1;
  for (int i = n - 1; i >= 1; i--) {
    instr_t *bi = BIN(SUBTRACT, BIN(ADD, k(b, c[i], t), BIN(MULTIPLY, two_t, b1)), b2);
    b2 = b1;
    b1 = bi;
  }
  return BIN(SUBTRACT, BIN(ADD, k(b, c[0], t), BIN(MULTIPLY, t, b1)), b2);
}

/* exp(-x^2) without the rounding of x^2: x = hi + lo with hi's square exact (hi keeps half
 * the significand), x^2 = hi^2 + lo (x + hi). */
static instr_t *exp_minus_square(kiln_builder_t *b, instr_t *x) {
  bool d = is_f64(x);
  kiln_elem_type_t bits = d ? KILN_U64 : KILN_U32;
  uint64_t mask = d ? ~((UINT64_C(1) << 27) - 1) : (uint64_t)0xFFFFF000u;
  instr_t *m = kiln_builder_splat(b, kiln_builder_const_u64(b, bits, mask), x);
  instr_t *hi = kiln_builder_bitcast_convert(
      b, BIN(AND, kiln_builder_bitcast_convert(b, x, bits), m), x ? x->shape->type : KILN_F32);
  instr_t *lo = BIN(SUBTRACT, x, hi);
  return BIN(MULTIPLY, UN(EXP, UN(NEGATE, BIN(MULTIPLY, hi, hi))),
             UN(EXP, UN(NEGATE, BIN(MULTIPLY, lo, BIN(ADD, x, hi)))));
}

instr_t *kiln_special_erfc(kiln_builder_t *b, instr_t *x0) {
  instr_t *x = widen(b, x0);
  if (!x) return NULL;
  instr_t *half = k(b, 0.5, x), *big = CMP(GE, x, half);
  instr_t *near = BIN(SUBTRACT, k(b, 1.0, x), UN(ERF, x));
  instr_t *xs = SEL(big, x, half); /* the far lanes only: finite work everywhere else */
  instr_t *t = BIN(DIVIDE, BIN(SUBTRACT, k(b, 3.5, x), xs), BIN(ADD, xs, k(b, 2.5, x)));
  instr_t *h = chebyshev(b, t, kErfcxCheb, is_f64(x) ? 27 : 13);
  instr_t *far = BIN(DIVIDE, BIN(MULTIPLY, exp_minus_square(b, xs), h), xs);
  far = SEL(CMP(EQ, xs, k(b, INFINITY, x)), k(b, 0.0, x), far);
  return narrow(b, SEL(big, far, near), x0->shape->type);
}

/* ---- bessel_i1e ---- */

/* sqrt(x) exp(-x) I1(x) in t = 16 / x - 1 for x >= 8. */
static const double kI1LargeCheb[30] = {
    3.89288117509140060237e-1,   -9.76109749136146840777e-3,  -1.10588938762623716291e-4,
    -3.88256480887769039346e-6,  -2.51223623787020892529e-7,  -2.63146884688951950684e-8,
    -3.83538038596423702205e-9,  -5.58974346219658380687e-10, -1.8974958123505412345e-11,
    3.25260358301548823856e-11,  1.41258074366137813316e-11,  2.03562854414708950722e-12,
    -7.19855177624590851209e-13, -4.08355111109219731823e-13, -2.10154184277266431302e-14,
    4.2724400167119513543e-14,   1.04202769841288027642e-14,  -3.81440307243700780477e-15,
    -1.88035477551078244851e-15, 3.30820231092092828273e-16,  2.96262899764595013907e-16,
    -3.20952592199342395878e-17, -4.65030536848935832557e-17, 4.41434832307170794994e-18,
    7.51729631084210480542e-18,  -9.31417886732688337558e-19, -1.24219327519489095613e-18,
    2.41427671945484846902e-19,  2.02694438405328517944e-19,  -6.394267188269097797e-20};

instr_t *kiln_special_bessel_i1e(kiln_builder_t *b, instr_t *x0) {
  instr_t *x = widen(b, x0);
  if (!x) return NULL;
  bool d = is_f64(x);
  instr_t *ax = UN(ABS, x), *eight = k(b, 8.0, x), *near = CMP(LE, ax, eight);
  instr_t *an = SEL(near, ax, eight), *af = SEL(near, eight, ax); /* each branch's own lanes */
  /* I1(x) / x = 1/2 sum y^k / (k! (k+1)!), y = x^2 / 4 <= 16: positive terms, no
   * cancellation (a Chebyshev series there cancels 7 bits) */
  instr_t *y = BIN(MULTIPLY, BIN(MULTIPLY, an, an), k(b, 0.25, x));
  int terms = d ? 23 : 16;
  double coef[23];
  coef[0] = 1.0;
  for (int i = 1; i < terms; i++) coef[i] = coef[i - 1] / ((double)i * (i + 1));
  instr_t *p = k(b, coef[terms - 1], x);
  for (int i = terms - 2; i >= 0; i--) p = BIN(ADD, k(b, coef[i], x), BIN(MULTIPLY, y, p));
  instr_t *small =
      BIN(MULTIPLY, BIN(MULTIPLY, BIN(MULTIPLY, p, k(b, 0.5, x)), x), UN(EXP, UN(NEGATE, an)));
  instr_t *t2 = BIN(SUBTRACT, BIN(DIVIDE, k(b, 16.0, x), af), k(b, 1.0, x));
  instr_t *large = BIN(
      MULTIPLY, BIN(DIVIDE, chebyshev(b, t2, kI1LargeCheb, d ? 30 : 8), UN(SQRT, af)), UN(SIGN, x));
  return narrow(b, SEL(near, small, large), x0->shape->type);
}

/* ---- digamma ---- */

/* B2k / 2k, k = 1..7. */
static const double kDigammaSeries[7] = {1.0 / 12,  -1.0 / 120,     1.0 / 252, -1.0 / 240,
                                         1.0 / 132, -691.0 / 32760, 1.0 / 12};

/* digamma in the math type (x already widened). */
static instr_t *digamma(kiln_builder_t *b, instr_t *x) {
  bool d = is_f64(x);
  int shift = d ? 10 : 6, terms = d ? 7 : 4;
  instr_t *reflect = CMP(LT, x, k(b, 0.5, x));
  instr_t *y = SEL(reflect, BIN(SUBTRACT, k(b, 1.0, x), x), x);
  instr_t *acc = k(b, 0.0, x); /* the smallest terms first */
  for (int i = shift - 1; i >= 0; i--)
    acc = BIN(ADD, acc, BIN(DIVIDE, k(b, 1.0, x), BIN(ADD, y, k(b, i, x))));
  instr_t *w = BIN(ADD, y, k(b, shift, x));
  instr_t *inv = BIN(DIVIDE, k(b, 1.0, x), w), *inv2 = BIN(MULTIPLY, inv, inv);
  instr_t *series = k(b, kDigammaSeries[terms - 1], x);
  for (int i = terms - 2; i >= 0; i--)
    series = BIN(ADD, k(b, kDigammaSeries[i], x), BIN(MULTIPLY, inv2, series));
  series = BIN(MULTIPLY, inv2, series);
  instr_t *psi = BIN(SUBTRACT, BIN(SUBTRACT, UN(LOG, w), BIN(MULTIPLY, k(b, 0.5, x), inv)),
                     BIN(ADD, series, acc));
  /* tan has period pi: x minus its nearest integer (exact, in [-1/2, 1/2]) keeps the
   * argument small and a tiny x whole */
  instr_t *frac = BIN(SUBTRACT, x, UN(ROUND_NEAREST_EVEN, x));
  instr_t *pi = k(b, M_PI, x);
  instr_t *refl = BIN(SUBTRACT, psi, BIN(DIVIDE, pi, UN(TAN, BIN(MULTIPLY, pi, frac))));
  instr_t *r = SEL(reflect, refl, psi);
  instr_t *pole = kiln_builder_binary(b, KILN_OP_AND, CMP(LE, x, k(b, 0.0, x)), integral(b, x));
  return SEL(pole, k(b, NAN, x), r);
}

instr_t *kiln_special_digamma(kiln_builder_t *b, instr_t *x0) {
  instr_t *x = widen(b, x0);
  return x ? narrow(b, digamma(b, x), x0->shape->type) : NULL;
}

/* ---- Hurwitz zeta ---- */

/* B2j / (2j)!, j = 1..12. */
static const double kZetaBernoulli[12] = {
    8.333333333333333333333333e-2,  -1.388888888888888888888889e-3,
    3.306878306878306878306878e-5,  -8.267195767195767195767196e-7,
    2.087675698786809897921009e-8,  -5.284190138687493184847682e-10,
    1.338253653068467883282698e-11, -3.389680296322582866830195e-13,
    8.586062056277844564135905e-15, -2.174868698558061873041516e-16,
    5.509002828360229515202653e-18, -1.395446468581252334070769e-19};

/* zeta(s, q) in the math type (s, q widened, same type and dims). */
static instr_t *zeta(kiln_builder_t *b, instr_t *s, instr_t *q) {
  bool d = is_f64(s);
  int n = d ? 12 : 9, m = d ? 12 : 6;
  instr_t *neg_s = UN(NEGATE, s);
  instr_t *acc = k(b, 0.0, s);
  for (int i = n - 1; i >= 0; i--) acc = BIN(ADD, acc, BIN(POWER, BIN(ADD, q, k(b, i, s)), neg_s));
  instr_t *a = BIN(ADD, q, k(b, n, s)), *a_s = BIN(POWER, a, neg_s);
  instr_t *integral_term = BIN(DIVIDE, BIN(MULTIPLY, a, a_s), BIN(SUBTRACT, s, k(b, 1.0, s)));
  instr_t *a2 = BIN(MULTIPLY, a, a);
  /* term j: B2j/(2j)! s (s+1) ... (s+2j-2) a^(-s-2j+1) */
  instr_t *fac = BIN(DIVIDE, BIN(MULTIPLY, s, a_s), a), *terms[12];
  for (int j = 0; j < m; j++) {
    terms[j] = BIN(MULTIPLY, k(b, kZetaBernoulli[j], s), fac);
    instr_t *up = BIN(MULTIPLY, BIN(ADD, s, k(b, 2 * j + 1, s)), BIN(ADD, s, k(b, 2 * j + 2, s)));
    fac = BIN(DIVIDE, BIN(MULTIPLY, fac, up), a2);
  }
  instr_t *corr = terms[m - 1];
  for (int j = m - 2; j >= 0; j--) corr = BIN(ADD, corr, terms[j]);
  instr_t *z =
      BIN(ADD, BIN(ADD, acc, BIN(MULTIPLY, k(b, 0.5, s), a_s)), BIN(ADD, integral_term, corr));
  /* XLA's rules, the later ones first in precedence */
  instr_t *nan = k(b, NAN, s), *inf = k(b, INFINITY, s);
  instr_t *s_int = integral(b, s), *q_nonpos = CMP(LE, q, k(b, 0.0, s));
  z = SEL(CMP(LT, s, k(b, 1.0, s)), nan, z);
  z = SEL(kiln_builder_binary(b, KILN_OP_AND, q_nonpos, UN(NOT, s_int)), nan, z);
  instr_t *even = kiln_builder_binary(b, KILN_OP_AND, s_int,
                                      CMP(EQ, BIN(REMAINDER, s, k(b, 2.0, s)), k(b, 0.0, s)));
  z = SEL(kiln_builder_binary(b, KILN_OP_AND, q_nonpos, integral(b, q)), SEL(even, inf, nan), z);
  return SEL(CMP(EQ, s, k(b, 1.0, s)), inf, z);
}

instr_t *kiln_special_zeta(kiln_builder_t *b, instr_t *s0, instr_t *q0) {
  instr_t *s = widen(b, s0), *q = widen(b, q0);
  if (!s || !q || s->shape->type != q->shape->type) return NULL;
  return narrow(b, zeta(b, s, q), s0->shape->type);
}

/* ---- polygamma ---- */

/* (10 i)!, i = 0..17, rounded to f64 (170! is the last factorial f64 holds). */
static const double kFactorialTens[18] = {1.0,
                                          3628800.0,
                                          2.43290200817664e+18,
                                          2.6525285981219107e+32,
                                          8.159152832478977e+47,
                                          3.0414093201713376e+64,
                                          8.32098711274139e+81,
                                          1.1978571669969892e+100,
                                          7.156945704626381e+118,
                                          1.4857159644817615e+138,
                                          9.332621544394415e+157,
                                          1.588245541522743e+178,
                                          6.689502913449127e+198,
                                          6.466855489220474e+219,
                                          1.3462012475717526e+241,
                                          5.713383956445855e+262,
                                          4.7147236359920616e+284,
                                          7.257415615307999e+306};

/* n! for integral n >= 0 in f64: n = 10 a + r, (10 a)! from the table times
 * (10 a + 1) ... (10 a + r); +inf past 179 (and by overflow from 171). */
static instr_t *factorial(kiln_builder_t *b, instr_t *n) {
  instr_t *a = UN(FLOOR, BIN(DIVIDE, n, k(b, 10.0, n))), *ten_a = BIN(MULTIPLY, a, k(b, 10.0, n));
  instr_t *r = BIN(SUBTRACT, n, ten_a), *f = k(b, INFINITY, n);
  for (int i = 17; i >= 0; i--) f = SEL(CMP(EQ, a, k(b, i, n)), k(b, kFactorialTens[i], n), f);
  for (int j = 1; j <= 9; j++)
    f = BIN(MULTIPLY, f, SEL(CMP(LE, k(b, j, n), r), BIN(ADD, ten_a, k(b, j, n)), k(b, 1.0, n)));
  return f;
}

instr_t *kiln_special_polygamma(kiln_builder_t *b, instr_t *n0, instr_t *x0) {
  /* in f64 whatever the type: n! and zeta(n + 1, x) leave f32's range long before their
   * product does (45! ~ 1e56 times zeta(46, 9.6) ~ 1e-45) */
  instr_t *n = widen(b, n0), *x = widen(b, x0);
  if (!n || !x || n->shape->type != x->shape->type) return NULL;
  n = narrow(b, n, KILN_F64);
  x = narrow(b, x, KILN_F64);
  instr_t *zero = k(b, 0.0, n), *one = k(b, 1.0, n);
  /* the lanes that take the zeta branch see n >= 1 */
  instr_t *nz = SEL(CMP(GE, n, one), n, one);
  instr_t *odd = CMP(NE, BIN(REMAINDER, nz, k(b, 2.0, n)), zero);
  instr_t *sign = SEL(odd, one, k(b, -1.0, n));
  instr_t *pg = BIN(MULTIPLY, BIN(MULTIPLY, sign, factorial(b, nz)), zeta(b, BIN(ADD, nz, one), x));
  instr_t *r = SEL(CMP(EQ, n, zero), digamma(b, x), pg);
  instr_t *bad = kiln_builder_binary(b, KILN_OP_OR, UN(NOT, integral(b, n)), CMP(LT, n, zero));
  return narrow(b, SEL(bad, k(b, NAN, n), r), x0->shape->type);
}
