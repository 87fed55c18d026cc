/* Elementwise opcodes with XLA's semantics (see hlo_evaluator_typed_visitor in XLA).
 *
 * Every operand is first converted to a buffer of its computation class, then one loop per
 * (opcode, class) runs, then the result is stored back with rounding or wrapping:
 *   - f32 and every narrower float (bf16, f16, f8*, f4*): computed in float, narrowed with
 *     round-to-nearest-even after every operation (as XLA's evaluator does);
 *   - f64: double;
 *   - integers and pred: int64 (signed types sign-extended, unsigned zero-extended), with
 *     two's complement wrapping to the type's width on store;
 *   - c64 / c128: float / double complex. */
#include <complex.h>
#include <math.h>
#include <string.h>

#include "compiler/eval/eval.h"
#include "compiler/hlo/numeric.h"

typedef enum { K_F32, K_F64, K_INT, K_C64, K_C128, K_NONE } kind_t;

static kind_t kind_of(kiln_elem_type_t t) {
  if (t == KILN_F64) return K_F64;
  if (kiln_elem_type_is_float(t)) return K_F32;
  if (kiln_elem_type_is_integral(t) || t == KILN_PRED) return K_INT;
  if (t == KILN_C64) return K_C64;
  if (t == KILN_C128) return K_C128;
  return K_NONE;
}

static int width_of(kiln_elem_type_t t) { return t == KILN_PRED ? 1 : kiln_elem_type_bits(t); }
static uint64_t mask_of(int w) { return w >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << w) - 1); }
static int64_t sext(uint64_t v, int w) {
  if (w >= 64) return (int64_t)v;
  uint64_t m = (uint64_t)1 << (w - 1);
  v &= mask_of(w);
  return (int64_t)((v ^ m) - m);
}
static bool is_signed(kiln_elem_type_t t) { return kiln_elem_type_is_signed_int(t); }

static kiln_status oom(void) {
  return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "evaluator: out of memory for a temporary buffer");
}

/* ---- narrow floats ---- */

static inline float narrow_to_f32(kiln_elem_type_t t, uint32_t bits) {
  if (t == KILN_BF16) return kiln_bf16_to_f32((uint16_t)bits);
  if (t == KILN_F16) return kiln_f16_to_f32((uint16_t)bits);
  return (float)kiln_narrow_to_f64(t, bits);
}
static inline uint32_t narrow_from_f32(kiln_elem_type_t t, float f) {
  if (t == KILN_BF16) return kiln_f32_to_bf16(f);
  if (t == KILN_F16) return kiln_f32_to_f16(f);
  return kiln_narrow_from_f64(t, (double)f);
}
static inline uint32_t narrow_from_f64(kiln_elem_type_t t, double d) {
  if (t == KILN_BF16) return kiln_f64_to_bf16(d);
  if (t == KILN_F16) return kiln_f64_to_f16(d);
  return kiln_narrow_from_f64(t, d);
}
static inline uint32_t narrow_load_bits(kiln_elem_type_t t, const void *data, int64_t i) {
  if (kiln_elem_type_storage_bytes(t) == 2) return ((const uint16_t *)data)[i];
  return ((const uint8_t *)data)[i];
}
static inline void narrow_store_bits(kiln_elem_type_t t, void *data, int64_t i, uint32_t bits) {
  if (kiln_elem_type_storage_bytes(t) == 2)
    ((uint16_t *)data)[i] = (uint16_t)bits;
  else
    ((uint8_t *)data)[i] = (uint8_t)bits;
}

/* ---- XLA's float -> integer conversion: NaN -> 0, saturating at the type's range ---- */

static int64_t f64_to_int(double d, kiln_elem_type_t t) {
  int w = width_of(t);
  if (t == KILN_PRED) return d != 0;
  if (isnan(d)) return 0;
  if (is_signed(t)) {
    int64_t mx = (int64_t)(mask_of(w) >> 1), mn = -mx - 1;
    if (d >= (double)mx) return mx;
    if (d <= (double)mn) return mn;
    return (int64_t)d;
  }
  uint64_t mx = mask_of(w);
  if (d <= 0) return 0;
  if (d >= (double)mx) return (int64_t)mx;
  return (int64_t)(uint64_t)d;
}

/* ---- element access ---- */

static inline int64_t int_load(kiln_elem_type_t t, const void *data, int64_t i) {
  switch (t) {
  case KILN_PRED: return ((const uint8_t *)data)[i] != 0;
  case KILN_S8: return ((const int8_t *)data)[i];
  case KILN_S16: return ((const int16_t *)data)[i];
  case KILN_S32: return ((const int32_t *)data)[i];
  case KILN_S64: return ((const int64_t *)data)[i];
  case KILN_U8: return ((const uint8_t *)data)[i];
  case KILN_U16: return ((const uint16_t *)data)[i];
  case KILN_U32: return ((const uint32_t *)data)[i];
  case KILN_U64: return (int64_t)((const uint64_t *)data)[i];
  case KILN_S1:
  case KILN_S2:
  case KILN_S4:
    return sext(((const uint8_t *)data)[i], width_of(t));
  case KILN_U1:
  case KILN_U2:
  case KILN_U4:
    return ((const uint8_t *)data)[i] & mask_of(width_of(t));
  default: return 0;
  }
}

/* Stores an integer wrapped to the type's width (sub-byte types keep only their low bits
 * in the byte, as literal.c does; pred stores v != 0). */
static inline void int_store(kiln_elem_type_t t, void *data, int64_t i, int64_t v) {
  switch (t) {
  case KILN_PRED: ((uint8_t *)data)[i] = v != 0; break;
  case KILN_S8: case KILN_U8: ((uint8_t *)data)[i] = (uint8_t)v; break;
  case KILN_S16: case KILN_U16: ((uint16_t *)data)[i] = (uint16_t)v; break;
  case KILN_S32: case KILN_U32: ((uint32_t *)data)[i] = (uint32_t)v; break;
  case KILN_S64: case KILN_U64: ((uint64_t *)data)[i] = (uint64_t)v; break;
  case KILN_S1:
  case KILN_S2:
  case KILN_S4:
  case KILN_U1:
  case KILN_U2:
  case KILN_U4:
    ((uint8_t *)data)[i] = (uint8_t)((uint64_t)v & mask_of(width_of(t)));
    break;
  default: break;
  }
}

double kiln_eval_elem_get_f64(kiln_elem_type_t t, const void *data, int64_t i) {
  switch (kind_of(t)) {
  case K_F32:
    if (t == KILN_F32) return ((const float *)data)[i];
    return kiln_narrow_to_f64(t, narrow_load_bits(t, data, i));
  case K_F64: return ((const double *)data)[i];
  case K_INT: {
    int64_t v = int_load(t, data, i);
    return is_signed(t) ? (double)v : (double)(uint64_t)v;
  }
  case K_C64: return ((const float *)data)[2 * i];
  case K_C128: return ((const double *)data)[2 * i];
  default: return 0;
  }
}

int64_t kiln_eval_elem_get_s64(kiln_elem_type_t t, const void *data, int64_t i) {
  if (kind_of(t) == K_INT) return int_load(t, data, i);
  return f64_to_int(kiln_eval_elem_get_f64(t, data, i), KILN_S64);
}

void kiln_eval_elem_set_f64(kiln_elem_type_t t, void *data, int64_t i, double v) {
  switch (kind_of(t)) {
  case K_F32:
    if (t == KILN_F32)
      ((float *)data)[i] = (float)v;
    else
      narrow_store_bits(t, data, i, narrow_from_f64(t, v));
    break;
  case K_F64: ((double *)data)[i] = v; break;
  case K_INT: int_store(t, data, i, f64_to_int(v, t)); break;
  case K_C64: ((float *)data)[2 * i] = (float)v; ((float *)data)[2 * i + 1] = 0; break;
  case K_C128: ((double *)data)[2 * i] = v; ((double *)data)[2 * i + 1] = 0; break;
  default: break;
  }
}

