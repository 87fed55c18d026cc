/* One host gemm (kiln_host_gemm) against a naive loop in double, for every element-type
 * combination of kiln_gemm_desc_t: inputs are generated as doubles, stored in the operand
 * type (rounded from f64 by compiler/hlo/numeric.h's generic narrow-format path, which shares
 * no code with base/half.h's f32 conversions the host gemm uses), read back, multiplied in double,
 * and the result compared within the error of a reordered f32/f64 sum plus one rounding to the
 * output type (s8 -> s32: exactly, wrapped to 32 bits). Shared by test_host_gemm.c and
 * test_host_gemm_fallback.c; returns false and prints the first mismatch rather than asserting, so
 * a forked child can use it. */
#ifndef KILN_TESTS_HOST_GEMM_TEST_UTIL_H_
#define KILN_TESTS_HOST_GEMM_TEST_UTIL_H_

#include <complex.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "compiler/hlo/numeric.h"
#include "runtime/host/host_device.h"

/* The hash behind operand element `i`'s value (tag separates operands). */
static inline uint64_t hg_hash(int64_t i, int tag) {
  uint64_t h = (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull + (uint64_t)tag * 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 31);
}

/* A value of operand element `i` (tag separates operands): multiples of 1/16 in [-3, 3]
 * (exact in bf16 and f16: the 97 values (h % 97 - 48) / 16), integers in [-128, 127] for s8. */
static inline double hg_value(kiln_gemm_dtype_t t, int64_t i, int tag) {
  uint64_t h = hg_hash(i, tag);
  if (t == KILN_GEMM_S8) return (double)(int)(h % 256) - 128;
  return ((double)(int)(h % 97) - 48) / 16.0;
}

/* Stores value `v` (and imaginary part `w` for complex types) as element i of `p`. */
static inline void hg_store(kiln_gemm_dtype_t t, void *p, int64_t i, double v, double w) {
  switch (t) {
    case KILN_GEMM_F32:
      ((float *)p)[i] = (float)v;
      break;
    case KILN_GEMM_F64:
      ((double *)p)[i] = v;
      break;
    case KILN_GEMM_C64:
      ((float *)p)[2 * i] = (float)v, ((float *)p)[2 * i + 1] = (float)w;
      break;
    case KILN_GEMM_C128:
      ((double *)p)[2 * i] = v, ((double *)p)[2 * i + 1] = w;
      break;
    case KILN_GEMM_BF16:
      ((uint16_t *)p)[i] = kiln_f64_to_bf16(v);
      break;
    case KILN_GEMM_F16:
      ((uint16_t *)p)[i] = kiln_f64_to_f16(v);
      break;
    case KILN_GEMM_S8:
      ((int8_t *)p)[i] = (int8_t)v;
      break;
    case KILN_GEMM_S32:
      ((int32_t *)p)[i] = (int32_t)v;
      break;
    case KILN_GEMM_S16:
    case KILN_GEMM_U8:
    case KILN_GEMM_U16:
    case KILN_GEMM_U32: /* test_host_gemm_int.c covers these */
    case KILN_GEMM_SAME:
      break;
  }
}

static inline double complex hg_load(kiln_gemm_dtype_t t, const void *p, int64_t i) {
  switch (t) {
    case KILN_GEMM_F32:
      return ((const float *)p)[i];
    case KILN_GEMM_F64:
      return ((const double *)p)[i];
    case KILN_GEMM_C64:
      return CMPLX(((const float *)p)[2 * i], ((const float *)p)[2 * i + 1]);
    case KILN_GEMM_C128:
      return CMPLX(((const double *)p)[2 * i], ((const double *)p)[2 * i + 1]);
    case KILN_GEMM_BF16:
      return kiln_bf16_to_f32(((const uint16_t *)p)[i]);
    case KILN_GEMM_F16:
      return kiln_f16_to_f32(((const uint16_t *)p)[i]);
    case KILN_GEMM_S8:
      return ((const int8_t *)p)[i];
    case KILN_GEMM_S32:
      return ((const int32_t *)p)[i];
    case KILN_GEMM_S16:
    case KILN_GEMM_U8:
    case KILN_GEMM_U16:
    case KILN_GEMM_U32:
    case KILN_GEMM_SAME:
      break;
  }
  return 0;
}

/* The relative error one rounding to `t` may add (plus the sum's own, see below). */
static inline double hg_rounding(kiln_gemm_dtype_t t) {
  switch (t) {
    case KILN_GEMM_BF16:
      return 0x1p-8;
    case KILN_GEMM_F16:
      return 0x1p-11;
    case KILN_GEMM_F64:
    case KILN_GEMM_C128:
      return 0x1p-50;
    default:
      return 0x1p-22;
  }
}

/* Stores generated element i of operand `tag` (imaginary part from tag + 3 for complex types)
 * for i in [0, n). hg_value draws from 97 values (256 for s8), so the narrow types' encodings
 * are looked up in a table made by hg_store itself: the same rounding, once per value. */
static inline void hg_fill(kiln_gemm_dtype_t t, void *p, int64_t n, int tag, bool cplx) {
  if (t == KILN_GEMM_BF16 || t == KILN_GEMM_F16) {
    uint16_t code[97];
    for (int v = 0; v < 97; v++) hg_store(t, code, v, ((double)v - 48) / 16.0, 0);
    for (int64_t i = 0; i < n; i++) ((uint16_t *)p)[i] = code[hg_hash(i, tag) % 97];
    return;
  }
  for (int64_t i = 0; i < n; i++)
    hg_store(t, p, i, t == KILN_GEMM_S32 ? 0 : hg_value(t, i, tag),
             cplx ? hg_value(t, i, tag + 3) : 0);
}

