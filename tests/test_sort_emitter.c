/* Sort emitter: sort fusions (root sort on parameters, as the fusion wrapper builds them)
 * compiled for the host and run on seeded inputs match the reference evaluator bit for bit:
 * f32 / s32 / bf16 / f64, one and several operands, every sort dimension, rows of 1 to 4097
 * elements that are and are not powers of two, stable sorts of inputs with many ties,
 * NaN / -0 / inf under a total-order comparator, empty sorts; the launch plan; PTX passes
 * `ptxas -arch=sm_90` (skipped with the reason when ptxas is missing), and rows sorted in
 * global memory are reloaded after every barrier; malformed and unsupported fusions give
 * clear statuses. Long rows and 2^20-element inputs are in test_sort_emitter_large.c, the
 * corpus's sorts in test_sort_emitter_corpus.c (split so that each stays well under a
 * minute: the time goes to compiling the long sorting networks). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "compiler/codegen/sort_emitter.h"
#include "sort_test_util.h"

static void test_sort_rows_of_every_length_match_evaluator(void **state) {
  sort_fixture_t *f = *state;
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
  sort_fixture_t *f = *state;
  for (int d = 0; d < 3; d++) {
    sort1(f, "f32", "6,7,9", d, "LT", NULL, false, FILL_DISTINCT, 10 + (uint64_t)d);
    sort1(f, "s32", "5,33,4", d, "GT", NULL, true, FILL_TIES, 20 + (uint64_t)d);
  }
  sort1(f, "f32", "2,3,4,5", 2, "LT", NULL, true, FILL_TIES, 31);
}

static void test_sort_stable_keeps_the_order_of_ties(void **state) {
  sort_fixture_t *f = *state;
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
    sort_expect_match(f, text, FILL_TIES, 40 + i);
  }
  /* bf16 full sort with ties (the corpus's sort_full shape, fewer rows). */
  sort1(f, "bf16", "16,4096", 1, "LT", NULL, true, FILL_TIES, 50);
  sort1(f, "bf16", "16,4096", 1, "GT", "TOTALORDER", true, FILL_SPECIAL, 51);
}

static void test_sort_nan_and_signed_zero_follow_the_total_order(void **state) {
  sort_fixture_t *f = *state;
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
  sort_expect_match(f, text, FILL_SPECIAL, 63);
}

static void test_sort_several_operands_and_tuple_roots(void **state) {
  sort_fixture_t *f = *state;
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
  sort_expect_match(f, four, FILL_DISTINCT, 70);
  /* Keyed by the second operand, outputs swapped through get-tuple-elements. */
  const char *swapped =
      "HloModule s\n\ncmp {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n"
      "  c = f32[] parameter(2)\n  d = f32[] parameter(3)\n"
      "  ROOT gt = pred[] compare(c, d), direction=GT\n}\n\n"
      "ENTRY fused {\n  p0 = s32[9,50] parameter(0)\n  p1 = f32[9,50] parameter(1)\n"
      "  s = (s32[9,50], f32[9,50]) sort(p0, p1), dimensions={1}, is_stable=true, to_apply=cmp\n"
      "  g1 = f32[9,50] get-tuple-element(s), index=1\n  g0 = s32[9,50] get-tuple-element(s), index=0\n"
      "  ROOT t = (f32[9,50], s32[9,50]) tuple(g1, g0)\n}\n";
  sort_expect_match(f, swapped, FILL_TIES, 71);
  /* A lexicographic comparator over both operands. */
  const char *lex =
      "HloModule s\n\ncmp {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n"
      "  c = s32[] parameter(2)\n  d = s32[] parameter(3)\n"
      "  lt = pred[] compare(a, b), direction=LT\n  eq = pred[] compare(a, b), direction=EQ\n"
      "  lt2 = pred[] compare(c, d), direction=LT\n  both = pred[] and(eq, lt2)\n"
      "  ROOT r = pred[] or(lt, both)\n}\n\n"
      "ENTRY fused {\n  p0 = s32[700] parameter(0)\n  p1 = s32[700] parameter(1)\n"
      "  ROOT s = (s32[700], s32[700]) sort(p0, p1), dimensions={0}, to_apply=cmp\n}\n";
  sort_expect_match(f, lex, FILL_TIES, 72);
}

