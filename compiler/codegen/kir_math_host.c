/* Host f32 math as straight-line LLVM IR (no calls, so the loop vectorizer can widen it):
 * Cephes-style range reduction and polynomials for exp, log, tanh, sin, cos (for ops rounded
 * to a narrow float, tanh is a cheaper rational approximation); Kahan's forms
 * for expm1 and log1p; Eigen's rational approximation for erf; Newton-refined cbrt.
 * pow is llvm.pow (lowered to libm's powf) and atan2 calls atan2f (neither vectorized;
 * documented in kir_pipeline.h).
 * Measured accuracy against glibc: see tests/test_kir_host_math.c. */
#include <math.h>

#include "compiler/codegen/kir_llvm.h"

typedef struct m {
  kir_llvm_t *L;
  LLVMBuilderRef b;
} m_t;

static LLVMValueRef cf(m_t *m, double v) {
  return LLVMConstReal(m->L->f32, v);
}
static LLVMValueRef ci(m_t *m, uint32_t v) {
  return LLVMConstInt(m->L->i32, v, 0);
}
static LLVMValueRef fadd(m_t *m, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFAdd(m->b, a, b, "");
}
static LLVMValueRef fsub(m_t *m, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFSub(m->b, a, b, "");
}
static LLVMValueRef fmul(m_t *m, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFMul(m->b, a, b, "");
}
static LLVMValueRef fdiv(m_t *m, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFDiv(m->b, a, b, "");
}
static LLVMValueRef fsel(m_t *m, LLVMValueRef c, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildSelect(m->b, c, a, b, "");
}
static LLVMValueRef fcmp(m_t *m, LLVMRealPredicate p, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildFCmp(m->b, p, a, b, "");
}
static LLVMValueRef fabs_(m_t *m, LLVMValueRef x) {
  LLVMTypeRef t = m->L->f32;
  return kir_llvm_intrinsic(m->L, "llvm.fabs", &t, 1, &x, 1);
}
static LLVMValueRef fround(m_t *m, LLVMValueRef x) {
  LLVMTypeRef t = m->L->f32;
  return kir_llvm_intrinsic(m->L, "llvm.rint", &t, 1, &x, 1);
}
static LLVMValueRef copysign_(m_t *m, LLVMValueRef mag, LLVMValueRef sgn) {
  LLVMTypeRef t = m->L->f32;
  LLVMValueRef a[2] = {mag, sgn};
  return kir_llvm_intrinsic(m->L, "llvm.copysign", &t, 1, a, 2);
}
static LLVMValueRef bits(m_t *m, LLVMValueRef x) {
  return LLVMBuildBitCast(m->b, x, m->L->i32, "");
}
static LLVMValueRef flt(m_t *m, LLVMValueRef i) {
  return LLVMBuildBitCast(m->b, i, m->L->f32, "");
}

/* Horner: c[0] * x^(n-1) + ... + c[n-1]. */
static LLVMValueRef poly(m_t *m, LLVMValueRef x, const double *c, int n) {
  LLVMValueRef r = cf(m, c[0]);
  for (int i = 1; i < n; i++) r = fadd(m, fmul(m, r, x), cf(m, c[i]));
  return r;
}

/* a * b + c, fused where the target has FMA. */
static LLVMValueRef fmuladd(m_t *m, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
  LLVMTypeRef t = m->L->f32;
  LLVMValueRef args[3] = {a, b, c};
  return kir_llvm_intrinsic(m->L, "llvm.fmuladd", &t, 1, args, 3);
}

/* Horner with fused multiply-adds where the target has them. */
static LLVMValueRef poly_fma(m_t *m, LLVMValueRef x, const double *c, int n) {
  LLVMValueRef r = cf(m, c[0]);
  for (int i = 1; i < n; i++) r = fmuladd(m, r, x, cf(m, c[i]));
  return r;
}

