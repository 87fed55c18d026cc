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

/* Every participant of the host run against the evaluator's: false with `why` at the first
 * that differs. */
static bool spmd_compare_all(kiln_literal_t **want, kiln_literal_t **got, int n, char *why,
                             size_t nw) {
  for (int i = 0; i < n; i++) {
    kiln_compare_report_t cr;
    memset(&cr, 0, sizeof cr);
    if (!kiln_compare_literals(want[i], got[i], NULL, &cr)) {
      snprintf(why, nw, "compare: participant %d: %lld of %lld elements differ; first: %s", i,
               (long long)cr.mismatches, (long long)cr.elements, cr.first);
      return false;
    }
  }
  return true;
}

/* `r->why` = "<what>: <code>: <message>"; frees s. */
static kiln_corpus_spmd_outcome_t spmd_note(kiln_corpus_spmd_run_t *r, kiln_corpus_spmd_outcome_t o,
                                            const char *what, kiln_status s) {
  snprintf(r->why, sizeof r->why, "%s: %s: %.500s", what,
           kiln_status_code_name(kiln_status_code(s)), kiln_status_message(s));
  kiln_status_free(s);
  return o;
}

#define KILN_CORPUS_SPMD_MAX 64

kiln_corpus_spmd_outcome_t kiln_corpus_spmd_run_module(const kiln_hlo_module_t *m,
                                                       kiln_corpus_spmd_run_t *r) {
  r->why[0] = 0;
  r->replicas = r->partitions = 1;
  r->eval_s = r->host_s = 0;
  r->serialized_bytes = 0;
  int R = 1, P = 1;
  kiln_status s = kiln_eval_spmd_world_size(m, &R, &P);
  if (s) return spmd_note(r, KILN_CORPUS_SPMD_SKIPPED, "no world", s);
  r->replicas = R;
  r->partitions = P;
  int limit = r->max_participants > 0 && r->max_participants < KILN_CORPUS_SPMD_MAX
                  ? r->max_participants
                  : KILN_CORPUS_SPMD_MAX;
  if (R * P > limit) {
    snprintf(r->why, sizeof r->why, "%d x %d participants (over %d)", R, P, limit);
    return KILN_CORPUS_SPMD_SKIPPED;
  }
  char buf[160];
  if (kiln_corpus_eval_too_costly(m, r->max_cost / (R * P), buf, sizeof buf)) {
    snprintf(r->why, sizeof r->why, "on %d participants: %s", R * P, buf);
    return KILN_CORPUS_SPMD_SKIPPED;
  }
  kiln_corpus_spmd_outcome_t out = KILN_CORPUS_SPMD_RAN;
  kiln_arena_t args_arena, out_arena;
  kiln_arena_init(&args_arena);
  kiln_arena_init(&out_arena);
  int n = 0;
  bool differ = false; /* per-participant arguments (a ragged-all-to-all's exchange) */
  kiln_literal_t *const *per[KILN_CORPUS_SPMD_MAX];
  kiln_literal_t *want[KILN_CORPUS_SPMD_MAX], *got[KILN_CORPUS_SPMD_MAX];
  s = kiln_fake_args_make_world(m, NULL, R, P, &args_arena, per, &n, &differ);
  if (s) {
    out = spmd_note(r, KILN_CORPUS_SPMD_SKIPPED, "no fake arguments", s);
    goto done;
  }
  kiln_eval_spmd_options_t o;
  memset(&o, 0, sizeof o);
  o.num_replicas = R;
  o.num_partitions = P;
  o.timeout_ms = r->timeout_ms;
  o.base.rng_seed = 42;
  o.base.max_while_iterations = r->max_while_iterations;
  o.base.custom_call = r->custom_call;
  o.base.custom_call_user = r->custom_call_user;
  double t0 = now_s();
  s = kiln_eval_module_spmd(m, &o, n, per, &out_arena, want);
  r->eval_s = now_s() - t0;
  if (s) {
    out = spmd_note(r, KILN_CORPUS_SPMD_SKIPPED, "the evaluator cannot run it", s);
    goto done;
  }
  kiln_device_run_options_t ro;
  memset(&ro, 0, sizeof ro);
  ro.device = r->device;
  ro.rng_seed = 42;
  ro.max_while_iterations = r->max_while_iterations;
  ro.collective_timeout_ms = r->timeout_ms;
  if (differ) ro.participant_args = per;
  t0 = now_s();
  s = kiln_device_run_module_spmd(m, per[0], n, R, P, &ro, &out_arena, got, NULL);
  r->host_s = now_s() - t0;
  if (s) {
    out = spmd_note(r, KILN_CORPUS_SPMD_FAILED, "host devices", s);
    goto done;
  }
  if (!spmd_compare_all(want, got, R * P, r->why, sizeof r->why)) {
    out = KILN_CORPUS_SPMD_FAILED;
    goto done;
  }
  if (!r->round_trip) goto done;
  /* The executable serialized and read back (runtime/executable_serialize.h) runs on the
   * same devices to the same bits as the one compiled. */
  ro.serialize_round_trip = true;
  kiln_literal_t *again[KILN_CORPUS_SPMD_MAX];
  kiln_device_run_report_t rep;
  s = kiln_device_run_module_spmd(m, per[0], n, R, P, &ro, &out_arena, again, &rep);
  for (int i = 0; !s && i < R * P; i++)
    if (!kiln_literal_equal(got[i], again[i]))
      s = kiln_status_make(KILN_INTERNAL, "participant %d differs from the compiled executable", i);
  if (s) {
    out = spmd_note(r, KILN_CORPUS_SPMD_FAILED, "after serialize/deserialize", s);
    goto done;
  }
  r->serialized_bytes = rep.serialized_bytes;
done:
  kiln_arena_destroy(&out_arena);
  kiln_arena_destroy(&args_arena);
  return out;
}
