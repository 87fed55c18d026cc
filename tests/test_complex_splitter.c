/* complex_splitter (compiler/passes/complex_splitter.c): sorts and scatters over complex
 * operands — which the sort and scatter emitters cannot move — compile and run on the host
 * equal to the reference evaluator once split into real and imaginary operands: a complex sort
 * by real part, a lexicographic (real, imaginary) sort with an s32 payload, a c128 sort among
 * real operands; scatters combining by add, by overwrite, by multiply (the parts combine as one
 * complex value), a c128 scatter beside a real operand. The pass leaves no complex operand on a
 * sort or scatter and inlines what it wraps. Also variadic real scatters whose updates come
 * from fused producers and whose users read the results out of order, or only some of them
 * (the fusion's root is the scatter again: before, "scatter fusion whose root is not the
 * scatter"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pass_test_util.h"
#include "tests/host_device_fixture.h"
#include "tests/host_run_util.h"

#define LT_REAL(T, P)                                                                         \
  "lt { a = " T "[] parameter(0)\n b = " T "[] parameter(1)\n ra = " P "[] real(a)\n rb = " P \
  "[] real(b)\n ROOT l = pred[] compare(ra, rb), direction=LT }\n"

static const char *const kSorts[] = {
    "HloModule s\n" LT_REAL("c64", "f32")
    "ENTRY e {\n  p = c64[64] parameter(0)\n  ROOT s = c64[64] sort(p), dimensions={0}, to_apply=lt\n}\n",
    /* lexicographic on (real, imag), stable, an s32 payload; rows of a rank-2 array */
    "HloModule s\n"
    "lex { a = c64[] parameter(0)\n b = c64[] parameter(1)\n i = s32[] parameter(2)\n"
    " j = s32[] parameter(3)\n ra = f32[] real(a)\n rb = f32[] real(b)\n ia = f32[] imag(a)\n"
    " ib = f32[] imag(b)\n lt = pred[] compare(ra, rb), direction=LT\n"
    " eq = pred[] compare(ra, rb), direction=EQ\n il = pred[] compare(ia, ib), direction=LT\n"
    " both = pred[] and(eq, il)\n ROOT r = pred[] or(lt, both) }\n"
    "ENTRY e {\n  p = c64[4,33] parameter(0)\n  k = s32[4,33] iota(), iota_dimension=1\n"
    "  ROOT s = (c64[4,33], s32[4,33]) sort(p, k), dimensions={1}, is_stable=true, to_apply=lex\n}\n",
    /* a c128 operand riding on a real key */
    "HloModule s\n"
    "byf { a = f32[] parameter(0)\n b = f32[] parameter(1)\n c = c128[] parameter(2)\n"
    " d = c128[] parameter(3)\n ROOT l = pred[] compare(a, b), direction=GT }\n"
    "ENTRY e {\n  k = f32[40] parameter(0)\n  v = c128[40] parameter(1)\n"
    "  ROOT s = (f32[40], c128[40]) sort(k, v), dimensions={0}, is_stable=true, to_apply=byf\n}\n",
};

#define SCATTER_DIMS                                                                     \
  "update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, " \
  "index_vector_dim=1"

static const char *const kScatters[] = {
    "HloModule s\n"
    "add { a = c64[] parameter(0)\n b = c64[] parameter(1)\n ROOT s = c64[] add(a, b) }\n"
    "ENTRY e {\n  p = c64[64,4] parameter(0)\n  i = s32[8,1] parameter(1)\n  u = c64[8,4] "
    "parameter(2)\n"
    "  ROOT s = c64[64,4] scatter(p, i, u), " SCATTER_DIMS ", to_apply=add\n}\n",
    "HloModule s\n"
    "set { a = c64[] parameter(0)\n ROOT b = c64[] parameter(1) }\n"
    "ENTRY e {\n  p = c64[16,3] parameter(0)\n  i = s32[5,1] parameter(1)\n  u = c64[5,3] "
    "parameter(2)\n"
    "  ROOT s = c64[16,3] scatter(p, i, u), " SCATTER_DIMS ", to_apply=set\n}\n",
    "HloModule s\n"
    "mul { a = c64[] parameter(0)\n b = c64[] parameter(1)\n ROOT s = c64[] multiply(a, b) }\n"
    "ENTRY e {\n  p = c64[16,2] parameter(0)\n  i = s32[6,1] parameter(1)\n  u = c64[6,2] "
    "parameter(2)\n"
    "  ROOT s = c64[16,2] scatter(p, i, u), " SCATTER_DIMS ", to_apply=mul\n}\n",
    "HloModule s\n"
    "two { a = f32[] parameter(0)\n b = c128[] parameter(1)\n c = f32[] parameter(2)\n"
    " d = c128[] parameter(3)\n x = f32[] add(a, c)\n y = c128[] add(b, d)\n"
    " ROOT t = (f32[], c128[]) tuple(x, y) }\n"
    "ENTRY e {\n  p = f32[32,4] parameter(0)\n  q = c128[32,4] parameter(1)\n"
    "  i = s32[7,1] parameter(2)\n  u = f32[7,4] parameter(3)\n  v = c128[7,4] parameter(4)\n"
    "  ROOT s = (f32[32,4], c128[32,4]) scatter(p, q, i, u, v), " SCATTER_DIMS
    ", to_apply=two\n}\n",
};