/* 2^n for an integer-valued float n in [-150, 128], as two exponent-bit products. */
static LLVMValueRef scale2(m_t *m, LLVMValueRef p, LLVMValueRef nf) {
  LLVMBuilderRef b = m->b;
  LLVMValueRef n = LLVMBuildFPToSI(b, nf, m->L->i32, "");
  LLVMValueRef n1 = LLVMBuildAShr(b, n, ci(m, 1), "");
  LLVMValueRef n2 = LLVMBuildSub(b, n, n1, "");
  LLVMValueRef s1 = flt(m, LLVMBuildShl(b, LLVMBuildAdd(b, n1, ci(m, 127), ""), ci(m, 23), ""));
  LLVMValueRef s2 = flt(m, LLVMBuildShl(b, LLVMBuildAdd(b, n2, ci(m, 127), ""), ci(m, 23), ""));
  return fmul(m, fmul(m, p, s1), s2);
}

static LLVMValueRef m_exp(m_t *m, LLVMValueRef x) {
  static const double P[] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
                             4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1};
  LLVMValueRef xc = fsel(m, fcmp(m, LLVMRealOGT, x, cf(m, 88.8)), cf(m, 88.8), x);
  xc = fsel(m, fcmp(m, LLVMRealOLT, xc, cf(m, -104.0)), cf(m, -104.0), xc);
  xc = fsel(m, fcmp(m, LLVMRealUNO, x, x), cf(m, 0.0), xc);
  LLVMValueRef n = fround(m, fmul(m, xc, cf(m, 1.44269504088896341)));
  LLVMValueRef r =
      fsub(m, fsub(m, xc, fmul(m, n, cf(m, 0.693359375))), fmul(m, n, cf(m, -2.12194440e-4)));
  LLVMValueRef z = fmul(m, r, r);
  LLVMValueRef p = fadd(m, fadd(m, fmul(m, poly(m, r, P, 6), z), r), cf(m, 1.0));
  LLVMValueRef y = scale2(m, p, n);
  y = fsel(m, fcmp(m, LLVMRealOGT, x, cf(m, 88.72283935546875)), cf(m, INFINITY), y);
  y = fsel(m, fcmp(m, LLVMRealOLT, x, cf(m, -103.972084)), cf(m, 0.0), y);
  return fsel(m, fcmp(m, LLVMRealUNO, x, x), x, y);
}

static LLVMValueRef m_log(m_t *m, LLVMValueRef x) {
  static const double P[] = {7.0376836292E-2,  -1.1514610310E-1, 1.1676998740E-1,
                             -1.2420140846E-1, 1.4249322787E-1,  -1.6668057665E-1,
                             2.0000714765E-1,  -2.4999993993E-1, 3.3333331174E-1};
  LLVMBuilderRef b = m->b;
  /* Subnormals: scale by 2^23 first. */
  LLVMValueRef sub = fcmp(m, LLVMRealOLT, x, cf(m, 1.17549435e-38));
  LLVMValueRef xs = fsel(m, sub, fmul(m, x, cf(m, 8388608.0)), x);
  LLVMValueRef u = bits(m, xs);
  LLVMValueRef e = LLVMBuildSub(
      b, LLVMBuildAnd(b, LLVMBuildLShr(b, u, ci(m, 23), ""), ci(m, 0xff), ""), ci(m, 126), "");
  e = LLVMBuildSub(b, e, LLVMBuildSelect(b, sub, ci(m, 23), ci(m, 0), ""), "");
  LLVMValueRef f =
      flt(m, LLVMBuildOr(b, LLVMBuildAnd(b, u, ci(m, 0x007fffff), ""), ci(m, 0x3f000000), ""));
  LLVMValueRef small = fcmp(m, LLVMRealOLT, f, cf(m, 0.707106781186547524));
  LLVMValueRef ef = LLVMBuildSIToFP(b, e, m->L->f32, "");
  ef = fsel(m, small, fsub(m, ef, cf(m, 1.0)), ef);
  f = fsel(m, small, fsub(m, fadd(m, f, f), cf(m, 1.0)), fsub(m, f, cf(m, 1.0)));
  LLVMValueRef z = fmul(m, f, f);
  LLVMValueRef y = fmul(m, fmul(m, f, z), poly(m, f, P, 9));
  y = fadd(m, y, fmul(m, ef, cf(m, -2.12194440e-4)));
  y = fsub(m, y, fmul(m, z, cf(m, 0.5)));
  LLVMValueRef r = fadd(m, fadd(m, f, y), fmul(m, ef, cf(m, 0.693359375)));
  r = fsel(m, fcmp(m, LLVMRealOEQ, x, cf(m, INFINITY)), x, r);
  r = fsel(m, fcmp(m, LLVMRealOEQ, x, cf(m, 0.0)), cf(m, -INFINITY), r);
  return fsel(m, fcmp(m, LLVMRealULT, x, cf(m, 0.0)), cf(m, NAN), r); /* x < 0 or NaN */
}

