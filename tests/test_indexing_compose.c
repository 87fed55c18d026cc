/* Composition of indexing maps, removal of unused symbols and symbol rescaling, checked
 * on examples and by brute force on random small maps. */
#include <inttypes.h>
#include <stdlib.h>

#include "tests/indexing_test_util.h"

static void test_compose_concatenates_symbols_first_map_first(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *a = idx_parse(ctx, "(d0)[s0] -> (d0 * 4 + s0), domain: d0 in [0, 7], s0 in [0, 3]");
  kiln_indexing_map_t *b = idx_parse(ctx, "(d0)[s0] -> (d0 floordiv 2 + s0), domain: d0 in [0, 31], s0 in [0, 1]");
  kiln_indexing_map_t *c = NULL;
  assert_null(kiln_indexing_map_compose(a, b, &c));
  idx_assert_prints(c, "(d0)[s0, s1] -> ((d0 * 4 + s0) floordiv 2 + s1), domain: d0 in [0, 7], "
                       "s0 in [0, 3], s1 in [0, 1], d0 * 4 + s0 in [0, 31]");
  kiln_indexing_map_simplify(c);
  idx_assert_prints(c, "(d0)[s0, s1] -> (s0 floordiv 2 + d0 * 2 + s1), domain: d0 in [0, 7], "
                       "s0 in [0, 3], s1 in [0, 1]");
  kiln_indexing_map_free(c);
  kiln_indexing_map_free(a);
  kiln_indexing_map_free(b);
  kiln_affine_ctx_destroy(ctx);
}

static void test_compose_turns_second_domain_into_constraints(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *a = idx_parse(ctx, "(d0) -> (d0 + 2), domain: d0 in [0, 9]");
  kiln_indexing_map_t *b = idx_parse(ctx, "(d0) -> (d0 * 3), domain: d0 in [0, 5]");
  kiln_indexing_map_t *c = NULL;
  assert_null(kiln_indexing_map_compose(a, b, &c));
  kiln_indexing_map_simplify(c);
  idx_assert_prints(c, "(d0) -> (d0 * 3 + 6), domain: d0 in [0, 3]");
  kiln_indexing_map_free(c);
  kiln_indexing_map_free(a);
  kiln_indexing_map_free(b);
  kiln_affine_ctx_destroy(ctx);
}

static void test_compose_rejects_mismatched_arity(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *a = idx_parse(ctx, "(d0) -> (d0, d0)");
  kiln_indexing_map_t *b = idx_parse(ctx, "(d0) -> (d0)");
  kiln_indexing_map_t *c = (kiln_indexing_map_t *)1;
  kiln_status st = kiln_indexing_map_compose(a, b, &c);
  assert_int_equal(kiln_status_code(st), KILN_INVALID_ARGUMENT);
  assert_null(c);
  kiln_status_free(st);
  kiln_indexing_map_free(a);
  kiln_indexing_map_free(b);
  kiln_affine_ctx_destroy(ctx);
}

