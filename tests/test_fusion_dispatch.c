/* The fusion dispatcher (fusion_compiler.c): a fusion classified by its hero is emitted with
 * the emitter the hero analysis picks for the whole fusion, as XLA's already-optimized
 * fusions need (a transpose under a concatenate or under slices used to fail with "fusion
 * ... needs the transpose emitter"); the kernel matches the evaluator on the host. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "emitter_test_util.h"

static const char *k_concat_of_transpose =
    "fusion {\n"
    "  p0 = f32[64,128]{1,0} parameter(0)\n"
    "  p1 = f32[128,32]{1,0} parameter(1)\n"
    "  t = f32[128,64]{1,0} transpose(p0), dimensions={1,0}\n"
    "  ROOT c = f32[128,96]{1,0} concatenate(t, p1), dimensions={1}\n"
    "}\n";

static const char *k_slices_of_transpose =
    "fusion {\n"
    "  p0 = f32[64,128]{1,0} parameter(0)\n"
    "  t = f32[128,64]{1,0} transpose(p0), dimensions={1,0}\n"
    "  s0 = f32[64,64]{1,0} slice(t), slice={[0:64], [0:64]}\n"
    "  s1 = f32[64,64]{1,0} slice(t), slice={[64:128], [0:64]}\n"
    "  ROOT r = (f32[64,64]{1,0}, f32[64,64]{1,0}) tuple(s0, s1)\n"
    "}\n";

/* `text`'s hero says transpose, the hero analysis says `want`; the kernel compiles with it
 * and matches the evaluator. */
static void check_rerouted(const char *text, kiln_codegen_emitter_t want) {
  kiln_hlo_module_t *m = emt_parse(text);
  assert_non_null(m);
  const kiln_hlo_instruction_t *hero = NULL;
  assert_int_equal(kiln_codegen_classify(m->entry, &hero), KILN_CODEGEN_EMITTER_TRANSPOSE);
  kiln_codegen_emitter_t kind = KILN_CODEGEN_EMITTER_LOOP;
  kiln_status s = kiln_codegen_choose_emitter(m->entry, &kind);
  if (s) fail_msg("%s", kiln_status_message(s));
  printf("%s: classify %s (hero %s), emitted with %s\n", m->entry->root->name,
         kiln_codegen_emitter_name(KILN_CODEGEN_EMITTER_TRANSPOSE), hero ? hero->name : "?",
         kiln_codegen_emitter_name(kind));
  assert_int_equal(kind, want);
  kiln_codegen_kernel_t k;
  s = kiln_codegen_kernel_emit(m->entry, NULL, &k);
  if (s) fail_msg("%s", kiln_status_message(s));
  kiln_codegen_kernel_free(&k);
  kiln_runner_options_t o;
  kiln_runner_options_init(&o);
  kiln_runner_report_t r;
  s = kiln_runner_check(m->entry, &o, &r);
  if (s) fail_msg("%s", kiln_status_message(s));
  if (r.mismatches) fail_msg("%s", r.first_mismatch);
  assert_true(r.elements > 0);
  kiln_hlo_module_destroy(m);
}

static void test_transpose_under_a_concatenate_takes_the_concatenate_emitter(void **state) {
  (void)state;
  check_rerouted(k_concat_of_transpose, KILN_CODEGEN_EMITTER_CONCATENATE);
}

static void test_transpose_under_slices_takes_the_input_slices_emitter(void **state) {
  (void)state;
  check_rerouted(k_slices_of_transpose, KILN_CODEGEN_EMITTER_INPUT_SLICES);
}

/* Kinds that are not chosen by a hero keep classify's answer. */
static void test_loop_kind_stays_loop(void **state) {
  (void)state;
  kiln_hlo_module_t *m = emt_parse(
      "fusion {\n"
      "  p0 = f32[64,128]{1,0} parameter(0)\n"
      "  ROOT e = f32[64,128]{1,0} exponential(p0)\n"
      "}\n");
  assert_non_null(m);
  kiln_codegen_emitter_t kind = KILN_CODEGEN_EMITTER_SORT;
  assert_null(kiln_codegen_choose_emitter(m->entry, &kind));
  assert_int_equal(kind, KILN_CODEGEN_EMITTER_LOOP);
  kiln_hlo_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_transpose_under_a_concatenate_takes_the_concatenate_emitter),
      cmocka_unit_test(test_transpose_under_slices_takes_the_input_slices_emitter),
      cmocka_unit_test(test_loop_kind_stays_loop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
