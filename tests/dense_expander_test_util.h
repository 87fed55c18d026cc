/* Shared by the scaled-dot, ragged-dot and fft expander tests (include after <cmocka.h>,
 * pass_test_util.h and expander_test_util.h): a module evaluated before and after a pass
 * list (or the whole pipeline) must agree within the tolerance of expander_test_util.h,
 * with `op` gone; a module compiled and run on the host device must match the evaluator
 * (tools/common/compare.h). */
#ifndef KILN_TESTS_DENSE_EXPANDER_TEST_UTIL_H_
#define KILN_TESTS_DENSE_EXPANDER_TEST_UTIL_H_

#include <stdio.h>
#include <string.h>

#include "compiler/passes/pipeline.h"
#include "runtime/host/host_device.h"
#include "tools/common/compare.h"
#include "tools/common/corpus.h"
#include "tools/common/device_run.h"
#include "tools/common/fake_args.h"
#include "tools/common/hlo_file.h"

/* Evaluates `m` on `args`, runs `list` (NULL: the whole pipeline), checks `op` is gone,
 * evaluates again: the worst error in units of the tolerance (-1: shapes/NaN differ). */
static inline double dx_error_after(kiln_hlo_module_t *m, kiln_literal_t **args, int n, const char *list,
                                    kiln_hlo_opcode_t op) {
  kiln_arena_t a0, a1;
  kiln_arena_init(&a0);
  kiln_arena_init(&a1);
  kiln_literal_t *before = pt_eval(m, args, n, &a0);
  kiln_pipeline_lift_parse_limit(m);
  kiln_pass_options_t o = {.verify = 1};
  kiln_status s = list ? kiln_pass_run_list(m, list, &o) : kiln_pipeline_run(m, &o);
  if (s) fail_msg("%s: %s", list ? list : "pipeline", kiln_status_message(s));
  assert_int_equal(pt_count(m, op), 0);
  kiln_literal_t *after = pt_eval(m, args, n, &a1);
  double e = et_worst_error(before, after);
  if (e < 0 || e > 1) {
    kiln_strbuf_t b = {0};
    kiln_run_report_print_leaf(&b, "before", before, 8);
    kiln_run_report_print_leaf(&b, "after ", after, 8);
    print_error("%s", kiln_strbuf_cstr(&b));
    kiln_strbuf_free(&b);
  }
  kiln_arena_destroy(&a1);
  kiln_arena_destroy(&a0);
  return e;
}

/* dx_error_after on generated inputs (kiln_fake_args_make) of `m`. */
static inline double dx_error_on_fake_args(kiln_hlo_module_t *m, const char *list, kiln_hlo_opcode_t op) {
  kiln_arena_t aa;
  kiln_arena_init(&aa);
  kiln_literal_t **args = NULL;
  int n = 0;
  kiln_status s = kiln_fake_args_make(m, NULL, &aa, &args, &n);
  if (s) fail_msg("fake args: %s", kiln_status_message(s));
  double e = dx_error_after(m, args, n, list, op);
  kiln_arena_destroy(&aa);
  return e;
}

/* Compiles `m` for a host device, runs it on `args` and compares the result with the
 * evaluator's; false (with the reason printed) when it fails or differs. */
static inline bool dx_host_run_matches_args(const kiln_hlo_module_t *m, kiln_literal_t **args, int n,
                                            const char *what) {
  kiln_device_t *dev = NULL;
  if (kiln_host_device_create(2, &dev)) fail_msg("no host device");
  kiln_arena_t arena;
  kiln_arena_init(&arena);
  kiln_literal_t *want = NULL, *got = NULL;
  bool ok = false;
  kiln_status s = kiln_eval_module(m, NULL, n, args, &arena, &want);
  kiln_device_run_options_t o;
  memset(&o, 0, sizeof o);
  o.device = dev;
  kiln_device_run_report_t rep;
  if (!s) s = kiln_device_run_module(m, args, n, &o, &arena, &got, &rep);
  if (s) {
    print_error("%s: %s\n", what, kiln_status_message(s));
    kiln_status_free(s);
  } else {
    kiln_compare_report_t cr;
    ok = kiln_compare_literals(want, got, NULL, &cr) && cr.elements > 0;
    if (!ok) print_error("%s: differs from the evaluator: %s\n", what, cr.first);
  }
  kiln_arena_destroy(&arena);
  kiln_device_destroy(dev);
  return ok;
}

/* dx_host_run_matches_args on generated inputs (kiln_fake_args_make). */
static inline bool dx_host_run_matches(const kiln_hlo_module_t *m, const char *what) {
  kiln_arena_t aa;
  kiln_arena_init(&aa);
  kiln_literal_t **args = NULL;
  int n = 0;
  kiln_status s = kiln_fake_args_make(m, NULL, &aa, &args, &n);
  if (s) fail_msg("fake args: %s", kiln_status_message(s));
  bool ok = dx_host_run_matches_args(m, args, n, what);
  kiln_arena_destroy(&aa);
  return ok;
}

/* `text` keeps its results through `list` (with `op` gone) and, when `host`, runs on the
 * host like the evaluator. Returns the worst error in units of the tolerance. */
static inline double dx_check_text(const char *text, const char *list, kiln_hlo_opcode_t op, bool host) {
  kiln_hlo_module_t *m = pt_parse(text);
  double e = dx_error_on_fake_args(m, list, op);
  kiln_hlo_module_destroy(m);
  if (e < 0 || e > 1) print_error("error %g of the tolerance for:\n%s\n", e, text);
  if (host) {
    m = pt_parse(text);
    if (!dx_host_run_matches(m, "hand case")) {
      print_error("%s\n", text);
      e = -1;
    }
    kiln_hlo_module_destroy(m);
  }
  return e;
}

/* Every module of the corpus file `rel` (under the corpus dir) holding `op`: the expansion
 * (`list`) keeps the evaluator's results, and, for the modules kiln_corpus_sampled picks
 * (all of them unless KILN_CORPUS_SAMPLE is set, as in the sanitizer run), so do the whole
 * pipeline and a run on the host. Returns the number of modules holding `op`. */
static inline int dx_check_corpus_file(const char *rel, kiln_hlo_opcode_t op, const char *list) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", kiln_corpus_dir(), rel);
  int found = 0, on_host = 0;
  for (int pass = 0; pass < 3; pass++) {
    kiln_hlo_file_t *f = NULL;
    kiln_status s = kiln_hlo_file_load(path, &f);
    if (s) fail_msg("%s: %s", path, kiln_status_message(s));
    for (int k = 0; k < f->num_modules; k++) {
      kiln_hlo_module_t *m = f->modules[k];
      if (!pt_count(m, op)) continue;
      char what[1200];
      snprintf(what, sizeof what, "%s#%d", rel, k);
      found += pass == 0;
      if (pass > 0 && !kiln_corpus_sampled(what)) continue;
      if (pass == 2) {
        if (!dx_host_run_matches(m, what)) fail_msg("%s: host run does not match the evaluator", what);
        on_host++;
        continue;
      }
      double e = dx_error_on_fake_args(m, pass ? NULL : list, op);
      if (e < 0 || e > 1) fail_msg("%s (%s): error %g of the tolerance", what, pass ? "pipeline" : list, e);
    }
    kiln_hlo_file_free(f);
  }
  printf("%s: %d modules with %s, %d through the pipeline and on the host\n", rel, found,
         kiln_hlo_opcode_name(op), on_host);
  return found;
}

#endif /* KILN_TESTS_DENSE_EXPANDER_TEST_UTIL_H_ */
