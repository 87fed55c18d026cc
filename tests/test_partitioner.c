/* Computation partitioner: the emitter document's examples and XLA's partitioner cases,
 * each stated as the printed partition (one function per line). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "compiler/codegen/partitioner.h"

static kiln_hlo_module_t *parse_fusion(const char *text) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_computations(text, strlen(text), NULL, &m);
  if (s) {
    fprintf(stderr, "parse: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    fail();
  }
  return m;
}

/* Partitions the entry computation of `text` and compares the listing with `want`. */
static void check_partition(const char *text, const char *want, int want_functions) {
  kiln_hlo_module_t *m = parse_fusion(text);
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_partition_t p;
  kiln_status s = kiln_partition_compute(ctx, m->entry, NULL, NULL, &p);
  if (s) fprintf(stderr, "partition: %s\n", kiln_status_message(s));
  assert_null(s);
  kiln_strbuf_t b = {0};
  kiln_partition_print(&p, &b);
  printf("%s", kiln_strbuf_cstr(&b));
  if (strcmp(kiln_strbuf_cstr(&b), want) != 0)
    fprintf(stderr, "want:\n%sgot:\n%s", want, kiln_strbuf_cstr(&b));
  assert_string_equal(kiln_strbuf_cstr(&b), want);
  assert_int_equal(p.num_subgraphs, want_functions);
  kiln_strbuf_free(&b);
  kiln_partition_free(&p);
  kiln_affine_ctx_destroy(ctx);
  kiln_hlo_module_destroy(m);
}

/* The document's graph param -> log -> {transpose, add}, add(log, transpose(log)): log is
 * read at two different indexings, so it heads its own function; transpose has one user and
 * joins it (XLA's own test PartiallyMergable has the same shape and result). */
static void test_doc_log_transpose_add_root(void **state) {
  check_partition("fusion {\n"
                  "  param = f32[16,16] parameter(0)\n"
                  "  log = f32[16,16] log(param)\n"
                  "  transpose = f32[16,16] transpose(log), dimensions={1,0}\n"
                  "  ROOT add = f32[16,16] add(log, transpose)\n"
                  "}\n",
                  "fusion_add: roots={add} instrs={transpose, add} dims=[16,16]\n"
                  "fusion_log: roots={log} instrs={log} dims=[16,16]\n",
                  2);
}

/* The document's "three functions, one instruction each": when the transpose's result is
 * an output of the fusion as well, add, transpose and log each head a function. */
static void test_doc_log_transpose_add_three_functions(void **state) {
  check_partition("fusion {\n"
                  "  param = f32[16,32] parameter(0)\n"
                  "  log = f32[16,32] log(param)\n"
                  "  transpose = f32[32,16] transpose(log), dimensions={1,0}\n"
                  "  bc = f32[16,32] bitcast(transpose)\n"
                  "  add = f32[16,32] add(log, bc)\n"
                  "  ROOT t = (f32[16,32], f32[32,16]) tuple(add, transpose)\n"
                  "}\n",
                  "fusion_add: roots={add} instrs={bc, add} dims=[16,32]\n"
                  "fusion_transpose: roots={transpose} instrs={transpose} dims=[32,16]\n"
                  "fusion_log: roots={log} instrs={log} dims=[16,32]\n",
                  3);
}

/* The slice/pad example: log feeds add directly and through slice -> pad, so log is read at
 * two indexings and heads its own function; slice and pad (one user each) join add. */
static void test_doc_slice_pad_add(void **state) {
  check_partition("fusion {\n"
                  "  param = f32[8] parameter(0)\n"
                  "  log = f32[8] log(param)\n"
                  "  slice = f32[6] slice(log), slice={[1:7]}\n"
                  "  zero = f32[] constant(0)\n"
                  "  pad = f32[8] pad(slice, zero), padding=1_1\n"
                  "  ROOT add = f32[8] add(log, pad)\n"
                  "}\n",
                  "fusion_add: roots={add} instrs={slice, zero, pad, add} dims=[8]\n"
                  "fusion_log: roots={log} instrs={log} dims=[8]\n",
                  2);
}

/* The slice/pad example as three functions: the slice is also an output of the fusion, so
 * it heads a function; log is read by add and by the slice at different indexings and heads
 * another; pad (one user) joins add. */
