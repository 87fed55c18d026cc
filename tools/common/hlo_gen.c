/* Random valid HLO modules; see hlo_gen.h. */
#include "tools/common/hlo_gen.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"

#define GEN_MAX_RANK 4
#define GEN_MAX_OPERANDS 6

/* ---- element types ---- */

typedef enum { K_PRED, K_S, K_U, K_F, K_C } type_kind_t;

typedef struct gen_type {
  const char *name;
  type_kind_t kind;
  int bits;
  bool arith; /* takes arithmetic (f8e8m0fnu, with no sign and no zero, only moves) */
} gen_type_t;

static const gen_type_t kTypes[] = {
    {"pred", K_PRED, 8, true},    {"s2", K_S, 2, true},         {"s4", K_S, 4, true},
    {"s8", K_S, 8, true},         {"s16", K_S, 16, true},       {"s32", K_S, 32, true},
    {"s64", K_S, 64, true},       {"u2", K_U, 2, true},         {"u4", K_U, 4, true},
    {"u8", K_U, 8, true},         {"u16", K_U, 16, true},       {"u32", K_U, 32, true},
    {"u64", K_U, 64, true},       {"f16", K_F, 16, true},       {"bf16", K_F, 16, true},
    {"f32", K_F, 32, true},       {"f64", K_F, 64, true},       {"f8e5m2", K_F, 8, true},
    {"f8e4m3", K_F, 8, true},     {"f8e4m3fn", K_F, 8, true},   {"f8e4m3b11fnuz", K_F, 8, true},
    {"f8e5m2fnuz", K_F, 8, true}, {"f8e4m3fnuz", K_F, 8, true}, {"f8e3m4", K_F, 8, true},
    {"f8e8m0fnu", K_F, 8, false}, {"f4e2m1fn", K_F, 4, true},   {"c64", K_C, 64, true},
    {"c128", K_C, 128, true},     {"s1", K_S, 1, true},         {"u1", K_U, 1, true},
};
#define NUM_TYPES ((int)(sizeof kTypes / sizeof kTypes[0]))
#define T_PRED 0
#define T_S32 5
#define T_U32 11
#define T_F32 15

static bool is_float(int t) {
  return kTypes[t].kind == K_F;
}
static bool is_numeric(int t) {
  return kTypes[t].kind != K_PRED && kTypes[t].arith;
}

/* ---- shapes ---- */

typedef struct gen_shape {
  int type;
  int rank;
  int64_t dims[GEN_MAX_RANK + 1];
  int m2m[GEN_MAX_RANK + 1]; /* minor-to-major */
} gen_shape_t;

static int64_t num_elements(const gen_shape_t *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->dims[i];
  return n;
}

static bool same_dims(const gen_shape_t *a, const gen_shape_t *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

static void default_layout(gen_shape_t *s) {
  for (int i = 0; i < s->rank; i++) s->m2m[i] = s->rank - 1 - i;
}

static void shape_text(kiln_strbuf_t *b, const gen_shape_t *s) {
  kiln_strbuf_printf(b, "%s[", kTypes[s->type].name);
  for (int i = 0; i < s->rank; i++)
    kiln_strbuf_printf(b, "%s%lld", i ? "," : "", (long long)s->dims[i]);
  kiln_strbuf_printf(b, "]");
  if (s->rank == 0) return;
  kiln_strbuf_printf(b, "{");
  for (int i = 0; i < s->rank; i++) kiln_strbuf_printf(b, "%s%d", i ? "," : "", s->m2m[i]);
  kiln_strbuf_printf(b, "}");
}

/* ---- nodes and programs ---- */

typedef struct gen_node {
  char *op;      /* opcode text; "parameter" for parameters */
  char *shape;   /* result shape text */
  gen_shape_t s; /* array shape (valid when !tuple) */
  bool tuple;
  int operands[GEN_MAX_OPERANDS];
  int num_operands;
  char *attrs;  /* ", dimensions={0}" ... (computation names in it are unique per node) */
  char *comps;  /* computations it calls, rendered before ENTRY */
  bool inexact; /* carries float rounding that may differ between backends (see below) */
} gen_node_t;

struct kiln_hlo_gen_program {
  kiln_hlo_gen_options_t opts;
  gen_node_t *nodes;
  int num_nodes, cap;
  int roots[4];
  int num_roots;
  bool entry_layout; /* render an entry_computation_layout (see entry_layout_text) */
};

typedef struct gen {
  kiln_hlo_gen_program_t *p;
  uint64_t rng;
  int main_type;
  int64_t max_elements;
  bool need_exact; /* the operation being drawn is discontinuous: exact operands only */
  bool drew_rng;   /* the program holds an rng (one at most: see op_rng) */
} gen_t;

/* ---- random numbers: splitmix64 ---- */

static uint64_t next_u64(gen_t *g) {
  uint64_t z = (g->rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static int rnd(gen_t *g, int n) {
  return n <= 1 ? 0 : (int)(next_u64(g) % (uint64_t)n);
}
static int64_t rnd_range(gen_t *g, int64_t lo, int64_t hi) {
  return lo + (int64_t)(next_u64(g) % (uint64_t)(hi - lo + 1));
}
static bool chance(gen_t *g, int percent) {
  return rnd(g, 100) < percent;
}

static void shuffle(gen_t *g, int *v, int n) {
  for (int i = n - 1; i > 0; i--) {
    int j = rnd(g, i + 1), t = v[i];
    v[i] = v[j];
    v[j] = t;
  }
}

/* Odd sizes: 1, primes, 2^k +- 1, powers of two; sometimes 0. */
static int64_t rnd_dim(gen_t *g) {
  static const int64_t kSizes[] = {1, 1, 2, 3, 3, 4, 5, 7, 8, 9, 11, 13, 15, 16, 17, 31, 32, 33};
  if (chance(g, 2)) return 0;
  return kSizes[rnd(g, (int)(sizeof kSizes / sizeof kSizes[0]))];
}

static void random_layout(gen_t *g, gen_shape_t *s) {
  default_layout(s);
  if (s->rank > 1 && chance(g, 20)) shuffle(g, s->m2m, s->rank);
}

static gen_shape_t random_shape(gen_t *g, int type, int rank) {
  gen_shape_t s;
  memset(&s, 0, sizeof s);
  s.type = type;
  s.rank = rank;
  for (int tries = 0; tries < 20; tries++) {
    for (int i = 0; i < rank; i++) s.dims[i] = rnd_dim(g);
    if (num_elements(&s) <= g->max_elements) break;
  }
  for (int i = 0; i < rank; i++)
    while (num_elements(&s) > g->max_elements && s.dims[i] > 1) s.dims[i] /= 2;
  random_layout(g, &s);
  return s;
}

static int random_type(gen_t *g) {
  if (chance(g, 35)) return T_F32;
  return rnd(g, NUM_TYPES);
}

static char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kiln_strbuf_t b = {0};
  kiln_strbuf_vprintf(&b, fmt, ap);
  va_end(ap);
  char *r = kiln_strdup(kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return r;
}

static char *strbuf_take(kiln_strbuf_t *b) {
  char *r = kiln_strdup(kiln_strbuf_cstr(b));
  kiln_strbuf_free(b);
  return r;
}

/* Floating-point results may differ in their last bits between the compiled module and the
 * evaluator (summation order, math library); a discontinuous operation (compare, convert to
 * an integer, floor, sort keys, ...) would turn that into a different discrete value that no
 * tolerance covers, so such operations take only exact operands: parameters, constants and
 * what data movement, min / max, negate, abs and converts make of them, and anything
 * integer. */
static bool inexact_result(const kiln_hlo_gen_program_t *p, const gen_node_t *nd) {
  static const char *const kExact[] = {"parameter",
                                       "constant",
                                       "iota",
                                       "broadcast",
                                       "transpose",
                                       "reshape",
                                       "reverse",
                                       "slice",
                                       "pad",
                                       "concatenate",
                                       "dynamic-slice",
                                       "dynamic-update-slice",
                                       "gather",
                                       "select",
                                       "clamp",
                                       "maximum",
                                       "minimum",
                                       "negate",
                                       "abs",
                                       "copy",
                                       "copy-start",
                                       "copy-done",
                                       "bitcast",
                                       "tuple",
                                       "get-tuple-element",
                                       "sort",
                                       "convert",
                                       "compare",
                                       "is-finite",
                                       "floor",
                                       "ceil",
                                       "round-nearest-even",
                                       "round-nearest-afz",
                                       "sign",
                                       "bitcast-convert",
                                       "complex",
                                       "reduce-precision",
                                       "topk",
                                       "opt-barrier",
                                       "all-reduce",
                                       "all-gather",
                                       "reduce-scatter",
                                       "all-to-all",
                                       "collective-permute",
                                       "collective-broadcast"};
  bool in = false;
  for (int i = 0; i < nd->num_operands; i++) in |= p->nodes[nd->operands[i]].inexact;
  if (in) return true;
  /* The abs of a complex value is its magnitude, sqrt(re^2 + im^2): rounded, and not always
   * the same last bit as the evaluator's (fuzz-1024423: bitcast to u32, 1060114689 against
   * 1060114688). */
  if (!strcmp(nd->op, "abs") && nd->num_operands == 1 &&
      kTypes[p->nodes[nd->operands[0]].s.type].kind == K_C)
    return true;
  for (size_t i = 0; i < sizeof kExact / sizeof kExact[0]; i++)
    if (!strcmp(nd->op, kExact[i])) return false;
  if (nd->tuple) return true; /* while, multi-operand sort: conservative */
  return kTypes[nd->s.type].kind == K_F || kTypes[nd->s.type].kind == K_C;
}

/* Room for `n` nodes in all. Operations hold pointers into the array (shape_of) while they
 * add parameters and constants, so kiln_hlo_gen_make makes room for a whole operation
 * (GEN_OP_NODES) before drawing one: a realloc in the middle would leave them dangling (ASan
 * found one reading a freed shape in add_node). */
#define GEN_OP_NODES 64
static void reserve_nodes(kiln_hlo_gen_program_t *p, int n) {
  if (n <= p->cap) return;
  while (p->cap < n) p->cap = p->cap ? 2 * p->cap : 32;
  p->nodes = kiln_realloc(p->nodes, (size_t)p->cap * sizeof *p->nodes);
}

static int add_node(gen_t *g, const char *op, const gen_shape_t *s, const int *operands, int n,
                    char *attrs, char *comps) {
  kiln_hlo_gen_program_t *p = g->p;
  gen_shape_t shape = *s; /* `s` may point into the array */
  reserve_nodes(p, p->num_nodes + 1);
  s = &shape;
  gen_node_t *nd = &p->nodes[p->num_nodes];
  memset(nd, 0, sizeof *nd);
  nd->op = kiln_strdup(op);
  nd->s = *s;
  kiln_strbuf_t b = {0};
  shape_text(&b, s);
  nd->shape = strbuf_take(&b);
  for (int i = 0; i < n; i++) nd->operands[i] = operands[i];
  nd->num_operands = n;
  nd->attrs = attrs ? attrs : kiln_strdup("");
  nd->comps = comps ? comps : kiln_strdup("");
  nd->inexact = inexact_result(p, nd);
  return p->num_nodes++;
}

/* A tuple-shaped node: `shape` is its text. */
static int add_tuple_node(gen_t *g, const char *op, const char *shape, const int *operands, int n,
                          char *attrs, char *comps) {
  gen_shape_t s;
  memset(&s, 0, sizeof s);
  int id = add_node(g, op, &s, operands, n, attrs, comps);
  kiln_free(g->p->nodes[id].shape);
  g->p->nodes[id].shape = kiln_strdup(shape);
  g->p->nodes[id].tuple = true;
  /* add_node judged the empty array shape; a tuple's rule differs (fuzz-1040580: a while
   * whose body took a tanh counted as exact, then bitcast to s32). */
  g->p->nodes[id].inexact = inexact_result(g->p, &g->p->nodes[id]);
  return id;
}

static int add_param(gen_t *g, const gen_shape_t *s) {
  return add_node(g, "parameter", s, NULL, 0, NULL, NULL);
}

static gen_shape_t scalar_of(int type) {
  gen_shape_t s;
  memset(&s, 0, sizeof s);
  s.type = type;
  return s;
}

static int add_constant(gen_t *g, int type, const char *value) {
  gen_shape_t s = scalar_of(type);
  return add_node(g, "constant", &s, NULL, 0, xprintf("%s", value), NULL);
}

/* A small constant of `type` as HLO text. */
static const char *small_value(gen_t *g, int type) {
  static const char *kF[] = {"0", "1", "-1", "0.5", "2"};
  static const char *kI[] = {"0", "-1", "1", "3"}; /* s1 takes the first 2, s2 3 */
  static const char *kU[] = {"0", "1", "3"};       /* u1 the first 2 */
  const int bits = kTypes[type].bits;
  switch (kTypes[type].kind) {
    case K_PRED:
      return chance(g, 50) ? "true" : "false";
    case K_S:
      return kI[rnd(g, bits == 1 ? 2 : bits == 2 ? 3 : 4)];
    case K_U:
      return kU[rnd(g, bits == 1 ? 2 : 3)];
    case K_F:
      return type == 24 ? "1" : kF[rnd(g, 5)];
    case K_C:
      return chance(g, 50) ? "(1, 0)" : "(0.5, -1)";
  }
  return "0";
}

/* A node of the given array shape: an existing one (same type and dimensions) when there is
 * one (most of the time), else a new parameter. */
static int node_like(gen_t *g, const gen_shape_t *s) {
  kiln_hlo_gen_program_t *p = g->p;
  if (chance(g, 80))
    for (int i = p->num_nodes - 1; i >= 0; i--) {
      const gen_node_t *nd = &p->nodes[i];
      if (!nd->tuple && nd->s.type == s->type && same_dims(&nd->s, s) &&
          !(g->need_exact && nd->inexact))
        return i;
    }
  return add_param(g, s);
}

/* A recent array node whose type passes `ok` (NULL: any), else a new parameter. */
static int pick(gen_t *g, bool (*ok)(int type), int min_rank) {
  kiln_hlo_gen_program_t *p = g->p;
  int cands[64], n = 0;
  for (int i = p->num_nodes - 1; i >= 0 && n < 64; i--) {
    const gen_node_t *nd = &p->nodes[i];
    if (nd->tuple || nd->s.rank < min_rank || (ok && !ok(nd->s.type))) continue;
    if (g->need_exact && nd->inexact) continue;
    if (!strcmp(nd->op, "constant") && chance(g, 80)) continue;
    cands[n++] = i;
  }
  if (n && chance(g, 90)) {
    /* Prefer recent nodes: the smaller of two draws. */
    int a = rnd(g, n), b = rnd(g, n);
    return cands[a < b ? a : b];
  }
  int type = g->main_type;
  if (ok && !ok(type)) {
    int tries = 0;
    do type = random_type(g);
    while (!ok(type) && ++tries < 100);
    if (!ok(type)) type = T_F32;
  }
  gen_shape_t s = random_shape(g, type, min_rank + rnd(g, GEN_MAX_RANK - min_rank + 1));
  return add_param(g, &s);
}

static const gen_shape_t *shape_of(gen_t *g, int id) {
  return &g->p->nodes[id].s;
}

/* ---- computations ---- */

/* A binary computation `name` on scalars of `type`: root `op(a, b)`. */
static void binary_comp(kiln_strbuf_t *b, const char *name, int type, const char *op) {
  const char *t = kTypes[type].name;
  kiln_strbuf_printf(
      b, "%s {\n  a = %s[] parameter(0)\n  b = %s[] parameter(1)\n  ROOT r = %s[] %s(a, b)\n}\n\n",
      name, t, t, t, op);
}

/* A reducer that the type takes, for `terms` values of node `x` combined into one. Floats
 * narrower than f32 round after every step, so an add or multiply over more than 4 of them
 * (more than 2 for f4e2m1fn, whose one mantissa bit makes an ulp half the value: fuzz-3052315,
 * a sum of 4 that is 4 in one order and 6 in another) depends on the order (a tree here, a
 * sequence in the evaluator) beyond any tolerance: those get maximum or minimum, which do not
 * round. A float product of inexact values is an add
 * instead: one value may be what is left of a cancelling sum (pi/4 + pi/4 + pi/4 - 3pi/4),
 * pure rounding whose relative error is unbounded (2^-24 in one summation order, 2^-23 in
 * another), and the product turns it into a relative error of the whole result that no
 * tolerance covers (fuzz-20312: twice the evaluator's value). Drawn as before, then mapped, so
 * programs without such a product are unchanged. An 8-bit float value that is inexact may
 * already be an ulp off (a loop's carry rounded after every step or not), and a sum of 4 of
 * them 4 ulps, a quarter of its value with 2 mantissa bits (fuzz-9642207: f8e5m2fnuz carries
 * of a scan summed, then tanh(2x): 0.25 vs 0.4375); those sum at most 2. */
static const char *random_reducer_of(gen_t *g, int type, bool inexact, int64_t terms) {
  if (kTypes[type].kind == K_PRED) return chance(g, 50) ? "and" : "or";
  if (kTypes[type].kind == K_C) return chance(g, 70) || inexact ? "add" : "multiply";
  if (kTypes[type].kind == K_F && kTypes[type].bits < 32 &&
      terms > (kTypes[type].bits <= 4 || (inexact && kTypes[type].bits <= 8) ? 2 : 4))
    return chance(g, 50) ? "maximum" : "minimum";
  static const char *kOps[] = {"add", "add", "maximum", "minimum", "multiply"};
  int k = rnd(g, 5);
  /* A float product of many terms may overflow in one order and not in another: with a zero
   * among them the result is 0 or NaN depending on the order, which a reduction does not fix
   * (fuzz-4707796: the 112 terms of an f32[7,16] iota, 0 on the evaluator, which multiplies
   * the zero first, NaN as 0 * inf of a vectorized kernel's partial products). */
  if (k == 4 && kTypes[type].kind == K_F && (inexact || terms > 8)) return "add";
  return kOps[k];
}

static const char *random_reducer(gen_t *g, int x, int64_t terms) {
  return random_reducer_of(g, shape_of(g, x)->type, g->p->nodes[x].inexact, terms);
}

/* ---- operations: each returns the new node, or -1 when it does not apply ---- */

static bool any_type(int t) {
  (void)t;
  return true;
}
static bool numeric_type(int t) {
  return is_numeric(t);
}
static bool real_type(int t) {
  return is_numeric(t) && kTypes[t].kind != K_C;
}
static bool float_type(int t) {
  return is_float(t) && kTypes[t].arith;
}
static bool dot_type(int t) {
  return is_numeric(t) && kTypes[t].bits >= 8;
}

/* Whether `op` is sine or cosine: periodic, so an operand that may be large (a quotient by a
 * small divisor, doubled in a loop) is clamped to [-4, 4] first. Past that a difference of
 * rounding the compiled program may keep (excess precision in bf16, as XLA's default) moves
 * the result anywhere in [-1, 1] (fuzz-2503186: sin(2 * (0.789 / -0.00087)) in bf16 was
 * sin(-1816) on the evaluator, sin of the unrounded -1814.4 compiled). */
static bool periodic(const char *op) {
  return !strcmp(op, "sine") || !strcmp(op, "cosine");
}

/* 8- and 4-bit floats: one ulp of an inexact operand (a sum rounded in another order) moves a
 * sine or cosine near its zeros by many ulps of the result, past any tolerance of the type
 * (fuzz-2760066: cos of an f8e5m2fnuz sum, -1.75 on the evaluator and -1.5 compiled, gave
 * -0.1875 vs 0.078). Such operands take no periodic function; loop and branch bodies, whose
 * operands are inexact after a step, take tanh instead. */
static bool coarse_float(int t) {
  return kTypes[t].kind == K_F && kTypes[t].bits <= 8;
}

static int op_unary(gen_t *g) {
  int x = pick(g, any_type, 0);
  const gen_shape_t *s = shape_of(g, x);
  const char *op = NULL;
  int t = s->type;
  if (!kTypes[t].arith) return -1;
  switch (kTypes[t].kind) {
    case K_PRED:
      op = "not";
      break;
    case K_S: {
      static const char *k[] = {"negate", "abs", "not", "popcnt", "count-leading-zeros", "sign"};
      op = k[rnd(g, 6)];
      break;
    }
    case K_U: {
      static const char *k[] = {"not", "popcnt", "count-leading-zeros", "negate"};
      op = k[rnd(g, 4)];
      break;
    }
    case K_F: {
      static const char *k[] = {"abs",
                                "negate",
                                "tanh",
                                "exponential",
                                "sine",
                                "cosine",
                                "floor",
                                "ceil",
                                "sign",
                                "logistic",
                                "round-nearest-even",
                                "round-nearest-afz",
                                "sqrt",
                                "log",
                                "rsqrt",
                                "exponential-minus-one",
                                "log-plus-one",
                                "cbrt",
                                "is-finite"};
      op = k[rnd(g, 19)];
      break;
    }
    case K_C: {
      static const char *k[] = {"negate", "exponential", "real", "imag", "abs"};
      op = k[rnd(g, 5)];
      break;
    }
  }
  static const char *const kJumps[] = {"floor",
                                       "ceil",
                                       "sign",
                                       "round-nearest-even",
                                       "round-nearest-afz",
                                       "is-finite",
                                       "popcnt",
                                       "count-leading-zeros"};
  for (size_t i = 0; i < sizeof kJumps / sizeof kJumps[0]; i++)
    if (!strcmp(op, kJumps[i]) && g->p->nodes[x].inexact) return -1;
  if (periodic(op) && coarse_float(t) && g->p->nodes[x].inexact) return -1;
  /* sqrt, rsqrt, cbrt, log and log1p near their pole or infinite slope turn the unbounded
   * relative error of a cancelling sum into a large one of the result (fuzz-2602772: rsqrt of
   * an IRFFT output near 3.7e-7, 1640.7 vs 1655.0): an operand that carries rounding is
   * clamped to [1/2, 4] (exact in every float type that takes it); exact operands keep their
   * zeros, negatives and NaNs. */
  static const char *const kSteep[] = {"sqrt", "rsqrt", "cbrt", "log", "log-plus-one"};
  bool steep = false;
  for (size_t i = 0; i < sizeof kSteep / sizeof kSteep[0]; i++)
    steep |= !strcmp(op, kSteep[i]) && g->p->nodes[x].inexact;
  /* exp and expm1 turn an operand's absolute error into a relative one of the result
   * (fuzz-5007891: exp of a bf16 square of a dot, 26.6, whose one ulp is 13% of the result):
   * a real operand that carries rounding is clamped to [-2, 2], [-1, 1] in 8-bit floats. */
  const bool expo = (!strcmp(op, "exponential") || !strcmp(op, "exponential-minus-one")) &&
                    kTypes[t].kind == K_F && g->p->nodes[x].inexact;
  if (expo) { /* (no random choice: see step_text) */
    gen_shape_t cs = *s;
    const bool coarse = coarse_float(t);
    int ops[3] = {add_constant(g, t, coarse ? "-1" : "-2"), x,
                  add_constant(g, t, coarse ? "1" : "2")};
    x = add_node(g, "clamp", &cs, ops, 3, NULL, NULL);
    s = shape_of(g, x);
  }
  if (periodic(op) || steep) { /* (no random choice: see step_text) */
    gen_shape_t cs = *s;
    int ops[3] = {add_constant(g, t, steep ? "0.5" : "-4"), x, add_constant(g, t, "4")};
    x = add_node(g, "clamp", &cs, ops, 3, NULL, NULL);
    s = shape_of(g, x);
  }
  gen_shape_t r = *s;
  if (!strcmp(op, "is-finite")) r.type = T_PRED;
  if (!strcmp(op, "real") || !strcmp(op, "imag") || !strcmp(op, "abs"))
    if (kTypes[t].kind == K_C) r.type = kTypes[t].bits == 64 ? T_F32 : 16; /* f64 */
  random_layout(g, &r);
  return add_node(g, op, &r, &x, 1, NULL, NULL);
}

static int op_binary(gen_t *g) {
  int a = pick(g, any_type, 0);
  const gen_shape_t *s = shape_of(g, a);
  int t = s->type;
  if (!kTypes[t].arith) return -1;
  const char *op = NULL;
  switch (kTypes[t].kind) {
    case K_PRED: {
      static const char *k[] = {"and", "or", "xor"};
      op = k[rnd(g, 3)];
      break;
    }
    case K_S:
    case K_U: {
      static const char *k[] = {"add",
                                "subtract",
                                "multiply",
                                "maximum",
                                "minimum",
                                "and",
                                "or",
                                "xor",
                                "shift-left",
                                "shift-right-logical",
                                "shift-right-arithmetic",
                                "divide",
                                "remainder",
                                "add",
                                "multiply"};
      op = k[rnd(g, 15)];
      break;
    }
    case K_F: {
      static const char *k[] = {"add",     "subtract", "multiply", "maximum",
                                "minimum", "divide",   "atan2",    "remainder",
                                "power",   "add",      "multiply", "subtract"};
      op = k[rnd(g, 12)];
      break;
    }
    case K_C: {
      static const char *k[] = {"add", "subtract", "multiply"};
      op = k[rnd(g, 3)];
      break;
    }
  }
  bool jumps = !strcmp(op, "remainder") || !strcmp(op, "atan2") || !strcmp(op, "power");
  if (jumps && g->p->nodes[a].inexact) return -1;
  /* A float divisor is exact: a rounded one may be what is left of a cancelling sum near
   * zero, whose relative error is unbounded, and a quotient takes the divisor's relative
   * error whole (fuzz-1096971: a dot's sum, doubled in a while loop, then divided by; 1 of
   * 832 elements off by 1.5e-4 relative). The dividend may be anything. */
  bool exact_divisor = !strcmp(op, "divide") && kTypes[t].kind == K_F;
  g->need_exact = jumps || exact_divisor;
  int ops[2] = {a, node_like(g, s)};
  g->need_exact = false;
  bool swap = chance(g, 50);
  if (exact_divisor && g->p->nodes[a].inexact) swap = false;
  if (swap) {
    int tmp = ops[0];
    ops[0] = ops[1];
    ops[1] = tmp;
  }
  gen_shape_t r = *shape_of(g, a);
  random_layout(g, &r);
  return add_node(g, op, &r, ops, 2, NULL, NULL);
}

static int op_compare(gen_t *g) {
  int a = pick(g, any_type, 0);
  gen_shape_t s = *shape_of(g, a);
  if (!kTypes[s.type].arith) return -1;
  static const char *kDirs[] = {"EQ", "NE", "LT", "GT", "LE", "GE"};
  const char *dir = kDirs[rnd(g, kTypes[s.type].kind == K_C ? 2 : 6)];
  int ops[2] = {a, node_like(g, &s)};
  const char *type = "";
  if (is_float(s.type) && chance(g, 30)) type = ", type=TOTALORDER";
  s.type = T_PRED;
  random_layout(g, &s);
  return add_node(g, "compare", &s, ops, 2, xprintf(", direction=%s%s", dir, type), NULL);
}

static int op_select(gen_t *g) {
  int a = pick(g, any_type, 0);
  gen_shape_t s = *shape_of(g, a);
  gen_shape_t ps = s;
  ps.type = T_PRED;
  int ops[3] = {node_like(g, &ps), a, node_like(g, &s)};
  random_layout(g, &s);
  return add_node(g, "select", &s, ops, 3, NULL, NULL);
}

static int op_clamp(gen_t *g) {
  int x = pick(g, real_type, 0);
  gen_shape_t s = *shape_of(g, x);
  int lo, hi;
  if (chance(g, 50)) {
    gen_shape_t sc = scalar_of(s.type);
    lo = node_like(g, &sc);
    hi = node_like(g, &sc);
  } else {
    lo = node_like(g, &s);
    hi = node_like(g, &s);
  }
  int ops[3] = {lo, x, hi};
  random_layout(g, &s);
  return add_node(g, "clamp", &s, ops, 3, NULL, NULL);
}

static int op_convert(gen_t *g) {
  int to = random_type(g);
  g->need_exact = kTypes[to].kind != K_F && kTypes[to].kind != K_C;
  int x = pick(g, any_type, 0);
  g->need_exact = false;
  gen_shape_t s = *shape_of(g, x);
  if (kTypes[s.type].kind == K_C && kTypes[to].kind != K_C) return -1;
  s.type = to;
  random_layout(g, &s);
  return add_node(g, "convert", &s, &x, 1, NULL, NULL);
}

static int op_bitcast_convert(gen_t *g) {
  int x = pick(g, any_type, 0);
  gen_shape_t s = *shape_of(g, x);
  int bits = kTypes[s.type].bits;
  if (bits < 8 || s.type == T_PRED) return -1;
  int cands[NUM_TYPES], n = 0;
  for (int t = 0; t < NUM_TYPES; t++)
    if (t != T_PRED && kTypes[t].bits == bits && kTypes[t].kind != K_C &&
        kTypes[s.type].kind != K_C)
      cands[n++] = t;
  if (!n) return -1;
  s.type = cands[rnd(g, n)];
  random_layout(g, &s);
  return add_node(g, "bitcast-convert", &s, &x, 1, NULL, NULL);
}

static int op_broadcast(gen_t *g) {
  int x = pick(g, any_type, 0);
  const gen_shape_t *in = shape_of(g, x);
  int extra = 1 + rnd(g, 2);
  if (in->rank + extra > GEN_MAX_RANK) extra = GEN_MAX_RANK - in->rank;
  if (extra <= 0) return -1;
  int rank = in->rank + extra;
  /* Choose which output dimensions carry the operand's (increasing). */
  int slots[GEN_MAX_RANK + 1];
  for (int i = 0; i < rank; i++) slots[i] = i;
  shuffle(g, slots, rank);
  int chosen[GEN_MAX_RANK + 1];
  for (int i = 0; i < in->rank; i++) chosen[i] = slots[i];
  for (int i = 0; i < in->rank; i++) /* sort */
    for (int j = i + 1; j < in->rank; j++)
      if (chosen[j] < chosen[i]) {
        int t = chosen[i];
        chosen[i] = chosen[j];
        chosen[j] = t;
      }
  gen_shape_t r;
  memset(&r, 0, sizeof r);
  r.type = in->type;
  r.rank = rank;
  for (int i = 0; i < rank; i++) r.dims[i] = -1;
  for (int i = 0; i < in->rank; i++) r.dims[chosen[i]] = in->dims[i];
  for (int i = 0; i < rank; i++)
    if (r.dims[i] < 0) r.dims[i] = 1 + rnd(g, 5);
  if (num_elements(&r) > g->max_elements) return -1;
  random_layout(g, &r);
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, ", dimensions={");
  for (int i = 0; i < in->rank; i++) kiln_strbuf_printf(&b, "%s%d", i ? "," : "", chosen[i]);
  kiln_strbuf_printf(&b, "}");
  return add_node(g, "broadcast", &r, &x, 1, strbuf_take(&b), NULL);
}

static int op_transpose(gen_t *g) {
  int x = pick(g, any_type, 2);
  const gen_shape_t *in = shape_of(g, x);
  int perm[GEN_MAX_RANK + 1];
  for (int i = 0; i < in->rank; i++) perm[i] = i;
  shuffle(g, perm, in->rank);
  gen_shape_t r = *in;
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, ", dimensions={");
  for (int i = 0; i < in->rank; i++) {
    r.dims[i] = in->dims[perm[i]];
    kiln_strbuf_printf(&b, "%s%d", i ? "," : "", perm[i]);
  }
  kiln_strbuf_printf(&b, "}");
  random_layout(g, &r);
  return add_node(g, "transpose", &r, &x, 1, strbuf_take(&b), NULL);
}

static int op_reshape(gen_t *g) {
  int x = pick(g, any_type, 0);
  const gen_shape_t *in = shape_of(g, x);
  int64_t n = num_elements(in);
  gen_shape_t r;
  memset(&r, 0, sizeof r);
  r.type = in->type;
  if (n == 0) {
    r.rank = 1 + rnd(g, 2);
    for (int i = 0; i < r.rank; i++) r.dims[i] = i == 0 ? 0 : 1 + rnd(g, 3);
  } else {
    /* Split n into prime factors, then group them into up to GEN_MAX_RANK dimensions. */
    int64_t f[64];
    int nf = 0;
    for (int64_t m = n, d = 2; m > 1 && nf < 64;) {
      if (d * d > m) {
        f[nf++] = m;
        break;
      }
      if (m % d == 0) {
        f[nf++] = d;
        m /= d;
      } else {
        d++;
      }
    }
    r.rank = 1 + rnd(g, GEN_MAX_RANK);
    for (int i = 0; i < r.rank; i++) r.dims[i] = 1;
    for (int i = 0; i < nf; i++) r.dims[rnd(g, r.rank)] *= f[i];
  }
  random_layout(g, &r);
  return add_node(g, "reshape", &r, &x, 1, NULL, NULL);
}

/* A bitcast's result shape for operand shape `in`, as XLA's optimized dumps hold them: the
 * operand's bytes seen as another shape and layout. Its dimensions in physical order (major first)
 * are regrouped — two adjacent ones merged, one split by its smallest factor, a 1 inserted — and
 * dealt to the result's logical dimensions in a random order, the result's layout the one that
 * keeps the physical order. False when the result would have too many dimensions. */
static bool bitcast_shape(gen_t *g, const gen_shape_t *in, gen_shape_t *r) {
  int64_t p[GEN_MAX_RANK + 3];
  int n = 0;
  for (int k = 0; k < in->rank; k++) p[n++] = in->dims[in->m2m[in->rank - 1 - k]];
  if (n >= 2 && chance(g, 40)) {
    int i = rnd(g, n - 1);
    p[i] *= p[i + 1];
    memmove(&p[i + 1], &p[i + 2], (size_t)(n - i - 2) * sizeof *p);
    n--;
  }
  if (n >= 1 && chance(g, 40)) {
    int i = rnd(g, n);
    int64_t f = 2;
    while (f * f <= p[i] && p[i] % f) f++;
    if (f * f <= p[i]) {
      memmove(&p[i + 2], &p[i + 1], (size_t)(n - i - 1) * sizeof *p);
      p[i + 1] = f;
      p[i] /= f;
      n++;
    }
  }
  if (chance(g, 20)) {
    int i = rnd(g, n + 1);
    memmove(&p[i + 1], &p[i], (size_t)(n - i) * sizeof *p);
    p[i] = 1;
    n++;
  }
  if (n > GEN_MAX_RANK) return false;
  memset(r, 0, sizeof *r);
  r->type = in->type;
  r->rank = n;
  int perm[GEN_MAX_RANK + 1]; /* physical position k (major first) -> logical dimension */
  for (int k = 0; k < n; k++) perm[k] = k;
  if (n > 1 && chance(g, 50)) shuffle(g, perm, n);
  for (int k = 0; k < n; k++) {
    r->dims[perm[k]] = p[k];
    r->m2m[n - 1 - k] = perm[k];
  }
  return true;
}

static char *tuple_text(const gen_shape_t *const *s, int n) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, "(");
  for (int i = 0; i < n; i++) {
    if (i) kiln_strbuf_printf(&b, ", ");
    shape_text(&b, s[i]);
  }
  kiln_strbuf_printf(&b, ")");
  return strbuf_take(&b);
}

