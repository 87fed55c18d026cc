/* Concatenate, input-slices and in-place dynamic-update-slice emitters: every corpus
 * concatenate and dynamic_update_slice fusion is compiled by its emitter (checked through
 * the runner's report), passes `ptxas -arch=sm_90` (skipped with the reason when ptxas is
 * missing) and matches the evaluator on the host (kiln_compare_kernel_tolerance); fusions written
 * here cover input slices of different sizes with a fused producer, a DUS whose operand is
 * computed in the fusion, a DUS next to an ordinary side output, and the launch shapes (the
 * concatenate grid covers the largest operand only; the DUS update kernel covers the update
 * only) and complex (c64, c128) DUS roots. Prints passed/total. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "compiler/codegen/concat_emitter.h"
#include "compiler/codegen/dus_emitter.h"
#include "compiler/codegen/input_slices_emitter.h"
#include "emitter_test_util.h"
#include "tests/skip_util.h"

static kiln_hlo_module_t *parse(const char *text) {
  kiln_hlo_module_t *m = emt_parse(text);
  assert_non_null(m);
  return m;
}

static bool run_one(const char *what, const kiln_hlo_computation_t *c, kiln_codegen_emitter_t want,
                    kiln_host_jit_t *jit) {
  return emt_run_one(what, c, want, jit, NULL, 0, 0, -1);
}

static void run_corpus(const char *needle, kiln_codegen_emitter_t want, int min_files) {
  int passed = 0, total = 0;
  emt_run_corpus(needle, want, &passed, &total);
  assert_true(total >= min_files);
  assert_int_equal(passed, total);
}

static void test_corpus_concatenate_fusions_match_evaluator(void **state) {
  run_corpus("__concatenate__", KILN_CODEGEN_EMITTER_CONCATENATE, 8);
}

static void test_corpus_dynamic_update_slice_fusions_match_evaluator(void **state) {
  run_corpus("__dynamic_update_slice__", KILN_CODEGEN_EMITTER_DYNAMIC_UPDATE_SLICE, 8);
}

/* The grid covers the largest operand (f32[640002]), not the output (1280002 elements). */
static void test_concatenate_grid_covers_largest_operand(void **state) {
  const char *text = "fusion {\n  a = f32[640002] parameter(0)\n  b = f32[640000] parameter(1)\n"
                     "  ROOT c = f32[1280002] concatenate(a, b), dimensions={0}\n}\n";
  kiln_hlo_module_t *m = parse(text);
  kiln_codegen_kernel_t k;
  assert_null(kiln_concat_kernel_emit(m->entry, NULL, &k));
  assert_int_equal(k.grid.threads, 128);
  assert_int_equal(k.grid.blocks_x, (640002 + 127) / 128);
  assert_null(k.next);
  kiln_codegen_kernel_free(&k);
  kiln_hlo_module_destroy(m);
}

/* im2col's columns of a 3x3 window over a padded [1, H, W, 3] input: 9 strided slices
 * concatenated along the 3 features (`h` x `w` outputs). */
static char *im2col_text(int h, int w) {
  char *t = kiln_malloc(4096);
  int n = snprintf(t, 4096,
                   "fusion {\n  x = f32[1,%d,%d,3] parameter(0)\n  z = f32[] constant(0)\n"
                   "  p = f32[1,%d,%d,3] pad(x, z), padding=0_0x1_1x1_1x0_0\n",
                   h, w, h + 2, w + 2);
  for (int k = 0; k < 9; k++)
    n += snprintf(t + n, 4096 - (size_t)n,
                  "  s%d = f32[1,%d,%d,3] slice(p), slice={[0:1], [%d:%d], [%d:%d], [0:3]}\n", k, h,
                  w, k / 3, k / 3 + h, k % 3, k % 3 + w);
  snprintf(t + n, 4096 - (size_t)n,
           "  ROOT c = f32[1,%d,%d,27] concatenate(s0, s1, s2, s3, s4, s5, s6, s7, s8), "
           "dimensions={3}\n}\n",
           h, w);
  return t;
}

/* More than 4 operands: the concatenate emitter once the result has 2^18 elements (one loop
 * per operand, no per-element search), the loop emitter below; both match the evaluator. */
