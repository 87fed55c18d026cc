/* rng_bit_generator_expander: the expanded module evaluates bit for bit like the original
 * rng-bit-generator on the reference evaluator, for every algorithm, output type and shape
 * form (64-bit, 32-bit split along an even or odd dimension, narrow types, scalars, empty
 * arrays), for 2/3/4-word states including counters that wrap, and on every corpus module
 * that holds a rng-bit-generator the evaluator accepts. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pass_test_util.h"

#include "compiler/passes/pipeline.h"
#include "tools/common/corpus.h"
#include "tools/common/hlo_file.h"

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Evaluates `m` on `args`, runs the expander, checks no rng-bit-generator is left, evaluates
 * again and compares bit for bit. Returns false (after printing) on a difference. */
static bool same_after_expansion(kiln_hlo_module_t *m, kiln_literal_t **args, int n, const char *what) {
  kiln_arena_t a0, a1;
  kiln_arena_init(&a0);
  kiln_arena_init(&a1);
  kiln_literal_t *before = pt_eval(m, args, n, &a0);
  pt_run(m, "rng_bit_generator_expander");
  if (pt_count(m, KILN_OP_RNG_BIT_GENERATOR) != 0) fail_msg("%s: rng-bit-generator left after expansion", what);
  kiln_literal_t *after = pt_eval(m, args, n, &a1);
  bool same = pt_literal_bits_equal(before, after);
  if (!same) {
    kiln_strbuf_t b = {0};
    for (int i = 0; i < kiln_run_report_num_leaves(before); i++) {
      kiln_run_report_print_leaf(&b, "before", kiln_run_report_leaf(before, i), 8);
      kiln_run_report_print_leaf(&b, "after ", kiln_run_report_leaf(after, i), 8);
    }
    print_error("%s: results differ\n%s\n", what, kiln_strbuf_cstr(&b));
    kiln_strbuf_free(&b);
  }
  kiln_arena_destroy(&a1);
  kiln_arena_destroy(&a0);
  return same;
}

/* One rng-bit-generator module: state u64[nw] -> (u64[nw], type[dims]). */
static bool check_case(const char *alg, int nw, const char *type, const char *dims, const uint64_t *state) {
  char text[512];
  snprintf(text, sizeof text,
           "HloModule rbg\n\nENTRY e {\n  s = u64[%d]{0} parameter(0)\n"
           "  ROOT r = (u64[%d]{0}, %s[%s]) rng-bit-generator(s), algorithm=%s\n}\n",
           nw, nw, type, dims, alg);
  kiln_hlo_module_t *m = pt_parse(text);
  kiln_arena_t args_arena;
  kiln_arena_init(&args_arena);
  int64_t d = nw;
  kiln_literal_t *arg = kiln_literal_make(&args_arena, kiln_shape_make_array(&args_arena, KILN_U64, 1, &d));
  for (int i = 0; i < nw; i++) kiln_literal_set_u64(arg, i, state[i]);
  char what[128];
  snprintf(what, sizeof what, "%s u64[%d] -> %s[%s]", alg, nw, type, dims);
  bool ok = same_after_expansion(m, &arg, 1, what);
  kiln_arena_destroy(&args_arena);
  kiln_hlo_module_destroy(m);
  return ok;
}

static const char *const kAlgs[] = {"rng_three_fry", "rng_philox", "rng_default"};
static const char *const kTypes[] = {"u32", "s32", "f32", "u64", "s64", "f64", "u16", "f16",
                                     "bf16", "u8", "s8", "f8e4m3fn", "u4", "s4"};
/* even first dim, odd first dim with an even later one, all odd (largest dim split), scalar,
 * vectors of each length mod 4, empty */
static const char *const kShapes[] = {"", "1", "2", "3", "5", "6", "4,3", "3,4", "3,5", "5,3,7", "2,3,2", "0,3"};

static void test_expansion_matches_the_evaluator_for_every_algorithm_type_and_shape(void **state) {
  uint64_t seed = 1;
  int cases = 0, bad = 0;
  for (size_t a = 0; a < sizeof kAlgs / sizeof kAlgs[0]; a++)
    for (size_t t = 0; t < sizeof kTypes / sizeof kTypes[0]; t++)
      for (size_t s = 0; s < sizeof kShapes / sizeof kShapes[0]; s++) {
        uint64_t st[4];
        for (int i = 0; i < 4; i++) st[i] = splitmix(&seed);
        int nw = 2 + (int)((a + t + s) % 3);
        cases++;
        bad += !check_case(kAlgs[a], nw, kTypes[t], kShapes[s], st);
      }
  printf("rng-bit-generator expansion: %d of %d cases bit-identical\n", cases - bad, cases);
  assert_int_equal(bad, 0);
}

/* Counters near 2^32 and 2^64: the 64-bit counter adds carry across the u32 halves, the
 * Philox 128-bit counter carries into its high word (and a 2-word state's high word is the
 * key), and the new state wraps. */
