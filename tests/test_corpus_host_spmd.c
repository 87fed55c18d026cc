/* The multi-device modules of the corpus (xla/ and real/: the ones test_corpus_eval_spmd
 * evaluates) compiled once for their world and run on N = replicas x partitions host devices
 * (kiln_device_run_module_spmd: collective thunks, runtime/spmd) through
 * kiln_corpus_spmd_run_module (tools/common/corpus_run.h): every participant on the same
 * fake arguments, each participant's result compared with the SPMD evaluator's under the module
 * tolerance, then the executable serialized and read back run again to the same bits. Prints
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

#include "base/status.h"
#include "base/str.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "runtime/device.h"
#include "tests/collective_test_util.h"
#include "tests/skip_util.h"
#include "tools/common/corpus.h"
#include "tools/common/corpus_eval.h"
#include "tools/common/corpus_run.h"

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

static void run(stats_t *st, const kiln_hlo_module_t *m, const char *name) {
  kiln_corpus_spmd_run_t r;
  memset(&r, 0, sizeof r);
  r.device = st->dev;
  r.max_participants = MAX_PARTICIPANTS;
  r.max_cost = max_total_cost();
  r.max_while_iterations = MAX_WHILE;
  r.timeout_ms = KILN_TEST_COLLECTIVE_TIMEOUT_MS;
  r.round_trip = true;
  switch (kiln_corpus_spmd_run_module(m, &r)) {
    case KILN_CORPUS_SPMD_SKIPPED: /* no oracle: test_corpus_eval_spmd names these */
      kiln_strbuf_printf(&st->out, "  skip %s: %s\n", name, r.why);
      return;
    case KILN_CORPUS_SPMD_FAILED:
      st->eligible++;
      kiln_strbuf_printf(&st->out, "  FAIL %s: %s\n", name, r.why);
      return;
    case KILN_CORPUS_SPMD_RAN:
      break;
  }
  st->round_trips++;
  st->round_trip_bytes += r.serialized_bytes;
  st->eligible++;
  st->ran++;
  /* Seconds for the record (never asserted): the evaluator is what bounds the corpus. */
  kiln_strbuf_printf(&st->out,
                     "  ok   %s: %d replicas x %d partitions (evaluator %.2f s, compile and run "
                     "%.2f s)\n",
                     name, r.replicas, r.partitions, r.eval_s, r.host_s);
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
