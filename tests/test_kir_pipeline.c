/* Kernel IR: builder, verifier, printer, and the pipeline stages on the emitter document's
 * GELU example (the text after each stage), the inliner's called-twice rule, and dumps. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "compiler/codegen/kir_pipeline.h"
#include "tests/kir_test_kernels.h"

static char *text_of(kiln_kir_module_t *m) { return kiln_kir_to_string(m); }

static void assert_contains(const char *hay, const char *needle) {
  if (!strstr(hay, needle)) {
    fprintf(stderr, "expected to find `%s` in:\n%s\n", needle, hay);
    fail();
  }
}
static void assert_not_contains(const char *hay, const char *needle) {
  if (strstr(hay, needle)) {
    fprintf(stderr, "did not expect `%s` in:\n%s\n", needle, hay);
    fail();
  }
}
static size_t count(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

static const int64_t kGeluDims[3] = {6, 512, 4096};

static void test_gelu_input_prints_loop_and_pure_call(void **state) {
  (void)state;
  kiln_kir_module_t *m = kir_test_build_gelu(KILN_BF16, kGeluDims, 4);
  assert_non_null(m);
  assert_null(kiln_kir_verify(m));
  char *t = text_of(m);
  assert_contains(t, "func @main(%input: tensor<6x512x4096xbf16>, %output: tensor<6x512x4096xbf16> "
                     "{written}) -> (tensor<6x512x4096xbf16>) kernel block=[128, 1, 1] "
                     "grid=[24576, 1, 1] {");
  assert_contains(t, "%th_x = thread_id x in [0, 127]");
  assert_contains(t, "%bl_x = block_id x in [0, 24575]");
  assert_contains(t, "loop (%th_x, %bl_x)[%v] -> (%dim0, %dim1, %dim2) in (th_x, bl_x)[v] -> "
                     "(bl_x floordiv 4096, (bl_x floordiv 8) mod 512, (bl_x mod 8) * 512 + th_x * 4 + v)");
  assert_contains(t, "iter_args(%iter = %output) -> (tensor<6x512x4096xbf16>) {");
  assert_contains(t, "= call @gelu(%input, %dim0, %dim1, %dim2) -> (bf16)");
  assert_contains(t, "%inserted = insert %1 into %iter[%dim0, %dim1, %dim2] : tensor<6x512x4096xbf16>");
  assert_contains(t, "func @gelu(%arg0: tensor<6x512x4096xbf16>, %i: index, %j: index, %k: index) -> (bf16) {");
  assert_contains(t, "= tanh %9 : bf16");
  assert_contains(t, "= constant 0.79785 : bf16");
  /* Printing is stable. */
  char *t2 = text_of(m);
  assert_string_equal(t, t2);
  kiln_free(t2);
  kiln_free(t);
  kiln_kir_module_destroy(m);
}

static void test_gelu_stages_match_the_emitter_document(void **state) {
  (void)state;
  kiln_kir_module_t *m = kir_test_build_gelu(KILN_BF16, kGeluDims, 4);
  assert_non_null(m);

  assert_null(kiln_kir_inline(m));
  char *t = text_of(m);
  assert_not_contains(t, "@gelu");                 /* one call site: inlined, function removed */
  assert_contains(t, "= extract %input[%dim0, %dim1, %dim2] : tensor<6x512x4096xbf16>");
  assert_contains(t, "= tanh ");
  assert_contains(t, "loop (%th_x, %bl_x)[%v]");
  kiln_free(t);

  assert_null(kiln_kir_lower_loops(m));
  t = text_of(m);
  assert_not_contains(t, "loop (");
  assert_contains(t, "for %v = ");
  assert_contains(t, "%dim0, %dim1, %dim2 = apply_indexing (%th_x, %bl_x)[%v] in (th_x, bl_x)[v] -> ");
  /* The grid covers the tensor exactly: no bounds check is left. */
  assert_not_contains(t, " if ");
  kiln_free(t);

  assert_null(kiln_kir_flatten(m));
  t = text_of(m);
  assert_contains(t, "func @main(%input: tensor<12582912xbf16>, %output: tensor<12582912xbf16> {written})");
  assert_contains(t, "apply_indexing (%th_x, %bl_x)[%v] in (th_x, bl_x)[v] -> (th_x * 4 + bl_x * 512 + v)");
  assert_contains(t, "= extract %input[%");
  kiln_free(t);

  assert_null(kiln_kir_vectorize(m));
  t = text_of(m);
  assert_contains(t, "= vload %input[%");
  assert_contains(t, "] : tensor<12582912xbf16> -> vector<4xbf16>");
  assert_contains(t, "= vextract %");
  assert_contains(t, "= vinsert %");
  assert_contains(t, "vstore %");
  assert_not_contains(t, "= extract ");
  assert_not_contains(t, "= insert ");
  kiln_free(t);

  assert_null(kiln_kir_unroll(m, 8));
  t = text_of(m);
  assert_not_contains(t, "for %");
  assert_int_equal(count(t, "= tanh "), 4);
  assert_contains(t, "[0] : vector<4xbf16>");
  assert_contains(t, "[3] : vector<4xbf16>");
  assert_int_equal(count(t, "vload"), 1);
  assert_int_equal(count(t, "vstore"), 1);
  kiln_free(t);
  kiln_kir_module_destroy(m);
}

