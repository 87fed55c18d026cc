/* Corpus evaluation: every eligible whole module of the HLO corpus (xla/ and real/) is
 * parsed, verified, given deterministic fake arguments and evaluated by the reference
 * evaluator, then again collecting eagerly (kiln_eval_options_t.collect_eagerly: every value
 * freed once nothing live uses it), which must give the same bits. The test prints
 * `evaluated X / eligible Y`, every failure with its message, every module left out and why,
 * and fails below 95%.
 *
 * A module is not eligible when it
 *   - has a custom-call (its target's semantics are not the evaluator's to know),
 *   - has infeed/outfeed/send/recv (they talk to the host or other devices),
 *   - has a collective with more than one participant in a group: replica_groups with a
 *     group of two or more ({{0,1}}, the iota form [G,S]<=[N] with S > 1, any mesh form),
 *     empty groups with replica_count > 1 (or, with a channel_id, num_partitions > 1), or a
 *     collective-permute whose pairs move data between devices,
 *   - has an elided constant `constant({...})`,
 *   - is too costly to interpret here: more than KILN_CORPUS_MAX_PARAM_ELEMENTS parameter
 *     elements, or an estimated KILN_CORPUS_MAX_COST element-operations (each
 *     instruction's output elements, dot/convolution multiply-adds, reductions' input
 *     elements times their reducer's size, fusions and calls by their bodies, while loops
 *     by their body times the known_trip_count when one is given, else the constant
 *     their condition compares with (`i < N`), else once),
 *   - runs a while loop past KILN_CORPUS_MAX_WHILE iterations on the fake inputs (the
 *     evaluator's RESOURCE_EXHAUSTED; the loop's condition depends on data), or
 *   - is in a file that is invalid on purpose (xla's invalid_concat test input).
 * Each of these is printed with its reason. Parse and verify failures of other files count
 * as failures. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "base/alloc.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/hlo/literal.h"
#include "tools/common/corpus.h"
#include "tools/common/corpus_eval.h"
#include "tools/common/fake_args.h"

#define KILN_CORPUS_MAX_WHILE 20000
#define KILN_CORPUS_MIN_PASS_RATE 0.95

static const char *corpus_dir(void) {
  const char *d = getenv("KILN_CORPUS_DIR");
  return d && *d ? d : KILN_CORPUS_DIR;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- the run ---- */

typedef struct corpus_stats {
  long rate; /* kiln_corpus_sample_rate */
  int eligible, evaluated, skipped, sampled_out;
  kiln_strbuf_t failures, skips;
  double slowest_s[5];
  char slowest_name[5][200];
} corpus_stats_t;

static void note_time(corpus_stats_t *st, const char *name, double s) {
  for (int i = 0; i < 5; i++) {
    if (s > st->slowest_s[i]) {
      for (int j = 4; j > i; j--) {
        st->slowest_s[j] = st->slowest_s[j - 1];
        memcpy(st->slowest_name[j], st->slowest_name[j - 1], sizeof st->slowest_name[j]);
      }
      st->slowest_s[i] = s;
      snprintf(st->slowest_name[i], sizeof st->slowest_name[i], "%s", name);
      return;
    }
  }
}

/* Counts a failure and prints `s` (borrowed: the caller frees it). */
static void record_failure(corpus_stats_t *st, const char *name, const char *what, kiln_status s) {
  st->eligible++;
  const char *msg = kiln_status_message(s);
  kiln_strbuf_printf(&st->failures, "  FAIL %s: %s: %s: %.600s\n", name, what,
                     kiln_status_code_name(kiln_status_code(s)), msg);
}

/* record_failure, then frees `s`. */
static void record_failure_free(corpus_stats_t *st, const char *name, const char *what, kiln_status s) {
  record_failure(st, name, what, s);
  kiln_status_free(s);
}

static void record_skip(corpus_stats_t *st, const char *name, const char *why) {
  st->skipped++;
  kiln_strbuf_printf(&st->skips, "  skip %s: %s\n", name, why);
}

