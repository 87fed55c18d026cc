/* Helpers for the pass unit tests (include after <cmocka.h>): parse a module from text,
 * run a pass list with verification on, look at the result, and check that the module
 * computes bit-identical results before and after on fake arguments. */
#ifndef KILN_TESTS_PASS_TEST_UTIL_H_
#define KILN_TESTS_PASS_TEST_UTIL_H_

#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/status.h"
#include "compiler/eval/eval.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/pass.h"
#include "tools/common/fake_args.h"
#include "tools/common/run_report.h"

static inline kiln_hlo_module_t *pt_parse(const char *text) {
  kiln_hlo_module_t *m = NULL;
  kiln_hlo_parse_options_t po = {0};
  kiln_status s = kiln_hlo_parse_module(text, strlen(text), &po, &m);
  if (s) fail_msg("parse: %s", kiln_status_message(s));
  s = kiln_hlo_module_verify(m);
  if (s) fail_msg("verify before: %s", kiln_status_message(s));
  return m;
}

/* Runs `list` with the verifier after every changed pass; fails the test on error. */
static inline void pt_run(kiln_hlo_module_t *m, const char *list) {
  kiln_pass_options_t o = {.verify = 1};
  kiln_status s = kiln_pass_run_list(m, list, &o);
  if (s) fail_msg("passes '%s': %s", list, kiln_status_message(s));
  s = kiln_hlo_module_verify(m);
  if (s) fail_msg("verify after '%s': %s", list, kiln_status_message(s));
}

/* The canonical text of computation `name` (entry when NULL); kiln_free it. */
static inline char *pt_comp_text(const kiln_hlo_module_t *m, const char *name) {
  const kiln_hlo_computation_t *c = name ? kiln_hlo_module_find_computation(m, name) : m->entry;
  if (!c) fail_msg("no computation '%s'", name ? name : "(entry)");
  kiln_strbuf_t b = {0};
  kiln_hlo_computation_print(&b, c);
  return kiln_strbuf_take(&b);
}

static inline int pt_count(const kiln_hlo_module_t *m, kiln_hlo_opcode_t op) {
  int n = 0;
  for (size_t c = 0; c < m->computations.len; c++)
    for (size_t i = 0; i < m->computations.data[c]->instructions.len; i++)
      n += m->computations.data[c]->instructions.data[i]->opcode == op;
  return n;
}

/* Asserts that the entry's text contains (or not) `needle`, printing it on failure. */
static inline void pt_expect_text(const kiln_hlo_module_t *m, const char *needle, bool present) {
  char *t = pt_comp_text(m, NULL);
  bool found = strstr(t, needle) != NULL;
  if (found != present) {
    print_error("%s\n", t);
    kiln_free(t);
    fail_msg("expected %s'%s' in the entry above", present ? "" : "no ", needle);
  }
  kiln_free(t);
}

static inline kiln_literal_t *pt_eval(const kiln_hlo_module_t *m, kiln_literal_t **args, int n,
                                      kiln_arena_t *out) {
  kiln_literal_t *r = NULL;
  kiln_eval_options_t eo = {0};
  eo.rng_seed = 7;
  kiln_status s = kiln_eval_module(m, &eo, n, args, out, &r);
  if (s) fail_msg("eval: %s", kiln_status_message(s));
  return r;
}

static inline bool pt_literal_bits_equal(const kiln_literal_t *a, const kiln_literal_t *b) {
  int n = kiln_run_report_num_leaves(a);
  if (n != kiln_run_report_num_leaves(b)) return false;
  for (int i = 0; i < n; i++) {
    const kiln_literal_t *x = kiln_run_report_leaf(a, i), *y = kiln_run_report_leaf(b, i);
    if (!kiln_shape_compatible(x->shape, y->shape) || x->num_elements != y->num_elements) return false;
    size_t bytes = (size_t)x->num_elements * kiln_elem_type_storage_bytes(x->shape->type);
    if (bytes && (!x->data || !y->data || memcmp(x->data, y->data, bytes) != 0)) return false;
  }
  return true;
}

/* Whether f32 leaves agree within `rel_tol` (relative, plus the same absolute amount). */
static inline bool pt_literal_f32_close(const kiln_literal_t *a, const kiln_literal_t *b,
                                        float rel_tol) {
  int n = kiln_run_report_num_leaves(a);
  if (n != kiln_run_report_num_leaves(b)) return false;
  for (int i = 0; i < n; i++) {
    const kiln_literal_t *x = kiln_run_report_leaf(a, i), *y = kiln_run_report_leaf(b, i);
    if (x->shape->type != KILN_F32 || y->shape->type != KILN_F32 ||
        x->num_elements != y->num_elements)
      return false;
    const float *fx = x->data, *fy = y->data;
    for (int64_t k = 0; k < x->num_elements; k++) {
      float d = fx[k] - fy[k], ax = fx[k] < 0 ? -fx[k] : fx[k];
      if ((d < 0 ? -d : d) > rel_tol * (1.0f + ax)) return false;
    }
  }
  return true;
}

/* Parses `text`, evaluates it, runs `list`, evaluates again and asserts bit-identical
 * results (rel_tol == 0) or f32 results within `rel_tol` (a rewrite that reorders sums).
 * Returns the rewritten module (caller destroys). */
static inline kiln_hlo_module_t *pt_run_close_results(const char *text, const char *list,
                                                      float rel_tol) {
  kiln_hlo_module_t *m = pt_parse(text);
  kiln_arena_t args_arena, a0, a1;
  kiln_arena_init(&args_arena);
  kiln_arena_init(&a0);
  kiln_arena_init(&a1);
  kiln_literal_t **args = NULL;
  int n = 0;
  kiln_status s = kiln_fake_args_make(m, NULL, &args_arena, &args, &n);
  if (s) fail_msg("fake args: %s", kiln_status_message(s));
  kiln_literal_t *before = pt_eval(m, args, n, &a0);
  pt_run(m, list);
  kiln_literal_t *after = pt_eval(m, args, n, &a1);
  if (rel_tol == 0 ? !pt_literal_bits_equal(before, after)
                   : !pt_literal_f32_close(before, after, rel_tol)) {
    char *t = pt_comp_text(m, NULL);
    print_error("after '%s':\n%s\n", list, t);
    kiln_free(t);
    fail_msg("results differ after '%s'", list);
  }
  kiln_arena_destroy(&a1);
  kiln_arena_destroy(&a0);
  kiln_arena_destroy(&args_arena);
  return m;
}

static inline kiln_hlo_module_t *pt_run_same_results(const char *text, const char *list) {
  return pt_run_close_results(text, list, 0);
}

#endif /* KILN_TESTS_PASS_TEST_UTIL_H_ */