/* tanh: the odd Cephes polynomial below |x| = 0.625; above, 1 - 2 / (e^{2|x|} + 1) with the
 * sign of x, where e^{2|x|} is an exp without special cases: 2|x| is clamped to 20 (tanh is
 * 1.0f from 9.1 on), so 2^n needs no overflow or underflow handling. NaN takes the
 * polynomial path (unordered compare) and propagates. */
static LLVMValueRef m_tanh(m_t *m, LLVMValueRef x) {
  static const double P[] = {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2,
                             1.33314422036E-1, -3.33332819422E-1};
  static const double E[] = {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3,
                             4.1665795894E-2, 1.6666665459E-1, 5.0000001201E-1};
  LLVMBuilderRef b = m->b;
  LLVMValueRef a = fabs_(m, x);
  LLVMValueRef z = fmul(m, x, x);
  /* x's sign restored: at x = −0 the sum is (−0) + (−0)·(−0) = +0, but tanh(−0) = −0 */
  LLVMValueRef small = copysign_(m, fmuladd(m, fmul(m, poly_fma(m, z, P, 5), z), x, x), x);
  LLVMValueRef a2 = fadd(m, a, a);
  a2 = fsel(m, fcmp(m, LLVMRealOGT, a2, cf(m, 20.0)), cf(m, 20.0), a2);
  LLVMValueRef n = fround(m, fmul(m, a2, cf(m, 1.44269504088896341)));
  LLVMValueRef r = fmuladd(m, n, cf(m, -0.693359375), a2);
  r = fmuladd(m, n, cf(m, 2.12194440e-4), r);
  LLVMValueRef p = fadd(m, fmuladd(m, poly_fma(m, r, E, 6), fmul(m, r, r), r), cf(m, 1.0));
  LLVMValueRef ni = LLVMBuildShl(b, LLVMBuildFPToSI(b, n, m->L->i32, ""), ci(m, 23), "");
  LLVMValueRef e = flt(m, LLVMBuildAdd(b, bits(m, p), ni, ""));
  LLVMValueRef big = fsub(m, cf(m, 1.0), fdiv(m, cf(m, 2.0), fadd(m, e, cf(m, 1.0))));
  big = copysign_(m, big, x);
  return fsel(m, fcmp(m, LLVMRealULT, a, cf(m, 0.625)), small, big);
}

/* tanh for ops whose result is rounded to a narrow float (bf16, f16, f8): x * P(x^2) / Q(x^2)
 * on x clamped to [-9, 9], P and Q of degree 4 in x^2 (a rational minimax fit of tanh(x)/x
 * for relative error, fitted for this file; 2e-8 relative before f32 rounding, at most 5.1 f32
 * ulp after it, far below half a bf16 / f16 ulp). About 12 vector instructions and a divide,
 * no exp; NaN propagates through the compares and arithmetic, +-inf give +-0.99999988. */
