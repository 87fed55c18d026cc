/* rng_bit_generator_expander: rng-bit-generator(state) -> plain integer HLO computing
 * (new_state, bits), so the loop emitter compiles it like any elementwise fusion.
 *
 * The expansion computes exactly what the reference evaluator computes (eval_rng.c, which
 * follows XLA's RngBitGeneratorExpander and prng.cc):
 *   - key = state[0], split into (low, high) u32 words; counters come from an iota.
 *   - rng_three_fry: Threefry2x32 (20 rounds as add / rotate (shift-left | shift-right-
 *     logical) / xor over u32 vectors). 64-bit outputs: element i (row-major) is
 *     block(counter + i) as x0 | x1 << 32. 32-bit and narrower outputs: the shape is halved
 *     along its first even dimension (else its largest); block(counter + h) for each h of
 *     the half shape gives the elements 2h and 2h+1 on that dimension (both broadcast along
 *     a new dimension of 2, picked by an iota, reshaped, the odd tail sliced off).
 *     new counter = counter + blocks.
 *   - rng_philox / rng_default: Philox4x32 (10 rounds; mulhi/mullo through u64 multiplies).
 *     128-bit counter (state[1], state[2]) for states of >= 3 words, else (state[1],
 *     state[0]); block b uses counter + b (carry into the high word by compare). 32-bit
 *     outputs: 4 words per block; 64-bit: 2 words per block, w0 | w1 << 32.
 *   - Narrower outputs keep the low bits of the 32-bit words (convert to the unsigned type
 *     of that width, which wraps); signed and float outputs are a bitcast-convert of those.
 *   - new state = state with word 1 (and word 2 for a >= 3 word Philox state) replaced by
 *     the advanced counter (select on an iota).
 * Everything is elementwise, broadcast, iota, reshape or slice: no concatenate, so the
 * loop emitter compiles the whole expansion.
 *
 * Forms the evaluator rejects (state not u64[n >= 2], a result that is not (state, array),
 * pred/complex/wider-than-64 or 33..63-bit outputs, unknown algorithms) are left as they
 * are; what later stages say about them is unchanged. */
#include <string.h>

#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"

#define MAX_RANK 64

typedef struct rbg {
  kiln_builder_t *b;
  /* broadcasts of constants to the current vector shape, reused within one expansion */
  struct {
    kiln_elem_type_t type;
    uint64_t value;
    kiln_hlo_instruction_t *splat;
  } cache[64];
  int num_cached;
  const kiln_hlo_instruction_t *vec_like; /* the vector shape the cache is for */
} rbg_t;

/* A broadcast of constant `v` of `type` to the dims of `like` (cached per expansion). */
static kiln_hlo_instruction_t *splat_const(rbg_t *r, kiln_elem_type_t type, uint64_t v,
                                           const kiln_hlo_instruction_t *like) {
  if (!like) return NULL;
  bool same_dims = r->vec_like && r->vec_like->shape->rank == like->shape->rank &&
                   !memcmp(r->vec_like->shape->dims, like->shape->dims,
                           sizeof(int64_t) * (size_t)like->shape->rank);
  if (!same_dims) {
    r->num_cached = 0;
    r->vec_like = like;
  }
  for (int i = 0; i < r->num_cached; i++)
    if (r->cache[i].type == type && r->cache[i].value == v) return r->cache[i].splat;
  kiln_hlo_instruction_t *s = kiln_builder_splat(r->b, kiln_builder_const_u64(r->b, type, v), like);
  if (s && r->num_cached < (int)(sizeof r->cache / sizeof r->cache[0])) {
    r->cache[r->num_cached].type = type;
    r->cache[r->num_cached].value = v;
    r->cache[r->num_cached].splat = s;
    r->num_cached++;
  }
  return s;
}

#define BIN(op, x, y) kiln_builder_binary(r->b, KILN_OP_##op, (x), (y))

