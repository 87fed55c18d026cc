/* rng_expander: the stateful `rng(a, b), distribution=rng_uniform|rng_normal` -> random
 * bits from the executable's generator state, converted to the distribution in plain HLO
 * (as XLA's GPU RngExpander does):
 *   state = u64[2] rng-get-and-update-state(), delta=<number of bit words used>
 *   bits  = get-tuple-element(rng-bit-generator(state), algorithm=rng_three_fry), index=1
 * of u32 words (u64 for 64-bit results); rng_bit_generator_expander, which runs after this
 * pass, turns the generator into integer HLO. The runtime advances the state by `delta`
 * per call, so every rng (and every run) keys Threefry differently.
 *
 * With T the compute type (f64 for f64 results, else f32) and 0 <= u < 1 built from the top
 * mantissa bits of one word (f32: bitcast((w >> 9) | 0x3f800000) - 1, 2^-23 steps; f64:
 * bitcast((w >> 12) | 0x3ff0000000000000) - 1, 2^-52 steps):
 *   - uniform float: r = convert(a + (b - a) * u) to the result type, then
 *     select(r < b, r, a): the result stays in [a, b) when rounding (f32 or the narrowing
 *     to f16/bf16) reaches b; b <= a (or NaN) gives a.
 *   - uniform integer (8/16/32/64-bit, signed or unsigned): in the unsigned type U of the
 *     result's width, wrapping: range = U(b) - U(a) when a < b (compared in the result
 *     type), else 1; r = U(a) + U(w mod range) (w and range in the word type), then back to
 *     the result type: uniform in [a, b) (modulo bias as in XLA); b <= a gives a.
 *   - normal (float results): two words per element (bits of [2, dims], the two halves
 *     sliced): u1 = 2 - bitcast(...) in (0, 1], u2 = u in [0, 1);
 *     r = a + b * sqrt(-2 ln u1) * cos(2 pi u2) in T, converted to the result type.
 * Empty results become broadcast(a).
 *
 * Left as they are (later stages name them): rng in a computation that is not sequential
 * (fusion, reduce, map, sort ... bodies: rng-get-and-update-state must run as a thunk),
 * other distributions, operands that are not scalars of the result type, dynamic shapes,
 * pred / complex / sub-byte / f8 results, normal of integer results, rng with control
 * edges. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/hashmap.h"
#include "base/vec.h"
#include "compiler/passes/dataflow.h"
#include "compiler/passes/hlo_builder.h"
#include "compiler/passes/pass.h"

#define MAX_RANK 64

typedef enum { RNG_UNIFORM, RNG_NORMAL } rng_dist_t;

static bool float_result(kiln_elem_type_t t) {
  return t == KILN_F16 || t == KILN_BF16 || t == KILN_F32 || t == KILN_F64;
}

static bool int_result(kiln_elem_type_t t) {
  if (!kiln_elem_type_is_integral(t)) return false;
  int bits = kiln_elem_type_bits(t);
  return bits == 8 || bits == 16 || bits == 32 || bits == 64;
}

/* Whether this pass expands `in` (see the file comment for what it leaves). */
static bool supported(const kiln_hlo_instruction_t *in, rng_dist_t *dist) {
  const char *d = in->rng_distribution;
  if (!d) return false;
  if (!strcmp(d, "rng_uniform")) *dist = RNG_UNIFORM;
  else if (!strcmp(d, "rng_normal")) *dist = RNG_NORMAL;
  else return false;
  const kiln_shape_t *s = in->shape;
  if (in->num_operands != 2 || !kiln_shape_is_array(s) || kiln_shape_is_dynamic(s) || s->rank >= MAX_RANK)
    return false;
  for (int i = 0; i < 2; i++) {
    const kiln_shape_t *o = in->operands[i]->shape;
    if (!kiln_shape_is_array(o) || o->rank != 0 || o->type != s->type) return false;
  }
  if (float_result(s->type)) return true;
  return *dist == RNG_UNIFORM && int_result(s->type);
}

