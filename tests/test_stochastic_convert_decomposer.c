/* stochastic_convert_decomposer: the expansion evaluates bit-identically to the
 * evaluator's stochastic-convert for every supported operand/result type pair, on inputs
 * that cover the rounding (random bits just below, at and above the scaled fraction), the
 * range edges, infinities, NaN and signed zeros; no stochastic-convert is left; the
 * expansion compiles with the loop emitter; unsupported forms are left alone. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/codegen/fusion_compiler.h"
#include "compiler/codegen/kir_pipeline.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/pass.h"

#define N 512

static kiln_hlo_module_t *module_for(const char *ft, const char *rt, const char *ot) {
  char text[512];
  snprintf(text, sizeof text,
           "HloModule sc\nENTRY main {\n  x = %s[%d] parameter(0)\n  r = %s[%d] parameter(1)\n"
           "  ROOT s = %s[%d] stochastic-convert(x, r)\n}\n",
           ft, N, rt, N, ot, N);
  kiln_hlo_module_t *m = NULL;
  kiln_hlo_parse_options_t po = {0};
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), &po, &m);
  if (s) fail_msg("parse: %s", kiln_status_message(s));
  return m;
}

static uint64_t next(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Inputs: special values first, then values at many scales; random bits either uniform or
 * placed right at the scaled fraction of x (the rounding boundary). */
static void fill(kiln_literal_t *x, kiln_literal_t *r, int rbits, int64_t result_max) {
  uint64_t st = 12345;
  const double special[] = {0.0,
                            -0.0,
                            0.5,
                            -0.5,
                            1.0,
                            -1.0,
                            1.5,
                            -1.5,
                            2.25,
                            -2.75,
                            INFINITY,
                            -INFINITY,
                            NAN,
                            (double)result_max,
                            -(double)result_max,
                            (double)result_max + 1.0,
                            -(double)result_max - 1.0,
                            (double)result_max - 0.5,
                            -(double)result_max - 0.5,
                            -(double)result_max - 0.25,
                            (double)result_max + 0.5,
                            1e30,
                            -1e30};
  int ns = (int)(sizeof special / sizeof special[0]);
  uint64_t rmask = rbits >= 64 ? UINT64_MAX : (UINT64_C(1) << rbits) - 1;
  for (int64_t i = 0; i < N; i++) {
    double v;
    if (i < ns) {
      v = special[i];
    } else {
      double scale = ldexp(1.0, (int)(next(&st) % 70) - 4);
      v = ((double)(next(&st) >> 11) / 9007199254740992.0 - 0.5) * 2 * scale;
    }
    kiln_literal_set_f64(x, i, v);
    double stored = kiln_literal_get_f64(x, i); /* rounded to x's type */
    double a = fabs(stored), frac = isfinite(a) ? a - floor(a) : 0;
    uint64_t bits = next(&st) & rmask;
    uint64_t fixed = isfinite(frac) ? (uint64_t)ldexp(frac, rbits) : 0;
    switch (i % 4) {
      case 1:
        bits = fixed;
        break;
      case 2:
        bits = fixed ? fixed - 1 : 0;
        break;
      case 3:
        bits = (fixed + 1) & rmask;
        break;
      default:
        break;
    }
    kiln_literal_set_s64(r, i, (int64_t)bits);
  }
}

