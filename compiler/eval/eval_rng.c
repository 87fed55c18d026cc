/* Reference evaluator: rng-bit-generator and rng.
 *
 * rng-bit-generator follows XLA's RngBitGeneratorExpander + prng.cc bit for bit (facts taken
 * from XLA's sources, see the report of issue 3):
 *   - key = state[0]; the block functions take it as (low 32 bits, high 32 bits).
 *   - rng_three_fry: Threefry2x32, 20 rounds, counter = state[1] (u64). 64-bit outputs: the
 *     element at row-major index i is block(counter + i) as (x0 | x1 << 32); new counter =
 *     counter + N. 32-bit outputs: the shape is split in halves along the first even dim
 *     (else the largest dim; a scalar counts as [1]); element with coordinate 2h+j on that
 *     dim is x_j of block(counter + linear index in the half shape); new counter = counter +
 *     elements of the half shape. Narrower outputs take the 32-bit values truncated.
 *   - rng_philox: Philox4x32, 10 rounds, 128-bit counter (low, high) = (state[1], state[2])
 *     when the state has >= 3 words, else (state[1], state[0]). 32-bit outputs: block i gives
 *     elements 4i..4i+3 (words 0..3), ceil(N/4) blocks; 64-bit: block i gives elements 2i
 *     (w0 | w1 << 32) and 2i+1 (w2 | w3 << 32), ceil(N/2) blocks; narrower: 32-bit truncated.
 *     New counter = counter + blocks (128-bit add); a 2-word state keeps only the low word.
 *   - rng_default: Philox, as XLA's CPU and GPU compilers configure the expander
 *     (RngBitGeneratorExpander(RNG_PHILOX)).
 *   - The output state is the input state with word 0 = key, word 1 (and word 2 for a >= 3
 *     word Philox state) = the new counter, every later word unchanged (XLA's expander only
 *     produces the first 2 / 3 words; keeping the rest is kiln's choice).
 *
 * rng (rng_uniform over [a, b), rng_normal with mean/stddev) is not bit-reproducible across
 * XLA's backends (each has its own expansion); the evaluator draws as kiln's compilers
 * expand it (compiler/passes/rng_expander.c, after XLA's GPU RngExpander), so a compiled rng
 * can be checked against it: the words of an rng_three_fry rng-bit-generator keyed by a fresh
 * rng-get-and-update-state advanced by their count (one per element, two for a normal), the
 * top mantissa bits of a word as u in [0, 1); uniform float a + (b - a) u (a when that
 * rounds to b), normal a + b sqrt(-2 ln u1) cos(2 pi u2), in f32 for results narrower than
 * f64; uniform integer a + w mod (b - a) in the unsigned type of the result's width. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "compiler/eval/eval.h"

/* ---- block functions (exposed for known-answer tests) ---- */

static uint32_t rotl32(uint32_t v, int r) { return (v << r) | (v >> (32 - r)); }

/* Threefry2x32 with 20 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2,
 * 3"): out = threefry(key, ctr). */
void kiln_eval_threefry2x32(const uint32_t key[2], const uint32_t ctr[2], uint32_t out[2]) {
  static const int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  uint32_t ks[3] = {key[0], key[1], 0x1BD11BDAu ^ key[0] ^ key[1]};
  uint32_t x0 = ctr[0] + ks[0], x1 = ctr[1] + ks[1];
  for (int group = 0; group < 5; group++) {
    for (int r = 0; r < 4; r++) {
      x0 += x1;
      x1 = rotl32(x1, rot[(group % 2) * 4 + r]);
      x1 ^= x0;
    }
    /* key injection number group+1 */
    int s = group + 1;
    x0 += ks[s % 3];
    x1 += ks[(s + 1) % 3] + (uint32_t)s;
  }
  out[0] = x0;
  out[1] = x1;
}

