/* Shared by the expander pass tests (include after <cmocka.h> and pass_test_util.h):
 * compare an expanded module's results with the original's on the reference evaluator,
 * bit for bit or within a tolerance scaled by each leaf's largest magnitude, on given
 * arguments or on the corpus modules that hold the expanded op. */
#ifndef KILN_TESTS_EXPANDER_TEST_UTIL_H_
#define KILN_TESTS_EXPANDER_TEST_UTIL_H_

#include <math.h>
#include <stdbool.h>

#include <stdio.h>
#include <string.h>

#include "compiler/eval/eval.h"
#include "compiler/passes/pipeline.h"
#include "tools/common/corpus.h"
#include "tools/common/fake_args.h"
#include "tools/common/hlo_file.h"
#include "tools/common/run_report.h"

/* Relative tolerance per element type: f64/c128 1e-12, f32/c64 1e-5, f16 2e-3, else 1.6e-2. */
static inline double et_tolerance_of(kiln_elem_type_t t) {
  switch (t) {
    case KILN_F64: case KILN_C128: return 1e-12;
    case KILN_F32: case KILN_C64: return 1e-5;
    case KILN_F16: return 2e-3;
    default: return 1.6e-2;
  }
}

static inline void et_get(const kiln_literal_t *l, int64_t k, double *re, double *im) {
  *im = 0;
  if (kiln_elem_type_is_complex(l->shape->type)) kiln_literal_get_c128(l, k, re, im);
  else *re = kiln_literal_get_f64(l, k);
}

/* Worst |after - before| / (max|before| of the leaf * the type's tolerance) over every
 * real and imaginary part of every leaf: <= 1 is within tolerance. NaN must stay NaN and
 * infinities must match; -1 when they do not or the leaves differ in shape. */
static inline double et_worst_error(const kiln_literal_t *before, const kiln_literal_t *after) {
  double worst = 0;
  int n = kiln_run_report_num_leaves(before);
  if (n != kiln_run_report_num_leaves(after)) return -1;
  for (int i = 0; i < n; i++) {
    const kiln_literal_t *x = kiln_run_report_leaf(before, i), *y = kiln_run_report_leaf(after, i);
    if (x->num_elements != y->num_elements || x->shape->type != y->shape->type) return -1;
    double t = et_tolerance_of(x->shape->type), mag = 0;
    for (int64_t k = 0; k < x->num_elements; k++) {
      double re, im;
      et_get(x, k, &re, &im);
      if (isfinite(re) && fabs(re) > mag) mag = fabs(re);
      if (isfinite(im) && fabs(im) > mag) mag = fabs(im);
    }
    for (int64_t k = 0; k < x->num_elements; k++) {
      double a[2], b[2];
      et_get(x, k, &a[0], &a[1]);
      et_get(y, k, &b[0], &b[1]);
      for (int p = 0; p < 2; p++) {
        if (!isfinite(a[p]) || !isfinite(b[p])) {
          if (!(isnan(a[p]) && isnan(b[p])) && a[p] != b[p]) return -1;
          continue;
        }
        double e = fabs(a[p] - b[p]) / (mag > 0 ? mag : 1) / t;
        if (e > worst) worst = e;
      }
    }
  }
  return worst;
}

static inline int et_count(const kiln_hlo_module_t *m, const kiln_hlo_opcode_t *ops, int num_ops) {
  int n = 0;
  for (int i = 0; i < num_ops; i++) n += pt_count(m, ops[i]);
  return n;
}

/* Runs `list` (NULL: the whole pipeline) on `m` with the verifier on, and checks that no
 * instruction with an opcode of `gone` is left. */
static inline void et_run(kiln_hlo_module_t *m, const char *list, const kiln_hlo_opcode_t *gone, int num_gone) {
  kiln_pipeline_lift_parse_limit(m);
  kiln_pass_options_t o = {.verify = 1};
  kiln_status s = list ? kiln_pass_run_list(m, list, &o) : kiln_pipeline_run(m, &o);
  if (s) fail_msg("%s: %s", list ? list : "pipeline", kiln_status_message(s));
  if (et_count(m, gone, num_gone)) fail_msg("%s left an instruction it should expand", list ? list : "pipeline");
}

/* Evaluates `m` on `args`, runs `list` (as et_run), evaluates again and returns the worst
 * error (et_worst_error), printing both results when it is not within tolerance. With
 * `bitwise`, returns 0 for bit-identical results and -1 otherwise. */