static void test_partial_grid_gets_a_bounds_check_on_the_failing_side_only(void **state) {
  (void)state;
  int64_t dims[3] = {3, 5, 70}; /* 1050 elements, 3 blocks of 128 x 4 */
  kiln_kir_module_t *m = kir_test_build_gelu(KILN_F32, dims, 4);
  assert_non_null(m);
  kiln_kir_pipeline_options_t o = {.dump_dir = "", .unroll_max_trip = -1};
  assert_null(kiln_kir_pipeline_run(m, &o));
  char *t = text_of(m);
  assert_contains(t, "cmp le %");
  assert_contains(t, "constant 1049 : index");
  assert_not_contains(t, "cmp ge"); /* the lower side holds for every thread */
  /* the check depends on the vector index, so nothing is vectorized */
  assert_not_contains(t, "vload");
  kiln_free(t);
  kiln_kir_module_destroy(m);
}

static void test_subgraph_called_twice_stays_a_function(void **state) {
  (void)state;
  int64_t dims[3] = {2, 3, 40};
  kiln_kir_module_t *m = kir_test_build_twice(KILN_S32, dims);
  assert_non_null(m);
  assert_null(kiln_kir_pipeline_run(m, NULL));
  char *t = text_of(m);
  assert_int_equal(count(t, "= call @f("), 2);
  assert_contains(t, "func @f(%x: tensor<240xs32>, %y: tensor<240xs32>, %i: index, %j: index, %k: index) -> (s32) {");
  kiln_free(t);
  kiln_kir_module_destroy(m);
}

static void test_builder_reports_type_errors_and_returns_null(void **state) {
  (void)state;
  kiln_kir_module_t *m = kiln_kir_module_create("bad", NULL);
  const kiln_kir_type_t *f32 = kiln_kir_type_scalar(m, KILN_F32);
  kiln_kir_func_t *f = kiln_kir_func_create(m, "g", KILN_KIR_FUNC_SUBGRAPH, NULL, NULL, 0, &f32, 1);
  assert_non_null(f);
  assert_null(kiln_kir_func_create(m, "g", KILN_KIR_FUNC_SUBGRAPH, NULL, NULL, 0, &f32, 1));
  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, m, kiln_kir_func_body(f));
  kiln_kir_value_t *x = kiln_kir_const_float(&b, KILN_F32, 1.0);
  kiln_kir_value_t *i = kiln_kir_const_int(&b, KILN_S32, 1);
  assert_null(kiln_kir_binary(&b, KILN_KIR_ADD, x, i));
  assert_false(kiln_kir_builder_ok(&b));
  /* later calls keep returning NULL */
  assert_null(kiln_kir_unary(&b, KILN_KIR_EXP, x));
  kiln_status s = kiln_kir_builder_take_status(&b);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  assert_non_null(strstr(kiln_status_message(s), "add: operand types differ (f32 vs s32)"));
  kiln_status_free(s);
  /* exp of an integer is rejected */
  assert_null(kiln_kir_unary(&b, KILN_KIR_EXP, i));
  kiln_kir_builder_finish(&b);
  kiln_kir_module_destroy(m);
}

static void test_verifier_rejects_missing_return_and_unwritten_kernel_result(void **state) {
  (void)state;
  kiln_kir_module_t *m = kiln_kir_module_create("bad", NULL);
  int64_t n = 8;
  const kiln_kir_type_t *t = kiln_kir_type_tensor(m, KILN_F32, 1, &n, KILN_KIR_SPACE_GLOBAL);
  const kiln_kir_type_t *ps[2] = {t, t};
  kiln_kir_func_t *k = kiln_kir_func_create(m, "k", KILN_KIR_FUNC_KERNEL, ps, NULL, 2, &t, 1);
  kiln_status s = kiln_kir_verify(m);
  assert_non_null(s);
  assert_non_null(strstr(kiln_status_message(s), "empty region"));
  kiln_status_free(s);
  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, m, kiln_kir_func_body(k));
  kiln_kir_value_t *p0 = kiln_kir_func_param(k, 0);
  kiln_kir_return(&b, &p0, 1); /* parameter 0 is not written */
  kiln_kir_builder_finish(&b);
  s = kiln_kir_verify(m);
  assert_non_null(s);
  assert_non_null(strstr(kiln_status_message(s), "does not come from a written tensor parameter"));
  kiln_status_free(s);
  kiln_kir_func_set_written(k, 0, true);
  assert_null(kiln_kir_verify(m));
  kiln_kir_module_destroy(m);
}

