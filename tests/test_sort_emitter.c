/* Sort emitter: sort fusions (root sort on parameters, as the fusion wrapper builds them)
 * compiled for the host and run on seeded inputs match the reference evaluator bit for bit:
 * f32 / s32 / bf16, one and several operands, every sort dimension, sizes from 1 to 2^20
 * elements, rows that are and are not powers of two, stable sorts of inputs with many ties,
 * NaN / -0 / inf under a total-order comparator; every sort of the xla/ and real/ corpus
 * modules as such a fusion; PTX passes `ptxas -arch=sm_90` (skipped with the reason when
 * ptxas is missing); malformed and unsupported fusions give clear statuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/str.h"
#include "compiler/codegen/fusion_compiler.h"
#include "compiler/codegen/kir_pipeline.h"
#include "compiler/codegen/sort_emitter.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "compiler/passes/pipeline.h"
#include "tools/common/corpus.h"
#include "tools/common/hlo_file.h"

typedef enum fill_kind {
  FILL_DISTINCT = 0, /* operand 0: a shuffled 0..N-1 (no ties); others random */
  FILL_TIES,         /* small integers 0..7: many ties */
  FILL_SPECIAL,      /* floats: NaN (both signs), +-inf, +-0, +-1 and random values */
} fill_kind_t;

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void fill(kiln_literal_t *l, fill_kind_t kind, int operand, uint64_t seed) {
  kiln_elem_type_t t = l->shape->type;
  bool fl = kiln_elem_type_is_float(t);
  uint64_t st = seed * 7919u + (uint64_t)operand;
  int64_t n = l->num_elements;
  if (kind == FILL_DISTINCT && operand == 0) {
    /* Each run of the last dimension is a shuffled 0..w-1 (minus w/2): exact in any type
     * that holds w distinct integers (bf16: w <= 256). */
    int64_t w = l->shape->rank > 0 ? l->shape->dims[l->shape->rank - 1] : 1;
    int64_t *perm = malloc((size_t)(w > 0 ? w : 1) * sizeof(*perm));
    for (int64_t base = 0; w > 0 && base < n; base += w) {
      for (int64_t i = 0; i < w; i++) perm[i] = i;
      for (int64_t i = w - 1; i > 0; i--) {
        int64_t j = (int64_t)(splitmix(&st) % (uint64_t)(i + 1)), tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
      }
      for (int64_t i = 0; i < w; i++) {
        if (fl) kiln_literal_set_f64(l, base + i, (double)(perm[i] - w / 2));
        else kiln_literal_set_s64(l, base + i, perm[i] - w / 2);
      }
    }
    free(perm);
    return;
  }
  static const double specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0};
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = splitmix(&st);
    if (kind == FILL_TIES) {
      kiln_literal_set_s64(l, i, (int64_t)(r % 8));
      if (fl) kiln_literal_set_f64(l, i, (double)(r % 8) - 3.0);
    } else if (kind == FILL_SPECIAL && fl && (r & 3) == 0) {
      kiln_literal_set_f64(l, i, specials[(r >> 8) % 8]);
    } else if (fl) {
      kiln_literal_set_f64(l, i, -1.0 + 2.0 * (double)(r >> 11) / 9007199254740992.0);
    } else {
      kiln_literal_set_s64(l, i, (int64_t)(r % 2000001) - 1000000);
    }
  }
}

/* Depth-first array leaf `o` of literal `l`. */
static const kiln_literal_t *leaf(const kiln_literal_t *l, int o, int *seen) {
  if (!kiln_shape_is_tuple(l->shape)) return (*seen)++ == o ? l : NULL;
  for (int e = 0; e < l->num_tuple_elements; e++) {
    const kiln_literal_t *x = leaf(l->tuple_elements[e], o, seen);
    if (x) return x;
  }
  return NULL;
}

typedef struct run_result {
  int64_t elements, mismatches;
  char first[256];
  double run_ms;
  kiln_sort_launch_t launch;
} run_result_t;

/* Compiles computation `c` through kiln_fusion_kernel_emit (the dispatch the thunks use),
 * runs it on the host on inputs filled by `kind` and compares every output with the
 * evaluator bit for bit. */