/* Operand `p` read back laid out [batch][row][p], the contraction innermost whatever the
 * transpose, so the reference's inner loop is contiguous: doubles, or (cplx) double complex. */
static inline void *hg_rows(kiln_gemm_dtype_t t, const void *p, int64_t bt, int64_t rows, int64_t k,
                            bool k_major, bool cplx) {
  size_t es = cplx ? sizeof(double complex) : sizeof(double);
  void *r = kiln_malloc((size_t)(bt * rows * k) * es + 1);
  for (int64_t bi = 0; bi < bt; bi++)
    for (int64_t i = 0; i < rows; i++)
      for (int64_t q = 0; q < k; q++) {
        double complex v = hg_load(t, p, bi * rows * k + (k_major ? q * rows + i : i * k + q));
        int64_t j = (bi * rows + i) * k + q;
        if (cplx)
          ((double complex *)r)[j] = v;
        else
          ((double *)r)[j] = creal(v);
      }
  return r;
}

/* Runs gemm `g` on generated operands (C too, for beta) and compares; true when every
 * element matches. */
static inline bool hg_check(const kiln_gemm_desc_t *g, kiln_host_blas_choice_t choice,
                            kiln_host_pool_t *pool) {
  const kiln_gemm_dtype_t in = g->dtype, out = kiln_gemm_desc_out_dtype(g);
  const int64_t bt = g->batch, m = g->m, n = g->n, k = g->k;
  const int64_t na = bt * m * k, nb = bt * k * n, nc = bt * m * n;
  bool cplx = in == KILN_GEMM_C64 || in == KILN_GEMM_C128;
  void *a = kiln_malloc((size_t)na * kiln_gemm_dtype_size(in) + 1);
  void *b = kiln_malloc((size_t)nb * kiln_gemm_dtype_size(in) + 1);
  void *c = kiln_malloc((size_t)nc * kiln_gemm_dtype_size(out) + 1);
  hg_fill(in, a, na, 1, cplx);
  hg_fill(in, b, nb, 2, cplx);
  hg_fill(out, c, nc, 3, cplx);
  /* A is [m][k] (trans_a: [k][m]); B is [k][n] (trans_b: [n][k]). */
  void *ra = hg_rows(in, a, bt, m, k, g->trans_a, cplx);
  void *rb = hg_rows(in, b, bt, n, k, !g->trans_b, cplx);
  double complex *want = kiln_malloc((size_t)nc * sizeof(double complex) + 1);
  double *bound = kiln_malloc((size_t)nc * sizeof(double) + 1);
  for (int64_t bi = 0; bi < bt; bi++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double complex acc = 0;
        double mag = 0;
        if (cplx) {
          const double complex *x = (const double complex *)ra + (bi * m + i) * k;
          const double complex *y = (const double complex *)rb + (bi * n + j) * k;
          for (int64_t p = 0; p < k; p++) {
            double complex v = x[p] * y[p];
            acc += v;
            mag += fabs(creal(v)) + fabs(cimag(v));
          }
        } else {
          const double *x = (const double *)ra + (bi * m + i) * k;
          const double *y = (const double *)rb + (bi * n + j) * k;
          double sum = 0;
          for (int64_t p = 0; p < k; p++) {
            double v = x[p] * y[p];
            sum += v;
            mag += fabs(v);
          }
          acc = sum;
        }
        int64_t ic = bi * m * n + i * n + j;
        double complex c0 = hg_load(out, c, ic);
        want[ic] = g->alpha * acc + g->beta * c0;
        /* A reordered sum in the compute type, then one rounding to the output type. */
        double eps = in == KILN_GEMM_F64 || in == KILN_GEMM_C128 ? 0x1p-52 : 0x1p-23;
        bound[ic] = (double)(k + 2) * eps * (fabs(g->alpha) * mag + fabs(g->beta) * cabs(c0)) +
                    hg_rounding(out) * cabs(want[ic]) + (out == KILN_GEMM_F16 ? 0x1p-24 : 0);
      }
  kiln_free(ra);
  kiln_free(rb);
  kiln_status s = kiln_host_gemm(g, a, b, c, choice, pool);
  bool ok = s == NULL;
  if (s) {
    kiln_status_report(s, "kiln_host_gemm");
    kiln_status_free(s);
  }
  for (int64_t i = 0; ok && i < nc; i++) {
    double complex got = hg_load(out, c, i);
    bool good;
    if (out == KILN_GEMM_S32) {
      /* XLA's s32 accumulation wraps: the exact sum modulo 2^32. */
      int64_t exact = (int64_t)creal(want[i]);
      good = (int32_t)creal(got) == (int32_t)(uint32_t)exact;
    } else {
      good = cabs(got - want[i]) <= bound[i];
    }
    if (!good) {
      fprintf(stderr,
              "gemm %s->%s batch=%lld m=%lld n=%lld k=%lld ta=%d tb=%d alpha=%g beta=%g "
              "choice=%d pool=%d: element %lld: want %.9g%+.9gi, got %.9g%+.9gi (bound %.3g)\n",
              kiln_gemm_dtype_name(in), kiln_gemm_dtype_name(out), (long long)bt, (long long)m,
              (long long)n, (long long)k, g->trans_a, g->trans_b, g->alpha, g->beta, (int)choice,
              pool != NULL, (long long)i, creal(want[i]), cimag(want[i]), creal(got), cimag(got),
              bound[i]);
      ok = false;
    }
  }
  kiln_free(a);
  kiln_free(b);
  kiln_free(c);
  kiln_free(want);
  kiln_free(bound);
  return ok;
}

#endif /* KILN_TESTS_HOST_GEMM_TEST_UTIL_H_ */
