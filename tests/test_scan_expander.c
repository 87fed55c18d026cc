/* scan_expander (compiler/passes/scan_expander.c): every form of scan — one or several
 * inputs, outputs and carries, none of either, a reversed walk, an inner scan dimension, a
 * length of 0, complex and pred outputs, a lone non-tuple result — evaluates bit for bit as
 * the original on the reference evaluator once expanded, and compiles and runs on the host
 * (where nothing runs a scan unexpanded) equal to the evaluator. Scans the evaluator rejects
 * are INVALID_ARGUMENT naming the scan and what is wrong, from the pass and the compile. The
 * corpus's scans keep their results through the expander and the whole pipeline. */
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
#include "tests/host_device_fixture.h"
#include "tests/host_run_util.h"

static const kiln_hlo_opcode_t kOps[1] = {KILN_OP_SCAN};

#define ADD_F32 \
  "add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) }\n"

static const char *const kScans[] = {
    /* the corpus's running sum: one input, one carry */
    "HloModule cumsum\n" ADD_F32
    "body { x = f32[] parameter(0)\n c = f32[] parameter(1)\n s = f32[] add(x, c)\n"
    " ROOT t = (f32[], f32[]) tuple(s, s) }\n"
    "ENTRY e { p = f32[10] parameter(0)\n i = f32[] parameter(1)\n"
    " ROOT r = (f32[10], f32[]) scan(p, i), dimensions={0}, num_carries=1, is_associative=true, "
    "to_apply=body }\n",
    /* reversed, along an inner dimension, carry of the slice's shape */
    "HloModule reversed\n"
    "body { x = f32[3,2] parameter(0)\n c = f32[3,2] parameter(1)\n m = f32[3,2] multiply(x, c)\n"
    " s = f32[3,2] add(m, x)\n ROOT t = (f32[3,2], f32[3,2]) tuple(m, s) }\n"
    "ENTRY e { p = f32[3,5,2] parameter(0)\n i = f32[3,2] parameter(1)\n"
    " ROOT r = (f32[3,5,2], f32[3,2]) scan(p, i), dimensions={1}, num_carries=1, is_reverse=true, "
    "to_apply=body }\n",
    /* two inputs, two outputs (one pred), two carries of other types */
    "HloModule several\n"
    "body { x = f32[4] parameter(0)\n k = s32[] parameter(1)\n c = f32[4] parameter(2)\n"
    " n = s32[] parameter(3)\n a = f32[4] add(x, c)\n kf = f32[] convert(k)\n"
    " kb = f32[4] broadcast(kf), dimensions={}\n y = f32[4] multiply(a, kb)\n"
    " z = s32[] constant(0)\n g = pred[] compare(k, z), direction=GT\n n2 = s32[] add(n, k)\n"
    " ROOT t = (f32[4], pred[], f32[4], s32[]) tuple(y, g, a, n2) }\n"
    "ENTRY e { p = f32[6,4] parameter(0)\n q = s32[6] parameter(1)\n c = f32[4] parameter(2)\n"
    " n = s32[] parameter(3)\n"
    " ROOT r = (f32[6,4], pred[6], f32[4], s32[]) scan(p, q, c, n), dimensions={0}, "
    "num_carries=2, to_apply=body }\n",
    /* no carries: a map over the slices */
    "HloModule map\n"
    "body { x = f32[3] parameter(0)\n ROOT t = (f32[3]) tuple(f32[3] negate(x)) }\n"
    "ENTRY e { p = f32[7,3] parameter(0)\n"
    " ROOT r = (f32[7,3]) scan(p), dimensions={0}, num_carries=0, to_apply=body }\n",
    /* no inputs: the length comes from the output */
    "HloModule generate\n"
    "body { c = s32[] parameter(0)\n one = s32[] constant(1)\n n = s32[] add(c, one)\n"
    " sq = s32[] multiply(c, c)\n ROOT t = (s32[], s32[]) tuple(sq, n) }\n"
    "ENTRY e { c = s32[] parameter(0)\n"
    " ROOT r = (s32[5], s32[]) scan(c), dimensions={0}, num_carries=1, to_apply=body }\n",
    /* a length of 0: empty output, the carry as it came */
    "HloModule empty\n"
    "body { x = f32[] parameter(0)\n c = f32[] parameter(1)\n s = f32[] add(x, c)\n"
    " ROOT t = (f32[], f32[]) tuple(s, s) }\n"
    "ENTRY e { p = f32[0] parameter(0)\n i = f32[] parameter(1)\n"
    " ROOT r = (f32[0], f32[]) scan(p, i), dimensions={0}, num_carries=1, to_apply=body }\n",
    /* complex slices written back (not a dynamic-update-slice: kiln_builder_set_slice) */
    "HloModule complex\n"
    "body { x = c64[2] parameter(0)\n c = c64[2] parameter(1)\n m = c64[2] multiply(x, c)\n"
    " ROOT t = (c64[2], c64[2]) tuple(m, x) }\n"
    "ENTRY e { p = c64[4,2] parameter(0)\n i = c64[2] parameter(1)\n"
    " ROOT r = (c64[4,2], c64[2]) scan(p, i), dimensions={0}, num_carries=1, to_apply=body }\n",
    /* one output and no carry: the result is an array, the body returns one */
    "HloModule lone\n"
    "body { x = s32[2] parameter(0)\n ROOT a = s32[2] add(x, x) }\n"
    "ENTRY e { p = s32[2,9] parameter(0)\n"
    " ROOT r = s32[2,9] scan(p), dimensions={1}, num_carries=0, to_apply=body }\n",
};
#define NUM_SCANS (sizeof kScans / sizeof kScans[0])

