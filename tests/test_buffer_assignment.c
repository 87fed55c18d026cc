/* Buffer assignment on small modules: allocation kinds, reuse of dead buffers, in-place
 * reuse, loop state and aliasing; the checker accepts them and rejects corrupted ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "buffer_test_util.h"
#include "compiler/passes/buffer_assignment.h"

static kiln_buffer_assignment_t *assign(kiln_hlo_module_t *m, bool reuse) {
  kiln_buffer_assignment_options_t o = {0};
  o.no_inplace_reuse = !reuse;
  kiln_buffer_assignment_t *ba = NULL;
  kiln_status s = kiln_buffer_assignment_run(m, &o, &ba);
  if (s) fail_msg("buffer assignment: %s", kiln_status_message(s));
  s = kiln_buffer_assignment_check(ba);
  if (s) fail_msg("checker: %s", kiln_status_message(s));
  return ba;
}

static kiln_buffer_slice_t slice_of(const kiln_buffer_assignment_t *ba, const kiln_hlo_module_t *m,
                                    const char *name, int leaf) {
  kiln_hlo_instruction_t *in = kiln_hlo_computation_find(m->entry, name);
  if (!in) fail_msg("no %s", name);
  kiln_buffer_slice_t s;
  assert_true(kiln_buffer_assignment_slice_at(ba, in, leaf, &s));
  return s;
}

/* A chain of 1 KiB temporaries: at most two are live at once, so the heap is 2 KiB. */
static const char *kChain =
    "HloModule chain\n"
    "ENTRY e {\n"
    "  p = f32[256] parameter(0)\n"
    "  a = f32[256] exponential(p)\n"
    "  b = f32[512] concatenate(a, a), dimensions={0}\n"
    "  c = f32[256] slice(b), slice={[0:256]}\n"
    "  d = f32[512] concatenate(c, c), dimensions={0}\n"
    "  e = f32[256] slice(d), slice={[256:512]}\n"
    "  f = f32[512] concatenate(e, e), dimensions={0}\n"
    "  g = f32[256] slice(f), slice={[0:256]}\n"
    "  ROOT r = f32[256] negate(g)\n"
    "}\n";

static void test_allocation_kinds_and_dead_buffer_reuse(void **state) {
  kiln_hlo_module_t *m = bt_parse(kChain);
  bt_run(m, "copy_insertion,schedule");
  kiln_buffer_assignment_t *ba = assign(m, false);
  kiln_buffer_slice_t p = slice_of(ba, m, "p", 0), r = slice_of(ba, m, "r", 0);
  assert_int_equal(ba->allocations[p.allocation].kind, KILN_ALLOCATION_PARAMETER);
  assert_int_equal(ba->allocations[p.allocation].parameter_number, 0);
  assert_true(ba->allocations[p.allocation].read_only);
  assert_int_equal(ba->allocations[r.allocation].kind, KILN_ALLOCATION_OUTPUT);
  assert_int_equal(ba->allocations[r.allocation].output_leaf, 0);
  kiln_buffer_slice_t a = slice_of(ba, m, "a", 0), g = slice_of(ba, m, "g", 0);
  assert_int_equal(ba->allocations[a.allocation].kind, KILN_ALLOCATION_TEMP);
  /* 7 temporaries of 1-2 KiB (sum 10 KiB) packed into the live maximum, 3 KiB. */
  assert_int_equal(ba->stats.temp_sum, 4 * 1024 + 3 * 2048);
  assert_int_equal(ba->stats.temp_lower_bound, 3 * 1024);
  assert_int_equal(ba->stats.temp_bytes, 3 * 1024);
  assert_int_equal(a.allocation, g.allocation);
  kiln_buffer_assignment_free(ba);
  kiln_hlo_module_destroy(m);
}

