/* Integer gemms on the host (kiln_host_gemm_int, host_device.h).
 *
 * Every integer combination of kiln_gemm_desc_t is computed modulo 2^32: operands sign- or
 * zero-extended to 32 bits, products and sums in wrapping 32-bit arithmetic, the result
 * truncated to C's width. Modulo 2^w (w <= 32) this is the exact sum, so it equals what XLA's
 * dot gives in any result type of at most 32 bits (its products and sums wrap in the result
 * type; the reference evaluator sums modulo 2^64 and truncates).
 *
 * The product is X (rows x k) times Y (k x cols), read through strides from A and B: X = op(A)
 * and Y = op(B), or, when C has fewer than kNr columns and more rows than columns, X = op(B)^T
 * and Y = op(A)^T (C written transposed) so the 32 lanes of a strip are used. X is converted
 * once (in row groups of at most kXGroupBytes) to its kernel's form; each pool task owns
 * kNr columns x at most kRowBlock rows of one batch: it packs Y's columns kKc values of k at a
 * time into an L1/L2-sized panel, runs every row of its block over it (sums in registers, then
 * in a 32-bit tile), and stores the tile to C's type.
 *
 * Two kernel forms:
 *   quad (s8 x s8): X as u8 (x + 128), k padded to 4; Y packed 4 values of k per 32-bit
 *        lane; vpdpbusd multiplies u8 x s8 in fours and adds into 32-bit lanes (AVX-512
 *        VNNI); the 128 * sum_p Y[p][j] the offset added is subtracted at the end.
 *   pair (s8, u8, s16 where the set has it: AVX2 without VNNI): X and Y as s16, k padded to
 *        2; Y packed 2 values of k per 32-bit lane; vpmaddwd multiplies s16 pairs and adds
 *        each pair's two products into a 32-bit lane (exact: the one sum past 2^31 - 1,
 *        (-2^15)^2 * 2, comes out as 2^31 modulo 2^32), twice the multiply-adds of vpmulld.
 *   wide (every other type, and s8 without VNNI): X and Y as 32-bit integers, vpmulld and
 *        vpaddd (AVX-512F 16 lanes, AVX2 8 lanes).
 * quad and wide have a portable C copy (scalar, wrapping in uint32_t) for CPUs without them
 * and for the tests; pair exists in the AVX2 set only (its packing calls AVX2 code). The kernel set
 * is picked once per process from the CPU (or set by kiln_host_gemm_int_set_kernel). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "runtime/host/host_device.h"

enum {
  kNr = 32,         /* columns per strip */
  kMr = 8,          /* rows per micro-kernel call */
  kRowBlock = 256,  /* rows per task */
  kKc = 256,        /* values of k per packed panel (a multiple of 4; wide: 32 KiB) */
  kTinyMacs = 4096, /* batch * m * n * k up to which a plain loop runs on the calling thread */
};
/* Converted X per group of rows (the rest are converted when the group before is done). */
static const int64_t kXGroupBytes = (int64_t)1 << 26;

/* ---- the job ----------------------------------------------------------------------------- */

typedef struct int_job {
  kiln_gemm_dtype_t ta, tb, tc; /* X's (A's or B's), Y's, C's types */
  bool quad, pair;
  int64_t rows, cols, k, kx; /* kx: X's converted row length (k, or k padded to 4 or 2) */
  size_t xes;                /* bytes per converted X value: 1 (quad), 2 (pair), 4 (wide) */
  /* X (i, p) at x[i * xrs + p * xcs] of batch bi's base x + bi * x_batch; likewise Y (p, j)
   * and C (i, j). */
  const void *x, *y;
  void *c;
  int64_t xrs, xcs, yrs, ycs, crs, ccs, x_batch, y_batch, c_batch;
  /* The converted rows of the current group: global rows [g0, g0 + gn) (global row: bi * rows
   * + i), at xc + (row - g0) * kx elements. */
  void *xc;
  int64_t g0, gn;
  int64_t strips, blocks_per_batch_strip; /* per batch */
} int_job_t;

/* Operand element `i` of type `t`, extended to 32 bits. */
static inline uint32_t int_load(kiln_gemm_dtype_t t, const void *p, int64_t i) {
  switch (t) {
    case KILN_GEMM_S8:
      return (uint32_t)(int32_t)((const int8_t *)p)[i];
    case KILN_GEMM_U8:
      return ((const uint8_t *)p)[i];
    case KILN_GEMM_S16:
      return (uint32_t)(int32_t)((const int16_t *)p)[i];
    case KILN_GEMM_U16:
      return ((const uint16_t *)p)[i];
    default: /* s32, u32 */
      return ((const uint32_t *)p)[i];
  }
}