static void test_unused_symbols_are_removed_and_renumbered(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(
      ctx, "(d0)[s0, s1, s2]{rt0, rt1} -> (d0 + s1 + rt1), domain: s0 in [0, 3], s1 in [0, 1], "
           "s2 in [0, 7], rt0 in [0, 4], s2 mod 2 in [0, 0]");
  assert_true(kiln_indexing_map_remove_unused_symbols(m));
  idx_assert_prints(m, "(d0)[s0, s1]{rt0} -> (d0 + s0 + rt0), domain: s0 in [0, 1], s1 in [0, 7], "
                       "s1 mod 2 in [0, 0]");
  assert_false(kiln_indexing_map_remove_unused_symbols(m));
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

static void test_unused_symbol_with_empty_range_is_kept(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(ctx, "(d0)[s0] -> (d0), domain: s0 in [3, 2]");
  assert_false(kiln_indexing_map_remove_unused_symbols(m));
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

static void test_symbol_with_mod_constraint_is_rescaled(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(ctx, "(d0)[s0] -> (d0 + s0), domain: d0 in [0, 3], s0 in [0, 31], s0 mod 4 in [2, 2]");
  assert_true(kiln_indexing_map_rescale_symbols(m));
  kiln_indexing_map_simplify(m);
  idx_assert_prints(m, "(d0)[s0] -> (d0 + s0 * 4 + 2), domain: d0 in [0, 3], s0 in [0, 7]");
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

static void test_rescale_with_impossible_remainder_is_empty(void **state) {
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_map_t *m = idx_parse(ctx, "(d0)[s0] -> (d0 + s0), domain: s0 in [0, 31], s0 mod 4 in [5, 5]");
  assert_true(kiln_indexing_map_rescale_symbols(m));
  assert_true(m->known_empty);
  kiln_indexing_map_free(m);
  kiln_affine_ctx_destroy(ctx);
}

/* ---- brute force ---- */

static kiln_affine_expr_t *rand_expr(idx_rng_t *r, kiln_affine_ctx_t *ctx, int ndims, int nsyms, int sym_base,
                                     int depth) {
  int c = depth <= 0 ? (int)idx_rng_range(r, 0, 2) : (int)idx_rng_range(r, 0, 8);
  if (c == 0) return kiln_affine_const(ctx, idx_rng_range(r, -2, 9));
  if (c <= 2) {
    if (nsyms > 0 && idx_rng_range(r, 0, 2) == 0)
      return kiln_affine_sym(ctx, sym_base + idx_rng_range(r, 0, nsyms - 1));
    return kiln_affine_dim(ctx, idx_rng_range(r, 0, ndims - 1));
  }
  static const int64_t kDiv[] = {2, 3, 4, 8};
  kiln_affine_expr_t *a = rand_expr(r, ctx, ndims, nsyms, sym_base, depth - 1);
  kiln_affine_expr_t *k = kiln_affine_const(ctx, kDiv[idx_rng_range(r, 0, 3)]);
  switch (c) {
    case 3:
    case 4: return kiln_affine_add(ctx, a, rand_expr(r, ctx, ndims, nsyms, sym_base, depth - 1));
    case 5: return kiln_affine_mul_const(ctx, a, idx_rng_range(r, -2, 4));
    case 6: return kiln_affine_floordiv(ctx, a, k);
    case 7: return kiln_affine_mod(ctx, a, k);
    default: return kiln_affine_max(ctx, a, rand_expr(r, ctx, ndims, nsyms, sym_base, depth - 1));
  }
}

static kiln_indexing_map_t *rand_map(idx_rng_t *r, kiln_affine_ctx_t *ctx, int ndims, int nres) {
  int nsyms = (int)idx_rng_range(r, 0, 1);
  kiln_indexing_map_t *m = kiln_indexing_map_create(ctx, (size_t)ndims, (size_t)nsyms, 0);
  for (int i = 0; i < ndims; i++)
    kiln_indexing_map_set_bounds(m, KILN_INDEXING_DIM, (size_t)i, idx_rng_range(r, -1, 0), idx_rng_range(r, 2, 9));
  for (int i = 0; i < nsyms; i++) kiln_indexing_map_set_bounds(m, KILN_INDEXING_SYM, (size_t)i, 0, idx_rng_range(r, 0, 3));
  for (int i = 0; i < nres; i++) kiln_indexing_map_add_result(m, rand_expr(r, ctx, ndims, nsyms, 0, 3));
  if (idx_rng_range(r, 0, 2) == 0) {
    kiln_affine_expr_t *e = rand_expr(r, ctx, ndims, nsyms, 0, 2);
    int64_t lo = idx_rng_range(r, -2, 4);
    kiln_indexing_map_add_constraint(m, e, lo, lo + idx_rng_range(r, 0, 6));
  }
  return m;
}

static void test_composition_agrees_with_applying_both_maps(void **state) {
  idx_rng_t rng = {0xc0ffee11ull};
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  uint64_t points = 0, feasible = 0;
  const int kMaps = 1500;
  for (int iter = 0; iter < kMaps; iter++) {
    int nx = (int)idx_rng_range(&rng, 1, 2), ny = (int)idx_rng_range(&rng, 1, 2);
    kiln_indexing_map_t *a = rand_map(&rng, ctx, nx, ny);
    kiln_indexing_map_t *b = rand_map(&rng, ctx, ny, (int)idx_rng_range(&rng, 1, 2));
    kiln_indexing_map_t *c = NULL;
    assert_null(kiln_indexing_map_compose(a, b, &c));
    kiln_indexing_map_t *cs = kiln_indexing_map_clone(c);
    kiln_indexing_map_simplify(cs);
    size_t nsa = a->vars[1].len, nsb = b->vars[1].len;
    assert_int_equal(c->vars[1].len, nsa + nsb);
    /* Enumerate x (a's dims, box), sa, sb. */
    int64_t x[2], s[2] = {0, 0};
    kiln_interval_t box[4];
    size_t n = 0;
    for (size_t i = 0; i < a->vars[0].len; i++) box[n++] = a->vars[0].data[i].bounds;
    for (size_t i = 0; i < nsa; i++) box[n++] = a->vars[1].data[i].bounds;
    for (size_t i = 0; i < nsb; i++) box[n++] = b->vars[1].data[i].bounds;
    int64_t vals[4];
    bool empty_box = false;
    for (size_t j = 0; j < n; j++) {
      vals[j] = box[j].lo;
      empty_box |= box[j].lo > box[j].hi;
    }
    while (!empty_box) {
      for (size_t i = 0; i < a->vars[0].len; i++) x[i] = vals[i];
      for (size_t i = 0; i < nsa + nsb; i++) s[i] = vals[a->vars[0].len + i];
      int64_t y[2], z[2], zc[2], zs[2];
      bool fa = kiln_indexing_map_contains(a, x, s, NULL);
      bool ok_y = fa && kiln_indexing_map_eval(a, x, s, NULL, y);
      bool fb = ok_y && kiln_indexing_map_contains(b, y, s + nsa, NULL);
      bool expect = fb && kiln_indexing_map_eval(b, y, s + nsa, NULL, z);
      bool got = kiln_indexing_map_contains(c, x, s, NULL);
      bool got_s = kiln_indexing_map_contains(cs, x, s, NULL);
      if (got != expect || got_s != expect) {
        char *ta = kiln_indexing_map_to_string(a), *tb = kiln_indexing_map_to_string(b);
        char *tc = kiln_indexing_map_to_string(c), *ts = kiln_indexing_map_to_string(cs);
        fprintf(stderr, "domain mismatch (expect %d, composed %d, simplified %d)\n a: %s\n b: %s\n c: %s\n s: %s\n",
                expect, got, got_s, ta, tb, tc, ts);
        fail();
      }
      points++;
      if (expect) {
        feasible++;
        assert_true(kiln_indexing_map_eval(c, x, s, NULL, zc));
        assert_true(kiln_indexing_map_eval(cs, x, s, NULL, zs));
        for (size_t i = 0; i < b->results.len; i++) {
          assert_int_equal(zc[i], z[i]);
          assert_int_equal(zs[i], z[i]);
        }
      }
      size_t k = n;
      while (k > 0 && vals[k - 1] == box[k - 1].hi) {
        vals[k - 1] = box[k - 1].lo;
        k--;
      }
      if (k == 0) break;
      vals[k - 1]++;
    }
    kiln_indexing_map_free(a);
    kiln_indexing_map_free(b);
    kiln_indexing_map_free(c);
    kiln_indexing_map_free(cs);
  }
  printf("compose: %d random pairs, %" PRIu64 " points checked (%" PRIu64 " in the domain)\n", kMaps, points,
         feasible);
  assert_true(feasible > 10000);
  kiln_affine_ctx_destroy(ctx);
}

/* For each dim point, the set of results over all symbol values (and its emptiness). */
typedef struct image {
  int64_t *rows; /* (dims..., results...) tuples */
  size_t len, cap, width;
} image_t;

static bool image_visit(void *user, const int64_t *d, const int64_t *s, const int64_t *rt, const int64_t *res) {
  image_t *im = user;
  if (im->len == im->cap) {
    im->cap = im->cap ? im->cap * 2 : 64;
    im->rows = kiln_realloc(im->rows, im->cap * im->width * sizeof *im->rows);
  }
  int64_t *row = im->rows + im->len * im->width;
  row[0] = d[0];
  row[1] = res[0];
  im->len++;
  return true;
}

static int row_cmp(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  for (int i = 0; i < 2; i++)
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  return 0;
}

static size_t image_unique(image_t *im) {
  if (im->len > 1) qsort(im->rows, im->len, 2 * sizeof *im->rows, row_cmp);
  size_t w = 0;
  for (size_t i = 0; i < im->len; i++)
    if (w == 0 || row_cmp(im->rows + 2 * (w - 1), im->rows + 2 * i) != 0) {
      memmove(im->rows + 2 * w, im->rows + 2 * i, 2 * sizeof *im->rows);
      w++;
    }
  im->len = w;
  return w;
}

static void test_rescale_and_remove_unused_keep_the_image(void **state) {
  idx_rng_t rng = {0xabad1deaull};
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  int rescaled = 0;
  for (int iter = 0; iter < 1000; iter++) {
    kiln_indexing_map_t *m = kiln_indexing_map_create(ctx, 1, 3, 0);
    kiln_indexing_map_set_bounds(m, KILN_INDEXING_DIM, 0, 0, idx_rng_range(&rng, 0, 5));
    for (size_t i = 0; i < 3; i++)
      kiln_indexing_map_set_bounds(m, KILN_INDEXING_SYM, i, idx_rng_range(&rng, -3, 2), idx_rng_range(&rng, 3, 12));
    kiln_affine_expr_t *e = kiln_affine_add(ctx, rand_expr(&rng, ctx, 1, 2, 0, 2),
                                            kiln_affine_mul_const(ctx, kiln_affine_sym(ctx, 0), idx_rng_range(&rng, 1, 3)));
    kiln_indexing_map_add_result(m, e);
    int64_t k = idx_rng_range(&rng, 2, 4);
    kiln_indexing_map_add_constraint(m, kiln_affine_mod(ctx, kiln_affine_sym(ctx, idx_rng_range(&rng, 0, 1)), kiln_affine_const(ctx, k)),
                                     idx_rng_range(&rng, 0, k), 0);
    m->constraints.data[0].range.hi = m->constraints.data[0].range.lo;
    image_t before = {NULL, 0, 0, 2}, after = {NULL, 0, 0, 2};
    assert_null(kiln_indexing_map_for_each_point(m, 1 << 20, image_visit, &before));
    kiln_indexing_map_t *t = kiln_indexing_map_clone(m);
    rescaled += kiln_indexing_map_rescale_symbols(t);
    kiln_indexing_map_simplify(t);
    kiln_indexing_map_remove_unused_symbols(t);
    assert_true(t->vars[1].len <= 3);
    assert_null(kiln_indexing_map_for_each_point(t, 1 << 20, image_visit, &after));
    size_t nb = image_unique(&before), na = image_unique(&after);
    if (nb != na || (nb && memcmp(before.rows, after.rows, nb * 2 * sizeof(int64_t)) != 0)) {
      char *x = kiln_indexing_map_to_string(m), *y = kiln_indexing_map_to_string(t);
      fprintf(stderr, "image changed:\n  %s\n  %s\n", x, y);
      fail();
    }
    kiln_free(before.rows);
    kiln_free(after.rows);
    kiln_indexing_map_free(t);
    kiln_indexing_map_free(m);
  }
  printf("rescale: 1000 random maps, %d rescaled, images unchanged\n", rescaled);
  assert_true(rescaled > 500);
  kiln_affine_ctx_destroy(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compose_concatenates_symbols_first_map_first),
      cmocka_unit_test(test_compose_turns_second_domain_into_constraints),
      cmocka_unit_test(test_compose_rejects_mismatched_arity),
      cmocka_unit_test(test_unused_symbols_are_removed_and_renumbered),
      cmocka_unit_test(test_unused_symbol_with_empty_range_is_kept),
      cmocka_unit_test(test_symbol_with_mod_constraint_is_rescaled),
      cmocka_unit_test(test_rescale_with_impossible_remainder_is_empty),
      cmocka_unit_test(test_composition_agrees_with_applying_both_maps),
      cmocka_unit_test(test_rescale_and_remove_unused_keep_the_image),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