static void test_every_form_evaluates_bit_for_bit_after_expansion(void **state) {
  (void)state;
  for (size_t i = 0; i < NUM_SCANS; i++) {
    kiln_hlo_module_t *m = pt_parse(kScans[i]);
    kiln_arena_t aa;
    kiln_arena_init(&aa);
    kiln_literal_t **args = NULL;
    int n = 0;
    assert_null(kiln_fake_args_make(m, NULL, &aa, &args, &n));
    double e = et_error_after(m, args, n, "scan_expander", kOps, 1, true);
    if (e != 0) fail_msg("%s: results differ after scan_expander", m->name);
    /* a while loop (none for the empty scan), and no call left: the body is inlined */
    assert_int_equal(pt_count(m, KILN_OP_WHILE), strcmp(m->name, "empty") != 0);
    assert_int_equal(pt_count(m, KILN_OP_CALL), 0);
    kiln_arena_destroy(&aa);
    kiln_hlo_module_destroy(m);
  }
}

static void test_every_form_runs_on_the_host_like_the_evaluator(void **state) {
  (void)state;
  for (size_t i = 0; i < NUM_SCANS; i++) run_and_compare_on(g_dev, kScans[i], 2, NULL);
}

/* Scans the evaluator rejects: the pass and the compile refuse them, naming the scan and what
 * is wrong. */
static const char *const kMalformed[] = {
    /* no num_carries */
    "HloModule m\n" ADD_F32
    "ENTRY e { p = f32[4] parameter(0)\n i = f32[] parameter(1)\n"
    " ROOT r = (f32[4], f32[]) scan(p, i), dimensions={0}, to_apply=add }\n",
    /* the body's parameter is not the slice */
    "HloModule m\n"
    "body { x = f32[2] parameter(0)\n c = f32[] parameter(1)\n ROOT t = (f32[], f32[]) tuple(c, c) "
    "}\n"
    "ENTRY e { p = f32[4] parameter(0)\n i = f32[] parameter(1)\n"
    " ROOT r = (f32[4], f32[]) scan(p, i), dimensions={0}, num_carries=1, to_apply=body }\n",
    /* inputs of different lengths */
    "HloModule m\n"
    "body { x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT t = (f32[]) tuple(x) }\n"
    "ENTRY e { p = f32[4] parameter(0)\n q = f32[5] parameter(1)\n"
    " ROOT r = (f32[4]) scan(p, q), dimensions={0}, num_carries=0, to_apply=body }\n",
    /* a carry the body changes the type of */
    "HloModule m\n"
    "body { x = f32[] parameter(0)\n c = f32[] parameter(1)\n k = s32[] convert(c)\n"
    " ROOT t = (f32[], s32[]) tuple(x, k) }\n"
    "ENTRY e { p = f32[4] parameter(0)\n i = f32[] parameter(1)\n"
    " ROOT r = (f32[4], s32[]) scan(p, i), dimensions={0}, num_carries=1, to_apply=body }\n",
};

static void test_scans_the_evaluator_rejects_are_refused_by_name(void **state) {
  (void)state;
  static const char *const kWhy[] = {"needs num_carries=N", "parameter 0 is not a slice of input 0",
                                     "input 1 has 5 along dimension 0, not 4",
                                     "carry 0 does not keep its shape"};
  for (size_t i = 0; i < sizeof kMalformed / sizeof kMalformed[0]; i++) {
    kiln_hlo_module_t *m = pt_parse(kMalformed[i]);
    bool changed = false;
    kiln_pass_options_t o = {.verify = 0};
    kiln_status s = kiln_pass_scan_expander(m, &o, &changed);
    assert_non_null(s);
    assert_int_equal(kiln_status_code(s), KILN_INVALID_ARGUMENT);
    if (!strstr(kiln_status_message(s), "scan 'r'") || !strstr(kiln_status_message(s), kWhy[i]))
      fail_msg("module %zu: %s", i, kiln_status_message(s));
    kiln_status_free(s);
    kiln_hlo_module_destroy(m);
    m = pt_parse(kMalformed[i]);
    kiln_executable_desc_t *d = NULL;
    kiln_compile_options_t co;
    memset(&co, 0, sizeof co);
    s = kiln_compile_module(m, &co, &d, NULL);
    assert_non_null(s);
    assert_null(d);
    if (!strstr(kiln_status_message(s), kWhy[i]))
      fail_msg("module %zu: %s", i, kiln_status_message(s));
    kiln_status_free(s);
    kiln_hlo_module_destroy(m);
  }
}

static void test_corpus_scans_keep_their_results(void **state) {
  (void)state;
  const char *files[] = {"xla/xla__hlo__translate__hlo_to_mhlo__tests__import.hlo",
                         "xla/xla__hlo__translate__hlo_to_mhlo__tests__frontend_attributes.hlo"};
  int found, compared, rejected;
  et_check_corpus(files, 2, kOps, 1, "scan_expander", true, &found, &compared, &rejected);
  printf("corpus: %d modules with scan, %d compared after the expander and the pipeline\n", found,
         compared);
  assert_int_equal(compared + rejected, found);
  if (found == 2) assert_int_equal(compared, 1); /* import.hlo's module is invalid on purpose */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_form_evaluates_bit_for_bit_after_expansion),
      cmocka_unit_test(test_every_form_runs_on_the_host_like_the_evaluator),
      cmocka_unit_test(test_scans_the_evaluator_rejects_are_refused_by_name),
      cmocka_unit_test(test_corpus_scans_keep_their_results),
  };
  return cmocka_run_group_tests(tests, host_device_setup, host_device_teardown);
}