static inline void int_store(kiln_gemm_dtype_t t, void *p, int64_t i, uint32_t v) {
  switch (t) {
    case KILN_GEMM_S8:
    case KILN_GEMM_U8:
      ((uint8_t *)p)[i] = (uint8_t)v;
      return;
    case KILN_GEMM_S16:
    case KILN_GEMM_U16:
      ((uint16_t *)p)[i] = (uint16_t)v;
      return;
    default:
      ((uint32_t *)p)[i] = v;
      return;
  }
}

/* ---- kernels ----------------------------------------------------------------------------- */

/* Micro-kernel: cs[i][0..kNr) (+)= sum over the panel of X row i times the panel's columns,
 * for `rows` <= kMr rows of converted X (row length ld; quad: u8, from value p0 of the row;
 * pair: s16; wide: 32-bit), over kc values of k (quad: kc / 4 groups; pair: kc / 2 pairs).
 * `first` starts from zero. */
typedef void (*int_micro_fn)(const void *x, int64_t ld, const void *pk, int64_t kc, uint32_t *cs,
                             int rows, bool first);

/* Adds each column's sum of a packed quad panel (`groups` groups of 4 values of k) to
 * colsum[0..kNr). */
typedef void (*int_colsum_fn)(const void *pk, int64_t groups, uint32_t *colsum);

typedef struct int_kernels {
  const char *name;
  int_micro_fn quad; /* NULL: s8 x s8 takes the pair or the wide kernel */
  int_colsum_fn quad_colsum;
  int_micro_fn pair; /* NULL: s8, u8, s16 take the wide kernel */
  int_micro_fn wide;
} int_kernels_t;

static void quad_colsum_base(const void *pk, int64_t groups, uint32_t *colsum) {
  const int8_t *b = pk;
  for (int64_t q = 0; q < groups; q++)
    for (int j = 0; j < kNr; j++)
      for (int t = 0; t < 4; t++) colsum[j] += (uint32_t)(int32_t)b[q * 4 * kNr + j * 4 + t];
}

static void quad_micro_base(const void *x, int64_t ld, const void *pk, int64_t kc, uint32_t *cs,
                            int rows, bool first) {
  const uint8_t *xu = x;
  const int8_t *b = pk;
  for (int i = 0; i < rows; i++) {
    uint32_t acc[kNr];
    for (int j = 0; j < kNr; j++) acc[j] = first ? 0 : cs[i * kNr + j];
    for (int64_t q = 0; q < kc / 4; q++)
      for (int j = 0; j < kNr; j++)
        for (int t = 0; t < 4; t++)
          acc[j] += (uint32_t)((int32_t)xu[i * ld + 4 * q + t] * b[q * 4 * kNr + j * 4 + t]);
    for (int j = 0; j < kNr; j++) cs[i * kNr + j] = acc[j];
  }
}

static void wide_micro_base(const void *x, int64_t ld, const void *pk, int64_t kc, uint32_t *cs,
                            int rows, bool first) {
  const uint32_t *xw = x, *b = pk;
  for (int i = 0; i < rows; i++) {
    uint32_t acc[kNr];
    for (int j = 0; j < kNr; j++) acc[j] = first ? 0 : cs[i * kNr + j];
    for (int64_t p = 0; p < kc; p++) {
      const uint32_t v = xw[i * ld + p];
      for (int j = 0; j < kNr; j++) acc[j] += v * b[p * kNr + j];
    }
    for (int j = 0; j < kNr; j++) cs[i * kNr + j] = acc[j];
  }
}

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <immintrin.h>
#define KILN_INT_X86 1
#define INT_AVX512 __attribute__((target("avx512f")))
#define INT_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))
#define INT_AVX2 __attribute__((target("avx2")))