static LLVMValueRef m_tanh_narrow(m_t *m, LLVMValueRef x) {
  static const double P[] = {1.3353286471940269e-08, 2.0608287398471351e-05, 0.0034955496559165612,
                             0.13380996770256851, 0.99999997962530074};
  static const double Q[] = {7.7760514287094966e-07, 0.00032855647690800997, 0.025876846707854038,
                             0.46714312480031289, 1.0};
  LLVMValueRef c = fsel(m, fcmp(m, LLVMRealOGT, x, cf(m, 9.0)), cf(m, 9.0), x);
  c = fsel(m, fcmp(m, LLVMRealOLT, c, cf(m, -9.0)), cf(m, -9.0), c);
  LLVMValueRef t = fmul(m, c, c);
  LLVMValueRef p = cf(m, P[0]), q = cf(m, Q[0]);
  for (int i = 1; i < 5; i++) {
    p = fmuladd(m, p, t, cf(m, P[i]));
    q = fmuladd(m, q, t, cf(m, Q[i]));
  }
  return fdiv(m, fmul(m, c, p), q);
}

static LLVMValueRef m_expm1(m_t *m, LLVMValueRef x) {
  LLVMValueRef u = m_exp(m, x);
  LLVMValueRef um1 = fsub(m, u, cf(m, 1.0));
  /* um1 * (x / log u): the quotient is near 1, so the product cannot overflow early */
  LLVMValueRef k = fmul(m, um1, fdiv(m, x, m_log(m, u)));
  LLVMValueRef r = fsel(m, fcmp(m, LLVMRealOEQ, u, cf(m, 1.0)), x, k);
  r = fsel(m, fcmp(m, LLVMRealOEQ, um1, cf(m, -1.0)), cf(m, -1.0), r);
  r = fsel(m, fcmp(m, LLVMRealOEQ, u, cf(m, INFINITY)), u, r);
  return fsel(m, fcmp(m, LLVMRealUNO, x, x), x, r);
}

static LLVMValueRef m_log1p(m_t *m, LLVMValueRef x) {
  LLVMValueRef u = fadd(m, x, cf(m, 1.0));
  /* log u * (x / (u - 1)): the quotient is near 1, so huge x does not overflow */
  LLVMValueRef k = fmul(m, m_log(m, u), fdiv(m, x, fsub(m, u, cf(m, 1.0))));
  LLVMValueRef r = fsel(m, fcmp(m, LLVMRealOEQ, u, cf(m, 1.0)), x, k);
  r = fsel(m, fcmp(m, LLVMRealOEQ, u, cf(m, INFINITY)), u, r);
  r = fsel(m, fcmp(m, LLVMRealOEQ, u, cf(m, 0.0)), cf(m, -INFINITY), r);
  return fsel(m, fcmp(m, LLVMRealUNO, u, u), cf(m, NAN),
              fsel(m, fcmp(m, LLVMRealOLT, u, cf(m, 0.0)), cf(m, NAN), r));
}

/* sin (cos_wanted = false) or cos of x; accurate for |x| up to about 8192. */
/* 2/pi in binary, 256 bits after the point (b_1 is the top bit of the first word). */
static const uint32_t kTwoOverPi[8] = {0xA2F9836E, 0x4E441529, 0xFC2757D1, 0xF534DDC0,
                                       0xDB629599, 0x3C439041, 0xFE5163AB, 0xDEBBC561};

/* Bits b_start ... b_(start+n-1) of 2/pi as an integer (n <= 64); bits before the point
 * (start < 1) are zero. */
static uint64_t two_over_pi_bits(int start, int n) {
  uint64_t v = 0;
  for (int i = start; i < start + n; i++) {
    int bit = i >= 1 && i <= 256 ? (int)(kTwoOverPi[(i - 1) / 32] >> (31 - (i - 1) % 32)) & 1 : 0;
    v = (v << 1) | (uint64_t)bit;
  }
  return v;
}

/* Tables of the 96-bit window of 2/pi each f32 exponent field E needs for Payne and Hanek's
 * reduction: x = M 2^e (M the 24-bit significand, e = E - 150) and bits b_i with i <= e - 2
 * contribute multiples of 4 to x 2/pi, so x 2/pi mod 4 = M W 2^-94 mod 4 with W the bits
 * b_(e-1) ... b_(e+94): hi holds the first 64 of them, lo the next 32. */