/* Low / high u32 words of a u64 array or scalar. */
static kiln_hlo_instruction_t *lo32(rbg_t *r, kiln_hlo_instruction_t *x) {
  return kiln_builder_convert(r->b, x, KILN_U32);
}
static kiln_hlo_instruction_t *hi32(rbg_t *r, kiln_hlo_instruction_t *x) {
  return kiln_builder_convert(r->b, BIN(SHIFT_RIGHT_LOGICAL, x, splat_const(r, KILN_U64, 32, x)), KILN_U32);
}
/* lo | hi << 32 as u64. */
static kiln_hlo_instruction_t *join64(rbg_t *r, kiln_hlo_instruction_t *lo, kiln_hlo_instruction_t *hi) {
  kiln_hlo_instruction_t *l = kiln_builder_convert(r->b, lo, KILN_U64);
  kiln_hlo_instruction_t *h = kiln_builder_convert(r->b, hi, KILN_U64);
  return BIN(OR, l, BIN(SHIFT_LEFT, h, splat_const(r, KILN_U64, 32, h)));
}

static kiln_hlo_instruction_t *rotl32(rbg_t *r, kiln_hlo_instruction_t *x, int k) {
  return BIN(OR, BIN(SHIFT_LEFT, x, splat_const(r, KILN_U32, (uint64_t)k, x)),
             BIN(SHIFT_RIGHT_LOGICAL, x, splat_const(r, KILN_U32, (uint64_t)(32 - k), x)));
}

/* Threefry2x32, 20 rounds, on counter vectors (c0, c1) with scalar key words (k0, k1). */
static void threefry(rbg_t *r, kiln_hlo_instruction_t *k0, kiln_hlo_instruction_t *k1,
                     kiln_hlo_instruction_t *c0, kiln_hlo_instruction_t *c1, kiln_hlo_instruction_t *out[2]) {
  static const int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  kiln_builder_t *b = r->b;
  kiln_hlo_instruction_t *ks[3];
  ks[0] = k0;
  ks[1] = k1;
  ks[2] = BIN(XOR, BIN(XOR, kiln_builder_const_u64(b, KILN_U32, 0x1BD11BDAu), k0), k1);
  kiln_hlo_instruction_t *ks_splat[3];
  for (int i = 0; i < 3; i++) ks_splat[i] = kiln_builder_splat(b, ks[i], c0);
  kiln_hlo_instruction_t *x0 = BIN(ADD, c0, ks_splat[0]), *x1 = BIN(ADD, c1, ks_splat[1]);
  for (int group = 0; group < 5; group++) {
    for (int k = 0; k < 4; k++) {
      x0 = BIN(ADD, x0, x1);
      x1 = BIN(XOR, rotl32(r, x1, rot[(group % 2) * 4 + k]), x0);
    }
    int s = group + 1;
    x0 = BIN(ADD, x0, ks_splat[s % 3]);
    x1 = BIN(ADD, BIN(ADD, x1, ks_splat[(s + 1) % 3]), splat_const(r, KILN_U32, (uint64_t)s, x1));
  }
  out[0] = x0;
  out[1] = x1;
}

/* (hi, lo) u32 words of x * m for a u32 vector x and 32-bit constant m. */
static void mulhilo(rbg_t *r, kiln_hlo_instruction_t *x, uint32_t m, kiln_hlo_instruction_t **hi,
                    kiln_hlo_instruction_t **lo) {
  kiln_hlo_instruction_t *x64 = kiln_builder_convert(r->b, x, KILN_U64);
  kiln_hlo_instruction_t *p = BIN(MULTIPLY, x64, splat_const(r, KILN_U64, m, x64));
  *hi = hi32(r, p);
  *lo = lo32(r, p);
}

/* Philox4x32, 10 rounds, on counter vectors c[4] with scalar key words (k0, k1). */
static void philox(rbg_t *r, kiln_hlo_instruction_t *k0, kiln_hlo_instruction_t *k1,
                   kiln_hlo_instruction_t *const c[4], kiln_hlo_instruction_t *out[4]) {
  kiln_builder_t *b = r->b;
  kiln_hlo_instruction_t *x[4] = {c[0], c[1], c[2], c[3]};
  for (int round = 0; round < 10; round++) {
    kiln_hlo_instruction_t *hi0, *lo0, *hi1, *lo1;
    mulhilo(r, x[0], 0xD2511F53u, &hi0, &lo0);
    mulhilo(r, x[2], 0xCD9E8D57u, &hi1, &lo1);
    kiln_hlo_instruction_t *n0 = BIN(XOR, BIN(XOR, hi1, x[1]), kiln_builder_splat(b, k0, x[1]));
    kiln_hlo_instruction_t *n2 = BIN(XOR, BIN(XOR, hi0, x[3]), kiln_builder_splat(b, k1, x[3]));
    x[0] = n0, x[1] = lo1, x[2] = n2, x[3] = lo0;
    if (round < 9) {
      k0 = BIN(ADD, k0, kiln_builder_const_u64(b, KILN_U32, 0x9E3779B9u));
      k1 = BIN(ADD, k1, kiln_builder_const_u64(b, KILN_U32, 0xBB67AE85u));
    }
  }
  for (int i = 0; i < 4; i++) out[i] = x[i];
}