static kiln_status run_sort(const kiln_hlo_computation_t *c, fill_kind_t kind, uint64_t seed,
                            kiln_host_jit_t *jit, kiln_host_pool_t *pool, run_result_t *res) {
  memset(res, 0, sizeof(*res));
  KILN_RETURN_IF_ERROR_PLAIN(kiln_sort_plan(c, &res->launch));
  kiln_fusion_kernel_t k;
  kiln_fusion_compile_options_t co = {0};
  static int counter;
  char kname[32];
  snprintf(kname, sizeof(kname), "sort_test%d", counter++);
  co.kernel_name = kname;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_fusion_kernel_emit(c, &co, &k));
  kiln_kir_host_kernel_t hk;
  kiln_status s = kiln_kir_compile_host(k.kir, jit, &hk);
  if (s) {
    kiln_fusion_kernel_free(&k);
    return s;
  }
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **params = kiln_calloc((size_t)c->num_parameters + 1, sizeof(*params));
  void **args = kiln_calloc((size_t)(k.num_inputs + k.num_outputs) + 1, sizeof(void *));
  for (int i = 0; i < c->num_parameters; i++) {
    params[i] = kiln_literal_make(&arena, c->parameters[i]->shape);
    fill(params[i], kind, i, seed);
  }
  static char empty[16];
  for (int i = 0; i < k.num_inputs; i++) {
    const kiln_hlo_instruction_t *in = k.inputs[i];
    void *d = in->opcode == KILN_OP_PARAMETER ? params[in->parameter_number]->data : in->literal->data;
    args[i] = d ? d : empty;
  }
  for (int o = 0; o < k.num_outputs; o++) {
    size_t bytes = (size_t)(kiln_shape_num_elements(k.outputs[o]) *
                            (int64_t)kiln_elem_type_storage_bytes(k.outputs[o]->type));
    args[k.num_inputs + o] = kiln_malloc(bytes + 16);
    memset(args[k.num_inputs + o], 0xA5, bytes + 16); /* outputs start as garbage */
  }
  double t0 = kiln_now_seconds();
  s = kiln_kir_host_kernel_run(&hk, pool, args);
  res->run_ms = (kiln_now_seconds() - t0) * 1e3;
  kiln_literal_t *want_all = NULL;
  if (!s) {
    kiln_eval_options_t eo = {0};
    kiln_eval_ctx_t ectx = {0};
    ectx.opts = &eo;
    ectx.arena = &arena;
    s = kiln_eval_computation(&ectx, c, c->num_parameters, params, &want_all);
  }
  for (int o = 0; o < k.num_outputs && !s; o++) {
    int seen = 0;
    const kiln_literal_t *want = leaf(want_all, o, &seen);
    if (!want || want->num_elements != kiln_shape_num_elements(k.outputs[o])) {
      s = KILN_ERR_INTERNAL("evaluator result does not match output %d", o);
      break;
    }
    size_t sb = kiln_elem_type_storage_bytes(want->shape->type);
    const char *got = args[k.num_inputs + o];
    for (int64_t i = 0; i < want->num_elements; i++) {
      res->elements++;
      if (memcmp((const char *)want->data + (size_t)i * sb, got + (size_t)i * sb, sb) == 0) continue;
      if (!res->mismatches++) {
        kiln_literal_t g = *want;
        g.data = (void *)got;
        snprintf(res->first, sizeof(res->first), "output %d element %lld: got %g, want %g", o, (long long)i,
                 kiln_literal_get_f64(&g, i), kiln_literal_get_f64(want, i));
      }
    }
  }
  for (int o = 0; o < k.num_outputs; o++) kiln_free(args[k.num_inputs + o]);
  kiln_free(args);
  kiln_free(params);
  kiln_arena_destroy(&arena);
  kiln_fusion_kernel_free(&k);
  return s;
}

typedef struct fixture {
  kiln_host_jit_t *jit;
  kiln_host_pool_t *pool;
} fixture_t;

static int setup(void **state) {
  fixture_t *f = calloc(1, sizeof(*f));
  if (kiln_host_jit_create(NULL, &f->jit)) return -1;
  if (kiln_host_pool_create(4, &f->pool)) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture_t *f = *state;
  kiln_host_pool_destroy(f->pool);
  kiln_host_jit_destroy(f->jit);
  free(f);
  return 0;
}

/* Parses `text`, runs its entry as a sort fusion and asserts an exact match. */
static void expect_match(fixture_t *f, const char *text, fill_kind_t kind, uint64_t seed) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (s) fail_msg("parse: %s\n%s", kiln_status_message(s), text);
  run_result_t r;
  s = run_sort(m->entry, kind, seed, f->jit, f->pool, &r);
  if (s) fail_msg("%s\n%s", kiln_status_message(s), text);
  if (r.mismatches)
    fail_msg("%lld/%lld mismatches, first: %s\n%s", (long long)r.mismatches, (long long)r.elements, r.first, text);
  assert_true(r.elements > 0 || strstr(text, "[0") || strstr(text, ",0]"));
  kiln_hlo_module_destroy(m);
}

/* A one-operand sort of `type[dims]` along `dim` with compare `dir` (and `cmp_type`). */
static void sort1(fixture_t *f, const char *type, const char *dims, int dim, const char *dir,
                  const char *cmp_type, bool stable, fill_kind_t kind, uint64_t seed) {
  char text[2048];
  snprintf(text, sizeof(text),
           "HloModule s\n\ncmp {\n  a = %s[] parameter(0)\n  b = %s[] parameter(1)\n"
           "  ROOT c = pred[] compare(a, b), direction=%s%s%s\n}\n\n"
           "ENTRY fused {\n  p0 = %s[%s] parameter(0)\n"
           "  ROOT s = %s[%s] sort(p0), dimensions={%d}%s, to_apply=cmp\n}\n",
           type, type, dir, cmp_type ? ", type=" : "", cmp_type ? cmp_type : "", type, dims, type, dims, dim,
           stable ? ", is_stable=true" : "");
  expect_match(f, text, kind, seed);
}

