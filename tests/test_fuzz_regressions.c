/* The program generator and the differential test of kiln-fuzz (tools/common/hlo_gen.h,
 * hlo_gen_diff.h): generated modules parse and verify and are reproducible from their seed;
 * every minimized reproducer under tests/fuzz_regressions/ (each a bug kiln-fuzz found, fixed)
 * runs on the host backend as the evaluator does (a refusal, UNIMPLEMENTED, fails it: each
 * was fixed to run, so a refusal now is a regression); the minimizer keeps the failure while it
 * shrinks; and a batch of generated programs passes the differential test (KILN_FUZZ_PROGRAMS sets
 * how many: 150 by default, 40 under ASan; the 2,000-program CI run is `kiln-fuzz
 * --programs=2000`). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "compiler/codegen/fusion_compiler.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/pipeline.h"
#include "runtime/device.h"
#include "tests/skip_util.h"
#include "tools/common/hlo_file.h"
#include "tools/common/hlo_gen.h"
#include "tools/common/hlo_gen_diff.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#include "host_device_fixture.h"

static void test_generated_modules_parse_verify_and_repeat(void **state) {
  (void)state;
  int programs = UNDER_ASAN ? 100 : 1000;
  for (int i = 0; i < programs; i++) {
    kiln_hlo_gen_options_t o = {.seed = (uint64_t)i};
    kiln_hlo_gen_program_t *p = kiln_hlo_gen_make(&o), *q = kiln_hlo_gen_make(&o);
    char *text = kiln_hlo_gen_render(p), *again = kiln_hlo_gen_render(q);
    assert_string_equal(text, again);
    kiln_hlo_module_t *m = NULL;
    kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
    if (!s) s = kiln_hlo_module_verify(m);
    if (s) fprintf(stderr, "seed %d: %s\n%s", i, kiln_status_message(s), text);
    assert_null(s);
    kiln_hlo_module_destroy(m);
    kiln_free(text);
    kiln_free(again);
    kiln_hlo_gen_free(p);
    kiln_hlo_gen_free(q);
  }
}

static void test_regressions_match_the_evaluator(void **state) {
  (void)state;
  const char *dir = KILN_SOURCE_DIR "/tests/fuzz_regressions";
  DIR *d = opendir(dir);
  assert_non_null(d);
  int files = 0, failures = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    size_t n = strlen(e->d_name);
    if (n < 5 || strcmp(e->d_name + n - 4, ".hlo") != 0) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    kiln_hlo_file_t *f = NULL;
    kiln_status s = kiln_hlo_file_load(path, &f);
    assert_null(s);
    kiln_diff_options_t o = {g_dev, true, NULL};
    kiln_diff_result_t r;
    kiln_diff_check_text(f->text, &o, &r);
    printf("%s: %s%s%.300s\n", e->d_name, kiln_diff_outcome_name(r.outcome), r.what[0] ? ": " : "",
           r.what);
    if (r.outcome != KILN_DIFF_PASSED) failures++;
    files++;
    kiln_hlo_file_free(f);
  }
  closedir(d);
  assert_true(files >= 2);
  assert_int_equal(failures, 0);
}

/* A predicate the minimizer must keep: the module still holds a reduce. */
static bool has_reduce(void *ctx, const char *text) {
  (*(int *)ctx)++;
  return strstr(text, " reduce(") != NULL;
}

static void test_minimizer_keeps_the_failure_and_shrinks(void **state) {
  (void)state;
  int shrunk = 0;
  for (uint64_t seed = 0, found = 0; found < 5 && seed < 2000; seed++) {
    kiln_hlo_gen_options_t o = {.seed = seed, .max_nodes = 16};
    kiln_hlo_gen_program_t *p = kiln_hlo_gen_make(&o);
    char *text = kiln_hlo_gen_render(p);
    int calls = 0;
    if (has_reduce(&calls, text) && kiln_hlo_gen_size(p) >= 10) {
      found++;
      int before = kiln_hlo_gen_size(p);
      kiln_hlo_gen_minimize(&p, has_reduce, &calls, 200);
      char *small = kiln_hlo_gen_render(p);
      assert_non_null(strstr(small, " reduce("));
      kiln_hlo_module_t *m = NULL;
      kiln_status s = kiln_hlo_parse_module(small, strlen(small), NULL, &m);
      if (!s) s = kiln_hlo_module_verify(m);
      assert_null(s);
      kiln_hlo_module_destroy(m);
      shrunk += kiln_hlo_gen_size(p) < before;
      kiln_free(small);
    }
    kiln_free(text);
    kiln_hlo_gen_free(p);
  }
  assert_int_equal(shrunk, 5);
}