static void test_counters_that_wrap_carry_like_the_evaluator(void **state) {
  const uint64_t ctrs[] = {0xFFFFFFFFull - 2, 0xFFFFFFFFFFFFFFFFull - 3, 0xFFFFFFFFFFFFFFFFull};
  const uint64_t his[] = {0, 0xFFFFFFFFFFFFFFFFull, 0x00000000FFFFFFFFull};
  int bad = 0;
  for (size_t a = 0; a < sizeof kAlgs / sizeof kAlgs[0]; a++)
    for (size_t c = 0; c < sizeof ctrs / sizeof ctrs[0]; c++)
      for (size_t h = 0; h < sizeof his / sizeof his[0]; h++)
        for (int nw = 2; nw <= 4; nw++) {
          uint64_t st[4] = {0x0123456789ABCDEFull ^ his[h], ctrs[c], his[h], 42};
          bad += !check_case(kAlgs[a], nw, "u32", "7,2", st);
          bad += !check_case(kAlgs[a], nw, "u64", "5", st);
        }
  assert_int_equal(bad, 0);
}

/* XLA's known answer: Threefry2x32 with a zero key and counter gives 0x6b200159 0x99ba4efe
 * (Random123's kat_vectors); the expansion of a u64[] output with state {0, 0} must hold
 * x0 | x1 << 32 and advance the counter by one. */
static void test_threefry_expansion_reproduces_the_known_answer(void **state) {
  kiln_hlo_module_t *m = pt_parse(
      "HloModule kat\n\nENTRY e {\n  s = u64[2] constant({0, 0})\n"
      "  ROOT r = (u64[2], u64[]) rng-bit-generator(s), algorithm=rng_three_fry\n}\n");
  pt_run(m, "rng_bit_generator_expander");
  assert_int_equal(pt_count(m, KILN_OP_RNG_BIT_GENERATOR), 0);
  kiln_arena_t a;
  kiln_arena_init(&a);
  kiln_literal_t *r = pt_eval(m, NULL, 0, &a);
  assert_int_equal(r->num_tuple_elements, 2);
  assert_true(kiln_literal_get_u64(r->tuple_elements[1], 0) == (0x6b200159ull | (0x99ba4efeull << 32)));
  assert_true(kiln_literal_get_u64(r->tuple_elements[0], 1) == 1);
  kiln_arena_destroy(&a);
  kiln_hlo_module_destroy(m);
}

/* Forms the evaluator rejects stay as they are (the pass reports no change). */
static void test_unsupported_forms_are_left_alone(void **state) {
  const char *texts[] = {
      "HloModule a\n\nENTRY e {\n  s = f32[4] parameter(0)\n"
      "  ROOT r = (f32[4], f32[4]) rng-bit-generator(s), algorithm=rng_default\n}\n",
      "HloModule b\n\nENTRY e {\n  s = u64[2] parameter(0)\n"
      "  ROOT r = (u64[2], pred[4]) rng-bit-generator(s), algorithm=rng_philox\n}\n",
      "HloModule c\n\nENTRY e {\n  s = u64[2] parameter(0)\n"
      "  ROOT r = (u64[2], c64[4]) rng-bit-generator(s), algorithm=rng_philox\n}\n",
  };
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    kiln_hlo_module_t *m = NULL;
    kiln_status s = kiln_hlo_parse_module(texts[i], strlen(texts[i]), NULL, &m);
    assert_null(s);
    bool changed = false;
    kiln_pass_options_t o = {.verify = 0};
    s = kiln_pass_rng_bit_generator_expander(m, &o, &changed);
    assert_null(s);
    assert_false(changed);
    assert_int_equal(pt_count(m, KILN_OP_RNG_BIT_GENERATOR), 1);
    kiln_hlo_module_destroy(m);
  }
}

/* The generator inside a while body and used by other instructions: every use sees the
 * expansion's values, and the loop carries the advanced state. */
static void test_generator_in_a_loop_body_advances_the_state(void **state) {
  kiln_hlo_module_t *m = pt_parse(
      "HloModule loop\n\n"
      "body {\n  p = (s32[], u64[3], u32[4]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
      "  one = s32[] constant(1)\n  i1 = s32[] add(i, one)\n  st = u64[3] get-tuple-element(p), index=1\n"
      "  acc = u32[4] get-tuple-element(p), index=2\n"
      "  g = (u64[3], u32[4]) rng-bit-generator(st), algorithm=rng_philox\n"
      "  ns = u64[3] get-tuple-element(g), index=0\n  bits = u32[4] get-tuple-element(g), index=1\n"
      "  x = u32[4] xor(acc, bits)\n  ROOT t = (s32[], u64[3], u32[4]) tuple(i1, ns, x)\n}\n\n"
      "cond {\n  p = (s32[], u64[3], u32[4]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
      "  n = s32[] constant(5)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n\n"
      "ENTRY e {\n  s = u64[3] parameter(0)\n  z = s32[] constant(0)\n  a = u32[4] constant({1, 2, 3, 4})\n"
      "  t = (s32[], u64[3], u32[4]) tuple(z, s, a)\n"
      "  ROOT w = (s32[], u64[3], u32[4]) while(t), condition=cond, body=body\n}\n");
  kiln_arena_t aa;
  kiln_arena_init(&aa);
  int64_t d = 3;
  kiln_literal_t *arg = kiln_literal_make(&aa, kiln_shape_make_array(&aa, KILN_U64, 1, &d));
  kiln_literal_set_u64(arg, 0, 0xDEADBEEFCAFEF00Dull);
  kiln_literal_set_u64(arg, 1, 0xFFFFFFFFFFFFFFFDull);
  kiln_literal_set_u64(arg, 2, 7);
  assert_true(same_after_expansion(m, &arg, 1, "while body"));
  kiln_arena_destroy(&aa);
  kiln_hlo_module_destroy(m);
}

