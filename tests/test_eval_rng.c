/* Known-answer tests for the evaluator's rng-bit-generator and rng (compiler/eval/eval_rng.c).
 * Each test is a small HLO module with constant inputs; expectations are hand-computed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compiler/eval/eval.h"
#include "tests/eval_test_util.h"

/* The block functions of eval_rng.c (declared here: they are test hooks, not part of
 * eval.h's interface). */
void kiln_eval_threefry2x32(const uint32_t key[2], const uint32_t ctr[2], uint32_t out[2]);
void kiln_eval_philox4x32(const uint32_t key[2], const uint32_t ctr[4], uint32_t out[4]);

/* Random123 known-answer vectors (kat_vectors: counter words, key words, expected). */
static void test_threefry2x32_20_known_answers(void **state) {
  static const uint32_t kat[3][6] = {
      {0, 0, 0, 0, 0x6b200159, 0x99ba4efe},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x1cb996fc, 0xbb002be7},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xc4923a9c, 0x483df7a0},
  };
  for (int i = 0; i < 3; i++) {
    uint32_t out[2];
    kiln_eval_threefry2x32(&kat[i][2], &kat[i][0], out);
    assert_int_equal(out[0], kat[i][4]);
    assert_int_equal(out[1], kat[i][5]);
  }
}

static void test_philox4x32_10_known_answers(void **state) {
  static const uint32_t kat[3][10] = {
      {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
      {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
       0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
      {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
       0x94fdcceb, 0x5001e420, 0x24126ea1},
  };
  for (int i = 0; i < 3; i++) {
    uint32_t out[4];
    kiln_eval_philox4x32(&kat[i][4], &kat[i][0], out);
    for (int j = 0; j < 4; j++) assert_int_equal(out[j], kat[i][6 + j]);
  }
}

static void test_rng_bit_generator_three_fry_u32_layout(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  s = u64[2] constant({0, 0})\n"
           "  ROOT r = (u64[2], u32[3,2]) rng-bit-generator(s), algorithm=rng_three_fry\n"
           "}\n");
  const kiln_literal_t *st = r.result->tuple_elements[0], *bits = r.result->tuple_elements[1];
  /* the half shape is [3,1] (split on the even dim 1): 3 blocks, row i = block(counter i) */
  assert_int_equal(kiln_literal_get_u64(st, 0), 0);
  assert_int_equal(kiln_literal_get_u64(st, 1), 3);
  assert_int_equal(kiln_literal_get_u64(bits, 0), 0x6b200159u); /* the all-zero KAT */
  assert_int_equal(kiln_literal_get_u64(bits, 1), 0x99ba4efeu);
  /* Values XLA's CPU backend printed for this program (r-xla/anvil documentation of
   * nvl_rng_bit_generator, 5 significant digits): 1.3515e9 3.2358e9 / 1.6886e9 4.2293e9. */
  const double xla[4] = {1.3515e9, 3.2358e9, 1.6886e9, 4.2293e9};
  for (int i = 0; i < 4; i++)
    assert_true(fabs((double)kiln_literal_get_u64(bits, 2 + i) - xla[i]) < 6e4);
  run_done(&r);
}

static void test_rng_bit_generator_three_fry_odd_split_and_u64(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  s = u64[2] constant({42, 7})\n"
           "  a = (u64[2], u32[3]) rng-bit-generator(s), algorithm=rng_three_fry\n"
           "  b = (u64[2], u64[2]) rng-bit-generator(s), algorithm=rng_three_fry\n"
           "  ROOT t = ((u64[2], u32[3]), (u64[2], u64[2])) tuple(a, b)\n"
           "}\n");
  const kiln_literal_t *a = r.result->tuple_elements[0], *b = r.result->tuple_elements[1];
  uint32_t key[2] = {42, 0}, o[2];
  /* u32[3]: no even dim, split the largest: half [2]; element 2h+j = x_j(counter 7+h) */
  assert_int_equal(kiln_literal_get_u64(a->tuple_elements[0], 1), 9);
  for (int h = 0; h < 2; h++) {
    kiln_eval_threefry2x32(key, (uint32_t[]){7 + h, 0}, o);
    assert_int_equal(kiln_literal_get_u64(a->tuple_elements[1], 2 * h), o[0]);
    if (h == 0) assert_int_equal(kiln_literal_get_u64(a->tuple_elements[1], 1), o[1]);
  }
  /* u64[2]: element i = x0 | x1 << 32 of counter 7+i */
  assert_int_equal(kiln_literal_get_u64(b->tuple_elements[0], 1), 9);
  for (int i = 0; i < 2; i++) {
    kiln_eval_threefry2x32(key, (uint32_t[]){7 + i, 0}, o);
    assert_true(kiln_literal_get_u64(b->tuple_elements[1], i) ==
                ((uint64_t)o[0] | ((uint64_t)o[1] << 32)));
  }
  run_done(&r);
}