static inline int32_t load_i32(const void *p) {
  int32_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

/* `R` rows (a constant after inlining: the accumulators stay in registers). */
#define DEFINE_MICRO_512(NAME, ATTR, STEP, KSTEP, LOADX, OP)                                    \
  ATTR static inline __attribute__((always_inline)) void NAME##_rows(                           \
      const void *x, int64_t ld, const void *pk, int64_t kc, uint32_t *cs, int R, bool first) { \
    __m512i c0[kMr], c1[kMr];                                                                   \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) {                                       \
      c0[i] = first ? _mm512_setzero_si512() : _mm512_loadu_si512(cs + i * kNr);                \
      c1[i] = first ? _mm512_setzero_si512() : _mm512_loadu_si512(cs + i * kNr + 16);           \
    }                                                                                           \
    for (int64_t q = 0; q < kc / KSTEP; q++) {                                                  \
      const __m512i b0 = _mm512_loadu_si512((const char *)pk + q * STEP),                       \
                    b1 = _mm512_loadu_si512((const char *)pk + q * STEP + 64);                  \
      _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) {                                     \
        const __m512i v = _mm512_set1_epi32(LOADX);                                             \
        c0[i] = OP(c0[i], v, b0);                                                               \
        c1[i] = OP(c1[i], v, b1);                                                               \
      }                                                                                         \
    }                                                                                           \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; i++) {                                       \
      _mm512_storeu_si512(cs + i * kNr, c0[i]);                                                 \
      _mm512_storeu_si512(cs + i * kNr + 16, c1[i]);                                            \
    }                                                                                           \
  }                                                                                             \
  ATTR static void NAME(const void *x, int64_t ld, const void *pk, int64_t kc, uint32_t *cs,    \
                        int rows, bool first) {                                                 \
    switch (rows) {                                                                             \
      case 8:                                                                                   \
        NAME##_rows(x, ld, pk, kc, cs, 8, first);                                               \
        return;                                                                                 \
      case 7:                                                                                   \
        NAME##_rows(x, ld, pk, kc, cs, 7, first);                                               \
        return;                                                                                 \
      case 6:                                                                                   \
        NAME##_rows(x, ld, pk, kc, cs, 6, first);                                               \
        return;                                                                                 \
      case 5:                                                                                   \
        NAME##_rows(x, ld, pk, kc, cs, 5, first);                                               \
        return;                                                                                 \
      case 4:                                                                                   \
        NAME##_rows(x, ld, pk, kc, cs, 4, first);                                               \
        return;                                                                                 \
      case 3:                                                                                   \
        NAME##_rows(x, ld, pk, kc, cs, 3, first);                                               \
        return;                                                                                 \
      case 2:                                                                                   \
        NAME##_rows(x, ld, pk, kc, cs, 2, first);                                               \
        return;                                                                                 \
      default:                                                                                  \
        NAME##_rows(x, ld, pk, kc, cs, 1, first);                                               \
        return;                                                                                 \
    }                                                                                           \
  }

/* quad: 4 u8 of X row i at value 4q, broadcast; the panel 128 bytes per group of 4. */
#define QUAD_X load_i32((const uint8_t *)x + i * ld + 4 * q)
#define QUAD_OP(c, a, b) _mm512_dpbusd_epi32(c, a, b)
DEFINE_MICRO_512(quad_micro_vnni, INT_VNNI, 4 * kNr, 4, QUAD_X, QUAD_OP)
INT_VNNI static void quad_colsum_vnni(const void *pk, int64_t groups, uint32_t *colsum) {
  const __m512i ones = _mm512_set1_epi8(1);
  __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
  for (int64_t q = 0; q < groups; q++) {
    s0 = _mm512_dpbusd_epi32(s0, ones, _mm512_loadu_si512((const char *)pk + q * 4 * kNr));
    s1 = _mm512_dpbusd_epi32(s1, ones, _mm512_loadu_si512((const char *)pk + q * 4 * kNr + 64));
  }
  _mm512_storeu_si512(colsum, _mm512_add_epi32(_mm512_loadu_si512(colsum), s0));
  _mm512_storeu_si512(colsum + 16, _mm512_add_epi32(_mm512_loadu_si512(colsum + 16), s1));
}

/* wide: one 32-bit X value; the panel 128 bytes per value of k. */
#define WIDE_X ((const int32_t *)x)[i * ld + q]
#define WIDE_OP(c, a, b) _mm512_add_epi32(c, _mm512_mullo_epi32(a, b))
DEFINE_MICRO_512(wide_micro_avx512, INT_AVX512, 4 * kNr, 1, WIDE_X, WIDE_OP)

/* AVX2: 16 registers hold 4 rows x 16 columns (8 accumulators) at a time; each half of the
 * strip in turn. `R` rows from column h; wide: one 32-bit X value per step, vpmulld; pair:
 * X's s16 values 2q and 2q + 1 broadcast as one 32-bit lane, vpmaddwd; the panel 128 bytes
 * per step either way (`pair` and `R` constants after inlining). */