static void test_verifier_rejects_thread_id_outside_the_launch(void **state) {
  (void)state;
  kiln_kir_module_t *m = kiln_kir_module_create("bad", NULL);
  int64_t n = 8;
  const kiln_kir_type_t *t = kiln_kir_type_tensor(m, KILN_F32, 1, &n, KILN_KIR_SPACE_GLOBAL);
  kiln_kir_func_t *k = kiln_kir_func_create(m, "k", KILN_KIR_FUNC_KERNEL, &t, NULL, 1, &t, 1);
  kiln_kir_func_set_written(k, 0, true);
  int64_t block[3] = {64, 1, 1}, grid[3] = {1, 1, 1};
  kiln_kir_func_set_launch(k, block, grid);
  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, m, kiln_kir_func_body(k));
  kiln_kir_thread_id(&b, 0, 0, 127);
  kiln_kir_value_t *p0 = kiln_kir_func_param(k, 0);
  kiln_kir_return(&b, &p0, 1);
  kiln_kir_builder_finish(&b);
  kiln_status s = kiln_kir_verify(m);
  assert_non_null(s);
  assert_non_null(strstr(kiln_status_message(s), "outside the launch dimension 64"));
  kiln_status_free(s);
  kiln_kir_module_destroy(m);
}

static void test_dumps_sort_in_pipeline_order(void **state) {
  (void)state;
  char dir[] = "/tmp/kiln_kir_dumpXXXXXX";
  assert_non_null(mkdtemp(dir));
  kiln_kir_module_t *m = kir_test_build_gelu(KILN_BF16, kGeluDims, 4);
  kiln_kir_pipeline_options_t o = {.dump_dir = dir};
  assert_null(kiln_kir_pipeline_run(m, &o));
  kiln_kir_module_destroy(m);
  static const char *const kExpected[] = {"gelu.50-kir-input.txt",       "gelu.51-kir-inline.txt",
                                          "gelu.52-kir-lower-loops.txt", "gelu.53-kir-flatten.txt",
                                          "gelu.54-kir-vectorize.txt",   "gelu.55-kir-unroll.txt",
                                          "gelu.56-kir-hoist.txt"};
  struct dirent **names;
  int n = scandir(dir, &names, NULL, alphasort);
  int seen = 0;
  for (int i = 0; i < n; i++) {
    if (names[i]->d_name[0] != '.') {
      assert_true(seen < 7);
      assert_string_equal(names[i]->d_name, kExpected[seen]);
      seen++;
      char path[512];
      snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
      unlink(path);
    }
    free(names[i]);
  }
  free(names);
  rmdir(dir);
  assert_int_equal(seen, 7);
}

static void test_reduction_and_transpose_survive_the_pipeline(void **state) {
  (void)state;
  kiln_kir_module_t *r = kir_test_build_row_reduce(4, 512);
  assert_non_null(r);
  assert_null(kiln_kir_pipeline_run(r, NULL));
  char *t = text_of(r);
  assert_contains(t, "%shmem = allocate_shared : tensor<8xf32, shared>");
  assert_int_equal(count(t, "= shuffle down "), 8);
  assert_contains(t, "= barrier %");
  kiln_free(t);
  kiln_kir_module_destroy(r);
  kiln_kir_module_t *x = kir_test_build_transpose(64, 96);
  assert_non_null(x);
  assert_null(kiln_kir_pipeline_run(x, NULL));
  t = text_of(x);
  assert_contains(t, "%tile = allocate_shared : tensor<1056xf32, shared>");
  assert_not_contains(t, "for %"); /* the 4-trip loops are unrolled */
  kiln_free(t);
  kiln_kir_module_destroy(x);
}

/* A guarded read as a padded convolution makes one per window element: out[i] = in[i - 16]
 * when block bl >= 1, else 0; and a thread-range guard (th < 8) with the same body. */