static void test_elementwise_output_takes_over_dying_operand(void **state) {
  kiln_hlo_module_t *m = bt_parse(
      "HloModule ew\n"
      "ENTRY e {\n"
      "  p = f32[256] parameter(0)\n"
      "  a = f32[256] exponential(p)\n"
      "  b = f32[256] negate(a)\n"
      "  c = f32[256] sqrt(b)\n"
      "  d = f32[256] add(c, p)\n"
      "  ROOT r = f32[256] tanh(d)\n"
      "}\n");
  bt_run(m, "copy_insertion,schedule");
  kiln_buffer_assignment_t *ba = assign(m, true);
  kiln_buffer_slice_t a = slice_of(ba, m, "a", 0), b = slice_of(ba, m, "b", 0),
                      c = slice_of(ba, m, "c", 0), d = slice_of(ba, m, "d", 0);
  assert_int_equal(a.offset, b.offset);
  assert_int_equal(b.offset, c.offset);
  assert_int_equal(c.offset, d.offset);
  assert_int_equal(ba->stats.num_inplace_reuses, 3);
  assert_int_equal(ba->stats.temp_bytes, 1024);
  kiln_buffer_assignment_free(ba);
  /* Without in-place reuse, neighbours cannot share: two slices alternate. */
  ba = assign(m, false);
  assert_int_equal(ba->stats.temp_bytes, 2048);
  kiln_buffer_assignment_free(ba);
  kiln_hlo_module_destroy(m);
}

static void test_no_inplace_reuse_through_transpose(void **state) {
  kiln_hlo_module_t *m = bt_parse(
      "HloModule tr\n"
      "ENTRY e {\n"
      "  p = f32[16,16] parameter(0)\n"
      "  a = f32[16,16] exponential(p)\n"
      "  t = f32[16,16] transpose(a), dimensions={1,0}\n"
      "  ROOT r = f32[16,16] negate(t)\n"
      "}\n");
  bt_run(m, "copy_insertion,schedule");
  kiln_buffer_assignment_t *ba = assign(m, true);
  kiln_buffer_slice_t a = slice_of(ba, m, "a", 0), t = slice_of(ba, m, "t", 0);
  assert_int_not_equal(a.offset, t.offset);
  kiln_buffer_assignment_free(ba);
  kiln_hlo_module_destroy(m);
}

static void test_dus_shares_its_operand_slice(void **state) {
  kiln_hlo_module_t *m = bt_parse(
      "HloModule dus\n"
      "ENTRY e {\n"
      "  p = f32[64] parameter(0)\n"
      "  u = f32[4] parameter(1)\n"
      "  i = s32[] parameter(2)\n"
      "  a = f32[64] exponential(p)\n"
      "  d = f32[64] dynamic-update-slice(a, u, i)\n"
      "  ROOT n = f32[64] negate(d)\n"
      "}\n");
  bt_run(m, "copy_insertion,schedule");
  kiln_buffer_assignment_t *ba = assign(m, true);
  kiln_buffer_slice_t a = slice_of(ba, m, "a", 0), d = slice_of(ba, m, "d", 0);
  assert_int_equal(a.buffer, d.buffer);
  assert_int_equal(a.offset, d.offset);
  kiln_buffer_assignment_free(ba);
  kiln_hlo_module_destroy(m);
}

static void test_missing_copy_is_reported(void **state) {
  /* Without copy insertion the DUS would overwrite `a`, which `n` still reads. */
  kiln_hlo_module_t *m = bt_parse(
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[8] parameter(0)\n"
      "  u = f32[2] parameter(1)\n"
      "  i = s32[] parameter(2)\n"
      "  a = f32[8] add(p, p)\n"
      "  d = f32[8] dynamic-update-slice(a, u, i)\n"
      "  n = f32[8] negate(a)\n"
      "  ROOT t = (f32[8], f32[8]) tuple(d, n)\n"
      "}\n");
  kiln_buffer_assignment_t *ba = NULL;
  kiln_status s = kiln_buffer_assignment_run(m, NULL, &ba);
  assert_non_null(s);
  assert_int_equal(kiln_status_code(s), KILN_FAILED_PRECONDITION);
  assert_non_null(strstr(kiln_status_message(s), "copy_insertion"));
  kiln_status_free(s);
  assert_null(ba);
  bt_run(m, "copy_insertion,schedule");
  ba = assign(m, true);
  kiln_buffer_assignment_free(ba);
  kiln_hlo_module_destroy(m);
}

