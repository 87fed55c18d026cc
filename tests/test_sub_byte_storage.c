/* Sub-byte integers (s2, s4, u2, u4) sit one per byte, the value in the low bits and the
 * high bits zero (compiler/hlo/literal.h): the evaluator's literals, the fake arguments, the
 * compiled kernels' buffers on the host device, and the comparison all use that form, so a
 * compiled result equals the evaluator's byte for byte. Before kernels zero-extended their
 * stores, `s4 -2` came back as 0xfe against the evaluator's 0x0e and kiln-run reported
 * "want -2, got -2" as a mismatch. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "runtime/host/host_device.h"
#include "tools/common/compare.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"
#include "tools/common/run_report.h"

/* Every byte of every sub-byte leaf of `l` has its bits above the element's width clear. */
static void assert_high_bits_clear(const kiln_literal_t *l, const char *what) {
  for (int k = 0; k < kiln_run_report_num_leaves(l); k++) {
    const kiln_literal_t *leaf = kiln_run_report_leaf(l, k);
    if (!leaf || !kiln_shape_is_array(leaf->shape)) continue;
    int bits = kiln_elem_type_bits(leaf->shape->type);
    if (!kiln_elem_type_is_integral(leaf->shape->type) || bits >= 8) continue;
    const unsigned char *p = leaf->data;
    for (int64_t i = 0; i < leaf->num_elements; i++) {
      if ((p[i] >> bits) != 0)
        printf("%s: leaf %d element %lld is byte 0x%02x\n", what, k, (long long)i, p[i]);
      assert_int_equal(p[i] >> bits, 0);
    }
  }
}

/* Runs module `text` on the host device and with the evaluator on the same fake inputs;
 * both results must hold canonical bytes and be equal byte for byte. */
static void run_and_check(kiln_device_t *dev, const char *text) {
  kiln_hlo_module_t *m = NULL;
  kiln_hlo_parse_options_t po = {0};
  assert_null(kiln_hlo_parse_module(text, strlen(text), &po, &m));
  assert_null(kiln_hlo_module_verify(m));
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **args = NULL, *want = NULL, *got = NULL;
  int n = 0;
  assert_null(kiln_fake_args_make(m, NULL, &arena, &args, &n));
  for (int i = 0; i < n; i++) assert_high_bits_clear(args[i], "argument");
  kiln_eval_options_t eo = {0};
  assert_null(kiln_eval_module(m, &eo, n, args, &arena, &want));
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = dev;
  assert_null(kiln_device_run_module(m, args, n, &o, &arena, &got, NULL));
  assert_high_bits_clear(want, m->name);
  assert_high_bits_clear(got, m->name);
  kiln_compare_report_t cr;
  bool same = kiln_compare_literals(want, got, NULL, &cr);
  if (!same) printf("%s: %s\n", m->name, cr.first);
  assert_true(same);
  kiln_arena_destroy(&arena);
  kiln_hlo_module_destroy(m);
}

static void test_compiled_sub_byte_results_equal_the_evaluator_byte_for_byte(void **state) {
  static const char *const modules[] = {
      /* loop/broadcast_constant_s4: a negative constant stored by a kernel */
      "HloModule bcast_s4\nENTRY e {\n  x = s4[] constant(-2)\n"
      "  ROOT b = s4[3] broadcast(x), dimensions={}\n}\n",
      /* a convert to s2 of values in and out of its range */
      "HloModule to_s2\nENTRY e {\n  p = s8[64] parameter(0)\n  ROOT c = s2[64] convert(p)\n}\n",
      /* s4 and u4 results next to a value read back from a sub-byte intermediate */
      "HloModule chain\nENTRY e {\n  p = s4[16,8] parameter(0)\n  q = u4[16,8] parameter(1)\n"
      "  n = s4[16,8] negate(p)\n  t = s4[8,16] transpose(n), dimensions={1,0}\n"
      "  c = s32[8,16] convert(t)\n  z = s32[] constant(0)\n"
      "  r = s32[8] reduce(c, z), dimensions={1}, to_apply=add\n"
      "  u = u4[16,8] add(q, q)\n  ROOT out = (s4[8,16], s32[8], u4[16,8]) tuple(t, r, u)\n}\n"
      "add {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  ROOT s = s32[] add(a, b)\n}\n",
  };
  kiln_device_t *dev = NULL;
  assert_null(kiln_host_device_create(1, &dev));
  for (size_t i = 0; i < sizeof modules / sizeof modules[0]; i++) run_and_check(dev, modules[i]);
  kiln_device_destroy(dev);
}

/* The comparison is exact on the bytes, and says so when the values agree. */
static void test_comparison_names_the_bytes_of_an_equal_sub_byte_value(void **state) {
  kiln_arena_t a;
  kiln_arena_init(&a);
  int64_t dims[1] = {2};
  kiln_literal_t *w = kiln_literal_make(&a, kiln_shape_make_array(&a, KILN_S4, 1, dims));
  kiln_literal_t *g = kiln_literal_make(&a, kiln_shape_make_array(&a, KILN_S4, 1, dims));
  kiln_literal_set_s64(w, 0, -2);
  kiln_literal_set_s64(g, 0, -2);
  assert_int_equal(((unsigned char *)w->data)[0], 0x0e);
  ((unsigned char *)g->data)[0] = 0xfe; /* what a sign-extending store wrote */
  kiln_compare_report_t cr;
  assert_false(kiln_compare_literals(w, g, NULL, &cr));
  assert_non_null(strstr(cr.first, "want -2 (byte 0x0e), got -2 (byte 0xfe)"));
  kiln_arena_destroy(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compiled_sub_byte_results_equal_the_evaluator_byte_for_byte),
      cmocka_unit_test(test_comparison_names_the_bytes_of_an_equal_sub_byte_value),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