void kiln_eval_elem_set_s64(kiln_elem_type_t t, void *data, int64_t i, int64_t v) {
  if (kind_of(t) == K_INT)
    int_store(t, data, i, v);
  else
    kiln_eval_elem_set_f64(t, data, i, (double)v);
}

/* ---- operand chunks ----
 *
 * Operands are processed CHUNK elements at a time so that the class-typed copies stay in
 * cache and no array-sized temporaries are needed. */

#define CHUNK 1024
#define CHUNK_BYTES (CHUNK * 16) /* widest class element: c128 */

static size_t class_bytes(kind_t k) {
  return k == K_F32 ? sizeof(float) : k == K_C128 ? 2 * sizeof(double) : 8;
}

/* True when literal storage of `t` is already its class representation. */
static bool class_native(kiln_elem_type_t t) {
  return t == KILN_F32 || t == KILN_F64 || t == KILN_S64 || t == KILN_U64 || t == KILN_C64 ||
         t == KILN_C128;
}

/* Converts `count` elements of `l` starting at `start` into `dst` (class representation). */
static void load_range(const kiln_literal_t *l, int64_t start, int64_t count, void *dst) {
  kiln_elem_type_t t = l->shape->type;
  const char *src = (const char *)l->data;
  switch (kind_of(t)) {
  case K_F32: {
    float *f = dst;
    if (t == KILN_F32) {
      memcpy(f, src + 4 * start, 4 * (size_t)count);
    } else if (t == KILN_BF16) {
      const uint16_t *s = (const uint16_t *)src + start;
      for (int64_t i = 0; i < count; i++) f[i] = kiln_bf16_to_f32(s[i]);
    } else if (t == KILN_F16) {
      const uint16_t *s = (const uint16_t *)src + start;
      for (int64_t i = 0; i < count; i++) f[i] = kiln_f16_to_f32(s[i]);
    } else {
      for (int64_t i = 0; i < count; i++) f[i] = narrow_to_f32(t, narrow_load_bits(t, src, start + i));
    }
    break;
  }
  case K_INT: {
    int64_t *v = dst;
    switch (t) {
#define LOADLOOP(T, C) case T: { const C *s = (const C *)src + start; for (int64_t i = 0; i < count; i++) v[i] = (int64_t)s[i]; break; }
    LOADLOOP(KILN_S8, int8_t)
    LOADLOOP(KILN_S16, int16_t)
    LOADLOOP(KILN_S32, int32_t)
    LOADLOOP(KILN_S64, int64_t)
    LOADLOOP(KILN_U8, uint8_t)
    LOADLOOP(KILN_U16, uint16_t)
    LOADLOOP(KILN_U32, uint32_t)
    LOADLOOP(KILN_U64, uint64_t)
#undef LOADLOOP
    default:
      for (int64_t i = 0; i < count; i++) v[i] = int_load(t, src, start + i);
    }
    break;
  }
  default: {
    size_t es = class_bytes(kind_of(t));
    memcpy(dst, src + es * (size_t)start, es * (size_t)count);
  }
  }
}

/* Class-typed view of elements [start, start+count) of operand `l`: a pointer into its
 * storage when that is already the class representation, else a conversion into
 * `scratch`. A one-element operand (`bcast`) is replicated. */
static const void *operand_range(const kiln_literal_t *l, bool bcast, int64_t start, int64_t count,
                                 void *scratch) {
  kiln_elem_type_t t = l->shape->type;
  size_t es = class_bytes(kind_of(t));
  if (bcast) {
    load_range(l, 0, 1, scratch);
    for (int64_t i = 1; i < count; i++) memcpy((char *)scratch + es * (size_t)i, scratch, es);
    return scratch;
  }
  if (class_native(t)) return (const char *)l->data + es * (size_t)start;
  load_range(l, start, count, scratch);
  return scratch;
}

/* Where a kernel writes elements [start, ...) of `out`: straight into its storage when
 * that is the class representation, else `scratch` (then store_range). */
static void *result_range(kiln_literal_t *out, int64_t start, void *scratch) {
  kiln_elem_type_t t = out->shape->type;
  if (class_native(t)) return (char *)out->data + class_bytes(kind_of(t)) * (size_t)start;
  return scratch;
}

/* Stores `count` class values from `src` into `out` at `start` with rounding / wrapping. */
static void store_range(kiln_literal_t *out, int64_t start, int64_t count, const void *src) {
  kiln_elem_type_t t = out->shape->type;
  char *dst = (char *)out->data;
  if (class_native(t)) {
    size_t es = class_bytes(kind_of(t));
    if (src != dst + es * (size_t)start) memcpy(dst + es * (size_t)start, src, es * (size_t)count);
    return;
  }
  switch (kind_of(t)) {
  case K_F32: {
    const float *f = src;
    if (t == KILN_BF16) {
      uint16_t *d = (uint16_t *)dst + start;
      for (int64_t i = 0; i < count; i++) d[i] = kiln_f32_to_bf16(f[i]);
    } else if (t == KILN_F16) {
      uint16_t *d = (uint16_t *)dst + start;
      for (int64_t i = 0; i < count; i++) d[i] = kiln_f32_to_f16(f[i]);
    } else {
      for (int64_t i = 0; i < count; i++) narrow_store_bits(t, dst, start + i, narrow_from_f32(t, f[i]));
    }
    break;
  }
  case K_INT: {
    const int64_t *v = src;
    switch (t) {
#define STORELOOP(T, C) case T: { C *d = (C *)dst + start; for (int64_t i = 0; i < count; i++) d[i] = (C)v[i]; break; }
    STORELOOP(KILN_S8, uint8_t)
    STORELOOP(KILN_U8, uint8_t)
    STORELOOP(KILN_S16, uint16_t)
    STORELOOP(KILN_U16, uint16_t)
    STORELOOP(KILN_S32, uint32_t)
    STORELOOP(KILN_U32, uint32_t)
#undef STORELOOP
    default:
      for (int64_t i = 0; i < count; i++) int_store(t, dst, start + i, v[i]);
    }
    break;
  }
  default:
    break;
  }
}

/* Scratch for up to 4 operand chunks and one result chunk. */
typedef struct scratch {
  unsigned char *mem;
} scratch_t;
static kiln_status scratch_init(scratch_t *s) {
  s->mem = kiln_try_malloc(5 * CHUNK_BYTES);
  return s->mem ? KILN_STATUS_OK : oom();
}
static void *scratch_slot(scratch_t *s, int i) { return s->mem + (size_t)i * CHUNK_BYTES; }
static void scratch_free(scratch_t *s) { kiln_free(s->mem); }

/* ---- float kernels (float for f32 and narrower, double for f64) ---- */

#define L1(expr) do { for (int64_t i = 0; i < n; i++) { elem_t x = a[i]; o[i] = (expr); } } while (0)
#define L2(expr) do { for (int64_t i = 0; i < n; i++) { elem_t x = a[i], y = b[i]; o[i] = (expr); } } while (0)