/* Seeds whose programs the generator must not draw as they were: 20312 multiplied a
 * cancelling f32 sum (tests/fuzz_regressions/fuzz-20312.hlo), 1024423 bitcast the rounded
 * abs of a complex value (fuzz-1024423.hlo), 1040580 bitcast a while loop's rounded result
 * (fuzz-1040580.hlo), 2758275 iterated cosine(3 * carry) in a scan (an ulp of cosine grown
 * 3^10-fold; its scan body adds now), 2760066 mapped cosine over an f8e5m2fnuz sum (a coarse
 * float's inexact operand takes tanh now), 5007891 took exp of a bf16 dot's square, 26.6 (an
 * inexact operand of exp is clamped now), 4707796 multiplied the 112 terms of an f32 iota
 * (0 or NaN by the order: a float product takes more than 8 terms no more). All pass now. */
static void test_seeds_of_generator_findings_pass(void **state) {
  (void)state;
  static const uint64_t kSeeds[] = {20312, 1024423, 1040580, 2758275, 2760066, 5007891, 4707796};
  for (size_t i = 0; i < sizeof kSeeds / sizeof kSeeds[0]; i++) {
    kiln_hlo_gen_options_t go = {.seed = kSeeds[i]};
    kiln_hlo_gen_program_t *p = kiln_hlo_gen_make(&go);
    char *text = kiln_hlo_gen_render(p);
    kiln_diff_options_t o = {g_dev, true, NULL};
    kiln_diff_result_t r;
    kiln_diff_check_text(text, &o, &r);
    if (r.outcome != KILN_DIFF_PASSED)
      printf("%s: %s\n%s", kiln_diff_outcome_name(r.outcome), r.what, text);
    assert_int_equal(r.outcome, KILN_DIFF_PASSED);
    assert_null(strstr(text, "multiply(a, b)"));
    assert_null(strstr(text, "bitcast-convert"));
    kiln_free(text);
    kiln_hlo_gen_free(p);
  }
}

/* The first `want` generated programs from seed `first` (within `span` seeds) whose text `has`
 * accepts match the evaluator. */
static void first_programs_match(uint64_t first, uint64_t span, int want,
                                 bool (*has)(const char *text), const char *what) {
  int found = 0;
  for (uint64_t seed = first; seed < first + span && found < want; seed++) {
    kiln_hlo_gen_options_t go = {.seed = seed};
    kiln_hlo_gen_program_t *p = kiln_hlo_gen_make(&go);
    char *text = kiln_hlo_gen_render(p);
    if (has(text)) {
      found++;
      kiln_diff_options_t o = {g_dev, true, NULL};
      kiln_diff_result_t r;
      kiln_diff_check_text(text, &o, &r);
      if (r.outcome != KILN_DIFF_PASSED)
        printf("seed %llu: %s: %s\n%s", (unsigned long long)seed, kiln_diff_outcome_name(r.outcome),
               r.what, text);
      assert_int_equal(r.outcome, KILN_DIFF_PASSED);
    }
    kiln_free(text);
    kiln_hlo_gen_free(p);
  }
  printf("%d generated programs with %s match the evaluator\n", found, what);
  assert_int_equal(found, want);
}

static bool has_fused_while_body(const char *text) {
  for (const char *w = strstr(text, "while_body_"); w; w = strstr(w + 1, "while_body_"))
    if (strncmp(w + 11 + strspn(w + 11, "0123456789"), "_fused {", 8) == 0) return true;
  return false;
}

