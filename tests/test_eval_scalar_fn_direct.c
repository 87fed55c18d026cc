/* The evaluator's direct path for scalar computations that are one add / multiply / maximum /
 * minimum of their two f32 or f64 parameters (kiln_eval_scalar_fn_t: map bodies, scatter
 * combiners, the SPMD all-reduce's reducer, select-and-scatter's) gives the same bits as the
 * interpreter of the computation. Each module applies the plain computation, which takes the
 * direct path, and one that copies its first operand first, which does not, in both parameter
 * orders, through map and a two-participant all-reduce (reduce and scatter have fast paths of
 * their own, which do not come here), to values that pair NaNs (one with a payload) with
 * NaNs, infinities with infinities, signed zeros and values whose sums round; the results
 * must be equal bit for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/literal.h"
#include "tests/collective_test_util.h"
#include "tests/skip_util.h"

static char *module_text(const char *T, const char *op, bool swapped) {
  const char *x = swapped ? "b" : "a", *y = swapped ? "a" : "b";
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b,
                     "HloModule m\n\nfast {\n  a = %s[] parameter(0)\n  b = %s[] parameter(1)\n"
                     "  ROOT r = %s[] %s(%s, %s)\n}\n\n",
                     T, T, T, op, x, y);
  kiln_strbuf_printf(&b,
                     "slow {\n  a = %s[] parameter(0)\n  b = %s[] parameter(1)\n"
                     "  c = %s[] copy(%s)\n  ROOT r = %s[] %s(c, %s)\n}\n\n",
                     T, T, T, x, T, op, y);
  kiln_strbuf_printf(&b,
                     "ENTRY e {\n  v = %s[32] parameter(0)\n  w = %s[32] parameter(1)\n"
                     "  f = %s[32] map(v, w), dimensions={0}, to_apply=fast\n"
                     "  s = %s[32] map(v, w), dimensions={0}, to_apply=slow\n"
                     "  fa = %s[32] all-reduce(v), replica_groups={{0,1}}, to_apply=fast\n"
                     "  sa = %s[32] all-reduce(v), replica_groups={{0,1}}, to_apply=slow\n"
                     "  ROOT t = (%s[32], %s[32], %s[32], %s[32]) tuple(f, s, fa, sa)\n}\n",
                     T, T, T, T, T, T, T, T, T, T);
  return kiln_strbuf_take(&b);
}

/* Element e of input k: specials paired against each other (NaN with NaN, one with a payload
 * in f32, signed zeros, infinities of both signs, overflow), ordinary values after. */
static double value(int k, int e) {
  static const double specials[2][16] = {{1.0, -0.0, 0.0, 1e30, -1e30, 3.0, -INFINITY, INFINITY,
                                          NAN, 2.5, -0.0, 0.0, 1e-30, 0.1, -NAN, -7.0},
                                         {-NAN, 0.0, -0.0, 1e30, 1e30, NAN, INFINITY, -INFINITY,
                                          -NAN, -0.0, 0.0, -0.0, 1e-30, -0.1, NAN, -INFINITY}};
  if (e < 16) return specials[k][e];
  return e * 0.1 - 1.7 + (e & 1 ? 1e-7 : 0) + k * 0.3;
}

static void check(const char *T, const char *op, bool swapped) {
  char *text = module_text(T, op, swapped);
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (s) printf("%s\n%s\n", kiln_status_message(s), text);
  assert_null(s);
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  bool f64 = strcmp(T, "f64") == 0;
  kiln_literal_t *args[2];
  for (int k = 0; k < 2; k++) {
    args[k] = kiln_literal_make(&arena, kiln_shape_clone(&arena, m->entry->parameters[k]->shape));
    assert_non_null(args[k]);
    for (int e = 0; e < 32; e++) {
      double v = value(k, e);
      if (f64) {
        ((double *)args[k]->data)[e] = v;
        continue;
      }
      float x = (float)v;
      if (isnan(x) && !signbit(x)) { /* a NaN with a payload: which NaN wins shows in the bits */
        uint32_t bits = 0x7fc01234u;
        memcpy(&x, &bits, sizeof x);
      }
      ((float *)args[k]->data)[e] = x;
    }
  }
  /* Two participants: one holds (v, w), the other (w, v), so the all-reduce folds v op w. */
  kiln_literal_t *swapped_args[2] = {args[1], args[0]}, *outs[2] = {NULL, NULL};
  kiln_literal_t *const *per[2] = {args, swapped_args};
  kiln_eval_spmd_options_t o = {
      .num_replicas = 2, .num_partitions = 1, .timeout_ms = KILN_TEST_COLLECTIVE_TIMEOUT_MS};
  s = kiln_eval_module_spmd(m, &o, 2, per, &arena, outs);
  if (s) printf("%s\n", kiln_status_message(s));
  assert_null(s);
  const kiln_literal_t *out = outs[0];
  assert_int_equal(out->num_tuple_elements, 4);
  size_t es = f64 ? 8 : 4;
  for (int k = 0; k < 4; k += 2) {
    const kiln_literal_t *fast = out->tuple_elements[k], *slow = out->tuple_elements[k + 1];
    assert_int_equal(fast->num_elements, slow->num_elements);
    if (memcmp(fast->data, slow->data, (size_t)fast->num_elements * es) != 0) {
      for (int64_t e = 0; e < fast->num_elements; e++)
        if (memcmp((const char *)fast->data + e * es, (const char *)slow->data + e * es, es))
          printf("  element %lld: %.17g vs %.17g\n", (long long)e,
                 f64 ? ((const double *)fast->data)[e] : ((const float *)fast->data)[e],
                 f64 ? ((const double *)slow->data)[e] : ((const float *)slow->data)[e]);
      printf("%s %s%s: %s differs from the interpreted computation\n", T, op,
             swapped ? " (parameters swapped)" : "", k ? "all-reduce" : "map");
      fail();
    }
  }
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
  kiln_free(text);
}

static void test_direct_scalar_computations_equal_the_interpreted_ones_bit_for_bit(void **state) {
  (void)state;
  static const char *const types[] = {"f32", "f64"};
  static const char *const ops[] = {"add", "multiply", "maximum", "minimum"};
  for (int t = 0; t < 2; t++)
    for (int o = 0; o < 4; o++)
      for (int sw = 0; sw < 2; sw++) check(types[t], ops[o], sw);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_direct_scalar_computations_equal_the_interpreted_ones_bit_for_bit),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
