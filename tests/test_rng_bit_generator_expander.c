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
#include "expander_test_util.h"


static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static const kiln_hlo_opcode_t kOps[1] = {KILN_OP_RNG_BIT_GENERATOR};

/* Bit-identical results before and after the expander (printed with `what` otherwise). */
static bool same_after_expansion(kiln_hlo_module_t *m, kiln_literal_t **args, int n, const char *what) {
  bool same = et_error_after(m, args, n, "rng_bit_generator_expander", kOps, 1, true) == 0;
  if (!same) print_error("%s: results differ\n", what);
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
        char name[96]; /* the sanitizer run (KILN_CORPUS_SAMPLE) checks a sample of the cases */
        snprintf(name, sizeof name, "rbg %s %s[%s]", kAlgs[a], kTypes[t], kShapes[s]);
        if (!kiln_corpus_sampled(name)) continue;
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
          char name[96];
          snprintf(name, sizeof name, "rbg wrap %zu %zu %zu %d", a, c, h, nw);
          if (!kiln_corpus_sampled(name)) continue;
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
  et_expect_unchanged(texts, (int)(sizeof texts / sizeof texts[0]), kiln_pass_rng_bit_generator_expander);
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

/* Every corpus module with a rng-bit-generator the evaluator accepts: the same results bit
 * for bit after the expander alone, and after the whole pipeline (none of it left). */
static void test_corpus_modules_with_rng_bit_generator_keep_their_results(void **state) {
  const char *files[] = {"xla/xla__hlo__transforms__tests__rng_bit_generator_expander.hlo",
                         "xla/xla__hlo__translate__hlo_to_mhlo__tests__import.hlo",
                         "xla/xla__hlo__translate__hlo_to_mhlo__tests__import_emit_stablehlo.hlo",
                         "xla/xla__tools__tests__hlo_extractor_test.hlo"};
  const kiln_hlo_opcode_t ops[1] = {KILN_OP_RNG_BIT_GENERATOR};
  int found, compared, rejected;
  et_check_corpus(files, 4, ops, 1, "rng_bit_generator_expander", true, &found, &compared, &rejected);
  printf("corpus: %d modules with rng-bit-generator, %d compared bit for bit after the expander and after the "
         "pipeline, %d not valid or not evaluable\n", found, compared, rejected);
  if (!kiln_corpus_sampling()) assert_true(found >= 8);
  assert_int_equal(compared + rejected, found);
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
