/* Fusion-level indexing: hand-written fusions whose grouped maps are stated as text, and
 * corpus emitter fusions checked by brute force against the reference evaluator. For the
 * brute-force check each parameter element at sampled positions is perturbed, the fusion
 * re-evaluated, and every root element that changed must be one whose maps name the
 * perturbed element (soundness). Named-but-unchanged pairs are counted; for fusions made
 * only of data movement and strictly monotone arithmetic there must be none (exactness). */
#include <dirent.h>
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
#include "compiler/analysis/fusion_indexing.h"
#include "compiler/eval/eval.h"
#include "tools/common/hlo_file.h"

/* ---- text tests ---- */

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

/* Asserts the maps of `name` under root `r`, in order, print as `want` (NULL-terminated). */
static void assert_group(const kiln_indexing_fusion_root_t *r, const char *name,
                         const char *const *want) {
  const kiln_indexing_fusion_group_t *g = kiln_indexing_fusion_find(r, name);
  if (!g) {
    fprintf(stderr, "no group for %s\n", name);
    fail();
  }
  int n = 0;
  while (want[n]) n++;
  bool ok = g->num_maps == n && !g->unknown;
  for (int k = 0; ok && k < n; k++) {
    char *s = kiln_indexing_map_to_string(g->maps[k]);
    bool found = false;
    for (int j = 0; j < n; j++) found |= strcmp(s, want[j]) == 0;
    ok = found;
    kiln_free(s);
  }
  if (!ok) {
    fprintf(stderr, "group %s%s has %d maps:\n", name, g->unknown ? " (unknown)" : "", g->num_maps);
    for (int k = 0; k < g->num_maps; k++) {
      char *s = kiln_indexing_map_to_string(g->maps[k]);
      fprintf(stderr, "  %s\n", s);
      kiln_free(s);
    }
    for (int k = 0; k < n; k++) fprintf(stderr, " want %s\n", want[k]);
    fail();
  }
}

#define MAPS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_chain_composes_transpose_and_broadcast(void **state) {
  kiln_hlo_module_t *m = parse_fusion(
      "fusion {\n  p0 = f32[10,20] parameter(0)\n  t = f32[20,10] transpose(p0), dimensions={1,0}\n"
      "  e = f32[20,10] exponential(t)\n  ROOT b = f32[5,20,10] broadcast(e), dimensions={1,2}\n}\n");
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_fusion_t fi;
  assert_null(kiln_indexing_fusion_compute(ctx, m->entry, NULL, &fi));
  assert_int_equal(fi.num_roots, 1);
  const kiln_indexing_fusion_root_t *r = &fi.roots[0];
  assert_int_equal(r->num_groups, 4);
  assert_string_equal(r->groups[0].instr->name, "b");
  const char *dom = "domain: d0 in [0, 4], d1 in [0, 19], d2 in [0, 9]";
  char want[256];
  snprintf(want, sizeof want, "(d0, d1, d2) -> (d2, d1), %s", dom);
  assert_group(r, "p0", MAPS(want));
  snprintf(want, sizeof want, "(d0, d1, d2) -> (d1, d2), %s", dom);
  assert_group(r, "t", MAPS(want));
  assert_group(r, "e", MAPS(want));
  assert_int_equal(fi.num_unknown, 0);
  kiln_indexing_fusion_free(&fi);
  kiln_affine_ctx_destroy(ctx);
  kiln_hlo_module_destroy(m);
}

static void test_two_paths_to_one_parameter_give_two_maps(void **state) {
  /* The stencil p[i] + p[i+1] reshaped: two distinct maps for p, one for each slice. */
  kiln_hlo_module_t *m = parse_fusion(
      "fusion {\n  p = f32[9] parameter(0)\n  a = f32[8] slice(p), slice={[0:8]}\n"
      "  b = f32[8] slice(p), slice={[1:9]}\n  s = f32[8] add(a, b)\n"
      "  ROOT r = f32[2,4] reshape(s)\n}\n");
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_fusion_t fi;
  assert_null(kiln_indexing_fusion_compute(ctx, m->entry, NULL, &fi));
  const kiln_indexing_fusion_root_t *r = &fi.roots[0];
  assert_group(r, "p", MAPS("(d0, d1) -> (d0 * 4 + d1), domain: d0 in [0, 1], d1 in [0, 3]",
                            "(d0, d1) -> (d0 * 4 + d1 + 1), domain: d0 in [0, 1], d1 in [0, 3]"));
  assert_group(r, "s", MAPS("(d0, d1) -> (d0 * 4 + d1), domain: d0 in [0, 1], d1 in [0, 3]"));
  kiln_indexing_fusion_free(&fi);
  kiln_affine_ctx_destroy(ctx);
  kiln_hlo_module_destroy(m);
}