/* state[i] as a u64 scalar. */
static kiln_hlo_instruction_t *state_word(rbg_t *r, kiln_hlo_instruction_t *state, int64_t i) {
  return kiln_builder_reshape(r->b, kiln_builder_slice1(r->b, state, i, i + 1), 0, NULL);
}

/* counter + iota(n) as u64[n]. */
static kiln_hlo_instruction_t *counters(rbg_t *r, kiln_hlo_instruction_t *ctr, int64_t n) {
  kiln_hlo_instruction_t *io = kiln_builder_iota(r->b, KILN_U64, 1, &n, 0);
  return BIN(ADD, io, kiln_builder_splat(r->b, ctr, io));
}

/* Raw bits (u32 for widths <= 32, u64 for 64) reshaped to `dims` -> the output type. */
static kiln_hlo_instruction_t *to_output(rbg_t *r, kiln_hlo_instruction_t *raw, const kiln_shape_t *os) {
  kiln_hlo_instruction_t *x = kiln_builder_reshape(r->b, raw, os->rank, os->dims);
  int bits = kiln_elem_type_bits(os->type);
  kiln_elem_type_t ut = kiln_elem_type_unsigned_of_width(bits);
  if (x && x->shape->type != ut) x = kiln_builder_convert(r->b, x, ut);
  if (ut != os->type) x = kiln_builder_bitcast_convert(r->b, x, os->type);
  return x;
}

/* select(iota along `dim` == i, a_i, ...) over the shape of a[0]: picks a[i] where the
 * coordinate on `dim` is i (k >= 1 arrays of the same shape). Plain elementwise HLO, so
 * the loop emitter takes it (no concatenate). */
static kiln_hlo_instruction_t *pick_by_coordinate(rbg_t *r, int k, kiln_hlo_instruction_t *const *a, int dim) {
  if (!a[0]) return NULL;
  kiln_hlo_instruction_t *acc = a[k - 1];
  if (k == 1) return acc;
  kiln_hlo_instruction_t *idx = kiln_builder_iota(r->b, KILN_U32, a[0]->shape->rank, a[0]->shape->dims, dim);
  for (int i = k - 2; i >= 0; i--)
    acc = kiln_builder_select(r->b, kiln_builder_compare(r->b, KILN_CMP_EQ, idx, splat_const(r, KILN_U32, (uint64_t)i, idx)),
                              a[i], acc);
  return acc;
}

/* Interleaves equal-length vectors v[0..k) so element j of v[i] lands at j * k + i, then
 * keeps the first n: [len] x k -> [len, k] -> [k * len] sliced to [n]. */
static kiln_hlo_instruction_t *interleave(rbg_t *r, int k, kiln_hlo_instruction_t *const *v, int64_t n) {
  if (!v[0]) return NULL;
  int64_t len = v[0]->shape->dims[0];
  int64_t d2[2] = {len, k}, map = 0;
  kiln_hlo_instruction_t *cols[4];
  for (int i = 0; i < k; i++) cols[i] = kiln_builder_broadcast(r->b, v[i], 2, d2, &map);
  kiln_hlo_instruction_t *m = pick_by_coordinate(r, k, cols, 1);
  int64_t flat = len * k;
  kiln_hlo_instruction_t *f = kiln_builder_reshape(r->b, m, 1, &flat);
  return flat == n ? f : kiln_builder_slice1(r->b, f, 0, n);
}

/* The new state: `state` with words [1, 1 + nw) replaced by the u64 scalars `words`. */
static kiln_hlo_instruction_t *new_state(rbg_t *r, kiln_hlo_instruction_t *state, int nw,
                                         kiln_hlo_instruction_t *const *words) {
  kiln_hlo_instruction_t *idx = kiln_builder_iota(r->b, KILN_U32, 1, state->shape->dims, 0);
  kiln_hlo_instruction_t *acc = state;
  for (int i = 0; i < nw; i++)
    acc = kiln_builder_select(
        r->b, kiln_builder_compare(r->b, KILN_CMP_EQ, idx, splat_const(r, KILN_U32, (uint64_t)(1 + i), idx)),
        kiln_builder_splat(r->b, words[i], state), acc);
  return acc;
}

