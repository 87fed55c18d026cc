/* Loop-emitter launch grids and their thread -> element maps: the emitter document's GELU
 * example as text, XLA's vector-size and block-count rules, grids split over the y
 * dimension, partial last blocks and non-default layouts, each map checked by brute force
 * to cover every output element exactly once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "compiler/analysis/launch_grid.h"

static void assert_prints(const kiln_indexing_map_t *m, const char *want) {
  char *s = kiln_indexing_map_to_string(m);
  if (strcmp(s, want) != 0) {
    fprintf(stderr, "expected: %s\n  actual: %s\n", want, s);
    kiln_free(s);
    fail();
  }
  kiln_free(s);
}

static kiln_shape_t *shape(kiln_arena_t *a, kiln_elem_type_t t, int rank, const int64_t *dims,
                           const int64_t *minor_to_major) {
  kiln_shape_t *s = kiln_shape_make_array_with_default_layout(a, t, rank, dims);
  if (minor_to_major)
    for (int i = 0; i < rank; i++) s->layout.minor_to_major[i] = minor_to_major[i];
  return s;
}

static const char kGelu[] =
    "(th_x, bl_x)[v] -> (bl_x floordiv 4096, (bl_x floordiv 8) mod 512, (bl_x mod 8) * 512 + th_x * 4 + v), "
    "domain: th_x in [0, 127], bl_x in [0, 24575], v in [0, 3]";

static void test_gelu_grid_and_map_match_the_emitter_document(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_launch_grid_t g;
  assert_null(kiln_launch_grid_for_loop(NULL, 6 * 512 * 4096, true, &g));
  assert_int_equal(g.vector_size, 4);
  assert_int_equal(g.threads, 128);
  assert_int_equal(g.blocks_x, 24576);
  assert_int_equal(g.blocks_y, 1);
  kiln_shape_t *s = shape(&a, KILN_BF16, 3, (int64_t[]){6, 512, 4096}, NULL);
  kiln_indexing_map_t *m = NULL;
  assert_null(kiln_launch_grid_thread_map(ctx, &g, s, NULL, &m));
  assert_prints(m, kGelu);
  kiln_indexing_map_free(m);
  /* With the document's symbol name, the document's text exactly. */
  assert_null(kiln_launch_grid_thread_map(ctx, &g, s, "vector_index", &m));
  assert_prints(m, "(th_x, bl_x)[vector_index] -> (bl_x floordiv 4096, (bl_x floordiv 8) mod 512, "
                   "(bl_x mod 8) * 512 + th_x * 4 + vector_index), domain: th_x in [0, 127], "
                   "bl_x in [0, 24575], vector_index in [0, 3]");
  kiln_indexing_map_free(m);
  assert_null(kiln_launch_grid_linear_map(ctx, &g, NULL, &m));
  assert_prints(m, "(th_x, bl_x)[v] -> (th_x * 4 + bl_x * 512 + v), domain: th_x in [0, 127], "
                   "bl_x in [0, 24575], v in [0, 3]");
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
  kiln_arena_destroy(&a);
}

static void test_vector_size_needs_enough_work_and_divisibility(void **state) {
  kiln_launch_grid_t g;
  const int64_t threshold = 2048 * 132; /* threads per core limit x cores */
  assert_null(kiln_launch_grid_for_loop(NULL, threshold, true, &g));
  assert_int_equal(g.vector_size, 4);
  assert_null(kiln_launch_grid_for_loop(NULL, threshold - 4, true, &g));
  assert_int_equal(g.vector_size, 1); /* too little work */
  assert_null(kiln_launch_grid_for_loop(NULL, threshold * 2 + 2, true, &g));
  assert_int_equal(g.vector_size, 2); /* gcd(N, 4) == 2 */
  assert_null(kiln_launch_grid_for_loop(NULL, threshold * 2 + 1, true, &g));
  assert_int_equal(g.vector_size, 1);
  assert_null(kiln_launch_grid_for_loop(NULL, threshold * 4, false, &g));
  assert_int_equal(g.vector_size, 1); /* vectorization not allowed */
  assert_int_equal(g.blocks_x, threshold * 4 / 128);
  /* Little work: one block of exactly N threads. */
  assert_null(kiln_launch_grid_for_loop(NULL, 20, true, &g));
  assert_int_equal(g.threads, 20);
  assert_int_equal(g.blocks_x, 1);
  assert_null(kiln_launch_grid_for_loop(NULL, 0, true, &g));
  assert_int_equal(g.threads, 1);
  assert_null(kiln_launch_grid_for_loop(NULL, 129, true, &g));
  assert_int_equal(g.threads, 128);
  assert_int_equal(g.blocks_x, 2);
  kiln_status s = kiln_launch_grid_for_loop(NULL, -1, true, &g);
  assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
  kiln_status_free(s);
}