INT_AVX2 static inline __attribute__((always_inline)) void avx2_rows(const void *x, int64_t ld,
                                                                     const uint32_t *pk, int64_t kc,
                                                                     uint32_t *cs, int R, int h,
                                                                     bool first, bool pair) {
  __m256i c0[4], c1[4];
#pragma GCC unroll 4
  for (int i = 0; i < R; i++) {
    c0[i] = first ? _mm256_setzero_si256() : _mm256_loadu_si256((const void *)(cs + i * kNr + h));
    c1[i] =
        first ? _mm256_setzero_si256() : _mm256_loadu_si256((const void *)(cs + i * kNr + h + 8));
  }
  for (int64_t q = 0; q < (pair ? kc / 2 : kc); q++) {
    const __m256i b0 = _mm256_loadu_si256((const void *)(pk + q * kNr + h)),
                  b1 = _mm256_loadu_si256((const void *)(pk + q * kNr + h + 8));
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
      const __m256i v = _mm256_set1_epi32(pair ? load_i32((const int16_t *)x + i * ld + 2 * q)
                                               : ((const int32_t *)x)[i * ld + q]);
      c0[i] = _mm256_add_epi32(c0[i], pair ? _mm256_madd_epi16(v, b0) : _mm256_mullo_epi32(v, b0));
      c1[i] = _mm256_add_epi32(c1[i], pair ? _mm256_madd_epi16(v, b1) : _mm256_mullo_epi32(v, b1));
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < R; i++) {
    _mm256_storeu_si256((void *)(cs + i * kNr + h), c0[i]);
    _mm256_storeu_si256((void *)(cs + i * kNr + h + 8), c1[i]);
  }
}

INT_AVX2 static inline __attribute__((always_inline)) void avx2_micro(const void *x, int64_t ld,
                                                                      const void *pk, int64_t kc,
                                                                      uint32_t *cs, int rows,
                                                                      bool first, bool pair) {
  const size_t xes = pair ? 2 : 4;
  for (int i0 = 0; i0 < rows; i0 += 4) {
    const void *xi = (const char *)x + (size_t)(i0 * ld) * xes;
    uint32_t *ci = cs + i0 * kNr;
    const int r = rows - i0 < 4 ? rows - i0 : 4;
    for (int h = 0; h < kNr; h += 16) switch (r) {
        case 4:
          avx2_rows(xi, ld, pk, kc, ci, 4, h, first, pair);
          break;
        case 3:
          avx2_rows(xi, ld, pk, kc, ci, 3, h, first, pair);
          break;
        case 2:
          avx2_rows(xi, ld, pk, kc, ci, 2, h, first, pair);
          break;
        default:
          avx2_rows(xi, ld, pk, kc, ci, 1, h, first, pair);
          break;
      }
  }
}

INT_AVX2 static void wide_micro_avx2(const void *x, int64_t ld, const void *pk, int64_t kc,
                                     uint32_t *cs, int rows, bool first) {
  avx2_micro(x, ld, pk, kc, cs, rows, first, false);
}

INT_AVX2 static void pair_micro_avx2(const void *x, int64_t ld, const void *pk, int64_t kc,
                                     uint32_t *cs, int rows, bool first) {
  avx2_micro(x, ld, pk, kc, cs, rows, first, true);
}

/* 16 values of type t (s8, u8 or s16) at y + i as s16. */
INT_AVX2 static inline __m256i pair_load16(kiln_gemm_dtype_t t, const void *y, int64_t i) {
  if (t == KILN_GEMM_S16) return _mm256_loadu_si256((const void *)((const int16_t *)y + i));
  const __m128i b = _mm_loadu_si128((const void *)((const int8_t *)y + i));
  return t == KILN_GEMM_S8 ? _mm256_cvtepi8_epi16(b) : _mm256_cvtepu8_epi16(b);
}

/* Pair panel of kNr columns whose rows are contiguous: rows 2q and 2q + 1 (from element `at`,
 * `yrs` apart; the odd one past kc zero) interleaved column by column. */
