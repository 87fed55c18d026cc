/* Algebraic simplification and constant folding on small hand-written modules: each
 * rewrite happens (checked on the printed entry), the exact-only rules hold (float x + 0
 * stays), and every module computes bit-identical results before and after (the dot +
 * reduce rewrite, which reorders sums, within a tolerance). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdbool.h>

#include <cmocka.h>

#include "tests/pass_test_util.h"

static void test_multiply_by_one_becomes_the_operand(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = f32[4] parameter(0)\n"
      "  one = f32[] constant(1)\n"
      "  b = f32[4] broadcast(one), dimensions={}\n"
      "  m1 = f32[4] multiply(b, p)\n"
      "  ones = f32[4] constant({1, 1, 1, 1})\n"
      "  m2 = f32[4] multiply(m1, ones)\n"
      "  ROOT d = f32[4] divide(m2, b)\n"
      "}\n",
      "simplify,dce");
  assert_ptr_equal(m->entry->root, m->entry->parameters[0]);
  assert_int_equal(m->entry->instructions.len, 1);
  kiln_hlo_module_destroy(m);
}

static void test_multiply_by_two_stays(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = f32[4] parameter(0)\n"
      "  k = f32[4] constant({1, 1, 2, 1})\n"
      "  ROOT m = f32[4] multiply(p, k)\n"
      "}\n",
      "simplify,dce");
  pt_expect_text(m, "ROOT m = f32[4] multiply(p, k)", true);
  kiln_hlo_module_destroy(m);
}

static void test_float_add_of_positive_zero_is_not_rewritten(void **state) {
  /* -0.0 + +0.0 = +0.0, so x + 0.0 is not x for floats; x + -0.0 and x - 0.0 are. */
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = f32[3] parameter(0)\n"
      "  z = f32[] constant(0)\n"
      "  zb = f32[3] broadcast(z), dimensions={}\n"
      "  ROOT a = f32[3] add(p, zb)\n"
      "}\n",
      "simplify,dce");
  pt_expect_text(m, "ROOT a = f32[3] add(p, zb)", true);
  kiln_hlo_module_destroy(m);

  m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = f32[3] parameter(0)\n"
      "  nz = f32[] constant(-0)\n"
      "  nzb = f32[3] broadcast(nz), dimensions={}\n"
      "  a = f32[3] add(nzb, p)\n"
      "  z = f32[] constant(0)\n"
      "  zb = f32[3] broadcast(z), dimensions={}\n"
      "  ROOT s = f32[3] subtract(a, zb)\n"
      "}\n",
      "simplify,dce");
  assert_ptr_equal(m->entry->root, m->entry->parameters[0]);
  kiln_hlo_module_destroy(m);

  /* -0.0 itself must survive: the rewritten module is checked on a -0.0 input. */
  m = pt_parse(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = f32[] parameter(0)\n"
      "  z = f32[] constant(0)\n"
      "  ROOT a = f32[] add(p, z)\n"
      "}\n");
  pt_run(m, "simplify,dce");
  kiln_arena_t a;
  kiln_arena_init(&a);
  kiln_literal_t *arg = kiln_literal_make(&a, kiln_shape_make_scalar(&a, KILN_F32));
  kiln_literal_set_f64(arg, 0, -0.0);
  kiln_literal_t *r = pt_eval(m, &arg, 1, &a);
  assert_true(kiln_literal_get_f64(r, 0) == 0.0 && !signbit(kiln_literal_get_f64(r, 0)));
  kiln_arena_destroy(&a);
  kiln_hlo_module_destroy(m);
}

static void test_integer_add_and_subtract_of_zero_become_the_operand(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = s32[5] parameter(0)\n"
      "  z = s32[5] constant({0, 0, 0, 0, 0})\n"
      "  a = s32[5] add(z, p)\n"
      "  ROOT s = s32[5] subtract(a, z)\n"
      "}\n",
      "simplify,dce");
  assert_ptr_equal(m->entry->root, m->entry->parameters[0]);
  kiln_hlo_module_destroy(m);
  /* 0 - x is not x. */
  m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = s32[2] parameter(0)\n"
      "  z = s32[2] constant({0, 0})\n"
      "  ROOT s = s32[2] subtract(z, p)\n"
      "}\n",
      "simplify,dce");
  pt_expect_text(m, "subtract(z, p)", true);
  kiln_hlo_module_destroy(m);
}