static void test_tuple_root_reduce_and_unknown_grouping(void **state) {
  kiln_hlo_module_t *m = parse_fusion(
      "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
      "cmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT lt = pred[] compare(a, b), direction=LT\n}\n"
      "fusion {\n  p = f32[4,6] parameter(0)\n  q = f32[6] parameter(1)\n  z = f32[] constant(0)\n"
      "  red = f32[6] reduce(p, z), dimensions={0}, to_apply=add\n"
      "  srt = f32[6] sort(q), dimensions={0}, to_apply=cmp\n"
      "  ROOT t = (f32[6], f32[6], f32[6]) tuple(red, srt, q)\n}\n");
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_fusion_t fi;
  /* The last computation is the entry. */
  assert_null(kiln_indexing_fusion_compute(ctx, m->entry, NULL, &fi));
  assert_int_equal(fi.num_roots, 3);
  assert_string_equal(fi.roots[0].root->name, "red");
  assert_group(&fi.roots[0], "p", MAPS("(d0)[s0] -> (s0, d0), domain: d0 in [0, 5], s0 in [0, 3]"));
  assert_group(&fi.roots[0], "z", MAPS("(d0) -> (), domain: d0 in [0, 5]"));
  assert_null(kiln_indexing_fusion_find(&fi.roots[0], "q"));
  const kiln_indexing_fusion_group_t *g = kiln_indexing_fusion_find(&fi.roots[1], "q");
  assert_non_null(g);
  assert_true(g->unknown); /* through the sort */
  assert_group(&fi.roots[2], "q", MAPS("(d0) -> (d0), domain: d0 in [0, 5]"));
  assert_int_equal(fi.num_unknown, 1);
  kiln_strbuf_t b = {0};
  kiln_indexing_fusion_print(&b, &fi);
  assert_non_null(strstr(b.data, "root srt:\n  srt:\n    (d0) -> (d0), domain: d0 in [0, 5]\n  q (unknown):\n"));
  kiln_strbuf_free(&b);
  kiln_indexing_fusion_free(&fi);
  kiln_affine_ctx_destroy(ctx);
  kiln_hlo_module_destroy(m);
}

static void test_concatenate_of_slices_drops_paths_that_read_nothing(void **state) {
  /* The slice keeps only elements of the second operand: the first one's map is empty. */
  kiln_hlo_module_t *m = parse_fusion(
      "fusion {\n  a = f32[4] parameter(0)\n  b = f32[6] parameter(1)\n"
      "  c = f32[10] concatenate(a, b), dimensions={0}\n  ROOT s = f32[3] slice(c), slice={[5:8]}\n}\n");
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_fusion_t fi;
  assert_null(kiln_indexing_fusion_compute(ctx, m->entry, NULL, &fi));
  const kiln_indexing_fusion_group_t *ga = kiln_indexing_fusion_find(&fi.roots[0], "a");
  assert_non_null(ga);
  assert_int_equal(ga->num_maps, 0);
  assert_group(&fi.roots[0], "b", MAPS("(d0) -> (d0 + 1), domain: d0 in [0, 2]"));
  kiln_indexing_fusion_free(&fi);
  kiln_affine_ctx_destroy(ctx);
  kiln_hlo_module_destroy(m);
}

/* ---- brute force against the evaluator ---- */

typedef struct pairset {
  KILN_VEC(uint64_t) keys; /* sorted: output * in_count + input */
  uint64_t in_count;
} pairset_t;

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

static int64_t linear_of(const kiln_shape_t *s, const int64_t *idx) {
  int64_t lin = 0;
  for (int i = 0; i < s->rank; i++) {
    if (idx[i] < 0 || idx[i] >= s->dims[i]) return -1;
    lin = lin * s->dims[i] + idx[i];
  }
  return lin;
}