static void test_sort_rows_of_every_length_match_evaluator(void **state) {
  fixture_t *f = *state;
  static const char *const lens[] = {"1", "2", "3", "5", "31", "100", "128", "129", "257", "1000", "4097"};
  for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
    char dims[64];
    snprintf(dims, sizeof(dims), "3,%s", lens[i]);
    sort1(f, "f32", dims, 1, "LT", NULL, false, FILL_DISTINCT, i + 1);
    if (i % 3 == 2) sort1(f, "s32", dims, 1, "GT", NULL, false, FILL_DISTINCT, i + 100);
  }
  sort1(f, "f32", "7", 0, "LT", NULL, false, FILL_DISTINCT, 3);
  sort1(f, "f32", "1,1", 1, "LT", NULL, true, FILL_TIES, 3);
}

static void test_sort_along_every_dimension_of_rank3(void **state) {
  fixture_t *f = *state;
  for (int d = 0; d < 3; d++) {
    sort1(f, "f32", "6,7,9", d, "LT", NULL, false, FILL_DISTINCT, 10 + (uint64_t)d);
    sort1(f, "s32", "5,33,4", d, "GT", NULL, true, FILL_TIES, 20 + (uint64_t)d);
  }
  sort1(f, "f32", "2,3,4,5", 2, "LT", NULL, true, FILL_TIES, 31);
}

static void test_sort_stable_keeps_the_order_of_ties(void **state) {
  fixture_t *f = *state;
  static const char *const lens[] = {"2", "7", "64", "300", "1024", "3000"};
  for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
    char text[2048];
    snprintf(text, sizeof(text),
             "HloModule s\n\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
             "  c = s32[] parameter(2)\n  d = s32[] parameter(3)\n"
             "  ROOT lt = pred[] compare(a, b), direction=LT\n}\n\n"
             "ENTRY fused {\n  k = f32[4,%s] parameter(0)\n  v = s32[4,%s] parameter(1)\n"
             "  ROOT s = (f32[4,%s], s32[4,%s]) sort(k, v), dimensions={1}, is_stable=true, to_apply=cmp\n}\n",
             lens[i], lens[i], lens[i], lens[i]);
    expect_match(f, text, FILL_TIES, 40 + i);
  }
  /* bf16 full sort with ties (the corpus's sort_full shape, fewer rows). */
  sort1(f, "bf16", "16,4096", 1, "LT", NULL, true, FILL_TIES, 50);
  sort1(f, "bf16", "16,4096", 1, "GT", "TOTALORDER", true, FILL_SPECIAL, 51);
}

static void test_sort_nan_and_signed_zero_follow_the_total_order(void **state) {
  fixture_t *f = *state;
  sort1(f, "f32", "4,300", 1, "LT", "TOTALORDER", true, FILL_SPECIAL, 60);
  sort1(f, "f32", "4,300", 1, "GT", "TOTALORDER", false, FILL_SPECIAL, 61);
  sort1(f, "f64", "3,77", 0, "LT", "TOTALORDER", true, FILL_SPECIAL, 62);
  /* JAX's NaN-last comparator, written out. */
  const char *text =
      "HloModule s\n\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  an = pred[] compare(a, a), direction=NE\n  bn = pred[] compare(b, b), direction=NE\n"
      "  lt = pred[] compare(a, b), direction=LT\n  nb = pred[] not(bn)\n"
      "  first = pred[] and(an, nb)\n  na = pred[] not(an)\n  both = pred[] and(na, nb)\n"
      "  ordered = pred[] and(both, lt)\n  ROOT r = pred[] or(ordered, first)\n}\n\n"
      "ENTRY fused {\n  p0 = f32[5,200] parameter(0)\n"
      "  ROOT s = f32[5,200] sort(p0), dimensions={1}, is_stable=true, to_apply=cmp\n}\n";
  (void)text; /* NaN first under this comparator; bits of NaN payloads must move too */
  expect_match(f, text, FILL_SPECIAL, 63);
}