INT_AVX2 static void pair_pack_rows_avx2(kiln_gemm_dtype_t t, const void *y, int64_t at,
                                         int64_t yrs, int64_t kc, int16_t *d) {
  for (int64_t q = 0; q < (kc + 1) / 2; q++) {
    const int64_t r0 = at + 2 * q * yrs, r1 = r0 + yrs;
    const bool odd = 2 * q + 1 < kc;
    for (int h = 0; h < kNr; h += 16) {
      const __m256i a = pair_load16(t, y, r0 + h),
                    b = odd ? pair_load16(t, y, r1 + h) : _mm256_setzero_si256();
      /* per 128-bit lane: lo = columns 0-3 | 8-11, hi = 4-7 | 12-15, each (a, b) */
      const __m256i lo = _mm256_unpacklo_epi16(a, b), hi = _mm256_unpackhi_epi16(a, b);
      int16_t *o = d + q * 2 * kNr + 2 * h;
      _mm256_storeu_si256((void *)o, _mm256_permute2x128_si256(lo, hi, 0x20));
      _mm256_storeu_si256((void *)(o + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
    }
  }
}
#endif

static const int_kernels_t kBase = {"base", quad_micro_base, quad_colsum_base, NULL,
                                    wide_micro_base};
#ifdef KILN_INT_X86
static const int_kernels_t kAvx2 = {"avx2", NULL, NULL, pair_micro_avx2, wide_micro_avx2};
static const int_kernels_t kAvx512 = {"avx512", NULL, NULL, NULL, wide_micro_avx512};
static const int_kernels_t kVnni = {"avx512vnni", quad_micro_vnni, quad_colsum_vnni, NULL,
                                    wide_micro_avx512};
#endif

static struct {
  pthread_once_t once;
  _Atomic(const int_kernels_t *) k;
} g_int = {.once = PTHREAD_ONCE_INIT};

/* The best set the CPU runs, or the one `name` names ("base", "avx2", "avx512",
 * "avx512vnni"; NULL: the best), or NULL when the CPU lacks it. */
static const int_kernels_t *int_kernels_for(const char *name) {
  const int_kernels_t *best = &kBase;
  if (name && !strcmp(name, "base")) return &kBase;
#ifdef KILN_INT_X86
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2"), avx512 = __builtin_cpu_supports("avx512f"),
             vnni = avx512 && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vnni");
  if (name) {
    if (!strcmp(name, "avx2")) return avx2 ? &kAvx2 : NULL;
    if (!strcmp(name, "avx512")) return avx512 ? &kAvx512 : NULL;
    if (!strcmp(name, "avx512vnni")) return vnni ? &kVnni : NULL;
    return NULL;
  }
  best = vnni ? &kVnni : avx512 ? &kAvx512 : avx2 ? &kAvx2 : &kBase;
#endif
  return name ? NULL : best;
}

static void pick_int(void) {
  atomic_store(&g_int.k, int_kernels_for(NULL));
}

static const int_kernels_t *int_kernels(void) {
  kiln_once(&g_int.once, pick_int);
  return atomic_load(&g_int.k);
}

const char *kiln_host_gemm_int_kernel(void) {
  return int_kernels()->name;
}

kiln_status kiln_host_gemm_int_set_kernel(const char *name) {
  kiln_once(&g_int.once, pick_int);
  const int_kernels_t *k = int_kernels_for(name);
  if (!k)
    return KILN_ERR_UNIMPLEMENTED("host integer gemm: no kernel set \"%s\" on this CPU", name);
  atomic_store(&g_int.k, k);
  return NULL;
}

/* ---- the tasks --------------------------------------------------------------------------- */

/* Rows [r0, r1) of the group (global rows g0 + r) converted. Rows that are columns of the
 * stored operand (xrs 1) go 64 at a time, each value of k read across them (contiguous). */
static void convert_x_rows(void **args, int64_t r0, int64_t r1) {
  const int_job_t *J = args[0];
  const int64_t k = J->k;
  for (int64_t r = r0; r < r1;) {
    const int64_t gr = J->g0 + r, bi = gr / J->rows, i = gr % J->rows;
    int64_t nr = J->xrs == 1 && J->xcs != 1 ? 64 : 1;
    if (nr > r1 - r) nr = r1 - r;
    if (nr > J->rows - i) nr = J->rows - i;
    const int64_t base = bi * J->x_batch + i * J->xrs;
    if (J->quad) {
      uint8_t *d = (uint8_t *)J->xc + r * J->kx;
      const int8_t *s = (const int8_t *)J->x + base;
      if (nr == 1 && J->xcs == 1)
        for (int64_t p = 0; p < k; p++) d[p] = (uint8_t)(s[p] + 128);
      else
        for (int64_t p = 0; p < k; p++)
          for (int64_t t = 0; t < nr; t++)
            d[t * J->kx + p] = (uint8_t)(s[p * J->xcs + t * J->xrs] + 128);
      for (int64_t t = 0; t < nr; t++)
        for (int64_t p = k; p < J->kx; p++) d[t * J->kx + p] = 0;
    } else if (J->pair) {
      int16_t *d = (int16_t *)J->xc + r * J->kx;
      for (int64_t p = 0; p < k; p++)
        for (int64_t t = 0; t < nr; t++)
          d[t * J->kx + p] = (int16_t)int_load(J->ta, J->x, base + p * J->xcs + t * J->xrs);
      for (int64_t t = 0; t < nr; t++)
        for (int64_t p = k; p < J->kx; p++) d[t * J->kx + p] = 0;
    } else {
      uint32_t *d = (uint32_t *)J->xc + r * J->kx;
      for (int64_t p = 0; p < k; p++)
        for (int64_t t = 0; t < nr; t++)
          d[t * J->kx + p] = int_load(J->ta, J->x, base + p * J->xcs + t * J->xrs);
    }
    r += nr;
  }
}

/* 4 rows of 16 s8 values (r[t]: row t, NULL: zeros) interleaved into 16 columns x 4 values. */
#if defined(__SSE2__)
#include <emmintrin.h>
static inline void quad_interleave16(const int8_t *const r[4], int8_t *d) {
  __m128i v[4];
  for (int t = 0; t < 4; t++)
    v[t] = r[t] ? _mm_loadu_si128((const __m128i *)(const void *)r[t]) : _mm_setzero_si128();
  const __m128i a = _mm_unpacklo_epi8(v[0], v[1]), b = _mm_unpackhi_epi8(v[0], v[1]),
                c = _mm_unpacklo_epi8(v[2], v[3]), e = _mm_unpackhi_epi8(v[2], v[3]);
  _mm_storeu_si128((__m128i *)(void *)d, _mm_unpacklo_epi16(a, c));
  _mm_storeu_si128((__m128i *)(void *)(d + 16), _mm_unpackhi_epi16(a, c));
  _mm_storeu_si128((__m128i *)(void *)(d + 32), _mm_unpacklo_epi16(b, e));
  _mm_storeu_si128((__m128i *)(void *)(d + 48), _mm_unpackhi_epi16(b, e));
}
#endif

/* Packs Y (p0 .. p0+kc) x (j0 .. j0+nj) of batch bi (zero past nj and past k). */
static void pack_y(const int_job_t *J, int64_t bi, int64_t p0, int64_t kc, int64_t j0, int64_t nj,
                   void *pk) {
  const int64_t base = bi * J->y_batch;
  if (J->quad) {
    int8_t *d = pk;
    const int8_t *y = (const int8_t *)J->y + base;
    const int64_t groups = (kc + 3) / 4;
#if defined(__SSE2__)
    if (J->ycs == 1 && nj == kNr) { /* rows of 32 contiguous values */
      for (int64_t q = 0; q < groups; q++) {
        const int8_t *r[4];
        for (int t = 0; t < 4; t++)
          r[t] = 4 * q + t < kc ? y + (p0 + 4 * q + t) * J->yrs + j0 : NULL;
        quad_interleave16(r, d + q * 4 * kNr);
        for (int t = 0; t < 4; t++)
          if (r[t]) r[t] += 16;
        quad_interleave16(r, d + q * 4 * kNr + 64);
      }
      return;
    }
#endif
    memset(d, 0, (size_t)groups * 4 * kNr);
    for (int64_t j = 0; j < nj; j++) {
      const int8_t *col = y + (j0 + j) * J->ycs;
      for (int64_t p = 0; p < kc; p++)
        d[(p / 4) * 4 * kNr + j * 4 + p % 4] = col[(p0 + p) * J->yrs];
    }
    return;
  }
  if (J->pair) {
    int16_t *d = pk;
#ifdef KILN_INT_X86
    /* (the pair form is the AVX2 set's only) */
    if (J->ycs == 1 && nj == kNr) {
      pair_pack_rows_avx2(J->tb, J->y, base + p0 * J->yrs + j0, J->yrs, kc, d);
      return;
    }
#endif
    if (J->yrs == 1) { /* columns contiguous along k: each column's pairs in turn */
      memset(d, 0, (size_t)(kc + 1) / 2 * 2 * kNr * sizeof(int16_t));
      for (int64_t j = 0; j < nj; j++) {
        const int64_t col = base + (j0 + j) * J->ycs + p0;
        if (J->tb == KILN_GEMM_S16)
          for (int64_t p = 0; p < kc; p++)
            d[(p / 2) * 2 * kNr + 2 * j + p % 2] = ((const int16_t *)J->y)[col + p];
        else if (J->tb == KILN_GEMM_S8)
          for (int64_t p = 0; p < kc; p++)
            d[(p / 2) * 2 * kNr + 2 * j + p % 2] = ((const int8_t *)J->y)[col + p];
        else
          for (int64_t p = 0; p < kc; p++)
            d[(p / 2) * 2 * kNr + 2 * j + p % 2] = ((const uint8_t *)J->y)[col + p];
      }
      return;
    }
    for (int64_t p = 0; p < (kc + 1) / 2 * 2; p++) {
      const int64_t row = base + (p0 + p) * J->yrs + j0 * J->ycs;
      int16_t *dq = d + (p / 2) * 2 * kNr + p % 2;
      for (int64_t j = 0; j < nj; j++)
        dq[2 * j] = p < kc ? (int16_t)int_load(J->tb, J->y, row + j * J->ycs) : 0;
      for (int64_t j = nj; j < kNr; j++) dq[2 * j] = 0;
    }
    return;
  }
  uint32_t *d = pk;
  const size_t es = kiln_gemm_dtype_size(J->tb);
  if (J->ycs == 1 && nj == kNr && es == 4) { /* 32-bit rows of 32 contiguous values: copies */
    for (int64_t p = 0; p < kc; p++)
      memcpy(d + p * kNr, (const uint32_t *)J->y + base + (p0 + p) * J->yrs + j0,
             kNr * sizeof(uint32_t));
    return;
  }
  if (J->ycs == 1 && nj == kNr && J->tb == KILN_GEMM_U16) {
    for (int64_t p = 0; p < kc; p++) {
      const uint16_t *r = (const uint16_t *)J->y + base + (p0 + p) * J->yrs + j0;
      for (int j = 0; j < kNr; j++) d[p * kNr + j] = r[j];
    }
    return;
  }
  for (int64_t p = 0; p < kc; p++) {
    const int64_t row = base + (p0 + p) * J->yrs + j0 * J->ycs;
    for (int64_t j = 0; j < nj; j++) d[p * kNr + j] = int_load(J->tb, J->y, row + j * J->ycs);
    for (int64_t j = nj; j < kNr; j++) d[p * kNr + j] = 0;
  }
}

/* Tasks [t0, t1) of the group: each (batch, strip, row block) intersecting it. */
static void int_tasks(void **args, int64_t t0, int64_t t1) {
  const int_job_t *J = args[0];
  const int_kernels_t *K = args[1];
  const int64_t *first_batch = args[2];
  const int_micro_fn micro = J->quad ? K->quad : J->pair ? K->pair : K->wide;
  _Alignas(64) uint32_t cs[kRowBlock * kNr];
  _Alignas(64) unsigned char pk[kKc * kNr * 4]; /* u8 quads, s16 pairs or 32-bit values */
  uint32_t colsum[kNr];
  const int64_t per_batch = J->strips * J->blocks_per_batch_strip;
  for (int64_t t = t0; t < t1; t++) {
    const int64_t bi = *first_batch + t / per_batch, rem = t % per_batch;
    const int64_t s = rem / J->blocks_per_batch_strip, rb = rem % J->blocks_per_batch_strip;
    /* The block's rows, clipped to the group. */
    int64_t r0 = rb * kRowBlock, r1 = r0 + kRowBlock < J->rows ? r0 + kRowBlock : J->rows;
    const int64_t b0 = bi * J->rows;
    if (b0 + r0 < J->g0) r0 = J->g0 - b0;
    if (b0 + r1 > J->g0 + J->gn) r1 = J->g0 + J->gn - b0;
    if (r0 >= r1) continue;
    const int64_t j0 = s * kNr, nj = J->cols - j0 < kNr ? J->cols - j0 : kNr;
    const size_t xes = J->xes;
    const char *xrow = (const char *)J->xc + (size_t)(b0 + r0 - J->g0) * (size_t)J->kx * xes;
    memset(colsum, 0, sizeof(colsum));
    for (int64_t p0 = 0; p0 < J->k; p0 += kKc) {
      const int64_t kc = J->k - p0 < kKc ? J->k - p0 : kKc;
      pack_y(J, bi, p0, kc, j0, nj, pk);
      const int64_t kcm = J->quad ? (kc + 3) / 4 * 4 : J->pair ? (kc + 1) / 2 * 2 : kc;
      if (J->quad) K->quad_colsum(pk, kcm / 4, colsum);
      for (int64_t i = r0; i < r1; i += kMr)
        micro(xrow + (size_t)((i - r0) * J->kx + p0) * xes, J->kx, pk, kcm, cs + (i - r0) * kNr,
              (int)(r1 - i < kMr ? r1 - i : kMr), p0 == 0);
    }
    const int64_t cb = bi * J->c_batch;
    for (int64_t i = r0; i < r1; i++)
      for (int64_t j = 0; j < nj; j++) {
        uint32_t v = cs[(i - r0) * kNr + j];
        if (J->quad) v -= 128u * colsum[j];
        int_store(J->tc, J->c, cb + i * J->crs + (j0 + j) * J->ccs, v);
      }
  }
}

/* A gemm small enough that packing costs more than it saves: in order, on this thread. */
static void int_tiny(const int_job_t *J, int64_t batch) {
  for (int64_t bi = 0; bi < batch; bi++)
    for (int64_t i = 0; i < J->rows; i++)
      for (int64_t j = 0; j < J->cols; j++) {
        uint32_t acc = 0;
        for (int64_t p = 0; p < J->k; p++)
          acc += int_load(J->ta, J->x, bi * J->x_batch + i * J->xrs + p * J->xcs) *
                 int_load(J->tb, J->y, bi * J->y_batch + p * J->yrs + j * J->ycs);
        int_store(J->tc, J->c, bi * J->c_batch + i * J->crs + j * J->ccs, acc);
      }
}

kiln_status kiln_host_gemm_int(const kiln_gemm_desc_t *g, const void *a, const void *b, void *c,
                               kiln_host_pool_t *pool) {
  const kiln_gemm_dtype_t out = kiln_gemm_desc_out_dtype(g);
  if (!kiln_gemm_dtype_is_int(g->dtype) || !kiln_gemm_dtype_is_int(out))
    return KILN_ERR_INVALID("host integer gemm: %s -> %s is not an integer gemm",
                            kiln_gemm_dtype_name(g->dtype), kiln_gemm_dtype_name(out));
  const int64_t m = g->m, n = g->n, k = g->k;
  int_job_t J = {.ta = g->dtype, .tb = g->dtype, .tc = out, .k = k, .c = c};
  J.x_batch = m * k, J.y_batch = k * n, J.c_batch = m * n;
  /* A (i, p): a[i * k + p], or a[p * m + i] when stored k x m; B (p, j): b[p * n + j], or
   * b[j * k + p] when stored n x k. */
  const int64_t ars = g->trans_a ? 1 : k, acs = g->trans_a ? m : 1;
  const int64_t brs = g->trans_b ? 1 : n, bcs = g->trans_b ? k : 1;
  const bool swapped = n < kNr && m > n;
  if (!swapped) {
    J.rows = m, J.cols = n, J.x = a, J.y = b;
    J.xrs = ars, J.xcs = acs, J.yrs = brs, J.ycs = bcs, J.crs = n, J.ccs = 1;
  } else { /* X = op(B)^T: (j, p) = B (p, j); Y = op(A)^T: (p, i) = A (i, p) */
    J.rows = n, J.cols = m, J.x = b, J.y = a;
    J.xrs = bcs, J.xcs = brs, J.yrs = acs, J.ycs = ars, J.crs = 1, J.ccs = n;
    J.x_batch = k * n, J.y_batch = m * k;
  }
  if (g->batch * m * n * k <= kTinyMacs) {
    int_tiny(&J, g->batch);
    return NULL;
  }
  const int_kernels_t *K = int_kernels();
  J.quad = g->dtype == KILN_GEMM_S8 && K->quad != NULL;
  J.pair = !J.quad && K->pair != NULL &&
           (g->dtype == KILN_GEMM_S8 || g->dtype == KILN_GEMM_U8 || g->dtype == KILN_GEMM_S16);
  J.kx = J.quad ? (k + 3) / 4 * 4 : J.pair ? (k + 1) / 2 * 2 : k;
  J.xes = J.quad ? 1 : J.pair ? 2 : 4;
  J.strips = (J.cols + kNr - 1) / kNr;
  J.blocks_per_batch_strip = (J.rows + kRowBlock - 1) / kRowBlock;
  const size_t xes = J.xes;
  /* Rows converted per group: whole batches when one fits, else whole row blocks. */
  const int64_t total = g->batch * J.rows;
  int64_t group = kXGroupBytes / (J.kx * (int64_t)xes);
  if (group >= J.rows)
    group = group / J.rows * J.rows;
  else
    group = group >= kRowBlock ? group / kRowBlock * kRowBlock : kRowBlock;
  if (group > total) group = total;
  size_t bytes = (size_t)group * (size_t)J.kx * xes;
  J.xc = malloc(bytes);
  if (!J.xc)
    return kiln_status_make(KILN_RESOURCE_EXHAUSTED,
                            "host integer gemm: cannot allocate %zu bytes for converted rows",
                            bytes);
  const bool parallel = pool && kiln_host_pool_num_workers(pool) > 1;
  kiln_status st = NULL;
  for (int64_t g0 = 0; g0 < total && !st; g0 += group) {
    J.g0 = g0;
    J.gn = total - g0 < group ? total - g0 : group;
    void *args[3] = {&J, (void *)K, NULL};
    if (parallel && J.gn * J.kx >= 65536)
      st = kiln_host_pool_launch(pool, convert_x_rows, args, J.gn, 0);
    else
      convert_x_rows(args, 0, J.gn);
    if (st) break;
    /* The batches the group touches, every (strip, block) of each (blocks outside the group
     * do nothing). */
    int64_t first_batch = g0 / J.rows, last_batch = (g0 + J.gn - 1) / J.rows;
    args[2] = &first_batch;
    const int64_t tasks = (last_batch - first_batch + 1) * J.strips * J.blocks_per_batch_strip;
    if (parallel && tasks > 1)
      st = kiln_host_pool_launch(pool, int_tasks, args, tasks, 0);
    else
      int_tasks(args, 0, tasks);
  }
  free(J.xc);
  return st;
}
