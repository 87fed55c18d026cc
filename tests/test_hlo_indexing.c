/* Per-opcode output->input (and input->output) indexing maps, each checked by brute force
 * against the reference evaluator: every operand holds distinct values (or a
 * powers-of-two / one-hot encoding for reductions), the op is evaluated with
 * kiln_eval_module, and for every output element the map must name exactly the operand
 * elements the evaluator read. Runtime variables are bound to the values their sources
 * give (clamped into the variable's interval) at each point. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/vec.h"
#include "compiler/analysis/hlo_indexing.h"
#include "compiler/eval/eval.h"

/* ---- harness ---- */

typedef struct op_case {
  kiln_hlo_module_t *m;
  const kiln_hlo_instruction_t *root;
  kiln_arena_t arena;
  kiln_literal_t **args; /* one per entry parameter, in parameter order */
  int nargs;
  kiln_literal_t *result;
  kiln_affine_ctx_t *ctx;
  kiln_hlo_indexing_t ix;
} op_case_t;

static int64_t linear_of(const kiln_shape_t *s, const int64_t *idx) {
  int64_t lin = 0;
  for (int i = 0; i < s->rank; i++) {
    assert_true(idx[i] >= 0 && idx[i] < s->dims[i]);
    lin = lin * s->dims[i] + idx[i];
  }
  return lin;
}

/* Parses a module whose entry root is the op under test and whose entry parameters are
 * its operands (in any order). Float parameters get value_fn(k, i); integer ones take
 * `ints[k]` (the i-th value) when given. */
typedef double (*value_fn)(int param, int64_t i, void *user);

static void case_open(op_case_t *c, const char *text) {
  memset(c, 0, sizeof *c);
  kiln_arena_init(&c->arena);
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &c->m);
  if (s) {
    fprintf(stderr, "parse: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    fail();
  }
  c->root = c->m->entry->root;
  c->nargs = c->m->entry->num_parameters;
  c->args = kiln_calloc((size_t)c->nargs + 1, sizeof *c->args);
  for (int k = 0; k < c->nargs; k++)
    c->args[k] = kiln_literal_make(&c->arena, c->m->entry->parameters[k]->shape);
  c->ctx = kiln_affine_ctx_create();
}

static void case_fill(op_case_t *c, int param, value_fn fn, void *user) {
  kiln_literal_t *l = c->args[param];
  for (int64_t i = 0; i < l->num_elements; i++) {
    if (kiln_elem_type_is_integral(l->shape->type)) kiln_literal_set_s64(l, i, (int64_t)fn(param, i, user));
    else kiln_literal_set_f64(l, i, fn(param, i, user));
  }
}