static void test_transpose_of_transpose_composes(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = f32[2,3,4] parameter(0)\n"
      "  t1 = f32[3,4,2] transpose(p), dimensions={1,2,0}\n"
      "  ROOT t2 = f32[4,2,3] transpose(t1), dimensions={1,2,0}\n"
      "}\n",
      "simplify,dce");
  pt_expect_text(m, "f32[4,2,3] transpose(p), dimensions={2,0,1}", true);
  assert_int_equal(pt_count(m, KILN_OP_TRANSPOSE), 1);
  kiln_hlo_module_destroy(m);
  /* Inverse permutations cancel. */
  m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = f32[2,3,4] parameter(0)\n"
      "  t1 = f32[3,4,2] transpose(p), dimensions={1,2,0}\n"
      "  ROOT t2 = f32[2,3,4] transpose(t1), dimensions={2,0,1}\n"
      "}\n",
      "simplify,dce");
  assert_ptr_equal(m->entry->root, m->entry->parameters[0]);
  kiln_hlo_module_destroy(m);
}

static void test_reshape_of_reshape_and_noops(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = f32[2,6] parameter(0)\n"
      "  r1 = f32[3,4] reshape(p)\n"
      "  r2 = f32[12] reshape(r1)\n"
      "  c = f32[12] convert(r2)\n"
      "  r3 = f32[12] reshape(c)\n"
      "  ROOT t = f32[12] transpose(r3), dimensions={0}\n"
      "}\n",
      "simplify,dce");
  pt_expect_text(m, "= f32[12] reshape(p)", true);
  assert_int_equal(pt_count(m, KILN_OP_RESHAPE), 1);
  assert_int_equal(m->entry->instructions.len, 2);
  kiln_hlo_module_destroy(m);
  /* reshape back to the operand's shape disappears. */
  m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = s32[2,6] parameter(0)\n"
      "  r1 = s32[12] reshape(p)\n"
      "  ROOT r2 = s32[2,6] reshape(r1)\n"
      "}\n",
      "simplify,dce");
  assert_ptr_equal(m->entry->root, m->entry->parameters[0]);
  kiln_hlo_module_destroy(m);
}

static void test_slice_of_slice_composes(void **state) {
  /* s1 keeps 2,4,...,16; s2 keeps s1's elements 1 and 4, i.e. p's 4 and 10. */
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = f32[20,3] parameter(0)\n"
      "  s1 = f32[8,3] slice(p), slice={[2:18:2], [0:3]}\n"
      "  ROOT s2 = f32[2,2] slice(s1), slice={[1:7:3], [1:3]}\n"
      "}\n",
      "simplify,dce");
  pt_expect_text(m, "f32[2,2] slice(p), slice={[4:11:6], [1:3]}", true);
  kiln_hlo_module_destroy(m);
}

static void test_elementwise_of_scalar_broadcasts_becomes_broadcast(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n"
      "  ba = f32[4,5] broadcast(a), dimensions={}\n"
      "  bb = f32[4,5] broadcast(b), dimensions={}\n"
      "  s = f32[4,5] add(ba, bb)\n"
      "  ROOT n = f32[4,5] negate(s)\n"
      "}\n",
      "(simplify,dce)");
  char *t = pt_comp_text(m, NULL);
  assert_non_null(strstr(t, "f32[] add(a, b)"));
  assert_non_null(strstr(t, "f32[] negate("));
  assert_int_equal(pt_count(m, KILN_OP_BROADCAST), 1);
  assert_int_equal(m->entry->root->opcode, KILN_OP_BROADCAST);
  kiln_free(t);
  kiln_hlo_module_destroy(m);
}

static void test_broadcasts_of_different_dimensions_stay(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  a = f32[4] parameter(0)\n"
      "  b = f32[4] parameter(1)\n"
      "  ba = f32[4,4] broadcast(a), dimensions={0}\n"
      "  bb = f32[4,4] broadcast(b), dimensions={1}\n"
      "  ROOT s = f32[4,4] add(ba, bb)\n"
      "}\n",
      "simplify,dce");
  pt_expect_text(m, "ROOT s = f32[4,4] add(ba, bb)", true);
  kiln_hlo_module_destroy(m);
}