static void test_doc_slice_pad_three_functions(void **state) {
  check_partition("fusion {\n"
                  "  param = f32[8] parameter(0)\n"
                  "  log = f32[8] log(param)\n"
                  "  slice = f32[6] slice(log), slice={[1:7]}\n"
                  "  zero = f32[] constant(0)\n"
                  "  pad = f32[8] pad(slice, zero), padding=1_1\n"
                  "  add = f32[8] add(log, pad)\n"
                  "  ROOT t = (f32[8], f32[6]) tuple(add, slice)\n"
                  "}\n",
                  "fusion_add: roots={add} instrs={zero, pad, add} dims=[8]\n"
                  "fusion_slice: roots={slice} instrs={slice} dims=[6]\n"
                  "fusion_log: roots={log} instrs={log} dims=[8]\n",
                  3);
}

/* XLA's PartitionDiamonds: every add read by two slices heads a function. */
static void test_diamonds(void **state) {
  check_partition(
      "fused_computation {\n"
      "  %param = f32[6] parameter(0)\n"
      "  %slice0.1 = f32[5] slice(f32[6]{0} %param), slice={[0:5]}\n"
      "  %slice0.2 = f32[5] slice(f32[6]{0} %param), slice={[1:6]}\n"
      "  %add0 = f32[5] add(f32[5]{0} %slice0.1, f32[5]{0} %slice0.2)\n"
      "  %slice1.1 = f32[4] slice(f32[5]{0} %add0), slice={[0:4]}\n"
      "  %slice1.2 = f32[4] slice(f32[5]{0} %add0), slice={[1:5]}\n"
      "  %add1 = f32[4] add(f32[4]{0} %slice1.1, f32[4]{0} %slice1.2)\n"
      "  %slice2.1 = f32[3] slice(f32[4]{0} %add1), slice={[0:3]}\n"
      "  %slice2.2 = f32[3] slice(f32[4]{0} %add1), slice={[1:4]}\n"
      "  %add2 = f32[3] add(f32[3]{0} %slice2.1, f32[3]{0} %slice2.2)\n"
      "  %slice3.1 = f32[2] slice(f32[3]{0} %add2), slice={[0:2]}\n"
      "  %slice3.2 = f32[2] slice(f32[3]{0} %add2), slice={[1:3]}\n"
      "  ROOT %add3 = f32[2] add(f32[2]{0} %slice3.1, f32[2]{0} %slice3.2)\n"
      "}\n",
      "fused_computation_add3: roots={add3} instrs={slice3.1, slice3.2, add3} dims=[2]\n"
      "fused_computation_add2: roots={add2} instrs={slice2.1, slice2.2, add2} dims=[3]\n"
      "fused_computation_add1: roots={add1} instrs={slice1.1, slice1.2, add1} dims=[4]\n"
      "fused_computation_add0: roots={add0} instrs={slice0.1, slice0.2, add0} dims=[5]\n",
      4);
}

/* GELU: the parameter is read five times at the same index; everything is one function. */
static void test_gelu_one_function(void **state) {
  check_partition(
      "gelu {\n"
      "  param = bf16[6,512,4096] parameter(0)\n"
      "  c0 = bf16[] constant(0.5)\n"
      "  b0 = bf16[6,512,4096] broadcast(c0), dimensions={}\n"
      "  c3 = bf16[] constant(0.044708)\n"
      "  b3 = bf16[6,512,4096] broadcast(c3), dimensions={}\n"
      "  sq = bf16[6,512,4096] multiply(param, param)\n"
      "  cube = bf16[6,512,4096] multiply(sq, param)\n"
      "  m3 = bf16[6,512,4096] multiply(cube, b3)\n"
      "  a1 = bf16[6,512,4096] add(param, m3)\n"
      "  t = bf16[6,512,4096] tanh(a1)\n"
      "  m1 = bf16[6,512,4096] multiply(t, b0)\n"
      "  ROOT m0 = bf16[6,512,4096] multiply(param, m1)\n"
      "}\n",
      "gelu_m0: roots={m0} instrs={c0, b0, c3, b3, sq, cube, m3, a1, t, m1, m0} "
      "dims=[6,512,4096]\n",
      1);
}