/* The map must send its domain one-to-one onto the tensor. */
static void assert_covers_once(const kiln_indexing_map_t *m, const kiln_shape_t *s) {
  bool bij = false;
  kiln_status st = kiln_indexing_map_is_bijection_brute(m, s->dims, 1u << 22, &bij);
  if (st) fprintf(stderr, "%s\n", kiln_status_message(st));
  assert_null(st);
  if (!bij) {
    char *t = kiln_indexing_map_to_string(m);
    fprintf(stderr, "not a bijection: %s\n", t);
    kiln_free(t);
  }
  assert_true(bij);
}

static void test_partial_last_block_is_constrained(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_launch_grid_t g;
  assert_null(kiln_launch_grid_for_loop(NULL, 20 * 30, true, &g));
  assert_int_equal(g.blocks_x, 5); /* 640 threads for 600 elements */
  kiln_shape_t *s = shape(&a, KILN_F32, 2, (int64_t[]){20, 30}, NULL);
  kiln_indexing_map_t *m = NULL;
  assert_null(kiln_launch_grid_thread_map(ctx, &g, s, NULL, &m));
  assert_prints(m, "(th_x, bl_x)[v] -> ((th_x + bl_x * 128) floordiv 30, (th_x + bl_x * 8) mod 30), "
                   "domain: th_x in [0, 127], bl_x in [0, 4], v in [0, 0], th_x + bl_x * 128 in [0, 599]");
  assert_covers_once(m, s);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
  kiln_arena_destroy(&a);
}

static void test_blocks_over_the_x_limit_split_into_y(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_launch_device_t dev = {.threads_per_block = 4, .block_dim_limit_x = 3, .block_dim_limit_y = 8,
                              .threads_per_core_limit = 1, .core_count = 1};
  kiln_launch_grid_t g;
  assert_null(kiln_launch_grid_for_loop(&dev, 5 * 11, false, &g));
  /* 55 elements / 4 threads = 14 blocks -> 5 rows of 3 blocks */
  assert_int_equal(g.blocks_x, 3);
  assert_int_equal(g.blocks_y, 5);
  kiln_shape_t *s = shape(&a, KILN_F32, 2, (int64_t[]){5, 11}, NULL);
  kiln_indexing_map_t *m = NULL;
  assert_null(kiln_launch_grid_thread_map(ctx, &g, s, NULL, &m));
  assert_int_equal(kiln_indexing_map_num_dims(m), 3);
  assert_covers_once(m, s);
  kiln_indexing_map_free(m);
  /* With vectors: 4 lanes x 4 threads; 16 per block; 160 elements -> 10 blocks. */
  assert_null(kiln_launch_grid_make(160, 4, 4, &dev, &g));
  assert_int_equal(g.blocks_x, 3);
  assert_int_equal(g.blocks_y, 4);
  s = shape(&a, KILN_F32, 3, (int64_t[]){4, 5, 8}, NULL);
  assert_null(kiln_launch_grid_thread_map(ctx, &g, s, NULL, &m));
  assert_covers_once(m, s);
  kiln_indexing_map_free(m);
  /* Beyond x * y: OUT_OF_RANGE. */
  kiln_status st = kiln_launch_grid_for_loop(&dev, 4 * 3 * 8 + 1, false, &g);
  assert_int_equal(kiln_status_code(st), KILN_OUT_OF_RANGE);
  kiln_status_free(st);
  kiln_affine_ctx_destroy(ctx);
  kiln_arena_destroy(&a);
}