static void test_sort_empty_and_scalar_sorts(void **state) {
  sort_fixture_t *f = *state;
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
  assert_null(kiln_sort_plan(m->entry, false, &l));
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
  assert_null(kiln_sort_plan(m->entry, false, &l));
  assert_int_equal(l.rows_per_block, 32);
  assert_int_equal(l.threads, 128);
  assert_int_equal(l.blocks, 4);
  assert_int_equal(l.shared_bytes, 32 * 5 * 4);
  assert_true(l.in_shared);
  assert_false(l.merge);
  kiln_hlo_module_destroy(m);
  /* Stable rows past 12288 elements merge sorted runs (one block per row, one pass per
   * power of two) instead of keeping positions in shared memory. */
  const char *rank =
      "HloModule s\n\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT c = pred[] compare(a, b), direction=LT\n}\n\n"
      "ENTRY fused {\n  p0 = f32[3,100000] parameter(0)\n"
      "  ROOT s = f32[3,100000] sort(p0), dimensions={1}, is_stable=true, to_apply=cmp\n}\n";
  assert_null(kiln_hlo_parse_module(rank, strlen(rank), NULL, &m));
  assert_null(kiln_sort_plan(m->entry, false, &l));
  assert_true(l.merge);
  assert_int_equal(l.threads, 1024);
  assert_int_equal(l.blocks, 3);
  assert_int_equal(l.shared_bytes, 0);
  assert_int_equal(l.steps, 17);
  kiln_hlo_module_destroy(m);
  /* Rows past 48 KiB are sorted in the output buffers. */
  const char *big =
      "HloModule s\n\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT c = pred[] compare(a, b), direction=LT\n}\n\n"
      "ENTRY fused {\n  p0 = f32[2,16384] parameter(0)\n"
      "  ROOT s = f32[2,16384] sort(p0), dimensions={1}, to_apply=cmp\n}\n";
  assert_null(kiln_hlo_parse_module(big, strlen(big), NULL, &m));
  assert_null(kiln_sort_plan(m->entry, false, &l));
  assert_false(l.in_shared);
  assert_int_equal(l.shared_bytes, 0);
  kiln_hlo_module_destroy(m);
}

static void expect_status(const char *text, kiln_status_code_t code, const char *needle) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (s) fail_msg("parse: %s", kiln_status_message(s));
  kiln_codegen_kernel_t k;
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
static char *ptx_checked_by_ptxas(const kiln_codegen_kernel_t *k) {
  char *ptx = NULL;
  kiln_status s = kiln_codegen_kernel_ptxas_check(k, &ptx);
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
  kiln_codegen_kernel_t k;
  kiln_status s = kiln_codegen_kernel_emit(m->entry, NULL, &k);
  if (s) fail_msg("%s", kiln_status_message(s));
  char *ptx = ptx_checked_by_ptxas(&k);
  if (ptx) {
    assert_non_null(strstr(ptx, "bar.sync"));
    assert_non_null(strstr(ptx, ".shared"));
  }
  kiln_free(ptx);
  kiln_codegen_kernel_free(&k);
  kiln_hlo_module_destroy(m);
}