static void test_rng_bit_generator_philox_counter_and_carry(void **state) {
  run_t r;
  run_text(&r,
           "HloModule m\n"
           "ENTRY e {\n"
           "  s = u64[3] constant({81985529216486895, 18446744073709551615, 5})\n"
           "  a = (u64[3], u32[6]) rng-bit-generator(s), algorithm=rng_philox\n"
           "  s2 = u64[2] constant({3, 10})\n"
           "  b = (u64[2], u64[3]) rng-bit-generator(s2), algorithm=rng_default\n"
           "  c = (u64[2], u8[2]) rng-bit-generator(s2), algorithm=rng_philox\n"
           "  ROOT t = ((u64[3], u32[6]), (u64[2], u64[3]), (u64[2], u8[2])) tuple(a, b, c)\n"
           "}\n");
  const kiln_literal_t *a = r.result->tuple_elements[0];
  const kiln_literal_t *b = r.result->tuple_elements[1];
  const kiln_literal_t *c = r.result->tuple_elements[2];
  uint64_t key = 81985529216486895ull; /* 0x0123456789abcdef */
  uint32_t k[2] = {(uint32_t)key, (uint32_t)(key >> 32)}, o[4];
  /* block 0: counter (2^64 - 1, 5); block 1 carries into the high word: (0, 6) */
  kiln_eval_philox4x32(k, (uint32_t[]){0xffffffff, 0xffffffff, 5, 0}, o);
  for (int j = 0; j < 4; j++) assert_int_equal(kiln_literal_get_u64(a->tuple_elements[1], j), o[j]);
  kiln_eval_philox4x32(k, (uint32_t[]){0, 0, 6, 0}, o);
  for (int j = 0; j < 2; j++)
    assert_int_equal(kiln_literal_get_u64(a->tuple_elements[1], 4 + j), o[j]);
  assert_true(kiln_literal_get_u64(a->tuple_elements[0], 0) == key);
  assert_int_equal(kiln_literal_get_u64(a->tuple_elements[0], 1), 1);
  assert_int_equal(kiln_literal_get_u64(a->tuple_elements[0], 2), 6);
  /* 2-word state: counter (state[1], state[0]); rng_default is Philox */
  uint32_t k2[2] = {3, 0};
  for (int blk = 0; blk < 2; blk++) {
    kiln_eval_philox4x32(k2, (uint32_t[]){10 + blk, 0, 3, 0}, o);
    for (int j = 0; j < 2 && 2 * blk + j < 3; j++)
      assert_true(kiln_literal_get_u64(b->tuple_elements[1], 2 * blk + j) ==
                  ((uint64_t)o[2 * j] | ((uint64_t)o[2 * j + 1] << 32)));
  }
  assert_int_equal(kiln_literal_get_u64(b->tuple_elements[0], 0), 3);
  assert_int_equal(kiln_literal_get_u64(b->tuple_elements[0], 1), 12);
  /* u8: the 32-bit words truncated */
  kiln_eval_philox4x32(k2, (uint32_t[]){10, 0, 3, 0}, o);
  assert_int_equal(kiln_literal_get_u64(c->tuple_elements[1], 0), o[0] & 0xff);
  assert_int_equal(kiln_literal_get_u64(c->tuple_elements[1], 1), o[1] & 0xff);
  assert_int_equal(kiln_literal_get_u64(c->tuple_elements[0], 1), 11);
  run_done(&r);
}

/* Evaluates `text` with an rng seed. */
static void run_seeded(run_t *r, const char *text, uint64_t seed) {
  memset(r, 0, sizeof *r);
  kiln_arena_init(&r->arena);
  assert_null(kiln_hlo_parse_module(text, strlen(text), NULL, &r->m));
  kiln_eval_options_t opts = {0};
  opts.rng_seed = seed;
  kiln_status s = kiln_eval_module(r->m, &opts, 0, NULL, &r->arena, &r->result);
  if (s) {
    kiln_status_report(s, "eval");
    fail();
  }
}

static const char *kRngText =
    "HloModule m\n"
    "ENTRY e {\n"
    "  a = f32[] constant(2)\n"
    "  b = f32[] constant(3)\n"
    "  u = f32[1000] rng(a, b), distribution=rng_uniform\n"
    "  lo = s32[] constant(-3)\n"
    "  hi = s32[] constant(4)\n"
    "  i = s32[1000] rng(lo, hi), distribution=rng_uniform\n"
    "  mu = f32[] constant(5)\n"
    "  sd = f32[] constant(1)\n"
    "  n = f32[4000] rng(mu, sd), distribution=rng_normal\n"
    "  ROOT t = (f32[1000], s32[1000], f32[4000]) tuple(u, i, n)\n"
    "}\n";

static void test_rng_uniform_and_normal_ranges_and_determinism(void **state) {
  run_t r1, r2, r3;
  run_seeded(&r1, kRngText, 1);
  run_seeded(&r2, kRngText, 1);
  run_seeded(&r3, kRngText, 2);
  const kiln_literal_t *u = r1.result->tuple_elements[0], *i = r1.result->tuple_elements[1];
  const kiln_literal_t *n = r1.result->tuple_elements[2];
  bool seen[7] = {0};
  for (int k = 0; k < 1000; k++) {
    double v = kiln_literal_get_f64(u, k);
    assert_true(v >= 2 && v < 3);
    int64_t iv = kiln_literal_get_s64(i, k);
    assert_true(iv >= -3 && iv < 4);
    seen[iv + 3] = true;
  }
  for (int k = 0; k < 7; k++) assert_true(seen[k]);
  double sum = 0, sq = 0;
  for (int k = 0; k < 4000; k++) {
    double v = kiln_literal_get_f64(n, k);
    sum += v;
    sq += (v - 5) * (v - 5);
  }
  assert_true(fabs(sum / 4000 - 5) < 0.1);
  assert_true(fabs(sqrt(sq / 4000) - 1) < 0.1);
  assert_true(kiln_literal_equal(r1.result, r2.result));
  assert_false(kiln_literal_equal(r1.result, r3.result));
  run_done(&r1);
  run_done(&r2);
  run_done(&r3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_threefry2x32_20_known_answers),
      cmocka_unit_test(test_philox4x32_10_known_answers),
      cmocka_unit_test(test_rng_bit_generator_three_fry_u32_layout),
      cmocka_unit_test(test_rng_bit_generator_three_fry_odd_split_and_u64),
      cmocka_unit_test(test_rng_bit_generator_philox_counter_and_carry),
      cmocka_unit_test(test_rng_uniform_and_normal_ranges_and_determinism),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