static bool has_cublas_gemm(const char *text) {
  return strstr(text, "custom_call_target=\"__cublas$gemm\"") != NULL;
}

static bool has_cublas_gemm_with_c(const char *text) {
  return has_cublas_gemm(text) && strstr(text, "\\\"beta\\\":1,") != NULL;
}

/* Every third generated while loop runs its step as a kLoop fusion inside its body, and every
 * third float matrix product is a `__cublas$gemm` custom call (alpha 1, 2 or 0.5, ReLU
 * epilogue or none, every fourth plus beta = 1 times a C operand), as XLA's optimized dumps
 * hold them (session 35: the generator made neither): the first five programs of the first
 * two kinds from seeds 500000 / 700000, and the first three with a C from 700000, match the
 * evaluator. */
static void test_generated_while_bodies_with_fusions_match_the_evaluator(void **state) {
  (void)state;
  first_programs_match(500000, 3000, 5, has_fused_while_body, "a fusion in a while body");
}

static void test_generated_cublas_gemms_match_the_evaluator(void **state) {
  (void)state;
  first_programs_match(700000, 3000, 5, has_cublas_gemm, "a __cublas$gemm custom call");
  first_programs_match(700000, 8000, 3, has_cublas_gemm_with_c, "a __cublas$gemm with beta 1");
}

static bool has_gelu_chain(const char *text) {
  return strstr(text, "0.044715") != NULL && strstr(text, "0.7978845608") != NULL;
}

/* Whether the pass pipeline folds an epilogue into a gemm in module `text`. */
static bool pipeline_fuses_a_gemm_epilogue(const char *text) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (!s) s = kiln_pipeline_run(m, NULL);
  bool fused = false;
  if (!s) {
    char *after = kiln_hlo_module_to_string(m);
    fused = strstr(after, "kiln_gemm_epilogue") != NULL;
    kiln_free(after);
  }
  kiln_status_free(s);
  kiln_hlo_module_destroy(m);
  return fused;
}

static bool has_fused_gelu_chain(const char *text) {
  return has_gelu_chain(text) && pipeline_fuses_a_gemm_epilogue(text);
}

/* Every third float matrix product of 16 bits or more that is not a cuBLAS call gets a bias
 * vector added along its rows and then nothing, a ReLU, or JAX's tanh GELU, the chains the
 * gemm_epilogue pass folds into the gemm (session 39: the generator made none): the first
 * three programs whose GELU chain the pipeline fuses, from seed 3000000, match the evaluator. */
static void test_generated_gemm_epilogues_match_the_evaluator(void **state) {
  (void)state;
  first_programs_match(3000000, 20000, 3, has_fused_gelu_chain, "a gemm with a bias and GELU");
}

static bool has_async_call(const char *text) {
  return strstr(text, " async-start(") != NULL;
}

static bool has_async_update(const char *text) {
  return strstr(text, " async-update(") != NULL;
}

/* Every other generated call is an async-start / async-done pair around its callee (calls=),
 * every other of those with an async-update between, as XLA's dumps wrap computations
 * (session 36: the generator made none): the first five of each from seed 900000 match the
 * evaluator. */
static void test_generated_async_calls_match_the_evaluator(void **state) {
  (void)state;
  first_programs_match(900000, 3000, 5, has_async_call, "an async-start / async-done pair");
  first_programs_match(900000, 3000, 5, has_async_update, "an async-update");
}

/* No float divide divides by a rounded value (fuzz-1096971: a dot's cancelling sum, doubled in
 * a while loop, then the divisor of an f32 divide: 1 of 832 elements off by 1.5e-4 relative,
 * the evaluator and the host both right). Many programs divide, none by an inexact value. */