typedef struct collect_state {
  const kiln_shape_t *os, *is;
  pairset_t *set;
  bool out_of_bounds;
} collect_state_t;

static bool collect_point(void *user, const int64_t *dims, const int64_t *syms, const int64_t *rts,
                          const int64_t *results) {
  collect_state_t *st = user;
  int64_t o = linear_of(st->os, dims), p = linear_of(st->is, results);
  if (o < 0 || p < 0) {
    st->out_of_bounds = true;
    return false;
  }
  kiln_vec_push(&st->set->keys, (uint64_t)o * st->set->in_count + (uint64_t)p);
  return true;
}

static bool pairset_has(const pairset_t *s, uint64_t o, uint64_t p) {
  uint64_t k = o * s->in_count + p;
  return s->keys.len && bsearch(&k, s->keys.data, s->keys.len, sizeof k, cmp_u64) != NULL;
}

typedef KILN_VEC(kiln_literal_t *) lit_vec_t;

/* Leaves of a (nested) tuple literal in depth-first order: the roots' values. */
static void flatten(kiln_literal_t *l, lit_vec_t *out) {
  if (l->shape && kiln_shape_is_tuple(l->shape)) {
    for (int i = 0; i < l->num_tuple_elements; i++) flatten(l->tuple_elements[i], out);
    return;
  }
  kiln_vec_push(out, l);
}

typedef struct bf_stats {
  int64_t checked_pairs, changed, named_unchanged, params, skipped_unknown, skipped_large;
} bf_stats_t;

static const char *g_file = ""; /* the corpus file being checked, for messages */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng_next(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}

static void fill_random(kiln_literal_t *l) {
  kiln_elem_type_t t = l->shape->type;
  for (int64_t i = 0; i < l->num_elements; i++) {
    if (t == KILN_PRED) kiln_literal_set_s64(l, i, (int64_t)(rng_next() & 1));
    else if (kiln_elem_type_is_integral(t)) kiln_literal_set_s64(l, i, (int64_t)(rng_next() % 3));
    else kiln_literal_set_f64(l, i, 0.1 + 0.8 * (double)(rng_next() >> 11) / 9007199254740992.0);
  }
}

static void perturb(kiln_literal_t *l, int64_t i) {
  kiln_elem_type_t t = l->shape->type;
  if (t == KILN_PRED || kiln_elem_type_is_integral(t)) kiln_literal_set_s64(l, i, kiln_literal_get_s64(l, i) ^ 1);
  else kiln_literal_set_f64(l, i, kiln_literal_get_f64(l, i) + 0.0625);
}

static bool elem_equal(const kiln_literal_t *a, const kiln_literal_t *b, int64_t i) {
  size_t es = kiln_elem_type_storage_bytes(a->shape->type);
  return memcmp((const char *)a->data + (size_t)i * es, (const char *)b->data + (size_t)i * es, es) == 0;
}

static kiln_literal_t *eval_fusion(const kiln_hlo_computation_t *f, kiln_literal_t **args, kiln_arena_t *arena) {
  kiln_eval_options_t opts = {0};
  kiln_eval_ctx_t ec = {0};
  ec.opts = &opts;
  ec.arena = arena;
  kiln_literal_t *out = NULL;
  kiln_status s = kiln_eval_computation(&ec, f, f->num_parameters, args, &out);
  if (s) {
    fprintf(stderr, "eval %s: %s\n", f->name, kiln_status_message(s));
    kiln_status_free(s);
    fail();
  }
  return out;
}

/* The fusion computation of a bare emitter file: the callee of the entry's fusion, or the
 * entry itself. */
static const kiln_hlo_computation_t *fusion_of(const kiln_hlo_module_t *m) {
  for (size_t i = 0; i < m->entry->instructions.len; i++) {
    const kiln_hlo_instruction_t *x = m->entry->instructions.data[i];
    if (x->opcode == KILN_OP_FUSION) return kiln_hlo_instruction_called(x, "calls");
  }
  return m->entry;
}

static int64_t shape_elements(const kiln_shape_t *s) {
  if (!kiln_shape_is_tuple(s)) return kiln_shape_num_elements(s);
  int64_t n = 0;
  for (int i = 0; i < s->num_elements; i++) n += shape_elements(s->elements[i]);
  return n;
}