/* Philox4x32 with 10 rounds: out = philox(key, ctr). */
void kiln_eval_philox4x32(const uint32_t key[2], const uint32_t ctr[4], uint32_t out[4]) {
  uint32_t k0 = key[0], k1 = key[1];
  uint32_t x0 = ctr[0], x1 = ctr[1], x2 = ctr[2], x3 = ctr[3];
  for (int round = 0; round < 10; round++) {
    uint64_t p0 = (uint64_t)x0 * 0xD2511F53u, p1 = (uint64_t)x2 * 0xCD9E8D57u;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ x1 ^ k0, n1 = (uint32_t)p1;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ x3 ^ k1, n3 = (uint32_t)p0;
    x0 = n0, x1 = n1, x2 = n2, x3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = x0, out[1] = x1, out[2] = x2, out[3] = x3;
}

/* ---- rng-bit-generator ---- */

/* Stores the low `bits` bits of v as element i (raw bit pattern for float types). */
static void store_bits(kiln_literal_t *l, int64_t i, uint64_t v) {
  kiln_elem_type_t t = l->shape->type;
  int bits = kiln_elem_type_bits(t);
  if (bits < 64) v &= ((uint64_t)1 << bits) - 1;
  if (kiln_elem_type_is_integral(t)) {
    if (kiln_elem_type_is_signed_int(t) && bits < 64 && ((v >> (bits - 1)) & 1))
      kiln_literal_set_s64(l, i, (int64_t)(v | ~(((uint64_t)1 << bits) - 1)));
    else kiln_literal_set_u64(l, i, v);
    return;
  }
  size_t es = kiln_elem_type_storage_bytes(t);
  char *p = (char *)l->data + (size_t)i * es;
  switch (es) {
    case 1: { uint8_t b = (uint8_t)v; memcpy(p, &b, 1); break; }
    case 2: { uint16_t b = (uint16_t)v; memcpy(p, &b, 2); break; }
    case 4: { uint32_t b = (uint32_t)v; memcpy(p, &b, 4); break; }
    default: memcpy(p, &v, 8); break;
  }
}

static void split_key(uint64_t k, uint32_t out[2]) {
  out[0] = (uint32_t)k;
  out[1] = (uint32_t)(k >> 32);
}

/* Fills `data` from Threefry; returns the new counter. */
static uint64_t threefry_fill(kiln_literal_t *data, uint64_t key, uint64_t ctr) {
  const kiln_shape_t *s = data->shape;
  int bits = kiln_elem_type_bits(s->type);
  int64_t n = kiln_shape_num_elements(s);
  uint32_t k[2], c[2], o[2];
  split_key(key, k);
  if (bits == 64) {
    for (int64_t i = 0; i < n; i++) {
      split_key(ctr + (uint64_t)i, c);
      kiln_eval_threefry2x32(k, c, o);
      store_bits(data, i, (uint64_t)o[0] | ((uint64_t)o[1] << 32));
    }
    return ctr + (uint64_t)n;
  }
  if (s->rank == 0) {
    split_key(ctr, c);
    kiln_eval_threefry2x32(k, c, o);
    store_bits(data, 0, o[0]);
    return ctr + 1;
  }
  int split = -1;
  for (int d = 0; d < s->rank && split < 0; d++)
    if (s->dims[d] % 2 == 0) split = d;
  if (split < 0) {
    split = 0;
    for (int d = 1; d < s->rank; d++)
      if (s->dims[d] > s->dims[split]) split = d;
  }
  /* half shape: dims with dims[split] -> ceil(dims[split] / 2) */
  int64_t half_n = 1, inner = 1;
  for (int d = 0; d < s->rank; d++) half_n *= d == split ? (s->dims[d] + 1) / 2 : s->dims[d];
  for (int d = split + 1; d < s->rank; d++) inner *= s->dims[d];
  int64_t hs = (s->dims[split] + 1) / 2, full = s->dims[split];
  for (int64_t h = 0; h < half_n; h++) {
    /* h = (outer, hsplit, in) in the half shape */
    int64_t in = h % inner, rest = h / inner;
    int64_t hsplit = rest % hs, outer = rest / hs;
    split_key(ctr + (uint64_t)h, c);
    kiln_eval_threefry2x32(k, c, o);
    for (int j = 0; j < 2; j++) {
      int64_t coord = 2 * hsplit + j;
      if (coord >= full) continue;
      store_bits(data, (outer * full + coord) * inner + in, o[j]);
    }
  }
  return ctr + (uint64_t)half_n;
}

/* Fills `data` from Philox; updates the 128-bit counter (lo, hi) in place. */
static void philox_fill(kiln_literal_t *data, uint64_t key, uint64_t *lo, uint64_t *hi) {
  const kiln_shape_t *s = data->shape;
  int bits = kiln_elem_type_bits(s->type);
  int64_t n = kiln_shape_num_elements(s);
  int64_t blocks = bits == 64 ? (n + 1) / 2 : (n + 3) / 4;
  uint32_t k[2], c[4], o[4];
  split_key(key, k);
  for (int64_t b = 0; b < blocks; b++) {
    uint64_t l = *lo + (uint64_t)b;
    uint64_t h = *hi + (l < *lo ? 1 : 0);
    split_key(l, c);
    split_key(h, c + 2);
    kiln_eval_philox4x32(k, c, o);
    if (bits == 64) {
      for (int j = 0; j < 2; j++)
        if (2 * b + j < n)
          store_bits(data, 2 * b + j, (uint64_t)o[2 * j] | ((uint64_t)o[2 * j + 1] << 32));
    } else {
      for (int j = 0; j < 4; j++)
        if (4 * b + j < n) store_bits(data, 4 * b + j, o[j]);
    }
  }
  uint64_t nl = *lo + (uint64_t)blocks;
  if (nl < *lo) (*hi)++;
  *lo = nl;
}

static kiln_status eval_rng_bit_generator(kiln_eval_ctx_t *ctx,
                                          const kiln_hlo_instruction_t *instr,
                                          kiln_literal_t *const *operands,
                                          kiln_literal_t **out) {
  if (instr->num_operands != 1) return KILN_ERR_INVALID("rng-bit-generator expects 1 operand");
  const kiln_literal_t *state = operands[0];
  const kiln_shape_t *ss = state->shape, *rs = instr->shape;
  if (!kiln_shape_is_array(ss) || ss->rank != 1 || ss->type != KILN_U64 || ss->dims[0] < 2)
    return KILN_ERR_INVALID("rng-bit-generator state must be u64[n] with n >= 2");
  if (!kiln_shape_is_tuple(rs) || rs->num_elements != 2 ||
      !kiln_shape_compatible(rs->elements[0], ss) || !kiln_shape_is_array(rs->elements[1]))
    return KILN_ERR_INVALID("rng-bit-generator result must be (state shape, bits array)");
  kiln_elem_type_t dt = rs->elements[1]->type;
  int bits = kiln_elem_type_bits(dt);
  if (dt == KILN_PRED || kiln_elem_type_is_complex(dt) || bits > 64 || bits < 1)
    return KILN_ERR_INVALID("rng-bit-generator cannot produce %s", kiln_elem_type_name(dt));
  const char *alg = instr->rng_algorithm ? instr->rng_algorithm : "rng_default";
  bool philox;
  if (!strcmp(alg, "rng_three_fry")) philox = false;
  else if (!strcmp(alg, "rng_philox") || !strcmp(alg, "rng_default")) philox = true;
  else return KILN_ERR_INVALID("rng-bit-generator: unknown algorithm %s", alg);
  if (bits != 64 && bits > 32)
    return KILN_ERR_INVALID("rng-bit-generator: unsupported width %d", bits);

  kiln_literal_t *res = kiln_eval_literal_make(ctx, instr->shape);
  if (!res) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "rng-bit-generator: too large");
  kiln_literal_t *new_state = res->tuple_elements[0], *data = res->tuple_elements[1];
  int64_t sn = ss->dims[0];
  for (int64_t i = 0; i < sn; i++)
    kiln_literal_set_u64(new_state, i, kiln_literal_get_u64(state, i));
  uint64_t key = kiln_literal_get_u64(state, 0);
  if (!philox) {
    uint64_t ctr = threefry_fill(data, key, kiln_literal_get_u64(state, 1));
    kiln_literal_set_u64(new_state, 1, ctr);
  } else {
    uint64_t lo = kiln_literal_get_u64(state, 1);
    uint64_t hi = kiln_literal_get_u64(state, sn >= 3 ? 2 : 0);
    philox_fill(data, key, &lo, &hi);
    kiln_literal_set_u64(new_state, 1, lo);
    if (sn >= 3) kiln_literal_set_u64(new_state, 2, hi);
  }
  *out = res;
  return KILN_STATUS_OK;
}