static kiln_kir_module_t *build_guarded_reads(void) {
  kiln_kir_module_t *m = kiln_kir_module_create("guarded", NULL);
  int64_t n = 64;
  const kiln_kir_type_t *t = kiln_kir_type_tensor(m, KILN_F32, 1, &n, KILN_KIR_SPACE_GLOBAL);
  const kiln_kir_type_t *f32 = kiln_kir_type_scalar(m, KILN_F32);
  const kiln_kir_type_t *ps[2] = {t, t};
  kiln_kir_func_t *k = kiln_kir_func_create(m, "guarded", KILN_KIR_FUNC_KERNEL, ps, NULL, 2, &t, 1);
  kiln_kir_func_set_written(k, 1, true);
  int64_t block[3] = {16, 1, 1}, grid[3] = {4, 1, 1};
  kiln_kir_func_set_launch(k, block, grid);
  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, m, kiln_kir_func_body(k));
  kiln_kir_value_t *ids[2] = {kiln_kir_thread_id(&b, 0, 0, 15), kiln_kir_block_id(&b, 0, 0, 3)};
  kiln_kir_value_t *i = kiln_kir_apply_indexing1(
      &b, kir_test_map(m, "(th, bl) -> (bl * 16 + th), domain: th in [0, 15], bl in [0, 3]"), ids,
      2);
  kiln_kir_value_t *conds[2] = {
      kiln_kir_cmp(&b, KILN_KIR_CMP_GE, ids[1], kiln_kir_const_index(&b, 1)),
      kiln_kir_cmp(&b, KILN_KIR_CMP_LT, ids[0], kiln_kir_const_index(&b, 8))};
  const char *maps[2] = {"(th, bl) -> (bl * 16 + th - 16), domain: th in [0, 15], bl in [1, 3]",
                         "(th, bl) -> (bl * 16 + th + 7), domain: th in [0, 7], bl in [0, 3]"};
  kiln_kir_value_t *sum = kiln_kir_const_float(&b, KILN_F32, 0.0);
  for (int g = 0; g < 2; g++) {
    kiln_kir_op_t *op = kiln_kir_if(&b, conds[g], &f32, 1);
    kiln_kir_builder_enter(&b, kiln_kir_op_region(op, 0));
    kiln_kir_value_t *j = kiln_kir_apply_indexing1(&b, kir_test_map(m, maps[g]), ids, 2);
    kiln_kir_value_t *x = kiln_kir_extract(&b, kiln_kir_func_param(k, 0), &j, 1);
    kiln_kir_value_t *y = kiln_kir_binary(&b, KILN_KIR_ADD, sum, x);
    kiln_kir_yield(&b, &y, 1);
    kiln_kir_builder_exit(&b);
    kiln_kir_builder_enter(&b, kiln_kir_op_region(op, 1));
    kiln_kir_yield(&b, &sum, 1);
    kiln_kir_builder_exit(&b);
    sum = kiln_kir_op_result(op, 0);
  }
  kiln_kir_value_t *r = kiln_kir_insert(&b, sum, kiln_kir_func_param(k, 1), &i, 1);
  kiln_kir_return(&b, &r, 1);
  return kir_test_finish(&b, m);
}

static void test_hoist_moves_guarded_index_math_out_of_block_guards_only(void **state) {
  (void)state;
  kiln_kir_module_t *m = build_guarded_reads();
  assert_non_null(m);
  assert_null(kiln_kir_hoist(m));
  char *t = text_of(m);
  const char *if1 = strstr(t, "= if ");
  assert_non_null(if1);
  const char *if2 = strstr(if1 + 1, "= if ");
  assert_non_null(if2);
  /* The block guard's address is computed before its `if`; its load stays inside. */
  const char *a1 = strstr(t, "(th + bl * 16 - 16)");
  assert_non_null(a1);
  assert_true(a1 < if1);
  assert_true(strstr(t, "= extract ") > if1);
  /* The thread-range guard (the host runs it as a thread loop) keeps its address. */
  const char *a2 = strstr(t, "(th + bl * 16 + 7)");
  assert_non_null(a2);
  assert_true(a2 > if2);
  kiln_free(t);
  kiln_kir_module_destroy(m);
}

/* The loop emitter's shape for a transpose that keeps the minor dimension (the corpus's
 * gpu/tests/vectorization.hlo): the read's indices are a permutation of the loop's, a second
 * apply_indexing over the first one's results. */