#define BIN(op, x, y) kiln_builder_binary(b, KILN_OP_##op, (x), (y))
#define SPLAT_U(type, v, like) kiln_builder_splat(b, kiln_builder_const_u64(b, (type), (v)), (like))
#define SPLAT_F(type, v, like) kiln_builder_splat(b, kiln_builder_const_f64(b, (type), (v)), (like))

/* `count` random words of type `word` shaped `dims`: the rng-bit-generator of a fresh
 * rng-get-and-update-state (advanced by `count`). */
static kiln_hlo_instruction_t *random_words(kiln_builder_t *b, kiln_elem_type_t word, int rank,
                                            const int64_t *dims, int64_t count) {
  kiln_shape_t *ss = kiln_builder_shape(b, KILN_U64, 1, (const int64_t[]){2});
  kiln_hlo_instruction_t *state = kiln_builder_op(b, KILN_OP_RNG_GET_AND_UPDATE_STATE, ss, 0, NULL);
  if (!state) return NULL;
  char delta[32];
  snprintf(delta, sizeof delta, "%" PRId64, count);
  kiln_hlo_instruction_set_raw_attr(state, "delta", delta);
  if (!kiln_hlo_instruction_raw_attr(state, "delta")) {
    b->failed = true;
    return NULL;
  }
  kiln_shape_t *elems[2] = {ss, kiln_builder_shape(b, word, rank, dims)};
  if (!elems[1]) return NULL;
  kiln_shape_t *ts = kiln_shape_make_tuple(&b->m->arena, 2, elems);
  char *alg = kiln_arena_strdup(&b->m->arena, "rng_three_fry");
  if (!ts || !alg) {
    b->failed = true;
    return NULL;
  }
  kiln_hlo_instruction_t *gen = kiln_builder_op(b, KILN_OP_RNG_BIT_GENERATOR, ts, 1, &state);
  if (!gen) return NULL;
  gen->rng_algorithm = alg;
  return kiln_builder_gte(b, gen, 1);
}

/* bitcast of the top mantissa bits of `w` (u32 -> f32, u64 -> f64) with exponent 0: a
 * float in [1, 2). */
static kiln_hlo_instruction_t *one_to_two(kiln_builder_t *b, kiln_hlo_instruction_t *w) {
  if (!w) return NULL;
  bool wide = w->shape->type == KILN_U64;
  kiln_elem_type_t wt = wide ? KILN_U64 : KILN_U32;
  kiln_hlo_instruction_t *m = BIN(SHIFT_RIGHT_LOGICAL, w, SPLAT_U(wt, wide ? 12 : 9, w));
  kiln_hlo_instruction_t *one = SPLAT_U(wt, wide ? 0x3ff0000000000000ull : 0x3f800000ull, w);
  return kiln_builder_bitcast_convert(b, BIN(OR, m, one), wide ? KILN_F64 : KILN_F32);
}

/* u = one_to_two(w) - 1 in [0, 1), or 2 - one_to_two(w) in (0, 1] when `open_low`. */
static kiln_hlo_instruction_t *unit(kiln_builder_t *b, kiln_hlo_instruction_t *w, bool open_low) {
  kiln_hlo_instruction_t *x = one_to_two(b, w);
  if (!x) return NULL;
  kiln_elem_type_t t = x->shape->type;
  return open_low ? BIN(SUBTRACT, SPLAT_F(t, 2.0, x), x) : BIN(SUBTRACT, x, SPLAT_F(t, 1.0, x));
}

/* convert(x) to `type`, or x itself when it already has it. */
static kiln_hlo_instruction_t *to_type(kiln_builder_t *b, kiln_hlo_instruction_t *x, kiln_elem_type_t type) {
  if (!x || x->shape->type == type) return x;
  return kiln_builder_convert(b, x, type);
}