/* Every corpus module with a rng-bit-generator the evaluator accepts: same results after
 * the expander alone, and after the whole pipeline (nothing of it left at top level). */
static void test_corpus_modules_with_rng_bit_generator_keep_their_results(void **state) {
  const char *files[] = {"xla/xla__hlo__transforms__tests__rng_bit_generator_expander.hlo",
                         "xla/xla__hlo__translate__hlo_to_mhlo__tests__import.hlo",
                         "xla/xla__hlo__translate__hlo_to_mhlo__tests__import_emit_stablehlo.hlo",
                         "xla/xla__tools__tests__hlo_extractor_test.hlo"};
  int found = 0, compared = 0, rejected = 0;
  for (size_t fi = 0; fi < sizeof files / sizeof files[0]; fi++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", kiln_corpus_dir(), files[fi]);
    for (int pass = 0; pass < 2; pass++) {
      kiln_hlo_file_t *f = NULL;
      kiln_status s = kiln_hlo_file_load(path, &f);
      if (s) fail_msg("%s: %s", path, kiln_status_message(s));
      for (int k = 0; k < f->num_modules; k++) {
        kiln_hlo_module_t *m = f->modules[k];
        if (!pt_count(m, KILN_OP_RNG_BIT_GENERATOR) || !kiln_corpus_sampled(m->name)) continue;
        found += pass == 0;
        kiln_arena_t args_arena, a0, a1;
        kiln_arena_init(&args_arena);
        kiln_arena_init(&a0);
        kiln_arena_init(&a1);
        kiln_literal_t **args = NULL;
        int n = 0;
        kiln_literal_t *before = NULL;
        s = kiln_hlo_module_verify(m); /* some of XLA's test inputs are invalid on purpose */
        if (!s) s = kiln_fake_args_make(m, NULL, &args_arena, &args, &n);
        if (!s) s = kiln_eval_module(m, NULL, n, args, &a0, &before);
        if (s) {
          /* the verifier or the evaluator rejects it (f32 state, non-tuple result, ...) */
          if (pass == 0) printf("  %s module %d (%s): not valid or not evaluable: %s\n", files[fi], k, m->name,
                                kiln_status_message(s));
          rejected += pass == 0;
          kiln_status_free(s);
        } else {
          kiln_pipeline_lift_parse_limit(m);
          kiln_pass_options_t o = {.verify = 1};
          s = pass == 0 ? kiln_pass_run_list(m, "rng_bit_generator_expander", &o) : kiln_pipeline_run(m, &o);
          if (s) fail_msg("%s module %d: %s", files[fi], k, kiln_status_message(s));
          for (int c = 0; c < (int)m->computations.len; c++)
            for (size_t i = 0; i < m->computations.data[c]->instructions.len; i++)
              assert_int_not_equal(m->computations.data[c]->instructions.data[i]->opcode,
                                   KILN_OP_RNG_BIT_GENERATOR);
          kiln_literal_t *after = NULL;
          s = kiln_eval_module(m, NULL, n, args, &a1, &after);
          if (s) fail_msg("%s module %d after: %s", files[fi], k, kiln_status_message(s));
          if (!pt_literal_bits_equal(before, after))
            fail_msg("%s module %d (%s): results differ after %s", files[fi], k, m->name,
                     pass == 0 ? "the expander" : "the pipeline");
          compared++;
        }
        kiln_arena_destroy(&a1);
        kiln_arena_destroy(&a0);
        kiln_arena_destroy(&args_arena);
      }
      kiln_hlo_file_free(f);
    }
  }
  printf("corpus: %d modules with rng-bit-generator, %d compared bit for bit after the expander "
         "and after the pipeline, %d not valid or not evaluable\n", found, compared / 2, rejected);
  const char *sample = getenv("KILN_CORPUS_SAMPLE");
  if (!sample || atoi(sample) <= 1) assert_true(found >= 8);
  assert_int_equal(compared, 2 * (found - rejected));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_expansion_matches_the_evaluator_for_every_algorithm_type_and_shape),
      cmocka_unit_test(test_counters_that_wrap_carry_like_the_evaluator),
      cmocka_unit_test(test_threefry_expansion_reproduces_the_known_answer),
      cmocka_unit_test(test_unsupported_forms_are_left_alone),
      cmocka_unit_test(test_generator_in_a_loop_body_advances_the_state),
      cmocka_unit_test(test_corpus_modules_with_rng_bit_generator_keep_their_results),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