/* Lowers `k` for NVPTX and checks which parameters are noalias (bit i: parameter i). */
static void expect_noalias_params(const kiln_codegen_kernel_t *k, unsigned num_params,
                                  unsigned mask) {
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

static const char *sort_kv_text(const char *dims, bool stable) {
  static char text[1024];
  snprintf(text, sizeof text,
           "HloModule s\n\ncmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
           "  c = s32[] parameter(2)\n  d = s32[] parameter(3)\n"
           "  ROOT lt = pred[] compare(a, b), direction=LT\n}\n\n"
           "ENTRY fused {\n  k = f32[%s] parameter(0)\n  v = s32[%s] parameter(1)\n"
           "  ROOT s = (f32[%s], s32[%s]) sort(k, v), dimensions={1}%s, to_apply=cmp\n}\n",
           dims, dims, dims, dims, stable ? ", is_stable=true" : "");
  return text;
}

/* Parses sort_kv_text(dims, stable) into *m, plans it into *l and emits its kernel into *k. */
static void emit_kv(const char *dims, bool stable, kiln_hlo_module_t **m, kiln_sort_launch_t *l,
                    kiln_codegen_kernel_t *k) {
  const char *text = sort_kv_text(dims, stable);
  assert_null(kiln_hlo_parse_module(text, strlen(text), NULL, m));
  assert_null(kiln_sort_plan((*m)->entry, false, l));
  kiln_status s = kiln_sort_kernel_emit((*m)->entry, NULL, k);
  if (s) fail_msg("%s", kiln_status_message(s));
}

/* Rows past 48 KiB are sorted in the output buffers (and merged through scratch tensors when
 * stable and past 12,288): threads exchange elements through
 * global memory across bar.sync. Those buffers must not be `noalias` in the NVPTX lowering
 * (the barrier intrinsic does not take the pointer, so under noalias LLVM may keep, drop or
 * move another thread's element across it); the inputs, only read, keep it, and so do the
 * outputs of a sort in shared memory (only written). In the PTX the compare-exchange step
 * (one loop over the steps), after its barrier, loads and stores its elements in global
 * memory. */
static void test_sort_rows_in_global_memory_reload_after_each_barrier(void **state) {
  (void)state;
  kiln_hlo_module_t *m = NULL;
  kiln_sort_launch_t l;
  kiln_codegen_kernel_t k;
  emit_kv("2,1000", false, &m, &l, &k);
  assert_true(l.in_shared);
  expect_noalias_params(&k, 4, 0xf);
  /* The host keeps global-memory sorts' top-level loops rolled (kir.h), not shared ones'. */
  assert_false(kiln_kir_module_kernel(k.kir)->host_rolled_for_loops);
  kiln_codegen_kernel_free(&k);
  kiln_hlo_module_destroy(m);

  emit_kv("2,16384", false, &m, &l, &k);
  assert_false(l.in_shared);
  assert_false(l.merge);
  assert_true(kiln_kir_module_kernel(k.kir)->host_rolled_for_loops);
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
    assert_int_equal(barriers, 1); /* the step loop's, opening each of its l.steps iterations */
    assert_true(l.steps > 1);
    assert_int_equal(bare_steps, 0);
  }
  kiln_free(ptx);
  kiln_codegen_kernel_free(&k);
  kiln_hlo_module_destroy(m);

  /* The merge sort (stable rows past 12,288) exchanges elements through the outputs and the
   * scratch tensors: neither is noalias. */
  emit_kv("2,16384", true, &m, &l, &k);
  assert_true(l.merge);
  assert_true(kiln_kir_module_kernel(k.kir)->host_rolled_for_loops);
  expect_noalias_params(&k, 6, 0x3); /* k, v; not the outputs, not the scratch */
  ptx = ptx_checked_by_ptxas(&k);
  if (ptx) assert_non_null(strstr(ptx, "bar.sync"));
  kiln_free(ptx);
  kiln_codegen_kernel_free(&k);
  kiln_hlo_module_destroy(m);
}

/* Stable rows too long for positions in shared memory merge sorted runs, one pass per power
 * of two, between the outputs and a scratch tensor per operand: an even number of passes
 * (16,384: 14) and an odd one (20,000: 15, the last pair of runs cut short by the row's
 * end, threads whose chunk lies past it), ties that must keep their order, a key with a
 * payload, the sort dimension not the minor one, and float specials under the total order;
 * chunks of 16 (16,384 / 1,024) up to 64 positions (40,000: 65,536 / 1,024). */
