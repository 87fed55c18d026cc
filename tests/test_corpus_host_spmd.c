/* The multi-device modules of the corpus (xla/ and real/: the ones test_corpus_eval_spmd
 * evaluates) compiled once for their world and run on N = replicas x partitions host devices
 * (kiln_device_run_module_spmd: collective thunks, runtime/spmd), every participant on the same
 * fake arguments (a ragged-all-to-all's offsets and sizes: one valid exchange, each
 * participant its own: kiln_fake_args_make_world), each participant's result compared with the SPMD
 * evaluator's (kiln_eval_module_spmd) under the module tolerance (tools/common/compare.h), then the
 * executable serialized and read back run again: the same bits per participant. Prints
 * `ran X / eligible Y`, every failure with its reason and every module left out with its
 * reason (no oracle, custom calls, worlds over 64 participants, cost, invalid on purpose), and
 * fails below the floor. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "runtime/device.h"
#include "tests/collective_test_util.h"
#include "tests/skip_util.h"
#include "tools/common/compare.h"
#include "tools/common/corpus.h"
#include "tools/common/corpus_eval.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"

#define MAX_PARTICIPANTS 64
#define MAX_WHILE 20000
#define MIN_PASS_RATE 0.90
#define MAX_TOTAL_COST 1.2e9
/* Where the corpus is sampled (an ASan build: a Debug evaluator runs ~10x slower). */
#define MAX_TOTAL_COST_SAMPLED 7.0e8

typedef struct {
  kiln_device_t *dev;
  int multi, eligible, ran, round_trips;
  size_t round_trip_bytes;
  kiln_strbuf_t out;
} stats_t;