static int op_bitcast(gen_t *g) {
  int x = pick(g, any_type, 1);
  gen_shape_t in = *shape_of(g, x), r;
  if (!bitcast_shape(g, &in, &r)) return -1;
  return add_node(g, "bitcast", &r, &x, 1, NULL, NULL);
}

/* copy into another layout (a physical transpose, as layout assignment leaves them);
 * sometimes as an asynchronous copy-start / copy-done pair. */
static int op_layout_copy(gen_t *g) {
  int x = pick(g, any_type, 1);
  gen_shape_t r = *shape_of(g, x);
  if (r.rank < 2) return -1;
  shuffle(g, r.m2m, r.rank);
  if (chance(g, 70)) return add_node(g, "copy", &r, &x, 1, NULL, NULL);
  gen_shape_t ctx = scalar_of(T_U32);
  const gen_shape_t *parts[3] = {&r, shape_of(g, x), &ctx};
  char *text = tuple_text(parts, 3);
  int cs = add_tuple_node(g, "copy-start", text, &x, 1, NULL, NULL);
  kiln_free(text);
  return add_node(g, "copy-done", &r, &cs, 1, NULL, NULL);
}

static int op_reverse(gen_t *g) {
  int x = pick(g, any_type, 1);
  gen_shape_t r = *shape_of(g, x);
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, ", dimensions={");
  int n = 0;
  for (int i = 0; i < r.rank; i++)
    if (chance(g, 50) || (i == r.rank - 1 && n == 0))
      kiln_strbuf_printf(&b, "%s%d", n++ ? "," : "", i);
  kiln_strbuf_printf(&b, "}");
  random_layout(g, &r);
  return add_node(g, "reverse", &r, &x, 1, strbuf_take(&b), NULL);
}

static int op_slice(gen_t *g) {
  int x = pick(g, any_type, 1);
  const gen_shape_t *in = shape_of(g, x);
  gen_shape_t r = *in;
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, ", slice={");
  for (int i = 0; i < in->rank; i++) {
    int64_t d = in->dims[i];
    int64_t start = d ? rnd_range(g, 0, d - 1) : 0;
    int64_t limit = d ? rnd_range(g, start + 1, d) : 0;
    if (chance(g, 30)) start = 0, limit = d;
    int64_t stride = chance(g, 30) ? 1 + rnd(g, 3) : 1;
    r.dims[i] = (limit - start + stride - 1) / stride;
    kiln_strbuf_printf(&b, "%s[%lld:%lld:%lld]", i ? ", " : "", (long long)start, (long long)limit,
                       (long long)stride);
  }
  kiln_strbuf_printf(&b, "}");
  random_layout(g, &r);
  return add_node(g, "slice", &r, &x, 1, strbuf_take(&b), NULL);
}

static int op_pad(gen_t *g) {
  int x = pick(g, any_type, 1);
  const gen_shape_t *in = shape_of(g, x);
  gen_shape_t r = *in;
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, ", padding=");
  for (int i = 0; i < in->rank; i++) {
    int64_t d = in->dims[i];
    int64_t lo = rnd_range(g, d > 1 ? -1 : 0, 2), hi = rnd_range(g, d > 1 ? -1 : 0, 2);
    int64_t interior = d > 1 && chance(g, 25) ? 1 + rnd(g, 2) : 0;
    int64_t size = lo + hi + d + (d > 0 ? (d - 1) * interior : 0);
    if (size < 0) lo = 0, hi = 0, size = d + (d > 0 ? (d - 1) * interior : 0);
    r.dims[i] = size;
    kiln_strbuf_printf(&b, "%s%lld_%lld", i ? "x" : "", (long long)lo, (long long)hi);
    if (interior) kiln_strbuf_printf(&b, "_%lld", (long long)interior);
  }
  if (num_elements(&r) > g->max_elements) {
    kiln_strbuf_free(&b);
    return -1;
  }
  int ops[2] = {x, add_constant(g, in->type, small_value(g, in->type))};
  random_layout(g, &r);
  return add_node(g, "pad", &r, ops, 2, strbuf_take(&b), NULL);
}

/* The operands of a concatenate of 2 or 3 along a random dimension `*dim` (the first a recent
 * node, the others of its shape but that dimension) and its result shape `*r`; how many, or
 * 0 when the result is too large. */
static int concat_operands(gen_t *g, int ops[3], gen_shape_t *r, int *dim) {
  int x = pick(g, any_type, 1);
  const gen_shape_t *in = shape_of(g, x);
  *dim = rnd(g, in->rank);
  int n = 2 + rnd(g, 2);
  ops[0] = x;
  *r = *in;
  for (int i = 1; i < n; i++) {
    gen_shape_t s = *in;
    s.dims[*dim] = rnd_dim(g);
    random_layout(g, &s);
    ops[i] = node_like(g, &s);
    r->dims[*dim] += s.dims[*dim];
  }
  if (num_elements(r) > g->max_elements) return 0;
  random_layout(g, r);
  return n;
}

static int op_concatenate(gen_t *g) {
  int ops[3], dim;
  gen_shape_t r;
  int n = concat_operands(g, ops, &r, &dim);
  if (!n) return -1;
  return add_node(g, "concatenate", &r, ops, n, xprintf(", dimensions={%d}", dim), NULL);
}

static int op_iota(gen_t *g) {
  int t = random_type(g);
  if (!real_type(t)) t = T_S32;
  gen_shape_t r = random_shape(g, t, 1 + rnd(g, GEN_MAX_RANK));
  return add_node(g, "iota", &r, NULL, 0, xprintf(", iota_dimension=%d", rnd(g, r.rank)), NULL);
}

/* A start index of `type` (s32 or u32): a constant, sometimes out of range (which clamps). */
static int start_index(gen_t *g, int type, int64_t max_start) {
  int64_t v = rnd_range(g, 0, max_start > 0 ? max_start : 0);
  if (chance(g, 15)) v = chance(g, 50) && kTypes[type].kind == K_S ? -2 : max_start + 3;
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", (long long)v);
  return add_constant(g, type, buf);
}

static int index_type(gen_t *g) {
  return chance(g, 80) ? T_S32 : 11 /* u32 */;
}

static int op_dynamic_slice(gen_t *g) {
  int x = pick(g, any_type, 1);
  gen_shape_t in = *shape_of(g, x);
  if (in.rank + 1 > GEN_MAX_OPERANDS) return -1;
  gen_shape_t r = in;
  int ops[GEN_MAX_OPERANDS];
  ops[0] = x;
  int it = index_type(g);
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, ", dynamic_slice_sizes={");
  for (int i = 0; i < in.rank; i++) {
    r.dims[i] = in.dims[i] ? rnd_range(g, 1, in.dims[i]) : 0;
    ops[i + 1] = start_index(g, it, in.dims[i] - r.dims[i]);
    kiln_strbuf_printf(&b, "%s%lld", i ? "," : "", (long long)r.dims[i]);
  }
  kiln_strbuf_printf(&b, "}");
  random_layout(g, &r);
  return add_node(g, "dynamic-slice", &r, ops, in.rank + 1, strbuf_take(&b), NULL);
}

/* The operands of a dynamic-update-slice: a recent node `in`, an update `u` that fits in it,
 * start indices of type `it` (sometimes out of range: clamped); false when they do not fit
 * an instruction. */
static bool dus_operands(gen_t *g, int *ops, gen_shape_t *in, gen_shape_t *u, int *it) {
  int x = pick(g, any_type, 1);
  *in = *shape_of(g, x);
  if (in->rank + 2 > GEN_MAX_OPERANDS) return false;
  *u = *in;
  for (int i = 0; i < in->rank; i++) u->dims[i] = in->dims[i] ? rnd_range(g, 1, in->dims[i]) : 0;
  random_layout(g, u);
  ops[0] = x;
  ops[1] = node_like(g, u);
  *it = index_type(g);
  for (int i = 0; i < in->rank; i++) ops[i + 2] = start_index(g, *it, in->dims[i] - u->dims[i]);
  return true;
}

