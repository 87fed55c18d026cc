/* The examples of XLA's MLIR emitter document (seeds/001), rebuilt with kiln's indexing
 * maps: a transpose's output-to-input map, the GELU loop emitter's launch map over
 * bf16[6,512,4096] and its flattened form. */
#include <inttypes.h>

#include "tests/indexing_test_util.h"

static void test_transpose_map_swaps_dimensions(void **state) {
  /* transpose [20,40] -> [40,20]: output (d0, d1) reads input (d1, d0). */
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = kiln_indexing_map_create(ctx, 2, 0, 0);
  kiln_indexing_map_set_bounds(m, KILN_INDEXING_DIM, 0, 0, 39);
  kiln_indexing_map_set_bounds(m, KILN_INDEXING_DIM, 1, 0, 19);
  kiln_indexing_map_add_result(m, kiln_affine_dim(ctx, 1));
  kiln_indexing_map_add_result(m, kiln_affine_dim(ctx, 0));
  idx_assert_prints(m, "(d0, d1) -> (d1, d0), domain: d0 in [0, 39], d1 in [0, 19]");
  bool bij = false;
  assert_null(kiln_indexing_map_is_bijection_brute(m, (int64_t[]){20, 40}, 1 << 20, &bij));
  assert_true(bij);
  /* Transposing twice is the identity. */
  kiln_indexing_map_t *back = idx_parse(ctx, "(d0, d1) -> (d1, d0), domain: d0 in [0, 19], d1 in [0, 39]");
  kiln_indexing_map_t *twice = NULL;
  assert_null(kiln_indexing_map_compose(m, back, &twice));
  kiln_indexing_map_simplify(twice);
  idx_assert_prints(twice, "(d0, d1) -> (d0, d1), domain: d0 in [0, 39], d1 in [0, 19]");
  kiln_indexing_map_free(twice);
  kiln_indexing_map_free(back);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

/* The loop emitter's launch map: thread th_x and block bl_x handle `vector` consecutive
 * elements each, at linear index bl_x * (threads * vector) + th_x * vector + v,
 * delinearized into `shape`. */
static kiln_indexing_map_t *launch_map(kiln_affine_ctx_t *ctx, const int64_t *shape, size_t rank,
                                       int64_t threads, int64_t vector) {
  int64_t n = 1;
  for (size_t i = 0; i < rank; i++) n *= shape[i];
  int64_t per_block = threads * vector;
  kiln_indexing_map_t *m = kiln_indexing_map_create(ctx, 2, 1, 0);
  assert_null(kiln_indexing_map_set_name(m, KILN_INDEXING_DIM, 0, "th_x"));
  assert_null(kiln_indexing_map_set_name(m, KILN_INDEXING_DIM, 1, "bl_x"));
  assert_null(kiln_indexing_map_set_name(m, KILN_INDEXING_SYM, 0, "vector_index"));
  kiln_indexing_map_set_bounds(m, KILN_INDEXING_DIM, 0, 0, threads - 1);
  kiln_indexing_map_set_bounds(m, KILN_INDEXING_DIM, 1, 0, n / per_block - 1);
  kiln_indexing_map_set_bounds(m, KILN_INDEXING_SYM, 0, 0, vector - 1);
  kiln_affine_expr_t *th = kiln_affine_dim(ctx, 0), *bl = kiln_affine_dim(ctx, 1), *v = kiln_affine_sym(ctx, 0);
  kiln_affine_expr_t *linear = kiln_affine_add(
      ctx, kiln_affine_add(ctx, kiln_affine_mul_const(ctx, bl, per_block), kiln_affine_mul_const(ctx, th, vector)), v);
  kiln_affine_expr_t *idx[8];
  kiln_affine_delinearize(ctx, linear, shape, rank, idx);
  for (size_t i = 0; i < rank; i++) kiln_indexing_map_add_result(m, idx[i]);
  return m;
}

static const char kGeluLaunch[] =
    "(th_x, bl_x)[vector_index] -> (bl_x floordiv 4096, (bl_x floordiv 8) mod 512, "
    "(bl_x mod 8) * 512 + th_x * 4 + vector_index), domain: th_x in [0, 127], bl_x in [0, 24575], "
    "vector_index in [0, 3]";

static void test_gelu_launch_map_simplifies_to_emitter_doc_form(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  const int64_t shape[3] = {6, 512, 4096};
  kiln_indexing_map_t *m = launch_map(ctx, shape, 3, 128, 4);
  kiln_indexing_map_simplify(m);
  idx_assert_prints(m, kGeluLaunch);
  /* The doc's text parses to the same map. */
  kiln_indexing_map_t *doc = idx_parse(ctx, kGeluLaunch);
  for (size_t i = 0; i < 3; i++) assert_ptr_equal(doc->results.data[i], m->results.data[i]);
  kiln_indexing_map_free(doc);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

static void test_gelu_flattened_map_is_linear_index(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  const int64_t shape[3] = {6, 512, 4096};
  kiln_indexing_map_t *m = launch_map(ctx, shape, 3, 128, 4);
  kiln_indexing_map_simplify(m);
  /* Flattening: compose with the row-major linearization of the tensor. */
  kiln_indexing_map_t *flat = kiln_indexing_map_identity(ctx, shape, 3);
  kiln_affine_expr_t *dims[3] = {kiln_affine_dim(ctx, 0), kiln_affine_dim(ctx, 1), kiln_affine_dim(ctx, 2)};
  flat->results.len = 0;
  kiln_indexing_map_add_result(flat, kiln_affine_linearize(ctx, dims, shape, 3));
  kiln_indexing_map_t *composed = NULL;
  assert_null(kiln_indexing_map_compose(m, flat, &composed));
  kiln_indexing_map_simplify(composed);
  idx_assert_prints(composed,
                    "(th_x, bl_x)[vector_index] -> (th_x * 4 + bl_x * 512 + vector_index), domain: "
                    "th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]");
  kiln_indexing_map_free(composed);
  kiln_indexing_map_free(flat);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

static void test_gelu_launch_map_matches_numeric_delinearization(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(ctx, kGeluLaunch);
  uint64_t checked = 0;
  for (int64_t bl = 0; bl < 24576; bl += 7) {
    for (int64_t th = 0; th < 128; th++) {
      for (int64_t v = 0; v < 4; v++) {
        int64_t d[2] = {th, bl}, s[1] = {v}, out[3];
        assert_true(kiln_indexing_map_eval(m, d, s, NULL, out));
        int64_t linear = bl * 512 + th * 4 + v;
        assert_int_equal(out[0], linear / (512 * 4096));
        assert_int_equal(out[1], (linear / 4096) % 512);
        assert_int_equal(out[2], linear % 4096);
        checked++;
      }
    }
  }
  printf("GELU launch map checked at %" PRIu64 " points\n", checked);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

static void test_small_launch_map_is_a_bijection_onto_the_tensor(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  const int64_t shape[3] = {2, 8, 64};
  kiln_indexing_map_t *m = launch_map(ctx, shape, 3, 8, 4);
  kiln_indexing_map_simplify(m);
  idx_assert_prints(m,
                    "(th_x, bl_x)[vector_index] -> (bl_x floordiv 16, (bl_x floordiv 2) mod 8, "
                    "(bl_x mod 2) * 32 + th_x * 4 + vector_index), domain: th_x in [0, 7], "
                    "bl_x in [0, 31], vector_index in [0, 3]");
  bool bij = false;
  assert_null(kiln_indexing_map_is_bijection_brute(m, shape, 1 << 20, &bij));
  assert_true(bij);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

static void test_reshape_round_trip_simplifies_to_identity(void **state) {
  /* reshape [4,6] -> [24] -> [4,6]: linearize then delinearize. */
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  const int64_t shape[2] = {4, 6}, flat_shape[1] = {24};
  kiln_indexing_map_t *to_flat = kiln_indexing_map_identity(ctx, shape, 2);
  kiln_affine_expr_t *dims[2] = {kiln_affine_dim(ctx, 0), kiln_affine_dim(ctx, 1)};
  to_flat->results.len = 0;
  kiln_indexing_map_add_result(to_flat, kiln_affine_linearize(ctx, dims, shape, 2));
  kiln_indexing_map_t *from_flat = kiln_indexing_map_identity(ctx, flat_shape, 1);
  kiln_affine_expr_t *parts[2];
  kiln_affine_delinearize(ctx, kiln_affine_dim(ctx, 0), shape, 2, parts);
  from_flat->results.len = 0;
  kiln_indexing_map_add_result(from_flat, parts[0]);
  kiln_indexing_map_add_result(from_flat, parts[1]);
  idx_assert_prints(from_flat, "(d0) -> (d0 floordiv 6, d0 mod 6), domain: d0 in [0, 23]");
  kiln_indexing_map_t *c = NULL;
  assert_null(kiln_indexing_map_compose(to_flat, from_flat, &c));
  kiln_indexing_map_simplify(c);
  idx_assert_prints(c, "(d0, d1) -> (d0, d1), domain: d0 in [0, 3], d1 in [0, 5]");
  kiln_indexing_map_t *c2 = NULL;
  assert_null(kiln_indexing_map_compose(from_flat, to_flat, &c2));
  kiln_indexing_map_simplify(c2);
  idx_assert_prints(c2, "(d0) -> (d0), domain: d0 in [0, 23]");
  kiln_indexing_map_free(c);
  kiln_indexing_map_free(c2);
  kiln_indexing_map_free(to_flat);
  kiln_indexing_map_free(from_flat);
  kiln_affine_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_transpose_map_swaps_dimensions),
      cmocka_unit_test(test_gelu_launch_map_simplifies_to_emitter_doc_form),
      cmocka_unit_test(test_gelu_flattened_map_is_linear_index),
      cmocka_unit_test(test_gelu_launch_map_matches_numeric_delinearization),
      cmocka_unit_test(test_small_launch_map_is_a_bijection_onto_the_tensor),
      cmocka_unit_test(test_reshape_round_trip_simplifies_to_identity),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