static void test_bitcasts_only_with_layouts_and_no_data_movement(void **state) {
  static const char *text =
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = f32[2,3]{1,0} parameter(0)\n"
      "  r = f32[6]{0} reshape(p)\n"
      "  t = f32[3,2]{0,1} transpose(p), dimensions={1,0}\n"
      "  u = f32[3,2]{1,0} transpose(p), dimensions={1,0}\n"
      "  q = f32[3,2]{0,1} parameter(1)\n"
      "  rq = f32[6]{0} reshape(q)\n"
      "  ROOT o = (f32[6]{0}, f32[3,2]{0,1}, f32[3,2]{1,0}, f32[6]{0}) tuple(r, t, u, rq)\n"
      "}\n";
  /* Layout-insensitive simplify makes no bitcast. */
  kiln_hlo_module_t *m = pt_run_same_results(text, "simplify");
  assert_int_equal(pt_count(m, KILN_OP_BITCAST), 0);
  kiln_hlo_module_destroy(m);
  m = pt_run_same_results(text, "simplify_layout,dce");
  char *s = pt_comp_text(m, NULL);
  /* r (row-major reshape) and t (transpose into the transposed layout) move no bytes. */
  assert_non_null(strstr(s, "f32[6]{0} bitcast(p)"));
  assert_non_null(strstr(s, "f32[3,2]{0,1} bitcast(p)"));
  /* u moves data; rq reshapes a column-major array: both stay. */
  assert_non_null(strstr(s, "u = f32[3,2]{1,0} transpose(p)"));
  assert_non_null(strstr(s, "rq = f32[6]{0} reshape(q)"));
  kiln_free(s);
  kiln_hlo_module_destroy(m);
}

static void test_constant_folding_evaluates_constant_operands(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = s32[3] parameter(0)\n"
      "  a = s32[3] constant({1, 2, 3})\n"
      "  b = s32[3] constant({10, 20, 30})\n"
      "  s = s32[3] add(a, b)\n"
      "  n = s32[3] negate(s)\n"
      "  ROOT r = s32[3] multiply(p, n)\n"
      "}\n",
      "(constant_folding,dce)");
  pt_expect_text(m, "s32[3] constant({-11, -22, -33})", true);
  assert_int_equal(m->entry->instructions.len, 3);
  kiln_hlo_module_destroy(m);
}

static void test_constant_folding_leaves_broadcast_iota_rng_and_large_results(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  c = f32[] constant(2)\n"
      "  b = f32[1000] broadcast(c), dimensions={}\n"
      "  i = s32[8] iota(), iota_dimension=0\n"
      "  one = f32[1] constant({1})\n"
      "  z = f32[] constant(0)\n"
      "  big = f32[200001] pad(one, z), padding=0_200000\n"
      "  ROOT t = (f32[1000], s32[8], f32[200001]) tuple(b, i, big)\n"
      "}\n",
      "constant_folding,dce");
  assert_int_equal(pt_count(m, KILN_OP_BROADCAST), 1);
  assert_int_equal(pt_count(m, KILN_OP_IOTA), 1);
  assert_int_equal(pt_count(m, KILN_OP_PAD), 1);
  kiln_hlo_module_destroy(m);
  /* rng has constant operands but a side effect: never folded. */
  m = pt_parse(
      "HloModule t\n"
      "ENTRY e {\n"
      "  lo = f32[] constant(0)\n"
      "  hi = f32[] constant(1)\n"
      "  ROOT r = f32[4] rng(lo, hi), distribution=rng_uniform\n"
      "}\n");
  pt_run(m, "constant_folding,dce");
  assert_int_equal(m->entry->root->opcode, KILN_OP_RNG);
  kiln_hlo_module_destroy(m);
}

static void test_constant_folding_of_floats_keeps_bits(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = f32[2] parameter(0)\n"
      "  a = f32[2] constant({0.1, -0})\n"
      "  e1 = f32[2] exponential(a)\n"
      "  s = f32[2] sqrt(e1)\n"
      "  ROOT r = f32[2] add(p, s)\n"
      "}\n",
      "(constant_folding,dce)");
  assert_int_equal(pt_count(m, KILN_OP_EXP), 0);
  assert_int_equal(pt_count(m, KILN_OP_SQRT), 0);
  kiln_hlo_module_destroy(m);
}