static int op_dynamic_update_slice(gen_t *g) {
  int ops[GEN_MAX_OPERANDS], it;
  gen_shape_t in, u;
  if (!dus_operands(g, ops, &in, &u, &it)) return -1;
  gen_shape_t r = in;
  random_layout(g, &r);
  return add_node(g, "dynamic-update-slice", &r, ops, in.rank + 2, NULL, NULL);
}

/* Gather rows along one dimension `d`: indices s32[N,1] (a parameter: in-range fake values),
 * the other dimensions sliced from 0 with random sizes. */
/* A gather of one index dimension: its operands (operand, [n,1] indices), result shape and
 * attributes. */
static bool gather_parts(gen_t *g, int ops[2], gen_shape_t *result, char **attrs) {
  int x = pick(g, any_type, 1);
  gen_shape_t in = *shape_of(g, x);
  if (in.rank >= GEN_MAX_RANK) return false;
  int d = rnd(g, in.rank);
  if (in.dims[d] == 0) return false;
  gen_shape_t is;
  memset(&is, 0, sizeof is);
  is.type = chance(g, 80) ? T_S32 : 6; /* s64 */
  is.rank = 2;
  is.dims[0] = 1 + rnd(g, 6);
  is.dims[1] = 1;
  default_layout(&is);
  int idx = add_param(g, &is);
  gen_shape_t r;
  memset(&r, 0, sizeof r);
  r.type = in.type;
  r.rank = in.rank;
  r.dims[0] = is.dims[0];
  kiln_strbuf_t b = {0}, sizes = {0}, offs = {0};
  int k = 1;
  for (int i = 0; i < in.rank; i++) {
    int64_t sz = i == d ? 1 : (in.dims[i] ? rnd_range(g, 1, in.dims[i]) : 0);
    kiln_strbuf_printf(&sizes, "%s%lld", i ? "," : "", (long long)sz);
    if (i != d) {
      kiln_strbuf_printf(&offs, "%s%d", k > 1 ? "," : "", k);
      r.dims[k++] = sz;
    }
  }
  kiln_strbuf_printf(&b,
                     ", offset_dims={%s}, collapsed_slice_dims={%d}, start_index_map={%d}, "
                     "index_vector_dim=1, slice_sizes={%s}",
                     kiln_strbuf_cstr(&offs), d, d, kiln_strbuf_cstr(&sizes));
  kiln_strbuf_free(&sizes);
  kiln_strbuf_free(&offs);
  random_layout(g, &r);
  ops[0] = x, ops[1] = idx;
  *result = r;
  *attrs = strbuf_take(&b);
  return true;
}

static int op_gather(gen_t *g) {
  int ops[2];
  gen_shape_t r;
  char *attrs;
  if (!gather_parts(g, ops, &r, &attrs)) return -1;
  return add_node(g, "gather", &r, ops, 2, attrs, NULL);
}

/* What a scatter of one index dimension takes: its operands (operand, s32[n,1] indices,
 * updates), the operand's shape, its result shape, attributes and combiner
 * computation text. */
typedef struct scatter_parts {
  int ops[3];
  gen_shape_t in, r;
  char *attrs, *comps;
} scatter_parts_t;

static bool scatter_parts(gen_t *g, scatter_parts_t *sp) {
  int x = pick(g, numeric_type, 1);
  gen_shape_t in = *shape_of(g, x);
  if (in.rank >= GEN_MAX_RANK) return false;
  int d = rnd(g, in.rank);
  if (in.dims[d] == 0) return false;
  gen_shape_t is;
  memset(&is, 0, sizeof is);
  is.type = T_S32;
  is.rank = 2;
  is.dims[0] = 1 + rnd(g, 5);
  is.dims[1] = 1;
  default_layout(&is);
  int idx = add_param(g, &is);
  gen_shape_t us;
  memset(&us, 0, sizeof us);
  us.type = in.type;
  us.rank = in.rank;
  us.dims[0] = is.dims[0];
  kiln_strbuf_t wins = {0};
  int k = 1;
  for (int i = 0; i < in.rank; i++)
    if (i != d) {
      kiln_strbuf_printf(&wins, "%s%d", k > 1 ? "," : "", k);
      us.dims[k++] = in.dims[i] ? rnd_range(g, 1, in.dims[i]) : 0;
    }
  random_layout(g, &us);
  int upd = node_like(g, &us);
  const char *comb = kTypes[in.type].kind == K_PRED ? "or" : (chance(g, 70) ? "add" : "maximum");
  if (kTypes[in.type].kind == K_C) comb = "add";
  if (kTypes[in.type].kind == K_F && kTypes[in.type].bits < 32)
    comb = "maximum"; /* see random_reducer */
  int id = g->p->num_nodes;
  char name[48];
  snprintf(name, sizeof name, "scatter_comb_%d", id);
  kiln_strbuf_t c = {0};
  binary_comp(&c, name, in.type, comb);
  char *attrs = xprintf(
      ", update_window_dims={%s}, inserted_window_dims={%d}, "
      "scatter_dims_to_operand_dims={%d}, index_vector_dim=1, to_apply=%s",
      kiln_strbuf_cstr(&wins), d, d, name);
  kiln_strbuf_free(&wins);
  /* scatter-add rows along dimension `d` (duplicates combine; add commutes) */
  sp->r = in;
  random_layout(g, &sp->r);
  sp->ops[0] = x, sp->ops[1] = idx, sp->ops[2] = upd;
  sp->in = in;
  sp->attrs = attrs;
  sp->comps = strbuf_take(&c);
  return true;
}

static int op_scatter(gen_t *g) {
  scatter_parts_t sp;
  if (!scatter_parts(g, &sp)) return -1;
  return add_node(g, "scatter", &sp.r, sp.ops, 3, sp.attrs, sp.comps);
}

/* The dimensions a reduce of `in` takes: each with probability 1/2, the last when no other
 * is. `r` gets the shape of the rest (no layout), `dims` their list as text, `kept` (may be
 * NULL) the kept dimensions in order; returns how many values each result element combines. */
static int64_t reduce_dims(gen_t *g, const gen_shape_t *in, gen_shape_t *r, kiln_strbuf_t *dims,
                           int *kept) {
  memset(r, 0, sizeof *r);
  r->type = in->type;
  int n = 0;
  int64_t terms = 1;
  for (int i = 0; i < in->rank; i++) {
    if (chance(g, 50) || (i == in->rank - 1 && n == 0)) {
      terms *= in->dims[i];
      kiln_strbuf_printf(dims, "%s%d", n++ ? "," : "", i);
    } else {
      if (kept) kept[r->rank] = i;
      r->dims[r->rank++] = in->dims[i];
    }
  }
  return terms;
}

static int op_reduce(gen_t *g) {
  int x = pick(g, any_type, 1);
  gen_shape_t in = *shape_of(g, x);
  if (!kTypes[in.type].arith) return -1;
  gen_shape_t r;
  kiln_strbuf_t dims = {0};
  int64_t terms = reduce_dims(g, &in, &r, &dims, NULL);
  gen_shape_t sc = scalar_of(in.type);
  int init = add_param(g, &sc); /* fake arguments give it the reducer's identity */
  const char *red = random_reducer(g, x, terms);
  char name[48];
  snprintf(name, sizeof name, "reducer_%d", g->p->num_nodes);
  kiln_strbuf_t c = {0};
  binary_comp(&c, name, in.type, red);
  char *attrs = xprintf(", dimensions={%s}, to_apply=%s", kiln_strbuf_cstr(&dims), name);
  kiln_strbuf_free(&dims);
  random_layout(g, &r);
  int ops[2] = {x, init};
  return add_node(g, "reduce", &r, ops, 2, attrs, strbuf_take(&c));
}

/* Types jnp.argmax / argmin are drawn on: floats of 16 bits and more (they have
 * infinities) and integers of 8 bits and more. */
static bool argmax_type(int t) {
  const int k = kTypes[t].kind, bits = kTypes[t].bits;
  return kTypes[t].arith && ((k == K_F && bits >= 16) || ((k == K_S || k == K_U) && bits >= 8));
}

/* The identity of a max (or, `min`, of a min) of argmax_type t as HLO text. */
static const char *extreme_text(int t, bool min) {
  static const char *kS[] = {"-128", "-32768", "-2147483648", "-9223372036854775808"};
  static const char *kSMax[] = {"127", "32767", "2147483647", "9223372036854775807"};
  static const char *kUMax[] = {"255", "65535", "4294967295", "18446744073709551615"};
  const int bits = kTypes[t].bits, k = bits == 8 ? 0 : bits == 16 ? 1 : bits == 32 ? 2 : 3;
  switch (kTypes[t].kind) {
    case K_F:
      return min ? "inf" : "-inf";
    case K_S:
      return min ? kSMax[k] : kS[k];
    default:
      return min ? kUMax[k] : "0";
  }
}

/* jnp.argmax / argmin as JAX lowers them: a variadic reduce of the operand and an s32 iota
 * along one dimension whose reducer takes the greater (lesser) value, a NaN first, and of
 * equal values the lower index; the result is the indices or, in 30% of integer ones, the
 * values. A float operand's NaNs become 0 first: two NaNs keep whichever comes first, which
 * depends on the order the reduction combines them in. */
static int op_argmax(gen_t *g) {
  int x = pick(g, argmax_type, 1);
  gen_shape_t in = *shape_of(g, x);
  if (!argmax_type(in.type)) return -1;
  const int t = in.type, d = rnd(g, in.rank), id = g->p->num_nodes;
  const bool min = chance(g, 40);
  const char *tn = kTypes[t].name;
  if (kTypes[t].kind == K_F) {
    gen_shape_t p = in;
    p.type = T_PRED;
    int ne_ops[2] = {x, x};
    int nan = add_node(g, "compare", &p, ne_ops, 2, xprintf(", direction=NE"), NULL);
    int zero = add_constant(g, t, "0");
    int zb = add_node(g, "broadcast", &in, &zero, 1, xprintf(", dimensions={}"), NULL);
    int sel[3] = {nan, zb, x};
    x = add_node(g, "select", &in, sel, 3, NULL, NULL);
  }
  gen_shape_t io = in;
  io.type = T_S32;
  default_layout(&io);
  int iota = add_node(g, "iota", &io, NULL, 0, xprintf(", iota_dimension=%d", d), NULL);
  gen_shape_t r = in, ri;
  r.rank = in.rank - 1;
  for (int i = d; i < r.rank; i++) r.dims[i] = in.dims[i + 1];
  default_layout(&r);
  ri = r;
  ri.type = T_S32;
  kiln_strbuf_t c = {0};
  kiln_strbuf_printf(&c,
                     "argmax_%d {\n  a = %s[] parameter(0)\n  ai = s32[] parameter(1)\n"
                     "  b = %s[] parameter(2)\n  bi = s32[] parameter(3)\n"
                     "  better = pred[] compare(a, b), direction=%s\n"
                     "  nan = pred[] compare(a, a), direction=NE\n"
                     "  pick = pred[] or(better, nan)\n"
                     "  eq = pred[] compare(a, b), direction=EQ\n"
                     "  lower = pred[] compare(ai, bi), direction=LT\n"
                     "  tie = pred[] and(eq, lower)\n  pick_i = pred[] or(pick, tie)\n"
                     "  v = %s[] select(pick, a, b)\n  i = s32[] select(pick_i, ai, bi)\n"
                     "  ROOT r = (%s[], s32[]) tuple(v, i)\n}\n\n",
                     id, tn, tn, min ? "LT" : "GT", tn, tn);
  int init = add_constant(g, t, extreme_text(t, min));
  int izero = add_constant(g, T_S32, "0");
  int ops[4] = {x, iota, init, izero};
  const gen_shape_t *rs[2] = {&r, &ri};
  char *text = tuple_text(rs, 2);
  int red =
      add_tuple_node(g, "reduce", text, ops, 4,
                     xprintf(", dimensions={%d}, to_apply=argmax_%d", d, id), strbuf_take(&c));
  kiln_free(text);
  /* float values only through their indices: of -0 and +0, equal, the reducer keeps the
   * accumulator's, so the sign depends on the combine order (and 1/x on the sign) */
  const bool values = chance(g, 30) && kTypes[t].kind != K_F;
  return add_node(g, "get-tuple-element", values ? &r : &ri, &red, 1,
                  xprintf(", index=%d", values ? 0 : 1), NULL);
}

/* A reduce-window of a recent node by a random reducer (windows up to 4, strides 1-2,
 * padding 0-1): its operands (operand, init parameter), result shape, attributes and
 * reducer computation text. */
static bool reduce_window_parts(gen_t *g, int ops[2], gen_shape_t *result, char **attrs,
                                char **comps) {
  int x = pick(g, any_type, 1);
  gen_shape_t in = *shape_of(g, x);
  if (!kTypes[in.type].arith) return false;
  gen_shape_t r = in;
  kiln_strbuf_t sz = {0}, st = {0}, pd = {0};
  int64_t window_terms = 1;
  for (int i = 0; i < in.rank; i++) {
    int64_t d = in.dims[i];
    int64_t lo = rnd(g, 2), hi = rnd(g, 2);
    int64_t padded = d + lo + hi;
    int64_t w = padded > 0 ? rnd_range(g, 1, padded < 4 ? padded : 4) : 1;
    window_terms *= w;
    int64_t s = 1 + rnd(g, 2);
    if (padded < w) lo = hi = 0, w = 1, padded = d;
    r.dims[i] = padded >= w ? (padded - w) / s + 1 : 0;
    kiln_strbuf_printf(&sz, "%s%lld", i ? "x" : "", (long long)w);
    kiln_strbuf_printf(&st, "%s%lld", i ? "x" : "", (long long)s);
    kiln_strbuf_printf(&pd, "%s%lld_%lld", i ? "x" : "", (long long)lo, (long long)hi);
  }
  gen_shape_t sc = scalar_of(in.type);
  int init = add_param(g, &sc);
  const char *red = random_reducer(g, x, window_terms);
  char name[48];
  snprintf(name, sizeof name, "window_reducer_%d", g->p->num_nodes);
  kiln_strbuf_t c = {0};
  binary_comp(&c, name, in.type, red);
  *attrs = xprintf(", window={size=%s stride=%s pad=%s}, to_apply=%s", kiln_strbuf_cstr(&sz),
                   kiln_strbuf_cstr(&st), kiln_strbuf_cstr(&pd), name);
  kiln_strbuf_free(&sz);
  kiln_strbuf_free(&st);
  kiln_strbuf_free(&pd);
  random_layout(g, &r);
  ops[0] = x, ops[1] = init;
  *result = r;
  *comps = strbuf_take(&c);
  return true;
}

static int op_reduce_window(gen_t *g) {
  int ops[2];
  gen_shape_t r;
  char *attrs, *comps;
  if (!reduce_window_parts(g, ops, &r, &attrs, &comps)) return -1;
  return add_node(g, "reduce-window", &r, ops, 2, attrs, comps);
}

/* `op`(a, b) of shape s. */
static int add_binary(gen_t *g, const char *op, const gen_shape_t *s, int a, int b) {
  int ops[2] = {a, b};
  return add_node(g, op, s, ops, 2, NULL, NULL);
}

/* A scalar constant `value` of s's type broadcast to s. */
static int add_splat(gen_t *g, const gen_shape_t *s, const char *value) {
  int c = add_constant(g, s->type, value);
  return add_node(g, "broadcast", s, &c, 1, xprintf(", dimensions={}"), NULL);
}

/* After the matrix product `dot` (shape s, [M, N]): a bias vector added along its rows, then
 * (`act`) nothing, a ReLU, or JAX's tanh GELU, x * (0.5 * (1 + tanh(sqrt(2/pi) * (x +
 * 0.044715 * x * (x * x))))): the chain kiln's gemm_epilogue pass folds into the gemm (the
 * evaluator runs the plain ops, rounding each). */
static int gemm_epilogue_chain(gen_t *g, int dot, const gen_shape_t *s, int act) {
  gen_shape_t v;
  memset(&v, 0, sizeof v);
  v.type = s->type;
  v.dims[v.rank++] = s->dims[1];
  int bias = node_like(g, &v);
  int bias_rows = add_node(g, "broadcast", s, &bias, 1, xprintf(", dimensions={1}"), NULL);
  int x = add_binary(g, "add", s, dot, bias_rows);
  if (act == 0) return x;
  if (act == 1) return add_binary(g, "maximum", s, x, add_splat(g, s, "0"));
  int cube = add_binary(g, "multiply", s, x, add_binary(g, "multiply", s, x, x));
  int inner =
      add_binary(g, "add", s, x, add_binary(g, "multiply", s, add_splat(g, s, "0.044715"), cube));
  int scaled = add_binary(g, "multiply", s, add_splat(g, s, "0.7978845608"), inner);
  int tanh = add_node(g, "tanh", s, &scaled, 1, NULL, NULL);
  int cdf = add_binary(g, "multiply", s, add_splat(g, s, "0.5"),
                       add_binary(g, "add", s, add_splat(g, s, "1"), tanh));
  return add_binary(g, "multiply", s, x, cdf);
}

/* dot: lhs [B..., M, K] x rhs [B..., K, N] (batch dimensions optional, M/N optional). */
static int op_dot(gen_t *g) {
  int lhs = pick(g, dot_type, 1);
  gen_shape_t l = *shape_of(g, lhs);
  if (l.rank > 3) return -1;
  int nb = l.rank == 3 ? 1 : 0; /* rank 3: [B, M, K]; rank 2: [M, K]; rank 1: [K] */
  int64_t k = l.dims[l.rank - 1];
  gen_shape_t rs;
  memset(&rs, 0, sizeof rs);
  rs.type = l.type;
  if (nb) rs.dims[rs.rank++] = l.dims[0];
  rs.dims[rs.rank++] = k;
  bool has_n = chance(g, 80);
  if (has_n) rs.dims[rs.rank++] = rnd_dim(g);
  random_layout(g, &rs);
  int rhs = node_like(g, &rs);
  gen_shape_t r;
  memset(&r, 0, sizeof r);
  r.type = l.type;
  for (int i = 0; i < l.rank - 1; i++) r.dims[r.rank++] = l.dims[i];
  if (has_n) r.dims[r.rank++] = rs.dims[rs.rank - 1];
  if (num_elements(&r) > g->max_elements) return -1;
  random_layout(g, &r);
  char *attrs = nb ? xprintf(
                         ", lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
                         "rhs_contracting_dims={1}")
                   : xprintf(", lhs_contracting_dims={%d}, rhs_contracting_dims={0}", l.rank - 1);
  int ops[2] = {lhs, rhs};
  int id = g->p->num_nodes;
  if (l.rank == 2 && has_n && kTypes[l.type].kind == K_F && id % 3 == 0) {
    /* Every third float matrix product as XLA:GPU's optimized dumps hold them: a cuBLAS gemm
     * custom call (alpha a power of two, so exact in every float type; a ReLU epilogue every
     * other time; every fourth adds beta = 1 times a C of ones, a constant's broadcast),
     * chosen by node id so no draw changes: kiln rewrites it into a dot
     * (custom_call_rewrite), the evaluator computes it from its config. */
    static const char *const kAlpha[] = {"1", "2", "0.5"};
    bool with_c = (id / 3) % 4 == 3;
    int nops = 2, cops[3] = {lhs, rhs, 0};
    if (with_c) {
      int one = add_constant(g, r.type, "1");
      cops[nops++] = add_node(g, "broadcast", &r, &one, 1, xprintf(", dimensions={}"), NULL);
      id = g->p->num_nodes;
    }
    kiln_free(attrs);
    attrs = xprintf(
        ", custom_call_target=\"__cublas$gemm\", backend_config=\"{\\\"alpha_real\\\":%s,"
        "\\\"alpha_imag\\\":0,\\\"beta\\\":%d,\\\"dot_dimension_numbers\\\":{"
        "\\\"lhs_contracting_dimensions\\\":[\\\"1\\\"],"
        "\\\"rhs_contracting_dimensions\\\":[\\\"0\\\"],"
        "\\\"lhs_batch_dimensions\\\":[],\\\"rhs_batch_dimensions\\\":[]},"
        "\\\"epilogue\\\":\\\"%s\\\"}\"",
        kAlpha[(id / 3) % 3], with_c, (id / 3) % 2 ? "RELU" : "DEFAULT");
    return add_node(g, "custom-call", &r, cops, nops, attrs, NULL);
  }
  int dot = add_node(g, "dot", &r, ops, 2, attrs, NULL);
  if (l.rank == 2 && has_n && kTypes[l.type].kind == K_F && kTypes[l.type].bits >= 16 &&
      id % 3 != 0)
    return gemm_epilogue_chain(g, dot, &r, id % 3 == 2 ? 2 : (id / 3) % 2);
  return dot;
}

/* 1-D or 2-D convolution, dim_labels b0f_0io->b0f (b01f_01io->b01f), with window strides,
 * padding and dilations. */