static void test_long_stable_rows_merge_sorted_runs(void **state) {
  sort_fixture_t *f = *state;
  static const char *const lens[] = {"3,16384", "2,20000"};
  for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
    kiln_hlo_module_t *m = NULL;
    kiln_sort_launch_t l;
    kiln_codegen_kernel_t k;
    emit_kv(lens[i], true, &m, &l, &k);
    assert_true(l.merge);
    assert_int_equal(l.steps, i == 0 ? 14 : 15);
    assert_int_equal(k.num_outputs, 2);
    assert_int_equal(k.num_scratch, 2); /* one per operand, the operands' shapes */
    assert_int_equal(kiln_shape_num_elements(k.scratch[1]),
                     kiln_shape_num_elements(m->entry->parameters[1]->shape));
    kiln_codegen_kernel_free(&k);
    kiln_hlo_module_destroy(m);
    sort_expect_match(f, sort_kv_text(lens[i], true), FILL_TIES, 70 + i);
  }
  sort1(f, "f32", "13000,3", 0, "GT", "TOTALORDER", true, FILL_SPECIAL, 72);
  sort1(f, "bf16", "2,12289", 1, "LT", NULL, true, FILL_TIES, 73);
  sort1(f, "s32", "1,40000", 1, "LT", NULL, true, FILL_DISTINCT, 74);
}

/* The launch of the sort in `text` (kv_plan: sort_kv_text(dims, false)) on the host's plan or
 * the GPU's (its `sort` points into a module already destroyed). */
static kiln_sort_launch_t text_plan(const char *text, bool host) {
  kiln_hlo_module_t *m = NULL;
  kiln_sort_launch_t l;
  assert_null(kiln_hlo_parse_module(text, strlen(text), NULL, &m));
  assert_null(kiln_sort_plan(m->entry, host, &l));
  kiln_hlo_module_destroy(m);
  l.sort = NULL;
  return l;
}

static kiln_sort_launch_t kv_plan(const char *dims, bool host) {
  return text_plan(sort_kv_text(dims, false), host);
}

/* The host's plan: rows that pad past 16 elements merge-sort, one thread and one block per
 * row, stable or not; shorter rows keep the network. Row lengths around the cut (16 / 17),
 * then every case of the tests above on the host's plan: lengths past powers of two (the
 * last pair of runs cut short: a write past a row's end would land in the next row or past
 * the buffer, which run_sort's guard bytes catch), ties with a payload, every dimension of a
 * rank-3 sort, float specials under the total order, several operands and a lexicographic
 * comparator, the corpus's bf16 sort_full shape, rows of 16,384 to 40,000. */
static void test_host_plan_merges_rows_longer_than_16(void **state) {
  sort_fixture_t *f = *state;
  assert_false(kv_plan("100,16", true).merge); /* 16: the network, its distances all constant */
  kiln_sort_launch_t l = kv_plan("100,17", true);
  assert_true(l.merge);
  assert_int_equal(l.threads, 1);
  assert_int_equal(l.rows_per_block, 1);
  assert_int_equal(l.blocks, 100);
  assert_int_equal(l.steps, 5);                 /* passes: runs of 1 .. 16 merged */
  assert_false(kv_plan("100,17", false).merge); /* the GPU keeps the network */

  f->host = true;
  static const char *const lens[] = {"16", "17", "20", "33"};
  for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
    char dims[64];
    snprintf(dims, sizeof(dims), "5,%s", lens[i]);
    sort1(f, "f32", dims, 1, "LT", NULL, false, FILL_DISTINCT, 200 + i);
    sort_expect_match(f, sort_kv_text(dims, true), FILL_TIES, 300 + i);
  }
  test_sort_rows_of_every_length_match_evaluator(state);
  test_sort_along_every_dimension_of_rank3(state);
  test_sort_stable_keeps_the_order_of_ties(state);
  test_sort_nan_and_signed_zero_follow_the_total_order(state);
  test_sort_several_operands_and_tuple_roots(state);
  test_long_stable_rows_merge_sorted_runs(state);
  f->host = false;
}