static void test_sort_several_operands_and_tuple_roots(void **state) {
  fixture_t *f = *state;
  /* Four f64 operands keyed by the first (the corpus's sorting.hlo shape, fewer rows). */
  const char *four =
      "HloModule s\n\ncmp {\n  a = f64[] parameter(0)\n  b = f64[] parameter(1)\n"
      "  c = f64[] parameter(2)\n  d = f64[] parameter(3)\n  e = f64[] parameter(4)\n"
      "  f = f64[] parameter(5)\n  g = f64[] parameter(6)\n  h = f64[] parameter(7)\n"
      "  ROOT lt = pred[] compare(a, b), direction=LT\n}\n\n"
      "ENTRY fused {\n  p0 = f64[2,2048] parameter(0)\n  p1 = f64[2,2048] parameter(1)\n"
      "  p2 = f64[2,2048] parameter(2)\n  p3 = f64[2,2048] parameter(3)\n"
      "  ROOT s = (f64[2,2048], f64[2,2048], f64[2,2048], f64[2,2048]) sort(p0, p1, p2, p3), "
      "dimensions={1}, to_apply=cmp\n}\n";
  expect_match(f, four, FILL_DISTINCT, 70);
  /* Keyed by the second operand, outputs swapped through get-tuple-elements. */
  const char *swapped =
      "HloModule s\n\ncmp {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n"
      "  c = f32[] parameter(2)\n  d = f32[] parameter(3)\n"
      "  ROOT gt = pred[] compare(c, d), direction=GT\n}\n\n"
      "ENTRY fused {\n  p0 = s32[9,50] parameter(0)\n  p1 = f32[9,50] parameter(1)\n"
      "  s = (s32[9,50], f32[9,50]) sort(p0, p1), dimensions={1}, is_stable=true, to_apply=cmp\n"
      "  g1 = f32[9,50] get-tuple-element(s), index=1\n  g0 = s32[9,50] get-tuple-element(s), index=0\n"
      "  ROOT t = (f32[9,50], s32[9,50]) tuple(g1, g0)\n}\n";
  expect_match(f, swapped, FILL_TIES, 71);
  /* A lexicographic comparator over both operands. */
  const char *lex =
      "HloModule s\n\ncmp {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n"
      "  c = s32[] parameter(2)\n  d = s32[] parameter(3)\n"
      "  lt = pred[] compare(a, b), direction=LT\n  eq = pred[] compare(a, b), direction=EQ\n"
      "  lt2 = pred[] compare(c, d), direction=LT\n  both = pred[] and(eq, lt2)\n"
      "  ROOT r = pred[] or(lt, both)\n}\n\n"
      "ENTRY fused {\n  p0 = s32[700] parameter(0)\n  p1 = s32[700] parameter(1)\n"
      "  ROOT s = (s32[700], s32[700]) sort(p0, p1), dimensions={0}, to_apply=cmp\n}\n";
  expect_match(f, lex, FILL_TIES, 72);
}

static void test_sort_large_inputs_match_evaluator(void **state) {
  fixture_t *f = *state;
  /* 2^20 elements over 64 rows, one long row (16 pairs per thread per step in one block),
   * and the longest stable row that fits the shared positions. */
  sort1(f, "f32", "64,16384", 1, "LT", NULL, false, FILL_DISTINCT, 80);
  sort1(f, "s32", "20000", 0, "LT", NULL, false, FILL_DISTINCT, 81);
  sort1(f, "bf16", "8,12288", 1, "LT", NULL, true, FILL_TIES, 82);
}

static void test_sort_stable_long_rows_rank_each_element(void **state) {
  fixture_t *f = *state;
  /* Rows past the shared positions' capacity: topk's (values, indices) form with ties. */
  const char *text =
      "HloModule s\n\ncmp {\n  a = bf16[] parameter(0)\n  b = bf16[] parameter(1)\n"
      "  c = s32[] parameter(2)\n  d = s32[] parameter(3)\n"
      "  ROOT gt = pred[] compare(a, b), direction=GT, type=TOTALORDER\n}\n\n"
      "ENTRY fused {\n  k = bf16[2,13000] parameter(0)\n  v = s32[2,13000] parameter(1)\n"
      "  ROOT s = (bf16[2,13000], s32[2,13000]) sort(k, v), dimensions={1}, is_stable=true, to_apply=cmp\n}\n";
  expect_match(f, text, FILL_TIES, 85);
  sort1(f, "f32", "20000,1", 0, "LT", "TOTALORDER", true, FILL_SPECIAL, 86);
}

static void test_sort_empty_and_scalar_sorts(void **state) {
  fixture_t *f = *state;
  sort1(f, "f32", "0", 0, "LT", NULL, false, FILL_DISTINCT, 90);
  sort1(f, "f32", "3,0", 1, "LT", NULL, true, FILL_DISTINCT, 91);
  sort1(f, "f32", "0,5", 1, "LT", NULL, true, FILL_DISTINCT, 92);
}

