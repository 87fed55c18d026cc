/* The multi-device modules of the corpus (xla/ and real/: a collective with more than one
 * participant) evaluated on several participants (kiln_eval_module_spmd), each on the world
 * its groups need (kiln_eval_spmd_world_size), every participant on the same fake
 * arguments (a ragged-all-to-all's offsets and sizes: each participant its own share of one
 * valid exchange, kiln_fake_args_make_world), then again collecting eagerly, which must give
 * the same bits. Prints `evaluated X / eligible Y`, every failure and
 * every module left out with its reason (custom calls, send/recv, elided constants, cost, worlds
 * over 64 participants, invalid on purpose), and fails below the floor. Before this evaluator none
 * of them ran. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "tests/collective_test_util.h"
#include "tests/skip_util.h"
#include "tools/common/corpus.h"
#include "tools/common/corpus_eval.h"
#include "tools/common/fake_args.h"

#define MAX_PARTICIPANTS 64
#define MAX_WHILE 20000
#define MIN_PASS_RATE 0.90
/* Evaluating costs about the participants' total, so a tighter bound than test_corpus_eval. */
#define MAX_TOTAL_COST 1.2e9
/* Where the corpus is sampled (an ASan build: a Debug evaluator runs ~10x slower). */
#define MAX_TOTAL_COST_SAMPLED 7.0e8

typedef struct {
  int multi, eligible, evaluated;
  kiln_strbuf_t out;
} stats_t;

static double max_total_cost(void) {
  return kiln_corpus_spmd_max_cost(kiln_corpus_sampling() ? MAX_TOTAL_COST_SAMPLED
                                                          : MAX_TOTAL_COST);
}

static void fail_with(stats_t *st, const char *name, const char *what, kiln_status s) {
  st->eligible++;
  kiln_strbuf_printf(&st->out, "  FAIL %s: %s: %s: %.500s\n", name, what,
                     kiln_status_code_name(kiln_status_code(s)), kiln_status_message(s));
  kiln_status_free(s);
}

static void run(stats_t *st, const kiln_hlo_module_t *m, const char *name) {
  int R = 1, P = 1;
  kiln_status s = kiln_eval_spmd_world_size(m, &R, &P);
  if (s) {
    fail_with(st, name, "world size", s);
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
  bool differ = false;
  kiln_literal_t *const *per[MAX_PARTICIPANTS];
  s = kiln_fake_args_make_world(m, NULL, R, P, &args_arena, per, &n, &differ);
  if (s) {
    fail_with(st, name, "fake args", s);
  } else {
    kiln_literal_t *results[MAX_PARTICIPANTS];
    kiln_eval_spmd_options_t o = {
        .num_replicas = R, .num_partitions = P, .timeout_ms = KILN_TEST_COLLECTIVE_TIMEOUT_MS};
    o.base.rng_seed = 42;
    o.base.max_while_iterations = MAX_WHILE;
    s = kiln_eval_module_spmd(m, &o, n, per, &out_arena, results);
    if (s && kiln_status_code(s) == KILN_RESOURCE_EXHAUSTED &&
        strstr(kiln_status_message(s), "while")) {
      kiln_strbuf_printf(&st->out, "  skip %s: while loop past %d iterations\n", name, MAX_WHILE);
      kiln_status_free(s);
    } else if (s) {
      fail_with(st, name, "eval", s);
    } else {
      /* Again with every value freed as soon as nothing live refers to it (a participant also
       * frees before it waits at a collective): the same bits on every participant. */
      kiln_literal_t *eager[MAX_PARTICIPANTS];
      o.base.collect_eagerly = true;
      s = kiln_eval_module_spmd(m, &o, n, per, &out_arena, eager);
      for (int i = 0; i < R * P && !s; i++)
        if (!kiln_literal_equal(results[i], eager[i]))
          s = kiln_status_make(KILN_INTERNAL, "participant %d: another result than without", i);
      if (s) {
        fail_with(st, name, "eval collecting eagerly", s);
      } else {
        st->eligible++;
        st->evaluated++;
        kiln_strbuf_printf(&st->out, "  ok   %s: %d replicas x %d partitions\n", name, R, P);
      }
    }
  }
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

static void test_corpus_multi_device_modules_evaluate_on_several_participants(void **state) {
  (void)state;
  stats_t st = {0};
  kiln_status s = kiln_corpus_for_each_whole_module(NULL, each_module, &st);
  if (s) {
    printf("SKIP: corpus not readable: %s\n", kiln_status_message(s));
    kiln_status_free(s);
    kiln_strbuf_free(&st.out);
    KILN_SKIPPED();
    return;
  }
  printf("%s", kiln_strbuf_cstr(&st.out));
  printf(
      "corpus multi-device modules on several participants: evaluated %d / eligible %d "
      "(%d multi-device modules with a collective over several participants or left out)\n",
      st.evaluated, st.eligible, st.multi);
  kiln_strbuf_free(&st.out);
  if (st.eligible == 0) return; /* sampled away */
  assert_true(st.evaluated >= MIN_PASS_RATE * st.eligible);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus_multi_device_modules_evaluate_on_several_participants),
  };
  return kiln_run_tests(tests, NULL, NULL);
}