/* JAX's float comparator: each side's NaN made the canonical NaN and -0 made +0, then a
 * total-order compare (`type` f32 / bf16; `key` 0 or 1: which operand's pair it reads;
 * `negated`: the left key negated, so the two sides differ). */
static const char *jax_sort_text(const char *type, const char *dims, int key, bool negated) {
  static char text[4096];
  int a = 2 * key, b = 2 * key + 1;
  snprintf(
      text, sizeof text,
      "HloModule s\n\ncmp {\n  p0 = %s[] parameter(0)\n  p1 = %s[] parameter(1)\n"
      "  p2 = %s[] parameter(2)\n  p3 = %s[] parameter(3)\n"
      "  nan = %s[] constant(nan)\n  zero = %s[] constant(0)\n"
      "  ea = pred[] compare(p%d, zero), direction=EQ\n  za = %s[] select(ea, zero, p%d)\n"
      "  na = pred[] compare(p%d, p%d), direction=NE\n  ka0 = %s[] select(na, nan, za)\n"
      "  ka = %s[] %s(ka0)\n"
      "  eb = pred[] compare(p%d, zero), direction=EQ\n  zb = %s[] select(eb, zero, p%d)\n"
      "  nb = pred[] compare(p%d, p%d), direction=NE\n  kb0 = %s[] select(nb, nan, zb)\n"
      "  kb = %s[] abs(kb0)\n"
      "  ROOT lt = pred[] compare(ka, kb), direction=LT, type=TOTALORDER\n}\n\n"
      "ENTRY fused {\n  k = %s[%s] parameter(0)\n  v = %s[%s] parameter(1)\n"
      "  ROOT s = (%s[%s], %s[%s]) sort(k, v), dimensions={1}, is_stable=true, to_apply=cmp\n}\n",
      type, type, type, type, type, type, a, type, a, a, a, type, type, negated ? "negate" : "abs",
      b, type, b, b, b, type, type, type, dims, type, dims, type, dims, type, dims);
  return text;
}

/* The host's merge computes each element's comparator key once, as it loads it, when the
 * comparator is compare(key(a), key(b)) with one key function for both sides (JAX's: NaN and
 * -0 canonicalized, then a total order; here with an abs after it): keyed on either operand pair,
 * with NaNs, signed zeros, infinities and ties (stable), f32 and bf16, against the evaluator; a
 * comparator whose sides differ (one negated) is not keyed and sorts as before.
 * sort_full_1024x4096_bf16's comparator is this one: 208-235 -> ~140 ms a run. */
static void test_host_merge_computes_each_key_once(void **state) {
  sort_fixture_t *f = *state;
  assert_true(text_plan(jax_sort_text("f32", "4,300", 0, false), true).keyed);
  assert_true(text_plan(jax_sort_text("bf16", "4,300", 1, false), true).keyed);
  assert_false(text_plan(jax_sort_text("f32", "4,300", 0, true), true).keyed);
  assert_false(text_plan(jax_sort_text("f32", "4,300", 0, false), false).keyed); /* GPU plan */
  assert_false(kv_plan("4,300", true).keyed); /* a plain compare(a, b): nothing to key */
  f->host = true;
  static const char *const dims[] = {"4,300", "3,1000", "2,4097"};
  for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) {
    sort_expect_match(f, jax_sort_text("f32", dims[i], 0, false), FILL_SPECIAL, 600 + i);
    sort_expect_match(f, jax_sort_text("bf16", dims[i], 0, false), FILL_TIES, 610 + i);
    sort_expect_match(f, jax_sort_text("f32", dims[i], 1, false), FILL_SPECIAL, 620 + i);
    sort_expect_match(f, jax_sort_text("f32", dims[i], 0, true), FILL_SPECIAL, 630 + i);
  }
  f->host = false;
}