static void expand_threefry(rbg_t *r, kiln_hlo_instruction_t *state, const kiln_shape_t *os,
                            kiln_hlo_instruction_t *k0, kiln_hlo_instruction_t *k1,
                            kiln_hlo_instruction_t **out_state, kiln_hlo_instruction_t **out_bits) {
  kiln_builder_t *b = r->b;
  kiln_hlo_instruction_t *ctr = state_word(r, state, 1);
  int bits = kiln_elem_type_bits(os->type);
  int64_t n = kiln_shape_num_elements(os);
  kiln_hlo_instruction_t *o[2];
  int64_t used; /* counters consumed */
  if (bits == 64) {
    kiln_hlo_instruction_t *c = counters(r, ctr, n);
    threefry(r, k0, k1, lo32(r, c), hi32(r, c), o);
    *out_bits = to_output(r, join64(r, o[0], o[1]), os);
    used = n;
  } else {
    /* split dimension and half shape (a scalar counts as [1]) */
    int rank = os->rank ? os->rank : 1;
    int64_t one = 1;
    const int64_t *dims = os->rank ? os->dims : &one;
    int split = -1;
    for (int d = 0; d < rank && split < 0; d++)
      if (dims[d] % 2 == 0) split = d;
    if (split < 0) {
      split = 0;
      for (int d = 1; d < rank; d++)
        if (dims[d] > dims[split]) split = d;
    }
    int64_t outer = 1, inner = 1, hs = (dims[split] + 1) / 2;
    for (int d = 0; d < split; d++) outer *= dims[d];
    for (int d = split + 1; d < rank; d++) inner *= dims[d];
    int64_t half_n = outer * hs * inner;
    kiln_hlo_instruction_t *c = counters(r, ctr, half_n);
    threefry(r, k0, k1, lo32(r, c), hi32(r, c), o);
    /* [outer, hs, inner] x 2 -> [outer, hs, 2, inner] (x_j at coordinate j) -> [outer, 2 hs, inner] */
    int64_t d3h[3] = {outer, hs, inner}, d4[4] = {outer, hs, 2, inner}, map[3] = {0, 1, 3};
    kiln_hlo_instruction_t *parts[2];
    for (int j = 0; j < 2; j++) parts[j] = kiln_builder_broadcast(b, kiln_builder_reshape(b, o[j], 3, d3h), 4, d4, map);
    kiln_hlo_instruction_t *both = pick_by_coordinate(r, 2, parts, 2);
    int64_t d3[3] = {outer, 2 * hs, inner};
    kiln_hlo_instruction_t *full = kiln_builder_reshape(b, both, 3, d3);
    if (2 * hs != dims[split]) full = kiln_builder_slice_dim(b, full, 1, 0, dims[split]);
    *out_bits = to_output(r, full, os);
    used = half_n;
  }
  kiln_hlo_instruction_t *nc = BIN(ADD, ctr, kiln_builder_const_u64(b, KILN_U64, (uint64_t)used));
  *out_state = new_state(r, state, 1, &nc);
}