/* Brute-force check of one fusion; returns false when it was too large to check. */
static bool brute_force(const kiln_hlo_computation_t *f, bool exact, bf_stats_t *stats) {
  if (shape_elements(f->root->shape) > 1 << 18) return false;
  for (int k = 0; k < f->num_parameters; k++)
    if (!kiln_shape_is_array(f->parameters[k]->shape) || kiln_shape_num_elements(f->parameters[k]->shape) > 1 << 18)
      return false;
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **args = kiln_calloc((size_t)f->num_parameters + 1, sizeof *args);
  for (int k = 0; k < f->num_parameters; k++) {
    args[k] = kiln_literal_make(&arena, f->parameters[k]->shape);
    fill_random(args[k]);
  }
  lit_vec_t base = {0};
  flatten(eval_fusion(f, args, &arena), &base);
  kiln_affine_ctx_t *ctx = kiln_affine_ctx_create();
  kiln_indexing_fusion_t fi;
  kiln_status s = kiln_indexing_fusion_compute(ctx, f, NULL, &fi);
  if (s) {
    fprintf(stderr, "%s: %s\n", f->name, kiln_status_message(s));
    fail();
  }
  assert_int_equal((size_t)fi.num_roots, base.len);
  for (int k = 0; k < f->num_parameters; k++) {
    const kiln_hlo_instruction_t *param = f->parameters[k];
    int64_t pn = args[k]->num_elements;
    pairset_t *sets = kiln_calloc((size_t)fi.num_roots + 1, sizeof *sets);
    bool any_unknown = false, any_large = false;
    for (int r = 0; r < fi.num_roots; r++) {
      sets[r].in_count = (uint64_t)(pn > 0 ? pn : 1);
      const kiln_indexing_fusion_group_t *g = kiln_indexing_fusion_find(&fi.roots[r], param->name);
      if (!g) continue;
      if (g->unknown) any_unknown = true;
      for (int e = 0; e < g->num_maps; e++) {
        collect_state_t cs = {base.data[r]->shape, param->shape, &sets[r], false};
        kiln_status es = kiln_indexing_map_for_each_point(g->maps[e], 1u << 23, collect_point, &cs);
        if (es && kiln_status_code(es) == KILN_OUT_OF_RANGE) { /* too many points to list */
          kiln_status_free(es);
          any_large = true;
          continue;
        }
        if (es) {
          fprintf(stderr, "%s: %s\n", g_file, kiln_status_message(es));
          fail();
        }
        if (cs.out_of_bounds) {
          char *t = kiln_indexing_map_to_string(g->maps[e]);
          fprintf(stderr, "%s: map to %s names an element outside the shapes: %s\n", f->name, param->name, t);
          fail();
        }
      }
      if (sets[r].keys.len) qsort(sets[r].keys.data, sets[r].keys.len, sizeof(uint64_t), cmp_u64);
    }
    if (any_unknown || any_large) {
      stats->skipped_unknown += any_unknown;
      stats->skipped_large += any_large;
    } else {
      stats->params++;
      int samples = pn < 12 ? (int)pn : 12;
      for (int si = 0; si < samples; si++) {
        int64_t p = samples == pn ? si : (si == samples - 1 ? pn - 1 : (int64_t)(rng_next() % (uint64_t)pn));
        kiln_literal_t *saved = kiln_eval_literal_clone(&arena, args[k]);
        perturb(args[k], p);
        kiln_arena_t a2;
        kiln_arena_init(&a2);
        lit_vec_t now = {0};
        flatten(eval_fusion(f, args, &a2), &now);
        for (int r = 0; r < fi.num_roots; r++) {
          int64_t on = base.data[r]->num_elements;
          for (int64_t o = 0; o < on; o++) {
            bool changed = !elem_equal(base.data[r], now.data[r], o);
            bool named = pairset_has(&sets[r], (uint64_t)o, (uint64_t)p);
            stats->checked_pairs++;
            if (changed && !named) {
              fprintf(stderr, "%s: root %d element %lld changed when %s element %lld did, "
                              "but no map names it\n",
                      g_file, r, (long long)o, param->name, (long long)p);
              fail();
            }
            stats->changed += changed;
            if (named && !changed) {
              stats->named_unchanged++;
              if (exact) {
                fprintf(stderr, "%s: maps say root %d element %lld reads %s element %lld, "
                                "but it did not change\n",
                        g_file, r, (long long)o, param->name, (long long)p);
                fail();
              }
            }
          }
        }
        kiln_vec_free(&now);
        kiln_arena_destroy(&a2);
        memcpy(args[k]->data, saved->data, kiln_elem_type_storage_bytes(args[k]->shape->type) * (size_t)pn);
      }
    }
    for (int r = 0; r < fi.num_roots; r++) kiln_vec_free(&sets[r].keys);
    kiln_free(sets);
  }
  kiln_indexing_fusion_free(&fi);
  kiln_affine_ctx_destroy(ctx);
  kiln_vec_free(&base);
  kiln_free(args);
  kiln_arena_destroy(&arena);
  return true;
}