/* reduce-add of a dot over its batch dimensions becomes one dot contracting them: plain,
 * through a transpose (a transpose that swaps the free blocks becomes the swapped dot, any
 * other stays as a transpose of the new dot); a dot read twice, a reduce over a free
 * dimension and a max reduce stay. Results agree with the evaluator's within the rounding
 * of the reordered sums. */
static void test_reduce_of_dot_over_batch_dims_becomes_a_dot(void **state) {
  const char *text =
      "HloModule dot_reduce\n"
      "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT r = f32[] add(a, b)\n}\n"
      "max {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT r = f32[] maximum(a, b)\n}\n"
      "ENTRY main {\n"
      "  x = f32[16,8]{1,0} parameter(0)\n  w = f32[32,16]{1,0} parameter(1)\n"
      "  y = f32[8,16]{1,0} parameter(2)\n  z = f32[12,8]{1,0} parameter(3)\n"
      "  zero = f32[] constant(0)\n"
      /* through a transpose swapping the free blocks: dot(w, x) */
      "  d1 = f32[16,8,32]{2,1,0} dot(x, w), lhs_batch_dims={0}, lhs_contracting_dims={}, "
      "rhs_batch_dims={1}, rhs_contracting_dims={}\n"
      "  t1 = f32[32,16,8]{2,1,0} transpose(d1), dimensions={2,0,1}\n"
      "  r1 = f32[32,8]{1,0} reduce(t1, zero), dimensions={1}, to_apply=add\n"
      /* plain */
      "  d2 = f32[8,16,12]{2,1,0} dot(y, z), lhs_batch_dims={0}, lhs_contracting_dims={}, "
      "rhs_batch_dims={1}, rhs_contracting_dims={}\n"
      "  r2 = f32[16,12]{1,0} reduce(d2, zero), dimensions={0}, to_apply=add\n"
      /* a batch dimension kept, another contracted, plus a transpose of the kept ones */
      "  a3 = f32[4,6,5,3]{3,2,1,0} parameter(4)\n  b3 = f32[6,4,7,3]{3,2,1,0} parameter(5)\n"
      "  d3 = f32[4,6,5,7]{3,2,1,0} dot(a3, b3), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, "
      "rhs_batch_dims={1,0}, rhs_contracting_dims={3}\n"
      "  t3 = f32[7,6,4,5]{3,2,1,0} transpose(d3), dimensions={3,1,0,2}\n"
      "  r3 = f32[7,4,5]{2,1,0} reduce(t3, zero), dimensions={1}, to_apply=add\n"
      /* stay: the dot is read twice; a free dimension; a max */
      "  d4 = f32[8,16,12]{2,1,0} dot(y, z), lhs_batch_dims={0}, lhs_contracting_dims={}, "
      "rhs_batch_dims={1}, rhs_contracting_dims={}\n"
      "  r4 = f32[16,12]{1,0} reduce(d4, zero), dimensions={0}, to_apply=add\n"
      "  r5 = f32[8,16]{1,0} reduce(d4, zero), dimensions={2}, to_apply=add\n"
      "  d6 = f32[8,16,12]{2,1,0} dot(y, z), lhs_batch_dims={0}, lhs_contracting_dims={}, "
      "rhs_batch_dims={1}, rhs_contracting_dims={}\n"
      "  ninf = f32[] constant(-inf)\n"
      "  r6 = f32[16,12]{1,0} reduce(d6, ninf), dimensions={0}, to_apply=max\n"
      "  ROOT out = (f32[32,8]{1,0}, f32[16,12]{1,0}, f32[7,4,5]{2,1,0}, f32[16,12]{1,0}, "
      "f32[8,16]{1,0}, f32[16,12]{1,0}) tuple(r1, r2, r3, r4, r5, r6)\n}\n";
  kiln_hlo_module_t *m = pt_run_close_results(text, "simplify,dce", 1e-4f);
  assert_int_equal(pt_count(m, KILN_OP_REDUCE), 3); /* r4, r5, r6 */
  assert_int_equal(pt_count(m, KILN_OP_DOT), 5);
  assert_int_equal(pt_count(m, KILN_OP_TRANSPOSE), 1); /* r3's */
  pt_expect_text(m, "dot(w, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}", true);
  pt_expect_text(m, "dot(y, z), lhs_contracting_dims={0}, rhs_contracting_dims={1}", true);
  kiln_hlo_module_destroy(m);
}