static void expand_philox(rbg_t *r, kiln_hlo_instruction_t *state, const kiln_shape_t *os,
                          kiln_hlo_instruction_t *k0, kiln_hlo_instruction_t *k1,
                          kiln_hlo_instruction_t **out_state, kiln_hlo_instruction_t **out_bits) {
  kiln_builder_t *b = r->b;
  int64_t sn = state->shape->dims[0];
  kiln_hlo_instruction_t *lo = state_word(r, state, 1), *hi = state_word(r, state, sn >= 3 ? 2 : 0);
  int bits = kiln_elem_type_bits(os->type);
  int64_t n = kiln_shape_num_elements(os);
  int64_t blocks = bits == 64 ? (n + 1) / 2 : (n + 3) / 4;
  /* 128-bit counter + b: low words wrap, the carry goes into the high words */
  kiln_hlo_instruction_t *l = counters(r, lo, blocks);
  kiln_hlo_instruction_t *lo_splat = kiln_builder_splat(b, lo, l);
  kiln_hlo_instruction_t *carry = kiln_builder_convert(b, kiln_builder_compare(b, KILN_CMP_LT, l, lo_splat), KILN_U64);
  kiln_hlo_instruction_t *h = BIN(ADD, kiln_builder_splat(b, hi, l), carry);
  kiln_hlo_instruction_t *c[4] = {lo32(r, l), hi32(r, l), lo32(r, h), hi32(r, h)};
  kiln_hlo_instruction_t *o[4];
  philox(r, k0, k1, c, o);
  if (bits == 64) {
    kiln_hlo_instruction_t *w[2] = {join64(r, o[0], o[1]), join64(r, o[2], o[3])};
    *out_bits = to_output(r, interleave(r, 2, w, n), os);
  } else {
    *out_bits = to_output(r, interleave(r, 4, o, n), os);
  }
  kiln_hlo_instruction_t *nl = BIN(ADD, lo, kiln_builder_const_u64(b, KILN_U64, (uint64_t)blocks));
  if (sn >= 3) {
    kiln_hlo_instruction_t *nh =
        BIN(ADD, hi, kiln_builder_convert(b, kiln_builder_compare(b, KILN_CMP_LT, nl, lo), KILN_U64));
    kiln_hlo_instruction_t *words[2] = {nl, nh};
    *out_state = new_state(r, state, 2, words);
  } else {
    *out_state = new_state(r, state, 1, &nl);
  }
}

/* Whether the evaluator accepts this rng-bit-generator (else it is left alone). */
static bool supported(const kiln_hlo_instruction_t *in, bool *philox_out) {
  if (in->num_operands != 1) return false;
  const kiln_shape_t *ss = in->operands[0]->shape, *rs = in->shape;
  if (!kiln_shape_is_array(ss) || ss->rank != 1 || ss->type != KILN_U64 || ss->dims[0] < 2) return false;
  if (kiln_shape_is_dynamic(ss)) return false;
  if (!kiln_shape_is_tuple(rs) || rs->num_elements != 2 || !kiln_shape_compatible(rs->elements[0], ss) ||
      !kiln_shape_is_array(rs->elements[1]) || kiln_shape_is_dynamic(rs->elements[1]))
    return false;
  const kiln_shape_t *os = rs->elements[1];
  int bits = kiln_elem_type_bits(os->type);
  if (os->type == KILN_PRED || kiln_elem_type_is_complex(os->type) || bits < 1 || bits > 64) return false;
  if (bits != 64 && bits > 32) return false;
  if (bits < 8 && bits != 1 && bits != 2 && bits != 4) return false;
  if (os->rank > MAX_RANK - 1) return false;
  const char *alg = in->rng_algorithm ? in->rng_algorithm : "rng_default";
  if (!strcmp(alg, "rng_three_fry")) *philox_out = false;
  else if (!strcmp(alg, "rng_philox") || !strcmp(alg, "rng_default")) *philox_out = true;
  else return false;
  return true;
}

static kiln_hlo_instruction_t *expand(kiln_builder_t *b, kiln_hlo_instruction_t *in, void *ctx) {
  bool philox_alg = false;
  if (!supported(in, &philox_alg)) return NULL;
  rbg_t r;
  memset(&r, 0, sizeof r);
  r.b = b;
  kiln_hlo_instruction_t *state = in->operands[0];
  kiln_hlo_instruction_t *key = state_word(&r, state, 0);
  kiln_hlo_instruction_t *k0 = lo32(&r, key), *k1 = hi32(&r, key);
  const kiln_shape_t *os = in->shape->elements[1];
  kiln_hlo_instruction_t *st = NULL, *bits = NULL;
  if (philox_alg) expand_philox(&r, state, os, k0, k1, &st, &bits);
  else expand_threefry(&r, state, os, k0, k1, &st, &bits);
  kiln_hlo_instruction_t *outs[2] = {st, bits};
  kiln_hlo_instruction_t *t = kiln_builder_tuple(b, 2, outs);
  if (!t) return NULL;
  /* keep the result's shapes (layouts included) exactly */
  st->shape = in->shape->elements[0];
  bits->shape = in->shape->elements[1];
  t->shape = in->shape;
  return t;
}

kiln_status kiln_pass_rng_bit_generator_expander(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                                 bool *changed) {
  return kiln_builder_expand_all(m, KILN_OP_RNG_BIT_GENERATOR, expand, NULL, "rng_bit_generator_expander", changed);
}