static int op_convolution(gen_t *g) {
  int t = g->main_type;
  if (!float_type(t) || kTypes[t].bits < 16) t = T_F32;
  int sp = 1 + rnd(g, 2);
  gen_shape_t l;
  memset(&l, 0, sizeof l);
  l.type = t;
  l.rank = sp + 2;
  l.dims[0] = 1 + rnd(g, 2);
  for (int i = 0; i < sp; i++) l.dims[1 + i] = 1 + rnd(g, 9);
  l.dims[sp + 1] = 1 + rnd(g, 4);
  default_layout(&l);
  int lhs = node_like(g, &l);
  gen_shape_t k;
  memset(&k, 0, sizeof k);
  k.type = t;
  k.rank = sp + 2;
  kiln_strbuf_t w = {0}, sz = {0}, st = {0}, pd = {0}, ld = {0};
  gen_shape_t r = l;
  for (int i = 0; i < sp; i++) {
    int64_t in = l.dims[1 + i];
    int64_t ks = 1 + rnd(g, 3), stride = 1 + rnd(g, 2), lo = rnd(g, 2), hi = rnd(g, 2);
    int64_t lhs_dil = chance(g, 20) ? 2 : 1;
    int64_t din = in ? (in - 1) * lhs_dil + 1 : 0;
    int64_t padded = din + lo + hi;
    if (padded < ks) ks = padded > 0 ? padded : 1;
    if (padded < ks) return -1;
    k.dims[i] = ks;
    r.dims[1 + i] = (padded - ks) / stride + 1;
    kiln_strbuf_printf(&sz, "%s%lld", i ? "x" : "", (long long)ks);
    kiln_strbuf_printf(&st, "%s%lld", i ? "x" : "", (long long)stride);
    kiln_strbuf_printf(&pd, "%s%lld_%lld", i ? "x" : "", (long long)lo, (long long)hi);
    kiln_strbuf_printf(&ld, "%s%lld", i ? "x" : "", (long long)lhs_dil);
  }
  k.dims[sp] = l.dims[sp + 1];
  k.dims[sp + 1] = 1 + rnd(g, 4);
  r.dims[sp + 1] = k.dims[sp + 1];
  random_layout(g, &k);
  int rhs = node_like(g, &k);
  kiln_strbuf_printf(&w, ", window={size=%s stride=%s pad=%s lhs_dilate=%s}, dim_labels=%s",
                     kiln_strbuf_cstr(&sz), kiln_strbuf_cstr(&st), kiln_strbuf_cstr(&pd),
                     kiln_strbuf_cstr(&ld), sp == 1 ? "b0f_0io->b0f" : "b01f_01io->b01f");
  kiln_strbuf_free(&sz);
  kiln_strbuf_free(&st);
  kiln_strbuf_free(&pd);
  kiln_strbuf_free(&ld);
  random_layout(g, &r);
  int ops[2] = {lhs, rhs};
  return add_node(g, "convolution", &r, ops, 2, strbuf_take(&w), NULL);
}

static int op_sort(gen_t *g) {
  int x = pick(g, real_type, 1);
  if (chance(g, 20)) {
    /* Long rows (65 to 1,025 elements; other shapes stay under 34), where the host sorts by
     * the key's bytes or merges (sort_emitter.h): a fresh parameter of x's type. */
    static const int64_t kLong[] = {65, 129, 257, 513, 1025};
    gen_shape_t ls;
    memset(&ls, 0, sizeof ls);
    ls.type = shape_of(g, x)->type;
    ls.rank = 1 + rnd(g, 2);
    ls.dims[ls.rank - 1] = kLong[rnd(g, 5)];
    if (ls.rank == 2) ls.dims[0] = 1 + rnd(g, 3);
    for (int i = 0; i < ls.rank; i++)
      while (num_elements(&ls) > g->max_elements && ls.dims[i] > 1) ls.dims[i] /= 2;
    default_layout(&ls);
    x = add_param(g, &ls);
  }
  gen_shape_t in = *shape_of(g, x);
  int d = rnd(g, in.rank);
  bool pair = chance(g, 40);
  const char *t = kTypes[in.type].name;
  char name[48];
  snprintf(name, sizeof name, "comparator_%d", g->p->num_nodes);
  const char *dir = chance(g, 50) ? "LT" : "GT";
  const char *type = is_float(in.type) ? ", type=TOTALORDER" : "";
  kiln_strbuf_t c = {0};
  int ops[2] = {x, -1};
  if (pair) {
    gen_shape_t vs = in;
    vs.type = random_type(g);
    random_layout(g, &vs);
    ops[1] = node_like(g, &vs);
    const char *vt = kTypes[vs.type].name;
    /* A third of the pairs with a real second operand sort lexicographically by both, as
     * JAX's num_keys=2 comparator does (the host's radix takes such keys). */
    bool lex = is_numeric(vs.type) && kTypes[vs.type].kind != K_C && chance(g, 33);
    const char *vtype = is_float(vs.type) ? ", type=TOTALORDER" : "";
    kiln_strbuf_printf(&c,
                       "%s {\n  a = %s[] parameter(0)\n  b = %s[] parameter(1)\n  c = %s[] "
                       "parameter(2)\n  d = %s[] parameter(3)\n",
                       name, t, t, vt, vt);
    if (lex)
      kiln_strbuf_printf(&c,
                         "  lt = pred[] compare(a, b), direction=%s%s\n"
                         "  eq = pred[] compare(a, b), direction=EQ%s\n"
                         "  lt2 = pred[] compare(c, d), direction=LT%s\n"
                         "  tie = pred[] and(eq, lt2)\n  ROOT r = pred[] or(lt, tie)\n}\n\n",
                         dir, type, type, vtype);
    else
      kiln_strbuf_printf(&c, "  ROOT r = pred[] compare(a, b), direction=%s%s\n}\n\n", dir, type);
    const gen_shape_t *parts[2] = {&in, &vs};
    char *sh = tuple_text(parts, 2);
    int s = add_tuple_node(g, "sort", sh, ops, 2,
                           xprintf(", dimensions={%d}, is_stable=true, to_apply=%s", d, name),
                           strbuf_take(&c));
    kiln_free(sh);
    int which = rnd(g, 2);
    return add_node(g, "get-tuple-element", which ? &vs : &in, &s, 1, xprintf(", index=%d", which),
                    NULL);
  }
  kiln_strbuf_printf(&c,
                     "%s {\n  a = %s[] parameter(0)\n  b = %s[] parameter(1)\n"
                     "  ROOT r = pred[] compare(a, b), direction=%s%s\n}\n\n",
                     name, t, t, dir, type);
  gen_shape_t r = in;
  return add_node(g, "sort", &r, ops, 1, xprintf(", dimensions={%d}, to_apply=%s", d, name),
                  strbuf_take(&c));
}

/* Text of `[ROOT ]out = shape step(in)` in a computation (two-space indented), a periodic
 * step's operand clamped to [-4, 4] (the bounds exact in every float type that takes it). No
 * random choice: the programs of every seed keep their shapes and ops. */
static void step_text(kiln_strbuf_t *c, bool root, const char *out, const char *shape, int type,
                      const char *step, const char *in) {
  if (periodic(step)) {
    const char *t = kTypes[type].name;
    kiln_strbuf_printf(c,
                       "  %s_lo = %s[] constant(-4)\n  %s_hi = %s[] constant(4)\n"
                       "  %s_in = %s clamp(%s_lo, %s, %s_hi)\n",
                       out, t, out, t, out, shape, out, in, out);
    kiln_strbuf_printf(c, "  %s%s = %s %s(%s_in)\n", root ? "ROOT " : "", out, shape, step, out);
    return;
  }
  kiln_strbuf_printf(c, "  %s%s = %s %s(%s)\n", root ? "ROOT " : "", out, shape, step, in);
}

/* A unary step for loop bodies and branches: keeps the shape, stays finite for a few steps. */
static const char *step_op(gen_t *g, int type) {
  switch (kTypes[type].kind) {
    case K_PRED:
      return "not";
    case K_F: {
      static const char *k[] = {"negate", "sine", "tanh", "abs", "cosine"};
      const char *op = k[rnd(g, 5)];
      return coarse_float(type) && periodic(op) ? "tanh" : op;
    }
    default:
      return chance(g, 50) ? "negate" : "not";
  }
}

/* step_op for any type: a complex value is negated (no draw). */
static const char *any_step_op(gen_t *g, int type) {
  return kTypes[type].kind == K_C ? "negate" : step_op(g, type);
}

/* while: (s32 counter, value) with a trip count of 0..4; the body adds the value to itself
 * (or applies a unary step) and counts. In every third loop (by node id: no draw, so every
 * seed keeps its program's shapes and ops) the step is a kLoop fusion inside the body, as
 * XLA's optimized dumps hold loops; in another third the state carries the value's initial
 * copy too, passed through unchanged, and each step adds its square (pred: ors its and),
 * work while_loop_invariant_code_motion moves before the loop. The first two thirds unroll
 * (while_loop_unroll); in the last the bound is a third state element the body renews as
 * max(bound, counter), which no pass sees through, so those stay loops the runtime runs. */
static int op_while(gen_t *g) {
  int x = pick(g, any_type, 0);
  gen_shape_t in = *shape_of(g, x);
  if (!kTypes[in.type].arith || kTypes[in.type].kind == K_C) return -1;
  int id = g->p->num_nodes;
  kiln_strbuf_t vs = {0};
  shape_text(&vs, &in);
  const char *v = kiln_strbuf_cstr(&vs);
  const bool invariant = id % 3 == 1, hidden_bound = id % 3 == 2;
  const bool is_pred = kTypes[in.type].kind == K_PRED;
  char tuple_shape[512];
  if (invariant)
    snprintf(tuple_shape, sizeof tuple_shape, "(s32[], %s, %s)", v, v);
  else if (hidden_bound)
    snprintf(tuple_shape, sizeof tuple_shape, "(s32[], %s, s32[])", v);
  else
    snprintf(tuple_shape, sizeof tuple_shape, "(s32[], %s)", v);
  int trips = rnd(g, 5);
  bool unary = kTypes[in.type].kind == K_PRED || kTypes[in.type].kind == K_U || chance(g, 50);
  const char *step = unary ? step_op(g, in.type) : "add";
  bool fused = id % 3 == 0;
  kiln_strbuf_t c = {0};
  if (fused) {
    kiln_strbuf_printf(&c, "while_body_%d_fused {\n  a = %s parameter(0)\n", id, v);
    step_text(&c, true, "r", v, in.type, step, unary ? "a" : "a, a");
    kiln_strbuf_append(&c, "}\n\n");
  }
  if (hidden_bound)
    kiln_strbuf_printf(
        &c,
        "while_cond_%d {\n  p = %s parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
        "  n = s32[] get-tuple-element(p), index=2\n"
        "  ROOT lt = pred[] compare(i, n), direction=LT\n}\n\n",
        id, tuple_shape);
  else
    kiln_strbuf_printf(
        &c,
        "while_cond_%d {\n  p = %s parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
        "  n = s32[] constant(%d)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n\n",
        id, tuple_shape, trips);
  kiln_strbuf_printf(
      &c,
      "while_body_%d {\n  p = %s parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
      "  one = s32[] constant(1)\n  j = s32[] add(i, one)\n"
      "  v = %s get-tuple-element(p), index=1\n",
      id, tuple_shape, v);
  if (fused)
    kiln_strbuf_printf(&c, "  w = %s fusion(v), kind=kLoop, calls=while_body_%d_fused\n", v, id);
  else
    step_text(&c, false, "w", v, in.type, step, unary ? "v" : "v, v");
  if (invariant)
    kiln_strbuf_printf(&c,
                       "  k = %s get-tuple-element(p), index=2\n  kk = %s %s(k, k)\n"
                       "  wk = %s %s(w, kk)\n  ROOT t = %s tuple(j, wk, k)\n}\n\n",
                       v, v, is_pred ? "and" : "multiply", v, is_pred ? "or" : "add", tuple_shape);
  else if (hidden_bound)
    kiln_strbuf_printf(&c,
                       "  n = s32[] get-tuple-element(p), index=2\n  n2 = s32[] maximum(n, i)\n"
                       "  ROOT t = %s tuple(j, w, n2)\n}\n\n",
                       tuple_shape);
  else
    kiln_strbuf_printf(&c, "  ROOT t = %s tuple(j, w)\n}\n\n", tuple_shape);
  int zero = add_constant(g, T_S32, "0");
  int ops[3] = {zero, x, x};
  if (hidden_bound) {
    char tc[16];
    snprintf(tc, sizeof tc, "%d", trips);
    ops[2] = add_constant(g, T_S32, tc);
  }
  int t =
      add_tuple_node(g, "tuple", tuple_shape, ops, invariant || hidden_bound ? 3 : 2, NULL, NULL);
  int w = add_tuple_node(g, "while", tuple_shape, &t, 1,
                         xprintf(", condition=while_cond_%d, body=while_body_%d", id, id),
                         strbuf_take(&c));
  kiln_strbuf_free(&vs);
  return add_node(g, "get-tuple-element", &in, &w, 1, xprintf(", index=1"), NULL);
}

/* conditional on an s32 branch index (a parameter: out of range picks the last branch) or a
 * pred, each branch a different unary step of the operand. As XLA's optimized dumps hold
 * them (JAX's cond and switch), sometimes each step is a loop fusion inside its branch, and
 * sometimes the branches take and give one-element tuples. */
static int op_conditional(gen_t *g) {
  int x = pick(g, any_type, 0);
  gen_shape_t in = *shape_of(g, x);
  if (!kTypes[in.type].arith || kTypes[in.type].kind == K_C) return -1;
  int id = g->p->num_nodes;
  bool by_pred = chance(g, 30);
  int branches = by_pred ? 2 : 2 + rnd(g, 2);
  const bool fused = chance(g, 40), tupled = chance(g, 40);
  kiln_strbuf_t vs = {0};
  shape_text(&vs, &in);
  const char *v = kiln_strbuf_cstr(&vs);
  char tv[256];
  snprintf(tv, sizeof tv, "(%s)", v);
  kiln_strbuf_t c = {0}, names = {0};
  for (int i = 0; i < branches; i++) {
    const char *op = i == 0 ? "copy" : step_op(g, in.type);
    if (fused) {
      kiln_strbuf_printf(&c, "branch_%d_%d_fused {\n  p = %s parameter(0)\n", id, i, v);
      step_text(&c, true, "r", v, in.type, op, "p");
      kiln_strbuf_append(&c, "}\n\n");
    }
    kiln_strbuf_printf(&c, "branch_%d_%d {\n  p = %s parameter(0)\n", id, i, tupled ? tv : v);
    const char *arg = "p";
    if (tupled) {
      kiln_strbuf_printf(&c, "  e = %s get-tuple-element(p), index=0\n", v);
      arg = "e";
    }
    if (fused)
      kiln_strbuf_printf(&c, "  %sr = %s fusion(%s), kind=kLoop, calls=branch_%d_%d_fused\n",
                         tupled ? "" : "ROOT ", v, arg, id, i);
    else
      step_text(&c, !tupled, "r", v, in.type, op, arg);
    if (tupled) kiln_strbuf_printf(&c, "  ROOT t = %s tuple(r)\n", tv);
    kiln_strbuf_append(&c, "}\n\n");
    kiln_strbuf_printf(&names, "%sbranch_%d_%d", i ? ", " : "", id, i);
  }
  gen_shape_t sel = scalar_of(by_pred ? T_PRED : T_S32);
  int idx = add_param(g, &sel);
  int arg = tupled ? add_tuple_node(g, "tuple", tv, &x, 1, NULL, NULL) : x;
  int ops[4] = {idx, arg, arg, arg};
  char *attrs =
      by_pred ? xprintf(", true_computation=branch_%d_0, false_computation=branch_%d_1", id, id)
              : xprintf(", branch_computations={%s}", kiln_strbuf_cstr(&names));
  kiln_strbuf_free(&names);
  char *comps = strbuf_take(&c);
  int r = tupled ? add_tuple_node(g, "conditional", tv, ops, 1 + branches, attrs, comps)
                 : add_node(g, "conditional", &in, ops, 1 + branches, attrs, comps);
  kiln_strbuf_free(&vs);
  return tupled ? add_node(g, "get-tuple-element", &in, &r, 1, xprintf(", index=0"), NULL) : r;
}

static int op_tuple(gen_t *g) {
  int a = pick(g, any_type, 0), b = pick(g, any_type, 0);
  kiln_strbuf_t sh = {0};
  kiln_strbuf_printf(&sh, "(");
  shape_text(&sh, shape_of(g, a));
  kiln_strbuf_printf(&sh, ", ");
  shape_text(&sh, shape_of(g, b));
  kiln_strbuf_printf(&sh, ")");
  int ops[2] = {a, b};
  int t = add_tuple_node(g, "tuple", kiln_strbuf_cstr(&sh), ops, 2, NULL, NULL);
  kiln_strbuf_free(&sh);
  int which = rnd(g, 2);
  gen_shape_t r = *shape_of(g, ops[which]);
  return add_node(g, "get-tuple-element", &r, &t, 1, xprintf(", index=%d", which), NULL);
}

/* ---- the rest of the opcode table ---- */

#define T_U32 11
#define T_U64 12
#define T_F64 16
#define T_C64 26
#define T_C128 27

static bool wide_float_type(int t) {
  return t == T_F32 || t == T_F64;
}

/* `n` shapes as a tuple shape's text. */

/* Element `which` of tuple node `t`, whose elements have shapes `s`. */
static int tuple_element(gen_t *g, int t, const gen_shape_t *s, int which) {
  return add_node(g, "get-tuple-element", s, &t, 1, xprintf(", index=%d", which), NULL);
}

/* A tuple-shaped operation `op` with results `s[0..n)`; returns one element of it. */
static int tuple_op(gen_t *g, const char *op, const gen_shape_t *const *s, int n,
                    const int *operands, int num_operands, char *attrs, char *comps) {
  char *text = tuple_text(s, n);
  int t = add_tuple_node(g, op, text, operands, num_operands, attrs, comps);
  kiln_free(text);
  int which = rnd(g, n);
  gen_shape_t r = *s[which];
  return tuple_element(g, t, &r, which);
}

/* A scalar constant `value` of `type` broadcast to `s`'s dimensions (default layout). */
static int splat(gen_t *g, int type, const char *value, const gen_shape_t *s) {
  int c = add_constant(g, type, value);
  gen_shape_t r = *s;
  r.type = type;
  default_layout(&r);
  return add_node(g, "broadcast", &r, &c, 1, xprintf(", dimensions={}"), NULL);
}

/* `d` times the identity of the last two dimensions of `s` (its type), added to node `x`:
 * a matrix whose diagonal dominates (cholesky, triangular-solve). */
static int add_diagonal(gen_t *g, int x, const gen_shape_t *s, int64_t d) {
  gen_shape_t is = *s;
  is.type = T_S32;
  default_layout(&is);
  int rows = add_node(g, "iota", &is, NULL, 0, xprintf(", iota_dimension=%d", s->rank - 2), NULL);
  int cols = add_node(g, "iota", &is, NULL, 0, xprintf(", iota_dimension=%d", s->rank - 1), NULL);
  gen_shape_t ps = is;
  ps.type = T_PRED;
  int eq_ops[2] = {rows, cols};
  int eq = add_node(g, "compare", &ps, eq_ops, 2, xprintf(", direction=EQ"), NULL);
  char value[32];
  snprintf(value, sizeof value, "%lld", (long long)d);
  int sel_ops[3] = {eq, splat(g, s->type, value, s), splat(g, s->type, "0", s)};
  gen_shape_t r = *s;
  default_layout(&r);
  int diag = add_node(g, "select", &r, sel_ops, 3, NULL, NULL);
  int add_ops[2] = {x, diag};
  random_layout(g, &r);
  return add_node(g, "add", &r, add_ops, 2, NULL, NULL);
}

/* erf, tan, the hyperbolic and inverse trigonometric functions of a real float, the operand
 * clamped into the function's domain (asin, acos, atanh: [-1/2, 1/2]; acosh: [2, 4], away
 * from its infinite slope at 1) or to where its slope stays small (tan: [-1, 1]; sinh, cosh:
 * [-4, 4]); the bounds are exact in every float type. The results compare under the module
 * tolerance of their type (compare.h), as for every other transcendental function. */
static int op_math(gen_t *g) {
  static const struct {
    const char *op, *lo, *hi;
  } kMath[] = {{"erf", NULL, NULL},   {"tan", "-1", "1"},      {"sinh", "-4", "4"},
               {"cosh", "-4", "4"},   {"asin", "-0.5", "0.5"}, {"acos", "-0.5", "0.5"},
               {"asinh", NULL, NULL}, {"acosh", "2", "4"},     {"atanh", "-0.5", "0.5"}};
  int x = pick(g, float_type, 0);
  gen_shape_t s = *shape_of(g, x);
  int k = rnd(g, (int)(sizeof kMath / sizeof kMath[0]));
  if (kMath[k].lo) {
    int ops[3] = {add_constant(g, s.type, kMath[k].lo), x, add_constant(g, s.type, kMath[k].hi)};
    random_layout(g, &s);
    x = add_node(g, "clamp", &s, ops, 3, NULL, NULL);
  }
  random_layout(g, &s);
  return add_node(g, kMath[k].op, &s, &x, 1, NULL, NULL);
}

static int op_complex(gen_t *g) {
  int a = pick(g, wide_float_type, 0);
  gen_shape_t s = *shape_of(g, a);
  int ops[2] = {a, node_like(g, &s)};
  s.type = s.type == T_F32 ? T_C64 : T_C128;
  random_layout(g, &s);
  return add_node(g, "complex", &s, ops, 2, NULL, NULL);
}

/* A binary operation the type takes that does not jump (see op_binary). */
static const char *smooth_binary(gen_t *g, int type) {
  switch (kTypes[type].kind) {
    case K_PRED: {
      static const char *k[] = {"and", "or", "xor"};
      return k[rnd(g, 3)];
    }
    case K_S:
    case K_U: {
      static const char *k[] = {"add", "subtract", "multiply", "maximum", "minimum", "xor"};
      return k[rnd(g, 6)];
    }
    case K_F: {
      static const char *k[] = {"add", "subtract", "multiply", "maximum", "minimum"};
      return k[rnd(g, 5)];
    }
    case K_C:
      return chance(g, 50) ? "add" : "multiply";
  }
  return "add";
}

/* The operands of a computation `x = op(a, b); step(x)`: a recent array node of an
 * arithmetic, non-complex type and one like it; false when the type does not fit. */