static void two_over_pi_tables(m_t *m, LLVMValueRef *hi, LLVMValueRef *lo) {
  kir_llvm_t *L = m->L;
  *hi = LLVMGetNamedGlobal(L->mod, "__kiln_two_over_pi_hi");
  *lo = LLVMGetNamedGlobal(L->mod, "__kiln_two_over_pi_lo");
  if (*hi && *lo) return;
  LLVMValueRef vh[256], vl[256];
  for (int E = 0; E < 256; E++) {
    int start = E - 150 - 1;
    vh[E] = LLVMConstInt(L->i64, two_over_pi_bits(start, 64), 0);
    vl[E] = LLVMConstInt(L->i32, two_over_pi_bits(start + 64, 32), 0);
  }
  *hi = LLVMAddGlobal(L->mod, LLVMArrayType(L->i64, 256), "__kiln_two_over_pi_hi");
  LLVMSetInitializer(*hi, LLVMConstArray(L->i64, vh, 256));
  *lo = LLVMAddGlobal(L->mod, LLVMArrayType(L->i32, 256), "__kiln_two_over_pi_lo");
  LLVMSetInitializer(*lo, LLVMConstArray(L->i32, vl, 256));
  LLVMValueRef gs[2] = {*hi, *lo};
  for (int i = 0; i < 2; i++) {
    LLVMSetGlobalConstant(gs[i], 1);
    LLVMSetLinkage(gs[i], LLVMInternalLinkage);
    LLVMSetAlignment(gs[i], 64);
  }
}

/* Payne-Hanek reduction of a = |x| (any finite f32): the quadrant n (mod 4) of the nearest
 * multiple of pi/2 and a - n pi/2 as an f32. F = (M W mod 2^96) / 2^32 is x 2/pi mod 4 in
 * fixed point with 62 fractional bits; n = F rounded to the nearest integer, the rest is
 * exact in 64-bit integers and scaled by pi/2 in f64. */
static void reduce_payne_hanek(m_t *m, LLVMValueRef a, LLVMValueRef *quadrant, LLVMValueRef *r) {
  kir_llvm_t *L = m->L;
  LLVMBuilderRef b = m->b;
  LLVMValueRef hi_t, lo_t;
  two_over_pi_tables(m, &hi_t, &lo_t);
  LLVMValueRef u = bits(m, a);
  LLVMValueRef E = LLVMBuildZExt(b, LLVMBuildLShr(b, u, ci(m, 23), ""), L->i64, "");
  LLVMValueRef zero = LLVMConstInt(L->i64, 0, 0);
  LLVMValueRef ih[2] = {zero, E};
  LLVMValueRef wh = LLVMBuildLoad2(
      b, L->i64, LLVMBuildInBoundsGEP2(b, LLVMArrayType(L->i64, 256), hi_t, ih, 2, ""), "");
  LLVMValueRef wl = LLVMBuildLoad2(
      b, L->i32, LLVMBuildInBoundsGEP2(b, LLVMArrayType(L->i32, 256), lo_t, ih, 2, ""), "");
  LLVMValueRef M = LLVMBuildZExt(
      b, LLVMBuildOr(b, LLVMBuildAnd(b, u, ci(m, 0x7fffff), ""), ci(m, 0x800000), ""), L->i64, "");
  LLVMValueRef low = LLVMBuildLShr(b, LLVMBuildMul(b, M, LLVMBuildZExt(b, wl, L->i64, ""), ""),
                                   LLVMConstInt(L->i64, 32, 0), "");
  LLVMValueRef F = LLVMBuildAdd(b, LLVMBuildMul(b, M, wh, ""), low, "");
  LLVMValueRef n =
      LLVMBuildLShr(b, LLVMBuildAdd(b, F, LLVMConstInt(L->i64, UINT64_C(1) << 61, 0), ""),
                    LLVMConstInt(L->i64, 62, 0), "");
  LLVMValueRef rem = LLVMBuildSub(b, F, LLVMBuildShl(b, n, LLVMConstInt(L->i64, 62, 0), ""), "");
  LLVMValueRef rd = LLVMBuildFMul(b, LLVMBuildSIToFP(b, rem, L->f64, ""),
                                  LLVMConstReal(L->f64, M_PI_2 / 4611686018427387904.0), "");
  *r = LLVMBuildFPTrunc(b, rd, L->f32, "");
  *quadrant = LLVMBuildTrunc(b, n, L->i32, "");
}