static void test_sort_launch_plan(void **state) {
  (void)state;
  const char *text =
      "HloModule s\n\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT c = pred[] compare(a, b), direction=LT\n}\n\n"
      "ENTRY fused {\n  p0 = f32[10,3000] parameter(0)\n"
      "  ROOT s = f32[10,3000] sort(p0), dimensions={1}, is_stable=true, to_apply=cmp\n}\n";
  kiln_hlo_module_t *m = NULL;
  assert_null(kiln_hlo_parse_module(text, strlen(text), NULL, &m));
  kiln_sort_launch_t l;
  assert_null(kiln_sort_plan(m->entry, &l));
  assert_int_equal(l.row_length, 3000);
  assert_int_equal(l.rows, 10);
  assert_int_equal(l.padded, 4096);
  assert_int_equal(l.rows_per_block, 1);
  assert_int_equal(l.threads, 1024);
  assert_int_equal(l.blocks, 10);
  assert_int_equal(l.steps, 78);
  assert_int_equal(l.shared_bytes, 3000 * 4 + 3000 * 4); /* positions and the f32 row */
  assert_true(l.in_shared);
  assert_true(l.stable);
  kiln_hlo_module_destroy(m);
  /* Short rows share a block: 128 / (8 / 2) = 32 rows of 5. */
  const char *small =
      "HloModule s\n\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT c = pred[] compare(a, b), direction=LT\n}\n\n"
      "ENTRY fused {\n  p0 = f32[100,5] parameter(0)\n"
      "  ROOT s = f32[100,5] sort(p0), dimensions={1}, to_apply=cmp\n}\n";
  assert_null(kiln_hlo_parse_module(small, strlen(small), NULL, &m));
  assert_null(kiln_sort_plan(m->entry, &l));
  assert_int_equal(l.rows_per_block, 32);
  assert_int_equal(l.threads, 128);
  assert_int_equal(l.blocks, 4);
  assert_int_equal(l.shared_bytes, 32 * 5 * 4);
  assert_true(l.in_shared);
  assert_false(l.by_rank);
  kiln_hlo_module_destroy(m);
  /* Stable rows past 12288 elements rank instead of keeping positions in shared memory. */
  const char *rank =
      "HloModule s\n\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT c = pred[] compare(a, b), direction=LT\n}\n\n"
      "ENTRY fused {\n  p0 = f32[3,100000] parameter(0)\n"
      "  ROOT s = f32[3,100000] sort(p0), dimensions={1}, is_stable=true, to_apply=cmp\n}\n";
  assert_null(kiln_hlo_parse_module(rank, strlen(rank), NULL, &m));
  assert_null(kiln_sort_plan(m->entry, &l));
  assert_true(l.by_rank);
  assert_int_equal(l.threads, 256);
  assert_int_equal(l.blocks, 3 * 391);
  assert_int_equal(l.shared_bytes, 0);
  assert_int_equal(l.steps, 0);
  kiln_hlo_module_destroy(m);
  /* Rows past 48 KiB are sorted in the output buffers. */
  const char *big =
      "HloModule s\n\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT c = pred[] compare(a, b), direction=LT\n}\n\n"
      "ENTRY fused {\n  p0 = f32[2,16384] parameter(0)\n"
      "  ROOT s = f32[2,16384] sort(p0), dimensions={1}, to_apply=cmp\n}\n";
  assert_null(kiln_hlo_parse_module(big, strlen(big), NULL, &m));
  assert_null(kiln_sort_plan(m->entry, &l));
  assert_false(l.in_shared);
  assert_int_equal(l.shared_bytes, 0);
  kiln_hlo_module_destroy(m);
}

static void expect_status(const char *text, kiln_status_code_t code, const char *needle) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (s) fail_msg("parse: %s", kiln_status_message(s));
  kiln_fusion_kernel_t k;
  s = kiln_sort_kernel_emit(m->entry, NULL, &k);
  assert_non_null(s);
  if (kiln_status_code(s) != code || !strstr(kiln_status_message(s), needle))
    fail_msg("unexpected status: %s", kiln_status_message(s));
  assert_null(k.kir);
  kiln_status_free(s);
  kiln_hlo_module_destroy(m);
}

static void test_sort_rejects_unsupported_fusions_with_a_reason(void **state) {
  (void)state;
  expect_status("HloModule s\n\nENTRY fused {\n  p0 = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p0)\n}\n",
                KILN_INVALID_ARGUMENT, "not a sort");
  expect_status("HloModule s\n\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                "  ROOT c = pred[] compare(a, b), direction=LT\n}\n\n"
                "ENTRY fused {\n  p0 = f32[4] parameter(0)\n  n = f32[4] negate(p0)\n"
                "  ROOT s = f32[4] sort(n), dimensions={0}, to_apply=cmp\n}\n",
                KILN_UNIMPLEMENTED, "not a fusion parameter");
  expect_status("HloModule s\n\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                "  c = s32[] parameter(2)\n  d = s32[] parameter(3)\n"
                "  ROOT lt = pred[] compare(a, b), direction=LT\n}\n\n"
                "ENTRY fused {\n  k = f32[8] parameter(0)\n  v = s32[8] parameter(1)\n"
                "  s = (f32[8], s32[8]) sort(k, v), dimensions={0}, to_apply=cmp\n"
                "  ROOT g = s32[8] get-tuple-element(s), index=1\n}\n",
                KILN_UNIMPLEMENTED, "not a fusion output");
}

/* The kernel's PTX after `ptxas -arch=sm_90` accepted it (kiln_free), or NULL when ptxas
 * is missing (printed as skipped); fails the test when ptxas rejects it. */
