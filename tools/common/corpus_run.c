/* The corpus end to end on a device (corpus_run.h). */
#include "tools/common/corpus_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/eval/eval.h"
#include "tools/common/compare.h"
#include "tools/common/corpus.h"
#include "tools/common/corpus_eval.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"
#include "tools/common/hlo_file.h"

/* Under ASan (a Debug build, several times slower) about one module in
 * KILN_CORPUS_RUN_ASAN_SAMPLE runs unless KILN_CORPUS_SAMPLE says otherwise. */
static bool sampled(const char *name) {
  return kiln_corpus_sampled_at(name, kiln_corpus_sample_rate(KILN_CORPUS_RUN_ASAN_SAMPLE));
}

typedef struct run_ctx {
  kiln_device_t *dev;
  bool verbose;
  bool compile_costly; /* compile (not skip) a module too costly to evaluate */
  kiln_corpus_run_stats_t *st;
  kiln_corpus_repeats_t run; /* the modules run */
} run_ctx_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void note_skip(kiln_corpus_run_stats_t *st, const char *name, const char *why) {
  st->skipped++;
  kiln_strbuf_printf(&st->skips, "  %s: %s\n", name, why);
}

static void note_fail(kiln_corpus_run_stats_t *st, const char *name, const char *what, const char *why) {
  kiln_strbuf_printf(&st->failures, "  %s: %s: %.400s\n", name, what, why);
}

/* A module too costly to run here: compiled and loaded on the device, nothing run. */
static void compile_only(run_ctx_t *rc, const kiln_hlo_module_t *m, const char *name) {
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = rc->dev;
  o.compile_only = true;
  kiln_device_run_report_t rep;
  kiln_literal_t *got = NULL;
  kiln_status s = kiln_device_run_module(m, NULL, 0, &o, NULL, &got, &rep);
  rc->st->compile_ms += rep.compile_ms;
  if (s) {
    rc->st->eligible++;
    note_fail(rc->st, name, kiln_status_code_name(kiln_status_code(s)), kiln_status_message(s));
    kiln_status_free(s);
    return;
  }
  rc->st->compiled_only++;
  kiln_strbuf_printf(&rc->st->skips, "  %s: too costly to run here: compiled and loaded only\n",
                     name);
}

static void run_one(void *ctx, kiln_hlo_module_t **mp, const char *name, const char *path,
                    int index, kiln_status error) {
  run_ctx_t *rc = ctx;
  kiln_corpus_run_stats_t *st = rc->st;
  if (!mp) {
    if (!strstr(path, "invalid_concat")) {
      st->eligible++;
      note_fail(st, name, "parse", kiln_status_message(error));
    }
    return;
  }
  kiln_hlo_module_t *m = *mp;
  if (!sampled(name)) {
    st->sampled_out++;
    return;
  }
  if (kiln_corpus_find_invalid(path, index)) return note_skip(st, name, "invalid HLO (known)");
  const char *why = kiln_corpus_eval_ineligible_reason(m);
  if (why) return note_skip(st, name, why);
  char buf[200];
  if (!m->entry) return note_skip(st, name, "no entry computation");
  if ((why = kiln_corpus_eval_too_costly(m, KILN_CORPUS_MAX_COST, buf, sizeof buf)) != NULL) {
    if (!rc->compile_costly) return note_skip(st, name, why);
    return compile_only(rc, m, name);
  }
  kiln_status v = kiln_hlo_module_verify(m);
  if (v) {
    note_skip(st, name, "does not verify");
    kiln_status_free(v);
    return;
  }
  const char *first = kiln_corpus_repeat_of(&rc->run, m, name);
  if (first) {
    st->repeats++;
    kiln_strbuf_printf(&st->skips, "  %s: same module as %s (run once)\n", name, first);
    return;
  }
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t **args = NULL;
  int n = 0;
  kiln_status s = kiln_fake_args_make(m, NULL, &arena, &args, &n);
  kiln_literal_t *want = NULL;
  if (!s) {
    kiln_eval_options_t eo = {0};
    eo.rng_seed = 42;
    eo.max_while_iterations = KILN_CORPUS_RUN_MAX_WHILE;
    s = kiln_eval_module(m, &eo, n, args, &arena, &want);
  }
  if (s) {
    note_skip(st, name, kiln_status_message(s));
    kiln_status_free(s);
    kiln_arena_destroy(&arena);
    return;
  }
  st->eligible++;
  if (rc->verbose) fprintf(stderr, "e2e: %s\n", name);
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = rc->dev;
  o.max_while_iterations = KILN_CORPUS_RUN_MAX_WHILE;
  o.rng_seed = 42; /* the evaluator's seed above */
  kiln_device_run_report_t rep;
  kiln_literal_t *got = NULL;
  s = kiln_device_run_module(m, args, n, &o, &arena, &got, &rep);
  st->compile_ms += rep.compile_ms;
  st->run_ms += rep.run_min_ms;
  if (s) {
    note_fail(st, name, kiln_status_code_name(kiln_status_code(s)), kiln_status_message(s));
    kiln_status_free(s);
  } else {
    kiln_compare_report_t cr;
    if (kiln_compare_literals(want, got, NULL, &cr)) {
      st->passed++;
    } else {
      char msg[400];
      snprintf(msg, sizeof msg, "%lld of %lld elements differ; %.320s", (long long)cr.mismatches,
               (long long)cr.elements, cr.first);
      note_fail(st, name, "MISMATCH", msg);
    }
  }
  kiln_arena_destroy(&arena);
}

kiln_status kiln_corpus_run_on_device(kiln_device_t *dev, const char *root, bool verbose,
                                      kiln_corpus_run_stats_t *st) {
  memset(st, 0, sizeof(*st));
  if (!dev) return KILN_ERR_INVALID("corpus run: no device");
  if (!root || !*root) root = kiln_corpus_dir();
  run_ctx_t rc = {dev, verbose, false, st, {{0}}};
  kiln_corpus_repeats_init(&rc.run);
  double t0 = now_s();
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/xla", root);
  kiln_status s = kiln_corpus_for_each_module(dir, "xla", run_one, &rc);
  snprintf(dir, sizeof dir, "%s/real", root);
  if (!s) s = kiln_corpus_for_each_module(dir, "real", run_one, &rc);
  kiln_corpus_repeats_free(&rc.run);
  st->seconds = now_s() - t0;
  return s;
}

kiln_status kiln_corpus_run_emitters_on_device(kiln_device_t *dev, const char *root, bool verbose,
                                               kiln_corpus_run_stats_t *st) {
  memset(st, 0, sizeof(*st));
  if (!dev) return KILN_ERR_INVALID("corpus run: no device");
  if (!root || !*root) root = kiln_corpus_dir();
  run_ctx_t rc = {dev, verbose, true, st, {{0}}};
  kiln_corpus_repeats_init(&rc.run);
  double t0 = now_s();
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/emitters", root);
  kiln_status s = kiln_corpus_for_each_module(dir, "emitters", run_one, &rc);
  kiln_corpus_repeats_free(&rc.run);
  st->seconds = now_s() - t0;
  return s;
}

void kiln_corpus_run_stats_free(kiln_corpus_run_stats_t *st) {
  kiln_strbuf_free(&st->failures);
  kiln_strbuf_free(&st->skips);
}