static void test_float_divisors_are_exact(void **state) {
  (void)state;
  int divides = 0, inexact = 0;
  for (uint64_t seed = 0; seed < 3000; seed++) {
    kiln_hlo_gen_options_t o = {.seed = 1096000u + seed};
    kiln_hlo_gen_program_t *p = kiln_hlo_gen_make(&o);
    int bad = 0;
    divides += kiln_hlo_gen_float_divides(p, &bad);
    if (bad) printf("seed %llu divides by an inexact value\n", (unsigned long long)o.seed);
    inexact += bad;
    kiln_hlo_gen_free(p);
  }
  printf("%d float divides, %d by an inexact value\n", divides, inexact);
  assert_true(divides >= 20);
  assert_int_equal(inexact, 0);
}

/* The `if`s of region `r` in straight-line code (their branches included, loops not: a loop
 * body counts on its own); the most of any region goes to *max_ifs, loops to *loops. */
static int straight_ifs(const kiln_kir_region_t *r, int *max_ifs, int *loops) {
  int n = 0;
  for (size_t i = 0; i < r->ops.len; i++) {
    const kiln_kir_op_t *op = r->ops.data[i];
    bool loop = op->opcode == KILN_KIR_FOR;
    *loops += loop;
    n += op->opcode == KILN_KIR_IF;
    for (uint32_t k = 0; k < op->num_regions; k++) {
      int inner = straight_ifs(op->regions[k], max_ifs, loops);
      if (!loop) n += inner;
    }
  }
  if (n > *max_ifs) *max_ifs = n;
  return n;
}

/* The kernel of HLO `text`'s entry computation after the kernel-IR pipeline: the most `if`s
 * in one straight-line region and the loops left. */
static void kernel_ifs_and_loops(const char *text, int *max_ifs, int *loops) {
  kiln_hlo_module_t *m = NULL;
  assert_null(kiln_hlo_parse_module(text, strlen(text), NULL, &m));
  assert_null(kiln_hlo_module_verify(m));
  kiln_codegen_kernel_t k;
  assert_null(kiln_codegen_kernel_emit(m->entry, NULL, &k));
  *max_ifs = *loops = 0;
  for (size_t i = 0; i < k.kir->funcs.len; i++)
    straight_ifs(k.kir->funcs.data[i]->body, max_ifs, loops);
  kiln_codegen_kernel_free(&k);
  kiln_hlo_module_destroy(m);
}

/* The kernel of a padded f8e3m4 reduce-window, window `size` (one in-bounds test per window
 * element): the most `if`s in one straight-line region of its kernel IR and the loops left
 * after the pipeline. */
static void window_kernel(const char *size, const char *in, const char *out, int *max_ifs,
                          int *loops) {
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule w\n\nmx {\n  a = f8e3m4[] parameter(0)\n  b = f8e3m4[] parameter(1)\n"
           "  ROOT r = f8e3m4[] maximum(a, b)\n}\n\nENTRY main {\n"
           "  v1 = f8e3m4[%s] parameter(0)\n  v2 = f8e3m4[] parameter(1)\n"
           "  ROOT v3 = f8e3m4[%s] reduce-window(v1, v2), window={size=%s stride=1x2x2x1 "
           "pad=0_0x0_0x0_0x1_1}, to_apply=mx\n}\n",
           in, out, size);
  kernel_ifs_and_loops(text, max_ifs, loops);
}

/* fuzz-700182.hlo: the unroll stage made the 48 window elements of a padded reduce-window 48
 * conditional blocks in a row, and LLVM's loop vectorizer took 15-17 s of CPU over them. The
 * kernel IR now holds at most 16 `if`s in straight-line code, whatever the window (2x3x4x2:
 * 48 elements, 4x2x4x2: 64); a window of 16 elements still unrolls whole (no loop left). */