#define FLOAT_KERNEL(NAME, T, S)                                                                \
  static bool NAME(kiln_hlo_opcode_t op, T *o, const T *a, const T *b, const T *c, int64_t n) { \
    typedef T elem_t;                                                                           \
    switch (op) {                                                                               \
      case KILN_OP_ADD:                                                                         \
        L2(x + y);                                                                              \
        break;                                                                                  \
      case KILN_OP_SUBTRACT:                                                                    \
        L2(x - y);                                                                              \
        break;                                                                                  \
      case KILN_OP_MULTIPLY:                                                                    \
        L2(x *y);                                                                               \
        break;                                                                                  \
      case KILN_OP_DIVIDE:                                                                      \
        L2(x / y);                                                                              \
        break;                                                                                  \
      case KILN_OP_REMAINDER:                                                                   \
        L2(fmod##S(x, y));                                                                      \
        break;                                                                                  \
      /* XLA: 1^y = 1 and x^0 = 1 even for NaN, else pow. */                                    \
      case KILN_OP_POWER:                                                                       \
        L2((x == 1 || y == 0) ? (T)1 : pow##S(x, y));                                           \
        break;                                                                                  \
      /* IEEE 754-2019 maximum / minimum (eval.h's kiln_eval_fstep) */                          \
      case KILN_OP_MAXIMUM:                                                                     \
      case KILN_OP_MINIMUM:                                                                     \
        L2(kiln_eval_fstep##S(op, x, y));                                                       \
        break;                                                                                  \
      case KILN_OP_ATAN2:                                                                       \
        L2(atan2##S(x, y));                                                                     \
        break;                                                                                  \
      case KILN_OP_ABS:                                                                         \
        L1(fabs##S(x));                                                                         \
        break;                                                                                  \
      case KILN_OP_NEGATE:                                                                      \
        L1(-x);                                                                                 \
        break;                                                                                  \
      /* XLA: sign keeps NaN and signed zeros: copysign(x != 0, x). */                          \
      case KILN_OP_SIGN:                                                                        \
        L1(isnan(x) ? x : copysign##S((T)(x != 0), x));                                         \
        break;                                                                                  \
      case KILN_OP_FLOOR:                                                                       \
        L1(floor##S(x));                                                                        \
        break;                                                                                  \
      case KILN_OP_CEIL:                                                                        \
        L1(ceil##S(x));                                                                         \
        break;                                                                                  \
      case KILN_OP_ROUND_NEAREST_AFZ:                                                           \
        L1(round##S(x));                                                                        \
        break;                                                                                  \
      case KILN_OP_ROUND_NEAREST_EVEN:                                                          \
        L1(nearbyint##S(x));                                                                    \
        break;                                                                                  \
      case KILN_OP_SQRT:                                                                        \
        L1(sqrt##S(x));                                                                         \
        break;                                                                                  \
      case KILN_OP_RSQRT:                                                                       \
        L1((T)1 / sqrt##S(x));                                                                  \
        break;                                                                                  \
      case KILN_OP_CBRT:                                                                        \
        L1(cbrt##S(x));                                                                         \
        break;                                                                                  \
      case KILN_OP_EXP:                                                                         \
        L1(exp##S(x));                                                                          \
        break;                                                                                  \
      case KILN_OP_EXPM1:                                                                       \
        L1(expm1##S(x));                                                                        \
        break;                                                                                  \
      case KILN_OP_LOG:                                                                         \
        L1(log##S(x));                                                                          \
        break;                                                                                  \
      case KILN_OP_LOG1P:                                                                       \
        L1(log1p##S(x));                                                                        \
        break;                                                                                  \
      case KILN_OP_LOGISTIC:                                                                    \
        L1((T)1 / ((T)1 + exp##S(-x)));                                                         \
        break;                                                                                  \
      case KILN_OP_SIN:                                                                         \
        L1(sin##S(x));                                                                          \
        break;                                                                                  \
      case KILN_OP_COS:                                                                         \
        L1(cos##S(x));                                                                          \
        break;                                                                                  \
      case KILN_OP_TAN:                                                                         \
        L1(tan##S(x));                                                                          \
        break;                                                                                  \
      case KILN_OP_TANH:                                                                        \
        L1(tanh##S(x));                                                                         \
        break;                                                                                  \
      case KILN_OP_ERF:                                                                         \
        L1(erf##S(x));                                                                          \
        break;                                                                                  \
      case KILN_OP_ACOS:                                                                        \
        L1(acos##S(x));                                                                         \
        break;                                                                                  \
      case KILN_OP_ACOSH:                                                                       \
        L1(acosh##S(x));                                                                        \
        break;                                                                                  \
      case KILN_OP_ASIN:                                                                        \
        L1(asin##S(x));                                                                         \
        break;                                                                                  \
      case KILN_OP_ASINH:                                                                       \
        L1(asinh##S(x));                                                                        \
        break;                                                                                  \
      case KILN_OP_ATANH:                                                                       \
        L1(atanh##S(x));                                                                        \
        break;                                                                                  \
      case KILN_OP_COSH:                                                                        \
        L1(cosh##S(x));                                                                         \
        break;                                                                                  \
      case KILN_OP_SINH:                                                                        \
        L1(sinh##S(x));                                                                         \
        break;                                                                                  \
      /* XLA: clamp(lo, x, hi) = NaN if any is NaN, else min(hi, max(x, lo)). */                \
      case KILN_OP_CLAMP:                                                                       \
        for (int64_t i = 0; i < n; i++) {                                                       \
          T lo = a[i], x = b[i], hi = c[i];                                                     \
          if (isnan(lo))                                                                        \
            o[i] = lo;                                                                          \
          else if (isnan(x))                                                                    \
            o[i] = x;                                                                           \
          else if (isnan(hi))                                                                   \
            o[i] = hi;                                                                          \
          else {                                                                                \
            o[i] = kiln_ieee_min##S(hi, kiln_ieee_max##S(x, lo));                               \
          }                                                                                     \
        }                                                                                       \
        break;                                                                                  \
      default:                                                                                  \
        return false;                                                                           \
    }                                                                                           \
    return true;                                                                                \
  }

FLOAT_KERNEL(kernel_f32, float, f)
FLOAT_KERNEL(kernel_f64, double, )

/* ---- integer kernel (int64 values; wrapping applied on store) ---- */

static uint64_t ipow(uint64_t base, uint64_t e) {
  uint64_t r = 1;
  while (e) {
    if (e & 1) r *= base;
    base *= base;
    e >>= 1;
  }
  return r;
}

static bool kernel_int(kiln_hlo_opcode_t op, kiln_elem_type_t t, int64_t *o, const int64_t *a,
                       const int64_t *b, const int64_t *c, int64_t n) {
  const int w = width_of(t);
  const uint64_t mask = mask_of(w);
  const bool sg = is_signed(t), pred = t == KILN_PRED;
#define I2(expr) do { for (int64_t i = 0; i < n; i++) { int64_t x = a[i], y = b[i]; o[i] = (int64_t)(expr); } } while (0)
#define I1(expr) do { for (int64_t i = 0; i < n; i++) { int64_t x = a[i]; o[i] = (int64_t)(expr); } } while (0)
#define LESS(x, y) (sg ? (x) < (y) : (uint64_t)(x) < (uint64_t)(y))
  switch (op) {
  case KILN_OP_ADD: I2((uint64_t)x + (uint64_t)y); break;
  case KILN_OP_SUBTRACT: I2((uint64_t)x - (uint64_t)y); break;
  case KILN_OP_MULTIPLY: I2((uint64_t)x * (uint64_t)y); break;
  case KILN_OP_NEGATE: I1(0 - (uint64_t)x); break;
  /* XLA: x / 0 = -1 (all bits set) and, signed, INT_MIN / -1 = INT_MIN (via wrapping). */
  case KILN_OP_DIVIDE:
    if (sg)
      I2(y == 0 ? -1 : (y == -1 ? (int64_t)(0 - (uint64_t)x) : x / y));
    else
      I2(y == 0 ? ~(uint64_t)0 : (uint64_t)x / (uint64_t)y);
    break;
  /* XLA: x % 0 = x and, signed, INT_MIN % -1 = 0. */
  case KILN_OP_REMAINDER:
    if (sg)
      I2(y == 0 ? x : (y == -1 ? 0 : x % y));
    else
      I2(y == 0 ? (uint64_t)x : (uint64_t)x % (uint64_t)y);
    break;
  /* XLA: 1^y = x^0 = 1; a negative exponent gives 0 unless the base is 1; else repeated
   * squaring with wrapping. pred: x || !y. */
  case KILN_OP_POWER:
    if (pred)
      I2(x || !y);
    else
      I2((x == 1 || y == 0) ? 1 : (sg && y < 0) ? 0 : ipow((uint64_t)x, (uint64_t)y));
    break;
  case KILN_OP_MAXIMUM: I2(LESS(x, y) ? y : x); break;
  case KILN_OP_MINIMUM: I2(LESS(y, x) ? y : x); break;
  case KILN_OP_ABS: I1(sg && x < 0 ? 0 - (uint64_t)x : (uint64_t)x); break;
  case KILN_OP_SIGN: I1(sg ? (x > 0) - (x < 0) : x != 0); break;
  case KILN_OP_NOT:
    if (pred)
      I1(!x);
    else
      I1(~(uint64_t)x);
    break;
  case KILN_OP_AND: I2((uint64_t)x & (uint64_t)y); break;
  case KILN_OP_OR: I2((uint64_t)x | (uint64_t)y); break;
  case KILN_OP_XOR: I2((uint64_t)x ^ (uint64_t)y); break;
  /* XLA: the shift amount is read as unsigned; amounts >= the bit width give 0 for the
   * left and logical shifts and the sign fill for the arithmetic shift. */
  case KILN_OP_SHIFT_LEFT:
    I2(((uint64_t)y & mask) >= (uint64_t)w ? 0 : (uint64_t)x << ((uint64_t)y & mask));
    break;
  case KILN_OP_SHIFT_RIGHT_LOGICAL:
    I2(((uint64_t)y & mask) >= (uint64_t)w ? 0 : ((uint64_t)x & mask) >> ((uint64_t)y & mask));
    break;
  case KILN_OP_SHIFT_RIGHT_ARITHMETIC:
    I2(((uint64_t)y & mask) >= (uint64_t)w ? (sext((uint64_t)x, w) < 0 ? -1 : 0)
                                           : sext((uint64_t)x, w) >> ((uint64_t)y & mask));
    break;
  case KILN_OP_POPCNT: I1(__builtin_popcountll((uint64_t)x & mask)); break;
  case KILN_OP_CLZ:
    I1(((uint64_t)x & mask) == 0 ? w : w - (64 - __builtin_clzll((uint64_t)x & mask)));
    break;
  case KILN_OP_CLAMP:
    for (int64_t i = 0; i < n; i++) {
      int64_t lo = a[i], x = b[i], hi = c[i];
      int64_t m = LESS(x, lo) ? lo : x;
      o[i] = LESS(hi, m) ? hi : m;
    }
    break;
  default:
    return false;
  }
#undef I1
#undef I2
#undef LESS
  return true;
}

/* ---- complex kernels ---- */

#define CPLX_KERNEL(NAME, T, S)                                                                \
  static bool NAME(kiln_hlo_opcode_t op, T *o, const T *a, const T *b, int64_t n) {           \
    typedef T elem_t;                                                                          \
    switch (op) {                                                                              \
    case KILN_OP_ADD: L2(x + y); break;                                                        \
    case KILN_OP_SUBTRACT: L2(x - y); break;                                                   \
    case KILN_OP_MULTIPLY: L2(x * y); break;                                                   \
    case KILN_OP_DIVIDE: L2(x / y); break;                                                     \
    case KILN_OP_POWER: L2((x == 1 || y == 0) ? (T)1 : cpow##S(x, y)); break;                  \
    case KILN_OP_NEGATE: L1(-x); break;                                                        \
    case KILN_OP_SIGN: L1(cabs##S(x) == 0 ? (T)0 : x / cabs##S(x)); break;                     \
    case KILN_OP_EXP: L1(cexp##S(x)); break;                                                   \
    case KILN_OP_EXPM1: L1(cexp##S(x) - 1); break;                                             \
    case KILN_OP_LOG: L1(clog##S(x)); break;                                                   \
    case KILN_OP_LOG1P: L1(clog##S(x + 1)); break;                                             \
    case KILN_OP_LOGISTIC: L1(1 / (1 + cexp##S(-x))); break;                                   \
    case KILN_OP_SQRT: L1(csqrt##S(x)); break;                                                 \
    case KILN_OP_RSQRT: L1(1 / csqrt##S(x)); break;                                            \
    case KILN_OP_SIN: L1(csin##S(x)); break;                                                   \
    case KILN_OP_COS: L1(ccos##S(x)); break;                                                   \
    case KILN_OP_TAN: L1(ctan##S(x)); break;                                                   \
    case KILN_OP_TANH: L1(ctanh##S(x)); break;                                                 \
    case KILN_OP_SINH: L1(csinh##S(x)); break;                                                 \
    case KILN_OP_COSH: L1(ccosh##S(x)); break;                                                 \
    case KILN_OP_ASIN: L1(casin##S(x)); break;                                                 \
    case KILN_OP_ACOS: L1(cacos##S(x)); break;                                                 \
    case KILN_OP_ASINH: L1(casinh##S(x)); break;                                               \
    case KILN_OP_ACOSH: L1(cacosh##S(x)); break;                                               \
    case KILN_OP_ATANH: L1(catanh##S(x)); break;                                               \
    default: return false;                                                                     \
    }                                                                                          \
    return true;                                                                               \
  }

CPLX_KERNEL(kernel_c64, float complex, f)
CPLX_KERNEL(kernel_c128, double complex, )

#undef L1
#undef L2

/* ---- the plain same-type elementwise ops ---- */

static kiln_status bad_type(const kiln_hlo_instruction_t *instr, kiln_elem_type_t t) {
  return kiln_status_make(KILN_INVALID_ARGUMENT, "%s '%s' does not accept element type %s",
                          kiln_hlo_opcode_name(instr->opcode), instr->name, kiln_elem_type_name(t));
}

static kiln_status eval_same_type(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                  kiln_literal_t *const *ops, kiln_literal_t *out) {
  kiln_elem_type_t t = out->shape->type;
  int64_t n = out->num_elements;
  int nops = instr->num_operands;
  if (nops < 1 || nops > 3) return bad_type(instr, t);
  for (int i = 0; i < nops; i++) {
    if (ops[i]->shape->type != t)
      return kiln_status_make(KILN_INVALID_ARGUMENT, "%s '%s': operand %d is %s, result is %s",
                              kiln_hlo_opcode_name(instr->opcode), instr->name, i,
                              kiln_elem_type_name(ops[i]->shape->type), kiln_elem_type_name(t));
    bool may_bcast = instr->opcode == KILN_OP_CLAMP && i != 1;
    if (ops[i]->num_elements != n && !(may_bcast && ops[i]->num_elements == 1))
      return kiln_status_make(KILN_INVALID_ARGUMENT, "%s '%s': operand %d has %lld elements, result %lld",
                              kiln_hlo_opcode_name(instr->opcode), instr->name, i,
                              (long long)ops[i]->num_elements, (long long)n);
  }
  if (n == 0) return KILN_STATUS_OK;
  scratch_t sc;
  KILN_RETURN_IF_ERROR_PLAIN(scratch_init(&sc));
  kind_t k = kind_of(t);
  kiln_status st = KILN_STATUS_OK;
  for (int64_t start = 0; start < n && !st; start += CHUNK) {
    int64_t cnt = n - start < CHUNK ? n - start : CHUNK;
    const void *in[3] = {NULL, NULL, NULL};
    for (int i = 0; i < nops; i++)
      in[i] = operand_range(ops[i], ops[i]->num_elements != n, start, cnt, scratch_slot(&sc, i));
    void *o = result_range(out, start, scratch_slot(&sc, 4));
    bool ok = false;
    switch (k) {
    case K_F32: ok = kernel_f32(instr->opcode, o, in[0], in[1], in[2], cnt); break;
    case K_F64: ok = kernel_f64(instr->opcode, o, in[0], in[1], in[2], cnt); break;
    case K_INT: ok = kernel_int(instr->opcode, t, o, in[0], in[1], in[2], cnt); break;
    case K_C64: {
      /* complex storage is (re, im) pairs: copy through complex-typed arrays */
      float complex ca[CHUNK], cb[CHUNK], co[CHUNK];
      memcpy(ca, in[0], sizeof(float complex) * (size_t)cnt);
      if (nops > 1) memcpy(cb, in[1], sizeof(float complex) * (size_t)cnt);
      ok = nops <= 2 && kernel_c64(instr->opcode, co, ca, cb, cnt);
      if (ok) memcpy(o, co, sizeof(float complex) * (size_t)cnt);
      break;
    }
    case K_C128: {
      double complex ca[CHUNK], cb[CHUNK], co[CHUNK];
      memcpy(ca, in[0], sizeof(double complex) * (size_t)cnt);
      if (nops > 1) memcpy(cb, in[1], sizeof(double complex) * (size_t)cnt);
      ok = nops <= 2 && kernel_c128(instr->opcode, co, ca, cb, cnt);
      if (ok) memcpy(o, co, sizeof(double complex) * (size_t)cnt);
      break;
    }
    default: break;
    }
    if (!ok) st = bad_type(instr, t);
    else store_range(out, start, cnt, o);
  }
  scratch_free(&sc);
  return st;
}

/* ---- compare ---- */

/* Total order key of an IEEE float's bits: -NaN < -inf < ... < -0 < +0 < ... < inf < +NaN. */
static inline int64_t total_key64(double d) {
  int64_t b;
  memcpy(&b, &d, 8);
  return b ^ (int64_t)(((uint64_t)(b >> 63)) >> 1);
}
static inline int32_t total_key32(float f) {
  int32_t b;
  memcpy(&b, &f, 4);
  return b ^ (int32_t)(((uint32_t)(b >> 31)) >> 1);
}

int64_t kiln_eval_elem_total_order_key(kiln_elem_type_t t, const void *data, int64_t i) {
  switch (t) {
    case KILN_F64:
      return total_key64(((const double *)data)[i]);
    case KILN_F32:
      return total_key32(((const float *)data)[i]);
    case KILN_F16:
    case KILN_BF16: {
      int16_t b;
      memcpy(&b, (const uint8_t *)data + 2 * i, 2);
      return b ^ (int16_t)(((uint16_t)b >> 15) ? 0x7FFF : 0);
    }
    case KILN_F8E8M0FNU:
      return ((const uint8_t *)data)[i];
    case KILN_F4E2M1FN:
      return total_key64(kiln_eval_elem_get_f64(t, data, i));
    default: {
      uint8_t u = ((const uint8_t *)data)[i];
      bool fnuz = t == KILN_F8E5M2FNUZ || t == KILN_F8E4M3FNUZ || t == KILN_F8E4M3B11FNUZ;
      if (fnuz && u == 0x80) return 128;
      int8_t b = (int8_t)u;
      return b ^ (int8_t)(u >> 7 ? 0x7F : 0);
    }
  }
}

static inline bool cmp_apply(kiln_cmp_dir_t d, int c) { /* c: <0, 0, >0 */
  switch (d) {
  case KILN_CMP_EQ: return c == 0;
  case KILN_CMP_NE: return c != 0;
  case KILN_CMP_LT: return c < 0;
  case KILN_CMP_LE: return c <= 0;
  case KILN_CMP_GT: return c > 0;
  case KILN_CMP_GE: return c >= 0;
  default: return false;
  }
}

#define FLOAT_CMP(x, y, d)                                         \
  ((d) == KILN_CMP_EQ ? (x) == (y) : (d) == KILN_CMP_NE ? (x) != (y) \
   : (d) == KILN_CMP_LT ? (x) < (y) : (d) == KILN_CMP_LE ? (x) <= (y) \
   : (d) == KILN_CMP_GT ? (x) > (y) : (x) >= (y))

static kiln_status eval_compare(const kiln_hlo_instruction_t *instr, kiln_literal_t *const *ops,
                                kiln_literal_t *out) {
  kiln_elem_type_t t = ops[0]->shape->type;
  int64_t n = out->num_elements;
  kiln_cmp_dir_t d = instr->comparison_direction;
  if (d == KILN_CMP_NONE)
    return kiln_status_make(KILN_INVALID_ARGUMENT, "compare '%s' has no direction", instr->name);
  if (ops[1]->shape->type != t)
    return kiln_status_make(KILN_INVALID_ARGUMENT, "compare '%s': operands are %s and %s", instr->name,
                            kiln_elem_type_name(t), kiln_elem_type_name(ops[1]->shape->type));
  if (out->shape->type != KILN_PRED) return bad_type(instr, out->shape->type);
  if (ops[0]->num_elements != n || ops[1]->num_elements != n)
    return kiln_status_make(KILN_INVALID_ARGUMENT, "compare '%s': element counts differ", instr->name);
  if (n == 0) return KILN_STATUS_OK;
  scratch_t sc;
  KILN_RETURN_IF_ERROR_PLAIN(scratch_init(&sc));
  kiln_cmp_type_t ct = instr->comparison_type;
  kiln_status st = KILN_STATUS_OK;
  for (int64_t start = 0; start < n && !st; start += CHUNK) {
  int64_t cnt = n - start < CHUNK ? n - start : CHUNK;
  struct { const void *p; } a = {operand_range(ops[0], false, start, cnt, scratch_slot(&sc, 0))},
                            b = {operand_range(ops[1], false, start, cnt, scratch_slot(&sc, 1))};
  uint8_t *o = (uint8_t *)out->data + start;
  int64_t n = cnt;
  switch (kind_of(t)) {
  case K_F32: {
    const float *x = a.p, *y = b.p;
    if (ct == KILN_CMP_TYPE_TOTALORDER) {
      /* From the stored bits: converting a narrower type to f32 quiets a signaling NaN and
       * reorders NaN payloads (fuzz-2422341: f8e5m2 0xFE <= 0xFD). */
      for (int64_t i = 0; i < n; i++) {
        int64_t kx = kiln_eval_elem_total_order_key(t, ops[0]->data, start + i);
        int64_t ky = kiln_eval_elem_total_order_key(t, ops[1]->data, start + i);
        o[i] = cmp_apply(d, (kx > ky) - (kx < ky));
      }
    } else {
      for (int64_t i = 0; i < n; i++) o[i] = FLOAT_CMP(x[i], y[i], d);
    }
    break;
  }
  case K_F64: {
    const double *x = a.p, *y = b.p;
    if (ct == KILN_CMP_TYPE_TOTALORDER) {
      for (int64_t i = 0; i < n; i++) {
        int64_t kx = total_key64(x[i]), ky = total_key64(y[i]);
        o[i] = cmp_apply(d, (kx > ky) - (kx < ky));
      }
    } else {
      for (int64_t i = 0; i < n; i++) o[i] = FLOAT_CMP(x[i], y[i], d);
    }
    break;
  }
  case K_INT: {
    const int64_t *x = a.p, *y = b.p;
    int w = width_of(t);
    bool sg = is_signed(t);
    if (ct == KILN_CMP_TYPE_SIGNED) sg = true;
    if (ct == KILN_CMP_TYPE_UNSIGNED) sg = false;
    uint64_t m = mask_of(w);
    for (int64_t i = 0; i < n; i++) {
      int c;
      if (sg) {
        int64_t p = sext((uint64_t)x[i], w), q = sext((uint64_t)y[i], w);
        c = (p > q) - (p < q);
      } else {
        uint64_t p = (uint64_t)x[i] & m, q = (uint64_t)y[i] & m;
        c = (p > q) - (p < q);
      }
      o[i] = cmp_apply(d, c);
    }
    break;
  }
  case K_C64:
  case K_C128: {
    if (d != KILN_CMP_EQ && d != KILN_CMP_NE) {
      st = kiln_status_make(KILN_INVALID_ARGUMENT, "compare '%s': complex values only compare EQ/NE",
                            instr->name);
      break;
    }
    for (int64_t i = 0; i < n; i++) {
      bool eq;
      if (t == KILN_C64) {
        const float *x = a.p, *y = b.p;
        eq = x[2 * i] == y[2 * i] && x[2 * i + 1] == y[2 * i + 1];
      } else {
        const double *x = a.p, *y = b.p;
        eq = x[2 * i] == y[2 * i] && x[2 * i + 1] == y[2 * i + 1];
      }
      o[i] = d == KILN_CMP_EQ ? eq : !eq;
    }
    break;
  }
  default:
    st = bad_type(instr, t);
  }
  }
  scratch_free(&sc);
  return st;
}

/* ---- select ---- */

static kiln_status eval_select(const kiln_hlo_instruction_t *instr, kiln_literal_t *const *ops,
                               kiln_literal_t *out) {
  int64_t n = out->num_elements;
  const kiln_literal_t *p = ops[0], *x = ops[1], *y = ops[2];
  if (p->shape->type != KILN_PRED || x->shape->type != out->shape->type ||
      y->shape->type != out->shape->type || x->num_elements != n || y->num_elements != n ||
      (p->num_elements != n && p->num_elements != 1))
    return kiln_status_make(KILN_INVALID_ARGUMENT, "select '%s': operand shapes do not match", instr->name);
  size_t es = kiln_elem_type_storage_bytes(out->shape->type);
  const uint8_t *pp = p->data;
  bool bcast = p->num_elements == 1 && n != 1;
  if (bcast) {
    const kiln_literal_t *src = pp[0] ? x : y;
    if (n) memcpy(out->data, src->data, es * (size_t)n);
    return KILN_STATUS_OK;
  }
#define SEL(C) do { C *o = out->data; const C *a = x->data, *b = y->data; \
    for (int64_t i = 0; i < n; i++) o[i] = pp[i] ? a[i] : b[i]; } while (0)
  switch (es) {
  case 1: SEL(uint8_t); break;
  case 2: SEL(uint16_t); break;
  case 4: SEL(uint32_t); break;
  case 8: SEL(uint64_t); break;
  default:
    for (int64_t i = 0; i < n; i++)
      memcpy((char *)out->data + (size_t)i * es, (const char *)(pp[i] ? x : y)->data + (size_t)i * es, es);
  }
#undef SEL
  return KILN_STATUS_OK;
}

/* ---- convert ---- */

struct cptr {
  const void *p;
};

/* Converts n class values `b.p` (of source type st_) into `out` (a chunk of the result). */
static void convert_chunk(kiln_elem_type_t st_, struct cptr b, kiln_literal_t *out, int64_t n) {
  kiln_elem_type_t dt = out->shape->type;
  kind_t sk = kind_of(st_), dk = kind_of(dt);
  if (dk == K_C64 || dk == K_C128) {
    for (int64_t i = 0; i < n; i++) {
      double re, im = 0;
      switch (sk) {
      case K_F32: re = ((const float *)b.p)[i]; break;
      case K_F64: re = ((const double *)b.p)[i]; break;
      case K_INT: {
        int64_t v = ((const int64_t *)b.p)[i];
        re = is_signed(st_) ? (double)v : (double)(uint64_t)v;
        if (dk == K_C64) re = is_signed(st_) ? (double)(float)v : (double)(float)(uint64_t)v;
        break;
      }
      case K_C64: re = ((const float *)b.p)[2 * i]; im = ((const float *)b.p)[2 * i + 1]; break;
      default: re = ((const double *)b.p)[2 * i]; im = ((const double *)b.p)[2 * i + 1]; break;
      }
      if (dk == K_C64) {
        ((float *)out->data)[2 * i] = (float)re;
        ((float *)out->data)[2 * i + 1] = (float)im;
      } else {
        ((double *)out->data)[2 * i] = re;
        ((double *)out->data)[2 * i + 1] = im;
      }
    }
    return;
  }
  switch (sk) {
  case K_F32: {
    const float *f = b.p;
    if (dt == KILN_F32) {
      memcpy(out->data, f, sizeof(float) * (size_t)n);
    } else if (dk == K_F32) {
      store_range(out, 0, n, f);
    } else if (dk == K_F64) {
      for (int64_t i = 0; i < n; i++) ((double *)out->data)[i] = f[i];
    } else {
      for (int64_t i = 0; i < n; i++) int_store(dt, out->data, i, f64_to_int(f[i], dt));
    }
    break;
  }
  case K_F64:
  case K_C64:
  case K_C128: {
    /* complex sources contribute their real part */
    for (int64_t i = 0; i < n; i++) {
      double v = sk == K_F64 ? ((const double *)b.p)[i]
                 : sk == K_C64 ? ((const float *)b.p)[2 * i]
                               : ((const double *)b.p)[2 * i];
      if (dt == KILN_F32) ((float *)out->data)[i] = (float)v;
      else if (dk == K_F32) narrow_store_bits(dt, out->data, i, narrow_from_f64(dt, v));
      else if (dk == K_F64) ((double *)out->data)[i] = v;
      else int_store(dt, out->data, i, f64_to_int(v, dt));
    }
    break;
  }
  case K_INT: {
    const int64_t *v = b.p;
    bool sg = is_signed(st_);
    if (dk == K_INT) {
      store_range(out, 0, n, v);
    } else if (dt == KILN_F32) {
      for (int64_t i = 0; i < n; i++)
        ((float *)out->data)[i] = sg ? (float)v[i] : (float)(uint64_t)v[i];
    } else if (dk == K_F64) {
      for (int64_t i = 0; i < n; i++)
        ((double *)out->data)[i] = sg ? (double)v[i] : (double)(uint64_t)v[i];
    } else {
      for (int64_t i = 0; i < n; i++) {
        float f = sg ? (float)v[i] : (float)(uint64_t)v[i];
        narrow_store_bits(dt, out->data, i, narrow_from_f32(dt, f));
      }
    }
    break;
  }
  default:
    break;
  }
}


/* XLA's convert: float -> int is NaN -> 0 and saturating; int -> narrower int wraps;
 * to pred is != 0; complex -> real takes the real part; narrowing floats round to nearest
 * even (once, from the source value). */
static kiln_status eval_convert(const kiln_hlo_instruction_t *instr, const kiln_literal_t *src,
                                kiln_literal_t *out) {
  kiln_elem_type_t st_ = src->shape->type, dt = out->shape->type;
  int64_t n = out->num_elements;
  if (src->num_elements != n)
    return kiln_status_make(KILN_INVALID_ARGUMENT, "convert '%s': element counts differ", instr->name);
  kind_t sk = kind_of(st_), dk = kind_of(dt);
  if (sk == K_NONE || dk == K_NONE) return bad_type(instr, sk == K_NONE ? st_ : dt);
  if (n == 0) return KILN_STATUS_OK;
  if (st_ == dt) {
    memcpy(out->data, src->data, kiln_elem_type_storage_bytes(dt) * (size_t)n);
    return KILN_STATUS_OK;
  }
  scratch_t sc;
  KILN_RETURN_IF_ERROR_PLAIN(scratch_init(&sc));
  size_t des = kiln_elem_type_storage_bytes(dt);
  for (int64_t start = 0; start < n; start += CHUNK) {
    int64_t cnt = n - start < CHUNK ? n - start : CHUNK;
    struct cptr b = {operand_range(src, false, start, cnt, scratch_slot(&sc, 0))};
    kiln_literal_t chunk = *out;
    chunk.data = (char *)out->data + des * (size_t)start;
    chunk.num_elements = cnt;
    convert_chunk(st_, b, &chunk, cnt);
  }
  scratch_free(&sc);
  return KILN_STATUS_OK;
}

/* bitcast-convert: same width reinterprets each element; different widths follow XLA:
 * the wider side has one more (minor) dimension of size ratio. Storage is little-endian. */
static kiln_status eval_bitcast_convert(const kiln_hlo_instruction_t *instr, const kiln_literal_t *src,
                                        kiln_literal_t *out) {
  kiln_elem_type_t st_ = src->shape->type, dt = out->shape->type;
  int sb = kiln_elem_type_bits(st_), db = kiln_elem_type_bits(dt);
  if (st_ == KILN_PRED || dt == KILN_PRED) {
    if (st_ != dt) return bad_type(instr, KILN_PRED);
  }
  if (sb == db && sb < 8) { /* sub-byte (s4, u4, f4e2m1fn, ...): the low bits of each byte */
    for (int64_t i = 0; i < out->num_elements; i++)
      ((uint8_t *)out->data)[i] = (uint8_t)(((const uint8_t *)src->data)[i] & mask_of(sb));
    return KILN_STATUS_OK;
  }
  if (sb % 8 || db % 8)
    return kiln_status_make(KILN_UNIMPLEMENTED, "bitcast-convert '%s' between %s and %s (sub-byte packing)",
                            instr->name, kiln_elem_type_name(st_), kiln_elem_type_name(dt));
  int64_t bytes = kiln_shape_byte_size(out->shape);
  if (bytes != kiln_shape_byte_size(src->shape))
    return kiln_status_make(KILN_INVALID_ARGUMENT, "bitcast-convert '%s': %lld bytes to %lld bytes",
                            instr->name, (long long)kiln_shape_byte_size(src->shape), (long long)bytes);
  if (bytes) memcpy(out->data, src->data, (size_t)bytes);
  return KILN_STATUS_OK;
}

/* ---- reduce-precision (XLA's bit-level algorithm) ---- */

static uint64_t reduce_precision_bits(uint64_t v, int total_bits, int src_exp, int src_mant,
                                      int64_t exp_bits, int64_t mant_bits, bool is_nan) {
  uint64_t orig = v;
  if (mant_bits < src_mant) {
    int shift = src_mant - (int)mant_bits;
    uint64_t last_bit_mask = (uint64_t)1 << shift;
    uint64_t base_bias = (last_bit_mask >> 1) - 1;
    uint64_t x_last = (v & last_bit_mask) >> shift;
    uint64_t trunc_mask = ~(last_bit_mask - 1);
    v = (v + x_last + base_bias) & trunc_mask;
  }
  if (exp_bits < src_exp) {
    uint64_t sign_mask = (uint64_t)1 << (total_bits - 1);
    uint64_t exp_mask = (((uint64_t)1 << src_exp) - 1) << src_mant;
    uint64_t bias = ((uint64_t)1 << (src_exp - 1)) - 1;
    uint64_t reduced_bias = ((uint64_t)1 << (exp_bits - 1)) - 1;
    uint64_t max_exp = bias + reduced_bias, min_exp = bias - reduced_bias;
    uint64_t x_exp = v & exp_mask;
    bool over = x_exp > (max_exp << src_mant);
    bool under = x_exp <= (min_exp << src_mant);
    uint64_t signed_zero = v & sign_mask;
    uint64_t signed_inf = signed_zero | exp_mask;
    if (over) v = signed_inf;
    if (under) v = signed_zero;
  }
  if (is_nan) {
    /* NaN stays the input when a mantissa bit is left, else becomes +inf */
    if (mant_bits > 0) return orig;
    uint64_t exp_mask = (((uint64_t)1 << src_exp) - 1) << src_mant;
    return exp_mask;
  }
  return v;
}

static kiln_status eval_reduce_precision(const kiln_hlo_instruction_t *instr, const kiln_literal_t *src,
                                         kiln_literal_t *out) {
  kiln_elem_type_t t = out->shape->type;
  int64_t n = out->num_elements;
  int64_t eb = instr->exponent_bits, mb = instr->mantissa_bits;
  if (eb < 1 || mb < 0)
    return kiln_status_make(KILN_INVALID_ARGUMENT, "reduce-precision '%s': exponent_bits=%lld mantissa_bits=%lld",
                            instr->name, (long long)eb, (long long)mb);
  if (src->shape->type != t || !kiln_elem_type_is_float(t)) return bad_type(instr, src->shape->type);
  if (n == 0) return KILN_STATUS_OK;
  if (t == KILN_F64) {
    const double *a = src->data;
    double *o = out->data;
    for (int64_t i = 0; i < n; i++) {
      uint64_t v;
      memcpy(&v, &a[i], 8);
      v = reduce_precision_bits(v, 64, 11, 52, eb, mb, isnan(a[i]));
      memcpy(&o[i], &v, 8);
    }
    return KILN_STATUS_OK;
  }
  scratch_t sc;
  KILN_RETURN_IF_ERROR_PLAIN(scratch_init(&sc));
  for (int64_t start = 0; start < n; start += CHUNK) {
    int64_t cnt = n - start < CHUNK ? n - start : CHUNK;
    const float *a = operand_range(src, false, start, cnt, scratch_slot(&sc, 0));
    float *o = result_range(out, start, scratch_slot(&sc, 4));
    for (int64_t i = 0; i < cnt; i++) {
      uint32_t v;
      memcpy(&v, &a[i], 4);
      v = (uint32_t)reduce_precision_bits(v, 32, 8, 23, eb, mb, isnan(a[i]));
      memcpy(&o[i], &v, 4);
    }
    store_range(out, start, cnt, o);
  }
  scratch_free(&sc);
  return KILN_STATUS_OK;
}

/* ---- stochastic-convert ---- */

/* XLA's stochastic-convert(float x, uint r) -> int: inf/NaN/out-of-range saturate (NaN -> 0)
 * as in convert; otherwise |x| is truncated and rounded up when r < frac(|x|) * 2^bits(r),
 * then the sign is applied. */
static kiln_status eval_stochastic_convert(const kiln_hlo_instruction_t *instr, kiln_literal_t *const *ops,
                                           kiln_literal_t *out) {
  const kiln_literal_t *x = ops[0], *rnd = ops[1];
  kiln_elem_type_t ft = x->shape->type, rt = rnd->shape->type, ot = out->shape->type;
  int64_t n = out->num_elements;
  if (!kiln_elem_type_is_float(ft) || !kiln_elem_type_is_unsigned_int(rt) ||
      kiln_elem_type_bits(rt) != kiln_elem_type_bits(ft) || !kiln_elem_type_is_signed_int(ot) ||
      x->num_elements != n || rnd->num_elements != n)
    return kiln_status_make(KILN_INVALID_ARGUMENT,
                            "stochastic-convert '%s' needs a float operand, unsigned random bits of the same "
                            "width and a signed integer result", instr->name);
  int rbits = kiln_elem_type_bits(rt), w = width_of(ot);
  int64_t mx = (int64_t)(mask_of(w) >> 1), mn = -mx - 1;
  bool narrow = ft != KILN_F64;
  for (int64_t i = 0; i < n; i++) {
    double v = kiln_eval_elem_get_f64(ft, x->data, i);
    uint64_t r = (uint64_t)int_load(rt, rnd->data, i) & mask_of(rbits);
    int64_t res;
    /* the range checks compare in the operand's type, as XLA does */
    double dmx = narrow ? (double)(float)mx : (double)mx, dmn = narrow ? (double)(float)mn : (double)mn;
    if (isinf(v)) res = v < 0 ? mn : mx;
    else if (isnan(v)) res = 0;
    else if (v >= dmx) res = mx;
    else if (v <= dmn) res = mn;
    else {
      bool neg = signbit(v);
      double a = fabs(v);
      int64_t t = (int64_t)a;
      double frac = a - (double)t;
      bool wrapped = false;
      if (frac != 0) {
        uint64_t fixed = (uint64_t)ldexp(frac, rbits);
        if (r < fixed) {
          if (t == mx) wrapped = true; /* XLA returns the minimum here */
          else t++;
        }
      }
      res = wrapped ? mn : neg ? -t : t;
    }
    int_store(ot, out->data, i, res);
  }
  return KILN_STATUS_OK;
}

/* ---- ops whose result type differs from the operand's ---- */

static kiln_status eval_mixed(const kiln_hlo_instruction_t *instr, kiln_literal_t *const *ops,
                              kiln_literal_t *out, bool *handled) {
  *handled = true;
  kiln_elem_type_t it = ops[0]->shape->type, ot = out->shape->type;
  kiln_hlo_opcode_t op = instr->opcode;
  int64_t n = out->num_elements;
  bool mine = op == KILN_OP_IS_FINITE || op == KILN_OP_COMPLEX || op == KILN_OP_REAL ||
              op == KILN_OP_IMAG || (op == KILN_OP_ABS && kiln_elem_type_is_complex(it));
  if (!mine) {
    *handled = false;
    return KILN_STATUS_OK;
  }
  if (ops[0]->num_elements != n)
    return kiln_status_make(KILN_INVALID_ARGUMENT, "%s '%s': element counts differ",
                            kiln_hlo_opcode_name(op), instr->name);
  if (op == KILN_OP_IS_FINITE) {
    if (!kiln_elem_type_is_float(it) || ot != KILN_PRED) return bad_type(instr, it);
    for (int64_t i = 0; i < n; i++)
      ((uint8_t *)out->data)[i] = isfinite(kiln_eval_elem_get_f64(it, ops[0]->data, i)) != 0;
    return KILN_STATUS_OK;
  }
  bool cplx = kiln_elem_type_is_complex(it);
  if (op == KILN_OP_COMPLEX) {
    if (!kiln_elem_type_is_complex(ot) || ops[1]->shape->type != it || ops[1]->num_elements != n ||
        (it != KILN_F32 && it != KILN_F64))
      return bad_type(instr, it);
    for (int64_t i = 0; i < n; i++) {
      if (ot == KILN_C64) {
        ((float *)out->data)[2 * i] = ((const float *)ops[0]->data)[i];
        ((float *)out->data)[2 * i + 1] = ((const float *)ops[1]->data)[i];
      } else {
        ((double *)out->data)[2 * i] = ((const double *)ops[0]->data)[i];
        ((double *)out->data)[2 * i + 1] = ((const double *)ops[1]->data)[i];
      }
    }
    return KILN_STATUS_OK;
  }
  if (op == KILN_OP_REAL || op == KILN_OP_IMAG || (op == KILN_OP_ABS && cplx)) {
    if (!cplx) { /* real(x) = x, imag(x) = 0 for real floats */
      if (!kiln_elem_type_is_float(it) || ot != it) return bad_type(instr, it);
      if (op == KILN_OP_REAL) memcpy(out->data, ops[0]->data, kiln_elem_type_storage_bytes(it) * (size_t)n);
      else for (int64_t i = 0; i < n; i++) kiln_eval_elem_set_f64(ot, out->data, i, 0.0);
      return KILN_STATUS_OK;
    }
    if (ot != (it == KILN_C64 ? KILN_F32 : KILN_F64)) return bad_type(instr, ot);
    for (int64_t i = 0; i < n; i++) {
      if (it == KILN_C64) {
        float re = ((const float *)ops[0]->data)[2 * i], im = ((const float *)ops[0]->data)[2 * i + 1];
        ((float *)out->data)[i] = op == KILN_OP_REAL ? re : op == KILN_OP_IMAG ? im : hypotf(re, im);
      } else {
        double re = ((const double *)ops[0]->data)[2 * i], im = ((const double *)ops[0]->data)[2 * i + 1];
        ((double *)out->data)[i] = op == KILN_OP_REAL ? re : op == KILN_OP_IMAG ? im : hypot(re, im);
      }
    }
    return KILN_STATUS_OK;
  }
  *handled = false;
  return KILN_STATUS_OK;
}

kiln_status kiln_eval_elementwise(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                                  kiln_literal_t *const *operands, kiln_literal_t **out) {
  *out = NULL;
  kiln_hlo_opcode_t op = instr->opcode;
  if (!kiln_shape_is_array(instr->shape))
    return kiln_status_make(KILN_INVALID_ARGUMENT, "%s '%s' must produce an array",
                            kiln_hlo_opcode_name(op), instr->name);
  if (op == KILN_OP_MAP)
    return kiln_status_make(KILN_UNIMPLEMENTED, "evaluator does not support opcode '%s' (instruction '%s')",
                            kiln_hlo_opcode_name(op), instr->name);
  kiln_literal_t *r = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_literal_alloc(ctx, instr->shape, &r));
  kiln_status st = KILN_STATUS_OK;
  switch (op) {
  case KILN_OP_COPY:
    if (operands[0]->num_elements != r->num_elements || operands[0]->shape->type != r->shape->type)
      st = bad_type(instr, operands[0]->shape->type);
    else if (r->num_elements)
      memcpy(r->data, operands[0]->data, (size_t)kiln_shape_byte_size(r->shape));
    break;
  case KILN_OP_CONVERT: st = eval_convert(instr, operands[0], r); break;
  case KILN_OP_BITCAST_CONVERT: st = eval_bitcast_convert(instr, operands[0], r); break;
  case KILN_OP_COMPARE: st = eval_compare(instr, operands, r); break;
  case KILN_OP_SELECT: st = eval_select(instr, operands, r); break;
  case KILN_OP_REDUCE_PRECISION: st = eval_reduce_precision(instr, operands[0], r); break;
  case KILN_OP_STOCHASTIC_CONVERT: st = eval_stochastic_convert(instr, operands, r); break;
  default: {
    bool handled = false;
    st = eval_mixed(instr, operands, r, &handled);
    if (!st && !handled) st = eval_same_type(ctx, instr, operands, r);
  }
  }
  if (st) return st;
  *out = r;
  return KILN_STATUS_OK;
}