static bool smooth_operands(gen_t *g, int ops[2], gen_shape_t *s, const char **op,
                            const char **step) {
  ops[0] = pick(g, any_type, 0);
  *s = *shape_of(g, ops[0]);
  if (!kTypes[s->type].arith || kTypes[s->type].kind == K_C) return false;
  gen_shape_t bs = *s;
  random_layout(g, &bs);
  ops[1] = node_like(g, &bs);
  *op = smooth_binary(g, s->type);
  *step = step_op(g, s->type);
  return true;
}

/* map (over every dimension) or call, of a computation `x = op(a, b); ROOT step(x)`. */
static int op_map_or_call(gen_t *g, bool is_map) {
  int ops[2];
  gen_shape_t s;
  const char *op, *step;
  if (!smooth_operands(g, ops, &s, &op, &step)) return -1;
  int t = s.type;
  int id = g->p->num_nodes;
  kiln_strbuf_t c = {0}, vs[3] = {{0}, {0}, {0}};
  gen_shape_t scalar = scalar_of(t);
  for (int i = 0; i < 3; i++)
    shape_text(&vs[i], is_map ? &scalar : i == 1 ? shape_of(g, ops[1]) : &s);
  kiln_strbuf_printf(&c,
                     "%s_%d {\n  a = %s parameter(0)\n  b = %s parameter(1)\n  x = %s %s(a, b)\n",
                     is_map ? "mapped" : "callee", id, kiln_strbuf_cstr(&vs[0]),
                     kiln_strbuf_cstr(&vs[1]), kiln_strbuf_cstr(&vs[2]), op);
  step_text(&c, true, "r", kiln_strbuf_cstr(&vs[2]), t, step, "x");
  kiln_strbuf_append(&c, "}\n\n");
  for (int i = 0; i < 3; i++) kiln_strbuf_free(&vs[i]);
  if (!is_map && id % 2 == 0)
    return add_node(g, "call", &s, ops, 2, xprintf(", to_apply=callee_%d", id), strbuf_take(&c));
  if (!is_map) {
    /* Every other call (by node id: no random draw, so a seed keeps its program's shapes and
     * ops) is an async-start / async-done pair around the callee, as XLA's dumps wrap
     * computations, with an async-update between them every other time. */
    gen_shape_t ctx = scalar_of(T_S32);
    const gen_shape_t *in[2] = {shape_of(g, ops[0]), shape_of(g, ops[1])}, *rest[2] = {&s, &ctx};
    char *args = tuple_text(in, 2), *tail = tuple_text(rest, 2);
    char *t = xprintf("(%s, %s", args, tail + 1); /* ((a, b), result, s32[]) */
    kiln_free(args);
    kiln_free(tail);
    int st = add_tuple_node(g, "async-start", t, ops, 2, xprintf(", calls=callee_%d", id),
                            strbuf_take(&c));
    if (id % 4 == 3) st = add_tuple_node(g, "async-update", t, &st, 1, NULL, NULL);
    kiln_free(t);
    return add_node(g, "async-done", &s, &st, 1, NULL, NULL);
  }
  kiln_strbuf_t dims = {0};
  for (int i = 0; i < s.rank; i++) kiln_strbuf_printf(&dims, "%s%d", i ? "," : "", i);
  char *attrs = xprintf(", dimensions={%s}, to_apply=mapped_%d", kiln_strbuf_cstr(&dims), id);
  kiln_strbuf_free(&dims);
  random_layout(g, &s);
  return add_node(g, "map", &s, ops, 2, attrs, strbuf_take(&c));
}
static int op_map(gen_t *g) {
  return op_map_or_call(g, true);
}
static int op_call(gen_t *g) {
  return op_map_or_call(g, false);
}

/* The start of fused computation `fused_ID`: parameters a (shape text `a`) and b (`b`), then
 * `x = op(a, b)` shaped like a. */
static void fused_head(kiln_strbuf_t *c, int id, const gen_shape_t *outer, kiln_strbuf_t *a,
                       kiln_strbuf_t *b, const char *op) {
  kiln_strbuf_printf(c, "fused_%d {\n", id);
  if (outer) {
    kiln_strbuf_t o = {0};
    shape_text(&o, outer);
    kiln_strbuf_printf(c, "  a0 = %s parameter(0)\n  a = %s bitcast(a0)\n", kiln_strbuf_cstr(&o),
                       kiln_strbuf_cstr(a));
    kiln_strbuf_free(&o);
  } else {
    kiln_strbuf_printf(c, "  a = %s parameter(0)\n", kiln_strbuf_cstr(a));
  }
  kiln_strbuf_printf(c, "  b = %s parameter(1)\n  x = %s %s(a, b)\n", kiln_strbuf_cstr(b),
                     kiln_strbuf_cstr(a), op);
}

/* Sometimes (25%) a loop fusion's first operand arrives in another shape that a bitcast at
 * the start of the fused computation turns into the one it computes in, as XLA's fusions
 * start: *s becomes the bitcast's shape, ops[1] a node of its dimensions, *outer the
 * operand's shape. Returns whether it did. */
static bool bitcast_first_operand(gen_t *g, int ops[2], gen_shape_t *s, gen_shape_t *outer) {
  gen_shape_t r;
  if (!chance(g, 25) || !bitcast_shape(g, s, &r)) return false;
  *outer = *s;
  *s = r;
  random_layout(g, &r);
  ops[1] = node_like(g, &r);
  return true;
}

/* An in-place dynamic-update-slice fusion as XLA's optimized dumps hold them (`kind=kLoop`,
 * the root a dynamic-update-slice of parameter 0): the update goes through a unary step
 * first; the result takes the operand's layout (70%) or a random one. */
static int op_dus_fusion(gen_t *g) {
  int ops[GEN_MAX_OPERANDS], it;
  gen_shape_t in, u;
  if (!dus_operands(g, ops, &in, &u, &it)) return -1;
  gen_shape_t r = in;
  if (chance(g, 30)) random_layout(g, &r);
  const char *step = any_step_op(g, in.type);
  int id = g->p->num_nodes;
  kiln_strbuf_t c = {0}, vs[3] = {{0}, {0}, {0}};
  shape_text(&vs[0], &in);
  shape_text(&vs[1], &u);
  shape_text(&vs[2], &r);
  kiln_strbuf_printf(&c, "fused_%d {\n  a = %s parameter(0)\n  u = %s parameter(1)\n", id,
                     kiln_strbuf_cstr(&vs[0]), kiln_strbuf_cstr(&vs[1]));
  for (int i = 0; i < in.rank; i++)
    kiln_strbuf_printf(&c, "  i%d = %s[] parameter(%d)\n", i, kTypes[it].name, i + 2);
  step_text(&c, false, "y", kiln_strbuf_cstr(&vs[1]), in.type, step, "u");
  kiln_strbuf_printf(&c, "  ROOT d = %s dynamic-update-slice(a, y", kiln_strbuf_cstr(&vs[2]));
  for (int i = 0; i < in.rank; i++) kiln_strbuf_printf(&c, ", i%d", i);
  kiln_strbuf_append(&c, ")\n}\n\n");
  for (int i = 0; i < 3; i++) kiln_strbuf_free(&vs[i]);
  return add_node(g, "fusion", &r, ops, in.rank + 2, xprintf(", kind=kLoop, calls=fused_%d", id),
                  strbuf_take(&c));
}

/* A scatter fusion as XLA's optimized dumps hold them (`kind=kInput`, the root a scatter of
 * parameter 0): the updates go through a unary step first. */
static int op_scatter_fusion(gen_t *g) {
  scatter_parts_t sp;
  if (!scatter_parts(g, &sp)) return -1;
  int t = sp.in.type, id = g->p->num_nodes;
  const char *step = any_step_op(g, t);
  kiln_strbuf_t c = {0}, vs[4] = {{0}, {0}, {0}, {0}};
  shape_text(&vs[0], &sp.in);
  shape_text(&vs[1], shape_of(g, sp.ops[1]));
  shape_text(&vs[2], shape_of(g, sp.ops[2]));
  shape_text(&vs[3], &sp.r);
  kiln_strbuf_append(&c, sp.comps);
  kiln_free(sp.comps);
  kiln_strbuf_printf(&c,
                     "fused_%d {\n  a = %s parameter(0)\n  i = %s parameter(1)\n"
                     "  u = %s parameter(2)\n",
                     id, kiln_strbuf_cstr(&vs[0]), kiln_strbuf_cstr(&vs[1]),
                     kiln_strbuf_cstr(&vs[2]));
  step_text(&c, false, "y", kiln_strbuf_cstr(&vs[2]), t, step, "u");
  kiln_strbuf_printf(&c, "  ROOT s = %s scatter(a, i, y)%s\n}\n\n", kiln_strbuf_cstr(&vs[3]),
                     sp.attrs);
  kiln_free(sp.attrs);
  for (int i = 0; i < 4; i++) kiln_strbuf_free(&vs[i]);
  return add_node(g, "fusion", &sp.r, sp.ops, 3, xprintf(", kind=kInput, calls=fused_%d", id),
                  strbuf_take(&c));
}

/* A dynamic-slice fusion as XLA's optimized dumps hold them (`kind=kLoop`): in half the
 * dimensions a signed start index is wrapped first as NumPy's negative indices are
 * (`select(i < 0, i + dim, i)`), and the slice goes through a unary step. */
static int op_ds_fusion(gen_t *g) {
  int x = pick(g, any_type, 1);
  gen_shape_t in = *shape_of(g, x);
  if (in.rank + 1 > GEN_MAX_OPERANDS) return -1;
  int t = in.type, it = index_type(g), id = g->p->num_nodes;
  int ops[GEN_MAX_OPERANDS];
  ops[0] = x;
  gen_shape_t r = in;
  for (int i = 0; i < in.rank; i++) {
    r.dims[i] = in.dims[i] ? rnd_range(g, 1, in.dims[i]) : 0;
    ops[i + 1] = start_index(g, it, in.dims[i] - r.dims[i]);
  }
  random_layout(g, &r);
  const char *step = any_step_op(g, t);
  const char *itn = kTypes[it].name;
  kiln_strbuf_t c = {0}, vs[2] = {{0}, {0}}, idx = {0}, sizes = {0};
  shape_text(&vs[0], &in);
  shape_text(&vs[1], &r);
  kiln_strbuf_printf(&c, "fused_%d {\n  a = %s parameter(0)\n", id, kiln_strbuf_cstr(&vs[0]));
  for (int i = 0; i < in.rank; i++) {
    kiln_strbuf_printf(&c, "  i%d = %s[] parameter(%d)\n", i, itn, i + 1);
    bool wrap = kTypes[it].kind == K_S && chance(g, 50);
    if (wrap)
      kiln_strbuf_printf(&c,
                         "  z%d = %s[] constant(0)\n  n%d = %s[] constant(%lld)\n"
                         "  l%d = pred[] compare(i%d, z%d), direction=LT\n"
                         "  w%d = %s[] add(i%d, n%d)\n  j%d = %s[] select(l%d, w%d, i%d)\n",
                         i, itn, i, itn, (long long)in.dims[i], i, i, i, i, itn, i, i, i, itn, i, i,
                         i);
    kiln_strbuf_printf(&idx, ", %c%d", wrap ? 'j' : 'i', i);
    kiln_strbuf_printf(&sizes, "%s%lld", i ? "," : "", (long long)r.dims[i]);
  }
  kiln_strbuf_printf(&c, "  d = %s dynamic-slice(a%s), dynamic_slice_sizes={%s}\n",
                     kiln_strbuf_cstr(&vs[1]), kiln_strbuf_cstr(&idx), kiln_strbuf_cstr(&sizes));
  step_text(&c, true, "r", kiln_strbuf_cstr(&vs[1]), t, step, "d");
  kiln_strbuf_append(&c, "}\n\n");
  kiln_strbuf_free(&vs[0]), kiln_strbuf_free(&vs[1]), kiln_strbuf_free(&idx);
  kiln_strbuf_free(&sizes);
  return add_node(g, "fusion", &r, ops, in.rank + 1, xprintf(", kind=kLoop, calls=fused_%d", id),
                  strbuf_take(&c));
}

/* A multi-output fusion of slices as XLA's horizontally fused dumps hold them (`kind=kLoop`,
 * the root a tuple of slices of one value): `step(op(a, b))` sliced 2 or 3 times along
 * dimension 0, every other dimension sliced the same way in all of them; the slices are
 * concatenated again after the fusion so each stays live. */
static int op_slices_fusion(gen_t *g) {
  int ops[2];
  gen_shape_t s;
  const char *op, *step;
  if (!smooth_operands(g, ops, &s, &op, &step) || s.rank == 0 || s.dims[0] == 0) return -1;
  int t = s.type, id = g->p->num_nodes, n = 2 + rnd(g, 2);
  gen_shape_t r[3];
  kiln_strbuf_t rest = {0}, c = {0}, sh = {0}, bs = {0}, roots = {0};
  gen_shape_t common = s;
  for (int i = 1; i < s.rank; i++) {
    int64_t d = s.dims[i];
    int64_t start = d ? rnd_range(g, 0, d - 1) : 0;
    int64_t limit = d ? rnd_range(g, start + 1, d) : 0;
    if (chance(g, 40)) start = 0, limit = d;
    common.dims[i] = limit - start;
    kiln_strbuf_printf(&rest, ", [%lld:%lld:1]", (long long)start, (long long)limit);
  }
  shape_text(&sh, &s);
  shape_text(&bs, shape_of(g, ops[1]));
  fused_head(&c, id, NULL, &sh, &bs, op);
  step_text(&c, false, "y", kiln_strbuf_cstr(&sh), t, step, "x");
  int64_t total = 0;
  for (int k = 0; k < n; k++) {
    int64_t start = rnd_range(g, 0, s.dims[0] - 1), limit = rnd_range(g, start + 1, s.dims[0]);
    r[k] = common;
    r[k].dims[0] = limit - start;
    total += r[k].dims[0];
    default_layout(&r[k]);
    kiln_strbuf_t rs = {0};
    shape_text(&rs, &r[k]);
    kiln_strbuf_printf(&c, "  s%d = %s slice(y), slice={[%lld:%lld:1]%s}\n", k,
                       kiln_strbuf_cstr(&rs), (long long)start, (long long)limit,
                       kiln_strbuf_cstr(&rest));
    kiln_strbuf_printf(&roots, "%ss%d", k ? ", " : "", k);
    kiln_strbuf_free(&rs);
  }
  const gen_shape_t *outs[3] = {&r[0], &r[1], &r[2]};
  char *text = tuple_text(outs, n);
  kiln_strbuf_printf(&c, "  ROOT t = %s tuple(%s)\n}\n\n", text, kiln_strbuf_cstr(&roots));
  kiln_strbuf_free(&rest), kiln_strbuf_free(&sh), kiln_strbuf_free(&bs);
  kiln_strbuf_free(&roots);
  int f = add_tuple_node(g, "fusion", text, ops, 2, xprintf(", kind=kLoop, calls=fused_%d", id),
                         strbuf_take(&c));
  kiln_free(text);
  int parts[3];
  for (int k = 0; k < n; k++) parts[k] = tuple_element(g, f, &r[k], k);
  gen_shape_t o = common;
  o.dims[0] = total;
  random_layout(g, &o);
  return add_node(g, "concatenate", &o, parts, n, xprintf(", dimensions={0}"), NULL);
}

/* A concatenate fusion as XLA's optimized dumps hold them (`kind=kLoop`): 2 or 3 operands,
 * each through a unary step, concatenated along a random dimension; in 30% a step after the
 * concatenate too (a concatenate under an epilogue). */
static int op_concat_fusion(gen_t *g) {
  int ops[3], dim;
  gen_shape_t r;
  int n = concat_operands(g, ops, &r, &dim);
  if (!n) return -1;
  int t = r.type, id = g->p->num_nodes;
  kiln_strbuf_t c = {0}, rs = {0}, ys = {0};
  shape_text(&rs, &r);
  kiln_strbuf_printf(&c, "fused_%d {\n", id);
  for (int i = 0; i < n; i++) {
    kiln_strbuf_t ps = {0};
    char out[16], par[16];
    shape_text(&ps, shape_of(g, ops[i]));
    snprintf(out, sizeof out, "y%d", i);
    snprintf(par, sizeof par, "p%d", i);
    kiln_strbuf_printf(&c, "  p%d = %s parameter(%d)\n", i, kiln_strbuf_cstr(&ps), i);
    step_text(&c, false, out, kiln_strbuf_cstr(&ps), t, any_step_op(g, t), par);
    kiln_strbuf_printf(&ys, "%sy%d", i ? ", " : "", i);
    kiln_strbuf_free(&ps);
  }
  bool epilogue = chance(g, 30);
  kiln_strbuf_printf(&c, "  %s = %s concatenate(%s), dimensions={%d}\n", epilogue ? "k" : "ROOT r",
                     kiln_strbuf_cstr(&rs), kiln_strbuf_cstr(&ys), dim);
  if (epilogue) step_text(&c, true, "r", kiln_strbuf_cstr(&rs), t, any_step_op(g, t), "k");
  kiln_strbuf_append(&c, "}\n\n");
  kiln_strbuf_free(&rs), kiln_strbuf_free(&ys);
  return add_node(g, "fusion", &r, ops, n, xprintf(", kind=kLoop, calls=fused_%d", id),
                  strbuf_take(&c));
}

/* A gather fusion as XLA's optimized dumps hold them (an embedding lookup, `kind=kLoop`):
 * in 40% the table goes through a unary step first, and the gathered rows through one after. */
static int op_gather_fusion(gen_t *g) {
  int ops[2];
  gen_shape_t r;
  char *attrs;
  if (!gather_parts(g, ops, &r, &attrs)) return -1;
  int t = r.type, id = g->p->num_nodes;
  kiln_strbuf_t c = {0}, vs[3] = {{0}, {0}, {0}};
  shape_text(&vs[0], shape_of(g, ops[0]));
  shape_text(&vs[1], shape_of(g, ops[1]));
  shape_text(&vs[2], &r);
  kiln_strbuf_printf(&c, "fused_%d {\n  a = %s parameter(0)\n  i = %s parameter(1)\n", id,
                     kiln_strbuf_cstr(&vs[0]), kiln_strbuf_cstr(&vs[1]));
  bool before = chance(g, 40);
  if (before) step_text(&c, false, "an", kiln_strbuf_cstr(&vs[0]), t, any_step_op(g, t), "a");
  kiln_strbuf_printf(&c, "  gth = %s gather(%s, i)%s\n", kiln_strbuf_cstr(&vs[2]),
                     before ? "an" : "a", attrs);
  step_text(&c, true, "r", kiln_strbuf_cstr(&vs[2]), t, any_step_op(g, t), "gth");
  kiln_strbuf_append(&c, "}\n\n");
  kiln_free(attrs);
  for (int i = 0; i < 3; i++) kiln_strbuf_free(&vs[i]);
  return add_node(g, "fusion", &r, ops, 2, xprintf(", kind=kLoop, calls=fused_%d", id),
                  strbuf_take(&c));
}

/* A one-hot fusion as JAX's training steps hold them (`kind=kLoop`): integer labels s32[n]
 * compared with an iota over c classes, the match converted to the program's main type (f32
 * when that is no real number type); labels out of [0, c) give a row of zeros. */
static int op_onehot_fusion(gen_t *g) {
  gen_shape_t ls;
  memset(&ls, 0, sizeof ls);
  ls.type = T_S32;
  ls.rank = 1;
  ls.dims[0] = rnd_dim(g);
  default_layout(&ls);
  int t = real_type(g->main_type) ? g->main_type : T_F32, id = g->p->num_nodes;
  gen_shape_t r = scalar_of(t);
  r.rank = 2;
  r.dims[0] = ls.dims[0];
  r.dims[1] = rnd_dim(g);
  if (num_elements(&r) > g->max_elements) return -1;
  random_layout(g, &r);
  int labels = node_like(g, &ls);
  kiln_strbuf_t c = {0}, rs = {0};
  shape_text(&rs, &r);
  long long n = (long long)r.dims[0], k = (long long)r.dims[1];
  kiln_strbuf_printf(&c,
                     "fused_%d {\n  l = s32[%lld]{0} parameter(0)\n"
                     "  io = s32[%lld,%lld]{1,0} iota(), iota_dimension=1\n"
                     "  lb = s32[%lld,%lld]{1,0} broadcast(l), dimensions={0}\n"
                     "  eq = pred[%lld,%lld]{1,0} compare(io, lb), direction=EQ\n"
                     "  ROOT r = %s convert(eq)\n}\n\n",
                     id, n, n, k, n, k, n, k, kiln_strbuf_cstr(&rs));
  kiln_strbuf_free(&rs);
  return add_node(g, "fusion", &r, &labels, 1, xprintf(", kind=kLoop, calls=fused_%d", id),
                  strbuf_take(&c));
}

/* A reduce-window fusion as XLA's optimized dumps hold them (a pooling, `kind=kLoop`): the
 * reduce-window of parameter 0, then a unary step. */
static int op_rw_fusion(gen_t *g) {
  int ops[2];
  gen_shape_t r;
  char *attrs, *comps;
  if (!reduce_window_parts(g, ops, &r, &attrs, &comps)) return -1;
  int t = r.type, id = g->p->num_nodes;
  kiln_strbuf_t c = {0}, vs[2] = {{0}, {0}};
  shape_text(&vs[0], shape_of(g, ops[0]));
  shape_text(&vs[1], &r);
  kiln_strbuf_append(&c, comps);
  kiln_free(comps);
  kiln_strbuf_printf(&c, "fused_%d {\n  a = %s parameter(0)\n  i = %s[] parameter(1)\n", id,
                     kiln_strbuf_cstr(&vs[0]), kTypes[t].name);
  kiln_strbuf_printf(&c, "  w = %s reduce-window(a, i)%s\n", kiln_strbuf_cstr(&vs[1]), attrs);
  step_text(&c, true, "r", kiln_strbuf_cstr(&vs[1]), t, any_step_op(g, t), "w");
  kiln_strbuf_append(&c, "}\n\n");
  kiln_free(attrs);
  kiln_strbuf_free(&vs[0]), kiln_strbuf_free(&vs[1]);
  return add_node(g, "fusion", &r, ops, 2, xprintf(", kind=kLoop, calls=fused_%d", id),
                  strbuf_take(&c));
}