static char *ptx_checked_by_ptxas(const kiln_fusion_kernel_t *k) {
  char *ptx = NULL;
  kiln_status s = kiln_fusion_kernel_ptxas_check(k, &ptx);
  if (s && kiln_status_code(s) == KILN_UNAVAILABLE) {
    printf("SKIPPED ptxas: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    kiln_free(ptx);
    return NULL;
  }
  if (s) fail_msg("ptxas: %.2000s", kiln_status_message(s));
  return ptx;
}

static void test_sort_ptx_passes_ptxas(void **state) {
  (void)state;
  const char *text =
      "HloModule s\n\ncmp {\n  a = bf16[] parameter(0)\n  b = bf16[] parameter(1)\n"
      "  c = s32[] parameter(2)\n  d = s32[] parameter(3)\n"
      "  ROOT gt = pred[] compare(a, b), direction=GT, type=TOTALORDER\n}\n\n"
      "ENTRY fused {\n  k = bf16[16,1000] parameter(0)\n  v = s32[16,1000] parameter(1)\n"
      "  ROOT s = (bf16[16,1000], s32[16,1000]) sort(k, v), dimensions={1}, is_stable=true, to_apply=cmp\n}\n";
  kiln_hlo_module_t *m = NULL;
  assert_null(kiln_hlo_parse_module(text, strlen(text), NULL, &m));
  kiln_fusion_kernel_t k;
  kiln_status s = kiln_fusion_kernel_emit(m->entry, NULL, &k);
  if (s) fail_msg("%s", kiln_status_message(s));
  char *ptx = ptx_checked_by_ptxas(&k);
  if (ptx) {
    assert_non_null(strstr(ptx, "bar.sync"));
    assert_non_null(strstr(ptx, ".shared"));
  }
  kiln_free(ptx);
  kiln_fusion_kernel_free(&k);
  kiln_hlo_module_destroy(m);
}

/* Lowers `k` for NVPTX and checks which parameters are noalias (bit i: parameter i). */
static void expect_noalias_params(const kiln_fusion_kernel_t *k, unsigned num_params, unsigned mask) {
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = NULL;
  kiln_status s = kiln_kir_lower_nvptx(k->kir, ctx, NULL, &mod);
  if (s) fail_msg("%s", kiln_status_message(s));
  LLVMValueRef fn = LLVMGetNamedFunction(mod, kiln_kir_module_kernel(k->kir)->name);
  assert_non_null(fn);
  assert_int_equal(LLVMCountParams(fn), num_params);
  unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
  for (unsigned i = 0; i < num_params; i++) {
    bool has = LLVMGetEnumAttributeAtIndex(fn, i + 1, noalias) != NULL;
    if (has != ((mask >> i) & 1)) fail_msg("parameter %u: noalias %d", i, has);
  }
  LLVMDisposeModule(mod);
  LLVMContextDispose(ctx);
}

static const char *sort_kv_text(const char *dims) {
  static char text[1024];
  snprintf(text, sizeof text,
           "HloModule s\n\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
           "  c = s32[] parameter(2)\n  d = s32[] parameter(3)\n"
           "  ROOT lt = pred[] compare(a, b), direction=LT\n}\n\n"
           "ENTRY fused {\n  k = f32[%s] parameter(0)\n  v = s32[%s] parameter(1)\n"
           "  ROOT s = (f32[%s], s32[%s]) sort(k, v), dimensions={1}, to_apply=cmp\n}\n",
           dims, dims, dims, dims);
  return text;
}

/* Rows past 48 KiB are sorted in the output buffers: threads exchange elements through
 * global memory across bar.sync. Those buffers must not be `noalias` in the NVPTX lowering
 * (the barrier intrinsic does not take the pointer, so under noalias LLVM may keep, drop or
 * move another thread's element across it); the inputs, only read, keep it, and so do the
 * outputs of a sort in shared memory (only written). In the PTX every compare-exchange
 * step, after its barrier, loads and stores its elements in global memory. */
static void test_sort_rows_in_global_memory_reload_after_each_barrier(void **state) {
  (void)state;
  kiln_hlo_module_t *m = NULL;
  const char *text = sort_kv_text("2,1000");
  assert_null(kiln_hlo_parse_module(text, strlen(text), NULL, &m));
  kiln_sort_launch_t l;
  assert_null(kiln_sort_plan(m->entry, &l));
  assert_true(l.in_shared);
  kiln_fusion_kernel_t k;
  kiln_status s = kiln_sort_kernel_emit(m->entry, NULL, &k);
  if (s) fail_msg("%s", kiln_status_message(s));
  expect_noalias_params(&k, 4, 0xf);
  kiln_fusion_kernel_free(&k);
  kiln_hlo_module_destroy(m);

  text = sort_kv_text("2,16384");
  assert_null(kiln_hlo_parse_module(text, strlen(text), NULL, &m));
  assert_null(kiln_sort_plan(m->entry, &l));
  assert_false(l.in_shared);
  assert_false(l.by_rank);
  s = kiln_sort_kernel_emit(m->entry, NULL, &k);
  if (s) fail_msg("%s", kiln_status_message(s));
  expect_noalias_params(&k, 4, 0x3); /* k, v; not output0, output1 */
  char *ptx = ptx_checked_by_ptxas(&k);
  if (ptx) {
    int barriers = 0, bare_steps = 0;
    for (const char *b = strstr(ptx, "bar.sync"); b; b = strstr(b + 1, "bar.sync")) {
      barriers++;
      const char *next = strstr(b + 1, "bar.sync");
      const char *ld = strstr(b, "ld.global"), *st = strstr(b, "st.global");
      if (!ld || !st || (next && (ld > next || st > next))) bare_steps++;
    }
    printf("global rows: %d barriers, %d steps without global loads and stores\n", barriers, bare_steps);
    assert_int_equal(barriers, (int)l.steps);
    assert_int_equal(bare_steps, 0);
  }
  kiln_free(ptx);
  kiln_fusion_kernel_free(&k);
  kiln_hlo_module_destroy(m);
}

/* ---- corpus: every sort of the whole modules, as the fusion the wrapper would build ---- */

static void print_called(kiln_strbuf_t *b, const kiln_hlo_computation_t *c, const kiln_hlo_computation_t **done,
                         int *nd) {
  for (int i = 0; i < *nd; i++)
    if (done[i] == c) return;
  if (*nd >= 32) return;
  done[(*nd)++] = c;
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    for (int g = 0; g < in->num_called_groups; g++)
      for (int k = 0; k < in->called_groups[g].n; k++) print_called(b, in->called_groups[g].comps[k], done, nd);
  }
  kiln_hlo_computation_print(b, c);
  kiln_strbuf_append(b, "\n\n");
}