static kiln_hlo_instruction_t *uniform_float(kiln_builder_t *b, kiln_hlo_instruction_t *in, kiln_hlo_instruction_t *w) {
  const kiln_shape_t *s = in->shape;
  kiln_hlo_instruction_t *u = unit(b, w, false);
  if (!u) return NULL;
  kiln_elem_type_t ct = u->shape->type;
  kiln_hlo_instruction_t *a = to_type(b, in->operands[0], ct), *hi = to_type(b, in->operands[1], ct);
  kiln_hlo_instruction_t *span = kiln_builder_splat(b, BIN(SUBTRACT, hi, a), u);
  kiln_hlo_instruction_t *r = to_type(b, BIN(ADD, kiln_builder_splat(b, a, u), BIN(MULTIPLY, span, u)), s->type);
  kiln_hlo_instruction_t *a_out = kiln_builder_splat(b, in->operands[0], r);
  kiln_hlo_instruction_t *b_out = kiln_builder_splat(b, in->operands[1], r);
  return kiln_builder_select(b, kiln_builder_compare(b, KILN_CMP_LT, r, b_out), r, a_out);
}

static kiln_hlo_instruction_t *uniform_int(kiln_builder_t *b, kiln_hlo_instruction_t *in, kiln_hlo_instruction_t *w) {
  if (!w) return NULL;
  const kiln_shape_t *s = in->shape;
  kiln_elem_type_t ut = kiln_elem_type_unsigned_of_width(kiln_elem_type_bits(s->type)), wt = w->shape->type;
  kiln_hlo_instruction_t *ua = in->operands[0], *ub = in->operands[1];
  if (ut != s->type) {
    ua = kiln_builder_bitcast_convert(b, ua, ut);
    ub = kiln_builder_bitcast_convert(b, ub, ut);
  }
  kiln_hlo_instruction_t *ordered = kiln_builder_compare(b, KILN_CMP_LT, in->operands[0], in->operands[1]);
  kiln_hlo_instruction_t *range = kiln_builder_select(b, ordered, BIN(SUBTRACT, ub, ua), kiln_builder_const_u64(b, ut, 1));
  kiln_hlo_instruction_t *off = BIN(REMAINDER, w, kiln_builder_splat(b, to_type(b, range, wt), w));
  kiln_hlo_instruction_t *r = BIN(ADD, kiln_builder_splat(b, ua, off), to_type(b, off, ut));
  return ut != s->type ? kiln_builder_bitcast_convert(b, r, s->type) : r;
}

static kiln_hlo_instruction_t *normal(kiln_builder_t *b, kiln_hlo_instruction_t *in, kiln_hlo_instruction_t *w2) {
  if (!w2) return NULL;
  const kiln_shape_t *s = in->shape;
  kiln_hlo_instruction_t *half[2];
  for (int i = 0; i < 2; i++)
    half[i] = kiln_builder_reshape(b, kiln_builder_slice_dim(b, w2, 0, i, i + 1), s->rank, s->dims);
  kiln_hlo_instruction_t *u1 = unit(b, half[0], true), *u2 = unit(b, half[1], false);
  if (!u1 || !u2) return NULL;
  kiln_elem_type_t ct = u1->shape->type;
  kiln_hlo_instruction_t *radius =
      kiln_builder_unary(b, KILN_OP_SQRT, BIN(MULTIPLY, SPLAT_F(ct, -2.0, u1), kiln_builder_unary(b, KILN_OP_LOG, u1)));
  kiln_hlo_instruction_t *angle = BIN(MULTIPLY, SPLAT_F(ct, 2.0 * M_PI, u2), u2);
  kiln_hlo_instruction_t *z = BIN(MULTIPLY, radius, kiln_builder_unary(b, KILN_OP_COS, angle));
  kiln_hlo_instruction_t *mean = kiln_builder_splat(b, to_type(b, in->operands[0], ct), z);
  kiln_hlo_instruction_t *sd = kiln_builder_splat(b, to_type(b, in->operands[1], ct), z);
  return to_type(b, BIN(ADD, mean, BIN(MULTIPLY, sd, z)), s->type);
}