/* A two-operand sort keyed by operand `key` of type `type` (the other s32) with compare `dir`
 * (and `cmp_type`): an argsort's shape, whose payload shows that ties keep their order. */
static const char *radix_kv_text(const char *type, const char *dims, int key, const char *dir,
                                 const char *cmp_type) {
  static char text[2048];
  snprintf(text, sizeof text,
           "HloModule s\n\ncmp {\n  a = %s[] parameter(0)\n  b = %s[] parameter(1)\n"
           "  c = s32[] parameter(2)\n  d = s32[] parameter(3)\n"
           "  ROOT r = pred[] compare(%s, %s), direction=%s%s%s\n}\n\n"
           "ENTRY fused {\n  k = %s[%s] parameter(0)\n  v = s32[%s] parameter(1)\n"
           "  ROOT s = (%s[%s], s32[%s]) sort(k, v), dimensions={1}, is_stable=true, "
           "to_apply=cmp\n}\n",
           type, type, key ? "c" : "a", key ? "d" : "b", dir, cmp_type ? ", type=" : "",
           cmp_type ? cmp_type : "", type, dims, dims, type, dims, dims);
  return text;
}

/* The host sorts rows of at least KILN_SORT_RADIX_MIN_ROW_PER_BYTE elements per key byte by
 * their key's bytes when the comparator is LT / GT on one key of 8, 16, 32 or 64 bits in its
 * type's total order: plain operands of every such integer type and bf16 / f16 / f32 / f64
 * under TOTALORDER (NaNs of both signs, infinities, signed zeros), JAX's canonicalizing key
 * function, keyed by either operand of an argsort with ties (stable), descending, rows along
 * a major dimension and rows whose length is not a power of two, all against the evaluator.
 * Plain float compares (a partial order: -0 == +0), lexicographic comparators, comparators
 * whose sides differ, short rows and the GPU's plan do not qualify.
 * sort_full_1024x4096_bf16: 150-180 -> 15-18 ms a run. */
