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

/* The operand of an async start is read until its done (the runtime splits the collective
 * across the two): nothing defined in between may take its buffer. */
static void test_async_start_operand_lives_until_its_done(void **state) {
  kiln_hlo_module_t *m = bt_parse(
      "HloModule asyncbuf, replica_count=2\n"
      "red { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }\n"
      "ENTRY e {\n"
      "  p = f32[256] parameter(0)\n"
      "  a = f32[256] exponential(p)\n"
      "  s = f32[256] all-reduce-start(a), replica_groups={{0,1}}, to_apply=red\n"
      "  b = f32[256] negate(p)\n"
      "  c = f32[256] sqrt(b)\n"
      "  d = f32[256] all-reduce-done(s)\n"
      "  ROOT r = f32[256] add(c, d)\n"
      "}\n");
  bt_run(m, "copy_insertion");
  for (int reuse = 0; reuse < 2; reuse++) {
    kiln_buffer_assignment_t *ba = assign(m, reuse);
    kiln_buffer_slice_t a = slice_of(ba, m, "a", 0);
    const char *between[] = {"s", "b", "c"};
    for (int k = 0; k < 3; k++) {
      kiln_buffer_slice_t x = slice_of(ba, m, between[k], 0);
      if (x.allocation == a.allocation && x.offset < a.offset + a.size &&
          a.offset < x.offset + x.size)
        fail_msg("%s shares the all-reduce-start operand's buffer (reuse %d)", between[k], reuse);
    }
    kiln_buffer_assignment_free(ba);
  }
  kiln_hlo_module_destroy(m);
}

/* An async-start's operand part is its operands' own buffers (XLA aliases them), not a
 * buffer of its own nothing writes. */