/* A loop fusion as XLA's optimized dumps hold them: `x = op(a, b)` (in 25% then combined
 * with a broadcast scalar constant), a unary step, sometimes a transpose at the root. The fusion's
 * result gets its own random layout, so layout assignment decides where the bytes move (inside the
 * fusion, or in a copy after it). */
static int op_fusion(gen_t *g) {
  int ops[2];
  gen_shape_t s;
  const char *op, *step;
  if (!smooth_operands(g, ops, &s, &op, &step)) return -1;
  gen_shape_t outer;
  bool cast = bitcast_first_operand(g, ops, &s, &outer);
  int t = s.type;
  int perm[GEN_MAX_RANK + 1];
  for (int i = 0; i < s.rank; i++) perm[i] = i;
  bool transposed = s.rank > 1 && chance(g, 60);
  if (transposed) shuffle(g, perm, s.rank);
  gen_shape_t r = s, rb;
  for (int i = 0; i < s.rank; i++) r.dims[i] = s.dims[perm[i]];
  random_layout(g, &r);
  int id = g->p->num_nodes;
  kiln_strbuf_t c = {0}, vs[4] = {{0}, {0}, {0}, {0}};
  shape_text(&vs[0], &s);
  shape_text(&vs[1], shape_of(g, ops[1]));
  shape_text(&vs[2], &r);
  fused_head(&c, id, cast ? &outer : NULL, &vs[0], &vs[1], op);
  const char *xin = "x";
  if (chance(g, 25)) { /* a scalar constant broadcast inside, as XLA fuses them */
    kiln_strbuf_printf(&c,
                       "  k = %s[] constant(%s)\n  kb = %s broadcast(k), dimensions={}\n"
                       "  xk = %s %s(x, kb)\n",
                       kTypes[t].name, small_value(g, t), kiln_strbuf_cstr(&vs[0]),
                       kiln_strbuf_cstr(&vs[0]), smooth_binary(g, t));
    xin = "xk";
  }
  if (transposed) {
    step_text(&c, false, "y", kiln_strbuf_cstr(&vs[0]), t, step, xin);
    kiln_strbuf_printf(&vs[3], "  ROOT r = %s transpose(y), dimensions={",
                       kiln_strbuf_cstr(&vs[2]));
    for (int i = 0; i < s.rank; i++) kiln_strbuf_printf(&vs[3], "%s%d", i ? "," : "", perm[i]);
    kiln_strbuf_printf(&c, "%s}\n", kiln_strbuf_cstr(&vs[3]));
  } else if (chance(g, 40) && bitcast_shape(g, &r, &rb)) {
    /* a bitcast at the root, as XLA's fusions end in them */
    step_text(&c, false, "y", kiln_strbuf_cstr(&vs[2]), t, step, xin);
    shape_text(&vs[3], &rb);
    if (chance(g, 50)) {
      kiln_strbuf_printf(&c, "  ROOT r = %s bitcast(y)\n", kiln_strbuf_cstr(&vs[3]));
    } else { /* and another step after it */
      kiln_strbuf_printf(&c, "  yb = %s bitcast(y)\n", kiln_strbuf_cstr(&vs[3]));
      step_text(&c, true, "r", kiln_strbuf_cstr(&vs[3]), t, step_op(g, t), "yb");
    }
    r = rb;
  } else {
    step_text(&c, true, "r", kiln_strbuf_cstr(&vs[2]), t, step, xin);
  }
  kiln_strbuf_append(&c, "}\n\n");
  for (int i = 0; i < 4; i++) kiln_strbuf_free(&vs[i]);
  return add_node(g, "fusion", &r, ops, 2, xprintf(", kind=kLoop, calls=fused_%d", id),
                  strbuf_take(&c));
}

/* A multi-output loop fusion as XLA's optimized dumps hold them: `x = op(a, b)` and two
 * unary steps of it as outputs of one element count, the first in a random layout, the
 * second in a shuffled one (sibling outputs laid out differently); the two are combined
 * after the fusion by a smooth op so both stay live. */
static int op_multi_output_fusion(gen_t *g) {
  int ops[2];
  gen_shape_t s;
  const char *op, *step;
  if (!smooth_operands(g, ops, &s, &op, &step)) return -1;
  gen_shape_t outer;
  bool cast = bitcast_first_operand(g, ops, &s, &outer);
  int t = s.type, id = g->p->num_nodes;
  gen_shape_t r1 = s, r2 = s;
  random_layout(g, &r1);
  if (s.rank > 1) shuffle(g, r2.m2m, s.rank);
  const char *step2 = step_op(g, t);
  kiln_strbuf_t c = {0}, vs[4] = {{0}, {0}, {0}, {0}};
  shape_text(&vs[0], &s);
  shape_text(&vs[1], shape_of(g, ops[1]));
  shape_text(&vs[2], &r1);
  shape_text(&vs[3], &r2);
  fused_head(&c, id, cast ? &outer : NULL, &vs[0], &vs[1], op);
  step_text(&c, false, "y", kiln_strbuf_cstr(&vs[2]), t, step, "x");
  step_text(&c, false, "z", kiln_strbuf_cstr(&vs[3]), t, step2, "x");
  const gen_shape_t *outs[2] = {&r1, &r2};
  char *text = tuple_text(outs, 2);
  kiln_strbuf_printf(&c, "  ROOT t = %s tuple(y, z)\n}\n\n", text);
  for (int i = 0; i < 4; i++) kiln_strbuf_free(&vs[i]);
  int f = add_tuple_node(g, "fusion", text, ops, 2, xprintf(", kind=kLoop, calls=fused_%d", id),
                         strbuf_take(&c));
  kiln_free(text);
  int pair[2] = {tuple_element(g, f, &r1, 0), tuple_element(g, f, &r2, 1)};
  gen_shape_t o = s;
  random_layout(g, &o);
  return add_node(g, smooth_binary(g, t), &o, pair, 2, NULL, NULL);
}

/* A reduction fusion as XLA's optimized dumps hold them (`kind=kInput`): `x = op(a, b)`
 * reduced over random dimensions, sometimes with a sibling reduce of x by another reducer and
 * an elementwise side output `step(x)` (a multi-output fusion, each output in a random
 * layout). The outputs are combined after it, so each stays live: the sibling with the first
 * reduce by a smooth op, the side output with the reduce broadcast back (softmax's
 * `x - max(x)`). Each reduce's init is a parameter the fake arguments give its identity. */
static int op_input_fusion(gen_t *g) {
  int ops[4];
  gen_shape_t s;
  const char *op, *step;
  if (!smooth_operands(g, ops, &s, &op, &step)) return -1;
  int t = s.type, id = g->p->num_nodes;
  gen_shape_t r;
  kiln_strbuf_t dims = {0};
  int kept[GEN_MAX_RANK + 1];
  int64_t terms = reduce_dims(g, &s, &r, &dims, kept);
  random_layout(g, &r);
  bool sibling = chance(g, 30), side = chance(g, 40);
  int nred = sibling ? 2 : 1, nout = nred + side;
  gen_shape_t ys = s, sc = scalar_of(t);
  random_layout(g, &ys);
  kiln_strbuf_t c = {0}, sh = {0}, rs = {0}, ss = {0}, bs = {0};
  shape_text(&sh, &s);
  shape_text(&rs, &r);
  shape_text(&ss, &ys);
  shape_text(&bs, shape_of(g, ops[1]));
  for (int k = 0; k < nred; k++) {
    char name[48];
    snprintf(name, sizeof name, "reducer_%d_%d", id, k);
    binary_comp(&c, name, t, random_reducer_of(g, t, kTypes[t].kind == K_F, terms));
    ops[2 + k] = add_param(g, &sc);
  }
  kiln_strbuf_printf(&c, "fused_%d {\n  a = %s parameter(0)\n  b = %s parameter(1)\n", id,
                     kiln_strbuf_cstr(&sh), kiln_strbuf_cstr(&bs));
  for (int k = 0; k < nred; k++)
    kiln_strbuf_printf(&c, "  i%d = %s[] parameter(%d)\n", k, kTypes[t].name, 2 + k);
  kiln_strbuf_printf(&c, "  x = %s %s(a, b)\n", kiln_strbuf_cstr(&sh), op);
  for (int k = 0; k < nred; k++)
    kiln_strbuf_printf(&c, "  %sr%d = %s reduce(x, i%d), dimensions={%s}, to_apply=reducer_%d_%d\n",
                       nout == 1 ? "ROOT " : "", k, kiln_strbuf_cstr(&rs), k,
                       kiln_strbuf_cstr(&dims), id, k);
  if (side) step_text(&c, false, "y", kiln_strbuf_cstr(&ss), t, step, "x");
  const gen_shape_t *outs[3] = {&r, sibling ? &r : &ys, &ys};
  char *text = tuple_text(outs, nout);
  if (nout > 1)
    kiln_strbuf_printf(&c, "  ROOT t = %s tuple(r0%s%s)\n", text, sibling ? ", r1" : "",
                       side ? ", y" : "");
  kiln_strbuf_append(&c, "}\n\n");
  kiln_strbuf_free(&dims), kiln_strbuf_free(&sh), kiln_strbuf_free(&rs);
  kiln_strbuf_free(&ss), kiln_strbuf_free(&bs);
  char *attrs = xprintf(", kind=kInput, calls=fused_%d", id);
  if (nout == 1) {
    kiln_free(text);
    return add_node(g, "fusion", &r, ops, 2 + nred, attrs, strbuf_take(&c));
  }
  int f = add_tuple_node(g, "fusion", text, ops, 2 + nred, attrs, strbuf_take(&c));
  kiln_free(text);
  int res = tuple_element(g, f, &r, 0);
  if (sibling) {
    int pair[2] = {res, tuple_element(g, f, &r, 1)};
    res = add_node(g, smooth_binary(g, t), &r, pair, 2, NULL, NULL);
  }
  if (!side) return res;
  gen_shape_t b = s;
  default_layout(&b);
  kiln_strbuf_t bd = {0};
  for (int i = 0; i < r.rank; i++) kiln_strbuf_printf(&bd, "%s%d", i ? "," : "", kept[i]);
  int bc = add_node(g, "broadcast", &b, &res, 1,
                    xprintf(", dimensions={%s}", kiln_strbuf_cstr(&bd)), NULL);
  kiln_strbuf_free(&bd);
  int pair[2] = {tuple_element(g, f, &ys, nred), bc};
  gen_shape_t o = s;
  random_layout(g, &o);
  return add_node(g, smooth_binary(g, t), &o, pair, 2, NULL, NULL);
}

/* The binary op of slice and carry and the unary step after it, for a scan's body.
 * carry' = step(a * carry) multiplies an error of the carry by |a * step'| at each
 * iteration: past 1 (a = 3, cosine) one ulp of the host's cosine grew to 2e-4 in 10
 * (fuzz-2758275). A sum keeps the factor |step'| <= 1. */
static void scan_ops(gen_t *g, int t, const char **op, const char **step) {
  *op = smooth_binary(g, t);
  *step = step_op(g, t);
  /* A 16-bit float sum of row and carry rounded or not (excess precision, as XLA keeps it
   * in a fusion) differs by half an ulp, up to 0.016 in [2, 4], and a sine passes that
   * whole into its result near pi, past bf16's tolerance of 0.01 (fuzz-9617920:
   * sin(a + carry) for three steps, -0.077 on the evaluator, -0.065 compiled). tanh's
   * slope is small where the ulp is large. */
  if (kTypes[t].kind == K_F && kTypes[t].bits <= 16 && periodic(*step)) *step = "tanh";
  if (!strcmp(*op, "multiply") && kTypes[t].kind == K_F &&
      (periodic(*step) || !strcmp(*step, "tanh")))
    *op = "add";
}

/* scan along a random dimension of an array: one input, one carry of the slice's shape
 * (another node of that shape, or zeros), the body a smooth binary op of slice and carry,
 * then a unary step; the slice sum becomes both the step's output and the next carry.
 * Sometimes reversed; the result is the outputs or the final carry. */
static int op_scan(gen_t *g) {
  int x = pick(g, any_type, 1);
  gen_shape_t in = *shape_of(g, x);
  int t = in.type;
  if (!kTypes[t].arith || kTypes[t].kind == K_C) return -1;
  int d = rnd(g, in.rank);
  gen_shape_t slice = in;
  slice.rank = in.rank - 1;
  for (int i = d; i < slice.rank; i++) slice.dims[i] = in.dims[i + 1];
  default_layout(&slice);
  int carry = node_like(g, &slice);
  if (carry < 0 || !same_dims(shape_of(g, carry), &slice)) return -1;
  slice = *shape_of(g, carry);
  int id = g->p->num_nodes;
  kiln_strbuf_t ss = {0}, xs = {0}, c = {0};
  gen_shape_t body_slice = slice;
  default_layout(&body_slice);
  shape_text(&ss, &body_slice);
  shape_text(&xs, &in);
  const char *sv = kiln_strbuf_cstr(&ss);
  const char *op, *step;
  scan_ops(g, t, &op, &step);
  kiln_strbuf_printf(&c,
                     "scan_body_%d {\n  a = %s parameter(0)\n  b = %s parameter(1)\n"
                     "  x = %s %s(a, b)\n",
                     id, sv, sv, sv, op);
  step_text(&c, false, "y", sv, t, step, "x");
  kiln_strbuf_printf(&c, "  ROOT r = (%s, %s) tuple(y, y)\n}\n\n", sv, sv);
  char tuple_shape[512];
  kiln_strbuf_t cs = {0};
  shape_text(&cs, &slice);
  snprintf(tuple_shape, sizeof tuple_shape, "(%s, %s)", kiln_strbuf_cstr(&xs),
           kiln_strbuf_cstr(&cs));
  int ops[2] = {x, carry};
  int sc = add_tuple_node(g, "scan", tuple_shape, ops, 2,
                          xprintf(", dimensions={%d}, num_carries=1%s, to_apply=scan_body_%d", d,
                                  chance(g, 30) ? ", is_reverse=true" : "", id),
                          strbuf_take(&c));
  kiln_strbuf_free(&ss);
  kiln_strbuf_free(&xs);
  kiln_strbuf_free(&cs);
  bool outputs = chance(g, 60);
  return add_node(g, "get-tuple-element", outputs ? &in : &slice, &sc, 1,
                  xprintf(", index=%d", outputs ? 0 : 1), NULL);
}

/* The start indices of a scan's row `k` of an array of rank `rank` scanned along `d`:
 * ", z, k, z" (the zeros a constant `z`). */
static void row_indices(kiln_strbuf_t *b, int rank, int d, const char *k) {
  for (int i = 0; i < rank; i++) kiln_strbuf_printf(b, ", %s", i == d ? k : "z");
}

/* A scan as XLA lowers lax.scan: a while over (counter, carry, xs, ys) whose body is three
 * loop fusions (row k of xs dynamic-sliced and bitcast to the carry's shape; the step of row
 * and carry; the step bitcast back and written into row k of ys in place) and the counter's
 * add. Reversed, k is n-1-i. The result is ys or the last carry. */
static int op_scan_loop(gen_t *g) {
  int x = pick(g, any_type, 1);
  gen_shape_t in = *shape_of(g, x);
  int t = in.type, d = rnd(g, in.rank);
  const int64_t n = in.dims[d];
  if (!kTypes[t].arith || kTypes[t].kind == K_C || n == 0) return -1;
  gen_shape_t slice = in, row = in, out = in;
  slice.rank = in.rank - 1;
  for (int i = d; i < slice.rank; i++) slice.dims[i] = in.dims[i + 1];
  default_layout(&slice);
  row.dims[d] = 1;
  default_layout(&row);
  default_layout(&out);
  int carry = node_like(g, &slice);
  if (carry < 0 || !same_dims(shape_of(g, carry), &slice)) return -1;
  /* the carry in the loop in the default layout, as the bitcasts want */
  if (memcmp(shape_of(g, carry)->m2m, slice.m2m, sizeof(int) * (size_t)slice.rank))
    carry = add_node(g, "copy", &slice, &carry, 1, NULL, NULL);
  const char *op, *step;
  scan_ops(g, t, &op, &step);
  const bool reverse = chance(g, 30);
  const int id = g->p->num_nodes;
  kiln_strbuf_t vs[4] = {{0}, {0}, {0}, {0}}, c = {0}, sizes = {0}, at_k = {0};
  shape_text(&vs[0], &slice);
  shape_text(&vs[1], &row);
  shape_text(&vs[2], &in);
  shape_text(&vs[3], &out);
  const char *sv = kiln_strbuf_cstr(&vs[0]), *rv = kiln_strbuf_cstr(&vs[1]);
  const char *xv = kiln_strbuf_cstr(&vs[2]), *ov = kiln_strbuf_cstr(&vs[3]);
  for (int i = 0; i < in.rank; i++)
    kiln_strbuf_printf(&sizes, "%s%lld", i ? "," : "", (long long)row.dims[i]);
  row_indices(&at_k, in.rank, d, "k");
  kiln_strbuf_printf(&c,
                     "fused_row_%d {\n  xs = %s parameter(0)\n  k = s32[] parameter(1)\n"
                     "  z = s32[] constant(0)\n"
                     "  ds = %s dynamic-slice(xs%s), dynamic_slice_sizes={%s}\n"
                     "  ROOT b = %s bitcast(ds)\n}\n\n",
                     id, xv, rv, kiln_strbuf_cstr(&at_k), kiln_strbuf_cstr(&sizes), sv);
  kiln_strbuf_printf(&c,
                     "fused_step_%d {\n  a = %s parameter(0)\n  c = %s parameter(1)\n"
                     "  x = %s %s(a, c)\n",
                     id, sv, sv, sv, op);
  step_text(&c, true, "y", sv, t, step, "x");
  kiln_strbuf_printf(&c,
                     "}\n\nfused_update_%d {\n  ys = %s parameter(0)\n  y = %s parameter(1)\n"
                     "  k = s32[] parameter(2)\n  z = s32[] constant(0)\n"
                     "  b = %s bitcast(y)\n  ROOT u = %s dynamic-update-slice(ys, b%s)\n}\n\n",
                     id, ov, sv, rv, ov, kiln_strbuf_cstr(&at_k));
  char tuple_shape[512];
  snprintf(tuple_shape, sizeof tuple_shape, "(s32[], %s, %s, %s)", sv, xv, ov);
  /* the condition's compare fused or not, as XLA leaves it either way */
  const char *lt = "  ROOT lt = pred[] compare(i, n), direction=LT\n}\n\n";
  if (chance(g, 50)) {
    kiln_strbuf_printf(&c,
                       "fused_cond_%d {\n  i = s32[] parameter(0)\n  n = s32[] constant(%lld)\n",
                       id, (long long)n);
    kiln_strbuf_append(&c, lt);
    kiln_strbuf_printf(&c,
                       "scan_cond_%d {\n  p = %s parameter(0)\n"
                       "  i = s32[] get-tuple-element(p), index=0\n"
                       "  ROOT lt = pred[] fusion(i), kind=kLoop, calls=fused_cond_%d\n}\n\n",
                       id, tuple_shape, id);
  } else {
    kiln_strbuf_printf(&c,
                       "scan_cond_%d {\n  p = %s parameter(0)\n"
                       "  i = s32[] get-tuple-element(p), index=0\n  n = s32[] constant(%lld)\n",
                       id, tuple_shape, (long long)n);
    kiln_strbuf_append(&c, lt);
  }
  kiln_strbuf_printf(&c,
                     "scan_body_%d {\n  p = %s parameter(0)\n"
                     "  i = s32[] get-tuple-element(p), index=0\n"
                     "  c = %s get-tuple-element(p), index=1\n"
                     "  xs = %s get-tuple-element(p), index=2\n"
                     "  ys = %s get-tuple-element(p), index=3\n",
                     id, tuple_shape, sv, xv, ov);
  if (reverse)
    kiln_strbuf_printf(&c, "  last = s32[] constant(%lld)\n  k = s32[] subtract(last, i)\n",
                       (long long)(n - 1));
  const char *k = reverse ? "k" : "i";
  kiln_strbuf_printf(&c,
                     "  a = %s fusion(xs, %s), kind=kLoop, calls=fused_row_%d\n"
                     "  y = %s fusion(a, c), kind=kLoop, calls=fused_step_%d\n"
                     "  u = %s fusion(ys, y, %s), kind=kLoop, calls=fused_update_%d\n"
                     "  one = s32[] constant(1)\n  j = s32[] add(i, one)\n"
                     "  ROOT r = %s tuple(j, y, xs, u)\n}\n\n",
                     sv, k, id, sv, id, ov, k, id, tuple_shape);
  char trips[96] = "";
  if (chance(g, 50)) /* XLA's loop analysis records the trip count */
    snprintf(trips, sizeof trips, ", backend_config={\"known_trip_count\":{\"n\":\"%lld\"}}",
             (long long)n);
  int zero = add_constant(g, T_S32, "0");
  int fill = add_constant(g, t, kTypes[t].kind == K_PRED ? "false" : "0");
  int ys = add_node(g, "broadcast", &out, &fill, 1, xprintf(", dimensions={}"), NULL);
  int ops[4] = {zero, carry, x, ys};
  int tup = add_tuple_node(g, "tuple", tuple_shape, ops, 4, NULL, NULL);
  int w = add_tuple_node(g, "while", tuple_shape, &tup, 1,
                         xprintf(", condition=scan_cond_%d, body=scan_body_%d%s", id, id, trips),
                         strbuf_take(&c));
  for (int i = 0; i < 4; i++) kiln_strbuf_free(&vs[i]);
  kiln_strbuf_free(&sizes);
  kiln_strbuf_free(&at_k);
  const bool outputs = chance(g, 60);
  return tuple_element(g, w, outputs ? &out : &slice, outputs ? 3 : 1);
}