static void test_host_radix_sorts_rows_by_their_key_bytes(void **state) {
  sort_fixture_t *f = *state;
  kiln_sort_launch_t l = text_plan(radix_kv_text("s32", "4,256", 0, "LT", NULL), true);
  assert_true(l.radix && l.merge);
  assert_int_equal(l.steps, 4); /* one pass per byte */
  assert_int_equal(text_plan(radix_kv_text("bf16", "4,300", 0, "GT", "TOTALORDER"), true).steps, 2);
  assert_int_equal(text_plan(radix_kv_text("u8", "4,300", 0, "LT", NULL), true).steps, 1);
  assert_true(text_plan(radix_kv_text("s32", "4,300", 1, "GT", NULL), true).radix);
  assert_true(text_plan(jax_sort_text("f32", "4,300", 0, false), true).radix);
  /* Short rows: at least 64 elements per key byte. */
  assert_false(text_plan(radix_kv_text("s32", "4,255", 0, "LT", NULL), true).radix);
  assert_false(text_plan(radix_kv_text("bf16", "4,127", 0, "LT", "TOTALORDER"), true).radix);
  assert_true(text_plan(radix_kv_text("bf16", "4,128", 0, "LT", "TOTALORDER"), true).radix);
  assert_true(text_plan(radix_kv_text("u8", "4,64", 0, "LT", NULL), true).radix);
  assert_false(text_plan(radix_kv_text("s32", "4,300", 0, "LT", NULL), false).radix); /* GPU */
  assert_false(text_plan(radix_kv_text("f32", "4,300", 0, "LT", NULL), true).radix);
  assert_int_equal(text_plan(radix_kv_text("s64", "4,512", 0, "LT", NULL), true).steps, 8);
  assert_false(text_plan(radix_kv_text("s64", "4,511", 0, "LT", NULL), true).radix);
  assert_true(text_plan(radix_kv_text("f64", "4,600", 0, "LT", "TOTALORDER"), true).radix);
  assert_false(text_plan(radix_kv_text("s32", "4,300", 0, "LE", NULL), true).radix);
  assert_false(text_plan(radix_kv_text("s32", "4,300", 0, "LT", "UNSIGNED"), true).radix);
  assert_false(text_plan(jax_sort_text("f32", "4,300", 0, true), true).radix);

  f->host = true;
  static const char *const ints[] = {"s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    sort1(f, ints[i], "3,1000", 1, "LT", NULL, false, FILL_SPECIAL, 700 + i);
    sort1(f, ints[i], "3,257", 1, "GT", NULL, true, FILL_DISTINCT, 710 + i);
    sort_expect_match(f, radix_kv_text(ints[i], "5,600", 0, "LT", NULL), FILL_TIES, 720 + i);
  }
  static const char *const floats[] = {"bf16", "f16", "f32", "f64"};
  for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
    sort1(f, floats[i], "4,1000", 1, "LT", "TOTALORDER", false, FILL_SPECIAL, 730 + i);
    sort1(f, floats[i], "2,4097", 1, "GT", "TOTALORDER", true, FILL_SPECIAL, 740 + i);
    sort1(f, floats[i], "600,3", 0, "LT", "TOTALORDER", true, FILL_TIES, 750 + i);
    sort_expect_match(f, radix_kv_text(floats[i], "3,1025", 0, "GT", "TOTALORDER"), FILL_TIES,
                      760 + i);
    sort_expect_match(f, jax_sort_text(floats[i], "3,1000", 0, false), FILL_SPECIAL, 770 + i);
  }
  sort_expect_match(f, radix_kv_text("s32", "4,700", 1, "LT", NULL), FILL_TIES, 780);
  sort1(f, "u16", "7,33,200", 2, "LT", NULL, true, FILL_TIES, 781);
  sort1(f, "s32", "1,40000", 1, "LT", NULL, true, FILL_SPECIAL, 782);
  f->host = false;
}

/* A three-operand sort of rows `dims`, lexicographic on keys of types t0 (operand 0) and t1
 * (operand 1) as JAX's num_keys=2 comparator writes it (or(lt0, and(eq0, lt1))), the third an
 * s32 payload; floats compare in TOTALORDER. `eq_type`: the first EQ's type when not the LT's. */
static const char *lex_text(const char *t0, const char *t1, const char *dims, const char *eq_type) {
  static char text[2048];
  bool f0 = t0[0] == 'f' || t0[0] == 'b', f1 = t1[0] == 'f' || t1[0] == 'b';
  const char *o0 = f0 ? ", type=TOTALORDER" : "", *o1 = f1 ? ", type=TOTALORDER" : "";
  snprintf(text, sizeof text,
           "HloModule s\n\ncmp {\n  a0 = %s[] parameter(0)\n  b0 = %s[] parameter(1)\n"
           "  a1 = %s[] parameter(2)\n  b1 = %s[] parameter(3)\n"
           "  c = s32[] parameter(4)\n  d = s32[] parameter(5)\n"
           "  lt0 = pred[] compare(a0, b0), direction=LT%s\n"
           "  eq0 = pred[] compare(a0, b0), direction=EQ%s\n"
           "  lt1 = pred[] compare(a1, b1), direction=LT%s\n"
           "  tie = pred[] and(eq0, lt1)\n  ROOT r = pred[] or(lt0, tie)\n}\n\n"
           "ENTRY fused {\n  k0 = %s[%s] parameter(0)\n  k1 = %s[%s] parameter(1)\n"
           "  v = s32[%s] parameter(2)\n"
           "  ROOT s = (%s[%s], %s[%s], s32[%s]) sort(k0, k1, v), dimensions={1}, is_stable=true, "
           "to_apply=cmp\n}\n",
           t0, t0, t1, t1, o0, eq_type ? eq_type : o0, o1, t0, dims, t1, dims, dims, t0, dims, t1,
           dims, dims);
  return text;
}