/* KILN_CORPUS_VERBOSE=1 prints each module as it starts (to find a slow one). */
static bool verbose(void) {
  const char *v = getenv("KILN_CORPUS_VERBOSE");
  return v && *v && strcmp(v, "0") != 0;
}

static void run_module(corpus_stats_t *st, const kiln_hlo_module_t *m, const char *name) {
  if (verbose()) fprintf(stderr, "corpus eval: %s\n", name);
  const char *why = kiln_corpus_eval_ineligible_reason(m);
  if (why) {
    record_skip(st, name, why);
    return;
  }
  kiln_status s = kiln_hlo_module_verify(m);
  if (s) {
    record_failure_free(st, name, "verify", s);
    return;
  }
  if (!m->entry) {
    record_failure_free(st, name, "entry",
                   kiln_status_make(KILN_INVALID_ARGUMENT, "no entry computation"));
    return;
  }
  char buf[160];
  /* A Debug ASan build evaluates ~10x slower: a lower bound there keeps the test near a minute. */
  double max_cost = kiln_corpus_under_asan() ? 5e7 : KILN_CORPUS_MAX_COST;
  if ((why = kiln_corpus_eval_too_costly(m, max_cost, buf, sizeof buf)) != NULL) {
    record_skip(st, name, why);
    return;
  }
  kiln_arena_t args_arena, out_arena;
  kiln_arena_init(&args_arena);
  kiln_arena_init(&out_arena);
  kiln_literal_t **args = NULL;
  int n = 0;
  double t0 = now_s();
  s = kiln_fake_args_make(m, NULL, &args_arena, &args, &n);
  if (s) {
    record_failure_free(st, name, "fake args", s);
  } else {
    kiln_eval_options_t eo = {0};
    eo.rng_seed = 42;
    eo.max_while_iterations = KILN_CORPUS_MAX_WHILE;
    kiln_literal_t *result = NULL;
    s = kiln_eval_module(m, &eo, n, args, &out_arena, &result);
    if (s && kiln_status_code(s) == KILN_RESOURCE_EXHAUSTED &&
        strstr(kiln_status_message(s), "while")) {
      snprintf(buf, sizeof buf, "while loop past %d iterations on fake inputs",
               KILN_CORPUS_MAX_WHILE);
      record_skip(st, name, buf);
      kiln_status_free(s);
    } else if (s) {
      record_failure_free(st, name, "eval", s);
    } else if (!result || !kiln_shape_compatible(result->shape, m->entry->root->shape)) {
      char *got = result ? kiln_shape_to_string(result->shape, false) : kiln_strdup("nothing");
      char *want = kiln_shape_to_string(m->entry->root->shape, false);
      record_failure_free(st, name, "eval",
                     kiln_status_make(KILN_INTERNAL, "result is %s, the root is %s", got, want));
      kiln_free(got);
      kiln_free(want);
    } else {
      /* Again with every value freed as soon as nothing live refers to it: the same bits
       * (a value freed too early reads garbage here, and is a use after free under ASan). */
      eo.collect_eagerly = true;
      kiln_literal_t *eager = NULL;
      s = kiln_eval_module(m, &eo, n, args, &out_arena, &eager);
      if (!s && !kiln_literal_equal(result, eager))
        s = kiln_status_make(KILN_INTERNAL, "another result than without");
      if (s) {
        record_failure_free(st, name, "eval collecting eagerly", s);
      } else {
        st->eligible++;
        st->evaluated++;
      }
    }
  }
  note_time(st, name, now_s() - t0);
  kiln_arena_destroy(&out_arena);
  kiln_arena_destroy(&args_arena);
}

/* One module (or one file that does not load) of the shared corpus walk. */
static void corpus_module(void *ctx, kiln_hlo_module_t **m, const char *name, const char *path, int index,
                          kiln_status error) {
  corpus_stats_t *st = ctx;
  if (error) {
    if (strstr(name, "invalid_concat"))
      record_skip(st, name, "invalid on purpose (rejected by the parser or verifier)");
    else
      record_failure(st, name, "parse", error);
    return;
  }
  if (!kiln_corpus_sampled_at(name, st->rate)) {
    st->sampled_out++;
    return;
  }
  const kiln_corpus_invalid_t *known = kiln_corpus_find_invalid(path, index);
  if (known) {
    kiln_status v = kiln_hlo_module_verify(*m);
    if (v) {
      char why[300];
      snprintf(why, sizeof why, "invalid HLO, rejected by the verifier: %s", known->why);
      record_skip(st, name, why);
      kiln_status_free(v);
      return;
    }
  }
  run_module(st, *m, name);
}