/* A scan: the op, or as XLA lowers it (half each). */
static int op_scan_either(gen_t *g) {
  return chance(g, 50) ? op_scan(g) : op_scan_loop(g);
}

/* select-and-scatter: the first maximum (GE) or minimum (LE) of each window of the operand
 * receives the window's source value, combined by add (maximum for floats narrower than
 * f32, see random_reducer). The select is a compare, or the negated opposite compare (same
 * choice, another expansion). Exact operands only: the selection compares. */
static int op_select_and_scatter(gen_t *g) {
  int x = pick(g, real_type, 1);
  gen_shape_t in = *shape_of(g, x);
  gen_shape_t src = in;
  kiln_strbuf_t sz = {0}, st = {0}, pd = {0};
  for (int i = 0; i < in.rank; i++) {
    int64_t d = in.dims[i];
    int64_t lo = chance(g, 20) ? rnd(g, 2) : 0, hi = chance(g, 20) ? rnd(g, 2) : 0;
    int64_t padded = d + lo + hi;
    int64_t w = padded > 0 ? rnd_range(g, 1, padded < 3 ? padded : 3) : 1;
    int64_t s = 1 + rnd(g, 2);
    if (padded < w) lo = hi = 0, w = 1, padded = d;
    src.dims[i] = padded >= w ? (padded - w) / s + 1 : 0;
    kiln_strbuf_printf(&sz, "%s%lld", i ? "x" : "", (long long)w);
    kiln_strbuf_printf(&st, "%s%lld", i ? "x" : "", (long long)s);
    kiln_strbuf_printf(&pd, "%s%lld_%lld", i ? "x" : "", (long long)lo, (long long)hi);
  }
  random_layout(g, &src);
  int source = node_like(g, &src);
  gen_shape_t sc = scalar_of(in.type);
  int init = add_param(g, &sc); /* fake arguments give it the scatter's identity */
  const char *t = kTypes[in.type].name;
  bool narrow = is_float(in.type) && kTypes[in.type].bits < 32;
  int id = g->p->num_nodes;
  kiln_strbuf_t c = {0};
  bool ge = chance(g, 70);
  const char *order = is_float(in.type) ? ", type=TOTALORDER" : "";
  kiln_strbuf_printf(&c, "select_%d {\n  a = %s[] parameter(0)\n  b = %s[] parameter(1)\n", id, t,
                     t);
  if (chance(g, 30)) /* the same choice as not(b > a) / not(b < a): the expander's general form */
    kiln_strbuf_printf(
        &c, "  n = pred[] compare(b, a), direction=%s%s\n  ROOT r = pred[] not(n)\n}\n\n",
        ge ? "GT" : "LT", order);
  else
    kiln_strbuf_printf(&c, "  ROOT r = pred[] compare(a, b), direction=%s%s\n}\n\n",
                       ge ? "GE" : "LE", order);
  char name[48];
  snprintf(name, sizeof name, "scatter_%d", id);
  binary_comp(&c, name, in.type, narrow ? "maximum" : "add");
  char *attrs =
      xprintf(", window={size=%s stride=%s pad=%s}, select=select_%d, scatter=%s",
              kiln_strbuf_cstr(&sz), kiln_strbuf_cstr(&st), kiln_strbuf_cstr(&pd), id, name);
  kiln_strbuf_free(&sz);
  kiln_strbuf_free(&st);
  kiln_strbuf_free(&pd);
  gen_shape_t r = in;
  random_layout(g, &r);
  int ops[3] = {x, source, init};
  return add_node(g, "select-and-scatter", &r, ops, 3, attrs, strbuf_take(&c));
}

/* topk of the last dimension: (values, s32 indices). Exact operands only (it sorts). */
static int op_topk(gen_t *g) {
  int x = pick(g, real_type, 1);
  gen_shape_t in = *shape_of(g, x);
  int64_t n = in.dims[in.rank - 1];
  if (n == 0) return -1;
  gen_shape_t v = in;
  v.dims[in.rank - 1] = rnd_range(g, 1, n < 8 ? n : 8);
  default_layout(&v);
  gen_shape_t idx = v;
  idx.type = T_S32;
  const gen_shape_t *s[2] = {&v, &idx};
  return tuple_op(g, "topk", s, 2, &x, 1,
                  xprintf(", k=%lld, largest=%s", (long long)v.dims[in.rank - 1],
                          chance(g, 80) ? "true" : "false"),
                  NULL);
}

/* fft over the last 1-3 dimensions: FFT / IFFT of c64 / c128, RFFT of f32 / f64, IRFFT. */
static int op_fft(gen_t *g) {
  static const char *kKinds[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
  int kind = rnd(g, 4);
  bool real_in = kind == 2;
  int t = chance(g, 70) ? (real_in ? T_F32 : T_C64) : (real_in ? T_F64 : T_C128);
  gen_shape_t in = random_shape(g, t, 1 + rnd(g, 3));
  int nf = 1 + rnd(g, in.rank);
  for (int i = in.rank - nf; i < in.rank; i++)
    if (in.dims[i] == 0) return -1;
  /* A parameter (finite fake inputs), not a computed node: how a NaN or an infinity in the
   * signal spreads over the bins is the algorithm's (the evaluator's radix-2 butterflies keep
   * some finite where a DFT's dots make every bin NaN), so only finite signals compare. The
   * draw stays, so the programs after it are as before. */
  (void)chance(g, 80);
  int x = add_param(g, &in);
  gen_shape_t r = in;
  kiln_strbuf_t len = {0};
  for (int i = in.rank - nf; i < in.rank; i++) {
    int64_t n = in.dims[i];
    if (i == in.rank - 1 && kind == 2) r.dims[i] = n / 2 + 1;
    if (i == in.rank - 1 && kind == 3) n = r.dims[i] = 2 * (in.dims[i] - 1) + rnd(g, 2);
    if (n == 0) {
      kiln_strbuf_free(&len);
      return -1;
    }
    kiln_strbuf_printf(&len, "%s%lld", i > in.rank - nf ? "," : "", (long long)n);
  }
  if (kind == 2) r.type = t == T_F32 ? T_C64 : T_C128;
  if (kind == 3) r.type = t == T_C64 ? T_F32 : T_F64;
  random_layout(g, &r);
  char *attrs = xprintf(", fft_type=%s, fft_length={%s}", kKinds[kind], kiln_strbuf_cstr(&len));
  kiln_strbuf_free(&len);
  return add_node(g, "fft", &r, &x, 1, attrs, NULL);
}

/* An f32 / f64 [B?, n, n] shape for the linear-algebra operations. */
static gen_shape_t square_shape(gen_t *g, int64_t n) {
  gen_shape_t s;
  memset(&s, 0, sizeof s);
  s.type = chance(g, 70) ? T_F32 : T_F64;
  if (chance(g, 40)) s.dims[s.rank++] = 1 + rnd(g, 3);
  s.dims[s.rank++] = n;
  s.dims[s.rank++] = n;
  default_layout(&s);
  return s;
}

/* cholesky of A A^T + n I (A a new parameter: entries in [-1, 1), so every eigenvalue is at
 * least n and the factor is well conditioned). */
static int op_cholesky(gen_t *g) {
  int64_t n = 1 + rnd(g, 8);
  gen_shape_t s = square_shape(g, n);
  int a = add_param(g, &s);
  int ops[2] = {a, a};
  bool batch = s.rank == 3;
  int aat = add_node(g, "dot", &s, ops, 2,
                     batch ? xprintf(", lhs_batch_dims={0}, lhs_contracting_dims={2}, "
                                     "rhs_batch_dims={0}, rhs_contracting_dims={2}")
                           : xprintf(", lhs_contracting_dims={1}, rhs_contracting_dims={1}"),
                     NULL);
  int spd = add_diagonal(g, aat, &s, n);
  gen_shape_t r = s;
  random_layout(g, &r);
  return add_node(g, "cholesky", &r, &spd, 1,
                  xprintf(", lower=%s", chance(g, 50) ? "true" : "false"), NULL);
}

/* triangular-solve with A = X + (n + 1) I (X a new parameter, entries in [-1, 1)): the
 * diagonal dominates, or is taken as ones (unit_diagonal; the inverse then grows at most
 * 2^(n-1) for n <= 8). */
static int op_triangular_solve(gen_t *g) {
  int64_t n = 1 + rnd(g, 8);
  gen_shape_t s = square_shape(g, n);
  int x = add_param(g, &s);
  int a = add_diagonal(g, x, &s, n + 1);
  bool left = chance(g, 50);
  gen_shape_t bs = s;
  bs.dims[s.rank - (left ? 1 : 2)] = 1 + rnd(g, 6);
  random_layout(g, &bs);
  int ops[2] = {a, node_like(g, &bs)};
  static const char *kTranspose[] = {"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"};
  char *attrs = xprintf(", left_side=%s, lower=%s, unit_diagonal=%s, transpose_a=%s",
                        left ? "true" : "false", chance(g, 50) ? "true" : "false",
                        chance(g, 30) ? "true" : "false", kTranspose[rnd(g, 3)]);
  gen_shape_t r = bs;
  random_layout(g, &r);
  return add_node(g, "triangular-solve", &r, ops, 2, attrs, NULL);
}

/* reduce-precision to a random (exponent, mantissa) format. Exact operands only (it rounds:
 * a last-bit difference may round to another value). */
static int op_reduce_precision(gen_t *g) {
  int x = pick(g, float_type, 0);
  gen_shape_t s = *shape_of(g, x);
  random_layout(g, &s);
  return add_node(g, "reduce-precision", &s, &x, 1,
                  xprintf(", exponent_bits=%d, mantissa_bits=%d", 1 + rnd(g, 8), rnd(g, 11)), NULL);
}

/* batch-norm-inference / -training / -grad on f32 / f64 (the batch_norm_expander pass
 * rewrites them); variances are the abs of a value, so never negative. */
static int op_batch_norm(gen_t *g) {
  int x = pick(g, wide_float_type, 2);
  gen_shape_t in = *shape_of(g, x);
  if (num_elements(&in) == 0) return -1;
  int fi = rnd(g, in.rank);
  gen_shape_t fs;
  memset(&fs, 0, sizeof fs);
  fs.type = in.type;
  fs.rank = 1;
  fs.dims[0] = in.dims[fi];
  default_layout(&fs);
  static const char *kEps[] = {"0.001", "0.1", "1"};
  char *attrs = xprintf(", epsilon=%s, feature_index=%d", kEps[rnd(g, 3)], fi);
  int kind = rnd(g, 3);
  int scale = node_like(g, &fs), offset = node_like(g, &fs);
  if (kind == 1) {
    int ops[3] = {x, scale, offset};
    const gen_shape_t *s[3] = {&in, &fs, &fs};
    return tuple_op(g, "batch-norm-training", s, 3, ops, 3, attrs, NULL);
  }
  int mean = node_like(g, &fs), v = node_like(g, &fs);
  int var = add_node(g, "abs", &fs, &v, 1, NULL, NULL);
  if (kind == 0) {
    int ops[5] = {x, scale, offset, mean, var};
    gen_shape_t r = in;
    random_layout(g, &r);
    return add_node(g, "batch-norm-inference", &r, ops, 5, attrs, NULL);
  }
  gen_shape_t gs = in;
  random_layout(g, &gs);
  int ops[5] = {x, scale, mean, var, node_like(g, &gs)};
  const gen_shape_t *s[3] = {&in, &fs, &fs};
  return tuple_op(g, "batch-norm-grad", s, 3, ops, 5, attrs, NULL);
}

/* custom-call to a target kiln's host runtime implements itself: XLA:CPU's layer norm over
 * the last dimension (epsilon 1e-3 as f32 bits). */
static int op_custom_call(gen_t *g) {
  int x = pick(g, wide_float_type, 1);
  gen_shape_t in = *shape_of(g, x);
  gen_shape_t ls;
  memset(&ls, 0, sizeof ls);
  ls.type = in.type;
  ls.rank = 1;
  ls.dims[0] = in.dims[in.rank - 1];
  default_layout(&ls);
  int ops[3] = {x, node_like(g, &ls), node_like(g, &ls)};
  gen_shape_t r = in;
  random_layout(g, &r);
  return add_node(g, "custom-call", &r, ops, 3,
                  xprintf(", custom_call_target=\"__onednn$layernorm\", "
                          "backend_config=\"{\\\"onednn_layer_norm_config\\\":{\\\"rescale\\\":"
                          "\\\"SCALE_AND_SHIFT\\\",\\\"epsilon_typed\\\":981668463}}\""),
                  NULL);
}

/* rng-bit-generator: (new state, bits) from a state parameter; deterministic for a given
 * state and algorithm (three_fry: u64[2]; philox: u64[2] or u64[3]). */
static int op_rng_bit_generator(gen_t *g) {
  bool philox = chance(g, 50);
  gen_shape_t st;
  memset(&st, 0, sizeof st);
  st.type = T_U64;
  st.rank = 1;
  st.dims[0] = philox && chance(g, 50) ? 3 : 2;
  default_layout(&st);
  int state = add_param(g, &st);
  gen_shape_t bits = random_shape(g, chance(g, 60) ? T_U32 : T_U64, rnd(g, 3));
  const gen_shape_t *s[2] = {&st, &bits};
  return tuple_op(g, "rng-bit-generator", s, 2, &state, 1,
                  xprintf(", algorithm=%s", philox ? "rng_philox" : "rng_three_fry"), NULL);
}

/* rng(a, b): uniform over [a, b) (floats, 8- to 64-bit integers; an empty range gives a) or
 * normal with mean a and standard deviation b (floats), drawn as rng_expander expands it
 * (the evaluator draws the same). One per program at most: of two independent rngs, which
 * draws first is the schedule's choice, which the evaluator does not know. */
static int op_rng(gen_t *g) {
  static const char *const kTypeNames[] = {"f32", "f16", "bf16", "f64", "s8",  "s16",
                                           "s32", "s64", "u8",   "u16", "u32", "u64"};
  static const char *const kUniform[][2] = {{"0", "1"}, {"-2", "3"}, {"1", "1.01"}, {"3", "-1"}};
  static const char *const kNormal[][2] = {{"0", "1"}, {"5", "2"}, {"-1", "0.5"}};
  static const char *const kSigned[][2] = {{"-3", "4"}, {"-100", "120"}, {"5", "5"}};
  static const char *const kUnsigned[][2] = {{"0", "10"}, {"7", "9"}, {"9", "7"}};
  if (g->drew_rng) return -1;
  const char *name = kTypeNames[rnd(g, 12)];
  int t = 0;
  while (strcmp(kTypes[t].name, name) != 0) t++;
  const char *const *ab;
  bool normal = false;
  if (is_float(t)) {
    normal = chance(g, 50);
    ab = normal ? kNormal[rnd(g, 3)] : kUniform[rnd(g, 4)];
  } else {
    ab = kTypes[t].kind == K_S ? kSigned[rnd(g, 3)] : kUnsigned[rnd(g, 3)];
  }
  gen_shape_t r = random_shape(g, t, rnd(g, 3));
  int ops[2] = {add_constant(g, t, ab[0]), add_constant(g, t, ab[1])};
  g->drew_rng = true;
  return add_node(g, "rng", &r, ops, 2,
                  xprintf(", distribution=%s", normal ? "rng_normal" : "rng_uniform"), NULL);
}

/* rng and rng-bit-generator share rng-bit-generator's old weight, so every other op keeps its
 * draws. */
static int op_rng_either(gen_t *g) {
  return chance(g, 50) ? op_rng_bit_generator(g) : op_rng(g);
}

/* Collectives on a world of one device (the differential test runs on one host device):
 * every group holds that device alone. */
static int op_collective(gen_t *g) {
  static const char *kOps[] = {"all-reduce", "all-gather",         "reduce-scatter",
                               "all-to-all", "collective-permute", "collective-broadcast",
                               "replica-id", "partition-id"};
  int k = rnd(g, 8);
  if (k >= 6) {
    gen_shape_t s = scalar_of(T_U32);
    return add_node(g, kOps[k], &s, NULL, 0, NULL, NULL);
  }
  int x = pick(g, any_type, k == 1 || k == 2 || k == 3 ? 1 : 0);
  gen_shape_t s = *shape_of(g, x);
  if (!kTypes[s.type].arith) return -1;
  const char *groups = chance(g, 50) ? "{{0}}" : "{}";
  char *attrs = NULL, *comps = NULL;
  int d = s.rank ? rnd(g, s.rank) : 0;
  if (k == 0 || k == 2) {
    char name[48];
    snprintf(name, sizeof name, "collective_reducer_%d", g->p->num_nodes);
    kiln_strbuf_t c = {0};
    binary_comp(&c, name, s.type, random_reducer(g, x, 1));
    comps = strbuf_take(&c);
    attrs = k == 0 ? xprintf(", replica_groups=%s, to_apply=%s", groups, name)
                   : xprintf(", replica_groups=%s, dimensions={%d}, to_apply=%s", groups, d, name);
  } else if (k == 1 || k == 3) {
    attrs = xprintf(", replica_groups=%s, dimensions={%d}", groups, d);
  } else if (k == 4) {
    attrs = xprintf(", source_target_pairs={{0,0}}");
  } else {
    attrs = xprintf(", replica_groups={{0}}");
  }
  random_layout(g, &s);
  return add_node(g, kOps[k], &s, &x, 1, attrs, comps);
}

/* opt-barrier of a tuple of two values. */
static int op_opt_barrier(gen_t *g) {
  int a = pick(g, any_type, 0), b = pick(g, any_type, 0);
  const gen_shape_t *s[2] = {shape_of(g, a), shape_of(g, b)};
  char *text = tuple_text(s, 2);
  int ops[2] = {a, b};
  int t = add_tuple_node(g, "tuple", text, ops, 2, NULL, NULL);
  int o = add_tuple_node(g, "opt-barrier", text, &t, 1, NULL, NULL);
  kiln_free(text);
  int which = rnd(g, 2);
  gen_shape_t r = *shape_of(g, ops[which]);
  return tuple_element(g, o, &r, which);
}

/* stochastic-convert of an f16 / bf16 / f32 / f64 value with unsigned random bits of its
 * width (a parameter) to a signed integer. Exact operands only (it rounds). */
static int op_stochastic_convert(gen_t *g) {
  static const int kIn[] = {13, 14, T_F32, T_F64}, kBits[] = {10, 10, T_U32, T_U64};
  int k = rnd(g, 4);
  gen_shape_t s = random_shape(g, kIn[k], rnd(g, 3));
  int x = node_like(g, &s);
  gen_shape_t bs = s;
  bs.type = kBits[k];
  int ops[2] = {x, add_param(g, &bs)};
  static const int kOut[] = {3, 4, T_S32, 6};
  gen_shape_t r = s;
  r.type = kOut[rnd(g, 4)];
  random_layout(g, &r);
  return add_node(g, "stochastic-convert", &r, ops, 2, NULL, NULL);
}

/* ragged-dot: lhs [m, k] whose rows fall into groups of constant sizes (summing to at most
 * m), each group multiplied by its own rhs [k, n] of rhs [g, k, n]. */
static int op_ragged_dot(gen_t *g) {
  static const int kTypesIn[] = {T_F32, T_F64, T_S32};
  int t = kTypesIn[rnd(g, 3)];
  int groups = 1 + rnd(g, 4);
  int64_t m = 0, sizes[4];
  for (int i = 0; i < groups; i++) m += sizes[i] = rnd(g, 5);
  int64_t k = 1 + rnd(g, 8), n = 1 + rnd(g, 8);
  m += rnd(g, 3);
  gen_shape_t l, r, o, gs;
  memset(&l, 0, sizeof l);
  l.type = t;
  l.rank = 2;
  l.dims[0] = m;
  l.dims[1] = k;
  default_layout(&l);
  r = l;
  r.rank = 3;
  r.dims[0] = groups;
  r.dims[1] = k;
  r.dims[2] = n;
  random_layout(g, &r);
  o = l;
  o.dims[1] = n;
  random_layout(g, &o);
  memset(&gs, 0, sizeof gs);
  gs.type = T_S32;
  gs.rank = 1;
  gs.dims[0] = groups;
  default_layout(&gs);
  kiln_strbuf_t v = {0};
  kiln_strbuf_printf(&v, "{");
  for (int i = 0; i < groups; i++)
    kiln_strbuf_printf(&v, "%s%lld", i ? ", " : "", (long long)sizes[i]);
  kiln_strbuf_printf(&v, "}");
  int sizes_node = add_node(g, "constant", &gs, NULL, 0, strbuf_take(&v), NULL);
  int ops[3] = {node_like(g, &l), node_like(g, &r), sizes_node};
  return add_node(g, "ragged-dot", &o, ops, 3,
                  xprintf(", lhs_contracting_dims={1}, rhs_contracting_dims={1}, "
                          "lhs_ragged_dims={0}, rhs_group_dims={0}"),
                  NULL);
}

/* Operations whose result jumps with their operands' last bits take exact operands only. */
#define EXACT_OPERANDS(name)          \
  static int name##_exact(gen_t *g) { \
    g->need_exact = true;             \
    int r = name(g);                  \
    g->need_exact = false;            \
    return r;                         \
  }