/* Fusions where a named element need not change the output, each for a reason; every other
 * checked fusion must be exact. */
static const char *const kNotExact[] = {
    "loop__tuple_heterogeneous.hlo", "loop__minimum_maximum.hlo", /* min/max pick one side */
    "loop__pred_mul.hlo", "loop__pred_not.hlo",                     /* pred and/or absorb */
    "loop__variadic_reduce.hlo", "loop__tuple_nested.hlo",          /* a variadic reducer's output
                                                                       may ignore an input */
    "dynamic_update_slice__", "loop__dus_s64.hlo", "loop__dynamic_update_slice.hlo",
    /* the operand's identity map is a may-read: the update overwrites part of it */
    "loop__dot_fp8.hlo",   /* the perturbation is below fp8 resolution */
    "loop__acosh_f",       /* NaN on inputs below 1, before and after */
    "__reduce_",           /* max/min/and reducers, float rounding of long sums */
    NULL};

static bool is_exact(const char *file) {
  for (int i = 0; kNotExact[i]; i++)
    if (strstr(file, kNotExact[i])) return false;
  return true;
}

static void test_corpus_fusions_match_the_evaluator(void **state) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/emitters", kiln_corpus_dir());
  DIR *d = opendir(dir);
  assert_non_null(d);
  KILN_VEC(char *) names = {0};
  struct dirent *e;
  while ((e = readdir(d))) {
    const char *n = e->d_name;
    if (!strstr(n, ".hlo")) continue;
    /* loop, transpose, concatenate, dynamic-update-slice and reduction emitter fusions */
    if (strstr(n, "__loop__") || strstr(n, "__transpose__") || strstr(n, "__concatenate__") ||
        strstr(n, "__dynamic_update_slice__") || strstr(n, "__reduce_"))
      kiln_vec_push(&names, strdup(n));
  }
  closedir(d);
  bf_stats_t stats = {0};
  int checked = 0, too_big = 0, exact_checked = 0;
  for (size_t i = 0; i < names.len; i++) {
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, names.data[i]);
    kiln_hlo_file_t *f = NULL;
    kiln_status s = kiln_hlo_file_load(path, &f);
    if (s) {
      fprintf(stderr, "%s: %s\n", names.data[i], kiln_status_message(s));
      fail();
    }
    bool exact = is_exact(names.data[i]);
    g_file = names.data[i];
    if (brute_force(fusion_of(f->modules[0]), exact, &stats)) {
      checked++;
      exact_checked += exact;
    } else {
      too_big++;
    }
    kiln_hlo_file_free(f);
    free(names.data[i]);
  }
  printf("brute-forced %d fusions (%d exact, %d too large), %lld parameters (skipped: %lld with "
         "unknown maps, %lld with too many map points): %lld (output, input) pairs, %lld changed, "
         "%lld named but unchanged\n",
         checked, exact_checked, too_big, (long long)stats.params, (long long)stats.skipped_unknown,
         (long long)stats.skipped_large,
         (long long)stats.checked_pairs, (long long)stats.changed, (long long)stats.named_unchanged);
  assert_true(checked >= 40);
  assert_true(exact_checked >= 30);
  assert_true(stats.changed > 1000);
  kiln_vec_free(&names);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chain_composes_transpose_and_broadcast),
      cmocka_unit_test(test_two_paths_to_one_parameter_give_two_maps),
      cmocka_unit_test(test_tuple_root_reduce_and_unknown_grouping),
      cmocka_unit_test(test_concatenate_of_slices_drops_paths_that_read_nothing),
      cmocka_unit_test(test_corpus_fusions_match_the_evaluator),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