/* Lexicographic comparators (JAX's num_keys > 1) sort by every key's bytes, the least
 * significant key first: the passes are the keys' bytes together, the row bound counts them
 * all; keys of mixed types with ties in both (the payload shows the order kept), against the
 * evaluator. An EQ of another type than its LT, or one comparing other values, merges. */
static void test_host_radix_sorts_lexicographic_keys(void **state) {
  sort_fixture_t *f = *state;
  assert_int_equal(text_plan(lex_text("s32", "bf16", "4,384", NULL), true).steps, 6);
  assert_false(text_plan(lex_text("s32", "bf16", "4,383", NULL), true).radix);
  assert_false(text_plan(lex_text("f32", "s32", "4,600", ", type=FLOAT"), true).radix);
  assert_false(text_plan(lex_text("s32", "bf16", "4,600", NULL), false).radix);
  char *swapped = kiln_strdup(lex_text("s32", "s32", "4,600", NULL));
  char *at = strstr(swapped, "eq0 = pred[] compare(a0, b0)");
  memcpy(at + strlen("eq0 = pred[] compare("), "a1, b1", 6); /* eq of the second key */
  assert_false(text_plan(swapped, true).radix);
  kiln_free(swapped);
  f->host = true;
  static const char *const pairs[][2] = {
      {"s32", "bf16"}, {"f32", "u8"}, {"bf16", "f64"}, {"u16", "s16"}};
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    sort_expect_match(f, lex_text(pairs[i][0], pairs[i][1], "3,1000", NULL), FILL_TIES, 800 + i);
    sort_expect_match(f, lex_text(pairs[i][0], pairs[i][1], "2,2049", NULL), FILL_SPECIAL, 810 + i);
  }
  f->host = false;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sort_launch_plan),
      cmocka_unit_test(test_sort_rejects_unsupported_fusions_with_a_reason),
      cmocka_unit_test_setup_teardown(test_sort_rows_of_every_length_match_evaluator, sort_setup,
                                      sort_teardown),
      cmocka_unit_test_setup_teardown(test_sort_along_every_dimension_of_rank3, sort_setup,
                                      sort_teardown),
      cmocka_unit_test_setup_teardown(test_sort_stable_keeps_the_order_of_ties, sort_setup,
                                      sort_teardown),
      cmocka_unit_test_setup_teardown(test_sort_nan_and_signed_zero_follow_the_total_order,
                                      sort_setup, sort_teardown),
      cmocka_unit_test_setup_teardown(test_sort_several_operands_and_tuple_roots, sort_setup,
                                      sort_teardown),
      cmocka_unit_test_setup_teardown(test_sort_empty_and_scalar_sorts, sort_setup, sort_teardown),
      cmocka_unit_test_setup_teardown(test_long_stable_rows_merge_sorted_runs, sort_setup,
                                      sort_teardown),
      cmocka_unit_test_setup_teardown(test_host_plan_merges_rows_longer_than_16, sort_setup,
                                      sort_teardown),
      cmocka_unit_test_setup_teardown(test_host_merge_computes_each_key_once, sort_setup,
                                      sort_teardown),
      cmocka_unit_test_setup_teardown(test_host_radix_sorts_rows_by_their_key_bytes, sort_setup,
                                      sort_teardown),
      cmocka_unit_test_setup_teardown(test_host_radix_sorts_lexicographic_keys, sort_setup,
                                      sort_teardown),
      cmocka_unit_test(test_sort_ptx_passes_ptxas),
      cmocka_unit_test(test_sort_rows_in_global_memory_reload_after_each_barrier),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