/* Module text: the sort's comparator (and what it calls), then `ENTRY fused` with one
 * parameter per operand and the sort at the root. */
static char *sort_fusion_text(const kiln_hlo_instruction_t *s) {
  kiln_strbuf_t b = {0};
  kiln_strbuf_append(&b, "HloModule sort_fusion\n\n");
  const kiln_hlo_computation_t *done[32];
  int nd = 0;
  const kiln_hlo_computation_t *cmp = kiln_hlo_instruction_called(s, "to_apply");
  if (cmp) print_called(&b, cmp, done, &nd);
  kiln_strbuf_append(&b, "ENTRY fused {\n");
  for (int i = 0; i < s->num_operands; i++) {
    char *sh = kiln_shape_to_string(s->operands[i]->shape, false);
    kiln_strbuf_printf(&b, "  p%d = %s parameter(%d)\n", i, sh, i);
    kiln_free(sh);
  }
  char *sh = kiln_shape_to_string(s->shape, false);
  kiln_strbuf_printf(&b, "  ROOT s = %s sort(", sh);
  kiln_free(sh);
  for (int i = 0; i < s->num_operands; i++) kiln_strbuf_printf(&b, "%sp%d", i ? ", " : "", i);
  kiln_strbuf_printf(&b, "), dimensions={%lld}%s, to_apply=%s\n}\n",
                     (long long)(s->dimensions.n ? s->dimensions.v[0] : 0), s->is_stable ? ", is_stable=true" : "",
                     cmp ? cmp->name : "none");
  return kiln_strbuf_take(&b);
}

static void test_corpus_sorts_match_evaluator(void **state) {
  fixture_t *f = *state;
  static const char *const dirs[] = {"xla", "real"};
  int total = 0, passed = 0, unsupported = 0;
  for (int di = 0; di < 2; di++) {
    char dpath[2048];
    snprintf(dpath, sizeof(dpath), "%s/%s", kiln_corpus_dir(), dirs[di]);
    DIR *d = opendir(dpath);
    if (!d) {
      printf("SKIPPED: no corpus at %s\n", dpath);
      continue;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
      if (de->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof(path), "%s/%s", dpath, de->d_name);
      char *text = NULL;
      size_t len = 0;
      kiln_status s = kiln_read_file(path, &text, &len);
      if (s) {
        kiln_status_free(s);
        continue;
      }
      bool has = strstr(text, " sort(") != NULL;
      kiln_free(text);
      if (!has || !kiln_corpus_sampled(de->d_name)) continue;
      kiln_hlo_file_t *hf = NULL;
      s = kiln_hlo_file_load(path, &hf);
      if (s) {
        kiln_status_free(s);
        continue;
      }
      for (int mi = 0; mi < hf->num_modules; mi++) {
        const kiln_hlo_module_t *m = hf->modules[mi];
        for (size_t ci = 0; ci < m->computations.len; ci++) {
          const kiln_hlo_computation_t *c = m->computations.data[ci];
          for (size_t ii = 0; ii < c->instructions.len; ii++) {
            const kiln_hlo_instruction_t *in = c->instructions.data[ii];
            if (in->opcode != KILN_OP_SORT) continue;
            char *ft = sort_fusion_text(in);
            kiln_hlo_module_t *fm = NULL;
            s = kiln_hlo_parse_module(ft, strlen(ft), NULL, &fm);
            total++;
            run_result_t r;
            if (!s) s = run_sort(fm->entry, in->is_stable ? FILL_TIES : FILL_DISTINCT, 5, f->jit, f->pool, &r);
            if (s && kiln_status_code(s) == KILN_UNIMPLEMENTED) {
              printf("unsupported %s %s: %s\n", de->d_name, in->name, kiln_status_message(s));
              unsupported++;
              total--;
            } else if (s) {
              printf("FAIL %s %s: %s\n", de->d_name, in->name, kiln_status_message(s));
            } else if (r.mismatches) {
              printf("FAIL %s %s: %lld/%lld mismatches, first: %s\n", de->d_name, in->name,
                     (long long)r.mismatches, (long long)r.elements, r.first);
            } else {
              printf("ok %s %s: %lld elements, %lld rows x %lld, %lld threads x %lld blocks, %.1f ms\n",
                     de->d_name, in->name, (long long)r.elements, (long long)r.launch.rows,
                     (long long)r.launch.row_length, (long long)r.launch.threads, (long long)r.launch.blocks,
                     r.run_ms);
              passed++;
            }
            kiln_status_free(s);
            if (fm) kiln_hlo_module_destroy(fm);
            kiln_free(ft);
          }
        }
      }
      kiln_hlo_file_free(hf);
    }
    closedir(d);
  }
  printf("corpus sorts: %d/%d match the evaluator (%d unsupported)\n", passed, total, unsupported);
  assert_int_equal(passed, total);
}