/* Variadic real scatters: fused update producers, results read out of order or not at all. */
#define ADD2                                                                          \
  "add2 { a = f32[] parameter(0)\n b = f32[] parameter(1)\n c = f32[] parameter(2)\n" \
  " d = f32[] parameter(3)\n s = f32[] add(a, c)\n t = f32[] add(b, d)\n"             \
  " ROOT r = (f32[], f32[]) tuple(s, t) }\n"
#define VARIADIC(root)                                                                             \
  "HloModule v\n" ADD2                                                                             \
  "ENTRY e {\n  p = f32[64,4] parameter(0)\n  q = f32[64,4] parameter(1)\n"                        \
  "  i = s32[8,1] parameter(2)\n  u = f32[8,4] parameter(3)\n  v = f32[8,4] parameter(4)\n"        \
  "  un = f32[8,4] negate(u)\n  vn = f32[8,4] negate(v)\n"                                         \
  "  s = (f32[64,4], f32[64,4]) scatter(p, q, i, un, vn), " SCATTER_DIMS                           \
  ", to_apply=add2\n"                                                                              \
  "  a = f32[64,4] get-tuple-element(s), index=0\n  b = f32[64,4] get-tuple-element(s), index=1\n" \
  "  ROOT r = " root "\n}\n"

static const char *const kVariadic[] = {
    VARIADIC("f32[64,4] multiply(a, b)"),
    VARIADIC("c64[64,4] complex(b, a)"),
    VARIADIC("(f32[64,4], f32[64,4]) tuple(b, a)"),
    VARIADIC("f32[64,4] negate(b)"), /* result 0 read by nobody: still the fusion's output */
    VARIADIC("f32[64,4] exponential(a)"),
};

static void run_all(const char *const *texts, size_t n) {
  for (size_t i = 0; i < n; i++) run_and_compare_on(g_dev, texts[i], 2, NULL);
}

static void test_complex_sorts_match_the_evaluator(void **state) {
  (void)state;
  run_all(kSorts, sizeof kSorts / sizeof kSorts[0]);
}

static void test_complex_scatters_match_the_evaluator(void **state) {
  (void)state;
  run_all(kScatters, sizeof kScatters / sizeof kScatters[0]);
}

static void test_variadic_scatters_with_fused_producers_match_the_evaluator(void **state) {
  (void)state;
  run_all(kVariadic, sizeof kVariadic / sizeof kVariadic[0]);
}

static bool has_complex_operand(const kiln_hlo_instruction_t *in) {
  for (int k = 0; k < in->num_operands; k++)
    if (kiln_shape_is_array(in->operands[k]->shape) &&
        kiln_elem_type_is_complex(in->operands[k]->shape->type))
      return true;
  return false;
}

/* After the pass: no sort or scatter has a complex operand, no call is left, and the module
 * evaluates as before (the evaluator's complex scatter combines in its own way: a multiply
 * differs in the last bits, so within the module tolerance). */
static void test_the_pass_leaves_only_real_operands(void **state) {
  (void)state;
  const char *const *sets[2] = {kSorts, kScatters};
  size_t counts[2] = {sizeof kSorts / sizeof kSorts[0], sizeof kScatters / sizeof kScatters[0]};
  for (int s = 0; s < 2; s++)
    for (size_t i = 0; i < counts[s]; i++) {
      kiln_hlo_module_t *m = pt_parse(sets[s][i]);
      kiln_arena_t aa, a0, a1;
      kiln_arena_init(&aa);
      kiln_arena_init(&a0);
      kiln_arena_init(&a1);
      kiln_literal_t **args = NULL;
      int n = 0;
      assert_null(kiln_fake_args_make(m, NULL, &aa, &args, &n));
      kiln_literal_t *before = pt_eval(m, args, n, &a0);
      pt_run(m, "complex_splitter");
      for (size_t c = 0; c < m->computations.len; c++) {
        const kiln_hlo_computation_t *comp = m->computations.data[c];
        for (size_t k = 0; k < comp->instructions.len; k++) {
          const kiln_hlo_instruction_t *in = comp->instructions.data[k];
          if ((in->opcode == KILN_OP_SORT || in->opcode == KILN_OP_SCATTER) &&
              has_complex_operand(in))
            fail_msg("%s: %s still has a complex operand", m->name, in->name);
          assert_int_not_equal(in->opcode, KILN_OP_CALL);
        }
      }
      kiln_literal_t *after = pt_eval(m, args, n, &a1);
      kiln_compare_report_t cr;
      if (!kiln_compare_literals(before, after, NULL, &cr))
        fail_msg("%s %zu: results differ after the pass: %s", m->name, i, cr.first);
      kiln_arena_destroy(&a1);
      kiln_arena_destroy(&a0);
      kiln_arena_destroy(&aa);
      kiln_hlo_module_destroy(m);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_complex_sorts_match_the_evaluator),
      cmocka_unit_test(test_complex_scatters_match_the_evaluator),
      cmocka_unit_test(test_variadic_scatters_with_fused_producers_match_the_evaluator),
      cmocka_unit_test(test_the_pass_leaves_only_real_operands),
  };
  return cmocka_run_group_tests(tests, host_device_setup, host_device_teardown);
}