/* sin / cos: Cephes' reduction by pi/4 in three parts up to |x| = 128 (its error grows with
 * |x|: 16 ulp near a zero of cos at 5684), past that Payne and Hanek's (reduce_payne_hanek);
 * then Cephes' polynomials on [-pi/4, pi/4]. */
static LLVMValueRef m_sincos(m_t *m, LLVMValueRef x, bool cos_wanted) {
  static const double S[] = {-1.9515295891E-4, 8.3321608736E-3, -1.6666654611E-1};
  static const double C[] = {2.443315711809948E-005, -1.388731625493765E-003,
                             4.166664568298827E-002};
  LLVMBuilderRef b = m->b;
  LLVMValueRef a = fabs_(m, x);
  LLVMValueRef large = fcmp(m, LLVMRealOGT, a, cf(m, 128.0));
  LLVMValueRef as = fsel(m, large, cf(m, 0.0), a);
  LLVMValueRef j = LLVMBuildFPToUI(b, fmul(m, as, cf(m, 1.27323954473516)), m->L->i32, "");
  j = LLVMBuildAnd(b, LLVMBuildAdd(b, j, ci(m, 1), ""), ci(m, ~1u), "");
  LLVMValueRef y = LLVMBuildUIToFP(b, j, m->L->f32, "");
  LLVMValueRef r = fsub(m,
                        fsub(m, fsub(m, as, fmul(m, y, cf(m, 0.78515625))),
                             fmul(m, y, cf(m, 2.4187564849853515625e-4))),
                        fmul(m, y, cf(m, 3.77489497744594108e-8)));
  LLVMValueRef q_large, r_large;
  reduce_payne_hanek(m, a, &q_large, &r_large);
  /* j counts octants (even): quadrant = j / 2 */
  j = LLVMBuildSelect(b, large, LLVMBuildShl(b, q_large, ci(m, 1), ""), j, "");
  r = fsel(m, large, r_large, r);
  LLVMValueRef flip = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, j, ci(m, 4), ""), ci(m, 0), "");
  LLVMValueRef j2 = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, j, ci(m, 2), ""), ci(m, 0), "");
  LLVMValueRef z = fmul(m, r, r);
  LLVMValueRef sp = fadd(m, fmul(m, fmul(m, poly(m, z, S, 3), z), r), r);
  LLVMValueRef cp = fadd(
      m, fsub(m, fmul(m, fmul(m, poly(m, z, C, 3), z), z), fmul(m, z, cf(m, 0.5))), cf(m, 1.0));
  LLVMValueRef res, neg;
  if (!cos_wanted) {
    res = fsel(m, j2, cp, sp);
    /* x's sign bit, not x < 0: sin(−0) is −0 (so tan(−0) = −0 and rsqrt(tan(−0)) = −inf,
     * fuzz-2012185) */
    neg = LLVMBuildXor(b, flip, LLVMBuildICmp(b, LLVMIntSLT, bits(m, x), ci(m, 0), ""), "");
  } else {
    res = fsel(m, j2, sp, cp);
    neg = LLVMBuildXor(b, flip, j2, "");
  }
  res = fsel(m, neg, LLVMBuildFNeg(b, res, ""), res);
  /* inf / NaN -> NaN */
  return fsel(m, fcmp(m, LLVMRealUGE, a, cf(m, INFINITY)), cf(m, NAN), res);
}

