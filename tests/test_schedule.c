/* Scheduling: control dependencies are respected, the memory-aware schedulers beat a bad
 * textual order, and every corpus module gets a valid topological schedule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "buffer_test_util.h"
#include "compiler/passes/schedule.h"

static int position(const kiln_hlo_computation_t *c, const char *name) {
  for (size_t i = 0; i < c->instructions.len; i++)
    if (strcmp(c->instructions.data[i]->name, name) == 0) return (int)i;
  fail_msg("no instruction %s", name);
  return -1;
}

/* `big` would be scheduled late by a memory-minimizing scheduler (it allocates and frees
 * nothing early), but a control edge forces it before `small`. */
static const char *kControl =
    "HloModule m\n"
    "add {\n"
    "  x = f32[] parameter(0)\n"
    "  y = f32[] parameter(1)\n"
    "  ROOT z = f32[] add(x, y)\n"
    "}\n"
    "ENTRY e {\n"
    "  p = f32[16] parameter(0)\n"
    "  q = f32[] parameter(1)\n"
    "  b = f32[1024] broadcast(q), dimensions={}\n"
    "  big = f32[1024] exponential(b)\n"
    "  s = f32[4] slice(p), slice={[0:4]}\n"
    "  small = f32[4] negate(s), control-predecessors={big}\n"
    "  r = f32[] constant(0)\n"
    "  red = f32[] reduce(big, r), dimensions={0}, to_apply=add\n"
    "  ROOT t = (f32[4], f32[]) tuple(small, red)\n"
    "}\n";

static void test_control_dependencies_respected_by_every_scheduler(void **state) {
  for (int k = KILN_SCHEDULER_BEST; k < KILN_SCHEDULER_COUNT; k++) {
    kiln_hlo_module_t *m = bt_parse(kControl);
    kiln_status s;
    s = kiln_schedule_module(m, (kiln_scheduler_t)k, NULL, NULL);
    if (s) fail_msg("%s: %s", kiln_scheduler_name((kiln_scheduler_t)k), kiln_status_message(s));
    assert_null(kiln_schedule_verify(m));
    assert_true(position(m->entry, "big") < position(m->entry, "small"));
    assert_true(position(m->entry, "b") < position(m->entry, "big"));
    kiln_hlo_module_destroy(m);
  }
}

/* Four 4 MiB broadcasts, each reduced to a scalar; the text computes every broadcast first
 * (16 MiB live), a good schedule reduces each one right after it is made (~4-8 MiB). */
static const char *kWide =
    "HloModule wide\n"
    "add {\n"
    "  x = f32[] parameter(0)\n"
    "  y = f32[] parameter(1)\n"
    "  ROOT z = f32[] add(x, y)\n"
    "}\n"
    "ENTRY e {\n"
    "  p = f32[] parameter(0)\n"
    "  z = f32[] constant(0)\n"
    "  b0 = f32[1048576] broadcast(p), dimensions={}\n"
    "  b1 = f32[1048576] broadcast(p), dimensions={}\n"
    "  b2 = f32[1048576] broadcast(p), dimensions={}\n"
    "  b3 = f32[1048576] broadcast(p), dimensions={}\n"
    "  e0 = f32[1048576] exponential(b0)\n"
    "  e1 = f32[1048576] exponential(b1)\n"
    "  e2 = f32[1048576] exponential(b2)\n"
    "  e3 = f32[1048576] exponential(b3)\n"
    "  r0 = f32[] reduce(e0, z), dimensions={0}, to_apply=add\n"
    "  r1 = f32[] reduce(e1, z), dimensions={0}, to_apply=add\n"
    "  r2 = f32[] reduce(e2, z), dimensions={0}, to_apply=add\n"
    "  r3 = f32[] reduce(e3, z), dimensions={0}, to_apply=add\n"
    "  ROOT t = (f32[], f32[], f32[], f32[]) tuple(r0, r1, r2, r3)\n"
    "}\n";

static void test_memory_aware_schedule_beats_textual_order(void **state) {
  const int64_t mib = 1 << 20;
  for (int k = KILN_SCHEDULER_BEST; k < KILN_SCHEDULER_COUNT; k++) {
    kiln_hlo_module_t *m = bt_parse(kWide);
    int64_t naive = 0, after = 0;
    assert_null(kiln_schedule_peak_memory(m, &naive));
    kiln_schedule_stats_t st;
    kiln_status s = kiln_schedule_module(m, (kiln_scheduler_t)k, &st, NULL);
    if (s) fail_msg("%s", kiln_status_message(s));
    assert_null(kiln_schedule_verify(m));
    assert_null(kiln_hlo_module_verify(m));
    assert_null(kiln_schedule_peak_memory(m, &after));
    assert_int_equal(after, st.peak_bytes);
    printf("  %-8s peak %.1f MiB (textual order %.1f MiB)\n", kiln_scheduler_name((kiln_scheduler_t)k),
           (double)after / (double)mib, (double)naive / (double)mib);
    assert_true(naive >= 20 * mib); /* 4 broadcasts + exponentials, 2 of them at a time */
    if (k == KILN_SCHEDULER_CURRENT) assert_int_equal(after, naive);
    else assert_true(after < 9 * mib); /* one broadcast and its exponential */
    kiln_hlo_module_destroy(m);
  }
}