static void test_padded_window_kernel_ir_stays_bounded(void **state) {
  (void)state;
  int max_ifs, loops;
  window_kernel("2x3x4x2", "9,3,4,4", "8,1,1,5", &max_ifs, &loops);
  printf("window 2x3x4x2: at most %d ifs in straight-line code, %d loops\n", max_ifs, loops);
  assert_true(max_ifs <= 16);
  assert_true(loops >= 1);
  window_kernel("4x2x4x2", "9,3,4,4", "6,1,1,5", &max_ifs, &loops);
  printf("window 4x2x4x2: at most %d ifs in straight-line code, %d loops\n", max_ifs, loops);
  assert_true(max_ifs <= 16);
  window_kernel("2x2x2x2", "9,3,4,4", "8,1,2,5", &max_ifs, &loops);
  printf("window 2x2x2x2: at most %d ifs in straight-line code, %d loops\n", max_ifs, loops);
  assert_int_equal(max_ifs, 16);
  assert_int_equal(loops, 0);
}

/* The loops left in the kernel IR of an s8 convolution (the corpus's import_emit_stablehlo
 * module 34: 3x3 window, 32 input features, padded) with window `size`. */
static int conv_kernel_loops(const char *size, const char *rhs, const char *out) {
  char text[1024];
  snprintf(text, sizeof text,
           "HloModule c\n\nENTRY main {\n  a = s8[100,26,26,32] parameter(0)\n"
           "  b = s8[%s] parameter(1)\n  ROOT c = s32[%s] convolution(a, b), "
           "window={size=%s pad=2_2x2_2 rhs_reversal=1x1}, dim_labels=b01f_01oi->b01f\n}\n",
           rhs, out, size);
  int max_ifs = 0, loops = 0;
  kernel_ifs_and_loops(text, &max_ifs, &loops);
  return loops;
}

/* The unroll stage keeps a short loop around a loop that stays a loop: the 3x3 window around
 * the 32-feature loop stays three nested loops (unrolled, it was nine copies of the feature
 * loop, which LLVM unrolled into a 576-load body: 1.2 G instructions, half in GVN, for one
 * kernel); a one-trip loop around it still goes (a 1x1 window leaves the feature loop only). */
static void test_window_loops_around_a_kept_loop_stay_loops(void **state) {
  (void)state;
  int loops = conv_kernel_loops("3x3", "3,3,1,32", "100,28,28,1");
  printf("3x3 window: %d loops\n", loops);
  assert_int_equal(loops, 3);
  loops = conv_kernel_loops("1x1", "1,1,1,32", "100,30,30,1");
  printf("1x1 window: %d loops\n", loops);
  assert_int_equal(loops, 1);
}

/* Whether `text` parses and verifies. */
static bool verifies(const char *text) {
  kiln_hlo_module_t *m = NULL;
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), NULL, &m);
  if (!s) s = kiln_hlo_module_verify(m);
  bool ok = s == NULL;
  kiln_status_free(s);
  kiln_hlo_module_destroy(m);
  return ok;
}

/* Whether `text` verifies and multiplies in its entry computation (a stand-in failure). */
static bool verifies_and_multiplies(void *ctx, const char *text) {
  (*(int *)ctx)++;
  return strstr(text, " multiply(v") && verifies(text);
}

/* The minimizer shrinks the failing program itself: a multiply deep in a larger program ends
 * as the multiply of two parameters (instructions dropped), every dimension 1. */
static void test_minimizer_drops_instructions_and_shrinks_dims(void **state) {
  (void)state;
  int found = 0;
  for (uint64_t seed = 0; found < 5 && seed < 20000; seed++) {
    kiln_hlo_gen_options_t o = {.seed = seed, .max_nodes = 16};
    kiln_hlo_gen_program_t *p = kiln_hlo_gen_make(&o);
    char *text = kiln_hlo_gen_render(p);
    int calls = 0;
    if (kiln_hlo_gen_size(p) >= 10 && strstr(text, "{2,1,0} multiply(v") &&
        verifies_and_multiplies(&calls, text)) {
      found++;
      kiln_hlo_gen_minimize(&p, verifies_and_multiplies, &calls, 300);
      char *small = kiln_hlo_gen_render(p);
      int tries = 0;
      char *shrunk = kiln_hlo_gen_shrink_dims(small, verifies_and_multiplies, &calls, 300, &tries);
      assert_true(verifies_and_multiplies(&calls, shrunk));
      assert_true(kiln_hlo_gen_size(p) <= 3);
      assert_true(tries > 0);
      /* Every dimension of every shape is 1 now (or 0, which has nothing to shrink). */
      assert_null(strstr(shrunk, "[2"));
      for (const char *c = strchr(shrunk, '['); c; c = strchr(c + 1, '['))
        for (const char *d = c + 1; *d != ']';) {
          if (*d == ',') {
            d++;
            continue;
          }
          char *end = NULL;
          assert_true(strtoll(d, &end, 10) <= 1);
          assert_true(end > d);
          d = end;
        }
      kiln_free(shrunk);
      kiln_free(small);
    }
    kiln_free(text);
    kiln_hlo_gen_free(p);
  }
  assert_int_equal(found, 5);
}