static LLVMValueRef m_erf(m_t *m, LLVMValueRef x) {
  static const double A[] = {-2.72614225801306e-10, 2.77068142495902e-08,  -2.10102402082508e-06,
                             -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
                             -1.60960333262415e-02};
  static const double B[] = {-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                             -7.37332916720468e-03, -1.42647390514189e-02};
  LLVMValueRef c = fsel(m, fcmp(m, LLVMRealOGT, x, cf(m, 4.0)), cf(m, 4.0), x);
  c = fsel(m, fcmp(m, LLVMRealOLT, c, cf(m, -4.0)), cf(m, -4.0), c);
  LLVMValueRef z = fmul(m, c, c);
  LLVMValueRef r = fdiv(m, fmul(m, c, poly(m, z, A, 7)), poly(m, z, B, 5));
  return fsel(m, fcmp(m, LLVMRealUNO, x, x), x, r);
}

static LLVMValueRef m_cbrt(m_t *m, LLVMValueRef x) {
  LLVMValueRef a = fabs_(m, x);
  LLVMValueRef y = m_exp(m, fmul(m, m_log(m, a), cf(m, 1.0 / 3.0)));
  for (int i = 0; i < 2; i++) {
    LLVMValueRef y2 = fmul(m, y, y);
    y = fsub(m, y, fdiv(m, fsub(m, fmul(m, y2, y), a), fmul(m, cf(m, 3.0), y2)));
  }
  LLVMValueRef r = copysign_(m, y, x);
  LLVMValueRef special = LLVMBuildOr(m->b, fcmp(m, LLVMRealOEQ, a, cf(m, 0.0)),
                                     fcmp(m, LLVMRealUEQ, a, cf(m, INFINITY)), "");
  return fsel(m, special, x, r);
}

LLVMValueRef kir_llvm_host_math_f32(kir_llvm_t *L, kiln_kir_opcode_t op, LLVMValueRef x,
                                    LLVMValueRef y) {
  m_t m = {L, L->b};
  switch (op) {
    case KILN_KIR_EXP:
      return m_exp(&m, x);
    case KILN_KIR_EXPM1:
      return m_expm1(&m, x);
    case KILN_KIR_LOG:
      return m_log(&m, x);
    case KILN_KIR_LOG1P:
      return m_log1p(&m, x);
    case KILN_KIR_TANH:
      return kir_llvm_is_narrow_float(L->math_elem) ? m_tanh_narrow(&m, x) : m_tanh(&m, x);
    case KILN_KIR_SIN:
      return m_sincos(&m, x, false);
    case KILN_KIR_COS:
      return m_sincos(&m, x, true);
    case KILN_KIR_TAN:
      return fdiv(&m, m_sincos(&m, x, false), m_sincos(&m, x, true));
    case KILN_KIR_ERF:
      return m_erf(&m, x);
    case KILN_KIR_CBRT:
      return m_cbrt(&m, x);
    case KILN_KIR_LOGISTIC: {
      LLVMValueRef e = m_exp(&m, LLVMBuildFNeg(L->b, x, ""));
      return fdiv(&m, cf(&m, 1.0), fadd(&m, cf(&m, 1.0), e));
    }
    case KILN_KIR_RSQRT: {
      LLVMTypeRef t = L->f32;
      return fdiv(&m, cf(&m, 1.0), kir_llvm_intrinsic(L, "llvm.sqrt", &t, 1, &x, 1));
    }
    case KILN_KIR_POW: {
      /* The intrinsic (a call of powf once lowered) has no side effects for LLVM, where libm's
       * powf writes errno: a power of loop-invariant scalars (AdamW's bias corrections
       * 1 - beta^t) is then hoisted out of the kernel's loop, which vectorizes. */
      LLVMValueRef a[2] = {x, y};
      LLVMTypeRef t = L->f32;
      return kir_llvm_intrinsic(L, "llvm.pow", &t, 1, a, 2);
    }
    case KILN_KIR_ATAN2: {
      LLVMValueRef a[2] = {x, y};
      return kir_llvm_call_extern(L, "atan2f", L->f32, a, 2);
    }
    default:
      kir_llvm_fail(
          L, KILN_ERR_UNIMPLEMENTED("kir->host: no f32 math for %s", kiln_kir_opcode_name(op)));
      return x;
  }
}