static kiln_kir_module_t *build_major_swap(void) {
  kiln_kir_module_t *m = kiln_kir_module_create("swap", NULL);
  const int64_t in_dims[3] = {8, 6, 16}, out_dims[3] = {6, 8, 16};
  const kiln_kir_type_t *ti = kiln_kir_type_tensor(m, KILN_S8, 3, in_dims, KILN_KIR_SPACE_GLOBAL);
  const kiln_kir_type_t *to = kiln_kir_type_tensor(m, KILN_S8, 3, out_dims, KILN_KIR_SPACE_GLOBAL);
  const kiln_kir_type_t *ps[2] = {ti, to};
  const char *names[2] = {"input", "output"};
  kiln_kir_func_t *k = kiln_kir_func_create(m, "swap", KILN_KIR_FUNC_KERNEL, ps, names, 2, &to, 1);
  kiln_kir_func_set_written(k, 1, true);
  int64_t block[3] = {64, 1, 1}, grid[3] = {3, 1, 1};
  kiln_kir_func_set_launch(k, block, grid);
  kiln_kir_builder_t b;
  kiln_kir_builder_init(&b, m, kiln_kir_func_body(k));
  kiln_kir_value_t *ids[2] = {kiln_kir_thread_id(&b, 0, 0, 63), kiln_kir_block_id(&b, 0, 0, 2)};
  kiln_kir_value_t *out = kiln_kir_func_param(k, 1);
  kiln_kir_op_t *loop =
      kiln_kir_loop(&b, kir_test_loop_map(m, out_dims, 3, 64, 3, 4), ids, 2, &out, 1);
  if (loop) {
    kiln_kir_builder_enter(&b, kiln_kir_op_region(loop, 0));
    kiln_kir_value_t *d[3] = {kiln_kir_loop_index(loop, 0), kiln_kir_loop_index(loop, 1),
                              kiln_kir_loop_index(loop, 2)};
    kiln_kir_op_t *perm = kiln_kir_apply_indexing(
        &b,
        kir_test_map(
            m, "(d0, d1, d2) -> (d1, d0, d2), domain: d0 in [0, 5], d1 in [0, 7], d2 in [0, 15]"),
        d, 3, NULL, 0);
    kiln_kir_value_t *p[3] = {kiln_kir_op_result(perm, 0), kiln_kir_op_result(perm, 1),
                              kiln_kir_op_result(perm, 2)};
    kiln_kir_value_t *x = kiln_kir_extract(&b, kiln_kir_func_param(k, 0), p, 3);
    kiln_kir_value_t *ins = kiln_kir_insert(&b, x, kiln_kir_loop_iter_arg(loop, 0), d, 3);
    kiln_kir_yield(&b, &ins, 1);
    kiln_kir_builder_exit(&b);
  }
  kiln_kir_value_t *r = kiln_kir_op_result(loop, 0);
  kiln_kir_return(&b, &r, 1);
  return kir_test_finish(&b, m);
}

static void test_flatten_composes_a_permutation_so_the_read_vectorizes(void **state) {
  (void)state;
  kiln_kir_module_t *m = build_major_swap();
  assert_non_null(m);
  assert_null(kiln_kir_lower_loops(m));
  assert_null(kiln_kir_flatten(m));
  char *t = text_of(m);
  /* the read's flat index is over the loop's own variables: input[d1][d0][d2] */
  assert_contains(t,
                  "(th_x, bl_x)[v] -> ((th_x floordiv 32) * 16 + ((th_x floordiv 4) mod 8) * 96 + "
                  "(th_x mod 4) * 4 + bl_x * 32 + v)");
  kiln_free(t);
  assert_null(kiln_kir_vectorize(m));
  t = text_of(m);
  assert_contains(t, "= vload %input[%");
  assert_contains(t, "] : tensor<768xs8> -> vector<4xs8>");
  assert_not_contains(t, "= extract ");
  kiln_free(t);
  kiln_kir_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gelu_input_prints_loop_and_pure_call),
      cmocka_unit_test(test_gelu_stages_match_the_emitter_document),
      cmocka_unit_test(test_partial_grid_gets_a_bounds_check_on_the_failing_side_only),
      cmocka_unit_test(test_subgraph_called_twice_stays_a_function),
      cmocka_unit_test(test_builder_reports_type_errors_and_returns_null),
      cmocka_unit_test(test_verifier_rejects_missing_return_and_unwritten_kernel_result),
      cmocka_unit_test(test_verifier_rejects_thread_id_outside_the_launch),
      cmocka_unit_test(test_dumps_sort_in_pipeline_order),
      cmocka_unit_test(test_reduction_and_transpose_survive_the_pipeline),
      cmocka_unit_test(test_hoist_moves_guarded_index_math_out_of_block_guards_only),
      cmocka_unit_test(test_flatten_composes_a_permutation_so_the_read_vectorizes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