static void case_eval(op_case_t *c) {
  kiln_status s = kiln_eval_module(c->m, NULL, c->nargs, c->args, &c->arena, &c->result);
  if (s) {
    fprintf(stderr, "eval: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    fail();
  }
}

static void case_index(op_case_t *c, int output_index) {
  kiln_hlo_indexing_free(&c->ix);
  kiln_status s = kiln_hlo_indexing_output_to_input(c->ctx, c->root, output_index, &c->ix);
  if (s) {
    fprintf(stderr, "indexing: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    fail();
  }
  assert_int_equal(c->ix.num_operands, c->root->num_operands);
}

static void case_close(op_case_t *c) {
  kiln_hlo_indexing_free(&c->ix);
  kiln_affine_ctx_destroy(c->ctx);
  kiln_free(c->args);
  kiln_arena_destroy(&c->arena);
  kiln_hlo_module_destroy(c->m);
}

/* The literal passed for operand k of the root. */
static const kiln_literal_t *operand_value(const op_case_t *c, int k) {
  const kiln_hlo_instruction_t *p = c->root->operands[k];
  assert_int_equal(p->opcode, KILN_OP_PARAMETER);
  return c->args[p->parameter_number];
}

typedef struct pair {
  int64_t o, p, q; /* output element, operand element, paired operand element (or -1) */
} pair_t;
typedef KILN_VEC(pair_t) pair_vec_t;

typedef struct enum_state {
  const op_case_t *c;
  const kiln_hlo_operand_indexing_t *oi;
  const kiln_shape_t *os, *is, *qs;
  const kiln_indexing_map_t *paired; /* evaluated at the same point, may be NULL */
  pair_vec_t *out;
} enum_state_t;

/* Is the point's runtime-variable assignment the one the evaluator uses? */
static bool rts_bound(const enum_state_t *st, const int64_t *dims, const int64_t *rts) {
  const kiln_indexing_map_t *m = st->oi->map;
  for (int i = 0; i < st->oi->num_rts; i++) {
    const kiln_hlo_rt_source_t *src = &st->oi->rts[i];
    const kiln_literal_t *v = operand_value(st->c, src->operand);
    int64_t idx[8] = {0};
    assert_true(src->map->results.len <= 8);
    assert_true(kiln_indexing_map_eval(src->map, dims, NULL, NULL, idx));
    int64_t val = kiln_literal_get_s64(v, linear_of(v->shape, idx));
    kiln_interval_t b = m->vars[KILN_INDEXING_RT].data[i].bounds;
    if (val < b.lo) val = b.lo;
    if (val > b.hi) val = b.hi;
    if (val != rts[i]) return false;
  }
  return true;
}

static bool enum_point(void *user, const int64_t *dims, const int64_t *syms, const int64_t *rts,
                       const int64_t *results) {
  enum_state_t *st = user;
  if (!rts_bound(st, dims, rts)) return true;
  pair_t pr = {linear_of(st->os, dims), linear_of(st->is, results), -1};
  if (st->paired) {
    int64_t q[16];
    assert_true(kiln_indexing_map_contains(st->paired, dims, syms, rts));
    assert_true(kiln_indexing_map_eval(st->paired, dims, syms, rts, q));
    pr.q = linear_of(st->qs, q);
  }
  kiln_vec_push(st->out, pr);
  return true;
}

/* All (output, operand element) pairs that operand k's map names. */
static void collect(const op_case_t *c, int k, const kiln_indexing_map_t *paired,
                    const kiln_shape_t *qs, pair_vec_t *out) {
  const kiln_hlo_operand_indexing_t *oi = &c->ix.operands[k];
  assert_non_null(oi->map);
  enum_state_t st = {c, oi, c->result->shape, c->root->operands[k]->shape, qs, paired, out};
  assert_int_equal(oi->num_rts, (int)kiln_indexing_map_num_rts(oi->map));
  kiln_status s = kiln_indexing_map_for_each_point(oi->map, 1u << 22, enum_point, &st);
  if (s) {
    fprintf(stderr, "enumerate: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    fail();
  }
}

static double distinct_value(int param, int64_t i, void *user) {
  return (double)(param + 1) * 100000.0 + (double)i;
}

/* Data movement: every output element is one operand element. For each output element,
 * the operand element the evaluator copied (decoded from its distinct value) must be
 * named by that operand's map; an operand marked exact must name nothing else, and no
 * other exact operand may name the element. `exact` is a bitmask over operands. */
static void check_data_movement(op_case_t *c, unsigned exact) {
  int n = c->root->num_operands;
  pair_vec_t *named = kiln_calloc((size_t)n, sizeof *named);
  for (int k = 0; k < n; k++) collect(c, k, NULL, NULL, &named[k]);
  int64_t on = c->result->num_elements;
  for (int64_t o = 0; o < on; o++) {
    double v = kiln_literal_get_f64(c->result, o);
    int param = (int)(v / 100000.0) - 1;
    int64_t src = (int64_t)(v - (double)(param + 1) * 100000.0);
    int ksrc = -1;
    for (int k = 0; k < n; k++)
      if (c->root->operands[k]->parameter_number == param) ksrc = k;
    assert_true(ksrc >= 0);
    bool found = false;
    for (int k = 0; k < n; k++) {
      for (size_t i = 0; i < named[k].len; i++) {
        if (named[k].data[i].o != o) continue;
        if (k == ksrc && named[k].data[i].p == src) {
          found = true;
        } else if (exact & (1u << k)) {
          fprintf(stderr, "output %lld: operand %d's map names element %lld, evaluator read operand %d element %lld\n",
                  (long long)o, k, (long long)named[k].data[i].p, ksrc, (long long)src);
          fail();
        }
      }
    }
    if (!found) {
      fprintf(stderr, "output %lld read operand %d element %lld, which its map does not name\n",
              (long long)o, ksrc, (long long)src);
      fail();
    }
  }
  for (int k = 0; k < n; k++) kiln_vec_free(&named[k]);
  kiln_free(named);
}

static double pow2_value(int param, int64_t i, void *user) {
  int which = *(int *)user;
  return param == which ? ldexp(1.0, (int)i) : 0.0;
}

/* Sum reductions: operand k holds 2^i, the init 0; each output must equal the sum of
 * 2^p over the points the map names (with multiplicity). */
static void check_sum_encoding(op_case_t *c, int k) {
  pair_vec_t named = {0};
  collect(c, k, NULL, NULL, &named);
  int64_t on = c->result->num_elements;
  double *want = kiln_calloc((size_t)on + 1, sizeof *want);
  for (size_t i = 0; i < named.len; i++) want[named.data[i].o] += ldexp(1.0, (int)named.data[i].p);
  for (int64_t o = 0; o < on; o++) {
    double got = kiln_literal_get_f64(c->result, o);
    if (got != want[o]) {
      fprintf(stderr, "output %lld: evaluator %.17g, map names %.17g\n", (long long)o, got, want[o]);
      fail();
    }
  }
  kiln_free(want);
  kiln_vec_free(&named);
}

typedef struct onehot {
  int hot_param, pow_param;
  int64_t hot;
} onehot_t;

static double onehot_value(int param, int64_t i, void *user) {
  const onehot_t *h = user;
  if (param == h->hot_param) return i == h->hot ? 1.0 : 0.0;
  if (param == h->pow_param) return ldexp(1.0, (int)i);
  return 0.0;
}

/* Contractions (dot, convolution): lhs one-hot at each position q in turn, rhs 2^j. The
 * output must equal the sum over points whose lhs element is q of 2^(rhs element), which
 * checks both maps and that they pair the same elements at each point. */
static void check_contraction(op_case_t *c) {
  const kiln_indexing_map_t *rmap = c->ix.operands[1].map;
  assert_non_null(rmap);
  pair_vec_t named = {0};
  collect(c, 0, rmap, c->root->operands[1]->shape, &named);
  /* Every rhs point is an lhs point too (same domains). */
  pair_vec_t rnamed = {0};
  collect(c, 1, NULL, NULL, &rnamed);
  assert_int_equal(rnamed.len, named.len);
  kiln_vec_free(&rnamed);
  int lp = (int)c->root->operands[0]->parameter_number, rp = (int)c->root->operands[1]->parameter_number;
  int64_t ln = c->args[lp]->num_elements, on = c->result->shape ? kiln_shape_num_elements(c->result->shape) : 0;
  double *want = kiln_calloc((size_t)on + 1, sizeof *want);
  for (int64_t q = 0; q < ln; q++) {
    onehot_t h = {lp, rp, q};
    case_fill(c, lp, onehot_value, &h);
    case_fill(c, rp, onehot_value, &h);
    case_eval(c);
    memset(want, 0, sizeof *want * (size_t)(on + 1));
    for (size_t i = 0; i < named.len; i++)
      if (named.data[i].p == q) want[named.data[i].o] += ldexp(1.0, (int)named.data[i].q);
    for (int64_t o = 0; o < on; o++) {
      double got = kiln_literal_get_f64(c->result, o);
      if (got != want[o]) {
        fprintf(stderr, "lhs one-hot %lld, output %lld: evaluator %.17g, maps name %.17g\n",
                (long long)q, (long long)o, got, want[o]);
        fail();
      }
    }
  }
  kiln_free(want);
  kiln_vec_free(&named);
}

static int cmp_pair(const void *a, const void *b) {
  const pair_t *x = a, *y = b;
  if (x->o != y->o) return x->o < y->o ? -1 : 1;
  if (x->p != y->p) return x->p < y->p ? -1 : 1;
  return 0;
}

typedef struct inv_state {
  const kiln_shape_t *is, *os;
  pair_vec_t *v;
} inv_state_t;

static bool inv_point(void *user, const int64_t *dims, const int64_t *syms, const int64_t *rts,
                      const int64_t *results) {
  inv_state_t *st = user;
  pair_t pr = {linear_of(st->os, results), linear_of(st->is, dims), -1};
  kiln_vec_push(st->v, pr);
  return true;
}

/* Sorts and removes duplicates. */
static void pairs_unique(pair_vec_t *v) {
  if (v->len == 0) return;
  qsort(v->data, v->len, sizeof *v->data, cmp_pair);
  size_t n = 1;
  for (size_t i = 1; i < v->len; i++)
    if (cmp_pair(&v->data[i], &v->data[n - 1]) != 0) v->data[n++] = v->data[i];
  v->len = n;
}

/* The input->output map of operand k must describe the same relation as the
 * output->input map (as sets of (output, operand element) pairs). */
static void check_inverse_matches(op_case_t *c, int k) {
  pair_vec_t fwd = {0}, inv = {0};
  collect(c, k, NULL, NULL, &fwd);
  kiln_indexing_map_t *m = NULL;
  kiln_status s = kiln_hlo_indexing_input_to_output(c->ctx, c->root, k, 0, &m);
  assert_null(s);
  assert_non_null(m);
  inv_state_t st = {c->root->operands[k]->shape, c->result->shape, &inv};
  s = kiln_indexing_map_for_each_point(m, 1u << 22, inv_point, &st);
  if (s) {
    fprintf(stderr, "enumerate inverse: %s\n", kiln_status_message(s));
    fail();
  }
  pairs_unique(&fwd);
  pairs_unique(&inv);
  if (fwd.len != inv.len) {
    char *t = kiln_indexing_map_to_string(m);
    fprintf(stderr, "operand %d: output->input names %zu pairs, input->output %zu (%s)\n", k,
            fwd.len, inv.len, t);
    kiln_free(t);
    fail();
  }
  for (size_t i = 0; i < fwd.len; i++) assert_int_equal(cmp_pair(&fwd.data[i], &inv.data[i]), 0);
  kiln_indexing_map_free(m);
  kiln_vec_free(&fwd);
  kiln_vec_free(&inv);
}

/* Asserts operand k's map prints as `want`. */
static void assert_map(const op_case_t *c, int k, const char *want) {
  const kiln_indexing_map_t *m = c->ix.operands[k].map;
  assert_non_null(m);
  char *s = kiln_indexing_map_to_string(m);
  if (strcmp(s, want) != 0) {
    fprintf(stderr, "operand %d\nexpected: %s\n  actual: %s\n", k, want, s);
    kiln_free(s);
    fail();
  }
  kiln_free(s);
}

/* Runs a data-movement case: distinct values, evaluate, index, check. */
static void data_case(const char *text, unsigned exact, const char *const *want_maps) {
  op_case_t c;
  case_open(&c, text);
  for (int k = 0; k < c.nargs; k++)
    if (!kiln_elem_type_is_integral(c.args[k]->shape->type)) case_fill(&c, k, distinct_value, NULL);
  case_eval(&c);
  case_index(&c, 0);
  if (want_maps)
    for (int k = 0; want_maps[k]; k++)
      if (want_maps[k][0]) assert_map(&c, k, want_maps[k]);
  check_data_movement(&c, exact);
  for (int k = 0; k < c.root->num_operands; k++)
    if (exact & (1u << k)) check_inverse_matches(&c, k);
  case_close(&c);
}

/* ---- tests ---- */

static void test_elementwise_maps_are_identity_and_scalars_read_once(void **state) {
  /* clamp(lo, x, hi) with lo below and hi above every x: x is read; the scalar bounds are
   * read at every output element. */
  op_case_t c;
  case_open(&c, "HloModule t\nENTRY e {\n  lo = f64[] parameter(0)\n  x = f64[3,4] parameter(1)\n"
                "  hi = f64[] parameter(2)\n  ROOT r = f64[3,4] clamp(lo, x, hi)\n}\n");
  for (int k = 0; k < 3; k++) case_fill(&c, k, distinct_value, NULL);
  case_eval(&c);
  case_index(&c, 0);
  assert_map(&c, 0, "(d0, d1) -> (), domain: d0 in [0, 2], d1 in [0, 3]");
  assert_map(&c, 1, "(d0, d1) -> (d0, d1), domain: d0 in [0, 2], d1 in [0, 3]");
  check_data_movement(&c, 0x2);
  for (int k = 0; k < 3; k++) check_inverse_matches(&c, k);
  case_close(&c);
  data_case("HloModule t\nENTRY e {\n  x = f64[2,3] parameter(0)\n  y = f64[2,3] parameter(1)\n"
            "  ROOT r = f64[2,3] maximum(x, y)\n}\n",
            0x2, NULL);
}

static void test_broadcast_reads_the_mapped_dimensions(void **state) {
  const char *want[] = {"(d0, d1, d2) -> (d2, d0), domain: d0 in [0, 2], d1 in [0, 1], d2 in [0, 3]", NULL};
  data_case("HloModule t\nENTRY e {\n  x = f64[4,3] parameter(0)\n"
            "  ROOT r = f64[3,2,4] broadcast(x), dimensions={2,0}\n}\n",
            0x1, want);
}

static void test_transpose_permutes_dimensions(void **state) {
  const char *want[] = {"(d0, d1) -> (d1, d0), domain: d0 in [0, 39], d1 in [0, 19]", NULL};
  data_case("HloModule t\nENTRY e {\n  x = f64[20,40] parameter(0)\n"
            "  ROOT r = f64[40,20] transpose(x), dimensions={1,0}\n}\n",
            0x1, want);
  data_case("HloModule t\nENTRY e {\n  x = f64[2,3,4] parameter(0)\n"
            "  ROOT r = f64[4,2,3] transpose(x), dimensions={2,0,1}\n}\n",
            0x1, NULL);
}

static void test_reshape_delinearizes_row_major(void **state) {
  const char *want[] = {
      "(d0, d1) -> ((d0 * 8 + d1) floordiv 6, (d0 * 2 + d1) mod 6), domain: d0 in [0, 2], d1 in [0, 7]", NULL};
  data_case("HloModule t\nENTRY e {\n  x = f64[4,6] parameter(0)\n  ROOT r = f64[3,8] reshape(x)\n}\n",
            0x1, want);
  const char *want2[] = {"(d0, d1, d2) -> (d0 * 2 + d1, d2), domain: d0 in [0, 1], d1 in [0, 1], d2 in [0, 2]", NULL};
  data_case("HloModule t\nENTRY e {\n  x = f64[4,3] parameter(0)\n  ROOT r = f64[2,2,3] reshape(x)\n}\n",
            0x1, want2);
  data_case("HloModule t\nENTRY e {\n  x = f64[1,6,1] parameter(0)\n  ROOT r = f64[3,1,2] reshape(x)\n}\n",
            0x1, NULL);
  data_case("HloModule t\nENTRY e {\n  x = f64[1] parameter(0)\n  ROOT r = f64[] reshape(x)\n}\n", 0x1,
            NULL);
}

static void test_bitcast_follows_physical_layouts(void **state) {
  /* Same dims, transposed layout: a bitcast is a physical transpose. */
  data_case("HloModule t\nENTRY e {\n  x = f64[3,4]{0,1} parameter(0)\n"
            "  ROOT r = f64[3,4]{1,0} bitcast(x)\n}\n",
            0x1, NULL);
  data_case("HloModule t\nENTRY e {\n  x = f64[2,3,4]{1,2,0} parameter(0)\n"
            "  ROOT r = f64[4,6]{0,1} bitcast(x)\n}\n",
            0x1, NULL);
  const char *want[] = {"(d0, d1) -> (d1, d0), domain: d0 in [0, 3], d1 in [0, 2]", NULL};
  data_case("HloModule t\nENTRY e {\n  x = f64[3,4]{1,0} parameter(0)\n"
            "  ROOT r = f64[4,3]{0,1} bitcast(x)\n}\n",
            0x1, want);
}

static void test_slice_applies_start_and_stride(void **state) {
  const char *want[] = {"(d0, d1) -> (d0 + 1, d1 * 3 + 2), domain: d0 in [0, 2], d1 in [0, 2]", NULL};
  data_case("HloModule t\nENTRY e {\n  x = f64[5,10] parameter(0)\n"
            "  ROOT r = f64[3,3] slice(x), slice={[1:4], [2:10:3]}\n}\n",
            0x1, want);
}

static void test_reverse_mirrors_listed_dimensions(void **state) {
  const char *want[] = {"(d0, d1, d2) -> (-d0 + 2, d1, -d2 + 3), domain: d0 in [0, 2], d1 in [0, 1], d2 in [0, 3]", NULL};
  data_case("HloModule t\nENTRY e {\n  x = f64[3,2,4] parameter(0)\n"
            "  ROOT r = f64[3,2,4] reverse(x), dimensions={0,2}\n}\n",
            0x1, want);
}

static void test_pad_with_negative_and_interior_padding(void **state) {
  /* dim 0: lo 2, hi -1, interior 1 on 4 elements: 2 + 4 + 3 - 1 = 8.
   * dim 1: lo -1, hi 2, interior 2 on 3 elements: -1 + 3 + 4 + 2 = 8. */
  const char *want[] = {
      "(d0, d1) -> (d0 floordiv 2 - 1, (d1 + 1) floordiv 3), domain: d0 in [2, 7], d1 in [0, 5], "
      "(d1 + 1) mod 3 in [0, 0], d0 mod 2 in [0, 0]",
      "(d0, d1) -> (), domain: d0 in [0, 7], d1 in [0, 7]", NULL};
  data_case("HloModule t\nENTRY e {\n  x = f64[4,3] parameter(0)\n  v = f64[] parameter(1)\n"
            "  ROOT r = f64[8,8] pad(x, v), padding=2_-1_1x-1_2_2\n}\n",
            0x1, want);
  data_case("HloModule t\nENTRY e {\n  x = f64[5] parameter(0)\n  v = f64[] parameter(1)\n"
            "  ROOT r = f64[3] pad(x, v), padding=-1_-1\n}\n",
            0x1, NULL);
}

static void test_concatenate_constrains_each_operand_to_its_range(void **state) {
  const char *want[] = {"(d0, d1) -> (d0, d1), domain: d0 in [0, 1], d1 in [0, 1]",
                        "(d0, d1) -> (d0, d1 - 2), domain: d0 in [0, 1], d1 in [2, 4]",
                        "(d0, d1) -> (d0, 0), domain: d0 in [0, 1], d1 in [5, 5]", NULL};
  data_case("HloModule t\nENTRY e {\n  a = f64[2,2] parameter(0)\n  b = f64[2,3] parameter(1)\n"
            "  c = f64[2,1] parameter(2)\n  ROOT r = f64[2,6] concatenate(a, b, c), dimensions={1}\n}\n",
            0x7, want);
}

static const char kAddF64[] = "add {\n  a = f64[] parameter(0)\n  b = f64[] parameter(1)\n"
                              "  ROOT s = f64[] add(a, b)\n}\n";

static void sum_case(const char *body, int k, const char *want0, bool inverse) {
  char text[2048];
  snprintf(text, sizeof text, "HloModule t\n%s\nENTRY e {\n%s}\n", kAddF64, body);
  op_case_t c;
  case_open(&c, text);
  int which = (int)c.root->operands[k]->parameter_number;
  for (int p = 0; p < c.nargs; p++) case_fill(&c, p, pow2_value, &which);
  case_eval(&c);
  case_index(&c, 0);
  if (want0) assert_map(&c, k, want0);
  check_sum_encoding(&c, k);
  if (inverse) check_inverse_matches(&c, k);
  case_close(&c);
}

static void test_reduce_uses_symbols_for_reduced_dimensions(void **state) {
  sum_case("  x = f64[2,3,4] parameter(0)\n  z = f64[] parameter(1)\n"
           "  ROOT r = f64[3] reduce(x, z), dimensions={0,2}, to_apply=add\n",
           0, "(d0)[s0, s1] -> (s0, d0, s1), domain: d0 in [0, 2], s0 in [0, 1], s1 in [0, 3]", true);
  sum_case("  x = f64[5,6] parameter(0)\n  z = f64[] parameter(1)\n"
           "  ROOT r = f64[5] reduce(x, z), dimensions={1}, to_apply=add\n",
           0, NULL, true);
}

static void test_reduce_window_with_stride_padding_and_dilation(void **state) {
  sum_case("  x = f64[4,6] parameter(0)\n  z = f64[] parameter(1)\n"
           "  ROOT r = f64[2,3] reduce-window(x, z), window={size=2x3 stride=2x2 pad=0_0x1_0}, to_apply=add\n",
           0, NULL, false);
  /* base dilation 2 and window dilation 2 with padding on both sides */
  sum_case("  x = f64[3,5] parameter(0)\n  z = f64[] parameter(1)\n"
           "  ROOT r = f64[5,4] reduce-window(x, z), window={size=2x3 pad=1_0x2_1 lhs_dilate=2x1 rhs_dilate=1x2}, to_apply=add\n",
           0, NULL, false);
}

static void contraction_case(const char *text, const char *want0, const char *want1) {
  op_case_t c;
  case_open(&c, text);
  for (int k = 0; k < c.nargs; k++) case_fill(&c, k, distinct_value, NULL);
  case_eval(&c);
  case_index(&c, 0);
  if (want0) assert_map(&c, 0, want0);
  if (want1) assert_map(&c, 1, want1);
  check_contraction(&c);
  case_close(&c);
}

static void test_dot_contracts_over_symbols(void **state) {
  contraction_case("HloModule t\nENTRY e {\n  a = f64[2,3,4] parameter(0)\n  b = f64[2,4,2] parameter(1)\n"
                   "  ROOT r = f64[2,3,2] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
                   "rhs_batch_dims={0}, rhs_contracting_dims={1}\n}\n",
                   "(d0, d1, d2)[s0] -> (d0, d1, s0), domain: d0 in [0, 1], d1 in [0, 2], d2 in [0, 1], s0 in [0, 3]",
                   "(d0, d1, d2)[s0] -> (d0, s0, d2), domain: d0 in [0, 1], d1 in [0, 2], d2 in [0, 1], s0 in [0, 3]");
  op_case_t c;
  case_open(&c, "HloModule t\nENTRY e {\n  a = f64[3,4] parameter(0)\n  b = f64[4,5] parameter(1)\n"
                "  ROOT r = f64[3,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n");
  case_fill(&c, 0, distinct_value, NULL);
  case_fill(&c, 1, distinct_value, NULL);
  case_eval(&c);
  case_index(&c, 0);
  check_inverse_matches(&c, 0);
  check_inverse_matches(&c, 1);
  case_close(&c);
}

static void test_convolution_window_and_feature_symbols(void **state) {
  contraction_case("HloModule t\nENTRY e {\n  a = f64[1,5,2] parameter(0)\n  k = f64[3,2,2] parameter(1)\n"
                   "  ROOT r = f64[1,5,2] convolution(a, k), window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f\n}\n",
                   NULL, NULL);
  /* stride, base and window dilation, reversal, 2 feature groups */
  contraction_case("HloModule t\nENTRY e {\n  a = f64[1,4,4] parameter(0)\n  k = f64[2,2,4] parameter(1)\n"
                   "  ROOT r = f64[1,4,4] convolution(a, k), window={size=2 stride=2 pad=2_1 lhs_dilate=2 rhs_dilate=2 rhs_reversal=1}, "
                   "dim_labels=b0f_0io->b0f, feature_group_count=2\n}\n",
                   NULL, NULL);
  /* batch groups: 4 input batches in 2 groups */
  contraction_case("HloModule t\nENTRY e {\n  a = f64[4,3,1] parameter(0)\n  k = f64[2,1,2] parameter(1)\n"
                   "  ROOT r = f64[2,2,2] convolution(a, k), window={size=2}, dim_labels=b0f_0io->b0f, batch_group_count=2\n}\n",
                   NULL, NULL);
}

static void test_iota_reads_no_operands(void **state) {
  op_case_t c;
  case_open(&c, "HloModule t\nENTRY e {\n  ROOT r = s32[3,4] iota(), iota_dimension=1\n}\n");
  case_index(&c, 0);
  assert_int_equal(c.ix.num_operands, 0);
  case_close(&c);
}

typedef struct ints {
  const int64_t *v[4];
} ints_t;

static double int_or_distinct(int param, int64_t i, void *user) {
  const ints_t *iv = user;
  if (param < 4 && iv->v[param]) return (double)iv->v[param][i];
  return distinct_value(param, i, NULL);
}

/* Runs a case whose integer parameters take the given values. */
static void dynamic_case(const char *text, unsigned exact, const ints_t *iv, const char *want0) {
  op_case_t c;
  case_open(&c, text);
  for (int k = 0; k < c.nargs; k++) case_fill(&c, k, int_or_distinct, (void *)iv);
  case_eval(&c);
  case_index(&c, 0);
  if (want0) assert_map(&c, exact == 0x2 ? 1 : 0, want0);
  check_data_movement(&c, exact);
  case_close(&c);
}

static void test_dynamic_slice_runtime_offsets_are_clamped(void **state) {
  static const int64_t one[] = {1}, big[] = {7}, neg[] = {-3};
  const char *text = "HloModule t\nENTRY e {\n  x = f64[4,5] parameter(0)\n  i = s32[] parameter(1)\n"
                     "  j = s32[] parameter(2)\n  ROOT r = f64[2,3] dynamic-slice(x, i, j), dynamic_slice_sizes={2,3}\n}\n";
  ints_t a = {{NULL, one, big}}, b = {{NULL, neg, one}};
  dynamic_case(text, 0x1, &a,
               "(d0, d1){rt0, rt1} -> (d0 + rt0, d1 + rt1), domain: d0 in [0, 1], d1 in [0, 2], rt0 in [0, 2], rt1 in [0, 2]");
  dynamic_case(text, 0x1, &b, NULL);
}

static void test_dynamic_update_slice_reads_update_inside_the_window(void **state) {
  static const int64_t one[] = {1}, big[] = {9};
  const char *text = "HloModule t\nENTRY e {\n  x = f64[4,5] parameter(0)\n  u = f64[2,2] parameter(1)\n"
                     "  i = s32[] parameter(2)\n  j = s32[] parameter(3)\n"
                     "  ROOT r = f64[4,5] dynamic-update-slice(x, u, i, j)\n}\n";
  ints_t a = {{NULL, NULL, one, big}};
  dynamic_case(text, 0x2, &a,
               "(d0, d1){rt0, rt1} -> (d0 - rt0, d1 - rt1), domain: d0 in [0, 3], d1 in [0, 4], rt0 in [0, 2], "
               "rt1 in [0, 3], d0 - rt0 in [0, 1], d1 - rt1 in [0, 1]");
}

static void test_gather_offsets_come_from_the_indices(void **state) {
  /* rows gather: operand [5,3], indices [4,1] -> [4,2] (slice 1x2, collapsed dim 0) */
  static const int64_t idx[] = {0, 4, 2, -1};
  ints_t a = {{NULL, idx}};
  dynamic_case("HloModule t\nENTRY e {\n  x = f64[5,3] parameter(0)\n  i = s32[4,1] parameter(1)\n"
               "  ROOT r = f64[4,2] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
               "index_vector_dim=1, slice_sizes={1,2}\n}\n",
               0x1, &a, NULL);
  /* 2-D starts, implicit index vector in dim 0 of a [2,3] indices tensor, offset dim first */
  static const int64_t idx2[] = {1, 0, 3, 2, 1, 0};
  ints_t b = {{NULL, idx2}};
  dynamic_case("HloModule t\nENTRY e {\n  x = f64[4,5] parameter(0)\n  i = s32[2,3] parameter(1)\n"
               "  ROOT r = f64[2,3] gather(x, i), offset_dims={0}, collapsed_slice_dims={1}, start_index_map={0,1}, "
               "index_vector_dim=0, slice_sizes={2,1}\n}\n",
               0x1, &b, NULL);
  /* batching dims: operand [2,4] batched with indices [2,3] (index_vector_dim = 2 implicit) */
  static const int64_t idx3[] = {3, 0, 1, 2, 2, 9};
  ints_t c3 = {{NULL, idx3}};
  dynamic_case("HloModule t\nENTRY e {\n  x = f64[2,4] parameter(0)\n  i = s32[2,3] parameter(1)\n"
               "  ROOT r = f64[2,3] gather(x, i), offset_dims={}, collapsed_slice_dims={1}, start_index_map={1}, "
               "operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1}\n}\n",
               0x1, &c3, NULL);
}

static void test_unsupported_opcodes_are_marked_unknown(void **state) {
  op_case_t c;
  case_open(&c, "HloModule t\ncmp {\n  a = f64[] parameter(0)\n  b = f64[] parameter(1)\n"
                "  ROOT lt = pred[] compare(a, b), direction=LT\n}\n"
                "ENTRY e {\n  x = f64[5] parameter(0)\n  ROOT r = f64[5] sort(x), dimensions={0}, to_apply=cmp\n}\n");
  case_index(&c, 0);
  assert_int_equal(c.ix.num_operands, 1);
  assert_null(c.ix.operands[0].map);
  kiln_indexing_map_t *m = (kiln_indexing_map_t *)1;
  assert_null(kiln_hlo_indexing_input_to_output(c.ctx, c.root, 0, 0, &m));
  assert_null(m);
  case_close(&c);
}

static void test_malformed_instructions_give_invalid_argument(void **state) {
  op_case_t c;
  case_open(&c, "HloModule t\nENTRY e {\n  x = f64[4,3] parameter(0)\n"
                "  ROOT r = f64[3,4] transpose(x), dimensions={1,0}\n}\n");
  /* Corrupt the permutation after parsing (the verifier would reject it). */
  kiln_hlo_instruction_t *r = c.m->entry->root;
  r->dimensions.v[1] = 1;
  kiln_status s = kiln_hlo_indexing_output_to_input(c.ctx, r, 0, &c.ix);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(kiln_status_message(s), "permutation"));
  kiln_status_free(s);
  assert_int_equal(c.ix.num_operands, 0);
  s = kiln_hlo_indexing_output_to_input(c.ctx, r, 3, &c.ix);
  assert_non_null(s);
  kiln_status_free(s);
  case_close(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_elementwise_maps_are_identity_and_scalars_read_once),
      cmocka_unit_test(test_broadcast_reads_the_mapped_dimensions),
      cmocka_unit_test(test_transpose_permutes_dimensions),
      cmocka_unit_test(test_reshape_delinearizes_row_major),
      cmocka_unit_test(test_bitcast_follows_physical_layouts),
      cmocka_unit_test(test_slice_applies_start_and_stride),
      cmocka_unit_test(test_reverse_mirrors_listed_dimensions),
      cmocka_unit_test(test_pad_with_negative_and_interior_padding),
      cmocka_unit_test(test_concatenate_constrains_each_operand_to_its_range),
      cmocka_unit_test(test_reduce_uses_symbols_for_reduced_dimensions),
      cmocka_unit_test(test_reduce_window_with_stride_padding_and_dilation),
      cmocka_unit_test(test_dot_contracts_over_symbols),
      cmocka_unit_test(test_convolution_window_and_feature_symbols),
      cmocka_unit_test(test_iota_reads_no_operands),
      cmocka_unit_test(test_dynamic_slice_runtime_offsets_are_clamped),
      cmocka_unit_test(test_dynamic_update_slice_reads_update_inside_the_window),
      cmocka_unit_test(test_gather_offsets_come_from_the_indices),
      cmocka_unit_test(test_unsupported_opcodes_are_marked_unknown),
      cmocka_unit_test(test_malformed_instructions_give_invalid_argument),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