static void test_checker_rejects_overlapping_live_slices(void **state) {
  kiln_hlo_module_t *m = bt_parse(kChain);
  bt_run(m, "copy_insertion,schedule");
  kiln_buffer_assignment_t *ba = assign(m, false);
  /* b and c are live together (c reads b); move c onto b's slice. */
  kiln_hlo_instruction_t *b = kiln_hlo_computation_find(m->entry, "b");
  kiln_hlo_instruction_t *c = kiln_hlo_computation_find(m->entry, "c");
  kiln_hlo_value_t *vb = kiln_dataflow_value_at(ba->df, b, 0), *vc = kiln_dataflow_value_at(ba->df, c, 0);
  ba->slices[vc->id].offset = ba->slices[vb->id].offset;
  kiln_status s = kiln_buffer_assignment_check(ba);
  assert_non_null(s);
  assert_non_null(strstr(kiln_status_message(s), "overlap"));
  kiln_status_free(s);
  /* A slice past its allocation's end. */
  ba->slices[vc->id].offset = ba->allocations[ba->slices[vc->id].allocation].size;
  s = kiln_buffer_assignment_check(ba);
  assert_non_null(s);
  assert_non_null(strstr(kiln_status_message(s), "does not fit"));
  kiln_status_free(s);
  /* An output moved into the temp allocation. */
  int temp_alloc = ba->slices[vc->id].allocation;
  kiln_buffer_assignment_free(ba);
  ba = assign(m, false);
  kiln_hlo_value_t *vr = kiln_dataflow_value_at(ba->df, m->entry->root, 0);
  ba->slices[vr->id].allocation = temp_alloc;
  ba->slices[vr->id].offset = 0;
  s = kiln_buffer_assignment_check(ba);
  assert_non_null(s);
  kiln_status_free(s);
  kiln_buffer_assignment_free(ba);
  kiln_hlo_module_destroy(m);
}

static void test_print_lists_allocations_slices_and_stats(void **state) {
  kiln_hlo_module_t *m = bt_parse(kChain);
  bt_run(m, "copy_insertion,schedule");
  kiln_buffer_assignment_t *ba = assign(m, true);
  kiln_strbuf_t b = {0};
  kiln_buffer_assignment_print(&b, ba);
  const char *t = kiln_strbuf_cstr(&b);
  assert_non_null(strstr(t, "allocation 0: size 1024, parameter 0{}, read-only:"));
  assert_non_null(strstr(t, "output {}"));
  assert_non_null(strstr(t, ", temp:"));
  assert_non_null(strstr(t, "live ["));
  assert_non_null(strstr(t, "live lower bound 3072"));
  kiln_strbuf_free(&b);
  kiln_buffer_assignment_free(ba);
  kiln_hlo_module_destroy(m);
}

static void test_pass_dumps_assignment(void **state) {
  char dir[] = "/tmp/kiln-ba-dumpXXXXXX";
  assert_non_null(mkdtemp(dir));
  kiln_hlo_module_t *m = bt_parse(kChain);
  kiln_pass_options_t o = {.verify = 1, .dump_dir = dir};
  kiln_status s = kiln_pass_run_list(m, "copy_insertion,schedule,buffer_assignment", &o);
  if (s) fail_msg("%s", kiln_status_message(s));
  char path[256];
  snprintf(path, sizeof path, "%s/chain.buffer-assignment.txt", dir);
  char *text = NULL;
  size_t len = 0;
  s = kiln_read_file(path, &text, &len);
  if (s) fail_msg("%s", kiln_status_message(s));
  assert_non_null(strstr(text, "BufferAssignment for chain"));
  kiln_free(text);
  kiln_hlo_module_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_allocation_kinds_and_dead_buffer_reuse),
      cmocka_unit_test(test_elementwise_output_takes_over_dying_operand),
      cmocka_unit_test(test_no_inplace_reuse_through_transpose),
      cmocka_unit_test(test_dus_shares_its_operand_slice),
      cmocka_unit_test(test_missing_copy_is_reported),
      cmocka_unit_test(test_checker_rejects_overlapping_live_slices),
      cmocka_unit_test(test_print_lists_allocations_slices_and_stats),
      cmocka_unit_test(test_pass_dumps_assignment),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