static void check_pair(const char *ft, const char *rt, const char *ot, int rbits, int obits) {
  kiln_hlo_module_t *m = module_for(ft, rt, ot);
  kiln_arena_t a;
  kiln_arena_init(&a);
  kiln_literal_t *args[2] = {kiln_literal_make(&a, m->entry->parameters[0]->shape),
                             kiln_literal_make(&a, m->entry->parameters[1]->shape)};
  int64_t result_max = (int64_t)((obits >= 64 ? UINT64_MAX : (UINT64_C(1) << obits) - 1) >> 1);
  fill(args[0], args[1], rbits, result_max);
  kiln_eval_options_t eo = {0};
  kiln_literal_t *before = NULL, *after = NULL;
  kiln_status s = kiln_eval_module(m, &eo, 2, args, &a, &before);
  if (s) fail_msg("eval before: %s", kiln_status_message(s));
  kiln_pass_options_t po = {.verify = 1};
  s = kiln_pass_run_list(m, "stochastic_convert_decomposer", &po);
  if (s) fail_msg("pass: %s", kiln_status_message(s));
  s = kiln_hlo_module_verify(m);
  if (s) fail_msg("verify: %s", kiln_status_message(s));
  for (size_t i = 0; i < m->entry->instructions.len; i++)
    assert_int_not_equal(m->entry->instructions.data[i]->opcode, KILN_OP_STOCHASTIC_CONVERT);
  s = kiln_eval_module(m, &eo, 2, args, &a, &after);
  if (s) fail_msg("eval after: %s", kiln_status_message(s));
  for (int64_t i = 0; i < N; i++) {
    int64_t want = kiln_literal_get_s64(before, i), got = kiln_literal_get_s64(after, i);
    if (want != got)
      fail_msg("%s/%s -> %s: element %lld: x=%.17g r=%llu: stochastic-convert %lld, expansion %lld",
               ft, rt, ot, (long long)i, kiln_literal_get_f64(args[0], i),
               (unsigned long long)kiln_literal_get_s64(args[1], i), (long long)want,
               (long long)got);
  }
  kiln_arena_destroy(&a);
  kiln_hlo_module_destroy(m);
}

static void test_expansion_matches_the_evaluator(void **state) {
  check_pair("f32", "u32", "s8", 32, 8);
  check_pair("f32", "u32", "s32", 32, 32);
  check_pair("f32", "u32", "s64", 32, 64);
  check_pair("f16", "u16", "s8", 16, 8);
  check_pair("f16", "u16", "s16", 16, 16);
  check_pair("bf16", "u16", "s16", 16, 16);
  check_pair("bf16", "u16", "s32", 16, 32);
  check_pair("f64", "u64", "s32", 64, 32);
  check_pair("f64", "u64", "s64", 64, 64);
}

static void test_expansion_compiles_as_a_loop_fusion(void **state) {
  kiln_hlo_module_t *m = module_for("f32", "u32", "s8");
  kiln_pass_options_t po = {.verify = 1};
  kiln_status s = kiln_pass_run_list(m, "stochastic_convert_decomposer,priority_fusion", &po);
  if (s) fail_msg("passes: %s", kiln_status_message(s));
  const kiln_hlo_instruction_t *f = m->entry->root;
  assert_int_equal(f->opcode, KILN_OP_FUSION);
  kiln_codegen_kernel_t k;
  memset(&k, 0, sizeof k);
  kiln_codegen_compile_options_t co = {0};
  s = kiln_codegen_kernel_emit(kiln_hlo_instruction_called(f, "calls"), &co, &k);
  if (s) fail_msg("emit: %s", kiln_status_message(s));
  kiln_codegen_kernel_free(&k);
  kiln_hlo_module_destroy(m);
}

static void test_unsupported_forms_are_left_alone(void **state) {
  /* random bits narrower than the operand: the evaluator rejects it, so does the pass */
  kiln_hlo_module_t *m = module_for("f32", "u16", "s8");
  bool changed = false;
  kiln_status s = kiln_pass_stochastic_convert_decomposer(m, NULL, &changed);
  assert_null(s);
  assert_false(changed);
  assert_int_equal(m->entry->root->opcode, KILN_OP_STOCHASTIC_CONVERT);
  kiln_hlo_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_expansion_matches_the_evaluator),
      cmocka_unit_test(test_expansion_compiles_as_a_loop_fusion),
      cmocka_unit_test(test_unsupported_forms_are_left_alone),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