static inline double et_error_after(kiln_hlo_module_t *m, kiln_literal_t **args, int n, const char *list,
                                    const kiln_hlo_opcode_t *gone, int num_gone, bool bitwise) {
  kiln_arena_t a0, a1;
  kiln_arena_init(&a0);
  kiln_arena_init(&a1);
  kiln_literal_t *before = pt_eval(m, args, n, &a0);
  et_run(m, list, gone, num_gone);
  kiln_literal_t *after = pt_eval(m, args, n, &a1);
  double e = bitwise ? (pt_literal_bits_equal(before, after) ? 0 : -1) : et_worst_error(before, after);
  if (e < 0 || e > 1) {
    kiln_strbuf_t b = {0};
    for (int i = 0; i < kiln_run_report_num_leaves(before); i++) {
      kiln_run_report_print_leaf(&b, "before", kiln_run_report_leaf(before, i), 8);
      kiln_run_report_print_leaf(&b, "after ", kiln_run_report_leaf(after, i), 8);
    }
    print_error("%s", kiln_strbuf_cstr(&b));
    kiln_strbuf_free(&b);
  }
  kiln_arena_destroy(&a1);
  kiln_arena_destroy(&a0);
  return e;
}

/* For every module of the corpus files (paths under the corpus folder) that holds one of
 * `ops` and is sampled (kiln_corpus_sampled): when it verifies and evaluates on fake
 * arguments, checks that its results survive `list` and, on a fresh parse, the whole
 * pipeline (within tolerance, or bit for bit). Modules that do not verify or evaluate are
 * printed and counted apart. Fails the test on a difference. */
static inline void et_check_corpus(const char *const *files, int num_files, const kiln_hlo_opcode_t *ops, int num_ops,
                                   const char *list, bool bitwise, int *found, int *compared, int *rejected) {
  *found = *compared = *rejected = 0;
  for (int fi = 0; fi < num_files; fi++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", kiln_corpus_dir(), files[fi]);
    for (int pipeline = 0; pipeline < 2; pipeline++) {
      kiln_hlo_file_t *f = NULL;
      kiln_status s = kiln_hlo_file_load(path, &f);
      if (s) fail_msg("%s: %s", path, kiln_status_message(s));
      for (int k = 0; k < f->num_modules; k++) {
        kiln_hlo_module_t *m = f->modules[k];
        if (!et_count(m, ops, num_ops) || !kiln_corpus_sampled(m->name)) continue;
        *found += !pipeline;
        kiln_arena_t aa, a0;
        kiln_arena_init(&aa);
        kiln_arena_init(&a0);
        kiln_literal_t **args = NULL, *probe = NULL;
        int n = 0;
        s = kiln_hlo_module_verify(m); /* some of XLA's test inputs are invalid on purpose */
        if (!s) s = kiln_fake_args_make(m, NULL, &aa, &args, &n);
        if (!s) s = kiln_eval_module(m, NULL, n, args, &a0, &probe);
        if (s) {
          if (!pipeline)
            printf("  %s module %d (%s): not valid or not evaluable: %s\n", files[fi], k, m->name, kiln_status_message(s));
          *rejected += !pipeline;
          kiln_status_free(s);
        } else {
          double e = et_error_after(m, args, n, pipeline ? NULL : list, ops, num_ops, bitwise);
          if (e < 0 || e > 1)
            fail_msg("%s module %d (%s): results differ after %s", files[fi], k, m->name, pipeline ? "the pipeline" : list);
          *compared += pipeline;
        }
        kiln_arena_destroy(&a0);
        kiln_arena_destroy(&aa);
      }
      kiln_hlo_file_free(f);
    }
  }
}

/* Each module text parses, and `pass` leaves it unchanged (reports no change, no error). */
static inline void et_expect_unchanged(const char *const *texts, int n, kiln_pass_fn pass) {
  for (int i = 0; i < n; i++) {
    kiln_hlo_module_t *m = NULL;
    kiln_status s = kiln_hlo_parse_module(texts[i], strlen(texts[i]), NULL, &m);
    if (s) fail_msg("parse: %s", kiln_status_message(s));
    bool changed = false;
    kiln_pass_options_t o = {.verify = 0};
    s = pass(m, &o, &changed);
    if (s) fail_msg("pass: %s", kiln_status_message(s));
    if (changed) fail_msg("module %d was changed", i);
    kiln_hlo_module_destroy(m);
  }
}

#endif /* KILN_TESTS_EXPANDER_TEST_UTIL_H_ */