static void test_wide_concatenate_takes_the_emitter_when_large(void **state) {
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  const struct {
    int h, w;
    kiln_codegen_emitter_t want;
  } cases[] = {
      {112, 112, KILN_CODEGEN_EMITTER_CONCATENATE}, /* 338,688 elements */
      {20, 24, KILN_CODEGEN_EMITTER_LOOP},          /* 12,960 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text = im2col_text(cases[i].h, cases[i].w);
    kiln_hlo_module_t *m = parse(text);
    assert_int_equal(kiln_codegen_classify(m->entry, NULL), cases[i].want);
    assert_true(run_one("im2col columns", m->entry, cases[i].want, jit));
    kiln_hlo_module_destroy(m);
    kiln_free(text);
  }
  kiln_host_jit_destroy(jit);
}

/* Three slices of exp(p0) of different sizes (the loop emitter refuses outputs of different
 * element counts); one launch over the input. */
static const char *k_slices = "fusion {\n"
                              "  p0 = f32[64,40] parameter(0)\n"
                              "  p1 = f32[64,40] parameter(1)\n"
                              "  e = f32[64,40] exponential(p0)\n"
                              "  n = f32[64,40] negate(p1)\n"
                              "  s0 = f32[10,40] slice(e), slice={[0:10], [0:40]}\n"
                              "  s1 = f32[30,7] slice(e), slice={[20:50], [3:10]}\n"
                              "  s2 = f32[64,40] slice(n), slice={[0:64], [0:40]}\n"
                              "  ROOT t = (f32[10,40], f32[30,7], f32[64,40]) tuple(s0, s1, s2)\n"
                              "}\n";

static void test_input_slices_of_different_sizes(void **state) {
  kiln_hlo_module_t *m = parse(k_slices);
  assert_int_equal(kiln_codegen_classify(m->entry, NULL), KILN_CODEGEN_EMITTER_INPUT_SLICES);
  kiln_codegen_kernel_t k;
  assert_null(kiln_input_slices_kernel_emit(m->entry, NULL, &k));
  assert_int_equal(k.num_outputs, 3);
  assert_int_equal(k.grid.threads * k.grid.blocks_x, 64 * 40);
  char *kir = kiln_kir_to_string(k.kir);
  assert_non_null(strstr(kir, "if "));
  kiln_free(kir);
  kiln_codegen_kernel_free(&k);
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  assert_true(run_one("input slices [10,40] [30,7] [64,40]", m->entry,
                      KILN_CODEGEN_EMITTER_INPUT_SLICES, jit));
  kiln_host_jit_destroy(jit);
  kiln_hlo_module_destroy(m);
}

/* A whole window beside slices (a full slice the simplifier removed; fuzz: "loop fusion
 * outputs with different element counts"): still input slices, the whole value written
 * unguarded. A root of another shape, or a strided slice, makes it a loop fusion. */
static const char *k_slices_whole =
    "fusion {\n"
    "  p0 = f32[12,5] parameter(0)\n"
    "  e = f32[12,5] exponential(p0)\n"
    "  s0 = f32[3,5] slice(e), slice={[2:5], [0:5]}\n"
    "  ROOT t = (f32[3,5], f32[12,5]) tuple(s0, e)\n"
    "}\n";

static void test_input_slices_with_a_whole_window(void **state) {
  kiln_hlo_module_t *m = parse(k_slices_whole);
  assert_int_equal(kiln_codegen_classify(m->entry, NULL), KILN_CODEGEN_EMITTER_INPUT_SLICES);
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  assert_true(run_one("input slices [3,5] and the whole [12,5]", m->entry,
                      KILN_CODEGEN_EMITTER_INPUT_SLICES, jit));
  kiln_host_jit_destroy(jit);
  kiln_hlo_module_destroy(m);
  static const char *const k_not[] = {
      "fusion {\n  p0 = f32[12,5] parameter(0)\n  e = f32[12,5] exponential(p0)\n"
      "  s0 = f32[3,5] slice(e), slice={[2:5], [0:5]}\n  t0 = f32[5,12] transpose(e), "
      "dimensions={1,0}\n  ROOT t = (f32[3,5], f32[5,12]) tuple(s0, t0)\n}\n",
      "fusion {\n  p0 = f32[12,5] parameter(0)\n  e = f32[12,5] exponential(p0)\n"
      "  s0 = f32[3,5] slice(e), slice={[2:8:2], [0:5]}\n"
      "  ROOT t = (f32[3,5], f32[12,5]) tuple(s0, e)\n}\n"};
  for (size_t i = 0; i < sizeof k_not / sizeof k_not[0]; i++) {
    m = parse(k_not[i]);
    assert_int_equal(kiln_codegen_classify(m->entry, NULL), KILN_CODEGEN_EMITTER_LOOP);
    kiln_hlo_module_destroy(m);
  }
}

/* Operand 0 computed in the fusion (so no aliasing could help): the copy kernel computes it. */
static const char *k_dus_computed = "fusion {\n"
                                    "  p0 = f32[30,20] parameter(0)\n"
                                    "  p1 = f32[4,5] parameter(1)\n"
                                    "  i = s32[] parameter(2)\n"
                                    "  j = s32[] parameter(3)\n"
                                    "  e = f32[30,20] exponential(p0)\n"
                                    "  u = f32[4,5] multiply(p1, p1)\n"
                                    "  ROOT d = f32[30,20] dynamic-update-slice(e, u, i, j)\n"
                                    "}\n";

static void test_dus_with_computed_operand(void **state) {
  kiln_hlo_module_t *m = parse(k_dus_computed);
  kiln_codegen_kernel_t k;
  assert_null(kiln_dus_kernel_emit(m->entry, NULL, &k));
  assert_non_null(k.next);
  assert_int_equal(k.num_inputs, 4);
  /* The update kernel's grid covers the 20 update elements only. */
  assert_int_equal(k.next->grid.threads * k.next->grid.blocks_x, 20);
  assert_int_equal(k.grid.threads * k.grid.blocks_x, 640);
  kiln_codegen_kernel_free(&k);
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  assert_true(run_one("DUS of exp(p0), update p1*p1", m->entry,
                      KILN_CODEGEN_EMITTER_DYNAMIC_UPDATE_SLICE, jit));
  kiln_host_jit_destroy(jit);
  kiln_hlo_module_destroy(m);
}

/* A DUS root through a bitcast next to a side output that is no DUS. */
static const char *k_dus_side = "fusion {\n"
                                "  p0 = s32[8,6] parameter(0)\n"
                                "  p1 = s32[2,6] parameter(1)\n"
                                "  i = s64[] parameter(2)\n"
                                "  z = s64[] constant(0)\n"
                                "  d = s32[8,6] dynamic-update-slice(p0, p1, i, z)\n"
                                "  b = s32[48] bitcast(d)\n"
                                "  side = s32[2,6] add(p1, p1)\n"
                                "  ROOT t = (s32[48], s32[2,6]) tuple(b, side)\n"
                                "}\n";

static void test_dus_through_bitcast_with_side_output(void **state) {
  kiln_hlo_module_t *m = parse(k_dus_side);
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  assert_true(run_one("DUS via bitcast + side output", m->entry,
                      KILN_CODEGEN_EMITTER_DYNAMIC_UPDATE_SLICE, jit));
  kiln_host_jit_destroy(jit);
  kiln_hlo_module_destroy(m);
}

/* Complex elements (two floats each) on both kernels of the chain: a c64 DUS straight from
 * the parameters (in place where the runtime aliases operand 0), and a c128 one whose
 * operand and update are computed in the fusion and whose root is a bitcast (the copy
 * kernel computes every element). */
static void test_dus_of_complex_values(void **state) {
  const char *in_place =
      "fusion {\n  p0 = c64[6,5] parameter(0)\n  p1 = c64[2,3] parameter(1)\n"
      "  i = s32[] parameter(2)\n  j = s32[] parameter(3)\n"
      "  ROOT d = c64[6,5] dynamic-update-slice(p0, p1, i, j)\n}\n";
  const char *computed =
      "fusion {\n  p0 = c128[4,6] parameter(0)\n  p1 = c128[4,2] parameter(1)\n"
      "  i = s64[] parameter(2)\n  z = s64[] constant(0)\n"
      "  e = c128[4,6] negate(p0)\n  u = c128[4,2] multiply(p1, p1)\n"
      "  d = c128[4,6] dynamic-update-slice(e, u, z, i)\n"
      "  ROOT b = c128[24] bitcast(d)\n}\n";
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  const char *texts[2] = {in_place, computed};
  const char *what[2] = {"c64 DUS of parameters", "c128 DUS of computed values via bitcast"};
  for (int t = 0; t < 2; t++) {
    kiln_hlo_module_t *m = parse(texts[t]);
    kiln_codegen_kernel_t k;
    assert_null(kiln_dus_kernel_emit(m->entry, NULL, &k));
    assert_non_null(k.next);
    kiln_codegen_kernel_free(&k);
    assert_true(run_one(what[t], m->entry, KILN_CODEGEN_EMITTER_DYNAMIC_UPDATE_SLICE, jit));
    kiln_hlo_module_destroy(m);
  }
  kiln_host_jit_destroy(jit);
}

/* Layouts: a column-major operand, update and result (in place), and a computed operand
 * under a column-major update; each is read and written at its physical index. A bitcast
 * root between non-default layouts is not a row-major reshape: named, not miscompiled. */
static void test_dus_with_non_default_layouts(void **state) {
  const char *col_major =
      "fusion {\n  p0 = f32[9,7]{0,1} parameter(0)\n  p1 = f32[3,4]{0,1} parameter(1)\n"
      "  i = s32[] parameter(2)\n  j = s32[] parameter(3)\n"
      "  ROOT d = f32[9,7]{0,1} dynamic-update-slice(p0, p1, i, j)\n}\n";
  const char *computed =
      "fusion {\n  p0 = f32[5,6,4]{2,1,0} parameter(0)\n  p1 = f32[2,6,3]{0,2,1} parameter(1)\n"
      "  i = s32[] parameter(2)\n  z = s32[] constant(0)\n  e = f32[5,6,4]{2,1,0} negate(p0)\n"
      "  ROOT d = f32[5,6,4]{2,1,0} dynamic-update-slice(e, p1, i, z, i)\n}\n";
  kiln_host_jit_t *jit = NULL;
  assert_null(kiln_host_jit_create(NULL, &jit));
  const char *texts[2] = {col_major, computed};
  const char *what[2] = {"column-major DUS in place", "DUS of negate(p0) with a permuted update"};
  for (int t = 0; t < 2; t++) {
    kiln_hlo_module_t *m = parse(texts[t]);
    assert_true(run_one(what[t], m->entry, KILN_CODEGEN_EMITTER_DYNAMIC_UPDATE_SLICE, jit));
    kiln_hlo_module_destroy(m);
  }
  kiln_host_jit_destroy(jit);
  const char *bitcast =
      "fusion {\n  p0 = f32[4,6]{0,1} parameter(0)\n  p1 = f32[2,6]{0,1} parameter(1)\n"
      "  i = s32[] parameter(2)\n  z = s32[] constant(0)\n"
      "  d = f32[4,6]{0,1} dynamic-update-slice(p0, p1, i, z)\n  ROOT b = f32[24]{0} "
      "bitcast(d)\n}\n";
  kiln_hlo_module_t *m = parse(bitcast);
  kiln_codegen_kernel_t k;
  kiln_status s = kiln_dus_kernel_emit(m->entry, NULL, &k);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_UNIMPLEMENTED);
  assert_non_null(strstr(kiln_status_message(s), "between non-default layouts"));
  kiln_status_free(s);
  kiln_hlo_module_destroy(m);
}

/* A DUS under an elementwise epilogue is XLA's loop-emitter case: named, not miscompiled. */
static void test_dus_under_epilogue_is_unimplemented(void **state) {
  const char *text = "fusion {\n  p0 = f32[8] parameter(0)\n  p1 = f32[2] parameter(1)\n  i = s32[] parameter(2)\n"
                     "  d = f32[8] dynamic-update-slice(p0, p1, i)\n  ROOT n = f32[8] negate(d)\n}\n";
  kiln_hlo_module_t *m = parse(text);
  kiln_codegen_kernel_t k;
  kiln_status s = kiln_dus_kernel_emit(m->entry, NULL, &k);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_UNIMPLEMENTED);
  assert_non_null(strstr(kiln_status_message(s), "loop emitter"));
  kiln_status_free(s);
  kiln_hlo_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus_concatenate_fusions_match_evaluator),
      cmocka_unit_test(test_corpus_dynamic_update_slice_fusions_match_evaluator),
      cmocka_unit_test(test_concatenate_grid_covers_largest_operand),
      cmocka_unit_test(test_wide_concatenate_takes_the_emitter_when_large),
      cmocka_unit_test(test_input_slices_of_different_sizes),
      cmocka_unit_test(test_input_slices_with_a_whole_window),
      cmocka_unit_test(test_dus_with_computed_operand),
      cmocka_unit_test(test_dus_through_bitcast_with_side_output),
      cmocka_unit_test(test_dus_of_complex_values),
      cmocka_unit_test(test_dus_with_non_default_layouts),
      cmocka_unit_test(test_dus_under_epilogue_is_unimplemented),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