EXACT_OPERANDS(op_compare)
EXACT_OPERANDS(op_bitcast_convert)
EXACT_OPERANDS(op_sort)
EXACT_OPERANDS(op_argmax)
EXACT_OPERANDS(op_select_and_scatter)
EXACT_OPERANDS(op_topk)
EXACT_OPERANDS(op_reduce_precision)
EXACT_OPERANDS(op_stochastic_convert)

typedef int (*op_fn)(gen_t *g);
typedef struct op_entry {
  op_fn fn;
  int weight;
} op_entry_t;

static const op_entry_t kOps[] = {
    {op_unary, 10},
    {op_binary, 14},
    {op_compare_exact, 3},
    {op_select, 3},
    {op_clamp, 2},
    /* convert and the one-hot fusion share convert's old weight */
    {op_convert, 4},
    {op_onehot_fusion, 1},
    {op_bitcast_convert_exact, 2},
    /* broadcast and the multi-output loop fusion share broadcast's old weight */
    {op_broadcast, 5},
    {op_multi_output_fusion, 1},
    {op_transpose, 5},
    /* reshape, bitcast and the layout copy share reshape's old weight */
    {op_reshape, 2},
    {op_bitcast, 1},
    {op_layout_copy, 1},
    {op_reverse, 2},
    /* slice and the slices fusion share slice's old weight */
    {op_slice, 3},
    {op_slices_fusion, 1},
    {op_pad, 3},
    /* concatenate and its fusion share concatenate's old weight */
    {op_concatenate, 3},
    {op_concat_fusion, 1},
    {op_iota, 1},
    /* dynamic-slice and its fusion share the old weight */
    {op_dynamic_slice, 2},
    {op_ds_fusion, 1},
    /* dynamic-update-slice and its in-place fusion share the old weight */
    {op_dynamic_update_slice, 2},
    {op_dus_fusion, 1},
    /* gather and its fusion share gather's old weight */
    {op_gather, 2},
    {op_gather_fusion, 1},
    /* scatter and its fusion share scatter's old weight */
    {op_scatter, 2},
    {op_scatter_fusion, 1},
    /* reduce, the reduction fusion and argmax share reduce's old weight */
    {op_reduce, 6},
    {op_input_fusion, 1},
    {op_argmax_exact, 1},
    /* reduce-window and its fusion share reduce-window's old weight */
    {op_reduce_window, 2},
    {op_rw_fusion, 1},
    {op_dot, 4},
    {op_convolution, 2},
    {op_sort_exact, 3},
    /* while and scan share while's old weight, so every other op keeps its draws */
    {op_while, 1},
    {op_scan_either, 1},
    {op_conditional, 2},
    {op_tuple, 1},
    {op_math, 4},
    {op_complex, 1},
    /* map and fusion share map's old weight, so every other op keeps its draws */
    {op_map, 1},
    {op_fusion, 1},
    {op_call, 1},
    {op_select_and_scatter_exact, 2},
    {op_topk_exact, 2},
    {op_fft, 1},
    {op_cholesky, 1},
    {op_triangular_solve, 1},
    {op_reduce_precision_exact, 1},
    {op_batch_norm, 2},
    {op_custom_call, 1},
    /* rng and rng-bit-generator share rng-bit-generator's old weight */
    {op_rng_either, 1},
    {op_collective, 2},
    {op_opt_barrier, 1},
    {op_stochastic_convert_exact, 1},
    {op_ragged_dot, 1},
};
#define NUM_OPS ((int)(sizeof kOps / sizeof kOps[0]))

kiln_hlo_gen_program_t *kiln_hlo_gen_make(const kiln_hlo_gen_options_t *o) {
  kiln_hlo_gen_program_t *p = kiln_calloc(1, sizeof *p);
  p->opts = *o;
  if (p->opts.max_nodes <= 0) p->opts.max_nodes = 10;
  if (p->opts.max_elements <= 0) p->opts.max_elements = 1024;
  gen_t g = {p, o->seed * 0x2545F4914F6CDD1Dull + 1, 0, p->opts.max_elements, false, false};
  g.main_type = random_type(&g);
  int num_params = 1 + rnd(&g, 2);
  for (int i = 0; i < num_params; i++) {
    gen_shape_t s = random_shape(&g, g.main_type, rnd(&g, GEN_MAX_RANK + 1));
    add_param(&g, &s);
  }
  int total = 0;
  for (int i = 0; i < NUM_OPS; i++) total += kOps[i].weight;
  int steps = 1 + rnd(&g, p->opts.max_nodes);
  int last = p->num_nodes - 1;
  for (int i = 0, tries = 0; i < steps && tries < 4 * steps + 8; tries++) {
    int w = rnd(&g, total), k = 0;
    while (w >= kOps[k].weight) w -= kOps[k++].weight;
    int before = p->num_nodes;
    reserve_nodes(p, p->num_nodes + GEN_OP_NODES);
    int id = kOps[k].fn(&g);
    if (id < 0) {
      /* Drop what a refused operation left behind, so the stream stays short. */
      while (p->num_nodes > before) {
        gen_node_t *nd = &p->nodes[--p->num_nodes];
        kiln_free(nd->op), kiln_free(nd->shape), kiln_free(nd->attrs), kiln_free(nd->comps);
      }
      continue;
    }
    last = id;
    i++;
  }
  /* The root: the last value, sometimes with one or two earlier ones in a tuple. */
  p->roots[p->num_roots++] = last;
  int extra = chance(&g, 30) ? 1 + rnd(&g, 2) : 0;
  for (int i = 0; i < extra; i++) {
    int cand = rnd(&g, p->num_nodes);
    const gen_node_t *nd = &p->nodes[cand];
    if (!nd->tuple && cand != last && strcmp(nd->op, "parameter") && strcmp(nd->op, "constant"))
      p->roots[p->num_roots++] = cand;
  }
  p->entry_layout = chance(&g, 20); /* drawn last: every draw before it stays */
  return p;
}

kiln_hlo_gen_program_t *kiln_hlo_gen_clone(const kiln_hlo_gen_program_t *p) {
  kiln_hlo_gen_program_t *c = kiln_calloc(1, sizeof *c);
  *c = *p;
  c->nodes = kiln_calloc((size_t)(p->cap ? p->cap : 1), sizeof *c->nodes);
  for (int i = 0; i < p->num_nodes; i++) {
    c->nodes[i] = p->nodes[i];
    c->nodes[i].op = kiln_strdup(p->nodes[i].op);
    c->nodes[i].shape = kiln_strdup(p->nodes[i].shape);
    c->nodes[i].attrs = kiln_strdup(p->nodes[i].attrs);
    c->nodes[i].comps = kiln_strdup(p->nodes[i].comps);
  }
  return c;
}

void kiln_hlo_gen_free(kiln_hlo_gen_program_t *p) {
  if (!p) return;
  for (int i = 0; i < p->num_nodes; i++) {
    kiln_free(p->nodes[i].op);
    kiln_free(p->nodes[i].shape);
    kiln_free(p->nodes[i].attrs);
    kiln_free(p->nodes[i].comps);
  }
  kiln_free(p->nodes);
  kiln_free(p);
}

/* Marks what the roots reach. */
static void mark(const kiln_hlo_gen_program_t *p, int id, bool *live) {
  if (live[id]) return;
  live[id] = true;
  for (int i = 0; i < p->nodes[id].num_operands; i++) mark(p, p->nodes[id].operands[i], live);
}

static bool *live_nodes(const kiln_hlo_gen_program_t *p) {
  bool *live = kiln_calloc((size_t)p->num_nodes + 1, sizeof *live);
  for (int i = 0; i < p->num_roots; i++) mark(p, p->roots[i], live);
  return live;
}

int kiln_hlo_gen_size(const kiln_hlo_gen_program_t *p) {
  bool *live = live_nodes(p);
  int n = p->num_roots > 1;
  for (int i = 0; i < p->num_nodes; i++) n += live[i];
  kiln_free(live);
  return n;
}

int kiln_hlo_gen_float_divides(const kiln_hlo_gen_program_t *p, int *inexact_divisors) {
  bool *live = live_nodes(p);
  int n = 0, bad = 0;
  for (int i = 0; i < p->num_nodes; i++) {
    const gen_node_t *nd = &p->nodes[i];
    if (!live[i] || nd->tuple || strcmp(nd->op, "divide") || kTypes[nd->s.type].kind != K_F)
      continue;
    n++;
    bad += p->nodes[nd->operands[1]].inexact;
  }
  kiln_free(live);
  if (inexact_divisors) *inexact_divisors = bad;
  return n;
}

/* Node i's shape with its minor-to-major order rotated by `turn` places. */
static void turned_shape_text(kiln_strbuf_t *b, const gen_node_t *nd, uint64_t turn) {
  gen_shape_t s = nd->s;
  for (int i = 0; i < s.rank; i++) s.m2m[i] = nd->s.m2m[((uint64_t)i + turn) % (uint64_t)s.rank];
  shape_text(b, &s);
}

/* `, entry_computation_layout={(...)->...}` giving the caller's layouts: each parameter's
 * and result's written layout turned by a rotation of its minor-to-major order (the k-th
 * array's by seed + k places), so many differ from the layouts the entry computation was
 * written with, as a caller's may. Nothing when a root is a tuple. */
static void entry_layout_text(kiln_strbuf_t *b, const kiln_hlo_gen_program_t *p, const bool *live) {
  for (int k = 0; k < p->num_roots; k++)
    if (p->nodes[p->roots[k]].tuple) return;
  uint64_t turn = p->opts.seed;
  kiln_strbuf_printf(b, ", entry_computation_layout={(");
  int n = 0;
  for (int i = 0; i < p->num_nodes; i++)
    if (live[i] && !strcmp(p->nodes[i].op, "parameter")) {
      if (n++) kiln_strbuf_printf(b, ", ");
      turned_shape_text(b, &p->nodes[i], turn++);
    }
  kiln_strbuf_printf(b, ")->%s", p->num_roots > 1 ? "(" : "");
  for (int k = 0; k < p->num_roots; k++) {
    if (k) kiln_strbuf_printf(b, ", ");
    turned_shape_text(b, &p->nodes[p->roots[k]], turn++);
  }
  kiln_strbuf_printf(b, "%s}", p->num_roots > 1 ? ")" : "");
}

char *kiln_hlo_gen_render(const kiln_hlo_gen_program_t *p) {
  bool *live = live_nodes(p);
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, "HloModule fuzz_%llu", (unsigned long long)p->opts.seed);
  if (p->entry_layout) entry_layout_text(&b, p, live);
  kiln_strbuf_printf(&b, "\n\n");
  for (int i = 0; i < p->num_nodes; i++)
    if (live[i]) kiln_strbuf_printf(&b, "%s", p->nodes[i].comps);
  kiln_strbuf_printf(&b, "ENTRY main {\n");
  int param = 0;
  int last_root = p->roots[0];
  for (int i = 0; i < p->num_nodes; i++) {
    if (!live[i]) continue;
    const gen_node_t *nd = &p->nodes[i];
    bool root = p->num_roots == 1 && i == last_root;
    kiln_strbuf_printf(&b, "  %sv%d = %s ", root ? "ROOT " : "", i, nd->shape);
    if (!strcmp(nd->op, "parameter")) {
      kiln_strbuf_printf(&b, "parameter(%d)\n", param++);
      continue;
    }
    if (!strcmp(nd->op, "constant")) {
      kiln_strbuf_printf(&b, "constant(%s)\n", nd->attrs);
      continue;
    }
    kiln_strbuf_printf(&b, "%s(", nd->op);
    for (int k = 0; k < nd->num_operands; k++)
      kiln_strbuf_printf(&b, "%sv%d", k ? ", " : "", nd->operands[k]);
    kiln_strbuf_printf(&b, ")%s\n", nd->attrs);
    if (root) break;
  }
  if (p->num_roots > 1) {
    kiln_strbuf_printf(&b, "  ROOT out = (");
    for (int k = 0; k < p->num_roots; k++)
      kiln_strbuf_printf(&b, "%s%s", k ? ", " : "", p->nodes[p->roots[k]].shape);
    kiln_strbuf_printf(&b, ") tuple(");
    for (int k = 0; k < p->num_roots; k++)
      kiln_strbuf_printf(&b, "%sv%d", k ? ", " : "", p->roots[k]);
    kiln_strbuf_printf(&b, ")\n");
  }
  kiln_strbuf_printf(&b, "}\n");
  kiln_free(live);
  return strbuf_take(&b);
}

/* ---- minimization ---- */

static bool try_candidate(kiln_hlo_gen_program_t **p, kiln_hlo_gen_program_t *cand,
                          kiln_hlo_gen_predicate_fn fails, void *ctx, int *tries) {
  char *text = kiln_hlo_gen_render(cand);
  (*tries)++;
  bool f = fails(ctx, text);
  kiln_free(text);
  if (!f) {
    kiln_hlo_gen_free(cand);
    return false;
  }
  kiln_hlo_gen_free(*p);
  *p = cand;
  return true;
}

/* Turns node `id` into a parameter of its shape (its operands and computations drop). */
static void make_parameter(kiln_hlo_gen_program_t *p, int id) {
  gen_node_t *nd = &p->nodes[id];
  kiln_free(nd->op);
  nd->op = kiln_strdup("parameter");
  nd->num_operands = 0;
  kiln_free(nd->attrs);
  nd->attrs = kiln_strdup("");
  kiln_free(nd->comps);
  nd->comps = kiln_strdup("");
}

/* Whether node `id` is one of the roots. */
static bool is_root(const kiln_hlo_gen_program_t *p, int id) {
  for (int r = 0; r < p->num_roots; r++)
    if (p->roots[r] == id) return true;
  return false;
}

/* Whether `id` is an operation the roots reach (not a parameter, tuple or constant). */
static bool live_operation(const kiln_hlo_gen_program_t *p, int id) {
  const gen_node_t *nd = &p->nodes[id];
  if (nd->tuple || !strcmp(nd->op, "parameter") || !nd->num_operands) return false;
  bool *live = live_nodes(p);
  bool reachable = live[id];
  kiln_free(live);
  return reachable;
}

/* A copy of `p` with node `id` dropped: its users (and the roots) take its operand `k`
 * instead, which has the same shape. */
static kiln_hlo_gen_program_t *bypass(const kiln_hlo_gen_program_t *p, int id, int k) {
  kiln_hlo_gen_program_t *c = kiln_hlo_gen_clone(p);
  int to = p->nodes[id].operands[k];
  for (int i = id + 1; i < c->num_nodes; i++)
    for (int j = 0; j < c->nodes[i].num_operands; j++)
      if (c->nodes[i].operands[j] == id) c->nodes[i].operands[j] = to;
  for (int r = 0; r < c->num_roots; r++)
    if (c->roots[r] == id) c->roots[r] = to;
  return c;
}

int kiln_hlo_gen_minimize(kiln_hlo_gen_program_t **p, kiln_hlo_gen_predicate_fn fails, void *ctx,
                          int max_tries) {
  int tries = 0;
  /* 1. One root: the first node whose value alone still fails (earliest is smallest). */
  for (int id = 0; id < (*p)->num_nodes && tries < max_tries; id++) {
    if ((*p)->nodes[id].tuple || !strcmp((*p)->nodes[id].op, "parameter")) continue;
    bool *live = live_nodes(*p);
    bool reachable = live[id];
    kiln_free(live);
    if (!reachable || ((*p)->num_roots == 1 && (*p)->roots[0] == id)) continue;
    kiln_hlo_gen_program_t *c = kiln_hlo_gen_clone(*p);
    c->num_roots = 1;
    c->roots[0] = id;
    if (try_candidate(p, c, fails, ctx, &tries)) break;
  }
  /* 2. Instructions dropped, from the root down, until nothing more goes: a node whose operand
   * has its shape is bypassed (its users read the operand), else its subtree is replaced by
   * a parameter of its shape. */
  for (bool progress = true; progress && tries < max_tries;) {
    progress = false;
    for (int id = (*p)->num_nodes - 1; id >= 0 && tries < max_tries; id--) {
      if (!live_operation(*p, id)) continue;
      bool dropped = false;
      for (int k = 0; k < (*p)->nodes[id].num_operands && !dropped && tries < max_tries; k++) {
        const gen_node_t *in = &(*p)->nodes[(*p)->nodes[id].operands[k]];
        if (in->tuple || strcmp(in->shape, (*p)->nodes[id].shape) != 0) continue;
        dropped = try_candidate(p, bypass(*p, id, k), fails, ctx, &tries);
      }
      if (!dropped && !is_root(*p, id) && tries < max_tries) {
        kiln_hlo_gen_program_t *c = kiln_hlo_gen_clone(*p);
        make_parameter(c, id);
        dropped = try_candidate(p, c, fails, ctx, &tries);
      }
      progress |= dropped;
    }
  }
  return tries;
}

/* ---- shrinking the dimensions of module text ---- */

/* Whether text[i] opens a shape's dimension list: `[` after an element type's name
 * (a letter or digit), followed by digits and commas up to `]`. */
static bool dims_open(const char *text, size_t i) {
  if (text[i] != '[' || i == 0) return false;
  char b = text[i - 1];
  if (!((b >= 'a' && b <= 'z') || (b >= '0' && b <= '9'))) return false;
  size_t j = i + 1;
  while ((text[j] >= '0' && text[j] <= '9') || text[j] == ',') j++;
  return text[j] == ']';
}

/* Attributes whose numbers name dimension sizes or bounds: a slice's starts and limits, a
 * window's sizes, gather / dynamic-slice sizes, FFT lengths. */
static const char *const kDimAttrs[] = {"slice={", "window={size=", "slice_sizes={",
                                        "dynamic_slice_sizes={", "fft_length={"};

/* Whether text[i] starts one of kDimAttrs (after a space or a comma); *len gets its length. */
static bool dim_attr_at(const char *text, size_t i, size_t *len) {
  if (i == 0 || (text[i - 1] != ' ' && text[i - 1] != ',')) return false;
  for (size_t k = 0; k < sizeof kDimAttrs / sizeof kDimAttrs[0]; k++) {
    size_t n = strlen(kDimAttrs[k]);
    if (!strncmp(text + i, kDimAttrs[k], n)) return *len = n, true;
  }
  return false;
}

/* `text` with every dimension of size `from` in its shapes made `to`; with `attrs`, also
 * every number `from` in the attributes of kDimAttrs (up to the closing brace; a window's
 * sizes up to the space before its strides), so a slice of the whole dimension or a window
 * as wide as it shrinks with the shape. */
static char *replace_dim(const char *text, int64_t from, int64_t to, bool attrs) {
  kiln_strbuf_t b = {0};
  for (size_t i = 0, n; text[i];) {
    if (attrs && dim_attr_at(text, i, &n)) {
      kiln_strbuf_printf(&b, "%.*s", (int)n, text + i);
      bool window = text[i] == 'w'; /* its sizes end at the space before stride= */
      for (i += n; text[i] && text[i] != '}' && !(window && text[i] == ' ');) {
        if (text[i] < '0' || text[i] > '9') {
          kiln_strbuf_printf(&b, "%c", text[i++]);
          continue;
        }
        char *end = NULL;
        long long d = strtoll(text + i, &end, 10);
        kiln_strbuf_printf(&b, "%lld", d == from ? (long long)to : d);
        i = (size_t)(end - text);
      }
      continue;
    }
    if (!dims_open(text, i)) {
      kiln_strbuf_printf(&b, "%c", text[i++]);
      continue;
    }
    kiln_strbuf_printf(&b, "[");
    i++;
    while (text[i] != ']') {
      if (text[i] == ',') {
        kiln_strbuf_printf(&b, ",");
        i++;
        continue;
      }
      char *end = NULL;
      long long d = strtoll(text + i, &end, 10);
      kiln_strbuf_printf(&b, "%lld", d == from ? (long long)to : d);
      i = (size_t)(end - text);
    }
  }
  return strbuf_take(&b);
}

/* The largest dimension size over 1 in `text`'s shapes below `below`, or 0. */
static int64_t largest_dim(const char *text, int64_t below) {
  int64_t best = 0;
  for (size_t i = 0; text[i]; i++) {
    if (!dims_open(text, i)) continue;
    for (const char *s = text + i + 1; *s != ']';) {
      char *end = NULL;
      long long d = strtoll(s, &end, 10);
      if (d > 1 && d < below && d > best) best = d;
      s = *end == ',' ? end + 1 : end;
    }
  }
  return best;
}

char *kiln_hlo_gen_shrink_dims(const char *text, kiln_hlo_gen_predicate_fn fails, void *ctx,
                               int max_tries, int *tries) {
  char *cur = kiln_strdup(text);
  /* Sizes from the largest down; each tried at 1, then halved, then less by one: first in
   * the shapes alone, then also where attributes name it (a candidate the same as the first
   * is not tried again). */
  for (int64_t d = largest_dim(cur, INT64_MAX); d > 1 && *tries < max_tries;
       d = largest_dim(cur, d)) {
    int64_t to[3] = {1, d / 2, d - 1};
    bool done = false;
    for (int k = 0; k < 6 && !done && *tries < max_tries; k++) {
      int j = k % 3;
      if (to[j] < 1 || (j && to[j] == to[j - 1])) continue;
      char *cand = replace_dim(cur, d, to[j], k >= 3);
      char *plain = k >= 3 ? replace_dim(cur, d, to[j], false) : NULL;
      bool same = plain && !strcmp(plain, cand);
      kiln_free(plain);
      if (!same) {
        (*tries)++;
        done = fails(ctx, cand);
      }
      if (done) {
        kiln_free(cur);
        cur = cand;
      } else {
        kiln_free(cand);
      }
    }
  }
  return cur;
}