static void test_corpus_modules_evaluate_on_fake_inputs(void **state) {
  corpus_stats_t st;
  memset(&st, 0, sizeof st);
  st.rate = kiln_corpus_sample_rate(KILN_CORPUS_ASAN_SAMPLE);
  double t0 = now_s();
  kiln_status walk = kiln_corpus_for_each_whole_module(corpus_dir(), corpus_module, &st);
  if (walk) fail_msg("%s", kiln_status_message(walk));
  double rate = st.eligible ? (double)st.evaluated / st.eligible : 0;
  printf(
      "corpus eval: evaluated %d / eligible %d (%.1f%%), %d not eligible, %d sampled out (one "
      "module in %ld), %.1f s\n",
      st.evaluated, st.eligible, 100 * rate, st.skipped, st.sampled_out, st.rate, now_s() - t0);
  printf("not eligible:\n%s", kiln_strbuf_cstr(&st.skips));
  printf("failures:\n%s", kiln_strbuf_cstr(&st.failures));
  printf("slowest:\n");
  for (int i = 0; i < 5 && st.slowest_s[i] > 0; i++)
    printf("  %.2f s %s\n", st.slowest_s[i], st.slowest_name[i]);
  fflush(stdout);
  kiln_strbuf_free(&st.skips);
  kiln_strbuf_free(&st.failures);
  assert_true(st.eligible > 100 / st.rate);
  assert_true(rate >= KILN_CORPUS_MIN_PASS_RATE);
}

/* The eligibility rules themselves, on small modules. */
static void test_corpus_eligibility_classifies_collectives(void **state) {
  static const struct {
    const char *attrs, *groups;
    bool eligible;
  } cases[] = {
      {"", "replica_groups={{0},{1}}", true},
      {"", "replica_groups={{0,1}}", false},
      {"", "replica_groups=[2,1]<=[2]", true},
      {"", "replica_groups=[1,2]<=[2]", false},
      {"", "replica_groups=[64,2]<=[2,64]T(1,0)", false},
      {"", "replica_groups={}", true},
      {", replica_count=2", "replica_groups={}", false},
      {", replica_count=2", "replica_groups={{0},{1}}", true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char text[1024];
    snprintf(text, sizeof text,
             "HloModule m%s\n"
             "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
             "  ROOT s = f32[] add(x, y)\n}\n"
             "ENTRY main {\n  p = f32[4] parameter(0)\n"
             "  ROOT r = f32[4] all-reduce(p), %s, to_apply=add\n}\n",
             cases[i].attrs, cases[i].groups);
    kiln_hlo_module_t *m = NULL;
    kiln_hlo_parse_options_t po = {0};
    kiln_status s = kiln_hlo_parse_module(text, strlen(text), &po, &m);
    if (s) fail_msg("case %zu: %s", i, kiln_status_message(s));
    const char *why = kiln_corpus_eval_ineligible_reason(m);
    if ((why == NULL) != cases[i].eligible)
      fail_msg("case %zu (%s%s): eligible=%d, reason %s", i, cases[i].groups, cases[i].attrs,
               why == NULL, why ? why : "-");
    kiln_hlo_module_destroy(m);
  }
  assert_false(kiln_corpus_permute_moves_data("{{0,0}}"));
  assert_true(kiln_corpus_permute_moves_data("{{0,1},{1,0}}"));
  assert_int_equal(kiln_corpus_largest_replica_group("{{0,1,2},{3}}"), 3);
  assert_int_equal(kiln_corpus_largest_replica_group("mesh['axis_0'=2] {'axis_0'}"), INT64_MAX);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_corpus_eligibility_classifies_collectives),
      cmocka_unit_test(test_corpus_modules_evaluate_on_fake_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