static double max_total_cost(void) {
  return kiln_corpus_spmd_max_cost(kiln_corpus_sampling() ? MAX_TOTAL_COST_SAMPLED
                                                          : MAX_TOTAL_COST);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fail_with(stats_t *st, const char *name, const char *what, kiln_status s) {
  st->eligible++;
  kiln_strbuf_printf(&st->out, "  FAIL %s: %s: %s: %.500s\n", name, what,
                     kiln_status_code_name(kiln_status_code(s)), kiln_status_message(s));
  kiln_status_free(s);
}

/* Every participant of the host run against the evaluator's; *first_bad: -1 when all match. */
static int compare_all(kiln_literal_t **want, kiln_literal_t **got, int n, char *why, size_t nw) {
  for (int i = 0; i < n; i++) {
    kiln_compare_report_t cr;
    memset(&cr, 0, sizeof cr);
    if (!kiln_compare_literals(want[i], got[i], NULL, &cr)) {
      snprintf(why, nw, "participant %d: %lld of %lld elements differ; first: %s", i,
               (long long)cr.mismatches, (long long)cr.elements, cr.first);
      return i;
    }
  }
  return -1;
}

static void run(stats_t *st, const kiln_hlo_module_t *m, const char *name) {
  int R = 1, P = 1;
  kiln_status s = kiln_eval_spmd_world_size(m, &R, &P);
  if (s) {
    kiln_strbuf_printf(&st->out, "  skip %s: no world: %s\n", name, kiln_status_message(s));
    kiln_status_free(s);
    return;
  }
  if (R * P > MAX_PARTICIPANTS) {
    kiln_strbuf_printf(&st->out, "  skip %s: %d x %d participants (over %d)\n", name, R, P,
                       MAX_PARTICIPANTS);
    return;
  }
  char buf[160];
  if (kiln_corpus_eval_too_costly(m, max_total_cost() / (R * P), buf, sizeof buf)) {
    kiln_strbuf_printf(&st->out, "  skip %s: on %d participants: %s\n", name, R * P, buf);
    return;
  }
  kiln_arena_t args_arena, out_arena;
  kiln_arena_init(&args_arena);
  kiln_arena_init(&out_arena);
  int n = 0;
  bool differ = false; /* per-participant arguments (a ragged-all-to-all's exchange) */
  kiln_literal_t *const *per[MAX_PARTICIPANTS];
  s = kiln_fake_args_make_world(m, NULL, R, P, &args_arena, per, &n, &differ);
  kiln_literal_t *const *args = per[0];
  kiln_literal_t *want[MAX_PARTICIPANTS], *got[MAX_PARTICIPANTS];
  if (s) {
    kiln_strbuf_printf(&st->out, "  skip %s: no fake arguments: %s\n", name,
                       kiln_status_message(s));
    kiln_status_free(s);
    goto done;
  }
  kiln_eval_spmd_options_t o = {
      .num_replicas = R, .num_partitions = P, .timeout_ms = KILN_TEST_COLLECTIVE_TIMEOUT_MS};
  o.base.rng_seed = 42;
  o.base.max_while_iterations = MAX_WHILE;
  double t0 = now_s();
  s = kiln_eval_module_spmd(m, &o, n, per, &out_arena, want);
  double t_eval = now_s() - t0;
  if (s) { /* no oracle: test_corpus_eval_spmd names these */
    kiln_strbuf_printf(&st->out, "  skip %s: the evaluator cannot run it: %s: %.200s\n", name,
                       kiln_status_code_name(kiln_status_code(s)), kiln_status_message(s));
    kiln_status_free(s);
    goto done;
  }
  kiln_device_run_options_t ro;
  memset(&ro, 0, sizeof ro);
  ro.device = st->dev;
  ro.rng_seed = 42;
  ro.max_while_iterations = MAX_WHILE;
  ro.collective_timeout_ms = KILN_TEST_COLLECTIVE_TIMEOUT_MS;
  if (differ) ro.participant_args = per;
  t0 = now_s();
  s = kiln_device_run_module_spmd(m, args, n, R, P, &ro, &out_arena, got, NULL);
  double t_host = now_s() - t0;
  if (s) {
    fail_with(st, name, "host devices", s);
    goto done;
  }
  char why[512];
  if (compare_all(want, got, R * P, why, sizeof why) >= 0) {
    fail_with(st, name, "compare", kiln_status_make(KILN_INTERNAL, "%s", why));
    goto done;
  }
  /* The executable serialized and read back (runtime/executable_serialize.h) runs on the
   * same devices to the same bits as the one compiled. */
  ro.serialize_round_trip = true;
  kiln_literal_t *again[MAX_PARTICIPANTS];
  kiln_device_run_report_t rep;
  s = kiln_device_run_module_spmd(m, args, n, R, P, &ro, &out_arena, again, &rep);
  for (int i = 0; !s && i < R * P; i++)
    if (!kiln_literal_equal(got[i], again[i]))
      s = kiln_status_make(KILN_INTERNAL, "participant %d differs from the compiled executable", i);
  if (s) {
    fail_with(st, name, "after serialize/deserialize", s);
    goto done;
  }
  st->round_trips++;
  st->round_trip_bytes += rep.serialized_bytes;
  st->eligible++;
  st->ran++;
  /* Seconds for the record (never asserted): the evaluator is what bounds the corpus. */
  kiln_strbuf_printf(&st->out,
                     "  ok   %s: %d replicas x %d partitions (evaluator %.2f s, compile and run "
                     "%.2f s)\n",
                     name, R, P, t_eval, t_host);
done:
  kiln_arena_destroy(&out_arena);
  kiln_arena_destroy(&args_arena);
}

static void each_module(void *ctx, kiln_hlo_module_t **m, const char *name, const char *path,
                        int index, kiln_status error) {
  stats_t *st = ctx;
  if (error) return; /* parsing is test_corpus_parse's */
  bool multi;
  const char *skip;
  kiln_corpus_multi_device_module(*m, path, index, &multi, &skip);
  if (!multi) return; /* no collective over several participants: test_corpus_eval's */
  st->multi++;
  if (skip) {
    kiln_strbuf_printf(&st->out, "  skip %s: %s\n", name, skip);
    return;
  }
  if (!kiln_corpus_sampled(name)) return;
  run(st, *m, name);
}

static void test_corpus_multi_device_modules_run_on_host_devices(void **state) {
  (void)state;
  stats_t st = {0};
  kiln_status s = kiln_device_create("host", &st.dev);
  assert_null(s);
  s = kiln_corpus_for_each_whole_module(NULL, each_module, &st);
  kiln_device_destroy(st.dev);
  if (s) {
    printf("SKIP: corpus not readable: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    kiln_strbuf_free(&st.out);
    KILN_SKIPPED();
    return;
  }
  printf("%s", kiln_strbuf_cstr(&st.out));
  printf(
      "corpus multi-device modules on N host devices: ran %d / eligible %d, matching the "
      "SPMD evaluator on every participant (%d multi-device modules in all); %d of them "
      "also ran bit-identically after serialize/deserialize (%zu bytes serialized)\n",
      st.ran, st.eligible, st.multi, st.round_trips, st.round_trip_bytes);
  /* Issue 18 counts every multi-device module of xla/ and real/, not only the eligible ones:
   * the wider ratio, each module left out named above with its reason. */
  if (st.multi)
    printf("of all %d multi-device modules: ran %d (%.1f%%)\n", st.multi, st.ran,
           100.0 * st.ran / st.multi);
  kiln_strbuf_free(&st.out);
  if (st.eligible == 0) return; /* sampled away */
  assert_true(st.ran >= MIN_PASS_RATE * st.eligible);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus_multi_device_modules_run_on_host_devices),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