/* ---- rng ---- */

#define RNG_MAX_RANK 64 /* as rng_expander.c: ranks beyond it are left unexpanded */

/* The float in [1, 2) from the top mantissa bits of word i (u32 -> f32, u64 -> f64). */
static double one_to_two(const kiln_literal_t *words, int64_t i) {
  if (words->shape->type == KILN_U64) {
    uint64_t v = (kiln_literal_get_u64(words, i) >> 12) | 0x3ff0000000000000ull;
    double d;
    memcpy(&d, &v, sizeof d);
    return d;
  }
  uint32_t v = ((uint32_t)kiln_literal_get_u64(words, i) >> 9) | 0x3f800000u;
  float f;
  memcpy(&f, &v, sizeof f);
  return f;
}

static kiln_status eval_rng(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                            kiln_literal_t *const *operands, kiln_literal_t **out) {
  if (instr->num_operands != 2) return KILN_ERR_INVALID("rng expects 2 operands");
  const kiln_shape_t *rs = instr->shape;
  if (!kiln_shape_is_array(rs)) return KILN_ERR_INVALID("rng result must be an array");
  for (int i = 0; i < 2; i++)
    if (!kiln_shape_is_array(operands[i]->shape) || operands[i]->num_elements != 1 ||
        operands[i]->shape->type != rs->type)
      return KILN_ERR_INVALID("rng parameters must be %s scalars", kiln_elem_type_name(rs->type));
  const char *dist = instr->rng_distribution ? instr->rng_distribution : "";
  bool normal;
  if (!strcmp(dist, "rng_uniform")) normal = false;
  else if (!strcmp(dist, "rng_normal")) normal = true;
  else return KILN_ERR_INVALID("rng: unknown distribution '%s'", dist);
  kiln_elem_type_t t = rs->type;
  int bits = kiln_elem_type_bits(t);
  bool is_float = t == KILN_F16 || t == KILN_BF16 || t == KILN_F32 || t == KILN_F64;
  bool is_int =
      kiln_elem_type_is_integral(t) && (bits == 8 || bits == 16 || bits == 32 || bits == 64);
  if (!(is_float || (is_int && !normal)) || rs->rank >= RNG_MAX_RANK)
    return KILN_ERR_INVALID("rng %s of %s is not supported", dist, kiln_elem_type_name(t));
  kiln_literal_t *res = kiln_eval_literal_make(ctx, instr->shape);
  if (!res) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "rng result too large");
  int64_t n = res->num_elements;
  if (n == 0) {
    *out = res;
    return KILN_STATUS_OK;
  }
  /* The words: Threefry keyed by a fresh rng-get-and-update-state advanced by their count;
   * a normal draws two per element, words [0, i] and [1, i] of a [2, dims] array. */
  int64_t dims[RNG_MAX_RANK + 1];
  int rank = rs->rank;
  if (normal) dims[0] = 2;
  for (int d = 0; d < rank; d++) dims[normal + d] = rs->dims[d]; /* a scalar has no dims array */
  kiln_shape_t *ws = kiln_shape_make_array_with_default_layout(
      ctx->arena, bits == 64 ? KILN_U64 : KILN_U32, rank + normal, dims);
  kiln_literal_t *words = ws ? kiln_eval_literal_make(ctx, ws) : NULL;
  if (!words) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "rng result too large");
  uint64_t state[2];
  kiln_eval_rng_state_take(ctx, normal ? 2 * n : n, state);
  threefry_fill(words, state[0], state[1]);
  bool wide = bits == 64;
  if (is_float) {
    /* In the compute type (f64 for f64 results, else f32), rounded once to the result's. */
    double a = kiln_literal_get_f64(operands[0], 0), b = kiln_literal_get_f64(operands[1], 0);
    for (int64_t i = 0; i < n; i++) {
      double r;
      if (normal) {
        double u1 = 2.0 - one_to_two(words, i), u2 = one_to_two(words, n + i) - 1.0;
        if (wide) {
          r = a + b * (sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
        } else {
          float z = sqrtf(-2.0f * logf((float)u1)) * cosf((float)(2.0 * M_PI) * (float)u2);
          r = (float)((float)a + (float)b * z);
        }
      } else {
        double u = one_to_two(words, i) - 1.0;
        r = wide ? a + (b - a) * u : (float)((float)a + ((float)b - (float)a) * (float)u);
      }
      kiln_literal_set_f64(res, i, r);
      if (!normal && !(kiln_literal_get_f64(res, i) < b)) kiln_literal_set_f64(res, i, a);
    }
  } else {
    /* In the unsigned type of the result's width, wrapping: a + w mod (b - a), or a when
     * b <= a (compared in the result's type). */
    bool is_signed = kiln_elem_type_is_signed_int(t);
    uint64_t mask = wide ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
    uint64_t a = (is_signed ? (uint64_t)kiln_literal_get_s64(operands[0], 0)
                            : kiln_literal_get_u64(operands[0], 0)) &
                 mask;
    uint64_t b = (is_signed ? (uint64_t)kiln_literal_get_s64(operands[1], 0)
                            : kiln_literal_get_u64(operands[1], 0)) &
                 mask;
    bool ordered = is_signed
                       ? kiln_literal_get_s64(operands[0], 0) < kiln_literal_get_s64(operands[1], 0)
                       : a < b;
    uint64_t range = ordered ? (b - a) & mask : 1;
    for (int64_t i = 0; i < n; i++) {
      uint64_t v = (a + kiln_literal_get_u64(words, i) % range) & mask;
      if (is_signed && !wide && ((v >> (bits - 1)) & 1)) v |= ~mask; /* sign-extend */
      if (is_signed) kiln_literal_set_s64(res, i, (int64_t)v);
      else kiln_literal_set_u64(res, i, v);
    }
  }
  *out = res;
  return KILN_STATUS_OK;
}

kiln_status kiln_eval_rng(kiln_eval_ctx_t *ctx, const kiln_hlo_instruction_t *instr,
                          kiln_literal_t *const *operands, kiln_literal_t **out) {
  *out = NULL;
  switch (instr->opcode) {
    case KILN_OP_RNG_BIT_GENERATOR: return eval_rng_bit_generator(ctx, instr, operands, out);
    case KILN_OP_RNG: return eval_rng(ctx, instr, operands, out);
    default:
      return KILN_ERR_UNIMPLEMENTED("eval_rng: unsupported opcode %s",
                                    kiln_hlo_opcode_name(instr->opcode));
  }
}