typedef struct rng_ctx {
  kiln_ptrmap_t embedded; /* computations called by non-control-flow instructions */
  KILN_VEC(kiln_hlo_instruction_t *) expanded; /* replaced rngs, removed at the end (side effects keep them from dce) */
} rng_ctx_t;

static kiln_hlo_instruction_t *expand(kiln_builder_t *b, kiln_hlo_instruction_t *in, void *ctx) {
  rng_ctx_t *rc = ctx;
  rng_dist_t dist = RNG_UNIFORM;
  if (kiln_ptrmap_contains(&rc->embedded, in->parent) || !supported(in, &dist)) return NULL;
  const kiln_shape_t *s = in->shape;
  int64_t n = kiln_shape_num_elements(s);
  kiln_hlo_instruction_t *r = NULL;
  if (n == 0) {
    r = kiln_builder_splat(b, in->operands[0], in);
  } else {
    kiln_elem_type_t word = kiln_elem_type_bits(s->type) == 64 ? KILN_U64 : KILN_U32;
    if (dist == RNG_NORMAL) {
      int64_t dims[MAX_RANK];
      dims[0] = 2;
      for (int d = 0; d < s->rank; d++) dims[1 + d] = s->dims[d]; /* a scalar has no dims array */
      r = normal(b, in, random_words(b, word, s->rank + 1, dims, 2 * n));
    } else {
      kiln_hlo_instruction_t *w = random_words(b, word, s->rank, s->dims, n);
      r = float_result(s->type) ? uniform_float(b, in, w) : uniform_int(b, in, w);
    }
  }
  if (!r) return NULL;
  r->shape = in->shape; /* the result's layout exactly */
  kiln_vec_push(&rc->expanded, in);
  return r;
}

/* Marks every computation reachable from a call that is not control flow (fusion, reduce,
 * map, sort, scatter, ... bodies) in `set`. */
static void mark_embedded(kiln_hlo_module_t *m, kiln_ptrmap_t *set) {
  bool grew = true;
  while (grew) {
    grew = false;
    for (size_t ci = 0; ci < m->computations.len; ci++) {
      kiln_hlo_computation_t *c = m->computations.data[ci];
      bool outer_embedded = kiln_ptrmap_contains(set, c);
      for (size_t i = 0; i < c->instructions.len; i++) {
        const kiln_hlo_instruction_t *in = c->instructions.data[i];
        if (!in->num_called_groups || (!outer_embedded && kiln_dataflow_is_control_flow(in))) continue;
        for (int g = 0; g < in->num_called_groups; g++)
          for (int k = 0; k < in->called_groups[g].n; k++) {
            kiln_hlo_computation_t *callee = in->called_groups[g].comps[k];
            if (callee && !kiln_ptrmap_contains(set, callee)) {
              kiln_ptrmap_put(set, callee, callee);
              grew = true;
            }
          }
      }
    }
  }
}

kiln_status kiln_pass_rng_expander(kiln_hlo_module_t *m, const kiln_pass_options_t *opts, bool *changed) {
  rng_ctx_t rc;
  memset(&rc, 0, sizeof rc);
  kiln_ptrmap_init(&rc.embedded);
  mark_embedded(m, &rc.embedded);
  kiln_status s = kiln_builder_expand_all(m, KILN_OP_RNG, expand, &rc, "rng_expander", changed);
  for (size_t i = 0; i < rc.expanded.len && !s; i++) {
    kiln_hlo_instruction_t *in = rc.expanded.data[i];
    if (!in->users.len && in->parent->root != in) s = kiln_hlo_instruction_remove(in);
  }
  kiln_vec_free(&rc.expanded);
  kiln_ptrmap_free(&rc.embedded);
  return s;
}