/* Whole corpus modules through the pass pipeline (topk decomposed into a sort, the sort
 * wrapped into a fusion): every sort fusion compiles, matches the evaluator on the fusion
 * runner's inputs and passes ptxas when it is there. */
static void test_pipelined_topk_and_argsort_modules_compile_their_sort_fusions(void **state) {
  (void)state;
  static const char *const files[] = {
      "xla/xla__backends__cpu__benchmarks__hlo__topk_logits_k10_1x50000_bf16.hlo",
      "xla/xla__hlo__translate__hlo_to_mhlo__tests__import.hlo",
      "xla/xla__backends__cpu__benchmarks__hlo__argsort_axis_1024x512_bf16.hlo",
  };
  int sorts = 0;
  for (size_t fi = 0; fi < sizeof(files) / sizeof(files[0]); fi++) {
    char path[2048];
    snprintf(path, sizeof(path), "%s/%s", kiln_corpus_dir(), files[fi]);
    kiln_hlo_file_t *hf = NULL;
    kiln_status s = kiln_hlo_file_load(path, &hf);
    if (s) {
      printf("SKIPPED %s: %s\n", files[fi], kiln_status_message(s));
      kiln_status_free(s);
      continue;
    }
    for (int mi = 0; mi < hf->num_modules; mi++) {
      kiln_hlo_module_t *m = hf->modules[mi];
      bool has = false;
      for (size_t ci = 0; ci < m->computations.len && !has; ci++)
        for (size_t ii = 0; ii < m->computations.data[ci]->instructions.len && !has; ii++) {
          kiln_hlo_opcode_t op = m->computations.data[ci]->instructions.data[ii]->opcode;
          has = op == KILN_OP_SORT || op == KILN_OP_TOPK;
        }
      if (!has) continue;
      kiln_pipeline_lift_parse_limit(m);
      kiln_pass_options_t po = {.verify = -1};
      s = kiln_pipeline_run(m, &po);
      if (s) fail_msg("%s module %d: pipeline: %s", files[fi], mi, kiln_status_message(s));
      const kiln_hlo_computation_t **cs = NULL;
      int n = 0;
      kiln_fusion_collect(m, &cs, &n);
      for (int i = 0; i < n; i++) {
        if (kiln_fusion_classify(cs[i], NULL) != KILN_FUSION_EMITTER_SORT) continue;
        kiln_fusion_run_options_t o;
        kiln_fusion_run_options_init(&o);
        o.check_ptx = true;
        kiln_fusion_run_report_t r;
        s = kiln_fusion_run_check(cs[i], &o, &r);
        if (s) fail_msg("%s %s: %s", files[fi], cs[i]->name, kiln_status_message(s));
        if (r.mismatches) fail_msg("%s %s: %lld mismatches: %s", files[fi], cs[i]->name, (long long)r.mismatches,
                                   r.first_mismatch);
        if (r.ptx_checked && !r.ptx_ok) fail_msg("%s %s: ptxas: %s", files[fi], cs[i]->name, r.ptx_note);
        printf("%s %s: sort emitter, %lld elements match, ptxas %s\n", files[fi], cs[i]->name,
               (long long)r.elements, r.ptx_checked ? "ok" : r.ptx_note);
        sorts++;
      }
      kiln_free(cs);
    }
    kiln_hlo_file_free(hf);
  }
  if (sorts == 0) printf("SKIPPED: no corpus\n");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sort_launch_plan),
      cmocka_unit_test(test_sort_rejects_unsupported_fusions_with_a_reason),
      cmocka_unit_test_setup_teardown(test_sort_rows_of_every_length_match_evaluator, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sort_along_every_dimension_of_rank3, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sort_stable_keeps_the_order_of_ties, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sort_nan_and_signed_zero_follow_the_total_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sort_several_operands_and_tuple_roots, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sort_large_inputs_match_evaluator, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sort_stable_long_rows_rank_each_element, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sort_empty_and_scalar_sorts, setup, teardown),
      cmocka_unit_test(test_sort_ptx_passes_ptxas),
      cmocka_unit_test(test_sort_rows_in_global_memory_reload_after_each_barrier),
      cmocka_unit_test_setup_teardown(test_corpus_sorts_match_evaluator, setup, teardown),
      cmocka_unit_test(test_pipelined_topk_and_argsort_modules_compile_their_sort_fusions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