static void test_async_start_operand_part_aliases_its_operands(void **state) {
  kiln_hlo_module_t *m = bt_parse(
      "HloModule asyncrs, replica_count=2\n"
      "red { x = f32[] parameter(0)  y = f32[] parameter(1)  ROOT s = f32[] add(x, y) }\n"
      "wrapped { w = f32[256] parameter(0)\n"
      "  ROOT rs = f32[128] reduce-scatter(w), replica_groups={{0,1}}, dimensions={0}, "
      "to_apply=red }\n"
      "ENTRY e {\n"
      "  p = f32[256] parameter(0)\n"
      "  a = f32[256] exponential(p)\n"
      "  s = ((f32[256]), f32[128]) async-start(a), calls=wrapped\n"
      "  d = f32[128] async-done(s)\n"
      "  ROOT r = f32[128] negate(d)\n"
      "}\n");
  bt_run(m, "copy_insertion");
  kiln_buffer_assignment_t *ba = assign(m, false);
  kiln_buffer_slice_t a = slice_of(ba, m, "a", 0), s0 = slice_of(ba, m, "s", 0),
                      s1 = slice_of(ba, m, "s", 1);
  assert_int_equal(s0.allocation, a.allocation);
  assert_int_equal(s0.offset, a.offset);
  assert_true(s1.allocation != a.allocation || s1.offset >= a.offset + a.size ||
              a.offset >= s1.offset + s1.size);
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

/* Many temps of mixed sizes whose lifetimes overlap in a tangled way (each value is read
 * back by a reduce at a pseudo-random later point): the decreasing-size best fit, which
 * finds the placed items overlapping each item through an index, must give the heap size
 * (and, when it is the one kept, the offsets) of the plain quadratic search below. */
typedef struct oracle_item {
  int64_t start, end, size, offset;
  int buffer;
} oracle_item_t;

static int cmp_oracle_size(const void *pa, const void *pb) {
  const oracle_item_t *a = pa, *b = pb;
  if (a->size != b->size) return a->size > b->size ? -1 : 1;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  return a->buffer - b->buffer;
}

static int64_t oracle_best_fit_size(oracle_item_t *it, int n) {
  qsort(it, (size_t)n, sizeof *it, cmp_oracle_size);
  int64_t top = 0;
  int64_t *offs = calloc((size_t)n + 1, sizeof(int64_t)),
          *ends = calloc((size_t)n + 1, sizeof(int64_t));
  for (int k = 0; k < n; k++) {
    int nb = 0;
    for (int j = 0; j < k; j++) {
      if (it[j].start > it[k].end || it[k].start > it[j].end) continue;
      int pos = nb++; /* insertion by offset */
      while (pos > 0 && offs[pos - 1] > it[j].offset)
        offs[pos] = offs[pos - 1], ends[pos] = ends[pos - 1], pos--;
      offs[pos] = it[j].offset, ends[pos] = it[j].offset + it[j].size;
    }
    int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
    for (int b = 0; b < nb; b++) {
      int64_t gap = offs[b] - cursor;
      if (gap >= it[k].size && gap < best_gap) best_gap = gap, best = cursor;
      if (ends[b] > cursor) cursor = ends[b];
    }
    it[k].offset = best < 0 ? cursor : best;
    if (it[k].offset + it[k].size > top) top = it[k].offset + it[k].size;
  }
  free(offs);
  free(ends);
  return top;
}

static void test_size_best_fit_matches_quadratic_search_on_tangled_lifetimes(void **state) {
  enum { kValues = 300 };
  kiln_strbuf_t t = {0};
  kiln_strbuf_append(
      &t,
      "HloModule tangled\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
      "  ROOT r = f32[] add(a, b)\n}\nENTRY e {\n  p = f32[4096] parameter(0)\n"
      "  zero = f32[] constant(0)\n");
  int due[kValues]; /* step at which value i is read back */
  uint32_t rng = 12345;
  int acc = -1, nacc = 0;
  for (int i = 0; i < kValues; i++) {
    rng = rng * 1103515245u + 12345u;
    int len = 16 << ((rng >> 16) % 7); /* 64 B .. 4 KiB */
    kiln_strbuf_printf(&t, "  s%d = f32[%d] slice(p), slice={[%d:%d]}\n", i, len, i % 7,
                       i % 7 + len);
    kiln_strbuf_printf(&t, "  e%d = f32[%d] exponential(s%d)\n", i, len, i);
    /* Born where e%d dies, and larger: placed first, it must be seen when e%d is. */
    kiln_strbuf_printf(&t, "  v%d = f32[%d] concatenate(e%d, e%d), dimensions={0}\n", i, 2 * len, i,
                       i);
    rng = rng * 1103515245u + 12345u;
    due[i] = i + 1 + (int)((rng >> 16) % 40);
    for (int j = 0; j <= i; j++) {
      if (due[j] != i) continue;
      kiln_strbuf_printf(&t, "  r%d = f32[] reduce(v%d, zero), dimensions={0}, to_apply=add\n", j,
                         j);
      if (acc < 0)
        kiln_strbuf_printf(&t, "  acc%d = f32[] add(r%d, zero)\n", nacc, j);
      else
        kiln_strbuf_printf(&t, "  acc%d = f32[] add(acc%d, r%d)\n", nacc, acc, j);
      acc = nacc++;
    }
  }
  for (int j = 0; j < kValues; j++) {
    if (due[j] < kValues) continue;
    kiln_strbuf_printf(&t, "  r%d = f32[] reduce(v%d, zero), dimensions={0}, to_apply=add\n", j, j);
    kiln_strbuf_printf(&t, "  acc%d = f32[] add(acc%d, r%d)\n", nacc, acc, j);
    acc = nacc++;
  }
  kiln_strbuf_printf(&t, "  ROOT out = f32[] negate(acc%d)\n}\n", acc);
  kiln_hlo_module_t *m = bt_parse(kiln_strbuf_cstr(&t));
  kiln_strbuf_free(&t);
  bt_run(m, "copy_insertion");
  kiln_buffer_assignment_t *ba = assign(m, false);
  oracle_item_t *items = calloc((size_t)ba->num_buffers + 1, sizeof *items);
  int n = 0;
  for (int b = 0; b < ba->num_buffers; b++) {
    const kiln_logical_buffer_t *lb = &ba->buffers[b];
    if (ba->allocations[lb->allocation].kind != KILN_ALLOCATION_TEMP || lb->size == 0) continue;
    int64_t a = ba->alignment;
    items[n++] = (oracle_item_t){lb->start, lb->end, (lb->size + a - 1) / a * a, 0, b};
  }
  assert_true(n > 2 * kValues);
  int64_t want = oracle_best_fit_size(items, n);
  assert_int_equal(ba->stats.heap_best_fit_size, want);
  if (!strcmp(ba->stats.heap_algorithm, "decreasing-size best-fit"))
    for (int i = 0; i < n; i++)
      assert_int_equal(ba->buffers[items[i].buffer].offset, items[i].offset);
  free(items);
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
      cmocka_unit_test(test_async_start_operand_lives_until_its_done),
      cmocka_unit_test(test_async_start_operand_part_aliases_its_operands),
      cmocka_unit_test(test_dus_shares_its_operand_slice),
      cmocka_unit_test(test_missing_copy_is_reported),
      cmocka_unit_test(test_checker_rejects_overlapping_live_slices),
      cmocka_unit_test(test_size_best_fit_matches_quadratic_search_on_tangled_lifetimes),
      cmocka_unit_test(test_print_lists_allocations_slices_and_stats),
      cmocka_unit_test(test_pass_dumps_assignment),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