/* Whether `text` verifies and still slices and reduce-windows (a stand-in failure). */
static bool verifies_slices_and_windows(void *ctx, const char *text) {
  (*(int *)ctx)++;
  return strstr(text, " slice(") && strstr(text, " reduce-window(") && verifies(text);
}

/* Dimensions that attributes name shrink too: a slice of a whole dimension of 17 and a window
 * as wide (shrinking 17 in the shapes alone would leave the slice's limit and the window past
 * the operand, which does not verify) end with every dimension 1, the slice [0:1:1] and the
 * window 1x1. */
static void test_shrink_dims_changes_attribute_named_sizes(void **state) {
  (void)state;
  const char *text =
      "HloModule t\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT r = f32[] add(a, b)\n}\n\nENTRY main {\n"
      "  p = f32[17,6]{1,0} parameter(0)\n"
      "  s = f32[17,3]{1,0} slice(p), slice={[0:17:1], [0:3:1]}\n"
      "  z = f32[] constant(0)\n"
      "  ROOT w = f32[1,3]{1,0} reduce-window(s, z), window={size=17x1}, "
      "to_apply=add\n}\n";
  int calls = 0, tries = 0;
  assert_true(verifies_slices_and_windows(&calls, text));
  char *shrunk = kiln_hlo_gen_shrink_dims(text, verifies_slices_and_windows, &calls, 100, &tries);
  printf("%d tries:\n%s", tries, shrunk);
  assert_true(verifies_slices_and_windows(&calls, shrunk));
  assert_non_null(strstr(shrunk, "slice={[0:1:1], [0:1:1]}"));
  assert_non_null(strstr(shrunk, "window={size=1x1}"));
  for (const char *c = strstr(shrunk, "ENTRY"); (c = strchr(c + 1, '[')) != NULL;)
    if (c[-1] != '{' && c[-1] != ' ')
      for (const char *d = c + 1; *d != ']'; d++) assert_true(*d == '1' || *d == ',');
  kiln_free(shrunk);
}

/* The printed coverage table reads back into the same counts, and two tables add up. */
static void test_coverage_table_reads_back(void **state) {
  (void)state;
  kiln_diff_coverage_t *cov = kiln_calloc(1, sizeof *cov), *back = kiln_calloc(1, sizeof *back);
  for (int i = 0; i < 20; i++) {
    kiln_hlo_gen_options_t go = {.seed = 5000u + (uint64_t)i};
    kiln_hlo_gen_program_t *p = kiln_hlo_gen_make(&go);
    char *text = kiln_hlo_gen_render(p);
    kiln_diff_options_t o = {g_dev, false, cov};
    kiln_diff_result_t r;
    kiln_diff_check_text(text, &o, &r);
    kiln_free(text);
    kiln_hlo_gen_free(p);
  }
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  fprintf(f, "some log line\n");
  kiln_diff_coverage_print(f, cov);
  kiln_diff_coverage_print(f, cov);
  fclose(f);
  char err[160] = "";
  assert_int_equal(kiln_diff_coverage_read(buf, back, err, sizeof err), 2);
  for (int op = 0; op < KILN_OP_COUNT; op++)
    for (int t = 0; t < KILN_ELEM_TYPE_COUNT; t++)
      assert_int_equal(back->op_type[op][t], 2 * cov->op_type[op][t]);
  for (int e = 0; e < KILN_DIFF_EMITTERS; e++)
    for (int t = 0; t < KILN_ELEM_TYPE_COUNT; t++)
      assert_int_equal(back->emitter_type[e][t], 2 * cov->emitter_type[e][t]);
  for (int k = 0; k < KILN_DIFF_OUTCOMES; k++)
    assert_int_equal(back->outcomes[k], 2 * cov->outcomes[k]);
  assert_int_equal(cov->outcomes[KILN_DIFF_PASSED] + cov->outcomes[KILN_DIFF_UNSUPPORTED] +
                       cov->outcomes[KILN_DIFF_SKIPPED],
                   20);
  /* A damaged row is refused with its line. */
  char *bad = strstr(buf, "\ntuple ");
  if (!bad) bad = strstr(buf, "\nparameter ");
  assert_non_null(bad);
  bad[3] = '#';
  assert_int_equal(kiln_diff_coverage_read(buf, back, err, sizeof err), -1);
  assert_non_null(strstr(err, "line "));
  free(buf);
  kiln_free(cov);
  kiln_free(back);
}