typedef struct phys_check {
  const kiln_indexing_map_t *m;
  int64_t strides[4];
  int rank;
  int64_t threads, vector, blocks_x;
} phys_check_t;

static bool check_physical(void *user, const int64_t *dims, const int64_t *syms, const int64_t *rts,
                           const int64_t *results) {
  phys_check_t *c = user;
  int64_t lin = ((dims[1]) * c->threads + dims[0]) * c->vector + syms[0];
  int64_t phys = 0;
  for (int i = 0; i < c->rank; i++) phys += results[i] * c->strides[i];
  assert_int_equal(phys, lin);
  return true;
}

static void test_layout_orders_the_delinearization(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_launch_grid_t g;
  assert_null(kiln_launch_grid_make(4 * 6 * 8, 2, 8, NULL, &g));
  /* minor_to_major {0,2,1}: dim 0 fastest, then 2, then 1. */
  kiln_shape_t *s = shape(&a, KILN_F32, 3, (int64_t[]){4, 6, 8}, (int64_t[]){0, 2, 1});
  kiln_indexing_map_t *m = NULL;
  assert_null(kiln_launch_grid_thread_map(ctx, &g, s, NULL, &m));
  assert_covers_once(m, s);
  /* Lane v of a thread writes physical position linear = (bl_x * 8 + th_x) * 2 + v. */
  phys_check_t c = {m, {1, 32, 4}, 3, 8, 2, g.blocks_x};
  assert_null(kiln_indexing_map_for_each_point(m, 1u << 20, check_physical, &c));
  assert_prints(m, "(th_x, bl_x)[v] -> ((th_x mod 2) * 2 + v, bl_x floordiv 2, th_x floordiv 2 + (bl_x mod 2) * 4), "
                   "domain: th_x in [0, 7], bl_x in [0, 11], v in [0, 1]");
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
  kiln_arena_destroy(&a);
}

static void test_bad_arguments_are_errors(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_launch_grid_t g;
  assert_null(kiln_launch_grid_for_loop(NULL, 100, true, &g));
  kiln_shape_t *s = shape(&a, KILN_F32, 2, (int64_t[]){10, 11}, NULL);
  kiln_indexing_map_t *m = (kiln_indexing_map_t *)1;
  kiln_status st = kiln_launch_grid_thread_map(ctx, &g, s, NULL, &m);
  assert_int_equal(kiln_status_code(st), KILN_INVALID_ARGUMENT);
  assert_null(m);
  kiln_status_free(st);
  st = kiln_launch_grid_thread_map(ctx, &g, kiln_shape_make_array_with_default_layout(&a, KILN_F32, 1, (int64_t[]){100}),
                                   "in", &m);
  assert_int_equal(kiln_status_code(st), KILN_INVALID_ARGUMENT); /* keyword as a name */
  kiln_status_free(st);
  st = kiln_launch_grid_make(10, 0, 4, NULL, &g);
  assert_int_equal(kiln_status_code(st), KILN_INVALID_ARGUMENT);
  kiln_status_free(st);
  kiln_affine_ctx_destroy(ctx);
  kiln_arena_destroy(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gelu_grid_and_map_match_the_emitter_document),
      cmocka_unit_test(test_vector_size_needs_enough_work_and_divisibility),
      cmocka_unit_test(test_partial_last_block_is_constrained),
      cmocka_unit_test(test_blocks_over_the_x_limit_split_into_y),
      cmocka_unit_test(test_layout_orders_the_delinearization),
      cmocka_unit_test(test_bad_arguments_are_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