/* A broadcast that only adds size-1 dimensions and a transpose that only moves them are
 * reshapes, which then compose away (XLA's model_par_3d ends this way: broadcast to
 * [n,m,1,1], transpose, reshape back); ones that reorder data stay. */
static void test_size_one_broadcast_and_transpose_become_reshapes(void **state) {
  kiln_hlo_module_t *m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = f32[6,4] parameter(0)\n"
      "  b = f32[6,4,1,1] broadcast(p), dimensions={0,1}\n"
      "  t = f32[6,1,4,1] transpose(b), dimensions={0,2,1,3}\n"
      "  ROOT r = f32[6,4] reshape(t)\n"
      "}\n",
      "(simplify,dce)");
  assert_ptr_equal(m->entry->root, m->entry->parameters[0]);
  kiln_hlo_module_destroy(m);
  m = pt_run_same_results(
      "HloModule t\n"
      "ENTRY e {\n"
      "  p = f32[6,4] parameter(0)\n"
      "  b = f32[4,1,6] broadcast(p), dimensions={2,0}\n"
      "  t = f32[4,6] transpose(p), dimensions={1,0}\n"
      "  x = f32[6,1,4] broadcast(p), dimensions={0,2}\n"
      "  y = f32[1,6,4] transpose(x), dimensions={1,0,2}\n"
      "  z = f32[6,4,2] broadcast(p), dimensions={0,1}\n"
      "  ROOT r = (f32[4,1,6], f32[4,6], f32[1,6,4], f32[6,4,2]) tuple(b, t, y, z)\n"
      "}\n",
      "(simplify,dce)");
  /* b reorders (dimensions {2,0}), t moves data, z adds a dimension of 2: they stay; x and
   * y become reshapes of p. */
  assert_int_equal(pt_count(m, KILN_OP_BROADCAST), 2);
  assert_int_equal(pt_count(m, KILN_OP_TRANSPOSE), 1);
  assert_int_equal(pt_count(m, KILN_OP_RESHAPE), 1);
  kiln_hlo_module_destroy(m);
}

/* A collective's value depends on the other participants: never folded, even of a
 * constant (one participant's evaluator would return the constant itself). */
static void test_constant_folding_leaves_collectives(void **state) {
  kiln_hlo_module_t *m = pt_parse(
      "HloModule t, replica_count=2\n"
      "add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n"
      "ENTRY e {\n"
      "  c = f32[2] constant({1, 2})\n"
      "  ROOT ar = f32[2] all-reduce(c), replica_groups={}, to_apply=add\n"
      "}\n");
  pt_run(m, "constant_folding,dce");
  assert_int_equal(pt_count(m, KILN_OP_ALL_REDUCE), 1);
  kiln_hlo_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_multiply_by_one_becomes_the_operand),
      cmocka_unit_test(test_multiply_by_two_stays),
      cmocka_unit_test(test_float_add_of_positive_zero_is_not_rewritten),
      cmocka_unit_test(test_integer_add_and_subtract_of_zero_become_the_operand),
      cmocka_unit_test(test_transpose_of_transpose_composes),
      cmocka_unit_test(test_reshape_of_reshape_and_noops),
      cmocka_unit_test(test_slice_of_slice_composes),
      cmocka_unit_test(test_elementwise_of_scalar_broadcasts_becomes_broadcast),
      cmocka_unit_test(test_broadcasts_of_different_dimensions_stay),
      cmocka_unit_test(test_bitcasts_only_with_layouts_and_no_data_movement),
      cmocka_unit_test(test_constant_folding_evaluates_constant_operands),
      cmocka_unit_test(test_constant_folding_leaves_broadcast_iota_rng_and_large_results),
      cmocka_unit_test(test_constant_folding_of_floats_keeps_bits),
      cmocka_unit_test(test_reduce_of_dot_over_batch_dims_becomes_a_dot),
      cmocka_unit_test(test_size_one_broadcast_and_transpose_become_reshapes),
      cmocka_unit_test(test_constant_folding_leaves_collectives),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