static void test_schedule_pass_sets_is_scheduled_and_keeps_semantics(void **state) {
  kiln_hlo_module_t *m = bt_parse(kWide);
  bt_check_semantics(m, "schedule");
  bool found = false;
  for (int i = 0; i < m->num_raw_attrs; i++)
    if (!strcmp(m->raw_attrs[i].key, "is_scheduled")) found = !strcmp(m->raw_attrs[i].value, "true");
  assert_true(found);
  char *text = kiln_hlo_module_to_string(m);
  assert_non_null(strstr(text, "is_scheduled=true"));
  kiln_free(text);
  kiln_hlo_module_destroy(m);
}

static void test_schedule_verify_names_bad_order(void **state) {
  kiln_hlo_module_t *m = bt_parse(kWide);
  /* Swap r0 before e0. */
  kiln_hlo_computation_t *c = m->entry;
  int a = position(c, "e0"), b = position(c, "r0");
  kiln_hlo_instruction_t *t = c->instructions.data[a];
  c->instructions.data[a] = c->instructions.data[b];
  c->instructions.data[b] = t;
  kiln_status s = kiln_schedule_verify(m);
  assert_non_null(s);
  assert_non_null(strstr(kiln_status_message(s), "r0"));
  kiln_status_free(s);
  kiln_hlo_module_destroy(m);
}

/* ---- corpus ---- */

typedef struct corpus_ctx {
  int scheduled, skipped, failed, flatten_too_big;
  int wins[KILN_SCHEDULER_COUNT];
  double naive_total, best_total;
  kiln_strbuf_t failures;
} corpus_ctx_t;

static void corpus_one(void *vctx, kiln_hlo_module_t *m, const char *label) {
  corpus_ctx_t *ctx = vctx;
  if (!m || !m->entry) {
    ctx->skipped++;
    return;
  }
  kiln_status s = kiln_hlo_module_verify(m);
  if (s) {
    kiln_status_free(s);
    ctx->skipped++;
    return;
  }
  kiln_pass_options_t o = {.verify = 0};
  s = kiln_pass_run_list(m, "copy_insertion", &o);
  if (s && kiln_status_code(s) == KILN_RESOURCE_EXHAUSTED) {
    kiln_status_free(s);
    ctx->flatten_too_big++;
    return;
  }
  int64_t before = 0;
  if (!s) s = kiln_schedule_peak_memory(m, &before);
  kiln_schedule_stats_t st;
  if (!s) s = kiln_schedule_module(m, KILN_SCHEDULER_BEST, &st, NULL);
  if (!s) s = kiln_schedule_verify(m);
  if (!s) s = kiln_hlo_module_verify(m);
  if (s) {
    ctx->failed++;
    kiln_strbuf_printf(&ctx->failures, "  FAIL %s: %.400s\n", label, kiln_status_message(s));
    kiln_status_free(s);
    return;
  }
  ctx->scheduled++;
  for (int k = 0; k < KILN_SCHEDULER_COUNT; k++) ctx->wins[k] += st.chosen_count[k];
  ctx->naive_total += (double)before;
  ctx->best_total += (double)st.peak_bytes;
  assert_true(st.peak_bytes <= before);
}

static void test_corpus_every_module_schedules_validly(void **state) {
  corpus_ctx_t ctx = {0};
  bt_for_each_corpus_module(corpus_one, &ctx);
  printf("schedule on the corpus: %d modules scheduled (valid topological orders), %d failed, %d "
         "not verifiable, %d too big to flatten; computations won by current/list/dfs: %d/%d/%d; "
         "sum of entry peaks %.4g bytes (post-order %.4g, %.1f%% less)\n%s",
         ctx.scheduled, ctx.failed, ctx.skipped, ctx.flatten_too_big, ctx.wins[KILN_SCHEDULER_CURRENT],
         ctx.wins[KILN_SCHEDULER_LIST], ctx.wins[KILN_SCHEDULER_DFS], ctx.best_total, ctx.naive_total,
         ctx.naive_total > 0 ? 100.0 * (1 - ctx.best_total / ctx.naive_total) : 0.0,
         kiln_strbuf_cstr(&ctx.failures));
  kiln_strbuf_free(&ctx.failures);
  assert_int_equal(ctx.failed, 0);
  assert_true(ctx.scheduled > 400);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_control_dependencies_respected_by_every_scheduler),
      cmocka_unit_test(test_memory_aware_schedule_beats_textual_order),
      cmocka_unit_test(test_schedule_pass_sets_is_scheduled_and_keeps_semantics),
      cmocka_unit_test(test_schedule_verify_names_bad_order),
      cmocka_unit_test(test_corpus_every_module_schedules_validly),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