static void test_generated_programs_match_the_evaluator(void **state) {
  (void)state;
  const char *env = getenv("KILN_FUZZ_PROGRAMS");
  int programs = env ? atoi(env) : (UNDER_ASAN ? 40 : 150);
  kiln_diff_coverage_t *cov = kiln_calloc(1, sizeof *cov);
  int failures = 0;
  for (int i = 0; i < programs; i++) {
    kiln_hlo_gen_options_t go = {.seed = 1000000u + (uint64_t)i};
    kiln_hlo_gen_program_t *p = kiln_hlo_gen_make(&go);
    char *text = kiln_hlo_gen_render(p);
    kiln_diff_options_t o = {g_dev, true, cov};
    kiln_diff_result_t r;
    kiln_diff_check_text(text, &o, &r);
    if (kiln_diff_outcome_is_failure(r.outcome)) {
      failures++;
      printf("seed %llu: %s: %.400s %s\n%s", (unsigned long long)go.seed,
             kiln_diff_outcome_name(r.outcome), r.what, r.culprit, text);
    }
    kiln_free(text);
    kiln_hlo_gen_free(p);
  }
  kiln_diff_coverage_print(stdout, cov);
  assert_int_equal(cov->outcomes[KILN_DIFF_PASSED] + cov->outcomes[KILN_DIFF_SKIPPED] +
                       cov->outcomes[KILN_DIFF_UNSUPPORTED] + failures,
                   programs);
  assert_true(cov->outcomes[KILN_DIFF_PASSED] >= programs * 8 / 10);
  kiln_free(cov);
  assert_int_equal(failures, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_generated_modules_parse_verify_and_repeat),
      cmocka_unit_test(test_regressions_match_the_evaluator),
      cmocka_unit_test(test_minimizer_keeps_the_failure_and_shrinks),
      cmocka_unit_test(test_seeds_of_generator_findings_pass),
      cmocka_unit_test(test_generated_while_bodies_with_fusions_match_the_evaluator),
      cmocka_unit_test(test_generated_cublas_gemms_match_the_evaluator),
      cmocka_unit_test(test_generated_gemm_epilogues_match_the_evaluator),
      cmocka_unit_test(test_generated_async_calls_match_the_evaluator),
      cmocka_unit_test(test_float_divisors_are_exact),
      cmocka_unit_test(test_padded_window_kernel_ir_stays_bounded),
      cmocka_unit_test(test_window_loops_around_a_kept_loop_stay_loops),
      cmocka_unit_test(test_shrink_dims_changes_attribute_named_sizes),
      cmocka_unit_test(test_minimizer_drops_instructions_and_shrinks_dims),
      cmocka_unit_test(test_coverage_table_reads_back),
      cmocka_unit_test(test_generated_programs_match_the_evaluator),
  };
  return kiln_run_tests(tests, host_device_setup, host_device_teardown);
}