/* Outputs of equal dims share one function (XLA's TupleRoot); different dims do not. */
static void test_tuple_roots(void **state) {
  check_partition("fusion {\n"
                  "  p0 = f32[6] parameter(0)\n"
                  "  p1 = f32[6] parameter(1)\n"
                  "  add = f32[6] add(p0, p1)\n"
                  "  sub = f32[6] subtract(p0, p1)\n"
                  "  bc = f32[2,3] bitcast(sub)\n"
                  "  ROOT t = (f32[6], f32[6], f32[2,3]) tuple(add, sub, bc)\n"
                  "}\n",
                  "fusion_add: roots={add, sub} instrs={add, sub} dims=[6]\n"
                  "fusion_bc: roots={bc} instrs={bc} dims=[2,3]\n",
                  2);
}

/* A variadic reduce inside a loop fusion: its operands join it (read through the reduce's
 * symbol map from one user each). */
static void test_reduce_operands_join(void **state) {
  check_partition("add {\n"
                  "  a = f32[] parameter(0)\n"
                  "  b = f32[] parameter(1)\n"
                  "  ROOT s = f32[] add(a, b)\n"
                  "}\n"
                  "fusion {\n"
                  "  p0 = f32[3,4,5] parameter(0)\n"
                  "  e = f32[3,4,5] exponential(p0)\n"
                  "  c = f32[] constant(0)\n"
                  "  ROOT r = f32[4] reduce(e, c), dimensions={0,2}, to_apply=add\n"
                  "}\n",
                  "fusion_r: roots={r} instrs={e, c, r} dims=[4]\n", 1);
}

/* Two outputs of equal dimensions where one reads the other through an instruction heading
 * its own function (s0: read by the reduce and by s at different indexings). Sharing one
 * function, {v9, s} would call s0's, which calls back for v9: an endless recursion in the
 * kernel (kiln-fuzz seed 500038, tests/fuzz_regressions/fuzz-500038.hlo). Each output heads
 * its own function instead, and the calls go one way: s -> s0 -> v9. */
static void test_outputs_sharing_a_function_make_no_call_cycle(void **state) {
  check_partition(
      "add {\n"
      "  a = f32[] parameter(0)\n"
      "  b = f32[] parameter(1)\n"
      "  ROOT s = f32[] add(a, b)\n"
      "}\n"
      "fusion {\n"
      "  p = f32[1,3] parameter(0)\n"
      "  v9 = f32[1,3] negate(p)\n"
      "  s0 = f32[1,3] multiply(v9, p)\n"
      "  z = f32[] constant(0)\n"
      "  r = f32[3] reduce(s0, z), dimensions={0}, to_apply=add\n"
      "  b = f32[1,3] broadcast(r), dimensions={1}\n"
      "  s = f32[1,3] subtract(s0, b)\n"
      "  ROOT t = (f32[1,3], f32[1,3]) tuple(v9, s)\n"
      "}\n",
      "fusion_v9: roots={v9} instrs={v9} dims=[1,3]\n"
      "fusion_s: roots={s} instrs={z, r, b, s} dims=[1,3]\n"
      "fusion_s0: roots={s0} instrs={s0} dims=[1,3]\n",
      3);
}

static void test_non_array_output_is_unimplemented(void **state) {
  kiln_hlo_module_t *m = parse_fusion("fusion {\n"
                                      "  p0 = f32[2] parameter(0)\n"
                                      "  tok = token[] after-all()\n"
                                      "  ROOT t = (f32[2], token[]) tuple(p0, tok)\n"
                                      "}\n");
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_partition_t p;
  kiln_status s = kiln_partition_compute(ctx, m->entry, NULL, NULL, &p);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_UNIMPLEMENTED);
  kiln_status_free(s);
  kiln_affine_ctx_destroy(ctx);
  kiln_hlo_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_doc_log_transpose_add_root),
      cmocka_unit_test(test_doc_log_transpose_add_three_functions),
      cmocka_unit_test(test_doc_slice_pad_add),
      cmocka_unit_test(test_doc_slice_pad_three_functions),
      cmocka_unit_test(test_diamonds),
      cmocka_unit_test(test_gelu_one_function),
      cmocka_unit_test(test_tuple_roots),
      cmocka_unit_test(test_reduce_operands_join),
      cmocka_unit_test(test_outputs_sharing_a_function_make_no_call_cycle),
      cmocka_unit_test(test_non_array_output_is_unimplemented),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
